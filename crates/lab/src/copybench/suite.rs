//! The standard workloads, their source trees (generated once, or real trees found on the
//! machine) and the size of a tree.

use ringio_copy::quote::quote;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::error::LabError;
use crate::gen::{self, Shape};

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
    /// A copy of a real tree on this machine: the first of these directories that exists
    /// (`~` is the home directory). The workload is skipped when none does.
    RealTree(&'static [&'static str]),
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
        Workload { name: "src-tree", description: "a copy of a real source tree on this machine", source: WorkloadSource::RealTree(&["~/.cargo/registry/src", "/usr/include", "/usr/share/doc"]) },
        Workload { name: "usr-include", description: "a copy of /usr/include", source: WorkloadSource::RealTree(&["/usr/include"]) },
        Workload { name: "cargo-registry", description: "a copy of cargo's registry source tree (~/.cargo/registry/src)", source: WorkloadSource::RealTree(&["~/.cargo/registry/src"]) },
        Workload { name: "toolchain", description: "a copy of a language toolchain tree (Go's: /usr/local/go or /usr/lib/go)", source: WorkloadSource::RealTree(&["/usr/local/go", "/usr/lib/go"]) },
    ]
}

impl WorkloadSource {
    /// For a real tree, the first candidate directory that exists on this machine (`None`:
    /// none does, and the workload is skipped). A generated tree has no origin.
    pub fn origin(&self) -> Option<PathBuf> {
        let WorkloadSource::RealTree(candidates) = self else {
            return None;
        };
        let home = std::env::var("HOME").unwrap_or_default();
        candidates
            .iter()
            .map(|t| PathBuf::from(t.replacen('~', &home, 1)))
            .find(|p| p.is_dir())
    }
}

/// Makes (once) the workload's source tree under `dir`, and returns its path: `Ok(None)` for
/// a real tree that this machine does not have. A tree made before is reused when its marker
/// says it is complete.
pub fn prepare(dir: &Path, workload: &Workload) -> Result<Option<PathBuf>, LabError> {
    let root = dir.join("workloads").join(workload.name);
    let src = root.join("src");
    let marker = root.join("complete");
    if marker.exists() {
        return Ok(Some(src));
    }
    let origin = workload.source.origin();
    if matches!(workload.source, WorkloadSource::RealTree(_)) && origin.is_none() {
        return Ok(None);
    }
    if root.exists() {
        fs::remove_dir_all(&root).map_err(|e| LabError::io("remove", &root, e))?;
    }
    fs::create_dir_all(&root).map_err(|e| LabError::io("create directory", &root, e))?;
    match &workload.source {
        WorkloadSource::Generated(shape) => {
            gen::generate(&src, shape, 1)?;
        }
        WorkloadSource::RealTree(_) => {
            let origin = origin.expect("a real tree's origin");
            reference_copy(&origin, &src).map_err(|e| match e {
                LabError::Invalid(why) => {
                    LabError::Invalid(format!("{why} (for {})", workload.name))
                }
                e => e,
            })?;
        }
    }
    fs::write(&marker, workload.description).map_err(|e| LabError::io("write", &marker, e))?;
    Ok(Some(src))
}

/// Files, directories and bytes of a tree.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
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

/// A faithful copy of the tree `from` at `to` (which must not exist), made by GNU `cp -a`: not
/// by any tool under test.
pub fn reference_copy(from: &Path, to: &Path) -> Result<(), LabError> {
    let out = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .output()
        .map_err(|e| LabError::io("run cp for", from, e))?;
    if !out.status.success() {
        return Err(LabError::Invalid(format!(
            "copying {} failed: {}",
            quote(from),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}
