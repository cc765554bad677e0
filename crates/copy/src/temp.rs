//! `--atomic`'s temporaries: how ringio names, creates and holds them, and how `--resume`
//! tells a stale one of its own from anyone else's file.
//!
//! A temporary is `.NAME.ringio-RUN-N-CHECK`: RUN is 16 hex digits drawn at random once per
//! run, N counts the run's temporaries, and CHECK is a hash of everything before it. A file that
//! merely looks like a temporary (the user's `.f.ringio-1-2`, or anything named by hand or by
//! another program) fails the check and is never touched. While a run writes a temporary it
//! holds an exclusive `flock` on it, from creation until the rename; the kernel drops the lock
//! when the process dies, SIGKILL included. So `--resume` removes a temporary only when it
//! passes the check *and* its lock can be taken: a live run's temporary, in this directory or
//! written by another ringio at the same moment, is left alone.
//!
//! Why not the alternatives: an extended attribute as the mark fails on filesystems without
//! user xattrs (tmpfs before Linux 6.6, some FUSE and network filesystems), and O_TMPFILE, which
//! leaves nothing behind at all, is refused by others (NFS, FUSE) and still needs a visible name
//! between the link and the rename. A name and a lock work wherever files and flock(2) do; where
//! flock is refused, `--resume` keeps the temporary rather than guess.
//!
//! Where nothing stands at the final name there is nothing to rename over, so O_TMPFILE does
//! serve: [`Unnamed`] is a file with no name until it is complete, then linked at its final name
//! in one call (linkat fails rather than replace anything). A run killed before the link leaves
//! nothing, and the three calls of a named temporary's lock and check are saved. `ringio sync`
//! makes its new files so, and falls back to a named temporary where O_TMPFILE is refused.

use std::ffi::{CStr, CString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use rustix::fs::FlockOperation;
use rustix::rand::GetRandomFlags;

use crate::sys::{self, Kind};

const MARK: &[u8] = b".ringio-";

/// This run's random part of every temporary's name.
fn run_id() -> u64 {
    static RUN: OnceLock<u64> = OnceLock::new();
    *RUN.get_or_init(|| {
        let mut bytes = [0u8; 8];
        if rustix::rand::getrandom(&mut bytes, GetRandomFlags::empty()) == Ok(bytes.len()) {
            u64::from_ne_bytes(bytes)
        } else {
            // No getrandom (very old kernels): time and pid still differ between runs.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            t ^ (u64::from(std::process::id()) << 32)
        }
    })
}

/// FNV-1a, 64 bits, folded to 32: stable across builds and Rust versions, so a later ringio
/// recognizes an earlier one's temporaries. Not a defence against someone forging names on
/// purpose (they can remove their own files anyway), only against confusion by accident.
fn check(prefix: &[u8]) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in prefix {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h ^ (h >> 32)) as u32
}

/// A fresh temporary name for the destination `dst`, unique within this run.
pub(crate) fn name(dst: &CStr) -> CString {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut name = b".".to_vec();
    // Keep it within NAME_MAX (255) whatever the original length: 1 + 190 + 8 + 16 + 1 + 20 +
    // 1 + 8.
    name.extend_from_slice(&dst.to_bytes()[..dst.to_bytes().len().min(190)]);
    name.extend_from_slice(MARK);
    name.extend_from_slice(format!("{:016x}-{n}", run_id()).as_bytes());
    let sum = check(&name);
    name.extend_from_slice(format!("-{sum:08x}").as_bytes());
    CString::new(name).expect("no NUL in a file name")
}

