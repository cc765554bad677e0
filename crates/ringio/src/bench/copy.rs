//! `ringio bench copy`: ringio's engines and the peer copiers on the same trees, every copy
//! verified, with a table, JSON and SVG plots.

use ringio_copy::quote::quote;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use ringio_lab::copybench::{
    self, bench, resolve_tool, tree_size, BenchOptions, ToolRuns, KNOWN_TOOLS,
};
use ringio_lab::gen::Shape;
use ringio_lab::plot::{bar_chart, line_chart, LineChart, Series};
use ringio_lab::table::Style;

/// `ringio bench copy`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Workloads: 1g, 16x64m, 1024x32k, 4096x32k, 50k-mixed, src-tree, usr-include, \
cargo-registry, toolchain, or `all`. They are made once under --dir and reused; the last four \
copy real trees of this machine (src-tree: the first of the cargo registry, /usr/include and \
/usr/share/doc; toolchain: Go's tree), and a workload whose tree is missing is skipped.\n\nOutside the timed region each run moves \
the previous copy into a trash directory (emptied after the last workload: deleting many files \
slows every create on ext4 for minutes), writes back what earlier runs left \
dirty (sync), drops the caches (--cold) or re-reads the source (warm), and touches fresh memory; \
tools run round-robin. Every copy is checked with `ringio verify`: content for every tool, and \
metadata for the tools that promise it (ringio-a, cp-a; rsync without hard links, xattrs and \
holes). A wrong copy is FAILED and never ranked. Peak RSS and CPU time come from wait4."
)]
pub struct Args {
    /// Copy this tree.
    #[arg(long, value_name = "DIR", conflicts_with = "workload")]
    pub src: Option<PathBuf>,
    /// Standard workloads, comma-separated, or `all` [default: 1024x32k, the small one].
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub workload: Vec<String>,
    /// Tools, comma-separated.
    #[arg(long, value_name = "LIST", value_delimiter = ',', help = format!("Tools, comma-separated ({KNOWN_TOOLS}) [default: every ringio engine, ringio-a, every peer and cat]"))]
    pub tools: Vec<String>,
    /// Timed runs per tool.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub runs: usize,
    /// Untimed runs per tool first.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub warmup: usize,
    /// Cold cache: drop caches before every run (root), or evict the source files.
    #[arg(long)]
    pub cold: bool,
    /// Write the raw runs and the machine description here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write SVG charts into this directory.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Where workloads, copies and trash live.
    #[arg(long, value_name = "DIR", default_value = "/var/tmp/ringio-bench")]
    pub dir: PathBuf,
    /// Go on without asking when the run would write more than 4 GiB (asked only on a
    /// terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

fn default_tools() -> Vec<String> {
    let mut tools: Vec<String> = ringio_copy::Engine::ALL
        .iter()
        .map(|e| format!("ringio:{}", e.name()))
        .collect();
    tools.push("ringio-a".into());
    for peer in ["cp", "cp-a", "rsync", "xcp", "fcp", "cpz", "wcp", "cat"] {
        tools.push(peer.into());
    }
    tools
}

pub fn run(args: &Args) -> Result<i32> {
    let exe = std::env::current_exe().context("cannot find the ringio binary")?;
    let names = if args.tools.is_empty() {
        default_tools()
    } else {
        args.tools.clone()
    };
    let tools = names
        .iter()
        .map(|n| resolve_tool(n, &exe))
        .collect::<Result<Vec<_>, _>>()?;
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
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
    let copiers = tools
        .iter()
        .filter(|t| t.program.is_some() && !t.reference)
        .count();
    let plan = super::suite::Plan {
        what: format!(
            "{} tool(s) ({}), {} timed run(s) each{}",
            names.len(),
            names.join(", "),
            args.runs,
            if args.warmup > 0 {
                format!(" after {} untimed", args.warmup)
            } else {
                String::new()
            }
        ),
        runs_per_tree: copiers * (args.runs + args.warmup),
        cold: args.cold,
        yes: args.yes,
    };
    let sources = super::suite::sources(args.src.as_deref(), &args.workload, &args.dir, &plan)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    if args.cold && unsafe { libc::geteuid() } == 0 {
        eprintln!(
            "note: --cold as root drops the whole machine's page cache (drop_caches) before every run"
        );
    }
    let work = args.dir.join("copies");
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", quote(&work)))?;
    let machine = ringio_lab::machine::describe(&work);
    if machine.filesystem.starts_with("ext") {
        if let Some(note) = copybench::recent_deletes(&work) {
            eprintln!("note: {note}");
        }
    }
    let mode = if args.cold { "cold" } else { "warm" };
    let opts = BenchOptions {
        runs: args.runs,
        warmup: args.warmup,
        cold: args.cold,
    };
    let mut records = Vec::new();
    let mut figure: BTreeMap<u64, Vec<(u64, Vec<ToolRuns>)>> = BTreeMap::new();
    for super::suite::Source {
        name,
        description,
        path: src,
        shape,
        ..
    } in &sources
    {
        let size = tree_size(src)?;
        let status = crate::progress::status_line();
        println!(
            "\n== {name} ({description}): {} files, {} dirs, {:.1} MiB, {mode} cache, {} runs",
            size.files,
            size.dirs,
            size.bytes as f64 / (1 << 20) as f64,
            args.runs
        );
        let results = bench(
            src,
            &work,
            &tools,
            &opts,
            &mut |tool, round, total| {
                status.set_message(format!("[{name}] {tool}: run {}/{total}", round + 1))
            },
            &mut |note| status.suspend(|| eprintln!("note: {note}")),
        )?;
        status.finish_and_clear();
        print!("{}", copybench::table(&results, &size, Style::Terminal));
        if let Some(dir) = &args.plot {
            plot_workload(dir, name, mode, &results)?;
        }
        if let Some(Shape::Uniform {
            files,
            size: file_size,
            ..
        }) = shape
        {
            figure
                .entry(*file_size)
                .or_default()
                .push((*files, results.clone()));
        }
        records.push(serde_json::json!({
            "workload": name,
            "description": description,
            "tree": size,
            "results": results,
        }));
    }
    // The workloads' copies were kept in the trash until now (ext4's recently-deleted scan).
    copybench::finish(&work, &mut |note| eprintln!("note: {note}"))?;
    if let Some(dir) = &args.plot {
        for (file_size, points) in &figure {
            if points.len() > 1 {
                plot_files(dir, *file_size, mode, points)?;
            }
        }
    }
    if let Some(path) = &args.json {
        super::suite::write_json(path, args.cold, args.runs, args.warmup, &machine, records)?;
    }
    Ok(0)
}

fn plot_workload(dir: &Path, name: &str, mode: &str, results: &[ToolRuns]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", quote(&dir)))?;
    let path = dir.join(format!("{name}-{mode}.svg"));
    bar_chart(
        &path,
        &format!("{name}, {mode} cache: median seconds, fastest to slowest run (verified copies)"),
        "seconds",
        &copybench::bars(results),
    )?;
    Ok(())
}

/// Time against number of files, a line per tool, for one file size.
fn plot_files(
    dir: &Path,
    file_size: u64,
    mode: &str,
    points: &[(u64, Vec<ToolRuns>)],
) -> Result<()> {
    let mut by_tool: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for (files, results) in points {
        for r in results.iter().filter(|r| r.verified()) {
            if let Some(s) = r.stats() {
                by_tool
                    .entry(r.tool.clone())
                    .or_default()
                    .push((*files as f64, s.median));
            }
        }
    }
    let series: Vec<Series> = by_tool
        .into_iter()
        .map(|(name, mut points)| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series { name, points }
        })
        .collect();
    let title = format!(
        "files of {} KiB, {mode} cache: time against number of files",
        file_size >> 10
    );
    let path = dir.join(format!("files-{}k-{mode}.svg", file_size >> 10));
    line_chart(
        &path,
        &LineChart {
            title: &title,
            x_label: "files",
            y_label: "median seconds",
            log_x: true,
            log_y: false,
            series: &series,
        },
    )?;
    Ok(())
}
