//! `ringio verify SRC DST`: prints every difference between two trees; exit 0 when they are the
//! same, 1 when they differ, 2 when the comparison cannot run.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use ringio_copy::digest::Algo;
use ringio_copy::manifest::Format;
use ringio_copy::quote::quote;
use ringio_copy::verify::{Difference, VerifyOptions, VerifyReport};

/// `ringio verify`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Compared always: names, types, sizes, content (every byte), symlink \
targets and device numbers. By default also: mode, owner and group, mtime to the nanosecond, \
extended attributes and ACLs, hard-link grouping, and holes (a sparse source must not become a \
dense copy). Access times are never compared: reading a tree moves them.\n\nExit status: 0 when \
the trees are the same, 1 when they differ, 2 when the comparison cannot run.\n\nWith \
--manifest FILE DIR: every file FILE lists (the lines of sha256sum, b3sum, xxhsum, sha1sum or \
md5sum, plain or --tag, names relative to DIR) is hashed again and compared; a listed file that \
is missing or differs, and a regular file below DIR that FILE does not list, is named. Every \
listed name is reached from DIR without following a symlink: a listed name that is a symlink, \
or lies through one, is a difference (never a way out of DIR). Symlinks and special files \
below DIR are counted (-v names them). Each difference is one line on stdout; the summary is \
one line on stderr. FILE must be a regular file (a symlink to one is \
followed); the ascmhl folder's files must be regular files in it, not symlinks. The \
algorithm is --hash's, else the one the lines or FILE's name (SHA256SUMS, x.b3, x.xxh128, ...) \
or the hashes' length name. --uncached reads each file from the device (O_DIRECT, or its pages \
written back and dropped first), not from the page cache; without --manifest, it reads the \
copy's files so. Exit status 2 for a manifest that \
cannot be read, with the line and what is wrong with it."
)]
pub struct Args {
    /// The original tree (or file); with --manifest, the tree the manifest describes.
    pub src: PathBuf,
    /// The copy (not with --manifest).
    pub dst: Option<PathBuf>,
    /// Check SRC against this checksum manifest instead of another tree.
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    /// The manifest's algorithm (when its lines and name do not say).
    #[arg(long, value_name = "ALGO", requires = "manifest")]
    pub hash: Option<String>,
    /// Read the copy's files (with --manifest: the listed files) from the device, not the
    /// page cache.
    #[arg(long)]
    pub uncached: bool,
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
    /// With --manifest: a bar on stderr while the files are read (when it is a terminal):
    /// bytes read of the total, rate and ETA.
    #[arg(long, requires = "manifest")]
    pub progress: bool,
    /// Print only the summary line.
    #[arg(short, long)]
    pub quiet: bool,
    /// With --manifest: name each symlink and special file below DIR (a manifest lists
    /// regular files only; without -v they are counted in the summary line).
    #[arg(short, long)]
    pub verbose: bool,
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
        opts.uncached = self.uncached;
        opts
    }
}

/// A value of `option` among `all` (`--hash`'s algorithms, `--manifest-format`'s formats);
/// a wrong one is one line naming the choices, for an exit status of 2.
pub(crate) fn choice<T>(option: &str, value: &str, all: &[T]) -> Result<T, String>
where
    T: Copy + std::str::FromStr + Into<&'static str>,
{
    ringio_copy::manifest::choice(option, value, all)
}

/// `--hash ALGO`, read.
pub(crate) fn algo(value: Option<&str>) -> Result<Option<Algo>, String> {
    value.map(|v| choice("--hash", v, Algo::ALL)).transpose()
}

