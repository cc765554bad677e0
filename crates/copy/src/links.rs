//! Hard links (`--preserve=links`): the first copy of a multiply linked source inode is
//! remembered by a path relative to its tree's destination root; later names link to it.
//! Only inodes with nlink > 1 are tracked, so memory grows with those alone.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex};

use rustix::fs::AtFlags;
use rustix::io::Errno;

use crate::sys::{self, Kind, Stat};

/// Where the first copy of an inode went.
struct FirstCopy {
    anchor: Arc<OwnedFd>,
    path: CString,
}

/// What [`LinkMap::link_or_create`] did.
pub(crate) enum Linked<T> {
    /// The name was hard-linked to an earlier copy.
    Linked,
    /// This is the first name of the inode (or linking failed): `create` ran.
    Created(T),
}

/// Source inode → first destination copy.
#[derive(Default)]
pub(crate) struct LinkMap {
    first: Mutex<HashMap<(u64, u64), FirstCopy>>,
}

impl LinkMap {
    /// Links `dst` in `dir` to the earlier copy of `stat`'s inode, or runs `create` and remembers
    /// its result as the copy later names link to. The lock is held across `create`, so a second
    /// name never races the creation of the first.
    ///
    /// `replace_existing`: a name that is already there is made the link (unless it is one
    /// already), as cp does except under -n and -i. `dst_dir` holds `dst`; `anchored` is `dst` as (root anchor, path relative to it), where
    /// later names find it (`None`: not reachable that way, so not remembered).
    pub fn link_or_create<T, E>(
        &self,
        dst_dir: BorrowedFd<'_>,
        dst: &CStr,
        anchored: impl FnOnce() -> Option<(Arc<OwnedFd>, CString)>,
        stat: &Stat,
        replace_existing: bool,
        create: impl FnOnce() -> Result<T, E>,
    ) -> Result<Linked<T>, E> {
        let key = (stat.dev, stat.ino);
        let mut first = self.first.lock().expect("link map lock");
        if let Some(copy) = first.get(&key) {
            let link = || {
                rustix::fs::linkat(
                    copy.anchor.as_fd(),
                    copy.path.as_c_str(),
                    dst_dir,
                    dst,
                    AtFlags::empty(),
                )
            };
            let linked = link();
            if linked.is_ok() {
                return Ok(Linked::Linked);
            }
            if replace_existing && linked == Err(Errno::EXIST) {
                // A name that exists already (an interrupted run's, or any under cp's rules):
                // already this link, or replaced by it.
                let first_copy = sys::statx_at(copy.anchor.as_fd(), &copy.path, false);
                let existing = sys::statx_at(dst_dir, dst, false);
                if let (Ok(a), Ok(b)) = (first_copy, existing) {
                    if (a.dev, a.ino) == (b.dev, b.ino) {
                        return Ok(Linked::Linked);
                    }
                    if b.kind() != Kind::Dir
                        && sys::unlinkat(dst_dir, dst).is_ok()
                        && link().is_ok()
                    {
                        return Ok(Linked::Linked);
                    }
                }
            }
            // The first copy is gone or out of reach (a path past PATH_MAX): copy this name on
            // its own, as cp does when it cannot link.
        }
        let made = create()?;
        if let Some((anchor, path)) = anchored() {
            first.insert(key, FirstCopy { anchor, path });
        }
        Ok(Linked::Created(made))
    }
}
