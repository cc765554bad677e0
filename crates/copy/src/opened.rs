//! An opened source and the destination being written ([`OpenedPair`]), and the end of every
//! file copy: metadata, close, rename into place, count.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::ctx::Ctx;
use crate::error::{CopyError, Op};
use crate::finalize;
use crate::manifest::hashing::FileHash;
use crate::node::DirHold;
use crate::quote::quote;
use crate::replaced::Replaced;
use crate::sys::{self, Kind, Stat};

/// An open source and the destination being written, under a temporary name with `--atomic`.
pub(crate) struct OpenedPair {
    pub src: OwnedFd,
    /// The source as opened (statx of `src`, not of its name): what its data and metadata are
    /// copied from.
    pub stat: Stat,
    pub dst: OwnedFd,
    /// The destination was made by this run (not an existing file written over).
    pub created: bool,
    /// `--atomic`: the name written under, renamed to the real one when complete.
    pub temp: Option<CString>,
    /// `--atomic` onto an existing file: what that file keeps through a write, given to the
    /// temporary before the rename.
    pub replaces: Option<Replaced>,
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
    /// `--backup`: the name the old destination was renamed to, for the `-v` line.
    pub backup: Option<CString>,
    /// `--hash`: the hash of the bytes written, as they are written.
    pub hash: Option<FileHash>,
}

