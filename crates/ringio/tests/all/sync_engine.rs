//! `ringio sync`'s data path on a first sync: a directory of many small files (the ones a
//! worker copies back to back through its own data path) among a few big and sparse ones,
//! checked against the source (content, mode, mtime) and against rsync's own result; a source
//! file among them that cannot be read (named, exit 23, deletion stopped) and one that
//! vanishes between the listing and its copy (exit 24, deletion made).

use std::collections::BTreeSet;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::process::{Command, Output};

use crate::common::*;

const STOPPED: &str = "IO error encountered -- skipping file deletion";

/// Runs `ringio sync ARGS` (`tool` "ringio") or `rsync ARGS` in `cwd`, as nobody when
/// `as_nobody` and the tests run as root (so that a mode-000 file cannot be read).
fn run(tool: &str, cwd: &Path, args: &[&str], as_nobody: bool) -> Output {
    sync_or_rsync(tool, cwd, args, None, as_nobody)
}

/// Sets `path`'s mtime (and atime) to `secs` whole seconds and `nanos`.
fn set_mtime(path: &Path, secs: i64, nanos: i64) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let t = libc::timespec {
        tv_sec: secs,
        tv_nsec: nanos,
    };
    // SAFETY: a valid C string and two valid timespecs.
    let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [t, t].as_ptr(), 0) };
    assert_eq!(rc, 0, "utimensat {}", path.display());
}

/// A deterministic content of `len` bytes for file number `seed`.
fn content(seed: usize, len: usize) -> Vec<u8> {
    let mut x = (seed as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// `src/flat`: 400 small files of sizes around every threshold a copy decides on (0, one
/// byte, a page, 32 KiB, 64 KiB and one byte past it), in four modes, with mtimes of their
/// own (nanoseconds when `nanos`); `src/big`: two 3 MiB files and a sparse 16 MiB one (data
/// at both ends and in the middle); `src/flat/sub`: a few more small ones.
fn many_small_few_big(src: &Path, nanos: bool) {
    let sizes = [0, 1, 100, 4095, 4096, 4097, 32768, 65535, 65536, 65537];
    let modes = [0o644, 0o600, 0o755, 0o640];
    let flat = src.join("flat");
    for i in 0..400 {
        let path = flat.join(format!("f{i:03}"));
        write_file(&path, content(i, sizes[i % sizes.len()]));
        chmod(&path, modes[i % modes.len()]);
        set_mtime(
            &path,
            1_600_000_000 + i as i64 * 7,
            if nanos { i as i64 * 1001 } else { 0 },
        );
    }
    for i in 0..5 {
        let path = flat.join(format!("sub/s{i}"));
        write_file(&path, content(1000 + i, 5000 * i));
        set_mtime(&path, 1_500_000_000 + i as i64, 0);
    }
    for (i, name) in ["big1", "big2"].iter().enumerate() {
        let path = src.join("big").join(name);
        write_file(&path, content(2000 + i, 3 << 20));
        set_mtime(&path, 1_550_000_000, 0);
    }
    let sparse = src.join("big/sparse");
    write_file(&sparse, content(3000, 8192));
    let f = OpenOptions::new().write(true).open(&sparse).unwrap();
    f.write_all_at(&content(3001, 4096), 8 << 20).unwrap();
    f.write_all_at(&content(3002, 4096), (16 << 20) - 4096)
        .unwrap();
    drop(f);
    set_mtime(&sparse, 1_560_000_000, 0);
    for d in ["flat/sub", "flat", "big", ""] {
        set_mtime(&src.join(d), 1_400_000_000, 0);
    }
}

/// The lines of `out`'s stdout, sorted (the order of a directory's lines is checked by the
/// sync tests; here, what is listed), the destination's name left out of rsync's "created
/// directory" line.
fn sorted_lines(out: &Output) -> BTreeSet<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| match l.strip_prefix("created directory ") {
            Some(_) => "created directory".to_owned(),
            None => l.to_owned(),
        })
        .collect()
}

/// What a mode/mtime/content comparison of two trees checks.
const MODE_MTIME: Check = Check {
    mode: true,
    mtime: true,
    ..Check::CONTENT
};

