//! What a run spread over several ranks adds to the shared state ([`RankShare`]): which rank
//! this is, the work it must send to others (names of multiply linked inodes go to their
//! owner), and the directories whose metadata waits for the end of the whole job.

use std::collections::HashSet;
use std::sync::Mutex;

use crate::item::WorkItem;
use crate::sys::Stat;

/// The rank of `size` that copies every name of the multiply linked inode `(dev, ino)` in a
/// copy spread over ranks: one rank links them all. (The simulator places links with it too.)
pub fn link_owner(dev: u64, ino: u64, size: u32) -> u32 {
    // splitmix64 finalizer: inode numbers are dense, ranks should be even.
    let mut x = dev.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ino;
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x % u64::from(size.max(1))) as u32
}

/// A directory this rank created (or merged into), whose metadata is applied after every rank
/// is done, deepest level first.
pub(crate) struct DeferredDir {
    pub root: u32,
    /// Relative to the root (empty: the root).
    pub path: Vec<u8>,
    pub depth: usize,
    pub stat: Stat,
    pub fresh: bool,
}

/// This rank's part in a job of several ranks.
pub(crate) struct RankShare {
    pub rank: u32,
    pub size: u32,
    /// Work for other ranks: (rank, item).
    pub outbox: Mutex<Vec<(u32, WorkItem)>>,
    pub deferred: Mutex<Vec<DeferredDir>>,
    /// Multiply linked inodes that a command-line file operand names, as (dev, ino): rank 0
    /// copies the operands, so it owns these, and their names inside trees go to it.
    pub operand_links: HashSet<(u64, u64)>,
}

impl RankShare {
    pub fn new(rank: u32, size: u32, operand_links: HashSet<(u64, u64)>) -> Self {
        RankShare {
            rank,
            size,
            outbox: Mutex::default(),
            deferred: Mutex::default(),
            operand_links,
        }
    }

    /// The rank that copies every name of the inode `(dev, ino)`: one rank links them all.
    pub fn owner(&self, dev: u64, ino: u64) -> u32 {
        if self.operand_links.contains(&(dev, ino)) {
            0
        } else {
            link_owner(dev, ino, self.size)
        }
    }

    pub fn send(&self, to: u32, item: WorkItem) {
        self.outbox.lock().expect("outbox lock").push((to, item));
    }

    pub fn defer(&self, dir: DeferredDir) {
        self.deferred.lock().expect("deferred lock").push(dir);
    }
}
