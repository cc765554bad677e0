//! `ringio dup`: duplicate one file by a chosen method, and `--compare`, which runs every
//! method in a child process of its own and reports what each cost (the sendfile report's
//! columns, from wait4's rusage).

use ringio_copy::quote::quote;
use std::fs::{File, Metadata};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use io_uring::{opcode, types, IoUring};
use ringio_copy::transfer::{Method, Transfer, TransferError};

use crate::error::LabError;
use ringio_base::child::{self, Usage};

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

/// Copies `src` to `dst` (created or truncated) with `method`. `dst` is truncated only after
/// it proved to be another file than `src` ([`LabError::SameFile`] otherwise, with both left
/// as they were). A failed copy removes `dst` (or empties it, when the name is a symlink to
/// it), so nothing half-written is left to look like a copy.
pub fn dup(src: &Path, dst: &Path, method: DupMethod, block_size: usize) -> Result<Dup, LabError> {
    let input = File::open(src).map_err(|e| LabError::io("open", src, e))?;
    let stat = input.metadata().map_err(|e| LabError::io("stat", src, e))?;
    if stat.is_dir() {
        // Before DST is opened: its reads would fail only after DST was emptied.
        let is_a_directory = io::Error::from_raw_os_error(libc::EISDIR);
        return Err(LabError::io("read", src, is_a_directory));
    }
    refuse_same_file(src, &stat, dst)?;
    let output = open_destination(dst, &stat)?;
    let out_stat = output
        .metadata()
        .map_err(|e| LabError::io("stat", dst, e))?;
    // The check that counts: the descriptors' own inodes, so no rename or symlink swapped in
    // since the path check can make the truncation below hit the source.
    if same_inode(&stat, &out_stat) {
        return Err(same_file(src, dst));
    }
    if out_stat.file_type().is_file() {
        output
            .set_len(0)
            .map_err(|e| LabError::io("truncate", dst, e))?;
    }
    ringio_base::hooks::resize_after_stat(src);
    let result = dup_into(src, &input, &stat, dst, &output, method, block_size);
    if result.is_err() {
        discard(dst, &output, &out_stat);
    }
    result
}

/// Refuses, before any measurement or write, a `dst` that names `src`'s file by any spelling
/// (the same name, a hard link, a symlink or a chain of them, a `/proc/self/fd` link).
/// `--compare` asks this before running every method; [`dup`] asks it again through its open
/// descriptors.
pub fn check_distinct(src: &Path, dst: &Path) -> Result<(), LabError> {
    let stat = std::fs::metadata(src).map_err(|e| LabError::io("stat", src, e))?;
    refuse_same_file(src, &stat, dst)
}

/// The path check, which names the files even where `dst` could not be opened for writing (a
/// read-only file): `dst` as it resolves now, if it exists.
fn refuse_same_file(src: &Path, src_stat: &Metadata, dst: &Path) -> Result<(), LabError> {
    match std::fs::metadata(dst) {
        Ok(d) if same_inode(src_stat, &d) => Err(same_file(src, dst)),
        _ => Ok(()),
    }
}

fn same_inode(a: &Metadata, b: &Metadata) -> bool {
    (a.dev(), a.ino()) == (b.dev(), b.ino())
}

fn same_file(src: &Path, dst: &Path) -> LabError {
    LabError::SameFile {
        src: src.to_path_buf(),
        dst: dst.to_path_buf(),
    }
}

/// `dst` for writing, created if missing, but not truncated: that waits until it proved to be
/// another file than the source. A new `dst` gets the source's permission bits less the umask,
/// as cp gives a new file (never more than the source allows: a private file stays private;
/// setuid, setgid and sticky are dropped); an existing one keeps its mode, as with cp.
fn open_destination(dst: &Path, src: &Metadata) -> Result<File, LabError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(src.mode() & 0o777)
        .open(dst)
        .map_err(|e| LabError::io("create", dst, e))
}

/// After a failed copy: the name goes if it still leads straight to the file written (not
/// through a symlink, not replaced meanwhile); a file reached otherwise is emptied instead.
fn discard(dst: &Path, output: &File, out_stat: &Metadata) {
    if !out_stat.file_type().is_file() {
        return;
    }
    match std::fs::symlink_metadata(dst) {
        Ok(named) if same_inode(&named, out_stat) => {
            let _ = std::fs::remove_file(dst);
        }
        _ => {
            let _ = output.set_len(0);
        }
    }
}

