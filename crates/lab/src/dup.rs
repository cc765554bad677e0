//! `ringio dup`: duplicate one file by a chosen method, and `--compare`, which runs every
//! method in a child process of its own and reports what each cost (the sendfile report's
//! columns, from wait4's rusage).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::process::Command;

use io_uring::{opcode, types, IoUring};
use ringio_copy::transfer::{Method, Transfer, TransferError};

use crate::child::{self, Usage};
use crate::error::LabError;

/// A way to duplicate a file. The command-line names are the kebab-case variant names.
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
#[strum(serialize_all = "kebab-case", parse_err_ty = String, parse_err_fn = unknown_dup_method)]
pub enum DupMethod {
    /// read/write through a `--bs` buffer (the report's baseline used 1 KiB).
    Rw,
    /// The whole file read into one heap buffer, then written.
    Bigbuf,
    /// sendfile(2).
    Sendfile,
    /// splice(2) through a pipe.
    Splice,
    /// copy_file_range(2).
    CopyRange,
    /// io_uring reads and writes, several blocks in flight.
    Uring,
    /// FICLONE: share the source's blocks (btrfs, xfs).
    Reflink,
    /// reflink, else copy_file_range, else sendfile, else read/write: the first that works.
    Auto,
}

impl DupMethod {
    /// Every method, in table order (declaration order).
    pub const ALL: &'static [DupMethod] = <DupMethod as strum::VariantArray>::VARIANTS;

    /// The command-line name.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The block size used when none is given.
    pub fn default_block_size(self) -> usize {
        match self {
            DupMethod::Rw => 1024,
            _ => 128 << 10,
        }
    }
}

/// `FromStr`'s error for an unknown method name: says which names exist.
fn unknown_dup_method(name: &str) -> String {
    crate::names::unknown("method", name, DupMethod::ALL.iter().map(|m| m.name()))
}

/// What a duplication did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dup {
    /// Bytes copied.
    pub bytes: u64,
    /// The method that did it (for `auto`, the one it settled on).
    pub used: DupMethod,
}

/// Copies `src` to `dst` (created or truncated) with `method`. A failed copy removes `dst`, so
/// nothing half-written is left to look like a copy.
pub fn dup(src: &Path, dst: &Path, method: DupMethod, block_size: usize) -> Result<Dup, LabError> {
    let result = dup_into(src, dst, method, block_size);
    if result.is_err() && std::fs::metadata(src).is_ok() {
        let _ = std::fs::remove_file(dst);
    }
    result
}

fn dup_into(src: &Path, dst: &Path, method: DupMethod, block_size: usize) -> Result<Dup, LabError> {
    let input = File::open(src).map_err(|e| LabError::io("open", src, e))?;
    let size = input
        .metadata()
        .map_err(|e| LabError::io("stat", src, e))?
        .len();
    let output = File::create(dst).map_err(|e| LabError::io("create", dst, e))?;
    let bs = block_size.max(1);
    let via = |m: Method| -> Result<u64, LabError> {
        Transfer::new(m, bs)
            .copy(input.as_fd(), output.as_fd(), 0, u64::MAX)
            .map_err(|e| transfer_error(e, src, dst, method))
    };
    let bytes = match method {
        DupMethod::Rw => via(Method::ReadWrite)?,
        DupMethod::Sendfile => via(Method::Sendfile)?,
        DupMethod::Splice => via(Method::Splice)?,
        DupMethod::CopyRange => via(Method::CopyRange)?,
        DupMethod::Bigbuf => {
            let mut all = Vec::with_capacity(size as usize);
            (&input)
                .read_to_end(&mut all)
                .map_err(|e| LabError::io("read", src, e))?;
            (&output)
                .write_all(&all)
                .map_err(|e| LabError::io("write", dst, e))?;
            all.len() as u64
        }
        DupMethod::Uring => uring(&input, &output, bs, 8).map_err(|(op, e)| {
            let path = if op == "write" { dst } else { src };
            LabError::io(op, path, e)
        })?,
        DupMethod::Reflink => {
            rustix::fs::ioctl_ficlone(&output, &input).map_err(|e| {
                LabError::Invalid(format!(
                    "cannot clone '{}' to '{}': {} (reflinks need btrfs, xfs or the like, both files on one filesystem)",
                    src.display(),
                    dst.display(),
                    crate::error::reason(&e.into())
                ))
            })?;
            size
        }
        DupMethod::Auto => {
            if rustix::fs::ioctl_ficlone(&output, &input).is_ok() {
                return Ok(Dup {
                    bytes: size,
                    used: DupMethod::Reflink,
                });
            }
            for (m, used) in [
                (Method::CopyRange, DupMethod::CopyRange),
                (Method::Sendfile, DupMethod::Sendfile),
                (Method::ReadWrite, DupMethod::Rw),
            ] {
                match Transfer::new(m, bs.max(128 << 10)).copy(
                    input.as_fd(),
                    output.as_fd(),
                    0,
                    u64::MAX,
                ) {
                    Ok(bytes) => return Ok(Dup { bytes, used }),
                    Err(TransferError::Unsupported(_)) => continue,
                    Err(e) => return Err(transfer_error(e, src, dst, used)),
                }
            }
            unreachable!("read/write is always supported")
        }
    };
    Ok(Dup {
        bytes,
        used: method,
    })
}

