//! Linux native AIO (io_setup/io_submit/io_getevents), with raw system calls: a window of
//! reads and writes in flight through page-aligned buffers (aligned for O_DIRECT).

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use super::method::TransferError;
use ringio_base::buf::AlignedBuf;

/// The kernel's `struct iocb` (x86-64 and other little-endian 64-bit layouts).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct Iocb {
    data: u64,
    key: u32,
    rw_flags: i32,
    opcode: u16,
    reqprio: i16,
    fildes: u32,
    buf: u64,
    nbytes: u64,
    offset: i64,
    reserved2: u64,
    flags: u32,
    resfd: u32,
}

/// The kernel's `struct io_event`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

const IOCB_CMD_PREAD: u16 = 0;
const IOCB_CMD_PWRITE: u16 = 1;

/// A Linux AIO context with up to `depth` page-aligned buffers (aligned for O_DIRECT), made
/// as a copy needs them: no more, and no larger, than the bytes to copy take.
pub(super) struct Aio {
    ctx: libc::c_ulong,
    depth: usize,
    /// The largest request.
    block: usize,
    buffers: Vec<AlignedBuf>,
    /// The size of every buffer in `buffers`.
    buffer_len: usize,
}

impl fmt::Debug for Aio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Aio")
            .field("depth", &self.depth)
            .field("block", &self.block)
            .field("buffers", &self.buffers.len())
            .finish()
    }
}

/// What a slot's request is doing.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Idle,
    Reading {
        at: u64,
        want: usize,
    },
    Writing {
        at: u64,
        filled: usize,
        written: usize,
    },
}

impl Aio {
    pub(super) fn new(depth: usize, block: usize) -> io::Result<Self> {
        let block = block.next_multiple_of(4096);
        Ok(Aio {
            ctx: io_setup(depth)?,
            depth,
            block,
            buffers: Vec::new(),
            buffer_len: 0,
        })
    }

    /// Makes `count` buffers of at least `len` bytes; ENOMEM when memory is short.
    fn buffers_for(&mut self, count: usize, len: usize) -> io::Result<()> {
        if self.buffer_len < len {
            self.buffers.clear();
            self.buffer_len = len;
        }
        while self.buffers.len() < count {
            self.buffers.push(AlignedBuf::try_new(self.buffer_len)?);
        }
        Ok(())
    }

