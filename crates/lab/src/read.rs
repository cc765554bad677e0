//! `ringio read`: read a file with a block size, a thread count and a method, and checksum it
//! (XOR of little-endian u32 words) so that every byte is really looked at.

use ringio_copy::quote::quote;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use io_uring::{opcode, types, IoUring};
use rustix::mm;

use crate::error::LabError;
use crate::fault::FaultGuard;
use crate::xor::xor_at;
use ringio_base::buf::AlignedBuf;

/// How the bytes are read. The command-line names are the lower-case variant names.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[strum(serialize_all = "kebab-case", parse_err_ty = String, parse_err_fn = unknown_read_method)]
pub enum ReadMethod {
    /// pread(2) into one buffer per thread.
    Psync,
    /// io_uring reads, several blocks in flight per thread.
    Uring,
    /// mmap(2) of the file, read through page faults.
    Mmap,
}

impl ReadMethod {
    /// Every method.
    pub const ALL: &'static [ReadMethod] = <ReadMethod as strum::VariantArray>::VARIANTS;

    /// The command-line name.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// `FromStr`'s error for an unknown method name: says which names exist.
fn unknown_read_method(name: &str) -> String {
    crate::names::unknown(
        "read method",
        name,
        ReadMethod::ALL.iter().map(|m| m.name()),
    )
}

/// What to read and how.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Bytes per read call (per request for io_uring).
    pub block_size: usize,
    /// Read only this many blocks from the start (default: the whole file).
    pub count: Option<u64>,
    /// Threads, each reading one contiguous range.
    pub threads: usize,
    /// The method.
    pub method: ReadMethod,
    /// O_DIRECT: bypass the page cache (psync and uring).
    pub direct: bool,
    /// io_uring: reads in flight per thread.
    pub queue_depth: u32,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            block_size: 1 << 20,
            count: None,
            threads: 1,
            method: ReadMethod::Psync,
            direct: false,
            queue_depth: 8,
        }
    }
}

/// One read of a file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadResult {
    /// The checksum.
    pub xor: u32,
    /// Bytes read.
    pub bytes: u64,
    /// Wall time, from open to the last byte.
    pub seconds: f64,
    /// Whether stat gave the file a size to split among threads and to map. Without one (a
    /// /proc or /sys file, a pipe, a device, an empty file) it was read from start to end with
    /// read(2) on one thread, whatever the method and thread count.
    pub sized: bool,
}

impl ReadResult {
    /// Throughput in MiB/s.
    pub fn mib_per_s(&self) -> f64 {
        self.bytes as f64 / (1 << 20) as f64 / self.seconds.max(1e-9)
    }
}

