//! Backups, cp's and sync's, each rule once:
//! - the name an existing destination is kept under: GNU's `VERSION_CONTROL` rules (cp's
//!   `--backup`, `-S`: [`name_for`]) or rsync's suffix (sync's `-b`, `--suffix`), both built
//!   on [`simple_name`];
//! - where it goes: beside the file in its own directory, or under a backup tree (sync's
//!   `--backup-dir`) reached from DEST's root through descriptors, no symlink followed
//!   ([`Place`]);
//! - how the old file gets there: renamed (cp), or hard-linked so the old name stays readable
//!   until its replacement is renamed over it (sync; renamed where linking fails) ([`Move`]).
//!
//! cp's policy chooses the name ([`name_for`], a look of `policy::decide`) and its engine
//! moves the file ([`move_to`] with [`Move::Rename`]); sync asks [`keep`] for all three.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use rustix::fs::AtFlags;

use crate::beneath::{self, Walk};
use crate::error::{CopyError, Op};
use crate::plan::{Backup, BackupMode};
use crate::sys;

// The name.

/// The simple backup suffix, chosen as GNU's backupfile does: `given` (the -S option) if
/// there is one, else `from_env` ($SIMPLE_BACKUP_SUFFIX); an empty suffix, or one with a '/'
/// before its last part (which would name a file in another directory), is `~` instead.
pub fn simple_backup_suffix<'a>(given: Option<&'a str>, from_env: Option<&'a str>) -> &'a str {
    match given.or(from_env) {
        Some(suffix) if !suffix.is_empty() && is_one_component(suffix) => suffix,
        _ => "~",
    }
}

/// True when `name` is its own last component: no leading '/', and no '/' followed by more
/// of the name (trailing slashes belong to the last component).
fn is_one_component(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.starts_with(b"/") && !bytes.windows(2).any(|w| w[0] == b'/' && w[1] != b'/')
}

/// The backup path for `path` (`cp -fb F F` copies F to it instead of onto itself).
pub fn backup_path(path: &Path, backup: &Backup) -> io::Result<PathBuf> {
    let name = path.file_name().ok_or(io::ErrorKind::InvalidInput)?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let parent_c = CString::new(parent.as_os_str().as_bytes())?;
    let dir = sys::open_dir(rustix::fs::CWD, &parent_c, true)?;
    let name_c = CString::new(name.as_bytes())?;
    let backup_name = name_for(dir.as_fd(), &name_c, backup)?;
    Ok(path.with_file_name(OsStr::from_bytes(backup_name.to_bytes())))
}

/// The simple backup name: `name` followed by `suffix` (cp's `NAME~`, rsync's `NAME` +
/// `--suffix`, and under `--backup-dir` the file's path from DEST + `--suffix`).
pub(crate) fn simple_name(name: &[u8], suffix: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(name.len() + suffix.len());
    b.extend_from_slice(name);
    b.extend_from_slice(suffix.as_bytes());
    b
}

/// The numbered backup name `name.~N~`.
fn numbered_name(name: &[u8], n: u64) -> Vec<u8> {
    let mut b = name.to_vec();
    b.extend_from_slice(format!(".~{n}~").as_bytes());
    b
}

