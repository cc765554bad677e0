//! Extended attributes (ACLs included: they are the `system.posix_acl_*` attributes): the one
//! implementation the copy and the tree comparer share, for every file type.
//!
//! Regular files and directories are reached through descriptors the walk already holds.
//! Symlinks, FIFOs and devices cannot be: an O_PATH descriptor refuses f*xattr (EBADF), and
//! opening a FIFO or a device has effects of its own. Those are named as
//! `/proc/self/fd/DIRFD/NAME` and reached with the l*xattr calls (or, for a source reached
//! through a symlink under -L, the following ones): relative to the directory descriptor, so a
//! tree deeper than PATH_MAX still works. Where the kernel has the *xattrat calls (Linux 6.13),
//! such an entry is named to them relative to its directory instead ([`at`]): one lookup, not
//! one through procfs and the magic link first (measured: listing every entry's attributes of a
//! 50k-entry tree that way took 1.8× the time of `listxattrat`).

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use rustix::fs::XattrFlags;
use rustix::io::Errno;

use crate::sys;

/// Where an entry's extended attributes are read or written.
#[derive(Clone, Copy)]
pub(crate) enum Subject<'a> {
    /// An open regular file or directory.
    Fd(BorrowedFd<'a>),
    /// A file opened with O_PATH, which the f*xattr calls refuse: reached as
    /// `/proc/self/fd/N`, which leads to the file itself.
    PathFd(BorrowedFd<'a>),
    /// The entry `name` in the directory `dir`; `follow`: a final symlink is followed.
    At {
        /// The directory.
        dir: BorrowedFd<'a>,
        /// The entry's name there.
        name: &'a CStr,
        /// Whether a final symlink is followed.
        follow: bool,
    },
}

/// A [`Subject`] made ready for the calls: a descriptor, an entry of a directory (for the
/// *xattrat calls), or a path through /proc.
enum Resolved<'a> {
    Fd(BorrowedFd<'a>),
    At {
        dir: BorrowedFd<'a>,
        name: &'a CStr,
        follow: bool,
    },
    Path {
        path: CString,
        follow: bool,
    },
}

impl<'a> Subject<'a> {
    /// The entry `name` in `dir`, reached without opening it.
    pub(crate) fn at(dir: BorrowedFd<'a>, name: &'a CStr, follow: bool) -> Self {
        Subject::At { dir, name, follow }
    }

    fn resolve(self) -> Resolved<'a> {
        match self {
            Subject::Fd(fd) => Resolved::Fd(fd),
            Subject::PathFd(fd) => {
                let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
                Resolved::Path {
                    path: CString::new(path).expect("no NUL in a number"),
                    follow: true,
                }
            }
            Subject::At { dir, name, follow } if dir.as_raw_fd() == libc::AT_FDCWD => {
                Resolved::Path {
                    path: name.to_owned(),
                    follow,
                }
            }
            Subject::At { dir, name, follow } if at::available() => {
                Resolved::At { dir, name, follow }
            }
            Subject::At { dir, name, follow } => through_proc(dir, name, follow),
        }
    }
}

/// The entry `name` of `dir` as a path through /proc, for the l*xattr calls.
fn through_proc<'a>(dir: BorrowedFd<'_>, name: &CStr, follow: bool) -> Resolved<'a> {
    let mut path = format!("/proc/self/fd/{}/", dir.as_raw_fd()).into_bytes();
    path.extend_from_slice(name.to_bytes());
    let path = CString::new(path).expect("no NUL in a file name");
    Resolved::Path { path, follow }
}

