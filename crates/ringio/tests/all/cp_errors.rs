//! `ringio cp` when things go wrong: each failing entry is reported as
//! `ringio: cannot <op> '<path>': <reason>`, the copy goes on with the rest and exits 1; cp's
//! refusals (into itself, same file, -r missing, directory vs non-directory); ENOSPC and SIGINT
//! stop promptly without leaving a partial file; a low open-file limit is no obstacle. Every
//! test runs once per engine.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use crate::common::*;

engine_tests!(
    missing_source,
    unreadable_file,
    unreadable_directory,
    directory_into_itself,
    directory_into_itself_any_spelling,
    source_changes_mid_copy,
    source_swapped_before_open,
    file_onto_itself,
    directory_without_recursive,
    destination_cannot_be_created,
    directory_and_non_directory_clash,
    no_target_directory_onto_symlink,
    dangling_symlink_dereferenced,
    no_space_left,
    interrupted_by_a_signal,
    low_open_file_limit,
    low_open_file_limit_deep_chain,
);

/// Asserts a line `ringio: cannot <op> '<path>': <reason>` on stderr, whatever the op.
#[track_caller]
fn assert_error_line(out: &Output, path: &str, reason: &str) {
    let tail = format!(" '{path}': {reason}");
    assert!(
        stderr_lines(out)
            .iter()
            .any(|l| l.starts_with("ringio: cannot ") && l.ends_with(&tail)),
        "no line \"ringio: cannot <op>{tail}\" on stderr; got {}",
        describe(out)
    );
}

fn cp_in(scratch: &Scratch, engine: &str, args: &[&str]) -> Output {
    Cp::new()
        .current_dir(scratch.path())
        .engine(engine)
        .args(args)
        .run()
}

/// A missing source is reported with cp's wording, exit 1, and the other sources still copy.
fn missing_source(engine: &str) {
    let scratch = Scratch::new();
    write_file(scratch.join("a"), "aaa");
    let tree = TreeSpec::plain(41).build(&scratch.join("b"));
    fs::create_dir(scratch.join("out")).unwrap();

    let out = cp_in(&scratch, engine, &["-r", "missing", "a", "b", "out"]);
    assert_exit(&out, 1);
    assert_eq!(
        stderr_lines(&out),
        ["ringio: cannot stat 'missing': No such file or directory"],
        "{}",
        describe(&out)
    );
    assert_eq!(fs::read(scratch.join("out/a")).unwrap(), b"aaa");
    assert_trees_equal(&tree.root, &scratch.join("out/b"), Check::CONTENT);

    let out = cp_in(&scratch, engine, &["missing", "single"]);
    assert_exit(&out, 1);
    assert_error_line(&out, "missing", "No such file or directory");
    assert!(!scratch.join("single").exists());
}

/// Builds `src/` with readable files around one unreadable entry `src/<bad>` (made by `lock`),
/// runs `cp -r src dst` unprivileged (as nobody when root), and returns its output.
fn copy_with_unreadable(engine: &str, lock: impl Fn(&Path)) -> (Scratch, Output) {
    let scratch = Scratch::new();
    let src = scratch.join("src");
    write_file(src.join("a-first"), vec![1u8; 5000]);
    write_file(src.join("m/inner"), vec![2u8; 70_000]);
    write_file(src.join("z-last/deeper/file"), vec![3u8; 131_073]);
    write_file(src.join("zz"), "last of all");
    if is_root() {
        chown_tree(scratch.path(), NOBODY.0, NOBODY.1);
        scratch.give_to(NOBODY.0, NOBODY.1);
    }
    lock(&src);
    let cp = Cp::new()
        .current_dir(scratch.path())
        .engine(engine)
        .args(["-r", "src", "dst"]);
    let out = if is_root() {
        cp.run_as(NOBODY.0, NOBODY.1).run()
    } else {
        cp.run()
    };
    (scratch, out)
}

