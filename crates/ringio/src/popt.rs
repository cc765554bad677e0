//! rsync's command line before clap sees it, read as rsync 3.2.7's popt reads it.
//!
//! Every option of rsync's option table is known here, with what ringio does with it: clap
//! reads the options ringio carries out; `--no-X` undoes what came before it; the options a
//! local transfer does not use (compression, the remote shell's and the daemon's settings) are
//! checked as rsync checks them and then dropped; the few rsync options ringio does not carry
//! out are refused by name (docs/CONFORMANCE.md lists them). popt's rules hold: an option may
//! be given any number of times, the last value wins, a later `--no-X` undoes `X` and a later
//! `X` redoes it, no long name may be abbreviated, and options may follow operands.
//!
//! [`preparse`] hands clap the options it is to read, each spelled in full (`--name=VALUE`),
//! then `--` and the operands.

use ringio_copy::sync::SizeArg;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

/// What ringio does with an rsync option that clap does not read itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Meaning {
    /// Read by clap under this long name (or this letter when it has none).
    Ours,
    /// Read by clap as this other long option (`--old-dirs` as `--dirs`).
    As(&'static str),
    /// Undoes the earlier options that set these variables; clap also reads it when it is
    /// one of ringio's options (a `--no-X` that must also undo `-a`'s share).
    Undo(&'static [&'static str]),
    /// Checked as rsync checks it, then dropped: it changes nothing in a local transfer.
    Ignored,
    /// rsync's meaning is not carried out by ringio: refused, exit 1.
    Unsupported,
}

use Meaning::{As, Ignored, Ours, Undo, Unsupported};

