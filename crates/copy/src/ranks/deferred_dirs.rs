//! The metadata of the directories this rank created (or merged into), applied after every
//! rank finished copying: other ranks may fill a directory until then. Deepest level first,
//! all ranks level by level, as post-order does on one node.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use super::port::Exchange;
use super::DeferredDir;
use crate::ctx::Ctx;
use crate::error::{CopyError, Op};
use crate::finalize;
use crate::plan::Dereference;
use crate::sys;

/// Applies the metadata of the directories this rank created, after every rank finished
/// copying: deepest level first, all ranks level by level, as post-order does on one node.
pub(super) fn finish(ctx: &Ctx<'_>, exchange: &mut dyn Exchange) {
    let ranks = ctx.ranks.as_ref().expect("a ranked run");
    let mut mine = std::mem::take(&mut *ranks.deferred.lock().expect("deferred lock"));
    let local = mine.iter().map(|d| d.depth as u64).max().unwrap_or(0);
    let deepest = exchange.max(local);
    mine.sort_by_key(|d| std::cmp::Reverse(d.depth));
    let mut next = mine.into_iter().peekable();
    for level in (0..=deepest).rev() {
        while let Some(dir) = next.next_if(|d| d.depth as u64 == level) {
            apply(ctx, &dir);
        }
        exchange.barrier();
    }
}

/// Opens the directory `path` (relative, `/`-separated) below `top`, in pieces shorter than
/// PATH_MAX, so a tree of any depth can be reached. `follow`: follow a symlink at the end of
/// each piece.
fn open_below(top: OwnedFd, path: &[u8], follow: bool) -> io::Result<OwnedFd> {
    const PIECE: usize = libc::PATH_MAX as usize - 1;
    let mut fd = top;
    let mut rest = path;
    while !rest.is_empty() {
        let cut = if rest.len() <= PIECE {
            rest.len()
        } else {
            rest[..=PIECE]
                .iter()
                .rposition(|&b| b == b'/')
                .filter(|&at| at > 0)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENAMETOOLONG))?
        };
        let piece =
            CString::new(&rest[..cut]).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        fd = sys::open_dir(fd.as_fd(), &piece, follow)?;
        rest = rest.get(cut + 1..).unwrap_or_default();
    }
    Ok(fd)
}

fn apply(ctx: &Ctx<'_>, dir: &DeferredDir) {
    let root = &ctx.plan.roots[dir.root as usize];
    let rel = std::ffi::OsStr::from_bytes(&dir.path);
    let (src_path, dst_path) = if dir.path.is_empty() {
        (root.src.clone(), root.dst.clone())
    } else {
        (root.src.join(rel), root.dst.join(rel))
    };
    let follow_root = ctx.plan.dereference != Dereference::Never;
    let follow_below = ctx.plan.dereference == Dereference::Always;
    let open = |top: &PathBuf, follow_top: bool| {
        let top = CString::new(top.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let top_fd = sys::open_dir(rustix::fs::CWD, &top, follow_top)?;
        open_below(top_fd, &dir.path, follow_below)
    };
    let src = match open(&root.src, follow_root) {
        Ok(fd) => fd,
        Err(e) => return ctx.fail(CopyError::io(Op::OpenDir, &src_path, e)),
    };
    let dst = match open(&root.dst, false) {
        Ok(fd) => fd,
        Err(e) => return ctx.fail(CopyError::io(Op::OpenDir, &dst_path, e)),
    };
    let path = || dst_path.clone();
    finalize::directory(
        ctx,
        src.as_fd(),
        dst.as_fd(),
        &dir.stat,
        dir.fresh,
        None,
        &path,
    );
}
