//! `ringio cp --mpi`: the same copy spread over the ranks of an MPI job. Every rank parses the
//! same arguments and runs its share (ringio-mpi); counts and errors are summed, and every rank
//! exits with the same code.

use anyhow::Result;

use crate::cli::CpArgs;

/// Why `--mpi` cannot go with these options, if it cannot.
fn refused(args: &CpArgs) -> Option<&'static str> {
    if args.dereference {
        Some("cp --mpi: -L is not supported: symbolic-link loops cannot be detected across ranks")
    } else if args.interactive {
        Some("cp --mpi: -i is not supported: ranks other than 0 have no terminal to ask on")
    } else if args.link || args.symbolic_link {
        Some("cp --mpi: -l and -s are not supported: ranks copy data; use plain cp to make links")
    } else if args.parents {
        Some("cp --mpi: --parents is not supported: name the directories to copy instead")
    } else if args.attributes_only {
        Some("cp --mpi: --attributes-only is not supported: ranks copy data")
    } else if args.hash.is_some() || args.manifest.is_some() || args.manifest_format.is_some() {
        Some("cp --mpi: --hash and --manifest are not supported: a file's chunks are copied on several nodes")
    } else if !args.tee.is_empty() {
        Some("cp --mpi: --tee is not supported: give each rank's destination instead")
    } else {
        None
    }
}

/// Runs `ringio cp --mpi` and returns the exit code.
pub fn run(args: &CpArgs) -> Result<i32> {
    if let Some(why) = refused(args) {
        eprintln!("{}: {why}", crate::argv::program());
        return Ok(2);
    }
    run_ranks(args)
}

#[cfg(not(feature = "mpi"))]
fn run_ranks(_args: &CpArgs) -> Result<i32> {
    eprintln!(
        "ringio: cp --mpi needs a build with MPI: cargo build --release --features mpi \
         (with an MPI implementation such as OpenMPI, and libclang, installed)"
    );
    Ok(2)
}

