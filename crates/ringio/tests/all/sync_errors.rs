//! `ringio sync` after an error reading the source: rsync's "IO error encountered -- skipping
//! file deletion" (nothing deleted from there on in its order, exit 23, in every deletion
//! mode), `--ignore-errors`, entries that vanish (exit 24, deletion goes on), directory cycles
//! under `-L` and its kin, and dry runs that predict the real run's exit code and errors.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use crate::common::*;

const STOPPED: &str = "IO error encountered -- skipping file deletion";

/// Every `--delete` spelling rsync has, with when it deletes.
const MODES: [&str; 6] = [
    "--delete",
    "--delete-before",
    "--delete-during",
    "--delete-delay",
    "--delete-after",
    "--del",
];

/// Runs `ringio sync ARGS` (or rsync) in `cwd`: as nobody when root (so that a mode-000
/// directory cannot be read), else as the user.
fn run(tool: &str, cwd: &Path, args: &[&str], env: Option<(&str, &str)>) -> Output {
    sync_or_rsync(tool, cwd, args, env, true)
}

/// Every entry under `root`, as paths relative to it.
fn entries(root: &Path) -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let path = e.path();
            all.insert(path.strip_prefix(root).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                stack.push(path);
            }
        }
    }
    all
}

/// The `extra` files left in DEST (one in DEST and in each of its directories at first).
fn extras_left(dst: &Path) -> BTreeSet<String> {
    entries(dst)
        .into_iter()
        .filter(|p| p == "extra" || p.ends_with("/extra"))
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A scratch directory that nobody may work in (when the tests run as root).
fn scratch() -> Scratch {
    let dir = Scratch::new();
    if is_root() {
        dir.give_to(NOBODY.0, NOBODY.1);
    }
    dir
}

/// Hands the tree under `dir` to nobody (when root), then makes `locked` unreadable.
fn hand_over(dir: &Path, locked: &[&str]) {
    if is_root() {
        chown_tree(dir, NOBODY.0, NOBODY.1);
    }
    for l in locked {
        chmod(dir.join(l), 0);
    }
}

/// src: `rootf`, `a/f`, `b/in/g`, `c/f`; dst: an `extra` in its root and in `a`, `b`, `c`.
fn abc_tree(dir: &Path) {
    write_file(dir.join("src/rootf"), "r");
    write_file(dir.join("src/a/f"), "x");
    write_file(dir.join("src/b/in/g"), "z");
    write_file(dir.join("src/c/f"), "y");
    for d in ["dst", "dst/a", "dst/b", "dst/c"] {
        write_file(dir.join(d).join("extra"), "old");
    }
}

/// Runs `tool` in each mode on a fresh tree made by `make` (then `locked` made unreadable):
/// the exit code, the extras left and how often rsync's line was printed.
fn each_mode(
    tool: &str,
    make: &dyn Fn(&Path),
    locked: &[&str],
    extra_args: &[&str],
) -> Vec<(&'static str, i32, BTreeSet<String>, usize, Output)> {
    MODES
        .iter()
        .map(|mode| {
            let dir = scratch();
            make(dir.path());
            hand_over(dir.path(), locked);
            let mut args = vec!["-r", "-i", mode];
            args.extend_from_slice(extra_args);
            args.extend_from_slice(&["src/", "dst/"]);
            let out = run(tool, dir.path(), &args, None);
            let said = stdout(&out).matches(STOPPED).count();
            let left = extras_left(&dir.join("dst"));
            for l in locked {
                chmod(dir.join(l), 0o755);
            }
            (*mode, out.status.code().unwrap_or(-1), left, said, out)
        })
        .collect()
}

/// A source directory that cannot be opened: in every deletion mode nothing is deleted in it
/// or in any directory after it in rsync's order (with --delete-before and --delete-after,
/// nothing at all), rsync's line is printed once on stdout, and the exit code is 23. What
/// rsync itself does on the same tree is the same.
#[test]
fn an_unreadable_directory_stops_every_deletion_after_it() {
    let later = set(&["b/extra", "c/extra"]);
    let all = set(&["extra", "a/extra", "b/extra", "c/extra"]);
    let expected = |mode: &str| match mode {
        "--delete-before" | "--delete-after" => all.clone(),
        _ => later.clone(),
    };
    for (mode, code, left, said, out) in each_mode("ringio", &abc_tree, &["src/b"], &[]) {
        let shown = describe(&out);
        assert_eq!(code, 23, "{mode}\n{shown}");
        assert_eq!(left, expected(mode), "{mode}: extras left\n{shown}");
        assert_eq!(said, 1, "{mode}: rsync's line once on stdout\n{shown}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("src/b"),
            "{mode}: the directory is named\n{shown}"
        );
    }
    if rsync_available() {
        for (mode, code, left, said, out) in each_mode("rsync", &abc_tree, &["src/b"], &[]) {
            assert_eq!(code, 23, "rsync {mode}");
            assert_eq!(left, expected(mode), "rsync {mode}\n{}", describe(&out));
            assert_eq!(said, 1, "rsync {mode}");
        }
    }
}

/// The same with many directories and many workers: every directory before the unreadable
/// one in rsync's order is cleaned (they were all read without error), none at it or after
/// it, however the workers were scheduled.
#[test]
fn parallel_walkers_delete_nothing_after_the_failed_directory() {
    let make = |dir: &Path| {
        for i in 0..24 {
            let d = format!("d{i:02}");
            for j in 0..20 {
                write_file(dir.join(format!("src/{d}/f{j}")), vec![b'x'; 3000]);
            }
            write_file(dir.join(format!("src/{d}/sub/g")), "g");
            write_file(dir.join(format!("dst/{d}/extra")), "old");
            write_file(dir.join(format!("dst/{d}/sub/extra")), "old");
        }
        write_file(dir.join("dst/extra"), "old");
    };
    for mode in ["--delete", "--delete-delay", "--delete-during"] {
        for _ in 0..3 {
            let dir = scratch();
            make(dir.path());
            hand_over(dir.path(), &["src/d11"]);
            let args = ["-r", mode, "--threads", "8", "src/", "dst/"];
            let out = run("ringio", dir.path(), &args, None);
            chmod(dir.join("src/d11"), 0o755);
            assert_exit(&out, 23);
            let left = extras_left(&dir.join("dst"));
            let mut want = BTreeSet::new();
            for i in 11..24 {
                want.insert(format!("d{i:02}/extra"));
                if i > 11 {
                    want.insert(format!("d{i:02}/sub/extra"));
                }
            }
            // d11 itself holds an extra in sub/ that the walk never reaches.
            want.insert("d11/sub/extra".into());
            assert_eq!(left, want, "{mode}\n{}", describe(&out));
            assert_eq!(stdout(&out).matches(STOPPED).count(), 1, "{mode}");
        }
    }
}

/// Deletions stopped by a source error still leave every directory the source's times: under
/// `--delete-delay` each directory's walk ends before its deletions' turn and leaves its times
/// to them (with its descriptor, while few are lent), and under `--delete` some do.
#[test]
fn stopped_deletions_leave_the_directories_times() {
    for mode in ["--delete", "--delete-delay"] {
        let dir = scratch();
        for i in 0..24 {
            let d = format!("d{i:02}");
            write_file(dir.join(format!("src/{d}/f")), "x");
            write_file(dir.join(format!("src/{d}/sub/g")), "g");
            write_file(dir.join(format!("dst/{d}/extra")), "old");
            write_file(dir.join(format!("dst/{d}/sub/extra")), "old");
        }
        for i in 0..24 {
            for d in [format!("src/d{i:02}"), format!("src/d{i:02}/sub")] {
                set_times(&dir.join(d), None, Some(Ts::new(1_000_000_000 + i, 0))).unwrap();
            }
        }
        hand_over(dir.path(), &["src/d11"]);
        let args = ["-rt", mode, "--threads", "8", "src/", "dst/"];
        let out = run("ringio", dir.path(), &args, None);
        chmod(dir.join("src/d11"), 0o755);
        assert_exit(&out, 23);
        for i in (0..24).filter(|&i| i != 11) {
            for d in [format!("d{i:02}"), format!("d{i:02}/sub")] {
                let (src, dst) = (dir.join("src").join(&d), dir.join("dst").join(&d));
                let mtime = |p: &Path| lstat_times(p).1;
                assert_eq!(mtime(&dst), mtime(&src), "{mode} {d}\n{}", describe(&out));
            }
        }
    }
}

/// A source file that cannot be read fails only itself, but is an error reading the source
/// all the same: ringio deletes nothing after it in its order. rsync gets the same result
/// for --delete-before (its deletions come before the file is read) and --delete-after
/// (none); with --delete and --delete-delay its generator runs ahead of the sender and has
/// deleted in the later directories before the failure is known (ringio does not, on
/// purpose: the error came first).
#[test]
fn an_unreadable_file_stops_the_deletions_not_yet_made() {
    let later = set(&["b/extra", "c/extra"]);
    let expected = |mode: &str| match mode {
        "--delete-before" => set(&[]),
        "--delete-after" => set(&["extra", "a/extra", "b/extra", "c/extra"]),
        "--delete-delay" => set(&["a/extra", "b/extra", "c/extra"]),
        _ => later.clone(),
    };
    for (mode, code, left, said, out) in each_mode("ringio", &abc_tree, &["src/a/f"], &[]) {
        let shown = describe(&out);
        assert_eq!(code, 23, "{mode}\n{shown}");
        assert_eq!(left, expected(mode), "{mode}: extras left\n{shown}");
        assert_eq!(
            said,
            usize::from(mode != "--delete-before"),
            "{mode}\n{shown}"
        );
    }
    if rsync_available() {
        for (mode, code, left, _, _) in each_mode("rsync", &abc_tree, &["src/a/f"], &[]) {
            assert_eq!(code, 23, "rsync {mode}");
            if matches!(mode, "--delete-before" | "--delete-after") {
                assert_eq!(left, expected(mode), "rsync {mode}");
            }
        }
    }
}

/// `--ignore-errors` deletes all the same (not in the directory that could not be read,
/// whose listing is unknown; rsync takes it as empty and empties it).
#[test]
fn ignore_errors_deletes_after_a_source_error() {
    let (ringio, rsync) = (["b/extra"], ["b/extra"; 0]);
    for (mode, code, left, said, out) in
        each_mode("ringio", &abc_tree, &["src/b"], &["--ignore-errors"])
    {
        assert_eq!(code, 23, "{mode}\n{}", describe(&out));
        assert_eq!(left, set(&ringio), "{mode}\n{}", describe(&out));
        assert_eq!(said, 0, "{mode}");
    }
    if rsync_available() {
        for (mode, code, left, _, _) in
            each_mode("rsync", &abc_tree, &["src/b"], &["--ignore-errors"])
        {
            assert_eq!(code, 23, "rsync {mode}");
            assert_eq!(left, set(&rsync), "rsync {mode}");
        }
    }
}

/// Errors reading the source besides opening a directory: a symlink without referent under
/// -L (its stat fails) stops deletion too, as in rsync.
#[test]
fn a_dangling_symlink_under_copy_links_stops_deletion() {
    let make = |dir: &Path| {
        abc_tree(dir);
        symlink("nowhere", dir.join("src/b/dangling")).unwrap();
    };
    for (mode, code, left, said, out) in each_mode("ringio", &make, &[], &["-L"]) {
        let shown = describe(&out);
        assert_eq!(code, 23, "{mode}\n{shown}");
        assert!(
            left.contains("c/extra"),
            "{mode}: deleted after the error\n{shown}"
        );
        assert_eq!(said, 1, "{mode}\n{shown}");
    }
    if rsync_available() {
        for (mode, code, left, _, _) in each_mode("rsync", &make, &[], &["-L"]) {
            assert_eq!(code, 23, "rsync {mode}");
            assert!(left.contains("c/extra"), "rsync {mode}");
        }
    }
}

/// A source entry that vanishes between the listing and its stat is not an I/O error (rsync's
/// IOERR_VANISHED): it is reported, the exit code is 24, and every deletion is made.
#[test]
fn a_vanished_entry_does_not_stop_deletion() {
    for mode in MODES {
        let dir = scratch();
        abc_tree(dir.path());
        write_file(dir.join("src/a/gone"), "soon gone");
        hand_over(dir.path(), &[]);
        let args = ["-r", mode, "src/", "dst/"];
        let out = run(
            "ringio",
            dir.path(),
            &args,
            Some(("RINGIO_TEST_VANISH_AFTER_LIST", "gone")),
        );
        assert_exit(&out, 24);
        assert_stderr_has(&out, "file has vanished: 'src/a/gone'");
        assert_eq!(
            extras_left(&dir.join("dst")),
            set(&[]),
            "{mode}\n{}",
            describe(&out)
        );
        assert!(!stdout(&out).contains(STOPPED), "{mode}");
    }
}

/// Directory cycles under -L, --copy-links and --copy-unsafe-links (a link to `.`, to `..`,
/// to an ancestor two levels up, two directories linking to each other): each is reported
/// once where it closes, naming the path (rsync stops there at ELOOP), the rest is copied,
/// the exit code is 23, and nothing is deleted after it.
#[test]
fn directory_cycles_end_with_an_error_and_stop_deletion() {
    type Plant = fn(&Path);
    let loops: [(&str, Plant, &[&str]); 4] = [
        (
            "self",
            |s| symlink(".", s.join("m/self")).unwrap(),
            &["m/self"],
        ),
        (
            "parent",
            |s| symlink("..", s.join("m/up")).unwrap(),
            &["m/up"],
        ),
        (
            "grandparent",
            |s| symlink("../..", s.join("m/deep/top")).unwrap(),
            &["m/deep/top"],
        ),
        (
            "mutual",
            |s| {
                symlink("../n", s.join("m/to-n")).unwrap();
                symlink("../m", s.join("n/to-m")).unwrap();
            },
            &["m/to-n/to-m", "n/to-m/to-n"],
        ),
    ];
    for opt in ["-L", "--copy-links"] {
        for (what, plant, at) in loops {
            let dir = scratch();
            let src = dir.join("src");
            write_file(src.join("m/deep/f"), "f");
            write_file(src.join("n/g"), "g");
            write_file(src.join("z/h"), "h");
            write_file(dir.join("dst/z/extra"), "old");
            plant(&src);
            hand_over(dir.path(), &[]);
            let args = ["-r", opt, "--delete", "src/", "dst/"];
            let cp = Cp::bare()
                .arg("sync")
                .args(args)
                .current_dir(dir.path())
                .timeout(Duration::from_secs(60));
            let out = cp.run();
            let shown = describe(&out);
            assert_exit(&out, 23);
            let err = String::from_utf8_lossy(&out.stderr);
            for at in at {
                let line =
                    format!("cannot open directory 'src/{at}': Too many levels of symbolic links");
                assert!(err.contains(&line), "{opt} {what}: {line}\n{shown}");
            }
            let count = err.matches("Too many levels").count();
            assert_eq!(count, at.len(), "{opt} {what}\n{shown}");
            assert_eq!(fs::read(dir.join("dst/z/h")).unwrap(), b"h", "{opt} {what}");
            assert!(
                dir.join("dst/z/extra").exists(),
                "{opt} {what}: deleted after it"
            );
            assert!(stdout(&out).contains(STOPPED), "{opt} {what}\n{shown}");
        }
    }
    // --copy-unsafe-links: a link out of the transfer to one of its ancestors.
    let dir = scratch();
    write_file(dir.join("top/t/f"), "f");
    symlink("../../t", dir.join("top/t/out")).unwrap();
    let out = Cp::bare()
        .arg("sync")
        .args(["-r", "--copy-unsafe-links", "top/t/", "dst/"])
        .current_dir(dir.path())
        .timeout(Duration::from_secs(60))
        .run();
    assert_exit(&out, 23);
    assert_eq!(fs::read(dir.join("dst/f")).unwrap(), b"f");
}

/// stdout's lines, sorted (rsync's processes may interleave them differently).
fn sorted_lines(bytes: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(bytes)
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// stderr's error lines without the program's name and the closing summary.
fn error_lines(bytes: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(bytes)
        .lines()
        .filter(|l| !l.contains("some files/attrs were not transferred"))
        .map(|l| l.trim_start_matches("ringio sync: ").to_string())
        .collect();
    lines.sort();
    lines
}

/// A dry run predicts the real run: the same exit code, the same lines on stdout and the same
/// errors, wherever the rules can know without writing; and so does rsync -n. Cases: a file, a
/// symlink and a FIFO over non-empty directories (no --force: rsync's "could not make way"),
/// a file over a directory holding what a filter protects (--delete), a directory over a
/// file (no error), a source directory that cannot be read.
#[test]
fn a_dry_run_exits_as_the_real_run() {
    type Make = fn(&Path);
    let cases: [(&str, Make, &[&str], i32); 4] = [
        (
            "over non-empty directories",
            |d| {
                write_file(d.join("src/x"), "f");
                symlink("tgt", d.join("src/y")).unwrap();
                mkfifo(&d.join("src/z"), 0o644);
                for n in ["x", "y", "z"] {
                    write_file(d.join(format!("dst/{n}/inner")), "in");
                }
                write_file(d.join("src/ok"), "fine");
            },
            &["-rl", "--specials", "-i"],
            23,
        ),
        (
            "over a protected entry",
            |d| {
                write_file(d.join("src/p"), "f");
                write_file(d.join("src/x"), "f");
                write_file(d.join("dst/p/keep"), "keep");
                write_file(d.join("dst/x/inner"), "in");
            },
            &["-r", "-i", "--delete", "--filter=P keep"],
            23,
        ),
        (
            "a directory over a file",
            |d| {
                write_file(d.join("src/d/f"), "f");
                write_file(d.join("dst/d"), "a file");
            },
            &["-r", "-i"],
            0,
        ),
        (
            "an unreadable source directory",
            |d| {
                write_file(d.join("src/a/f"), "f");
                write_file(d.join("src/b/g"), "g");
                write_file(d.join("dst/c"), "c");
                hand_over(d, &["src/b"]);
            },
            &["-r", "-i", "--delete"],
            23,
        ),
    ];
    for (what, make, opts, code) in cases {
        let mut outs = Vec::new();
        for tool in ["ringio", "rsync"] {
            if tool == "rsync" && !rsync_available() {
                continue;
            }
            for dry in [false, true] {
                let dir = scratch();
                make(dir.path());
                hand_over(dir.path(), &[]);
                let mut args = opts.to_vec();
                if dry {
                    args.push("-n");
                }
                args.extend(["src/", "dst/"]);
                let out = run(tool, dir.path(), &args, None);
                let _ = fs::set_permissions(
                    dir.join("src/b"),
                    std::os::unix::fs::PermissionsExt::from_mode(0o755),
                );
                outs.push((tool, dry, out));
            }
        }
        let (_, _, real) = &outs[0];
        // rsync's note on deletion is said only where a deletion is tried: under -n, not in
        // a directory that is still to be made.
        let kept = |out: &Output| -> Vec<String> {
            let lines = sorted_lines(&out.stdout);
            lines.into_iter().filter(|l| l != STOPPED).collect()
        };
        for (tool, dry, out) in &outs {
            let shown = format!("{what}: {tool} dry={dry}\n{}", describe(out));
            assert_eq!(out.status.code(), Some(code), "{shown}");
            assert_eq!(kept(out), kept(real), "{shown}");
            // rsync's dry run and real run as ringio's.
            let (_, _, ours) = &outs[usize::from(*dry)];
            assert_eq!(
                sorted_lines(&out.stdout),
                sorted_lines(&ours.stdout),
                "{shown}"
            );
            // rsync names its sender in some errors; the text after it is the same.
            let theirs: Vec<String> = error_lines(&out.stderr)
                .iter()
                .map(|l| l.replace("rsync: [sender] opendir ", "cannot open directory "))
                .collect();
            if *tool == "ringio" || what != "an unreadable source directory" {
                assert_eq!(theirs, error_lines(&real.stderr), "{shown}");
            }
        }
    }
}

/// `-m` (--prune-empty-dirs) looks below a directory for anything it would transfer; a
/// directory it cannot read there is not "empty": the error is reported (it used to be passed
/// over in silence, exit 0), deletion stops after it, exit 23, as rsync. What DEST holds of the
/// unreadable directory stays, and so does what is extraneous in a directory after it (`zz`).
/// (In DEST's root, before the failure in the walk's order, ringio deletes as it does without
/// `-m`; rsync, which reads the whole source first under `-m`, deletes nothing.)
#[test]
fn prune_empty_dirs_reports_a_directory_it_cannot_read() {
    for tool in ["ringio", "rsync"] {
        if tool == "rsync" && !rsync_available() {
            continue;
        }
        let dir = scratch();
        write_file(dir.join("src/top/locked/f"), "x");
        write_file(dir.join("src/zz/g"), "y");
        write_file(dir.join("dst/top/locked/f"), "x");
        write_file(dir.join("dst/zz/g"), "y");
        write_file(dir.join("dst/zz/extra"), "old");
        hand_over(dir.path(), &["src/top/locked"]);
        let out = run(tool, dir.path(), &["-rm", "--delete", "src/", "dst/"], None);
        chmod(dir.join("src/top/locked"), 0o755);
        let shown = describe(&out);
        assert_eq!(out.status.code(), Some(23), "{tool}\n{shown}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("src/top/locked"), "{tool}: {err}");
        assert!(stdout(&out).contains(STOPPED), "{tool}\n{shown}");
        assert!(dir.join("dst/top/locked/f").exists(), "{tool}\n{shown}");
        assert!(dir.join("dst/zz/extra").exists(), "{tool}\n{shown}");
    }
}
