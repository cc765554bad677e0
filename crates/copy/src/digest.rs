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
            Algo::Xxh3 => twox_hash::XxHash3_64::oneshot(bytes).to_be_bytes().to_vec(),
            Algo::Xxh64 => twox_hash::XxHash64::oneshot(0, bytes)
                .to_be_bytes()
                .to_vec(),
            Algo::Xxh128 => twox_hash::XxHash3_128::oneshot(bytes)
                .to_be_bytes()
                .to_vec(),
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
            Algo::Xxh3 => Hasher::Xxh3(Box::new(twox_hash::XxHash3_64::new())),
            Algo::Xxh64 => Hasher::Xxh64(twox_hash::XxHash64::with_seed(0)),
            Algo::Xxh128 => Hasher::Xxh128(Box::new(twox_hash::XxHash3_128::new())),
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
    Xxh3(Box<twox_hash::XxHash3_64>),
    /// XXH64.
    Xxh64(twox_hash::XxHash64),
    /// XXH3-128.
    Xxh128(Box<twox_hash::XxHash3_128>),
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
            Hasher::Xxh3(h) => std::hash::Hasher::write(&mut **h, bytes),
            Hasher::Xxh128(h) => h.write(bytes),
            Hasher::Xxh64(h) => std::hash::Hasher::write(h, bytes),
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
            Hasher::Xxh3(h) => std::hash::Hasher::finish(&*h).to_be_bytes().to_vec(),
            Hasher::Xxh64(h) => std::hash::Hasher::finish(&h).to_be_bytes().to_vec(),
            Hasher::Xxh128(h) => h.finish_128().to_be_bytes().to_vec(),
            Hasher::Blake3(h) => h.finalize().as_bytes().to_vec(),
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Sha1(h) => h.finalize().to_vec(),
            Hasher::Md5(h) => h.finalize().to_vec(),
        };
        hex(&bytes)
    }
}

/// BLAKE3 over a file cut into leaves of one power-of-two length (a multiple of BLAKE3's 1 KiB
/// chunk), each leaf hashed on its own as a subtree of BLAKE3's tree, in any order, by whichever
/// worker has its bytes; [`Blake3Tree::root_hex`] joins the leaves' chaining values as BLAKE3's
/// tree joins them. Leaves of one power-of-two length from offset 0 are subtrees of that tree
/// (a leaf at `i * len` may hold up to the largest power of two dividing `i` chunks, and `len`
/// divides it); only the last may be short, and only with two leaves or more (one leaf is the
/// whole input, and its hash is the root's: [`blake3::Hasher::finalize`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blake3Tree {
    leaf_len: u64,
    size: u64,
}

/// A leaf's (or a subtree's) BLAKE3 chaining value.
pub type ChainingValue = blake3::hazmat::ChainingValue;

impl Blake3Tree {
    /// The leaf length for leaves of about `len` bytes: `len` rounded up to a power of two, and to
    /// at least BLAKE3's chunk.
    pub fn leaf_len_for(len: u64) -> u64 {
        len.max(blake3::CHUNK_LEN as u64).next_power_of_two()
    }

    /// `size` bytes cut into leaves of `leaf_len` bytes ([`Blake3Tree::leaf_len_for`]).
    pub fn new(size: u64, leaf_len: u64) -> Self {
        assert_eq!(
            leaf_len,
            Self::leaf_len_for(leaf_len),
            "a BLAKE3 leaf is a power of two, at least one chunk long"
        );
        Blake3Tree { leaf_len, size }
    }

    /// The input's length.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// How many leaves: none for an empty input.
    pub fn leaves(&self) -> u64 {
        self.size.div_ceil(self.leaf_len)
    }

    /// The leaf that byte `at` is in.
    pub fn leaf_of(&self, at: u64) -> u64 {
        at / self.leaf_len
    }

    /// `[start, end)` of leaf `i`.
    pub fn leaf(&self, i: u64) -> (u64, u64) {
        let start = i * self.leaf_len;
        (start, (start + self.leaf_len).min(self.size))
    }

    /// A hasher for leaf `i`, placed where the leaf starts in the tree.
    pub fn leaf_hasher(&self, i: u64) -> blake3::Hasher {
        use blake3::hazmat::HasherExt as _;
        let mut hasher = blake3::Hasher::new();
        hasher.set_input_offset(self.leaf(i).0);
        hasher
    }

    /// The chaining value of a leaf fed all its bytes (with two leaves or more).
    pub fn leaf_cv(hasher: &blake3::Hasher) -> ChainingValue {
        use blake3::hazmat::HasherExt as _;
        hasher.finalize_non_root()
    }

