//! The work of a run: [`Task`]s on the shared LIFO stack ([`Queue`], a [`crate::stack::WorkStack`])
//! that the workers take.

use std::ffi::CString;
use std::sync::Arc;

use crate::engine::bigfile::BigFile;
use crate::node::DirNode;
use crate::ranks::WorkItem;
use crate::sys::{Kind, Stat};

/// One directory entry waiting to be copied: its name and, when getdents knew it, its type.
pub(crate) type Entry = (CString, Option<Kind>);

/// Work for a worker.
pub(crate) enum Task<'a> {
    /// Create and fill the destination twin of a source subdirectory.
    Subdir {
        parent: Arc<DirNode<'a>>,
        name: CString,
        stat: Option<Stat>,
    },
    /// Read an already opened directory pair.
    Read(Arc<DirNode<'a>>),
    /// Copy these entries of one directory.
    Entries {
        dir: Arc<DirNode<'a>>,
        entries: Vec<Entry>,
    },
    /// A command-line file operand, possibly renamed (`cp a b`).
    Root {
        dir: Arc<DirNode<'a>>,
        src: CString,
        dst: CString,
        follow: bool,
    },
    /// A byte range of a big file.
    Chunk {
        file: Arc<BigFile<'a>>,
        offset: u64,
        len: u64,
    },
    /// Work from another rank, below one of this rank's roots (`cp --mpi`).
    FromRank {
        root: Arc<DirNode<'a>>,
        item: WorkItem,
    },
}

/// The shared task stack and the count of busy workers, for termination.
pub(crate) type Queue<'a> = crate::stack::WorkStack<Task<'a>>;

/// Entries a batch task carries; also how many entries a reader collects before handing off.
pub(crate) const BATCH: usize = 128;
