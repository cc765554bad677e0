//! What a copy records for its manifest ([`Recorder`]): each file's hash as it is finished,
//! and each further name of a multiply linked file, which gets its first copy's hash.

use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use super::hashing::FileHash;
use super::tree::{name_in, Met};
use super::{Entry, Listing};
use crate::digest::Algo;
use crate::sys::{self, Kind, Stat};

/// The hashes of one run's files, relative to the destination root.
#[derive(Debug)]
pub struct Recorder {
    algo: Algo,
    base: PathBuf,
    /// The copies get their sources' mtimes (`-p`, `-t`): a copied file's entry carries it.
    times_kept: bool,
    files: Mutex<Vec<Recorded>>,
    /// Names of files kept as they were whose bytes are not their sources' (see
    /// [`Recorder::kept_unlike_source`]).
    unlike: Mutex<Vec<Vec<u8>>>,
}

#[derive(Debug)]
struct Recorded {
    entry: Entry,
    /// The source inode (dev, ino): a further name of it takes this hash.
    source: (u64, u64),
    /// A name linked to the first copy of `source`, whose hash it takes.
    linked: bool,
}

impl Recorder {
    /// Hashes by `algo`, of files named relative to `base` (the destination root); with
    /// `times_kept`, a copy's entry carries its source's mtime (which the copy then has).
    pub fn new(algo: Algo, base: PathBuf, times_kept: bool) -> Self {
        Recorder {
            algo,
            base,
            times_kept,
            files: Mutex::new(Vec::new()),
            unlike: Mutex::new(Vec::new()),
        }
    }

    /// The algorithm.
    pub fn algo(&self) -> Algo {
        self.algo
    }

    /// The name `dst` has in the manifest: relative to the destination root.
    pub(crate) fn name_of(&self, dst: &Path) -> Vec<u8> {
        name_in(&self.base, dst)
    }

    /// The copy `dst` of the source `stat` describes is finished, its bytes hashing to `hex`.
    pub(crate) fn file(&self, dst: &Path, stat: &Stat, hex: String) {
        let entry = Entry {
            path: self.name_of(dst),
            size: stat.size,
            mtime: self.times_kept.then_some(stat.mtime),
            hex,
        };
        self.push(entry, stat, false);
    }

    /// `dst` is a further name of a file copied earlier in this run (the source `stat`).
    pub(crate) fn link(&self, dst: &Path, stat: &Stat) {
        let entry = Entry {
            path: self.name_of(dst),
            size: stat.size,
            mtime: self.times_kept.then_some(stat.mtime),
            hex: String::new(),
        };
        self.push(entry, stat, true);
    }

