//! One file's hash computed from the bytes on their way to the destination ([`FileHash`]).
//!
//! Sequential hashes (xxh128, sha256, ...) take the bytes in order, whatever order they were
//! written in. A file copied front to back feeds its buffers straight to the hasher, and one
//! read whole takes the one-shot function. Bytes that arrive ahead of the hashed front (a copier
//! that writes out of order; a file found longer than its first read) are noted, and the worker
//! that brings the front up to them reads them back from the source, where the copy has just
//! left them in the page cache.
//!
//! BLAKE3 is a tree: a file copied in chunks ([`FileHash::split`]) has each chunk hashed as a
//! subtree of its own by the worker that copies it, with no order and nothing read back, and
//! the subtrees joined when the file is finished ([`crate::digest::Blake3Tree`]).
//!
//! Holes are hashed as the zeros they read as.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Mutex;

use crate::digest::{Algo, Blake3Tree, ChainingValue, Hasher};
use crate::sys;

/// The hash of one file being copied; shared by the workers copying its chunks.
#[derive(Debug)]
pub(crate) struct FileHash {
    state: Mutex<State>,
    /// A BLAKE3 hash of a file copied in chunks: one subtree per chunk ([`FileHash::split`]).
    /// `state` is then unused.
    tree: Option<Leaves>,
}

/// The leaves of a [`Blake3Tree`], each fed by the one worker copying its chunk (a lock each,
/// never contended as the copiers feed).
#[derive(Debug)]
struct Leaves {
    shape: Blake3Tree,
    leaves: Box<[Mutex<Leaf>]>,
}

/// One leaf of a BLAKE3 file hash.
#[derive(Debug, Default)]
struct Leaf {
    /// Made on the leaf's first bytes, dropped when its last are in.
    hasher: Option<Box<blake3::Hasher>>,
    /// Bytes of the leaf hashed so far.
    fed: u64,
    /// Its chaining value, once every byte is in.
    cv: Option<ChainingValue>,
    /// Bytes came out of order (never, as the copiers feed): the leaf is read back at the end.
    redo: bool,
}

#[derive(Debug)]
struct State {
    algo: Algo,
    /// Made on the first bytes: a file hashed whole never needs one.
    hasher: Option<Hasher>,
    /// The digest of a file hashed whole at once ([`FileHash::whole`]).
    done: Option<String>,
    /// Bytes `[0, front)` are hashed.
    front: u64,
    /// Ranges copied past the front, not hashed yet: start → (end, a hole).
    ahead: BTreeMap<u64, (u64, bool)>,
    /// Reading a range back failed: the hash cannot be had.
    failed: Option<io::Error>,
    /// A worker is reading a range back, the lock let go and the hasher with it: the others
    /// only note what they copy, and it takes up what became contiguous when it is done.
    busy: bool,
}

/// Zeros to hash for holes, a block at a time.
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

impl FileHash {
    /// A hash of nothing yet.
    pub fn new(algo: Algo) -> Self {
        FileHash {
            state: Mutex::new(State {
                algo,
                hasher: None,
                done: None,
                front: 0,
                ahead: BTreeMap::new(),
                failed: None,
                busy: false,
            }),
            tree: None,
        }
    }

    /// The chunk length to cut a file of `size` bytes into, asked to be `chunk`: for BLAKE3 a
    /// power of two of at least 1 KiB (rounded up), and each chunk is then hashed as a subtree
    /// of its own by the worker that copies it. The chunks must start at multiples of the
    /// length returned, and reach the file's end. Before any bytes are fed.
    pub fn split(&mut self, size: u64, chunk: u64) -> u64 {
        let st = self.state.get_mut().expect("file hash");
        if st.algo != Algo::Blake3 || st.front != 0 || st.hasher.is_some() || st.done.is_some() {
            return chunk;
        }
        let leaf_len = Blake3Tree::leaf_len_for(chunk);
        let shape = Blake3Tree::new(size, leaf_len);
        // One leaf is the whole file: hashed as such, in order.
        if shape.leaves() >= 2 {
            let leaves = (0..shape.leaves()).map(|_| Mutex::default()).collect();
            self.tree = Some(Leaves { shape, leaves });
        }
        leaf_len
    }

