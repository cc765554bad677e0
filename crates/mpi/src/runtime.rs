//! The MPI side of `ringio cp --mpi`: one [`MpiExchange`] per rank drives the protocol
//! ([`crate::protocol::Rank`]) over MPI point-to-point messages while ringio-copy's workers
//! copy. All MPI calls are made from the thread that initialized MPI (`MPI_THREAD_FUNNELED`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mpi::collective::SystemOperation;
use mpi::request::{Request, StaticScope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use ringio_copy::ranks::{Exchange, Port, WorkItem};
use ringio_copy::Progress;

use crate::protocol::{Phase, Rank, Stats, WorkPool};
use crate::sim::ROUND_NS;
use crate::wire;

/// The tag of every protocol message.
const TAG: i32 = 19;

/// The tag of a lockstep round's bundle of messages from one rank to another.
const ROUND_TAG: i32 = 20;

/// How often rank 0 tallies the job's counters under `--progress`.
pub const TALLY_EVERY: Duration = Duration::from_millis(250);

/// MPI, initialized, with the world communicator.
pub struct Mpi {
    // Finalizes MPI when dropped.
    _universe: mpi::environment::Universe,
    world: SimpleCommunicator,
}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mpi")
            .field("rank", &self.world.rank())
            .field("size", &self.world.size())
            .finish()
    }
}

impl Mpi {
    /// Initializes MPI (`MPI_THREAD_FUNNELED`: only this thread calls MPI).
    pub fn init() -> Result<Mpi, String> {
        let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Funneled)
            .ok_or_else(|| "MPI was already initialized".to_string())?;
        let world = universe.world();
        Ok(Mpi {
            _universe: universe,
            world,
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.world.rank() as u32
    }

    /// Ranks in the job.
    pub fn size(&self) -> u32 {
        self.world.size() as u32
    }

    /// Element-wise sums over all ranks.
    pub fn sum(&self, values: &[u64]) -> Vec<u64> {
        let mut out = vec![0u64; values.len()];
        self.world
            .all_reduce_into(values, &mut out[..], SystemOperation::sum());
        out
    }

    /// The exchange for one copy. `progress` (rank 0, `--progress`): where the job's totals
    /// land, from a tally every [`TALLY_EVERY`].
    pub fn exchange<'m>(&'m self, seed: u64, progress: Option<&'m Progress>) -> MpiExchange<'m> {
        MpiExchange {
            world: &self.world,
            seed,
            progress,
            lockstep: false,
            stats: Stats::default(),
        }
    }

    /// Every rank's `value`, by rank.
    pub fn gather(&self, value: u64) -> Vec<u64> {
        let mut mine = vec![0u64; self.size() as usize];
        mine[self.rank() as usize] = value;
        self.sum(&mine)
    }
}

/// The transport between ranks for [`ringio_copy::ranks::copy_ranked`].
pub struct MpiExchange<'m> {
    world: &'m SimpleCommunicator,
    seed: u64,
    progress: Option<&'m Progress>,
    lockstep: bool,
    /// Protocol counters, summed over the waves of the copy.
    pub stats: Stats,
}

