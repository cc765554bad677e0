//! The torture tree: every kind of entry, name, mode, size, hole, link and timestamp that a
//! copier can get wrong, copied with `ringio cp -a` by every engine and checked twice: with
//! `ringio verify`, and with the tests' own independent comparer.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::common::*;

const MIB: u64 = 1 << 20;
/// The copy runs with `--chunk-size 1M`, so chunk-boundary sizes stay small.
const CHUNK: u64 = MIB;

fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn sparse(path: &Path, size: u64, data: &[u64]) {
    let f = fs::File::create(path).unwrap();
    f.set_len(size).unwrap();
    for &at in data {
        f.write_all_at(&[0xa5; 4096], at).unwrap();
    }
}

/// A POSIX ACL in the kernel's xattr format: (tag, perm, id) entries after a version header.
fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut out = 2u32.to_le_bytes().to_vec();
    for &(tag, perm, id) in entries {
        out.extend_from_slice(&tag.to_le_bytes());
        out.extend_from_slice(&perm.to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
    }
    out
}

const NO_ID: u32 = u32::MAX;

/// What the tree could not hold here, said once per test.
struct Notes(Vec<String>);

impl Notes {
    fn skip(&mut self, what: &str, why: impl std::fmt::Display) {
        self.0.push(format!("{what}: {why}"));
    }
}

