//! `ringio sync`'s source operands named as rsync names them (`..`, `.`, `/./`, trailing
//! slashes, `-R` paths, symlinked directories on the way), and `cp --parents` through a
//! symlinked directory as GNU cp goes. Each scenario is built twice, identically, in `rs/` and
//! `ri/`; ringio runs in `ri/`, rsync (or GNU cp) in `rs/`, and the two whole trees (DEST, its
//! siblings and the sources) must then be equal in content, modes, owners and mtimes, with
//! the same exit status. Everything outside DEST is snapshotted before and after ringio's run
//! and must not have changed.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::common::*;

/// What the two trees must agree on (atimes move as the sources are read).
const SAME: Check = Check {
    mode: true,
    ownership: true,
    mtime: true,
    atime: false,
    hard_links: false,
    xattrs: false,
    partial: false,
};

/// The reference rsync: `$RINGIO_RSYNC` (e.g. a build of 3.2.7, the reference), else `rsync`
/// on PATH.
fn rsync_program() -> std::ffi::OsString {
    std::env::var_os("RINGIO_RSYNC").unwrap_or_else(|| "rsync".into())
}

fn rsync_available() -> bool {
    rsync_version().is_some()
}

/// The reference rsync's (major, minor) version, if it runs.
fn rsync_version() -> Option<(u32, u32)> {
    let out = Command::new(rsync_program())
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .split_whitespace()
        .skip_while(|w| *w != "version")
        .nth(1)?;
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    Some((parts.next()??, parts.next()??))
}

