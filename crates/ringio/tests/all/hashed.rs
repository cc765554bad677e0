//! Copies that hash their bytes on the way (`--hash`, `--manifest`): the manifests the checksum
//! tools check, every engine and data path hashing what it wrote, the bad input refused before
//! anything is copied, and a manifest never claiming bytes that were not written.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::common::*;

/// Bytes that differ from their neighbours and depend on `seed`.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    (0..len as u64)
        .map(|i| ((i ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
        .collect()
}

/// A tree with what a manifest must get right: small files (the ring, the in-place copy), a
/// big one split into chunks, a sparse one, an empty one, hard links, a symlink (not listed),
/// and, when `awkward`, names with a space, a backslash, a newline and bytes that are not UTF-8.
fn tree(root: &Path, awkward: bool) {
    write_file(root.join("small"), bytes(1000, 1));
    write_file(root.join("sub/deeper/file"), bytes(70_000, 2));
    write_file(root.join("empty"), b"");
    write_file(root.join("big"), bytes(9 << 20, 3));
    let sparse = fs::File::create(root.join("sparse")).unwrap();
    sparse.set_len(6 << 20).unwrap();
    sparse.write_at(&bytes(5000, 4), 3 << 20).unwrap();
    fs::hard_link(root.join("small"), root.join("sub/hardlink")).unwrap();
    std::os::unix::fs::symlink("small", root.join("symlink")).unwrap();
    if awkward {
        write_file(root.join("with space"), b"space");
        write_file(root.join("back\\slash"), b"backslash");
        write_file(root.join("new\nline"), b"newline");
        let raw = root.join(OsStr::from_bytes(b"raw\xff\xfe"));
        write_file(raw, b"not utf-8");
    }
}

/// Every regular file below `root`, as manifest names.
fn files(root: &Path) -> Vec<Vec<u8>> {
    fn walk(root: &Path, rel: &Path, out: &mut Vec<Vec<u8>>) {
        for e in fs::read_dir(root.join(rel)).unwrap() {
            let e = e.unwrap();
            let rel = rel.join(e.file_name());
            let kind = e.file_type().unwrap();
            if kind.is_dir() {
                walk(root, &rel, out);
            } else if kind.is_file() {
                out.push(rel.as_os_str().as_bytes().to_vec());
            }
        }
    }
    let mut out = Vec::new();
    walk(root, Path::new(""), &mut out);
    out.sort();
    out
}

/// `ringio verify --manifest MANIFEST DIR` (and `extra`).
fn verify(manifest: &Path, dir: &Path, extra: &[&str]) -> std::process::Output {
    Cp::bare()
        .arg("verify")
        .args(extra)
        .arg("--manifest")
        .arg(manifest)
        .arg(dir)
        .run()
}

/// Runs a checksum tool's `-c` on `manifest` in `dir`; `None` when it is not installed.
fn tool_check(tool: &str, manifest: &Path, dir: &Path) -> Option<std::process::Output> {
    std::process::Command::new(tool)
        .arg("-c")
        .arg(manifest)
        .current_dir(dir)
        .output()
        .ok()
}

/// The names a sum manifest lists, unescaped as the tools unescape them.
fn listed(manifest: &Path) -> Vec<Vec<u8>> {
    let text = fs::read(manifest).unwrap();
    let mut names: Vec<Vec<u8>> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|line| {
            let escaped = line.starts_with(b"\\");
            let line = if escaped { &line[1..] } else { line };
            let name = if line.starts_with(b"XXH3 (") {
                &line[6..line.len() - 1 - line.iter().rev().position(|&b| b == b')').unwrap()]
            } else {
                &line[line.iter().position(|&b| b == b' ').unwrap() + 2..]
            };
            if !escaped {
                return name.to_vec();
            }
            let mut out = Vec::new();
            let mut it = name.iter();
            while let Some(&b) = it.next() {
                if b == b'\\' {
                    match it.next() {
                        Some(b'n') => out.push(b'\n'),
                        Some(b'r') => out.push(b'\r'),
                        Some(&c) => out.push(c),
                        None => {}
                    }
                } else {
                    out.push(b);
                }
            }
            out
        })
        .collect();
    names.sort();
    names
}

/// Each engine that hashes writes a manifest of every regular file (hard links included,
/// symlinks not), that `ringio verify --manifest` finds whole and that the checksum tools of
/// each algorithm accept; the copy itself is exact.
fn manifests_list_every_file_and_the_tools_agree(engine: &str) {
    if !matches!(engine, "uring" | "uring-ring" | "readwrite") {
        // The other engines move bytes in the kernel: refused with --hash (tested below).
        return;
    }
    let s = Scratch::new();
    let src = s.join("src");
    tree(&src, true);
    for (algo, tool) in [
        ("sha256", "sha256sum"),
        ("blake3", "b3sum"),
        ("md5", "md5sum"),
        ("sha1", "sha1sum"),
        ("xxh128", "xxhsum"),
        ("xxh64", "xxhsum"),
        ("xxh3", "xxhsum"),
    ] {
        let (dst, manifest) = (s.join(format!("dst-{algo}")), s.join(format!("{algo}.sum")));
        // Cold, so the big file is copied in chunks by several workers.
        evict(src.join("big"));
        let out = Cp::new()
            .engine(engine)
            .args(["-a", "--chunk-size", "1M", "--threads", "4", "--hash", algo])
            .arg("--manifest")
            .arg(&manifest)
            .arg(&src)
            .arg(&dst)
            .run();
        assert_success(&out);
        // The source's atimes move as it is read.
        let check = Check {
            atime: false,
            ..Check::ARCHIVE
        };
        assert_trees_equal(&src, &dst, check);
        assert_eq!(listed(&manifest), files(&dst), "{engine} {algo}");
        let checked = verify(&manifest, &dst, &[]);
        assert_exit(&checked, 0);
        // xxhsum 0.8.1 (Debian 12) reads no escaped name, b3sum no name that is not UTF-8:
        // they check a tree without them, below.
        if tool == "xxhsum" || tool == "b3sum" {
            continue;
        }
        match tool_check(tool, &manifest, &dst) {
            Some(out) => assert!(
                out.status.success(),
                "{tool} -c: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
            None => cannot_run(&format!("{tool} -c: not installed")),
        }
    }
    // b3sum and xxhsum on names they can read.
    let plain = s.join("plain");
    tree(&plain, false);
    for (algo, tool) in [
        ("blake3", "b3sum"),
        ("xxh128", "xxhsum"),
        ("xxh64", "xxhsum"),
        ("xxh3", "xxhsum"),
    ] {
        let (dst, manifest) = (
            s.join(format!("plain-{algo}")),
            s.join(format!("p{algo}.sum")),
        );
        let out = Cp::new()
            .engine(engine)
            .args(["-a", "--hash", algo, "--manifest"])
            .arg(&manifest)
            .arg(&plain)
            .arg(&dst)
            .run();
        assert_success(&out);
        match tool_check(tool, &manifest, &dst) {
            Some(out) => assert!(
                out.status.success(),
                "{tool} -c ({algo}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
            None => cannot_run(&format!("{tool} -c: not installed")),
        }
    }
}

engine_tests!(manifests_list_every_file_and_the_tools_agree);

/// The JSON manifest: one object per file with its path (and raw bytes for a name that is not
/// UTF-8), size, mtime, algorithm and hash; `ringio verify` reads it back and finds a change.
#[test]
fn json_manifests_carry_every_field_and_are_read_back() {
    let s = Scratch::new();
    let src = s.join("src");
    tree(&src, true);
    let (dst, manifest) = (s.join("dst"), s.join("m.json"));
    let out = Cp::new()
        .args(["-a", "--manifest-format", "json", "--manifest"])
        .arg(&manifest)
        .arg(&src)
        .arg(&dst)
        .run();
    assert_success(&out);
    let items: Vec<serde_json::Value> =
        serde_json::from_slice(&fs::read(&manifest).unwrap()).unwrap();
    let mut names = Vec::new();
    for item in &items {
        let path: Vec<u8> = match item.get("path_bytes") {
            Some(raw) => raw
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b.as_u64().unwrap() as u8)
                .collect(),
            None => item["path"].as_str().unwrap().as_bytes().to_vec(),
        };
        let meta = fs::metadata(dst.join(OsStr::from_bytes(&path))).unwrap();
        assert_eq!(item["size"].as_u64(), Some(meta.len()), "{item}");
        assert_eq!(item["algorithm"], "xxh128");
        assert_eq!(item["hash"].as_str().unwrap().len(), 32);
        assert!(item["mtime"].as_str().unwrap().ends_with('Z'), "{item}");
        names.push(path);
    }
    names.sort();
    assert_eq!(names, files(&dst));
    assert_exit(&verify(&manifest, &dst, &[]), 0);
    fs::write(dst.join("sub/deeper/file"), b"changed").unwrap();
    let out = verify(&manifest, &dst, &[]);
    assert_exit(&out, 1);
    assert!(String::from_utf8_lossy(&out.stdout).contains("differs: 'sub/deeper/file'"));
}

/// ASC MHL: `--manifest-format mhl` writes a generation into DEST/ascmhl, which `ringio
/// verify` reads from the folder, finding a changed file; a second copy adds a generation.
#[test]
fn mhl_generations_are_written_into_the_destination_and_checked() {
    let s = Scratch::new();
    let src = s.join("card");
    tree(&src, false);
    let dst = s.join("offload");
    let copy = || {
        Cp::new()
            .args(["-a", "-T", "--manifest-format", "mhl"])
            .arg(&src)
            .arg(&dst)
            .run()
    };
    assert_success(&copy());
    let folder = dst.join("ascmhl");
    assert!(folder.join("ascmhl_chain.xml").is_file());
    assert_exit(&verify(&dst, &dst, &[]), 0);
    assert_success(&copy());
    let generations = fs::read_dir(&folder)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension() == Some(OsStr::new("mhl")))
        .count();
    assert_eq!(generations, 2);
    fs::write(dst.join("small"), b"changed").unwrap();
    let out = verify(&folder, &dst, &[]);
    assert_exit(&out, 1);
    assert!(String::from_utf8_lossy(&out.stdout).contains("differs: 'small'"));
    // An algorithm MHL does not name is refused by name.
    let out = Cp::new()
        .args(["-a", "--hash", "sha256", "--manifest-format", "mhl"])
        .arg(&src)
        .arg(s.join("other"))
        .run();
    assert_exit(&out, 1);
    assert_stderr_has(&out, "xxh128");
    assert!(
        !s.join("other").exists(),
        "refused before anything was copied"
    );
}

/// `cp --verify` of a hashing copy reads only the copy and compares it with the hashes taken
/// from the source; with `--uncached` it says it read the device.
#[test]
fn cp_verify_with_hashes_reads_only_the_copy() {
    let s = Scratch::new();
    let src = s.join("src");
    tree(&src, true);
    let out = Cp::new()
        .args(["-a", "--hash", "blake3", "--verify", "--uncached"])
        .arg(&src)
        .arg(s.join("dst"))
        .run();
    assert_exit(&out, 0);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("blake3"), "{text}");
    assert!(text.contains("from the device"), "{text}");
    assert!(text.contains("no differences"), "{text}");
}

