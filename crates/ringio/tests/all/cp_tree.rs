//! `ringio cp` copies trees right: content, metadata, the operand forms, symlink policies, and
//! awkward shapes (deeper than PATH_MAX, read-only directories, chunk boundaries). Every test
//! runs once per engine.

use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common::*;

engine_tests!(
    archive_copies_standard_tree,
    archive_copies_uncached_tree,
    recursive_copies_content,
    matches_gnu_cp,
    copies_into_existing_directory,
    copies_several_sources_into_directory,
    target_directory_forms,
    copies_paths_longer_than_path_max,
    read_only_directories_with_content,
    chunk_boundaries_with_tuning_options,
    single_big_file,
    sparse_files_copy_exactly,
    empty_files_and_directories,
    symlink_dereference_policies,
    hard_links,
    fifo_copied_as_fifo,
    overwrite_policies,
    force_replaces_unwritable_destination,
    preserve_lists,
    xattrs,
    xattrs_of_read_only_entries_as_a_user,
    verbose_and_progress,
);

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// `-a` carries over everything: content, modes with setuid/setgid/sticky, owners (as root),
/// atime and mtime with nanoseconds on files, directories and symlinks, symlink targets.
fn archive_copies_standard_tree(engine: &str) {
    archive_copy(engine, 1, |_| {});
}

/// As above with the source's data out of the page cache, so the io_uring engine's in-place
/// copy misses and hands files to its ring: still everything, atimes as they were before the
/// copy read the files.
fn archive_copies_uncached_tree(engine: &str) {
    archive_copy(engine, 3, |tree| {
        evict(&tree.root);
        tree.restore_atimes(); // evict read the directories
    });
}

/// `cp -a` of the standard tree of `seed`, after `prepare`, compared in full.
fn archive_copy(engine: &str, seed: u64, prepare: impl Fn(&TestTree)) {
    let scratch = Scratch::new();
    let tree = TreeSpec::standard(seed).build(&scratch.join("src"));
    prepare(&tree);
    let dst = scratch.join("dst");
    let out = Cp::new()
        .engine(engine)
        .arg("-a")
        .arg(&tree.root)
        .arg(&dst)
        .run();
    assert_success(&out);
    tree.restore_atimes();
    assert_trees_equal(&tree.root, &dst, Check::ARCHIVE);
}

/// Drops the regular files under `dir` from the page cache (written back first, so the pages
/// are clean and can go).
fn evict(dir: &Path) {
    for entry in fs::read_dir(dir).expect("read_dir") {
        let entry = entry.expect("entry");
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            evict(&entry.path());
        } else if kind.is_file() {
            let Ok(file) = fs::File::open(entry.path()) else {
                continue; // unreadable on purpose
            };
            file.sync_all().expect("fsync");
            // SAFETY: a valid descriptor; advice has no memory effects.
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    }
}

/// `-r` copies content, types and symlink targets (symlinks stay symlinks).
fn recursive_copies_content(engine: &str) {
    let scratch = Scratch::new();
    let tree = TreeSpec::standard(2).build(&scratch.join("src"));
    let dst = scratch.join("dst");
    let out = Cp::new()
        .engine(engine)
        .arg("-r")
        .arg(&tree.root)
        .arg(&dst)
        .run();
    assert_success(&out);
    assert_trees_equal(&tree.root, &dst, Check::CONTENT);
}

/// GNU cp is the reference: for each option set, our copy of the standard tree equals GNU's in
/// everything that option set defines (for `-r`: modes under the umask, owners, no hard links,
/// no xattrs; for `-a`: everything).
fn matches_gnu_cp(engine: &str) {
    if !gnu_cp_available() {
        skip!("GNU cp not found");
    }
    let scratch = Scratch::new();
    let tree = TreeSpec::standard(3).build(&scratch.join("src"));
    let no_times = Check {
        mtime: false,
        atime: false,
        ..Check::ARCHIVE
    };
    let variants: &[(&[&str], Check)] = &[
        (&["-a"], Check::ARCHIVE),
        (&["-r"], no_times),
        (&["-rp"], Check::ARCHIVE),
        (&["-r", "--preserve=mode"], no_times),
        (&["-r", "--preserve=timestamps"], Check::ARCHIVE),
    ];
    let mut failed = Vec::new();
    for (i, (args, check)) in variants.iter().enumerate() {
        let (gnu, ours) = (format!("gnu{i}"), format!("ours{i}"));
        let out = gnu_cp(
            scratch.path(),
            args.iter().copied().chain(["src", gnu.as_str()]),
        );
        assert!(
            out.status.success(),
            "GNU cp {args:?} failed: {}",
            describe(&out)
        );
        tree.restore_atimes();
        let out = Cp::new()
            .current_dir(scratch.path())
            .engine(engine)
            .args(args.iter())
            .args(["src", &ours])
            .run();
        assert_success(&out);
        tree.restore_atimes();
        let diffs = tree_diff(&scratch.join(&gnu), &scratch.join(&ours), *check);
        eprintln!(
            "ringio cp {args:?} vs GNU cp {args:?}: {} difference(s)",
            diffs.len()
        );
        for diff in diffs.iter().take(100) {
            eprintln!("  {diff}");
        }
        if !diffs.is_empty() {
            failed.push(format!("{args:?} (first: {})", diffs[0]));
        }
    }
    assert!(
        failed.is_empty(),
        "copies differ from GNU cp's for {failed:#?}"
    );
}

