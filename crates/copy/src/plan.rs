//! What to copy and how: the validated plan the CLI hands to [`crate::copy`].

use std::fs;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::CopyError;
use crate::quote::quote;
use crate::refusal::Refusal;
use crate::transfer::Method;

/// A copy engine, selectable with `ringio cp --engine`. Every engine shares the walk, the
/// policies and finalize; they differ only in how file bytes move.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[strum(serialize_all = "kebab-case")]
pub enum Engine {
    /// io_uring: per-file system calls of small files batched through one ring per worker;
    /// large files moved in the kernel (FICLONE, copy_file_range) in parallel chunks.
    Uring,
    /// Linux native AIO (io_submit/io_getevents), a window of reads and writes per file; files
    /// below the small-file threshold use plain read/write.
    Aio,
    /// copy_file_range for every file.
    CopyRange,
    /// sendfile for every file.
    Sendfile,
    /// splice through a pipe for every file.
    Splice,
    /// Plain read/write with a user-space buffer (`--bs`): the reference every engine is tested
    /// against.
    #[strum(serialize = "readwrite")]
    ReadWrite,
}

impl Engine {
    /// Every engine, in the order `--help` lists them (declaration order).
    pub const ALL: &'static [Engine] = <Engine as strum::VariantArray>::VARIANTS;

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// One line for `--help`.
    pub fn about(self) -> &'static str {
        match self {
            Engine::Uring => {
                "io_uring batches of open/read/write/close for small files; FICLONE or \
                 copy_file_range in parallel chunks for large ones (default)"
            }
            Engine::Aio => {
                "Linux native AIO, --queue-depth requests of --bs in flight per file (--direct \
                 for O_DIRECT); plain read/write below --small-file-threshold"
            }
            Engine::CopyRange => "copy_file_range(2) for every file",
            Engine::Sendfile => "sendfile(2) for every file (files are not split into chunks)",
            Engine::Splice => "splice(2) through a pipe for every file",
            Engine::ReadWrite => "plain read(2)/write(2) through a --bs buffer; the reference",
        }
    }

    /// The transfer method an alternative engine moves bytes with.
    pub(crate) fn method(self) -> Option<Method> {
        match self {
            Engine::Aio => Some(Method::Aio),
            Engine::CopyRange => Some(Method::CopyRange),
            Engine::Sendfile => Some(Method::Sendfile),
            Engine::Splice => Some(Method::Splice),
            Engine::Uring | Engine::ReadWrite => None,
        }
    }
}

/// Which symlinks are followed (cp's `-P`, `-L`, `-H`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dereference {
    /// `-P`: copy symlinks as symlinks.
    Never,
    /// `-L`: follow every symlink.
    Always,
    /// `-H`: follow symlinks named on the command line, copy the others as symlinks.
    CommandLine,
}

/// Which metadata is carried over (cp's `--preserve`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Preserve {
    /// Permission bits, including setuid, setgid and sticky.
    pub mode: bool,
    /// Owner and group (the owner only when running as root).
    pub ownership: bool,
    /// Access and modification times, with nanoseconds.
    pub timestamps: bool,
    /// Hard links between files of the copied tree.
    pub links: bool,
    /// Extended attributes, ACLs included.
    pub xattr: bool,
}

impl Preserve {
    /// `--preserve=all`.
    pub const ALL: Preserve = Preserve {
        mode: true,
        ownership: true,
        timestamps: true,
        links: true,
        xattr: true,
    };
    /// `-p`: mode, ownership, timestamps.
    pub const P: Preserve = Preserve {
        mode: true,
        ownership: true,
        timestamps: true,
        links: false,
        xattr: false,
    };

    /// Parses one comma-separated `--preserve` / `--no-preserve` list and sets each named
    /// attribute to `value`.
    pub fn apply_list(&mut self, list: &str, value: bool) -> Result<(), String> {
        for word in list.split(',').filter(|w| !w.is_empty()) {
            match word {
                "mode" => self.mode = value,
                "ownership" => self.ownership = value,
                "timestamps" => self.timestamps = value,
                "links" => self.links = value,
                "xattr" => self.xattr = value,
                "all" => {
                    *self = if value { Preserve::ALL } else { Preserve::default() };
                }
                // cp accepts these; ringio has no separate notion of them.
                "context" => {}
                _ => {
                    return Err(format!(
                        "invalid attribute '{word}' (valid: mode, ownership, timestamps, links, xattr, all)"
                    ))
                }
            }
        }
        Ok(())
    }

