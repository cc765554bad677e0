//! What users and programs read: `sync --json` (one document on stdout, its errors with their
//! path, operation and errno as fields), `verify --manifest`'s output (differences only, one
//! summary line, `-v` for what a manifest cannot cover), and `--progress` with a verify phase
//! when stderr is no terminal (the tests run without one).

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::common::*;

/// What `sync -a` keeps (access times move as the trees are read).
const SYNC_A: Check = Check {
    atime: false,
    ..Check::ARCHIVE
};

/// The whole of stdout, parsed as one JSON document (nothing before or after it).
#[track_caller]
fn document(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {}", describe(out)))
}

fn stdout_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A source tree: regular files at three depths (one empty), a symlink and an empty directory;
/// returns (regular files, their bytes, directories below the root).
fn source_tree(src: &Path) -> (u64, u64, u64) {
    let files: [(&str, &[u8]); 5] = [
        ("a", b"alpha\n"),
        ("empty", b""),
        ("sub/b", b"bravo bravo\n"),
        ("sub/deeper/c", &[7u8; 70_000]),
        ("sub/deeper/d", b"delta"),
    ];
    for (name, bytes) in files {
        write_file(src.join(name), bytes);
    }
    fs::create_dir_all(src.join("void")).unwrap();
    symlink("a", src.join("link")).unwrap();
    let bytes = files.iter().map(|(_, b)| b.len() as u64).sum();
    (files.len() as u64, bytes, 3)
}