/// The backup name for `name` in `dir`, as GNU's `VERSION_CONTROL` chooses it.
pub(crate) fn name_for(dir: BorrowedFd<'_>, name: &CStr, backup: &Backup) -> io::Result<CString> {
    let chosen = choose(name.to_bytes(), backup, || {
        highest_numbered(dir, name.to_bytes())
    })?;
    CString::new(chosen).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// GNU's choice for `name`, given the highest N of its `name.~N~` backups (asked only for
/// the numbered modes): simple names `name` + suffix; numbered ones one more than the highest;
/// existing numbered where numbered backups exist, simple otherwise.
fn choose(
    name: &[u8],
    backup: &Backup,
    highest: impl FnOnce() -> io::Result<u64>,
) -> io::Result<Vec<u8>> {
    let highest = match backup.mode {
        BackupMode::Simple => return Ok(simple_name(name, &backup.suffix)),
        BackupMode::Numbered | BackupMode::Existing => highest()?,
    };
    if backup.mode == BackupMode::Existing && highest == 0 {
        return Ok(simple_name(name, &backup.suffix));
    }
    Ok(numbered_name(name, highest + 1))
}

/// The highest N of the `NAME.~N~` entries in `dir` (0 when there are none).
fn highest_numbered(dir: BorrowedFd<'_>, name: &[u8]) -> io::Result<u64> {
    let reopened = sys::open_dir(dir, c".", false)?;
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 32 * 1024];
    let mut highest = 0;
    sys::read_dir_entries(reopened.as_fd(), &mut buf, |entry, _| {
        if let Some(n) = backup_number(entry.to_bytes(), name) {
            highest = highest.max(n);
        }
    })?;
    Ok(highest)
}

/// N when `entry` is `name.~N~`.
fn backup_number(entry: &[u8], name: &[u8]) -> Option<u64> {
    let rest = entry.strip_prefix(name)?.strip_prefix(b".~")?;
    let digits = rest.strip_suffix(b"~")?;
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) || digits[0] == b'0' {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

// How the old file gets there.

/// How the old file is moved to its backup's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Move {
    /// Renamed (what stands at the backup's name is replaced by the rename): cp's way.
    Rename,
    /// Hard-linked, so the old file stays readable under its name until its replacement is
    /// renamed over it; renamed where linking fails (another filesystem, a directory). A file
    /// at the backup's name goes first (a link does not replace it): sync's way.
    Link,
}

/// Moves `from` (a directory and a name in it) to `to` as `how` says.
pub(crate) fn move_to(
    how: Move,
    (dir, name): (BorrowedFd<'_>, &CStr),
    (to_dir, to_name): (BorrowedFd<'_>, &CStr),
) -> io::Result<()> {
    let rename = || rustix::fs::renameat(dir, name, to_dir, to_name);
    match how {
        Move::Rename => rename(),
        Move::Link => {
            let _ = sys::unlinkat(to_dir, to_name);
            rustix::fs::linkat(dir, name, to_dir, to_name, AtFlags::empty()).or_else(|_| rename())
        }
    }
    .map_err(io::Error::from)
}

// Where it goes.

/// Where a backup goes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Place<'a> {
    /// In the file's own directory.
    Beside,
    /// Under a backup tree at the file's path from DEST: `root` (as given: absolute, or
    /// relative to DEST) is opened from DEST's root `anchor` as a root of its own, made where
    /// missing, and the backup's directories in it are made as rsync makes them (what stands
    /// where a directory is needed, a planted symlink too, is replaced by one). What stands
    /// at the backup's name goes, a directory too.
    Tree {
        /// DEST's root, open (`None`: DEST is not there).
        anchor: Option<BorrowedFd<'a>>,
        /// `--backup-dir` as given.
        root: &'a Path,
    },
}

/// What sync's `-b` asks: the name (rsync's suffix), the place, the move.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Aside<'a> {
    /// Appended to the file's name (beside) or to its path from DEST (under a tree).
    pub suffix: &'a str,
    /// Where the backup goes.
    pub place: Place<'a>,
    /// How the old file gets there.
    pub how: Move,
}

/// An entry of a destination directory (the file a backup is made of): its directory, its
/// name there, its path from DEST.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DestEntry<'a> {
    /// The directory that holds it.
    pub dir: BorrowedFd<'a>,
    /// Its name in `dir`.
    pub name: &'a CStr,
    /// Its path from DEST.
    pub rel: &'a [u8],
}

