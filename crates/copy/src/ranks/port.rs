//! What a transport sees of this rank: the [`Exchange`] it implements, which
//! [`copy_ranked`](super::copy_ranked) drives, and the [`Port`] through which it takes this
//! rank's work for others and hands it theirs.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex};

use super::outgoing;
use super::work::WorkItem;
use super::Ranks;
use crate::ctx::Ctx;
use crate::engine::bigfile::BigFile;
use crate::engine::Mover;
use crate::error::CopyError;
use crate::node::DirNode;
use crate::progress::Progress;
use crate::queue::{Queue, Task};
use crate::walk;

/// The transport between ranks, driven by [`copy_ranked`](super::copy_ranked).
pub trait Exchange {
    /// Runs on the calling thread while this rank's workers copy: moves work between the
    /// ranks through `port` and returns once every rank agrees that all work is done and none
    /// is in flight.
    fn run(&mut self, port: &Port<'_, '_>);
    /// Returns once every rank has called it.
    fn barrier(&mut self);
    /// The largest `value` over all ranks.
    fn max(&mut self, value: u64) -> u64;
    /// Lockstep rounds (`cp --mpi --mpi-lockstep`): no worker threads start, and
    /// [`Exchange::run`] runs this rank's tasks itself, one per round, with [`Port::step`].
    fn lockstep(&self) -> bool {
        false
    }
}

/// What [`Port::step`] runs tasks with: the engine and a directory buffer, as a worker has.
struct Stepper<'a> {
    mover: Box<dyn Mover<'a> + 'a>,
    dir_buf: Vec<MaybeUninit<u8>>,
}

/// This rank's work, as the exchange sees it.
pub struct Port<'q, 'a> {
    ctx: &'a Ctx<'a>,
    queue: &'q Queue<'a>,
    /// This rank's node of each root of the plan (by index), where items from others hang.
    roots: &'q [Option<Arc<DirNode<'a>>>],
    /// Big files with chunks out on other ranks, by id: the file, and how many chunk ranges
    /// are still out. The last one back finishes the file here.
    lent: Mutex<HashMap<u64, (Arc<BigFile<'a>>, u32)>>,
    /// In lockstep rounds, what runs this rank's tasks (there are no workers).
    stepper: Option<Mutex<Stepper<'a>>>,
}

impl std::fmt::Debug for Port<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port").finish_non_exhaustive()
    }
}

impl<'q, 'a> Port<'q, 'a> {
    /// This rank's work in one wave: its `queue`, and its node of each root of the plan (by
    /// index). `lockstep`: the mover [`Port::step`] runs tasks with (there are no workers).
    pub(super) fn new(
        ctx: &'a Ctx<'a>,
        queue: &'q Queue<'a>,
        roots: &'q [Option<Arc<DirNode<'a>>>],
        lockstep: Option<Box<dyn Mover<'a> + 'a>>,
    ) -> Self {
        Port {
            ctx,
            queue,
            roots,
            lent: Mutex::default(),
            stepper: lockstep.map(|mover| {
                Mutex::new(Stepper {
                    mover,
                    dir_buf: vec![MaybeUninit::uninit(); walk::DIR_BUF],
                })
            }),
        }
    }
}

impl Port<'_, '_> {
    /// Nothing queued, no worker busy, nothing to send.
    pub fn is_idle(&self) -> bool {
        self.queue.is_idle() && self.ranks().outbox.lock().expect("outbox lock").is_empty()
    }

    /// Takes the older half of the work that can move (directories, batches of entries) for
    /// another rank. Oldest is shallowest: a thief gets big subtrees.
    /// Adjacent chunks of one file travel as one range: large and contiguous per rank.
    pub fn give_half(&self) -> Vec<WorkItem> {
        let mut items: Vec<WorkItem> = Vec::new();
        for task in self.queue.take_oldest_half(outgoing::movable) {
            let Task::Chunk { file, offset, len } = task else {
                items.extend(outgoing::to_item(task));
                continue;
            };
            // What travels is a real length, within the file as opened: never "to end of
            // file", which a thief would have to cut into pieces.
            let len = outgoing::clamp_len(&file, offset, len);
            let id = Arc::as_ptr(&file) as u64;
            if let Some(WorkItem::Chunk {
                id: last_id,
                offset: last_offset,
                len: last_len,
                ..
            }) = items.last_mut()
            {
                if *last_id == id && last_offset.saturating_add(*last_len) == offset {
                    *last_len = offset.saturating_add(len).saturating_sub(*last_offset);
                    continue;
                }
            }
            match outgoing::chunk_item(&file, self.ranks().rank, id, offset, len) {
                Some(item) => {
                    self.lent
                        .lock()
                        .expect("lent lock")
                        .entry(id)
                        .or_insert_with(|| (file.clone(), 0))
                        .1 += 1;
                    items.push(item);
                }
                None => self.queue.push(Task::Chunk { file, offset, len }),
            }
        }
        items
    }

    /// Lockstep rounds only: runs the newest queued task to its end, the I/O it started
    /// included, on the calling thread. False when nothing is queued.
    pub fn step(&self) -> bool {
        let stepper = self
            .stepper
            .as_ref()
            .expect("Port::step needs an exchange in lockstep");
        let mut stepper = stepper.lock().expect("stepper lock");
        let Stepper { mover, dir_buf } = &mut *stepper;
        walk::step(self.ctx, self.queue, mover.as_mut(), dir_buf)
    }

    /// Queues work from another rank.
    pub fn accept(&self, items: Vec<WorkItem>) {
        for item in items {
            let index = match &item {
                WorkItem::Dir { root, .. }
                | WorkItem::Entries { root, .. }
                | WorkItem::Chunk { root, .. } => *root as usize,
                WorkItem::ChunkDone { id, failed, bytes } => {
                    self.chunk_done(*id, *failed, *bytes);
                    continue;
                }
            };
            match self.roots.get(index).and_then(Option::as_ref) {
                Some(root) => self.queue.push(Task::FromRank {
                    root: root.clone(),
                    item,
                }),
                None => self.ctx.fail(CopyError::Refused(format!(
                    "work below operand {} arrived, but this rank could not open it",
                    index + 1
                ))),
            }
        }
    }

    /// A range of chunks lent to another rank is back; the last one finishes the file.
    fn chunk_done(&self, id: u64, failed: bool, bytes: u64) {
        let mut lent = self.lent.lock().expect("lent lock");
        let Some((file, out)) = lent.get_mut(&id) else {
            drop(lent);
            return self.ctx.fail(CopyError::Refused(format!(
                "another rank reported a chunk of a file this rank did not lend (id {id:#x})"
            )));
        };
        file.lent_chunk_done(failed, bytes);
        *out -= 1;
        if *out == 0 {
            let done = lent.remove(&id);
            drop(lent);
            // Possibly the last holder: the file is finished (or given up) here.
            drop(done);
        }
    }

    /// Work this rank's workers made for other ranks: (rank, item).
    pub fn take_outbox(&self) -> Vec<(u32, WorkItem)> {
        std::mem::take(&mut *self.ranks().outbox.lock().expect("outbox lock"))
    }

    /// This rank's live counters.
    pub fn progress(&self) -> &Progress {
        self.ctx.progress
    }

    /// Entries that failed on this rank so far.
    pub fn errors(&self) -> u64 {
        self.ctx.errors.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn ranks(&self) -> &Ranks {
        self.ctx.ranks.as_ref().expect("a ranked run")
    }
}
