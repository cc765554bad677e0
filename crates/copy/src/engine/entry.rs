//! Copying one directory entry synchronously: the path every engine shares for symlinks,
//! special files, merges into existing directories, and (for the synchronous engines) files.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::data::BigFile;
use super::Mover;
use crate::backup;
use crate::error::{CopyError, Op};
use crate::finalize;
use crate::links::Linked;
use crate::node::{Ctx, DirHold, DirNode};
use crate::plan::{Dereference, Overwrite};
use crate::sys::{self, Kind, Stat};
use crate::walk::{Queue, Task};

/// Copies one entry of `dir` found by the walk (same name on both sides).
pub(crate) fn copy_entry<'a>(
    ctx: &'a Ctx<'a>,
    mover: &mut dyn Mover<'a>,
    dir: &Arc<DirNode<'a>>,
    name: CString,
    queue: &Queue<'a>,
) {
    let follow = ctx.plan.dereference == Dereference::Always;
    match sys::statx_at(dir.src_fd(), &name, follow) {
        Ok(stat) => copy_stated(ctx, mover, dir, name.clone(), name, stat, follow, queue),
        Err(e) => ctx.fail(CopyError::io(Op::Stat, dir.src_path(Some(&name)), e)),
    }
}

/// Copies a command-line file operand `src` of `dir` to `dst` in the destination directory.
pub(crate) fn copy_root_entry<'a>(
    ctx: &'a Ctx<'a>,
    mover: &mut dyn Mover<'a>,
    dir: &Arc<DirNode<'a>>,
    src: &CStr,
    dst: &CStr,
    follow: bool,
    queue: &Queue<'a>,
) {
    match sys::statx_at(dir.src_fd(), src, follow) {
        Ok(stat) => copy_stated(
            ctx,
            mover,
            dir,
            src.to_owned(),
            dst.to_owned(),
            stat,
            follow,
            queue,
        ),
        Err(e) => ctx.fail(CopyError::io(Op::Stat, dir.src_path(Some(src)), e)),
    }
}

/// Dispatches on the source's type once it is known.
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_stated<'a>(
    ctx: &'a Ctx<'a>,
    mover: &mut dyn Mover<'a>,
    dir: &Arc<DirNode<'a>>,
    src: CString,
    dst: CString,
    stat: Stat,
    follow: bool,
    queue: &Queue<'a>,
) {
    match stat.kind() {
        Kind::Dir => {
            if ctx.plan.recursive {
                queue.push(Task::Subdir {
                    parent: dir.clone(),
                    name: src,
                    stat: Some(stat),
                });
            } else {
                ctx.fail(CopyError::Refused(format!(
                    "-r not specified; omitting directory '{}'",
                    dir.src_path(Some(&src)).display()
                )));
            }
        }
        Kind::File => {
            if let Err(e) = copy_file(ctx, mover, dir, &src, &dst, &stat, follow, queue) {
                ctx.fail(e);
            }
        }
        Kind::Symlink | Kind::Special => match copy_other(ctx, dir, &src, &dst, &stat) {
            Ok(true) => count_done(ctx, dir, &src, &dst),
            Ok(false) => {}
            Err(e) => ctx.fail(e),
        },
    }
}

/// Counts a finished entry and prints it under `-v`.
pub(crate) fn count_done(ctx: &Ctx<'_>, dir: &DirNode<'_>, src: &CStr, dst: &CStr) {
    ctx.progress.files.fetch_add(1, Ordering::Relaxed);
    if ctx.plan.verbose {
        ctx.reporter
            .copied(&dir.src_path(Some(src)), &dir.dst_path(Some(dst)));
    }
}

/// What is already at the destination name.
pub(crate) enum Existing {
    Nothing,
    Something(Stat),
}

