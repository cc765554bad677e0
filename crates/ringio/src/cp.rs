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
    Overwrite, Preserve, Progress, Reflink, Resume, Sparse, Summary, Tuning,
};

use crate::cli::{
    BackupControl, CpArgs, PreserveStep, ReflinkWhen, ResumeCheck, SparseWhen, UpdateWhen,
};
use crate::verify::Lines;

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
    /// `--json`: stdout is the JSON's alone (every line goes to stderr), and each error is
    /// kept for it.
    json: Option<std::sync::Mutex<Vec<serde_json::Value>>>,
    /// `--log-file`: every `-v` line and error, with rsync's log prefix.
    log: Option<std::sync::Mutex<std::fs::File>>,
}

impl Terminal {
    /// A `-v` line (or an error): to the log file if there is one, and to the terminal when
    /// `shown` (-v asked for it, or it is an error).
    fn entry(&self, to_stderr: bool, shown: bool, text: &str) {
        if let Some(log) = &self.log {
            let mut file = log.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(file, "{}{text}", ringio_copy::sync::log_prefix());
        }
        if shown {
            self.line(to_stderr, text);
        }
    }

    fn line(&self, to_stderr: bool, text: &str) {
        let to_stderr = to_stderr || self.json.is_some();
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
        // The log wants the -v lines too.
        self.verbose || self.log.is_some()
    }

    fn debug(&self) -> bool {
        self.debug
    }

    fn error(&self, err: &CopyError) {
        self.entry(true, true, &format!("{}: {err}", crate::argv::program()));
        if let Some(errors) = &self.json {
            errors
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(err.to_json());
        }
    }

    fn copied(&self, src: &Path, dst: &Path) {
        self.entry(
            false,
            self.verbose,
            &format!("{} -> {}", quote(&src), quote(&dst)),
        );
    }

