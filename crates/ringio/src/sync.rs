//! `ringio sync` (and ringio run under the name `rsync`): rsync's local command line, turned
//! into a [`SyncPlan`] and run by the copy crate's sync engine.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{ArgAction, ArgMatches};

use ringio_copy::filter::{FilterRules, ListKind};
use ringio_copy::manifest::Format;
use ringio_copy::sync::alt::AltKind;
use ringio_copy::sync::item::OutFormat;
use ringio_copy::sync::{
    Backups, DeleteWhen, Output, Progress, QuickCheck, Source, Symlinks, SyncPlan,
};

/// A line on stderr; a closed stderr loses it, never the run (no panic, the exit code stays
/// rsync's).
macro_rules! to_stderr {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// rsync's exit code for a usage error.
pub const SYNTAX: i32 = 1;

/// A file the command line names could not be read (`--exclude-from`, `--include-from`):
/// rsync's file I/O error, exit 11, not a usage error.
#[derive(Debug)]
struct FileIo(String);

impl FileIo {
    /// The message as rsync words it: the reason's errno in parentheses.
    fn from_filter(err: ringio_copy::filter::FilterError) -> anyhow::Error {
        let text = err.to_string();
        let text = match text.rsplit_once(" (os error ") {
            Some((head, n)) => format!("{head} ({}", n),
            None => text,
        };
        anyhow::Error::new(FileIo(text))
    }
}

impl std::fmt::Display for FileIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[client] {}", self.0)
    }
}

impl std::error::Error for FileIo {}

/// `ringio sync`: rsync's options for a local transfer. Options are read in order, as rsync
/// reads them: a later `--no-OPTION` undoes an earlier one (or `-a`'s share of it), and
/// filter rules apply in the order given.
#[derive(Debug, clap::Args)]
#[command(
    args_override_self = true,
    disable_help_flag = true,
    disable_version_flag = true,
    override_usage = "ringio sync [OPTION]... SRC... DEST\n       rsync [OPTION]... SRC... DEST   (ringio run under the name rsync)",
    after_help = "SRC/ (a trailing slash) syncs the contents of SRC into DEST; SRC syncs the directory \
itself, as DEST/SRC. DEST is made if missing (its parents too with --mkpath). One file synced to a \
name that is not a directory is copied to that name.\n\n\
An unchanged file (same size and mtime, to the nanosecond) costs one statx per side and no read. \
A changed file is written to a temporary in its directory and renamed over the old one, so a \
reader sees the old or the new file, never a mix (--inplace writes into the file itself). Every \
destination directory below DEST is opened without following symlinks, so a directory swapped for \
a symlink mid-run redirects nothing. A run killed at any moment leaves temporaries that the next \
run removes.\n\n\
Exit status, as rsync's: 0 done; 1 usage; 3 DEST unusable; 4 an unknown --checksum-choice or \
--compress-choice name; 11 file I/O (DEST cannot be made); 20 interrupted; 23 some entries \
failed (nothing is deleted in a directory whose source could not be read, and nothing at all \
when a source operand is missing); 24 some source files vanished; 25 --max-delete stopped \
deletions. Remote operands (HOST:PATH, rsync://) are refused: ringio syncs locally only.\n\n\
Every option of rsync 3.2.7 is known, read as rsync reads it (repeats allowed, the last value \
wins, --no-X undoes X). Those for remote transfers and the delta algorithm (-z, --compress-level, \
--compress-choice, --skip-compress, -B/--block-size, --checksum-choice, -s/--protect-args, \
--old-args, --no-inc-recursive, -4, -6, --port, --address, --sockopts, --outbuf, --protocol, \
--checksum-seed, --max-alloc, --preallocate, -8, --qsort, ...) are checked as rsync checks them \
and have no effect locally; the few ringio does not carry out (--append, --partial-dir, \
--iconv, --usermap, ...) are refused by name. docs/CONFORMANCE.md lists each."
)]
pub struct Args {
    /// Sources, then DEST.
    #[arg(value_name = "PATH", num_args = 0..)]
    pub paths: Vec<OsString>,