#[cfg(feature = "mpi")]
fn run_ranks(args: &CpArgs) -> Result<i32> {
    use std::io::Write;
    use std::path::Path;
    use std::time::Instant;

    use ringio_copy::quote::quote;
    use ringio_copy::{CopyError, Progress};
    use ringio_mpi::runtime::Mpi;

    /// Errors to stderr, `-v` lines to stdout, from whichever rank has them.
    struct Lines {
        verbose: bool,
        debug: bool,
    }
    impl ringio_copy::Reporter for Lines {
        fn verbose(&self) -> bool {
            self.verbose
        }
        fn debug(&self) -> bool {
            self.debug
        }
        fn error(&self, err: &CopyError) {
            let _ = writeln!(
                std::io::stderr().lock(),
                "{}: {err}",
                crate::argv::program()
            );
        }
        fn copied(&self, src: &Path, dst: &Path) {
            let _ = writeln!(
                std::io::stdout().lock(),
                "{} -> {}",
                quote(&src),
                quote(&dst)
            );
        }
        fn verbose_line(&self, line: &str) {
            let _ = writeln!(std::io::stdout().lock(), "{line}");
        }
        fn note(&self, msg: &str) {
            let _ = writeln!(
                std::io::stderr().lock(),
                "{}: {msg}",
                crate::argv::program()
            );
        }
        fn confirm(&self, _question: &str) -> bool {
            false // -i is refused under --mpi before any rank starts
        }
    }

    let started = Instant::now();
    let mpi = Mpi::init().map_err(anyhow::Error::msg)?;
    let (rank, size) = (mpi.rank(), mpi.size());
    if size == 1 {
        if let Some((var, n)) = ringio_mpi::launched_as_many(|k| std::env::var(k).ok()) {
            eprintln!(
                "ringio: cp --mpi: this process sees an MPI world of 1 rank, but {var}={n}: \
                 it was started by the launcher of another MPI implementation than the one \
                 ringio was built with, and each of the {n} processes would copy the whole \
                 tree alone. Use that implementation's mpirun, or rebuild against this one."
            );
            return Ok(2);
        }
    }
    // Every rank resolves the same arguments before any rank creates anything (a destination
    // that exists changes what `cp SRC DST` means); rank 0 alone says what is wrong with them.
    let plan = crate::cp::plan(args);
    let failed = mpi.sum(&[u64::from(plan.is_err())])[0];
    let plan = match plan {
        Ok(plan) if failed == 0 => plan,
        Ok(_) => return Ok(1),
        Err(e) => {
            if rank == 0 {
                eprintln!("ringio: {e}");
            }
            return Ok(1);
        }
    };
    let progress = Progress::new();
    let lines = Lines {
        verbose: args.verbose || args.debug,
        debug: args.debug,
    };
    let seed = args
        .mpi_lockstep
        .unwrap_or_else(|| started.elapsed().as_nanos() as u64 ^ (u64::from(rank) << 32));
    // --progress: rank 0 shows the whole job's counters, tallied over the ranks: a bar on a
    // terminal, else (mpirun's stderr is usually a pipe to a log) a line every few seconds.
    let shown = args.progress && rank == 0;
    let bar = crate::progress::bar(shown);
    let job = Progress::new();
    let totals = ringio_copy::count::Totals::default();
    let done = std::sync::atomic::AtomicBool::new(false);
    let (summary, stats) = std::thread::scope(|scope| {
        if shown {
            let (done, totals, plan, job) = (&done, &totals, &plan, &job);
            scope.spawn(move || ringio_copy::count::count(plan, totals));
            match &bar {
                Some(bar) => scope.spawn(move || crate::progress::drive(bar, job, totals, done)),
                None => scope.spawn(move || progress_lines(job, totals, done)),
            };
        }
        let mut exchange = mpi.exchange(seed, shown.then_some(&job));
        if args.mpi_lockstep.is_some() {
            exchange = exchange.with_lockstep();
        }
        let summary =
            ringio_copy::ranks::copy_ranked(&plan, &progress, &lines, rank, size, &mut exchange);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        totals.stop();
        (summary, exchange.stats)
    });
    let sums = mpi.sum(&[
        summary.files,
        summary.dirs,
        summary.bytes,
        summary.errors,
        u64::from(summary.interrupted),
        stats.messages(),
        stats.steals_sent,
        stats.steals_ok,
        stats.pushes_sent,
    ]);
    let [files, dirs, bytes, errors, interrupted, messages, steals, stolen, pushes] =
        sums[..].try_into().expect("nine sums");
    if let Some(bar) = &bar {
        job.files.store(files, std::sync::atomic::Ordering::Relaxed);
        job.bytes.store(bytes, std::sync::atomic::Ordering::Relaxed);
        crate::progress::finish(bar, &job, &totals);
    }
    let shares = mpi.gather(summary.bytes);
    let sent = mpi.gather(stats.messages());
    if args.verbose && rank == 0 {
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "ringio: {files} entries, {dirs} dirs, {bytes} bytes in {secs:.3} s on {size} ranks \
             with the {} engine{}; {messages} messages ({steals} steal requests, {stolen} \
             answered with work, {pushes} sent unasked: hard-link names to their owner, \
             finished chunks); messages per rank: {}; bytes per rank: {}",
            summary.engine,
            if errors > 0 {
                format!(", {errors} errors")
            } else {
                String::new()
            },
            list(&sent),
            list(&shares)
        );
    }
    let mut code = if interrupted > 0 {
        130
    } else if errors > 0 {
        1
    } else {
        0
    };
    if code == 0 && args.verify {
        let mine = if rank == 0 {
            crate::cp::verify_copy(&plan, (args.uncached, None), crate::verify::Lines::Stdout)?.0
        } else {
            0
        };
        code = mpi.sum(&[mine as u64])[0] as i32;
    }
    Ok(code)
}

/// "1, 2, 3".
#[cfg(feature = "mpi")]
fn list(values: &[u64]) -> String {
    values
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `--progress` when stderr is not a terminal: the job's totals as a line every 5 seconds.
#[cfg(feature = "mpi")]
fn progress_lines(
    job: &ringio_copy::Progress,
    totals: &ringio_copy::count::Totals,
    done: &std::sync::atomic::AtomicBool,
) {
    use std::sync::atomic::Ordering::Relaxed;
    use std::time::{Duration, Instant};
    let mut next = Instant::now() + Duration::from_secs(5);
    while !done.load(Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if Instant::now() < next {
            continue;
        }
        next += Duration::from_secs(5);
        let (files, bytes) = (job.files.load(Relaxed), job.bytes.load(Relaxed));
        let of = if totals.done() {
            let (all_files, all_bytes) = (totals.files.load(Relaxed), totals.bytes.load(Relaxed));
            format!(
                " of {} files, {} of {} bytes",
                all_files.max(files),
                bytes,
                all_bytes.max(bytes)
            )
        } else {
            format!(" files, {bytes} bytes (still counting the source)")
        };
        eprintln!("ringio: progress: {files}{of}");
    }
}
