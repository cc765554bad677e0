//! File hashes by the algorithms of the common checksum tools (`xxhsum`, `b3sum`,
//! `sha256sum`, `sha1sum`, `md5sum`), each computed by its well-kept crate, and the lines those
//! tools write and read: `HEX  NAME` (GNU's, with a leading `\` when the name had to be
//! escaped) and the tagged `ALGO (NAME) = HEX` (BSD's, `--tag`, and xxhsum's for XXH3).

/// A hash algorithm.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[strum(serialize_all = "lowercase")]
pub enum Algo {
    /// XXH3, 64 bits (`xxhsum -H3`).
    Xxh3,
    /// XXH64 (`xxhsum`'s default).
    Xxh64,
    /// XXH3, 128 bits (`xxhsum -H2`).
    Xxh128,
    /// BLAKE3 (`b3sum`).
    Blake3,
    /// SHA-256 (`sha256sum`).
    Sha256,
    /// SHA-1 (`sha1sum`).
    Sha1,
    /// MD5 (`md5sum`).
    Md5,
}

impl Algo {
    /// Every algorithm, for help texts and errors.
    pub const ALL: &'static [Algo] = <Algo as strum::VariantArray>::VARIANTS;

    /// Hex digits of its digest.
    pub fn hex_len(self) -> usize {
        match self {
            Algo::Xxh3 | Algo::Xxh64 => 16,
            Algo::Xxh128 | Algo::Md5 => 32,
            Algo::Sha1 => 40,
            Algo::Blake3 | Algo::Sha256 => 64,
        }
    }

    /// The tag of its BSD-style lines (`SHA256 (f) = ...`).
    pub fn tag(self) -> &'static str {
        match self {
            Algo::Xxh3 => "XXH3",
            Algo::Xxh64 => "XXH64",
            Algo::Xxh128 => "XXH128",
            Algo::Blake3 => "BLAKE3",
            Algo::Sha256 => "SHA256",
            Algo::Sha1 => "SHA1",
            Algo::Md5 => "MD5",
        }
    }

    /// The algorithm of a BSD-style tag.
    pub fn from_tag(tag: &str) -> Option<Algo> {
        Algo::ALL.iter().copied().find(|a| a.tag() == tag)
    }

    /// The hex digest of `bytes`, all at once: the one-shot functions, with no streaming state
    /// to set up (most files of a tree are read in one buffer).
    pub fn hex_of(self, bytes: &[u8]) -> String {
        use sha2::Digest as _;
        let digest: Vec<u8> = match self {
            Algo::Xxh3 => xxhash_rust::xxh3::xxh3_64(bytes).to_be_bytes().to_vec(),
            Algo::Xxh64 => xxhash_rust::xxh64::xxh64(bytes, 0).to_be_bytes().to_vec(),
            Algo::Xxh128 => xxhash_rust::xxh3::xxh3_128(bytes).to_be_bytes().to_vec(),
            Algo::Blake3 => blake3::hash(bytes).as_bytes().to_vec(),
            Algo::Sha256 => sha2::Sha256::digest(bytes).to_vec(),
            Algo::Sha1 => sha1::Sha1::digest(bytes).to_vec(),
            Algo::Md5 => md5::Md5::digest(bytes).to_vec(),
        };
        hex(&digest)
    }

    /// A hasher for it.
    pub fn hasher(self) -> Hasher {
        match self {
            Algo::Xxh3 => Hasher::Xxh3(Box::default()),
            Algo::Xxh64 => Hasher::Xxh64(xxhash_rust::xxh64::Xxh64::new(0)),
            Algo::Xxh128 => Hasher::Xxh128(Box::default()),
            Algo::Blake3 => Hasher::Blake3(Box::default()),
            Algo::Sha256 => Hasher::Sha256(Default::default()),
            Algo::Sha1 => Hasher::Sha1(Default::default()),
            Algo::Md5 => Hasher::Md5(Default::default()),
        }
    }
}

