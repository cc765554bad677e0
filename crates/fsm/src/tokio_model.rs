//! The tokio model: a task per client on one worker thread (or `threads` of them).

use std::io;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::accept::{accept_errno_backoff, ACCEPT_PAUSE};
use crate::model::Counters;
use crate::protocol::Session;

pub(crate) fn run(
    listener: TcpListener,
    threads: usize,
    stop: &AtomicBool,
    counters: &Counters,
) -> io::Result<()> {
    let rt = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()?
    };
    listener.set_nonblocking(true)?;
    // Counters shared with 'static tasks: summed into the caller's at the end.
    let shared = Arc::new(Counters::default());
    rt.block_on(async {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        Counters::bump(&shared.connections, 1);
                        let c = shared.clone();
                        tokio::spawn(client(stream, c));
                    }
                    Err(e) => {
                        if accept_errno_backoff(&e, &shared) {
                            tokio::time::sleep(ACCEPT_PAUSE).await;
                        }
                    }
                },
                _ = tick.tick() => {
                    if stop.load(Ordering::Relaxed) {
                        return Ok::<(), io::Error>(());
                    }
                }
            }
        }
    })?;
    // Dropping the runtime cancels the remaining client tasks.
    drop(rt);
    let s = shared.summary();
    Counters::bump(&counters.connections, s.connections);
    Counters::bump(&counters.requests, s.requests);
    Counters::bump(&counters.refused, s.refused);
    Counters::bump(&counters.errors, s.errors);
    Counters::note_peak(&counters.peak_replies, s.peak_replies as usize);
    Ok(())
}

async fn client(mut stream: tokio::net::TcpStream, counters: Arc<Counters>) {
    let _ = stream.set_nodelay(true);
    let mut session = Session::new();
    // Small per-client buffers: with a thousand clients, 16 KiB each (zeroed on allocation)
    // spread one-byte requests over 16 MiB of cache-cold memory.
    let mut buf = vec![0u8; 2 * 1024];
    let mut out = Vec::with_capacity(2 * 1024);
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(0) => return,
            Ok(n) => n,
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
        // Awaiting the write is the backpressure: nothing more is read until it is sent.
        if stream.write_all(&out).await.is_err() {
            Counters::bump(&counters.errors, 1);
            return;
        }
        if fed.done {
            return;
        }
    }
}
