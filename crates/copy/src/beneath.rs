//! Directories reached below a root descriptor one component at a time, never following a
//! symlink: the trees a run writes under (DEST, a `--backup-dir`, a `-T` directory) are opened
//! once, and everything below them is created, replaced and removed relative to descriptors
//! opened from there with O_NOFOLLOW, never through a joined path.

use std::ffi::{CStr, CString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use rustix::fs::AtFlags;

use crate::sys::{self, Kind};

/// How [`open_dirs`] walks a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Walk {
    /// Only what is there, and no symlink followed: one in the way fails the walk.
    Existing,
    /// Missing directories are made; no symlink followed (one in the way fails the walk).
    Make,
    /// Missing directories are made, and whatever else stands where one is needed (a symlink,
    /// a file) is removed and a directory made in its place, as rsync makes a backup's path.
    Replace,
    /// The path as the user names it: symlinks followed; missing directories made when true.
    Follow(bool),
}

/// Opens the directory `rel` below `root`, component by component, as `how` says. An absolute
/// `rel` starts at `/`; `..` is refused unless the walk follows the user's path.
pub(crate) fn open_dirs(root: BorrowedFd<'_>, rel: &Path, how: Walk) -> io::Result<OwnedFd> {
    if how == Walk::Existing && rel.is_relative() {
        if let Some(fd) = open_at_once(root, rel) {
            return Ok(fd);
        }
    }
    let mut at = sys::open_dir(root, c".", false)?;
    for part in rel.components() {
        let name = match part {
            Component::RootDir => {
                at = sys::open_dir(rustix::fs::CWD, c"/", true)?;
                continue;
            }
            Component::CurDir => continue,
            Component::ParentDir if matches!(how, Walk::Follow(_)) => c"..".to_owned(),
            Component::ParentDir | Component::Prefix(_) => {
                return Err(io::Error::from_raw_os_error(libc::EXDEV));
            }
            Component::Normal(n) => CString::new(n.as_bytes())
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?,
        };
        at = step(at.as_fd(), &name, how)?;
    }
    Ok(at)
}

/// [`Walk::Existing`] in one openat2 (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS): `None` where it
/// refuses for any reason (a symlink or `..` on the way, a path past PATH_MAX, a kernel
/// without openat2), and the walk by components then finds, or names, what is in the way.
fn open_at_once(root: BorrowedFd<'_>, rel: &Path) -> Option<OwnedFd> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    if rel.as_os_str().is_empty() {
        return None;
    }
    let how = ResolveFlags::NO_SYMLINKS | ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    rustix::fs::openat2(root, rel, flags, Mode::empty(), how).ok()
}

/// One component of [`open_dirs`].
fn step(dir: BorrowedFd<'_>, name: &CStr, how: Walk) -> io::Result<OwnedFd> {
    let follow = matches!(how, Walk::Follow(_));
    // A symlink not followed is named as O_NOFOLLOW names it (ELOOP), not "Not a directory".
    let said = |e: io::Error| match e.raw_os_error() {
        Some(libc::ENOTDIR)
            if !follow
                && sys::statx_at(dir, name, false).is_ok_and(|s| s.kind() == Kind::Symlink) =>
        {
            io::Error::from_raw_os_error(libc::ELOOP)
        }
        _ => e,
    };
    match sys::open_dir(dir, name, follow) {
        Ok(fd) => return Ok(fd),
        Err(e) if matches!(how, Walk::Existing | Walk::Follow(false)) => return Err(said(e)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        // A symlink (ENOTDIR under O_DIRECTORY|O_NOFOLLOW) or another non-directory.
        Err(e)
            if how == Walk::Replace
                && matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) =>
        {
            sys::unlinkat(dir, name)?;
        }
        Err(e) => return Err(said(e)),
    }
    match sys::mkdirat(dir, name, 0o777) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
        Err(e) => return Err(e),
    }
    sys::open_dir(dir, name, follow).map_err(said)
}

/// The directory holding `path` (a path below `root`, reached as [`Walk::Existing`] reaches
/// it), open, and `path`'s last component.
pub(crate) fn open_parent(root: BorrowedFd<'_>, path: &CStr) -> io::Result<(OwnedFd, CString)> {
    let bytes = path.to_bytes();
    let (parent, last) = match bytes.iter().rposition(|&b| b == b'/') {
        Some(i) => (&bytes[..i], &bytes[i + 1..]),
        None => (&[][..], bytes),
    };
    let dir = open_dirs(
        root,
        Path::new(std::ffi::OsStr::from_bytes(parent)),
        Walk::Existing,
    )?;
    let last = CString::new(last).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    Ok((dir, last))
}

