//! The tree comparer: walks two trees entry by entry and lists every difference.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs::{self, File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::sys::{is_root, list_xattrs, put_back_atime};

/// What [`assert_trees_equal`] checks beyond names, types, content, sizes and symlink targets,
/// which it always checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check {
    /// Permission bits with setuid, setgid and sticky (not for symlinks).
    pub mode: bool,
    /// uid and gid (symlinks too).
    pub ownership: bool,
    /// mtime in seconds and nanoseconds (directories and symlinks too).
    pub mtime: bool,
    /// atime likewise. The source's atimes move when it is read: see `TestTree::restore_atimes`.
    pub atime: bool,
    /// Files hard-linked together in one tree are hard-linked together in the other, and no
    /// others are.
    pub hard_links: bool,
    /// Extended attributes, names and values.
    pub xattrs: bool,
    /// The destination may lack entries (an interrupted copy); what it has must be right, and it
    /// must have nothing the source lacks.
    pub partial: bool,
}

impl Check {
    /// Names, types, content, sizes, symlink targets.
    pub const CONTENT: Check = Check {
        mode: false,
        ownership: false,
        mtime: false,
        atime: false,
        hard_links: false,
        xattrs: false,
        partial: false,
    };
    /// Everything `cp -a` carries over.
    pub const ARCHIVE: Check = Check {
        mode: true,
        ownership: true,
        mtime: true,
        atime: true,
        hard_links: true,
        xattrs: true,
        partial: false,
    };
    /// What `-p` carries over: mode, ownership, timestamps.
    pub const PRESERVE_P: Check = Check {
        hard_links: false,
        xattrs: false,
        ..Check::ARCHIVE
    };
}

/// Compares `src` with `dst`; on any difference prints every one of them, then panics.
#[track_caller]
pub fn assert_trees_equal(src: &Path, dst: &Path, check: Check) {
    let diffs = tree_diff(src, dst, check);
    if diffs.is_empty() {
        return;
    }
    eprintln!("=== {} difference(s), checking {check:?}", diffs.len());
    eprintln!("    src: {}", src.display());
    eprintln!("    dst: {}", dst.display());
    for diff in diffs.iter().take(400) {
        eprintln!("  {diff}");
    }
    if diffs.len() > 400 {
        eprintln!("  ... and {} more", diffs.len() - 400);
    }
    panic!(
        "{} difference(s) between {} and {}; first: {}",
        diffs.len(),
        src.display(),
        dst.display(),
        diffs[0]
    );
}

/// Every difference between `src` and `dst`, one line each, in walk order.
pub fn tree_diff(src: &Path, dst: &Path, check: Check) -> Vec<String> {
    let mut walk = Walk {
        src: src.to_path_buf(),
        dst: dst.to_path_buf(),
        check,
        diffs: Vec::new(),
        src_links: BTreeMap::new(),
        dst_links: BTreeMap::new(),
        buf_src: vec![0; 1 << 20],
        buf_dst: vec![0; 1 << 20],
    };
    walk.entry(Path::new(""));
    if check.hard_links && !check.partial {
        walk.compare_link_groups();
    }
    walk.diffs
}

struct Walk {
    src: PathBuf,
    dst: PathBuf,
    check: Check,
    diffs: Vec<String>,
    src_links: BTreeMap<(u64, u64), Vec<PathBuf>>,
    dst_links: BTreeMap<(u64, u64), Vec<PathBuf>>,
    buf_src: Vec<u8>,
    buf_dst: Vec<u8>,
}

fn under(root: &Path, rel: &Path) -> PathBuf {
    // join("") would add a trailing slash, which follows a symlink at the root.
    if rel.as_os_str().is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    }
}

fn show(rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        "'.' (the root)".to_string()
    } else {
        format!("{rel:?}")
    }
}

