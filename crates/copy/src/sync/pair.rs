//! The shared state of a sync run ([`Run`]) and of one directory pair being walked ([`Pair`]),
//! with the entry a listing yields ([`SrcEntry`]): the leaf types the walk, the operands and the
//! appliers share.

use std::ffi::OsStr;
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::filter::Scope;
use super::item::{Action, Item};
use super::output::Progress;
use super::{Output, Stats, SyncPlan};
use crate::beneath::{self, Walk};
use crate::error::{CopyError, Op};
use crate::policy::sync::Rules;
use crate::sys::{self, Kind, Stat};

/// What went wrong, for the exit code.
#[derive(Debug, Default)]
pub(super) struct Trouble {
    /// Some entry failed (23).
    pub failed: AtomicBool,
    /// Some source entry vanished while the run looked at it (24).
    pub vanished: AtomicBool,
    /// `--max-delete` stopped deletions (25).
    pub delete_limit: AtomicBool,
    /// The operands cannot be synced as written (1, rsync's syntax or usage error): nothing
    /// is done.
    pub usage: AtomicBool,
    /// A root could not be used (3).
    pub root: AtomicBool,
    /// The destination's filesystem is full (11, rsync's "error in file IO").
    pub file_io: AtomicBool,
    /// A source directory or entry could not be read: from then on nothing is deleted, as
    /// rsync's "IO error encountered -- skipping file deletion".
    pub source_io: AtomicBool,
    /// That was said.
    pub deletion_stopped: AtomicBool,
    /// The first directory, in rsync's order, where reading the source failed during the
    /// transfer (`--delete-delay` deletes only in the directories before it).
    pub first_failure: Mutex<Option<Vec<u8>>>,
}

/// One run's shared state.
pub(super) struct Run<'p> {
    pub plan: &'p SyncPlan,
    pub out: &'p Output,
    pub rules: Rules,
    pub window_ns: u64,
    pub stats: Stats,
    pub trouble: Trouble,
    pub stop: &'p AtomicBool,
    pub umask: u32,
    pub is_root: bool,
    /// Deletions made (or, under -n, that would be).
    pub deletions: AtomicU64,
    /// Deletions left undone by `--max-delete`.
    pub deletions_skipped: AtomicU64,
    /// Hard-link groups: source (dev, ino) → first destination name.
    pub links: crate::links::LinkTracker,
    /// `--delay-updates`: the files waiting in a `.~tmp~` for the end of the transfer.
    pub delayed: Mutex<Vec<Delayed>>,
    /// `-T`: the temporaries' directory, open, and its device.
    pub temp_dir: Option<(OwnedFd, u64)>,
    /// DEST's (dev, ino), once it exists: a source walk that meets it leaves it out (DEST
    /// inside a source is not copied into itself).
    pub dest_id: std::sync::OnceLock<(u64, u64)>,
    /// DEST's root, opened by the first pass and shared by every later one and by what
    /// outlives a pass (-H's first names, --delay-updates' files): one descriptor for the
    /// run, as the descriptor budget counts it.
    pub dest_anchor: std::sync::OnceLock<Arc<OwnedFd>>,
    /// The `--*-dest` trees' roots, open.
    pub alt_roots: Vec<OwnedFd>,
    /// Who owns what this run creates: (euid, egid).
    pub creator: (u32, u32),
    /// The destination refused O_TMPFILE once: new files take named temporaries.
    pub no_tmpfile: AtomicBool,
    /// `--hash`: the hash of every regular file DEST holds once the run is over.
    pub recorder: Option<crate::manifest::Recorder>,
    /// The directory descriptors the walk may keep open (see `held`).
    pub budget: super::dirfd::Budget,
    /// Destination descriptors lent to waiting deletions ([`Handoff`]), at most [`LENT_MAX`].
    pub lent: std::sync::atomic::AtomicUsize,
}

/// A file written into its directory's `.~tmp~`, to be renamed into place at the end.
#[derive(Debug)]
pub(super) struct Delayed {
    /// The destination root, and the directory's path below it.
    pub anchor: Arc<OwnedFd>,
    pub dir: Vec<u8>,
    pub name: CString,
    /// The directory's times, put back once its files are placed (`None`: not kept).
    pub times: Option<Times>,
}

