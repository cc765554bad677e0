//! `ringio sync`: each option family checked against the source always, and against rsync's
//! own result and output (byte for byte, exit status too) where rsync is installed. Every
//! scenario is built twice, identically, in `rs/` and `ri/`, with whole-second times (rsync
//! compares mtimes to the second, ringio to the nanosecond; equal whole seconds make the two
//! agree), and each tool runs in its own copy.

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::common::*;

fn rsync(cwd: &Path, args: &[&str]) -> Output {
    Command::new("rsync")
        .args(args)
        .current_dir(cwd)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
        .expect("run rsync")
}

fn sync(cwd: &Path, args: &[&str]) -> Output {
    Cp::bare().arg("sync").args(args).current_dir(cwd).run()
}

/// Sets every entry's mtime under `root` to a whole second of its own, deepest first, so that
/// directories keep theirs.
fn settle(root: &Path) {
    let mut paths = Vec::new();
    fn walk(p: &Path, out: &mut Vec<PathBuf>) {
        if let Ok(rd) = fs::read_dir(p) {
            let mut names: Vec<_> = rd.map(|e| e.expect("entry").path()).collect();
            names.sort();
            for n in names {
                if n.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                    walk(&n, out);
                }
                out.push(n);
            }
        }
    }
    walk(root, &mut paths);
    paths.push(root.to_path_buf());
    for (i, p) in paths.iter().enumerate() {
        let t = Ts::new(1_600_000_000 + i as i64 * 7, 0);
        set_times(p, Some(t), Some(t)).expect("set times");
    }
}

/// A scenario built in `rs/` and in `ri/` of a fresh scratch directory.
struct Twin {
    _dir: tempfile::TempDir,
    rs: PathBuf,
    ri: PathBuf,
}

impl Twin {
    fn new(setup: impl Fn(&Path)) -> Twin {
        let dir = tempfile::tempdir().expect("scratch dir");
        let (rs, ri) = (dir.path().join("rs"), dir.path().join("ri"));
        for side in [&rs, &ri] {
            fs::create_dir(side).expect("mkdir");
            setup(side);
        }
        Twin { _dir: dir, rs, ri }
    }

    /// Changes both copies alike.
    fn change(&self, f: impl Fn(&Path)) {
        f(&self.rs);
        f(&self.ri);
    }

    /// Runs rsync in `rs/` and ringio in `ri/` with `args`; asserts the same exit status and
    /// the same stdout, and the same resulting trees (`dst` in each). Without rsync, runs
    /// ringio only and returns its output.
    fn both(&self, args: &[&str], dst: &str) -> Output {
        self.both_with(args, dst, SAME_AS_RSYNC)
    }

    /// [`Twin::both`], the two trees compared for `check` (without mtimes where the options
    /// keep none: each tool then leaves its own moment).
    fn both_with(&self, args: &[&str], dst: &str, check: Check) -> Output {
        let ours = sync(&self.ri, args);
        if !rsync_available() {
            return ours;
        }
        let theirs = rsync(&self.rs, args);
        assert_eq!(
            in_order(&ours.stdout),
            in_order(&theirs.stdout),
            "stdout of `sync {}` differs from rsync's\nringio: {}\nrsync: {}",
            args.join(" "),
            describe(&ours),
            describe(&theirs)
        );
        assert_eq!(
            ours.status.code(),
            theirs.status.code(),
            "exit status of `sync {}`\nringio: {}\nrsync: {}",
            args.join(" "),
            describe(&ours),
            describe(&theirs)
        );
        let diff = tree_diff(&self.rs.join(dst), &self.ri.join(dst), check);
        assert!(
            diff.is_empty(),
            "`sync {}` left a tree other than rsync's:\n{}",
            args.join(" "),
            diff.join("\n")
        );
        ours
    }
}

/// stdout as rsync's order can be relied on: every line in order, except deletions, which
/// rsync's generator prints as it makes them while its sender prints the other lines, so that
/// where they land among the others depends on the two processes' timing. Deletion lines are
/// compared as a sorted list of their own, at the end.
fn in_order(stdout: &[u8]) -> String {
    let text = String::from_utf8_lossy(stdout);
    let (mut deletions, others): (Vec<&str>, Vec<&str>) = text
        .lines()
        // -v's totals count protocol bytes that a local ringio run does not have.
        .filter(|l| !l.starts_with("sent ") && !l.starts_with("total size is "))
        .partition(|l| l.starts_with("*deleting ") || l.starts_with("deleting "));
    deletions.sort_unstable();
    let mut out = others.join("\n");
    out.push_str("\n-- deletions --\n");
    out.push_str(&deletions.join("\n"));
    out
}

/// What two results of the same sync must share (atimes move as the trees are read).
const SAME_AS_RSYNC: Check = Check {
    atime: false,
    ..Check::ARCHIVE
};

/// The same, where times are not all kept.
const UNTIMED: Check = Check {
    mtime: false,
    ..SAME_AS_RSYNC
};

/// A small tree with every kind rsync -a keeps: files, a nested directory, an empty one, a
/// symlink, a FIFO, two names of one file, a name that sorts between a file and a directory.
fn small_tree(side: &Path) {
    let src = side.join("src");
    fs::create_dir_all(src.join("sub/deep")).unwrap();
    fs::create_dir(src.join("empty")).unwrap();
    fs::create_dir(src.join("a")).unwrap();
    write_file(src.join("a.txt"), "hello\n");
    write_file(src.join("a.b"), "1\n");
    write_file(src.join("a/q"), "q\n");
    write_file(src.join("sub/b.txt"), "world\n");
    write_file(src.join("sub/deep/c"), "x\n");
    symlink("a.txt", src.join("link")).unwrap();
    mkfifo(&src.join("fifo"), 0o644);
    fs::hard_link(src.join("a.txt"), src.join("hard")).unwrap();
    settle(&src);
}

/// Lines of stdout, for the tests that look at ringio alone.
fn stdout_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_first_sync_and_a_resync_itemize_as_rsync() {
    let twin = Twin::new(small_tree);
    let out = twin.both(&["-ai", "src/", "dst/"], "dst");
    assert_success(&out);
    assert_trees_equal(
        &twin.ri.join("src"),
        &twin.ri.join("dst"),
        Check {
            atime: false,
            hard_links: false,
            ..Check::ARCHIVE
        },
    );
    // Nothing changed: nothing to say, nothing done.
    let again = twin.both(&["-ai", "src/", "dst/"], "dst");
    assert!(again.stdout.is_empty(), "{}", describe(&again));
}

#[test]
fn changes_of_every_kind_itemize_as_rsync() {
    let twin = Twin::new(|side| {
        small_tree(side);
        let out = Command::new("cp")
            .args(["-a", "src", "dst"])
            .current_dir(side)
            .output()
            .unwrap();
        assert!(out.status.success());
    });
    twin.change(|side| {
        let src = side.join("src");
        write_file(src.join("sub/b.txt"), "world, longer now\n");
        write_file(src.join("new"), "new\n");
        fs::remove_file(src.join("sub/deep/c")).unwrap();
        fs::remove_file(src.join("link")).unwrap();
        symlink("a.b", src.join("link")).unwrap();
        chmod(src.join("a.b"), 0o600);
        // A file where the destination has a directory, and the other way round.
        fs::remove_dir_all(src.join("a")).unwrap();
        write_file(src.join("a"), "now a file\n");
        fs::remove_file(src.join("a.txt")).unwrap();
        fs::create_dir(src.join("a.txt")).unwrap();
        settle(&src);
        write_file(side.join("dst/extra"), "extra\n");
    });
    let out = twin.both(&["-ai", "--delete", "--force", "src/", "dst/"], "dst");
    assert_success(&out);
    assert!(
        stdout_lines(&out).contains(&"*deleting   extra".to_string()),
        "{}",
        describe(&out)
    );
}

