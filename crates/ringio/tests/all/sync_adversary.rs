//! `ringio sync` under attack: each test pins a defect once found by trying to break the sync
//! engine (data loss, wrong results, wrong output), with what rsync does in the same case.

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

fn sync(cwd: &Path, args: &[&str]) -> Output {
    Cp::bare().arg("sync").args(args).current_dir(cwd).run()
}

/// Several `SRC/` operands into one DEST with --delete: rsync merges their listings, so what
/// one source holds is never deleted for another. ringio walks each operand with deletion of
/// its own, and the second deletes what the first just made (with --delete-after, everything).
#[test]
fn several_contents_sources_with_delete_keep_each_others_files() {
    for when in ["--delete", "--delete-after", "--delete-before"] {
        let dir = Scratch::new();
        for (src, name) in [("s1", "a"), ("s2", "b")] {
            fs::create_dir_all(dir.join(format!("{src}/sub"))).unwrap();
            write_file(dir.join(format!("{src}/{name}")), name);
            write_file(dir.join(format!("{src}/sub/{name}")), name);
        }
        fs::create_dir(dir.join("d")).unwrap();
        let out = sync(dir.path(), &["-a", when, "s1/", "s2/", "d/"]);
        assert_success(&out);
        for kept in ["a", "b", "sub/a", "sub/b"] {
            assert!(
                dir.join("d").join(kept).exists(),
                "{when}: d/{kept} deleted\n{}",
                describe(&out)
            );
        }
    }
}

/// `SRC` (a directory, no slash) beside `SRC2/` with --delete: DEST/SRC is part of the
/// transfer and stays, as rsync keeps it.
#[test]
fn a_directory_operand_beside_a_contents_operand_survives_delete() {
    let dir = Scratch::new();
    fs::create_dir_all(dir.join("s1/sub")).unwrap();
    fs::create_dir_all(dir.join("s2")).unwrap();
    write_file(dir.join("s1/sub/x"), "x");
    write_file(dir.join("s2/b"), "b");
    fs::create_dir(dir.join("d")).unwrap();
    let out = sync(dir.path(), &["-a", "--delete", "s1", "s2/", "d/"]);
    assert_success(&out);
    assert!(dir.join("d/s1/sub/x").exists(), "{}", describe(&out));
    assert!(dir.join("d/b").exists(), "{}", describe(&out));
}

/// --remove-source-files where SRC and DEST are the same file (named twice, or through a
/// symlink): rsync refuses ("Skipping sender remove of destination file", exit 23); ringio
/// removes the only copy.
#[test]
fn remove_source_files_onto_itself_keeps_the_file() {
    for args in [
        &["-a", "--remove-source-files", "s/f", "s/f"][..],
        &["-a", "--remove-source-files", "s/", "s/"][..],
        &["-a", "--remove-source-files", "alias/", "s/"][..],
    ] {
        let dir = Scratch::new();
        fs::create_dir(dir.join("s")).unwrap();
        write_file(dir.join("s/f"), "the only copy");
        symlink("s", dir.join("alias")).unwrap();
        let out = sync(dir.path(), args);
        assert!(
            dir.join("s/f").exists(),
            "{args:?} removed the only copy\n{}",
            describe(&out)
        );
        assert_exit(&out, 23);
    }
}

/// --ignore-existing leaves whatever exists: a file where the source has a directory too
/// (rsync skips the directory, and fails its contents with "Not a directory", exit 23).
#[test]
fn ignore_existing_keeps_a_file_where_the_source_has_a_directory() {
    let dir = Scratch::new();
    fs::create_dir_all(dir.join("s/x")).unwrap();
    write_file(dir.join("s/x/in"), "in");
    fs::create_dir(dir.join("d")).unwrap();
    write_file(dir.join("d/x"), "precious");
    let out = sync(dir.path(), &["-a", "--ignore-existing", "s/", "d/"]);
    assert_eq!(
        fs::read(dir.join("d/x")).ok().as_deref(),
        Some(&b"precious"[..]),
        "{}",
        describe(&out)
    );
}

/// A negative --max-delete allows no deletion in rsync 3.5 (exit 25); ringio reads it as
/// "no limit" and deletes everything extraneous.
#[test]
fn a_negative_max_delete_deletes_nothing() {
    let dir = Scratch::new();
    fs::create_dir(dir.join("s")).unwrap();
    fs::create_dir(dir.join("d")).unwrap();
    write_file(dir.join("d/x"), "x");
    let out = sync(
        dir.path(),
        &["-a", "--delete", "--max-delete=-1", "s/", "d/"],
    );
    assert!(dir.join("d/x").exists(), "{}", describe(&out));
    assert_exit(&out, 25);
}