/// `ringio sync --manifest`: files written are hashed on their way, files left as they are
/// are read back from DEST; the manifest lists every file DEST holds and sha256sum agrees.
#[test]
fn sync_manifests_cover_written_and_unchanged_files() {
    let s = Scratch::new();
    let src = s.join("src");
    tree(&src, true);
    let dst = s.join("dst");
    for round in 0..2 {
        if round == 1 {
            write_file(src.join("sub/new"), b"new file");
            write_file(src.join("small"), bytes(1001, 9));
        }
        let manifest = s.join(format!("round{round}.sha256"));
        let out = Cp::bare()
            .args(["sync", "-aH", "--hash", "sha256", "--manifest"])
            .arg(&manifest)
            .arg(format!("{}/", src.display()))
            .arg(&dst)
            .run();
        assert_success(&out);
        assert_eq!(listed(&manifest), files(&dst), "round {round}");
        assert_exit(&verify(&manifest, &dst, &[]), 0);
        match tool_check("sha256sum", &manifest, &dst) {
            Some(out) => assert!(out.status.success(), "{out:?}"),
            None => cannot_run("sha256sum -c: not installed"),
        }
    }
}

/// What is refused before anything is copied: a manifest that exists or is inside the source
/// (unless forced), an unknown algorithm or format (exit 2, one line naming the choices), a
/// manifest with options that copy no bytes, a dry run.
#[test]
fn bad_requests_are_refused_before_anything_is_copied() {
    let s = Scratch::new();
    let src = s.join("src");
    write_file(src.join("f"), b"data");
    let dst = s.join("dst");
    let cp = |args: &[&str]| {
        Cp::new()
            .current_dir(s.path())
            .args(args)
            .args(["src", "dst"])
            .run()
    };
    write_file(s.join("exists.sum"), b"old");
    let out = cp(&["-r", "--manifest", "exists.sum"]);
    assert_exit(&out, 1);
    assert_stderr_has(&out, "'exists.sum' exists");
    assert!(!dst.exists());
    assert_eq!(fs::read(s.join("exists.sum")).unwrap(), b"old");
    let out = cp(&["-r", "--manifest", "src/m.sum"]);
    assert_exit(&out, 1);
    assert_stderr_has(&out, "inside the source");
    assert!(!dst.exists() && !src.join("m.sum").exists());
    for (args, what) in [
        (
            &["--hash", "crc32", "--manifest", "m"][..],
            "--hash: unknown value 'crc32'",
        ),
        (
            &["--manifest-format", "xml", "--manifest", "m"][..],
            "--manifest-format: unknown",
        ),
    ] {
        let out = cp(args);
        assert_exit(&out, 2);
        let lines = stderr_lines(&out);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains(what) && lines[0].contains("the choices are"),
            "{lines:?}"
        );
        assert!(!dst.exists());
    }
    for args in [
        &["-r", "-l", "--manifest", "m"][..],
        &["-r", "--attributes-only", "--manifest", "m"],
        &["-r", "--engine", "splice", "--manifest", "m"],
        &["-r", "--manifest-format", "mhl", "--manifest", "m"],
        &["-r", "--hash", "md5"],
    ] {
        let out = cp(args);
        assert_exit(&out, 1);
        assert!(!dst.exists(), "{args:?}");
    }
    let out = Cp::bare()
        .current_dir(s.path())
        .args(["sync", "-an", "--manifest", "m", "src/", "dst"])
        .run();
    assert!(!out.status.success());
    assert!(!s.join("m").exists());
    // Forced, an existing manifest is replaced.
    let out = cp(&["-rf", "--manifest", "exists.sum"]);
    assert_success(&out);
    assert_eq!(listed(&s.join("exists.sum")), [b"f".to_vec()]);
}