    fn submit(&mut self, iocbs: &mut [Iocb]) -> io::Result<()> {
        let mut ptrs: Vec<*mut Iocb> = iocbs.iter_mut().map(|c| c as *mut Iocb).collect();
        let mut sent = 0;
        while sent < ptrs.len() {
            // SAFETY: every pointer is to a live iocb of `iocbs` whose buffer lies in one of
            // `self.buffers`, which `copy` leaves alone while the request is in flight and which
            // stay allocated until it is reaped (Drop destroys the context, waiting for what is
            // left, before they are freed).
            match unsafe { io_submit(self.ctx, &mut ptrs[sent..]) } {
                Ok(n) => sent += n,
                Err(e)
                    if e.raw_os_error() == Some(libc::EAGAIN)
                        || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The read → write loop: every slot reads a block, writes what it read, then reads the
    /// next block not yet claimed. Completions are reaped in batches. `need`: the bytes of the
    /// range the file holds now, which size the buffers (the loop still runs to `len` or end
    /// of file, should the file grow).
    pub(super) fn copy(
        &mut self,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        offset: u64,
        len: u64,
        need: u64,
    ) -> Result<u64, TransferError> {
        let need = need.min(len);
        let block = need.next_multiple_of(4096).clamp(4096, self.block as u64) as usize;
        let depth = (need.div_ceil(block as u64) as usize).clamp(1, self.depth);
        self.buffers_for(depth, block)
            .map_err(TransferError::Read)?;
        // The kernel reads into and writes from these between submit and completion; the
        // buffers stay put (owned by `self`) until every request is reaped.
        let buffers: Vec<*mut u8> = self.buffers.iter_mut().map(|b| b.as_mut_ptr()).collect();
        let mut stages = vec![Stage::Idle; depth];
        let mut next = offset; // first byte not yet claimed by a read
        let end = offset.saturating_add(len);
        let mut eof_at = u64::MAX;
        let mut in_flight = 0usize;
        let mut error: Option<TransferError> = None;
        let mut events = vec![IoEvent::default(); depth];
        let mut batch: Vec<Iocb> = Vec::with_capacity(depth);
        let read = |slot: usize, at: u64, want: usize, buf: *mut u8| Iocb {
            data: slot as u64,
            opcode: IOCB_CMD_PREAD,
            fildes: src.as_raw_fd() as u32,
            buf: buf as u64,
            nbytes: want as u64,
            offset: at as i64,
            ..Iocb::default()
        };
        let write = |slot: usize, at: u64, bytes: usize, buf: *mut u8| Iocb {
            data: slot as u64,
            opcode: IOCB_CMD_PWRITE,
            fildes: dst.as_raw_fd() as u32,
            buf: buf as u64,
            nbytes: bytes as u64,
            offset: at as i64,
            ..Iocb::default()
        };
        for (slot, stage) in stages.iter_mut().enumerate() {
            if next >= end {
                break;
            }
            let want = (end - next).min(block as u64) as usize;
            *stage = Stage::Reading { at: next, want };
            batch.push(read(slot, next, want, buffers[slot]));
            next += want as u64;
        }
        in_flight += batch.len();
        if let Err(e) = self.submit(&mut batch) {
            return Err(TransferError::Unsupported(e));
        }
        let mut written_total = 0u64;
        while in_flight > 0 {
            let n = match io_getevents(self.ctx, 1, &mut events) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(TransferError::Read(e)),
            };
            batch.clear();
            for ev in &events[..n] {
                in_flight -= 1;
                let slot = ev.data as usize;
                let buf = buffers[slot];
                match stages[slot] {
                    Stage::Reading { at, want } => {
                        if ev.res < 0 {
                            error.get_or_insert(TransferError::Read(io::Error::from_raw_os_error(
                                -ev.res as i32,
                            )));
                            stages[slot] = Stage::Idle;
                        } else if ev.res == 0 {
                            eof_at = eof_at.min(at);
                            stages[slot] = Stage::Idle;
                        } else {
                            let got = ev.res as usize;
                            if got < want {
                                // A short read: the file ends here (or the rest comes in a
                                // later block, which is past end of file anyway).
                                eof_at = eof_at.min(at + got as u64);
                            }
                            stages[slot] = Stage::Writing {
                                at,
                                filled: got,
                                written: 0,
                            };
                            if error.is_none() {
                                batch.push(write(slot, at, got, buf));
                            } else {
                                stages[slot] = Stage::Idle;
                            }
                        }
                    }
                    Stage::Writing {
                        at,
                        filled,
                        written,
                    } => {
                        if ev.res <= 0 {
                            let e = if ev.res == 0 {
                                io::ErrorKind::WriteZero.into()
                            } else {
                                io::Error::from_raw_os_error(-ev.res as i32)
                            };
                            error.get_or_insert(TransferError::Write(e));
                            stages[slot] = Stage::Idle;
                            continue;
                        }
                        let written = written + ev.res as usize;
                        if written < filled {
                            stages[slot] = Stage::Writing {
                                at,
                                filled,
                                written,
                            };
                            // SAFETY: `written < filled <= block`, inside the buffer.
                            let rest = unsafe { buf.add(written) };
                            batch.push(write(slot, at + written as u64, filled - written, rest));
                            continue;
                        }
                        written_total += filled as u64;
                        stages[slot] = Stage::Idle;
                        if error.is_none() && next < end.min(eof_at) {
                            let want = (end - next).min(block as u64) as usize;
                            stages[slot] = Stage::Reading { at: next, want };
                            batch.push(read(slot, next, want, buf));
                            next += want as u64;
                        }
                    }
                    Stage::Idle => {}
                }
            }
            in_flight += batch.len();
            if let Err(e) = self.submit(&mut batch) {
                // What was not submitted will never complete.
                in_flight -= batch.len();
                error.get_or_insert(TransferError::Read(e));
            }
        }
        if let Some(e) = error {
            return Err(e);
        }
        Ok(written_total.min(eof_at.saturating_sub(offset)))
    }
}

impl Drop for Aio {
    fn drop(&mut self) {
        io_destroy(self.ctx);
    }
}

// The four AIO system calls, which rustix lacks: raw libc calls, each made here alone.

/// io_setup: a new context for up to `depth` requests in flight.
fn io_setup(depth: usize) -> io::Result<libc::c_ulong> {
    let mut ctx: libc::c_ulong = 0;
    // SAFETY: io_setup writes the new context's id to `ctx` and nothing else.
    let rc = unsafe { libc::syscall(libc::SYS_io_setup, depth as libc::c_long, &mut ctx) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ctx)
}

/// io_submit: queues the requests `iocbs` points to on `ctx`; returns how many the kernel
/// took, from the first.
///
/// # Safety
///
/// Every pointer must be to a live [`Iocb`] whose buffer (`buf`, `nbytes`) is writable for a
/// read or readable for a write, and stays allocated and otherwise untouched until the
/// request's completion is reaped (or the context destroyed). The iocbs themselves may go
/// once this returns: the kernel copies them.
unsafe fn io_submit(ctx: libc::c_ulong, iocbs: &mut [*mut Iocb]) -> io::Result<usize> {
    // SAFETY: the caller vouches for every request and its buffer; the kernel reads
    // `iocbs.len()` pointers.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_io_submit,
            ctx,
            iocbs.len() as libc::c_long,
            iocbs.as_mut_ptr(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc as usize)
}

/// io_getevents: waits for at least `min` completions on `ctx` and returns how many it put at
/// the start of `events`.
fn io_getevents(ctx: libc::c_ulong, min: usize, events: &mut [IoEvent]) -> io::Result<usize> {
    // SAFETY: the kernel writes at most `events.len()` io_events, each laid out as `IoEvent`;
    // no timeout.
    let n = unsafe {
        libc::syscall(
            libc::SYS_io_getevents,
            ctx,
            min as libc::c_long,
            events.len() as libc::c_long,
            events.as_mut_ptr(),
            std::ptr::null_mut::<libc::timespec>(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// io_destroy: cancels what is still in flight on `ctx`, waits for it, and frees the context.
fn io_destroy(ctx: libc::c_ulong) {
    // SAFETY: the kernel waits for every request of the context before it returns, so no
    // buffer is written or read afterwards.
    unsafe { libc::syscall(libc::SYS_io_destroy, ctx) };
}
