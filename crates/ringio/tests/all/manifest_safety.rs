//! Manifests, MHL histories and `verify --manifest` under attack: symlinks planted where the
//! history, a chain file or a listed file should be, FIFOs where a regular file must be, copies
//! that fail part-way, files kept by cp's rules, trees deeper than PATH_MAX.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use crate::common::*;

/// What a planted secret holds: never to appear in any output.
const SECRET: &[u8] = b"TOPSECRET-7f3a9c: root:$6$salt$hash\n";

/// A run that must not hang: a FIFO where a regular file belongs fails the test by its timeout.
fn guarded(cp: Cp) -> std::process::Output {
    cp.timeout(Duration::from_secs(30)).run()
}

fn assert_no_secret(out: &std::process::Output) {
    for (what, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        assert!(
            !text.contains("TOPSECRET"),
            "{what} echoes the secret: {text}"
        );
    }
}

/// The sha256sum line of `content` named `name`.
fn sha256_line(content: &[u8], name: &str) -> String {
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sha256sum (coreutils)");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), content).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    format!("{}  {name}\n", text.split_whitespace().next().unwrap())
}

fn verify_manifest(manifest: &Path, dir: &Path, extra: &[&str]) -> std::process::Output {
    guarded(
        Cp::bare()
            .args(["verify"])
            .args(extra)
            .arg("--manifest")
            .arg(manifest)
            .arg(dir),
    )
}

/// Every entry below `dir` with its content (files) or target (symlinks), for a before/after
/// snapshot of what lies outside a destination.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>, u32)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            let body = if m.is_file() {
                fs::read(&p).unwrap()
            } else if m.file_type().is_symlink() {
                fs::read_link(&p)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else {
                stack.push(p.clone());
                Vec::new()
            };
            out.push((p.display().to_string(), body, m.permissions().mode()));
        }
    }
    out.sort();
    out
}

/// Item 3: an `ascmhl` planted in DEST as a symlink to a directory outside is refused by cp and
/// sync alike; nothing is written through it, whether it points at an empty directory or at
/// another history.
#[test]
fn the_mhl_history_is_never_written_through_a_symlinked_folder() {
    let s = Scratch::new();
    write_file(s.join("src/clip.mov"), b"frames");
    let outside = s.join("outside");
    fs::create_dir(&outside).unwrap();
    // Another history there, for the spelling where the symlink leads to one.
    write_file(
        s.join("elsewhere/ascmhl/ascmhl_chain.xml"),
        b"<ascmhldirectory/>",
    );
    for (tool, target) in [
        ("cp", outside.clone()),
        ("sync", outside.clone()),
        ("cp", s.join("elsewhere/ascmhl")),
        ("sync", s.join("elsewhere/ascmhl")),
    ] {
        let dst = s.join(format!("dst-{tool}"));
        let _ = fs::remove_dir_all(&dst);
        fs::create_dir(&dst).unwrap();
        symlink(&target, dst.join("ascmhl")).unwrap();
        let before = (snapshot(&outside), snapshot(&s.join("elsewhere")));
        let cmd = match tool {
            "cp" => Cp::new()
                .args(["-a", "--manifest-format=mhl"])
                .arg(s.join("src/clip.mov"))
                .arg(&dst),
            _ => Cp::bare()
                .args(["sync", "-a", "--manifest-format=mhl"])
                .arg(format!("{}/", s.join("src").display()))
                .arg(format!("{}/", dst.display())),
        };
        let out = guarded(cmd);
        assert_ne!(out.status.code(), Some(0), "{tool}: {}", describe(&out));
        assert_stderr_has(&out, "symbolic link");
        assert_eq!(
            (snapshot(&outside), snapshot(&s.join("elsewhere"))),
            before,
            "{tool} wrote through {}",
            target.display()
        );
        assert_eq!(fs::read_link(dst.join("ascmhl")).unwrap(), target);
    }
}