/// One entry of rsync's option table (options.c's `long_options`, 3.2.7).
struct Opt {
    long: Option<&'static str>,
    short: Option<u8>,
    /// Takes an argument (POPT_ARG_STRING or POPT_ARG_INT).
    arg: Arg,
    /// The variable it sets (rsync's name), which `--no-X` and repeats act on.
    var: &'static str,
    meaning: Meaning,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arg {
    None,
    Str,
    /// POPT_ARG_INT: a C int, checked as popt checks it.
    Int,
}

const fn o(long: &'static str, short: u8, arg: Arg, var: &'static str, meaning: Meaning) -> Opt {
    Opt {
        long: if long.is_empty() { None } else { Some(long) },
        short: if short == 0 { None } else { Some(short) },
        arg,
        var,
        meaning,
    }
}

use Arg::{Int, Str};
const N: Arg = Arg::None;

/// rsync 3.2.7's options, in its table's order.
#[rustfmt::skip]
static TABLE: &[Opt] = &[
    o("help", 0, N, "help", Ours),
    o("version", b'V', N, "version", Ours),
    o("verbose", b'v', N, "verbose", Ours),
    o("no-verbose", 0, N, "verbose", Undo(&["verbose"])),
    o("no-v", 0, N, "verbose", Undo(&["verbose"])),
    o("info", 0, Str, "info", Ours),
    o("debug", 0, Str, "debug", Ours),
    o("stderr", 0, Str, "stderr", Ignored),
    o("msgs2stderr", 0, N, "msgs2stderr", Ignored),
    o("no-msgs2stderr", 0, N, "msgs2stderr", Undo(&["msgs2stderr"])),
    o("quiet", b'q', N, "quiet", Ours),
    o("motd", 0, N, "motd", Ignored),
    o("no-motd", 0, N, "motd", Undo(&["motd"])),
    o("stats", 0, N, "stats", Ours),
    o("human-readable", b'h', N, "human", Ours),
    o("no-human-readable", 0, N, "human", Undo(&["human"])),
    o("no-h", 0, N, "human", Undo(&["human"])),
    o("dry-run", b'n', N, "dry_run", Ours),
    o("archive", b'a', N, "archive", Ours),
    o("recursive", b'r', N, "recurse", Ours),
    o("no-recursive", 0, N, "recurse", Undo(&["recurse"])),
    o("no-r", 0, N, "recurse", Undo(&["recurse"])),
    o("inc-recursive", 0, N, "inc_recurse", Ignored),
    o("no-inc-recursive", 0, N, "inc_recurse", Undo(&["inc_recurse"])),
    o("i-r", 0, N, "inc_recurse", Ignored),
    o("no-i-r", 0, N, "inc_recurse", Undo(&["inc_recurse"])),
    o("dirs", b'd', N, "xfer_dirs", Ours),
    o("no-dirs", 0, N, "xfer_dirs", Undo(&["xfer_dirs"])),
    o("no-d", 0, N, "xfer_dirs", Undo(&["xfer_dirs"])),
    o("old-dirs", 0, N, "old_dirs", Unsupported),
    o("old-d", 0, N, "old_dirs", Unsupported),
    o("perms", b'p', N, "perms", Ours),
    o("no-perms", 0, N, "perms", Undo(&["perms"])),
    o("no-p", 0, N, "perms", Undo(&["perms"])),
    o("executability", b'E', N, "executability", Ours),
    o("acls", b'A', N, "acls", Ours),
    o("no-acls", 0, N, "acls", Undo(&["acls"])),
    o("no-A", 0, N, "acls", Undo(&["acls"])),
    o("xattrs", b'X', N, "xattrs", Ours),
    o("no-xattrs", 0, N, "xattrs", Undo(&["xattrs"])),
    o("no-X", 0, N, "xattrs", Undo(&["xattrs"])),
    o("times", b't', N, "mtimes", Ours),
    o("no-times", 0, N, "mtimes", Undo(&["mtimes"])),
    o("no-t", 0, N, "mtimes", Undo(&["mtimes"])),
    o("atimes", b'U', N, "atimes", Ours),
    o("no-atimes", 0, N, "atimes", Undo(&["atimes"])),
    o("no-U", 0, N, "atimes", Undo(&["atimes"])),
    o("open-noatime", 0, N, "open_noatime", Ours),
    o("no-open-noatime", 0, N, "open_noatime", Undo(&["open_noatime"])),
    o("crtimes", b'N', N, "crtimes", Unsupported),
    o("no-crtimes", 0, N, "crtimes", Undo(&["crtimes"])),
    o("no-N", 0, N, "crtimes", Undo(&["crtimes"])),
    o("omit-dir-times", b'O', N, "omit_dir_times", Ours),
    o("no-omit-dir-times", 0, N, "omit_dir_times", Undo(&["omit_dir_times"])),
    o("no-O", 0, N, "omit_dir_times", Undo(&["omit_dir_times"])),
    o("omit-link-times", b'J', N, "omit_link_times", Unsupported),
    o("no-omit-link-times", 0, N, "omit_link_times", Undo(&["omit_link_times"])),
    o("no-J", 0, N, "omit_link_times", Undo(&["omit_link_times"])),
    o("modify-window", b'@', Int, "modify_window", Ours),
    o("super", 0, N, "am_root", Ours),
    o("no-super", 0, N, "am_root", Undo(&["am_root"])),
    o("fake-super", 0, N, "am_root", Ours),
    o("owner", b'o', N, "uid", Ours),
    o("no-owner", 0, N, "uid", Undo(&["uid"])),
    o("no-o", 0, N, "uid", Undo(&["uid"])),
    o("group", b'g', N, "gid", Ours),
    o("no-group", 0, N, "gid", Undo(&["gid"])),
    o("no-g", 0, N, "gid", Undo(&["gid"])),
    o("", b'D', N, "D", Ours),
    o("no-D", 0, N, "D", Undo(&["D", "devices", "specials"])),
    o("devices", 0, N, "devices", Ours),
    o("no-devices", 0, N, "devices", Undo(&["devices"])),
    o("copy-devices", 0, N, "copy_devices", Unsupported),
    o("write-devices", 0, N, "write_devices", Unsupported),
    o("no-write-devices", 0, N, "write_devices", Undo(&["write_devices"])),
    o("specials", 0, N, "specials", Ours),
    o("no-specials", 0, N, "specials", Undo(&["specials"])),
    o("links", b'l', N, "links", Ours),
    o("no-links", 0, N, "links", Undo(&["links"])),
    o("no-l", 0, N, "links", Undo(&["links"])),
    o("copy-links", b'L', N, "copy_links", Ours),
    o("copy-unsafe-links", 0, N, "copy_unsafe_links", Ours),
    o("safe-links", 0, N, "safe_symlinks", Ours),
    o("munge-links", 0, N, "munge_symlinks", Unsupported),
    o("no-munge-links", 0, N, "munge_symlinks", Undo(&["munge_symlinks"])),
    o("copy-dirlinks", b'k', N, "copy_dirlinks", Unsupported),
    o("keep-dirlinks", b'K', N, "keep_dirlinks", Ours),
    o("hard-links", b'H', N, "hard_links", Ours),
    o("no-hard-links", 0, N, "hard_links", Undo(&["hard_links"])),
    o("no-H", 0, N, "hard_links", Undo(&["hard_links"])),
    o("relative", b'R', N, "relative", Ours),
    o("no-relative", 0, N, "relative", Undo(&["relative"])),
    o("no-R", 0, N, "relative", Undo(&["relative"])),
    o("implied-dirs", 0, N, "implied_dirs", Undo(&["implied_dirs"])),
    o("no-implied-dirs", 0, N, "implied_dirs", Ours),
    o("i-d", 0, N, "implied_dirs", Undo(&["implied_dirs"])),
    o("no-i-d", 0, N, "implied_dirs", As("no-implied-dirs")),
    o("chmod", 0, Str, "chmod", Ours),
    o("ignore-times", b'I', N, "ignore_times", Ours),
    o("size-only", 0, N, "size_only", Ours),
    o("one-file-system", b'x', N, "one_file_system", Ours),
    o("no-one-file-system", 0, N, "one_file_system", Undo(&["one_file_system"])),
    o("no-x", 0, N, "one_file_system", Undo(&["one_file_system"])),
    o("update", b'u', N, "update_only", Ours),
    o("existing", 0, N, "ignore_non_existing", Ours),
    o("ignore-non-existing", 0, N, "ignore_non_existing", Ours),
    o("ignore-existing", 0, N, "ignore_existing", Ours),
    o("max-size", 0, Str, "max_size", Ours),
    o("min-size", 0, Str, "min_size", Ours),
    o("max-alloc", 0, Str, "max_alloc", Ignored),
    o("sparse", b'S', N, "sparse", Ours),
    o("no-sparse", 0, N, "sparse", Undo(&["sparse"])),
    o("no-S", 0, N, "sparse", Undo(&["sparse"])),
    o("preallocate", 0, N, "preallocate", Ignored),
    o("inplace", 0, N, "inplace", Ours),
    o("no-inplace", 0, N, "inplace", Undo(&["inplace"])),
    o("append", 0, N, "append", Unsupported),
    o("append-verify", 0, N, "append", Unsupported),
    o("no-append", 0, N, "append", Undo(&["append"])),
    o("del", 0, N, "delete_during", Ours),
    o("delete", 0, N, "delete_mode", Ours),
    o("delete-before", 0, N, "delete_before", Ours),
    o("delete-during", 0, N, "delete_during", Ours),
    o("delete-delay", 0, N, "delete_during", Ours),
    o("delete-after", 0, N, "delete_after", Ours),
    o("delete-excluded", 0, N, "delete_excluded", Ours),
    o("delete-missing-args", 0, N, "missing_args", Unsupported),
    o("ignore-missing-args", 0, N, "missing_args", Unsupported),
    o("remove-sent-files", 0, N, "remove_source_files", As("remove-source-files")),
    o("remove-source-files", 0, N, "remove_source_files", Ours),
    o("force", 0, N, "force", Ours),
    o("no-force", 0, N, "force", Undo(&["force"])),
    o("ignore-errors", 0, N, "ignore_errors", Ours),
    o("no-ignore-errors", 0, N, "ignore_errors", Undo(&["ignore_errors"])),
    o("max-delete", 0, Int, "max_delete", Ours),
    o("", b'F', N, "F", Ours),
    o("filter", b'f', Str, "filter", Ours),
    o("exclude", 0, Str, "exclude", Ours),
    o("include", 0, Str, "include", Ours),
    o("exclude-from", 0, Str, "exclude_from", Ours),
    o("include-from", 0, Str, "include_from", Ours),
    o("cvs-exclude", b'C', N, "cvs_exclude", Ours),
    o("whole-file", b'W', N, "whole_file", Ours),
    o("no-whole-file", 0, N, "whole_file", Ours),
    o("no-W", 0, N, "whole_file", As("no-whole-file")),
    o("checksum", b'c', N, "checksum", Ours),
    o("no-checksum", 0, N, "checksum", Undo(&["checksum"])),
    o("no-c", 0, N, "checksum", Undo(&["checksum"])),
    o("checksum-choice", 0, Str, "checksum_choice", Ignored),
    o("cc", 0, Str, "checksum_choice", Ignored),
    o("block-size", b'B', Str, "block_size", Ignored),
    o("compare-dest", 0, Str, "compare_dest", Ours),
    o("copy-dest", 0, Str, "copy_dest", Ours),
    o("link-dest", 0, Str, "link_dest", Ours),
    o("fuzzy", b'y', N, "fuzzy", Ours),
    o("no-fuzzy", 0, N, "fuzzy", Undo(&["fuzzy"])),
    o("no-y", 0, N, "fuzzy", Undo(&["fuzzy"])),
    o("compress", b'z', N, "compress", Ignored),
    o("old-compress", 0, N, "compress", Ignored),
    o("new-compress", 0, N, "compress", Ignored),
    o("no-compress", 0, N, "compress", Undo(&["compress"])),
    o("no-z", 0, N, "compress", Undo(&["compress"])),
    o("compress-choice", 0, Str, "compress_choice", Ignored),
    o("zc", 0, Str, "compress_choice", Ignored),
    o("skip-compress", 0, Str, "skip_compress", Ignored),
    o("compress-level", 0, Int, "compress_level", Ignored),
    o("zl", 0, Int, "compress_level", Ignored),
    o("", b'P', N, "P", Ours),
    o("progress", 0, N, "progress", Ours),
    o("no-progress", 0, N, "progress", Undo(&["progress"])),
    o("partial", 0, N, "partial", Ours),
    o("no-partial", 0, N, "partial", Undo(&["partial"])),
    o("partial-dir", 0, Str, "partial_dir", Unsupported),
    o("delay-updates", 0, N, "delay_updates", Ours),
    o("no-delay-updates", 0, N, "delay_updates", Undo(&["delay_updates"])),
    o("prune-empty-dirs", b'm', N, "prune_empty_dirs", Ours),
    o("no-prune-empty-dirs", 0, N, "prune_empty_dirs", Undo(&["prune_empty_dirs"])),
    o("no-m", 0, N, "prune_empty_dirs", Undo(&["prune_empty_dirs"])),
    o("log-file", 0, Str, "logfile_name", Ours),
    o("log-file-format", 0, Str, "logfile_format", Unsupported),
    o("out-format", 0, Str, "stdout_format", Ours),
    o("log-format", 0, Str, "stdout_format", Ours),
    o("itemize-changes", b'i', N, "itemize", Ours),
    o("no-itemize-changes", 0, N, "itemize", Undo(&["itemize"])),
    o("no-i", 0, N, "itemize", Undo(&["itemize"])),
    o("bwlimit", 0, Str, "bwlimit", Ours),
    o("no-bwlimit", 0, N, "bwlimit", Undo(&["bwlimit"])),
    o("backup", b'b', N, "make_backups", Ours),
    o("no-backup", 0, N, "make_backups", Undo(&["make_backups"])),
    o("backup-dir", 0, Str, "backup_dir", Ours),
    o("suffix", 0, Str, "backup_suffix", Ours),
    o("list-only", 0, N, "list_only", Ours),
    o("read-batch", 0, Str, "batch", Unsupported),
    o("write-batch", 0, Str, "batch", Unsupported),
    o("only-write-batch", 0, Str, "batch", Unsupported),
    o("files-from", 0, Str, "files_from", Ours),
    o("from0", b'0', N, "eol_nulls", Ours),
    o("no-from0", 0, N, "eol_nulls", Undo(&["eol_nulls"])),
    o("old-args", 0, N, "old_args", Ignored),
    o("no-old-args", 0, N, "old_args", Undo(&["old_args"])),
    o("secluded-args", b's', N, "protect_args", Ignored),
    o("no-secluded-args", 0, N, "protect_args", Undo(&["protect_args"])),
    o("protect-args", 0, N, "protect_args", Ignored),
    o("no-protect-args", 0, N, "protect_args", Undo(&["protect_args"])),
    o("no-s", 0, N, "protect_args", Undo(&["protect_args"])),
    o("trust-sender", 0, N, "trust_sender", Ignored),
    o("numeric-ids", 0, N, "numeric_ids", Ours),
    o("no-numeric-ids", 0, N, "numeric_ids", Undo(&["numeric_ids"])),
    o("usermap", 0, Str, "usermap", Unsupported),
    o("groupmap", 0, Str, "groupmap", Unsupported),
    o("chown", 0, Str, "chown", Ours),
    o("timeout", 0, Int, "io_timeout", Ours),
    o("no-timeout", 0, N, "io_timeout", Undo(&["io_timeout"])),
    o("contimeout", 0, Int, "connect_timeout", Ignored),
    o("no-contimeout", 0, N, "connect_timeout", Undo(&["connect_timeout"])),
    o("fsync", 0, N, "do_fsync", Ours),
    o("stop-after", 0, Str, "stop_at", Unsupported),
    o("time-limit", 0, Str, "stop_at", Unsupported),
    o("stop-at", 0, Str, "stop_at", Unsupported),
    o("rsh", b'e', Str, "shell_cmd", Ours),
    o("rsync-path", 0, Str, "rsync_path", Ours),
    o("temp-dir", b'T', Str, "tmpdir", Ours),
    o("iconv", 0, Str, "iconv", Unsupported),
    o("no-iconv", 0, N, "iconv", Undo(&["iconv"])),
    o("ipv4", b'4', N, "af_hint", Ignored),
    o("ipv6", b'6', N, "af_hint", Ignored),
    o("8-bit-output", b'8', N, "allow_8bit_chars", Ignored),
    o("no-8-bit-output", 0, N, "allow_8bit_chars", Undo(&["allow_8bit_chars"])),
    o("no-8", 0, N, "allow_8bit_chars", Undo(&["allow_8bit_chars"])),
    o("mkpath", 0, N, "mkpath", Ours),
    o("no-mkpath", 0, N, "mkpath", Undo(&["mkpath"])),
    o("qsort", 0, N, "qsort", Ignored),
    o("copy-as", 0, Str, "copy_as", Unsupported),
    o("address", 0, Str, "bind_address", Ignored),
    o("port", 0, Int, "rsync_port", Ignored),
    o("sockopts", 0, Str, "sockopts", Ignored),
    o("password-file", 0, Str, "password_file", Ignored),
    o("early-input", 0, Str, "early_input", Ignored),
    o("blocking-io", 0, N, "blocking_io", Ignored),
    o("no-blocking-io", 0, N, "blocking_io", Undo(&["blocking_io"])),
    o("outbuf", 0, Str, "outbuf", Ignored),
    // rsync 3.2.7 hands these to its local receiving side: not ignored, not carried out.
    o("remote-option", b'M', Str, "remote_option", Unsupported),
    o("protocol", 0, Int, "protocol", Ignored),
    o("checksum-seed", 0, Int, "checksum_seed", Ignored),
    o("server", 0, N, "server", Unsupported),
    o("sender", 0, N, "sender", Unsupported),
    o("config", 0, Str, "daemon", Unsupported),
    o("daemon", 0, N, "daemon", Unsupported),
    o("dparam", 0, Str, "daemon", Unsupported),
    o("detach", 0, N, "daemon", Unsupported),
    o("no-detach", 0, N, "daemon", Unsupported),
];

/// A usage error: rsync's message (without the program name) and its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub message: String,
    pub code: i32,
    /// rsync prints it without its name in front.
    pub bare: bool,
}

