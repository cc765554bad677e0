//! `--atomic` onto an existing file. cp without `--atomic` writes into the old inode, so the
//! file keeps its permission bits, owner and group, ACL and other extended attributes, less
//! what the kernel itself drops on a write. `--atomic` renames a new inode over the name, so
//! each of those is read from the old file before its temporary is made ([`Replaced::read`])
//! and given to the temporary once its content is complete, before the rename
//! ([`Replaced::keep`]). What `-p`/`--preserve` asks for is applied after that, from the
//! source, as on any existing file: the result is the one cp gives without `--atomic`.
//!
//! Where an attribute cannot be kept (a user other than root cannot give a file to another
//! owner), the copy fails: its temporary is removed and the old file stays as it was, rather
//! than quietly become someone else's or lose an ACL.

use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;

use rustix::fs::Access;
use rustix::io::Errno;

use crate::ctx::Ctx;
use crate::error::{CopyError, Op};
use crate::refusal::Refusal;
use crate::sys::{self, Kind, Stat};
use crate::xattr::{self, Subject};

/// Permission bits a temporary that replaces an existing file is created with (the umask
/// applies): no one else's until the old file's are given to it, so nobody opens the new
/// content through bits the old file did not grant.
pub(crate) const TEMP_MODE: u32 = 0o600;

/// The access ACL's attribute.
const ACCESS_ACL: &CStr = c"system.posix_acl_access";

/// Attributes the old file does not keep through a write, so neither does its replacement:
/// file capabilities (the kernel removes them on every write), and IMA's and EVM's digests,
/// which the kernel computes for the new content itself.
const DROPPED_BY_A_WRITE: &[&[u8]] = &[b"security.capability", b"security.ima", b"security.evm"];

/// The file an `--atomic` copy replaces, as read when its temporary is made.
pub(crate) struct Replaced {
    stat: Stat,
    /// Its extended attributes that this process can read (trusted.* only as root), less
    /// [`DROPPED_BY_A_WRITE`].
    xattrs: Vec<(CString, Vec<u8>)>,
}

impl Replaced {
    /// Reads the file `name` in `dir` through a descriptor opened on it with
    /// O_PATH|O_NOFOLLOW: no second lookup by name, no read permission needed, and a running
    /// program or a FIFO swapped in is opened without effect. `None` when it is gone (the copy
    /// then makes a new file). Anything but a regular file is refused, as cp's overwrite rules
    /// refuse it. `path` names the destination.
    ///
    /// cp without `--atomic` writes into the old file, so it needs write permission there: a
    /// file this process may not write is refused as cp refuses it ("cannot create regular
    /// file"), though the directory would let a rename replace it. Under `force` (`-f`) cp
    /// removes such a file and makes a new one, so `None` then too: the copy is a new file,
    /// with nothing of the old one's to keep.
    pub(crate) fn read(
        dir: BorrowedFd<'_>,
        name: &CStr,
        force: bool,
        path: &dyn Fn() -> PathBuf,
    ) -> Result<Option<Replaced>, CopyError> {
        let fd = match sys::openat(dir, name, libc::O_PATH | libc::O_NOFOLLOW, 0) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(CopyError::io(Op::Stat, path(), e)),
        };
        let stat = sys::fstatx(fd.as_fd()).map_err(|e| CopyError::io(Op::Stat, path(), e))?;
        if stat.kind() != Kind::File {
            return Err(Refusal::AtomicNotRegular.of(path(), path()).into());
        }
        if let Err(e) = writable(fd.as_fd()) {
            if force {
                return Ok(None);
            }
            return Err(CopyError::io(Op::Create, path(), std::io::Error::from(e)));
        }
        let mut xattrs = xattr::read_all(Subject::PathFd(fd.as_fd()))
            .map_err(|e| CopyError::io(Op::KeepXattr, path(), e))?;
        xattrs.retain(|(name, _)| !DROPPED_BY_A_WRITE.contains(&name.to_bytes()));
        Ok(Some(Replaced { stat, xattrs }))
    }

    /// Gives the complete temporary `temp` what a write into the old file would have left
    /// that file: its owner and group (unless root takes the source's under
    /// `--preserve=ownership`), its extended attributes, ACL included, and its permission bits
    /// (unless `--preserve=mode` takes the source's), setuid and setgid dropped where a write
    /// would drop them. Owner first: a chown clears setuid. `path` names the destination.
    pub(crate) fn keep(
        &self,
        ctx: &Ctx<'_>,
        temp: BorrowedFd<'_>,
        path: &dyn Fn() -> PathBuf,
    ) -> Result<(), CopyError> {
        let preserve = ctx.plan.preserve;
        let old = &self.stat;
        // Root under --preserve=ownership sets both from the source next. Anyone else can set
        // at most the group from it, so the owner must be the old file's either way.
        if !(preserve.ownership && ctx.is_root) {
            sys::fchown(temp, old.uid, old.gid)
                .map_err(|e| CopyError::io(Op::KeepOwner, path(), e))?;
        }
        let xattr_error = |e| CopyError::io(Op::KeepXattr, path(), e);
        xattr::set_all(Subject::Fd(temp), &self.xattrs).map_err(xattr_error)?;
        let acl = ACCESS_ACL.to_bytes();
        if !self.xattrs.iter().any(|(name, _)| name.to_bytes() == acl) {
            // The temporary may have inherited one from its directory's default ACL.
            match rustix::fs::fremovexattr(temp, ACCESS_ACL) {
                Ok(()) | Err(Errno::NODATA | Errno::OPNOTSUPP) => {}
                Err(e) => return Err(xattr_error(e.into())),
            }
        }
        if preserve.mode {
            return Ok(());
        }
        // Also where TEMP_MODE is the old mode: a default ACL of the directory, not the umask,
        // decided the temporary's.
        let mode_error = |e| CopyError::io(Op::KeepMode, path(), e);
        sys::fchmod(temp, old.perm()).map_err(mode_error)?;
        if old.perm() & (libc::S_ISUID | libc::S_ISGID) != 0 {
            // A write into the old file would have dropped setuid, and setgid with group
            // execute, unless the writer holds CAP_FSETID. A truncation to the same length
            // has the kernel make that decision for the temporary, by the same rule.
            let size = sys::fstatx(temp).map_err(mode_error)?.size;
            rustix::fs::ftruncate(temp, size).map_err(|e| mode_error(e.into()))?;
        }
        Ok(())
    }
}

/// Whether this process may write the file open as `fd` (O_PATH), as an open for writing
/// would decide, with the effective IDs. A running program counts as writable: replacing one
/// is what `--atomic` is for, and the rename does not disturb it.
fn writable(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    match sys::eaccess_fd(fd, Access::WRITE_OK) {
        Ok(()) | Err(Errno::TXTBSY) => Ok(()),
        // A kernel without faccessat2 (before 5.8): the open that would have told is not
        // made, so nothing is refused on its account.
        Err(Errno::NOSYS | Errno::INVAL) => Ok(()),
        Err(e) => Err(e),
    }
}