fn dup_into(
    src: &Path,
    input: &File,
    stat: &Metadata,
    dst: &Path,
    output: &File,
    method: DupMethod,
    block_size: usize,
) -> Result<Dup, LabError> {
    let bs = block_size.max(1);
    let via = |m: Method| -> Result<u64, LabError> {
        Transfer::new(m, bs)
            .copy(input.as_fd(), output.as_fd(), 0, u64::MAX)
            .map_err(|e| transfer_error(e, src, dst, method))
    };
    let cloned = || -> Result<u64, LabError> {
        // A clone is the whole file at one instant: its size is what the copy holds.
        Ok(output
            .metadata()
            .map_err(|e| LabError::io("stat", dst, e))?
            .len())
    };
    let (bytes, used) = match method {
        DupMethod::Rw => (via(Method::ReadWrite)?, method),
        DupMethod::Sendfile => (via(Method::Sendfile)?, method),
        DupMethod::Splice => (via(Method::Splice)?, method),
        DupMethod::CopyRange => (via(Method::CopyRange)?, method),
        DupMethod::Bigbuf => {
            // The size is only a first guess at the buffer: the read goes on to end of file.
            let mut all = Vec::with_capacity(stat.len() as usize);
            (&*input)
                .read_to_end(&mut all)
                .map_err(|e| LabError::io("read", src, e))?;
            (&*output)
                .write_all(&all)
                .map_err(|e| LabError::io("write", dst, e))?;
            (all.len() as u64, method)
        }
        DupMethod::Uring => {
            // A file without a size (/proc, /sys) is read in order: pseudo-files regenerate
            // everything before an offset they did not just read up to, so blocks in flight
            // at scattered offsets would cost time quadratic in the file's length.
            let sized = stat.file_type().is_file() && stat.len() > 0;
            let depth = if sized { 8 } else { 1 };
            let bytes = uring(input, output, bs, depth).map_err(|(op, e)| {
                let path = if op == "write" { dst } else { src };
                LabError::io(op, path, e)
            })?;
            (bytes, method)
        }
        DupMethod::Reflink => {
            rustix::fs::ioctl_ficlone(output, input).map_err(|e| {
                LabError::Invalid(format!(
                    "cannot clone {} to {}: {} (reflinks need btrfs, xfs or the like, both files on one filesystem)",
                    quote(&src),
                    quote(&dst),
                    crate::error::reason(&e.into())
                ))
            })?;
            return Ok(Dup {
                bytes: cloned()?,
                used: method,
            });
        }
        DupMethod::Auto => {
            if rustix::fs::ioctl_ficlone(output, input).is_ok() {
                return Ok(Dup {
                    bytes: cloned()?,
                    used: DupMethod::Reflink,
                });
            }
            let mut done = None;
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
                    Ok(bytes) => {
                        done = Some((bytes, used));
                        break;
                    }
                    Err(TransferError::Unsupported(_)) => continue,
                    Err(e) => return Err(transfer_error(e, src, dst, used)),
                }
            }
            done.expect("read/write is always supported")
        }
    };
    // Every method above read to end of file; a regular file with a size must have held just
    // that. (A size of 0 says nothing: /proc and /sys files, and pipes, have none.)
    let stated = stat.len();
    if stat.file_type().is_file() && stated > 0 && bytes != stated {
        return Err(LabError::Changed {
            path: src.to_path_buf(),
            doing: "copied",
            stated,
            read: bytes,
        });
    }
    Ok(Dup { bytes, used })
}

fn transfer_error(e: TransferError, src: &Path, dst: &Path, method: DupMethod) -> LabError {
    match e {
        TransferError::Read(e) => LabError::io("read", src, e),
        TransferError::Write(e) => LabError::io("write", dst, e),
        TransferError::Unsupported(e) => LabError::Invalid(format!(
            "{method} cannot copy {} to {} here: {}",
            quote(&src),
            quote(&dst),
            crate::error::reason(&e)
        )),
    }
}