/// Applies cp's rules to an existing destination. `Ok(None)` means skip the entry.
pub(crate) fn check_existing(
    ctx: &Ctx<'_>,
    dir: &DirNode<'_>,
    src: &CStr,
    dst: &CStr,
    stat: &Stat,
) -> Result<Option<Existing>, CopyError> {
    if dir.fresh {
        return Ok(Some(Existing::Nothing));
    }
    let existing = match sys::statx_at(dir.dst_fd(), dst, false) {
        Ok(s) => s,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(Some(Existing::Nothing)),
        Err(e) => return Err(CopyError::io(Op::Stat, dir.dst_path(Some(dst)), e)),
    };
    let same = match sys::statx_at(dir.dst_fd(), dst, true) {
        Ok(target) => target.dev == stat.dev && target.ino == stat.ino,
        Err(_) => false,
    };
    if (existing.dev == stat.dev && existing.ino == stat.ino) || (same && stat.kind() == Kind::File)
    {
        return Err(CopyError::Refused(format!(
            "'{}' and '{}' are the same file",
            dir.src_path(Some(src)).display(),
            dir.dst_path(Some(dst)).display()
        )));
    }
    if existing.kind() == Kind::Dir {
        return Err(CopyError::Refused(format!(
            "cannot overwrite directory '{}' with non-directory",
            dir.dst_path(Some(dst)).display()
        )));
    }
    match ctx.plan.overwrite {
        Overwrite::NoClobber => return Ok(None),
        Overwrite::Update if existing.mtime >= stat.mtime => return Ok(None),
        _ => {}
    }
    if let Some(backup) = &ctx.plan.backup {
        let aside = backup::name_for(dir.dst_fd(), dst, backup)
            .map_err(|e| CopyError::io(Op::ReadDir, dir.dst_path(None), e))?;
        rustix::fs::renameat(dir.dst_fd(), dst, dir.dst_fd(), aside.as_c_str())
            .map_err(|e| CopyError::io(Op::Rename, dir.dst_path(Some(dst)), io::Error::from(e)))?;
        return Ok(Some(Existing::Nothing));
    }
    if ctx.plan.remove_destination {
        remove_then(dir, dst, || Ok(()))
            .map_err(|e| CopyError::io(Op::Remove, dir.dst_path(Some(dst)), e))?;
        return Ok(Some(Existing::Nothing));
    }
    Ok(Some(Existing::Something(existing)))
}

/// An open source and the destination being written, under a temporary name with `--atomic`.
pub(crate) struct OpenedPair {
    pub src: OwnedFd,
    pub dst: OwnedFd,
    /// The destination was made by this run (not an existing file written over).
    pub created: bool,
    /// `--atomic`: the name written under, renamed to the real one when complete.
    pub temp: Option<CString>,
}

impl OpenedPair {
    /// The name the destination's data is written under now.
    pub fn written_name<'n>(&'n self, dst: &'n CStr) -> &'n CStr {
        self.temp.as_deref().unwrap_or(dst)
    }
}

/// Removes a destination that will not be completed (failure, Ctrl-C).
pub(crate) fn discard(dir: &DirNode<'_>, written_name: &CStr) {
    let _ = sys::unlinkat(dir.dst_fd(), written_name);
}

/// `--atomic`: a name in the same directory that no other entry uses.
fn temp_name(dst: &CStr) -> CString {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut name = b".".to_vec();
    // Keep it within NAME_MAX whatever the original length.
    name.extend_from_slice(&dst.to_bytes()[..dst.to_bytes().len().min(200)]);
    name.extend_from_slice(format!(".ringio-{}-{n}", std::process::id()).as_bytes());
    CString::new(name).expect("no NUL in a file name")
}

/// Opens the source and creates (or truncates) the destination, following cp's rules.
/// Returns `None` when the entry is skipped (`-n`, `-u`).
pub(crate) fn open_pair(
    ctx: &Ctx<'_>,
    dir: &DirNode<'_>,
    src: &CStr,
    dst: &CStr,
    stat: &Stat,
    follow: bool,
) -> Result<Option<OpenedPair>, CopyError> {
    let Some(existing) = check_existing(ctx, dir, src, dst, stat)? else {
        return Ok(None);
    };
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    let src_fd = sys::openat(dir.src_fd(), src, libc::O_RDONLY | nofollow, 0)
        .map_err(|e| CopyError::io(Op::Open, dir.src_path(Some(src)), e))?;
    let create = |name: &CStr| {
        sys::openat(
            dir.dst_fd(),
            name,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
            finalize::create_mode(stat),
        )
    };
    if ctx.plan.atomic {
        let temp = temp_name(dst);
        let dst_fd =
            create(&temp).map_err(|e| CopyError::io(Op::Create, dir.dst_path(Some(&temp)), e))?;
        return Ok(Some(OpenedPair {
            src: src_fd,
            dst: dst_fd,
            created: true,
            temp: Some(temp),
        }));
    }
    let (dst_fd, created) = match existing {
        Existing::Nothing => (create(dst), true),
        Existing::Something(old) if old.kind() == Kind::File => {
            match sys::openat(dir.dst_fd(), dst, libc::O_WRONLY | libc::O_TRUNC, 0) {
                // -f: an existing file we cannot open for writing is removed and created anew.
                Err(_) if ctx.plan.force => (remove_then(dir, dst, || create(dst)), true),
                other => (other, false),
            }
        }
        Existing::Something(_) => (remove_then(dir, dst, || create(dst)), true),
    };
    let dst_fd = dst_fd.map_err(|e| CopyError::io(Op::Create, dir.dst_path(Some(dst)), e))?;
    Ok(Some(OpenedPair {
        src: src_fd,
        dst: dst_fd,
        created,
        temp: None,
    }))
}

