//! `ringio verify`: each kind of difference is found and named with its path; exit status 0
//! (same), 1 (different), 2 (cannot compare).

#[macro_use]
mod common;

use std::fs;
use std::os::unix::fs::{symlink, FileExt, PermissionsExt};
use std::path::Path;

use common::*;

fn verify(src: &Path, dst: &Path, extra: &[&str]) -> std::process::Output {
    Cp::bare().arg("verify").args(extra).arg(src).arg(dst).run()
}

/// A small tree and its exact copy.
fn pair(s: &Scratch) -> (std::path::PathBuf, std::path::PathBuf) {
    let (src, dst) = (s.join("src"), s.join("dst"));
    write_file(src.join("file"), vec![1u8; 3 << 20]);
    write_file(src.join("sub/small"), b"small");
    symlink("file", src.join("link")).unwrap();
    assert_success(&Cp::new().arg("-a").arg(&src).arg(&dst).run());
    (src, dst)
}

#[track_caller]
fn assert_finds(src: &Path, dst: &Path, extra: &[&str], what: &[&str]) {
    let out = verify(src, dst, extra);
    assert_exit(&out, 1);
    let text = String::from_utf8_lossy(&out.stdout);
    for w in what {
        assert!(text.contains(w), "expected '{w}' in:\n{text}");
    }
}

#[test]
fn identical_trees_exit_zero() {
    let s = Scratch::new();
    let (src, dst) = pair(&s);
    let out = verify(&src, &dst, &[]);
    assert_exit(&out, 0);
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no differences"));
}

#[test]
fn each_difference_is_named_with_its_path() {
    let s = Scratch::new();
    let (src, dst) = pair(&s);
    fs::OpenOptions::new()
        .write(true)
        .open(dst.join("file"))
        .unwrap()
        .write_all_at(b"\0", 2 << 20)
        .unwrap();
    fs::set_permissions(dst.join("sub/small"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::remove_file(dst.join("link")).unwrap();
    symlink("elsewhere", dst.join("link")).unwrap();
    write_file(dst.join("sub/extra"), b"x");
    assert_finds(
        &src,
        &dst,
        &[],
        &[
            "file: content differs from byte 2097152",
            "sub/small: mode: 0644 in the source, 0600 in the destination",
            "link: symlink target: 'file' in the source, 'elsewhere'",
            "sub/extra: only in the destination",
        ],
    );
    // Content only: the mode no longer counts, the rest still does.
    let out = verify(&src, &dst, &["--content-only"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("mode"), "{text}");
    assert!(text.contains("content differs"), "{text}");
}

#[test]
fn types_sizes_times_and_missing_entries() {
    let s = Scratch::new();
    let (src, dst) = pair(&s);
    fs::remove_dir_all(dst.join("sub")).unwrap();
    write_file(dst.join("sub"), b"now a file");
    fs::OpenOptions::new()
        .append(true)
        .open(dst.join("file"))
        .unwrap()
        .write_all_at(b"more", 3 << 20)
        .unwrap();
    set_times(&src.join("link"), None, Some(Ts::new(1_000_000_000, 5))).unwrap();
    assert_finds(
        &src,
        &dst,
        &[],
        &[
            "sub: type: directory in the source, regular file in the destination",
            "file: size: 3145728 bytes in the source, 3145732 in the destination",
            "link: mtime: 1000000000.000000005 in the source",
        ],
    );
    fs::remove_file(dst.join("link")).unwrap();
    assert_finds(&src, &dst, &[], &["link: missing from the destination"]);
}

#[test]
fn xattrs_owners_and_holes() {
    let s = Scratch::new();
    let (src, dst) = pair(&s);
    if set_xattr(&src.join("sub/small"), "user.k", b"v").is_err() {
        skip!("this filesystem takes no user xattrs");
    }
    let f = fs::File::create(src.join("sparse")).unwrap();
    f.set_len(64 << 20).unwrap();
    f.write_all_at(b"data", 0).unwrap();
    fs::write(dst.join("sparse"), {
        let mut v = vec![0u8; 64 << 20];
        v[..4].copy_from_slice(b"data");
        v
    })
    .unwrap();
    let mtime = lstat_times(&src.join("sparse")).1;
    set_times(&dst.join("sparse"), None, Some(mtime)).unwrap();
    let mut expect = vec![
        "sub/small: extended attribute user.k: missing from the destination",
        "sparse: holes lost",
    ];
    if is_root() {
        std::os::unix::fs::chown(dst.join("file"), Some(4242), None).unwrap();
        expect.push("file: owner: 0:0 in the source, 4242:0 in the destination");
    }
    assert_finds(&src, &dst, &[], &expect);
    let out = verify(&src, &dst, &["--no-xattrs", "--no-owner"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("user.k") && !text.contains("owner"),
        "{text}"
    );
}

#[test]
fn a_missing_root_is_an_error_with_status_two() {
    let s = Scratch::new();
    let out = verify(&s.join("nope"), s.path(), &[]);
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot stat") && err.contains("nope") && err.contains("No such file"),
        "{err}"
    );
}

#[test]
fn cp_verify_checks_the_copy() {
    let s = Scratch::new();
    write_file(s.join("src/a"), b"a");
    write_file(s.join("src/b/c"), vec![7u8; 100_000]);
    let out = Cp::new()
        .args(["-a", "--verify"])
        .arg(s.join("src"))
        .arg(s.join("dst"))
        .run();
    assert_exit(&out, 0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no differences"));
}
