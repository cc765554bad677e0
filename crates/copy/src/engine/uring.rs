//! The io_uring mover: small files go statx → open (source, then linked destination create) →
//! read → write → close as ring operations. Many files are in flight at once, so each
//! `io_uring_enter` carries the next step of dozens of files instead of one system call per
//! step, and operations that block (cold cache) run concurrently in the kernel's io-wq workers.
//! Files above the small-file threshold, symlinks, special files and merges into existing
//! directories take the shared synchronous path ([`super::entry::copy_entry`]), whose data path uses
//! the kernel's own copy (FICLONE, copy_file_range).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use rustix::fs::Statx;

use super::bigfile::BigFile;
use super::data::{DataPath, Ends};
use super::entry::{copy_entry, copy_stated};
use super::job::EntryJob;
use super::mover::Mover;
use super::open::opened_as_stated;
use crate::error::{CopyError, Op};
use crate::finalize;
use crate::manifest::hashing::FileHash;
use crate::node::DirHold;
use crate::opened::{
    changed_while_copied, count_done, finish_file, held_still, stop_for_tests, Copied, OpenedPair,
};
use crate::plan::Dereference;
use crate::queue::{Entry, Queue};
use crate::quote::quote;
use crate::sys::{self, Kind, Stat};

/// Checks that io_uring can be set up here and supports every opcode this mover uses.
/// Docker's default seccomp profile and `kernel.io_uring_disabled` make this fail.
pub fn uring_available() -> Result<(), String> {
    let ring = IoUring::new(8).map_err(|e| format!("io_uring_setup failed: {e}"))?;
    let mut probe = io_uring::Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| format!("io_uring probe failed: {e}"))?;
    for (code, name) in [
        (opcode::Statx::CODE, "STATX"),
        (opcode::OpenAt::CODE, "OPENAT"),
        (opcode::Read::CODE, "READ"),
        (opcode::Write::CODE, "WRITE"),
        (opcode::Close::CODE, "CLOSE"),
    ] {
        if !probe.is_supported(code) {
            return Err(format!("io_uring lacks the {name} operation"));
        }
    }
    Ok(())
}

// Which operation a completion belongs to: the low byte of user_data.
const TAG_STATX: u64 = 1;
const TAG_OPEN_SRC: u64 = 2;
const TAG_OPEN_DST: u64 = 3;
const TAG_READ: u64 = 4;
const TAG_WRITE: u64 = 5;
const TAG_CLOSE_SRC: u64 = 6;
const TAG_CLOSE_DST: u64 = 7;

/// One small file in flight. Its name and statx buffer are heap allocations that stay put while
/// the kernel uses them; the slot owns buffer number `slot`.
struct FileOp<'a> {
    /// Keeps the directory's descriptors open while the kernel uses them.
    dir: DirHold<'a>,
    name: CString,
    statx: Box<Statx>,
    stat: Option<Stat>,
    src: i32,
    dst: i32,
    /// Bytes of the file written so far.
    offset: u64,
    /// Bytes in the buffer from the last read, and how many of them are written.
    filled: u32,
    written: u32,
    /// Size of the last read request.
    asked: u32,
    /// Completions still to come before the next step.
    pending: u8,
    /// Content is complete and both descriptors went to CLOSE.
    closed: bool,
    error: Option<CopyError>,
    /// `--hash`: fed each read; its digest taken before the source is closed.
    hash: Option<FileHash>,
    hex: Option<String>,
}

impl<'a> FileOp<'a> {
    /// A file about to take its first step: one completion pending, nothing copied yet.
    fn new(dir: DirHold<'a>, name: CString, stat: Option<Stat>, src: i32) -> Self {
        let hash = dir.ctx.file_hash();
        FileOp {
            dir,
            name,
            // SAFETY: statx is plain old data; all-zero is a valid value.
            statx: Box::new(unsafe { std::mem::zeroed() }),
            stat,
            src,
            dst: -1,
            offset: 0,
            filled: 0,
            written: 0,
            asked: 0,
            pending: 1,
            closed: false,
            error: None,
            hash,
            hex: None,
        }
    }
}