/// Item 3: a chain file or a generation file symlinked to a secret is never read through the
/// link, by the writer (cp, sync) or the reader (verify); and no file's content is echoed in an
/// error, whether a manifest the user names is a secret or garbage.
#[test]
fn a_history_file_linked_to_a_secret_is_refused_and_never_echoed() {
    let s = Scratch::new();
    let secret = s.join("secret");
    write_file(&secret, SECRET);
    write_file(s.join("src/a"), b"a");
    // The chain file itself.
    let dst = s.join("dst");
    fs::create_dir_all(dst.join("ascmhl")).unwrap();
    symlink(&secret, dst.join("ascmhl/ascmhl_chain.xml")).unwrap();
    let out = guarded(
        Cp::new()
            .args(["-a", "--manifest-format=mhl"])
            .arg(s.join("src/a"))
            .arg(&dst),
    );
    assert_exit(&out, 1);
    assert_stderr_has(&out, "symbolic link");
    assert_no_secret(&out);
    let out = guarded(
        Cp::bare()
            .args(["sync", "-a", "--manifest-format=mhl"])
            .arg(format!("{}/", s.join("src").display()))
            .arg(format!("{}/", dst.display())),
    );
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    assert_no_secret(&out);
    let out = verify_manifest(&dst, &dst, &[]);
    assert_exit(&out, 2);
    assert_stderr_has(&out, "symbolic link");
    assert_no_secret(&out);
    // A chain that names a generation file that is a symlink to the secret.
    fs::remove_file(dst.join("ascmhl/ascmhl_chain.xml")).unwrap();
    write_file(
        dst.join("ascmhl/ascmhl_chain.xml"),
        "<ascmhldirectory xmlns=\"urn:ASC:MHL:DIRECTORY:v2.0\">\n<hashlist sequencenr=\"1\">\
         <path>0001_dst_2026-01-01_000000Z.mhl</path><c4>c4x</c4></hashlist>\n</ascmhldirectory>\n",
    );
    symlink(&secret, dst.join("ascmhl/0001_dst_2026-01-01_000000Z.mhl")).unwrap();
    let out = verify_manifest(&dst, &dst, &[]);
    assert_exit(&out, 2);
    assert_stderr_has(&out, "symbolic link");
    assert_no_secret(&out);
    // Manifests the user names that are no manifests: their text is never shown.
    for (name, text) in [
        ("m.sum", SECRET.to_vec()),
        ("m.mhl", [b"<TOPSECRET>".as_slice(), SECRET].concat()),
        (
            "x.mhl",
            [b"<hashlist version=\"2.0\">\n<".as_slice(), SECRET].concat(),
        ),
        ("m.json", [b"[{\"path\": \"".as_slice(), SECRET].concat()),
        ("t.sum", [b"XXH3 (a) = ".as_slice(), SECRET].concat()),
    ] {
        let m = s.join(name);
        fs::write(&m, &text).unwrap();
        let out = verify_manifest(&m, &s.join("src"), &[]);
        assert_exit(&out, 2);
        assert_no_secret(&out);
    }
    assert_eq!(fs::read(&secret).unwrap(), SECRET);
}

