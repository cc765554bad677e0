//! `ringio bench server`: every model at every client count, each in a fresh server process,
//! loaded by a separate load-generator process (`ringio load`), each pinned to its own CPU, so
//! the figures measure the server and not the load generator sharing its CPU.
//!
//! The server's CPU time over the measured phase is read from /proc/PID/task/*/schedstat (run
//! time in ns) by the load generator at both ends of that phase; the load generator's own CPU
//! time likewise from its rusage. A point where the load generator kept its CPU busy most of
//! the time is flagged as load-bound: its round trips/s say more about the load generator than
//! about the server.
//!
//! Every wait on a child has a deadline: the server's first line ([`SERVER_START_LIMIT`]), the
//! load generator's run (its duration and timeouts, plus [`LOAD_GRACE`]), the server's stop
//! after SIGTERM ([`SERVER_STOP_LIMIT`]). A child that outlives one is killed, and the point
//! fails with the reason.

use std::io::{self, BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::affinity::pin_current;
use crate::load::LoadReport;
use crate::Model;

/// A point whose load generator was busy at least this share of the measured phase is
/// load-bound.
pub const LOAD_BOUND_SHARE: f64 = 0.9;

/// How long a server may take to say where it listens.
pub const SERVER_START_LIMIT: Duration = Duration::from_secs(10);

/// How long a server may take to stop after SIGTERM (the models look at their stop flag
/// every 100 ms or so).
pub const SERVER_STOP_LIMIT: Duration = Duration::from_secs(10);

/// How long a load generator may run past its duration and four of its timeouts (connects,
/// the last batch, the goodbye, the join of its clients) before it is killed: room for
/// thousands of connects on a slow machine.
pub const LOAD_GRACE: Duration = Duration::from_secs(60);

/// Which load generator `ringio load` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadEngine {
    /// A tokio task per client ([`crate::load`]): closed or open loop.
    Tokio,
    /// One bare epoll loop ([`crate::load_epoll`]): closed loop only, about 13% less CPU per
    /// round trip.
    Epoll,
}

impl LoadEngine {
    /// The name `ringio load --engine` takes.
    pub fn name(self) -> &'static str {
        match self {
            LoadEngine::Tokio => "tokio",
            LoadEngine::Epoll => "epoll",
        }
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The `ringio` binary: it serves (`serve`) and loads (`load`).
    pub exe: PathBuf,
    /// Models, in order.
    pub models: Vec<Model>,
    /// Client counts.
    pub clients: Vec<usize>,
    /// Measured phase of each point.
    pub duration: Duration,
    /// Actions per write.
    pub pipeline: usize,
    /// The load generator's `--timeout`: its longest wait for the server.
    pub timeout: Duration,
    /// Open loop at this many requests per second in all (see [`crate::load`]): every model
    /// then does the same work, and CPU per round trip compares without the noise of a closed
    /// loop. Closed loop when `None`.
    pub rate: Option<f64>,
    /// The load generator (open loop always runs on tokio).
    pub load_engine: LoadEngine,
    /// Rounds: every model and client count once per round, round-robin.
    pub rounds: usize,
    /// The CPU the server runs on, or anywhere.
    pub server_cpu: Option<usize>,
    /// The CPU the load generator runs on, or anywhere.
    pub load_cpu: Option<usize>,
}

/// One model at one client count, one round.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Point {
    /// The model.
    pub model: String,
    /// Clients.
    pub clients: usize,
    /// The round, from 0.
    pub round: usize,
    /// What the load saw.
    pub load: LoadReport,
    /// Replies per second: round trips per second at pipeline 1.
    pub rt_per_s: f64,
    /// Server CPU time (user + system) over the measured phase, seconds.
    pub server_cpu_s: f64,
    /// Server CPU time over its whole life (connects and goodbyes too), from wait4.
    pub server_cpu_total_s: f64,
    /// Server CPU per reply over the measured phase, microseconds.
    pub server_cpu_us_per_rt: f64,
    /// Load generator CPU time over the measured phase, seconds.
    pub load_cpu_s: f64,
    /// Load generator CPU time over the phase's wall time (1.0: a CPU kept busy).
    pub load_cpu_share: f64,
    /// The load generator's engine.
    #[serde(default)]
    pub load_engine: String,
    /// The load generator was saturated: do not rank servers on this point.
    #[serde(default)]
    pub load_bound: bool,
    /// The CPU the server was pinned to.
    #[serde(default)]
    pub server_cpu: Option<usize>,
    /// The CPU the load generator was pinned to.
    #[serde(default)]
    pub load_cpu: Option<usize>,
}