fn kind(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_file() {
        "regular file"
    } else if t.is_dir() {
        "directory"
    } else if t.is_symlink() {
        "symlink"
    } else if t.is_fifo() {
        "fifo"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() {
        "char device"
    } else if t.is_block_device() {
        "block device"
    } else {
        "unknown"
    }
}

impl Walk {
    fn diff(&mut self, rel: &Path, what: String) {
        self.diffs.push(format!("{}: {what}", show(rel)));
    }

    fn entry(&mut self, rel: &Path) {
        let (sp, dp) = (under(&self.src, rel), under(&self.dst, rel));
        let sm = match fs::symlink_metadata(&sp) {
            Ok(m) => m,
            Err(e) => return self.diff(rel, format!("cannot lstat in src: {e}")),
        };
        let dm = match fs::symlink_metadata(&dp) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound && !self.check.partial => {
                return self.diff(rel, format!("only in src ({})", kind(&sm)))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) => return self.diff(rel, format!("cannot lstat in dst: {e}")),
        };
        if kind(&sm) != kind(&dm) {
            return self.diff(rel, format!("type: src {} dst {}", kind(&sm), kind(&dm)));
        }
        self.metadata(rel, &sm, &dm);
        let t = sm.file_type();
        if t.is_file() {
            self.file(rel, &sp, &dp, &sm, &dm);
        } else if t.is_symlink() {
            self.symlink(rel, &sp, &dp, &sm, &dm);
        } else if t.is_dir() {
            self.dir(rel, &sp, &dp, &sm, &dm);
        } else if (t.is_char_device() || t.is_block_device()) && sm.rdev() != dm.rdev() {
            self.diff(
                rel,
                format!("rdev: src {:#x} dst {:#x}", sm.rdev(), dm.rdev()),
            );
        }
    }

    fn metadata(&mut self, rel: &Path, sm: &Metadata, dm: &Metadata) {
        let c = self.check;
        let symlink = sm.file_type().is_symlink();
        if c.mode && !symlink && sm.mode() & 0o7777 != dm.mode() & 0o7777 {
            self.diff(
                rel,
                format!(
                    "mode: src {:04o} dst {:04o}",
                    sm.mode() & 0o7777,
                    dm.mode() & 0o7777
                ),
            );
        }
        if c.ownership && (sm.uid(), sm.gid()) != (dm.uid(), dm.gid()) {
            self.diff(
                rel,
                format!(
                    "owner: src {}:{} dst {}:{}",
                    sm.uid(),
                    sm.gid(),
                    dm.uid(),
                    dm.gid()
                ),
            );
        }
        if c.mtime && (sm.mtime(), sm.mtime_nsec()) != (dm.mtime(), dm.mtime_nsec()) {
            self.diff(
                rel,
                format!(
                    "mtime: src {}.{:09} dst {}.{:09}",
                    sm.mtime(),
                    sm.mtime_nsec(),
                    dm.mtime(),
                    dm.mtime_nsec()
                ),
            );
        }
        if c.atime && (sm.atime(), sm.atime_nsec()) != (dm.atime(), dm.atime_nsec()) {
            self.diff(
                rel,
                format!(
                    "atime: src {}.{:09} dst {}.{:09}",
                    sm.atime(),
                    sm.atime_nsec(),
                    dm.atime(),
                    dm.atime_nsec()
                ),
            );
        }
        if c.xattrs {
            // Of every entry itself, symlinks, FIFOs and devices included (llistxattr).
            let (sp, dp) = (under(&self.src, rel), under(&self.dst, rel));
            let unsupported = |e: &io::Error| e.raw_os_error() == Some(libc::EOPNOTSUPP);
            match (list_xattrs(&sp), list_xattrs(&dp)) {
                (Ok(sx), Ok(dx)) if sx != dx => {
                    self.diff(rel, format!("xattrs: src {sx:?} dst {dx:?}"))
                }
                (Ok(sx), Err(e)) if !sx.is_empty() => {
                    self.diff(rel, format!("xattrs: src {sx:?}, dst unreadable: {e}"))
                }
                (Err(e), _) if !unsupported(&e) => {
                    self.diff(rel, format!("xattrs: src unreadable: {e}"))
                }
                _ => {}
            }
        }
    }

    fn file(&mut self, rel: &Path, sp: &Path, dp: &Path, sm: &Metadata, dm: &Metadata) {
        if self.check.hard_links {
            if sm.nlink() > 1 {
                self.src_links
                    .entry((sm.dev(), sm.ino()))
                    .or_default()
                    .push(rel.to_path_buf());
            }
            if dm.nlink() > 1 {
                self.dst_links
                    .entry((dm.dev(), dm.ino()))
                    .or_default()
                    .push(rel.to_path_buf());
            }
        }
        if sm.len() != dm.len() {
            self.diff(rel, format!("size: src {} dst {}", sm.len(), dm.len()));
        }
        let mut src = match File::open(sp) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied && !is_root() => {
                eprintln!(
                    "comparer: not comparing content of {} (not root): {e}",
                    show(rel)
                );
                return;
            }
            Err(e) => return self.diff(rel, format!("cannot open in src: {e}")),
        };
        let mut dst = match File::open(dp) {
            Ok(f) => f,
            Err(e) => return self.diff(rel, format!("cannot open in dst: {e}")),
        };
        let mut offset = 0u64;
        loop {
            let ns = fill(&mut src, &mut self.buf_src);
            let nd = fill(&mut dst, &mut self.buf_dst);
            let (ns, nd) = match (ns, nd) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(e), _) | (_, Err(e)) => {
                    self.diff(rel, format!("read error at byte {offset}: {e}"));
                    break;
                }
            };
            let n = ns.min(nd);
            let (a, b) = (&self.buf_src[..n], &self.buf_dst[..n]);
            if a != b {
                let at = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(0);
                self.diff(
                    rel,
                    format!("content differs from byte {}", offset + at as u64),
                );
                break;
            }
            // A size difference is reported above already.
            if ns != nd && sm.len() == dm.len() {
                self.diff(
                    rel,
                    format!(
                        "content: src has {} bytes, dst {}",
                        offset + ns as u64,
                        offset + nd as u64
                    ),
                );
                break;
            }
            if ns == 0 || ns != nd {
                break;
            }
            offset += ns as u64;
        }
        put_back_atime(sp, sm);
        put_back_atime(dp, dm);
    }

    fn symlink(&mut self, rel: &Path, sp: &Path, dp: &Path, sm: &Metadata, dm: &Metadata) {
        let (st, dt) = (fs::read_link(sp), fs::read_link(dp));
        put_back_atime(sp, sm);
        put_back_atime(dp, dm);
        match (st, dt) {
            (Ok(s), Ok(d)) if s != d => {
                self.diff(rel, format!("symlink target: src {s:?} dst {d:?}"))
            }
            (Ok(_), Ok(_)) => {}
            (Err(e), _) | (_, Err(e)) => self.diff(rel, format!("readlink: {e}")),
        }
    }

    fn dir(&mut self, rel: &Path, sp: &Path, dp: &Path, sm: &Metadata, dm: &Metadata) {
        let names = |p: &Path| -> io::Result<BTreeSet<OsString>> {
            fs::read_dir(p)?.map(|e| e.map(|e| e.file_name())).collect()
        };
        let (sn, dn) = (names(sp), names(dp));
        put_back_atime(sp, sm);
        put_back_atime(dp, dm);
        let (sn, dn) = match (sn, dn) {
            (Ok(s), Ok(d)) => (s, d),
            (Err(e), _) => return self.diff(rel, format!("cannot list in src: {e}")),
            (_, Err(e)) => return self.diff(rel, format!("cannot list in dst: {e}")),
        };
        for name in dn.difference(&sn) {
            let child = rel.join(name);
            let what = fs::symlink_metadata(dp.join(name))
                .map(|m| kind(&m))
                .unwrap_or("?");
            self.diff(&child, format!("only in dst ({what})"));
        }
        for name in &sn {
            self.entry(&rel.join(name));
        }
    }

    fn compare_link_groups(&mut self) {
        let groups = |m: &BTreeMap<(u64, u64), Vec<PathBuf>>| -> BTreeSet<Vec<PathBuf>> {
            m.values().filter(|g| g.len() > 1).cloned().collect()
        };
        let (sg, dg) = (groups(&self.src_links), groups(&self.dst_links));
        for g in sg.difference(&dg) {
            self.diffs.push(format!(
                "hard links: {g:?} share an inode in src, not in dst"
            ));
        }
        for g in dg.difference(&sg) {
            self.diffs.push(format!(
                "hard links: {g:?} share an inode in dst, not in src"
            ));
        }
    }
}

/// Reads until `buf` is full or the end of the file.
fn fill(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