pub(super) use crate::attrs::Times;

/// Where `--delay-updates` keeps a directory's new files until the end, as rsync names it.
pub(super) const STAGE: &std::ffi::CStr = c".~tmp~";

/// One source directory feeding a pair. Several feed one pair where operands merge (`a/ b/
/// DEST`, `-R` paths that share directories): as in rsync's one file list, the first source
/// to name an entry gives it, and directories of the same name merge.
pub(super) struct Layer {
    pub fd: super::dirfd::DirFd,
    /// The filesystem it is on (`-x` stays on it).
    pub dev: u64,
    /// How the user names it, for messages.
    pub path: PathBuf,
    /// Only these names of it are in the transfer (a root's operands), each with the name it
    /// gets at the destination (`None`: all of it).
    pub only: Option<Vec<(CString, CString)>>,
    /// `-R`: this directory is on the way to an operand: the path's components still to
    /// follow below its `only` name (empty: that name is the operand itself).
    pub implied: Option<Arc<[CString]>>,
    /// `-R`: the operand at the end of `implied` is followed if it is a symlink (written with
    /// a trailing slash), and entered even without -r.
    pub operand_follows: bool,
    /// The sender's rules here (with the per-directory merge files read from this source).
    pub scope: Scope,
    /// This directory's (dev, ino) and its ancestors' in this source: under `-L` a symlink
    /// that leads to one of them is a cycle, not a directory to walk.
    pub ancestry: Arc<Ancestry>,
}

/// A directory's identity and its parent's, up to the source's root.
#[derive(Debug)]
pub(super) struct Ancestry {
    pub id: (u64, u64),
    pub up: Option<Arc<Ancestry>>,
}

impl Ancestry {
    /// Whether `id` is this directory or one above it.
    pub fn holds(&self, id: (u64, u64)) -> bool {
        let mut at = Some(self);
        while let Some(a) = at {
            if a.id == id {
                return true;
            }
            at = a.up.as_deref();
        }
        false
    }
}

impl Layer {
    /// `-R`: its `only` name is a directory on the way to an operand, followed if it is a
    /// symlink (rsync sends those as directories, with its `copy_links` set while it does).
    pub fn on_the_way(&self) -> bool {
        self.implied.as_ref().is_some_and(|rest| !rest.is_empty())
    }

    /// `-R`: its `only` name is an operand written `DIR/`: a symlink to a directory is
    /// followed ([`stat_dirlink`]), and the directory entered even without -r.
    pub fn operand_dirlink(&self) -> bool {
        self.operand_follows && self.implied.as_ref().is_some_and(|rest| rest.is_empty())
    }

    /// `-R`: its `only` name is a directory the transfer goes into, through a symlink.
    pub fn enters_only(&self) -> bool {
        self.on_the_way() || self.operand_dirlink()
    }
}

/// rsync's `link_stat` with `follow_dirlinks`: the entry `name` in `dir`, or, when it is a
/// symlink to a directory, that directory.
pub(super) fn stat_dirlink(dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> std::io::Result<Stat> {
    let st = crate::sys::statx_at(dir, name, false)?;
    if st.kind() == Kind::Symlink {
        if let Ok(target) = crate::sys::statx_at(dir, name, true) {
            if target.kind() == Kind::Dir {
                return Ok(target);
            }
        }
    }
    Ok(st)
}

/// How many destination descriptors waiting deletions may hold at once (and only while the
/// run's descriptor budget has room): a quarter of the descriptor table grown before the
/// workers start ([`ringio_base::limits::DESCRIPTOR_TABLE`]), so that the table does not grow
/// for them (growing a threaded process's table waits for an RCU grace period, about 12 ms
/// here, and stalls every worker). A deletion without one opens its directory again: on
/// src-tree's 10%-added-and-deleted re-sync, lending 16 left 1,390 directories to open again
/// and check (openat2, statx, close each).
pub(super) const LENT_MAX: usize = 1024;

/// Between a pair whose deletions wait for their turn and those deletions. A pair dropped
/// first sets its attributes but its times, and leaves the deletions its destination
/// descriptor (while fewer than [`LENT_MAX`] are lent; else they open the directory again)
/// and its times, which they set once they have deleted, so the directory is neither opened
/// twice nor given its times twice. Deletions that come first take the pair as it is, and the
/// pair sets all its attributes when it is dropped, as any pair.
#[derive(Default)]
pub(super) struct Handoff<'r>(Mutex<Handed<'r>>);