    /// `bytes` are the whole file, read from its start in one go (nothing fed before): hashed
    /// at once by the one-shot function, with no streaming state (most files of a tree).
    pub fn all(&self, src: BorrowedFd<'_>, bytes: &[u8]) {
        if let Some(tree) = &self.tree {
            return tree.data(0, bytes);
        }
        let mut st = self.state.lock().expect("file hash");
        if st.front != 0 || st.hasher.is_some() {
            drop(st);
            return self.data(src, 0, bytes);
        }
        st.done = Some(st.algo.hex_of(bytes));
        st.front = bytes.len() as u64;
    }

    /// `bytes`, read from `src` at `at`, were written to the destination.
    pub fn data(&self, src: BorrowedFd<'_>, at: u64, bytes: &[u8]) {
        if let Some(tree) = &self.tree {
            return tree.data(at, bytes);
        }
        let mut st = self.state.lock().expect("file hash");
        if st.done.is_some() {
            // More than the whole: never, as the copiers feed. Hashed again in order.
            st.done = None;
            let whole = st.front;
            st.ahead.insert(0, (whole, false));
            st.front = 0;
        }
        if at == st.front && !st.busy {
            st.hasher().update(bytes);
            st.front += bytes.len() as u64;
            self.catch_up(st, src);
        } else if at >= st.front {
            st.note(at, at + bytes.len() as u64, false);
        }
    }

    /// `[at, end)` of the source is a hole, left unwritten.
    pub fn hole(&self, src: BorrowedFd<'_>, at: u64, end: u64) {
        if end <= at {
            return;
        }
        if let Some(tree) = &self.tree {
            return tree.zeros(at, end);
        }
        let mut st = self.state.lock().expect("file hash");
        if at == st.front && !st.busy {
            st.zeros(end);
            self.catch_up(st, src);
        } else if at >= st.front {
            st.note(at, end, true);
        }
    }

    /// Hashes the ranges noted ahead that now start at the front: holes as zeros, data read
    /// back from `src` with the lock let go (the other workers go on copying and noting).
    fn catch_up<'s>(&'s self, mut st: std::sync::MutexGuard<'s, State>, src: BorrowedFd<'_>) {
        loop {
            let front = st.front;
            if st.failed.is_some()
                || st.busy
                || st.ahead.first_key_value().map(|(k, _)| *k) != Some(front)
            {
                return;
            }
            let (end, hole) = st.ahead.pop_first().expect("the first range").1;
            if hole {
                st.zeros(end);
                continue;
            }
            st.busy = true;
            let mut hasher = st.hasher.take().unwrap_or_else(|| st.algo.hasher());
            let start = st.front;
            drop(st);
            let read = read_back(src, (start, end), |b| hasher.update(b));
            st = self.state.lock().expect("file hash");
            st.hasher = Some(hasher);
            st.busy = false;
            match read {
                Ok(()) => st.front = end,
                Err(e) => st.failed = Some(e),
            }
        }
    }

    /// The hex digest of the first `size` bytes, once every byte of them was copied: ranges
    /// still ahead are read back from `src`, and anything never reported (a trailing hole) is
    /// zeros.
    pub fn finish(self, src: BorrowedFd<'_>, size: u64) -> io::Result<String> {
        if let Some(tree) = self.tree {
            return tree.finish(src, size);
        }
        let mut st = self.state.into_inner().expect("file hash");
        if let Some(hex) = st.done.take() {
            if st.front == size {
                return Ok(hex);
            }
            // Hashed whole, then told of more: hashed again in order, read back.
            let whole = st.front;
            st.ahead.insert(0, (whole, false));
            st.front = 0;
        }
        // Every range is in: a gap before the next one is a hole.
        while let Some((&start, _)) = st.ahead.first_key_value() {
            if start < st.front {
                // Overlaps bytes already hashed (never, as the copiers write).
                st.ahead.pop_first();
                continue;
            }
            if start > st.front {
                st.zeros(start);
            }
            let (end, hole) = st.ahead.pop_first().expect("the first range").1;
            if hole {
                st.zeros(end);
            } else {
                let start = st.front;
                let mut hasher = st.hasher.take().unwrap_or_else(|| st.algo.hasher());
                let read = read_back(src, (start, end), |b| hasher.update(b));
                st.hasher = Some(hasher);
                match read {
                    Ok(()) => st.front = end,
                    Err(e) => {
                        st.failed = Some(e);
                        break;
                    }
                }
            }
        }
        if let Some(e) = st.failed.take() {
            return Err(e);
        }
        if st.front < size {
            st.zeros(size);
        }
        Ok(st.digest())
    }
}

