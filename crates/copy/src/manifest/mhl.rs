//! ASC MHL v2.0, the media hash list of cameras and post-production tools: an `ascmhl` folder
//! at the root of a tree, holding one XML file per generation (each run that hashed files) and
//! the chain file that lists them with a hash of each.
//!
//! What this writes, as the specification (the XSD `ASCMHL.xsd` and `ASCMHLDirectory.xsd` of the
//! reference implementation, `ascmhl`) and that implementation lay it out:
//!
//! * `ascmhl/NNNN_<root folder name>_<YYYY-MM-DD>_<HHMMSS>Z.mhl`: generation NNNN (from 0001), a
//!   `<hashlist version="2.0" xmlns="urn:ASC:MHL:v2.0">` with `<creatorinfo>` (creation date,
//!   host name, tool), `<processinfo>` (`<process>transfer</process>` and the reference
//!   implementation's default ignore patterns) and `<hashes>`: one `<hash>` per file, its `<path>`
//!   (relative to the root, '/'-separated, with `size` and `lastmodificationdate`) and its hash
//!   (`<xxh128 action="original" hashdate="...">hex</xxh128>`).
//! * `ascmhl/ascmhl_chain.xml`: `<ascmhldirectory xmlns="urn:ASC:MHL:DIRECTORY:v2.0">`, one
//!   `<hashlist sequencenr="N">` per generation with the generation file's name (`<path>`) and
//!   its C4 ID (`<c4>`: "c4" and the base-58 digits of its SHA-512, 90 characters).
//!
//! Names that XML cannot carry as they are (not UTF-8, or holding a character XML 1.0 forbids,
//! such as U+0001 or U+FFFE) are written percent-encoded, and their `<hash>` says so with
//! `<metadata><ringio:pathencoding xmlns:ringio="urn:ringio:mhl">percent</ringio:pathencoding>
//! </metadata>` (`<metadata>` holds any content, so the file stays valid): every byte of such a
//! name that is '%', not UTF-8, or part of a forbidden character is written `%XX`, and everything
//! else as it is. Every other name is written exactly as it is (XML-escaped), as every MHL tool
//! writes it, so names holding '%' mean what they say and only the marker says to decode. Tab,
//! newline and carriage return are written as character references (`&#10;`), which XML keeps.

use std::ffi::{CStr, CString};
use std::fs::{self, File};
use std::io::{self, Write as _};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::{utc_iso8601, Entry, Listing};
use crate::digest::Algo;
use crate::sys;

/// The namespace of generation files.
const NS: &str = "urn:ASC:MHL:v2.0";
/// The namespace of the chain file.
const DIRECTORY_NS: &str = "urn:ASC:MHL:DIRECTORY:v2.0";
/// The namespace of ringio's marker for percent-encoded names, in a `<hash>`'s `<metadata>`.
const RINGIO_NS: &str = "urn:ringio:mhl";
/// The folder at the root of the tree.
const FOLDER: &str = "ascmhl";
/// The chain file in it.
const CHAIN: &str = "ascmhl_chain.xml";
/// [`FOLDER`] and [`CHAIN`] for the *at() calls.
const FOLDER_C: &CStr = c"ascmhl";
const CHAIN_C: &CStr = c"ascmhl_chain.xml";
/// The ignore patterns the reference implementation writes by default: the history folder
/// itself, and macOS's folder view files (so `ascmhl verify` does not count a `.DS_Store` that
/// Finder left after the copy as a new file).
const IGNORE: [&str; 3] = [".DS_Store", "ascmhl", "ascmhl/"];
/// The tool named in `<creatorinfo>`.
const TOOL: &str = "ringio";
/// The algorithm read where a reader may choose among several a file lists for every file.
const PREFERENCE: [Algo; 5] = [Algo::Xxh128, Algo::Xxh3, Algo::Xxh64, Algo::Sha1, Algo::Md5];
/// The base-58 digits of a C4 ID.
const C4_DIGITS: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// The hash formats ASC MHL v2.0 names, and the element name of each (e.g. Algo::Xxh128 ->
/// "xxh128"). None for an algorithm MHL cannot hold.
pub fn element_of(algo: Algo) -> Option<&'static str> {
    match algo {
        Algo::Xxh3 => Some("xxh3"),
        Algo::Xxh64 => Some("xxh64"),
        Algo::Xxh128 => Some("xxh128"),
        Algo::Sha1 => Some("sha1"),
        Algo::Md5 => Some("md5"),
        Algo::Blake3 | Algo::Sha256 => None,
    }
}

/// The algorithm of a hash element's name.
fn algo_of_element(name: &str) -> Option<Algo> {
    Algo::ALL
        .iter()
        .copied()
        .find(|&a| element_of(a) == Some(name))
}

/// "md5, sha1, ...": the algorithms MHL holds, for errors.
fn supported() -> String {
    Algo::ALL
        .iter()
        .filter(|&&a| element_of(a).is_some())
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Writes a new generation into `root/ascmhl/` (creating the folder and chain file on the first
/// generation; appending generation N+1 and its chain entry when it exists), listing `entries`
/// (paths relative to `root`) with `algo`, each with action "original", plus the creator info
/// (tool name "ringio", its version, hostname, creation date in UTC ISO 8601) and process info
/// (type "transfer"). Every file is written to a temporary name in the ascmhl folder and renamed
/// into place (the chain file last), so an interrupted run never leaves a generation claiming
/// files. Returns the path of the generation file written.
///
/// Entries inside `root/ascmhl/` itself are left out (this call rewrites the chain file there),
/// as the reference implementation leaves them out. A generation is numbered one past the
/// highest number of the chain and of the `.mhl` files in the folder, so a file left by an
/// interrupted run (not in the chain) is never taken over.
///
/// Errors: [`io::ErrorKind::InvalidInput`] for an algorithm MHL cannot hold or an entry that is
/// not a relative path with a hash of `algo`; [`io::ErrorKind::InvalidData`] for a chain file
/// that cannot be read; any error of the file system, naming the file.
pub fn write_generation(root: &Path, algo: Algo, entries: &[Entry]) -> io::Result<PathBuf> {
    let Some(element) = element_of(algo) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "ASC MHL cannot hold {algo} hashes; it holds {}",
                supported()
            ),
        ));
    };
    for entry in entries {
        check_entry(entry, algo)?;
    }
    let folder = root.join(FOLDER);
    let dir = open_folder(root, true)?;
    let chain_path = folder.join(CHAIN);
    let mut links = match sys::read_regular(dir.as_fd(), CHAIN_C, false) {
        Ok(bytes) => parse_chain(&bytes).map_err(|(line, what)| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}:{line}: {what}", chain_path.display()),
            )
        })?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(with_path(e, &chain_path)),
    };
    let number = links
        .iter()
        .map(|l| l.number)
        .chain(generation_numbers(dir.as_fd()).map_err(|e| with_path(e, &folder))?)
        .max()
        .unwrap_or(0)
        + 1;

    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|_| io::Error::other("the clock is before 1970"))?;
    let (secs, nanos) = (now.as_secs() as i64, now.subsec_nanos());
    // "2026-11-25T19:03:58Z" -> "2026-11-25" and "190358".
    let stamp = utc_iso8601(secs, 0);
    let name = format!(
        "{number:04}_{}_{}_{}Z.mhl",
        root_name(root),
        &stamp[..10],
        stamp[11..19].replace(':', "")
    );
    let generation = generation_xml(
        element,
        entries,
        &utc_iso8601(secs, nanos - nanos % 1000),
        &hostname(),
    );
    links.push(Link {
        number,
        path: name.clone(),
        format: "c4".into(),
        hash: c4(generation.as_bytes()),
        line: 0,
    });
    let chain = chain_xml(&links);

    // Both files are complete on disk before either is renamed into place, the chain last.
    let dir = dir.as_fd();
    let generation_tmp = write_temporary(dir, &folder, generation.as_bytes())?;
    let chain_tmp = match write_temporary(dir, &folder, chain.as_bytes()) {
        Ok(tmp) => tmp,
        Err(e) => {
            let _ = sys::unlinkat(dir, &generation_tmp);
            return Err(e);
        }
    };
    let generation_path = folder.join(&name);
    let generation_c =
        CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    if let Err(e) = rustix::fs::renameat(dir, &generation_tmp, dir, &generation_c) {
        let _ = sys::unlinkat(dir, &generation_tmp);
        let _ = sys::unlinkat(dir, &chain_tmp);
        return Err(with_path(e.into(), &generation_path));
    }
    if let Err(e) = rustix::fs::renameat(dir, &chain_tmp, dir, CHAIN_C) {
        let _ = sys::unlinkat(dir, &chain_tmp);
        return Err(with_path(e.into(), &chain_path));
    }
    // The renames themselves are durable once the folder is synced (best effort: some file
    // systems refuse fsync on a directory).
    let _ = rustix::fs::fsync(dir);
    Ok(generation_path)
}

