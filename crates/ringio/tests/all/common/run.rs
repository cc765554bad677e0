//! Running the `ringio` binary (and GNU cp, the reference) with a timeout.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Long enough for a debug build to copy any tree the tests make; a hang fails instead of
/// stalling the suite.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(90);

/// One invocation of the binary: `ringio cp ARGS...` unless made with [`Cp::bare`].
#[derive(Debug)]
pub struct Cp {
    cmd: Command,
    shown: Vec<OsString>,
    timeout: Duration,
}

impl Default for Cp {
    fn default() -> Self {
        Cp::new()
    }
}

impl Cp {
    /// `ringio cp`.
    pub fn new() -> Cp {
        Cp::bare().arg("cp")
    }

    /// `ringio` without a subcommand.
    pub fn bare() -> Cp {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringio"));
        cmd.env("LC_ALL", "C").stdin(Stdio::null());
        Cp {
            cmd,
            shown: vec!["ringio".into()],
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// `ringio bench ARGS --src ROOT/src --dir ROOT/work`: a benchmark of the tree `src` under
    /// `root`, with its copies and trash in `work` there.
    pub fn bench_on(root: &Path, args: &[&str]) -> Cp {
        Cp::bare()
            .arg("bench")
            .args(args)
            .arg("--src")
            .arg(root.join("src"))
            .arg("--dir")
            .arg(root.join("work"))
    }

    /// ringio run under the name `cp` (GNU cp's drop-in): a symlink `cp` to the binary in
    /// `dir`, made if missing.
    pub fn named_cp(dir: &Path) -> Cp {
        let link = dir.join("cp");
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_ringio"), &link)
                .unwrap_or_else(|e| panic!("symlink {}: {e}", link.display()));
        }
        let mut cmd = Command::new(&link);
        cmd.env("LC_ALL", "C").stdin(Stdio::null());
        Cp {
            cmd,
            shown: vec!["cp".into()],
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The child reads its standard input from `path` (the default is /dev/null).
    pub fn stdin_from(mut self, path: impl AsRef<Path>) -> Cp {
        let file = std::fs::File::open(path.as_ref())
            .unwrap_or_else(|e| panic!("open {}: {e}", path.as_ref().display()));
        self.cmd.stdin(file);
        self
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Cp {
        self.cmd.arg(arg.as_ref());
        self.shown.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Cp
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for arg in args {
            self = self.arg(arg);
        }
        self
    }

    /// `--engine ENGINE`.
    pub fn engine(self, engine: &str) -> Cp {
        match engine {
            "uring-ring" => self.arg("--engine").arg("uring").arg("--ring-only"),
            "aio-direct" => self.arg("--engine").arg("aio").arg("--direct"),
            _ => self.arg("--engine").arg(engine),
        }
    }

    /// Sets an environment variable for the child.
    pub fn env(mut self, key: &str, value: &str) -> Cp {
        self.cmd.env(key, value);
        self
    }

    /// The child's working directory (the test process's own never changes).
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Cp {
        self.cmd.current_dir(dir.as_ref());
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Cp {
        self.timeout = timeout;
        self
    }

    /// Runs the child as `uid:gid` with no supplementary groups (the test must be root).
    pub fn run_as(mut self, uid: u32, gid: u32) -> Cp {
        // SAFETY: the hook runs in the forked child before exec; it makes only
        // async-signal-safe system calls and touches no memory shared with the parent.
        unsafe {
            self.cmd.pre_exec(move || {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        self
    }

    /// Runs the child with RLIMIT_NOFILE (soft and hard) set to `limit`, and with only its
    /// standard descriptors: one the test runner inherited (a shell's, a CI runner's) is
    /// closed at exec, so what the child finds under the limit depends on nothing else.
    pub fn nofile_limit(mut self, limit: u64) -> Cp {
        // SAFETY: as in `run_as`: one system call in the child before exec.
        unsafe {
            self.cmd.pre_exec(|| {
                let every = libc::c_uint::MAX;
                let flags = libc::CLOSE_RANGE_CLOEXEC as libc::c_int;
                if libc::syscall(libc::SYS_close_range, 3, every, flags) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        self.rlimit(libc::RLIMIT_NOFILE, limit)
    }

    /// Runs the child with RLIMIT_NPROC (soft and hard) set to `limit`: its user's processes
    /// and threads (root's are not limited, so with `run_as`).
    pub fn nproc_limit(self, limit: u64) -> Cp {
        self.rlimit(libc::RLIMIT_NPROC, limit)
    }

    fn rlimit(mut self, resource: libc::__rlimit_resource_t, limit: u64) -> Cp {
        // SAFETY: as in `run_as`: only setrlimit, on a stack value, in the child before exec.
        unsafe {
            self.cmd.pre_exec(move || {
                let rl = libc::rlimit {
                    rlim_cur: limit as _,
                    rlim_max: limit as _,
                };
                if libc::setrlimit(resource, &rl) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        self
    }

    /// Runs the child under a seccomp filter that fails `io_uring_setup` with EPERM, as
    /// Docker's default profile does. x86_64 only (the filter matches that syscall number).
    #[cfg(target_arch = "x86_64")]
    pub fn without_io_uring(self) -> Cp {
        self.seccomp(vec![
            bpf(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, SECCOMP_NR),
            bpf(
                libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
                0,
                1,
                libc::SYS_io_uring_setup as u32,
            ),
            bpf(
                libc::BPF_RET | libc::BPF_K,
                0,
                0,
                libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
            ),
            bpf(libc::BPF_RET | libc::BPF_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        ])
    }

    /// Runs the child under a seccomp filter that fails `lseek(fd, offset, whence)` with
    /// `errno` (SEEK_DATA or SEEK_HOLE: a filesystem whose hole search fails). x86_64 only.
    #[cfg(target_arch = "x86_64")]
    pub fn failing_seek(self, whence: i32, errno: i32) -> Cp {
        self.seccomp(vec![
            bpf(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, SECCOMP_NR),
            bpf(
                libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
                0,
                3,
                libc::SYS_lseek as u32,
            ),
            bpf(
                libc::BPF_LD | libc::BPF_W | libc::BPF_ABS,
                0,
                0,
                SECCOMP_ARG2,
            ),
            bpf(
                libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
                0,
                1,
                whence as u32,
            ),
            bpf(
                libc::BPF_RET | libc::BPF_K,
                0,
                0,
                libc::SECCOMP_RET_ERRNO | errno as u32,
            ),
            bpf(libc::BPF_RET | libc::BPF_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        ])
    }

    /// Runs the child under the seccomp `filter`.
    fn seccomp(mut self, filter: Vec<libc::sock_filter>) -> Cp {
        // SAFETY: only prctl calls on values the closure owns, in the child before exec.
        unsafe {
            self.cmd.pre_exec(move || {
                let prog = libc::sock_fprog {
                    len: filter.len() as u16,
                    filter: filter.as_ptr() as *mut _,
                };
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || libc::prctl(
                        libc::PR_SET_SECCOMP,
                        libc::SECCOMP_MODE_FILTER,
                        &prog as *const _,
                    ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        self
    }

    /// The command line, for messages.
    pub fn shown(&self) -> String {
        self.shown
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    }

    pub fn spawn(mut self) -> Running {
        let shown = self.shown();
        eprintln!("running: {shown}");
        self.cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = self
            .cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {shown}: {e}"));
        let stdout = drain(child.stdout.take().expect("piped stdout"));
        let stderr = drain(child.stderr.take().expect("piped stderr"));
        Running {
            child,
            stdout,
            stderr,
            shown,
            timeout: self.timeout,
            started: Instant::now(),
        }
    }

    /// Runs to completion; panics (after killing the child) if it outlives the timeout.
    pub fn run(self) -> Output {
        self.spawn().wait()
    }

    /// Runs with stdout a pipe of one page that is read only after `mid_run(pid)` returns:
    /// a run that prints more than a page (`-v`, `-i` over a tree of many entries) is held
    /// mid-run, blocked on its output, however fast the machine. `mid_run` is called once the
    /// first output arrived (the run is under way and cannot end before its output is read);
    /// then the rest is read and the output returned.
    pub fn run_held_by_stdout(mut self, mid_run: impl FnOnce(libc::pid_t)) -> Output {
        use std::os::fd::AsRawFd;
        let shown = self.shown();
        eprintln!("running, held by its stdout: {shown}");
        self.cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = self
            .cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {shown}: {e}"));
        let mut stdout = child.stdout.take().expect("piped stdout");
        // SAFETY: fcntl on a pipe descriptor this process owns; no memory is passed.
        let page = unsafe { libc::fcntl(stdout.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) };
        assert!(page > 0, "F_SETPIPE_SZ: {}", io::Error::last_os_error());
        let stderr = drain(child.stderr.take().expect("piped stderr"));
        let mut first = vec![0u8; 1];
        let n = stdout.read(&mut first).expect("read the child's stdout");
        assert_eq!(n, 1, "{shown} printed nothing");
        mid_run(child.id() as libc::pid_t);
        let rest = drain(stdout);
        let running = Running {
            child,
            stdout: rest,
            stderr,
            shown,
            timeout: self.timeout,
            started: Instant::now(),
        };
        let mut out = running.wait();
        first.extend_from_slice(&out.stdout);
        out.stdout = first;
        out
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        buf
    })
}

/// A child started by [`Cp::spawn`].
#[derive(Debug)]
pub struct Running {
    child: Child,
    stdout: JoinHandle<Vec<u8>>,
    stderr: JoinHandle<Vec<u8>>,
    shown: String,
    timeout: Duration,
    started: Instant,
}

impl Running {
    pub fn pid(&self) -> libc::pid_t {
        self.child.id() as libc::pid_t
    }

    /// The exit status, if the child has exited.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// Waits for at most `limit`; `None` if the child is still running then.
    pub fn wait_status(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.try_status() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// For a child run with `RINGIO_TEST_HOLD_DIR=hold`, which holds before and after each
    /// source it opens until the marker file it made there is removed: calls `at_hold(k)` at
    /// the k-th hold (from 1) while the child waits, then lets it go on. Returns its output
    /// once it exits.
    pub fn serve_holds(mut self, hold: &Path, mut at_hold: impl FnMut(usize)) -> Output {
        let mut holds = 0;
        loop {
            if self.try_status().is_some() {
                return self.wait();
            }
            let marker = hold.join((holds + 1).to_string());
            if !marker.exists() {
                assert!(
                    self.started.elapsed() < self.timeout,
                    "timed out waiting for {} to hold or exit",
                    self.shown
                );
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            holds += 1;
            at_hold(holds);
            std::fs::remove_file(&marker).expect("remove the hold marker");
        }
    }

    /// Waits for the end and collects the output; kills the child and panics on timeout.
    pub fn wait(mut self) -> Output {
        let left = self.timeout.saturating_sub(self.started.elapsed());
        let status = self.wait_status(left);
        let Some(status) = status else {
            let _ = self.child.kill();
            let _ = self.child.wait();
            let stderr = self.stderr.join().unwrap_or_default();
            panic!(
                "timed out after {:?}, killed: {}\nstderr: {}",
                self.timeout,
                self.shown,
                String::from_utf8_lossy(&stderr)
            );
        };
        Output {
            status,
            stdout: self.stdout.join().expect("stdout reader"),
            stderr: self.stderr.join().expect("stderr reader"),
        }
    }
}

/// Set in a test binary run by [`isolated`]: the name of the one test it runs.
const ISOLATED: &str = "RINGIO_TEST_ISOLATED";

/// Runs the test `name` (its path in this binary, e.g. `cp_memory::f::uring`) in a process of
/// its own: this test binary again, running that test alone. In that process this returns
/// true, and the caller goes on with the test's work; in the calling one it returns false once
/// the other process has passed, and panics with its output if it failed.
///
/// For tests that measure something of the whole test process, which the binary's other tests
/// running beside them would disturb: a child's peak RSS (`ru_maxrss`) counts its parent's
/// resident set at the fork, so the parent must be a process that runs nothing else.
pub fn isolated(name: &str) -> bool {
    if std::env::var_os(ISOLATED).is_some_and(|v| v == name) {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(ISOLATED, name)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {name} in a process of its own: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "{name}, run in a process of its own, failed: {}",
        describe(&out)
    );
    // A name that matches no test runs nothing, and passes.
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{name}: no such test in this binary\n{stdout}"
    );
    false
}

/// `ringio ARGS...` (no `cp`), to completion.
pub fn ringio<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Cp::bare().args(args).run()
}

/// True when `cp` on PATH is GNU cp, the reference the tests compare with. In CI its absence
/// fails the test ([`super::cannot_run`]).
pub fn gnu_cp_available() -> bool {
    let gnu = Command::new("cp")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("GNU coreutils"))
        .unwrap_or(false);
    if !gnu {
        super::cannot_run("GNU cp is not the `cp` on PATH (apt-get install coreutils)");
    }
    gnu
}

/// GNU `cp ARGS...` run in `cwd`.
pub fn gnu_cp<I, S>(cwd: &Path, args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = Command::new("cp")
        .args(args)
        .current_dir(cwd)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
        .expect("run GNU cp");
    eprintln!("GNU cp: {}", describe(&out));
    out
}

/// Status, stdout and stderr, for failure messages.
pub fn describe(out: &Output) -> String {
    let status = match (out.status.code(), out.status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => format!("{:?}", out.status),
    };
    format!(
        "{status}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Exit status 0 and nothing on stderr: cp is silent when all goes well.
#[track_caller]
pub fn assert_success(out: &Output) {
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "expected success with empty stderr, got {}",
        describe(out)
    );
}

#[track_caller]
pub fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "expected exit status {code}, got {}",
        describe(out)
    );
}

/// Asserts that `out`'s stderr holds `needle`.
#[track_caller]
pub fn assert_stderr_has(out: &Output, needle: &str) {
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(needle),
        "stderr lacks {needle:?}; got {}",
        describe(out)
    );
}

pub fn stderr_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Offsets in `struct seccomp_data`: the syscall number, and the low word of the third
/// argument (x86_64 is little-endian).
const SECCOMP_NR: u32 = 0;
const SECCOMP_ARG2: u32 = 16 + 2 * 8;

/// One instruction of a seccomp filter.
fn bpf(code: u32, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}
