//! `ringio sync`'s file data goes through cp's data path: a hole search that fails fails the
//! file, as it fails cp's copy, whichever way sync writes it (a temporary, in place, staged
//! for `--delay-updates`, hashed for a manifest); nothing is left claiming to be the source.

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Output;

use crate::common::*;

const MIB: u64 = 1 << 20;

/// `src/f`: 4 MiB with holes at the start, in the middle and at the end.
fn sparse_source(root: &Path) {
    fs::create_dir_all(root.join("src")).unwrap();
    fs::create_dir_all(root.join("dst")).unwrap();
    let f = fs::File::create(root.join("src/f")).unwrap();
    f.set_len(4 * MIB).unwrap();
    f.write_all_at(b"data in the middle", MIB + 5).unwrap();
    f.write_all_at(&[7u8; 8192], 2 * MIB).unwrap();
}

#[cfg(target_arch = "x86_64")]
fn sync_failing_seek(root: &Path, args: &[&str], whence: i32) -> Output {
    Cp::bare()
        .arg("sync")
        .args(args)
        .args(["src/", "dst/"])
        .current_dir(root)
        .failing_seek(whence, libc::EIO)
        .run()
}

/// SEEK_DATA or SEEK_HOLE failing with EIO under `-S`: the file fails (exit 23, the error
/// said) instead of being copied on as if the search had found data; a new file is not made
/// and no temporary is left, an old one keeps its bytes unless written in place; no manifest
/// vouches for it; the next run without the fault makes DEST right.
#[test]
#[cfg(target_arch = "x86_64")]
fn a_failed_hole_search_fails_the_file() {
    let ways: &[&[&str]] = &[
        &["-aS"],
        &["-aS", "--inplace"],
        &["-aS", "--delay-updates"],
        &["-aS", "--partial"],
        &["-aS", "-T", "../tmp"],
        &["-aS", "--manifest", "m.sum"],
        &["-aS", "--inplace", "--manifest", "m.sum"],
    ];
    for whence in [libc::SEEK_DATA, libc::SEEK_HOLE] {
        for way in ways {
            for old in [None, Some(vec![b'o'; 3 * MIB as usize])] {
                let dir = Scratch::new();
                sparse_source(dir.path());
                fs::create_dir_all(dir.join("tmp")).unwrap();
                if let Some(old) = &old {
                    write_file(dir.join("dst/f"), old);
                }
                let case = format!("{way:?}, whence {whence}, old file {}", old.is_some());
                let out = sync_failing_seek(dir.path(), way, whence);
                assert_eq!(out.status.code(), Some(23), "{case}: {}", describe(&out));
                assert_stderr_has(&out, "Input/output error");
                assert!(
                    !dir.join("m.sum").exists(),
                    "{case}: a manifest was written"
                );
                let in_place = way.contains(&"--inplace") && old.is_some();
                match (&old, in_place) {
                    (None, _) => assert!(!dir.join("dst/f").exists(), "{case}: made"),
                    (Some(old), false) => {
                        assert!(
                            fs::read(dir.join("dst/f")).unwrap() == *old,
                            "{case}: changed"
                        )
                    }
                    (Some(_), true) => {}
                }
                let mut left: Vec<_> = fs::read_dir(dir.join("dst"))
                    .unwrap()
                    .map(|e| e.unwrap().file_name())
                    .filter(|n| n != "f" && n != ".~tmp~")
                    .collect();
                left.extend(
                    fs::read_dir(dir.join("tmp"))
                        .unwrap()
                        .map(|e| e.unwrap().file_name()),
                );
                assert!(left.is_empty(), "{case}: left {left:?}");
                let again = Cp::bare()
                    .arg("sync")
                    .args(*way)
                    .args(["src/", "dst/"])
                    .current_dir(dir.path())
                    .run();
                assert_success(&again);
                assert!(
                    fs::read(dir.join("src/f")).unwrap() == fs::read(dir.join("dst/f")).unwrap(),
                    "{case}: the next run left DEST unlike SRC"
                );
            }
        }
    }
}

/// The same fault without `-S`: no hole is looked for, so the sync succeeds (the filter only
/// hits the hole search).
#[test]
#[cfg(target_arch = "x86_64")]
fn without_sparse_no_hole_is_looked_for() {
    let dir = Scratch::new();
    sparse_source(dir.path());
    let out = sync_failing_seek(dir.path(), &["-a"], libc::SEEK_DATA);
    assert_success(&out);
    assert!(fs::read(dir.join("src/f")).unwrap() == fs::read(dir.join("dst/f")).unwrap());
}
