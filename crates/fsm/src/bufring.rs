//! The io_uring model with multishot operations: one multishot accept straight into the ring's
//! file table (direct descriptors), one multishot recv per client drawing from a ring of
//! provided buffers, and sends. SINGLE_ISSUER|DEFER_TASKRUN where the kernel has them.
//!
//! Received bytes are run through the state machine at once, and a buffer the kernel is done
//! with goes straight back to the ring, so buffers stay plentiful. Where the kernel can, it
//! fills each buffer a message at a time (incremental consumption), so a stream of one-byte
//! messages stays within a few cache lines. Should buffers run out anyway, the recv ends with
//! ENOBUFS, the bytes stay in the socket, and the recv is armed again: nothing is lost.
//!
//! Backpressure: a client whose replies pile up past the high-water mark has its recv
//! cancelled until it has read them down to the low-water mark. A cancel races the multishot
//! recv, which may deliver more before the cancel takes effect (completions already queued, or
//! a recv the cancel missed and that goes on with F_MORE); that input is held unprocessed, not
//! answered, so the replies stay within the mark, and a recv still delivering after its cancel
//! completed is cancelled again. A new recv is armed only once the previous one has posted its
//! last completion, so there is never more than one, and never one the server has lost track
//! of. Held input is processed as the replies drain; should it ever pass [`INPUT_LIMIT`], the
//! client is dropped rather than buffered without bound.

use std::io;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};

use io_uring::{cqueue, opcode, types, IoUring};

use crate::accept::{accept_errno_backoff, ACCEPT_PAUSE};
use crate::conn::{Conn, HIGH_WATER, LOW_WATER};
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
/// The most input held unprocessed for a client whose reads are being stopped. Between the
/// decision and the cancel's effect a multishot recv delivers one batch of completions, which
/// the buffer pool caps at 1 MiB for all clients together (buffers go back only between
/// batches; measured: 300-350 KiB for one client). Four times that means the recv did not
/// stop.
const INPUT_LIMIT: usize = 4 * BUFFERS as usize * BUF_SIZE;
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
    recv: Recv,
    /// An AsyncCancel of the recv is in flight.
    cancelling: bool,
    /// The recv delivered with F_MORE after its cancel had completed: cancel it again.
    missed: bool,
    /// Replies reached the high-water mark and have not yet drained to the low-water mark:
    /// input is held, not processed, and the recv is stopped.
    held: bool,
    /// Input received while `held` (or behind input that was), in order, not yet processed.
    parked: Vec<u8>,
    sending: bool,
    /// The replies a send in flight is sending from: moved out of `conn`, so that replies to
    /// input received meanwhile never move the bytes the kernel is reading.
    inflight: Vec<u8>,
    inflight_sent: usize,
    /// Peer closed, error, or done: close once `ops` is 0.
    closing: bool,
    /// Dropped for input past [`INPUT_LIMIT`]: its send, which may wait for ever on a peer
    /// that does not read, is ended with a shutdown(2).
    dropped: bool,
    /// That shutdown is queued.
    shut: bool,
}

/// The client's multishot recv.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recv {
    /// None: its last completion (the one without F_MORE) has been reaped.
    Idle,
    Armed,
    /// Cancel requested; its last completion is still to come.
    Stopping,
}

impl Client {
    fn new(file: u32) -> Client {
        Client {
            file,
            conn: Conn::default(),
            ops: 0,
            recv: Recv::Idle,
            cancelling: false,
            missed: false,
            held: false,
            parked: Vec::new(),
            sending: false,
            inflight: Vec::new(),
            inflight_sent: 0,
            closing: false,
            dropped: false,
            shut: false,
        }
    }

    /// A completion of the multishot recv: `more` (F_MORE) unless it was the last. One
    /// that goes on after its cancel completed missed the cancel.
    fn recv_completed(&mut self, more: bool) {
        if !more {
            self.recv = Recv::Idle;
        } else if self.recv == Recv::Stopping && !self.cancelling {
            self.missed = true;
        }
    }

    fn send_completed(&mut self, res: i32, counters: &Counters) {
        self.sending = false;
        if res >= 0 {
            self.inflight_sent += res as usize;
            if self.inflight_sent == self.inflight.len() {
                self.inflight.clear();
                self.inflight_sent = 0;
            }
        } else if res != -libc::EINTR && res != -libc::EAGAIN {
            Counters::bump(&counters.errors, 1);
            self.closing = true;
        }
    }

    /// Replies made and not yet sent (in flight or waiting).
    fn replies(&self) -> usize {
        self.conn.pending().len() + self.inflight.len() - self.inflight_sent
    }