/// -x: a mount point below SRC is made, empty, and nothing below it at DEST is deleted. The
/// sync engine never reads the option: it crosses the mount and deletes below it.
#[test]
fn one_file_system_stops_at_a_mount_point() {
    let dir = Scratch::new();
    fs::create_dir_all(dir.join("s/mnt")).unwrap();
    fs::create_dir_all(dir.join("d/mnt")).unwrap();
    write_file(dir.join("d/mnt/dst-only"), "keep");
    let mnt = dir.join("s/mnt");
    let _mount = match TmpfsMount::new(&mnt, "1m") {
        Ok(m) => m,
        Err(why) => skip!("{why}"),
    };
    write_file(mnt.join("inner"), "other filesystem");
    let out = sync(dir.path(), &["-a", "-x", "--delete", "s/", "d/"]);
    assert_success(&out);
    assert!(!dir.join("d/mnt/inner").exists(), "{}", describe(&out));
    assert!(dir.join("d/mnt/dst-only").exists(), "{}", describe(&out));
}

/// -H with more than one worker: a later name of a group is linked to the first name's
/// destination before that is written, so it ends up a separate copy (first sync) or linked
/// to the old file, with the old data (resync). With --threads 1 every pair is linked.
#[test]
fn hard_links_made_by_several_workers_stay_linked() {
    let dir = Scratch::new();
    let pairs = 16;
    let make = |gen: u8| {
        for i in 0..pairs {
            let a = dir.join(format!("s/p{i}/a"));
            let b = dir.join(format!("s/p{i}/b"));
            fs::create_dir_all(&a).unwrap();
            fs::create_dir_all(&b).unwrap();
            let _ = fs::remove_file(a.join("f"));
            let _ = fs::remove_file(b.join("g"));
            write_file(a.join("f"), vec![gen; 1_000_000 + usize::from(gen)]);
            fs::hard_link(a.join("f"), b.join("g")).unwrap();
        }
    };
    let check = |out: &Output, what: &str| {
        for i in 0..pairs {
            let f = fs::metadata(dir.join(format!("d/p{i}/a/f"))).unwrap();
            let g = fs::metadata(dir.join(format!("d/p{i}/b/g"))).unwrap();
            let src = fs::read(dir.join(format!("s/p{i}/b/g"))).unwrap();
            assert_eq!(
                fs::read(dir.join(format!("d/p{i}/b/g"))).unwrap(),
                src,
                "{what}: p{i}/b/g holds other data\n{}",
                describe(out)
            );
            assert_eq!(
                (f.dev(), f.ino()),
                (g.dev(), g.ino()),
                "{what}: p{i} not linked\n{}",
                describe(out)
            );
        }
    };
    make(1);
    let out = sync(dir.path(), &["-aH", "--threads", "4", "s/", "d/"]);
    assert_success(&out);
    check(&out, "first sync");
    make(2);
    let out = sync(dir.path(), &["-aH", "--threads", "4", "s/", "d/"]);
    assert_success(&out);
    check(&out, "resync");
}

/// -R with DEST inside SRC: rsync lists SRC first and copies it once; ringio has no overlap
/// check on the -R path and walks into what it makes, nesting until it runs out of
/// descriptors.
#[test]
fn relative_with_dest_inside_source_does_not_recurse() {
    let dir = Scratch::new();
    fs::create_dir_all(dir.join("s/a")).unwrap();
    write_file(dir.join("s/a/f"), "f");
    // Few descriptors, so that the runaway ends soon (it nests until it runs out of them).
    let out = Cp::bare()
        .arg("sync")
        .args(["-aR", "s", "s/dst"])
        .current_dir(dir.path())
        .nofile_limit(64)
        .timeout(Duration::from_secs(60))
        .run();
    let head = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(400)]).into_owned();
    assert!(
        !dir.join("s/dst/s/dst/s").exists(),
        "nested copies of DEST in DEST: {:?}\n{}",
        out.status,
        head(&out.stderr)
    );
}

/// -n names what a real run deletes to make room for an entry (a directory in the way, under
/// --force or --delete); ringio's dry run leaves these lines out.
#[test]
fn a_dry_run_names_the_deletions_that_make_room() {
    let dir = Scratch::new();
    fs::create_dir(dir.join("s")).unwrap();
    symlink("target", dir.join("s/l")).unwrap();
    fs::create_dir_all(dir.join("d/l")).unwrap();
    write_file(dir.join("d/l/inner"), "x");
    let dry = sync(dir.path(), &["-ain", "--force", "s/", "d/"]);
    assert_success(&dry);
    let dry_text = String::from_utf8_lossy(&dry.stdout).into_owned();
    assert!(
        dry_text.contains("*deleting   l/inner"),
        "dry run:\n{dry_text}"
    );
}

/// Names are printed as rsync prints them: a newline, and bytes that are not printable in
/// the locale, as `\#ooo` (here in the C locale), so one entry is one line.
#[test]
fn names_are_escaped_as_rsync_escapes_them() {
    let dir = Scratch::new();
    fs::create_dir(dir.join("s")).unwrap();
    write_file(dir.join("s/a\nb"), "x");
    let out = sync(dir.path(), &["-ai", "s/", "d/"]);
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains(">f+++++++++ a\\#012b\n"), "{text}");
}