/// Reads `path` as `opts` says, to its end: the size from stat is a hint. A regular file with
/// a size is split among the threads (or mapped) by that size, and whatever lies past it is read
/// too; a file without one is read sequentially to end of file. A file that turns out to hold
/// another number of bytes than stat said (it shrank or grew while read) is an error,
/// [`LabError::Changed`].
pub fn read_file(path: &Path, opts: &ReadOptions) -> Result<ReadResult, LabError> {
    if opts.block_size == 0 || opts.threads == 0 {
        return Err(LabError::Invalid(
            "block size and threads must be at least 1".into(),
        ));
    }
    if opts.direct && opts.method == ReadMethod::Mmap {
        return Err(LabError::Invalid("--direct does not apply to mmap".into()));
    }
    if opts.direct && opts.block_size % 4096 != 0 {
        return Err(LabError::Invalid(format!(
            "--direct needs a block size that is a multiple of 4096 (got {})",
            opts.block_size
        )));
    }
    let start = Instant::now();
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    if opts.direct {
        open.custom_flags(libc::O_DIRECT);
    }
    let file = open.open(path).map_err(|e| {
        if opts.direct && e.raw_os_error() == Some(libc::EINVAL) {
            LabError::Invalid(format!(
                "cannot open {} with O_DIRECT: its filesystem does not support direct I/O (tmpfs, for one)",
                quote(&path)
            ))
        } else {
            LabError::io("open", path, e)
        }
    })?;
    let meta = file.metadata().map_err(|e| LabError::io("stat", path, e))?;
    let stated = meta.len();
    let sized = meta.file_type().is_file() && stated > 0;
    let limit = opts
        .count
        .map(|blocks| blocks.saturating_mul(opts.block_size as u64));
    let len = if sized {
        limit.map_or(stated, |l| l.min(stated))
    } else {
        0
    };
    let ranges = split(len, opts.threads, opts.block_size as u64);
    let reader = Reader {
        path,
        file: &file,
        opts,
    };
    let map = match opts.method {
        ReadMethod::Mmap if len > 0 => {
            Some(Mapping::new(&file, len).map_err(|e| LabError::io("mmap", path, e))?)
        }
        _ => None,
    };
    ringio_base::hooks::resize_after_stat(path);
    let results: Vec<Result<(u32, u64), LabError>> = match &map {
        Some(map) => std::thread::scope(|s| {
            let handles: Vec<_> = ranges
                .iter()
                .map(|&(a, b)| {
                    s.spawn(move || Ok((xor_at(a, &map.bytes()[a as usize..b as usize]), b - a)))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("reader thread"))
                .collect()
        }),
        None => std::thread::scope(|s| {
            let handles: Vec<_> = ranges
                .iter()
                .map(|&(a, b)| {
                    let reader = &reader;
                    s.spawn(move || reader.range(a, b))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("reader thread"))
                .collect()
        }),
    };
    let (mut xor, mut bytes) = (0u32, 0u64);
    for r in results {
        let (x, n) = r?;
        xor ^= x;
        bytes += n;
    }
    if let Some(map) = map {
        // Past a truncation a mapping reads zeros, never short: in whole pages after a fault
        // (which the guard saw), and in the rest of the file's last page without one (which
        // only the size now tells).
        let now = file
            .metadata()
            .map_err(|e| LabError::io("stat", path, e))?
            .len();
        if map.faulted() || now < len {
            return Err(LabError::Changed {
                path: path.to_path_buf(),
                doing: "read",
                stated,
                read: now.min(len),
            });
        }
    }
    // Past the stated size: the whole of a file without one, or what a file grew by. A read
    // limited by --count within the stated size has nothing to look for there.
    let past_end = match limit {
        Some(l) if sized && l <= len => None,
        Some(l) => Some(l - len),
        None => Some(u64::MAX),
    };
    if let Some(most) = past_end {
        let (x, n) = if sized {
            reader.past(len, most)?
        } else {
            reader.sequential(most)?
        };
        xor ^= x;
        bytes += n;
    }
    if sized && bytes != len {
        return Err(LabError::Changed {
            path: path.to_path_buf(),
            doing: "read",
            stated,
            read: bytes,
        });
    }
    Ok(ReadResult {
        xor,
        bytes,
        seconds: start.elapsed().as_secs_f64(),
        sized,
    })
}

/// `len` bytes cut into `threads` contiguous ranges whose starts are multiples of `align`.
fn split(len: u64, threads: usize, align: u64) -> Vec<(u64, u64)> {
    let per = (len / threads as u64).next_multiple_of(align.max(1));
    let mut out = Vec::new();
    let mut at = 0;
    for _ in 0..threads {
        let end = (at + per).min(len);
        if at >= end {
            break;
        }
        out.push((at, end));
        at = end;
    }
    if at < len {
        match out.last_mut() {
            Some(last) => last.1 = len,
            None => out.push((0, len)),
        }
    }
    out
}

struct Reader<'a> {
    path: &'a Path,
    file: &'a File,
    opts: &'a ReadOptions,
}

impl Reader<'_> {
    /// Reads `[a, b)`; returns its XOR and the bytes read (fewer at end of file).
    fn range(&self, a: u64, b: u64) -> Result<(u32, u64), LabError> {
        match self.opts.method {
            ReadMethod::Psync => self.psync(a, b),
            ReadMethod::Uring => self.uring(a, b),
            ReadMethod::Mmap => unreachable!("mmap reads from the mapping"),
        }
    }

    fn err(&self, op: &'static str, e: io::Error) -> LabError {
        LabError::io(op, self.path, e)
    }

    fn psync(&self, a: u64, b: u64) -> Result<(u32, u64), LabError> {
        let bs = self.opts.block_size;
        let mut buf = AlignedBuf::new(bs);
        let fd = self.file.as_fd();
        let (mut xor, mut at) = (0u32, a);
        while at < b {
            // O_DIRECT reads whole blocks; past `b` they are cut off below.
            let want = if self.opts.direct {
                bs
            } else {
                (b - at).min(bs as u64) as usize
            };
            let n = ringio_base::io::pread(fd, &mut buf[..want], at)
                .map_err(|e| self.err("read", e))?;
            if n == 0 {
                break;
            }
            let n = n.min((b - at) as usize);
            xor ^= xor_at(at, &buf[..n]);
            at += n as u64;
        }
        Ok((xor, at - a))
    }

    /// Reads with pread from `from`, the stated end of a regular file, to end of file or `most`
    /// bytes: what the file grew by since it was stat'ed.
    fn past(&self, from: u64, most: u64) -> Result<(u32, u64), LabError> {
        let bs = self.opts.block_size;
        let mut buf = AlignedBuf::new(bs);
        let fd = self.file.as_fd();
        let end = from.saturating_add(most);
        let (mut xor, mut at) = (0u32, from);
        while at < end {
            // O_DIRECT reads whole aligned blocks: from the block holding `at`, keeping the
            // bytes from `at` on.
            let (read_at, skip) = if self.opts.direct {
                let aligned = at / 4096 * 4096;
                (aligned, (at - aligned) as usize)
            } else {
                (at, 0)
            };
            let n = ringio_base::io::pread(fd, &mut buf[..bs], read_at)
                .map_err(|e| self.err("read", e))?;
            if n <= skip {
                break;
            }
            let n = (n - skip).min((end - at).min(usize::MAX as u64) as usize);
            xor ^= xor_at(at, &buf[skip..skip + n]);
            at += n as u64;
        }
        Ok((xor, at - from))
    }

    /// Reads a file without a size from its start to end of file, or `most` bytes, with
    /// read(2): pipes and devices have no offsets to pread at, and pseudo-files are written to
    /// be read in order.
    fn sequential(&self, most: u64) -> Result<(u32, u64), LabError> {
        let bs = self.opts.block_size;
        let mut buf = AlignedBuf::new(bs);
        let (mut xor, mut at) = (0u32, 0u64);
        while at < most {
            // O_DIRECT reads whole blocks; past `most` they are cut off below.
            let want = if self.opts.direct {
                bs
            } else {
                (most - at).min(bs as u64) as usize
            };
            let n = match rustix::io::read(self.file.as_fd(), &mut buf[..want]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(self.err("read", e.into())),
            };
            let n = n.min((most - at).min(usize::MAX as u64) as usize);
            xor ^= xor_at(at, &buf[..n]);
            at += n as u64;
        }
        Ok((xor, at))
    }

    fn uring(&self, a: u64, b: u64) -> Result<(u32, u64), LabError> {
        let bs = self.opts.block_size;
        let depth = self.opts.queue_depth.clamp(1, 1024) as usize;
        let mut ring =
            IoUring::new(depth as u32).map_err(|e| self.err("set up io_uring for", e))?;
        let mut bufs: Vec<AlignedBuf> = (0..depth).map(|_| AlignedBuf::new(bs)).collect();
        // Per slot: (block start, bytes of the block already read).
        let mut slots: Vec<Option<(u64, usize)>> = vec![None; depth];
        let fd = types::Fd(self.file.as_raw_fd());
        let (mut next, mut xor, mut total, mut in_flight) = (a, 0u32, 0u64, 0usize);
        let block_len = |at: u64| ((b - at).min(bs as u64)) as usize;
        let submit =
            |ring: &mut IoUring, slot: usize, at: u64, done: usize, buf: &mut AlignedBuf| {
                let len = if self.opts.direct { bs } else { block_len(at) };
                // SAFETY: `buf` lives in `bufs` until this read completes: slots are reused only
                // after their completion is reaped, and the ring is drained before return.
                let entry = opcode::Read::new(
                    fd,
                    unsafe { buf.as_mut_ptr().add(done) },
                    (len - done) as u32,
                )
                .offset(at + done as u64)
                .build()
                .user_data(slot as u64);
                // SAFETY: as above; the queue has room for one entry per slot.
                unsafe { ring.submission().push(&entry).expect("one entry per slot") };
            };
        for (slot, state) in slots.iter_mut().enumerate() {
            if next >= b {
                break;
            }
            submit(&mut ring, slot, next, 0, &mut bufs[slot]);
            *state = Some((next, 0));
            next += block_len(next) as u64;
            in_flight += 1;
        }
        let mut failure = None;
        while in_flight > 0 {
            ring.submit_and_wait(1).map_err(|e| self.err("read", e))?;
            let done: Vec<(usize, i32)> = ring
                .completion()
                .map(|c| (c.user_data() as usize, c.result()))
                .collect();
            for (slot, res) in done {
                in_flight -= 1;
                let (at, filled) = slots[slot].take().expect("live slot");
                if res == -libc::EAGAIN || res == -libc::EINTR {
                    submit(&mut ring, slot, at, filled, &mut bufs[slot]);
                    slots[slot] = Some((at, filled));
                    in_flight += 1;
                    continue;
                }
                if res < 0 {
                    failure.get_or_insert(io::Error::from_raw_os_error(-res));
                    continue;
                }
                let filled = filled + res as usize;
                let want = block_len(at);
                if res > 0 && filled < want && failure.is_none() {
                    // A short read: the rest of the block.
                    submit(&mut ring, slot, at, filled, &mut bufs[slot]);
                    slots[slot] = Some((at, filled));
                    in_flight += 1;
                    continue;
                }
                let n = filled.min(want);
                xor ^= xor_at(at, &bufs[slot][..n]);
                total += n as u64;
                if next < b && failure.is_none() && res > 0 {
                    submit(&mut ring, slot, next, 0, &mut bufs[slot]);
                    slots[slot] = Some((next, 0));
                    next += block_len(next) as u64;
                    in_flight += 1;
                }
            }
        }
        match failure {
            Some(e) => Err(self.err("read", e)),
            None => Ok((xor, total)),
        }
    }
}

