//! Seeded random source trees: the same seed builds the same tree on every machine.

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::sys::{is_root, set_times};
use ringio_base::Prng;

/// A timestamp with nanoseconds, as stat reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ts {
    pub sec: i64,
    pub nsec: i64,
}

impl Ts {
    pub const fn new(sec: i64, nsec: i64) -> Ts {
        Ts { sec, nsec }
    }
}

impl fmt::Display for Ts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:09}", self.sec, self.nsec)
    }
}

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

/// Sizes where read/write buffers, io_uring chunks and pages end, each ±1.
const BOUNDARY_SIZES: &[u64] = &[
    0,
    1,
    2,
    511,
    512,
    4095,
    4096,
    4097,
    8191,
    8192,
    8193,
    64 * KIB - 1,
    64 * KIB,
    64 * KIB + 1,
    128 * KIB - 1,
    128 * KIB,
    128 * KIB + 1,
    256 * KIB - 1,
    256 * KIB + 1,
    MIB - 1,
    MIB,
    MIB + 1,
    2 * MIB + 4097,
];

/// One file just past the copier's 16 MiB chunk, one just past its 2-chunk split threshold.
const BIG_SIZES: &[u64] = &[16 * MIB + 1, 32 * MIB + 1];

/// Times that break naive code: the epoch, 1970 + 3 s, 1969 (negative), 2017, both sides of
/// 2038, and 2100.
const SPECIAL_TIMES: &[Ts] = &[
    Ts::new(0, 0),
    Ts::new(3, 123_456_789),
    Ts::new(-2_000_000, 250_000_000),
    Ts::new(1_500_000_000, 999_999_999),
    Ts::new(2_147_483_647, 999_999_999),
    Ts::new(2_147_483_648, 1),
    Ts::new(4_102_444_800, 500),
];

const FILE_MODES: &[u32] = &[
    0o644, 0o600, 0o640, 0o664, 0o755, 0o700, 0o777, 0o444, 0o400, 0o750, 0o4755, 0o2755, 0o6755,
    0o4700,
];
/// Root reads through these; anyone else cannot copy them at all.
const FILE_MODES_ROOT: &[u32] = &[0o000, 0o200, 0o1755, 0o7777];
const DIR_MODES: &[u32] = &[0o755, 0o700, 0o750, 0o555, 0o2775, 0o1777, 0o711, 0o500];
const DIR_MODES_ROOT: &[u32] = &[0o000, 0o300, 0o7755];

const OWNERS: &[u32] = &[0, 1, 1000, 12345, 65534];
const GROUPS: &[u32] = &[0, 100, 1000, 54321, 65534];

/// The shape of a tree; [`TreeSpec::build`] makes it.
#[derive(Debug, Clone)]
pub struct TreeSpec {
    pub seed: u64,
    /// Directories besides the root. The first `max_depth` of them form one chain.
    pub dirs: usize,
    pub max_depth: usize,
    /// Files of random size up to `max_random_size`, most of them small.
    pub random_files: usize,
    pub max_random_size: u64,
    /// Files at [`BOUNDARY_SIZES`] (about 5.5 MiB in all).
    pub boundary_sizes: bool,
    /// Files at [`BIG_SIZES`] (48 MiB in all).
    pub big_files: bool,
    /// Relative, absolute, dangling, looping, chained and 4000-byte symlinks.
    pub symlinks: bool,
    /// Names with spaces, newlines, non-UTF-8 bytes, a leading dash, 255 bytes.
    pub odd_names: bool,
    /// Random modes, setuid/setgid/sticky included, and 0555/1777/2775 directories.
    pub modes: bool,
    /// Also modes only root can read through (0000 files, 0300 directories, ...).
    pub unreadable_modes: bool,
    /// Random owners and groups (applied only when root).
    pub owners: bool,
    /// Random atimes and mtimes with nanoseconds, including [`SPECIAL_TIMES`].
    pub times: bool,
}

impl TreeSpec {
    /// Everything, about 58 MiB: the tree the main copy tests use.
    pub fn standard(seed: u64) -> TreeSpec {
        TreeSpec {
            seed,
            dirs: 24,
            max_depth: 7,
            random_files: 100,
            max_random_size: 256 * KIB,
            boundary_sizes: true,
            big_files: true,
            symlinks: true,
            odd_names: true,
            modes: true,
            unreadable_modes: is_root(),
            owners: true,
            times: true,
        }
    }

