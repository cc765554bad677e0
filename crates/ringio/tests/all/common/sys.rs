//! Thin libc wrappers the standard library lacks: nanosecond times on symlinks, xattrs, fifos,
//! and a tmpfs mount that unmounts itself.

use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::tree::Ts;

/// The unprivileged user tests switch to when they run as root.
pub const NOBODY: (u32, u32) = (65534, 65534);

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub fn cstring(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).expect("path without NUL")
}

/// Sets atime and mtime of `path` itself (symlinks are not followed). `None` leaves one as is.
pub fn set_times(path: &Path, atime: Option<Ts>, mtime: Option<Ts>) -> io::Result<()> {
    let spec = |t: Option<Ts>| match t {
        Some(t) => libc::timespec {
            tv_sec: t.sec as libc::time_t,
            tv_nsec: t.nsec as _,
        },
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
    };
    let times = [spec(atime), spec(mtime)];
    let c = cstring(path);
    // SAFETY: `c` is a NUL-terminated path and `times` holds the two timespecs utimensat reads.
    let rc = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// (atime, mtime) of `path` itself.
pub fn lstat_times(path: &Path) -> (Ts, Ts) {
    let m =
        std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("lstat {}: {e}", path.display()));
    (
        Ts::new(m.atime(), m.atime_nsec()),
        Ts::new(m.mtime(), m.mtime_nsec()),
    )
}

/// Reading an entry moves its atime (relatime); the comparer puts it back so that it can run
/// several times over the same trees. Best effort: only the owner or root may set times.
pub fn put_back_atime(path: &Path, meta: &std::fs::Metadata) {
    let _ = set_times(path, Some(Ts::new(meta.atime(), meta.atime_nsec())), None);
}

/// lchown every entry under (and including) `root`.
pub fn chown_tree(root: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(root, Some(uid), Some(gid))
        .unwrap_or_else(|e| panic!("lchown {}: {e}", root.display()));
    let meta = std::fs::symlink_metadata(root).expect("lstat");
    if meta.is_dir() {
        for entry in std::fs::read_dir(root).expect("read_dir") {
            chown_tree(&entry.expect("dir entry").path(), uid, gid);
        }
    }
}

/// When not root, trees with 0555 directories cannot be removed; make them writable first.
pub fn make_dirs_writable(root: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(root) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let _ = std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(root) {
        for entry in entries.flatten() {
            make_dirs_writable(&entry.path());
        }
    }
}

pub fn mkfifo(path: &Path, mode: u32) {
    let c = cstring(path);
    // SAFETY: `c` is a NUL-terminated path.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), mode as libc::mode_t) };
    assert_eq!(
        rc,
        0,
        "mkfifo {}: {}",
        path.display(),
        io::Error::last_os_error()
    );
}

