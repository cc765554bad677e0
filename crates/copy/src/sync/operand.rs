//! How a source operand is named, as rsync's sender names it (`send_file_list` in its
//! flist.c): which directory the walk starts from, and which names it puts under DEST. No
//! system call: the spelling alone decides, and every name a source gives an entry under DEST
//! is an [`EntryName`], checked in one place.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// A name an operand gives an entry directly under a destination directory: one path
/// component, never empty, `.` or `..`, without `/` or NUL. Holding one is the proof that the
/// name stays inside the directory it is made in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct EntryName(CString);

impl EntryName {
    /// `None` for a name that would not stay in its directory (or is not a name at all).
    pub fn new(bytes: &[u8]) -> Option<EntryName> {
        let single = !bytes.is_empty()
            && bytes != b"."
            && bytes != b".."
            && !bytes.iter().any(|&b| b == b'/' || b == 0);
        single.then(|| EntryName(CString::new(bytes).expect("checked: no NUL")))
    }

    /// The name, for the walk.
    pub fn into_cstring(self) -> CString {
        self.0
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// A source operand, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Named {
    /// The directory's contents go into DEST, and its attributes to DEST itself: `SRC/`,
    /// `SRC/.`, `SRC/..`, `.`, `..` (rsync appends `/.` to a name ending in `..`); under -R, an
    /// operand whose path below its `/./` is empty or `.`. The path is opened as written, so its
    /// `..` and symlinks resolve as rsync's chdir resolves them.
    Contents(PathBuf),
    /// One entry of a directory, not followed if it is a symlink (`SRC`, `a/b`).
    Entry { dir: PathBuf, name: EntryName },
    /// `-R`: the entry at `parts` below `base` (its path below a `/./`, else all of it, kept
    /// below DEST). The directories on the way are followed if they are symlinks (rsync sends
    /// them as directories); the last part only when `slash` (written `a/b/` or `a/b/.`).
    /// `dot`: the path below `/./` starts with `./`, so the current directory is in the
    /// transfer as `.` (rsync's implied dot dir).
    Relative {
        base: PathBuf,
        parts: Vec<EntryName>,
        slash: bool,
        dot: bool,
    },
}

/// Why an operand cannot be synced as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Unnamed {
    /// `-R` with a `..` in the path kept below DEST: rsync's usage error (exit 1), shown as
    /// rsync shows the path (cleaned).
    DotDot(Vec<u8>),
}

impl std::fmt::Display for Unnamed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unnamed::DotDot(path) => write!(
                f,
                "found \"..\" dir in relative path: {}",
                String::from_utf8_lossy(path)
            ),
        }
    }
}