/// Refuses an entry this module could not write, or not read back as it is.
fn check_entry(entry: &Entry, algo: Algo) -> io::Result<()> {
    let bad = |what: String| {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: {what}", String::from_utf8_lossy(&entry.path)),
        ))
    };
    if let Err(what) = check_path(&entry.path) {
        return bad(what);
    }
    if entry.hex.len() != algo.hex_len() || !entry.hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return bad(format!("not a {algo} hash: {}", entry.hex));
    }
    Ok(())
}

/// A path the manifest may hold: relative, not empty, no NUL, not leaving the root.
fn check_path(path: &[u8]) -> Result<(), String> {
    if path.is_empty() {
        Err("an empty path".into())
    } else if path.starts_with(b"/") {
        Err("not a relative path".into())
    } else if path.contains(&0) {
        Err("a path holding NUL".into())
    } else if path.split(|&b| b == b'/').any(|c| c == b"..") {
        Err("a path leaving the root (\"..\")".into())
    } else {
        Ok(())
    }
}

/// Whether `path` is in the history folder this module writes.
fn in_history_folder(path: &[u8]) -> bool {
    path == FOLDER.as_bytes()
        || path
            .strip_prefix(FOLDER.as_bytes())
            .is_some_and(|rest| rest.starts_with(b"/"))
}

/// The error, naming the file.
fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// The `ascmhl` folder of the tree at `root` (the one path resolved as given), opened with
/// O_NOFOLLOW from the root's descriptor; with `make`, made first where it is missing. A symlink
/// in its place is refused, never followed: the history is written inside the tree only.
fn open_folder(root: &Path, make: bool) -> io::Result<OwnedFd> {
    let folder = root.join(FOLDER);
    let root_c = CString::new(root.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let root_fd = sys::open_dir(rustix::fs::CWD, &root_c, true).map_err(|e| with_path(e, root))?;
    if make {
        match sys::mkdirat(root_fd.as_fd(), FOLDER_C, 0o777) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                return Err(with_path(e, &folder))
            }
            _ => {}
        }
    }
    sys::open_dir(root_fd.as_fd(), FOLDER_C, false).map_err(|e| {
        let symlink = matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR))
            && sys::statx_at(root_fd.as_fd(), FOLDER_C, false)
                .is_ok_and(|s| s.kind() == sys::Kind::Symlink);
        if symlink {
            let why = "a symbolic link, not followed: the history stays in the tree";
            with_path(io::Error::other(why), &folder)
        } else {
            with_path(e, &folder)
        }
    })
}

/// The numbers of the generation files in the folder `dir` (`NNNN_*.mhl`), whether the chain
/// lists them or not.
fn generation_numbers(dir: BorrowedFd<'_>) -> io::Result<Vec<u64>> {
    let mut numbers = Vec::new();
    let mut buf = vec![std::mem::MaybeUninit::uninit(); 16 * 1024];
    sys::read_dir_entries(dir, &mut buf, |name, _| {
        let Some(stem) = name.to_str().ok().and_then(|n| n.strip_suffix(".mhl")) else {
            return;
        };
        let digits = stem.split('_').next().unwrap_or("");
        if digits.len() >= 4 && digits.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(n) = digits.parse() {
                numbers.push(n);
            }
        }
    })?;
    Ok(numbers)
}

/// The root folder's name for generation file names, as the reference implementation takes it
/// (the last component of the absolute path), with what a file name in XML cannot hold
/// replaced by '_'.
fn root_name(root: &Path) -> String {
    let absolute = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let name = absolute
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into());
    xml_safe(&name)
}

/// `name` with every character XML cannot hold, or that would read as layout, made `_`.
fn xml_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_control() || !is_xml_char(c) {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// This machine's name, for `<hostname>`.
fn hostname() -> String {
    let name = fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|n| !n.is_empty()))
        .unwrap_or_else(|| "localhost".into());
    xml_safe(&name)
}

/// Writes `bytes` to a new file of a temporary name in the folder `dir` (`folder` names it in
/// errors; the name does not end in `.mhl`, so no MHL reader takes it for a generation),
/// synced, made with O_EXCL|O_NOFOLLOW. Returns its name.
fn write_temporary(dir: BorrowedFd<'_>, folder: &Path, bytes: &[u8]) -> io::Result<CString> {
    let pid = std::process::id();
    let mut n = 0u32;
    loop {
        let name = format!(".ringio-mhl-{pid}-{n}.tmp");
        let c = CString::new(name.as_str()).expect("no NUL");
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        let mut file = match sys::openat(dir, &c, flags, 0o666) {
            Ok(fd) => File::from(fd),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 10_000 => {
                n += 1;
                continue;
            }
            Err(e) => return Err(with_path(e, &folder.join(name))),
        };
        if let Err(e) = file.write_all(bytes).and_then(|()| file.sync_all()) {
            drop(file);
            let _ = sys::unlinkat(dir, &c);
            return Err(with_path(e, &folder.join(name)));
        }
        return Ok(c);
    }
}

/// The C4 ID of `bytes`: "c4" and the SHA-512 as a base-58 number, padded with the digit of
/// zero ('1') to 88 digits.
fn c4(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    let mut number: Vec<u8> = sha2::Sha512::digest(bytes).to_vec();
    let mut digits = Vec::with_capacity(90);
    while number.iter().any(|&b| b != 0) {
        let mut rest = 0u32;
        for byte in &mut number {
            let value = rest * 256 + u32::from(*byte);
            *byte = (value / 58) as u8;
            rest = value % 58;
        }
        digits.push(C4_DIGITS[rest as usize]);
    }
    digits.resize(88, b'1');
    digits.extend_from_slice(b"4c");
    digits.reverse();
    String::from_utf8(digits).expect("C4 digits are ASCII")
}

// ----- Writing XML -----

/// Whether XML 1.0 can hold `c` (as itself or as a character reference).
fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// `text` escaped for element content and attribute values alike.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML readers turn a literal CR into LF, and literal whitespace in attributes into
            // spaces: references keep them.
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c => out.push(c),
        }
    }
    out
}

/// The text of a name's `<path>`, and whether it is percent-encoded (see the module's
/// documentation).
fn path_text(name: &[u8]) -> (String, bool) {
    if let Ok(text) = std::str::from_utf8(name) {
        if text.chars().all(is_xml_char) {
            return (text.to_string(), false);
        }
    }
    let mut out = String::with_capacity(name.len() * 3);
    let percent = |bytes: &[u8], out: &mut String| {
        for b in bytes {
            out.push_str(&format!("%{b:02X}"));
        }
    };
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '%' || !is_xml_char(c) {
                percent(c.encode_utf8(&mut [0; 4]).as_bytes(), &mut out);
            } else {
                out.push(c);
            }
        }
        percent(chunk.invalid(), &mut out);
    }
    (out, true)
}

/// The bytes of a percent-encoded `<path>`.
fn percent_decode(text: &str) -> Result<Vec<u8>, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let byte = bytes
                .get(i + 1..i + 3)
                .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("a percent-encoded path with a bad escape: {text}"))?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// The XML of one generation.