/// Opens a tree the user names for a run to write under (`--backup-dir`, `-T`): one that
/// names a place below `base` (DEST's root: a relative path without `..`, or any path that
/// leads there lexically, absolute ones too) is reached from `base` with no symlink followed,
/// as everything under DEST; one elsewhere, as the user names it. Missing directories are
/// made when `make`.
pub(crate) fn open_root(base: BorrowedFd<'_>, given: &Path, make: bool) -> io::Result<OwnedFd> {
    match below(base, given) {
        Some(rest) => open_dirs(base, &rest, if make { Walk::Make } else { Walk::Existing }),
        None => open_dirs(base, given, Walk::Follow(make)),
    }
}

/// Where `given` (relative to `base`, or absolute) is below `base`, lexically: the path from
/// there.
pub(crate) fn below(base: BorrowedFd<'_>, given: &Path) -> Option<PathBuf> {
    let plain = |p: &Path| {
        p.components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    };
    if given.is_relative() && plain(given) {
        return Some(given.to_path_buf());
    }
    let proc = CString::new(format!("/proc/self/fd/{}", base.as_raw_fd())).ok()?;
    let real = PathBuf::from(std::ffi::OsString::from_vec(
        sys::readlinkat(rustix::fs::CWD, &proc, libc::PATH_MAX as u64).ok()?,
    ));
    let mut at = PathBuf::new();
    for part in real.join(given).components() {
        match part {
            Component::ParentDir => {
                at.pop();
            }
            Component::CurDir => {}
            other => at.push(other),
        }
    }
    let rest = at.strip_prefix(&real).ok()?;
    plain(rest).then(|| rest.to_path_buf())
}

/// The parent of the directory `child` (its `..`), which must be the directory `id` (dev,
/// inode) it was: a walk that closed an ancestor's descriptor to stay within a bound opens it
/// again so, and a directory moved meanwhile is an error, never another directory.
pub(crate) fn reopen_parent(child: BorrowedFd<'_>, id: (u64, u64)) -> io::Result<OwnedFd> {
    let fd = sys::open_dir(child, c"..", false)?;
    let stat = sys::fstatx(fd.as_fd())?;
    if (stat.dev, stat.ino) != id {
        return Err(io::Error::other("it was moved while it was read"));
    }
    Ok(fd)
}