/// `cp SRC DIR` with DIR existing copies to DIR/basename(SRC), for files and directories, with
/// or without a trailing slash.
fn copies_into_existing_directory(engine: &str) {
    let scratch = Scratch::new();
    let tree = TreeSpec::small(4).build(&scratch.join("src"));
    write_file(scratch.join("file.txt"), "a file\n");
    fs::create_dir(scratch.join("into")).unwrap();
    fs::create_dir(scratch.join("into-slash")).unwrap();
    let cp = || Cp::new().current_dir(scratch.path()).engine(engine);

    assert_success(&cp().args(["-a", "src", "into"]).run());
    tree.restore_atimes();
    assert_trees_equal(&tree.root, &scratch.join("into/src"), Check::ARCHIVE);
    assert_success(&cp().args(["-r", "src/", "into-slash/"]).run());
    assert_trees_equal(&tree.root, &scratch.join("into-slash/src"), Check::CONTENT);
    assert_success(&cp().args(["file.txt", "into"]).run());
    assert_eq!(
        fs::read(scratch.join("into/file.txt")).unwrap(),
        b"a file\n"
    );
    let names: Vec<_> = fs::read_dir(scratch.join("into"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names.len(),
        2,
        "into/ holds {names:?}, expected src and file.txt"
    );
}

/// `cp SRC... DIR` copies each source into DIR; a file, a directory and a symlink together.
fn copies_several_sources_into_directory(engine: &str) {
    let scratch = Scratch::new();
    let a = TreeSpec::small(5).build(&scratch.join("a"));
    let b = TreeSpec::plain(6).build(&scratch.join("b"));
    write_file(scratch.join("c.bin"), vec![7u8; 70_000]);
    symlink("c.bin", scratch.join("c-link")).unwrap();
    fs::create_dir(scratch.join("out")).unwrap();
    let out = Cp::new()
        .current_dir(scratch.path())
        .engine(engine)
        .args(["-a", "a", "b", "c.bin", "c-link", "out"])
        .run();
    assert_success(&out);
    a.restore_atimes();
    b.restore_atimes();
    assert_trees_equal(&a.root, &scratch.join("out/a"), Check::ARCHIVE);
    assert_trees_equal(&b.root, &scratch.join("out/b"), Check::ARCHIVE);
    assert_eq!(
        fs::read(scratch.join("out/c.bin")).unwrap(),
        vec![7u8; 70_000]
    );
    assert_eq!(
        fs::read_link(scratch.join("out/c-link")).unwrap(),
        Path::new("c.bin")
    );

    // Several sources onto something that is not a directory: refused, nothing created.
    write_file(scratch.join("plain"), "x");
    let out = Cp::new()
        .current_dir(scratch.path())
        .engine(engine)
        .args(["c.bin", "c-link", "plain"])
        .run();
    assert_exit(&out, 1);
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("ringio: "),
        "{}",
        describe(&out)
    );
    assert_eq!(fs::read(scratch.join("plain")).unwrap(), b"x");
}

/// `-t DIR SRC...`, `--target-directory=DIR`, and `-T SRC DST` (DST is the copy itself, even
/// when it is an existing directory).
fn target_directory_forms(engine: &str) {
    let scratch = Scratch::new();
    let tree = TreeSpec::small(7).build(&scratch.join("src"));
    write_file(scratch.join("f"), "ff");
    for dir in ["t1", "t2", "t3"] {
        fs::create_dir(scratch.join(dir)).unwrap();
    }
    let cp = || Cp::new().current_dir(scratch.path()).engine(engine);

    assert_success(&cp().args(["-a", "-t", "t1", "src", "f"]).run());
    tree.restore_atimes();
    assert_trees_equal(&tree.root, &scratch.join("t1/src"), Check::ARCHIVE);
    assert_eq!(fs::read(scratch.join("t1/f")).unwrap(), b"ff");

    assert_success(&cp().args(["-r", "--target-directory=t2", "src"]).run());
    assert_trees_equal(&tree.root, &scratch.join("t2/src"), Check::CONTENT);

    // -T onto an existing (empty) directory fills that directory instead of making t3/src.
    assert_success(&cp().args(["-r", "-T", "src", "t3"]).run());
    assert_trees_equal(&tree.root, &scratch.join("t3"), Check::CONTENT);

    // -T onto a path that does not exist yet, and file onto file.
    assert_success(&cp().args(["-rT", "src", "t4"]).run());
    assert_trees_equal(&tree.root, &scratch.join("t4"), Check::CONTENT);
    write_file(scratch.join("g"), "old content, longer");
    assert_success(&cp().args(["-T", "f", "g"]).run());
    assert_eq!(fs::read(scratch.join("g")).unwrap(), b"ff");

    // -t with something that is not a directory.
    let out = cp().args(["-t", "f", "src"]).run();
    assert_exit(&out, 1);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("'f'"),
        "{}",
        describe(&out)
    );
}

