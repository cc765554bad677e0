//! Carrying out cp's rules for an existing destination: the facts [`policy::decide`] asks for
//! are looked up here, and its [`Decision`] is done here (rename aside, remove, or open as it
//! is). The rules themselves are in `policy`, with no system call.

use std::ffi::CString;
use std::io;

use super::job::EntryJob;
use crate::backup;
use crate::error::{CopyError, Op};
use crate::node::DirHold;
use crate::policy::{self, DestFacts, Look, SourceFacts, Target};
use crate::quote::quote;
use crate::sys;

pub(crate) use crate::policy::WriteOver;

/// What is at the destination name once cp's rules have been applied to it.
pub(crate) enum Existing {
    /// Nothing (or it was removed or renamed aside): the copy is created with O_EXCL.
    Nothing {
        /// `--backup`: the name the old entry was renamed to, for the `-v` line.
        backup: Option<CString>,
    },
    /// An entry that is opened and written as it is.
    WriteOver(WriteOver),
}

/// Applies cp's rules to the destination of `job`: `Ok(None)` means skip the entry.
pub(crate) fn resolve(job: &EntryJob<'_, '_>) -> Result<Option<Existing>, CopyError> {
    let dir = job.dir;
    if dir.fresh {
        return Ok(Some(Existing::Nothing { backup: None }));
    }
    let ctx = dir.ctx;
    let dst_path = || job.dst_path();
    let entry = match sys::statx_at(dir.dst_fd(), &job.dst, false) {
        Ok(s) => s,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            return Ok(Some(Existing::Nothing { backup: None }))
        }
        Err(e) => return Err(CopyError::io(Op::Stat, dst_path(), e)),
    };
    let mut src = SourceFacts::new(job.src.to_bytes(), job.stat);
    let mut dst = DestFacts::new(job.dst.to_bytes(), entry, ctx.just_created(&entry));
    loop {
        match policy::decide(&ctx.policy, &src, Some(&dst)) {
            policy::Decision::Look(what) => look(job, what, &mut src, &mut dst)?,
            policy::Decision::Skip(_) => {
                ctx.progress
                    .skipped
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Ok(None);
            }
            policy::Decision::Create => return Ok(Some(Existing::Nothing { backup: None })),
            policy::Decision::WriteOver(how) => return Ok(Some(Existing::WriteOver(how))),
            policy::Decision::Refuse(rule) => {
                return Err(rule.of(job.src_path(), dst_path()).into())
            }
            policy::Decision::BackUp(aside) => {
                let (at, to) = ((dir.dst_fd(), &*job.dst), (dir.dst_fd(), aside.as_c_str()));
                backup::move_to(backup::Move::Rename, at, to)
                    .map_err(|e| CopyError::io(Op::Backup, dst_path(), e))?;
                return Ok(Some(Existing::Nothing {
                    backup: Some(aside),
                }));
            }
            policy::Decision::Remove => {
                remove_then(dir, &job.dst, || Ok(()))
                    .map_err(|e| CopyError::io(Op::Remove, dst_path(), e))?;
                said_removed(dir, &dst_path());
                return Ok(Some(Existing::Nothing { backup: None }));
            }
        }
    }
}

/// Looks up the fact `what` for [`policy::decide`].
fn look(
    job: &EntryJob<'_, '_>,
    what: Look,
    src: &mut SourceFacts<'_>,
    dst: &mut DestFacts<'_>,
) -> Result<(), CopyError> {
    let dir = job.dir;
    // The backup facts are asked for only under --backup.
    let backup = || {
        dir.ctx
            .policy
            .backup
            .as_ref()
            .expect("asked under --backup")
    };
    match what {
        Look::Target => {
            dst.target = Some(match sys::statx_at(dir.dst_fd(), &job.dst, true) {
                Ok(stat) => Target::File(stat),
                Err(e) => match e.raw_os_error() {
                    Some(libc::ENOENT | libc::ENOTDIR) => Target::Dangling,
                    Some(libc::ELOOP) => Target::Loop,
                    errno => Target::Unknown(errno.unwrap_or(libc::EIO)),
                },
            })
        }
        Look::SourceEntry => src.entry = Some(sys::statx_at(dir.src_fd(), &job.src, false).ok()),
        Look::SourceTarget => src.target = Some(sys::statx_at(dir.src_fd(), &job.src, true).ok()),
        Look::SameDirectory => {
            dst.same_directory = Some(
                sys::fstatx(dir.dst_fd())
                    .is_ok_and(|d| d.dev == dir.stat.dev && d.ino == dir.stat.ino),
            )
        }
        Look::BackupIsSource => {
            let stat = &job.stat;
            let name = CString::new(backup::simple_name(dst.name, &backup().suffix));
            dst.backup_is_source = Some(name.is_ok_and(|name| {
                sys::statx_at(dir.dst_fd(), &name, true)
                    .is_ok_and(|s| s.dev == stat.dev && s.ino == stat.ino)
            }))
        }
        Look::BackupName => {
            dst.backup_name = Some(
                backup::name_for(dir.dst_fd(), &job.dst, backup())
                    .map_err(|e| CopyError::io(Op::ReadDir, dir.dst_path(None), e))?,
            )
        }
        Look::Answer => {
            let question = format!("overwrite {}? ", quote(&job.dst_path()));
            dst.answer = Some(dir.ctx.reporter.confirm(&question))
        }
    }
    Ok(())
}

/// `-v`: cp's line for a destination removed before it is created anew.
pub(crate) fn said_removed(dir: &DirHold<'_>, path: &std::path::Path) {
    if dir.ctx.reporter.verbose() {
        dir.ctx
            .reporter
            .verbose_line(&format!("removed {}", quote(&path)));
    }
}

/// Removes `name` from the destination directory (it may be gone already), then does `then`.
pub(crate) fn remove_then<T>(
    dir: &DirHold<'_>,
    name: &std::ffi::CStr,
    then: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    match sys::unlinkat(dir.dst_fd(), name) {
        Ok(()) => then(),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => then(),
        Err(e) => Err(e),
    }
}