    /// True when any metadata beyond content is carried over.
    pub fn any(&self) -> bool {
        self.mode || self.ownership || self.timestamps || self.xattr
    }
}

/// What happens to an existing destination: cp's `-n`, `-i`, `-u` and `--resume` as one value,
/// in the spirit of uutils' `OverwriteMode`. How it is replaced (written over in place, removed
/// first, backed up) is `--remove-destination` and `--backup`; the rules themselves are in
/// `policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overwrite {
    /// `-n`, `--update=none`: an existing destination is never touched.
    NoClobber,
    /// Replace the destinations `Clobber` names (cp's default: all of them).
    Clobber(Clobber),
    /// `-i`: ask (through [`crate::Reporter::confirm`]) before replacing what `Clobber` names.
    Interactive(Clobber),
}

impl Overwrite {
    /// The `--resume` check, when resuming.
    pub fn resume(self) -> Option<Resume> {
        match self {
            Overwrite::Clobber(Clobber::Incomplete(how))
            | Overwrite::Interactive(Clobber::Incomplete(how)) => Some(how),
            _ => None,
        }
    }
}

/// Which existing destinations are replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clobber {
    /// Every one (cp's default, `--update=all`).
    All,
    /// `-u`, `--update=older`: those older than the source.
    Older,
    /// `--resume`: finish an interrupted copy; those not provably complete.
    Incomplete(Resume),
}

/// How `--resume` proves a destination file complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Under -a/-p: the same size and ns mtime as the source. Otherwise: the same size and
    /// the same content.
    Quick,
    /// The same content, always (and the metadata applied again).
    Checksum,
}

/// Holes in sparse files (cp's `--sparse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sparse {
    /// Keep the holes of files that have any (fewer blocks allocated than their size), found
    /// with SEEK_DATA/SEEK_HOLE.
    #[default]
    Auto,
    /// Also turn runs of zero bytes into holes, in every file.
    Always,
    /// Write every byte; the copy has no holes.
    Never,
}

impl Sparse {
    /// True when this file's holes are kept: it has some, or `--sparse=always` makes them.
    pub(crate) fn keeps_holes(self, stat: &crate::sys::Stat) -> bool {
        match self {
            Sparse::Never => false,
            Sparse::Auto => stat.looks_sparse(),
            Sparse::Always => true,
        }
    }
}

/// Clones sharing the source's extents (cp's `--reflink`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reflink {
    /// Clone (FICLONE) where the filesystem can, copy otherwise.
    #[default]
    Auto,
    /// Clone every file; a file that cannot be cloned is an error.
    Always,
    /// Never share extents: neither FICLONE nor copy_file_range (which clones on xfs and btrfs);
    /// bytes go through a buffer.
    Never,
}

/// What each non-directory source becomes (cp's `-l`, `-s`). Directories are still created
/// and walked under -r.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LinkMode {
    /// A copy of its content.
    #[default]
    Copy,
    /// `-l`: a hard link to the source.
    Hard,
    /// `-s`: a symbolic link whose target is the source's path as given.
    Symbolic,
}

/// How an existing destination is saved before it is replaced (cp's `--backup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackupMode {
    /// `NAME` + suffix.
    Simple,
    /// `NAME.~N~`, one more than the highest existing.
    Numbered,
    /// Numbered if numbered backups of `NAME` exist already, simple otherwise.
    Existing,
}

/// `--backup` with its suffix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backup {
    /// Which backup names.
    pub mode: BackupMode,
    /// The simple-backup suffix (`~` by default, as cp).
    pub suffix: String,
}

