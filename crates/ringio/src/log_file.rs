//! `--log-file FILE` (cp and sync): appended to, and only ever a regular file.
//!
//! The open never waits: a FIFO would block it until some process opened the other end (and a
//! signal could not stop the command meanwhile), a device could block or misbehave. It never
//! follows a symlink either: a log named in a shared directory cannot be turned into an append
//! to some other file. So the file is opened with O_NONBLOCK|O_NOFOLLOW and kept only when the
//! descriptor is a regular file. What a command does when it cannot be opened is its own: cp
//! fails, sync warns and goes on, as rsync.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// Opens (creating it 0666 less the umask) the log file `path` for appending; anything but a
/// regular file is refused, the error saying what it is ("not a regular file (a FIFO)").
pub fn open(path: &Path) -> io::Result<File> {
    // A directory is said as the kernel and rsync say it; the other kinds by what they are.
    let not_a_file = |what| match what {
        "a directory" => io::Error::from_raw_os_error(libc::EISDIR),
        _ => io::Error::other(format!("not a regular file ({what})")),
    };
    // Asked first, so that a device is not even opened (opening some has effects: a tape
    // rewinds, a watchdog starts); the check on the opened descriptor is the one that holds.
    if let Some(what) = not_regular(path) {
        return Err(not_a_file(what));
    }
    // The one open of a file that must be regular (O_NONBLOCK, checked on the descriptor);
    // not followed: an append through a symlink planted in a shared directory would write
    // into whatever it names.
    ringio_copy::open_regular_path(path, false, ringio_copy::Regular::Append).map_err(|e| {
        // Swapped in since: the kernel's words for it say less than what the entry is.
        match not_regular(path) {
            Some(what) => not_a_file(what),
            None => e,
        }
    })
}

/// What `path` is, when it exists and is not a regular file.
fn not_regular(path: &Path) -> Option<&'static str> {
    let kind = std::fs::symlink_metadata(path).ok()?.file_type();
    (!kind.is_file()).then(|| describe(kind))
}

fn describe(kind: std::fs::FileType) -> &'static str {
    if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}
