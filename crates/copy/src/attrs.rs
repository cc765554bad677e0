//! An entry's attributes, set in one order for cp (`finalize`) and sync (`sync::attrs`): each
//! caller says what the entry is given as a [`Setting`], and [`Setting::apply`] sets it,
//! through a descriptor or by name ([`On`]).
//!
//! The order is GNU cp's and rsync's alike: owner and group first (a chown clears setuid and
//! setgid), then extended attributes and ACLs, then the mode (its group bits become an ACL's
//! mask), then what depends on the final mode (cp takes away the ACLs the source lacks, sync
//! writes its `--fake-super` record), and times last (every other change moves ctime, and
//! nothing after them moves mtime). What the two tools copy as extended attributes and ACLs
//! differs, and is each one's [`Extended`].

use std::ffi::CStr;
use std::io;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;

use crate::error::{CopyError, Op};
use crate::sys::{self, Stat};
use crate::xattr::Subject;

/// An (atime, mtime) pair as `futimens` takes it (`UTIME_OMIT`: left as it is).
pub(crate) type Times = ((i64, u32), (i64, u32));

/// Where attributes are set: through an open descriptor, or on an entry by its name in its
/// directory (a final symlink not followed).
#[derive(Clone, Copy)]
pub(crate) enum On<'a> {
    Fd(BorrowedFd<'a>),
    At(BorrowedFd<'a>, &'a CStr),
}

impl<'a> On<'a> {
    /// The entry, for the extended attribute calls.
    pub(crate) fn subject(self) -> Subject<'a> {
        match self {
            On::Fd(fd) => Subject::Fd(fd),
            On::At(dir, name) => Subject::at(dir, name, false),
        }
    }

    fn chown(self, uid: u32, gid: u32) -> io::Result<()> {
        match self {
            On::Fd(fd) => sys::fchown(fd, uid, gid),
            On::At(dir, name) => sys::lchownat(dir, name, uid, gid),
        }
    }

    fn chmod(self, perm: u32) -> io::Result<()> {
        match self {
            On::Fd(fd) => sys::fchmod(fd, perm),
            On::At(dir, name) => sys::fchmodat(dir, name, perm),
        }
    }

    /// Sets its times.
    pub(crate) fn times(self, (atime, mtime): Times) -> io::Result<()> {
        match self {
            On::Fd(fd) => sys::futimens(fd, atime, mtime),
            On::At(dir, name) => sys::lutimensat(dir, name, atime, mtime),
        }
    }

    /// Its stat as it is now.
    pub(crate) fn stat(self) -> io::Result<Stat> {
        match self {
            On::Fd(fd) => sys::fstatx(fd),
            On::At(dir, name) => sys::statx_at(dir, name, false),
        }
    }
}

/// The owner and group an entry is given.
pub(crate) struct Owner {
    /// As chown takes them (`u32::MAX`: that one left as it is).
    pub ids: (u32, u32),
    /// Given, they make the entry its source's owner's (false where only the group is asked
    /// and the source's owner is someone else: cp as a user who is not root).
    pub whole: bool,
    /// A refusal with EPERM is no error: the entry keeps the ids it has (a user who is not
    /// root, as both tools allow).
    pub refusal_keeps: bool,
}

/// The permission bits an entry is given.
pub(crate) struct Perm {
    pub bits: u32,
    /// Cleared where the entry did not get its source's owner, so that nothing gains them in
    /// someone else's name (cp: setuid, setgid and sticky; sync: setuid and setgid).
    pub unless_owned: u32,
    /// The entry's mode as the caller knows it (what it was made with, or stated): no chmod
    /// when that is the mode to give and no ACL set since moved it.
    pub have: Option<u32>,
}

/// The steps around the mode that cp and sync take each in their own way.
pub(crate) trait Extended {
    /// Extended attributes and ACLs, after the owner and before the mode. Returns whether it
    /// may have moved the mode (an ACL set or removed: its entries are the mode's bits).
    fn before_mode(&mut self, on: On<'_>) -> Result<bool, CopyError>;
    /// What depends on the final mode, before the times.
    fn after_mode(&mut self, on: On<'_>) -> Result<(), CopyError>;
}

/// The attributes one entry is given; `None` leaves one as it is.
pub(crate) struct Setting<'a> {
    pub owner: Option<Owner>,
    pub extended: Option<&'a mut dyn Extended>,
    pub perm: Option<Perm>,
    pub times: Option<Times>,
}

impl Setting<'_> {
    /// Sets it on `on`, in the order the module describes. A chown that fails (other than a
    /// refusal the owner allows) stops the steps after it, as it stops GNU cp's and rsync's: the
    /// entry keeps the private mode it was made with rather than give its group's and others'
    /// bits to a group that is not the source's. Any other step that fails stops none after it.
    /// The first failure is returned, each later one handed to `rest`. `path` names the entry
    /// in messages.
    pub(crate) fn apply(
        self,
        on: On<'_>,
        path: &dyn Fn() -> PathBuf,
        rest: &mut dyn FnMut(CopyError),
    ) -> Result<(), CopyError> {
        let mut first = None;
        let mut failed = |e: CopyError| match first {
            None => first = Some(e),
            Some(_) => rest(e),
        };
        let mut owned = true;
        if let Some(owner) = &self.owner {
            let (uid, gid) = owner.ids;
            owned = match on.chown(uid, gid) {
                Ok(()) => owner.whole,
                Err(e) if owner.refusal_keeps && e.raw_os_error() == Some(libc::EPERM) => false,
                Err(e) => return Err(CopyError::io(Op::SetOwner, path(), e)),
            };
        }
        let mut extended = self.extended;
        let mut moved = false;
        if let Some(ext) = extended.as_deref_mut() {
            match ext.before_mode(on) {
                Ok(m) => moved = m,
                Err(e) => failed(e),
            }
        }
        if let Some(perm) = &self.perm {
            let bits = if owned {
                perm.bits
            } else {
                perm.bits & !perm.unless_owned
            };
            if moved || perm.have != Some(bits) {
                if let Err(e) = on.chmod(bits) {
                    failed(CopyError::io(Op::SetMode, path(), e));
                }
            }
        }
        if let Some(ext) = extended {
            if let Err(e) = ext.after_mode(on) {
                failed(e);
            }
        }
        if let Some(times) = self.times {
            if let Err(e) = on.times(times) {
                failed(CopyError::io(Op::SetTimes, path(), e));
            }
        }
        first.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// Records the mode each `Extended` step finds; fails its first step, or says it moved
    /// the mode, if asked.
    #[derive(Default)]
    struct Probe {
        seen: Vec<u32>,
        fail: bool,
        moves: bool,
    }

    impl Extended for Probe {
        fn before_mode(&mut self, on: On<'_>) -> Result<bool, CopyError> {
            self.seen.push(on.stat().unwrap().perm());
            if self.fail {
                let e = io::Error::from_raw_os_error(libc::EACCES);
                return Err(CopyError::io(Op::SetXattr, PathBuf::from("f"), e));
            }
            Ok(self.moves)
        }

        fn after_mode(&mut self, on: On<'_>) -> Result<(), CopyError> {
            self.seen.push(on.stat().unwrap().perm());
            Ok(())
        }
    }

    fn file(mode: u32) -> (tempfile::TempDir, std::fs::File) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = std::fs::File::create(&path).unwrap();
        f.set_permissions(std::fs::Permissions::from_mode(mode))
            .unwrap();
        (dir, f)
    }

