//! `ringio bench copy`: ringio's engines and the peer copiers, side by side on one tree, every
//! copy verified.
//!
//! This VM-class machine has traps that swamp timings (see docs/BENCHMARKS.md), so outside the
//! timed region each run: moves the previous destination into a trash directory (deleting it
//! would bill ext4's recently-deleted inode scan to the next copy), drops the caches (cold) or
//! re-reads the source (warm: idle page cache is paged out within a minute here), and touches
//! fresh memory (free pages handed back to the host are slow to fault in again). Tools run
//! round-robin, so drift hits all of them alike.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use ringio_copy::verify::{verify, VerifyOptions};
use serde::Serialize;

use crate::child::{self, Usage};
use crate::error::LabError;
use crate::gen::{self, Shape};

/// A copier under test.
#[derive(Debug, Clone)]
pub struct Tool {
    /// The name in tables (`cp-a`, `ringio:aio`, ...).
    pub name: String,
    /// The program, or `None` when it is not installed.
    pub program: Option<PathBuf>,
    /// Arguments, with `{src}` and `{dst}` placeholders.
    pub args: Vec<String>,
    /// How to get it, said when it is missing.
    pub install: String,
    /// What its copies are checked for beyond content.
    pub keeps: VerifyOptions,
}

/// Looks for `name` in PATH and in ~/.cargo/bin.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".cargo/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|p| fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0))
}

/// The tool names `--tools` knows, for help texts.
pub const KNOWN_TOOLS: &str =
    "ringio, ringio-a, ringio:ENGINE, cp, cp-a, rsync, xcp, fcp, cpz, wcp, cmd:NAME=PROGRAM";

/// Resolves one `--tools` entry. `ringio` is this binary.
pub fn resolve_tool(spec: &str, ringio: &Path) -> Result<Tool, LabError> {
    let hint = "or run bench/install-peers.sh";
    let archive = VerifyOptions::archive();
    let content = VerifyOptions::content_only();
    let peer = |name: &str, args: &[&str], install: String, keeps: VerifyOptions| Tool {
        name: spec.to_string(),
        program: find_program(name),
        args: args.iter().map(|s| s.to_string()).collect(),
        install,
        keeps,
    };
    let tool = match spec {
        "cp" => peer(
            "cp",
            &["-r", "{src}", "{dst}"],
            "apt-get install coreutils".into(),
            content,
        ),
        "cp-a" => peer(
            "cp",
            &["-a", "{src}", "{dst}"],
            "apt-get install coreutils".into(),
            archive,
        ),
        // rsync -a keeps modes, owners and times, but not hard links (-H), xattrs (-X) or
        // holes (-S).
        "rsync" => peer(
            "rsync",
            &["-a", "--inplace", "-W", "{src}/", "{dst}"],
            format!("apt-get install rsync, {hint}"),
            VerifyOptions {
                hard_links: false,
                xattrs: false,
                sparseness: false,
                ..archive
            },
        ),
        "xcp" => peer(
            "xcp",
            &["-r", "{src}", "{dst}"],
            format!("cargo install xcp, {hint}"),
            content,
        ),
        "fcp" | "cpz" | "wcp" => peer(
            spec,
            &["{src}", "{dst}"],
            format!("cargo install {spec}, {hint}"),
            content,
        ),
        _ if spec == "ringio"
            || spec == "ringio-a"
            || spec.starts_with("ringio:")
            || spec.starts_with("ringio-a:") =>
        {
            let (name, engine) = spec.split_once(':').unwrap_or((spec, ""));
            let a = name == "ringio-a";
            let mut args = vec!["cp".to_string(), if a { "-a" } else { "-r" }.to_string()];
            if !engine.is_empty() {
                engine.parse::<ringio_copy::Engine>().map_err(|_| {
                    LabError::Invalid(crate::names::unknown(
                        "engine",
                        engine,
                        ringio_copy::Engine::ALL.iter().map(|e| e.name()),
                    ))
                })?;
                args.extend(["--engine".to_string(), engine.to_string()]);
            }
            args.extend(["{src}".to_string(), "{dst}".to_string()]);
            Tool {
                name: spec.to_string(),
                program: Some(ringio.to_path_buf()),
                args,
                install: "cargo build --release".into(),
                keeps: if a { archive } else { content },
            }
        }
        _ => match spec.strip_prefix("cmd:").and_then(|s| s.split_once('=')) {
            Some((name, program)) => Tool {
                name: name.to_string(),
                program: fs::metadata(program)
                    .is_ok()
                    .then(|| PathBuf::from(program)),
                args: vec!["{src}".into(), "{dst}".into()],
                install: format!("'{program}' does not exist"),
                keeps: content,
            },
            None => {
                return Err(LabError::Invalid(format!(
                    "unknown tool '{spec}' (known: {KNOWN_TOOLS})"
                )))
            }
        },
    };
    Ok(tool)
}

