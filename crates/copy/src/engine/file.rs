//! A regular file's copy (or a special file's, read as data): linked to an earlier copy of its
//! inode, or opened, filled whole or in chunks any worker may take, and finished.

use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::bigfile::BigFile;
use super::data::Ends;
use super::job::EntryJob;
use super::mover::Mover;
use super::open::open_pair;
use crate::error::{CopyError, Op};
use crate::links::Linked;
use crate::node::DirHold;
use crate::opened::{count_done, finish_file, Copied, OpenedPair};
use crate::plan::{Sparse, Tuning};
use crate::queue::{Queue, Task};
use crate::sys::{self, Stat};

/// How many bytes of a file are worth splitting over workers: its data, which for a file whose
/// holes are kept is what it allocates, not its length.
pub(crate) fn weight(stat: &Stat, sparse: Sparse) -> u64 {
    if sparse.keeps_holes(stat) {
        stat.blocks.saturating_mul(512).min(stat.size)
    } else {
        stat.size
    }
}

/// True when a file of this weight is split into chunks of `--chunk-size`.
pub(crate) fn worth_splitting(tuning: &Tuning, weight: u64) -> bool {
    tuning.chunk_size > 0 && weight >= 2 * tuning.chunk_size
}

/// Copies a regular file synchronously; big files are split into chunk tasks.
pub(super) fn copy_file<'a>(
    mover: &mut dyn Mover<'a>,
    mut job: EntryJob<'_, 'a>,
    queue: &Queue<'a>,
) -> Result<(), CopyError> {
    let (dir, ctx) = (job.dir, job.dir.ctx);
    let opened = job.opened.take();
    // The first copy of a source inode is remembered for later names to link to: multiply
    // linked files, and under -L (or -H on the command line) every file, since two symlinks
    // may name one file.
    if !(ctx.plan.preserve.links && (job.stat.nlink > 1 || job.follow)) {
        return match open_pair(&job, opened)? {
            Some(pair) => copy_opened(mover, &job, pair, Some(queue)),
            None => Ok(()),
        };
    }
    let stat = job.stat;
    let dst = job.dst.as_c_str();
    let anchored = || dir.anchored_path(dst);
    let replaces = ctx.policy.link_replaces();
    if ctx.plan.atomic {
        // Later names link to the final name, so it must exist before they do: the first copy
        // is finished, renamed and all, while they wait for it (`LinkTracker`).
        let linked =
            ctx.links
                .link_or_create(
                    (dir.dst_fd(), dst),
                    anchored,
                    &stat,
                    replaces,
                    || match open_pair(&job, opened)? {
                        Some(pair) => copy_opened(mover, &job, pair, None),
                        None => Ok(()),
                    },
                )?;
        if let Linked::Linked = linked {
            linked_done(&job);
        }
        return Ok(());
    }
    let linked =
        ctx.links
            .link_or_create((dir.dst_fd(), dst), anchored, &stat, replaces, || {
                open_pair(&job, opened)
            })?;
    match linked {
        Linked::Linked => {
            linked_done(&job);
            Ok(())
        }
        Linked::Created(Some(pair)) => copy_opened(mover, &job, pair, Some(queue)),
        Linked::Created(None) => Ok(()),
    }
}

/// A name linked to an earlier copy of its inode: counted, and given that copy's hash.
fn linked_done(job: &EntryJob<'_, '_>) {
    let dir = job.dir;
    if let Some(recorder) = &dir.ctx.recorder {
        recorder.link(&dir.dst_path(Some(&job.dst)), &job.stat);
    }
    count_done(dir, &job.src, &job.dst, None);
}

