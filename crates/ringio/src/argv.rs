//! The command line before clap sees it: the name ringio runs under (`cp` makes it a drop-in
//! for GNU cp) and getopt's long-option prefixes.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;

/// `cp --version`: what it is, and the GNU cp whose options, messages and exit codes it
/// follows.
pub const CP_VERSION: &str = concat!(
    "(ringio) ",
    env!("CARGO_PKG_VERSION"),
    "\nA drop-in for cp (GNU coreutils) 9.1: its options, messages and exit codes."
);

static PROGRAM: OnceLock<&'static str> = OnceLock::new();

/// The name messages start with: `cp` when run under that name, else `ringio`.
pub fn program() -> &'static str {
    PROGRAM.get().copied().unwrap_or("ringio")
}

/// True when argv[0] names the binary `cp` (a symlink or hard link to ringio); records the
/// name for [`program`].
pub fn invoked_as_cp(argv0: Option<&OsStr>) -> bool {
    let as_cp = argv0
        .and_then(|a| Path::new(a).file_name())
        .is_some_and(|name| name == "cp");
    let _ = PROGRAM.set(if as_cp { "cp" } else { "ringio" });
    as_cp
}

/// GNU cp 9.1's long options (and 9.2's --debug). A prefix that fits exactly one of them means it, as getopt_long
/// reads it, even where ringio's own options share the prefix (`--b` is `--backup`, not
/// `--bs`).
const GNU_CP_LONG: &[&str] = &[
    "archive",
    "attributes-only",
    "backup",
    "copy-contents",
    "debug",
    "dereference",
    "force",
    "interactive",
    "link",
    "no-clobber",
    "no-dereference",
    "no-preserve",
    "no-target-directory",
    "one-file-system",
    "parents",
    "path",
    "preserve",
    "recursive",
    "remove-destination",
    "sparse",
    "reflink",
    "strip-trailing-slashes",
    "suffix",
    "symbolic-link",
    "target-directory",
    "update",
    "verbose",
    "context",
    "help",
    "version",
];

/// Expands unambiguous long-option prefixes (`--parent`, `--pres=mode`) to the full name, as
/// getopt_long does: an exact name wins, then a prefix of exactly one GNU cp option, then a
/// prefix of exactly one of `all` (ringio's own options included). Anything else is left for
/// clap to report. Arguments after `--` are operands and stay as they are.
pub fn expand_long_prefixes(args: Vec<OsString>, all: &[String]) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut operands = false;
    for arg in args {
        let bytes = arg.as_bytes();
        if operands || !bytes.starts_with(b"--") || bytes.len() == 2 {
            operands |= bytes == b"--";
            out.push(arg);
            continue;
        }
        let body = &bytes[2..];
        let (name, value) = match body.iter().position(|&b| b == b'=') {
            Some(eq) => (&body[..eq], Some(&body[eq..])),
            None => (body, None),
        };
        let exact = |n: &str| n.as_bytes() == name;
        let prefix = |n: &&str| n.as_bytes().starts_with(name);
        let full = if all.iter().any(|n| exact(n)) || GNU_CP_LONG.iter().any(|n| exact(n)) {
            None
        } else {
            let gnu: Vec<&str> = GNU_CP_LONG.iter().copied().filter(prefix).collect();
            let ours: Vec<&str> = all.iter().map(String::as_str).filter(prefix).collect();
            match (gnu.as_slice(), ours.as_slice()) {
                ([one], _) | ([], [one]) => Some(*one),
                _ => None,
            }
        };
        match full {
            Some(full) => {
                let mut expanded = b"--".to_vec();
                expanded.extend_from_slice(full.as_bytes());
                expanded.extend_from_slice(value.unwrap_or_default());
                out.push(OsString::from(OsStr::from_bytes(&expanded)));
            }
            None => out.push(arg),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(args: &[&str]) -> Vec<String> {
        let ours = [
            "bs",
            "backup",
            "preserve",
            "progress",
            "parents",
            "ring-only",
        ]
        .map(String::from);
        expand_long_prefixes(args.iter().map(OsString::from).collect(), &ours)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn prefixes_as_getopt_reads_them() {
        assert_eq!(expand(&["--b"]), ["--backup"]);
        assert_eq!(expand(&["--bs"]), ["--bs"]);
        assert_eq!(expand(&["--parent"]), ["--parents"]);
        assert_eq!(expand(&["--pres=mode"]), ["--preserve=mode"]);
        // Ambiguous among GNU's own (--preserve, --parents, --path): left for clap.
        assert_eq!(expand(&["--p"]), ["--p"]);
        assert_eq!(expand(&["--ring"]), ["--ring-only"]);
        assert_eq!(expand(&["--", "--b"]), ["--", "--b"]);
        assert_eq!(expand(&["-b", "x"]), ["-b", "x"]);
    }

    #[test]
    fn the_name_decides() {
        assert!(invoked_as_cp(Some(OsStr::new("/usr/local/bin/cp"))));
        assert!(!invoked_as_cp(Some(OsStr::new("cpx"))));
    }
}
