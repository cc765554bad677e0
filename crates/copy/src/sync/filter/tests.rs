//! The matcher, each rule form and modifier, anchoring, per-directory files, the sides; rsync's
//! own wildtest.txt when its source is in the cache; and end-to-end cases against the real
//! rsync when it is installed. Every file is made in a scratch directory.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use super::*;

// ---------------------------------------------------------------------------------------------
// wildmatch

/// Cases written for this module: (text, pattern, expected).
const WILD_CASES: &[(&str, &str, bool)] = &[
    ("abc", "abc", true),
    ("abc", "abd", false),
    ("", "", true),
    ("abc", "a?c", true),
    ("a/c", "a?c", false),
    ("abc", "??", false),
    ("abc", "*", true),
    ("a/b", "*", false),
    ("a/b", "**", true),
    ("a/b/c", "a/*/c", true),
    ("a/x/y/c", "a/*/c", false),
    ("a/x/y/c", "a/**/c", true),
    ("a/c", "a/**/c", false),
    ("a/c", "a**/c", true),
    ("main.c", "*.c", true),
    ("main.cc", "*.c", false),
    ("x.tar.gz", "*.tar.*", true),
    ("qqqqqqqab", "*ab", true),
    ("a*b", "a\\*b", true),
    ("axb", "a\\*b", false),
    ("a\\b", "a\\\\b", true),
    ("cat", "[bc]at", true),
    ("rat", "[bc]at", false),
    ("rat", "[!bc]at", true),
    ("rat", "[^bc]at", true),
    ("cat", "[^bc]at", false),
    ("m", "[a-z]", true),
    ("M", "[a-z]", false),
    ("-", "[a-]", true),
    ("]", "[]]", true),
    ("x", "[!]]", true),
    ("/", "[/]", false),
    ("/", "[!a]", false),
    ("Q", "[[:upper:]]", true),
    ("q", "[[:upper:]]", false),
    ("7", "[[:alpha:][:digit:]]", true),
    (" ", "[[:space:]]", true),
    ("\u{b}", "[[:space:]]", true),
    ("\t", "[[:blank:]]", true),
    ("f", "[[:xdigit:]]", true),
    ("g", "[[:xdigit:]]", false),
    (".", "[[:punct:]]", true),
    ("a", "[[:bogus:]]", false),
    ("a", "[[:alpha:]", false),
    ("[", "[[]", true),
    ("a", "[", false),
    ("e", "[\\e]", true),
    ("b", "[a\\-c]", false),
    ("-", "[a\\-c]", true),
    ("é", "[[:alpha:]][[:alpha:]]", false),
    ("d/e/f/g.txt", "**/*.txt", true),
    ("g.txt", "**/*.txt", false),
    ("x/yz/abc", "*/*/a*c", true),
    (
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaab",
        "*a*a*a*a*a*a*a*a*a*a*a*c",
        false,
    ),
];

#[test]
fn wildmatch_cases_written_here() {
    for &(text, pat, want) in WILD_CASES {
        assert_eq!(
            wildmatch(pat.as_bytes(), text.as_bytes()),
            want,
            "{text:?} ~ {pat:?}"
        );
    }
    // Bytes that are not UTF-8.
    assert!(wildmatch(b"*\xff", b"ab\xff"));
    assert!(wildmatch(b"[\x80-\xff]", b"\xc3"));
}

/// wildtest.txt's quoted-or-bare fields, as wildtest.c reads them.
fn wildtest_fields(line: &str) -> Option<(bool, String, String)> {
    let b = line.as_bytes();
    let mut s = 0;
    let mut flags = [false; 2];
    for f in &mut flags {
        *f = match b.get(s)? {
            b'1' => true,
            b'0' => false,
            _ => return None,
        };
        s += 1;
        while matches!(b.get(s), Some(b' ' | b'\t')) {
            s += 1;
        }
    }
    let mut strings = Vec::new();
    for _ in 0..2 {
        let start;
        let end;
        if let Some(&q @ (b'\'' | b'"' | b'`')) = b.get(s) {
            start = s + 1;
            end = start + b[start..].iter().position(|&c| c == q)?;
            s = end + 1;
        } else {
            start = s;
            end = s + b[s..]
                .iter()
                .position(|&c| matches!(c, b' ' | b'\t' | b'\n'))
                .unwrap_or(b.len() - s);
            if end == start {
                return None;
            }
            s = end;
        }
        strings.push(line[start..end].to_owned());
        while matches!(b.get(s), Some(b' ' | b'\t')) {
            s += 1;
        }
    }
    let pattern = strings.pop()?;
    let text = strings.pop()?;
    Some((flags[0], text, pattern))
}

