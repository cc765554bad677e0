//! `ringio man DIR`: the manual pages, from the same clap definitions as `--help`.

use ringio_copy::quote::quote;
use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::cli::Cli;

/// Writes `ringio.1` and `ringio-<command>.1` for every subcommand, nested ones included
/// (`ringio-bench-copy.1`), into `dir` (created if missing).
pub fn run(dir: &Path) -> Result<i32> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", quote(&dir)))?;
    clap_mangen::generate_to(Cli::command(), dir)
        .with_context(|| format!("cannot write man pages into {}", quote(&dir)))?;
    println!(
        "ringio: wrote ringio.1 and a ringio-<command>.1 for every command into {}",
        quote(&dir)
    );
    Ok(0)
}
