//! Moving file bytes synchronously: in the kernel (FICLONE, copy_file_range) or through a
//! user-space buffer, and big files split into chunks that several workers copy at once.

use std::io;
use std::os::fd::BorrowedFd;

use super::shared::Member;
use crate::ctx::Ctx;
use crate::error::{CopyError, Op};
use crate::manifest::hashing::FileHash;
use crate::node::DirNode;
use crate::plan::{CopyPlan, Reflink, Sparse, Tuning};
use crate::sys::{self, Stat};
use crate::transfer::{self, Method, Transfer, TransferError};
use rustix::fs::SeekFrom;

/// Largest single copy_file_range call, so SIGINT is noticed promptly.
const KERNEL_STEP: usize = 8 << 20;

/// How a synchronous copy moves bytes, and what this worker learned about the fast paths.
#[derive(Debug)]
pub(crate) struct DataPath {
    /// Use copy_file_range where the filesystem allows.
    kernel: bool,
    reflink: Reflink,
    sparse: Sparse,
    /// Holes looked for in every file, not only in those that look sparse (sync's `-S`: a file
    /// whose holes are hidden by its extent blocks keeps them too).
    seek_all: bool,
    buf: Vec<u8>,
    block_size: usize,
    /// (source device, destination device) pairs where FICLONE failed as unsupported.
    no_clone: Vec<(u64, u64)>,
    /// ... and where `transfer` did.
    no_transfer: Vec<(u64, u64)>,
    /// How bytes move before the buffer: copy_file_range on the kernel path, or an alternative
    /// engine's method (`--engine copy-range|sendfile|splice|aio`).
    transfer: Option<Transfer>,
    /// Files smaller than this skip `transfer` for plain read/write (AIO's small-file
    /// threshold, as in the Linux-AIO copier it comes from).
    transfer_from: u64,
    /// What the last whole file's copy did (`--debug`).
    pub report: DebugReport,
    /// A run of a tee group (`cp --tee`): each piece of a source is read once for the whole
    /// group, and this run's copy written from it (no copy_file_range: the kernel's copy
    /// would read the source again).
    shared: Option<Member>,
}

/// What one step of a file copy did, in GNU cp's `--debug` words.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Tried {
    /// Not reached (a clone made the copy), or not known.
    #[default]
    Unknown,
    /// Not asked for (`--reflink=never`).
    No,
    /// Done this way.
    Yes,
    /// Left out on purpose (holes to make, an engine of another method).
    Avoided,
    /// Tried, and the filesystems refused (now or earlier in the run).
    Unsupported,
}

/// How holes were looked for, in `--debug` words.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum HoleScan {
    #[default]
    Unknown,
    /// Every byte written.
    No,
    /// SEEK_DATA/SEEK_HOLE (`--sparse=auto` on a sparse file).
    SeekHole,
    /// SEEK_DATA/SEEK_HOLE, and zero pages made holes too (`--sparse=always`).
    SeekHoleZeros,
}

/// What the data path did for the last whole file: cp's `--debug` line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DebugReport {
    pub offload: Tried,
    pub reflink: Tried,
    pub holes: HoleScan,
}

impl DebugReport {
    /// `copy offload: yes, reflink: unsupported, sparse detection: no`, as GNU cp prints it.
    pub fn line(&self) -> String {
        let tried = |t: Tried| match t {
            Tried::Unknown => "unknown",
            Tried::No => "no",
            Tried::Yes => "yes",
            Tried::Avoided => "avoided",
            Tried::Unsupported => "unsupported",
        };
        let holes = match self.holes {
            HoleScan::Unknown => "unknown",
            HoleScan::No => "no",
            HoleScan::SeekHole => "SEEK_HOLE",
            HoleScan::SeekHoleZeros => "SEEK_HOLE + zeros",
        };
        format!(
            "copy offload: {}, reflink: {}, sparse detection: {holes}",
            tried(self.offload),
            tried(self.reflink)
        )
    }
}

