//! One read for several destinations (`cp --tee`): the runs of a tee group ([`SharedReads`])
//! copy the same sources, each into its own destination, and every byte range of a source is
//! read once. The first member to need a piece of a file reads it into a buffer that the hub
//! keeps; every other member writes its copy from that buffer instead of reading the source
//! again, and the buffer goes back to the pool once each member has taken it.
//!
//! Members never wait for one another to arrive: only for a read already under way, which
//! always ends (with its bytes or an error). A piece nobody else asks for (a member that
//! skipped the file, or stopped on an error of its own) is let go when its last member leaves
//! the group, or earlier when the pieces held pass the group's memory cap, oldest first; a
//! member that comes for a piece let go reads it itself. Either way each member's copy holds
//! bytes the source held: a source that changes while it is copied is read once, so every
//! destination gets the same bytes.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex, Weak};

use crate::sys;

/// Members a group can have: one bit each in a `u64`.
pub(crate) const MAX_MEMBERS: usize = 64;

/// Bytes of pieces a group holds for members that have not taken them yet, at most.
const HELD_CAP: u64 = 256 << 20;

/// Spare buffers kept for the next reads.
const SPARE_BUFFERS: usize = 32;

/// Pieces held in pipes for members that have not taken them yet, at most (two descriptors
/// each while filled, one after).
const HELD_PIPES: usize = 64;

/// Pieces shorter than this go through a buffer even where they could be spliced: a pipe per
/// piece costs more than copying a small piece once more.
pub(crate) const SPLICE_FROM: usize = 64 << 10;

/// A piece spliced through a pipe: what one pipe holds (1 MiB, or less where the system
/// allows less), the same for every member.
pub(crate) fn pipe_piece() -> usize {
    static PIECE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PIECE.get_or_init(|| match new_pipe() {
        Ok(pipe) => rustix::pipe::fcntl_getpipe_size(&pipe.w).unwrap_or(64 << 10),
        Err(_) => 64 << 10,
    })
}

/// A pipe of [`pipe_piece`]'s size (as large as the system lets it be).
fn new_pipe() -> io::Result<OwnPipe> {
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let _ = rustix::pipe::fcntl_setpipe_size(&w, 1 << 20);
    Ok(OwnPipe { r, w })
}

/// A member's own pipe, which a piece's pipe is duplicated into and its destination filled
/// from (empty between pieces).
#[derive(Debug)]
pub(crate) struct OwnPipe {
    r: OwnedFd,
    w: OwnedFd,
}

/// Which side of a piece's copy failed.
pub(crate) enum Failed {
    Read(io::Error),
    Write(io::Error),
}

/// A piece of a source: (device, inode, offset).
type Key = (u64, u64, u64);

/// The runs of one tee group and the pieces of their sources read so far.
pub(crate) struct SharedReads {
    /// A bit for each member.
    all: u64,
    state: Mutex<State>,
    read: Condvar,
}

struct State {
    pieces: HashMap<Key, Piece>,
    /// Pieces in the order they were read, for letting the oldest go (stale keys are skipped).
    order: VecDeque<(Key, u64)>,
    /// Bytes the pieces hold in buffers.
    held: u64,
    /// Pieces held in pipes.
    pipes: usize,
    /// Members waiting for a read under way.
    waiting: usize,
    next_seq: u64,
    /// Members that have left: they take nothing more.
    gone: u64,
    spare: Vec<Vec<u8>>,
}

struct Piece {
    seq: u64,
    /// None while its reader reads it.
    bytes: Option<Arc<Bytes>>,
    /// Members that have it.
    taken: u64,
}

/// A buffer and the bytes read into it, given back to the group's spares when the last holder
/// lets it go.
pub(crate) struct Bytes {
    buf: Vec<u8>,
    len: usize,
    /// Where the piece was spliced into instead of `buf`: a pipe holding the source's pages
    /// (its read end), which every member duplicates (tee(2)) into a pipe of its own and
    /// splices into its destination, so the bytes are copied once per destination only.
    pipe: Option<OwnedFd>,
    home: Weak<SharedReads>,
}

impl Bytes {
    /// The bytes read.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Bytes {
    fn drop(&mut self) {
        if let Some(home) = self.home.upgrade() {
            let mut st = home.lock();
            if st.spare.len() < SPARE_BUFFERS {
                st.spare.push(std::mem::take(&mut self.buf));
            }
        }
    }
}