#[track_caller]
fn assert_readable_rest_copied(scratch: &Scratch) {
    for (rel, len) in [
        ("a-first", 5000),
        ("m/inner", 70_000),
        ("z-last/deeper/file", 131_073),
    ] {
        let got = fs::read(scratch.join("dst").join(rel)).unwrap_or_default();
        let want = fs::read(scratch.join("src").join(rel)).unwrap();
        assert_eq!(want.len(), len);
        assert!(
            got == want,
            "dst/{rel} missing or wrong ({} bytes)",
            got.len()
        );
    }
    assert_eq!(fs::read(scratch.join("dst/zz")).unwrap(), b"last of all");
}

/// An unreadable file: `ringio: cannot open 'src/secret': Permission denied`, exit 1, no
/// dst/secret at all, every other file copied.
fn unreadable_file(engine: &str) {
    let (scratch, out) = copy_with_unreadable(engine, |src| {
        write_file(src.join("secret"), "top secret");
        if is_root() {
            chown_tree(&src.join("secret"), NOBODY.0, NOBODY.1);
        }
        chmod(src.join("secret"), 0o000);
    });
    assert_exit(&out, 1);
    assert!(
        stderr_lines(&out).contains(&"ringio: cannot open 'src/secret': Permission denied".into()),
        "{}",
        describe(&out)
    );
    assert_eq!(stderr_lines(&out).len(), 1, "{}", describe(&out));
    assert!(
        fs::symlink_metadata(scratch.join("dst/secret")).is_err(),
        "dst/secret was created although its source could not be read"
    );
    assert_readable_rest_copied(&scratch);
}

/// An unreadable directory: reported (`ringio: cannot <op> 'src/locked': Permission denied`),
/// exit 1, every other entry copied.
fn unreadable_directory(engine: &str) {
    let (scratch, out) = copy_with_unreadable(engine, |src| {
        write_file(src.join("locked/hidden"), "hidden");
        if is_root() {
            chown_tree(&src.join("locked"), NOBODY.0, NOBODY.1);
        }
        chmod(src.join("locked"), 0o000);
    });
    assert_exit(&out, 1);
    assert_error_line(&out, "src/locked", "Permission denied");
    assert!(!scratch.join("dst/locked/hidden").exists());
    assert_readable_rest_copied(&scratch);
}

/// `cp -r d d` and `cp -r d d/sub`: refused with "into itself", exit 1, and no runaway
/// recursion.
fn directory_into_itself(engine: &str) {
    let scratch = Scratch::new();
    write_file(scratch.join("d/a"), "a");
    fs::create_dir(scratch.join("d/sub")).unwrap();
    for (dst, runaway) in [("d", "d/d/d"), ("d/sub", "d/sub/d/sub/d")] {
        let out = cp_in(&scratch, engine, &["-r", "d", dst]);
        assert_exit(&out, 1);
        assert_stderr_has(&out, "into itself");
        assert!(
            !scratch.join(runaway).exists(),
            "{runaway} exists: the copy recursed"
        );
    }
    assert_eq!(fs::read(scratch.join("d/a")).unwrap(), b"a");
}