/// A first sync with `-a` (and with `-aS`, and with `--hash`) gives every file its source's
/// content, mode and mtime (to the nanosecond), and the same tree and `-i` lines as rsync's.
/// Under `-S` the sparse file keeps its holes.
#[test]
fn first_sync_of_many_small_files_matches_the_source_and_rsync() {
    // rsync has no --hash: it runs without it.
    let hashed = &["--hash", "xxh128", "--manifest", "m.sum"][..];
    for (extra, rsync_extra) in [(&[][..], &[][..]), (&["-S"], &["-S"]), (hashed, &[])] {
        let dir = Scratch::new();
        many_small_few_big(&dir.join("src"), true);
        let args = |extra: &[&'static str], to| [&["-a", "-i"], extra, &["src/", to]].concat();
        let ours = run("ringio", dir.path(), &args(extra, "ri/"), false);
        assert_success(&ours);
        assert_trees_equal(&dir.join("src"), &dir.join("ri"), MODE_MTIME);
        if extra == ["-S"] {
            let blocks = fs::metadata(dir.join("ri/big/sparse")).unwrap().blocks();
            assert!(blocks * 512 < 1 << 20, "holes kept: {blocks} blocks");
        }
        if !rsync_available() {
            continue;
        }
        let rsync = run("rsync", dir.path(), &args(rsync_extra, "rs/"), false);
        assert_success(&rsync);
        assert_trees_equal(&dir.join("rs"), &dir.join("ri"), MODE_MTIME);
        assert_eq!(
            sorted_lines(&ours),
            sorted_lines(&rsync),
            "{extra:?}: -i lines"
        );
    }
}

/// `--hash --manifest` on a first sync records every file copied, small ones and big, with
/// the hash of its content: the manifest lists 408 files and `sha256sum -c` agrees.
#[test]
fn first_sync_with_hash_records_every_small_file() {
    let dir = Scratch::new();
    many_small_few_big(&dir.join("src"), false);
    let args = [
        "-a",
        "--hash",
        "sha256",
        "--manifest",
        "m.sha256",
        "src/",
        "dst/",
    ];
    let out = run("ringio", dir.path(), &args, false);
    assert_success(&out);
    let text = fs::read_to_string(dir.join("m.sha256")).unwrap();
    // 400 + 5 small, 3 big.
    assert_eq!(text.lines().count(), 408, "{text}");
    let check = Command::new("sha256sum")
        .args(["-c", "--quiet"])
        .arg(dir.join("m.sha256"))
        .current_dir(dir.join("dst"))
        .output();
    match check {
        Ok(check) => assert!(check.status.success(), "{}", describe(&check)),
        Err(_) => cannot_run("sha256sum -c: not installed"),
    }
}

/// `src/flat` with 200 small files, `f100` unreadable; `dst` with an `extra` in its root,
/// in `flat` and in `later` (a directory after `flat` in rsync's order).
fn unreadable_among_small(dir: &Path) {
    let flat = dir.join("src/flat");
    for i in 0..200 {
        write_file(flat.join(format!("f{i:03}")), content(i, 1000 + i * 37));
    }
    write_file(dir.join("src/later/g"), "g");
    for d in ["dst", "dst/flat", "dst/later"] {
        write_file(dir.join(d).join("extra"), "old");
    }
    if is_root() {
        chown_tree(dir, NOBODY.0, NOBODY.1);
    }
    chmod(flat.join("f100"), 0);
}

/// A source file among a directory's small files that cannot be read (EACCES) is named, the
/// others are copied, the exit code is 23, rsync's line is printed once and nothing is
/// deleted after it in rsync's order (`--delete`: `flat`'s own extra went as `flat` was
/// listed, before its files; `--delete-after`: nothing at all). rsync, on the same tree, does
/// the same under `--delete-after`.
#[test]
fn an_unreadable_small_file_is_named_and_stops_deletion() {
    let modes = [
        ("--delete", &["later/extra"][..]),
        (
            "--delete-after",
            &["extra", "flat/extra", "later/extra"][..],
        ),
    ];
    for tool in ["ringio", "rsync"] {
        if tool == "rsync" && !rsync_available() {
            continue;
        }
        for (mode, kept) in modes {
            let dir = Scratch::new();
            if is_root() {
                dir.give_to(NOBODY.0, NOBODY.1);
            }
            unreadable_among_small(dir.path());
            let out = run(tool, dir.path(), &["-r", mode, "src/", "dst/"], true);
            let shown = describe(&out);
            assert_exit(&out, 23);
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("flat/f100"),
                "{tool} {mode}: the file is named\n{shown}"
            );
            // rsync's sender meets the file while its generator deletes further on, so with
            // deletion during the transfer which deletions it makes is a matter of timing.
            let timed = tool == "rsync" && mode == "--delete";
            let said = String::from_utf8_lossy(&out.stdout)
                .matches(STOPPED)
                .count();
            assert!(
                said == 1 || timed,
                "{tool} {mode}: said {said} times\n{shown}"
            );
            for extra in ["extra", "flat/extra", "later/extra"] {
                if timed {
                    continue;
                }
                let left = dir.join("dst").join(extra).exists();
                let want = kept.contains(&extra);
                assert_eq!(left, want, "{tool} {mode}: {extra} left\n{shown}");
            }
            assert!(!dir.join("dst/flat/f100").exists(), "{tool}\n{shown}");
            for i in (0..200).filter(|&i| i != 100) {
                let name = format!("flat/f{i:03}");
                let got = fs::read(dir.join("dst").join(&name)).unwrap();
                assert_eq!(got, content(i, 1000 + i * 37), "{tool} {mode}: {name}");
            }
            chmod(dir.join("src/flat/f100"), 0o644);
        }
    }
}

/// A small file that vanishes between the listing and its copy is reported as vanished, the
/// exit code is 24, the others are copied, and every deletion is made.
#[test]
fn a_small_file_that_vanishes_before_its_copy_gives_24() {
    let dir = Scratch::new();
    for i in 0..200 {
        write_file(dir.join(format!("src/flat/f{i:03}")), content(i, 2000));
    }
    write_file(dir.join("src/flat/gone"), "soon gone");
    for d in ["dst", "dst/flat"] {
        write_file(dir.join(d).join("extra"), "old");
    }
    let out = Cp::bare()
        .args(["sync", "-a", "--delete", "src/", "dst/"])
        .current_dir(dir.path())
        .env("RINGIO_TEST_VANISH_AFTER_LIST", "gone")
        .run();
    let shown = describe(&out);
    assert_exit(&out, 24);
    assert_stderr_has(&out, "file has vanished: 'src/flat/gone'");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(STOPPED),
        "{shown}"
    );
    assert!(!dir.join("dst/extra").exists(), "{shown}");
    assert!(!dir.join("dst/flat/extra").exists(), "{shown}");
    assert!(!dir.join("dst/flat/gone").exists(), "{shown}");
    for i in 0..200 {
        let name = format!("flat/f{i:03}");
        assert_eq!(
            fs::read(dir.join("dst").join(&name)).unwrap(),
            content(i, 2000)
        );
    }
}
