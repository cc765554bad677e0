//! [`copy_ranked`]: this rank's part of one copy spread over the ranks of a job, wave by wave.
//! Its workers run on the usual engine while an [`Exchange`] (the transport) moves work
//! between ranks through a [`Port`]; then the metadata of the directories this rank created is
//! applied, deepest level first, one barrier per level.

use std::sync::Arc;

use super::deferred_dirs;
use super::port::{Exchange, Port};
use super::split::Owners;
use super::Ranks;
use crate::ctx::Ctx;
use crate::node::DirNode;
use crate::plan::{CopyPlan, CopyRoot};
use crate::progress::{Progress, Reporter, Summary};
use crate::queue::Queue;
use crate::run::{self, Setup};
use crate::walk;

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
    let ranks = Ranks::new(rank, Owners::new(setup.plan, size));
    let ctx = setup.ctx(progress, reporter, Some(ranks));
    // Every rank runs every wave: each ends in collective steps.
    for wave in run::waves(&setup.plan.roots) {
        run_wave(&ctx, &setup, &wave, exchange);
    }
    if setup.plan.fsync && !progress.cancelled() {
        run::sync_destinations(&ctx);
    }
    setup.summary(&ctx)
}

fn run_wave<'a>(
    ctx: &'a Ctx<'a>,
    setup: &'a Setup<'a>,
    wave: &[&CopyRoot],
    exchange: &mut dyn Exchange,
) {
    let plan = ctx.plan;
    let ranks = ctx.ranks.as_ref().expect("a ranked run");
    // Lockstep: one task at a time, run by the exchange; the queue sizes its batches for one.
    let lockstep = exchange.lockstep();
    let workers = if lockstep { 0 } else { setup.threads() };
    let queue = Queue::new(workers.max(1));
    queue.hold_open(true);
    let mut roots: Vec<Option<Arc<DirNode<'a>>>> = plan.roots.iter().map(|_| None).collect();
    let index = |root: &CopyRoot| plan.roots.iter().position(|r| std::ptr::eq(r, root));
    if ranks.rank == 0 {
        for root in wave {
            match run::start_root(ctx, &queue, root) {
                Ok(node) => roots[index(root).expect("a root of the plan")] = node,
                Err(e) => ctx.fail(e),
            }
        }
    }
    // The others open what rank 0 created.
    exchange.barrier();
    if ranks.rank != 0 {
        for root in wave {
            roots[index(root).expect("a root of the plan")] = run::open_root(ctx, root);
        }
    }
    let stepper =
        lockstep.then(|| run::new_mover(plan, &ctx.tuning, setup.use_uring, ctx.reporter));
    let port = Port::new(ctx, &queue, &roots, stepper);
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
    deferred_dirs::finish(ctx, exchange);
}
