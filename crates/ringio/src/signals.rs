//! SIGINT and SIGTERM, for the commands that stop cleanly on them (`cp`, `serve`).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// How long a command has to wind down after the first signal before that signal ends it.
const GRACE: Duration = Duration::from_secs(2);

/// Sets `flag` on SIGINT or SIGTERM, so the command can stop at its next step. A second signal
/// while it winds down ends the process at once, with the shell's status for that signal, and
/// so does the first when the command has not finished within [`GRACE`]: a copy blocked in the
/// kernel (opening a FIFO that nothing writes, reading a device that never answers) never
/// reaches its next step, and `timeout` or an init system sends one SIGTERM.
pub fn stop_on_signals(flag: &Arc<AtomicBool>) -> Result<()> {
    for signal in [SIGINT, SIGTERM] {
        // Registered first, so it sees the flag as the earlier signal left it.
        signal_hook::flag::register_conditional_shutdown(signal, 128 + signal, Arc::clone(flag))
            .context("cannot install a signal handler")?;
        signal_hook::flag::register(signal, Arc::clone(flag))
            .context("cannot install a signal handler")?;
    }
    let mut signals = Signals::new([SIGINT, SIGTERM]).context("cannot install a signal handler")?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                std::thread::sleep(GRACE);
                // Still running: end as the signal's default action does.
                let _ = signal_hook::low_level::emulate_default_handler(signal);
                std::process::exit(128 + signal);
            }
        })
        .context("cannot start the signal thread")?;
    Ok(())
}
