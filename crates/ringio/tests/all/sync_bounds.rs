//! `ringio sync`'s resource bounds: under a low RLIMIT_NOFILE it completes deep and wide
//! trees (with deletions and hard links) with rsync's result, and below the least it needs
//! it refuses, naming the limit; a big directory syncs whole.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::common::*;

/// rsync's result where it is installed (`None`: it is not).
fn rsync(cwd: &Path, args: &[&str]) -> Option<Output> {
    let out = Command::new("rsync")
        .args(args)
        .current_dir(cwd)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(out) => Some(out),
        Err(_) => {
            cannot_run("rsync is not installed (apt-get install rsync)");
            None
        }
    }
}

fn sync_limited(cwd: &Path, args: &[&str], nofile: u64) -> Output {
    Cp::bare()
        .arg("sync")
        .args(args)
        .current_dir(cwd)
        .nofile_limit(nofile)
        .run()
}

/// Runs `sync -a src/ dst` in `cwd` under RLIMIT_NOFILE `nofile`, too few: asserts that it
/// is refused, naming the limit, exit 1, with nothing made, and returns the least it names.
fn refused_naming_the_least(cwd: &Path, nofile: u64) -> u64 {
    let out = sync_limited(cwd, &["-a", "src/", "dst"], nofile);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{nofile}: {}", describe(&out));
    assert!(
        err.contains(&format!("{nofile} open files (RLIMIT_NOFILE) are too few")),
        "{nofile}: {err}"
    );
    assert!(!cwd.join("dst").exists(), "{nofile}: made something");
    let least = err
        .split("needs at least ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok());
    least.unwrap_or_else(|| panic!("{nofile}: no least named: {err}"))
}

/// Everything `-a` keeps but atimes (the source's move as it is read), with hard links
/// under -H.
fn archive(hard_links: bool) -> Check {
    Check {
        atime: false,
        xattrs: false,
        hard_links,
        ..Check::ARCHIVE
    }
}

/// A source of a chain 200 directories deep (a file at each level, a sibling directory at
/// every other, names of one inode at several depths, a symlink) and 2,000 sibling
/// directories of a file each; times in whole seconds, so that rsync's result compares.
fn build_source(src: &Path) {
    let mut at = src.join("deep");
    for level in 0..200 {
        at = at.join("d");
        fs::create_dir_all(&at).unwrap();
        write_file(at.join("f"), format!("{level}\n"));
        if level % 2 == 0 {
            fs::create_dir(at.join("sib")).unwrap();
            write_file(at.join("sib/g"), "g");
        }
        if level % 50 == 0 {
            fs::hard_link(src.join("deep/d/f"), at.join(format!("hl{level}"))).unwrap();
        }
    }
    symlink("../f", at.join("link")).unwrap();
    for i in 0..2000 {
        let dir = src.join(format!("wide/w{i:04}"));
        fs::create_dir_all(&dir).unwrap();
        write_file(dir.join("f"), format!("{i}"));
    }
    whole_seconds(src);
}

/// Sets every entry's mtime (directories last) to a whole second.
fn whole_seconds(root: &Path) {
    let out = Command::new("find")
        .arg(root)
        .args([
            "-depth",
            "-exec",
            "touch",
            "-h",
            "-d",
            "@1700000000",
            "{}",
            "+",
        ])
        .output()
        .expect("find");
    assert!(out.status.success(), "touch: {}", describe(&out));
}

/// A destination already holding what the run must delete: files and a tree at several
/// depths of the chain and among the wide directories, and the source's files changed.
fn build_stale_dest(src: &Path, dst: &Path) {
    let out = Command::new("cp")
        .arg("-a")
        .arg(src)
        .arg(dst)
        .output()
        .unwrap();
    assert!(out.status.success(), "cp: {}", describe(&out));
    let mut at = dst.join("deep");
    for level in 0..200 {
        at = at.join("d");
        if level % 40 == 7 {
            write_file(at.join("stale"), "old");
            fs::create_dir_all(at.join("gone/deeper")).unwrap();
            write_file(at.join("gone/deeper/x"), "x");
        }
        if level % 30 == 0 {
            write_file(at.join("f"), "changed, longer than before\n");
        }
    }
    fs::create_dir_all(dst.join("wide/w0999/extra/more")).unwrap();
    write_file(dst.join("wide/stale"), "old");
}

/// Under RLIMIT_NOFILE 64, 32 and the least a sync names (10 with only stdin, stdout and
/// stderr open), a tree
/// 200 deep and one 2,000 wide sync whole, with every deletion mode and -H, to the source's
/// content, modes, times and links, and to rsync's result. Before the descriptor budget,
/// the deep chain failed with "Too many open files" at 64.
#[test]
fn deep_and_wide_trees_sync_under_low_descriptor_limits() {
    let dir = Scratch::new();
    let src = dir.join("src");
    build_source(&src);
    // The least the child needs, with what it has open (12 when it has 0, 1 and 2).
    let least = refused_naming_the_least(dir.path(), 6);
    let cases: [&[&str]; 3] = [
        &["-a", "--delete"],
        &["-aH", "--delete-after"],
        &["-aH", "--delete-delay"],
    ];
    for opts in cases {
        let hard_links = opts[0] == "-aH";
        // rsync's result, once for each set of options.
        let rs = dir.join("rs");
        let _ = fs::remove_dir_all(&rs);
        build_stale_dest(&src, &rs);
        let mut args = opts.to_vec();
        args.extend(["src/", "rs"]);
        let rsync_ran = rsync(dir.path(), &args).inspect(|out| {
            assert!(out.status.success(), "rsync {opts:?}: {}", describe(out));
        });
        let limits: &[u64] = if hard_links {
            &[64, least]
        } else {
            &[64, 32, least]
        };
        for &nofile in limits {
            let ri = dir.join("ri");
            let _ = fs::remove_dir_all(&ri);
            build_stale_dest(&src, &ri);
            let mut args = opts.to_vec();
            args.extend(["src/", "ri"]);
            let out = sync_limited(dir.path(), &args, nofile);
            assert!(
                out.status.success(),
                "{nofile} {opts:?}: {}",
                describe(&out)
            );
            assert_trees_equal(&src, &ri, archive(hard_links));
            if rsync_ran.is_some() {
                assert_trees_equal(&rs, &ri, archive(hard_links));
            }
        }
    }
}

/// Below the least it needs, a sync refuses at once, naming RLIMIT_NOFILE and the least,
/// exit 1, and makes nothing (it used to start, fail entry by entry and leave a partial
/// copy). At the least it names, it syncs whole. The least counts what the child has open
/// at its start, which differs with how the tests are run (stdin closed or not), so the
/// test reads it from the message rather than assume it.
#[test]
fn too_few_descriptors_are_refused_naming_the_limit() {
    let dir = Scratch::new();
    let src = dir.join("src");
    fs::create_dir_all(src.join("a/b")).unwrap();
    write_file(src.join("a/b/f"), "f");
    let refused = |nofile: u64| refused_naming_the_least(dir.path(), nofile);
    let least = refused(6);
    assert!(
        least > 8,
        "the least named, {least}, is below what a sync needs"
    );
    assert_eq!(refused(8), least);
    assert_eq!(refused(least - 1), least);
    let out = sync_limited(dir.path(), &["-a", "src/", "dst"], least);
    assert_success(&out);
    assert_trees_equal(&src, &dir.join("dst"), archive(false));
}

/// One directory of 10,000 entries (and 2,000 extraneous ones at the destination) syncs
/// whole with --delete, and a second run changes nothing.
#[test]
fn a_directory_of_ten_thousand_entries_syncs_whole() {
    let dir = Scratch::new();
    let src = dir.join("src");
    fs::create_dir(&src).unwrap();
    for i in 0..10_000 {
        write_file(src.join(format!("entry-{i:05}")), format!("{i}"));
    }
    let dst: PathBuf = dir.join("dst");
    fs::create_dir(&dst).unwrap();
    for i in 0..2_000 {
        write_file(dst.join(format!("extra-{i:05}")), "x");
    }
    write_file(dst.join("entry-00007"), "not the source's");
    for run in ["first", "again"] {
        let out = Cp::bare()
            .arg("sync")
            .args(["-a", "--delete", "-i", "src/", "dst/"])
            .current_dir(dir.path())
            .run();
        assert_success(&out);
        assert_trees_equal(&src, &dst, archive(false));
        if run == "again" {
            assert!(out.stdout.is_empty(), "{}", describe(&out));
        }
    }
}
