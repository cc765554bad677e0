//! What `bench copy` and `bench sync` share on the command line: the trees to run on
//! (`--src`, or standard workloads made once under `--dir`) and the JSON document's header.

use ringio_copy::quote::quote;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use std::io::IsTerminal;

use ringio_lab::copybench::{
    prepare, standard_workloads, tree_size, TreeSize, Workload, WorkloadSource,
};
use ringio_lab::gen::Shape;

/// A tree to benchmark.
pub struct Source {
    /// Its name in tables and file names.
    pub name: String,
    /// What it is.
    pub description: String,
    /// Its root.
    pub path: PathBuf,
    /// How it was generated (standard generated workloads).
    pub shape: Option<Shape>,
    /// A standard workload, kept under --dir (not the user's own tree).
    pub standard: bool,
}

/// The trees: `src`, or the standard `workloads` (none: the small 1024x32k; `all`: every
/// one), each made once under `dir` after [`plan`] said what the run will do. A real tree this
/// machine lacks is skipped with a message.
pub fn sources(
    src: Option<&Path>,
    workloads: &[String],
    dir: &Path,
    plan: &Plan,
) -> Result<Vec<Source>> {
    if let Some(src) = src {
        if !src.is_dir() {
            bail!("--src {} is not a directory", quote(&src));
        }
        let name = src
            .file_name()
            .map_or("src".into(), |n| n.to_string_lossy().into_owned());
        plan.confirm(&[(name.clone(), tree_size(src)?)])?;
        return Ok(vec![Source {
            name,
            description: format!("the tree {}", src.display()),
            path: src.to_path_buf(),
            shape: None,
            standard: false,
        }]);
    }
    let suite = standard_workloads();
    let wanted: Vec<String> = if workloads.is_empty() {
        eprintln!(
            "no --workload given: the small 1024x32k (32 MiB); --workload all runs every one"
        );
        vec!["1024x32k".to_string()]
    } else if workloads == ["all"] {
        suite.iter().map(|w| w.name.to_string()).collect()
    } else {
        workloads.to_vec()
    };
    let mut picked = Vec::new();
    for name in wanted {
        let Some(w) = suite.iter().find(|w| w.name == name) else {
            let known: Vec<_> = suite.iter().map(|w| w.name).collect();
            bail!(
                "unknown workload '{name}' (known: {}, all)",
                known.join(", ")
            );
        };
        match expected_size(dir, w)? {
            Some(size) => picked.push((w, size)),
            None => eprintln!(
                "skipping workload {}: this machine has none of {}",
                w.name,
                match &w.source {
                    WorkloadSource::RealTree(candidates) => candidates.join(", "),
                    WorkloadSource::Generated(_) =>
                        unreachable!("a generated tree is never missing"),
                }
            ),
        }
    }
    plan.confirm(
        &picked
            .iter()
            .map(|(w, size)| (w.name.to_string(), *size))
            .collect::<Vec<_>>(),
    )?;
    let mut sources = Vec::new();
    for (w, _) in picked {
        eprintln!("preparing workload {} ({})", w.name, w.description);
        let Some(path) = prepare(dir, w)? else {
            continue;
        };
        let shape = match &w.source {
            WorkloadSource::Generated(s) => Some(s.clone()),
            WorkloadSource::RealTree(_) => None,
        };
        sources.push(Source {
            name: w.name.to_string(),
            description: w.description.to_string(),
            path,
            shape,
            standard: true,
        });
    }
    Ok(sources)
}

/// The size of workload `w` before it is made: measured if it was made before under `dir`,
/// else what its shape makes (the mix: 10.4 KiB a file on average, as seed 1 gives) or the
/// size of the real tree it copies (`None`: this machine has none).
fn expected_size(dir: &Path, w: &Workload) -> Result<Option<TreeSize>> {
    let made = dir.join("workloads").join(w.name);
    if made.join("complete").exists() {
        return Ok(Some(tree_size(&made.join("src"))?));
    }
    Ok(match &w.source {
        WorkloadSource::Generated(Shape::Uniform {
            files, size, dirs, ..
        }) => Some(TreeSize {
            files: *files,
            dirs: dirs + 1,
            bytes: files * size,
        }),
        WorkloadSource::Generated(Shape::Mix { files }) => Some(TreeSize {
            files: *files,
            dirs: files / 16,
            bytes: files * 10_600,
        }),
        WorkloadSource::RealTree(_) => match w.source.origin() {
            Some(origin) => Some(tree_size(&origin)?),
            None => None,
        },
    })
}

