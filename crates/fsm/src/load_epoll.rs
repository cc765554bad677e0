//! `ringio load --engine epoll`: the same verifying clients as [`crate::load`], closed loop
//! only, driven by one bare epoll loop instead of tokio tasks. It costs less CPU per round trip,
//! so on a small machine a pinned server can be loaded to its own limit instead of the load
//! generator's.
//!
//! Each client connects (blocking, one at a time, before the measured phase), sends `pipeline`
//! random actions from {0, 1, 2}, checks every reply against its own copy of the state machine,
//! and sends the next batch once the whole reply is in. After the deadline it sends 3 and
//! expects 'd' and the connection closed. As in [`crate::load`], every wait for the server (a
//! connect, a batch's replies, the goodbye) ends after [`LoadOptions::timeout`], and the client
//! is then an error with the reason.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::load::{
    own_cpu_s, process_cpu_s, spoken, Latencies, LoadError, LoadOptions, LoadReport,
};
use ringio_base::Prng;

use crate::protocol::Session;

/// How often the loop looks for clients whose wait ran out: a sweep visits every client, so
/// not on every wakeup.
const SWEEP_EVERY: Duration = Duration::from_millis(50);

#[derive(PartialEq, Eq)]
enum Phase {
    /// A batch is out; `got` of its replies are in.
    Waiting,
    /// The final 3 is out: 'd' is due, then the close.
    Goodbye,
    /// 'd' came: the close is due.
    Closing,
    Done,
}

struct Client {
    /// `None` once the client is done: closing it also takes it out of the epoll set, so a
    /// finished connection that stays readable cannot wake the loop again.
    stream: Option<TcpStream>,
    session: Session,
    rng: Prng,
    expect: Vec<u8>,
    got: usize,
    sent_at: Instant,
    /// When the wait in the current phase runs out.
    wait_until: Instant,
    phase: Phase,
    answered: bool,
}

