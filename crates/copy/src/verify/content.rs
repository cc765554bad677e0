//! Comparing the bytes of two open files, by the pool of threads that `verify` runs.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sys::{self};

use super::difference::{Difference, DifferenceKind};

pub(super) const BLOCK: usize = 1 << 20;

/// A pair of open regular files whose contents a worker compares.
pub(super) struct ContentJob {
    pub(super) path: PathBuf,
    pub(super) src: OwnedFd,
    pub(super) dst: OwnedFd,
    /// The sizes stat gave (source, destination): hints, since a file can change while it is
    /// read, and /proc or /sys files say 0 and hold bytes.
    pub(super) stated: (u64, u64),
}

/// A worker's verdict on one file: a difference, if any, and the bytes compared.
pub(super) type Compared = (Option<Difference>, u64);

/// Compares both files to end of file, whatever their sizes said, adding the bytes compared
/// to `read` block by block.
pub(super) fn compare_content(
    job: &ContentJob,
    bufs: &mut (Vec<u8>, Vec<u8>),
    read: &AtomicU64,
) -> Compared {
    resize_source_for_test(job);
    let unreadable = |side, e: io::Error| Difference {
        path: job.path.clone(),
        kind: DifferenceKind::Unreadable {
            side,
            op: "read",
            reason: crate::error::reason(&e).to_string(),
        },
    };
    let mut offset = 0u64;
    loop {
        let (a, b) = (&mut bufs.0, &mut bufs.1);
        let n = match sys::pread_full(job.src.as_fd(), a, offset) {
            Ok(n) => n,
            Err(e) => return (Some(unreadable("source", e)), offset),
        };
        let m = match sys::pread_full(job.dst.as_fd(), b, offset) {
            Ok(m) => m,
            Err(e) => return (Some(unreadable("destination", e)), offset),
        };
        if a[..n.min(m)] != b[..n.min(m)] || n != m {
            let at = a[..n.min(m)]
                .iter()
                .zip(&b[..n.min(m)])
                .position(|(x, y)| x != y)
                .unwrap_or(n.min(m));
            let kind = if n != m && at == n.min(m) {
                // One ended first; the other is read on to its end, for the sizes to name.
                let (longer, buf) = if n > m { (&job.src, a) } else { (&job.dst, b) };
                let mut end = offset + n.max(m) as u64;
                while let Ok(more @ 1..) = sys::pread(longer.as_fd(), buf, end) {
                    end += more as u64;
                }
                let (src, dst) = if n > m {
                    (end, offset + m as u64)
                } else {
                    (offset + n as u64, end)
                };
                changed(job.stated, (src, dst)).unwrap_or(DifferenceKind::Size { src, dst })
            } else {
                DifferenceKind::Content {
                    offset: offset + at as u64,
                }
            };
            let diff = Difference {
                path: job.path.clone(),
                kind,
            };
            return (Some(diff), offset + n as u64);
        }
        offset += n as u64;
        read.fetch_add(n as u64, Ordering::Relaxed);
        if n < a.len() {
            let diff = changed(job.stated, (offset, offset)).map(|kind| Difference {
                path: job.path.clone(),
                kind,
            });
            return (diff, offset);
        }
    }
}

/// Which side, if either, held another number of bytes than stat said, given the bytes each
/// held to its end of file (source, destination). A side stated at 0 has no size to break:
/// /proc and /sys files say 0 and hold bytes.
fn changed(stated: (u64, u64), read: (u64, u64)) -> Option<DifferenceKind> {
    [
        ("source", stated.0, read.0),
        ("destination", stated.1, read.1),
    ]
    .into_iter()
    .find(|&(_, stated, read)| stated > 0 && read != stated)
    .map(|(side, stated, read)| DifferenceKind::Changed { side, stated, read })
}

/// Test-only: the source's length changes after it was stat'ed and before its bytes are
/// compared (see ringio-base's hook); the comparer's descriptor is read-only, so the hook opens
/// a writable one through its /proc link.
fn resize_source_for_test(job: &ContentJob) {
    let link = format!("/proc/self/fd/{}", job.src.as_raw_fd());
    ringio_base::hooks::resize_after_stat(std::path::Path::new(&link));
}