impl Resolved<'_> {
    /// The entry of a directory as a path through /proc, where the *xattrat calls turned out
    /// to be missing (`Resolved::At` made before the first call said so).
    fn without_at(&self) -> Option<Resolved<'static>> {
        match *self {
            Resolved::At { dir, name, follow } => Some(through_proc(dir, name, follow)),
            _ => None,
        }
    }

    fn list(&self, buf: &mut [u8]) -> rustix::io::Result<usize> {
        match self {
            Resolved::Fd(fd) => rustix::fs::flistxattr(fd, buf),
            Resolved::At { dir, name, follow } => at::list(*dir, name, *follow, buf)
                .unwrap_or_else(|| self.without_at().expect("an entry").list(buf)),
            Resolved::Path { path, follow: true } => rustix::fs::listxattr(path.as_c_str(), buf),
            Resolved::Path { path, .. } => rustix::fs::llistxattr(path.as_c_str(), buf),
        }
    }

    fn get(&self, attr: &CStr, buf: &mut [u8]) -> rustix::io::Result<usize> {
        match self {
            Resolved::Fd(fd) => rustix::fs::fgetxattr(fd, attr, buf),
            Resolved::At { dir, name, follow } => at::get(*dir, name, *follow, attr, buf)
                .unwrap_or_else(|| self.without_at().expect("an entry").get(attr, buf)),
            Resolved::Path { path, follow: true } => {
                rustix::fs::getxattr(path.as_c_str(), attr, buf)
            }
            Resolved::Path { path, .. } => rustix::fs::lgetxattr(path.as_c_str(), attr, buf),
        }
    }

    fn set(&self, attr: &CStr, value: &[u8]) -> rustix::io::Result<()> {
        let flags = XattrFlags::empty();
        match self {
            Resolved::Fd(fd) => rustix::fs::fsetxattr(fd, attr, value, flags),
            Resolved::At { dir, name, follow } => at::set(*dir, name, *follow, attr, value)
                .unwrap_or_else(|| self.without_at().expect("an entry").set(attr, value)),
            Resolved::Path { path, follow: true } => {
                rustix::fs::setxattr(path.as_c_str(), attr, value, flags)
            }
            Resolved::Path { path, .. } => {
                rustix::fs::lsetxattr(path.as_c_str(), attr, value, flags)
            }
        }
    }

    fn remove(&self, attr: &CStr) -> rustix::io::Result<()> {
        match self {
            Resolved::Fd(fd) => rustix::fs::fremovexattr(fd, attr),
            Resolved::At { dir, name, follow } => at::remove(*dir, name, *follow, attr)
                .unwrap_or_else(|| self.without_at().expect("an entry").remove(attr)),
            Resolved::Path { path, follow: true } => rustix::fs::removexattr(path.as_c_str(), attr),
            Resolved::Path { path, .. } => rustix::fs::lremovexattr(path.as_c_str(), attr),
        }
    }
}

/// Linux 6.13's setxattrat, getxattrat, listxattrat and removexattrat: an entry named relative
/// to a directory descriptor (a final symlink followed or not), as the l*xattr calls name it
/// by path. Each returns `None` where the kernel lacks them (ENOSYS, remembered: the caller
/// goes through /proc from then on). Their numbers are the same on every architecture (the
/// generic table's; x86_64 took them over), and the libc crate names them for none we build.
mod at {
    use std::ffi::CStr;
    use std::os::fd::{AsRawFd, BorrowedFd};
    use std::sync::atomic::{AtomicBool, Ordering};

    use rustix::io::{Errno, Result};

    const SETXATTRAT: libc::c_long = 463;
    const GETXATTRAT: libc::c_long = 464;
    const LISTXATTRAT: libc::c_long = 465;
    const REMOVEXATTRAT: libc::c_long = 466;

    /// The kernel answered ENOSYS once.
    static MISSING: AtomicBool = AtomicBool::new(false);

    /// The kernel's `struct xattr_args`: the value's buffer, its size, the set flags.
    #[repr(C)]
    struct XattrArgs {
        value: u64,
        size: u32,
        flags: u32,
    }

    pub(super) fn available() -> bool {
        !MISSING.load(Ordering::Relaxed)
    }

    fn flags(follow: bool) -> libc::c_uint {
        if follow {
            0
        } else {
            libc::AT_SYMLINK_NOFOLLOW as libc::c_uint
        }
    }

