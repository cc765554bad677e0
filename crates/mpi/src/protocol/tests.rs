//! The protocol under random schedules: termination is declared exactly once, only after every
//! unit of work ran and no work was in flight, and every rank then reaches the end.

use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;

/// A unit of work that spawns `children` more units when run, pushing `links` of them to other
/// ranks instead of keeping them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Unit {
    depth: u32,
}

#[derive(Default)]
struct Pool {
    queue: VecDeque<Unit>,
    running: Option<Unit>,
    ran: u64,
}

impl WorkPool<Unit> for Pool {
    fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.running.is_none()
    }
    fn give_half(&mut self) -> Vec<Unit> {
        let n = self.queue.len() / 2;
        self.queue.drain(..n).collect()
    }
    fn accept(&mut self, work: Vec<Unit>) {
        self.queue.extend(work);
    }
    fn counters(&self) -> Vec<u64> {
        vec![self.ran, 1]
    }
}

/// Runs a world of `size` ranks under a schedule drawn from `seed`, with `roots` units on rank 0;
/// a unit at depth d spawns `fanout` children while d < `depth`. Returns units run.
fn run_world(size: u32, seed: u64, fanout: u32, depth: u32, roots: u32) -> u64 {
    let mut rng = seed | 1;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n.max(1)
    };
    let mut ranks: Vec<Rank<Unit>> = (0..size).map(|i| Rank::new(i, size, seed)).collect();
    let mut pools: Vec<Pool> = (0..size).map(|_| Pool::default()).collect();
    pools[0].accept((0..roots).map(|_| Unit { depth: 0 }).collect());
    let mut in_flight: Vec<(RankId, RankId, Msg<Unit>)> = Vec::new();
    let mut run = 0u64;
    let expected: u64 = (0..=depth)
        .map(|d| u64::from(roots) * u64::from(fanout).pow(d))
        .sum();
    let mut declared = 0;
    let mut now = 0u64;
    for _ in 0..10_000_000u64 {
        now += 1_000;
        let root_was_working = ranks[0].phase() == Phase::Working;
        // Pick a random event: a rank runs a step, or a message is delivered.
        let pick = next(u64::from(size) + in_flight.len() as u64) as usize;
        if pick < size as usize {
            let r = pick;
            let pool = &mut pools[r];
            if let Some(unit) = pool.running.take() {
                run += 1;
                pool.ran += 1;
                if unit.depth < depth {
                    for c in 0..fanout {
                        let child = Unit {
                            depth: unit.depth + 1,
                        };
                        // Some children go to another rank, as hard-link names do.
                        if size > 1 && c % 3 == 2 {
                            let to = next(u64::from(size)) as RankId;
                            ranks[r].push(to, child);
                        } else {
                            pool.queue.push_back(child);
                        }
                    }
                }
            } else if let Some(unit) = pool.queue.pop_back() {
                pool.running = Some(unit);
            }
            ranks[r].poll(now, pool);
            // Rank 0 asks for progress now and then, as `--progress` does.
            if r == 0 && next(8) == 0 {
                ranks[0].start_tally(&mut pools[0]);
            }
            if let Some(tally) = ranks[0].take_tally() {
                assert!(tally[0] <= run, "a tally counted work not yet run");
                assert_eq!(tally[1], u64::from(size), "a tally missed a rank");
            }
        } else {
            let (from, to, msg) = in_flight.swap_remove(pick - size as usize);
            ranks[to as usize].on_message(now, from, msg, &mut pools[to as usize]);
        }
        for (i, rank) in ranks.iter_mut().enumerate() {
            for (to, msg) in rank.take_outbox() {
                in_flight.push((i as RankId, to, msg));
            }
            if i == 0 && root_was_working && rank.phase() != Phase::Working {
                declared += 1;
                assert_eq!(run, expected, "termination declared with work left");
                assert!(pools.iter().all(|p| p.is_idle()), "a pool still had work");
                assert!(
                    !in_flight.iter().any(|(_, _, m)| m.is_basic()),
                    "work was in flight"
                );
            }
        }
        if ranks
            .iter()
            .all(|r| r.wants_barrier() || r.phase() == Phase::Finished)
        {
            // The barrier completes once every rank entered it, with nothing left in flight.
            assert!(
                in_flight.is_empty(),
                "messages in flight at the barrier: {in_flight:?}"
            );
            for r in &mut ranks {
                r.barrier_posted();
                r.barrier_done();
            }
            break;
        }
    }
    assert_eq!(declared, 1, "termination declared {declared} times");
    assert!(
        ranks.iter().all(|r| r.phase() == Phase::Finished),
        "a rank never finished"
    );
    run
}

#[test]
fn one_rank_terminates_alone() {
    assert_eq!(run_world(1, 7, 3, 3, 1), 40);
}

#[test]
fn empty_world_terminates() {
    run_world(5, 3, 0, 0, 0);
}

#[test]
fn work_spreads_by_stealing() {
    let size = 4;
    let mut ranks: Vec<Rank<Unit>> = (0..size).map(|i| Rank::new(i, size, 1)).collect();
    let mut busy = Pool::default();
    busy.accept((0..8).map(|d| Unit { depth: d }).collect());
    let mut idle = Pool::default();
    ranks[1].poll(0, &mut idle);
    let out = ranks[1].take_outbox();
    let (victim, msg) = out.last().cloned().expect("a steal request");
    assert_eq!(msg, Msg::Steal);
    assert_ne!(victim, 1);
    ranks[victim as usize].on_message(0, 1, Msg::Steal, &mut busy);
    let answer = ranks[victim as usize].take_outbox();
    // Half of the oldest: depths 0..4.
    assert_eq!(
        answer[0],
        (1, Msg::Give((0..4).map(|d| Unit { depth: d }).collect()))
    );
    assert_eq!(busy.queue.len(), 4);
}

#[test]
fn failed_steal_backs_off() {
    let mut rank: Rank<Unit> = Rank::new(1, 3, 9);
    let mut idle = Pool::default();
    rank.poll(0, &mut idle);
    let (victim, _) = rank.take_outbox().pop().expect("a request");
    rank.on_message(10, victim, Msg::Give(Vec::new()), &mut idle);
    assert!(rank.take_outbox().iter().all(|(_, m)| *m != Msg::Steal));
    let retry = rank.retry_at().expect("waiting");
    assert!(retry > 10);
    rank.poll(retry, &mut idle);
    assert!(rank.take_outbox().iter().any(|(_, m)| *m == Msg::Steal));
}

#[test]
fn many_seeds_four_ranks() {
    for seed in 1..200 {
        run_world(4, seed, 3, 4, 1);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn termination_is_detected_once_after_all_work(
        size in 1u32..12,
        seed in any::<u64>(),
        fanout in 0u32..4,
        depth in 0u32..5,
        roots in 0u32..4,
    ) {
        run_world(size, seed, fanout, depth, roots);
    }
}