    // What to keep.
    /// Archive mode: -rlptgoD (no -A, -X, -U, -H).
    #[arg(short = 'a', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub archive: bool,
    /// Recurse into directories.
    #[arg(short = 'r', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub recursive: bool,
    /// Undo -r.
    #[arg(long = "no-recursive", visible_alias = "no-r", action = ArgAction::SetTrue, hide_short_help = true)]
    pub no_recursive: bool,
    /// Transfer directories without recursing.
    #[arg(short = 'd', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub dirs: bool,
    /// Copy symlinks as symlinks.
    #[arg(short = 'l', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub links: bool,
    /// Undo -l.
    #[arg(long = "no-links", visible_alias = "no-l", action = ArgAction::SetTrue, hide_short_help = true)]
    pub no_links: bool,
    /// Transform symlinks into the files or directories they point to.
    #[arg(short = 'L', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub copy_links: bool,
    /// Follow only the symlinks that lead outside the transferred tree.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub copy_unsafe_links: bool,
    /// Skip the symlinks that lead outside the transferred tree.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub safe_links: bool,
    /// Treat a symlinked directory on the receiver as a directory.
    #[arg(short = 'K', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub keep_dirlinks: bool,
    /// Preserve hard links (across the whole transfer).
    #[arg(short = 'H', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub hard_links: bool,
    /// Preserve permissions.
    #[arg(short = 'p', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub perms: bool,
    /// Undo -p.
    #[arg(long = "no-perms", visible_alias = "no-p", action = ArgAction::SetTrue, hide_short_help = true)]
    pub no_perms: bool,
    /// Preserve executability (without -p).
    #[arg(short = 'E', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub executability: bool,
    /// Preserve the owner (as root).
    #[arg(short = 'o', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub owner: bool,
    /// Undo -o.
    #[arg(long = "no-owner", visible_alias = "no-o", action = ArgAction::SetTrue, hide_short_help = true)]
    pub no_owner: bool,
    /// Preserve the group.
    #[arg(short = 'g', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub group: bool,
    /// Undo -g.
    #[arg(long = "no-group", visible_alias = "no-g", action = ArgAction::SetTrue, hide_short_help = true)]
    pub no_group: bool,
    /// Keep numeric ids (a local transfer maps no names, so ids are always kept as they are).
    #[arg(long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub numeric_ids: bool,
    /// Give every entry this owner and group: USER:GROUP, USER, or :GROUP (names or numbers).
    #[arg(long, value_name = "USER:GROUP", help_heading = "What to keep")]
    pub chown: Option<String>,
    /// Same as --devices --specials.
    #[arg(short = 'D', action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub devices_specials: bool,
    /// Undo -D.
    #[arg(long = "no-D", action = ArgAction::SetTrue, hide_short_help = true)]
    pub no_devices_specials: bool,
    /// Preserve device files (as root).
    #[arg(long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub devices: bool,
    /// Undo --devices (and -D's share of it).
    #[arg(long = "no-devices", action = ArgAction::SetTrue, hide_short_help = true)]
    pub no_devices: bool,
    /// Preserve special files (FIFOs, sockets).
    #[arg(long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub specials: bool,
    /// Undo --specials (and -D's share of it).
    #[arg(long = "no-specials", action = ArgAction::SetTrue, hide_short_help = true)]
    pub no_specials: bool,
    /// Preserve modification times.
    #[arg(short = 't', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub times: bool,
    /// Undo -t.
    #[arg(long = "no-times", visible_alias = "no-t", action = ArgAction::SetTrue, hide_short_help = true)]
    pub no_times: bool,
    /// Omit directories from --times.
    #[arg(short = 'O', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub omit_dir_times: bool,
    /// Preserve access times.
    #[arg(short = 'U', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub atimes: bool,
    /// Preserve ACLs (implies -p).
    #[arg(short = 'A', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub acls: bool,
    /// Preserve extended attributes.
    #[arg(short = 'X', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub xattrs: bool,
    /// Keep holes: only the source's data extents are written.
    #[arg(short = 'S', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub sparse: bool,
    /// Don't cross filesystem boundaries (a mount point is made, empty); twice (-xx): mount
    /// points are left out.
    #[arg(short = 'x', long, action = ArgAction::Count, help_heading = "What to keep")]
    pub one_file_system: u8,
    /// Open source files with O_NOATIME where permitted (the owner's files, or as root), so
    /// reading them leaves their access times as they were.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub open_noatime: bool,
    /// fsync each written file before it is put in place.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Safety")]
    pub fsync: bool,
    /// Copy files whole (always, locally: there is no delta to compute).
    #[arg(short = 'W', long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub whole_file: bool,
    /// Update destination files in place, not through a temporary.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub inplace: bool,
    /// Use rsync's delta algorithm (a local copy has no delta to save: files are copied whole,
    /// the result is the same).
    #[arg(long = "no-whole-file", visible_alias = "no-W", action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub no_whole_file: bool,
    /// Find a similar file as the delta basis (no effect when files are copied whole).
    #[arg(short = 'y', long, action = ArgAction::Count, help_heading = "What to keep")]
    pub fuzzy: u8,
    /// Change permissions: rsync's CHMOD (e.g. D755,F644 or u+w,go-w; D: dirs, F: files).
    #[arg(long, value_name = "CHMOD", action = ArgAction::Append, help_heading = "What to keep")]
    pub chmod: Vec<String>,
    /// Act as the super-user for owners, groups and devices (tried even when not root).
    #[arg(long = "super", action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub super_: bool,
    /// Keep owners, groups, devices and special modes in the xattr user.rsync.%stat (as rsync
    /// does), for a backup made without root; read them back from there on the source.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "What to keep")]
    pub fake_super: bool,

