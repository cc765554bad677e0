//! ringio-copy: the copy pipeline behind `ringio cp`.
//!
//! The pipeline is `walk → jobs → engine → finalize`:
//!
//! * [`walk`] reads directories with getdents64 relative to directory descriptors, so trees deeper
//!   than `PATH_MAX` copy, and streams work to a small pool of threads. Memory grows with depth and
//!   in-flight work, never with the size of the tree.
//! * An engine ([`Engine`]) moves the bytes of regular files: `uring` batches the per-file system
//!   calls of small files through one io_uring per worker and lets the kernel move large files
//!   (FICLONE, copy_file_range) in parallel chunks; `readwrite` is plain read/write, the reference.
//! * [`finalize`] applies metadata after content, and to directories after all their children.
//!
//! Everything a caller decides is in a [`CopyPlan`]; [`copy`] runs it. [`verify`] compares two
//! trees entry by entry: the one comparer `ringio verify`, `ringio cp --verify` and the
//! benchmarks share.
#![deny(missing_docs)]

/// `Display` and `FromStr` for a C-like enum with `const ALL: &[Self]` and `fn name(self)`:
/// the command-line names come from the enum itself, and an unknown name is an error that lists
/// the known ones. `$what` names the kind of thing in that error ("engine", "model", ...).
#[macro_export]
macro_rules! impl_named {
    ($ty:ty, $what:literal) => {
        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl ::std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                <$ty>::ALL
                    .iter()
                    .copied()
                    .find(|v| v.name() == s)
                    .ok_or_else(|| {
                        let names: Vec<&str> = <$ty>::ALL.iter().map(|v| v.name()).collect();
                        format!(
                            concat!("unknown ", $what, " '{}' (choose from: {})"),
                            s,
                            names.join(", ")
                        )
                    })
            }
        }
    };
}

mod backup;
mod ctx;
mod engine;
mod error;
pub mod finalize;
mod links;
mod node;
mod opened;
mod plan;
mod progress;
mod queue;
mod run;
mod sys;
pub mod transfer;
pub mod verify;
pub mod walk;
mod xattr;

pub use engine::uring_available;
pub use error::{CopyError, Op};
pub use plan::{
    Backup, BackupMode, CopyPlan, CopyRoot, Dereference, Engine, Overwrite, Preserve, Reflink,
    Sparse, Tuning,
};
pub use progress::{Progress, Reporter, Summary};
pub use run::copy;
