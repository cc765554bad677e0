//! rsync's wildmatch: shell-style matching where `/` is special.
//!
//! `?` and `*` never match a slash, `**` matches anything including slashes, `[...]` is a class
//! (`!` or `^` negates it, `a-z` ranges, `[:alpha:]` and the other POSIX names, always in the C
//! locale, so bytes above 127 belong to no named class), and `\` quotes the next byte. A class
//! never matches a slash either. Everything is bytes.
//!
//! The matcher keeps rsync's two abort signals: "abort everything" (the text ran out, so no later
//! start position can match) and "abort to the enclosing `**`" (a single `*` met a slash), which
//! is what keeps the search linear-ish on hostile patterns and, more to the point, what decides
//! the result of [`wildmatch_array`]'s retries after each slash.

/// The outcome of one attempt, as rsync's matcher distinguishes it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Wild {
    Match,
    NoMatch,
    /// The text ran out: no later start can match either.
    AbortAll,
    /// A single `*` reached a slash: only an enclosing `**` may try further.
    AbortToStarStar,
}

/// True when `pattern` matches the whole of `text`, as rsync's `wildmatch()`.
pub fn wildmatch(pattern: &[u8], text: &[u8]) -> bool {
    attempt(pattern, text) == Wild::Match
}

/// How [`wildmatch_array`] chooses where in the text a pattern may start.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Where {
    /// At the start of the text only.
    Start,
    /// Against the last N slash-separated components only.
    Trailing(usize),
    /// At the start or just after any slash.
    AnySlash,
}

/// rsync's `wildmatch_array` on one joined text.
pub(crate) fn wildmatch_array(pattern: &[u8], text: &[u8], at: Where) -> bool {
    let text = match at {
        Where::Trailing(n) => match trailing_components(text, n) {
            Some(t) => t,
            None => return false,
        },
        _ => text,
    };
    let first = attempt(pattern, text);
    if first == Wild::Match || at != Where::AnySlash || first == Wild::AbortAll {
        return first == Wild::Match;
    }
    for (i, _) in text.iter().enumerate().filter(|(_, &b)| b == b'/') {
        let m = attempt(pattern, &text[i + 1..]);
        if m != Wild::NoMatch && m != Wild::AbortToStarStar {
            return m == Wild::Match;
        }
    }
    false
}

/// rsync's `litmatch_array`: a literal pattern against the whole text or its last N components.
pub(crate) fn litmatch_array(pattern: &[u8], text: &[u8], at: Where) -> bool {
    match at {
        Where::Trailing(n) => trailing_components(text, n) == Some(pattern),
        _ => text == pattern,
    }
}

/// The last `n` slash-separated components of `text`, or None when it has fewer.
fn trailing_components(text: &[u8], n: usize) -> Option<&[u8]> {
    let mut left = n;
    for (i, &b) in text.iter().enumerate().rev() {
        if b == b'/' {
            left -= 1;
            if left == 0 {
                return Some(&text[i + 1..]);
            }
        }
    }
    (left == 1).then_some(text)
}