    // What to skip.
    /// Skip by content, not by mtime and size (both sides are read, up to the first difference).
    #[arg(short = 'c', long, action = ArgAction::SetTrue, help_heading = "What to skip")]
    pub checksum: bool,
    /// Skip files that match in size.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "What to skip")]
    pub size_only: bool,
    /// Don't skip files that match size and time.
    #[arg(short = 'I', long, action = ArgAction::SetTrue, help_heading = "What to skip")]
    pub ignore_times: bool,
    /// Compare mtimes with this much slack, in seconds (default: equal to the nanosecond).
    #[arg(
        long,
        value_name = "NUM",
        allow_negative_numbers = true,
        help_heading = "What to skip"
    )]
    pub modify_window: Option<i64>,
    /// Skip files that are newer on the receiver.
    #[arg(short = 'u', long, action = ArgAction::SetTrue, help_heading = "What to skip")]
    pub update: bool,
    /// Skip creating new files on the receiver.
    #[arg(long, visible_alias = "ignore-non-existing", action = ArgAction::SetTrue, help_heading = "What to skip")]
    pub existing: bool,
    /// Skip updating files that exist on the receiver.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "What to skip")]
    pub ignore_existing: bool,
    /// Don't transfer any file larger than SIZE (K, M, G: powers of 1024; KB, MB, GB: of 1000).
    #[arg(long, value_name = "SIZE", help_heading = "What to skip")]
    pub max_size: Option<String>,
    /// Don't transfer any file smaller than SIZE.
    #[arg(long, value_name = "SIZE", help_heading = "What to skip")]
    pub min_size: Option<String>,

    // Deletion.
    /// Delete extraneous files from the destination (as --delete-during).
    #[arg(long, visible_alias = "del", action = ArgAction::SetTrue, help_heading = "Deletion")]
    pub delete: bool,
    /// Delete before the transfer, in a pass of its own.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Deletion")]
    pub delete_before: bool,
    /// Delete in each directory before its entries are transferred.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Deletion")]
    pub delete_during: bool,
    /// Delete after the transfer.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Deletion")]
    pub delete_after: bool,
    /// Find deletions during the transfer, delete after it.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Deletion")]
    pub delete_delay: bool,
    /// Delete even after an error reading the source (rsync stops deleting there, with
    /// "IO error encountered -- skipping file deletion").
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Deletion")]
    pub ignore_errors: bool,
    /// Also delete excluded files from the destination.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Deletion")]
    pub delete_excluded: bool,
    /// Delete no more than NUM entries (exit 25 when more were due).
    #[arg(long, value_name = "NUM", help_heading = "Deletion")]
    pub max_delete: Option<i64>,
    /// Delete a non-empty directory that stands where a non-directory goes.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Deletion")]
    pub force: bool,
    /// Remove synced files from the source (not directories).
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Deletion")]
    pub remove_source_files: bool,

    // Filters.
    /// Exclude files matching PATTERN.
    #[arg(long, value_name = "PATTERN", action = ArgAction::Append, allow_hyphen_values = true, help_heading = "Filters")]
    pub exclude: Vec<OsString>,
    /// Don't exclude files matching PATTERN.
    #[arg(long, value_name = "PATTERN", action = ArgAction::Append, allow_hyphen_values = true, help_heading = "Filters")]
    pub include: Vec<OsString>,
    /// Read exclude patterns from FILE ("-": stdin).
    #[arg(long, value_name = "FILE", action = ArgAction::Append, help_heading = "Filters")]
    pub exclude_from: Vec<PathBuf>,
    /// Read include patterns from FILE ("-": stdin).
    #[arg(long, value_name = "FILE", action = ArgAction::Append, help_heading = "Filters")]
    pub include_from: Vec<PathBuf>,
    /// Add a filter RULE (rsync's syntax: + - P R H S !, merge, dir-merge, modifiers).
    #[arg(short = 'f', long, value_name = "RULE", action = ArgAction::Append, allow_hyphen_values = true, help_heading = "Filters")]
    pub filter: Vec<OsString>,
    /// Same as --filter='dir-merge /.rsync-filter'; twice also excludes the .rsync-filter files.
    #[arg(short = 'F', action = ArgAction::Count, help_heading = "Filters")]
    pub rsync_filter: u8,
    /// Auto-ignore files the way CVS does.
    #[arg(short = 'C', long, action = ArgAction::SetTrue, help_heading = "Filters")]
    pub cvs_exclude: bool,
    /// Sync exactly the paths listed in FILE ("-": stdin), relative to the one SRC; implies -R
    /// and -d, and -a no longer implies -r. A listed "dir/" brings the directory's own entries;
    /// a `..` never climbs out of SRC (`../x` is SRC/x, as rsync reads it).
    #[arg(long, value_name = "FILE", help_heading = "Filters")]
    pub files_from: Option<PathBuf>,
    /// Keep each source's path below DEST (from a `/./` in it, if any): `-R a/b/c DEST` makes
    /// DEST/a/b/c, its leading directories included (followed where they are symlinks). A `..`
    /// in the kept path is refused, as rsync refuses it.
    #[arg(short = 'R', long, action = ArgAction::SetTrue, help_heading = "Filters")]
    pub relative: bool,
    /// Undo -R.
    #[arg(long = "no-relative", visible_alias = "no-R", action = ArgAction::SetTrue, hide_short_help = true)]
    pub no_relative: bool,
    /// Under -R, make the leading directories without their source's attributes or lines.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Filters")]
    pub no_implied_dirs: bool,
    /// Leave out directories that would end up empty (nothing but directories below them).
    #[arg(short = 'm', long, action = ArgAction::SetTrue, help_heading = "Filters")]
    pub prune_empty_dirs: bool,
    /// Read the lists of --exclude-from/--include-from as NUL-separated.
    #[arg(short = '0', long, action = ArgAction::SetTrue, help_heading = "Filters")]
    pub from0: bool,

    // History.
    /// Make backups of replaced and deleted files (see --suffix and --backup-dir).
    #[arg(short = 'b', long, action = ArgAction::SetTrue, help_heading = "History")]
    pub backup: bool,
    /// Make backups into this directory tree.
    #[arg(long, value_name = "DIR", help_heading = "History")]
    pub backup_dir: Option<PathBuf>,
    /// Compare with the files in DIR too (up to 20): a file identical there is not made.
    #[arg(long, value_name = "DIR", action = ArgAction::Append, help_heading = "History")]
    pub compare_dest: Vec<PathBuf>,
    /// ... and a file identical there is copied from there (locally).
    #[arg(long, value_name = "DIR", action = ArgAction::Append, help_heading = "History")]
    pub copy_dest: Vec<PathBuf>,
    /// ... and a file identical there is hard-linked to it: snapshots that share unchanged
    /// files (rsnapshot's way). Relative DIRs are relative to DEST.
    #[arg(long, value_name = "DIR", action = ArgAction::Append, help_heading = "History")]
    pub link_dest: Vec<PathBuf>,
    /// Backup suffix (default ~ without --backup-dir).
    #[arg(long, value_name = "SUFFIX", help_heading = "History")]
    pub suffix: Option<String>,

    // Output.
    /// Increase verbosity (names of what changes; twice: of everything).
    #[arg(short = 'v', long, action = ArgAction::Count, help_heading = "Output")]
    pub verbose: u8,
    /// Suppress non-error messages.
    #[arg(short = 'q', long, action = ArgAction::SetTrue, help_heading = "Output")]
    pub quiet: bool,
    /// Output a change summary for every update (rsync's YXcstpoguax); twice: for every entry.
    #[arg(short = 'i', long, action = ArgAction::Count, help_heading = "Output")]
    pub itemize_changes: u8,
    /// Output updates using FORMAT (%i %n %L %l %b %o %B %M %U %G %p %%).
    #[arg(
        long,
        visible_alias = "log-format",
        value_name = "FORMAT",
        help_heading = "Output"
    )]
    pub out_format: Option<String>,
    /// Print the transfer's statistics at the end.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Output")]
    pub stats: bool,
    /// Show each transferred file's size, rate and time after its name (--info=progress1;
    /// --info=progress2 shows one line for the whole transfer instead).
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Output")]
    pub progress: bool,
    /// --partial --progress.
    #[arg(short = 'P', action = ArgAction::SetTrue, help_heading = "Output")]
    pub partial_progress: bool,
    /// List the source's entries as `ls -l` does (rsync's format) instead of transferring
    /// them; implied by a single operand. Without -r, a directory's entries, not below.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Output")]
    pub list_only: bool,
    /// Numbers in a human-readable form (digit groups, as rsync's default).
    #[arg(short = 'h', long, action = ArgAction::Count, help_heading = "Output")]
    pub human_readable: u8,
    /// Log what is done to FILE (rsync's "%i %n%L" lines, with the time). FILE must be a
    /// regular file (or not exist yet): a symlink, FIFO or device is refused.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub log_file: Option<PathBuf>,
    /// Fine-grained output: comma-separated FLAGS (backup, skip, name, del, stats, progress2, ...;
    /// a digit after a flag is its level). `--info=help` lists them.
    #[arg(long, value_name = "FLAGS", action = ArgAction::Append, help_heading = "Output")]
    pub info: Vec<String>,
    /// rsync's debug output (accepted; ringio has no protocol to trace).
    #[arg(long, value_name = "FLAGS", action = ArgAction::Append, help_heading = "Output")]
    pub debug: Vec<String>,
    /// Hash every regular file DEST holds when the run is over, with ALGO (xxh3, xxh64,
    /// xxh128, blake3, sha256, sha1, md5; default xxh128 with --manifest): the files written
    /// from the buffers they pass through, the ones left as they are read back from DEST.
    #[arg(long, value_name = "ALGO", help_heading = "Output")]
    pub hash: Option<String>,
    /// Write the hashes to FILE (`-`: standard output), names relative to DEST: `sha256sum -c`,
    /// `b3sum -c`, `xxhsum -c` and `ringio verify --manifest` read it. Written to a temporary
    /// and renamed; refused if FILE exists or is inside a source, unless --force. It lists
    /// every regular file DEST holds after the run (those the source lacks too), so `verify
    /// --manifest` passes right after. A sync that fails (exit other than 0 and 24) writes no
    /// manifest and no MHL generation: none vouches for an incomplete copy.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub manifest: Option<PathBuf>,
    /// The manifest's format: sum (the checksum tools' lines), json, or mhl (ASC MHL v2.0: a
    /// new generation in DEST/ascmhl, without --manifest).
    #[arg(long, value_name = "FORMAT", help_heading = "Output")]
    pub manifest_format: Option<String>,
    /// Also sync to DIR (repeatable), as if it were DEST: an offload to several disks. The
    /// syncs run side by side, so the source is read from the device once; only DEST's lines
    /// are printed. A failure on one is reported with its path and the others go on.
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    pub tee: Vec<PathBuf>,
    /// Print rsync's version (twice: its capabilities as JSON, as rsync -VV).
    #[arg(short = 'V', long, action = ArgAction::Count, help_heading = "Output")]
    pub version: u8,
    /// Print help (rsync's -h is --human-readable; --help is help).
    #[arg(long, action = ArgAction::Help, help_heading = "Output")]
    pub help: Option<bool>,

    // Safety.
    /// Perform a trial run with no changes made: print what a real run would do.
    #[arg(short = 'n', long, action = ArgAction::SetTrue, help_heading = "Safety")]
    pub dry_run: bool,
    /// Create DEST's missing parent directories.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Safety")]
    pub mkpath: bool,
    /// Set the I/O timeout in seconds (a local transfer has no peer to wait for: accepted).
    #[arg(long, value_name = "SECONDS", help_heading = "Safety")]
    pub timeout: Option<u64>,
    /// Limit the transfer rate (a local copy is not limited: accepted, as rsync ignores
    /// networking options for local transfers).
    #[arg(long, value_name = "RATE", help_heading = "Safety")]
    pub bwlimit: Option<String>,
    /// The remote shell (a local transfer runs none: ignored, as by rsync).
    #[arg(short = 'e', long, value_name = "COMMAND", help_heading = "Safety")]
    pub rsh: Option<String>,
    /// The remote rsync's path (a local transfer runs no remote rsync: ignored, as by rsync).
    #[arg(long, value_name = "PROGRAM", help_heading = "Safety")]
    pub rsync_path: Option<String>,
    /// Keep partially transferred files (ringio's temporaries are removed on the next run).
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Safety")]
    pub partial: bool,
    /// Write temporaries in DIR (relative: to DEST) when it is on DEST's filesystem.
    #[arg(short = 'T', long, value_name = "DIR", help_heading = "Safety")]
    pub temp_dir: Option<PathBuf>,
    /// Put all updated files into place at the end of the transfer, together.
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Safety")]
    pub delay_updates: bool,
    /// Worker threads [default: 8 a core, at least 16 and at most 64].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256), help_heading = "Safety")]
    pub threads: Option<u32>,
}