fn usage(message: String) -> Refusal {
    Refusal {
        message,
        code: 1,
        bare: false,
    }
}

/// A refusal rsync prints without its name in front.
fn bare(message: &str) -> Refusal {
    Refusal {
        bare: true,
        ..usage(message.to_string())
    }
}

/// The options clap reads itself: ringio's own (`--hash`, `--manifest`, ...) beside rsync's.
pub struct Known {
    longs: Vec<String>,
    /// Long options of clap's that take a value.
    valued: Vec<String>,
}

impl Known {
    pub fn from_command(cmd: &clap::Command) -> Known {
        let mut cmd = cmd.clone();
        cmd.build();
        let mut longs = Vec::new();
        let mut valued = Vec::new();
        for arg in cmd.get_arguments() {
            let names: Vec<String> = arg
                .get_long()
                .into_iter()
                .chain(arg.get_all_aliases().unwrap_or_default())
                .map(String::from)
                .collect();
            if arg.get_action().takes_values() {
                valued.extend(names.iter().cloned());
            }
            longs.extend(names);
        }
        Known { longs, valued }
    }

    fn knows(&self, long: &str) -> bool {
        self.longs.iter().any(|l| l == long)
    }
}

/// An option on its way to clap, with the variable it sets (for `--no-X`).
struct Given {
    var: &'static str,
    spelled: OsString,
}