    /// A call's result: `None` on ENOSYS (remembered), else its count or its error.
    fn answer(ret: libc::c_long) -> Option<Result<usize>> {
        if ret >= 0 {
            return Some(Ok(ret as usize));
        }
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        if errno == libc::ENOSYS {
            MISSING.store(true, Ordering::Relaxed);
            return None;
        }
        Some(Err(Errno::from_raw_os_error(errno)))
    }

    pub(super) fn list(
        dir: BorrowedFd<'_>,
        name: &CStr,
        follow: bool,
        buf: &mut [u8],
    ) -> Option<Result<usize>> {
        // SAFETY: the name is NUL-terminated; the kernel writes at most `buf.len()` bytes
        // into `buf`, which lives across the call.
        answer(unsafe {
            libc::syscall(
                LISTXATTRAT,
                dir.as_raw_fd(),
                name.as_ptr(),
                flags(follow),
                buf.as_mut_ptr(),
                buf.len(),
            )
        })
    }

    pub(super) fn get(
        dir: BorrowedFd<'_>,
        name: &CStr,
        follow: bool,
        attr: &CStr,
        buf: &mut [u8],
    ) -> Option<Result<usize>> {
        let mut args = XattrArgs {
            value: buf.as_mut_ptr() as u64,
            size: u32::try_from(buf.len()).unwrap_or(u32::MAX),
            flags: 0,
        };
        // SAFETY: the names are NUL-terminated; `args` describes `buf`, which the kernel
        // writes at most `args.size` bytes of; both live across the call.
        answer(unsafe {
            libc::syscall(
                GETXATTRAT,
                dir.as_raw_fd(),
                name.as_ptr(),
                flags(follow),
                attr.as_ptr(),
                &mut args as *mut XattrArgs,
                std::mem::size_of::<XattrArgs>(),
            )
        })
    }

    pub(super) fn set(
        dir: BorrowedFd<'_>,
        name: &CStr,
        follow: bool,
        attr: &CStr,
        value: &[u8],
    ) -> Option<Result<()>> {
        let size = u32::try_from(value.len()).map_err(|_| Errno::TOOBIG);
        let args = match size {
            Ok(size) => XattrArgs {
                value: value.as_ptr() as u64,
                size,
                flags: 0,
            },
            Err(e) => return Some(Err(e)),
        };
        // SAFETY: the names are NUL-terminated; the kernel reads `args.size` bytes of `value`;
        // both live across the call.
        answer(unsafe {
            libc::syscall(
                SETXATTRAT,
                dir.as_raw_fd(),
                name.as_ptr(),
                flags(follow),
                attr.as_ptr(),
                &args as *const XattrArgs,
                std::mem::size_of::<XattrArgs>(),
            )
        })
        .map(|r| r.map(drop))
    }

    pub(super) fn remove(
        dir: BorrowedFd<'_>,
        name: &CStr,
        follow: bool,
        attr: &CStr,
    ) -> Option<Result<()>> {
        // SAFETY: the names are NUL-terminated and live across the call.
        answer(unsafe {
            libc::syscall(
                REMOVEXATTRAT,
                dir.as_raw_fd(),
                name.as_ptr(),
                flags(follow),
                attr.as_ptr(),
            )
        })
        .map(|r| r.map(drop))
    }
}

/// Why copying extended attributes failed.
pub(crate) enum XattrError {
    /// The destination filesystem takes no extended attributes at all.
    Unsupported(io::Error),
    /// Reading or writing one attribute failed.
    Failed(io::Error),
}

impl From<io::Error> for XattrError {
    fn from(e: io::Error) -> Self {
        XattrError::Failed(e)
    }
}

/// The POSIX ACL attributes. cp copies them with the mode, never as extended attributes
/// (libattr's xattr.conf marks them `permissions`).
const ACCESS: &CStr = c"system.posix_acl_access";
const DEFAULT: &CStr = c"system.posix_acl_default";

/// Which POSIX ACLs an entry holds (a default ACL only on a directory).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Acls {
    pub access: bool,
    pub default: bool,
}

/// True for the name of a POSIX ACL attribute.
pub(crate) fn is_acl(name: &[u8]) -> bool {
    name == ACCESS.to_bytes() || name == DEFAULT.to_bytes()
}