#[test]
fn verbose_names_and_skipping_notes_match_rsync() {
    let twin = Twin::new(small_tree);
    // Without -l and -D, symlinks and FIFOs are skipped with a note; -v lists names.
    let out = twin.both_with(&["-r", "-i", "src", "dst"], "dst", UNTIMED);
    assert_success(&out);
    let out = twin.both_with(
        &["-rtv", "--out-format=%n%L", "src", "dst2"],
        "dst2",
        UNTIMED,
    );
    assert!(out.status.success(), "{}", describe(&out));
}

#[test]
fn filters_choose_what_is_synced_and_what_is_deleted_as_rsync() {
    let tree = |side: &Path| {
        let src = side.join("src");
        for d in ["build", "lib/sub", "keep", "docs"] {
            fs::create_dir_all(src.join(d)).unwrap();
        }
        for f in [
            "main.c",
            "main.o",
            "lib/x.c",
            "lib/x.o",
            "lib/sub/y.c",
            "build/out",
            "docs/a.md",
            "keep/k",
        ] {
            write_file(src.join(f), f);
        }
        write_file(src.join(".gitignore"), "*.o\nbuild/\n");
        write_file(src.join(".rsync-filter"), "- docs/\n");
        settle(&src);
        fs::create_dir_all(side.join("dst/keep")).unwrap();
        write_file(side.join("dst/keep/old"), "protected");
        write_file(side.join("dst/stale.o"), "excluded, so protected");
        write_file(side.join("dst/gone"), "deleted");
        settle(&side.join("dst"));
    };
    let cases: &[&[&str]] = &[
        &["-ai", "--delete", "--exclude=*.o", "src/", "dst/"],
        &[
            "-ai",
            "--delete",
            "--delete-excluded",
            "--exclude=*.o",
            "src/",
            "dst/",
        ],
        &[
            "-ai",
            "--include=*/",
            "--include=*.c",
            "--exclude=*",
            "src/",
            "dst/",
        ],
        &[
            "-ai",
            "--delete",
            "-f",
            "- /build/",
            "-f",
            "P keep/",
            "src/",
            "dst/",
        ],
        &["-ai", "--delete", "--filter=:- .gitignore", "src/", "dst/"],
        &["-ai", "--delete", "-F", "src/", "dst/"],
        &[
            "-ai",
            "--delete",
            "-FF",
            "--exclude=/lib/sub/",
            "src/",
            "dst/",
        ],
        &[
            "-ai",
            "-m",
            "--include=*/",
            "--include=*.c",
            "--exclude=*",
            "src/",
            "dst/",
        ],
    ];
    for args in cases {
        let twin = Twin::new(tree);
        let out = twin.both(args, "dst");
        assert!(out.status.success(), "{}", describe(&out));
    }
}

#[test]
fn skip_rules_match_rsync() {
    let tree = |side: &Path| {
        let src = side.join("src");
        fs::create_dir_all(&src).unwrap();
        fs::create_dir_all(side.join("dst")).unwrap();
        write_file(src.join("same"), "same");
        write_file(side.join("dst/same"), "SAME");
        write_file(src.join("newer"), "src");
        write_file(side.join("dst/newer"), "dst is newer");
        write_file(src.join("big"), vec![b'x'; 5000]);
        write_file(src.join("only"), "only in src");
        settle(&src);
        settle(&side.join("dst"));
        let t = Ts::new(1_700_000_000, 0);
        set_times(&side.join("dst/newer"), Some(t), Some(t)).unwrap();
        // Same size, same time, different bytes: only -c tells.
        let (_, m) = lstat_times(&src.join("same"));
        set_times(&side.join("dst/same"), Some(m), Some(m)).unwrap();
    };
    let cases: &[&[&str]] = &[
        &["-ai", "src/", "dst/"],
        &["-aic", "src/", "dst/"],
        &["-ai", "--size-only", "src/", "dst/"],
        &["-aiI", "src/", "dst/"],
        &["-aiu", "src/", "dst/"],
        &["-ai", "--existing", "src/", "dst/"],
        &["-ai", "--ignore-existing", "src/", "dst/"],
        &["-ai", "--max-size=4K", "src/", "dst/"],
        &["-ai", "--min-size=10", "src/", "dst/"],
        &["-ai", "--modify-window=2000000000", "src/", "dst/"],
    ];
    for args in cases {
        let twin = Twin::new(tree);
        // A window that calls every time equal leaves directories with their own.
        let check = if args.iter().any(|a| a.starts_with("--modify-window")) {
            UNTIMED
        } else {
            SAME_AS_RSYNC
        };
        let out = twin.both_with(args, "dst", check);
        assert!(out.status.success(), "{}", describe(&out));
    }
}

#[test]
fn backups_beside_and_in_a_directory_match_rsync() {
    let tree = |side: &Path| {
        let src = side.join("src");
        fs::create_dir_all(src.join("d")).unwrap();
        fs::create_dir_all(side.join("dst/d")).unwrap();
        write_file(src.join("d/f"), "new content");
        write_file(side.join("dst/d/f"), "old");
        write_file(side.join("dst/d/extra"), "extra");
        settle(&src);
        settle(&side.join("dst"));
    };
    for args in [
        &["-ai", "-b", "src/", "dst/"][..],
        &["-ai", "-b", "--suffix=.old", "--delete", "src/", "dst/"],
        &["-ai", "--backup-dir=../bak", "--delete", "src/", "dst/"],
    ] {
        let twin = Twin::new(tree);
        // Backups beside the files imply -O.
        let out = twin.both_with(args, "dst", UNTIMED);
        assert!(out.status.success(), "{}", describe(&out));
        if args.iter().any(|a| a.starts_with("--backup-dir")) {
            let b = fs::read_to_string(twin.ri.join("bak/d/f")).expect("the backup, beside dst");
            assert_eq!(b, "old");
        }
    }
}

/// `side/src` with one file under three names in three directories (`x/one`, `y/two`,
/// `three`), returned.
fn linked_group(side: &Path) -> PathBuf {
    let src = side.join("src");
    fs::create_dir_all(src.join("x")).unwrap();
    fs::create_dir_all(src.join("y")).unwrap();
    write_file(src.join("x/one"), "linked");
    fs::hard_link(src.join("x/one"), src.join("y/two")).unwrap();
    fs::hard_link(src.join("x/one"), src.join("three")).unwrap();
    src
}

#[test]
fn hard_links_across_directories_with_h() {
    let twin = Twin::new(|side| {
        let src = linked_group(side);
        settle(&src);
    });
    let out = sync(&twin.ri, &["-aH", "src/", "dst/"]);
    assert_success(&out);
    let ino = |p: &str| fs::metadata(twin.ri.join(p)).unwrap().ino();
    assert_eq!(ino("dst/x/one"), ino("dst/y/two"));
    assert_eq!(ino("dst/x/one"), ino("dst/three"));
    assert_trees_equal(&twin.ri.join("src"), &twin.ri.join("dst"), SAME_AS_RSYNC);
    // Unchanged: a resync says nothing.
    let again = sync(&twin.ri, &["-aHi", "src/", "dst/"]);
    assert!(again.stdout.is_empty(), "{}", describe(&again));
}