/// Every spelling of a destination below the source directory is refused, compared by
/// identity: `.`, `./`, the absolute path, `../here`, `x/..`, a trailing slash, `-T`, and a
/// symlink into the source. Each used to copy `sub/sub/sub/...` until stopped.
fn directory_into_itself_any_spelling(engine: &str) {
    let scratch = Scratch::new();
    let here = scratch.join("here");
    write_file(here.join("f"), "f");
    fs::create_dir(here.join("x")).unwrap();
    std::os::unix::fs::symlink(".", here.join("loop")).unwrap();
    let abs = here.to_str().unwrap().to_owned();
    let cases: &[&[&str]] = &[
        &[".", "sub"],
        &["./", "sub"],
        &[&abs, "sub"],
        &["../here", "sub"],
        &["x/..", "sub"],
        &[".", "sub/"],
        &["-T", ".", "sub"],
        &[".", "./sub"],
        &[".", "loop/sub"],
        &[".", "x/../loop/x/sub"],
    ];
    for args in cases {
        let out = Cp::new()
            .current_dir(&here)
            .engine(engine)
            .arg("-r")
            .args(*args)
            .timeout(Duration::from_secs(30))
            .run();
        assert_exit(&out, 1);
        assert_stderr_has(&out, "into itself");
        assert!(!here.join("sub").exists(), "{args:?}: sub was made");
        assert!(!here.join("x/sub").exists(), "{args:?}: x/sub was made");
    }
    // The same directory by two names: the same file, as GNU says.
    let out = Cp::new()
        .current_dir(&here)
        .engine(engine)
        .args(["-rT", ".", &abs])
        .run();
    assert_exit(&out, 1);
    assert_stderr_has(&out, "are the same file");
    assert_eq!(fs::read(here.join("f")).unwrap(), b"f");
}

/// A big file copied while it shrinks or grows (changed while the copy is stopped just after
/// opening it): the copy fails with the source's path, exit 1, and no copy is passed off as
/// complete: no file under the final name, no zeros the source never had; under `--atomic` the
/// old destination stays as it was; `-a` too. Evicted first, so the uring engine splits it.
fn source_changes_mid_copy(engine: &str) {
    let scratch = Scratch::new();
    let big = scratch.join("big");
    let content: Vec<u8> = (0..6u32 << 20).map(|i| (i % 251) as u8).collect();
    let cases: &[(&str, &[&str])] = &[
        ("shrinks", &[]),
        ("grows", &[]),
        ("shrinks", &["-a"]),
        ("shrinks", &["--atomic"]),
        ("grows", &["--atomic", "-a"]),
    ];
    for (i, (change, opts)) in cases.iter().enumerate() {
        let hold = scratch.join(format!("hold-{i}"));
        fs::create_dir(&hold).unwrap();
        fs::write(&big, &content).unwrap();
        evict(&big);
        let out_path = scratch.join("out");
        let atomic = opts.contains(&"--atomic");
        if atomic {
            fs::write(&out_path, "old").unwrap();
        } else {
            let _ = fs::remove_file(&out_path);
        }
        let out = Cp::new()
            .current_dir(scratch.path())
            .engine(engine)
            .args(["--chunk-size", "1M"])
            .args(*opts)
            .args(["big", "out"])
            .env("RINGIO_TEST_HOLD_DIR", hold.to_str().unwrap())
            .spawn()
            .serve_holds(&hold, |stop| {
                // The second hold is after the open, before any data.
                if stop == 2 {
                    let file = fs::OpenOptions::new().append(true).open(&big).unwrap();
                    if *change == "shrinks" {
                        file.set_len(1 << 20).unwrap();
                    } else {
                        std::io::Write::write_all(&mut &file, &[7u8; 1 << 20]).unwrap();
                    }
                }
            });
        let what = format!("{engine} {change} {opts:?}");
        assert_exit(&out, 1);
        assert_stderr_has(&out, "'big' changed while it was copied");
        if atomic {
            assert_eq!(fs::read(&out_path).unwrap(), b"old", "{what}");
        } else {
            assert!(!out_path.exists(), "{what}: a copy was left");
        }
    }
}

