//! The destination of `bench sync` before each timed run: a faithful mirror of the workload's
//! tree, made once by a reference copy and then repaired between runs: whatever `ringio
//! verify` finds different from the tree (what the last sync changed, or broke) is moved to
//! the trash and copied again, and the directories around it get their metadata back. Nothing
//! is deleted, so no run pays for an earlier run's deletes.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use ringio_copy::quote::quote;
use ringio_copy::verify::{verify, Difference, DifferenceKind, VerifyOptions};

use crate::copybench::{reference_copy, tree_size, Trash};
use crate::error::LabError;

/// What the destination holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing: it does not exist.
    Absent,
    /// A mirror of the tree.
    Mirror,
    /// Whatever a tool left.
    Touched,
}

/// The destination directory and what it holds.
#[derive(Debug)]
pub(super) struct Dest {
    base: PathBuf,
    path: PathBuf,
    state: State,
    inodes: u64,
}

impl Dest {
    /// The destination `path` of syncs from trees made from `base` (moved to the trash when
    /// it is left over from an interrupted run).
    pub(super) fn new(base: &Path, path: PathBuf, trash: &mut Trash) -> Result<Dest, LabError> {
        let size = tree_size(base)?;
        // Absolute: the repairs run cp in the tree's directory.
        let absolute = |p: &Path| std::path::absolute(p).map_err(|e| LabError::io("resolve", p, e));
        let mut dest = Dest {
            base: absolute(base)?,
            path: absolute(&path)?,
            state: State::Absent,
            inodes: size.files + size.dirs,
        };
        dest.clear(trash)?;
        Ok(dest)
    }

    /// The directory.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Moves the destination into the trash: it does not exist any more.
    pub(super) fn clear(&mut self, trash: &mut Trash) -> Result<(), LabError> {
        trash.put(&self.path, self.inodes)?;
        self.state = State::Absent;
        Ok(())
    }

    /// A tool ran on it.
    pub(super) fn touched(&mut self) {
        self.state = State::Touched;
    }

    /// Makes the destination a mirror of the tree: a reference copy when there is none,
    /// otherwise the differences repaired (a fresh reference copy when they cannot be).
    pub(super) fn mirror(
        &mut self,
        trash: &mut Trash,
        note: &mut dyn FnMut(&str),
    ) -> Result<(), LabError> {
        if self.state == State::Touched {
            let diffs = differences(&self.base, &self.path, &VerifyOptions::archive())?;
            if diffs.is_empty() || self.repair(&diffs, trash)? {
                self.state = State::Mirror;
            } else {
                note("the destination could not be repaired into a mirror: copying it afresh");
                self.clear(trash)?;
            }
        }
        if self.state == State::Absent {
            reference_copy(&self.base, &self.path)?;
            self.state = State::Mirror;
        }
        Ok(())
    }

