//! What `bench copy` and `bench sync` share on the command line: the trees to run on
//! (`--src`, or standard workloads made once under `--dir`) and the JSON document's header.

use ringio_copy::quote::quote;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use ringio_lab::copybench::{prepare, standard_workloads, WorkloadSource};
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

/// The trees: `src`, or the standard `workloads` (empty or `all`: every one), each made once
/// under `dir`; a real tree this machine lacks is skipped with a message.
pub fn sources(src: Option<&Path>, workloads: &[String], dir: &Path) -> Result<Vec<Source>> {
    let mut sources = Vec::new();
    if let Some(src) = src {
        if !src.is_dir() {
            bail!("--src {} is not a directory", quote(&src));
        }
        let name = src
            .file_name()
            .map_or("src".into(), |n| n.to_string_lossy().into_owned());
        sources.push(Source {
            name,
            description: format!("the tree {}", src.display()),
            path: src.to_path_buf(),
            shape: None,
            standard: false,
        });
        return Ok(sources);
    }
    let suite = standard_workloads();
    let wanted: Vec<String> = if workloads.is_empty() || workloads == ["all"] {
        suite.iter().map(|w| w.name.to_string()).collect()
    } else {
        workloads.to_vec()
    };
    for name in wanted {
        let Some(w) = suite.iter().find(|w| w.name == name) else {
            let known: Vec<_> = suite.iter().map(|w| w.name).collect();
            bail!(
                "unknown workload '{name}' (known: {}, all)",
                known.join(", ")
            );
        };
        eprintln!("preparing workload {} ({})", w.name, w.description);
        let Some(path) = prepare(dir, w)? else {
            let WorkloadSource::RealTree(candidates) = &w.source else {
                unreachable!("only a real tree can be missing")
            };
            eprintln!(
                "skipping workload {}: this machine has none of {}",
                w.name,
                candidates.join(", ")
            );
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
    let doc = serde_json::json!({
        // The binary as `ringio`, not where it happens to live on this machine.
        "command": std::iter::once("ringio".to_string()).chain(std::env::args().skip(1)).collect::<Vec<_>>(),
        "unix_time": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        "cache": if cold { "cold" } else { "warm" },
        "runs": runs,
        "warmup": warmup,
        "machine": machine,
        "workloads": records,
    });
    std::fs::write(path, serde_json::to_string_pretty(&doc)?)
        .with_context(|| format!("cannot write {}", quote(&path)))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