fn attempt(p: &[u8], t: &[u8]) -> Wild {
    // Past the end reads as 0, like the C string's terminator: patterns never hold a NUL byte.
    let at = |i: usize| p.get(i).copied().unwrap_or(0);
    let mut pi = 0;
    let mut ti = 0;
    while pi < p.len() {
        let pc = p[pi];
        let Some(&tc) = t.get(ti) else {
            if pc != b'*' {
                return Wild::AbortAll;
            }
            // A star at the end of the text: handled below with an empty rest.
            return star(p, pi, t, ti);
        };
        match pc {
            b'\\' => {
                pi += 1;
                if pi >= p.len() || tc != p[pi] {
                    return Wild::NoMatch;
                }
            }
            b'?' => {
                if tc == b'/' {
                    return Wild::NoMatch;
                }
            }
            b'*' => return star(p, pi, t, ti),
            b'[' => {
                pi += 1;
                let mut c = at(pi);
                if c == b'^' {
                    c = b'!';
                }
                let negated = c == b'!';
                if negated {
                    pi += 1;
                    c = at(pi);
                }
                let mut prev: u8 = 0;
                let mut matched = false;
                loop {
                    if c == 0 {
                        return Wild::AbortAll;
                    }
                    if c == b'\\' {
                        pi += 1;
                        c = at(pi);
                        if c == 0 {
                            return Wild::AbortAll;
                        }
                        matched |= tc == c;
                    } else if c == b'-' && prev != 0 && at(pi + 1) != 0 && at(pi + 1) != b']' {
                        pi += 1;
                        c = at(pi);
                        if c == b'\\' {
                            pi += 1;
                            c = at(pi);
                            if c == 0 {
                                return Wild::AbortAll;
                            }
                        }
                        matched |= tc <= c && tc >= prev;
                        c = 0; // no range may start at a range's end
                    } else if c == b'[' && at(pi + 1) == b':' {
                        let start = pi + 2;
                        let mut end = start;
                        while at(end) != 0 && at(end) != b']' {
                            end += 1;
                        }
                        if at(end) == 0 {
                            return Wild::AbortAll;
                        }
                        if end < start + 1 || at(end - 1) != b':' {
                            // No ":]": the '[' is an ordinary member of the set.
                            c = b'[';
                            matched |= tc == c;
                        } else {
                            match class_has(&p[start..end - 1], tc) {
                                Some(hit) => matched |= hit,
                                None => return Wild::AbortAll,
                            }
                            pi = end;
                            c = 0;
                        }
                    } else {
                        matched |= tc == c;
                    }
                    prev = c;
                    pi += 1;
                    c = at(pi);
                    if c == b']' {
                        break;
                    }
                }
                if matched == negated || tc == b'/' {
                    return Wild::NoMatch;
                }
            }
            _ => {
                if tc != pc {
                    return Wild::NoMatch;
                }
            }
        }
        pi += 1;
        ti += 1;
    }
    if ti < t.len() {
        Wild::NoMatch
    } else {
        Wild::Match
    }
}

/// The `*` or `**` at `p[pi]` against `t[ti..]`.
fn star(p: &[u8], mut pi: usize, t: &[u8], mut ti: usize) -> Wild {
    pi += 1;
    let double = p.get(pi) == Some(&b'*');
    while p.get(pi) == Some(&b'*') {
        pi += 1;
    }
    let rest = &p[pi..];
    if rest.is_empty() {
        // A trailing "**" matches everything; a trailing "*" only what has no slash.
        if !double && t[ti..].contains(&b'/') {
            return Wild::NoMatch;
        }
        return Wild::Match;
    }
    while ti < t.len() {
        let m = attempt(rest, &t[ti..]);
        if m != Wild::NoMatch {
            if !double || m != Wild::AbortToStarStar {
                return m;
            }
        } else if !double && t[ti] == b'/' {
            return Wild::AbortToStarStar;
        }
        ti += 1;
    }
    Wild::AbortAll
}

/// Whether `c` is in the named class, or None for an unknown name (the pattern is then invalid).
fn class_has(name: &[u8], c: u8) -> Option<bool> {
    Some(match name {
        b"alnum" => c.is_ascii_alphanumeric(),
        b"alpha" => c.is_ascii_alphabetic(),
        b"blank" => c == b' ' || c == b'\t',
        b"cntrl" => c.is_ascii_control(),
        b"digit" => c.is_ascii_digit(),
        b"graph" => c.is_ascii_graphic(),
        b"lower" => c.is_ascii_lowercase(),
        b"print" => c.is_ascii_graphic() || c == b' ',
        b"punct" => c.is_ascii_punctuation(),
        // C's isspace: also vertical tab, which Rust's is_ascii_whitespace leaves out.
        b"space" => c.is_ascii_whitespace() || c == 0x0b,
        b"upper" => c.is_ascii_uppercase(),
        b"xdigit" => c.is_ascii_hexdigit(),
        _ => return None,
    })
}