fn find_wildtest() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?
        .join("ringio-rsync");
    let mut dirs = vec![(cache, 0)];
    while let Some((dir, depth)) = dirs.pop() {
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_name() == "wildtest.txt" {
                return Some(p);
            }
            if depth < 2 && e.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push((p, depth + 1));
            }
        }
    }
    None
}

/// rsync's wildtest.txt. Its first column is what wildmatch() returns (the second says whether
/// fnmatch(3) agrees, which is not ours to test).
#[test]
fn wildmatch_rsync_wildtest_txt() {
    let Some(path) = find_wildtest() else {
        println!(
            "skipped: no wildtest.txt under ${{XDG_CACHE_HOME:-$HOME/.cache}}/ringio-rsync/rsync-*"
        );
        return;
    };
    let data = fs::read(&path).unwrap();
    let text = String::from_utf8_lossy(&data);
    let mut n = 0;
    for (i, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (want, t, p) =
            wildtest_fields(line).unwrap_or_else(|| panic!("line {}: {line}", i + 1));
        assert_eq!(
            wildmatch(p.as_bytes(), t.as_bytes()),
            want,
            "{}:{}: {line}",
            path.display(),
            i + 1
        );
        n += 1;
    }
    assert!(n > 100, "only {n} cases in {}", path.display());
    println!("{n} wildtest.txt cases from {}", path.display());
}

// ---------------------------------------------------------------------------------------------
// rules without per-directory files

fn build(rules: &[&str]) -> Scope {
    let mut r = FilterRules::with_cvs_env(CvsEnv::default());
    for rule in rules {
        r.add_rule(rule.as_bytes())
            .unwrap_or_else(|e| panic!("{rule}: {e}"));
    }
    Scope::root(Arc::new(r))
}

fn ex(s: &Scope, rel: &str, is_dir: bool) -> bool {
    s.excluded(rel.as_bytes(), is_dir, Side::Sender)
}

fn err(rule: &str) -> String {
    let mut r = FilterRules::new();
    r.add_rule(rule.as_bytes()).expect_err(rule).to_string()
}

#[test]
fn rule_forms_short_and_long() {
    for rule in [
        "- *.o",
        "exclude *.o",
        "-,p *.o",
        "exclude,s *.o",
        "-_*.o",
        "H *.o",
        "hide *.o",
    ] {
        let s = build(&[rule]);
        assert!(ex(&s, "a/b.o", false), "{rule}");
        assert!(!ex(&s, "a/b.c", false), "{rule}");
    }
    let s = build(&["+ *.c", "include *.h", "- *"]);
    assert!(!ex(&s, "x.c", false));
    assert!(!ex(&s, "x.h", false));
    assert!(ex(&s, "x.o", false));
    let s = build(&["show *.c", "S *.h", "hide *"]);
    assert!(!ex(&s, "x.c", false) && !ex(&s, "x.h", false) && ex(&s, "x", false));
    // "_" separates too, and further spaces belong to the pattern.
    let s = build(&["-  x"]);
    assert!(ex(&s, " x", false) && !ex(&s, "x", false));
}

#[test]
fn rule_errors_read_as_rsync() {
    assert_eq!(err("x foo"), "Unknown filter rule: x foo");
    assert_eq!(err("excluded foo"), "Unknown filter rule: excluded foo");
    assert_eq!(
        err("-z foo"),
        "invalid modifier 'z' at position 1 in filter rule: -z foo"
    );
    assert_eq!(
        err("-e foo"),
        "invalid modifier 'e' at position 1 in filter rule: -e foo"
    );
    assert_eq!(
        err(".! f"),
        "invalid modifier '!' at position 1 in filter rule: .! f"
    );
    assert_eq!(
        err("Hs foo"),
        "invalid modifier 's' at position 1 in filter rule: Hs foo"
    );
    assert_eq!(
        err("PC"),
        "invalid modifier 'C' at position 1 in filter rule: PC"
    );
    assert_eq!(
        err(":-+ x"),
        "invalid modifier '+' at position 2 in filter rule: :-+ x"
    );
    assert_eq!(err("! x"), "'!' rule has trailing characters: ! x");
    assert_eq!(err("-"), "unexpected end of filter rule: -");
    assert_eq!(err("include"), "unexpected end of filter rule: include");
    assert!(err(". /nonexistent/ringio-filter-test")
        .starts_with("failed to open exclude file /nonexistent/ringio-filter-test: "));
    let mut r = FilterRules::new();
    assert!(r.try_add_exclude(b"- ").is_err());
    r.add_exclude(b"- "); // ignored
    assert!(r.is_empty());
}

