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

/// `RINGIO_TEST_REWRITE_AFTER_READ=1`: once a copy has read `bytes` at `at` of its source
/// `fd`, those bytes of the source are replaced by their complement (each byte XOR 0xff), as
/// another process writing the file at that instant would. A byte read once by the copy ends
/// complemented in the source, a byte read twice as it was: what the tests of `--tee`'s one
/// read look at. The file's access and modification times are set back after the write.
pub fn rewrite_after_read(fd: std::os::fd::BorrowedFd<'_>, at: u64, bytes: &[u8]) {
    if !rewrites_after_read() {
        return;
    }
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let flipped: Vec<u8> = bytes.iter().map(|b| b ^ 0xff).collect();
    // One rewrite at a time: two workers rewriting chunks of one file at once could each read
    // the times the other's write had just moved, and leave them moved.
    let _turn = REWRITING.lock().unwrap_or_else(|e| e.into_inner());
    // Its times kept, so that the copy does not see a file changed while it was copied.
    let written = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|f| {
            let before = f.metadata()?;
            f.write_all_at(&flipped, at)?;
            let times = std::fs::FileTimes::new()
                .set_accessed(before.accessed()?)
                .set_modified(before.modified()?);
            f.set_times(times)
        });
    if let Err(e) = written {
        eprintln!("RINGIO_TEST_REWRITE_AFTER_READ: cannot rewrite {path}: {e}");
    }
}

/// Held while [`rewrite_after_read`] writes a source and sets its times back.
static REWRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `look` (a check that a source held still while it was copied) where no
/// [`rewrite_after_read`] is half done: its write and the times it sets back are one step to
/// the check, as the times-keeping writer it stands for means them to be. Without the hook,
/// just `look()`.
pub fn between_rewrites<T>(look: impl FnOnce() -> T) -> T {
    if !rewrites_after_read() {
        return look();
    }
    let _turn = REWRITING.lock().unwrap_or_else(|e| e.into_inner());
    look()
}

/// True when `RINGIO_TEST_REWRITE_AFTER_READ` is set: a reader that moves bytes without seeing
/// them (splice) reads them for [`rewrite_after_read`].
pub fn rewrites_after_read() -> bool {
    static REWRITE: OnceLock<bool> = OnceLock::new();
    *REWRITE.get_or_init(|| std::env::var_os("RINGIO_TEST_REWRITE_AFTER_READ").is_some())
}
