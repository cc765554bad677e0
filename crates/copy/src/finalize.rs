//! Metadata after content: owner, then mode (chown clears setuid), then times (last, since
//! every other change touches ctime and writing into a directory touches its mtime).

use std::ffi::CStr;
use std::io;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;

use crate::ctx::Ctx;
use crate::error::{CopyError, Op};
use crate::plan::CopyPlan;
use crate::quote::quote;
use crate::sys::{self, Stat};
use crate::xattr::{self, Acls, Subject, XattrError};
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

/// What a file's destination directory means for the file's metadata.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InDir {
    /// The directory is (or may be) setgid, so a new file took its group.
    pub setgid: bool,
    /// The directory has a default ACL, so a new file took an ACL from it.
    pub default_acl: bool,
    /// The directory was made by this run.
    pub fresh: bool,
}

/// Applies metadata to a regular file's destination descriptor after its content is written.
/// `created` says the file was made by this run with [`create_mode`]. `path` names the
/// destination in messages.
pub(crate) fn file(
    ctx: &Ctx<'_>,
    dir: InDir,
    (src, dst): (BorrowedFd<'_>, BorrowedFd<'_>),
    stat: &Stat,
    created: bool,
    path: &dyn Fn() -> PathBuf,
) -> Result<(), CopyError> {
    let (dst_setgid, dir_default_acl, fresh_dir) = (dir.setgid, dir.default_acl, dir.fresh);
    let preserve = ctx.plan.preserve;
    // A file this run created already belongs to us, and to our group unless its directory is
    // setgid: skip the chown when that is already the source's owner and group.
    let owned_already = created && stat.uid == ctx.euid && stat.gid == ctx.egid && !dst_setgid;
    let mut owner_kept = true;
    if preserve.ownership && !owned_already {
        owner_kept = chown(ctx, stat, |uid, gid| sys::fchown(dst, uid, gid))
            .map_err(|e| CopyError::io(Op::SetOwner, path(), e))?;
    }
    let listed = if preserve.xattr {
        xattrs(ctx, Subject::Fd(src), Subject::Fd(dst), preserve.mode, path)?
    } else {
        None
    };
    if preserve.mode && (!created || needs_chmod(ctx, stat, fresh_dir)) {
        sys::fchmod(dst, kept_perm(stat, owner_kept))
            .map_err(|e| CopyError::io(Op::SetMode, path(), e))?;
    } else if !preserve.mode && created && file_omitted(ctx.plan, stat, fresh_dir) != 0 {
        // Created without group/other bits while it was written: give them back.
        let mode = base_mode(ctx.plan, stat, false) & !ctx.umask;
        sys::fchmod(dst, mode).map_err(|e| CopyError::io(Op::SetMode, path(), e))?;
    }
    // An existing file may hold an ACL the source lacks, and so does a new one that took its
    // directory's default ACL: cp gives either the source's mode alone. Anywhere else a new
    // file has no ACL to take away, and pays no call for it.
    let foreign_acl = !created || dir_default_acl;
    let acl_error = |e| CopyError::io(Op::SetMode, path(), e);
    if preserve.mode {
        let held = match listed {
            Some(held) => Some(held),
            None if preserve.xattr => None,
            None => Some(
                xattr::copy_acls(Subject::Fd(src), Subject::Fd(dst), false).map_err(acl_error)?,
            ),
        };
        if held.is_some_and(|held| foreign_acl && !held.access) {
            xattr::reset_acls(Subject::Fd(dst), ACCESS_ONLY, stat.perm() & 0o777)
                .map_err(acl_error)?;
        }
    } else if ctx.plan.default_modes && created && dir_default_acl {
        // An explicit --no-preserve=mode sets a new file's default mode, ACL and all, as cp.
        let perm = base_mode(ctx.plan, stat, false) & !ctx.umask;
        xattr::reset_acls(Subject::Fd(dst), ACCESS_ONLY, perm).map_err(acl_error)?;
    }
    if preserve.timestamps {
        sys::futimens(dst, stat.atime, stat.mtime)
            .map_err(|e| CopyError::io(Op::SetTimes, path(), e))?;
    }
    Ok(())
}

/// True when a run sets ACLs at all: they go with the mode, kept (`-p`) or explicitly not
/// (`--no-preserve=mode`, which gives new entries their default mode without an ACL). Only
/// then does a destination directory's default ACL matter.
pub(crate) fn acls_matter(plan: &CopyPlan) -> bool {
    plan.preserve.mode || plan.default_modes
}

/// The access ACL alone, to be taken away.
const ACCESS_ONLY: Acls = Acls {
    access: true,
    default: false,
};

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
/// node is dropped). `fresh`: this run created it, with [`dir_create_mode`]. `default_acl`:
/// whether it has a default ACL, so that, fresh, it took its ACLs from its parent's default
/// ACL; `None` when not known, to be asked only if it matters.
pub(crate) fn directory(
    ctx: &Ctx<'_>,
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    stat: &Stat,
    fresh: bool,
    default_acl: Option<bool>,
    path: &dyn Fn() -> PathBuf,
) {
    directory_of(ctx, Subject::Fd(src), dst, stat, fresh, default_acl, path);
}

