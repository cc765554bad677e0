//! The ways two trees can differ, and how a difference prints.

use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::quote::quote;

/// One way in which the trees differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DifferenceKind {
    /// In the source, not in the destination.
    Missing,
    /// In the destination, not in the source.
    Extra,
    /// Different file types.
    Type {
        /// The source's type.
        src: &'static str,
        /// The destination's type.
        dst: &'static str,
    },
    /// Different sizes.
    Size {
        /// The source's size.
        src: u64,
        /// The destination's size.
        dst: u64,
    },
    /// Same size, different bytes.
    Content {
        /// The first byte that differs.
        offset: u64,
    },
    /// Different permission bits.
    Mode {
        /// The source's mode.
        src: u32,
        /// The destination's mode.
        dst: u32,
    },
    /// Different owner or group.
    Owner {
        /// The source's uid:gid.
        src: (u32, u32),
        /// The destination's uid:gid.
        dst: (u32, u32),
    },
    /// Different modification times.
    Mtime {
        /// The source's mtime.
        src: (i64, u32),
        /// The destination's mtime.
        dst: (i64, u32),
    },
    /// Symlinks pointing elsewhere.
    SymlinkTarget {
        /// The source's target.
        src: Vec<u8>,
        /// The destination's target.
        dst: Vec<u8>,
    },
    /// Device nodes with different numbers.
    Device {
        /// The source's rdev.
        src: u64,
        /// The destination's rdev.
        dst: u64,
    },
    /// An extended attribute missing, extra or with another value.
    Xattr {
        /// The attribute.
        name: String,
        /// What is wrong with it.
        what: &'static str,
    },
    /// Hard-link grouping differs: the entry is (or is not) linked to an earlier one.
    HardLinks {
        /// The earlier entry of the group, in the tree where the link exists.
        other: PathBuf,
        /// Which tree has the link.
        linked_in: &'static str,
    },
    /// The source has holes and the copy allocates more.
    Sparseness {
        /// Bytes allocated to the source.
        src_allocated: u64,
        /// Bytes allocated to the copy.
        dst_allocated: u64,
    },
    /// The destination entry is not the link to the source entry that `cp -l` or `-s` makes.
    NotLinked {
        /// What it should be: "a hard link" or "a symbolic link".
        expected: &'static str,
    },
    /// A file held another number of bytes than its size said: it shrank or grew while it
    /// was compared.
    Changed {
        /// Which side.
        side: &'static str,
        /// The size stat gave.
        stated: u64,
        /// The bytes read, to end of file.
        read: u64,
    },
    /// The entry could not be read on one side.
    Unreadable {
        /// Which side.
        side: &'static str,
        /// What was being done.
        op: &'static str,
        /// Why it failed.
        reason: String,
    },
}

/// A difference and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The entry, relative to the roots (empty for the roots themselves).
    pub path: PathBuf,
    /// What differs.
    pub kind: DifferenceKind,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.as_os_str().is_empty() {
            f.write_str(".: ")?;
        } else {
            write!(f, "{}: ", quote(&self.path))?;
        }
        use DifferenceKind as D;
        match &self.kind {
            D::Missing => write!(f, "missing from the destination"),
            D::Extra => write!(f, "only in the destination"),
            D::Type { src, dst } => write!(f, "type: {src} in the source, {dst} in the destination"),
            D::Size { src, dst } => write!(f, "size: {src} bytes in the source, {dst} in the destination"),
            D::Content { offset } => write!(f, "content differs from byte {offset}"),
            D::Mode { src, dst } => write!(f, "mode: {src:04o} in the source, {dst:04o} in the destination"),
            D::Owner { src, dst } => write!(
                f,
                "owner: {}:{} in the source, {}:{} in the destination",
                src.0, src.1, dst.0, dst.1
            ),
            D::Mtime { src, dst } => write!(
                f,
                "mtime: {}.{:09} in the source, {}.{:09} in the destination",
                src.0, src.1, dst.0, dst.1
            ),
            D::SymlinkTarget { src, dst } => write!(
                f,
                "symlink target: {} in the source, {} in the destination",
                quote(OsStr::from_bytes(src)),
                quote(OsStr::from_bytes(dst))
            ),
            D::Device { src, dst } => write!(
                f,
                "device: {}:{} in the source, {}:{} in the destination",
                rustix::fs::major(*src),
                rustix::fs::minor(*src),
                rustix::fs::major(*dst),
                rustix::fs::minor(*dst)
            ),
            D::Xattr { name, what } => write!(f, "extended attribute {name}: {what}"),
            D::HardLinks { other, linked_in } => write!(
                f,
                "hard links: linked to {} only in the {linked_in}",
                quote(&other)
            ),
            D::Sparseness {
                src_allocated,
                dst_allocated,
            } => write!(
                f,
                "holes lost: {src_allocated} bytes allocated in the source, {dst_allocated} in the destination"
            ),
            D::NotLinked { expected } => write!(f, "not {expected} to the source"),
            D::Changed { side, stated, read } => write!(
                f,
                "the {side} changed size while compared: {stated} bytes by stat, {read} bytes read"
            ),
            D::Unreadable { side, op, reason } => write!(f, "cannot {op} in the {side}: {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names are quoted as cp quotes them, so a report line stays one line and names the file.
    #[test]
    fn names_print_on_one_line() {
        let d = Difference {
            path: PathBuf::from(OsStr::from_bytes(b"a\nb\tc\\d\xff")),
            kind: DifferenceKind::Missing,
        };
        assert_eq!(
            d.to_string(),
            "'a'$'\\n''b'$'\\t''c\\d'$'\\377': missing from the destination"
        );
    }
}