/// -L with a dangling symlink: rsync says "symlink has no referent" and exits 23; ringio
/// calls it a vanished file and exits 24 (which scripts commonly treat as harmless).
#[test]
fn a_dangling_symlink_under_copy_links_exits_23() {
    let dir = Scratch::new();
    fs::create_dir(dir.join("s")).unwrap();
    symlink("missing", dir.join("s/dangling")).unwrap();
    let out = sync(dir.path(), &["-aL", "s/", "d/"]);
    assert_exit(&out, 23);
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(text.contains("symlink has no referent"), "{text}");
}

/// A closed stderr (`ringio sync ... 2>&1 | head -1`): the error line fails with EPIPE and
/// eprintln! panics: in the main thread the run dies with 101 (a Rust panic, not an rsync
/// code); in a worker the pool never learns the worker is done, and the run hangs for ever.
#[test]
fn a_closed_stderr_does_not_hang_the_run() {
    let dir = Scratch::new();
    for i in 0..50 {
        let sub = dir.join(format!("s/d{i}"));
        fs::create_dir_all(&sub).unwrap();
        for j in 0..20 {
            symlink("missing", sub.join(format!("l{j}"))).unwrap();
        }
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringio"))
        .args(["sync", "-aL", "--threads", "2", "s/", "d/"])
        .current_dir(dir.path())
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ringio");
    drop(child.stderr.take());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let status = status.expect("ringio sync hung with its stderr closed");
    assert_ne!(status.code(), Some(101), "ringio sync panicked: {status:?}");
}

/// SIGHUP ends a run as SIGINT and SIGTERM do: exit 20, no temporary left (rsync's message
/// even names it). ringio dies of it (129), leaving its temporaries.
#[test]
fn sighup_ends_the_run_with_20() {
    let dir = Scratch::new();
    for i in 0..40 {
        let sub = dir.join(format!("s/d{i}"));
        fs::create_dir_all(&sub).unwrap();
        for j in 0..100 {
            write_file(sub.join(format!("f{j}")), vec![b'x'; 64 * 1024]);
        }
    }
    // `-i` lists 4,040 entries, far more than the one-page pipe its stdout is: the run is held
    // mid-run until it is read, and the signal arrives then, whatever the machine's speed.
    let out = Cp::bare()
        .arg("sync")
        .args(["-ai", "--threads", "1", "s/", "d/"])
        .current_dir(dir.path())
        .run_held_by_stdout(|pid| {
            // SAFETY: kill(2) on the pid of our own child, which has not been reaped yet.
            unsafe { libc::kill(pid, libc::SIGHUP) };
        });
    assert_exit(&out, 20);
}

/// A full destination: rsync's receiver stops with "write failed ... No space left on device"
/// and exit 11 (error in file I/O); ringio goes on and exits 23. Either way no partial file
/// stands under a final name.
#[test]
fn a_full_destination_exits_11_as_rsync() {
    let dir = Scratch::new();
    fs::create_dir_all(dir.join("s")).unwrap();
    fs::create_dir_all(dir.join("d")).unwrap();
    for i in 0..3 {
        write_file(dir.join(format!("s/f{i}")), vec![b'x'; 700 * 1024]);
    }
    let _mount = match TmpfsMount::new(&dir.join("d"), "1m") {
        Ok(m) => m,
        Err(why) => skip!("{why}"),
    };
    let out = sync(dir.path(), &["-a", "s/", "d/"]);
    for i in 0..3 {
        if let Ok(m) = fs::metadata(dir.join(format!("d/f{i}"))) {
            assert_eq!(m.len(), 700 * 1024, "partial d/f{i}\n{}", describe(&out));
        }
    }
    assert_exit(&out, 11);
}

/// Under a thread limit (RLIMIT_NPROC) the run goes on with the threads it could have: the
/// workers, a big directory's stat threads and the progress line are each optional.
#[test]
fn a_thread_limit_leaves_fewer_workers_not_a_failure() {
    if !is_root() {
        skip!("running as another user with a thread limit needs root");
    }
    let s = Scratch::new();
    let src = s.join("src");
    for i in 0..1200 {
        write_file(src.join(format!("flat/f{i}")), format!("{i}"));
    }
    write_file(src.join("sub/deep/x"), b"x");
    chown_tree(s.path(), NOBODY.0, NOBODY.1);
    let out = Cp::bare()
        .args(["sync", "-a", "--info=progress2"])
        .arg(format!("{}/", src.display()))
        .arg(s.join("dst"))
        .run_as(NOBODY.0, NOBODY.1)
        .nproc_limit(3)
        .run();
    assert_success(&out);
    assert_trees_equal(&src, &s.join("dst"), Check::CONTENT);
}
