//! `--fake-super`: what only root may set (owner, group, special file types, device numbers,
//! setuid/setgid/sticky, modes that shut the owner out) is kept in the extended attribute
//! `user.rsync.%stat` (`MODE MAJOR,MINOR UID:GID`, the mode in octal with its type), as rsync
//! keeps it, and read back from there on the sending side. The file itself gets what any user
//! may give it: devices and FIFOs become empty files, the owner keeps read and write access.

use std::ffi::CStr;
use std::io;

use crate::sys::{Kind, Stat};
use crate::xattr::{self, Subject};

/// rsync's name for the attribute.
pub(super) const STAT: &CStr = c"user.rsync.%stat";

/// The entry as `--fake-super` sees it: `stat`, with what its `user.rsync.%stat` says.
pub(super) fn read(target: Subject<'_>, stat: &mut Stat) {
    if stat.kind() == Kind::Symlink {
        return;
    }
    let Ok(Some(value)) = xattr::get_one(target, STAT) else {
        return;
    };
    if let Some((mode, rdev, uid, gid)) = parse(&value) {
        stat.mode = mode;
        stat.rdev = rdev;
        stat.uid = uid;
        stat.gid = gid;
    }
}

/// `100644 0,0 5000:5002` → (mode, rdev, uid, gid).
fn parse(value: &[u8]) -> Option<(u32, u64, u32, u32)> {
    let text = std::str::from_utf8(value).ok()?;
    let mut parts = text.split_whitespace();
    let mode = u32::from_str_radix(parts.next()?, 8).ok()?;
    let (major, minor) = parts.next()?.split_once(',')?;
    let (uid, gid) = parts.next()?.split_once(':')?;
    let rdev = rustix::fs::makedev(major.parse().ok()?, minor.parse().ok()?);
    Some((mode, rdev, uid.parse().ok()?, gid.parse().ok()?))
}

/// The attribute's text for `want`.
fn format(want: &Stat) -> String {
    format!(
        "{:o} {},{} {}:{}",
        want.mode,
        rustix::fs::major(want.rdev),
        rustix::fs::minor(want.rdev),
        want.uid,
        want.gid
    )
}

/// The permission bits the file itself gets for a wanted mode: no setuid, setgid or sticky,
/// and the owner's read and write (and search, for a directory).
pub(super) fn real_perm(want: &Stat) -> u32 {
    let owner = if want.kind() == Kind::Dir {
        0o700
    } else {
        0o600
    };
    (want.perm() & 0o777) | owner
}

/// Records `want` on the entry whose real stat is `real`: the attribute is set where the two
/// differ in what it holds, and removed where they agree.
pub(super) fn write(target: Subject<'_>, want: &Stat, real: &Stat) -> io::Result<()> {
    let same = want.mode == real.mode
        && want.uid == real.uid
        && want.gid == real.gid
        && (want.kind() != Kind::Special || want.rdev == real.rdev);
    if same {
        xattr::remove_one(target, STAT)
    } else {
        xattr::set_one(target, STAT, format(want).as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attribute_reads_as_rsync_writes_it() {
        assert_eq!(
            parse(b"100644 0,0 5000:5002"),
            Some((0o100644, 0, 5000, 5002))
        );
        let (mode, rdev, _, _) = parse(b"20644 4,64 0:0").unwrap();
        assert_eq!(mode, 0o20644);
        assert_eq!((rustix::fs::major(rdev), rustix::fs::minor(rdev)), (4, 64));
        assert_eq!(parse(b"garbage"), None);
        let want = Stat {
            mode: 0o100644,
            size: 0,
            uid: 5000,
            gid: 5002,
            nlink: 1,
            ino: 1,
            dev: 1,
            rdev: 0,
            blocks: 0,
            atime: (0, 0),
            mtime: (0, 0),
        };
        assert_eq!(format(&want), "100644 0,0 5000:5002");
        assert_eq!(
            real_perm(&Stat {
                mode: 0o104000,
                ..want
            }),
            0o600
        );
    }
}
