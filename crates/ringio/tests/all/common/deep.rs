//! Directory-fd helpers for trees deeper than PATH_MAX, where no whole path can be used.

use std::ffi::CString;
use std::io;
use std::path::Path;

use super::sys::cstring;
use super::tree::Ts;

#[derive(Debug)]
pub struct Dir(libc::c_int);

fn name_c(name: &str) -> CString {
    CString::new(name).expect("name without NUL")
}

fn check(rc: libc::c_int, what: &str, name: &str) -> libc::c_int {
    assert!(
        rc >= 0,
        "{what} {name:.40}...: {}",
        io::Error::last_os_error()
    );
    rc
}

impl Dir {
    pub fn open(path: &Path) -> Dir {
        let c = cstring(path);
        // SAFETY: `c` is a NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        Dir(check(fd, "open", &path.to_string_lossy()))
    }

    pub fn open_child(&self, name: &str) -> Dir {
        let c = name_c(name);
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `self.0` is an open directory fd and `c` a NUL-terminated name.
        let fd = unsafe { libc::openat(self.0, c.as_ptr(), flags) };
        Dir(check(fd, "openat", name))
    }

    pub fn mkdir(&self, name: &str, mode: u32) {
        let c = name_c(name);
        // SAFETY: as in `open_child`.
        check(
            unsafe { libc::mkdirat(self.0, c.as_ptr(), mode) },
            "mkdirat",
            name,
        );
    }

    pub fn write_file(&self, name: &str, content: &[u8], mode: u32) {
        let c = name_c(name);
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC;
        // SAFETY: as in `open_child`.
        let fd = check(
            unsafe { libc::openat(self.0, c.as_ptr(), flags, mode) },
            "create",
            name,
        );
        let mut done = 0;
        while done < content.len() {
            let rest = &content[done..];
            // SAFETY: `fd` is open for writing; `rest` is valid for `rest.len()` bytes.
            let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
            done += check(n as libc::c_int, "write", name) as usize;
        }
        // SAFETY: `fd` is open and owned here.
        check(unsafe { libc::fchmod(fd, mode) }, "fchmod", name);
        // SAFETY: `fd` is open and owned here; it is not used again.
        unsafe { libc::close(fd) };
    }

    pub fn read_file(&self, name: &str) -> Vec<u8> {
        let c = name_c(name);
        // SAFETY: as in `open_child`.
        let fd = check(
            unsafe { libc::openat(self.0, c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) },
            "open",
            name,
        );
        let mut out = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            // SAFETY: `fd` is open for reading; `buf` is writable for `buf.len()` bytes.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            let n = check(n as libc::c_int, "read", name) as usize;
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        // SAFETY: `fd` is open and owned here; it is not used again.
        unsafe { libc::close(fd) };
        out
    }

    pub fn symlink(&self, target: &str, name: &str) {
        let (t, c) = (name_c(target), name_c(name));
        // SAFETY: `self.0` is an open directory fd; both strings are NUL-terminated.
        check(
            unsafe { libc::symlinkat(t.as_ptr(), self.0, c.as_ptr()) },
            "symlinkat",
            name,
        );
    }

    pub fn read_link(&self, name: &str) -> String {
        let c = name_c(name);
        let mut buf = vec![0u8; 4096];
        // SAFETY: as in `open_child`; `buf` is writable for `buf.len()` bytes.
        let n = unsafe { libc::readlinkat(self.0, c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        buf.truncate(check(n as libc::c_int, "readlinkat", name) as usize);
        String::from_utf8(buf).expect("UTF-8 link target")
    }

    pub fn set_times(&self, name: &str, t: Ts) {
        let c = name_c(name);
        let ts = libc::timespec {
            tv_sec: t.sec as libc::time_t,
            tv_nsec: t.nsec as _,
        };
        let times = [ts, ts];
        // SAFETY: as in `open_child`; `times` holds the two timespecs utimensat reads.
        let rc = unsafe {
            libc::utimensat(
                self.0,
                c.as_ptr(),
                times.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        check(rc, "utimensat", name);
    }

    pub fn stat(&self, name: &str) -> libc::stat {
        let c = name_c(name);
        // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as in `open_child`; `st` is a writable `stat`.
        let rc = unsafe { libc::fstatat(self.0, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        check(rc, "fstatat", name);
        st
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: the fd is owned by this value and closed once.
        unsafe { libc::close(self.0) };
    }
}
