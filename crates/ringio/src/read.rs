//! `ringio read FILE`: read throughput by block size, threads, cache state and method, with an
//! XOR checksum that proves every byte was read.

use ringio_copy::quote::quote;
use std::path::PathBuf;

use anyhow::Result;
use ringio_lab::plot::{line_chart, LineChart, Series};
use ringio_lab::read::{self, ReadMethod, ReadOptions};
use ringio_lab::{cache, xor};

use crate::units::parse_size;

/// `ringio read`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Prints the XOR of the file as little-endian 32-bit words (a final \
partial word zero-padded) as 8 hex digits, then bytes, seconds and MiB/s. The checksum is the \
same for every method, thread count and block size.\n\n\
The size from stat is only a hint: every read goes on to end of file. A file without one (/proc \
and /sys files, pipes, devices) is read from start to end with read(2) on one thread, whatever \
the method. A file that shrinks or grows while it is read (mmap included) is an error naming \
the sizes seen, exit status 1."
)]
pub struct Args {
    /// The file to read (with --calibrate: the scratch file to write).
    pub file: PathBuf,
    /// Bytes per read call, e.g. 4K, 1M.
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = parse_size)]
    pub bs: u64,
    /// Read only the first N blocks [default: the whole file].
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Threads; the file is split into that many contiguous ranges.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: u32,
    /// psync (pread), uring (io_uring, --queue-depth reads in flight per thread) or mmap.
    #[arg(long, value_name = "METHOD", default_value = "psync", value_parser = clap::builder::PossibleValuesParser::new(ReadMethod::ALL.iter().map(|m| m.name())))]
    pub method: String,
    /// io_uring reads in flight per thread.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub queue_depth: u32,
    /// O_DIRECT: bypass the page cache (psync and uring; block size a multiple of 4 KiB).
    #[arg(long)]
    pub direct: bool,
    /// Evict the file from the page cache first (POSIX_FADV_DONTNEED; no root needed).
    #[arg(long)]
    pub cold: bool,
    /// With --cold: drop the whole page cache too (root only).
    #[arg(long, requires = "cold")]
    pub drop_caches: bool,
    /// Measure block sizes from 512 B up to --max-bs (powers of two, then around the best).
    #[arg(long, conflicts_with = "calibrate")]
    pub sweep: bool,
    /// Largest block size of a sweep.
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = parse_size)]
    pub max_bs: u64,
    /// Runs per block size in a sweep (the median counts).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub runs: usize,
    /// Write the sweep as an SVG chart.
    #[arg(long, value_name = "SVG", requires = "sweep")]
    pub plot: Option<PathBuf>,
    /// Find a file size that takes at least --min-seconds to read, by doubling (writes FILE).
    #[arg(long, requires = "min_seconds")]
    pub calibrate: bool,
    /// The target read time of --calibrate.
    #[arg(long, value_name = "SECONDS")]
    pub min_seconds: Option<f64>,
    /// The first size --calibrate tries.
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = parse_size)]
    pub start: u64,
}

fn options(args: &Args) -> Result<ReadOptions> {
    Ok(ReadOptions {
        block_size: usize::try_from(args.bs)?,
        count: args.count,
        threads: args.threads as usize,
        method: args
            .method
            .parse::<ReadMethod>()
            .map_err(anyhow::Error::msg)?,
        direct: args.direct,
        queue_depth: args.queue_depth,
    })
}

fn make_cold(args: &Args) -> Result<(), ringio_lab::LabError> {
    if args.cold {
        if args.drop_caches {
            cache::drop_caches()?;
        }
        cache::evict(&args.file)?;
    }
    Ok(())
}

pub fn run(args: &Args) -> Result<i32> {
    let opts = options(args)?;
    if args.calibrate {
        let min = args.min_seconds.unwrap_or(1.0);
        let found = read::calibrate(
            &args.file,
            &opts,
            args.start,
            min,
            args.cold,
            &mut |size, s| {
                eprintln!("  {size:>14} bytes read in {s:.3} s");
            },
        )?;
        println!(
            "calibrated size: {} bytes ({:.1} MiB), read in {:.3} s (target {min} s)",
            found.size,
            found.size as f64 / (1 << 20) as f64,
            found.seconds
        );
        return Ok(0);
    }
    if args.sweep {
        println!(
            "{:>12} {:>12} {:>12} {:>12}",
            "block", "median MiB/s", "min", "max"
        );
        let points = read::sweep(
            &args.file,
            &opts,
            args.runs,
            usize::try_from(args.max_bs)?,
            &|| make_cold(args),
            &mut |p| {
                println!(
                    "{:>12} {:>12.0} {:>12.0} {:>12.0}",
                    p.block_size, p.median, p.min, p.max
                )
            },
        )?;
        let best = read::best_of(&points);
        let (low, high) = read::within_noise_of_best(&points);
        println!(
            "best block size: {} bytes ({:.0} MiB/s median); within the noise of these runs, \
             anything from {low} to {high} bytes does as well",
            best.block_size, best.median
        );
        if let Some(svg) = &args.plot {
            let series = [Series {
                name: format!(
                    "{} x{} {}",
                    opts.method,
                    opts.threads,
                    if args.cold { "cold" } else { "warm" }
                ),
                points: points
                    .iter()
                    .map(|p| (p.block_size as f64, p.median))
                    .collect(),
            }];
            line_chart(
                svg,
                &LineChart {
                    title: "ringio read: throughput against block size",
                    x_label: "block size (bytes)",
                    y_label: "MiB/s (median)",
                    log_x: true,
                    log_y: false,
                    series: &series,
                },
            )?;
            eprintln!("wrote {}", svg.display());
        }
        return Ok(0);
    }
    make_cold(args)?;
    let r = read::read_file(&args.file, &opts)?;
    if !r.sized && r.bytes > 0 && (opts.method != ReadMethod::Psync || opts.threads > 1) {
        eprintln!(
            "ringio read: note: {} has no size by stat, so it was read to its end with \
read(2) on one thread, not {} on {}",
            quote(&args.file),
            opts.method,
            match opts.threads {
                1 => "1 thread".to_string(),
                n => format!("{n} threads"),
            }
        );
    }
    println!(
        "xor {}  bytes {}  seconds {:.6}  MiB/s {:.1}",
        xor::hex(r.xor),
        r.bytes,
        r.seconds,
        r.mib_per_s()
    );
    Ok(0)
}
