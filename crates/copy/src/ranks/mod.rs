//! `cp --mpi`: one copy spread over the ranks of an MPI job, seen from one rank, behind one
//! seam. The library knows nothing of MPI: a transport (ringio-mpi's runtime) implements
//! [`Exchange`] and moves [`WorkItem`]s between ranks through a [`Port`]; how items look as
//! bytes is the transport's business too.
//!
//! The single-node copy meets this feature only through this module: the run's state holds
//! this rank's part as `Ctx::ranks: Option<Ranks>` (`None` on one node), the queue has one
//! kind of task for work from another rank (`Task::FromRank`, holding a [`WorkItem`]), and
//! the core makes four calls:
//!
//! | where | call | what it asks |
//! |---|---|---|
//! | `engine/entry.rs`, `copy_stated` | `sent_to_owner` | whose inode is this? another rank's: hand the name to it |
//! | `node.rs`, `DirNode::drop` | `Ranks::defer_dir` | keep this directory's metadata for the end of the job |
//! | `engine/bigfile.rs`, `BigFile::drop` | `Ranks::chunk_done` | tell the owner of a lent file that its range is done |
//! | `walk.rs`, `Task::FromRank` | `tasks_for` | work another rank sent: the tasks that do it here |
//!
//! On one node the first three find `Ctx::ranks` empty and return at once, and the fourth never
//! comes.
//!
//! The parts, leaves first:
//!
//! * `split`: who owns what ([`link_owner`]: the rank that copies every name of a multiply
//!   linked inode).
//! * `work`: [`WorkItem`], a piece of the copy that can travel: raw-byte paths relative to
//!   the roots of the plan, no descriptors.
//! * `outgoing`: work leaving this rank: queued tasks become items for a thief; the names of
//!   multiply linked inodes go to their owner.
//! * `incoming`: work arriving: items become tasks again below this rank's roots.
//! * `deferred_dirs`: the metadata of the directories this rank created, applied after every
//!   rank is done.
//! * `port`: what a transport sees: [`Exchange`], which it implements, and [`Port`], this
//!   rank's work.
//! * `job`: [`copy_ranked`], this rank's part of the whole copy, wave by wave.

use std::sync::Mutex;

use self::split::Owners;
use crate::sys::Stat;

mod deferred_dirs;
mod incoming;
mod job;
mod outgoing;
mod port;
mod split;
mod work;
pub use self::split::link_owner;
pub use self::work::{WorkItem, KIND_DIR, KIND_FILE, KIND_SPECIAL, KIND_SYMLINK, KIND_UNKNOWN};
pub(crate) use incoming::tasks_for;
pub use job::copy_ranked;
pub(crate) use outgoing::sent_to_owner;
pub use port::{Exchange, Port};

/// This rank's part in a job of several ranks: which rank it is, the work it must send to
/// others (names of multiply linked inodes go to their owner), and the directories whose
/// metadata waits for the end of the whole job.
pub(crate) struct Ranks {
    rank: u32,
    owners: Owners,
    /// Work for other ranks: (rank, item).
    outbox: Mutex<Vec<(u32, WorkItem)>>,
    deferred: Mutex<Vec<DeferredDir>>,
}

/// A directory this rank created (or merged into), whose metadata is applied after every rank
/// is done, deepest level first.
struct DeferredDir {
    root: u32,
    /// Relative to the root (empty: the root).
    path: Vec<u8>,
    depth: usize,
    stat: Stat,
    fresh: bool,
}

impl Ranks {
    fn new(rank: u32, owners: Owners) -> Self {
        Ranks {
            rank,
            owners,
            outbox: Mutex::default(),
            deferred: Mutex::default(),
        }
    }

    /// Hands `item` to rank `to` (it leaves with the transport's next round).
    fn send(&self, to: u32, item: WorkItem) {
        self.outbox.lock().expect("outbox lock").push((to, item));
    }

    /// Keeps the metadata of a directory this rank created for the end of the job: other
    /// ranks may still be filling it. `(root, path, depth)` is where it is
    /// (`DirNode::rel_path`).
    pub fn defer_dir(&self, (root, path, depth): (u32, Vec<u8>, usize), stat: Stat, fresh: bool) {
        let dir = DeferredDir {
            root,
            path,
            depth,
            stat,
            fresh,
        };
        self.deferred.lock().expect("deferred lock").push(dir);
    }

    /// A range of file `id` that rank `owner` lent this rank is done (`failed`: and it failed,
    /// so the owner gives the file up); `bytes` were copied here. The owner finishes the file
    /// once every range is back.
    pub fn chunk_done(&self, owner: u32, id: u64, failed: bool, bytes: u64) {
        self.send(owner, WorkItem::ChunkDone { id, failed, bytes });
    }
}