/// A tree deeper than PATH_MAX (30 levels of 200-byte names, about 6 KB of path) copies
/// completely; GNU cp 9.1 fails there. Built and checked only through directory fds.
fn copies_paths_longer_than_path_max(engine: &str) {
    let scratch = Scratch::new();
    fs::create_dir(scratch.join("src")).unwrap();
    let levels = 30;
    let name = |level: usize| format!("level{level:02}-{}", "x".repeat(192));
    let mut rng = Prng::new(31);
    let mut mid = vec![0u8; 70_001];
    let mut bottom = vec![0u8; 300_007];
    rng.fill(&mut mid);
    rng.fill(&mut bottom);

    let mut dir = deep::Dir::open(&scratch.join("src"));
    for level in 0..levels {
        dir.mkdir(&name(level), 0o755);
        dir = dir.open_child(&name(level));
        if level == levels / 3 {
            dir.write_file("mid.bin", &mid, 0o644);
        }
    }
    dir.write_file("bottom.bin", &bottom, 0o640);
    dir.symlink("bottom.bin", "link");
    dir.set_times("bottom.bin", Ts::new(1_500_000_000, 123_456_789));
    drop(dir);

    let out = Cp::new()
        .current_dir(scratch.path())
        .engine(engine)
        .args(["-a", "src", "dst"])
        .run();
    assert_success(&out);

    let mut src = deep::Dir::open(&scratch.join("src"));
    let mut dst = deep::Dir::open(&scratch.join("dst"));
    let mut depth_bytes = "dst".len();
    for level in 0..levels {
        src = src.open_child(&name(level));
        dst = dst.open_child(&name(level));
        depth_bytes += 1 + name(level).len();
        if level == levels / 3 {
            assert!(
                dst.read_file("mid.bin") == mid,
                "mid.bin differs at level {level}"
            );
        }
    }
    assert!(
        depth_bytes > 4096,
        "the tree is only {depth_bytes} bytes deep"
    );
    assert!(dst.read_file("bottom.bin") == bottom, "bottom.bin differs");
    assert_eq!(dst.read_link("link"), "bottom.bin");
    let (s, d) = (src.stat("bottom.bin"), dst.stat("bottom.bin"));
    assert_eq!(d.st_mode & 0o7777, 0o640, "mode of bottom.bin");
    assert_eq!(
        (d.st_mtime, d.st_mtime_nsec),
        (1_500_000_000, 123_456_789),
        "mtime of bottom.bin"
    );
    assert_eq!(
        (s.st_uid, s.st_gid),
        (d.st_uid, d.st_gid),
        "owner of bottom.bin"
    );
}

/// A 0555 directory holding files and a 0555 subdirectory: `-a` fills it, then gives it its
/// mode and mtime. Run as root and, when root, also as an unprivileged user, for whom the
/// destination really is read-only once its mode is set.
fn read_only_directories_with_content(engine: &str) {
    let build = |scratch: &Scratch| {
        let ro = scratch.join("src/ro");
        write_file(ro.join("f1"), vec![1u8; 100]);
        write_file(ro.join("empty"), "");
        write_file(ro.join("sub/g"), vec![2u8; 5000]);
        write_file(ro.join("sub/rw/h"), vec![3u8; 65537]);
        chmod(ro.join("sub"), 0o555);
        chmod(&ro, 0o555);
        chmod(scratch.join("src"), 0o500);
        for (i, rel) in [
            "src/ro/f1",
            "src/ro/empty",
            "src/ro/sub/rw/h",
            "src/ro/sub/g",
        ]
        .iter()
        .chain(&["src/ro/sub/rw", "src/ro/sub", "src/ro", "src"])
        .enumerate()
        {
            let t = Ts::new(1_000_000_000 + i as i64 * 1000, 111_111_111 * i as i64);
            set_times(&scratch.join(rel), Some(t), Some(t)).unwrap();
        }
    };

    let scratch = Scratch::new();
    build(&scratch);
    let atimes = Atimes::record(&scratch.join("src"));
    let out = Cp::new()
        .current_dir(scratch.path())
        .engine(engine)
        .args(["-a", "src", "dst"])
        .run();
    assert_success(&out);
    atimes.restore();
    assert_trees_equal(&scratch.join("src"), &scratch.join("dst"), Check::ARCHIVE);

    if !is_root() {
        skip!("the copy as another user needs root");
    }
    let scratch = Scratch::new();
    build(&scratch);
    chown_tree(&scratch.join("src"), NOBODY.0, NOBODY.1);
    scratch.give_to(NOBODY.0, NOBODY.1);
    let atimes = Atimes::record(&scratch.join("src"));
    let out = Cp::new()
        .current_dir(scratch.path())
        .run_as(NOBODY.0, NOBODY.1)
        .engine(engine)
        .args(["-a", "src", "dst"])
        .run();
    assert_success(&out);
    atimes.restore();
    assert_trees_equal(&scratch.join("src"), &scratch.join("dst"), Check::ARCHIVE);
}

