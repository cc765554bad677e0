//! Thin, safe wrappers over the system calls the pipeline makes, relative to directory fds.
//! They go through rustix; the few that rustix lacks (cachestat, faccessat2 on a descriptor)
//! and two glibc settings (malloc's arena count, the page size) are libc calls, each made once,
//! here.

use std::ffi::CStr;
use std::io::{self, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use rustix::buffer::spare_capacity;
use rustix::fs::{
    Access, AtFlags, FileType, Gid, Mode, OFlags, Statx, StatxFlags, Timespec, Timestamps, Uid,
};
use rustix::io::{Errno, ReadWriteFlags};

pub(crate) use ringio_base::io::pread;

/// The file types the walk distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link.
    Symlink,
    /// FIFO, socket, character or block device.
    Special,
}

/// The part of statx the copy needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stat {
    /// Type and permission bits (`st_mode`).
    pub mode: u32,
    /// Size in bytes.
    pub size: u64,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Hard-link count.
    pub nlink: u32,
    /// Inode number.
    pub ino: u64,
    /// Device holding the inode.
    pub dev: u64,
    /// Device number, for device nodes.
    pub rdev: u64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    /// Access time (seconds, nanoseconds).
    pub atime: (i64, u32),
    /// Modification time (seconds, nanoseconds).
    pub mtime: (i64, u32),
}

impl Stat {
    /// The file type.
    pub fn kind(&self) -> Kind {
        match self.mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Symlink,
            _ => Kind::Special,
        }
    }

    /// Permission bits, including setuid, setgid and sticky.
    pub fn perm(&self) -> u32 {
        self.mode & 0o7777
    }

    /// The same file: the same inode on the same device, of the same type.
    pub fn same_file(&self, other: &Stat) -> bool {
        self.dev == other.dev && self.ino == other.ino && self.kind() == other.kind()
    }

    /// Fewer bytes allocated than the size: the file has holes (as cp's heuristic).
    pub fn looks_sparse(&self) -> bool {
        self.kind() == Kind::File && self.blocks.saturating_mul(512) < self.size
    }
}

impl From<&Statx> for Stat {
    fn from(s: &Statx) -> Self {
        Stat {
            mode: u32::from(s.stx_mode),
            size: s.stx_size,
            uid: s.stx_uid,
            gid: s.stx_gid,
            nlink: s.stx_nlink,
            ino: s.stx_ino,
            dev: rustix::fs::makedev(s.stx_dev_major, s.stx_dev_minor),
            rdev: rustix::fs::makedev(s.stx_rdev_major, s.stx_rdev_minor),
            blocks: s.stx_blocks,
            atime: (s.stx_atime.tv_sec, s.stx_atime.tv_nsec),
            mtime: (s.stx_mtime.tv_sec, s.stx_mtime.tv_nsec),
        }
    }
}

/// The statx mask the copy asks for.
pub const STATX_MASK: StatxFlags = StatxFlags::BASIC_STATS;

/// statx relative to `dir`; `follow` decides whether a final symlink is followed.
pub fn statx_at(dir: BorrowedFd<'_>, name: &CStr, follow: bool) -> io::Result<Stat> {
    let flags = if follow {
        AtFlags::empty()
    } else {
        AtFlags::SYMLINK_NOFOLLOW
    };
    statx(dir, name, flags)
}

/// statx of an open descriptor.
pub fn fstatx(fd: BorrowedFd<'_>) -> io::Result<Stat> {
    statx(fd, c"", AtFlags::EMPTY_PATH)
}

fn statx(dir: BorrowedFd<'_>, name: &CStr, flags: AtFlags) -> io::Result<Stat> {
    let flags = flags | AtFlags::STATX_SYNC_AS_STAT;
    rustix::fs::statx(dir, name, flags, STATX_MASK)
        .map(|s| Stat::from(&s))
        .map_err(io::Error::from)
}

/// openat returning an owned descriptor; O_CLOEXEC is always added. `flags` are libc's
/// `O_*` bits, passed to the kernel as they are.
pub fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    open(dir, name, OFlags::from_bits_retain(flags as u32), mode)
}

fn open(dir: BorrowedFd<'_>, name: &CStr, flags: OFlags, mode: u32) -> io::Result<OwnedFd> {
    let mode = Mode::from_bits_retain(mode);
    rustix::fs::openat(dir, name, flags | OFlags::CLOEXEC, mode).map_err(io::Error::from)
}