/// Item 17: a FIFO where a manifest, an MHL file, a `--files-from`, `--exclude-from` or
/// `--log-file` is expected is refused at once, naming the path; nothing hangs (a hang fails
/// by the timeout).
#[test]
fn a_fifo_where_a_regular_file_belongs_is_refused_without_hanging() {
    let s = Scratch::new();
    write_file(s.join("src/a"), b"a");
    let fifo = s.join("fifo");
    mkfifo(&fifo, 0o644);
    let src_slash = format!("{}/", s.join("src").display());
    // The manifest verify reads.
    let out = verify_manifest(&fifo, &s.join("src"), &[]);
    assert_exit(&out, 2);
    assert_stderr_has(&out, "not a regular file");
    assert_stderr_has(&out, "fifo");
    // An MHL chain file: verify, cp and sync.
    let dst = s.join("dst");
    fs::create_dir_all(dst.join("ascmhl")).unwrap();
    mkfifo(&dst.join("ascmhl/ascmhl_chain.xml"), 0o644);
    let out = verify_manifest(&dst, &dst, &[]);
    assert_exit(&out, 2);
    assert_stderr_has(&out, "not a regular file");
    let out = guarded(
        Cp::new()
            .args(["-a", "--manifest-format=mhl"])
            .arg(s.join("src/a"))
            .arg(&dst),
    );
    assert_exit(&out, 1);
    assert_stderr_has(&out, "ascmhl_chain.xml");
    let out = guarded(
        Cp::bare()
            .args(["sync", "-a", "--manifest-format=mhl", &src_slash])
            .arg(format!("{}/", dst.display())),
    );
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    assert_stderr_has(&out, "ascmhl_chain.xml");
    // A generation file: the chain names a FIFO.
    let mhl = s.join("mhl");
    fs::create_dir_all(mhl.join("ascmhl")).unwrap();
    write_file(
        mhl.join("ascmhl/ascmhl_chain.xml"),
        "<ascmhldirectory><hashlist sequencenr=\"1\"><path>0001_g.mhl</path><c4>c4x</c4>\
         </hashlist></ascmhldirectory>",
    );
    mkfifo(&mhl.join("ascmhl/0001_g.mhl"), 0o644);
    let out = verify_manifest(&mhl, &mhl, &[]);
    assert_exit(&out, 2);
    assert_stderr_has(&out, "not a regular file");
    // A .mhl file named directly.
    let named = s.join("one.mhl");
    mkfifo(&named, 0o644);
    assert_exit(&verify_manifest(&named, &s.join("src"), &[]), 2);
    // The lists and logs sync and cp read or append to.
    for args in [
        vec!["sync", "-a", "--files-from"],
        vec!["sync", "-a", "--exclude-from"],
        vec!["sync", "-a", "--log-file"],
    ] {
        let out = guarded(
            Cp::bare()
                .args(&args)
                .arg(&fifo)
                .arg(&src_slash)
                .arg(s.join("out")),
        );
        assert_stderr_has(&out, "fifo");
        if args[2] == "--log-file" {
            // As rsync: a log file that cannot be used is warned about and the run goes on.
            assert_exit(&out, 0);
            assert_stderr_has(&out, "Ignoring \"log file\" setting.");
        } else {
            assert_ne!(out.status.code(), Some(0), "{args:?}: {}", describe(&out));
        }
    }
    let out = guarded(
        Cp::new()
            .arg("--log-file")
            .arg(&fifo)
            .arg(s.join("src/a"))
            .arg(s.join("b")),
    );
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    assert_stderr_has(&out, "not a regular file");
}

/// Item 12: `verify --manifest` reaches every listed name from DIR without following a
/// symlink: a listed name that is one, or lies through one (to a directory outside DIR, an
/// absolute one, one inside DIR), is a difference named as such, and nothing outside DIR is
/// read or its hash shown.
#[test]
fn verify_never_follows_a_symlink_out_of_the_tree() {
    let s = Scratch::new();
    let outside_body = b"outside DIR: never read";
    write_file(s.join("outside/f"), outside_body);
    let dir = s.join("dir");
    write_file(dir.join("real/g"), b"g");
    symlink("../outside", dir.join("esc")).unwrap();
    symlink(s.join("outside"), dir.join("abs")).unwrap();
    symlink("real", dir.join("inner")).unwrap();
    symlink("../outside/f", dir.join("lnk")).unwrap();
    let hash_outside = sha256_line(outside_body, "x");
    let hash_outside = hash_outside.split_whitespace().next().unwrap();
    for (listed, content, says) in [
        (
            "esc/f",
            &outside_body[..],
            "lies through the symbolic link 'esc'",
        ),
        (
            "abs/f",
            &outside_body[..],
            "lies through the symbolic link 'abs'",
        ),
        (
            "./esc/f",
            &outside_body[..],
            "lies through the symbolic link 'esc'",
        ),
        (
            "inner/g",
            &b"g"[..],
            "lies through the symbolic link 'inner'",
        ),
        ("lnk", &outside_body[..], "'lnk' is a symbolic link"),
    ] {
        let m = s.join("m.sha256");
        let text = sha256_line(b"g", "real/g") + &sha256_line(content, listed);
        fs::write(&m, text).unwrap();
        let out = verify_manifest(&m, &dir, &[]);
        assert_exit(&out, 1);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains(says), "{listed}: {stdout}");
        assert!(!stdout.contains(hash_outside), "{listed}: {stdout}");
        assert_stderr_has(&out, "1 difference(s)");
    }
    // The same tree without such names is whole (the symlinks counted, not differences).
    let m = s.join("m.sha256");
    fs::write(&m, sha256_line(b"g", "real/g")).unwrap();
    let out = verify_manifest(&m, &dir, &[]);
    assert_exit(&out, 0);
    assert_stderr_has(&out, "4 symlink(s) or special file(s) not covered");
}