/// Files at buffer and chunk boundaries (±1 around 4 KiB ... 2 MiB) copy exactly with several
/// buffer sizes and thread counts.
fn chunk_boundaries_with_tuning_options(engine: &str) {
    let scratch = Scratch::new();
    let spec = TreeSpec {
        boundary_sizes: true,
        ..TreeSpec::small(9)
    };
    let tree = spec.build(&scratch.join("src"));
    let variants: &[&[&str]] = &[
        &["--bs", "4K"],
        &["--bs", "64K"],
        &["--bs", "1M"],
        &["--bs", "131072", "--threads", "1"],
        &["--threads", "8"],
    ];
    for (i, options) in variants.iter().enumerate() {
        let dst = scratch.join(format!("dst{i}"));
        let out = Cp::new()
            .engine(engine)
            .arg("-a")
            .args(options.iter())
            .arg(&tree.root)
            .arg(&dst)
            .run();
        assert_success(&out);
        tree.restore_atimes();
        eprintln!("checking the copy made with {options:?}");
        assert_trees_equal(&tree.root, &dst, Check::ARCHIVE);
    }
}

/// One file of 32 MiB + 4097 bytes given alone (the single-file path, not the tree walk), onto
/// a new name and into a directory, with and without -p.
fn single_big_file(engine: &str) {
    let scratch = Scratch::new();
    let mut content = vec![0u8; (32 << 20) + 4097];
    Prng::new(10).fill(&mut content);
    let src = scratch.join("big.bin");
    write_file(&src, &content);
    chmod(&src, 0o640);
    set_times(
        &src,
        Some(Ts::new(1_234_567_890, 5)),
        Some(Ts::new(1_234_567_891, 6)),
    )
    .unwrap();
    fs::create_dir(scratch.join("dir")).unwrap();

    for (args, dst) in [
        (vec!["big.bin", "copy.bin"], "copy.bin"),
        (vec!["-p", "big.bin", "dir"], "dir/big.bin"),
    ] {
        let out = Cp::new()
            .current_dir(scratch.path())
            .engine(engine)
            .args(&args)
            .run();
        assert_success(&out);
        let got = fs::read(scratch.join(dst)).unwrap();
        assert_eq!(got.len(), content.len(), "size of {dst}");
        assert!(got == content, "content of {dst} differs");
    }
    let m = fs::metadata(scratch.join("dir/big.bin")).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o640);
    assert_eq!(
        (m.mtime(), m.mtime_nsec()),
        (1_234_567_891, 6),
        "-p keeps the mtime"
    );
}

/// Files with holes at the start, in the middle, at the end, and nothing but a hole: the copy
/// reads back the same (zeros included) and has the same size.
fn sparse_files_copy_exactly(engine: &str) {
    use std::io::{Seek, SeekFrom, Write};
    let scratch = Scratch::new();
    let src = scratch.join("src");
    fs::create_dir(&src).unwrap();
    let mut rng = Prng::new(15);
    let mut data = |len: usize| {
        let mut buf = vec![0u8; len];
        rng.fill(&mut buf);
        buf
    };
    let create = |name: &str, pieces: &[(u64, Vec<u8>)], len: u64| {
        let mut f = fs::File::create(src.join(name)).unwrap();
        for (at, bytes) in pieces {
            f.seek(SeekFrom::Start(*at)).unwrap();
            f.write_all(bytes).unwrap();
        }
        f.set_len(len).unwrap();
    };
    create(
        "hole-middle",
        &[(0, data(1 << 20)), (11 << 20, data(4097))],
        (11 << 20) + 4097,
    );
    create("hole-start", &[(8 << 20, data(1))], (8 << 20) + 1);
    create("hole-end", &[(0, data(70_000))], 20 << 20);
    create("all-hole", &[], (5 << 20) + 3);
    create(
        "holes-everywhere",
        &[(4096, data(4096)), (3 << 20, data(65_537))],
        34 << 20,
    );
    let atimes = Atimes::record(&src);
    let cp = |args: &[&str]| {
        Cp::new()
            .current_dir(scratch.path())
            .engine(engine)
            .args(args)
            .run()
    };
    assert_success(&cp(&["-a", "src", "dst-a"]));
    atimes.restore();
    assert_trees_equal(&src, &scratch.join("dst-a"), Check::ARCHIVE);
    assert_success(&cp(&["-r", "src", "dst-r"]));
    assert_trees_equal(&src, &scratch.join("dst-r"), Check::CONTENT);
    assert_success(&cp(&["src/holes-everywhere", "single"]));
    assert_trees_equal(
        &src.join("holes-everywhere"),
        &scratch.join("single"),
        Check::CONTENT,
    );
}

