//! What to copy and how: the validated plan the CLI hands to [`crate::copy`].

use std::fs;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::CopyError;
use crate::refusal::Refusal;
use crate::sys::Stat;
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

    /// Every attribute either keeps (`-p` on top of `--preserve=links` keeps the links).
    pub fn union(self, other: Preserve) -> Preserve {
        Preserve {
            mode: self.mode || other.mode,
            ownership: self.ownership || other.ownership,
            timestamps: self.timestamps || other.timestamps,
            links: self.links || other.links,
            xattr: self.xattr || other.xattr,
        }
    }

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

/// Engine knobs. Defaults come from measurements recorded in docs/bench/ (listed in
/// docs/BENCHMARKS.md). Any value is
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
    pub(crate) src: PathBuf,
    /// The destination path to create (already resolved: `DIR/basename(src)` when copying into a
    /// directory).
    pub(crate) dst: PathBuf,
    /// `--parents`: the target directory under which the source's leading directories are
    /// made before the copy (`dst` is then `DIR/src`).
    pub(crate) parents: Option<PathBuf>,
    /// The source's statx (or its errno) as the plan's validation took it, following a final
    /// symlink unless `-P`: the run, the count and the MPI ranks use it instead of stating the
    /// source again. `None`: not taken (a root that waits for a later wave), so taken when used.
    pub(crate) stat: Option<Result<Stat, i32>>,
}

impl CopyRoot {
    /// The source, as the user named it.
    pub fn src(&self) -> &Path {
        &self.src
    }

    /// The destination path the source becomes.
    pub fn dst(&self) -> &Path {
        &self.dst
    }

    /// `--parents`: the target directory the source's leading directories are made under.
    pub fn parents(&self) -> Option<&Path> {
        self.parents.as_deref()
    }

    /// The source's stat (following a final symlink when `follow`): the one the plan took, or
    /// a new one when it took none.
    pub(crate) fn source_stat(&self, follow: bool) -> io::Result<Stat> {
        match self.stat {
            Some(Ok(stat)) => Ok(stat),
            Some(Err(errno)) => Err(io::Error::from_raw_os_error(errno)),
            None => stat_source(&self.src, follow),
        }
    }
}

/// statx of a source path, following a final symlink when `follow`.
pub(crate) fn stat_source(path: &Path, follow: bool) -> io::Result<Stat> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    crate::sys::statx_at(rustix::fs::CWD, &name, follow)
}

/// Everything [`crate::copy`] needs, resolved and validated: built once by
/// [`CopyPlan::builder`] and never changed after. Display (`-v`, `--debug`) is the
/// [`crate::Reporter`]'s; the tuning a run actually uses, fitted to its limits, is its own
/// value (`run::Setup`).
#[derive(Debug, Clone)]
pub struct CopyPlan {
    /// Source → destination pairs, in command-line order.
    pub(crate) roots: Vec<CopyRoot>,
    /// `-r`: copy directories recursively.
    pub(crate) recursive: bool,
    /// Symlink following.
    pub(crate) dereference: Dereference,
    /// Metadata to carry over.
    pub(crate) preserve: Preserve,
    /// Existing-destination policy.
    pub(crate) overwrite: Overwrite,
    /// `-f`: when an existing destination cannot be opened, remove it and try again.
    pub(crate) force: bool,
    /// How bytes move.
    pub(crate) engine: Engine,
    /// Engine knobs as asked; a run fits them to its limits (`run::Setup`), and the engines
    /// read that fitted value, not this one.
    pub(crate) tuning: Tuning,
    /// Hole handling.
    pub(crate) sparse: Sparse,
    /// Extent sharing.
    pub(crate) reflink: Reflink,
    /// `--remove-destination`: remove an existing destination before creating the copy, instead
    /// of writing over it.
    pub(crate) remove_destination: bool,
    /// `--backup`: rename an existing destination aside before replacing it.
    pub(crate) backup: Option<Backup>,
    /// `--atomic`: write each file under a temporary name in its directory, then rename it into
    /// place, so no reader ever sees a partly written file. An existing file's attributes are
    /// given to its replacement first (see `replaced.rs`).
    pub(crate) atomic: bool,
    /// `--fsync`: the copy is on stable storage before ringio exits.
    pub(crate) fsync: bool,
    /// `-x`: do not descend into directories on other filesystems (they are created empty).
    pub(crate) one_file_system: bool,
    /// `--engine aio --direct`: move file bodies with O_DIRECT, bypassing the page cache.
    pub(crate) direct: bool,
    /// `--copy-contents`: under -r, read special files (FIFOs, devices) as data too.
    pub(crate) copy_contents: bool,
    /// `-l`, `-s`: links instead of copies.
    pub(crate) link: LinkMode,
    /// `--attributes-only`: metadata without data; a new file is created empty, an existing
    /// one keeps its content.
    pub(crate) attributes_only: bool,
    /// An explicit `--no-preserve=mode`: new entries get the default modes (0666, 0777 for
    /// directories, less the umask) instead of their source's.
    pub(crate) default_modes: bool,
    /// `POSIXLY_CORRECT` was set when the plan was built: data is written through a dangling
    /// symlink.
    pub(crate) posixly_correct: bool,
    /// `--hash`: every file's bytes hashed on their way to the destination.
    pub(crate) hashing: Option<Hashing>,
    /// The destination root: the directory the sources go into, else the copy of a directory,
    /// else the directory a file is copied into.
    pub(crate) dest_root: PathBuf,
}

