//! `ringio sync`: keeps a destination tree a mirror of one or more sources, with rsync's local
//! semantics.
//!
//! Both trees are walked together, directory by directory, relative to directory descriptors
//! (every destination directory below DEST is opened with O_NOFOLLOW), on a small pool of
//! threads. Each directory's source listing is read in full, filtered, sorted as rsync sorts
//! it, and merged with what the destination holds: no global file list, so memory grows with
//! depth and the widest directory, never with the tree. For each entry the pure rules of
//! [`crate::policy::sync`] decide; [`apply`] carries the decision out (a changed file goes to a
//! temporary in its directory and is renamed over the old one). Deletions in a directory happen
//! only after its source listing was read without error.
//!
//! [`SyncPlan`] holds everything the caller decides; [`sync`] runs it and returns the
//! [`Outcome`] (rsync's exit code and the `--stats` figures).

pub mod alt;
mod apply;
pub mod chmod;
mod fake;
pub mod item;
mod operand;
mod order;
mod output;
mod pair;
mod roots;
mod stats;
mod walk;
mod wanted;
mod xattrs;

use std::path::PathBuf;
use std::sync::Arc;

use crate::filter::FilterRules;
pub use crate::policy::sync::QuickCheck;
pub use operand::sanitize_listed;
pub use output::{log_prefix, Output, Progress};
pub use stats::Stats;

/// When extraneous destination entries are deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteWhen {
    /// `--delete-before`: a deletion pass over the whole tree first.
    Before,
    /// `--delete`, `--delete-during`: in each directory, before its entries are transferred.
    During,
    /// `--delete-after`: a deletion pass after the transfer (none after a source error).
    After,
    /// `--delete-delay`: a deletion pass after the transfer, in the directories before the
    /// first source error.
    Delay,
}

/// What to do with symlinks found in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symlinks {
    /// Skipped, with a note (no `-l`).
    Skip,
    /// Recreated as symlinks (`-l`).
    Keep,
    /// Followed: what they point to is copied (`-L`).
    Follow,
}

/// One source operand. Its spelling says what it brings, as rsync reads it: `SRC/`, `.`,
/// `..`, `SRC/.` and `SRC/..` bring a directory's contents into DEST; `SRC` brings the entry
/// `SRC`; under -R, the path below a `/./` is kept below DEST (a `..` in it is refused).
#[derive(Debug, Clone)]
pub struct Source {
    /// The path as given.
    pub path: PathBuf,
}

/// `--backup` and where backups go.
#[derive(Debug, Clone)]
pub struct Backups {
    /// `--backup-dir`: backups go to this tree (relative paths kept), not beside the file.
    pub dir: Option<PathBuf>,
    /// `--suffix` (default `~` without a backup directory, empty with one).
    pub suffix: String,
}