/// What a benchmark will do, said before it starts, and asked when it writes a lot.
pub struct Plan {
    /// What runs on each tree, in words (tools, scenarios).
    pub what: String,
    /// Timed and untimed runs on each tree, each writing about the tree's size.
    pub runs_per_tree: usize,
    /// Cold cache.
    pub cold: bool,
    /// Go on without asking (`--yes`).
    pub yes: bool,
}

/// Above this many bytes written, a run on a terminal asks first.
const ASK_ABOVE: u64 = 4 << 30;

impl Plan {
    /// Prints the plan for `trees` (name and size): what runs, what it writes, about how
    /// long it takes. When that is more than a few GiB and standard input is a terminal, asks
    /// first, and stops unless the answer is yes.
    pub fn confirm(&self, trees: &[(String, TreeSize)]) -> Result<()> {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let listed: Vec<String> = trees
            .iter()
            .map(|(name, t)| format!("{name} ({} files, {:.0} MiB)", t.files, mib(t.bytes)))
            .collect();
        let runs = self.runs_per_tree as u64;
        let written: u64 = trees.iter().map(|(_, t)| t.bytes * runs).sum();
        // A rough guess, for planning only: per run, half a second of settling (sync, the
        // source re-read or the caches dropped, fresh memory), the tree copied and verified
        // at about 400 MiB/s, and 100 us per file.
        let seconds: f64 = trees
            .iter()
            .map(|(_, t)| {
                let per_run = 0.5 + 2.0 * mib(t.bytes) / 400.0 + t.files as f64 * 100e-6;
                per_run * runs as f64 * if self.cold { 1.5 } else { 1.0 }
            })
            .sum();
        eprintln!(
            "plan: {}, round-robin, every result verified; trees: {}; about {:.1} GiB written \
             ({runs} copies of each tree, moved to a trash that is emptied at the end, or \
             sooner if the disk runs short); roughly {} (a guess)",
            self.what,
            listed.join(", "),
            written as f64 / (1u64 << 30) as f64,
            if seconds < 90.0 {
                format!("{seconds:.0} s")
            } else {
                format!("{:.0} min", seconds / 60.0)
            },
        );
        if written > ASK_ABOVE && !self.yes && std::io::stdin().is_terminal() {
            eprint!("go on? [y/N] ");
            let mut answer = String::new();
            std::io::stdin().read_line(&mut answer)?;
            if !matches!(answer.trim(), "y" | "Y" | "yes") {
                bail!("stopped before writing anything (--yes goes on without asking)");
            }
        }
        Ok(())
    }
}

/// Writes the JSON document: the command, the time, the cache state and runs, the machine,
/// then `records` (one per workload).
pub fn write_json(
    path: &Path,
    cold: bool,
    runs: usize,
    warmup: usize,
    machine: &ringio_lab::machine::Machine,
    records: Vec<serde_json::Value>,
) -> Result<()> {
    write_document(
        path,
        serde_json::json!({
            "cache": if cold { "cold" } else { "warm" },
            "runs": runs,
            "warmup": warmup,
            "machine": machine,
            "workloads": records,
        }),
    )
}

/// Writes a benchmark's JSON document: the command line and the time it ran, then `fields`
/// (an object).
pub fn write_document(path: &Path, fields: serde_json::Value) -> Result<()> {
    let mut doc = serde_json::json!({
        // The binary as `ringio`, not where it happens to live on this machine.
        "command": std::iter::once("ringio".to_string()).chain(std::env::args().skip(1)).collect::<Vec<_>>(),
        "unix_time": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
    });
    if let (Some(doc), serde_json::Value::Object(fields)) = (doc.as_object_mut(), fields) {
        doc.extend(fields);
    }
    std::fs::write(path, serde_json::to_string_pretty(&doc)?)
        .with_context(|| format!("cannot write {}", quote(&path)))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
