//! The lab's errors: what was being done, to which file, and why.

use ringio_copy::quote::quote;
use std::io;
use std::path::PathBuf;

/// A measurement that could not be made.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A system call on a file failed.
    #[error("cannot {op} {}: {}", quote(&path), reason(source))]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// The request itself cannot be carried out (bad combination of options, and the like).
    #[error("{0}")]
    Invalid(String),
    /// The source and the destination are one file (one inode), whatever their names: writing
    /// the one would destroy the other.
    #[error("{} and {} are the same file", quote(&src), quote(&dst))]
    SameFile {
        /// The source, as given.
        src: PathBuf,
        /// The destination, as given.
        dst: PathBuf,
    },
    /// The file held another number of bytes than its size said: it shrank or grew while it
    /// was being read, so what was read is no consistent picture of it.
    #[error(
        "{} changed size while {doing}: {stated} bytes by stat, {read} bytes read",
        quote(&path)
    )]
    Changed {
        /// The file.
        path: PathBuf,
        /// "read" or "copied".
        doing: &'static str,
        /// The size stat gave before the read.
        stated: u64,
        /// The bytes the read found.
        read: u64,
    },
}

impl LabError {
    /// An I/O error on `path`.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        LabError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// An io::Error's text without Rust's " (os error N)" tail.
pub fn reason(err: &io::Error) -> String {
    let text = err.to_string();
    match text.rfind(" (os error ") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}
