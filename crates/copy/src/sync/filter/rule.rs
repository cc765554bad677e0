//! One filter rule: its flags, the parse of one rule's text (rsync's `parse_rule_tok`), the
//! pattern's preparation (`add_rule`) and the match of one name against it (`rule_matches`).

use std::borrow::Cow;
use std::sync::Arc;

use super::wildmatch::{litmatch_array, wildmatch_array, Where};
use super::FilterError;

/// The rule's flags, as rsync's `FILTRULE_*` (only those this implementation needs).
pub(crate) mod fl {
    pub const INCLUDE: u32 = 1 << 0;
    pub const DIRECTORY: u32 = 1 << 1;
    pub const ABS_PATH: u32 = 1 << 2;
    pub const NEGATE: u32 = 1 << 3;
    pub const PERISHABLE: u32 = 1 << 4;
    pub const SENDER: u32 = 1 << 5;
    pub const RECEIVER: u32 = 1 << 6;
    pub const XATTR: u32 = 1 << 7;
    pub const MERGE_FILE: u32 = 1 << 8;
    pub const PERDIR_MERGE: u32 = 1 << 9;
    pub const NO_PREFIXES: u32 = 1 << 10;
    pub const WORD_SPLIT: u32 = 1 << 11;
    pub const NO_INHERIT: u32 = 1 << 12;
    pub const CVS_IGNORE: u32 = 1 << 13;
    pub const EXCLUDE_SELF: u32 = 1 << 14;
    pub const CLEAR_LIST: u32 = 1 << 15;
    pub const WILD: u32 = 1 << 16;
    pub const WILD2: u32 = 1 << 17;
    pub const WILD2_PREFIX: u32 = 1 << 18;
    pub const WILD3_SUFFIX: u32 = 1 << 19;
    pub const SIDES: u32 = SENDER | RECEIVER;
    /// What a rule read from a merge file takes from the merge rule.
    pub const FROM_CONTAINER: u32 = ABS_PATH | INCLUDE | DIRECTORY | NEGATE | PERISHABLE;
}

/// How a rule string is parsed (rsync's `XFLG_*`).
pub(crate) mod xf {
    /// `--include`/`--exclude` and their `-from` files: only "+ " / "- " prefixes, and "!".
    pub const OLD_PREFIXES: u32 = 1 << 0;
    /// A per-directory file: a leading "/" anchors at the file's directory.
    pub const ANCHORED2ABS: u32 = 1 << 1;
    /// A missing file is an error.
    pub const FATAL: u32 = 1 << 2;
}

/// Where an anchored rule from a per-directory file is anchored, relative to the transfer root.
///
/// rsync prefixes such a pattern with the directory's absolute path and matches it against the
/// absolute name. Here the name is cut or extended instead, so a directory whose name holds `*`,
/// `?`, `[` or `\` is not read as a pattern (rsync's prefix would be).
#[derive(Debug, Default)]
pub(crate) struct Base {
    /// The file's directory inside the transfer ("" for the root): the name must start with it.
    pub strip: Box<[u8]>,
    /// The components from the file's directory down to the root, when the file is in a parent
    /// of the transfer root (`dir-merge /.rsync-filter`'s scan): put in front of the name.
    pub lead: Box<[u8]>,
}

/// A per-directory merge rule's file and how its contents are read.
#[derive(Debug)]
pub(crate) struct MergeSpec {
    /// The name as the rule gave it (".cvsignore" when `:C` gave none).
    pub name: Box<[u8]>,
    /// The rule's flags: the template for the rules read from the file.
    pub flags: u32,
    /// The absolute directory a relative name is resolved in, when the rule was read from a file
    /// in a parent of the transfer (rsync expands such names during its parent scan).
    pub origin: Option<Arc<[u8]>>,
}

impl MergeSpec {
    /// The file name without its directory part.
    pub fn basename(&self) -> &[u8] {
        basename(&self.name)
    }
}

pub(crate) fn basename(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// What a rule does besides matching a pattern.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// An include/exclude/hide/show/protect/risk pattern.
    Pattern,
    /// A per-directory merge: its current rules are the scope's.
    DirMerge(Arc<MergeSpec>),
    /// `-C`: the global CVS ignore list goes here.
    Cvs,
}

/// One rule of a list.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub flags: u32,
    /// The pattern, its trailing slash removed (then `DIRECTORY` is set).
    pub pattern: Box<[u8]>,
    pub slash_cnt: usize,
    /// Set for an anchored rule from a per-directory file.
    pub base: Option<Arc<Base>>,
    pub kind: Kind,
}