/// True for a name [`name`] makes: `.NAME.ringio-RUN-N-CHECK` with the right check.
pub(crate) fn is_ours(name: &[u8]) -> bool {
    let Some(rest) = name.strip_prefix(b".") else {
        return false;
    };
    let Some(at) = rest.windows(MARK.len()).rposition(|w| w == MARK) else {
        return false;
    };
    let Some(dash) = name.iter().rposition(|&b| b == b'-') else {
        return false;
    };
    let (prefix, sum) = (&name[..dash], &name[dash + 1..]);
    let mut parts = rest[at + MARK.len()..].split(|&b| b == b'-');
    let hex = |p: Option<&[u8]>, len: usize| {
        p.is_some_and(|p| {
            p.len() == len && p.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
    };
    let digits =
        |p: Option<&[u8]>| p.is_some_and(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit));
    at > 0
        && hex(parts.next(), 16)
        && digits(parts.next())
        && hex(parts.next(), 8)
        && parts.next().is_none()
        && std::str::from_utf8(sum)
            .ok()
            .and_then(|s| u32::from_str_radix(s, 16).ok())
            == Some(check(prefix))
}

/// Creates the temporary `name` in `dir` (O_EXCL, never following) and locks it for as long as
/// the returned descriptor, or a duplicate of it, stays open. A `--resume` that removed the name
/// between the create and the lock is seen (the name no longer leads to this file) and a fresh
/// name is taken; the name finally used is written back into `name`.
pub(crate) fn create(dir: BorrowedFd<'_>, name: &mut CString, mode: u32) -> io::Result<OwnedFd> {
    let dst = name.clone();
    loop {
        let fd = sys::openat(
            dir,
            name,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
            mode,
        )?;
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            // Held by a --resume about to remove it: let it, and use another name.
            Err(rustix::io::Errno::WOULDBLOCK) => {
                *name = renamed(&dst);
                continue;
            }
            // A filesystem without flock: the name and its check still protect others' files.
            Err(_) => return Ok(fd),
        }
        let ours = match sys::fstatx(fd.as_fd()) {
            Ok(stat) => stat,
            Err(e) => {
                // Made and locked by this call: not left behind.
                let _ = sys::unlinkat(dir, name);
                return Err(e);
            }
        };
        match sys::statx_at(dir, name, false) {
            Ok(there) if (there.dev, there.ino) == (ours.dev, ours.ino) => return Ok(fd),
            Ok(_) | Err(_) => *name = renamed(&dst),
        }
    }
}

/// The next temporary name for the destination whose current temporary is `previous`.
fn renamed(previous: &CStr) -> CString {
    // `previous` is itself `.NAME.ringio-...`: recover NAME.
    let bytes = previous.to_bytes();
    let base = bytes
        .strip_prefix(b".")
        .and_then(|rest| {
            rest.windows(MARK.len())
                .rposition(|w| w == MARK)
                .map(|at| &rest[..at])
        })
        .unwrap_or(bytes);
    name(&CString::new(base).expect("no NUL in a file name"))
}

