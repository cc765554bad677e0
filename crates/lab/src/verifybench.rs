//! `ringio bench verify`: `ringio verify --manifest` and the checksum tools' own check (`xxhsum
//! -c`, `b3sum -c`, `sha256sum -c`, ...) side by side on one tree, for each algorithm.
//!
//! It runs on `bench copy`'s harness ([`crate::copybench`]): the same workloads, cold or warm
//! settling ([`settle`]), round-robin order, statistics and table cells. What is its own: the
//! manifest each checker reads, written once per algorithm (outside the timed region) in the
//! format every one of them reads (`HEX  NAME`, names relative to the tree, escaped as
//! coreutils does), and the run itself: each checker runs in the tree, and a run is right when
//! it exits 0 (every listed file matched: the manifest was made from the tree).

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use ringio_base::child::{self, ChildRun};
use ringio_copy::digest::{sum_line, Algo};
use serde::{Deserialize, Serialize};

use crate::copybench::{
    find_program, round_order, settle, timing_cells, tree_size, Run, ToolRuns, COLD_NOT_ROOT,
};
use crate::error::LabError;

/// The algorithms `bench verify` knows (those a checksum tool on this machine may check).
pub const VERIFY_ALGOS: [Algo; 5] = [
    Algo::Xxh128,
    Algo::Blake3,
    Algo::Sha256,
    Algo::Sha1,
    Algo::Md5,
];

/// The default algorithms.
pub const DEFAULT_VERIFY_ALGOS: [Algo; 3] = [Algo::Xxh128, Algo::Blake3, Algo::Sha256];

/// How the benchmark runs.
#[derive(Debug, Clone)]
pub struct VerifyBenchOptions {
    /// Timed runs per checker and algorithm.
    pub runs: usize,
    /// Untimed runs per checker and algorithm first.
    pub warmup: usize,
    /// Drop caches before every run (root), or evict the tree's files (otherwise).
    pub cold: bool,
    /// The algorithms, in order.
    pub algos: Vec<Algo>,
}

/// A manifest checker under test: `args` with `{manifest}` filled in, run in the tree.
#[derive(Debug, Clone)]
pub struct Checker {
    /// The name in tables.
    pub name: String,
    /// The program, or `None` when it is not installed.
    pub program: Option<PathBuf>,
    /// Arguments, with a `{manifest}` placeholder.
    pub args: Vec<String>,
    /// How to get it, said when it is missing.
    pub install: String,
}

/// The checkers of `algo`: this ringio's `verify --manifest` (`ringio` is the binary), then
/// the checksum tool that writes such manifests.
pub fn checkers(algo: Algo, ringio: &Path) -> Result<Vec<Checker>, LabError> {
    let (tool, install) = match algo {
        Algo::Xxh128 => ("xxhsum", "apt-get install xxhash"),
        Algo::Blake3 => ("b3sum", "apt-get install b3sum, or cargo install b3sum"),
        Algo::Sha256 => ("sha256sum", "coreutils"),
        Algo::Sha1 => ("sha1sum", "coreutils"),
        Algo::Md5 => ("md5sum", "coreutils"),
        other => {
            return Err(LabError::Invalid(format!(
                "bench verify has no checksum tool for {other} (known: {})",
                VERIFY_ALGOS.map(<&str>::from).join(", ")
            )))
        }
    };
    let algo_name: &str = algo.into();
    let strings = |a: &[&str]| a.iter().map(|s| s.to_string()).collect();
    Ok(vec![
        Checker {
            name: "ringio-verify".into(),
            program: Some(ringio.to_path_buf()),
            args: strings(&[
                "verify",
                "-q",
                "--hash",
                algo_name,
                "--manifest",
                "{manifest}",
                ".",
            ]),
            install: "cargo build --release".into(),
        },
        Checker {
            name: format!("{tool} -c"),
            program: find_program(tool),
            args: strings(&["-c", "--quiet", "{manifest}"]),
            install: install.into(),
        },
    ])
}

/// One algorithm's runs on one tree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AlgoRuns {
    /// The algorithm.
    pub algo: String,
    /// The checksum tool it is compared with.
    pub peer: String,
    /// Files the manifest lists.
    pub listed: u64,
    /// Each checker's runs.
    pub results: Vec<ToolRuns>,
    /// Each right checker's median over the checksum tool's.
    pub ratio_to_peer: BTreeMap<String, f64>,
}