/// Keeps the existing `file` (not a directory) as `aside` says, before it is replaced or
/// deleted; `path` is the file's path as messages show it. Returns the backup's path as
/// `--info=backup` shows it (from DEST beside, `--backup-dir`'s path under a tree).
pub(crate) fn keep(
    aside: &Aside<'_>,
    file: DestEntry<'_>,
    path: impl Fn() -> PathBuf,
) -> Result<Vec<u8>, CopyError> {
    let to = simple_name(file.rel, aside.suffix);
    match aside.place {
        Place::Beside => {
            // One name in the same directory (a suffix with a '/' would lead elsewhere).
            if aside.suffix.contains('/') {
                return Err(CopyError::Refused(format!(
                    "--suffix cannot contain slashes: {}",
                    aside.suffix
                )));
            }
            let name = CString::new(simple_name(file.name.to_bytes(), aside.suffix))
                .map_err(|_| CopyError::io(Op::Backup, path(), io::ErrorKind::InvalidInput))?;
            move_to(aside.how, (file.dir, file.name), (file.dir, &name))
                .map_err(|e| CopyError::io(Op::Backup, path(), e))?;
            Ok(to)
        }
        Place::Tree { anchor, root } => {
            let shown = root.join(OsStr::from_bytes(&to));
            let fail = |e: io::Error| CopyError::io(Op::Backup, shown.clone(), e);
            let (parent, last) = match to.iter().rposition(|&c| c == b'/') {
                Some(i) => (&to[..i], &to[i + 1..]),
                None => (&[][..], &to[..]),
            };
            let last = CString::new(last).map_err(|_| CopyError::Refused("bad name".into()))?;
            let Some(anchor) = anchor else {
                return Err(fail(io::Error::from_raw_os_error(libc::ENOENT)));
            };
            let tree = beneath::open_root(anchor, root, true).map_err(fail)?;
            let parent = Path::new(OsStr::from_bytes(parent));
            let at = beneath::open_dirs(tree.as_fd(), parent, Walk::Replace).map_err(fail)?;
            // A backup dir that is the file's own directory, by whatever spelling (`sub/..`,
            // `../dst`, an absolute path), with no suffix: the backup's name is the file's.
            if last.as_c_str() == file.name && same_dir(at.as_fd(), file.dir) {
                return Err(CopyError::Refused(format!(
                    "cannot back up {} onto itself: --backup-dir is its own directory and \
                     --suffix is empty",
                    crate::quote::quote_path(&path())
                )));
            }
            beneath::remove_all(at.as_fd(), &last).map_err(fail)?;
            move_to(aside.how, (file.dir, file.name), (at.as_fd(), &last))
                .map_err(|e| CopyError::io(Op::Backup, path(), e))?;
            Ok(shown.into_os_string().into_vec())
        }
    }
}

