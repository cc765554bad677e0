//! A cheap count of what a copy has to do, for a progress bar's total: entries and bytes of
//! regular files under the plan's roots. It runs beside the copy, never before it: getdents64
//! and one statx per entry, relative to directory descriptors, with no reads and no writes.
//!
//! The count is an estimate of the copy's work, following the plan roughly: `-L`/`-H`/`-P`
//! decide which symlinks are followed, `-x` stops at mount points, and without `-r` a
//! directory root counts nothing. Hard links count once per name, as the copy's counters do
//! not know better either. Entries that cannot be read are skipped, not reported: the copy
//! reports them.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir, Statx, StatxFlags};

use crate::plan::{CopyPlan, Dereference};
use crate::sys::Kind;

/// Open directories the count may hold at once (one per level below a root). Deeper levels
/// are not counted; the total is then low, and the bar says so by reaching it early.
const MAX_DEPTH: usize = 256;

/// The running totals, readable from another thread while the count goes on.
#[derive(Debug, Default)]
pub struct Totals {
    /// Entries that are not directories (files, symlinks, special files).
    pub files: AtomicU64,
    /// Directories.
    pub dirs: AtomicU64,
    /// Bytes of regular files.
    pub bytes: AtomicU64,
    done: AtomicBool,
    stop: AtomicBool,
}

impl Totals {
    /// True once the count has walked everything it will walk.
    pub fn done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Asks a running count to give up (the copy finished first).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Counts the plan's roots into `totals`, then marks them done. Meant for a thread of its own.
pub fn count(plan: &CopyPlan, totals: &Totals) {
    let follow_roots = plan.dereference != Dereference::Never;
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 64 << 10];
    for root in &plan.roots {
        if totals.stopped() {
            break;
        }
        // The stat the plan took.
        let Ok(stat) = root.source_stat(follow_roots) else {
            continue;
        };
        if stat.kind() != Kind::Dir {
            totals.files.fetch_add(1, Ordering::Relaxed);
            if stat.kind() == Kind::File {
                totals.bytes.fetch_add(stat.size, Ordering::Relaxed);
            }
            continue;
        }
        if !plan.recursive {
            continue;
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        if let Ok(dir) = rustix::fs::open(root.src.as_path(), flags, Mode::empty()) {
            totals.dirs.fetch_add(1, Ordering::Relaxed);
            let dev = (libc::major(stat.dev), libc::minor(stat.dev));
            let walk = Walk {
                totals,
                follow: plan.dereference == Dereference::Always,
                one_file_system: plan.one_file_system,
                dev,
            };
            walk.dir(dir.as_fd(), &mut buf, &mut vec![(dev.0, dev.1, stat.ino)]);
        }
    }
    totals.done.store(true, Ordering::Release);
}

struct Walk<'a> {
    totals: &'a Totals,
    follow: bool,
    one_file_system: bool,
    dev: (u32, u32),
}

impl Walk<'_> {
    /// Counts the entries of `dir`, then descends into its subdirectories one at a time, so
    /// only one descriptor per level is open. `ancestors` holds the directories on the way
    /// down, `dir` last: under `-L` a symlink back up is a loop, and is not followed.
    fn dir(
        &self,
        dir: BorrowedFd<'_>,
        buf: &mut [MaybeUninit<u8>],
        ancestors: &mut Vec<(u32, u32, u64)>,
    ) {
        let depth = ancestors.len();
        let mut subdirs: Vec<std::ffi::CString> = Vec::new();
        let mut raw = RawDir::new(dir, buf);
        while let Some(entry) = raw.next() {
            if self.totals.stopped() {
                return;
            }
            let Ok(entry) = entry else { break };
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            let Ok(stat) = statx(dir, name, self.follow) else {
                continue;
            };
            if FileType::from_raw_mode(stat.stx_mode.into()) == FileType::Directory {
                self.totals.dirs.fetch_add(1, Ordering::Relaxed);
                // -x: a mount point is copied as an empty directory.
                let same_fs = (stat.stx_dev_major, stat.stx_dev_minor) == self.dev;
                let looped = ancestors.contains(&id(&stat));
                if depth < MAX_DEPTH && !looped && (same_fs || !self.one_file_system) {
                    subdirs.push(name.to_owned());
                }
            } else {
                add_entry(self.totals, &stat);
            }
        }
        for name in subdirs {
            if self.totals.stopped() {
                return;
            }
            let mut flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
            if !self.follow {
                flags |= OFlags::NOFOLLOW;
            }
            let Ok(sub) = rustix::fs::openat(dir, name.as_c_str(), flags, Mode::empty()) else {
                continue;
            };
            // What was opened, not what was listed a moment ago.
            let Ok(stat) =
                rustix::fs::statx(sub.as_fd(), c"", AtFlags::EMPTY_PATH, StatxFlags::INO)
            else {
                continue;
            };
            if ancestors.contains(&id(&stat)) {
                continue;
            }
            ancestors.push(id(&stat));
            self.dir(sub.as_fd(), buf, ancestors);
            ancestors.pop();
        }
    }
}

