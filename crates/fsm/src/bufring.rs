//! The io_uring model with multishot operations: one multishot accept straight into the ring's
//! file table (direct descriptors), one multishot recv per client drawing from a ring of
//! provided buffers, and sends. SINGLE_ISSUER|DEFER_TASKRUN where the kernel has them.
//!
//! Received bytes are run through the state machine at once, and a buffer the kernel is done
//! with goes straight back to the ring, so buffers stay plentiful. Where the kernel can, it
//! fills each buffer a message at a time (incremental consumption), so a stream of one-byte
//! messages stays within a few cache lines. Should buffers run out anyway, the recv ends with
//! ENOBUFS, the bytes stay in the socket, and the recv is armed again: nothing is lost. A
//! client whose replies pile up past the high-water mark has its recv cancelled until it reads
//! them (backpressure).

use std::io;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};

use io_uring::{cqueue, opcode, types, IoUring};

use crate::accept::{accept_errno_backoff, ACCEPT_PAUSE};
use crate::conn::{Conn, HIGH_WATER};
use crate::model::Counters;
use crate::ring;

const ACCEPT: u64 = u64::MAX;
const TIMER: u64 = u64::MAX - 1;
const RECV: u64 = 0;
const SEND: u64 = 1;
const CANCEL: u64 = 2;
const CLOSE: u64 = 3;
const GROUP: u16 = 7;
/// 256 buffers of 4 KiB: a 1 MiB pool. The pool used to be 4,096 × 4 KiB; one-byte messages
/// then landed on a different page each time, round the whole 16 MiB, and the copy into them
/// (`_copy_to_iter`) was the largest single item of the profile, all cache and TLB misses.
const BUFFERS: u16 = 256;
const BUF_SIZE: usize = 4096;
/// The kernel's flag for incremental buffer consumption (include/uapi/linux/io_uring.h).
const IOU_PBUF_RING_INC: u16 = 2;

/// The provided-buffer ring and the buffers it hands out.
struct BufRing {
    /// `BUFFERS` ring entries, page-aligned (the kernel reads them).
    entries: *mut types::BufRingEntry,
    ring_bytes: usize,
    pool: Vec<u8>,
    tail: u16,
    /// Incremental consumption (IOU_PBUF_RING_INC, Linux 6.12): the kernel fills a buffer a
    /// message at a time instead of spending a whole buffer on each, so consecutive one-byte
    /// messages share a cache line. `used[bid]` is how much of buffer `bid` the kernel filled.
    incremental: bool,
    used: Vec<u32>,
}

impl BufRing {
    fn new(ring: &IoUring) -> io::Result<Self> {
        let ring_bytes = BUFFERS as usize * std::mem::size_of::<types::BufRingEntry>();
        // SAFETY: an anonymous private mapping, unmapped in Drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut br = BufRing {
            entries: ptr.cast(),
            ring_bytes,
            pool: vec![0u8; BUFFERS as usize * BUF_SIZE],
            tail: 0,
            incremental: true,
            used: vec![0; BUFFERS as usize],
        };
        let register = |flags: u16| {
            // SAFETY: the ring memory lives until Drop, which unregisters nothing (the ring is
            // dropped first, see `run`).
            unsafe {
                ring.submitter()
                    .register_buf_ring_with_flags(ptr as u64, BUFFERS, GROUP, flags)
            }
        };
        if register(IOU_PBUF_RING_INC).is_err() {
            br.incremental = false;
            register(0)?;
        }
        for bid in 0..BUFFERS {
            br.give_back(bid);
        }
        Ok(br)
    }

    /// Puts buffer `bid` back into the ring.
    fn give_back(&mut self, bid: u16) {
        let index = (self.tail & (BUFFERS - 1)) as usize;
        // SAFETY: index < BUFFERS; the entry is ours to write until the tail moves past it.
        let entry = unsafe { &mut *self.entries.add(index) };
        entry.set_addr(self.pool[bid as usize * BUF_SIZE..].as_ptr() as u64);
        entry.set_len(BUF_SIZE as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the tail field of the first entry, per the kernel ABI; published with release
        // ordering so the entry is visible first.
        unsafe {
            let tail = types::BufRingEntry::tail(self.entries) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }

    /// Where the `len` bytes a completion delivered in buffer `bid` are, and whether the
    /// kernel is done with the buffer (it then goes back with [`BufRing::give_back`]).
    fn received(&mut self, bid: u16, len: usize, flags: u32) -> (std::ops::Range<usize>, bool) {
        let base = bid as usize * BUF_SIZE;
        if !self.incremental {
            return (base..base + len, true);
        }
        let used = &mut self.used[bid as usize];
        let start = base + *used as usize;
        *used += len as u32;
        let done = !cqueue::buffer_more(flags);
        if done {
            *used = 0;
        }
        (start..start + len, done)
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.entries.cast(), self.ring_bytes) };
    }
}