/// Empty files, empty directories and nested empty directories, with -a and -r; an empty file
/// given alone.
fn empty_files_and_directories(engine: &str) {
    let scratch = Scratch::new();
    let src = scratch.join("src");
    write_file(src.join("empty"), "");
    write_file(src.join("a/empty2"), "");
    fs::create_dir_all(src.join("b/c/d/e")).unwrap();
    fs::create_dir_all(src.join("f")).unwrap();
    chmod(src.join("b/c"), 0o700);
    set_times(&src.join("b/c/d"), None, Some(Ts::new(3, 3))).unwrap();
    set_times(
        &src.join("empty"),
        None,
        Some(Ts::new(4_102_444_800, 999_999_999)),
    )
    .unwrap();
    let atimes = Atimes::record(&src);
    let cp = || Cp::new().current_dir(scratch.path()).engine(engine);

    assert_success(&cp().args(["-a", "src", "dst-a"]).run());
    atimes.restore();
    assert_trees_equal(&src, &scratch.join("dst-a"), Check::ARCHIVE);
    assert_success(&cp().args(["-r", "src", "dst-r"]).run());
    assert_trees_equal(&src, &scratch.join("dst-r"), Check::CONTENT);
    assert_success(&cp().args(["src/empty", "lone-empty"]).run());
    assert_eq!(fs::metadata(scratch.join("lone-empty")).unwrap().len(), 0);
    // An empty source directory copied alone.
    assert_success(&cp().args(["-r", "src/f", "lone-dir"]).run());
    assert!(fs::read_dir(scratch.join("lone-dir"))
        .unwrap()
        .next()
        .is_none());
}

/// -P (the default with -r), -L, -H, and following without -r, checked directly and against
/// GNU cp with the same arguments.
fn symlink_dereference_policies(engine: &str) {
    let scratch = Scratch::new();
    let s = scratch.join("s");
    write_file(s.join("dir/f"), "content of f\n");
    write_file(s.join("dir/inner/g"), "content of g\n");
    symlink("dir/f", s.join("lf")).unwrap();
    symlink("dir", s.join("ld")).unwrap();
    symlink(s.join("dir/f"), s.join("abs")).unwrap();
    symlink("s", scratch.join("top")).unwrap();
    symlink("s/dir/f", scratch.join("flink")).unwrap();
    let cp = |args: &[&str]| {
        Cp::new()
            .current_dir(scratch.path())
            .engine(engine)
            .args(args)
            .run()
    };
    let link = |p: &str| fs::read_link(scratch.join(p)).ok();
    let is_file = |p: &str| {
        fs::symlink_metadata(scratch.join(p))
            .map(|m| m.is_file())
            .unwrap_or(false)
    };
    let is_dir = |p: &str| {
        fs::symlink_metadata(scratch.join(p))
            .map(|m| m.is_dir())
            .unwrap_or(false)
    };

    let cases: &[&[&str]] = &[
        &["-r", "s", "o-r"],
        &["-rP", "s", "o-rP"],
        &["-rL", "s", "o-rL"],
        &["-r", "top", "o-top"],
        &["-rH", "top", "o-H"],
        &["-rL", "top", "o-LT"],
        &["-a", "top", "o-a-top"],
        &["flink", "o-f"],
        &["-P", "flink", "o-fP"],
        &["-d", "flink", "o-fd"],
        &["-L", "flink", "o-fL"],
    ];
    for &args in cases {
        assert_success(&cp(args));
    }
    // -P: links stay links with their exact targets.
    assert_eq!(link("o-r/lf"), Some("dir/f".into()));
    assert_eq!(link("o-r/ld"), Some("dir".into()));
    assert_eq!(link("o-r/abs"), Some(s.join("dir/f")));
    assert_trees_equal(&s, &scratch.join("o-rP"), Check::CONTENT);
    // -L: every link followed.
    assert!(
        is_file("o-rL/lf") && is_file("o-rL/abs") && is_dir("o-rL/ld"),
        "-rL kept links"
    );
    assert_eq!(
        fs::read(scratch.join("o-rL/ld/inner/g")).unwrap(),
        b"content of g\n"
    );
    assert!(
        is_dir("o-LT") && is_file("o-LT/lf"),
        "-rL on a link to a directory"
    );
    // A command-line symlink: copied as a link under -r and -a, followed under -H.
    assert_eq!(link("o-top"), Some("s".into()));
    assert_eq!(link("o-a-top"), Some("s".into()));
    assert!(is_dir("o-H"), "-H did not follow the command-line link");
    assert_eq!(
        link("o-H/lf"),
        Some("dir/f".into()),
        "-H followed a link inside the tree"
    );
    // Without -r a symlink source is followed, unless -P or -d.
    assert!(
        is_file("o-f") && is_file("o-fL"),
        "a file symlink without -r was not followed"
    );
    assert_eq!(fs::read(scratch.join("o-f")).unwrap(), b"content of f\n");
    assert_eq!(link("o-fP"), Some("s/dir/f".into()));
    assert_eq!(link("o-fd"), Some("s/dir/f".into()));

    if !gnu_cp_available() {
        skip!("GNU cp not found: not comparing with it");
    }
    for &args in cases {
        let ours = args[args.len() - 1];
        let gnu = format!("gnu-{ours}");
        let mut gnu_args: Vec<&str> = args[..args.len() - 1].to_vec();
        gnu_args.push(&gnu);
        let out = gnu_cp(scratch.path(), &gnu_args);
        assert!(
            out.status.success(),
            "GNU cp {gnu_args:?}: {}",
            describe(&out)
        );
        eprintln!("comparing with GNU cp {gnu_args:?}");
        assert_trees_equal(&scratch.join(&gnu), &scratch.join(ours), Check::CONTENT);
    }
}

