//! Writing a finished [`Listing`] as a manifest: to a temporary beside it, renamed over the
//! name asked for once whole, so no reader (and no interrupted run) meets half a manifest.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::{mhl, utc_iso8601, Format, Listing};
use crate::digest::{sum_line, Algo};

/// Whether a manifest may be written at `target`: nothing there, or what a rename may replace
/// (under -f/--force), an old manifest: a regular file, or a symlink (the link itself
/// replaced, never what it names). A device, FIFO, socket or directory there is not one, and
/// a rename over it would destroy it.
pub fn replaceable(target: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(target) {
        Ok(m) if !m.file_type().is_file() && !m.file_type().is_symlink() => Err(io::Error::other(
            "not a regular file: a manifest replaces only an old manifest",
        )),
        _ => Ok(()),
    }
}

/// Writes `listing` as `format`: to the file `target` (`sum`, `json`; `-` is standard output),
/// or as a new generation in `target/ascmhl` (`mhl`, where `target` is the destination root).
/// Returns what was written.
pub fn write(listing: &Listing, format: Format, target: &Path) -> io::Result<PathBuf> {
    let bytes = match format {
        Format::Mhl => return mhl::write_generation(target, listing.algo, &listing.entries),
        Format::Sum => sum(listing),
        Format::Json => json(listing),
    };
    if target == Path::new("-") {
        io::stdout().lock().write_all(&bytes)?;
        return Ok(target.to_path_buf());
    }
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = target.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the manifest needs a file name",
        )
    })?;
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".");
    let mut temp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .tempfile_in(dir)?;
    temp.write_all(&bytes)?;
    // As any new file: 0666 less the umask (the temporary was made 0600).
    let mode = 0o666 & !crate::sys::umask();
    // Through the descriptor: the name could be swapped for a symlink meanwhile.
    temp.as_file()
        .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
    // Asked again: the name may have changed since the run began.
    replaceable(target)?;
    temp.persist(target).map_err(|e| e.error)?;
    Ok(target.to_path_buf())
}

/// The lines `sha256sum`, `b3sum` and `xxhsum` write: `HEX  NAME`, and xxhsum's tagged
/// `XXH3 (NAME) = HEX` for XXH3-64, which it writes no other way.
fn sum(listing: &Listing) -> Vec<u8> {
    let mut out = Vec::new();
    for e in &listing.entries {
        if listing.algo == Algo::Xxh3 {
            let (name, escaped) = crate::digest::escape_name(&e.path);
            if escaped {
                out.push(b'\\');
            }
            out.extend_from_slice(b"XXH3 (");
            out.extend_from_slice(&name);
            out.extend_from_slice(b") = ");
            out.extend_from_slice(e.hex.as_bytes());
            out.push(b'\n');
        } else {
            out.extend_from_slice(&sum_line(&e.hex, &e.path));
        }
    }
    out
}

/// A JSON array, one object a line: `path` (and `path_bytes`, the raw bytes, for a name that
/// is not UTF-8), `size`, `mtime` (UTC, ISO 8601; where the copy has its source's, or was left
/// as it was), `algorithm`, `hash`.
fn json(listing: &Listing) -> Vec<u8> {
    let mut out = b"[\n".to_vec();
    for (i, e) in listing.entries.iter().enumerate() {
        let mut obj = serde_json::Map::new();
        let path = String::from_utf8_lossy(&e.path);
        obj.insert("path".into(), path.as_ref().into());
        if std::str::from_utf8(&e.path).is_err() {
            obj.insert("path_bytes".into(), e.path.clone().into());
        }
        obj.insert("size".into(), e.size.into());
        if let Some((s, ns)) = e.mtime {
            obj.insert("mtime".into(), utc_iso8601(s, ns).into());
        }
        obj.insert("algorithm".into(), listing.algo.to_string().into());
        obj.insert("hash".into(), e.hex.clone().into());
        if i > 0 {
            out.extend_from_slice(b",\n");
        }
        out.extend_from_slice(serde_json::Value::Object(obj).to_string().as_bytes());
    }
    out.extend_from_slice(b"\n]\n");
    out
}
