//! Whether two files hold the same bytes: `cp --resume=checksum` (and `--resume` without kept
//! times), `sync -c`, and `--copy-dest`/`--link-dest` matches ask it. Their rule, the quick
//! check that asks it, is [`crate::policy::sync::quick_check`].

use std::io;
use std::os::fd::BorrowedFd;

use crate::sys;

/// True when both files hold the same bytes, read in blocks of at most 1 MiB (`size_hint`, the
/// expected size, keeps small files to small buffers).
pub(crate) fn same_content(
    a: BorrowedFd<'_>,
    b: BorrowedFd<'_>,
    size_hint: u64,
) -> io::Result<bool> {
    let block = (size_hint as usize).saturating_add(1).clamp(4096, 1 << 20);
    let mut bufs = (vec![0u8; block], vec![0u8; block]);
    let mut at = 0u64;
    loop {
        let n = sys::pread_full(a, &mut bufs.0, at)?;
        let m = sys::pread_full(b, &mut bufs.1, at)?;
        if n != m || bufs.0[..n] != bufs.1[..m] {
            return Ok(false);
        }
        if n < block {
            return Ok(true);
        }
        at += n as u64;
    }
}
