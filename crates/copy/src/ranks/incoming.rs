//! Work arriving from other ranks: a [`WorkItem`] becomes the tasks that do it here, below
//! this rank's node of its root. The directories above it are opened, not created (whoever
//! sent it created them), and carry no metadata of their own.

use std::ffi::CString;
use std::os::fd::AsFd;
use std::sync::Arc;

use super::outgoing::clamp_len;
use super::work::{kind_of, WorkItem};
use crate::ctx::Ctx;
use crate::engine::bigfile::{chunk_len, BigFile};
use crate::error::{CopyError, Op};
use crate::node::{DirHold, DirNode};
use crate::opened::OpenedPair;
use crate::plan::Dereference;
use crate::queue::Task;
use crate::quote::quote;
use crate::sys;

/// The hook of a worker's `Task::FromRank`: turns an item from another rank into the tasks
/// that do it here, below `root`. The directories above it are opened (not created: whoever
/// sent it created them), and carry no metadata of their own. A chunk range is clamped to the
/// file's size as opened here, and cut into `--chunk-size` tasks again for this rank's workers
/// (at most [`MAX_CHUNKS`](crate::engine::bigfile::MAX_CHUNKS)), whatever length it claims.
pub(crate) fn tasks_for<'a>(
    ctx: &'a Ctx<'a>,
    root: Arc<DirNode<'a>>,
    item: WorkItem,
) -> Vec<Task<'a>> {
    match item {
        WorkItem::Chunk {
            dir,
            src,
            dst,
            name,
            offset,
            len,
            owner,
            id,
            ..
        } => {
            let file = open_chain(ctx, root, &dir, false)
                .and_then(|dir| open_lent(ctx, dir, &src, (&dst, &name), owner, id));
            let Some(file) = file else {
                // The owner must hear of it, or it waits for this chunk forever.
                if let Some(ranks) = ctx.ranks.as_ref() {
                    ranks.chunk_done(owner, id, true, 0);
                }
                return Vec::new();
            };
            let file = Arc::new(file);
            let end = offset.saturating_add(clamp_len(&file, offset, len));
            let step = ctx.tuning.chunk_size.max(1 << 20);
            pieces(offset, end, step)
                .map(|(offset, len)| Task::Chunk {
                    file: file.clone(),
                    offset,
                    len,
                })
                .collect()
        }
        WorkItem::ChunkDone { .. } => Vec::new(),
        other => resolve_walk(ctx, root, other).into_iter().collect(),
    }
}

/// Opens another rank's big file in `dir` to copy chunks of it: `written` is the name its data
/// goes to (under `--atomic`, a temporary), `name` the destination's own, which messages give.
fn open_lent<'a>(
    ctx: &'a Ctx<'a>,
    dir: Arc<DirNode<'a>>,
    src: &[u8],
    (written, name): (&[u8], &[u8]),
    owner: u32,
    id: u64,
) -> Option<BigFile<'a>> {
    let dir = match DirHold::new(dir.clone()) {
        Ok(held) => held,
        Err(e) => {
            ctx.fail(CopyError::io(Op::OpenDir, dir.src_path(None), e));
            return None;
        }
    };
    let (src, written, dst) = (
        cstring(ctx, src)?,
        cstring(ctx, written)?,
        cstring(ctx, name)?,
    );
    let flags = libc::O_CLOEXEC | libc::O_NOFOLLOW;
    let src_fd = match sys::openat(dir.src_fd(), &src, libc::O_RDONLY | flags, 0) {
        Ok(fd) => fd,
        Err(e) => {
            ctx.fail(CopyError::io(Op::Open, dir.src_path(Some(&src)), e));
            return None;
        }
    };
    let dst_fd = match sys::openat(dir.dst_fd(), &written, libc::O_WRONLY | flags, 0) {
        Ok(fd) => fd,
        Err(e) => {
            ctx.fail(CopyError::io(Op::Create, dir.dst_path(Some(&dst)), e));
            return None;
        }
    };
    let stat = match sys::fstatx(src_fd.as_fd()) {
        Ok(stat) => stat,
        Err(e) => {
            ctx.fail(CopyError::io(Op::Stat, dir.src_path(Some(&src)), e));
            return None;
        }
    };
    let pair = OpenedPair {
        src: src_fd,
        stat,
        dst: dst_fd,
        created: false,
        // Kept so a chunk lent on again goes to the same name. The owner alone renames or
        // removes it: a lent file is never finished or abandoned here.
        temp: (written != dst).then_some(written),
        replaces: None,
        link_target: None,
        removable: false,
        stream: false,
        backup: None,
        hash: None,
    };
    Some(BigFile::new(dir, src.clone(), dst, pair).lent(owner, id))
}

