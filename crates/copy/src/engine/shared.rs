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
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Condvar, Mutex, Weak};

use crate::sys;

/// Members a group can have: one bit each in a `u64`.
pub(crate) const MAX_MEMBERS: usize = 64;

/// Bytes of pieces a group holds for members that have not taken them yet, at most.
const HELD_CAP: u64 = 256 << 20;

/// Spare buffers kept for the next reads.
const SPARE_BUFFERS: usize = 32;

/// The least a buffer holds, so that a spare fits any small file.
const SMALL_PIECE: usize = 64 << 10;

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
    /// Bytes the pieces hold.
    held: u64,
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
        self.held -= bytes.buf.capacity() as u64;
        Some(bytes)
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
            if live && self.held <= HELD_CAP {
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
        let group = &self.group;
        let key = (id.0, id.1, at);
        let mut st = group.lock();
        while let Some(piece) = st.pieces.get_mut(&key) {
            if piece.taken & self.bit != 0 {
                // This run copies the file a second time (another name for it): its own read.
                drop(st);
                return self.read_alone(src, at, want);
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
            if bytes.len > want {
                // Asked for less than was read (a range cut elsewhere): the bytes it wants.
                return self.copy_of(&bytes.as_slice()[..want]);
            }
            return Ok(bytes);
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
        let mut read = Self::fill(buf, src, at, want);
        if matches!(&read, Err(e) if e.raw_os_error() == Some(libc::ENOMEM)) {
            // Memory is short: what the group holds goes (the runs that wanted it read it
            // themselves), then one more try.
            self.let_go_of_held();
            read = Self::fill(None, src, at, want);
        }
        let mut st = group.lock();
        let bytes = match read {
            Ok((buf, len)) => Arc::new(Bytes {
                buf,
                len,
                home: Arc::downgrade(group),
            }),
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
            st.held += bytes.buf.capacity() as u64;
            st.order.push_back((key, seq));
            freed = st.trim();
        }
        let waiting = st.waiting > 0;
        drop(st);
        if waiting {
            group.read.notify_all();
        }
        drop(freed);
        Ok(bytes)
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
        // Not zeroed: the read fills what is used.
        buf.try_reserve_exact(want.max(SMALL_PIECE))
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
        let spare = self.group.lock().spare.pop();
        let (buf, len) = Self::fill(spare, src, at, want)?;
        Ok(Arc::new(Bytes {
            buf,
            len,
            home: Arc::downgrade(&self.group),
        }))
    }

    fn copy_of(&self, bytes: &[u8]) -> io::Result<Arc<Bytes>> {
        let mut buf = sys::try_zeroed(bytes.len())?;
        buf.copy_from_slice(bytes);
        Ok(Arc::new(Bytes {
            len: buf.len(),
            buf,
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
