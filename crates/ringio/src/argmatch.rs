//! gnulib's argmatch, as GNU cp checks option values with it: any unambiguous prefix of a valid
//! argument names it, and a wrong one is reported as `invalid argument 'x' for '--sparse'` (or
//! `ambiguous argument`) with the list of valid arguments, synonyms on one line.

/// The valid arguments of one option, in the order GNU lists them. Each has a meaning number:
/// arguments of equal meaning are synonyms (`none` and `off`), so a prefix of both is no
/// ambiguity, and the list prints them on one line.
#[derive(Debug, Clone)]
pub struct Choices {
    /// How a failure names the option: `--sparse`, `backup type`, `$VERSION_CONTROL`.
    pub context: &'static str,
    /// Each valid argument and its meaning.
    pub args: Vec<(&'static str, usize)>,
}

/// Why a value matched no argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// A prefix of no valid argument.
    Invalid,
    /// A prefix of several arguments of different meanings.
    Ambiguous,
}

impl Choices {
    /// Choices where every argument has a meaning of its own.
    pub fn distinct(context: &'static str, names: &[&'static str]) -> Choices {
        Choices {
            context,
            args: names.iter().copied().zip(0..).collect(),
        }
    }

    /// The index of the argument `value` names: an exact match, else the one argument (or
    /// synonyms) that it is a prefix of.
    pub fn find(&self, value: &[u8]) -> Result<usize, Problem> {
        let mut first_prefix: Option<usize> = None;
        let mut ambiguous = false;
        for (i, (name, meaning)) in self.args.iter().enumerate() {
            if !name.as_bytes().starts_with(value) {
                continue;
            }
            if name.len() == value.len() {
                return Ok(i);
            }
            match first_prefix {
                None => first_prefix = Some(i),
                Some(first) => ambiguous |= self.args[first].1 != *meaning,
            }
        }
        match (first_prefix, ambiguous) {
            (Some(i), false) => Ok(i),
            (Some(_), true) => Err(Problem::Ambiguous),
            (None, _) => Err(Problem::Invalid),
        }
    }

    /// The full name `value` stands for.
    pub fn expand(&self, value: &[u8]) -> Result<&'static str, String> {
        self.find(value)
            .map(|i| self.args[i].0)
            .map_err(|problem| self.failure(value, problem))
    }

    /// argmatch's report of a bad value, without the program name: the complaint, then
    /// `Valid arguments are:` and one line per meaning.
    pub fn failure(&self, value: &[u8], problem: Problem) -> String {
        let what = match problem {
            Problem::Invalid => "invalid",
            Problem::Ambiguous => "ambiguous",
        };
        let mut text = format!(
            "{what} argument {} for {}\nValid arguments are:",
            quote(value),
            quote(self.context.as_bytes())
        );
        let mut last_meaning = None;
        for (name, meaning) in &self.args {
            let name = quote(name.as_bytes());
            if last_meaning == Some(*meaning) {
                text.push_str(&format!(", {name}"));
            } else {
                text.push_str(&format!("\n  - {name}"));
                last_meaning = Some(*meaning);
            }
        }
        text
    }
}

/// How an option's value is checked: as one argument, or (`--preserve`) as a comma-separated
/// list of them, each checked on its own.
#[derive(Debug, Clone)]
pub enum ValueCheck {
    One(Choices),
    List(Choices),
}

impl ValueCheck {
    /// `value` with every argument in it written in full, or argmatch's report of the first
    /// bad one.
    pub fn expand(&self, value: &[u8]) -> Result<Vec<u8>, String> {
        match self {
            ValueCheck::One(choices) => choices.expand(value).map(|full| full.as_bytes().to_vec()),
            ValueCheck::List(choices) => {
                let mut full = Vec::with_capacity(value.len());
                for (i, item) in value.split(|&b| b == b',').enumerate() {
                    if i > 0 {
                        full.push(b',');
                    }
                    full.extend_from_slice(choices.expand(item)?.as_bytes());
                }
                Ok(full)
            }
        }
    }
}

/// A value as argmatch quotes it (gnulib's locale quoting). In the C locale: in single quotes,
/// with a backslash before a quote or a backslash, C escapes for control characters, and octal
/// for bytes beyond ASCII. In a UTF-8 locale: in curly quotes, printable characters as they
/// are (quotes and backslashes included).
pub fn quote(value: &[u8]) -> String {
    if curly_quotes() {
        let mut out = String::from("\u{2018}");
        for chunk in value.utf8_chunks() {
            for c in chunk.valid().chars() {
                match u8::try_from(c) {
                    Ok(b) if b.is_ascii_control() => push_escape(&mut out, b),
                    _ if c.is_control() => {
                        let mut bytes = [0; 4];
                        for &b in c.encode_utf8(&mut bytes).as_bytes() {
                            push_escape(&mut out, b);
                        }
                    }
                    _ => out.push(c),
                }
            }
            for &b in chunk.invalid() {
                push_escape(&mut out, b);
            }
        }
        out.push('\u{2019}');
        return out;
    }
    let mut out = String::from("'");
    for &b in value {
        match b {
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => push_escape(&mut out, b),
        }
    }
    out.push('\'');
    out
}

