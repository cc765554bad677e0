//! Defects found outside sync by attacking dup, the server and cp's log file: a copy more
//! readable than its source, a signal that waits on a FIFO, a log file that is not a file.

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common::*;

/// Every `ringio dup` method.
const DUP_METHODS: &[&str] = &[
    "rw",
    "bigbuf",
    "sendfile",
    "splice",
    "copy-range",
    "uring",
    "reflink",
    "auto",
];

/// `ringio ARGS` under `umask` (set in a shell that then becomes ringio).
fn ringio_with_umask(umask: u32, args: &[&Path]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("umask {umask:03o} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_ringio"))
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
        .expect("run ringio through sh")
}

/// What GNU cp gives a new copy of a file of `mode` under `umask`: the source's permission
/// bits (setuid, setgid and sticky dropped) less the umask.
fn cp_new_file_mode(mode: u32, umask: u32) -> u32 {
    mode & 0o777 & !umask
}

/// A copy made by `ringio dup` is never more open than its source: a private file stays
/// private, with every method, under every umask, and whatever the source's mode (the mode cp
/// gives a new file). An existing DST keeps its mode, as with cp.
#[test]
fn dup_copies_get_at_most_the_source_permissions_with_every_method() {
    let s = Scratch::new();
    let src = s.join("src");
    fs::write(&src, b"private bytes\n".repeat(1000)).unwrap();
    let dup = Path::new("dup");
    let m = Path::new("--method");
    for (mode, umask) in [
        (0o600, 0o022),
        (0o640, 0o022),
        (0o640, 0o077),
        (0o400, 0o022),
        (0o4755, 0o022),
        (0o777, 0o002),
        (0o666, 0o000),
    ] {
        chmod(&src, mode);
        for method in DUP_METHODS {
            let dst = s.join(format!("dst-{method}-{mode:o}-{umask:o}"));
            let out = ringio_with_umask(umask, &[dup, m, Path::new(method), &src, &dst]);
            if *method == "reflink" && !out.status.success() {
                assert_stderr_has(&out, "cannot clone");
                assert!(!dst.exists(), "a failed dup leaves no file");
                continue;
            }
            assert_exit(&out, 0);
            assert_eq!(
                mode_of(&dst),
                cp_new_file_mode(mode, umask),
                "dup --method {method} of a {mode:o} file under umask {umask:o}"
            );
            assert_eq!(fs::read(&dst).unwrap(), fs::read(&src).unwrap());
        }
    }
    // GNU cp agrees, where it is installed.
    if gnu_cp_available() {
        chmod(&src, 0o600);
        let out = gnu_cp(s.path(), ["src", "by-cp"]);
        assert_success(&out);
        let dst = s.join("by-dup");
        assert_exit(&ringio_with_umask(0o022, &[dup, &src, &dst]), 0);
        assert_eq!(mode_of(&dst), mode_of(s.join("by-cp")));
    }
    // An existing DST keeps its mode (cp's rule), however open the source is.
    chmod(&src, 0o644);
    let dst = s.join("existing");
    fs::write(&dst, b"old").unwrap();
    chmod(&dst, 0o600);
    for method in DUP_METHODS.iter().filter(|m| **m != "reflink") {
        assert_exit(
            &ringio_with_umask(0o022, &[dup, m, Path::new(method), &src, &dst]),
            0,
        );
        assert_eq!(mode_of(&dst), 0o600, "{method} over an existing 0600 file");
    }
}

/// `dup --compare SRC DST` writes DST with the fastest method: DST too gets at most the
/// source's permissions, and the scratch directory of the per-method copies is gone.
#[test]
fn dup_compare_writes_dst_with_at_most_the_source_permissions() {
    let s = Scratch::new();
    let src = s.join("src");
    fs::write(&src, vec![7u8; 200_000]).unwrap();
    chmod(&src, 0o600);
    let dst = s.join("dst");
    let args: [&Path; 6] = [
        Path::new("dup"),
        &src,
        &dst,
        Path::new("--compare"),
        Path::new("--runs"),
        Path::new("1"),
    ];
    let out = ringio_with_umask(0o022, &args);
    assert_exit(&out, 0);
    assert_eq!(mode_of(&dst), 0o600);
    let left: Vec<_> = fs::read_dir(s.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "scratch left behind: {left:?}");
}