fn path(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

/// Names `operand` (`relative`: under -R).
pub(super) fn name(operand: &[u8], relative: bool) -> Result<Named, Unnamed> {
    if relative {
        return name_relative(operand);
    }
    let last = operand
        .rsplit(|&b| b == b'/')
        .next()
        .expect("rsplit yields at least one part");
    // A trailing slash, `.` or `..`: the directory's contents (`SRC/.`), never an entry named
    // `.` or `..`.
    if operand.is_empty() || last.is_empty() || last == b"." || last == b".." {
        let dir = if operand.is_empty() { b"." } else { operand };
        return Ok(Named::Contents(path(dir)));
    }
    let name = EntryName::new(last).expect("a last component that is not '', '.' or '..'");
    let dir = match operand.len() - last.len() {
        0 => path(b"."),
        1 => path(b"/"),
        at => path(&operand[..at - 1]),
    };
    Ok(Named::Entry { dir, name })
}

/// -R: the part below the first `/./` (else the whole path; an absolute one below `/`),
/// cleaned as rsync's `clean_fname` cleans it (no empty or `.` components), and refused if it
/// holds a `..`.
fn name_relative(operand: &[u8]) -> Result<Named, Unnamed> {
    let (base, rest, absolute): (&[u8], &[u8], bool) =
        match operand.windows(3).position(|w| w == b"/./") {
            Some(0) => (b"/", &operand[3..], false),
            Some(at) => (&operand[..at], &operand[at + 3..], false),
            None if operand.starts_with(b"/") => (b"/", operand, true),
            None => (b".", operand, false),
        };
    let rest = {
        let mut r = rest;
        while let Some(s) = r.strip_prefix(b"/") {
            r = s;
        }
        r
    };
    let dot = rest.starts_with(b"./") && rest.len() > 2;
    let components: Vec<&[u8]> = rest
        .split(|&b| b == b'/')
        .filter(|p| !p.is_empty() && *p != b".")
        .collect();
    if components.contains(&&b".."[..]) {
        let mut shown = if absolute { b"/".to_vec() } else { Vec::new() };
        shown.extend_from_slice(&components.join(&b'/'));
        return Err(Unnamed::DotDot(shown));
    }
    if components.is_empty() {
        return Ok(Named::Contents(path(base)));
    }
    let last = rest
        .rsplit(|&b| b == b'/')
        .next()
        .expect("rsplit yields at least one part");
    let slash = last.is_empty() || last == b".";
    let parts = components
        .into_iter()
        .map(|c| EntryName::new(c).expect("no '', '.' or '..' component is left"))
        .collect();
    Ok(Named::Relative {
        base: path(base),
        parts,
        slash,
        dot,
    })
}

impl Named {
    /// The path to stat for the operand itself, and whether a symlink there is followed to a
    /// directory (rsync's `link_stat` with `follow_dirlinks`, for every operand but one
    /// named as an entry).
    pub fn stat_path(&self) -> (PathBuf, bool) {
        match self {
            Named::Contents(dir) => (dir.clone(), true),
            Named::Entry { dir, name } => (dir.join(OsStr::from_bytes(name.as_bytes())), false),
            Named::Relative {
                base, parts, slash, ..
            } => {
                let mut p = base.clone();
                for part in parts {
                    p.push(OsStr::from_bytes(part.as_bytes()));
                }
                (p, *slash)
            }
        }
    }

    /// The directory holding the operand's entry, and its name (`None` for a contents
    /// operand), as a single file synced to a new name takes them.
    pub fn entry(&self) -> Option<(PathBuf, EntryName)> {
        match self {
            Named::Contents(_) => None,
            Named::Entry { dir, name } => Some((dir.clone(), name.clone())),
            Named::Relative { base, parts, .. } => {
                let (last, leading) = parts.split_last()?;
                let mut dir = base.clone();
                for part in leading {
                    dir.push(OsStr::from_bytes(part.as_bytes()));
                }
                Some((dir, last.clone()))
            }
        }
    }
}

/// A `--files-from` line as rsync's `sanitize_path` leaves it (the list is read as if SRC were
/// the root): no leading or repeated slashes, every `..` collapsed lexically and none above
/// SRC (`../x` is `x`), `.` components dropped unless `keep_dots` (under -R, where `./` marks
/// rsync's implied dot dir), a trailing slash kept; `.` when nothing is left.
pub fn sanitize_listed(line: &[u8], keep_dots: bool) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::with_capacity(line.len());
    // Where each component copied so far starts, to back up over it for a `..`.
    let mut starts: Vec<usize> = Vec::new();
    let mut parts = line.split(|&b| b == b'/').peekable();
    while let Some(part) = parts.next() {
        let last = parts.peek().is_none();
        match part {
            b"" => continue,
            b"." if !keep_dots => continue,
            b".." => {
                if let Some(start) = starts.pop() {
                    out.truncate(start);
                }
                continue;
            }
            _ => {}
        }
        starts.push(out.len());
        out.extend_from_slice(part);
        // rsync copies a component with the slash that follows it.
        if !last {
            out.push(b'/');
        }
    }
    if out.is_empty() {
        out.push(b'.');
    }
    out
}

