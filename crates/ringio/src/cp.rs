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
    Backup, BackupMode, CopyError, CopyPlan, Dereference, Overwrite, Preserve, Progress, Reflink,
    Resume, Sparse, Tuning,
};

use crate::cli::{BackupControl, CpArgs, ReflinkWhen, ResumeCheck, SparseWhen, UpdateWhen};

/// Resolves the arguments into a plan, with cp's precedence rules.
pub fn plan(args: &CpArgs) -> Result<CopyPlan> {
    let (sources, target, into) = match (&args.target_directory, args.no_target_directory) {
        (Some(dir), _) => (args.paths.clone(), dir.clone(), Some(true)),
        (None, no_target) => {
            if args.paths.len() < 2 {
                bail!(
                    "missing destination file operand after '{}'",
                    args.paths
                        .first()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                );
            }
            let (dst, srcs) = args.paths.split_last().expect("at least two paths");
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
    let roots = CopyPlan::resolve_roots(&sources, &target, into)?;

    let recursive = args.recursive || args.archive;
    let mut preserve = Preserve::default();
    if args.preserve_default {
        preserve = Preserve::P;
    }
    if args.no_deref_preserve_links {
        preserve.links = true;
    }
    if args.archive {
        preserve = Preserve::ALL;
    }
    if let Some(list) = &args.preserve {
        preserve
            .apply_list(list, true)
            .map_err(anyhow::Error::msg)?;
    }
    if let Some(list) = &args.no_preserve {
        preserve
            .apply_list(list, false)
            .map_err(anyhow::Error::msg)?;
    }

    let dereference = if args.dereference {
        Dereference::Always
    } else if args.dereference_args {
        Dereference::CommandLine
    } else if args.no_dereference || args.archive || args.no_deref_preserve_links || recursive {
        Dereference::Never
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

    let mut tuning = Tuning::default();
    if let Some(bs) = args.bs {
        tuning.block_size = usize::try_from(bs)?.min(1 << 30);
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
        verbose: args.verbose,
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
        backup: backup_policy(args)?,
        atomic: args.atomic,
        fsync: args.fsync,
        one_file_system: args.one_file_system,
        direct: args.direct,
        copy_contents: args.copy_contents,
    })
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
        self.line(true, &format!("ringio: {err}"));
    }

    fn copied(&self, src: &Path, dst: &Path) {
        self.line(
            false,
            &format!("'{}' -> '{}'", src.display(), dst.display()),
        );
    }

    fn note(&self, msg: &str) {
        self.line(true, &format!("ringio: {msg}"));
    }
}

/// Runs `ringio cp` and returns the process exit code.
pub fn run(args: &CpArgs) -> Result<i32> {
    let plan = plan(args)?;
    let progress = Progress::new();
    crate::signals::stop_on_signals(&progress.cancel_flag())?;
    let term = Terminal {
        bar: crate::progress::bar(args.progress),
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
    if args.verbose || args.progress {
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "ringio: {} entries, {} dirs, {} in {secs:.3} s ({}/s) with the {} engine{}",
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
        eprintln!("ringio: interrupted; partially copied files were removed");
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
    let mut opts = VerifyOptions::content_only();
    let keep = plan.preserve;
    opts.mode = keep.mode;
    // Without root only the group is kept; an owner that differs is then expected.
    opts.ownership = keep.ownership && rustix::process::geteuid().is_root();
    opts.mtime = keep.timestamps;
    opts.xattrs = keep.xattr;
    opts.hard_links = keep.links;
    opts.sparseness = plan.sparse != Sparse::Never;
    let mut total = ringio_copy::verify::VerifyReport::default();
    for root in &plan.roots {
        match crate::verify::compare(&root.src, &root.dst, &opts, false) {
            Ok(report) => {
                total.entries += report.entries;
                total.bytes += report.bytes;
                total.total_differences += report.total_differences;
            }
            Err(e) => {
                eprintln!("ringio: verify: {e}");
                return Ok(1);
            }
        }
    }
    crate::verify::summarize(&total, started.elapsed().as_secs_f64());
    Ok(if total.is_same() { 0 } else { 1 })
}
