//! Extended attributes (ACLs included: they are the `system.posix_acl_*` attributes).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Why copying extended attributes failed.
pub(crate) enum XattrError {
    /// The destination filesystem takes no extended attributes at all.
    Unsupported(io::Error),
    /// Reading or writing one attribute failed.
    Failed(io::Error),
}

/// Copies every extended attribute of `src` that this process can read onto `dst`.
pub(crate) fn copy_all(src: BorrowedFd<'_>, dst: BorrowedFd<'_>) -> Result<(), XattrError> {
    let names = match list(src) {
        Ok(names) => names,
        // The source filesystem has none to give.
        Err(e) if unsupported(&e) => return Ok(()),
        Err(e) => return Err(XattrError::Failed(e)),
    };
    let mut value = Vec::new();
    for name in names.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let mut cname = name.to_vec();
        cname.push(0);
        match get(src, &cname, &mut value) {
            Ok(()) => {}
            // Gone since the listing, or not ours to read (trusted.* without root).
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENODATA | libc::EPERM)) => continue,
            Err(e) => return Err(XattrError::Failed(e)),
        }
        // SAFETY: `cname` is NUL-terminated and `value` is readable for its length.
        let rc = unsafe {
            libc::fsetxattr(
                dst.as_raw_fd(),
                cname.as_ptr().cast(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        };
        if rc != 0 {
            let e = io::Error::last_os_error();
            return Err(if unsupported(&e) {
                XattrError::Unsupported(e)
            } else {
                XattrError::Failed(e)
            });
        }
    }
    Ok(())
}

fn unsupported(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP))
}

/// The NUL-separated list of attribute names.
fn list(fd: BorrowedFd<'_>) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    sized_read(&mut buf, |ptr, len| {
        // SAFETY: `ptr` is null with `len` 0 (a size query) or writable for `len` bytes.
        unsafe { libc::flistxattr(fd.as_raw_fd(), ptr.cast(), len) }
    })?;
    Ok(buf)
}

fn get(fd: BorrowedFd<'_>, name: &[u8], value: &mut Vec<u8>) -> io::Result<()> {
    sized_read(value, |ptr, len| {
        // SAFETY: `name` is NUL-terminated; `ptr` is null with `len` 0 or writable for `len`.
        unsafe { libc::fgetxattr(fd.as_raw_fd(), name.as_ptr().cast(), ptr.cast(), len) }
    })
}

/// The xattr calls' protocol: ask for the size, read, and start over if it grew meanwhile.
fn sized_read(buf: &mut Vec<u8>, call: impl Fn(*mut u8, usize) -> isize) -> io::Result<()> {
    loop {
        let size = call(std::ptr::null_mut(), 0);
        if size < 0 {
            return Err(io::Error::last_os_error());
        }
        buf.resize(size as usize, 0);
        if size == 0 {
            return Ok(());
        }
        let n = call(buf.as_mut_ptr(), buf.len());
        if n >= 0 {
            buf.truncate(n as usize);
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ERANGE) {
            return Err(e);
        }
    }
}