/// The `--info` flags ringio acts on (the others are accepted, as rsync's levels of output
/// ringio has nothing to say for).
#[derive(Debug, Default)]
struct Info {
    /// `backup`: "backed up X to Y".
    backup: u8,
    /// `skip`: why an entry is skipped ("X is newer", "X is uptodate" at level 2).
    skip: u8,
    /// `progress`, when given: 1 per file, 2 for the whole transfer, 0 none.
    progress: Option<u8>,
}

/// rsync's `--info` flag names.
const INFO_FLAGS: &[&str] = &[
    "backup", "copy", "del", "flist", "misc", "mount", "name", "nonreg", "progress", "remove",
    "skip", "stats", "symsafe", "all", "none",
];

impl Info {
    fn parse(values: &[String]) -> Result<Info> {
        let mut info = Info::default();
        for word in values.iter().flat_map(|v| v.split(',')) {
            let word = word.to_ascii_lowercase();
            if word == "help" {
                println!(
                    "Use OPT or OPT1 for level 1 output, OPT2 for level 2, etc.; OPT0 silences."
                );
                println!("Flags ringio acts on: backup, skip (X is newer / X is uptodate), progress (1: per file, 2: the whole transfer).");
                println!("Accepted: {}", INFO_FLAGS.join(", "));
                std::process::exit(0);
            }
            let name = word.trim_end_matches(|c: char| c.is_ascii_digit());
            let level: u8 = match &word[name.len()..] {
                "" => 1,
                digits => digits
                    .parse()
                    .map_err(|_| anyhow::anyhow!("Invalid --info level: {word}"))?,
            };
            let name = name
                .strip_prefix("no")
                .filter(|n| INFO_FLAGS.contains(n))
                .unwrap_or(name);
            if !INFO_FLAGS.contains(&name) {
                bail!("Unknown --info item: \"{word}\"");
            }
            match name {
                "progress" => info.progress = Some(level.min(2)),
                "backup" => info.backup = level,
                "skip" => info.skip = level,
                "all" => {
                    info.backup = level;
                    info.skip = level;
                }
                "none" => info = Info::default(),
                _ => {}
            }
        }
        Ok(info)
    }
}

/// rsync's `--version`, with what ringio is.
fn print_version(level: u8) {
    let ours = env!("CARGO_PKG_VERSION");
    if level < 2 {
        println!("rsync  version 3.2.7  protocol version 31");
        println!("(ringio {ours}: rsync's local transfers, on ringio's engine; no remote hosts)");
        return;
    }
    println!(
        r#"{{
  "program": "rsync",
  "version": "3.2.7",
  "protocol": "31.0",
  "ringio": "{ours}",
  "capabilities": {{
    "file_bits": 64, "inum_bits": 64, "timestamp_bits": 64,
    "long_int_bits": 64, "socketpairs": false, "symlinks": true,
    "symtimes": true, "hardlinks": true, "hardlink_specials": true,
    "hardlink_symlinks": true, "IPv6": false, "atimes": true,
    "batchfiles": false, "inplace": true, "append": false, "ACLs": true,
    "xattrs": true, "secluded_args": "optional", "iconv": false,
    "prealloc": false, "stop_at": false, "crtimes": false
  }},
  "license": "ringio's, not rsync's: ringio is a separate program"
}}"#
    );
}

/// A destination-side operand on another host.
fn remote(path: &OsStr) -> bool {
    let bytes = path.as_bytes();
    if bytes.starts_with(b"rsync://") {
        return true;
    }
    match bytes.iter().position(|&b| b == b':') {
        Some(colon) => !bytes[..colon].contains(&b'/'),
        None => false,
    }
}

/// rsync's sizes: 10, 10K (1024), 10KB (1000), 1.5M, with an optional +1/-1 ("G-1").
fn parse_size(text: &str, option: &str) -> Result<u64> {
    let bad = || anyhow::anyhow!("--{option}={text}: invalid size (try 100K, 2M, 1.5G)");
    let (body, adjust) = match text.rfind(['+', '-']) {
        Some(at) if at > 0 && (&text[at..] == "+1" || &text[at..] == "-1") => {
            (&text[..at], if &text[at..] == "+1" { 1i64 } else { -1 })
        }
        _ => (text, 0),
    };
    let lower = body.to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(digits_end);
    let num: f64 = num.parse().map_err(|_| bad())?;
    let unit = unit.trim_end_matches(['b']).to_string();
    let decimal = lower[digits_end..].ends_with("b") && !unit.is_empty();
    let base: f64 = if decimal { 1000.0 } else { 1024.0 };
    let scale = match unit.as_str() {
        "" => 1.0,
        "k" => base,
        "m" => base.powi(2),
        "g" => base.powi(3),
        "t" => base.powi(4),
        "p" => base.powi(5),
        _ => return Err(bad()),
    };
    let value = num * scale;
    if !value.is_finite() || value < 0.0 || value > u64::MAX as f64 {
        return Err(bad());
    }
    Ok((value as i128 + i128::from(adjust)).max(0) as u64)
}

