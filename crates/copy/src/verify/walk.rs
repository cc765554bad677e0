//! The walk over both trees: metadata as it goes, contents handed to the pool.

use std::collections::HashMap;
use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use crate::sys::{self, Kind, Stat};
use crate::xattr::{self, Subject};

use super::content::{Compared, ContentJob};
use super::difference::{Difference, DifferenceKind};
use super::report::{Follow, MadeAs, VerifyOptions, VerifyReport, KEPT_DIFFERENCES};

pub(super) struct Walk<'o> {
    pub(super) opts: &'o VerifyOptions,
    pub(super) work: Option<mpsc::SyncSender<ContentJob>>,
    pub(super) results: &'o mpsc::Receiver<Compared>,
    pub(super) on_difference: &'o mut dyn FnMut(&Difference),
    pub(super) report: VerifyReport,
    /// Source inode → (destination inode, first path) for inodes with several links.
    pub(super) links: HashMap<(u64, u64), ((u64, u64), PathBuf)>,
    /// The same, destination → source.
    pub(super) links_back: HashMap<(u64, u64), ((u64, u64), PathBuf)>,
    pub(super) dir_buf: Vec<MaybeUninit<u8>>,
}

fn kind_name(stat: &Stat) -> &'static str {
    match stat.mode & libc::S_IFMT {
        libc::S_IFREG => "regular file",
        libc::S_IFDIR => "directory",
        libc::S_IFLNK => "symbolic link",
        libc::S_IFIFO => "fifo",
        libc::S_IFSOCK => "socket",
        libc::S_IFCHR => "character device",
        libc::S_IFBLK => "block device",
        _ => "unknown",
    }
}

