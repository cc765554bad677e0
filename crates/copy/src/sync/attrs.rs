//! An entry's attributes as sync gives them. What to give is each caller's to say: a kept
//! entry's differences ([`fix_attrs`]), a new file's ([`file_attrs`]), a new symlink's or
//! special file's ([`special_attrs`]), a directory's once its walk ends ([`dir_attrs`]); each
//! says it in rsync's terms ([`Given`]), and the setter cp uses too (`crate::attrs`) sets it,
//! in one order, through a descriptor or by name. Also the mode a new file is created with
//! ([`creation`]).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use super::pair::{Pair, Run, SrcEntry, Times};
use super::wanted::wanted;
use crate::attrs::{Extended, On, Owner, Perm, Setting};
use crate::error::{CopyError, Op};
use crate::policy::sync::{self as rules, Changes};
use crate::sys::{self, Kind, Stat};
use crate::xattr::Subject;

/// A time left as it is (`UTIME_OMIT`).
const OMIT: (i64, u32) = (0, libc::UTIME_OMIT as u32);

/// What sync gives one entry, in rsync's terms; `None` leaves one as it is. Set by
/// [`Setting::apply`], in its order.
struct Given<'a> {
    /// Owner and group as chown takes them (`u32::MAX`: that one left).
    owner: Option<(u32, u32)>,
    /// The permission bits (under `--fake-super` the entry's real ones).
    perm: Option<u32>,
    /// Its mode now, where known: not set again when that is `perm`, unless an ACL moved it.
    have: Option<u32>,
    /// The source whose extended attributes and ACLs it takes (-X, -A).
    xattrs_of: Option<Subject<'a>>,
    /// `--fake-super`: what `user.rsync.%stat` records.
    record: Option<Stat>,
    /// Access and modification times.
    times: Option<Times>,
}

impl Given<'_> {
    /// Sets it on `on`. A user who is not root keeps the owner and group chown refuses, as
    /// rsync does (the mode then goes without setuid and setgid); a chown that fails otherwise
    /// stops the rest, as it stops rsync's. The first failure is returned, each later one
    /// reported. `path` names the entry in messages.
    fn apply(self, run: &Run<'_>, on: On<'_>, path: &dyn Fn() -> PathBuf) -> Result<(), CopyError> {
        let mut extras = Extras {
            run,
            xattrs_of: self.xattrs_of,
            record: self.record,
            path,
        };
        let any = extras.xattrs_of.is_some() || extras.record.is_some();
        Setting {
            owner: self.owner.map(|ids| Owner {
                ids,
                whole: true,
                refusal_keeps: !run.is_root,
            }),
            extended: any.then_some(&mut extras as &mut dyn Extended),
            perm: self.perm.map(|bits| Perm {
                bits,
                unless_owned: 0o6000,
                have: self.have,
            }),
            times: self.times,
        }
        .apply(on, path, &mut |e| run.fail(e))
    }
}

/// sync's steps around the mode: rsync's extended attributes and ACLs before it, the
/// `--fake-super` record of what the real stat then lacks after it.
struct Extras<'a, 'p> {
    run: &'a Run<'a>,
    xattrs_of: Option<Subject<'a>>,
    record: Option<Stat>,
    path: &'p dyn Fn() -> PathBuf,
}

impl Extended for Extras<'_, '_> {
    fn before_mode(&mut self, on: On<'_>) -> Result<bool, CopyError> {
        let Some(src) = self.xattrs_of else {
            return Ok(false);
        };
        super::xattrs::bring(self.run, src, on.subject())
            .map_err(|e| CopyError::io(Op::SetXattr, (self.path)(), e))
    }

    fn after_mode(&mut self, on: On<'_>) -> Result<(), CopyError> {
        let Some(record) = &self.record else {
            return Ok(());
        };
        let real = on
            .stat()
            .map_err(|e| CopyError::io(Op::Stat, (self.path)(), e))?;
        super::fake::write(on.subject(), record, &real)
            .map_err(|e| CopyError::io(Op::SetXattr, (self.path)(), e))
    }
}

