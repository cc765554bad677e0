//! Metadata after content: owner, then mode (chown clears setuid), then times (last, since
//! every other change touches ctime and writing into a directory touches its mtime).

use std::ffi::CStr;
use std::io;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;

use crate::ctx::Ctx;
use crate::error::{CopyError, Op};
use crate::plan::{CopyPlan, Overwrite};
use crate::quote::quote;
use crate::sys::{self, Stat};
use crate::xattr::{self, Target, XattrError};
use std::sync::atomic::Ordering;

/// The permission bits of a new entry whose mode is not preserved, before the umask: the
/// source's, or under an explicit `--no-preserve=mode` the defaults (0666, 0777 for a
/// directory).
fn base_mode(plan: &CopyPlan, stat: &Stat, dir: bool) -> u32 {
    match (plan.default_modes, dir) {
        (true, false) => 0o666,
        (true, true) => 0o777,
        (false, _) => stat.perm() & 0o777,
    }
}

/// Bits left out of a new entry until its owner and mode are final, as cp does, so nobody
/// can open it in between: group and other under --preserve=ownership, their write bits under
/// --preserve=mode.
fn omitted(plan: &CopyPlan, stat: &Stat) -> u32 {
    let preserve = plan.preserve;
    stat.perm()
        & if preserve.ownership {
            0o077
        } else if preserve.mode {
            0o022
        } else {
            0
        }
}

/// Bits a new file leaves out while written: [`omitted`], except in a directory this run made
/// (`fresh_dir`), whose own mode keeps everyone else out until it is finished. So only files
/// written into existing directories pay a chmod for it.
fn file_omitted(plan: &CopyPlan, stat: &Stat, fresh_dir: bool) -> u32 {
    if fresh_dir {
        0
    } else {
        omitted(plan, stat)
    }
}

/// Mode a new file is created with in its directory (`fresh_dir`: made by this run). The
/// kernel applies the umask on top.
pub(crate) fn create_mode(plan: &CopyPlan, stat: &Stat, fresh_dir: bool) -> u32 {
    base_mode(plan, stat, false) & !file_omitted(plan, stat, fresh_dir)
}

/// Applies metadata to a regular file's destination descriptor after its content is written.
/// `created` says the file was made by this run with [`create_mode`], in a directory this
/// run made when `fresh_dir`.
/// `dst_setgid`: the destination directory is (or may be) setgid, so a new file took its group.
/// `path` names the destination in messages.
#[allow(clippy::too_many_arguments)]
pub(crate) fn file(
    ctx: &Ctx<'_>,
    dst_setgid: bool,
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    stat: &Stat,
    created: bool,
    fresh_dir: bool,
    path: &dyn Fn() -> PathBuf,
) -> Result<(), CopyError> {
    let preserve = ctx.plan.preserve;
    // A file this run created already belongs to us, and to our group unless its directory is
    // setgid: skip the chown when that is already the source's owner and group.
    let owned_already = created && stat.uid == ctx.euid && stat.gid == ctx.egid && !dst_setgid;
    let mut owner_kept = true;
    if preserve.ownership && !owned_already {
        owner_kept = chown(ctx, stat, |uid, gid| sys::fchown(dst, uid, gid))
            .map_err(|e| CopyError::io(Op::SetOwner, path(), e))?;
    }
    if preserve.xattr {
        xattrs(ctx, Target::Fd(src), Target::Fd(dst), path)?;
    }
    if preserve.mode && (!created || needs_chmod(ctx, stat, fresh_dir)) {
        sys::fchmod(dst, kept_perm(stat, owner_kept))
            .map_err(|e| CopyError::io(Op::SetMode, path(), e))?;
    } else if !preserve.mode && created && file_omitted(ctx.plan, stat, fresh_dir) != 0 {
        // Created without group/other bits while it was written: give them back.
        let mode = base_mode(ctx.plan, stat, false) & !ctx.umask;
        sys::fchmod(dst, mode).map_err(|e| CopyError::io(Op::SetMode, path(), e))?;
    }
    // An existing file may hold an ACL the source lacks, which goes with the source's mode
    // even where the extended attributes were copied (they add, never remove).
    if preserve.mode && (!preserve.xattr || !created) {
        xattr::copy_acls(Target::Fd(src), Target::Fd(dst), false, !created)
            .map_err(|e| CopyError::io(Op::SetMode, path(), e))?;
    }
    if preserve.timestamps {
        sys::futimens(dst, stat.atime, stat.mtime)
            .map_err(|e| CopyError::io(Op::SetTimes, path(), e))?;
    }
    Ok(())
}

/// True when the mode a file was created with (after the umask) differs from the source's.
fn needs_chmod(ctx: &Ctx<'_>, stat: &Stat, fresh_dir: bool) -> bool {
    stat.perm() != (create_mode(ctx.plan, stat, fresh_dir) & !ctx.umask)
}

