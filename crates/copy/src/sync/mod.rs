//! `ringio sync`: keeps a destination tree a mirror of one or more sources, with rsync's local
//! semantics.
//!
//! Both trees are walked together, directory by directory, relative to directory descriptors
//! (every destination directory below DEST is opened with O_NOFOLLOW), on a small pool of
//! threads. Each directory's source listing is read in full, filtered, sorted as rsync sorts
//! it, and merged with what the destination holds: no global file list, so memory grows with
//! depth and the widest directory, never with the tree. For each entry the pure rules of
//! `policy::sync` decide; `apply` carries the decision out (a changed file goes to a
//! temporary in its directory and is renamed over the old one). Deletions in a directory happen
//! only after its source listing was read without error.
//!
//! [`SyncPlan`] holds everything the caller decides, built once and judged as rsync judges
//! its options by [`SyncPlan::builder`]; [`sync`] runs it and returns the
//! [`Outcome`] (rsync's exit code and the `--stats` figures).

pub mod alt;
mod apply;
mod attrs;
pub mod chmod;
mod dirfd;
mod fake;
pub mod filter;
mod held;
pub mod item;
mod listing;
mod operand;
mod order;
mod output;
mod pair;
mod plan;
mod roots;
mod size;
mod stats;
mod walk;
mod wanted;
mod xattrs;

use std::path::PathBuf;

pub use crate::policy::sync::QuickCheck;
pub use operand::sanitize_listed;
pub use output::{log_prefix, Output, Progress};
pub use plan::{
    FilterOption, IdLookup, ManifestRequest, SyncPlan, SyncPlanBuilder, SyncPlanError, MAX_THREADS,
};
pub use size::SizeArg;
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