/// Sets an extended attribute on `path` itself.
pub fn set_xattr(path: &Path, name: &str, value: &[u8]) -> io::Result<()> {
    let c = cstring(path);
    let n = CString::new(name).expect("xattr name");
    // SAFETY: both strings are NUL-terminated; `value` is valid for `value.len()` bytes.
    let rc = unsafe {
        libc::lsetxattr(
            c.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The value of one extended attribute of `path` itself.
pub fn get_xattr(path: &Path, name: &str) -> io::Result<Vec<u8>> {
    let c = cstring(path);
    let n = CString::new(name).expect("xattr name");
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: both strings are NUL-terminated; `buf` is writable for `buf.len()` bytes.
    let len =
        unsafe { libc::lgetxattr(c.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if len < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(len as usize);
    Ok(buf)
}

/// All extended attributes of `path` itself, sorted by name.
pub fn list_xattrs(path: &Path) -> io::Result<Vec<(OsString, Vec<u8>)>> {
    let c = cstring(path);
    let mut names = vec![0u8; 64 * 1024];
    // SAFETY: `c` is NUL-terminated; `names` is writable for `names.len()` bytes.
    let len = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    if len < 0 {
        return Err(io::Error::last_os_error());
    }
    names.truncate(len as usize);
    let mut out = Vec::new();
    for name in names.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = OsString::from_vec(name.to_vec());
        let value = get_xattr(path, &name.to_string_lossy())?;
        out.push((name, value));
    }
    out.sort();
    Ok(out)
}

/// A tmpfs (or ramfs) mounted for one test; unmounted (lazily, so a stuck child cannot block
/// it) on drop.
#[derive(Debug)]
pub struct TmpfsMount {
    path: PathBuf,
}

impl TmpfsMount {
    /// Mounts a tmpfs of `size` (as mount's `size=` option, e.g. "4m") on the existing `path`.
    pub fn new(path: &Path, size: &str) -> Result<TmpfsMount, String> {
        Self::mount(path, "tmpfs", &format!("size={size},mode=0755"))
    }

    /// Mounts a ramfs on the existing `path`: a filesystem that refuses O_DIRECT on every
    /// kernel (tmpfs takes it since Linux 6.6).
    pub fn ramfs(path: &Path) -> Result<TmpfsMount, String> {
        Self::mount(path, "ramfs", "mode=0755")
    }

    fn mount(path: &Path, fs_type: &str, options: &str) -> Result<TmpfsMount, String> {
        if !is_root() {
            return Err(format!("mounting a {fs_type} needs root"));
        }
        let out = Command::new("mount")
            .args(["-t", fs_type, "-o", options, fs_type])
            .arg(path)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(TmpfsMount {
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TmpfsMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// Makes `src` a tree whose file `f` (0444) and directory `d` (0555) hold a `user.*`
/// attribute, and whose file `a` (0464) holds one and an access ACL that gives its owner no
/// write (a named user rw): the kernel lets only a writer set `user.*` attributes, their owner
/// included, so a copy made as a user who is not root must set them before it takes the write
/// bit away (or get it back for them), and set the ACL after them. False where the filesystem
/// takes no user xattrs or ACLs.
pub fn read_only_with_xattrs(src: &Path) -> bool {
    std::fs::create_dir_all(src.join("d")).expect("mkdir");
    std::fs::write(src.join("f"), "read-only").expect("write");
    std::fs::write(src.join("a"), "read-only, by its ACL").expect("write");
    if set_xattr(&src.join("f"), "user.f", b"file").is_err()
        || set_xattr(
            &src.join("a"),
            "system.posix_acl_access",
            &access_acl(0, [4, 6, 4, 6, 4]),
        )
        .is_err()
    {
        return false;
    }
    set_xattr(&src.join("a"), "user.a", b"acl").expect("set xattr");
    set_xattr(&src.join("d"), "user.d", b"dir").expect("set xattr");
    super::chmod(src.join("f"), 0o444);
    super::chmod(src.join("a"), 0o464);
    super::chmod(src.join("d"), 0o555);
    true
}

/// Asserts that `dst` is a copy of [`read_only_with_xattrs`]'s tree: every attribute (the
/// ACL too) and every mode (`what` names the copy in messages).
pub fn assert_read_only_with_xattrs(dst: &Path, what: &str) {
    use std::os::unix::fs::PermissionsExt;
    let entries = [
        ("f", "user.f", &b"file"[..], 0o444),
        ("a", "user.a", b"acl", 0o464),
        ("d", "user.d", b"dir", 0o555),
    ];
    for (name, attr, value, mode) in entries {
        let path = dst.join(name);
        let got =
            get_xattr(&path, attr).unwrap_or_else(|e| panic!("{what}: {attr} of {name}: {e}"));
        assert_eq!(got, value, "{what}: {attr} of {name}");
        let perm = std::fs::symlink_metadata(&path)
            .expect("lstat")
            .permissions()
            .mode()
            & 0o7777;
        assert_eq!(perm, mode, "{what}: mode of {name}");
    }
    let acl = get_xattr(&dst.join("a"), "system.posix_acl_access");
    assert_eq!(
        acl.ok(),
        Some(access_acl(0, [4, 6, 4, 6, 4])),
        "{what}: the ACL of a"
    );
}

/// A POSIX access ACL in the kernel's xattr form: owner, the named user `user`, group, mask
/// and other, with these permissions.
pub fn access_acl(user: u32, [owner, named, group, mask, other]: [u16; 5]) -> Vec<u8> {
    const NO_ID: u32 = u32::MAX;
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in [
        (0x01u16, owner, NO_ID),
        (0x02, named, user),
        (0x04, group, NO_ID),
        (0x10, mask, NO_ID),
        (0x20, other, NO_ID),
    ] {
        acl.extend(tag.to_le_bytes());
        acl.extend(perm.to_le_bytes());
        acl.extend(id.to_le_bytes());
    }
    acl
}
