//! The command line: clap definitions only. `cp.rs` turns them into a `CopyPlan`.

use std::path::PathBuf;

use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand, ValueEnum};
use ringio_copy::Engine;

use crate::argmatch::{Choices, ValueCheck};
use crate::units::parse_size;

/// Fast, correct file copies and I/O measurements on Linux, built around io_uring.
#[derive(Debug, Parser)]
#[command(name = "ringio", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per run: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Copy files and directory trees, with cp's options and semantics.
    Cp(CpArgs),
    /// Keep DEST a mirror of SRC, with rsync's local options, output and exit codes.
    Sync(crate::sync::Args),
    /// Compare two trees entry by entry: type, content, metadata, links, sparseness.
    Verify(crate::verify::Args),
    /// Duplicate one file by a chosen method, or compare every method's cost.
    Dup(crate::dup::Args),
    /// Read a file and measure throughput (with an XOR checksum of its contents).
    Read(crate::read::Args),
    /// Write a test file and measure throughput.
    Write(crate::write::Args),
    /// Measure the cost of a system call.
    Syscost(crate::syscost::Args),
    /// Benchmarks: generate workloads, compare copiers, load the FSM server models.
    Bench(crate::bench::Args),
    /// Run the finite-state-machine TCP server in one concurrency model.
    Serve(crate::serve::Args),
    /// Drive an FSM server with many verifying clients and report throughput and latency.
    Load(crate::load::Args),
    /// Write the manual pages (ringio.1, and ringio-<command>.1 for every command) into DIR.
    Man {
        /// Where to write them (created if missing), e.g. /usr/local/share/man/man1.
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell to generate completions for.
        shell: clap_complete::Shell,
    },
}

/// ringio run under the name `cp` (a link named cp): `ringio cp` as a drop-in for GNU cp.
#[derive(Debug, Parser)]
#[command(name = "cp", version = crate::argv::CP_VERSION)]
pub struct CpCli {
    #[command(flatten)]
    pub args: CpArgs,
}

/// ringio run under the name `rsync` (a link named rsync): `ringio sync`, as local rsync.
#[derive(Debug, Parser)]
#[command(name = "rsync", disable_version_flag = true)]
pub struct RsyncCli {
    #[command(flatten)]
    pub args: crate::sync::Args,
}

/// `ringio cp`. As with getopt, an option given twice takes its last value.
#[derive(Debug, Clone, Args)]
#[command(
    args_override_self = true,
    override_usage = "ringio cp [OPTIONS] SRC DST\n       ringio cp [OPTIONS] SRC... DIR\n       ringio cp [OPTIONS] -t DIR SRC...",
    after_help = "Copying onto an existing directory copies into it, as cp does. Per-entry errors are \
printed as \"ringio: cannot <op> '<path>': <reason>\" (\"cp: ...\" when run as cp); the copy goes on and exits 1 at the end. \
No space left stops at once. Ctrl-C and SIGTERM stop it promptly, also while it waits on a FIFO, \
a terminal or a prompt, and it then dies by that signal (status 130 or 143). Either way, no \
partially written file is left behind; a kill -9 can leave one, which --resume finds."
)]
pub struct CpArgs {
    /// Sources, then the destination (unless -t is given).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// Copy directories recursively.
    #[arg(short = 'r', short_alias = 'R', long, visible_short_alias = 'R')]
    pub recursive: bool,

    /// Same as -dR --preserve=all: an exact copy of the tree.
    #[arg(short = 'a', long)]
    pub archive: bool,

    /// Same as --no-dereference --preserve=links.
    #[arg(short = 'd')]
    pub no_deref_preserve_links: bool,

    /// Same as --preserve=mode,ownership,timestamps.
    #[arg(short = 'p')]
    pub preserve_default: bool,