/// A hash being computed.
#[derive(Clone)]
pub enum Hasher {
    /// XXH3-64.
    Xxh3(Box<xxhash_rust::xxh3::Xxh3Default>),
    /// XXH64.
    Xxh64(xxhash_rust::xxh64::Xxh64),
    /// XXH3-128.
    Xxh128(Box<xxhash_rust::xxh3::Xxh3Default>),
    /// BLAKE3.
    Blake3(Box<blake3::Hasher>),
    /// SHA-256.
    Sha256(sha2::Sha256),
    /// SHA-1.
    Sha1(sha1::Sha1),
    /// MD5.
    Md5(md5::Md5),
}

impl std::fmt::Debug for Hasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hasher")
    }
}

impl Hasher {
    /// Hashes the next bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        use sha2::Digest as _;
        match self {
            Hasher::Xxh3(h) | Hasher::Xxh128(h) => h.update(bytes),
            Hasher::Xxh64(h) => h.update(bytes),
            Hasher::Blake3(h) => {
                h.update(bytes);
            }
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Sha1(h) => h.update(bytes),
            Hasher::Md5(h) => h.update(bytes),
        }
    }

    /// The digest in lowercase hex, as the checksum tools print it (xxhsum's big-endian
    /// canonical form for the XXH family).
    pub fn finish_hex(self) -> String {
        use sha2::Digest as _;
        let bytes: Vec<u8> = match self {
            Hasher::Xxh3(h) => h.digest().to_be_bytes().to_vec(),
            Hasher::Xxh64(h) => h.digest().to_be_bytes().to_vec(),
            Hasher::Xxh128(h) => h.digest128().to_be_bytes().to_vec(),
            Hasher::Blake3(h) => h.finalize().as_bytes().to_vec(),
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Sha1(h) => h.finalize().to_vec(),
            Hasher::Md5(h) => h.finalize().to_vec(),
        };
        hex(&bytes)
    }
}

/// `bytes` in lowercase hex.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// One line of a checksum file, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SumLine {
    /// The algorithm the line names (tagged lines), if any.
    pub algo: Option<Algo>,
    /// The digest, lowercase hex.
    pub hex: String,
    /// The file's name, unescaped (any bytes).
    pub name: Vec<u8>,
}

/// A name as GNU's sum tools write it: `\\` and `\n` (and `\r`) escaped, and whether it
/// needed escaping (the line then begins with `\`).
pub fn escape_name(name: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::with_capacity(name.len());
    let mut escaped = false;
    for &b in name {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => {
                out.push(b);
                continue;
            }
        }
        escaped = true;
    }
    (out, escaped)
}

/// `HEX  NAME\n`, escaped as `sha256sum` and `b3sum` escape it.
pub fn sum_line(hex: &str, name: &[u8]) -> Vec<u8> {
    let (name, escaped) = escape_name(name);
    let mut line = Vec::with_capacity(hex.len() + name.len() + 4);
    if escaped {
        line.push(b'\\');
    }
    line.extend_from_slice(hex.as_bytes());
    line.extend_from_slice(b"  ");
    line.extend_from_slice(&name);
    line.push(b'\n');
    line
}

fn unescape(name: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(name.len());
    let mut bytes = name.iter();
    while let Some(&b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match bytes.next() {
            Some(b'\\') => out.push(b'\\'),
            Some(b'n') => out.push(b'\n'),
            Some(b'r') => out.push(b'\r'),
            Some(_) => return Err("an unknown escape in the name".into()),
            None => return Err("a name ends in a lone backslash".into()),
        }
    }
    Ok(out)
}

fn is_hex(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(u8::is_ascii_hexdigit)
}