fn rsync(cwd: &Path, args: &[&str]) -> Output {
    Command::new(rsync_program())
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

/// Every entry under `root` (symlinks not followed), leaving out `skip` and what is below it:
/// its type, mode, owner, size, mtime (to the nanosecond) and content or target.
fn snapshot(root: &Path, skip: Option<&Path>) -> BTreeMap<PathBuf, String> {
    fn walk(p: &Path, skip: Option<&Path>, out: &mut BTreeMap<PathBuf, String>) {
        if skip == Some(p) {
            return;
        }
        let m = fs::symlink_metadata(p).unwrap_or_else(|e| panic!("lstat {}: {e}", p.display()));
        let what = if m.file_type().is_symlink() {
            format!("link -> {:?}", fs::read_link(p).expect("readlink"))
        } else if m.is_file() {
            format!("file {:?}", fs::read(p).expect("read"))
        } else {
            "dir".to_string()
        };
        out.insert(
            p.to_path_buf(),
            format!(
                "{what} mode {:o} owner {}:{} size {} mtime {}.{:09}",
                m.mode(),
                m.uid(),
                m.gid(),
                m.size(),
                m.mtime(),
                m.mtime_nsec()
            ),
        );
        if m.is_dir() {
            let mut names: Vec<_> = fs::read_dir(p)
                .expect("read_dir")
                .map(|e| e.expect("entry").path())
                .collect();
            names.sort();
            for n in names {
                walk(&n, skip, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, skip, &mut out);
    out
}

#[track_caller]
fn assert_unchanged(
    before: &BTreeMap<PathBuf, String>,
    after: &BTreeMap<PathBuf, String>,
    what: &str,
) {
    let mut diffs = Vec::new();
    for (p, b) in before {
        match after.get(p) {
            None => diffs.push(format!("gone: {}", p.display())),
            Some(a) if a != b => {
                diffs.push(format!("changed: {}\n  was {b}\n  now {a}", p.display()))
            }
            _ => {}
        }
    }
    for p in after.keys().filter(|p| !before.contains_key(*p)) {
        diffs.push(format!("new: {}", p.display()));
    }
    assert!(
        diffs.is_empty(),
        "{what}: outside DEST:\n{}",
        diffs.join("\n")
    );
}

/// Gives `root` and every entry under it a whole-second mtime of its own, deepest first
/// (rsync compares mtimes to the second; equal whole seconds make the two runs agree).
fn settle(root: &Path) {
    fn walk(p: &Path, out: &mut Vec<PathBuf>) {
        let mut names: Vec<_> = fs::read_dir(p)
            .expect("read_dir")
            .map(|e| e.expect("entry").path())
            .collect();
        names.sort();
        for n in names {
            if n.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                walk(&n, out);
            }
            out.push(n);
        }
    }
    let mut paths = Vec::new();
    walk(root, &mut paths);
    paths.push(root.to_path_buf());
    for (i, p) in paths.iter().enumerate() {
        let t = Ts::new(1_600_000_000 + i as i64 * 7, 0);
        set_times(p, Some(t), Some(t)).expect("set times");
    }
}

/// Entries both runs gave "now" as their mtime (a directory that something was made in, and
/// that the transfer does not give a source's time) take one time in both trees, so that the
/// trees compare; one with a source's time (settled, long ago) beside one with "now" still
/// differs.
fn same_now(rs: &Path, ri: &Path) {
    fn walk(rs: &Path, ri: &Path) {
        let (Ok(a), Ok(b)) = (fs::symlink_metadata(rs), fs::symlink_metadata(ri)) else {
            return;
        };
        let recent = 1_700_000_000;
        if a.mtime() > recent && b.mtime() > recent {
            let t = Ts::new(1_650_000_000, 0);
            set_times(rs, None, Some(t)).expect("set times");
            set_times(ri, None, Some(t)).expect("set times");
        }
        if a.is_dir() && b.is_dir() {
            for e in fs::read_dir(rs).expect("read_dir") {
                let name = e.expect("entry").file_name();
                walk(&rs.join(&name), &ri.join(&name));
            }
        }
    }
    walk(rs, ri);
}

/// One scenario, built alike in `rs/` (the reference's) and `ri/` (ringio's).
struct Twin {
    _dir: Scratch,
    rs: PathBuf,
    ri: PathBuf,
}

impl Twin {
    fn new(build: impl Fn(&Path)) -> Twin {
        let dir = Scratch::new();
        let (rs, ri) = (dir.join("rs"), dir.join("ri"));
        for root in [&rs, &ri] {
            fs::create_dir(root).unwrap();
            build(root);
            settle(root);
        }
        Twin { _dir: dir, rs, ri }
    }

    /// Runs `ringio sync ARGS` in `ri/CWD`, asserting that nothing outside `ri/DEST`
    /// changed; then, where rsync is installed, `rsync ARGS` in `rs/CWD`: the same exit
    /// status and the same trees. ringio's output.
    #[track_caller]
    fn sync(&self, cwd: &str, args: &[&str], dest: &str) -> Output {
        self.sync_compared(cwd, args, dest, true)
    }

    /// [`Twin::sync`], compared with rsync only when `compare` (else only nothing outside
    /// DEST is checked).
    #[track_caller]
    fn sync_compared(&self, cwd: &str, args: &[&str], dest: &str, compare: bool) -> Output {
        let dest = self.ri.join(dest);
        // A DEST made now changes its parent's mtime, and nothing else of it.
        let parent = dest.parent().expect("DEST has a parent").to_path_buf();
        let made = !dest.exists();
        let parent_mode = fs::metadata(&parent).unwrap().mode();
        let before = snapshot(&self.ri, Some(&dest));
        let out = sync(&self.ri.join(cwd), args);
        let mut after = snapshot(&self.ri, Some(&dest));
        let mut before = before;
        if made {
            assert_eq!(fs::metadata(&parent).unwrap().mode(), parent_mode);
            before.remove(&parent);
            after.remove(&parent);
        }
        assert_unchanged(
            &before,
            &after,
            &format!("sync {args:?}\n{}", describe(&out)),
        );
        if compare && rsync_available() {
            let theirs = rsync(&self.rs.join(cwd), args);
            assert_eq!(
                out.status.code(),
                theirs.status.code(),
                "sync {args:?}: exit status\nringio: {}\nrsync: {}",
                describe(&out),
                describe(&theirs)
            );
            same_now(&self.rs, &self.ri);
            let diffs = tree_diff(&self.rs, &self.ri, SAME);
            assert!(
                diffs.is_empty(),
                "sync {args:?}: ringio's trees differ from rsync's:\n{}\nringio: {}",
                diffs.join("\n"),
                describe(&out)
            );
        } else if compare {
            eprintln!("rsync is not installed: ringio's result is checked on its own");
        }
        out
    }

    fn reset(&self, build: impl Fn(&Path)) {
        for root in [&self.rs, &self.ri] {
            fs::remove_dir_all(root).unwrap();
            fs::create_dir(root).unwrap();
            build(root);
            settle(root);
        }
    }
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    write_file(path, text);
}

/// `data/photos/{p.txt,a/b/f}`, `data/{top.txt,other/o.txt}`, and beside `data`,
/// `backups/{yesterday/y.txt,today/old.txt}`.
fn photos(root: &Path) {
    write(&root.join("data/photos/p.txt"), "p");
    write(&root.join("data/photos/a/b/f"), "f");
    write(&root.join("data/top.txt"), "top");
    write(&root.join("data/other/o.txt"), "o");
    write(&root.join("backups/yesterday/y.txt"), "y");
    write(&root.join("backups/today/old.txt"), "old");
    chmod(root.join("data"), 0o750);
    chmod(root.join("data/photos"), 0o705);
    chmod(root.join("backups"), 0o711);
}

/// A source ending in `..` or `.` (however spelled) brings the directory's contents into DEST,
/// as `SRC/` does: DEST's parent and siblings are never touched (once, `..` synced into
/// DEST's parent and --delete deleted DEST's siblings).
#[test]
fn a_source_ending_in_dot_dot_syncs_into_dest_never_its_parent() {
    let twin = Twin::new(photos);
    // Each spelling, and whether it names `data` (else `data/photos`).
    let spellings = [
        ("..", true),
        ("../", true),
        ("..//", true),
        ("./..", true),
        ("../.", true),
        ("./a/../..", true),
        ("a/..", false),
        ("a/b/../..", false),
        (".", false),
        ("./", false),
    ];
    for delete in [true, false] {
        for (spelling, up) in spellings {
            twin.reset(photos);
            let mut args = vec!["-a"];
            if delete {
                args.push("--delete");
            }
            args.extend([spelling, "../../backups/today/"]);
            let out = twin.sync("data/photos", &args, "backups/today");
            assert_success(&out);
            // What rsync makes, checked on ringio's side too (rsync may be missing).
            let today = twin.ri.join("backups/today");
            let expect = if up { "photos/a/b/f" } else { "a/b/f" };
            assert!(
                today.join(expect).is_file(),
                "{args:?}: no {expect}\n{}",
                describe(&out)
            );
            assert_eq!(today.join("old.txt").exists(), !delete, "{args:?}");
            assert!(
                twin.ri.join("backups/yesterday/y.txt").is_file(),
                "{args:?}"
            );
        }
    }
}

/// Operands that are, or pass through, symlinks (`lnk -> photos/a`, `up -> ..`, `flnk -> a
/// file`, `dang -> nowhere`), with and without a trailing slash, `/.` or `/..`, alone and
/// beside each other, with and without -R: the same trees and exit status as rsync's.
#[test]
fn symlinked_operands_are_named_as_rsync_names_them() {
    let build = |root: &Path| {
        photos(root);
        symlink("photos/a", root.join("data/lnk")).unwrap();
        symlink("..", root.join("data/photos/up")).unwrap();
        symlink("top.txt", root.join("data/flnk")).unwrap();
        symlink("nowhere", root.join("data/dang")).unwrap();
    };
    let twin = Twin::new(build);
    let rows: &[&[&str]] = &[
        &["lnk"],
        &["lnk/"],
        &["lnk/."],
        &["lnk/.."],
        &["lnk/b/.."],
        &["photos/up/"],
        &["photos/up/photos"],
        &["flnk"],
        &["flnk/"],
        &["dang/"],
        &["photos/a/..", "."],
        &[".", "lnk/.."],
        &["-R", "lnk/b"],
        &["-R", "./lnk/b/f"],
        &["-R", "photos/./up/photos/p.txt"],
        &["-R", "lnk/"],
        &["-R", "./lnk/."],
        &["-R", "./flnk/"],
        &["-R", "./dang/"],
        &["-R", "./dang/x"],
    ];
    // rsync 3.4 and later refuse a symlink followed by `..` ("opendir ... Too many levels of
    // symbolic links", 23); 3.2.7, the reference, goes there as the kernel resolves it.
    let newer = rsync_version().is_some_and(|v| v >= (3, 4));
    for operands in rows {
        twin.reset(build);
        let mut args = vec!["-a", "--delete"];
        args.extend(*operands);
        args.push("../backups/today/");
        let link_then_up = operands.iter().any(|o| o.starts_with("lnk/.."));
        let compare = !(newer && link_then_up);
        let out = twin.sync_compared("data", &args, "backups/today", compare);
        if link_then_up {
            // lnk/.. is photos: its contents, as 3.2.7 syncs them.
            assert_success(&out);
            assert!(twin.ri.join("backups/today/a/b/f").is_file(), "{args:?}");
        }
        assert!(
            twin.ri.join("backups/yesterday/y.txt").is_file(),
            "{args:?}"
        );
    }
}

/// `-R` with a `..` in the path kept below DEST: rsync refuses the whole run ("found ".."
/// dir in relative path", exit 1) before anything is made; ringio once wrote beside DEST
/// (`src/a/./..`, `src/./..`), or copied nothing with exit 0 (`../x/f`).
#[test]
fn relative_operands_with_dot_dot_are_refused_as_rsync_refuses_them() {
    let build = |root: &Path| {
        write(&root.join("w/x/f"), "f");
        write(&root.join("w/src/a/b/g"), "g");
        write(&root.join("w/src/h"), "h");
        write(&root.join("w/dst/old"), "old");
    };
    let twin = Twin::new(build);
    let rows: [(&[&str], &str); 9] = [
        (&["../x/f"], "../x/f"),
        (&["src/a/./.."], ".."),
        (&["src/./.."], ".."),
        (&["src/./../"], ".."),
        (&["src/./..//"], ".."),
        (&["src/.//./.."], ".."),
        (&["src/./a/.."], "a/.."),
        (&["src/./a/b/../b/g"], "a/b/../b/g"),
        (&["src/./h", "../x/f"], "../x/f"),
    ];
    for (operands, shown) in rows {
        for dest in ["dst/", "new/"] {
            twin.reset(build);
            let mut args = vec!["-aR", "--delete"];
            args.extend(operands);
            args.push(dest);
            // Nothing anywhere changes: DEST included (a missing one is not made).
            let before = snapshot(&twin.ri, None);
            let out = twin.sync("w", &args, "w/dst");
            assert_exit(&out, 1);
            assert_stderr_has(&out, &format!("found \"..\" dir in relative path: {shown}"));
            assert_unchanged(&before, &snapshot(&twin.ri, None), &format!("{args:?}"));
        }
    }
}

/// Spellings -R keeps (`/./` anywhere, `./`, `//`, trailing `/` and `/.`): the same tree as
/// rsync's.
#[test]
fn relative_operands_are_kept_below_dest_as_rsync_keeps_them() {
    let build = |root: &Path| {
        write(&root.join("w/src/a/b/g"), "g");
        write(&root.join("w/src/h"), "h");
        write(&root.join("w/src/a/..b"), "dots");
        fs::create_dir(root.join("w/dst")).unwrap();
        write(&root.join("w/dst/a/b/old"), "old");
    };
    let twin = Twin::new(build);
    for operand in [
        "src/./a/b/./g",
        "src/./a/./b/g",
        "src//./a",
        "src/.//a",
        "src/./a/b/",
        "src/./a/b/.",
        "src/./",
        "src/.",
        "./src/h",
        "src/./a/..b",
        "src/./h/",
    ] {
        twin.reset(build);
        let out = twin.sync("w", &["-aR", "--delete", operand, "dst/"], "w/dst");
        assert_success(&out);
    }
}

/// `-R` through a source symlink to a directory (`src/lnk -> ../outside`): rsync sends the
/// directories on the way as directories (following the link), so the real `DEST/lnk/`
/// keeps everything in it and takes the target's attributes. ringio once replaced it, and
/// everything in it, by a symlink.
#[test]
fn relative_implied_directory_through_a_symlink_keeps_the_real_directory() {
    let build = |root: &Path| {
        write(&root.join("outside/secret"), "secret");
        write(&root.join("outside/other"), "other");
        chmod(root.join("outside"), 0o700);
        fs::create_dir(root.join("src")).unwrap();
        symlink("../outside", root.join("src/lnk")).unwrap();
        write(&root.join("dst/lnk/keep"), "keep");
        write(&root.join("dst/lnk/sub/x"), "x");
        write(&root.join("dst/lnk/secret"), "old secret");
        write(&root.join("dst/src/lnk/keep"), "keep");
    };
    let twin = Twin::new(build);
    for delete in ["--delete", "--delete-after", "--delete-before"] {
        for operand in ["src/./lnk/secret", "src/lnk/secret", "./src/lnk/secret"] {
            twin.reset(build);
            let out = twin.sync(".", &["-aR", delete, operand, "dst/"], "dst");
            assert_success(&out);
            let lnk = if operand.starts_with("src/./") {
                twin.ri.join("dst/lnk")
            } else {
                twin.ri.join("dst/src/lnk")
            };
            let m = fs::symlink_metadata(&lnk).unwrap();
            assert!(
                m.is_dir(),
                "{operand} {delete}: {} is no longer a directory",
                lnk.display()
            );
            assert_eq!(
                fs::read(lnk.join("keep")).unwrap(),
                b"keep",
                "{operand} {delete}"
            );
            assert_eq!(
                fs::read(lnk.join("secret")).unwrap(),
                b"secret",
                "{operand} {delete}"
            );
        }
    }
    // The link named as an operand too (sent as a link, or, written `lnk/`, as the directory
    // with its contents), before or after the path through it: rsync's one file list.
    for operands in [
        ["src/./lnk", "src/./lnk/secret"],
        ["src/./lnk/secret", "src/./lnk"],
        ["src/./lnk/", "src/./lnk/secret"],
        ["src/./lnk/secret", "src/./lnk/other"],
    ] {
        twin.reset(build);
        let args = ["-aR", "--delete", operands[0], operands[1], "dst/"];
        assert_success(&twin.sync(".", &args, "dst"));
        assert!(fs::symlink_metadata(twin.ri.join("dst/lnk"))
            .unwrap()
            .is_dir());
    }
}

/// `--files-from` names below a symlink to a directory in SRC (`sub -> d`; `sub/b`, `sub/`,
/// `sub/.`), and `.`, `./`, `d/.` lines, from SRC given as a symlink or not: rsync goes through
/// the link; ringio once copied only the symlink (exit 0).
#[test]
fn files_from_through_a_symlinked_directory_copies_what_it_lists() {
    let build = |line: &'static str| {
        move |root: &Path| {
            write(&root.join("real/a"), "a");
            write(&root.join("real/d/b"), "b");
            write(&root.join("real/d/e/c"), "c");
            symlink("d", root.join("real/sub")).unwrap();
            symlink("real", root.join("lnk")).unwrap();
            fs::create_dir(root.join("dst")).unwrap();
            let mut f = fs::File::create(root.join("list")).unwrap();
            writeln!(f, "{line}").unwrap();
        }
    };
    let twin = Twin::new(build("."));
    for line in ["sub/b", "sub/", "sub/.", "sub", ".", "./", "d/.", "d/", "d"] {
        for src in ["real", "lnk", "lnk/"] {
            twin.reset(build(line));
            let out = twin.sync(".", &["-a", "--files-from=list", src, "dst/"], "dst");
            assert_success(&out);
            if line.starts_with("sub/") {
                let sub = twin.ri.join("dst/sub");
                assert!(fs::symlink_metadata(&sub).unwrap().is_dir(), "{line} {src}");
                assert_eq!(fs::read(sub.join("b")).unwrap(), b"b", "{line} {src}");
            }
        }
    }
}

/// GNU cp --parents follows a symlink to a directory it finds under DIR (`DIR/a ->
/// ../elsewhere`) and makes the rest there, with -p giving the target the source's
/// attributes; a dangling link or one to a file is refused with GNU's messages. ringio once
/// refused every such link.
#[test]
fn cp_parents_follows_a_symlinked_directory_under_the_target() {
    let build = |target: &'static str| {
        move |root: &Path| {
            write(&root.join("a/b/f"), "f");
            chmod(root.join("a"), 0o750);
            chmod(root.join("a/b"), 0o705);
            fs::create_dir_all(root.join("D")).unwrap();
            fs::create_dir_all(root.join("elsewhere")).unwrap();
            write(&root.join("elsewhere/file"), "x");
            chmod(root.join("elsewhere"), 0o777);
            symlink(target, root.join("D/a")).unwrap();
        }
    };
    let twin = Twin::new(build("../elsewhere"));
    let gnu = gnu_cp_available();
    for (target, opts, code) in [
        ("../elsewhere", &[][..], 0),
        ("../elsewhere", &["-p"][..], 0),
        ("../elsewhere", &["-a"][..], 0),
        ("../nowhere", &[][..], 1),
        ("../elsewhere/file", &[][..], 1),
    ] {
        twin.reset(build(target));
        let mut args: Vec<&str> = vec!["--parents"];
        args.extend(opts);
        args.extend(["a/b/f", "D"]);
        let before = snapshot(&twin.ri, Some(&twin.ri.join("elsewhere")));
        let out = Cp::named_cp(twin._dir.path())
            .args(&args)
            .current_dir(&twin.ri)
            .run();
        assert_unchanged(
            &before,
            &snapshot(&twin.ri, Some(&twin.ri.join("elsewhere"))),
            &format!("cp {args:?}"),
        );
        assert_exit(&out, code);
        match target {
            "../nowhere" => assert_stderr_has(&out, "cp: cannot make directory 'D/a': File exists"),
            "../elsewhere/file" => {
                assert_stderr_has(&out, "cp: 'D/a' exists but is not a directory")
            }
            _ => assert_eq!(fs::read(twin.ri.join("elsewhere/b/f")).unwrap(), b"f"),
        }
        if gnu {
            let theirs = gnu_cp(&twin.rs, &args);
            assert_eq!(out.status.code(), theirs.status.code(), "cp {args:?}");
            assert_eq!(
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&theirs.stderr),
                "cp {args:?}"
            );
            same_now(&twin.rs, &twin.ri);
            assert_trees_equal(&twin.rs, &twin.ri, SAME);
        }
    }
}

