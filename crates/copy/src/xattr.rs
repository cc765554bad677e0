//! Extended attributes (ACLs included: they are the `system.posix_acl_*` attributes): the one
//! implementation the copy and the tree comparer share.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::BorrowedFd;

use rustix::fs::XattrFlags;
use rustix::io::Errno;

/// Why copying extended attributes failed.
pub(crate) enum XattrError {
    /// The destination filesystem takes no extended attributes at all.
    Unsupported(io::Error),
    /// Reading or writing one attribute failed.
    Failed(io::Error),
}

/// Copies every extended attribute of `src` that this process can read onto `dst`.
pub(crate) fn copy_all(src: BorrowedFd<'_>, dst: BorrowedFd<'_>) -> Result<(), XattrError> {
    let names = match names(src) {
        Ok(names) => names,
        Err(e) => return Err(XattrError::Failed(e)),
    };
    let mut value = Vec::new();
    for name in names.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = CString::new(name).expect("split at NUL");
        match get(src, &name, &mut value) {
            Ok(()) => {}
            // Gone since the listing, or not ours to read (trusted.* without root).
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENODATA | libc::EPERM)) => continue,
            Err(e) => return Err(XattrError::Failed(e)),
        }
        match rustix::fs::fsetxattr(dst, name.as_c_str(), &value, XattrFlags::empty()) {
            Ok(()) => {}
            Err(Errno::OPNOTSUPP) => {
                return Err(XattrError::Unsupported(Errno::OPNOTSUPP.into()));
            }
            Err(e) => return Err(XattrError::Failed(e.into())),
        }
    }
    Ok(())
}

/// Copies the POSIX ACLs of `src` onto `dst` (the default ACL too for a directory): part of
/// the mode that `-p` keeps, as with cp, when the other extended attributes are not kept. A
/// source without ACLs, or a destination that takes none, leaves nothing to do.
pub(crate) fn copy_acls(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, dir: bool) -> io::Result<()> {
    let names: &[&CStr] = if dir {
        &[c"system.posix_acl_access", c"system.posix_acl_default"]
    } else {
        &[c"system.posix_acl_access"]
    };
    let mut value = Vec::new();
    for name in names {
        match get(src, name, &mut value) {
            Ok(()) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENODATA | libc::EOPNOTSUPP)) => {
                continue
            }
            Err(e) => return Err(e),
        }
        match rustix::fs::fsetxattr(dst, *name, &value, XattrFlags::empty()) {
            Ok(()) | Err(Errno::OPNOTSUPP) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Every extended attribute of an open file that this process can read, as (name, value)
/// sorted by name. A filesystem without extended attributes has none.
pub(crate) fn read_all(fd: BorrowedFd<'_>) -> io::Result<Vec<(CString, Vec<u8>)>> {
    let names = names(fd)?;
    let mut out = Vec::new();
    for name in names.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = CString::new(name).expect("split at NUL");
        let mut value = Vec::new();
        match get(fd, &name, &mut value) {
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
fn names(fd: BorrowedFd<'_>) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    match sized_read(&mut buf, |b| rustix::fs::flistxattr(fd, b)) {
        Ok(()) => Ok(buf),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

fn get(fd: BorrowedFd<'_>, name: &CStr, value: &mut Vec<u8>) -> io::Result<()> {
    sized_read(value, |b| rustix::fs::fgetxattr(fd, name, b))
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
            eprintln!("SKIPPED: no user xattrs here: {e}");
            return;
        }
        let want = vec![(CString::from(c"user.t"), b"value".to_vec())];
        assert_eq!(read_all(fa.as_fd()).unwrap(), want);
        assert!(copy_all(fa.as_fd(), fb.as_fd()).is_ok());
        assert_eq!(read_all(fb.as_fd()).unwrap(), want);
    }
}
