//! A tree a manifest describes, reached only through descriptors from its root: every entry
//! below it ([`walk`]), and a listed name's directory ([`LastDir::parent`]), opened with
//! RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS or component by component with O_NOFOLLOW. No symlink leads out, and no depth is too deep: no whole path is
//! ever formed.

use std::collections::HashSet;
use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::Listing;
use crate::sys::{self, Kind};

/// What the walk meets besides directories.
pub(crate) enum Met<'a> {
    /// A non-directory (a symlink is not followed): its name below the root ('/'-separated),
    /// the directory holding it, its name there, and its type.
    Entry {
        rel: &'a [u8],
        dir: BorrowedFd<'a>,
        name: &'a CStr,
        kind: Kind,
    },
    /// A directory that could not be opened or listed, and why.
    Unlistable { rel: &'a [u8], err: io::Error },
}

/// Descriptors the walk holds at most, one a level: deeper, an ancestor's is closed, and
/// reopened through its child's `..` (its identity checked) when the walk comes back to it.
const HELD: usize = 128;

/// The levels the walk holds open: [`HELD`], or under a tight RLIMIT_NOFILE half the
/// descriptor numbers still free (the rest for the files read at each level), at least one.
fn held_most() -> usize {
    let nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    if nofile > 4 * HELD {
        return HELD;
    }
    let taken = sys::open_descriptors(nofile).unwrap_or(nofile);
    (nofile.saturating_sub(taken) / 2).clamp(1, HELD)
}

/// One directory on [`walk`]'s stack.
struct Level {
    /// Its descriptor: `None` for the root (borrowed), or while it is closed for the budget.
    fd: Option<OwnedFd>,
    /// Its (dev, ino), which a reopened descriptor must have.
    id: (u64, u64),
    /// Its names not yet visited.
    names: std::vec::IntoIter<(CString, Option<Kind>)>,
    /// The length of the walk's `rel` naming it.
    len: usize,
}

/// Calls `met` for every non-directory below `root` (symlinks not followed), by name in each
/// directory, and for every directory that cannot be listed: what cannot be seen is never
/// taken for "nothing there". A listing is held per level, on a stack of its own (no
/// recursion), and at most [`held_most`] descriptors: any depth.
pub(crate) fn walk(root: BorrowedFd<'_>, met: &mut dyn FnMut(Met<'_>)) {
    let held = held_most();
    let mut buf = vec![MaybeUninit::uninit(); 64 * 1024];
    let mut rel = Vec::new();
    let Some(top) = listing(root, &rel, &mut buf, met) else {
        return;
    };
    let mut stack = vec![Level {
        fd: None,
        id: (0, 0),
        names: top.into_iter(),
        len: 0,
    }];
    while let Some(level) = stack.last_mut() {
        let dir = level.fd.as_ref().map_or(root, |fd| fd.as_fd());
        let Some((name, kind)) = level.names.next() else {
            let done = stack.pop().expect("a level");
            // The root (the first level) is borrowed, never closed.
            let closed = stack.len() > 1;
            if let (Some(parent), Some(child)) = (stack.last_mut(), done.fd) {
                if closed && parent.fd.is_none() {
                    match crate::beneath::reopen_parent(child.as_fd(), parent.id) {
                        Ok(fd) => parent.fd = Some(fd),
                        Err(err) => {
                            met(Met::Unlistable {
                                rel: &rel[..parent.len],
                                err,
                            });
                            stack.pop();
                        }
                    }
                }
            }
            continue;
        };
        rel.truncate(level.len);
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(name.to_bytes());
        let kind = match kind {
            Some(kind) => Ok(kind),
            None => sys::statx_at(dir, &name, false).map(|s| s.kind()),
        };
        let sub = match kind {
            Ok(Kind::Dir) => sys::open_dir(dir, &name, false).and_then(|sub| {
                let stat = sys::fstatx(sub.as_fd())?;
                Ok((sub, (stat.dev, stat.ino)))
            }),
            Ok(kind) => {
                met(Met::Entry {
                    rel: &rel,
                    dir,
                    name: &name,
                    kind,
                });
                continue;
            }
            Err(err) => Err(err),
        };
        match sub {
            Ok((sub, id)) => {
                if let Some(names) = listing(sub.as_fd(), &rel, &mut buf, met) {
                    stack.push(Level {
                        fd: Some(sub),
                        id,
                        names: names.into_iter(),
                        len: rel.len(),
                    });
                    if stack.len() > held + 1 {
                        let at = stack.len() - 1 - held;
                        stack[at].fd = None;
                    }
                }
            }
            Err(err) => met(Met::Unlistable { rel: &rel, err }),
        }
    }
}

