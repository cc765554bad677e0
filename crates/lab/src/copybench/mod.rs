//! `ringio bench copy`: ringio's engines and the peer copiers, side by side on one tree, every
//! copy verified.
//!
//! This VM-class machine has traps that swamp timings (see docs/BENCHMARKS.md), so outside the
//! timed region each run: moves the previous destination into a trash directory that is emptied
//! only after the last workload (deleting would bill ext4's recently-deleted inode scan to the
//! copies of the next six minutes), writes back what earlier runs left dirty (their gigabytes
//! would otherwise be flushed in the middle of a later run), drops the caches (cold) or re-reads
//! the source (warm: idle page cache is paged out within a minute here), and touches fresh
//! memory (free pages handed back to the host are slow to fault in again). Tools run
//! round-robin, so drift hits all of them alike.
//!
//! The pieces are public for `bench sync` ([`crate::syncbench`]): the workloads, the trash,
//! [`settle`], [`run_tool`] and [`judge`], the results and the table's cells.

mod hygiene;
mod report;
mod results;
mod suite;
mod timed;
mod tools;

use std::path::Path;

use crate::error::LabError;
use hygiene::{empty_trash, stamp_deletes, trash_entries};
pub use hygiene::{recent_deletes, settle, Trash, COLD_NOT_ROOT};
pub use report::{bars, rss_cell, table, timing_cells, verdict};
pub use results::{Run, Stats, ToolRuns};
pub use suite::{
    prepare, reference_copy, standard_workloads, tree_size, TreeSize, Workload, WorkloadSource,
};
pub use timed::{judge, run_tool};
pub use tools::{command_tool, find_program, resolve_tool, Tool, KNOWN_TOOLS};

/// How the benchmark runs.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Timed runs per tool.
    pub runs: usize,
    /// Untimed runs per tool first.
    pub warmup: usize,
    /// Drop caches before every run (root), or evict the source's files (otherwise).
    pub cold: bool,
}

impl ToolRuns {
    /// No runs yet; skipped (with the reason) when the tool is not installed.
    pub fn start(tool: &Tool) -> ToolRuns {
        ToolRuns {
            tool: tool.name.clone(),
            skipped: tool
                .program
                .is_none()
                .then(|| format!("not installed ({})", tool.install)),
            reference: tool.reference,
            runs: Vec::new(),
        }
    }
}

/// The order of `tools` in round `round`: round-robin, each round starts with the next tool,
/// so drift hits all of them alike.
pub fn round_order(tools: usize, round: usize) -> impl Iterator<Item = usize> {
    (0..tools).map(move |i| (i + round) % tools)
}

/// Runs every tool on `src`, copying into `work/dst` (trash in `work/trash`).
/// `progress(tool, run, runs)` hears each copy before it starts; `note` hears what the harness
/// does on its own (cold-cache method).
pub fn bench(
    src: &Path,
    work: &Path,
    tools: &[Tool],
    opts: &BenchOptions,
    progress: &mut dyn FnMut(&str, usize, usize),
    note: &mut dyn FnMut(&str),
) -> Result<Vec<ToolRuns>, LabError> {
    let size = tree_size(src)?;
    let mut trash = Trash::open(work)?;
    let dst = work.join("dst");
    let mut results: Vec<ToolRuns> = tools.iter().map(ToolRuns::start).collect();
    if opts.cold && !rustix::process::geteuid().is_root() {
        note(COLD_NOT_ROOT);
    }
    let total = opts.warmup + opts.runs;
    for round in 0..total {
        let timed = round >= opts.warmup;
        for i in round_order(tools.len(), round) {
            let tool = &tools[i];
            let Some(program) = &tool.program else {
                continue;
            };
            progress(&tool.name, round, total);
            trash.make_room(work, 2 * size.bytes + (2 << 30), note)?;
            trash.put(&dst, size.files + size.dirs)?;
            settle(&[src], opts.cold, size.bytes)?;
            let done = run_tool(tool, program, src, &dst)?;
            if timed {
                results[i].runs.push(judge(tool, &done, src, &dst));
            }
        }
    }
    trash.put(&dst, size.files + size.dirs)?;
    trash.close(note)?;
    Ok(results)
}

/// Empties what [`bench`] left in `work` once no timed run follows, and says so when the
/// next few minutes of creates on that filesystem will be slower for it (and leaves the stamp
/// [`recent_deletes`] reads).
pub fn finish(work: &Path, note: &mut dyn FnMut(&str)) -> Result<(), LabError> {
    let trash = work.join("trash");
    let entries = trash_entries(&trash);
    empty_trash(&trash, 0, false, note)?;
    if entries > 0 {
        stamp_deletes(work)?;
        note(
            "deleted the copies: on ext4 without a journal, files created on this filesystem \
             in the next 6 minutes are slower (its recently-deleted scan); wait before timing \
             anything else there",
        );
    }
    Ok(())
}
