//! `ringio load`: many verifying clients on one tokio thread. Each client sends random actions
//! from {0, 1, 2}, checks every reply against its own copy of the state machine, and at the end
//! sends 3 and expects 'd' and the connection closed.
//!
//! Closed loop by default: a client sends its next batch (`pipeline` actions) when the replies
//! to the last one are in. With a rate, the load is open: each client has a schedule, and a
//! request's latency counts from when it was due, not from when it was sent, so a stalled
//! server shows up in the latencies instead of hiding behind the clients' patience
//! (coordinated omission).

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use ringio_lab::Prng;

use crate::protocol::Session;

/// What the load is.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// The server.
    pub addr: SocketAddr,
    /// Simultaneous clients.
    pub clients: usize,
    /// How long the measured phase lasts (after every client connected).
    pub duration: Duration,
    /// Actions per batch, sent in one write.
    pub pipeline: usize,
    /// Open loop at this many requests per second in all, or closed loop when `None`.
    pub rate: Option<f64>,
    /// Clients connecting at once.
    pub connect_concurrency: usize,
    /// A process (the server) whose CPU time over the measured phase is reported as
    /// [`LoadReport::watched_cpu_s`].
    pub watch_pid: Option<u32>,
}

/// What the load measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadReport {
    /// Clients that connected.
    pub connected: u64,
    /// Clients that could not connect, or whose connection the server closed before any reply
    /// (a model's limit turning them away).
    pub refused: u64,
    /// Actions sent in the measured phase.
    pub requests: u64,
    /// Replies received in it.
    pub responses: u64,
    /// Wrong replies, missing final 'd', connections that failed mid-run.
    pub errors: u64,
    /// Length of the measured phase.
    pub seconds: f64,
    /// Requests per second.
    pub req_per_s: f64,
    /// Responses per second.
    pub resp_per_s: f64,
    /// Latency percentiles in microseconds: p50, p90, p99, p99.9, max.
    pub latency_us: Latencies,
    /// The first few error descriptions.
    pub first_errors: Vec<String>,
    /// The load generator's own CPU time (user + system) over the measured phase, seconds.
    #[serde(default)]
    pub cpu_s: f64,
    /// The watched process's CPU time over the measured phase, seconds (see
    /// [`LoadOptions::watch_pid`]).
    #[serde(default)]
    pub watched_cpu_s: Option<f64>,
}

/// Latency percentiles, µs.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Latencies {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

/// The load could not run at all.
#[derive(Debug, thiserror::Error)]
#[error("cannot {op}: {source}")]
pub struct LoadError {
    /// What failed.
    pub op: &'static str,
    /// Why.
    #[source]
    pub source: io::Error,
}

struct ClientResult {
    connected: bool,
    refused: bool,
    requests: u64,
    responses: u64,
    errors: u64,
    error: Option<String>,
    hist: Histogram<u64>,
}

/// Runs the load and reports.
pub fn run(opts: &LoadOptions) -> Result<LoadReport, LoadError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| LoadError {
            op: "start the event loop",
            source,
        })?;
    rt.block_on(run_async(opts))
}

async fn run_async(opts: &LoadOptions) -> Result<LoadReport, LoadError> {
    let clients = opts.clients.max(1);
    let pipeline = opts.pipeline.max(1);
    // Connect everyone first, a bounded number at a time, so the measured phase is all load.
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(opts.connect_concurrency.max(1)));
    let (start_tx, start_rx) = tokio::sync::watch::channel::<Option<Instant>>(None);
    let mut tasks = Vec::with_capacity(clients);
    let (connected_tx, mut connected_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    for id in 0..clients {
        let gate = gate.clone();
        let mut start_rx = start_rx.clone();
        let connected_tx = connected_tx.clone();
        let (addr, duration, rate) = (opts.addr, opts.duration, opts.rate);
        tasks.push(tokio::spawn(async move {
            let stream = {
                let _permit = gate.acquire().await;
                tokio::time::timeout(
                    Duration::from_secs(10),
                    tokio::net::TcpStream::connect(addr),
                )
                .await
            };
            let _ = connected_tx.send(());
            let stream = match stream {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return ClientResult::refused(format!("connect: {e}")),
                Err(_) => return ClientResult::refused("connect: timed out".into()),
            };
            let start = loop {
                if let Some(t) = *start_rx.borrow() {
                    break t;
                }
                if start_rx.changed().await.is_err() {
                    return ClientResult::refused("never started".into());
                }
            };
            client(
                stream,
                id as u64,
                start,
                duration,
                pipeline,
                rate.map(|r| clients as f64 / r),
            )
            .await
        }));
    }
    drop(connected_tx);
    let mut n = 0;
    while n < clients && connected_rx.recv().await.is_some() {
        n += 1;
    }
    let start = Instant::now();
    let _ = start_tx.send(Some(start));
    // CPU times at both ends of the measured phase, taken on this (the only) thread.
    let (watch, duration) = (opts.watch_pid, opts.duration);
    let cpu_before = (own_cpu_s(), watch.and_then(process_cpu_s));
    let cpu_meter = tokio::spawn(async move {
        tokio::time::sleep_until((start + duration).into()).await;
        let after = (own_cpu_s(), watch.and_then(process_cpu_s));
        (
            after.0 - cpu_before.0,
            after.1.zip(cpu_before.1).map(|(a, b)| a - b),
        )
    });
    let mut hist = Histogram::<u64>::new(3).expect("valid precision");
    let mut report = LoadReport {
        connected: 0,
        refused: 0,
        requests: 0,
        responses: 0,
        errors: 0,
        seconds: 0.0,
        req_per_s: 0.0,
        resp_per_s: 0.0,
        latency_us: Latencies::default(),
        first_errors: Vec::new(),
        cpu_s: 0.0,
        watched_cpu_s: None,
    };
    for t in tasks {
        let r = t.await.map_err(|e| LoadError {
            op: "run a client",
            source: io::Error::other(e),
        })?;
        report.connected += u64::from(r.connected);
        report.refused += u64::from(r.refused);
        report.requests += r.requests;
        report.responses += r.responses;
        report.errors += r.errors;
        if let Some(e) = r.error {
            if report.first_errors.len() < 5 {
                report.first_errors.push(e);
            }
        }
        hist.add(&r.hist).expect("same precision");
    }
    (report.cpu_s, report.watched_cpu_s) = cpu_meter.await.unwrap_or((0.0, None));
    report.seconds = opts.duration.as_secs_f64();
    report.req_per_s = report.requests as f64 / report.seconds.max(1e-9);
    report.resp_per_s = report.responses as f64 / report.seconds.max(1e-9);
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    report.latency_us = Latencies {
        p50: us(0.5),
        p90: us(0.9),
        p99: us(0.99),
        p999: us(0.999),
        max: hist.max() as f64 / 1000.0,
    };
    Ok(report)
}

