//! What happens between timed runs, outside the timed region: the trash and ext4's
//! recently-deleted window, warming or evicting the source, and touching fresh memory.

use std::fs;
use std::path::{Path, PathBuf};
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

/// The trash of a benchmark's work directory: the copies and whatever else timed runs leave,
/// moved aside by rename (which frees no inode) and deleted only once no timed run follows, or
/// when the disk runs out of room. Entries left by earlier workloads of the same run count as
/// many inodes.
#[derive(Debug)]
pub struct Trash {
    dir: PathBuf,
    inodes: u64,
    /// The last slot's number: counted once, so a run that fills the trash entry by entry
    /// (a mirror's repairs) does not list it again for each (that was quadratic).
    last: std::cell::Cell<u64>,
}

impl Trash {
    /// The trash of `work` (`work/trash`), made if missing.
    pub fn open(work: &Path) -> Result<Trash, LabError> {
        let dir = work.join("trash");
        fs::create_dir_all(&dir).map_err(|e| LabError::io("create directory", &dir, e))?;
        let entries = trash_entries(&dir);
        let inodes = if entries > 0 { MANY_INODES } else { 0 };
        Ok(Trash {
            dir,
            inodes,
            last: std::cell::Cell::new(entries),
        })
    }

    /// A name in the trash that nothing has yet.
    pub fn slot(&self) -> PathBuf {
        let mut n = self.last.get();
        loop {
            n += 1;
            let path = self.dir.join(n.to_string());
            if fs::symlink_metadata(&path).is_err() {
                self.last.set(n);
                return path;
            }
        }
    }

    /// Moves `path`, if it exists, into the trash; it holds about `inodes` inodes.
    pub fn put(&mut self, path: &Path, inodes: u64) -> Result<(), LabError> {
        if fs::symlink_metadata(path).is_err() {
            return Ok(());
        }
        let aside = self.slot();
        fs::rename(path, &aside).map_err(|e| LabError::io("move aside", path, e))?;
        self.inodes += inodes;
        Ok(())
    }

    /// Counts `inodes` more that were put into a [`slot`](Self::slot) by other means.
    pub fn add_inodes(&mut self, inodes: u64) {
        self.inodes += inodes;
    }

    /// Empties the trash now when fewer than `need` bytes are free next to `work`, and waits
    /// out ext4's recently-deleted window (six minutes; better than a full disk).
    pub fn make_room(
        &mut self,
        work: &Path,
        need: u64,
        note: &mut dyn FnMut(&str),
    ) -> Result<(), LabError> {
        if free_bytes(work) >= need {
            return Ok(());
        }
        note("disk nearly full: emptying the trash between runs");
        empty_trash(&self.dir, self.inodes, true, note)?;
        self.inodes = 0;
        fs::create_dir_all(&self.dir).map_err(|e| LabError::io("create directory", &self.dir, e))
    }

    /// At the end of a workload: a few inodes (big files) cost the next workload nothing and
    /// are deleted now; many stay until [`finish`](super::finish).
    pub fn close(self, note: &mut dyn FnMut(&str)) -> Result<(), LabError> {
        if self.inodes < MANY_INODES {
            empty_trash(&self.dir, self.inodes, false, note)?;
        }
        Ok(())
    }
}

/// Readies the machine for a timed run, the same way for every tool: writes back what earlier
/// runs left dirty, then drops the caches (`cold`, as root; otherwise evicts the files of
/// `trees` one by one) or reads every file of `trees` (warm: idle page cache is paged out
/// here within a minute), and touches fresh memory for a run that moves about `bytes`.
pub fn settle(trees: &[&Path], cold: bool, bytes: u64) -> Result<(), LabError> {
    if cold {
        if rustix::process::geteuid().is_root() {
            crate::cache::drop_caches()?;
        } else {
            for tree in trees {
                evict_tree(tree)?;
            }
        }
    } else {
        // drop_caches syncs first; a warm run needs it as much.
        rustix::fs::sync();
        for tree in trees {
            warm_tree(tree)?;
        }
    }
    touch_memory((bytes + (128 << 20)).clamp(256 << 20, 1 << 30));
    Ok(())
}

/// The note a `--cold` run prints when it cannot drop every cache.
pub const COLD_NOT_ROOT: &str = "not root: --cold evicts the source's files one by one \
(POSIX_FADV_DONTNEED) instead of dropping every cache";

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
    if inodes >= MANY_INODES {
        // Said before the wait: a run stopped during it leaves the next one its note.
        stamp_deletes(trash.parent().unwrap_or(trash))?;
    }
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

/// The file left when a benchmark deleted many copies, its mtime saying when: beside the work
/// directory, so that `bench copy` and `bench sync` (`DIR/copies`, `DIR/syncs`) see each
/// other's.
fn deleted_stamp(work: &Path) -> std::path::PathBuf {
    work.parent().unwrap_or(work).join("deleted-copies")
}

/// Records that the copies of the work directory `work` were just deleted.
pub(super) fn stamp_deletes(work: &Path) -> Result<(), LabError> {
    let stamp = deleted_stamp(work);
    fs::write(&stamp, b"").map_err(|e| LabError::io("write", &stamp, e))
}

/// What to say before the first run when an earlier run deleted its copies in `work` less than
/// ext4's recently-deleted window ago: this run's first creates will be slower for it.
pub fn recent_deletes(work: &Path) -> Option<String> {
    let age = fs::metadata(deleted_stamp(work))
        .ok()?
        .modified()
        .ok()?
        .elapsed()
        .ok()?;
    let left = RECENTLY_DELETED.checked_sub(age)?;
    Some(format!(
        "an earlier benchmark deleted its copies here {} s ago: on ext4 without a journal, files \
         created on this filesystem are slower for another {} s (its recently-deleted scan), so \
         the first runs may be slow; wait that long for clean figures",
        age.as_secs(),
        left.as_secs()
    ))
}