/// The owner and group chown is given for `want` (`u32::MAX` for one the options do not
/// keep); `None`: nothing to give (neither kept, or `--fake-super`, which records them).
fn owner_of(run: &Run<'_>, want: &Stat) -> Option<(u32, u32)> {
    let uid = if run.rules.owner { want.uid } else { u32::MAX };
    let gid = if run.rules.group { want.gid } else { u32::MAX };
    let none = run.plan.fake_super || (uid == u32::MAX && gid == u32::MAX);
    (!none).then_some((uid, gid))
}

/// The permission bits to set for `want`: under `--fake-super` the real ones it records.
fn perm_of(run: &Run<'_>, want: &Stat) -> u32 {
    if run.plan.fake_super {
        super::fake::real_perm(want)
    } else {
        want.perm()
    }
}

/// An entry's atime as the run gives it: the source's under `--atimes`, else left.
fn atime_of(run: &Run<'_>, src: &Stat) -> (i64, u32) {
    if run.plan.atimes {
        src.atime
    } else {
        OMIT
    }
}

impl Pair<'_> {
    /// The times (atime, mtime) the run gives this directory (when its attributes are kept),
    /// to put back after it changed below it (deletions, `--delay-updates`' renames); `None`:
    /// the run keeps no directory times.
    pub(super) fn kept_times(&self) -> Option<Times> {
        let plan = self.run.plan;
        if !plan.times || plan.omit_dir_times {
            return None;
        }
        let want = wanted(self.run, &self.src_stat, self.dst_before.as_ref());
        Some((atime_of(self.run, &self.src_stat), want.mtime))
    }
}

/// Sets the attributes that differ (`changes`) on an existing entry, by name.
pub(super) fn fix_attrs(
    run: &Run<'_>,
    pair: &Pair<'_>,
    e: &SrcEntry,
    changes: &Changes,
) -> Result<(), CopyError> {
    let Some(dir) = &pair.dst else { return Ok(()) };
    let (dir, name) = (dir.as_fd(), &*e.dst_name);
    let real = sys::statx_at(dir, name, false).ok();
    // Under --fake-super what it has is what its record says (the mode set is its real one).
    let mut seen = real;
    if let Some(d) = seen.as_mut().filter(|_| run.plan.fake_super) {
        super::fake::read(Subject::at(dir, name, false), d);
    }
    let want = wanted(run, &e.stat, seen.as_ref());
    let symlink = e.stat.kind() == Kind::Symlink;
    let owner = changes.owner || changes.group;
    Given {
        owner: owner.then(|| owner_of(run, &want)).flatten(),
        // An ACL set moves the mode's bits (the mask is its group's): set again after it.
        perm: ((changes.perms || changes.acl) && !symlink).then(|| perm_of(run, &want)),
        have: real.map(|s| s.perm()),
        // A symlink synced as one is read as itself; one followed, through it.
        xattrs_of: (changes.acl || changes.xattr)
            .then(|| Subject::at(pair.src(e), &e.name, !symlink)),
        record: (run.plan.fake_super && (owner || changes.perms)).then_some(want),
        times: changes.time.then(|| (atime_of(run, &e.stat), want.mtime)),
    }
    .apply(run, On::At(dir, name), &|| pair.dst_of(name))
}

