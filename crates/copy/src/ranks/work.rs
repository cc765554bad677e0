//! [`WorkItem`]: a piece of a copy that can move to another rank, named by raw-byte paths
//! relative to the roots of the plan, with no descriptors or pointers in it. How it looks as
//! bytes is the transport's (ringio-mpi's `wire`).

use crate::sys::Kind;

/// Work another rank can do, with no descriptors or pointers in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkItem {
    /// Create the destination twin of a source subdirectory and copy it. `path` is relative to
    /// root `root` of the plan and ends with the new directory's name.
    Dir {
        /// Index of the root in `CopyPlan::roots`.
        root: u32,
        /// Relative path, raw bytes, `/`-separated.
        path: Vec<u8>,
        /// The parent destination was created by this run (so the name cannot exist yet).
        parent_fresh: bool,
    },
    /// Copy these entries of directory `dir` (relative to root `root`).
    Entries {
        /// Index of the root in `CopyPlan::roots`.
        root: u32,
        /// Relative path of the directory, raw bytes (empty: the root itself).
        dir: Vec<u8>,
        /// The destination directory was created by this run.
        fresh: bool,
        /// Names, each with its type from getdents ([`KIND_UNKNOWN`] when it did not say).
        names: Vec<(Vec<u8>, u8)>,
    },
    /// Copy bytes `offset .. offset + len` of the big file `src` in `dir` into `dst` there,
    /// which rank `owner` created and sized. The sender clamps the range to the file's size as
    /// it opened it, and the receiver to the size as it opens it: a length is never taken as
    /// a count of bytes to enumerate.
    Chunk {
        /// Index of the root in `CopyPlan::roots`.
        root: u32,
        /// Relative path of the directory.
        dir: Vec<u8>,
        /// Source name.
        src: Vec<u8>,
        /// The destination name being written (a temporary name under `--atomic`).
        dst: Vec<u8>,
        /// The destination's own name, which messages give (under `--atomic`, `dst` is a
        /// temporary name the user never gave).
        name: Vec<u8>,
        /// First byte.
        offset: u64,
        /// Bytes (the sender's clamp makes it real; an older sender's `u64::MAX - offset`,
        /// "to end of file", is clamped by the receiver).
        len: u64,
        /// The rank that finishes the file.
        owner: u32,
        /// The owner's name for the file.
        id: u64,
    },
    /// A chunk of the owner's file `id` is done (`failed`: and it failed, so the copy of the
    /// file must be given up); `bytes` were copied.
    ChunkDone {
        /// The owner's name for the file.
        id: u64,
        /// The chunk failed.
        failed: bool,
        /// Bytes copied.
        bytes: u64,
    },
}

/// Entry type codes of [`WorkItem::Entries`].
pub const KIND_UNKNOWN: u8 = 0;
/// A regular file.
pub const KIND_FILE: u8 = 1;
/// A directory.
pub const KIND_DIR: u8 = 2;
/// A symlink.
pub const KIND_SYMLINK: u8 = 3;
/// A FIFO, socket or device.
pub const KIND_SPECIAL: u8 = 4;

impl WorkItem {
    /// How deep in its tree the item is (components of its path).
    pub fn depth(&self) -> usize {
        let path = match self {
            WorkItem::Dir { path, .. } => path,
            WorkItem::Entries { dir, .. } | WorkItem::Chunk { dir, .. } => dir,
            WorkItem::ChunkDone { .. } => return 0,
        };
        if path.is_empty() {
            0
        } else {
            path.split(|&b| b == b'/').count()
        }
    }
}

/// The code of an entry type, as [`WorkItem::Entries`] carries it.
pub(super) fn kind_code(kind: Option<Kind>) -> u8 {
    match kind {
        None => KIND_UNKNOWN,
        Some(Kind::File) => KIND_FILE,
        Some(Kind::Dir) => KIND_DIR,
        Some(Kind::Symlink) => KIND_SYMLINK,
        Some(Kind::Special) => KIND_SPECIAL,
    }
}

/// The entry type a code of [`WorkItem::Entries`] stands for.
pub(super) fn kind_of(code: u8) -> Option<Kind> {
    match code {
        KIND_FILE => Some(Kind::File),
        KIND_DIR => Some(Kind::Dir),
        KIND_SYMLINK => Some(Kind::Symlink),
        KIND_SPECIAL => Some(Kind::Special),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_components_and_kinds_round_trip() {
        let dir = WorkItem::Dir {
            root: 3,
            path: b"a/b\xff".to_vec(),
            parent_fresh: true,
        };
        assert_eq!(dir.depth(), 2);
        let kinds = [
            None,
            Some(Kind::File),
            Some(Kind::Dir),
            Some(Kind::Symlink),
            Some(Kind::Special),
        ];
        for kind in kinds {
            assert_eq!(kind_of(kind_code(kind)), kind);
        }
    }
}