/// Runs the load (closed loop; `opts.rate` is not supported here) and reports.
pub fn run(opts: &LoadOptions) -> Result<LoadReport, LoadError> {
    let fail = |op| move |source| LoadError { op, source };
    opts.check()
        .map_err(|why| fail("start the load")(io::Error::new(io::ErrorKind::InvalidInput, why)))?;
    if opts.rate.is_some() {
        return Err(fail("run an open loop")(io::Error::new(
            io::ErrorKind::Unsupported,
            "the epoll engine runs closed loop only; use the tokio engine with --rate",
        )));
    }
    let (pipeline, timeout) = (opts.pipeline, opts.timeout);
    // SAFETY: plain system call; the descriptor is owned below.
    let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if epfd < 0 {
        return Err(fail("create an epoll instance")(io::Error::last_os_error()));
    }
    // SAFETY: a new descriptor nobody else owns.
    let epfd = unsafe { OwnedFd::from_raw_fd(epfd) };
    let mut report = LoadReport::empty(opts.duration.as_secs_f64());
    let mut clients = Vec::with_capacity(opts.clients);
    // Once a connect gets no answer in time the server has stopped accepting: the clients
    // after it are not tried, or each would wait out a timeout of its own, one after another.
    let mut stalled = false;
    for id in 0..opts.clients as u64 {
        if stalled {
            report.refused += 1;
            report.note_refusal(format!(
                "connect: not tried, an earlier connect got no answer within {}",
                spoken(timeout)
            ));
            continue;
        }
        match TcpStream::connect_timeout(&opts.addr, timeout) {
            Ok(stream) => {
                report.connected += 1;
                let _ = stream.set_nodelay(true);
                stream
                    .set_nonblocking(true)
                    .map_err(fail("make a socket non-blocking"))?;
                let mut ev = libc::epoll_event {
                    events: libc::EPOLLIN as u32,
                    u64: clients.len() as u64,
                };
                // SAFETY: registering our own socket with our own epoll instance.
                if unsafe {
                    libc::epoll_ctl(
                        epfd.as_raw_fd(),
                        libc::EPOLL_CTL_ADD,
                        stream.as_raw_fd(),
                        &mut ev,
                    )
                } < 0
                {
                    return Err(fail("watch a socket")(io::Error::last_os_error()));
                }
                let now = Instant::now();
                clients.push(Client {
                    stream: Some(stream),
                    session: Session::new(),
                    rng: Prng::new(id),
                    expect: Vec::with_capacity(pipeline),
                    got: 0,
                    sent_at: now,
                    wait_until: now,
                    phase: Phase::Waiting,
                    answered: false,
                });
            }
            Err(e) => {
                report.refused += 1;
                let why = if e.kind() == io::ErrorKind::TimedOut {
                    stalled = true;
                    format!("connect: no answer within {}", spoken(timeout))
                } else {
                    format!("connect: {e}")
                };
                report.note_refusal(why);
            }
        }
    }
    let mut hist = Histogram::<u64>::new(3).expect("valid precision");
    let mut actions = vec![0u8; pipeline];
    let start = Instant::now();
    let deadline = start + opts.duration;
    let cpu_before = (own_cpu_s(), opts.watch_pid.and_then(process_cpu_s));
    let mut measured = false;
    let mut open = clients.len();
    for c in clients.iter_mut() {
        if let Err(e) = send_batch(c, &mut actions, &mut report, timeout) {
            end(c, &mut report, format!("send: {e}"));
            open -= 1;
        }
    }
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut buf = vec![0u8; 64 * 1024];
    // Each wait is bounded, so every client is done by its last batch's replies and its
    // goodbye past the deadline; this is the backstop should the sweeps miss one.
    let give_up = deadline + 2 * timeout + Duration::from_secs(1);
    let mut next_sweep = start + SWEEP_EVERY;
    while open > 0 {
        let now = Instant::now();
        if !measured && now >= deadline {
            measured = true;
            let after = (own_cpu_s(), opts.watch_pid.and_then(process_cpu_s));
            report.cpu_s = after.0 - cpu_before.0;
            report.watched_cpu_s = after.1.zip(cpu_before.1).map(|(a, b)| a - b);
        }
        if now >= give_up {
            for c in clients.iter_mut().filter(|c| c.phase != Phase::Done) {
                end(c, &mut report, "the server did not finish in time".into());
            }
            break;
        }
        if now >= next_sweep {
            next_sweep = now + SWEEP_EVERY;
            for c in clients.iter_mut() {
                if c.phase != Phase::Done && now >= c.wait_until {
                    let why = overdue(c, pipeline, timeout);
                    end(c, &mut report, why);
                    open -= 1;
                }
            }
            if open == 0 {
                break;
            }
        }
        let wait_ms = if measured { give_up } else { deadline }
            .min(next_sweep)
            .saturating_duration_since(now)
            .as_millis()
            .clamp(1, 100) as i32;
        // SAFETY: `events` has room for its length of entries.
        let n = unsafe {
            libc::epoll_wait(
                epfd.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as i32,
                wait_ms,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(fail("wait for replies")(e));
        }
        for ev in &events[..n as usize] {
            let c = &mut clients[ev.u64 as usize];
            let Some(stream) = c.stream.as_mut() else {
                continue;
            };
            let want = match c.phase {
                Phase::Waiting => pipeline - c.got,
                _ => buf.len(),
            };
            let got = match stream.read(&mut buf[..want]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => {
                    end(c, &mut report, format!("receive: {e}"));
                    open -= 1;
                    continue;
                }
            };
            if got == 0 {
                let why = match c.phase {
                    Phase::Closing => None,
                    Phase::Goodbye => Some("closed without replying to the final 3".to_string()),
                    _ if !c.answered => {
                        // Closed before any reply: the server turned this client away.
                        report.refused += 1;
                        report.connected -= 1;
                        close(c);
                        report.note_refusal("closed before any reply".into());
                        open -= 1;
                        continue;
                    }
                    _ => Some(format!(
                        "receive: connection closed after {} of {pipeline} replies",
                        c.got
                    )),
                };
                match why {
                    None => close(c),
                    Some(why) => end(c, &mut report, why),
                }
                open -= 1;
                continue;
            }
            match c.phase {
                Phase::Waiting => {
                    let from = c.got;
                    let wrong = buf[..got]
                        .iter()
                        .zip(&c.expect[from..from + got])
                        .filter(|(a, b)| a != b)
                        .count();
                    if wrong > 0 {
                        report.errors += wrong as u64;
                        report.note_failure("wrong reply".into());
                    }
                    c.answered = true;
                    c.got += got;
                    if c.got < pipeline {
                        continue;
                    }
                    let ns = c.sent_at.elapsed().as_nanos() as u64;
                    let _ = hist.record_n(ns.max(1), pipeline as u64);
                    report.responses += pipeline as u64;
                    let sent = if Instant::now() < deadline {
                        send_batch(c, &mut actions, &mut report, timeout)
                    } else {
                        c.phase = Phase::Goodbye;
                        // The goodbye, 'd' and the close together, within one timeout.
                        c.wait_until = Instant::now() + timeout;
                        stream.write_all(b"3")
                    };
                    if let Err(e) = sent {
                        end(c, &mut report, format!("send: {e}"));
                        open -= 1;
                    }
                }
                Phase::Goodbye => {
                    if buf[0] != b'd' || got > 1 {
                        end(c, &mut report, "final 3 did not get just 'd'".into());
                        open -= 1;
                    } else {
                        c.phase = Phase::Closing;
                    }
                }
                Phase::Closing => {
                    end(c, &mut report, "bytes after 'd'".into());
                    open -= 1;
                }
                Phase::Done => {}
            }
        }
    }
    if !measured {
        let after = (own_cpu_s(), opts.watch_pid.and_then(process_cpu_s));
        report.cpu_s = after.0 - cpu_before.0;
        report.watched_cpu_s = after.1.zip(cpu_before.1).map(|(a, b)| a - b);
    }
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

/// Sends the next batch of random actions, remembering the replies due.
fn send_batch(
    c: &mut Client,
    actions: &mut [u8],
    report: &mut LoadReport,
    timeout: Duration,
) -> io::Result<()> {
    for a in actions.iter_mut() {
        *a = b'0' + c.rng.below(3) as u8;
    }
    c.expect.clear();
    c.session.feed(actions, &mut c.expect);
    c.got = 0;
    c.sent_at = Instant::now();
    c.wait_until = c.sent_at + timeout;
    let Some(stream) = c.stream.as_mut() else {
        return Err(io::Error::from(io::ErrorKind::NotConnected));
    };
    // The replies to the last batch are all in, so the socket's send buffer is empty and a
    // batch this small (at most MAX_PIPELINE) goes out whole.
    let n = stream.write(actions)?;
    if n < actions.len() {
        return Err(io::Error::other("short send"));
    }
    report.requests += actions.len() as u64;
    Ok(())
}

/// What a client whose wait ran out was waiting for.
fn overdue(c: &Client, pipeline: usize, timeout: Duration) -> String {
    let within = spoken(timeout);
    match c.phase {
        Phase::Waiting if c.got == 0 => format!("no reply within {within}"),
        Phase::Waiting => format!("only {} of {pipeline} replies within {within}", c.got),
        Phase::Goodbye => format!("no reply to the final 3 within {within}"),
        Phase::Closing | Phase::Done => {
            format!("the server did not close within {within} of the final 3")
        }
    }
}

/// Ends a client without an error: closes its connection.
fn close(c: &mut Client) {
    c.phase = Phase::Done;
    c.stream = None;
}

/// Ends a client with an error.
fn end(c: &mut Client, report: &mut LoadReport, why: String) {
    close(c);
    report.errors += 1;
    report.note_failure(why);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run against options it cannot take is an error, not a panic.
    #[test]
    fn run_refuses_what_check_refuses() {
        let o = LoadOptions {
            addr: "127.0.0.1:9090".parse().unwrap(),
            clients: usize::MAX,
            duration: Duration::from_secs(1),
            pipeline: 1,
            rate: None,
            timeout: Duration::from_secs(5),
            connect_concurrency: 256,
            watch_pid: None,
        };
        let e = run(&o).unwrap_err();
        assert!(e.to_string().contains("--clients"), "{e}");
    }
}