/// `--manifest-format FORMAT`, read.
pub(crate) fn format(value: Option<&str>) -> Result<Option<Format>, String> {
    value
        .map(|v| choice("--manifest-format", v, Format::ALL))
        .transpose()
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    let start = Instant::now();
    let quiet = args.quiet;
    let algo = match algo(args.hash.as_deref()) {
        Ok(algo) => algo,
        Err(e) => {
            eprintln!("ringio verify: {e}");
            return Ok(2);
        }
    };
    if let Some(manifest) = &args.manifest {
        if args.dst.is_some() {
            eprintln!("ringio verify: with --manifest, give only the tree it describes");
            return Ok(2);
        }
        return Ok(check_manifest(args, manifest, algo, start));
    }
    let Some(dst) = &args.dst else {
        eprintln!("ringio verify: give the original and the copy (or --manifest FILE DIR)");
        return Ok(2);
    };
    let lines = if quiet { Lines::Quiet } else { Lines::Stdout };
    let read = std::sync::atomic::AtomicU64::new(0);
    let report = match compare(&args.src, dst, &args.options(), (lines, &read)) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("ringio: {e}");
            return Ok(2);
        }
    };
    summarize(&report, start.elapsed().as_secs_f64(), args.uncached);
    Ok(if report.is_same() { 0 } else { 1 })
}

/// `--manifest`: hashes what the manifest lists below `args.src`, prints each finding, and
/// returns the exit status.
fn check_manifest(
    args: &Args,
    manifest: &std::path::Path,
    algo: Option<Algo>,
    start: Instant,
) -> i32 {
    let threads = args.threads.map_or_else(readers, |t| t as usize);
    let listing = match ringio_copy::manifest::read(manifest, algo) {
        Ok(listing) => listing,
        Err(e) => {
            eprintln!("ringio verify: {e}");
            return 2;
        }
    };
    let read = std::sync::atomic::AtomicU64::new(0);
    let name = if args.uncached {
        "verify (device)"
    } else {
        "verify"
    };
    let total = || ringio_copy::manifest::listed_bytes(&args.src, &listing);
    let report = crate::progress::phase(args.progress, name, (total, &read), || {
        ringio_copy::verify::check_listing(
            &args.src,
            &listing,
            Some(manifest),
            args.uncached,
            (threads, &read, true),
        )
    });
    let lines = if args.quiet {
        Lines::Quiet
    } else {
        Lines::Stdout
    };
    let lines = if args.verbose && !args.quiet {
        Lines::StdoutVerbose
    } else {
        lines
    };
    manifest_verdict(&report, start, lines, "ringio verify")
}

/// `--hash`: writes the manifest of a copy (or sync) that ran to its end without an error
/// (none vouches for a failed one: the callers write none then). A failure to write it is
/// said through `report` (the caller's error printer: the message, without the program's
/// name, and the failure as a `CopyError` for its fields) and its exit status returned.
pub(crate) fn write_manifest(
    hashing: &ringio_copy::Hashing,
    listing: &ringio_copy::manifest::Listing,
    report: &dyn Fn(&str, &ringio_copy::CopyError),
) -> Option<i32> {
    let target = match (&hashing.manifest, hashing.format) {
        (Some(file), _) => file.as_path(),
        (None, Format::Mhl) => hashing.base.as_path(),
        (None, _) => return None,
    };
    match ringio_copy::manifest::write(listing, hashing.format, target) {
        Ok(_) => None,
        Err(e) => {
            let message = format!(
                "cannot write the manifest {}: {}",
                quote(target),
                ringio_copy::quote::reason(&e)
            );
            let failed = ringio_copy::CopyError::io(ringio_copy::Op::Write, target, e);
            report(&message, &failed);
            Some(1)
        }
    }
}

/// The first file two destinations' listings disagree on (in one only, or hashed
/// differently), if any.
pub(crate) fn differing_hash(
    ours: &ringio_copy::manifest::Listing,
    theirs: &ringio_copy::manifest::Listing,
) -> Option<String> {
    let by_path: std::collections::HashMap<&[u8], &str> = ours
        .entries
        .iter()
        .map(|e| (e.path.as_slice(), e.hex.as_str()))
        .collect();
    let name = |p: &[u8]| {
        quote(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(p)).to_string()
    };
    if let Some(e) = theirs
        .entries
        .iter()
        .find(|e| !by_path.contains_key(e.path.as_slice()))
    {
        return Some(format!("{} is in one copy only", name(&e.path)));
    }
    if ours.entries.len() != theirs.entries.len() {
        let theirs: std::collections::HashSet<&[u8]> =
            theirs.entries.iter().map(|e| e.path.as_slice()).collect();
        let only = ours
            .entries
            .iter()
            .find(|e| !theirs.contains(e.path.as_slice()))?;
        return Some(format!("{} is in one copy only", name(&only.path)));
    }
    theirs.entries.iter().find_map(|e| {
        let mine = by_path.get(e.path.as_slice())?;
        (*mine != e.hex).then(|| {
            format!(
                "{} hashed differently for each (the source changed while it was read, or \
                 one destination already held another version)",
                name(&e.path)
            )
        })
    })
}