    /// Every kind of entry and metadata, but no big files: about 1 MiB.
    pub fn small(seed: u64) -> TreeSpec {
        TreeSpec {
            dirs: 8,
            max_depth: 4,
            random_files: 30,
            max_random_size: 64 * KIB,
            boundary_sizes: false,
            big_files: false,
            ..TreeSpec::standard(seed)
        }
    }

    /// Files and directories only, default modes and times.
    pub fn plain(seed: u64) -> TreeSpec {
        TreeSpec {
            symlinks: false,
            odd_names: false,
            modes: false,
            unreadable_modes: false,
            owners: false,
            times: false,
            ..TreeSpec::small(seed)
        }
    }

    /// Builds the tree at `root`, which must not exist yet (its parent must).
    pub fn build(&self, root: &Path) -> TestTree {
        Builder::new(self, root).build()
    }
}

/// A built tree. Paths in the lists are relative to `root`.
#[derive(Debug)]
pub struct TestTree {
    pub root: PathBuf,
    pub files: Vec<PathBuf>,
    pub dirs: Vec<PathBuf>,
    pub symlinks: Vec<PathBuf>,
    pub bytes: u64,
    /// Every entry's atime as the builder left it, the root included.
    atimes: Atimes,
}

impl TestTree {
    /// Copying reads the source and so moves its atimes (relatime). Call this after every copy
    /// of the tree (before the next copy, and before checking atimes), to put them back.
    pub fn restore_atimes(&self) {
        self.atimes.restore();
    }
}

/// The atimes of every entry of a tree, to put back after a copy has read it.
#[derive(Debug)]
pub struct Atimes {
    entries: Vec<(PathBuf, Ts)>,
}

impl Atimes {
    /// Records the atime of every entry under (and including) `root`. Listing a directory moves
    /// its atime, so this puts the recorded ones back before returning.
    pub fn record(root: &Path) -> Atimes {
        fn walk(path: &Path, out: &mut Vec<(PathBuf, Ts)>) {
            let m = fs::symlink_metadata(path)
                .unwrap_or_else(|e| panic!("lstat {}: {e}", path.display()));
            out.push((path.to_path_buf(), Ts::new(m.atime(), m.atime_nsec())));
            if m.is_dir() {
                let entries = fs::read_dir(path)
                    .unwrap_or_else(|e| panic!("read_dir {}: {e}", path.display()));
                for entry in entries {
                    walk(&entry.expect("dir entry").path(), out);
                }
            }
        }
        let mut entries = Vec::new();
        walk(root, &mut entries);
        let atimes = Atimes { entries };
        atimes.restore();
        atimes
    }

    /// Sets every recorded atime again (mtimes stay as they are).
    pub fn restore(&self) {
        for (path, atime) in &self.entries {
            set_times(path, Some(*atime), None)
                .unwrap_or_else(|e| panic!("restore atime of {}: {e}", path.display()));
        }
    }
}

struct Builder<'a> {
    spec: &'a TreeSpec,
    rng: Prng,
    root: PathBuf,
    /// (relative path, depth); index 0 is the root.
    dirs: Vec<(PathBuf, usize)>,
    /// Indices into `dirs` that may receive files (empty directories stay empty).
    fillable: Vec<usize>,
    files: Vec<PathBuf>,
    symlinks: Vec<PathBuf>,
    bytes: u64,
    buf: Vec<u8>,
}

