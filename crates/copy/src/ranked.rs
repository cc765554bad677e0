//! One copy spread over the ranks of an MPI job (`mpirun -n N ringio cp --mpi`), seen from one
//! rank: [`copy_ranked`] runs this rank's workers on the usual engine while an [`Exchange`]
//! (the MPI runtime) moves [`WorkItem`]s between ranks through a [`Port`], then applies the
//! metadata of the directories this rank created, deepest level first, one barrier per level.
//!
//! The library knows nothing of MPI: the exchange could be any transport.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::ctx::Ctx;
use crate::engine::bigfile::BigFile;
use crate::engine::Mover;
use crate::error::{CopyError, Op};
use crate::finalize;
use crate::item::WorkItem;
use crate::node::DirNode;
use crate::plan::{CopyPlan, CopyRoot, Dereference};
use crate::progress::{Progress, Reporter, Summary};
use crate::queue::{Queue, Task};
use crate::rank::{DeferredDir, RankShare};
use crate::remote;
use crate::run::{self, Setup};
use crate::sys;
use crate::walk;

/// The transport between ranks, driven by [`copy_ranked`].
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

impl Port<'_, '_> {
    /// Nothing queued, no worker busy, nothing to send.
    pub fn is_idle(&self) -> bool {
        self.queue.is_idle() && self.share().outbox.lock().expect("outbox lock").is_empty()
    }

    /// Takes the older half of the work that can move (directories, batches of entries) for
    /// another rank. Oldest is shallowest: a thief gets big subtrees.
    /// Adjacent chunks of one file travel as one range: large and contiguous per rank.
    pub fn give_half(&self) -> Vec<WorkItem> {
        let mut items: Vec<WorkItem> = Vec::new();
        for task in self.queue.take_oldest_half(remote::movable) {
            let Task::Chunk { file, offset, len } = task else {
                items.extend(remote::to_item(task));
                continue;
            };
            // What travels is a real length, within the file as opened: never "to end of
            // file", which a thief would have to cut into pieces.
            let len = remote::clamp_len(&file, offset, len);
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
            match remote::chunk_item(&file, self.share().rank, id, offset, len) {
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
                Some(root) => self.queue.push(Task::Remote {
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
        std::mem::take(&mut *self.share().outbox.lock().expect("outbox lock"))
    }

    /// This rank's live counters.
    pub fn progress(&self) -> &Progress {
        self.ctx.progress
    }

    /// Entries that failed on this rank so far.
    pub fn errors(&self) -> u64 {
        self.ctx.errors.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn share(&self) -> &RankShare {
        self.ctx.share.as_ref().expect("a ranked run")
    }
}

/// Runs this rank's part of `plan` in a job of `size` ranks. Every rank calls it with the same
/// plan. Rank 0 starts the operands; the others take work from it and each other. The summary
/// counts this rank's work only.
pub fn copy_ranked(
    plan: &CopyPlan,
    progress: &Progress,
    reporter: &dyn Reporter,
    rank: u32,
    size: u32,
    exchange: &mut dyn Exchange,
) -> Summary {
    let setup = Setup::new(plan, reporter);
    let share = RankShare::new(rank, size, operand_links(setup.plan));
    let ctx = setup.ctx(progress, reporter, Some(share));
    // Every rank runs every wave: each ends in collective steps.
    for wave in run::waves(&setup.plan.roots) {
        run_wave(&ctx, &setup, &wave, exchange);
    }
    if setup.plan.fsync && !progress.cancelled() {
        run::sync_destinations(&ctx);
    }
    setup.summary(&ctx)
}

/// The multiply linked inodes that command-line file operands name (under `--preserve=links`):
/// every rank finds the same ones, and rank 0, which copies the operands, owns them.
fn operand_links(plan: &CopyPlan) -> HashSet<(u64, u64)> {
    if !plan.preserve.links {
        return HashSet::new();
    }
    let follow = plan.dereference != Dereference::Never;
    plan.roots
        .iter()
        .filter_map(|root| {
            let stat = root.source_stat(follow).ok()?;
            (stat.kind() != sys::Kind::Dir && stat.nlink > 1).then_some((stat.dev, stat.ino))
        })
        .collect()
}

fn run_wave<'a>(
    ctx: &'a Ctx<'a>,
    setup: &'a Setup<'a>,
    wave: &[&CopyRoot],
    exchange: &mut dyn Exchange,
) {
    let plan = ctx.plan;
    let share = ctx.share.as_ref().expect("a ranked run");
    // Lockstep: one task at a time, run by the exchange; the queue sizes its batches for one.
    let lockstep = exchange.lockstep();
    let workers = if lockstep { 0 } else { setup.threads() };
    let queue = Queue::new(workers.max(1));
    queue.hold_open(true);
    let mut roots: Vec<Option<Arc<DirNode<'a>>>> = plan.roots.iter().map(|_| None).collect();
    let index = |root: &CopyRoot| plan.roots.iter().position(|r| std::ptr::eq(r, root));
    if share.rank == 0 {
        for root in wave {
            match run::start_root(ctx, &queue, root) {
                Ok(node) => roots[index(root).expect("a root of the plan")] = node,
                Err(e) => ctx.fail(e),
            }
        }
    }
    // The others open what rank 0 created.
    exchange.barrier();
    if share.rank != 0 {
        for root in wave {
            roots[index(root).expect("a root of the plan")] = run::open_root(ctx, root);
        }
    }
    let port = Port {
        ctx,
        queue: &queue,
        roots: &roots,
        lent: Mutex::default(),
        stepper: lockstep.then(|| {
            Mutex::new(Stepper {
                mover: run::new_mover(plan, &ctx.tuning, setup.use_uring, ctx.reporter),
                dir_buf: vec![MaybeUninit::uninit(); walk::DIR_BUF],
            })
        }),
    };
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                let mut mover = run::new_mover(plan, &ctx.tuning, setup.use_uring, ctx.reporter);
                walk::worker(ctx, &queue, mover.as_mut());
            });
        }
        exchange.run(&port);
        queue.hold_open(false);
    });
    drop(port);
    drop(roots);
    finish_directories(ctx, exchange);
}

