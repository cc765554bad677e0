//! The dispatch every engine shares once an entry's source is stated: directories to the walk,
//! links (`-l`, `-s`) and symlinks and special files to `other`, data to `file`.

use std::ffi::{CStr, CString};
use std::os::fd::AsFd;

use super::job::EntryJob;
use super::mover::Mover;
use super::{file, other};
use crate::error::{CopyError, Op};
use crate::node::DirHold;
use crate::plan::{Dereference, LinkMode};
use crate::queue::{Entry, Queue, Task};
use crate::refusal::Refusal;
use crate::sys::{self, Kind};

/// Copies one entry of `dir` found by the walk (same name on both sides).
pub(crate) fn copy_entry<'a>(
    ctx: &'a crate::ctx::Ctx<'a>,
    mover: &mut dyn Mover<'a>,
    dir: &DirHold<'a>,
    name: CString,
    queue: &Queue<'a>,
) {
    let follow = ctx.plan.dereference == Dereference::Always;
    match sys::statx_at(dir.src_fd(), &name, follow) {
        Ok(stat) => {
            let job = EntryJob {
                follow,
                ..EntryJob::new(dir, name, stat)
            };
            copy_stated(mover, job, queue)
        }
        Err(e) => ctx.fail(CopyError::io(Op::Stat, dir.src_path(Some(&name)), e)),
    }
}

/// Copies one entry the walk listed with its type. Into a directory this run made (where the
/// file will be opened anyway), a regular file is opened first and stated through its
/// descriptor: the stat, the data and the metadata are then of one file, for the calls a statx
/// by name costs. Anything else, or a file that cannot be opened, goes to [`copy_entry`], which
/// stats it by name and says why.
pub(crate) fn copy_listed<'a>(
    ctx: &'a crate::ctx::Ctx<'a>,
    mover: &mut dyn Mover<'a>,
    dir: &DirHold<'a>,
    (name, kind): Entry,
    queue: &Queue<'a>,
) {
    let follow = ctx.plan.dereference == Dereference::Always;
    if dir.fresh && kind == Some(Kind::File) && !follow {
        if let Ok(fd) = sys::openat(dir.src_fd(), &name, libc::O_RDONLY | libc::O_NOFOLLOW, 0) {
            match sys::fstatx(fd.as_fd()) {
                Ok(stat) => {
                    let job = EntryJob {
                        opened: Some(fd),
                        ..EntryJob::new(dir, name, stat)
                    };
                    copy_stated(mover, job, queue);
                }
                Err(e) => ctx.fail(CopyError::io(Op::Stat, dir.src_path(Some(&name)), e)),
            }
            return;
        }
    }
    copy_entry(ctx, mover, dir, name, queue);
}

/// Copies a command-line file operand `src` of `dir` to `dst` in the destination directory.
pub(crate) fn copy_root_entry<'a>(
    mover: &mut dyn Mover<'a>,
    dir: &DirHold<'a>,
    (src, dst): (&CStr, &CStr),
    follow: bool,
    queue: &Queue<'a>,
) {
    match sys::statx_at(dir.src_fd(), src, follow) {
        Ok(stat) => {
            let job = EntryJob {
                dst: dst.to_owned(),
                follow,
                ..EntryJob::new(dir, src.to_owned(), stat)
            };
            copy_stated(mover, job, queue)
        }
        Err(e) => dir
            .ctx
            .fail(CopyError::io(Op::Stat, dir.src_path(Some(src)), e)),
    }
}

/// Dispatches on the source's type once it is known.
pub(crate) fn copy_stated<'a>(mover: &mut dyn Mover<'a>, job: EntryJob<'_, 'a>, queue: &Queue<'a>) {
    let ctx = job.dir.ctx;
    if crate::ranks::sent_to_owner(ctx, job.dir, &job.src, &job.dst, &job.stat) {
        return;
    }
    let done = match job.stat.kind() {
        Kind::Dir if ctx.plan.recursive => {
            queue.push(Task::Subdir {
                parent: job.dir.node().clone(),
                name: job.src,
                stat: Some(job.stat),
            });
            return;
        }
        Kind::Dir => Err(Refusal::NotRecursive
            .of(job.src_path(), job.dst_path())
            .into()),
        _ if ctx.plan.link != LinkMode::Copy => other::make_link(&job),
        // Regular files, and special files read as data (cp without -r, or --copy-contents).
        _ if ctx.policy.copies_as_data(&job.stat) => file::copy_file(mover, job, queue),
        _ => other::copy_other(&job),
    };
    if let Err(e) = done {
        ctx.fail(e);
    }
}
