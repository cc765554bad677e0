//! The scenarios of `bench sync`, and the changed sources they sync from: made once from the
//! workload's tree by a reference copy and a seeded change, and kept beside it.

use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ringio_base::Prng;
use serde::Serialize;

use crate::copybench::reference_copy;
use crate::error::LabError;

/// What the destination holds before a sync, and what changed in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    /// The first sync, into a destination that does not exist.
    First,
    /// A re-sync with nothing changed.
    NoChange,
    /// 1% of the files rewritten (same size, new content, new mtime).
    Changed1,
    /// 10% of the files added and 10% deleted.
    AddDel10,
    /// One directory renamed.
    Rename,
}

impl Scenario {
    /// Every scenario, in the order they run.
    pub const ALL: [Scenario; 5] = [
        Scenario::First,
        Scenario::NoChange,
        Scenario::Changed1,
        Scenario::AddDel10,
        Scenario::Rename,
    ];

    /// The name on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::First => "first",
            Scenario::NoChange => "nochange",
            Scenario::Changed1 => "changed1",
            Scenario::AddDel10 => "addel10",
            Scenario::Rename => "rename",
        }
    }

    /// What it measures.
    pub fn description(self) -> &'static str {
        match self {
            Scenario::First => "the first sync, into a destination that does not exist",
            Scenario::NoChange => "a re-sync with no change",
            Scenario::Changed1 => {
                "a re-sync after 1% of the files were rewritten (same size, new content, new mtime)"
            }
            Scenario::AddDel10 => "a re-sync after 10% of the files were added and 10% deleted",
            Scenario::Rename => "a re-sync after a directory was renamed",
        }
    }

    /// Whether the source differs from the destination's starting mirror.
    pub fn changes_source(self) -> bool {
        matches!(
            self,
            Scenario::Changed1 | Scenario::AddDel10 | Scenario::Rename
        )
    }
}

impl std::str::FromStr for Scenario {
    type Err = LabError;

    fn from_str(s: &str) -> Result<Self, LabError> {
        Scenario::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                LabError::Invalid(crate::names::unknown(
                    "scenario",
                    s,
                    Scenario::ALL.iter().map(|x| x.name()),
                ))
            })
    }
}

/// A changed source, or why the scenario does not apply to this tree.
#[derive(Debug, Clone)]
pub enum Changed {
    /// The changed tree, and what was changed.
    Tree {
        /// Its root.
        src: PathBuf,
        /// What differs from the workload's tree.
        change: String,
    },
    /// The scenario cannot be made from this tree (a rename needs a subdirectory).
    NotApplicable(String),
}