/// Where a [`Handoff`] is.
#[derive(Default)]
pub(super) enum Handed<'r> {
    /// Neither has come yet.
    #[default]
    Waiting,
    /// The pair was dropped first: its descriptor, if it could lend one.
    Lent(Option<LentFd<'r>>),
    /// The deletions came first.
    Taken,
}

/// A destination descriptor lent to waiting deletions, counted in `Run::lent` and in the
/// descriptor budget's open ones while it lives.
pub(super) struct LentFd<'r> {
    pub fd: OwnedFd,
    count: &'r std::sync::atomic::AtomicUsize,
    open: &'r std::sync::atomic::AtomicUsize,
}

impl Drop for LentFd<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<'r> Handoff<'r> {
    /// Whether the deletions have not come yet (the pair, being dropped, leaves them its times).
    pub fn waiting(&self) -> bool {
        matches!(*self.0.lock().expect("handoff"), Handed::Waiting)
    }

    /// The pair is dropped: unless the deletions came meanwhile (false: the pair sets its
    /// times itself), they get its descriptor (`take`, while fewer than [`LENT_MAX`] are lent)
    /// and its times.
    pub fn lend(&self, run: &'r Run<'r>, take: impl FnOnce() -> Option<OwnedFd>) -> bool {
        let mut state = self.0.lock().expect("handoff");
        if !matches!(*state, Handed::Waiting) {
            return false;
        }
        let count = &run.lent;
        let room = count.fetch_add(1, Ordering::Relaxed) < LENT_MAX && !run.budget.over();
        let fd = room.then(take).flatten().map(|fd| {
            run.budget.open.fetch_add(1, Ordering::Relaxed);
            LentFd {
                fd,
                count,
                open: &run.budget.open,
            }
        });
        if fd.is_none() {
            count.fetch_sub(1, Ordering::Relaxed);
        }
        *state = Handed::Lent(fd);
        true
    }

    /// The deletions' turn: what the pair left them (`Lent`), or `Waiting` if it was not
    /// dropped yet (from now on it sets its attributes itself).
    pub fn take(&self) -> Handed<'r> {
        std::mem::replace(&mut *self.0.lock().expect("handoff"), Handed::Taken)
    }
}