/// Under -n, the later names of a hard-linked group are said as links to the first
/// (`hf+++++++++ x/one => three`), as the real run says them, whether DEST exists or not.
#[test]
fn a_dry_run_with_h_says_the_links_a_real_run_makes() {
    let twin = Twin::new(|side| {
        let src = linked_group(side);
        write_file(src.join("solo"), "alone");
        settle(&src);
    });
    for existing in [false, true] {
        let _ = fs::remove_dir_all(twin.ri.join("dst"));
        if existing {
            fs::create_dir(twin.ri.join("dst")).unwrap();
        }
        let dry = sync(&twin.ri, &["-anHi", "src/", "dst/"]);
        assert_success(&dry);
        let said = String::from_utf8_lossy(&dry.stdout).into_owned();
        assert!(
            said.contains("hf+++++++++ x/one => three\n")
                && said.contains("hf+++++++++ y/two => three\n")
                && said.contains(">f+++++++++ three\n"),
            "existing DEST: {existing}\n{said}"
        );
        let real = sync(&twin.ri, &["-aHi", "src/", "dst/"]);
        assert_success(&real);
        assert_eq!(
            said,
            String::from_utf8_lossy(&real.stdout),
            "existing DEST: {existing}"
        );
        let ino = |p: &str| fs::metadata(twin.ri.join(p)).unwrap().ino();
        assert_eq!(ino("dst/x/one"), ino("dst/three"));
        assert_eq!(ino("dst/y/two"), ino("dst/three"));
    }
}

/// A hard-linked group already linked in DEST, whose file changed (its mode; its mtime, so the
/// first name is sent again; its bytes): under -n the other names are said with what would
/// change in them (`hf...p..... x/one`), as rsync says them; the real run then says what it
/// does, and the two trees are rsync's.
#[test]
fn a_dry_run_with_h_over_existing_links_says_what_changes_as_rsync() {
    type Change = fn(&Path);
    let changes: [(&str, Change); 3] = [
        ("mode", |p| {
            fs::set_permissions(p.join("src/three"), fs::Permissions::from_mode(0o600)).unwrap()
        }),
        ("mtime", |p| {
            set_times(&p.join("src/three"), None, Some(Ts::new(1_600_000_000, 0))).unwrap()
        }),
        ("bytes", |p| {
            write_file(p.join("src/three"), "relinked!");
            set_times(&p.join("src/three"), None, Some(Ts::new(1_600_000_000, 0))).unwrap();
        }),
    ];
    for (what, change) in changes {
        let twin = Twin::new(|side| {
            let src = linked_group(side);
            settle(&src);
            assert_success(&sync(side, &["-aH", "src/", "dst/"]));
        });
        twin.change(change);
        let dry = twin.both(&["-anHi", "src/", "dst/"], "dst");
        assert!(
            String::from_utf8_lossy(&dry.stdout).contains("hf"),
            "{what}: {}",
            describe(&dry)
        );
        twin.both(&["-aHi", "src/", "dst/"], "dst");
        let ino = |p: &str| fs::metadata(twin.ri.join(p)).unwrap().ino();
        assert_eq!(ino("dst/x/one"), ino("dst/three"), "{what}");
        assert_eq!(ino("dst/y/two"), ino("dst/three"), "{what}");
    }
}

#[test]
fn a_dry_run_changes_nothing_and_says_what_a_real_run_does() {
    let tree = |side: &Path| {
        small_tree(side);
        let dst = side.join("dst");
        fs::create_dir_all(dst.join("sub")).unwrap();
        write_file(dst.join("sub/b.txt"), "stale");
        write_file(dst.join("extra"), "extra");
        fs::create_dir_all(dst.join("olddir/inner")).unwrap();
        write_file(dst.join("olddir/inner/f"), "f");
        settle(&dst);
    };
    let snapshot = |root: &Path| -> Vec<String> {
        let mut out = Vec::new();
        fn walk(p: &Path, rel: &str, out: &mut Vec<String>) {
            let mut names: Vec<_> = fs::read_dir(p).unwrap().map(|e| e.unwrap()).collect();
            names.sort_by_key(|e| e.file_name());
            for e in names {
                let m = e.path().symlink_metadata().unwrap();
                let name = format!("{rel}/{}", e.file_name().to_string_lossy());
                out.push(format!(
                    "{name} {:o} {} {} {} {}",
                    m.mode(),
                    m.size(),
                    m.mtime(),
                    m.mtime_nsec(),
                    m.ino()
                ));
                if m.is_dir() {
                    walk(&e.path(), &name, out);
                }
            }
        }
        walk(root, "", &mut out);
        out
    };
    let option_sets: &[&[&str]] = &[
        &["-ai"],
        &["-ai", "--delete"],
        &["-aiH", "--delete-after", "--exclude=fifo"],
        &["-aic", "--delete-before", "-b"],
        &["-ai", "--delete", "--inplace", "-S"],
        &[
            "-rlpti",
            "--delete-excluded",
            "--exclude=sub/",
            "--backup-dir=../bak",
        ],
    ];
    for opts in option_sets {
        let twin = Twin::new(tree);
        let before = snapshot(&twin.ri);
        let mut dry: Vec<&str> = opts.to_vec();
        dry.extend(["-n", "src/", "dst/"]);
        let said = sync(&twin.ri, &dry);
        assert!(said.status.success(), "{}", describe(&said));
        assert_eq!(
            before,
            snapshot(&twin.ri),
            "`sync {}` changed the disk",
            dry.join(" ")
        );
        let mut real: Vec<&str> = opts.to_vec();
        real.extend(["src/", "dst/"]);
        let done = sync(&twin.ri, &real);
        assert!(done.status.success(), "{}", describe(&done));
        assert_eq!(
            String::from_utf8_lossy(&said.stdout),
            String::from_utf8_lossy(&done.stdout),
            "the dry run of `sync {}` said other than the real run did",
            real.join(" ")
        );
        // rsync's own dry run names `*deleting DIR/` for a directory that its real run keeps
        // (it holds the `-b` backups of the files deleted in it); ringio says what it will do.
        let rsync_dry_run_guesses = opts.contains(&"-b");
        if rsync_available() && !rsync_dry_run_guesses {
            let theirs = rsync(&twin.rs, &dry);
            assert_eq!(
                in_order(&said.stdout),
                in_order(&theirs.stdout),
                "`sync {}` vs rsync",
                dry.join(" ")
            );
        }
    }
    // Into a DEST that does not exist: nothing is made.
    let twin = Twin::new(small_tree);
    let out = sync(&twin.ri, &["-ain", "src/", "new/"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(!twin.ri.join("new").exists());
    assert!(String::from_utf8_lossy(&out.stdout).contains(">f+++++++++ sub/deep/c"));
}

#[test]
fn a_missing_source_deletes_nothing_and_exits_23() {
    let twin = Twin::new(|side| {
        small_tree(side);
        fs::create_dir_all(side.join("dst")).unwrap();
        write_file(side.join("dst/precious"), "keep me");
    });
    let out = sync(&twin.ri, &["-a", "--delete", "src/", "missing/", "dst/"]);
    assert_exit(&out, 23);
    assert!(twin.ri.join("dst/precious").exists(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("missing"), "{text}");
    // On stdout, as rsync prints it (an informational line, not an error).
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        said.matches("IO error encountered -- skipping file deletion\n")
            .count(),
        1,
        "{}",
        describe(&out)
    );
}

#[test]
fn max_delete_stops_at_n_and_exits_25() {
    let twin = Twin::new(|side| {
        fs::create_dir_all(side.join("src")).unwrap();
        fs::create_dir_all(side.join("dst")).unwrap();
        for i in 0..5 {
            write_file(side.join(format!("dst/x{i}")), "x");
        }
    });
    let out = sync(
        &twin.ri,
        &["-a", "--delete", "--max-delete=2", "src/", "dst/"],
    );
    assert_exit(&out, 25);
    let left = fs::read_dir(twin.ri.join("dst")).unwrap().count();
    assert_eq!(left, 3, "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--max-delete"));
}

#[test]
fn a_destination_directory_swapped_for_a_symlink_redirects_nothing() {
    let twin = Twin::new(|side| {
        fs::create_dir_all(side.join("src/sub")).unwrap();
        write_file(side.join("src/sub/f"), "data");
        fs::create_dir_all(side.join("outside")).unwrap();
        write_file(side.join("outside/f"), "outside");
        write_file(side.join("outside/other"), "other");
        fs::create_dir_all(side.join("dst")).unwrap();
        symlink("../outside", side.join("dst/sub")).unwrap();
    });
    let out = sync(&twin.ri, &["-a", "--delete", "src/", "dst/"]);
    assert_success(&out);
    assert_eq!(
        fs::read_to_string(twin.ri.join("outside/f")).unwrap(),
        "outside"
    );
    assert!(twin.ri.join("outside/other").exists());
    assert!(fs::symlink_metadata(twin.ri.join("dst/sub"))
        .unwrap()
        .is_dir());
    assert_trees_equal(&twin.ri.join("src"), &twin.ri.join("dst"), SAME_AS_RSYNC);
}

#[test]
fn a_run_killed_at_any_moment_is_finished_by_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let spec = TreeSpec {
        big_files: true,
        ..TreeSpec::small(27)
    };
    spec.build(&src);
    let dst = dir.path().join("dst");
    for delay_ms in [0u64, 2, 5, 10, 20, 40] {
        let mut running = Cp::bare()
            .args(["sync", "-a", "--delete"])
            .arg(format!("{}/", src.display()))
            .arg(&dst)
            .spawn();
        std::thread::sleep(Duration::from_millis(delay_ms));
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(running.pid(), libc::SIGKILL) };
        let _ = running.wait_status(Duration::from_secs(10));
        let again = Cp::bare()
            .args(["sync", "-a", "--delete"])
            .arg(format!("{}/", src.display()))
            .arg(&dst)
            .run();
        assert_success(&again);
        assert_trees_equal(
            &src,
            &dst,
            Check {
                atime: false,
                ..Check::PRESERVE_P
            },
        );
        let temps: Vec<_> = walkdir(&dst)
            .into_iter()
            .filter(|p| p.to_string_lossy().contains(".ringio-"))
            .collect();
        assert!(temps.is_empty(), "temporaries left: {temps:?}");
        fs::remove_dir_all(&dst).unwrap();
    }
}