/// Removes the entry `name` of `dir`, a directory with everything in it (deepest first),
/// relative to descriptors, never following a symlink; a directory on another filesystem than
/// `dir` (a mount point) is left, and so what holds it (ENOTEMPTY). A loop, not a recursion,
/// holding two descriptors at most whatever the depth: the directory it empties and the one it
/// opens below it; an ancestor is opened again through its child's `..`, its identity checked.
pub(crate) fn remove_all(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    let stat = match sys::statx_at(dir, name, false) {
        Ok(s) => s,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        Err(e) => return Err(e),
    };
    if stat.kind() != Kind::Dir {
        return sys::unlinkat(dir, name);
    }
    let dev = sys::fstatx(dir)?.dev;
    if dev != stat.dev {
        return Err(io::Error::from_raw_os_error(libc::ENOTEMPTY));
    }
    // The directories being emptied, from `name` down: their names, identities and the names
    // left in each; only the deepest is open.
    struct Level {
        name: CString,
        id: (u64, u64),
        names: Vec<CString>,
    }
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 16 * 1024];
    let list = |fd: BorrowedFd<'_>, buf: &mut [MaybeUninit<u8>]| -> io::Result<Vec<CString>> {
        let mut names = Vec::new();
        sys::read_dir_entries(fd, buf, |n, _| names.push(n.to_owned()))?;
        Ok(names)
    };
    let mut open = sys::open_dir(dir, name, false)?;
    let mut stack = vec![Level {
        name: name.to_owned(),
        id: (stat.dev, stat.ino),
        names: list(open.as_fd(), &mut buf)?,
    }];
    while let Some(deepest) = stack.last_mut() {
        if let Some(child) = deepest.names.pop() {
            let stat = match sys::statx_at(open.as_fd(), &child, false) {
                Ok(s) => s,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                Err(e) => return Err(e),
            };
            if stat.kind() != Kind::Dir {
                sys::unlinkat(open.as_fd(), &child)?;
                continue;
            }
            if stat.dev != dev {
                return Err(io::Error::from_raw_os_error(libc::ENOTEMPTY));
            }
            let sub = sys::open_dir(open.as_fd(), &child, false)?;
            let now = sys::fstatx(sub.as_fd())?;
            if (now.dev, now.ino) != (stat.dev, stat.ino) {
                return Err(io::Error::other("it was moved while it was removed"));
            }
            open = sub;
            let names = list(open.as_fd(), &mut buf)?;
            stack.push(Level {
                name: child,
                id: (stat.dev, stat.ino),
                names,
            });
            continue;
        }
        // Emptied: listed again (what was made meanwhile goes too), else removed from its
        // parent.
        rustix::fs::seek(&open, rustix::fs::SeekFrom::Start(0)).map_err(io::Error::from)?;
        let again = list(open.as_fd(), &mut buf)?;
        if !again.is_empty() {
            deepest.names = again;
            continue;
        }
        let done = stack.pop().expect("a level");
        match stack.last() {
            Some(parent) => {
                let up = reopen_parent(open.as_fd(), parent.id)?;
                open = up;
                rustix::fs::unlinkat(&open, &done.name, AtFlags::REMOVEDIR)
                    .map_err(io::Error::from)?;
            }
            None => {
                drop(open);
                return rustix::fs::unlinkat(dir, &done.name, AtFlags::REMOVEDIR)
                    .map_err(io::Error::from);
            }
        }
    }
    unreachable!("the loop returns once the first level is removed")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn root(dir: &Path) -> OwnedFd {
        OwnedFd::from(std::fs::File::open(dir).unwrap())
    }

    #[test]
    fn a_symlink_on_the_way_is_refused_or_replaced_never_followed() {
        let t = tempfile::tempdir().unwrap();
        let (inside, outside) = (t.path().join("in"), t.path().join("out"));
        std::fs::create_dir_all(inside.join("a")).unwrap();
        std::fs::create_dir(&outside).unwrap();
        symlink(&outside, inside.join("a/b")).unwrap();
        let fd = root(&inside);
        for how in [Walk::Existing, Walk::Make] {
            let e = open_dirs(fd.as_fd(), Path::new("a/b/c"), how).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{how:?}");
        }
        assert!(open_dirs(fd.as_fd(), Path::new("../out"), Walk::Make).is_err());
        open_dirs(fd.as_fd(), Path::new("a/b/c"), Walk::Replace).unwrap();
        assert!(inside.join("a/b/c").is_dir());
        assert!(!inside.join("a/b").is_symlink());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    }

    #[test]
    fn a_root_named_into_dest_by_any_path_is_reached_below_it() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().canonicalize().unwrap();
        let (dest, outside) = (real.join("dest"), real.join("out"));
        std::fs::create_dir_all(&dest).unwrap();
        std::fs::create_dir(&outside).unwrap();
        symlink(&outside, dest.join(".bk")).unwrap();
        let fd = root(&dest);
        let absolute = dest.join(".bk");
        for given in [
            Path::new(".bk"),
            Path::new("../dest/.bk"),
            absolute.as_path(),
        ] {
            assert!(open_root(fd.as_fd(), given, true).is_err(), "{given:?}");
        }
        assert!(open_root(fd.as_fd(), Path::new("../out"), false).is_ok());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    }

    #[test]
    fn remove_all_removes_a_tree_deeper_than_any_descriptor_limit() {
        let t = tempfile::tempdir().unwrap();
        let top = root(t.path());
        let mut at = sys::open_dir(top.as_fd(), c".", false).unwrap();
        sys::mkdirat(at.as_fd(), c"deep", 0o755).unwrap();
        at = sys::open_dir(at.as_fd(), c"deep", false).unwrap();
        for level in 0..3000 {
            sys::mkdirat(at.as_fd(), c"d", 0o755).unwrap();
            if level % 100 == 0 {
                let f = sys::openat(at.as_fd(), c"f", libc::O_WRONLY | libc::O_CREAT, 0o644);
                drop(f.unwrap());
            }
            at = sys::open_dir(at.as_fd(), c"d", false).unwrap();
        }
        drop(at);
        remove_all(top.as_fd(), c"deep").unwrap();
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 0);
    }

    #[test]
    fn remove_all_stays_below_its_directory() {
        let t = tempfile::tempdir().unwrap();
        let (inside, outside) = (t.path().join("in"), t.path().join("out"));
        std::fs::create_dir_all(inside.join("d/e")).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        std::fs::write(inside.join("d/e/f"), "x").unwrap();
        symlink(&outside, inside.join("d/link")).unwrap();
        let fd = root(&inside);
        remove_all(fd.as_fd(), c"d").unwrap();
        assert!(!inside.join("d").exists());
        assert!(outside.join("keep").exists());
    }
}