/// Removes the temporary `name` in `dir` if it is a stale one of ringio's: its name passes the
/// check, it is a regular file, and no live run holds its lock. Returns whether it was removed.
pub(crate) fn remove_if_stale(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<bool> {
    if !is_ours(name.to_bytes()) {
        return Ok(false);
    }
    // flock needs a real open (not O_PATH); a temporary of a write-only source (mode 0200)
    // opens for writing only. Neither truncates, and O_NONBLOCK keeps a FIFO from waiting.
    let flags = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
    let fd = match sys::openat(dir, name, libc::O_RDONLY | flags, 0)
        .or_else(|_| sys::openat(dir, name, libc::O_WRONLY | flags, 0))
    {
        Ok(fd) => fd,
        // Gone already, a symlink (ELOOP), or not ours to open: leave it.
        Err(_) => return Ok(false),
    };
    let stat = sys::fstatx(fd.as_fd())?;
    if stat.kind() != Kind::File {
        return Ok(false);
    }
    if rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_err() {
        // A live run is writing it (or locks are refused here: keep it rather than guess).
        return Ok(false);
    }
    // Under the lock, the name must still be the file just locked.
    match sys::statx_at(dir, name, false) {
        Ok(there) if (there.dev, there.ino) == (stat.dev, stat.ino) => {}
        _ => return Ok(false),
    }
    match sys::unlinkat(dir, name) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Removes the stale temporaries in `dir` (see [`remove_stale`]): what an interrupted `cp
/// --atomic` or `ringio sync` left there. `found` is told first when there are any.
pub(crate) fn remove_stale_in(
    dir: BorrowedFd<'_>,
    buf: &mut [MaybeUninit<u8>],
    found: &dyn Fn(),
) -> io::Result<()> {
    let mut ours = Vec::new();
    sys::read_dir_entries(dir, buf, |name: &CStr, _| {
        if is_ours(name.to_bytes()) {
            ours.push(name.to_owned());
        }
    })?;
    if !ours.is_empty() {
        found();
    }
    for name in ours {
        remove_stale(dir, &name)?;
    }
    Ok(())
}

/// Removes the temporary `name` if it is a stale one of ringio's: a file only when no live run
/// holds its lock ([`remove_if_stale`]), a symlink or special file (which cannot be locked, and
/// holds no data) always.
pub(crate) fn remove_stale(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<bool> {
    if !is_ours(name.to_bytes()) {
        return Ok(false);
    }
    match sys::statx_at(dir, name, false) {
        Ok(s) if matches!(s.kind(), Kind::Symlink | Kind::Special) => {
            match sys::unlinkat(dir, name) {
                Ok(()) => Ok(true),
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
                Err(e) => Err(e),
            }
        }
        Ok(_) => remove_if_stale(dir, name),
        Err(_) => Ok(false),
    }
}

/// A second descriptor of a locked temporary, so the lock outlives closing the first (whose
/// close reports write-back errors) until the rename is done.
pub(crate) fn keep_lock(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    fd.try_clone_to_owned().ok()
}

/// A new file without a name (O_TMPFILE) in a directory, until [`Unnamed::link`] names it.
#[derive(Debug)]
pub(crate) struct Unnamed {
    /// The open file; dropped unlinked, it vanishes with its data.
    pub fd: OwnedFd,
}

impl Unnamed {
    /// Creates one in `dir` with `mode` (the umask and a default ACL apply, as to any new file).
    /// `None` where the filesystem has no O_TMPFILE (the caller takes a named temporary).
    pub(crate) fn create(dir: BorrowedFd<'_>, mode: u32) -> io::Result<Option<Unnamed>> {
        match sys::openat(dir, c".", libc::O_TMPFILE | libc::O_WRONLY, mode) {
            Ok(fd) => Ok(Some(Unnamed { fd })),
            // EOPNOTSUPP: the filesystem has none; EISDIR: the kernel does not know the flag.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Gives the complete file its name in `dir`. EEXIST when something has taken the name
    /// meanwhile: nothing is replaced.
    pub(crate) fn link(&self, dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
        use rustix::fs::AtFlags;
        // Linking a descriptor takes CAP_DAC_READ_SEARCH on kernels before 6.10 (and there a
        // non-root run gets ENOENT): the /proc path of the descriptor, followed, does not.
        match rustix::fs::linkat(&self.fd, c"", dir, name, AtFlags::EMPTY_PATH) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::PERM) => {}
            Err(e) => return Err(e.into()),
        }
        let proc = format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&self.fd)
        );
        rustix::fs::linkat(
            rustix::fs::CWD,
            proc.as_str(),
            dir,
            name,
            AtFlags::SYMLINK_FOLLOW,
        )
        .map_err(io::Error::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory and its descriptor.
    fn scratch() -> (tempfile::TempDir, OwnedFd) {
        let dir = tempfile::tempdir().unwrap();
        let path = CString::new(dir.path().to_str().unwrap()).unwrap();
        let at = sys::open_dir(rustix::fs::CWD, &path, true).unwrap();
        (dir, at)
    }

    #[test]
    fn an_unnamed_file_appears_whole_and_never_replaces() {
        let (dir, at) = scratch();
        let Some(new) = Unnamed::create(at.as_fd(), 0o640).unwrap() else {
            skip!("this filesystem has no O_TMPFILE");
        };
        sys::pwrite_all(new.fd.as_fd(), b"whole", 0).unwrap();
        // Nothing is visible before the link.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        new.link(at.as_fd(), c"f").unwrap();
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"whole");
        // A name taken meanwhile is never replaced.
        let other = Unnamed::create(at.as_fd(), 0o640).unwrap().unwrap();
        let err = other.link(at.as_fd(), c"f").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EEXIST));
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"whole");
        // One dropped unlinked leaves nothing.
        drop(other);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn names_carry_a_check() {
        let made = name(c"f");
        let bytes = made.to_bytes();
        assert!(bytes.starts_with(b".f.ringio-"), "{made:?}");
        assert!(is_ours(bytes), "{made:?}");
        assert!(is_ours(name(c"a.b.ringio-1-2").to_bytes()));
        assert_ne!(name(c"f"), made);
        // A name of the right shape with a wrong check, and older or hand-made shapes.
        let mut forged = bytes.to_vec();
        let last = forged.len() - 1;
        forged[last] = if forged[last] == b'0' { b'1' } else { b'0' };
        assert!(!is_ours(&forged));
        assert!(!is_ours(b".f.ringio-123-0"));
        assert!(!is_ours(b".f.ringio-0123456789abcdef-0-00000000"));
        assert!(!is_ours(&bytes[1..]));
    }

    #[test]
    fn long_names_stay_within_name_max() {
        let long = CString::new(vec![b'x'; 255]).unwrap();
        let made = name(&long);
        assert!(made.to_bytes().len() <= 255);
        assert!(is_ours(made.to_bytes()));
    }

    #[test]
    fn a_locked_temporary_survives_and_a_stale_one_goes() {
        let (_dir, at) = scratch();
        let mut live = name(c"f");
        let held = create(at.as_fd(), &mut live, 0o600).unwrap();
        assert!(!remove_if_stale(at.as_fd(), &live).unwrap());
        assert!(sys::statx_at(at.as_fd(), &live, false).is_ok());
        drop(held);
        assert!(remove_if_stale(at.as_fd(), &live).unwrap());
        assert!(sys::statx_at(at.as_fd(), &live, false).is_err());
    }
}
