//! `cp --tee`: the source read once for every destination, each destination the source's copy
//! (content, mode, owner, times, hard links, symlinks, holes, its manifest), and a destination
//! that fails stopping only itself.
//!
//! How "read once" is seen: the test hook `RINGIO_TEST_REWRITE_AFTER_READ` complements the bytes
//! of the source a copy has just read (times kept). Read once, every byte of the source ends
//! complemented and every destination holds the original bytes; read twice, a byte ends as it
//! was in the source and a later destination holds the complement.

use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::common::*;

fn bytes(len: usize, seed: u64) -> Vec<u8> {
    (0..len as u64)
        .map(|i| ((i ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8 | 1)
        .collect()
}

/// Where the sparse file's data lies, and how long it is.
const SPARSE_DATA: (u64, usize) = (3 << 20, 5000);

/// A tree with a big file (split into chunks), small files, an empty one, a sparse one, hard
/// links and a symlink; its files' bytes are never zero, so a complemented byte is never one.
fn tree(root: &Path) {
    write_file(root.join("small"), bytes(1000, 1));
    write_file(root.join("sub/deeper/file"), bytes(70_000, 2));
    write_file(root.join("empty"), b"");
    write_file(root.join("big"), bytes(9 << 20, 3));
    let sparse = fs::File::create(root.join("sparse")).unwrap();
    sparse.set_len(6 << 20).unwrap();
    sparse
        .write_at(&bytes(SPARSE_DATA.1, 4), SPARSE_DATA.0)
        .unwrap();
    fs::hard_link(root.join("big"), root.join("sub/big-again")).unwrap();
    std::os::unix::fs::symlink("small", root.join("symlink")).unwrap();
    chmod(root.join("small"), 0o640);
    chmod(root.join("sub"), 0o750);
}

/// The regular files of the tree, as they were written.
fn originals() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("small", bytes(1000, 1)),
        ("sub/deeper/file", bytes(70_000, 2)),
        ("big", bytes(9 << 20, 3)),
    ]
}

fn tee_run(src: &Path, dests: &[PathBuf], extra: &[&str]) -> std::process::Output {
    let mut cp = Cp::new()
        .env("RINGIO_TEST_REWRITE_AFTER_READ", "1")
        .arg("-a")
        .args(extra);
    for d in &dests[1..] {
        cp = cp.arg("--tee").arg(d);
    }
    cp.arg(src).arg(&dests[0]).run()
}

/// N = 2 and 3, hashed and not: every byte of every source file read once (the source ends
/// complemented), every destination the source's copy as it was before the copy read it:
/// content, mode, owner, times, hard links, symlink, holes; with `--manifest`, the one manifest
/// true of each.
#[test]
fn tee_reads_each_source_once_for_every_destination() {
    // Hashed and not: a copy that hashes takes no kernel copy of its own either.
    for (n, hashed) in [(2, false), (3, false), (2, true), (3, true)] {
        let s = Scratch::new();
        let src = s.join("card");
        tree(&src);
        // The tree as it is now, for the comparison after the run changed the source.
        let before = s.join("before");
        assert_success(&Cp::new().arg("-a").arg(&src).arg(&before).run());
        let manifest = s.join("m.b3");
        let dests: Vec<PathBuf> = (0..n).map(|i| s.join(format!("d{i}"))).collect();
        let manifest_args = ["--manifest", manifest.to_str().unwrap()];
        let out = tee_run(&src, &dests, if hashed { &manifest_args } else { &[] });
        assert_success(&out);
        for (name, original) in originals() {
            let now = fs::read(src.join(name)).unwrap();
            let flipped: Vec<u8> = original.iter().map(|b| b ^ 0xff).collect();
            assert!(
                now == flipped,
                "N={n}: {name}: some bytes of the source were read more than once (or never)"
            );
        }
        let mut data = vec![0u8; SPARSE_DATA.1];
        fs::File::open(src.join("sparse"))
            .unwrap()
            .read_exact_at(&mut data, SPARSE_DATA.0)
            .unwrap();
        assert!(
            data.iter()
                .zip(bytes(SPARSE_DATA.1, 4))
                .all(|(a, b)| *a == b ^ 0xff),
            "N={n}: the sparse file's data was read more than once"
        );
        let check = Check {
            atime: false,
            ..Check::ARCHIVE
        };
        // Every destination holds the bytes as they were read, before the read changed them.
        for dst in &dests {
            assert_trees_equal(&before, dst, check);
            let sparse = fs::metadata(dst.join("sparse")).unwrap();
            assert!(
                sparse.blocks() * 512 < 1 << 20,
                "N={n}: {}: the holes were filled ({} blocks)",
                dst.display(),
                sparse.blocks()
            );
            if hashed {
                let out = Cp::bare()
                    .arg("verify")
                    .arg("--manifest")
                    .arg(&manifest)
                    .arg(dst)
                    .run();
                assert_exit(&out, 0);
            }
        }
    }
}

/// Without --tee, a copy reads through the same hook: its destination holds the original bytes
/// and the source ends complemented (the hook fires on the one-destination path too, so the
/// test above sees the group, not a hook that never fires).
#[test]
fn one_destination_reads_once_too() {
    let s = Scratch::new();
    let src = s.join("card");
    tree(&src);
    let before = s.join("before");
    assert_success(&Cp::new().arg("-a").arg(&src).arg(&before).run());
    let dests = [s.join("d")];
    // The read/write engine keeps the copy off copy_file_range, so the bytes pass through the
    // hooked read.
    let out = tee_run(&src, &dests, &["--engine", "readwrite"]);
    assert_success(&out);
    let big = fs::read(src.join("big")).unwrap();
    assert!(big
        .iter()
        .zip(bytes(9 << 20, 3))
        .all(|(a, b)| *a == b ^ 0xff));
    let check = Check {
        atime: false,
        ..Check::ARCHIVE
    };
    assert_trees_equal(&before, &dests[0], check);
}

/// One destination on a full filesystem: it is named with its path and the reason, the exit
/// status is 1, and every other destination is complete. Whichever destination it is (the
/// last operand or a --tee), N = 2 and 3.
#[test]
fn a_full_destination_fails_alone() {
    for (n, full_at) in [(2, 0), (2, 1), (3, 1), (3, 2)] {
        let s = Scratch::new();
        let src = s.join("card");
        tree(&src);
        let mnt = s.join("full");
        fs::create_dir(&mnt).unwrap();
        let _mount = match TmpfsMount::new(&mnt, "2m") {
            Ok(m) => m,
            Err(why) => skip!("a destination on a full filesystem: {why}"),
        };
        let dests: Vec<PathBuf> = (0..n)
            .map(|i| {
                if i == full_at {
                    mnt.join("d")
                } else {
                    s.join(format!("d{i}"))
                }
            })
            .collect();
        let out = Cp::new()
            .arg("-a")
            .args(dests[1..].iter().flat_map(|d| [Path::new("--tee"), d]))
            .arg(&src)
            .arg(&dests[0])
            .run();
        assert_exit(&out, 1);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("No space left on device") && stderr.contains(&*mnt.to_string_lossy()),
            "N={n}, full destination {full_at}: not named with its reason:\n{stderr}"
        );
        let check = Check {
            atime: false,
            ..Check::ARCHIVE
        };
        for (i, dst) in dests.iter().enumerate() {
            if i != full_at {
                assert_trees_equal(&src, dst, check);
            }
        }
    }
}