/// Item 20: symlinks below DIR are one count in the summary line, not a line each; `-v` names
/// them.
#[test]
fn symlinks_not_covered_are_counted_and_named_under_v() {
    let s = Scratch::new();
    let dir = s.join("dir");
    write_file(dir.join("f"), b"f");
    for i in 0..3 {
        symlink("f", dir.join(format!("l{i}"))).unwrap();
    }
    let m = s.join("m.sha256");
    fs::write(&m, sha256_line(b"f", "f")).unwrap();
    let out = verify_manifest(&m, &dir, &[]);
    assert_exit(&out, 0);
    assert!(out.stdout.is_empty(), "{}", describe(&out));
    assert_stderr_has(
        &out,
        "no differences; 3 symlink(s) or special file(s) not covered",
    );
    let out = verify_manifest(&m, &dir, &["-v"]);
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches("not covered: ").count(), 3, "{stdout}");
}

/// Item 12: a manifest written by sync lists every regular file DEST holds after the run (ones
/// the source lacks, ones a filter protects), so `verify --manifest` passes right after, and
/// sha256sum agrees.
#[test]
fn a_sync_manifest_lists_every_file_dest_holds() {
    let s = Scratch::new();
    write_file(s.join("src/a"), b"a");
    write_file(s.join("src/sub/b"), b"b");
    let dst = s.join("dst");
    write_file(dst.join("old"), b"only in DEST");
    write_file(dst.join("sub/older"), b"only in DEST too");
    write_file(dst.join("deep/er/x"), b"a directory the source lacks");
    write_file(dst.join("kept.tmp"), b"protected by a filter");
    symlink("a", dst.join("link")).unwrap();
    let m = s.join("m.sha256");
    for extra in [&[][..], &["--delete", "--exclude=*.tmp"][..]] {
        let _ = fs::remove_file(&m);
        let out = guarded(
            Cp::bare()
                .args(["sync", "-a", "--hash", "sha256", "--manifest"])
                .arg(&m)
                .args(extra)
                .arg(format!("{}/", s.join("src").display()))
                .arg(format!("{}/", dst.display())),
        );
        assert_exit(&out, 0);
        let out = verify_manifest(&m, &dst, &[]);
        assert_exit(&out, 0);
        let text = fs::read_to_string(&m).unwrap();
        let mut names: Vec<&str> = text.lines().map(|l| &l[66..]).collect();
        names.sort();
        let mut want = vec!["a", "kept.tmp", "sub/b"];
        if extra.is_empty() {
            want.extend(["deep/er/x", "old", "sub/older"]);
        }
        want.sort();
        assert_eq!(names, want, "{extra:?}");
        let check = std::process::Command::new("sha256sum")
            .args(["-c", "--quiet"])
            .arg(&m)
            .current_dir(&dst)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stdout)
        );
    }
}

/// Item 13: a copy that fails (a source that does not exist) leaves no manifest, so the retry
/// is not refused for one; the retry writes it.
#[test]
fn a_failed_copy_leaves_no_manifest_to_block_the_retry() {
    let s = Scratch::new();
    write_file(s.join("src/a"), b"a");
    let m = s.join("m");
    for format in ["sum", "json"] {
        let _ = fs::remove_file(&m);
        let out = guarded(
            Cp::new()
                .args(["-a", "--manifest-format", format, "--manifest"])
                .arg(&m)
                .arg(s.join("nonexistent"))
                .arg(s.join("d")),
        );
        assert_exit(&out, 1);
        assert!(!m.exists(), "{format}: a manifest was left");
        assert_stderr_has(&out, "no manifest written");
        assert_stderr_has(&out, "not copied to ");
        let out = guarded(
            Cp::new()
                .args(["-a", "--manifest-format", format, "--manifest"])
                .arg(&m)
                .arg(s.join("src"))
                .arg(s.join("d")),
        );
        assert_exit(&out, 0);
        assert_exit(&verify_manifest(&m, &s.join("d"), &[]), 0);
        fs::remove_dir_all(s.join("d")).unwrap();
    }
    // No MHL generation for a failed copy either.
    fs::create_dir(s.join("d")).unwrap();
    let out = guarded(
        Cp::new()
            .args(["-a", "--manifest-format=mhl"])
            .arg(s.join("nonexistent"))
            .arg(s.join("d")),
    );
    assert_exit(&out, 1);
    assert!(!s.join("d/ascmhl").exists());
}