/// Interrupted while it copies, a run leaves no manifest and no temporary of one; a source
/// that changes while it is copied is reported, the copy fails, and no manifest vouches for
/// it: none is written, and the file not copied is named.
#[test]
fn no_manifest_claims_what_was_not_written() {
    let s = Scratch::new();
    let src = s.join("src");
    write_file(src.join("a"), bytes(200_000, 5));
    write_file(src.join("b"), bytes(200_000, 6));
    // Interrupted at its first hold (before the first operand's open).
    let hold = s.join("hold");
    fs::create_dir(&hold).unwrap();
    let manifest = s.join("m.sum");
    fs::create_dir(s.join("dst")).unwrap();
    let running = Cp::new()
        .args(["--threads", "1", "--manifest"])
        .arg(&manifest)
        .args([src.join("a"), src.join("b"), s.join("dst")])
        .env("RINGIO_TEST_HOLD_DIR", hold.to_str().unwrap())
        .spawn();
    let pid = running.pid();
    let out = running.serve_holds(&hold, |_| {
        // SAFETY: kill(2) on the child's pid.
        unsafe { libc::kill(pid, libc::SIGINT) };
    });
    assert_exit(&out, 130);
    let left: Vec<PathBuf> = fs::read_dir(s.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().as_bytes().starts_with(b".m.sum"))
        .collect();
    assert!(!manifest.exists() && left.is_empty(), "{left:?}");
    // Both files grow while the first operand is open, before its data (the second hold): that
    // copy is given up and left out; the other is copied as it is now.
    let hold = s.join("hold2");
    fs::create_dir(&hold).unwrap();
    let dst = s.join("dst2");
    fs::create_dir(&dst).unwrap();
    let out = Cp::new()
        .args(["--threads", "1", "--manifest"])
        .arg(&manifest)
        .args([src.join("a"), src.join("b"), dst.clone()])
        .env("RINGIO_TEST_HOLD_DIR", hold.to_str().unwrap())
        .spawn()
        .serve_holds(&hold, |stop| {
            if stop == 2 {
                for name in ["a", "b"] {
                    let f = fs::OpenOptions::new()
                        .append(true)
                        .open(src.join(name))
                        .unwrap();
                    std::io::Write::write_all(&mut &f, b"more").unwrap();
                }
            }
        });
    assert_exit(&out, 1);
    assert_stderr_has(&out, "changed while it was copied");
    assert!(!manifest.exists());
    assert_stderr_has(&out, "no manifest written");
    assert_eq!(files(&dst).len(), 1);
    let given_up = if dst.join("a").exists() { "b" } else { "a" };
    let named = format!(
        "not copied to '{}': '{}'",
        dst.display(),
        src.join(given_up).display()
    );
    assert_stderr_has(&out, &named);
}