/// Reads `args` (the words after the program or subcommand name) as rsync's popt does and
/// returns what clap is to read: the options, `--`, the operands. `--help` ends the reading.
pub fn preparse(args: Vec<OsString>, known: &Known) -> Result<Vec<OsString>, Refusal> {
    let mut given: Vec<Given> = Vec::new();
    let mut operands: Vec<OsString> = Vec::new();
    let mut words = args.into_iter().map(OsString::into_vec);
    while let Some(word) = words.next() {
        if word == b"--" {
            operands.extend(words.by_ref().map(OsString::from_vec));
            break;
        }
        if word.len() < 2 || word[0] != b'-' {
            operands.push(OsString::from_vec(word));
            continue;
        }
        if let Some(body) = word.strip_prefix(b"--") {
            let text = String::from_utf8_lossy(body).into_owned();
            let (name, attached) = match body.iter().position(|&b| b == b'=') {
                Some(eq) => (
                    String::from_utf8_lossy(&body[..eq]).into_owned(),
                    Some(body[eq + 1..].to_vec()),
                ),
                None => (text.clone(), None),
            };
            if name == "help" {
                return Ok(vec![OsString::from("--help")]);
            }
            let Some((opt, takes)) = lookup_long(&name, known) else {
                return Err(usage(format!("--{text}: unknown option")));
            };
            let value = match (takes, attached) {
                (false, Some(_)) => {
                    return Err(usage(format!("--{text}: option does not take an argument")))
                }
                (false, None) => None,
                (true, Some(v)) => Some(v),
                (true, None) => match words.next() {
                    Some(v) => Some(v),
                    None => return Err(usage(format!("--{name}: missing argument"))),
                },
            };
            take(&mut given, (opt, known), &name, &format!("--{name}"), value)?;
            continue;
        }
        let mut rest = &word[1..];
        while let Some((&letter, after)) = rest.split_first() {
            rest = after;
            let Some(opt) = TABLE.iter().find(|o| o.short == Some(letter)) else {
                return Err(usage(format!(
                    "-{}: unknown option",
                    String::from_utf8_lossy(&[letter])
                )));
            };
            let name = opt
                .long
                .map_or_else(|| char::from(letter).to_string(), String::from);
            let value = if opt.arg == Arg::None {
                None
            } else if !rest.is_empty() {
                Some(std::mem::take(&mut rest).to_vec())
            } else {
                match words.next() {
                    Some(v) => Some(v),
                    None => {
                        return Err(usage(format!(
                            "{}: missing argument",
                            String::from_utf8_lossy(&word)
                        )))
                    }
                }
            };
            let shown = format!("-{}", char::from(letter));
            take(&mut given, (Some(opt), known), &name, &shown, value)?;
        }
    }
    // rsync: -h with nothing to transfer is the old -h, --help.
    if operands.is_empty() && given.iter().any(|g| g.var == "human") {
        return Ok(vec![OsString::from("--help")]);
    }
    let mut out: Vec<OsString> = given.into_iter().map(|g| g.spelled).collect();
    out.push(OsString::from("--"));
    out.extend(operands);
    Ok(out)
}

