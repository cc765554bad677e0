//! `ringio load`: many verifying clients on one tokio thread. Each client sends random actions
//! from {0, 1, 2}, checks every reply against its own copy of the state machine, and at the end
//! sends 3 and expects 'd' and the connection closed.
//!
//! Closed loop by default: a client sends its next batch (`pipeline` actions) when the replies
//! to the last one are in. With a rate, the load is open: each client has a schedule, and a
//! request's latency counts from when it was due, not from when it was sent, so a stalled
//! server shows up in the latencies instead of hiding behind the clients' patience
//! (coordinated omission).
//!
//! Every wait has a deadline: a connect, a batch (its send and all its replies) and the goodbye
//! (3, 'd' and the close) may each take at most [`LoadOptions::timeout`]. A client that waits
//! longer is an error with the reason, so a server that stops answering ends the run at most
//! about three timeouts past its duration instead of holding it forever.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use ringio_base::Prng;

use crate::protocol::Session;

/// The most clients one run may hold: also the most descriptors `raise_nofile_limit` asks for.
pub const MAX_CLIENTS: usize = 1 << 20;

/// The deepest pipeline: a batch of this many actions goes out in one write on an empty
/// socket, and its replies stay far below what a server buffers for one client (64 KiB).
pub const MAX_PIPELINE: usize = 4096;

/// The most actions all clients may have in flight at once (clients × pipeline): each costs a
/// few bytes of buffers, so this bounds the generator's memory near 1 GiB.
pub const MAX_IN_FLIGHT: usize = 1 << 28;

/// The slowest open-loop rate, requests per second in all: with [`MAX_CLIENTS`] clients, a
/// client's interval is then about 33 years, still a valid time.
pub const MIN_RATE: f64 = 0.001;

/// The fastest open-loop rate, requests per second in all: one a nanosecond, the finest
/// interval a schedule can hold.
pub const MAX_RATE: f64 = 1e9;

/// The shortest measured phase, and the shortest timeout.
pub const MIN_DURATION: Duration = Duration::from_millis(1);

/// The longest measured phase: a day.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// The longest timeout: an hour.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// What the load is.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// The server.
    pub addr: SocketAddr,
    /// Simultaneous clients, 1 to [`MAX_CLIENTS`].
    pub clients: usize,
    /// How long the measured phase lasts (after every client connected), [`MIN_DURATION`] to
    /// [`MAX_DURATION`].
    pub duration: Duration,
    /// Actions per batch, sent in one write, 1 to [`MAX_PIPELINE`].
    pub pipeline: usize,
    /// Open loop at this many requests per second in all ([`MIN_RATE`] to [`MAX_RATE`]), or
    /// closed loop when `None`.
    pub rate: Option<f64>,
    /// The longest any one wait for the server may last: a connect, a send, a batch of
    /// replies, the goodbye. [`MIN_DURATION`] to [`MAX_TIMEOUT`].
    pub timeout: Duration,
    /// Clients connecting at once (at least 1).
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
    /// The first few error descriptions, refusals and failures alike.
    pub first_errors: Vec<String>,
    /// Why the first refused client was refused.
    #[serde(default)]
    pub first_refusal: Option<String>,
    /// What went wrong first for a client that connected.
    #[serde(default)]
    pub first_failure: Option<String>,
    /// The load generator's own CPU time (user + system) over the measured phase, seconds.
    #[serde(default)]
    pub cpu_s: f64,
    /// The watched process's CPU time over the measured phase, seconds (see
    /// [`LoadOptions::watch_pid`]).
    #[serde(default)]
    pub watched_cpu_s: Option<f64>,
}

impl LoadReport {
    /// A report with nothing counted yet.
    pub(crate) fn empty(seconds: f64) -> LoadReport {
        LoadReport {
            connected: 0,
            refused: 0,
            requests: 0,
            responses: 0,
            errors: 0,
            seconds,
            req_per_s: 0.0,
            resp_per_s: 0.0,
            latency_us: Latencies::default(),
            first_errors: Vec::new(),
            first_refusal: None,
            first_failure: None,
            cpu_s: 0.0,
            watched_cpu_s: None,
        }
    }

