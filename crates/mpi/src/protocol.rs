//! The distribution and termination protocol of one rank, as a pure state machine: no I/O, no
//! MPI, no clock of its own. The MPI runtime ([`crate::runtime`], feature `mpi`) and the
//! simulator ([`crate::sim`]) drive the same [`Rank`].
//!
//! * **Work stealing.** A rank whose [`WorkPool`] is idle asks a random victim ([`Msg::Steal`]).
//!   The victim answers with half of its oldest (shallowest) work, or nothing
//!   ([`Msg::Give`]). A failed steal backs off exponentially before the next one; one request is
//!   outstanding at a time.
//! * **Termination: Dijkstra–Safra.** Each rank counts the basic messages (messages carrying
//!   work: a non-empty `Give`, a `Push`) it sent minus those it received, and turns black when it
//!   receives one. A token goes round the ring 0 → 1 → … → N−1 → 0, held by each rank until it is
//!   passive, adding the rank's count and blackening if the rank is black. Rank 0 declares
//!   termination when the token comes back white, rank 0 is white and passive, and the total
//!   count is zero: then no rank has work and no work is in flight.
//! * **Shutdown.** Rank 0 broadcasts [`Msg::Done`] down a binary tree. A rank that has it stops
//!   stealing but keeps answering steal requests (with nothing) until its own request, if any,
//!   is answered; only then does it enter the final (non-blocking) barrier, still answering. A
//!   barrier posted while a request is unanswered could hang the rank that waits for the reply.
//! * **Progress: a non-blocking tree reduction.** Rank 0 may start a tally ([`Rank::start_tally`])
//!   while it works: [`Msg::Tally`] goes down the binary tree and each rank answers its parent
//!   with the sum of its subtree's counters ([`WorkPool::counters`]) in [`Msg::TallyUp`]. One
//!   tally is out at a time, none starts after termination, and a rank enters the final barrier
//!   only once its part of a tally under way is answered.

/// A rank's number in the world.
pub type RankId = u32;

/// A message between ranks. `W` is one unit of work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg<W> {
    /// An idle rank asks for work.
    Steal,
    /// The answer to `Steal`: some of the victim's oldest work, or none.
    Give(Vec<W>),
    /// Work sent unasked: a name of a multiply linked inode to the rank that owns the inode.
    Push(W),
    /// Safra's token.
    Token {
        /// Some rank on the way was black (received work since it last passed the token).
        black: bool,
        /// Sum of the counts (basic messages sent − received) of the ranks passed.
        count: i64,
    },
    /// The job is done; stop stealing, answer what comes, then enter the barrier.
    Done,
    /// Rank 0 asks its subtree for counters (progress).
    Tally,
    /// A subtree's counters, summed, for its parent.
    TallyUp(Vec<u64>),
}

impl<W> Msg<W> {
    /// True for messages that carry work (counted by the termination detection).
    pub fn is_basic(&self) -> bool {
        match self {
            Msg::Give(work) => !work.is_empty(),
            Msg::Push(_) => true,
            _ => false,
        }
    }
}

/// The local side of a rank: its queue of work and the workers running it.
pub trait WorkPool<W> {
    /// Nothing queued, nothing running, nothing waiting to be sent.
    fn is_idle(&self) -> bool;
    /// Takes half of the oldest work for a thief (empty when there is nothing to spare). An
    /// idle pool keeps its only unit: two idle ranks stealing from each other would otherwise
    /// pass it back and forth without ever running it.
    fn give_half(&mut self) -> Vec<W>;
    /// Work arrived (stolen or pushed).
    fn accept(&mut self, work: Vec<W>);
    /// This rank's counters for a progress tally (summed over ranks, element by element).
    fn counters(&self) -> Vec<u64> {
        Vec::new()
    }
}

/// Where a rank is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Copying, stealing, passing the token.
    Working,
    /// `Done` arrived; waiting for the answer to its own steal request.
    Draining,
    /// Entered the final barrier; still answering requests until it completes.
    Barrier,
    /// The barrier completed: nothing is in flight anywhere.
    Finished,
}

/// Counters for reports and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Messages sent, by kind.
    pub steals_sent: u64,
    /// Non-empty `Give`s received.
    pub steals_ok: u64,
    /// Empty `Give`s received.
    pub steals_failed: u64,
    /// `Give` answers sent (empty or not).
    pub gives_sent: u64,
    /// `Push` messages sent.
    pub pushes_sent: u64,
    /// Token forwards sent.
    pub tokens_sent: u64,
    /// `Done` forwards sent.
    pub dones_sent: u64,
    /// Tally messages sent (down and up).
    pub tallies_sent: u64,
    /// Work units received by stealing.
    pub work_stolen: u64,
}