/// Opens a directory relative to `dir` without following a final symlink.
pub fn open_dir(dir: BorrowedFd<'_>, name: &CStr, follow: bool) -> io::Result<OwnedFd> {
    let nofollow = if follow {
        OFlags::empty()
    } else {
        OFlags::NOFOLLOW
    };
    open(dir, name, OFlags::RDONLY | OFlags::DIRECTORY | nofollow, 0)
}

/// mkdirat.
pub fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    rustix::fs::mkdirat(dir, name, Mode::from_bits_retain(mode)).map_err(io::Error::from)
}

/// unlinkat (files, symlinks, special files).
pub fn unlinkat(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    rustix::fs::unlinkat(dir, name, AtFlags::empty()).map_err(io::Error::from)
}

/// readlinkat into a fresh buffer sized from the link's size (grown if the link changed).
pub fn readlinkat(dir: BorrowedFd<'_>, name: &CStr, size_hint: u64) -> io::Result<Vec<u8>> {
    let mut cap = (size_hint as usize).clamp(64, 1 << 20) + 1;
    loop {
        let mut buf = Vec::with_capacity(cap);
        let room = buf.capacity();
        let n = rustix::fs::readlinkat_raw(dir, name, spare_capacity(&mut buf))?;
        if n < room {
            return Ok(buf);
        }
        cap = room * 2;
    }
}

/// symlinkat.
pub fn symlinkat(target: &CStr, dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    rustix::fs::symlinkat(target, dir, name).map_err(io::Error::from)
}

/// mknodat (fifos, sockets, devices); `mode` holds the type bits and the permissions.
pub fn mknodat(dir: BorrowedFd<'_>, name: &CStr, mode: u32, rdev: u64) -> io::Result<()> {
    let kind = match FileType::from_raw_mode(mode) {
        // No type bits: a regular file, as mknod(2) takes them.
        FileType::Unknown if mode & libc::S_IFMT == 0 => FileType::RegularFile,
        kind => kind,
    };
    rustix::fs::mknodat(dir, name, kind, Mode::from_raw_mode(mode), rdev).map_err(io::Error::from)
}

/// An owner and group as chown(2) takes them: `u32::MAX` (-1) leaves that one alone.
fn owner(uid: u32, gid: u32) -> (Option<Uid>, Option<Gid>) {
    (
        (uid != u32::MAX).then(|| Uid::from_raw(uid)),
        (gid != u32::MAX).then(|| Gid::from_raw(gid)),
    )
}

/// fchownat without following symlinks (works on the link itself).
pub fn lchownat(dir: BorrowedFd<'_>, name: &CStr, uid: u32, gid: u32) -> io::Result<()> {
    let (uid, gid) = owner(uid, gid);
    rustix::fs::chownat(dir, name, uid, gid, AtFlags::SYMLINK_NOFOLLOW).map_err(io::Error::from)
}

/// fchown; `uid` of `u32::MAX` leaves the owner alone.
pub fn fchown(fd: BorrowedFd<'_>, uid: u32, gid: u32) -> io::Result<()> {
    let (uid, gid) = owner(uid, gid);
    rustix::fs::fchown(fd, uid, gid).map_err(io::Error::from)
}

/// fchmod.
pub fn fchmod(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    rustix::fs::fchmod(fd, Mode::from_bits_retain(mode)).map_err(io::Error::from)
}

/// fchmodat of `name` itself, never through a symlink put there after it was stat'ed:
/// fchmodat2 with AT_SYMLINK_NOFOLLOW (Linux 6.6; a symlink is refused with EOPNOTSUPP). A
/// kernel without fchmodat2 gets the plain call, which follows one.
pub fn fchmodat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fchmodat2 reads the NUL-terminated `name` and nothing else of our memory.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_fchmodat2,
            dir.as_raw_fd(),
            name.as_ptr(),
            mode,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::ENOSYS) {
        return Err(err);
    }
    rustix::fs::chmodat(dir, name, Mode::from_bits_retain(mode), AtFlags::empty())
        .map_err(io::Error::from)
}

fn timestamps(atime: (i64, u32), mtime: (i64, u32)) -> Timestamps {
    Timestamps {
        last_access: Timespec {
            tv_sec: atime.0,
            tv_nsec: i64::from(atime.1),
        },
        last_modification: Timespec {
            tv_sec: mtime.0,
            tv_nsec: i64::from(mtime.1),
        },
    }
}

