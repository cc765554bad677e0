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
    let text = std::fs::read(manifest).map_err(|source| ManifestError::Read {
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
            (None, None, None) => by_length(hex.len()).map_err(|why| at(&why))?,
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
        Some(algo) => Ok(Listing { algo, entries }),
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
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
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
            (None, None, None) => named_by(manifest)
                .filter(|a| a.hex_len() == sum.hex.len())
                .map_or_else(|| by_length(sum.hex.len()), Ok)
                .map_err(at)?,
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
fn by_length(len: usize) -> Result<Algo, String> {
    let fits: Vec<Algo> = Algo::ALL
        .iter()
        .copied()
        .filter(|a| a.hex_len() == len)
        .collect();
    match fits[..] {
        [one] => Ok(one),
        // xxhsum writes XXH64 plain and XXH3 tagged: a plain 16-digit hash is XXH64.
        [Algo::Xxh3, Algo::Xxh64] => Ok(Algo::Xxh64),
        _ => Err(format!(
            "a {len}-digit hash is {}: say which with --hash",
            fits.iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(" or ")
        )),
    }
}