/// rsync's `--stats` figure named `label` (`Number of regular files transferred: 5`).
fn rsync_figure(stats: &str, label: &str) -> Option<u64> {
    let line = stats.lines().find(|l| l.starts_with(label))?;
    let value = line[label.len()..].trim_start_matches(':').trim();
    let digits: String = value
        .split_whitespace()
        .next()?
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A clean `sync -av --json`: stdout is one document whose counts are the tree's (and rsync's
/// `--stats` where rsync is installed), its error list empty; the -v lines went to stderr. A
/// second run transfers nothing and says so.
#[test]
fn sync_json_on_a_clean_run_counts_the_tree() {
    let s = Scratch::new();
    let src = s.join("src");
    let (files, bytes, dirs) = source_tree(&src);
    let run = |dst: &str| {
        Cp::bare()
            .args(["sync", "-av", "--json", "src/", dst])
            .current_dir(s.path())
            .run()
    };
    let out = run("dst/");
    assert_exit(&out, 0);
    let doc = document(&out);
    assert_eq!(doc["files"], files, "{doc}");
    assert_eq!(doc["bytes"], bytes, "{doc}");
    assert_eq!(doc["errors"], 0, "{doc}");
    assert_eq!(doc["error_details"], serde_json::json!([]), "{doc}");
    assert_eq!(doc["error_messages"], serde_json::json!([]), "{doc}");
    assert_eq!(doc["exit"], 0, "{doc}");
    assert_eq!(doc["dry_run"], false, "{doc}");
    let stats = &doc["stats"];
    assert_eq!(stats["files"]["reg"], files, "{doc}");
    // The root `.` is a directory of the transfer too.
    assert_eq!(stats["files"]["dir"], dirs + 1, "{doc}");
    assert_eq!(stats["files"]["link"], 1, "{doc}");
    assert_eq!(stats["transferred"], files, "{doc}");
    assert_eq!(stats["transferred_size"], bytes, "{doc}");
    assert_eq!(doc["destinations"][0]["dest"], "dst/", "{doc}");
    assert_eq!(doc["destinations"][0]["files"], files, "{doc}");
    assert_eq!(doc["phases"][0]["phase"], "sync", "{doc}");
    assert_eq!(doc["phases"][0]["bytes"], bytes, "{doc}");
    assert!(doc["seconds"].as_f64().unwrap() >= 0.0, "{doc}");
    // -v's lines, on stderr: the document is stdout's alone.
    let err = String::from_utf8_lossy(&out.stderr);
    for line in ["sub/deeper/c", "link -> a", "sent "] {
        assert!(
            err.lines().any(|l| l.starts_with(line)),
            "{line}: {}",
            describe(&out)
        );
    }
    assert_trees_equal(&src, &s.join("dst"), SYNC_A);

    let again = document(&run("dst/"));
    assert_eq!(
        (&again["files"], &again["bytes"], &again["exit"]),
        (&0.into(), &0.into(), &0.into()),
        "{again}"
    );
    assert_eq!(again["stats"]["files"]["reg"], files, "{again}");

    let rsync = Command::new("rsync")
        .args(["-a", "--stats", "src/", "by-rsync/"])
        .current_dir(s.path())
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output();
    let Some(rsync) = rsync.ok().filter(|o| o.status.success()) else {
        return;
    };
    let stats = String::from_utf8_lossy(&rsync.stdout);
    assert_eq!(
        rsync_figure(&stats, "Number of regular files transferred"),
        doc["files"].as_u64(),
        "{stats}"
    );
    assert_eq!(
        rsync_figure(&stats, "Total transferred file size"),
        doc["bytes"].as_u64(),
        "{stats}"
    );
    assert_eq!(
        rsync_figure(&stats, "Total file size"),
        doc["stats"]["total_size"].as_u64(),
        "{stats}"
    );
}

/// An unreadable source file and one that vanishes after its directory was listed: each is an
/// object of `error_details` with its path, operation, errno and reason beside the message
/// printed on stderr; the counts and the exit status agree with the process's.
#[test]
fn sync_json_errors_carry_path_operation_and_errno() {
    let s = Scratch::new();
    let src = s.join("src");
    write_file(src.join("a"), "readable");
    write_file(src.join("secret"), "not for nobody");
    write_file(src.join("sub/gone"), "soon gone");
    let mut cp = Cp::bare()
        .args(["sync", "-r", "--json", "src/", "dst/"])
        .current_dir(s.path())
        .env("RINGIO_TEST_VANISH_AFTER_LIST", "gone");
    if is_root() {
        // Root reads a mode-000 file: the run is nobody's.
        s.give_to(NOBODY.0, NOBODY.1);
        chown_tree(&src, NOBODY.0, NOBODY.1);
        cp = cp.run_as(NOBODY.0, NOBODY.1);
    }
    chmod(src.join("secret"), 0);
    let out = cp.run();
    // A failed file (23) outranks a vanished one (24), as in rsync.
    assert_exit(&out, 23);
    let doc = document(&out);
    assert_eq!(doc["exit"], 23, "{doc}");
    let details = doc["error_details"].as_array().unwrap();
    assert_eq!(doc["errors"], details.len(), "{doc}");
    assert_eq!(details.len(), 2, "{doc}");
    let find = |name: &str| {
        details
            .iter()
            .find(|d| d["path"].as_str().is_some_and(|p| p.ends_with(name)))
            .unwrap_or_else(|| panic!("no error for {name}: {doc}"))
    };
    let secret = find("src/secret");
    assert_eq!(secret["op"], "open", "{doc}");
    assert_eq!(secret["errno"], libc::EACCES, "{doc}");
    assert_eq!(secret["reason"], "Permission denied", "{doc}");
    let gone = find("src/sub/gone");
    assert_eq!(gone["op"], "vanished", "{doc}");
    assert_eq!(gone["errno"], libc::ENOENT, "{doc}");
    assert_eq!(gone["reason"], "No such file or directory", "{doc}");
    // Each message is the line stderr shows, and error_messages lists them in the same order.
    for (i, d) in details.iter().enumerate() {
        let message = d["message"].as_str().unwrap();
        assert_stderr_has(&out, &format!("ringio sync: {message}\n"));
        assert_eq!(doc["error_messages"][i], d["message"], "{doc}");
    }
    assert!(
        gone["message"].as_str().unwrap().contains("vanished"),
        "{doc}"
    );
    // What could be read was synced and counted.
    assert_eq!(fs::read(s.join("dst/a")).unwrap(), b"readable");
    assert_eq!(doc["destinations"][0]["errors"], 2, "{doc}");
}

/// A missing operand: rsync's `link_stat` message, with the call (`stat`), the operand and
/// ENOENT as fields; `--json` and `--manifest -` both want stdout: refused before the run.
#[test]
fn sync_json_names_a_missing_operand_and_refuses_to_share_stdout() {
    let s = Scratch::new();
    write_file(s.join("src/a"), "a");
    let out = Cp::bare()
        .args(["sync", "-r", "--json", "missing", "src/", "dst/"])
        .current_dir(s.path())
        .run();
    assert_exit(&out, 23);
    let doc = document(&out);
    let detail = &doc["error_details"][0];
    assert_eq!(
        (&detail["op"], &detail["path"], &detail["errno"]),
        (&"stat".into(), &"missing".into(), &libc::ENOENT.into()),
        "{doc}"
    );
    assert_eq!(
        detail["message"], "link_stat 'missing' failed: No such file or directory",
        "{doc}"
    );
    assert_eq!(fs::read(s.join("dst/a")).unwrap(), b"a");

    let out = Cp::bare()
        .args(["sync", "-r", "--json", "--manifest", "-", "src/", "dst2/"])
        .current_dir(s.path())
        .run();
    assert_exit(&out, 1);
    assert!(out.stdout.is_empty(), "{}", describe(&out));
    assert_stderr_has(&out, "cannot be shared with -v, -i, --out-format or --json");
    assert!(!s.join("dst2").exists());
}

/// A manifest that cannot be written after the run is an error of the document too, with
/// its call and path; the exit status is rsync's file I/O error (11).
#[test]
fn sync_json_keeps_a_manifest_that_cannot_be_written() {
    let s = Scratch::new();
    write_file(s.join("src/a"), "a");
    let out = Cp::bare()
        .args([
            "sync",
            "-r",
            "--json",
            "--manifest",
            "missing/m.sum",
            "src/",
            "dst/",
        ])
        .current_dir(s.path())
        .run();
    assert_exit(&out, 11);
    let doc = document(&out);
    assert_eq!(doc["exit"], 11, "{doc}");
    assert_eq!(doc["errors"], 1, "{doc}");
    let detail = &doc["error_details"][0];
    assert_eq!(
        (&detail["op"], &detail["path"]),
        (&"write".into(), &"missing/m.sum".into()),
        "{doc}"
    );
    let message = detail["message"].as_str().unwrap();
    assert!(
        message.starts_with("cannot write the manifest 'missing/m.sum'"),
        "{doc}"
    );
    assert_stderr_has(&out, &format!("ringio sync: {message}\n"));
}

/// `--tee`: one document for the run, one entry of `destinations` per tree, each with its own
/// counts; `--progress` and `--stats` lines stay off stdout.
#[test]
fn sync_json_lists_each_tee_destination() {
    let s = Scratch::new();
    let (files, bytes, _) = source_tree(&s.join("src"));
    let out = Cp::bare()
        .args([
            "sync",
            "-a",
            "--progress",
            "--stats",
            "--json",
            "--tee",
            "t2",
            "src/",
            "dst/",
        ])
        .current_dir(s.path())
        .run();
    assert_exit(&out, 0);
    let doc = document(&out);
    let each = doc["destinations"].as_array().unwrap();
    assert_eq!(each.len(), 2, "{doc}");
    assert_eq!(each[1]["dest"], "t2", "{doc}");
    for d in each {
        assert_eq!(
            (&d["files"], &d["bytes"]),
            (&files.into(), &bytes.into()),
            "{doc}"
        );
        assert_eq!((&d["errors"], &d["exit"]), (&0.into(), &0.into()), "{doc}");
    }
    assert_stderr_has(&out, "Number of regular files transferred: 5");
    assert_stderr_has(&out, "xfr#");
    assert_trees_equal(&s.join("src"), &s.join("t2"), SYNC_A);
}

/// A copy with a sha256 manifest of `src` at `dst` (a symlink in it too), made by ringio.
fn hashed_copy(s: &Scratch) -> (std::path::PathBuf, std::path::PathBuf) {
    let src = s.join("src");
    source_tree(&src);
    let (dst, manifest) = (s.join("dst"), s.join("m.sha256"));
    let out = Cp::new()
        .args(["-a", "--hash", "sha256", "--manifest"])
        .arg(&manifest)
        .arg("-T")
        .arg(&src)
        .arg(&dst)
        .run();
    assert_success(&out);
    (dst, manifest)
}

/// `verify --manifest` on a clean tree prints one summary line and nothing else; with a
/// flipped byte, the one difference on stdout and the summary; `-v` adds what a manifest
/// cannot cover (the symlink), and nothing else. The exit codes stay 0 and 1.
#[test]
fn verify_manifest_prints_differences_and_one_summary_line() {
    let s = Scratch::new();
    let (dst, manifest) = hashed_copy(&s);
    let verify = |extra: &[&str]| {
        Cp::bare()
            .arg("verify")
            .args(extra)
            .arg("--manifest")
            .arg(&manifest)
            .arg(&dst)
            .run()
    };
    let out = verify(&[]);
    assert_exit(&out, 0);
    assert!(out.stdout.is_empty(), "{}", describe(&out));
    let summary = stderr_lines(&out);
    assert_eq!(summary.len(), 1, "{}", describe(&out));
    assert!(summary[0].contains("5 files"), "{}", describe(&out));
    assert!(
        summary[0].contains(": no differences"),
        "{}",
        describe(&out)
    );
    assert!(summary[0].contains("1 symlink(s)"), "{}", describe(&out));

    // One byte flipped, the size kept.
    let file = dst.join("sub/deeper/c");
    let mut bytes = fs::read(&file).unwrap();
    bytes[40_000] ^= 0x20;
    fs::write(&file, bytes).unwrap();
    let out = verify(&[]);
    assert_exit(&out, 1);
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 1, "{}", describe(&out));
    assert!(
        lines[0].starts_with("differs: 'sub/deeper/c'"),
        "{}",
        describe(&out)
    );
    let summary = stderr_lines(&out);
    assert_eq!(summary.len(), 1, "{}", describe(&out));
    assert!(
        summary[0].contains(": 1 difference(s)"),
        "{}",
        describe(&out)
    );

    let out = verify(&["-v"]);
    assert_exit(&out, 1);
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 2, "{}", describe(&out));
    assert!(
        lines[0].starts_with("differs: 'sub/deeper/c'"),
        "{}",
        describe(&out)
    );
    assert!(
        lines[1].starts_with("not covered: 'link'"),
        "{}",
        describe(&out)
    );
    assert_eq!(stderr_lines(&out).len(), 1, "{}", describe(&out));

    // -q: the summary alone, the exit code the same.
    let out = verify(&["-q"]);
    assert_exit(&out, 1);
    assert!(out.stdout.is_empty(), "{}", describe(&out));
    assert_eq!(stderr_lines(&out).len(), 1, "{}", describe(&out));
}