    fn perm(bits: u32, unless_owned: u32, have: Option<u32>) -> Option<Perm> {
        Some(Perm {
            bits,
            unless_owned,
            have,
        })
    }

    fn apply(set: Setting<'_>, on: On<'_>) -> Result<(), CopyError> {
        set.apply(on, &|| PathBuf::from("f"), &mut |e| {
            panic!("a second failure: {e}")
        })
    }

    #[test]
    fn the_mode_comes_between_the_extended_steps_and_times_last() {
        let (_dir, f) = file(0o600);
        let mut probe = Probe::default();
        let times = ((5, 0), (7, 9));
        let set = Setting {
            owner: None,
            extended: Some(&mut probe),
            perm: perm(0o640, 0, None),
            times: Some(times),
        };
        apply(set, On::Fd(f.as_fd())).unwrap();
        assert_eq!(probe.seen, [0o600, 0o640]);
        let st = sys::fstatx(f.as_fd()).unwrap();
        assert_eq!((st.perm(), st.mtime), (0o640, (7, 9)));
    }

    #[test]
    fn a_step_that_fails_stops_none_after_it_and_is_returned() {
        let (_dir, f) = file(0o600);
        let mut probe = Probe {
            fail: true,
            ..Probe::default()
        };
        let set = Setting {
            owner: None,
            extended: Some(&mut probe),
            perm: perm(0o644, 0, None),
            times: Some(((1, 0), (2, 0))),
        };
        assert!(apply(set, On::Fd(f.as_fd())).is_err());
        let st = sys::fstatx(f.as_fd()).unwrap();
        assert_eq!((st.perm(), st.mtime), (0o644, (2, 0)));
        assert_eq!(probe.seen, [0o600, 0o644]);
    }

    #[test]
    fn a_chown_that_fails_stops_every_step_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let dir = std::fs::File::open(dir.path()).unwrap();
        let mut probe = Probe::default();
        let set = Setting {
            owner: Some(Owner {
                ids: (0, 0),
                whole: true,
                refusal_keeps: false,
            }),
            extended: Some(&mut probe),
            perm: perm(0o644, 0, None),
            times: Some(((1, 0), (2, 0))),
        };
        // No such entry: the chown fails, and nothing after it is tried (the probe and the
        // chmod and utimensat, which would each fail and be a second failure).
        assert!(apply(set, On::At(dir.as_fd(), c"missing")).is_err());
        assert!(probe.seen.is_empty());
    }

    #[test]
    fn a_mode_known_to_be_right_is_set_again_only_when_an_acl_moved_it() {
        for (moves, want) in [(false, 0o600), (true, 0o644)] {
            let (_dir, f) = file(0o600);
            // `have` says 0o644: taken at its word unless the extended step moved the mode.
            let mut probe = Probe {
                moves,
                ..Probe::default()
            };
            let set = Setting {
                owner: None,
                extended: Some(&mut probe),
                perm: perm(0o644, 0, Some(0o644)),
                times: None,
            };
            apply(set, On::Fd(f.as_fd())).unwrap();
            assert_eq!(
                sys::fstatx(f.as_fd()).unwrap().perm(),
                want,
                "moved: {moves}"
            );
        }
    }

    #[test]
    fn without_its_owner_an_entry_gets_no_special_bit_named() {
        for (whole, want) in [(true, 0o4755), (false, 0o755)] {
            let (_dir, f) = file(0o600);
            // A chown that changes nothing, and succeeds for anyone.
            let set = Setting {
                owner: Some(Owner {
                    ids: (u32::MAX, u32::MAX),
                    whole,
                    refusal_keeps: false,
                }),
                extended: None,
                perm: perm(0o4755, 0o7000, None),
                times: None,
            };
            apply(set, On::Fd(f.as_fd())).unwrap();
            assert_eq!(
                sys::fstatx(f.as_fd()).unwrap().perm(),
                want,
                "whole: {whole}"
            );
        }
    }
}
