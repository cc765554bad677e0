//! Moving file bytes synchronously: in the kernel (FICLONE, copy_file_range) or through a
//! user-space buffer, and big files split into chunks that several workers copy at once.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::error::{CopyError, Op};
use crate::finalize;
use crate::node::{Ctx, DirHold, DirNode};
use crate::sys::{self, Stat};

/// Largest single copy_file_range call, so SIGINT is noticed promptly.
const KERNEL_STEP: usize = 8 << 20;

/// How a synchronous copy moves bytes, and what this worker learned about the fast paths.
#[derive(Debug)]
pub(crate) struct DataPath {
    /// Use FICLONE and copy_file_range where the filesystem allows.
    kernel: bool,
    buf: Vec<u8>,
    block_size: usize,
    /// (source device, destination device) pairs where FICLONE failed as unsupported.
    no_clone: Vec<(u64, u64)>,
    /// ... and where copy_file_range did.
    no_range: Vec<(u64, u64)>,
}

/// Which side of a copy failed.
pub(crate) enum Side {
    Read(io::Error),
    Write(io::Error),
}

impl Side {
    pub fn into_error(
        self,
        dir: &DirNode<'_>,
        src: &std::ffi::CStr,
        dst: &std::ffi::CStr,
    ) -> CopyError {
        match self {
            Side::Read(e) => CopyError::io(Op::Read, dir.src_path(Some(src)), e),
            Side::Write(e) => CopyError::io(Op::Write, dir.dst_path(Some(dst)), e),
        }
    }
}

fn unsupported(e: &io::Error) -> bool {
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

/// copy_file_range errors that belong to the destination.
fn write_side(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG | libc::EROFS)
    )
}

impl DataPath {
    /// Kernel fast paths first, falling back to a `block_size` buffer.
    pub fn kernel(block_size: usize) -> Self {
        DataPath {
            kernel: true,
            buf: Vec::new(),
            block_size,
            no_clone: Vec::new(),
            no_range: Vec::new(),
        }
    }

    /// Plain read/write through a `block_size` buffer.
    pub fn read_write(block_size: usize) -> Self {
        DataPath {
            kernel: false,
            ..DataPath::kernel(block_size)
        }
    }

    /// Copies a whole file from the start until end of file. Returns the bytes copied.
    pub fn copy_whole(
        &mut self,
        ctx: &Ctx<'_>,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        devs: (u64, u64),
        size: u64,
    ) -> Result<u64, Side> {
        if self.kernel && size > 0 && !self.no_clone.contains(&devs) {
            match sys::ficlone(dst, src) {
                Ok(()) => return Ok(size),
                Err(e) if unsupported(&e) => self.no_clone.push(devs),
                Err(e) => return Err(Side::Write(e)),
            }
        }
        self.copy_range(ctx, src, dst, devs, 0, u64::MAX)
    }

    /// Copies `[offset, offset + len)`, or up to end of file if that comes first.
    pub fn copy_range(
        &mut self,
        ctx: &Ctx<'_>,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        devs: (u64, u64),
        offset: u64,
        len: u64,
    ) -> Result<u64, Side> {
        let mut done = 0u64;
        if self.kernel && !self.no_range.contains(&devs) {
            while done < len {
                if ctx.stopped() {
                    return Err(Side::Write(io::Error::from_raw_os_error(libc::EINTR)));
                }
                let step = (len - done).min(KERNEL_STEP as u64) as usize;
                match sys::copy_file_range(src, dst, offset + done, step) {
                    Ok(0) => return Ok(done),
                    Ok(n) => done += n as u64,
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(e) if done == 0 && unsupported(&e) => {
                        self.no_range.push(devs);
                        break;
                    }
                    Err(e) if write_side(&e) => return Err(Side::Write(e)),
                    Err(e) => return Err(Side::Read(e)),
                }
            }
            if done >= len {
                return Ok(done);
            }
        }
        if self.buf.len() != self.block_size {
            self.buf = vec![0; self.block_size];
        }
        while done < len {
            if ctx.stopped() {
                return Err(Side::Write(io::Error::from_raw_os_error(libc::EINTR)));
            }
            let want = (len - done).min(self.buf.len() as u64) as usize;
            let n = sys::pread(src, &mut self.buf[..want], offset + done).map_err(Side::Read)?;
            if n == 0 {
                break;
            }
            sys::pwrite_all(dst, &self.buf[..n], offset + done).map_err(Side::Write)?;
            done += n as u64;
        }
        Ok(done)
    }
}

/// A file big enough to be split into chunks that workers copy in parallel. The last chunk to
/// finish drops the last `Arc`, and `Drop` finalizes the file, or removes it if any chunk failed.
pub(crate) struct BigFile<'a> {
    /// Held: the file is created in it and removed from it on failure.
    pub dir: DirHold<'a>,
    pub src_name: CString,
    pub dst_name: CString,
    pub src: OwnedFd,
    /// Taken only in Drop.
    dst: Option<OwnedFd>,
    pub stat: Stat,
    created: bool,
    failed: AtomicBool,
    copied: AtomicU64,
}

impl<'a> BigFile<'a> {
    pub fn new(
        dir: DirHold<'a>,
        src_name: CString,
        dst_name: CString,
        src: OwnedFd,
        dst: OwnedFd,
        stat: Stat,
        created: bool,
    ) -> Self {
        BigFile {
            dir,
            src_name,
            dst_name,
            src,
            dst: Some(dst),
            stat,
            created,
            failed: AtomicBool::new(false),
            copied: AtomicU64::new(0),
        }
    }

    /// Copies one chunk with `data`; the last chunk runs to end of file.
    pub fn copy_chunk(&self, data: &mut DataPath, offset: u64, len: u64) {
        let ctx = self.dir.ctx;
        if self.failed.load(Ordering::Relaxed) || ctx.stopped() {
            return;
        }
        let Some(dst) = self.dst.as_ref().map(AsFd::as_fd) else {
            return;
        };
        let devs = (self.stat.dev, self.dir.dst_dev);
        match data.copy_range(ctx, self.src.as_fd(), dst, devs, offset, len) {
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
        let Some(dst) = self.dst.take() else { return };
        let dst_path = || self.dir.dst_path(Some(&self.dst_name));
        if self.failed.load(Ordering::Relaxed) || ctx.stopped() {
            drop(dst);
            let _ = sys::unlinkat(self.dir.dst_fd(), &self.dst_name);
            return;
        }
        if let Err(e) = finalize::file(
            &self.dir,
            &self.dst_name,
            self.src.as_fd(),
            dst.as_fd(),
            &self.stat,
            self.created,
        ) {
            ctx.fail(e);
        }
        if let Err(e) = sys::close(dst) {
            ctx.fail(CopyError::io(Op::Close, dst_path(), e));
            let _ = sys::unlinkat(self.dir.dst_fd(), &self.dst_name);
            return;
        }
        ctx.progress.files.fetch_add(1, Ordering::Relaxed);
        if ctx.plan.verbose {
            ctx.reporter
                .copied(&self.dir.src_path(Some(&self.src_name)), &dst_path());
        }
        let copied = self.copied.load(Ordering::Relaxed);
        if copied != self.stat.size && ctx.plan.verbose {
            ctx.reporter.note(&format!(
                "'{}' changed size while it was copied ({} bytes at start, {copied} copied)",
                self.dir.src_path(Some(&self.src_name)).display(),
                self.stat.size
            ));
        }
    }
}