/// The mode a new file is created with, and whether it is set again afterwards. Without -p
/// a new file takes the source's permission bits through the kernel, which applies the umask
/// or the directory's default ACL, as rsync leaves it; with -p, or over an existing file whose
/// mode is kept, it is made private (its owner's bits) and given its mode once written.
///
/// Under -p a file whose owner and group stay those it is created with, and whose mode has no
/// special bit and nothing the umask takes away (and no default ACL in the directory, which would
/// decide instead), is created with its mode at once: nobody could read it under it then that
/// may not read it after (saves a chmod per file; an ACL brought under -A that moves the mode
/// has it set again).
pub(super) fn creation(
    pair: &Pair<'_>,
    src: &Stat,
    existing: Option<&Stat>,
    want: &Stat,
) -> (u32, bool) {
    let run = pair.run;
    let perm = want.perm();
    // A default ACL, not the umask, decides what the kernel leaves of the mode; an ACL from
    // the source (-A) sets the group bits to its mask, so the mode is set after it.
    let plain = perm & 0o7000 == 0 && perm & run.umask == 0 && !pair.dst_default_acl();
    let own = (want.uid, want.gid) == run.creator;
    if existing.is_none() && run.plan.perms && plain && own && !run.plan.fake_super {
        (perm, false)
    } else if run.plan.perms || existing.is_some() {
        // Its owner's bits only, and rw, as rsync makes its temporaries: what it keeps if
        // its owner cannot be given.
        ((perm & 0o700) | 0o600, true)
    } else {
        (src.perm() & 0o777, false)
    }
}

/// `want`, with its type bits cleared when its mode is not to be set (see [`file_attrs`]).
pub(super) fn keep_mode(want: &Stat, chmod: bool) -> Stat {
    let mut want = *want;
    if !chmod {
        want.mode &= !libc::S_IFMT;
    }
    want
}

/// Owner, mode (unless `want`'s type bits are cleared: the mode it was created with stays),
/// ACLs and extended attributes, and times of a new file, through its descriptor; `made_in`:
/// the pair it was created in (so it is owned by [`Run::creator`], unless the directory is
/// setgid, and has no owner to give when that is the one wanted). An attribute that fails is
/// reported and the file kept; only a failed `--fsync` fails it.
pub(super) fn file_attrs(
    run: &Run<'_>,
    (src, fd): (BorrowedFd<'_>, BorrowedFd<'_>),
    want: &Stat,
    src_stat: &Stat,
    path: &dyn Fn() -> PathBuf,
    made_in: Option<&Pair<'_>>,
) -> Result<(), CopyError> {
    let plan = run.plan;
    let settled = made_in.is_some_and(|pair| {
        let setgid = pair.dst_stat.is_some_and(|d| d.mode & libc::S_ISGID != 0);
        !setgid
            && (!run.rules.owner || want.uid == run.creator.0)
            && (!run.rules.group || want.gid == run.creator.1)
    });
    let record = Stat {
        mode: (src_stat.mode & libc::S_IFMT) | want.perm(),
        uid: want.uid,
        gid: want.gid,
        ..*src_stat
    };
    let set = Given {
        owner: owner_of(run, want).filter(|_| !settled),
        // Made with its mode where it was not to be set (an ACL may still move it: -A).
        perm: (want.mode & libc::S_IFMT != 0 || plan.acls).then(|| perm_of(run, want)),
        have: (want.mode & libc::S_IFMT == 0).then(|| want.perm()),
        xattrs_of: (plan.xattrs || plan.acls).then_some(Subject::Fd(src)),
        record: plan.fake_super.then_some(record),
        times: plan.times.then(|| (atime_of(run, src_stat), want.mtime)),
    }
    .apply(run, On::Fd(fd), path);
    // Its content is complete: a failed attribute is reported (23) and the file still put in
    // place, as rsync puts it (the quick check sees what is missing on the next run).
    if let Err(e) = set {
        run.fail(e);
    }
    if plan.fsync {
        rustix::fs::fsync(fd).map_err(|e| CopyError::io(Op::Write, path(), io::Error::from(e)))?;
    }
    Ok(())
}

