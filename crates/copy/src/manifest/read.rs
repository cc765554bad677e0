//! Reading a manifest of any format into a [`Listing`]: the sum lines of `sha256sum`, `b3sum`,
//! `xxhsum`, `md5sum` (or ringio's), a JSON manifest, or an ASC MHL (a `.mhl` file, or an
//! `ascmhl` folder with its history).

use std::io;
use std::path::{Path, PathBuf};

use super::{mhl, Entry, Listing};
use crate::digest::{parse_sum_line, Algo};

/// Reads `manifest`, whatever its format; `algo` overrides what it says of its algorithm.
pub fn read(manifest: &Path, algo: Option<Algo>) -> Result<Listing, ManifestError> {
    if mhl::looks_like(manifest) {
        let listing = mhl::read(manifest).map_err(|(line, why)| ManifestError::Line {
            path: manifest.to_path_buf(),
            line,
            why,
        })?;
        return nonempty(manifest, listing);
    }
    let text = crate::sys::read_regular_path(manifest).map_err(|source| ManifestError::Read {
        path: manifest.to_path_buf(),
        source,
    })?;
    match text.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[' | b'{') => nonempty(manifest, read_json(manifest, &text, algo)?),
        _ => read_sums(manifest, &text, algo),
    }
}

fn nonempty(manifest: &Path, listing: Listing) -> Result<Listing, ManifestError> {
    if listing.entries.is_empty() {
        return Err(ManifestError::Empty {
            path: manifest.to_path_buf(),
        });
    }
    Ok(listing)
}

/// A JSON manifest as ringio writes it (an array of objects), or JSON Lines of such objects.
fn read_json(manifest: &Path, text: &[u8], algo: Option<Algo>) -> Result<Listing, ManifestError> {
    let invalid = |why: String| ManifestError::Invalid {
        path: manifest.to_path_buf(),
        why,
    };
    let objects: Vec<serde_json::Value> = match serde_json::from_slice(text) {
        Ok(serde_json::Value::Array(items)) => items,
        Ok(one @ serde_json::Value::Object(_)) => vec![one],
        Ok(_) => return Err(invalid("not an array of objects".into())),
        Err(whole) => {
            // JSON Lines: one object a line.
            let mut items = Vec::new();
            for (i, line) in text.split(|&b| b == b'\n').enumerate() {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let item = serde_json::from_slice(line).map_err(|_| ManifestError::Line {
                    path: manifest.to_path_buf(),
                    line: if i == 0 { whole.line() } else { i + 1 },
                    why: whole.to_string(),
                })?;
                items.push(item);
            }
            items
        }
    };
    let mut chosen = algo;
    let mut alternative = None;
    let mut entries = Vec::with_capacity(objects.len());
    for (i, obj) in objects.iter().enumerate() {
        let at = |why: &str| invalid(format!("entry {}: {why}", i + 1));
        let field = |name: &str| obj.get(name);
        let path = match (field("path_bytes"), field("path")) {
            (Some(serde_json::Value::Array(bytes)), _) => bytes
                .iter()
                .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                .collect::<Option<Vec<u8>>>()
                .ok_or_else(|| at("path_bytes is not an array of bytes"))?,
            (_, Some(serde_json::Value::String(p))) => p.as_bytes().to_vec(),
            _ => return Err(at("no path")),
        };
        if path.is_empty() || path.contains(&0) {
            return Err(at("an empty path, or one with a NUL"));
        }
        let hex = field("hash")
            .and_then(|h| h.as_str())
            .ok_or_else(|| at("no hash"))?
            .to_ascii_lowercase();
        let named = match field("algorithm").and_then(|a| a.as_str()) {
            Some(name) => Some(
                name.parse::<Algo>()
                    .map_err(|_| at("an unknown algorithm"))?,
            ),
            None => None,
        };
        let this = match (algo, named, chosen) {
            (Some(given), _, _) => given,
            (None, Some(a), Some(c)) if a != c => return Err(at("a second algorithm")),
            (None, Some(a), _) => a,
            (None, None, Some(c)) => c,
            (None, None, None) => {
                let (algo, other) = by_length(hex.len()).map_err(|why| at(&why))?;
                alternative = other;
                algo
            }
        };
        if hex.len() != this.hex_len() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(at(&format!("not a {this} hash")));
        }
        chosen = Some(this);
        entries.push(Entry {
            path,
            size: field("size").and_then(|s| s.as_u64()).unwrap_or(0),
            mtime: None,
            hex,
        });
    }
    match chosen {
        Some(algo) => Ok(Listing {
            algo,
            entries,
            alternative,
        }),
        None => Err(ManifestError::Empty {
            path: manifest.to_path_buf(),
        }),
    }
}

