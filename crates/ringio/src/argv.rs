//! The command line before clap sees it: the name ringio runs under (`cp` makes it a drop-in
//! for GNU cp), and cp's options read as GNU getopt_long reads them.
//!
//! [`getopt`] walks the arguments as glibc's getopt_long does for GNU cp (long-option
//! prefixes, clustered short options, option arguments in the next word, options after
//! operands unless POSIXLY_CORRECT is set) and reports a bad option in getopt's words. It
//! checks option values that GNU checks with argmatch as it meets them, and hands clap the
//! same options spelled out in full, then `--` and the operands.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::sync::OnceLock;

use crate::argmatch::ValueCheck;

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

/// True when argv[0] names the binary `rsync` (a symlink or hard link to ringio); records the
/// name for [`program`].
pub fn invoked_as_rsync(argv0: Option<&OsStr>) -> bool {
    let as_rsync = argv0
        .and_then(|a| Path::new(a).file_name())
        .is_some_and(|name| name == "rsync");
    if as_rsync {
        let _ = PROGRAM.set("rsync");
    }
    as_rsync
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

/// GNU cp's long options in the order of its option table (9.1's, with 9.2's --debug), which
/// is the order getopt lists the possibilities of an ambiguous prefix in. A prefix that fits
/// one of them means it even where ringio's own options share the prefix (`--b` is
/// `--backup`, not `--bs`).
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

/// Whether an option takes an argument, in getopt's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HasArg {
    /// A flag.
    No,
    /// `--opt=VALUE`, `--opt VALUE`, `-oVALUE`, `-o VALUE`.
    Required,
    /// `--opt` or `--opt=VALUE` only.
    Optional,
}

/// A long option name and what it means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongOption {
    /// The name after `--`.
    pub name: String,
    pub has_arg: HasArg,
    /// The clap argument it sets; names with the same id are synonyms (`--path`, `--parents`).
    pub id: String,
}

/// A short option letter and what it means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShortOption {
    pub letter: u8,
    pub has_arg: HasArg,
    /// The clap argument it sets.
    pub id: String,
    /// Its long name, how it is handed to clap when it has a value.
    pub long: Option<String>,
}

/// The options getopt knows: GNU cp's long options (in GNU's order), ringio's own, and the
/// short letters.
#[derive(Debug, Clone, Default)]
pub struct OptionTable {
    pub gnu: Vec<LongOption>,
    pub ours: Vec<LongOption>,
    pub shorts: Vec<ShortOption>,
}

impl OptionTable {
    /// The options of a clap command. `gnu_letters_only`: run as `cp`, where GNU's getopt
    /// knows no -h or -V.
    pub fn from_command(cmd: &clap::Command, gnu_letters_only: bool) -> OptionTable {
        let mut cmd = cmd.clone();
        // Built, so that --help and --version are among its arguments.
        cmd.build();
        let mut longs: Vec<LongOption> = Vec::new();
        let mut shorts = Vec::new();
        for arg in cmd.get_arguments() {
            let takes = arg.get_action().takes_values();
            let optional = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
            let has_arg = match (takes, optional) {
                (false, _) => HasArg::No,
                (true, true) => HasArg::Optional,
                (true, false) => HasArg::Required,
            };
            let id = arg.get_id().as_str().to_string();
            for name in arg
                .get_long()
                .into_iter()
                .chain(arg.get_all_aliases().unwrap_or_default())
            {
                longs.push(LongOption {
                    name: name.to_string(),
                    has_arg,
                    id: id.clone(),
                });
            }
            let letters = arg
                .get_short()
                .into_iter()
                .chain(arg.get_all_short_aliases().unwrap_or_default());
            for letter in letters {
                if gnu_letters_only && matches!(letter, 'h' | 'V') {
                    continue;
                }
                let Ok(letter) = u8::try_from(letter) else {
                    continue;
                };
                shorts.push(ShortOption {
                    letter,
                    // GNU cp's short options take an argument or none (-Z and -u none).
                    has_arg: if has_arg == HasArg::Required {
                        HasArg::Required
                    } else {
                        HasArg::No
                    },
                    id: id.clone(),
                    long: arg.get_long().map(String::from),
                });
            }
        }
        let gnu = GNU_CP_LONG
            .iter()
            .filter_map(|name| longs.iter().find(|l| l.name == *name).cloned())
            .collect();
        let ours = longs
            .into_iter()
            .filter(|l| !GNU_CP_LONG.contains(&l.name.as_str()))
            .collect();
        OptionTable { gnu, ours, shorts }
    }

