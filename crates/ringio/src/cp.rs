//! `ringio cp`: arguments → `CopyPlan` → run, with messages, progress and the exit code.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::ValueEnum;
use indicatif::{HumanBytes, ProgressBar};
use ringio_copy::verify::VerifyOptions;
use ringio_copy::{
    Backup, BackupMode, CopyError, CopyPlan, Dereference, LinkMode, Overwrite, Preserve, Progress,
    Reflink, Resume, Sparse, Tuning,
};

use crate::cli::{
    BackupControl, CpArgs, PreserveStep, ReflinkWhen, ResumeCheck, SparseWhen, UpdateWhen,
};

/// Resolves the arguments into a plan, with cp's precedence rules.
pub fn plan(args: &CpArgs) -> Result<CopyPlan> {
    let try_help = format!("Try '{}' for more information.", help_command());
    if args.paths.is_empty() {
        bail!("missing file operand\n{try_help}");
    }
    if args.link && args.symbolic_link {
        bail!("cannot make both hard and symbolic links\n{try_help}");
    }
    if args.context.as_deref().is_some_and(|ctx| !ctx.is_empty()) {
        eprintln!(
            "{}: warning: ignoring --context; it requires an SELinux-enabled kernel",
            crate::argv::program()
        );
    }
    if args.reflink == ReflinkWhen::Always && args.sparse != SparseWhen::Auto {
        bail!("--reflink can be used only with --sparse=auto\n{try_help}");
    }
    let mut paths = args.paths.clone();
    if args.strip_trailing_slashes {
        let last = paths.len() - usize::from(args.target_directory.is_none());
        for p in &mut paths[..last] {
            *p = strip_trailing_slashes(p);
        }
    }
    let (sources, target, into) = match (&args.target_directory, args.no_target_directory) {
        (Some(dir), _) => (paths, dir.clone(), Some(true)),
        (None, no_target) => {
            if paths.len() < 2 {
                bail!(
                    "missing destination file operand after '{}'\n{try_help}",
                    paths[0].display()
                );
            }
            let (dst, srcs) = paths.split_last().expect("at least two paths");
            (
                srcs.to_vec(),
                dst.clone(),
                if no_target { Some(false) } else { None },
            )
        }
    };
    // Re-running `cp -r SRC DST` finds the DST the interrupted run made: it is the copy, not a
    // directory to copy into.
    let into = match into {
        None if args.resume.is_some()
            && sources.len() == 1
            && CopyPlan::resume_target_is_copy(&sources[0], &target) =>
        {
            Some(false)
        }
        other => other,
    };
    let roots = if args.parents {
        CopyPlan::resolve_parents(&sources, &target, into)?
    } else {
        CopyPlan::resolve_roots(&sources, &target, into)?
    };

    let recursive = args.recursive || args.archive;
    let mut preserve = Preserve::default();
    let mut default_modes = false;
    for step in &args.preserve_steps {
        match step {
            PreserveStep::Archive => preserve = Preserve::ALL,
            PreserveStep::Links => preserve.links = true,
            PreserveStep::Default => {
                preserve.mode = true;
                preserve.ownership = true;
                preserve.timestamps = true;
            }
            PreserveStep::Keep(list) => {
                if list.split(',').any(|w| w == "context") {
                    bail!("cannot preserve security context without an SELinux-enabled kernel");
                }
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

    if args.direct && args.engine.0 != ringio_copy::Engine::Aio {
        anyhow::bail!("--direct is for --engine aio");
    }
    let overwrite = if let Some(check) = args.resume {
        Overwrite::Resume(match check {
            ResumeCheck::Quick => Resume::Quick,
            ResumeCheck::Checksum => Resume::Checksum,
        })
    } else if args.no_clobber {
        Overwrite::NoClobber
    } else {
        match args.update {
            Some(UpdateWhen::Older) => Overwrite::Update,
            Some(UpdateWhen::None) => Overwrite::NoClobber,
            Some(UpdateWhen::All) | None => Overwrite::Replace,
        }
    };

    let mut backup = backup_policy(args)?;
    let mut roots = roots;
    // `cp -fb F F`: F is copied to its backup name, as GNU cp does, instead of onto itself.
    if let ([root], Some(policy)) = (roots.as_mut_slice(), &backup) {
        if args.force && root.src == root.dst && root.parents.is_none() && root.src.is_file() {
            root.dst = ringio_copy::backup_path(&root.dst, policy)
                .map_err(|e| anyhow::anyhow!("cannot back up '{}': {e}", root.dst.display()))?;
            backup = None;
        }
    }
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
    Ok(CopyPlan {
        roots,
        recursive,
        dereference,
        preserve,
        overwrite,
        force: args.force,
        engine: args.engine.0,
        tuning,
        verbose: args.verbose || args.debug,
        sparse: match args.sparse {
            SparseWhen::Auto => Sparse::Auto,
            SparseWhen::Always => Sparse::Always,
            SparseWhen::Never => Sparse::Never,
        },
        reflink: match args.reflink {
            ReflinkWhen::Auto => Reflink::Auto,
            ReflinkWhen::Always => Reflink::Always,
            ReflinkWhen::Never => Reflink::Never,
        },
        remove_destination: args.remove_destination,
        backup,
        atomic: args.atomic,
        fsync: args.fsync,
        one_file_system: args.one_file_system,
        direct: args.direct,
        copy_contents: args.copy_contents,
        link,
        attributes_only: args.attributes_only,
        interactive: args.interactive,
        default_modes,
        debug: args.debug,
    })
}

/// How to ask for help in a usage error: `cp --help` or `ringio cp --help`.
fn help_command() -> &'static str {
    match crate::argv::program() {
        "cp" => "cp --help",
        _ => "ringio cp --help",
    }
}

/// `--strip-trailing-slashes`: `a/b//` is `a/b`; `/` stays `/`.
fn strip_trailing_slashes(path: &Path) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let end = bytes
        .iter()
        .rposition(|&b| b != b'/')
        .map_or(1.min(bytes.len()), |i| i + 1);
    std::ffi::OsStr::from_bytes(&bytes[..end]).into()
}

/// `--backup[=CONTROL]`, `-b` and `-S`, resolved with cp's environment variables.
fn backup_policy(args: &CpArgs) -> anyhow::Result<Option<Backup>> {
    if (args.backup.is_some() || args.backup_default) && args.no_clobber {
        anyhow::bail!("options --backup and --no-clobber are mutually exclusive");
    }
    let control = match (args.backup, args.backup_default) {
        (Some(control), _) => control,
        (None, true) => match std::env::var("VERSION_CONTROL") {
            Ok(v) if !v.is_empty() => BackupControl::from_str(&v, true).map_err(|_| {
                anyhow::anyhow!(
                    "invalid VERSION_CONTROL '{v}' (valid: numbered, t, existing, nil, simple, never, none, off)"
                )
            })?,
            _ => BackupControl::Existing,
        },
        (None, false) => return Ok(None),
    };
    let mode = match control {
        BackupControl::Numbered => BackupMode::Numbered,
        BackupControl::Existing => BackupMode::Existing,
        BackupControl::Simple => BackupMode::Simple,
        BackupControl::None => return Ok(None),
    };
    let suffix = match &args.suffix {
        Some(s) => s.clone(),
        None => std::env::var("SIMPLE_BACKUP_SUFFIX")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "~".to_string()),
    };
    if suffix.contains('/') {
        anyhow::bail!("invalid backup suffix '{suffix}': it may not contain '/'");
    }
    Ok(Some(Backup { mode, suffix }))
}

