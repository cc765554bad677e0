//! The open directory pair ([`DirNode`]) every job hangs from.
//!
//! A `DirNode` holds the source and destination directory descriptors. Every job below it (a
//! subdirectory task, a file in flight, a chunk of a big file) holds an `Arc` to it, so the
//! directory's metadata is applied in `Drop`, after its last child is done, in post-order and
//! without any bookkeeping of its own.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use crate::ctx::Ctx;
use crate::finalize;
use crate::sys::{self, Stat};
use crate::xattr;

/// How a root opens its pair again once the descriptor budget closed it: by the paths it was
/// first opened by, from the working directory, following symlinks as that first open did.
pub(crate) struct RootPaths {
    pub src: CString,
    pub follow_src: bool,
    pub dst: CString,
    pub follow_dst: bool,
}

/// Display names for the top of a tree.
pub(crate) struct RootNames {
    pub src: PathBuf,
    pub dst: PathBuf,
    /// Index of the root in `CopyPlan::roots`.
    pub index: u32,
}

/// A source directory and its destination twin.
///
/// Their descriptors are open while anyone holds the node ([`DirHold`]). When the run is over
/// its directory-descriptor budget (a deep tree under a low RLIMIT_NOFILE), a node nobody holds
/// closes them, and the next holder reopens them by name from the nearest open ancestor. Under
/// ordinary limits nothing is ever closed early.
pub(crate) struct DirNode<'a> {
    pub ctx: &'a Ctx<'a>,
    fds: Mutex<DirFds>,
    /// Raw copies of the descriptors for lock-free reads by holders (-1 while closed).
    src_raw: AtomicI32,
    dst_raw: AtomicI32,
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
    /// The destination directory has a default ACL, so new entries take an ACL from it, which
    /// `-p` and `--no-preserve=mode` replace, and a new directory's mode from it, not from the
    /// umask: asked once of a root or a directory that was there, and for a directory this run
    /// made, its parent's (mkdir gives it the parent's default ACL).
    pub dst_default_acl: bool,
    /// Apply metadata in Drop (false for the parent of a single-file root).
    pub finalize: bool,
    /// The directory of a command-line file operand (`cp a b`), not a directory of a tree.
    pub operand: bool,
    /// At a root, under `--preserve=links`: its own descriptor of the destination, which
    /// hard-link targets are named relative to.
    anchor: Option<Arc<OwnedFd>>,
    /// At a root that may close under the budget: how to open it again.
    reopen_from: Option<RootPaths>,
}

/// A node's descriptors and how many holders need them.
struct DirFds {
    src: Option<OwnedFd>,
    dst: Option<OwnedFd>,
    holders: u32,
    /// The destination directory's (dev, ino), recorded when its descriptor was first closed;
    /// a reopened directory must be the same one.
    dst_id: Option<(u64, u64)>,
}

impl<'a> DirNode<'a> {
    fn new_fds(ctx: &Ctx<'_>, src: OwnedFd, dst: OwnedFd) -> (Mutex<DirFds>, AtomicI32, AtomicI32) {
        ctx.open_dirs.fetch_add(1, Ordering::Relaxed);
        let raw = (
            AtomicI32::new(src.as_raw_fd()),
            AtomicI32::new(dst.as_raw_fd()),
        );
        (
            Mutex::new(DirFds {
                src: Some(src),
                dst: Some(dst),
                holders: 0,
                dst_id: None,
            }),
            raw.0,
            raw.1,
        )
    }

    /// A node below `parent`.
    pub fn child(
        parent: Arc<DirNode<'a>>,
        name: CString,
        src: OwnedFd,
        dst: OwnedFd,
        stat: Stat,
        fresh: bool,
    ) -> Self {
        let dst_default_acl = if fresh {
            parent.dst_default_acl
        } else {
            xattr::has_default_acl(dst.as_fd())
        };
        let (fds, src_raw, dst_raw) = Self::new_fds(parent.ctx, src, dst);
        DirNode {
            dst_default_acl,
            ctx: parent.ctx,
            fds,
            src_raw,
            dst_raw,
            dst_dev: parent.dst_dev,
            // mkdir inherits setgid from its parent; a merged directory is not known.
            dst_setgid: parent.dst_setgid || !fresh,
            parent: Some(parent),
            name,
            root: None,
            fresh,
            stat,
            finalize: true,
            operand: false,
            anchor: None,
            reopen_from: None,
        }
    }

