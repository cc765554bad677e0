//! Where a sync run's lines go: one line per entry on stdout (`-v`, `-i`, `--out-format`),
//! the same lines in `--log-file`, and errors on stderr with the program's name. Under
//! `--json` ([`Output::json_report`]) stdout is the JSON document's alone: the lines go to
//! stderr, and every error printed is also kept, as an object, for the document.

use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::item::{local_time, Action, Item, OutFormat, TIME};
use crate::error::CopyError;
use crate::sys::{Kind, Stat};

/// Marks a line of a directory's block that is printed before the others (see
/// [`Output::print`]); a byte no line holds.
const EARLY: u8 = 0;

/// Marks a line of a directory's block that goes to `--log-file`, not stdout (so the log keeps
/// the walk's order too); a byte no line begins with (names are escaped).
const LOG: u8 = 1;

/// Marks a `--progress` line whose transfer number is given as it is printed: the line is
/// `NUMBERED head SPLIT rest`, printed as `head (xfr#N, rest`.
const NUMBERED: u8 = 2;
const SPLIT: u8 = 3;

/// The run's printer.
pub struct Output {
    /// The name errors begin with (`rsync`, `ringio sync`).
    pub program: String,
    /// The per-entry line on stdout: `%n%L` under `-v`, `%i %n%L` under `-i`, or
    /// `--out-format`; `None`: no per-entry lines.
    pub format: Option<OutFormat>,
    /// `-ii`, `-vv`: unchanged entries are listed too.
    pub all: bool,
    /// `-v` (its count): deletions are named.
    pub verbose: u8,
    /// `-q`: no notes (what is skipped and why), only errors.
    pub quiet: bool,
    /// `--info=backup` (or `-vv`): "backed up X to Y".
    pub backups: bool,
    /// `--info=skip`: why a file is skipped (1: "X is newer", "X exists"; 2: also "X is
    /// uptodate").
    pub skips: u8,
    /// `--log-file`, with `%i %n%L` lines.
    pub log: Option<Mutex<File>>,
    /// `--progress`, `--info=progress2`.
    pub progress: Progress,
    /// `--list-only`: every source entry listed as `ls -l` would (rsync's format), nothing
    /// else done.
    pub list_only: bool,
    /// `--list-only -l`: a symlink's line shows its target.
    pub list_targets: bool,
    /// `--progress` lines printed so far (their `xfr#`).
    transfers: AtomicU64,
    /// Where the lines go: stdout, or stderr under `--json`.
    stdout: Mutex<io::BufWriter<Box<dyn Write + Send>>>,
    /// `--json`: every error printed, as `CopyError::to_json` shapes it.
    errors: Option<Mutex<Vec<serde_json::Value>>>,
}

/// What begins each `--log-file` line, as rsync writes it: `YYYY/MM/DD HH:MM:SS [PID] `
/// (sync's and cp's).
pub fn log_prefix() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    format!("{} [{}] ", local_time(now, TIME), std::process::id())
}

/// What `--progress` and `--info=progress2` show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Progress {
    /// Nothing.
    #[default]
    None,
    /// `--progress` (`--info=progress1`): a line after each transferred file's name.
    PerFile,
    /// `--info=progress2`: one line for the whole transfer, rewritten as it goes.
    Total,
}

