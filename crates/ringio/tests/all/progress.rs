//! `ringio cp --progress` under a pseudo-terminal (util-linux `script` gives the command one),
//! and with stderr not a terminal, where nothing is drawn.

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common::{Cp, Prng, Scratch};

const DIRS: usize = 20;
const FILES_PER_DIR: usize = 100;
const FILE_SIZE: usize = 32 << 10;

/// 2,000 files of 32 KiB in 20 directories: a copy that takes a few tenths of a second.
fn make_tree(root: &Path) {
    let mut rng = Prng::new(1);
    for d in 0..DIRS {
        let dir = root.join(format!("d{d}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            let mut content = vec![0u8; FILE_SIZE];
            rng.fill(&mut content);
            fs::write(dir.join(format!("f{f}")), content).unwrap();
        }
    }
}

/// `script`, when it is there and works without a terminal on stdin.
fn have_script() -> bool {
    Command::new("script")
        .args(["-qec", "true", "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs a shell command line in a pseudo-terminal; returns what the terminal showed.
fn in_pty(cwd: &Path, command: &str) -> Output {
    Command::new("script")
        .args(["-qec", command, "/dev/null"])
        .current_dir(cwd)
        .env("COLUMNS", "160")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ringio() -> &'static str {
    env!("CARGO_BIN_EXE_ringio")
}

#[test]
fn progress_on_a_terminal_shows_totals_and_an_eta() {
    if !have_script() {
        skip!("util-linux `script` is not available");
    }
    let tmp = Scratch::new();
    make_tree(&tmp.path().join("src"));
    let out = in_pty(
        tmp.path(),
        &format!("stty cols 160; '{}' cp -r --progress src dst", ringio()),
    );
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    let files = DIRS * FILES_PER_DIR;
    assert!(shown.contains("ETA"), "no ETA in: {shown}");
    assert!(
        shown.contains(&format!("files {files}/{files}")),
        "no file total in: {shown}"
    );
    // 2,000 × 32 KiB = 62.50 MiB: the bar's total.
    assert!(shown.contains("/62.50 MiB"), "no byte total in: {shown}");
    assert!(shown.contains("100%"), "{shown}");
    assert_eq!(
        fs::read(tmp.path().join("dst/d7/f42")).unwrap(),
        fs::read(tmp.path().join("src/d7/f42")).unwrap()
    );
}

#[test]
fn progress_draws_nothing_when_stderr_is_not_a_terminal() {
    let tmp = Scratch::new();
    make_tree(&tmp.path().join("src"));
    // stderr a pipe.
    let out = Cp::new()
        .args(["-r", "--progress", "src", "dst"])
        .current_dir(tmp.path())
        .run();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_no_drawing(&err);
    assert!(
        err.contains("2000 entries"),
        "the summary line is still said: {err}"
    );

    // stdout a terminal, stderr a file.
    if !have_script() {
        skip!("the terminal half: util-linux `script` is not available");
    }
    let out = in_pty(
        tmp.path(),
        &format!("'{}' cp -r --progress src dst2 2>err.txt", ringio()),
    );
    assert!(out.status.success());
    assert_no_drawing(&String::from_utf8_lossy(&out.stdout));
    assert_no_drawing(&fs::read_to_string(tmp.path().join("err.txt")).unwrap());
}

fn assert_no_drawing(text: &str) {
    assert!(!text.contains("ETA"), "{text:?}");
    assert!(!text.contains('\r') && !text.contains('\x1b'), "{text:?}");
}