/// Engine knobs. Defaults come from measurements recorded in docs/BENCHMARKS.md. Any value is
/// accepted: a run fits them to its descriptor and memory budgets before it starts (fewer
/// threads, smaller and fewer buffers, bigger chunks), so no option can exhaust memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Worker threads.
    pub threads: usize,
    /// Buffer size for the read/write data path (a buffer is never larger than its file needs).
    pub block_size: usize,
    /// Files in flight per io_uring worker.
    pub queue_depth: u32,
    /// Files up to this size go through the io_uring read/write pipeline; larger ones are moved
    /// by the kernel (FICLONE, copy_file_range).
    pub small_file_threshold: u64,
    /// Files at least twice this size are split into chunks of this size, copied in parallel
    /// (0: never split; a run raises anything else to at least 1 MiB and `block_size`).
    pub chunk_size: u64,
    /// io_uring engine: send every small file through the ring, even when its data is cached
    /// (by default cached files are copied in place with plain calls, which is faster).
    pub ring_only: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Tuning {
            threads: (cores * 2).clamp(4, 64),
            block_size: 128 * 1024,
            queue_depth: 64,
            small_file_threshold: 64 * 1024,
            chunk_size: 16 * 1024 * 1024,
            ring_only: false,
        }
    }
}

/// One source and the exact destination path it becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyRoot {
    /// The source, as the user named it.
    pub src: PathBuf,
    /// The destination path to create (already resolved: `DIR/basename(src)` when copying into a
    /// directory).
    pub dst: PathBuf,
    /// `--parents`: the target directory under which the source's leading directories are
    /// made before the copy (`dst` is then `DIR/src`).
    pub parents: Option<PathBuf>,
}

/// Everything [`crate::copy`] needs, resolved and validated.
#[derive(Debug, Clone)]
pub struct CopyPlan {
    /// Source → destination pairs, in command-line order.
    pub roots: Vec<CopyRoot>,
    /// `-r`: copy directories recursively.
    pub recursive: bool,
    /// Symlink following.
    pub dereference: Dereference,
    /// Metadata to carry over.
    pub preserve: Preserve,
    /// Existing-destination policy.
    pub overwrite: Overwrite,
    /// `-f`: when an existing destination cannot be opened, remove it and try again.
    pub force: bool,
    /// How bytes move.
    pub engine: Engine,
    /// Engine knobs.
    pub tuning: Tuning,
    /// `-v`: print each copied entry, and note engine fallbacks.
    pub verbose: bool,
    /// Hole handling.
    pub sparse: Sparse,
    /// Extent sharing.
    pub reflink: Reflink,
    /// `--remove-destination`: remove an existing destination before creating the copy, instead
    /// of writing over it.
    pub remove_destination: bool,
    /// `--backup`: rename an existing destination aside before replacing it.
    pub backup: Option<Backup>,
    /// `--atomic`: write each file under a temporary name in its directory, then rename it into
    /// place, so no reader ever sees a partly written file. An existing file's attributes are
    /// given to its replacement first (see `replaced.rs`).
    pub atomic: bool,
    /// `--fsync`: the copy is on stable storage before ringio exits.
    pub fsync: bool,
    /// `-x`: do not descend into directories on other filesystems (they are created empty).
    pub one_file_system: bool,
    /// `--engine aio --direct`: move file bodies with O_DIRECT, bypassing the page cache.
    pub direct: bool,
    /// `--copy-contents`: under -r, read special files (FIFOs, devices) as data too.
    pub copy_contents: bool,
    /// `-l`, `-s`: links instead of copies.
    pub link: LinkMode,
    /// `--attributes-only`: metadata without data; a new file is created empty, an existing
    /// one keeps its content.
    pub attributes_only: bool,
    /// An explicit `--no-preserve=mode`: new entries get the default modes (0666, 0777 for
    /// directories, less the umask) instead of their source's.
    pub default_modes: bool,
    /// `--debug`: after each regular file's `-v` line, how its data moved (GNU cp's
    /// `copy offload: ..., reflink: ..., sparse detection: ...`). Every file then takes the
    /// synchronous path whole.
    pub debug: bool,
}

