//! File names in messages, quoted as GNU cp quotes them.
//!
//! GNU cp prints every file name through gnulib's `quoteaf`, the *shell-escape-always* style:
//! the name in single quotes, a single quote as `'\''`, and a byte that would not print as
//! `$'\n'` or `$'\377'`, so that a message can be pasted back into a shell and names the same
//! file. A name whose only troublesome character is a single quote, and whose other characters
//! all read the same in C and in shell double quotes, is put in double quotes instead
//! (`"it's"`). Non-UTF-8 names come out as their raw bytes, escaped, never as U+FFFD.
//!
//! Which bytes print depends on the locale's character set, as for GNU: in a UTF-8 locale a
//! valid, printable multibyte character is written as it is; in the C locale every byte above
//! 0x7f is escaped. `quote` reads `LC_ALL`, `LC_CTYPE` and `LANG` once, as setlocale would.
//!
//! One case differs on purpose: gnulib 9.1's quoting restarts when a name holds a single quote
//! and a character that must be escaped, and the restart keeps a flag from the first pass.
//! That adds a stray `''` in front (harmless), or, when the name starts with such a character,
//! drops the `$'` before it, so that the printed text names another file. ringio prints the
//! quoting the first pass would have printed, which is always a correct shell word.

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;

/// A name that prints quoted: `format!("cannot stat {}", quote(path))`.
#[derive(Debug, Clone, Copy)]
pub struct Quoted<'a> {
    bytes: &'a [u8],
    utf8: bool,
}

/// Quotes `name` as GNU cp's messages do, for the locale of this process.
pub fn quote<S: AsRef<OsStr> + ?Sized>(name: &S) -> Quoted<'_> {
    Quoted {
        bytes: name.as_ref().as_bytes(),
        utf8: utf8_locale(),
    }
}

/// Quotes a path; the same as [`quote`], for call sites that hold a `Path`.
pub fn quote_path(path: &Path) -> Quoted<'_> {
    quote(path.as_os_str())
}

/// True when the locale's character set is UTF-8: the first of `LC_ALL`, `LC_CTYPE` and `LANG`
/// that is set and not empty names it (`C.UTF-8`, `en_US.utf8`).
pub fn utf8_locale() -> bool {
    static UTF8: OnceLock<bool> = OnceLock::new();
    *UTF8.get_or_init(|| {
        let locale = ["LC_ALL", "LC_CTYPE", "LANG"]
            .iter()
            .filter_map(std::env::var_os)
            .find(|value| !value.is_empty())
            .unwrap_or_default();
        let locale = locale.to_string_lossy().to_ascii_lowercase();
        locale.contains("utf-8") || locale.contains("utf8")
    })
}

/// One piece of a name: how it must be written inside the quotes.
enum Piece<'a> {
    /// Bytes that print as they are: an ASCII character or a printable multibyte one.
    Plain(&'a [u8], bool),
    /// A byte that must be escaped (`\n`, `\377`).
    Escaped(u8),
    /// A single quote.
    Quote,
}

impl Piece<'_> {
    /// Whether the piece reads the same in C and in shell double quotes, so that a name made of
    /// such pieces can be double-quoted.
    fn double_quotable(&self) -> bool {
        match *self {
            Piece::Plain(_, compatible) => compatible,
            Piece::Escaped(_) => false,
            Piece::Quote => true,
        }
    }
}

/// Splits `bytes` into pieces, one per character.
fn pieces(bytes: &[u8], utf8: bool) -> impl Iterator<Item = Piece<'_>> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        let (&first, tail) = rest.split_first()?;
        if first == b'\'' {
            rest = tail;
            return Some(Piece::Quote);
        }
        if first.is_ascii() {
            let (character, tail) = rest.split_at(1);
            rest = tail;
            return Some(if (0x20..0x7f).contains(&first) {
                Piece::Plain(character, double_quote_compatible(first))
            } else {
                Piece::Escaped(first)
            });
        }
        if utf8 {
            if let Some(len) = printable_utf8_len(rest) {
                let (character, tail) = rest.split_at(len);
                rest = tail;
                return Some(Piece::Plain(character, true));
            }
        }
        rest = tail;
        Some(Piece::Escaped(first))
    })
}

/// The ASCII characters gnulib treats as the same inside C and shell double quotes.
fn double_quote_compatible(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b" %+,-.:@]_/".contains(&byte)
}

/// The length of the valid, printable UTF-8 character at the start of `bytes`, if there is one.
fn printable_utf8_len(bytes: &[u8]) -> Option<usize> {
    let len = match bytes[0] {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return None,
    };
    let character = std::str::from_utf8(bytes.get(..len)?)
        .ok()?
        .chars()
        .next()?;
    (!character.is_control()).then_some(len)
}

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let has_quote = self.bytes.contains(&b'\'');
        if has_quote && pieces(self.bytes, self.utf8).all(|piece| piece.double_quotable()) {
            // Only double-quote-safe characters: no byte needs escaping inside "...".
            f.write_str("\"")?;
            write_raw(f, self.bytes)?;
            return f.write_str("\"");
        }
        let mut in_dollar = false;
        f.write_str("'")?;
        for piece in pieces(self.bytes, self.utf8) {
            match piece {
                Piece::Plain(text, _) => {
                    if in_dollar {
                        // Close $'...' and open '...' again.
                        f.write_str("''")?;
                        in_dollar = false;
                    }
                    write_raw(f, text)?;
                }
                Piece::Escaped(byte) => {
                    if !in_dollar {
                        f.write_str("'$'")?;
                        in_dollar = true;
                    }
                    write_escape(f, byte)?;
                }
                Piece::Quote => {
                    // The first quote closes whichever quoting is open.
                    f.write_str("'\\''")?;
                    in_dollar = false;
                }
            }
        }
        f.write_str("'")
    }
}