impl OpenedPair {
    /// Gives up a copy that will not be completed (failure, Ctrl-C): closes both files and
    /// removes what this run wrote under a name of its own.
    pub fn abandon(self, dir: &DirHold<'_>, dst: &CStr) {
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

/// Holds the copy at the two moments a source can change under it unseen: between the stat
/// of its name and its open, and between its open and its data. Only when the environment
/// sets `RINGIO_TEST_HOLD_DIR` (read once): at the k-th hold the copy creates the file `k`
/// there and waits until it is gone. The tests of sources renamed, swapped, shrunk or grown
/// mid-copy wait for the file, change the source, and remove it, instead of relying on timing.
pub(crate) fn stop_for_tests() {
    static DIR: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
    static HOLDS: AtomicUsize = AtomicUsize::new(0);
    let Some(dir) = DIR.get_or_init(|| std::env::var_os("RINGIO_TEST_HOLD_DIR").map(Into::into))
    else {
        return;
    };
    let k = HOLDS.fetch_add(1, Ordering::SeqCst) + 1;
    let marker = dir.join(k.to_string());
    if std::fs::write(&marker, b"").is_err() {
        return;
    }
    while marker.exists() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Counts a finished entry and prints it under `-v`, with the name an existing destination was
/// backed up to (`--backup`).
pub(crate) fn count_done(dir: &DirHold<'_>, src: &CStr, dst: &CStr, backup: Option<&CStr>) {
    let ctx = dir.ctx;
    ctx.progress.files.fetch_add(1, Ordering::Relaxed);
    if ctx.reporter.verbose() {
        let (src, dst_path) = (dir.src_path(Some(src)), dir.dst_path(Some(dst)));
        match backup {
            Some(aside) => ctx.reporter.verbose_line(&format!(
                "{} -> {} (backup: {})",
                quote(&src),
                quote(&dst_path),
                quote(&dir.dst_path(Some(aside)))
            )),
            None => ctx.reporter.copied(&src, &dst_path),
        }
    }
}

/// How a file's bytes were read, for the check that its source did not change meanwhile.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Copied {
    /// This many bytes, taken by the one read that also saw end of file: one moment's view
    /// of the file, with nothing to check again.
    Snapshot(u64),
    /// This many bytes, over several reads or chunks (or moved in the kernel): the source is
    /// stat'ed again after the last one.
    Spread(u64),
}

/// The end of every regular file copy that is not chunked, and of a chunked one once its last
/// chunk is done: the check that the source held still, metadata, close, rename into place
/// (`--atomic`), count.
///
/// A source whose size or modification time changed while it was copied fails the copy: its
/// copy would hold bytes of several versions of the file, or, where it shrank under chunks
/// written in parallel, zeros it never had. That copy is removed (under `--atomic` the old
/// destination stays as it was); written through a symlink, where the name is not this run's
/// to remove, it is emptied.
pub(crate) fn finish_file(
    ctx: &Ctx<'_>,
    dir: &DirHold<'_>,
    src: &CStr,
    dst: &CStr,
    mut pair: OpenedPair,
    copied: Copied,
) -> Result<(), CopyError> {
    let (Copied::Snapshot(bytes) | Copied::Spread(bytes)) = copied;
    // Before the check that the source held still: bytes read back for the hash are then
    // known to be the ones written.
    let hex = match pair.hash.take().map(|h| h.finish(pair.src.as_fd(), bytes)) {
        Some(Err(e)) => {
            // The copy stands; without its hash it stays out of the manifest.
            ctx.fail(CopyError::io(Op::Read, dir.src_path(Some(src)), e));
            None
        }
        Some(Ok(hex)) => Some(hex),
        None => None,
    };
    if let Copied::Spread(_) = copied {
        if !pair.stream && !ctx.plan.attributes_only {
            if let Err(e) = held_still(pair.src.as_fd(), &pair.stat) {
                return Err(give_up_changed(dir, src, dst, pair, e));
            }
        }
    }
    let path = || dir.dst_path(Some(dst));
    let stat = pair.stat;
    if let Some(old) = &pair.replaces {
        // Short of the old file's attributes, the old file stays.
        if let Err(e) = old.keep(ctx, pair.dst.as_fd(), &path) {
            pair.abandon(dir, dst);
            return Err(e);
        }
    }
    let meta = finalize::file(
        ctx,
        dir.in_dir(),
        (pair.src.as_fd(), pair.dst.as_fd()),
        &stat,
        pair.created,
        &path,
    );
    let backup = pair.backup.clone();
    place(ctx, dir, dst, pair)?;
    if let (Some(recorder), Some(hex)) = (&ctx.recorder, hex) {
        // The length hashed and written, whatever stat said (a FIFO, a /proc file).
        recorder.file(
            &path(),
            &Stat {
                size: bytes,
                ..stat
            },
            hex,
        );
    }
    if bytes != stat.size && stat.kind() == Kind::File && ctx.reporter.verbose() {
        // A file that held still and still read a size other than its stat's: a /proc file.
        ctx.reporter.note(&format!(
            "{} changed size while it was copied ({} bytes at start, {bytes} copied)",
            quote(&dir.src_path(Some(src))),
            stat.size
        ));
    }
    count_done(dir, src, dst, backup.as_deref());
    meta
}

/// Ok when the source open as `fd` still has the size and modification time of `stat`, which
/// was taken when it was opened; otherwise what changed.
pub(crate) fn held_still(fd: BorrowedFd<'_>, stat: &Stat) -> io::Result<()> {
    let now = ringio_base::hooks::between_rewrites(|| sys::fstatx(fd))?;
    if now.size != stat.size {
        return Err(io::Error::other(format!(
            "{} bytes when opened, {} now",
            stat.size, now.size
        )));
    }
    if now.mtime != stat.mtime {
        return Err(io::Error::other("modified"));
    }
    Ok(())
}

/// The error for a source that changed while it was copied, whose copy was `removed` (or
/// emptied, where the name is not this run's to remove).
pub(crate) fn changed_while_copied(
    src: &Path,
    dst: &Path,
    why: &io::Error,
    removed: bool,
) -> CopyError {
    CopyError::Refused(format!(
        "{} changed while it was copied ({why}): its copy {} was {}",
        quote(&src),
        quote(&dst),
        if removed { "removed" } else { "emptied" }
    ))
}

/// Abandons the copy of a source that changed while it was copied, and says so.
fn give_up_changed(
    dir: &DirHold<'_>,
    src: &CStr,
    dst: &CStr,
    pair: OpenedPair,
    why: io::Error,
) -> CopyError {
    let ours = pair.temp.is_some() || pair.removable;
    if !ours {
        let _ = rustix::fs::ftruncate(&pair.dst, 0);
    }
    pair.abandon(dir, dst);
    changed_while_copied(
        &dir.src_path(Some(src)),
        &dir.dst_path(Some(dst)),
        &why,
        ours,
    )
}

/// Closes a complete destination file and, under `--atomic`, renames it over its real name
/// (after an fdatasync under `--fsync`, so the new name never points at missing data). On
/// failure the copy is abandoned.
fn place(
    ctx: &Ctx<'_>,
    dir: &DirHold<'_>,
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
