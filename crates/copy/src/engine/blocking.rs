//! The blocking mover: each entry copied start to finish on the worker thread with blocking
//! system calls. It serves `--engine readwrite` and is the automatic fallback where io_uring
//! is missing or forbidden.

use std::sync::Arc;

use super::bigfile::BigFile;
use super::data::DataPath;
use super::entry::copy_listed;
use super::mover::Mover;
use crate::node::DirHold;
use crate::queue::{Entry, Queue};

/// Blocking copies through a [`DataPath`].
#[derive(Debug)]
pub(crate) struct BlockingMover {
    data: DataPath,
}

impl BlockingMover {
    pub fn new(data: DataPath) -> Self {
        BlockingMover { data }
    }
}

impl<'a> Mover<'a> for BlockingMover {
    fn copy_entries(&mut self, dir: &DirHold<'a>, entries: Vec<Entry>, queue: &Queue<'a>) {
        let ctx = dir.ctx;
        for entry in entries {
            if ctx.stopped() {
                return;
            }
            copy_listed(ctx, self, dir, entry, queue);
        }
    }

    fn copy_chunk(&mut self, file: &Arc<BigFile<'a>>, offset: u64, len: u64) {
        file.copy_chunk(&mut self.data, offset, len);
    }

    fn poll(&mut self, _queue: &Queue<'a>) {}

    fn drain(&mut self, _queue: &Queue<'a>) {}

    fn data_path(&mut self) -> &mut DataPath {
        &mut self.data
    }
}