impl<'a> Builder<'a> {
    fn new(spec: &'a TreeSpec, root: &Path) -> Builder<'a> {
        Builder {
            spec,
            rng: Prng::new(spec.seed),
            root: root.to_path_buf(),
            dirs: Vec::new(),
            fillable: Vec::new(),
            files: Vec::new(),
            symlinks: Vec::new(),
            bytes: 0,
            buf: vec![0; MIB as usize],
        }
    }

    fn build(mut self) -> TestTree {
        fs::create_dir(&self.root)
            .unwrap_or_else(|e| panic!("create {}: {e}", self.root.display()));
        self.make_dirs();
        self.make_files();
        if self.spec.symlinks {
            self.make_symlinks();
        }
        self.finish_metadata();
        let atimes = Atimes::record(&self.root);
        TestTree {
            root: self.root,
            files: self.files,
            dirs: self.dirs.into_iter().skip(1).map(|(p, _)| p).collect(),
            symlinks: self.symlinks,
            bytes: self.bytes,
            atimes,
        }
    }

    fn add_dir(&mut self, parent: usize, name: impl Into<OsString>, fillable: bool) -> usize {
        let (parent_rel, depth) = self.dirs[parent].clone();
        let rel = parent_rel.join(name.into());
        fs::create_dir(self.root.join(&rel)).expect("create dir");
        self.dirs.push((rel, depth + 1));
        if fillable {
            self.fillable.push(self.dirs.len() - 1);
        }
        self.dirs.len() - 1
    }

    fn make_dirs(&mut self) {
        self.dirs.push((PathBuf::new(), 0));
        self.fillable.push(0);
        let chain = self.spec.max_depth.min(self.spec.dirs);
        let mut parent = 0;
        for level in 1..=chain {
            parent = self.add_dir(parent, format!("deep{level}"), true);
        }
        let deepest = parent;
        for i in chain..self.spec.dirs {
            let candidates: Vec<usize> = (0..self.dirs.len())
                .filter(|&d| self.dirs[d].1 < self.spec.max_depth)
                .collect();
            let parent = *self.rng.pick(&candidates);
            let name = format!("d{i:02}-{:04x}", self.rng.below(0x10000));
            self.add_dir(parent, name, true);
        }
        if self.spec.dirs > 0 {
            self.add_dir(0, "empty", false);
            self.add_dir(deepest, "empty-deep", false);
        }
        if self.spec.odd_names {
            let odd = self.add_dir(0, "dir with space \u{2713}", true);
            self.add_dir(odd, OsString::from_vec(b"sub-\xff".to_vec()), true);
        }
    }

    fn random_size(&mut self) -> u64 {
        let max = self.spec.max_random_size.max(1);
        match self.rng.below(10) {
            0..=3 => self.rng.below(513.min(max + 1)),
            4..=7 => self.rng.below((64 * KIB).min(max) + 1),
            _ => self.rng.below(max + 1),
        }
    }

    fn make_files(&mut self) {
        let mut sizes = Vec::new();
        if self.spec.boundary_sizes {
            sizes.extend_from_slice(BOUNDARY_SIZES);
        }
        if self.spec.big_files {
            sizes.extend_from_slice(BIG_SIZES);
        }
        for _ in 0..self.spec.random_files {
            let size = self.random_size();
            sizes.push(size);
        }
        for (i, size) in sizes.into_iter().enumerate() {
            let dir = *self.rng.pick(&self.fillable.clone());
            let rel = self.dirs[dir].0.join(format!("f{i:03}-{size}"));
            self.write_file(rel, size);
        }
        if self.spec.odd_names {
            for name in odd_names() {
                let dir = *self.rng.pick(&self.fillable.clone());
                let rel = self.dirs[dir].0.join(name);
                let size = self.rng.below(3000);
                self.write_file(rel, size);
            }
        }
    }

    fn write_file(&mut self, rel: PathBuf, size: u64) {
        let path = self.root.join(&rel);
        let mut file =
            fs::File::create(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        let mut content = Prng::new(self.rng.next_u64());
        let mut left = size;
        while left > 0 {
            let n = left.min(self.buf.len() as u64) as usize;
            content.fill(&mut self.buf[..n]);
            file.write_all(&self.buf[..n]).expect("write test file");
            left -= n as u64;
        }
        self.bytes += size;
        self.files.push(rel);
    }

    /// Creates one symlink named `lNN` in directory `dir` (relative to the root).
    fn link(&mut self, dir: &Path, target: impl Into<OsString>) -> PathBuf {
        let rel = dir.join(format!("l{:02}", self.symlinks.len()));
        symlink(target.into(), self.root.join(&rel)).expect("symlink");
        self.symlinks.push(rel.clone());
        rel
    }

    fn make_symlinks(&mut self) {
        let dirs = self.dirs.clone();
        let files = self.files.clone();
        for _ in 0..4 {
            let (dir, depth) = self.rng.pick(&dirs).clone();
            let up = "../".repeat(depth);
            if !files.is_empty() {
                let file = self.rng.pick(&files).clone();
                self.link(&dir, format!("{up}{}", file.display()));
                let absolute = self.root.join(&file);
                self.link(&dir, absolute);
            }
            let to_dir = self.rng.pick(&dirs).0.clone();
            let target = format!("{up}{}", to_dir.display());
            self.link(
                &dir,
                if target.is_empty() {
                    ".".to_string()
                } else {
                    target
                },
            );
        }
        let root = PathBuf::new();
        let deep = dirs
            .iter()
            .max_by_key(|d| d.1)
            .map(|d| d.0.clone())
            .unwrap_or_default();
        self.link(&root, "no-such-entry");
        self.link(&deep, "/nonexistent/ringio-dangling-target");
        self.link(&deep, ".");
        self.link(&root, OsString::from_vec(b"dangling-\xff\xfe".to_vec()));
        self.link(&root, "a/".repeat(2000));
        let looping = format!("l{:02}", self.symlinks.len());
        self.link(&root, looping);
        // A chain: the second link points at the first one.
        let first = self.link(&deep, "no-such-entry-either");
        self.link(&deep, first.file_name().expect("link name").to_owned());
    }

    fn finish_metadata(&mut self) {
        let root_only = self.spec.unreadable_modes && is_root();
        if self.spec.owners && is_root() {
            let entries: Vec<PathBuf> = self
                .files
                .iter()
                .chain(&self.symlinks)
                .chain(self.dirs.iter().skip(1).map(|(p, _)| p))
                .cloned()
                .collect();
            for rel in entries {
                if self.rng.chance(50) {
                    let uid = *self.rng.pick(OWNERS);
                    let gid = *self.rng.pick(GROUPS);
                    std::os::unix::fs::lchown(self.root.join(rel), Some(uid), Some(gid))
                        .expect("lchown");
                }
            }
        }
        if self.spec.modes {
            for rel in self.files.clone() {
                let mode = self.pick_mode(FILE_MODES, FILE_MODES_ROOT, root_only);
                set_mode(&self.root.join(rel), mode);
            }
        }
        if self.spec.times {
            for rel in self.files.clone().iter().chain(&self.symlinks.clone()) {
                self.set_random_times(rel);
            }
        }
        // Deepest first: a directory's mode and times go on after everything inside it.
        let mut dirs = self.dirs.clone();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.1));
        for (rel, depth) in dirs {
            if self.spec.modes && depth > 0 {
                let mode = self.pick_mode(DIR_MODES, DIR_MODES_ROOT, root_only);
                set_mode(&self.root.join(&rel), mode);
            }
            if self.spec.times {
                self.set_random_times(&rel);
            }
        }
    }