/// Hard links within the tree: `-a` (and `--preserve=links`, and `-d`) keeps them linked; `-r`
/// alone makes separate files, as GNU cp does.
fn hard_links(engine: &str) {
    let scratch = Scratch::new();
    let src = scratch.join("src");
    write_file(src.join("a"), vec![9u8; 10_000]);
    write_file(src.join("d"), "separate");
    write_file(src.join("sub/e"), vec![5u8; 200_000]);
    fs::hard_link(src.join("a"), src.join("b")).unwrap();
    fs::hard_link(src.join("a"), src.join("sub/c")).unwrap();
    fs::hard_link(src.join("sub/e"), src.join("f")).unwrap();
    let atimes = Atimes::record(&src);
    let cp = |args: &[&str]| {
        Cp::new()
            .current_dir(scratch.path())
            .engine(engine)
            .args(args)
            .run()
    };
    let ino = |p: &str| fs::metadata(scratch.join(p)).unwrap().ino();

    assert_success(&cp(&["-a", "src", "o-a"]));
    atimes.restore();
    assert_trees_equal(&src, &scratch.join("o-a"), Check::ARCHIVE);
    for (args, dst) in [
        (&["-r", "--preserve=links", "src", "o-pl"][..], "o-pl"),
        (&["-rd", "src", "o-d"], "o-d"),
    ] {
        assert_success(&cp(args));
        assert_trees_equal(
            &src,
            &scratch.join(dst),
            Check {
                hard_links: true,
                ..Check::CONTENT
            },
        );
    }
    assert_success(&cp(&["-r", "src", "o-r"]));
    assert_trees_equal(&src, &scratch.join("o-r"), Check::CONTENT);
    assert_ne!(
        ino("o-r/a"),
        ino("o-r/b"),
        "-r without --preserve=links linked a and b"
    );
}

/// A fifo inside a tree is recreated as a fifo under -r and -a, never opened (which would
/// hang); -a keeps its mode and times.
fn fifo_copied_as_fifo(engine: &str) {
    let scratch = Scratch::new();
    let src = scratch.join("src");
    write_file(src.join("file"), "x");
    mkfifo(&src.join("pipe"), 0o640);
    set_times(&src.join("pipe"), Some(Ts::new(5, 5)), Some(Ts::new(6, 6))).unwrap();
    let atimes = Atimes::record(&src);
    for (flag, check) in [("-r", Check::CONTENT), ("-a", Check::ARCHIVE)] {
        let dst = format!("dst{flag}");
        let out = Cp::new()
            .current_dir(scratch.path())
            .engine(engine)
            .timeout(Duration::from_secs(20))
            .args([flag, "src", &dst])
            .run();
        assert_success(&out);
        atimes.restore();
        assert_trees_equal(&src, &scratch.join(&dst), check);
    }
}

/// The default replaces an existing file in place (same inode, truncated to the new length);
/// -n never touches it; -u replaces only an older one; a recursive copy merges into an existing
/// destination directory, keeping files the source lacks.
fn overwrite_policies(engine: &str) {
    let scratch = Scratch::new();
    let src = scratch.join("src");
    let long = "old content that is much longer than the new one\n".repeat(5000);
    for name in ["f", "g", "h", "i"] {
        write_file(src.join(name), format!("new {name}\n"));
        write_file(scratch.join("d").join(name), &long);
    }
    let cp = |args: &[&str]| {
        Cp::new()
            .current_dir(scratch.path())
            .engine(engine)
            .args(args)
            .run()
    };
    let read = |p: &str| fs::read_to_string(scratch.join(p)).unwrap();

    let inode = fs::metadata(scratch.join("d/f")).unwrap().ino();
    assert_success(&cp(&["src/f", "d/f"]));
    assert_eq!(
        read("d/f"),
        "new f\n",
        "the default did not replace (and truncate) d/f"
    );
    assert_eq!(
        fs::metadata(scratch.join("d/f")).unwrap().ino(),
        inode,
        "d/f got a new inode"
    );

    let out = cp(&["-n", "src/g", "d/g"]);
    assert!(out.stderr.is_empty(), "{}", describe(&out));
    assert_eq!(read("d/g"), long, "-n overwrote d/g");

    let now = now_secs();
    set_times(&src.join("h"), None, Some(Ts::new(now - 1000, 0))).unwrap();
    set_times(&scratch.join("d/h"), None, Some(Ts::new(now - 10, 0))).unwrap();
    set_times(&src.join("i"), None, Some(Ts::new(now - 10, 0))).unwrap();
    set_times(&scratch.join("d/i"), None, Some(Ts::new(now - 1000, 0))).unwrap();
    assert_success(&cp(&["-u", "src/h", "src/i", "d"]));
    assert_eq!(read("d/h"), long, "-u replaced a newer destination");
    assert_eq!(read("d/i"), "new i\n", "-u kept an older destination");

    // Merge: d2/src exists with an extra file and a stale f.
    write_file(scratch.join("d2/src/extra"), "keep me");
    write_file(scratch.join("d2/src/f"), &long);
    assert_success(&cp(&["-r", "src", "d2"]));
    assert_eq!(read("d2/src/extra"), "keep me");
    for name in ["f", "g", "h", "i"] {
        assert_eq!(
            read(&format!("d2/src/{name}")),
            read(&format!("src/{name}"))
        );
    }
}