/// [`directory`] for a source that may not be open: one that cannot be read is reached by
/// name for its extended attributes.
pub(crate) fn directory_of(
    ctx: &Ctx<'_>,
    src: Subject<'_>,
    dst: BorrowedFd<'_>,
    stat: &Stat,
    fresh: bool,
    default_acl: Option<bool>,
    path: &dyn Fn() -> PathBuf,
) {
    let preserve = ctx.plan.preserve;
    // Asked before anything is set on it: a default ACL copied from the source is not one it
    // took from its parent.
    let inherited = fresh
        && acls_matter(ctx.plan)
        && default_acl.unwrap_or_else(|| xattr::has_default_acl(dst));
    let mut owner_kept = true;
    if preserve.ownership {
        match chown(ctx, stat, |uid, gid| sys::fchown(dst, uid, gid)) {
            Ok(kept) => owner_kept = kept,
            Err(e) => ctx.fail(CopyError::io(Op::SetOwner, path(), e)),
        }
    }
    let listed = if preserve.xattr {
        xattrs(ctx, src, Subject::Fd(dst), preserve.mode, path).unwrap_or_else(|e| {
            ctx.fail(e);
            None
        })
    } else {
        None
    };
    // A fresh directory was made with owner rwx so it could be filled; give it its real mode.
    let mode = if preserve.mode {
        Some(kept_perm(stat, owner_kept))
    } else if fresh || ctx.plan.overwrite.resume().is_some() {
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
    // As for a file: the ACLs the source lacks go from an existing directory, and from a new
    // one that took them from its parent's default ACL (its access ACL and its default ACL).
    let acl_error = |e| ctx.fail(CopyError::io(Op::SetMode, path(), e));
    if preserve.mode {
        let held = match listed {
            Some(held) => Some(held),
            None if preserve.xattr => None,
            None => xattr::copy_acls(src, Subject::Fd(dst), true)
                .map_err(acl_error)
                .ok(),
        };
        let lacking = held.map(|held| Acls {
            access: !held.access,
            default: !held.default,
        });
        if let Some(lacking) = lacking.filter(|l| *l != Acls::default()) {
            if !fresh || inherited {
                let perm = mode.unwrap_or(stat.perm()) & 0o777;
                if let Err(e) = xattr::reset_acls(Subject::Fd(dst), lacking, perm) {
                    acl_error(e);
                }
            }
        }
    } else if let Some(mode) = mode.filter(|_| ctx.plan.default_modes && inherited) {
        // An explicit --no-preserve=mode sets a new directory's access ACL from its default
        // mode, as cp does, and leaves the default ACL it inherited.
        if let Err(e) = xattr::reset_acls(Subject::Fd(dst), ACCESS_ONLY, mode & 0o777) {
            acl_error(e);
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
/// `acls`: the POSIX ACLs too (the mode is kept). Returns which ACLs the source holds, `None`
/// when the destination takes no extended attributes (nor ACLs).
fn xattrs(
    ctx: &Ctx<'_>,
    src: Subject<'_>,
    dst: Subject<'_>,
    acls: bool,
    path: &dyn Fn() -> PathBuf,
) -> Result<Option<Acls>, CopyError> {
    match xattr::copy_all(src, dst, acls) {
        Ok(held) => Ok(Some(held)),
        Err(XattrError::Unsupported(e)) => {
            if !ctx.xattr_warned.swap(true, Ordering::Relaxed) {
                ctx.reporter.note(&format!(
                    "warning: extended attributes not preserved: {}: {} (the destination \
                     filesystem does not support them)",
                    quote(&path()),
                    CopyError::io(Op::SetXattr, path(), e).reason()
                ));
            }
            Ok(None)
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
/// `dir_default_acl`: `dir` has a default ACL, which a new FIFO or device took an ACL from.
pub(crate) fn entry_at(
    ctx: &Ctx<'_>,
    dir_default_acl: bool,
    (src_dir, src_name): (BorrowedFd<'_>, &CStr),
    (dir, name): (BorrowedFd<'_>, &CStr),
    stat: &Stat,
    path: &dyn Fn() -> PathBuf,
) -> Result<(), CopyError> {
    let is_symlink = stat.kind() == crate::sys::Kind::Symlink;
    let preserve = ctx.plan.preserve;
    let mut owner_kept = true;
    if preserve.ownership {
        owner_kept = chown(ctx, stat, |uid, gid| sys::lchownat(dir, name, uid, gid))
            .map_err(|e| CopyError::io(Op::SetOwner, path(), e))?;
    }
    let src = Subject::at(src_dir, src_name, !is_symlink);
    let dst = Subject::at(dir, name, false);
    let listed = if preserve.xattr {
        xattrs(ctx, src, dst, preserve.mode && !is_symlink, path)?
    } else {
        None
    };
    // A FIFO's or a device's ACL is part of its mode, as a file's is (symlinks have none).
    let acl_error = |e| CopyError::io(Op::SetMode, path(), e);
    if preserve.mode && !is_symlink {
        sys::fchmodat(dir, name, kept_perm(stat, owner_kept))
            .map_err(|e| CopyError::io(Op::SetMode, path(), e))?;
        let held = match listed {
            Some(held) => Some(held),
            None if preserve.xattr => None,
            None => Some(xattr::copy_acls(src, dst, false).map_err(acl_error)?),
        };
        if held.is_some_and(|held| dir_default_acl && !held.access) {
            xattr::reset_acls(dst, ACCESS_ONLY, stat.perm() & 0o777).map_err(acl_error)?;
        }
    } else if ctx.plan.default_modes && !is_symlink && dir_default_acl {
        // As for a file: the default mode it was made with, without the inherited ACL.
        xattr::reset_acls(dst, ACCESS_ONLY, 0o666 & !ctx.umask).map_err(acl_error)?;
    }
    if preserve.timestamps {
        sys::lutimensat(dir, name, stat.atime, stat.mtime)
            .map_err(|e| CopyError::io(Op::SetTimes, path(), e))?;
    }
    Ok(())
}
