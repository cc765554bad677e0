//! `ringio verify SRC DST`: prints every difference between two trees; exit 0 when they are the
//! same, 1 when they differ, 2 when the comparison cannot run.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use ringio_copy::verify::{verify, Difference, VerifyOptions, VerifyReport};

/// `ringio verify`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Compared always: names, types, sizes, content (every byte), symlink \
targets and device numbers. By default also: mode, owner and group, mtime to the nanosecond, \
extended attributes and ACLs, hard-link grouping, and holes (a sparse source must not become a \
dense copy). Access times are never compared: reading a tree moves them.\n\nExit status: 0 when \
the trees are the same, 1 when they differ, 2 when the comparison cannot run."
)]
pub struct Args {
    /// The original tree (or file).
    pub src: PathBuf,
    /// The copy.
    pub dst: PathBuf,
    /// Compare only names, types, sizes, content and symlink targets.
    #[arg(long)]
    pub content_only: bool,
    /// Do not compare extended attributes.
    #[arg(long)]
    pub no_xattrs: bool,
    /// Do not compare owners (a copy made without root keeps only the group).
    #[arg(long)]
    pub no_owner: bool,
    /// Do not compare hard-link grouping.
    #[arg(long)]
    pub no_hard_links: bool,
    /// Threads reading file contents [default: cores, at least 2].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: Option<u32>,
    /// Print only the summary line.
    #[arg(short, long)]
    pub quiet: bool,
}

impl Args {
    fn options(&self) -> VerifyOptions {
        let mut opts = if self.content_only {
            VerifyOptions::content_only()
        } else {
            VerifyOptions::archive()
        };
        opts.xattrs &= !self.no_xattrs;
        opts.ownership &= !self.no_owner;
        opts.hard_links &= !self.no_hard_links;
        if let Some(t) = self.threads {
            opts.threads = t as usize;
        }
        opts
    }
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    let start = Instant::now();
    let quiet = args.quiet;
    let report = match compare(&args.src, &args.dst, &args.options(), quiet) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("ringio: {e}");
            return Ok(2);
        }
    };
    summarize(&report, start.elapsed().as_secs_f64());
    Ok(if report.is_same() { 0 } else { 1 })
}

/// Runs the comparer, printing each difference (unless `quiet`).
pub fn compare(
    src: &std::path::Path,
    dst: &std::path::Path,
    opts: &VerifyOptions,
    quiet: bool,
) -> Result<VerifyReport, ringio_copy::verify::VerifyError> {
    let mut out = std::io::stdout().lock();
    let mut print = |d: &Difference| {
        if !quiet {
            // A closed stdout (ringio verify | head) is not an error of the comparison.
            let _ = writeln!(out, "differs: {d}");
        }
    };
    verify(src, dst, opts, &mut print)
}

/// The closing line on stderr: what was compared and what was found.
pub fn summarize(report: &VerifyReport, seconds: f64) {
    let verdict = if report.is_same() {
        "no differences".to_string()
    } else {
        format!("{} difference(s)", report.total_differences)
    };
    eprintln!(
        "ringio verify: {} entries, {} bytes compared in {seconds:.3} s: {verdict}",
        report.entries, report.bytes
    );
}
