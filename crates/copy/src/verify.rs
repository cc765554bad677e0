//! `ringio verify`: compares two trees entry by entry. The one comparer that `ringio cp
//! --verify`, the benchmarks and users share.
//!
//! The walk is relative to directory descriptors, like the copy's, so trees deeper than
//! `PATH_MAX` compare too. Metadata is compared as the walk goes; file contents are compared by
//! a pool of threads that read both files in 1 MiB blocks (comparing the bytes themselves, which
//! is stronger than a hash and as fast: both files must be read either way). Memory stays
//! bounded: one directory listing per level, a bounded queue of open file pairs, and a map of
//! the inodes that have more than one link.

use std::collections::HashMap;
use std::ffi::{CStr, CString, OsStr};
use std::fmt;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use crate::sys::{self, Kind, Stat};

/// What [`verify`] compares beyond names, types, sizes, content and symlink targets, which it
/// always compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyOptions {
    /// Permission bits, with setuid, setgid and sticky (not for symlinks).
    pub mode: bool,
    /// Owner and group.
    pub ownership: bool,
    /// Modification time, to the nanosecond (access times move when a tree is read, so they
    /// are never compared).
    pub mtime: bool,
    /// Extended attributes (ACLs included) of files and directories.
    pub xattrs: bool,
    /// Files hard-linked together in one tree are hard-linked together in the other, and no
    /// others.
    pub hard_links: bool,
    /// A file with holes has holes in the copy too: it allocates no more than the source
    /// (within a small allowance for the filesystem's allocation granularity).
    pub sparseness: bool,
    /// Threads reading file contents.
    pub threads: usize,
}

impl VerifyOptions {
    /// Names, types, sizes, content, symlink targets: what every copy must get right.
    pub fn content_only() -> Self {
        VerifyOptions {
            mode: false,
            ownership: false,
            mtime: false,
            xattrs: false,
            hard_links: false,
            sparseness: false,
            threads: default_threads(),
        }
    }

    /// Everything `cp -a` promises.
    pub fn archive() -> Self {
        VerifyOptions {
            mode: true,
            ownership: true,
            mtime: true,
            xattrs: true,
            hard_links: true,
            sparseness: true,
            threads: default_threads(),
        }
    }
}

fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 16)
}

/// One way in which the trees differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DifferenceKind {
    /// In the source, not in the destination.
    Missing,
    /// In the destination, not in the source.
    Extra,
    /// Different file types.
    Type {
        /// The source's type.
        src: &'static str,
        /// The destination's type.
        dst: &'static str,
    },
    /// Different sizes.
    Size {
        /// The source's size.
        src: u64,
        /// The destination's size.
        dst: u64,
    },
    /// Same size, different bytes.
    Content {
        /// The first byte that differs.
        offset: u64,
    },
    /// Different permission bits.
    Mode {
        /// The source's mode.
        src: u32,
        /// The destination's mode.
        dst: u32,
    },
    /// Different owner or group.
    Owner {
        /// The source's uid:gid.
        src: (u32, u32),
        /// The destination's uid:gid.
        dst: (u32, u32),
    },
    /// Different modification times.
    Mtime {
        /// The source's mtime.
        src: (i64, u32),
        /// The destination's mtime.
        dst: (i64, u32),
    },
    /// Symlinks pointing elsewhere.
    SymlinkTarget {
        /// The source's target.
        src: Vec<u8>,
        /// The destination's target.
        dst: Vec<u8>,
    },
    /// Device nodes with different numbers.
    Device {
        /// The source's rdev.
        src: u64,
        /// The destination's rdev.
        dst: u64,
    },
    /// An extended attribute missing, extra or with another value.
    Xattr {
        /// The attribute.
        name: String,
        /// What is wrong with it.
        what: &'static str,
    },
    /// Hard-link grouping differs: the entry is (or is not) linked to an earlier one.
    HardLinks {
        /// The earlier entry of the group, in the tree where the link exists.
        other: PathBuf,
        /// Which tree has the link.
        linked_in: &'static str,
    },
    /// The source has holes and the copy allocates more.
    Sparseness {
        /// Bytes allocated to the source.
        src_allocated: u64,
        /// Bytes allocated to the copy.
        dst_allocated: u64,
    },
    /// The entry could not be read on one side.
    Unreadable {
        /// Which side.
        side: &'static str,
        /// What was being done.
        op: &'static str,
        /// Why it failed.
        reason: String,
    },
}