/// io_uring: `depth` slots, each reading a block then writing it, then reading the next. A
/// short read is not the end of the file (pseudo-files such as /proc's return a page or a
/// record at a time): the slot reads the rest of its block, and only a read of 0 bytes ends
/// the file.
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
                // SAFETY: as above; `filled < bs`, so the rest of the block is in the buffer.
                opcode::Read::new(
                    sfd,
                    unsafe { buf.as_mut_ptr().add(filled) },
                    (bs - filled) as u32,
                )
                .offset(at + filled as u64)
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
                    // Blocks are handed out in order, so once a read found the end, every
                    // block before it is already in some slot.
                    if eof || failure.is_some() {
                        continue;
                    }
                    let s = (next, 0, 0, false);
                    next += bs as u64;
                    s
                }
            } else if res == 0 {
                eof = true;
                if filled == 0 {
                    continue;
                }
                (at, filled, 0, true)
            } else if filled + res < bs {
                (at, filled + res, 0, false)
            } else {
                (at, bs, 0, true)
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
    /// The fastest and the slowest run's wall time: the spread a median hides.
    pub wall_range: (std::time::Duration, std::time::Duration),
}

impl CompareRow {
    /// True when this method's slowest run beat every other working method's fastest: faster
    /// beyond the noise of these runs.
    pub fn clearly_fastest(&self, rows: &[CompareRow]) -> bool {
        self.outcome.is_ok()
            && rows
                .iter()
                .filter(|r| r.method != self.method && r.outcome.is_ok())
                .all(|r| self.wall_range.1 < r.wall_range.0)
    }
}

/// Runs `exe dup SRC TMP --method M` for every method, `runs` rounds, each run in its own
/// process, the methods taking turns within each round (so a slow moment of the machine is
/// shared, not one method's); checks every copy byte for byte; the table row holds the medians
/// and the wall-time range.
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
    // Private: the copies in it are of a file others may not be allowed to read.
    let scratch = tempfile::Builder::new()
        .prefix(".ringio-dup-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in(&dir)
        .map_err(|e| LabError::io("create a scratch directory in", &dir, e))?;
    let mut usages: Vec<Vec<Usage>> = methods.iter().map(|_| Vec::new()).collect();
    let mut failed: Vec<Option<String>> = methods.iter().map(|_| None).collect();
    for run in 0..runs.max(1) {
        for (i, &method) in methods.iter().enumerate() {
            if failed[i].is_some() {
                continue;
            }
            progress(method, run);
            let dst = scratch.path().join(method.name());
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
                failed[i] = Some(done.stderr_text());
                continue;
            }
            if let Some(why) = differs(src, &dst)? {
                failed[i] = Some(format!("WRONG COPY: {why}"));
                continue;
            }
            let _ = std::fs::remove_file(&dst);
            usages[i].push(done.usage);
        }
    }
    let rows = methods
        .iter()
        .zip(usages)
        .zip(failed)
        .map(|((&method, usages), failed)| {
            let walls = usages.iter().map(|u| u.wall);
            let range = (
                walls.clone().min().unwrap_or_default(),
                walls.max().unwrap_or_default(),
            );
            CompareRow {
                method,
                runs: usages.len(),
                outcome: match failed {
                    Some(why) => Err(why),
                    None => Ok(median_usage(&usages)),
                },
                wall_range: range,
            }
        })
        .collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// `--compare` puts its per-method copies in a scratch directory that only the owner can
    /// enter (the copies are of a file others may not be allowed to read), whatever the
    /// umask. The "ringio" run here is a script that records the mode of the directory it is
    /// told to copy into, then copies.
    #[test]
    fn compare_copies_go_to_a_private_scratch_directory() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::write(&src, b"secret").unwrap();
        std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o600)).unwrap();
        let log = dir.path().join("log");
        let exe = dir.path().join("fake-ringio");
        std::fs::write(
            &exe,
            format!(
                "#!/bin/sh\nstat -c %a \"$(dirname \"$3\")\" >> '{}'\ncat \"$2\" > \"$3\"\n",
                log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let rows = compare(
            &exe,
            &src,
            &[DupMethod::Rw, DupMethod::Uring],
            1,
            None,
            &mut |_, _| {},
        )
        .unwrap();
        assert!(rows.iter().all(|r| r.outcome.is_ok()), "{rows:?}");
        let modes = std::fs::read_to_string(&log).unwrap();
        assert_eq!(modes, "700\n700\n", "the scratch directory's mode, per run");
    }
}
