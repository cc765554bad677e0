//! `--resume`: finishing an interrupted copy. A destination file is skipped only when it is
//! provably complete; the run's stale temporaries are removed. Everything else is recopied by
//! the ordinary path, and directory metadata is applied again on the way out.

use std::ffi::CStr;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::BorrowedFd;

use crate::sys::{self, Kind, Stat};
use crate::temp;

/// What the size and times alone say about an existing destination file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QuickCheck {
    /// Complete: same size and, where times are preserved, the same ns mtime (set last, so a
    /// file with it has all its content and metadata).
    Complete,
    /// Incomplete or different: recopy it.
    Recopy,
    /// Same size, but only its content can tell.
    CompareContent,
}

/// Judges an existing regular destination `dst` of the source `src` without reading either.
/// `checksum`: content decides, always (`--resume=checksum`).
pub(crate) fn quick_check(
    checksum: bool,
    times_preserved: bool,
    src: &Stat,
    dst: &Stat,
) -> QuickCheck {
    if dst.kind() != Kind::File || dst.size != src.size {
        return QuickCheck::Recopy;
    }
    match (checksum, times_preserved) {
        (false, true) if dst.mtime == src.mtime => QuickCheck::Complete,
        // Under -a/-p a complete file has the source's mtime: any other is unfinished.
        (false, true) => QuickCheck::Recopy,
        _ => QuickCheck::CompareContent,
    }
}

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

/// Removes the temporaries an interrupted `--atomic` run left in the directory `dir`: only
/// ringio's own, and only those no live run holds (see [`crate::temp`]).
pub(crate) fn remove_stale_temps(
    dir: BorrowedFd<'_>,
    buf: &mut [MaybeUninit<u8>],
) -> io::Result<()> {
    let mut candidates = Vec::new();
    sys::read_dir_entries(dir, buf, |name: &CStr, kind| {
        if matches!(kind, Some(Kind::File) | None) && temp::is_ours(name.to_bytes()) {
            candidates.push(name.to_owned());
        }
    })?;
    for name in candidates {
        temp::remove_if_stale(dir, &name)?;
    }
    Ok(())
}