impl MpiExchange<'_> {
    /// Runs the copy in lockstep rounds (`--mpi-lockstep`), as [`crate::sim::lockstep`] runs
    /// virtual ranks: in each round every rank runs its newest task to the end, lets the
    /// protocol act and sends; every message is delivered, in the order of its sender's rank,
    /// before the next round, and the protocol's clock advances [`crate::sim::ROUND_NS`] per round. With
    /// the same tree and seed, a run's messages depend on nothing else: the check of the
    /// simulator against real ranks. Slow (a round costs a message to every rank): not for
    /// real copies.
    pub fn with_lockstep(mut self) -> Self {
        self.lockstep = true;
        self
    }

    fn run_lockstep(&mut self, port: &Port<'_, '_>) {
        let world = self.world;
        let (me, size) = (world.rank() as u32, world.size() as u32);
        let mut rank: Rank<WorkItem> = Rank::new(me, size, self.seed);
        let mut pool = PortPool(port);
        let mut now = 0u64;
        loop {
            port.step();
            for (to, item) in port.take_outbox() {
                rank.push(to, item);
            }
            rank.poll(now, &mut pool);
            let mut bundles = vec![Vec::new(); size as usize];
            for (to, msg) in rank.take_outbox() {
                wire::bundle(&mut bundles[to as usize], &msg);
            }
            for (from, bundle) in swap_bundles(world, bundles).into_iter().enumerate() {
                for msg in wire::unbundle(&bundle) {
                    let msg = msg
                        .unwrap_or_else(|| panic!("rank {me}: malformed message from rank {from}"));
                    rank.on_message(now, from as u32, msg, &mut pool);
                }
            }
            if rank.wants_barrier() {
                rank.barrier_posted();
            }
            // The barrier completes in the round in which the last rank enters it; by then no
            // message is in flight (each was delivered in the round it was sent).
            let entered = u64::from(rank.phase() == Phase::Barrier);
            let mut everyone = 0u64;
            world.all_reduce_into(&entered, &mut everyone, SystemOperation::min());
            if everyone == 1 {
                rank.barrier_done();
                break;
            }
            now += ROUND_NS;
        }
        add_stats(&mut self.stats, &rank.stats);
    }
}

/// Sends `bundles[r]` to every other rank `r` and returns what each rank sent here, by rank.
fn swap_bundles(world: &SimpleCommunicator, bundles: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let me = world.rank() as usize;
    let mut received: Vec<Vec<u8>> = vec![Vec::new(); bundles.len()];
    mpi::request::scope(|scope| {
        let sends: Vec<_> = bundles
            .iter()
            .enumerate()
            .filter(|&(to, _)| to != me)
            .map(|(to, bundle)| {
                world.process_at_rank(to as i32).immediate_send_with_tag(
                    scope,
                    &bundle[..],
                    ROUND_TAG,
                )
            })
            .collect();
        for (from, slot) in received.iter_mut().enumerate() {
            if from != me {
                *slot = world
                    .process_at_rank(from as i32)
                    .receive_vec_with_tag::<u8>(ROUND_TAG)
                    .0;
            }
        }
        for send in sends {
            send.wait();
        }
    });
    received[me] = bundles.into_iter().nth(me).unwrap_or_default();
    received
}

impl std::fmt::Debug for MpiExchange<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiExchange")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// The port as the protocol sees it.
struct PortPool<'p, 'q, 'a>(&'p Port<'q, 'a>);

impl WorkPool<WorkItem> for PortPool<'_, '_, '_> {
    fn is_idle(&self) -> bool {
        self.0.is_idle()
    }
    fn give_half(&mut self) -> Vec<WorkItem> {
        self.0.give_half()
    }
    fn accept(&mut self, work: Vec<WorkItem>) {
        self.0.accept(work)
    }
    fn counters(&self) -> Vec<u64> {
        let p = self.0.progress();
        [&p.files, &p.bytes, &p.dirs]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }
}

/// A send in flight and the buffer it reads.
struct Sending {
    request: Request<'static, [u8], StaticScope>,
    buffer: *mut [u8],
}

impl Sending {
    fn start(world: &SimpleCommunicator, to: u32, bytes: Vec<u8>) -> Sending {
        let buffer: &'static mut [u8] = Box::leak(bytes.into_boxed_slice());
        let raw: *mut [u8] = buffer;
        // SAFETY: `raw` comes from the box just leaked; nothing writes to it while the
        // shared borrow handed to MPI lives, and it is freed only after the send completes.
        let shared: &'static [u8] = unsafe { &*raw };
        let request =
            world
                .process_at_rank(to as i32)
                .immediate_send_with_tag(StaticScope, shared, TAG);
        Sending {
            request,
            buffer: raw,
        }
    }

