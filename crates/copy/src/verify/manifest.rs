//! `ringio verify --manifest FILE DIR`: re-hashes the files a checksum manifest lists (as
//! `sha256sum`, `b3sum`, `xxhsum`, `md5sum` write them, or ringio itself) below DIR, and finds
//! every file that is missing, different, or in DIR but not in the manifest.
//!
//! `uncached` reads reach the device: each file is read with O_DIRECT where the filesystem
//! allows it, and otherwise its pages are written back and dropped first (sync_file_range, then
//! POSIX_FADV_DONTNEED: no root needed), so a byte that went bad on the disk is seen even while
//! the page cache still holds the good copy.

use std::collections::HashSet;
use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::digest::Algo;
use crate::manifest::tree::{self, Beneath, LastDir, Met};
use crate::manifest::Listing;
pub use crate::manifest::ManifestError;
use crate::sys::{self, Kind};

/// What one listed file came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// Listed, not there.
    Missing(PathBuf),
    /// Its bytes hash to something else.
    Differs {
        /// The file, below DIR.
        path: PathBuf,
        /// The manifest's hash.
        expected: String,
        /// What was read.
        found: String,
    },
    /// A file the copy kept as it was (`-n`, `-u`): its bytes are not its source's.
    KeptUnlikeSource(PathBuf),
    /// There (a file, a symlink, a special file), not listed.
    Extra(PathBuf),
    /// A symbolic link where a listed file should be, or on its way (never followed: what it
    /// points to may lie outside the tree).
    Symlink {
        /// The listed file, below DIR.
        path: PathBuf,
        /// The symlink: the file itself, or a directory on its way.
        link: PathBuf,
    },
    /// It could not be read (or is not a regular file).
    Unreadable {
        /// The file, below DIR.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let q = crate::quote::quote_path;
        match self {
            Finding::Missing(p) => write!(f, "missing: {}", q(p)),
            Finding::Differs {
                path,
                expected,
                found,
            } => write!(
                f,
                "differs: {}: the manifest says {expected}, read {found}",
                q(path)
            ),
            Finding::Extra(p) => write!(f, "extra: {} (not in the manifest)", q(p)),
            Finding::KeptUnlikeSource(p) => write!(
                f,
                "differs: {}: kept as it was (-n, -u), its bytes are not the source's",
                q(p)
            ),
            Finding::Symlink { path, link } if path == link => write!(
                f,
                "not a file: {} is a symbolic link (not followed)",
                q(path)
            ),
            Finding::Symlink { path, link } => write!(
                f,
                "not checked: {} lies through the symbolic link {} (not followed)",
                q(path),
                q(link)
            ),
            Finding::Unreadable { path, why } => write!(f, "cannot check {}: {why}", q(path)),
        }
    }
}

/// How the files' bytes were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    /// Through the page cache (what it holds, if anything).
    Cache,
    /// O_DIRECT, from the device.
    Direct,
    /// Pages written back and dropped, then read: from the device.
    Dropped,
    /// Some one way, some the other.
    Mixed,
}

/// The outcome of a check.
#[derive(Debug)]
pub struct ManifestReport {
    /// The algorithm used.
    pub algo: Algo,
    /// Files listed.
    pub listed: u64,
    /// Bytes hashed.
    pub bytes: u64,
    /// Every finding, in the manifest's order (then what the walk of DIR found, by name).
    pub findings: Vec<Finding>,
    /// How the bytes were read.
    pub read_from: ReadFrom,
    /// Symlinks and special files in DIR that the manifest does not list: a manifest lists
    /// regular files only, so they are named, not counted as differences.
    pub uncovered: Vec<PathBuf>,
}

/// One listed file, hashed (its hash, its length, how it was read), or what stopped that.
type Hashed = Result<(String, u64, ReadFrom), Finding>;

/// Checks `dir` against `manifest` with `threads` readers. Findings come back in order.
pub fn check_manifest(
    dir: &Path,
    manifest: &Path,
    algo: Option<Algo>,
    uncached: bool,
    threads: usize,
) -> Result<ManifestReport, ManifestError> {
    let listing = crate::manifest::read(manifest, algo)?;
    let read = AtomicU64::new(0);
    Ok(check_listing(
        dir,
        &listing,
        Some(manifest),
        uncached,
        (threads, &read, true),
    ))
}