fn walkdir(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(root) {
        for e in rd.flatten() {
            let p = e.path();
            if p.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                out.extend(walkdir(&p));
            }
            out.push(p);
        }
    }
    out
}

#[test]
fn usage_errors_exit_1_and_touch_nothing() {
    let twin = Twin::new(small_tree);
    for args in [
        &["--no-such-option", "src/", "dst/"][..],
        &["-a", "host:src/", "dst/"],
        &["-a", "src/", "user@host:dst/"],
        &["-a", "rsync://host/module/", "dst/"],
        &["-a", "--max-size=lots", "src/", "dst/"],
        // (rsync prints an unknown --out-format escape as written: out_format_escapes_as_rsync.)
        &["-a", "--modify-window=x", "src/", "dst/"],
        &["-a", "--filter=z nonsense", "src/", "dst/"],
        // No operand at all (a single one is listed: list_only_lists_the_source_as_rsync).
        &["-a"],
    ] {
        let out = sync(&twin.ri, args);
        assert_exit(&out, 1);
        assert!(!twin.ri.join("dst").exists(), "{args:?} made dst");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(text.lines().count() <= 3, "{args:?}: {text}");
    }
    let remote = sync(&twin.ri, &["-a", "host:src/", "dst/"]);
    assert!(String::from_utf8_lossy(&remote.stderr).contains("locally only"));
}

#[test]
fn under_the_name_rsync_it_is_rsync() {
    let twin = Twin::new(small_tree);
    let link = twin.ri.join("rsync");
    symlink(env!("CARGO_BIN_EXE_ringio"), &link).unwrap();
    let out = Command::new(&link)
        .args(["-ai", "src/", "dst/"])
        .current_dir(&twin.ri)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains(">f+++++++++ a.txt"));
    let version = Command::new(&link).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).contains("protocol version"));
    let bad = Command::new(&link).arg("--bogus").output().unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).starts_with("rsync: "));
}

#[test]
fn archive_metadata_with_acls_and_xattrs_as_cp_a_gives_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    TreeSpec::standard(7).build(&src);
    if set_xattr(&src, "user.ringio", b"dir").is_err() {
        skip!("no user xattrs on this filesystem");
    }
    let dst = dir.path().join("dst");
    let out = sync(dir.path(), &["-aHAX", "src/", "dst/"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_trees_equal(
        &src,
        &dst,
        Check {
            atime: false,
            ..Check::ARCHIVE
        },
    );
    // The same, once more: nothing to do.
    let again = sync(dir.path(), &["-aHAXi", "src/", "dst/"]);
    assert!(again.stdout.is_empty(), "{}", describe(&again));
}

/// `-A` with a `--chmod` that narrows the group bits: the mode is set after the ACL, so its
/// group bits become the mask and a named user keeps no more than the group may (rsync's
/// order); the mask, the owner's and others' bits are the mode's, so a re-run finds the copy
/// the same and stays quiet, as rsync's does.
#[test]
fn a_narrowed_mode_narrows_the_acl_mask_as_rsync() {
    let twin = Twin::new(|side| {
        write_file(side.join("src/f"), "acl");
        fs::create_dir(side.join("src/d")).unwrap();
        for (name, mode) in [("f", 0o775), ("d", 0o775)] {
            let path = side.join("src").join(name);
            set_xattr(
                &path,
                "system.posix_acl_access",
                &access_acl(2000, [7, 7, 5, 7, 5]),
            )
            .unwrap_or_else(|e| skip!("no ACLs on this filesystem: {e}"));
            chmod(&path, mode);
        }
        settle(&side.join("src"));
    });
    let args = ["-aAi", "--chmod=g-w", "src/", "dst/"];
    let out = twin.both(&args, "dst");
    assert_success(&out);
    for name in ["f", "d"] {
        let path = twin.ri.join("dst").join(name);
        let acl = get_xattr(&path, "system.posix_acl_access").expect("access ACL");
        assert_eq!(acl, access_acl(2000, [7, 7, 5, 5, 5]), "{name}");
        let mode = fs::symlink_metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o755, "{name}");
    }
    let again = twin.both(&args, "dst");
    assert!(again.stdout.is_empty(), "{}", describe(&again));
}

#[test]
fn link_dest_snapshots_share_unchanged_files_as_rsync() {
    let twin = Twin::new(|side| {
        small_tree(side);
        let out = Command::new("cp")
            .args(["-a", "src", "snap1"])
            .current_dir(side)
            .output()
            .unwrap();
        assert!(out.status.success());
    });
    twin.change(|side| {
        write_file(
            side.join("src/sub/b.txt"),
            "changed since the first snapshot\n",
        );
        settle(&side.join("src"));
    });
    for dest in [
        "--link-dest=../snap1",
        "--copy-dest=../snap1",
        "--compare-dest=../snap1",
    ] {
        let snap = format!("snap-{}", &dest[2..6]);
        let out = twin.both(&["-aiH", dest, "src/", &format!("{snap}/")], &snap);
        assert!(out.status.success(), "{}", describe(&out));
    }
    let ino = |p: &str| fs::symlink_metadata(twin.ri.join(p)).unwrap().ino();
    // Unchanged files are the first snapshot's inodes; the changed one is new.
    assert_eq!(ino("snap1/a.b"), ino("snap-link/a.b"));
    assert_eq!(ino("snap1/sub/deep/c"), ino("snap-link/sub/deep/c"));
    assert_ne!(ino("snap1/sub/b.txt"), ino("snap-link/sub/b.txt"));
    assert_ne!(ino("snap1/a.b"), ino("snap-copy/a.b"));
    assert!(!twin.ri.join("snap-comp/a.b").exists());
    assert!(twin.ri.join("snap-comp/sub/b.txt").exists());
}