    /// The hex digest of the whole input from its leaves' chaining values, in order: the leaves
    /// are joined left to right as BLAKE3's tree joins them (a node's left subtree holds the
    /// largest power of two of leaves fewer than the node's, and only the top node is the root).
    /// Needs two leaves or more.
    pub fn root_hex(&self, cvs: &[ChainingValue]) -> String {
        use blake3::hazmat::{merge_subtrees_root, Mode};
        assert!(
            cvs.len() >= 2 && cvs.len() as u64 == self.leaves(),
            "a BLAKE3 tree of {} leaves given {}",
            self.leaves(),
            cvs.len()
        );
        let left = left_leaves(cvs.len());
        let root = merge_subtrees_root(
            &merge_non_root(&cvs[..left]),
            &merge_non_root(&cvs[left..]),
            Mode::Hash,
        );
        hex(root.as_bytes())
    }
}

/// The chaining value of the subtree over `cvs`, which is not the root.
fn merge_non_root(cvs: &[ChainingValue]) -> ChainingValue {
    use blake3::hazmat::{merge_subtrees_non_root, Mode};
    if let [one] = cvs {
        return *one;
    }
    let left = left_leaves(cvs.len());
    merge_subtrees_non_root(
        &merge_non_root(&cvs[..left]),
        &merge_non_root(&cvs[left..]),
        Mode::Hash,
    )
}

/// How many of `n` (two or more) equal leaves, the last possibly short, a BLAKE3 node's left
/// subtree holds: the largest power of two below `n` (`blake3::hazmat::left_subtree_len` in
/// leaves).
fn left_leaves(n: usize) -> usize {
    debug_assert!(n >= 2);
    1 << (usize::BITS - 1 - (n - 1).leading_zeros())
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

    /// Bytes that differ from their neighbours.
    fn varied(n: usize) -> Vec<u8> {
        (0..n as u64)
            .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
            .collect()
    }

    /// The tree's digest of `data` in leaves of `leaf_len`, each leaf hashed on its own (in
    /// reverse order, and in uneven pieces, as workers would feed it); one leaf or none is the
    /// whole input's hasher.
    fn tree_hex(data: &[u8], leaf_len: u64) -> String {
        let tree = Blake3Tree::new(data.len() as u64, leaf_len);
        if tree.leaves() <= 1 {
            return hex(blake3::Hasher::new().update(data).finalize().as_bytes());
        }
        let mut cvs = vec![[0u8; 32]; tree.leaves() as usize];
        for i in (0..tree.leaves()).rev() {
            let (start, end) = tree.leaf(i);
            let mut hasher = tree.leaf_hasher(i);
            for piece in data[start as usize..end as usize].chunks(3000) {
                hasher.update(piece);
            }
            cvs[i as usize] = Blake3Tree::leaf_cv(&hasher);
        }
        tree.root_hex(&cvs)
    }

    #[test]
    fn blake3_leaves_join_into_the_hash_of_the_whole() {
        let data = varied(300 << 10);
        for leaf_len in [1024u64, 2048, 4096, 64 << 10] {
            let l = leaf_len as usize;
            let mut sizes = vec![0, 1, 1023, 1024, 1025, l - 1, l, l + 1, 2 * l - 1, 2 * l];
            // Leaf counts that are not powers of two, with even and uneven last leaves.
            for leaves in [3usize, 5, 6, 7, 9, 13, 17] {
                sizes.extend([
                    leaves * l,
                    leaves * l - 1,
                    (leaves - 1) * l + 1,
                    leaves * l - 512,
                ]);
            }
            for size in sizes.into_iter().filter(|&s| s <= data.len()) {
                assert_eq!(
                    tree_hex(&data[..size], leaf_len),
                    hex(blake3::hash(&data[..size]).as_bytes()),
                    "{size} bytes in leaves of {leaf_len}"
                );
            }
        }
    }

    #[test]
    fn blake3_leaves_with_zeros_for_holes() {
        // Zero runs across leaf boundaries, a leaf of zeros only, and zeros at the end.
        let mut data = varied(45 << 10);
        data[3000..9000].fill(0);
        data[16 << 10..20 << 10].fill(0);
        data[40 << 10..].fill(0);
        for leaf_len in [1024u64, 4096, 8192] {
            assert_eq!(
                tree_hex(&data, leaf_len),
                hex(blake3::hash(&data).as_bytes())
            );
        }
    }

    #[test]
    fn blake3_leaf_lengths_are_powers_of_two_of_whole_chunks() {
        for (asked, got) in [
            (0, 1024),
            (1, 1024),
            (1024, 1024),
            (1025, 2048),
            (3 << 20, 4 << 20),
            (16 << 20, 16 << 20),
        ] {
            assert_eq!(Blake3Tree::leaf_len_for(asked), got, "{asked}");
        }
        assert_eq!(left_leaves(2), 1);
        assert_eq!(left_leaves(3), 2);
        assert_eq!(left_leaves(4), 2);
        assert_eq!(left_leaves(5), 4);
        assert_eq!(left_leaves(1024), 512);
        assert_eq!(left_leaves(1025), 1024);
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