/// The names in `dir` (named `rel`), sorted; `None` (said to `met`) when it cannot be listed.
fn listing(
    dir: BorrowedFd<'_>,
    rel: &[u8],
    buf: &mut [MaybeUninit<u8>],
    met: &mut dyn FnMut(Met<'_>),
) -> Option<Vec<(CString, Option<Kind>)>> {
    let mut names: Vec<(CString, Option<Kind>)> = Vec::new();
    if let Err(err) = sys::read_dir_entries(dir, buf, |n, kind| names.push((n.to_owned(), kind))) {
        met(Met::Unlistable { rel, err });
        return None;
    }
    names.sort_by(|a, b| a.0.cmp(&b.0));
    Some(names)
}

/// Why a listed name cannot be reached beneath the root.
#[derive(Debug)]
pub(crate) enum Beneath {
    /// A directory on the way (its name below the root) is a symbolic link, not followed.
    ThroughSymlink(Vec<u8>),
    /// The system's error (a component missing, not a directory, unreadable).
    Io(io::Error),
}

/// The last directory a lookup opened, by its name below the root: the names of a sorted
/// manifest come directory by directory, so most lookups reuse it.
#[derive(Default)]
pub(crate) struct LastDir(Option<(Vec<u8>, OwnedFd)>);

impl LastDir {
    /// The directory holding `rel` (a name below `root`, '/'-separated, without empty, `.` or
    /// `..` components) and its last component. No symlink on the way is followed: one is
    /// [`Beneath::ThroughSymlink`].
    pub(crate) fn parent(
        &mut self,
        root: BorrowedFd<'_>,
        rel: &[u8],
    ) -> Result<(BorrowedFd<'_>, CString), Beneath> {
        let (dir, last) = match rel.iter().rposition(|&b| b == b'/') {
            Some(i) => (&rel[..i], &rel[i + 1..]),
            None => (&b""[..], rel),
        };
        let name =
            CString::new(last).map_err(|_| Beneath::Io(io::ErrorKind::InvalidInput.into()))?;
        if !matches!(&self.0, Some((held, _)) if held == dir) {
            self.0 = None;
            self.0 = Some((dir.to_vec(), open_beneath(root, dir)?));
        }
        let (_, fd) = self.0.as_ref().expect("just opened");
        Ok((fd.as_fd(), name))
    }
}

/// The directory `rel` below `root` (empty: the root itself), reached as everything below a
/// destination is ([`crate::beneath::open_dirs`]: no symlink followed); where a symlink is in
/// the way, the walk again by components names it.
fn open_beneath(root: BorrowedFd<'_>, rel: &[u8]) -> Result<OwnedFd, Beneath> {
    if rel.is_empty() {
        return root.try_clone_to_owned().map_err(Beneath::Io);
    }
    let path = std::path::Path::new(OsStr::from_bytes(rel));
    match crate::beneath::open_dirs(root, path, crate::beneath::Walk::Existing) {
        Ok(fd) => return Ok(fd),
        Err(e) if e.raw_os_error() != Some(libc::ELOOP) => return Err(Beneath::Io(e)),
        // A symlink on the way: found again below, to be named.
        Err(_) => {}
    }
    let mut dir = root.try_clone_to_owned().map_err(Beneath::Io)?;
    let mut walked = 0;
    for part in rel.split(|&b| b == b'/') {
        let name =
            CString::new(part).map_err(|_| Beneath::Io(io::ErrorKind::InvalidInput.into()))?;
        walked += part.len() + usize::from(walked > 0);
        dir = match sys::open_dir(dir.as_fd(), &name, false) {
            Ok(sub) => sub,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                return Err(match sys::statx_at(dir.as_fd(), &name, false) {
                    Ok(s) if s.kind() == Kind::Symlink => {
                        Beneath::ThroughSymlink(rel[..walked].to_vec())
                    }
                    _ => Beneath::Io(e),
                });
            }
            Err(e) => return Err(Beneath::Io(e)),
        };
    }
    Ok(dir)
}

