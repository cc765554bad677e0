//! `ringio cp`: arguments → `CopyPlan` → run, with messages, progress and the exit code.

use ringio_copy::quote::quote;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::{bail, Result};
use indicatif::{HumanBytes, ProgressBar};
use ringio_copy::digest::Algo;
use ringio_copy::manifest::{Format, Listing};
use ringio_copy::verify::VerifyOptions;
use ringio_copy::{
    BackupMode, BackupRequest, Clobber, CopyError, CopyPlan, Dereference, HashRequest, LinkMode,
    Overwrite, Preserve, Progress, Reflink, Resume, Sparse, Tuning,
};

use crate::cli::{
    BackupControl, CpArgs, PreserveStep, ReflinkWhen, ResumeCheck, SparseWhen, UpdateWhen,
};

/// Turns the arguments into a plan, with cp's precedence rules. Usage errors come in GNU
/// cp's order (the options as a whole here, then the backup type and the operands as
/// [`ringio_copy::PlanBuilder::build`] validates them) and end with its pointer to --help.
pub fn plan(args: &CpArgs) -> Result<CopyPlan> {
    // Checked by `run` first, for their exit status of 2.
    let algo = crate::verify::algo(args.hash.as_deref()).map_err(anyhow::Error::msg)?;
    let format =
        crate::verify::format(args.manifest_format.as_deref()).map_err(anyhow::Error::msg)?;
    let try_help = format!("Try '{}' for more information.", help_command());
    if args.context.as_deref().is_some_and(|ctx| !ctx.is_empty()) {
        eprintln!(
            "{}: warning: ignoring --context; it requires an SELinux-enabled kernel",
            crate::argv::program()
        );
    }
    if args.link && args.symbolic_link {
        bail!("cannot make both hard and symbolic links\n{try_help}");
    }
    let make_backups = args.backup.is_some() || args.backup_default || args.suffix.is_some();
    if make_backups && args.no_clobber {
        bail!("options --backup and --no-clobber are mutually exclusive\n{try_help}");
    }
    if args.reflink == ReflinkWhen::Always && args.sparse != SparseWhen::Auto {
        bail!("--reflink can be used only with --sparse=auto\n{try_help}");
    }
    let backup = make_backups.then(|| BackupRequest {
        control: args
            .backup
            .as_ref()
            .and_then(|values| values.last())
            .cloned(),
        suffix: args.suffix.clone(),
        read: |value, context| BackupControl::parse(value, context).map(backup_mode),
    });
    // As GNU: the last of --preserve=context and --no-preserve=context counts (`all` does not
    // ask for the context).
    let names_context = |list: &str| list.split(',').any(|w| w == "context");
    let context_required = args
        .preserve_steps
        .iter()
        .fold(false, |required, step| match step {
            PreserveStep::Keep(list) if names_context(list) => true,
            PreserveStep::Drop(list) if names_context(list) => false,
            _ => required,
        });

    let recursive = args.recursive || args.archive;
    let mut preserve = Preserve::default();
    let mut default_modes = false;
    // The lists were checked as the options were read.
    for step in &args.preserve_steps {
        match step {
            PreserveStep::Archive => preserve = Preserve::ALL,
            PreserveStep::Links => preserve.links = true,
            PreserveStep::Default => preserve = preserve.union(Preserve::P),
            PreserveStep::Keep(list) => {
                preserve
                    .apply_list(list, true)
                    .map_err(anyhow::Error::msg)?;
            }
            PreserveStep::Drop(list) => {
                // An explicit --no-preserve=mode gives new entries the default modes.
                default_modes |= list.split(',').any(|w| w == "mode" || w == "all");
                preserve
                    .apply_list(list, false)
                    .map_err(anyhow::Error::msg)?;
            }
        }
    }

    let link = if args.link {
        LinkMode::Hard
    } else if args.symbolic_link {
        LinkMode::Symbolic
    } else {
        LinkMode::Copy
    };
    let dereference = if args.dereference {
        Dereference::Always
    } else if args.dereference_args {
        Dereference::CommandLine
    } else if args.no_dereference
        || args.archive
        || args.no_deref_preserve_links
        || (recursive && link != LinkMode::Hard)
    {
        Dereference::Never
    } else if link == LinkMode::Hard {
        // cp -l without -r links to what a symlink names (cp's DEREF_ALWAYS).
        Dereference::Always
    } else {
        // cp without -r follows symlinks named on the command line.
        Dereference::CommandLine
    };

    let no_clobber = args.no_clobber || args.update == Some(UpdateWhen::None);
    let overwrite = match args.resume {
        // --resume decides what is kept, whatever -n says.
        None if no_clobber => Overwrite::NoClobber,
        resume => {
            let clobber = match (resume, args.update) {
                (Some(ResumeCheck::Quick), _) => Clobber::Incomplete(Resume::Quick),
                (Some(ResumeCheck::Checksum), _) => Clobber::Incomplete(Resume::Checksum),
                (None, Some(UpdateWhen::Older)) => Clobber::Older,
                (None, _) => Clobber::All,
            };
            if args.interactive {
                Overwrite::Interactive(clobber)
            } else {
                Overwrite::Clobber(clobber)
            }
        }
    };

    let mut tuning = Tuning::default();
    if let Some(bs) = args.bs {
        tuning.block_size = usize::try_from(bs).unwrap_or(usize::MAX);
    }
    if let Some(t) = args.threads {
        tuning.threads = t as usize;
    }
    if let Some(q) = args.queue_depth {
        tuning.queue_depth = q;
    }
    if let Some(s) = args.small_file_threshold {
        tuning.small_file_threshold = s.min(16 << 20);
    }
    if let Some(c) = args.chunk_size {
        tuning.chunk_size = c;
    }
    tuning.ring_only = args.ring_only;
    CopyPlan::builder(args.paths.clone())
        .target_directory(args.target_directory.clone())
        .no_target_directory(args.no_target_directory)
        .parents(args.parents)
        .strip_trailing_slashes(args.strip_trailing_slashes)
        .backup(backup)
        .preserve_context(context_required)
        .recursive(recursive)
        .dereference(dereference)
        .preserve(preserve)
        .default_modes(default_modes)
        .overwrite(overwrite)
        .force(args.force)
        .engine(args.engine.0)
        .tuning(tuning)
        .sparse(match args.sparse {
            SparseWhen::Auto => Sparse::Auto,
            SparseWhen::Always => Sparse::Always,
            SparseWhen::Never => Sparse::Never,
        })
        .reflink(match args.reflink {
            ReflinkWhen::Auto => Reflink::Auto,
            ReflinkWhen::Always => Reflink::Always,
            ReflinkWhen::Never => Reflink::Never,
        })
        .remove_destination(args.remove_destination)
        .atomic(args.atomic)
        .fsync(args.fsync)
        .one_file_system(args.one_file_system)
        .direct(args.direct)
        .copy_contents(args.copy_contents)
        .link(link)
        .attributes_only(args.attributes_only)
        .hashing(hash_request(args, algo, format)?)
        .build()
        .map_err(|e| {
            if e.is_usage() {
                anyhow::anyhow!("{e}\n{try_help}")
            } else {
                anyhow::anyhow!("{e}")
            }
        })
}

