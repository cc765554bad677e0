//! `ringio sync`'s destination side: DEST and the trees a run writes under (the backup dir,
//! `-T`, `--delay-updates`' `.~tmp~`) are sandboxes a planted symlink cannot lead out of, `-x`
//! deletes nothing on another filesystem, and every data path leaves the source's bytes
//! (holes, hard-link groups), extended attributes and followed links, as rsync leaves them.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::*;

fn sync(cwd: &Path, args: &[&str]) -> Output {
    Cp::bare().arg("sync").args(args).current_dir(cwd).run()
}

/// What a comparison runs: ringio (`None`), then every rsync the machine has: the one on
/// PATH, and the builds `tests/rsync/run.sh` keeps in its cache (3.2.7, the reference).
fn tools() -> Vec<Option<PathBuf>> {
    let mut all = vec![None, Some(PathBuf::from("rsync"))];
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")));
    if let Some(Ok(dirs)) = cache.map(|c| fs::read_dir(c.join("ringio-rsync"))) {
        let mut built: Vec<PathBuf> = dirs
            .filter_map(|d| Some(d.ok()?.path().join("rsync")))
            .filter(|p| p.is_file())
            .collect();
        built.sort();
        all.extend(built.into_iter().map(Some));
    }
    all
}

/// Runs `args` with one of [`tools`].
fn run_tool(tool: &Option<PathBuf>, cwd: &Path, args: &[&str]) -> Output {
    match tool {
        None => sync(cwd, args),
        Some(rsync) => std::process::Command::new(rsync)
            .args(args)
            .current_dir(cwd)
            .output()
            .expect("rsync runs"),
    }
}

/// Each tool's result equals ringio's (the first).
fn assert_as_rsync<T: PartialEq + std::fmt::Debug>(
    tools: &[Option<PathBuf>],
    results: &[T],
    what: &str,
) {
    for (tool, got) in tools.iter().zip(results).skip(1) {
        assert_eq!(&results[0], got, "{what}: ringio, then {tool:?}");
    }
}