/// `--files-from` lines with `..` (`../x/f`, `x/../x/f`, `a/../../x/f`, `x/./..`, `/x/f`):
/// rsync reads the list as if SRC were the root, collapsing every `..` inside it, so the file
/// inside SRC is copied and nothing outside it is read; ringio refused the run (exit 1), and
/// a `..` inside the path met -R's refusal.
#[test]
fn files_from_lines_with_dot_dot_stay_inside_the_source() {
    let build = |line: &'static str| {
        move |root: &Path| {
            write(&root.join("src/x/f"), "in");
            write(&root.join("x/f"), "out");
            fs::create_dir(root.join("dst")).unwrap();
            let mut f = fs::File::create(root.join("list")).unwrap();
            writeln!(f, "{line}").unwrap();
        }
    };
    let twin = Twin::new(build("x/f"));
    for line in [
        "../x/f",
        "x/../x/f",
        "a/../../x/f",
        "x/./..",
        "/x/f",
        "./x/f",
        "..",
    ] {
        for relative in ["-R", "--no-R"] {
            twin.reset(build(line));
            let args = ["-a", relative, "--files-from=list", "src", "dst/"];
            let out = twin.sync(".", &args, "dst");
            assert_success(&out);
            // What is copied is SRC's: `x/f` below it (or `f`, without -R), never `out`.
            let copied = ["dst/x/f", "dst/f"]
                .iter()
                .filter_map(|p| fs::read(twin.ri.join(p)).ok())
                .collect::<Vec<_>>();
            assert!(copied.iter().all(|c| c == b"in"), "{line} {relative}");
            assert!(
                !line.ends_with('f') || copied.len() == 1,
                "{line} {relative}"
            );
        }
    }
}

