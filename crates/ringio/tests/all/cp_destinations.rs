//! What cp opens: an existing destination is opened as it is (a symlink is written through, a
//! FIFO or a device is written into), a special source is read as data without -r, dangling
//! and just-created symlinks are refused, and a deep tree copies under a small descriptor limit.
//! Every case runs on every engine; nothing here touches the machine's /dev.

use std::fs;
use std::io::Read;
use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt};
use std::path::Path;
use std::process::Output;

use crate::common::*;

engine_tests!(
    writes_through_a_symlink_to_a_file,
    writes_through_symlinks_inside_a_tree,
    writes_into_a_pipe_named_by_proc_self_fd,
    writes_into_a_fifo,
    reads_special_sources_as_data,
    refuses_dangling_symlinks,
    refuses_to_replace_symlinks_to_directories,
    update_and_preserve_judge_the_target,
    archive_onto_a_multiply_linked_file_makes_a_new_inode,
    operands_of_one_name_settle_in_order,
    atomic_through_a_symlink_and_onto_a_fifo,
    deep_tree_under_a_small_descriptor_limit,
);

fn cp(engine: &str, args: &[&str], dir: &Path) -> Output {
    Cp::new().engine(engine).args(args).current_dir(dir).run()
}

fn is_symlink(path: &Path) -> bool {
    fs::symlink_metadata(path)
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(false)
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap()
}

/// `cp foo link` writes foo's bytes into link's target (same inode) and keeps the symlink.
fn writes_through_a_symlink_to_a_file(engine: &str) {
    let s = Scratch::new();
    write_file(s.join("foo"), "new content\n");
    write_file(s.join("real"), "old, and longer than the new content\n");
    symlink("real", s.join("link")).unwrap();
    let ino = fs::metadata(s.join("real")).unwrap().ino();
    assert_success(&cp(engine, &["foo", "link"], s.path()));
    assert!(is_symlink(&s.join("link")));
    assert_eq!(read(&s.join("real")), "new content\n");
    assert_eq!(fs::metadata(s.join("real")).unwrap().ino(), ino);
}

/// `cp -r src/. dst` where dst/f is a symlink to a file writes through it, under every
/// recursive option.
fn writes_through_symlinks_inside_a_tree(engine: &str) {
    for opts in [&["-r"][..], &["-a"], &["-rP"], &["-rL"], &["-rd"]] {
        let s = Scratch::new();
        fs::create_dir_all(s.join("src/sub")).unwrap();
        fs::create_dir(s.join("dst")).unwrap();
        write_file(s.join("src/f"), "tree content\n");
        write_file(s.join("src/sub/g"), "deeper\n");
        write_file(s.join("target"), "old\n");
        symlink("../target", s.join("dst/f")).unwrap();
        let mut args = opts.to_vec();
        args.extend(["src/.", "dst"]);
        assert_success(&cp(engine, &args, s.path()));
        assert!(
            is_symlink(&s.join("dst/f")),
            "{opts:?}: the link was replaced"
        );
        assert_eq!(read(&s.join("target")), "tree content\n", "{opts:?}");
        assert_eq!(read(&s.join("dst/sub/g")), "deeper\n", "{opts:?}");
    }
}

/// `cp foo OUT` where OUT is a symlink to /proc/self/fd/1 writes to the copy's stdout (a
/// pipe here), as `cp foo /dev/stdout` does.
fn writes_into_a_pipe_named_by_proc_self_fd(engine: &str) {
    let s = Scratch::new();
    let content: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    fs::write(s.join("foo"), &content).unwrap();
    symlink("/proc/self/fd/1", s.join("out")).unwrap();
    let out = cp(engine, &["foo", "out"], s.path());
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(out.stdout.len(), content.len());
    assert!(out.stdout == content, "stdout differs from the source");
    assert!(is_symlink(&s.join("out")));
}

/// Reads everything written into the FIFO at `path` on another thread.
fn drain_fifo(path: &Path) -> std::thread::JoinHandle<Vec<u8>> {
    let path = path.to_owned();
    std::thread::spawn(move || {
        let mut got = Vec::new();
        fs::File::open(path).unwrap().read_to_end(&mut got).unwrap();
        got
    })
}