/// A read-only mapping of the first `len` bytes of a file, guarded against the file's
/// truncation (see [`FaultGuard`]).
struct Mapping {
    ptr: *mut u8,
    len: usize,
    guard: Option<FaultGuard>,
}

// SAFETY: the mapping is read-only and lives until drop; threads only read it.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(file: &File, len: u64) -> io::Result<Self> {
        if len == 0 {
            return Ok(Mapping {
                ptr: std::ptr::null_mut(),
                len: 0,
                guard: None,
            });
        }
        // SAFETY: a fresh shared read-only mapping of an open file, at an address the kernel
        // picks; unmapped in Drop.
        let ptr = unsafe {
            mm::mmap(
                std::ptr::null_mut(),
                len as usize,
                mm::ProtFlags::READ,
                mm::MapFlags::SHARED,
                file,
                0,
            )
        }?;
        // SAFETY: advice on our own mapping; it changes no contents.
        let _ = unsafe { mm::madvise(ptr, len as usize, mm::Advice::Sequential) };
        // SAFETY: the mapping is ours and outlives the guard (dropped first in Drop); its
        // readers only checksum it, and a fault marks the read as failed, so zero pages past
        // a truncation are never taken for the file's bytes.
        let Some(guard) = (unsafe { FaultGuard::new(ptr.cast(), len as usize) }) else {
            // SAFETY: our own mapping, unmapped once.
            let _ = unsafe { mm::munmap(ptr, len as usize) };
            return Err(io::Error::other("too many files mapped at once"));
        };
        Ok(Mapping {
            ptr: ptr.cast(),
            len: len as usize,
            guard: Some(guard),
        })
    }

    /// Whether the file was truncated under the mapping while it was read.
    fn faulted(&self) -> bool {
        self.guard.as_ref().is_some_and(FaultGuard::faulted)
    }

    fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the mapping covers `len` readable bytes while `self` lives. A page past the
        // end of a file truncated meanwhile faults; the guard then maps zeros there, so the
        // bytes stay readable, and `faulted` tells the reader they were not the file's.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // Unguard before unmapping: the range may be mapped again by anyone.
        self.guard = None;
        if self.len > 0 {
            // SAFETY: our own mapping, unmapped once.
            let _ = unsafe { mm::munmap(self.ptr.cast(), self.len) };
        }
    }
}