/// futimens.
pub fn futimens(fd: BorrowedFd<'_>, atime: (i64, u32), mtime: (i64, u32)) -> io::Result<()> {
    rustix::fs::futimens(fd, &timestamps(atime, mtime)).map_err(io::Error::from)
}

/// utimensat on the entry itself (symlinks are not followed).
pub fn lutimensat(
    dir: BorrowedFd<'_>,
    name: &CStr,
    atime: (i64, u32),
    mtime: (i64, u32),
) -> io::Result<()> {
    let times = timestamps(atime, mtime);
    rustix::fs::utimensat(dir, name, &times, AtFlags::SYMLINK_NOFOLLOW).map_err(io::Error::from)
}

/// copy_file_range at explicit offsets. Returns bytes copied (0 at end of file).
pub fn copy_file_range(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    offset: u64,
    len: usize,
) -> io::Result<usize> {
    let (mut off_in, mut off_out) = (offset, offset);
    rustix::fs::copy_file_range(src, Some(&mut off_in), dst, Some(&mut off_out), len)
        .map_err(io::Error::from)
}

/// FICLONE: share all of `src`'s extents with `dst`.
pub fn ficlone(dst: BorrowedFd<'_>, src: BorrowedFd<'_>) -> io::Result<()> {
    rustix::fs::ioctl_ficlone(dst, src).map_err(io::Error::from)
}

/// Fills `buf` from `offset` with pread, unless end of file comes first; returns the bytes read.
pub fn pread_full(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        let n = pread(fd, &mut buf[got..], offset + got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(got)
}

/// preadv2 from offset 0 with RWF_NOWAIT: returns what the page cache holds, or EAGAIN when the
/// read would have to wait for the disk.
pub fn pread_nowait(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut iov = [IoSliceMut::new(buf)];
    loop {
        match rustix::io::preadv2(fd, &mut iov, offset, ReadWriteFlags::NOWAIT) {
            Err(Errno::INTR) => continue,
            done => return done.map_err(io::Error::from),
        }
    }
}

/// Writes back and drops `fd`'s cached pages (sync_file_range, then POSIX_FADV_DONTNEED; no
/// root needed), so that the next read of the file comes from the device.
pub fn drop_cached_pages(fd: BorrowedFd<'_>) -> io::Result<()> {
    let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
        | libc::SYNC_FILE_RANGE_WRITE
        | libc::SYNC_FILE_RANGE_WAIT_AFTER;
    // SAFETY: the descriptor is open for the duration of the call; no memory is passed.
    if unsafe { libc::sync_file_range(fd.as_raw_fd(), 0, 0, flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    rustix::fs::fadvise(fd, 0, None, rustix::fs::Advice::DontNeed).map_err(io::Error::from)
}

/// True when every page of the first `len` bytes of `fd` is in the page cache, by cachestat(2)
/// (Linux 6.5+); `None` where the kernel lacks it. One system call, whatever the size.
pub fn fully_cached(fd: BorrowedFd<'_>, len: u64) -> Option<bool> {
    /// `SYS_cachestat`: the same number on every architecture (the unified syscall table).
    const SYS_CACHESTAT: libc::c_long = 451;
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Cachestat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    if len == 0 {
        return Some(true);
    }
    let range = Range { off: 0, len };
    let mut stat = Cachestat::default();
    // rustix has no cachestat: a raw system call, made here alone.
    // SAFETY: cachestat reads `range` and writes one `struct cachestat` into `stat`; both are
    // laid out as the kernel's uapi structs.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd.as_raw_fd(),
            &range as *const Range,
            &mut stat as *mut Cachestat,
            0u32,
        )
    };
    if rc != 0 {
        return None;
    }
    let page = page_size();
    Some(stat.nr_cache >= len.div_ceil(page))
}

/// faccessat2(`fd`, "", `access`, AT_EMPTY_PATH | AT_EACCESS): whether the effective IDs may
/// access the file open as `fd` (an O_PATH descriptor will do), as an open would decide.
/// rustix's accessat refuses AT_EMPTY_PATH, which asks about the descriptor itself: a raw
/// system call, made here alone. ENOSYS before Linux 5.8.
pub fn eaccess_fd(fd: BorrowedFd<'_>, access: Access) -> Result<(), Errno> {
    // SAFETY: faccessat2 reads the NUL-terminated empty path and writes nothing; `fd` is
    // borrowed, so open for the length of the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_faccessat2,
            fd.as_raw_fd(),
            c"".as_ptr(),
            access.bits() as libc::c_int,
            libc::AT_EMPTY_PATH | libc::AT_EACCESS,
        )
    };
    if ret == 0 {
        return Ok(());
    }
    Err(Errno::from_io_error(&io::Error::last_os_error()).unwrap_or(Errno::IO))
}