impl Stats {
    /// All messages this rank sent.
    pub fn messages(&self) -> u64 {
        self.steals_sent
            + self.gives_sent
            + self.pushes_sent
            + self.tokens_sent
            + self.dones_sent
            + self.tallies_sent
    }
}

/// Backoff after a failed steal: starts here (ns), doubles, and stops growing at the cap.
pub const BACKOFF_MIN_NS: u64 = 20_000;
const BACKOFF_MAX_NS: u64 = 5_000_000;

/// One rank's protocol state. Feed it events; it queues messages in its outbox.
#[derive(Debug)]
pub struct Rank<W> {
    id: RankId,
    size: u32,
    phase: Phase,
    rng: u64,
    /// The victim of the outstanding steal request.
    asked: Option<RankId>,
    /// No steal before this time (ns) after a failed one.
    retry_at: u64,
    backoff: u64,
    /// Safra: basic messages sent − received.
    count: i64,
    black: bool,
    /// Safra: the token, while this rank holds it.
    token: Option<(bool, i64)>,
    /// Rank 0: a token round is under way.
    round_out: bool,
    outbox: Vec<(RankId, Msg<W>)>,
    barrier_entered: bool,
    /// A tally under way here: children yet to answer, and the sum so far.
    tally: Option<(u32, Vec<u64>)>,
    /// Rank 0: the last completed tally.
    tallied: Option<Vec<u64>>,
    /// What happened, for reports.
    pub stats: Stats,
}