    /// Hard-links every non-directory under the destination's `paths` into the trash, so that
    /// a sync that deletes or replaces them frees no inode (ext4 would bill that to every
    /// create of the next minutes, in later timed runs). The extra link is outside the tree:
    /// the comparer does not see it.
    pub(super) fn keep_alive(&self, paths: &[PathBuf], trash: &mut Trash) -> Result<(), LabError> {
        if paths.is_empty() {
            return Ok(());
        }
        let slot = trash.slot();
        fs::create_dir(&slot).map_err(|e| LabError::io("create directory", &slot, e))?;
        let mut n = 0u64;
        let mut stack: Vec<PathBuf> = paths.iter().map(|p| self.path.join(p)).collect();
        while let Some(path) = stack.pop() {
            let Ok(meta) = fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                for entry in
                    fs::read_dir(&path).map_err(|e| LabError::io("read directory", &path, e))?
                {
                    let entry = entry.map_err(|e| LabError::io("read directory", &path, e))?;
                    stack.push(entry.path());
                }
            } else {
                n += 1;
                let link = slot.join(n.to_string());
                fs::hard_link(&path, &link).map_err(|e| LabError::io("link", &path, e))?;
            }
        }
        trash.add_inodes(n);
        Ok(())
    }

    /// Moves every differing entry to the trash and copies it again from the tree, then gives
    /// the directories around them the tree's mode, owner and times; true when a metadata
    /// check then finds the mirror exact.
    fn repair(&mut self, diffs: &[Difference], trash: &mut Trash) -> Result<bool, LabError> {
        let (recopy, dirs) = classify(diffs, &self.base, &self.path);
        if recopy.iter().any(|p| p.as_os_str().is_empty()) {
            return Ok(false);
        }
        let mut copy = Vec::new();
        for p in &recopy {
            let at = self.path.join(p);
            let inodes = match fs::symlink_metadata(&at) {
                Ok(m) if m.is_dir() => tree_size(&at).map_or(1, |s| s.files + s.dirs),
                _ => 1,
            };
            trash.put(&at, inodes)?;
            if fs::symlink_metadata(self.base.join(p)).is_ok() {
                copy.push(p.clone());
            }
        }
        for batch in copy.chunks(1000) {
            // `--parents` makes DEST/a/b from a/b; the directories exist, so only the entry is
            // made (with its subtree), as `cp -a` copies it.
            let out = Command::new("cp")
                .current_dir(&self.base)
                .args(["-a", "--parents", "-t"])
                .arg(&self.path)
                .arg("--")
                .args(batch)
                .output()
                .map_err(|e| LabError::io("run cp for", &self.base, e))?;
            if !out.status.success() {
                return Err(LabError::Invalid(format!(
                    "restoring {} from {} failed: {}",
                    quote(&self.path),
                    quote(&self.base),
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
        }
        let mut fix: Vec<PathBuf> = dirs;
        fix.extend(
            recopy
                .iter()
                .filter_map(|p| p.parent().map(Path::to_path_buf)),
        );
        fix.sort();
        fix.dedup();
        for dir in &fix {
            copy_dir_metadata(&self.base.join(dir), &self.path.join(dir))?;
        }
        let metadata_only = VerifyOptions {
            content: false,
            ..VerifyOptions::archive()
        };
        Ok(differences(&self.base, &self.path, &metadata_only)?.is_empty())
    }
}

/// Every difference between the trees `a` and `b`.
pub(super) fn differences(
    a: &Path,
    b: &Path,
    opts: &VerifyOptions,
) -> Result<Vec<Difference>, LabError> {
    let mut diffs = Vec::new();
    verify(a, b, opts, &mut |d| diffs.push(d.clone()))
        .map_err(|e| LabError::Invalid(e.to_string()))?;
    Ok(diffs)
}

/// The entries of `dst` a repair copies again from `base` (the topmost of each subtree), and
/// the directories whose metadata alone differs.
pub(super) fn classify(
    diffs: &[Difference],
    base: &Path,
    dst: &Path,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let is_dir = |p: &Path| fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    let mut recopy = Vec::new();
    let mut dirs = Vec::new();
    for d in diffs {
        let metadata = matches!(
            d.kind,
            DifferenceKind::Mode { .. }
                | DifferenceKind::Owner { .. }
                | DifferenceKind::Mtime { .. }
        );
        if metadata && is_dir(&base.join(&d.path)) && is_dir(&dst.join(&d.path)) {
            dirs.push(d.path.clone());
        } else {
            recopy.push(d.path.clone());
        }
    }
    recopy.sort();
    recopy.dedup();
    let mut top: Vec<PathBuf> = Vec::new();
    // Sorted by components, a subtree's entries follow its root.
    for p in recopy {
        if !top.last().is_some_and(|t| p.starts_with(t)) {
            top.push(p);
        }
    }
    dirs.retain(|d| {
        !d.ancestors()
            .any(|a| top.binary_search_by(|t| t.as_path().cmp(a)).is_ok())
    });
    (top, dirs)
}

/// Gives the directory `to` the mode, owner and times of `from`.
fn copy_dir_metadata(from: &Path, to: &Path) -> Result<(), LabError> {
    let m = fs::symlink_metadata(from).map_err(|e| LabError::io("stat", from, e))?;
    std::os::unix::fs::lchown(to, Some(m.uid()), Some(m.gid()))
        .map_err(|e| LabError::io("change the owner of", to, e))?;
    fs::set_permissions(to, fs::Permissions::from_mode(m.mode() & 0o7777))
        .map_err(|e| LabError::io("change the mode of", to, e))?;
    let times = rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: m.atime(),
            tv_nsec: m.atime_nsec() as _,
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: m.mtime(),
            tv_nsec: m.mtime_nsec() as _,
        },
    };
    rustix::fs::utimensat(
        rustix::fs::CWD,
        to,
        &times,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .map_err(|e| LabError::io("set the times of", to, e.into()))
}
