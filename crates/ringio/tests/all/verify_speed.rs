//! `verify --manifest` reads each file into its worker's one buffer: small files in one read,
//! big ones in several, spread over the workers. What that must not change: the hashes of every
//! size (the empty file, one read short of the buffer, exactly one buffer, one byte more, many
//! buffers), the findings and their order whatever the number of workers, a file that changes
//! while it is read, a file that cannot be read, and `--uncached` (O_DIRECT at sizes that are
//! not multiples of a block).

use std::fs;
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::common::*;

/// A worker's read buffer in verify/manifest.rs: the sizes around it are the edges.
const BLOCK: usize = 1 << 20;

/// The manifest `tool` (`sha256sum`, `b3sum`, `xxhsum -H2`) writes of `names` in `dir`, at
/// `manifest`; false (said) when the tool is not installed.
fn sums(tool: &[&str], dir: &Path, names: &[String], manifest: &Path) -> bool {
    let Ok(out) = std::process::Command::new(tool[0])
        .args(&tool[1..])
        .args(names)
        .current_dir(dir)
        .output()
    else {
        cannot_run(&format!(
            "{} not installed: its manifest is not tried",
            tool[0]
        ));
        return false;
    };
    assert!(
        out.status.success(),
        "{tool:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    fs::write(manifest, out.stdout).unwrap();
    true
}

const TOOLS: [&[&str]; 3] = [&["sha256sum"], &["b3sum"], &["xxhsum", "-H2"]];

fn check(manifest: &Path, dir: &Path, extra: &[&str]) -> Output {
    Cp::bare()
        .arg("verify")
        .args(extra)
        .arg("--manifest")
        .arg(manifest)
        .arg(dir)
        .timeout(Duration::from_secs(120))
        .run()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Bytes of `len` that differ from one block to the next (a block-sized repeat would hide a
/// block read twice or skipped).
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut out = vec![0u8; len];
    Prng::new(seed).fill(&mut out);
    out
}

/// Thousands of small files (sizes 0 to 9 KiB, in 40 directories) check clean with every tool's
/// manifest and any number of workers; a changed, a missing and an unlisted file are named, in
/// the manifest's order, the same with 1, 2 and 7 workers.
#[test]
fn many_small_files_check_clean_and_name_each_difference() {
    let s = Scratch::new();
    let tree = s.join("tree");
    let mut names = Vec::new();
    for i in 0..3000usize {
        let name = format!("d{:02}/f{i:04}", i % 40);
        write_file(tree.join(&name), pattern(i * 37 % 9000, i as u64));
        names.push(name);
    }
    for tool in TOOLS {
        let manifest = s.join(format!("{}.sums", tool[0]));
        if !sums(tool, &tree, &names, &manifest) {
            continue;
        }
        for threads in ["1", "2", "7"] {
            let out = check(&manifest, &tree, &["--threads", threads]);
            assert_exit(&out, 0);
            assert_eq!(stdout(&out), "", "{tool:?} with {threads} workers");
        }
    }
    let manifest = s.join("SHA256SUMS");
    assert!(sums(&["sha256sum"], &tree, &names, &manifest));
    write_file(tree.join("d05/f1005"), b"changed");
    fs::remove_file(tree.join("d17/f2017")).unwrap();
    write_file(tree.join("d00/new"), b"unlisted");
    let mut seen = Vec::new();
    for threads in ["1", "2", "7"] {
        let out = check(&manifest, &tree, &["--threads", threads]);
        assert_exit(&out, 1);
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("differs: 'd05/f1005'"), "{text}");
        assert_eq!(lines[1], "missing: 'd17/f2017'", "{text}");
        assert_eq!(lines[2], "extra: 'd00/new' (not in the manifest)", "{text}");
        seen.push(text);
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
}

/// Files at the buffer's edges and over it (one byte, a block less one, a block, a block and
/// one, several blocks and a tail) hash as the tools hash them, cached and `--uncached`; a byte
/// changed in a later block is found, with the hash the tool gives the file now.
#[test]
fn big_files_over_the_buffer_hash_as_the_tools_do() {
    let s = Scratch::new();
    let tree = s.join("tree");
    let sizes = [
        0,
        1,
        4095,
        4097,
        BLOCK - 1,
        BLOCK,
        BLOCK + 1,
        3 * BLOCK + 12345,
    ];
    let names: Vec<String> = sizes.iter().map(|n| format!("size-{n}")).collect();
    for (name, &size) in names.iter().zip(&sizes) {
        write_file(tree.join(name), pattern(size, size as u64));
    }
    let big = names.last().unwrap().clone();
    for tool in TOOLS {
        let manifest = s.join(format!("{}.sums", tool[0]));
        if !sums(tool, &tree, &names, &manifest) {
            continue;
        }
        for extra in [&[][..], &["--uncached"], &["--threads", "1"]] {
            let out = check(&manifest, &tree, extra);
            assert_exit(&out, 0);
            assert_eq!(stdout(&out), "", "{tool:?} {extra:?}");
        }
        // One byte in the third block, changed in place.
        let mut data = fs::read(tree.join(&big)).unwrap();
        data[2 * BLOCK + 7] ^= 0x55;
        fs::write(tree.join(&big), &data).unwrap();
        let now = s.join("now.sums");
        assert!(sums(tool, &tree, std::slice::from_ref(&big), &now));
        let now = fs::read_to_string(&now).unwrap();
        let found = now.split_whitespace().next().unwrap();
        for extra in [&[][..], &["--uncached"]] {
            let out = check(&manifest, &tree, extra);
            assert_exit(&out, 1);
            let text = stdout(&out);
            assert_eq!(text.lines().count(), 1, "{text}");
            assert!(text.starts_with(&format!("differs: '{big}'")), "{text}");
            assert!(
                text.trim_end().ends_with(&format!("read {found}")),
                "{text}"
            );
        }
        data[2 * BLOCK + 7] ^= 0x55;
        fs::write(tree.join(&big), &data).unwrap();
    }
}

/// A file rewritten (same size, other bytes) and grown while checks run: every check ends,
/// with exit 0 or 1, and names that file only; the files around it are checked as ever. Then
/// files shorter and longer than the manifest says are found different.
#[test]
fn a_file_changed_under_the_check_is_named_alone() {
    let s = Scratch::new();
    let tree = s.join("tree");
    let mut names: Vec<String> = (0..200).map(|i| format!("f{i:03}")).collect();
    for (i, name) in names.iter().enumerate() {
        write_file(tree.join(name), pattern(i * 613, i as u64));
    }
    let a = pattern(3 * BLOCK + 5, 1);
    let b = pattern(3 * BLOCK + 5, 2);
    write_file(tree.join("moving"), &a);
    names.push("moving".into());
    let manifest = s.join("SHA256SUMS");
    assert!(sums(&["sha256sum"], &tree, &names, &manifest));
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            use std::os::unix::fs::FileExt;
            let f = fs::OpenOptions::new()
                .write(true)
                .open(tree.join("moving"))
                .unwrap();
            let mut turn = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let body = if turn % 2 == 0 { &b } else { &a };
                f.write_all_at(body, 0).unwrap();
                // Now and then longer than the manifest (and than statx said at open).
                if turn % 3 == 0 {
                    f.write_all_at(b"grown", body.len() as u64).unwrap();
                } else {
                    f.set_len(body.len() as u64).unwrap();
                }
                turn += 1;
            }
        });
        for round in 0..15 {
            let threads = ["1", "2", "3"][round % 3];
            let out = check(&manifest, &tree, &["--threads", threads]);
            let code = out.status.code();
            assert!(matches!(code, Some(0 | 1)), "{out:?}");
            let text = stdout(&out);
            for line in text.lines() {
                assert!(line.starts_with("differs: 'moving'"), "{text}");
            }
            assert_eq!(code == Some(1), !text.is_empty(), "{text}");
        }
        stop.store(true, Ordering::Relaxed);
    });
    for body in [
        &a[..a.len() - 1],
        &[a.as_slice(), b"x"].concat()[..],
        &[][..],
    ] {
        fs::write(tree.join("moving"), body).unwrap();
        for extra in [&[][..], &["--uncached"]] {
            let out = check(&manifest, &tree, extra);
            assert_exit(&out, 1);
            let text = stdout(&out);
            assert_eq!(text.lines().count(), 1, "{text}");
            assert!(text.starts_with("differs: 'moving'"), "{text}");
        }
    }
}