#[test]
fn several_sources_and_relative_paths_merge_as_rsync() {
    let twin = Twin::new(|side| {
        for (path, text) in [
            ("from1/one", "1"),
            ("from1/dir-or-file/inside", "in"),
            ("from2/one", "other one"),
            ("from2/sub/uno", "uno"),
            ("from3/sub/dos", "dos"),
            ("from3/dir-or-file", "a file"),
            ("deep/a/b/c/leaf", "leaf"),
            ("deep/a/x", "x"),
        ] {
            let p = side.join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            write_file(&p, text);
        }
        settle(side);
    });
    let out = twin.both(&["-ai", "from1/", "from2/", "from3/", "to/"], "to");
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(fs::read_to_string(twin.ri.join("to/one")).unwrap(), "1");
    assert!(twin.ri.join("to/sub/dos").exists() && twin.ri.join("to/sub/uno").exists());
    // DEST itself is not in a -R transfer: its mtime is each tool's own moment.
    let out = twin.both_with(
        &["-aiR", "deep/./a/b/c", "deep/a/x", "rel/"],
        "rel",
        UNTIMED,
    );
    assert!(out.status.success(), "{}", describe(&out));
    assert!(twin.ri.join("rel/a/b/c/leaf").exists());
    assert!(twin.ri.join("rel/deep/a/x").exists());
    // Deleting in a directory spares what another operand brings into it.
    let args = [
        "-aiR",
        "--delete",
        "deep/./a/b",
        "deep/./a/b/c/leaf",
        "rel/",
    ];
    let out = twin.both_with(&args, "rel", UNTIMED);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("deleting a/b/c/leaf"));
}

#[test]
fn files_from_syncs_the_listed_paths_as_rsync() {
    let twin = Twin::new(|side| {
        for (path, text) in [
            ("src/bin/a", "a"),
            ("src/lib/x/b", "b"),
            ("src/top", "t"),
            ("src/no", "n"),
        ] {
            let p = side.join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            write_file(&p, text);
        }
        write_file(side.join("list"), "bin/\n/top\nlib/x/b\n\n");
        settle(&side.join("src"));
    });
    let out = twin.both_with(&["-ai", "--files-from=list", "src", "dst/"], "dst", UNTIMED);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(twin.ri.join("dst/lib/x/b").exists());
    assert!(!twin.ri.join("dst/no").exists());
    // A path that climbs out of SRC is read inside it, as rsync reads the list (SRC as the
    // root: `../etc/passwd` is SRC's `etc/passwd`, missing here, 23): nothing outside SRC is
    // copied.
    write_file(twin.ri.join("bad"), "../etc/passwd\n");
    let out = sync(&twin.ri, &["-a", "--files-from=bad", "src", "dst2/"]);
    assert_exit(&out, 23);
    assert_stderr_has(&out, "link_stat 'src/./etc/passwd' failed");
    assert!(!twin.ri.join("dst2/etc").exists() && !twin.ri.join("dst2/passwd").exists());
}

/// A tree of many directories, whose names rsync sorts as `name/` (`14.0.6/` before `14/`,
/// `a-b/` before `a/`), synced by parallel workers: stdout and `--log-file` list every entry in
/// rsync's order all the same.
#[test]
fn many_directories_on_many_workers_print_in_rsyncs_order() {
    let twin = Twin::new(|side| {
        for top in ["14", "14.0.6", "a", "a-b", "a.b", "z"] {
            for mid in ["1", "1.1", "2"] {
                let dir = side.join("src").join(top).join(mid);
                fs::create_dir_all(dir.join("leaf")).unwrap();
                for f in ["f", "f.1", "g"] {
                    write_file(dir.join(f), top);
                    write_file(dir.join("leaf").join(f), mid);
                }
            }
        }
        settle(&side.join("src"));
    });
    let out = twin.both(&["-ai", "src/", "dst/"], "dst");
    assert_success(&out);
    // "created directory dst", then ./ and every entry.
    assert_eq!(stdout_lines(&out).len(), 2 + 6 * (1 + 3 * (1 + 3 + 1 + 3)));
    // The log holds the same entries in the same order (its lines: rsync's `YYYY/MM/DD
    // HH:MM:SS [PID] `, then `%i %n%L`).
    let log = twin.ri.join("sync.log");
    let log_arg = format!("--log-file={}", log.display());
    let out = sync(&twin.ri, &["-a", &log_arg, "src/", "dst2/"]);
    assert_success(&out);
    let logged: Vec<String> = fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| {
            let (date, rest) = line.split_once(' ').expect("a date");
            let (time, rest) = rest.split_once(' ').expect("a time");
            let (pid, entry) = rest.split_once(' ').expect("a pid");
            assert!(date.len() == 10 && date.as_bytes()[4] == b'/', "{line}");
            assert!(time.len() == 8 && time.as_bytes()[2] == b':', "{line}");
            assert!(pid.starts_with('[') && pid.ends_with(']'), "{line}");
            entry.to_owned()
        })
        .collect();
    let first = twin.both(&["-ai", "src/", "dst3/"], "dst3");
    assert_eq!(logged, stdout_lines(&first)[1..]);
}

/// `--list-only` (and a single operand, which implies it) lists the source as rsync does,
/// with and without -r and -l, and writes nothing.
#[test]
fn list_only_lists_the_source_as_rsync() {
    let dir = tempfile::tempdir().unwrap();
    small_tree(dir.path());
    fs::create_dir(dir.path().join("src/14.0.6")).unwrap();
    settle(&dir.path().join("src"));
    for args in [
        &["--list-only", "src/"][..],
        &["src/"],
        &["src"],
        &["-r", "--list-only", "src/"],
        &["-a", "--list-only", "src/", "nowhere/"],
        &["-a", "src/link"],
    ] {
        let ours = sync(dir.path(), args);
        assert_success(&ours);
        assert!(!dir.path().join("nowhere").exists(), "a listing wrote DEST");
        if !rsync_available() {
            assert!(!ours.stdout.is_empty());
            continue;
        }
        let theirs = rsync(dir.path(), args);
        assert_eq!(
            String::from_utf8_lossy(&ours.stdout),
            String::from_utf8_lossy(&theirs.stdout),
            "`sync {}`",
            args.join(" ")
        );
    }
}

/// `--progress` and `-P` follow each transferred file's name with its size, 100%, a rate and a
/// time; `--info=progress2` ends with one line for the whole transfer.
#[test]
fn progress_per_file_and_for_the_whole_transfer() {
    let dir = tempfile::tempdir().unwrap();
    small_tree(dir.path());
    for flag in ["--progress", "-P"] {
        let dst = format!("dst{flag}/");
        let out = sync(dir.path(), &["-a", flag, "src/", &dst]);
        assert_success(&out);
        let lines = stdout_lines(&out);
        let after = |name: &str| {
            let at = lines.iter().position(|l| l == name).expect(name);
            lines[at + 1].clone()
        };
        // Numbered in the order printed, whichever worker finished first.
        let numbers: Vec<String> = lines
            .iter()
            .filter_map(|l| l.split("(xfr#").nth(1))
            .map(|rest| rest.split(',').next().unwrap().to_string())
            .collect();
        let expected: Vec<String> = (1..=numbers.len()).map(|n| n.to_string()).collect();
        assert_eq!(numbers, expected);
        for (name, size) in [("a.txt", "6"), ("sub/deep/c", "2")] {
            let line = after(name);
            let words: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(&words[..2], &[size, "100%"], "{line}");
            assert!(
                words[2].ends_with("B/s") && words[4].starts_with("(xfr#"),
                "{line}"
            );
        }
        assert_trees_equal(
            &dir.path().join("src"),
            &dir.path().join(&dst),
            Check {
                atime: false,
                hard_links: false,
                ..Check::ARCHIVE
            },
        );
    }
    let out = sync(dir.path(), &["-a", "--info=progress2", "src/", "whole/"]);
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.rsplit('\r').next().unwrap();
    assert!(last.ends_with(")\n") && last.contains(" 100% "), "{text:?}");
    // Files: a.txt (hard), a.b, a/q, sub/b.txt, sub/deep/c.
    assert!(
        last.contains("(xfr#6,") || last.contains("(xfr#5,"),
        "{text:?}"
    );
}

