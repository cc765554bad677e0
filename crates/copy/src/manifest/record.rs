//! What a copy records for its manifest ([`Recorder`]): each file's hash as it is finished,
//! and each further name of a multiply linked file, which gets its first copy's hash.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{Entry, Listing};
use crate::digest::Algo;
use crate::sys::Stat;

/// The hashes of one run's files, relative to the destination root.
#[derive(Debug)]
pub struct Recorder {
    algo: Algo,
    base: PathBuf,
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
    /// Hashes by `algo`, of files named relative to `base` (the destination root).
    pub fn new(algo: Algo, base: PathBuf) -> Self {
        Recorder {
            algo,
            base,
            files: Mutex::new(Vec::new()),
        }
    }

    /// The algorithm.
    pub fn algo(&self) -> Algo {
        self.algo
    }

    /// The destination root the names are relative to.
    pub fn base(&self) -> &Path {
        &self.base
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
            mtime: Some(stat.mtime),
            hex,
        };
        self.push(entry, stat, false);
    }

    /// `dst` is a further name of a file copied earlier in this run (the source `stat`).
    pub(crate) fn link(&self, dst: &Path, stat: &Stat) {
        let entry = Entry {
            path: self.name_of(dst),
            size: stat.size,
            mtime: Some(stat.mtime),
            hex: String::new(),
        };
        self.push(entry, stat, true);
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
        Listing {
            algo: self.algo,
            entries,
            alternative: None,
        }
    }
}