/// A difference and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The entry, relative to the roots (empty for the roots themselves).
    pub path: PathBuf,
    /// What differs.
    pub kind: DifferenceKind,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.as_os_str().is_empty() {
            f.write_str(".: ")?;
        } else {
            write!(f, "{}: ", Escaped(self.path.as_os_str().as_bytes()))?;
        }
        use DifferenceKind as D;
        match &self.kind {
            D::Missing => write!(f, "missing from the destination"),
            D::Extra => write!(f, "only in the destination"),
            D::Type { src, dst } => write!(f, "type: {src} in the source, {dst} in the destination"),
            D::Size { src, dst } => write!(f, "size: {src} bytes in the source, {dst} in the destination"),
            D::Content { offset } => write!(f, "content differs from byte {offset}"),
            D::Mode { src, dst } => write!(f, "mode: {src:04o} in the source, {dst:04o} in the destination"),
            D::Owner { src, dst } => write!(
                f,
                "owner: {}:{} in the source, {}:{} in the destination",
                src.0, src.1, dst.0, dst.1
            ),
            D::Mtime { src, dst } => write!(
                f,
                "mtime: {}.{:09} in the source, {}.{:09} in the destination",
                src.0, src.1, dst.0, dst.1
            ),
            D::SymlinkTarget { src, dst } => write!(
                f,
                "symlink target: '{}' in the source, '{}' in the destination",
                Escaped(src),
                Escaped(dst)
            ),
            D::Device { src, dst } => write!(
                f,
                "device: {}:{} in the source, {}:{} in the destination",
                libc::major(*src),
                libc::minor(*src),
                libc::major(*dst),
                libc::minor(*dst)
            ),
            D::Xattr { name, what } => write!(f, "extended attribute {name}: {what}"),
            D::HardLinks { other, linked_in } => write!(
                f,
                "hard links: linked to '{}' only in the {linked_in}",
                other.display()
            ),
            D::Sparseness {
                src_allocated,
                dst_allocated,
            } => write!(
                f,
                "holes lost: {src_allocated} bytes allocated in the source, {dst_allocated} in the destination"
            ),
            D::Unreadable { side, op, reason } => write!(f, "cannot {op} in the {side}: {reason}"),
        }
    }
}