#[test]
fn old_style_prefixes_and_clear() {
    let mut r = FilterRules::with_cvs_env(CvsEnv::default());
    r.add_exclude(b"+ keep.o");
    r.add_exclude(b"*.o");
    r.add_include(b"- drop.c");
    r.add_include(b"*.c");
    r.add_exclude(b"*");
    let s = Scope::root(Arc::new(r));
    assert!(!ex(&s, "keep.o", false) && ex(&s, "x.o", false));
    assert!(ex(&s, "drop.c", false) && !ex(&s, "x.c", false));
    assert!(ex(&s, "other", false));
    // "!" clears what came before, in either syntax.
    let mut r = FilterRules::with_cvs_env(CvsEnv::default());
    r.add_exclude(b"*.o");
    r.add_exclude(b"!");
    r.add_exclude(b"*.c");
    let s = Scope::root(Arc::new(r));
    assert!(!ex(&s, "x.o", false) && ex(&s, "x.c", false));
    let s = build(&["- *.o", "!", "- *.c"]);
    assert!(!ex(&s, "x.o", false) && ex(&s, "x.c", false));
    let s = build(&["- *.o", "clear", "- *.c"]);
    assert!(!ex(&s, "x.o", false) && ex(&s, "x.c", false));
    // An include-style pattern "!x" (more than the lone "!") is a pattern.
    let mut r = FilterRules::with_cvs_env(CvsEnv::default());
    r.add_exclude(b"!x");
    assert!(ex(&Scope::root(Arc::new(r)), "!x", false));
}

#[test]
fn anchoring_and_slashes() {
    let s = build(&["- /top"]);
    assert!(ex(&s, "top", false) && !ex(&s, "a/top", false));
    let s = build(&["- top"]);
    assert!(ex(&s, "top", false) && ex(&s, "a/b/top", true));
    // An inner slash: the end of the path, on a component boundary.
    let s = build(&["- b/c"]);
    assert!(ex(&s, "b/c", false) && ex(&s, "a/b/c", false) && !ex(&s, "ab/c", false));
    let s = build(&["- b/*.c"]);
    assert!(ex(&s, "a/b/x.c", false) && !ex(&s, "a/xb/x.c", false) && !ex(&s, "b/d/x.c", false));
    let s = build(&["- foo/*/bar"]);
    assert!(
        ex(&s, "foo/x/bar", false) && ex(&s, "q/foo/x/bar", false) && !ex(&s, "foo/x/y/bar", false)
    );
    let s = build(&["- /foo/**/bar"]);
    assert!(
        ex(&s, "foo/x/bar", false) && ex(&s, "foo/x/y/bar", false) && !ex(&s, "foo/bar", false)
    );
    assert!(!ex(&s, "q/foo/x/bar", false));
    // "**" without a slash matches across them, anywhere after a slash.
    let s = build(&["- x**z"]);
    assert!(ex(&s, "x/y/z", false) && ex(&s, "a/xyz", false) && !ex(&s, "ax/z", false));
    let s = build(&["- **/z"]);
    assert!(ex(&s, "z", false) && ex(&s, "a/b/z", false));
    // A trailing slash: directories only.
    let s = build(&["- d/"]);
    assert!(ex(&s, "a/d", true) && !ex(&s, "a/d", false));
    // dir/***: the directory and everything in it.
    let s = build(&["- /d/***"]);
    assert!(ex(&s, "d", true) && ex(&s, "d/x", false) && ex(&s, "d/x/y", true));
    assert!(!ex(&s, "d", false) && !ex(&s, "e/d", true));
    // "*" stops at slashes.
    let s = build(&["- /a*"]);
    assert!(ex(&s, "abc", false) && !ex(&s, "abc/d", false));
    // A literal pattern: backslash is itself unless the pattern has a wildcard.
    let s = build(&["- a\\b"]);
    assert!(ex(&s, "a\\b", false));
    let s = build(&["- a\\b*"]);
    assert!(ex(&s, "abc", false) && !ex(&s, "a\\bc", false));
    // The transfer root itself is never matched.
    let s = build(&["- *", "- /**"]);
    assert!(!ex(&s, "", true));
}

#[test]
fn negate_first_match_and_modifiers() {
    let s = build(&["-! */"]);
    assert!(ex(&s, "f", false) && !ex(&s, "d", true));
    let s = build(&["-! *.c"]);
    assert!(ex(&s, "x.o", false) && !ex(&s, "x.c", false));
    let s = build(&["+ a*", "- *"]);
    assert!(!ex(&s, "ab", false) && ex(&s, "b", false));
    let s = build(&["- *", "+ a*"]);
    assert!(ex(&s, "ab", false));
    // x: xattr rules never match a file name.
    let s = build(&["-x *"]);
    assert!(!ex(&s, "a", false));
    // "/": matched against the absolute path; the root's path is unknown before entering it, so
    // the name is taken as below "/".
    let s = build(&["-/ /etc/passwd"]);
    assert!(ex(&s, "etc/passwd", false));
}

