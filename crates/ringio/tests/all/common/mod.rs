//! What the integration tests share: seeded random trees ([`TreeSpec`],
//! [`TestTree`]), the tree comparer ([`assert_trees_equal`]), the binary runner ([`Cp`]) and small
//! system utilities (times, owners, xattrs, tmpfs mounts), and a `ringio serve` process ([`Server`]).
//!
//! main.rs declares it first, with `#[macro_use]`, so that every test module has its macros.

mod compare;
pub mod deep;
mod loopfs;
mod run;
mod server;
mod sys;
mod tree;

use std::path::{Path, PathBuf};

pub use compare::{assert_trees_equal, tree_diff, Check};
pub use loopfs::{extents_shared, LoopFs};
pub use ringio_base::Prng;
pub use run::{
    assert_exit, assert_stderr_has, assert_success, describe, gnu_cp, gnu_cp_available, isolated,
    ringio, stderr_lines, Cp,
};
pub use server::Server;
pub use sys::{
    access_acl, assert_read_only_with_xattrs, chown_tree, cstring, get_xattr, is_root, list_xattrs,
    lstat_times, mkfifo, read_only_with_xattrs, set_times, set_xattr, TmpfsMount, NOBODY,
};
pub use tree::{Atimes, TestTree, TreeSpec, Ts};

/// Every copy engine's name, from the one list the binary has (`Engine`'s variants); each copy
/// test runs once per engine through `engine_tests!`, which `every_engine_has_its_tests` in
/// cli.rs checks against this.
pub fn engines() -> impl Iterator<Item = &'static str> {
    ringio_copy::Engine::ALL.iter().map(|e| e.name())
}

/// Whether this is a CI run: the environment sets `CI` (`.ci/run` runs with `CI=true`, as root,
/// after installing every package the tests use). There a test that cannot run is a failure,
/// so that a skip is never mistaken for a pass.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// Says that a test, or the part of it named in `why`, cannot run here: a missing tool,
/// filesystem feature or privilege. Fails the test in CI ([`in_ci`]), where nothing may be
/// missing; elsewhere prints `SKIPPED: why` and lets the test go on (or return, as `skip!` does).
pub fn cannot_run(why: &str) {
    if in_ci() {
        panic!(
            "cannot run in CI: {why} (CI installs every tool the tests use and runs as root; \
             a skip there would hide a test that never ran)"
        );
    }
    eprintln!("SKIPPED: {why}");
}

/// True when rsync is on PATH: the reference that sync's tests compare with. Without it they
/// skip, and fail in CI ([`cannot_run`]).
pub fn rsync_available() -> bool {
    let there = std::process::Command::new("rsync")
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if !there {
        cannot_run("rsync is not installed (apt-get install rsync)");
    }
    there
}

/// The tools a sync test runs side by side, for [`sync_or_rsync`]: rsync where it is installed
/// (its absence is [`rsync_available`]'s to report), then ringio.
pub fn rsync_then_ringio() -> Vec<&'static str> {
    let mut tools = Vec::new();
    if rsync_available() {
        tools.push("rsync");
    }
    tools.push("ringio");
    tools
}

/// Runs `ringio sync ARGS` (`tool` "ringio", with `env` set: a test hook) or `rsync ARGS`
/// (`LC_ALL=C`) in `cwd`, as nobody when `nobody` and the tests run as root (so that what is
/// mode 000 cannot be read).
pub fn sync_or_rsync(
    tool: &str,
    cwd: &Path,
    args: &[&str],
    env: Option<(&str, &str)>,
    nobody: bool,
) -> std::process::Output {
    let nobody = nobody && is_root();
    if tool == "ringio" {
        let mut cp = Cp::bare().arg("sync").args(args).current_dir(cwd);
        if let Some((k, v)) = env {
            cp = cp.env(k, v);
        }
        if nobody {
            cp = cp.run_as(NOBODY.0, NOBODY.1);
        }
        return cp.run();
    }
    let mut cmd = std::process::Command::new("rsync");
    cmd.args(args)
        .current_dir(cwd)
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null());
    if nobody {
        as_nobody(&mut cmd);
    }
    cmd.output().expect("run rsync")
}