/// Checks `dir` against `listing` (read from `manifest`, which is not taken for an extra file,
/// or computed by a copy) with `threads` readers, adding the bytes read to `read` as they are
/// (for a progress bar). Findings come back in order. With `extras`, `dir` is walked for files
/// the listing lacks (an `ascmhl` folder at its top is the manifest's own, not an extra);
/// without, only the listed files are checked (a copy into a directory that holds others).
///
/// `dir` is the one path resolved as given; every listed name is reached from its descriptor
/// without following a symlink (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or component by
/// component with O_NOFOLLOW): a symlink listed, or on the way to a listed name, is a finding
/// ([`Finding::Symlink`]), never followed out of the tree; and no tree is too deep.
pub fn check_listing(
    dir: &Path,
    listing: &Listing,
    manifest: Option<&Path>,
    uncached: bool,
    (threads, read, extras): (usize, &AtomicU64, bool),
) -> ManifestReport {
    let root = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
        .and_then(|c| sys::open_dir(rustix::fs::CWD, &c, true));
    let lines = &listing.entries;
    let results: Vec<Mutex<Option<Hashed>>> = lines.iter().map(|_| Mutex::new(None)).collect();
    let tree = Tree {
        root: root.as_ref().map(|fd| fd.as_fd()).map_err(clone_error),
        uncached,
        read,
    };
    let algo = match listing.alternative {
        Some(other) => tell_apart(&tree, listing, other, &results),
        None => listing.algo,
    };
    let claims = Claims::new(lines.len(), threads);
    let walked = std::thread::scope(|s| {
        // What the listing lacks is looked for while the listed files are read (it waits on
        // other blocks of the disk, and on other cores).
        let walk = root.as_ref().ok().filter(|_| extras).map(|root| {
            let root = root.as_fd();
            s.spawn(move || unlisted(root, lines, manifest))
        });
        for _ in 0..claims.workers {
            s.spawn(|| {
                let mut last = LastDir::default();
                let mut buf = ReadBuf::default();
                while let Some(claimed) = claims.next() {
                    for i in claimed {
                        if results[i].lock().expect("result").is_some() {
                            // Hashed while the algorithm was told apart.
                            continue;
                        }
                        let got = tree
                            .hash(&lines[i].path, &[algo], &mut last, &mut buf)
                            .map(|(mut hexes, len, way)| (hexes.remove(0), len, way));
                        *results[i].lock().expect("result") = Some(got);
                    }
                }
            });
        }
        walk.map(|w| w.join().expect("the walk of the tree"))
    });
    let mut report = ManifestReport {
        algo,
        listed: lines.len() as u64,
        bytes: 0,
        findings: Vec::new(),
        read_from: if uncached {
            ReadFrom::Direct
        } else {
            ReadFrom::Cache
        },
        uncovered: Vec::new(),
    };
    let mut ways = HashSet::new();
    for (line, result) in lines.iter().zip(results) {
        match result
            .into_inner()
            .expect("result")
            .expect("every line hashed")
        {
            Ok((hex, bytes, way)) => {
                report.bytes += bytes;
                ways.insert(way as u8);
                report.read_from = way;
                if hex != line.hex {
                    report.findings.push(Finding::Differs {
                        path: PathBuf::from(OsStr::from_bytes(&line.path)),
                        expected: line.hex.clone(),
                        found: hex,
                    });
                }
            }
            Err(finding) => report.findings.push(finding),
        }
    }
    if ways.len() > 1 {
        report.read_from = ReadFrom::Mixed;
    }
    match (walked, &root) {
        (Some((findings, uncovered)), _) => {
            report.findings.extend(findings);
            report.uncovered = uncovered;
        }
        (None, Err(e)) if extras => report.findings.push(Finding::Unreadable {
            path: PathBuf::new(),
            why: format!("cannot list it: {}", crate::quote::reason(e)),
        }),
        (None, _) => {}
    }
    report
}

/// The listed files, handed out to the workers in runs of neighbours (a run's files mostly
/// share a directory, which a worker then opens once), shorter as the end nears so that no
/// worker is left with a long tail while the others wait.
struct Claims {
    next: AtomicUsize,
    len: usize,
    workers: usize,
}

impl Claims {
    /// Longest run handed out at once.
    const MAX_RUN: usize = 32;

    fn new(len: usize, threads: usize) -> Claims {
        Claims {
            next: AtomicUsize::new(0),
            len,
            workers: threads.clamp(1, len.max(1)),
        }
    }

    /// The next run of line indices, or `None` when every line is handed out.
    fn next(&self) -> Option<std::ops::Range<usize>> {
        let mut at = self.next.load(Ordering::Relaxed);
        loop {
            let left = self.len.checked_sub(at).filter(|&n| n > 0)?;
            let run = (left / (self.workers * 4)).clamp(1, Self::MAX_RUN);
            match self.next.compare_exchange_weak(
                at,
                at + run,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(at..at + run),
                Err(now) => at = now,
            }
        }
    }
}