/// pwrite of the whole buffer, resubmitting short writes.
pub fn pwrite_all(fd: BorrowedFd<'_>, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let n = match rustix::io::pwrite(fd, buf, offset) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(n) => n,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        buf = &buf[n..];
        offset += n as u64;
    }
    Ok(())
}

/// Closes a descriptor and reports the error close returns (lost writes on some filesystems).
pub fn close(fd: OwnedFd) -> io::Result<()> {
    let raw = std::os::fd::IntoRawFd::into_raw_fd(fd);
    // SAFETY: we owned `raw` and never use it again, whatever close returns.
    unsafe { rustix::io::try_close(raw) }.map_err(io::Error::from)
}

/// Reads directory entries with getdents64 into a caller-owned buffer, from where the
/// descriptor's last read stopped: a descriptor read once to its end yields nothing more, so a
/// directory read twice is read through a descriptor of its own (opened anew: a dup shares
/// the position).
pub fn read_dir_entries(
    dir: BorrowedFd<'_>,
    buf: &mut [MaybeUninit<u8>],
    mut each: impl FnMut(&CStr, Option<Kind>),
) -> io::Result<()> {
    let mut raw = rustix::fs::RawDir::new(dir, buf);
    while let Some(entry) = raw.next() {
        let entry = entry.map_err(io::Error::from)?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        use rustix::fs::FileType as T;
        let kind = match entry.file_type() {
            T::RegularFile => Some(Kind::File),
            T::Directory => Some(Kind::Dir),
            T::Symlink => Some(Kind::Symlink),
            T::Fifo | T::Socket | T::CharacterDevice | T::BlockDevice => Some(Kind::Special),
            T::Unknown => None,
        };
        each(name, kind);
    }
    Ok(())
}

/// The process umask, read once (umask has no getter; set it and put it back, before threads
/// start).
pub fn umask() -> u32 {
    let old = rustix::process::umask(Mode::from_bits_retain(0o022));
    rustix::process::umask(old);
    old.bits()
}

/// How many of the descriptor numbers below `limit` (RLIMIT_NOFILE, which bounds numbers,
/// not a count) this process has taken (inherited ones included), from /proc/self/fd; `None`
/// where that cannot be read. A descriptor inherited above the limit takes no number a new
/// one could have.
pub fn open_descriptors(limit: usize) -> Option<usize> {
    let mut taken = 0usize;
    for entry in std::fs::read_dir("/proc/self/fd").ok()? {
        let name = entry.ok()?.file_name();
        if name.to_str()?.parse::<usize>().ok()? < limit {
            taken += 1;
        }
    }
    // One of them is the descriptor that reads the directory.
    Some(taken.saturating_sub(1))
}

/// The tightest of the soft RLIMIT_AS and RLIMIT_DATA, in bytes; `None` when both are
/// unlimited.
pub fn memory_limit() -> Option<u64> {
    use rustix::process::{getrlimit, Resource};
    [Resource::As, Resource::Data]
        .into_iter()
        .filter_map(|r| getrlimit(r).current)
        .min()
}

/// Under an address-space limit, makes every thread allocate from one malloc arena: glibc
/// reserves 64 MiB of address space for each further arena (128 MiB while it aligns one), so a
/// few worker threads would take a `ulimit -v` of a couple of hundred MiB, and glibc aborts
/// when a thread then cannot allocate its thread-local storage.
pub fn share_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; M_ARENA_MAX takes any positive value.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// The page size, from libc: rustix's own reading of the auxiliary vector faults under
/// valgrind (GNU's copy-FMR test runs cp under it).
fn page_size() -> u64 {
    // SAFETY: sysconf only reads a value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).unwrap_or(4096)
}

/// The address space this process has mapped now (VmSize), in bytes; 0 when /proc is not there.
pub fn address_space_used() -> u64 {
    let page = page_size();
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |pages| pages.saturating_mul(page))
}