/// Copies the data of an opened pair and finishes the file; with a `queue`, a big file is
/// split into chunks that any worker may copy.
fn copy_opened<'a>(
    mover: &mut dyn Mover<'a>,
    job: &EntryJob<'_, 'a>,
    pair: OpenedPair,
    queue: Option<&Queue<'a>>,
) -> Result<(), CopyError> {
    let (dir, ctx) = (job.dir, job.dir.ctx);
    let (src, dst) = (job.src.as_c_str(), job.dst.as_c_str());
    let stat = &pair.stat.clone();
    let tuning = &ctx.tuning;
    let devs = (stat.dev, dir.dst_dev);
    if ctx.plan.attributes_only {
        return finish_file(ctx, dir, src, dst, pair, Copied::Spread(stat.size));
    }
    if pair.stream {
        // A pipe or a device: in order, to end of input.
        let result = mover.data_path().copy_stream(
            ctx,
            pair.src.as_fd(),
            pair.dst.as_fd(),
            pair.hash.as_ref(),
        );
        return match result {
            Ok(copied) => {
                ctx.progress.bytes.fetch_add(copied, Ordering::Relaxed);
                finish_file(ctx, dir, src, dst, pair, Copied::Spread(copied))
            }
            Err(side) => {
                pair.abandon(dir, dst);
                Err(side.into_error(dir, src, dst))
            }
        };
    }
    // --debug reports each file's copy whole, so it is not split. A file being hashed is, as
    // any other: with a sequential hash, chunks written ahead of the hashed front are read back
    // from the cache; with BLAKE3, each chunk is a subtree its worker hashes (see
    // manifest/hashing.rs). Measured cold, 1 GiB with xxh128, five rounds each: in chunks
    // 0.66-0.86 s (median 0.68), front to back by one worker 0.65-1.54 s (median 0.85), cp
    // without a hash 0.48-0.62 s (docs/bench/2026-11-25-verified-copies.md).
    let split = tuning.threads > 1
        && !ctx.reporter.debug()
        && worth_splitting(tuning, weight(stat, ctx.plan.sparse))
        && mover.data_path().splits_files();
    if let (Some(queue), true) = (queue, split) {
        // A clone takes one call whatever the size: try it before splitting.
        match mover
            .data_path()
            .try_clone(pair.src.as_fd(), pair.dst.as_fd(), devs, stat)
        {
            Ok(true) => {
                ctx.progress.bytes.fetch_add(stat.size, Ordering::Relaxed);
                return finish_file(ctx, dir, src, dst, pair, Copied::Spread(stat.size));
            }
            Ok(false) => {}
            Err(side) => {
                pair.abandon(dir, dst);
                return Err(side.into_error(dir, src, dst));
            }
        }
        // A file already in the page cache goes whole to one worker (a task of its own, so
        // other workers take other files): chunks of one cached file only contend for its
        // inode lock (measured: docs/bench/2026-11-23-nine-workloads.md). Reading
        // from the disk is what chunks speed up. Hashed with BLAKE3, a cached file split so
        // that its chunks' subtrees are hashed on every core took 1.10-1.49x the time of the
        // file whole (nine warm rounds of 1 GiB, paired and plain medians), its writers
        // spinning on that lock (docs/bench/2026-11-27-blake3-parallel.md).
        let chunk = if sys::fully_cached(pair.src.as_fd(), stat.size) == Some(true) {
            stat.size
        } else {
            tuning.chunk_size
        };
        split_into_chunks(job, pair, chunk, queue);
        return Ok(());
    }
    let ends = Ends {
        src: pair.src.as_fd(),
        dst: pair.dst.as_fd(),
        devs,
        punch_holes: false,
    };
    let result = mover
        .data_path()
        .copy_whole(ctx, ends, stat, pair.hash.as_ref());
    let copied = match result {
        Ok(n) => n,
        Err(side) => {
            pair.abandon(dir, dst);
            return Err(side.into_error(dir, src, dst));
        }
    };
    ctx.progress.bytes.fetch_add(copied, Ordering::Relaxed);
    let finished = finish_file(ctx, dir, src, dst, pair, Copied::Spread(copied));
    if ctx.reporter.debug() {
        // After the -v line, as GNU cp prints it.
        ctx.reporter.verbose_line(&mover.data_path().report.line());
    }
    finished
}

/// Queues the copy of a big file as tasks of `chunk` bytes, up to its size as opened; a source
/// that grows or shrinks meanwhile is caught when the last chunk is done (see
/// [`finish_file`]). A file never has more than [`super::bigfile::MAX_CHUNKS`] of them,
/// whatever the chunk size asked for.
fn split_into_chunks<'a>(
    job: &EntryJob<'_, 'a>,
    mut pair: OpenedPair,
    chunk: u64,
    queue: &Queue<'a>,
) {
    let dir: &DirHold<'a> = job.dir;
    let size = pair.stat.size;
    let mut chunk = super::bigfile::chunk_len(size, chunk);
    if let Some(hash) = pair.hash.as_mut() {
        // BLAKE3 hashes each chunk as a subtree: a power of two long.
        chunk = hash.split(size, chunk);
    }
    // Reserve the length up front so parallel writers do not race to extend the file.
    let _ = rustix::fs::ftruncate(&pair.dst, size);
    let held = match DirHold::new(dir.node().clone()) {
        Ok(held) => held,
        Err(e) => {
            return dir
                .ctx
                .fail(CopyError::io(Op::OpenDir, dir.dst_path(None), e))
        }
    };
    let file = Arc::new(BigFile::new(held, job.src.clone(), job.dst.clone(), pair));
    // Taken front to back (the stack is LIFO: pushed one by one, the last chunk was taken
    // first), so the device reads the file in its order and a sequential hash's front moves
    // from the start (cold 1 GiB: 0.80-0.97x the time of back to front, hashed or not;
    // docs/bench/2026-11-25-verified-copies.md).
    let chunks = (0..size.div_ceil(chunk)).map(|i| {
        let offset = i * chunk;
        Task::Chunk {
            file: file.clone(),
            offset,
            len: chunk.min(size - offset),
        }
    });
    queue.push_all(chunks.collect());
}