/// The bytes a check of `listing` below `root` will read (for a progress bar's total): each
/// listed file's size as the manifest gives it, else as the file's own stat gives it, reached
/// as the check reaches it (no symlink on the way or at the end followed: what is not a
/// regular file below `root` counts nothing).
pub fn listed_bytes(root: &Path, listing: &Listing) -> u64 {
    let Ok(root) = sys::open_dir(
        rustix::fs::CWD,
        &CString::new(root.as_os_str().as_bytes()).unwrap_or_default(),
        true,
    ) else {
        return listing.entries.iter().map(|e| e.size).sum();
    };
    let mut last = LastDir::default();
    let mut sized = |rel: &[u8]| -> u64 {
        let Ok((dir, name)) = last.parent(root.as_fd(), rel) else {
            return 0;
        };
        match sys::statx_at(dir, &name, false) {
            Ok(st) if st.kind() == Kind::File => st.size,
            _ => 0,
        }
    };
    listing
        .entries
        .iter()
        .map(|e| match e.size {
            0 => sized(&e.path),
            size => size,
        })
        .sum()
}

/// The regular files below each source root `(src, dst)` (a directory's files found through
/// descriptors, symlinks not followed) whose copies (named as a manifest of the destination
/// root `base` names them) `listing` lacks: what a copy that failed did not copy, by their
/// source paths. A root that cannot be read is named itself.
pub fn not_copied(roots: &[(&Path, &Path)], base: &Path, listing: &Listing) -> Vec<PathBuf> {
    let listed: HashSet<&[u8]> = listing.entries.iter().map(|e| e.path.as_slice()).collect();
    let mut missing = Vec::new();
    for &(src, dst) in roots {
        let opened = CString::new(src.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
            .and_then(|c| sys::open_dir(rustix::fs::CWD, &c, true));
        let dir = match opened {
            Ok(dir) => dir,
            // A file (or nothing there): the root itself.
            Err(_) => {
                if !listed.contains(name_in(base, dst).as_slice()) {
                    missing.push(src.to_path_buf());
                }
                continue;
            }
        };
        walk(dir.as_fd(), &mut |met| {
            let rel = match met {
                Met::Entry {
                    kind: Kind::File,
                    rel,
                    ..
                } => rel,
                Met::Unlistable { rel, .. } => rel,
                Met::Entry { .. } => return,
            };
            let rel = Path::new(OsStr::from_bytes(rel));
            if !listed.contains(name_in(base, &dst.join(rel)).as_slice()) {
                missing.push(src.join(rel));
            }
        });
    }
    missing
}

/// The name the copy `dst` has in a manifest of the destination root `base`: relative to it.
pub(crate) fn name_in(base: &Path, dst: &Path) -> Vec<u8> {
    let rel = dst.strip_prefix(base).unwrap_or(dst);
    let rel = if rel.as_os_str().is_empty() {
        // The root itself is a file (`cp f g`): its own name.
        dst.file_name().map_or(dst, Path::new)
    } else {
        rel
    };
    rel.as_os_str().as_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deeper than the descriptors the walk holds: every file and symlink is met, and the walk
    /// comes back up through the reopened ancestors.
    #[test]
    fn a_walk_deeper_than_its_descriptor_budget_meets_every_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut path = dir.path().to_path_buf();
        let mut want = Vec::new();
        let mut rel = String::new();
        for level in 0..HELD * 2 + 5 {
            std::fs::write(path.join("z"), b"").unwrap();
            want.push(format!("{rel}z"));
            path.push("d");
            rel.push_str("d/");
            std::fs::create_dir(&path).unwrap();
            if level % 50 == 0 {
                std::os::unix::fs::symlink("z", path.join("l")).unwrap();
                want.push(format!("{rel}l"));
            }
        }
        let root = std::fs::File::open(dir.path()).unwrap();
        let mut met = Vec::new();
        walk(root.as_fd(), &mut |m| match m {
            Met::Entry { rel, .. } => met.push(String::from_utf8(rel.to_vec()).unwrap()),
            Met::Unlistable { rel, err } => panic!("{}: {err}", String::from_utf8_lossy(rel)),
        });
        met.sort();
        want.sort();
        assert_eq!(met, want);
    }
}