    /// The node at the top of a tree: the directories `src` (stated as `stat`) and `dst`
    /// (stated as `dst_stat`), the latter made by this run when `fresh`; `finalize`: apply the
    /// source's metadata to it in Drop.
    pub fn root(
        ctx: &'a Ctx<'a>,
        names: RootNames,
        (src, dst): (OwnedFd, OwnedFd),
        (stat, dst_stat): (Stat, &Stat),
        fresh: bool,
        finalize: bool,
    ) -> Self {
        let (dst_dev, dst_setgid) = (dst_stat.dev, dst_stat.mode & libc::S_ISGID != 0);
        let dst_default_acl = xattr::has_default_acl(dst.as_fd());
        let (fds, src_raw, dst_raw) = Self::new_fds(ctx, src, dst);
        DirNode {
            dst_default_acl,
            ctx,
            fds,
            src_raw,
            dst_raw,
            parent: None,
            name: CString::default(),
            root: Some(names),
            fresh,
            stat,
            dst_dev,
            dst_setgid,
            finalize,
            operand: !finalize,
            anchor: None,
            reopen_from: None,
        }
    }

    /// What this directory means for the metadata of a file made in it.
    pub fn in_dir(&self) -> finalize::InDir {
        finalize::InDir {
            setgid: self.dst_setgid,
            default_acl: self.dst_default_acl,
            fresh: self.fresh,
        }
    }

    /// True for the directory of a file operand (`cp a b`): its only entry is the operand.
    pub fn is_operand_dir(&self) -> bool {
        self.operand
    }

    /// Gives a root the descriptor hard links are made relative to.
    pub fn with_link_anchor(mut self) -> Self {
        // SAFETY: a node is built with its descriptors open, and nobody can close them
        // before it is handed out.
        let dst = unsafe { self.dst_fd_unchecked() };
        self.anchor = dst.try_clone_to_owned().ok().map(Arc::new);
        self
    }

    /// Lets a root close under the descriptor budget, to be opened again by `paths`.
    pub fn reopened_by(mut self, paths: RootPaths) -> Self {
        self.reopen_from = Some(paths);
        self
    }

    /// Closes a node nobody holds yet when the run is over its budget (a root just started,
    /// whose task waits in the queue), as the last holder's release would.
    pub fn park(&self) {
        let mut fds = self.fds.lock().expect("dir fds lock");
        if fds.holders == 0 {
            self.close_if_over_budget(&mut fds);
        }
    }