/// Makes (once) the changed source of `scenario` from `base` under `root/<scenario>`: a
/// reference copy of `base` with the change applied. Files the change deletes are moved into
/// `root/<scenario>/aside` instead (deleting would slow the creates of the next minutes on
/// ext4). A tree made before is reused when its marker says it is complete; an incomplete one
/// is moved to `trash`.
pub fn prepare_changed(
    base: &Path,
    root: &Path,
    scenario: Scenario,
    trash: &mut crate::copybench::Trash,
) -> Result<Changed, LabError> {
    let dir = root.join(scenario.name());
    let src = dir.join("src");
    let marker = dir.join("complete");
    if let Ok(change) = fs::read_to_string(&marker) {
        return Ok(match change.strip_prefix("n/a: ") {
            Some(why) => Changed::NotApplicable(why.to_string()),
            None => Changed::Tree { src, change },
        });
    }
    trash.put(&dir, 1)?;
    fs::create_dir_all(&dir).map_err(|e| LabError::io("create directory", &dir, e))?;
    let entries = list(base)?;
    let mut rng = Prng::new(1);
    // What the change touches gets one new mtime, a day after the newest of the tree: far from
    // every old mtime and from the time of any sync (rsync compares mtimes to the second, so
    // a change made in the same second as the tree or as the sync would go unseen).
    let when = entries.iter().map(|e| e.mtime).max().unwrap_or(0) + 86_400;
    let changed = match scenario {
        Scenario::First | Scenario::NoChange => {
            return Err(LabError::Invalid(format!(
                "scenario {} does not change the source",
                scenario.name()
            )))
        }
        Scenario::Rename => match pick_dir(&entries) {
            None => Changed::NotApplicable("the tree has no subdirectory to rename".into()),
            Some((path, files)) => {
                reference_copy(base, &src)?;
                let mut to = path.as_os_str().to_owned();
                to.push("-renamed");
                let to = PathBuf::from(to);
                fs::rename(src.join(&path), src.join(&to))
                    .map_err(|e| LabError::io("rename", src.join(&path), e))?;
                stamp(&src, [to.parent().unwrap_or(Path::new(""))], when)?;
                Changed::Tree {
                    src,
                    change: format!(
                        "renamed the directory {} to {} ({files} files under it)",
                        path.display(),
                        to.display()
                    ),
                }
            }
        },
        Scenario::Changed1 => {
            let candidates: Vec<&Entry> = entries
                .iter()
                .filter(|e| e.kind == Kind::File && e.nlink == 1 && e.size > 0)
                .collect();
            let files = entries.iter().filter(|e| e.kind == Kind::File).count();
            let n = files.div_ceil(100).min(candidates.len());
            if n == 0 {
                Changed::NotApplicable("the tree has no file to rewrite".into())
            } else {
                reference_copy(base, &src)?;
                let chosen = choose(&candidates, n, &mut rng);
                for e in &chosen {
                    rewrite(&src.join(&e.path), &mut rng)?;
                }
                stamp(&src, chosen.iter().map(|e| e.path.as_path()), when)?;
                Changed::Tree {
                    src,
                    change: format!(
                        "rewrote {n} of {files} files in place (same size, new content, new mtime)"
                    ),
                }
            }
        }
        Scenario::AddDel10 => {
            let files: Vec<&Entry> = entries.iter().filter(|e| e.kind == Kind::File).collect();
            let candidates: Vec<&Entry> = files.iter().copied().filter(|e| e.nlink == 1).collect();
            let n = files.len().div_ceil(10).min(candidates.len());
            if n == 0 {
                Changed::NotApplicable("the tree has no file to delete".into())
            } else {
                reference_copy(base, &src)?;
                let aside = dir.join("aside");
                fs::create_dir_all(&aside)
                    .map_err(|e| LabError::io("create directory", &aside, e))?;
                let mut touched: Vec<PathBuf> = Vec::new();
                for (i, e) in choose(&candidates, n, &mut rng).into_iter().enumerate() {
                    let from = src.join(&e.path);
                    fs::rename(&from, aside.join(i.to_string()))
                        .map_err(|err| LabError::io("move aside", &from, err))?;
                    touched.extend(e.path.parent().map(Path::to_path_buf));
                }
                let dirs: Vec<&Entry> = entries.iter().filter(|e| e.kind == Kind::Dir).collect();
                let mut bytes = 0;
                for i in 0..n {
                    let dir = &rng.pick(&dirs).path;
                    let size = rng.pick(&files).size;
                    bytes += size;
                    let rel = dir.join(format!("sync-added-{i:06}.bin"));
                    let path = src.join(&rel);
                    let mut f =
                        fs::File::create(&path).map_err(|e| LabError::io("create", &path, e))?;
                    fill(&mut f, size, &mut rng).map_err(|e| LabError::io("write", &path, e))?;
                    touched.push(rel);
                    touched.push(dir.clone());
                }
                touched.sort();
                touched.dedup();
                stamp(&src, touched.iter().map(PathBuf::as_path), when)?;
                Changed::Tree {
                    src,
                    change: format!(
                        "added {n} files ({:.1} MiB) and deleted {n} of the {} files",
                        bytes as f64 / (1 << 20) as f64,
                        files.len()
                    ),
                }
            }
        }
    };
    let text = match &changed {
        Changed::Tree { change, .. } => change.clone(),
        Changed::NotApplicable(why) => format!("n/a: {why}"),
    };
    fs::write(&marker, text).map_err(|e| LabError::io("write", &marker, e))?;
    Ok(changed)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Other,
}

/// An entry of a tree, relative to its root (the root itself is the empty path).
#[derive(Debug, Clone)]
struct Entry {
    path: PathBuf,
    kind: Kind,
    nlink: u64,
    size: u64,
    mtime: i64,
}