/// One rule's parse: its flags and where its pattern is in the text.
pub(crate) struct Token<'a> {
    pub flags: u32,
    pub pat: &'a [u8],
}

/// C's isspace in the C locale.
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Where a rule's text came from, for messages: a command-line rule is shown as it is, a rule
/// read from a file is named by its place (as rsync 3.4 does: a file's lines are not echoed).
#[derive(Clone, Debug)]
pub(crate) enum Origin {
    Arg,
    File { path: String, line: Option<usize> },
}

impl Origin {
    pub fn show(&self, text: &[u8]) -> String {
        match self {
            Origin::Arg => String::from_utf8_lossy(text).into_owned(),
            Origin::File {
                path,
                line: Some(n),
            } => format!("<rule from {path} line {n}>"),
            Origin::File { path, line: None } => format!("<rule from {path}>"),
        }
    }
}

/// Matches `word` at the start of `s` as a long rule name: followed by a space, an underscore,
/// the end, or a comma. Returns the offset rsync's parser continues from.
fn long_name(s: &[u8], word: &[u8]) -> Option<usize> {
    if !s.starts_with(word) {
        return None;
    }
    match s.get(word.len()) {
        None => Some(word.len() - 1),
        Some(&c) if is_space(c) || c == b'_' => Some(word.len() - 1),
        Some(b',') => Some(word.len()),
        _ => None,
    }
}

/// Parses the next rule of `*text` under the template's flags (rsync's `parse_rule_tok`),
/// advancing `*text` past it. None when nothing is left.
pub(crate) fn parse_token<'a>(
    text: &mut &'a [u8],
    template: u32,
    xflags: u32,
    origin: &Origin,
) -> Result<Option<Token<'a>>, FilterError> {
    let mut s: &'a [u8] = text;
    if template & fl::WORD_SPLIT != 0 {
        while let Some((&c, rest)) = s.split_first() {
            if !is_space(c) {
                break;
            }
            s = rest;
        }
    }
    if s.is_empty() {
        *text = s;
        return Ok(None);
    }
    let whole = s; // for messages
    let (mut flags, i) = if template & fl::NO_PREFIXES != 0 {
        let mut flags = template & fl::FROM_CONTAINER;
        if s[0] == b'!' && template & fl::CVS_IGNORE != 0 {
            flags |= fl::CLEAR_LIST; // tentative: only a lone "!"
        }
        (flags, 0)
    } else if xflags & xf::OLD_PREFIXES != 0 {
        old_prefix(s, template & fl::FROM_CONTAINER)
    } else {
        prefix(s, template, origin)?
    };
    if template & fl::SIDES != 0 {
        if flags & fl::SIDES != 0 {
            return Err(FilterError::SidedRuleInSidedMerge {
                rule: origin.show(whole),
            });
        }
        flags |= template & fl::SIDES;
    }
    let rest = &s[i.min(s.len())..];
    let len = if template & fl::WORD_SPLIT != 0 {
        rest.iter().position(|&b| is_space(b)).unwrap_or(rest.len())
    } else {
        rest.len()
    };
    if flags & fl::CLEAR_LIST != 0 {
        if template & fl::NO_PREFIXES == 0 && xflags & xf::OLD_PREFIXES == 0 && len > 0 {
            return Err(FilterError::ClearWithArgument {
                rule: origin.show(whole),
            });
        }
        if len > 1 {
            flags &= !fl::CLEAR_LIST;
        }
    } else if len == 0 && flags & fl::CVS_IGNORE == 0 {
        return Err(FilterError::UnexpectedEnd {
            rule: origin.show(whole),
        });
    }
    *text = &rest[len..];
    Ok(Some(Token {
        flags,
        pat: &rest[..len],
    }))
}

/// The old prefixes (`--old-args`' lists, `exclude`/`include` files): `- ` and `+ `, and a
/// `!` that clears the list; with the rule's flags and where its pattern starts.
fn old_prefix(s: &[u8], mut flags: u32) -> (u32, usize) {
    let mut i = 0;
    if s.starts_with(b"- ") {
        flags &= !fl::INCLUDE;
        i = 2;
    } else if s.starts_with(b"+ ") {
        flags |= fl::INCLUDE;
        i = 2;
    } else if s[0] == b'!' {
        flags |= fl::CLEAR_LIST;
    }
    (flags, i)
}