/// rsync's progress line: `      1,234,567 100%   12.34MB/s    0:00:01` and what follows
/// (`eol`): the bytes, the percentage, the rate and a time (elapsed at the end, else left).
pub fn progress_line(bytes: u64, percent: u64, rate_bytes: f64, seconds: u64, eol: &str) -> String {
    let kib = rate_bytes / 1024.0;
    let (rate, units) = if kib > 1024.0 * 1024.0 {
        (kib / 1024.0 / 1024.0, "GB/s")
    } else if kib > 1024.0 {
        (kib / 1024.0, "MB/s")
    } else {
        (kib, "kB/s")
    };
    format!(
        "{:>15} {:>3}% {:>7.2}{units} {:>4}:{:02}:{:02}{eol}",
        super::stats::group(bytes),
        percent.min(100),
        rate,
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// rsync's `--list-only` line: `drwxr-xr-x          4,096 2026/11/25 16:50:06 name`.
fn list_line(item: &Item, src: &Stat, targets: bool, buf: &mut Vec<u8>) {
    let name = item.name.strip_suffix(b"/").unwrap_or(&item.name);
    let name = if name.is_empty() {
        b".".as_slice()
    } else {
        name
    };
    buf.extend_from_slice(
        format!(
            "{} {:>14} {} ",
            super::item::mode_string(src.mode),
            super::stats::group(src.size),
            local_time(src.mtime.0, TIME)
        )
        .as_bytes(),
    );
    buf.extend_from_slice(&super::item::escaped(name));
    if let (Some(target), Kind::Symlink, true) = (&item.link, item.kind, targets) {
        buf.extend_from_slice(b" -> ");
        buf.extend_from_slice(&super::item::escaped(target));
    }
    buf.push(b'\n');
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("program", &self.program)
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

impl Output {
    /// A printer for `program` that prints no per-entry lines.
    pub fn new(program: &str) -> Self {
        Output {
            program: program.to_string(),
            format: None,
            all: false,
            verbose: 0,
            quiet: false,
            backups: false,
            skips: 0,
            log: None,
            progress: Progress::None,
            list_only: false,
            list_targets: false,
            transfers: AtomicU64::new(0),
            stdout: Mutex::new(io::BufWriter::new(Box::new(io::stdout()))),
            errors: None,
        }
    }

    /// `--json`: stdout is left to the one JSON document the caller prints at the end (every
    /// line this printer prints goes to stderr), and each error is kept for it
    /// ([`Output::take_errors`]).
    pub fn json_report(&mut self) {
        self.stdout = Mutex::new(io::BufWriter::new(Box::new(io::stderr())));
        self.errors = Some(Mutex::new(Vec::new()));
    }

    /// `--json`: the errors printed so far, each an object with its `message` and, for a
    /// failed call, its `op`, `path`, `errno` and `reason` (null for an error that is no
    /// call's); empty without `--json`.
    pub fn take_errors(&self) -> Vec<serde_json::Value> {
        self.errors.as_ref().map_or_else(Vec::new, |errors| {
            std::mem::take(&mut *errors.lock().unwrap_or_else(|e| e.into_inner()))
        })
    }

    /// True when entries are printed one per line (so the walk keeps rsync's order).
    pub fn lists_entries(&self) -> bool {
        self.format.is_some() || self.log.is_some() || self.list_only
    }

    /// The lines for `item` (none, or one), appended to `buf`; `src` is the source's stat.
    pub fn render(&self, item: &Item, src: Option<&Stat>, buf: &mut Vec<u8>) {
        if self.list_only {
            if let (Some(src), false) = (src, item.action == Action::Deleted) {
                list_line(item, src, self.list_targets, buf);
            }
            return;
        }
        let Some(format) = &self.format else { return };
        let shown = if item.action == Action::Deleted {
            format.itemizes || self.verbose > 0
        } else if format.itemizes {
            self.all || item.significant()
        } else if !item.significant() {
            // -vv without -i: an entry left as it is is "uptodate" (a directory only when it
            // matched a `--*-dest` tree).
            if self.all && (item.kind != Kind::Dir || item.matched) {
                buf.push(EARLY);
                buf.extend_from_slice(&super::item::escaped(&item.name));
                buf.extend_from_slice(b" is uptodate\n");
            }
            return;
        } else {
            // -v: what was made or written; of attribute changes, a directory's.
            match item.action {
                Action::Transfer | Action::LocalChange | Action::HardLink => true,
                Action::Attributes => item.kind == Kind::Dir,
                Action::Deleted => false,
            }
        };
        if !shown {
            return;
        }
        if item.action == Action::Deleted && !format.itemizes {
            buf.extend_from_slice(b"deleting ");
            buf.extend_from_slice(&super::item::escaped(&item.name));
        } else {
            buf.extend_from_slice(&format.render(item, src));
        }
        buf.push(b'\n');
    }

    /// The `--log-file` line for `item`, appended to the directory's block `buf`.
    pub fn log_line(&self, item: &Item, src: Option<&Stat>, buf: &mut Vec<u8>) {
        if self.log.is_none() || !item.significant() {
            return;
        }
        let format = OutFormat::parse("%i %n%L").expect("a valid format");
        buf.push(LOG);
        buf.extend_from_slice(&format.render(item, src));
        buf.push(b'\n');
    }

    /// Prints a block of lines at once, so that a directory's lines stay together. Lines
    /// marked [`EARLY`] come first: rsync's generator prints "X is uptodate" as it goes, while
    /// the names of what is transferred come from its receiver, after.
    pub fn print(&self, lines: &[u8]) {
        if lines.is_empty() {
            return;
        }
        let ordered;
        let marked = |b: &u8| matches!(*b, EARLY | NUMBERED);
        let lines = if lines.iter().any(marked) || self.log.is_some() {
            let (mut early, mut late, mut log) = (Vec::new(), Vec::new(), Vec::new());
            for line in lines.split_inclusive(|&b| b == b'\n') {
                match line.split_first() {
                    Some((&EARLY, rest)) => early.extend_from_slice(rest),
                    Some((&LOG, rest)) => log.extend_from_slice(rest),
                    Some((&NUMBERED, rest)) => {
                        let at = rest.iter().position(|&b| b == SPLIT).unwrap_or(rest.len());
                        let n = self.transfers.fetch_add(1, Ordering::Relaxed) + 1;
                        late.extend_from_slice(&rest[..at]);
                        late.extend_from_slice(format!(" (xfr#{n}, ").as_bytes());
                        late.extend_from_slice(rest.get(at + 1..).unwrap_or_default());
                    }
                    _ => late.extend_from_slice(line),
                }
            }
            if let (Some(file), false) = (&self.log, log.is_empty()) {
                let prefix = log_prefix();
                let mut stamped = Vec::with_capacity(log.len() + 32 * prefix.len());
                for line in log.split_inclusive(|&b| b == b'\n') {
                    stamped.extend_from_slice(prefix.as_bytes());
                    stamped.extend_from_slice(line);
                }
                if let Ok(mut file) = file.lock() {
                    let _ = file.write_all(&stamped);
                }
            }
            early.extend_from_slice(&late);
            ordered = early;
            &ordered[..]
        } else {
            lines
        };
        if let Ok(mut out) = self.stdout.lock() {
            let _ = out.write_all(lines);
            if self.format.is_some() {
                let _ = out.flush();
            }
        }
    }

    /// Appends to `buf` a `--progress` line, `head (xfr#N, rest`, whose N counts the lines as
    /// they are printed (in rsync's order, whichever worker finished first).
    pub fn numbered_line(&self, head: &str, rest: &str, buf: &mut Vec<u8>) {
        buf.push(NUMBERED);
        buf.extend_from_slice(head.as_bytes());
        buf.push(SPLIT);
        buf.extend_from_slice(rest.as_bytes());
        buf.push(b'\n');
    }

    /// Rewrites `--info=progress2`'s line (`\r` first; `text` ends in spaces, or in a newline
    /// the last time).
    pub fn progress_update(&self, text: &str) {
        if let Ok(mut out) = self.stdout.lock() {
            let _ = out.write_all(b"\r");
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
    }

    /// Prints a line of the summary (`--stats`, `-v`'s totals).
    pub fn say(&self, line: &str) {
        self.print(format!("{line}\n").as_bytes());
    }

    /// Flushes stdout.
    pub fn flush(&self) {
        if let Ok(mut out) = self.stdout.lock() {
            let _ = out.flush();
        }
    }

    /// An error or warning line on stderr: `PROGRAM: MESSAGE` (kept under `--json` with
    /// null `op`, `path`, `errno` and `reason`).
    pub fn error(&self, message: &str) {
        self.report(message, || {
            CopyError::Refused(message.to_string()).to_json()
        });
    }

    /// A failed operation: its message on stderr, and under `--json` its fields.
    pub fn fail(&self, e: &CopyError) {
        self.report(&e.to_string(), || e.to_json());
    }

    /// A failed operation in words of rsync's own (`link_stat X failed: REASON`): `message`
    /// printed, `e`'s fields kept under `--json`.
    pub fn fail_worded(&self, message: &str, e: &CopyError) {
        self.report(message, || e.to_json());
    }

    /// rsync's `file has vanished: PATH` (a source entry gone between its listing and its
    /// use); under `--json` its `op` is `vanished`, its errno ENOENT.
    pub fn vanished(&self, path: &std::path::Path) {
        let message = format!("file has vanished: {}", crate::quote::quote_path(path));
        let gone = std::io::Error::from_raw_os_error(libc::ENOENT);
        let e = CopyError::io(crate::error::Op::Stat, path, gone);
        self.report(&message, || {
            let mut fields = e.to_json();
            fields["op"] = "vanished".into();
            fields
        });
    }

    /// The one way an error leaves the printer: on stderr as `PROGRAM: MESSAGE`, and under
    /// `--json` kept as `fields` with `message` set to MESSAGE.
    fn report(&self, message: &str, fields: impl FnOnce() -> serde_json::Value) {
        self.flush();
        // A closed stderr loses the message, never the run.
        let _ = writeln!(io::stderr(), "{}: {message}", self.program);
        if let Some(errors) = &self.errors {
            let mut fields = fields();
            fields["message"] = message.into();
            errors
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(fields);
        }
    }
}