/// Item 21: a copy that fails part-way (a file it cannot read) writes no manifest for
/// `verify --manifest` or `sha256sum -c` to pass, and names the file not copied.
#[test]
fn a_copy_that_fails_part_way_writes_no_manifest_and_names_what_it_left() {
    if !is_root() {
        skip!("running the copy as another user needs root");
    }
    let s = Scratch::new();
    s.give_to(NOBODY.0, NOBODY.1);
    write_file(s.join("src/a"), b"a");
    write_file(s.join("src/b"), b"b, unreadable");
    write_file(s.join("src/sub/c"), b"c");
    chown_tree(s.path(), NOBODY.0, NOBODY.1);
    chmod(s.join("src/b"), 0o000);
    let m = s.join("m.sha256");
    let out = guarded(
        Cp::new()
            .args(["-r", "--hash", "sha256", "--manifest"])
            .arg(&m)
            .arg(s.join("src"))
            .arg(s.join("dst"))
            .run_as(NOBODY.0, NOBODY.1),
    );
    assert_exit(&out, 1);
    assert!(!m.exists(), "a manifest vouches for a failed copy");
    assert_stderr_has(&out, "no manifest written");
    let named = format!(
        "not copied to '{}': '{}'",
        s.join("dst").display(),
        s.join("src/b").display()
    );
    assert_stderr_has(&out, &named);
    // Only the file not copied is named.
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(text.matches("not copied to").count(), 1, "{text}");
}

/// Item 21: with `--tee`, a destination that fills up part-way: every file it lacks is named,
/// the ones never attempted included, and no manifest is written.
#[test]
fn a_tee_that_fills_up_names_every_file_it_lacks() {
    let s = Scratch::new();
    fs::create_dir(s.join("small")).unwrap();
    let mount = match TmpfsMount::new(&s.join("small"), "256k") {
        Ok(m) => m,
        Err(why) => skip!("{why}"),
    };
    let src = s.join("src");
    for i in 0..12 {
        write_file(src.join(format!("f{i:02}")), vec![i as u8 + 1; 100_000]);
    }
    let m = s.join("m.sum");
    let out = guarded(
        Cp::new()
            .args(["-r", "--manifest"])
            .arg(&m)
            .arg("--tee")
            .arg(mount.path().join("copy"))
            .arg(&src)
            .arg(s.join("big")),
    );
    assert_exit(&out, 1);
    assert!(!m.exists());
    assert_stderr_has(&out, "no manifest written");
    let text = String::from_utf8_lossy(&out.stderr);
    let mut lacking = 0;
    for i in 0..12 {
        let name = format!("f{i:02}");
        let copy = mount.path().join("copy").join(&name);
        let whole = fs::read(&copy).is_ok_and(|b| b == vec![i as u8 + 1; 100_000]);
        if !whole {
            lacking += 1;
            let named = format!(
                "not copied to '{}': '{}'",
                mount.path().join("copy").display(),
                src.join(&name).display()
            );
            assert!(text.contains(&named), "{name} is named nowhere: {text}");
        }
    }
    assert!(lacking > 0, "the tmpfs held the whole tree");
    // The main destination is whole, and named nowhere.
    assert_trees_equal(&src, &s.join("big"), Check::CONTENT);
    assert!(
        !text.contains(&format!("not copied to '{}'", s.join("big").display())),
        "{text}"
    );
}

/// Item 11: `cp --verify --hash` finds a file cp's rules kept (`-n`, `-u`, `--resume` trusting
/// size and mtime) that differs from the source, as `cp --verify` without `--hash` does.
#[test]
fn verify_with_hashes_finds_kept_files_that_differ() {
    let s = Scratch::new();
    write_file(s.join("src/same"), b"same");
    write_file(s.join("src/kept"), b"the source's bytes");
    let rules = ["-n", "-u", "--resume"];
    for (rule, hash) in rules.iter().flat_map(|r| [(*r, true), (*r, false)]) {
        let dst = s.join("dst");
        let _ = fs::remove_dir_all(&dst);
        let (_, src_mtime) = lstat_times(&s.join("src/kept"));
        match rule {
            // Newer than the source: -u keeps it.
            "-u" => {
                write_file(dst.join("kept"), b"other bytes, kept");
                set_times(
                    &dst.join("kept"),
                    None,
                    Some(filetime_later(&s.join("src/kept"))),
                )
                .unwrap();
            }
            // The source's size and mtime: --resume (with -p's times) takes it as complete.
            "--resume" => {
                write_file(dst.join("kept"), b"other bytes, kept!");
                set_times(&dst.join("kept"), None, Some(src_mtime)).unwrap();
            }
            _ => write_file(dst.join("kept"), b"other bytes, kept"),
        }
        let kept = fs::read(dst.join("kept")).unwrap();
        let mut cmd = Cp::new().args(["-r", "--preserve=timestamps", rule, "--verify"]);
        if hash {
            cmd = cmd.args(["--hash", "sha256"]);
        }
        let out = guarded(cmd.arg(format!("{}/.", s.join("src").display())).arg(&dst));
        assert_exit(&out, 1);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("kept"),
            "{rule} hash={hash}: {}",
            describe(&out)
        );
        assert!(!stdout.contains("same"), "{rule} hash={hash}: {stdout}");
        assert_eq!(fs::read(dst.join("kept")).unwrap(), kept, "{rule}");
    }
}