impl FileHash {
    /// The hex digest and length of a file fed front to back (sync's copies): nothing is read
    /// back, and nothing past the bytes fed is assumed.
    pub fn finish_in_order(self) -> io::Result<(String, u64)> {
        if self.tree.is_some() {
            return Err(io::Error::other("a file hashed in chunks has no front"));
        }
        let mut st = self.state.into_inner().expect("file hash");
        if let Some(hex) = st.done.take() {
            return Ok((hex, st.front));
        }
        if !st.ahead.is_empty() {
            return Err(io::Error::other("bytes were hashed out of order"));
        }
        let front = st.front;
        Ok((st.digest(), front))
    }
}

impl Leaves {
    /// `bytes` of the file at `at`, given to the leaves they fall in.
    fn data(&self, mut at: u64, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let Some((i, n)) = self.span(at, bytes.len() as u64) else {
                // Past the size the file was split at: the finish sees the size differ.
                return;
            };
            self.leaf(i).feed(&self.shape, i, at, &bytes[..n as usize]);
            at += n;
            bytes = &bytes[n as usize..];
        }
    }

    /// `[at, end)` is a hole: zeros given to the leaves it falls in.
    fn zeros(&self, mut at: u64, end: u64) {
        while at < end {
            let Some((i, n)) = self.span(at, (end - at).min(ZEROS.len() as u64)) else {
                return;
            };
            self.leaf(i).feed(&self.shape, i, at, &ZEROS[..n as usize]);
            at += n;
        }
    }

    /// The leaf byte `at` falls in, and how many of `len` bytes from it do.
    fn span(&self, at: u64, len: u64) -> Option<(u64, u64)> {
        let i = self.shape.leaf_of(at);
        (i < self.shape.leaves()).then(|| (i, len.min(self.shape.leaf(i).1 - at)))
    }

    fn leaf(&self, i: u64) -> std::sync::MutexGuard<'_, Leaf> {
        self.leaves[i as usize].lock().expect("file hash leaf")
    }

    /// The hex digest of the first `size` bytes: every leaf's chaining value joined, a leaf not
    /// fed all its bytes read back (from the front it reached, or whole if it was fed out of
    /// order). A file found another size than it was split at is read back whole.
    fn finish(self, src: BorrowedFd<'_>, size: u64) -> io::Result<String> {
        let shape = self.shape;
        if size != shape.size() {
            let mut hasher = Algo::Blake3.hasher();
            read_back(src, (0, size), |b| hasher.update(b))?;
            return Ok(hasher.finish_hex());
        }
        let mut cvs = Vec::with_capacity(self.leaves.len());
        for (i, leaf) in (0..).zip(self.leaves.into_vec()) {
            let mut leaf = leaf.into_inner().expect("file hash leaf");
            if let (Some(cv), false) = (leaf.cv, leaf.redo) {
                cvs.push(cv);
                continue;
            }
            let (start, end) = shape.leaf(i);
            if leaf.redo || leaf.hasher.is_none() {
                leaf.hasher = Some(Box::new(shape.leaf_hasher(i)));
                leaf.fed = 0;
            }
            let hasher = leaf.hasher.as_mut().expect("a leaf hasher");
            read_back(src, (start + leaf.fed, end), |b| {
                hasher.update(b);
            })?;
            cvs.push(Blake3Tree::leaf_cv(hasher));
        }
        Ok(shape.root_hex(&cvs))
    }
}

impl Leaf {
    /// `bytes` at `at`, all inside leaf `i`.
    fn feed(&mut self, shape: &Blake3Tree, i: u64, at: u64, bytes: &[u8]) {
        let (start, end) = shape.leaf(i);
        if self.redo {
            return;
        }
        if self.cv.is_some() || at != start + self.fed {
            // Out of order within the leaf: read back whole at the end.
            self.redo = true;
            self.hasher = None;
            return;
        }
        let hasher = self
            .hasher
            .get_or_insert_with(|| Box::new(shape.leaf_hasher(i)));
        hasher.update(bytes);
        self.fed += bytes.len() as u64;
        if start + self.fed == end {
            self.cv = Some(Blake3Tree::leaf_cv(hasher));
            self.hasher = None;
        }
    }
}

impl State {
    fn hasher(&mut self) -> &mut Hasher {
        let algo = self.algo;
        self.hasher.get_or_insert_with(|| algo.hasher())
    }

