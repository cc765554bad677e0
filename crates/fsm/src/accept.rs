//! What every model does when accept fails, and the operator's log line: shared by the models,
//! so it sits below them.

use std::io;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::model::Counters;

/// How long a server stops accepting after running out of descriptors.
pub(crate) const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// A line on stderr, for what an operator should know (refused clients, out of descriptors).
pub(crate) fn log(msg: &str) {
    eprintln!("ringio serve: {msg}");
}

/// Handles a failed accept. Returns true when descriptors (or memory) ran out, in which case
/// the caller pauses accepting for [`ACCEPT_PAUSE`] instead of retrying at once.
pub(crate) fn accept_errno_backoff(e: &io::Error, counters: &Counters) -> bool {
    match e.raw_os_error() {
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
            // Count once per pause, not once per attempt.
            if counters.refused.fetch_add(1, Ordering::Relaxed) % 1000 == 0 {
                log(&format!(
                    "accept failed ({e}); pausing accepts for {} ms",
                    ACCEPT_PAUSE.as_millis()
                ));
            }
            true
        }
        // The client gave up before we accepted it, and the like: nothing to do.
        _ => false,
    }
}

/// For blocking models: handles a failed accept, sleeping through a pause if needed.
pub(crate) fn accept_backoff(e: &io::Error, counters: &Counters) {
    if accept_errno_backoff(e, counters) {
        std::thread::sleep(ACCEPT_PAUSE);
    }
}