/// Builds the torture tree at `root` (everything but the part deeper than PATH_MAX, which
/// [`build_deep`] adds). Returns what had to be left out.
fn build(root: &Path) -> Vec<String> {
    let mut notes = Notes(Vec::new());
    let root_user = is_root();
    let mut rng = Prng::new(0x7047);
    fs::create_dir(root).unwrap();

    // Sizes around pages and chunks, and one of tens of MiB (split into chunks).
    let sizes = root.join("sizes");
    fs::create_dir(&sizes).unwrap();
    for size in [
        0,
        1,
        4095,
        4096,
        4097,
        CHUNK - 1,
        CHUNK,
        CHUNK + 1,
        2 * CHUNK + 1,
        20 * MIB + 3,
    ] {
        let mut data = vec![0u8; size as usize];
        rng.fill(&mut data);
        fs::write(sizes.join(format!("size-{size}")), data).unwrap();
        // Cold, so that the copy splits the biggest into chunks (a cached file goes whole).
        evict(sizes.join(format!("size-{size}")));
    }

    // Holes at the start, in the middle, at the end, and nothing but a hole.
    let holes = root.join("holes");
    fs::create_dir(&holes).unwrap();
    sparse(&holes.join("hole-start"), 4 * MIB, &[3 * MIB]);
    sparse(&holes.join("hole-middle"), 4 * MIB, &[0, 4 * MIB - 4096]);
    sparse(&holes.join("hole-end"), 4 * MIB, &[0]);
    sparse(&holes.join("all-hole"), 4 * MIB, &[]);
    sparse(&holes.join("big-sparse"), 1 << 30, &[0, 1 << 29]);

    // Hard links across directories, a hard-linked symlink.
    let links = root.join("links");
    fs::create_dir_all(links.join("a/deeper")).unwrap();
    fs::create_dir_all(links.join("b")).unwrap();
    write_file(links.join("a/file"), b"linked three times");
    fs::hard_link(links.join("a/file"), links.join("b/file-again")).unwrap();
    fs::hard_link(links.join("a/file"), links.join("a/deeper/and-again")).unwrap();
    symlink("file", links.join("a/sym")).unwrap();
    let (from, to) = (
        cstring(&links.join("a/sym")),
        cstring(&links.join("b/sym-link")),
    );
    // SAFETY: both are NUL-terminated paths; flags 0 links the symlink itself.
    let rc = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            0,
        )
    };
    assert_eq!(rc, 0, "linkat of a symlink");

    // Symlinks of every shape.
    let syms = root.join("symlinks");
    fs::create_dir(&syms).unwrap();
    write_file(syms.join("target"), b"t");
    symlink("target", syms.join("relative")).unwrap();
    symlink("/etc/hostname", syms.join("absolute")).unwrap();
    symlink("nowhere/at/all", syms.join("dangling")).unwrap();
    symlink("self-loop", syms.join("self-loop")).unwrap();
    symlink("chain-2", syms.join("chain-1")).unwrap();
    symlink("chain-3", syms.join("chain-2")).unwrap();
    symlink("target", syms.join("chain-3")).unwrap();

    // Special files.
    let special = root.join("special");
    fs::create_dir(&special).unwrap();
    mkfifo(&special.join("fifo"), 0o640);
    drop(std::os::unix::net::UnixListener::bind(special.join("socket")).unwrap());
    if root_user {
        for (name, kind, dev) in [
            ("null", libc::S_IFCHR, libc::makedev(1, 3)),
            ("block", libc::S_IFBLK, libc::makedev(7, 200)),
        ] {
            let c = cstring(&special.join(name));
            // SAFETY: a NUL-terminated path.
            let rc = unsafe { libc::mknod(c.as_ptr(), kind | 0o600, dev) };
            assert_eq!(rc, 0, "mknod {name}");
        }
    } else {
        notes.skip("device nodes", "need root");
    }

    // Names.
    let names = root.join("names");
    fs::create_dir(&names).unwrap();
    for name in [
        &b"with space"[..],
        b"new\nline",
        b"-leading-dash",
        b"invalid-utf8-\xff\xfe",
        &[b'n'; 255][..],
    ] {
        fs::write(names.join(OsStr::from_bytes(name)), name).unwrap();
    }

    // Modes.
    let modes = root.join("modes");
    fs::create_dir(&modes).unwrap();
    for (name, mode) in [
        ("m0000", 0o000),
        ("m0400", 0o400),
        ("setuid", 0o4755),
        ("setgid", 0o2755),
    ] {
        write_file(modes.join(name), name);
        set_mode(&modes.join(name), mode);
    }
    fs::create_dir(modes.join("sticky")).unwrap();
    set_mode(&modes.join("sticky"), 0o1777);
    fs::create_dir_all(modes.join("ro/sub")).unwrap();
    write_file(modes.join("ro/sub/inside"), b"in a read-only tree");
    if root_user {
        fs::create_dir(modes.join("closed")).unwrap();
        write_file(modes.join("closed/hidden"), b"behind 0000");
    } else {
        notes.skip("a 0000 directory", "only root can copy its contents");
    }

    // One wide directory.
    let wide = root.join("wide");
    fs::create_dir(&wide).unwrap();
    for i in 0..5000 {
        fs::write(wide.join(format!("entry-{i:05}")), i.to_string()).unwrap();
    }

    // Extended attributes and ACLs, on files and directories.
    let xattrs = root.join("xattrs");
    fs::create_dir(&xattrs).unwrap();
    write_file(xattrs.join("file"), b"x");
    let attrs = [
        (xattrs.join("file"), "user.note", &b"on a file"[..]),
        (xattrs.clone(), "user.note", &b"on a directory"[..]),
        (xattrs.join("file"), "user.binary", &[0u8, 1, 2, 255][..]),
    ];
    for (path, name, value) in attrs {
        if let Err(e) = set_xattr(&path, name, value) {
            notes.skip("user xattrs", e);
        }
    }
    if root_user {
        if let Err(e) = set_xattr(&xattrs.join("file"), "trusted.secret", b"root only") {
            notes.skip("trusted xattrs", e);
        }
    }
    let access = acl(&[
        (0x01, 6, NO_ID),
        (0x02, 6, 65534),
        (0x04, 4, NO_ID),
        (0x10, 6, NO_ID),
        (0x20, 4, NO_ID),
    ]);
    if let Err(e) = set_xattr(&xattrs.join("file"), "system.posix_acl_access", &access) {
        notes.skip("access ACLs", e);
    }
    let default = acl(&[(0x01, 7, NO_ID), (0x04, 5, NO_ID), (0x20, 5, NO_ID)]);
    if let Err(e) = set_xattr(&xattrs, "system.posix_acl_default", &default) {
        notes.skip("default ACLs", e);
    }

    // Foreign owners.
    if root_user {
        std::os::unix::fs::chown(names.join("with space"), Some(1234), Some(5678)).unwrap();
        std::os::unix::fs::lchown(syms.join("relative"), Some(4321), Some(8765)).unwrap();
        std::os::unix::fs::chown(&modes, Some(2222), Some(3333)).unwrap();
    } else {
        notes.skip("foreign owners", "need root");
    }

    // Timestamps far in the past and the future, with nanoseconds, on every kind of entry;
    // directories last, since filling them moved their times.
    let past = Ts::new(31_536_000, 123_456_789);
    let future = Ts::new(4_102_444_800, 987_654_321);
    for (i, path) in [
        sizes.join("size-1"),
        holes.join("hole-middle"),
        syms.join("relative"),
        syms.join("dangling"),
        special.join("fifo"),
        names.join(OsStr::from_bytes(b"new\nline")),
        xattrs.join("file"),
        modes.join("ro/sub"),
        modes.join("ro"),
        wide.clone(),
        syms.clone(),
    ]
    .iter()
    .enumerate()
    {
        let (a, m) = if i % 2 == 0 {
            (past, future)
        } else {
            (future, past)
        };
        set_times(path, Some(a), Some(m)).unwrap();
    }
    // Read-only and closed directories get their modes last, once nothing more goes in.
    set_mode(&modes.join("ro/sub"), 0o555);
    set_mode(&modes.join("ro"), 0o555);
    if root_user {
        set_mode(&modes.join("closed"), 0o000);
    }
    notes.0
}