impl Walk<'_> {
    fn differ(&mut self, path: &Path, kind: DifferenceKind) {
        self.keep(Difference {
            path: path.to_path_buf(),
            kind,
        });
    }

    fn keep(&mut self, d: Difference) {
        (self.on_difference)(&d);
        self.report.total_differences += 1;
        if self.report.differences.len() < KEPT_DIFFERENCES {
            self.report.differences.push(d);
        }
    }

    /// Counts a worker's result.
    pub(super) fn take(&mut self, (difference, bytes): Compared) {
        self.report.bytes += bytes;
        if let Some(d) = difference {
            self.keep(d);
        }
    }

    fn unreadable(&mut self, path: &Path, side: &'static str, op: &'static str, e: io::Error) {
        self.differ(
            path,
            DifferenceKind::Unreadable {
                side,
                op,
                reason: crate::error::reason(&e).to_string(),
            },
        );
    }

    /// Compares the entry `src_name` of `src_dir` with `dst_name` of `dst_dir`.
    pub(super) fn entry(
        &mut self,
        src_dir: BorrowedFd<'_>,
        dst_dir: BorrowedFd<'_>,
        src_name: &CStr,
        dst_name: &CStr,
        path: PathBuf,
    ) {
        self.report.entries += 1;
        // Report content differences as they come, not all at the end.
        while let Ok(result) = self.results.try_recv() {
            self.take(result);
        }
        // The roots are the entries with an empty path.
        let follow = match self.opts.follow {
            Follow::Never => false,
            Follow::Roots => path.as_os_str().is_empty(),
            Follow::Always => true,
        };
        let s = match sys::statx_at(src_dir, src_name, follow) {
            Ok(s) => s,
            Err(e) => return self.unreadable(&path, "source", "stat", e),
        };
        let d = match sys::statx_at(dst_dir, dst_name, false) {
            Ok(d) => d,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                return self.differ(&path, DifferenceKind::Missing)
            }
            Err(e) => return self.unreadable(&path, "destination", "stat", e),
        };
        if s.kind() != Kind::Dir && self.opts.made_as != MadeAs::Copies {
            return self.linked(dst_dir, dst_name, &path, &s, &d, follow);
        }
        if s.mode & libc::S_IFMT != d.mode & libc::S_IFMT {
            let (src, dst) = (kind_name(&s), kind_name(&d));
            return self.differ(&path, DifferenceKind::Type { src, dst });
        }
        self.metadata(&path, &s, &d);
        if self.opts.hard_links && s.kind() != Kind::Dir {
            self.hard_links(&path, &s, &d);
        }
        let opened = match s.kind() {
            Kind::Dir => true,
            Kind::File => self.opts.content,
            Kind::Symlink | Kind::Special => false,
        };
        if self.opts.xattrs && !opened {
            // Entries the comparison does not open (a FIFO or a device would act on it) are
            // named through their directory.
            let src = Subject::at(src_dir, src_name, follow);
            let dst = Subject::at(dst_dir, dst_name, false);
            self.xattrs(&path, src, dst);
        }
        match s.kind() {
            Kind::Dir => self.directory(src_dir, dst_dir, src_name, dst_name, &path, follow),
            Kind::File => self.file(
                (src_dir, src_name),
                (dst_dir, dst_name),
                path,
                (&s, &d),
                follow,
            ),
            Kind::Symlink => {
                let targets = (
                    sys::readlinkat(src_dir, src_name, s.size),
                    sys::readlinkat(dst_dir, dst_name, d.size),
                );
                match targets {
                    (Ok(a), Ok(b)) if a != b => {
                        self.differ(&path, DifferenceKind::SymlinkTarget { src: a, dst: b })
                    }
                    (Err(e), _) => self.unreadable(&path, "source", "read symbolic link", e),
                    (_, Err(e)) => self.unreadable(&path, "destination", "read symbolic link", e),
                    _ => {}
                }
            }
            Kind::Special => {
                let device = matches!(s.mode & libc::S_IFMT, libc::S_IFCHR | libc::S_IFBLK);
                if device && s.rdev != d.rdev {
                    self.differ(
                        &path,
                        DifferenceKind::Device {
                            src: s.rdev,
                            dst: d.rdev,
                        },
                    );
                }
            }
        }
    }

    /// `cp -l` and `-s`: the destination entry must be a hard link to the source entry `s`
    /// (its inode), or a symlink whose target, read from the destination's directory, leads to
    /// it (followed as the source was).
    fn linked(
        &mut self,
        dst_dir: BorrowedFd<'_>,
        dst_name: &CStr,
        path: &Path,
        s: &Stat,
        d: &Stat,
        follow: bool,
    ) {
        let source = (s.dev, s.ino);
        let (expected, reached) = if self.opts.made_as == MadeAs::HardLinks {
            ("a hard link", Some((d.dev, d.ino)))
        } else if d.kind() != Kind::Symlink {
            ("a symbolic link", None)
        } else {
            let target = match sys::readlinkat(dst_dir, dst_name, d.size) {
                Ok(t) => t,
                Err(e) => return self.unreadable(path, "destination", "read symbolic link", e),
            };
            let reached = CString::new(target)
                .ok()
                .and_then(|t| sys::statx_at(dst_dir, &t, follow).ok())
                .map(|t| (t.dev, t.ino));
            ("a symbolic link", reached)
        };
        if reached != Some(source) {
            self.differ(path, DifferenceKind::NotLinked { expected });
        }
    }

    fn metadata(&mut self, path: &Path, s: &Stat, d: &Stat) {
        let symlink = s.kind() == Kind::Symlink;
        if self.opts.mode && !symlink && s.perm() != d.perm() {
            let (src, dst) = (s.perm(), d.perm());
            self.differ(path, DifferenceKind::Mode { src, dst });
        }
        if self.opts.ownership && (s.uid, s.gid) != (d.uid, d.gid) {
            let (src, dst) = ((s.uid, s.gid), (d.uid, d.gid));
            self.differ(path, DifferenceKind::Owner { src, dst });
        }
        if self.opts.mtime && s.mtime != d.mtime {
            let (src, dst) = (s.mtime, d.mtime);
            self.differ(path, DifferenceKind::Mtime { src, dst });
        }
    }

    fn hard_links(&mut self, path: &Path, s: &Stat, d: &Stat) {
        let (sk, dk) = ((s.dev, s.ino), (d.dev, d.ino));
        if s.nlink > 1 {
            match self.links.get(&sk) {
                Some((first_dst, first)) if *first_dst != dk => {
                    let other = first.clone();
                    let linked_in = "source";
                    self.differ(path, DifferenceKind::HardLinks { other, linked_in });
                }
                Some(_) => {}
                None => {
                    self.links.insert(sk, (dk, path.to_path_buf()));
                }
            }
        }
        if d.nlink > 1 {
            match self.links_back.get(&dk) {
                Some((first_src, first)) if *first_src != sk => {
                    let other = first.clone();
                    let linked_in = "destination";
                    self.differ(path, DifferenceKind::HardLinks { other, linked_in });
                }
                Some(_) => {}
                None => {
                    self.links_back.insert(dk, (sk, path.to_path_buf()));
                }
            }
        }
    }

    /// Compares the regular files `src_name` of `src_dir` and `dst_name` of `dst_dir`
    /// (stated as `s` and `d`), named `path` in the report.
    fn file(
        &mut self,
        (src_dir, src_name): (BorrowedFd<'_>, &CStr),
        (dst_dir, dst_name): (BorrowedFd<'_>, &CStr),
        path: PathBuf,
        (s, d): (&Stat, &Stat),
        follow: bool,
    ) {
        if !self.opts.content {
            // --attributes-only: metadata alone (xattrs were compared by name), and files keep
            // whatever content they had.
            return;
        }
        // Sizes differ without a read only when both are given: a size of 0 may be no size at
        // all (/proc and /sys files say 0 and hold bytes), and then the contents decide.
        if s.size != d.size && s.size != 0 && d.size != 0 {
            let (src, dst) = (s.size, d.size);
            return self.differ(&path, DifferenceKind::Size { src, dst });
        }
        if self.opts.sparseness && s.looks_sparse() {
            let (src_allocated, dst_allocated) = (s.blocks * 512, d.blocks * 512);
            // Filesystems round allocations up (and xfs preallocates): allow some slack.
            let slack = (src_allocated / 8).max(256 << 10);
            if dst_allocated > src_allocated + slack {
                self.differ(
                    &path,
                    DifferenceKind::Sparseness {
                        src_allocated,
                        dst_allocated,
                    },
                );
            }
        }
        let open = |dir, name, follow: bool| {
            let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
            sys::openat(dir, name, libc::O_RDONLY | nofollow | libc::O_NOATIME, 0)
                .or_else(|_| sys::openat(dir, name, libc::O_RDONLY | nofollow, 0))
        };
        let src = match open(src_dir, src_name, follow) {
            Ok(fd) => fd,
            Err(e) => return self.unreadable(&path, "source", "open", e),
        };
        let dst = match open(dst_dir, dst_name, false) {
            Ok(fd) => fd,
            Err(e) => return self.unreadable(&path, "destination", "open", e),
        };
        if self.opts.uncached {
            if let Err(e) = sys::drop_cached_pages(dst.as_fd()) {
                return self.unreadable(&path, "destination", "drop the cached pages of", e);
            }
        }
        if self.opts.xattrs {
            self.xattrs(&path, Subject::Fd(src.as_fd()), Subject::Fd(dst.as_fd()));
        }
        let stated = (s.size, d.size);
        let job = ContentJob {
            path,
            src,
            dst,
            stated,
        };
        if let Some(work) = &self.work {
            // The pool outlives the walk, so a send only fails if every worker died.
            let _ = work.send(job);
        }
    }

    fn directory(
        &mut self,
        src_dir: BorrowedFd<'_>,
        dst_dir: BorrowedFd<'_>,
        src_name: &CStr,
        dst_name: &CStr,
        path: &Path,
        follow: bool,
    ) {
        let src = match sys::open_dir(src_dir, src_name, follow) {
            Ok(fd) => fd,
            Err(e) => return self.unreadable(path, "source", "open directory", e),
        };
        let dst = match sys::open_dir(dst_dir, dst_name, false) {
            Ok(fd) => fd,
            Err(e) => return self.unreadable(path, "destination", "open directory", e),
        };
        if self.opts.xattrs {
            self.xattrs(path, Subject::Fd(src.as_fd()), Subject::Fd(dst.as_fd()));
        }
        let (src_names, dst_names) = match (self.list(src.as_fd()), self.list(dst.as_fd())) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) => return self.unreadable(path, "source", "read directory", e),
            (_, Err(e)) => return self.unreadable(path, "destination", "read directory", e),
        };
        // Both lists are sorted: walk them together.
        let (mut i, mut j) = (0, 0);
        while i < src_names.len() || j < dst_names.len() {
            let order = match (src_names.get(i), dst_names.get(j)) {
                (Some(a), Some(b)) => a.as_bytes().cmp(b.as_bytes()),
                (Some(_), None) => std::cmp::Ordering::Less,
                _ => std::cmp::Ordering::Greater,
            };
            match order {
                std::cmp::Ordering::Less => {
                    let name = &src_names[i];
                    self.report.entries += 1;
                    self.differ(
                        &path.join(OsStr::from_bytes(name.as_bytes())),
                        DifferenceKind::Missing,
                    );
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    let name = &dst_names[j];
                    self.differ(
                        &path.join(OsStr::from_bytes(name.as_bytes())),
                        DifferenceKind::Extra,
                    );
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    let name = &src_names[i];
                    let child = path.join(OsStr::from_bytes(name.as_bytes()));
                    self.entry(src.as_fd(), dst.as_fd(), name, name, child);
                    i += 1;
                    j += 1;
                }
            }
        }
    }

    /// The names in a directory, sorted.
    fn list(&mut self, dir: BorrowedFd<'_>) -> io::Result<Vec<CString>> {
        let mut names = Vec::new();
        sys::read_dir_entries(dir, &mut self.dir_buf, |name, _| {
            names.push(name.to_owned())
        })?;
        names.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        Ok(names)
    }

    fn xattrs(&mut self, path: &Path, src: Subject<'_>, dst: Subject<'_>) {
        let (mut a, mut b) = match (xattr::read_all(src), xattr::read_all(dst)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) => return self.unreadable(path, "source", "list extended attributes", e),
            (_, Err(e)) => {
                return self.unreadable(path, "destination", "list extended attributes", e)
            }
        };
        if !self.opts.mode {
            // ACLs are part of the mode, which cp keeps with them or not at all.
            a.retain(|(name, _)| !xattr::is_acl(name.to_bytes()));
            b.retain(|(name, _)| !xattr::is_acl(name.to_bytes()));
        }
        for (name, value) in &a {
            let what = match b.iter().find(|(n, _)| n == name) {
                None => "missing from the destination",
                Some((_, v)) if v != value => "different values",
                Some(_) => continue,
            };
            let name = name.to_string_lossy().into_owned();
            self.differ(path, DifferenceKind::Xattr { name, what });
        }
        for (name, _) in &b {
            if !a.iter().any(|(n, _)| n == name) {
                let name = name.to_string_lossy().into_owned();
                let what = "only in the destination";
                self.differ(path, DifferenceKind::Xattr { name, what });
            }
        }
    }
}