fn generation_xml(element: &str, entries: &[Entry], now: &str, host: &str) -> String {
    let mut x = String::with_capacity(512 + entries.len() * 200);
    x.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!("<hashlist version=\"2.0\" xmlns=\"{NS}\">\n"));
    x.push_str("  <creatorinfo>\n");
    x.push_str(&format!("    <creationdate>{now}</creationdate>\n"));
    x.push_str(&format!("    <hostname>{}</hostname>\n", escape(host)));
    x.push_str(&format!(
        "    <tool version=\"{}\">{TOOL}</tool>\n",
        escape(env!("CARGO_PKG_VERSION"))
    ));
    x.push_str("  </creatorinfo>\n");
    x.push_str("  <processinfo>\n");
    x.push_str("    <process>transfer</process>\n");
    x.push_str("    <ignore>\n");
    for pattern in IGNORE {
        x.push_str(&format!("      <pattern>{}</pattern>\n", escape(pattern)));
    }
    x.push_str("    </ignore>\n");
    x.push_str("  </processinfo>\n");
    let listed: Vec<&Entry> = entries
        .iter()
        .filter(|e| !in_history_folder(&e.path))
        .collect();
    // The schema wants at least one hash in a <hashes>: an empty generation has none.
    if !listed.is_empty() {
        x.push_str("  <hashes>\n");
        for entry in listed {
            let (path, encoded) = path_text(&entry.path);
            x.push_str("    <hash>\n");
            x.push_str(&format!("      <path size=\"{}\"", entry.size));
            if let Some(date) = entry.mtime.and_then(|(s, n)| iso_date(s, n)) {
                x.push_str(&format!(" lastmodificationdate=\"{date}\""));
            }
            x.push_str(&format!(">{}</path>\n", escape(&path)));
            x.push_str(&format!(
                "      <{element} action=\"original\" hashdate=\"{now}\">{}</{element}>\n",
                entry.hex.to_ascii_lowercase()
            ));
            if encoded {
                x.push_str("      <metadata>\n");
                x.push_str(&format!(
                    "        <ringio:pathencoding xmlns:ringio=\"{RINGIO_NS}\">percent\
                     </ringio:pathencoding>\n"
                ));
                x.push_str("      </metadata>\n");
            }
            x.push_str("    </hash>\n");
        }
        x.push_str("  </hashes>\n");
    }
    x.push_str("</hashlist>\n");
    x
}

/// A time as xs:dateTime in UTC, for the years xs:dateTime writes with four digits.
fn iso_date(secs: i64, nanos: u32) -> Option<String> {
    // 0000-01-01T00:00:00Z ..= 9999-12-31T23:59:59Z
    (-62_167_219_200..=253_402_300_799)
        .contains(&secs)
        .then(|| utc_iso8601(secs, nanos.min(999_999_999)))
}

/// The XML of the chain file.
fn chain_xml(links: &[Link]) -> String {
    let mut x = String::with_capacity(128 + links.len() * 200);
    x.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!("<ascmhldirectory xmlns=\"{DIRECTORY_NS}\">\n"));
    for link in links {
        x.push_str(&format!("  <hashlist sequencenr=\"{}\">\n", link.number));
        x.push_str(&format!("    <path>{}</path>\n", escape(&link.path)));
        x.push_str(&format!(
            "    <{f}>{}</{f}>\n",
            escape(&link.hash),
            f = link.format
        ));
        x.push_str("  </hashlist>\n");
    }
    x.push_str("</ascmhldirectory>\n");
    x
}

// ----- Reading -----

/// True when `path` looks like an MHL (a .mhl file, an ascmhl folder, or a folder holding one),
/// so a caller can choose this reader.
pub fn looks_like(path: &Path) -> bool {
    if path.is_dir() {
        path.file_name().is_some_and(|n| n == FOLDER)
            || path.join(CHAIN).is_file()
            || path.join(FOLDER).is_dir()
    } else {
        path.extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("mhl"))
    }
}

/// Reads an MHL: `path` is either one .mhl file, or an `ascmhl` folder, or a directory holding an
/// `ascmhl` folder. For a folder, every generation listed in the chain file is read (in order; a
/// later generation's hash for a path overrides an earlier one), and the chain's reference hashes
/// of the generation files are checked (a mismatch is an error). Returns the listing (paths
/// relative to the MHL's root, i.e. the folder containing `ascmhl`); all entries must use one
/// algorithm (error otherwise). Directory hashes (`<directoryhash>`) are ignored. On malformed
/// input, returns Err((line_number_or_0, what_is_wrong)).
///
/// Where a file lists several hashes, the algorithm is one that every file has (the first of
/// xxh128, xxh3, xxh64, sha1, md5); hashes marked `action="failed"` (a failed verification's
/// hash) are not taken. A listing of no files says xxh128, the format's default. A
/// `lastmodificationdate` this cannot read leaves the entry without a time. `.mhl` files the
/// chain does not list (such as one left by an interrupted writer) are not read.
pub fn read(path: &Path) -> Result<Listing, (usize, String)> {
    let mut files = Files::default();
    if path.is_dir() {
        // The user's path is resolved as given; the `ascmhl` folder in it, the chain and the
        // generations are opened without following a symlink, and must be regular files.
        let inside = !path.join(CHAIN).is_file() && path.join(FOLDER).is_dir();
        let (folder, dir) = if inside {
            (path.join(FOLDER), open_folder(path, false))
        } else {
            let c = CString::new(path.as_os_str().as_bytes())
                .map_err(|_| (0, format!("{}: a name holding NUL", path.display())))?;
            (
                path.to_path_buf(),
                sys::open_dir(rustix::fs::CWD, &c, true).map_err(|e| with_path(e, path)),
            )
        };
        let dir = dir.map_err(|e| (0, e.to_string()))?;
        let chain_path = folder.join(CHAIN);
        let chain = match sys::read_regular(dir.as_fd(), CHAIN_C, false) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err((
                    0,
                    format!(
                        "{}: no {CHAIN}: not an ASC MHL history (or its first generation was \
                         never completed)",
                        folder.display()
                    ),
                ))
            }
            Err(e) => return Err((0, format!("{}: {e}", chain_path.display()))),
        };
        let mut links =
            parse_chain(&chain).map_err(|(line, what)| (line, format!("{CHAIN}: {what}")))?;
        if links.is_empty() {
            return Err((0, format!("{CHAIN}: lists no generation")));
        }
        links.sort_by_key(|l| l.number);
        for link in &links {
            let bytes = CString::new(link.path.as_str())
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
                .and_then(|name| sys::read_regular(dir.as_fd(), &name, false))
                .map_err(|e| {
                    (
                        link.line,
                        format!("{CHAIN}: generation {} ({}): {e}", link.number, link.path),
                    )
                })?;
            check_link(link, &bytes)?;
            let hashes = parse_generation(&bytes)
                .map_err(|(line, what)| (line, format!("{}: {what}", link.path)))?;
            files.add(hashes, &link.path);
        }
    } else {
        let bytes =
            sys::read_regular_path(path).map_err(|e| (0, format!("{}: {e}", path.display())))?;
        files.add(parse_generation(&bytes)?, "");
    }
    files.listing()
}

/// A generation as the chain file lists it.
#[derive(Debug)]
struct Link {
    /// Its `sequencenr`.
    number: u64,
    /// Its file's name in the `ascmhl` folder.
    path: String,
    /// The element of its reference hash (`c4`).
    format: String,
    /// The reference hash.
    hash: String,
    /// The line of its `<hashlist>` in the chain file (0 for one being written).
    line: usize,
}

