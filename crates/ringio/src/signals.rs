//! SIGINT and SIGTERM, for the commands that stop cleanly on them (`cp`, `serve`).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};
use signal_hook::consts::{SIGINT, SIGTERM};

/// Sets `flag` on SIGINT or SIGTERM, so the command can stop at its next step. A second signal
/// while it winds down ends the process at once, with the shell's status for that signal.
pub fn stop_on_signals(flag: &Arc<AtomicBool>) -> Result<()> {
    for signal in [SIGINT, SIGTERM] {
        // Registered first, so it sees the flag as the earlier signal left it.
        signal_hook::flag::register_conditional_shutdown(signal, 128 + signal, Arc::clone(flag))
            .context("cannot install a signal handler")?;
        signal_hook::flag::register(signal, Arc::clone(flag))
            .context("cannot install a signal handler")?;
    }
    Ok(())
}
