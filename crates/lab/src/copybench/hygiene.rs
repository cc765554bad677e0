//! What happens between timed runs, outside the timed region: the trash and ext4's
//! recently-deleted window, warming or evicting the source, and touching fresh memory.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::error::LabError;

/// ext4 without a journal (this machine's root) checks, for every inode it allocates, whether
/// the free slot was deleted recently (`recently_deleted` in fs/ext4/ialloc.c): within 60 s of
/// the deletion, or 360 s while the slot's inode-table block is dirty. Files created next to
/// such slots dirty the block again, so after a large delete every create pays for a scan for
/// up to six minutes: measured here, a 4,600-file copy took 1.5-2.1 s instead of 0.15-0.2 s
/// for four minutes after deleting 50,000 inodes. So the trash is kept until the whole run is
/// over, and emptied between timed runs only when the disk runs out of room, followed by the
/// full wait.
pub(super) const MANY_INODES: u64 = 1000;
const RECENTLY_DELETED: std::time::Duration = std::time::Duration::from_secs(361);

/// Removes the trash. With `wait` (more timed runs follow) and many inodes in it, writes the
/// deletions back and waits out ext4's recently-deleted window.
pub(super) fn empty_trash(
    trash: &Path,
    inodes: u64,
    wait: bool,
    note: &mut dyn FnMut(&str),
) -> Result<(), LabError> {
    if !trash.exists() {
        return Ok(());
    }
    fs::remove_dir_all(trash).map_err(|e| LabError::io("remove", trash, e))?;
    if wait && inodes >= MANY_INODES {
        rustix::fs::sync();
        note(&format!(
            "deleted {inodes} inodes: waiting {} s for ext4's recently-deleted window to pass",
            RECENTLY_DELETED.as_secs()
        ));
        std::thread::sleep(RECENTLY_DELETED);
    }
    Ok(())
}

/// Entries in the trash (copies left by earlier workloads of this run, or by an interrupted run).
pub(super) fn trash_entries(trash: &Path) -> u64 {
    fs::read_dir(trash).map_or(0, |d| d.count() as u64)
}

/// Free bytes on the filesystem holding `dir` (unknown: plenty).
pub(super) fn free_bytes(dir: &Path) -> u64 {
    rustix::fs::statvfs(dir).map_or(u64::MAX, |s| s.f_bavail * s.f_frsize)
}

/// Reads every file of the tree, so a warm run starts warm.
pub(super) fn warm_tree(root: &Path) -> Result<(), LabError> {
    for_each_file(root, &mut |path| {
        let mut f = fs::File::open(path).map_err(|e| LabError::io("open", path, e))?;
        std::io::copy(&mut f, &mut std::io::sink()).map_err(|e| LabError::io("read", path, e))?;
        Ok(())
    })
}

/// Evicts every file of the tree from the page cache.
pub(super) fn evict_tree(root: &Path) -> Result<(), LabError> {
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
pub(super) fn touch_memory(bytes: u64) {
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
