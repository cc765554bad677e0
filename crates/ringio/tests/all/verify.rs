//! `ringio verify`: each kind of difference is found and named with its path; exit status 0
//! (same), 1 (different), 2 (cannot compare).

use std::fs;
use std::os::unix::fs::{symlink, FileExt, PermissionsExt};
use std::path::Path;

use crate::common::*;

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
            "'file': content differs from byte 2097152",
            "'sub/small': mode: 0644 in the source, 0600 in the destination",
            "'link': symlink target: 'file' in the source, 'elsewhere'",
            "'sub/extra': only in the destination",
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
            "'sub': type: directory in the source, regular file in the destination",
            "'file': size: 3145728 bytes in the source, 3145732 in the destination",
            "'link': mtime: 1000000000.000000005 in the source",
        ],
    );
    fs::remove_file(dst.join("link")).unwrap();
    assert_finds(&src, &dst, &[], &["'link': missing from the destination"]);
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
        "'sub/small': extended attribute user.k: missing from the destination",
        "'sparse': holes lost",
    ];
    if is_root() {
        std::os::unix::fs::chown(dst.join("file"), Some(4242), None).unwrap();
        expect.push("'file': owner: 0:0 in the source, 4242:0 in the destination");
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

engine_tests!(
    cp_a_keeps_xattrs_of_every_file_type,
    cp_verify_compares_what_l_followed,
);

/// Removes the extended attribute `name` of `path` itself (a symlink is not followed).
fn remove_xattr(path: &Path, name: &str) {
    let (c, n) = (cstring(path), std::ffi::CString::new(name).unwrap());
    // SAFETY: both strings are NUL-terminated.
    let rc = unsafe { libc::lremovexattr(c.as_ptr(), n.as_ptr()) };
    assert_eq!(rc, 0, "lremovexattr {name} {}", path.display());
}

/// `cp -a` keeps the extended attributes of every file type, symlinks, FIFOs and devices
/// included (`trusted.*`: Linux allows no `user.*` on them), as GNU cp does; `ringio verify`
/// and `cp --verify` notice when one is missing.
fn cp_a_keeps_xattrs_of_every_file_type(engine: &str) {
    if !is_root() {
        skip!("trusted.* extended attributes need root");
    }
    let s = Scratch::new();
    let src = s.join("src");
    write_file(src.join("file"), vec![5u8; 200_000]);
    write_file(src.join("dir/small"), b"small");
    symlink("file", src.join("link")).unwrap();
    symlink("nowhere", src.join("dangling")).unwrap();
    mkfifo(&src.join("fifo"), 0o640);
    let dev = cstring(&src.join("chardev"));
    // SAFETY: a NUL-terminated path inside the scratch directory; 1:3 is the null device.
    let rc = unsafe { libc::mknod(dev.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) };
    assert_eq!(rc, 0, "mknod: {}", std::io::Error::last_os_error());
    let every = [
        "file",
        "dir",
        "dir/small",
        "link",
        "dangling",
        "fifo",
        "chardev",
    ];
    for name in every {
        if let Err(e) = set_xattr(&src.join(name), "trusted.ringio", name.as_bytes()) {
            skip!("this filesystem takes no trusted.* xattr on {name}: {e}");
        }
    }
    let dst = s.join("dst");
    let out = Cp::new()
        .engine(engine)
        .args(["-a", "--verify"])
        .arg(&src)
        .arg(&dst)
        .run();
    assert_exit(&out, 0);
    for name in every {
        assert_eq!(
            get_xattr(&dst.join(name), "trusted.ringio").ok().as_deref(),
            Some(name.as_bytes()),
            "{name}: trusted.ringio not copied"
        );
    }
    assert_trees_equal(
        &src,
        &dst,
        Check {
            atime: false,
            ..Check::ARCHIVE
        },
    );
    assert_exit(&verify(&src, &dst, &[]), 0);
    for name in ["link", "fifo", "chardev"] {
        remove_xattr(&dst.join(name), "trusted.ringio");
    }
    assert_finds(
        &src,
        &dst,
        &[],
        &[
            "'link': extended attribute trusted.ringio: missing from the destination",
            "'fifo': extended attribute trusted.ringio: missing from the destination",
            "'chardev': extended attribute trusted.ringio: missing from the destination",
        ],
    );
    // And where it is only in the copy.
    set_xattr(&dst.join("dangling"), "trusted.extra", b"x").unwrap();
    assert_finds(
        &src,
        &dst,
        &[],
        &["'dangling': extended attribute trusted.extra: only in the destination"],
    );
}

/// The source for the option tests: a file that goes through the data path, small ones, a
/// symlink to a file and one to a directory, a FIFO.
fn linked_source(s: &Scratch) -> std::path::PathBuf {
    let src = s.join("src");
    write_file(
        src.join("big"),
        (0..3u32 << 20).map(|i| (i * 7) as u8).collect::<Vec<_>>(),
    );
    write_file(src.join("dir/small"), b"small");
    symlink("big", src.join("to-file")).unwrap();
    symlink("dir", src.join("to-dir")).unwrap();
    mkfifo(&src.join("fifo"), 0o644);
    src
}

#[track_caller]
fn assert_verified(out: &std::process::Output) {
    assert_exit(out, 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no differences"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `cp -rL --verify` compares the followed source with the copy (files and directories where
/// the source has symlinks); `-H` and a plain `cp` follow the operands alone.
fn cp_verify_compares_what_l_followed(engine: &str) {
    let s = Scratch::new();
    linked_source(&s);
    let cp = || Cp::new().engine(engine).current_dir(s.path());
    assert_verified(&cp().args(["-rL", "--verify", "src", "dst-L"]).run());
    assert!(fs::symlink_metadata(s.join("dst-L/to-dir"))
        .unwrap()
        .is_dir());
    assert_verified(&cp().args(["-aL", "--verify", "src", "dst-aL"]).run());
    symlink("src", s.join("operand")).unwrap();
    assert_verified(&cp().args(["-rH", "--verify", "operand", "dst-H"]).run());
    assert!(fs::symlink_metadata(s.join("dst-H/to-file"))
        .unwrap()
        .is_symlink());
    assert_verified(&cp().args(["--verify", "src/to-file", "copied-file"]).run());
}

/// `cp -rl --verify`: hard links to the source are what was asked (cp -l follows symlinks,
/// as GNU's does unless -P), with -P too; so is a single `cp -l`.
#[test]
fn cp_verify_accepts_the_hard_links_of_l() {
    let s = Scratch::new();
    linked_source(&s);
    let cp = || Cp::new().current_dir(s.path());
    assert_verified(&cp().args(["-rl", "--verify", "src", "dst-l"]).run());
    assert_verified(&cp().args(["-rlP", "--verify", "src", "dst-lP"]).run());
    assert_verified(&cp().args(["-al", "--verify", "src", "dst-al"]).run());
    assert_verified(&cp().args(["-l", "--verify", "src/big", "one"]).run());
}

/// `cp -rs --verify`: symlinks that lead to the source are what was asked.
#[test]
fn cp_verify_accepts_the_symlinks_of_s() {
    let s = Scratch::new();
    let src = linked_source(&s);
    let cp = || Cp::new().current_dir(s.path());
    assert_verified(&cp().arg("-rs").arg("--verify").arg(&src).arg("dst-s").run());
    assert!(fs::symlink_metadata(s.join("dst-s/big"))
        .unwrap()
        .is_symlink());
    // Relative links work in the current directory.
    assert_verified(&cp().args(["-s", "--verify", "src/big", "rel"]).run());
}

/// `cp --attributes-only -a --verify`: metadata is compared, never content, whether the files
/// were created (empty) or existed with other bytes.
#[test]
fn cp_verify_attributes_only_compares_metadata() {
    let s = Scratch::new();
    linked_source(&s);
    let cp = || Cp::new().current_dir(s.path());
    assert_verified(
        &cp()
            .args(["--attributes-only", "-a", "--verify", "src", "fresh"])
            .run(),
    );
    assert_eq!(fs::metadata(s.join("fresh/big")).unwrap().len(), 0);
    write_file(s.join("existing/big"), b"other bytes");
    assert_verified(
        &cp()
            .args([
                "--attributes-only",
                "-a",
                "--verify",
                "-T",
                "src",
                "existing",
            ])
            .run(),
    );
    assert_eq!(fs::read(s.join("existing/big")).unwrap(), b"other bytes");
}

/// The promises still hold the copy to them: a copy where a hard link or a symlink was
/// promised, a symlink that leads elsewhere, a symlink kept where -L promised its target, and
/// metadata under --attributes-only.
#[test]
fn promised_comparisons_still_find_differences() {
    use ringio_copy::verify::{Follow, MadeAs, VerifyOptions};
    let s = Scratch::new();
    let src = linked_source(&s);
    let differences = |dst: &Path, opts: VerifyOptions| -> Vec<String> {
        let mut found = Vec::new();
        ringio_copy::verify::verify(&src, dst, &opts, &mut |d| found.push(d.to_string())).unwrap();
        found
    };
    let copy = s.join("copy");
    assert_success(&Cp::new().arg("-a").arg(&src).arg(&copy).run());
    let hard = VerifyOptions {
        made_as: MadeAs::HardLinks,
        follow: Follow::Always,
        ..VerifyOptions::content_only()
    };
    let found = differences(&copy, hard.clone());
    assert!(
        found.contains(&"'big': not a hard link to the source".to_string()),
        "{found:?}"
    );

    let symbolic = VerifyOptions {
        made_as: MadeAs::SymbolicLinks,
        ..VerifyOptions::content_only()
    };
    let found = differences(&copy, symbolic.clone());
    assert!(
        found.contains(&"'big': not a symbolic link to the source".to_string()),
        "{found:?}"
    );
    let links = s.join("links");
    assert_success(&Cp::new().arg("-rs").arg(&src).arg(&links).run());
    assert!(differences(&links, symbolic.clone()).is_empty());
    fs::remove_file(links.join("big")).unwrap();
    symlink(src.join("dir/small"), links.join("big")).unwrap();
    let found = differences(&links, symbolic);
    assert_eq!(found, ["'big': not a symbolic link to the source"]);

    let followed = VerifyOptions {
        follow: Follow::Always,
        ..VerifyOptions::content_only()
    };
    let found = differences(&copy, followed);
    assert!(
        found.contains(
            &"'to-file': type: regular file in the source, symbolic link in the destination"
                .to_string()
        ),
        "{found:?}"
    );

    let attributes = VerifyOptions {
        content: false,
        mode: true,
        ..VerifyOptions::content_only()
    };
    fs::write(copy.join("big"), b"other").unwrap();
    assert!(differences(&copy, attributes.clone()).is_empty());
    chmod(copy.join("big"), 0o600);
    let found = differences(&copy, attributes.clone());
    assert_eq!(
        found,
        ["'big': mode: 0644 in the source, 0600 in the destination"]
    );
    // Extended attributes of files whose content is not read count too.
    if set_xattr(&src.join("big"), "user.k", b"v").is_ok() {
        let with_xattrs = VerifyOptions {
            xattrs: true,
            ..attributes
        };
        let found = differences(&copy, with_xattrs);
        let missing = "'big': extended attribute user.k: missing from the destination";
        assert!(found.contains(&missing.to_string()), "{found:?}");
    }
}

/// An access ACL in the kernel's xattr form: owner rw, user 1000 r, group r, mask r, other r.
fn extended_acl() -> Vec<u8> {
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in [
        (0x01u16, 6u16, u32::MAX),
        (0x02, 4, 1000),
        (0x04, 4, u32::MAX),
        (0x10, 4, u32::MAX),
        (0x20, 4, u32::MAX),
    ] {
        acl.extend(tag.to_le_bytes());
        acl.extend(perm.to_le_bytes());
        acl.extend(id.to_le_bytes());
    }
    acl
}

/// `cp -rp` keeps ACLs as part of the mode, on a FIFO as on a file and a directory (GNU cp
/// does); `ringio verify` compares them.
#[test]
fn cp_p_keeps_the_acls_of_fifos() {
    let s = Scratch::new();
    let src = s.join("src");
    write_file(src.join("file"), b"x");
    mkfifo(&src.join("fifo"), 0o644);
    let acl = extended_acl();
    for name in ["file", "fifo", ""] {
        if let Err(e) = set_xattr(&src.join(name), "system.posix_acl_access", &acl) {
            skip!("no POSIX ACLs here: {e}");
        }
    }
    let dst = s.join("dst");
    assert_success(&Cp::new().arg("-rp").arg(&src).arg(&dst).run());
    for name in ["file", "fifo", ""] {
        assert_eq!(
            get_xattr(&dst.join(name), "system.posix_acl_access").ok(),
            Some(acl.clone()),
            "'{name}': ACL not copied"
        );
    }
    assert_exit(&verify(&src, &dst, &["--no-owner"]), 0);
}

/// The stable /proc file the tests read: its size by stat is 0.
fn proc_version() -> Option<Vec<u8>> {
    let data = fs::read("/proc/version").ok()?;
    let stated = fs::metadata("/proc/version").ok()?.len();
    (stated == 0 && !data.is_empty()).then_some(data)
}

/// A size of 0 is no size: /proc files say 0 and hold bytes, so their contents are compared
/// to the end, never skipped (two different /proc files, or a /proc file and an empty copy,
/// were "no differences"), and a whole copy of one is the same.
#[test]
fn files_whose_size_reads_as_zero_are_compared_to_their_end() {
    let Some(data) = proc_version() else {
        skip!("no /proc/version with a size of 0");
    };
    let s = Scratch::new();
    let (copy, empty) = (s.join("copy"), s.join("empty"));
    fs::write(&copy, &data).unwrap();
    fs::write(&empty, b"").unwrap();
    let proc_version = Path::new("/proc/version");
    assert_exit(&verify(proc_version, &copy, &["--content-only"]), 0);
    assert_exit(&verify(&copy, proc_version, &["--content-only"]), 0);
    assert_finds(
        proc_version,
        &empty,
        &["--content-only"],
        &[&format!("size: {} bytes in the source, 0 in", data.len())],
    );
    if fs::metadata("/proc/cpuinfo").is_ok_and(|m| m.len() == 0) {
        assert_finds(
            Path::new("/proc/cpuinfo"),
            proc_version,
            &["--content-only"],
            &["content differs from byte 0"],
        );
    }
}

/// `cp --verify` of a /proc file: the copy holds its bytes, and the comparison says so.
fn cp_verify_of_a_file_without_a_size(engine: &str) {
    if proc_version().is_none() {
        skip!("no /proc/version with a size of 0");
    }
    let s = Scratch::new();
    let out = Cp::new()
        .engine(engine)
        .args(["--verify", "/proc/version"])
        .arg(s.join("copy"))
        .run();
    assert_exit(&out, 0);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no differences"),
        "{}",
        describe(&out)
    );
}

engine_tests!(cp_verify_of_a_file_without_a_size);

/// A source that shrinks or grows after its stat, before its bytes are compared (a test hook
/// resizes it at that instant), is named as such with both sizes, exit 1.
#[test]
fn a_file_that_changes_size_while_compared_is_named() {
    let s = Scratch::new();
    let (src, dst) = (s.join("src"), s.join("dst"));
    let size = (1 << 20) + 300;
    for resize_to in [0u64, 1000, 1 << 20, size + 5000] {
        let mut data = vec![0u8; size as usize];
        Prng::new(resize_to).fill(&mut data);
        fs::write(&src, &data).unwrap();
        fs::write(&dst, &data).unwrap();
        for extra in [&["--content-only"][..], &["--no-owner"][..]] {
            fs::write(&src, &data).unwrap();
            let out = Cp::bare()
                .arg("verify")
                .args(extra)
                .arg(&src)
                .arg(&dst)
                .env("RINGIO_TEST_RESIZE_AFTER_STAT", &resize_to.to_string())
                .run();
            assert_exit(&out, 1);
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                text.contains(&format!(
                    "the source changed size while compared: {size} bytes by stat, {resize_to} bytes read"
                )),
                "resized to {resize_to}, {extra:?}: {}",
                describe(&out)
            );
        }
    }
}

/// Runs `tool` (a checksum program) on `names` in `dir`, its output into `manifest`; false
/// when the tool is not installed.
fn sums(tool: &[&str], dir: &Path, names: &[&str], manifest: &Path) -> bool {
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

/// The manifests sha256sum, sha1sum, md5sum, b3sum and xxhsum write (plain and tagged) are read,
/// with names that need escaping; a changed, a missing and an unlisted file are each named.
#[test]
fn manifests_of_the_checksum_tools_are_read() {
    let s = Scratch::new();
    let tree = s.join("tree");
    write_file(tree.join("a"), b"hello\n");
    write_file(tree.join("sub/z"), vec![7u8; 300_000]);
    write_file(tree.join("back\\slash"), b"x");
    write_file(tree.join("new\nline"), b"y");
    let all = ["a", "sub/z", "back\\slash", "new\nline"];
    let plain = ["a", "sub/z"];
    for (tool, names, manifest) in [
        (&["sha256sum"][..], &all[..], "SHA256SUMS"),
        (&["sha256sum", "--tag"], &all, "tagged"),
        (&["sha1sum"], &all, "list"),
        (&["md5sum"], &all, "MD5SUMS"),
        (&["b3sum"], &all, "B3SUMS"),
        (&["xxhsum"], &plain, "XXH64SUMS"),
        (&["xxhsum", "-H2"], &plain, "x.xxh128"),
        (&["xxhsum", "-H3"], &plain, "x.xxh3"),
    ] {
        let m = s.join(manifest);
        if !sums(tool, &tree, names, &m) {
            continue;
        }
        let out = Cp::bare()
            .arg("verify")
            .arg("--manifest")
            .arg(&m)
            .arg(&tree)
            .run();
        let text = String::from_utf8_lossy(&out.stdout);
        let unlisted = all.len() - names.len();
        assert_exit(&out, i32::from(unlisted > 0));
        assert_eq!(
            text.lines().filter(|l| l.starts_with("extra: ")).count(),
            unlisted,
            "{tool:?}: {text}"
        );
        assert!(
            !text.contains("differs") && !text.contains("missing"),
            "{tool:?}: {text}"
        );
    }
    // One byte changed, one file gone, one added: each named, exit 1.
    let m = s.join("SHA256SUMS");
    fs::OpenOptions::new()
        .write(true)
        .open(tree.join("sub/z"))
        .unwrap()
        .write_at(b"!", 150_000)
        .unwrap();
    fs::remove_file(tree.join("a")).unwrap();
    write_file(tree.join("sub/new"), b"new");
    let out = Cp::bare()
        .arg("verify")
        .arg("--manifest")
        .arg(&m)
        .arg(&tree)
        .run();
    assert_exit(&out, 1);
    let text = String::from_utf8_lossy(&out.stdout);
    for want in ["differs: 'sub/z'", "missing: 'a'", "extra: 'sub/new'"] {
        assert!(text.contains(want), "{want} in {text}");
    }
}

/// A manifest that is not one (empty, foreign, truncated mid-line) is exit 2 with its line,
/// never "no differences".
#[test]
fn a_foreign_or_broken_manifest_is_exit_2_with_its_line() {
    let s = Scratch::new();
    write_file(s.join("tree/a"), b"a");
    for (text, says) in [
        (&b""[..], "lists no file"),
        (b"# a comment\n", ":1: "),
        (b"<html>\n", ":1: "),
        (
            b"5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03  a\n5891b5",
            ":2: ",
        ),
    ] {
        let m = s.join("m.sha256");
        fs::write(&m, text).unwrap();
        let out = Cp::bare()
            .arg("verify")
            .arg("--manifest")
            .arg(&m)
            .arg(s.join("tree"))
            .run();
        assert_exit(&out, 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(says) && !err.contains("no differences"),
            "{err}"
        );
    }
    // A hash length two algorithms share, from a name that says neither: the first file
    // tells them apart (sha256 or blake3); where neither gives the listed hash, it differs.
    let foreign = b"5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03  a\n";
    let check = || {
        Cp::bare()
            .arg("verify")
            .arg("--manifest")
            .arg(s.join("m"))
            .arg(s.join("tree"))
            .run()
    };
    fs::write(s.join("m"), foreign).unwrap();
    let out = check();
    assert_exit(&out, 1);
    assert!(String::from_utf8_lossy(&out.stdout).contains("differs: 'a'"));
    for (algo, name) in [(&["sha256sum"][..], "sha256"), (&["b3sum"][..], "blake3")] {
        if sums(algo, &s.join("tree"), &["a"], &s.join("m")) {
            let out = check();
            assert_exit(&out, 0);
            assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("({name},")));
        }
    }
    fs::write(s.join("m"), foreign).unwrap();
    let out = Cp::bare()
        .args(["verify", "--hash", "whirlpool", "--manifest"])
        .arg(s.join("m"))
        .arg(s.join("tree"))
        .run();
    assert_exit(&out, 2);
    // With --hash, the same manifest is read (and `a` is not what it lists).
    for algo in ["sha256", "blake3"] {
        let out = Cp::bare()
            .args(["verify", "--hash", algo, "--manifest"])
            .arg(s.join("m"))
            .arg(s.join("tree"))
            .run();
        assert_exit(&out, 1);
        assert!(String::from_utf8_lossy(&out.stdout).contains("differs: 'a'"));
        assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("({algo},")));
    }
}

