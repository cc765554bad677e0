//! The streaming, parallel walk: a shared stack of tasks and the workers that take them.
//!
//! Tasks are whole directories, batches of one directory's entries, and chunks of big files, so a
//! deep tree spreads across workers by directory and a flat directory by batches of entries.
//! The stack is LIFO, so the walk runs depth-first and the number of queued tasks stays near
//! depth × fan-out instead of growing with the tree. A reader that finds the stack already full
//! copies its entries itself instead of queueing more.

use std::ffi::{CStr, CString};
use std::mem::MaybeUninit;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::ctx::Ctx;
use crate::engine::Mover;
use crate::error::{CopyError, Op};
use crate::finalize;
use crate::node::{DirHold, DirNode};
use crate::plan::Dereference;
use crate::queue::{Entry, Queue, Task, BATCH};
use crate::refusal::Refusal;
use crate::sys::{self, Kind, Stat};
use crate::xattr::Subject;

/// Bytes of the buffer a worker reads directories into (getdents64).
pub(crate) const DIR_BUF: usize = 64 * 1024;

/// A worker: takes tasks until the tree is done, keeping its engine's pipeline full.
pub(crate) fn worker<'a>(ctx: &'a Ctx<'a>, queue: &Queue<'a>, mover: &mut dyn Mover<'a>) {
    let mut busy = false;
    let mut dir_buf = vec![MaybeUninit::<u8>::uninit(); DIR_BUF];
    loop {
        // Prefer queued work; run our own in-flight I/O to completion before sleeping on the
        // queue, since only we can finish it.
        let task = if busy {
            match queue.try_pop() {
                Some(t) => Some(t),
                None => {
                    mover.drain(queue);
                    queue.pop_or_finish(true)
                }
            }
        } else {
            queue.pop_or_finish(false)
        };
        let Some(task) = task else { break };
        busy = true;
        if ctx.stopped() {
            drop(task);
            continue;
        }
        run_task(ctx, queue, mover, task, &mut dir_buf);
        mover.poll(queue);
    }
    mover.drain(queue);
}

/// Runs the newest queued task to its end on the calling thread, the I/O it started included
/// (`cp --mpi` in lockstep rounds). False when nothing is queued.
pub(crate) fn step<'a>(
    ctx: &'a Ctx<'a>,
    queue: &Queue<'a>,
    mover: &mut dyn Mover<'a>,
    dir_buf: &mut [MaybeUninit<u8>],
) -> bool {
    let Some(task) = queue.try_pop() else {
        return false;
    };
    if !ctx.stopped() {
        run_task(ctx, queue, mover, task, dir_buf);
    }
    mover.drain(queue);
    true
}

fn run_task<'a>(
    ctx: &'a Ctx<'a>,
    queue: &Queue<'a>,
    mover: &mut dyn Mover<'a>,
    task: Task<'a>,
    dir_buf: &mut [MaybeUninit<u8>],
) {
    match task {
        Task::Subdir { parent, name, stat } => {
            if let Some((node, descend)) = open_subdir(ctx, parent, name, stat) {
                if descend {
                    read_dir(ctx, queue, mover, Arc::new(node), dir_buf);
                }
            }
        }
        Task::Read(node) => read_dir(ctx, queue, mover, node, dir_buf),
        Task::Entries { dir, entries } => {
            if let Some(dir) = hold(ctx, dir) {
                mover.copy_entries(&dir, entries, queue);
            }
        }
        Task::Root {
            dir,
            src,
            dst,
            follow,
        } => {
            if let Some(dir) = hold(ctx, dir) {
                crate::engine::copy_root_entry(mover, &dir, (&src, &dst), follow, queue);
            }
        }
        Task::Chunk { file, offset, len } => mover.copy_chunk(&file, offset, len),
        Task::FromRank { root, item } => {
            let mut tasks = crate::ranks::tasks_for(ctx, root, item);
            let first = tasks.pop();
            for task in tasks {
                queue.push(task);
            }
            if let Some(task) = first {
                run_task(ctx, queue, mover, task, dir_buf);
            }
        }
    }
}

/// Holds a directory's descriptors for a task, reporting a failed reopen.
fn hold<'a>(ctx: &Ctx<'a>, dir: Arc<DirNode<'a>>) -> Option<DirHold<'a>> {
    match DirHold::new(dir.clone()) {
        Ok(held) => Some(held),
        Err(e) => {
            ctx.fail(CopyError::io(Op::OpenDir, dir.src_path(None), e));
            None
        }
    }
}

/// Opens a source subdirectory and creates (or, when merging, opens) its destination twin.
/// The flag says whether to read it (false for another filesystem under `-x`).
fn open_subdir<'a>(
    ctx: &'a Ctx<'a>,
    parent: Arc<DirNode<'a>>,
    name: CString,
    stat: Option<Stat>,
) -> Option<(DirNode<'a>, bool)> {
    let follow = ctx.plan.dereference == Dereference::Always;
    let parent = hold(ctx, parent)?;
    let src = match sys::open_dir(parent.src_fd(), &name, follow) {
        Ok(fd) => fd,
        Err(e) => {
            if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) {
                unreadable_subdir(ctx, &parent, &name, stat, follow);
            }
            ctx.fail(CopyError::io(Op::Access, parent.src_path(Some(&name)), e));
            return None;
        }
    };
    let stat = match stat {
        Some(s) => s,
        None => match sys::fstatx(src.as_fd()) {
            Ok(s) => s,
            Err(e) => {
                ctx.fail(CopyError::io(Op::Stat, parent.src_path(Some(&name)), e));
                return None;
            }
        },
    };
    if follow && parent.has_ancestor(stat.dev, stat.ino) {
        let src = parent.src_path(Some(&name));
        ctx.fail(
            Refusal::SymlinkLoop
                .of(src, parent.dst_path(Some(&name)))
                .into(),
        );
        return None;
    }
    let (dst, fresh) = make_dst_dir(ctx, &parent, &name, &stat)?;
    // -x: a mount point is copied as an empty directory, as cp does.
    let descend = !ctx.plan.one_file_system || stat.dev == parent.stat.dev;
    let node = DirNode::child(parent.node().clone(), name, src, dst, stat, fresh);
    Some((node, descend))
}