    /// Completes the send if it is done, freeing its buffer; otherwise gives it back.
    fn test(self) -> Option<Sending> {
        let Sending { request, buffer } = self;
        match request.test() {
            Ok(_) => {
                // SAFETY: the send completed, so MPI no longer reads the buffer, which came
                // from Box::leak in `start` and is freed exactly once, here.
                drop(unsafe { Box::from_raw(buffer) });
                None
            }
            Err(request) => Some(Sending { request, buffer }),
        }
    }
}

impl Exchange for MpiExchange<'_> {
    fn lockstep(&self) -> bool {
        self.lockstep
    }

    fn run(&mut self, port: &Port<'_, '_>) {
        if self.lockstep {
            return self.run_lockstep(port);
        }
        let world = self.world;
        let me = world.rank() as u32;
        let started = Instant::now();
        let mut rank: Rank<WorkItem> = Rank::new(me, world.size() as u32, self.seed);
        let mut pool = PortPool(port);
        let mut sends: Vec<Sending> = Vec::new();
        let mut barrier: Option<Request<'static, ()>> = None;
        let mut nap = Duration::from_micros(20);
        let mut next_tally = started;
        loop {
            let now = started.elapsed().as_nanos() as u64;
            let mut busy = false;
            if let Some(total) = self.progress {
                if Instant::now() >= next_tally && rank.start_tally(&mut pool) {
                    next_tally = Instant::now() + TALLY_EVERY;
                }
                if let Some(sums) = rank.take_tally() {
                    for (counter, sum) in [&total.files, &total.bytes, &total.dirs].iter().zip(sums)
                    {
                        counter.store(sum, Ordering::Relaxed);
                    }
                }
            }
            for (to, item) in port.take_outbox() {
                rank.push(to, item);
                busy = true;
            }
            while let Some(probed) = world.any_process().immediate_matched_probe_with_tag(TAG) {
                let (bytes, status) = probed.matched_receive_vec::<u8>();
                let from = status.source_rank() as u32;
                match wire::decode(&bytes) {
                    Some(msg) => rank.on_message(now, from, msg, &mut pool),
                    None => panic!("rank {me}: malformed message from rank {from}"),
                }
                busy = true;
            }
            rank.poll(now, &mut pool);
            for (to, msg) in rank.take_outbox() {
                sends.push(Sending::start(world, to, wire::encode(&msg)));
                busy = true;
            }
            sends = sends.into_iter().filter_map(Sending::test).collect();
            if rank.wants_barrier() {
                barrier = Some(world.immediate_barrier());
                rank.barrier_posted();
            }
            if let Some(request) = barrier.take() {
                match request.test() {
                    Ok(_) => rank.barrier_done(),
                    Err(request) => barrier = Some(request),
                }
            }
            if rank.phase() == Phase::Finished {
                break;
            }
            // Poll fast while things happen, then back off to a millisecond: ranks often
            // outnumber cores, and the workers need them.
            if busy {
                nap = Duration::from_micros(20);
            } else {
                std::thread::sleep(nap);
                nap = (nap * 2).min(Duration::from_millis(1));
            }
        }
        // Everything sent was received before the barrier completed; these finish at once.
        while !sends.is_empty() {
            sends = sends.into_iter().filter_map(Sending::test).collect();
        }
        add_stats(&mut self.stats, &rank.stats);
    }

    fn barrier(&mut self) {
        self.world.barrier();
    }

    fn max(&mut self, value: u64) -> u64 {
        let mut out = 0u64;
        self.world
            .all_reduce_into(&value, &mut out, SystemOperation::max());
        out
    }
}

fn add_stats(total: &mut Stats, wave: &Stats) {
    total.steals_sent += wave.steals_sent;
    total.steals_ok += wave.steals_ok;
    total.steals_failed += wave.steals_failed;
    total.gives_sent += wave.gives_sent;
    total.pushes_sent += wave.pushes_sent;
    total.tokens_sent += wave.tokens_sent;
    total.dones_sent += wave.dones_sent;
    total.tallies_sent += wave.tallies_sent;
    total.work_stolen += wave.work_stolen;
}