/// A directory's identity: device and inode.
fn id(stat: &Statx) -> (u32, u32, u64) {
    (stat.stx_dev_major, stat.stx_dev_minor, stat.stx_ino)
}

fn add_entry(totals: &Totals, stat: &Statx) {
    totals.files.fetch_add(1, Ordering::Relaxed);
    if FileType::from_raw_mode(stat.stx_mode.into()) == FileType::RegularFile {
        totals.bytes.fetch_add(stat.stx_size, Ordering::Relaxed);
    }
}

fn statx<P: rustix::path::Arg>(
    dir: BorrowedFd<'_>,
    path: P,
    follow: bool,
) -> rustix::io::Result<Statx> {
    let flags = if follow {
        AtFlags::empty()
    } else {
        AtFlags::SYMLINK_NOFOLLOW
    };
    let want = StatxFlags::TYPE | StatxFlags::SIZE | StatxFlags::INO;
    rustix::fs::statx(dir, path, flags, want)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::CopyRoot;

    #[test]
    fn counts_files_bytes_and_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir_all(src.join("a/b")).unwrap();
        std::fs::write(src.join("one"), vec![1u8; 1000]).unwrap();
        std::fs::write(src.join("a/two"), vec![2u8; 20]).unwrap();
        std::fs::write(src.join("a/b/three"), b"").unwrap();
        std::os::unix::fs::symlink("one", src.join("link")).unwrap();
        let mut plan = plan_for(&src, &tmp.path().join("dst"));
        let totals = Totals::default();
        count(&plan, &totals);
        assert!(totals.done());
        assert_eq!(totals.files.load(Ordering::Relaxed), 4);
        assert_eq!(totals.dirs.load(Ordering::Relaxed), 3);
        assert_eq!(totals.bytes.load(Ordering::Relaxed), 1020);

        // -L: the symlink counts as the file it points to.
        plan.dereference = Dereference::Always;
        let totals = Totals::default();
        count(&plan, &totals);
        assert_eq!(totals.bytes.load(Ordering::Relaxed), 2020);

        // -L through a symlink back up: the loop is counted once, not followed.
        std::os::unix::fs::symlink("..", src.join("a/b/up")).unwrap();
        let totals = Totals::default();
        count(&plan, &totals);
        assert!(totals.done());
        assert_eq!(totals.bytes.load(Ordering::Relaxed), 2020);

        // Without -r a directory root is not copied, so nothing counts.
        plan.recursive = false;
        let totals = Totals::default();
        count(&plan, &totals);
        assert_eq!(totals.files.load(Ordering::Relaxed), 0);
        assert!(totals.done());
    }

    fn plan_for(src: &std::path::Path, dst: &std::path::Path) -> CopyPlan {
        let root = CopyRoot {
            parents: None,
            src: src.to_path_buf(),
            dst: dst.to_path_buf(),
            stat: None,
        };
        CopyPlan::new(vec![root], true)
    }
}