/// The backup mode a `--backup` control names (`None`: no backups).
fn backup_mode(control: BackupControl) -> Option<BackupMode> {
    match control {
        BackupControl::Numbered => Some(BackupMode::Numbered),
        BackupControl::Existing => Some(BackupMode::Existing),
        BackupControl::Simple => Some(BackupMode::Simple),
        BackupControl::None => None,
    }
}

/// How to ask for help in a usage error: `cp --help` or `ringio cp --help`.
fn help_command() -> &'static str {
    match crate::argv::program() {
        "cp" => "cp --help",
        _ => "ringio cp --help",
    }
}

/// Prints errors, `-v` lines and notes; keeps the progress bar out of their way.
struct Terminal {
    bar: Option<ProgressBar>,
    /// `-v` (or `--debug`, which implies it).
    verbose: bool,
    /// `--debug`.
    debug: bool,
    asking: std::sync::Mutex<()>,
}

impl Terminal {
    fn line(&self, to_stderr: bool, text: &str) {
        let print = || {
            if to_stderr {
                let _ = writeln!(std::io::stderr().lock(), "{text}");
            } else {
                // A closed stdout (ringio cp -v | head) is not an error of the copy.
                let _ = writeln!(std::io::stdout().lock(), "{text}");
            }
        };
        match &self.bar {
            Some(bar) => bar.suspend(print),
            None => print(),
        }
    }
}

