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
use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use jiff::civil::DateTime;
use jiff::fmt::temporal::Pieces;
use jiff::tz::Offset;
use jiff::{SignedDuration, Timestamp};
use quick_xml::escape::{escape, resolve_predefined_entity, EscapeError};
use quick_xml::events::attributes::AttrError;
use quick_xml::events::{BytesDecl, BytesRef, BytesStart, BytesText, Event};
use quick_xml::name::ResolveResult;
use quick_xml::{NsReader, XmlVersion};

use super::{Entry, Listing};
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

    let now = Timestamp::now();
    let name = format!(
        "{number:04}_{}_{}Z.mhl",
        root_name(root),
        Offset::UTC.to_datetime(now).strftime("%Y-%m-%d_%H%M%S")
    );
    // To the microsecond, as the reference implementation writes its dates.
    let created = u32::try_from(now.subsec_nanosecond())
        .ok()
        .and_then(|nanos| iso_date(now.as_second(), nanos - nanos % 1000))
        .ok_or_else(|| io::Error::other("the clock is not within the years 1970 to 9999"))?;
    let generation = generation_xml(element, entries, &created, &hostname());
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

/// This machine's name (uname's node name), for `<hostname>`.
fn hostname() -> String {
    let uname = rustix::system::uname();
    let name = uname.nodename().to_string_lossy();
    if name.is_empty() {
        "localhost".into()
    } else {
        xml_safe(&name)
    }
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

/// An XML document being written, two spaces a level, as the reference implementation lays out
/// its files.
type Xml = quick_xml::Writer<Vec<u8>>;

/// A document: the XML declaration, and the element `root` with `attrs` holding what `body`
/// writes.
fn document(
    root: &str,
    attrs: &[(&str, &str)],
    body: impl FnOnce(&mut Xml) -> io::Result<()>,
) -> String {
    let mut x = Xml::new_with_indent(Vec::new(), b' ', 2);
    x.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))
        .and_then(|()| {
            x.create_element(root)
                .with_attributes(attrs.iter().copied())
                .write_inner_content(body)
        })
        .expect("writing to memory does not fail");
    let mut bytes = x.into_inner();
    bytes.push(b'\n');
    String::from_utf8(bytes).expect("UTF-8 written")
}

/// `<name attrs>text</name>`.
fn leaf(x: &mut Xml, name: &str, attrs: &[(&str, &str)], text: &str) -> io::Result<()> {
    // XML readers turn a literal CR into LF (and whitespace in attributes into spaces):
    // character references keep tab, newline and CR as they are.
    let text = escape(text)
        .replace('\t', "&#9;")
        .replace('\n', "&#10;")
        .replace('\r', "&#13;");
    x.create_element(name)
        .with_attributes(attrs.iter().copied())
        .write_text_content(BytesText::from_escaped(text))?;
    Ok(())
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
    let listed: Vec<&Entry> = entries
        .iter()
        .filter(|e| !in_history_folder(&e.path))
        .collect();
    document("hashlist", &[("version", "2.0"), ("xmlns", NS)], |x| {
        x.create_element("creatorinfo").write_inner_content(|x| {
            leaf(x, "creationdate", &[], now)?;
            leaf(x, "hostname", &[], host)?;
            leaf(x, "tool", &[("version", env!("CARGO_PKG_VERSION"))], TOOL)
        })?;
        x.create_element("processinfo").write_inner_content(|x| {
            leaf(x, "process", &[], "transfer")?;
            x.create_element("ignore").write_inner_content(|x| {
                IGNORE
                    .iter()
                    .try_for_each(|pattern| leaf(x, "pattern", &[], pattern))
            })?;
            Ok(())
        })?;
        // The schema wants at least one hash in a <hashes>: an empty generation has none.
        if !listed.is_empty() {
            x.create_element("hashes").write_inner_content(|x| {
                listed
                    .iter()
                    .try_for_each(|entry| hash_xml(x, element, entry, now))
            })?;
        }
        Ok(())
    })
}

