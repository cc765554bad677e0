//! Building a [`SyncPlan`]: a front end (the command line, or the far end of a transfer) sets
//! what rsync's options asked for on a [`SyncPlanBuilder`], then [`SyncPlanBuilder::build`]
//! judges them in one step, in rsync's order and words (options.c's checks, then the values
//! and the defaults that depend on other options), each refusal with rsync's exit code.
//! Nothing changes the plan after that. Reading the command line (the order of `--no-X`
//! against `-a`) and what needs the terminal (the printer, the log file) stay with the caller.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::alt::AltKind;
use super::filter::{FilterError, FilterRules, ListKind};
use super::{chmod, Backups, DeleteWhen, QuickCheck, SizeArg, Source, Symlinks};
use crate::digest::Algo;
use crate::manifest::Format;
use crate::plan::Hashing;

/// Everything a sync run is asked to do: built once by [`SyncPlan::builder`], which judges the
/// options as rsync does, and never changed after.
#[derive(Debug, Clone)]
pub struct SyncPlan {
    /// The source operands.
    pub(crate) sources: Vec<Source>,
    /// DEST.
    pub(crate) dest: PathBuf,
    /// DEST was written with a trailing `/`: always a directory.
    pub(crate) dest_is_dir: bool,
    /// `--mkpath`: DEST's missing parents are made.
    pub(crate) mkpath: bool,
    /// `-r`.
    pub(crate) recursive: bool,
    /// `-d`: directories are made without their contents.
    pub(crate) dirs: bool,
    /// `-l`, `-L`.
    pub(crate) symlinks: Symlinks,
    /// `--copy-unsafe-links`: links that lead out of the tree are followed.
    pub(crate) copy_unsafe_links: bool,
    /// `--safe-links`: links that lead out of the tree are skipped.
    pub(crate) safe_links: bool,
    /// `-K`.
    pub(crate) keep_dirlinks: bool,
    /// `-H`.
    pub(crate) hard_links: bool,
    /// `-p`.
    pub(crate) perms: bool,
    /// `-E`.
    pub(crate) executability: bool,
    /// `-o`.
    pub(crate) owner: bool,
    /// `-g`.
    pub(crate) group: bool,
    /// `--chown`: the owner and group every entry gets.
    pub(crate) chown: (Option<u32>, Option<u32>),
    /// `--devices`.
    pub(crate) devices: bool,
    /// `--specials`.
    pub(crate) specials: bool,
    /// `-t`.
    pub(crate) times: bool,
    /// `-O`.
    pub(crate) omit_dir_times: bool,
    /// `-U`.
    pub(crate) atimes: bool,
    /// `-A`.
    pub(crate) acls: bool,
    /// `-X`.
    pub(crate) xattrs: bool,
    /// `-S`: holes in the source stay holes.
    pub(crate) sparse: bool,
    /// `-x`.
    pub(crate) one_file_system: bool,
    /// `-xx`: a mount point is left out altogether (not made, empty).
    pub(crate) skip_mount_points: bool,
    /// `--inplace`.
    pub(crate) inplace: bool,
    /// `--fsync`: each written file is fsynced before it is put in place.
    pub(crate) fsync: bool,
    /// `--open-noatime`: source files are opened with O_NOATIME where permitted.
    pub(crate) open_noatime: bool,
    /// The quick check (`-c`, `--size-only`, `-I`, `--modify-window`).
    pub(crate) quick: QuickCheck,
    /// `-u`.
    pub(crate) update: bool,
    /// `--existing`.
    pub(crate) existing: bool,
    /// `--ignore-existing`.
    pub(crate) ignore_existing: bool,
    /// `--max-size`.
    pub(crate) max_size: Option<u64>,
    /// `--min-size`.
    pub(crate) min_size: Option<u64>,
    /// `--delete*`.
    pub(crate) delete: Option<DeleteWhen>,
    /// `--max-delete`.
    pub(crate) max_delete: Option<u64>,
    /// `--force`: a non-empty directory in the way of a non-directory is deleted.
    pub(crate) force: bool,
    /// `--ignore-errors`: delete even after an error reading the source.
    pub(crate) ignore_errors: bool,
    /// `--remove-source-files`.
    pub(crate) remove_source_files: bool,
    /// The filter rules, compiled.
    pub(crate) filters: Arc<FilterRules>,
    /// `-m`.
    pub(crate) prune_empty_dirs: bool,
    /// `-R`: each source's path (below a `/./` in it) is kept below DEST.
    pub(crate) relative: bool,
    /// `--no-implied-dirs`: under -R, the leading directories are made as needed, without
    /// their source's attributes or lines.
    pub(crate) no_implied_dirs: bool,
    /// `-b`.
    pub(crate) backup: Option<Backups>,
    /// `--chmod`: applied to the source's mode as it is read, as rsync's sender does.
    pub(crate) chmod: Vec<chmod::ChmodRule>,
    /// `--super`: owners, groups and devices are tried even without root.
    pub(crate) super_user: bool,
    /// `--fake-super`: owners, groups, devices and special modes kept in `user.rsync.%stat`.
    pub(crate) fake_super: bool,
    /// `--delay-updates`: changed files wait in `.~tmp~` until the end of the transfer.
    pub(crate) delay_updates: bool,
    /// `--compare-dest`, `--copy-dest`, `--link-dest`: the trees, in order (relative: to DEST).
    pub(crate) alt_dests: Vec<PathBuf>,
    /// What they are for (one kind per run, as rsync).
    pub(crate) alt_kind: AltKind,
    /// `-T`: temporaries are written in this directory (relative: to DEST), where it is on
    /// the destination's filesystem (elsewhere a rename cannot bring them over: they are
    /// written beside their files, as without it).
    pub(crate) temp_dir: Option<PathBuf>,
    /// `-n`.
    pub(crate) dry_run: bool,
    /// Worker threads (1 when lines are printed, so they come in rsync's order).
    pub(crate) threads: usize,
    /// A listing (`--list-only`, or one operand): nothing is written.
    pub(crate) list_only: bool,
    /// `--hash`: every file's bytes hashed on their way (files left as they are: read back
    /// from DEST), for a manifest of DEST. `base` is DEST.
    pub(crate) hashing: Option<crate::plan::Hashing>,
}

