//! What a run tells the world while it goes: live counters and the stop switch ([`Progress`]),
//! per-entry messages ([`Reporter`]) and the outcome ([`Summary`]). A leaf: the pipeline reports
//! through these and never knows who draws them.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::CopyError;

/// Live counters, readable from another thread (progress bars), and the stop switch.
#[derive(Debug, Default)]
pub struct Progress {
    /// Entries (files, symlinks, special files) finished.
    pub files: AtomicU64,
    /// Directories read.
    pub dirs: AtomicU64,
    /// File bytes copied.
    pub bytes: AtomicU64,
    /// Entries left as they were by cp's rules (`-n`, `-u`, `--resume` finding them complete,
    /// an `-i` answered no, a name already linked).
    pub skipped: AtomicU64,
    cancel: Arc<AtomicBool>,
}

impl Progress {
    /// Zeroed counters.
    pub fn new() -> Self {
        Progress::default()
    }

    /// New counters that stop with `other`'s switch (the copies of one command).
    pub fn sharing_cancel(other: &Progress) -> Self {
        Progress {
            cancel: other.cancel_flag(),
            ..Progress::default()
        }
    }

    /// The stop switch itself, for a signal handler to set (see [`Progress::cancel`]).
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancel)
    }

    /// Asks the copy to stop as soon as it can (async-signal-safe: one atomic store).
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// True once [`Progress::cancel`] was called.
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// Where the copy reports what happens, and which of its lines the front end wants (display
/// is the reporter's business, not the plan's). Called from worker threads.
pub trait Reporter: Sync {
    /// `-v`: the front end shows cp's verbose lines ([`Reporter::copied`],
    /// [`Reporter::verbose_line`]) and the engine's notes. Asked as the copy goes; the answer
    /// must not change during a run.
    fn verbose(&self) -> bool {
        false
    }
    /// `--debug`: the front end shows, after each regular file's `-v` line, how its data moved
    /// (GNU cp's `copy offload: ..., reflink: ..., sparse detection: ...`). Every file then
    /// takes the synchronous path whole, so that there is one answer to give. Must not change
    /// during a run.
    fn debug(&self) -> bool {
        false
    }
    /// An entry failed; the copy goes on (unless the error is fatal).
    fn error(&self, err: &CopyError);
    /// An entry was copied (called only when [`Reporter::verbose`]).
    fn copied(&self, src: &Path, dst: &Path);
    /// Another line of `-v` as cp words it (`removed 'PATH'`, a `--parents` directory, a
    /// `--debug` line).
    fn verbose_line(&self, line: &str);
    /// A warning, or under `-v` something worth saying (an engine fallback, a file that
    /// changed size).
    fn note(&self, msg: &str);
    /// `-i`: asks `question` (cp's "overwrite 'PATH'? ") and returns the answer. Only asked
    /// when the plan's overwrite policy is [`crate::Overwrite::Interactive`].
    fn confirm(&self, question: &str) -> bool;
}

/// The outcome of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Entries copied.
    pub files: u64,
    /// Directories read.
    pub dirs: u64,
    /// File bytes copied.
    pub bytes: u64,
    /// Entries that failed.
    pub errors: u64,
    /// Entries left as they were (see [`Progress::skipped`]).
    pub skipped: u64,
    /// Stopped by [`Progress::cancel`] (SIGINT).
    pub interrupted: bool,
    /// The engine that actually ran.
    pub engine: String,
    /// `--hash`: every file copied, with its hash (none if the run was interrupted).
    pub hashes: Option<crate::manifest::Listing>,
    /// `--hash`: the files kept as they were (`-n`, `-u`) whose bytes are not their sources',
    /// by their manifest names.
    pub kept_unlike_source: Vec<Vec<u8>>,
}
