//! Entries that are made rather than filled: symlinks and special files recreated (hard-linked
//! to an earlier copy where the source is), and the links of `-l` and `-s`.

use std::ffi::CString;
use std::io;

use super::existing::{self, Existing};
use super::job::EntryJob;
use crate::error::{CopyError, Op};
use crate::finalize;
use crate::links::Linked;
use crate::node::DirHold;
use crate::opened::count_done;
use crate::plan::LinkMode;
use crate::quote::quote;
use crate::refusal::Refusal;
use crate::sys::{self, Kind};

/// Symlinks and special files, hard-linked to an earlier copy where the source is.
pub(super) fn copy_other(job: &EntryJob<'_, '_>) -> Result<(), CopyError> {
    let (dir, ctx) = (job.dir, job.dir.ctx);
    if ctx.plan.preserve.links && job.stat.nlink > 1 {
        let linked = ctx.links.link_or_create(
            (dir.dst_fd(), &job.dst),
            || dir.anchored_path(&job.dst),
            &job.stat,
            ctx.policy.link_replaces(),
            || create_other(job),
        )?;
        if let Linked::Linked = linked {
            count_done(dir, &job.src, &job.dst, None);
        }
        Ok(())
    } else {
        create_other(job)
    }
}

/// `--resume`: the destination already holds this symlink or special file as the copy would
/// make it (`Policy::resume_keeps_made`).
fn already_made(job: &EntryJob<'_, '_>) -> bool {
    let (dir, ctx, stat) = (job.dir, job.dir.ctx, &job.stat);
    let Ok(dst) = sys::statx_at(dir.dst_fd(), &job.dst, false) else {
        return false;
    };
    let link = |fd, name: &std::ffi::CStr, st: &crate::sys::Stat| {
        (st.kind() == Kind::Symlink)
            .then(|| sys::readlinkat(fd, name, st.size).ok())
            .flatten()
    };
    let src_link = link(dir.src_fd(), &job.src, stat);
    let dst_link = link(dir.dst_fd(), &job.dst, &dst);
    ctx.policy
        .resume_keeps_made((stat, src_link.as_deref()), (&dst, dst_link.as_deref()))
}

/// Recreates a symlink or a special file in place of what was at its name (the rules for an
/// existing destination have removed it), and counts it.
fn create_other(job: &EntryJob<'_, '_>) -> Result<(), CopyError> {
    let (dir, ctx, stat) = (job.dir, job.dir.ctx, &job.stat);
    if ctx.plan.overwrite.resume().is_some() && already_made(job) {
        return Ok(());
    }
    let Some(existing) = existing::resolve(job)? else {
        return Ok(());
    };
    let is_symlink = stat.kind() == Kind::Symlink;
    if is_symlink {
        let target = sys::readlinkat(dir.src_fd(), &job.src, stat.size)
            .map_err(|e| CopyError::io(Op::ReadLink, job.src_path(), e))?;
        let target = CString::new(target)
            .map_err(|_| CopyError::io(Op::ReadLink, job.src_path(), io::ErrorKind::InvalidData))?;
        sys::symlinkat(&target, dir.dst_fd(), &job.dst)
            .map_err(|e| CopyError::io(Op::CreateSymlink, job.dst_path(), e))?;
    } else {
        // An explicit --no-preserve=mode gives the default mode, as to a file.
        let perm = if ctx.plan.default_modes {
            0o666
        } else {
            stat.perm() & 0o777
        };
        let mode = (stat.mode & libc::S_IFMT) | perm;
        sys::mknodat(dir.dst_fd(), &job.dst, mode, stat.rdev)
            .map_err(|e| CopyError::io(Op::CreateSpecial, job.dst_path(), e))?;
    }
    if let Ok(made) = sys::statx_at(dir.dst_fd(), &job.dst, false) {
        ctx.note_created_stat(dir.is_operand_dir(), &made);
    }
    let path = || job.dst_path();
    finalize::entry_at(
        ctx,
        dir.dst_default_acl,
        (dir.src_fd(), &job.src),
        (dir.dst_fd(), &job.dst),
        stat,
        &path,
    )?;
    count_done(dir, &job.src, &job.dst, backup_of(&existing));
    Ok(())
}

/// The name an existing entry was renamed to (`--backup`), for the `-v` line.
fn backup_of(existing: &Existing) -> Option<&std::ffi::CStr> {
    match existing {
        Existing::Nothing { backup } => backup.as_deref(),
        Existing::WriteOver(_) => None,
    }
}

/// `-l` and `-s`: a hard link to the source, or a symbolic link holding the source's path as
/// given, in place of a copy. An existing entry is replaced only where cp replaces it (see
/// `policy`), or with -f after the link found it there.
pub(super) fn make_link(job: &EntryJob<'_, '_>) -> Result<(), CopyError> {
    let (dir, ctx) = (job.dir, job.dir.ctx);
    let src_path = job.src_path();
    let symbolic = ctx.plan.link == LinkMode::Symbolic;
    let target = CString::new(src_path.as_os_str().as_encoded_bytes())
        .expect("a path built from C strings has no NUL");
    if symbolic && !target.to_bytes().starts_with(b"/") && !in_current_directory(dir) {
        return Err(Refusal::RelativeSymlinkElsewhere
            .of(src_path, job.dst_path())
            .into());
    }
    let Some(existing) = existing::resolve(job)? else {
        return Ok(());
    };
    let link = || {
        if symbolic {
            sys::symlinkat(&target, dir.dst_fd(), &job.dst)
        } else {
            let flags = if job.follow {
                rustix::fs::AtFlags::SYMLINK_FOLLOW
            } else {
                rustix::fs::AtFlags::empty()
            };
            rustix::fs::linkat(dir.src_fd(), &job.src, dir.dst_fd(), &job.dst, flags)
                .map_err(io::Error::from)
        }
    };
    let made = match link() {
        Err(e)
            if e.raw_os_error() == Some(libc::EEXIST)
                && ctx.policy.force
                && matches!(existing, Existing::WriteOver(_)) =>
        {
            existing::remove_then(dir, &job.dst, link)
        }
        other => other,
    };
    made.map_err(|e| {
        CopyError::Refused(format!(
            "cannot create {} link {} to {}: {}",
            if symbolic { "symbolic" } else { "hard" },
            quote(&job.dst_path()),
            quote(&src_path),
            crate::error::reason(&e)
        ))
    })?;
    if let Ok(made) = sys::statx_at(dir.dst_fd(), &job.dst, false) {
        ctx.note_created_stat(dir.is_operand_dir(), &made);
    }
    count_done(dir, &job.src, &job.dst, backup_of(&existing));
    Ok(())
}

/// True when the destination directory is the current directory, where a relative `-s`
/// link's target names what it should.
fn in_current_directory(dir: &DirHold<'_>) -> bool {
    match (
        sys::fstatx(dir.dst_fd()),
        sys::statx_at(rustix::fs::CWD, c".", true),
    ) {
        (Ok(here), Ok(cwd)) => here.dev == cwd.dev && here.ino == cwd.ino,
        _ => false,
    }
}
