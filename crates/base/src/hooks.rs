//! Test-only hooks: they let the integration tests change a file at a known instant, so that
//! what a race does is tested deterministically rather than by timing luck. Unset (always,
//! outside the tests), a hook costs one environment lookup per process.

use std::path::Path;
use std::sync::OnceLock;

/// `RINGIO_TEST_RESIZE_AFTER_STAT=BYTES`: once a reader has sized its source (stat'ed it, and
/// mapped it for mmap), the source's length is set to BYTES, as another process truncating or
/// appending to the file at that instant would. `path` may be a `/proc/self/fd/N` link, for a
/// reader that holds the source open read-only.
pub fn resize_after_stat(path: &Path) {
    static RESIZE_TO: OnceLock<Option<u64>> = OnceLock::new();
    let resize_to = RESIZE_TO.get_or_init(|| {
        std::env::var("RINGIO_TEST_RESIZE_AFTER_STAT")
            .ok()
            .and_then(|v| v.parse().ok())
    });
    if let Some(len) = *resize_to {
        let resized = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(len));
        if let Err(e) = resized {
            // The test that set the hook must know it did not fire.
            eprintln!(
                "RINGIO_TEST_RESIZE_AFTER_STAT: cannot resize {}: {e}",
                path.display()
            );
        }
    }
}

/// `RINGIO_TEST_VANISH_AFTER_LIST=NAME`: once a directory holding an entry NAME has been
/// listed, the entry is removed (a file; or an empty directory), as another process removing it
/// between the listing and the stat would. Returns the name to remove, if the hook is set.
pub fn vanish_after_list() -> Option<&'static std::ffi::CStr> {
    static NAME: OnceLock<Option<std::ffi::CString>> = OnceLock::new();
    NAME.get_or_init(|| {
        std::env::var_os("RINGIO_TEST_VANISH_AFTER_LIST").and_then(|v| {
            std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(v.as_os_str())).ok()
        })
    })
    .as_deref()
}
