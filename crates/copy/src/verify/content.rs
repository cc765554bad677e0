//! Comparing the bytes of two open files, by the pool of threads that `verify` runs.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

use crate::sys::{self};

use super::difference::{Difference, DifferenceKind};

pub(super) const BLOCK: usize = 1 << 20;

/// A pair of open regular files whose contents a worker compares.
pub(super) struct ContentJob {
    pub(super) path: PathBuf,
    pub(super) src: OwnedFd,
    pub(super) dst: OwnedFd,
}

/// A worker's verdict on one file: a difference, if any, and the bytes compared.
pub(super) type Compared = (Option<Difference>, u64);

pub(super) fn compare_content(job: &ContentJob, bufs: &mut (Vec<u8>, Vec<u8>)) -> Compared {
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
                // One ended first: the file changed size after it was stated.
                DifferenceKind::Size {
                    src: offset + n as u64,
                    dst: offset + m as u64,
                }
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
        if n < a.len() {
            return (None, offset);
        }
    }
}
