//! Virtual ranks in lockstep rounds, as `ringio cp --mpi --mpi-lockstep SEED` runs real ones
//! (ringio-mpi's runtime, `MpiExchange::with_lockstep`). In each round every rank runs its
//! newest unit to the end, lets the protocol act, and sends what it has; every message is
//! delivered, in the order of its sender's rank, before the next round; the protocol's clock
//! advances [`ROUND_NS`] per round. Nothing is left to timing, so on the same tree with the same
//! seed the virtual ranks and the real ones should send the same messages.

use super::{run_unit, Pool, Tree, Unit, ROUND_NS};
use crate::protocol::{Msg, Phase, Rank, RankId, Stats};

/// What a lockstep run did.
#[derive(Debug, Clone, Default)]
pub struct LockstepReport {
    /// Rounds until every rank entered the final barrier.
    pub rounds: u64,
    /// Directories (the root included) and names copied, over all ranks.
    pub dirs: u64,
    /// See `dirs`.
    pub files: u64,
    /// Each rank's protocol counters.
    pub stats: Vec<Stats>,
}

/// Copies `tree` with `ranks` virtual ranks in lockstep rounds; `seed` is the job's seed (the
/// ranks' choice of victims).
pub fn lockstep(tree: &dyn Tree, ranks: u32, seed: u64) -> LockstepReport {
    let n = ranks.max(1);
    let mut protocol: Vec<Rank<Unit>> = (0..n).map(|i| Rank::new(i, n, seed)).collect();
    let mut pools: Vec<Pool> = (0..n).map(|_| Pool::default()).collect();
    pools[0].queue.push_back(Unit::Dir {
        id: tree.root(),
        movable: false,
    });
    let mut report = LockstepReport::default();
    let mut now = 0u64;
    loop {
        report.rounds += 1;
        for (r, (rank, pool)) in protocol.iter_mut().zip(&mut pools).enumerate() {
            if let Some(unit) = pool.queue.pop_back() {
                let ran = run_unit(tree, unit, r as RankId, n, pool, rank);
                report.dirs += ran.dirs;
                report.files += ran.files;
            }
            rank.poll(now, pool);
        }
        let mut mail: Vec<Vec<(RankId, Msg<Unit>)>> = (0..n).map(|_| Vec::new()).collect();
        for (r, rank) in protocol.iter_mut().enumerate() {
            for (to, msg) in rank.take_outbox() {
                mail[to as usize].push((r as RankId, msg));
            }
        }
        for (to, inbox) in mail.into_iter().enumerate() {
            for (from, msg) in inbox {
                protocol[to].on_message(now, from, msg, &mut pools[to]);
            }
        }
        for rank in &mut protocol {
            if rank.wants_barrier() {
                rank.barrier_posted();
            }
        }
        if protocol.iter().all(|r| r.phase() == Phase::Barrier) {
            for rank in &mut protocol {
                rank.barrier_done();
            }
            break;
        }
        now += ROUND_NS;
    }
    report.stats = protocol.iter().map(|r| r.stats).collect();
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{SimConfig, SyntheticTree};

    fn tree(linked: f64) -> SyntheticTree {
        SyntheticTree::of(&SimConfig {
            depth: 3,
            fanout: 4,
            files_per_dir: 300,
            linked,
            ..SimConfig::lustre(4, 9)
        })
    }

    #[test]
    fn every_name_is_copied_once_whatever_the_rank_count() {
        let one = lockstep(&tree(0.01), 1, 3);
        assert!(one.files > 10_000, "{one:?}");
        assert_eq!(one.stats[0].messages(), 0);
        for ranks in [2, 4, 16] {
            let r = lockstep(&tree(0.01), ranks, 3);
            assert_eq!((r.dirs, r.files), (one.dirs, one.files), "{ranks} ranks");
            assert!(r.stats.iter().map(|s| s.pushes_sent).sum::<u64>() > 0);
        }
    }

    #[test]
    fn more_ranks_take_fewer_rounds() {
        let one = lockstep(&tree(0.0), 1, 3);
        let two = lockstep(&tree(0.0), 2, 3);
        assert!(
            two.rounds < one.rounds,
            "{} then {}",
            one.rounds,
            two.rounds
        );
        assert!(two.stats.iter().map(|s| s.steals_ok).sum::<u64>() > 0);
    }

    #[test]
    fn a_run_is_a_function_of_tree_and_seed() {
        let a = lockstep(&tree(0.01), 4, 7);
        let b = lockstep(&tree(0.01), 4, 7);
        assert_eq!(a.stats, b.stats);
        assert_eq!(a.rounds, b.rounds);
    }
}