    /// Notes why a client was refused (the count is the caller's).
    pub(crate) fn note_refusal(&mut self, why: String) {
        self.first_refusal.get_or_insert_with(|| why.clone());
        self.note(why);
    }

    /// Notes why a connected client failed (the count is the caller's).
    pub(crate) fn note_failure(&mut self, why: String) {
        self.first_failure.get_or_insert_with(|| why.clone());
        self.note(why);
    }

    fn note(&mut self, why: String) {
        if self.first_errors.len() < 5 {
            self.first_errors.push(why);
        }
    }
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

impl LoadOptions {
    /// Why these options cannot run, naming the option and its range; `Ok` when they can.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_CLIENTS).contains(&self.clients) {
            return Err(format!(
                "--clients {}: must be from 1 to {MAX_CLIENTS}",
                self.clients
            ));
        }
        if !(1..=MAX_PIPELINE).contains(&self.pipeline) {
            return Err(format!(
                "--pipeline {}: must be from 1 to {MAX_PIPELINE}",
                self.pipeline
            ));
        }
        if !(MIN_DURATION..=MAX_DURATION).contains(&self.duration) {
            return Err(format!(
                "--duration {}: must be from {} to {}",
                spoken(self.duration),
                spoken(MIN_DURATION),
                spoken(MAX_DURATION)
            ));
        }
        if !(MIN_DURATION..=MAX_TIMEOUT).contains(&self.timeout) {
            return Err(format!(
                "--timeout {}: must be from {} to {}",
                spoken(self.timeout),
                spoken(MIN_DURATION),
                spoken(MAX_TIMEOUT)
            ));
        }
        if let Some(rate) = self.rate {
            if !(MIN_RATE..=MAX_RATE).contains(&rate) {
                return Err(format!(
                    "--rate {rate}: must be from {MIN_RATE} to {MAX_RATE} requests per second"
                ));
            }
        }
        if self.connect_concurrency == 0 {
            return Err("connect concurrency 0: must be at least 1".into());
        }
        let in_flight = self.clients.saturating_mul(self.pipeline);
        if in_flight > MAX_IN_FLIGHT {
            return Err(format!(
                "--clients {} with --pipeline {}: {in_flight} actions in flight, more than \
                 {MAX_IN_FLIGHT}; use fewer clients or a shallower pipeline",
                self.clients, self.pipeline
            ));
        }
        Ok(())
    }
}

