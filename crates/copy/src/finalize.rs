//! Metadata after content, as cp gives it: what a file, a directory, a symlink or special
//! file is given (the source's owner, mode, ACLs, extended attributes and times, as far as
//! `--preserve` keeps them), set in `attrs`' one order; and the modes new entries are made
//! with until then.

use std::ffi::CStr;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;

use crate::attrs::{Extended, On, Owner, Perm, Setting};
use crate::ctx::Ctx;
use crate::error::{CopyError, Op};
use crate::plan::CopyPlan;
use crate::quote::quote;
use crate::sys::Stat;
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
/// destination in messages. Every attribute is tried; the first failure is returned.
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
    // A file this run made has the mode it was made with, after the umask: not set again
    // where that is the one to give. In a directory with a default ACL the ACL decided it
    // instead, and the mode cp gives is set (GNU cp's result, though it made the file
    // without those bits and this run made it with them, in a directory of its own).
    let made_with =
        (created && !dir_default_acl).then(|| create_mode(ctx.plan, stat, fresh_dir) & !ctx.umask);
    let perm = if preserve.mode {
        Some(kept_perm(stat, made_with))
    } else if created && file_omitted(ctx.plan, stat, fresh_dir && !dir_default_acl) != 0 {
        // Created without group/other bits while it was written: give them back.
        Some(plain_perm(
            base_mode(ctx.plan, stat, false) & !ctx.umask,
            None,
        ))
    } else {
        None
    };
    // An existing file may hold an ACL the source lacks, and so does a new one that took its
    // directory's default ACL: cp gives either the source's mode alone. Anywhere else a new
    // file has no ACL to take away, and pays no call for it.
    let mut acls = CpAcls {
        ctx,
        src: Subject::Fd(src),
        acls: true,
        dir: false,
        foreign: !created || dir_default_acl,
        // An explicit --no-preserve=mode sets a new file's default mode, ACL and all, as cp.
        default_perm: (ctx.plan.default_modes && created && dir_default_acl)
            .then(|| base_mode(ctx.plan, stat, false) & !ctx.umask),
        stat,
        path,
        listed: None,
    };
    Setting {
        owner: (preserve.ownership && !owned_already).then(|| owner(ctx, stat)),
        extended: Some(&mut acls),
        perm,
        times: preserve.timestamps.then_some((stat.atime, stat.mtime)),
    }
    .apply(On::Fd(dst), path, &mut |e| ctx.fail(e))
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

/// Owner and group as cp gives them: root both; anyone else the group alone, and a refusal
/// there is not an error (the file simply keeps the caller's group). The copy then has the
/// source's owner only where that is the caller.
fn owner(ctx: &Ctx<'_>, stat: &Stat) -> Owner {
    if ctx.is_root {
        Owner {
            ids: (stat.uid, stat.gid),
            whole: true,
            refusal_keeps: false,
        }
    } else {
        Owner {
            ids: (u32::MAX, stat.gid),
            whole: stat.uid == ctx.euid,
            refusal_keeps: true,
        }
    }
}

/// The mode to preserve: without the source's owner, cp drops setuid, setgid and sticky, so
/// a copy never gains privileges in someone else's name.
/// `have`: the mode the entry has, where known (what this run made it with).
fn kept_perm(stat: &Stat, have: Option<u32>) -> Perm {
    Perm {
        bits: stat.perm(),
        unless_owned: 0o7000,
        have,
    }
}

/// A mode of cp's own making (not the source's), set whoever owns the copy; `have` as for
/// [`kept_perm`].
fn plain_perm(bits: u32, have: Option<u32>) -> Perm {
    Perm {
        bits,
        unless_owned: 0,
        have,
    }
}

/// cp's steps around the mode: the extended attributes (ACLs with them where the mode is
/// kept) before it; after it, the ACLs the source lacks taken away where the entry may hold
/// some, or under `--no-preserve=mode` a new entry's inherited ACL made its default mode's.
struct CpAcls<'a> {
    ctx: &'a Ctx<'a>,
    src: Subject<'a>,
    /// ACLs go with the mode (not for a symlink, which has none).
    acls: bool,
    /// A directory: its default ACL too.
    dir: bool,
    /// The entry may hold ACLs the source lacks: it existed, or took its directory's default
    /// ACL when it was made.
    foreign: bool,
    /// `--no-preserve=mode`: the new entry took an ACL from its directory's default ACL, and
    /// gets this mode's instead, as cp gives it.
    default_perm: Option<u32>,
    stat: &'a Stat,
    path: &'a dyn Fn() -> PathBuf,
    /// Which ACLs the source listed when its extended attributes were copied.
    listed: Option<Acls>,
}

