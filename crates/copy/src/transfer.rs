//! Moving a byte range from one open file to another by one chosen system interface. The
//! alternative copy engines (`--engine copy-range|sendfile|splice|aio`) and `ringio dup` share
//! these loops, so each interface is measured by the same code wherever it runs.
//!
//! Every method copies `[offset, offset + len)` of the source to the same offsets of the
//! destination, stops early at end of file, handles short transfers and EINTR, and reports
//! which side failed. A method the kernel or filesystem refuses on its first call comes back
//! as [`TransferError::Unsupported`], so a caller can fall back.

use std::alloc::{self, Layout};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::sys;

/// A way of moving bytes between two files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::Display, strum::EnumString)]
#[strum(serialize_all = "kebab-case")]
pub enum Method {
    /// pread/pwrite through a user-space buffer.
    #[strum(serialize = "readwrite")]
    ReadWrite,
    /// copy_file_range(2): the kernel copies (or, on btrfs and xfs, clones).
    CopyRange,
    /// sendfile(2) from the source to the destination's file position.
    Sendfile,
    /// splice(2) through a pipe, with explicit offsets on both files.
    Splice,
    /// Linux native AIO (io_submit/io_getevents): a window of reads and writes in flight.
    Aio,
}

impl Method {
    /// Every method, in the order help texts list them.
    pub const ALL: &'static [Method] = &[
        Method::ReadWrite,
        Method::CopyRange,
        Method::Sendfile,
        Method::Splice,
        Method::Aio,
    ];

    /// The name used on command lines.
    pub fn name(self) -> &'static str {
        match self {
            Method::ReadWrite => "readwrite",
            Method::CopyRange => "copy-range",
            Method::Sendfile => "sendfile",
            Method::Splice => "splice",
            Method::Aio => "aio",
        }
    }

    /// True when the method writes at explicit offsets, so several threads may copy parts of
    /// one file at once. sendfile writes at the destination's shared file position.
    pub fn positional(self) -> bool {
        self != Method::Sendfile
    }
}

/// Why a transfer stopped.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The method is not available for these files; nothing was written.
    #[error("not supported here: {0}")]
    Unsupported(io::Error),
    /// Reading the source failed.
    #[error("read failed: {0}")]
    Read(io::Error),
    /// Writing the destination failed.
    #[error("write failed: {0}")]
    Write(io::Error),
}

/// Errors that say "this interface cannot do that here" (for FICLONE too).
pub(crate) fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::EXDEV
                | libc::EINVAL
                | libc::EOPNOTSUPP
                | libc::ENOSYS
                | libc::ENOTTY
                | libc::EBADF
                | libc::EPERM
        )
    )
}

/// Errors of a kernel-side copy that belong to the destination.
fn write_side(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG | libc::EROFS)
    )
}

/// One thread's state for moving bytes by one method: its buffer, pipe or AIO context, made
/// on first use and reused.
#[derive(Debug)]
pub struct Transfer {
    method: Method,
    block_size: usize,
    depth: usize,
    direct: bool,
    buf: Vec<u8>,
    /// Read end, write end, and the pipe's capacity (asked for once).
    pipe: Option<(OwnedFd, OwnedFd, usize)>,
    aio: Option<Aio>,
}

impl Transfer {
    /// `block_size` is the unit of each call (buffer size, splice and sendfile step, AIO
    /// request size).
    pub fn new(method: Method, block_size: usize) -> Self {
        Transfer {
            method,
            block_size: block_size.max(512),
            depth: 32,
            direct: false,
            buf: Vec::new(),
            pipe: None,
            aio: None,
        }
    }

    /// AIO: requests in flight (default 32).
    pub fn with_depth(mut self, depth: usize) -> Self {
        self.depth = depth.clamp(1, 1024);
        self
    }

    /// AIO: bypass the page cache (O_DIRECT, on descriptors of its own) for the 4 KiB-aligned
    /// body of each range; the unaligned tail goes through the cache. Where O_DIRECT is refused,
    /// everything goes through the cache.
    pub fn with_direct(mut self, direct: bool) -> Self {
        self.direct = direct;
        self
    }

    /// The method.
    pub fn method(&self) -> Method {
        self.method
    }

