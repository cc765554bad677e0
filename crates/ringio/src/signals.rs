//! SIGINT and SIGTERM, for the commands that stop cleanly on them (`cp`, `serve`).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use signal_hook::consts::{SIGALRM, SIGINT, SIGTERM};

/// How long a command has to wind down after the first signal before that signal ends it.
const GRACE_SECS: u32 = 2;

/// The first SIGINT or SIGTERM, for the SIGALRM that ends the grace period.
static FIRST: AtomicI32 = AtomicI32::new(0);

/// Sets `flag` on SIGINT or SIGTERM, so the command can stop at its next step. A second signal
/// while it winds down ends the process at once, with the shell's status for that signal, and
/// so does the first when the command has not finished within [`GRACE_SECS`]: a copy blocked in
/// the kernel (opening a FIFO that nothing writes, reading a device that never answers) never
/// reaches its next step, and `timeout` or an init system sends one SIGTERM. The grace period is
/// an `alarm`, so it costs no thread and no descriptor (`cp` runs under RLIMIT_NOFILE 16).
pub fn stop_on_signals(flag: &Arc<AtomicBool>) -> Result<()> {
    for signal in [SIGINT, SIGTERM] {
        // Registered first, so it sees the flag as the earlier signal left it.
        signal_hook::flag::register_conditional_shutdown(signal, 128 + signal, Arc::clone(flag))
            .context("cannot install a signal handler")?;
        signal_hook::flag::register(signal, Arc::clone(flag))
            .context("cannot install a signal handler")?;
        // SAFETY: the action only does async-signal-safe things: an atomic and alarm(2).
        unsafe {
            signal_hook::low_level::register(signal, move || {
                if FIRST
                    .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    libc::alarm(GRACE_SECS);
                }
            })
        }
        .context("cannot install a signal handler")?;
    }
    // SAFETY: an atomic load and signal-hook's default-action emulation, which is made for
    // signal handlers.
    unsafe {
        signal_hook::low_level::register(SIGALRM, || {
            let signal = FIRST.load(Ordering::SeqCst);
            if signal != 0 {
                // Still running: end as the first signal's default action does.
                let _ = signal_hook::low_level::emulate_default_handler(signal);
            }
        })
    }
    .context("cannot install a signal handler")?;
    Ok(())
}

/// Ends the process by the first SIGINT or SIGTERM that arrived, as that signal's default action
/// would, once the command has cleaned up after it: the shell then sees 130 or 143 and knows the
/// command was stopped, as for GNU cp. Returns only when no such signal arrived.
pub fn end_by_received_signal() {
    let signal = FIRST.load(Ordering::SeqCst);
    if signal != 0 {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let _ = signal_hook::low_level::emulate_default_handler(signal);
    }
}
