//! One file's hash computed from the bytes on their way to the destination ([`FileHash`]):
//! in order, whatever order the bytes were written in.
//!
//! A file copied front to back feeds its buffers straight to the hasher, and one read whole
//! takes the one-shot function. Bytes that arrive ahead of the hashed front (a copier that
//! writes out of order; a file found longer than its first read) are noted, and the worker
//! that brings the front up to them reads them back from the source, where the copy has just
//! left them in the page cache. Holes are hashed as the zeros they read as. (cp splits a big
//! file it hashes into chunks as any other: measured against front to back, `engine/file.rs`.)

use std::collections::BTreeMap;
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Mutex;

use crate::digest::{Algo, Hasher};
use crate::sys;

/// The hash of one file being copied; shared by the workers copying its chunks.
#[derive(Debug)]
pub(crate) struct FileHash {
    state: Mutex<State>,
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
        }
    }

    /// `bytes` are the whole file, read from its start in one go (nothing fed before): hashed
    /// at once by the one-shot function, with no streaming state (most files of a tree).
    pub fn all(&self, src: BorrowedFd<'_>, bytes: &[u8]) {
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
            let read = read_back(src, (start, end), &mut hasher);
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
                let read = read_back(src, (start, end), &mut hasher);
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

/// Hashes `[start, end)` of `src` into `hasher`, read back (from the page cache the copy has
/// just filled) through this thread's buffer.
fn read_back(src: BorrowedFd<'_>, (start, end): (u64, u64), hasher: &mut Hasher) -> io::Result<()> {
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
            hasher.update(&buf[..n]);
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
}
