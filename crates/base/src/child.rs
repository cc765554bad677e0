//! Running a child process and taking its resource usage from `wait4`, so that peak RSS, CPU
//! time, context switches and page faults are the child's own and nobody else's.

use std::io::{self, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// What one child run cost, from `wait4`'s rusage and a wall clock around spawn and reap.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Usage {
    /// Wall time from spawn to reap.
    pub wall: Duration,
    /// User CPU time.
    pub user: Duration,
    /// System CPU time.
    pub sys: Duration,
    /// Peak resident set size, in KiB.
    pub max_rss_kib: u64,
    /// Minor page faults.
    pub minor_faults: u64,
    /// Major page faults.
    pub major_faults: u64,
    /// Voluntary context switches.
    pub voluntary_switches: u64,
    /// Involuntary context switches.
    pub involuntary_switches: u64,
    /// The caller's resident size when it spawned the child, KiB: `max_rss_kib` is never below
    /// it (see [`run`]).
    #[serde(default)]
    pub rss_floor_kib: u64,
}

/// This process's resident set size, KiB.
fn own_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// A finished child: how it exited, what it printed, and what it cost.
#[derive(Debug)]
pub struct ChildRun {
    /// The exit status.
    pub status: ExitStatus,
    /// Everything it wrote to standard output.
    pub stdout: Vec<u8>,
    /// Everything it wrote to standard error.
    pub stderr: Vec<u8>,
    /// Its resource usage.
    pub usage: Usage,
}

impl ChildRun {
    /// Standard error as text, trimmed, for error messages.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).trim().to_string()
    }
}

/// Runs `cmd` to completion with stdin closed and stdout/stderr captured, and reaps it with
/// `wait4` to read its rusage. The peak RSS includes the caller's resident size at spawn (the
/// kernel bills the pre-exec memory to the child), so callers keep themselves small.
pub fn run(cmd: &mut Command) -> io::Result<ChildRun> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The child's peak RSS counts the memory it started with before exec, which is ours
    // (std spawns with CLONE_VM): reset our own peak to our current size first, so the figure
    // is the child's and not a past peak of the caller's.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let rss_floor_kib = own_rss_kib();
    let start = Instant::now();
    let mut child = cmd.spawn()?;
    let mut out_pipe = child.stdout.take().expect("stdout is piped");
    let mut err_pipe = child.stderr.take().expect("stderr is piped");
    // Drain both pipes while the child runs, so a chatty child never blocks on a full pipe.
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        err_pipe.read_to_end(&mut buf).map(|_| buf)
    });
    let mut stdout = Vec::new();
    out_pipe.read_to_end(&mut stdout)?;
    let stderr = err_reader
        .join()
        .map_err(|_| io::Error::other("stderr reader panicked"))??;

    let reaped = reap(&child)?;
    Ok(ChildRun {
        status: reaped.status,
        stdout,
        stderr,
        usage: Usage {
            wall: start.elapsed(),
            user: reaped.user,
            sys: reaped.sys,
            max_rss_kib: reaped.max_rss_kib,
            minor_faults: reaped.minor_faults,
            major_faults: reaped.major_faults,
            voluntary_switches: reaped.voluntary_switches,
            involuntary_switches: reaped.involuntary_switches,
            rss_floor_kib,
        },
    })
}

/// What `wait4` says about a child it reaped: how it ended, and its rusage.
#[derive(Debug, Clone, Copy)]
pub struct Reaped {
    /// The exit status.
    pub status: ExitStatus,
    /// User CPU time.
    pub user: Duration,
    /// System CPU time.
    pub sys: Duration,
    /// Peak resident set size, in KiB.
    pub max_rss_kib: u64,
    /// Minor page faults.
    pub minor_faults: u64,
    /// Major page faults.
    pub major_faults: u64,
    /// Voluntary context switches.
    pub voluntary_switches: u64,
    /// Involuntary context switches.
    pub involuntary_switches: u64,
}

impl Reaped {
    /// User plus system CPU time.
    pub fn cpu(&self) -> Duration {
        self.user + self.sys
    }
}

/// Waits for `child` with `wait4` (retrying EINTR) and returns its status and rusage. The
/// child must not have been waited for: std's `Child` is then never waited on again.
pub fn reap(child: &Child) -> io::Result<Reaped> {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain old data; all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `ru` are valid for writes; `pid` is our own unreaped child
        // (std's Child is never waited on, so nobody else reaps it).
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    use std::os::unix::process::ExitStatusExt;
    Ok(Reaped {
        status: ExitStatus::from_raw(status),
        user: tv(ru.ru_utime),
        sys: tv(ru.ru_stime),
        max_rss_kib: ru.ru_maxrss as u64,
        minor_faults: ru.ru_minflt as u64,
        major_faults: ru.ru_majflt as u64,
        voluntary_switches: ru.ru_nvcsw as u64,
        involuntary_switches: ru.ru_nivcsw as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_status_and_usage() {
        let run = run(Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"])).unwrap();
        assert_eq!(run.status.code(), Some(3));
        assert_eq!(run.stdout, b"out\n");
        assert_eq!(run.stderr_text(), "err");
        assert!(run.usage.max_rss_kib > 0);
        assert!(run.usage.wall > Duration::ZERO);
    }

    #[test]
    fn missing_program_is_an_error() {
        assert!(run(&mut Command::new("/nonexistent/ringio-test-tool")).is_err());
    }
}