/// A pair of directories being walked.
pub(super) struct Pair<'r> {
    pub run: &'r Run<'r>,
    /// The pair above (kept alive until this one is done).
    pub _parent: Option<Arc<Pair<'r>>>,
    /// Its deletions, when they wait for their turn: what it leaves them if it is dropped
    /// first ([`Handoff`]).
    pub handoff: std::sync::OnceLock<Arc<Handoff<'r>>>,
    /// The source directories (at least one).
    pub layers: Vec<Layer>,
    /// The destination directory; `None` under -n when it does not exist yet.
    pub dst: Option<super::dirfd::DirFd>,
    /// Who holds its descriptors open (see `held`).
    pub holders: super::dirfd::Holders,
    /// The path from the transfer root ("" for the root), as printed and as filters see it.
    pub rel: Vec<u8>,
    /// The destination root and this directory's path below it (hard links are made there).
    pub anchor: Option<Arc<OwnedFd>>,
    pub dst_rel: Vec<u8>,
    /// How the user names the destination directory, for messages.
    pub dst_path: PathBuf,
    /// The source directory's stat (its first source's).
    pub src_stat: Stat,
    /// The destination directory as it was before the run touched it (`None`: made now).
    pub dst_before: Option<Stat>,
    /// The destination directory's stat as the walk opened it (`None`: not opened, or its
    /// stat failed): its identity, and whether it is setgid (what is created in it takes
    /// its group).
    pub dst_stat: Option<Stat>,
    /// The run made, replaced, linked or removed an entry in the destination directory
    /// ([`Pair::changing`]), which moves its mtime: when its walk ends its attributes are
    /// compared with a new stat of it, not with `dst_stat` (a re-sync that changes nothing
    /// makes no third stat of each directory, where every change marks its pair:
    /// [`Run::marks_every_change`]).
    pub changed: std::sync::atomic::AtomicBool,
    /// Under -p: the destination directory has a default ACL, which a new file's mode takes
    /// its bits from instead of the umask (so the mode is set after, as rsync sets it). Asked
    /// the first time a file is made in it ([`Pair::dst_default_acl`]): a re-sync that makes
    /// nothing never asks.
    pub dst_default_acl: std::sync::OnceLock<bool>,
    /// Part of the transfer: some source lists it whole, so its attributes are kept and its
    /// extraneous entries deleted (not so for the directory that holds a source named
    /// without a trailing slash, or one on the way to a -R operand).
    pub whole: bool,
    /// Its attributes are set when its walk ends: it is part of the transfer, or a directory
    /// on the way to a -R operand (the `.` of `-R ./PATH` too).
    pub keeps_attrs: bool,
    /// The receiver's rules here (what deletion spares): the same rules, with the
    /// per-directory merge files read from the destination, as rsync's receiver reads them
    /// (`None`: no destination directory, or its rules could not be read: nothing is deleted).
    pub dst_scope: Option<Scope>,
    /// Which pass this is.
    pub pass: Pass,
    /// The directory's own line (`cd+++++++++ sub/`), printed at the head of its block, after
    /// its deletions, as rsync prints it.
    pub item: Option<Item>,
    /// The destination directory is one this run made: it holds nothing the run did not put
    /// there (each name once), so neither a stale temporary nor an entry to stat.
    pub made_now: bool,
    /// Where its lines wait for their turn (when lines are printed in rsync's order).
    pub block: Option<Arc<super::order::Block<'r>>>,
}