/// Runs `set`, which writes extended attributes on `dst`, where the kernel may refuse them
/// because `dst` lacks its owner's write bit: it lets only a writer set `user.*` attributes
/// (its `xattr_permission`), the owner of a read-only file included, though not root. A copy of
/// a read-only file or directory is such an entry once its mode is set (or from its creation:
/// `cp -a` makes a 0444 file 0400 while it is written). Refused so (`denied` says which error
/// that is), `dst` gets u+w for a second try and its mode back after it (unless an ACL set on
/// that try made the mode its own), as GNU cp gives a new file u+w for its attributes; an entry
/// that already had u+w, or is not ours to chmod, keeps the first refusal. The callers set ACLs
/// after the other attributes, as GNU cp and rsync do, so an ACL that takes the owner's write
/// bit away comes after what needed it.
pub(crate) fn while_writable<T, E: From<io::Error>>(
    dst: Subject<'_>,
    denied: impl Fn(&E) -> bool,
    mut set: impl FnMut() -> Result<T, E>,
) -> Result<T, E> {
    let first = match set() {
        Err(e) if denied(&e) => e,
        done => return done,
    };
    let stat = match dst {
        Subject::Fd(_) | Subject::At { follow: false, .. } => stat_of(dst),
        _ => return Err(first),
    };
    let chmod = |perm| match dst {
        Subject::Fd(fd) => sys::fchmod(fd, perm),
        Subject::At { dir, name, .. } => sys::fchmodat(dir, name, perm),
        Subject::PathFd(_) => Err(io::Error::from_raw_os_error(libc::EBADF)),
    };
    let perm = match stat {
        Ok(s) if s.perm() & 0o200 == 0 && s.kind() != sys::Kind::Symlink => s.perm(),
        _ => return Err(first),
    };
    if chmod(perm | 0o200).is_err() {
        return Err(first);
    }
    let again = set();
    // Taken back only where nothing else moved the mode meanwhile: an ACL set on this try
    // made it the ACL's, which is the source's.
    let back = match stat_of(dst) {
        Ok(now) if now.perm() == perm | 0o200 => chmod(perm),
        Ok(_) => Ok(()),
        Err(e) => Err(e),
    };
    let done = again?;
    back.map_err(E::from)?;
    Ok(done)
}

/// The stat of an open entry, or of one named in its directory (not followed).
fn stat_of(target: Subject<'_>) -> io::Result<sys::Stat> {
    match target {
        Subject::Fd(fd) => sys::fstatx(fd),
        Subject::At { dir, name, .. } => sys::statx_at(dir, name, false),
        Subject::PathFd(_) => Err(io::Error::from_raw_os_error(libc::EBADF)),
    }
}

/// True for the refusal [`while_writable`] answers.
pub(crate) fn is_denied(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EACCES)
}

/// Copies every extended attribute of `src` that this process can read onto `dst`; its POSIX
/// ACLs only when `acls` (they go with the mode, not the extended attributes). Returns which
/// ACLs the source listed, copied or not: known from the listing, at no cost of its own. A
/// read-only `dst` takes them too ([`while_writable`]).
pub(crate) fn copy_all(src: Subject<'_>, dst: Subject<'_>, acls: bool) -> Result<Acls, XattrError> {
    let denied = |e: &XattrError| matches!(e, XattrError::Failed(e) if is_denied(e));
    while_writable(dst, denied, || copy_each(src, dst, acls))
}