impl<W> Rank<W> {
    /// Rank `id` of `size`; `seed` picks its victims.
    pub fn new(id: RankId, size: u32, seed: u64) -> Self {
        assert!(size >= 1 && id < size, "rank {id} out of a world of {size}");
        Rank {
            id,
            size,
            phase: Phase::Working,
            rng: seed ^ (u64::from(id) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            asked: None,
            retry_at: 0,
            backoff: BACKOFF_MIN_NS,
            count: 0,
            black: false,
            token: None,
            round_out: false,
            outbox: Vec::new(),
            barrier_entered: false,
            tally: None,
            tallied: None,
            stats: Stats::default(),
        }
    }

    /// This rank's number.
    pub fn id(&self) -> RankId {
        self.id
    }

    /// Where this rank is.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// True once the rank should enter the final barrier (and has not been told it completed).
    pub fn wants_barrier(&self) -> bool {
        self.phase == Phase::Barrier && !self.barrier_entered
    }

    /// The runtime has posted the barrier.
    pub fn barrier_posted(&mut self) {
        self.barrier_entered = true;
    }

    /// The barrier completed on every rank.
    pub fn barrier_done(&mut self) {
        debug_assert_eq!(self.phase, Phase::Barrier);
        self.phase = Phase::Finished;
    }

    /// Messages to send, in order.
    pub fn take_outbox(&mut self) -> Vec<(RankId, Msg<W>)> {
        std::mem::take(&mut self.outbox)
    }

    /// Rank 0: starts a progress tally, unless one is under way or the work is over. Returns
    /// whether it started.
    pub fn start_tally(&mut self, pool: &mut dyn WorkPool<W>) -> bool {
        if self.id != 0 || self.phase != Phase::Working || self.tally.is_some() {
            return false;
        }
        self.begin_tally(pool);
        true
    }

    /// Rank 0: the counters of the last completed tally, summed over all ranks, once.
    pub fn take_tally(&mut self) -> Option<Vec<u64>> {
        self.tallied.take()
    }

    fn children(&self) -> impl Iterator<Item = RankId> {
        let size = self.size;
        [2 * self.id + 1, 2 * self.id + 2]
            .into_iter()
            .filter(move |&c| c < size)
    }

    fn begin_tally(&mut self, pool: &mut dyn WorkPool<W>) {
        let children: Vec<RankId> = self.children().collect();
        for &child in &children {
            self.stats.tallies_sent += 1;
            self.outbox.push((child, Msg::Tally));
        }
        self.tally = Some((children.len() as u32, pool.counters()));
        self.close_tally();
    }

    fn add_tally(&mut self, values: Vec<u64>) {
        let Some((waiting, sum)) = self.tally.as_mut() else {
            debug_assert!(false, "a tally answer nobody asked for");
            return;
        };
        if sum.len() < values.len() {
            sum.resize(values.len(), 0);
        }
        for (s, v) in sum.iter_mut().zip(values) {
            *s += v;
        }
        *waiting -= 1;
        self.close_tally();
    }

    /// Sends the subtree's sum up (or keeps it, at rank 0) once every child answered.
    fn close_tally(&mut self) {
        if !matches!(self.tally, Some((0, _))) {
            return;
        }
        let (_, sum) = self.tally.take().expect("a tally");
        if self.id == 0 {
            self.tallied = Some(sum);
        } else {
            self.stats.tallies_sent += 1;
            self.outbox.push(((self.id - 1) / 2, Msg::TallyUp(sum)));
        }
    }

    /// Sends work unasked to `to` (a basic message).
    pub fn push(&mut self, to: RankId, work: W) {
        self.count += 1;
        self.stats.pushes_sent += 1;
        self.outbox.push((to, Msg::Push(work)));
    }

    /// A message arrived from `from`.
    pub fn on_message(&mut self, now: u64, from: RankId, msg: Msg<W>, pool: &mut dyn WorkPool<W>) {
        if msg.is_basic() {
            self.count -= 1;
            self.black = true;
        }
        match msg {
            Msg::Steal => {
                let work = if self.phase == Phase::Working {
                    pool.give_half()
                } else {
                    Vec::new()
                };
                if !work.is_empty() {
                    self.count += 1;
                }
                self.stats.gives_sent += 1;
                self.outbox.push((from, Msg::Give(work)));
            }
            Msg::Give(work) => {
                debug_assert_eq!(self.asked, Some(from), "an answer nobody asked for");
                self.asked = None;
                if work.is_empty() {
                    self.stats.steals_failed += 1;
                    self.retry_at = now + self.backoff;
                    self.backoff = (self.backoff * 2).min(BACKOFF_MAX_NS);
                } else {
                    self.stats.steals_ok += 1;
                    self.stats.work_stolen += work.len() as u64;
                    self.backoff = BACKOFF_MIN_NS;
                    pool.accept(work);
                }
            }
            Msg::Push(work) => pool.accept(vec![work]),
            Msg::Token { black, count } => {
                debug_assert!(self.token.is_none(), "two tokens");
                self.token = Some((black, count));
            }
            Msg::Done => self.finish(),
            Msg::Tally => self.begin_tally(pool),
            Msg::TallyUp(values) => self.add_tally(values),
        }
        self.poll(now, pool);
    }

    /// Lets the rank act on its own: steal when idle, pass the token when passive. Call it
    /// whenever the pool may have become idle, and after a backoff expires.
    pub fn poll(&mut self, now: u64, pool: &mut dyn WorkPool<W>) {
        match self.phase {
            Phase::Working => {}
            Phase::Draining => {
                if self.asked.is_none() && self.tally.is_none() {
                    self.phase = Phase::Barrier;
                }
                return;
            }
            Phase::Barrier | Phase::Finished => return,
        }
        if !pool.is_idle() {
            return;
        }
        // Passive: the token moves on.
        if self.id == 0 {
            self.poll_token_root();
            if self.phase != Phase::Working {
                return;
            }
        } else if let Some((black, count)) = self.token.take() {
            self.forward_token(black || self.black, count + self.count);
            self.black = false;
        }
        if self.size > 1 && self.asked.is_none() && now >= self.retry_at {
            let victim = self.pick_victim();
            self.asked = Some(victim);
            self.stats.steals_sent += 1;
            self.outbox.push((victim, Msg::Steal));
        }
    }

    /// When the next steal may go out (ns), if the rank is waiting for a backoff to expire.
    pub fn retry_at(&self) -> Option<u64> {
        (self.phase == Phase::Working && self.asked.is_none() && self.size > 1)
            .then_some(self.retry_at)
    }

    /// Rank 0 while passive: start a round, or judge the one that came back.
    fn poll_token_root(&mut self) {
        if self.size == 1 {
            if self.count == 0 {
                self.finish();
            }
            return;
        }
        if let Some((black, count)) = self.token.take() {
            self.round_out = false;
            if !black && !self.black && count + self.count == 0 {
                self.finish();
                return;
            }
        }
        if !self.round_out {
            self.round_out = true;
            self.black = false;
            self.forward_token(false, 0);
        }
    }

    fn forward_token(&mut self, black: bool, count: i64) {
        let next = (self.id + 1) % self.size;
        self.stats.tokens_sent += 1;
        self.outbox.push((next, Msg::Token { black, count }));
    }

    /// Termination is known here: tell the subtree, then drain.
    fn finish(&mut self) {
        if self.phase != Phase::Working {
            return;
        }
        for child in [2 * self.id + 1, 2 * self.id + 2] {
            if child < self.size {
                self.stats.dones_sent += 1;
                self.outbox.push((child, Msg::Done));
            }
        }
        self.phase = if self.asked.is_none() && self.tally.is_none() {
            Phase::Barrier
        } else {
            Phase::Draining
        };
    }

    /// A random rank other than this one (xorshift64*).
    fn pick_victim(&mut self) -> RankId {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let other = (r % u64::from(self.size - 1)) as RankId;
        if other >= self.id {
            other + 1
        } else {
            other
        }
    }
}

#[cfg(test)]
mod tests;
