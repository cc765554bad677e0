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

mod hygiene;
mod report;
mod results;
mod suite;
mod tools;

use std::fs;
use std::path::Path;
use std::process::Command;

use ringio_copy::verify::verify;

use crate::error::LabError;
use hygiene::{
    empty_trash, evict_tree, free_bytes, touch_memory, trash_entries, warm_tree, MANY_INODES,
};
pub use report::table;
use results::metadata_checked;
pub use results::{Run, Stats, ToolRuns};
use ringio_base::child;
pub use suite::{prepare, standard_workloads, tree_size, TreeSize, Workload, WorkloadSource};
pub use tools::{find_program, resolve_tool, Tool, KNOWN_TOOLS};

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
            reference: t.reference,
            runs: Vec::new(),
        })
        .collect();
    let root = rustix::process::geteuid().is_root();
    if opts.cold && !root {
        note("not root: --cold evicts the source's files one by one (POSIX_FADV_DONTNEED) instead of dropping every cache");
    }
    // The trash carries over from earlier workloads of this run (see `finish`); their inodes
    // are not counted, so any of them counts as many.
    let mut trash_n = trash_entries(&trash);
    let mut trash_inodes = if trash_n > 0 { MANY_INODES } else { 0 };
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
                // Out of room: empty the trash now and wait out the ext4 delete trap (six
                // minutes; better than a full disk).
                note("disk nearly full: emptying the trash between runs");
                empty_trash(&trash, trash_inodes, true, note)?;
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
                // drop_caches syncs first; a warm run needs it as much.
                rustix::fs::sync();
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
            if tool.reference {
                results[i].runs.push(Run {
                    seconds: done.usage.wall.as_secs_f64(),
                    usage: done.usage,
                    exit_code: done.status.code(),
                    ok: problems.is_empty(),
                    problems,
                    verified: "none (a reference: reads the source, copies nothing)",
                    metadata_checked: Vec::new(),
                });
                continue;
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
    // A few inodes (big files) cost the next workload nothing; many stay until `finish`.
    if trash_inodes < MANY_INODES {
        empty_trash(&trash, trash_inodes, false, note)?;
    }
    Ok(results)
}

/// Empties what [`bench`] left in `work` once no timed run follows, and says so when the
/// next few minutes of creates on that filesystem will be slower for it.
pub fn finish(work: &Path, note: &mut dyn FnMut(&str)) -> Result<(), LabError> {
    let trash = work.join("trash");
    let entries = trash_entries(&trash);
    empty_trash(&trash, 0, false, note)?;
    if entries > 0 {
        note(
            "deleted the copies: on ext4 without a journal, files created on this filesystem \
             in the next 6 minutes are slower (its recently-deleted scan); wait before timing \
             anything else there",
        );
    }
    Ok(())
}