impl SyncPlan {
    /// A plan with rsync's defaults (nothing kept but the data, no recursion) for `sources`
    /// into `dest`, as given (nothing judged): where [`SyncPlan::builder`] starts.
    pub(crate) fn new(sources: Vec<Source>, dest: PathBuf) -> Self {
        SyncPlan {
            sources,
            dest,
            dest_is_dir: false,
            mkpath: false,
            recursive: false,
            dirs: false,
            symlinks: Symlinks::Skip,
            copy_unsafe_links: false,
            safe_links: false,
            keep_dirlinks: false,
            hard_links: false,
            perms: false,
            executability: false,
            owner: false,
            group: false,
            chown: (None, None),
            devices: false,
            specials: false,
            times: false,
            omit_dir_times: false,
            atimes: false,
            acls: false,
            xattrs: false,
            sparse: false,
            one_file_system: false,
            skip_mount_points: false,
            fsync: false,
            open_noatime: false,
            inplace: false,
            quick: QuickCheck::SizeAndTime { window_ns: 0 },
            update: false,
            existing: false,
            ignore_existing: false,
            max_size: None,
            min_size: None,
            delete: None,
            max_delete: None,
            force: false,
            ignore_errors: false,
            remove_source_files: false,
            filters: Arc::new(FilterRules::new()),
            prune_empty_dirs: false,
            relative: false,
            no_implied_dirs: false,
            backup: None,
            chmod: Vec::new(),
            super_user: false,
            fake_super: false,
            delay_updates: false,
            temp_dir: None,
            alt_dests: Vec::new(),
            alt_kind: AltKind::Link,
            dry_run: false,
            threads: 1,
            list_only: false,
            hashing: None,
        }
    }
}

/// Why a plan cannot be built: rsync's words, and its exit code ([`SyncPlanError::code`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncPlanError {
    /// An option, a value or a combination rsync refuses: its syntax or usage error, exit 1.
    #[error("{0}")]
    Usage(String),
    /// A file an option names could not be read (`--exclude-from`, `--include-from`):
    /// rsync's file I/O error, exit 11.
    #[error("[client] {0}")]
    FileIo(String),
}

impl SyncPlanError {
    /// rsync's exit code.
    pub fn code(&self) -> i32 {
        match self {
            SyncPlanError::Usage(_) => 1,
            SyncPlanError::FileIo(_) => 11,
        }
    }

    /// rsync's words for the code, as in its last line (`rsync error: WHY (code N)`).
    pub fn summary(&self) -> &'static str {
        match self {
            SyncPlanError::Usage(_) => "syntax or usage error",
            SyncPlanError::FileIo(_) => "error in file IO",
        }
    }

    /// A rules file that cannot be read is rsync's file I/O error, with the reason's errno in
    /// parentheses as rsync words it; a rule that cannot be parsed is a usage error.
    fn of_filter(err: FilterError, from_file: bool) -> Self {
        let text = err.to_string();
        if !from_file {
            return SyncPlanError::Usage(text);
        }
        let text = match text.rsplit_once(" (os error ") {
            Some((head, n)) => format!("{head} ({n}"),
            None => text,
        };
        SyncPlanError::FileIo(text)
    }
}

fn usage(message: impl Into<String>) -> SyncPlanError {
    SyncPlanError::Usage(message.into())
}

/// Looks up a user (`user`) or group by name for `--chown`; `None`: unknown (the entries keep
/// theirs). The caller's, since it reads the system's databases and warns where it likes.
pub type IdLookup = fn(name: &str, user: bool) -> Option<u32>;

/// One filter option, in command-line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterOption {
    /// `--exclude PATTERN`.
    Exclude(Vec<u8>),
    /// `--include PATTERN`.
    Include(Vec<u8>),
    /// `--filter RULE` (and `-F`'s rules).
    Rule(Vec<u8>),
    /// `--exclude-from FILE` (`-`: standard input).
    ExcludeFrom(PathBuf),
    /// `--include-from FILE`.
    IncludeFrom(PathBuf),
}

/// `--hash`, `--manifest`, `--manifest-format` as given (names not yet read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestRequest {
    /// `--hash ALGO`.
    pub hash: Option<String>,
    /// `--manifest-format FORMAT`.
    pub format: Option<String>,
    /// `--manifest FILE` (`-`: standard output).
    pub manifest: Option<PathBuf>,
}

/// The `--delete*` options as given.
#[derive(Debug, Clone, Copy, Default)]
struct Deletes {
    delete: bool,
    before: bool,
    during: bool,
    after: bool,
    delay: bool,
    excluded: bool,
}

impl Deletes {
    /// Any `--delete*` but `--delete-excluded`.
    fn any_when(&self) -> bool {
        self.delete || self.before || self.during || self.after || self.delay
    }
}

/// A [`SyncPlan`] being put together: rsync's defaults until a setter says otherwise.
#[derive(Debug, Clone)]
#[must_use]
pub struct SyncPlanBuilder {
    plan: SyncPlan,
    operands: Vec<PathBuf>,
    list_only: bool,
    files_from: Option<PathBuf>,
    from0: bool,
    recursive: bool,
    archive_recursive: bool,
    dirs: bool,
    relative: bool,
    no_relative: bool,
    links: bool,
    copy_links: bool,
    devices: bool,
    specials: bool,
    chown: Option<String>,
    lookup: IdLookup,
    checksum: bool,
    ignore_times: bool,
    size_only: bool,
    modify_window: Option<i64>,
    max_size: Option<String>,
    min_size: Option<String>,
    bwlimit: Option<String>,
    deletes: Deletes,
    max_delete: Option<i64>,
    filters: Vec<FilterOption>,
    cvs_exclude: bool,
    backup: bool,
    backup_dir: Option<PathBuf>,
    suffix: Option<String>,
    chmod: Vec<String>,
    compare_dest: Vec<PathBuf>,
    copy_dest: Vec<PathBuf>,
    link_dest: Vec<PathBuf>,
    delay_updates: bool,
    manifest: ManifestRequest,
    lines_on_stdout: bool,
    tee: bool,
    threads: Option<usize>,
}

/// The most worker threads a sync runs (the command line refuses more before the builder
/// sees them).
pub const MAX_THREADS: usize = 256;

/// Numbers only: a name is unknown.
fn numeric_ids(name: &str, _user: bool) -> Option<u32> {
    name.parse().ok()
}