/// A listed file that cannot be read (mode 000, checked by a user who is not its owner) and a
/// listed name that is a directory are each named with the reason; every other file is still
/// checked, a changed one among them found.
#[test]
fn an_unreadable_file_is_named_and_the_rest_checked() {
    let s = Scratch::new();
    let tree = s.join("tree");
    let mut names = Vec::new();
    for i in 0..50 {
        let name = format!("f{i:02}");
        write_file(tree.join(&name), pattern(i * 1000 + 1, i as u64));
        names.push(name);
    }
    write_file(tree.join("locked"), b"secret bytes");
    write_file(tree.join("was-a-file"), b"a file then");
    names.extend(["locked".to_string(), "was-a-file".to_string()]);
    let manifest = s.join("SHA256SUMS");
    assert!(sums(&["sha256sum"], &tree, &names, &manifest));
    fs::remove_file(tree.join("was-a-file")).unwrap();
    fs::create_dir(tree.join("was-a-file")).unwrap();
    write_file(tree.join("f30"), b"changed");
    if is_root() {
        chown_tree(s.path(), NOBODY.0, NOBODY.1);
        s.give_to(NOBODY.0, NOBODY.1);
    }
    chmod(tree.join("locked"), 0o000);
    for extra in [&[][..], &["--uncached"], &["--threads", "1"]] {
        let cmd = Cp::bare()
            .arg("verify")
            .args(extra)
            .arg("--manifest")
            .arg(&manifest)
            .arg(&tree);
        let out = if is_root() {
            cmd.run_as(NOBODY.0, NOBODY.1).run()
        } else {
            cmd.run()
        };
        assert_exit(&out, 1);
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{extra:?}: {text}");
        assert!(lines[0].starts_with("differs: 'f30'"), "{text}");
        assert_eq!(
            lines[1], "cannot check 'locked': Permission denied",
            "{text}"
        );
        assert!(
            lines[2].starts_with("cannot check 'was-a-file': "),
            "{text}"
        );
        assert!(!text.contains("secret"), "{text}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("52 files"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `--uncached` reads from the device: O_DIRECT where the filesystem allows it (the summary
/// says so), at every size around the block and the buffer, with many files over several
/// workers; on tmpfs (no O_DIRECT) the pages are dropped first instead, with the same result.
#[test]
fn uncached_checks_read_from_the_device_at_every_size() {
    let s = Scratch::new();
    let tree = s.join("tree");
    let mut names = Vec::new();
    let sizes = [
        0,
        1,
        511,
        512,
        513,
        4096,
        8191,
        BLOCK - 512,
        BLOCK + 512,
        2 * BLOCK + 1,
    ];
    for i in 0..300 {
        // The big sizes once, then small ones: many files, over several workers.
        let size = sizes[i % sizes.len()] % if i < sizes.len() { usize::MAX } else { 65536 };
        let name = format!("d{}/f{i:03}", i % 7);
        write_file(tree.join(&name), pattern(size, i as u64));
        names.push(name);
    }
    let manifest = s.join("b3.sums");
    let tool: &[&str] = if sums(&["b3sum"], &tree, &names, &manifest) {
        &["b3sum"]
    } else {
        assert!(sums(&["sha256sum"], &tree, &names, &manifest));
        &["sha256sum"]
    };
    for name in &names {
        evict(tree.join(name));
    }
    let out = check(&manifest, &tree, &["--uncached"]);
    assert_exit(&out, 0);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("from the device"), "{err}");
    assert!(err.contains("300 files"), "{err}");
    // A filesystem without O_DIRECT: the pages are dropped, the result is the same.
    fs::create_dir(s.join("ramfs")).unwrap();
    let tmpfs = match TmpfsMount::ramfs(&s.join("ramfs")) {
        Ok(mount) => mount,
        Err(why) => return cannot_run(&why),
    };
    let there = tmpfs.path().join("tree");
    for name in &names {
        write_file(there.join(name), fs::read(tree.join(name)).unwrap());
    }
    write_file(there.join("d3/f010"), b"changed on tmpfs");
    let manifest2 = s.join("there.sums");
    fs::copy(&manifest, &manifest2).unwrap();
    let out = check(&manifest2, &there, &["--uncached"]);
    assert_exit(&out, 1);
    assert!(
        stdout(&out).starts_with("differs: 'd3/f010'"),
        "{tool:?}: {}",
        stdout(&out)
    );
    assert_eq!(stdout(&out).lines().count(), 1, "{}", stdout(&out));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("cached pages dropped first"), "{err}");
}

/// `bench verify` times ringio's check and the checksum tool's on a tree, every run right (the
/// manifest is the tree's), with a relative `--dir` too (the checkers run in the tree: the
/// manifest's path must not be relative to where the bench was started); its JSON renders
/// with `bench report`, and the tree is left as it was.
#[test]
fn bench_verify_checks_with_ringio_and_the_tool_from_a_relative_dir() {
    let s = Scratch::new();
    for i in 0..40 {
        write_file(
            s.join(format!("src/d{}/f{i}", i % 3)),
            pattern(i * 999, i as u64),
        );
    }
    let before = fs::read_dir(s.join("src/d0")).unwrap().count();
    let json = s.join("verify.json");
    let out = Cp::bare()
        .current_dir(s.path())
        .args([
            "bench", "verify", "--src", "src", "--dir", "work", "--runs", "2",
        ])
        .args(["--algos", "sha256,blake3", "--json"])
        .arg(&json)
        .run();
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(!text.contains("FAILED"), "{text}");
    let doc: serde_json::Value = serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    let algos = doc["workloads"][0]["algos"].as_array().unwrap();
    assert_eq!(algos.len(), 2);
    for algo in algos {
        for r in algo["results"].as_array().unwrap() {
            if r["skipped"].is_string() {
                continue;
            }
            let runs = r["runs"].as_array().unwrap();
            assert_eq!(runs.len(), 2, "{r}");
            assert!(runs.iter().all(|x| x["ok"] == true), "{r}");
        }
    }
    assert_eq!(algos[0]["algo"], "sha256");
    assert_eq!(algos[0]["peer"], "sha256sum -c");
    assert!(algos[0]["ratio_to_peer"]["ringio-verify"].is_number());
    let report = Cp::bare().args(["bench", "report"]).arg(&json).run();
    assert_exit(&report, 0);
    let table = stdout(&report);
    assert!(table.contains("| sha256 | ringio-verify |"), "{table}");
    assert!(table.contains("sha256sum -c"), "{table}");
    assert_eq!(fs::read_dir(s.join("src/d0")).unwrap().count(), before);
}