/// A new symlink's or special file's owner, mode (special files under -p), extended attributes
/// and times, set on its temporary `tmp` in `dir`; one that fails is reported, and the entry
/// kept.
pub(super) fn special_attrs(
    run: &Run<'_>,
    pair: &Pair<'_>,
    e: &SrcEntry,
    (dir, tmp): (BorrowedFd<'_>, &CStr),
) -> Result<(), CopyError> {
    let plan = run.plan;
    let kind = e.stat.kind();
    let want = wanted(run, &e.stat, None);
    let set = Given {
        owner: owner_of(run, &want),
        // Without -p the kernel gave it the source's bits less the umask; under --fake-super
        // it is an empty file whose real mode keeps its owner's rw (its own, recorded).
        perm: (kind == Kind::Special && plan.perms).then(|| perm_of(run, &e.stat)),
        have: None,
        // Symlinks and special files carry them too (trusted.*, security.*); a special file
        // reached through a followed symlink, its own.
        xattrs_of: (plan.xattrs || plan.acls)
            .then(|| Subject::at(pair.src(e), &e.name, kind != Kind::Symlink)),
        record: None,
        times: plan.times.then(|| (atime_of(run, &e.stat), e.stat.mtime)),
    }
    .apply(run, On::At(dir, tmp), &|| pair.dst_of(&e.dst_name));
    // Made: a failed attribute is reported (23), and the entry still put in place.
    if let Err(e) = set {
        run.fail(e);
    }
    Ok(())
}

/// A directory's attributes, once its walk is done; its times unless `times` is false (its
/// waiting deletions set them once they have deleted: `pair::Handoff`). What it has is its
/// stat as the walk opened it, unless the run changed what it holds since (or may have, where
/// not every change marks its pair: [`Run::marks_every_change`]).
pub(super) fn dir_attrs(
    run: &Run<'_>,
    pair: &Pair<'_>,
    dst: BorrowedFd<'_>,
    times: bool,
) -> Result<(), CopyError> {
    let plan = run.plan;
    let path = || pair.dst_path.clone();
    let want = wanted(run, &pair.src_stat, pair.dst_before.as_ref());
    let unchanged = run.marks_every_change() && !pair.changed.load(Ordering::Relaxed);
    let now = match pair.dst_stat {
        Some(opened) if unchanged => opened,
        _ => sys::fstatx(dst).map_err(|e| CopyError::io(Op::Stat, path(), e))?,
    };
    let differs = |&(uid, gid): &(u32, u32)| {
        (run.rules.owner && now.uid != uid) || (run.rules.group && now.gid != gid)
    };
    let perm = if plan.perms {
        Some(want.perm())
    } else if pair.made_now {
        // Made now: a subdirectory with owner rwx added so it could be filled, DEST itself
        // with every rwx bit (as mkdir(1)); the bits the source lacks are taken back, what the
        // kernel gave it (umask, default ACL, a parent's setgid) stays, as rsync leaves it.
        let made_with = if pair._parent.is_some() { 0o700 } else { 0o777 };
        let added = made_with & !pair.src_stat.perm();
        (added != 0).then_some(now.perm() & !added)
    } else {
        None
    };
    let perm = perm.map(|p| {
        if plan.fake_super {
            perm_of(run, &want)
        } else {
            p
        }
    });
    let set_times = times
        && plan.times
        && !plan.omit_dir_times
        && !rules::same_time(now.mtime, want.mtime, run.window_ns);
    Given {
        owner: owner_of(run, &want).filter(differs),
        perm,
        have: Some(now.perm()),
        xattrs_of: (plan.xattrs || plan.acls).then(|| Subject::Fd(pair.head().fd.as_fd())),
        record: plan.fake_super.then_some(want),
        times: set_times.then(|| (atime_of(run, &pair.src_stat), want.mtime)),
    }
    .apply(run, On::Fd(dst), &path)
}

/// A directory's times put back after deleting in it moved its mtime, where no walk of it
/// will set them (its walk ended before its deletions' turn, or the deletions are a pass of
/// their own): deleting changes nothing else of a directory, so its times are all that is
/// set, and the pair needs no source (a [`Pair::detached`] will do).
pub(super) fn dir_times(pair: &Pair<'_>, dst: BorrowedFd<'_>) -> Result<(), CopyError> {
    let Some(times) = pair.kept_times() else {
        return Ok(());
    };
    On::Fd(dst)
        .times(times)
        .map_err(|e| CopyError::io(Op::SetTimes, pair.dst_path.clone(), e))
}