/// This process's CPU time (user + system), seconds.
pub(crate) fn own_cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct we pass.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}

/// Another process's CPU time (all its live threads), seconds: the nanosecond run times of
/// /proc/PID/task/*/schedstat, or, where those are missing, the clock ticks of /proc/PID/stat
/// (10 ms each: too coarse to tell 4.0 from 4.1 µs per round trip in a few seconds).
pub fn process_cpu_s(pid: u32) -> Option<f64> {
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        let mut ns = 0u64;
        let mut any = false;
        for task in tasks.flatten() {
            let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) else {
                continue;
            };
            if let Some(run) = text.split(' ').next().and_then(|f| f.parse::<u64>().ok()) {
                ns += run;
                any = true;
            }
        }
        if any {
            return Some(ns as f64 / 1e9);
        }
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split(' ');
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some((utime + stime) as f64 / hz)
}

impl ClientResult {
    fn new() -> Self {
        ClientResult {
            connected: true,
            refused: false,
            requests: 0,
            responses: 0,
            errors: 0,
            error: None,
            hist: Histogram::new(3).expect("valid precision"),
        }
    }

    fn refused(why: String) -> Self {
        ClientResult {
            connected: false,
            refused: true,
            error: Some(why),
            ..ClientResult::new()
        }
    }

    fn fail(mut self, why: String) -> Self {
        self.errors += 1;
        self.error.get_or_insert(why);
        self
    }
}

/// One client's measured phase and its goodbye.
async fn client(
    mut stream: tokio::net::TcpStream,
    id: u64,
    start: Instant,
    duration: Duration,
    pipeline: usize,
    interval: Option<f64>,
) -> ClientResult {
    let _ = stream.set_nodelay(true);
    let mut r = ClientResult::new();
    let mut model = Session::new();
    let mut rng = Prng::new(id);
    let deadline = start + duration;
    let mut actions = vec![0u8; pipeline];
    let mut expect = Vec::with_capacity(pipeline);
    let mut replies = vec![0u8; pipeline];
    // Open loop: client `id` is due every `interval` seconds, phase-shifted so clients spread.
    let mut due =
        interval.map(|iv| start + Duration::from_secs_f64(iv * ((id % 1000) as f64 / 1000.0)));
    loop {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        if let Some(t) = due {
            if t >= deadline {
                break;
            }
            if t > now {
                tokio::time::sleep_until(t.into()).await;
            }
        }
        for a in actions.iter_mut() {
            *a = b'0' + rng.below(3) as u8;
        }
        expect.clear();
        model.feed(&actions, &mut expect);
        let sent_at = Instant::now();
        if let Err(e) = stream.write_all(&actions).await {
            return r.fail(format!("send: {e}"));
        }
        r.requests += pipeline as u64;
        match stream.read_exact(&mut replies).await {
            Ok(_) => {}
            Err(e) => {
                if r.responses == 0 {
                    // Closed before any reply: the server turned this client away.
                    r.refused = true;
                    r.connected = false;
                    r.error = Some(format!("closed before any reply: {e}"));
                    return r;
                }
                return r.fail(format!("receive: {e}"));
            }
        }
        let latency_from = due.unwrap_or(sent_at);
        let ns = latency_from.elapsed().as_nanos() as u64;
        r.responses += pipeline as u64;
        for _ in 0..pipeline {
            let _ = r.hist.record(ns.max(1));
        }
        if replies != expect {
            let at = replies
                .iter()
                .zip(&expect)
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            r.errors += replies.iter().zip(&expect).filter(|(a, b)| a != b).count() as u64;
            r.error.get_or_insert(format!(
                "wrong reply: got '{}' where '{}' was due",
                replies[at] as char, expect[at] as char
            ));
        }
        if let (Some(t), Some(iv)) = (due.as_mut(), interval) {
            *t += Duration::from_secs_f64(iv);
        }
    }
    // Goodbye: 3 must get 'd', then the server closes.
    let mut last = [0u8; 1];
    if stream.write_all(b"3").await.is_err() || stream.read_exact(&mut last).await.is_err() {
        return r.fail("no reply to the final 3".into());
    }
    if last[0] != b'd' {
        return r.fail(format!("final 3 got '{}' instead of 'd'", last[0] as char));
    }
    match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut last)).await {
        Ok(Ok(0)) => r,
        Ok(Ok(_)) => r.fail("bytes after 'd'".into()),
        Ok(Err(e)) => r.fail(format!("after 'd': {e}")),
        Err(_) => r.fail("the server did not close after 'd'".into()),
    }
}