/// A name as text on one line: control characters (a newline in a file name, say) are shown
/// as `\n`, `\t` or `\xNN`, and bytes that are not UTF-8 as `\xNN`.
struct Escaped<'a>(&'a [u8]);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for chunk in self.0.utf8_chunks() {
            for c in chunk.valid().chars() {
                match c {
                    '\n' => f.write_str("\\n")?,
                    '\t' => f.write_str("\\t")?,
                    '\\' => f.write_str("\\\\")?,
                    c if c.is_control() => write!(f, "\\x{:02x}", c as u32)?,
                    c => write!(f, "{c}")?,
                }
            }
            for b in chunk.invalid() {
                write!(f, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}

/// What a comparison found.
#[derive(Debug, Clone, Default)]
pub struct VerifyReport {
    /// Entries compared (the roots included).
    pub entries: u64,
    /// Bytes of file content compared (per side).
    pub bytes: u64,
    /// The first differences found (at most [`KEPT_DIFFERENCES`]); every one was also passed to
    /// the caller's callback.
    pub differences: Vec<Difference>,
    /// How many differences there were in all.
    pub total_differences: u64,
}

/// How many differences a [`VerifyReport`] keeps.
pub const KEPT_DIFFERENCES: usize = 1000;

impl VerifyReport {
    /// True when the trees are the same.
    pub fn is_same(&self) -> bool {
        self.total_differences == 0
    }
}

/// A comparison that could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot {op} '{}': {}", path.display(), crate::error::reason(source))]
pub struct VerifyError {
    /// What was being done.
    pub op: &'static str,
    /// The root it failed on.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: io::Error,
}

/// Compares the tree (or file, or symlink) at `src` with the one at `dst`. Symlinks are never
/// followed, the roots included. Each difference is passed to `on_difference` as it is found,
/// on the calling thread.
pub fn verify(
    src: &Path,
    dst: &Path,
    opts: &VerifyOptions,
    on_difference: &mut dyn FnMut(&Difference),
) -> Result<VerifyReport, VerifyError> {
    let root = |path: &Path| -> Result<(OwnedFd, CString, Stat), VerifyError> {
        let err = |op, source| VerifyError {
            op,
            path: path.to_path_buf(),
            source,
        };
        let bytes = path.as_os_str().as_bytes();
        let c = CString::new(bytes).map_err(|_| err("stat", io::ErrorKind::InvalidInput.into()))?;
        let stat = sys::statx_at(rustix::fs::CWD, &c, false).map_err(|e| err("stat", e))?;
        // The parent directory, so the root is compared like any other entry.
        let (parent, name) = match path.file_name() {
            Some(name) if stat.kind() != Kind::Dir || path.parent().is_some() => {
                let parent = match path.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p,
                    _ => Path::new("."),
                };
                (parent.to_path_buf(), name.as_bytes().to_vec())
            }
            _ => (path.to_path_buf(), b".".to_vec()),
        };
        let parent_c = CString::new(parent.as_os_str().as_bytes())
            .map_err(|_| err("open", io::ErrorKind::InvalidInput.into()))?;
        let fd = sys::open_dir(rustix::fs::CWD, &parent_c, true).map_err(|e| err("open", e))?;
        let name =
            CString::new(name).map_err(|_| err("open", io::ErrorKind::InvalidInput.into()))?;
        Ok((fd, name, stat))
    };
    let (src_parent, src_name, _) = root(src)?;
    let (dst_parent, dst_name, _) = root(dst)?;

    let (work_tx, work_rx) = mpsc::sync_channel::<ContentJob>(opts.threads.max(1) * 4);
    let work_rx = std::sync::Mutex::new(work_rx);
    let (found_tx, found_rx) = mpsc::channel::<Compared>();
    std::thread::scope(|scope| {
        for _ in 0..opts.threads.max(1) {
            let found_tx = found_tx.clone();
            let work_rx = &work_rx;
            scope.spawn(move || {
                let mut bufs = (vec![0u8; BLOCK], vec![0u8; BLOCK]);
                loop {
                    let job = match work_rx.lock().expect("work queue").recv() {
                        Ok(job) => job,
                        Err(_) => return,
                    };
                    if found_tx.send(compare_content(&job, &mut bufs)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(found_tx);
        let mut walk = Walk {
            opts,
            work: Some(work_tx),
            results: &found_rx,
            on_difference,
            report: VerifyReport::default(),
            links: HashMap::new(),
            links_back: HashMap::new(),
            dir_buf: vec![MaybeUninit::uninit(); 64 * 1024],
        };
        walk.entry(
            src_parent.as_fd(),
            dst_parent.as_fd(),
            &src_name,
            &dst_name,
            PathBuf::new(),
        );
        // Closing the queue lets the workers finish what is queued and stop.
        walk.work = None;
        while let Ok(result) = found_rx.recv() {
            walk.take(result);
        }
        Ok(walk.report)
    })
}

const BLOCK: usize = 1 << 20;

/// A pair of open regular files whose contents a worker compares.
struct ContentJob {
    path: PathBuf,
    src: OwnedFd,
    dst: OwnedFd,
}

/// A worker's verdict on one file: a difference, if any, and the bytes compared.
type Compared = (Option<Difference>, u64);

fn compare_content(job: &ContentJob, bufs: &mut (Vec<u8>, Vec<u8>)) -> Compared {
    let unreadable = |side, e: io::Error| Difference {
        path: job.path.clone(),
        kind: DifferenceKind::Unreadable {
            side,
            op: "read",
            reason: crate::error::reason(&e).to_string(),
        },
    };
    let mut offset = 0u64;
    loop {
        let (a, b) = (&mut bufs.0, &mut bufs.1);
        let n = match read_full(job.src.as_fd(), a, offset) {
            Ok(n) => n,
            Err(e) => return (Some(unreadable("source", e)), offset),
        };
        let m = match read_full(job.dst.as_fd(), b, offset) {
            Ok(m) => m,
            Err(e) => return (Some(unreadable("destination", e)), offset),
        };
        if a[..n.min(m)] != b[..n.min(m)] || n != m {
            let at = a[..n.min(m)]
                .iter()
                .zip(&b[..n.min(m)])
                .position(|(x, y)| x != y)
                .unwrap_or(n.min(m));
            let kind = if n != m && at == n.min(m) {
                // One ended first: the file changed size after it was stated.
                DifferenceKind::Size {
                    src: offset + n as u64,
                    dst: offset + m as u64,
                }
            } else {
                DifferenceKind::Content {
                    offset: offset + at as u64,
                }
            };
            let diff = Difference {
                path: job.path.clone(),
                kind,
            };
            return (Some(diff), offset + n as u64);
        }
        offset += n as u64;
        if n < a.len() {
            return (None, offset);
        }
    }
}

/// Fills `buf` from `offset` unless end of file comes first.
fn read_full(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        let n = sys::pread(fd, &mut buf[got..], offset + got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(got)
}

struct Walk<'o> {
    opts: &'o VerifyOptions,
    work: Option<mpsc::SyncSender<ContentJob>>,
    results: &'o mpsc::Receiver<Compared>,
    on_difference: &'o mut dyn FnMut(&Difference),
    report: VerifyReport,
    /// Source inode → (destination inode, first path) for inodes with several links.
    links: HashMap<(u64, u64), ((u64, u64), PathBuf)>,
    /// The same, destination → source.
    links_back: HashMap<(u64, u64), ((u64, u64), PathBuf)>,
    dir_buf: Vec<MaybeUninit<u8>>,
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
    fn take(&mut self, (difference, bytes): Compared) {
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
    fn entry(
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
        let s = match sys::statx_at(src_dir, src_name, false) {
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
        if s.mode & libc::S_IFMT != d.mode & libc::S_IFMT {
            let (src, dst) = (kind_name(&s), kind_name(&d));
            return self.differ(&path, DifferenceKind::Type { src, dst });
        }
        self.metadata(&path, &s, &d);
        if self.opts.hard_links && s.kind() != Kind::Dir {
            self.hard_links(&path, &s, &d);
        }
        match s.kind() {
            Kind::Dir => self.directory(src_dir, dst_dir, src_name, dst_name, &path),
            Kind::File => self.file(src_dir, dst_dir, src_name, dst_name, path, &s, &d),
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

    #[allow(clippy::too_many_arguments)]
    fn file(
        &mut self,
        src_dir: BorrowedFd<'_>,
        dst_dir: BorrowedFd<'_>,
        src_name: &CStr,
        dst_name: &CStr,
        path: PathBuf,
        s: &Stat,
        d: &Stat,
    ) {
        if s.size != d.size {
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
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NOATIME;
        let open = |dir, name| {
            sys::openat(dir, name, flags, 0)
                .or_else(|_| sys::openat(dir, name, libc::O_RDONLY | libc::O_NOFOLLOW, 0))
        };
        let src = match open(src_dir, src_name) {
            Ok(fd) => fd,
            Err(e) => return self.unreadable(&path, "source", "open", e),
        };
        let dst = match open(dst_dir, dst_name) {
            Ok(fd) => fd,
            Err(e) => return self.unreadable(&path, "destination", "open", e),
        };
        if self.opts.xattrs {
            self.xattrs(&path, src.as_fd(), dst.as_fd());
        }
        if s.size == 0 {
            return;
        }
        let job = ContentJob { path, src, dst };
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
    ) {
        let src = match sys::open_dir(src_dir, src_name, false) {
            Ok(fd) => fd,
            Err(e) => return self.unreadable(path, "source", "open directory", e),
        };
        let dst = match sys::open_dir(dst_dir, dst_name, false) {
            Ok(fd) => fd,
            Err(e) => return self.unreadable(path, "destination", "open directory", e),
        };
        if self.opts.xattrs {
            self.xattrs(path, src.as_fd(), dst.as_fd());
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

    fn xattrs(&mut self, path: &Path, src: BorrowedFd<'_>, dst: BorrowedFd<'_>) {
        let (a, b) = match (read_xattrs(src), read_xattrs(dst)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) => return self.unreadable(path, "source", "list extended attributes", e),
            (_, Err(e)) => {
                return self.unreadable(path, "destination", "list extended attributes", e)
            }
        };
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

/// Every extended attribute of an open file: (name, value), sorted by name. A filesystem
/// without xattr support has none.
fn read_xattrs(fd: BorrowedFd<'_>) -> io::Result<Vec<(CString, Vec<u8>)>> {
    let mut names = vec![0u8; 4096];
    let len = loop {
        match rustix::fs::flistxattr(fd, &mut names[..]) {
            Ok(n) => break n,
            Err(rustix::io::Errno::RANGE) => names.resize(names.len() * 4, 0),
            Err(rustix::io::Errno::NOTSUP) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        }
    };
    let mut out = Vec::new();
    for name in names[..len].split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = CString::new(name).expect("split at NUL");
        let mut value = vec![0u8; 256];
        let n = loop {
            match rustix::fs::fgetxattr(fd, name.as_c_str(), &mut value[..]) {
                Ok(n) => break n,
                Err(rustix::io::Errno::RANGE) => value.resize(value.len() * 4, 0),
                Err(rustix::io::Errno::NODATA) => break usize::MAX,
                Err(e) => return Err(e.into()),
            }
        };
        if n != usize::MAX {
            value.truncate(n);
            out.push((name, value));
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_print_on_one_line() {
        let d = Difference {
            path: PathBuf::from(OsStr::from_bytes(b"a\nb\tc\\d\xff")),
            kind: DifferenceKind::Missing,
        };
        assert_eq!(
            d.to_string(),
            "a\\nb\\tc\\\\d\\xff: missing from the destination"
        );
    }
}