/// Reads one line (without its newline) of `sha256sum`'s, `b3sum`'s, `xxhsum`'s or `md5sum`'s
/// output, plain or tagged. The error says what is wrong with it.
pub fn parse_sum_line(line: &[u8]) -> Result<SumLine, String> {
    let (escaped, line) = match line.strip_prefix(b"\\") {
        Some(rest) => (true, rest),
        None => (false, line),
    };
    let name_of = |raw: &[u8]| {
        if escaped {
            unescape(raw)
        } else {
            Ok(raw.to_vec())
        }
    };
    // Tagged: ALGO (NAME) = HEX
    if let Some(open) = line.windows(2).position(|w| w == b" (") {
        let tag = std::str::from_utf8(&line[..open]).unwrap_or("");
        if let Some(algo) = Algo::from_tag(tag) {
            let rest = &line[open + 2..];
            let Some(close) = rest.windows(4).rposition(|w| w == b") = ") else {
                return Err(format!("a {tag} line without \") = HASH\""));
            };
            let hex = &rest[close + 4..];
            if !is_hex(hex) || hex.len() != algo.hex_len() {
                return Err(format!("not a {tag} hash"));
            }
            return Ok(SumLine {
                algo: Some(algo),
                hex: String::from_utf8_lossy(hex).to_ascii_lowercase(),
                name: name_of(&rest[..close])?,
            });
        }
    }
    // Plain: HEX, two spaces (or a space and '*', binary mode), NAME.
    let Some(space) = line.iter().position(|&b| b == b' ') else {
        return Err("no \"HASH  NAME\" and no \"ALGO (NAME) = HASH\"".into());
    };
    let hex = &line[..space];
    if !is_hex(hex) || !Algo::ALL.iter().any(|a| a.hex_len() == hex.len()) {
        return Err("not a hash of any known length".into());
    }
    let name = match line.get(space + 1) {
        Some(b' ' | b'*') => &line[space + 2..],
        _ => return Err("the hash is not followed by two spaces (or \" *\")".into()),
    };
    if name.is_empty() {
        return Err("no file name".into());
    }
    Ok(SumLine {
        algo: None,
        hex: String::from_utf8_lossy(hex).to_ascii_lowercase(),
        name: name_of(name)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known answers, as the tools print them for "hello\n".
    #[test]
    fn digests_match_the_tools() {
        let data = b"hello\n";
        for (algo, want) in [
            (Algo::Xxh64, "e4c191d091bd8853"),
            (Algo::Xxh3, "99fc819aaba2462a"),
            (Algo::Xxh128, "6bba86c7e069f56d5a10b435f1c8e49c"),
            (
                Algo::Sha256,
                "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
            ),
            (Algo::Md5, "b1946ac92492d2347c6235b4d2611184"),
            (Algo::Sha1, "f572d396fae9206628714fb2ce00f72e94f2258f"),
            (
                Algo::Blake3,
                "8e4c7c1b99dbfd50e7a95185fead5ee1448fa904a2fdd778eaf5f2dbfd629a99",
            ),
        ] {
            assert_eq!(algo.hex_of(data), want, "{algo}");
            assert_eq!(want.len(), algo.hex_len());
        }
    }

    #[test]
    fn lines_round_trip_with_escapes() {
        for name in [
            &b"plain"[..],
            b"new\nline",
            b"back\\slash",
            b"cr\r",
            b"\xff\xfe raw",
        ] {
            let line = sum_line("0123456789abcdef", name);
            let read = parse_sum_line(line.strip_suffix(b"\n").unwrap()).unwrap();
            assert_eq!(read.name, name);
            assert_eq!(read.hex, "0123456789abcdef");
        }
        assert_eq!(sum_line("ab", b"a\nb"), b"\\ab  a\\nb\n");
    }

    #[test]
    fn tagged_and_binary_lines_are_read() {
        let l = parse_sum_line(b"XXH3 (h1) = 99FC819AABA2462A").unwrap();
        assert_eq!(
            (l.algo, l.hex.as_str(), &l.name[..]),
            (Some(Algo::Xxh3), "99fc819aaba2462a", &b"h1"[..])
        );
        let l =
            parse_sum_line(b"\\SHA1 (a\\nb) = f572d396fae9206628714fb2ce00f72e94f2258f").unwrap();
        assert_eq!(l.name, b"a\nb");
        let l = parse_sum_line(b"b1946ac92492d2347c6235b4d2611184 *bin").unwrap();
        assert_eq!(l.name, b"bin");
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        for (line, says) in [
            (&b"hello world"[..], "not a hash"),
            (b"0123456789abcdef", "no \"HASH"),
            (b"0123456789abcdef x", "two spaces"),
            (b"0123456789abcdef  ", "no file name"),
            (b"SHA256 (x) = 12", "not a SHA256 hash"),
            (b"\\0123456789abcdef  a\\qb", "unknown escape"),
        ] {
            let err = parse_sum_line(line).unwrap_err();
            assert!(
                err.contains(says),
                "{}: {err}",
                String::from_utf8_lossy(line)
            );
        }
    }
}