/// A standard workload of the suite.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Its name (`1g`, `4096x32k`, ...).
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
    /// How it is made.
    pub source: WorkloadSource,
}

/// Where a workload's tree comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadSource {
    /// Generated with this shape (seed 1).
    Generated(Shape),
    /// A copy of a real tree found on the machine.
    RealTree,
}

/// The standard suite.
pub fn standard_workloads() -> Vec<Workload> {
    let uniform = |files, size| {
        WorkloadSource::Generated(Shape::Uniform {
            files,
            size,
            dirs: 0,
            depth: 1,
        })
    };
    vec![
        Workload { name: "1g", description: "one 1 GiB file", source: uniform(1, 1 << 30) },
        Workload { name: "16x64m", description: "16 files of 64 MiB", source: uniform(16, 64 << 20) },
        Workload { name: "1024x32k", description: "1,024 files of 32 KiB in one directory", source: uniform(1024, 32 << 10) },
        Workload { name: "4096x32k", description: "4,096 files of 32 KiB in one directory", source: uniform(4096, 32 << 10) },
        Workload {
            name: "50k-mixed",
            description: "50,000 entries of long-tailed sizes in ~3,000 directories, with symlinks and hard links",
            source: WorkloadSource::Generated(Shape::Mix { files: 50_000 }),
        },
        Workload { name: "src-tree", description: "a copy of a real source tree on this machine", source: WorkloadSource::RealTree },
    ]
}

/// Real trees the `src-tree` workload copies, first found wins.
const REAL_TREES: &[&str] = &["~/.cargo/registry/src", "/usr/include", "/usr/share/doc"];

/// Makes (once) the workload's source tree under `dir`, and returns its path. A tree made
/// before is reused when its marker says it is complete.
pub fn prepare(dir: &Path, workload: &Workload) -> Result<PathBuf, LabError> {
    let root = dir.join("workloads").join(workload.name);
    let src = root.join("src");
    let marker = root.join("complete");
    if marker.exists() {
        return Ok(src);
    }
    if root.exists() {
        fs::remove_dir_all(&root).map_err(|e| LabError::io("remove", &root, e))?;
    }
    fs::create_dir_all(&root).map_err(|e| LabError::io("create directory", &root, e))?;
    match &workload.source {
        WorkloadSource::Generated(shape) => {
            gen::generate(&src, shape, 1)?;
        }
        WorkloadSource::RealTree => {
            let home = std::env::var("HOME").unwrap_or_default();
            let origin = REAL_TREES
                .iter()
                .map(|t| PathBuf::from(t.replace('~', &home)))
                .find(|p| p.is_dir())
                .ok_or_else(|| {
                    LabError::Invalid(format!(
                        "no real tree for src-tree (tried {})",
                        REAL_TREES.join(", ")
                    ))
                })?;
            let out = Command::new("cp")
                .arg("-a")
                .arg(&origin)
                .arg(&src)
                .output()
                .map_err(|e| LabError::io("run cp for", &origin, e))?;
            if !out.status.success() {
                return Err(LabError::Invalid(format!(
                    "copying '{}' for src-tree failed: {}",
                    origin.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
        }
    }
    fs::write(&marker, workload.description).map_err(|e| LabError::io("write", &marker, e))?;
    Ok(src)
}

/// Files, directories and bytes of a tree.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct TreeSize {
    /// Non-directory entries.
    pub files: u64,
    /// Directories (the root included).
    pub dirs: u64,
    /// Bytes of regular files.
    pub bytes: u64,
}

/// Sizes up a tree (std paths: benchmark trees are not deeper than PATH_MAX).
pub fn tree_size(root: &Path) -> Result<TreeSize, LabError> {
    let mut size = TreeSize::default();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        size.dirs += 1;
        for entry in fs::read_dir(&dir).map_err(|e| LabError::io("read directory", &dir, e))? {
            let entry = entry.map_err(|e| LabError::io("read directory", &dir, e))?;
            let meta = entry
                .metadata()
                .map_err(|e| LabError::io("stat", entry.path(), e))?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                size.files += 1;
                if meta.is_file() {
                    size.bytes += meta.len();
                }
            }
        }
    }
    Ok(size)
}

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

/// One timed copy.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// Wall seconds.
    pub seconds: f64,
    /// The child's rusage.
    pub usage: Usage,
    /// Exit status (None: killed by a signal).
    pub exit_code: Option<i32>,
    /// Empty when the copy is right; otherwise what is wrong.
    pub problems: Vec<String>,
    /// What the copy was checked for: `content` (names, types, sizes, every byte, symlink
    /// targets) or `content+metadata` (and the attributes in `metadata_checked`).
    pub verified: &'static str,
    /// The metadata compared on top of content: mode, ownership, mtime, xattrs, hard-links,
    /// sparseness.
    pub metadata_checked: Vec<&'static str>,
    /// The outcome: the tool exited 0 and the copy passed every check.
    pub ok: bool,
}