impl<'r> Pair<'r> {
    /// The source directory an entry was listed in.
    pub fn src(&self, e: &SrcEntry) -> BorrowedFd<'_> {
        self.layers[e.layer].fd.as_fd()
    }

    /// An entry's source path, as the user names it.
    pub fn src_of(&self, e: &SrcEntry) -> PathBuf {
        self.layers[e.layer]
            .path
            .join(OsStr::from_bytes(e.name.to_bytes()))
    }

    /// The first source directory.
    pub fn head(&self) -> &Layer {
        &self.layers[0]
    }

    /// This pair without a descriptor (nor its sources, parent, lines or block), for
    /// deletions that wait for their turn: how many directories wait is not bounded, so what
    /// waits holds no descriptor, and the destination directory is opened again at the turn
    /// ([`Pair::reopen`]). Dropping it sets no attribute.
    pub fn detached(&self) -> Pair<'r> {
        Pair {
            run: self.run,
            _parent: None,
            handoff: Default::default(),
            layers: Vec::new(),
            dst: None,
            holders: Default::default(),
            rel: self.rel.clone(),
            anchor: self.anchor.clone(),
            dst_rel: self.dst_rel.clone(),
            dst_path: self.dst_path.clone(),
            src_stat: self.src_stat,
            dst_before: self.dst_before,
            dst_stat: self.dst_stat,
            changed: Default::default(),
            dst_default_acl: self.dst_default_acl.clone(),
            whole: self.whole,
            keeps_attrs: false,
            dst_scope: self.dst_scope.clone(),
            pass: self.pass,
            item: None,
            made_now: self.made_now,
            block: None,
        }
    }

    /// Says that the run changes what the destination directory holds (an entry made,
    /// replaced, linked or removed in it), before it does.
    pub fn changing(&self) {
        self.changed.store(true, Ordering::Relaxed);
    }

    /// Under -p, whether the destination directory has a default ACL (asked once).
    pub fn dst_default_acl(&self) -> bool {
        *self.dst_default_acl.get_or_init(|| {
            if !self.run.plan.perms {
                return false;
            }
            match &self._parent {
                // Made by this run in its parent: it took the parent's default ACL, if any,
                // as its own (its own ACLs, under -A, come when its walk is done).
                Some(parent) if self.made_now => parent.dst_default_acl(),
                _ => self
                    .dst
                    .as_ref()
                    .is_some_and(|fd| crate::xattr::has_default_acl(fd.as_fd())),
            }
        })
    }

    /// The destination directory of a [`Pair::detached`] opened again from DEST's root:
    /// without following a symlink, or, where the walk reached it through one (-K, -R), as
    /// the walk reached it; and only if it is still the directory `was` (dev, inode) that was
    /// read; else an error that says why.
    pub fn reopen(&self, was: (u64, u64)) -> Result<OwnedFd, CopyError> {
        let path = std::path::Path::new(OsStr::from_bytes(&self.dst_rel));
        let fail = |e| CopyError::io(Op::OpenDir, self.dst_path.clone(), e);
        let anchor = self
            .anchor
            .as_ref()
            .ok_or_else(|| fail(std::io::Error::from_raw_os_error(libc::ENOENT)))?;
        // Only where the walk itself went through a symlink under DEST (a directory link kept
        // under -K, -R's implied directories) is one followed again; the identity decides.
        let plan = self.run.plan;
        let followed = plan.keep_dirlinks || plan.relative;
        let dir = beneath::open_dirs(anchor.as_fd(), path, Walk::Existing)
            .or_else(|e| match followed {
                true => beneath::open_dirs(anchor.as_fd(), path, Walk::Follow(false)),
                false => Err(e),
            })
            .map_err(fail)?;
        let now = sys::fstatx(dir.as_fd()).map_err(fail)?;
        if (now.dev, now.ino) != was {
            return Err(CopyError::Refused(format!(
                "not deleting in {}: it was replaced during the run",
                crate::quote::quote_path(&self.dst_path)
            )));
        }
        Ok(dir)
    }

    /// On the way to a -R operand.
    pub fn implied(&self) -> bool {
        self.layers.iter().any(|l| l.implied.is_some())
    }
}

/// What a walk does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pass {
    /// Transfer, and delete during it when `delete` is set.
    Transfer { delete: bool },
    /// Only delete (`--delete-before`, `--delete-after`, `--delete-delay`).
    Delete,
    /// Only read the source (before `--delete-before`, which rsync makes only once the
    /// whole source was read without error): nothing is written, printed or counted.
    Scan,
}

/// One entry of a source listing.
#[derive(Default)]
pub(super) struct SrcEntry {
    /// The source directory (layer) it was listed in.
    pub layer: usize,
    /// Later sources where a directory of the same name merges with it.
    pub more: Vec<usize>,
    pub name: Name,
    /// Its name at the destination (differs only for a single file synced to a new name).
    pub dst_name: Name,
    pub stat: Stat,
    /// The path from the transfer root.
    pub rel: Vec<u8>,
}

/// A name in a buffer that is used again from entry to entry (a `CString` is made to measure,
/// so each new one costs an allocation): read as the `CStr` it holds.
#[derive(Default)]
pub(super) struct Name(Vec<u8>);

impl Name {
    /// Holds `name` from now on.
    pub fn set(&mut self, name: &CStr) {
        self.0.clear();
        self.0.extend_from_slice(name.to_bytes_with_nul());
    }
}

impl std::ops::Deref for Name {
    type Target = CStr;

    fn deref(&self) -> &CStr {
        CStr::from_bytes_until_nul(&self.0).unwrap_or_default()
    }
}