/// One file's `<hash>`.
fn hash_xml(x: &mut Xml, element: &str, entry: &Entry, now: &str) -> io::Result<()> {
    let (path, encoded) = path_text(&entry.path);
    let size = entry.size.to_string();
    let date = entry.mtime.and_then(|(s, n)| iso_date(s, n));
    let mut attrs = vec![("size", size.as_str())];
    attrs.extend(date.as_deref().map(|date| ("lastmodificationdate", date)));
    let hex = entry.hex.to_ascii_lowercase();
    x.create_element("hash").write_inner_content(|x| {
        leaf(x, "path", &attrs, &path)?;
        leaf(
            x,
            element,
            &[("action", "original"), ("hashdate", now)],
            &hex,
        )?;
        if encoded {
            x.create_element("metadata").write_inner_content(|x| {
                let ns = [("xmlns:ringio", RINGIO_NS)];
                leaf(x, "ringio:pathencoding", &ns, "percent")
            })?;
        }
        Ok(())
    })?;
    Ok(())
}

/// 1970-01-01T00:00:00 (UTC), where the seconds of a file's time count from.
const EPOCH: DateTime = DateTime::constant(1970, 1, 1, 0, 0, 0, 0);

/// A time as xs:dateTime in UTC (`2026-11-25T19:03:58.5Z`), for the years xs:dateTime writes
/// with four digits (0000 to 9999).
fn iso_date(secs: i64, nanos: u32) -> Option<String> {
    let since = SignedDuration::new(secs, nanos.min(999_999_999) as i32);
    let at = EPOCH.checked_add(since).ok().filter(|at| at.year() >= 0)?;
    Some(format!("{at}Z"))
}

/// The XML of the chain file.
fn chain_xml(links: &[Link]) -> String {
    document("ascmhldirectory", &[("xmlns", DIRECTORY_NS)], |x| {
        for link in links {
            let number = link.number.to_string();
            x.create_element("hashlist")
                .with_attribute(("sequencenr", number.as_str()))
                .write_inner_content(|x| {
                    leaf(x, "path", &[], &link.path)?;
                    leaf(x, &link.format, &[], &link.hash)
                })?;
        }
        Ok(())
    })
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
            if root.name == "hashlist" && hashes.name == "hashes");
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
            let name = known(&format.name).unwrap_or("a format ASC MHL does not name");
            others.push(name.to_string());
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
    let pieces = Pieces::parse(text.trim()).ok()?;
    let at = pieces.date().to_datetime(pieces.time()?);
    let offset = pieces
        .offset()
        .map_or(Offset::UTC, |o| o.to_numeric_offset());
    let since = at.duration_since(EPOCH) - SignedDuration::from_secs(offset.seconds().into());
    // The nanoseconds count forward from the second, as a file's time has them.
    let (secs, nanos) = (since.as_secs(), since.subsec_nanos());
    Some(if nanos < 0 {
        (secs - 1, (nanos + 1_000_000_000) as u32)
    } else {
        (secs, nanos as u32)
    })
}

// ----- Reading XML -----

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

/// An element's or attribute's name for an error: `<name>` when ASC MHL (or ringio's marker)
/// names it, else no more than that it is another. A file's content is never echoed in an
/// error: what is read may not be what the user thinks it is.
fn shown(name: &str) -> String {
    known(name).map_or_else(
        || "a name ASC MHL does not use".into(),
        |n| format!("<{n}>"),
    )
}

/// The local name of an element or attribute ASC MHL (or ringio's marker) names, or None.
fn known(name: &str) -> Option<&str> {
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
    (KNOWN.contains(&name) || KNOWN.contains(&local)).then_some(local)
}

/// Where each line of a document begins (after LF, CR LF or a lone CR, as XML reads them), for
/// the line of a position.
struct Lines {
    starts: Vec<u64>,
    /// The bytes before the positions' 0 (a byte order mark's).
    bom: u64,
}

impl Lines {
    fn new(text: &str) -> Lines {
        let b = text.as_bytes();
        let breaks = b
            .iter()
            .enumerate()
            .filter(|&(i, &c)| c == b'\n' || (c == b'\r' && b.get(i + 1) != Some(&b'\n')));
        Lines {
            starts: breaks.map(|(i, _)| i as u64 + 1).collect(),
            bom: 0,
        }
    }

    /// The line of the byte at `pos` (from 1).
    fn at(&self, pos: u64) -> usize {
        1 + self
            .starts
            .partition_point(|&start| start <= pos + self.bom)
    }
}