/// Whether values are quoted for a UTF-8 locale. The unit tests check the C locale's text
/// whatever locale they run in; the integration tests run the binary in both.
fn curly_quotes() -> bool {
    !cfg!(test) && ringio_copy::quote::utf8_locale()
}

/// One byte as a C escape: a letter for the usual control characters, octal otherwise.
fn push_escape(out: &mut String, b: u8) {
    match b {
        0x07 => out.push_str("\\a"),
        0x08 => out.push_str("\\b"),
        0x0c => out.push_str("\\f"),
        b'\n' => out.push_str("\\n"),
        b'\r' => out.push_str("\\r"),
        b'\t' => out.push_str("\\t"),
        0x0b => out.push_str("\\v"),
        _ => out.push_str(&format!("\\{b:03o}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_as_argmatch_reads_them() {
        let sparse = Choices::distinct("--sparse", &["never", "auto", "always"]);
        assert_eq!(sparse.expand(b"al"), Ok("always"));
        assert_eq!(sparse.expand(b"auto"), Ok("auto"));
        assert_eq!(sparse.expand(b"n"), Ok("never"));
        assert_eq!(sparse.find(b"a"), Err(Problem::Ambiguous));
        assert_eq!(sparse.find(b""), Err(Problem::Ambiguous));
        assert_eq!(sparse.find(b"autox"), Err(Problem::Invalid));
        assert_eq!(sparse.find(b"x"), Err(Problem::Invalid));
        // An exact match wins over being the prefix of a longer name.
        let exact = Choices::distinct("--x", &["ab", "a"]);
        assert_eq!(exact.expand(b"a"), Ok("a"));
        // A prefix of synonyms only is no ambiguity.
        let synonyms = Choices {
            context: "--y",
            args: vec![("offline", 0), ("off", 0), ("on", 1)],
        };
        assert_eq!(synonyms.expand(b"of"), Ok("offline"));
    }

    #[test]
    fn failures_read_as_gnu_prints_them() {
        let preserve = Choices::distinct(
            "--preserve",
            &[
                "mode",
                "timestamps",
                "ownership",
                "links",
                "context",
                "xattr",
                "all",
            ],
        );
        assert_eq!(
            preserve.expand(b"foo").unwrap_err(),
            "invalid argument 'foo' for '--preserve'\nValid arguments are:\n  - 'mode'\n  - \
             'timestamps'\n  - 'ownership'\n  - 'links'\n  - 'context'\n  - 'xattr'\n  - 'all'"
        );
        assert!(preserve
            .expand(b"")
            .unwrap_err()
            .starts_with("ambiguous argument '' for '--preserve'\n"));
    }

    #[test]
    fn lists_are_checked_item_by_item() {
        let list = ValueCheck::List(Choices::distinct("--preserve", &["mode", "timestamps"]));
        assert_eq!(list.expand(b"mo,time").unwrap(), b"mode,timestamps");
        // An empty item, as GNU splits the list, is a prefix of every argument.
        assert!(list
            .expand(b"mode,")
            .unwrap_err()
            .starts_with("ambiguous argument '' for '--preserve'"));
        assert!(list
            .expand(b"mode,x")
            .unwrap_err()
            .starts_with("invalid argument 'x' for '--preserve'"));
        let one = ValueCheck::One(Choices::distinct("--sparse", &["never", "auto", "always"]));
        assert_eq!(one.expand(b"nev").unwrap(), b"never");
        assert!(one.expand(b"a,b").is_err());
    }

    #[test]
    fn values_quoted_as_in_the_c_locale() {
        assert_eq!(quote(b"a'b"), r"'a\'b'");
        assert_eq!(quote(b"a\nb"), r"'a\nb'");
        assert_eq!(quote(b"a b"), "'a b'");
        assert_eq!(quote("é".as_bytes()), r"'\303\251'");
        assert_eq!(quote(b"a\\b"), r"'a\\b'");
        assert_eq!(quote(b"\"x\""), "'\"x\"'");
        assert_eq!(quote(b"\t\x7f"), r"'\t\177'");
    }
}
