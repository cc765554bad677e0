//! A file big enough to be split into chunks that several workers copy at once.

use std::ffi::{CStr, CString};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::data::{DataPath, Ends};
use crate::node::DirHold;
use crate::opened::{finish_file, Copied, OpenedPair};
use crate::sys::Stat;

/// The most chunk tasks one file (or one range of it lent by another rank) is cut into: a
/// longer one takes longer chunks, so the tasks queued for a file stay few whatever its size
/// and `--chunk-size`.
pub(crate) const MAX_CHUNKS: u64 = 1024;

/// The chunk length for `span` bytes cut into chunks of about `chunk`: `chunk`, or longer so
/// there are at most [`MAX_CHUNKS`] of them.
pub(crate) fn chunk_len(span: u64, chunk: u64) -> u64 {
    chunk.max(span.div_ceil(MAX_CHUNKS)).max(1)
}

/// A file big enough to be split into chunks that workers copy in parallel. The last chunk to
/// finish drops the last `Arc`, and `Drop` finalizes the file, or removes it if any chunk failed.
pub(crate) struct BigFile<'a> {
    /// Held: the file is created in it and removed from it on failure.
    pub dir: DirHold<'a>,
    pub src_name: CString,
    pub dst_name: CString,
    /// Taken only in Drop.
    pair: Option<OpenedPair>,
    pub stat: Stat,
    failed: AtomicBool,
    copied: AtomicU64,
    /// `cp --mpi`: chunks of another rank's file, as (owner rank, the owner's id of the file).
    /// Dropping it reports to the owner instead of finishing the file.
    lent_by: Option<(u32, u64)>,
}

impl<'a> BigFile<'a> {
    pub fn new(dir: DirHold<'a>, src_name: CString, dst_name: CString, pair: OpenedPair) -> Self {
        let stat = pair.stat;
        BigFile {
            dir,
            src_name,
            dst_name,
            pair: Some(pair),
            stat,
            failed: AtomicBool::new(false),
            copied: AtomicU64::new(0),
            lent_by: None,
        }
    }

    /// Chunks of file `id` of rank `owner`, opened here to copy some of its bytes.
    pub fn lent(mut self, owner: u32, id: u64) -> Self {
        self.lent_by = Some((owner, id));
        self
    }

    /// The name the data goes to (a temporary name under `--atomic`), when another rank can
    /// open it in the same directory.
    pub fn written_name(&self) -> Option<&CStr> {
        let pair = self.pair.as_ref()?;
        if pair.link_target.is_some() || pair.stream {
            return None;
        }
        Some(pair.temp.as_deref().unwrap_or(&self.dst_name))
    }

    /// Another rank copied a chunk of this file: `bytes`, or it failed.
    pub fn lent_chunk_done(&self, failed: bool, bytes: u64) {
        if failed {
            self.failed.store(true, Ordering::Relaxed);
        }
        self.copied.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Copies one chunk with `data`; the last chunk runs to end of file.
    pub fn copy_chunk(&self, data: &mut DataPath, offset: u64, len: u64) {
        let ctx = self.dir.ctx;
        if self.failed.load(Ordering::Relaxed) || ctx.stopped() {
            return;
        }
        let Some(pair) = self.pair.as_ref() else {
            return;
        };
        let devs = (self.stat.dev, self.dir.dst_dev);
        let (src, dst) = (pair.src.as_fd(), pair.dst.as_fd());
        let ends = Ends {
            src,
            dst,
            devs,
            punch_holes: false,
        };
        match data.copy_span(ctx, ends, offset, len, &self.stat, pair.hash.as_ref()) {
            Ok(n) => {
                self.copied.fetch_add(n, Ordering::Relaxed);
                ctx.progress.bytes.fetch_add(n, Ordering::Relaxed);
            }
            Err(side) => {
                if !self.failed.swap(true, Ordering::Relaxed) {
                    ctx.fail(side.into_error(&self.dir, &self.src_name, &self.dst_name));
                }
            }
        }
    }
}

impl Drop for BigFile<'_> {
    fn drop(&mut self) {
        let ctx = self.dir.ctx;
        let Some(pair) = self.pair.take() else { return };
        if let Some((owner, id)) = self.lent_by {
            // The owner finishes the file (or gives it up) once every chunk is back.
            drop(pair);
            let failed = self.failed.load(Ordering::Relaxed) || ctx.stopped();
            let bytes = self.copied.load(Ordering::Relaxed);
            if let Some(ranks) = ctx.ranks.as_ref() {
                ranks.chunk_done(owner, id, failed, bytes);
            }
            return;
        }
        if self.failed.load(Ordering::Relaxed) || ctx.stopped() {
            pair.abandon(&self.dir, &self.dst_name);
            return;
        }
        let copied = Copied::Spread(self.copied.load(Ordering::Relaxed));
        if let Err(e) = finish_file(ctx, &self.dir, &self.src_name, &self.dst_name, pair, copied) {
            ctx.fail(e);
        }
    }
}