/// Why a manifest cannot be checked at all.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// It cannot be read.
    #[error("cannot read the manifest {}: {source}", crate::quote::quote_path(.path))]
    Read {
        /// The manifest.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A line is not a checksum line.
    #[error("{}:{line}: {why}", .path.display())]
    Line {
        /// The manifest.
        path: PathBuf,
        /// Its number, from 1.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
    /// An entry of a JSON or MHL manifest is not one.
    #[error("{}: {why}", .path.display())]
    Invalid {
        /// The manifest.
        path: PathBuf,
        /// What is wrong, and where.
        why: String,
    },
    /// It lists nothing: never taken for "no differences".
    #[error("{} lists no file: not a manifest", crate::quote::quote_path(.path))]
    Empty {
        /// The manifest.
        path: PathBuf,
    },
}

/// The lines of a sum file, and their algorithm (`algo` when given; else the lines' tag, or the
/// only one of the hashes' length; a length two algorithms share needs `algo`).
fn read_sums(manifest: &Path, text: &[u8], algo: Option<Algo>) -> Result<Listing, ManifestError> {
    let mut lines = Vec::new();
    let mut chosen = algo;
    let mut alternative = None;
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let at = |why: String| ManifestError::Line {
            path: manifest.to_path_buf(),
            line: i + 1,
            why,
        };
        if line.is_empty() {
            continue;
        }
        let sum = parse_sum_line(line).map_err(at)?;
        let this = match (algo, sum.algo, chosen) {
            (Some(given), _, _) => given,
            (None, Some(tagged), Some(c)) if tagged != c => {
                return Err(at(format!(
                    "a {} line among {} lines",
                    tagged.tag(),
                    c.tag()
                )));
            }
            (None, Some(tagged), _) => tagged,
            (None, None, Some(c)) => c,
            (None, None, None) => match named_by(manifest).filter(|a| a.hex_len() == sum.hex.len())
            {
                Some(named) => named,
                None => {
                    let (algo, other) = by_length(sum.hex.len()).map_err(at)?;
                    alternative = other;
                    algo
                }
            },
        };
        if sum.hex.len() != this.hex_len() {
            return Err(at(format!(
                "a {}-digit hash, where {this} has {}",
                sum.hex.len(),
                this.hex_len()
            )));
        }
        chosen = Some(this);
        lines.push(Entry {
            path: sum.name,
            size: 0,
            mtime: None,
            hex: sum.hex,
        });
    }
    match chosen {
        Some(algo) if !lines.is_empty() => Ok(Listing {
            algo,
            entries: lines,
            alternative,
        }),
        _ => Err(ManifestError::Empty {
            path: manifest.to_path_buf(),
        }),
    }
}

/// The algorithm a manifest's file name names, as the tools' users name them: `SHA256SUMS`,
/// `x.sha256`, `B3SUMS`, `x.b3`, `MD5SUMS`, `x.xxh128`, ...
fn named_by(manifest: &Path) -> Option<Algo> {
    let name = manifest.file_name()?.to_string_lossy().to_ascii_lowercase();
    let stem = name.strip_suffix("sums").unwrap_or(&name);
    let word = stem.rsplit('.').next().unwrap_or(stem);
    let word = word.strip_suffix("sum").unwrap_or(word);
    match word {
        "b3" | "blake3" => Some(Algo::Blake3),
        "xxh" | "xxhash" => Some(Algo::Xxh64),
        other => other.parse().ok(),
    }
}

