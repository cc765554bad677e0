//! Cold-cache reads: evicting one file (POSIX_FADV_DONTNEED, no privilege needed) or, as root,
//! the whole page cache.

use std::os::fd::AsFd;
use std::path::Path;

use crate::error::LabError;

/// Drops `path`'s pages from the page cache (after writing back any dirty ones, which
/// DONTNEED would otherwise skip).
pub fn evict(path: &Path) -> Result<(), LabError> {
    let file = std::fs::File::open(path).map_err(|e| LabError::io("open", path, e))?;
    let _ = rustix::fs::fdatasync(file.as_fd());
    rustix::fs::fadvise(file.as_fd(), 0, None, rustix::fs::Advice::DontNeed)
        .map_err(|e| LabError::io("evict from the page cache", path, e.into()))
}

/// `sync; echo 3 > /proc/sys/vm/drop_caches`: needs root.
pub fn drop_caches() -> Result<(), LabError> {
    rustix::fs::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            LabError::Invalid(
                "dropping the whole page cache needs root (use --cold alone to evict just the file)"
                    .into(),
            )
        } else {
            LabError::io("write", "/proc/sys/vm/drop_caches", e)
        }
    })
}