/// A source name pointed at another file between its stat and its open (a 0600 secret renamed
/// over a public 0644 file): the entry is skipped with GNU's words, exit 1, and nothing holds
/// the secret's bytes with the public file's mode. A small file is opened before it is
/// stat'ed where it can be, and is then copied whole as it was opened.
fn source_swapped_before_open(engine: &str) {
    let scratch = Scratch::new();
    fs::create_dir(scratch.join("s")).unwrap();
    for size in [1000usize, 300_000] {
        let public = vec![b'p'; size];
        let secret = vec![b's'; size];
        write_file(scratch.join("s/f"), &public);
        write_file(scratch.join("secret"), &secret);
        fs::set_permissions(scratch.join("s/f"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(scratch.join("secret"), fs::Permissions::from_mode(0o600)).unwrap();
        let _ = fs::remove_file(scratch.join("dst"));
        let mut stops = 0;
        let hold = scratch.join(format!("hold-{size}"));
        fs::create_dir(&hold).unwrap();
        let out = Cp::new()
            .current_dir(scratch.path())
            .engine(engine)
            .args(["-p", "s/f", "dst"])
            .env("RINGIO_TEST_HOLD_DIR", hold.to_str().unwrap())
            .spawn()
            .serve_holds(&hold, |stop| {
                stops = stop;
                if stop == 1 {
                    fs::rename(scratch.join("secret"), scratch.join("s/f")).unwrap();
                }
            });
        let dst = scratch.join("dst");
        if out.status.success() {
            // Opened before the swap: the public file, whole, with its own mode.
            assert_eq!(fs::read(&dst).unwrap(), public, "{engine} {size}");
            assert_eq!(mode_of(&dst), 0o644, "{engine} {size}");
        } else {
            assert_exit(&out, 1);
            assert_stderr_has(
                &out,
                "skipping file 's/f', as it was replaced while being copied",
            );
            assert!(!dst.exists(), "{engine} {size}: a copy was left");
        }
        if size > 64 * 1024 {
            // Above the small-file threshold every engine stats first, then opens.
            assert!(
                !out.status.success(),
                "{engine} {size}: the swap went unseen"
            );
        }
    }
}

fn mode_of(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// A file onto itself, by the same name, another spelling, a hard link, a symlink, or a
/// directory that holds it: "are the same file", exit 1, and the file keeps its content.
fn file_onto_itself(engine: &str) {
    let scratch = Scratch::new();
    let content = vec![0x5au8; 100_000];
    write_file(scratch.join("d/f"), &content);
    fs::hard_link(scratch.join("d/f"), scratch.join("d/hl")).unwrap();
    std::os::unix::fs::symlink("f", scratch.join("d/sl")).unwrap();
    let cases: &[&[&str]] = &[
        &["d/f", "d/f"],
        &["d/f", "d/./f"],
        &["d/f", "d/hl"],
        &["d/f", "d/sl"],
        &["d/f", "d"],
        &["-a", "d/f", "d/f"],
    ];
    for args in cases {
        let out = cp_in(&scratch, engine, args);
        assert_exit(&out, 1);
        assert_stderr_has(&out, "are the same file");
        assert!(
            fs::read(scratch.join("d/f")).unwrap() == content,
            "cp {args:?} damaged d/f"
        );
    }
}

/// A directory without -r: `ringio: -r not specified; omitting directory 'd'`, exit 1, the
/// other sources copied.
fn directory_without_recursive(engine: &str) {
    let scratch = Scratch::new();
    write_file(scratch.join("d/inner"), "inner");
    write_file(scratch.join("f"), "f");
    fs::create_dir(scratch.join("out")).unwrap();
    let out = cp_in(&scratch, engine, &["d", "f", "out"]);
    assert_exit(&out, 1);
    assert_eq!(
        stderr_lines(&out),
        ["ringio: -r not specified; omitting directory 'd'"],
        "{}",
        describe(&out)
    );
    assert_eq!(fs::read(scratch.join("out/f")).unwrap(), b"f");
    assert!(!scratch.join("out/d").exists());
}

/// The destination's parent is missing, or is a file: reported with the destination path and
/// the system's reason, exit 1, nothing created.
fn destination_cannot_be_created(engine: &str) {
    let scratch = Scratch::new();
    write_file(scratch.join("f"), "f");
    write_file(scratch.join("d/inner"), "inner");
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["f", "nope/sub/x"],
            "nope/sub/x",
            "No such file or directory",
        ),
        (
            &["-r", "d", "nope/x"],
            "nope/x",
            "No such file or directory",
        ),
        (&["f", "f/x"], "f/x", "Not a directory"),
        (&["-r", "d", "f/x"], "f/x", "Not a directory"),
        // A trailing slash names a directory, which a file cannot become (GNU cp agrees).
        (&["f", "new/"], "new/", "Not a directory"),
    ];
    for (args, path, reason) in cases {
        let out = cp_in(&scratch, engine, args);
        assert_exit(&out, 1);
        assert_error_line(&out, path, reason);
        assert!(!scratch.join("nope").exists());
        assert!(
            fs::symlink_metadata(scratch.join("new")).is_err(),
            "cp {args:?} made 'new'"
        );
        assert_eq!(fs::read(scratch.join("f")).unwrap(), b"f");
    }
}

/// `-T` makes DST the entry itself, so a symlink there is not a directory to copy into or
/// through: `cp -rT d link-to-dir` is refused ("cannot overwrite non-directory", as GNU cp),
/// and the directory behind the link stays empty.
fn no_target_directory_onto_symlink(engine: &str) {
    let scratch = Scratch::new();
    write_file(scratch.join("d/inner"), "inner");
    fs::create_dir(scratch.join("behind")).unwrap();
    std::os::unix::fs::symlink("behind", scratch.join("link")).unwrap();
    let out = cp_in(&scratch, engine, &["-rT", "d", "link"]);
    assert_exit(&out, 1);
    assert_stderr_has(&out, "cannot overwrite non-directory");
    assert!(
        fs::read_dir(scratch.join("behind"))
            .unwrap()
            .next()
            .is_none(),
        "wrote through link"
    );
    assert_eq!(
        fs::read_link(scratch.join("link")).unwrap(),
        Path::new("behind")
    );
}

/// A directory onto a file ("cannot overwrite non-directory") and a file onto a directory
/// ("cannot overwrite directory"), at the top and inside a tree; the rest of the tree copies.
fn directory_and_non_directory_clash(engine: &str) {
    let scratch = Scratch::new();
    write_file(scratch.join("d/inner"), "inner");
    write_file(scratch.join("file"), "file");
    write_file(scratch.join("dd/keep"), "keep");
    write_file(scratch.join("y/f/keep"), "keep");
    write_file(scratch.join("f"), "f");
    for args in [&["-r", "d", "file"][..], &["-rT", "d", "file"]] {
        let out = cp_in(&scratch, engine, args);
        assert_exit(&out, 1);
        assert_stderr_has(&out, "cannot overwrite non-directory");
        assert_eq!(fs::read(scratch.join("file")).unwrap(), b"file");
    }
    for args in [&["-T", "f", "dd"][..], &["f", "y"]] {
        let out = cp_in(&scratch, engine, args);
        assert_exit(&out, 1);
        assert_stderr_has(&out, "cannot overwrite directory");
    }
    assert_eq!(fs::read(scratch.join("dd/keep")).unwrap(), b"keep");
    assert_eq!(fs::read(scratch.join("y/f/keep")).unwrap(), b"keep");

    // Inside a tree: s/x is a directory, t/s/x a file; s/y still copies.
    write_file(scratch.join("s/x/inner"), "inner");
    write_file(scratch.join("s/y"), "y");
    write_file(scratch.join("t/s/x"), "a file");
    let out = cp_in(&scratch, engine, &["-r", "s", "t"]);
    assert_exit(&out, 1);
    assert_stderr_has(&out, "cannot overwrite non-directory");
    assert_eq!(fs::read(scratch.join("t/s/x")).unwrap(), b"a file");
    assert_eq!(fs::read(scratch.join("t/s/y")).unwrap(), b"y");
}

/// Following a dangling symlink (-L, or a symlink source without -r) fails with "cannot stat",
/// exit 1; the rest copies.
fn dangling_symlink_dereferenced(engine: &str) {
    let scratch = Scratch::new();
    write_file(scratch.join("s/ok"), "ok");
    std::os::unix::fs::symlink("nothing-here", scratch.join("s/dang")).unwrap();
    let out = cp_in(&scratch, engine, &["-rL", "s", "o"]);
    assert_exit(&out, 1);
    assert_error_line(&out, "s/dang", "No such file or directory");
    assert_eq!(fs::read(scratch.join("o/ok")).unwrap(), b"ok");
    assert!(fs::symlink_metadata(scratch.join("o/dang")).is_err());

    let out = cp_in(&scratch, engine, &["s/dang", "single"]);
    assert_exit(&out, 1);
    assert_error_line(&out, "s/dang", "No such file or directory");
    assert!(fs::symlink_metadata(scratch.join("single")).is_err());
}

/// Writes `files` random files of `lo..=hi` bytes into `dir`, spread over `dirs` directories.
fn random_files(dir: &Path, seed: u64, dirs: usize, files: usize, lo: u64, hi: u64) {
    let mut rng = Prng::new(seed);
    let mut buf = vec![0u8; hi as usize];
    for i in 0..files {
        let len = rng.range(lo, hi) as usize;
        rng.fill(&mut buf[..len]);
        write_file(
            dir.join(format!("d{}", i % dirs)).join(format!("f{i:04}")),
            &buf[..len],
        );
    }
}

/// No space left: a 4 MiB tmpfs gets a 14 MiB tree. Exit 1 with an ENOSPC message, the copy
/// stops instead of failing file after file, and every file in the destination is complete.
/// Then one 40 MiB file, far too big for the space left: it must not remain at all.
fn no_space_left(engine: &str) {
    if !is_root() {
        skip!("mounting a tmpfs needs root");
    }
    let scratch = Scratch::new();
    let files = 1200;
    random_files(&scratch.join("src"), 51, 10, files, 5000, 15_000);
    let mnt = scratch.join("mnt");
    fs::create_dir(&mnt).unwrap();
    let mount = match TmpfsMount::new(&mnt, "4m") {
        Ok(m) => m,
        Err(e) => skip!("{e}"),
    };
    let out = Cp::new()
        .current_dir(scratch.path())
        .engine(engine)
        .args(["-r", "src", "mnt/dst"])
        .run();
    assert_exit(&out, 1);
    assert_stderr_has(&out, "No space left on device");
    for line in stderr_lines(&out) {
        assert!(line.starts_with("ringio: "), "stray stderr line {line:?}");
    }
    assert_trees_equal(
        &scratch.join("src"),
        &mount.path().join("dst"),
        Check {
            partial: true,
            ..Check::CONTENT
        },
    );
    let copied = count_files(&mount.path().join("dst"));
    let errors = stderr_lines(&out).len();
    eprintln!("{copied} of {files} files copied, {errors} error lines");
    assert!(copied < files, "the whole tree fit in 4 MiB?");
    assert!(
        errors < (files - copied) / 2,
        "{errors} error lines for {} files that did not fit: the copy did not stop at ENOSPC",
        files - copied
    );

    fs::remove_dir_all(mount.path().join("dst")).unwrap();
    write_file(mount.path().join("filler"), vec![0u8; 1 << 20]);
    // Big enough for the copier to split it into parallel chunks.
    let mut big = vec![0u8; (40 << 20) + 1];
    Prng::new(52).fill(&mut big);
    write_file(scratch.join("big"), &big);
    evict(scratch.join("big"));
    let out = cp_in(&scratch, engine, &["big", "mnt/big"]);
    assert_exit(&out, 1);
    assert_stderr_has(&out, "No space left on device");
    assert!(
        fs::symlink_metadata(mount.path().join("big")).is_err(),
        "a partial mnt/big was left behind"
    );
}

fn count_files(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                count_files(&e.path())
            } else {
                usize::from(t.is_file())
            }
        })
        .sum()
}

