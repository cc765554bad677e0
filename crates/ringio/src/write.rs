//! `ringio write FILE`: make a test file and report the write throughput.

use std::path::PathBuf;

use anyhow::Result;
use ringio_lab::write::{write_file, Fill};

use crate::units::parse_size;

/// `ringio write`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file to create (or truncate).
    pub file: PathBuf,
    /// Bytes per write call, e.g. 1M.
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = parse_size)]
    pub bs: u64,
    /// How many blocks.
    #[arg(long, value_name = "N")]
    pub count: u64,
    /// random (incompressible, the default) or zero.
    #[arg(long, value_name = "FILL", default_value = "random", value_parser = ["random", "zero"])]
    pub fill: String,
}

pub fn run(args: &Args) -> Result<i32> {
    let fill: Fill = args.fill.parse().map_err(anyhow::Error::msg)?;
    let r = write_file(&args.file, usize::try_from(args.bs)?, args.count, fill)?;
    println!(
        "wrote {} bytes ({fill}) in {:.3} s + fsync {:.3} s: {:.1} MiB/s",
        r.bytes,
        r.seconds,
        r.fsync_seconds,
        r.mib_per_s()
    );
    Ok(0)
}