/// Which side of a copy failed.
pub(crate) enum Side {
    Read(io::Error),
    Write(io::Error),
    /// `--reflink=always` and the file could not be cloned.
    Clone(io::Error),
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
            Side::Clone(e) => {
                CopyError::clone_failed(dir.dst_path(Some(dst)), dir.src_path(Some(src)), e)
            }
        }
    }
}

/// One file's source and destination descriptors, and the devices they are on (what a device
/// pair refused is remembered by the pair).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ends<'f> {
    pub src: BorrowedFd<'f>,
    pub dst: BorrowedFd<'f>,
    pub devs: (u64, u64),
    /// The destination holds old bytes (sync's `--inplace`): where holes are kept, the
    /// source's are punched in it, not only left unwritten.
    pub punch_holes: bool,
}

/// Whether a copy under way must give up (SIGINT, a fatal error elsewhere): asked between
/// steps, so a big file does not hold up the end of the run.
pub(crate) trait Stop {
    fn stopped(&self) -> bool;
}

impl Stop for Ctx<'_> {
    fn stopped(&self) -> bool {
        Ctx::stopped(self)
    }
}

/// Makes `[from, from + len)` of `fd` read as zeros: a hole punched, or zeros written where
/// the filesystem cannot punch one.
pub(crate) fn punch_hole(fd: BorrowedFd<'_>, from: u64, len: u64) -> io::Result<()> {
    use rustix::fs::FallocateFlags as F;
    match rustix::fs::fallocate(fd, F::PUNCH_HOLE | F::KEEP_SIZE, from, len) {
        Ok(()) => return Ok(()),
        Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::NOSYS) => {}
        Err(e) => return Err(e.into()),
    }
    let zeros = vec![0u8; len.min(1 << 20) as usize];
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(zeros.len() as u64) as usize;
        sys::pwrite_all(fd, &zeros[..n], from + done)?;
        done += n as u64;
    }
    Ok(())
}

/// Granularity of `--sparse=always` zero detection: one page, as filesystems allocate.
const ZERO_BLOCK: usize = 4096;

fn is_zero(block: &[u8]) -> bool {
    let (head, body, tail) = {
        // SAFETY: any bit pattern is a valid u128; align_to only reinterprets aligned bytes.
        unsafe { block.align_to::<u128>() }
    };
    head.iter().all(|&b| b == 0) && body.iter().all(|&w| w == 0) && tail.iter().all(|&b| b == 0)
}

impl DataPath {
    /// The data path of `plan` with the run's fitted `tuning`: kernel fast paths (FICLONE,
    /// copy_file_range) when `kernel` and the plan allow them, a `--bs` buffer otherwise; holes
    /// as `--sparse` says.
    pub fn new(plan: &CopyPlan, tuning: &Tuning, kernel: bool) -> Self {
        // Hashing needs the bytes in memory: no clones, no copy_file_range (measured against
        // copy_file_range plus a read of the cached data:
        // docs/bench/2026-11-25-verified-copies.md).
        let kernel = kernel
            && plan.reflink != Reflink::Never
            && plan.sparse != Sparse::Always
            && plan.hashing.is_none();
        DataPath {
            kernel,
            reflink: plan.reflink,
            sparse: plan.sparse,
            seek_all: false,
            buf: Vec::new(),
            block_size: tuning.block_size,
            no_clone: Vec::new(),
            no_transfer: Vec::new(),
            transfer: kernel.then(|| Transfer::new(Method::CopyRange, tuning.block_size)),
            transfer_from: 0,
            report: DebugReport::default(),
            shared: None,
        }
    }

    /// Makes this data path read through the tee group of `member`.
    pub fn share(&mut self, member: Option<Member>) {
        self.shared = member;
    }