/// A duration as messages say it: `2 s`, `1.5 s`, `250 ms`.
pub fn spoken(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        let s = format!("{:.3}", d.as_secs_f64());
        format!("{} s", s.trim_end_matches('0').trim_end_matches('.'))
    } else if d.subsec_nanos() % 1_000_000 == 0 {
        format!("{} ms", d.as_millis())
    } else {
        format!("{} us", d.as_micros())
    }
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
    opts.check().map_err(|why| LoadError {
        op: "start the load",
        source: io::Error::new(io::ErrorKind::InvalidInput, why),
    })?;
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
    let (clients, pipeline, timeout) = (opts.clients, opts.pipeline, opts.timeout);
    // Open loop: each client is due every `clients / rate` seconds. check() bounds the rate so
    // that this is a valid time, but a schedule that cannot be held is an error, not a panic.
    let interval = match opts.rate {
        Some(rate) => Some(
            Duration::try_from_secs_f64(clients as f64 / rate).map_err(|e| LoadError {
                op: "schedule the open loop",
                source: io::Error::new(io::ErrorKind::InvalidInput, e),
            })?,
        ),
        None => None,
    };
    // Connect everyone first, a bounded number at a time, so the measured phase is all load.
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(opts.connect_concurrency));
    // Set when a connect got no answer in time: a server that stopped accepting would make
    // every later client wait out its own timeout, a batch of them after another.
    let stalled = std::sync::Arc::new(AtomicBool::new(false));
    let (start_tx, start_rx) = tokio::sync::watch::channel::<Option<Instant>>(None);
    let mut tasks = Vec::with_capacity(clients);
    let (connected_tx, mut connected_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    for id in 0..clients {
        let (gate, stalled) = (gate.clone(), stalled.clone());
        let mut start_rx = start_rx.clone();
        let connected_tx = connected_tx.clone();
        let (addr, duration) = (opts.addr, opts.duration);
        tasks.push(tokio::spawn(async move {
            let stream = {
                let _permit = gate.acquire().await;
                if stalled.load(Ordering::Relaxed) {
                    None
                } else {
                    let attempt =
                        tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await;
                    if attempt.is_err() {
                        stalled.store(true, Ordering::Relaxed);
                    }
                    Some(attempt)
                }
            };
            let _ = connected_tx.send(());
            let stream = match stream {
                Some(Ok(Ok(s))) => s,
                Some(Ok(Err(e))) => return ClientResult::refused(format!("connect: {e}")),
                Some(Err(_)) => {
                    return ClientResult::refused(format!(
                        "connect: no answer within {}",
                        spoken(timeout)
                    ))
                }
                None => {
                    return ClientResult::refused(format!(
                        "connect: not tried, an earlier connect got no answer within {}",
                        spoken(timeout)
                    ))
                }
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
                Schedule {
                    start,
                    duration,
                    interval,
                },
                pipeline,
                timeout,
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
    let mut report = LoadReport::empty(opts.duration.as_secs_f64());
    // Each client's waits are bounded, so it ends by the last batch's send and replies plus
    // the goodbye past the deadline; a second to spare, and any client still running then is
    // cut off rather than waited for.
    let join_by = start + duration + 3 * timeout + Duration::from_secs(1);
    for mut t in tasks {
        let r = match tokio::time::timeout_at(join_by.into(), &mut t).await {
            Ok(joined) => joined.map_err(|e| LoadError {
                op: "run a client",
                source: io::Error::other(e),
            })?,
            Err(_) => {
                t.abort();
                ClientResult::new().fail(format!(
                    "still running {} after the measured phase; cut off",
                    spoken(join_by - (start + duration))
                ))
            }
        };
        report.connected += u64::from(r.connected);
        report.refused += u64::from(r.refused);
        report.requests += r.requests;
        report.responses += r.responses;
        report.errors += r.errors;
        match r.error {
            Some(e) if r.refused => report.note_refusal(e),
            Some(e) => report.note_failure(e),
            None => {}
        }
        hist.add(&r.hist).expect("same precision");
    }
    (report.cpu_s, report.watched_cpu_s) = if cpu_meter.is_finished() {
        cpu_meter.await.unwrap_or((0.0, None))
    } else {
        // Every client ended before the deadline (a server that stopped answering, say):
        // the run ends now rather than idle to the deadline.
        cpu_meter.abort();
        let after = (own_cpu_s(), watch.and_then(process_cpu_s));
        (
            after.0 - cpu_before.0,
            after.1.zip(cpu_before.1).map(|(a, b)| a - b),
        )
    };
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

/// When a client's measured phase runs, and how often it is due in an open loop.
#[derive(Clone, Copy)]
struct Schedule {
    start: Instant,
    duration: Duration,
    /// Open loop: the time between a client's requests; closed loop when `None`.
    interval: Option<Duration>,
}

/// One client's measured phase and its goodbye.
async fn client(
    mut stream: tokio::net::TcpStream,
    id: u64,
    schedule: Schedule,
    pipeline: usize,
    timeout: Duration,
) -> ClientResult {
    let _ = stream.set_nodelay(true);
    let mut r = ClientResult::new();
    let mut model = Session::new();
    let mut rng = Prng::new(id);
    let Schedule {
        start,
        duration,
        interval,
    } = schedule;
    let deadline = start + duration;
    let mut actions = vec![0u8; pipeline];
    let mut expect = Vec::with_capacity(pipeline);
    let mut replies = vec![0u8; pipeline];
    // Open loop: client `id` is due every `interval`, phase-shifted so clients spread.
    let mut due = interval.map(|iv| start + iv.mul_f64((id % 1000) as f64 / 1000.0));
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
        // The batch and all its replies within one timeout of sending.
        let answer_by = sent_at + timeout;
        match tokio::time::timeout_at(answer_by.into(), stream.write_all(&actions)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return r.fail(format!("send: {e}")),
            Err(_) => {
                return r.fail(format!(
                    "send: blocked for {} (the server is not reading)",
                    spoken(timeout)
                ))
            }
        }
        r.requests += pipeline as u64;
        match read_replies(&mut stream, &mut replies, answer_by).await {
            Ok(()) => {}
            Err(Unanswered::Closed { got: 0 }) if r.responses == 0 => {
                // Closed before any reply: the server turned this client away.
                r.refused = true;
                r.connected = false;
                r.error = Some("closed before any reply".into());
                return r;
            }
            Err(Unanswered::Closed { got }) => {
                return r.fail(format!(
                    "receive: connection closed after {got} of {pipeline} replies"
                ))
            }
            Err(Unanswered::Failed(e)) => return r.fail(format!("receive: {e}")),
            Err(Unanswered::Late { got: 0 }) => {
                return r.fail(format!("no reply within {}", spoken(timeout)))
            }
            Err(Unanswered::Late { got }) => {
                return r.fail(format!(
                    "only {got} of {pipeline} replies within {}",
                    spoken(timeout)
                ))
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
                replies[at].escape_ascii(),
                expect[at] as char
            ));
        }
        if let (Some(t), Some(iv)) = (due.as_mut(), interval) {
            *t += iv;
        }
    }
    // Goodbye: 3 must get 'd', then the server closes, all within one timeout.
    let bye_by = Instant::now() + timeout;
    match tokio::time::timeout_at(bye_by.into(), stream.write_all(b"3")).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return r.fail(format!("send the final 3: {e}")),
        Err(_) => {
            return r.fail(format!(
                "send the final 3: blocked for {} (the server is not reading)",
                spoken(timeout)
            ))
        }
    }
    let mut last = [0u8; 1];
    match read_replies(&mut stream, &mut last, bye_by).await {
        Ok(()) => {}
        Err(Unanswered::Closed { .. }) => {
            return r.fail("closed without replying to the final 3".into())
        }
        Err(Unanswered::Failed(e)) => return r.fail(format!("reply to the final 3: {e}")),
        Err(Unanswered::Late { .. }) => {
            return r.fail(format!(
                "no reply to the final 3 within {}",
                spoken(timeout)
            ))
        }
    }
    if last[0] != b'd' {
        return r.fail(format!(
            "final 3 got '{}' instead of 'd'",
            last[0].escape_ascii()
        ));
    }
    match tokio::time::timeout_at(bye_by.into(), stream.read(&mut last)).await {
        Ok(Ok(0)) => r,
        Ok(Ok(_)) => r.fail("bytes after 'd'".into()),
        Ok(Err(e)) => r.fail(format!("after 'd': {e}")),
        Err(_) => r.fail(format!(
            "the server did not close within {} of the final 3",
            spoken(timeout)
        )),
    }
}

/// Why a batch's replies did not all come.
enum Unanswered {
    /// The server closed the connection after `got` of them.
    Closed { got: usize },
    /// The deadline passed with `got` of them in.
    Late { got: usize },
    /// Receiving failed.
    Failed(io::Error),
}

/// Fills `buf` with replies, or says how far it got by `answer_by`.
async fn read_replies(
    stream: &mut tokio::net::TcpStream,
    buf: &mut [u8],
    answer_by: Instant,
) -> Result<(), Unanswered> {
    let mut got = 0;
    while got < buf.len() {
        match tokio::time::timeout_at(answer_by.into(), stream.read(&mut buf[got..])).await {
            Ok(Ok(0)) => return Err(Unanswered::Closed { got }),
            Ok(Ok(n)) => got += n,
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Ok(Err(e)) => return Err(Unanswered::Failed(e)),
            Err(_) => return Err(Unanswered::Late { got }),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> LoadOptions {
        LoadOptions {
            addr: "127.0.0.1:9090".parse().unwrap(),
            clients: 100,
            duration: Duration::from_secs(1),
            pipeline: 1,
            rate: None,
            timeout: Duration::from_secs(5),
            connect_concurrency: 256,
            watch_pid: None,
        }
    }

    #[test]
    fn check_takes_each_option_at_its_bounds() {
        let ok = |f: fn(&mut LoadOptions)| {
            let mut o = options();
            f(&mut o);
            o.check()
        };
        assert!(ok(|_| {}).is_ok());
        assert!(ok(|o| o.clients = MAX_CLIENTS).is_ok());
        assert!(ok(|o| o.pipeline = MAX_PIPELINE).is_ok());
        assert!(ok(|o| o.rate = Some(MIN_RATE)).is_ok());
        assert!(ok(|o| o.rate = Some(MAX_RATE)).is_ok());
        assert!(ok(|o| o.duration = MAX_DURATION).is_ok());
        assert!(ok(|o| o.timeout = MAX_TIMEOUT).is_ok());
        for (bad, names) in [
            (ok(|o| o.clients = 0), "--clients 0"),
            (ok(|o| o.clients = usize::MAX), "--clients"),
            (ok(|o| o.pipeline = 0), "--pipeline 0"),
            (ok(|o| o.pipeline = usize::MAX), "--pipeline"),
            (ok(|o| o.rate = Some(0.0)), "--rate 0"),
            (ok(|o| o.rate = Some(f64::NAN)), "--rate NaN"),
            (ok(|o| o.rate = Some(f64::INFINITY)), "--rate inf"),
            (ok(|o| o.rate = Some(1e-300)), "--rate"),
            (ok(|o| o.rate = Some(-1.0)), "--rate -1"),
            (ok(|o| o.duration = Duration::ZERO), "--duration"),
            (ok(|o| o.duration = Duration::MAX), "--duration"),
            (ok(|o| o.timeout = Duration::ZERO), "--timeout"),
            (ok(|o| o.timeout = Duration::MAX), "--timeout"),
            (ok(|o| o.connect_concurrency = 0), "connect concurrency"),
        ] {
            let why = bad.expect_err(names);
            assert!(why.contains(names), "{why}");
        }
    }

    #[test]
    fn check_bounds_the_actions_in_flight() {
        let mut o = options();
        o.clients = MAX_CLIENTS;
        o.pipeline = MAX_PIPELINE;
        let why = o.check().unwrap_err();
        assert!(
            why.contains("--clients 1048576 with --pipeline 4096"),
            "{why}"
        );
        o.pipeline = MAX_IN_FLIGHT / MAX_CLIENTS;
        assert!(o.check().is_ok());
    }

    #[test]
    fn durations_are_spoken_plainly() {
        assert_eq!(spoken(Duration::from_secs(2)), "2 s");
        assert_eq!(spoken(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(spoken(Duration::from_millis(250)), "250 ms");
        assert_eq!(spoken(Duration::from_secs(86400)), "86400 s");
    }

    /// A run against options it cannot take is an error, not a panic.
    #[test]
    fn run_refuses_what_check_refuses() {
        let mut o = options();
        o.rate = Some(0.0);
        let e = run(&o).unwrap_err();
        assert!(e.to_string().contains("--rate 0"), "{e}");
    }
}