impl ringio_copy::Reporter for Terminal {
    fn verbose(&self) -> bool {
        self.verbose
    }

    fn debug(&self) -> bool {
        self.debug
    }

    fn error(&self, err: &CopyError) {
        self.line(true, &format!("{}: {err}", crate::argv::program()));
    }

    fn copied(&self, src: &Path, dst: &Path) {
        self.line(false, &format!("{} -> {}", quote(&src), quote(&dst)));
    }

    fn verbose_line(&self, line: &str) {
        self.line(false, line);
    }

    fn note(&self, msg: &str) {
        self.line(true, &format!("{}: {msg}", crate::argv::program()));
    }

    fn confirm(&self, question: &str) -> bool {
        let ask = || {
            let _ = write!(
                std::io::stderr().lock(),
                "{}: {question}",
                crate::argv::program()
            );
            let mut answer = String::new();
            // GNU's yesno(): the first character of the line decides; EOF is no.
            let _ = std::io::stdin().read_line(&mut answer);
            answer.starts_with(['y', 'Y'])
        };
        // One question at a time, even from several workers.
        let _asking = self.asking.lock().unwrap_or_else(|e| e.into_inner());
        match &self.bar {
            Some(bar) => bar.suspend(ask),
            None => ask(),
        }
    }
}

/// `--hash`, `--manifest`, `--manifest-format` as one request (none without them); a format
/// or an algorithm with nothing to use it is a usage error.
pub(crate) fn hash_request(
    args: &CpArgs,
    algo: Option<Algo>,
    format: Option<Format>,
) -> Result<Option<HashRequest>> {
    let asked_format = format.is_some();
    let format = format.unwrap_or_default();
    let writes = args.manifest.is_some() || format == Format::Mhl;
    if asked_format && !writes {
        bail!("--manifest-format needs --manifest FILE (mhl alone writes into the destination)");
    }
    if algo.is_some() && !writes && !args.verify {
        bail!("--hash needs --manifest FILE, --manifest-format=mhl or --verify to use the hashes");
    }
    if algo.is_none() && !writes {
        return Ok(None);
    }
    Ok(Some(HashRequest {
        algo: algo.unwrap_or(Algo::Xxh128),
        format,
        manifest: args.manifest.clone(),
    }))
}

/// `--hash`: writes the manifest of a copy that ran to its end (errors or not: it lists the
/// files copied, and only those). Returns the exit status of a failure to write it.
fn write_manifest(plan: &CopyPlan, listing: &Listing, who: &str) -> Option<i32> {
    let hashing = plan.hashing()?;
    let target = match (&hashing.manifest, hashing.format) {
        (Some(file), _) => file.as_path(),
        (None, Format::Mhl) => hashing.base.as_path(),
        (None, _) => return None,
    };
    match ringio_copy::manifest::write(listing, hashing.format, target) {
        Ok(_) => None,
        Err(e) => {
            eprintln!(
                "{who}: cannot write the manifest {}: {}",
                quote(target),
                ringio_copy::quote::reason(&e)
            );
            Some(1)
        }
    }
}