    /// The data path of an alternative engine: every byte moves by `method` (files below
    /// `plain_below` bytes, and all files under `--sparse=always`, by plain read/write); no
    /// clones, no copy_file_range of its own.
    pub fn with_method(plan: &CopyPlan, tuning: &Tuning, method: Method, plain_below: u64) -> Self {
        let transfer = Transfer::new(method, tuning.block_size)
            .with_depth(tuning.queue_depth as usize)
            .with_direct(plan.direct);
        DataPath {
            // Turning zero runs into holes, and hashing, need the bytes in a buffer, whatever
            // the engine.
            transfer: (plan.sparse != Sparse::Always && plan.hashing.is_none()).then_some(transfer),
            transfer_from: plain_below,
            ..DataPath::new(plan, tuning, false)
        }
    }

    /// The data path of a command that decides itself where each file's bytes go (sync: a
    /// temporary, the file in place, a staging directory): no clones; copy_file_range for
    /// files of `plain_below` bytes or more, unless `hashing` puts every byte through the
    /// `block_size` buffer and the hash; with `holes`, every file's holes found by
    /// SEEK_DATA/SEEK_HOLE and kept.
    pub fn for_whole_files(
        holes: bool,
        hashing: bool,
        block_size: usize,
        plain_below: u64,
    ) -> Self {
        DataPath {
            kernel: false,
            reflink: Reflink::Never,
            sparse: if holes { Sparse::Auto } else { Sparse::Never },
            seek_all: holes,
            buf: Vec::new(),
            block_size,
            no_clone: Vec::new(),
            no_transfer: Vec::new(),
            transfer: (!hashing).then(|| Transfer::new(Method::CopyRange, block_size)),
            transfer_from: plain_below,
            report: DebugReport::default(),
            shared: None,
        }
    }

    /// True when several workers may copy parts of one file at once with this data path.
    pub fn splits_files(&self) -> bool {
        self.transfer
            .as_ref()
            .is_none_or(|t| t.method().positional())
    }

    /// True when files from `devs.0` to `devs.1` may be cloned: the plan allows it and no clone
    /// between these devices has failed as unsupported yet.
    pub fn may_clone(&self, devs: (u64, u64)) -> bool {
        match self.reflink {
            Reflink::Never => false,
            Reflink::Always => true,
            Reflink::Auto => self.kernel && !self.no_clone.contains(&devs),
        }
    }

    /// Clones the whole file where the plan and the filesystem allow. `Ok(false)`: not cloned,
    /// copy it; `--reflink=always` makes that an error instead.
    pub fn try_clone(
        &mut self,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        devs: (u64, u64),
        stat: &Stat,
    ) -> Result<bool, Side> {
        self.report.reflink = match self.reflink {
            Reflink::Never => Tried::No,
            _ if self.no_clone.contains(&devs) => Tried::Unsupported,
            _ => Tried::Unknown,
        };
        if stat.size == 0 || !self.may_clone(devs) {
            return Ok(false);
        }
        if !self.no_clone.contains(&devs) {
            match sys::ficlone(dst, src) {
                Ok(()) => {
                    self.report.reflink = Tried::Yes;
                    return Ok(true);
                }
                Err(e) if transfer::unsupported(&e) => {
                    self.report.reflink = Tried::Unsupported;
                    self.no_clone.push(devs);
                }
                Err(e) => return Err(Side::Write(e)),
            }
        }
        if self.reflink == Reflink::Always {
            return Err(Side::Clone(io::Error::from_raw_os_error(libc::EOPNOTSUPP)));
        }
        Ok(false)
    }

    /// True when this file's holes are kept: it has some (or `--sparse=always` makes them).
    pub fn keeps_holes(&self, stat: &Stat) -> bool {
        match self.sparse {
            Sparse::Never => false,
            Sparse::Auto => self.seek_all || stat.looks_sparse(),
            Sparse::Always => true,
        }
    }