/// A byte flipped on the device after a copy with a manifest: the cached check reads the page
/// cache (and says so), the uncached one reads the device and names the file.
#[test]
fn an_uncached_check_of_a_copy_finds_a_flipped_byte_on_the_device() {
    let s = Scratch::new();
    let fs_ = match LoopFs::new(s.path(), "ext4") {
        Ok(fs_) => fs_,
        Err(why) => skip!("{why}"),
    };
    let src = s.join("src");
    let mut data = bytes(100 << 20, 7);
    let marker = b"ringio-hashed-copy-marker-0123456789-abcdefghijklmnopq";
    let middle = data.len() / 2;
    data[middle..middle + marker.len()].copy_from_slice(marker);
    write_file(src.join("big"), &data);
    let (dst, manifest) = (fs_.path().join("dst"), s.join("m.sum"));
    assert_success(
        &Cp::new()
            .args(["-a", "--manifest"])
            .arg(&manifest)
            .arg(&src)
            .arg(&dst)
            .run(),
    );
    fs_.flip_on_device(marker);
    let cached = verify(&manifest, &dst, &[]);
    assert_exit(&cached, 0);
    assert!(String::from_utf8_lossy(&cached.stderr).contains("read through the page cache"));
    let uncached = verify(&manifest, &dst, &["--uncached"]);
    assert_exit(&uncached, 1);
    assert!(String::from_utf8_lossy(&uncached.stdout).contains("differs: 'big'"));
    assert!(String::from_utf8_lossy(&uncached.stderr).contains("from the device"));
}

