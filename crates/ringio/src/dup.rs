//! `ringio dup SRC DST`: duplicate one file by a chosen method, or compare them all.

use ringio_copy::quote::quote;
use std::path::PathBuf;

use anyhow::Result;
use ringio_lab::dup::{self, DupMethod};

use crate::units::parse_size;

/// `ringio dup`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Methods: rw (read/write, --bs, 1 KiB by default as in the sendfile \
report), bigbuf (the whole file in one buffer), sendfile, splice, copy-range, uring, reflink \
(btrfs, xfs), auto (reflink, else copy_file_range, else sendfile, else read/write).\n\n\
--compare runs every method in a child process of its own, --runs rounds with the methods taking \
turns, checks each copy byte \
for byte, and prints the medians of wall, user and system time, context switches and page \
faults (wait4's rusage), with the fastest and slowest run's wall time. Given DST too, it then \
writes DST with the method of the lowest median, called the fastest only when its slowest run \
beat every other method's fastest (else: level with the methods it overlaps).\n\n\
DST is truncated only once it proved to be another file than SRC: a DST that is SRC under any \
name (a hard link, a symlink, ./SRC, /proc/self/fd/N) is refused with \"'SRC' and 'DST' are \
the same file\", exit status 1, and both are left as they were. Every method copies to end of \
file, so /proc and /sys files copy whole; a regular file that shrinks or grows while copied is \
an error naming the sizes seen, exit status 1, and the partial copy is removed.\n\n\
A new DST gets SRC's permission bits less the umask, as cp gives a new file (a private file \
stays private); an existing DST keeps its mode. --compare's per-method copies are made in a \
scratch directory only the owner can enter."
)]
pub struct Args {
    /// The file to duplicate.
    pub src: PathBuf,
    /// The copy (created, or truncated once it proved to be another file than SRC). Optional
    /// with --compare, which then writes it with the fastest method after the comparison.
    #[arg(required_unless_present = "compare")]
    pub dst: Option<PathBuf>,
    /// How to copy.
    #[arg(long, value_name = "METHOD", default_value = "auto",
          value_parser = clap::builder::PossibleValuesParser::new(DupMethod::ALL.iter().map(|m| m.name())))]
    pub method: String,
    /// Block size [default: 1K for rw, 128K for the others].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub bs: Option<u64>,
    /// Compare every method (then write DST, if given, with the fastest).
    #[arg(long)]
    pub compare: bool,
    /// Runs per method with --compare.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub runs: usize,
}

/// `ringio dup`; its errors are named after the command, as cp's are after cp.
pub fn run(args: &Args) -> Result<i32> {
    match dup_or_compare(args) {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("ringio dup: {e}");
            Ok(1)
        }
    }
}

fn dup_or_compare(args: &Args) -> Result<i32> {
    let bs = args.bs.map(usize::try_from).transpose()?;
    if args.compare {
        if let Some(dst) = &args.dst {
            // Before minutes of measurements, not after them.
            dup::check_distinct(&args.src, dst)?;
        }
        let exe = std::env::current_exe()?;
        let status = crate::progress::status_line();
        let rows = dup::compare(
            &exe,
            &args.src,
            DupMethod::ALL,
            args.runs,
            bs,
            &mut |m, run| status.set_message(format!("{m} run {}", run + 1)),
        )?;
        status.finish_and_clear();
        let mut table = ringio_lab::table::new(&[
            "method", "wall s", "min s", "max s", "user s", "sys s", "vol cs", "invol cs",
            "minflt", "majflt", "rss KiB",
        ]);
        let mut failed = Vec::new();
        for row in &rows {
            match &row.outcome {
                Ok(u) => {
                    table.add_row(vec![
                        row.method.name().to_string(),
                        format!("{:.4}", u.wall.as_secs_f64()),
                        format!("{:.4}", row.wall_range.0.as_secs_f64()),
                        format!("{:.4}", row.wall_range.1.as_secs_f64()),
                        format!("{:.4}", u.user.as_secs_f64()),
                        format!("{:.4}", u.sys.as_secs_f64()),
                        u.voluntary_switches.to_string(),
                        u.involuntary_switches.to_string(),
                        u.minor_faults.to_string(),
                        u.major_faults.to_string(),
                        u.max_rss_kib.to_string(),
                    ]);
                }
                Err(why) => failed.push(format!(
                    "{} unsupported or failed: {why}",
                    row.method.name()
                )),
            }
        }
        print!("{}", ringio_lab::table::render(&table));
        for line in failed {
            println!("{line}");
        }
        let Some(dst) = &args.dst else {
            return Ok(0);
        };
        let best = rows
            .iter()
            .filter(|r| r.outcome.is_ok())
            .min_by_key(|r| r.outcome.as_ref().map(|u| u.wall).unwrap_or_default());
        let Some(best) = best else {
            anyhow::bail!("no method worked here, so {} was not written", quote(&dst));
        };
        let method = best.method;
        let wall = best.outcome.as_ref().map(|u| u.wall).unwrap_or_default();
        // Fastest only beyond the spread of the runs; otherwise the methods it overlaps.
        let verdict = if best.clearly_fastest(&rows) {
            "the fastest here".to_string()
        } else {
            let level: Vec<&str> = rows
                .iter()
                .filter(|r| r.method != method && r.outcome.is_ok())
                .filter(|r| r.wall_range.0 <= best.wall_range.1)
                .map(|r| r.method.name())
                .collect();
            format!(
                "the lowest median, level with {} (their runs overlap)",
                level.join(", ")
            )
        };
        let bs = bs.unwrap_or_else(|| method.default_block_size());
        let done = dup::dup(&args.src, dst, method, bs)?;
        println!(
            "wrote {} ({} bytes) with {}, {verdict} ({:.4} s median, {:.4}-{:.4} s)",
            quote(&dst),
            done.bytes,
            done.used,
            wall.as_secs_f64(),
            best.wall_range.0.as_secs_f64(),
            best.wall_range.1.as_secs_f64(),
        );
        return Ok(0);
    }
    let method: DupMethod = args.method.parse().map_err(anyhow::Error::msg)?;
    let dst = args
        .dst
        .as_ref()
        .expect("clap requires DST without --compare");
    let bs = bs.unwrap_or_else(|| method.default_block_size());
    let started = std::time::Instant::now();
    let done = dup::dup(&args.src, dst, method, bs)?;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "copied {} bytes with {} in {secs:.4} s ({:.1} MiB/s)",
        done.bytes,
        done.used,
        done.bytes as f64 / (1 << 20) as f64 / secs.max(1e-9)
    );
    Ok(0)
}
