//! Manifests: the hash of every file a copy wrote, recorded while it copies
//! ([`Recorder`]), written at the end as one of three formats ([`Format`]), and read back by
//! `ringio verify --manifest` ([`read`]).
//!
//! * `sum`: the lines of `sha256sum`, `b3sum`, `xxhsum` (their escaping of names holding a
//!   newline or a backslash); their `-c` reads the file.
//! * `mhl`: ASC MHL v2.0, the `ascmhl` directory at the destination root with its chain file
//!   ([`mhl`]).
//! * `json`: one object per file (path, size, mtime, algorithm, hash), for scripts.
//!
//! Paths are relative to the destination root, '/'-separated bytes: names that are not UTF-8
//! round-trip in every format.

pub(crate) mod hashing;
pub mod mhl;
mod read;
mod record;
pub(crate) mod tree;
mod write;

pub use read::{read, ManifestError};
pub use record::Recorder;
pub use tree::{listed_bytes, not_copied};
pub use write::{replaceable, write};

use crate::digest::Algo;

/// A value of `option` among `all` (`--hash`'s algorithms, `--manifest-format`'s formats);
/// a wrong one is one line naming the choices.
pub fn choice<T>(option: &str, value: &str, all: &[T]) -> Result<T, String>
where
    T: Copy + std::str::FromStr + Into<&'static str>,
{
    value.parse().map_err(|_| {
        let names: Vec<&'static str> = all.iter().map(|&t| t.into()).collect();
        format!(
            "{option}: unknown value {}; the choices are {}",
            crate::quote::quote(value),
            names.join(", ")
        )
    })
}

/// A manifest format.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[strum(serialize_all = "lowercase")]
pub enum Format {
    /// `HEX  NAME` lines, as the checksum tools write and check them.
    #[default]
    Sum,
    /// ASC MHL v2.0 (an `ascmhl` directory at the destination root).
    Mhl,
    /// One JSON object per file, in a JSON array.
    Json,
}

impl Format {
    /// Every format, for help texts and errors.
    pub const ALL: &'static [Format] = <Format as strum::VariantArray>::VARIANTS;
}

/// One file of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative to the destination root, '/'-separated, any bytes but NUL.
    pub path: Vec<u8>,
    /// Its length in bytes (0 where the format does not say).
    pub size: u64,
    /// Its modification time as (seconds, nanoseconds) since the epoch, where known.
    pub mtime: Option<(i64, u32)>,
    /// The digest in lowercase hex, as [`crate::digest::Hasher::finish_hex`] gives it.
    pub hex: String,
}

/// Every entry of one manifest, and the algorithm of their hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// The algorithm.
    pub algo: Algo,
    /// The files, in the manifest's order.
    pub entries: Vec<Entry>,
    /// The other algorithm whose hashes have this length, when the manifest does not say
    /// which (plain 32 digits: xxh128 or md5; 64: sha256 or blake3): a check tries it on the
    /// first file if `algo` does not match.
    pub alternative: Option<Algo>,
}

/// `secs.nanos` since the epoch as UTC ISO 8601 with a `Z` (`2026-11-25T19:03:58.5Z`), the
/// nanoseconds given only when there are some.
pub fn utc_iso8601(secs: i64, nanos: u32) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let frac = if nanos == 0 {
        String::new()
    } else {
        format!(".{nanos:09}").trim_end_matches('0').to_string()
    };
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}{frac}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_iso8601() {
        assert_eq!(utc_iso8601(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_iso8601(951_782_400, 0), "2000-02-29T00:00:00Z");
        assert_eq!(
            utc_iso8601(1_795_633_438, 500_000_000),
            "2026-11-25T19:03:58.5Z"
        );
        assert_eq!(utc_iso8601(-1, 1), "1969-12-31T23:59:59.000000001Z");
    }
}