/// An existing destination that cannot be opened for writing: refused by default
/// ("Permission denied", exit 1, untouched), replaced with -f. Needs an unprivileged user: the
/// child runs as nobody when the test runs as root.
fn force_replaces_unwritable_destination(engine: &str) {
    let scratch = Scratch::new();
    write_file(scratch.join("src"), "fresh\n");
    write_file(scratch.join("dst"), "stale and longer\n");
    chmod(scratch.join("dst"), 0o444);
    let cp = |args: &[&str]| {
        let cp = Cp::new()
            .current_dir(scratch.path())
            .engine(engine)
            .args(args);
        if is_root() {
            cp.run_as(NOBODY.0, NOBODY.1).run()
        } else {
            cp.run()
        }
    };
    if is_root() {
        chown_tree(scratch.path(), NOBODY.0, NOBODY.1);
        scratch.give_to(NOBODY.0, NOBODY.1);
    }
    let out = cp(&["src", "dst"]);
    assert_exit(&out, 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("ringio: cannot ")
            && err.contains("'dst'")
            && err.contains("Permission denied"),
        "{}",
        describe(&out)
    );
    assert_eq!(
        fs::read_to_string(scratch.join("dst")).unwrap(),
        "stale and longer\n"
    );

    assert_success(&cp(&["-f", "src", "dst"]));
    assert_eq!(fs::read_to_string(scratch.join("dst")).unwrap(), "fresh\n");
}

/// --preserve=LIST and --no-preserve=LIST select exactly the listed metadata.
fn preserve_lists(engine: &str) {
    let scratch = Scratch::new();
    let tree = TreeSpec::small(13).build(&scratch.join("src"));
    let cp = |args: &[&str]| {
        Cp::new()
            .current_dir(scratch.path())
            .engine(engine)
            .args(args)
            .run()
    };
    let now = now_secs();
    // Files whose source mtime is far from now: their copies show whether mtime was kept.
    let old_files: Vec<_> = tree
        .files
        .iter()
        .filter(|f| (fs::symlink_metadata(tree.root.join(f)).unwrap().mtime() - now).abs() > 86_400)
        .collect();
    assert!(old_files.len() > 10);
    let assert_fresh_mtimes = |dst: &str| {
        for f in &old_files {
            let m = fs::symlink_metadata(scratch.join(dst).join(f)).unwrap();
            assert!(
                (m.mtime() - now).abs() < 3600,
                "{dst}/{f:?} kept its mtime {}",
                m.mtime()
            );
        }
    };

    assert_success(&cp(&["-r", "--preserve=mode", "src", "o-mode"]));
    assert_trees_equal(
        &tree.root,
        &scratch.join("o-mode"),
        Check {
            mode: true,
            ..Check::CONTENT
        },
    );
    assert_fresh_mtimes("o-mode");
    tree.restore_atimes();

    assert_success(&cp(&["-r", "--preserve=timestamps", "src", "o-times"]));
    tree.restore_atimes();
    assert_trees_equal(
        &tree.root,
        &scratch.join("o-times"),
        Check {
            mtime: true,
            atime: true,
            ..Check::CONTENT
        },
    );

    if is_root() {
        assert_success(&cp(&["-r", "--preserve=ownership", "src", "o-owner"]));
        assert_trees_equal(
            &tree.root,
            &scratch.join("o-owner"),
            Check {
                ownership: true,
                ..Check::CONTENT
            },
        );
        assert_fresh_mtimes("o-owner");
        tree.restore_atimes();
    }

    assert_success(&cp(&["-a", "--no-preserve=timestamps", "src", "o-a-nots"]));
    assert_trees_equal(
        &tree.root,
        &scratch.join("o-a-nots"),
        Check {
            mtime: false,
            atime: false,
            ..Check::ARCHIVE
        },
    );
    assert_fresh_mtimes("o-a-nots");
    tree.restore_atimes();

    assert_success(&cp(&["-r", "--preserve", "src", "o-default"]));
    tree.restore_atimes();
    assert_trees_equal(&tree.root, &scratch.join("o-default"), Check::PRESERVE_P);

    assert_success(&cp(&["-rp", "src", "o-p"]));
    tree.restore_atimes();
    assert_trees_equal(&tree.root, &scratch.join("o-p"), Check::PRESERVE_P);

    assert_success(&cp(&["-r", "--preserve=all", "src", "o-all"]));
    tree.restore_atimes();
    assert_trees_equal(&tree.root, &scratch.join("o-all"), Check::ARCHIVE);

    // -p on single files: a setuid file keeps its mode and times.
    write_file(scratch.join("suid"), "#!/bin/true\n");
    chmod(scratch.join("suid"), 0o4755);
    set_times(
        &scratch.join("suid"),
        Some(Ts::new(7, 7)),
        Some(Ts::new(8, 8)),
    )
    .unwrap();
    assert_success(&cp(&["-p", "suid", "suid-copy"]));
    let m = fs::metadata(scratch.join("suid-copy")).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o4755, "-p lost the setuid bit");
    assert_eq!(
        (m.mtime(), m.mtime_nsec(), m.atime(), m.atime_nsec()),
        (8, 8, 7, 7)
    );
}