/// `--hash` (and `--manifest`): what a copy hashes, and where it writes the hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hashing {
    /// The algorithm.
    pub algo: crate::digest::Algo,
    /// The manifest's format.
    pub format: crate::manifest::Format,
    /// The manifest file (`sum`, `json`); `mhl` writes into the destination root's `ascmhl`.
    pub manifest: Option<PathBuf>,
    /// The destination root: what manifest names are relative to.
    pub base: PathBuf,
}

impl CopyPlan {
    /// A plan with cp's defaults (`cp -r` when `recursive`) for these roots, as given (no
    /// validation, no stat): where [`CopyPlan::builder`] starts, and what unit tests adjust.
    pub(crate) fn new(roots: Vec<CopyRoot>, recursive: bool) -> Self {
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
            posixly_correct: false,
            hashing: None,
            dest_root: PathBuf::from("."),
        }
    }

    /// Source → destination pairs, in command-line order.
    pub fn roots(&self) -> &[CopyRoot] {
        &self.roots
    }

    /// `--hash`: what is hashed, and where the manifest goes.
    pub fn hashing(&self) -> Option<&Hashing> {
        self.hashing.as_ref()
    }

    /// Where each root's copy goes below the destination root (`--tee`'s copies must agree).
    pub fn layout(&self) -> Vec<&Path> {
        self.roots
            .iter()
            .map(|r| r.dst.strip_prefix(&self.dest_root).unwrap_or(&r.dst))
            .collect()
    }

    /// The plan, hashing as it does but with no manifest file of its own (`--tee`'s copies:
    /// the main copy writes the one manifest).
    pub fn without_manifest_file(mut self) -> Self {
        if let Some(h) = &mut self.hashing {
            h.manifest = None;
        }
        self
    }

    /// True when a special file (FIFO, device) is read as data into a regular file, as cp
    /// does without -r, rather than recreated.
    pub(crate) fn special_as_data(&self) -> bool {
        !self.recursive || self.copy_contents
    }

    /// True when a small file may take a fast path that writes its bytes straight under the
    /// final name (the io_uring pipeline, the in-place copy). Policies that must see every file
    /// go through the shared synchronous path instead (so does `--debug`: see
    /// `Ctx::small_files_fast`).
    pub(crate) fn small_files_fast(&self) -> bool {
        !self.atomic
            && self.reflink != Reflink::Always
            && self.sparse != Sparse::Always
            && self.link == LinkMode::Copy
            && !self.attributes_only
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
}