impl SyncPlan {
    /// A builder for a sync of `operands`, rsync's in command-line order: the sources, then
    /// DEST (one operand alone is listed, as rsync lists it).
    pub fn builder(operands: Vec<PathBuf>) -> SyncPlanBuilder {
        SyncPlanBuilder {
            plan: SyncPlan::new(Vec::new(), PathBuf::new()),
            operands,
            list_only: false,
            files_from: None,
            from0: false,
            recursive: false,
            archive_recursive: false,
            dirs: false,
            relative: false,
            no_relative: false,
            links: false,
            copy_links: false,
            devices: false,
            specials: false,
            chown: None,
            lookup: numeric_ids,
            checksum: false,
            ignore_times: false,
            size_only: false,
            modify_window: None,
            max_size: None,
            min_size: None,
            bwlimit: None,
            deletes: Deletes::default(),
            max_delete: None,
            filters: Vec::new(),
            cvs_exclude: false,
            backup: false,
            backup_dir: None,
            suffix: None,
            chmod: Vec::new(),
            compare_dest: Vec::new(),
            copy_dest: Vec::new(),
            link_dest: Vec::new(),
            delay_updates: false,
            manifest: ManifestRequest::default(),
            lines_on_stdout: false,
            tee: false,
            threads: None,
        }
    }

    /// DEST.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// `-n` (also a listing's).
    pub fn dry_run(&self) -> bool {
        self.dry_run
    }

    /// A listing (`--list-only`, or one operand): nothing is written.
    pub fn list_only(&self) -> bool {
        self.list_only
    }

    /// `--hash`: what is hashed, and where the manifest goes.
    pub fn hashing(&self) -> Option<&Hashing> {
        self.hashing.as_ref()
    }

    /// The same sync into another DEST (`--tee`): hashing as this one does, its names relative
    /// to that DEST, with no manifest file of its own (the main sync writes the one manifest).
    pub fn for_tee(&self, dest: PathBuf) -> SyncPlan {
        let mut plan = self.clone();
        plan.dest = dest;
        let base = plan.manifest_base();
        if let Some(h) = &mut plan.hashing {
            h.base = base;
            h.manifest = None;
        }
        plan
    }

    /// What a manifest's names are relative to: DEST, unless DEST is the name one file is
    /// synced to (a single source that is not a directory, DEST no directory and not written
    /// `DEST/`), where it is DEST's directory, as for cp.
    fn manifest_base(&self) -> PathBuf {
        let one_file = match &self.sources[..] {
            [only] => std::fs::metadata(&only.path).is_ok_and(|m| !m.is_dir()),
            _ => false,
        };
        if one_file && !self.dest_is_dir && !self.dest.is_dir() {
            return match self.dest.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
        }
        self.dest.clone()
    }
}

