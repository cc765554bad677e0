//! What a copy records for its manifest ([`Recorder`]): each file's hash as it is finished,
//! and each further name of a multiply linked file, which gets its first copy's hash.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use super::hashing::FileHash;
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
        }
    }

    /// The algorithm.
    pub fn algo(&self) -> Algo {
        self.algo
    }

    /// The name `dst` has in the manifest: relative to the destination root.
    pub(crate) fn name_of(&self, dst: &Path) -> Vec<u8> {
        let rel = dst.strip_prefix(&self.base).unwrap_or(dst);
        let rel = if rel.as_os_str().is_empty() {
            // The root itself is a file (`cp f g`): its own name.
            dst.file_name().map_or(dst, Path::new)
        } else {
            rel
        };
        rel.as_os_str().as_bytes().to_vec()
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
    /// `source` (when known) is what later names linked to it take the hash of.
    pub(crate) fn existing(
        &self,
        (dir, name, path): (BorrowedFd<'_>, &CStr, &Path),
        source: Option<&Stat>,
    ) -> io::Result<()> {
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
        let fd = match sys::openat(dir, name, flags, 0) {
            Ok(fd) => fd,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ELOOP)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let stat = sys::fstatx(fd.as_fd())?;
        if stat.kind() != Kind::File {
            return Ok(());
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
        let (hex, len) = hash.finish_in_order()?;
        let entry = Entry {
            path: self.name_of(path),
            size: len,
            mtime: Some(stat.mtime),
            hex,
        };
        self.push(entry, source.unwrap_or(&stat), false);
        Ok(())
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
