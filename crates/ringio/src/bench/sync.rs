//! `ringio bench sync`: ringio's `sync`, `cp -a --resume` and the peer syncers on the same
//! trees in five scenarios, every result verified, with a table, JSON and SVG plots.

use ringio_copy::quote::quote;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use ringio_lab::copybench::{self, tree_size, Trash};
use ringio_lab::plot::bar_chart;
use ringio_lab::syncbench::{
    bench_sync, resolve_sync_tool, sync_table, Scenario, ScenarioRuns, SyncOptions,
    DEFAULT_SYNC_TOOLS, SYNC_TOOLS,
};

/// `ringio bench sync`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Scenarios, each timed per tool (the sync alone) and verified:
  first     the first sync, into a destination that does not exist;
  nochange  a re-sync of an unchanged source onto its mirror;
  changed1  a re-sync after 1% of the files were rewritten in place (same size, new content,
            new mtime);
  addel10   a re-sync after 10% new files were added and 10% of the files deleted;
  rename    a re-sync after one directory (the one holding closest to 10% of the files) was
            renamed; skipped on a tree without subdirectories.
The changed sources are made once from the workload (a `cp -a` copy, then a change seeded by 1)
and kept beside it under --dir. What a change touches (files, and directories whose entries
changed) gets the mtime of a day after the tree's newest: rsync compares mtimes to the second. Before each re-sync the destination is a mirror of the unchanged
tree: made once by `cp -a`, never by a tool under test, and between runs repaired (what `ringio
verify` finds different is moved aside and copied again), so every tool starts from the same
state. What the sync will delete or replace is hard-linked aside first, so no run's deletes slow
the creates of a later run (ext4's recently-deleted scan); copies go to a trash emptied at the
end.

Tools: ringio-sync (`ringio sync -a --delete SRC/ DST/`, used when `ringio sync --help` works),
ringio-resume (`ringio cp -a --resume -T SRC DST`: cp's update of an existing copy; it deletes
nothing, so addel10 and rename leave extra files and are FAILED), rsync (`rsync -a --delete SRC/
DST/`), rclone (`rclone sync SRC DST`), each used when found. Checked by `ringio verify`: content,
mode, owner and mtime for ringio-sync and rsync (what rsync -a promises), everything cp -a
promises for ringio-resume, content for rclone. A tool that fails or leaves a destination that
differs from the source is FAILED, never ranked; ×rsync is the median over rsync's in the same
scenario. Workloads, --cold, warming (both trees are read) and fresh memory as in `bench copy`."
)]
pub struct Args {
    /// Sync this tree.
    #[arg(long, value_name = "DIR", conflicts_with = "workload")]
    pub src: Option<PathBuf>,
    /// Standard workloads (as `bench copy`), comma-separated, or `all` [default: 1024x32k, the
    /// small one].
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub workload: Vec<String>,
    /// Tools, comma-separated.
    #[arg(long, value_name = "LIST", value_delimiter = ',', help = format!("Tools, comma-separated ({SYNC_TOOLS}) [default: ringio-sync, ringio-resume, rsync, rclone]"))]
    pub tools: Vec<String>,
    /// Scenarios, comma-separated: first, nochange, changed1, addel10, rename [default: all].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub scenarios: Vec<String>,
    /// Timed runs per tool and scenario.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub runs: usize,
    /// Untimed runs per tool and scenario first.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub warmup: usize,
    /// Cold cache: drop caches before every run (root), or evict the trees' files.
    #[arg(long)]
    pub cold: bool,
    /// Write the raw runs and the machine description here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write SVG charts into this directory (one per workload and scenario).
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Where workloads, changed sources, destinations and trash live.
    #[arg(long, value_name = "DIR", default_value = "/var/tmp/ringio-bench")]
    pub dir: PathBuf,
    /// Go on without asking when the run would write more than 4 GiB (asked only on a
    /// terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

pub fn run(args: &Args) -> Result<i32> {
    let exe = std::env::current_exe().context("cannot find the ringio binary")?;
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let names: Vec<String> = if args.tools.is_empty() {
        DEFAULT_SYNC_TOOLS.iter().map(|s| s.to_string()).collect()
    } else {
        args.tools.clone()
    };
    let tools = names
        .iter()
        .map(|n| resolve_sync_tool(n, &exe))
        .collect::<Result<Vec<_>, _>>()?;
    let scenarios = if args.scenarios.is_empty() || args.scenarios == ["all"] {
        Scenario::ALL.to_vec()
    } else {
        args.scenarios
            .iter()
            .map(|s| s.parse())
            .collect::<Result<Vec<Scenario>, _>>()?
    };
    for t in &tools {
        if t.program.is_none() {
            eprintln!("skipping {}: not installed ({})", t.name, t.install);
        }
    }
    let names: Vec<&str> = tools
        .iter()
        .filter(|t| t.program.is_some())
        .map(|t| t.name.as_str())
        .collect();
    let plan = super::suite::Plan {
        what: format!(
            "{} tool(s) ({}) in {} scenario(s) ({}), {} timed run(s) each{}",
            names.len(),
            names.join(", "),
            scenarios.len(),
            scenarios
                .iter()
                .map(|s| s.name())
                .collect::<Vec<_>>()
                .join(", "),
            args.runs,
            if args.warmup > 0 {
                format!(" after {} untimed", args.warmup)
            } else {
                String::new()
            }
        ),
        // The first sync writes the whole tree; the others write their changes.
        runs_per_tree: names.len() * (args.runs + args.warmup),
        cold: args.cold,
        yes: args.yes,
    };
    let sources = super::suite::sources(args.src.as_deref(), &args.workload, &args.dir, &plan)?;
    let work = args.dir.join("syncs");
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", quote(&work)))?;
    let machine = ringio_lab::machine::describe(&work);
    if machine.filesystem.starts_with("ext") {
        if let Some(note) = copybench::recent_deletes(&work) {
            eprintln!("note: {note}");
        }
    }
    let mode = if args.cold { "cold" } else { "warm" };
    let opts = SyncOptions {
        runs: args.runs,
        warmup: args.warmup,
        cold: args.cold,
        scenarios,
    };
    let mut records = Vec::new();
    for source in &sources {
        let name = &source.name;
        let size = tree_size(&source.path)?;
        // A standard workload's changed sources are kept beside it; another tree's are made
        // for this run only.
        let changed = if source.standard {
            source.path.with_file_name("sync")
        } else {
            work.join("changed").join(name)
        };
        let status = crate::progress::status_line();
        println!(
            "\n== {name} ({}): {} files, {} dirs, {:.1} MiB, {mode} cache, {} runs",
            source.description,
            size.files,
            size.dirs,
            size.bytes as f64 / (1 << 20) as f64,
            args.runs
        );
        let results = bench_sync(
            &source.path,
            &work,
            &changed,
            &tools,
            &opts,
            &mut |scenario, tool, round, total| {
                status.set_message(format!(
                    "[{name} {scenario}] {tool}: run {}/{total}",
                    round + 1
                ))
            },
            &mut |note| status.suspend(|| eprintln!("note: {note}")),
        )?;
        status.finish_and_clear();
        if !source.standard {
            Trash::open(&work)?.put(&changed, size.files + size.dirs)?;
        }
        for s in &results {
            if let Some(change) = &s.change {
                println!("{}: {change}", s.scenario);
            }
        }
        print!(
            "{}",
            sync_table(&results, ringio_lab::table::Style::Terminal)
        );
        if let Some(dir) = &args.plot {
            plot_workload(dir, name, mode, &results)?;
        }
        records.push(serde_json::json!({
            "workload": name,
            "description": source.description,
            "tree": size,
            "scenarios": results,
        }));
    }
    // The destinations and repairs were kept in the trash until now (ext4's recently-deleted
    // scan).
    copybench::finish(&work, &mut |note| eprintln!("note: {note}"))?;
    if let Some(path) = &args.json {
        super::suite::write_json(path, args.cold, args.runs, args.warmup, &machine, records)?;
    }
    Ok(0)
}

/// A bar chart per scenario: the verified tools' median seconds.
fn plot_workload(dir: &Path, name: &str, mode: &str, results: &[ScenarioRuns]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", quote(&dir)))?;
    for s in results.iter().filter(|s| s.skipped.is_none()) {
        let path = dir.join(format!("{name}-sync-{}-{mode}.svg", s.scenario));
        bar_chart(
            &path,
            &format!(
                "{name}, {}, {mode} cache: median seconds, fastest to slowest run (verified)",
                s.scenario
            ),
            "seconds",
            &copybench::bars(&s.results),
        )?;
    }
    Ok(())
}
