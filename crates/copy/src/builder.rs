//! Building a [`CopyPlan`]: a front end sets what its options asked for on a [`PlanBuilder`],
//! then [`PlanBuilder::build`] validates them in one step, in GNU cp's order (the backup type,
//! the security context, then the operands): it reads the environment, resolves the operands
//! into roots and stats each root once. Nothing changes the plan after that.

use std::fmt;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::backup::{backup_path, simple_backup_suffix};
use crate::digest::Algo;
use crate::manifest::Format;
use crate::plan::{
    stat_source, Backup, BackupMode, CopyPlan, CopyRoot, Dereference, Engine, Hashing, LinkMode,
    Overwrite, Preserve, Reflink, Sparse, Tuning,
};
use crate::quote::quote;

/// Reads a backup type as the front end's option parser reads it (GNU's argmatch: any
/// unambiguous prefix), or returns its message, which names `context` (`backup type` for the
/// option, `$VERSION_CONTROL` for the variable). `None`: no backups (`none`, `off`).
pub type BackupTypeReader =
    fn(value: &[u8], context: &'static str) -> Result<Option<BackupMode>, String>;

/// `--backup[=CONTROL]`, `-b` and `-S` as given. [`PlanBuilder::build`] resolves them as GNU
/// cp does: the type given, else $VERSION_CONTROL, else `existing`; the suffix given, else
/// $SIMPLE_BACKUP_SUFFIX, else `~` (also in place of an unusable one).
#[derive(Debug, Clone)]
pub struct BackupRequest {
    /// The type given with `--backup=CONTROL` (`None`: `-b`, `--backup` or `-S` alone).
    pub control: Option<String>,
    /// `-S SUFFIX`.
    pub suffix: Option<String>,
    /// How a type name is read.
    pub read: BackupTypeReader,
}

impl BackupRequest {
    fn resolve(&self) -> Result<Option<Backup>, PlanError> {
        let given = self.control.as_deref().filter(|v| !v.is_empty());
        let mode = match given {
            Some(v) => (self.read)(v.as_bytes(), "backup type"),
            None => match std::env::var_os("VERSION_CONTROL").filter(|v| !v.is_empty()) {
                Some(v) => (self.read)(v.as_bytes(), "$VERSION_CONTROL"),
                None => Ok(Some(BackupMode::Existing)),
            },
        }
        .map_err(PlanError::usage)?;
        let Some(mode) = mode else {
            return Ok(None);
        };
        let from_env = std::env::var("SIMPLE_BACKUP_SUFFIX").ok();
        let suffix = simple_backup_suffix(self.suffix.as_deref(), from_env.as_deref());
        Ok(Some(Backup {
            mode,
            suffix: suffix.to_string(),
        }))
    }
}

/// Why a plan cannot be built: cp's words, and whether it is a usage error (which a front end
/// follows with its pointer to `--help`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError {
    message: String,
    usage: bool,
}

impl PlanError {
    fn usage(message: impl Into<String>) -> Self {
        PlanError {
            message: message.into(),
            usage: true,
        }
    }

    fn refused(message: impl Into<String>) -> Self {
        PlanError {
            message: message.into(),
            usage: false,
        }
    }

