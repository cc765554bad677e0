//! `ringio load`: verifying clients against an FSM server.

use ringio_copy::quote::quote;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Result};
use ringio_fsm::load::{
    self, LoadOptions, LoadReport, MAX_CLIENTS, MAX_DURATION, MAX_PIPELINE, MAX_RATE, MAX_TIMEOUT,
    MIN_DURATION, MIN_RATE,
};

use crate::units::{parse_duration, parse_whole};

/// Descriptors the load generator keeps for itself (stdio, the event loop, the JSON report),
/// beside one per client.
const OWN_DESCRIPTORS: u64 = 32;

/// `ringio load`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Every client runs on one event loop, checks every reply against its own \
copy of the state machine, and at the end sends 3 and expects d and a close. Wrong replies are \
errors. With --rate the load is open loop and latency counts from each request's due time \
(coordinated omission corrected).\n\n\
Every wait for the server has a deadline, --timeout: a connect, a batch's send and replies, \
and the goodbye (3, d and the close together). A client that waits longer is an error with the \
reason (e.g. `no reply within 5 s`), so a server that accepts and never answers, stops \
answering, or never closes ends the run at most about three timeouts past --duration. Once one \
connect gets no answer in time, the clients not yet connected are not tried.\n\n\
Exit status: 0 when every client connected and every reply was right; 1 when a client could \
not connect (or was turned away before its first reply), a reply was wrong or late, or the \
server did not close after d; 2 for a bad option."
)]
pub struct Args {
    /// The server (its port cannot be 0).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9090", value_parser = parse_server_addr)]
    pub addr: SocketAddr,
    /// Simultaneous clients: 1 to the descriptor limit (RLIMIT_NOFILE's hard limit, at most
    /// 1048576) less 32.
    #[arg(long, value_name = "N", default_value = "100", value_parser = parse_clients,
          allow_negative_numbers = true)]
    pub clients: usize,
    /// Length of the measured phase, e.g. 5s, 500ms: 1ms to 24h (1440m).
    #[arg(long, value_name = "T", default_value = "5s", value_parser = parse_load_duration,
          allow_negative_numbers = true)]
    pub duration: Duration,
    /// Actions per write (pipelining depth): 1 to 4096, and clients × pipeline at most
    /// 268435456.
    #[arg(long, value_name = "K", default_value = "1", value_parser = parse_pipeline,
          allow_negative_numbers = true)]
    pub pipeline: usize,
    /// Open loop: this many requests per second in all, 0.001 to 1e9.
    #[arg(long, value_name = "R", value_parser = parse_rate, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// The longest wait for the server (a connect, a batch's replies, the goodbye), e.g. 2s:
    /// 1ms to 1h (60m).
    #[arg(long, value_name = "T", default_value = "5s", value_parser = parse_timeout,
          allow_negative_numbers = true)]
    pub timeout: Duration,
    /// Write the report as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The load generator: tokio tasks (any loop), or one bare epoll loop (closed loop only;
    /// cheaper per round trip, for loading a server to its own limit).
    #[arg(long, value_name = "ENGINE", default_value = "tokio", value_parser = ["tokio", "epoll"])]
    pub engine: String,
    /// Also report the CPU time this process (the server) used in the measured phase; it must
    /// exist when the load starts.
    #[arg(long, value_name = "PID", value_parser = parse_pid, allow_negative_numbers = true)]
    pub watch_pid: Option<u32>,
}

/// `--addr`: a socket address a server can listen on, so not port 0.
fn parse_server_addr(text: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = text
        .trim()
        .parse()
        .map_err(|_| "not an address and port (e.g. 127.0.0.1:9090, [::1]:9090)".to_string())?;
    if addr.port() == 0 {
        return Err("port 0 is no server's port".into());
    }
    Ok(addr)
}

/// `--clients` (here and in `bench server`): each client holds a socket, so the bound is the
/// descriptor limit this process can raise itself to, less its own.
pub fn parse_clients(text: &str) -> Result<usize, String> {
    // Raising now is what `run` does first anyway; the limit it reaches is the real bound.
    let limit = ringio_base::limits::raise_nofile_limit();
    let max = limit
        .saturating_sub(OWN_DESCRIPTORS)
        .clamp(1, MAX_CLIENTS as u64);
    let n = parse_whole(text, 1, MAX_CLIENTS as u64)?;
    if n > max {
        return Err(format!(
            "more clients than this process may hold sockets for: at most {max} (RLIMIT_NOFILE \
             {limit}, less {OWN_DESCRIPTORS} descriptors of its own)"
        ));
    }
    Ok(n as usize)
}

/// `--pipeline`.
pub fn parse_pipeline(text: &str) -> Result<usize, String> {
    parse_whole(text, 1, MAX_PIPELINE as u64).map(|n| n as usize)
}

