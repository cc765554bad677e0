//! cp's policies beyond the plain copy: holes (`--sparse`), clones (`--reflink`), what happens
//! to an existing destination (`--backup`, `--remove-destination`, `--atomic`), durability
//! (`--fsync`) and filesystem boundaries (`-x`).

#[macro_use]
mod common;

use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use common::*;

/// Makes a file of `size` bytes holding `data` blocks at the given offsets and holes elsewhere.
fn sparse_file(path: &Path, size: u64, data: &[(u64, &[u8])]) {
    let f = fs::File::create(path).unwrap();
    f.set_len(size).unwrap();
    for (at, bytes) in data {
        f.write_all_at(bytes, *at).unwrap();
    }
}

fn allocated(path: &Path) -> u64 {
    fs::metadata(path).unwrap().blocks() * 512
}

fn same_bytes_at(a: &Path, b: &Path, offsets: &[u64], len: usize) {
    let (fa, fb) = (fs::File::open(a).unwrap(), fs::File::open(b).unwrap());
    for &at in offsets {
        let (mut x, mut y) = (vec![0; len], vec![0; len]);
        fa.read_exact_at(&mut x, at).unwrap();
        fb.read_exact_at(&mut y, at).unwrap();
        assert_eq!(x, y, "bytes at {at} of {}", b.display());
    }
}

engine_tests!(sparse_auto_keeps_holes, sparse_never_and_always);

/// A 1 GiB file holding 12 KiB copies as 12 KiB, and holes anywhere survive.
fn sparse_auto_keeps_holes(engine: &str) {
    let s = Scratch::new();
    let src = s.join("src");
    fs::create_dir(&src).unwrap();
    let page = vec![0x5a; 4096];
    let gib = 1u64 << 30;
    sparse_file(
        &src.join("big"),
        gib,
        &[(0, &page), (gib / 2, &page), (gib - 4096, &page)],
    );
    if allocated(&src.join("big")) > 64 << 10 {
        skip!("this filesystem does not make holes");
    }
    let mib = 1u64 << 20;
    sparse_file(&src.join("hole-start"), mib, &[(mib - 8192, &page)]);
    sparse_file(
        &src.join("hole-middle"),
        mib,
        &[(0, &page), (mib - 4096, &page)],
    );
    sparse_file(&src.join("hole-end"), mib, &[(0, &page)]);
    sparse_file(&src.join("all-hole"), mib, &[]);
    sparse_file(&src.join("small-hole"), 48 << 10, &[(0, &page)]);
    let out = Cp::new()
        .engine(engine)
        .args(["-a", "--chunk-size", "64M"])
        .arg(&src)
        .arg(s.join("dst"))
        .run();
    assert_success(&out);
    let dst = s.join("dst");
    let big = dst.join("big");
    assert_eq!(fs::metadata(&big).unwrap().len(), gib);
    assert!(
        allocated(&big) <= 64 << 10,
        "big: {} bytes allocated",
        allocated(&big)
    );
    same_bytes_at(
        &src.join("big"),
        &big,
        &[0, gib / 2, gib - 4096, 4096, gib / 4],
        4096,
    );
    for name in [
        "hole-start",
        "hole-middle",
        "hole-end",
        "all-hole",
        "small-hole",
    ] {
        let (a, b) = (src.join(name), dst.join(name));
        assert_eq!(fs::read(&a).unwrap(), fs::read(&b).unwrap(), "{name}");
        assert!(
            allocated(&b) <= allocated(&a),
            "{name}: {} bytes allocated, source has {}",
            allocated(&b),
            allocated(&a)
        );
    }
    let check = Check {
        atime: false,
        ..Check::PRESERVE_P
    };
    assert_trees_equal(&src, &dst, check);
}

/// `--sparse=never` writes every byte; `--sparse=always` also turns zero runs into holes.
fn sparse_never_and_always(engine: &str) {
    let s = Scratch::new();
    let src = s.join("src");
    fs::create_dir(&src).unwrap();
    let mib = 1usize << 20;
    sparse_file(&src.join("holes"), mib as u64, &[(0, b"head")]);
    let mut zeros = vec![0u8; 2 * mib];
    zeros[mib] = 1;
    write_file(src.join("zeros"), &zeros);
    if allocated(&src.join("holes")) >= mib as u64 {
        skip!("this filesystem does not make holes");
    }
    let copy = |how: &str, dst: &str| {
        let out = Cp::new()
            .engine(engine)
            .args(["-r", how])
            .arg(&src)
            .arg(s.join(dst))
            .run();
        assert_success(&out);
        assert_trees_equal(&src, &s.join(dst), Check::CONTENT);
    };
    copy("--sparse=never", "never");
    assert!(allocated(&s.join("never/holes")) >= mib as u64);
    copy("--sparse=always", "always");
    let z = allocated(&s.join("always/zeros"));
    assert!(z <= 64 << 10, "zero runs became holes: {z} bytes allocated");
}