    fn verbose_line(&self, line: &str) {
        self.entry(false, self.verbose, line);
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
    let stdout = args.manifest.as_ref().is_some_and(|m| m.as_os_str() == "-");
    if stdout && (args.verbose || args.debug || args.json || args.verify) {
        bail!("--manifest - writes to standard output: it cannot be shared with -v, --json or --verify");
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

/// A copy that failed, hashing: says that no manifest was written (`--manifest`, the
/// `ascmhl` generation) and names, for each destination that failed, every source file whose
/// copy it lacks, the ones never attempted included.
fn name_not_copied<'p>(
    main: &ringio_copy::Hashing,
    failed: impl Iterator<Item = (&'p CopyPlan, &'p Listing)>,
) {
    let program = crate::argv::program();
    let written = match (&main.manifest, main.format) {
        (Some(file), _) => quote(file).to_string(),
        (None, Format::Mhl) => format!("(no ascmhl generation in {})", quote(&main.base)),
        (None, _) => String::new(),
    };
    if !written.is_empty() {
        eprintln!("{program}: the copy failed: no manifest written {written}");
    }
    for (plan, listing) in failed {
        let Some(hashing) = plan.hashing() else {
            continue;
        };
        let roots: Vec<_> = plan.roots().iter().map(|r| (r.src(), r.dst())).collect();
        for src in ringio_copy::manifest::not_copied(&roots, &hashing.base, listing) {
            eprintln!(
                "{program}: not copied to {}: {}",
                quote(&hashing.base),
                quote(&src)
            );
        }
    }
}

/// `--verify` of a copy that hashed its files: only the copy is read, and its hashes compared
/// with those the copy computed from the source; a file the copy kept as it was (`-n`, `-u`)
/// whose bytes are not its source's is a difference too.
fn verify_hashes(
    plan: &CopyPlan,
    (listing, kept_unlike): (&Listing, &[Vec<u8>]),
    (uncached, bar): (bool, bool),
    (who, lines): (&str, Lines),
) -> (i32, u64) {
    let hashing = plan.hashing().expect("hashes come from a plan that hashes");
    let start = Instant::now();
    let who = format!("{who} {}", quote(&hashing.base));
    let read = std::sync::atomic::AtomicU64::new(0);
    let total: u64 = listing.entries.iter().map(|e| e.size).sum();
    let name = if uncached {
        "verify (device)"
    } else {
        "verify"
    };
    let mut report = crate::progress::phase(bar, name, (|| total, &read), || {
        ringio_copy::verify::check_listing(
            &hashing.base,
            listing,
            hashing.manifest.as_deref(),
            uncached,
            // The files the copy wrote: the destination may hold others.
            (crate::verify::readers(), &read, false),
        )
    });
    report.findings.extend(kept_unlike.iter().map(|name| {
        ringio_copy::verify::Finding::KeptUnlikeSource(std::path::PathBuf::from(
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name),
        ))
    }));
    (
        crate::verify::manifest_verdict(&report, start, lines, &who),
        report.bytes,
    )
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
    let tees = tee_plans(args, &plan)?;
    let progress = Progress::new();
    crate::signals::stop_on_signals(&progress.cancel_flag())?;
    // One stop switch for every destination.
    let tee_progress: Vec<Progress> = tees
        .iter()
        .map(|_| Progress::sharing_cancel(&progress))
        .collect();
    let term = Terminal {
        bar: crate::progress::bar(args.progress),
        verbose: args.verbose || args.debug,
        debug: args.debug,
        asking: std::sync::Mutex::new(()),
        json: args.json.then(Default::default),
        log: match &args.log_file {
            Some(path) => Some(std::sync::Mutex::new(crate::log_file::open(path).map_err(
                |e| {
                    anyhow::anyhow!(
                        "cannot open the log file {}: {}",
                        quote(path),
                        ringio_copy::quote::reason(&e)
                    )
                },
            )?)),
            None => None,
        },
    };
    let started = Instant::now();
    let done = std::sync::atomic::AtomicBool::new(false);
    let totals = ringio_copy::count::Totals::default();
    let (mut summary, tee_summaries) = std::thread::scope(|scope| {
        if let Some(bar) = &term.bar {
            let (done, totals, plan, progress) = (&done, &totals, &plan, &progress);
            // The total is counted beside the copy, never before it.
            scope.spawn(move || ringio_copy::count::count(plan, totals));
            scope.spawn(move || crate::progress::drive(bar, progress, totals, done));
        }
        // `--tee`: one tee group, each destination a run of its own whose sources are read
        // once for all of them (`ringio_copy::copy_tee`).
        let (summary, others) = if tees.is_empty() {
            (ringio_copy::copy(&plan, &progress, &term), Vec::new())
        } else {
            let plans: Vec<&CopyPlan> = std::iter::once(&plan)
                .chain(tees.iter().map(|(_, p)| p))
                .collect();
            let progresses: Vec<&Progress> =
                std::iter::once(&progress).chain(&tee_progress).collect();
            let mut all = ringio_copy::copy_tee(&plans, &progresses, &term).into_iter();
            let summary = all.next().expect("the main copy's summary");
            (summary, all.collect::<Vec<Summary>>())
        };
        done.store(true, Ordering::Relaxed);
        totals.stop();
        (summary, others)
    });
    let copied = started.elapsed().as_secs_f64();
    if let Some(bar) = &term.bar {
        if summary.interrupted {
            // What was really done, not a total filled in.
            bar.abandon_with_message(format!(
                "interrupted: {} files, {} copied",
                summary.files,
                HumanBytes(summary.bytes)
            ));
        } else {
            crate::progress::finish(bar, &progress, &totals);
        }
    }
    let program = crate::argv::program();
    // A signal stops every destination: a tee stopped after the main copy ended is as
    // interrupted as it (and no manifest claims its files).
    if summary.interrupted || tee_summaries.iter().any(|t| t.interrupted) {
        eprintln!(
            "{program}: interrupted after {} entries ({}); partially copied files were removed",
            summary.files,
            HumanBytes(summary.bytes)
        );
        crate::signals::end_by_received_signal();
        return Ok(130);
    }
    let mut code = 0;
    for ((dir, _), tee) in tees.iter().zip(&tee_summaries) {
        if tee.errors > 0 {
            eprintln!(
                "{program}: the copy to {} had {} error(s) (above); the others went on",
                quote(dir),
                tee.errors
            );
            code = 1;
        }
    }
    let hashes = summary.hashes.take();
    let failed = summary.errors > 0 || tee_summaries.iter().any(|t| t.errors > 0);
    if let (Some(listing), Some(hashing), true) = (&hashes, plan.hashing(), failed) {
        // No manifest vouches for a copy that failed: none is written, and every file that
        // is not in a destination is named.
        code = 1;
        let copies = std::iter::once((&plan, Some(listing), summary.errors)).chain(
            tees.iter()
                .zip(&tee_summaries)
                .map(|((_, p), t)| (p, t.hashes.as_ref(), t.errors)),
        );
        let failed = copies.filter_map(|(p, l, errors)| Some((p, l?)).filter(|_| errors > 0));
        name_not_copied(hashing, failed);
    } else if let (Some(listing), Some(hashing)) = (&hashes, plan.hashing()) {
        let report = |message: &str, _: &CopyError| eprintln!("{program}: {message}");
        if let Some(failed) = crate::verify::write_manifest(hashing, listing, &report) {
            code = failed;
        }
        for ((dir, p), tee) in tees.iter().zip(&tee_summaries) {
            let Some(theirs) = &tee.hashes else { continue };
            // Each destination's own `ascmhl` history.
            if let Some(h) = p.hashing().filter(|h| h.format == Format::Mhl) {
                if let Some(c) = crate::verify::write_manifest(h, theirs, &report) {
                    code = c;
                }
            }
            if let Some(why) = crate::verify::differing_hash(listing, theirs) {
                eprintln!(
                    "{program}: {} and {}: {why}",
                    quote(&hashing.base),
                    quote(dir)
                );
                code = 1;
            }
        }
    }
    let mut phases = vec![Phase::new("copy", summary.bytes, copied)];
    if summary.errors > 0 {
        code = 1;
    } else if args.verify && code == 0 {
        let who = format!("{program}: verify");
        // With --json, stdout is the JSON's alone.
        let lines = if args.json {
            Lines::Stderr
        } else {
            Lines::Stdout
        };
        // The bar's total: the source's bytes as counted beside the copy, else those copied.
        let bar = args.progress.then(|| match totals.done() {
            true => totals.bytes.load(Ordering::Relaxed),
            false => summary.bytes,
        });
        let verify_started = Instant::now();
        let mut bytes = 0;
        let main = (&plan, hashes.as_ref(), &summary.kept_unlike_source[..]);
        for (plan, hashes, kept_unlike) in std::iter::once(main).chain(
            tees.iter()
                .zip(&tee_summaries)
                .map(|((_, p), t)| (p, t.hashes.as_ref(), &t.kept_unlike_source[..])),
        ) {
            let (c, b) = match hashes {
                Some(listing) => verify_hashes(
                    plan,
                    (listing, kept_unlike),
                    (args.uncached, args.progress),
                    (&who, lines),
                ),
                None => verify_copy(plan, (args.uncached, bar), lines)?,
            };
            bytes += b;
            code = code.max(c);
        }
        let phase = if args.uncached {
            "verify (device)"
        } else {
            "verify"
        };
        phases.push(Phase::new(
            phase,
            bytes,
            verify_started.elapsed().as_secs_f64(),
        ));
    }
    if args.progress {
        print_phases(&summary, &phases, plan.hashing());
    }
    if let Some(errors) = &term.json {
        let errors = errors.lock().unwrap_or_else(|e| e.into_inner());
        print_json(
            &summary,
            &tee_summaries,
            (&phases, &errors),
            plan.hashing(),
            code,
        );
    }
    Ok(code)
}

/// One stage of a run, for `--progress`'s last line and `--json`.
struct Phase {
    name: &'static str,
    bytes: u64,
    seconds: f64,
}

impl Phase {
    fn new(name: &'static str, bytes: u64, seconds: f64) -> Self {
        Phase {
            name,
            bytes,
            seconds,
        }
    }