/// A name that leads out of DIR (absolute, `..`) is never checked, nor taken to cover a file
/// in DIR; what cannot be listed is named, and so is what a manifest cannot list (a FIFO, a
/// symlink), without counting it as a difference.
#[test]
fn a_manifest_cannot_reach_outside_the_tree_or_hide_what_it_cannot_see() {
    let s = Scratch::new();
    let orig = s.join("orig");
    write_file(orig.join("a"), b"one\n");
    let abs = format!("{}/a", orig.display());
    let m = s.join("SHA256SUMS");
    assert!(sums(
        &["sha256sum"],
        s.path(),
        &[abs.as_str(), "orig/a"],
        &m
    ));
    let text = fs::read_to_string(&m).unwrap();
    fs::write(&m, text.replace("  orig/a", "  ../orig/a")).unwrap();
    // The copy holds the absolute path's file below it, corrupt.
    let copy = s.join("copy");
    write_file(copy.join(abs.trim_start_matches('/')), b"CORRUPT");
    let out = Cp::bare()
        .arg("verify")
        .arg("--manifest")
        .arg(&m)
        .arg(&copy)
        .run();
    assert_exit(&out, 1);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("leads out of the tree").count(), 2, "{text}");
    assert!(text.contains("extra: "), "{text}");
    // A FIFO, and (as another user) a directory that cannot be listed.
    let tree = s.join("tree");
    write_file(tree.join("f"), b"f");
    let m2 = s.join("t.sha256");
    assert!(sums(&["sha256sum"], &tree, &["f"], &m2));
    mkfifo(&tree.join("p"), 0o644);
    let out = Cp::bare()
        .arg("verify")
        .arg("--manifest")
        .arg(&m2)
        .arg(&tree)
        .run();
    // Not a difference (a manifest lists regular files only), but counted; -v names it.
    assert_exit(&out, 0);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("not covered"));
    assert_stderr_has(&out, "1 symlink(s) or special file(s) not covered");
    let out = Cp::bare()
        .args(["verify", "-v", "--manifest"])
        .arg(&m2)
        .arg(&tree)
        .run();
    assert_exit(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("not covered: 'p'"));
    fs::remove_file(tree.join("p")).unwrap();
    if is_root() {
        write_file(tree.join("locked/x"), b"x");
        fs::set_permissions(tree.join("locked"), fs::Permissions::from_mode(0o311)).unwrap();
        for p in [s.path(), &tree] {
            fs::set_permissions(p, fs::Permissions::from_mode(0o755)).unwrap();
        }
        fs::set_permissions(&m2, fs::Permissions::from_mode(0o644)).unwrap();
        let out = Cp::bare()
            .arg("verify")
            .arg("--manifest")
            .arg(&m2)
            .arg(&tree)
            .run_as(NOBODY.0, NOBODY.1)
            .run();
        assert_exit(&out, 1);
        assert!(String::from_utf8_lossy(&out.stdout).contains("cannot check 'locked'"));
    }
}

