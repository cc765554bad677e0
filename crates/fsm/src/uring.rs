//! The io_uring model with single-shot operations: accept, then per client a recv into its
//! own buffer, the replies sent, and the next recv. One operation per client in flight, so a
//! client that does not read its replies stops its own recvs (backpressure).

use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use io_uring::{opcode, types, IoUring};

use crate::accept::{accept_errno_backoff, ACCEPT_PAUSE};
use crate::conn::Conn;
use crate::model::Counters;
use crate::ring;

const ACCEPT: u64 = u64::MAX;
const TIMER: u64 = u64::MAX - 1;
const BUF: usize = 16 * 1024;

struct Client {
    fd: OwnedFd,
    conn: Conn,
    buf: Box<[u8]>,
}

pub(crate) fn run(
    listener: &TcpListener,
    stop: &AtomicBool,
    counters: &Counters,
) -> io::Result<()> {
    let mut ring = ring::make(false)?;
    let lfd = types::Fd(listener.as_raw_fd());
    let mut clients: Vec<Option<Client>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut in_flight = 0usize;
    let pause = types::Timespec::new().nsec(ACCEPT_PAUSE.as_nanos() as u32);
    let accept = opcode::Accept::new(lfd, std::ptr::null_mut(), std::ptr::null_mut())
        .build()
        .user_data(ACCEPT);
    ring::push(&mut ring, &accept)?;
    in_flight += 1;
    let result = (|| -> io::Result<()> {
        while !stop.load(Ordering::Relaxed) {
            ring::wait(&mut ring)?;
            let done: Vec<(u64, i32)> = ring
                .completion()
                .map(|c| (c.user_data(), c.result()))
                .collect();
            for (data, res) in done {
                in_flight -= 1;
                match data {
                    ACCEPT => {
                        if res >= 0 {
                            // SAFETY: a new descriptor from accept, owned by nobody else.
                            let fd = unsafe { OwnedFd::from_raw_fd(res) };
                            Counters::bump(&counters.connections, 1);
                            crate::conn::set_nodelay(fd.as_raw_fd());
                            let slot = free.pop().unwrap_or_else(|| {
                                clients.push(None);
                                clients.len() - 1
                            });
                            clients[slot] = Some(Client {
                                fd,
                                conn: Conn::default(),
                                buf: vec![0; BUF].into_boxed_slice(),
                            });
                            in_flight += submit_recv(&mut ring, &mut clients, slot)?;
                        } else if accept_errno_backoff(
                            &io::Error::from_raw_os_error(-res),
                            counters,
                        ) {
                            ring::push(
                                &mut ring,
                                &opcode::Timeout::new(&pause).build().user_data(TIMER),
                            )?;
                            in_flight += 1;
                            continue;
                        }
                        ring::push(&mut ring, &accept)?;
                        in_flight += 1;
                    }
                    TIMER => {
                        ring::push(&mut ring, &accept)?;
                        in_flight += 1;
                    }
                    _ => {
                        let slot = (data >> 1) as usize;
                        let sending = data & 1 == 1;
                        let Some(c) = clients[slot].as_mut() else {
                            continue;
                        };
                        let mut close = false;
                        if res == -libc::EINTR || res == -libc::EAGAIN {
                            // Retry the same operation.
                        } else if res < 0 {
                            Counters::bump(&counters.errors, 1);
                            close = true;
                        } else if sending {
                            c.conn.wrote(res as usize);
                        } else if res == 0 {
                            close = true;
                        } else {
                            let answered = c.conn.received(&c.buf[..res as usize]);
                            Counters::bump(&counters.requests, answered);
                            Counters::note_peak(&counters.peak_replies, c.conn.pending().len());
                        }
                        if close || c.conn.finished() {
                            clients[slot] = None;
                            free.push(slot);
                            continue;
                        }
                        if !c.conn.pending().is_empty() {
                            in_flight += submit_send(&mut ring, &mut clients, slot)?;
                        } else {
                            in_flight += submit_recv(&mut ring, &mut clients, slot)?;
                        }
                    }
                }
            }
        }
        Ok(())
    })();
    if !ring::cancel_all(&mut ring, in_flight) {
        // Some operation may still write into a client buffer: never free them.
        std::mem::forget(clients);
    }
    result
}

fn submit_recv(
    ring: &mut IoUring,
    clients: &mut [Option<Client>],
    slot: usize,
) -> io::Result<usize> {
    let c = clients[slot].as_mut().expect("live client");
    // SAFETY (for the push in ring::push): the buffer is owned by the client's slot, which is
    // only freed after this operation's completion is reaped.
    let e = opcode::Recv::new(
        types::Fd(c.fd.as_raw_fd()),
        c.buf.as_mut_ptr(),
        c.buf.len() as u32,
    )
    .build()
    .user_data((slot as u64) << 1);
    ring::push(ring, &e)?;
    Ok(1)
}

fn submit_send(
    ring: &mut IoUring,
    clients: &mut [Option<Client>],
    slot: usize,
) -> io::Result<usize> {
    let c = clients[slot].as_mut().expect("live client");
    let pending = c.conn.pending();
    // SAFETY: as in `submit_recv`; `out` is not touched while the send is in flight (one
    // operation per client).
    let e = opcode::Send::new(
        types::Fd(c.fd.as_raw_fd()),
        pending.as_ptr(),
        pending.len() as u32,
    )
    .flags(libc::MSG_NOSIGNAL)
    .build()
    .user_data(((slot as u64) << 1) | 1);
    ring::push(ring, &e)?;
    Ok(1)
}