    fn rate(&self) -> u64 {
        (self.bytes as f64 / self.seconds.max(1e-6)) as u64
    }
}

/// `--progress`'s closing line: entries, bytes, time and engine, then each later phase.
fn print_phases(summary: &Summary, phases: &[Phase], hashing: Option<&ringio_copy::Hashing>) {
    let copy = &phases[0];
    let hashed = hashing.map_or(String::new(), |h| {
        format!(", hashed ({}) on the way", h.algo)
    });
    let mut line = format!(
        "{}: {} entries, {} dirs, {} in {:.3} s ({}/s) with the {} engine{hashed}{}",
        crate::argv::program(),
        summary.files,
        summary.dirs,
        HumanBytes(copy.bytes),
        copy.seconds,
        HumanBytes(copy.rate()),
        summary.engine,
        [
            (summary.skipped, "left as they were"),
            (summary.errors, "errors")
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!(", {n} {what}"))
        .collect::<String>()
    );
    for p in &phases[1..] {
        line.push_str(&format!(
            "; {}: {} in {:.3} s ({}/s)",
            p.name,
            HumanBytes(p.bytes),
            p.seconds,
            HumanBytes(p.rate())
        ));
    }
    eprintln!("{line}");
}

/// `--json`: one object on stdout: the counts, each destination's, each phase's bytes, time and
/// throughput, every error's message, and each error as an object (`error_details`: the
/// message with its `op`, `path`, `errno` and `reason` as fields, `CopyError::to_json`).
fn print_json(
    summary: &Summary,
    tees: &[Summary],
    (phases, errors): (&[Phase], &[serde_json::Value]),
    hashing: Option<&ringio_copy::Hashing>,
    code: i32,
) {
    let phases: Vec<serde_json::Value> = phases
        .iter()
        .map(|p| {
            serde_json::json!({
                "phase": p.name,
                "bytes": p.bytes,
                "seconds": p.seconds,
                "bytes_per_second": p.rate(),
            })
        })
        .collect();
    let destinations: Vec<serde_json::Value> = std::iter::once(summary)
        .chain(tees)
        .map(|s| serde_json::json!({"files": s.files, "bytes": s.bytes, "skipped": s.skipped, "errors": s.errors}))
        .collect();
    let out = serde_json::json!({
        "files": summary.files,
        "dirs": summary.dirs,
        "bytes": summary.bytes,
        "skipped": summary.skipped,
        "errors": summary.errors,
        "error_messages": errors.iter().map(|e| &e["message"]).collect::<Vec<_>>(),
        "error_details": errors,
        "engine": summary.engine,
        "hash": hashing.map(|h| h.algo.to_string()),
        "destinations": destinations,
        "phases": phases,
        "exit": code,
    });
    println!("{out}");
}

/// `--tee DIR`: the same copy with DIR as its destination (in place of the last operand, or of
/// -t's directory), hashing as the main copy does but writing no manifest file of its own;
/// refused where it would be laid out unlike `main`.
fn tee_plans(args: &CpArgs, main: &CopyPlan) -> Result<Vec<(std::path::PathBuf, CopyPlan)>> {
    args.tee
        .iter()
        .map(|dir| {
            let mut a = args.clone();
            a.tee.clear();
            match (&mut a.target_directory, a.paths.last_mut()) {
                (Some(target), _) => *target = dir.clone(),
                (None, Some(last)) => *last = dir.clone(),
                (None, None) => bail!("--tee needs a destination"),
            }
            let tee = plan(&a)?.without_manifest_file();
            if tee.layout() != main.layout() {
                bail!(
                    "--tee {}: the copy there would be laid out unlike the one in the \
                     destination (one is a directory to copy into, the other not): make both \
                     exist, or neither",
                    quote(dir)
                );
            }
            Ok((dir.clone(), tee))
        })
        .collect()
}

/// `--verify`: compares each root with its copy, on what the plan promised to carry over;
/// under `--progress`'s bar when `bar` gives the total (the bytes the copy counted).
pub(crate) fn verify_copy(
    plan: &CopyPlan,
    (uncached, bar): (bool, Option<u64>),
    lines: Lines,
) -> Result<(i32, u64)> {
    let started = Instant::now();
    let opts = VerifyOptions {
        uncached,
        ..VerifyOptions::promised_by(plan)
    };
    let read = std::sync::atomic::AtomicU64::new(0);
    let name = if uncached {
        "verify (device)"
    } else {
        "verify"
    };
    let total = || bar.unwrap_or(0);
    let compared = crate::progress::phase(bar.is_some(), name, (total, &read), || {
        let mut total = ringio_copy::verify::VerifyReport::default();
        for root in plan.roots() {
            let report = crate::verify::compare(root.src(), root.dst(), &opts, (lines, &read))?;
            total.entries += report.entries;
            total.bytes += report.bytes;
            total.total_differences += report.total_differences;
        }
        Ok::<_, ringio_copy::verify::VerifyError>(total)
    });
    match compared {
        Ok(total) => {
            crate::verify::summarize(&total, started.elapsed().as_secs_f64(), uncached);
            Ok((i32::from(!total.is_same()), total.bytes))
        }
        Err(e) => {
            eprintln!("{}: verify: {e}", crate::argv::program());
            Ok((1, read.load(Ordering::Relaxed)))
        }
    }
}