/// `--tee`: the same tree to several destinations in one run, each exact; the one manifest
/// checks against every one of them, and `--verify --uncached` re-reads each.
#[test]
fn tee_writes_every_destination_and_one_manifest_covers_them() {
    let s = Scratch::new();
    let src = s.join("card");
    tree(&src, true);
    let manifest = s.join("m.xxh128");
    let dests = [s.join("a"), s.join("b"), s.join("c")];
    let out = Cp::new()
        .args(["-a", "--verify", "--uncached", "--json", "--manifest"])
        .arg(&manifest)
        .arg("--tee")
        .arg(&dests[1])
        .arg("--tee")
        .arg(&dests[2])
        .arg(&src)
        .arg(&dests[0])
        .run();
    assert_exit(&out, 0);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["destinations"].as_array().unwrap().len(), 3);
    assert_eq!(report["phases"][1]["phase"], "verify (device)");
    let check = Check {
        atime: false,
        ..Check::ARCHIVE
    };
    for dst in &dests {
        assert_trees_equal(&src, dst, check);
        assert_exit(&verify(&manifest, dst, &[]), 0);
    }
    // sync too, each DEST mirrored and the manifest true of each.
    let (m2, dests2) = (s.join("sync.sum"), [s.join("s1"), s.join("s2")]);
    let out = Cp::bare()
        .args(["sync", "-aH", "--manifest"])
        .arg(&m2)
        .arg("--tee")
        .arg(&dests2[1])
        .arg(format!("{}/", src.display()))
        .arg(&dests2[0])
        .run();
    assert_success(&out);
    for dst in &dests2 {
        assert_trees_equal(&src, dst, check);
        assert_exit(&verify(&m2, dst, &[]), 0);
    }
}

