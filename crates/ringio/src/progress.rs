//! `ringio cp --progress`: what rsync's `--info=progress2` shows, for the whole run. A spinner
//! with the bytes and entries done while the tree is still being counted (the copy never waits
//! for the count), then a bar: bytes done of the total, percent, rate, ETA, files done of the
//! total. Nothing is drawn when stderr is not a terminal.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use indicatif::{HumanBytes, ProgressBar, ProgressDrawTarget, ProgressStyle};
use ringio_copy::count::Totals;
use ringio_copy::Progress;

/// How often the bar is refreshed from the copy's counters.
const TICK: Duration = Duration::from_millis(100);

/// A spinner to start with, when `wanted` and stderr is a terminal.
pub fn bar(wanted: bool) -> Option<ProgressBar> {
    if !wanted || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed_precise} {bytes} ({bytes_per_sec}) {msg}")
            .expect("template"),
    );
    bar.enable_steady_tick(TICK);
    Some(bar)
}

/// Refreshes `bar` from the copy's counters and the count's totals until `done`.
pub fn drive(bar: &ProgressBar, progress: &Progress, totals: &Totals, done: &AtomicBool) {
    let mut counted = false;
    while !done.load(Ordering::Relaxed) {
        if !counted && totals.done() {
            counted = true;
            // The message first: changing the style redraws at once.
            update(bar, progress, totals, counted);
            bar.set_style(bar_style());
        }
        update(bar, progress, totals, counted);
        std::thread::sleep(TICK);
    }
}

/// The last picture, left on the terminal: everything copied is the total if the count did not
/// finish first.
pub fn finish(bar: &ProgressBar, progress: &Progress, totals: &Totals) {
    update(bar, progress, totals, true);
    if !totals.done() {
        bar.set_length(progress.bytes.load(Ordering::Relaxed));
        let files = progress.files.load(Ordering::Relaxed);
        bar.set_message(format!("files {files}/{files}"));
    }
    bar.set_style(bar_style());
    bar.finish();
}

fn update(bar: &ProgressBar, progress: &Progress, totals: &Totals, counted: bool) {
    let bytes = progress.bytes.load(Ordering::Relaxed);
    let files = progress.files.load(Ordering::Relaxed);
    let (total_files, total_bytes) = (
        totals.files.load(Ordering::Relaxed),
        totals.bytes.load(Ordering::Relaxed),
    );
    if counted {
        // A tree that grew while it was copied: the total is at least what is done.
        bar.set_length(total_bytes.max(bytes));
        bar.set_position(bytes);
        bar.set_message(format!("files {files}/{}", total_files.max(files)));
    } else {
        bar.set_position(bytes);
        bar.set_message(format!(
            "files {files}; counting: {total_files} files, {} so far",
            HumanBytes(total_bytes)
        ));
    }
}

fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{spinner} {bytes}/{total_bytes} {percent:>3}% {bytes_per_sec} ETA {eta} [{bar:24}] {msg}",
    )
    .expect("template")
    .progress_chars("=> ")
}

/// The one-line status of a long measurement (`dup --compare`, `bench copy`, `bench server`):
/// which run is going on, redrawn in place on stderr when it is a terminal, nothing otherwise.
/// Set it with `set_message`; clear it with `finish_and_clear` before printing the results.
pub fn status_line() -> ProgressBar {
    let line = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    line.set_style(ProgressStyle::with_template("{msg} {elapsed}").expect("template"));
    line
}

/// Runs `work`, a later phase of the run (`verify (device)`), under a bar of its own when
/// `wanted` and stderr is a terminal: `name`, the bytes `work` adds to `done` of `total`, rate,
/// ETA.
pub fn phase<T: Send>(
    wanted: bool,
    name: &str,
    (total, done): (u64, &AtomicU64),
    work: impl FnOnce() -> T + Send,
) -> T {
    if !wanted || !std::io::stderr().is_terminal() {
        return work();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        )
        .expect("template")
        .progress_chars("=> "),
    );
    bar.set_prefix(name.to_string());
    let finished = AtomicBool::new(false);
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            while !finished.load(Ordering::Relaxed) {
                bar.set_position(done.load(Ordering::Relaxed));
                std::thread::sleep(TICK);
            }
        });
        let out = work();
        finished.store(true, Ordering::Relaxed);
        out
    });
    bar.set_position(done.load(Ordering::Relaxed));
    bar.finish();
    out
}
