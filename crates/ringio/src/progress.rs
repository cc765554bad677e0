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
    let mut eta = Eta::default();
    let started = std::time::Instant::now();
    while !done.load(Ordering::Relaxed) {
        eta.sample(
            started.elapsed().as_secs_f64(),
            progress.files.load(Ordering::Relaxed),
            progress.bytes.load(Ordering::Relaxed),
        );
        if !counted && totals.done() {
            counted = true;
            // The message first: changing the style redraws at once.
            update(bar, progress, totals, (counted, &eta));
            bar.set_style(bar_style());
        }
        update(bar, progress, totals, (counted, &eta));
        std::thread::sleep(TICK);
    }
}

/// The time left of a copy, from what it costs so far: a cost per file and a cost per byte,
/// fitted as it runs (`t ≈ a·files + b·bytes`, least squares through the origin), so a tree of
/// many small files is not given the ETA of its bytes alone. Where the two cannot be told apart
/// yet (every sample has the same files-to-bytes ratio), the larger of the two one-variable
/// estimates.
#[derive(Debug, Default, Clone)]
pub struct Eta {
    /// Sums of the normal equations: Σf², Σfb, Σb², Σft, Σbt (files and bytes scaled).
    ff: f64,
    fb: f64,
    bb: f64,
    ft: f64,
    bt: f64,
    /// The last sample: seconds, files, bytes.
    last: (f64, u64, u64),
}

/// Bytes are counted in MiB in the fit, so both columns have sizes alike.
const MIB: f64 = 1048576.0;

impl Eta {
    /// The copy had done `files` and `bytes` after `seconds`.
    pub fn sample(&mut self, seconds: f64, files: u64, bytes: u64) {
        let (f, b) = (files as f64, bytes as f64 / MIB);
        self.ff += f * f;
        self.fb += f * b;
        self.bb += b * b;
        self.ft += f * seconds;
        self.bt += b * seconds;
        self.last = (seconds, files, bytes);
    }

    /// Seconds left to reach `total_files` and `total_bytes`; `None` before anything is done.
    pub fn left(&self, total_files: u64, total_bytes: u64) -> Option<f64> {
        let (t, files, bytes) = self.last;
        if t <= 0.0 || (files == 0 && bytes == 0) {
            return None;
        }
        let files_left = total_files.saturating_sub(files) as f64;
        let mib_left = total_bytes.saturating_sub(bytes) as f64 / MIB;
        let det = self.ff * self.bb - self.fb * self.fb;
        // Well apart: the samples' files-to-bytes ratios differ enough to fit both costs.
        if det > 1e-6 * self.ff * self.bb {
            let a = (self.ft * self.bb - self.bt * self.fb) / det;
            let b = (self.bt * self.ff - self.ft * self.fb) / det;
            if a >= 0.0 && b >= 0.0 {
                return Some(a * files_left + b * mib_left);
            }
        }
        let by_files = (files > 0).then(|| t * files_left / files as f64);
        let by_bytes = (bytes > 0).then(|| t * mib_left * MIB / bytes as f64);
        match (by_files, by_bytes) {
            (Some(f), Some(b)) => Some(f.max(b)),
            (one, other) => one.or(other),
        }
    }
}