/// Makes `cmd` run as nobody (groups dropped, then gid, then uid), as `Cp::run_as` does:
/// for a reference tool that must not read what nobody cannot.
pub fn as_nobody(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls, in the child before exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(NOBODY.1) != 0
                || libc::setuid(NOBODY.0) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Every `ringio dup` method.
pub const DUP_METHODS: &[&str] = &[
    "rw",
    "bigbuf",
    "sendfile",
    "splice",
    "copy-range",
    "uring",
    "reflink",
    "auto",
];

/// Returns from a test that cannot run here for want of a tool, a filesystem feature or
/// privilege, saying why; fails it in CI ([`cannot_run`]).
macro_rules! skip {
    ($($arg:tt)*) => {{
        $crate::common::cannot_run(&format!($($arg)*));
        return;
    }};
}

/// Returns from a test whose question does not arise on this machine, saying why. Not a
/// failure in CI, as `skip!` is: nothing missing could be installed to make it arise. Each use
/// says in a comment why the case cannot be made to arise deterministically; keep them few.
macro_rules! moot {
    ($($arg:tt)*) => {{
        eprintln!("MOOT HERE: {}", format!($($arg)*));
        return;
    }};
}

/// Runs each named `fn name(engine: &str)` once per engine (`name::uring`, `name::aio`, ...),
/// plus two variants: `name::uring_ring`, the uring engine with `--ring-only` (on the warm
/// caches of tests the default copies small files in place, so this keeps the ring pipeline
/// itself under test), and `name::aio_direct`, AIO with O_DIRECT. Each module's `COVERED`
/// lists the engines it runs, which cli.rs checks against [`engines`].
macro_rules! engine_tests {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[allow(dead_code)]
            pub const COVERED: &[&str] = &[
                "uring", "uring-ring", "aio", "aio-direct", "copy-range", "sendfile", "splice",
                "readwrite",
            ];
            #[test]
            fn uring() {
                super::$name("uring")
            }
            #[test]
            fn uring_ring() {
                super::$name("uring-ring")
            }
            #[test]
            fn aio() {
                super::$name("aio")
            }
            #[test]
            fn aio_direct() {
                super::$name("aio-direct")
            }
            #[test]
            fn copy_range() {
                super::$name("copy-range")
            }
            #[test]
            fn sendfile() {
                super::$name("sendfile")
            }
            #[test]
            fn splice() {
                super::$name("splice")
            }
            #[test]
            fn readwrite() {
                super::$name("readwrite")
            }
        }
    )+};
}

/// A scratch directory for one test, removed at the end. When not root, it first makes every
/// directory writable again, since trees under test hold 0555 directories.
#[derive(Debug)]
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix("ringio-test-")
            .tempdir()
            .expect("create tempdir");
        Scratch { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Hands the scratch directory itself to `uid:gid` (mode 0755), so a child running as that
    /// user can work in it. Entries inside are given with [`chown_tree`].
    pub fn give_to(&self, uid: u32, gid: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(self.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod scratch");
        std::os::unix::fs::chown(self.path(), Some(uid), Some(gid)).expect("chown scratch");
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !is_root() {
            sys::make_dirs_writable(self.path());
        }
    }
}

/// Writes `content` to `path`, creating parent directories.
/// Writes `path` back and drops its pages from the page cache, so that a copy meets it cold.
/// ringio splits a big file into parallel chunks only when it must read it from the disk (a
/// cached one goes whole to one worker): tests of the chunk path start from a cold file.
pub fn evict(path: impl AsRef<Path>) {
    use std::os::fd::AsRawFd;
    let path = path.as_ref();
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    file.sync_all()
        .unwrap_or_else(|e| panic!("fsync {}: {e}", path.display()));
    // SAFETY: fadvise on a descriptor we own; it only drops clean cached pages.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0, "fadvise {}", path.display());
}

pub fn write_file(path: impl AsRef<Path>, content: impl AsRef<[u8]>) {
    let path = path.as_ref();
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create parent dirs");
    }
    std::fs::write(path, content).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Sets the permission bits of `path` (follows symlinks).
pub fn chmod(path: impl AsRef<Path>, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let path = path.as_ref();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {:o} {}: {e}", mode, path.display()));
}

/// The permission bits (with setuid, setgid, sticky) of `path`, not following symlinks.
pub fn mode_of(path: impl AsRef<Path>) -> u32 {
    use std::os::unix::fs::MetadataExt;
    let path = path.as_ref();
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("lstat {}: {e}", path.display()))
        .mode()
        & 0o7777
}