fn transfer_error(e: TransferError, src: &Path, dst: &Path, method: DupMethod) -> LabError {
    match e {
        TransferError::Read(e) => LabError::io("read", src, e),
        TransferError::Write(e) => LabError::io("write", dst, e),
        TransferError::Unsupported(e) => LabError::Invalid(format!(
            "{method} cannot copy '{}' to '{}' here: {}",
            src.display(),
            dst.display(),
            crate::error::reason(&e)
        )),
    }
}

/// io_uring: `depth` slots, each reading a block then writing it, then reading the next.
fn uring(
    src: &File,
    dst: &File,
    bs: usize,
    depth: usize,
) -> Result<u64, (&'static str, io::Error)> {
    let mut ring = IoUring::new(depth as u32).map_err(|e| ("set up io_uring for", e))?;
    let mut bufs = vec![vec![0u8; bs]; depth];
    // Per slot: (offset, bytes read, bytes written, writing?)
    let mut slots: Vec<(u64, usize, usize, bool)> = vec![(0, 0, 0, false); depth];
    let (sfd, dfd) = (types::Fd(src.as_raw_fd()), types::Fd(dst.as_raw_fd()));
    let (mut next, mut in_flight, mut total, mut eof) = (0u64, 0usize, 0u64, false);
    let push =
        |ring: &mut IoUring, slot: usize, s: (u64, usize, usize, bool), buf: &mut Vec<u8>| {
            let (at, filled, written, writing) = s;
            let entry = if writing {
                // SAFETY: the buffer lives in `bufs` until this completes; the ring is drained
                // before the function returns.
                opcode::Write::new(
                    dfd,
                    unsafe { buf.as_ptr().add(written) },
                    (filled - written) as u32,
                )
                .offset(at + written as u64)
                .build()
            } else {
                opcode::Read::new(sfd, buf.as_mut_ptr(), bs as u32)
                    .offset(at)
                    .build()
            };
            // SAFETY: as above; one entry per slot fits the queue.
            unsafe {
                ring.submission()
                    .push(&entry.user_data(slot as u64))
                    .expect("room")
            };
        };
    for slot in 0..depth {
        slots[slot] = (next, 0, 0, false);
        push(&mut ring, slot, slots[slot], &mut bufs[slot]);
        next += bs as u64;
        in_flight += 1;
    }
    let mut failure = None;
    while in_flight > 0 {
        ring.submit_and_wait(1).map_err(|e| ("read", e))?;
        let done: Vec<(usize, i32)> = ring
            .completion()
            .map(|c| (c.user_data() as usize, c.result()))
            .collect();
        for (slot, res) in done {
            in_flight -= 1;
            let (at, filled, written, writing) = slots[slot];
            if res == -libc::EINTR || res == -libc::EAGAIN {
                push(&mut ring, slot, slots[slot], &mut bufs[slot]);
                in_flight += 1;
                continue;
            }
            if res < 0 {
                let op = if writing { "write" } else { "read" };
                failure.get_or_insert((op, io::Error::from_raw_os_error(-res)));
                continue;
            }
            let res = res as usize;
            let state = if writing {
                let written = written + res;
                if written < filled {
                    (at, filled, written, true)
                } else {
                    total += filled as u64;
                    if eof || failure.is_some() {
                        continue;
                    }
                    let s = (next, 0, 0, false);
                    next += bs as u64;
                    s
                }
            } else if res == 0 {
                eof = true;
                continue;
            } else {
                if res < bs {
                    // A regular file reads short only at its end.
                    eof = true;
                }
                (at, res, 0, true)
            };
            if failure.is_none() {
                slots[slot] = state;
                push(&mut ring, slot, state, &mut bufs[slot]);
                in_flight += 1;
            }
        }
    }
    match failure {
        Some(f) => Err(f),
        None => Ok(total),
    }
}

