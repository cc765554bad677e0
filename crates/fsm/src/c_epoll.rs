//! The reference model: a bare epoll server written in C (`c/epoll_server.c`, built by
//! build.rs). It speaks the same protocol with the same backpressure and accept pause as the
//! Rust models, so `ringio bench server` can show what a hand-written C loop costs beside them.

use std::io;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::atomic::AtomicBool;

use crate::model::Counters;

/// The counters, as the C side sees them: it adds to them with relaxed atomic adds.
#[repr(C)]
struct CCounters {
    connections: *mut u64,
    requests: *mut u64,
    refused: *mut u64,
    errors: *mut u64,
    peak_replies: *mut u64,
}

unsafe extern "C" {
    /// Serves on `lfd` until `*stop`; 0, or -errno when the loop itself failed.
    fn ringio_c_epoll_run(
        lfd: libc::c_int,
        stop: *const bool,
        counters: *const CCounters,
    ) -> libc::c_int;
}

/// Serves until `stop` is set.
pub(crate) fn run(
    listener: &TcpListener,
    stop: &AtomicBool,
    counters: &Counters,
) -> io::Result<()> {
    let c = CCounters {
        connections: counters.connections.as_ptr(),
        requests: counters.requests.as_ptr(),
        refused: counters.refused.as_ptr(),
        errors: counters.errors.as_ptr(),
        peak_replies: counters.peak_replies.as_ptr(),
    };
    // SAFETY: the listener, the stop flag and the counters outlive the call; the C side reads
    // the flag and adds to the counters only with atomic operations, and closes only the
    // descriptors it accepted.
    let r = unsafe { ringio_c_epoll_run(listener.as_raw_fd(), stop.as_ptr(), &c) };
    if r < 0 {
        return Err(io::Error::from_raw_os_error(-r));
    }
    Ok(())
}