/// Every entry under `root` but `skip` (and what is below it): type, mode, size, mtime, inode
/// and link count (a hard link made to it from DEST shows), bytes or link target, one line
/// each.
fn snapshot(root: &Path, skip: &Path) -> Vec<String> {
    fn walk(p: &Path, skip: &Path, out: &mut Vec<String>) {
        let m = p.symlink_metadata().unwrap();
        let what = if m.file_type().is_symlink() {
            format!("-> {}", fs::read_link(p).unwrap().display())
        } else if m.is_file() {
            format!("{:?}", fs::read(p).unwrap())
        } else {
            String::new()
        };
        out.push(format!(
            "{} {:o} {} {}.{} ino {} links {} {what}",
            p.display(),
            m.mode(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ino(),
            m.nlink()
        ));
        if m.is_dir() {
            let mut names: Vec<PathBuf> = fs::read_dir(p)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            names.sort();
            for child in names.iter().filter(|c| c.as_path() != skip) {
                walk(child, skip, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, skip, &mut out);
    out
}

/// A scratch tree with `src/x/f` newer than `dst/x/f`, `dst/gone` only in DEST, and an
/// `outside/` holding a file and a directory with a file.
fn backup_tree(dir: &Path) {
    fs::create_dir_all(dir.join("src/x")).unwrap();
    fs::create_dir_all(dir.join("dst/x")).unwrap();
    fs::create_dir_all(dir.join("outside/f/deep")).unwrap();
    write_file(dir.join("src/x/f"), "new content");
    write_file(dir.join("dst/x/f"), "old");
    write_file(dir.join("dst/gone"), "deleted with a backup");
    write_file(dir.join("outside/secret"), "secret");
    write_file(dir.join("outside/f/deep/keep"), "keep");
}

/// `--backup-dir` inside DEST, with a symlink to outside planted at each step of the backups'
/// paths: nothing outside DEST changes. Where rsync replaces the symlink by a directory (a
/// step below the backup dir), so does ringio; the backup dir itself a symlink is refused.
#[test]
fn backups_never_follow_a_symlink_planted_under_dest() {
    let outside = |dir: &Path| dir.join("outside").display().to_string();
    // (where the symlink is planted, what it points to, exit wanted)
    let plants: &[(&str, &str, i32)] = &[
        ("dst/.bk", "", 23),
        ("dst/.bk/x", "", 0),
        ("dst/.bk/x/f", "/f", 0),
        ("dst/.bk/x/f", "/secret", 0),
        ("dst/.bk/gone", "/f", 0),
        ("dst/.bk/a/b", "", 0),
    ];
    for &(at, to, code) in plants {
        for extra in [&["--delete"][..], &["--delete-after"], &["--inplace"]] {
            let dir = Scratch::new();
            backup_tree(dir.path());
            fs::create_dir_all(dir.join("src/a/b")).unwrap();
            fs::create_dir_all(dir.join("dst/a/b")).unwrap();
            write_file(dir.join("src/a/b/f"), "new a/b/f");
            write_file(dir.join("dst/a/b/f"), "old");
            let link = dir.join(at);
            fs::create_dir_all(link.parent().unwrap()).unwrap();
            symlink(format!("{}{to}", outside(dir.path())), &link).unwrap();
            let before = snapshot(dir.path(), &dir.join("dst"));
            let mut args = vec!["-a", "--backup-dir=.bk"];
            args.extend_from_slice(extra);
            args.extend(["src/", "dst/"]);
            let out = sync(dir.path(), &args);
            assert_eq!(
                before,
                snapshot(dir.path(), &dir.join("dst")),
                "{at} -> outside{to}, {args:?}: something outside DEST changed\n{}",
                describe(&out)
            );
            assert_eq!(out.status.code(), Some(code), "{at}: {}", describe(&out));
            if code == 0 {
                // --delete-after deletes the backup dir's first copy into itself, as rsync.
                let kept = ["dst/.bk/x/f", "dst/.bk/.bk/x/f"]
                    .iter()
                    .any(|p| fs::read(dir.join(p)).is_ok_and(|b| b == b"old"));
                assert!(
                    kept,
                    "{at}, {args:?}: the backup is lost\n{}",
                    describe(&out)
                );
                assert_eq!(fs::read(dir.join("dst/x/f")).unwrap(), b"new content");
            } else {
                // The backup could not be made: the old file stays, and the error says why.
                assert_eq!(fs::read(dir.join("dst/x/f")).unwrap(), b"old", "{at}");
                assert_stderr_has(&out, "'.bk/x/f': Too many levels of symbolic links");
            }
        }
    }
}

/// Where rsync replaces a planted symlink on a backup's path, ringio's backup tree ends the
/// same (a directory holding the backup, the symlink gone).
#[test]
fn a_symlink_on_a_backups_path_is_replaced_as_rsync_replaces_it() {
    let mut results = Vec::new();
    let tools = tools();
    for tool in &tools {
        let dir = Scratch::new();
        backup_tree(dir.path());
        fs::create_dir_all(dir.join("dst/.bk")).unwrap();
        symlink(dir.join("outside"), dir.join("dst/.bk/x")).unwrap();
        // (Without --delete, which would delete the planted link first: .bk is not in SRC.)
        let args = ["-a", "--backup-dir=.bk", "src/", "dst/"];
        let out = run_tool(tool, dir.path(), &args);
        assert_success(&out);
        let mut got = Vec::new();
        for p in [
            "dst/.bk/x",
            "dst/.bk/x/f",
            "outside/f/deep/keep",
            "outside/secret",
        ] {
            let Ok(m) = dir.join(p).symlink_metadata() else {
                got.push((p, false, false, b"(missing)".to_vec()));
                continue;
            };
            let bytes = if m.is_file() {
                fs::read(dir.join(p)).unwrap()
            } else {
                Vec::new()
            };
            got.push((p, m.file_type().is_symlink(), m.is_dir(), bytes));
        }
        results.push(got);
    }
    assert_as_rsync(&tools, &results, "");
}

/// The backup's name taken by a directory holding a symlink to outside: the directory goes,
/// what the symlink leads to stays.
#[test]
fn a_directory_at_a_backups_name_is_removed_without_following_its_symlinks() {
    let dir = Scratch::new();
    backup_tree(dir.path());
    fs::create_dir_all(dir.join("dst/.bk/x/f")).unwrap();
    symlink(dir.join("outside"), dir.join("dst/.bk/x/f/out")).unwrap();
    symlink(dir.join("outside/secret"), dir.join("dst/.bk/x/f/secret")).unwrap();
    let before = snapshot(dir.path(), &dir.join("dst"));
    let out = sync(dir.path(), &["-a", "--backup-dir=.bk", "src/", "dst/"]);
    assert_success(&out);
    assert_eq!(before, snapshot(dir.path(), &dir.join("dst")));
    assert_eq!(fs::read(dir.join("dst/.bk/x/f")).unwrap(), b"old");
}

/// `-T` inside DEST a symlink to outside, and `--delay-updates`' `.~tmp~` one: the
/// temporaries are never written there.
#[test]
fn temporaries_never_follow_a_symlink_planted_under_dest() {
    let cases: &[(&str, &[&str])] = &[
        ("dst/.tmp", &["-a", "-T", ".tmp"]),
        ("dst/.tmp", &["-a", "-T", ".tmp/"]),
        ("dst/.~tmp~", &["-a", "--delay-updates"]),
        ("dst/x/.~tmp~", &["-a", "--delay-updates"]),
    ];
    for &(at, args) in cases {
        let dir = Scratch::new();
        backup_tree(dir.path());
        write_file(dir.join("src/new"), "a new file");
        symlink(dir.join("outside"), dir.join(at)).unwrap();
        let before = snapshot(dir.path(), &dir.join("dst"));
        let mut args = args.to_vec();
        args.extend(["src/", "dst/"]);
        let out = sync(dir.path(), &args);
        assert_eq!(
            before,
            snapshot(dir.path(), &dir.join("dst")),
            "{at}, {args:?}: something outside DEST changed\n{}",
            describe(&out)
        );
    }
}

/// `-x --delete` with a filesystem mounted inside DEST: nothing on it is deleted, and the
/// directory that holds it stays ("cannot delete non-empty directory"), as rsync leaves both.
#[test]
fn one_file_system_never_deletes_on_a_filesystem_mounted_in_dest() {
    if !is_root() {
        skip!("mounting a tmpfs needs root");
    }
    let mut results = Vec::new();
    let tools = tools();
    for tool in &tools {
        let dir = Scratch::new();
        fs::create_dir_all(dir.join("src/mnt")).unwrap();
        write_file(dir.join("src/a"), "a");
        write_file(dir.join("src/mnt/keep"), "keep");
        for d in ["dst/plain/mnt", "dst/mnt", "dst/gone/deeper/mnt"] {
            fs::create_dir_all(dir.join(d)).unwrap();
        }
        write_file(dir.join("dst/plain/x"), "x");
        let mounts: Vec<TmpfsMount> = ["dst/plain/mnt", "dst/mnt", "dst/gone/deeper/mnt"]
            .iter()
            .map(|d| TmpfsMount::new(&dir.join(d), "1m").expect("tmpfs"))
            .collect();
        for m in &mounts {
            write_file(m.path().join("on_the_mount"), "mounted");
            fs::create_dir(m.path().join("sub")).unwrap();
            write_file(m.path().join("sub/deep"), "mounted");
        }
        let mut left = Vec::new();
        for del in ["--delete", "--delete-after", "--delete-before"] {
            let args = ["-ax", del, "src/", "dst/"];
            let out = run_tool(tool, dir.path(), &args);
            assert_success(&out);
            for m in &mounts {
                for f in ["on_the_mount", "sub/deep"] {
                    left.push((del, f, m.path().join(f).exists()));
                }
            }
            left.push((del, "plain/x", dir.join("dst/plain/x").exists()));
            left.push((del, "mnt/keep", dir.join("dst/mnt/keep").exists()));
        }
        drop(mounts);
        results.push(left);
    }
    assert_as_rsync(&tools, &results, "-x");
    let on_mounts = results[0]
        .iter()
        .filter(|(_, f, _)| !f.contains('/') || *f == "sub/deep");
    assert!(
        on_mounts.clone().all(|(_, _, kept)| *kept),
        "{:?}",
        results[0]
    );
}

/// A source file with holes (at the start, in the middle, at the end) synced with `-S` over an
/// existing file of random bytes: DEST is byte-identical, in place or not, and a second run
/// finds nothing to do.
#[test]
fn sparse_copies_over_old_data_leave_zeros_in_the_holes() {
    let mib = 1 << 20;
    let options: &[&[&str]] = &[
        &["-aS", "--inplace"],
        &["-a", "--inplace"],
        &["-S", "--inplace", "-r"],
        &["-aS", "--inplace", "--no-whole-file"],
        &["-aS"],
        &["-aS", "--delay-updates"],
        &["-aS", "--partial"],
    ];
    for opts in options {
        for old_len in [3 * mib, 6 * mib, mib / 2] {
            let dir = Scratch::new();
            fs::create_dir_all(dir.join("src")).unwrap();
            fs::create_dir_all(dir.join("dst")).unwrap();
            let f = fs::File::create(dir.join("src/f")).unwrap();
            f.set_len(4 * mib as u64).unwrap();
            use std::os::unix::fs::FileExt;
            f.write_all_at(b"data in the middle", mib as u64 + 5)
                .unwrap();
            f.write_all_at(&vec![7u8; 8192], 2 * mib as u64).unwrap();
            drop(f);
            let old: Vec<u8> = (0..old_len).map(|i| (i * 31 % 251) as u8 + 1).collect();
            write_file(dir.join("dst/f"), &old);
            let mut args = opts.to_vec();
            args.extend(["src/", "dst/"]);
            let out = sync(dir.path(), &args);
            assert_success(&out);
            assert!(
                fs::read(dir.join("src/f")).unwrap() == fs::read(dir.join("dst/f")).unwrap(),
                "{opts:?} over {old_len} bytes: DEST differs from SRC"
            );
        }
    }
}

/// The names of DEST's files grouped by inode, each with its content.
fn link_groups(dst: &Path, names: &[&str]) -> BTreeMap<Vec<String>, String> {
    let mut by_ino: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for n in names {
        if let Ok(m) = dst.join(n).symlink_metadata() {
            by_ino.entry(m.ino()).or_default().push(n.to_string());
        }
    }
    by_ino
        .into_values()
        .map(|g| {
            let content = fs::read_to_string(dst.join(&g[0])).unwrap();
            (g, content)
        })
        .collect()
}

/// `-H` with `--delay-updates`, `--ignore-existing` and `-u`, names of one group in DEST with
/// old bytes: each name ends linked to the file that holds the group's bytes, or left as it
/// was, as rsync leaves it (names grouped and their content compared).
#[test]
fn hard_links_join_the_groups_new_bytes_as_rsync_links_them() {
    let names = ["a", "b", "c", "e", "x/d"];
    for opt in ["--delay-updates", "--ignore-existing", "-u"] {
        let mut results = Vec::new();
        let tools = tools();
        for tool in &tools {
            let dir = Scratch::new();
            fs::create_dir_all(dir.join("src/x")).unwrap();
            fs::create_dir_all(dir.join("dst")).unwrap();
            write_file(dir.join("src/a"), "new content");
            for n in &names[1..] {
                fs::hard_link(dir.join("src/a"), dir.join("src").join(n)).unwrap();
            }
            set_times(&dir.join("src/a"), None, Some(Ts::new(1_500_000_000, 0))).unwrap();
            write_file(dir.join("dst/a"), "old a");
            write_file(dir.join("dst/c"), "old c");
            if opt == "-u" {
                for n in ["dst/a", "dst/c"] {
                    set_times(&dir.join(n), None, Some(Ts::new(1_900_000_000, 0))).unwrap();
                }
            }
            let args = ["-aH", opt, "src/", "dst/"];
            let out = run_tool(tool, dir.path(), &args);
            assert_success(&out);
            assert!(!dir.join("dst/.~tmp~").exists() && !dir.join("dst/x/.~tmp~").exists());
            results.push(link_groups(&dir.join("dst"), &names));
        }
        assert_as_rsync(&tools, &results, opt);
    }
}

/// `-X` as root: a symlink's, a FIFO's and a device's trusted.* attributes are brought over,
/// and changed ones brought again, as rsync (and cp) bring them.
#[test]
fn xattrs_of_symlinks_and_fifos_are_synced() {
    if !is_root() {
        skip!("trusted.* attributes need root");
    }
    let set_l = |p: &Path, v: &[u8]| {
        let c = cstring(p);
        // SAFETY: valid C strings and buffer for the call.
        let r = unsafe {
            libc::lsetxattr(
                c.as_ptr(),
                c"trusted.t".as_ptr(),
                v.as_ptr().cast(),
                v.len(),
                0,
            )
        };
        assert_eq!(r, 0, "lsetxattr {}", p.display());
    };
    let get_l = |p: &Path| -> Vec<u8> {
        let c = cstring(p);
        let mut buf = [0u8; 64];
        // SAFETY: valid C strings and buffer for the call.
        let n = unsafe {
            libc::lgetxattr(
                c.as_ptr(),
                c"trusted.t".as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n < 0 {
            return Vec::new();
        }
        buf[..n as usize].to_vec()
    };
    let mut results = Vec::new();
    let tools = tools();
    for tool in &tools {
        let dir = Scratch::new();
        fs::create_dir_all(dir.join("src")).unwrap();
        symlink("nowhere", dir.join("src/link")).unwrap();
        mkfifo(&dir.join("src/fifo"), 0o644);
        set_l(&dir.join("src/link"), b"on the link");
        set_l(&dir.join("src/fifo"), b"on the fifo");
        let dev = cstring(&dir.join("src/null"));
        // SAFETY: a valid C string; makes a character device (1, 3) as root.
        let made = unsafe { libc::mknod(dev.as_ptr(), libc::S_IFCHR | 0o644, libc::makedev(1, 3)) };
        assert_eq!(made, 0, "mknod");
        set_l(&dir.join("src/null"), b"on the device");
        let run = |args: &[&str]| run_tool(tool, dir.path(), args);
        let mut got = Vec::new();
        assert_success(&run(&["-aX", "src/", "dst/"]));
        got.push([
            get_l(&dir.join("dst/link")),
            get_l(&dir.join("dst/fifo")),
            get_l(&dir.join("dst/null")),
        ]);
        set_l(&dir.join("src/link"), b"changed");
        set_l(&dir.join("src/fifo"), b"changed too");
        let again = run(&["-aXi", "src/", "dst/"]);
        assert_success(&again);
        got.push([
            get_l(&dir.join("dst/link")),
            get_l(&dir.join("dst/fifo")),
            get_l(&dir.join("dst/null")),
        ]);
        results.push(got);
    }
    assert_as_rsync(&tools, &results, "");
    assert_eq!(results[0][0][0], b"on the link");
    assert_eq!(results[0][0][2], b"on the device");
    assert_eq!(results[0][1][1], b"changed too");
}

/// `--copy-unsafe-links` with a symlink to a directory out of the transfer: the directory it
/// leads to is copied, as rsync copies it (a safe link to a directory stays a link).
#[test]
fn copy_unsafe_links_copies_the_directory_a_link_leads_to() {
    let mut results = Vec::new();
    let tools = tools();
    for tool in &tools {
        let dir = Scratch::new();
        fs::create_dir_all(dir.join("out/t/sub")).unwrap();
        fs::create_dir_all(dir.join("src/in")).unwrap();
        write_file(dir.join("out/t/f"), "f");
        write_file(dir.join("out/t/sub/g"), "g");
        write_file(dir.join("src/in/h"), "h");
        symlink("../out/t", dir.join("src/unsafe")).unwrap();
        symlink(dir.join("out/t"), dir.join("src/absolute")).unwrap();
        symlink("in", dir.join("src/safe")).unwrap();
        let args = ["-a", "--copy-unsafe-links", "src/", "dst/"];
        let out = run_tool(tool, dir.path(), &args);
        assert_success(&out);
        let mut got = Vec::new();
        for p in ["unsafe/f", "unsafe/sub/g", "absolute/f", "absolute/sub/g"] {
            got.push(fs::read_to_string(dir.join("dst").join(p)).ok());
        }
        let safe = dir.join("dst/safe").symlink_metadata().unwrap();
        got.push(Some(safe.file_type().is_symlink().to_string()));
        results.push(got);
    }
    assert_as_rsync(&tools, &results, "");
    assert_eq!(results[0][0].as_deref(), Some("f"));
}

/// A random tree under `root`: directories `d0`.. (some nested), files of random sizes
/// (some sparse), symlinks inside the tree, a hard link.
fn random_tree(rng: &mut Prng, root: &Path, tag: &str) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut dirs = vec![PathBuf::new()];
    for i in 0..rng.range(2, 5) {
        let parent = rng.pick(&dirs).clone();
        let d = parent.join(format!("d{i}"));
        fs::create_dir_all(root.join(&d)).unwrap();
        dirs.push(d);
    }
    let mut files = Vec::new();
    for i in 0..rng.range(3, 9) {
        let f = rng.pick(&dirs).join(format!("f{i}"));
        let len = rng.below(3 * 65536) as usize;
        let mut bytes = vec![0u8; len];
        rng.fill(&mut bytes);
        bytes.extend_from_slice(tag.as_bytes());
        write_file(root.join(&f), &bytes);
        if rng.chance(20) {
            let file = fs::OpenOptions::new()
                .write(true)
                .open(root.join(&f))
                .unwrap();
            file.set_len(len as u64 + 3 * 65536).unwrap();
        }
        files.push(f);
    }
    if rng.chance(50) {
        let f = rng.pick(&files).clone();
        let _ = fs::hard_link(root.join(&f), root.join(rng.pick(&dirs)).join("hl"));
    }
    let d = rng.pick(&dirs).join("ln");
    let _ = symlink(rng.pick(&files), root.join(d));
    (dirs, files)
}

/// The escape property: random trees with symlinks to outside planted in DEST (its
/// directories, the backup dir and its paths, `.~tmp~`, the `-T` dir) and in the source, random
/// option sets, run as root and as nobody: no byte, mode, mtime or entry outside DEST changes.
#[test]
fn no_option_set_writes_outside_dest_through_a_planted_symlink() {
    let options: &[&[&str]] = &[
        &["--delete"],
        &["--delete-after"],
        &["--delete-before"],
        &["--delete", "--force"],
        &["-b"],
        &["--backup-dir=.bk"],
        &["--backup-dir=.bk", "--suffix=.old"],
        &["-L"],
        &["--copy-unsafe-links"],
        &["-x"],
        &["--inplace"],
        &["-S"],
        &["--delay-updates"],
        &["-T", ".tmp"],
        &["-H"],
        &["-c"],
        &["-I"],
        &["--link-dest=.bk"],
        &["--copy-dest=.bk/d0"],
    ];
    for seed in 0..24u64 {
        let mut rng = Prng::new(seed);
        let dir = Scratch::new();
        let (src, dst, out) = (dir.join("src"), dir.join("dst"), dir.join("outside"));
        random_tree(&mut rng, &src, "src");
        let (dst_dirs, dst_files) = random_tree(&mut rng, &dst, "dst");
        random_tree(&mut rng, &out, "outside");
        fs::create_dir_all(dst.join(".bk/d0")).unwrap();
        // Planted: DEST's own directories and files, the trees a run writes under.
        let mut plants: Vec<PathBuf> = dst_dirs.iter().skip(1).cloned().collect();
        plants.extend(dst_files);
        plants.extend(
            [
                ".bk",
                ".bk/d0",
                ".bk/d0/d1",
                ".bk/f0",
                ".~tmp~",
                "d0/.~tmp~",
                ".tmp",
            ]
            .map(PathBuf::from),
        );
        for _ in 0..rng.range(1, 5) {
            let at = dst.join(rng.pick(&plants));
            let to = match rng.below(3) {
                0 => out.clone(),
                1 => out.join("d0"),
                _ => out.join("f0"),
            };
            if at.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                fs::remove_dir_all(&at).unwrap();
            } else {
                let _ = fs::remove_file(&at);
            }
            if at.parent().is_some_and(|p| p.is_dir() && !p.is_symlink()) {
                let _ = symlink(&to, &at);
            }
        }
        // And in the source: followed under -L, --copy-unsafe-links.
        let _ = symlink(&out, src.join("to_outside"));
        let mut args: Vec<&str> = vec!["-a"];
        for _ in 0..rng.range(1, 5) {
            let picked: &[&str] = options[rng.below(options.len() as u64) as usize];
            args.extend_from_slice(picked);
        }
        args.extend(["src/", "dst/"]);
        let as_nobody = seed % 2 == 1;
        if as_nobody {
            dir.give_to(NOBODY.0, NOBODY.1);
            for p in [&src, &dst, &out] {
                chown_tree(p, NOBODY.0, NOBODY.1);
            }
        }
        let before = snapshot(dir.path(), &dst);
        let mut cmd = Cp::bare().arg("sync").args(&args).current_dir(dir.path());
        if as_nobody {
            cmd = cmd.run_as(NOBODY.0, NOBODY.1);
        }
        let run = cmd.run();
        assert_eq!(
            before,
            snapshot(dir.path(), &dst),
            "seed {seed}, {args:?} (as {}): something outside DEST changed\n{}",
            if as_nobody { "nobody" } else { "root" },
            describe(&run)
        );
    }
}

/// `--copy-unsafe-links` with an absolute symlink to its own source directory: the walk stops
/// at the cycle (exit 23, the error named), where it would copy the tree into itself without
/// end; rsync stops at ELOOP too.
#[test]
fn copy_unsafe_links_stops_at_a_cycle() {
    let dir = Scratch::new();
    fs::create_dir_all(dir.join("src/sub")).unwrap();
    write_file(dir.join("src/a"), "a");
    symlink(dir.join("src"), dir.join("src/sub/back")).unwrap();
    let out = Cp::bare()
        .arg("sync")
        .args(["-a", "--copy-unsafe-links", "src/", "dst/"])
        .current_dir(dir.path())
        .timeout(std::time::Duration::from_secs(60))
        .run();
    assert_exit(&out, 23);
    assert_stderr_has(&out, "Too many levels of symbolic links");
    assert_eq!(fs::read(dir.join("dst/a")).unwrap(), b"a");
    assert!(!dir.join("dst/sub/back/sub").exists(), "{}", describe(&out));
}

/// `-H` where the group's first name cannot be written (its directory is not the user's): a
/// later name is not linked to the old file left there, but copied (exit 23). rsync 3.2.7
/// and 3.5.0 hang here (their receiver waits for the failed name), so there is no rsync
/// result to compare with.
#[test]
fn a_hard_link_whose_first_name_failed_is_copied_not_linked_to_old_bytes() {
    if !is_root() {
        skip!("running as another user needs root");
    }
    let dir = Scratch::new();
    fs::create_dir_all(dir.join("src/sub")).unwrap();
    fs::create_dir_all(dir.join("dst/sub")).unwrap();
    write_file(dir.join("src/a"), "new content");
    fs::hard_link(dir.join("src/a"), dir.join("src/sub/b")).unwrap();
    set_times(&dir.join("src/a"), None, Some(Ts::new(1_500_000_000, 0))).unwrap();
    write_file(dir.join("dst/a"), "old");
    dir.give_to(NOBODY.0, NOBODY.1);
    chown_tree(&dir.join("src"), NOBODY.0, NOBODY.1);
    chown_tree(&dir.join("dst/sub"), NOBODY.0, NOBODY.1);
    // The user's own file (so the kernel lets it be linked), in a directory that is not.
    chown_tree(&dir.join("dst/a"), NOBODY.0, NOBODY.1);
    let out = Cp::bare()
        .arg("sync")
        .args(["-aH", "src/", "dst/"])
        .current_dir(dir.path())
        .run_as(NOBODY.0, NOBODY.1)
        .run();
    assert_exit(&out, 23);
    assert_eq!(fs::read(dir.join("dst/a")).unwrap(), b"old");
    assert_eq!(
        fs::read(dir.join("dst/sub/b")).unwrap(),
        b"new content",
        "{}",
        describe(&out)
    );
}

/// `--link-dest` (and `--copy-dest`) naming a tree inside DEST that is a planted symlink to
/// outside: nothing outside is linked into DEST (a later `--inplace` run would write through
/// the link into the outside file); the file is copied.
#[test]
fn a_link_dest_inside_dest_is_never_reached_through_a_planted_symlink() {
    for opt in [
        "--link-dest=.prev",
        "--copy-dest=.prev",
        "--link-dest=../dst/.prev",
    ] {
        let dir = Scratch::new();
        fs::create_dir_all(dir.join("src")).unwrap();
        fs::create_dir_all(dir.join("dst")).unwrap();
        fs::create_dir_all(dir.join("outside")).unwrap();
        write_file(dir.join("src/f"), "same bytes");
        write_file(dir.join("outside/f"), "same bytes");
        let t = Some(Ts::new(1_500_000_000, 0));
        set_times(&dir.join("src/f"), None, t).unwrap();
        set_times(&dir.join("outside/f"), None, t).unwrap();
        symlink(dir.join("outside"), dir.join("dst/.prev")).unwrap();
        let out = sync(dir.path(), &["-a", opt, "src/", "dst/"]);
        let (inside, outside) = (
            fs::metadata(dir.join("dst/f")).unwrap(),
            fs::metadata(dir.join("outside/f")).unwrap(),
        );
        assert_ne!(
            inside.ino(),
            outside.ino(),
            "{opt}: linked out\n{}",
            describe(&out)
        );
        assert_eq!(outside.nlink(), 1, "{opt}");
        assert_eq!(fs::read(dir.join("dst/f")).unwrap(), b"same bytes", "{opt}");
    }
}

/// A `--backup-dir` that is DEST itself (or the file's own directory), by any spelling, with
/// no suffix: the backup's name is the file's. rsync refuses `.` and `./` before it starts;
/// every other spelling is found by the directory's identity, and the file is left as it
/// was, never removed to make room for its own backup.
#[test]
fn a_backup_dir_that_is_the_files_own_directory_never_loses_the_file() {
    let dir = Scratch::new();
    let build = || {
        let _ = fs::remove_dir_all(dir.join("dst"));
        write_file(dir.join("src/f"), "new");
        write_file(dir.join("src/d/k"), "new k");
        write_file(dir.join("dst/f"), "old");
        write_file(dir.join("dst/d/k"), "old k");
        write_file(dir.join("dst/extra"), "extra");
        fs::create_dir_all(dir.join("dst/sub")).unwrap();
    };
    for spelling in [".", "./", "./.", "././"] {
        build();
        let backup = format!("--backup-dir={spelling}");
        let out = sync(
            dir.path(),
            &["-a", "--delete", "-b", &backup, "src/", "dst/"],
        );
        assert_exit(&out, 1);
        assert_stderr_has(
            &out,
            "--suffix cannot be empty when --backup-dir is the same as the dest dir",
        );
        assert_eq!(fs::read(dir.join("dst/f")).unwrap(), b"old", "{spelling}");
    }
    let abs = dir.join("dst").display().to_string();
    for spelling in ["sub/..", "d/..", abs.as_str(), "../dst"] {
        build();
        let backup = format!("--backup-dir={spelling}");
        let out = sync(
            dir.path(),
            &["-a", "--delete", "-b", &backup, "src/", "dst/"],
        );
        assert_exit(&out, 23);
        assert_stderr_has(&out, "onto itself");
        // Each file is the old one or the new one, never gone.
        for (name, old, new) in [("f", "old", "new"), ("d/k", "old k", "new k")] {
            let now = fs::read_to_string(dir.join("dst").join(name))
                .unwrap_or_else(|e| panic!("{spelling}: dst/{name} lost: {e}"));
            assert!(
                now == old || now == new,
                "{spelling}: dst/{name} holds {now:?}"
            );
        }
        assert_eq!(
            fs::read(dir.join("dst/extra")).unwrap(),
            b"extra",
            "{spelling}"
        );
    }
}

/// `-T` naming no directory (missing, relative to DEST or absolute, or a file): rsync's
/// receiver says so and ends the run (exit 1) before it transfers anything; one that exists
/// holds no temporary once the run is done.
#[test]
fn a_temp_dir_that_is_not_there_ends_the_run_as_rsync() {
    let dir = Scratch::new();
    write_file(dir.join("src/f"), "f");
    write_file(dir.join("afile"), "");
    let missing = dir.join("nowhere").display().to_string();
    let file = dir.join("afile").display().to_string();
    let tools = tools();
    for (temp, said) in [
        (missing.as_str(), "The temp-dir does not exist"),
        ("nothere", "The temp-dir does not exist"),
        (file.as_str(), "The temp-dir is not a directory"),
    ] {
        let mut results = Vec::new();
        for (i, tool) in tools.iter().enumerate() {
            let dst = format!("dst{i}/");
            let out = run_tool(tool, dir.path(), &["-a", "-T", temp, "src/", &dst]);
            let text = String::from_utf8_lossy(&out.stderr).to_string();
            assert!(text.contains(said), "{tool:?} -T {temp}: {text}");
            results.push((out.status.code(), dir.join(&dst).join("f").exists()));
        }
        assert_eq!(results[0], (Some(1), false), "-T {temp}");
        assert_as_rsync(&tools, &results, &format!("-T {temp}"));
        for i in 0..tools.len() {
            let _ = fs::remove_dir_all(dir.join(format!("dst{i}")));
        }
    }
    fs::create_dir(dir.join("tmp")).unwrap();
    let abs = dir.join("tmp").display().to_string();
    let out = sync(dir.path(), &["-a", "-T", &abs, "src/", "dst/"]);
    assert_success(&out);
    assert_eq!(fs::read(dir.join("dst/f")).unwrap(), b"f");
    assert_eq!(fs::read_dir(dir.join("tmp")).unwrap().count(), 0);
}

/// Deletions whose directory's walk ended before their turn (every deletion under
/// `--delete-delay`; some under `--delete` on a wide tree) or that are a pass of their own
/// (`--delete-after`) put back only the directory's times, with `-X` and `-A` too: the
/// directory is opened again without its source, and the rest of its attributes were set by
/// its walk. Every mode leaves each directory's mtime and xattrs as the source's.
#[test]
fn deletions_after_the_walk_put_back_directory_times_with_xattrs_and_acls() {
    let modes = [
        "--delete",
        "--delete-before",
        "--delete-during",
        "--delete-delay",
        "--delete-after",
    ];
    for attrs in ["-aX", "-aA", "-aXA"] {
        for mode in modes {
            let dir = Scratch::new();
            let (src, dst) = (dir.join("src"), dir.join("dst"));
            for i in 0..48 {
                let d = src.join(format!("d{i:02}/sub"));
                fs::create_dir_all(&d).unwrap();
                write_file(d.join("f"), format!("file {i}"));
                set_xattr(
                    d.parent().unwrap(),
                    "user.tag",
                    format!("dir {i}").as_bytes(),
                )
                .unwrap();
            }
            assert_success(&sync(dir.path(), &["-aX", "src/", "dst/"]));
            for i in 0..48 {
                write_file(dst.join(format!("d{i:02}/extra")), "extraneous");
                write_file(dst.join(format!("d{i:02}/sub/extra")), "extraneous");
                let past = Some(Ts::new(1_000_000_000 + i, 0));
                for d in [
                    src.join(format!("d{i:02}")),
                    src.join(format!("d{i:02}/sub")),
                ] {
                    set_times(&d, None, past).unwrap();
                }
            }
            let out = sync(dir.path(), &[attrs, mode, "src/", "dst/"]);
            assert_success(&out);
            let check = Check {
                atime: false,
                ..Check::ARCHIVE
            };
            let diff = tree_diff(&src, &dst, check);
            assert!(diff.is_empty(), "{attrs} {mode}: {diff:#?}");
        }
    }
}

/// `--delay-updates` places its files (and removes each `.~tmp~`) after the walk set the
/// directories' times: those are put back, as rsync's `touch_up_dirs` puts them back, on a
/// first sync and a re-sync, with and without `-H` (whose later names wait in `.~tmp~` too).
#[test]
fn delay_updates_puts_back_the_directories_times() {
    for extra in [None, Some("-H")] {
        let dir = Scratch::new();
        let (src, dst) = (dir.join("src"), dir.join("dst"));
        for i in 0..6 {
            let d = src.join(format!("d{i}/sub"));
            fs::create_dir_all(&d).unwrap();
            write_file(d.join("f"), format!("file {i}"));
            fs::hard_link(d.join("f"), d.join("g")).unwrap();
        }
        let past = |src: &Path, at: i64| {
            for i in 0..6 {
                for d in [src.join(format!("d{i}")), src.join(format!("d{i}/sub"))] {
                    set_times(&d, None, Some(Ts::new(at + i, 0))).unwrap();
                }
            }
            set_times(src, None, Some(Ts::new(at, 0))).unwrap();
        };
        let check = Check {
            atime: false,
            hard_links: extra.is_some(),
            ..Check::ARCHIVE
        };
        past(&src, 1_000_000_000);
        let mut args = vec!["-a", "--delay-updates"];
        args.extend(extra);
        args.extend(["src/", "dst/"]);
        assert_success(&sync(dir.path(), &args));
        let diff = tree_diff(&src, &dst, check);
        assert!(diff.is_empty(), "first sync {extra:?}: {diff:#?}");
        for i in 0..6 {
            write_file(src.join(format!("d{i}/sub/f")), format!("changed {i}"));
        }
        past(&src, 1_100_000_000);
        assert_success(&sync(dir.path(), &args));
        let diff = tree_diff(&src, &dst, check);
        assert!(diff.is_empty(), "re-sync {extra:?}: {diff:#?}");
    }
}