/// What a manifest's names are relative to: DEST, unless DEST is the name one file is synced
/// to (a single source that is not a directory, DEST no directory and not written `DEST/`),
/// where it is DEST's directory, as for cp.
fn dest_root(plan: &SyncPlan) -> PathBuf {
    let one_file = match &plan.sources[..] {
        [only] => std::fs::metadata(&only.path).is_ok_and(|m| !m.is_dir()),
        _ => false,
    };
    if one_file && !plan.dest_is_dir && !plan.dest.is_dir() {
        return match plan.dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
    }
    plan.dest.clone()
}

/// A user or group by name or number. An unknown name is warned about and left out, as
/// rsync's receiver leaves out an unknown --usermap/--groupmap name (the entries keep theirs).
fn id_of(text: &str, user: bool) -> Option<u32> {
    if let Ok(n) = text.parse::<u32>() {
        return Some(n);
    }
    // Command-line words hold no NUL.
    let c = std::ffi::CString::new(text).ok()?;
    // SAFETY: getpwnam/getgrnam read a NUL-terminated name; the result is read before any
    // other call could reuse the static buffer (sync parses its options on one thread).
    let id = unsafe {
        if user {
            let p = libc::getpwnam(c.as_ptr());
            (!p.is_null()).then(|| (*p).pw_uid)
        } else {
            let g = libc::getgrnam(c.as_ptr());
            (!g.is_null()).then(|| (*g).gr_gid)
        }
    };
    if id.is_none() {
        let map = if user { "usermap" } else { "groupmap" };
        to_stderr!("Unknown --{map} name on receiver: {text}");
    }
    id
}

impl Args {
    /// The combinations rsync refuses (options.c's checks, in its order), whether or not
    /// the option they concern takes effect: `--suffix=/x` is refused without `-b` too.
    fn rsyncs_conflicts(&self, dirs: bool) -> Result<()> {
        let during = self.delete_during || self.delete_delay;
        let whens = [self.delete_before, during, self.delete_after];
        if whens.iter().filter(|w| **w).count() > 1 {
            bail!("You may not combine multiple --delete-WHEN options.");
        }
        let deleting = whens.contains(&true) || self.delete || self.delete_excluded;
        if deleting && !dirs {
            bail!("--delete does not work without --recursive (-r) or --dirs (-d).");
        }
        let suffix = match (&self.suffix, &self.backup_dir) {
            (Some(s), _) => s.as_str(),
            (None, Some(_)) => "",
            (None, None) => "~",
        };
        if suffix.contains('/') {
            bail!("--suffix cannot contain slashes: {suffix}");
        }
        // rsync drops leading `./` from the backup dir: what is left of `.` or `./` is no
        // backup dir, DEST itself, where an empty suffix would back a file up onto itself.
        let same_as_dest = self.backup_dir.as_ref().is_some_and(|d| {
            let mut d = d.as_os_str().as_bytes();
            while let Some(rest) = d.strip_prefix(b"./") {
                d = rest;
            }
            d.is_empty() || d == b"."
        });
        if suffix.is_empty() && same_as_dest {
            bail!("--suffix cannot be empty when --backup-dir is the same as the dest dir");
        }
        if suffix.is_empty() && self.backup_dir.is_none() {
            bail!("--suffix cannot be empty without a --backup-dir");
        }
        if self.inplace && self.delay_updates {
            bail!("--inplace cannot be used with --delay-updates");
        }
        Ok(())
    }
}

/// `--log-file`: appended to, made if missing. As rsync, a log file that cannot be opened is
/// warned about and ignored; one that is not a regular file too (opened without blocking and
/// without following a symlink, so a FIFO or a planted link neither hangs nor redirects it).
fn open_log(path: &std::path::Path, program: &str) -> Option<std::fs::File> {
    match crate::log_file::open(path) {
        Ok(file) => Some(file),
        Err(e) => {
            let why = match e.raw_os_error() {
                Some(n) => format!("{} ({n})", ringio_copy::quote::reason(&e)),
                None => e.to_string(),
            };
            to_stderr!(
                "{program}: [client] failed to open log-file {}: {why}",
                path.display()
            );
            to_stderr!("Ignoring \"log file\" setting.");
            None
        }
    }
}

/// True when the last of `on` comes after the last of `off` (options read in order).
fn last_wins(m: &ArgMatches, on: &[&str], off: &[&str]) -> bool {
    let last = |ids: &[&str]| {
        ids.iter()
            .filter(|id| {
                matches!(
                    m.value_source(id),
                    Some(clap::parser::ValueSource::CommandLine)
                )
            })
            .filter_map(|id| m.indices_of(id).and_then(|i| i.max()))
            .max()
    };
    match (last(on), last(off)) {
        (Some(a), Some(b)) => a > b,
        (Some(_), None) => true,
        _ => false,
    }
}