/// Runs every checker of every algorithm of `opts` on `tree`; the manifests are written into
/// `work`. `progress(algo, checker, round, rounds)` hears each run before it starts; `note`
/// hears what the harness does on its own.
pub fn bench_verify(
    tree: &Path,
    work: &Path,
    ringio: &Path,
    opts: &VerifyBenchOptions,
    progress: &mut dyn FnMut(&str, &str, usize, usize),
    note: &mut dyn FnMut(&str),
) -> Result<Vec<AlgoRuns>, LabError> {
    let size = tree_size(tree)?;
    if opts.cold && !rustix::process::geteuid().is_root() {
        note(COLD_NOT_ROOT);
    }
    let files = regular_files(tree)?;
    // The checkers run in the tree: the manifest's path must not be relative to here.
    let work = std::path::absolute(work).map_err(|e| LabError::io("find", work, e))?;
    let mut out = Vec::new();
    for &algo in &opts.algos {
        let checkers = checkers(algo, ringio)?;
        let manifest = work.join(format!("manifest.{algo}"));
        write_manifest(tree, &files, algo, &manifest)?;
        let mut results: Vec<ToolRuns> = checkers.iter().map(start).collect();
        let total = opts.warmup + opts.runs;
        for round in 0..total {
            for i in round_order(checkers.len(), round) {
                let checker = &checkers[i];
                let Some(program) = &checker.program else {
                    continue;
                };
                progress(algo.into(), &checker.name, round, total);
                settle(&[tree], opts.cold, size.bytes)?;
                let done = run_checker(checker, program, tree, &manifest)?;
                if round >= opts.warmup {
                    results[i].runs.push(judge(&done));
                }
            }
        }
        let peer = checkers[1].name.clone();
        out.push(AlgoRuns {
            algo: <&str>::from(algo).to_string(),
            ratio_to_peer: ratios(&results, &peer),
            peer,
            listed: files.len() as u64,
            results,
        });
        fs::remove_file(&manifest).map_err(|e| LabError::io("remove", &manifest, e))?;
    }
    Ok(out)
}

/// No runs yet; skipped (with the reason) when the checker is not installed.
fn start(checker: &Checker) -> ToolRuns {
    ToolRuns {
        tool: checker.name.clone(),
        skipped: checker
            .program
            .is_none()
            .then(|| format!("not installed ({})", checker.install)),
        reference: false,
        runs: Vec::new(),
    }
}

/// Runs `checker` (installed as `program`) in `tree` on `manifest`, timed by wait4.
fn run_checker(
    checker: &Checker,
    program: &Path,
    tree: &Path,
    manifest: &Path,
) -> Result<ChildRun, LabError> {
    let args: Vec<String> = checker
        .args
        .iter()
        .map(|a| a.replace("{manifest}", &manifest.to_string_lossy()))
        .collect();
    child::run(Command::new(program).args(&args).current_dir(tree))
        .map_err(|e| LabError::io("run", program, e))
}

/// The record of a timed check: right when it exited 0 (the manifest was made from the tree,
/// so every listed file must match).
fn judge(done: &ChildRun) -> Run {
    let mut problems = Vec::new();
    if !done.status.success() {
        problems.push(format!(
            "exit status {}: {}",
            done.status,
            done.stderr_text()
        ));
    }
    Run {
        seconds: done.usage.wall.as_secs_f64(),
        usage: done.usage.clone(),
        exit_code: done.status.code(),
        ok: problems.is_empty(),
        problems,
        verified: "every listed file matched (exit 0)".into(),
        metadata_checked: Vec::new(),
    }
}

/// Each right checker's median over `peer`'s (empty when the peer did not run right).
fn ratios(results: &[ToolRuns], peer: &str) -> BTreeMap<String, f64> {
    let median = |r: &ToolRuns| r.verified().then(|| r.stats()).flatten().map(|s| s.median);
    let Some(base) = results.iter().find(|r| r.tool == peer).and_then(median) else {
        return BTreeMap::new();
    };
    results
        .iter()
        .filter_map(|r| Some((r.tool.clone(), median(r)? / base.max(1e-9))))
        .collect()
}

/// The regular files below `root` (symlinks not followed), relative to it, sorted.
fn regular_files(root: &Path) -> Result<Vec<PathBuf>, LabError> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        for entry in fs::read_dir(&dir).map_err(|e| LabError::io("read directory", &dir, e))? {
            let entry = entry.map_err(|e| LabError::io("read directory", &dir, e))?;
            let kind = entry
                .file_type()
                .map_err(|e| LabError::io("stat", entry.path(), e))?;
            let path = rel.join(entry.file_name());
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Writes the `algo` manifest of `files` (below `root`) to `path`, as the checksum tool does.
fn write_manifest(root: &Path, files: &[PathBuf], algo: Algo, path: &Path) -> Result<(), LabError> {
    let mut text = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    for rel in files {
        let file = root.join(rel);
        let mut f = fs::File::open(&file).map_err(|e| LabError::io("open", &file, e))?;
        let mut hasher = algo.hasher();
        loop {
            let n = f
                .read(&mut buf)
                .map_err(|e| LabError::io("read", &file, e))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        text.extend(sum_line(&hasher.finish_hex(), rel.as_os_str().as_bytes()));
    }
    fs::File::create(path)
        .and_then(|mut f| f.write_all(&text))
        .map_err(|e| LabError::io("write", path, e))
}

/// The terminal table of one tree: a row per algorithm and checker, with median/min/max, the
/// ratio to the checksum tool, peak RSS and whether every run was right.
pub fn verify_table(algos: &[AlgoRuns], style: crate::table::Style) -> String {
    let mut out = crate::table::new(&[
        "algo", "checker", "median s", "min s", "max s", "stddev", "×tool", "RSS MiB", "right",
    ]);
    crate::table::align_left(&mut out, 8);
    for a in algos {
        for r in &a.results {
            let mut row = vec![a.algo.clone(), r.tool.clone()];
            if let Some(why) = &r.skipped {
                row.resize(8, String::new());
                row.push(format!("skipped: {why}"));
                out.add_row(row);
                continue;
            }
            let Some(st) = r.stats() else { continue };
            row.extend(timing_cells(r, &st, a.ratio_to_peer.get(&r.tool).copied()));
            out.add_row(row);
        }
    }
    crate::table::render_as(&out, style)
}