#[test]
fn sides_perishable_and_delete_excluded() {
    let rules = [
        "H hid", "S shown", "P prot", "R risky", "- both", "-s sonly", "-r ronly", "-p per",
    ];
    let s = build(&rules);
    let on = |rel: &str, side| s.excluded(rel.as_bytes(), false, side);
    assert!(on("hid", Side::Sender) && !on("hid", Side::Receiver));
    assert!(on("prot", Side::Receiver) && !on("prot", Side::Sender));
    assert!(on("both", Side::Sender) && on("both", Side::Receiver));
    assert!(on("sonly", Side::Sender) && !on("sonly", Side::Receiver));
    assert!(on("ronly", Side::Receiver) && !on("ronly", Side::Sender));
    assert_eq!(s.verdict(b"shown", false, Side::Sender, false), Some(true));
    assert_eq!(s.verdict(b"shown", false, Side::Receiver, false), None);
    assert_eq!(
        s.verdict(b"risky", false, Side::Receiver, false),
        Some(true)
    );
    assert!(on("per", Side::Receiver) && !s.excluded_in_deleted_dir(b"per", false));
    assert!(s.excluded_in_deleted_dir(b"both", false));

    let mut r = FilterRules::with_cvs_env(CvsEnv::default());
    for rule in rules {
        r.add_rule(rule.as_bytes()).unwrap();
    }
    r.set_delete_excluded(true);
    let s = Scope::root(Arc::new(r));
    assert!(
        s.excluded(b"both", false, Side::Sender) && !s.excluded(b"both", false, Side::Receiver)
    );
    assert!(
        s.excluded(b"prot", false, Side::Receiver) && s.excluded(b"ronly", false, Side::Receiver)
    );
}

#[test]
fn cvs_exclude_lists() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join(".cvsignore"), "*.home\n").unwrap();
    let env = CvsEnv {
        home: Some(tmp.path().into()),
        var: Some(b"*.env  *.env2".to_vec()),
    };
    let mut r = FilterRules::with_cvs_env(env.clone());
    r.cvs_exclude();
    r.add_rule(b"+ keep.o").unwrap(); // -C's rules come after, wherever -C was
    assert!(!r.is_empty());
    let s = Scope::root(Arc::new(r));
    for name in [
        "x.o", "core", "CVS", "a~", "#x", "x.home", "x.env", "x.env2",
    ] {
        assert!(ex(&s, name, false), "{name}");
    }
    assert!(ex(&s, ".git", true) && !ex(&s, ".git", false));
    assert!(!ex(&s, "keep.o", false) && !ex(&s, "x.c", false));
    // The default list is perishable, the home and environment words are not.
    assert!(!s.excluded_in_deleted_dir(b"x.o", false));
    assert!(s.excluded_in_deleted_dir(b"x.home", false));
    // A .cvsignore in a directory: words, not inherited, "!" clears.
    let d = tmp.path().join("d");
    fs::create_dir_all(d.join("sub")).unwrap();
    fs::write(d.join(".cvsignore"), "a1 a2\t*.x\n").unwrap();
    let top = s.enter(File::open(&d).unwrap().as_fd(), b"").unwrap();
    assert!(ex(&top, "a1", false) && ex(&top, "a2", false) && ex(&top, "q.x", false));
    let sub = top
        .enter(File::open(d.join("sub")).unwrap().as_fd(), b"sub")
        .unwrap();
    assert!(!ex(&sub, "sub/a1", false));
    fs::write(d.join("sub/.cvsignore"), "! b1").unwrap();
    let sub = top
        .enter(File::open(d.join("sub")).unwrap().as_fd(), b"sub")
        .unwrap();
    assert!(ex(&sub, "sub/b1", false) && !ex(&sub, "sub/a1", false));
}

// ---------------------------------------------------------------------------------------------
// per-directory files

/// Makes files and directories (a name ending in "/") under `root`; a file's text after "=".
fn make(root: &Path, entries: &[&str]) {
    for e in entries {
        let (name, text) = e.split_once('=').unwrap_or((e, ""));
        let p = root.join(name);
        if name.ends_with('/') {
            fs::create_dir_all(&p).unwrap();
        } else {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            let text = text
                .replace("\\n", "\n")
                .replace("\\r", "\r")
                .replace("\\t", "\t");
            fs::write(&p, text).unwrap();
        }
    }
}