/// Everything a sync run is asked to do.
#[derive(Debug, Clone)]
pub struct SyncPlan {
    /// The source operands.
    pub sources: Vec<Source>,
    /// DEST.
    pub dest: PathBuf,
    /// DEST was written with a trailing `/`: always a directory.
    pub dest_is_dir: bool,
    /// `--mkpath`: DEST's missing parents are made.
    pub mkpath: bool,
    /// `-r`.
    pub recursive: bool,
    /// `-d`: directories are made without their contents.
    pub dirs: bool,
    /// `-l`, `-L`.
    pub symlinks: Symlinks,
    /// `--copy-unsafe-links`: links that lead out of the tree are followed.
    pub copy_unsafe_links: bool,
    /// `--safe-links`: links that lead out of the tree are skipped.
    pub safe_links: bool,
    /// `-K`.
    pub keep_dirlinks: bool,
    /// `-H`.
    pub hard_links: bool,
    /// `-p`.
    pub perms: bool,
    /// `-E`.
    pub executability: bool,
    /// `-o`.
    pub owner: bool,
    /// `-g`.
    pub group: bool,
    /// `--chown`: the owner and group every entry gets.
    pub chown: (Option<u32>, Option<u32>),
    /// `--devices`.
    pub devices: bool,
    /// `--specials`.
    pub specials: bool,
    /// `-t`.
    pub times: bool,
    /// `-O`.
    pub omit_dir_times: bool,
    /// `-U`.
    pub atimes: bool,
    /// `-A`.
    pub acls: bool,
    /// `-X`.
    pub xattrs: bool,
    /// `-S`: holes in the source stay holes.
    pub sparse: bool,
    /// `-x`.
    pub one_file_system: bool,
    /// `-xx`: a mount point is left out altogether (not made, empty).
    pub skip_mount_points: bool,
    /// `--inplace`.
    pub inplace: bool,
    /// `--fsync`: each written file is fsynced before it is put in place.
    pub fsync: bool,
    /// `--open-noatime`: source files are opened with O_NOATIME where permitted.
    pub open_noatime: bool,
    /// The quick check (`-c`, `--size-only`, `-I`, `--modify-window`).
    pub quick: QuickCheck,
    /// `-u`.
    pub update: bool,
    /// `--existing`.
    pub existing: bool,
    /// `--ignore-existing`.
    pub ignore_existing: bool,
    /// `--max-size`.
    pub max_size: Option<u64>,
    /// `--min-size`.
    pub min_size: Option<u64>,
    /// `--delete*`.
    pub delete: Option<DeleteWhen>,
    /// `--max-delete`.
    pub max_delete: Option<u64>,
    /// `--force`: a non-empty directory in the way of a non-directory is deleted.
    pub force: bool,
    /// `--ignore-errors`: delete even after an error reading the source.
    pub ignore_errors: bool,
    /// `--remove-source-files`.
    pub remove_source_files: bool,
    /// The filter rules, compiled.
    pub filters: Arc<FilterRules>,
    /// `-m`.
    pub prune_empty_dirs: bool,
    /// `-R`: each source's path (below a `/./` in it) is kept below DEST.
    pub relative: bool,
    /// `--no-implied-dirs`: under -R, the leading directories are made as needed, without
    /// their source's attributes or lines.
    pub no_implied_dirs: bool,
    /// `-b`.
    pub backup: Option<Backups>,
    /// `--chmod`: applied to the source's mode as it is read, as rsync's sender does.
    pub chmod: Vec<chmod::ChmodRule>,
    /// `--super`: owners, groups and devices are tried even without root.
    pub super_user: bool,
    /// `--fake-super`: owners, groups, devices and special modes kept in `user.rsync.%stat`.
    pub fake_super: bool,
    /// `--delay-updates`: changed files wait in `.~tmp~` until the end of the transfer.
    pub delay_updates: bool,
    /// `--compare-dest`, `--copy-dest`, `--link-dest`: the trees, in order (relative: to DEST).
    pub alt_dests: Vec<PathBuf>,
    /// What they are for (one kind per run, as rsync).
    pub alt_kind: alt::AltKind,
    /// `-T`: temporaries are written in this directory (relative: to DEST), where it is on
    /// the destination's filesystem (elsewhere a rename cannot bring them over: they are
    /// written beside their files, as without it).
    pub temp_dir: Option<PathBuf>,
    /// `-n`.
    pub dry_run: bool,
    /// Worker threads (1 when lines are printed, so they come in rsync's order).
    pub threads: usize,
    /// `--hash`: every file's bytes hashed on their way (files left as they are: read back
    /// from DEST), for a manifest of DEST. `base` is DEST.
    pub hashing: Option<crate::plan::Hashing>,
}

impl SyncPlan {
    /// A plan with rsync's defaults (nothing kept but the data, no recursion) for `sources`
    /// into `dest`.
    pub fn new(sources: Vec<Source>, dest: PathBuf) -> Self {
        SyncPlan {
            sources,
            dest,
            dest_is_dir: false,
            mkpath: false,
            recursive: false,
            dirs: false,
            symlinks: Symlinks::Skip,
            copy_unsafe_links: false,
            safe_links: false,
            keep_dirlinks: false,
            hard_links: false,
            perms: false,
            executability: false,
            owner: false,
            group: false,
            chown: (None, None),
            devices: false,
            specials: false,
            times: false,
            omit_dir_times: false,
            atimes: false,
            acls: false,
            xattrs: false,
            sparse: false,
            one_file_system: false,
            skip_mount_points: false,
            fsync: false,
            open_noatime: false,
            inplace: false,
            quick: QuickCheck::SizeAndTime { window_ns: 0 },
            update: false,
            existing: false,
            ignore_existing: false,
            max_size: None,
            min_size: None,
            delete: None,
            max_delete: None,
            force: false,
            ignore_errors: false,
            remove_source_files: false,
            filters: Arc::new(FilterRules::new()),
            prune_empty_dirs: false,
            relative: false,
            no_implied_dirs: false,
            backup: None,
            chmod: Vec::new(),
            super_user: false,
            fake_super: false,
            delay_updates: false,
            temp_dir: None,
            alt_dests: Vec::new(),
            alt_kind: alt::AltKind::Link,
            dry_run: false,
            threads: 1,
            hashing: None,
        }
    }
}

/// How a run ended.
#[derive(Debug)]
pub struct Outcome {
    /// rsync's exit code: 0, 23 (some entries failed), 24 (some vanished), 25 (`--max-delete`
    /// stopped deletions), 3 (DEST or a source root could not be used), 11 (the destination is
    /// full), 20 (interrupted).
    pub code: i32,
    /// The counters `--stats` prints.
    pub stats: Stats,
    /// `--hash`: every regular file DEST holds, with its hash (none if interrupted).
    pub hashes: Option<crate::manifest::Listing>,
}

/// Runs `plan`, printing through `out`; `stop` set (by a signal) ends it at the next entry.
pub fn sync(plan: &SyncPlan, out: &Output, stop: &std::sync::atomic::AtomicBool) -> Outcome {
    walk::run(plan, out, stop)
}