/// The table's entry for `--name` (`None`: one of ringio's own, clap's), and whether it takes
/// an argument; `None` when neither rsync nor ringio has it.
fn lookup_long(name: &str, known: &Known) -> Option<(Option<&'static Opt>, bool)> {
    if let Some(opt) = TABLE.iter().find(|o| o.long == Some(name)) {
        return Some((Some(opt), opt.arg != Arg::None));
    }
    known
        .knows(name)
        .then(|| (None, known.valued.iter().any(|v| v == name)))
}

/// One option met: checked, then added to `given` (or `given` undone, or nothing).
fn take(
    given: &mut Vec<Given>,
    (opt, known): (Option<&'static Opt>, &Known),
    name: &str,
    shown: &str,
    value: Option<Vec<u8>>,
) -> Result<(), Refusal> {
    let spell = |long: &str, value: Option<Vec<u8>>| -> OsString {
        let mut s = if long.len() == 1 {
            format!("-{long}").into_bytes()
        } else {
            format!("--{long}").into_bytes()
        };
        if let Some(v) = value {
            s.push(b'=');
            s.extend_from_slice(&v);
        }
        OsString::from_vec(s)
    };
    let Some(opt) = opt else {
        // ringio's own option.
        given.push(Given {
            var: "",
            spelled: spell(name, value),
        });
        return Ok(());
    };
    let value = match (opt.arg, value) {
        (Arg::Int, Some(v)) => Some(int_value(shown, &v)?.to_string().into_bytes()),
        (_, v) => v,
    };
    if let Some(v) = &value {
        check_value(opt, &String::from_utf8_lossy(v))?;
    }
    // An option clap reads itself means what ringio gives it.
    let meaning = match opt.meaning {
        Ignored | Unsupported if known.knows(name) => Ours,
        m => m,
    };
    match meaning {
        // -P is --partial --progress: each can be undone alone (--no-progress keeps -P's
        // --partial).
        Ours if opt.var == "P" => {
            for (var, long) in [("partial", "partial"), ("progress", "progress")] {
                given.push(Given {
                    var,
                    spelled: spell(long, None),
                });
            }
        }
        Ours => given.push(Given {
            var: opt.var,
            spelled: spell(name, value),
        }),
        As(long) => given.push(Given {
            var: opt.var,
            spelled: spell(long, value),
        }),
        Undo(vars) => {
            given.retain(|g| !vars.contains(&g.var));
            // clap reads it too where it must also undo -a's share (--no-perms).
            if known.knows(name) {
                given.push(Given {
                    var: opt.var,
                    spelled: spell(name, value),
                });
            }
        }
        Ignored => {}
        Unsupported => return Err(unsupported(opt, shown)),
    }
    Ok(())
}

/// The refusal of an rsync option ringio does not carry out.
fn unsupported(opt: &Opt, shown: &str) -> Refusal {
    let message = match opt.var {
        // rsync's own words where it refuses it on Linux too.
        "crtimes" => "This rsync does not support --crtimes (-N)".to_string(),
        "server" | "sender" | "daemon" => {
            format!("{shown}: ringio runs no rsync server or daemon (local transfers only)")
        }
        _ => format!("{shown}: rsync's option is not carried out by ringio (see CONFORMANCE.md)"),
    };
    usage(message)
}

/// popt's POPT_ARG_INT: a C int in decimal (or 0x hex, 0 octal, as strtol with base 0); an
/// empty value is 0.
fn int_value(shown: &str, value: &[u8]) -> Result<i32, Refusal> {
    let text = String::from_utf8_lossy(value);
    let invalid = || usage(format!("{shown}={text}: invalid numeric value"));
    let t = text.trim_start();
    let (neg, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (radix, digits) = if let Some(h) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        (16, h)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    if digits.is_empty() {
        return if t.is_empty() { Ok(0) } else { Err(invalid()) };
    }
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(invalid());
    }
    let magnitude = i128::from_str_radix(digits, radix).unwrap_or(i128::MAX);
    let n = if neg { -magnitude } else { magnitude };
    i32::try_from(n).map_err(|_| usage(format!("{shown}={text}: number too large or too small")))
}

/// The checks rsync makes of the values of the options ringio accepts without using.
fn check_value(opt: &Opt, value: &str) -> Result<(), Refusal> {
    match opt.var {
        "checksum_choice" => names(value, "checksum", CHECKSUMS),
        "compress_choice" => names(value, "compress", COMPRESSIONS),
        "block_size" => SizeArg::BLOCK_SIZE.parse(value).map(drop).map_err(usage),
        "max_alloc" => SizeArg::MAX_ALLOC.parse(value).map(drop).map_err(usage),
        // Any prefix of a mode's name (strncmp over the value's length).
        "stderr"
            if ["errors", "all", "client"]
                .iter()
                .any(|mode| !value.is_empty() && mode.starts_with(value)) =>
        {
            Ok(())
        }
        "stderr" => Err(usage(format!(
            "--stderr mode \"{value}\" is not one of errors, all, or client"
        ))),
        "outbuf" => match value.chars().next().map(|c| c.to_ascii_uppercase()) {
            Some('N' | 'L' | 'B') => Ok(()),
            _ => Err(usage(
                "Invalid --outbuf setting -- specify N, L, or B.".to_string(),
            )),
        },
        "remote_option" if !value.starts_with('-') => Err(usage(format!(
            "Remote option must start with a dash: {value}"
        ))),
        "connect_timeout" if value != "0" => Err(bare(
            "The --contimeout option may only be used when connecting to an rsync daemon.",
        )),
        "debug" => debug_flags(value),
        "password_file" => Err(bare(
            "The --password-file option may only be used when accessing an rsync daemon.",
        )),
        _ => Ok(()),
    }
}

/// rsync 3.2.7's `--debug` flags (options.c's debug_words), each with an optional level.
fn debug_flags(value: &str) -> Result<(), Refusal> {
    const WORDS: &[&str] = &[
        "acl", "backup", "bind", "chdir", "connect", "cmd", "del", "deltasum", "dup", "exit",
        "filter", "flist", "fuzzy", "genr", "hash", "hlink", "iconv", "io", "nstr", "own", "proto",
        "recv", "send", "time", "all", "none", "help",
    ];
    for word in value.split(',').filter(|w| !w.is_empty()) {
        let name = word
            .trim_end_matches(|c: char| c.is_ascii_digit())
            .to_ascii_lowercase();
        let name = name
            .strip_prefix("no")
            .filter(|n| WORDS.contains(n))
            .unwrap_or(&name);
        if !WORDS.contains(&name) {
            return Err(bare(&format!("Unknown --debug item: \"{word}\"")));
        }
    }
    Ok(())
}

/// rsync 3.2.7's checksum names (checksum.c), with `auto`.
const CHECKSUMS: &[&str] = &[
    "auto", "xxh128", "xxh3", "xxh64", "xxhash", "md5", "md4", "sha1", "none",
];
/// rsync 3.2.7's compression names (compat.c), with `auto`.
const COMPRESSIONS: &[&str] = &["auto", "zstd", "lz4", "zlibx", "zlib", "none"];

/// A `--checksum-choice`/`--compress-choice` value: one name, or two separated by a comma;
/// an unknown one is rsync's exit 4 ("requested action not supported").
fn names(value: &str, what: &str, valid: &[&str]) -> Result<(), Refusal> {
    for name in value.split(',') {
        if !valid.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(Refusal {
                message: format!("unknown {what} name: {name}"),
                code: 4,
                bare: true,
            });
        }
    }
    Ok(())
}

