//! A discrete-event simulator of `ringio cp --mpi` at scale: thousands of virtual ranks, each
//! running the real protocol state machine ([`crate::protocol::Rank`]) on a synthetic tree,
//! with random message delays and a shared metadata server of limited rate.
//!
//! The model:
//! * **Tree** ([`Tree`]). A synthetic one ([`SyntheticTree`]): directories hold
//!   `files_per_dir` files and a random number of subdirectories (0 to 2 × `fanout`, drawn from
//!   a hash of the directory, so every rank count sees the same tree) down to `depth`; a fraction
//!   `linked` of the files are extra names of multiply linked inodes. Or a real tree, listed
//!   from disk ([`ListedTree`]).
//! * **Work units** as ringio-copy's worker runs them (`walk.rs`), one unit at a time per rank,
//!   newest first (depth-first); thieves get the oldest half of what may move. Reading a
//!   directory queues its subdirectories; its files go in batches of 128, a full batch queued
//!   while fewer than two units wait and copied at once otherwise, and the last, partial batch
//!   is copied with the read. Copying a name of an inode another rank owns sends it there.
//! * **Lockstep** ([`lockstep`]): every unit takes one round and messages arrive between rounds,
//!   as `ringio cp --mpi --mpi-lockstep SEED` runs real ranks. On the same tree with the same
//!   seed, the two send the same messages: the check of this model against real ranks.
//! * **Metadata.** A file costs `ops_per_file` metadata operations, a directory `ops_per_dir`,
//!   counted in creates: on Lustre a create costs the metadata target (and the object targets)
//!   far more than a stat, so creates set the pace. One client rank issues at most
//!   `client_ops` per second; the metadata servers serve at most `mds_ops` per second for
//!   everyone, first come first served (a fluid queue). docs/SCALING.md gives the sources.
//! * **Messages** take a uniformly random delay in `[latency_min, latency_max]`. The final
//!   barrier completes `log2(N)` mean delays after the last rank enters it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::protocol::{Msg, Phase, Rank, RankId, WorkPool};

mod lockstep;
mod tree;

pub use lockstep::{lockstep, LockstepReport};
pub use tree::{Link, ListedTree, Listing, SyntheticTree, Tree};

/// Protocol nanoseconds per lockstep round: the shortest steal backoff, so a failed steal
/// waits one round, then two, four, ...
pub const ROUND_NS: u64 = crate::protocol::BACKOFF_MIN_NS;

/// Entries in one batch of a directory's files (ringio-copy's `BATCH`).
const BATCH: usize = 128;

/// A reader queues a full batch only while fewer units than this wait, and copies it itself
/// otherwise (ringio-copy's `Queue::hungry`, for one worker).
const HUNGRY: usize = 2;

/// What the simulator runs.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Virtual ranks.
    pub ranks: u32,
    /// Seeds the tree, the delays and the victims.
    pub seed: u64,
    /// Levels of directories below the root.
    pub depth: u32,
    /// Mean subdirectories per directory.
    pub fanout: u32,
    /// Files per directory.
    pub files_per_dir: u32,
    /// Fraction of files that are extra names of a multiply linked inode.
    pub linked: f64,
    /// Message delay range, nanoseconds.
    pub latency_min_ns: u64,
    /// See `latency_min_ns`.
    pub latency_max_ns: u64,
    /// Metadata operations per second the metadata server completes, for all clients.
    pub mds_ops: f64,
    /// Metadata operations per second one rank can issue.
    pub client_ops: f64,
    /// Metadata operations per file (stat, open, create, close, set times and mode).
    pub ops_per_file: u32,
    /// Metadata operations per directory (open both sides, mkdir, read, set metadata).
    pub ops_per_dir: u32,
}

impl SimConfig {
    /// A Lustre-like default: 8 metadata targets of 15,000 file creates/s each, ranks of
    /// 2,000 creates/s each (4 workers of about 500), 2–20 µs messages; a tree of about 4
    /// million files.
    pub fn lustre(ranks: u32, seed: u64) -> SimConfig {
        SimConfig {
            ranks,
            seed,
            depth: 5,
            fanout: 8,
            files_per_dir: 100,
            linked: 0.01,
            latency_min_ns: 2_000,
            latency_max_ns: 20_000,
            mds_ops: 120_000.0,
            client_ops: 2_000.0,
            ops_per_file: 1,
            ops_per_dir: 2,
        }
    }
}