    /// Preserve the listed attributes: mode, ownership, timestamps, links, xattr, all
    /// [default list: mode,ownership,timestamps].
    #[arg(
        long,
        value_name = "LIST",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "mode,ownership,timestamps",
        action = clap::ArgAction::Append
    )]
    pub preserve: Vec<String>,

    /// Don't preserve the listed attributes.
    #[arg(long, value_name = "LIST", require_equals = true, action = clap::ArgAction::Append)]
    pub no_preserve: Vec<String>,

    /// -a, -d, -p, --preserve and --no-preserve in command-line order: later ones win, as
    /// with cp (`--no-preserve=mode --preserve=all` keeps the mode).
    #[arg(skip)]
    pub preserve_steps: Vec<PreserveStep>,

    /// Never follow symbolic links in SRC; copy them as links (the default with -r).
    #[arg(short = 'P', long = "no-dereference", overrides_with_all = ["dereference", "dereference_args"])]
    pub no_dereference: bool,

    /// Always follow symbolic links in SRC.
    #[arg(short = 'L', long, overrides_with_all = ["no_dereference", "dereference_args"])]
    pub dereference: bool,

    /// Follow symbolic links named on the command line, copy the others as links.
    #[arg(short = 'H', overrides_with_all = ["no_dereference", "dereference"])]
    pub dereference_args: bool,

    /// Never overwrite an existing file (overrides an earlier -i).
    #[arg(short = 'n', long, overrides_with = "interactive")]
    pub no_clobber: bool,

    /// Ask before overwriting an existing file: `cp: overwrite 'FILE'? ` on stderr, and a line
    /// from stdin that starts with y or Y (overrides an earlier -n).
    #[arg(short = 'i', long, overrides_with = "no_clobber")]
    pub interactive: bool,

    /// Make hard links to the sources instead of copying them (directories are still created
    /// under -r).
    #[arg(short = 'l', long)]
    pub link: bool,

    /// Make symbolic links to the sources instead of copying them. Relative sources work only
    /// when the destination is in the current directory, as with cp.
    #[arg(short = 's', long)]
    pub symbolic_link: bool,

    /// Use the full source path under DIR: `cp --parents a/b/f DIR` makes DIR/a/b/f (missing
    /// directories are created; with -p they get their source's metadata).
    #[arg(long, alias = "path")]
    pub parents: bool,

    /// Copy only the attributes (mode, owner, times, xattrs as --preserve says), not the data:
    /// a new file is created empty, an existing one keeps its content.
    #[arg(long)]
    pub attributes_only: bool,

    /// Remove trailing slashes from each source operand copied into a directory (as GNU cp:
    /// `SRC DST` to a non-directory keeps them).
    #[arg(long)]
    pub strip_trailing_slashes: bool,

    /// SELinux security context of the copies. Accepted and ignored, as cp does on a kernel
    /// without SELinux (with a warning when CTX is given).
    #[arg(
        short = 'Z',
        long,
        value_name = "CTX",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = ""
    )]
    pub context: Option<String>,

    /// If an existing destination file cannot be opened, remove it and try again.
    #[arg(short = 'f', long)]
    pub force: bool,

    /// Copy only when the source is newer than the destination file or the destination is
    /// missing (`older`, the default); `all` replaces always, `none` never.
    #[arg(
        short = 'u',
        long,
        value_name = "WHEN",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "older"
    )]
    pub update: Option<UpdateWhen>,

    /// Finish an interrupted copy: run the same command again with --resume. The layout is the
    /// same as without it: where the first run made DST itself (`cp -r SRC DST`), DST now
    /// exists and is copied into; say -T (`cp -rT --resume SRC DST`) to finish it. Symlinks and
    /// special files already as the copy would make them are left untouched. A destination file
    /// is kept only when it is provably complete: under -a/-p when its size and ns mtime match
    /// the source's, otherwise when its size and content match (`checksum`: always compare
    /// content). Every other file is copied again, the temporaries of an interrupted --atomic
    /// run are removed (ringio's own only, never one a running copy holds), and directory
    /// metadata is applied. On a complete tree it only reads metadata.
    #[arg(
        long,
        value_name = "CHECK",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "quick",
        conflicts_with_all = ["no_clobber", "update", "remove_destination", "backup", "backup_default"]
    )]
    pub resume: Option<ResumeCheck>,

    /// Remove each existing destination file before creating the copy, instead of writing
    /// over it.
    #[arg(long)]
    pub remove_destination: bool,

    /// Rename each existing destination aside before replacing it: `numbered` or `t`
    /// (NAME.~N~), `existing` or `nil` (numbered if numbered backups exist, else simple),
    /// `simple` or `never` (NAME~), `none` or `off`; any unambiguous prefix will do. Without
    /// CONTROL (or with an empty one), $VERSION_CONTROL, else `existing`.
    #[arg(
        long,
        value_name = "CONTROL",
        num_args = 0..=1,
        require_equals = true,
        action = clap::ArgAction::Append
    )]
    pub backup: Option<Vec<String>>,

    /// Like --backup, with the control from $VERSION_CONTROL (default `existing`).
    #[arg(short = 'b')]
    pub backup_default: bool,

    /// The simple backup suffix, and make backups (like -b) [default: $SIMPLE_BACKUP_SUFFIX,
    /// else ~]. An empty suffix, or one with a '/' before its last part, means ~.
    #[arg(short = 'S', long, value_name = "SUFFIX")]
    pub suffix: Option<String>,

    /// Holes: `auto` keeps the holes of sparse files (the default), `always` also turns runs of
    /// zeros into holes, `never` writes every byte.
    #[arg(long, value_name = "WHEN", default_value = "auto")]
    pub sparse: SparseWhen,

    /// Clones sharing the source's data blocks (FICLONE, on btrfs, xfs and the like): `auto`
    /// clones where possible (the default), `always` fails a file that cannot be cloned,
    /// `never` never shares blocks. A bare --reflink means `always`.
    #[arg(
        long,
        value_name = "WHEN",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "always",
        default_value = "auto"
    )]
    pub reflink: ReflinkWhen,

    /// Write each file under a temporary name in its directory and rename it into place when
    /// complete, so that no reader ever sees a partly written file. An existing file's name
    /// gets a new inode: other hard links of the old file keep the old content. The new file
    /// keeps the old one's permissions, owner and group, ACL and the extended attributes this
    /// user can read, as cp without --atomic keeps them (what -p or --preserve names comes
    /// from the source); where they cannot be kept (another user's file), the copy fails and
    /// the old file stays as it was.
    #[arg(long)]
    pub atomic: bool,

    /// Make the copy durable before exiting (syncfs of each destination filesystem; with
    /// --atomic, each file is also flushed before its rename).
    #[arg(long)]
    pub fsync: bool,

    /// Stay on the source's filesystems: directories that are mount points are created empty.
    #[arg(short = 'x', long)]
    pub one_file_system: bool,

    /// Under -r, read special files (FIFOs, devices) as data instead of recreating them.
    /// Without -r they are always read as data, as cp does.
    #[arg(long)]
    pub copy_contents: bool,

    /// Compare the copy with its source afterwards (as `ringio verify`, on what the options
    /// promised: the metadata kept, followed symlinks under -L/-H, links under -l/-s, no
    /// content under --attributes-only), print every difference, and exit 1 if there is any.
    #[arg(long)]
    pub verify: bool,

    /// With --verify, read the copy from the device, not the page cache: O_DIRECT where the
    /// filesystem allows, else after its pages are written back and dropped (no root needed).
    #[arg(long, requires = "verify")]
    pub uncached: bool,

    /// Hash every file's bytes on their way to the destination, with ALGO (xxh3, xxh64,
    /// xxh128, blake3, sha256, sha1, md5; default xxh128 when --manifest is given). The source
    /// is read once: no second pass. The bytes then pass through memory: no clones or
    /// copy_file_range (on btrfs and xfs, the copy takes its own space). With --verify, only the
    /// copy is read again, and compared with these hashes.
    #[arg(long, value_name = "ALGO")]
    pub hash: Option<String>,

    /// Write the hashes to FILE (`-`: standard output) when the copy is done, names relative
    /// to the destination root: `sha256sum -c`, `b3sum -c`, `xxhsum -c` and `ringio verify
    /// --manifest` read it. Written to a temporary and renamed: an interrupted copy leaves
    /// none. A copy that fails (to any destination) writes none either (nor an MHL
    /// generation): no manifest vouches for an incomplete copy, and every source file a
    /// destination lacks is named ("not copied to DEST: FILE"). A FILE that exists, or inside
    /// a source, is refused without -f; FILE, --log-file and the ascmhl files must be regular
    /// files (a FIFO is refused, never waited on; DEST/ascmhl is never a symlink followed).
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,

    /// The manifest's format: sum (the checksum tools' lines), json (one object per file),
    /// or mhl (ASC MHL v2.0: a new generation in DEST/ascmhl, without --manifest).
    #[arg(long, value_name = "FORMAT")]
    pub manifest_format: Option<String>,

    /// Also copy to DIR (repeatable), as if it were the destination: an offload to several
    /// disks. Each piece of a source is read once and written to every destination. A
    /// failure on one destination is reported with its path and the others go on; the exit
    /// status says one failed. --manifest covers every destination; --verify checks each.
    #[arg(long, value_name = "DIR")]
    pub tee: Vec<PathBuf>,

    /// Log the lines -v prints (each copy, each error) to FILE, appended, each with rsync's
    /// `--log-file` prefix (`YYYY/MM/DD HH:MM:SS [PID] `), whether or not -v is given. FILE
    /// must be a regular file (or not exist yet): a symlink, FIFO or device is refused.
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,

    /// At the end, print one JSON object on stdout: entries, bytes, entries left as they were
    /// (skipped: -n, -u, --resume), the engine, counts per destination, each phase (copy, verify) with its bytes, time and throughput, and every
    /// error: its message (error_messages) and its parts as fields (error_details: op, path,
    /// errno, reason). Every other line goes to stderr.
    #[arg(long)]
    pub json: bool,

    /// Print each entry as it is copied ('SRC' -> 'DST', as cp), and say when an engine falls
    /// back.
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// Like -v, and after each regular file how its data moved, in GNU cp's words (`copy
    /// offload: yes, reflink: unsupported, sparse detection: no`). Files are then copied one
    /// whole file at a time on the synchronous path.
    #[arg(long)]
    pub debug: bool,

    /// Show a live progress bar on stderr (when it is a terminal): bytes and files done of the
    /// total, rate and ETA. The total is counted beside the copy; a spinner shows until then.
    /// At the end, one line: entries, directories, bytes, time and engine.
    #[arg(long)]
    pub progress: bool,

    /// Copy all SRC arguments into DIR.
    #[arg(short = 't', long, value_name = "DIR")]
    pub target_directory: Option<PathBuf>,

    /// Treat DST as a normal file: never copy into it even if it is a directory.
    #[arg(short = 'T', long)]
    pub no_target_directory: bool,

    /// How bytes move. io_uring falls back to a synchronous threaded engine by itself where it
    /// is unavailable (seccomp, kernel.io_uring_disabled).
    #[arg(long, value_name = "ENGINE", default_value = "uring")]
    pub engine: EngineArg,

    /// Buffer size for read/write copies, e.g. 128K, 1M. Buffers are never larger than a
    /// file needs, and all of them fit the run's memory budget (at most 64 MiB, less under
    /// `ulimit -v`).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub bs: Option<u64>,

    /// Worker threads [default: 2 per core, at least 4]. At most what the descriptor and
    /// memory limits leave room for.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Option<u32>,

    /// Small files in flight per io_uring worker (AIO: requests in flight). At most what the
    /// descriptor and memory limits leave room for.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub queue_depth: Option<u32>,

    /// Files up to this size go through io_uring read/write; larger ones are copied in the
    /// kernel (FICLONE, copy_file_range).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub small_file_threshold: Option<u64>,

    /// Files of at least twice this size that must be read from the disk are split into chunks
    /// of it, copied in parallel (a file the page cache holds is copied whole by one worker).
    /// With --hash blake3 each chunk is hashed apart by its worker, and the size is rounded up
    /// to a power of two.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub chunk_size: Option<u64>,

    /// aio engine: open file bodies with O_DIRECT, bypassing the page cache.
    #[arg(long)]
    pub direct: bool,

    /// io_uring engine: send every small file through the ring, even when its data is already
    /// cached. By default a cached file is copied in place with plain system calls (faster on a
    /// warm cache) and the ring takes over as soon as one would wait for the disk.
    #[arg(long)]
    pub ring_only: bool,

    /// Spread the copy over the ranks of an MPI job: `mpirun -n N ringio cp --mpi SRC DST`.
    /// Needs a build with `--features mpi`. Refused with -L (symlink loops cannot be seen
    /// across ranks). --progress shows the whole job on rank 0.
    #[arg(long)]
    pub mpi: bool,

    /// With --mpi: run in lockstep rounds with this seed (one task per rank per round, every
    /// message delivered between rounds), so that the ranks' messages depend only on the tree
    /// and the seed. For checking the simulator against real ranks (docs/SCALING.md); slow.
    #[arg(long, value_name = "SEED", requires = "mpi", hide = true)]
    pub mpi_lockstep: Option<u64>,
}