/// How a file that must be regular (a manifest, an MHL file, a `--files-from`, `--exclude-from`
/// or `--log-file`) is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Regular {
    /// Read it.
    Read,
    /// Append to it, creating it (0666 less the umask) where it is missing.
    Append,
}

/// Opens `name` (relative to `dir`) as a file that must be regular. O_NONBLOCK, so a FIFO or a
/// device in its place never blocks the open; a final symlink is followed only with `follow`
/// (a name the user gave; never one under a destination). Anything but a regular file is
/// refused ("not a regular file"), before a byte is read or written.
pub fn open_regular(
    dir: BorrowedFd<'_>,
    name: &CStr,
    follow: bool,
    how: Regular,
) -> io::Result<std::fs::File> {
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    flags |= match how {
        Regular::Read => libc::O_RDONLY,
        Regular::Append => libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT,
    };
    let fd = match openat(dir, name, flags, 0o666) {
        // O_NOFOLLOW met a symlink (or a FIFO with no reader, opened to write).
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) && !follow => {
            return Err(io::Error::other("a symbolic link, not followed here"))
        }
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            return Err(io::Error::other("not a regular file"))
        }
        other => other?,
    };
    if fstatx(std::os::fd::AsFd::as_fd(&fd))?.kind() != Kind::File {
        return Err(io::Error::other("not a regular file"));
    }
    // O_NONBLOCK stays: reads and writes of a regular file never see it.
    Ok(std::fs::File::from(fd))
}

/// [`open_regular`] of a path (relative to the working directory).
pub fn open_regular_path(
    path: &std::path::Path,
    follow: bool,
    how: Regular,
) -> io::Result<std::fs::File> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    open_regular(rustix::fs::CWD, &name, follow, how)
}

/// The whole content of a file that must be regular ([`open_regular`], read).
pub fn read_regular(dir: BorrowedFd<'_>, name: &CStr, follow: bool) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    io::Read::read_to_end(
        &mut open_regular(dir, name, follow, Regular::Read)?,
        &mut bytes,
    )?;
    Ok(bytes)
}

/// [`read_regular`] of a path the user gave (a final symlink followed: it is the user's).
pub fn read_regular_path(path: &std::path::Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    io::Read::read_to_end(
        &mut open_regular_path(path, true, Regular::Read)?,
        &mut bytes,
    )?;
    Ok(bytes)
}

/// A zeroed buffer of `len` bytes, or ENOMEM instead of aborting when memory is short.
pub fn try_zeroed(len: usize) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    buf.try_reserve_exact(len)
        .map_err(|_| io::Error::from_raw_os_error(libc::ENOMEM))?;
    buf.resize(len, 0);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::fd::AsFd;

    use super::*;

    /// fchmodat changes the entry itself, and refuses a symlink rather than change what it
    /// leads to (a file outside the tree, put there between a stat and the chmod).
    #[test]
    fn fchmodat_never_goes_through_a_symlink() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (target, file) = (dir.path().join("target"), dir.path().join("file"));
        std::fs::write(&target, "outside").unwrap();
        std::fs::write(&file, "inside").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("link")).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        let path = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
        let at = open_dir(rustix::fs::CWD, &path, true).unwrap();
        fchmodat(at.as_fd(), c"file", 0o600).unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode();
        assert_eq!(mode(&file) & 0o7777, 0o600);
        if fchmodat(at.as_fd(), c"link", 0o777).is_ok() {
            eprintln!("SKIPPED: no fchmodat2 (Linux 6.6+): the plain call follows a symlink");
            return;
        }
        assert_eq!(
            mode(&target) & 0o7777,
            0o644,
            "the symlink's target is left alone"
        );
    }

    #[test]
    fn cachestat_sees_a_file_leave_the_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&vec![7u8; 1 << 20]).unwrap();
        file.sync_all().unwrap();
        let len = 1 << 20;
        let Some(cached) = fully_cached(file.as_fd(), len) else {
            eprintln!("SKIPPED: no cachestat(2) in this kernel (Linux 6.5+)");
            return;
        };
        assert!(cached, "a file just written is in the page cache");
        // Its pages are clean after the fsync: they leave the page cache.
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        assert_eq!(fully_cached(file.as_fd(), len), Some(false));
        assert_eq!(fully_cached(file.as_fd(), 0), Some(true));
    }
}
