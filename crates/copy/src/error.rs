//! Errors that name the operation and the path.

use std::io;
use std::path::PathBuf;

use crate::quote::quote;
pub(crate) use crate::quote::reason;

/// The operation that failed, worded for `ringio: cannot <op> '<path>': <reason>`; named in
/// snake case in JSON (`open_dir`, `set_times`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Op {
    /// stat / statx.
    Stat,
    /// Opening a file for reading.
    Open,
    /// Opening a directory.
    OpenDir,
    /// Opening a source directory to read it (cp's "cannot access").
    Access,
    /// Reading directory entries.
    ReadDir,
    /// Creating a regular file.
    Create,
    /// Creating a directory.
    CreateDir,
    /// Reading file content.
    Read,
    /// Writing file content.
    Write,
    /// Renaming into place (`--atomic`).
    Rename,
    /// Renaming an existing destination aside (`--backup`).
    Backup,
    /// fsync/syncfs (`--fsync`).
    Sync,
    /// Reading a symlink's target.
    ReadLink,
    /// Creating a symlink.
    CreateSymlink,
    /// Creating a special file (fifo, socket, device).
    CreateSpecial,
    /// Removing a destination entry.
    Remove,
    /// Setting permissions.
    SetMode,
    /// Setting owner and group.
    SetOwner,
    /// Setting access and modification times.
    SetTimes,
    /// Copying extended attributes.
    SetXattr,
    /// Closing a file (errors here can mean lost writes).
    Close,
    /// `--atomic` onto an existing file: giving its replacement the old file's owner and group.
    KeepOwner,
    /// `--atomic` onto an existing file: giving its replacement the old file's permissions.
    KeepMode,
    /// `--atomic` onto an existing file: reading the old file's extended attributes (ACL
    /// included), or giving them to its replacement.
    KeepXattr,
}

impl Op {
    fn verb(self) -> &'static str {
        match self {
            Op::Stat => "stat",
            Op::Open => "open",
            Op::OpenDir => "open directory",
            Op::Access => "access",
            Op::ReadDir => "read directory",
            Op::Create => "create regular file",
            Op::CreateDir => "create directory",
            Op::Read => "read",
            Op::Write => "write",
            Op::Rename => "rename",
            Op::Backup => "backup",
            Op::Sync => "sync",
            Op::ReadLink => "read symbolic link",
            Op::CreateSymlink => "create symbolic link",
            Op::CreateSpecial => "create special file",
            Op::Remove => "remove",
            Op::SetMode => "preserve permissions for",
            Op::SetOwner => "preserve ownership for",
            Op::SetTimes => "preserve times for",
            Op::SetXattr => "preserve extended attributes for",
            Op::Close => "close",
            Op::KeepOwner => "keep the owner and group of",
            Op::KeepMode => "keep the permissions of",
            Op::KeepXattr => "keep the extended attributes of",
        }
    }
}

/// A failure of one operation on one path.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// A system call failed.
    #[error("cannot {} {}: {}", .op.verb(), quote(&.path), reason(.source))]
    Io {
        /// What was being done.
        op: Op,
        /// The path it was done to, as the user would name it.
        path: PathBuf,
        /// The system's reason.
        #[source]
        source: io::Error,
    },
    /// FICLONE failed under `--reflink=always`: cp names both files.
    #[error("failed to clone {} from {}: {}", quote(.dst), quote(.src), reason(.source))]
    Clone {
        /// The file that was to share the extents.
        dst: PathBuf,
        /// The file whose extents it was to share.
        src: PathBuf,
        /// The system's reason.
        #[source]
        source: io::Error,
    },
    /// A rule of cp refused the copy (into itself, same file, missing -r, ...).
    #[error(transparent)]
    Rule(#[from] crate::refusal::Refused),
    /// The copy of an entry was given up for a reason of its own (a source that changed while
    /// it was copied, a parent that is not a directory, ...).
    #[error("{0}")]
    Refused(String),
}

impl CopyError {
    /// Builds an I/O error for `op` on `path`.
    pub fn io(op: Op, path: impl Into<PathBuf>, source: impl Into<io::Error>) -> Self {
        CopyError::Io {
            op,
            path: path.into(),
            source: source.into(),
        }
    }

    /// A failed clone of `src` into `dst`.
    pub fn clone_failed(dst: PathBuf, src: PathBuf, source: io::Error) -> Self {
        CopyError::Clone { dst, src, source }
    }

    /// The system's reason alone, as cp words it ("Permission denied").
    pub fn reason(&self) -> String {
        match self {
            CopyError::Io { source, .. } | CopyError::Clone { source, .. } => {
                reason(source).to_string()
            }
            other => other.to_string(),
        }
    }

    /// The error as JSON: its `message` (the line printed), and beside it what a program
    /// needs without parsing that: the `op` (snake case) and `path` (lossy UTF-8) of a failed
    /// call, its `errno` and `reason`; a failed clone's `source_path` too; a refusal has its
    /// message and `"op": null`.
    pub fn to_json(&self) -> serde_json::Value {
        let text = |p: &std::path::Path| p.to_string_lossy().into_owned();
        let call = |op: &'static str, path: &std::path::Path, source: &io::Error| {
            serde_json::json!({
                "message": self.to_string(),
                "op": op,
                "path": text(path),
                "errno": source.raw_os_error(),
                "reason": reason(source).to_string(),
            })
        };
        match self {
            CopyError::Io { op, path, source } => call(op.into(), path, source),
            CopyError::Clone { dst, src, source } => {
                let mut value = call("clone", dst, source);
                value["source_path"] = text(src).into();
                value
            }
            CopyError::Rule(_) | CopyError::Refused(_) => serde_json::json!({
                "message": self.to_string(),
                "op": null,
                "path": null,
                "errno": null,
                "reason": null,
            }),
        }
    }

    /// True for errors that must stop the whole run: no space, no quota, read-only filesystem.
    pub fn is_fatal(&self) -> bool {
        match self {
            CopyError::Io { source, .. } | CopyError::Clone { source, .. } => matches!(
                source.raw_os_error(),
                Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EROFS)
            ),
            CopyError::Rule(_) | CopyError::Refused(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_matches_cp() {
        let err = CopyError::io(
            Op::Open,
            "src/secret",
            io::Error::from_raw_os_error(libc::EACCES),
        );
        assert_eq!(
            err.to_string(),
            "cannot open 'src/secret': Permission denied"
        );
        assert!(!err.is_fatal());
        let full = CopyError::io(Op::Write, "d/f", io::Error::from_raw_os_error(libc::ENOSPC));
        assert!(full.is_fatal());
    }

    /// The JSON form carries the operation, path, errno and reason beside the message.
    #[test]
    fn json_has_the_fields_beside_the_message() {
        let err = CopyError::io(
            Op::OpenDir,
            "a/b",
            io::Error::from_raw_os_error(libc::ENOENT),
        );
        assert_eq!(
            err.to_json(),
            serde_json::json!({
                "message": "cannot open directory 'a/b': No such file or directory",
                "op": "open_dir",
                "path": "a/b",
                "errno": libc::ENOENT,
                "reason": "No such file or directory",
            })
        );
        let clone = CopyError::clone_failed(
            "d".into(),
            "s".into(),
            io::Error::from_raw_os_error(libc::EXDEV),
        );
        let json = clone.to_json();
        assert_eq!(
            (json["op"].as_str(), json["source_path"].as_str()),
            (Some("clone"), Some("s"))
        );
        let refused = CopyError::Refused("no".into()).to_json();
        assert_eq!(refused["message"], "no");
        assert!(refused["errno"].is_null());
    }
}