/// SIGINT or SIGTERM in the middle of a copy of 100 files of 1 MiB and 3 of 40 MiB (big enough
/// to be split into parallel chunks), at several moments: the copy ends by that signal within
/// 3 s (so the shell sees 130 or 143, as for GNU cp), and each destination file that exists is
/// complete.
fn interrupted_by_a_signal(engine: &str) {
    let scratch = Scratch::new();
    let src = scratch.join("src");
    let mut rng = Prng::new(61);
    for i in 0..103u64 {
        let len = if i < 3 { (40 << 20) + 1 } else { 1 << 20 };
        let mut content = vec![0u8; len];
        rng.fill(&mut content[..1 << 20]);
        // Later MiBs repeat the first, but every 4 KiB page carries the file and page number,
        // so no two pages of the tree are alike.
        for at in (1 << 20..len).step_by(1 << 20) {
            let (head, tail) = content.split_at_mut(at);
            let n = tail.len().min(1 << 20);
            tail[..n].copy_from_slice(&head[..n]);
        }
        for (page, chunk) in content.chunks_mut(4096).enumerate() {
            let stamp = (i << 32 | page as u64).to_le_bytes();
            let n = chunk.len().min(8);
            chunk[..n].copy_from_slice(&stamp[..n]);
        }
        write_file(
            src.join(format!("d{}", i % 4)).join(format!("f{i:03}")),
            &content,
        );
    }

    for (round, delay_ms) in [0u64, 20, 60, 150].into_iter().enumerate() {
        let signal = if round % 2 == 0 {
            libc::SIGINT
        } else {
            libc::SIGTERM
        };
        let dst = scratch.join(format!("dst{round}"));
        for i in 0..3u64 {
            evict(src.join(format!("d{}", i % 4)).join(format!("f{i:03}")));
        }
        let mut running = Cp::new()
            .engine(engine)
            .arg("-r")
            .arg(&src)
            .arg(&dst)
            .spawn();
        // Interrupt once copying is under way (the first file has appeared), plus the delay.
        let start = Instant::now();
        while running.try_status().is_none()
            && count_files(&dst) == 0
            && start.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(delay_ms));
        let before = running.try_status();
        // SAFETY: kill has no memory-safety preconditions; the pid is our unreaped child.
        unsafe { libc::kill(running.pid(), signal) };
        let signalled = Instant::now();
        let stopped = running.wait_status(Duration::from_secs(10));
        let took = signalled.elapsed();
        assert!(
            stopped.is_some(),
            "still running 10 s after signal {signal}"
        );
        let out = running.wait();

        if before.is_some() || out.status.success() {
            eprintln!("round {round}: the copy finished before signal {signal} arrived");
            assert_success(&out);
            assert_trees_equal(&src, &dst, Check::CONTENT);
            continue;
        }
        eprintln!("round {round}: stopped {took:?} after signal {signal}");
        assert_stopped_by(&out, signal, took, &src, &dst);
    }
    // The timed rounds may all finish first on a fast machine; these cannot: `-v` lists more
    // than the one-page pipe its stdout is, so the copy is held mid-run until it is read, and
    // the signal arrives then.
    for (round, signal) in [libc::SIGINT, libc::SIGTERM].into_iter().enumerate() {
        let dst = scratch.join(format!("dst-held{round}"));
        let mut signalled = None;
        let out = Cp::new()
            .engine(engine)
            .arg("-rv")
            .arg(&src)
            .arg(&dst)
            .run_held_by_stdout(|pid| {
                // SAFETY: kill has no memory-safety preconditions; the pid is our unreaped child.
                unsafe { libc::kill(pid, signal) };
                signalled = Some(Instant::now());
            });
        let took = signalled.expect("signalled").elapsed();
        assert_stopped_by(&out, signal, took, &src, &dst);
    }
}

