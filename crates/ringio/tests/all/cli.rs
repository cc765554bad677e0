//! The command line itself: help text, completions, argument errors, option spellings.

use std::collections::BTreeSet;
use std::fs;

use crate::common::*;

/// The words of a help text that look like options: "-r,", "[alias: -R]" and
/// "--preserve[=<LIST>]" give "-r", "-R" and "--preserve".
fn option_tokens(help: &str) -> BTreeSet<String> {
    help.split_whitespace()
        .map(|w| w.trim_matches(|c| matches!(c, ',' | '[' | ']' | '(' | ')' | '.' | ';' | ':')))
        .filter(|w| w.starts_with('-'))
        .map(|w| {
            w.split(['=', '[', '<', ' '])
                .next()
                .unwrap_or(w)
                .to_string()
        })
        .collect()
}

#[test]
fn cp_help_mentions_every_option() {
    let out = ringio(["cp", "--help"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let help = String::from_utf8_lossy(&out.stdout);
    let tokens = option_tokens(&help);
    let missing: Vec<&str> = [
        "-r",
        "-R",
        "--recursive",
        "-a",
        "--archive",
        "-d",
        "-p",
        "--preserve",
        "--no-preserve",
        "-P",
        "--no-dereference",
        "-L",
        "--dereference",
        "-H",
        "-n",
        "--no-clobber",
        "-f",
        "--force",
        "-u",
        "--update",
        "-v",
        "--verbose",
        "--progress",
        "-t",
        "--target-directory",
        "-T",
        "--no-target-directory",
        "--engine",
        "--bs",
        "--threads",
    ]
    .into_iter()
    .filter(|opt| !tokens.contains(*opt))
    .collect();
    assert!(
        missing.is_empty(),
        "`ringio cp --help` does not mention {missing:?}:\n{help}"
    );
    for engine in engines() {
        assert!(
            help.contains(engine),
            "`ringio cp --help` does not list engine {engine}:\n{help}"
        );
    }
}

/// `ringio man DIR` writes a page for the top command and for every subcommand, nested ones
/// included, and the pages carry the options.
#[test]
fn man_writes_a_page_for_every_command() {
    let scratch = Scratch::new();
    let dir = scratch.join("man/man1");
    let out = ringio([std::ffi::OsStr::new("man"), dir.as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    for page in [
        "ringio",
        "ringio-cp",
        "ringio-verify",
        "ringio-dup",
        "ringio-read",
        "ringio-write",
        "ringio-syscost",
        "ringio-bench",
        "ringio-bench-copy",
        "ringio-bench-gen",
        "ringio-bench-server",
        "ringio-serve",
        "ringio-load",
        "ringio-man",
        "ringio-completions",
    ] {
        let text = fs::read_to_string(dir.join(format!("{page}.1")))
            .unwrap_or_else(|e| panic!("{page}.1: {e}"));
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page}.1 is not roff"
        );
    }
    let cp = fs::read_to_string(dir.join("ringio-cp.1")).unwrap();
    assert!(cp.contains("reflink"), "ringio-cp.1 lacks --reflink");
    assert!(cp.contains("progress"), "ringio-cp.1 lacks --progress");
    let top = fs::read_to_string(dir.join("ringio.1")).unwrap();
    assert!(
        top.contains(r"ringio\-cp(1)"),
        "ringio.1 does not point to ringio-cp(1)"
    );
}

#[test]
fn completions_print_scripts() {
    for shell in ["bash", "zsh", "fish"] {
        let out = ringio(["completions", shell]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "completions {shell}: {}",
            describe(&out)
        );
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(
            script.contains("ringio"),
            "the {shell} script does not mention ringio"
        );
        assert!(
            script.contains("engine"),
            "the {shell} script does not complete --engine"
        );
    }
}

#[test]
fn bad_engine_is_a_usage_error() {
    let scratch = Scratch::new();
    write_file(scratch.join("f"), "f");
    let out = Cp::new()
        .current_dir(scratch.path())
        .args(["--engine", "bogus", "f", "g"])
        .run();
    // cp's usage errors exit 1, as GNU cp's do.
    assert_exit(&out, 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bogus") && err.contains("--engine"),
        "unclear error: {err}"
    );
    for engine in engines() {
        assert!(
            err.contains(engine),
            "the error does not list the engine {engine}: {err}"
        );
    }
    assert!(
        !scratch.join("g").exists(),
        "copied despite the usage error"
    );
}

/// Each engine the binary has is accepted.
#[test]
fn every_engine_is_accepted() {
    let scratch = Scratch::new();
    write_file(scratch.join("f"), "f");
    for engine in engines() {
        let dst = format!("g-{engine}");
        let out = Cp::new()
            .current_dir(scratch.path())
            .engine(engine)
            .args(["f", &dst])
            .run();
        assert_success(&out);
        assert_eq!(fs::read(scratch.join(&dst)).unwrap(), b"f");
    }
}

/// -r, -R and --recursive are one option; so are -t DIR and --target-directory DIR, and
/// -T and --no-target-directory.
#[test]
fn option_spellings() {
    let scratch = Scratch::new();
    let tree = TreeSpec::plain(81).build(&scratch.join("src"));
    fs::create_dir(scratch.join("t")).unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["-r", "src", "o1"], "o1"),
        (&["-R", "src", "o2"], "o2"),
        (&["--recursive", "src", "o3"], "o3"),
        (&["--recursive", "--target-directory", "t", "src"], "t/src"),
        (&["--recursive", "--no-target-directory", "src", "o4"], "o4"),
        (&["--archive", "src", "o5"], "o5"),
    ];
    for (args, dst) in cases {
        let out = Cp::new()
            .current_dir(scratch.path())
            .args(args.iter())
            .run();
        assert_success(&out);
        assert_trees_equal(&tree.root, &scratch.join(dst), Check::CONTENT);
    }
}