struct Client {
    /// The socket's index in the ring's registered file table (also the client's slot).
    file: u32,
    conn: Conn,
    /// Operations in flight (the multishot recv counts once).
    ops: u32,
    recv_armed: bool,
    sending: bool,
    /// The replies a send in flight is sending from: moved out of `conn`, so that replies to
    /// input received meanwhile never move the bytes the kernel is reading.
    inflight: Vec<u8>,
    inflight_sent: usize,
    /// Peer closed, error, or done: close once `ops` is 0.
    closing: bool,
}

fn data(slot: usize, kind: u64) -> u64 {
    ((slot as u64) << 2) | kind
}

pub(crate) fn run(
    listener: &TcpListener,
    stop: &AtomicBool,
    counters: &Counters,
) -> io::Result<()> {
    let mut ring = ring::make(true)?;
    let mut bufs = BufRing::new(&ring)?;
    // Clients are accepted straight into the ring's file table (direct descriptors): no
    // descriptor in the process's table, and no fget/fput on every recv and send. They inherit
    // TCP_NODELAY from the listener, so no setsockopt per client either.
    ring.submitter().register_files_sparse(file_table_size())?;
    crate::conn::set_nodelay(listener.as_raw_fd());
    let lfd = types::Fd(listener.as_raw_fd());
    // Indexed by the client's file-table index, which the kernel hands out and frees.
    let mut clients: Vec<Option<Client>> = Vec::new();
    let mut in_flight = 0usize;
    let mut done: Vec<(u64, i32, u32)> = Vec::with_capacity(1024);
    let pause = types::Timespec::new().nsec(ACCEPT_PAUSE.as_nanos() as u32);
    let accept = opcode::AcceptMulti::new(lfd)
        .allocate_file_index(true)
        .build()
        .user_data(ACCEPT);
    ring::push(&mut ring, &accept)?;
    in_flight += 1;
    let result = (|| -> io::Result<()> {
        while !stop.load(Ordering::Relaxed) {
            ring::wait(&mut ring)?;
            done.clear();
            done.extend(
                ring.completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            for &(ud, res, flags) in &done {
                let more = cqueue::more(flags);
                if !more {
                    in_flight -= 1;
                }
                match ud {
                    ACCEPT => {
                        if res >= 0 {
                            Counters::bump(&counters.connections, 1);
                            let slot = res as usize;
                            if clients.len() <= slot {
                                clients.resize_with(slot + 1, || None);
                            }
                            clients[slot] = Some(Client {
                                file: res as u32,
                                conn: Conn::default(),
                                ops: 0,
                                recv_armed: false,
                                sending: false,
                                inflight: Vec::new(),
                                inflight_sent: 0,
                                closing: false,
                            });
                            in_flight += arm_recv(
                                &mut ring,
                                clients[slot].as_mut().expect("just made"),
                                slot,
                            )?;
                        }
                        if !more {
                            if res < 0
                                && accept_errno_backoff(
                                    &io::Error::from_raw_os_error(-res),
                                    counters,
                                )
                            {
                                ring::push(
                                    &mut ring,
                                    &opcode::Timeout::new(&pause).build().user_data(TIMER),
                                )?;
                            } else {
                                ring::push(&mut ring, &accept)?;
                            }
                            in_flight += 1;
                        }
                    }
                    TIMER => {
                        ring::push(&mut ring, &accept)?;
                        in_flight += 1;
                    }
                    _ => {
                        let slot = (ud >> 2) as usize;
                        let kind = ud & 3;
                        if kind == CLOSE {
                            // The table entry is free again; an accept may already reuse it.
                            continue;
                        }
                        let Some(c) = clients[slot].as_mut() else {
                            continue;
                        };
                        if !more {
                            c.ops -= 1;
                        }
                        match kind {
                            RECV => {
                                if !more {
                                    c.recv_armed = false;
                                }
                                if let Some(bid) = cqueue::buffer_select(flags) {
                                    let (at, spent) =
                                        bufs.received(bid, res.max(0) as usize, flags);
                                    let answered = c.conn.received(&bufs.pool[at]);
                                    if spent {
                                        bufs.give_back(bid);
                                    }
                                    Counters::bump(&counters.requests, answered);
                                }
                                if res == 0 {
                                    c.closing = true;
                                } else if res < 0
                                    && res != -libc::ENOBUFS
                                    && res != -libc::ECANCELED
                                {
                                    Counters::bump(&counters.errors, 1);
                                    c.closing = true;
                                }
                            }
                            SEND => {
                                c.sending = false;
                                if res >= 0 {
                                    c.inflight_sent += res as usize;
                                    if c.inflight_sent == c.inflight.len() {
                                        c.inflight.clear();
                                        c.inflight_sent = 0;
                                    }
                                } else if res != -libc::EINTR && res != -libc::EAGAIN {
                                    Counters::bump(&counters.errors, 1);
                                    c.closing = true;
                                }
                            }
                            _ => {} // a cancel's own completion
                        }
                        in_flight += advance(&mut ring, c, slot)?;
                        if c.ops == 0 && (c.closing || (c.conn.finished() && c.inflight.is_empty()))
                        {
                            // Nothing of this client is in flight: close its table entry.
                            let close = opcode::Close::new(types::Fixed(c.file))
                                .build()
                                .user_data(data(slot, CLOSE));
                            ring::push(&mut ring, &close)?;
                            in_flight += 1;
                            clients[slot] = None;
                        }
                    }
                }
            }
        }
        Ok(())
    })();
    if ring::cancel_all(&mut ring, in_flight) {
        drop(ring);
        drop(bufs);
    } else {
        // The kernel may still use the buffers: never free them.
        drop(ring);
        std::mem::forget(bufs);
        std::mem::forget(clients);
    }
    result
}

/// Decides a client's next operations; returns how many were queued.
fn advance(ring: &mut IoUring, c: &mut Client, slot: usize) -> io::Result<usize> {
    let mut queued = 0;
    if c.closing || c.conn.done {
        if c.recv_armed {
            // Stop the multishot recv; its last completion frees the slot.
            ring::push(
                ring,
                &opcode::AsyncCancel::new(data(slot, RECV))
                    .build()
                    .user_data(data(slot, CANCEL)),
            )?;
            c.ops += 1;
            queued += 1;
            c.recv_armed = false;
        }
        if c.closing {
            return Ok(queued);
        }
    }
    if !c.sending && c.inflight.is_empty() && !c.conn.pending().is_empty() {
        c.inflight_sent = c.conn.sent;
        c.inflight = std::mem::take(&mut c.conn.out);
        c.conn.sent = 0;
    }
    if !c.sending && c.inflight_sent < c.inflight.len() {
        let rest = &c.inflight[c.inflight_sent..];
        // SAFETY (for ring::push): `inflight` is neither touched nor moved until this send's
        // completion is reaped; new replies go to `conn.out`.
        let e = opcode::Send::new(types::Fixed(c.file), rest.as_ptr(), rest.len() as u32)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(data(slot, SEND));
        ring::push(ring, &e)?;
        c.sending = true;
        c.ops += 1;
        queued += 1;
    }
    let over = c.conn.pending().len() + c.inflight.len() >= HIGH_WATER;
    if over && c.recv_armed {
        ring::push(
            ring,
            &opcode::AsyncCancel::new(data(slot, RECV))
                .build()
                .user_data(data(slot, CANCEL)),
        )?;
        c.ops += 1;
        queued += 1;
        c.recv_armed = false;
    } else if !over && !c.recv_armed && !c.conn.done {
        queued += arm_recv(ring, c, slot)?;
    }
    Ok(queued)
}

fn arm_recv(ring: &mut IoUring, c: &mut Client, slot: usize) -> io::Result<usize> {
    let e = opcode::RecvMulti::new(types::Fixed(c.file), GROUP)
        .build()
        .user_data(data(slot, RECV));
    ring::push(ring, &e)?;
    c.recv_armed = true;
    c.ops += 1;
    Ok(1)
}

/// Entries in the registered file table: one per client, up to the descriptor limit (the
/// kernel refuses a table larger than RLIMIT_NOFILE) and at most 2^18.
fn file_table_size() -> u32 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we pass.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur
    } else {
        1024
    };
    soft.clamp(1, 1 << 18) as u32
}