/// Asserts that a copy from `src` to `dst` ended by `signal`, `took` after it, with GNU's
/// status and a note, and that each destination file that exists is complete.
fn assert_stopped_by(out: &Output, signal: i32, took: Duration, src: &Path, dst: &Path) {
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(signal),
        "after signal {signal}: {}",
        describe(out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("; partially copied files were removed"),
        "{}",
        describe(out)
    );
    assert!(
        took < Duration::from_secs(3),
        "took {took:?} to stop after signal {signal}"
    );
    assert_trees_equal(
        src,
        dst,
        Check {
            partial: true,
            ..Check::CONTENT
        },
    );
}

/// RLIMIT_NOFILE 64 and a tree of 300+ files in 40 directories nested 10 deep: everything
/// copies (-a), with the default thread count and with 8 threads.
fn low_open_file_limit(engine: &str) {
    let scratch = Scratch::new();
    let spec = TreeSpec {
        dirs: 40,
        max_depth: 10,
        random_files: 300,
        max_random_size: 200 * 1024,
        ..TreeSpec::small(71)
    };
    let tree = spec.build(&scratch.join("src"));
    for (i, extra) in [&[][..], &["--threads", "8"]].iter().enumerate() {
        let dst = scratch.join(format!("dst{i}"));
        let out = Cp::new()
            .engine(engine)
            .nofile_limit(64)
            .arg("-a")
            .args(extra.iter())
            .arg(&tree.root)
            .arg(&dst)
            .run();
        assert_success(&out);
        tree.restore_atimes();
        assert_trees_equal(&tree.root, &dst, Check::ARCHIVE);
    }
}