/// One method's line in the `--compare` table: medians over the runs.
#[derive(Debug, Clone)]
pub struct CompareRow {
    /// The method.
    pub method: DupMethod,
    /// Median usage over the runs, or why the method could not run here.
    pub outcome: Result<Usage, String>,
    /// Runs made.
    pub runs: usize,
}

/// Runs `exe dup SRC TMP --method M` for every method, `runs` times each, each in its own
/// process; checks every copy byte for byte; the table row holds the medians.
pub fn compare(
    exe: &Path,
    src: &Path,
    methods: &[DupMethod],
    runs: usize,
    block_size: Option<usize>,
    progress: &mut dyn FnMut(DupMethod, usize),
) -> Result<Vec<CompareRow>, LabError> {
    let dir = match src.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let scratch = tempfile::Builder::new()
        .prefix(".ringio-dup-")
        .tempdir_in(&dir)
        .map_err(|e| LabError::io("create a scratch directory in", &dir, e))?;
    let mut rows = Vec::new();
    for &method in methods {
        let dst = scratch.path().join(method.name());
        let mut usages = Vec::new();
        let mut failed = None;
        for run in 0..runs.max(1) {
            progress(method, run);
            let _ = std::fs::remove_file(&dst);
            let mut cmd = Command::new(exe);
            cmd.arg("dup")
                .arg(src)
                .arg(&dst)
                .args(["--method", method.name()]);
            if let Some(bs) = block_size {
                cmd.args(["--bs", &bs.to_string()]);
            }
            let done = child::run(&mut cmd).map_err(|e| LabError::io("run", exe, e))?;
            if !done.status.success() {
                failed = Some(done.stderr_text());
                break;
            }
            if let Some(why) = differs(src, &dst)? {
                failed = Some(format!("WRONG COPY: {why}"));
                break;
            }
            usages.push(done.usage);
        }
        let outcome = match failed {
            Some(why) => Err(why),
            None => Ok(median_usage(&usages)),
        };
        rows.push(CompareRow {
            method,
            outcome,
            runs: usages.len(),
        });
    }
    Ok(rows)
}

/// `Some(what)` when `dst` is not a byte-for-byte copy of `src`.
fn differs(src: &Path, dst: &Path) -> Result<Option<String>, LabError> {
    let opts = ringio_copy::verify::VerifyOptions::content_only();
    let mut first = None;
    let report = ringio_copy::verify::verify(src, dst, &opts, &mut |d| {
        first.get_or_insert_with(|| d.to_string());
    })
    .map_err(|e| LabError::Invalid(e.to_string()))?;
    Ok((!report.is_same()).then(|| first.unwrap_or_default()))
}

/// The median of each column on its own.
fn median_usage(usages: &[Usage]) -> Usage {
    fn med<T: Copy + PartialOrd>(mut v: Vec<T>) -> T {
        v.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
        v[v.len() / 2]
    }
    let col = |f: &dyn Fn(&Usage) -> u64| med(usages.iter().map(f).collect());
    let dur = |f: &dyn Fn(&Usage) -> std::time::Duration| med(usages.iter().map(f).collect());
    Usage {
        wall: dur(&|u| u.wall),
        user: dur(&|u| u.user),
        sys: dur(&|u| u.sys),
        max_rss_kib: col(&|u| u.max_rss_kib),
        minor_faults: col(&|u| u.minor_faults),
        major_faults: col(&|u| u.major_faults),
        voluntary_switches: col(&|u| u.voluntary_switches),
        involuntary_switches: col(&|u| u.involuntary_switches),
        rss_floor_kib: col(&|u| u.rss_floor_kib),
    }
}