    /// The source directory's descriptor.
    ///
    /// # Safety
    /// The descriptors must be open for the whole borrow: the caller holds the node (the
    /// descriptors stay open while a [`DirHold`] lives), or it is being created or dropped
    /// with its descriptors open. Outside this module, [`DirHold::src_fd`] is the safe way.
    unsafe fn src_fd_unchecked(&self) -> BorrowedFd<'_> {
        let raw = self.src_raw.load(Ordering::Acquire);
        assert!(raw >= 0, "source directory used while closed");
        // SAFETY: the caller keeps the descriptor open for the borrow (this fn's contract).
        unsafe { BorrowedFd::borrow_raw(raw) }
    }

    /// The destination directory's descriptor, under [`DirNode::src_fd_unchecked`]'s contract.
    ///
    /// # Safety
    /// As for [`DirNode::src_fd_unchecked`].
    unsafe fn dst_fd_unchecked(&self) -> BorrowedFd<'_> {
        let raw = self.dst_raw.load(Ordering::Acquire);
        assert!(raw >= 0, "destination directory used while closed");
        // SAFETY: as in src_fd_unchecked.
        unsafe { BorrowedFd::borrow_raw(raw) }
    }

    /// Registers a holder, reopening the descriptors if they were closed.
    fn acquire(&self) -> io::Result<()> {
        let mut fds = self.fds.lock().expect("dir fds lock");
        if fds.src.is_none() {
            let (src, dst) = self.reopen(fds.dst_id)?;
            self.src_raw.store(src.as_raw_fd(), Ordering::Release);
            self.dst_raw.store(dst.as_raw_fd(), Ordering::Release);
            fds.src = Some(src);
            fds.dst = Some(dst);
            self.ctx.open_dirs.fetch_add(1, Ordering::Relaxed);
        }
        fds.holders += 1;
        Ok(())
    }

    /// Drops a holder; the last one closes the descriptors when the run is over budget.
    fn release(&self) {
        let mut fds = self.fds.lock().expect("dir fds lock");
        fds.holders -= 1;
        if fds.holders == 0 {
            self.close_if_over_budget(&mut fds);
        }
    }

    /// Closes the descriptors (no holder has them) when the run is over its budget and this
    /// node can be opened again: below a root, or a root that knows its paths.
    fn close_if_over_budget(&self, fds: &mut DirFds) {
        let reopenable = self.parent.is_some() || self.reopen_from.is_some();
        if fds.src.is_some() && reopenable && self.ctx.over_dir_budget() {
            if fds.dst_id.is_none() {
                let Some(stat) = fds.dst.as_ref().and_then(|d| sys::fstatx(d.as_fd()).ok()) else {
                    // Without its identity it could not be checked when reopened: keep it.
                    return;
                };
                fds.dst_id = Some((stat.dev, stat.ino));
            }
            self.src_raw.store(-1, Ordering::Release);
            self.dst_raw.store(-1, Ordering::Release);
            fds.src = None;
            fds.dst = None;
            self.ctx.open_dirs.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Opens this directory pair again, starting from the nearest ancestor that is open (or
    /// from a closed root's own paths) and going down one component at a time (paths can be
    /// longer than PATH_MAX), never following a symlink on the destination side (nor on the
    /// source side unless `-L`). Every directory reopened on the way must be the one first
    /// opened under that name: a directory swapped for another (or for a symlink) meanwhile is
    /// an error for this subtree, not a redirect. `own_dst_id` is this node's recorded
    /// destination identity (its lock is held). At most four descriptors are open at once on
    /// the way: the starting pair and the next, then each pair and the next source.
    fn reopen(&self, own_dst_id: Option<(u64, u64)>) -> io::Result<(OwnedFd, OwnedFd)> {
        let mut chain: Vec<&DirNode<'_>> = vec![self];
        let mut base: Option<&DirNode<'_>> = None;
        let mut node = self;
        while let Some(parent) = node.parent.as_deref() {
            let open = {
                let mut fds = parent.fds.lock().expect("dir fds lock");
                if fds.src.is_some() {
                    fds.holders += 1;
                    true
                } else {
                    false
                }
            };
            if open {
                base = Some(parent);
                break;
            }
            chain.push(parent);
            node = parent;
        }
        chain.reverse();
        let opened = self.open_chain(&chain, &mut base, own_dst_id);
        if let Some(base) = base {
            base.release();
        }
        opened
    }

    /// Opens `chain` (top first) below `base`, or from the top's root paths when there is no
    /// open base; lets go of `base` once the first pair is open.
    fn open_chain(
        &self,
        chain: &[&DirNode<'_>],
        base: &mut Option<&DirNode<'_>>,
        own_dst_id: Option<(u64, u64)>,
    ) -> io::Result<(OwnedFd, OwnedFd)> {
        let follow_src = self.ctx.plan.dereference == crate::plan::Dereference::Always;
        let cwd = rustix::fs::CWD;
        let mut src: Option<OwnedFd> = None;
        let mut dst: Option<OwnedFd> = None;
        for step in chain {
            let dst_id = if std::ptr::eq(*step, self) {
                own_dst_id
            } else {
                step.fds.lock().expect("dir fds lock").dst_id
            };
            let src_id = Some((step.stat.dev, step.stat.ino));
            let from_root = || {
                step.reopen_from.as_ref().ok_or_else(|| {
                    io::Error::other("directory closed with no way to open it again")
                })
            };
            let next_src = match (&src, *base) {
                (Some(prev), _) => open_verified(prev.as_fd(), &step.name, follow_src, src_id)?,
                (None, Some(base)) => {
                    // SAFETY: `reopen` counted a holder of `base`, released after this open.
                    let at = unsafe { base.src_fd_unchecked() };
                    open_verified(at, &step.name, follow_src, src_id)?
                }
                (None, None) => {
                    let paths = from_root()?;
                    open_verified(cwd, &paths.src, paths.follow_src, src_id)?
                }
            };
            src = Some(next_src);
            let next_dst = match (&dst, *base) {
                (Some(prev), _) => open_verified(prev.as_fd(), &step.name, false, dst_id)?,
                (None, Some(base)) => {
                    // SAFETY: as above.
                    let at = unsafe { base.dst_fd_unchecked() };
                    open_verified(at, &step.name, false, dst_id)?
                }
                (None, None) => {
                    let paths = from_root()?;
                    open_verified(cwd, &paths.dst, paths.follow_dst, dst_id)?
                }
            };
            dst = Some(next_dst);
            if let Some(base) = base.take() {
                base.release();
            }
        }
        Ok((src.expect("a chain"), dst.expect("a chain")))
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

    /// This directory as (root index, path relative to the root, depth), for another rank.
    pub fn rel_path(&self) -> (u32, Vec<u8>, usize) {
        let mut names: Vec<&[u8]> = Vec::new();
        let mut node = self;
        while let Some(parent) = &node.parent {
            names.push(node.name.to_bytes());
            node = parent;
        }
        names.reverse();
        let index = node.root.as_ref().map_or(0, |r| r.index);
        (index, names.join(&b'/'), names.len())
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
        let open = self.fds.get_mut().expect("dir fds lock").src.is_some();
        if let Some(ranks) = self.ctx.ranks.as_ref().filter(|_| self.finalize) {
            // Other ranks may still be filling it: its metadata waits for the end of the job.
            ranks.defer_dir(self.rel_path(), self.stat, self.fresh);
        } else if self.finalize && (open || self.acquire().is_ok()) {
            let path = || self.dst_path(None);
            let ctx = self.ctx;
            // SAFETY: the descriptors are open (checked, or just reopened by `acquire`), and
            // nothing else holds a dropped node.
            let (src, dst) = unsafe { (self.src_fd_unchecked(), self.dst_fd_unchecked()) };
            finalize::directory(
                ctx,
                src,
                dst,
                &self.stat,
                self.fresh,
                Some(self.dst_default_acl),
                &path,
            );
        }
        if self.fds.get_mut().expect("dir fds lock").src.is_some() {
            self.ctx.open_dirs.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A claim on a [`DirNode`]'s descriptors: while it lives, `src_fd()` and `dst_fd()` are open.
pub(crate) struct DirHold<'a> {
    node: Arc<DirNode<'a>>,
}

impl<'a> DirHold<'a> {
    /// Holds `node`, reopening its descriptors if the budget had closed them.
    pub fn new(node: Arc<DirNode<'a>>) -> io::Result<Self> {
        node.acquire()?;
        Ok(DirHold { node })
    }

    /// The held node.
    pub fn node(&self) -> &Arc<DirNode<'a>> {
        &self.node
    }

    /// The source directory's descriptor, open while this hold lives.
    pub fn src_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: a hold keeps the node's descriptors open until it is dropped, which the
        // borrow of `self` outlasts.
        unsafe { self.node.src_fd_unchecked() }
    }

    /// The destination directory's descriptor, open while this hold lives.
    pub fn dst_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: as in src_fd.
        unsafe { self.node.dst_fd_unchecked() }
    }
}

impl Drop for DirHold<'_> {
    fn drop(&mut self) {
        self.node.release();
    }
}

impl<'a> std::ops::Deref for DirHold<'a> {
    type Target = Arc<DirNode<'a>>;
    fn deref(&self) -> &Self::Target {
        &self.node
    }
}

/// Opens the directory `name` below `base` and checks that it is the directory `id` names.
fn open_verified(
    base: BorrowedFd<'_>,
    name: &CStr,
    follow: bool,
    id: Option<(u64, u64)>,
) -> io::Result<OwnedFd> {
    let fd = sys::open_dir(base, name, follow)?;
    if let Some((dev, ino)) = id {
        let stat = sys::fstatx(fd.as_fd())?;
        if (stat.dev, stat.ino) != (dev, ino) {
            return Err(io::Error::other(
                "directory replaced during the copy (device and inode differ from its first open)",
            ));
        }
    }
    Ok(fd)
}