/// The metadata `keeps` compares beyond content, by name.
fn metadata_checked(keeps: &VerifyOptions) -> Vec<&'static str> {
    [
        (keeps.mode, "mode"),
        (keeps.ownership, "ownership"),
        (keeps.mtime, "mtime"),
        (keeps.xattrs, "xattrs"),
        (keeps.hard_links, "hard-links"),
        (keeps.sparseness, "sparseness"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect()
}

/// A tool's runs on one workload.
#[derive(Debug, Clone, Serialize)]
pub struct ToolRuns {
    /// The tool.
    pub tool: String,
    /// Why it did not run (not installed).
    pub skipped: Option<String>,
    /// Its timed runs.
    pub runs: Vec<Run>,
}

impl ToolRuns {
    /// True when every run exited 0 and copied right.
    pub fn verified(&self) -> bool {
        !self.runs.is_empty()
            && self
                .runs
                .iter()
                .all(|r| r.exit_code == Some(0) && r.problems.is_empty())
    }

    /// Summary statistics of the wall times.
    pub fn stats(&self) -> Option<Stats> {
        if self.runs.is_empty() {
            return None;
        }
        let mut t: Vec<f64> = self.runs.iter().map(|r| r.seconds).collect();
        t.sort_by(f64::total_cmp);
        let mean = t.iter().sum::<f64>() / t.len() as f64;
        let var = t.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / t.len() as f64;
        let mut rss: Vec<u64> = self.runs.iter().map(|r| r.usage.max_rss_kib).collect();
        rss.sort_unstable();
        Some(Stats {
            median: t[t.len() / 2],
            min: t[0],
            max: t[t.len() - 1],
            stddev: var.sqrt(),
            max_rss_kib: rss[rss.len() - 1],
            rss_floor_kib: self
                .runs
                .iter()
                .map(|r| r.usage.rss_floor_kib)
                .max()
                .unwrap_or(0),
        })
    }
}

/// Wall-time statistics of a tool's runs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Stats {
    /// Median seconds.
    pub median: f64,
    /// Fastest run.
    pub min: f64,
    /// Slowest run.
    pub max: f64,
    /// Standard deviation.
    pub stddev: f64,
    /// Peak RSS over the runs, KiB.
    pub max_rss_kib: u64,
    /// The harness's own size at spawn, KiB: a peak at or below it means "no more than this".
    pub rss_floor_kib: u64,
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
    let trash = work.join("trash");
    fs::create_dir_all(&trash).map_err(|e| LabError::io("create directory", &trash, e))?;
    let dst = work.join("dst");
    let mut results: Vec<ToolRuns> = tools
        .iter()
        .map(|t| ToolRuns {
            tool: t.name.clone(),
            skipped: t
                .program
                .is_none()
                .then(|| format!("not installed ({})", t.install)),
            runs: Vec::new(),
        })
        .collect();
    let root = rustix::process::geteuid().is_root();
    if opts.cold && !root {
        note("not root: --cold evicts the source's files one by one (POSIX_FADV_DONTNEED) instead of dropping every cache");
    }
    let mut trash_n = 0u64;
    let mut trash_inodes = 0u64;
    let total = opts.warmup + opts.runs;
    for round in 0..total {
        let timed = round >= opts.warmup;
        // Round-robin: each round starts with the next tool.
        let order: Vec<usize> = (0..tools.len())
            .map(|i| (i + round) % tools.len())
            .collect();
        for i in order {
            let tool = &tools[i];
            let Some(program) = &tool.program else {
                continue;
            };
            progress(&tool.name, round, total);
            if free_bytes(work) < 2 * size.bytes + (2 << 30) {
                // Out of room: empty the trash now (the ext4 delete trap may then slow the
                // next copy; better than a full disk).
                note("disk nearly full: emptying the trash between runs");
                empty_trash(&trash, trash_inodes, note)?;
                trash_inodes = 0;
                fs::create_dir_all(&trash)
                    .map_err(|e| LabError::io("create directory", &trash, e))?;
            }
            if dst.exists() {
                trash_n += 1;
                let aside = trash.join(trash_n.to_string());
                fs::rename(&dst, &aside).map_err(|e| LabError::io("move aside", &dst, e))?;
                trash_inodes += size.files + size.dirs;
            }
            if opts.cold {
                if root {
                    crate::cache::drop_caches()?;
                } else {
                    evict_tree(src)?;
                }
            } else {
                warm_tree(src)?;
            }
            touch_memory((size.bytes + (128 << 20)).clamp(256 << 20, 1 << 30));
            let args: Vec<String> = tool
                .args
                .iter()
                .map(|a| {
                    a.replace("{src}", &src.to_string_lossy())
                        .replace("{dst}", &dst.to_string_lossy())
                })
                .collect();
            let done = child::run(Command::new(program).args(&args))
                .map_err(|e| LabError::io("run", program, e))?;
            if !timed {
                continue;
            }
            let mut problems = Vec::new();
            if !done.status.success() {
                problems.push(format!(
                    "exit status {}: {}",
                    done.status,
                    done.stderr_text()
                ));
            }
            match verify(src, &dst, &tool.keeps, &mut |d| {
                if problems.len() < 5 {
                    problems.push(d.to_string());
                }
            }) {
                Ok(report) if !report.is_same() && problems.len() >= 5 => problems.push(format!(
                    "... {} differences in all",
                    report.total_differences
                )),
                Ok(_) => {}
                Err(e) => problems.push(e.to_string()),
            }
            let metadata = metadata_checked(&tool.keeps);
            results[i].runs.push(Run {
                seconds: done.usage.wall.as_secs_f64(),
                usage: done.usage,
                exit_code: done.status.code(),
                ok: done.status.success() && problems.is_empty(),
                problems,
                verified: if metadata.is_empty() {
                    "content"
                } else {
                    "content+metadata"
                },
                metadata_checked: metadata,
            });
        }
    }
    if dst.exists() {
        trash_n += 1;
        let _ = fs::rename(&dst, trash.join(trash_n.to_string()));
        trash_inodes += size.files + size.dirs;
    }
    empty_trash(&trash, trash_inodes, note)?;
    Ok(results)
}