/// The names a sender would list under `dir`, walking as the sync engine will.
fn walk(scope: &Scope, dir: &Path, rel: &str, side: Side, out: &mut BTreeSet<String>) {
    let inner = scope
        .enter(File::open(dir).unwrap().as_fd(), rel.as_bytes())
        .unwrap();
    let mut names: Vec<_> = fs::read_dir(dir).unwrap().flatten().collect();
    names.sort_by_key(|e| e.file_name());
    for e in names {
        let name = e.file_name().into_string().unwrap();
        let r = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let is_dir = e.file_type().unwrap().is_dir();
        if inner.excluded(r.as_bytes(), is_dir, side) {
            continue;
        }
        out.insert(r.clone());
        if is_dir {
            walk(&inner, &e.path(), &r, side, out);
        }
    }
}

fn listed(rules: FilterRules, src: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    walk(
        &Scope::root(Arc::new(rules)),
        src,
        "",
        Side::Sender,
        &mut out,
    );
    out
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn dir_merge_inherit_anchor_clear_no_inherit() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path();
    make(
        src,
        &[
            ".rules=- *.o\\n- /top\\n",
            "top",
            "x.o",
            "a/top",
            "a/y.o",
            "a/.rules=- /here\\n+ keep.o\\n",
            "a/here",
            "a/keep.o",
            "a/b/here",
            "a/b/keep.o",
            "a/b/z.o",
            "c/.rules=!\\n",
            "c/w.o",
        ],
    );
    let mut r = FilterRules::new();
    r.add_rule(b": .rules").unwrap();
    let got = listed(r, src);
    let want = set(&[
        ".rules",
        "a",
        "a/.rules",
        "a/b",
        "a/b/here",
        "a/b/keep.o",
        "a/keep.o",
        "a/top",
        "c",
        "c/.rules",
        "c/w.o",
    ]);
    assert_eq!(got, want);

    // n: the top file's rules stop at its own entries; e: the file excludes itself.
    let mut r = FilterRules::new();
    r.add_rule(b":ne .rules").unwrap();
    let got = listed(r, src);
    let want = set(&[
        "a",
        "a/b",
        "a/b/here",
        "a/b/keep.o",
        "a/b/z.o",
        "a/keep.o",
        "a/top",
        "a/y.o",
        "c",
        "c/w.o",
    ]);
    assert_eq!(got, want);

    // "-" / "+": the file holds bare patterns; a merge rule's modifiers reach its rules.
    let mut r = FilterRules::new();
    r.add_rule(b"dir-merge,- .rules").unwrap();
    let s = Scope::root(Arc::new(r));
    let s = s.enter(File::open(src).unwrap().as_fd(), b"").unwrap();
    assert!(ex(&s, "- *.o", false) && !ex(&s, "x.o", false));
}

#[test]
fn dir_merge_nested_word_split_and_merge_in_file() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path();
    make(
        src,
        &[
            ".rules=: .more\\n",
            ".more=- m1\\n",
            "m1",
            "d/m1",
            "d/.more=- m2\\n",
            "d/m2",
            "w/.words=one two\\tthree",
            "w/one",
            "w/three",
            "w/four",
            "g/.gitignore=*.log\\nbuild/\\n",
            "g/a.log",
            "g/build/x",
            "g/build2",
        ],
    );
    let mut r = FilterRules::new();
    r.add_rule(b": .rules").unwrap();
    r.add_rule(b":w- .words").unwrap();
    r.add_rule(b":- .gitignore").unwrap();
    let got = listed(r, src);
    let want = set(&[
        ".more",
        ".rules",
        "d",
        "d/.more",
        "g",
        "g/.gitignore",
        "g/build2",
        "w",
        "w/.words",
        "w/four",
    ]);
    assert_eq!(got, want);
}

#[test]
fn dir_merge_sided_and_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path();
    make(src, &[".f=- x\\n", "x"]);
    let mut r = FilterRules::new();
    r.add_rule(b":s .f").unwrap();
    let s = Scope::root(Arc::new(r))
        .enter(File::open(src).unwrap().as_fd(), b"")
        .unwrap();
    assert!(s.excluded(b"x", false, Side::Sender) && !s.excluded(b"x", false, Side::Receiver));
    make(src, &[".g=H x\\n"]);
    let mut r = FilterRules::new();
    r.add_rule(b":s .g").unwrap();
    let e = Scope::root(Arc::new(r))
        .enter(File::open(src).unwrap().as_fd(), b"")
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "specified-side merge file contains specified-side filter: <rule from .g line 1>"
    );
    make(src, &[".h=# fine\\n\\n;fine\\nbogus x\\n"]);
    let mut r = FilterRules::new();
    r.add_rule(b": .h").unwrap();
    let e = Scope::root(Arc::new(r))
        .enter(File::open(src).unwrap().as_fd(), b"")
        .unwrap_err();
    assert_eq!(e.to_string(), "Unknown filter rule: <rule from .h line 4>");
}