    /// Copies `[offset, offset + len)` (`len` may be `u64::MAX`: to end of file). Returns the
    /// bytes copied, fewer than `len` only at end of file.
    pub fn copy(
        &mut self,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        offset: u64,
        len: u64,
    ) -> Result<u64, TransferError> {
        match self.method {
            Method::ReadWrite => self.read_write(src, dst, offset, len, 0),
            Method::CopyRange => copy_range(src, dst, offset, len),
            Method::Sendfile => sendfile(src, dst, offset, len, self.block_size),
            Method::Splice => self.splice(src, dst, offset, len),
            Method::Aio => self.aio(src, dst, offset, len),
        }
    }

    /// pread/pwrite; `done` bytes of the range were already copied by a faster path.
    fn read_write(
        &mut self,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        offset: u64,
        len: u64,
        mut done: u64,
    ) -> Result<u64, TransferError> {
        if self.buf.len() != self.block_size {
            self.buf = vec![0; self.block_size];
        }
        while done < len {
            let want = (len - done).min(self.buf.len() as u64) as usize;
            let n = sys::pread(src, &mut self.buf[..want], offset + done)
                .map_err(TransferError::Read)?;
            if n == 0 {
                break;
            }
            sys::pwrite_all(dst, &self.buf[..n], offset + done).map_err(TransferError::Write)?;
            done += n as u64;
        }
        Ok(done)
    }

    fn splice(
        &mut self,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        offset: u64,
        len: u64,
    ) -> Result<u64, TransferError> {
        if self.pipe.is_none() {
            let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
                .map_err(|e| TransferError::Unsupported(e.into()))?;
            // A bigger pipe moves more per call; the default 64 KiB is the fallback.
            let _ = rustix::pipe::fcntl_setpipe_size(&w, self.block_size.min(1 << 20));
            let size = rustix::pipe::fcntl_getpipe_size(&w).unwrap_or(64 << 10);
            self.pipe = Some((r, w, size));
        }
        let (r, w, step) = self.pipe.as_ref().expect("pipe made above");
        let step = *step;
        let mut done = 0u64;
        while done < len {
            let want = (len - done).min(step as u64) as usize;
            let mut off_in = offset + done;
            let n = match rustix::pipe::splice(
                src,
                Some(&mut off_in),
                w,
                None,
                want,
                rustix::pipe::SpliceFlags::MOVE,
            ) {
                Ok(0) => break,
                Ok(n) => n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) if done == 0 && unsupported(&e.into()) => {
                    return Err(TransferError::Unsupported(e.into()))
                }
                Err(e) => return Err(TransferError::Read(e.into())),
            };
            // Drain exactly what went into the pipe before the next read.
            let mut moved = 0;
            while moved < n {
                let mut off_out = offset + done + moved as u64;
                match rustix::pipe::splice(
                    r,
                    None,
                    dst,
                    Some(&mut off_out),
                    n - moved,
                    rustix::pipe::SpliceFlags::MOVE,
                ) {
                    Ok(0) => {
                        let e = io::Error::from(io::ErrorKind::WriteZero);
                        return Err(TransferError::Write(e));
                    }
                    Ok(m) => moved += m,
                    Err(rustix::io::Errno::INTR) => {}
                    Err(e) => {
                        // Leave the pipe empty for the next file.
                        self.pipe = None;
                        return Err(TransferError::Write(e.into()));
                    }
                }
            }
            done += n as u64;
        }
        Ok(done)
    }

    fn aio(
        &mut self,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        offset: u64,
        len: u64,
    ) -> Result<u64, TransferError> {
        if self.aio.is_none() {
            let aio = Aio::new(self.depth, self.block_size).map_err(TransferError::Unsupported)?;
            self.aio = Some(aio);
        }
        let aio = self.aio.as_mut().expect("made above");
        if !self.direct {
            return aio.copy(src, dst, offset, len);
        }
        // O_DIRECT wants aligned offsets and lengths: the aligned body goes direct, the rest
        // (an unaligned start or tail) through the page cache.
        const ALIGN: u64 = 4096;
        let size = rustix::fs::fstat(src)
            .map_err(|e| TransferError::Read(e.into()))?
            .st_size as u64;
        let end = offset.saturating_add(len).min(size);
        let body_start = offset.next_multiple_of(ALIGN);
        let body_end = end / ALIGN * ALIGN;
        if body_start >= body_end || offset % ALIGN != 0 {
            return self.read_write(src, dst, offset, end.saturating_sub(offset), 0);
        }
        // Private descriptors with O_DIRECT: the caller's may be shared with other threads
        // copying other parts of the file through the page cache.
        let (Ok(src_direct), Ok(dst_direct)) = (
            reopen(src, libc::O_RDONLY | libc::O_DIRECT),
            reopen(dst, libc::O_WRONLY | libc::O_DIRECT),
        ) else {
            // No O_DIRECT here (tmpfs, or a destination we may not reopen): through the cache.
            return aio.copy(src, dst, offset, len);
        };
        let body = aio.copy(
            src_direct.as_fd(),
            dst_direct.as_fd(),
            body_start,
            body_end - body_start,
        );
        let done = body?;
        if done < body_end - body_start {
            return Ok(done);
        }
        // The unaligned tail, buffered, up to `len` or end of file.
        self.read_write(src, dst, offset, len, done)
    }
}