fn clone_error(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

/// Walks the tree below `root` for what `lines` does not list: the findings (regular files,
/// directories that cannot be listed), and the symlinks and special files (not covered). The
/// manifest itself (by its identity, wherever it lies) and an `ascmhl` folder at the top are
/// the manifest's own.
fn unlisted(
    root: BorrowedFd<'_>,
    lines: &[crate::manifest::Entry],
    manifest: Option<&Path>,
) -> (Vec<Finding>, Vec<PathBuf>) {
    let (mut findings, mut uncovered) = (Vec::new(), Vec::new());
    let listed: HashSet<Vec<u8>> = lines.iter().filter_map(|l| below(&l.path)).collect();
    let own = manifest
        .and_then(|m| CString::new(m.as_os_str().as_bytes()).ok())
        .and_then(|m| sys::statx_at(rustix::fs::CWD, &m, true).ok());
    tree::walk(root, &mut |met| match met {
        Met::Entry {
            rel,
            dir,
            name,
            kind,
        } => {
            if listed.contains(rel) || rel == b"ascmhl" || rel.starts_with(b"ascmhl/") {
                return;
            }
            let path = PathBuf::from(OsStr::from_bytes(rel));
            if kind != Kind::File {
                return uncovered.push(path);
            }
            let is_manifest = own
                .as_ref()
                .is_some_and(|m| sys::statx_at(dir, name, false).is_ok_and(|s| s.same_file(m)));
            if !is_manifest {
                findings.push(Finding::Extra(path));
            }
        }
        Met::Unlistable { rel, err } => findings.push(Finding::Unreadable {
            path: PathBuf::from(OsStr::from_bytes(rel)),
            why: format!("cannot list it: {}", crate::quote::reason(&err)),
        }),
    });
    (findings, uncovered)
}

/// The tree checked: its root's descriptor (or why it could not be opened), and how its files
/// are read.
struct Tree<'a> {
    root: Result<BorrowedFd<'a>, io::Error>,
    uncached: bool,
    read: &'a AtomicU64,
}

impl Tree<'_> {
    /// The directory holding the listed `name` and its last component, or the finding that
    /// stops its check.
    fn parent<'l>(
        &self,
        name: &[u8],
        last: &'l mut LastDir,
    ) -> Result<(BorrowedFd<'l>, CString), Finding> {
        let rel = PathBuf::from(OsStr::from_bytes(name));
        let unreadable = |e: &io::Error, rel: PathBuf| Finding::Unreadable {
            path: rel,
            why: crate::quote::reason(e).to_string(),
        };
        let Some(inside) = below(name) else {
            let why = "its name leads out of the tree checked".to_string();
            return Err(Finding::Unreadable { path: rel, why });
        };
        let root = self.root.as_ref().map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Finding::Missing(rel.clone()),
            _ => unreadable(e, rel.clone()),
        })?;
        last.parent(*root, &inside).map_err(|why| match why {
            Beneath::ThroughSymlink(link) => Finding::Symlink {
                path: rel,
                link: PathBuf::from(OsStr::from_bytes(&link)),
            },
            Beneath::Io(e) if e.kind() == io::ErrorKind::NotFound => Finding::Missing(rel),
            Beneath::Io(e) => unreadable(&e, rel),
        })
    }

    /// The hashes by `algos` of the listed file `name`, its length and how it was read, read
    /// into the worker's `buf`.
    fn hash(&self, name: &[u8], algos: &[Algo], last: &mut LastDir, buf: &mut ReadBuf) -> Hashes {
        let (dir, file) = self.parent(name, last)?;
        let rel = || PathBuf::from(OsStr::from_bytes(name));
        let buf = buf.get();
        let hashed =
            buf.and_then(|buf| hash_file((dir, &file), algos, self.uncached, self.read, buf));
        hashed.map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => Finding::Symlink {
                path: rel(),
                link: rel(),
            },
            _ if e.kind() == io::ErrorKind::NotFound => Finding::Missing(rel()),
            _ => Finding::Unreadable {
                path: rel(),
                why: crate::quote::reason(&e).to_string(),
            },
        })
    }

    /// The size of the listed file `name` (not following a symlink), if it is there.
    fn size(&self, name: &[u8], last: &mut LastDir) -> Option<u64> {
        let (dir, file) = self.parent(name, last).ok()?;
        Some(sys::statx_at(dir, &file, false).ok()?.size)
    }
}

/// Every hash of one listed file, or what stopped it.
type Hashes = Result<(Vec<String>, u64, ReadFrom), Finding>;