/// Reads an XML document (UTF-8) into its root element, with quick-xml: elements, attributes,
/// text, CDATA, entity and character references; comments, processing instructions, the XML
/// declaration and a document type declaration are skipped. Namespaces are resolved for
/// elements.
///
/// Each element, once read, goes to `closed` with its ancestors (the root first), which gives
/// it back to be kept in its parent, or takes it.
fn parse_xml(
    bytes: &[u8],
    mut closed: impl FnMut(&[Element], Element) -> Result<Option<Element>, (usize, String)>,
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
    // quick-xml skips a byte order mark, and counts its positions after it.
    let bom = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let lines = Lines {
        bom,
        ..Lines::new(text)
    };
    let mut reader = NsReader::from_str(text);
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    loop {
        let pos = reader.buffer_position();
        let line = lines.at(pos);
        let (ns, event) = match reader.read_resolved_event() {
            Ok((ResolveResult::Bound(ns), event)) => {
                let ns = String::from_utf8_lossy(ns.as_ref()).into_owned();
                (Some(ns).filter(|ns| !ns.is_empty()), event)
            }
            Ok((_, event)) => (None, event),
            Err(e) => return Err((lines.at(reader.error_position()), xml_error(&e))),
        };
        // Markup or text where the document has ended or not begun, at its first character.
        let outside = |what: &str, space: usize| {
            let at = if root.is_some() {
                "content after the root element"
            } else {
                what
            };
            Err((lines.at(pos + space as u64), at.to_string()))
        };
        let text = match &event {
            Event::Start(tag) | Event::Empty(tag) => {
                if stack.is_empty() && root.is_some() {
                    return outside("", 0);
                }
                let element = Element {
                    ns,
                    name: String::from_utf8_lossy(tag.local_name().as_ref()).into_owned(),
                    attrs: attributes(tag).map_err(|what| (line, what))?,
                    children: Vec::new(),
                    line,
                };
                if matches!(event, Event::Start(_)) {
                    if stack.len() == MAX_DEPTH {
                        let what = format!("elements nested deeper than {MAX_DEPTH} levels");
                        return Err((line, what));
                    }
                    stack.push(element);
                } else if let Some(element) = closed(&stack, element)? {
                    finish(element, &mut stack, &mut root);
                }
                continue;
            }
            Event::End(_) => {
                // quick-xml refuses an end tag that closes another element, or nothing.
                let element = stack.pop().expect("an open element");
                if let Some(element) = closed(&stack, element)? {
                    finish(element, &mut stack, &mut root);
                }
                continue;
            }
            Event::Text(t) => t
                .xml10_content()
                .map_err(|_| (line, "not UTF-8 text".into()))?,
            Event::CData(t) => t
                .xml10_content()
                .map_err(|_| (line, "not UTF-8 text".into()))?,
            Event::GeneralRef(r) => reference(r).map_err(|what| (line, what))?.into(),
            Event::Eof => break,
            // Comments, processing instructions, the declaration, the document type.
            _ => continue,
        };
        let space = event
            .iter()
            .take_while(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
            .count();
        match stack.last_mut() {
            Some(open) => open.children.push(Node::Text(text.into_owned())),
            None if space == event.len() => {}
            None => return outside("text outside the root element", space),
        }
    }
    let end = lines.at(text.len() as u64 - bom);
    if let Some(open) = stack.last() {
        return Err((end, format!("{} is never closed", shown(&open.name))));
    }
    root.ok_or((end, "no root element".into()))
}

/// How deep elements may nest: ASC MHL's deepest are 5 levels down; a file nested without end
/// would hold a tree whose drop overflows the stack.
const MAX_DEPTH: usize = 256;

/// Puts a closed element into its parent, or makes it the root.
fn finish(element: Element, stack: &mut [Element], root: &mut Option<Element>) {
    match stack.last_mut() {
        Some(parent) => parent.children.push(Node::Element(element)),
        None => *root = Some(element),
    }
}

/// A tag's attributes, by local name, without the namespace declarations.
fn attributes(tag: &BytesStart<'_>) -> Result<Vec<(String, String)>, String> {
    let element = || shown(&String::from_utf8_lossy(tag.name().as_ref()));
    // quick-xml takes a name as far as the next space: one holding what ends a name in XML
    // (`<a&b>`, `<a/b>`, `x<="1"`) is refused here.
    let bad_name = |name: &[u8]| name.is_empty() || name.iter().any(|b| b"<>/=&\"'".contains(b));
    if tag.name().as_ref().is_empty() {
        return Err("a name was expected".into());
    }
    if bad_name(tag.name().as_ref()) {
        return Err(format!("unexpected text in the tag of {}", element()));
    }
    // XML wants space after each attribute's value (`a="1"b="2"` is not XML); quick-xml takes
    // it without.
    let raw = tag.attributes_raw();
    let mut quote = None;
    for (i, &b) in raw.iter().enumerate() {
        match quote {
            None if b == b'"' || b == b'\'' => quote = Some(b),
            Some(q) if b == q => {
                quote = None;
                if raw.get(i + 1).is_some_and(|n| !b" \t\r\n/".contains(n)) {
                    return Err(format!("unexpected text in the tag of {}", element()));
                }
            }
            _ => {}
        }
    }
    let mut attrs = Vec::new();
    for attr in tag.attributes() {
        let attr = attr.map_err(|e| {
            let what = match e {
                AttrError::ExpectedEq(_) | AttrError::ExpectedValue(_) => "has no value",
                AttrError::UnquotedValue(_) | AttrError::ExpectedQuote(..) => "is not quoted",
                AttrError::Duplicated(..) => "is given twice",
            };
            format!("an attribute of {} {what}", element())
        })?;
        let name = String::from_utf8_lossy(attr.key.as_ref()).into_owned();
        if bad_name(attr.key.as_ref()) {
            return Err(format!("unexpected text in the tag of {}", element()));
        }
        if attr.value.contains(&b'<') {
            return Err(format!(
                "attribute {} of {} holds '<'",
                shown(&name),
                element()
            ));
        }
        let value = attr
            .normalized_value(XmlVersion::Implicit1_0)
            .map_err(|e| xml_error(&e))?;
        if attr.key.as_namespace_binding().is_none() {
            let local = String::from_utf8_lossy(attr.key.local_name().as_ref()).into_owned();
            attrs.push((local, value.into_owned()));
        }
    }
    Ok(attrs)
}

/// The text of an entity or character reference in content.
fn reference(r: &BytesRef<'_>) -> Result<String, String> {
    match r.resolve_char_ref() {
        Ok(Some(c)) if is_xml_char(c) => Ok(c.into()),
        Ok(Some(_)) | Err(_) => Err(CHAR_REF.into()),
        Ok(None) => r
            .decode()
            .ok()
            .and_then(|name| resolve_predefined_entity(&name))
            .map(String::from)
            .ok_or_else(|| "an unknown entity".into()),
    }
}

/// What is wrong, for an error of quick-xml: in words that never echo the file's text (names
/// only as [`shown`] gives them).
fn xml_error(e: &quick_xml::Error) -> String {
    use quick_xml::errors::{IllFormedError as Ill, SyntaxError as Syntax};
    match e {
        quick_xml::Error::Syntax(s) => match s {
            Syntax::InvalidBangMarkup => "a '<!' that begins no comment, CDATA or <!DOCTYPE",
            Syntax::UnclosedPI | Syntax::UnclosedXmlDecl => {
                "a processing instruction is never closed (no \"?>\")"
            }
            Syntax::UnclosedComment => "a comment is never closed (no \"-->\")",
            Syntax::UnclosedDoctype => "a <!DOCTYPE is never closed",
            Syntax::UnclosedCData => "a CDATA section is never closed (no \"]]>\")",
            Syntax::UnclosedTag => "a tag is never closed (no '>')",
            Syntax::UnclosedSingleQuotedAttributeValue
            | Syntax::UnclosedDoubleQuotedAttributeValue => "an attribute value is never closed",
        }
        .into(),
        quick_xml::Error::IllFormed(Ill::MismatchedEndTag { expected, found }) => {
            format!("an end tag of {} closes {}", shown(found), shown(expected))
        }
        quick_xml::Error::IllFormed(Ill::UnmatchedEndTag(name)) => {
            format!("an end tag of {} closes nothing", shown(name))
        }
        quick_xml::Error::IllFormed(Ill::MissingEndTag(name)) => {
            format!("{} is never closed", shown(name))
        }
        quick_xml::Error::IllFormed(Ill::UnclosedReference) => {
            "a '&' that begins no reference".into()
        }
        quick_xml::Error::IllFormed(Ill::MissingDoctypeName) => "a <!DOCTYPE without a name".into(),
        quick_xml::Error::IllFormed(_) => "an XML declaration that is not XML 1.0's".into(),
        quick_xml::Error::Escape(e) => escape_error(e),
        quick_xml::Error::Encoding(_) => "not UTF-8 text".into(),
        quick_xml::Error::Namespace(_) => "a namespace declaration XML does not allow".into(),
        quick_xml::Error::InvalidAttr(_) | quick_xml::Error::Io(_) => "malformed XML".into(),
    }
}

/// A character reference XML refuses.
const CHAR_REF: &str = "a reference to a character XML cannot hold";

/// What is wrong with a reference.
fn escape_error(e: &EscapeError) -> String {
    match e {
        EscapeError::UnrecognizedEntity(..) => "an unknown entity",
        EscapeError::UnterminatedEntity(_) => "a '&' that begins no reference",
        EscapeError::InvalidCharRef(_) => CHAR_REF,
        EscapeError::TooManyNestedEntities => "entities nested too deep",
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

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

        // Its XSDs, which its source holds but its wheel does not: RINGIO_ASCMHL_XSD names the
        // folder holding them (.ci/run takes it from the source package of ascmhl 1.2).
        let Some(xsd) = std::env::var_os("RINGIO_ASCMHL_XSD").map(PathBuf::from) else {
            skip!("RINGIO_ASCMHL_XSD is not set: no XSD to check the files against");
        };
        let chain = root.join("ascmhl/ascmhl_chain.xml");
        for (file, schema, flags) in [
            (generation_file(&root, 1), "ASCMHL.xsd", &[][..]),
            (generation_file(&root, 2), "ASCMHL.xsd", &[]),
            (chain, "ASCMHLDirectory__combined.xsd", &["-df"]),
        ] {
            let out = ascmhl(&python, "xsd_schema_check", None)
                .arg(&file)
                .arg("-xsd")
                .arg(xsd.join(schema))
                .args(flags)
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && said.contains("validated"),
                "{out:?}"
            );
        }
    }

    /// A command of the reference implementation (`verify`, `create`, `xsd_schema_check`) run
    /// through `python`, its arguments to come, with TZ set (or unset: None).
    fn ascmhl(python: &str, command: &str, tz: Option<&str>) -> std::process::Command {
        let mut cmd = std::process::Command::new(python);
        cmd.arg("-c").arg(format!(
            "import sys\nfrom ascmhl.commands import {command}\n\
             {command}.main(args=sys.argv[1:], standalone_mode=False)"
        ));
        match tz {
            Some(tz) => cmd.env("TZ", tz),
            None => cmd.env_remove("TZ"),
        };
        cmd
    }

    /// Dates are written for the years xs:dateTime writes with four digits, to the last
    /// nanosecond of 9999, and read back.
    #[test]
    fn dates_span_the_years_0000_to_9999() {
        for (secs, nanos, text) in [
            (
                253_402_300_799,
                999_999_999,
                "9999-12-31T23:59:59.999999999Z",
            ),
            (-62_167_219_200, 0, "0000-01-01T00:00:00Z"),
            (951_782_400, 500_000_000, "2000-02-29T00:00:00.5Z"),
            (-1, 1, "1969-12-31T23:59:59.000000001Z"),
        ] {
            assert_eq!(iso_date(secs, nanos).as_deref(), Some(text));
            assert_eq!(parse_date(text), Some((secs, nanos)));
        }
        assert_eq!(iso_date(253_402_300_800, 0), None);
        assert_eq!(iso_date(-62_167_219_201, 0), None);
        assert_eq!(
            parse_date("2019-10-11T18:26:03+05:45"),
            Some((1_570_797_663, 0))
        );
        assert_eq!(
            parse_date("1970-01-01T00:00:00.25-00:30"),
            Some((1800, 250_000_000))
        );
    }
}
