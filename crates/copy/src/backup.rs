//! `--backup`: the name an existing destination is renamed to before it is replaced, as cp
//! and the GNU `VERSION_CONTROL` conventions choose it.

use std::ffi::{CStr, CString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::BorrowedFd;

use crate::plan::{Backup, BackupMode};
use crate::sys;

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
pub fn backup_path(path: &std::path::Path, backup: &Backup) -> io::Result<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let name = path.file_name().ok_or(io::ErrorKind::InvalidInput)?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    let parent_c = CString::new(parent.as_os_str().as_bytes())?;
    let dir = sys::open_dir(rustix::fs::CWD, &parent_c, true)?;
    let name_c = CString::new(name.as_bytes())?;
    let backup_name = name_for(std::os::fd::AsFd::as_fd(&dir), &name_c, backup)?;
    Ok(path.with_file_name(std::ffi::OsStr::from_bytes(backup_name.to_bytes())))
}

/// The backup name for `name` in `dir`.
pub(crate) fn name_for(dir: BorrowedFd<'_>, name: &CStr, backup: &Backup) -> io::Result<CString> {
    let simple = || {
        let mut b = name.to_bytes().to_vec();
        b.extend_from_slice(backup.suffix.as_bytes());
        CString::new(b).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
    };
    let highest = match backup.mode {
        BackupMode::Simple => return simple(),
        BackupMode::Numbered | BackupMode::Existing => highest_numbered(dir, name.to_bytes())?,
    };
    if backup.mode == BackupMode::Existing && highest == 0 {
        return simple();
    }
    let mut b = name.to_bytes().to_vec();
    b.extend_from_slice(format!(".~{}~", highest + 1).as_bytes());
    CString::new(b).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// The highest N of the `NAME.~N~` entries in `dir` (0 when there are none).
fn highest_numbered(dir: BorrowedFd<'_>, name: &[u8]) -> io::Result<u64> {
    let reopened = sys::open_dir(dir, c".", false)?;
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 32 * 1024];
    let mut highest = 0;
    sys::read_dir_entries(std::os::fd::AsFd::as_fd(&reopened), &mut buf, |entry, _| {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn numbers_are_parsed_only_from_exact_backups() {
        assert_eq!(backup_number(b"f.~3~", b"f"), Some(3));
        assert_eq!(backup_number(b"f.~12~", b"f"), Some(12));
        assert_eq!(backup_number(b"f.~~", b"f"), None);
        assert_eq!(backup_number(b"f.~03~", b"f"), None);
        assert_eq!(backup_number(b"ff.~3~", b"f"), None);
        assert_eq!(backup_number(b"f~", b"f"), None);
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
    fn names_follow_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let fd = std::fs::File::open(dir.path()).unwrap();
        let b = |mode| Backup {
            mode,
            suffix: "~".into(),
        };
        let name = |mode| name_for(fd.as_fd(), c"f", &b(mode)).unwrap();
        assert_eq!(name(BackupMode::Simple).as_bytes(), b"f~");
        assert_eq!(name(BackupMode::Existing).as_bytes(), b"f~");
        assert_eq!(name(BackupMode::Numbered).as_bytes(), b"f.~1~");
        std::fs::write(dir.path().join("f.~1~"), "").unwrap();
        std::fs::write(dir.path().join("f.~7~"), "").unwrap();
        assert_eq!(name(BackupMode::Existing).as_bytes(), b"f.~8~");
        assert_eq!(name(BackupMode::Numbered).as_bytes(), b"f.~8~");
    }
}