/// Setters that store their value in the plan's field of the same name.
macro_rules! plan_setters {
    ($($(#[$doc:meta])* $field:ident: $ty:ty,)*) => {
        $(
            $(#[$doc])*
            pub fn $field(mut self, value: $ty) -> Self {
                self.plan.$field = value;
                self
            }
        )*
    };
}

/// Setters that store their value in the builder's field of the same name, judged by
/// [`SyncPlanBuilder::build`].
macro_rules! option_setters {
    ($($(#[$doc:meta])* $field:ident: $ty:ty,)*) => {
        $(
            $(#[$doc])*
            pub fn $field(mut self, value: $ty) -> Self {
                self.$field = value;
                self
            }
        )*
    };
}

impl SyncPlanBuilder {
    plan_setters! {
        /// `--mkpath`: DEST's missing parents are made.
        mkpath: bool,
        /// `--copy-unsafe-links`.
        copy_unsafe_links: bool,
        /// `--safe-links`.
        safe_links: bool,
        /// `-K`.
        keep_dirlinks: bool,
        /// `-H`.
        hard_links: bool,
        /// `-p` (as the command line left it: `-a`, `-A` and `--no-p` read in order).
        perms: bool,
        /// `-E`.
        executability: bool,
        /// `-o`.
        owner: bool,
        /// `-g`.
        group: bool,
        /// `-t`.
        times: bool,
        /// `-O` (backups beside their files imply it).
        omit_dir_times: bool,
        /// `-U`.
        atimes: bool,
        /// `-A`.
        acls: bool,
        /// `-X`.
        xattrs: bool,
        /// `-S`.
        sparse: bool,
        /// `--fsync`.
        fsync: bool,
        /// `--open-noatime`.
        open_noatime: bool,
        /// `--inplace`.
        inplace: bool,
        /// `-u`.
        update: bool,
        /// `--existing`.
        existing: bool,
        /// `--ignore-existing`.
        ignore_existing: bool,
        /// `--force`.
        force: bool,
        /// `--ignore-errors`.
        ignore_errors: bool,
        /// `--remove-source-files`.
        remove_source_files: bool,
        /// `-m`.
        prune_empty_dirs: bool,
        /// `--no-implied-dirs`.
        no_implied_dirs: bool,
        /// `-T DIR`.
        temp_dir: Option<PathBuf>,
        /// `--super`.
        super_user: bool,
        /// `--fake-super`.
        fake_super: bool,
        /// `-n` (a listing is one too).
        dry_run: bool,
    }

    option_setters! {
        /// `--list-only` (one operand implies it).
        list_only: bool,
        /// `--files-from FILE` (`-`: standard input): the paths listed, below the one source.
        files_from: Option<PathBuf>,
        /// `-0`: the lists of `--files-from`, `--exclude-from`, `--include-from` are
        /// NUL-separated.
        from0: bool,
        /// `-r` itself (the last of `-r` and `--no-r`).
        recursive: bool,
        /// `-a`'s share of `-r`, not undone by a later `--no-r` (`--files-from` drops it).
        archive_recursive: bool,
        /// `-d`.
        dirs: bool,
        /// `-R` (the last of `-R` and `--no-R`).
        relative: bool,
        /// `--no-R` was given: `--files-from` implies no `-R` then.
        no_relative: bool,
        /// `-l` (as the command line left it).
        links: bool,
        /// `-L`.
        copy_links: bool,
        /// `--devices` (as the command line left it, `-D` and `-a` included).
        devices: bool,
        /// `--specials` (as the command line left it).
        specials: bool,
        /// `--chown USER:GROUP`, `USER` or `:GROUP` (names or numbers).
        chown: Option<String>,
        /// `-c`.
        checksum: bool,
        /// `-I`.
        ignore_times: bool,
        /// `--size-only`.
        size_only: bool,
        /// `--modify-window NUM` (seconds; none or negative: exact to the nanosecond).
        modify_window: Option<i64>,
        /// `--max-size SIZE`.
        max_size: Option<String>,
        /// `--min-size SIZE`.
        min_size: Option<String>,
        /// `--bwlimit RATE` (checked, no effect locally).
        bwlimit: Option<String>,
        /// `--max-delete NUM` (negative: no deletion, as rsync reads old clients' way).
        max_delete: Option<i64>,
        /// The filter options, in command-line order.
        filters: Vec<FilterOption>,
        /// `-C`.
        cvs_exclude: bool,
        /// `-b`.
        backup: bool,
        /// `--backup-dir DIR` (implies `-b`).
        backup_dir: Option<PathBuf>,
        /// `--suffix SUFFIX`.
        suffix: Option<String>,
        /// `--chmod CHMOD`, each as given.
        chmod: Vec<String>,
        /// `--compare-dest DIR`, in order.
        compare_dest: Vec<PathBuf>,
        /// `--copy-dest DIR`, in order.
        copy_dest: Vec<PathBuf>,
        /// `--link-dest DIR`, in order.
        link_dest: Vec<PathBuf>,
        /// `--delay-updates`.
        delay_updates: bool,
        /// `--hash`, `--manifest`, `--manifest-format`.
        manifest: ManifestRequest,
        /// `-v`, `-i` or `--out-format` print lines on standard output, or `--json` its
        /// document (where `--manifest -` writes).
        lines_on_stdout: bool,
        /// `--tee`: other destinations are synced from the same sources.
        tee: bool,
        /// Worker threads, 1 to [`MAX_THREADS`] (default: 8 a core, at least 16 and at most
        /// 64).
        threads: Option<usize>,
    }

    /// `-x` given `count` times: once, mount points are made empty; twice, left out.
    pub fn one_file_system(mut self, count: u8) -> Self {
        self.plan.one_file_system = count > 0;
        self.plan.skip_mount_points = count > 1;
        self
    }

    /// How `--chown` names are looked up (default: numbers only).
    pub fn id_lookup(mut self, lookup: IdLookup) -> Self {
        self.lookup = lookup;
        self
    }

    /// `--delete` (`--del`).
    pub fn delete(mut self, value: bool) -> Self {
        self.deletes.delete = value;
        self
    }

    /// `--delete-before`.
    pub fn delete_before(mut self, value: bool) -> Self {
        self.deletes.before = value;
        self
    }

    /// `--delete-during`.
    pub fn delete_during(mut self, value: bool) -> Self {
        self.deletes.during = value;
        self
    }

    /// `--delete-after`.
    pub fn delete_after(mut self, value: bool) -> Self {
        self.deletes.after = value;
        self
    }

    /// `--delete-delay`.
    pub fn delete_delay(mut self, value: bool) -> Self {
        self.deletes.delay = value;
        self
    }

    /// `--delete-excluded` (implies `--delete`).
    pub fn delete_excluded(mut self, value: bool) -> Self {
        self.deletes.excluded = value;
        self
    }

    /// Judges and resolves the plan, with rsync's messages in its order: the operands (none,
    /// a remote one, `--files-from`'s list), the combinations options.c refuses, `--chown`,
    /// the quick check and sizes, deletion and the filter rules (a rules file that cannot be
    /// read is exit 11), backups, `--chmod`, the basis directories, `--bwlimit`, then
    /// ringio's own: the manifest and `--tee`.
    pub fn build(mut self) -> Result<SyncPlan, SyncPlanError> {
        let list_only = self.list_only || self.operands.len() == 1;
        self.operands(list_only)?;
        self.plan.list_only = list_only;
        let from_list = self.files_from.is_some();
        self.plan.recursive = self.recursive || (self.archive_recursive && !from_list);
        self.plan.dirs = self.dirs || from_list || list_only;
        self.conflicts(self.plan.recursive || self.plan.dirs)?;
        self.what_to_keep(list_only);
        self.what_to_skip()?;
        self.deletion()?;
        self.history()?;
        let plan = &mut self.plan;
        plan.relative = self.relative || (from_list && !self.no_relative);
        plan.delay_updates = self.delay_updates && !plan.inplace;
        if let Some(rate) = &self.bwlimit {
            SizeArg::BWLIMIT.parse(rate).map_err(usage)?;
        }
        plan.dry_run |= list_only;
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        // Cold, a walk waits on the disk for each directory and inode it reads: more workers
        // than cores keep more of those reads in flight (docs/bench/2026-11-25-sync.md).
        plan.threads = self.threads.unwrap_or((cores * 8).clamp(16, 64));
        if !(1..=MAX_THREADS).contains(&plan.threads) {
            return Err(usage(format!(
                "--threads {}: give 1 to {MAX_THREADS} workers",
                plan.threads
            )));
        }
        self.plan.hashing = self.hashing()?;
        if self.tee && self.plan.remove_source_files {
            return Err(usage(
                "--tee with --remove-source-files: a source could be removed before every DEST has it",
            ));
        }
        Ok(self.plan)
    }

    /// The sources and DEST: none is refused, and so is a remote one; a listing's DEST (one
    /// operand, or `--list-only`) is a path that cannot exist, so every source entry is new
    /// and listed once; `--files-from` lists the sources below the one operand.
    fn operands(&mut self, list_only: bool) -> Result<(), SyncPlanError> {
        if self.operands.is_empty() {
            return Err(usage("a source and a destination are needed (see --help)"));
        }
        if let Some(p) = self.operands.iter().find(|p| remote(p.as_os_str())) {
            return Err(usage(format!(
                "{:?} names a remote host: ringio syncs locally only",
                p.as_os_str().to_string_lossy()
            )));
        }
        let unreachable = PathBuf::from("/proc/self/fd/-1/ringio-list-only");
        let (dest, sources) = match self.operands.split_last() {
            Some((_, [])) | None => (&unreachable, &self.operands[..]),
            Some((_, sources)) if list_only => (&unreachable, sources),
            Some((dest, sources)) => (dest, sources),
        };
        self.plan.sources = match &self.files_from {
            Some(list) => self.listed(list, sources)?,
            None => sources.iter().map(|p| Source { path: p.clone() }).collect(),
        };
        self.plan.dest_is_dir = dest.as_os_str().as_bytes().ends_with(b"/");
        self.plan.dest = dest.clone();
        Ok(())
    }

    /// `--files-from`: the listed paths, each below the one SRC (`SRC/./PATH`, so that -R
    /// keeps PATH). A listed `dir/` (when not recursing) brings the directory's entries too.
    fn listed(&self, list: &Path, sources: &[PathBuf]) -> Result<Vec<Source>, SyncPlanError> {
        let [src] = sources else {
            return Err(usage(
                "--files-from takes exactly one source directory (SRC), then DEST",
            ));
        };
        let text = if list.as_os_str() == "-" {
            let mut text = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut text)
                .map_err(|e| usage(format!("cannot read the --files-from list from stdin: {e}")))?;
            text
        } else {
            crate::read_regular_path(list).map_err(|e| {
                usage(format!(
                    "failed to open files-from file {}: {}",
                    list.display(),
                    crate::quote::reason(&e)
                ))
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
        let base = src.as_os_str().as_bytes();
        let mut out = Vec::new();
        for line in text.split(end) {
            if line.starts_with(b"#") || line.starts_with(b";") {
                continue;
            }
            let mut path = line;
            while let Some(rest) = path.strip_prefix(b"/") {
                path = rest;
            }
            if path.is_empty() {
                continue;
            }
            // No ".." climbs out of SRC: rsync's sanitize_path collapses them.
            let path = super::sanitize_listed(path, !self.no_relative);
            let mut full = base.to_vec();
            full.extend_from_slice(b"/./");
            full.extend_from_slice(&path);
            out.push(Source {
                path: PathBuf::from(OsStr::from_bytes(&full)),
            });
            // "dir/": its own entries come too (a recursive run brings them anyway).
            if path.ends_with(b"/") && !self.recursive {
                out.extend(entries_of(&full));
            }
        }
        Ok(out)
    }

    /// The combinations rsync refuses (options.c's checks, in its order), whether or not
    /// the option they concern takes effect: `--suffix=/x` is refused without `-b` too.
    fn conflicts(&self, dirs: bool) -> Result<(), SyncPlanError> {
        let d = &self.deletes;
        let whens = [d.before, d.during || d.delay, d.after];
        if whens.iter().filter(|w| **w).count() > 1 {
            return Err(usage("You may not combine multiple --delete-WHEN options."));
        }
        let deleting = whens.contains(&true) || d.delete || d.excluded;
        if deleting && !dirs {
            return Err(usage(
                "--delete does not work without --recursive (-r) or --dirs (-d).",
            ));
        }
        let suffix = match (&self.suffix, &self.backup_dir) {
            (Some(s), _) => s.as_str(),
            (None, Some(_)) => "",
            (None, None) => "~",
        };
        if suffix.contains('/') {
            return Err(usage(format!("--suffix cannot contain slashes: {suffix}")));
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
            return Err(usage(
                "--suffix cannot be empty when --backup-dir is the same as the dest dir",
            ));
        }
        if suffix.is_empty() && self.backup_dir.is_none() {
            return Err(usage("--suffix cannot be empty without a --backup-dir"));
        }
        if self.plan.inplace && self.delay_updates {
            return Err(usage("--inplace cannot be used with --delay-updates"));
        }
        Ok(())
    }

    /// Symlinks, `--chown`, devices and specials: a listing shows every symlink (its target
    /// only under -l) and every device and special file.
    fn what_to_keep(&mut self, list_only: bool) {
        let plan = &mut self.plan;
        plan.symlinks = if self.copy_links {
            Symlinks::Follow
        } else if self.links || list_only {
            Symlinks::Keep
        } else {
            Symlinks::Skip
        };
        if let Some(spec) = &self.chown {
            let (user, group) = spec.split_once(':').unwrap_or((spec, ""));
            let id = |name: &str, user| (!name.is_empty()).then(|| (self.lookup)(name, user));
            plan.chown = (id(user, true).flatten(), id(group, false).flatten());
        }
        plan.devices = self.devices || list_only;
        plan.specials = self.specials || list_only;
    }

    /// The quick check and the size limits.
    fn what_to_skip(&mut self) -> Result<(), SyncPlanError> {
        let window_ns = match self.modify_window {
            Some(n) if n > 0 => (n as u64).saturating_mul(1_000_000_000),
            _ => 0,
        };
        self.plan.quick = if self.checksum {
            QuickCheck::Checksum
        } else if self.ignore_times {
            QuickCheck::Never
        } else if self.size_only {
            QuickCheck::SizeOnly
        } else {
            QuickCheck::SizeAndTime { window_ns }
        };
        let size = |text: &Option<String>, arg: SizeArg| {
            text.as_deref()
                .map(|s| arg.parse(s).map_err(usage))
                .transpose()
        };
        self.plan.max_size = size(&self.max_size, SizeArg::MAX_SIZE)?;
        self.plan.min_size = size(&self.min_size, SizeArg::MIN_SIZE)?;
        Ok(())
    }

    /// When deletions happen, how many may, and the filter rules.
    fn deletion(&mut self) -> Result<(), SyncPlanError> {
        let d = self.deletes;
        self.plan.delete = if d.before {
            Some(DeleteWhen::Before)
        } else if d.after {
            Some(DeleteWhen::After)
        } else if d.delay {
            Some(DeleteWhen::Delay)
        } else if d.delete || d.during || d.excluded {
            Some(DeleteWhen::During)
        } else {
            None
        };
        // rsync: a negative limit (old clients' way to write 0) allows no deletion either;
        // --max-delete alone deletes nothing.
        self.plan.max_delete = self.max_delete.map(|n| n.max(0) as u64);
        self.plan.filters = Arc::new(self.filter_rules()?);
        Ok(())
    }

    /// The filter rules, in command-line order (`-C`'s first); backups beside their files
    /// are protected from a deletion unless `--delete-excluded`, as rsync protects them.
    fn filter_rules(&self) -> Result<FilterRules, SyncPlanError> {
        let mut rules = FilterRules::new();
        rules.set_from0(self.from0);
        if self.cvs_exclude {
            rules.cvs_exclude();
        }
        for option in &self.filters {
            match option {
                FilterOption::Exclude(p) => rules.add_exclude(p),
                FilterOption::Include(p) => rules.add_include(p),
                FilterOption::Rule(r) => rules
                    .add_rule(r)
                    .map_err(|e| SyncPlanError::of_filter(e, false))?,
                FilterOption::ExcludeFrom(f) => rules
                    .read_from(f, ListKind::Exclude, self.from0)
                    .map_err(|e| SyncPlanError::of_filter(e, true))?,
                FilterOption::IncludeFrom(f) => rules
                    .read_from(f, ListKind::Include, self.from0)
                    .map_err(|e| SyncPlanError::of_filter(e, true))?,
            }
        }
        let backups_beside = self.backup && self.backup_dir.is_none();
        if backups_beside && self.deletes.any_when() && !self.deletes.excluded {
            let suffix = self.suffix.as_deref().unwrap_or("~");
            rules
                .add_rule(format!("P *{suffix}").as_bytes())
                .map_err(|e| SyncPlanError::of_filter(e, false))?;
        }
        rules.set_delete_excluded(self.deletes.excluded);
        Ok(rules)
    }

    /// Backups, `--chmod` and the basis directories (one kind, at most 20, as rsync).
    fn history(&mut self) -> Result<(), SyncPlanError> {
        if self.backup || self.backup_dir.is_some() {
            let dir = self.backup_dir.clone();
            let suffix = self.suffix.clone().unwrap_or_else(|| {
                if dir.is_some() {
                    String::new()
                } else {
                    "~".into()
                }
            });
            if dir.is_none() {
                // rsync: backups beside the files imply -O, and a deletion spares them.
                self.plan.omit_dir_times = true;
            }
            self.plan.backup = Some(Backups { dir, suffix });
        }
        for text in &self.chmod {
            self.plan
                .chmod
                .extend(chmod::parse(text).map_err(SyncPlanError::Usage)?);
        }
        let kinds = [
            (&self.compare_dest, AltKind::Compare),
            (&self.copy_dest, AltKind::Copy),
            (&self.link_dest, AltKind::Link),
        ];
        let given: Vec<_> = kinds.iter().filter(|(dirs, _)| !dirs.is_empty()).collect();
        if given.len() > 1 {
            return Err(usage(
                "You may not mix --compare-dest, --copy-dest, and --link-dest.",
            ));
        }
        if let Some((dirs, kind)) = given.first() {
            if dirs.len() > 20 {
                return Err(usage(
                    "ERROR: at most 20 basis directories may be specified",
                ));
            }
            self.plan.alt_dests = dirs.to_vec();
            self.plan.alt_kind = *kind;
        }
        Ok(())
    }

    /// `--hash`, `--manifest`, `--manifest-format`, for a manifest of DEST.
    fn hashing(&self) -> Result<Option<Hashing>, SyncPlanError> {
        let request = &self.manifest;
        let algo = request
            .hash
            .as_deref()
            .map(|v| crate::manifest::choice("--hash", v, Algo::ALL))
            .transpose()
            .map_err(SyncPlanError::Usage)?;
        let format = request
            .format
            .as_deref()
            .map(|v| crate::manifest::choice("--manifest-format", v, Format::ALL))
            .transpose()
            .map_err(SyncPlanError::Usage)?;
        let writes = request.manifest.is_some() || format == Some(Format::Mhl);
        if format.is_some() && !writes {
            return Err(usage(
                "--manifest-format needs --manifest FILE (mhl alone writes into DEST)",
            ));
        }
        if algo.is_some() && !writes {
            return Err(usage(
                "--hash needs --manifest FILE or --manifest-format=mhl",
            ));
        }
        if !writes {
            return Ok(None);
        }
        if self.plan.dry_run {
            return Err(usage(
                "--manifest lists what DEST holds: it cannot be written by a dry run (-n)",
            ));
        }
        let stdout = request
            .manifest
            .as_ref()
            .is_some_and(|m| m.as_os_str() == "-");
        if stdout && self.lines_on_stdout {
            return Err(usage("--manifest - writes to standard output: it cannot be shared with -v, -i, --out-format or --json"));
        }
        let hash = crate::HashRequest {
            algo: algo.unwrap_or(Algo::Xxh128),
            format: format.unwrap_or_default(),
            manifest: request.manifest.clone(),
        };
        let sources: Vec<&Path> = self.plan.sources.iter().map(|s| s.path.as_path()).collect();
        let force = if self.plan.force {
            Ok("--force")
        } else {
            Err("--force")
        };
        hash.settle(self.plan.manifest_base(), &sources, force)
            .map(Some)
            .map_err(SyncPlanError::Usage)
    }
}

/// The entries of the directory `dir` (none if it cannot be read), sorted by name.
fn entries_of(dir: &[u8]) -> Vec<Source> {
    let Ok(entries) = std::fs::read_dir(OsStr::from_bytes(dir)) else {
        return Vec::new();
    };
    let mut names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let mut entry = dir.to_vec();
            entry.extend_from_slice(name.as_bytes());
            Source {
                path: PathBuf::from(OsStr::from_bytes(&entry)),
            }
        })
        .collect()
}

/// An operand on another host (`HOST:PATH`, `USER@HOST:PATH`, `rsync://`).
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A builder for `a b` (a source, DEST), nothing of which is looked at unless an option
    /// reads a file.
    fn two() -> SyncPlanBuilder {
        SyncPlan::builder(vec![PathBuf::from("a"), PathBuf::from("b")])
    }

    type Options = fn(SyncPlanBuilder) -> SyncPlanBuilder;

    /// Option sets rsync refuses, with its message and exit code; where two refusals meet,
    /// the one rsync makes first.
    #[test]
    fn refusals_in_rsyncs_words_and_order() {
        let bad_rule = FilterRules::new()
            .add_rule(b"bogus")
            .unwrap_err()
            .to_string();
        let bad_chmod = chmod::parse("q+z").unwrap_err();
        let table: Vec<(&str, Options, String, i32)> = vec![
            ("no operand", |_| SyncPlan::builder(vec![]), "a source and a destination are needed (see --help)".into(), 1),
            ("remote source", |_| SyncPlan::builder(vec!["host:x".into(), "d".into()]), "\"host:x\" names a remote host: ringio syncs locally only".into(), 1),
            ("remote dest", |_| SyncPlan::builder(vec!["a".into(), "rsync://h/m".into()]), "\"rsync://h/m\" names a remote host: ringio syncs locally only".into(), 1),
            ("files-from, two sources", |_| SyncPlan::builder(vec!["a".into(), "b".into(), "d".into()]).files_from(Some("-".into())), "--files-from takes exactly one source directory (SRC), then DEST".into(), 1),
            ("two --delete-WHEN", |b| b.recursive(true).delete_before(true).delete_after(true), "You may not combine multiple --delete-WHEN options.".into(), 1),
            ("--delete without -r", |b| b.delete(true), "--delete does not work without --recursive (-r) or --dirs (-d).".into(), 1),
            ("--delete-excluded without -r", |b| b.delete_excluded(true), "--delete does not work without --recursive (-r) or --dirs (-d).".into(), 1),
            ("the list is read before the conflicts", |_| SyncPlan::builder(vec!["/nonexistent-ringio".into(), "d".into()]).delete(true).delete_before(true).delete_after(true).files_from(Some("/nonexistent-ringio/list".into())), "failed to open files-from file /nonexistent-ringio/list: No such file or directory".into(), 1),
            ("WHEN before --delete alone", |b| b.delete_before(true).delete_after(true), "You may not combine multiple --delete-WHEN options.".into(), 1),
            ("a slash in the suffix, without -b", |b| b.suffix(Some("x/y".into())), "--suffix cannot contain slashes: x/y".into(), 1),
            ("empty suffix, backup dir is DEST", |b| b.backup_dir(Some("././".into())), "--suffix cannot be empty when --backup-dir is the same as the dest dir".into(), 1),
            ("empty suffix beside", |b| b.backup(true).suffix(Some(String::new())), "--suffix cannot be empty without a --backup-dir".into(), 1),
            ("--inplace --delay-updates", |b| b.inplace(true).delay_updates(true), "--inplace cannot be used with --delay-updates".into(), 1),
            ("conflict before a bad size", |b| b.inplace(true).delay_updates(true).max_size(Some("ten".into())), "--inplace cannot be used with --delay-updates".into(), 1),
            ("--max-size", |b| b.max_size(Some("ten".into())), "--max-size=ten is invalid".into(), 1),
            ("--min-size unit", |b| b.min_size(Some("1Q".into())), "--min-size=1Q is invalid".into(), 1),
            ("max before min", |b| b.min_size(Some("x".into())).max_size(Some("y".into())), "--max-size=y is invalid".into(), 1),
            ("a filter rule", |b| b.filters(vec![FilterOption::Rule(b"bogus".to_vec())]), bad_rule.clone(), 1),
            ("a rules file is file I/O", |b| b.filters(vec![FilterOption::ExcludeFrom("/nonexistent-ringio/x".into())]), String::new(), 11),
            ("rules in order", |b| b.filters(vec![FilterOption::Rule(b"bogus".to_vec()), FilterOption::ExcludeFrom("/nonexistent-ringio/x".into())]), bad_rule.clone(), 1),
            ("size before filters", |b| b.max_size(Some("ten".into())).filters(vec![FilterOption::Rule(b"bogus".to_vec())]), "--max-size=ten is invalid".into(), 1),
            ("--chmod", |b| b.chmod(vec!["q+z".into()]), bad_chmod.clone(), 1),
            ("filters before --chmod", |b| b.chmod(vec!["q+z".into()]).filters(vec![FilterOption::Rule(b"bogus".to_vec())]), bad_rule, 1),
            ("two kinds of basis", |b| b.compare_dest(vec!["x".into()]).link_dest(vec!["y".into()]), "You may not mix --compare-dest, --copy-dest, and --link-dest.".into(), 1),
            ("21 basis directories", |b| b.link_dest(vec![PathBuf::from("x"); 21]), "ERROR: at most 20 basis directories may be specified".into(), 1),
            ("--chmod before basis", |b| b.chmod(vec!["q+z".into()]).copy_dest(vec!["x".into()]).link_dest(vec!["y".into()]), bad_chmod, 1),
            ("--bwlimit", |b| b.bwlimit(Some("fast".into())), "--bwlimit=fast is invalid".into(), 1),
            ("--hash name", |b| b.manifest(ManifestRequest { hash: Some("crc".into()), ..Default::default() }), crate::manifest::choice("--hash", "crc", Algo::ALL).unwrap_err(), 1),
            ("--hash alone", |b| b.manifest(ManifestRequest { hash: Some("md5".into()), ..Default::default() }), "--hash needs --manifest FILE or --manifest-format=mhl".into(), 1),
            ("--manifest-format alone", |b| b.manifest(ManifestRequest { format: Some("json".into()), ..Default::default() }), "--manifest-format needs --manifest FILE (mhl alone writes into DEST)".into(), 1),
            ("--manifest -n", |b| b.dry_run(true).manifest(ManifestRequest { manifest: Some("m".into()), ..Default::default() }), "--manifest lists what DEST holds: it cannot be written by a dry run (-n)".into(), 1),
            ("a listing is a dry run", |_| SyncPlan::builder(vec!["a".into()]).manifest(ManifestRequest { manifest: Some("m".into()), ..Default::default() }), "--manifest lists what DEST holds: it cannot be written by a dry run (-n)".into(), 1),
            ("--manifest - with -v", |b| b.lines_on_stdout(true).manifest(ManifestRequest { manifest: Some("-".into()), ..Default::default() }), "--manifest - writes to standard output: it cannot be shared with -v, -i, --out-format or --json".into(), 1),
            ("--tee --remove-source-files", |b| b.tee(true).remove_source_files(true), "--tee with --remove-source-files: a source could be removed before every DEST has it".into(), 1),
            ("no worker", |b| b.threads(Some(0)), "--threads 0: give 1 to 256 workers".into(), 1),
            ("too many workers", |b| b.threads(Some(257)), "--threads 257: give 1 to 256 workers".into(), 1),
            ("--bwlimit before --tee", |b| b.tee(true).remove_source_files(true).bwlimit(Some("x".into())), "--bwlimit=x is invalid".into(), 1),
        ];
        for (what, options, message, code) in table {
            let err = options(two()).build().expect_err(what);
            assert_eq!(err.code(), code, "{what}: {err}");
            if code == 11 {
                assert!(matches!(err, SyncPlanError::FileIo(_)), "{what}: {err:?}");
                assert!(err.to_string().starts_with("[client] "), "{what}: {err}");
                // rsync's words for the reason: its errno in parentheses.
                assert!(err.to_string().ends_with("(2)"), "{what}: {err}");
                assert_eq!(err.summary(), "error in file IO");
            } else {
                assert_eq!(err.to_string(), message, "{what}");
                assert_eq!(err.summary(), "syntax or usage error");
            }
        }
    }

    /// Option sets rsync accepts, where a default depends on other options.
    #[test]
    fn defaults_that_follow_other_options() {
        let plan = two().build().unwrap();
        assert_eq!(plan.dest(), Path::new("b"));
        assert!(!plan.recursive && !plan.dirs && !plan.list_only() && !plan.dry_run());
        assert_eq!(plan.symlinks, Symlinks::Skip);
        assert!(plan.threads >= 16 && plan.threads <= 64);
        // One operand is listed: a dry run into no DEST, every symlink, device and special.
        let plan = SyncPlan::builder(vec!["a/".into()]).build().unwrap();
        assert!(plan.list_only() && plan.dry_run() && plan.dirs && plan.devices && plan.specials);
        assert_eq!(plan.symlinks, Symlinks::Keep);
        assert_eq!(plan.sources[0].path, Path::new("a/"));
        assert!(!plan.dest().starts_with("b"));
        // -a's -r, -d and DEST/.
        let plan = SyncPlan::builder(vec!["a".into(), "b/".into()])
            .archive_recursive(true)
            .build()
            .unwrap();
        assert!(plan.recursive && plan.dest_is_dir);
        // Backups beside their files imply -O and are protected from a deletion.
        let plan = two()
            .recursive(true)
            .backup(true)
            .delete(true)
            .build()
            .unwrap();
        let backups = plan.backup.as_ref().unwrap();
        assert!(backups.dir.is_none() && backups.suffix == "~" && plan.omit_dir_times);
        assert!(!plan.filters.is_empty());
        assert_eq!(plan.delete, Some(DeleteWhen::During));
        // ... not with --delete-excluded, nor into a backup directory (suffix empty there).
        let excluded = two().recursive(true).backup(true).delete_excluded(true);
        assert!(excluded.build().unwrap().filters.is_empty());
        let plan = two().backup_dir(Some("old".into())).build().unwrap();
        let backups = plan.backup.as_ref().unwrap();
        assert!(backups.suffix.is_empty() && !plan.omit_dir_times && plan.filters.is_empty());
        // --delete-WHEN, --max-delete, the quick check, sizes, --delay-updates.
        let plan = two()
            .dirs(true)
            .delete_delay(true)
            .max_delete(Some(-3))
            .checksum(true)
            .size_only(true)
            .max_size(Some("1G-1".into()))
            .min_size(Some("1.5k".into()))
            .build()
            .unwrap();
        assert_eq!(plan.delete, Some(DeleteWhen::Delay));
        assert_eq!(plan.max_delete, Some(0));
        // --delete-delay is a --delete-during whose deletions wait: the two are one WHEN.
        let both = two().recursive(true).delete_during(true).delete_delay(true);
        assert_eq!(both.build().unwrap().delete, Some(DeleteWhen::Delay));
        assert_eq!(plan.quick, QuickCheck::Checksum);
        assert_eq!(plan.max_size, Some((1 << 30) - 1));
        assert_eq!(plan.min_size, Some(1536));
        let plan = two().modify_window(Some(2)).build().unwrap();
        assert_eq!(
            plan.quick,
            QuickCheck::SizeAndTime {
                window_ns: 2_000_000_000
            }
        );
        assert!(two().delay_updates(true).build().unwrap().delay_updates);
        // -L over -l; -x twice; --chown through the lookup given (numbers by default).
        let plan = two()
            .links(true)
            .copy_links(true)
            .one_file_system(2)
            .chown(Some("7:staff".into()))
            .build()
            .unwrap();
        assert_eq!(plan.symlinks, Symlinks::Follow);
        assert!(plan.one_file_system && plan.skip_mount_points);
        assert_eq!(plan.chown, (Some(7), None));
        let plan = two()
            .chown(Some(":staff".into()))
            .id_lookup(|name, user| (name == "staff" && !user).then_some(50))
            .build()
            .unwrap();
        assert_eq!(plan.chown, (None, Some(50)));
        // One kind of basis directory, up to 20, in order.
        let plan = two()
            .copy_dest(vec![PathBuf::from("x"); 20])
            .build()
            .unwrap();
        assert_eq!(plan.alt_kind, AltKind::Copy);
        assert_eq!(plan.alt_dests.len(), 20);
        assert_eq!(two().threads(Some(3)).build().unwrap().threads, 3);
    }

    /// `--files-from`: -R and -d implied (not with --no-R), -a's -r not; each path below SRC.
    #[test]
    fn files_from_implies_relative_and_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let list = tmp.path().join("list");
        std::fs::write(&list, "# comment\n/x\n../y\r\n\n").unwrap();
        let build = |no_relative| {
            SyncPlan::builder(vec!["src".into(), "d".into()])
                .files_from(Some(list.clone()))
                .archive_recursive(true)
                .no_relative(no_relative)
                .build()
                .unwrap()
        };
        let plan = build(false);
        assert!(plan.relative && plan.dirs && !plan.recursive);
        let paths: Vec<_> = plan.sources.iter().map(|s| s.path.clone()).collect();
        assert_eq!(paths, [PathBuf::from("src/./x"), PathBuf::from("src/./y")]);
        assert!(!build(true).relative);
    }

    #[test]
    fn remote_operands() {
        assert!(remote(OsStr::new("host:path")));
        assert!(remote(OsStr::new("user@host:/p")));
        assert!(remote(OsStr::new("rsync://h/m")));
        assert!(!remote(OsStr::new("./a:b")));
        assert!(!remote(OsStr::new("/x/y")));
    }

    /// `--tee`: the same plan into another DEST, hashing there without a manifest file.
    #[test]
    fn a_tee_hashes_without_a_manifest_file() {
        let tmp = tempfile::tempdir().unwrap();
        let plan = SyncPlan::builder(vec![tmp.path().join("src"), tmp.path().join("d")])
            .manifest(ManifestRequest {
                manifest: Some(tmp.path().join("m")),
                ..Default::default()
            })
            .build()
            .unwrap();
        assert_eq!(plan.hashing().unwrap().base, tmp.path().join("d"));
        let tee = plan.for_tee(tmp.path().join("e"));
        assert_eq!(tee.dest(), tmp.path().join("e"));
        let hashing = tee.hashing().unwrap();
        assert_eq!(hashing.base, tmp.path().join("e"));
        assert!(hashing.manifest.is_none());
    }
}