/// Every source missing: rsync still makes a DEST written as a directory (`newd/`, exit
/// 23), not one that could name a file (`newd`), and fails on `newd/.` (exit 3); ringio made
/// none.
#[test]
fn a_dest_named_as_a_directory_is_made_when_no_source_is_left() {
    let build = |root: &Path| write(&root.join("src/f"), "f");
    let twin = Twin::new(build);
    for (args, made) in [
        (&["-a", "missing", "newd/"][..], true),
        (&["-a", "--delete", "missing", "newd/"][..], true),
        (&["-a", "missing", "newd"][..], false),
        (&["-a", "missing", "src", "newd"][..], true),
        (&["-a", "missing", "newd/."][..], false),
    ] {
        twin.reset(build);
        let out = twin.sync(".", args, "newd");
        assert_eq!(twin.ri.join("newd").is_dir(), made, "{args:?}");
        assert_ne!(out.status.code(), Some(0), "{args:?}");
    }
}

/// Operand spellings and options drawn at random (seeded), with symlinks planted in DEST
/// (`a -> outside`, `p.txt -> outside/secret`, `up -> ..`) and in the source, run as root and
/// as nobody: nothing outside DEST changes, whatever ringio makes of the command line.
#[test]
fn no_operand_spelling_reaches_outside_dest() {
    let spellings = [
        "..",
        "../",
        "..//",
        "./..",
        "../.",
        "a/..",
        "a/b/../..",
        ".",
        "./",
        "a",
        "a/",
        "a/b/f",
        "p.txt",
        "lnk",
        "lnk/",
        "lnk/.",
        "lnk/..",
        "../other",
        "../other/.",
        "./a/b/f",
        "a/./b",
        "a/./..",
        "./../photos/a",
        ".//./..",
        "lnk/./f",
        "a/b/./..",
        "../photos/./a",
    ];
    let options = [
        "--delete",
        "--delete-after",
        "--delete-before",
        "-R",
        "-b",
        "-r",
    ];
    let build = |root: &Path| {
        photos(root);
        write(&root.join("outside/secret"), "secret");
        symlink("photos/a/b", root.join("data/lnk")).unwrap();
        symlink("a/b", root.join("data/photos/lnk")).unwrap();
        let today = root.join("backups/today");
        symlink("../../outside", today.join("a")).unwrap();
        symlink("../../outside/secret", today.join("p.txt")).unwrap();
        symlink("..", today.join("up")).unwrap();
    };
    let users: &[Option<(u32, u32)>] = if is_root() {
        &[None, Some(NOBODY)]
    } else {
        &[None]
    };
    let mut rng = Prng::new(37);
    for &user in users {
        for round in 0..40 {
            let dir = Scratch::new();
            build(dir.path());
            if let Some((uid, gid)) = user {
                chown_tree(dir.path(), uid, gid);
                dir.give_to(uid, gid);
            }
            let mut args: Vec<&str> = vec!["-a"];
            for opt in options {
                if rng.chance(30) {
                    args.push(opt);
                }
            }
            for _ in 0..rng.range(1, 3) {
                args.push(*rng.pick(&spellings));
            }
            args.push("../../backups/today/");
            let dest = dir.join("backups/today");
            let before = snapshot(dir.path(), Some(&dest));
            let cp = Cp::bare()
                .arg("sync")
                .args(&args)
                .current_dir(dir.join("data/photos"));
            let out = match user {
                Some((uid, gid)) => cp.run_as(uid, gid).run(),
                None => cp.run(),
            };
            let what = format!(
                "round {round} as {user:?}: sync {args:?}\n{}",
                describe(&out)
            );
            assert_unchanged(&before, &snapshot(dir.path(), Some(&dest)), &what);
            assert!(out.status.code().is_some(), "{what}");
        }
    }
}