/// Writes bytes known to be ASCII or valid UTF-8.
fn write_raw(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    match std::str::from_utf8(bytes) {
        Ok(text) => f.write_str(text),
        // Unreachable by construction; escape rather than lose a byte.
        Err(_) => bytes.iter().try_for_each(|&byte| write_escape(f, byte)),
    }
}

/// Writes one byte as C escapes it inside `$'...'`.
fn write_escape(f: &mut fmt::Formatter<'_>, byte: u8) -> fmt::Result {
    let letter = match byte {
        0x07 => 'a',
        0x08 => 'b',
        0x0c => 'f',
        b'\n' => 'n',
        b'\r' => 'r',
        b'\t' => 't',
        0x0b => 'v',
        _ => return write!(f, "\\{byte:03o}"),
    };
    write!(f, "\\{letter}")
}

/// An io::Error's text without Rust's " (os error N)" tail, as cp prints reasons.
pub fn reason(err: &io::Error) -> impl fmt::Display + '_ {
    struct Reason<'a>(&'a io::Error);
    impl fmt::Display for Reason<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let text = self.0.to_string();
            match text.rfind(" (os error ") {
                Some(cut) => f.write_str(&text[..cut]),
                None => f.write_str(&text),
            }
        }
    }
    Reason(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(bytes: &[u8], utf8: bool) -> String {
        Quoted { bytes, utf8 }.to_string()
    }

    /// GNU's `ls --quoting-style=shell-escape-always` (the same gnulib function as cp's
    /// messages), coreutils 9.1, in C.UTF-8 and C.
    #[test]
    fn names_quote_as_gnu_quotes_them() {
        let cases: &[(&[u8], &str, &str)] = &[
            (b"f", "'f'", "'f'"),
            (b"", "''", "''"),
            (b"a b", "'a b'", "'a b'"),
            (b"it's", "\"it's\"", "\"it's\""),
            (b"'", "\"'\"", "\"'\""),
            (b"''", "\"''\"", "\"''\""),
            (b"a'b c", "\"a'b c\"", "\"a'b c\""),
            (b"a'@", "\"a'@\"", "\"a'@\""),
            (b"a'!", "'a'\\''!'", "'a'\\''!'"),
            (b"a'$", "'a'\\''$'", "'a'\\''$'"),
            (b"a'\\", "'a'\\''\\'", "'a'\\''\\'"),
            (b"a'b\"c", "'a'\\''b\"c'", "'a'\\''b\"c'"),
            (b"a'~", "'a'\\''~'", "'a'\\''~'"),
            (b"x$y", "'x$y'", "'x$y'"),
            (b"a\\b", "'a\\b'", "'a\\b'"),
            (b"#x", "'#x'", "'#x'"),
            (b"a\nb", "'a'$'\\n''b'", "'a'$'\\n''b'"),
            (b"a\n\nb", "'a'$'\\n\\n''b'", "'a'$'\\n\\n''b'"),
            (b"end\n", "'end'$'\\n'", "'end'$'\\n'"),
            (b"tab\tx", "'tab'$'\\t''x'", "'tab'$'\\t''x'"),
            (b"\x01z", "''$'\\001''z'", "''$'\\001''z'"),
            (b"x\xffy", "'x'$'\\377''y'", "'x'$'\\377''y'"),
            ("é".as_bytes(), "'é'", "''$'\\303\\251'"),
            ("é'".as_bytes(), "\"é'\"", "''$'\\303\\251'\\'''"),
            (b"b\n'", "'b'$'\\n'\\'''", "'b'$'\\n'\\'''"),
            (b"x'y\nz", "'x'\\''y'$'\\n''z'", "'x'\\''y'$'\\n''z'"),
            (b"a'\n'", "'a'\\'''$'\\n'\\'''", "'a'\\'''$'\\n'\\'''"),
        ];
        for &(name, utf8, c) in cases {
            assert_eq!(quoted(name, true), utf8, "{name:?} in a UTF-8 locale");
            assert_eq!(quoted(name, false), c, "{name:?} in the C locale");
        }
    }

    /// Where gnulib 9.1's restart adds `''` or drops `$'`, ringio prints the first pass.
    #[test]
    fn a_quote_then_an_escape_quotes_correctly() {
        assert_eq!(quoted(b"a'\n", true), "'a'\\'''$'\\n'");
        assert_eq!(quoted(b"\n'\n", true), "''$'\\n'\\'''$'\\n'");
    }

    #[test]
    fn every_double_quote_compatible_ascii_character() {
        // From GNU: "a'" followed by each printable ASCII character, double-quoted or not.
        let double: Vec<u8> = (0x20u8..0x7f)
            .filter(|&c| {
                let name = [b'a', b'\'', c];
                quoted(&name, true).starts_with('"')
            })
            .collect();
        let mut expected: Vec<u8> = b" %'+,-./0123456789:@]_".to_vec();
        expected.extend(b'A'..=b'Z');
        expected.extend(b'a'..=b'z');
        expected.sort_unstable();
        assert_eq!(
            String::from_utf8(double).unwrap(),
            String::from_utf8(expected).unwrap()
        );
    }

    #[test]
    fn invalid_and_control_utf8_is_escaped_byte_by_byte() {
        // A lone continuation byte, a truncated sequence, and U+0085 (a C1 control).
        assert_eq!(quoted(b"\x80", true), "''$'\\200'");
        assert_eq!(quoted(b"a\xc3", true), "'a'$'\\303'");
        assert_eq!(quoted("\u{85}".as_bytes(), true), "''$'\\302\\205'");
    }
}