/// `3s`, `2m05s`, `1h02m`: an ETA as short as it can be read.
fn short_time(seconds: f64) -> String {
    let s = seconds.round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// The last picture, left on the terminal: everything copied is the total if the count did not
/// finish first.
pub fn finish(bar: &ProgressBar, progress: &Progress, totals: &Totals) {
    update(bar, progress, totals, (true, &Eta::default()));
    if !totals.done() {
        bar.set_length(progress.bytes.load(Ordering::Relaxed));
        let files = progress.files.load(Ordering::Relaxed);
        bar.set_message(format!("files {files}/{files}"));
    }
    bar.set_style(bar_style());
    bar.finish();
}

fn update(bar: &ProgressBar, progress: &Progress, totals: &Totals, (counted, eta): (bool, &Eta)) {
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
        let left = eta
            .left(total_files.max(files), total_bytes.max(bytes))
            .map_or_else(|| "-".to_string(), short_time);
        bar.set_message(format!(
            "files {files}/{} ETA {left}",
            total_files.max(files)
        ));
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
        "{spinner} {bytes}/{total_bytes} {percent:>3}% {bytes_per_sec} [{bar:24}] {msg}",
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

/// Runs `work`, a later phase of the run (`verify`, `verify (device)`), under a bar of its own
/// when `wanted` and stderr is a terminal: `name`, the bytes `work` adds to `done` of the
/// total, rate and ETA. The total is `total()`, run beside `work` (a manifest that gives no
/// sizes has its files stat'ed while they are read, never before); until it is known the bar
/// shows the bytes and rate alone. Without a terminal neither `total` runs nor anything is
/// drawn.
pub fn phase<T: Send>(
    wanted: bool,
    name: &str,
    (total, done): (impl FnOnce() -> u64 + Send, &AtomicU64),
    work: impl FnOnce() -> T + Send,
) -> T {
    if !wanted || !std::io::stderr().is_terminal() {
        return work();
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{prefix} {bytes} ({bytes_per_sec}); counting the total")
            .expect("template"),
    );
    bar.set_prefix(name.to_string());
    // u64::MAX: not counted yet.
    let counted = AtomicU64::new(u64::MAX);
    let finished = AtomicBool::new(false);
    let show = |bar: &ProgressBar, styled: &mut bool| {
        let position = done.load(Ordering::Relaxed);
        let total = counted.load(Ordering::Relaxed);
        if total != u64::MAX {
            // Files that grew since they were counted: the total is at least what is done.
            bar.set_length(total.max(position));
            if !*styled {
                *styled = true;
                bar.set_style(phase_style());
            }
        }
        bar.set_position(position);
    };
    let out = std::thread::scope(|s| {
        s.spawn(|| counted.store(total(), Ordering::Relaxed));
        s.spawn(|| {
            let mut styled = false;
            while !finished.load(Ordering::Relaxed) {
                show(&bar, &mut styled);
                std::thread::sleep(TICK);
            }
        });
        let out = work();
        finished.store(true, Ordering::Relaxed);
        out
    });
    show(&bar, &mut false);
    bar.set_style(phase_style());
    bar.finish();
    out
}

/// A later phase's bar: bytes done of the total, rate, ETA.
fn phase_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{prefix} [{bar:30}] {bytes}/{total_bytes} {percent:>3}% ({bytes_per_sec}, ETA {eta})",
    )
    .expect("template")
    .progress_chars("=> ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A simulated copy: `items` (bytes each) copied in order at `per_file` seconds a file and
    /// `per_mib` a MiB, sampled after each; at the half-way mark in time, the ETA against the
    /// real time left.
    fn eta_error_at_half(items: &[u64], per_file: f64, per_mib: f64) -> f64 {
        let cost = |b: u64| per_file + per_mib * b as f64 / MIB;
        let total_time: f64 = items.iter().map(|&b| cost(b)).sum();
        let (total_files, total_bytes) = (items.len() as u64, items.iter().sum::<u64>());
        let mut eta = Eta::default();
        let (mut t, mut files, mut bytes) = (0.0, 0u64, 0u64);
        for &b in items {
            t += cost(b);
            files += 1;
            bytes += b;
            eta.sample(t, files, bytes);
            if t >= total_time / 2.0 {
                let left = eta.left(total_files, total_bytes).unwrap();
                let real = total_time - t;
                return (left - real).abs() / real;
            }
        }
        unreachable!("half-way is reached")
    }

    #[test]
    fn the_eta_at_half_way_is_within_30_percent() {
        // Small files only; one big file, in 1 MiB steps.
        let small = vec![4096u64; 18_000];
        assert!(eta_error_at_half(&small, 200e-6, 0.002) < 0.3);
        let big = vec![1u64 << 20; 1024];
        assert!(eta_error_at_half(&big, 0.0, 0.0005) < 0.3);
        // The case a bytes-only ETA got wrong: big files first, then many small ones (the bar
        // showed 70% and "ETA 1s" with most files to go).
        let mut mixed = vec![64u64 << 20; 8];
        mixed.extend(std::iter::repeat_n(2048u64, 16_000));
        let e = eta_error_at_half(&mixed, 150e-6, 0.0004);
        assert!(e < 0.3, "error {e}");
        // Sizes that vary, in a random-looking order.
        let varied: Vec<u64> = (0..20_000u64)
            .map(|i| (i * 7919 % 101) * 3000 + 100)
            .collect();
        assert!(eta_error_at_half(&varied, 100e-6, 0.001) < 0.3);
    }

    #[test]
    fn nothing_done_has_no_eta_and_short_times_read_short() {
        assert_eq!(Eta::default().left(10, 10), None);
        assert_eq!(short_time(3.4), "3s");
        assert_eq!(short_time(125.0), "2m05s");
        assert_eq!(short_time(3720.0), "1h02m");
    }
}