/// The generations a chain file lists.
fn parse_chain(bytes: &[u8]) -> Result<Vec<Link>, (usize, String)> {
    let root = parse_xml(bytes, |_, element| Ok(Some(element)))?;
    if root.name != "ascmhldirectory" {
        return Err((
            root.line,
            format!(
                "the root element is {}, not <ascmhldirectory>",
                shown(&root.name)
            ),
        ));
    }
    let mut links = Vec::new();
    for hashlist in root.elements().filter(|e| e.name == "hashlist") {
        let line = hashlist.line;
        let number = hashlist
            .attr("sequencenr")
            .ok_or((line, "a <hashlist> without sequencenr".to_string()))?;
        let number = number
            .trim()
            .parse()
            .map_err(|_| (line, "sequencenr is not a number".to_string()))?;
        let path = hashlist
            .child("path")
            .ok_or((line, "a <hashlist> without <path>".to_string()))?
            .text();
        if path.is_empty() || path.contains(['/', '\\']) || path == "." || path == ".." {
            return Err((
                line,
                "its <path> is not a file name in the ascmhl folder".to_string(),
            ));
        }
        let hash = hashlist
            .elements()
            .find(|e| e.name != "path")
            .ok_or((line, "a <hashlist> without a reference hash".to_string()))?;
        links.push(Link {
            number,
            path,
            format: hash.name.clone(),
            hash: hash.text().trim().to_string(),
            line,
        });
    }
    Ok(links)
}

/// Checks a generation file's bytes against the chain's reference hash.
fn check_link(link: &Link, bytes: &[u8]) -> Result<(), (usize, String)> {
    let actual = match (link.format.as_str(), algo_of_element(&link.format)) {
        ("c4", _) => c4(bytes),
        (_, Some(algo)) => algo.hex_of(bytes),
        (other, None) => {
            return Err((
                link.line,
                format!(
                    "{CHAIN}: {}: a reference hash of an unknown format {}",
                    link.path,
                    shown(other)
                ),
            ))
        }
    };
    if !actual.eq_ignore_ascii_case(&link.hash) {
        return Err((
            link.line,
            format!(
                "{CHAIN}: {} was modified: the chain records {} {}, the file has {}",
                link.path, link.format, link.hash, actual
            ),
        ));
    }
    Ok(())
}

/// One `<hash>` of a generation.
#[derive(Debug)]
struct Hashed {
    path: Vec<u8>,
    size: u64,
    mtime: Option<(i64, u32)>,
    /// The hashes of the formats this reads, lowercase.
    hashes: Vec<(Algo, String)>,
    /// The hash formats it lists that this does not read (c4, ...), for errors.
    others: Vec<String>,
    line: usize,
}

/// The `<hash>`es of a generation file. Each is taken as soon as it is read, so the file's
/// tree is never held whole.
fn parse_generation(bytes: &[u8]) -> Result<Vec<Hashed>, (usize, String)> {
    let mut out = Vec::new();
    let root = parse_xml(bytes, |ancestors, element| {
        let in_hashes = matches!(ancestors, [root, hashes]
            if root.element.name == "hashlist" && hashes.element.name == "hashes");
        match element.name.as_str() {
            "hash" if in_hashes => out.push(hashed(&element)?),
            "directoryhash" if in_hashes => {}
            _ => return Ok(Some(element)),
        }
        Ok(None)
    })?;
    if root.name != "hashlist" {
        return Err((
            root.line,
            format!("the root element is {}, not <hashlist>", shown(&root.name)),
        ));
    }
    if let Some(version) = root.attr("version") {
        if version.trim().split('.').next() != Some("2") {
            return Err((
                root.line,
                "an MHL version other than 2.0: this reads ASC MHL v2.0".to_string(),
            ));
        }
    }
    Ok(out)
}

/// What a `<hash>` says.
fn hashed(hash: &Element) -> Result<Hashed, (usize, String)> {
    let line = hash.line;
    let path_element = hash
        .child("path")
        .ok_or((line, "a <hash> without <path>".to_string()))?;
    let text = path_element.text();
    let encoded = hash.child("metadata").is_some_and(|m| {
        m.elements().any(|e| {
            e.name == "pathencoding"
                && e.ns.as_deref() == Some(RINGIO_NS)
                && e.text().trim() == "percent"
        })
    });
    let path = if encoded {
        percent_decode(&text).map_err(|what| (path_element.line, what))?
    } else {
        text.into_bytes()
    };
    check_path(&path).map_err(|what| (path_element.line, what))?;
    let size = match path_element.attr("size") {
        None => 0,
        Some(size) => size
            .trim()
            .parse()
            .map_err(|_| (path_element.line, "its size is not a number".to_string()))?,
    };
    let mtime = path_element
        .attr("lastmodificationdate")
        .and_then(parse_date);
    let mut hashes = Vec::new();
    let mut others = Vec::new();
    for format in hash.elements() {
        if matches!(format.name.as_str(), "path" | "metadata" | "previousPath") {
            continue;
        }
        let Some(algo) = algo_of_element(&format.name) else {
            others.push(format.name.clone());
            continue;
        };
        if format.attr("action").map(str::trim) == Some("failed") {
            continue;
        }
        let hex = format.text().trim().to_ascii_lowercase();
        if hex.len() != algo.hex_len() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err((format.line, format!("not a {algo} hash")));
        }
        hashes.push((algo, hex));
    }
    Ok(Hashed {
        path,
        size,
        mtime,
        hashes,
        others,
        line,
    })
}

/// The files of the generations read so far, a later one's hash of a path replacing an earlier
/// one's.
#[derive(Debug, Default)]
struct Files {
    /// The generation files read, in order ("" for a single file).
    files: Vec<String>,
    /// Each path's latest `<hash>`, in the order paths first appeared, and the index of the
    /// file it is from.
    hashed: Vec<(Hashed, usize)>,
    /// Where each path is in `hashed`.
    index: std::collections::HashMap<Vec<u8>, usize>,
}

impl Files {
    fn add(&mut self, hashes: Vec<Hashed>, file: &str) {
        let from = self.files.len();
        self.files.push(file.to_string());
        for hashed in hashes {
            match self.index.get(&hashed.path) {
                Some(&i) => self.hashed[i] = (hashed, from),
                None => {
                    self.index.insert(hashed.path.clone(), self.hashed.len());
                    self.hashed.push((hashed, from));
                }
            }
        }
    }

    /// The listing, in the one algorithm every file has.
    fn listing(self) -> Result<Listing, (usize, String)> {
        let common = PREFERENCE.into_iter().find(|&algo| {
            self.hashed
                .iter()
                .all(|(h, _)| h.hashes.iter().any(|(a, _)| *a == algo))
        });
        let Some(algo) = common else {
            return Err(self.no_common_algorithm());
        };
        let entries = self
            .hashed
            .into_iter()
            .map(|(h, _)| Entry {
                hex: h
                    .hashes
                    .into_iter()
                    .find(|(a, _)| *a == algo)
                    .map(|(_, hex)| hex)
                    .unwrap_or_default(),
                path: h.path,
                size: h.size,
                mtime: h.mtime,
            })
            .collect();
        Ok(Listing {
            algo,
            entries,
            alternative: None,
        })
    }

    /// The error of files hashed with different algorithms: the first file and one that lacks
    /// the algorithm of the first.
    fn no_common_algorithm(&self) -> (usize, String) {
        let formats = |h: &Hashed| {
            let mut names: Vec<String> = h.hashes.iter().map(|(a, _)| a.to_string()).collect();
            names.extend(h.others.iter().cloned());
            if names.is_empty() {
                "no hash".to_string()
            } else {
                names.join(", ")
            }
        };
        let at = |from: usize| {
            let file = &self.files[from];
            if file.is_empty() {
                String::new()
            } else {
                format!("{file}: ")
            }
        };
        let (first, first_file) = &self.hashed[0];
        let lacking = first.hashes.first().and_then(|(algo, _)| {
            self.hashed
                .iter()
                .find(|(h, _)| !h.hashes.iter().any(|(a, _)| a == algo))
        });
        let (other, other_file) = lacking.unwrap_or(&self.hashed[0]);
        (
            other.line,
            format!(
                "{}the files are not all hashed with one algorithm that ringio reads ({}): {} \
                 has {}, {}{} has {}",
                at(*other_file),
                supported(),
                String::from_utf8_lossy(&first.path),
                formats(first),
                at(*first_file),
                String::from_utf8_lossy(&other.path),
                formats(other)
            ),
        )
    }
}