/// Feeds `data` into the FIFO at `path` on another thread.
fn feed_fifo(path: &Path, data: Vec<u8>) -> std::thread::JoinHandle<()> {
    let path = path.to_owned();
    std::thread::spawn(move || {
        use std::io::Write;
        fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .write_all(&data)
            .unwrap();
    })
}

/// `cp foo ff` where ff is a FIFO writes into the pipe; ff stays a FIFO.
fn writes_into_a_fifo(engine: &str) {
    let s = Scratch::new();
    write_file(s.join("foo"), "through the pipe\n");
    mkfifo(&s.join("ff"), 0o644);
    let reader = drain_fifo(&s.join("ff"));
    assert_success(&cp(engine, &["foo", "ff"], s.path()));
    assert_eq!(reader.join().unwrap(), b"through the pipe\n");
    assert!(fs::symlink_metadata(s.join("ff"))
        .unwrap()
        .file_type()
        .is_fifo());
}

/// Without -r a FIFO (or a symlink to one) is read as data into a regular file; under -r it is
/// recreated, unless --copy-contents. A character device node (made here, root only) is read
/// the same way.
fn reads_special_sources_as_data(engine: &str) {
    let s = Scratch::new();
    mkfifo(&s.join("fifo"), 0o644);
    symlink("fifo", s.join("fifo-link")).unwrap();
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 241) as u8).collect();

    let writer = feed_fifo(&s.join("fifo"), data.clone());
    assert_success(&cp(engine, &["fifo-link", "F"], s.path()));
    writer.join().unwrap();
    assert!(fs::symlink_metadata(s.join("F")).unwrap().is_file());
    assert!(fs::read(s.join("F")).unwrap() == data);

    // -r recreates the FIFO (no reader needed: it is never opened).
    assert_success(&cp(engine, &["-r", "fifo", "G"], s.path()));
    assert!(fs::symlink_metadata(s.join("G"))
        .unwrap()
        .file_type()
        .is_fifo());

    let writer = feed_fifo(&s.join("fifo"), b"contents\n".to_vec());
    assert_success(&cp(
        engine,
        &["-r", "--copy-contents", "fifo", "H"],
        s.path(),
    ));
    writer.join().unwrap();
    assert_eq!(read(&s.join("H")), "contents\n");

    if !is_root() {
        skip!("character device source: mknod needs root");
    }
    let node = cstring(&s.join("null"));
    // SAFETY: mknod on a NUL-terminated path inside the scratch directory.
    let rc = unsafe { libc::mknod(node.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    assert_eq!(rc, 0, "mknod: {}", std::io::Error::last_os_error());
    write_file(s.join("E"), "not empty\n");
    assert_success(&cp(engine, &["null", "E"], s.path()));
    let meta = fs::symlink_metadata(s.join("E")).unwrap();
    assert!(meta.is_file() && meta.len() == 0, "cp null E must empty E");
}

/// A dangling destination symlink is refused (also with -f and -n), is written through under
/// POSIXLY_CORRECT, and is replaced by --remove-destination.
fn refuses_dangling_symlinks(engine: &str) {
    let s = Scratch::new();
    write_file(s.join("foo"), "data\n");
    symlink("nowhere", s.join("dangle")).unwrap();
    for extra in [&[][..], &["-f"], &["-n"]] {
        let mut args = extra.to_vec();
        args.extend(["foo", "dangle"]);
        let out = cp(engine, &args, s.path());
        assert_exit(&out, 1);
        assert_eq!(
            stderr_lines(&out),
            ["ringio: not writing through dangling symlink 'dangle'"],
            "{extra:?}"
        );
        assert!(is_symlink(&s.join("dangle")) && !s.join("nowhere").exists());
    }
    let out = Cp::new()
        .engine(engine)
        .args(["foo", "dangle"])
        .current_dir(s.path())
        .env("POSIXLY_CORRECT", "1")
        .run();
    assert_success(&out);
    assert!(is_symlink(&s.join("dangle")));
    assert_eq!(read(&s.join("nowhere")), "data\n");

    symlink("elsewhere", s.join("dangle2")).unwrap();
    assert_success(&cp(
        engine,
        &["--remove-destination", "foo", "dangle2"],
        s.path(),
    ));
    assert!(fs::symlink_metadata(s.join("dangle2")).unwrap().is_file());
}

/// A symlink to a directory is never replaced: not by `cp -T`, not inside a tree.
fn refuses_to_replace_symlinks_to_directories(engine: &str) {
    let s = Scratch::new();
    write_file(s.join("foo"), "data\n");
    fs::create_dir(s.join("d")).unwrap();
    symlink("d", s.join("dlink")).unwrap();
    let out = cp(engine, &["-T", "foo", "dlink"], s.path());
    assert_exit(&out, 1);
    assert_eq!(
        stderr_lines(&out),
        ["ringio: cannot overwrite directory 'dlink' with non-directory"]
    );
    assert!(is_symlink(&s.join("dlink")));

    fs::create_dir_all(s.join("src/e")).unwrap();
    write_file(s.join("src/f"), "file\n");
    write_file(s.join("src/e/x"), "x\n");
    fs::create_dir_all(s.join("dst")).unwrap();
    symlink("../d", s.join("dst/f")).unwrap();
    symlink("../d", s.join("dst/e")).unwrap();
    let out = cp(engine, &["-r", "src/.", "dst"], s.path());
    assert_exit(&out, 1);
    let mut lines = stderr_lines(&out);
    lines.sort();
    assert_eq!(
        lines,
        [
            // GNU cp names the entries of `src/.` copied into `dst` as `dst/./NAME` too.
            "ringio: cannot overwrite directory 'dst/./f' with non-directory",
            "ringio: cannot overwrite non-directory 'dst/./e' with directory 'src/./e'",
        ]
    );
    assert!(is_symlink(&s.join("dst/f")) && is_symlink(&s.join("dst/e")));
    assert_eq!(fs::read_dir(s.join("d")).unwrap().count(), 0);
}

/// -u compares against the link's target, and -p sets the target's mode and times.
fn update_and_preserve_judge_the_target(engine: &str) {
    let s = Scratch::new();
    write_file(s.join("foo"), "newer\n");
    chmod(s.join("foo"), 0o640);
    write_file(s.join("real"), "older\n");
    set_times(
        &s.join("real"),
        None,
        Some(Ts {
            sec: 946_684_800,
            nsec: 0,
        }),
    )
    .unwrap();
    symlink("real", s.join("link")).unwrap();
    // The link itself is newer than foo; its target is not.
    assert_success(&cp(engine, &["-u", "foo", "link"], s.path()));
    assert_eq!(read(&s.join("real")), "newer\n");

    set_times(
        &s.join("foo"),
        None,
        Some(Ts {
            sec: 1_000_000_000,
            nsec: 123,
        }),
    )
    .unwrap();
    assert_success(&cp(engine, &["-p", "foo", "link"], s.path()));
    assert!(is_symlink(&s.join("link")));
    let real = fs::metadata(s.join("real")).unwrap();
    assert_eq!(real.mode() & 0o7777, 0o640);
    assert_eq!((real.mtime(), real.mtime_nsec()), (1_000_000_000, 123));
}

/// `cp -a` onto a file with two links replaces the named entry and leaves the other link's
/// content alone; plain cp writes into the shared inode.
fn archive_onto_a_multiply_linked_file_makes_a_new_inode(engine: &str) {
    let s = Scratch::new();
    write_file(s.join("foo"), "copied\n");
    write_file(s.join("h1"), "shared\n");
    fs::hard_link(s.join("h1"), s.join("h2")).unwrap();
    assert_success(&cp(engine, &["-a", "foo", "h1"], s.path()));
    assert_eq!(read(&s.join("h1")), "copied\n");
    assert_eq!(read(&s.join("h2")), "shared\n");
    assert_eq!(fs::metadata(s.join("h2")).unwrap().nlink(), 1);

    fs::hard_link(s.join("h2"), s.join("h3")).unwrap();
    assert_success(&cp(engine, &["foo", "h2"], s.path()));
    assert_eq!(read(&s.join("h3")), "copied\n");
}

/// `cp a/f b/f dst/`: the first operand wins and the second is "just created"; a symlink the
/// run created is never written through.
fn operands_of_one_name_settle_in_order(engine: &str) {
    let s = Scratch::new();
    for d in ["a", "b", "dst", "c"] {
        fs::create_dir(s.join(d)).unwrap();
    }
    write_file(s.join("a/f"), "from a\n");
    write_file(s.join("b/f"), "from b\n");
    let out = cp(engine, &["a/f", "b/f", "dst/"], s.path());
    assert_exit(&out, 1);
    assert_eq!(
        stderr_lines(&out),
        ["ringio: will not overwrite just-created 'dst/f' with 'b/f'"]
    );
    assert_eq!(read(&s.join("dst/f")), "from a\n");

    symlink("f", s.join("a/1")).unwrap();
    write_file(s.join("b/1"), "file\n");
    let out = cp(engine, &["-dR", "a/1", "b/1", "c"], s.path());
    assert_exit(&out, 1);
    assert_eq!(
        stderr_lines(&out),
        ["ringio: will not copy 'b/1' through just-created symlink 'c/1'"]
    );
    assert!(is_symlink(&s.join("c/1")) && !s.join("c/f").exists());
}

/// `--atomic` through a symlink renames a complete file over the target and keeps the link;
/// onto a FIFO it is refused and nothing is touched.
fn atomic_through_a_symlink_and_onto_a_fifo(engine: &str) {
    let s = Scratch::new();
    fs::create_dir(s.join("elsewhere")).unwrap();
    write_file(s.join("foo"), "atomic\n");
    write_file(s.join("elsewhere/real"), "old\n");
    symlink("elsewhere/real", s.join("link")).unwrap();
    assert_success(&cp(engine, &["--atomic", "foo", "link"], s.path()));
    assert!(is_symlink(&s.join("link")));
    assert_eq!(read(&s.join("elsewhere/real")), "atomic\n");
    let names = |d: &str| -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(s.join(d))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names("elsewhere"), ["real"], "a temporary was left behind");

    mkfifo(&s.join("ff"), 0o600);
    let out = cp(engine, &["--atomic", "foo", "ff"], s.path());
    assert_exit(&out, 1);
    assert_eq!(
        stderr_lines(&out),
        ["ringio: cannot replace 'ff' atomically: not a regular file"]
    );
    assert!(fs::symlink_metadata(s.join("ff"))
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(names("."), ["elsewhere", "ff", "foo", "link"]);
}

/// A 1,000-level tree copies with all its metadata under RLIMIT_NOFILE 16 (soft and hard):
/// ancestors' descriptors are released and reopened, checked, one component at a time.
fn deep_tree_under_a_small_descriptor_limit(engine: &str) {
    let s = Scratch::new();
    let top = s.join("deep");
    fs::create_dir(&top).unwrap();
    let mut dir = deep::Dir::open(&top);
    for level in 0..1000 {
        if level % 100 == 0 {
            dir.write_file(&format!("f{level}"), format!("{level}\n").as_bytes(), 0o644);
        }
        dir.mkdir("d", 0o755);
        dir = dir.open_child("d");
    }
    dir.write_file("bottom", b"the end\n", 0o600);
    let out = Cp::new()
        .engine(engine)
        .args(["-a", "deep", "copy"])
        .current_dir(s.path())
        .nofile_limit(16)
        .run();
    assert_success(&out);
    let out = ringio([
        "verify".as_ref(),
        top.as_os_str(),
        s.join("copy").as_os_str(),
    ]);
    assert_success_or_report(&out);
}

fn assert_success_or_report(out: &Output) {
    assert!(out.status.success(), "verify: {}", describe(out));
}
