//! `ringio syscost`: what one system call costs, in nanoseconds, measured over many calls.

use std::fmt;
use std::io::Write;
use std::os::fd::AsFd;
use std::time::Instant;

use io_uring::{opcode, IoUring};

use crate::error::LabError;

/// A call whose cost is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// pread of 1 byte from a cached file.
    Read1,
    /// lseek(fd, 0, SEEK_CUR).
    Lseek,
    /// getppid, the cheapest real system call (neither rustix nor glibc caches it).
    Getppid,
    /// An io_uring NOP, submitted and waited for one at a time.
    UringNop,
    /// io_uring NOPs, 32 per io_uring_enter.
    UringNop32,
}

impl Call {
    /// Every call, in table order.
    pub const ALL: &'static [Call] = &[
        Call::Read1,
        Call::Lseek,
        Call::Getppid,
        Call::UringNop,
        Call::UringNop32,
    ];

    /// The column name.
    pub fn name(self) -> &'static str {
        match self {
            Call::Read1 => "read 1 B",
            Call::Lseek => "lseek",
            Call::Getppid => "getppid",
            Call::UringNop => "uring nop",
            Call::UringNop32 => "uring nop x32",
        }
    }
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Nanoseconds per call of `call`, over `count` calls.
pub fn measure(call: Call, count: u64) -> Result<f64, LabError> {
    let count = count.max(1);
    let io = |op, e: std::io::Error| LabError::io(op, "(syscost scratch file)", e);
    match call {
        Call::Read1 | Call::Lseek => {
            let mut file = tempfile::tempfile().map_err(|e| io("create", e))?;
            file.write_all(b"x").map_err(|e| io("write", e))?;
            let fd = file.as_fd();
            let mut byte = [0u8; 1];
            let start = Instant::now();
            for _ in 0..count {
                if call == Call::Read1 {
                    rustix::io::pread(fd, &mut byte, 0).map_err(|e| io("read", e.into()))?;
                } else {
                    rustix::fs::seek(fd, rustix::fs::SeekFrom::Current(0))
                        .map_err(|e| io("seek", e.into()))?;
                }
            }
            Ok(per_call(start, count))
        }
        Call::Getppid => {
            let start = Instant::now();
            for _ in 0..count {
                std::hint::black_box(rustix::process::getppid());
            }
            Ok(per_call(start, count))
        }
        Call::UringNop | Call::UringNop32 => {
            let batch = if call == Call::UringNop { 1 } else { 32 };
            let mut ring = IoUring::new(32).map_err(|e| io("set up io_uring for", e))?;
            let rounds = count.div_ceil(batch);
            let nop = opcode::Nop::new().build();
            let start = Instant::now();
            for _ in 0..rounds {
                for _ in 0..batch {
                    // SAFETY: a NOP references no memory.
                    unsafe { ring.submission().push(&nop).expect("room for the batch") };
                }
                ring.submit_and_wait(batch as usize)
                    .map_err(|e| io("submit to io_uring for", e))?;
                ring.completion().for_each(drop);
            }
            Ok(per_call(start, rounds * batch))
        }
    }
}

fn per_call(start: Instant, count: u64) -> f64 {
    start.elapsed().as_nanos() as f64 / count as f64
}

/// One row of the table: a call count and ns/call for each of [`Call::ALL`].
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Calls made per measurement.
    pub calls: u64,
    /// ns per call, in [`Call::ALL`] order.
    pub ns: Vec<f64>,
}

/// Measurements of each call at a count up to [`REPEATED_UP_TO`]: the median is kept, so one
/// slow moment (a timer interrupt, the host) is not a point of the table. Larger counts average
/// such moments away in one measurement.
const REPEATS: usize = 5;
const REPEATED_UP_TO: u64 = 100_000;

/// Measures every call at 10^3, 10^4, ... up to `max_calls`: up to [`REPEATED_UP_TO`] calls,
/// each the median of [`REPEATS`] measurements, the calls taking turns.
pub fn table(max_calls: u64, progress: &mut dyn FnMut(&Row)) -> Result<Vec<Row>, LabError> {
    let mut rows = Vec::new();
    let mut calls = 1000u64.min(max_calls.max(1));
    loop {
        let mut samples: Vec<Vec<f64>> = Call::ALL.iter().map(|_| Vec::new()).collect();
        let repeats = if calls <= REPEATED_UP_TO { REPEATS } else { 1 };
        for _ in 0..repeats {
            for (i, &c) in Call::ALL.iter().enumerate() {
                samples[i].push(measure(c, calls)?);
            }
        }
        let ns = samples
            .into_iter()
            .map(|mut v| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            })
            .collect();
        let row = Row { calls, ns };
        progress(&row);
        rows.push(row);
        if calls >= max_calls {
            return Ok(rows);
        }
        calls = (calls * 10).min(max_calls);
    }
}