/// `--verify` of a copy that hashed its files: only the copy is read, and its hashes compared
/// with those the copy computed from the source.
fn verify_hashes(plan: &CopyPlan, listing: &Listing, uncached: bool, who: &str) -> i32 {
    let hashing = plan.hashing().expect("hashes come from a plan that hashes");
    let start = Instant::now();
    let report = ringio_copy::verify::check_listing(
        &hashing.base,
        listing,
        hashing.manifest.as_deref(),
        uncached,
        crate::verify::readers(),
    );
    crate::verify::manifest_verdict(&report, start, false, who)
}

/// Runs `ringio cp` and returns the process exit code.
pub fn run(args: &CpArgs) -> Result<i32> {
    let choices = crate::verify::algo(args.hash.as_deref())
        .and(crate::verify::format(args.manifest_format.as_deref()));
    if let Err(e) = choices {
        eprintln!("{}: {e}", crate::argv::program());
        return Ok(2);
    }
    let plan = plan(args)?;
    let progress = Progress::new();
    crate::signals::stop_on_signals(&progress.cancel_flag())?;
    let term = Terminal {
        bar: crate::progress::bar(args.progress),
        verbose: args.verbose || args.debug,
        debug: args.debug,
        asking: std::sync::Mutex::new(()),
    };
    let started = Instant::now();
    let done = std::sync::atomic::AtomicBool::new(false);
    let totals = ringio_copy::count::Totals::default();
    let mut summary = std::thread::scope(|scope| {
        if let Some(bar) = &term.bar {
            let (done, totals, plan, progress) = (&done, &totals, &plan, &progress);
            // The total is counted beside the copy, never before it.
            scope.spawn(move || ringio_copy::count::count(plan, totals));
            scope.spawn(move || crate::progress::drive(bar, progress, totals, done));
        }
        let summary = ringio_copy::copy(&plan, &progress, &term);
        done.store(true, Ordering::Relaxed);
        totals.stop();
        summary
    });
    if let Some(bar) = &term.bar {
        crate::progress::finish(bar, &progress, &totals);
    }
    // -v prints cp's lines and nothing else; the summary belongs to --progress.
    if args.progress {
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "{}: {} entries, {} dirs, {} in {secs:.3} s ({}/s) with the {} engine{}",
            crate::argv::program(),
            summary.files,
            summary.dirs,
            HumanBytes(summary.bytes),
            HumanBytes((summary.bytes as f64 / secs.max(1e-6)) as u64),
            summary.engine,
            if summary.errors > 0 {
                format!(", {} errors", summary.errors)
            } else {
                String::new()
            }
        );
    }
    if summary.interrupted {
        eprintln!(
            "{}: interrupted; partially copied files were removed",
            crate::argv::program()
        );
        crate::signals::end_by_received_signal();
        return Ok(130);
    }
    let who = format!("{}: verify", crate::argv::program());
    let hashes = summary.hashes.take();
    if let Some(code) = hashes
        .as_ref()
        .and_then(|l| write_manifest(&plan, l, crate::argv::program()))
    {
        return Ok(code);
    }
    if summary.errors > 0 {
        return Ok(1);
    }
    if args.verify {
        return match &hashes {
            Some(listing) => Ok(verify_hashes(&plan, listing, args.uncached, &who)),
            None => verify_copy(&plan, args.uncached),
        };
    }
    Ok(0)
}

/// `--verify`: compares each root with its copy, on what the plan promised to carry over.
pub(crate) fn verify_copy(plan: &CopyPlan, uncached: bool) -> Result<i32> {
    let started = Instant::now();
    let opts = VerifyOptions {
        uncached,
        ..VerifyOptions::promised_by(plan)
    };
    let mut total = ringio_copy::verify::VerifyReport::default();
    for root in plan.roots() {
        match crate::verify::compare(root.src(), root.dst(), &opts, false) {
            Ok(report) => {
                total.entries += report.entries;
                total.bytes += report.bytes;
                total.total_differences += report.total_differences;
            }
            Err(e) => {
                eprintln!("{}: verify: {e}", crate::argv::program());
                return Ok(1);
            }
        }
    }
    crate::verify::summarize(&total, started.elapsed().as_secs_f64(), uncached);
    Ok(if total.is_same() { 0 } else { 1 })
}