/// The algorithm of a manifest whose hashes' length two algorithms share (`listing.algo` or
/// `other`): the one that gives the listed hash of a file, tried on the smallest of the first
/// listed files (its result kept in `results`, so it is not read again): by `listing.algo`
/// first (ringio's own manifests), by `other` only if that does not match. A corrupt file tells
/// nothing, so the next is tried; where none tells, `listing.algo`.
fn tell_apart(
    tree: &Tree<'_>,
    listing: &Listing,
    other: Algo,
    results: &[Mutex<Option<Hashed>>],
) -> Algo {
    let mut last = LastDir::default();
    let mut buf = ReadBuf::default();
    let mut candidates: Vec<(u64, usize)> = listing
        .entries
        .iter()
        .enumerate()
        .take(256)
        .filter_map(|(i, e)| Some((tree.size(&e.path, &mut last)?, i)))
        .collect();
    candidates.sort();
    for (_, i) in candidates {
        let entry = &listing.entries[i];
        for algo in [listing.algo, other] {
            match tree.hash(&entry.path, &[algo], &mut last, &mut buf) {
                Ok((hexes, len, way)) if hexes[0] == entry.hex => {
                    *results[i].lock().expect("result") = Some(Ok((hexes[0].clone(), len, way)));
                    return algo;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
    listing.algo
}

/// A listed name as a path below DIR, without `./` and repeated slashes; `None` for a name
/// that leads out of DIR (absolute, or through `..`), which is never checked there.
fn below(name: &[u8]) -> Option<Vec<u8>> {
    if name.starts_with(b"/") {
        return None;
    }
    let mut out = Vec::with_capacity(name.len());
    for part in name.split(|&b| b == b'/') {
        match part {
            b"" | b"." => continue,
            b".." => return None,
            _ => {}
        }
        if !out.is_empty() {
            out.push(b'/');
        }
        out.extend_from_slice(part);
    }
    (!out.is_empty()).then_some(out)
}

/// The hashes by `algos` of the file `name` in `dir` (in one read; a symlink is not followed:
/// ELOOP), its length, and how it was read, read through `buf`. Bytes read so far are added to
/// `read`.
fn hash_file(
    (dir, name): (BorrowedFd<'_>, &CStr),
    algos: &[Algo],
    uncached: bool,
    read: &AtomicU64,
    buf: &mut [u8],
) -> io::Result<(Vec<String>, u64, ReadFrom)> {
    // O_NONBLOCK: a FIFO where a listed file was must not hang the check (no effect on files).
    let plain = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOFOLLOW;
    let (fd, way) = if uncached {
        match sys::openat(dir, name, plain | libc::O_DIRECT, 0) {
            Ok(fd) => (fd, ReadFrom::Direct),
            // The filesystem has no O_DIRECT (tmpfs, some FUSE): drop the pages instead.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                let fd = sys::openat(dir, name, plain, 0)?;
                sys::drop_cached_pages(fd.as_fd())?;
                (fd, ReadFrom::Dropped)
            }
            Err(e) => return Err(e),
        }
    } else {
        (sys::openat(dir, name, plain, 0)?, ReadFrom::Cache)
    };
    let stat = sys::fstatx(fd.as_fd())?;
    if stat.kind() != Kind::File {
        return Err(io::Error::other("not a regular file"));
    }
    if way != ReadFrom::Direct && stat.size > buf.len() as u64 {
        // A file of more than one read: the kernel reads further ahead (a hint: if refused,
        // the reads are as they were).
        let _ = rustix::fs::fadvise(&fd, 0, None, rustix::fs::Advice::Sequential);
    }
    match read_all(fd.as_fd(), stat.size, algos, read, buf) {
        // Some filesystems accept O_DIRECT at open and refuse it at read.
        Err(e) if way == ReadFrom::Direct && e.raw_os_error() == Some(libc::EINVAL) => {
            let fd = sys::openat(dir, name, plain, 0)?;
            sys::drop_cached_pages(fd.as_fd())?;
            let (hexes, len) = read_all(fd.as_fd(), stat.size, algos, read, buf)?;
            Ok((hexes, len, ReadFrom::Dropped))
        }
        got => got.map(|(hexes, len)| (hexes, len, way)),
    }
}

/// Size of a worker's buffer, the most one read asks for (a multiple of any device's logical
/// block, for O_DIRECT): a listed file up to this size is read whole by one read.
const BLOCK: usize = 1 << 20;

/// A worker's read buffer: allocated at its first file, then reused for every file it reads
/// (not one allocation, with its page faults, per file).
#[derive(Default)]
struct ReadBuf(Option<ringio_base::buf::AlignedBuf>);

impl ReadBuf {
    fn get(&mut self) -> io::Result<&mut [u8]> {
        if self.0.is_none() {
            self.0 = Some(ringio_base::buf::AlignedBuf::try_new(BLOCK)?);
        }
        Ok(&mut self.0.as_mut().expect("just allocated")[..])
    }
}

/// Reads `fd` to its end through `buf`, hashing by `algos`: its hashes and length. `size` is
/// what statx said: a read that comes back short at or past it is the end, so a file smaller
/// than `buf` takes one read (not a second one that returns 0). A size of 0 says nothing (the
/// files of procfs, sysfs and some FUSE filesystems show 0 and read in short pieces): such a
/// file is read until a read returns 0. A file that grows or shrinks while it is read is
/// hashed as far as the reads found it.
fn read_all(
    fd: BorrowedFd<'_>,
    size: u64,
    algos: &[Algo],
    read: &AtomicU64,
    buf: &mut [u8],
) -> io::Result<(Vec<String>, u64)> {
    let mut hashers: Option<Vec<_>> = None;
    let mut at = 0u64;
    loop {
        let n = sys::pread(fd, buf, at)?;
        at += n as u64;
        read.fetch_add(n as u64, Ordering::Relaxed);
        let end = n == 0 || (size > 0 && n < buf.len() && at >= size);
        if end && hashers.is_none() {
            // The whole file in one read: hashed at once, with no streaming state.
            return Ok((algos.iter().map(|a| a.hex_of(&buf[..n])).collect(), at));
        }
        let streaming = hashers.get_or_insert_with(|| algos.iter().map(|a| a.hasher()).collect());
        for h in streaming.iter_mut() {
            h.update(&buf[..n]);
        }
        if end {
            let hexes = streaming.drain(..).map(|h| h.finish_hex()).collect();
            return Ok((hexes, at));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::sum_line;

    fn hex(algo: Algo, data: &[u8]) -> String {
        algo.hex_of(data)
    }

    #[test]
    fn a_length_two_algorithms_share_is_told_apart_on_the_first_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"content").unwrap();
        for algo in [Algo::Md5, Algo::Xxh128, Algo::Blake3, Algo::Sha256] {
            let manifest = dir.path().join("m");
            std::fs::write(&manifest, sum_line(&hex(algo, b"content"), b"f")).unwrap();
            let r = check_manifest(dir.path(), &manifest, None, false, 1).unwrap();
            assert_eq!(r.algo, algo);
            assert!(r.findings.is_empty(), "{algo}: {:?}", r.findings);
        }
    }

    #[test]
    fn a_corrupt_first_file_does_not_decide_the_algorithm() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"corrupt").unwrap();
        std::fs::write(dir.path().join("b"), b"good").unwrap();
        let mut text = sum_line(&hex(Algo::Md5, b"was good"), b"a");
        text.extend(sum_line(&hex(Algo::Md5, b"good"), b"b"));
        let manifest = dir.path().join("m");
        std::fs::write(&manifest, text).unwrap();
        let r = check_manifest(dir.path(), &manifest, None, false, 1).unwrap();
        assert_eq!(r.algo, Algo::Md5);
        assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
    }

    #[test]
    fn finds_missing_different_and_extra_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("tree");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("same"), b"same").unwrap();
        std::fs::write(root.join("sub/changed"), b"new").unwrap();
        std::fs::write(root.join("extra"), b"x").unwrap();
        let mut text = Vec::new();
        text.extend(sum_line(&hex(Algo::Sha256, b"same"), b"./same"));
        text.extend(sum_line(&hex(Algo::Sha256, b"old"), b"sub/changed"));
        text.extend(sum_line(&hex(Algo::Sha256, b"gone"), b"gone"));
        // The manifest lies inside the tree: it is not an extra file.
        let manifest = root.join("SHA256SUMS");
        std::fs::write(&manifest, &text).unwrap();
        for uncached in [false, true] {
            let r = check_manifest(&root, &manifest, None, uncached, 2).unwrap();
            assert_eq!(r.algo, Algo::Sha256);
            assert_eq!(r.listed, 3);
            assert_eq!(
                r.findings,
                vec![
                    Finding::Differs {
                        path: "sub/changed".into(),
                        expected: hex(Algo::Sha256, b"old"),
                        found: hex(Algo::Sha256, b"new"),
                    },
                    Finding::Missing("gone".into()),
                    Finding::Extra("extra".into()),
                ]
            );
            assert_eq!(r.read_from == ReadFrom::Cache, !uncached);
        }
    }
}