/// Levels of 200-byte names: far beyond PATH_MAX.
const DEEP_LEVELS: usize = 40;

fn deep_name(level: usize) -> String {
    format!("level{level:02}-{}", "d".repeat(192))
}

/// Adds `deep/`, a chain of directories far past PATH_MAX with a file, a symlink and set times
/// at the bottom. Built through directory fds: no whole path would work.
fn build_deep(root: &Path) {
    fs::create_dir(root.join("deep")).unwrap();
    let mut dir = deep::Dir::open(&root.join("deep"));
    for level in 0..DEEP_LEVELS {
        dir.mkdir(&deep_name(level), 0o755);
        dir = dir.open_child(&deep_name(level));
    }
    dir.write_file("bottom", b"at the bottom of a very long path", 0o640);
    dir.symlink("bottom", "link");
    dir.set_times("bottom", Ts::new(1_600_000_000, 42));
}

/// The independent check of `deep/`: content, link, mode and times at the bottom.
fn check_deep(src: &Path, dst: &Path) {
    let (mut s, mut d) = (
        deep::Dir::open(&src.join("deep")),
        deep::Dir::open(&dst.join("deep")),
    );
    for level in 0..DEEP_LEVELS {
        s = s.open_child(&deep_name(level));
        d = d.open_child(&deep_name(level));
    }
    assert_eq!(d.read_file("bottom"), s.read_file("bottom"));
    assert_eq!(d.read_link("link"), "bottom");
    let (a, b) = (s.stat("bottom"), d.stat("bottom"));
    assert_eq!(
        (b.st_mode, b.st_uid, b.st_gid, b.st_mtime, b.st_mtime_nsec),
        (a.st_mode, a.st_uid, a.st_gid, a.st_mtime, a.st_mtime_nsec)
    );
}

engine_tests!(torture_tree_copies_exactly);