/// One option that changes what is preserved, in command-line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreserveStep {
    /// `-a`: everything.
    Archive,
    /// `-d`: links.
    Links,
    /// `-p`: mode, ownership, timestamps.
    Default,
    /// `--preserve=LIST`.
    Keep(String),
    /// `--no-preserve=LIST`.
    Drop(String),
}

impl CpArgs {
    /// Records the order of the options that change what is preserved (clap's derive keeps
    /// each option's values, not how they interleave).
    pub fn note_order(&mut self, matches: &clap::ArgMatches) {
        let mut steps: Vec<(usize, PreserveStep)> = Vec::new();
        let flag = |id: &str, step: PreserveStep, steps: &mut Vec<(usize, PreserveStep)>| {
            if matches.get_flag(id) {
                if let Some(i) = matches.index_of(id) {
                    steps.push((i, step));
                }
            }
        };
        flag("archive", PreserveStep::Archive, &mut steps);
        flag("no_deref_preserve_links", PreserveStep::Links, &mut steps);
        flag("preserve_default", PreserveStep::Default, &mut steps);
        for (id, keep) in [("preserve", true), ("no_preserve", false)] {
            if let (Some(values), Some(indices)) =
                (matches.get_many::<String>(id), matches.indices_of(id))
            {
                for (value, i) in values.zip(indices) {
                    let step = if keep {
                        PreserveStep::Keep(value.clone())
                    } else {
                        PreserveStep::Drop(value.clone())
                    };
                    steps.push((i, step));
                }
            }
        }
        steps.sort_by_key(|(i, _)| *i);
        self.preserve_steps = steps.into_iter().map(|(_, s)| s).collect();
    }
}

