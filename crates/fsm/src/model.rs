//! The concurrency models, and what a server run reports.

use std::sync::atomic::{AtomicU64, Ordering};

/// A way to serve many clients. The command-line names are the kebab-case variant names
/// (`uring-bufring`); an unknown name is an error that lists the known ones.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[strum(serialize_all = "kebab-case", parse_err_ty = String, parse_err_fn = unknown_model)]
pub enum Model {
    /// One client at a time, blocking calls.
    Sequential,
    /// A thread per client, blocking calls.
    Threaded,
    /// One thread, select(2): at most FD_SETSIZE descriptors.
    Select,
    /// One thread, poll(2).
    Poll,
    /// One thread, epoll (level-triggered).
    Epoll,
    /// One thread, the libuv event loop.
    Libuv,
    /// tokio tasks (one worker thread unless --threads says more).
    Tokio,
    /// One thread, io_uring: single-shot accept and recv, send.
    Uring,
    /// One thread, io_uring: multishot accept, multishot recv from a provided-buffer ring.
    UringBufring,
    /// The reference: one thread, a bare epoll loop written in C (for comparison).
    CEpoll,
}

impl Model {
    /// Every model, in declaration order.
    pub const ALL: &'static [Model] = <Model as strum::VariantArray>::VARIANTS;

    /// The command-line name.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Whether this build has the model.
    pub fn is_built(self) -> bool {
        self.unavailable().is_none()
    }

    /// Why this build cannot run the model, with how to get it; `None` when it can.
    pub fn unavailable(self) -> Option<&'static str> {
        match self {
            Model::Libuv if !cfg!(feature = "libuv") => Some(
                "the libuv model is not in this build; rebuild with `cargo build --release \
                 --features libuv` (needs libclang, libuv1-dev and pkg-config)",
            ),
            _ => None,
        }
    }

    /// One line for `--help`.
    pub fn about(self) -> &'static str {
        match self {
            Model::Sequential => "one client at a time",
            Model::Threaded => "a thread per client",
            Model::Select => "select(2) event loop; refuses clients past FD_SETSIZE",
            Model::Poll => "poll(2) event loop",
            Model::Epoll => "epoll event loop (level-triggered)",
            Model::Libuv if cfg!(feature = "libuv") => "libuv event loop",
            Model::Libuv => "libuv event loop (optional: not in this build, cargo feature `libuv`)",
            Model::Tokio => "tokio tasks",
            Model::Uring => "io_uring: single-shot accept and recv, send",
            Model::UringBufring => "io_uring: multishot accept and recv, provided-buffer ring",
            Model::CEpoll => "reference: a bare epoll loop written in C",
        }
    }
}

/// `FromStr`'s error for an unknown model name: says which names exist.
fn unknown_model(name: &str) -> String {
    let known: Vec<&str> = Model::ALL.iter().map(|m| m.name()).collect();
    format!("unknown model '{name}' (choose from: {})", known.join(", "))
}

/// Counters a server keeps while it runs.
#[derive(Debug, Default)]
pub struct Counters {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Actions answered (bad bytes included).
    pub requests: AtomicU64,
    /// Clients turned away (select's limit, descriptor exhaustion).
    pub refused: AtomicU64,
    /// Connections that ended in an error (reset, and the like).
    pub errors: AtomicU64,
    /// The most reply bytes held for one connection (see [`Summary::peak_replies`]).
    pub peak_replies: AtomicU64,
    /// The most input bytes held unprocessed for one connection (see [`Summary::peak_input`]).
    pub peak_input: AtomicU64,
}

impl Counters {
    /// Adds to one counter.
    pub(crate) fn bump(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Raises `peak` to `bytes`. A load first: the maximum rarely moves, and a read of a
    /// shared line costs less than a read-modify-write.
    pub(crate) fn note_peak(peak: &AtomicU64, bytes: usize) {
        let bytes = bytes as u64;
        if bytes > peak.load(Ordering::Relaxed) {
            peak.fetch_max(bytes, Ordering::Relaxed);
        }
    }

    /// A snapshot.
    pub fn summary(&self) -> Summary {
        Summary {
            connections: self.connections.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            peak_replies: self.peak_replies.load(Ordering::Relaxed),
            peak_input: self.peak_input.load(Ordering::Relaxed),
        }
    }
}

/// What a server did, printed when it stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Connections accepted.
    pub connections: u64,
    /// Actions answered.
    pub requests: u64,
    /// Clients refused.
    pub refused: u64,
    /// Connections ended by an error.
    pub errors: u64,
    /// The most reply bytes the server held for any one connection at any moment (made, not
    /// yet sent). Every model bounds it: a client that does not read its replies stops being
    /// read from, so it stays within the high-water mark plus one receive, whatever the
    /// clients do. Kernel socket buffers do not count.
    pub peak_replies: u64,
    /// The most input bytes the server held for any one connection without processing them:
    /// what a multishot receive delivered after the server decided to stop reading
    /// (`uring-bufring`; bounded, see there). 0 for the models that read into one buffer.
    pub peak_input: u64,
}
