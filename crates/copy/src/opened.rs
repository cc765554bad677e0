//! An opened source and the destination being written ([`OpenedPair`]), and the end of every
//! file copy: metadata, close, rename into place, count.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;

use crate::ctx::Ctx;
use crate::error::{CopyError, Op};
use crate::finalize;
use crate::node::DirNode;
use crate::sys::{self, Kind, Stat};

/// An open source and the destination being written, under a temporary name with `--atomic`.
pub(crate) struct OpenedPair {
    pub src: OwnedFd,
    pub dst: OwnedFd,
    /// The destination was made by this run (not an existing file written over).
    pub created: bool,
    /// `--atomic`: the name written under, renamed to the real one when complete.
    pub temp: Option<CString>,
    /// `--atomic` through a symlink: the directory of the file the link points to, and that
    /// file's name there. The temporary is written in that directory and renamed over it.
    pub link_target: Option<(OwnedFd, CString)>,
    /// The destination name may be removed if the copy fails: this run created it, or it was
    /// a plain regular file whose old content is already gone. Never a symlink written
    /// through, a FIFO or a device.
    pub removable: bool,
    /// The source or the destination is not a regular file (a pipe, a device): bytes move in
    /// order by read/write, with no clones, chunks, holes or truncation.
    pub stream: bool,
}

impl OpenedPair {
    /// Gives up a copy that will not be completed (failure, Ctrl-C): closes both files and
    /// removes what this run wrote under a name of its own.
    pub fn abandon(self, dir: &DirNode<'_>, dst: &CStr) {
        let OpenedPair {
            src,
            dst: dst_fd,
            temp,
            link_target,
            removable,
            ..
        } = self;
        drop((src, dst_fd));
        match (&temp, &link_target) {
            (Some(temp), Some((target_dir, _))) => {
                let _ = sys::unlinkat(target_dir.as_fd(), temp);
            }
            (Some(temp), None) => {
                let _ = sys::unlinkat(dir.dst_fd(), temp);
            }
            (None, _) if removable => {
                let _ = sys::unlinkat(dir.dst_fd(), dst);
            }
            (None, _) => {}
        }
    }
}

/// Counts a finished entry and prints it under `-v`.
pub(crate) fn count_done(ctx: &Ctx<'_>, dir: &DirNode<'_>, src: &CStr, dst: &CStr) {
    ctx.progress.files.fetch_add(1, Ordering::Relaxed);
    if ctx.plan.verbose {
        let dst = dir.dst_path(Some(dst));
        let src = dir.src_path(Some(src));
        let backup = match ctx.plan.backup {
            Some(_) => ctx.backups.lock().expect("backups lock").remove(&dst),
            None => None,
        };
        match backup {
            Some(aside) => ctx.reporter.verbose_line(&format!(
                "'{}' -> '{}' (backup: '{}')",
                src.display(),
                dst.display(),
                aside.display()
            )),
            None => ctx.reporter.copied(&src, &dst),
        }
    }
}

/// Metadata, close, rename into place (`--atomic`), count: the end of every regular file copy
/// that is not chunked.
pub(crate) fn finish_file(
    ctx: &Ctx<'_>,
    dir: &DirNode<'_>,
    src: &CStr,
    dst: &CStr,
    pair: OpenedPair,
    stat: &Stat,
    copied: u64,
) -> Result<(), CopyError> {
    let path = || dir.dst_path(Some(dst));
    let meta = finalize::file(
        ctx,
        dir.dst_setgid,
        pair.src.as_fd(),
        pair.dst.as_fd(),
        stat,
        pair.created,
        dir.fresh,
        &path,
    );
    place(ctx, dir, dst, pair)?;
    if copied != stat.size && stat.kind() == Kind::File && ctx.plan.verbose {
        ctx.reporter.note(&format!(
            "'{}' changed size while it was copied ({} bytes at start, {copied} copied)",
            dir.src_path(Some(src)).display(),
            stat.size
        ));
    }
    count_done(ctx, dir, src, dst);
    meta
}

/// Closes a complete destination file and, under `--atomic`, renames it over its real name
/// (after an fdatasync under `--fsync`, so the new name never points at missing data). On
/// failure the copy is abandoned.
fn place(
    ctx: &Ctx<'_>,
    dir: &DirNode<'_>,
    dst: &CStr,
    mut pair: OpenedPair,
) -> Result<(), CopyError> {
    let path = || dir.dst_path(Some(dst));
    if pair.temp.is_some() && ctx.plan.fsync {
        if let Err(e) = rustix::fs::fdatasync(&pair.dst) {
            pair.abandon(dir, dst);
            return Err(CopyError::io(Op::Sync, path(), io::Error::from(e)));
        }
    }
    let Some(temp) = pair.temp.take() else {
        let removable = pair.removable;
        let OpenedPair {
            src, dst: dst_fd, ..
        } = pair;
        drop(src);
        return sys::close(dst_fd).map_err(|e| {
            if removable {
                let _ = sys::unlinkat(dir.dst_fd(), dst);
            }
            CopyError::io(Op::Close, path(), e)
        });
    };
    let OpenedPair {
        src,
        dst: dst_fd,
        link_target,
        ..
    } = pair;
    drop(src);
    let (at, name) = match &link_target {
        Some((target_dir, name)) => (target_dir.as_fd(), name.as_c_str()),
        None => (dir.dst_fd(), dst),
    };
    // The temporary's lock must last until the rename, past the close that reports errors.
    let lock = crate::temp::keep_lock(dst_fd.as_fd());
    let result = sys::close(dst_fd)
        .map_err(|e| CopyError::io(Op::Close, path(), e))
        .and_then(|()| {
            rustix::fs::renameat(at, temp.as_c_str(), at, name)
                .map_err(|e| CopyError::io(Op::Rename, path(), io::Error::from(e)))
        });
    if result.is_err() {
        let _ = sys::unlinkat(at, &temp);
    }
    drop(lock);
    result
}
