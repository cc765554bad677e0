//! `--chmod`: rsync's permission changes, applied to the mode the transfer would give an entry.
//! Items are comma-separated; each may start with `D` (directories only) or `F` (everything
//! else), then is an octal mode or one clause of chmod(1)'s symbolic form (`u+w`, `go-rwx`,
//! `a=rX`, `+t`), read as rsync reads it: `u`, `g` and `a` reach the setuid and setgid bits only
//! through `s` (so `a=rX` keeps them), `o` or no who at all never (`o+s` and `+s` set setuid
//! alone); `=` clears only the rwx bits of whom it names (and their special bits when it gives
//! `s`); `X` looks at whether the mode had an x bit before the first item, not after the ones
//! before it. (rsync 3.2.7 read `a+s` as setuid alone; 3.5, like chmod(1), as both.)

/// One item of a `--chmod` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChmodRule {
    /// `Some(true)`: directories only; `Some(false)`: non-directories only.
    dirs: Option<bool>,
    op: Op,
    /// The rwx positions it names (`u` 0o100, `g` 0o010, `o` 0o001; 0: none named, which
    /// means all three less the umask), or for an octal mode 1.
    who: u32,
    /// The permissions (`r` 4, `w` 2, `x` 1), or the octal mode.
    what: u32,
    /// The special bits its `u` and `g` stand for (setuid, setgid).
    top: u32,
    /// The special bits it gives (`s`, `t`).
    special: u32,
    /// It said `X`: an x bit only for a directory or a mode that had one.
    x_keep: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Add,
    Sub,
    Eq,
    Set,
}

/// Parses a `--chmod` value (one or more comma-separated items).
pub fn parse(text: &str) -> Result<Vec<ChmodRule>, String> {
    let bad = || format!("Invalid argument passed to --chmod ({text})");
    text.split(',')
        .map(|item| parse_item(item).ok_or_else(bad))
        .collect()
}

/// One item: who, then an operator and permissions, or an octal mode; `None`: not one.
fn parse_item(item: &str) -> Option<ChmodRule> {
    let mut rule = ChmodRule {
        dirs: None,
        op: Op::Add,
        who: 0,
        what: 0,
        top: 0,
        special: 0,
        x_keep: false,
    };
    let mut chars = item.chars();
    let op = loop {
        match chars.next()? {
            'D' if rule.dirs != Some(false) => rule.dirs = Some(true),
            'F' if rule.dirs != Some(true) => rule.dirs = Some(false),
            'u' => (rule.who, rule.top) = (rule.who | 0o100, rule.top | 0o4000),
            'g' => (rule.who, rule.top) = (rule.who | 0o010, rule.top | 0o2000),
            'o' => rule.who |= 0o001,
            'a' => (rule.who, rule.top) = (rule.who | 0o111, rule.top | 0o6000),
            '+' => break Op::Add,
            '-' => break Op::Sub,
            '=' => break Op::Eq,
            c @ '0'..='7' if rule.who == 0 => {
                let mut mode = c.to_digit(8)?;
                for c in chars {
                    mode = mode * 8 + c.to_digit(8)?;
                    if mode > 0o7777 {
                        return None;
                    }
                }
                return Some(ChmodRule {
                    op: Op::Set,
                    who: 1,
                    what: mode,
                    ..rule
                });
            }
            _ => return None,
        }
    };
    rule.op = op;
    for c in chars {
        match c {
            'r' => rule.what |= 4,
            'w' => rule.what |= 2,
            'x' => rule.what |= 1,
            'X' => (rule.what, rule.x_keep) = (rule.what | 1, true),
            's' if rule.top != 0 => rule.special |= rule.top,
            's' => rule.special |= 0o4000,
            't' => rule.special |= 0o1000,
            _ => return None,
        }
    }
    Some(rule)
}

/// The permission bits (0o7777) after `rules`, for an entry that is a directory or not.
/// `umask` is what a clause without a who (`+w`) leaves out, as chmod(1).
pub fn apply(rules: &[ChmodRule], mut perm: u32, is_dir: bool, umask: u32) -> u32 {
    // Whether it had an x bit before any item (`X`).
    let had_x = perm & 0o111 != 0;
    for rule in rules {
        if rule.dirs.is_some_and(|d| d != is_dir) {
            continue;
        }
        let (who, bits) = match rule.who {
            0 => (0o111, (0o111 * rule.what) & !umask),
            who => (who, who * rule.what),
        };
        let (keep, add) = match rule.op {
            Op::Add => (0o7777, bits | rule.special),
            Op::Sub => (0o7777 & !(bits | rule.special), 0),
            Op::Eq => {
                let specials = if rule.special != 0 { rule.top } else { 0 };
                (0o7777 & !(who * 7) & !specials, bits | rule.special)
            }
            Op::Set => (0, rule.what),
        };
        perm &= keep;
        perm |= if rule.x_keep && !had_x && !is_dir {
            add & !0o111
        } else {
            add
        };
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

    /// rsync's readings, checked against rsync 3.5.0 (and 3.2.7, but for `a` with `s`): `=`
    /// keeps the special bits unless it gives `s` or `t`; `o` and no who do not stand for
    /// setgid; `X` asks the mode as it was before the first item.
    #[test]
    fn symbolic_items_as_rsync_reads_them() {
        // (spec, mode before, a directory, mode after), each as rsync 3.5.0 gave it.
        let table = [
            ("a=rX,u+w", 0o4755, false, 0o4755),
            ("a=rX,u+w", 0o3775, true, 0o3755),
            ("Fg-w,o=", 0o1644, false, 0o1640),
            ("ug=rwX", 0o6754, false, 0o6774),
            ("u=rwxs", 0o6755, false, 0o6755),
            ("u=rw", 0o6755, false, 0o6655),
            ("g=rs", 0o4775, false, 0o6745),
            ("a+s", 0o755, false, 0o6755),
            ("+s", 0o755, false, 0o4755),
            ("a-s", 0o6755, false, 0o755),
            ("=rw", 0o6755, false, 0o6644),
            ("a=r", 0o1755, false, 0o1444),
            ("o+s,o+t", 0o755, false, 0o5755),
            ("u-s,g-s,-t", 0o7755, false, 0o755),
            ("a-x,a+X", 0o755, false, 0o755),
            ("a-x,a+X", 0o644, false, 0o644),
        ];
        for (spec, before, is_dir, after) in table {
            let rules = parse(spec).unwrap();
            assert_eq!(
                apply(&rules, before, is_dir, 0o022),
                after,
                "{spec} on {before:o}"
            );
        }
    }

    #[test]
    fn bad_items_are_refused() {
        for bad in [
            "", "D", "u", "u*w", "99999", "Z+w", "u+w,", "u+w-x", "DF+w", "u755", "7a", "+q",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