/// A new open file description for the file behind `fd`, with `flags`.
fn reopen(fd: BorrowedFd<'_>, flags: i32) -> io::Result<OwnedFd> {
    let path = format!("/proc/self/fd/{}\0", fd.as_raw_fd());
    let path = std::ffi::CStr::from_bytes_with_nul(path.as_bytes()).expect("one NUL at the end");
    sys::openat(rustix::fs::CWD, path, flags | libc::O_CLOEXEC, 0)
}

fn copy_range(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    offset: u64,
    len: u64,
) -> Result<u64, TransferError> {
    // The kernel copies; a large step keeps the calls few.
    const STEP: u64 = 8 << 20;
    let mut done = 0u64;
    while done < len {
        let want = (len - done).min(STEP) as usize;
        match sys::copy_file_range(src, dst, offset + done, want) {
            Ok(0) => break,
            Ok(n) => done += n as u64,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            Err(e) if done == 0 && unsupported(&e) => return Err(TransferError::Unsupported(e)),
            Err(e) if write_side(&e) => return Err(TransferError::Write(e)),
            Err(e) => return Err(TransferError::Read(e)),
        }
    }
    Ok(done)
}

fn sendfile(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    offset: u64,
    len: u64,
    step: usize,
) -> Result<u64, TransferError> {
    let step = step.max(1 << 20);
    rustix::fs::seek(dst, rustix::fs::SeekFrom::Start(offset))
        .map_err(|e| TransferError::Write(e.into()))?;
    let mut off = offset;
    let mut done = 0u64;
    while done < len {
        let want = (len - done).min(step as u64) as usize;
        match rustix::fs::sendfile(dst, src, Some(&mut off), want) {
            Ok(0) => break,
            Ok(n) => done += n as u64,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) if done == 0 && unsupported(&e.into()) => {
                return Err(TransferError::Unsupported(e.into()))
            }
            Err(e) if write_side(&e.into()) => return Err(TransferError::Write(e.into())),
            Err(e) => return Err(TransferError::Read(e.into())),
        }
    }
    Ok(done)
}

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

/// A Linux AIO context with `depth` page-aligned buffers (aligned for O_DIRECT).
struct Aio {
    ctx: libc::c_ulong,
    block: usize,
    buffers: Vec<*mut u8>,
    layout: Layout,
}

// SAFETY: the buffers are owned by this value alone and only touched through `&mut self`.
unsafe impl Send for Aio {}