/// Seconds and nanoseconds since the epoch of an xs:dateTime
/// (`YYYY-MM-DDTHH:MM:SS[.fraction][Z|(+|-)HH:MM]`, UTC without a zone).
fn parse_date(text: &str) -> Option<(i64, u32)> {
    let text = text.trim();
    let (date, time) = text.split_once('T')?;
    let mut ymd = date.splitn(3, '-');
    let year: i64 = ymd.next()?.parse().ok()?;
    let month: i64 = ymd.next()?.parse().ok()?;
    let day: i64 = ymd.next()?.parse().ok()?;
    let zone_at = time.find(['Z', '+', '-']).unwrap_or(time.len());
    let (clock, zone) = time.split_at(zone_at);
    let offset = match zone {
        "" | "Z" => 0,
        _ => {
            let (h, m) = zone[1..].split_once(':')?;
            let minutes = h.parse::<i64>().ok()? * 60 + m.parse::<i64>().ok()?;
            if zone.starts_with('-') {
                -minutes * 60
            } else {
                minutes * 60
            }
        }
    };
    let (hms, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let mut hms = hms.splitn(3, ':');
    let hour: i64 = hms.next()?.parse().ok()?;
    let minute: i64 = hms.next()?.parse().ok()?;
    let second: i64 = hms.next()?.parse().ok()?;
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 24
        || minute > 59
        || second > 60
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut nanos = 0u32;
    for (i, digit) in fraction.bytes().take(9).enumerate() {
        nanos += u32::from(digit - b'0') * 10u32.pow(8 - i as u32);
    }
    let days = days_from_civil(year, month, day);
    Some((
        days * 86_400 + hour * 3600 + minute * 60 + second - offset,
        nanos,
    ))
}

/// Days since 1970-01-01 of a date of the proleptic Gregorian calendar (Howard Hinnant's
/// days_from_civil).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

// ----- A small XML reader -----

/// An element: its namespace and local name, attributes (by local name, without the namespace
/// declarations), content, and the line of its start tag.
#[derive(Debug)]
struct Element {
    ns: Option<String>,
    name: String,
    attrs: Vec<(String, String)>,
    children: Vec<Node>,
    line: usize,
}

#[derive(Debug)]
enum Node {
    Element(Element),
    Text(String),
}

impl Element {
    fn elements(&self) -> impl Iterator<Item = &Element> {
        self.children.iter().filter_map(|n| match n {
            Node::Element(e) => Some(e),
            Node::Text(_) => None,
        })
    }

    fn child(&self, name: &str) -> Option<&Element> {
        self.elements().find(|e| e.name == name)
    }

    /// Its text content (not its children's).
    fn text(&self) -> String {
        self.children
            .iter()
            .filter_map(|n| match n {
                Node::Text(t) => Some(t.as_str()),
                Node::Element(_) => None,
            })
            .collect()
    }

    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An element being read, with the namespace prefixes it declares.
#[derive(Debug)]
struct Open {
    element: Element,
    qname: String,
    prefix: Option<String>,
    declared: Vec<(String, String)>,
}

/// A position in the document, counting lines as it moves forward.
struct Cursor<'a> {
    s: &'a str,
    pos: usize,
    line: usize,
    counted: usize,
}

impl<'a> Cursor<'a> {
    fn line(&mut self) -> usize {
        self.line += self.s[self.counted..self.pos].matches('\n').count();
        self.counted = self.pos;
        self.line
    }

    fn fail<T>(&mut self, what: impl Into<String>) -> Result<T, (usize, String)> {
        Err((self.line(), what.into()))
    }

    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }

    fn at(&self, prefix: &str) -> bool {
        self.rest().starts_with(prefix)
    }

    fn skip_space(&mut self) -> bool {
        let rest = self.rest();
        let trimmed = rest.trim_start_matches([' ', '\t', '\n']);
        self.pos += rest.len() - trimmed.len();
        trimmed.len() != rest.len()
    }

    /// What comes before `end`, moving past `end`.
    fn until(&mut self, end: &str, what: &str) -> Result<&'a str, (usize, String)> {
        match self.rest().find(end) {
            Some(at) => {
                let found = &self.rest()[..at];
                self.pos += at + end.len();
                Ok(found)
            }
            None => self.fail(format!("{what} is never closed (no \"{end}\")")),
        }
    }

    fn name(&mut self) -> Result<&'a str, (usize, String)> {
        let rest = self.rest();
        let len = rest
            .find(|c: char| c.is_whitespace() || "/>=<\"'&".contains(c))
            .unwrap_or(rest.len());
        if len == 0 {
            return self.fail("a name was expected");
        }
        self.pos += len;
        Ok(&rest[..len])
    }

    /// Skips a comment, processing instruction or document type declaration, if one is here.
    fn skip_markup(&mut self) -> Result<bool, (usize, String)> {
        if self.at("<!--") {
            self.pos += 4;
            self.until("-->", "a comment")?;
        } else if self.at("<?") {
            self.pos += 2;
            self.until("?>", "a processing instruction")?;
        } else if self.at("<!DOCTYPE") {
            // Its internal subset, if any, is skipped whole: MHL files have none.
            let mut depth = 0usize;
            for (i, c) in self.rest().char_indices() {
                match c {
                    '[' => depth += 1,
                    ']' => depth = depth.saturating_sub(1),
                    '>' if depth == 0 => {
                        self.pos += i + 1;
                        return Ok(true);
                    }
                    _ => {}
                }
            }
            return self.fail("a <!DOCTYPE is never closed");
        } else {
            return Ok(false);
        }
        Ok(true)
    }
}

/// `raw` with its entity and character references replaced (and, in an attribute value, its
/// literal whitespace made spaces, as XML reads them).
fn unescape(raw: &str, attribute: bool) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(amp) = rest.find('&') {
        push_literal(&mut out, &rest[..amp], attribute);
        rest = &rest[amp + 1..];
        let semi = rest
            .find(';')
            .filter(|&i| i <= 10)
            .ok_or_else(|| "a '&' that begins no reference".to_string())?;
        let name = &rest[..semi];
        let c = match name {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let code = if let Some(hex) = name.strip_prefix("#x") {
                    u32::from_str_radix(hex, 16).ok()
                } else if let Some(dec) = name.strip_prefix('#') {
                    dec.parse().ok()
                } else {
                    return Err("an unknown entity".to_string());
                };
                code.and_then(char::from_u32)
                    .filter(|&c| is_xml_char(c))
                    .ok_or_else(|| "a reference to a character XML cannot hold".to_string())?
            }
        };
        out.push(c);
        rest = &rest[semi + 1..];
    }
    push_literal(&mut out, rest, attribute);
    Ok(out)
}

fn push_literal(out: &mut String, text: &str, attribute: bool) {
    if attribute {
        out.extend(
            text.chars()
                .map(|c| if c == '\t' || c == '\n' { ' ' } else { c }),
        );
    } else {
        out.push_str(text);
    }
}

/// An element's or attribute's name for an error: as it is when ASC MHL (or ringio's marker)
/// names it, else no more than that it is another. A file's content is never echoed in an error:
/// what is read may not be what the user thinks it is.
fn shown(name: &str) -> String {
    const KNOWN: &[&str] = &[
        "ascmhldirectory",
        "hashlist",
        "creatorinfo",
        "creationdate",
        "hostname",
        "tool",
        "author",
        "name",
        "email",
        "phone",
        "role",
        "location",
        "comment",
        "processinfo",
        "process",
        "roothash",
        "ignore",
        "pattern",
        "hashes",
        "hash",
        "directoryhash",
        "path",
        "content",
        "structure",
        "metadata",
        "references",
        "hashlistreference",
        "c4",
        "md5",
        "sha1",
        "xxh64",
        "xxh3",
        "xxh128",
        "sequencenr",
        "version",
        "xmlns",
        "size",
        "lastmodificationdate",
        "creationdate",
        "action",
        "hashdate",
        "ringio:pathencoding",
        "xmlns:ringio",
        "xsi:schemaLocation",
        "xmlns:xsi",
    ];
    let local = name.rsplit(':').next().unwrap_or(name);
    if KNOWN.contains(&name) || KNOWN.contains(&local) {
        format!("<{local}>")
    } else {
        "a name ASC MHL does not use".to_string()
    }
}