/// One row of a block-size sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SweepPoint {
    /// Block size.
    pub block_size: usize,
    /// Median throughput, MiB/s.
    pub median: f64,
    /// Slowest run.
    pub min: f64,
    /// Fastest run.
    pub max: f64,
}

/// Measures block sizes from 512 B to 64 MiB (powers of two), `runs` times each, then two
/// sizes between the best and its neighbours. `before_each` runs before every read (to evict
/// the file for cold sweeps); `progress` hears each finished point.
pub fn sweep(
    path: &Path,
    opts: &ReadOptions,
    runs: usize,
    max_block: usize,
    before_each: &dyn Fn() -> Result<(), LabError>,
    progress: &mut dyn FnMut(&SweepPoint),
) -> Result<Vec<SweepPoint>, LabError> {
    let mut measure = |bs: usize| -> Result<SweepPoint, LabError> {
        let mut rates = Vec::with_capacity(runs);
        for _ in 0..runs.max(1) {
            before_each()?;
            let o = ReadOptions {
                block_size: bs,
                ..opts.clone()
            };
            rates.push(read_file(path, &o)?.mib_per_s());
        }
        rates.sort_by(f64::total_cmp);
        let p = SweepPoint {
            block_size: bs,
            median: rates[rates.len() / 2],
            min: rates[0],
            max: rates[rates.len() - 1],
        };
        progress(&p);
        Ok(p)
    };
    let first = if opts.direct { 4096 } else { 512 };
    let mut points = Vec::new();
    let mut bs = first;
    while bs <= max_block {
        points.push(measure(bs)?);
        bs *= 2;
    }
    let best = best_of(&points).block_size;
    let align = if opts.direct { 4096 } else { 512 };
    for candidate in [best * 3 / 4, best * 3 / 2] {
        let c = candidate / align * align;
        if c >= first && c <= max_block && points.iter().all(|p| p.block_size != c) {
            points.push(measure(c)?);
        }
    }
    points.sort_by_key(|p| p.block_size);
    Ok(points)
}

