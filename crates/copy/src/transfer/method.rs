//! The ways of moving bytes ([`Method`]) and why a transfer stopped ([`TransferError`]).

use std::io;

/// A way of moving bytes between two files.
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
pub enum Method {
    /// pread/pwrite through a user-space buffer.
    #[strum(serialize = "readwrite")]
    ReadWrite,
    /// copy_file_range(2): the kernel copies (or, on btrfs and xfs, clones).
    CopyRange,
    /// sendfile(2) from the source to the destination's file position.
    Sendfile,
    /// splice(2) through a pipe, with explicit offsets on both files.
    Splice,
    /// Linux native AIO (io_submit/io_getevents): a window of reads and writes in flight.
    Aio,
}

impl Method {
    /// Every method, in the order help texts list them (declaration order).
    pub const ALL: &'static [Method] = <Method as strum::VariantArray>::VARIANTS;

    /// The name used on command lines.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// True when the method writes at explicit offsets, so several threads may copy parts of
    /// one file at once. sendfile writes at the destination's shared file position.
    pub fn positional(self) -> bool {
        self != Method::Sendfile
    }
}

/// Why a transfer stopped.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The method is not available for these files; nothing was written.
    #[error("not supported here: {0}")]
    Unsupported(io::Error),
    /// Reading the source failed.
    #[error("read failed: {0}")]
    Read(io::Error),
    /// Writing the destination failed.
    #[error("write failed: {0}")]
    Write(io::Error),
}

/// Errors that say "this interface cannot do that here" (for FICLONE too).
pub(crate) fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::EXDEV
                | libc::EINVAL
                | libc::EOPNOTSUPP
                | libc::ENOSYS
                | libc::ENOTTY
                | libc::EBADF
                | libc::EPERM
        )
    )
}

/// Errors of a kernel-side copy that belong to the destination.
pub(super) fn write_side(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG | libc::EROFS)
    )
}