    /// Copies a whole file from the start until end of file, feeding `hash`. Returns the bytes
    /// copied (holes included).
    pub fn copy_whole(
        &mut self,
        ctx: &impl Stop,
        ends: Ends<'_>,
        stat: &Stat,
        hash: Option<&FileHash>,
    ) -> Result<u64, Side> {
        let Ends { src, dst, devs, .. } = ends;
        self.report = DebugReport::default();
        if self.try_clone(src, dst, devs, stat)? {
            return Ok(stat.size);
        }
        let holes = self.keeps_holes(stat);
        self.report.holes = match (holes, self.sparse) {
            (false, _) => HoleScan::No,
            (true, Sparse::Always) => HoleScan::SeekHoleZeros,
            (true, _) => HoleScan::SeekHole,
        };
        let copied = self.copy_span(ctx, ends, 0, u64::MAX, stat, hash)?;
        if holes {
            // A trailing hole has no data to write: the length says where the file ends.
            rustix::fs::ftruncate(dst, copied).map_err(|e| Side::Write(e.into()))?;
        }
        Ok(copied)
    }

    /// Copies `[offset, offset + len)` of the file `stat` describes, or up to end of file if
    /// that comes first; where its holes are kept, only the data segments (SEEK_DATA/SEEK_HOLE),
    /// leaving holes unwritten (punched, if `ends` says the destination holds old bytes).
    /// Returns the length covered, holes included. `hash` is fed the bytes, and told of the
    /// holes.
    pub fn copy_span(
        &mut self,
        ctx: &impl Stop,
        ends: Ends<'_>,
        offset: u64,
        len: u64,
        stat: &Stat,
        hash: Option<&FileHash>,
    ) -> Result<u64, Side> {
        let id = Some((stat.dev, stat.ino));
        if !self.keeps_holes(stat) {
            return self.copy_range_of(ctx, ends, (offset, len), (stat.size, id), hash);
        }
        let src = ends.src;
        let end = offset.saturating_add(len);
        let mut pos = offset;
        while pos < end {
            let data = match rustix::fs::seek(src, SeekFrom::Data(pos)) {
                Ok(data) => data,
                // No data past `pos`: the rest is one hole up to end of file.
                Err(rustix::io::Errno::NXIO) => break,
                Err(e) => return Err(Side::Read(e.into())),
            };
            hole_at(ends, hash, pos, data.min(end))?;
            if data >= end {
                break;
            }
            let hole = rustix::fs::seek(src, SeekFrom::Hole(data))
                .map_err(|e| Side::Read(e.into()))?
                .min(end);
            let n = self.copy_range_of(ctx, ends, (data, hole - data), (stat.size, id), hash)?;
            pos = data + n;
            if n < hole - data {
                // End of file came early: the file shrank while it was copied.
                return Ok(pos - offset);
            }
        }
        let size = rustix::fs::seek(src, SeekFrom::End(0)).map_err(|e| Side::Read(e.into()))?;
        let covered = end.min(size).max(pos);
        hole_at(ends, hash, pos, covered)?;
        Ok(covered - offset)
    }

    /// Copies from the current position of `src` to end of input, writing in order: for a pipe,
    /// a device or a terminal on either side, where offsets, clones and holes mean nothing.
    pub fn copy_stream(
        &mut self,
        ctx: &impl Stop,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        hash: Option<&FileHash>,
    ) -> Result<u64, Side> {
        // A stream's length is unknown: a whole `--bs` buffer (already fitted to the run's
        // memory budget), or an error if even that is not there.
        transfer::grow(&mut self.buf, self.block_size as u64, self.block_size)
            .map_err(Side::Read)?;
        let mut done = 0u64;
        loop {
            if ctx.stopped() {
                return Err(Side::Write(io::Error::from_raw_os_error(libc::EINTR)));
            }
            let n = match rustix::io::read(src, &mut self.buf[..]) {
                Ok(0) => return Ok(done),
                Ok(n) => n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(Side::Read(e.into())),
            };
            if let Some(hash) = hash {
                hash.data(src, done, &self.buf[..n]);
            }
            let mut chunk = &self.buf[..n];
            while !chunk.is_empty() {
                match rustix::io::write(dst, chunk) {
                    Ok(0) => return Err(Side::Write(io::ErrorKind::WriteZero.into())),
                    Ok(w) => chunk = &chunk[w..],
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => return Err(Side::Write(e.into())),
                }
            }
            done += n as u64;
        }
    }