    /// The digest of what was hashed (of nothing, if nothing was).
    fn digest(&mut self) -> String {
        let algo = self.algo;
        self.hasher
            .take()
            .unwrap_or_else(|| algo.hasher())
            .finish_hex()
    }

    /// Notes `[start, end)` as copied ahead of the front, merged with its neighbour.
    fn note(&mut self, start: u64, end: u64, hole: bool) {
        if let Some((_, (prev_end, prev_hole))) = self.ahead.range_mut(..start).next_back() {
            if *prev_end == start && *prev_hole == hole {
                *prev_end = end;
                return;
            }
        }
        self.ahead.insert(start, (end, hole));
    }

    fn zeros(&mut self, end: u64) {
        while self.front < end {
            let n = (end - self.front).min(ZEROS.len() as u64) as usize;
            self.hasher().update(&ZEROS[..n]);
            self.front += n as u64;
        }
    }
}

/// Feeds `[start, end)` of `src` to `hash`, read back (from the page cache the copy has just
/// filled) through this thread's buffer.
fn read_back(
    src: BorrowedFd<'_>,
    (start, end): (u64, u64),
    mut hash: impl FnMut(&[u8]),
) -> io::Result<()> {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with_borrow_mut(|buf| {
        if buf.is_empty() {
            *buf = sys::try_zeroed(1 << 20)?;
        }
        let mut at = start;
        while at < end {
            let want = (end - at).min(buf.len() as u64) as usize;
            let n = sys::pread(src, &mut buf[..want], at)?;
            if n == 0 {
                return Err(io::Error::other("the file shrank while it was hashed"));
            }
            hash(&buf[..n]);
            at += n as u64;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    fn bytes(n: usize) -> Vec<u8> {
        (0..n as u64).map(|i| (i * 7919 % 251) as u8).collect()
    }

    #[test]
    fn out_of_order_blocks_and_holes_hash_as_the_file_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        // Data, a hole of zeros, data.
        let mut content = bytes(300_000);
        content[100_000..200_000].fill(0);
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&content)
            .unwrap();
        let src = std::fs::File::open(&path).unwrap();
        for algo in Algo::ALL {
            let want = algo.hex_of(&content);
            let h = FileHash::new(*algo);
            let fd = src.as_fd();
            // The last block first, then the hole, then the first block.
            h.data(fd, 250_000, &content[250_000..]);
            h.data(fd, 200_000, &content[200_000..250_000]);
            h.hole(fd, 100_000, 200_000);
            h.data(fd, 0, &content[..100_000]);
            assert_eq!(h.finish(fd, 300_000).unwrap(), want, "{algo}");
            // In order, with the hole and a trailing part never reported.
            let h = FileHash::new(*algo);
            h.data(fd, 0, &content[..100_000]);
            h.data(fd, 200_000, &content[200_000..250_000]);
            let mut tail_zeros = content.clone();
            tail_zeros[250_000..].fill(0);
            assert_eq!(
                h.finish(fd, 300_000).unwrap(),
                algo.hex_of(&tail_zeros),
                "{algo}"
            );
            // Whole at once, and a whole that turns out to have more after it (read back).
            let h = FileHash::new(*algo);
            h.all(fd, &content[..1000]);
            assert_eq!(h.finish(fd, 1000).unwrap(), algo.hex_of(&content[..1000]));
            let h = FileHash::new(*algo);
            h.all(fd, &content[..1000]);
            h.data(fd, 1000, &content[1000..]);
            assert_eq!(h.finish(fd, 300_000).unwrap(), want, "{algo}");
            let h = FileHash::new(*algo);
            h.all(fd, &content[..5]);
            assert_eq!(
                h.finish_in_order().unwrap(),
                (algo.hex_of(&content[..5]), 5)
            );
        }
    }

    /// A file of `content` on disk, `[hole.0, hole.1)` of it a real hole (zeros in `content`).
    fn file_with_hole(
        dir: &std::path::Path,
        content: &[u8],
        hole: (usize, usize),
    ) -> std::fs::File {
        use std::os::unix::fs::FileExt;
        let path = dir.join(format!("f{}", content.len()));
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(content.len() as u64).unwrap();
        f.write_all_at(&content[..hole.0], 0).unwrap();
        f.write_all_at(&content[hole.1..], hole.1 as u64).unwrap();
        std::fs::File::open(&path).unwrap()
    }

    /// BLAKE3 of a file split into chunks, each chunk fed by a worker of its own (threads, last
    /// chunk first), in pieces, its hole as zeros: the hash of the whole, for sizes around a
    /// chunk and chunk counts that are not powers of two.
    #[test]
    fn blake3_chunks_hashed_apart_join_into_the_file_hash() {
        let dir = tempfile::tempdir().unwrap();
        let c = 4096usize;
        let sizes = [
            0,
            1,
            1023,
            1024,
            1025,
            c - 1,
            c,
            c + 1,
            2 * c,
            3 * c,
            7 * c + 5,
            12 * c - 1,
            33 * c + 1000,
        ];
        for size in sizes {
            let mut content = bytes(size);
            // A hole across a chunk boundary (and a whole chunk of zeros where there are many).
            let hole = (size / 3, (size / 3 + 2 * c + 100).min(size));
            content[hole.0..hole.1].fill(0);
            let src = file_with_hole(dir.path(), &content, hole);
            let mut h = FileHash::new(Algo::Blake3);
            // Asked for an uneven chunk: rounded up to a power of two of whole 1 KiB chunks.
            let leaf = h.split(size as u64, c as u64 - 100) as usize;
            assert_eq!(leaf, c);
            let starts: Vec<usize> = (0..size).step_by(leaf).collect();
            std::thread::scope(|s| {
                for &start in starts.iter().rev() {
                    let (h, content, src) = (&h, &content, &src);
                    s.spawn(move || {
                        let end = (start + leaf).min(size);
                        let mut at = start;
                        while at < end {
                            let (hole_from, hole_to) = (hole.0.max(at), hole.1.min(end));
                            if hole_from == at && hole_to > at {
                                h.hole(src.as_fd(), at as u64, hole_to as u64);
                                at = hole_to;
                                continue;
                            }
                            let to = if hole_from > at {
                                hole_from.min(end)
                            } else {
                                end
                            };
                            let to = to.min(at + 1500);
                            h.data(src.as_fd(), at as u64, &content[at..to]);
                            at = to;
                        }
                    });
                }
            });
            let want = blake3::hash(&content).to_hex().to_string();
            assert_eq!(
                h.finish(src.as_fd(), size as u64).unwrap(),
                want,
                "{size} bytes"
            );
        }
    }

    /// Chunks not fed whole (a trailing hole never reported), fed out of order, or a file that
    /// turns out another size: read back, and still the file's hash.
    #[test]
    fn blake3_chunks_fed_partly_or_out_of_order_are_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let c = 2048usize;
        let size = 5 * c + 77;
        let content = bytes(size);
        let src = file_with_hole(dir.path(), &content, (0, 0));
        let fd = src.as_fd();
        let want = blake3::hash(&content).to_hex().to_string();
        let mut h = FileHash::new(Algo::Blake3);
        assert_eq!(h.split(size as u64, c as u64), c as u64);
        h.data(fd, 0, &content[..c]);
        // Chunk 1: half of it only.
        h.data(fd, c as u64, &content[c..c + c / 2]);
        // Chunk 2: its second half first.
        h.data(fd, (2 * c + c / 2) as u64, &content[2 * c + c / 2..3 * c]);
        h.data(fd, 2 * c as u64, &content[2 * c..2 * c + c / 2]);
        // Chunk 3: twice.
        h.data(fd, 3 * c as u64, &content[3 * c..4 * c]);
        h.data(fd, 3 * c as u64, &content[3 * c..4 * c]);
        // Chunk 4 and 5 never.
        assert_eq!(h.finish(fd, size as u64).unwrap(), want);
        // Split at one size, finished at another: read back whole.
        let mut h = FileHash::new(Algo::Blake3);
        h.split(size as u64 + 5000, c as u64);
        h.data(fd, 0, &content[..c]);
        assert_eq!(h.finish(fd, size as u64).unwrap(), want);
        // Sequential hashes keep their chunk length and their ordered path.
        let mut h = FileHash::new(Algo::Xxh128);
        assert_eq!(h.split(size as u64, 3000), 3000);
        h.data(fd, 3000, &content[3000..]);
        h.data(fd, 0, &content[..3000]);
        assert_eq!(
            h.finish(fd, size as u64).unwrap(),
            Algo::Xxh128.hex_of(&content)
        );
    }
}
