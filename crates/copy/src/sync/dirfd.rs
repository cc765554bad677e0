//! The descriptors a sync walk's directory pairs hold ([`DirFd`]), who holds them
//! ([`Holders`]) and the run's budget of them ([`Budget`]); `held` opens, closes and opens
//! them again.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::plan::Tuning;
use crate::sys;

/// One directory descriptor of a pair (a source layer's, or the destination's). Open while
/// its pair is held: the walk holds a pair whenever it lends it out, so every reader of it
/// finds it open.
pub(super) struct DirFd {
    fd: Mutex<Option<OwnedFd>>,
    /// A raw copy for reads without the lock (-1 while closed).
    raw: AtomicI32,
}

impl DirFd {
    pub fn new(fd: OwnedFd) -> Self {
        DirFd {
            raw: AtomicI32::new(fd.as_raw_fd()),
            fd: Mutex::new(Some(fd)),
        }
    }

    pub(super) fn close(&self) {
        self.raw.store(-1, Ordering::Release);
        self.fd.lock().expect("dir fd").take();
    }

    /// Its descriptor, taken out (it reads as closed from now on).
    pub(super) fn take(&self) -> Option<OwnedFd> {
        self.raw.store(-1, Ordering::Release);
        self.fd.lock().expect("dir fd").take()
    }

    pub(super) fn put(&self, fd: OwnedFd) {
        self.raw.store(fd.as_raw_fd(), Ordering::Release);
        *self.fd.lock().expect("dir fd") = Some(fd);
    }
}

impl AsFd for DirFd {
    /// The descriptor. Its pair is held by whoever reads it (the walk holds a pair for as
    /// long as it lends it); a closed one is a bug, and fails here rather than reach another
    /// file that took its number.
    fn as_fd(&self) -> BorrowedFd<'_> {
        let raw = self.raw.load(Ordering::Acquire);
        assert!(
            raw >= 0,
            "a sync directory used while its descriptor is closed"
        );
        // SAFETY: it is closed only while its pair is not held (`Hold`), and it is read only
        // by holders of its pair, whose hold outlasts the borrow.
        unsafe { BorrowedFd::borrow_raw(raw) }
    }
}

/// How many holders a pair has, and whether its descriptors are open.
#[derive(Debug)]
pub(super) struct Holders(pub(super) Mutex<(u32, bool)>);

impl Default for Holders {
    fn default() -> Self {
        Holders(Mutex::new((0, true)))
    }
}

/// The run's descriptor budget: how many directory descriptors may stay open while no one
/// holds them, and how many are.
#[derive(Debug, Default)]
pub(super) struct Budget {
    pub open: AtomicUsize,
    pub most: usize,
    /// The workers the walk may run.
    pub threads: usize,
    /// RLIMIT_NOFILE leaves each worker room to spare (256 or more, with at least 128 for each
    /// worker): a deletion may hold a few levels of the tree it deletes, not one.
    pub roomy: bool,
}

impl Budget {
    /// The budget under RLIMIT_NOFILE (raised to its hard limit), shared out by `fit` as cp
    /// shares it (the walk passes cp's `FdBudget`: from the limit, what is open now and the
    /// tuning asked, the workers and the directory pairs that may stay open), for `threads`
    /// workers asked and `held` descriptors besides the pairs' (held for the whole run: the
    /// sources' roots, the alternate trees' roots, the temporary directory; and a worker's
    /// side ones, [`Budget::side`]). Below the least a sync needs
    /// ([`Budget::LEAST`]), the message that refuses it.
    pub fn of_limit(
        threads: usize,
        held: usize,
        fit: impl FnOnce(usize, usize, &Tuning) -> (usize, usize),
    ) -> Result<Self, String> {
        let nofile =
            usize::try_from(ringio_base::limits::raise_nofile_limit()).unwrap_or(usize::MAX);
        // Only a tight limit is worth a look at what is open already.
        let in_use = if nofile < 256 {
            sys::open_descriptors(nofile).unwrap_or(3)
        } else {
            3
        };
        let tuning = Tuning {
            threads,
            ..Default::default()
        };
        let least = in_use + held + Self::LEAST;
        if nofile < least {
            return Err(format!(
                "{nofile} open files (RLIMIT_NOFILE) are too few for sync: it needs at least \
                 {least} here ({in_use} open already)"
            ));
        }
        let (workers, dir_pairs) = fit(nofile, in_use, &tuning);
        Ok(Budget {
            open: AtomicUsize::new(0),
            most: 2 * dir_pairs,
            threads: workers.min(threads).max(1),
            roomy: nofile >= 256,
        })
    }

    /// Descriptors a sync needs besides those open at its start and those it holds for the whole run: the
    /// destination root and its anchor, and the pair a worker reads with the subdirectory it
    /// opens (two each; a file and its temporary, when the pair makes one, fit in the
    /// subdirectory's place). Found the least that works for every deletion mode and -H, on
    /// deep and wide trees.
    const LEAST: usize = 2 + 4;

    /// Descriptors a worker holds besides its pairs and a file pair, for the options in force:
    /// --delay-updates' `.~tmp~`; --backup-dir's tree, opened from DEST's anchor, and the
    /// backup's directory in it with the next one on the way down.
    pub fn side(plan: &super::SyncPlan) -> usize {
        let backup_tree = plan.backup.as_ref().is_some_and(|b| b.dir.is_some());
        usize::from(plan.delay_updates) + 3 * usize::from(backup_tree)
    }

    pub(super) fn over(&self) -> bool {
        self.open.load(Ordering::Relaxed) > self.most
    }
}
