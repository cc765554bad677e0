//! Hard-link groups, for `cp --preserve=links` and `sync -H`: the first name of a multiply
//! linked source inode to be made in the destination claims the group ([`LinkTracker::claim`])
//! and is remembered by its path below its tree's destination root; later names, on any
//! worker, wait until it is made and link to it. Only inodes with nlink > 1 (or reached through
//! followed links) are tracked, so memory grows with those alone.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use rustix::fs::AtFlags;
use rustix::io::Errno;

use crate::sys::{self, Kind, Stat};

/// Where the first name of a group goes, and whether it is made yet.
#[derive(Debug)]
pub(crate) struct FirstName {
    /// The destination root its path is relative to (`None`: a sync dry run into a DEST not
    /// made yet, where nothing is linked, only said).
    pub anchor: Option<Arc<OwnedFd>>,
    /// Its path below the anchor.
    pub path: CString,
    /// Its path from the transfer root, as sync's `%L` and `-i` show it (empty for cp).
    pub name: Vec<u8>,
    /// sync's `--delay-updates`: where its new bytes wait until the end of the transfer (its
    /// `.~tmp~` copy, below the anchor); later names are linked to that.
    pub staged: OnceLock<CString>,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Making,
    Made,
    GivenUp,
}

impl FirstName {
    /// The first name at `path` below `anchor`, not made yet.
    pub fn new(anchor: Option<Arc<OwnedFd>>, path: CString, name: Vec<u8>) -> FirstName {
        FirstName {
            anchor,
            path,
            name,
            staged: OnceLock::new(),
            state: Mutex::new(State::Making),
            changed: Condvar::new(),
        }
    }

    /// Waits until the first name is made or given up; true if made.
    pub fn wait(&self) -> bool {
        let mut state = self.state.lock().expect("first name");
        while *state == State::Making {
            state = self.changed.wait(state).expect("first name");
        }
        *state == State::Made
    }

    fn settle(&self, to: State) {
        *self.state.lock().expect("first name") = to;
        self.changed.notify_all();
    }
}

/// Held by the worker making a group's first name: when dropped, the name counts as made
/// (later names link to it; sync's check that it holds the group's bytes still applies),
/// unless [`Leading::given_up`] said otherwise.
#[derive(Debug)]
pub(crate) struct Leading(Arc<FirstName>);

impl Leading {
    /// The first name was not made: later names are made on their own.
    pub fn given_up(self) {
        self.0.settle(State::GivenUp);
        std::mem::forget(self);
    }
}

impl Drop for Leading {
    fn drop(&mut self) {
        self.0.settle(State::Made);
    }
}

/// What [`LinkTracker::claim`] found.
pub(crate) enum Claim {
    /// This name is the group's first: make it, then drop (or give up) the guard.
    First(Leading),
    /// Another name is the first: wait for it ([`FirstName::wait`]), then link to it.
    Later(Arc<FirstName>),
}

/// Source inode → the first name of its group in the destination.
#[derive(Debug, Default)]
pub(crate) struct LinkTracker {
    first: Mutex<HashMap<(u64, u64), Arc<FirstName>>>,
}

impl LinkTracker {
    /// The group of source inode `key`: [`Claim::Later`] when a name claimed it first; else this
    /// name becomes its first, at the place `lead` gives ([`Claim::First`]). `None`: `lead`
    /// gives none (a name that is not made, or cannot be reached again), and nothing is
    /// claimed.
    pub fn claim(
        &self,
        key: (u64, u64),
        lead: impl FnOnce() -> Option<FirstName>,
    ) -> Option<Claim> {
        let mut first = self.first.lock().expect("link groups");
        if let Some(name) = first.get(&key) {
            return Some(Claim::Later(name.clone()));
        }
        let name = Arc::new(lead()?);
        first.insert(key, name.clone());
        Some(Claim::First(Leading(name)))
    }

    /// The group's first name, if one claimed it.
    pub fn get(&self, key: (u64, u64)) -> Option<Arc<FirstName>> {
        self.first.lock().expect("link groups").get(&key).cloned()
    }