#[test]
fn backups_are_named_as_cp_names_them() {
    let s = Scratch::new();
    write_file(s.join("src/f"), "new");
    write_file(s.join("dst/f"), "v0");
    let cp = |extra: &[&str]| {
        let out = Cp::new()
            .args(extra)
            .arg(s.join("src/f"))
            .arg(s.join("dst/f"))
            .run();
        assert_success(&out);
    };
    let read = |name: &str| fs::read_to_string(s.join("dst").join(name)).unwrap();
    cp(&["--backup=simple"]);
    assert_eq!((read("f"), read("f~")), ("new".into(), "v0".into()));
    // `existing` stays simple while there are no numbered backups.
    cp(&["--backup=existing", "-S", ".bak"]);
    assert_eq!(read("f.bak"), "new");
    cp(&["--backup=numbered"]);
    cp(&["--backup=t"]);
    assert!(s.join("dst/f.~1~").exists() && s.join("dst/f.~2~").exists());
    // Now numbered backups exist, so -b (existing) numbers too.
    cp(&["-b"]);
    assert!(s.join("dst/f.~3~").exists());
    assert_eq!(read("f"), "new");
    // A missing destination needs no backup.
    let out = Cp::new()
        .arg("--backup=numbered")
        .arg(s.join("src/f"))
        .arg(s.join("dst/g"))
        .run();
    assert_success(&out);
    assert!(!s.join("dst/g.~1~").exists());
    let out = Cp::new()
        .args(["-n", "--backup"])
        .arg(s.join("src/f"))
        .arg(s.join("dst/f"))
        .run();
    assert_exit(&out, 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("mutually exclusive"));
}

#[test]
fn backups_in_a_tree_keep_every_old_entry() {
    let s = Scratch::new();
    write_file(s.join("src/a"), "A");
    write_file(s.join("src/sub/b"), "B");
    write_file(s.join("dst/a"), "old a");
    fs::create_dir_all(s.join("dst/sub")).unwrap();
    std::os::unix::fs::symlink("anywhere", s.join("dst/sub/b")).unwrap();
    let out = Cp::new()
        .args(["-r", "--backup=numbered"])
        .arg(s.join("src/."))
        .arg(s.join("dst"))
        .run();
    assert_success(&out);
    assert_eq!(fs::read_to_string(s.join("dst/a")).unwrap(), "A");
    assert_eq!(fs::read_to_string(s.join("dst/a.~1~")).unwrap(), "old a");
    assert_eq!(
        fs::read_link(s.join("dst/sub/b.~1~")).unwrap(),
        Path::new("anywhere")
    );
    assert_eq!(fs::read_to_string(s.join("dst/sub/b")).unwrap(), "B");
}

/// Writing over a file changes every hard link to it; --remove-destination and --atomic make
/// a new inode and leave the other names alone.
#[test]
fn remove_destination_and_atomic_leave_other_links_alone() {
    for how in [None, Some("--remove-destination"), Some("--atomic")] {
        let s = Scratch::new();
        write_file(s.join("src"), "new");
        write_file(s.join("dst"), "old");
        fs::hard_link(s.join("dst"), s.join("other-name")).unwrap();
        let out = Cp::new()
            .args(how)
            .arg(s.join("src"))
            .arg(s.join("dst"))
            .run();
        assert_success(&out);
        assert_eq!(fs::read_to_string(s.join("dst")).unwrap(), "new");
        let other = fs::read_to_string(s.join("other-name")).unwrap();
        let expect = if how.is_some() { "old" } else { "new" };
        assert_eq!(other, expect, "{how:?}");
        let names: Vec<_> = fs::read_dir(s.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 3, "{how:?}: {names:?}");
    }
}

engine_tests!(atomic_tree_copy);