/// A rule's prefix: its name, long (`exclude`) or short (`-`), then its modifiers; with the
/// rule's flags and where its pattern starts.
fn prefix(s: &[u8], template: u32, origin: &Origin) -> Result<(u32, usize), FilterError> {
    let unknown = || FilterError::UnknownRule {
        rule: origin.show(s),
    };
    let names: &[(&[u8], u8)] = &[
        (b"clear", b'!'),
        (b"dir-merge", b':'),
        (b"exclude", b'-'),
        (b"hide", b'H'),
        (b"include", b'+'),
        (b"merge", b'.'),
        (b"protect", b'P'),
        (b"risk", b'R'),
        (b"show", b'S'),
    ];
    let mut i = 0usize;
    let ch;
    match names.iter().find(|(w, _)| w[0] == s[0]) {
        Some(&(word, c)) => {
            i = long_name(s, word).ok_or_else(unknown)?;
            ch = c;
        }
        None => {
            ch = s[0];
            if s.get(1) == Some(&b',') {
                i = 1;
            }
        }
    }
    let (kind, sided_prefix) = rule_kind(ch).ok_or_else(unknown)?;
    let mut flags = (template & fl::FROM_CONTAINER) | kind;
    if ch != b'!' {
        i = modifiers(s, i, (&mut flags, sided_prefix), template, origin)?;
    }
    if i < s.len() {
        i += 1;
    }
    Ok((flags, i))
}

/// The flags a rule's one-letter name gives, and whether the name itself says which side the
/// rule is for (`S`, `H`, `R`, `P`); `None`: no such rule.
fn rule_kind(ch: u8) -> Option<(u32, bool)> {
    Some(match ch {
        b':' => (fl::PERDIR_MERGE | fl::MERGE_FILE, false),
        b'.' => (fl::MERGE_FILE, false),
        b'+' => (fl::INCLUDE, false),
        b'-' => (0, false),
        b'S' => (fl::INCLUDE | fl::SENDER, true),
        b'H' => (fl::SENDER, true),
        b'R' => (fl::INCLUDE | fl::RECEIVER, true),
        b'P' => (fl::RECEIVER, true),
        b'!' => (fl::CLEAR_LIST, false),
        _ => return None,
    })
}

/// Reads the modifiers after a rule's name at `i` into `flags` (each checked against the
/// rule's kind: a merge rule's own, the sides a sided name already says); returns where they
/// end.
fn modifiers(
    s: &[u8],
    mut i: usize,
    (flags, sided_prefix): (&mut u32, bool),
    template: u32,
    origin: &Origin,
) -> Result<usize, FilterError> {
    loop {
        i += 1;
        let c = s.get(i).copied().unwrap_or(0);
        if c == 0 || c == b' ' || c == b'_' {
            return Ok(i);
        }
        if template & fl::WORD_SPLIT != 0 && is_space(c) {
            return Ok(i - 1);
        }
        let invalid = || FilterError::InvalidModifier {
            rule: origin.show(s),
            detail: match origin {
                Origin::Arg => format!(" '{}' at position {}", c as char, i),
                Origin::File { .. } => String::new(),
            },
        };
        let merge = *flags & fl::MERGE_FILE != 0;
        match c {
            b'-' | b'+' => {
                if !merge || *flags & fl::NO_PREFIXES != 0 {
                    return Err(invalid());
                }
                *flags |= fl::NO_PREFIXES;
                if c == b'+' {
                    *flags |= fl::INCLUDE;
                }
            }
            b'/' => *flags |= fl::ABS_PATH,
            b'!' => {
                if merge {
                    return Err(invalid());
                }
                *flags |= fl::NEGATE;
            }
            b'C' => {
                if *flags & fl::NO_PREFIXES != 0 || sided_prefix {
                    return Err(invalid());
                }
                *flags |= fl::NO_PREFIXES | fl::WORD_SPLIT | fl::NO_INHERIT | fl::CVS_IGNORE;
            }
            b'e' if merge => *flags |= fl::EXCLUDE_SELF,
            b'n' if merge => *flags |= fl::NO_INHERIT,
            b'w' if merge => *flags |= fl::WORD_SPLIT,
            b'p' => *flags |= fl::PERISHABLE,
            b'r' if !sided_prefix => *flags |= fl::RECEIVER,
            b's' if !sided_prefix => *flags |= fl::SENDER,
            b'x' => *flags |= fl::XATTR,
            _ => return Err(invalid()),
        }
    }
}