/// Readers of a manifest check: one a core, at least two.
pub(crate) fn readers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2))
}

/// Where a check's per-file lines go: stdout, stderr (when stdout carries `--json`), nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lines {
    Stdout,
    /// Stdout, and the names of what a manifest does not cover (`verify -v`).
    StdoutVerbose,
    Stderr,
    Quiet,
}

impl Lines {
    /// The stream, or `None` when quiet. A closed one (`| head`) is not the check's error.
    fn sink(self) -> Option<Box<dyn Write>> {
        match self {
            Lines::Stdout | Lines::StdoutVerbose => Some(Box::new(std::io::stdout().lock())),
            Lines::Stderr => Some(Box::new(std::io::stderr().lock())),
            Lines::Quiet => None,
        }
    }
}

/// Prints each finding of a manifest check to `lines` and `who`'s closing line; returns the
/// exit status.
pub(crate) fn manifest_verdict(
    report: &ringio_copy::verify::ManifestReport,
    start: Instant,
    lines: Lines,
    who: &str,
) -> i32 {
    use ringio_copy::verify::ReadFrom;
    if let Some(mut out) = lines.sink() {
        for finding in &report.findings {
            let _ = writeln!(out, "{finding}");
        }
        for path in report
            .uncovered
            .iter()
            .filter(|_| lines == Lines::StdoutVerbose)
        {
            let _ = writeln!(
                out,
                "not covered: {} (not a regular file: a manifest lists files only)",
                quote(path)
            );
        }
    }
    let read = match report.read_from {
        ReadFrom::Cache => "read through the page cache",
        ReadFrom::Direct => "read from the device (O_DIRECT)",
        ReadFrom::Dropped => "read from the device (cached pages dropped first)",
        ReadFrom::Mixed => "read from the device (O_DIRECT, or cached pages dropped first)",
    };
    let verdict = if report.findings.is_empty() {
        "no differences".to_string()
    } else {
        format!("{} difference(s)", report.findings.len())
    };
    let uncovered = match report.uncovered.len() {
        0 => String::new(),
        n => format!(
            "; {n} symlink(s) or special file(s) not covered (a manifest lists regular files{})",
            if lines == Lines::StdoutVerbose {
                ""
            } else {
                "; -v names them"
            }
        ),
    };
    eprintln!(
        "{who}: {} files, {} bytes hashed ({}, {read}) in {:.3} s: {verdict}{uncovered}",
        report.listed,
        report.bytes,
        report.algo,
        start.elapsed().as_secs_f64()
    );
    i32::from(!report.findings.is_empty())
}

/// Runs the comparer, printing each difference to `lines` and adding the bytes compared to
/// `read` as they are.
pub(crate) fn compare(
    src: &std::path::Path,
    dst: &std::path::Path,
    opts: &VerifyOptions,
    (lines, read): (Lines, &std::sync::atomic::AtomicU64),
) -> Result<VerifyReport, ringio_copy::verify::VerifyError> {
    let mut out = lines.sink();
    let mut print = |d: &Difference| {
        if let Some(out) = &mut out {
            let _ = writeln!(out, "differs: {d}");
        }
    };
    ringio_copy::verify::verify_counted(src, dst, opts, &mut print, read)
}

/// The closing line on stderr: what was compared and what was found.
pub fn summarize(report: &VerifyReport, seconds: f64, uncached: bool) {
    let verdict = if report.is_same() {
        "no differences".to_string()
    } else {
        format!("{} difference(s)", report.total_differences)
    };
    let read = if uncached {
        " (the copy read from the device)"
    } else {
        ""
    };
    eprintln!(
        "ringio verify: {} entries, {} bytes compared{read} in {seconds:.3} s: {verdict}",
        report.entries, report.bytes
    );
}
