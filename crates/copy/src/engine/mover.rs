//! The interface every engine implements: a [`Mover`] per worker thread.

use std::sync::Arc;

use super::bigfile::BigFile;
use super::data::DataPath;
use crate::node::DirHold;
use crate::queue::{Entry, Queue};

/// A worker's engine. Entries arrive in batches from one directory; a mover may keep I/O in
/// flight between calls, and must have finished all of it when `drain` returns.
pub(crate) trait Mover<'a> {
    /// Copies (or starts copying) these entries of `dir`.
    fn copy_entries(&mut self, dir: &DirHold<'a>, entries: Vec<Entry>, queue: &Queue<'a>);
    /// Copies one chunk of a big file.
    fn copy_chunk(&mut self, file: &Arc<BigFile<'a>>, offset: u64, len: u64);
    /// Makes progress on in-flight I/O without blocking.
    fn poll(&mut self, queue: &Queue<'a>);
    /// Finishes all in-flight I/O.
    fn drain(&mut self, queue: &Queue<'a>);
    /// The data path for files this mover copies synchronously.
    fn data_path(&mut self) -> &mut DataPath;
}