impl CopyPlan {
    /// A plan with cp's defaults (`cp -r` when `recursive`) for these roots: the base every
    /// caller adjusts.
    pub fn new(roots: Vec<CopyRoot>, recursive: bool) -> Self {
        CopyPlan {
            roots,
            recursive,
            dereference: if recursive {
                Dereference::Never
            } else {
                Dereference::CommandLine
            },
            preserve: Preserve::default(),
            overwrite: Overwrite::Clobber(Clobber::All),
            force: false,
            engine: Engine::Uring,
            tuning: Tuning::default(),
            verbose: false,
            sparse: Sparse::Auto,
            reflink: Reflink::Auto,
            remove_destination: false,
            backup: None,
            atomic: false,
            fsync: false,
            one_file_system: false,
            direct: false,
            copy_contents: false,
            link: LinkMode::Copy,
            attributes_only: false,
            default_modes: false,
            debug: false,
        }
    }

    /// True when a special file (FIFO, device) is read as data into a regular file, as cp
    /// does without -r, rather than recreated.
    pub(crate) fn special_as_data(&self) -> bool {
        !self.recursive || self.copy_contents
    }

    /// True when a small file may take a fast path that writes its bytes straight under the
    /// final name (the io_uring pipeline, the in-place copy). Policies that must see every file
    /// go through the shared synchronous path instead.
    pub(crate) fn small_files_fast(&self) -> bool {
        !self.atomic
            && self.reflink != Reflink::Always
            && self.sparse != Sparse::Always
            && self.link == LinkMode::Copy
            && !self.attributes_only
            && !self.debug
    }

    /// `--resume` of `cp -r SRC DST` where DST is now a directory: true when DST is the copy an
    /// interrupted run made (so the copy goes on in DST), false when SRC was being copied into
    /// it (DST/NAME). DST is taken as the copy unless DST/NAME exists or DST holds a name SRC
    /// lacks. An empty DST is taken as the copy; `-T` or `-t` says it without guessing.
    pub fn resume_target_is_copy(src: &Path, target: &Path) -> bool {
        let (Ok(s), Ok(t)) = (fs::metadata(src), fs::metadata(target)) else {
            return false;
        };
        if !s.is_dir() || !t.is_dir() {
            return false;
        }
        if let Some(name) = last_component(src) {
            if fs::symlink_metadata(target.join(name)).is_ok_and(|m| m.is_dir()) {
                return false;
            }
        }
        let Ok(entries) = fs::read_dir(target) else {
            return false;
        };
        entries.flatten().all(|e| {
            let name = e.file_name();
            fs::symlink_metadata(src.join(&name)).is_ok() || is_temp_of_ours(&name)
        })
    }

    /// Resolves cp's three forms into source → destination pairs:
    /// `SRC DST`, `SRC... DIR` (also `-t DIR SRC...`) and `-T SRC DST`.
    pub fn resolve_roots(
        sources: &[PathBuf],
        target: &Path,
        into_directory: Option<bool>,
    ) -> Result<Vec<CopyRoot>, CopyError> {
        if sources.is_empty() {
            return Err(CopyError::Refused(format!(
                "missing destination file operand after {}",
                quote(&target)
            )));
        }
        let target_is_dir = fs::metadata(target).map(|m| m.is_dir()).unwrap_or(false);
        let into = match into_directory {
            Some(true) => {
                if !target_is_dir {
                    return Err(not_a_directory(target, true));
                }
                true
            }
            Some(false) => {
                if sources.len() > 1 {
                    return Err(CopyError::Refused(format!(
                        "extra operand {}",
                        quote(&sources[1])
                    )));
                }
                false
            }
            None if sources.len() > 1 => {
                if !target_is_dir {
                    return Err(not_a_directory(target, false));
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
                }
            })
            .collect())
    }

    /// `--parents`: each source keeps its whole path under the target directory
    /// (`a/b/f DIR` becomes `DIR/a/b/f`).
    pub fn resolve_parents(
        sources: &[PathBuf],
        target: &Path,
        into_directory: Option<bool>,
    ) -> Result<Vec<CopyRoot>, CopyError> {
        let target_is_dir = fs::metadata(target).is_ok_and(|m| m.is_dir());
        if into_directory == Some(false) || !target_is_dir {
            return Err(CopyError::Refused(
                "with --parents, the destination must be a directory".to_string(),
            ));
        }
        Ok(sources
            .iter()
            .map(|src| {
                use std::os::unix::ffi::OsStrExt;
                let bytes = src.as_os_str().as_bytes();
                let end = bytes.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
                let start = bytes[..end].iter().position(|&b| b != b'/').unwrap_or(end);
                let rel = Path::new(std::ffi::OsStr::from_bytes(&bytes[start..end]));
                CopyRoot {
                    src: src.clone(),
                    dst: target.join(rel),
                    parents: Some(target.to_path_buf()),
                }
            })
            .collect())
    }
}