impl fmt::Debug for Aio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Aio")
            .field("depth", &self.buffers.len())
            .field("block", &self.block)
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
    fn new(depth: usize, block: usize) -> io::Result<Self> {
        let block = block.next_multiple_of(4096);
        let mut ctx: libc::c_ulong = 0;
        // SAFETY: io_setup writes the new context id to `ctx`.
        let rc = unsafe { libc::syscall(libc::SYS_io_setup, depth as libc::c_long, &mut ctx) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let layout = Layout::from_size_align(block, 4096).expect("valid layout");
        let mut aio = Aio {
            ctx,
            block,
            buffers: Vec::with_capacity(depth),
            layout,
        };
        for _ in 0..depth {
            // SAFETY: the layout has a non-zero size.
            let p = unsafe { alloc::alloc(layout) };
            if p.is_null() {
                return Err(io::ErrorKind::OutOfMemory.into());
            }
            aio.buffers.push(p);
        }
        Ok(aio)
    }

    fn submit(&mut self, iocbs: &mut [Iocb]) -> io::Result<()> {
        let mut ptrs: Vec<*mut Iocb> = iocbs.iter_mut().map(|c| c as *mut Iocb).collect();
        let mut sent = 0;
        while sent < ptrs.len() {
            // SAFETY: every pointer is to a live iocb whose buffer stays allocated until its
            // completion is reaped.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_io_submit,
                    self.ctx,
                    (ptrs.len() - sent) as libc::c_long,
                    ptrs[sent..].as_mut_ptr(),
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EAGAIN) || e.kind() == io::ErrorKind::Interrupted
                {
                    continue;
                }
                return Err(e);
            }
            sent += rc as usize;
        }
        Ok(())
    }

    /// The read → write loop: every slot reads a block, writes what it read, then reads the
    /// next block not yet claimed. Completions are reaped in batches.
    fn copy(
        &mut self,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        offset: u64,
        len: u64,
    ) -> Result<u64, TransferError> {
        let depth = self.buffers.len();
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
            let want = (end - next).min(self.block as u64) as usize;
            *stage = Stage::Reading { at: next, want };
            batch.push(read(slot, next, want, self.buffers[slot]));
            next += want as u64;
        }
        in_flight += batch.len();
        if let Err(e) = self.submit(&mut batch) {
            return Err(TransferError::Unsupported(e));
        }
        let mut written_total = 0u64;
        while in_flight > 0 {
            // SAFETY: `events` has room for `depth` events; the context is ours.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_io_getevents,
                    self.ctx,
                    1 as libc::c_long,
                    depth as libc::c_long,
                    events.as_mut_ptr(),
                    std::ptr::null_mut::<libc::timespec>(),
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(TransferError::Read(e));
            }
            batch.clear();
            for ev in &events[..n as usize] {
                in_flight -= 1;
                let slot = ev.data as usize;
                let buf = self.buffers[slot];
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
                            let want = (end - next).min(self.block as u64) as usize;
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
        // SAFETY: nothing is in flight once `copy` returns; the context is ours.
        unsafe { libc::syscall(libc::SYS_io_destroy, self.ctx) };
        for &p in &self.buffers {
            // SAFETY: allocated in `new` with this layout.
            unsafe { alloc::dealloc(p, self.layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn data(size: usize) -> Vec<u8> {
        let mut x = 0x9e3779b97f4a7c15u64;
        (0..size)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn every_method_copies_exact_ranges() {
        let dir = tempfile::tempdir().unwrap();
        for method in Method::ALL {
            for direct in [false, true] {
                if direct && *method != Method::Aio {
                    continue;
                }
                for size in [0usize, 1, 4095, 4097, (1 << 20) + 3, (3 << 20) + 4096] {
                    let content = data(size);
                    let src_path = dir.path().join("src");
                    std::fs::File::create(&src_path)
                        .unwrap()
                        .write_all(&content)
                        .unwrap();
                    let src = std::fs::File::open(&src_path).unwrap();
                    let dst_path = dir.path().join("dst");
                    let dst = std::fs::File::create(&dst_path).unwrap();
                    let mut t = Transfer::new(*method, 64 << 10).with_direct(direct);
                    let what = format!("{method} direct={direct} size={size}");
                    let n = match t.copy(src.as_fd(), dst.as_fd(), 0, u64::MAX) {
                        Ok(n) => n,
                        Err(TransferError::Unsupported(e)) if direct => {
                            eprintln!("SKIPPED {what}: {e}");
                            continue;
                        }
                        Err(e) => panic!("{what}: {e}"),
                    };
                    assert_eq!(n, size as u64, "{what}");
                    assert!(std::fs::read(&dst_path).unwrap() == content, "{what}");
                    // A range in the middle lands at the same offsets.
                    if size > 10_000 {
                        let dst = std::fs::File::create(&dst_path).unwrap();
                        let n = t.copy(src.as_fd(), dst.as_fd(), 4096, 5000).unwrap();
                        assert_eq!(n, 5000, "{what}");
                        let got = std::fs::read(&dst_path).unwrap();
                        assert_eq!(got.len(), 4096 + 5000, "{what}");
                        assert!(got[4096..] == content[4096..9096], "{what}");
                    }
                }
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for m in Method::ALL {
            assert_eq!(m.name().parse::<Method>().unwrap(), *m);
        }
        assert!("nope".parse::<Method>().is_err());
    }
}