#[test]
fn merge_files_and_read_from() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path();
    make(
        p,
        &[
            "m=- *.o\\n+ x\\n",
            "ex=+ a\\nb\\r\\nc\\rd\\n#e\\n;f\\n",
            "z=g\0- h\0",
        ],
    );
    let mut r = FilterRules::with_cvs_env(CvsEnv::default());
    r.add_rule(format!(". {}", p.join("m").display()).as_bytes())
        .unwrap();
    r.read_from(&p.join("ex"), ListKind::Exclude, false)
        .unwrap();
    r.read_from(&p.join("z"), ListKind::Include, true).unwrap();
    let s = Scope::root(Arc::new(r));
    assert!(ex(&s, "q.o", false));
    for n in ["b", "c", "d", "h"] {
        assert!(ex(&s, n, false), "{n}");
    }
    for n in ["a", "x", "#e", ";f", "e", "g"] {
        assert!(!ex(&s, n, false), "{n}");
    }
    let mut r = FilterRules::new();
    let e = r
        .read_from(&p.join("missing"), ListKind::Include, false)
        .unwrap_err();
    assert!(
        e.to_string().starts_with("failed to open include file "),
        "{e}"
    );
}

#[test]
fn parent_scan_and_absolute_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path();
    make(
        top,
        &[
            ".pf=- /src/a\\n- /b\\n- deep\\n",
            "src/a",
            "src/b",
            "src/c/deep",
            "src/c/ok",
        ],
    );
    let src = top.join("src");
    let mut r = FilterRules::new();
    r.add_rule(b": ../.pf").unwrap();
    // The parent's file: "/src/a" is anchored at the parent, so it names src/a; "/b" names
    // top/b, which is outside the transfer.
    assert_eq!(listed(r, &src), set(&["b", "c", "c/ok"]));

    let abs = fs::canonicalize(&src).unwrap();
    let mut r = FilterRules::new();
    r.add_rule(format!("-/ {}/c/ok", abs.display()).as_bytes())
        .unwrap();
    assert_eq!(listed(r, &src), set(&["a", "b", "c", "c/deep"]));
}

// ---------------------------------------------------------------------------------------------
// against the real rsync