    fn pick_mode(&mut self, common: &[u32], root_only: &[u32], allow_root_only: bool) -> u32 {
        if allow_root_only && self.rng.chance(15) {
            *self.rng.pick(root_only)
        } else {
            *self.rng.pick(common)
        }
    }

    fn random_time(&mut self) -> Ts {
        if self.rng.chance(30) {
            *self.rng.pick(SPECIAL_TIMES)
        } else {
            Ts::new(
                self.rng.range(1_000_000_000, 1_800_000_000) as i64,
                self.rng.below(1_000_000_000) as i64,
            )
        }
    }

    fn set_random_times(&mut self, rel: &Path) {
        let atime = self.random_time();
        let mtime = self.random_time();
        let path = self.root.join(rel);
        set_times(&path, Some(atime), Some(mtime))
            .unwrap_or_else(|e| panic!("utimensat {}: {e}", path.display()));
    }
}

fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {mode:o} {}: {e}", path.display()));
}

fn odd_names() -> Vec<OsString> {
    let mut names: Vec<OsString> = [
        "with space",
        "\u{fc}n\u{ef}c\u{f8}d\u{e9}-\u{540d}\u{524d}",
        "-leading-dash",
        ".hidden",
        "trailing space ",
        "new\nline",
        "star*?[x]",
        "back\\slash",
        "quote'\"",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    names.push("n".repeat(255).into());
    names.push(OsString::from_vec(b"bad-\xff\xfe-utf8".to_vec()));
    names
}