/// A worker's ring and its small files in flight.
pub(crate) struct UringMover<'a> {
    ring: IoUring,
    slots: Vec<Option<FileOp<'a>>>,
    free: Vec<usize>,
    in_flight: usize,
    /// One buffer per slot, `buffer_size` bytes each. Allocated zeroed, so the kernel maps
    /// pages only as slots first use them: memory follows the files actually copied.
    buffers: Vec<u8>,
    buffer_size: usize,
    /// For files copied in place: one small-file buffer.
    in_place_buf: Vec<u8>,
    /// Batches left to send through the ring before trying in place again.
    ring_batches: u32,
    threshold: u64,
    data: DataPath,
    completions: Vec<(u64, i32)>,
}

impl<'a> UringMover<'a> {
    /// Sets up a ring with `depth` file slots. Fails when io_uring is unavailable.
    pub fn new(depth: u32, threshold: u64, ring_only: bool, data: DataPath) -> io::Result<Self> {
        let depth = depth.max(1);
        let entries = (depth * 2).next_power_of_two();
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(entries)
            .or_else(|_| IoUring::builder().setup_coop_taskrun().build(entries))
            .or_else(|_| IoUring::new(entries))?;
        Ok(UringMover {
            ring,
            slots: (0..depth).map(|_| None).collect(),
            free: (0..depth as usize).rev().collect(),
            in_flight: 0,
            buffers: Vec::new(),
            in_place_buf: Vec::new(),
            ring_batches: if ring_only { u32::MAX } else { 0 },
            buffer_size: (threshold as usize).next_multiple_of(4096).max(4096),
            threshold,
            data,
            completions: Vec::with_capacity(entries as usize * 2),
        })
    }

    /// The buffer of `slot`. Buffers are not registered with the ring: for buffered I/O the
    /// kernel copies to and from user memory either way, and registering pins every page up
    /// front (RSS, and milliseconds at startup).
    /// `None` when the memory for them is not there (the file fails with ENOMEM, no abort).
    fn buffer(&mut self, slot: usize) -> Option<*mut u8> {
        if self.buffers.is_empty() {
            self.buffers = sys::try_zeroed(self.slots.len() * self.buffer_size).ok()?;
        }
        Some(self.buffers[slot * self.buffer_size..].as_mut_ptr())
    }

    /// Ends the file in `slot` for want of memory.
    fn out_of_memory(&mut self, slot: usize) {
        let op = self.slots[slot].as_mut().expect("live slot");
        let nomem = io::Error::from_raw_os_error(libc::ENOMEM);
        let err = CopyError::io(Op::Read, op.dir.src_path(Some(&op.name)), nomem);
        self.finish(slot, Some(err));
    }

    /// A free slot, waiting for one if all are busy, and a hold on `dir` for the file that
    /// will occupy it.
    fn take_slot(&mut self, dir: &DirHold<'a>, queue: &Queue<'a>) -> Option<(usize, DirHold<'a>)> {
        while self.free.is_empty() {
            self.wait(1, queue);
        }
        match DirHold::new(dir.node().clone()) {
            Ok(held) => Some((self.free.pop().expect("a free slot"), held)),
            Err(e) => {
                let err = CopyError::io(Op::OpenDir, dir.src_path(None), e);
                dir.ctx.fail(err);
                None
            }
        }
    }

    /// Queues one entry, from its statx on.
    fn start(&mut self, dir: &DirHold<'a>, name: CString, queue: &Queue<'a>) {
        let Some((slot, held)) = self.take_slot(dir, queue) else {
            return;
        };
        let mut op = FileOp::new(held, name, None, -1);
        let sqe = opcode::Statx::new(
            types::Fd(dir.src_fd().as_raw_fd()),
            op.name.as_ptr(),
            (&mut *op.statx as *mut Statx).cast(),
        )
        .flags(libc::AT_SYMLINK_NOFOLLOW | libc::AT_STATX_SYNC_AS_STAT)
        .mask(sys::STATX_MASK.bits())
        .build()
        .user_data(user_data(slot, TAG_STATX));
        self.slots[slot] = Some(op);
        self.in_flight += 1;
        self.push(&[sqe], queue);
    }