impl Rule {
    /// Prepares a pattern as rsync's `add_rule` does: the trailing slash, the slash count, the
    /// wildcard flags. `base` is the anchoring of a per-directory file's rule with a leading "/".
    pub fn new(pat: &[u8], mut flags: u32, base: Option<Arc<Base>>, kind: Kind) -> Rule {
        let mut pat = pat;
        if pat.len() > 1 && pat.ends_with(b"/") {
            pat = &pat[..pat.len() - 1];
            flags |= fl::DIRECTORY;
        }
        let base = if flags & (fl::ABS_PATH | fl::MERGE_FILE) == 0 && pat.first() == Some(&b'/') {
            base
        } else {
            None
        };
        let mut slash_cnt = pat.iter().filter(|&&b| b == b'/').count();
        if let Some(b) = &base {
            // rsync's prefix adds its slashes: the rule is then matched against the full name.
            slash_cnt += 1 + b.strip.len() + b.lead.len();
        }
        if pat.iter().any(|&b| matches!(b, b'*' | b'[' | b'?')) {
            flags |= fl::WILD;
            if let Some(at) = pat.windows(2).position(|w| w == b"**") {
                flags |= fl::WILD2;
                if at == 0 {
                    flags |= fl::WILD2_PREFIX;
                }
                if pat.ends_with(b"***") {
                    flags |= fl::WILD3_SUFFIX;
                }
            }
        }
        Rule {
            flags,
            pattern: pat.into(),
            slash_cnt,
            base,
            kind,
        }
    }

    /// rsync's `rule_matches`: true when the rule applies to this name (its pattern matched, or
    /// did not and the rule is negated). An empty name, and any name for an xattr rule, is never
    /// matched, negated or not.
    pub fn matches(&self, name: &[u8], is_dir: bool, root_abs: Option<&[u8]>) -> bool {
        let hit = self.flags & fl::NEGATE == 0;
        if name.is_empty() || self.flags & fl::XATTR != 0 {
            return false;
        }
        let mut text: Cow<'_, [u8]> = Cow::Borrowed(name);
        if self.slash_cnt == 0 && self.flags & fl::WILD2 == 0 {
            text = Cow::Borrowed(basename(name));
        } else if let Some(base) = &self.base {
            let mut t = name;
            if !base.strip.is_empty() {
                match name.strip_prefix(&*base.strip) {
                    Some(r) if r.first() == Some(&b'/') => t = &r[1..],
                    _ => return !hit,
                }
            }
            text = if base.lead.is_empty() {
                Cow::Borrowed(t)
            } else {
                Cow::Owned([&base.lead[..], b"/", t].concat())
            };
        } else if self.flags & fl::ABS_PATH != 0 && root_abs.is_some_and(|r| r.len() > 1) {
            let root = root_abs.unwrap_or_default();
            text = Cow::Owned([&root[1..], b"/", name].concat());
        } else if self.flags & fl::WILD2_PREFIX != 0 {
            text = Cow::Owned([b"/", name].concat());
        }
        if is_dir {
            if self.flags & fl::WILD3_SUFFIX != 0 {
                text.to_mut().push(b'/');
            }
        } else if self.flags & fl::DIRECTORY != 0 {
            return !hit;
        }
        let mut pattern = &self.pattern[..];
        let anchored = pattern.first() == Some(&b'/');
        if anchored {
            pattern = &pattern[1..];
        }
        let at = if !anchored && self.slash_cnt > 0 && self.flags & fl::WILD2 == 0 {
            Where::Trailing(self.slash_cnt + 1)
        } else if !anchored && self.flags & fl::WILD2 != 0 && self.flags & fl::WILD2_PREFIX == 0 {
            Where::AnySlash
        } else {
            Where::Start
        };
        let several = !matches!(text, Cow::Borrowed(_)) || self.base.is_some();
        let matched = if self.flags & fl::WILD != 0 {
            wildmatch_array(pattern, &text, at)
        } else if several {
            litmatch_array(pattern, &text, at)
        } else if anchored {
            *text == *pattern
        } else {
            let t = &*text;
            t.len() >= pattern.len()
                && t.ends_with(pattern)
                && (t.len() == pattern.len() || t[t.len() - pattern.len() - 1] == b'/')
        };
        if matched {
            hit
        } else {
            !hit
        }
    }
}
