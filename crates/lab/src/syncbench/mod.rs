//! `ringio bench sync`: ringio's `sync`, `cp -a --resume` and the peer syncers (rsync,
//! rclone) side by side, in five scenarios (a first sync, and re-syncs after no change, 1% of
//! the files rewritten, 10% added and deleted, a directory renamed), every result verified.
//!
//! It runs on `bench copy`'s harness ([`crate::copybench`]): the same workloads, trash,
//! cold or warm settling, timed runs and verdicts. What is its own: the changed sources
//! ([`scenario`]), made once from each workload, and the destination ([`mirror`]), which
//! before each timed re-sync is a faithful mirror of the unchanged tree: a reference copy made
//! once, then repaired between runs (what differs from the tree is moved to the trash and
//! copied again), so every tool starts from the same state without a full copy per run. What
//! a sync would delete or replace is hard-linked into the trash first, so the deletes of one
//! run do not slow the creates of the next (ext4's recently-deleted scan).

mod mirror;
mod scenario;
mod tools;

use std::collections::BTreeMap;
use std::path::Path;

use ringio_copy::verify::VerifyOptions;
use serde::{Deserialize, Serialize};

use crate::copybench::{
    judge, round_order, run_tool, settle, timing_cells, tree_size, Tool, ToolRuns, Trash,
    COLD_NOT_ROOT,
};
use crate::error::LabError;
use mirror::{classify, differences, Dest};
pub use scenario::{prepare_changed, Changed, Scenario};
pub use tools::{resolve_sync_tool, sync_archive, DEFAULT_SYNC_TOOLS, SYNC_TOOLS};

/// How the benchmark runs.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// Timed runs per tool and scenario.
    pub runs: usize,
    /// Untimed runs per tool and scenario first.
    pub warmup: usize,
    /// Drop caches before every run (root), or evict the trees' files (otherwise).
    pub cold: bool,
    /// The scenarios, in order.
    pub scenarios: Vec<Scenario>,
}

/// One scenario's runs on one workload.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioRuns {
    /// Its name (`first`, `nochange`, `changed1`, `addel10`, `rename`).
    pub scenario: String,
    /// What it measures.
    pub description: String,
    /// What was changed in the source (the scenarios that change it).
    pub change: Option<String>,
    /// Why the scenario did not run on this tree.
    pub skipped: Option<String>,
    /// Each tool's runs.
    pub results: Vec<ToolRuns>,
    /// Each verified tool's median over rsync's, when rsync verified too.
    pub ratio_to_rsync: BTreeMap<String, f64>,
}

/// Runs every scenario of `opts` with every tool on the workload tree `base`. Changed sources
/// are made (once) under `changed`; destination and trash live in `work`.
/// `progress(scenario, tool, round, rounds)` hears each run before it starts; `note` hears
/// what the harness does on its own.
pub fn bench_sync(
    base: &Path,
    work: &Path,
    changed: &Path,
    tools: &[Tool],
    opts: &SyncOptions,
    progress: &mut dyn FnMut(&str, &str, usize, usize),
    note: &mut dyn FnMut(&str),
) -> Result<Vec<ScenarioRuns>, LabError> {
    let size = tree_size(base)?;
    let mut trash = Trash::open(work)?;
    if opts.cold && !rustix::process::geteuid().is_root() {
        note(COLD_NOT_ROOT);
    }
    let mut dest = Dest::new(base, work.join("dst"), &mut trash)?;
    let mut out = Vec::new();
    for &scenario in &opts.scenarios {
        let mut entry = ScenarioRuns {
            scenario: scenario.name().to_string(),
            description: scenario.description().to_string(),
            change: None,
            skipped: None,
            results: tools.iter().map(ToolRuns::start).collect(),
            ratio_to_rsync: BTreeMap::new(),
        };
        // The source, and the destination's entries a correct sync removes or replaces.
        let (src, doomed) = if scenario.changes_source() {
            match prepare_changed(base, changed, scenario, &mut trash)? {
                Changed::NotApplicable(why) => {
                    entry.skipped = Some(why);
                    out.push(entry);
                    continue;
                }
                Changed::Tree { src, change } => {
                    entry.change = Some(change);
                    let diffs = differences(base, &src, &VerifyOptions::archive())?;
                    let (doomed, _) = classify(&diffs, base, &src);
                    (src, doomed)
                }
            }
        } else {
            (base.to_path_buf(), Vec::new())
        };
        let bytes = tree_size(&src)?.bytes.max(size.bytes);
        let total = opts.warmup + opts.runs;
        for round in 0..total {
            for i in round_order(tools.len(), round) {
                let tool = &tools[i];
                let Some(program) = &tool.program else {
                    continue;
                };
                progress(scenario.name(), &tool.name, round, total);
                trash.make_room(work, 2 * size.bytes + (2 << 30), note)?;
                if scenario == Scenario::First {
                    dest.clear(&mut trash)?;
                    settle(&[&src], opts.cold, bytes)?;
                } else {
                    dest.mirror(&mut trash, note)?;
                    dest.keep_alive(&doomed, &mut trash)?;
                    settle(&[&src, dest.path()], opts.cold, bytes)?;
                }
                let done = run_tool(tool, program, &src, dest.path())?;
                dest.touched();
                if round >= opts.warmup {
                    entry.results[i]
                        .runs
                        .push(judge(tool, &done, &src, dest.path()));
                }
            }
        }
        if scenario == Scenario::First {
            // What the tools made is no reference mirror.
            dest.clear(&mut trash)?;
        }
        entry.ratio_to_rsync = ratios(&entry.results, "rsync");
        out.push(entry);
    }
    dest.clear(&mut trash)?;
    trash.close(note)?;
    Ok(out)
}

/// Each verified tool's median over `reference`'s (empty when it did not verify).
fn ratios(results: &[ToolRuns], reference: &str) -> BTreeMap<String, f64> {
    let median = |r: &ToolRuns| r.verified().then(|| r.stats()).flatten().map(|s| s.median);
    let Some(base) = results
        .iter()
        .find(|r| r.tool == reference)
        .and_then(median)
    else {
        return BTreeMap::new();
    };
    results
        .iter()
        .filter_map(|r| Some((r.tool.clone(), median(r)? / base.max(1e-9))))
        .collect()
}

/// The terminal table of one workload: a row per scenario and tool, with median/min/max,
/// the ratio to rsync in the same scenario, peak RSS and the verification.
pub fn sync_table(scenarios: &[ScenarioRuns], style: crate::table::Style) -> String {
    let mut out = crate::table::new(&[
        "scenario", "tool", "median s", "min s", "max s", "stddev", "×rsync", "RSS MiB", "verified",
    ]);
    crate::table::align_left(&mut out, 8);
    // A tool that is not installed is said once, under the first scenario that ran.
    let mut said = std::collections::HashSet::new();
    for s in scenarios {
        if let Some(why) = &s.skipped {
            let mut row = vec![s.scenario.to_string(), "-".to_string()];
            row.resize(8, String::new());
            row.push(format!("skipped: {why}"));
            out.add_row(row);
            continue;
        }
        for r in &s.results {
            let mut row = vec![s.scenario.to_string(), r.tool.clone()];
            if let Some(why) = &r.skipped {
                if !said.insert(r.tool.clone()) {
                    continue;
                }
                row.resize(8, String::new());
                row.push(format!("skipped: {why}"));
                out.add_row(row);
                continue;
            }
            let Some(st) = r.stats() else { continue };
            row.extend(timing_cells(r, &st, s.ratio_to_rsync.get(&r.tool).copied()));
            out.add_row(row);
        }
    }
    crate::table::render_as(&out, style)
}
