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

/// Calls `met` for every non-directory below `root` (symlinks not followed), by name in each
/// directory, and for every directory that cannot be listed: what cannot be seen is never
/// taken for "nothing there". One descriptor and one listing are held per level.
pub(crate) fn walk(root: BorrowedFd<'_>, met: &mut dyn FnMut(Met<'_>)) {
    let mut buf = vec![MaybeUninit::uninit(); 64 * 1024];
    walk_dir(root, &mut Vec::new(), &mut buf, met);
}

fn walk_dir(
    dir: BorrowedFd<'_>,
    rel: &mut Vec<u8>,
    buf: &mut [MaybeUninit<u8>],
    met: &mut dyn FnMut(Met<'_>),
) {
    let mut names: Vec<(CString, Option<Kind>)> = Vec::new();
    if let Err(err) = sys::read_dir_entries(dir, buf, |n, kind| names.push((n.to_owned(), kind))) {
        return met(Met::Unlistable { rel, err });
    }
    names.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, kind) in names {
        let len = rel.len();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(name.to_bytes());
        let kind = match kind {
            Some(kind) => Ok(kind),
            None => sys::statx_at(dir, &name, false).map(|s| s.kind()),
        };
        match kind {
            Ok(Kind::Dir) => match sys::open_dir(dir, &name, false) {
                Ok(sub) => walk_dir(sub.as_fd(), rel, buf, met),
                Err(err) => met(Met::Unlistable { rel, err }),
            },
            Ok(kind) => met(Met::Entry {
                rel,
                dir,
                name: &name,
                kind,
            }),
            Err(err) => met(Met::Unlistable { rel, err }),
        }
        rel.truncate(len);
    }
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

/// The directory `rel` below `root` (empty: the root itself). One openat2 with
/// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS; where it refuses (a symlink on the way, a name past
/// PATH_MAX, a kernel without openat2), component by component with O_NOFOLLOW, which also
/// names the symlink.
fn open_beneath(root: BorrowedFd<'_>, rel: &[u8]) -> Result<OwnedFd, Beneath> {
    if rel.is_empty() {
        return root.try_clone_to_owned().map_err(Beneath::Io);
    }
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let how = ResolveFlags::NO_SYMLINKS | ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    match rustix::fs::openat2(root, OsStr::from_bytes(rel), flags, Mode::empty(), how) {
        Ok(fd) => return Ok(fd),
        Err(e @ (rustix::io::Errno::NOENT | rustix::io::Errno::ACCESS)) => {
            return Err(Beneath::Io(e.into()))
        }
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