/// A byte flipped on the device under a file whose good copy is still cached: the cached check
/// says it read the cache and finds nothing; the uncached one reads the device and names it.
#[test]
fn an_uncached_check_reads_what_the_disk_holds() {
    let s = Scratch::new();
    let fs_ = match LoopFs::new(s.path(), "ext4") {
        Ok(fs_) => fs_,
        Err(why) => skip!("{why}"),
    };
    let tree = fs_.path().join("tree");
    let mut data: Vec<u8> = (0..100u32 << 20).map(|i| (i % 251) as u8).collect();
    let marker = b"ringio-marker-in-the-middle-of-the-file-0123456789";
    let middle = data.len() / 2;
    data[middle..middle + marker.len()].copy_from_slice(marker);
    write_file(tree.join("big"), &data);
    write_file(s.join("good/big"), &data);
    assert!(sums(&["sha256sum"], &tree, &["big"], &s.join("SHA256SUMS")));
    // Flipped on the device; the page cache keeps the good copy.
    fs_.flip_on_device(marker);
    let check = |extra: &[&str]| {
        Cp::bare()
            .arg("verify")
            .args(extra)
            .arg("--manifest")
            .arg(s.join("SHA256SUMS"))
            .arg(&tree)
            .run()
    };
    let cached = check(&[]);
    assert_exit(&cached, 0);
    assert!(String::from_utf8_lossy(&cached.stderr).contains("read through the page cache"));
    let uncached = check(&["--uncached"]);
    assert_exit(&uncached, 1);
    assert!(String::from_utf8_lossy(&uncached.stdout).contains("differs: 'big'"));
    assert!(String::from_utf8_lossy(&uncached.stderr).contains("from the device"));
    // Two trees: the copy's bytes, read from the device, differ from the good ones.
    let trees = |extra: &[&str]| {
        let out = Cp::bare()
            .arg("verify")
            .args(extra)
            .arg(s.join("good"))
            .arg(&tree)
            .arg("--content-only")
            .run();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, text) = trees(&["--uncached"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("'big'"), "{text}");
}
