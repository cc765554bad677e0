//! `--chmod`: rsync's permission changes, applied to the mode the transfer would give an entry.
//! Items are comma-separated; each may start with `D` (directories only) or `F` (everything
//! else), then is an octal mode or chmod(1)'s symbolic form (`u+w`, `go-rwx`, `a=rX`, `+t`).

/// One item of a `--chmod` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChmodRule {
    /// `Some(true)`: directories only; `Some(false)`: non-directories only.
    dirs: Option<bool>,
    what: What,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum What {
    Octal(u32),
    /// Who (a mask of the 0o7777 bits the clause may touch), the operator, the permissions.
    Symbolic(Vec<(u32, char, Vec<char>)>),
}

/// Parses a `--chmod` value (one or more comma-separated items).
pub fn parse(text: &str) -> Result<Vec<ChmodRule>, String> {
    let bad = || format!("Invalid argument passed to --chmod ({text})");
    let mut rules = Vec::new();
    for item in text.split(',') {
        let (dirs, body) = match item.chars().next() {
            Some('D') => (Some(true), &item[1..]),
            Some('F') => (Some(false), &item[1..]),
            _ => (None, item),
        };
        if body.is_empty() {
            return Err(bad());
        }
        if body.chars().all(|c| c.is_digit(8)) {
            let mode = u32::from_str_radix(body, 8).map_err(|_| bad())?;
            if mode > 0o7777 {
                return Err(bad());
            }
            rules.push(ChmodRule {
                dirs,
                what: What::Octal(mode),
            });
            continue;
        }
        let mut clauses = Vec::new();
        let mut chars = body.chars().peekable();
        while chars.peek().is_some() {
            let mut who = 0u32;
            while let Some(&c) = chars.peek() {
                who |= match c {
                    'u' => 0o4700,
                    'g' => 0o2070,
                    'o' => 0o1007,
                    'a' => 0o7777,
                    _ => break,
                };
                chars.next();
            }
            let Some(op) = chars.next().filter(|c| matches!(c, '+' | '-' | '=')) else {
                return Err(bad());
            };
            let mut perms = Vec::new();
            while let Some(&c) = chars.peek() {
                if !matches!(c, 'r' | 'w' | 'x' | 'X' | 's' | 't') {
                    break;
                }
                perms.push(c);
                chars.next();
            }
            clauses.push((who, op, perms));
        }
        rules.push(ChmodRule {
            dirs,
            what: What::Symbolic(clauses),
        });
    }
    Ok(rules)
}

/// The permission bits (0o7777) after `rules`, for an entry that is a directory or not.
/// `umask` is what a clause without a who (`+w`) leaves out, as chmod(1).
pub fn apply(rules: &[ChmodRule], mut perm: u32, is_dir: bool, umask: u32) -> u32 {
    for rule in rules {
        if rule.dirs.is_some_and(|d| d != is_dir) {
            continue;
        }
        match &rule.what {
            What::Octal(mode) => perm = *mode,
            What::Symbolic(clauses) => {
                for (who, op, perms) in clauses {
                    let (who, masked) = if *who == 0 {
                        (0o7777, !umask & 0o7777)
                    } else {
                        (*who, 0o7777)
                    };
                    let any_x = is_dir || perm & 0o111 != 0;
                    let mut bits = 0u32;
                    for p in perms {
                        bits |= match p {
                            'r' => 0o444,
                            'w' => 0o222,
                            'x' => 0o111,
                            'X' if any_x => 0o111,
                            'X' => 0,
                            's' => 0o6000,
                            't' => 0o1000,
                            _ => 0,
                        };
                    }
                    let bits = bits & who & masked;
                    match op {
                        '+' => perm |= bits,
                        '-' => perm &= !bits,
                        _ => perm = (perm & !who) | bits,
                    }
                }
            }
        }
    }
    perm & 0o7777
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_and_symbolic_items_for_files_and_directories() {
        let r = parse("D755,F644").unwrap();
        assert_eq!(apply(&r, 0o700, true, 0o022), 0o755);
        assert_eq!(apply(&r, 0o700, false, 0o022), 0o644);
        let r = parse("u+w,go-w").unwrap();
        assert_eq!(apply(&r, 0o466, false, 0o022), 0o644);
        let r = parse("a=rX").unwrap();
        assert_eq!(apply(&r, 0o750, true, 0o022), 0o555);
        assert_eq!(apply(&r, 0o640, false, 0o022), 0o444);
        assert_eq!(apply(&r, 0o740, false, 0o022), 0o555);
        let r = parse("a=").unwrap();
        assert_eq!(apply(&r, 0o644, false, 0o022), 0);
        let r = parse("Dg+s,+t").unwrap();
        assert_eq!(apply(&r, 0o755, true, 0o022), 0o3755);
        assert_eq!(apply(&r, 0o644, false, 0o022), 0o1644);
        // Without a who, the umask's bits are left alone, as chmod(1).
        let r = parse("+w").unwrap();
        assert_eq!(apply(&r, 0o444, false, 0o022), 0o644);
    }

    #[test]
    fn bad_items_are_refused() {
        for bad in ["", "D", "u", "u*w", "99999", "Z+w", "u+w,"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
