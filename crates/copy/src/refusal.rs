//! cp's refusals: each rule once, with GNU cp's words.

use std::fmt;
use std::path::PathBuf;

use crate::quote::{quote, reason};

/// A rule of cp that refuses to copy an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The source and the destination are one file.
    SameFile,
    /// An earlier operand of this run created the destination.
    JustCreated,
    /// An earlier operand of this run created the symlink data would be written through.
    ThroughJustCreatedSymlink,
    /// Data would go through a symlink that leads nowhere (allowed under POSIXLY_CORRECT).
    DanglingSymlink,
    /// A non-directory would replace a directory.
    DirectoryWithNonDirectory,
    /// A directory would replace a non-directory.
    NonDirectoryWithDirectory,
    /// `--atomic` onto something a rename cannot replace in place of a regular file.
    AtomicNotRegular,
    /// `--backup` would rename the source itself aside (`cp --b=simple a~ a`).
    BackupDestroysSource,
    /// A directory without -r.
    NotRecursive,
    /// `-l` onto a directory.
    HardLinkToDirectory,
    /// A directory into itself or below itself.
    IntoItself,
    /// Under -L, a symlink to one of its own ancestor directories.
    SymlinkLoop,
    /// The source's name led to another file when it was opened than when it was stated.
    ReplacedWhileCopied,
    /// `-s` with a relative source, into another directory than the current one.
    RelativeSymlinkElsewhere,
    /// The destination could not be looked at through its symlink (this errno).
    Unreadable(i32),
}

impl Refusal {
    /// This refusal of copying `src` to `dst`, as the user named them.
    pub fn of(self, src: impl Into<PathBuf>, dst: impl Into<PathBuf>) -> Refused {
        Refused {
            rule: self,
            src: src.into(),
            dst: dst.into(),
        }
    }
}

/// A refusal with the paths it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The rule.
    pub rule: Refusal,
    /// The source, as the user named it.
    pub src: PathBuf,
    /// The destination, as the user named it (for [`Refusal::HardLinkToDirectory`], the
    /// directory a link was asked to).
    pub dst: PathBuf,
}

impl std::error::Error for Refused {}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (src, dst) = (quote(&self.src), quote(&self.dst));
        match self.rule {
            Refusal::SameFile => write!(f, "{src} and {dst} are the same file"),
            Refusal::JustCreated => write!(f, "will not overwrite just-created {dst} with {src}"),
            Refusal::ThroughJustCreatedSymlink => {
                write!(f, "will not copy {src} through just-created symlink {dst}")
            }
            Refusal::DanglingSymlink => write!(f, "not writing through dangling symlink {dst}"),
            Refusal::DirectoryWithNonDirectory => {
                write!(f, "cannot overwrite directory {dst} with non-directory")
            }
            Refusal::NonDirectoryWithDirectory => {
                write!(
                    f,
                    "cannot overwrite non-directory {dst} with directory {src}"
                )
            }
            Refusal::AtomicNotRegular => {
                write!(f, "cannot replace {dst} atomically: not a regular file")
            }
            Refusal::BackupDestroysSource => {
                write!(
                    f,
                    "backing up {dst} might destroy source;  {src} not copied"
                )
            }
            Refusal::NotRecursive => write!(f, "-r not specified; omitting directory {src}"),
            Refusal::HardLinkToDirectory => {
                write!(f, "will not create hard link {dst} to directory {src}")
            }
            Refusal::IntoItself => {
                write!(f, "cannot copy a directory, {src}, into itself, {dst}")
            }
            Refusal::SymlinkLoop => write!(
                f,
                "cannot copy {src}: symbolic link loop (directory is its own ancestor)"
            ),
            Refusal::ReplacedWhileCopied => {
                write!(
                    f,
                    "skipping file {src}, as it was replaced while being copied"
                )
            }
            Refusal::RelativeSymlinkElsewhere => write!(
                f,
                "{}: can make relative symbolic links only in current directory",
                self.dst.display()
            ),
            Refusal::Unreadable(errno) => write!(
                f,
                "cannot stat {dst}: {}",
                reason(&std::io::Error::from_raw_os_error(errno))
            ),
        }
    }
}