/// Two descriptors of one directory (its device and inode).
fn same_dir(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    match (sys::fstatx(a), sys::fstatx(b)) {
        (Ok(a), Ok(b)) => (a.dev, a.ino) == (b.dev, b.ino),
        // Unknown: taken as the same, so nothing is removed on a guess.
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;
    use std::os::unix::fs::MetadataExt;

    fn gnu(mode: BackupMode, suffix: &str) -> Backup {
        Backup {
            mode,
            suffix: suffix.into(),
        }
    }

    /// GNU's choice with `highest` as the highest numbered backup; a panic if it is asked for
    /// where it must not be.
    fn chosen(mode: BackupMode, suffix: &str, highest: Option<u64>) -> Vec<u8> {
        let highest = || Ok(highest.expect("the directory is not read for simple names"));
        choose(b"f", &gnu(mode, suffix), highest).unwrap()
    }

    #[test]
    fn numbers_are_parsed_only_from_exact_backups() {
        assert_eq!(backup_number(b"f.~3~", b"f"), Some(3));
        assert_eq!(backup_number(b"f.~12~", b"f"), Some(12));
        assert_eq!(backup_number(b"f.~~", b"f"), None);
        assert_eq!(backup_number(b"f.~03~", b"f"), None);
        assert_eq!(backup_number(b"ff.~3~", b"f"), None);
        assert_eq!(backup_number(b"f~", b"f"), None);
        assert_eq!(backup_number(b"f.~3~~", b"f"), None);
        assert_eq!(backup_number(b"f.~3a~", b"f"), None);
        assert_eq!(backup_number(b"f.~-3~", b"f"), None);
        // Too big for a number: not a backup of `f`.
        assert_eq!(backup_number(b"f.~99999999999999999999~", b"f"), None);
        assert_eq!(backup_number(b"f.~3~", b"f.~3~"), None);
    }

    #[test]
    fn unusable_suffixes_become_tilde() {
        assert_eq!(simple_backup_suffix(Some(".bak"), Some(".env")), ".bak");
        assert_eq!(simple_backup_suffix(None, Some(".env")), ".env");
        assert_eq!(simple_backup_suffix(None, None), "~");
        // An empty -S does not fall back to the environment: it is `~`.
        assert_eq!(simple_backup_suffix(Some(""), Some(".env")), "~");
        assert_eq!(simple_backup_suffix(None, Some("")), "~");
        for bad in ["/x", "a/b", "//", "/", "x//y"] {
            assert_eq!(simple_backup_suffix(Some(bad), None), "~", "{bad}");
            assert_eq!(simple_backup_suffix(None, Some(bad)), "~", "{bad}");
        }
        // Trailing slashes are part of a last component, as GNU's last_component reads it.
        assert_eq!(simple_backup_suffix(Some("x/"), None), "x/");
        assert_eq!(simple_backup_suffix(Some("x//"), None), "x//");
    }

    #[test]
    fn simple_and_numbered_names() {
        assert_eq!(simple_name(b"f", "~"), b"f~");
        assert_eq!(simple_name(b"a/b/f", ".bak"), b"a/b/f.bak");
        // rsync's empty suffix (under --backup-dir): the name itself.
        assert_eq!(simple_name(b"f", ""), b"f");
        assert_eq!(numbered_name(b"f", 1), b"f.~1~");
        assert_eq!(numbered_name(b"f.~1~", 12), b"f.~1~.~12~");
    }

    #[test]
    fn gnu_names_follow_the_mode_without_a_directory() {
        // Simple never reads the directory; the numbered modes do.
        assert_eq!(chosen(BackupMode::Simple, "~", None), b"f~");
        assert_eq!(chosen(BackupMode::Simple, ".orig", None), b"f.orig");
        assert_eq!(chosen(BackupMode::Numbered, "~", Some(0)), b"f.~1~");
        assert_eq!(chosen(BackupMode::Numbered, "~", Some(7)), b"f.~8~");
        assert_eq!(chosen(BackupMode::Existing, ".orig", Some(0)), b"f.orig");
        assert_eq!(chosen(BackupMode::Existing, ".orig", Some(7)), b"f.~8~");
        // A directory that cannot be read fails the numbered modes.
        let unreadable = || Err(io::Error::from_raw_os_error(libc::EACCES));
        assert!(choose(b"f", &gnu(BackupMode::Numbered, "~"), unreadable).is_err());
        assert!(choose(b"f", &gnu(BackupMode::Existing, "~"), unreadable).is_err());
    }

    #[test]
    fn names_follow_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let fd = std::fs::File::open(dir.path()).unwrap();
        let name = |mode| name_for(fd.as_fd(), c"f", &gnu(mode, "~")).unwrap();
        assert_eq!(name(BackupMode::Simple).as_bytes(), b"f~");
        assert_eq!(name(BackupMode::Existing).as_bytes(), b"f~");
        assert_eq!(name(BackupMode::Numbered).as_bytes(), b"f.~1~");
        std::fs::write(dir.path().join("f.~1~"), "").unwrap();
        std::fs::write(dir.path().join("f.~7~"), "").unwrap();
        std::fs::write(dir.path().join("g.~9~"), "").unwrap();
        assert_eq!(name(BackupMode::Existing).as_bytes(), b"f.~8~");
        assert_eq!(name(BackupMode::Numbered).as_bytes(), b"f.~8~");
    }

    fn open(path: &Path) -> OwnedFd {
        std::fs::File::open(path).unwrap().into()
    }

    #[test]
    fn a_linked_backup_beside_keeps_the_old_name_readable() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("f"), "old").unwrap();
        std::fs::write(d.path().join("f.b"), "stale").unwrap();
        let dir = open(d.path());
        let aside = Aside {
            suffix: ".b",
            place: Place::Beside,
            how: Move::Link,
        };
        let file = DestEntry {
            dir: dir.as_fd(),
            name: c"f",
            rel: b"sub/f",
        };
        let to = keep(&aside, file, || d.path().join("f")).unwrap();
        assert_eq!(to, b"sub/f.b");
        let (f, b) = (d.path().join("f"), d.path().join("f.b"));
        assert_eq!(std::fs::read(&b).unwrap(), b"old");
        assert_eq!(
            std::fs::metadata(&f).unwrap().ino(),
            std::fs::metadata(&b).unwrap().ino()
        );
        // Renamed: the old name is gone.
        let aside = Aside {
            how: Move::Rename,
            suffix: ".c",
            ..aside
        };
        keep(&aside, file, || f.clone()).unwrap();
        assert!(!f.exists());
        assert_eq!(std::fs::read(d.path().join("f.c")).unwrap(), b"old");
        // A suffix that leads to another directory is refused.
        let aside = Aside {
            suffix: "/x",
            ..aside
        };
        assert!(matches!(
            keep(&aside, file, || f.clone()),
            Err(CopyError::Refused(_))
        ));
    }

    #[test]
    fn a_backup_tree_is_reached_without_following_symlinks() {
        let d = tempfile::tempdir().unwrap();
        let (dest, outside) = (d.path().join("dest"), d.path().join("outside"));
        std::fs::create_dir_all(dest.join("sub")).unwrap();
        std::fs::create_dir_all(dest.join("bak")).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(dest.join("sub/f"), "old").unwrap();
        // A symlink planted where the backup's directory goes, and a directory where its
        // name goes.
        std::os::unix::fs::symlink(&outside, dest.join("bak/sub")).unwrap();
        let (anchor, dir) = (open(&dest), open(&dest.join("sub")));
        let aside = Aside {
            suffix: "",
            place: Place::Tree {
                anchor: Some(anchor.as_fd()),
                root: Path::new("bak"),
            },
            how: Move::Link,
        };
        let file = DestEntry {
            dir: dir.as_fd(),
            name: c"f",
            rel: b"sub/f",
        };
        let to = keep(&aside, file, || dest.join("sub/f")).unwrap();
        assert_eq!(to, b"bak/sub/f");
        assert!(std::fs::read_dir(&outside).unwrap().next().is_none());
        let kept = dest.join("bak/sub/f");
        assert!(std::fs::symlink_metadata(dest.join("bak/sub"))
            .unwrap()
            .is_dir());
        assert_eq!(std::fs::read(&kept).unwrap(), b"old");
        assert_eq!(std::fs::read(dest.join("sub/f")).unwrap(), b"old");
        // What stands at the backup's name goes, a directory too.
        std::fs::remove_file(&kept).unwrap();
        std::fs::create_dir_all(kept.join("inner")).unwrap();
        keep(&aside, file, || dest.join("sub/f")).unwrap();
        assert!(std::fs::symlink_metadata(&kept).unwrap().is_file());
        // The file's own directory as the tree, with no suffix: refused, the file stays.
        let aside = Aside {
            place: Place::Tree {
                anchor: Some(anchor.as_fd()),
                root: Path::new("sub/.."),
            },
            ..aside
        };
        assert!(matches!(
            keep(&aside, file, || dest.join("sub/f")),
            Err(CopyError::Refused(_))
        ));
        assert_eq!(std::fs::read(dest.join("sub/f")).unwrap(), b"old");
        // No DEST root: nothing to reach the tree from.
        let aside = Aside {
            place: Place::Tree {
                anchor: None,
                root: Path::new("bak"),
            },
            ..aside
        };
        assert!(keep(&aside, file, || dest.join("sub/f")).is_err());
    }
}