/// Reads an XML document (UTF-8) into its root element: elements, attributes, text, CDATA,
/// entity and character references, comments, processing instructions and the XML declaration;
/// a document type declaration is skipped. Namespaces are resolved for elements.
///
/// Each element, once read, goes to `closed` with its ancestors (the root first), which gives
/// it back to be kept in its parent, or takes it.
fn parse_xml(
    bytes: &[u8],
    mut closed: impl FnMut(&[Open], Element) -> Result<Option<Element>, (usize, String)>,
) -> Result<Element, (usize, String)> {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let line = 1 + bytes[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            return Err((line, "not UTF-8 text".into()));
        }
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // XML reads CR LF and a lone CR as LF.
    let normalized;
    let text = if text.contains('\r') {
        normalized = text.replace("\r\n", "\n").replace('\r', "\n");
        normalized.as_str()
    } else {
        text
    };
    let mut cur = Cursor {
        s: text,
        pos: 0,
        line: 1,
        counted: 0,
    };
    let mut stack: Vec<Open> = Vec::new();
    let mut root: Option<Element> = None;
    loop {
        if stack.is_empty() {
            cur.skip_space();
            if cur.rest().is_empty() {
                break;
            }
            if cur.skip_markup()? {
                continue;
            }
            if root.is_some() {
                return cur.fail("content after the root element");
            }
            if !cur.at("<") {
                return cur.fail("text outside the root element");
            }
        }
        if cur.rest().is_empty() {
            let open = stack.pop().expect("not empty here");
            return cur.fail(format!("{} is never closed", shown(&open.qname)));
        }
        if cur.skip_markup()? {
            continue;
        }
        if cur.at("<![CDATA[") {
            cur.pos += 9;
            let data = cur.until("]]>", "a CDATA section")?;
            if let Some(open) = stack.last_mut() {
                open.element.children.push(Node::Text(data.to_string()));
            }
            continue;
        }
        if cur.at("</") {
            cur.pos += 2;
            let name = cur.name()?;
            cur.skip_space();
            if !cur.at(">") {
                return cur.fail(format!(
                    "the end tag of {} is not closed with '>'",
                    shown(name)
                ));
            }
            cur.pos += 1;
            let Some(open) = stack.pop() else {
                return cur.fail(format!("an end tag of {} closes nothing", shown(name)));
            };
            if open.qname != name {
                return cur.fail(format!(
                    "an end tag of {} closes {}",
                    shown(name),
                    shown(&open.qname)
                ));
            }
            if let Some(element) = closed(&stack, open.element)? {
                finish(element, &mut stack, &mut root);
            }
            continue;
        }
        if cur.at("<") {
            let line = cur.line();
            cur.pos += 1;
            let qname = cur.name()?;
            let mut raw_attrs: Vec<(&str, String)> = Vec::new();
            let empty = loop {
                let spaced = cur.skip_space();
                if cur.at("/>") {
                    cur.pos += 2;
                    break true;
                }
                if cur.at(">") {
                    cur.pos += 1;
                    break false;
                }
                if cur.rest().is_empty() {
                    return cur.fail(format!("the tag of {} is never closed", shown(qname)));
                }
                if !spaced {
                    return cur.fail(format!("unexpected text in the tag of {}", shown(qname)));
                }
                let name = cur.name()?;
                cur.skip_space();
                if !cur.at("=") {
                    return cur.fail(format!(
                        "attribute {} of {} has no value",
                        shown(name),
                        shown(qname)
                    ));
                }
                cur.pos += 1;
                cur.skip_space();
                let quote = match cur.rest().chars().next() {
                    Some(q @ ('"' | '\'')) => q,
                    _ => {
                        return cur.fail(format!(
                            "attribute {} of {} is not quoted",
                            shown(name),
                            shown(qname)
                        ))
                    }
                };
                cur.pos += 1;
                let raw = cur.until(&quote.to_string(), "an attribute value")?;
                if raw.contains('<') {
                    return cur.fail(format!(
                        "attribute {} of {} holds '<'",
                        shown(name),
                        shown(qname)
                    ));
                }
                let value = unescape(raw, true).or_else(|what| cur.fail(what))?;
                raw_attrs.push((name, value));
            };
            let mut declared = Vec::new();
            let mut attrs = Vec::new();
            for (name, value) in raw_attrs {
                if name == "xmlns" {
                    declared.push((String::new(), value));
                } else if let Some(prefix) = name.strip_prefix("xmlns:") {
                    declared.push((prefix.to_string(), value));
                } else {
                    let local = name.rsplit(':').next().unwrap_or(name);
                    attrs.push((local.to_string(), value));
                }
            }
            let (prefix, local) = match qname.split_once(':') {
                Some((p, l)) => (Some(p.to_string()), l.to_string()),
                None => (None, qname.to_string()),
            };
            let mut open = Open {
                element: Element {
                    ns: None,
                    name: local,
                    attrs,
                    children: Vec::new(),
                    line,
                },
                qname: qname.to_string(),
                prefix,
                declared,
            };
            open.element.ns = namespace(&stack, &open);
            if empty {
                if let Some(element) = closed(&stack, open.element)? {
                    finish(element, &mut stack, &mut root);
                }
            } else {
                stack.push(open);
            }
            continue;
        }
        // Text, up to the next markup.
        let rest = cur.rest();
        let len = rest.find('<').unwrap_or(rest.len());
        let raw = &rest[..len];
        let value = unescape(raw, false).or_else(|what| cur.fail(what))?;
        cur.pos += len;
        if let Some(open) = stack.last_mut() {
            open.element.children.push(Node::Text(value));
        }
    }
    match root {
        Some(root) => Ok(root),
        None => Err((cur.line(), "no root element".into())),
    }
}

/// The namespace of `open`'s element: the nearest declaration of its prefix.
fn namespace(stack: &[Open], open: &Open) -> Option<String> {
    let prefix = open.prefix.as_deref().unwrap_or("");
    std::iter::once(open)
        .chain(stack.iter().rev())
        .find_map(|o| o.declared.iter().find(|(p, _)| p == prefix))
        .map(|(_, uri)| uri.clone())
        .filter(|uri| !uri.is_empty())
}