/// The point with the highest median.
pub fn best_of(points: &[SweepPoint]) -> SweepPoint {
    *points
        .iter()
        .max_by(|a, b| a.median.total_cmp(&b.median))
        .expect("at least one point")
}

/// The block sizes within noise of the best: those whose fastest run reached the best's
/// slowest (their ranges overlap), smallest and largest. A recommendation inside that range is
/// as good as the best as far as these runs can tell.
pub fn within_noise_of_best(points: &[SweepPoint]) -> (usize, usize) {
    let best = best_of(points);
    let level = points.iter().filter(|p| p.max >= best.min);
    let low = level
        .clone()
        .map(|p| p.block_size)
        .min()
        .unwrap_or(best.block_size);
    let high = level.map(|p| p.block_size).max().unwrap_or(best.block_size);
    (low, high)
}

/// What `--calibrate` found.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    /// The file size that reads in at least the target time.
    pub size: u64,
    /// How long reading it took.
    pub seconds: f64,
}

/// Doubles the size of `path` (writing it afresh each time, starting at `start` bytes) until
/// reading it as `opts` says takes `min_seconds`, as the raw-performance report's calibration
/// did. Stops with an error before the file would outgrow the free space.
pub fn calibrate(
    path: &Path,
    opts: &ReadOptions,
    start: u64,
    min_seconds: f64,
    cold: bool,
    progress: &mut dyn FnMut(u64, f64),
) -> Result<Calibration, LabError> {
    let dir: PathBuf = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut size = start.max(4096);
    loop {
        let stat =
            rustix::fs::statvfs(&dir).map_err(|e| LabError::io("statvfs", &dir, e.into()))?;
        let free = stat.f_bavail * stat.f_frsize;
        let have = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if size > (free + have) * 9 / 10 {
            return Err(LabError::Invalid(format!(
                "cannot calibrate: reading {} bytes took less than {min_seconds} s and {size} bytes would not fit in the free space of {}",
                size / 2,
                quote(&dir)
            )));
        }
        crate::write::write_file(
            path,
            1 << 20,
            size.div_ceil(1 << 20),
            crate::write::Fill::Random,
        )?;
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(size))
            .map_err(|e| LabError::io("truncate", path, e))?;
        if cold {
            crate::cache::evict(path)?;
        }
        let r = read_file(path, opts)?;
        progress(size, r.seconds);
        if r.seconds >= min_seconds {
            return Ok(Calibration {
                size,
                seconds: r.seconds,
            });
        }
        size *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_file_once() {
        for (len, threads, align) in [(0, 3, 4096), (10, 3, 1), (1 << 20, 3, 4096), (5, 8, 4096)] {
            let r = split(len, threads, align);
            let covered: u64 = r.iter().map(|(a, b)| b - a).sum();
            assert_eq!(covered, len, "{len} {threads}");
            assert!(r.windows(2).all(|w| w[0].1 == w[1].0));
            assert!(r.iter().all(|(a, _)| a % align == 0));
        }
    }
}