/// The algorithm a plain line's hash length names, where only one has it.
/// The algorithm a plain hash's length names, and the other one of that length if there is
/// one: xxh128 before md5 (ringio's default), sha256 before blake3; a check tells them apart on
/// the first file.
fn by_length(len: usize) -> Result<(Algo, Option<Algo>), String> {
    match len {
        // xxhsum writes XXH64 plain and XXH3 tagged: a plain 16-digit hash is XXH64.
        16 => Ok((Algo::Xxh64, None)),
        32 => Ok((Algo::Xxh128, Some(Algo::Md5))),
        40 => Ok((Algo::Sha1, None)),
        64 => Ok((Algo::Sha256, Some(Algo::Blake3))),
        _ => Err(format!(
            "a {len}-digit hash is no algorithm's: say which with --hash"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::sum_line;

    fn hex(algo: Algo, data: &[u8]) -> String {
        algo.hex_of(data)
    }

    #[test]
    fn a_manifests_name_says_its_algorithm() {
        for (name, algo) in [
            ("SHA256SUMS", Some(Algo::Sha256)),
            ("offload.sha256", Some(Algo::Sha256)),
            ("x.sha256sum", Some(Algo::Sha256)),
            ("B3SUMS", Some(Algo::Blake3)),
            ("card.b3", Some(Algo::Blake3)),
            ("MD5SUMS", Some(Algo::Md5)),
            ("a.xxh128", Some(Algo::Xxh128)),
            ("manifest.txt", None),
            ("m", None),
        ] {
            assert_eq!(named_by(Path::new(name)), algo, "{name}");
        }
    }

    #[test]
    fn a_bad_or_empty_manifest_is_an_error_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("m");
        std::fs::write(&m, b"\n\n").unwrap();
        assert!(matches!(read(&m, None), Err(ManifestError::Empty { .. })));
        std::fs::write(&m, b"0123456789abcdef  a\nnot a line\n").unwrap();
        let err = read(&m, None).unwrap_err().to_string();
        assert!(err.ends_with(":2: not a hash of any known length"), "{err}");
        // A 64-digit hash is sha256 or blake3: sha256 first, blake3 for a check to try; --hash
        // says which.
        std::fs::write(&m, sum_line(&hex(Algo::Blake3, b""), b"a")).unwrap();
        let listing = read(&m, None).unwrap();
        assert_eq!(
            (listing.algo, listing.alternative),
            (Algo::Sha256, Some(Algo::Blake3))
        );
        assert_eq!(read(&m, Some(Algo::Blake3)).unwrap().algo, Algo::Blake3);
        std::fs::write(&m, sum_line(&"0".repeat(24), b"a")).unwrap();
        let err = read(&m, None).unwrap_err().to_string();
        assert!(err.contains("not a hash of any known length"), "{err}");
        // One length throughout.
        let mut two = sum_line(&hex(Algo::Sha1, b""), b"a");
        two.extend(sum_line(&hex(Algo::Md5, b""), b"b"));
        std::fs::write(&m, two).unwrap();
        let err = read(&m, None).unwrap_err().to_string();
        assert!(err.contains(":2: a 32-digit hash"), "{err}");
    }

    #[test]
    fn json_manifests_are_read_and_their_faults_named() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("m.json");
        let h = hex(Algo::Xxh128, b"x");
        let text = format!(
            "[{{\"path\":\"a\",\"size\":1,\"algorithm\":\"xxh128\",\"hash\":\"{h}\"}},\n\
             {{\"path\":\"?\",\"path_bytes\":[114,255],\"algorithm\":\"xxh128\",\"hash\":\"{h}\"}}]"
        );
        std::fs::write(&m, text).unwrap();
        let listing = read(&m, None).unwrap();
        assert_eq!(listing.algo, Algo::Xxh128);
        assert_eq!(listing.entries[1].path, b"r\xff");
        // JSON Lines too.
        let line = format!("{{\"path\":\"a\",\"algorithm\":\"xxh128\",\"hash\":\"{h}\"}}\n");
        std::fs::write(&m, line).unwrap();
        assert_eq!(read(&m, None).unwrap().entries.len(), 1);
        for (bad, what) in [
            ("[{\"hash\":\"00\"}]", "entry 1: no path"),
            ("[{\"path\":\"a\"}]", "entry 1: no hash"),
            (
                "[{\"path\":\"a\",\"hash\":\"zz\",\"algorithm\":\"md5\"}]",
                "not a md5 hash",
            ),
            (
                "[{\"path\":\"a\",\"hash\":\"00\",\"algorithm\":\"crc\"}]",
                "unknown algorithm",
            ),
            ("[]", "lists no file"),
            ("{\"path\": ", "m.json:1:"),
        ] {
            std::fs::write(&m, bad).unwrap();
            let err = read(&m, None).unwrap_err().to_string();
            assert!(err.contains(what), "{bad}: {err}");
        }
    }
}
