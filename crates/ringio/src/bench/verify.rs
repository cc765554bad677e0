//! `ringio bench verify`: `ringio verify --manifest` and the checksum tools' own check on the
//! same trees, for each algorithm, with a table and JSON.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use ringio_copy::digest::Algo;
use ringio_copy::quote::quote;
use ringio_lab::copybench::tree_size;
use ringio_lab::verifybench::{
    bench_verify, verify_table, VerifyBenchOptions, DEFAULT_VERIFY_ALGOS, VERIFY_ALGOS,
};

/// `ringio bench verify`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "For each algorithm, a manifest of every regular file of the tree is written \
once (untimed, `HEX  NAME` lines with names relative to the tree, as sha256sum, b3sum and \
xxhsum -H2 write them), then checked, each run timed by wait4, inside the tree: by `ringio \
verify -q --hash ALGO --manifest FILE .` (which also walks the tree for files the manifest \
lacks) and by the checksum tool's `-c --quiet FILE` (xxhsum for xxh128, b3sum for blake3, \
sha256sum, sha1sum, md5sum). A run is right when it exits 0; ×tool is the median over the \
checksum tool's. Checkers run round-robin. Workloads, --cold (caches dropped before every run \
as root, else the tree's files evicted) and warming (the tree is read before every run) as in \
`bench copy`; nothing is written into the tree."
)]
pub struct Args {
    /// Check this tree.
    #[arg(long, value_name = "DIR", conflicts_with = "workload")]
    pub src: Option<PathBuf>,
    /// Standard workloads (as `bench copy`), comma-separated, or `all` [default: 1024x32k, the
    /// small one].
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub workload: Vec<String>,
    /// Algorithms, comma-separated: xxh128, blake3, sha256, sha1, md5 [default: xxh128,
    /// blake3, sha256].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub algos: Vec<String>,
    /// Timed runs per checker and algorithm.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub runs: usize,
    /// Untimed runs per checker and algorithm first.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub warmup: usize,
    /// Cold cache: drop caches before every run (root), or evict the tree's files.
    #[arg(long)]
    pub cold: bool,
    /// Write the raw runs and the machine description here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Where workloads and manifests live.
    #[arg(long, value_name = "DIR", default_value = "/var/tmp/ringio-bench")]
    pub dir: PathBuf,
    /// Go on without asking when making the workloads would write more than 4 GiB (asked only
    /// on a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

pub fn run(args: &Args) -> Result<i32> {
    let exe = std::env::current_exe().context("cannot find the ringio binary")?;
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let algos: Vec<Algo> = if args.algos.is_empty() {
        DEFAULT_VERIFY_ALGOS.to_vec()
    } else {
        args.algos
            .iter()
            .map(|a| crate::verify::choice("--algos", a, &VERIFY_ALGOS))
            .collect::<Result<_, String>>()
            .map_err(anyhow::Error::msg)?
    };
    let plan = super::suite::Plan {
        what: format!(
            "ringio verify --manifest and the checksum tools' -c for {} ({} timed run(s) each)",
            algos
                .iter()
                .map(|&a| <&str>::from(a))
                .collect::<Vec<_>>()
                .join(", "),
            args.runs
        ),
        // Checks write nothing: only a workload made for the first time is written.
        runs_per_tree: 0,
        cold: args.cold,
        yes: args.yes,
    };
    let sources = super::suite::sources(args.src.as_deref(), &args.workload, &args.dir, &plan)?;
    let work = args.dir.join("verify");
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", quote(&work)))?;
    let machine = ringio_lab::machine::describe(&work);
    let mode = if args.cold { "cold" } else { "warm" };
    let opts = VerifyBenchOptions {
        runs: args.runs,
        warmup: args.warmup,
        cold: args.cold,
        algos,
    };
    let mut records = Vec::new();
    for source in &sources {
        let name = &source.name;
        let size = tree_size(&source.path)?;
        let status = crate::progress::status_line();
        println!(
            "\n== {name} ({}): {} files, {} dirs, {:.1} MiB, {mode} cache, {} runs",
            source.description,
            size.files,
            size.dirs,
            size.bytes as f64 / (1 << 20) as f64,
            args.runs
        );
        let results = bench_verify(
            &source.path,
            &work,
            &exe,
            &opts,
            &mut |algo, checker, round, total| {
                status.set_message(format!(
                    "[{name} {algo}] {checker}: run {}/{total}",
                    round + 1
                ))
            },
            &mut |note| status.suspend(|| eprintln!("note: {note}")),
        )?;
        status.finish_and_clear();
        print!(
            "{}",
            verify_table(&results, ringio_lab::table::Style::Terminal)
        );
        records.push(serde_json::json!({
            "workload": name,
            "description": source.description,
            "tree": size,
            "algos": results,
        }));
    }
    if let Some(path) = &args.json {
        super::suite::write_json(path, args.cold, args.runs, args.warmup, &machine, records)?;
    }
    Ok(0)
}