    /// cp's use: links `dst` in `dst_dir` to the first name of `stat`'s group, or runs
    /// `create` and makes this name the first (at the place `anchored` gives: `None`, not
    /// reachable that way, so not remembered). A second name never races the making of the
    /// first: it waits for it.
    ///
    /// `replace_existing`: a name that is already there is made the link (unless it is one
    /// already), as cp does except under -n and -i. Where the first name cannot be linked to
    /// (gone, given up, out of reach), this name is made on its own and later names link to it.
    pub fn link_or_create<T, E>(
        &self,
        (dst_dir, dst): (BorrowedFd<'_>, &CStr),
        anchored: impl Fn() -> Option<(Arc<OwnedFd>, CString)>,
        stat: &Stat,
        replace_existing: bool,
        create: impl FnOnce() -> Result<T, E>,
    ) -> Result<Linked<T>, E> {
        let key = (stat.dev, stat.ino);
        let lead =
            || anchored().map(|(anchor, path)| FirstName::new(Some(anchor), path, Vec::new()));
        match self.claim(key, lead) {
            None => create().map(Linked::Created),
            Some(Claim::First(leading)) => match create() {
                Ok(made) => Ok(Linked::Created(made)),
                Err(e) => {
                    leading.given_up();
                    Err(e)
                }
            },
            Some(Claim::Later(first)) => {
                if first.wait() && link_to(&first, (dst_dir, dst), replace_existing) {
                    return Ok(Linked::Linked);
                }
                let made = create()?;
                if let Some(name) = lead() {
                    let name = Arc::new(name);
                    name.settle(State::Made);
                    self.first.lock().expect("link groups").insert(key, name);
                }
                Ok(Linked::Created(made))
            }
        }
    }
}

/// What [`LinkTracker::link_or_create`] did.
pub(crate) enum Linked<T> {
    /// The name was hard-linked to an earlier copy.
    Linked,
    /// This is the first name of the inode (or linking failed): `create` ran.
    Created(T),
}

/// Links `dst` to the made `first` name; a name already there is kept when it is that link,
/// else replaced under `replace_existing` (never a directory). False: not linked.
fn link_to(
    first: &FirstName,
    (dst_dir, dst): (BorrowedFd<'_>, &CStr),
    replace_existing: bool,
) -> bool {
    let Some(anchor) = &first.anchor else {
        return false;
    };
    let link = || {
        rustix::fs::linkat(
            anchor.as_fd(),
            first.path.as_c_str(),
            dst_dir,
            dst,
            AtFlags::empty(),
        )
    };
    let linked = link();
    if linked.is_ok() {
        return true;
    }
    if !(replace_existing && linked == Err(Errno::EXIST)) {
        return false;
    }
    // A name that exists already (an interrupted run's, or any under cp's rules): already
    // this link, or replaced by it.
    let first_copy = sys::statx_at(anchor.as_fd(), &first.path, false);
    let existing = sys::statx_at(dst_dir, dst, false);
    match (first_copy, existing) {
        (Ok(a), Ok(b)) if (a.dev, a.ino) == (b.dev, b.ino) => true,
        (Ok(_), Ok(b)) => {
            b.kind() != Kind::Dir && sys::unlinkat(dst_dir, dst).is_ok() && link().is_ok()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    fn name(path: &str) -> FirstName {
        FirstName::new(None, CString::new(path).unwrap(), path.as_bytes().to_vec())
    }

    /// The first claim leads; later claims get its name; a claim that gives no place claims
    /// nothing, and the next one leads.
    #[test]
    fn the_first_name_claims_the_group() {
        let links = LinkTracker::default();
        assert!(links.claim((1, 1), || None).is_none());
        assert!(links.get((1, 1)).is_none());
        let Some(Claim::First(lead)) = links.claim((1, 1), || Some(name("a"))) else {
            panic!("the first name leads");
        };
        let Some(Claim::Later(first)) = links.claim((1, 1), || Some(name("b"))) else {
            panic!("a later name follows");
        };
        assert_eq!(first.path.as_bytes(), b"a");
        assert!(matches!(
            links.claim((1, 2), || Some(name("c"))),
            Some(Claim::First(_))
        ));
        drop(lead);
        assert!(first.wait());
    }

    /// A later name waits until the first is made (on another thread), and learns whether it
    /// was made or given up.
    #[test]
    fn later_names_wait_for_the_first() {
        for give_up in [false, true] {
            let links = LinkTracker::default();
            let Some(Claim::First(lead)) = links.claim((1, 1), || Some(name("a"))) else {
                panic!("the first name leads");
            };
            let Some(Claim::Later(first)) = links.claim((1, 1), || None) else {
                panic!("a later name follows");
            };
            let settled = AtomicBool::new(false);
            std::thread::scope(|s| {
                let waiter = s.spawn(|| {
                    let made = first.wait();
                    assert!(settled.load(Ordering::SeqCst), "waited until settled");
                    made
                });
                std::thread::sleep(Duration::from_millis(50));
                settled.store(true, Ordering::SeqCst);
                if give_up {
                    lead.given_up();
                } else {
                    drop(lead);
                }
                assert_eq!(waiter.join().unwrap(), !give_up);
            });
        }
    }

    /// cp's use on a real directory: the first name is created, the second linked to it; a
    /// first name whose creation failed is given up and the next name is created on its own.
    #[test]
    fn link_or_create_links_later_names_to_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let root = Arc::new(
            sys::open_dir(
                rustix::fs::CWD,
                &CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap(),
                true,
            )
            .unwrap(),
        );
        let stat = Stat {
            dev: 9,
            ino: 9,
            nlink: 2,
            ..sys::fstatx(root.as_fd()).unwrap()
        };
        let links = LinkTracker::default();
        let fd = root.as_fd();
        let create = |n: &str| {
            let c = CString::new(n).unwrap();
            let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC;
            move || sys::openat(fd, &c, flags, 0o644).map(drop)
        };
        let at = |n: &'static str| {
            let root = root.clone();
            move || Some((root.clone(), CString::new(n).unwrap()))
        };
        let (a, b) = (CString::new("a").unwrap(), CString::new("b").unwrap());
        let made = links.link_or_create((root.as_fd(), &a), at("a"), &stat, false, create("a"));
        assert!(matches!(made, Ok(Linked::Created(()))));
        let linked = links.link_or_create((root.as_fd(), &b), at("b"), &stat, false, create("b"));
        assert!(matches!(linked, Ok(Linked::Linked)));
        let (sa, sb) = (
            sys::statx_at(root.as_fd(), &a, false).unwrap(),
            sys::statx_at(root.as_fd(), &b, false).unwrap(),
        );
        assert_eq!((sa.ino, sa.nlink), (sb.ino, 2));
        // A group whose first name failed: the next name is made on its own.
        let other = Stat { ino: 10, ..stat };
        let failed: Result<Linked<()>, &str> =
            links.link_or_create((root.as_fd(), c"x"), at("x"), &other, false, || Err("no"));
        assert!(failed.is_err());
        let c = CString::new("c").unwrap();
        let next = links.link_or_create((root.as_fd(), &c), at("c"), &other, false, create("c"));
        assert!(matches!(next, Ok(Linked::Created(()))));
    }
}