    /// Copies `[offset, offset + len)` of a file of `file_size` bytes, or up to end of file if
    /// that comes first, feeding `hash` (which keeps the data path off the kernel's copies).
    pub fn copy_range(
        &mut self,
        ctx: &impl Stop,
        ends: Ends<'_>,
        offset: u64,
        len: u64,
        file_size: u64,
        hash: Option<&FileHash>,
    ) -> Result<u64, Side> {
        self.copy_range_of(ctx, ends, (offset, len), (file_size, None), hash)
    }

    /// [`Self::copy_range`] of the file `id` (device, inode), when known: a run of a tee group
    /// reads its pieces through the group.
    fn copy_range_of(
        &mut self,
        ctx: &impl Stop,
        ends: Ends<'_>,
        (offset, len): (u64, u64),
        (file_size, id): (u64, Option<(u64, u64)>),
        hash: Option<&FileHash>,
    ) -> Result<u64, Side> {
        let Ends { src, dst, devs, .. } = ends;
        let mut done = 0u64;
        let shared = self.shared.clone().zip(id);
        let usable = file_size >= self.transfer_from
            && !self.no_transfer.contains(&devs)
            && shared.is_none();
        if self.report.offload == Tried::Unknown {
            self.report.offload = match &self.transfer {
                Some(t) if t.method() != Method::CopyRange => Tried::Avoided,
                Some(_) if self.no_transfer.contains(&devs) => Tried::Unsupported,
                // copy_file_range of nothing says nothing.
                Some(_) if usable && file_size == 0 => Tried::Unknown,
                Some(_) if usable => Tried::Yes,
                _ => Tried::Avoided,
            };
        }
        debug_assert!(hash.is_none() || self.transfer.is_none());
        if let Some(transfer) = self.transfer.as_mut().filter(|_| usable) {
            // In steps, so Ctrl-C and a full disk elsewhere are noticed promptly.
            while done < len {
                if ctx.stopped() {
                    return Err(Side::Write(io::Error::from_raw_os_error(libc::EINTR)));
                }
                let step = (len - done).min(KERNEL_STEP as u64);
                match transfer.copy(src, dst, offset + done, step) {
                    Ok(n) => {
                        done += n;
                        if n < step {
                            return Ok(done);
                        }
                    }
                    // Not between these filesystems (or not for this kind of file): remember,
                    // and copy through the buffer below.
                    Err(TransferError::Unsupported(_)) if done == 0 => {
                        self.no_transfer.push(devs);
                        if self.report.offload == Tried::Yes {
                            self.report.offload = Tried::Unsupported;
                        }
                        break;
                    }
                    Err(TransferError::Unsupported(e) | TransferError::Write(e)) => {
                        return Err(Side::Write(e))
                    }
                    Err(TransferError::Read(e)) => return Err(Side::Read(e)),
                }
            }
            if done >= len {
                return Ok(done);
            }
        }
        // No bigger than the rest of the range needs, and an error rather than an abort when
        // memory is short.
        if done < len && shared.is_none() {
            let rest = (len - done).min(file_size.saturating_sub(offset + done));
            transfer::grow(&mut self.buf, rest, self.block_size).map_err(Side::Read)?;
        }
        let skip_zeros = self.sparse == Sparse::Always;
        while done < len {
            if ctx.stopped() {
                return Err(Side::Write(io::Error::from_raw_os_error(libc::EINTR)));
            }
            let at = offset + done;
            let piece;
            let bytes: &[u8] = match &shared {
                Some((member, id)) => {
                    // Pieces of `--bs` from the start of the range, as every member cuts them.
                    let want = (len - done).min(self.block_size as u64) as usize;
                    piece = member.read(src, *id, at, want).map_err(Side::Read)?;
                    piece.as_slice()
                }
                None => {
                    let want = (len - done).min(self.buf.len() as u64) as usize;
                    let n = sys::pread(src, &mut self.buf[..want], at).map_err(Side::Read)?;
                    ringio_base::hooks::rewrite_after_read(src, at, &self.buf[..n]);
                    &self.buf[..n]
                }
            };
            let n = bytes.len();
            if n == 0 {
                break;
            }
            match hash {
                // The whole file in one read: the one-shot hash.
                Some(hash) if at == 0 && n as u64 == file_size => hash.all(src, bytes),
                Some(hash) => hash.data(src, at, bytes),
                None => {}
            }
            if skip_zeros {
                // Runs of zero pages stay holes; the caller sets the final length.
                for (i, block) in bytes.chunks(ZERO_BLOCK).enumerate() {
                    if !is_zero(block) {
                        let block_at = at + (i * ZERO_BLOCK) as u64;
                        sys::pwrite_all(dst, block, block_at).map_err(Side::Write)?;
                    }
                }
            } else {
                sys::pwrite_all(dst, bytes, at).map_err(Side::Write)?;
            }
            done += n as u64;
        }
        Ok(done)
    }
}