/// A source subdirectory that is there but cannot be opened (no read permission): as GNU cp
/// makes a directory before it reads the source, its copy is still made, empty, with the
/// source's metadata. The caller reports why it could not be read.
fn unreadable_subdir(
    ctx: &Ctx<'_>,
    parent: &DirHold<'_>,
    name: &CStr,
    stat: Option<Stat>,
    follow: bool,
) {
    let Some(stat) = stat.or_else(|| sys::statx_at(parent.src_fd(), name, follow).ok()) else {
        return;
    };
    if stat.kind() != Kind::Dir {
        return;
    }
    if let Some((dst, fresh)) = make_dst_dir(ctx, parent, name, &stat) {
        let path = || parent.dst_path(Some(name));
        let src = Subject::at(parent.src_fd(), name, follow);
        let inherited = Some(parent.dst_default_acl);
        finalize::directory_of(ctx, src, dst.as_fd(), &stat, fresh, inherited, &path);
    }
}

/// mkdir the destination (owner rwx while it is filled) and open it. An existing directory is
/// merged into; an existing non-directory is cp's "cannot overwrite non-directory" error.
pub(crate) fn make_dst_dir(
    ctx: &Ctx<'_>,
    parent: &DirHold<'_>,
    name: &CStr,
    stat: &Stat,
) -> Option<(std::os::fd::OwnedFd, bool)> {
    let fresh = match sys::mkdirat(
        parent.dst_fd(),
        name,
        finalize::dir_create_mode(ctx.plan, stat),
    ) {
        Ok(()) => true,
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) && !parent.fresh => false,
        Err(e) => {
            ctx.fail(CopyError::io(Op::CreateDir, parent.dst_path(Some(name)), e));
            return None;
        }
    };
    match sys::open_dir(parent.dst_fd(), name, false) {
        Ok(fd) => {
            // cp -v names each directory it makes, before its contents.
            if fresh && ctx.reporter.verbose() {
                ctx.reporter
                    .copied(&parent.src_path(Some(name)), &parent.dst_path(Some(name)));
            }
            Some((fd, fresh))
        }
        Err(e)
            if e.raw_os_error() == Some(libc::ENOTDIR) || e.raw_os_error() == Some(libc::ELOOP) =>
        {
            let refused = Refusal::NonDirectoryWithDirectory
                .of(parent.src_path(Some(name)), parent.dst_path(Some(name)));
            ctx.fail(refused.into());
            None
        }
        Err(e) => {
            ctx.fail(CopyError::io(Op::OpenDir, parent.dst_path(Some(name)), e));
            None
        }
    }
}

/// Reads a directory in getdents64-sized bites: subdirectories become tasks at once, other
/// entries are batched and either queued for idle workers or copied here.
fn read_dir<'a>(
    ctx: &'a Ctx<'a>,
    queue: &Queue<'a>,
    mover: &mut dyn Mover<'a>,
    node: Arc<DirNode<'a>>,
    dir_buf: &mut [MaybeUninit<u8>],
) {
    ctx.progress.dirs.fetch_add(1, Ordering::Relaxed);
    let Some(node) = hold(ctx, node) else { return };
    if !node.fresh && ctx.plan.overwrite.resume().is_some() {
        if let Err(e) = crate::temp::remove_stale_in(node.dst_fd(), dir_buf, &|| ()) {
            ctx.fail(CopyError::io(Op::ReadDir, node.dst_path(None), e));
        }
    }
    let mut batch: Vec<Entry> = Vec::with_capacity(BATCH);
    let flush = |batch: &mut Vec<Entry>, mover: &mut dyn Mover<'a>, last: bool| {
        if batch.is_empty() {
            return;
        }
        let entries = std::mem::replace(batch, Vec::with_capacity(if last { 0 } else { BATCH }));
        if !last && queue.hungry() {
            queue.push(Task::Entries {
                dir: node.clone(),
                entries,
            });
        } else {
            mover.copy_entries(&node, entries, queue);
        }
    };
    let follow_all = ctx.plan.dereference == Dereference::Always;
    let mut subdirs = Vec::new();
    let result = sys::read_dir_entries(node.src_fd(), dir_buf, |name, kind| {
        if kind == Some(Kind::Dir) && !follow_all {
            subdirs.push(name.to_owned());
        } else {
            batch.push((name.to_owned(), kind));
        }
        if batch.len() >= BATCH {
            flush(&mut batch, mover, false);
        }
        if ctx.stopped() {
            batch.clear();
        }
    });
    if let Err(e) = result {
        ctx.fail(CopyError::io(Op::ReadDir, node.src_path(None), e));
    }
    if ctx.plan.recursive {
        for name in subdirs {
            queue.push(Task::Subdir {
                parent: node.clone(),
                name,
                stat: None,
            });
        }
    }
    flush(&mut batch, mover, true);
}