/// Every option the table says clap reads, for a test that clap knows them.
#[cfg(test)]
fn ours() -> impl Iterator<Item = String> {
    TABLE.iter().filter_map(|o| {
        let long = match o.meaning {
            Ours => o.long.map(String::from),
            As(long) => Some(long.to_string()),
            _ => None,
        };
        long.or_else(|| {
            (o.meaning == Ours)
                .then(|| o.short.map(|s| char::from(s).to_string()))
                .flatten()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::os::unix::ffi::OsStrExt;

    fn known() -> Known {
        Known::from_command(&crate::cli::RsyncCli::command())
    }

    fn parse(args: &[&str]) -> Result<Vec<String>, Refusal> {
        preparse(args.iter().map(OsString::from).collect(), &known())
            .map(|out| out.into_iter().map(|a| a.into_string().unwrap()).collect())
    }

    #[test]
    fn clap_reads_every_option_the_table_gives_it() {
        let k = known();
        let cmd = crate::cli::RsyncCli::command();
        for name in ours() {
            let known = if name.len() == 1 {
                let c = name.chars().next().unwrap();
                cmd.get_arguments().any(|a| a.get_short() == Some(c))
            } else {
                k.knows(&name)
            };
            assert!(known, "clap does not read --{name}");
        }
    }

    #[test]
    fn popt_rules() {
        // Repeats, clusters, options after operands; spelled in full for clap.
        assert_eq!(
            parse(&["-avz", "s/", "-a", "d/"]).unwrap(),
            ["--archive", "--verbose", "--archive", "--", "s/", "d/"]
        );
        // A later --no-X undoes X; one of ringio's own --no-X is read by clap too.
        assert_eq!(parse(&["-S", "--no-S", "a"]).unwrap(), ["--", "a"]);
        assert_eq!(
            parse(&["-S", "--no-sparse", "-S"]).unwrap(),
            ["--sparse", "--"]
        );
        assert_eq!(
            parse(&["-a", "--no-p"]).unwrap(),
            ["--archive", "--no-p", "--"]
        );
        assert_eq!(
            parse(&["-vv", "--no-v", "-i"]).unwrap(),
            ["--itemize-changes", "--"]
        );
        assert_eq!(
            parse(&["-B700", "-@", "-1"]).unwrap(),
            ["--modify-window=-1", "--"]
        );
        assert_eq!(parse(&["--max-delete="]).unwrap(), ["--max-delete=0", "--"]);
        assert_eq!(parse(&["--help", "--bogus"]).unwrap(), ["--help"]);
        assert_eq!(parse(&["--", "-a"]).unwrap(), ["--", "-a"]);
        // A value is kept byte for byte, after a name of any bytes.
        let odd = OsString::from_vec(b"--exclude=\xff\xfe".to_vec());
        let out = preparse(vec![odd], &known()).unwrap();
        assert_eq!(out[0].as_bytes(), b"--exclude=\xff\xfe");
        let bad = OsString::from_vec(b"--\xff=x".to_vec());
        assert_eq!(preparse(vec![bad], &known()).unwrap_err().code, 1);
        // -h alone is help; undone, it is not.
        assert_eq!(parse(&["-v", "-h"]).unwrap(), ["--help"]);
        assert_eq!(parse(&["-h", "--no-h"]).unwrap(), ["--"]);
        assert_eq!(
            parse(&["-P", "--no-progress"]).unwrap(),
            ["--partial", "--"]
        );
    }

    #[test]
    fn refusals_in_rsyncs_words() {
        let err = |args: &[&str]| parse(args).unwrap_err();
        assert_eq!(err(&["--recur"]).message, "--recur: unknown option");
        assert_eq!(err(&["-Q"]).message, "-Q: unknown option");
        assert_eq!(err(&["--suffix"]).message, "--suffix: missing argument");
        assert_eq!(err(&["-aB"]).message, "-aB: missing argument");
        assert_eq!(
            err(&["--verbose=1"]).message,
            "--verbose=1: option does not take an argument"
        );
        assert_eq!(
            err(&["--modify-window=99999999999"]).message,
            "--modify-window=99999999999: number too large or too small"
        );
        assert_eq!(
            err(&["--timeout=x"]).message,
            "--timeout=x: invalid numeric value"
        );
        assert_eq!(err(&["--cc=bogus"]).code, 4);
        assert_eq!(
            err(&["-B", "1000000"]).message,
            "--block-size=1000000 is too large (max: 128.00K)"
        );
        assert_eq!(
            err(&["-N"]).message,
            "This rsync does not support --crtimes (-N)"
        );
        assert_eq!(err(&["--daemon"]).code, 1);
    }
}
