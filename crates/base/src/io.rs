//! Positioned reads shared by the copy engines and `ringio read`.

use std::io;
use std::os::fd::BorrowedFd;

/// pread; retries EINTR.
pub fn pread(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    loop {
        match rustix::io::pread(fd, &mut *buf, offset) {
            Err(rustix::io::Errno::INTR) => continue,
            done => return done.map_err(io::Error::from),
        }
    }
}