fn remove_then<T>(
    dir: &DirNode<'_>,
    name: &CStr,
    then: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    match sys::unlinkat(dir.dst_fd(), name) {
        Ok(()) => then(),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => then(),
        Err(e) => Err(e),
    }
}

/// Copies a regular file synchronously; big files are split into chunk tasks.
#[allow(clippy::too_many_arguments)]
fn copy_file<'a>(
    ctx: &'a Ctx<'a>,
    mover: &mut dyn Mover<'a>,
    dir: &Arc<DirNode<'a>>,
    src: &CStr,
    dst: &CStr,
    stat: &Stat,
    follow: bool,
    queue: &Queue<'a>,
) -> Result<(), CopyError> {
    if ctx.plan.preserve.links && stat.nlink > 1 {
        if ctx.plan.atomic {
            // Later names link to the final name, so it must exist before they do: the first
            // copy is finished, renamed and all, while the link map's lock is held.
            let linked = ctx.links.link_or_create(dir, dst, stat, || {
                match open_pair(ctx, dir, src, dst, stat, follow)? {
                    Some(pair) => copy_opened(ctx, mover, dir, src, dst, stat, pair, None),
                    None => Ok(()),
                }
            })?;
            if let Linked::Linked = linked {
                count_done(ctx, dir, src, dst);
            }
            return Ok(());
        }
        match ctx.links.link_or_create(dir, dst, stat, || {
            open_pair(ctx, dir, src, dst, stat, follow)
        })? {
            Linked::Linked => {
                count_done(ctx, dir, src, dst);
                Ok(())
            }
            Linked::Created(Some(pair)) => {
                copy_opened(ctx, mover, dir, src, dst, stat, pair, Some(queue))
            }
            Linked::Created(None) => Ok(()),
        }
    } else {
        match open_pair(ctx, dir, src, dst, stat, follow)? {
            Some(pair) => copy_opened(ctx, mover, dir, src, dst, stat, pair, Some(queue)),
            None => Ok(()),
        }
    }
}