impl Extended for CpAcls<'_> {
    /// Moves no mode bit away from cp's: an ACL copied whole from the source gives the entry
    /// the source's own bits (its owner, mask and other entries are the source's mode).
    fn before_mode(&mut self, on: On<'_>) -> Result<bool, CopyError> {
        let preserve = self.ctx.plan.preserve;
        if preserve.xattr {
            let acls = preserve.mode && self.acls;
            self.listed = xattrs(self.ctx, self.src, on.subject(), acls, self.path)?;
        }
        Ok(false)
    }

    fn after_mode(&mut self, on: On<'_>) -> Result<(), CopyError> {
        let preserve = self.ctx.plan.preserve;
        let dst = on.subject();
        let acl_error = |e| CopyError::io(Op::SetMode, (self.path)(), e);
        if preserve.mode && self.acls {
            let held = match self.listed {
                Some(held) => Some(held),
                None if preserve.xattr => None,
                None => Some(xattr::copy_acls(self.src, dst, self.dir).map_err(acl_error)?),
            };
            let lacking = held.map(|held| Acls {
                access: !held.access,
                default: self.dir && !held.default,
            });
            if let Some(lacking) = lacking.filter(|l| *l != Acls::default() && self.foreign) {
                xattr::reset_acls(dst, lacking, self.stat.perm() & 0o777).map_err(acl_error)?;
            }
        } else if let Some(perm) = self.default_perm {
            xattr::reset_acls(dst, ACCESS_ONLY, perm & 0o777).map_err(acl_error)?;
        }
        Ok(())
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
    let took_default = fresh && default_acl.unwrap_or_else(|| xattr::has_default_acl(dst));
    let inherited = took_default && acls_matter(ctx.plan);
    // A fresh directory was made with owner rwx so it could be filled; give it its real mode.
    // What it was made with is known where the umask decided it; a default ACL it took from
    // its parent decided instead (GNU cp sets its mode all the same).
    let made_with = (fresh && !took_default).then(|| dir_create_mode(ctx.plan, stat) & !ctx.umask);
    let perm = if preserve.mode {
        Some(kept_perm(stat, made_with))
    } else if fresh || ctx.plan.overwrite.resume().is_some() {
        // (Under --resume an existing directory is taken to be an interrupted run's.)
        // cp keeps the sticky bit of a new directory, drops setuid/setgid, applies the umask.
        let bits = (base_mode(ctx.plan, stat, true) | (stat.perm() & 0o1000)) & !ctx.umask;
        Some(plain_perm(bits, made_with))
    } else {
        None
    };
    // As for a file: the ACLs the source lacks go from an existing directory, and from a new
    // one that took them from its parent's default ACL (its access ACL and its default ACL).
    // An explicit --no-preserve=mode sets a new directory's access ACL from its default mode,
    // as cp does, and leaves the default ACL it inherited.
    let default_perm = if preserve.mode || !ctx.plan.default_modes || !inherited {
        None
    } else {
        Some((base_mode(ctx.plan, stat, true) | (stat.perm() & 0o1000)) & !ctx.umask)
    };
    let mut acls = CpAcls {
        ctx,
        src,
        acls: true,
        dir: true,
        foreign: !fresh || inherited,
        default_perm,
        stat,
        path,
        listed: None,
    };
    let set = Setting {
        owner: preserve.ownership.then(|| owner(ctx, stat)),
        extended: Some(&mut acls),
        perm,
        times: preserve.timestamps.then_some((stat.atime, stat.mtime)),
    }
    .apply(On::Fd(dst), path, &mut |e| ctx.fail(e));
    if let Err(e) = set {
        ctx.fail(e);
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
    // A FIFO's or a device's ACL is part of its mode, as a file's is (symlinks have none).
    let mut acls = CpAcls {
        ctx,
        src: Subject::at(src_dir, src_name, !is_symlink),
        acls: !is_symlink,
        dir: false,
        foreign: dir_default_acl,
        // As for a file: the default mode it was made with, without the inherited ACL.
        default_perm: (ctx.plan.default_modes && !is_symlink && dir_default_acl)
            .then_some(0o666 & !ctx.umask),
        stat,
        path,
        listed: None,
    };
    Setting {
        owner: preserve.ownership.then(|| owner(ctx, stat)),
        extended: Some(&mut acls),
        perm: (preserve.mode && !is_symlink).then(|| kept_perm(stat, None)),
        times: preserve.timestamps.then_some((stat.atime, stat.mtime)),
    }
    .apply(On::At(dir, name), path, &mut |e| ctx.fail(e))
}