    /// Takes bytes a recv delivered: processed while there is room for their replies under the
    /// high-water mark (each byte makes at most one reply), held as input past it. Returns
    /// the requests answered.
    fn take(&mut self, input: &[u8], counters: &Counters) -> u64 {
        if self.closing || self.conn.done {
            return 0;
        }
        let now = if self.held || !self.parked.is_empty() {
            0
        } else {
            HIGH_WATER.saturating_sub(self.replies()).min(input.len())
        };
        let answered = self.answer(&input[..now], counters);
        if now < input.len() && !self.conn.done {
            self.parked.extend_from_slice(&input[now..]);
            Counters::note_peak(&counters.peak_input, self.parked.len());
            if self.parked.len() > INPUT_LIMIT {
                Counters::bump(&counters.errors, 1);
                self.closing = true;
                self.dropped = true;
                self.parked = Vec::new();
            }
        }
        answered
    }

    fn answer(&mut self, input: &[u8], counters: &Counters) -> u64 {
        if input.is_empty() {
            return 0;
        }
        let answered = self.conn.received(input);
        Counters::note_peak(&counters.peak_replies, self.replies());
        answered
    }

    /// Holds input past the high-water mark until the replies drain to the low-water mark,
    /// then processes held input as far as there is room.
    fn pace(&mut self, counters: &Counters) {
        if self.conn.done {
            self.parked = Vec::new();
            return;
        }
        if self.replies() >= HIGH_WATER {
            self.held = true;
        } else if self.replies() < LOW_WATER {
            self.held = false;
        }
        if !self.held && !self.parked.is_empty() {
            let n = HIGH_WATER
                .saturating_sub(self.replies())
                .min(self.parked.len());
            let rest = self.parked.split_off(n);
            let now = std::mem::replace(&mut self.parked, rest);
            let answered = self.answer(&now, counters);
            Counters::bump(&counters.requests, answered);
            if self.conn.done {
                self.parked = Vec::new();
            } else if !self.parked.is_empty() {
                self.held = true;
            }
        }
    }
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
                            clients[slot] = Some(Client::new(res as u32));
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
                                c.recv_completed(more);
                                if let Some(bid) = cqueue::buffer_select(flags) {
                                    let (at, spent) =
                                        bufs.received(bid, res.max(0) as usize, flags);
                                    let answered = c.take(&bufs.pool[at], counters);
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
                            SEND => c.send_completed(res, counters),
                            _ => c.cancelling = false, // a cancel's own completion
                        }
                        in_flight += advance(&mut ring, c, slot, counters)?;
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
fn advance(
    ring: &mut IoUring,
    c: &mut Client,
    slot: usize,
    counters: &Counters,
) -> io::Result<usize> {
    let mut queued = 0;
    if c.closing || c.conn.done {
        // Stop the multishot recv; its last completion frees the slot.
        queued += stop_recv(ring, c, slot)?;
        if c.closing {
            if c.dropped && c.sending && !c.shut {
                // Its completion is reaped as a cancel's (the kinds are two bits); the worst
                // that does is one more cancel of the recv, which then finds nothing.
                let e = opcode::Shutdown::new(types::Fixed(c.file), libc::SHUT_RDWR)
                    .build()
                    .user_data(data(slot, CANCEL));
                ring::push(ring, &e)?;
                c.shut = true;
                c.ops += 1;
                queued += 1;
            }
            return Ok(queued);
        }
    }
    c.pace(counters);
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
    if c.held || !c.parked.is_empty() || c.conn.done {
        queued += stop_recv(ring, c, slot)?;
    } else if c.recv == Recv::Idle {
        queued += arm_recv(ring, c, slot)?;
    }
    Ok(queued)
}

/// Cancels the client's recv if it is armed, or again if it went on delivering after its
/// cancel completed; returns how many operations were queued.
fn stop_recv(ring: &mut IoUring, c: &mut Client, slot: usize) -> io::Result<usize> {
    let again = c.recv == Recv::Stopping && c.missed && !c.cancelling;
    if c.recv != Recv::Armed && !again {
        return Ok(0);
    }
    ring::push(
        ring,
        &opcode::AsyncCancel::new(data(slot, RECV))
            .build()
            .user_data(data(slot, CANCEL)),
    )?;
    c.recv = Recv::Stopping;
    c.cancelling = true;
    c.missed = false;
    c.ops += 1;
    Ok(1)
}

fn arm_recv(ring: &mut IoUring, c: &mut Client, slot: usize) -> io::Result<usize> {
    let e = opcode::RecvMulti::new(types::Fixed(c.file), GROUP)
        .build()
        .user_data(data(slot, RECV));
    ring::push(ring, &e)?;
    c.recv = Recv::Armed;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring that only collects entries: nothing is submitted (a test pushes far fewer than
    /// its size), so the file index need not exist.
    fn sink() -> IoUring {
        IoUring::new(64).expect("io_uring")
    }

    /// `n` action bytes, a reply each.
    fn actions(n: usize) -> Vec<u8> {
        b"12".repeat(n / 2)
    }

    /// The race of the report: the recv is cancelled at the high-water mark; before its last
    /// completion arrives, the replies drain (a send completes) and a completion with F_MORE
    /// shows the recv missed its cancel. No second recv is armed while the first lives, the
    /// recv that missed its cancel is cancelled again once over the mark, input past the mark
    /// is held rather than answered, and every byte is answered in order in the end.
    #[test]
    fn a_cancel_that_races_the_recv_never_leaves_it_unbounded() {
        let counters = Counters::default();
        let mut ring = sink();
        let mut c = Client::new(0);
        assert_eq!(advance(&mut ring, &mut c, 0, &counters).unwrap(), 1);
        assert_eq!(c.recv, Recv::Armed);

        // Far more input than the mark allows, in one completion with F_MORE.
        let input = actions(HIGH_WATER + 10_000);
        c.recv_completed(true);
        c.take(&input, &counters);
        assert_eq!(c.replies(), HIGH_WATER, "replies past the mark");
        assert_eq!(c.parked.len(), 10_000);
        // A send and the cancel of the recv.
        assert_eq!(advance(&mut ring, &mut c, 0, &counters).unwrap(), 2);
        assert!(c.sending && c.cancelling && c.held);
        assert_eq!(c.recv, Recv::Stopping);

        // Completions already queued behind the decision: held, not answered.
        c.recv_completed(true);
        c.take(&actions(4096), &counters);
        assert_eq!(c.replies(), HIGH_WATER);
        assert_eq!(c.parked.len(), 10_000 + 4096);

        // The send completes in full before the recv's last completion: the replies drained,
        // held input is answered, but no recv is armed beside the one still alive.
        let sent = c.inflight.len() as i32;
        c.send_completed(sent, &counters);
        advance(&mut ring, &mut c, 0, &counters).unwrap();
        assert_eq!(
            c.recv,
            Recv::Stopping,
            "a second recv armed beside the first"
        );
        assert!(c.parked.is_empty());
        assert_eq!(c.replies(), 10_000 + 4096);

        // The cancel completes without stopping the recv, which goes on with F_MORE until
        // the mark is passed again: it is cancelled again.
        c.cancelling = false;
        advance(&mut ring, &mut c, 0, &counters).unwrap();
        let ops = c.ops;
        for _ in 0..20 {
            c.recv_completed(true);
            c.take(&actions(4096), &counters);
            advance(&mut ring, &mut c, 0, &counters).unwrap();
            assert!(c.replies() <= HIGH_WATER);
        }
        assert!(
            c.cancelling,
            "the recv that missed its cancel is cancelled again"
        );
        assert_eq!(c.ops, ops + 1, "one more cancel, no more recvs");
        assert!(counters.summary().peak_replies <= HIGH_WATER as u64);

        // Its last completion: reads resume only once the replies drain below the low mark.
        c.recv_completed(false);
        c.cancelling = false;
        advance(&mut ring, &mut c, 0, &counters).unwrap();
        assert_eq!(c.recv, Recv::Idle, "reads resumed over the mark");
        while c.recv == Recv::Idle {
            let rest = (c.inflight.len() - c.inflight_sent) as i32;
            c.send_completed(rest, &counters);
            advance(&mut ring, &mut c, 0, &counters).unwrap();
        }
        assert_eq!(c.recv, Recv::Armed);
        assert!(c.parked.is_empty() && c.replies() < HIGH_WATER);
        // Every action answered once, none lost while held.
        let sent = (HIGH_WATER + 10_000) + 4096 + 20 * 4096;
        assert_eq!(c.conn.session.requests, sent as u64);
    }

    /// Input that keeps arriving once reads were stopped (a recv that never stops) is held
    /// only up to `INPUT_LIMIT`: past it the client is dropped, its recv cancelled and its
    /// send, which waits on a peer that does not read, ended by a shutdown.
    #[test]
    fn held_input_past_its_limit_drops_the_client() {
        let counters = Counters::default();
        let mut ring = sink();
        let mut c = Client::new(0);
        advance(&mut ring, &mut c, 0, &counters).unwrap();
        c.take(&actions(HIGH_WATER + 2), &counters);
        advance(&mut ring, &mut c, 0, &counters).unwrap();
        assert!(c.sending && c.held);
        while !c.closing {
            c.recv_completed(true);
            c.take(&actions(4096), &counters);
            assert!(c.parked.len() <= INPUT_LIMIT);
        }
        assert!(c.parked.is_empty());
        assert_eq!(counters.summary().errors, 1);
        let ops = c.ops;
        // The cancel went out before; now the shutdown, once.
        assert_eq!(advance(&mut ring, &mut c, 0, &counters).unwrap(), 1);
        assert_eq!(advance(&mut ring, &mut c, 0, &counters).unwrap(), 0);
        assert_eq!(c.ops, ops + 1);
    }
}