impl Args {
    /// The plan and the printer this command line asks for.
    pub fn plan(&self, m: &ArgMatches, program: &str) -> Result<(SyncPlan, Output)> {
        // One operand: it is listed (rsync's implied --list-only).
        let list_only = self.list_only || self.paths.len() == 1;
        if self.paths.is_empty() {
            bail!("a source and a destination are needed (see --help)");
        }
        if let Some(p) = self.paths.iter().find(|p| remote(p)) {
            bail!(
                "{:?} names a remote host: ringio syncs locally only",
                p.to_string_lossy()
            );
        }
        // Listing writes nothing: DEST (ignored, as rsync ignores it) is a path that cannot
        // exist, so every source entry is new and listed once.
        let unreachable = OsString::from("/proc/self/fd/-1/ringio-list-only");
        let (dest, sources) = match self.paths.split_last() {
            Some((_, [])) | None => (&unreachable, &self.paths[..]),
            Some((_, sources)) if list_only => (&unreachable, sources),
            Some((dest, sources)) => (dest, sources),
        };
        let sources = match &self.files_from {
            Some(list) => self.listed(list, sources)?,
            None => sources
                .iter()
                .map(|p| Source {
                    path: PathBuf::from(p),
                })
                .collect(),
        };
        let mut plan = SyncPlan::new(sources, PathBuf::from(dest));
        plan.dest_is_dir = dest.as_bytes().ends_with(b"/");
        let a = "archive";
        // With --files-from, -a does not imply -r (rsync's rule), and -d is implied.
        let recursing: &[&str] = if self.files_from.is_some() {
            &["recursive"]
        } else {
            &[a, "recursive"]
        };
        plan.recursive = last_wins(m, recursing, &["no_recursive"]);
        plan.dirs = self.dirs || self.files_from.is_some() || list_only;
        self.rsyncs_conflicts(plan.recursive || plan.dirs)?;
        let links = last_wins(m, &[a, "links"], &["no_links"]);
        // A listing shows every symlink (its target only under -l).
        plan.symlinks = if self.copy_links {
            Symlinks::Follow
        } else if links || list_only {
            Symlinks::Keep
        } else {
            Symlinks::Skip
        };
        plan.copy_unsafe_links = self.copy_unsafe_links;
        plan.safe_links = self.safe_links;
        plan.keep_dirlinks = self.keep_dirlinks;
        plan.hard_links = self.hard_links;
        plan.perms = last_wins(m, &[a, "perms", "acls"], &["no_perms"]);
        plan.executability = self.executability;
        plan.owner = last_wins(m, &[a, "owner"], &["no_owner"]);
        plan.group = last_wins(m, &[a, "group"], &["no_group"]);
        if let Some(spec) = &self.chown {
            let (user, group) = spec.split_once(':').unwrap_or((spec, ""));
            plan.chown = (
                (!user.is_empty()).then(|| id_of(user, true)).flatten(),
                (!group.is_empty()).then(|| id_of(group, false)).flatten(),
            );
        }
        let d = [a, "devices_specials"];
        let no_d = "no_devices_specials";
        plan.devices = last_wins(m, &[d[0], d[1], "devices"], &[no_d, "no_devices"]) || list_only;
        plan.specials =
            last_wins(m, &[d[0], d[1], "specials"], &[no_d, "no_specials"]) || list_only;
        plan.times = last_wins(m, &[a, "times"], &["no_times"]);
        plan.omit_dir_times = self.omit_dir_times;
        plan.atimes = self.atimes;
        plan.acls = self.acls;
        plan.xattrs = self.xattrs;
        plan.sparse = self.sparse;
        plan.one_file_system = self.one_file_system > 0;
        plan.skip_mount_points = self.one_file_system > 1;
        plan.fsync = self.fsync;
        plan.open_noatime = self.open_noatime;
        plan.inplace = self.inplace;
        let window_ns = match self.modify_window {
            Some(n) if n > 0 => (n as u64).saturating_mul(1_000_000_000),
            _ => 0,
        };
        plan.quick = if self.checksum {
            QuickCheck::Checksum
        } else if self.ignore_times {
            QuickCheck::Never
        } else if self.size_only {
            QuickCheck::SizeOnly
        } else {
            QuickCheck::SizeAndTime { window_ns }
        };
        plan.update = self.update;
        plan.existing = self.existing;
        plan.ignore_existing = self.ignore_existing;
        plan.max_size = self
            .max_size
            .as_deref()
            .map(|s| parse_size(s, "max-size"))
            .transpose()?;
        plan.min_size = self
            .min_size
            .as_deref()
            .map(|s| parse_size(s, "min-size"))
            .transpose()?;
        plan.delete = if self.delete_before {
            Some(DeleteWhen::Before)
        } else if self.delete_after {
            Some(DeleteWhen::After)
        } else if self.delete_delay {
            Some(DeleteWhen::Delay)
        } else if self.delete || self.delete_during || self.delete_excluded {
            Some(DeleteWhen::During)
        } else {
            None
        };
        // rsync: a negative limit (old clients' way to write 0) allows no deletion either.
        plan.max_delete = self.max_delete.map(|n| n.max(0) as u64);
        if plan.max_delete.is_some() && plan.delete.is_none() {
            // rsync: --max-delete alone deletes nothing.
        }
        plan.force = self.force;
        plan.ignore_errors = self.ignore_errors;
        plan.remove_source_files = self.remove_source_files;
        plan.filters = Arc::new(self.filters(m)?);
        if self.backup || self.backup_dir.is_some() {
            let suffix = self.suffix.clone().unwrap_or_else(|| {
                if self.backup_dir.is_some() {
                    String::new()
                } else {
                    "~".into()
                }
            });
            if self.backup_dir.is_none() {
                // rsync: backups beside the files imply -O, and a deletion spares them.
                plan.omit_dir_times = true;
            }
            plan.backup = Some(Backups {
                dir: self.backup_dir.clone(),
                suffix,
            });
        }
        plan.dry_run = self.dry_run || list_only;
        plan.mkpath = self.mkpath;
        for text in &self.chmod {
            plan.chmod
                .extend(ringio_copy::sync::chmod::parse(text).map_err(|e| anyhow::anyhow!(e))?);
        }
        plan.super_user = self.super_;
        plan.fake_super = self.fake_super;
        let kinds = [
            (&self.compare_dest, AltKind::Compare),
            (&self.copy_dest, AltKind::Copy),
            (&self.link_dest, AltKind::Link),
        ];
        let given: Vec<_> = kinds.iter().filter(|(dirs, _)| !dirs.is_empty()).collect();
        if given.len() > 1 {
            bail!("You may not mix --compare-dest, --copy-dest, and --link-dest.");
        }
        if let Some((dirs, kind)) = given.first() {
            if dirs.len() > 20 {
                bail!("ERROR: at most 20 basis directories may be specified");
            }
            plan.alt_dests = dirs.to_vec();
            plan.alt_kind = *kind;
        }
        plan.prune_empty_dirs = self.prune_empty_dirs;
        plan.relative = last_wins(m, &["relative"], &["no_relative"])
            || (self.files_from.is_some() && !self.no_relative);
        plan.no_implied_dirs = self.no_implied_dirs;
        plan.temp_dir = self.temp_dir.clone();
        plan.delay_updates = self.delay_updates && !self.inplace;
        if let Some(rate) = &self.bwlimit {
            parse_size(rate, "bwlimit")?;
        }
        let info = Info::parse(&self.info)?;
        let mut out = Output::new(program);
        out.verbose = if self.quiet { 0 } else { self.verbose };
        out.quiet = self.quiet;
        let format = match (&self.out_format, self.itemize_changes, self.verbose) {
            (Some(f), _, _) => Some(f.clone()),
            (None, i, _) if i > 0 => Some("%i %n%L".to_string()),
            (None, _, v) if v > 0 && !self.quiet => Some("%n%L".to_string()),
            _ => None,
        };
        out.format = format
            .map(|f| OutFormat::parse(&f))
            .transpose()
            .map_err(|e| anyhow::anyhow!(e))?;
        out.list_only = list_only;
        out.list_targets = links || self.copy_links;
        out.progress = match info.progress {
            Some(2) => Progress::Total,
            Some(1..) => Progress::PerFile,
            Some(0) => Progress::None,
            None if self.progress || self.partial_progress => Progress::PerFile,
            None => Progress::None,
        };
        // --progress names each file (rsync raises --info=name to 1 for it).
        if out.format.is_none() && out.progress == Progress::PerFile && !self.quiet {
            out.format = Some(OutFormat::parse("%n%L").map_err(|e| anyhow::anyhow!(e))?);
        }
        out.all = self.itemize_changes > 1 || self.verbose > 1;
        out.backups = info.backup > 0 || self.verbose > 1;
        out.skips = info.skip.max(u8::from(out.verbose > 1));
        if let Some(path) = &self.log_file {
            out.log = open_log(path, program).map(Mutex::new);
        }
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        // Cold, a walk waits on the disk for each directory and inode it reads: more workers
        // than cores keep more of those reads in flight (docs/bench/2026-11-25-sync.md).
        plan.threads = match self.threads {
            Some(n) => n as usize,
            None => (cores * 8).clamp(16, 64),
        };
        plan.hashing = self.hashing(&plan)?;
        if !self.tee.is_empty() && self.remove_source_files {
            bail!("--tee with --remove-source-files: a source could be removed before every DEST has it");
        }
        Ok((plan, out))
    }

