//! The bare cost of a round trip: two threads ping-ponging one byte with blocking send and
//! recv, over a Unix socketpair and over loopback TCP. No server model can answer a one-byte
//! request faster than this, so it is the floor the models are compared with.
//!
//! [`run_one_thread`] takes the wakeups out: one thread plays both ends, so what it measures is
//! the system calls and the protocol stack alone (a send on loopback delivers into the peer's
//! socket before it returns). Half of that thread's CPU is the answering side's share: the cost a
//! server that never sleeps pays per round trip.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::Instant;

use serde::Serialize;

use crate::affinity::pin_current;

/// The transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// AF_UNIX socketpair.
    Unix,
    /// TCP over 127.0.0.1, TCP_NODELAY on both ends.
    Tcp,
}

impl Transport {
    /// Both, in order.
    pub const ALL: &'static [Transport] = &[Transport::Unix, Transport::Tcp];

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Unix => "socketpair",
            Transport::Tcp => "tcp-loopback",
        }
    }
}

/// What one ping-pong run measured.
#[derive(Debug, Clone, Serialize)]
pub struct LoopbackReport {
    /// The transport's name.
    pub transport: String,
    /// Round trips made.
    pub round_trips: u64,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Wall time per round trip, microseconds.
    pub us_per_rt: f64,
    /// The echoing thread's CPU (user + system) per round trip: what a server that does
    /// nothing but answer would spend, microseconds.
    pub echo_cpu_us_per_rt: f64,
    /// The sending thread's CPU per round trip, microseconds.
    pub client_cpu_us_per_rt: f64,
}

/// This thread's CPU time, seconds.
fn thread_cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct we pass.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}

fn pair(transport: Transport) -> io::Result<(Box<dyn Duplex>, Box<dyn Duplex>)> {
    Ok(match transport {
        Transport::Unix => {
            let (a, b) = UnixStream::pair()?;
            (Box::new(a), Box::new(b))
        }
        Transport::Tcp => {
            let listener = TcpListener::bind("127.0.0.1:0")?;
            let a = TcpStream::connect(listener.local_addr()?)?;
            let (b, _) = listener.accept()?;
            a.set_nodelay(true)?;
            b.set_nodelay(true)?;
            (Box::new(a), Box::new(b))
        }
    })
}

trait Duplex: Read + Write + Send {}
impl<T: Read + Write + Send> Duplex for T {}

/// Ping-pongs one byte `round_trips` times; the client thread runs on `client_cpu` and the
/// echoing thread on `echo_cpu` where given.
pub fn run(
    transport: Transport,
    round_trips: u64,
    client_cpu: Option<usize>,
    echo_cpu: Option<usize>,
) -> io::Result<LoopbackReport> {
    let (mut client, mut echo) = pair(transport)?;
    let echo_thread = std::thread::spawn(move || -> io::Result<f64> {
        if let Some(cpu) = echo_cpu {
            pin_current(cpu)?;
        }
        let mut b = [0u8; 1];
        let mut cpu_start = None;
        loop {
            if echo.read(&mut b)? == 0 {
                break;
            }
            // The first byte starts the clock, after the thread has settled on its CPU.
            cpu_start.get_or_insert_with(thread_cpu_s);
            echo.write_all(&b)?;
        }
        Ok(cpu_start.map_or(0.0, |s| thread_cpu_s() - s))
    });
    if let Some(cpu) = client_cpu {
        pin_current(cpu)?;
    }
    let mut b = [7u8; 1];
    // Warm up: caches, the scheduler's idea of both threads.
    for _ in 0..1000 {
        client.write_all(&b)?;
        client.read_exact(&mut b)?;
    }
    let (t0, c0) = (Instant::now(), thread_cpu_s());
    for _ in 0..round_trips {
        client.write_all(&b)?;
        client.read_exact(&mut b)?;
    }
    let (seconds, client_cpu_s) = (t0.elapsed().as_secs_f64(), thread_cpu_s() - c0);
    drop(client);
    let echo_cpu_s = echo_thread
        .join()
        .map_err(|_| io::Error::other("the echo thread panicked"))??;
    let n = round_trips.max(1) as f64;
    // The echo thread's clock also ran through the warm-up: take its share out.
    let echo_cpu_s = echo_cpu_s * round_trips as f64 / (round_trips + 999) as f64;
    Ok(LoopbackReport {
        transport: transport.name().to_string(),
        round_trips,
        seconds,
        us_per_rt: seconds * 1e6 / n,
        echo_cpu_us_per_rt: echo_cpu_s * 1e6 / n,
        client_cpu_us_per_rt: client_cpu_s * 1e6 / n,
    })
}

/// Plays both ends on this thread (pinned to `cpu` where given): send a byte, receive it on the
/// other end, send it back, receive it. No thread ever waits for another.
pub fn run_one_thread(
    transport: Transport,
    round_trips: u64,
    cpu: Option<usize>,
) -> io::Result<LoopbackReport> {
    let (mut client, mut echo) = pair(transport)?;
    if let Some(cpu) = cpu {
        pin_current(cpu)?;
    }
    let mut b = [7u8; 1];
    let mut trip = |client: &mut Box<dyn Duplex>, echo: &mut Box<dyn Duplex>| -> io::Result<()> {
        client.write_all(&b)?;
        echo.read_exact(&mut b)?;
        echo.write_all(&b)?;
        client.read_exact(&mut b)
    };
    for _ in 0..1000 {
        trip(&mut client, &mut echo)?;
    }
    let (t0, c0) = (Instant::now(), thread_cpu_s());
    for _ in 0..round_trips {
        trip(&mut client, &mut echo)?;
    }
    let (seconds, cpu_s) = (t0.elapsed().as_secs_f64(), thread_cpu_s() - c0);
    let n = round_trips.max(1) as f64;
    Ok(LoopbackReport {
        transport: transport.name().to_string(),
        round_trips,
        seconds,
        us_per_rt: seconds * 1e6 / n,
        echo_cpu_us_per_rt: cpu_s * 1e6 / n / 2.0,
        client_cpu_us_per_rt: cpu_s * 1e6 / n / 2.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_transports_ping_pong() {
        for &t in Transport::ALL {
            let r = run(t, 200, None, None).unwrap();
            assert_eq!(r.round_trips, 200);
            assert!(r.us_per_rt > 0.0, "{r:?}");
            let r = run_one_thread(t, 200, None).unwrap();
            assert_eq!(r.round_trips, 200);
            assert!(r.us_per_rt > 0.0, "{r:?}");
        }
    }
}