/// `--rate`: requests per second, finite and within the range a schedule can hold.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|r| (MIN_RATE..=MAX_RATE).contains(r))
        .ok_or_else(|| {
            format!("must be a number of requests per second from {MIN_RATE} to {MAX_RATE:e}")
        })
}

/// A duration within `min..=max`; anything else (no duration, or one out of range, `inf`,
/// `nan`, `-1`, `1e-300`) gets the one message that shows the range and the syntax.
fn parse_duration_within(text: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    parse_duration(text)
        .ok()
        .filter(|d| (min..=max).contains(d))
        .ok_or_else(|| {
            format!(
                "must be a duration from {} to {} (e.g. 5s, 500ms, 2m)",
                typed(min),
                typed(max)
            )
        })
}

/// A duration as it is typed on the command line: `1ms`, `5s`, `1440m`.
fn typed(d: Duration) -> String {
    if d.subsec_nanos() != 0 {
        format!("{}ms", d.as_millis())
    } else if d.as_secs() % 60 == 0 {
        format!("{}m", d.as_secs() / 60)
    } else {
        format!("{}s", d.as_secs())
    }
}

/// `--duration`.
pub fn parse_load_duration(text: &str) -> Result<Duration, String> {
    parse_duration_within(text, MIN_DURATION, MAX_DURATION)
}

/// `--timeout`.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    parse_duration_within(text, MIN_DURATION, MAX_TIMEOUT)
}

/// `--watch-pid`: a process that exists now.
fn parse_pid(text: &str) -> Result<u32, String> {
    let pid = parse_whole(text, 1, i32::MAX as u64)? as i32;
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    if unsafe { libc::kill(pid, 0) } < 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    {
        return Err("no process has this id".into());
    }
    Ok(pid as u32)
}

pub fn run(args: &Args) -> Result<i32> {
    // Servers and load generators hold a socket per client.
    ringio_base::limits::raise_nofile_limit();
    let opts = LoadOptions {
        addr: args.addr,
        clients: args.clients,
        duration: args.duration,
        pipeline: args.pipeline,
        rate: args.rate,
        timeout: args.timeout,
        connect_concurrency: 256,
        watch_pid: args.watch_pid,
    };
    // Each option was checked alone when parsed; this catches the combinations.
    if let Err(why) = opts.check() {
        eprintln!("ringio load: {why}");
        return Ok(2);
    }
    if args.engine == "epoll" && args.rate.is_some() {
        eprintln!(
            "ringio load: --rate needs --engine tokio: the epoll engine runs closed loop only"
        );
        return Ok(2);
    }
    let report = if args.engine == "epoll" {
        ringio_fsm::load_epoll::run(&opts)?
    } else {
        load::run(&opts)?
    };
    print_report(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .map_err(|e| anyhow!("cannot write {}: {e}", quote(&path)))?;
    }
    Ok(verdict(&report, args))
}

/// The exit status, with a line on stderr saying what went wrong.
fn verdict(r: &LoadReport, args: &Args) -> i32 {
    let refusal = r.first_refusal.as_deref().unwrap_or("?");
    if r.connected == 0 {
        eprintln!(
            "ringio load: no client could connect to {} ({refusal}); is a server running there?",
            args.addr
        );
        return 1;
    }
    let mut failed = false;
    if r.refused > 0 {
        eprintln!(
            "ringio load: {} of {} clients could not connect or were turned away ({refusal})",
            r.refused, args.clients
        );
        failed = true;
    }
    if r.errors > 0 {
        eprintln!(
            "ringio load: {} errors: wrong or late replies, or failed connections (first: {})",
            r.errors,
            r.first_failure.as_deref().unwrap_or("?")
        );
        failed = true;
    }
    i32::from(failed)
}

pub fn print_report(r: &LoadReport) {
    println!(
        "clients {} connected, {} refused; requests {}, responses {}, errors {}",
        r.connected, r.refused, r.requests, r.responses, r.errors
    );
    println!(
        "{:.0} req/s, {:.0} resp/s over {:.1} s",
        r.req_per_s, r.resp_per_s, r.seconds
    );
    let l = r.latency_us;
    println!(
        "latency us: p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
        l.p50, l.p90, l.p99, l.p999, l.max
    );
    let per_response = |cpu: f64| cpu * 1e6 / (r.responses.max(1) as f64);
    let mut cpu = format!(
        "cpu s: load generator {:.3} ({:.2} us a response)",
        r.cpu_s,
        per_response(r.cpu_s)
    );
    if let Some(server) = r.watched_cpu_s {
        cpu.push_str(&format!(
            ", watched server {server:.3} ({:.2} us a response)",
            per_response(server)
        ));
    }
    println!("{cpu}");
    for e in &r.first_errors {
        println!("error: {e}");
    }
}