/// `[from, to)` of the source is a hole: `hash` told of it, and where the destination holds
/// old bytes, a hole punched there too.
fn hole_at(ends: Ends<'_>, hash: Option<&FileHash>, from: u64, to: u64) -> Result<(), Side> {
    if let Some(hash) = hash {
        hash.hole(ends.src, from, to);
    }
    if ends.punch_holes && from < to {
        punch_hole(ends.dst, from, to - from).map_err(Side::Write)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Algo;
    use std::fs::File;
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileExt;

    struct Never;

    impl Stop for Never {
        fn stopped(&self) -> bool {
            false
        }
    }

    /// A 1 MiB file with holes at the start, in the middle and at the end, and its bytes.
    fn sparse_source(dir: &std::path::Path) -> (File, Vec<u8>) {
        let path = dir.join("src");
        let f = File::create(&path).unwrap();
        f.set_len(1 << 20).unwrap();
        let mut content = vec![0u8; 1 << 20];
        for (at, len) in [(256 << 10, 8192), (600 << 10, 100)] {
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8 + 1).collect();
            f.write_all_at(&bytes, at as u64).unwrap();
            content[at..at + len].copy_from_slice(&bytes);
        }
        (File::open(&path).unwrap(), content)
    }

    /// sync's `-S --inplace`: a file that held other bytes ends as the source, its holes
    /// punched (or only left unwritten, when not asked, so the old bytes stay); hashed, the
    /// digest is the source's.
    #[test]
    fn holes_are_punched_over_old_bytes_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let (src, content) = sparse_source(dir.path());
        let stat = sys::fstatx(src.as_fd()).unwrap();
        let algo = Algo::ALL[0];
        for (punch_holes, hashing) in [(true, false), (true, true), (false, false)] {
            let dst_path = dir.path().join("dst");
            std::fs::write(&dst_path, vec![0xaau8; 3 << 19]).unwrap();
            let dst = File::options().write(true).open(&dst_path).unwrap();
            let mut data = DataPath::for_whole_files(true, hashing, 1 << 20, 64 << 10);
            let hash = hashing.then(|| FileHash::new(algo));
            let ends = Ends {
                src: src.as_fd(),
                dst: dst.as_fd(),
                devs: (stat.dev, stat.dev),
                punch_holes,
            };
            let n = data
                .copy_span(&Never, ends, 0, stat.size, &stat, hash.as_ref())
                .unwrap_or_else(|_| panic!("copy failed"));
            assert_eq!(n, stat.size);
            dst.set_len(stat.size).unwrap();
            let got = std::fs::read(&dst_path).unwrap();
            if punch_holes {
                assert!(got == content, "punched: not the source's bytes");
            } else {
                assert_eq!(got[..1024], [0xaa; 1024], "not asked: a hole was punched");
                assert_eq!(
                    got[256 << 10..(256 << 10) + 8192],
                    content[256 << 10..][..8192]
                );
            }
            if let Some(hash) = hash {
                let (hex, len) = hash.finish_in_order().unwrap();
                assert_eq!((hex, len), (algo.hex_of(&content), stat.size));
            }
        }
    }
}
