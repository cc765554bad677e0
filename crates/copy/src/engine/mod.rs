//! Engines: how the bytes of regular files move. Walk, jobs and finalize are shared, so engines
//! compare fairly; an engine is a [`Mover`] per worker thread.

mod data;
mod entry;
mod sync;
mod uring;

pub(crate) use data::{BigFile, DataPath};
pub(crate) use entry::{copy_entry, copy_root_entry};
pub(crate) use sync::SyncMover;
pub use uring::uring_available;
pub(crate) use uring::UringMover;

use crate::node::DirNode;
use crate::walk::{Entry, Queue};
use std::sync::Arc;

/// A copy engine, selectable with `ringio cp --engine`. Every engine shares the walk, the
/// policies and finalize; they differ only in how file bytes move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::Display, strum::EnumString)]
#[strum(serialize_all = "kebab-case")]
pub enum Engine {
    /// io_uring: per-file system calls of small files batched through one ring per worker;
    /// large files moved in the kernel (FICLONE, copy_file_range) in parallel chunks.
    Uring,
    /// Linux native AIO (io_submit/io_getevents), a window of reads and writes per file; files
    /// below the small-file threshold use plain read/write.
    Aio,
    /// copy_file_range for every file.
    CopyRange,
    /// sendfile for every file.
    Sendfile,
    /// splice through a pipe for every file.
    Splice,
    /// Plain read/write with a user-space buffer (`--bs`): the reference every engine is tested
    /// against.
    #[strum(serialize = "readwrite")]
    ReadWrite,
}

impl Engine {
    /// Every engine, in the order `--help` lists them.
    pub const ALL: &'static [Engine] = &[
        Engine::Uring,
        Engine::Aio,
        Engine::CopyRange,
        Engine::Sendfile,
        Engine::Splice,
        Engine::ReadWrite,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Uring => "uring",
            Engine::Aio => "aio",
            Engine::CopyRange => "copy-range",
            Engine::Sendfile => "sendfile",
            Engine::Splice => "splice",
            Engine::ReadWrite => "readwrite",
        }
    }

    /// One line for `--help`.
    pub fn about(self) -> &'static str {
        match self {
            Engine::Uring => {
                "io_uring batches of open/read/write/close for small files; FICLONE or \
                 copy_file_range in parallel chunks for large ones (default)"
            }
            Engine::Aio => {
                "Linux native AIO, --queue-depth requests of --bs in flight per file (--direct \
                 for O_DIRECT); plain read/write below --small-file-threshold"
            }
            Engine::CopyRange => "copy_file_range(2) for every file",
            Engine::Sendfile => "sendfile(2) for every file (files are not split into chunks)",
            Engine::Splice => "splice(2) through a pipe for every file",
            Engine::ReadWrite => "plain read(2)/write(2) through a --bs buffer; the reference",
        }
    }

    /// The transfer method an alternative engine moves bytes with.
    pub(crate) fn method(self) -> Option<crate::transfer::Method> {
        use crate::transfer::Method;
        match self {
            Engine::Aio => Some(Method::Aio),
            Engine::CopyRange => Some(Method::CopyRange),
            Engine::Sendfile => Some(Method::Sendfile),
            Engine::Splice => Some(Method::Splice),
            Engine::Uring | Engine::ReadWrite => None,
        }
    }
}

/// A worker's engine. Entries arrive in batches from one directory; a mover may keep I/O in
/// flight between calls, and must have finished all of it when `drain` returns.
pub(crate) trait Mover<'a> {
    /// Copies (or starts copying) these entries of `dir`.
    fn copy_entries(&mut self, dir: &Arc<DirNode<'a>>, entries: Vec<Entry>, queue: &Queue<'a>);
    /// Copies one chunk of a big file.
    fn copy_chunk(&mut self, file: &Arc<BigFile<'a>>, offset: u64, len: u64);
    /// Makes progress on in-flight I/O without blocking.
    fn poll(&mut self, queue: &Queue<'a>);
    /// Finishes all in-flight I/O.
    fn drain(&mut self, queue: &Queue<'a>);
    /// The data path for files this mover copies synchronously.
    fn data_path(&mut self) -> &mut DataPath;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for e in Engine::ALL {
            assert_eq!(e.name().parse::<Engine>().unwrap(), *e);
        }
        assert!("nope".parse::<Engine>().is_err());
    }
}