/// A destination that fails (here: a file where the copy of a directory must go) is reported
/// with its path, the others are copied whole, and the exit status says one failed. The one
/// manifest covers every destination, so none is written: it would vouch for a failed copy.
#[test]
fn a_failing_tee_destination_leaves_the_others_whole() {
    let s = Scratch::new();
    let src = s.join("card");
    tree(&src, false);
    write_file(s.join("blocked"), b"a file, not a directory");
    let manifest = s.join("m.sum");
    let out = Cp::new()
        .args(["-a", "--manifest"])
        .arg(&manifest)
        .arg("--tee")
        .arg(s.join("blocked"))
        .arg("--tee")
        .arg(s.join("b"))
        .arg(&src)
        .arg(s.join("a"))
        .run();
    assert_exit(&out, 1);
    assert_stderr_has(&out, "the copy to ");
    assert_stderr_has(&out, "blocked");
    let check = Check {
        atime: false,
        ..Check::ARCHIVE
    };
    for dst in [s.join("a"), s.join("b")] {
        assert_trees_equal(&src, &dst, check);
    }
    assert!(!manifest.exists());
    assert_stderr_has(&out, "no manifest written");
    assert_stderr_has(&out, "not copied to ");
    assert_eq!(
        fs::read(s.join("blocked")).unwrap(),
        b"a file, not a directory"
    );
}

/// The files a copy keeps as they are (`-n`, `--resume` finding them complete) are read from
/// the destination and listed; `--verify` of a copy into a directory that holds other files
/// checks what the copy wrote; an empty tree is no panic.
#[test]
fn kept_files_are_listed_and_verify_checks_what_was_copied() {
    let s = Scratch::new();
    let src = s.join("src");
    tree(&src, false);
    let dst = s.join("dst");
    // Half the tree is there already.
    assert_success(&Cp::new().args(["-a"]).arg(&src).arg(&dst).run());
    fs::remove_file(dst.join("big")).unwrap();
    write_file(dst.join("other"), b"not from this copy");
    for opts in [&["-a", "-n"][..], &["-a", "--resume"]] {
        let manifest = s.join(format!("m{}", opts.len() + opts[1].len()));
        let out = Cp::new()
            .args(opts)
            .args(["-T", "--verify", "--manifest"])
            .arg(&manifest)
            .arg(&src)
            .arg(&dst)
            .run();
        assert_exit(&out, 0);
        let mut want = files(&src);
        want.retain(|n| n != b"other");
        assert_eq!(listed(&manifest), want, "{opts:?}");
    }
    let empty = s.join("empty");
    fs::create_dir(&empty).unwrap();
    let out = Cp::new()
        .args(["-r", "--hash", "xxh128", "--verify"])
        .arg(&empty)
        .arg(s.join("empty-copy"))
        .run();
    assert_exit(&out, 0);
}

/// Options a manifest or a tee cannot honour are refused before anything is copied: a tee
/// that would be laid out unlike the destination, sync's --tee with --remove-source-files.
#[test]
fn tee_refusals() {
    let s = Scratch::new();
    let src = s.join("card");
    write_file(src.join("f"), b"f");
    fs::create_dir(s.join("exists")).unwrap();
    let out = Cp::new()
        .args(["-r", "--tee"])
        .arg(s.join("new"))
        .arg(&src)
        .arg(s.join("exists"))
        .run();
    assert_exit(&out, 1);
    assert_stderr_has(&out, "laid out unlike");
    assert!(!s.join("new").exists() && !s.join("exists/card").exists());
    let out = Cp::bare()
        .args(["sync", "-a", "--remove-source-files", "--tee"])
        .arg(s.join("t"))
        .arg(format!("{}/", src.display()))
        .arg(s.join("d"))
        .run();
    assert!(!out.status.success());
    assert!(src.join("f").exists() && !s.join("d").exists());
}

/// `sync --copy-dest`: a file written from the other tree's copy is listed once.
#[test]
fn sync_copy_dest_files_are_listed_once() {
    let s = Scratch::new();
    let src = s.join("src");
    tree(&src, false);
    let other = s.join("other");
    assert_success(
        &Cp::bare()
            .args(["sync", "-a"])
            .arg(format!("{}/", src.display()))
            .arg(&other)
            .run(),
    );
    let (dst, manifest) = (s.join("dst"), s.join("m.sum"));
    let out = Cp::bare()
        .args(["sync", "-a", "--copy-dest"])
        .arg(&other)
        .arg("--manifest")
        .arg(&manifest)
        .arg(format!("{}/", src.display()))
        .arg(&dst)
        .run();
    assert_success(&out);
    assert_eq!(listed(&manifest), files(&dst));
    assert_exit(&verify(&manifest, &dst, &[]), 0);
}

