//! What a comparison is asked to check ([`VerifyOptions`]) and what it found ([`VerifyReport`]).

use std::io;
use std::path::PathBuf;

use crate::quote::quote;

use super::difference::Difference;

/// What [`verify`](super::verify) compares beyond names, types and symlink targets, which it
/// always compares, and what it takes the destination to be. [`VerifyOptions::promised_by`]
/// derives it from a copy's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyOptions {
    /// Permission bits, with setuid, setgid and sticky (not for symlinks).
    pub mode: bool,
    /// Owner and group.
    pub ownership: bool,
    /// Modification time, to the nanosecond (access times move when a tree is read, so they
    /// are never compared).
    pub mtime: bool,
    /// Extended attributes (ACLs included) of every entry: files, directories, symlinks, FIFOs
    /// and devices.
    pub xattrs: bool,
    /// Files hard-linked together in one tree are hard-linked together in the other, and no
    /// others.
    pub hard_links: bool,
    /// A file with holes has holes in the copy too: it allocates no more than the source
    /// (within a small allowance for the filesystem's allocation granularity).
    pub sparseness: bool,
    /// Sizes and contents of regular files (not under `cp --attributes-only`, which copies
    /// metadata alone).
    pub content: bool,
    /// Which source symlinks stand for what they point to (`cp -L`, `-H`).
    pub follow: Follow,
    /// What the destination's non-directories are: copies, or links to the source (`cp -l`,
    /// `-s`).
    pub made_as: MadeAs,
    /// Threads reading file contents.
    pub threads: usize,
    /// The destination's files are read from the device, not the page cache (their cached
    /// pages written back and dropped before they are read).
    pub uncached: bool,
}

/// Which source symlinks a comparison follows: the copy holds what they point to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// None: a symlink is compared as a symlink (`cp -P`, and `ringio verify`).
    Never,
    /// The roots only (`cp -H`, and cp without -r).
    Roots,
    /// Every one (`cp -L`).
    Always,
}

/// What the destination holds in place of each source entry that is not a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MadeAs {
    /// A copy, compared by type, content and the metadata asked for.
    Copies,
    /// A hard link to the source entry: the same inode (`cp -l`).
    HardLinks,
    /// A symbolic link whose target leads to the source entry (`cp -s`).
    SymbolicLinks,
}

impl VerifyOptions {
    /// Names, types, sizes, content, symlink targets: what every copy must get right.
    pub fn content_only() -> Self {
        VerifyOptions {
            mode: false,
            ownership: false,
            mtime: false,
            xattrs: false,
            hard_links: false,
            sparseness: false,
            content: true,
            follow: Follow::Never,
            made_as: MadeAs::Copies,
            threads: default_threads(),
            uncached: false,
        }
    }

    /// Everything `cp -a` promises.
    pub fn archive() -> Self {
        VerifyOptions {
            mode: true,
            ownership: true,
            mtime: true,
            xattrs: true,
            hard_links: true,
            sparseness: true,
            content: true,
            follow: Follow::Never,
            made_as: MadeAs::Copies,
            threads: default_threads(),
            uncached: false,
        }
    }
}

fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 16)
}

/// What a comparison found.
#[derive(Debug, Clone, Default)]
pub struct VerifyReport {
    /// Entries compared (the roots included).
    pub entries: u64,
    /// Bytes of file content compared (per side).
    pub bytes: u64,
    /// The first differences found (at most [`KEPT_DIFFERENCES`]); every one was also passed to
    /// the caller's callback.
    pub differences: Vec<Difference>,
    /// How many differences there were in all.
    pub total_differences: u64,
}

/// How many differences a [`VerifyReport`] keeps.
pub const KEPT_DIFFERENCES: usize = 1000;

impl VerifyReport {
    /// True when the trees are the same.
    pub fn is_same(&self) -> bool {
        self.total_differences == 0
    }
}

/// A comparison that could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot {op} {}: {}", quote(&path), crate::error::reason(source))]
pub struct VerifyError {
    /// What was being done.
    pub op: &'static str,
    /// The root it failed on.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: io::Error,
}