/// A time a minute after `path`'s mtime.
fn filetime_later(path: &Path) -> Ts {
    let (_, mtime) = lstat_times(path);
    Ts::new(mtime.sec + 60, 0)
}

/// Item 25: `verify --manifest` checks a tree deeper than PATH_MAX that `cp --manifest` copied.
#[test]
fn verify_checks_a_manifest_of_a_tree_deeper_than_path_max() {
    let s = Scratch::new();
    fs::create_dir(s.join("src")).unwrap();
    let levels = 24;
    let name = |level: usize| format!("level{level:02}-{}", "x".repeat(192));
    let mut dir = deep::Dir::open(&s.join("src"));
    for level in 0..levels {
        dir.mkdir(&name(level), 0o755);
        dir = dir.open_child(&name(level));
        if level % 8 == 0 {
            dir.write_file("f", format!("at {level}").as_bytes(), 0o644);
        }
    }
    dir.write_file("bottom", b"bottom", 0o644);
    drop(dir);
    let m = s.join("m.sum");
    let out = guarded(
        Cp::new()
            .current_dir(s.path())
            .args(["-a", "--manifest"])
            .arg(&m)
            .args(["src", "dst"]),
    );
    assert_success(&out);
    let out = verify_manifest(&m, &s.join("dst"), &[]);
    assert_exit(&out, 0);
    assert_stderr_has(&out, "4 files");
    // A file added at the bottom is found there.
    let mut dir = deep::Dir::open(&s.join("dst"));
    for level in 0..levels {
        dir = dir.open_child(&name(level));
    }
    dir.write_file("added", b"added", 0o644);
    drop(dir);
    let out = verify_manifest(&m, &s.join("dst"), &[]);
    assert_exit(&out, 1);
    assert_stderr_has(&out, "1 difference(s)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("extra: ") && stdout.contains("/added"),
        "{stdout}"
    );
}

/// `-f`/`--force` lets a manifest replace an old one: a regular file, or a symlink (the link,
/// not what it names). A device, FIFO or directory at that name is no manifest, and is refused
/// before anything is copied: a rename over it would destroy it (as root, `/dev/null` too).
#[test]
fn a_manifest_never_replaces_a_device_fifo_or_directory() {
    let s = Scratch::new();
    write_file(s.join("src/f"), "f");
    mkfifo(&s.join("fifo"), 0o644);
    fs::create_dir(s.join("adir")).unwrap();
    let mut targets = vec!["fifo", "adir"];
    if is_root() {
        let c = std::ffi::CString::new(s.join("null").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; makes a character device (1, 3 is /dev/null's).
        let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
        assert_eq!(rc, 0, "mknod");
        targets.push("null");
    } else {
        cannot_run("a device node needs root: the FIFO and directory cases ran");
    }
    for target in targets {
        let kind = fs::symlink_metadata(s.join(target)).unwrap().file_type();
        let manifest = s.join(target).display().to_string();
        for args in [
            vec!["cp", "-a", "-f", "--manifest", &manifest, "src", "d1"],
            vec![
                "sync",
                "-a",
                "--force",
                "--manifest",
                &manifest,
                "src/",
                "d2/",
            ],
        ] {
            let out = guarded(Cp::bare().args(&args).current_dir(s.path()));
            assert_ne!(out.status.code(), Some(0), "{args:?}: {}", describe(&out));
            assert_stderr_has(&out, "not a regular file");
            assert_eq!(
                fs::symlink_metadata(s.join(target)).unwrap().file_type(),
                kind,
                "{args:?} replaced {target}"
            );
            assert!(!s.join("d1").exists() && !s.join("d2").exists(), "{args:?}");
        }
    }
}