/// One run's place in a group: what its data path reads through.
#[derive(Clone)]
pub(crate) struct Member {
    group: Arc<SharedReads>,
    bit: u64,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Member({:#x})", self.bit)
    }
}

impl SharedReads {
    /// A group of `members` runs (at most [`MAX_MEMBERS`]), and each run's place in it.
    pub(crate) fn group(members: usize) -> Vec<Member> {
        assert!((1..=MAX_MEMBERS).contains(&members), "1 to 64 members");
        let all = if members == 64 {
            u64::MAX
        } else {
            (1u64 << members) - 1
        };
        let group = Arc::new(SharedReads {
            all,
            state: Mutex::new(State {
                pieces: HashMap::new(),
                order: VecDeque::new(),
                held: 0,
                pipes: 0,
                waiting: 0,
                next_seq: 0,
                gone: 0,
                spare: Vec::new(),
            }),
            read: Condvar::new(),
        });
        (0..members)
            .map(|i| Member {
                group: group.clone(),
                bit: 1 << i,
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    /// Lets a piece go. Its buffer is returned, to be dropped once the lock is let go (its
    /// drop takes the lock to give the buffer back).
    #[must_use]
    fn remove(&mut self, key: &Key) -> Option<Arc<Bytes>> {
        let bytes = self.pieces.remove(key)?.bytes?;
        self.unhold(&bytes);
        Some(bytes)
    }

    fn hold(&mut self, bytes: &Bytes) {
        match bytes.pipe {
            Some(_) => self.pipes += 1,
            None => self.held += bytes.buf.capacity() as u64,
        }
    }

    fn unhold(&mut self, bytes: &Bytes) {
        match bytes.pipe {
            Some(_) => self.pipes -= 1,
            None => self.held -= bytes.buf.capacity() as u64,
        }
    }

    /// Lets the oldest pieces go until the group holds no more than its cap.
    #[must_use]
    fn trim(&mut self) -> Vec<Arc<Bytes>> {
        let mut freed = Vec::new();
        while let Some(&(key, seq)) = self.order.front() {
            let live = self
                .pieces
                .get(&key)
                .is_some_and(|p| p.seq == seq && p.bytes.is_some());
            if live && self.held <= HELD_CAP && self.pipes <= HELD_PIPES {
                break;
            }
            self.order.pop_front();
            if live {
                freed.extend(self.remove(&key));
            }
        }
        freed
    }
}

impl Member {
    /// The piece of the file `id` (device, inode) at `at` that another member made, or one made
    /// now by `make` (given a spare buffer) and kept for the others. None: this member took
    /// this piece already (it copies the file a second time, under another name), and must
    /// read for itself.
    fn take(
        &self,
        (id, at): ((u64, u64), u64),
        make: impl FnOnce(Option<Vec<u8>>) -> io::Result<Bytes>,
    ) -> io::Result<Option<Arc<Bytes>>> {
        let group = &self.group;
        let key = (id.0, id.1, at);
        let mut st = group.lock();
        while let Some(piece) = st.pieces.get_mut(&key) {
            if piece.taken & self.bit != 0 {
                return Ok(None);
            }
            let Some(bytes) = piece.bytes.clone() else {
                st.waiting += 1;
                st = group.read.wait(st).unwrap_or_else(|e| e.into_inner());
                st.waiting -= 1;
                continue;
            };
            piece.taken |= self.bit;
            let freed = if (piece.taken | st.gone) & group.all == group.all {
                st.remove(&key)
            } else {
                None
            };
            drop(st);
            drop(freed);
            return Ok(Some(bytes));
        }
        let seq = st.next_seq;
        st.next_seq += 1;
        st.pieces.insert(
            key,
            Piece {
                seq,
                bytes: None,
                taken: self.bit,
            },
        );
        let buf = st.spare.pop();
        drop(st);
        let made = make(buf);
        let mut st = group.lock();
        let bytes = match made {
            Ok(bytes) => Arc::new(bytes),
            Err(e) => {
                // The others read it themselves, and meet the error there if it is the file's.
                let _reading = st.remove(&key);
                if st.waiting > 0 {
                    group.read.notify_all();
                }
                return Err(e);
            }
        };
        let mut freed = Vec::new();
        if (self.bit | st.gone) & group.all == group.all {
            freed.extend(st.remove(&key));
        } else if let Some(piece) = st.pieces.get_mut(&key) {
            piece.bytes = Some(bytes.clone());
            st.hold(&bytes);
            st.order.push_back((key, seq));
            freed = st.trim();
        }
        let waiting = st.waiting > 0;
        drop(st);
        if waiting {
            group.read.notify_all();
        }
        drop(freed);
        Ok(Some(bytes))
    }

    /// Up to `want` bytes of the file `id` (device, inode), open as `src`, from `at`: the
    /// piece another member read, or read now (and kept for the others). An empty piece is
    /// end of file.
    pub fn read(
        &self,
        src: BorrowedFd<'_>,
        id: (u64, u64),
        at: u64,
        want: usize,
    ) -> io::Result<Arc<Bytes>> {
        let home = Arc::downgrade(&self.group);
        let make = |buf| {
            let mut read = Self::fill(buf, src, at, want);
            if matches!(&read, Err(e) if e.raw_os_error() == Some(libc::ENOMEM)) {
                // Memory is short: what the group holds goes (the runs that wanted it read
                // it themselves), then one more try.
                self.let_go_of_held();
                read = Self::fill(None, src, at, want);
            }
            let (buf, len) = read?;
            Ok(Bytes {
                buf,
                len,
                pipe: None,
                home,
            })
        };
        match self.take((id, at), make)? {
            Some(bytes) if bytes.pipe.is_some() => self.read_alone(src, at, want),
            Some(bytes) if bytes.len > want => {
                // Asked for less than was read (a range cut elsewhere): the bytes it wants.
                self.copy_of(&bytes.as_slice()[..want])
            }
            Some(bytes) => Ok(bytes),
            None => self.read_alone(src, at, want),
        }
    }

    /// Copies up to `want` bytes of the file `id` from `at` (`src`) to the same place in `dst`
    /// with no buffer of ours: the piece is spliced from the source into a pipe once, by the
    /// first member that needs it, and each member duplicates that pipe into `own` (tee(2))
    /// and splices it into its destination. Returns the bytes copied; 0 at end of file.
    pub fn splice_piece(
        &self,
        (src, dst): (BorrowedFd<'_>, BorrowedFd<'_>),
        (id, at): ((u64, u64), u64),
        want: usize,
        own: &mut Option<OwnPipe>,
    ) -> Result<usize, Failed> {
        let home = Arc::downgrade(&self.group);
        let make = |buf| match Self::fill_pipe(src, at, want) {
            Ok((pipe, len)) => Ok(Bytes {
                buf: Vec::new(),
                len,
                pipe: Some(pipe),
                home,
            }),
            // A source that cannot be spliced from is read into a buffer.
            Err(e) if crate::transfer::unsupported(&e) => {
                let (buf, len) = Self::fill(buf, src, at, want)?;
                Ok(Bytes {
                    buf,
                    len,
                    pipe: None,
                    home,
                })
            }
            Err(e) => Err(e),
        };
        let piece = match self.take((id, at), make).map_err(Failed::Read)? {
            Some(piece) => piece,
            None => self.read_alone(src, at, want).map_err(Failed::Read)?,
        };
        let n = piece.len.min(want);
        let Some(pipe) = &piece.pipe else {
            sys::pwrite_all(dst, &piece.as_slice()[..n], at).map_err(Failed::Write)?;
            return Ok(n);
        };
        if own.is_none() {
            *own = Some(new_pipe().map_err(Failed::Write)?);
        }
        let mine = own.as_ref().expect("made above");
        let teed = loop {
            match rustix::pipe::tee(pipe, &mine.w, n, rustix::pipe::SpliceFlags::NONBLOCK) {
                Ok(t) => break t,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(Failed::Read(e.into())),
            }
        };
        let mut moved = 0;
        while moved < teed {
            let mut off = at + moved as u64;
            match rustix::pipe::splice(
                &mine.r,
                None,
                dst,
                Some(&mut off),
                teed - moved,
                rustix::pipe::SpliceFlags::MOVE,
            ) {
                Ok(0) => {
                    *own = None;
                    return Err(Failed::Write(io::ErrorKind::WriteZero.into()));
                }
                Ok(m) => moved += m,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) if crate::transfer::unsupported(&e.into()) => {
                    // A destination that takes no splice: the rest of the piece is read out
                    // of the pipe and written.
                    let rest = Self::drain(&mine.r, teed - moved).map_err(Failed::Read);
                    *own = None;
                    sys::pwrite_all(dst, &rest?, at + moved as u64).map_err(Failed::Write)?;
                    return Ok(teed);
                }
                Err(e) => {
                    // Its pipe may hold bytes: the next piece gets a new one.
                    *own = None;
                    return Err(Failed::Write(e.into()));
                }
            }
        }
        Ok(teed)
    }

    /// The `len` bytes a pipe holds, read out of it.
    fn drain(pipe: &OwnedFd, len: usize) -> io::Result<Vec<u8>> {
        let mut bytes = vec![0u8; len];
        let mut got = 0;
        while got < len {
            match rustix::io::read(pipe, &mut bytes[got..]) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => got += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(bytes)
    }

    /// Splices up to `want` bytes at `at` of `src` into a new pipe: its read end, and the bytes
    /// in it (fewer than asked where the pipe is full, 0 at end of file).
    fn fill_pipe(src: BorrowedFd<'_>, at: u64, want: usize) -> io::Result<(OwnedFd, usize)> {
        let pipe = new_pipe()?;
        // A page of the source per slot of the pipe: a piece that starts inside a page ends
        // as much sooner, so the pipe never fills and a splice into it never waits for room.
        // (SPLICE_F_NONBLOCK would stop at the first page not yet read from the disk.)
        let page = rustix::param::page_size();
        let room = rustix::pipe::fcntl_getpipe_size(&pipe.w)?;
        let want = want.min(room.saturating_sub(at as usize % page)).max(1);
        let mut got = 0;
        while got < want {
            let mut off = at + got as u64;
            match rustix::pipe::splice(
                src,
                Some(&mut off),
                &pipe.w,
                None,
                want - got,
                rustix::pipe::SpliceFlags::empty(),
            ) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if ringio_base::hooks::rewrites_after_read() {
            let mut bytes = vec![0u8; got];
            let n = sys::pread(src, &mut bytes, at)?;
            ringio_base::hooks::rewrite_after_read(src, at, &bytes[..n]);
        }
        Ok((pipe.r, got))
    }

    /// Reads `want` bytes at `at` into `buf` (or a new buffer): the buffer and the bytes read.
    fn fill(
        buf: Option<Vec<u8>>,
        src: BorrowedFd<'_>,
        at: u64,
        want: usize,
    ) -> io::Result<(Vec<u8>, usize)> {
        let mut buf = buf.unwrap_or_default();
        buf.clear();
        // At least a small piece's worth, so that a spare fits any small file. Not zeroed:
        // the read fills what is used.
        let cap = want.max(SPLICE_FROM);
        buf.try_reserve_exact(cap)
            .map_err(|_| io::Error::from_raw_os_error(libc::ENOMEM))?;
        let n = loop {
            match rustix::io::pread(src, &mut buf.spare_capacity_mut()[..want], at) {
                Ok((read, _)) => break read.len(),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        };
        // SAFETY: pread initialized the first `n` bytes of the spare capacity.
        unsafe { buf.set_len(n) };
        ringio_base::hooks::rewrite_after_read(src, at, &buf[..n]);
        Ok((buf, n))
    }

    /// A read of this member's own, outside the group.
    fn read_alone(&self, src: BorrowedFd<'_>, at: u64, want: usize) -> io::Result<Arc<Bytes>> {
        let (buf, len) = Self::fill(None, src, at, want)?;
        Ok(Arc::new(Bytes {
            buf,
            len,
            pipe: None,
            home: Weak::new(),
        }))
    }

    fn copy_of(&self, bytes: &[u8]) -> io::Result<Arc<Bytes>> {
        let mut buf = sys::try_zeroed(bytes.len())?;
        buf.copy_from_slice(bytes);
        Ok(Arc::new(Bytes {
            len: buf.len(),
            buf,
            pipe: None,
            home: Weak::new(),
        }))
    }

    /// Lets go of every piece read and not yet taken by all.
    fn let_go_of_held(&self) {
        let mut st = self.group.lock();
        let held: Vec<Key> = st
            .pieces
            .iter()
            .filter(|(_, p)| p.bytes.is_some())
            .map(|(k, _)| *k)
            .collect();
        let freed: Vec<_> = held.iter().filter_map(|key| st.remove(key)).collect();
        st.spare.clear();
        drop(st);
        drop(freed);
    }

    /// This run is over: it takes nothing more, and what only it still wanted is let go.
    pub fn leave(&self) {
        let group = &self.group;
        let mut st = group.lock();
        st.gone |= self.bit;
        let gone = st.gone;
        let done: Vec<Key> = st
            .pieces
            .iter()
            .filter(|(_, p)| p.bytes.is_some() && (p.taken | gone) & group.all == group.all)
            .map(|(k, _)| *k)
            .collect();
        let freed: Vec<_> = done.iter().filter_map(|key| st.remove(key)).collect();
        drop(st);
        drop(freed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileExt;

    /// Three members of a group read a file's pieces: each piece is read from the file once,
    /// whichever member comes first, and every member gets its bytes.
    #[test]
    fn each_piece_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let content: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &content).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let writer = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let members = SharedReads::group(3);
        let piece = 65536;
        for (i, at) in (0..content.len() as u64).step_by(piece).enumerate() {
            for k in 0..3 {
                let member = &members[(i + k) % 3];
                let got = member.read(file.as_fd(), (1, 2), at, piece).unwrap();
                let end = (at as usize + piece).min(content.len());
                assert_eq!(got.as_slice(), &content[at as usize..end], "piece at {at}");
                if k == 0 {
                    // Changed after the first read: the others still get what was read.
                    writer
                        .write_all_at(&vec![0xee; end - at as usize], at)
                        .unwrap();
                }
            }
        }
        let st = members[0].group.lock();
        assert!(st.pieces.is_empty(), "a piece every member took is let go");
        assert_eq!(st.held, 0);
    }

    /// Two members splice a file into files of their own piece by piece, taking turns at
    /// being first: each gets the file's bytes, and the group holds no pipe at the end.
    #[test]
    fn spliced_pieces_reach_every_member() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let content: Vec<u8> = (0..3_500_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&path, &content).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let members = SharedReads::group(2);
        let outs: Vec<std::fs::File> = (0..2)
            .map(|i| std::fs::File::create(dir.path().join(format!("out{i}"))).unwrap())
            .collect();
        let mut pipes: Vec<Option<OwnPipe>> = vec![None, None];
        let mut at = [0u64; 2];
        let mut turn = 0;
        while at.iter().any(|&a| a < content.len() as u64) {
            for k in [turn % 2, (turn + 1) % 2] {
                let ends = (file.as_fd(), outs[k].as_fd());
                let n = match members[k].splice_piece(ends, ((7, 8), at[k]), 1 << 20, &mut pipes[k])
                {
                    Ok(n) => n,
                    Err(Failed::Read(e) | Failed::Write(e)) => panic!("splice: {e}"),
                };
                at[k] += n as u64;
            }
            turn += 1;
        }
        for i in 0..2 {
            let got = std::fs::read(dir.path().join(format!("out{i}"))).unwrap();
            assert!(got == content, "member {i}: not the file's bytes");
        }
        let st = members[0].group.lock();
        assert_eq!((st.pieces.len(), st.pipes), (0, 0));
    }

    /// A member that leaves lets go of what it would have taken; one that asks again for a
    /// piece it took reads the file itself.
    #[test]
    fn leaving_and_second_copies() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"abcdef").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let members = SharedReads::group(2);
        let got = members[0].read(file.as_fd(), (1, 2), 0, 4).unwrap();
        assert_eq!(got.as_slice(), b"abcd");
        assert_eq!(members[0].group.lock().pieces.len(), 1);
        let again = members[0].read(file.as_fd(), (1, 2), 0, 16).unwrap();
        assert_eq!(again.as_slice(), b"abcdef");
        members[1].leave();
        assert!(members[0].group.lock().pieces.is_empty());
        // A shorter ask of a longer piece gets the bytes it asked for.
        let members = SharedReads::group(2);
        members[0].read(file.as_fd(), (1, 2), 2, 16).unwrap();
        let part = members[1].read(file.as_fd(), (1, 2), 2, 3).unwrap();
        assert_eq!(part.as_slice(), b"cde");
    }
}