/// `--atomic --fsync -a` copies a whole tree exactly, hard links included, and leaves no
/// temporary names behind.
fn atomic_tree_copy(engine: &str) {
    let s = Scratch::new();
    let tree = TreeSpec::small(7).build(&s.join("src"));
    write_file(s.join("src/linked/one"), vec![7u8; 300_000]);
    fs::create_dir_all(s.join("src/other")).unwrap();
    fs::hard_link(s.join("src/linked/one"), s.join("src/other/two")).unwrap();
    let big = vec![3u8; 3 << 20];
    write_file(s.join("src/big"), &big);
    let out = Cp::new()
        .engine(engine)
        .args(["-a", "--atomic", "--fsync", "--chunk-size", "1M"])
        .arg(&tree.root)
        .arg(s.join("dst"))
        .run();
    assert_success(&out);
    // Files added after the tree was built have no recorded atimes to put back.
    let check = Check {
        atime: false,
        ..Check::ARCHIVE
    };
    assert_trees_equal(&tree.root, &s.join("dst"), check);
    let (a, b) = (
        fs::metadata(s.join("dst/linked/one")).unwrap(),
        fs::metadata(s.join("dst/other/two")).unwrap(),
    );
    assert_eq!(a.ino(), b.ino());
    let out = std::process::Command::new("find")
        .arg(s.join("dst"))
        .args(["-name", "*.ringio-*"])
        .output()
        .unwrap();
    assert!(
        out.stdout.is_empty(),
        "temporaries left: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A file that fails under --atomic leaves the old destination whole and no temporary.
#[test]
fn atomic_failure_keeps_the_old_file() {
    if !is_root() {
        skip!("needs root to run the copy as another user");
    }
    let s = Scratch::new();
    s.give_to(NOBODY.0, NOBODY.1);
    write_file(s.join("src"), "secret");
    chmod(s.join("src"), 0o000);
    write_file(s.join("dst"), "old");
    chown_tree(s.path(), NOBODY.0, NOBODY.1);
    let out = Cp::new()
        .arg("--atomic")
        .arg(s.join("src"))
        .arg(s.join("dst"))
        .run_as(NOBODY.0, NOBODY.1)
        .run();
    assert_exit(&out, 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"));
    assert_eq!(fs::read_to_string(s.join("dst")).unwrap(), "old");
    assert_eq!(fs::read_dir(s.path()).unwrap().count(), 2);
}

/// -x copies a mount point as an empty directory and does not descend into it.
#[test]
fn one_file_system_stops_at_mount_points() {
    let s = Scratch::new();
    write_file(s.join("src/here"), "x");
    fs::create_dir_all(s.join("src/mnt")).unwrap();
    let mount = match TmpfsMount::new(&s.join("src/mnt"), "1m") {
        Ok(m) => m,
        Err(why) => skip!("{why}"),
    };
    write_file(mount.path().join("elsewhere"), "y");
    let out = Cp::new()
        .args(["-a", "-x"])
        .arg(s.join("src"))
        .arg(s.join("x"))
        .run();
    assert_success(&out);
    assert!(s.join("x/here").exists());
    assert!(s.join("x/mnt").is_dir());
    assert_eq!(fs::read_dir(s.join("x/mnt")).unwrap().count(), 0);
    let out = Cp::new()
        .args(["-a"])
        .arg(s.join("src"))
        .arg(s.join("all"))
        .run();
    assert_success(&out);
    assert!(s.join("all/mnt/elsewhere").exists());
}

/// Where the filesystem cannot clone, --reflink=always fails each file clearly and leaves no
/// partial copy; auto and never copy.
#[test]
fn reflink_always_fails_clearly_where_clones_are_impossible() {
    let s = Scratch::new();
    write_file(s.join("src/f"), vec![1u8; 100_000]);
    fs::create_dir(s.join("dst")).unwrap();
    let out = Cp::new()
        .arg("--reflink=always")
        .arg(s.join("src/f"))
        .arg(s.join("dst/f"))
        .run();
    if out.status.success() {
        skip!("this filesystem clones; the loop-mounted tests cover it");
    }
    assert_exit(&out, 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot clone") && err.contains("dst/f"),
        "{err}"
    );
    assert!(!s.join("dst/f").exists());
    for how in ["--reflink=auto", "--reflink=never", "--reflink"] {
        let out = Cp::new()
            .arg(how)
            .arg(s.join("src/f"))
            .arg(s.join("dst/g"))
            .run();
        if how == "--reflink" {
            assert_exit(&out, 1);
        } else {
            assert_success(&out);
            assert_eq!(fs::read(s.join("dst/g")).unwrap(), vec![1u8; 100_000]);
        }
    }
}

/// --reflink=always onto an existing file: where the clone is impossible the file keeps its
/// content (GNU cp 9.1 leaves it truncated), and where it works the file becomes the source,
/// however long it was.
#[test]
fn reflink_always_onto_an_existing_file() {
    let s = Scratch::new();
    write_file(s.join("f"), vec![1u8; 100_000]);
    write_file(s.join("d"), "keep me");
    let out = Cp::new()
        .arg("--reflink=always")
        .arg(s.join("f"))
        .arg(s.join("d"))
        .run();
    if out.status.success() {
        eprintln!("SKIPPED the failing clone: this filesystem clones");
    } else {
        assert_exit(&out, 1);
        assert_eq!(fs::read(s.join("d")).unwrap(), b"keep me");
    }
    // --attributes-only copies no data, so there is nothing to clone.
    let out = Cp::new()
        .args(["--reflink=always", "--attributes-only"])
        .arg(s.join("f"))
        .arg(s.join("d"))
        .run();
    assert_success(&out);
    assert_eq!(fs::read(s.join("d")).unwrap(), b"keep me");
    for fs_type in ["xfs", "btrfs"] {
        let mnt = match LoopFs::new(s.path(), fs_type) {
            Ok(m) => m,
            Err(why) => {
                eprintln!("SKIPPED {fs_type}: {why}");
                continue;
            }
        };
        let root = mnt.path();
        write_file(root.join("f"), vec![2u8; 70_000]);
        write_file(root.join("e"), "");
        for (src, len) in [("f", 70_000), ("e", 0)] {
            let dst = root.join(format!("longer-{src}"));
            write_file(&dst, vec![3u8; 200_000]);
            let out = Cp::new()
                .arg("--reflink=always")
                .arg(root.join(src))
                .arg(&dst)
                .run();
            assert_success(&out);
            assert_eq!(fs::read(&dst).unwrap(), vec![2u8; len], "{fs_type}: {src}");
        }
    }
}

/// On xfs and btrfs a clone shares every extent with its source; --reflink=never shares none.
#[test]
fn reflinks_on_xfs_and_btrfs() {
    let s = Scratch::new();
    for fs_type in ["xfs", "btrfs"] {
        let mnt = match LoopFs::new(s.path(), fs_type) {
            Ok(m) => m,
            Err(why) => {
                eprintln!("SKIPPED {fs_type}: {why}");
                continue;
            }
        };
        let root = mnt.path();
        write_file(root.join("src/big"), vec![9u8; 3 << 20]);
        write_file(root.join("src/small"), vec![8u8; 20_000]);
        for (how, shared) in [
            ("--reflink=always", true),
            ("--reflink=auto", true),
            ("--reflink=never", false),
        ] {
            let dst = root.join(how.trim_start_matches("--reflink="));
            let out = Cp::new()
                .args(["-a", how])
                .arg(root.join("src"))
                .arg(&dst)
                .run();
            assert_success(&out);
            assert_trees_equal(&root.join("src"), &dst, Check::CONTENT);
            for name in ["big", "small"] {
                match extents_shared(&dst.join(name)) {
                    Ok(is) => assert_eq!(is, shared, "{fs_type} {how} {name}"),
                    Err(why) => eprintln!("SKIPPED extent check: {why}"),
                }
            }
        }
    }
}

/// Device nodes need privilege: without it, each gets a clear error and the rest is copied.
#[test]
fn special_files_without_permission_fail_one_by_one() {
    if !is_root() {
        skip!("needs root to make a device node and run the copy as another user");
    }
    let s = Scratch::new();
    s.give_to(NOBODY.0, NOBODY.1);
    fs::create_dir(s.join("src")).unwrap();
    let null = cstring(&s.join("src/null"));
    // SAFETY: a valid NUL-terminated path.
    let rc = unsafe { libc::mknod(null.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    assert_eq!(rc, 0, "mknod");
    mkfifo(&s.join("src/fifo"), 0o644);
    write_file(s.join("src/file"), "data");
    chown_tree(s.path(), NOBODY.0, NOBODY.1);
    let out = Cp::new()
        .arg("-a")
        .arg(s.join("src"))
        .arg(s.join("dst"))
        .run_as(NOBODY.0, NOBODY.1)
        .run();
    assert_exit(&out, 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot create special file") && err.contains("dst/null"),
        "{err}"
    );
    assert!(fs::metadata(s.join("dst/fifo"))
        .unwrap()
        .file_type()
        .is_fifo_like());
    assert_eq!(fs::read_to_string(s.join("dst/file")).unwrap(), "data");
}

trait FifoLike {
    fn is_fifo_like(&self) -> bool;
}

impl FifoLike for fs::FileType {
    fn is_fifo_like(&self) -> bool {
        std::os::unix::fs::FileTypeExt::is_fifo(self)
    }
}

engine_tests!(size_change_is_noted_under_verbose);

/// A file whose size differs from what stat said (here a /proc file, which stats as empty) is
/// copied as read, and `-v` says so.
fn size_change_is_noted_under_verbose(engine: &str) {
    let s = Scratch::new();
    let out = Cp::new()
        .engine(engine)
        .arg("-v")
        .arg("/proc/self/status")
        .arg(s.join("status"))
        .run();
    assert_exit(&out, 0);
    let copied = fs::read_to_string(s.join("status")).unwrap();
    assert!(
        copied.starts_with("Name:") && copied.ends_with('\n'),
        "{copied}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("changed size while it was copied (0 bytes at start"),
        "{err}"
    );
}