/// Puts a closed element into its parent, or makes it the root.
fn finish(element: Element, stack: &mut [Open], root: &mut Option<Element>) {
    match stack.last_mut() {
        Some(parent) => parent.element.children.push(Node::Element(element)),
        None => *root = Some(element),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &[u8], algo: Algo, content: &[u8], mtime: Option<(i64, u32)>) -> Entry {
        Entry {
            path: path.to_vec(),
            size: content.len() as u64,
            mtime,
            hex: algo.hex_of(content),
        }
    }

    /// The only generation file of `root`'s history with `number`.
    fn generation_file(root: &Path, number: u32) -> PathBuf {
        let prefix = format!("{number:04}_");
        fs::read_dir(root.join(FOLDER))
            .unwrap()
            .map(|d| d.unwrap().path())
            .find(|p| {
                let name = p.file_name().unwrap().to_str().unwrap();
                name.starts_with(&prefix) && name.ends_with(".mhl")
            })
            .unwrap()
    }

    #[test]
    fn elements_are_the_formats_of_the_schema() {
        assert_eq!(element_of(Algo::Xxh128), Some("xxh128"));
        assert_eq!(element_of(Algo::Xxh3), Some("xxh3"));
        assert_eq!(element_of(Algo::Xxh64), Some("xxh64"));
        assert_eq!(element_of(Algo::Sha1), Some("sha1"));
        assert_eq!(element_of(Algo::Md5), Some("md5"));
        assert_eq!(element_of(Algo::Sha256), None);
        assert_eq!(element_of(Algo::Blake3), None);
    }

    /// Known answers of the reference implementation's C4.
    #[test]
    fn c4_ids_match_the_reference() {
        assert_eq!(
            c4(b""),
            "c459dsjfscH38cYeXXYogktxf4Cd9ibshE3BHUo6a58hBXmRQdZrAkZzsWcbWtDg5oQstpDuni4Hirj75GEmTc1sFT"
        );
        assert_eq!(
            c4(b"hello\n"),
            "c45dkQrAqUiR8WzPGgn6fAGji3VAVeAE7cKVG4G53ou9dTk4Nzb9vFYEwzy9jq5ZKQKM64DMpPpVbYe2bMsZP2yYKi"
        );
        let bytes: Vec<u8> = (0..=255u8).cycle().take(768).collect();
        assert_eq!(
            c4(&bytes),
            "c45pyxDcYgpsJfX5fQ4JPZRiUsdxACFjYnvZD31kgqWGaJBijNVfsho64chmG73Qs9GVfgEAJYLaLaUKRdyy9Y2rT7"
        );
    }

    #[test]
    fn entries_round_trip_with_any_names() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("Card A001");
        fs::create_dir(&root).unwrap();
        let names: [&[u8]; 16] = [
            b"plain.mov",
            b"Clips/with space.mov",
            b"a&b<c>d\"e'f.txt",
            b"new\nline",
            b"tab\there",
            b"cr\rreturn",
            b"100%.txt",
            b"%41%25",
            b"looks%ffencoded",
            b"\xff\xfe raw",
            b"bad\xffand %25 and %",
            b"ctl\x01char",
            "\u{fffe}nonchar".as_bytes(),
            "Unicode/é ü 日本".as_bytes(),
            b" lead and trail ",
            b"]]> and &amp;",
        ];
        let mtimes = [
            Some((1_700_000_000, 0)),
            Some((1_700_000_000, 123_456_789)),
            None,
            Some((-1, 1)),
        ];
        let entries: Vec<Entry> = names
            .iter()
            .enumerate()
            .map(|(i, name)| entry(name, Algo::Xxh64, name, mtimes[i % mtimes.len()]))
            .collect();
        let written = write_generation(&root, Algo::Xxh64, &entries).unwrap();
        let name = written.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("0001_Card A001_"), "{name}");
        assert!(
            name.ends_with("Z.mhl") && name.len() == "0001_Card A001_2026-01-01_000000Z.mhl".len()
        );
        assert!(root.join("ascmhl/ascmhl_chain.xml").is_file());

        let want = Listing {
            algo: Algo::Xxh64,
            entries: entries.clone(),
            alternative: None,
        };
        assert_eq!(read(&root).unwrap(), want);
        assert_eq!(read(&root.join("ascmhl")).unwrap(), want);
        assert_eq!(read(&written).unwrap(), want);
        assert!(looks_like(&root) && looks_like(&root.join("ascmhl")) && looks_like(&written));
        assert!(!looks_like(dir.path()) && !looks_like(&root.join("plain.mov")));

        // Names XML holds are written as they are; the others are marked as encoded.
        let xml = fs::read_to_string(&written).unwrap();
        assert!(xml.contains(">100%.txt</path>"), "{xml}");
        assert!(xml.contains(">a&amp;b&lt;c&gt;d&quot;e&apos;f.txt</path>"));
        assert!(xml.contains(">new&#10;line</path>"));
        assert!(xml.contains(">%FF%FE raw</path>"));
        assert!(xml.contains(">bad%FFand %2525 and %25</path>"));
        assert_eq!(xml.matches("<ringio:pathencoding").count(), 4);
        assert!(xml.contains("<tool version=\""));
        assert!(xml.contains("<process>transfer</process>"));
        assert!(xml.contains("action=\"original\""));
    }

    #[test]
    fn a_second_generation_overrides_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let first = [
            entry(b"a", Algo::Xxh128, b"one", None),
            entry(b"b", Algo::Xxh128, b"two", None),
        ];
        let second = [
            entry(b"a", Algo::Xxh128, b"changed", Some((5, 0))),
            entry(b"c", Algo::Xxh128, b"three", None),
        ];
        let one = write_generation(root, Algo::Xxh128, &first).unwrap();
        let two = write_generation(root, Algo::Xxh128, &second).unwrap();
        assert!(one
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("0001_"));
        assert!(two
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("0002_"));
        let chain = fs::read_to_string(root.join("ascmhl/ascmhl_chain.xml")).unwrap();
        assert!(chain.contains("xmlns=\"urn:ASC:MHL:DIRECTORY:v2.0\""));
        assert!(chain.contains("<hashlist sequencenr=\"1\">"));
        assert!(chain.contains("<hashlist sequencenr=\"2\">"));
        assert_eq!(chain.matches("<c4>c4").count(), 2);
        let listing = read(root).unwrap();
        assert_eq!(listing.algo, Algo::Xxh128);
        assert_eq!(
            listing.entries,
            vec![second[0].clone(), first[1].clone(), second[1].clone()]
        );
    }

    #[test]
    fn an_interrupted_generation_is_not_read_nor_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let first = [entry(b"a", Algo::Md5, b"one", None)];
        write_generation(root, Algo::Md5, &first).unwrap();
        // A generation renamed into place, its chain entry never written.
        fs::write(root.join("ascmhl/0002_x_2020-01-01_000000Z.mhl"), "<broken").unwrap();
        assert_eq!(read(root).unwrap().entries, first);
        let third = write_generation(root, Algo::Md5, &[]).unwrap();
        assert!(third
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("0003_"));
        assert_eq!(read(root).unwrap().entries, first);
        // No temporary file is left.
        let names: Vec<String> = fs::read_dir(root.join("ascmhl"))
            .unwrap()
            .map(|d| d.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }

    #[test]
    fn a_modified_generation_or_chain_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write_generation(root, Algo::Xxh3, &[entry(b"a", Algo::Xxh3, b"1", None)]).unwrap();
        write_generation(root, Algo::Xxh3, &[entry(b"b", Algo::Xxh3, b"2", None)]).unwrap();
        let generation = generation_file(root, 1);
        let original = fs::read_to_string(&generation).unwrap();
        fs::write(&generation, original.replace("<hashes>", "<hashes> ")).unwrap();
        let (line, what) = read(root).unwrap_err();
        assert_eq!(line, 3, "{what}");
        assert!(
            what.contains("was modified") && what.contains("0001_"),
            "{what}"
        );
        fs::write(&generation, &original).unwrap();
        read(root).unwrap();

        let chain_path = root.join("ascmhl/ascmhl_chain.xml");
        let chain = fs::read_to_string(&chain_path).unwrap();
        let at = chain.rfind("</c4>").unwrap() - 1;
        let wrong = if &chain[at..=at] == "2" { "3" } else { "2" };
        fs::write(
            &chain_path,
            format!("{}{wrong}{}", &chain[..at], &chain[at + 1..]),
        )
        .unwrap();
        let (line, what) = read(root).unwrap_err();
        assert_eq!(line, 7, "{what}");
        assert!(
            what.contains("was modified") && what.contains("0002_"),
            "{what}"
        );

        fs::remove_file(generation).unwrap();
        let (_, what) = read(root).unwrap_err();
        assert!(what.contains("generation 1"), "{what}");
    }

    #[test]
    fn malformed_xml_says_where() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.mhl");
        let head =
            "<?xml version=\"1.0\"?>\n<hashlist version=\"2.0\" xmlns=\"urn:ASC:MHL:v2.0\">\n";
        for (body, line, says) in [
            (
                "<hashes>\n<hash>\n</hashes>\n</hashlist>\n",
                5,
                "an end tag of <hashes> closes <hash>",
            ),
            (
                "<hashes>\n<hash><path>a &foo; b</path></hash>",
                4,
                "unknown entity",
            ),
            (
                "<hashes>\n\n<hash><path>a</path></hash>\n",
                6,
                "<hashes> is never closed",
            ),
            ("<hashes x=1>", 3, "not quoted"),
            ("<!-- never closed", 3, "comment is never closed"),
            ("</hashlist>\n<other/>\n", 4, "content after the root"),
            (
                "<hashes><hash><path>a &#0; b</path></hash></hashes></hashlist>",
                3,
                "a character XML cannot hold",
            ),
            (
                "<hashes>\n<hash><path size=\"big\">a</path></hash></hashes></hashlist>",
                4,
                "size is not a number",
            ),
            (
                "<hashes>\n<hash><path>a</path>\n<md5>xyz</md5></hash></hashes></hashlist>",
                5,
                "not a md5 hash",
            ),
            (
                "<hashes>\n<hash><path>/etc/passwd</path><md5>00</md5></hash></hashes></hashlist>",
                4,
                "not a relative path",
            ),
        ] {
            fs::write(&file, format!("{head}{body}")).unwrap();
            let (got_line, what) = read(&file).unwrap_err();
            assert!(what.contains(says), "{body}: {what}");
            // The file's own text is never echoed (only ASC MHL's names).
            for echoed in ["foo", "big", "xyz", "x=1", "/etc/passwd", "other"] {
                assert!(!what.contains(echoed), "{body}: {what}");
            }
            assert_eq!(got_line, line, "{body}: {what}");
        }
        fs::write(&file, b"<hashlist>\n\xff</hashlist>").unwrap();
        assert_eq!(read(&file).unwrap_err(), (2, "not UTF-8 text".into()));
        fs::write(&file, "<hashlist version=\"1.1\"></hashlist>").unwrap();
        assert!(read(&file)
            .unwrap_err()
            .1
            .contains("version other than 2.0"));
    }

    /// An MHL as other tools write it: namespace prefixes, comments, CDATA, CR LF, directory
    /// hashes, several formats per file, a failed verification, c4.
    #[test]
    fn other_tools_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("other.mhl");
        let xml = "\u{feff}<?xml version='1.0' encoding='UTF-8'?>\r\n\
            <!-- made by hand -->\r\n\
            <m:hashlist version='2.0' xmlns:m='urn:ASC:MHL:v2.0'>\r\n\
            <m:creatorinfo><m:creationdate>2020-01-16T09:15:00+01:00</m:creationdate>\
            <m:hostname>h</m:hostname><m:tool version='1'>t</m:tool></m:creatorinfo>\r\n\
            <m:processinfo><m:process>in-place</m:process></m:processinfo>\r\n\
            <m:hashes>\r\n\
            <m:hash><m:path size='3' lastmodificationdate='2020-01-16T09:15:00.5+01:00'>\
            <![CDATA[Clips/A&B.mov]]></m:path>\
            <m:md5 action='original'>B1946AC92492D2347C6235B4D2611184</m:md5>\
            <m:xxh64 action='original'> e4c191d091bd8853 </m:xxh64></m:hash>\r\n\
            <m:directoryhash><m:path>Clips</m:path><m:content><m:md5>00</m:md5></m:content>\
            </m:directoryhash>\r\n\
            <m:hash><m:path>x%41 &#x263A;</m:path><m:c4>c4abc</m:c4>\
            <m:xxh64 action='failed'>0000000000000000</m:xxh64>\
            <m:xxh64 action='verified'>99fc819aaba2462a</m:xxh64>\
            <m:metadata><pathencoding>percent</pathencoding></m:metadata></m:hash>\r\n\
            </m:hashes></m:hashlist>\r\n";
        fs::write(&file, xml).unwrap();
        let listing = read(&file).unwrap();
        assert_eq!(listing.algo, Algo::Xxh64);
        assert_eq!(
            listing.entries,
            vec![
                Entry {
                    path: b"Clips/A&B.mov".to_vec(),
                    size: 3,
                    mtime: Some((1_579_162_500, 500_000_000)),
                    hex: "e4c191d091bd8853".into(),
                },
                Entry {
                    path: "x%41 \u{263a}".into(),
                    size: 0,
                    mtime: None,
                    hex: "99fc819aaba2462a".into(),
                },
            ]
        );
    }

    #[test]
    fn files_of_different_algorithms_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mixed.mhl");
        let xml = "<hashlist version=\"2.0\" xmlns=\"urn:ASC:MHL:v2.0\"><hashes>\n\
            <hash><path>a</path><md5>b1946ac92492d2347c6235b4d2611184</md5></hash>\n\
            <hash><path>b</path><xxh64>e4c191d091bd8853</xxh64><c4>c4x</c4></hash>\n\
            </hashes></hashlist>";
        fs::write(&file, xml).unwrap();
        let (line, what) = read(&file).unwrap_err();
        assert_eq!(line, 3);
        assert!(what.contains("a has md5, b has xxh64, c4"), "{what}");
    }

    #[test]
    fn unsupported_algorithms_and_bad_entries_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let e = entry(b"a", Algo::Sha256, b"x", None);
        let err = write_generation(dir.path(), Algo::Sha256, &[e]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(
            err.to_string().contains("xxh3, xxh64, xxh128, sha1, md5"),
            "{err}"
        );
        let bad = entry(b"../a", Algo::Md5, b"x", None);
        let err = write_generation(dir.path(), Algo::Md5, &[bad]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let short = Entry {
            hex: "abc".into(),
            ..entry(b"a", Algo::Md5, b"x", None)
        };
        let err = write_generation(dir.path(), Algo::Md5, &[short]).unwrap_err();
        assert!(err.to_string().contains("not a md5 hash"), "{err}");
        assert!(!dir.path().join("ascmhl/ascmhl_chain.xml").exists());
    }

    #[test]
    fn the_history_folder_is_not_listed() {
        let dir = tempfile::tempdir().unwrap();
        let entries = [
            entry(b"ascmhl/ascmhl_chain.xml", Algo::Sha1, b"old", None),
            entry(b"ascmhl", Algo::Sha1, b"odd", None),
            entry(b"ascmhl2/x", Algo::Sha1, b"kept", None),
        ];
        write_generation(dir.path(), Algo::Sha1, &entries).unwrap();
        assert_eq!(read(dir.path()).unwrap().entries, entries[2..]);
    }

    #[test]
    fn dates_read_as_written() {
        for (secs, nanos) in [(0, 0), (1_700_000_000, 1), (-86_401, 999_999_999)] {
            let text = iso_date(secs, nanos).unwrap();
            assert_eq!(parse_date(&text), Some((secs, nanos)), "{text}");
        }
        assert_eq!(
            parse_date("2019-10-11T15:56:03-02:30"),
            parse_date("2019-10-11T18:26:03Z")
        );
        assert_eq!(parse_date("yesterday"), None);
    }

    /// Runs the reference implementation's `verify` on a tree written here, where Python has
    /// the `ascmhl` package (or `RINGIO_ASCMHL_PYTHON` names a Python that has it). Its command
    /// is called without the `ascmhl` program's update check, which would ask the network.
    #[test]
    fn the_reference_implementation_verifies_the_output() {
        let python = std::env::var("RINGIO_ASCMHL_PYTHON").unwrap_or_else(|_| "python3".into());
        let has = std::process::Command::new(&python)
            .args(["-c", "import ascmhl.commands"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !has {
            skip!("{python} has no ascmhl package");
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("A001");
        let files: [(&str, &[u8]); 4] = [
            ("clip 1.mov", b"frames"),
            ("Sub/a & <b> 100%.txt", b"hello\n"),
            ("Sub/new\nline", b""),
            ("Sub/Deeper/\u{e9}t\u{e9}", b"summer"),
        ];
        let mut entries = Vec::new();
        for (name, content) in files {
            let path = root.join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, content).unwrap();
            entries.push(entry(name.as_bytes(), Algo::Xxh128, content, Some((1, 0))));
        }
        let verify = |root: &Path| {
            std::process::Command::new(&python)
                .args([
                    "-c",
                    "import sys\nfrom ascmhl.commands import verify\n\
                     verify.main(args=sys.argv[1:], standalone_mode=False)",
                ])
                .arg(root)
                .output()
                .unwrap()
        };
        write_generation(&root, Algo::Xxh128, &entries[..2]).unwrap();
        write_generation(&root, Algo::Xxh128, &entries[2..]).unwrap();
        let out = verify(&root);
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        fs::write(root.join("clip 1.mov"), b"frameZ").unwrap();
        assert!(!verify(&root).status.success());
    }
}