/// True when a DEST operand can only name a directory: it ends in `/`, `.` or `..`.
pub(super) fn names_dir(dest: &[u8]) -> bool {
    let last = dest.rsplit(|&b| b == b'/').next().unwrap_or_default();
    last.is_empty() || last == b"." || last == b".."
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(dir: &str, name: &str) -> Named {
        Named::Entry {
            dir: PathBuf::from(dir),
            name: EntryName::new(name.as_bytes()).unwrap(),
        }
    }

    fn contents(dir: &str) -> Named {
        Named::Contents(PathBuf::from(dir))
    }

    fn relative(base: &str, parts: &[&str], slash: bool, dot: bool) -> Named {
        Named::Relative {
            base: PathBuf::from(base),
            parts: parts
                .iter()
                .map(|p| EntryName::new(p.as_bytes()).unwrap())
                .collect(),
            slash,
            dot,
        }
    }

    #[test]
    fn entry_names_never_leave_their_directory() {
        for bad in ["", ".", "..", "a/b", "/", "a/", "/a", "a\0b"] {
            assert_eq!(EntryName::new(bad.as_bytes()), None, "{bad:?}");
        }
        for good in ["a", "...", "..a", ".a", "a..", " ", "-"] {
            assert!(EntryName::new(good.as_bytes()).is_some(), "{good:?}");
        }
    }

    /// rsync 3.2.7's send_file_list, row by row (checked against rsync on real trees by the
    /// integration tests).
    #[test]
    fn operands_without_relative_are_named_as_rsync_names_them() {
        let rows = [
            ("src", entry(".", "src")),
            ("a/b", entry("a", "b")),
            ("a//b", entry("a/", "b")),
            ("/a", entry("/", "a")),
            ("/a/b", entry("/a", "b")),
            ("..a", entry(".", "..a")),
            ("a/...", entry("a", "...")),
            ("src/", contents("src/")),
            ("src//", contents("src//")),
            ("/", contents("/")),
            (".", contents(".")),
            ("./", contents("./")),
            ("..", contents("..")),
            ("../", contents("../")),
            ("..//", contents("..//")),
            ("./..", contents("./..")),
            ("../.", contents("../.")),
            ("../..", contents("../..")),
            ("a/..", contents("a/..")),
            ("a/b/../..", contents("a/b/../..")),
            ("src/.", contents("src/.")),
            ("", contents(".")),
        ];
        for (operand, want) in rows {
            assert_eq!(name(operand.as_bytes(), false), Ok(want), "{operand:?}");
        }
    }

    #[test]
    fn relative_operands_are_named_as_rsync_names_them() {
        let rows = [
            ("src", relative(".", &["src"], false, false)),
            ("src/a/b", relative(".", &["src", "a", "b"], false, false)),
            ("src/./a/b", relative("src", &["a", "b"], false, false)),
            ("src/./a/./b/", relative("src", &["a", "b"], true, false)),
            ("src/./a/b/.", relative("src", &["a", "b"], true, false)),
            ("src//./a", relative("src/", &["a"], false, false)),
            ("src/.//a", relative("src", &["a"], false, false)),
            ("./a", relative(".", &["a"], false, true)),
            ("src/././a", relative("src", &["a"], false, true)),
            ("/./x/y", relative("/", &["x", "y"], false, false)),
            ("/x/y", relative("/", &["x", "y"], false, false)),
            ("src/./a/..b", relative("src", &["a", "..b"], false, false)),
            ("src/./", contents("src")),
            ("src/./.", contents("src")),
            (".", contents(".")),
            ("/", contents("/")),
        ];
        for (operand, want) in rows {
            assert_eq!(name(operand.as_bytes(), true), Ok(want), "{operand:?}");
        }
    }

    /// rsync: `found ".." dir in relative path: PATH` (the path as cleaned), exit 1.
    #[test]
    fn relative_operands_with_dot_dot_are_refused() {
        let rows = [
            ("../x/f", "../x/f"),
            ("src/./a/..", "a/.."),
            ("src/a/./..", ".."),
            ("src/./..", ".."),
            ("src/./../", ".."),
            ("src/./a/b/../b/g", "a/b/../b/g"),
            ("./src/../src/h", "src/../src/h"),
            ("..", ".."),
            ("a/..", "a/.."),
            ("/tmp/../x", "/tmp/../x"),
            ("src/.//./..//x", "../x"),
        ];
        for (operand, shown) in rows {
            assert_eq!(
                name(operand.as_bytes(), true),
                Err(Unnamed::DotDot(shown.as_bytes().to_vec())),
                "{operand:?}"
            );
        }
    }

    /// rsync's sanitize_path(fbuf, fbuf, "", 0, SP_KEEP_DOT_DIRS) on `--files-from` lines.
    #[test]
    fn files_from_lines_are_sanitized_as_rsync_sanitizes_them() {
        let rows = [
            ("x/f", true, "x/f"),
            ("../x/f", true, "x/f"),
            ("x/../x/f", true, "x/f"),
            ("a/../../x/f", true, "x/f"),
            ("..", true, "."),
            ("../", true, "."),
            ("/x//f", true, "x/f"),
            ("d/", true, "d/"),
            ("d/.", true, "d/."),
            ("./a", true, "./a"),
            ("d/./..", true, "d/"),
            ("d/.", false, "d/"),
            ("./a/./b", false, "a/b"),
            (".", true, "."),
            (".", false, "."),
        ];
        for (line, keep, want) in rows {
            assert_eq!(
                String::from_utf8_lossy(&sanitize_listed(line.as_bytes(), keep)),
                want,
                "{line:?} keep_dots={keep}"
            );
        }
    }

    #[test]
    fn a_dest_ending_in_a_dot_component_names_a_directory() {
        for d in ["d/", "d/.", "d/..", ".", "..", "/"] {
            assert!(names_dir(d.as_bytes()), "{d:?}");
        }
        for d in ["d", "d/x", "..d", "d/.x"] {
            assert!(!names_dir(d.as_bytes()), "{d:?}");
        }
    }
}