/// The benchmark could not run.
#[derive(Debug, thiserror::Error)]
#[error("{model} with {clients} clients: cannot {op}: {source}")]
pub struct BenchError {
    /// The model.
    pub model: Model,
    /// The client count.
    pub clients: usize,
    /// What failed.
    pub op: &'static str,
    /// Why.
    #[source]
    pub source: io::Error,
}

/// Makes `cmd`'s child run on `cpu` from its first instruction.
fn pin_command(cmd: &mut Command, cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        // SAFETY: the closure runs between fork and exec and makes only the async-signal-safe
        // sched_setaffinity system call (pin_current allocates nothing).
        unsafe { cmd.pre_exec(move || pin_current(cpu)) };
    }
}

/// Waits for `child` and returns its raw exit status and CPU seconds (user + system).
fn reap(child: &Child) -> io::Result<(i32, f64)> {
    use std::os::unix::process::ExitStatusExt;
    let reaped = ringio_base::child::reap(child)?;
    Ok((reaped.status.into_raw(), reaped.cpu().as_secs_f64()))
}

/// Waits until `child` has exited or `by` has passed; true if it exited. The child is left
/// unreaped, so its pid stays its own and a kill after a false answer cannot hit another
/// process.
fn exited_by(child: &Child, by: Instant) -> io::Result<bool> {
    loop {
        // SAFETY: siginfo_t is plain old data; all-zero is a valid value, and si_pid stays 0
        // when no child has exited (WNOHANG).
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is valid for writes; WNOWAIT leaves the child unreaped.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                child.id(),
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // SAFETY: waitid filled `info` (or left it zeroed); si_pid reads its pid field.
        if unsafe { info.si_pid() } != 0 {
            return Ok(true);
        }
        if Instant::now() >= by {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reaps `child` if it exits by `by`; otherwise kills and reaps it and says so, naming what
/// it was doing.
fn reap_by(child: &Child, by: Instant, limit: Duration, doing: &str) -> io::Result<(i32, f64)> {
    if exited_by(child, by)? {
        return reap(child);
    }
    // SAFETY: signalling our own child, not yet reaped (exited_by leaves it so).
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = reap(child);
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        format!(
            "{doing} took more than {:.0} s; killed",
            limit.as_secs_f64()
        ),
    ))
}

/// The server's first line, `listening on ADDR`, read within [`SERVER_START_LIMIT`]. On
/// failure the server is killed and reaped.
fn server_address(server: &mut Child) -> io::Result<SocketAddr> {
    let stdout = server.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut line = String::new();
        let read = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(read.map(|_| line));
    });
    let got = rx.recv_timeout(SERVER_START_LIMIT);
    let kill = |server: &Child| {
        // SAFETY: signalling our own child, not yet reaped.
        unsafe { libc::kill(server.id() as i32, libc::SIGKILL) };
        let _ = reap(server);
    };
    let line = match got {
        Ok(Ok(line)) => line,
        Ok(Err(e)) => {
            kill(server);
            let _ = reader.join();
            return Err(e);
        }
        Err(_) => {
            // Killing it closes its stdout, which ends the reader.
            kill(server);
            let _ = reader.join();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("it said nothing within {} s", SERVER_START_LIMIT.as_secs()),
            ));
        }
    };
    let _ = reader.join();
    match line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse().ok())
    {
        Some(addr) => Ok(addr),
        None => {
            kill(server);
            Err(io::Error::other(format!("got {line:?}")))
        }
    }
}

/// Runs each model at each client count in a fresh `exe serve`, loaded by a fresh
/// `exe load` for `duration`, `rounds` times round-robin. `sequential` serves one client at a
/// time, so it runs only up to 10 clients.
pub fn run(
    opts: &BenchOptions,
    progress: &mut dyn FnMut(usize, Model, usize),
) -> Result<Vec<Point>, BenchError> {
    let mut points = Vec::new();
    for round in 0..opts.rounds.max(1) {
        for &model in &opts.models {
            for &n in &opts.clients {
                if model == Model::Sequential && n > 10 {
                    continue;
                }
                progress(round, model, n);
                points.push(one_point(opts, round, model, n)?);
            }
        }
    }
    Ok(points)
}