/// RLIMIT_NOFILE 64 and one chain of 80 nested directories with three files at every level
/// (GNU cp copies it even with a limit of 16): everything copies (-a), nothing fails with "Too
/// many open files".
fn low_open_file_limit_deep_chain(engine: &str) {
    let scratch = Scratch::new();
    let src = scratch.join("src");
    let mut rng = Prng::new(72);
    let mut dir = src.clone();
    for level in 1..=80 {
        dir = dir.join(format!("l{level}"));
        for (i, len) in [(1, 100), (2, 5000), (3, 70_000 + level)].into_iter() {
            let mut content = vec![0u8; len];
            rng.fill(&mut content);
            write_file(dir.join(format!("f{i}")), &content);
        }
    }
    let atimes = Atimes::record(&src);
    let out = Cp::new()
        .current_dir(scratch.path())
        .engine(engine)
        .nofile_limit(64)
        .args(["-a", "src", "dst"])
        .run();
    assert_success(&out);
    atimes.restore();
    assert_trees_equal(&src, &scratch.join("dst"), Check::ARCHIVE);
}

/// A copy blocked in the kernel (opening a FIFO that nothing writes to) cannot reach its next
/// step to stop; one SIGTERM, as `timeout` sends, still ends it within the grace period, and it
/// creates nothing.
#[test]
fn blocked_on_a_fifo_ends_on_one_sigterm() {
    let scratch = Scratch::new();
    let fifo = scratch.join("fifo");
    let path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("no NUL");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0, "mkfifo");
    let dst = scratch.join("out");
    let mut running = Cp::new().arg(&fifo).arg(&dst).spawn();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        running.try_status().is_none(),
        "cp did not wait for a writer"
    );
    // SAFETY: kill has no memory-safety preconditions; the pid is our unreaped child.
    unsafe { libc::kill(running.pid(), libc::SIGTERM) };
    let signalled = Instant::now();
    let status = running.wait_status(Duration::from_secs(10));
    let took = signalled.elapsed();
    if status.is_none() {
        // SAFETY: as above; do not leave it behind.
        unsafe { libc::kill(running.pid(), libc::SIGKILL) };
    }
    let status = status.expect("still running 10 s after SIGTERM");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(libc::SIGTERM),
        "ended by SIGTERM: {status:?}"
    );
    assert!(
        took < Duration::from_secs(5),
        "took {took:?} to end after SIGTERM"
    );
    assert!(!dst.exists(), "created {}", dst.display());
}