/// Copies the data of an opened pair and finishes the file; with a `queue`, a big file is
/// split into chunks that any worker may copy.
#[allow(clippy::too_many_arguments)]
fn copy_opened<'a>(
    ctx: &'a Ctx<'a>,
    mover: &mut dyn Mover<'a>,
    dir: &Arc<DirNode<'a>>,
    src: &CStr,
    dst: &CStr,
    stat: &Stat,
    pair: OpenedPair,
    queue: Option<&Queue<'a>>,
) -> Result<(), CopyError> {
    let tuning = &ctx.plan.tuning;
    // A sparse file is split by the data it holds, not by its length.
    let weight = if mover.data_path().keeps_holes(stat) {
        stat.blocks.saturating_mul(512).min(stat.size)
    } else {
        stat.size
    };
    let devs = (stat.dev, dir.dst_dev);
    let split = tuning.threads > 1
        && tuning.chunk_size > 0
        && weight >= 2 * tuning.chunk_size
        && mover.data_path().splits_files();
    if let (Some(queue), true) = (queue, split) {
        // A clone takes one call whatever the size: try it before splitting.
        match mover
            .data_path()
            .try_clone(pair.src.as_fd(), pair.dst.as_fd(), devs, stat)
        {
            Ok(true) => {
                ctx.progress.bytes.fetch_add(stat.size, Ordering::Relaxed);
                return finish_file(ctx, dir, src, dst, pair, stat, stat.size);
            }
            Ok(false) => {}
            Err(side) => {
                let written = pair.written_name(dst).to_owned();
                drop(pair);
                discard(dir, &written);
                return Err(side.into_error(dir, src, dst));
            }
        }
        split_into_chunks(ctx, dir, src, dst, pair, stat, queue);
        return Ok(());
    }
    let result = mover
        .data_path()
        .copy_whole(ctx, pair.src.as_fd(), pair.dst.as_fd(), devs, stat);
    let copied = match result {
        Ok(n) => n,
        Err(side) => {
            let written = pair.written_name(dst).to_owned();
            drop(pair);
            discard(dir, &written);
            return Err(side.into_error(dir, src, dst));
        }
    };
    ctx.progress.bytes.fetch_add(copied, Ordering::Relaxed);
    finish_file(ctx, dir, src, dst, pair, stat, copied)
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
    let written = pair.written_name(dst).to_owned();
    let meta = finalize::file(
        dir,
        dst,
        pair.src.as_fd(),
        pair.dst.as_fd(),
        stat,
        pair.created,
    );
    let OpenedPair {
        src: src_fd,
        dst: dst_fd,
        temp,
        ..
    } = pair;
    drop(src_fd);
    if let Err(e) = place(ctx, dir, dst, dst_fd, temp.as_deref()) {
        discard(dir, &written);
        return Err(e);
    }
    if copied != stat.size && ctx.plan.verbose {
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
/// (after an fdatasync under `--fsync`, so the new name never points at missing data).
pub(crate) fn place(
    ctx: &Ctx<'_>,
    dir: &DirNode<'_>,
    dst: &CStr,
    dst_fd: OwnedFd,
    temp: Option<&CStr>,
) -> Result<(), CopyError> {
    let path = || dir.dst_path(Some(dst));
    if temp.is_some() && ctx.plan.fsync {
        rustix::fs::fdatasync(&dst_fd)
            .map_err(|e| CopyError::io(Op::Sync, path(), io::Error::from(e)))?;
    }
    sys::close(dst_fd).map_err(|e| CopyError::io(Op::Close, path(), e))?;
    if let Some(temp) = temp {
        rustix::fs::renameat(dir.dst_fd(), temp, dir.dst_fd(), dst)
            .map_err(|e| CopyError::io(Op::Rename, path(), io::Error::from(e)))?;
    }
    Ok(())
}

fn split_into_chunks<'a>(
    ctx: &'a Ctx<'a>,
    dir: &Arc<DirNode<'a>>,
    src: &CStr,
    dst: &CStr,
    pair: OpenedPair,
    stat: &Stat,
    queue: &Queue<'a>,
) {
    let chunk = ctx.plan.tuning.chunk_size;
    // Reserve the length up front so parallel writers do not race to extend the file.
    let _ = rustix::fs::ftruncate(&pair.dst, stat.size);
    let held = match DirHold::new(dir.clone()) {
        Ok(held) => held,
        Err(e) => return ctx.fail(CopyError::io(Op::OpenDir, dir.dst_path(None), e)),
    };
    let file = Arc::new(BigFile::new(
        held,
        src.to_owned(),
        dst.to_owned(),
        pair,
        *stat,
    ));
    let mut offset = 0;
    while offset < stat.size {
        let last = offset + chunk >= stat.size;
        let len = if last { u64::MAX - offset } else { chunk };
        queue.push(Task::Chunk {
            file: file.clone(),
            offset,
            len,
        });
        offset += chunk;
    }
}

/// Symlinks and special files, hard-linked to an earlier copy where the source is.
/// Returns false when skipped by policy.
fn copy_other(
    ctx: &Ctx<'_>,
    dir: &DirNode<'_>,
    src: &CStr,
    dst: &CStr,
    stat: &Stat,
) -> Result<bool, CopyError> {
    if ctx.plan.preserve.links && stat.nlink > 1 {
        match ctx
            .links
            .link_or_create(dir, dst, stat, || create_other(ctx, dir, src, dst, stat))?
        {
            Linked::Linked => Ok(true),
            Linked::Created(made) => Ok(made),
        }
    } else {
        create_other(ctx, dir, src, dst, stat)
    }
}

fn create_other(
    ctx: &Ctx<'_>,
    dir: &DirNode<'_>,
    src: &CStr,
    dst: &CStr,
    stat: &Stat,
) -> Result<bool, CopyError> {
    let Some(existing) = check_existing(ctx, dir, src, dst, stat)? else {
        return Ok(false);
    };
    if let Existing::Something(_) = existing {
        sys::unlinkat(dir.dst_fd(), dst)
            .map_err(|e| CopyError::io(Op::Remove, dir.dst_path(Some(dst)), e))?;
    }
    let is_symlink = stat.kind() == Kind::Symlink;
    if is_symlink {
        let target = sys::readlinkat(dir.src_fd(), src, stat.size)
            .map_err(|e| CopyError::io(Op::ReadLink, dir.src_path(Some(src)), e))?;
        let target = CString::new(target).map_err(|_| {
            CopyError::io(
                Op::ReadLink,
                dir.src_path(Some(src)),
                io::ErrorKind::InvalidData,
            )
        })?;
        sys::symlinkat(&target, dir.dst_fd(), dst)
            .map_err(|e| CopyError::io(Op::CreateSymlink, dir.dst_path(Some(dst)), e))?;
    } else {
        let mode = (stat.mode & libc::S_IFMT) | (stat.perm() & 0o777);
        sys::mknodat(dir.dst_fd(), dst, mode, stat.rdev)
            .map_err(|e| CopyError::io(Op::CreateSpecial, dir.dst_path(Some(dst)), e))?;
    }
    let path = || dir.dst_path(Some(dst));
    finalize::entry_at(ctx, dir.dst_fd(), dst, stat, is_symlink, &path)?;
    Ok(true)
}
