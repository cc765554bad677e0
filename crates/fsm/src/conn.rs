//! One client connection's buffers, shared by the readiness-based models: input goes through
//! the state machine, replies wait in `out` until the socket takes them.

use crate::protocol::Session;

/// Replies pending past this stop reading from the client until it drains them: a client that
/// never reads cannot make the server buffer without bound.
pub(crate) const HIGH_WATER: usize = 64 * 1024;

/// Where a model that stopped reading at [`HIGH_WATER`] may start again (the io_uring
/// multishot model): half the mark, so reads do not stop and start at every reply sent.
pub(crate) const LOW_WATER: usize = HIGH_WATER / 2;

/// A connection's protocol state and unsent replies.
#[derive(Debug, Default)]
pub(crate) struct Conn {
    pub session: Session,
    pub out: Vec<u8>,
    pub sent: usize,
    /// The reply 'd' is queued: close once it is sent.
    pub done: bool,
}

impl Conn {
    /// Runs received bytes through the state machine; returns the requests answered.
    pub fn received(&mut self, input: &[u8]) -> u64 {
        if self.done {
            return 0;
        }
        let before = self.session.requests;
        if self.sent > 0 && self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        }
        let fed = self.session.feed(input, &mut self.out);
        self.done = fed.done;
        self.session.requests - before
    }

    /// Replies not yet sent.
    pub fn pending(&self) -> &[u8] {
        &self.out[self.sent..]
    }

    /// `n` more bytes went out.
    pub fn wrote(&mut self, n: usize) {
        self.sent += n;
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        }
    }

    /// True while more input should be read.
    pub fn wants_input(&self) -> bool {
        !self.done && self.pending().len() < HIGH_WATER
    }

    /// True when the connection has nothing left to do.
    pub fn finished(&self) -> bool {
        self.done && self.pending().is_empty()
    }
}

/// TCP_NODELAY on a client socket: replies are single bytes and must not wait for Nagle.
pub(crate) fn set_nodelay(fd: std::os::fd::RawFd) {
    let one: libc::c_int = 1;
    // SAFETY: setting an int option on a socket we own; failure only costs latency.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&one as *const libc::c_int).cast(),
            4,
        );
    }
}