/// `cp --json`: stdout is one JSON object (every `-v` line goes to stderr), with the counts,
/// the phases, and each error's message naming its path.
#[test]
fn cp_json_is_alone_on_stdout_and_names_each_error() {
    let s = Scratch::new();
    let src = s.join("src");
    write_file(src.join("f"), b"data");
    std::os::unix::fs::symlink("missing-target", src.join("dangling")).unwrap();
    let out = Cp::new()
        .args(["-rLv", "--json"])
        .arg(&src)
        .arg(s.join("dst"))
        .run();
    assert_exit(&out, 1);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["errors"], 1);
    let messages = report["error_messages"].as_array().unwrap();
    assert!(
        messages[0].as_str().unwrap().contains("dangling"),
        "{report}"
    );
    // The same error with its parts as fields: the call, the path, errno and its reason.
    let detail = &report["error_details"][0];
    assert_eq!(detail["message"], messages[0], "{report}");
    assert_eq!(detail["op"], "stat", "{report}");
    assert_eq!(detail["errno"], libc::ENOENT, "{report}");
    assert_eq!(detail["reason"], "No such file or directory", "{report}");
    assert!(
        detail["path"].as_str().unwrap().ends_with("src/dangling"),
        "{report}"
    );
    assert_eq!(report["phases"][0]["phase"], "copy");
    assert_stderr_has(&out, "-> ");
}

/// `cp --json` counts what cp's rules left alone: a second `-n` copy skips every file, a
/// `--resume` over a complete copy too.
#[test]
fn cp_json_counts_the_entries_left_as_they_were() {
    let s = Scratch::new();
    let src = s.join("src");
    for name in ["a", "b", "sub/c"] {
        write_file(src.join(name), name.as_bytes());
    }
    let dst = s.join("dst");
    let json = |extra: &str| {
        let out = Cp::new()
            .args(["-a", extra, "--json", "-T"])
            .arg(&src)
            .arg(&dst)
            .run();
        assert_success(&out);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let first = json("-n");
    assert_eq!(
        (first["files"].clone(), first["skipped"].clone()),
        (3.into(), 0.into()),
        "{first}"
    );
    for again in ["-n", "--resume"] {
        let report = json(again);
        assert_eq!(report["skipped"], 3, "{again}: {report}");
        assert_eq!(report["destinations"][0]["skipped"], 3, "{again}: {report}");
    }
}

/// `cp --log-file`: the lines `-v` prints (and each error) go to the file with rsync's log
/// prefix, with or without `-v`; without it the terminal gets none of them.
#[test]
fn cp_log_file_gets_the_verbose_lines_and_the_errors() {
    let s = Scratch::new();
    let src = s.join("src");
    write_file(src.join("f"), b"data");
    std::os::unix::fs::symlink("missing-target", src.join("dangling")).unwrap();
    let log = s.join("cp.log");
    let out = Cp::new()
        .current_dir(s.path())
        .args(["-rL", "--log-file", "cp.log", "src", "dst"])
        .run();
    assert_exit(&out, 1);
    assert!(out.stdout.is_empty(), "{}", describe(&out));
    let text = fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.iter().any(|l| l.ends_with("'src/f' -> 'dst/f'")),
        "{text}"
    );
    assert!(lines.iter().any(|l| l.contains("dangling")), "{text}");
    for l in &lines {
        // `YYYY/MM/DD HH:MM:SS [PID] `
        let b = l.as_bytes();
        assert!(
            b.len() > 21 && b[4] == b'/' && b[10] == b' ' && b[20] == b'[',
            "{l}"
        );
    }
}

/// A single file synced or copied to a new name: the manifest names it relative to its
/// directory (`verify --manifest M DIR` and `sha256sum -c` there find it), however DEST is
/// spelled.
#[test]
fn a_single_file_to_a_new_name_is_listed_by_that_name() {
    let s = Scratch::new();
    write_file(s.join("src/a"), b"one file");
    for (i, dest) in ["copy", "./copy2"].iter().enumerate() {
        for command in [&["sync", "-a"][..], &["cp", "-a"]] {
            let manifest = format!("m{i}{}", command[0]);
            let out = Cp::bare()
                .current_dir(s.path())
                .args(command)
                .args(["--manifest", &manifest, "src/a", dest])
                .run();
            assert_success(&out);
            let name = dest.trim_start_matches("./");
            assert_eq!(
                listed(&s.join(&manifest)),
                [name.as_bytes().to_vec()],
                "{command:?} {dest}"
            );
            let _ = fs::remove_file(s.join(name));
        }
    }
}