/// Under a destination directory's default ACL, `-a` (its `-p`) gives new files the source's
/// mode as rsync does: the default ACL, not the umask, decides what creation leaves, so the
/// mode is set after, in directories the run makes there too, at any depth.
#[test]
fn new_files_under_a_default_acl_keep_the_sources_mode() {
    let twin = Twin::new(|side| {
        write_file(side.join("src/f"), b"f");
        write_file(side.join("src/sub/g"), b"g");
        write_file(side.join("src/sub/deep/er/h"), b"h");
        fs::set_permissions(side.join("src/f"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(side.join("src/sub/g"), fs::Permissions::from_mode(0o604)).unwrap();
        fs::set_permissions(
            side.join("src/sub/deep/er/h"),
            fs::Permissions::from_mode(0o640),
        )
        .unwrap();
        fs::create_dir(side.join("dst")).unwrap();
        settle(&side.join("src"));
    });
    for side in [&twin.rs, &twin.ri] {
        let set = Command::new("setfacl")
            .args(["-m", "d:u::rwx,d:g::r-x,d:o::---"])
            .arg(side.join("dst"))
            .output();
        if !set.is_ok_and(|o| o.status.success()) {
            skip!("setfacl is missing or this filesystem has no ACLs");
        }
    }
    let out = twin.both(&["-a", "src/", "dst/"], "dst");
    assert_success(&out);
    assert_eq!(mode_of(twin.ri.join("dst/f")), 0o644);
    assert_eq!(mode_of(twin.ri.join("dst/sub/g")), 0o604);
    // Directories made by the run took the default ACL down the tree (each asked of its
    // parent, not of the kernel): two levels further, the same.
    assert_eq!(mode_of(twin.ri.join("dst/sub/deep/er/h")), 0o640);
}

/// Where one source has a file and another a directory of the same name, the directory is
/// synced, in either order (rsync's clean_flist): the tree below it is not lost.
#[test]
fn a_directory_wins_over_a_file_of_its_name_from_another_source() {
    let twin = Twin::new(|side| {
        write_file(side.join("a/g"), b"A");
        write_file(side.join("a/f"), b"F");
        write_file(side.join("b/g/inner"), b"B");
        write_file(side.join("c/f/inner2"), b"C");
        for top in ["a", "b", "c"] {
            settle(&side.join(top));
        }
    });
    for (args, dst) in [
        (&["-ai", "a/", "b/", "c/", "one/"][..], "one"),
        (&["-ai", "c/", "a/", "two/"], "two"),
    ] {
        let out = twin.both(args, dst);
        assert_success(&out);
    }
    assert!(twin.ri.join("one/g/inner").is_file() && twin.ri.join("one/f/inner2").is_file());
    assert!(twin.ri.join("two/f/inner2").is_file() && twin.ri.join("two/g").is_file());
}

/// Within a directory, deletions come in rsync's order: the directories last to first (named
/// as `name/`, so `14/` before `14.0.6/`), then the other entries last to first.
#[test]
fn deletions_in_a_directory_come_in_rsyncs_order() {
    let twin = Twin::new(|side| {
        fs::create_dir_all(side.join("src")).unwrap();
        for dir in ["adir", "zdir", "14", "14.0.6"] {
            fs::create_dir_all(side.join("dst").join(dir)).unwrap();
        }
        write_file(side.join("dst/adir/in"), b"");
        for file in ["a", "b", "m", "z", "14.1", "adir.txt"] {
            write_file(side.join("dst").join(file), b"");
        }
        settle(&side.join("src"));
        settle(&side.join("dst"));
    });
    let ours = sync(&twin.ri, &["-ai", "--delete", "src/", "dst/"]);
    assert_success(&ours);
    let deletions = |out: &Output| -> Vec<String> {
        stdout_lines(out)
            .into_iter()
            .filter(|l| l.starts_with("*deleting"))
            .collect()
    };
    let want: Vec<String> = [
        "zdir/", "adir/in", "adir/", "14/", "14.0.6/", "z", "m", "b", "adir.txt", "a", "14.1",
    ]
    .iter()
    .map(|n| format!("*deleting   {n}"))
    .collect();
    assert_eq!(deletions(&ours), want);
    if rsync_available() {
        let theirs = rsync(&twin.rs, &["-ai", "--delete", "src/", "dst/"]);
        assert_eq!(deletions(&ours), deletions(&theirs));
    }
}

/// `--files-from` with `-a` (which then implies no `-r`): a listed directory is made, with its
/// attributes, not entered; directories on the way to a listed path are entered. The trees
/// come out as rsync's, and so does `-d`'s.
#[test]
fn files_from_makes_a_listed_directory_without_its_contents() {
    let twin = Twin::new(|side| {
        write_file(side.join("x/y/f"), b"f");
        write_file(side.join("x/h"), b"h");
        write_file(side.join("x/z/g"), b"g");
        fs::write(side.join("list"), "x/y/f\nx/h\nx/z\n").unwrap();
        settle(&side.join("x"));
    });
    let args = ["-a", "--files-from=list", ".", "dst/"];
    let ours = sync(&twin.ri, &args);
    assert_success(&ours);
    assert!(twin.ri.join("dst/x/z").is_dir());
    assert!(
        !twin.ri.join("dst/x/z/g").exists(),
        "a listed directory was entered"
    );
    assert!(twin.ri.join("dst/x/y/f").is_file() && twin.ri.join("dst/x/h").is_file());
    if rsync_available() {
        assert_success(&rsync(&twin.rs, &args));
        // DEST itself is not listed: each tool leaves it at its own moment.
        let diff = tree_diff(
            &twin.rs.join("dst/x"),
            &twin.ri.join("dst/x"),
            SAME_AS_RSYNC,
        );
        assert!(diff.is_empty(), "{}", diff.join("\n"));
    }
    // -d: the subdirectories are made with their times and modes, and left empty.
    let out = twin.both(&["-dtp", "x/", "flat/"], "flat");
    assert_success(&out);
    assert!(!twin.ri.join("flat/z/g").exists());
    assert_eq!(
        fs::metadata(twin.ri.join("flat/z")).unwrap().mtime(),
        fs::metadata(twin.ri.join("x/z")).unwrap().mtime()
    );
}

/// A temporary's name as an interrupted ringio run leaves it in a directory (`temp.rs`): the
/// dot, the file's name, the mark, a run and a counter, and the check of all of it.
fn stale_temporary(file: &str) -> String {
    let prefix = format!(".{file}.ringio-0123456789abcdef-7");
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in prefix.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{prefix}-{:08x}", (h ^ (h >> 32)) as u32)
}

/// A re-sync whose only change in a directory is one the walk makes there (an extraneous entry
/// deleted, in each deletion mode; a file replaced; a hard link made again; a stale temporary
/// of an interrupted run removed) puts the directory's mtime back to the source's, as rsync
/// does, though nothing else of the directory changed.
#[test]
fn a_directory_changed_only_by_the_walk_gets_its_times_back() {
    let build = |side: &Path| {
        write_file(side.join("src/d/a"), "the first name");
        fs::hard_link(side.join("src/d/a"), side.join("src/d/b")).expect("link");
        write_file(side.join("src/d/p"), "plain");
        write_file(side.join("src/d/sub/c"), "below");
        write_file(side.join("src/e/f"), "elsewhere");
        settle(&side.join("src"));
        let cp = Command::new("cp")
            .args(["-a", "src", "dst"])
            .current_dir(side)
            .status()
            .expect("cp -a");
        assert!(cp.success());
    };
    // Each change made in dst/d, whose times are then put back as they were.
    type Change = fn(&Path);
    let extraneous: Change = |d| write_file(d.join("gone"), "x");
    let deletions = [
        "--delete",
        "--delete-before",
        "--delete-after",
        "--delete-delay",
    ];
    let mut changes: Vec<(&str, Change, Vec<&str>)> = deletions
        .iter()
        .map(|how| ("extraneous", extraneous, vec!["-a", how]))
        .collect();
    let more: [(&str, Change, Vec<&str>); 3] = [
        (
            "replaced",
            |d| write_file(d.join("p"), "other bytes, same name"),
            vec!["-a", "--delay-updates"],
        ),
        (
            "unlinked",
            |d| {
                fs::remove_file(d.join("b")).expect("rm");
                fs::copy(d.join("a"), d.join("b")).expect("copy");
                let t = lstat_times(&d.join("a"));
                set_times(&d.join("b"), Some(t.0), Some(t.1)).expect("times");
            },
            vec!["-aH"],
        ),
        (
            "extraneous dir",
            |d| write_file(d.join("x/y/z"), "deep"),
            vec!["-a", "--delete"],
        ),
    ];
    changes.extend(more);
    for (what, change, opts) in changes {
        let twin = Twin::new(build);
        twin.change(|side| {
            let d = side.join("dst/d");
            let (atime, mtime) = lstat_times(&d);
            change(&d);
            set_times(&d, Some(atime), Some(mtime)).expect("times back");
        });
        let mut args = opts.to_vec();
        args.extend(["src/", "dst/"]);
        let out = twin.both(&args, "dst");
        assert_success(&out);
        let diff = tree_diff(&twin.ri.join("src"), &twin.ri.join("dst"), SAME_AS_RSYNC);
        assert!(
            diff.is_empty(),
            "{what}, sync {args:?}:\n{}",
            diff.join("\n")
        );
    }
    // Changes in a directory other than the entry's: a backup kept under a --backup-dir in
    // DEST (made in DEST's root, which rsync leaves with the moment of the change as its mtime;
    // ringio gives it the source's, as -a asks, so no comparison with rsync here), and
    // temporaries written in a --temp-dir of DEST's (t: its walk may end before they are
    // written, so it keeps their moment, as with rsync; what is checked is that DEST and d,
    // where the file lands, get their times).

    for opts in [
        &["-a", "-b", "--backup-dir=bk"][..],
        &["-a", "--temp-dir=t"],
    ] {
        let twin = Twin::new(|side| {
            build(side);
            fs::create_dir(side.join("src/t")).expect("mkdir");
            fs::create_dir(side.join("dst/t")).expect("mkdir");
            settle(&side.join("src"));
            settle(&side.join("dst"));
        });
        twin.change(|side| {
            let d = side.join("dst/d");
            let (atime, mtime) = lstat_times(&d);
            write_file(d.join("p"), "other bytes, same name");
            set_times(&d, Some(atime), Some(mtime)).expect("times back");
        });
        let mut args = opts.to_vec();
        args.extend(["src/", "dst/"]);
        let out = sync(&twin.ri, &args);
        assert_success(&out);
        for dir in ["", "d"] {
            let (src, dst) = (twin.ri.join("src").join(dir), twin.ri.join("dst").join(dir));
            assert_eq!(
                lstat_times(&src).1,
                lstat_times(&dst).1,
                "sync {args:?}: mtime of {dir:?}"
            );
        }
    }
    // -K with a kept symlink to DEST itself: DEST is walked twice, as itself and as sub, and
    // what sub's walk makes changes DEST under the root's walk. DEST ends with the root's
    // (the source's) mtime, the last set (rsync leaves the moment of the change).
    let dir = tempfile::tempdir().expect("scratch dir");
    write_file(dir.path().join("src/sub/new"), "new");
    fs::create_dir(dir.path().join("dst")).expect("mkdir");
    symlink(".", dir.path().join("dst/sub")).expect("symlink");
    settle(&dir.path().join("src"));
    let src_mtime = lstat_times(&dir.path().join("src")).1;
    set_times(&dir.path().join("dst"), None, Some(src_mtime)).expect("times");
    let out = sync(dir.path(), &["-rtK", "src/", "dst/"]);
    assert_success(&out);
    assert!(dir.path().join("dst/new").exists());
    assert_eq!(
        lstat_times(&dir.path().join("dst")).1,
        src_mtime,
        "-K: DEST's mtime"
    );
    // ringio's own: a stale temporary is removed where the walk finds it (no --delete needed).
    for opts in [&["-a"][..], &["-a", "--delete"]] {
        let twin = Twin::new(build);
        let d = twin.ri.join("dst/d");
        let (atime, mtime) = lstat_times(&d);
        let stale = d.join(stale_temporary("a"));
        write_file(&stale, "half a file");
        set_times(&d, Some(atime), Some(mtime)).expect("times back");
        let mut args = opts.to_vec();
        args.extend(["src/", "dst/"]);
        let out = sync(&twin.ri, &args);
        assert_success(&out);
        assert!(!stale.exists(), "sync {args:?} left {}", stale.display());
        let diff = tree_diff(&twin.ri.join("src"), &twin.ri.join("dst"), SAME_AS_RSYNC);
        assert!(
            diff.is_empty(),
            "stale temporary, sync {args:?}:\n{}",
            diff.join("\n")
        );
    }
}

/// `--fake-super` keeps a FIFO as an empty file whose real mode its owner can always read and
/// write (the FIFO's bits with the owner's rw added, as rsync gives it), its true mode in
/// `user.rsync.%stat`: a FIFO of mode 000 still leaves a placeholder whose record can be read
/// back.
#[test]
fn fake_super_placeholders_keep_their_owner_rw_as_rsync() {
    let twin = Twin::new(|side| {
        fs::create_dir(side.join("src")).expect("mkdir");
        mkfifo(&side.join("src/closed"), 0o600);
        chmod(side.join("src/closed"), 0);
        mkfifo(&side.join("src/open"), 0o600);
        chmod(side.join("src/open"), 0o644);
        write_file(side.join("src/f"), "a file");
        chmod(side.join("src/f"), 0o640);
        settle(&side.join("src"));
    });
    let out = twin.both(&["-a", "--specials", "--fake-super", "src/", "dst/"], "dst");
    assert_success(&out);
    for (name, real) in [("closed", 0o600), ("open", 0o644), ("f", 0o640)] {
        let path = twin.ri.join("dst").join(name);
        let meta = fs::symlink_metadata(&path).expect("made");
        assert!(meta.is_file(), "{name}: a placeholder file");
        assert_eq!(
            meta.permissions().mode() & 0o7777,
            real,
            "{name}: its real mode"
        );
    }
    let record = get_xattr(&twin.ri.join("dst/closed"), "user.rsync.%stat").expect("record");
    assert!(
        record.starts_with(b"10000 "),
        "a FIFO of mode 000: {record:?}"
    );
}

/// `--fake-super` on a file that is there: a mode change goes to its record, and its real
/// mode is set to the one that keeps its owner's rw, whatever the record said before (the two
/// are not one mode, and the real one is what is set).
#[test]
fn fake_super_sets_the_real_mode_of_a_kept_file() {
    if !is_root() {
        cannot_run("a source of another owner needs root");
        return;
    }
    let dir = tempfile::tempdir().expect("scratch dir");
    let root = dir.path();
    write_file(root.join("src/f"), "kept");
    chmod(root.join("src/f"), 0o600);
    // Another owner: the copy holds a record (100600 and that owner).
    chown_tree(&root.join("src"), 1234, 5678);
    let args = ["-a", "--fake-super", "src/", "dst/"];
    assert_success(&sync(root, &args));
    // The real mode moved by hand; the record still says 600, which is also the real mode
    // that 400 is given (its owner's rw kept).
    chmod(root.join("dst/f"), 0o644);
    chmod(root.join("src/f"), 0o400);
    assert_success(&sync(root, &args));
    assert_eq!(mode_of(root.join("dst/f")) & 0o7777, 0o600, "its real mode");
    let record = get_xattr(&root.join("dst/f"), "user.rsync.%stat").expect("record");
    assert!(
        record.ends_with(b" 1234:5678") && record.starts_with(b"100400 "),
        "its record: {record:?}"
    );
}

/// `--chmod` as rsync reads it: `=` keeps the setuid, setgid and sticky bits unless it gives
/// `s` or `t`, `o` and no who do not stand for setgid, `X` looks at the mode before the first
/// item.
#[test]
fn chmod_keeps_special_bits_as_rsync() {
    for spec in [
        "a=rX,u+w", "Fg-w,o=", "ug=rwX", "g=rs", "a+s", "a-x,a+X", "Do=,F+t",
    ] {
        let twin = Twin::new(|side| {
            for (name, mode) in [("suid", 0o4755), ("sticky", 0o1644), ("both", 0o6754)] {
                let path = side.join("src").join(name);
                write_file(&path, name);
                chmod(&path, mode);
            }
            fs::create_dir(side.join("src/dir")).expect("mkdir");
            write_file(side.join("src/dir/plain"), "plain");
            chmod(side.join("src/dir/plain"), 0o644);
            chmod(side.join("src/dir"), 0o3775);
            settle(&side.join("src"));
        });
        let chmod_arg = format!("--chmod={spec}");
        let out = twin.both(&["-a", &chmod_arg, "src/", "dst/"], "dst");
        assert_success(&out);
        if spec == "a=rX,u+w" {
            let mode = |p: &str| mode_of(twin.ri.join("dst").join(p)) & 0o7777;
            assert_eq!(mode("suid"), 0o4755, "{spec}");
            assert_eq!(mode("dir"), 0o3755, "{spec}");
        }
    }
}

/// Without -p a DEST the sync makes takes its source directory's mode (after `--chmod`) less
/// the umask, as its subdirectories do and as rsync gives it; one that only holds a source
/// named without a trailing slash keeps mkdir's.
#[test]
fn a_new_dest_takes_its_source_directory_mode_without_p() {
    for (opts, src) in [
        (&["-rt"][..], "src/"),
        (&["-rt", "--chmod=D750,F600"], "src/"),
        (&["-rt"], "src"),
    ] {
        let twin = Twin::new(|side| {
            write_file(side.join("src/sub/f"), "f");
            chmod(side.join("src/sub"), 0o700);
            chmod(side.join("src"), 0o700);
            settle(&side.join("src"));
        });
        let mut args = opts.to_vec();
        args.extend([src, "new/"]);
        // DEST that only holds `src` gets the moment it was made, each tool its own.
        let check = if src == "src" {
            Check {
                mtime: false,
                ..SAME_AS_RSYNC
            }
        } else {
            SAME_AS_RSYNC
        };
        let out = twin.both_with(&args, "new", check);
        assert_success(&out);
        // (mkdir's mode depends on the umask: rsync's result is the measure there.)
        if src == "src/" {
            let want = if opts.len() == 1 { 0o700 } else { 0o750 };
            assert_eq!(mode_of(twin.ri.join("new")) & 0o7777, want, "sync {args:?}");
        }
    }
}

/// A user who is not root gets no device from `-a` (rsync's receiver makes devices only as
/// root, `--super` or `--fake-super`): it is skipped with rsync's line, the run exits 0, the rest
/// is synced, and a file of that name in DEST is not deleted for it under `--delete`.
#[test]
fn devices_are_skipped_for_a_user_who_is_not_root() {
    if !is_root() {
        cannot_run("making a device node and running as nobody need root");
        return;
    }
    let dir = tempfile::tempdir().expect("scratch dir");
    let root = dir.path();
    for tool in rsync_then_ringio() {
        let side = root.join(tool);
        fs::create_dir_all(side.join("src")).expect("mkdir");
        let dev = cstring(&side.join("src/null"));
        // SAFETY: `dev` is a NUL-terminated path in the scratch directory.
        let made = unsafe { libc::mknod(dev.as_ptr(), libc::S_IFCHR | 0o644, libc::makedev(1, 3)) };
        assert_eq!(made, 0, "mknod: {}", std::io::Error::last_os_error());
        write_file(side.join("src/f"), "a file");
        write_file(side.join("dst/null"), "kept: the source has that name");
        chown_tree(&side, NOBODY.0, NOBODY.1);
        let out = sync_or_rsync(tool, &side, &["-a", "--delete", "src/", "dst/"], None, true);
        assert_success(&out);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "skipping non-regular file \"null\"\n",
            "{tool}"
        );
        assert_eq!(
            fs::read_to_string(side.join("dst/f")).unwrap(),
            "a file",
            "{tool}"
        );
        let kept = fs::read_to_string(side.join("dst/null")).unwrap();
        assert_eq!(kept, "kept: the source has that name", "{tool}");
    }
}

/// A user who is not root syncs the `user.*` attributes of a read-only file and directory
/// (and of a file whose ACL denies its owner write) with -aAX, new and changed, as rsync does (the kernel lets only a writer set them, the owner
/// included, and a copy's mode takes the write bit away).
#[test]
fn xattrs_of_read_only_entries_reach_the_copy_as_a_user() {
    let dir = tempfile::tempdir().expect("scratch dir");
    for tool in rsync_then_ringio() {
        let side = dir.path().join(tool);
        if !read_only_with_xattrs(&side.join("src")) {
            skip!("no user xattrs on this filesystem");
        }
        if is_root() {
            chown_tree(&side, NOBODY.0, NOBODY.1);
        }
        let out = sync_or_rsync(tool, &side, &["-aAX", "src/", "dst/"], None, true);
        assert_success(&out);
        assert_read_only_with_xattrs(&side.join("dst"), tool);
        // A new attribute in the source: the copies, read-only now, take it too.
        for (name, mode) in [("f", 0o444), ("d", 0o555)] {
            let path = side.join("src").join(name);
            chmod(&path, 0o700);
            set_xattr(&path, "user.new", name.as_bytes()).expect("set xattr");
            chmod(&path, mode);
        }
        let out = sync_or_rsync(tool, &side, &["-aAX", "src/", "dst/"], None, true);
        assert_success(&out);
        assert_read_only_with_xattrs(&side.join("dst"), tool);
        for name in ["f", "d"] {
            let got = get_xattr(&side.join("dst").join(name), "user.new");
            assert_eq!(got.expect("user.new"), name.as_bytes(), "{tool}: {name}");
        }
    }
}

/// An attribute that cannot be set leaves the file in place, reported (23), as rsync leaves
/// it: under `--super` a user who is not root cannot give a file its owner, and the file is
/// kept with the user's and the private mode it was made with (its owner's bits): a failed
/// chown stops the attributes after it, so no group's or other's bit is given in someone
/// else's name.
#[test]
fn a_file_whose_owner_cannot_be_given_is_kept_and_reported() {
    if !is_root() {
        cannot_run("giving files another owner and running as nobody need root");
        return;
    }
    let dir = tempfile::tempdir().expect("scratch dir");
    for tool in rsync_then_ringio() {
        let side = dir.path().join(tool);
        write_file(side.join("src/f"), "the bytes");
        chmod(side.join("src/f"), 0o4755);
        symlink("f", side.join("src/l")).expect("symlink");
        chown_tree(&side, NOBODY.0, NOBODY.1);
        chown_tree(&side.join("src"), 1234, 5678);
        let args = ["-a", "--super", "src/", "dst/"];
        let out = sync_or_rsync(tool, &side, &args, None, true);
        assert_exit(&out, 23);
        if tool == "ringio" {
            assert_stderr_has(&out, "cannot preserve ownership for 'dst/f'");
        }
        let f = side.join("dst/f");
        assert_eq!(fs::read_to_string(&f).unwrap(), "the bytes", "{tool}");
        assert_eq!(mode_of(&f) & 0o7777, 0o700, "{tool}: the private mode");
        assert_eq!(fs::read_link(side.join("dst/l")).unwrap(), Path::new("f"));
    }
}