    /// `name` in `dir` (shown as `path`) is a file of the destination this run left as it was
    /// (up to date, skipped, already complete): read there and recorded, so the manifest covers
    /// the destination as it stands. Not there, or not a regular file: nothing recorded. Its
    /// `source` (when known) is what later names linked to it take the hash of. Returns the
    /// hash recorded, if any.
    pub(crate) fn existing(
        &self,
        (dir, name, path): (BorrowedFd<'_>, &CStr, &Path),
        source: Option<&Stat>,
    ) -> io::Result<Option<String>> {
        let Some((stat, (hex, len))) = self.hash_at(dir, name, false)? else {
            return Ok(None);
        };
        let entry = Entry {
            path: self.name_of(path),
            size: len,
            mtime: Some(stat.mtime),
            hex: hex.clone(),
        };
        self.push(entry, source.unwrap_or(&stat), false);
        Ok(Some(hex))
    }

    /// The kept file `path` (recorded by [`Recorder::existing`] with `hex`) is compared with
    /// its source, `name` in `dir` (a symlink followed with `follow`): read and hashed, and
    /// noted when its bytes differ (`-n`, `-u` keep a file that is not the source's; a check
    /// of the copy by these hashes must still find it).
    pub(crate) fn compare_source(
        &self,
        path: &Path,
        hex: &str,
        (dir, name, follow): (BorrowedFd<'_>, &CStr, bool),
    ) -> io::Result<()> {
        if let Some((_, (source_hex, _))) = self.hash_at(dir, name, follow)? {
            if source_hex != hex {
                self.unlike
                    .lock()
                    .expect("recorder")
                    .push(self.name_of(path));
            }
        }
        Ok(())
    }

    /// The names of the files kept as they were whose bytes are not their sources'.
    pub fn kept_unlike_source(&self) -> Vec<Vec<u8>> {
        let mut names = std::mem::take(&mut *self.unlike.lock().expect("recorder"));
        names.sort();
        names
    }

    /// The stat and (hash, length) of the regular file `name` in `dir`; `None` when it is not
    /// there or not a regular file (never opened unless it is one: O_NONBLOCK).
    fn hash_at(
        &self,
        dir: BorrowedFd<'_>,
        name: &CStr,
        follow: bool,
    ) -> io::Result<Option<(Stat, (String, u64))>> {
        let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
        let flags = libc::O_RDONLY | nofollow | libc::O_CLOEXEC | libc::O_NONBLOCK;
        let fd = match sys::openat(dir, name, flags, 0) {
            Ok(fd) => fd,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ELOOP)) => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        let stat = sys::fstatx(fd.as_fd())?;
        if stat.kind() != Kind::File {
            return Ok(None);
        }
        let hash = FileHash::new(self.algo);
        let mut buf = sys::try_zeroed(1 << 20)?;
        let mut at = 0u64;
        loop {
            let n = sys::pread(fd.as_fd(), &mut buf, at)?;
            if n == 0 {
                break;
            }
            hash.data(fd.as_fd(), at, &buf[..n]);
            at += n as u64;
        }
        Ok(Some((stat, hash.finish_in_order()?)))
    }

    /// `sync --manifest`: every regular file below the destination root (the recorder's base,
    /// resolved as given) that no entry names yet is read there and recorded: the files DEST
    /// holds that the source lacks, too, so the manifest lists every file DEST holds. Reached
    /// through descriptors, symlinks not followed; the `ascmhl` folder at the top and the
    /// manifest file `skip` (by identity: it is replaced at the end) are left out. The first
    /// file or directory that cannot be read is the error, with its path.
    pub(crate) fn cover_tree(&self, skip: Option<&Path>) -> Result<(), (PathBuf, io::Error)> {
        let recorded: HashSet<Vec<u8>> = (self.files.lock().expect("recorder").iter())
            .map(|f| f.entry.path.clone())
            .collect();
        let root = CString::new(self.base.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
            .and_then(|c| sys::open_dir(rustix::fs::CWD, &c, true))
            .map_err(|e| (self.base.clone(), e))?;
        let skip = skip
            .and_then(|m| CString::new(m.as_os_str().as_bytes()).ok())
            .and_then(|m| sys::statx_at(rustix::fs::CWD, &m, true).ok());
        let mut failed = None;
        super::tree::walk(root.as_fd(), &mut |met| {
            if failed.is_some() {
                return;
            }
            let (rel, dir, name) = match met {
                Met::Entry {
                    kind: Kind::File,
                    rel,
                    dir,
                    name,
                } => (rel, dir, name),
                Met::Entry { .. } => return,
                Met::Unlistable { rel, err } => {
                    failed = Some((self.base.join(OsStr::from_bytes(rel)), err));
                    return;
                }
            };
            let own = rel == b"ascmhl"
                || rel.starts_with(b"ascmhl/")
                || skip
                    .as_ref()
                    .is_some_and(|m| sys::statx_at(dir, name, false).is_ok_and(|s| s.same_file(m)));
            if own || recorded.contains(rel) {
                return;
            }
            let path = self.base.join(OsStr::from_bytes(rel));
            if let Err(e) = self.existing((dir, name, &path), None) {
                failed = Some((path, e));
            }
        });
        failed.map_or(Ok(()), Err)
    }

    fn push(&self, entry: Entry, stat: &Stat, linked: bool) {
        self.files.lock().expect("recorder").push(Recorded {
            entry,
            source: (stat.dev, stat.ino),
            linked,
        });
    }

    /// Every file recorded, sorted by name; a linked name gets its first copy's hash (and is
    /// left out if that copy failed).
    pub fn listing(self) -> Listing {
        let files = self.files.into_inner().expect("recorder");
        let hashes: HashMap<(u64, u64), String> = files
            .iter()
            .filter(|f| !f.linked)
            .map(|f| (f.source, f.entry.hex.clone()))
            .collect();
        let mut entries: Vec<Entry> = files
            .into_iter()
            .filter_map(|f| {
                if !f.linked {
                    return Some(f.entry);
                }
                let hex = hashes.get(&f.source)?.clone();
                Some(Entry { hex, ..f.entry })
            })
            .collect();
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        // One line a name: `cp a a DIR`, a file first written from a `--copy-dest` basis.
        entries.dedup_by(|a, b| a.path == b.path);
        Listing {
            algo: self.algo,
            entries,
            alternative: None,
        }
    }
}