/// The last component of `path` as cp names it in a target directory: `a/b/` is `b`, and
/// `a/.`, `.` or `..` is `None` (the directory's contents go straight into the target). Unlike
/// `Path::file_name`, which reads `a/.` as `a`.
fn last_component(path: &Path) -> Option<&std::ffi::OsStr> {
    use std::os::unix::ffi::OsStrExt;
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

/// The last component of `path` as GNU's `last_component` and `base_len` read it: trailing
/// slashes aside, `.` and `..` included.
fn base_name(path: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let end = bytes.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
    let start = bytes[..end]
        .iter()
        .rposition(|&b| b == b'/')
        .map_or(0, |i| i + 1);
    &bytes[start..end]
}

/// GNU's `same_name`: `a` and `b` are one name in one directory (`f`, `./f`, `d/../f`): the
/// same last component, in parent directories of the same identity (not following a final
/// symlink, as GNU does not).
pub(crate) fn same_name(a: &Path, b: &Path) -> bool {
    let parent_identity = |path: &Path| {
        fs::symlink_metadata(dir_name(path))
            .ok()
            .map(|m| (m.dev(), m.ino()))
    };
    base_name(a) == base_name(b)
        && parent_identity(a).is_some_and(|id| parent_identity(b) == Some(id))
}

/// The directory part of `path` as GNU's `dir_name` reads it, without Rust's normalizing
/// (`a/./f` is in `a/.`): `.` when there is none, `/` at the root.
fn dir_name(path: &Path) -> &Path {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let end = bytes.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
    let base = bytes[..end]
        .iter()
        .rposition(|&b| b == b'/')
        .map_or(0, |i| i + 1);
    let root = usize::from(bytes.first() == Some(&b'/'));
    let mut len = base;
    while len > root && bytes[len - 1] == b'/' {
        len -= 1;
    }
    if len == 0 {
        Path::new(".")
    } else {
        Path::new(std::ffi::OsStr::from_bytes(&bytes[..len]))
    }
}

/// True when the last component of `path` is `.` or `..` (trailing slashes aside).
fn ends_in_dot(path: &Path) -> bool {
    let bytes = path.as_os_str().as_encoded_bytes();
    let end = bytes.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
    bytes[..end].ends_with(b".") && (end == 1 || matches!(bytes[end - 2], b'/' | b'.'))
}

/// An `--atomic` temporary of ringio's (see [`crate::temp`]).
fn is_temp_of_ours(name: &std::ffi::OsStr) -> bool {
    use std::os::unix::ffi::OsStrExt;
    crate::temp::is_ours(name.as_bytes())
}

/// cp's words for a target that is not a usable directory: `target directory 'T': REASON`
/// for `-t T`, `target 'T': REASON` for the last of several operands.
fn not_a_directory(target: &Path, named_by_t: bool) -> CopyError {
    let why = match fs::metadata(target) {
        Err(e) => e,
        Ok(_) => io::Error::from_raw_os_error(libc::ENOTDIR),
    };
    let what = if named_by_t {
        "target directory"
    } else {
        "target"
    };
    CopyError::Refused(format!(
        "{what} {}: {}",
        quote(&target),
        crate::error::reason(&why)
    ))
}

/// Refuses `dst` when it lies inside the directory `src` or is `src` itself (cp: "cannot copy a
/// directory into itself"). Compares identities, not spellings: the deepest ancestor of `dst`
/// that exists (`dst` itself when it does) is opened, and it and each directory above it, up
/// to the root, is compared by (device, inode) with `src`. So `.`, `./`, `x/..`, `$PWD`,
/// `../here` and a symlink into the source are all seen for what they name.
pub(crate) fn check_not_inside(
    src: &Path,
    src_id: (u64, u64),
    dst: &Path,
) -> Result<(), CopyError> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut probe = dst;
    let mut exists = true;
    let mut dir = loop {
        let name = if probe.as_os_str().is_empty() {
            Path::new(".")
        } else {
            probe
        };
        match rustix::fs::open(name, flags, Mode::empty()) {
            Ok(fd) => break fd,
            // Not there yet (or not a directory): what will hold it is the parent.
            Err(_) => match probe.parent() {
                Some(parent) => {
                    probe = parent;
                    exists = false;
                }
                None => return Ok(()),
            },
        }
    };
    loop {
        let Ok(here) = crate::sys::fstatx(dir.as_fd()) else {
            return Ok(());
        };
        let id = (here.dev, here.ino);
        if id == src_id && exists {
            // `cp -rT d d`: the destination is the source itself.
            return Err(Refusal::SameFile.of(src, dst).into());
        }
        exists = false;
        if id == src_id {
            return Err(Refusal::IntoItself.of(src, dst).into());
        }
        let Ok(up) = rustix::fs::openat(&dir, "..", flags, Mode::empty()) else {
            return Ok(());
        };
        let Ok(above) = crate::sys::fstatx(up.as_fd()) else {
            return Ok(());
        };
        if (above.dev, above.ino) == id {
            return Ok(()); // the root
        }
        dir = up;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for e in Engine::ALL {
            assert_eq!(e.name().parse::<Engine>().unwrap(), *e);
        }
        assert!("nope".parse::<Engine>().is_err());
    }

    #[test]
    fn preserve_lists() {
        let mut p = Preserve::default();
        p.apply_list("mode,timestamps", true).unwrap();
        assert!(p.mode && p.timestamps && !p.ownership);
        p.apply_list("all", true).unwrap();
        assert_eq!(p, Preserve::ALL);
        p.apply_list("xattr", false).unwrap();
        assert!(!p.xattr && p.links);
        assert!(p.apply_list("colour", true).is_err());
    }

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
    fn one_name_in_one_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        fs::create_dir(dir.join("d")).unwrap();
        fs::create_dir(dir.join("e")).unwrap();
        std::os::unix::fs::symlink("d", dir.join("link")).unwrap();
        let p = |s: &str| dir.join(s);
        assert!(same_name(&p("d/f"), &p("d/f")));
        assert!(same_name(&p("d/f"), &p("d/./f")));
        assert!(same_name(&p("d/f"), &p("e/../d/f")));
        assert!(same_name(&p("d/f/"), &p("d/f")));
        assert!(!same_name(&p("d/f"), &p("e/f")));
        assert!(!same_name(&p("d/f"), &p("d/g")));
        // The parent is looked at itself, as GNU's lstat does: a symlink to it is another name.
        assert!(!same_name(&p("d/f"), &p("link/f")));
        assert!(same_name(&p("d/f"), &p("link/./f")));
        assert_eq!(dir_name(Path::new("a/./f")), Path::new("a/."));
        assert_eq!(dir_name(Path::new("a//f/")), Path::new("a"));
        assert_eq!(dir_name(Path::new("f")), Path::new("."));
        assert_eq!(dir_name(Path::new("/f")), Path::new("/"));
        assert_eq!(base_name(Path::new("a/b//")), b"b");
        assert_eq!(base_name(Path::new("a/.")), b".");
        assert_eq!(base_name(Path::new("f")), b"f");
    }

    #[test]
    fn roots_into_existing_directory() {
        let tmp = std::env::temp_dir();
        let roots = CopyPlan::resolve_roots(&[PathBuf::from("a/b")], &tmp, None).expect("resolves");
        assert_eq!(roots[0].dst, tmp.join("b"));
        let roots = CopyPlan::resolve_roots(&[PathBuf::from("a/b")], &tmp, Some(false)).unwrap();
        assert_eq!(roots[0].dst, tmp);
        let missing = Path::new("/nonexistent-ringio-target");
        assert!(
            CopyPlan::resolve_roots(&[PathBuf::from("a"), PathBuf::from("b")], missing, None)
                .is_err()
        );
    }
}
