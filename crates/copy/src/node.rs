//! Shared run state ([`Ctx`]) and the open directory pair ([`DirNode`]) every job hangs from.
//!
//! A `DirNode` holds the source and destination directory descriptors. Every job below it (a
//! subdirectory task, a file in flight, a chunk of a big file) holds an `Arc` to it, so the
//! directory's metadata is applied in `Drop`, after its last child is done, in post-order and
//! without any bookkeeping of its own.

use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::CopyError;
use crate::finalize;
use crate::links::LinkMap;
use crate::plan::CopyPlan;
use crate::run::{Progress, Reporter};
use crate::sys::Stat;

/// State shared by every worker of one run.
pub(crate) struct Ctx<'a> {
    pub plan: &'a CopyPlan,
    pub progress: &'a Progress,
    pub reporter: &'a dyn Reporter,
    pub umask: u32,
    pub is_root: bool,
    pub euid: u32,
    pub egid: u32,
    pub errors: AtomicU64,
    pub fatal: AtomicBool,
    /// First copies of multiply linked inodes (`--preserve=links`).
    pub links: LinkMap,
    /// The "no extended attributes here" warning was printed.
    pub xattr_warned: AtomicBool,
}

impl Ctx<'_> {
    /// Reports a failed entry. Fatal errors (no space, ...) stop the run; after that, follow-on
    /// errors of entries that were in flight are counted but not printed again.
    pub fn fail(&self, err: CopyError) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if self.fatal.load(Ordering::Relaxed) {
            return;
        }
        if err.is_fatal() {
            if self.fatal.swap(true, Ordering::Relaxed) {
                return;
            }
        } else if self.progress.cancelled() {
            return;
        }
        self.reporter.error(&err);
    }

    /// True once the run must stop: SIGINT or a fatal error.
    pub fn stopped(&self) -> bool {
        self.fatal.load(Ordering::Relaxed) || self.progress.cancelled()
    }
}

/// Display names for the top of a tree.
pub(crate) struct RootNames {
    pub src: PathBuf,
    pub dst: PathBuf,
}

/// A source directory and its destination twin, both open.
pub(crate) struct DirNode<'a> {
    pub ctx: &'a Ctx<'a>,
    pub src: OwnedFd,
    pub dst: OwnedFd,
    pub parent: Option<Arc<DirNode<'a>>>,
    /// Name within the parent (empty at a root).
    pub name: CString,
    root: Option<RootNames>,
    /// The destination was created by this run, so none of its entries can exist yet.
    pub fresh: bool,
    /// The source directory's metadata, applied to the destination at the end.
    pub stat: Stat,
    /// Device of the destination directory.
    pub dst_dev: u64,
    /// The destination directory is (or may be) setgid, so new files take its group.
    pub dst_setgid: bool,
    /// Apply metadata in Drop (false for the parent of a single-file root).
    pub finalize: bool,
    /// At a root, under `--preserve=links`: its own descriptor of the destination, which
    /// hard-link targets are named relative to.
    anchor: Option<Arc<OwnedFd>>,
}

impl<'a> DirNode<'a> {
    /// A node below `parent`.
    pub fn child(
        parent: Arc<DirNode<'a>>,
        name: CString,
        src: OwnedFd,
        dst: OwnedFd,
        stat: Stat,
        fresh: bool,
    ) -> Self {
        DirNode {
            ctx: parent.ctx,
            src,
            dst,
            dst_dev: parent.dst_dev,
            // mkdir inherits setgid from its parent; a merged directory is not known.
            dst_setgid: parent.dst_setgid || !fresh,
            parent: Some(parent),
            name,
            root: None,
            fresh,
            stat,
            finalize: true,
            anchor: None,
        }
    }

    /// The node at the top of a tree.
    #[allow(clippy::too_many_arguments)]
    pub fn root(
        ctx: &'a Ctx<'a>,
        names: RootNames,
        src: OwnedFd,
        dst: OwnedFd,
        stat: Stat,
        dst_dev: u64,
        dst_setgid: bool,
        fresh: bool,
        finalize: bool,
    ) -> Self {
        DirNode {
            ctx,
            src,
            dst,
            parent: None,
            name: CString::default(),
            root: Some(names),
            fresh,
            stat,
            dst_dev,
            dst_setgid,
            finalize,
            anchor: None,
        }
    }

    /// Gives a root the descriptor hard links are made relative to.
    pub fn with_link_anchor(mut self) -> Self {
        self.anchor = self.dst.try_clone().ok().map(Arc::new);
        self
    }

    /// Source directory descriptor.
    pub fn src_fd(&self) -> BorrowedFd<'_> {
        self.src.as_fd()
    }

    /// Destination directory descriptor.
    pub fn dst_fd(&self) -> BorrowedFd<'_> {
        self.dst.as_fd()
    }

    /// The user-facing source path of `child` (or of this directory). Built only for messages.
    pub fn src_path(&self, child: Option<&CStr>) -> PathBuf {
        self.path(child, |r| &r.src)
    }

    /// The user-facing destination path of `child` (or of this directory).
    pub fn dst_path(&self, child: Option<&CStr>) -> PathBuf {
        self.path(child, |r| &r.dst)
    }

    fn path(&self, child: Option<&CStr>, pick: fn(&RootNames) -> &PathBuf) -> PathBuf {
        let mut names: Vec<&[u8]> = Vec::new();
        if let Some(c) = child {
            names.push(c.to_bytes());
        }
        let mut node = self;
        loop {
            match (&node.root, &node.parent) {
                (Some(root), _) => {
                    let mut path = pick(root).clone();
                    for name in names.iter().rev() {
                        path.push(OsStr::from_bytes(name));
                    }
                    return path;
                }
                (None, Some(parent)) => {
                    names.push(node.name.to_bytes());
                    node = parent;
                }
                (None, None) => return PathBuf::new(),
            }
        }
    }

    /// The destination `child` as (root anchor, path relative to it), for linkat.
    pub fn anchored_path(&self, child: &CStr) -> Option<(Arc<OwnedFd>, CString)> {
        let mut names: Vec<&[u8]> = vec![child.to_bytes()];
        let mut node = self;
        while let Some(parent) = &node.parent {
            names.push(node.name.to_bytes());
            node = parent;
        }
        let anchor = node.anchor.clone()?;
        names.reverse();
        CString::new(names.join(&b'/'))
            .ok()
            .map(|path| (anchor, path))
    }

    /// True when `(dev, ino)` is this directory or one of its ancestors (a symlink loop
    /// under `-L`).
    pub fn has_ancestor(&self, dev: u64, ino: u64) -> bool {
        let mut node = Some(self);
        while let Some(n) = node {
            if n.stat.dev == dev && n.stat.ino == ino {
                return true;
            }
            node = n.parent.as_deref();
        }
        false
    }
}

impl Drop for DirNode<'_> {
    fn drop(&mut self) {
        if self.finalize {
            finalize::directory(self);
        }
    }
}