/// [`copy_all`], in one try.
fn copy_each(src: Subject<'_>, dst: Subject<'_>, acls: bool) -> Result<Acls, XattrError> {
    let (src, dst) = (src.resolve(), dst.resolve());
    let names = match names(&src) {
        Ok(names) => names,
        Err(e) => return Err(XattrError::Failed(e)),
    };
    let mut held = Acls::default();
    let mut value = Vec::new();
    // The ACLs last, as GNU cp and rsync set them: an ACL rewrites the mode, and one that takes
    // the owner's write bit away would refuse the `user.*` attributes after it.
    let mut names: Vec<&[u8]> = names.split(|&b| b == 0).filter(|n| !n.is_empty()).collect();
    names.sort_by_key(|name| is_acl(name));
    for name in names {
        if is_acl(name) {
            if name == ACCESS.to_bytes() {
                held.access = true;
            } else {
                held.default = true;
            }
            if !acls {
                continue;
            }
        }
        let name = CString::new(name).expect("split at NUL");
        match get(&src, &name, &mut value) {
            Ok(()) => {}
            // Gone since the listing, or not ours to read (trusted.* without root).
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENODATA | libc::EPERM)) => continue,
            Err(e) => return Err(XattrError::Failed(e)),
        }
        match dst.set(name.as_c_str(), &value) {
            Ok(()) => {}
            Err(Errno::OPNOTSUPP) => {
                return Err(XattrError::Unsupported(Errno::OPNOTSUPP.into()));
            }
            Err(e) => return Err(XattrError::Failed(e.into())),
        }
    }
    Ok(held)
}

/// Copies the POSIX ACLs that `src` holds onto `dst` (the default ACL too for a directory):
/// part of the mode that `-p` keeps, as with cp. A destination that takes none leaves nothing
/// to do. Returns which ACLs the source holds; what it lacks, `dst` may still hold (see
/// [`reset_acls`]).
pub(crate) fn copy_acls(src: Subject<'_>, dst: Subject<'_>, dir: bool) -> io::Result<Acls> {
    let names: &[&CStr] = if dir { &[ACCESS, DEFAULT] } else { &[ACCESS] };
    let (src, dst) = (src.resolve(), dst.resolve());
    let mut held = Acls::default();
    let mut value = Vec::new();
    for &name in names {
        match get(&src, name, &mut value) {
            Ok(()) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENODATA | libc::EOPNOTSUPP)) => {
                continue
            }
            Err(e) => return Err(e),
        }
        if name == ACCESS {
            held.access = true;
        } else {
            held.default = true;
        }
        match dst.set(name, &value) {
            Ok(()) | Err(Errno::OPNOTSUPP) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(held)
}