    /// Queues a small file whose source the caller already stated and opened (a miss of the
    /// in-place copy): the ring starts at creating the destination.
    fn start_opened(
        &mut self,
        dir: &DirHold<'a>,
        name: CString,
        stat: Stat,
        src: OwnedFd,
        queue: &Queue<'a>,
    ) {
        let Some((slot, held)) = self.take_slot(dir, queue) else {
            return;
        };
        let op = FileOp::new(held, name, Some(stat), src.into_raw_fd());
        let sqe = open_dst(slot, &op, &stat);
        self.slots[slot] = Some(op);
        self.in_flight += 1;
        self.push(&[sqe], queue);
    }

    /// Pushes SQEs, submitting first if the queue is full.
    fn push(&mut self, sqes: &[squeue::Entry], queue: &Queue<'a>) {
        loop {
            // SAFETY: every pointer in these SQEs (names, statx buffers, data buffers) belongs
            // to a slot that stays occupied until all of its completions have arrived.
            let pushed = unsafe { self.ring.submission().push_multiple(sqes) };
            if pushed.is_ok() {
                return;
            }
            self.wait(0, queue);
        }
    }

    /// Submits queued SQEs, waits for `want` completions, and handles every completion there is.
    fn wait(&mut self, want: usize, queue: &Queue<'a>) {
        match self.ring.submit_and_wait(want) {
            Ok(_) => {}
            // Interrupted, completion queue full, or out of kernel resources for the moment:
            // reap what is there and try again on the next call.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR | libc::EBUSY | libc::EAGAIN)
                ) => {}
            // Nothing else is documented for a ring that was set up and is fed valid SQEs.
            Err(e) => panic!("io_uring_enter failed: {e}"),
        }
        let mut done = std::mem::take(&mut self.completions);
        done.extend(
            self.ring
                .completion()
                .map(|c: cqueue::Entry| (c.user_data(), c.result())),
        );
        for &(data, res) in &done {
            self.complete(data, res, queue);
        }
        done.clear();
        self.completions = done;
    }

    fn complete(&mut self, data: u64, res: i32, queue: &Queue<'a>) {
        let slot = (data >> 8) as usize;
        let tag = data & 0xff;
        let Some(op) = self.slots[slot].as_mut() else {
            return;
        };
        op.pending -= 1;
        let ctx = op.dir.ctx;
        match tag {
            TAG_STATX => {
                if res < 0 {
                    let err = CopyError::io(Op::Stat, op.dir.src_path(Some(&op.name)), errno(res));
                    self.finish(slot, Some(err));
                    return;
                }
                let stat = Stat::from(&*op.statx);
                let linked = ctx.plan.preserve.links && stat.nlink > 1;
                if stat.kind() != Kind::File
                    || stat.size > self.threshold
                    || linked
                    || self.data.keeps_holes(&stat)
                    || ctx.stopped()
                {
                    // Not a small file: the shared synchronous path takes it from here.
                    let op = self.release(slot);
                    if !ctx.stopped() {
                        copy_stated(self, EntryJob::new(&op.dir, op.name, stat), queue);
                    }
                    return;
                }
                op.stat = Some(stat);
                stop_for_tests();
                let dir = &op.dir;
                let open_src =
                    opcode::OpenAt::new(types::Fd(dir.src_fd().as_raw_fd()), op.name.as_ptr())
                        .flags(libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
                        .build()
                        .user_data(user_data(slot, TAG_OPEN_SRC));
                op.pending = 2;
                // Linked: the destination is created only once the source opened.
                let open_dst = open_dst(slot, op, &stat);
                self.push(&[open_src.flags(squeue::Flags::IO_LINK), open_dst], queue);
            }
            TAG_OPEN_SRC | TAG_OPEN_DST => {
                if res >= 0 {
                    if tag == TAG_OPEN_SRC {
                        op.src = res;
                        // What was opened must be what statx saw; its stat is the one used.
                        // SAFETY: res is the descriptor this completion opened; op owns it.
                        let fd = unsafe { BorrowedFd::borrow_raw(res) };
                        let stated = op.stat.expect("stat of a file being opened");
                        match opened_as_stated(&op.dir, &op.name, fd, &stated) {
                            Ok(opened) => op.stat = Some(opened),
                            Err(e) => op.error = Some(e),
                        }
                    } else {
                        op.dst = res
                    }
                } else if res != -libc::ECANCELED && op.error.is_none() {
                    let (kind, path) = if tag == TAG_OPEN_SRC {
                        (Op::Open, op.dir.src_path(Some(&op.name)))
                    } else {
                        (Op::Create, op.dir.dst_path(Some(&op.name)))
                    };
                    op.error = Some(CopyError::io(kind, path, errno(res)));
                }
                if op.pending == 0 {
                    if op.error.is_none() && !ctx.stopped() {
                        op.error = mode_as_opened(op).err();
                    }
                    if op.error.is_some() || ctx.stopped() {
                        let err = op.error.take();
                        self.finish(slot, err);
                    } else {
                        self.read(slot, queue);
                    }
                }
            }
            TAG_READ => {
                if res == -libc::EAGAIN || res == -libc::EINTR {
                    self.read(slot, queue);
                } else if res < 0 {
                    let err = CopyError::io(Op::Read, op.dir.src_path(Some(&op.name)), errno(res));
                    self.finish(slot, Some(err));
                } else if res == 0 || ctx.stopped() {
                    self.close(slot, queue);
                } else {
                    op.filled = res as u32;
                    op.written = 0;
                    if let Some(hash) = &op.hash {
                        // The kernel filled `res` bytes of this slot's buffer, and nothing
                        // else uses it until the write below is submitted.
                        let at = slot * self.buffer_size;
                        let bytes = &self.buffers[at..at + res as usize];
                        // SAFETY: op.src is open until its CLOSE.
                        let src = unsafe { BorrowedFd::borrow_raw(op.src) };
                        let size = op.stat.map_or(0, |s| s.size);
                        // One read shorter than asked that reached the size: the whole file.
                        let got = res as u32;
                        if op.offset == 0 && u64::from(got) == size && got < op.asked {
                            hash.all(src, bytes);
                        } else {
                            hash.data(src, op.offset, bytes);
                        }
                    }
                    self.write(slot, queue);
                }
            }
            TAG_WRITE => {
                if res == -libc::EAGAIN || res == -libc::EINTR {
                    self.write(slot, queue);
                    return;
                }
                if res <= 0 {
                    let e = if res == 0 {
                        io::ErrorKind::WriteZero.into()
                    } else {
                        errno(res)
                    };
                    let err = CopyError::io(Op::Write, op.dir.dst_path(Some(&op.name)), e);
                    self.finish(slot, Some(err));
                    return;
                }
                op.written += res as u32;
                if op.written < op.filled {
                    self.write(slot, queue); // short write: the rest
                    return;
                }
                op.offset += u64::from(op.filled);
                let size = op.stat.map_or(0, |s| s.size);
                // A read shorter than asked that reached the size statx gave is end of file.
                if (op.filled < op.asked && op.offset >= size) || ctx.stopped() {
                    self.close(slot, queue);
                } else {
                    self.read(slot, queue);
                }
            }
            TAG_CLOSE_SRC | TAG_CLOSE_DST => {
                if tag == TAG_CLOSE_DST && res < 0 && op.error.is_none() {
                    let err = CopyError::io(Op::Close, op.dir.dst_path(Some(&op.name)), errno(res));
                    op.error = Some(err);
                }
                if op.pending == 0 {
                    let err = op.error.take();
                    self.finish(slot, err);
                }
            }
            _ => unreachable!("unknown completion tag {tag}"),
        }
    }

    fn read(&mut self, slot: usize, queue: &Queue<'a>) {
        let Some(buf) = self.buffer(slot) else {
            return self.out_of_memory(slot);
        };
        let op = self.slots[slot].as_mut().expect("live slot");
        let size = op.stat.map_or(0, |s| s.size);
        // Ask for one byte past the expected end, so a file that grew is noticed in one read.
        let want = (size.saturating_sub(op.offset) + 1).min(self.buffer_size as u64) as u32;
        op.asked = want;
        op.pending = 1;
        let sqe = opcode::Read::new(types::Fd(op.src), buf, want)
            .offset(op.offset)
            .build();
        self.push(&[sqe.user_data(user_data(slot, TAG_READ))], queue);
    }

    fn write(&mut self, slot: usize, queue: &Queue<'a>) {
        let Some(buf) = self.buffer(slot) else {
            return self.out_of_memory(slot);
        };
        let op = self.slots[slot].as_mut().expect("live slot");
        op.pending = 1;
        // SAFETY: written < filled <= buffer size, so the pointer stays in this slot's buffer.
        let buf = unsafe { buf.add(op.written as usize) };
        let len = op.filled - op.written;
        let at = op.offset + u64::from(op.written);
        let sqe = opcode::Write::new(types::Fd(op.dst), buf, len)
            .offset(at)
            .build();
        self.push(&[sqe.user_data(user_data(slot, TAG_WRITE))], queue);
    }

    /// Content is complete: metadata on the open destination, then both closes in one batch.
    fn close(&mut self, slot: usize, queue: &Queue<'a>) {
        let op = self.slots[slot].as_mut().expect("live slot");
        let ctx = op.dir.ctx;
        if ctx.stopped() {
            self.finish(slot, None);
            return;
        }
        let stat = op.stat.expect("stat of a file in flight");
        // One read that saw end of file is one moment's view; more reads are checked again.
        let one_read = op.offset == stat.size && stat.size < self.buffer_size as u64;
        if !one_read {
            // SAFETY: op.src is open until the CLOSE below completes.
            let src = unsafe { BorrowedFd::borrow_raw(op.src) };
            if let Err(e) = held_still(src, &stat) {
                let (from, to) = (
                    op.dir.src_path(Some(&op.name)),
                    op.dir.dst_path(Some(&op.name)),
                );
                self.finish(slot, Some(changed_while_copied(&from, &to, &e, true)));
                return;
            }
        }
        if let Some(hash) = op.hash.take() {
            // SAFETY: op.src is open until the CLOSE below completes.
            let src = unsafe { BorrowedFd::borrow_raw(op.src) };
            match hash.finish(src, op.offset) {
                Ok(hex) => op.hex = Some(hex),
                Err(e) => {
                    ctx.fail(CopyError::io(Op::Read, op.dir.src_path(Some(&op.name)), e));
                }
            }
        }
        ctx.progress.bytes.fetch_add(op.offset, Ordering::Relaxed);
        // Nothing to set on a file without a kept attribute, but for the ACL an explicit
        // --no-preserve=mode takes from a file made in a directory with a default ACL.
        if ctx.plan.preserve.any() || (ctx.plan.default_modes && op.dir.dst_default_acl) {
            // SAFETY: op.dst is open until the CLOSE below completes.
            let dst = unsafe { BorrowedFd::borrow_raw(op.dst) };
            // SAFETY: likewise op.src.
            let src = unsafe { BorrowedFd::borrow_raw(op.src) };
            let path = || op.dir.dst_path(Some(&op.name));
            if let Err(e) = finalize::file(ctx, op.dir.in_dir(), (src, dst), &stat, true, &path) {
                op.error = Some(e);
            }
        }
        op.pending = 2;
        let close_src = opcode::Close::new(types::Fd(op.src))
            .build()
            .user_data(user_data(slot, TAG_CLOSE_SRC));
        let close_dst = opcode::Close::new(types::Fd(op.dst))
            .build()
            .user_data(user_data(slot, TAG_CLOSE_DST));
        op.src = -1;
        op.dst = -1;
        op.closed = true;
        self.push(&[close_src, close_dst], queue);
    }

    /// Ends a file: on success counts it; on failure (or interruption) closes what is open,
    /// removes the partial destination and reports the error. Metadata errors leave the file,
    /// whose content is complete, in place.
    fn finish(&mut self, slot: usize, err: Option<CopyError>) {
        let op = self.release(slot);
        let ctx = op.dir.ctx;
        let dst_was_open = op.dst >= 0;
        for fd in [op.src, op.dst] {
            if fd >= 0 {
                // SAFETY: the fd came from a completed OPENAT and no operation uses it now.
                drop(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
        let close_failed = matches!(err, Some(CopyError::Io { op: Op::Close, .. }));
        if (!op.closed && dst_was_open) || close_failed {
            let _ = sys::unlinkat(op.dir.dst_fd(), &op.name);
        }
        // Content complete and in place (only its metadata may have failed): in the manifest.
        if op.closed && !close_failed {
            if let (Some(recorder), Some(hex), Some(stat)) = (&ctx.recorder, op.hex, op.stat) {
                let size = Stat {
                    size: op.offset,
                    ..stat
                };
                recorder.file(&op.dir.dst_path(Some(&op.name)), &size, hex);
            }
        }
        match err {
            Some(e) => ctx.fail(e),
            None if op.closed => {
                let size = op.stat.map_or(0, |s| s.size);
                if op.offset != size && ctx.reporter.verbose() {
                    ctx.reporter.note(&format!(
                        "{} changed size while it was copied ({size} bytes at start, {} copied)",
                        quote(&op.dir.src_path(Some(&op.name))),
                        op.offset
                    ));
                }
                count_done(&op.dir, &op.name, &op.name, None)
            }
            None => {}
        }
    }

    fn release(&mut self, slot: usize) -> FileOp<'a> {
        let op = self.slots[slot].take().expect("live slot");
        self.free.push(slot);
        self.in_flight -= 1;
        op
    }
}

/// A source whose mode changed between its statx and its open (the destination was created
/// with the mode statx saw) gets the mode it has as opened, as if stat'ed then.
fn mode_as_opened(op: &FileOp<'_>) -> Result<(), CopyError> {
    // Only a statx the ring made has the earlier view (its mask is set).
    let (Some(opened), true) = (op.stat, op.statx.stx_mask != 0) else {
        return Ok(());
    };
    let ctx = op.dir.ctx;
    let stated = Stat::from(&*op.statx);
    let was = finalize::create_mode(ctx.plan, &stated, op.dir.fresh);
    let is = finalize::create_mode(ctx.plan, &opened, op.dir.fresh);
    if was == is {
        return Ok(());
    }
    // SAFETY: op.dst is open: both opens completed without error.
    let dst = unsafe { BorrowedFd::borrow_raw(op.dst) };
    sys::fchmod(dst, is & !ctx.umask)
        .map_err(|e| CopyError::io(Op::SetMode, op.dir.dst_path(Some(&op.name)), e))
}

/// The OPENAT that creates `op`'s destination.
fn open_dst(slot: usize, op: &FileOp<'_>, stat: &Stat) -> squeue::Entry {
    opcode::OpenAt::new(types::Fd(op.dir.dst_fd().as_raw_fd()), op.name.as_ptr())
        .flags(libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC)
        .mode(finalize::create_mode(op.dir.ctx.plan, stat, op.dir.fresh))
        .build()
        .user_data(user_data(slot, TAG_OPEN_DST))
}

fn user_data(slot: usize, tag: u64) -> u64 {
    ((slot as u64) << 8) | tag
}

fn errno(res: i32) -> io::Error {
    io::Error::from_raw_os_error(-res)
}

/// What [`UringMover::copy_in_place`] did.
enum InPlace {
    /// Copied (or failed and reported): nothing left to do.
    Done,
    /// Its data is not in the page cache; nothing was created. Send it through the ring, which
    /// takes over the source already stated and opened.
    WouldBlock(Stat, OwnedFd),
}

/// Uncached files in one batch that make a worker take the cache for cold.
const MISSES_FOR_COLD: u32 = 3;

/// Batches a worker then sends straight through the ring before probing again.
const RING_BATCHES_AFTER_MISS: u32 = 8;

impl<'a> UringMover<'a> {
    /// Copies a small file with plain system calls when its data is already in the page cache.
    ///
    /// On a warm cache nothing blocks, and the ring's hand-offs cost time: io_uring always
    /// passes an O_CREAT open to an io-wq thread, and ext4 buffered writes go there too. So
    /// the first read is a `preadv2(RWF_NOWAIT)`; if the data is cached the copy finishes here,
    /// if not the file goes to the ring before anything is created.
    ///
    /// A file the walk listed as regular is opened first and its descriptor stat'ed: the stat,
    /// the data and the metadata are then of one file whatever happens to the name meanwhile,
    /// for the calls a statx by name and an open cost anyway.
    fn copy_in_place(
        &mut self,
        dir: &DirHold<'a>,
        name: &CString,
        kind: Option<Kind>,
        queue: &Queue<'a>,
    ) -> InPlace {
        let ctx = dir.ctx;
        if kind.is_none() {
            // Unknown type (a filesystem without d_type): opening a FIFO or a device may block
            // or act, so the shared path stats it by name first.
            copy_entry(ctx, self, dir, name.clone(), queue);
            return InPlace::Done;
        }
        let Ok(src) = sys::openat(dir.src_fd(), name, libc::O_RDONLY | libc::O_NOFOLLOW, 0) else {
            // Gone, unreadable, or now a symlink: the shared path stats it again and says why.
            copy_entry(ctx, self, dir, name.clone(), queue);
            return InPlace::Done;
        };
        let stat = match sys::fstatx(src.as_fd()) {
            Ok(stat) => stat,
            Err(e) => {
                ctx.fail(CopyError::io(Op::Stat, dir.src_path(Some(name)), e));
                return InPlace::Done;
            }
        };
        let linked = ctx.plan.preserve.links && stat.nlink > 1;
        if stat.kind() != Kind::File
            || stat.size > self.threshold
            || linked
            || self.data.keeps_holes(&stat)
        {
            // The descriptor goes along: the shared path needs no second open.
            let job = EntryJob {
                opened: Some(src),
                ..EntryJob::new(dir, name.clone(), stat)
            };
            copy_stated(self, job, queue);
            return InPlace::Done;
        }
        stop_for_tests();
        // One byte past the expected end, so end of file is seen in this read.
        let want = stat.size as usize + 1;
        if self.in_place_buf.len() < want {
            let mut more = Vec::new();
            if more.try_reserve_exact(want).is_err() {
                // Short of memory: the ring's own buffers, or the error, come next.
                return InPlace::WouldBlock(stat, src);
            }
            more.resize(want, 0);
            self.in_place_buf = more;
        }
        let mut n = 0;
        // Two tries: a miss that is not a cold cache (a page locked for a moment, or one that
        // carries readahead's mark) is usually gone on the second; data that is on disk only is
        // not, and the first try has started reading it ahead for the ring.
        for _ in 0..2 {
            match sys::pread_nowait(src.as_fd(), &mut self.in_place_buf[n..want], n as u64) {
                Ok(got) => {
                    n += got;
                    if got == 0 || n >= stat.size as usize {
                        break;
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {}
                // EOPNOTSUPP: a filesystem without RWF_NOWAIT (tmpfs on older kernels); the
                // ring copies it without the probe.
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    return InPlace::WouldBlock(stat, src)
                }
                Err(e) => {
                    ctx.fail(CopyError::io(Op::Read, dir.src_path(Some(name)), e));
                    return InPlace::Done;
                }
            }
        }
        if n < stat.size as usize {
            // Not cached (or only in part): let the ring wait for the disk.
            return InPlace::WouldBlock(stat, src);
        }
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
        let dst = match sys::openat(
            dir.dst_fd(),
            name,
            flags,
            finalize::create_mode(ctx.plan, &stat, dir.fresh),
        ) {
            Ok(fd) => fd,
            Err(e) => {
                ctx.fail(CopyError::io(Op::Create, dir.dst_path(Some(name)), e));
                return InPlace::Done;
            }
        };
        let hash = ctx.file_hash();
        if let Some(hash) = &hash {
            if n < want {
                hash.all(src.as_fd(), &self.in_place_buf[..n]);
            } else {
                hash.data(src.as_fd(), 0, &self.in_place_buf[..n]);
            }
        }
        let mut copied = Copied::Snapshot(n as u64);
        let mut result = sys::pwrite_all(dst.as_fd(), &self.in_place_buf[..n], 0)
            .map_err(|e| CopyError::io(Op::Write, dir.dst_path(Some(name)), e));
        if result.is_ok() && n == want {
            // The file grew since statx: copy the rest the ordinary way.
            let devs = (stat.dev, dir.dst_dev);
            let at = n as u64;
            let ends = Ends {
                src: src.as_fd(),
                dst: dst.as_fd(),
                devs,
                punch_holes: false,
            };
            match self
                .data
                .copy_range(ctx, ends, at, u64::MAX - at, stat.size, hash.as_ref())
            {
                Ok(more) => copied = Copied::Spread(at + more),
                Err(side) => result = Err(side.into_error(dir, name, name)),
            }
        }
        if let Err(e) = result {
            drop(dst);
            let _ = sys::unlinkat(dir.dst_fd(), name);
            ctx.fail(e);
            return InPlace::Done;
        }
        let (Copied::Snapshot(bytes) | Copied::Spread(bytes)) = copied;
        ctx.progress.bytes.fetch_add(bytes, Ordering::Relaxed);
        let pair = OpenedPair {
            src,
            stat,
            dst,
            created: true,
            temp: None,
            replaces: None,
            link_target: None,
            removable: true,
            stream: false,
            backup: None,
            hash,
        };
        if let Err(e) = finish_file(ctx, dir, name, name, pair, copied) {
            ctx.fail(e);
        }
        InPlace::Done
    }
}

impl<'a> Mover<'a> for UringMover<'a> {
    fn copy_entries(&mut self, dir: &DirHold<'a>, entries: Vec<Entry>, queue: &Queue<'a>) {
        let ctx = dir.ctx;
        // Merges need cp's checks against what exists, -L needs following: the shared path.
        let fast =
            dir.fresh && ctx.plan.dereference != Dereference::Always && ctx.small_files_fast();
        let devs = (dir.stat.dev, dir.dst_dev);
        if self.ring_batches != u32::MAX {
            self.ring_batches = self.ring_batches.saturating_sub(1);
        }
        let mut misses = 0;
        for (name, kind) in entries {
            if ctx.stopped() {
                return;
            }
            match kind {
                // Where files can be cloned, cloning beats copying even small ones; the first
                // clone that fails as unsupported sends the rest here.
                Some(Kind::File) | None if fast && !self.data.may_clone(devs) => {
                    if self.ring_batches == 0 {
                        match self.copy_in_place(dir, &name, kind, queue) {
                            InPlace::Done => continue,
                            InPlace::WouldBlock(stat, src) => {
                                // A stray uncached file goes to the ring alone; a run of them
                                // means a cold cache, where the ring's concurrency pays.
                                misses += 1;
                                if misses >= MISSES_FOR_COLD {
                                    self.ring_batches = RING_BATCHES_AFTER_MISS;
                                }
                                self.start_opened(dir, name, stat, src, queue);
                                continue;
                            }
                        }
                    }
                    self.start(dir, name, queue);
                }
                _ => copy_entry(ctx, self, dir, name, queue),
            }
        }
    }

    fn copy_chunk(&mut self, file: &Arc<BigFile<'a>>, offset: u64, len: u64) {
        file.copy_chunk(&mut self.data, offset, len);
    }

    fn poll(&mut self, queue: &Queue<'a>) {
        if self.in_flight > 0 {
            self.wait(0, queue);
        }
    }

    fn drain(&mut self, queue: &Queue<'a>) {
        while self.in_flight > 0 {
            self.wait(1, queue);
        }
    }

    fn data_path(&mut self) -> &mut DataPath {
        &mut self.data
    }
}