fn one_point(
    opts: &BenchOptions,
    round: usize,
    model: Model,
    n: usize,
) -> Result<Point, BenchError> {
    let err = |op| {
        move |source| BenchError {
            model,
            clients: n,
            op,
            source,
        }
    };
    let mut cmd = Command::new(&opts.exe);
    cmd.args(["serve", "--model", model.name(), "--addr", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    pin_command(&mut cmd, opts.server_cpu);
    let mut server = cmd.spawn().map_err(err("start the server"))?;
    let stop_server = |server: &Child| {
        // SAFETY: signalling our own child, not yet reaped.
        unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
        reap_by(
            server,
            Instant::now() + SERVER_STOP_LIMIT,
            SERVER_STOP_LIMIT,
            "stopping after SIGTERM",
        )
    };
    let addr = server_address(&mut server).map_err(err("read the server's address"))?;
    let json = std::env::temp_dir().join(format!(
        "ringio-bench-load-{}-{}-{n}-{round}.json",
        std::process::id(),
        model.name()
    ));
    let engine = if opts.rate.is_some() {
        LoadEngine::Tokio
    } else {
        opts.load_engine
    };
    let mut cmd = Command::new(&opts.exe);
    cmd.arg("load")
        .args(["--engine", engine.name()])
        .arg("--addr")
        .arg(addr.to_string())
        .arg("--clients")
        .arg(n.to_string())
        .arg("--duration")
        .arg(format!("{}ms", opts.duration.as_millis().max(1)))
        .arg("--pipeline")
        .arg(opts.pipeline.max(1).to_string())
        .arg("--timeout")
        .arg(format!("{}ms", opts.timeout.as_millis().max(1)))
        .args(
            opts.rate
                .map(|r| vec!["--rate".to_string(), r.to_string()])
                .unwrap_or_default(),
        )
        .arg("--watch-pid")
        .arg(server.id().to_string())
        .arg("--json")
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    pin_command(&mut cmd, opts.load_cpu);
    let load = match cmd.spawn() {
        Ok(load) => load,
        Err(e) => {
            let _ = stop_server(&server);
            return Err(err("start the load generator")(e));
        }
    };
    let load_limit = opts
        .duration
        .saturating_add(opts.timeout.saturating_mul(4))
        .saturating_add(LOAD_GRACE);
    let load_by = Instant::now()
        .checked_add(load_limit)
        // Past any clock's range: no deadline at all, as good as one that never comes.
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(1 << 40));
    let load_status = reap_by(&load, load_by, load_limit, "its run").map(|(status, _)| status);
    let (status, server_cpu_total_s) = stop_server(&server).map_err(err("wait for the server"))?;
    let load_status = load_status.map_err(err("wait for the load generator"))?;
    let report = read_report(&json);
    let _ = std::fs::remove_file(&json);
    let report = report.map_err(|e| {
        err("read the load generator's report")(io::Error::other(format!(
            "{e} (load exit status {load_status:#x})"
        )))
    })?;
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(err("stop the server")(io::Error::other(format!(
            "it ended with status {status:#x}"
        ))));
    }
    let server_cpu_s = report.watched_cpu_s.unwrap_or(server_cpu_total_s);
    let seconds = report.seconds.max(1e-9);
    let load_cpu_share = report.cpu_s / seconds;
    Ok(Point {
        model: model.name().to_string(),
        clients: n,
        round,
        rt_per_s: report.resp_per_s,
        server_cpu_us_per_rt: server_cpu_s * 1e6 / report.responses.max(1) as f64,
        server_cpu_s,
        server_cpu_total_s,
        load_cpu_s: report.cpu_s,
        load_cpu_share,
        load_engine: engine.name().to_string(),
        load_bound: load_cpu_share >= LOAD_BOUND_SHARE,
        server_cpu: opts.server_cpu,
        load_cpu: opts.load_cpu,
        load: report,
    })
}

fn read_report(path: &Path) -> io::Result<LoadReport> {
    let text = std::fs::read_to_string(path)?;
    serde_json::from_str(&text).map_err(io::Error::other)
}

/// Each model and client count over the rounds: the point of median round trips/s, with the
/// median server CPU per round trip and load CPU share, the errors of all rounds, and
/// load-bound if any round was. In first-seen order.
pub fn medians(points: &[Point]) -> Vec<Point> {
    let mut keys: Vec<(&str, usize)> = Vec::new();
    for p in points {
        if !keys.contains(&(p.model.as_str(), p.clients)) {
            keys.push((p.model.as_str(), p.clients));
        }
    }
    keys.into_iter()
        .map(|(model, clients)| {
            let mut same: Vec<&Point> = points
                .iter()
                .filter(|p| p.model == model && p.clients == clients)
                .collect();
            let median = |f: fn(&Point) -> f64| {
                let mut v: Vec<f64> = same.iter().map(|p| f(p)).collect();
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let (cpu, share) = (
                median(|p| p.server_cpu_us_per_rt),
                median(|p| p.load_cpu_share),
            );
            let errors = same.iter().map(|p| p.load.errors).sum();
            let load_bound = same.iter().any(|p| p.load_bound);
            same.sort_by(|a, b| a.rt_per_s.total_cmp(&b.rt_per_s));
            let mut m = same[same.len() / 2].clone();
            m.server_cpu_us_per_rt = cpu;
            m.load_cpu_share = share;
            m.load.errors = errors;
            m.load_bound = load_bound;
            m
        })
        .collect()
}