fn torture_tree_copies_exactly(engine: &str) {
    let s = Scratch::new();
    let src = s.join("src");
    let notes = build(&src);
    for note in &notes {
        cannot_run(&format!("part of the tree: {note}"));
    }
    let atimes = Atimes::record(&src);
    build_deep(&src);
    let dst = s.join("dst");
    let out = Cp::new()
        .engine(engine)
        .args(["-a", "--chunk-size", "1M"])
        .arg(&src)
        .arg(&dst)
        .run();
    assert_success(&out);

    // 1. The tests' own comparer, which uses whole paths: everything but `deep/`, then `deep/`
    // through directory fds.
    atimes.restore();
    for entry in fs::read_dir(&src).unwrap() {
        let name = entry.unwrap().file_name();
        if name != "deep" {
            assert_trees_equal(&src.join(&name), &dst.join(&name), Check::ARCHIVE);
        }
    }
    check_deep(&src, &dst);
    let (a, b) = (fs::metadata(&src).unwrap(), fs::metadata(&dst).unwrap());
    assert_eq!(
        (a.mode(), a.mtime(), a.mtime_nsec()),
        (b.mode(), b.mtime(), b.mtime_nsec())
    );

    // 2. ringio verify: everything, the deep part and holes included. (Second: reading a symlink
    // moves its atime, which the first check compares.)
    let out = Cp::bare().arg("verify").arg(&src).arg(&dst).run();
    assert_exit(&out, 0);
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // Holes: the 1 GiB file holding 8 KiB is still sparse.
    let big = fs::metadata(dst.join("holes/big-sparse")).unwrap();
    assert_eq!(big.len(), 1 << 30);
    assert!(
        big.blocks() * 512 <= 1 << 20,
        "{} bytes allocated",
        big.blocks() * 512
    );
}

/// `ringio verify` finds what is wrong in a damaged copy of the torture tree, each with its
/// path.
#[test]
fn verify_finds_damage_in_the_torture_tree() {
    let s = Scratch::new();
    let src = s.join("src");
    build(&src);
    let dst = s.join("dst");
    assert_success(&Cp::new().args(["-a"]).arg(&src).arg(&dst).run());
    let damage: Vec<(PathBuf, &str)> = vec![
        (dst.join("sizes/size-4097"), "content"),
        (dst.join("links/b/file-again"), "hard links"),
        (dst.join("symlinks/relative"), "symlink target"),
        (dst.join("wide/entry-04999"), "missing"),
    ];
    // Same size, one byte changed in the middle of a big file.
    let f = fs::OpenOptions::new()
        .write(true)
        .open(&damage[0].0)
        .unwrap();
    f.write_all_at(b"!", 2000).unwrap();
    // The link broken into a separate copy with the same content and times.
    let meta = fs::symlink_metadata(&damage[1].0).unwrap();
    let content = fs::read(&damage[1].0).unwrap();
    fs::remove_file(&damage[1].0).unwrap();
    fs::write(&damage[1].0, content).unwrap();
    set_mode(&damage[1].0, meta.mode() & 0o7777);
    std::os::unix::fs::chown(&damage[1].0, Some(meta.uid()), Some(meta.gid())).unwrap();
    let mtime = Ts::new(meta.mtime(), meta.mtime_nsec());
    set_times(&damage[1].0, None, Some(mtime)).unwrap();
    fs::remove_file(&damage[2].0).unwrap();
    symlink("elsewhere", &damage[2].0).unwrap();
    fs::remove_file(&damage[3].0).unwrap();

    let out = Cp::bare().arg("verify").arg(&src).arg(&dst).run();
    assert_exit(&out, 1);
    let text = String::from_utf8_lossy(&out.stdout);
    for (path, what) in &damage {
        let rel = path.strip_prefix(&dst).unwrap().display().to_string();
        assert!(
            text.lines().any(|l| l.contains(&rel) && l.contains(what)),
            "no '{what}' difference for {rel} in:\n{text}"
        );
    }
}
