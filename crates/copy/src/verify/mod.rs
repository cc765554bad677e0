//! `ringio verify`: compares two trees entry by entry. The one comparer that `ringio cp
//! --verify`, the benchmarks and users share.
//!
//! The walk is relative to directory descriptors, like the copy's, so trees deeper than
//! `PATH_MAX` compare too. Metadata is compared as the walk goes; file contents are compared by
//! a pool of threads that read both files in 1 MiB blocks (comparing the bytes themselves, which
//! is stronger than a hash and as fast: both files must be read either way). Memory stays
//! bounded: one directory listing per level, a bounded queue of open file pairs, and a map of
//! the inodes that have more than one link.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::mpsc;

use crate::sys::{self, Kind, Stat};

mod content;
mod difference;
mod manifest;
mod promise;
mod report;
mod walk;

pub use difference::{Difference, DifferenceKind};
pub use manifest::{
    check_listing, check_manifest, Finding, ManifestError, ManifestReport, ReadFrom,
};
pub use report::{Follow, MadeAs, VerifyError, VerifyOptions, VerifyReport, KEPT_DIFFERENCES};

use content::{compare_content, Compared, ContentJob, BLOCK};
use walk::Walk;

/// Compares the tree (or file, or symlink) at `src` with the one at `dst`. Source symlinks are
/// followed as `opts.follow` says (by default never, the roots included); the destination's
/// never are. Each difference is passed to `on_difference` as it is found,
/// on the calling thread.
pub fn verify(
    src: &Path,
    dst: &Path,
    opts: &VerifyOptions,
    on_difference: &mut dyn FnMut(&Difference),
) -> Result<VerifyReport, VerifyError> {
    verify_counted(src, dst, opts, on_difference, &AtomicU64::new(0))
}

/// [`verify`], adding to `read` the bytes of each file's content compared as they are (for a
/// progress bar).
pub fn verify_counted(
    src: &Path,
    dst: &Path,
    opts: &VerifyOptions,
    on_difference: &mut dyn FnMut(&Difference),
    read: &AtomicU64,
) -> Result<VerifyReport, VerifyError> {
    let root = |path: &Path| -> Result<(OwnedFd, CString, Stat), VerifyError> {
        let err = |op, source| VerifyError {
            op,
            path: path.to_path_buf(),
            source,
        };
        let bytes = path.as_os_str().as_bytes();
        let c = CString::new(bytes).map_err(|_| err("stat", io::ErrorKind::InvalidInput.into()))?;
        let stat = sys::statx_at(rustix::fs::CWD, &c, false).map_err(|e| err("stat", e))?;
        // The parent directory, so the root is compared like any other entry.
        let (parent, name) = match path.file_name() {
            Some(name) if stat.kind() != Kind::Dir || path.parent().is_some() => {
                let parent = match path.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p,
                    _ => Path::new("."),
                };
                (parent.to_path_buf(), name.as_bytes().to_vec())
            }
            _ => (path.to_path_buf(), b".".to_vec()),
        };
        let parent_c = CString::new(parent.as_os_str().as_bytes())
            .map_err(|_| err("open", io::ErrorKind::InvalidInput.into()))?;
        let fd = sys::open_dir(rustix::fs::CWD, &parent_c, true).map_err(|e| err("open", e))?;
        let name =
            CString::new(name).map_err(|_| err("open", io::ErrorKind::InvalidInput.into()))?;
        Ok((fd, name, stat))
    };
    let (src_parent, src_name, _) = root(src)?;
    let (dst_parent, dst_name, _) = root(dst)?;

    let (work_tx, work_rx) = mpsc::sync_channel::<ContentJob>(opts.threads.max(1) * 4);
    let work_rx = std::sync::Mutex::new(work_rx);
    let (found_tx, found_rx) = mpsc::channel::<Compared>();
    std::thread::scope(|scope| {
        for _ in 0..opts.threads.max(1) {
            let found_tx = found_tx.clone();
            let work_rx = &work_rx;
            scope.spawn(move || {
                let mut bufs = (vec![0u8; BLOCK], vec![0u8; BLOCK]);
                loop {
                    let job = match work_rx.lock().expect("work queue").recv() {
                        Ok(job) => job,
                        Err(_) => return,
                    };
                    if found_tx
                        .send(compare_content(&job, &mut bufs, read))
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
        drop(found_tx);
        let mut walk = Walk {
            opts,
            work: Some(work_tx),
            results: &found_rx,
            on_difference,
            report: VerifyReport::default(),
            links: HashMap::new(),
            links_back: HashMap::new(),
            dir_buf: vec![MaybeUninit::uninit(); 64 * 1024],
        };
        walk.entry(
            src_parent.as_fd(),
            dst_parent.as_fd(),
            &src_name,
            &dst_name,
            PathBuf::new(),
        );
        // Closing the queue lets the workers finish what is queued and stop.
        walk.work = None;
        while let Ok(result) = found_rx.recv() {
            walk.take(result);
        }
        Ok(walk.report)
    })
}
