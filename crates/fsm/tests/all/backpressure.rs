//! Every server model bounds what it holds for a connection whose client sends without ever
//! reading its replies, however the client's sending races the server's backpressure.
//!
//! Many such clients, each reconnecting again and again: the race that matters comes early
//! in a connection, while the kernel still takes the replies and the server's pending output
//! crosses its high-water mark back and forth (io_uring's multishot recv was cancelled there
//! and re-armed before the cancel took effect, and the recv that stayed armed was never
//! cancelled again: one client's replies grew by hundreds of MB). The server reports the most
//! it held for one connection (`Summary::peak_replies`, `peak_input`), which this checks against the
//! bound, and the process's resident set must not grow past a bound either.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringio_fsm::Model;

use crate::soak::{connect, isolated, reset, rss_kib, Server};

/// How long the clients run against each model.
const PHASE: Duration = Duration::from_millis(1500);

/// Client threads, each opening one connection after another.
const CLIENTS: usize = 24;

/// What one connection sends at most before it hangs up: far past every bound below, and
/// past what the kernel's socket buffers absorb (the server's send buffer grows to 4 MiB),
/// so the server meets its high-water mark.
const PER_CONNECTION: usize = 16 << 20;

/// The most replies a model may hold for one connection: the high-water mark of unsent
/// replies (64 KiB), plus what one receive can add before the check (a reply per byte of a
/// receive buffer: 64 KiB in `c-epoll`, 16 KiB at most in the others). Input that arrives past
/// the mark is held as input, unprocessed.
const REPLIES_LIMIT: u64 = (64 + 64) << 10;

/// The most input a model may hold unprocessed for one connection: what io_uring's multishot
/// recv delivers between the decision to stop reading and the cancel taking effect, one batch
/// of completions, which its pool of provided buffers caps at 1 MiB (measured: 300-350 KiB).
/// A recv that did not stop goes past it (the server drops such a client at 4 MiB).
const INPUT_LIMIT: u64 = 1 << 20;

/// How much the resident set may grow during the phase, in KiB: per connection the bound
/// above, for the connections open at once, and the client threads; a server that keeps
/// answering a client that never reads grows by a reply per byte received (several MB per
/// connection here).
const RSS_GROWTH_LIMIT_KIB: u64 = 32 * 1024;

/// One client thread: connections that send actions (a reply each) and never read (or, with
/// `sip`, read a few replies now and then, far fewer than they ask for), each until the server
/// stops reading (a write times out twice) or `PER_CONNECTION` is sent. A sip makes room for
/// a little output, so the server's pending replies cross its high-water mark again and
/// again: the moments where stopping and resuming the reads race.
fn never_reader(addr: std::net::SocketAddr, sip: bool, end: &AtomicBool, sent: &AtomicU64) {
    let chunk = b"1 2 0 2 1 ".repeat(6554);
    let mut replies = vec![0u8; 64 << 10];
    while !end.load(Ordering::Relaxed) {
        let Some(mut s) = connect(addr) else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        small_receive_buffer(&s);
        let _ = s.set_write_timeout(Some(Duration::from_millis(40)));
        let _ = s.set_read_timeout(Some(Duration::from_millis(1)));
        let (mut total, mut stuck) = (0, 0);
        while total < PER_CONNECTION && stuck < 2 && !end.load(Ordering::Relaxed) {
            if sip {
                let _ = std::io::Read::read(&mut s, &mut replies);
            }
            match s.write(&chunk) {
                Ok(n) => total += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    stuck += 1
                }
                Err(_) => break,
            }
        }
        sent.fetch_add(total as u64, Ordering::Relaxed);
        reset(s);
    }
}

/// A small receive buffer on the client's side: the server's replies back up sooner.
fn small_receive_buffer(s: &std::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let size: libc::c_int = 8 << 10;
    // SAFETY: setting an int option on our own socket, with a pointer to a live value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as u32,
        )
    };
}

fn flood(model: Model) {
    let server = Server::start(model);
    // SAFETY: malloc_trim only returns free memory to the kernel; a steadier baseline.
    unsafe { libc::malloc_trim(0) };
    let baseline = rss_kib();
    let end = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let peak = Arc::new(AtomicU64::new(baseline));
    let addr = server.addr;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (end, sent) = (end.clone(), sent.clone());
            std::thread::spawn(move || never_reader(addr, i % 2 == 1, &end, &sent))
        })
        .collect();
    let started = Instant::now();
    while started.elapsed() < PHASE {
        peak.fetch_max(rss_kib(), Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(10));
    }
    end.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let summary = server.stop();
    let growth = peak.load(Ordering::Relaxed).saturating_sub(baseline);
    eprintln!(
        "{model}: {} connections, {} KiB sent, held for one connection at most {} KiB of \
         replies and {} KiB of input, RSS +{growth} KiB",
        summary.connections,
        sent.load(Ordering::Relaxed) >> 10,
        summary.peak_replies >> 10,
        summary.peak_input >> 10,
    );
    // `sequential` serves one client at a time, each until it hangs up.
    let least = if model == Model::Sequential {
        1
    } else {
        CLIENTS
    };
    assert!(summary.connections >= least as u64, "{model}: {summary:?}");
    assert!(
        summary.peak_replies <= REPLIES_LIMIT,
        "{model}: held {} bytes of replies for one connection (limit {REPLIES_LIMIT})",
        summary.peak_replies
    );
    assert!(
        summary.peak_input <= INPUT_LIMIT,
        "{model}: held {} bytes of input for one connection (limit {INPUT_LIMIT})",
        summary.peak_input
    );
    assert!(
        growth <= RSS_GROWTH_LIMIT_KIB,
        "{model}: resident set grew by {growth} KiB (limit {RSS_GROWTH_LIMIT_KIB} KiB)"
    );
}

#[test]
fn every_model_bounds_what_it_holds_for_clients_that_never_read() {
    // The resident set measured is the process's: only this test may run in it.
    if !isolated("backpressure::every_model_bounds_what_it_holds_for_clients_that_never_read") {
        return;
    }
    for &model in Model::ALL {
        if model.unavailable().is_some() {
            continue;
        }
        flood(model);
    }
}
