//! Moving a byte range from one open file to another by one chosen system interface. The
//! alternative copy engines (`--engine copy-range|sendfile|splice|aio`) and `ringio dup` share
//! these loops, so each interface is measured by the same code wherever it runs.
//!
//! Every method copies `[offset, offset + len)` of the source to the same offsets of the
//! destination, stops early at end of file, handles short transfers and EINTR, and reports
//! which side failed. A method the kernel or filesystem refuses on its first call comes back
//! as [`TransferError::Unsupported`], so a caller can fall back.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::sys;

mod aio;
mod method;

pub(crate) use method::unsupported;
pub use method::{Method, TransferError};

use aio::Aio;
use method::write_side;

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
        if self.buf.len() < self.block_size && done < len {
            // No bigger than the rest of the file needs (a 1000-byte file under `--bs 1G`
            // takes a page), and an error rather than an abort when memory is short.
            let size = rustix::fs::fstat(src)
                .map_err(|e| TransferError::Read(e.into()))?
                .st_size as u64;
            let rest = (len - done).min(size.saturating_sub(offset + done));
            grow(&mut self.buf, rest, self.block_size).map_err(TransferError::Read)?;
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
        // Buffers are sized to what the range needs of the file as it is now.
        let size = rustix::fs::fstat(src)
            .map_err(|e| TransferError::Read(e.into()))?
            .st_size as u64;
        if !self.direct {
            let need = len.min(size.saturating_sub(offset));
            return aio.copy(src, dst, offset, len, need);
        }
        // O_DIRECT wants aligned offsets and lengths: the aligned body goes direct, the rest
        // (an unaligned start or tail) through the page cache.
        const ALIGN: u64 = 4096;
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
            let need = len.min(size.saturating_sub(offset));
            return aio.copy(src, dst, offset, len, need);
        };
        let body = aio.copy(
            src_direct.as_fd(),
            dst_direct.as_fd(),
            body_start,
            body_end - body_start,
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

/// Grows `buf` (zeroed) to what `need` more bytes take, in whole pages, at most `cap` bytes;
/// ENOMEM when the memory is not there.
pub(crate) fn grow(buf: &mut Vec<u8>, need: u64, cap: usize) -> io::Result<()> {
    let want = need.min(cap as u64).next_multiple_of(4096).max(4096) as usize;
    let want = want.min(cap.max(1));
    if buf.len() < want {
        // Let the old buffer go before the new one is made.
        *buf = Vec::new();
        *buf = sys::try_zeroed(want)?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Bytes that differ from their neighbours and depend on their offset, so a range copied
    /// to the wrong place shows (a multiplicative hash of the index, not a generator: this
    /// crate sits below the one that has it).
    fn data(size: usize) -> Vec<u8> {
        (0..size as u64)
            .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
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