/// Owner and group as cp does it: root sets both; anyone else tries the group alone, and a
/// refusal there is not an error (the file simply keeps the caller's group). Returns true
/// when the copy now has the source's owner and group.
fn chown(
    ctx: &Ctx<'_>,
    stat: &Stat,
    call: impl Fn(u32, u32) -> io::Result<()>,
) -> io::Result<bool> {
    if ctx.is_root {
        return call(stat.uid, stat.gid).map(|()| true);
    }
    match call(u32::MAX, stat.gid) {
        Ok(()) => Ok(stat.uid == ctx.euid),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The mode to preserve: without the source's owner, cp drops setuid, setgid and sticky, so
/// a copy never gains privileges in someone else's name.
fn kept_perm(stat: &Stat, owner_kept: bool) -> u32 {
    if owner_kept {
        stat.perm()
    } else {
        stat.perm() & 0o777
    }
}

/// Applies a directory's metadata once all its children are done (it runs when the directory's
/// node is dropped). `fresh`: this run created it, with [`dir_create_mode`].
pub(crate) fn directory(
    ctx: &Ctx<'_>,
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    stat: &Stat,
    fresh: bool,
    path: &dyn Fn() -> PathBuf,
) {
    directory_of(ctx, Target::Fd(src), dst, stat, fresh, path);
}

/// [`directory`] for a source that may not be open: one that cannot be read is reached by
/// name for its extended attributes.
pub(crate) fn directory_of(
    ctx: &Ctx<'_>,
    src: Target<'_>,
    dst: BorrowedFd<'_>,
    stat: &Stat,
    fresh: bool,
    path: &dyn Fn() -> PathBuf,
) {
    let preserve = ctx.plan.preserve;
    let mut owner_kept = true;
    if preserve.ownership {
        match chown(ctx, stat, |uid, gid| sys::fchown(dst, uid, gid)) {
            Ok(kept) => owner_kept = kept,
            Err(e) => ctx.fail(CopyError::io(Op::SetOwner, path(), e)),
        }
    }
    if preserve.xattr {
        if let Err(e) = xattrs(ctx, src, Target::Fd(dst), path) {
            ctx.fail(e);
        }
    }
    // A fresh directory was made with owner rwx so it could be filled; give it its real mode.
    let mode = if preserve.mode {
        Some(kept_perm(stat, owner_kept))
    } else if fresh || matches!(ctx.plan.overwrite, Overwrite::Resume(_)) {
        // (Under --resume an existing directory is taken to be an interrupted run's.)
        // cp keeps the sticky bit of a new directory, drops setuid/setgid, applies the umask.
        Some((base_mode(ctx.plan, stat, true) | (stat.perm() & 0o1000)) & !ctx.umask)
    } else {
        None
    };
    if let Some(mode) = mode {
        if fresh && mode == dir_create_mode(ctx.plan, stat) & !ctx.umask {
            // Created with exactly this mode already.
        } else if let Err(e) = sys::fchmod(dst, mode) {
            ctx.fail(CopyError::io(Op::SetMode, path(), e));
        }
    }
    // As for a file: an existing directory's ACLs the source lacks go.
    if preserve.mode && (!preserve.xattr || !fresh) {
        if let Err(e) = xattr::copy_acls(src, Target::Fd(dst), true, !fresh) {
            ctx.fail(CopyError::io(Op::SetMode, path(), e));
        }
    }
    if preserve.timestamps {
        if let Err(e) = sys::futimens(dst, stat.atime, stat.mtime) {
            ctx.fail(CopyError::io(Op::SetTimes, path(), e));
        }
    }
}

/// Copies extended attributes. A destination that takes none gets one warning per run, not an
/// error per file.
fn xattrs(
    ctx: &Ctx<'_>,
    src: Target<'_>,
    dst: Target<'_>,
    path: &dyn Fn() -> PathBuf,
) -> Result<(), CopyError> {
    match xattr::copy_all(src, dst) {
        Ok(()) => Ok(()),
        Err(XattrError::Unsupported(e)) => {
            if !ctx.xattr_warned.swap(true, Ordering::Relaxed) {
                ctx.reporter.note(&format!(
                    "warning: extended attributes not preserved: {}: {} (the destination \
                     filesystem does not support them)",
                    quote(&path()),
                    CopyError::io(Op::SetXattr, path(), e).reason()
                ));
            }
            Ok(())
        }
        Err(XattrError::Failed(e)) => Err(CopyError::io(Op::SetXattr, path(), e)),
    }
}

/// Mode a new directory is created with: its own bits (less [`omitted`]), plus owner rwx so
/// it can be filled.
pub(crate) fn dir_create_mode(plan: &CopyPlan, stat: &Stat) -> u32 {
    (base_mode(plan, stat, true) & !omitted(plan, stat)) | 0o700
}

/// Owner, extended attributes, mode and times of a symlink or special file, set on the entry
/// `name` in `dir` itself; `src_dir`/`src_name` is its source (followed unless it is copied as
/// a symlink, so under -L a FIFO reached through a link gives its own attributes).
#[allow(clippy::too_many_arguments)]
pub(crate) fn entry_at(
    ctx: &Ctx<'_>,
    src_dir: BorrowedFd<'_>,
    src_name: &CStr,
    dir: BorrowedFd<'_>,
    name: &CStr,
    stat: &Stat,
    is_symlink: bool,
    path: &dyn Fn() -> PathBuf,
) -> Result<(), CopyError> {
    let preserve = ctx.plan.preserve;
    let mut owner_kept = true;
    if preserve.ownership {
        owner_kept = chown(ctx, stat, |uid, gid| sys::lchownat(dir, name, uid, gid))
            .map_err(|e| CopyError::io(Op::SetOwner, path(), e))?;
    }
    let src = Target::at(src_dir, src_name, !is_symlink);
    let dst = Target::at(dir, name, false);
    if preserve.xattr {
        xattrs(ctx, src, dst, path)?;
    }
    if preserve.mode && !is_symlink {
        sys::fchmodat(dir, name, kept_perm(stat, owner_kept))
            .map_err(|e| CopyError::io(Op::SetMode, path(), e))?;
        if !preserve.xattr {
            // A FIFO's or a device's ACL is part of its mode, as a file's is (symlinks have none).
            xattr::copy_acls(src, dst, false, false)
                .map_err(|e| CopyError::io(Op::SetMode, path(), e))?;
        }
    }
    if preserve.timestamps {
        sys::lutimensat(dir, name, stat.atime, stat.mtime)
            .map_err(|e| CopyError::io(Op::SetTimes, path(), e))?;
    }
    Ok(())
}