    /// `--hash`, `--manifest`, `--manifest-format`, for a manifest of DEST.
    fn hashing(&self, plan: &SyncPlan) -> Result<Option<ringio_copy::Hashing>> {
        let algo = crate::verify::algo(self.hash.as_deref()).map_err(anyhow::Error::msg)?;
        let format =
            crate::verify::format(self.manifest_format.as_deref()).map_err(anyhow::Error::msg)?;
        let writes = self.manifest.is_some() || format == Some(Format::Mhl);
        if format.is_some() && !writes {
            bail!("--manifest-format needs --manifest FILE (mhl alone writes into DEST)");
        }
        if algo.is_some() && !writes {
            bail!("--hash needs --manifest FILE or --manifest-format=mhl");
        }
        if !writes {
            return Ok(None);
        }
        if plan.dry_run {
            bail!("--manifest lists what DEST holds: it cannot be written by a dry run (-n)");
        }
        let stdout = self.manifest.as_ref().is_some_and(|m| m.as_os_str() == "-");
        if stdout && (self.verbose > 0 || self.itemize_changes > 0 || self.out_format.is_some()) {
            bail!("--manifest - writes to standard output: it cannot be shared with -v, -i or --out-format");
        }
        let request = ringio_copy::HashRequest {
            algo: algo.unwrap_or(ringio_copy::digest::Algo::Xxh128),
            format: format.unwrap_or_default(),
            manifest: self.manifest.clone(),
        };
        let sources: Vec<&std::path::Path> =
            plan.sources.iter().map(|s| s.path.as_path()).collect();
        let force = if self.force {
            Ok("--force")
        } else {
            Err("--force")
        };
        request
            .settle(dest_root(plan), &sources, force)
            .map(Some)
            .map_err(anyhow::Error::msg)
    }

    /// `--files-from`: the listed paths, each below the one SRC (`SRC/./PATH`, so that -R keeps
    /// PATH). A listed `dir/` (when not recursing) brings the directory's entries too.
    fn listed(&self, list: &std::path::Path, sources: &[OsString]) -> Result<Vec<Source>> {
        let [src] = sources else {
            bail!("--files-from takes exactly one source directory (SRC), then DEST");
        };
        let text = if list.as_os_str() == "-" {
            let mut text = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut text)
                .context("cannot read the --files-from list from stdin")?;
            text
        } else {
            ringio_copy::read_regular_path(list).map_err(|e| {
                anyhow::anyhow!(
                    "failed to open files-from file {}: {}",
                    list.display(),
                    ringio_copy::quote::reason(&e)
                )
            })?
        };
        // rsync's read_line with RL_DUMP_COMMENTS: lines end at CR or LF (NUL with -0), and
        // a line starting with '#' or ';' is a comment.
        let end = |b: &u8| {
            if self.from0 {
                *b == b'\0'
            } else {
                matches!(b, b'\n' | b'\r')
            }
        };
        let base = src.as_bytes();
        let mut out = Vec::new();
        for line in text.split(end) {
            if line.starts_with(b"#") || line.starts_with(b";") {
                continue;
            }
            let path: &[u8] = {
                let mut p = line;
                while let Some(rest) = p.strip_prefix(b"/") {
                    p = rest;
                }
                p
            };
            if path.is_empty() {
                continue;
            }
            // No ".." climbs out of SRC: rsync's sanitize_path collapses them.
            let path = ringio_copy::sync::sanitize_listed(path, !self.no_relative);
            let path = &path[..];
            let mut full = base.to_vec();
            full.extend_from_slice(b"/./");
            full.extend_from_slice(path);
            out.push(Source {
                path: PathBuf::from(OsStr::from_bytes(&full)),
            });
            // "dir/": its own entries come too (a recursive run brings them anyway).
            let recursive_flag = self.recursive && !self.no_recursive;
            if path.ends_with(b"/") && !recursive_flag {
                let dir = PathBuf::from(OsStr::from_bytes(&full));
                if let Ok(entries) = std::fs::read_dir(&dir) {
                    let mut names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
                    names.sort();
                    for name in names {
                        let mut entry = full.clone();
                        entry.extend_from_slice(name.as_bytes());
                        out.push(Source {
                            path: PathBuf::from(OsStr::from_bytes(&entry)),
                        });
                    }
                }
            }
        }
        Ok(out)
    }

    /// The filter rules, in command-line order.
    fn filters(&self, m: &ArgMatches) -> Result<FilterRules> {
        let mut rules = FilterRules::new();
        rules.set_from0(self.from0);
        let mut steps: Vec<(usize, &str, OsString)> = Vec::new();
        for id in ["exclude", "include", "filter"] {
            if let (Some(values), Some(indices)) = (m.get_many::<OsString>(id), m.indices_of(id)) {
                for (v, i) in values.zip(indices) {
                    steps.push((i, id, v.clone()));
                }
            }
        }
        for id in ["exclude_from", "include_from"] {
            if let (Some(values), Some(indices)) = (m.get_many::<PathBuf>(id), m.indices_of(id)) {
                for (v, i) in values.zip(indices) {
                    steps.push((i, id, v.clone().into_os_string()));
                }
            }
        }
        let given = self.rsync_filter > 0;
        if let Some(i) = m
            .indices_of("rsync_filter")
            .and_then(|mut i| i.next())
            .filter(|_| given)
        {
            steps.push((i, "filter", OsString::from("dir-merge /.rsync-filter")));
            if self.rsync_filter > 1 {
                steps.push((i, "filter", OsString::from("- .rsync-filter")));
            }
        }
        steps.sort_by_key(|(i, _, _)| *i);
        if self.cvs_exclude {
            rules.cvs_exclude();
        }
        for (_, id, value) in steps {
            let bytes = value.as_bytes();
            match id {
                "exclude" => rules.add_exclude(bytes),
                "include" => rules.add_include(bytes),
                "filter" => rules.add_rule(bytes).map_err(|e| anyhow::anyhow!("{e}"))?,
                "exclude_from" => rules
                    .read_from(std::path::Path::new(&value), ListKind::Exclude, self.from0)
                    .map_err(FileIo::from_filter)?,
                _ => rules
                    .read_from(std::path::Path::new(&value), ListKind::Include, self.from0)
                    .map_err(FileIo::from_filter)?,
            }
        }
        let deleting = self.delete
            || self.delete_before
            || self.delete_during
            || self.delete_after
            || self.delete_delay;
        let backups_beside =
            (self.backup || self.backup_dir.is_some()) && self.backup_dir.is_none();
        if backups_beside && deleting && !self.delete_excluded {
            let suffix = self.suffix.clone().unwrap_or_else(|| "~".into());
            rules
                .add_rule(format!("P *{suffix}").as_bytes())
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        rules.set_delete_excluded(self.delete_excluded);
        Ok(rules)
    }
}