/// `--backup=CONTROL` and $VERSION_CONTROL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackupControl {
    /// No backups.
    None,
    /// NAME~ (the suffix).
    Simple,
    /// Numbered if numbered backups exist already, simple otherwise.
    Existing,
    /// NAME.~N~.
    Numbered,
}

impl BackupControl {
    /// GNU's backup types and their synonyms, in its order; the meaning numbers index
    /// [`BackupControl::BY_MEANING`].
    const ARGS: [(&'static str, usize); 8] = [
        ("none", 0),
        ("off", 0),
        ("simple", 1),
        ("never", 1),
        ("existing", 2),
        ("nil", 2),
        ("numbered", 3),
        ("t", 3),
    ];
    /// GNU's backup types as argmatch reads them, reported as `context`.
    pub fn choices(context: &'static str) -> Choices {
        Choices {
            context,
            args: Self::ARGS.to_vec(),
        }
    }

    const BY_MEANING: [BackupControl; 4] = [
        BackupControl::None,
        BackupControl::Simple,
        BackupControl::Existing,
        BackupControl::Numbered,
    ];

    /// The control `value` names (any unambiguous prefix), or argmatch's report naming
    /// `context` (`backup type` for the option, `$VERSION_CONTROL` for the variable).
    pub fn parse(value: &[u8], context: &'static str) -> Result<BackupControl, String> {
        let choices = Self::choices(context);
        let index = choices
            .find(value)
            .map_err(|problem| choices.failure(value, problem))?;
        Ok(Self::BY_MEANING[Self::ARGS[index].1])
    }
}

/// How cp checks the value of the option with clap id `id` before clap sees it, as GNU cp
/// checks its own with argmatch (any unambiguous prefix names a value). ringio's own
/// enumerated options are read the same way. `--backup` is checked later, as GNU checks it
/// after the other options.
pub fn value_check(id: &str) -> Option<ValueCheck> {
    const PRESERVE: &[&str] = &[
        "mode",
        "timestamps",
        "ownership",
        "links",
        "context",
        "xattr",
        "all",
    ];
    let one = |context, names: &[&'static str]| ValueCheck::One(Choices::distinct(context, names));
    Some(match id {
        "sparse" => one("--sparse", &["never", "auto", "always"]),
        "reflink" => one("--reflink", &["auto", "always", "never"]),
        // GNU cp 9.3's --update=WHEN.
        "update" => one("--update", &["all", "none", "older"]),
        "resume" => one("--resume", &["quick", "checksum"]),
        "engine" => {
            let names: Vec<&'static str> = Engine::ALL.iter().map(|e| e.name()).collect();
            one("--engine", &names)
        }
        "preserve" => ValueCheck::List(Choices::distinct("--preserve", PRESERVE)),
        "no_preserve" => ValueCheck::List(Choices::distinct("--no-preserve", PRESERVE)),
        _ => return None,
    })
}

/// `--sparse=WHEN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SparseWhen {
    /// Keep the holes of sparse files.
    Auto,
    /// Also make holes of runs of zeros.
    Always,
    /// No holes.
    Never,
}

/// `--reflink=WHEN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReflinkWhen {
    /// Clone where possible.
    Auto,
    /// Clone or fail.
    Always,
    /// Never share blocks.
    Never,
}