/// Every entry of the tree, sorted by path (so the seeded picks are the same on every
/// machine).
fn list(root: &Path) -> Result<Vec<Entry>, LabError> {
    let mut out = vec![Entry {
        path: PathBuf::new(),
        kind: Kind::Dir,
        nlink: 1,
        size: 0,
        mtime: 0,
    }];
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        for entry in fs::read_dir(&dir).map_err(|e| LabError::io("read directory", &dir, e))? {
            let entry = entry.map_err(|e| LabError::io("read directory", &dir, e))?;
            let meta = entry
                .metadata()
                .map_err(|e| LabError::io("stat", entry.path(), e))?;
            let path = rel.join(entry.file_name());
            let kind = if meta.is_dir() {
                stack.push(path.clone());
                Kind::Dir
            } else if meta.is_file() {
                Kind::File
            } else {
                Kind::Other
            };
            out.push(Entry {
                path,
                kind,
                nlink: meta.nlink(),
                size: meta.len(),
                mtime: meta.mtime(),
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The subdirectory whose tree holds the number of files closest to a tenth of all files
/// (the first by name among equals), with that number; `None` for a flat tree.
fn pick_dir(entries: &[Entry]) -> Option<(PathBuf, usize)> {
    let mut under: std::collections::HashMap<&Path, usize> = std::collections::HashMap::new();
    let mut files: usize = 0;
    for e in entries.iter().filter(|e| e.kind != Kind::Dir) {
        files += 1;
        for dir in e.path.ancestors().skip(1) {
            *under.entry(dir).or_default() += 1;
        }
    }
    let target = files.div_ceil(10);
    entries
        .iter()
        .filter(|e| e.kind == Kind::Dir && !e.path.as_os_str().is_empty())
        .map(|d| {
            (
                d.path.clone(),
                under.get(d.path.as_path()).copied().unwrap_or(0),
            )
        })
        .min_by_key(|(_, n)| n.abs_diff(target))
}

/// `n` distinct items, chosen by `rng` (a partial Fisher-Yates shuffle of their indices).
fn choose<'a>(items: &[&'a Entry], n: usize, rng: &mut Prng) -> Vec<&'a Entry> {
    let mut idx: Vec<usize> = (0..items.len()).collect();
    for i in 0..n {
        let j = i + rng.below((idx.len() - i) as u64) as usize;
        idx.swap(i, j);
    }
    let mut picked: Vec<&Entry> = idx[..n].iter().map(|&i| items[i]).collect();
    picked.sort_by(|a, b| a.path.cmp(&b.path));
    picked
}

/// Writes new bytes over the whole file, in place (its size and inode stay; its mtime is now).
fn rewrite(path: &Path, rng: &mut Prng) -> Result<(), LabError> {
    let size = fs::metadata(path)
        .map_err(|e| LabError::io("stat", path, e))?
        .len();
    let mut f = fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| LabError::io("open", path, e))?;
    fill(&mut f, size, rng).map_err(|e| LabError::io("write", path, e))
}

fn fill(f: &mut fs::File, size: u64, rng: &mut Prng) -> std::io::Result<()> {
    let mut buf = vec![0u8; (1 << 20).min(size as usize)];
    let mut left = size;
    while left > 0 {
        let n = buf.len().min(left as usize);
        rng.fill(&mut buf[..n]);
        f.write_all(&buf[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// Gives the entries `paths` of the tree `root` the mtime (and atime) `secs`.5.
fn stamp<'a>(
    root: &Path,
    paths: impl IntoIterator<Item = &'a Path>,
    secs: i64,
) -> Result<(), LabError> {
    let at = rustix::fs::Timespec {
        tv_sec: secs,
        tv_nsec: 500_000_000,
    };
    let times = rustix::fs::Timestamps {
        last_access: at,
        last_modification: at,
    };
    for p in paths {
        let path = root.join(p);
        rustix::fs::utimensat(
            rustix::fs::CWD,
            &path,
            &times,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| LabError::io("set the times of", &path, e.into()))?;
    }
    Ok(())
}
