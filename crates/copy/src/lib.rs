//! ringio-copy: the copy engine and the two rule sets over it, `ringio cp` and `ringio sync`.
//!
//! What it holds, in layers (docs/ARCHITECTURE.md draws them):
//!
//! * The shared core: descriptor-relative system calls (`sys`, `beneath`, `temp`), the
//!   destination sandbox and backups, hard-link groups, the movers that carry bytes
//!   (`engine`: io_uring batches of small files, `DataPath` for big, sparse and chunked ones),
//!   hashing while copying ([`digest`], [`manifest`]) and the pure rules (`policy`: cp's
//!   `decide`, sync's `policy::sync`).
//! * cp: the pipeline `walk → jobs → engine → finalize`. [`walk`] reads directories with
//!   getdents64 relative to directory descriptors, so trees deeper than `PATH_MAX` copy, and
//!   streams work to a small pool of threads; memory grows with depth and in-flight work,
//!   never with the size of the tree. An engine ([`Engine`]) moves regular files' bytes;
//!   [`finalize`] applies metadata after content, and to directories after their children.
//!   Everything a caller decides is in a [`CopyPlan`], built once with [`CopyPlan::builder`];
//!   [`copy`] runs it, and a [`Reporter`] shows what happens. [`ranks`] spreads one copy over
//!   MPI ranks.
//! * sync: rsync's local mirror ([`sync`]): both trees walked together, each entry decided by
//!   `policy::sync`, rsync's filter rules ([`filter`]), deletions in rsync's order, rsync's
//!   output; a [`sync::SyncPlan`] built once with `SyncPlan::builder`.
//! * Checking: [`verify`] compares two trees, or a tree with a manifest, entry by entry (the
//!   one comparer `ringio verify`, `cp --verify` and the benchmarks share); [`count`] sizes a
//!   tree for progress.
#![deny(missing_docs)]

/// A unit test that cannot run here (a missing tool, filesystem feature or privilege) says why
/// and returns; in CI (`CI` set), which installs all the tests need, that is a failure instead,
/// so a skip is never taken for a pass. The integration tests' `skip!` holds the same rule.
#[cfg(test)]
macro_rules! skip {
    ($($arg:tt)*) => {{
        let why = format!($($arg)*);
        if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            panic!("cannot run in CI: {why}");
        }
        eprintln!("SKIPPED: {why}");
        return;
    }};
}

mod attrs;
mod backup;
mod beneath;
mod builder;
mod content;
pub mod count;
mod ctx;
pub mod digest;
mod engine;
mod error;
pub mod finalize;
mod links;
pub mod manifest;
mod node;
mod opened;
mod parents;
mod plan;
mod policy;
mod progress;
mod queue;
pub mod quote;
pub mod ranks;
mod refusal;
mod replaced;
mod run;
mod stack;
pub mod sync;
mod sys;
mod temp;
pub mod transfer;
pub mod verify;
pub mod walk;
mod xattr;

pub use backup::{backup_path, simple_backup_suffix};
pub use builder::{BackupRequest, BackupTypeReader, HashRequest, PlanBuilder, PlanError};
pub use engine::uring_available;
pub use error::{CopyError, Op};
pub use plan::{
    Backup, BackupMode, Clobber, CopyPlan, CopyRoot, Dereference, Engine, Hashing, LinkMode,
    Overwrite, Preserve, Reflink, Resume, Sparse, Tuning,
};
pub use progress::{Progress, Reporter, Summary};
pub use refusal::{Refusal, Refused};
pub use run::{copy, copy_tee};
pub use sys::{open_regular_path, read_regular_path, Regular};