/// Takes from `dst` the ACLs the source lacks (`lacking`), as cp's qset_acl does: the access
/// ACL becomes the one `perm` (rwx bits) alone makes, which the kernel stores as no ACL and
/// those mode bits, in one call; a default ACL is removed. For a file that may hold one that
/// is not the source's: one that existed, or one made in a directory with a default ACL.
pub(crate) fn reset_acls(dst: Subject<'_>, lacking: Acls, perm: u32) -> io::Result<()> {
    let dst = dst.resolve();
    if lacking.access {
        match dst.set(ACCESS, &minimal_acl(perm)) {
            Ok(()) | Err(Errno::OPNOTSUPP) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if lacking.default {
        match dst.remove(DEFAULT) {
            Ok(()) | Err(Errno::NODATA | Errno::OPNOTSUPP) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// True when new entries in the directory `dir` inherit an ACL: it has a default ACL. One
/// call, sized zero: only whether it is there matters.
pub(crate) fn has_default_acl(dir: BorrowedFd<'_>) -> bool {
    rustix::fs::fgetxattr(dir, DEFAULT, &mut [0u8; 0][..]).is_ok()
}

/// The access ACL equivalent to the permission bits `perm`, in the kernel's
/// `system.posix_acl_access` format: a version, then (tag, perm, id) for the owner, the
/// group and the others.
fn minimal_acl(perm: u32) -> Vec<u8> {
    const VERSION: u32 = 2;
    const USER_OBJ: u16 = 0x01;
    const GROUP_OBJ: u16 = 0x04;
    const OTHER: u16 = 0x20;
    const UNDEFINED_ID: u32 = u32::MAX;
    let mut acl = VERSION.to_le_bytes().to_vec();
    for (tag, shift) in [(USER_OBJ, 6), (GROUP_OBJ, 3), (OTHER, 0)] {
        acl.extend_from_slice(&tag.to_le_bytes());
        acl.extend_from_slice(&(((perm >> shift) & 7) as u16).to_le_bytes());
        acl.extend_from_slice(&UNDEFINED_ID.to_le_bytes());
    }
    acl
}

/// Sets each of `attrs` on `dst`. A `security.*` attribute that `dst` already holds with the
/// same value (a label a new file took from its directory) is left as it is: setting it again
/// can need a permission that keeping it does not.
pub(crate) fn set_all(dst: Subject<'_>, attrs: &[(CString, Vec<u8>)]) -> io::Result<()> {
    while_writable(dst, is_denied, || set_each(dst, attrs))
}

/// [`set_all`], in one try.
fn set_each(dst: Subject<'_>, attrs: &[(CString, Vec<u8>)]) -> io::Result<()> {
    let dst = dst.resolve();
    let mut held = Vec::new();
    for (name, value) in attrs {
        if name.to_bytes().starts_with(b"security.")
            && get(&dst, name, &mut held).is_ok()
            && held == *value
        {
            continue;
        }
        dst.set(name, value)?;
    }
    Ok(())
}

/// Every extended attribute of an entry that this process can read, as (name, value) sorted by
/// name. A filesystem without extended attributes has none.
/// One attribute's value (`None`: the entry has none of that name, or takes no xattrs).
pub(crate) fn get_one(target: Subject<'_>, name: &CStr) -> io::Result<Option<Vec<u8>>> {
    let mut value = Vec::new();
    match get(&target.resolve(), name, &mut value) {
        Ok(()) => Ok(Some(value)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENODATA | libc::EOPNOTSUPP)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Sets one attribute.
pub(crate) fn set_one(target: Subject<'_>, name: &CStr, value: &[u8]) -> io::Result<()> {
    target.resolve().set(name, value).map_err(io::Error::from)
}

/// Removes one attribute (one that is not there is no error).
pub(crate) fn remove_one(target: Subject<'_>, name: &CStr) -> io::Result<()> {
    match target.resolve().remove(name) {
        Ok(()) | Err(Errno::NODATA) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

pub(crate) fn read_all(target: Subject<'_>) -> io::Result<Vec<(CString, Vec<u8>)>> {
    let target = target.resolve();
    let names = names(&target)?;
    let mut out = Vec::new();
    for name in names.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = CString::new(name).expect("split at NUL");
        let mut value = Vec::new();
        match get(&target, &name, &mut value) {
            Ok(()) => out.push((name, value)),
            // Removed since the listing.
            Err(e) if e.raw_os_error() == Some(libc::ENODATA) => {}
            Err(e) => return Err(e),
        }
    }
    out.sort();
    Ok(out)
}

/// The NUL-separated list of attribute names; empty where the filesystem has none.
fn names(target: &Resolved<'_>) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    match sized_read(&mut buf, |b| target.list(b)) {
        Ok(()) => Ok(buf),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

fn get(target: &Resolved<'_>, name: &CStr, value: &mut Vec<u8>) -> io::Result<()> {
    sized_read(value, |b| target.get(name, b))
}

/// Reads a list or a value into `buf`: one call when it fits in what `buf` already holds (256
/// bytes to start with), growing it while the kernel answers ERANGE.
fn sized_read(
    buf: &mut Vec<u8>,
    mut call: impl FnMut(&mut [u8]) -> rustix::io::Result<usize>,
) -> io::Result<()> {
    if buf.len() < 256 {
        buf.resize(256, 0);
    }
    loop {
        match call(&mut buf[..]) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(());
            }
            Err(Errno::RANGE) if buf.len() < 1 << 24 => {
                let grown = buf.len() * 4;
                buf.resize(grown, 0);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn copies_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let (fa, fb) = (
            std::fs::File::create(&a).unwrap(),
            std::fs::File::create(&b).unwrap(),
        );
        if let Err(e) = rustix::fs::fsetxattr(&fa, c"user.t", b"value", XattrFlags::empty()) {
            skip!("no user xattrs here: {e}");
        }
        let want = vec![(CString::from(c"user.t"), b"value".to_vec())];
        assert_eq!(read_all(Subject::Fd(fa.as_fd())).unwrap(), want);
        assert!(copy_all(Subject::Fd(fa.as_fd()), Subject::Fd(fb.as_fd()), true).is_ok());
        assert_eq!(read_all(Subject::Fd(fb.as_fd())).unwrap(), want);
    }

    #[test]
    fn minimal_acl_is_what_libacl_makes_from_a_mode() {
        // acl_from_mode(0644) as setxattr receives it from cp.
        let want = b"\x02\0\0\0\x01\0\x06\0\xff\xff\xff\xff\x04\0\x04\0\xff\xff\xff\xff \0\x04\0\xff\xff\xff\xff";
        assert_eq!(minimal_acl(0o644), want.to_vec());
    }

    #[test]
    fn symlinks_are_reached_through_their_directory() {
        if !rustix::process::geteuid().is_root() {
            skip!("trusted.* attributes need root");
        }
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("nowhere", dir.path().join("a")).unwrap();
        std::os::unix::fs::symlink("elsewhere", dir.path().join("b")).unwrap();
        let at = std::fs::File::open(dir.path()).unwrap();
        let target = |name| Subject::at(at.as_fd(), name, false);
        if let Err(e) = target(c"a").resolve().set(c"trusted.t", b"v") {
            skip!("no trusted xattrs on symlinks here: {e}");
        }
        let want = vec![(CString::from(c"trusted.t"), b"v".to_vec())];
        assert_eq!(read_all(target(c"a")).unwrap(), want);
        assert!(read_all(target(c"b")).unwrap().is_empty());
        assert!(copy_all(target(c"a"), target(c"b"), true).is_ok());
        assert_eq!(read_all(target(c"b")).unwrap(), want);
    }

    /// An entry reached by the *xattrat calls and the same entry through /proc agree: what one
    /// sets the other reads, lists and removes, for a file and (followed or not) a symlink to
    /// it. Where the kernel lacks the calls, `Resolved::At` goes through /proc itself.
    #[test]
    fn entries_reached_relative_to_their_directory_or_through_proc_agree() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"x").unwrap();
        std::os::unix::fs::symlink("f", dir.path().join("l")).unwrap();
        let at = std::fs::File::open(dir.path()).unwrap();
        let both = |name: &'static CStr, follow| {
            let direct = Resolved::At {
                dir: at.as_fd(),
                name,
                follow,
            };
            let proc = through_proc(at.as_fd(), name, follow);
            (direct, proc)
        };
        let names = |r: &Resolved<'_>| {
            let mut buf = vec![0u8; 4096];
            let n = r.list(&mut buf).unwrap();
            buf.truncate(n);
            buf
        };
        let value = |r: &Resolved<'_>, attr| {
            let mut buf = vec![0u8; 64];
            r.get(attr, &mut buf).map(|n| buf[..n].to_vec())
        };
        let (file, file_proc) = both(c"f", false);
        if let Err(e) = file.set(c"user.one", b"1") {
            skip!("no user xattrs here: {e}");
        }
        assert_eq!(value(&file_proc, c"user.one").unwrap(), b"1");
        file_proc.set(c"user.two", b"22").unwrap();
        assert_eq!(value(&file, c"user.two").unwrap(), b"22");
        assert_eq!(names(&file), names(&file_proc));
        assert!(names(&file).windows(9).any(|w| w == b"user.two\0"));
        // Through the symlink, followed: the file's; not followed: the link's own (none).
        let (link, link_proc) = both(c"l", true);
        assert_eq!(value(&link, c"user.two").unwrap(), b"22");
        assert_eq!(names(&link), names(&link_proc));
        let (own, own_proc) = both(c"l", false);
        assert_eq!(names(&own), names(&own_proc));
        assert!(!names(&own).windows(8).any(|w| w == b"user.one"));
        file.remove(c"user.one").unwrap();
        assert_eq!(
            value(&file_proc, c"user.one").unwrap_err(),
            Errno::NODATA,
            "removed"
        );
        assert_eq!(file.remove(c"user.one").unwrap_err(), Errno::NODATA);
        file_proc.remove(c"user.two").unwrap();
        assert!(names(&file).is_empty());
    }
}