/// `--progress` with a verify phase and no terminal (the tests have none): nothing is drawn
/// (no carriage return, no escape), the output is what it is without it, and the exit codes
/// are the same: `verify --manifest`, `cp --verify` with and without a manifest, and `sync
/// --progress --json`.
#[test]
fn progress_with_verify_draws_nothing_without_a_terminal() {
    let drawn = |out: &Output| {
        out.stderr
            .iter()
            .chain(&out.stdout)
            .any(|&b| b == b'\r' || b == 0x1b)
    };
    let s = Scratch::new();
    let (dst, manifest) = hashed_copy(&s);
    let out = Cp::bare()
        .args(["verify", "--progress", "--manifest"])
        .arg(&manifest)
        .arg(&dst)
        .run();
    assert_exit(&out, 0);
    assert!(!drawn(&out) && out.stdout.is_empty(), "{}", describe(&out));
    assert_eq!(stderr_lines(&out).len(), 1, "{}", describe(&out));

    for hashed in [false, true] {
        let copy = s.join(format!("copy-{hashed}"));
        let mut cp = Cp::new().args(["-r", "--progress", "--verify"]);
        if hashed {
            cp = cp.args(["--hash", "blake3"]);
        }
        let out = cp.arg("-T").arg(s.join("src")).arg(&copy).run();
        assert_exit(&out, 0);
        assert!(!drawn(&out) && out.stdout.is_empty(), "{}", describe(&out));
        // The verify summary, then --progress's closing line with the verify phase.
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no differences"), "{}", describe(&out));
        assert!(err.contains("; verify: "), "{}", describe(&out));
    }

    let out = Cp::bare()
        .args([
            "sync",
            "-a",
            "--info=progress2",
            "--json",
            "src/",
            "synced/",
        ])
        .current_dir(s.path())
        .run();
    assert_exit(&out, 0);
    assert_eq!(document(&out)["exit"], 0);
}