    /// The long option `name` means, as getopt_long picks it: an exact name, else the options
    /// it is a prefix of: GNU's first, then ringio's own.
    fn long(&self, name: &[u8], body: &[u8]) -> Result<&LongOption, Vec<u8>> {
        let all = || self.gnu.iter().chain(&self.ours);
        if let Some(exact) = all().find(|o| o.name.as_bytes() == name) {
            return Ok(exact);
        }
        for table in [&self.gnu, &self.ours] {
            let mut found: Option<&LongOption> = None;
            let mut ambiguous = false;
            let mut possibilities = Vec::new();
            for option in table.iter().filter(|o| o.name.as_bytes().starts_with(name)) {
                match found {
                    None => {
                        found = Some(option);
                        possibilities.push(option);
                    }
                    // Synonyms (--parents, --path) are one option to getopt.
                    Some(first) if first.id == option.id && first.has_arg == option.has_arg => {}
                    Some(_) => {
                        ambiguous = true;
                        possibilities.push(option);
                    }
                }
            }
            match found {
                Some(_) if ambiguous => {
                    let mut msg = b"option '--".to_vec();
                    msg.extend_from_slice(body);
                    msg.extend_from_slice(b"' is ambiguous; possibilities:");
                    for option in possibilities {
                        msg.extend_from_slice(format!(" '--{}'", option.name).as_bytes());
                    }
                    return Err(msg);
                }
                Some(option) => return Ok(option),
                None => {}
            }
        }
        let mut msg = b"unrecognized option '--".to_vec();
        msg.extend_from_slice(body);
        msg.push(b'\'');
        Err(msg)
    }
}

/// Reads `args` (the words after the program or subcommand name) as getopt_long does with
/// `table`, checks values as `check` says for each option id, and returns them for clap:
/// every option spelled in full (`--name=VALUE`, short letters one to a word), then `--` and
/// the operands. `--help` and `--version` end the reading, as they end GNU cp. An error is
/// getopt's or argmatch's message, without the program name.
pub fn getopt(
    args: Vec<OsString>,
    table: &OptionTable,
    check: &dyn Fn(&str) -> Option<ValueCheck>,
) -> Result<Vec<OsString>, Vec<u8>> {
    let in_order = std::env::var_os("POSIXLY_CORRECT").is_some();
    let mut options: Vec<OsString> = Vec::new();
    let mut operands: Vec<OsString> = Vec::new();
    let mut words = args.into_iter().map(OsString::into_vec);
    let emit =
        |options: &mut Vec<OsString>, spelled: Vec<u8>| options.push(OsString::from_vec(spelled));
    while let Some(word) = words.next() {
        if word == b"--" {
            operands.extend(words.by_ref().map(OsString::from_vec));
            break;
        }
        if word.len() < 2 || word[0] != b'-' {
            operands.push(OsString::from_vec(word));
            if in_order {
                operands.extend(words.by_ref().map(OsString::from_vec));
                break;
            }
            continue;
        }
        if let Some(body) = word.strip_prefix(b"--") {
            let (name, attached) = match body.iter().position(|&b| b == b'=') {
                Some(eq) => (&body[..eq], Some(&body[eq + 1..])),
                None => (body, None),
            };
            let option = table.long(name, body)?;
            let value = match (option.has_arg, attached) {
                (HasArg::No, Some(_)) => {
                    return Err(
                        format!("option '--{}' doesn't allow an argument", option.name)
                            .into_bytes(),
                    )
                }
                (HasArg::No | HasArg::Optional, None) => None,
                (_, Some(v)) => Some(v.to_vec()),
                (HasArg::Required, None) => match words.next() {
                    Some(v) => Some(v),
                    None => {
                        return Err(
                            format!("option '--{}' requires an argument", option.name).into_bytes()
                        )
                    }
                },
            };
            if matches!(option.id.as_str(), "help" | "version") {
                return Ok(vec![OsString::from(format!("--{}", option.name))]);
            }
            let value = value.map(|v| checked(&option.id, v, check)).transpose()?;
            let mut spelled = format!("--{}", option.name).into_bytes();
            if let Some(v) = value {
                spelled.push(b'=');
                spelled.extend_from_slice(&v);
            }
            emit(&mut options, spelled);
            continue;
        }
        let mut rest = &word[1..];
        while let Some((&letter, after)) = rest.split_first() {
            rest = after;
            let Some(option) = table.shorts.iter().find(|o| o.letter == letter) else {
                let mut msg = b"invalid option -- '".to_vec();
                msg.extend_from_slice(&[letter, b'\'']);
                return Err(msg);
            };
            if matches!(option.id.as_str(), "help" | "version") {
                return Ok(vec![OsString::from_vec(vec![b'-', letter])]);
            }
            if option.has_arg == HasArg::No {
                emit(&mut options, vec![b'-', letter]);
                continue;
            }
            let value = if rest.is_empty() {
                match words.next() {
                    Some(v) => v,
                    None => {
                        let mut msg = b"option requires an argument -- '".to_vec();
                        msg.extend_from_slice(&[letter, b'\'']);
                        return Err(msg);
                    }
                }
            } else {
                std::mem::take(&mut rest).to_vec()
            };
            let value = checked(&option.id, value, check)?;
            let mut spelled = match &option.long {
                Some(long) => format!("--{long}=").into_bytes(),
                None => vec![b'-', letter],
            };
            spelled.extend_from_slice(&value);
            emit(&mut options, spelled);
        }
    }
    options.push(OsString::from("--"));
    options.extend(operands);
    Ok(options)
}