/// Deleting many inodes makes every inode allocation on ext4 slow for about a minute after
/// (the "recently deleted" scan): wait that out, so the next timed copy does not pay for it.
const MANY_INODES: u64 = 1000;
const RECENTLY_DELETED: std::time::Duration = std::time::Duration::from_secs(61);

/// Removes the trash, then waits out ext4's recently-deleted window if it held many inodes.
fn empty_trash(trash: &Path, inodes: u64, note: &mut dyn FnMut(&str)) -> Result<(), LabError> {
    fs::remove_dir_all(trash).map_err(|e| LabError::io("remove", trash, e))?;
    if inodes >= MANY_INODES {
        note(&format!(
            "deleted {inodes} inodes: waiting {} s for ext4's recently-deleted window to pass",
            RECENTLY_DELETED.as_secs()
        ));
        std::thread::sleep(RECENTLY_DELETED);
    }
    Ok(())
}

/// Free bytes on the filesystem holding `dir` (unknown: plenty).
fn free_bytes(dir: &Path) -> u64 {
    rustix::fs::statvfs(dir).map_or(u64::MAX, |s| s.f_bavail * s.f_frsize)
}

/// Reads every file of the tree, so a warm run starts warm.
fn warm_tree(root: &Path) -> Result<(), LabError> {
    for_each_file(root, &mut |path| {
        let mut f = fs::File::open(path).map_err(|e| LabError::io("open", path, e))?;
        std::io::copy(&mut f, &mut std::io::sink()).map_err(|e| LabError::io("read", path, e))?;
        Ok(())
    })
}