/// Applies the metadata of the directories this rank created, after every rank finished
/// copying: deepest level first, all ranks level by level, as post-order does on one node.
fn finish_directories(ctx: &Ctx<'_>, exchange: &mut dyn Exchange) {
    let share = ctx.share.as_ref().expect("a ranked run");
    let mut mine = std::mem::take(&mut *share.deferred.lock().expect("deferred lock"));
    let local = mine.iter().map(|d| d.depth as u64).max().unwrap_or(0);
    let deepest = exchange.max(local);
    mine.sort_by_key(|d| std::cmp::Reverse(d.depth));
    let mut next = mine.into_iter().peekable();
    for level in (0..=deepest).rev() {
        while let Some(dir) = next.next_if(|d| d.depth as u64 == level) {
            apply(ctx, &dir);
        }
        exchange.barrier();
    }
}

/// Opens the directory `path` (relative, `/`-separated) below `top`, in pieces shorter than
/// PATH_MAX, so a tree of any depth can be reached. `follow`: follow a symlink at the end of
/// each piece.
fn open_below(top: OwnedFd, path: &[u8], follow: bool) -> io::Result<OwnedFd> {
    const PIECE: usize = libc::PATH_MAX as usize - 1;
    let mut fd = top;
    let mut rest = path;
    while !rest.is_empty() {
        let cut = if rest.len() <= PIECE {
            rest.len()
        } else {
            rest[..=PIECE]
                .iter()
                .rposition(|&b| b == b'/')
                .filter(|&at| at > 0)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENAMETOOLONG))?
        };
        let piece =
            CString::new(&rest[..cut]).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        fd = sys::open_dir(fd.as_fd(), &piece, follow)?;
        rest = rest.get(cut + 1..).unwrap_or_default();
    }
    Ok(fd)
}

fn apply(ctx: &Ctx<'_>, dir: &DeferredDir) {
    let root = &ctx.plan.roots[dir.root as usize];
    let rel = std::ffi::OsStr::from_bytes(&dir.path);
    let (src_path, dst_path) = if dir.path.is_empty() {
        (root.src.clone(), root.dst.clone())
    } else {
        (root.src.join(rel), root.dst.join(rel))
    };
    let follow_root = ctx.plan.dereference != Dereference::Never;
    let follow_below = ctx.plan.dereference == Dereference::Always;
    let open = |top: &PathBuf, follow_top: bool| {
        let top = CString::new(top.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let top_fd = sys::open_dir(rustix::fs::CWD, &top, follow_top)?;
        open_below(top_fd, &dir.path, follow_below)
    };
    let src = match open(&root.src, follow_root) {
        Ok(fd) => fd,
        Err(e) => return ctx.fail(CopyError::io(Op::OpenDir, &src_path, e)),
    };
    let dst = match open(&root.dst, false) {
        Ok(fd) => fd,
        Err(e) => return ctx.fail(CopyError::io(Op::OpenDir, &dst_path, e)),
    };
    let path = || dst_path.clone();
    finalize::directory(
        ctx,
        src.as_fd(),
        dst.as_fd(),
        &dir.stat,
        dir.fresh,
        None,
        &path,
    );
}