/// The value of option `id`, with every argmatch argument in it written in full.
fn checked(
    id: &str,
    value: Vec<u8>,
    check: &dyn Fn(&str) -> Option<ValueCheck>,
) -> Result<Vec<u8>, Vec<u8>> {
    match check(id) {
        None => Ok(value),
        Some(values) => values.expand(&value).map_err(String::into_bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argmatch::Choices;

    fn long(name: &str, has_arg: HasArg, id: &str) -> LongOption {
        LongOption {
            name: name.into(),
            has_arg,
            id: id.into(),
        }
    }

    fn short(letter: u8, has_arg: HasArg, id: &str, long: Option<&str>) -> ShortOption {
        ShortOption {
            letter,
            has_arg,
            id: id.into(),
            long: long.map(String::from),
        }
    }

    /// Part of cp's table: enough for every rule.
    fn table() -> OptionTable {
        OptionTable {
            gnu: vec![
                long("backup", HasArg::Optional, "backup"),
                long("parents", HasArg::No, "parents"),
                long("path", HasArg::No, "parents"),
                long("preserve", HasArg::Optional, "preserve"),
                long("sparse", HasArg::Required, "sparse"),
                long("suffix", HasArg::Required, "suffix"),
                long("verbose", HasArg::No, "verbose"),
                long("help", HasArg::No, "help"),
                long("version", HasArg::No, "version"),
            ],
            ours: vec![
                long("bs", HasArg::Required, "bs"),
                long("progress", HasArg::No, "progress"),
                long("ring-only", HasArg::No, "ring_only"),
                long("reflink-x", HasArg::No, "rx"),
                long("reflink-y", HasArg::No, "ry"),
            ],
            shorts: vec![
                short(b'v', HasArg::No, "verbose", Some("verbose")),
                short(b'p', HasArg::No, "preserve_default", None),
                short(b'S', HasArg::Required, "suffix", Some("suffix")),
                short(b't', HasArg::Required, "target", None),
            ],
        }
    }

    fn check(id: &str) -> Option<ValueCheck> {
        match id {
            "sparse" => Some(ValueCheck::One(Choices::distinct(
                "--sparse",
                &["never", "auto", "always"],
            ))),
            "preserve" => Some(ValueCheck::List(Choices::distinct(
                "--preserve",
                &["mode", "timestamps"],
            ))),
            _ => None,
        }
    }

    fn parse(args: &[&str]) -> Result<Vec<String>, String> {
        getopt(args.iter().map(OsString::from).collect(), &table(), &check)
            .map(|out| out.into_iter().map(|a| a.into_string().unwrap()).collect())
            .map_err(|e| String::from_utf8(e).unwrap())
    }

    #[test]
    fn long_options_as_getopt_reads_them() {
        assert_eq!(parse(&["--b", "a"]).unwrap(), ["--backup", "--", "a"]);
        assert_eq!(parse(&["--bs", "4k"]).unwrap(), ["--bs=4k", "--"]);
        // Synonyms are one option: --pa is --parents, not ambiguous with --path.
        assert_eq!(parse(&["--pa"]).unwrap(), ["--parents", "--"]);
        assert_eq!(parse(&["--pres=mo"]).unwrap(), ["--preserve=mode", "--"]);
        assert_eq!(
            parse(&["--pres", "mode"]).unwrap(),
            ["--preserve", "--", "mode"]
        );
        assert_eq!(parse(&["--ring"]).unwrap(), ["--ring-only", "--"]);
        assert_eq!(parse(&["--suffix", "-x"]).unwrap(), ["--suffix=-x", "--"]);
        assert_eq!(parse(&["--sp=al"]).unwrap(), ["--sparse=always", "--"]);
        // Options after operands are options; `--` ends them.
        assert_eq!(
            parse(&["a", "-v", "b", "--", "-v"]).unwrap(),
            ["-v", "--", "a", "b", "-v"]
        );
        assert_eq!(parse(&["-", "x"]).unwrap(), ["--", "-", "x"]);
        // --help ends the reading, whatever follows.
        assert_eq!(parse(&["--he", "--bogus"]).unwrap(), ["--help"]);
    }

    #[test]
    fn short_options_as_getopt_reads_them() {
        assert_eq!(parse(&["-vp"]).unwrap(), ["-v", "-p", "--"]);
        assert_eq!(parse(&["-vS.bak"]).unwrap(), ["-v", "--suffix=.bak", "--"]);
        assert_eq!(parse(&["-S", ""]).unwrap(), ["--suffix=", "--"]);
        assert_eq!(parse(&["-t", "--"]).unwrap(), ["-t--", "--"]);
    }

    #[test]
    fn errors_in_getopts_words() {
        let err = |args: &[&str]| parse(args).unwrap_err();
        assert_eq!(err(&["--bogus"]), "unrecognized option '--bogus'");
        assert_eq!(err(&["--bogus=x"]), "unrecognized option '--bogus=x'");
        assert_eq!(
            err(&["--p=x"]),
            "option '--p=x' is ambiguous; possibilities: '--parents' '--preserve'"
        );
        assert_eq!(
            err(&["--v"]),
            "option '--v' is ambiguous; possibilities: '--verbose' '--version'"
        );
        // Ambiguous among ringio's own options only.
        assert_eq!(
            err(&["--reflink-"]),
            "option '--reflink-' is ambiguous; possibilities: '--reflink-x' '--reflink-y'"
        );
        assert_eq!(
            err(&["--verb=x"]),
            "option '--verbose' doesn't allow an argument"
        );
        assert_eq!(err(&["--suf"]), "option '--suffix' requires an argument");
        assert_eq!(err(&["-k"]), "invalid option -- 'k'");
        assert_eq!(err(&["-vk"]), "invalid option -- 'k'");
        assert_eq!(err(&["-S"]), "option requires an argument -- 'S'");
        assert!(err(&["--sparse=a"]).starts_with("ambiguous argument 'a' for '--sparse'\n"));
        assert!(err(&["--preserve=mode,"]).starts_with("ambiguous argument '' for '--preserve'"));
        // The first error in the order of the arguments is the one reported.
        assert_eq!(
            err(&["--sparse=x", "--bogus"]).lines().next().unwrap(),
            "invalid argument 'x' for '--sparse'"
        );
        assert_eq!(
            err(&["--bogus", "--sparse=x"]),
            "unrecognized option '--bogus'"
        );
    }

    #[test]
    fn the_name_decides() {
        assert!(invoked_as_cp(Some(OsStr::new("/usr/local/bin/cp"))));
        assert!(!invoked_as_cp(Some(OsStr::new("cpx"))));
    }
}
