//! The blocking models: `sequential` (one client at a time) and `threaded` (a thread per
//! client). Both wake every 100 ms to notice a stop request.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::accept::{accept_backoff, log};
use crate::model::Counters;
use crate::protocol::Session;

const TICK: Duration = Duration::from_millis(100);

/// Serves clients one after another, or each on a thread of its own.
pub(crate) fn run(
    listener: &TcpListener,
    threaded: bool,
    stop: &AtomicBool,
    counters: &Counters,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    std::thread::scope(|scope| {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((stream, _)) => {
                    Counters::bump(&counters.connections, 1);
                    if threaded {
                        let spawned = std::thread::Builder::new()
                            .stack_size(64 * 1024)
                            .spawn_scoped(scope, move || client(stream, stop, counters));
                        if let Err(e) = spawned {
                            log(&format!(
                                "cannot start a thread for a client ({e}); refusing it"
                            ));
                            Counters::bump(&counters.refused, 1);
                        }
                    } else {
                        client(stream, stop, counters);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Nothing to accept: wait for the listener, at most one tick.
                    wait_readable(listener, TICK);
                }
                Err(e) => accept_backoff(&e, counters),
            }
        }
    });
    Ok(())
}

fn wait_readable(listener: &TcpListener, timeout: Duration) {
    use std::os::fd::AsRawFd;
    let mut pfd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as i32) };
}

/// One client to the end: its 'd', its disconnect, an error, or a stop request.
fn client(mut stream: TcpStream, stop: &AtomicBool, counters: &Counters) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(TICK));
    let mut session = Session::new();
    let mut buf = [0u8; 16 * 1024];
    let mut out = Vec::with_capacity(16 * 1024);
    loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let n = match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(_) => {
                Counters::bump(&counters.errors, 1);
                return;
            }
        };
        out.clear();
        let before = session.requests;
        let fed = session.feed(&buf[..n], &mut out);
        Counters::bump(&counters.requests, session.requests - before);
        Counters::note_peak(&counters.peak_replies, out.len());
        // A blocking write is the backpressure: a client that does not read stalls only itself.
        if stream.write_all(&out).is_err() {
            Counters::bump(&counters.errors, 1);
            return;
        }
        if fed.done {
            return;
        }
    }
}