/// Extended attributes: kept by -a and --preserve=xattr, not by -r (as GNU cp).
fn xattrs(engine: &str) {
    let scratch = Scratch::new();
    let src = scratch.join("src");
    write_file(src.join("file"), "x");
    fs::create_dir(src.join("dir")).unwrap();
    for (p, value) in [
        ("file", &b"file value"[..]),
        ("dir", b"dir value"),
        ("", b"root value"),
    ] {
        if let Err(e) = set_xattr(&src.join(p), "user.ringio.test", value) {
            skip!("cannot set user xattrs here: {e}");
        }
    }
    let cp = |args: &[&str]| {
        Cp::new()
            .current_dir(scratch.path())
            .engine(engine)
            .args(args)
            .run()
    };
    for (args, dst) in [
        (&["-a", "src", "o-a"][..], "o-a"),
        (&["-r", "--preserve=xattr", "src", "o-x"], "o-x"),
    ] {
        assert_success(&cp(args));
        assert_trees_equal(
            &src,
            &scratch.join(dst),
            Check {
                xattrs: true,
                ..Check::CONTENT
            },
        );
        assert_eq!(
            get_xattr(&scratch.join(dst).join("file"), "user.ringio.test").unwrap(),
            b"file value"
        );
    }
    assert_success(&cp(&["-r", "src", "o-r"]));
    assert!(
        get_xattr(&scratch.join("o-r/file"), "user.ringio.test").is_err(),
        "-r copied an xattr"
    );
}

/// A user who is not root copies the `user.*` attributes of a read-only file and directory
/// with -a, as GNU cp does (the kernel lets only a writer set them, the owner included).
fn xattrs_of_read_only_entries_as_a_user(engine: &str) {
    let scratch = Scratch::new();
    if !read_only_with_xattrs(&scratch.join("src")) {
        skip!("no user xattrs on this filesystem");
    }
    // As root, the copies are nobody's (root may write anything); otherwise the caller's.
    if is_root() {
        chown_tree(scratch.path(), NOBODY.0, NOBODY.1);
    }
    let mut cp = Cp::new()
        .current_dir(scratch.path())
        .engine(engine)
        .args(["-a", "src", "copy"]);
    if is_root() {
        cp = cp.run_as(NOBODY.0, NOBODY.1);
    }
    assert_success(&cp.run());
    assert_read_only_with_xattrs(&scratch.join("copy"), "ringio cp -a");
    if gnu_cp_available() {
        let mut gnu = Command::new("cp");
        gnu.args(["-a", "src", "gnu"]).current_dir(scratch.path());
        if is_root() {
            as_nobody(&mut gnu);
        }
        assert!(gnu.status().expect("run GNU cp").success(), "GNU cp -a");
        assert_read_only_with_xattrs(&scratch.join("gnu"), "GNU cp -a");
    }
}

/// -v names every copied file on stdout; without -v stdout stays empty. --progress does not
/// disturb the copy.
fn verbose_and_progress(engine: &str) {
    let scratch = Scratch::new();
    let tree = TreeSpec::plain(14).build(&scratch.join("src"));
    let cp = |args: &[&str]| {
        Cp::new()
            .current_dir(scratch.path())
            .engine(engine)
            .args(args)
            .run()
    };

    let out = cp(&["-r", "src", "quiet"]);
    assert_success(&out);
    assert!(
        out.stdout.is_empty(),
        "stdout without -v: {}",
        describe(&out)
    );

    // -v may add notes on stderr (a summary, engine fallbacks), but no errors.
    let out = cp(&["-rv", "src", "loud"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("cannot"),
        "{}",
        describe(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    for f in &tree.files {
        let name = f.file_name().unwrap().to_string_lossy();
        assert!(
            stdout.contains(&*name),
            "-v output does not name {f:?}:\n{stdout}"
        );
    }
    assert_trees_equal(&tree.root, &scratch.join("loud"), Check::CONTENT);

    let out = cp(&["-r", "--progress", "src", "progress"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_trees_equal(&tree.root, &scratch.join("progress"), Check::CONTENT);
}