/// One option as both rsync and these rules take it.
enum Opt {
    Filter(&'static str),
    Exclude(&'static str),
    Include(&'static str),
    ExcludeFrom(&'static str),
    Cvs,
    F,
    DeleteExcluded,
}

fn rsync_ok() -> bool {
    Command::new("rsync")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn to_rules(opts: &[Opt], home: &Path, cwd: &Path) -> FilterRules {
    let mut r = FilterRules::with_cvs_env(CvsEnv {
        home: Some(home.into()),
        var: None,
    });
    let mut f_count = 0;
    for o in opts {
        match o {
            Opt::Filter(s) => {
                // merge files are named relative to rsync's working directory.
                let s = s.replace("CWD", &cwd.display().to_string());
                r.add_rule(s.as_bytes()).unwrap()
            }
            Opt::Exclude(s) => r.add_exclude(s.as_bytes()),
            Opt::Include(s) => r.add_include(s.as_bytes()),
            Opt::ExcludeFrom(f) => r.read_from(&cwd.join(f), ListKind::Exclude, false).unwrap(),
            Opt::Cvs => r.cvs_exclude(),
            Opt::F => {
                f_count += 1;
                let rule: &[u8] = if f_count == 1 {
                    b": /.rsync-filter"
                } else {
                    b"- .rsync-filter"
                };
                r.add_rule(rule).unwrap();
            }
            Opt::DeleteExcluded => r.set_delete_excluded(true),
        }
    }
    r
}

fn to_args(opts: &[Opt], cwd: &Path) -> Vec<String> {
    opts.iter()
        .map(|o| match o {
            Opt::Filter(s) => format!("--filter={}", s.replace("CWD", &cwd.display().to_string())),
            Opt::Exclude(s) => format!("--exclude={s}"),
            Opt::Include(s) => format!("--include={s}"),
            Opt::ExcludeFrom(f) => format!("--exclude-from={f}"),
            Opt::Cvs => "-C".into(),
            Opt::F => "-F".into(),
            Opt::DeleteExcluded => "--delete-excluded".into(),
        })
        .collect()
}

/// rsync's dry run: the names it would send, and those it would delete.
fn rsync_run(cwd: &Path, args: &[String], delete: bool) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut cmd = Command::new("rsync");
    cmd.current_dir(cwd)
        .env("HOME", cwd.join("home"))
        .env_remove("CVSIGNORE");
    cmd.args(["-r", "--dry-run", "--out-format=%n"]).args(args);
    if delete {
        cmd.arg("--delete");
    }
    let out = cmd.args(["src/", "dst/"]).output().unwrap();
    assert!(
        out.status.success(),
        "rsync {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut sent = BTreeSet::new();
    let mut deleted = BTreeSet::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        if let Some(d) = line.strip_prefix("deleting ") {
            deleted.insert(d.trim_end_matches('/').to_owned());
        } else if line != "./" && !line.is_empty() {
            sent.insert(line.trim_end_matches('/').to_owned());
        }
    }
    (sent, deleted)
}

/// What rsync --delete removes from dst: entries not sent and not protected, a removed
/// directory with all it holds (the cases keep nothing protected inside one).
fn deletions(
    scope: &Scope,
    dir: &Path,
    rel: &str,
    sent: &BTreeSet<String>,
    out: &mut BTreeSet<String>,
) {
    let inner = scope
        .enter(File::open(dir).unwrap().as_fd(), rel.as_bytes())
        .unwrap();
    for e in fs::read_dir(dir).unwrap().flatten() {
        let name = e.file_name().into_string().unwrap();
        let r = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let is_dir = e.file_type().unwrap().is_dir();
        if sent.contains(&r) {
            if is_dir {
                deletions(&inner, &e.path(), &r, sent, out);
            }
        } else if !inner.excluded(r.as_bytes(), is_dir, Side::Receiver) {
            out.insert(r.clone());
            if is_dir {
                let mut all = BTreeSet::new();
                walk(
                    &Scope::root(Arc::new(FilterRules::new())),
                    &e.path(),
                    &r,
                    Side::Sender,
                    &mut all,
                );
                out.extend(all);
            }
        }
    }
}

const TREE: &[&str] = &[
    "a.c",
    "a.o",
    "b.txt",
    "core",
    "foo/",
    "foo/bar",
    "foo/bar.c",
    "foo/x/bar",
    "foo/x/y/bar",
    "foo/z.o",
    "top",
    "sub/top",
    "sub/foo/",
    "sub/foo/q/bar",
    "keep/",
    "keep/k1",
    "keep/in/k2",
    "d1/",
    "d1/f1",
    "[ab]",
    "n1",
    "n22",
    "x.tmp",
    "CVS/",
    "CVS/Entries",
    "z.bak",
    "home/.cvsignore=*.txt\\n",
    "exfile=*.tmp\\n+ n1\\nn*\\n",
    "src/.rsync-filter=- *.o\\n- /top\\n",
    "src/sub/.rsync-filter=- /foo\\n+ top\\n",
    "src/.gitignore=*.bak\\nd1/\\n",
    "src/foo/.gitignore=/bar\\n",
    "src/keep/.rules=- k1\\n",
    "src/keep/in/.rules=- k2\\n",
    "src/.nrules=- k2\\n- f1\\n",
    "rules.merge=- *.c\\n+ *.txt\\n",
    "pscan=- /src/n1\\n- /n22\\n- b.txt\\n- /src/foo/x/\\n",
];

fn cases() -> Vec<(&'static str, Vec<Opt>)> {
    use Opt::*;
    vec![
        ("exclude *.o", vec![Exclude("*.o")]),
        ("anchored /top", vec![Exclude("/top")]),
        ("dir only foo/", vec![Exclude("foo/")]),
        ("foo/*/bar", vec![Exclude("foo/*/bar")]),
        ("/foo/**/bar", vec![Exclude("/foo/**/bar")]),
        (
            "dirs and .c only",
            vec![Filter("+ */"), Filter("+ *.c"), Filter("- *")],
        ),
        (
            "foo and foo/bar.c",
            vec![Filter("+ foo/"), Filter("+ foo/bar.c"), Filter("- *")],
        ),
        ("keep/***", vec![Filter("+ keep/***"), Filter("- *")]),
        ("negated -! */", vec![Filter("-! */")]),
        (
            "hide and protect",
            vec![Filter("H *.txt"), Filter("P a.c"), Filter("show *")],
        ),
        (
            "classes",
            vec![
                Exclude("[a-c]*"),
                Exclude("n[[:digit:]][[:digit:]]"),
                Exclude("\\[ab]"),
            ],
        ),
        ("star-star", vec![Exclude("**/x/*"), Exclude("sub/**")]),
        ("clear", vec![Exclude("*.o"), Exclude("!"), Exclude("*.c")]),
        ("include then exclude", vec![Include("n1"), Exclude("n*")]),
        ("exclude-from", vec![ExcludeFrom("exfile")]),
        ("merge file", vec![Filter("merge CWD/rules.merge")]),
        ("merge,- file", vec![Filter(".- CWD/rules.merge")]),
        ("gitignore", vec![Filter(":- .gitignore")]),
        ("-F", vec![F]),
        ("-FF", vec![F, F]),
        ("dir-merge e", vec![Filter(":e .rules")]),
        (
            "dir-merge n",
            vec![Filter("dir-merge,n .nrules"), Filter(": .rules")],
        ),
        ("cvs", vec![Cvs]),
        ("cvs after a rule", vec![Cvs, Include("core")]),
        (
            "perishable, sided",
            vec![Filter("-p *.tmp"), Filter("-s *.c"), Filter("-r *.o")],
        ),
        ("parent scan", vec![Filter(": ../pscan")]),
        ("parent scan, n", vec![Filter(":n ../pscan")]),
    ]
}

#[test]
fn compare_with_rsync() {
    if !rsync_ok() {
        println!("skipped: rsync is not installed (command -v rsync finds nothing)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let mut entries: Vec<String> = Vec::new();
    for e in TREE {
        if e.contains('=') || e.starts_with("home/") {
            entries.push(e.to_string());
        } else {
            entries.push(format!("src/{e}"));
        }
    }
    let entries: Vec<&str> = entries.iter().map(String::as_str).collect();
    make(cwd, &entries);
    fs::create_dir(cwd.join("dst")).unwrap();
    let mut n = 0;
    for (what, opts) in cases() {
        let (sent, _) = rsync_run(cwd, &to_args(&opts, cwd), false);
        let ours = listed(to_rules(&opts, &cwd.join("home"), cwd), &cwd.join("src"));
        assert_eq!(ours, sent, "case {what:?}: ours, then rsync's");
        n += 1;
    }
    println!("{n} filter cases agree with rsync");
}

#[test]
fn compare_deletions_with_rsync() {
    if !rsync_ok() {
        println!("skipped: rsync is not installed (command -v rsync finds nothing)");
        return;
    }
    use Opt::*;
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    make(
        cwd,
        &[
            "src/a",
            "src/d/b",
            "dst/a",
            "dst/old.o",
            "dst/gone",
            "dst/p.txt",
            "dst/r.txt",
            "dst/d/b",
            "dst/d/x.o",
            "dst/d/y",
            "dst/e/f",
            "home/",
        ],
    );
    let cases: Vec<(&str, Vec<Opt>)> = vec![
        ("plain", vec![]),
        ("exclude protects", vec![Exclude("*.o")]),
        ("delete-excluded", vec![Exclude("*.o"), DeleteExcluded]),
        (
            "protect and risk",
            vec![Filter("R r.txt"), Filter("P *.txt"), Filter("H *.o")],
        ),
        ("sided", vec![Filter("-s gone"), Filter("-r y")]),
    ];
    for (what, opts) in cases {
        let (_, deleted) = rsync_run(cwd, &to_args(&opts, cwd), true);
        let rules = Arc::new(to_rules(&opts, &cwd.join("home"), cwd));
        let mut sent = BTreeSet::new();
        walk(
            &Scope::root(rules.clone()),
            &cwd.join("src"),
            "",
            Side::Sender,
            &mut sent,
        );
        let mut ours = BTreeSet::new();
        deletions(&Scope::root(rules), &cwd.join("dst"), "", &sent, &mut ours);
        assert_eq!(ours, deleted, "case {what:?}: ours, then rsync's");
    }
}

#[test]
fn xattr_rules_decide_attribute_names_only() {
    let mut rules = FilterRules::new();
    rules.add_rule(b"-x_system.*").unwrap();
    rules.add_rule(b"+x user.keep").unwrap();
    rules.add_rule(b"-x user.*").unwrap();
    assert!(rules.xattr_excluded(b"system.posix_acl_access"));
    assert!(!rules.xattr_excluded(b"user.keep"));
    assert!(rules.xattr_excluded(b"user.other"));
    assert!(!rules.xattr_excluded(b"security.selinux"));
    // An xattr rule never matches a file name.
    let scope = Scope::root(std::sync::Arc::new(rules));
    assert!(!scope.excluded(b"system.x", false, Side::Sender));
}