/// What a simulation measured.
#[derive(Debug, Clone, Default)]
pub struct SimReport {
    /// Virtual ranks.
    pub ranks: u32,
    /// Directories and files in the tree.
    pub dirs: u64,
    /// Files (names) copied.
    pub files: u64,
    /// Time until the last unit of work finished, ns.
    pub work_done_ns: u64,
    /// From the last unit of work to rank 0 declaring termination, ns.
    pub detect_ns: u64,
    /// From the last unit of work to every rank leaving the final barrier, ns.
    pub shutdown_ns: u64,
    /// Steal requests sent, and how many were answered with work.
    pub steals: u64,
    /// See `steals`.
    pub steals_ok: u64,
    /// Messages sent per rank: mean and maximum.
    pub messages_mean: f64,
    /// See `messages_mean`.
    pub messages_max: u64,
    /// Messages each rank sent.
    pub messages: Vec<u64>,
    /// Fraction of rank-time spent without work before the work was done.
    pub idle_fraction: f64,
    /// Files per second achieved.
    pub files_per_sec: f64,
    /// Files per second the metadata server allows (`mds_ops / ops_per_file`, directories
    /// aside).
    pub mds_files_per_sec: f64,
}

/// A unit of simulated work.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Unit {
    /// Create directory `id`'s twin and read it. The root's stays with rank 0.
    Dir { id: u64, movable: bool },
    /// Copy `count` names, and these names of multiply linked inodes.
    Files { count: u32, linked: Vec<Link> },
}

#[derive(Default)]
struct Pool {
    queue: VecDeque<Unit>,
    busy: bool,
}

impl WorkPool<Unit> for Pool {
    fn is_idle(&self) -> bool {
        self.queue.is_empty() && !self.busy
    }
    /// The older half of the units that may move, oldest first: rounded up while a unit runs,
    /// down otherwise (as ringio-copy's `Queue::take_oldest_half`).
    fn give_half(&mut self) -> Vec<Unit> {
        let movable = |u: &Unit| !matches!(u, Unit::Dir { movable: false, .. });
        let count = self.queue.iter().filter(|u| movable(u)).count();
        let mut want = (count + usize::from(self.busy)) / 2;
        let mut given = Vec::with_capacity(want);
        let mut kept = VecDeque::with_capacity(self.queue.len() - want);
        for unit in self.queue.drain(..) {
            if want > 0 && movable(&unit) {
                want -= 1;
                given.push(unit);
            } else {
                kept.push_back(unit);
            }
        }
        self.queue = kept;
        given
    }
    fn accept(&mut self, work: Vec<Unit>) {
        self.queue.extend(work);
    }
}

/// What running one unit did.
#[derive(Debug, Default)]
struct Ran {
    dirs: u64,
    /// Names copied here (names sent to their owner rank are copied there).
    files: u64,
}

/// Runs `unit` on rank `me` of `ranks`, as a ringio-copy worker does: units it makes go on
/// `pool`, names of inodes another rank owns go out through `rank`.
fn run_unit(
    tree: &dyn Tree,
    unit: Unit,
    me: RankId,
    ranks: u32,
    pool: &mut Pool,
    rank: &mut Rank<Unit>,
) -> Ran {
    let mut ran = Ran::default();
    let copy = |names: &[Option<Link>], ran: &mut Ran, rank: &mut Rank<Unit>| {
        for name in names {
            match *name {
                Some(link) if tree.owner(link, ranks) != me => rank.push(
                    tree.owner(link, ranks),
                    Unit::Files {
                        count: 0,
                        linked: vec![link],
                    },
                ),
                _ => ran.files += 1,
            }
        }
    };
    match unit {
        Unit::Dir { id, .. } => {
            ran.dirs += 1;
            let listing = tree.list(id);
            let full = listing.files.len() / BATCH * BATCH;
            for batch in listing.files[..full].chunks(BATCH) {
                if pool.queue.len() < HUNGRY {
                    let linked: Vec<Link> = batch.iter().flatten().copied().collect();
                    pool.queue.push_back(Unit::Files {
                        count: (batch.len() - linked.len()) as u32,
                        linked,
                    });
                } else {
                    copy(batch, &mut ran, rank);
                }
            }
            for sub in listing.subdirs {
                pool.queue.push_back(Unit::Dir {
                    id: sub,
                    movable: true,
                });
            }
            copy(&listing.files[full..], &mut ran, rank);
        }
        Unit::Files { count, linked } => {
            ran.files += u64::from(count);
            let names: Vec<Option<Link>> = linked.into_iter().map(Some).collect();
            copy(&names, &mut ran, rank);
        }
    }
    ran
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Rank finished its running unit.
    Finished(RankId),
    /// A backoff expired.
    Wake(RankId),
    /// Message number `.1` (in the slab) arrives.
    Deliver(RankId, usize),
}