/// Prints errors, `-v` lines and notes; keeps the progress bar out of their way.
struct Terminal {
    bar: Option<ProgressBar>,
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
    fn error(&self, err: &CopyError) {
        self.line(true, &format!("{}: {err}", crate::argv::program()));
    }

    fn copied(&self, src: &Path, dst: &Path) {
        self.line(
            false,
            &format!("'{}' -> '{}'", src.display(), dst.display()),
        );
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

/// Runs `ringio cp` and returns the process exit code.
pub fn run(args: &CpArgs) -> Result<i32> {
    let plan = plan(args)?;
    let progress = Progress::new();
    crate::signals::stop_on_signals(&progress.cancel_flag())?;
    let term = Terminal {
        bar: crate::progress::bar(args.progress),
        asking: std::sync::Mutex::new(()),
    };
    let started = Instant::now();
    let done = std::sync::atomic::AtomicBool::new(false);
    let totals = ringio_copy::count::Totals::default();
    let summary = std::thread::scope(|scope| {
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
        return Ok(130);
    }
    if summary.errors > 0 {
        return Ok(1);
    }
    if args.verify {
        return verify_copy(&plan);
    }
    Ok(0)
}

/// `--verify`: compares each root with its copy, on what the plan promised to carry over.
pub(crate) fn verify_copy(plan: &CopyPlan) -> Result<i32> {
    let started = Instant::now();
    let opts = VerifyOptions::promised_by(plan);
    let mut total = ringio_copy::verify::VerifyReport::default();
    for root in &plan.roots {
        match crate::verify::compare(&root.src, &root.dst, &opts, false) {
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
    crate::verify::summarize(&total, started.elapsed().as_secs_f64());
    Ok(if total.is_same() { 0 } else { 1 })
}
