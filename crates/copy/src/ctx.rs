//! The state of one run that every worker shares ([`Ctx`]): the plan and its fitted tuning, the
//! reporters, who we are, the error count, the hard-link map and the descriptor budget.

use std::collections::{HashMap, HashSet};
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::engine::shared::Member;
use crate::error::CopyError;
use crate::links::LinkTracker;
use crate::manifest::hashing::FileHash;
use crate::manifest::Recorder;
use crate::plan::{CopyPlan, Tuning};
use crate::policy::Policy;
use crate::progress::{Progress, Reporter};
use crate::ranks::Ranks;
use crate::sys::{self, Stat};

/// Source operand identity (dev, ino) → the indices of the operands that named it.
pub(crate) type OperandsSeen = HashMap<(u64, u64), Vec<usize>>;

/// State shared by every worker of one run.
pub(crate) struct Ctx<'a> {
    pub plan: &'a CopyPlan,
    /// The plan's tuning fitted to this run's descriptor and memory limits (`run::Setup`):
    /// what the engines use. The plan itself keeps what was asked.
    pub tuning: Tuning,
    /// cp's rules for existing destinations, read from the plan once.
    pub policy: Policy,
    pub progress: &'a Progress,
    pub reporter: &'a dyn Reporter,
    pub umask: u32,
    pub is_root: bool,
    pub euid: u32,
    pub egid: u32,
    pub errors: AtomicU64,
    pub fatal: AtomicBool,
    /// Directory pairs below the roots with open descriptors, and how many may stay open
    /// when nobody holds them.
    pub open_dirs: AtomicUsize,
    pub dir_budget: usize,
    /// First copies of multiply linked inodes (`--preserve=links`).
    pub links: LinkTracker,
    /// The "no extended attributes here" warning was printed.
    pub xattr_warned: AtomicBool,
    /// With several operands: the (dev, ino) of every destination an operand created, so a
    /// later operand of the same name is refused (cp's "will not overwrite just-created").
    pub created: Option<Mutex<HashSet<(u64, u64)>>>,
    /// With several operands: the (dev, ino) of each source operand met so far, and the
    /// indices of the operands that named it (cp's "specified more than once").
    pub operands: Option<Mutex<OperandsSeen>>,
    /// A run spread over MPI ranks (`cp --mpi`): this rank's part; `None` on one node.
    pub ranks: Option<Ranks>,
    /// `--hash`: the hash of every file copied.
    pub recorder: Option<Recorder>,
    /// A run of a tee group (`cp --tee`): its sources are read once for the whole group.
    pub shared: Option<Member>,
}

impl Ctx<'_> {
    /// Reports a failed entry. Fatal errors (no space, ...) stop the run; after that, follow-on
    /// errors of entries that were in flight are counted but not printed again.
    pub fn fail(&self, err: CopyError) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if self.fatal.load(Ordering::Relaxed) {
            return;
        }
        if err.is_fatal() {
            if self.fatal.swap(true, Ordering::Relaxed) {
                return;
            }
        } else if self.progress.cancelled() {
            return;
        }
        self.reporter.error(&err);
    }

    /// True when idle directories should give their descriptors back.
    pub fn over_dir_budget(&self) -> bool {
        self.open_dirs.load(Ordering::Relaxed) > self.dir_budget
    }

    /// True when `entry` is a destination that an earlier operand of this run created.
    pub fn just_created(&self, entry: &Stat) -> bool {
        self.created.as_ref().is_some_and(|set| {
            set.lock()
                .expect("created set lock")
                .contains(&(entry.dev, entry.ino))
        })
    }

    /// Records a destination that an operand has just created (`operand`: the entry is a
    /// command-line operand, not an entry inside a tree).
    pub fn note_created_stat(&self, operand: bool, made: &Stat) {
        if let Some(set) = self.created.as_ref().filter(|_| operand) {
            set.lock()
                .expect("created set lock")
                .insert((made.dev, made.ino));
        }
    }

    /// Records a file that an operand has just created, by its descriptor.
    pub fn note_created(&self, operand: bool, made: BorrowedFd<'_>) {
        if self.created.is_some() && operand {
            if let Ok(stat) = sys::fstatx(made) {
                self.note_created_stat(operand, &stat);
            }
        }
    }

    /// True when a small file may take a fast path that writes its bytes straight under the
    /// final name: the plan allows it, the reporter wants no `--debug` account of how each
    /// file's data moved (that comes from the synchronous path), and the run is no member of a
    /// tee group (whose reads go through the synchronous path's group reads).
    pub fn small_files_fast(&self) -> bool {
        self.plan.small_files_fast() && !self.reporter.debug() && self.shared.is_none()
    }

    /// A hash for a file about to be copied, when the run records them.
    pub fn file_hash(&self) -> Option<FileHash> {
        self.recorder.as_ref().map(|r| FileHash::new(r.algo()))
    }

    /// True once the run must stop: SIGINT or a fatal error.
    pub fn stopped(&self) -> bool {
        self.fatal.load(Ordering::Relaxed) || self.progress.cancelled()
    }
}