pub(crate) fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

struct World {
    cfg: SimConfig,
    tree: SyntheticTree,
    now: u64,
    seq: u64,
    events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    slab: Vec<Option<(RankId, Msg<Unit>)>>,
    free: Vec<usize>,
    ranks: Vec<Rank<Unit>>,
    pools: Vec<Pool>,
    wake_at: Vec<Option<u64>>,
    idle_since: Vec<Option<u64>>,
    idle_total: u64,
    mds_free_at: f64,
    rng: u64,
    dirs: u64,
    files: u64,
    last_work: u64,
    detected: Option<u64>,
    in_barrier: u32,
}

impl World {
    fn schedule(&mut self, at: u64, event: Event) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, event)));
    }

    fn delay(&mut self) -> u64 {
        self.rng = mix(self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15));
        let span = self.cfg.latency_max_ns - self.cfg.latency_min_ns + 1;
        self.cfg.latency_min_ns + self.rng % span
    }

    /// Time for `ops` metadata operations issued now by one rank.
    fn metadata_time(&mut self, ops: u64) -> u64 {
        let now = self.now as f64;
        let client = ops as f64 * 1e9 / self.cfg.client_ops;
        self.mds_free_at = self.mds_free_at.max(now) + ops as f64 * 1e9 / self.cfg.mds_ops;
        ((now + client).max(self.mds_free_at) - now).ceil() as u64
    }

    /// After anything happened at rank `r`: start work, let the protocol act, send.
    fn settle(&mut self, r: usize) {
        if !self.pools[r].busy {
            if let Some(unit) = self.pools[r].queue.pop_back() {
                // The unit's effects (units queued, names sent) happen as it starts, as a
                // worker queues and sends while it reads; its metadata operations take the
                // time.
                let ran = run_unit(
                    &self.tree,
                    unit,
                    r as RankId,
                    self.cfg.ranks.max(1),
                    &mut self.pools[r],
                    &mut self.ranks[r],
                );
                self.dirs += ran.dirs;
                self.files += ran.files;
                let ops = ran.dirs * u64::from(self.cfg.ops_per_dir)
                    + ran.files * u64::from(self.cfg.ops_per_file);
                let took = self.metadata_time(ops);
                self.pools[r].busy = true;
                self.schedule(self.now + took, Event::Finished(r as RankId));
            }
        }
        let idle = self.pools[r].is_idle();
        match (idle, self.idle_since[r]) {
            (true, None) => self.idle_since[r] = Some(self.now),
            (false, Some(since)) => {
                self.idle_total += self.now - since;
                self.idle_since[r] = None;
            }
            _ => {}
        }
        let was_working = self.ranks[r].phase() == Phase::Working;
        self.ranks[r].poll(self.now, &mut self.pools[r]);
        self.flush(r);
        if r == 0 && was_working && self.ranks[0].phase() != Phase::Working {
            self.detected = Some(self.now);
        }
        if let Some(at) = self.ranks[r].retry_at() {
            if at > self.now && self.wake_at[r].is_none_or(|w| w > at) && idle {
                self.wake_at[r] = Some(at);
                self.schedule(at, Event::Wake(r as RankId));
            }
        }
        if self.ranks[r].wants_barrier() {
            self.ranks[r].barrier_posted();
            self.in_barrier += 1;
        }
    }

    fn flush(&mut self, r: usize) {
        for (to, msg) in self.ranks[r].take_outbox() {
            let slot = match self.free.pop() {
                Some(i) => {
                    self.slab[i] = Some((r as RankId, msg));
                    i
                }
                None => {
                    self.slab.push(Some((r as RankId, msg)));
                    self.slab.len() - 1
                }
            };
            let at = self.now + self.delay();
            self.schedule(at, Event::Deliver(to, slot));
        }
    }
}