/// Directories and entries.
fn resolve_walk<'a>(ctx: &'a Ctx<'a>, root: Arc<DirNode<'a>>, item: WorkItem) -> Option<Task<'a>> {
    match item {
        WorkItem::Dir {
            path, parent_fresh, ..
        } => {
            let (parent, name) = match path.iter().rposition(|&b| b == b'/') {
                Some(i) => (&path[..i], &path[i + 1..]),
                None => (&path[..0], &path[..]),
            };
            let parent = open_chain(ctx, root, parent, parent_fresh)?;
            Some(Task::Subdir {
                parent,
                name: cstring(ctx, name)?,
                stat: None,
            })
        }
        WorkItem::Entries {
            dir, fresh, names, ..
        } => {
            let dir = open_chain(ctx, root, &dir, fresh)?;
            let mut entries = Vec::with_capacity(names.len());
            for (name, kind) in names {
                entries.push((cstring(ctx, &name)?, kind_of(kind)));
            }
            Some(Task::Entries { dir, entries })
        }
        WorkItem::Chunk { .. } | WorkItem::ChunkDone { .. } => None,
    }
}

/// Opens the directories of `path` below `root`, one component at a time, as nodes that apply
/// no metadata. The last one is `fresh` as its creator saw it.
fn open_chain<'a>(
    ctx: &'a Ctx<'a>,
    root: Arc<DirNode<'a>>,
    path: &[u8],
    fresh: bool,
) -> Option<Arc<DirNode<'a>>> {
    let follow = ctx.plan.dereference == Dereference::Always;
    let mut node = root;
    if path.is_empty() {
        return Some(node);
    }
    let parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    for (i, part) in parts.iter().enumerate() {
        let name = cstring(ctx, part)?;
        let held = match DirHold::new(node.clone()) {
            Ok(held) => held,
            Err(e) => {
                ctx.fail(CopyError::io(Op::OpenDir, node.src_path(None), e));
                return None;
            }
        };
        let opened = sys::open_dir(held.src_fd(), &name, follow).and_then(|src| {
            let stat = sys::fstatx(src.as_fd())?;
            Ok((src, stat))
        });
        let (src, stat) = match opened {
            Ok(pair) => pair,
            Err(e) => {
                ctx.fail(CopyError::io(Op::OpenDir, held.src_path(Some(&name)), e));
                return None;
            }
        };
        let dst = match sys::open_dir(held.dst_fd(), &name, false) {
            Ok(fd) => fd,
            Err(e) => {
                ctx.fail(CopyError::io(Op::OpenDir, held.dst_path(Some(&name)), e));
                return None;
            }
        };
        let last = i + 1 == parts.len();
        let mut child = DirNode::child(node.clone(), name, src, dst, stat, last && fresh);
        child.finalize = false;
        drop(held);
        node = Arc::new(child);
    }
    Some(node)
}

fn cstring(ctx: &Ctx<'_>, bytes: &[u8]) -> Option<CString> {
    match CString::new(bytes) {
        Ok(c) => Some(c),
        Err(_) => {
            ctx.fail(CopyError::Refused(format!(
                "a work item from another rank names {}, which holds a NUL byte",
                quote(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(bytes))
            )));
            None
        }
    }
}

/// Cuts `offset .. end` into pieces of about `step` bytes (a short last piece joins the one
/// before it), never more than [`MAX_CHUNKS`](crate::engine::bigfile::MAX_CHUNKS) of them.
fn pieces(offset: u64, end: u64, step: u64) -> impl Iterator<Item = (u64, u64)> {
    let step = chunk_len(end.saturating_sub(offset), step);
    let mut at = offset;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let rest = end - at;
        let piece = if rest > step.saturating_add(step / 2) {
            step
        } else {
            rest
        };
        let item = (at, piece);
        at += piece;
        Some(item)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::bigfile::MAX_CHUNKS;

    #[test]
    fn pieces_cover_the_range_and_stay_few() {
        let mib = 1u64 << 20;
        let got: Vec<_> = pieces(0, 9 * mib + 5, 4 * mib).collect();
        assert_eq!(got, [(0, 4 * mib), (4 * mib, 5 * mib + 5)]);
        assert_eq!(pieces(7, 7, mib).count(), 0);
        assert_eq!(pieces(9, 7, mib).count(), 0);
        // "To end of file" that reached here unclamped: still few pieces, covering it all,
        // and no overflow at the top of the range.
        let offset = 64 * mib;
        let all: Vec<_> = pieces(offset, u64::MAX, mib).collect();
        assert!(all.len() as u64 <= MAX_CHUNKS, "{} pieces", all.len());
        assert_eq!(all[0].0, offset);
        let (last_at, last_len) = *all.last().unwrap();
        assert_eq!(last_at + last_len, u64::MAX);
        assert!(all.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
    }
}