/// Values that make no sense are refused before anything is copied.
#[test]
fn bad_values_are_refused() {
    let scratch = Scratch::new();
    write_file(scratch.join("f"), "f");
    let cases: &[&[&str]] = &[
        &["--preserve=colour", "f", "g"],
        &["--no-preserve=colour", "f", "g"],
        &["--bs", "lots", "f", "g"],
        &["--threads", "many", "f", "g"],
    ];
    for args in cases {
        let out = Cp::new()
            .current_dir(scratch.path())
            .args(args.iter())
            .run();
        assert!(
            !out.status.success(),
            "ringio cp {args:?} succeeded: {}",
            describe(&out)
        );
        let bad = args[0].split('=').nth(1).unwrap_or(args[1]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(bad),
            "ringio cp {args:?}: the error does not name {bad:?}: {err}"
        );
        assert!(
            !scratch.join("g").exists(),
            "ringio cp {args:?} copied anyway"
        );
    }
}

/// Too few operands: an error, nothing copied.
#[test]
fn missing_operands() {
    let scratch = Scratch::new();
    write_file(scratch.join("f"), "f");
    for args in [&[][..], &["f"], &["-t", "."]] {
        let out = Cp::new()
            .current_dir(scratch.path())
            .args(args.iter())
            .run();
        assert!(
            !out.status.success(),
            "ringio cp {args:?} succeeded: {}",
            describe(&out)
        );
        assert!(!out.stderr.is_empty(), "ringio cp {args:?} failed silently");
    }
    let names: Vec<_> = fs::read_dir(scratch.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "something was created: {names:?}");
}

fn engine_probe(_engine: &str) {}
engine_tests!(engine_probe);

/// `engine_tests!` runs a test on every engine the binary has: a new `Engine` variant without
/// its test function fails here.
#[test]
fn every_engine_has_its_tests() {
    for engine in engines() {
        assert!(
            engine_probe::COVERED.contains(&engine),
            "engine_tests! does not run {engine}"
        );
    }
}
