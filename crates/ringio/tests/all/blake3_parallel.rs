//! BLAKE3 hashed in parallel while copying: a big file copied in chunks has each chunk hashed as
//! a BLAKE3 subtree by the worker that copies it, and the subtrees joined at the end. The
//! manifest must say what `b3sum` says of the source, and `b3sum -c` must accept the copy, for
//! chunk counts that are and are not powers of two, a short last chunk, a chunk size asked for
//! that is no power of two, and holes (hashed as the zeros they read as), warm and cold.

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;

use crate::common::*;

const MIB: u64 = 1 << 20;

/// Bytes that differ from their neighbours and depend on `seed`.
fn bytes(len: u64, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| ((i ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
        .collect()
}

/// A file of `len` bytes whose only data are `parts` (offset, length); the rest are holes.
fn sparse_file(path: &Path, len: u64, parts: &[(u64, u64)]) {
    let f = fs::File::create(path).unwrap();
    f.set_len(len).unwrap();
    for (i, &(at, n)) in (0..).zip(parts) {
        f.write_all_at(&bytes(n, i + 7), at).unwrap();
    }
}

/// Big files around 1 MiB chunks, sparse files, and one with zero runs written as data.
fn tree(root: &Path) {
    for (name, len, seed) in [
        ("pow2-count", 4 * MIB, 1),
        ("seven", 7 * MIB, 2),
        ("uneven", 9 * MIB + 1000, 3),
        ("one-byte-last", 2 * MIB + 1, 4),
        ("short-by-one", 3 * MIB - 1, 5),
        ("sub/deep/many", 37 * MIB + 4097, 6),
    ] {
        write_file(root.join(name), bytes(len, seed));
    }
    // Data, holes over whole chunks and across their edges, a trailing hole.
    sparse_file(
        &root.join("sparse-tail"),
        13 * MIB,
        &[(0, 3 * MIB / 2), (5 * MIB + 4096, 3 * MIB / 2)],
    );
    // A leading hole, data to the end on an uneven length.
    sparse_file(
        &root.join("sparse-head"),
        6 * MIB + 17,
        &[(3 * MIB, 3 * MIB + 17)],
    );
    let mut zeros = bytes(5 * MIB + 300, 8);
    zeros[MIB as usize / 2..(5 * MIB / 2) as usize].fill(0);
    write_file(root.join("zero-runs"), zeros);
    write_file(root.join("small"), bytes(5000, 9));
    write_file(root.join("empty"), b"");
}

/// `b3sum`'s lines for every file in `names`, run in `dir`; `None` when it is not installed.
fn b3sum(dir: &Path, names: &[String]) -> Option<Vec<String>> {
    let out = Command::new("b3sum")
        .args(names)
        .current_dir(dir)
        .output()
        .ok()?;
    assert!(out.status.success(), "b3sum: {}", describe(&out));
    Some(sorted_lines(&out.stdout))
}

fn sorted_lines(text: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8(text.to_vec())
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines.sort();
    lines
}

/// Copies `src` with a BLAKE3 manifest (`args` added), then checks the copy, the manifest
/// against `b3sum` of the source, `b3sum -c` on the copy and `ringio verify --manifest`.
fn copy_and_check(s: &Scratch, src: &Path, tag: &str, args: &[&str], cold: bool) {
    let (dst, manifest) = (s.join(format!("dst-{tag}")), s.join(format!("{tag}.b3")));
    if cold {
        for e in walk_files(src) {
            evict(src.join(e));
        }
    }
    let out = Cp::new()
        .args(["-a", "--threads", "4", "--hash", "blake3"])
        .args(args)
        .arg("--manifest")
        .arg(&manifest)
        .arg(src)
        .arg(&dst)
        .run();
    assert_success(&out);
    let check = Check {
        atime: false,
        ..Check::ARCHIVE
    };
    assert_trees_equal(src, &dst, check);
    let names = walk_files(src);
    let listed = sorted_lines(&fs::read(&manifest).unwrap());
    let Some(want) = b3sum(src, &names) else {
        return cannot_run("b3sum: not installed");
    };
    assert_eq!(
        listed, want,
        "{tag}: the manifest against b3sum of the source"
    );
    let checked = Command::new("b3sum")
        .arg("-c")
        .arg(&manifest)
        .current_dir(&dst)
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "{tag}: b3sum -c: {}",
        describe(&checked)
    );
    let verified = Cp::bare()
        .arg("verify")
        .arg("--manifest")
        .arg(&manifest)
        .arg(&dst)
        .run();
    assert_exit(&verified, 0);
}

/// Every regular file below `root`, relative, sorted.
fn walk_files(root: &Path) -> Vec<String> {
    fn walk(root: &Path, rel: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(root.join(rel)).unwrap() {
            let e = e.unwrap();
            let rel = rel.join(e.file_name());
            let kind = e.file_type().unwrap();
            if kind.is_dir() {
                walk(root, &rel, out);
            } else if kind.is_file() {
                out.push(rel.to_str().unwrap().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(root, Path::new(""), &mut out);
    out.sort();
    out
}

/// Big and sparse files in 1 MiB chunks, each engine that hashes, warm and cold.
#[test]
fn chunks_hashed_apart_match_b3sum() {
    let s = Scratch::new();
    let src = s.join("src");
    tree(&src);
    for engine in ["uring", "readwrite"] {
        for cold in [false, true] {
            let tag = format!("{engine}-{}", if cold { "cold" } else { "warm" });
            copy_and_check(
                &s,
                &src,
                &tag,
                &["--engine", engine, "--chunk-size", "1M"],
                cold,
            );
        }
    }
}

/// A chunk size asked for that is no power of two (rounded up to one for BLAKE3's tree), holes
/// kept as holes or written, zero runs made holes, one worker, and chunks written under a
/// temporary name (`--atomic`).
#[test]
fn any_chunk_size_and_sparse_mode_match_b3sum() {
    let s = Scratch::new();
    let src = s.join("src");
    tree(&src);
    for (tag, args) in [
        ("odd-chunk", &["--chunk-size", "1536K"][..]),
        ("odd-chunk-small", &["--chunk-size", "1000000"]),
        ("sparse-never", &["--chunk-size", "1M", "--sparse=never"]),
        ("sparse-always", &["--chunk-size", "1M", "--sparse=always"]),
        ("one-thread", &["--chunk-size", "1M", "--threads", "1"]),
        ("atomic", &["--chunk-size", "1M", "--atomic"]),
        ("default-chunks", &[]),
    ] {
        copy_and_check(&s, &src, tag, args, true);
    }
}
