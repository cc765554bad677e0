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

/// Runs `sync OPTS src/ dst` in `cwd` under RLIMIT_NOFILE `nofile`, too few: asserts that it
/// is refused, naming the limit, exit 1, with nothing made, and returns the least it names.
fn refused_naming_the_least(cwd: &Path, opts: &[&str], nofile: u64) -> u64 {
    let mut args = opts.to_vec();
    args.extend(["src/", "dst"]);
    let out = sync_limited(cwd, &args, nofile);
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
    // An extraneous chain deeper than any descriptor limit here: deleted whole (it used to
    // hold a descriptor a level, and failed with "Too many open files").
    let mut chain = dst.join("wide/w0500/chain");
    for level in 0..300 {
        chain = chain.join("c");
        if level % 50 == 0 {
            fs::create_dir_all(&chain).unwrap();
            write_file(chain.join("x"), "x");
        }
    }
    fs::create_dir_all(&chain).unwrap();
}

/// Under RLIMIT_NOFILE 64, 32 and the least a sync names for its options (which counts what
/// the child has open, what it holds for the whole run and a worker's side directories), a
/// tree 200 deep and one 2,000 wide sync whole, with every deletion mode, -H,
/// --delay-updates, --backup-dir and a manifest of DEST read back at the end, to the source's
/// content, modes, times and links, and to rsync's result. Before the descriptor budget, the
/// deep chain failed with "Too many open files" at 64; before the budget counted the side
/// directories and a later pass shared the first one's anchor, so did -H with a deletion
/// after the transfer, --delay-updates and --backup-dir at their least, the manifest's
/// walk down the deep chain, and the deletion of an extraneous chain 300 deep.
#[test]
fn deep_and_wide_trees_sync_under_low_descriptor_limits() {
    let dir = Scratch::new();
    let src = dir.join("src");
    build_source(&src);
    // The options, and the limits besides the least they name.
    let cases: [(&[&str], &[u64]); 5] = [
        // 4096: roomy, where a deletion holds three levels and reopens the rest.
        (&["-a", "--delete"], &[4096, 64, 32]),
        (&["-aH", "--delete-after"], &[64]),
        (&["-aH", "--delete-delay", "--delay-updates"], &[64]),
        (&["-a", "--delete", "--backup-dir=../bk"], &[]),
        (&["-a", "--delete", "--hash=sha256", "--manifest=sums"], &[]),
    ];
    for (opts, limits) in cases {
        let hard_links = opts[0] == "-aH";
        let least = refused_naming_the_least(dir.path(), opts, 6);
        // rsync's result, once for each set of options (without what it has not).
        let rs = dir.join("rs");
        let _ = fs::remove_dir_all(&rs);
        let _ = fs::remove_dir_all(dir.join("bk"));
        build_stale_dest(&src, &rs);
        let mut args: Vec<&str> = opts
            .iter()
            .filter(|o| !o.starts_with("--"))
            .copied()
            .collect();
        args.extend(
            opts.iter()
                .filter(|o| o.starts_with("--delete") || o.starts_with("--b")),
        );
        args.extend(["src/", "rs"]);
        let rsync_ran = rsync(dir.path(), &args).inspect(|out| {
            assert!(out.status.success(), "rsync {opts:?}: {}", describe(out));
        });
        for &nofile in limits.iter().chain([&least]) {
            let ri = dir.join("ri");
            let _ = fs::remove_dir_all(&ri);
            let _ = fs::remove_dir_all(dir.join("bk"));
            let _ = fs::remove_file(dir.join("sums"));
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
            if opts.contains(&"--backup-dir=../bk") {
                // The replaced and deleted files, kept at their paths from DEST.
                let kept = dir.join("bk/deep/d/f");
                assert_eq!(
                    fs::read_to_string(&kept).unwrap(),
                    "changed, longer than before\n"
                );
                assert_eq!(
                    fs::read_to_string(dir.join("bk/wide/stale")).unwrap(),
                    "old"
                );
            }
            if opts.contains(&"--manifest=sums") {
                // One line for each of DEST's files, which sha256sum checks.
                let sums = fs::read_to_string(dir.join("sums")).unwrap();
                assert_eq!(sums.lines().count(), count_files(&ri), "{nofile}: {sums}");
                let check = Command::new("sha256sum")
                    .args(["--quiet", "-c", "../sums"])
                    .current_dir(&ri)
                    .output()
                    .unwrap();
                assert!(check.status.success(), "{nofile}: {}", describe(&check));
            }
        }
    }
}

/// How many regular files are below `root`.
fn count_files(root: &Path) -> usize {
    let mut n = 0;
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let kind = e.file_type().unwrap();
            if kind.is_dir() {
                dirs.push(e.path());
            } else if kind.is_file() {
                n += 1;
            }
        }
    }
    n
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
    let refused = |nofile: u64| refused_naming_the_least(dir.path(), &["-a"], nofile);
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