/// Evicts every file of the tree from the page cache.
fn evict_tree(root: &Path) -> Result<(), LabError> {
    for_each_file(root, &mut |path| crate::cache::evict(path))
}

fn for_each_file(
    root: &Path,
    each: &mut dyn FnMut(&Path) -> Result<(), LabError>,
) -> Result<(), LabError> {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).map_err(|e| LabError::io("read directory", &dir, e))? {
            let entry = entry.map_err(|e| LabError::io("read directory", &dir, e))?;
            let kind = entry
                .file_type()
                .map_err(|e| LabError::io("stat", entry.path(), e))?;
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                each(&entry.path())?;
            }
        }
    }
    Ok(())
}

/// Faults in `bytes` of fresh anonymous memory and frees it, in a process of its own (`dd`
/// reading zeros into one buffer that size), so this process stays small and the peak RSS of
/// the tools it runs stays theirs.
fn touch_memory(bytes: u64) {
    let _ = Command::new("dd")
        .args([
            "if=/dev/zero",
            "of=/dev/null",
            "count=1",
            &format!("bs={bytes}"),
        ])
        .stderr(std::process::Stdio::null())
        .status();
}

/// The terminal table for one workload: median/min/max/stddev, MiB/s, files/s, peak RSS,
/// verification, and ratios against the fastest verified tool and against `cp`.
pub fn table(results: &[ToolRuns], size: &TreeSize) -> String {
    use std::fmt::Write;
    let ranked: Vec<(&ToolRuns, Stats)> = results
        .iter()
        .filter(|r| r.verified())
        .filter_map(|r| r.stats().map(|s| (r, s)))
        .collect();
    let fastest = ranked
        .iter()
        .map(|(_, s)| s.median)
        .fold(f64::INFINITY, f64::min);
    let cp = ranked
        .iter()
        .find(|(r, _)| r.tool == "cp")
        .map(|(_, s)| s.median);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<18} {:>8} {:>8} {:>8} {:>7} {:>9} {:>10} {:>8} {:>7} {:>7}  verified",
        "tool",
        "median s",
        "min s",
        "max s",
        "stddev",
        "MiB/s",
        "files/s",
        "RSS MiB",
        "×best",
        "×cp",
    );
    for r in results {
        if let Some(why) = &r.skipped {
            let _ = writeln!(out, "{:<18} skipped: {why}", r.tool);
            continue;
        }
        let Some(s) = r.stats() else { continue };
        let ok = r.verified();
        let ratio = |x: Option<f64>| match (ok, x) {
            (true, Some(x)) if x.is_finite() => format!("{:.2}", s.median / x),
            _ => "-".to_string(),
        };
        let verdict = if ok {
            "ok".to_string()
        } else {
            let first = r
                .runs
                .iter()
                .flat_map(|x| x.problems.first())
                .next()
                .cloned()
                .unwrap_or_default();
            format!("FAILED: {first}")
        };
        let _ = writeln!(
            out,
            "{:<18} {:>8.3} {:>8.3} {:>8.3} {:>7.3} {:>9.0} {:>10.0} {:>8} {:>7} {:>7}  {verdict}",
            r.tool,
            s.median,
            s.min,
            s.max,
            s.stddev,
            size.bytes as f64 / (1 << 20) as f64 / s.median.max(1e-9),
            size.files as f64 / s.median.max(1e-9),
            if s.max_rss_kib <= s.rss_floor_kib + 512 {
                format!("≤{:.1}", s.rss_floor_kib as f64 / 1024.0)
            } else {
                format!("{:.1}", s.max_rss_kib as f64 / 1024.0)
            },
            ratio(Some(fastest)),
            ratio(cp),
        );
    }
    out
}