/// Runs `ringio sync` (or `rsync`): rsync's exit code.
pub fn run(args: &Args, m: &ArgMatches, program: &str) -> Result<i32> {
    if args.version > 0 {
        print_version(args.version);
        return Ok(0);
    }
    let (plan, out) = match args.plan(m, program) {
        Ok(p) => p,
        Err(e) if e.is::<FileIo>() => {
            to_stderr!("{program}: {e:#}");
            to_stderr!("{program} error: error in file IO (code 11)");
            return Ok(11);
        }
        Err(e) => {
            to_stderr!("{program}: {e:#}");
            to_stderr!("{program} error: syntax or usage error (code {SYNTAX})");
            return Ok(SYNTAX);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    crate::signals::stop_on_signals(&stop)?;
    // rsync ends on a hangup as on SIGINT and SIGTERM (exit 20, nothing partial left).
    signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&stop))
        .context("cannot install a signal handler")?;
    let started = Instant::now();
    if out.verbose > 0 || (out.progress == Progress::PerFile && !out.list_only) {
        out.say("sending incremental file list");
    }
    // `--tee`: each DEST is a sync of its own, side by side (the source is read from the
    // device once: the others' reads find its pages in the cache); only the first prints.
    let tees: Vec<(PathBuf, SyncPlan)> = args
        .tee
        .iter()
        .map(|dir| {
            let mut p = plan.clone();
            p.dest = dir.clone();
            let base = dest_root(&p);
            if let Some(h) = &mut p.hashing {
                h.base = base;
                h.manifest = None;
            }
            (dir.clone(), p)
        })
        .collect();
    let quiet = Output::new(program);
    let (mut outcome, tee_outcomes) = std::thread::scope(|s| {
        let others: Vec<_> = tees
            .iter()
            .map(|(_, p)| s.spawn(|| ringio_copy::sync::sync(p, &quiet, &stop)))
            .collect();
        let outcome = ringio_copy::sync::sync(&plan, &out, &stop);
        let others: Vec<_> = others
            .into_iter()
            .map(|h| h.join().expect("a tee's sync panicked"))
            .collect();
        (outcome, others)
    });
    let failed = [&outcome]
        .into_iter()
        .chain(&tee_outcomes)
        .any(|o| !matches!(o.code, 0 | 24));
    if let (Some(_), Some(hashing), true) = (&outcome.hashes, &plan.hashing, failed) {
        // No manifest vouches for a sync that failed (24, files that vanished, is no failure).
        let written = match &hashing.manifest {
            Some(file) => file.display().to_string(),
            None => format!("(no ascmhl generation in {})", hashing.base.display()),
        };
        to_stderr!("{program}: the sync failed: no manifest written {written}");
    } else if let (Some(listing), Some(hashing)) = (outcome.hashes.take(), &plan.hashing) {
        if crate::verify::write_manifest(hashing, &listing, program).is_some() && outcome.code == 0
        {
            outcome.code = 11;
        }
        for ((dir, p), tee) in tees.iter().zip(&tee_outcomes) {
            let Some(theirs) = &tee.hashes else { continue };
            if let Some(h) = p.hashing.as_ref().filter(|h| h.format == Format::Mhl) {
                if crate::verify::write_manifest(h, theirs, program).is_some() {
                    outcome.code = outcome.code.max(11);
                }
            }
            if let Some(why) = crate::verify::differing_hash(&listing, theirs) {
                to_stderr!(
                    "{program}: {} and {}: {why}",
                    plan.dest.display(),
                    dir.display()
                );
                outcome.code = outcome.code.max(23);
            }
        }
    }
    for ((dir, _), tee) in tees.iter().zip(&tee_outcomes) {
        if tee.code != 0 {
            to_stderr!(
                "{program}: the sync to {} ended with code {} (above); the others went on",
                dir.display(),
                tee.code
            );
            if outcome.code == 0 {
                outcome.code = tee.code;
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    if args.stats && !args.quiet {
        for line in outcome.stats.report(seconds) {
            out.say(&line);
        }
    }
    if (out.verbose > 0 || args.stats) && !args.quiet {
        for line in outcome
            .stats
            .totals(seconds, plan.dry_run && !out.list_only)
        {
            out.say(&line);
        }
    }
    out.flush();
    if outcome.code != 0 {
        let why = match outcome.code {
            1 => "syntax or usage error",
            3 => "errors selecting input/output files, dirs",
            11 => "error in file IO",
            20 => "received SIGINT, SIGTERM, or SIGHUP",
            23 => "some files/attrs were not transferred (see previous errors)",
            24 => "some files vanished before they could be transferred",
            25 => "the --max-delete limit stopped deletions",
            _ => "error",
        };
        to_stderr!("{program} error: {why} (code {})", outcome.code);
    }
    Ok(outcome.code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_as_rsync_reads_them() {
        assert_eq!(parse_size("10", "x").unwrap(), 10);
        assert_eq!(parse_size("1k", "x").unwrap(), 1024);
        assert_eq!(parse_size("1KB", "x").unwrap(), 1000);
        assert_eq!(parse_size("1.5M", "x").unwrap(), 1_572_864);
        assert_eq!(parse_size("1G-1", "x").unwrap(), (1 << 30) - 1);
        assert!(parse_size("ten", "x").is_err());
        assert!(parse_size("1Q", "x").is_err());
        assert!(parse_size("99999999999999999999999P", "x").is_err());
    }

    #[test]
    fn remote_operands() {
        assert!(remote(OsStr::new("host:path")));
        assert!(remote(OsStr::new("user@host:/p")));
        assert!(remote(OsStr::new("rsync://h/m")));
        assert!(!remote(OsStr::new("./a:b")));
        assert!(!remote(OsStr::new("/x/y")));
    }
}
