//! `ringio write`: make a test file of `count` blocks, random (incompressible) or zero.

use std::fmt;
use std::io::Write;
use std::path::Path;
use std::str::FromStr;
use std::time::Instant;

use crate::error::LabError;
use ringio_base::Prng;

/// What the blocks hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Pseudo-random bytes, different in every block: nothing compresses or deduplicates.
    Random,
    /// Zero bytes.
    Zero,
}

impl FromStr for Fill {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "random" => Ok(Fill::Random),
            "zero" => Ok(Fill::Zero),
            _ => Err(format!("unknown fill '{s}' (choose from: random, zero)")),
        }
    }
}

impl fmt::Display for Fill {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fill::Random => "random",
            Fill::Zero => "zero",
        })
    }
}

/// One written file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriteResult {
    /// Bytes written.
    pub bytes: u64,
    /// Time to write them (into the page cache).
    pub seconds: f64,
    /// Time of the final fsync (to the device).
    pub fsync_seconds: f64,
}

impl WriteResult {
    /// Throughput including the fsync, MiB/s.
    pub fn mib_per_s(&self) -> f64 {
        self.bytes as f64 / (1 << 20) as f64 / (self.seconds + self.fsync_seconds).max(1e-9)
    }
}

/// Writes `count` blocks of `block_size` bytes to `path` (created or truncated), then fsyncs.
pub fn write_file(
    path: &Path,
    block_size: usize,
    count: u64,
    fill: Fill,
) -> Result<WriteResult, LabError> {
    if block_size == 0 {
        return Err(LabError::Invalid("block size must be at least 1".into()));
    }
    let start = Instant::now();
    let mut file = std::fs::File::create(path).map_err(|e| LabError::io("create", path, e))?;
    let mut buf = vec![0u8; block_size];
    let mut rng = Prng::new(0x5eed);
    for _ in 0..count {
        if fill == Fill::Random {
            rng.fill(&mut buf);
        }
        file.write_all(&buf)
            .map_err(|e| LabError::io("write", path, e))?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let synced = Instant::now();
    file.sync_all()
        .map_err(|e| LabError::io("fsync", path, e))?;
    Ok(WriteResult {
        bytes: block_size as u64 * count,
        seconds,
        fsync_seconds: synced.elapsed().as_secs_f64(),
    })
}