    /// True for a usage error (a missing or extra operand, an unknown backup type), which
    /// GNU cp follows with "Try 'cp --help' for more information."
    pub fn is_usage(&self) -> bool {
        self.usage
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PlanError {}

/// A [`CopyPlan`] being put together: cp's defaults until a setter says otherwise.
#[derive(Debug, Clone)]
#[must_use]
pub struct PlanBuilder {
    plan: CopyPlan,
    dereference: Option<Dereference>,
    paths: Vec<PathBuf>,
    target_directory: Option<PathBuf>,
    no_target_directory: bool,
    parents: bool,
    strip_trailing_slashes: bool,
    backup: Option<BackupRequest>,
    preserve_context: bool,
    hashing: Option<HashRequest>,
}

impl CopyPlan {
    /// A builder for the copy of `paths`, cp's operands in command-line order: the sources
    /// and, without [`PlanBuilder::target_directory`], the target last.
    pub fn builder(paths: Vec<PathBuf>) -> PlanBuilder {
        PlanBuilder {
            plan: CopyPlan::new(Vec::new(), false),
            dereference: None,
            paths,
            target_directory: None,
            no_target_directory: false,
            parents: false,
            strip_trailing_slashes: false,
            backup: None,
            preserve_context: false,
            hashing: None,
        }
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

impl PlanBuilder {
    plan_setters! {
        /// `-r`: copy directories recursively (default: no).
        recursive: bool,
        /// Metadata to carry over (default: none).
        preserve: Preserve,
        /// An explicit `--no-preserve=mode`: new entries get the default modes.
        default_modes: bool,
        /// What happens to an existing destination (default: replaced).
        overwrite: Overwrite,
        /// `-f`.
        force: bool,
        /// How bytes move (default: io_uring).
        engine: Engine,
        /// Engine knobs, as asked (a run fits them to its limits).
        tuning: Tuning,
        /// Hole handling (default: auto).
        sparse: Sparse,
        /// Extent sharing (default: auto).
        reflink: Reflink,
        /// `--remove-destination`.
        remove_destination: bool,
        /// `--atomic`.
        atomic: bool,
        /// `--fsync`.
        fsync: bool,
        /// `-x`.
        one_file_system: bool,
        /// `--direct` (only with the aio engine).
        direct: bool,
        /// `--copy-contents`.
        copy_contents: bool,
        /// `-l`, `-s` (default: copies).
        link: LinkMode,
        /// `--attributes-only`.
        attributes_only: bool,
    }

    /// `-P`, `-L`, `-H` (default: `-P` with `-r`, `-H` without).
    pub fn dereference(mut self, value: Dereference) -> Self {
        self.dereference = Some(value);
        self
    }

    /// `--backup`, `-b`, `-S` (default: no backups).
    pub fn backup(mut self, request: Option<BackupRequest>) -> Self {
        self.backup = request;
        self
    }

    /// `--preserve=context` is required: refused, as ringio keeps no security context.
    pub fn preserve_context(mut self, required: bool) -> Self {
        self.preserve_context = required;
        self
    }

    /// `-t DIR`: every operand is a source, copied into `DIR`.
    pub fn target_directory(mut self, dir: Option<PathBuf>) -> Self {
        self.target_directory = dir;
        self
    }

    /// `-T`: the last operand is the destination itself, never a directory to copy into.
    pub fn no_target_directory(mut self, value: bool) -> Self {
        self.no_target_directory = value;
        self
    }

    /// `--hash` and `--manifest`: every file's bytes hashed as they are copied.
    pub fn hashing(mut self, request: Option<HashRequest>) -> Self {
        self.hashing = request;
        self
    }

    /// `--parents`: each source keeps its whole path under the target directory.
    pub fn parents(mut self, value: bool) -> Self {
        self.parents = value;
        self
    }

    /// `--strip-trailing-slashes`.
    pub fn strip_trailing_slashes(mut self, value: bool) -> Self {
        self.strip_trailing_slashes = value;
        self
    }

    /// Validates and resolves the plan, with cp's messages in GNU cp's order: the backup type
    /// ($VERSION_CONTROL, $SIMPLE_BACKUP_SUFFIX), the security context, the operands (the
    /// target is stat'ed once), `--direct`; then `cp -fb F F` becomes a copy to F's backup
    /// name, $POSIXLY_CORRECT is read, and each source root is stat'ed once for the run.
    pub fn build(self) -> Result<CopyPlan, PlanError> {
        let mut plan = self.plan;
        if let Some(dereference) = self.dereference {
            plan.dereference = dereference;
        } else if plan.recursive {
            plan.dereference = Dereference::Never;
        }
        let mut backup = match &self.backup {
            Some(request) => request.resolve()?,
            None => None,
        };
        if self.preserve_context {
            return Err(PlanError::refused(
                "cannot preserve security context without an SELinux-enabled kernel",
            ));
        }
        let operands = Operands {
            paths: self.paths,
            target_directory: self.target_directory,
            no_target_directory: self.no_target_directory,
            parents: self.parents,
            strip_trailing_slashes: self.strip_trailing_slashes,
        };
        let (mut roots, target, into) = operands.resolve()?;
        if plan.direct && plan.engine != Engine::Aio {
            return Err(PlanError::refused("--direct is for --engine aio"));
        }
        // `cp -fb F F`: F is copied to its backup name, as GNU cp does, instead of onto itself.
        // Here the source is the target, whose stat says whether it is a regular file.
        if let ([root], Some(policy)) = (roots.as_mut_slice(), &backup) {
            if plan.force
                && root.src == root.dst
                && root.parents.is_none()
                && target.as_ref().is_ok_and(|m| m.is_file())
            {
                root.dst = backup_path(&root.dst, policy).map_err(|e| {
                    PlanError::refused(format!("cannot back up {}: {e}", quote(&root.dst)))
                })?;
                backup = None;
            }
        }
        plan.backup = backup;
        plan.posixly_correct = std::env::var_os("POSIXLY_CORRECT").is_some();
        // Each source once, as the run will look at it. A root whose destination an earlier
        // operand also names waits for a later wave (see `run::waves`), after which its
        // source may have been replaced: it is stat'ed when its turn comes.
        let follow = plan.dereference != Dereference::Never;
        let mut named = std::collections::HashSet::new();
        for root in &mut roots {
            if named.insert(root.dst.clone()) {
                root.stat = Some(
                    stat_source(&root.src, follow)
                        .map_err(|e| e.raw_os_error().unwrap_or(libc::EINVAL)),
                );
            }
        }
        plan.roots = roots;
        plan.dest_root = dest_root(into, &plan.roots);
        if let Some(request) = self.hashing {
            plan.hashing = Some(request.resolve(&plan)?);
        }
        Ok(plan)
    }
}

/// `--hash`, `--manifest`, `--manifest-format` as asked.
#[derive(Debug, Clone)]
pub struct HashRequest {
    /// The algorithm.
    pub algo: Algo,
    /// The manifest's format.
    pub format: Format,
    /// The manifest file (`sum`, `json`).
    pub manifest: Option<PathBuf>,
}

impl HashRequest {
    /// What `plan` hashes and where the manifest goes; `into`: the directory the sources are
    /// copied into, if they are. A manifest that exists, or that is inside a source tree (the
    /// copy would list it, or copy a half-written one), is refused without `-f`; nothing is
    /// copied then.
    fn resolve(self, plan: &CopyPlan) -> Result<Hashing, PlanError> {
        let conflict = if plan.link != LinkMode::Copy {
            Some("-l and -s, which copy no bytes")
        } else if plan.attributes_only {
            Some("--attributes-only, which copies no bytes")
        } else if plan.reflink == Reflink::Always {
            Some("--reflink=always, whose clones pass through no buffer")
        } else if !matches!(plan.engine, Engine::Uring | Engine::ReadWrite) {
            Some("an --engine that moves bytes in the kernel (uring and readwrite hash)")
        } else {
            None
        };
        if let Some(what) = conflict {
            return Err(PlanError::usage(format!(
                "--hash and --manifest cannot be used with {what}"
            )));
        }
        let base = plan.dest_root.clone();
        let sources: Vec<&Path> = plan.roots.iter().map(|r| r.src.as_path()).collect();
        self.settle(base, &sources, plan.force.then_some("-f").ok_or("-f"))
            .map_err(PlanError::refused)
    }

    /// What is hashed, with names relative to `base` (the destination root), copied from
    /// `sources`. `mhl` writes into `base`, so it takes no manifest file; a manifest file that
    /// exists, or that is inside a source tree (the copy would list it, or take along a
    /// half-written one), is refused unless `force` is `Ok` (it holds the option that forces,
    /// either way: `-f` for cp, `--force` for sync).
    pub fn settle(
        self,
        base: PathBuf,
        sources: &[&Path],
        force: Result<&str, &str>,
    ) -> Result<Hashing, String> {
        if self.format == Format::Mhl && crate::manifest::mhl::element_of(self.algo).is_none() {
            let named: Vec<&str> = Algo::ALL
                .iter()
                .filter(|a| crate::manifest::mhl::element_of(**a).is_some())
                .map(|a| a.into())
                .collect();
            return Err(format!(
                "ASC MHL has no {} hashes: --hash {}",
                self.algo,
                named.join(", ")
            ));
        }
        if let (Format::Mhl, Some(m)) = (self.format, &self.manifest) {
            return Err(format!(
                "--manifest-format=mhl writes its ascmhl folder into the destination root {}: \
                 leave out --manifest {}",
                quote(&base),
                quote(m)
            ));
        }
        if let Some(m) = self.manifest.as_ref().filter(|m| m.as_os_str() != "-") {
            if let Err(e) = crate::manifest::replaceable(m) {
                return Err(format!("the manifest {}: {e}", quote(m)));
            }
            if let Err(flag) = force {
                if fs::symlink_metadata(m).is_ok() {
                    return Err(format!(
                        "the manifest {} exists: remove it, or give {flag} to replace it",
                        quote(m)
                    ));
                }
                if let Some(src) = sources.iter().find(|src| inside(m, src)) {
                    return Err(format!(
                        "the manifest {} is inside the source {}: the copy would take it along \
                         (give {flag} to write it there anyway)",
                        quote(m),
                        quote(src)
                    ));
                }
            }
        }
        Ok(Hashing {
            algo: self.algo,
            format: self.format,
            manifest: self.manifest,
            base,
        })
    }
}

/// The destination root, what a manifest's names are relative to: the directory the sources
/// are copied into (`into`); else the copy of a directory; else the directory a file is copied
/// into.
fn dest_root(into: Option<PathBuf>, roots: &[CopyRoot]) -> PathBuf {
    let is_dir = |root: &CopyRoot| {
        root.stat
            .as_ref()
            .is_some_and(|s| s.as_ref().is_ok_and(|s| s.kind() == crate::sys::Kind::Dir))
    };
    match (into, roots) {
        (Some(dir), _) => dir,
        (None, [root]) if is_dir(root) => root.dst.clone(),
        (None, [root, ..]) => match root.dst.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        },
        (None, []) => PathBuf::from("."),
    }
}

/// True when the file `path` would be (or is) inside the tree `root`: its directory, resolved,
/// is `root` resolved or below it.
fn inside(path: &Path, root: &Path) -> bool {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match (fs::canonicalize(dir), fs::canonicalize(root)) {
        (Ok(dir), Ok(root)) => dir.starts_with(root),
        _ => false,
    }
}

/// The roots, the target's stat, and the target when the sources are copied into it.
type Resolved = (Vec<CopyRoot>, io::Result<fs::Metadata>, Option<PathBuf>);

/// cp's operands as given.
struct Operands {
    paths: Vec<PathBuf>,
    target_directory: Option<PathBuf>,
    no_target_directory: bool,
    parents: bool,
    strip_trailing_slashes: bool,
}

impl Operands {
    /// Resolves cp's forms into source → destination pairs, as GNU's do_copy does: `SRC DST`,
    /// `SRC... DIR`, `-t DIR SRC...`, `-T SRC DST`, each with `--parents`, the same with or
    /// without `--resume` (the DST an interrupted `cp -r SRC DST` made is a directory like any
    /// other: `-T` says it is the copy). Returns the roots and the target's stat (following
    /// symlinks), taken once.
    fn resolve(self) -> Result<Resolved, PlanError> {
        let mut paths = self.paths;
        if paths.len() <= usize::from(self.target_directory.is_none()) {
            return Err(match paths.first() {
                None => PlanError::usage("missing file operand"),
                Some(only) => PlanError::usage(format!(
                    "missing destination file operand after {}",
                    quote(&only)
                )),
            });
        }
        if self.no_target_directory {
            if self.target_directory.is_some() {
                return Err(PlanError::refused(
                    "cannot combine --target-directory (-t) and --no-target-directory (-T)",
                ));
            }
            if let Some(extra) = paths.get(2) {
                return Err(PlanError::usage(format!("extra operand {}", quote(&extra))));
            }
        }
        let (sources, target, into) = match self.target_directory {
            Some(dir) => (paths, dir, Some(true)),
            None => {
                let dst = paths.pop().expect("at least two operands");
                (paths, dst, self.no_target_directory.then_some(false))
            }
        };
        let meta = fs::metadata(&target);
        let target_is_dir = meta.as_ref().is_ok_and(|m| m.is_dir());
        // GNU strips the sources' trailing slashes only when it copies them into a directory.
        let sources = if self.strip_trailing_slashes
            && (into == Some(true) || (into.is_none() && target_is_dir))
        {
            sources.iter().map(|p| strip_trailing_slashes(p)).collect()
        } else {
            sources
        };
        let roots = if self.parents {
            if into == Some(false) || (into.is_none() && sources.len() == 1 && !target_is_dir) {
                return Err(PlanError::usage(
                    "with --parents, the destination must be a directory",
                ));
            }
            // The target's own errors first, as for any copy into a directory.
            resolve_roots(&sources, &target, into, &meta)?;
            resolve_parents(&sources, &target, into, target_is_dir)?
        } else {
            resolve_roots(&sources, &target, into, &meta)?
        };
        let into = (self.parents || into.unwrap_or(target_is_dir)).then_some(target);
        Ok((roots, meta, into))
    }
}

/// `--strip-trailing-slashes`: `a/b//` is `a/b`; `/` stays `/`.
fn strip_trailing_slashes(path: &Path) -> PathBuf {
    let bytes = path.as_os_str().as_bytes();
    let end = bytes
        .iter()
        .rposition(|&b| b != b'/')
        .map_or(1.min(bytes.len()), |i| i + 1);
    std::ffi::OsStr::from_bytes(&bytes[..end]).into()
}

/// Resolves cp's three forms into source → destination pairs: `SRC DST`, `SRC... DIR` (also
/// `-t DIR SRC...`) and `-T SRC DST`. `target_meta`: the target's stat.
fn resolve_roots(
    sources: &[PathBuf],
    target: &Path,
    into_directory: Option<bool>,
    target_meta: &io::Result<fs::Metadata>,
) -> Result<Vec<CopyRoot>, PlanError> {
    if sources.is_empty() {
        return Err(PlanError::refused(format!(
            "missing destination file operand after {}",
            quote(&target)
        )));
    }
    let target_is_dir = target_meta.as_ref().is_ok_and(|m| m.is_dir());
    let into = match into_directory {
        Some(true) => {
            if !target_is_dir {
                return Err(not_a_directory(target, target_meta, true));
            }
            true
        }
        Some(false) => {
            if sources.len() > 1 {
                return Err(PlanError::refused(format!(
                    "extra operand {}",
                    quote(&sources[1])
                )));
            }
            false
        }
        None if sources.len() > 1 => {
            if !target_is_dir {
                return Err(not_a_directory(target, target_meta, false));
            }
            true
        }
        None => target_is_dir,
    };
    Ok(sources
        .iter()
        .map(|src| {
            let dst = if into {
                match last_component(src) {
                    Some(name) => target.join(name),
                    // `cp -r src/. dir`: the contents go into dir itself, named
                    // `dir/.` as cp names them (`'src/./f' -> 'dir/./f'`).
                    None if ends_in_dot(src) => target.join("."),
                    None => target.to_path_buf(),
                }
            } else {
                target.to_path_buf()
            };
            CopyRoot {
                src: src.clone(),
                dst,
                parents: None,
                stat: None,
            }
        })
        .collect())
}

/// `--parents`: each source keeps its whole path under the target directory
/// (`a/b/f DIR` becomes `DIR/a/b/f`).
fn resolve_parents(
    sources: &[PathBuf],
    target: &Path,
    into_directory: Option<bool>,
    target_is_dir: bool,
) -> Result<Vec<CopyRoot>, PlanError> {
    if into_directory == Some(false) || !target_is_dir {
        return Err(PlanError::refused(
            "with --parents, the destination must be a directory",
        ));
    }
    Ok(sources
        .iter()
        .map(|src| {
            let bytes = src.as_os_str().as_bytes();
            let end = bytes.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
            let start = bytes[..end].iter().position(|&b| b != b'/').unwrap_or(end);
            let rel = Path::new(std::ffi::OsStr::from_bytes(&bytes[start..end]));
            CopyRoot {
                src: src.clone(),
                dst: target.join(rel),
                parents: Some(target.to_path_buf()),
                stat: None,
            }
        })
        .collect())
}

/// The last component of `path` as cp names it in a target directory: `a/b/` is `b`, and
/// `a/.`, `.` or `..` is `None` (the directory's contents go straight into the target). Unlike
/// `Path::file_name`, which reads `a/.` as `a`.
fn last_component(path: &Path) -> Option<&std::ffi::OsStr> {
    let bytes = path.as_os_str().as_bytes();
    let trimmed = match bytes.iter().rposition(|&b| b != b'/') {
        Some(end) => &bytes[..=end],
        None => return None,
    };
    let name = match trimmed.iter().rposition(|&b| b == b'/') {
        Some(slash) => &trimmed[slash + 1..],
        None => trimmed,
    };
    match name {
        // cp copies `a/..` into the target too, not into its parent.
        b"." | b".." => None,
        _ => Some(std::ffi::OsStr::from_bytes(name)),
    }
}

/// True when the last component of `path` is `.` or `..` (trailing slashes aside).
fn ends_in_dot(path: &Path) -> bool {
    let bytes = path.as_os_str().as_bytes();
    let end = bytes.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
    bytes[..end].ends_with(b".") && (end == 1 || matches!(bytes[end - 2], b'/' | b'.'))
}

/// cp's words for a target that is not a usable directory: `target directory 'T': REASON`
/// for `-t T`, `target 'T': REASON` for the last of several operands.
fn not_a_directory(
    target: &Path,
    target_meta: &io::Result<fs::Metadata>,
    named_by_t: bool,
) -> PlanError {
    let enotdir = io::Error::from_raw_os_error(libc::ENOTDIR);
    let why = match target_meta {
        Err(e) => e,
        Ok(_) => &enotdir,
    };
    let what = if named_by_t {
        "target directory"
    } else {
        "target"
    };
    PlanError::refused(format!(
        "{what} {}: {}",
        quote(&target),
        crate::error::reason(why)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_components_as_cp_reads_them() {
        let last = |p: &str| last_component(Path::new(p)).map(|s| s.to_str().unwrap().to_owned());
        assert_eq!(last("a/b"), Some("b".into()));
        assert_eq!(last("a/b//"), Some("b".into()));
        assert_eq!(last("a/."), None);
        assert_eq!(last("."), None);
        assert_eq!(last("/"), None);
        assert_eq!(last(".."), None);
        assert!(ends_in_dot(Path::new("a/./")) && ends_in_dot(Path::new("..")));
        assert!(!ends_in_dot(Path::new("a.")) && !ends_in_dot(Path::new("/")));
    }

    #[test]
    fn roots_into_existing_directory() {
        let tmp = std::env::temp_dir();
        let meta = fs::metadata(&tmp);
        let roots = resolve_roots(&[PathBuf::from("a/b")], &tmp, None, &meta).expect("resolves");
        assert_eq!(roots[0].dst, tmp.join("b"));
        let roots = resolve_roots(&[PathBuf::from("a/b")], &tmp, Some(false), &meta).unwrap();
        assert_eq!(roots[0].dst, tmp);
        let missing = Path::new("/nonexistent-ringio-target");
        let two = [PathBuf::from("a"), PathBuf::from("b")];
        let err = resolve_roots(&two, missing, None, &fs::metadata(missing)).unwrap_err();
        assert!(!err.is_usage());
    }

    #[test]
    fn build_stats_each_source_once_and_orders_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        fs::write(dir.join("f"), b"x").unwrap();
        fs::create_dir(dir.join("d")).unwrap();
        let plan = CopyPlan::builder(vec![dir.join("f"), dir.join("nope"), dir.join("d")])
            .build()
            .unwrap();
        let roots = plan.roots();
        assert_eq!(roots.len(), 2);
        assert_eq!(roots[0].dst(), dir.join("d/f"));
        assert!(matches!(roots[0].stat, Some(Ok(s)) if s.size == 1));
        assert_eq!(roots[1].stat, Some(Err(libc::ENOENT)));
        // A missing operand is a usage error; an unreadable backup type comes before it.
        let err = CopyPlan::builder(vec![dir.join("f")]).build().unwrap_err();
        assert!(err.is_usage() && err.to_string().starts_with("missing destination"));
        let request = BackupRequest {
            control: Some("bogus".into()),
            suffix: None,
            read: |_, context| Err(format!("invalid argument for {context}")),
        };
        let err = CopyPlan::builder(vec![])
            .backup(Some(request))
            .build()
            .unwrap_err();
        assert_eq!(err.to_string(), "invalid argument for backup type");
    }
}
