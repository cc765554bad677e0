//! `ringio sync` (and ringio run under the name `rsync`): rsync's local command line, turned
//! into a [`SyncPlan`] and run by the copy crate's sync engine.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{ArgAction, ArgMatches};

use ringio_copy::manifest::Format;
use ringio_copy::sync::item::OutFormat;
use ringio_copy::sync::{
    FilterOption, ManifestRequest, Output, Progress, SyncPlan, SyncPlanBuilder, SyncPlanError,
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
    /// Print one JSON document on standard output at the end of the run: the counts and sizes
    /// (--stats' figures), the time, the exit status, and every error as an object (its
    /// message, and its op, path, errno and reason as fields, as cp --json's error_details).
    /// Standard output is the document's alone: the lines of -v, -i, --out-format,
    /// --progress, --list-only and --stats go to standard error. A command line refused
    /// before the run prints no document (its exit status says why).
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Output")]
    pub json: bool,
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
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=ringio_copy::sync::MAX_THREADS as i64), help_heading = "Safety")]
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
    /// The plan and the printer this command line asks for: the options as the command line
    /// left them (a later `--no-X` undoes an earlier one, or `-a`'s share of it) go to the
    /// copy crate's [`SyncPlan::builder`], which judges them as rsync does.
    pub fn plan(&self, m: &ArgMatches, program: &str) -> Result<(SyncPlan, Output)> {
        let plan = self.builder(m).build()?;
        let info = Info::parse(&self.info)?;
        let out = self.output(&plan, &info, m, program)?;
        Ok((plan, out))
    }

    /// The builder, with every option this command line gives.
    fn builder(&self, m: &ArgMatches) -> SyncPlanBuilder {
        let a = "archive";
        let d = [a, "devices_specials"];
        let no_d = "no_devices_specials";
        let recursive = last_wins(m, &["recursive"], &["no_recursive"]);
        let deleting = [
            self.delete,
            self.delete_before,
            self.delete_during,
            self.delete_after,
            self.delete_delay,
            self.delete_excluded,
        ];
        SyncPlan::builder(self.paths.iter().map(PathBuf::from).collect())
            .list_only(self.list_only)
            .files_from(self.files_from.clone())
            .from0(self.from0)
            .recursive(recursive)
            .archive_recursive(last_wins(m, &[a], &["no_recursive"]))
            .dirs(self.dirs)
            .relative(last_wins(m, &["relative"], &["no_relative"]))
            .no_relative(self.no_relative)
            .links(self.links(m))
            .copy_links(self.copy_links)
            .copy_unsafe_links(self.copy_unsafe_links)
            .safe_links(self.safe_links)
            .keep_dirlinks(self.keep_dirlinks)
            .hard_links(self.hard_links)
            .perms(last_wins(m, &[a, "perms", "acls"], &["no_perms"]))
            .executability(self.executability)
            .owner(last_wins(m, &[a, "owner"], &["no_owner"]))
            .group(last_wins(m, &[a, "group"], &["no_group"]))
            .chown(self.chown.clone())
            .id_lookup(id_of)
            .devices(last_wins(
                m,
                &[d[0], d[1], "devices"],
                &[no_d, "no_devices"],
            ))
            .specials(last_wins(
                m,
                &[d[0], d[1], "specials"],
                &[no_d, "no_specials"],
            ))
            .times(last_wins(m, &[a, "times"], &["no_times"]))
            .omit_dir_times(self.omit_dir_times)
            .atimes(self.atimes)
            .acls(self.acls)
            .xattrs(self.xattrs)
            .sparse(self.sparse)
            .one_file_system(self.one_file_system)
            .fsync(self.fsync)
            .open_noatime(self.open_noatime)
            .inplace(self.inplace)
            .checksum(self.checksum)
            .ignore_times(self.ignore_times)
            .size_only(self.size_only)
            .modify_window(self.modify_window)
            .update(self.update)
            .existing(self.existing)
            .ignore_existing(self.ignore_existing)
            .max_size(self.max_size.clone())
            .min_size(self.min_size.clone())
            .delete(deleting[0])
            .delete_before(deleting[1])
            .delete_during(deleting[2])
            .delete_after(deleting[3])
            .delete_delay(deleting[4])
            .delete_excluded(deleting[5])
            .max_delete(self.max_delete)
            .force(self.force)
            .ignore_errors(self.ignore_errors)
            .remove_source_files(self.remove_source_files)
            .filters(self.filter_options(m))
            .cvs_exclude(self.cvs_exclude)
            .backup(self.backup)
            .backup_dir(self.backup_dir.clone())
            .suffix(self.suffix.clone())
            .dry_run(self.dry_run)
            .mkpath(self.mkpath)
            .chmod(self.chmod.clone())
            .super_user(self.super_)
            .fake_super(self.fake_super)
            .compare_dest(self.compare_dest.clone())
            .copy_dest(self.copy_dest.clone())
            .link_dest(self.link_dest.clone())
            .prune_empty_dirs(self.prune_empty_dirs)
            .no_implied_dirs(self.no_implied_dirs)
            .temp_dir(self.temp_dir.clone())
            .delay_updates(self.delay_updates)
            .bwlimit(self.bwlimit.clone())
            .threads(self.threads.map(|n| n as usize))
            .manifest(ManifestRequest {
                hash: self.hash.clone(),
                format: self.manifest_format.clone(),
                manifest: self.manifest.clone(),
            })
            .lines_on_stdout(
                self.verbose > 0
                    || self.itemize_changes > 0
                    || self.out_format.is_some()
                    || self.json,
            )
            .tee(!self.tee.is_empty())
    }

    /// The printer: what is said, in which format, and the log file.
    fn output(
        &self,
        plan: &SyncPlan,
        info: &Info,
        m: &ArgMatches,
        program: &str,
    ) -> Result<Output> {
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
        out.list_only = plan.list_only();
        out.list_targets = self.links(m) || self.copy_links;
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
        if self.json {
            out.json_report();
        }
        Ok(out)
    }

    /// `-l`, as the command line left it (`-a` gives it, `--no-l` takes it back).
    fn links(&self, m: &ArgMatches) -> bool {
        last_wins(m, &["archive", "links"], &["no_links"])
    }

    /// The filter options, in command-line order (`-F` where it was first given).
    fn filter_options(&self, m: &ArgMatches) -> Vec<FilterOption> {
        let mut steps: Vec<(usize, FilterOption)> = Vec::new();
        for id in ["exclude", "include", "filter"] {
            if let (Some(values), Some(indices)) = (m.get_many::<OsString>(id), m.indices_of(id)) {
                for (v, i) in values.zip(indices) {
                    let bytes = v.as_bytes().to_vec();
                    steps.push((
                        i,
                        match id {
                            "exclude" => FilterOption::Exclude(bytes),
                            "include" => FilterOption::Include(bytes),
                            _ => FilterOption::Rule(bytes),
                        },
                    ));
                }
            }
        }
        for id in ["exclude_from", "include_from"] {
            if let (Some(values), Some(indices)) = (m.get_many::<PathBuf>(id), m.indices_of(id)) {
                for (v, i) in values.zip(indices) {
                    steps.push((
                        i,
                        match id {
                            "exclude_from" => FilterOption::ExcludeFrom(v.clone()),
                            _ => FilterOption::IncludeFrom(v.clone()),
                        },
                    ));
                }
            }
        }
        let given = self.rsync_filter > 0;
        if let Some(i) = m
            .indices_of("rsync_filter")
            .and_then(|mut i| i.next())
            .filter(|_| given)
        {
            steps.push((i, FilterOption::Rule(b"dir-merge /.rsync-filter".to_vec())));
            if self.rsync_filter > 1 {
                steps.push((i, FilterOption::Rule(b"- .rsync-filter".to_vec())));
            }
        }
        steps.sort_by_key(|(i, _)| *i);
        steps.into_iter().map(|(_, step)| step).collect()
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
        Err(e) if e.is::<SyncPlanError>() => {
            let refusal = e.downcast_ref::<SyncPlanError>().expect("checked");
            to_stderr!("{program}: {refusal}");
            to_stderr!(
                "{program} error: {} (code {})",
                refusal.summary(),
                refusal.code()
            );
            return Ok(refusal.code());
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
        .map(|dir| (dir.clone(), plan.for_tee(dir.clone())))
        .collect();
    // Each tee's printer prints its errors only (and keeps them for --json).
    let tee_outs: Vec<Output> = tees
        .iter()
        .map(|_| {
            let mut quiet = Output::new(program);
            if args.json {
                quiet.json_report();
            }
            quiet
        })
        .collect();
    let (mut outcome, tee_outcomes) = std::thread::scope(|s| {
        let others: Vec<_> = tees
            .iter()
            .zip(&tee_outs)
            .map(|((_, p), quiet)| s.spawn(|| ringio_copy::sync::sync(p, quiet, &stop)))
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
    if let (Some(_), Some(hashing), true) = (&outcome.hashes, plan.hashing(), failed) {
        // No manifest vouches for a sync that failed (24, files that vanished, is no failure).
        let written = match &hashing.manifest {
            Some(file) => file.display().to_string(),
            None => format!("(no ascmhl generation in {})", hashing.base.display()),
        };
        out.error(&format!("the sync failed: no manifest written {written}"));
    } else if let (Some(listing), Some(hashing)) = (outcome.hashes.take(), plan.hashing()) {
        if crate::verify::write_manifest(hashing, &listing, &|m, e| out.fail_worded(m, e)).is_some()
            && outcome.code == 0
        {
            outcome.code = 11;
        }
        for ((dir, p), tee) in tees.iter().zip(&tee_outcomes) {
            let Some(theirs) = &tee.hashes else { continue };
            if let Some(h) = p.hashing().filter(|h| h.format == Format::Mhl) {
                if crate::verify::write_manifest(h, theirs, &|m, e| out.fail_worded(m, e)).is_some()
                {
                    outcome.code = outcome.code.max(11);
                }
            }
            if let Some(why) = crate::verify::differing_hash(&listing, theirs) {
                out.error(&format!(
                    "{} and {}: {why}",
                    plan.dest().display(),
                    dir.display()
                ));
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
            .totals(seconds, plan.dry_run() && !out.list_only)
        {
            out.say(&line);
        }
    }
    out.flush();
    if args.json {
        let main = (plan.dest(), &outcome, &out);
        let others = tees.iter().zip(&tee_outcomes).zip(&tee_outs);
        let each: Vec<Destination<'_>> = std::iter::once(main)
            .chain(others.map(|(((dir, _), o), out)| (dir.as_path(), o, out)))
            .map(|(dest, outcome, out)| Destination {
                dest,
                outcome,
                errors: out.take_errors(),
            })
            .collect();
        print_json(&each, plan.hashing(), seconds, plan.dry_run());
    }
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

/// One destination's part of `--json`: DEST's (first, its code the run's) or a tee's.
struct Destination<'a> {
    dest: &'a std::path::Path,
    outcome: &'a ringio_copy::sync::Outcome,
    /// The errors its printer kept.
    errors: Vec<serde_json::Value>,
}

/// `--json`: one object on stdout, with cp --json's names where they mean the same: `files`
/// and `bytes` (the regular files written and their bytes), `errors` (how many) with
/// `error_messages` and `error_details` (each error's `message`, `op`, `path`, `errno` and
/// `reason`: `CopyError::to_json`; `op` is `vanished` for a source file that vanished, null
/// for an error that is no failed call), `hash`, `destinations`, `phases` and `exit`; and
/// sync's own: `seconds`, `dry_run` and `stats` (`--stats`' figures).
fn print_json(
    each: &[Destination<'_>],
    hashing: Option<&ringio_copy::Hashing>,
    seconds: f64,
    dry_run: bool,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let main = &each[0].outcome;
    let written = |o: &ringio_copy::sync::Outcome| {
        (
            o.stats.transferred.load(Relaxed),
            o.stats.transferred_size.load(Relaxed),
        )
    };
    let (files, bytes) = written(main);
    let errors: Vec<&serde_json::Value> = each.iter().flat_map(|d| &d.errors).collect();
    let destinations: Vec<serde_json::Value> = each
        .iter()
        .map(|d| {
            let (files, bytes) = written(d.outcome);
            serde_json::json!({
                "dest": d.dest.to_string_lossy(),
                "files": files,
                "bytes": bytes,
                "errors": d.errors.len(),
                "exit": d.outcome.code,
            })
        })
        .collect();
    let doc = serde_json::json!({
        "files": files,
        "bytes": bytes,
        "errors": errors.len(),
        "error_messages": errors.iter().map(|e| &e["message"]).collect::<Vec<_>>(),
        "error_details": errors,
        "hash": hashing.map(|h| h.algo.to_string()),
        "destinations": destinations,
        "phases": [{
            "phase": "sync",
            "bytes": bytes,
            "seconds": seconds,
            "bytes_per_second": (bytes as f64 / seconds.max(1e-6)) as u64,
        }],
        "seconds": seconds,
        "dry_run": dry_run,
        "stats": main.stats.to_json(),
        "exit": main.code,
    });
    // A closed stdout loses the document, never the exit status.
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout().lock(), "{doc}");
}