impl Run<'_> {
    /// Whether every change the run makes in a destination directory is made while its own
    /// pair is walked, which marks it first ([`Pair::changing`]), so that a pair nobody
    /// marked still has the attributes it was opened with. Not so with a `--backup-dir` or a
    /// `--temp-dir` of DEST's (written for other directories' entries), `-K` (a directory kept
    /// behind a symlink may be another pair's too, even DEST itself) or
    /// `--remove-source-files` (a source directory inside DEST may be another pair's
    /// destination).
    pub fn marks_every_change(&self) -> bool {
        let plan = self.plan;
        plan.temp_dir.is_none()
            && plan.backup.as_ref().is_none_or(|b| b.dir.is_none())
            && !plan.keep_dirlinks
            && !plan.remove_source_files
    }

    /// Reports a failure and marks the run as partial (23).
    pub fn fail(&self, e: CopyError) {
        if let CopyError::Io { source, .. } = &e {
            if matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) {
                self.trouble.file_io.store(true, Ordering::Relaxed);
            }
        }
        self.out.fail(&e);
        self.trouble.failed.store(true, Ordering::Relaxed);
    }

    /// Reports an error reading the source (opening a directory, listing it, an entry's stat,
    /// a link's target, its attributes): the run is partial (23) and, as after rsync's
    /// "IO error", nothing is deleted from there on in the walk's order (`block`: the
    /// directory's, where it happened). The scan before `--delete-before` only notes it:
    /// the transfer that follows reports it.
    pub fn source_fail(&self, pass: Pass, block: Option<&super::order::Block<'_>>, e: CopyError) {
        self.trouble.source_io.store(true, Ordering::Relaxed);
        if let Some(block) = block {
            block.source_error();
        }
        if pass != Pass::Scan {
            self.fail(e);
        }
    }

    /// rsync's line where deletion stops after a source error, the first time only.
    pub fn deletion_stopped(&self, lines: &mut Vec<u8>) {
        if !self.trouble.deletion_stopped.swap(true, Ordering::Relaxed) && !self.out.quiet {
            lines.extend_from_slice(b"IO error encountered -- skipping file deletion\n");
        }
    }

    /// Reports a source entry that vanished (24).
    pub fn vanished(&self, path: &std::path::Path) {
        self.out.vanished(path);
        self.trouble.vanished.store(true, Ordering::Relaxed);
    }
}

/// rsync's order of a directory's entries: the other entries by name, then the directories,
/// whose names rsync compares as `name/` (so `14.0.6/` comes before `14/`). Each side is
/// (is a directory, name). Compared in place: no key is built.
pub(super) fn rsync_order(
    (a_dir, a): (bool, &[u8]),
    (b_dir, b): (bool, &[u8]),
) -> std::cmp::Ordering {
    fn named(dir: bool, name: &[u8]) -> impl Iterator<Item = u8> + '_ {
        let slash: &[u8] = if dir { b"/" } else { b"" };
        name.iter().chain(slash).copied()
    }
    a_dir
        .cmp(&b_dir)
        .then_with(|| named(a_dir, a).cmp(named(b_dir, b)))
}

/// `a/b`, or `b` when `a` is empty.
pub(super) fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    if dir.is_empty() {
        return name.to_vec();
    }
    let mut path = Vec::with_capacity(dir.len() + 1 + name.len());
    path.extend_from_slice(dir);
    path.push(b'/');
    path.extend_from_slice(name);
    path
}

/// Adds `item`'s line to the directory's block and the log.
pub(super) fn report(run: &Run<'_>, item: &Item, src: &Stat, lines: &mut Vec<u8>) {
    run.out.render(item, Some(src), lines);
    // `--progress`: a transferred file's line is followed by its size, rate and time.
    let transferred = item.action == Action::Transfer && item.kind == Kind::File;
    if run.out.progress == Progress::PerFile && transferred && !run.plan.dry_run {
        let took = item.took.unwrap_or_default();
        let stats = &run.stats;
        let listed = stats.listed.load(Ordering::Relaxed);
        let checked = stats.checked.load(Ordering::Relaxed) + 1;
        // The transfer's number is given when the line is printed, in the order printed.
        let rest = format!("ir-chk={}/{listed})", listed.saturating_sub(checked));
        let rate = item.len as f64 / took.as_secs_f64().max(1e-9);
        let line = super::output::progress_line(item.len, 100, rate, took.as_secs(), "");
        run.out.numbered_line(&line, &rest, lines);
    }
    if !run.plan.dry_run {
        run.out.log_line(item, Some(src), lines);
    }
}