/// `--resume=CHECK`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ResumeCheck {
    /// Size and mtime under -a/-p, size and content otherwise.
    Quick,
    /// Size and content, always.
    Checksum,
}

/// `--update=WHEN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UpdateWhen {
    /// Replace only when the destination is older than the source.
    Older,
    /// Never replace (like -n, but not an error).
    None,
    /// Always replace (cp's default).
    All,
}

/// clap's view of [`Engine`]: the list comes from the enum itself.
#[derive(Debug, Clone, Copy)]
pub struct EngineArg(pub Engine);

impl ValueEnum for EngineArg {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [EngineArg; Engine::ALL.len()] = {
            let mut all = [EngineArg(Engine::Uring); Engine::ALL.len()];
            let mut i = 0;
            while i < all.len() {
                all[i] = EngineArg(Engine::ALL[i]);
                i += 1;
            }
            all
        };
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.name()).help(self.0.about()))
    }
}

#[cfg(test)]
mod tests {
    use crate::argmatch::Problem;

    /// GNU's backup types: prefixes and synonyms as argmatch reads them, and its report.
    #[test]
    fn backup_types_read_as_argmatch_reads_them() {
        let backup = BackupControl::choices("backup type");
        assert_eq!(backup.expand(b"num"), Ok("numbered"));
        assert_eq!(backup.expand(b"ne"), Ok("never"));
        assert_eq!(backup.expand(b"t"), Ok("t"));
        assert_eq!(backup.find(b"n"), Err(Problem::Ambiguous));
        assert_eq!(backup.find(b"ni"), Ok(5));
        assert_eq!(
            backup.failure(b"foo", Problem::Invalid),
            "invalid argument 'foo' for 'backup type'\nValid arguments are:\n  - 'none', 'off'\n  \
             - 'simple', 'never'\n  - 'existing', 'nil'\n  - 'numbered', 't'"
        );
    }

    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    /// The command-line names are the ones scripts already use, and `name()`, `Display` and
    /// `FromStr` agree on them.
    #[test]
    fn enum_names_are_stable() {
        use ringio_copy::transfer::Method;
        use ringio_fsm::Model;
        use ringio_lab::dup::DupMethod;
        use ringio_lab::read::ReadMethod;
        let engines: Vec<&str> = Engine::ALL.iter().map(|e| e.name()).collect();
        assert_eq!(
            engines,
            [
                "uring",
                "aio",
                "copy-range",
                "sendfile",
                "splice",
                "readwrite"
            ]
        );
        for e in Engine::ALL {
            assert_eq!(e.to_string(), e.name());
            assert_eq!(e.name().parse::<Engine>().unwrap(), *e);
        }
        let methods: Vec<&str> = Method::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(
            methods,
            ["readwrite", "copy-range", "sendfile", "splice", "aio"]
        );
        for m in Method::ALL {
            assert_eq!(m.to_string(), m.name());
            assert_eq!(m.name().parse::<Method>().unwrap(), *m);
        }
        let models: Vec<String> = Model::ALL.iter().map(|m| m.to_string()).collect();
        assert_eq!(
            models,
            [
                "sequential",
                "threaded",
                "select",
                "poll",
                "epoll",
                "libuv",
                "tokio",
                "uring",
                "uring-bufring",
                "c-epoll"
            ]
        );
        assert_eq!("uring-bufring".parse::<Model>(), Ok(Model::UringBufring));
        assert_eq!("c-epoll".parse::<Model>(), Ok(Model::CEpoll));
        let err = "bogus".parse::<Model>().unwrap_err();
        assert!(err.contains("unknown model 'bogus'") && err.contains("uring-bufring"));
        let dups: Vec<String> = DupMethod::ALL.iter().map(|m| m.to_string()).collect();
        assert_eq!(
            dups,
            [
                "rw",
                "bigbuf",
                "sendfile",
                "splice",
                "copy-range",
                "uring",
                "reflink",
                "auto"
            ]
        );
        assert_eq!("copy-range".parse::<DupMethod>(), Ok(DupMethod::CopyRange));
        assert!("x"
            .parse::<DupMethod>()
            .unwrap_err()
            .contains("choose from: rw"));
        let reads: Vec<String> = ReadMethod::ALL.iter().map(|m| m.to_string()).collect();
        assert_eq!(reads, ["psync", "uring", "mmap"]);
        assert!("x"
            .parse::<ReadMethod>()
            .unwrap_err()
            .contains("read method"));
    }
}