/// Runs the simulation to the end of the final barrier.
pub fn simulate(cfg: &SimConfig) -> SimReport {
    let n = cfg.ranks.max(1);
    let tree = SyntheticTree::of(cfg);
    let root = tree.root();
    let mut world = World {
        cfg: cfg.clone(),
        tree,
        now: 0,
        seq: 0,
        events: BinaryHeap::new(),
        slab: Vec::new(),
        free: Vec::new(),
        ranks: (0..n).map(|i| Rank::new(i, n, cfg.seed)).collect(),
        pools: (0..n).map(|_| Pool::default()).collect(),
        wake_at: vec![None; n as usize],
        idle_since: vec![None; n as usize],
        idle_total: 0,
        mds_free_at: 0.0,
        rng: cfg.seed,
        dirs: 0,
        files: 0,
        last_work: 0,
        detected: None,
        in_barrier: 0,
    };
    world.pools[0].queue.push_back(Unit::Dir {
        id: root,
        movable: false,
    });
    for r in 0..n as usize {
        world.settle(r);
    }
    while let Some(Reverse((at, _, event))) = world.events.pop() {
        world.now = at;
        let r = match event {
            Event::Finished(r) => {
                let r = r as usize;
                world.pools[r].busy = false;
                world.last_work = world.now;
                r
            }
            Event::Wake(r) => {
                world.wake_at[r as usize] = None;
                r as usize
            }
            Event::Deliver(to, slot) => {
                let (from, msg) = world.slab[slot].take().expect("a message");
                world.free.push(slot);
                let to = to as usize;
                let was_working = world.ranks[to].phase() == Phase::Working;
                world.ranks[to].on_message(world.now, from, msg, &mut world.pools[to]);
                if to == 0 && was_working && world.ranks[0].phase() != Phase::Working {
                    world.detected = Some(world.now);
                }
                world.flush(to);
                to
            }
        };
        world.settle(r);
        if world.in_barrier == n {
            break;
        }
    }
    assert_eq!(
        world.in_barrier, n,
        "the simulation ended before every rank finished"
    );
    let mean_delay = (cfg.latency_min_ns + cfg.latency_max_ns) / 2;
    let barrier = u64::from(32 - n.leading_zeros()) * mean_delay;
    let finished = world.now + barrier;
    for rank in &mut world.ranks {
        rank.barrier_done();
    }
    let work_done = world.last_work.max(1);
    // Idle time counts only while there was work left somewhere.
    let mut idle = world.idle_total;
    for since in world.idle_since.iter().flatten() {
        idle += work_done.saturating_sub(*since);
    }
    let messages: Vec<u64> = world.ranks.iter().map(|r| r.stats.messages()).collect();
    let total: u64 = messages.iter().sum();
    SimReport {
        ranks: n,
        dirs: world.dirs,
        files: world.files,
        work_done_ns: work_done,
        detect_ns: world.detected.unwrap_or(finished).saturating_sub(work_done),
        shutdown_ns: finished - work_done,
        steals: world.ranks.iter().map(|r| r.stats.steals_sent).sum(),
        steals_ok: world.ranks.iter().map(|r| r.stats.steals_ok).sum(),
        messages_mean: total as f64 / f64::from(n),
        messages_max: messages.iter().copied().max().unwrap_or(0),
        messages,
        idle_fraction: (idle as f64 / (f64::from(n) * work_done as f64)).min(1.0),
        files_per_sec: world.files as f64 / (work_done as f64 / 1e9),
        mds_files_per_sec: cfg.mds_ops / f64::from(cfg.ops_per_file),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(ranks: u32, seed: u64) -> SimConfig {
        SimConfig {
            depth: 3,
            fanout: 4,
            files_per_dir: 50,
            ..SimConfig::lustre(ranks, seed)
        }
    }

    #[test]
    fn every_file_is_copied_once_whatever_the_rank_count() {
        let one = simulate(&small(1, 5));
        assert!(one.files > 1000);
        for ranks in [2, 16, 64] {
            let r = simulate(&small(ranks, 5));
            assert_eq!((r.dirs, r.files), (one.dirs, one.files), "{ranks} ranks");
        }
    }

    #[test]
    fn the_metadata_server_caps_the_rate() {
        let few = simulate(&small(2, 3));
        let many = simulate(&small(256, 3));
        assert!(many.files_per_sec > few.files_per_sec);
        assert!(many.files_per_sec <= many.mds_files_per_sec * 1.01);
        // Two ranks are client-bound: 2,000 creates/s each.
        assert!(few.files_per_sec <= 2.0 * 2000.0 * 1.01);
    }

    #[test]
    fn stealing_spreads_the_work() {
        let cfg = SimConfig {
            depth: 4,
            ..small(16, 5)
        };
        let r = simulate(&cfg);
        assert!(r.dirs > 100, "a tree too small to say: {r:?}");
        assert!(r.steals_ok > 0);
        assert!(r.idle_fraction < 0.5, "{r:?}");
        assert!(r.detect_ns > 0 && r.shutdown_ns >= r.detect_ns);
    }
}
