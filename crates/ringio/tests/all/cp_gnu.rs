//! ringio as a drop-in for GNU cp 9.1: the multi-call name, getopt's option handling, the
//! options GNU cp has (-i, -l, -s, --parents, --attributes-only, -Z), `-v`'s exact lines, cp's
//! same-file judgement (the matrix of coreutils' tests/cp/same-file.sh), the permissions of a
//! file while it is written, and setuid bits without the owner. The cases GNU's own suite
//! checks, kept here so a regression shows without that suite.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{
    self, assert_exit, assert_success, assert_trees_equal, chmod, chown_tree, gnu_cp_available,
    is_root, mkfifo, mode_of, write_file, Atimes, Check, Cp, Scratch, TreeSpec, NOBODY,
};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path.as_ref())
        .unwrap_or_else(|e| panic!("read {}: {e}", path.as_ref().display()))
}

fn inode(path: impl AsRef<Path>) -> u64 {
    std::fs::symlink_metadata(path.as_ref())
        .unwrap_or_else(|e| panic!("lstat {}: {e}", path.as_ref().display()))
        .ino()
}

/// Under the name cp, every message starts with `cp: `; under ringio, with `ringio: `.
#[test]
fn multicall_names_itself() {
    let scratch = Scratch::new();
    let out = Cp::named_cp(scratch.path())
        .current_dir(scratch.path())
        .args(["missing", "x"])
        .run();
    assert_exit(&out, 1);
    assert_eq!(
        stderr(&out),
        "cp: cannot stat 'missing': No such file or directory\n"
    );
    let out = Cp::new()
        .current_dir(scratch.path())
        .args(["missing", "x"])
        .run();
    assert_eq!(
        stderr(&out),
        "ringio: cannot stat 'missing': No such file or directory\n"
    );

    // Usage errors: GNU's words, a pointer to --help, exit status 1.
    let out = Cp::named_cp(scratch.path()).run();
    assert_exit(&out, 1);
    assert_eq!(
        stderr(&out),
        "cp: missing file operand\nTry 'cp --help' for more information.\n"
    );
    write_file(scratch.join("f"), "f");
    let out = Cp::named_cp(scratch.path())
        .current_dir(scratch.path())
        .arg("f")
        .run();
    assert_exit(&out, 1);
    assert_eq!(
        stderr(&out),
        "cp: missing destination file operand after 'f'\nTry 'cp --help' for more information.\n"
    );
    let out = Cp::named_cp(scratch.path()).arg("--no-such-option").run();
    assert_exit(&out, 1);
    let err = stderr(&out);
    assert!(
        err.starts_with("cp: ") && err.ends_with("Try 'cp --help' for more information.\n"),
        "{err}"
    );
    let out = Cp::named_cp(scratch.path())
        .current_dir(scratch.path())
        .args(["-l", "-s", "f", "g"])
        .run();
    assert_exit(&out, 1);
    assert!(stderr(&out).starts_with("cp: cannot make both hard and symbolic links\n"));

    let out = Cp::named_cp(scratch.path()).arg("--version").run();
    assert_success(&out);
    let version = stdout(&out);
    assert!(version.starts_with("cp (ringio) "), "{version}");
    assert!(version.contains("cp (GNU coreutils) 9.1"), "{version}");
}

/// getopt_long: a prefix that names one GNU cp option means it (`--b` is --backup even beside
/// ringio's --bs); an option given twice takes its last value.
#[test]
fn long_option_prefixes_and_repeats() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    write_file(scratch.join("a/b/f"), "data");
    std::fs::create_dir(scratch.join("d")).unwrap();
    let cp = || Cp::named_cp(dir).current_dir(dir);
    assert_success(&cp().args(["--parent", "a/b/f", "d"]).run());
    assert_eq!(read(scratch.join("d/a/b/f")), "data");

    write_file(scratch.join("g"), "old");
    assert_success(&cp().args(["--b=simple", "a/b/f", "g"]).run());
    assert_eq!(read(scratch.join("g~")), "old");
    assert_eq!(read(scratch.join("g")), "data");

    chmod(scratch.join("a/b/f"), 0o640);
    assert_success(&cp().args(["--pres=mode", "a/b/f", "m"]).run());
    assert_eq!(mode_of(scratch.join("m")), 0o640);

    assert_success(
        &cp()
            .args(["--reflink", "--reflink=never", "a/b/f", "r"])
            .run(),
    );
    assert_eq!(read(scratch.join("r")), "data");
    // Ambiguous among GNU's own options: an error.
    let out = cp().args(["--p", "a/b/f", "x"]).run();
    assert_exit(&out, 1);

    // -n and -i: the later one wins.
    write_file(scratch.join("kept"), "kept");
    write_file(scratch.join("yes"), "y\n");
    let out = cp()
        .args(["-i", "-n", "a/b/f", "kept"])
        .stdin_from(scratch.join("yes"))
        .run();
    assert_success(&out);
    assert_eq!(read(scratch.join("kept")), "kept");
    assert_eq!(stderr(&out), "");
    let out = cp()
        .args(["-n", "-i", "a/b/f", "kept"])
        .stdin_from(scratch.join("yes"))
        .run();
    assert_exit(&out, 0);
    assert_eq!(read(scratch.join("kept")), "data");
    assert_eq!(stderr(&out), "cp: overwrite 'kept'? ");
}

/// -v prints GNU's lines and nothing else: no summary.
#[test]
fn verbose_prints_only_gnu_lines() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    write_file(scratch.join("src/f"), "f");
    let out = Cp::named_cp(dir)
        .current_dir(dir)
        .args(["-v", "src/f", "g"])
        .run();
    assert_success(&out);
    assert_eq!(stdout(&out), "'src/f' -> 'g'\n");
    assert_eq!(stderr(&out), "");
    let out = Cp::new()
        .current_dir(dir)
        .args(["-rv", "src", "copy"])
        .run();
    assert_success(&out);
    assert_eq!(stdout(&out), "'src' -> 'copy'\n'src/f' -> 'copy/f'\n");
    assert_eq!(stderr(&out), "");
    // Into the existing copy: the directory is not made again, so not named.
    let out = Cp::new()
        .current_dir(dir)
        .args(["-rv", "src/.", "copy"])
        .run();
    assert_success(&out);
    assert_eq!(stdout(&out), "'src/./f' -> 'copy/./f'\n");

    let cp = |args: &[&str]| {
        let out = Cp::named_cp(dir).current_dir(dir).args(args).run();
        assert_success(&out);
        stdout(&out)
    };
    assert_eq!(
        cp(&["-v", "--backup=simple", "src/f", "g"]),
        "'src/f' -> 'g' (backup: 'g~')\n"
    );
    assert_eq!(
        cp(&["-v", "--remove-destination", "src/f", "g"]),
        "removed 'g'\n'src/f' -> 'g'\n"
    );
    std::fs::create_dir(scratch.join("pd")).unwrap();
    // GNU cp 9.1 names the directories --parents makes without quotes.
    assert_eq!(
        cp(&["-v", "--parents", "src/f", "pd"]),
        "src -> pd/src\n'src/f' -> 'pd/src/f'\n"
    );
}

/// --debug: -v, and after each regular file GNU cp's line on how its data moved.
#[test]
fn debug_reports_how_data_moved() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    write_file(scratch.join("f"), vec![7u8; 100_000]);
    let sparse = std::fs::File::create(scratch.join("sparse")).unwrap();
    sparse.set_len(4 << 20).unwrap();
    drop(sparse);
    let cp = |args: &[&str]| {
        let out = Cp::named_cp(dir).current_dir(dir).args(args).run();
        assert_success(&out);
        stdout(&out)
    };
    let line = |out: &str| {
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert!(
            lines[0].starts_with('\'') && lines[0].contains(" -> "),
            "{out}"
        );
        lines[1].to_string()
    };
    let plain = line(&cp(&["--debug", "f", "g"]));
    assert!(
        plain.starts_with("copy offload: ") && plain.ends_with(", sparse detection: no"),
        "{plain}"
    );
    assert!(plain.contains(", reflink: "), "{plain}");
    let never = line(&cp(&["--debug", "--reflink=never", "f", "h"]));
    assert_eq!(
        never,
        "copy offload: avoided, reflink: no, sparse detection: no"
    );
    let holes = line(&cp(&["--debug", "sparse", "s2"]));
    assert!(holes.ends_with("sparse detection: SEEK_HOLE"), "{holes}");
    let zeros = line(&cp(&["--debug", "--sparse=always", "f", "z"]));
    assert!(
        zeros.ends_with("sparse detection: SEEK_HOLE + zeros"),
        "{zeros}"
    );
    assert_eq!(read(scratch.join("z")).len(), 100_000);
    // No data, no line: links and --attributes-only.
    assert_eq!(cp(&["--debug", "-l", "f", "hard"]), "'f' -> 'hard'\n");
    assert_eq!(
        cp(&["--debug", "--attributes-only", "f", "attrs"]),
        "'f' -> 'attrs'\n"
    );
}

/// -i: GNU's prompt on stderr, one line read from stdin, y or Y to overwrite; a refusal is no
/// error and -v then prints nothing. The prompt comes before the directory check.
#[test]
fn interactive_asks_before_overwriting() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    write_file(scratch.join("c"), "new");
    write_file(scratch.join("d"), "old");
    write_file(scratch.join("no"), "n\n");
    write_file(scratch.join("yes"), "Yes\n");
    let cp = |answer: &str, args: &[&str]| {
        Cp::named_cp(dir)
            .current_dir(dir)
            .args(args)
            .stdin_from(scratch.join(answer))
            .run()
    };
    let out = cp("no", &["-vi", "c", "d"]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "");
    assert_eq!(stderr(&out), "cp: overwrite 'd'? ");
    assert_eq!(read(scratch.join("d")), "old");

    let out = cp("yes", &["-vi", "c", "d"]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "'c' -> 'd'\n");
    assert_eq!(read(scratch.join("d")), "new");

    // Declined before "cannot overwrite directory with non-directory" would be said.
    write_file(scratch.join("a/c"), "file");
    std::fs::create_dir_all(scratch.join("b/a/c")).unwrap();
    let out = cp("no", &["-iR", "a", "b"]);
    assert_exit(&out, 0);
    assert_eq!(stderr(&out), "cp: overwrite 'b/a/c'? ");

    // A new file is copied without a question.
    let out = cp("no", &["-i", "c", "fresh"]);
    assert_success(&out);
    assert_eq!(stderr(&out), "");
    assert_eq!(read(scratch.join("fresh")), "new");
}

/// -l makes hard links, -s symbolic links (relative ones only in the current directory); an
/// existing destination is replaced only with -f.
#[test]
fn hard_and_symbolic_links() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    write_file(scratch.join("f"), "f");
    write_file(scratch.join("tree/sub/g"), "g");
    let cp = || Cp::named_cp(dir).current_dir(dir);
    assert_success(&cp().args(["-l", "f", "hard"]).run());
    assert_eq!(inode(scratch.join("f")), inode(scratch.join("hard")));

    assert_success(&cp().args(["-rl", "tree", "linked"]).run());
    assert!(scratch.join("linked/sub").is_dir());
    assert_eq!(
        inode(scratch.join("tree/sub/g")),
        inode(scratch.join("linked/sub/g"))
    );

    assert_success(&cp().args(["-s", "f", "soft"]).run());
    assert_eq!(
        std::fs::read_link(scratch.join("soft")).unwrap(),
        Path::new("f")
    );
    let out = cp().args(["-s", "f", "tree/rel"]).run();
    assert_exit(&out, 1);
    assert_eq!(
        stderr(&out),
        "cp: tree/rel: can make relative symbolic links only in current directory\n"
    );
    let abs = scratch.join("f");
    assert_success(&cp().arg("-s").arg(&abs).arg("tree/abs").run());
    assert_eq!(std::fs::read_link(scratch.join("tree/abs")).unwrap(), abs);

    write_file(scratch.join("taken"), "taken");
    let out = cp().args(["-l", "f", "taken"]).run();
    assert_exit(&out, 1);
    assert_eq!(
        stderr(&out),
        "cp: cannot create hard link 'taken' to 'f': File exists\n"
    );
    assert_eq!(read(scratch.join("taken")), "taken");
    assert_success(&cp().args(["-lf", "f", "taken"]).run());
    assert_eq!(inode(scratch.join("f")), inode(scratch.join("taken")));
    let out = cp().args(["-s", "f", "soft"]).run();
    assert_exit(&out, 1);
    assert_eq!(
        stderr(&out),
        "cp: cannot create symbolic link 'soft' to 'f': File exists\n"
    );
}

/// --parents: the source's leading directories are made under the target directory; with -a
/// they get the source directories' modes, without it the umask's; a source prefix that is
/// not a directory is an error, and nothing is made.
#[test]
fn parents_make_leading_directories() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    write_file(scratch.join("a/b/c/f"), "f");
    std::fs::create_dir_all(scratch.join("d")).unwrap();
    std::fs::create_dir_all(scratch.join("e")).unwrap();
    write_file(scratch.join("plain"), "p");
    chmod(scratch.join("a"), 0o722);
    let cp = || Cp::named_cp(dir).current_dir(dir);
    assert_success(&cp().args(["-a", "--parents", "a/b/c", "d"]).run());
    assert_eq!(read(scratch.join("d/a/b/c/f")), "f");
    assert_eq!(mode_of(scratch.join("d/a")), 0o722);

    let out = cp().args(["--parents", "plain/g", "e"]).run();
    assert_exit(&out, 1);
    assert!(!scratch.join("e/plain").exists());

    let out = cp().args(["--parents", "a/b/c/f", "plain"]).run();
    assert_exit(&out, 1);
    assert_eq!(
        stderr(&out),
        "cp: with --parents, the destination must be a directory\nTry 'cp --help' for more \
         information.\n"
    );

    // --no-preserve=mode: new directories get 0777 less the umask, whatever the source's mode.
    chmod(scratch.join("a"), 0o700);
    std::fs::create_dir(scratch.join("np")).unwrap();
    assert_success(
        &cp()
            .args(["--parents", "--no-preserve=mode", "a/b/c/f", "np"])
            .run(),
    );
    let umask = current_umask();
    assert_eq!(mode_of(scratch.join("np/a")), 0o777 & !umask);
    chmod(scratch.join("a"), 0o755);
}

/// The process's umask, as /proc/self/status shows it. Not with umask(2), which can only read
/// it by setting it: for that moment every test of this binary, and every child one of them
/// forks, would create files under the wrong umask.
fn current_umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        .expect("Umask in /proc/self/status (Linux 4.7 or later)")
}

/// --attributes-only: metadata without data; an existing file keeps its content and inode,
/// also under -a with other hard links to it.
#[test]
fn attributes_only() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    write_file(scratch.join("file1"), "1");
    write_file(scratch.join("file2"), "2");
    chmod(scratch.join("file1"), 0o751);
    let cp = || Cp::named_cp(dir).current_dir(dir);
    assert_success(&cp().args(["--attributes-only", "file1", "file2"]).run());
    assert_eq!(read(scratch.join("file2")), "2");
    std::fs::hard_link(scratch.join("file2"), scratch.join("link2")).unwrap();
    assert_success(
        &cp()
            .args(["-a", "--attributes-only", "file1", "file2"])
            .run(),
    );
    assert_eq!(read(scratch.join("file2")), "2");
    assert_eq!(mode_of(scratch.join("file2")), 0o751);
    assert_eq!(inode(scratch.join("file2")), inode(scratch.join("link2")));
    assert_success(&cp().args(["--attributes-only", "file1", "new"]).run());
    assert_eq!(read(scratch.join("new")), "");
}

/// Preserve options apply in command-line order; an explicit --no-preserve=mode gives the
/// default modes, FIFOs included; -Z is accepted.
#[test]
fn preserve_options_in_order() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    write_file(scratch.join("a"), "a");
    chmod(scratch.join("a"), 0o600);
    let umask = current_umask();
    let cp = || Cp::named_cp(dir).current_dir(dir);
    assert_success(
        &cp()
            .args(["--no-preserve=mode", "--preserve=all", "a", "b"])
            .run(),
    );
    assert_eq!(mode_of(scratch.join("b")), 0o600);
    assert_success(
        &cp()
            .args(["--preserve=all", "--no-preserve=mode", "a", "c"])
            .run(),
    );
    assert_eq!(mode_of(scratch.join("c")), 0o666 & !umask);
    assert_success(&cp().args(["-p", "--no-preserve=mode", "a", "e"]).run());
    assert_eq!(mode_of(scratch.join("e")), 0o666 & !umask);
    mkfifo(&scratch.join("fifo"), 0o600);
    assert_success(
        &cp()
            .args(["-a", "--no-preserve=mode", "fifo", "fifo2"])
            .run(),
    );
    assert_eq!(mode_of(scratch.join("fifo2")), 0o666 & !umask);

    assert_success(&cp().args(["-Z", "a", "z"]).run());
    let out = cp()
        .args(["--context=system_u:object_r:tmp_t:s0", "a", "z2"])
        .run();
    assert_exit(&out, 0);
    assert_eq!(
        stderr(&out),
        "cp: warning: ignoring --context; it requires an SELinux-enabled kernel\n"
    );
    let out = cp().args(["--preserve=context", "a", "z3"]).run();
    assert_exit(&out, 1);
}

/// Backups that would destroy the source are refused; `cp -fb F F` copies F to its backup.
#[test]
fn backups_of_the_source_itself() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    write_file(scratch.join("a"), "a");
    write_file(scratch.join("a~"), "tilde");
    let cp = || Cp::named_cp(dir).current_dir(dir);
    let out = cp().args(["--b=simple", "a~", "a"]).run();
    assert_exit(&out, 1);
    assert_eq!(
        stderr(&out),
        "cp: backing up 'a' might destroy source;  'a~' not copied\n"
    );
    assert_eq!(read(scratch.join("a")), "a");
    assert_eq!(read(scratch.join("a~")), "tilde");

    write_file(scratch.join("F"), "F");
    assert_success(
        &cp()
            .args(["--force", "--backup=simple", "--suffix=.b", "F", "F"])
            .run(),
    );
    assert_eq!(read(scratch.join("F.b")), "F");
    assert_eq!(read(scratch.join("F")), "F");
}

/// coreutils' tests/cp/same-file.sh: symlinks and hard links to one file, crossed with -b,
/// -d, -f, --rem, -l and -s: (operands, options, exit status, message without the program
/// name, the directory afterwards). VERSION_CONTROL=numbered. The cases the script itself
/// leaves out as unportable are left out. With GNU cp on the machine, it is checked too.
const SAME_FILE: &[(&str, &str, i32, &str, &str)] = &[
    (
        "foo symlink",
        "",
        1,
        "'foo' and 'symlink' are the same file",
        "foo symlink -> foo",
    ),
    (
        "foo symlink",
        "-d",
        1,
        "'foo' and 'symlink' are the same file",
        "foo symlink -> foo",
    ),
    (
        "foo symlink",
        "-f",
        1,
        "'foo' and 'symlink' are the same file",
        "foo symlink -> foo",
    ),
    (
        "foo symlink",
        "-df",
        1,
        "'foo' and 'symlink' are the same file",
        "foo symlink -> foo",
    ),
    ("foo symlink", "--rem", 0, "", "foo symlink"),
    ("foo symlink", "-b", 0, "", "foo symlink symlink.~1~ -> foo"),
    (
        "foo symlink",
        "-bd",
        0,
        "",
        "foo symlink symlink.~1~ -> foo",
    ),
    (
        "foo symlink",
        "-bf",
        0,
        "",
        "foo symlink symlink.~1~ -> foo",
    ),
    (
        "foo symlink",
        "-bdf",
        0,
        "",
        "foo symlink symlink.~1~ -> foo",
    ),
    (
        "foo symlink",
        "-l",
        1,
        "cannot create hard link 'symlink' to 'foo': File exists",
        "foo symlink -> foo",
    ),
    (
        "foo symlink",
        "-dl",
        1,
        "cannot create hard link 'symlink' to 'foo': File exists",
        "foo symlink -> foo",
    ),
    ("foo symlink", "-fl", 0, "", "foo symlink"),
    ("foo symlink", "-dfl", 0, "", "foo symlink"),
    (
        "foo symlink",
        "-bl",
        0,
        "",
        "foo symlink symlink.~1~ -> foo",
    ),
    (
        "foo symlink",
        "-bdl",
        0,
        "",
        "foo symlink symlink.~1~ -> foo",
    ),
    (
        "foo symlink",
        "-bfl",
        0,
        "",
        "foo symlink symlink.~1~ -> foo",
    ),
    (
        "foo symlink",
        "-bdfl",
        0,
        "",
        "foo symlink symlink.~1~ -> foo",
    ),
    (
        "foo symlink",
        "-s",
        1,
        "cannot create symbolic link 'symlink' to 'foo': File exists",
        "foo symlink -> foo",
    ),
    ("foo symlink", "-sf", 0, "", "foo symlink -> foo"),
    (
        "symlink foo",
        "",
        1,
        "'symlink' and 'foo' are the same file",
        "foo symlink -> foo",
    ),
    (
        "symlink foo",
        "-d",
        1,
        "'symlink' and 'foo' are the same file",
        "foo symlink -> foo",
    ),
    (
        "symlink foo",
        "-f",
        1,
        "'symlink' and 'foo' are the same file",
        "foo symlink -> foo",
    ),
    (
        "symlink foo",
        "-df",
        1,
        "'symlink' and 'foo' are the same file",
        "foo symlink -> foo",
    ),
    (
        "symlink foo",
        "--rem",
        1,
        "'symlink' and 'foo' are the same file",
        "foo symlink -> foo",
    ),
    (
        "symlink foo",
        "-b",
        1,
        "'symlink' and 'foo' are the same file",
        "foo symlink -> foo",
    ),
    (
        "symlink foo",
        "-bd",
        0,
        "",
        "foo -> foo foo.~1~ symlink -> foo",
    ),
    (
        "symlink foo",
        "-bf",
        1,
        "'symlink' and 'foo' are the same file",
        "foo symlink -> foo",
    ),
    (
        "symlink foo",
        "-bdf",
        0,
        "",
        "foo -> foo foo.~1~ symlink -> foo",
    ),
    ("symlink foo", "-l", 0, "", "foo symlink -> foo"),
    ("symlink foo", "-dl", 0, "", "foo symlink -> foo"),
    ("symlink foo", "-fl", 0, "", "foo symlink -> foo"),
    ("symlink foo", "-bl", 0, "", "foo symlink -> foo"),
    ("symlink foo", "-bfl", 0, "", "foo symlink -> foo"),
    (
        "symlink foo",
        "-s",
        1,
        "'symlink' and 'foo' are the same file",
        "foo symlink -> foo",
    ),
    (
        "symlink foo",
        "-sf",
        1,
        "'symlink' and 'foo' are the same file",
        "foo symlink -> foo",
    ),
    ("foo foo", "", 1, "'foo' and 'foo' are the same file", "foo"),
    (
        "foo foo",
        "-d",
        1,
        "'foo' and 'foo' are the same file",
        "foo",
    ),
    (
        "foo foo",
        "-f",
        1,
        "'foo' and 'foo' are the same file",
        "foo",
    ),
    (
        "foo foo",
        "-df",
        1,
        "'foo' and 'foo' are the same file",
        "foo",
    ),
    (
        "foo foo",
        "--rem",
        1,
        "'foo' and 'foo' are the same file",
        "foo",
    ),
    (
        "foo foo",
        "-b",
        1,
        "'foo' and 'foo' are the same file",
        "foo",
    ),
    (
        "foo foo",
        "-bd",
        1,
        "'foo' and 'foo' are the same file",
        "foo",
    ),
    ("foo foo", "-bf", 0, "", "foo foo.~1~"),
    ("foo foo", "-bdf", 0, "", "foo foo.~1~"),
    ("foo foo", "-l", 0, "", "foo"),
    ("foo foo", "-dl", 0, "", "foo"),
    ("foo foo", "-fl", 0, "", "foo"),
    ("foo foo", "-dfl", 0, "", "foo"),
    ("foo foo", "-bl", 0, "", "foo"),
    ("foo foo", "-bdl", 0, "", "foo"),
    ("foo foo", "-bfl", 0, "", "foo foo.~1~"),
    ("foo foo", "-bdfl", 0, "", "foo foo.~1~"),
    (
        "foo foo",
        "-s",
        1,
        "'foo' and 'foo' are the same file",
        "foo",
    ),
    (
        "foo foo",
        "-sf",
        1,
        "'foo' and 'foo' are the same file",
        "foo",
    ),
    (
        "sl1 sl2",
        "",
        1,
        "'sl1' and 'sl2' are the same file",
        "foo sl1 -> foo sl2 -> foo",
    ),
    ("sl1 sl2", "-d", 0, "", "foo sl1 -> foo sl2 -> foo"),
    (
        "sl1 sl2",
        "-f",
        1,
        "'sl1' and 'sl2' are the same file",
        "foo sl1 -> foo sl2 -> foo",
    ),
    ("sl1 sl2", "-df", 0, "", "foo sl1 -> foo sl2 -> foo"),
    ("sl1 sl2", "--rem", 0, "", "foo sl1 -> foo sl2"),
    ("sl1 sl2", "-b", 0, "", "foo sl1 -> foo sl2 sl2.~1~ -> foo"),
    (
        "sl1 sl2",
        "-bd",
        0,
        "",
        "foo sl1 -> foo sl2 -> foo sl2.~1~ -> foo",
    ),
    ("sl1 sl2", "-bf", 0, "", "foo sl1 -> foo sl2 sl2.~1~ -> foo"),
    (
        "sl1 sl2",
        "-bdf",
        0,
        "",
        "foo sl1 -> foo sl2 -> foo sl2.~1~ -> foo",
    ),
    (
        "sl1 sl2",
        "-l",
        1,
        "cannot create hard link 'sl2' to 'sl1': File exists",
        "foo sl1 -> foo sl2 -> foo",
    ),
    ("sl1 sl2", "-fl", 0, "", "foo sl1 -> foo sl2"),
    ("sl1 sl2", "-bl", 0, "", "foo sl1 -> foo sl2 sl2.~1~ -> foo"),
    (
        "sl1 sl2",
        "-bfl",
        0,
        "",
        "foo sl1 -> foo sl2 sl2.~1~ -> foo",
    ),
    (
        "sl1 sl2",
        "-s",
        1,
        "cannot create symbolic link 'sl2' to 'sl1': File exists",
        "foo sl1 -> foo sl2 -> foo",
    ),
    ("sl1 sl2", "-sf", 0, "", "foo sl1 -> foo sl2 -> sl1"),
    (
        "foo hardlink",
        "",
        1,
        "'foo' and 'hardlink' are the same file",
        "foo hardlink",
    ),
    (
        "foo hardlink",
        "-d",
        1,
        "'foo' and 'hardlink' are the same file",
        "foo hardlink",
    ),
    (
        "foo hardlink",
        "-f",
        1,
        "'foo' and 'hardlink' are the same file",
        "foo hardlink",
    ),
    (
        "foo hardlink",
        "-df",
        1,
        "'foo' and 'hardlink' are the same file",
        "foo hardlink",
    ),
    ("foo hardlink", "--rem", 0, "", "foo hardlink"),
    ("foo hardlink", "-b", 0, "", "foo hardlink hardlink.~1~"),
    ("foo hardlink", "-bd", 0, "", "foo hardlink hardlink.~1~"),
    ("foo hardlink", "-bf", 0, "", "foo hardlink hardlink.~1~"),
    ("foo hardlink", "-bdf", 0, "", "foo hardlink hardlink.~1~"),
    ("foo hardlink", "-l", 0, "", "foo hardlink"),
    ("foo hardlink", "-dl", 0, "", "foo hardlink"),
    ("foo hardlink", "-fl", 0, "", "foo hardlink"),
    ("foo hardlink", "-dfl", 0, "", "foo hardlink"),
    ("foo hardlink", "-bl", 0, "", "foo hardlink"),
    ("foo hardlink", "-bdl", 0, "", "foo hardlink"),
    ("foo hardlink", "-bfl", 0, "", "foo hardlink"),
    ("foo hardlink", "-bdfl", 0, "", "foo hardlink"),
    (
        "foo hardlink",
        "-s",
        1,
        "'foo' and 'hardlink' are the same file",
        "foo hardlink",
    ),
    (
        "foo hardlink",
        "-sf",
        1,
        "'foo' and 'hardlink' are the same file",
        "foo hardlink",
    ),
    (
        "hlsl sl2",
        "",
        1,
        "'hlsl' and 'sl2' are the same file",
        "foo hlsl -> foo sl2 -> foo",
    ),
    ("hlsl sl2", "-d", 0, "", "foo hlsl -> foo sl2 -> foo"),
    (
        "hlsl sl2",
        "-f",
        1,
        "'hlsl' and 'sl2' are the same file",
        "foo hlsl -> foo sl2 -> foo",
    ),
    ("hlsl sl2", "-df", 0, "", "foo hlsl -> foo sl2 -> foo"),
    ("hlsl sl2", "--rem", 0, "", "foo hlsl -> foo sl2"),
    (
        "hlsl sl2",
        "-b",
        0,
        "",
        "foo hlsl -> foo sl2 sl2.~1~ -> foo",
    ),
    (
        "hlsl sl2",
        "-bd",
        0,
        "",
        "foo hlsl -> foo sl2 -> foo sl2.~1~ -> foo",
    ),
    (
        "hlsl sl2",
        "-bf",
        0,
        "",
        "foo hlsl -> foo sl2 sl2.~1~ -> foo",
    ),
    (
        "hlsl sl2",
        "-bdf",
        0,
        "",
        "foo hlsl -> foo sl2 -> foo sl2.~1~ -> foo",
    ),
    (
        "hlsl sl2",
        "-l",
        1,
        "cannot create hard link 'sl2' to 'hlsl': File exists",
        "foo hlsl -> foo sl2 -> foo",
    ),
    ("hlsl sl2", "-dl", 0, "", "foo hlsl -> foo sl2 -> foo"),
    ("hlsl sl2", "-fl", 0, "", "foo hlsl -> foo sl2"),
    ("hlsl sl2", "-dfl", 0, "", "foo hlsl -> foo sl2 -> foo"),
    (
        "hlsl sl2",
        "-bl",
        0,
        "",
        "foo hlsl -> foo sl2 sl2.~1~ -> foo",
    ),
    ("hlsl sl2", "-bdl", 0, "", "foo hlsl -> foo sl2 -> foo"),
    (
        "hlsl sl2",
        "-bfl",
        0,
        "",
        "foo hlsl -> foo sl2 sl2.~1~ -> foo",
    ),
    ("hlsl sl2", "-bdfl", 0, "", "foo hlsl -> foo sl2 -> foo"),
    (
        "hlsl sl2",
        "-s",
        1,
        "cannot create symbolic link 'sl2' to 'hlsl': File exists",
        "foo hlsl -> foo sl2 -> foo",
    ),
    ("hlsl sl2", "-sf", 0, "", "foo hlsl -> foo sl2 -> hlsl"),
];

/// Runs one same-file case with `run` in a fresh directory: what it printed and left.
fn same_file_case(
    scratch: &Scratch,
    n: usize,
    operands: &str,
    options: &str,
    run: &dyn Fn(&Path, Vec<&str>) -> std::process::Output,
) -> (i32, String, String) {
    let dir = scratch.join(format!("case{n}"));
    std::fs::create_dir(&dir).unwrap();
    write_file(dir.join("foo"), "XYZ\n");
    let link =
        |target: &str, name: &str| std::os::unix::fs::symlink(target, dir.join(name)).unwrap();
    if operands.contains("symlink") {
        link("foo", "symlink");
    }
    if operands.contains("hardlink") {
        std::fs::hard_link(dir.join("foo"), dir.join("hardlink")).unwrap();
    }
    if operands.contains("sl1") {
        link("foo", "sl1");
    }
    if operands.contains("sl2") {
        link("foo", "sl2");
    }
    if operands.contains("hlsl") {
        // A hard link to the symlink itself (link(2) does not follow).
        let (from, to) = (
            common::cstring(&dir.join("sl2")),
            common::cstring(&dir.join("hlsl")),
        );
        // SAFETY: both are NUL-terminated paths.
        assert_eq!(unsafe { libc::link(from.as_ptr(), to.as_ptr()) }, 0);
    }
    let mut args: Vec<&str> = options.split_whitespace().collect();
    args.extend(operands.split_whitespace());
    let out = run(&dir, args);
    let err = String::from_utf8_lossy(&out.stderr);
    let message: Vec<&str> = err
        .lines()
        .map(|l| l.split_once(": ").map_or(l, |(_, rest)| rest))
        .collect();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "cp")
        .collect();
    names.sort();
    let listing: Vec<String> = names
        .iter()
        .map(|n| match std::fs::read_link(dir.join(n)) {
            Ok(t) => format!("{n} -> {}", t.display()),
            Err(_) => n.clone(),
        })
        .collect();
    // Whatever happened, the original's content is intact.
    if let Ok(m) = std::fs::symlink_metadata(dir.join("foo")) {
        if m.is_file() {
            assert_eq!(
                read(dir.join("foo")),
                "XYZ\n",
                "{operands} {options}: foo changed"
            );
        }
    }
    (
        out.status.code().unwrap_or(-1),
        message.join(" | "),
        listing.join(" "),
    )
}

#[test]
fn same_file_matrix() {
    let scratch = Scratch::new();
    let ringio = |dir: &Path, args: Vec<&str>| {
        Cp::named_cp(dir)
            .current_dir(dir)
            .env("VERSION_CONTROL", "numbered")
            .args(args)
            .run()
    };
    let gnu = gnu_cp_available();
    let gnu_run = |dir: &Path, args: Vec<&str>| {
        std::process::Command::new("cp")
            .current_dir(dir)
            .env("LC_ALL", "C")
            .env("VERSION_CONTROL", "numbered")
            .args(args)
            .output()
            .expect("run GNU cp")
    };
    let mut wrong = Vec::new();
    for (n, &(operands, options, code, message, listing)) in SAME_FILE.iter().enumerate() {
        let want = (code, message.to_string(), listing.to_string());
        let got = same_file_case(&scratch, n, operands, options, &ringio);
        if got != want {
            wrong.push(format!(
                "cp {options} {operands}: want {want:?}, got {got:?}"
            ));
        }
        if gnu {
            let reference =
                same_file_case(&scratch, n + SAME_FILE.len(), operands, options, &gnu_run);
            assert_eq!(
                reference, want,
                "GNU cp {options} {operands} disagrees with the table"
            );
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A file being written has no group or other permissions while -p may still change its
/// owner (coreutils' file-perm-race.sh): seen through a FIFO source that cp blocks on.
#[test]
fn destination_is_private_while_written() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    let fifo = scratch.join("fifo");
    mkfifo(&fifo, 0o644);
    let running = Cp::named_cp(dir)
        .current_dir(dir)
        .args(["-p", "--copy-contents", "fifo", "fifo-copy"])
        .spawn();
    // Opening for writing waits for cp to open the FIFO for reading.
    let mut writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let copy = scratch.join("fifo-copy");
    let started = Instant::now();
    while std::fs::symlink_metadata(&copy).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "cp never created the copy"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let mode = mode_of(&copy);
    use std::io::Write;
    writer.write_all(b"foo\n").unwrap();
    drop(writer);
    let out = running.wait();
    assert_success(&out);
    assert_eq!(mode & 0o077, 0, "the copy was {mode:o} while written");
    assert_eq!(read(&copy), "foo\n");
    assert_eq!(mode_of(&copy), 0o644);
}

/// Without the source's owner, -p leaves setuid and setgid out (coreutils' special-bits.sh).
#[test]
fn special_bits_need_the_owner() {
    if !is_root() {
        skip!("needs root to run cp as another user");
    }
    let scratch = Scratch::new();
    let dir = scratch.path();
    scratch.give_to(NOBODY.0, NOBODY.1);
    write_file(scratch.join("c"), "c");
    chmod(scratch.join("c"), 0o6554);
    let out = Cp::named_cp(dir)
        .current_dir(dir)
        .args(["-p", "c", "c2"])
        .run_as(NOBODY.0, NOBODY.1)
        .run();
    assert_success(&out);
    assert_eq!(mode_of(scratch.join("c2")), 0o554);
    // As root, the owner is kept and so are the bits.
    let out = Cp::named_cp(dir)
        .current_dir(dir)
        .args(["-p", "c", "c3"])
        .run();
    assert_success(&out);
    assert_eq!(mode_of(scratch.join("c3")), 0o6554);
}

/// True when `cp` on PATH is GNU cp 9.x, whose usage errors these tests compare with.
fn gnu_cp_9() -> bool {
    std::process::Command::new("cp")
        .arg("--version")
        .env("LC_ALL", "C")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .is_some_and(|l| l.starts_with("cp (GNU coreutils) 9."))
        })
        .unwrap_or(false)
}

/// GNU cp (on PATH) with `args` and `env` in `dir`, under LC_ALL=C.
fn run_gnu_cp(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new("cp")
        .args(args)
        .envs(env.iter().copied())
        .env("LC_ALL", "C")
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run GNU cp")
}

const TRY: &str = "Try 'cp --help' for more information.\n";
/// Environment variables a case sets.
type Env<'a> = &'a [(&'a str, &'a str)];
const PRESERVE_ARGS: &str = "Valid arguments are:\n  - 'mode'\n  - 'timestamps'\n  - \
     'ownership'\n  - 'links'\n  - 'context'\n  - 'xattr'\n  - 'all'\n";
const SPARSE_ARGS: &str = "Valid arguments are:\n  - 'never'\n  - 'auto'\n  - 'always'\n";
const BACKUP_ARGS: &str = "Valid arguments are:\n  - 'none', 'off'\n  - 'simple', 'never'\n  - \
     'existing', 'nil'\n  - 'numbered', 't'\n";

/// Usage errors read as GNU cp 9.1 prints them: getopt's words for a bad option, argmatch's
/// for a bad value (with the valid arguments, synonyms on one line), the checks after the
/// options in GNU's order, each followed by the pointer to --help; exit status 1, nothing
/// copied. Where GNU cp 9.x is on PATH, each is also compared with it directly.
#[test]
fn usage_errors_in_getopt_and_argmatch_words() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    write_file(scratch.join("a"), "a");
    let gnu_dir = Scratch::new();
    write_file(gnu_dir.join("a"), "a");
    let gnu = gnu_cp_9();
    let no_env: &[(&str, &str)] = &[];
    let cases: Vec<(&[&str], Env<'_>, String)> = vec![
        (&["--bogus"], no_env, format!("cp: unrecognized option '--bogus'\n{TRY}")),
        (&["--bogus=x", "a", "b"], no_env, format!("cp: unrecognized option '--bogus=x'\n{TRY}")),
        (&["-k"], no_env, format!("cp: invalid option -- 'k'\n{TRY}")),
        (&["-vk", "a", "b"], no_env, format!("cp: invalid option -- 'k'\n{TRY}")),
        // GNU cp has no -h or -V.
        (&["-h"], no_env, format!("cp: invalid option -- 'h'\n{TRY}")),
        (&["-V"], no_env, format!("cp: invalid option -- 'V'\n{TRY}")),
        (
            &["--p", "a", "b"],
            no_env,
            format!("cp: option '--p' is ambiguous; possibilities: '--parents' '--preserve'\n{TRY}"),
        ),
        (
            &["--p=x", "a", "b"],
            no_env,
            format!(
                "cp: option '--p=x' is ambiguous; possibilities: '--parents' '--preserve'\n{TRY}"
            ),
        ),
        (
            &["--v"],
            no_env,
            format!("cp: option '--v' is ambiguous; possibilities: '--verbose' '--version'\n{TRY}"),
        ),
        (
            &["--co", "a", "b"],
            no_env,
            format!(
                "cp: option '--co' is ambiguous; possibilities: '--copy-contents' '--context'\n{TRY}"
            ),
        ),
        (
            &["--verb=x", "a", "b"],
            no_env,
            format!("cp: option '--verbose' doesn't allow an argument\n{TRY}"),
        ),
        (&["a", "b", "--suffix"], no_env, format!("cp: option '--suffix' requires an argument\n{TRY}")),
        (&["a", "b", "-S"], no_env, format!("cp: option requires an argument -- 'S'\n{TRY}")),
        (&["-t"], no_env, format!("cp: option requires an argument -- 't'\n{TRY}")),
        (&["a", "b", "--sparse"], no_env, format!("cp: option '--sparse' requires an argument\n{TRY}")),
        (
            &["--preserve=foo", "a", "b"],
            no_env,
            format!("cp: invalid argument 'foo' for '--preserve'\n{PRESERVE_ARGS}{TRY}"),
        ),
        (
            &["--preserve=", "a", "b"],
            no_env,
            format!("cp: ambiguous argument '' for '--preserve'\n{PRESERVE_ARGS}{TRY}"),
        ),
        (
            &["--preserve=mode,", "a", "b"],
            no_env,
            format!("cp: ambiguous argument '' for '--preserve'\n{PRESERVE_ARGS}{TRY}"),
        ),
        (
            &["--no-preserve=k", "a", "b"],
            no_env,
            format!("cp: invalid argument 'k' for '--no-preserve'\n{PRESERVE_ARGS}{TRY}"),
        ),
        (
            &["--sparse=a", "a", "b"],
            no_env,
            format!("cp: ambiguous argument 'a' for '--sparse'\n{SPARSE_ARGS}{TRY}"),
        ),
        (
            &["--sparse=a\nb", "a", "b"],
            no_env,
            format!("cp: invalid argument 'a\\nb' for '--sparse'\n{SPARSE_ARGS}{TRY}"),
        ),
        (
            &["--reflink=x", "a", "b"],
            no_env,
            format!(
                "cp: invalid argument 'x' for '--reflink'\nValid arguments are:\n  - 'auto'\n  \
                 - 'always'\n  - 'never'\n{TRY}"
            ),
        ),
        (
            &["--backup=foo", "a", "b"],
            no_env,
            format!("cp: invalid argument 'foo' for 'backup type'\n{BACKUP_ARGS}{TRY}"),
        ),
        (
            &["--backup=n", "a", "b"],
            no_env,
            format!("cp: ambiguous argument 'n' for 'backup type'\n{BACKUP_ARGS}{TRY}"),
        ),
        (
            &["-b", "a", "b"],
            &[("VERSION_CONTROL", "foo")],
            format!("cp: invalid argument 'foo' for '$VERSION_CONTROL'\n{BACKUP_ARGS}{TRY}"),
        ),
        // The first error in the order of the arguments; the backup type only after the rest.
        (
            &["--sparse=x", "--bogus"],
            no_env,
            format!("cp: invalid argument 'x' for '--sparse'\n{SPARSE_ARGS}{TRY}"),
        ),
        (&["--backup=foo", "--bogus"], no_env, format!("cp: unrecognized option '--bogus'\n{TRY}")),
        (
            &["-n", "--backup=foo", "a", "b"],
            no_env,
            format!("cp: options --backup and --no-clobber are mutually exclusive\n{TRY}"),
        ),
        (
            &["-n", "-S", "x", "a", "b"],
            no_env,
            format!("cp: options --backup and --no-clobber are mutually exclusive\n{TRY}"),
        ),
        (
            &["-l", "-s", "-n", "--backup", "a"],
            no_env,
            format!("cp: cannot make both hard and symbolic links\n{TRY}"),
        ),
        (&[], no_env, format!("cp: missing file operand\n{TRY}")),
        (&["a"], no_env, format!("cp: missing destination file operand after 'a'\n{TRY}")),
        (&["-T", "a", "b", "c", "d"], no_env, format!("cp: extra operand 'c'\n{TRY}")),
        (
            &["-t", "d", "-T", "a"],
            no_env,
            "cp: cannot combine --target-directory (-t) and --no-target-directory (-T)\n".into(),
        ),
        // POSIXLY_CORRECT: options end at the first operand, as getopt reads them.
        (
            &["a", "-v", "b"],
            &[("POSIXLY_CORRECT", "1")],
            "cp: target 'b': No such file or directory\n".into(),
        ),
    ];
    for (args, env, want) in cases {
        let mut cp = Cp::named_cp(dir).current_dir(dir).args(args.iter());
        for (key, value) in env {
            cp = cp.env(key, value);
        }
        let out = cp.run();
        assert_exit(&out, 1);
        assert_eq!(stderr(&out), want, "cp {args:?} {env:?}");
        assert!(out.stdout.is_empty(), "cp {args:?}: {}", stdout(&out));
        if gnu {
            let theirs = run_gnu_cp(gnu_dir.path(), args, env);
            assert_eq!(theirs.status.code(), Some(1), "GNU cp {args:?}");
            assert_eq!(
                String::from_utf8_lossy(&theirs.stderr),
                want,
                "GNU cp {args:?} {env:?}"
            );
        }
    }
    let names: Vec<_> = std::fs::read_dir(dir).unwrap().collect();
    assert_eq!(names.len(), 2, "something was copied: {names:?}");

    // --help ends the reading of options, as it ends GNU cp.
    let out = Cp::named_cp(dir).args(["--help", "--bogus"]).run();
    assert_success(&out);
    assert!(stdout(&out).contains("Usage:"));

    // As `ringio cp`, the same words under ringio's own name.
    let out = Cp::new().current_dir(dir).arg("--bogus").run();
    assert_exit(&out, 1);
    assert_eq!(
        stderr(&out),
        "ringio: unrecognized option '--bogus'\nTry 'ringio cp --help' for more information.\n"
    );
    let out = Cp::new()
        .current_dir(dir)
        .args(["--sparse=x", "a", "b"])
        .run();
    assert_exit(&out, 1);
    assert_eq!(
        stderr(&out),
        format!(
            "ringio: invalid argument 'x' for '--sparse'\n{SPARSE_ARGS}Try 'ringio cp --help' \
             for more information.\n"
        )
    );
}

/// Option values are read as GNU's argmatch reads them: any unambiguous prefix names a
/// value, for every option that takes one from a list (and $VERSION_CONTROL).
#[test]
fn abbreviated_option_values() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    write_file(scratch.join("f"), "data");
    chmod(scratch.join("f"), 0o640);
    let old = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    std::fs::File::options()
        .write(true)
        .open(scratch.join("f"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let cp = || Cp::named_cp(dir).current_dir(dir);

    assert_success(&cp().args(["--preserve=mo,time", "f", "p"]).run());
    assert_eq!(mode_of(scratch.join("p")), 0o640);
    let mtime = std::fs::metadata(scratch.join("p"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(mtime, old);
    assert_success(
        &cp()
            .args(["--pres=o,l,x", "--no-preserve=x", "f", "q"])
            .run(),
    );
    // The context needs SELinux, unless a later --no-preserve takes it back, as with GNU.
    let out = cp().args(["--preserve=cont", "f", "ctx1"]).run();
    assert_exit(&out, 1);
    assert_eq!(
        stderr(&out),
        "cp: cannot preserve security context without an SELinux-enabled kernel\n"
    );
    assert_success(
        &cp()
            .args(["--preserve=cont", "--no-preserve=co", "f", "ctx2"])
            .run(),
    );
    assert_success(
        &cp()
            .args(["--preserve=context", "--no-preserve=cont", "f", "ctx3"])
            .run(),
    );

    for (args, name) in [
        (&["--sparse=al", "f"][..], "s1"),
        (&["--sparse=n", "f"], "s2"),
        (&["--reflink=nev", "f"], "r1"),
        (&["--reflink=au", "--sparse=ne", "f"], "r2"),
        (&["--update=ol", "f"], "u1"),
        (&["--engine=read", "f"], "e1"),
        (&["--resume=ch", "f"], "c1"),
    ] {
        let out = cp().args(args).arg(name).run();
        assert_success(&out);
        assert_eq!(read(scratch.join(name)), "data", "{args:?}");
    }

    // --backup=num is numbered, --backup=ne is `never` (simple), and so are the variable's.
    for (args, env, backup) in [
        (&["--backup=num"][..], None, "b1.~1~"),
        (&["--backup=ne"], None, "b2~"),
        (&["--backup=ni"], None, "b3~"),
        (&["-b"], Some("nu"), "b4.~1~"),
        (&["--backup"], Some("t"), "b5.~1~"),
        (&["--backup="], Some("numb"), "b6.~1~"),
        // The last CONTROL given counts; a bare --backup does not undo it.
        (&["--backup=num", "--backup"], Some("simple"), "b7.~1~"),
    ] {
        let dst = backup.split(['.', '~']).next().unwrap();
        write_file(scratch.join(dst), "old");
        let mut c = cp().args(args).args(["f", dst]);
        if let Some(value) = env {
            c = c.env("VERSION_CONTROL", value);
        }
        let out = c.run();
        assert_success(&out);
        assert_eq!(read(scratch.join(backup)), "old", "{args:?} {env:?}");
        assert_eq!(read(scratch.join(dst)), "data");
    }
}

/// The simple backup suffix as GNU chooses it: -S (which makes backups by itself), else
/// $SIMPLE_BACKUP_SUFFIX; an empty suffix or one with a '/' before its last part is `~`,
/// and an empty -S does not fall back to the variable.
#[test]
fn backup_suffix_falls_back_to_tilde() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    write_file(scratch.join("f"), "new");
    let cases: &[(&[&str], Option<&str>, &str)] = &[
        (&["-S", ""], None, "~"),
        (&["-S", "/x"], None, "~"),
        (&["-S", "//"], None, "~"),
        (&["-S", "a/b"], None, "~"),
        (&["--suffix="], None, "~"),
        (&["-b", "-S", ""], None, "~"),
        (&["-S", ".bak"], None, ".bak"),
        (&["-b"], Some("/x"), "~"),
        (&["-b"], Some(""), "~"),
        (&["-b"], Some(".o"), ".o"),
        (&["-S", ""], Some(".o"), "~"),
        (&["-b", "-S", "a/b"], Some(".o"), "~"),
    ];
    for (i, (args, env, suffix)) in cases.iter().enumerate() {
        let dst = format!("d{i}");
        write_file(scratch.join(&dst), "old");
        let mut cp = Cp::named_cp(dir)
            .current_dir(dir)
            .args(args.iter())
            .args(["f", &dst]);
        if let Some(value) = env {
            cp = cp.env("SIMPLE_BACKUP_SUFFIX", value);
        }
        let out = cp.run();
        assert_success(&out);
        assert_eq!(
            read(scratch.join(format!("{dst}{suffix}"))),
            "old",
            "{args:?} {env:?}"
        );
        assert_eq!(read(scratch.join(&dst)), "new");
    }
    // A suffix ending in '/' is its own last part: kept, and the backup then fails as GNU's.
    write_file(scratch.join("e"), "old");
    let out = Cp::named_cp(dir)
        .current_dir(dir)
        .args(["-S", "x/", "f", "e"])
        .run();
    assert_exit(&out, 1);
    assert_eq!(stderr(&out), "cp: cannot backup 'e': Not a directory\n");
    assert_eq!(read(scratch.join("e")), "old");
}

/// --strip-trailing-slashes strips the sources' slashes only when they are copied into a
/// directory, as GNU does: `cp --strip-trailing-slashes a/ q` with a file `a` fails as
/// without the option, and `sl/` (a symlink to a directory) copied into `dir` is the link.
#[test]
fn strip_trailing_slashes_into_a_directory_only() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    write_file(scratch.join("a"), "a");
    write_file(scratch.join("sd/x"), "x");
    std::os::unix::fs::symlink("sd", scratch.join("sl")).unwrap();
    std::fs::create_dir(scratch.join("dir")).unwrap();
    let cp = || Cp::named_cp(dir).current_dir(dir);
    for flag in ["--strip-trailing-slashes", "--st"] {
        let out = cp().args([flag, "a/", "q"]).run();
        assert_exit(&out, 1);
        assert_eq!(stderr(&out), "cp: cannot stat 'a/': Not a directory\n");
        assert!(!scratch.join("q").exists());
    }
    assert_success(
        &cp()
            .args(["--strip-trailing-slashes", "-r", "sl/", "dir"])
            .run(),
    );
    let copied = std::fs::symlink_metadata(scratch.join("dir/sl")).unwrap();
    assert!(copied.file_type().is_symlink(), "dir/sl: {copied:?}");
    assert_success(
        &cp()
            .args(["--strip-trailing-slashes", "-t", "dir", "a/"])
            .run(),
    );
    assert_eq!(read(scratch.join("dir/a")), "a");
    // Without the option the slash follows the link: the directory's contents are copied.
    std::fs::create_dir(scratch.join("dir2")).unwrap();
    assert_success(&cp().args(["-r", "sl/", "dir2"]).run());
    assert_eq!(read(scratch.join("dir2/sl/x")), "x");
}

engine_tests!(
    source_named_twice,
    unreadable_directory_is_still_made,
    copies_under_a_tight_descriptor_limit
);

/// The same source named twice is copied once, as GNU cp judges it by identity: the same
/// file under the same name in the same directory (`f f`, `f ./f`, `f dir/../f`) gets
/// `warning: source file 'f' specified more than once` and exit 0; a second hard link is
/// another name and is copied; another file of the same name meets "just created"; with
/// backups the second copy is refused too. Under -r the same directory to the same
/// destination gets the directory warning, to another destination it would be a hard link
/// to a directory. Where GNU cp 9.x is on PATH, its output and tree are compared as well.
fn source_named_twice(engine: &str) {
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["f", "f", "dir/"],
            0,
            "cp: warning: source file 'f' specified more than once\n",
        ),
        (
            &["f", "./f", "dir"],
            0,
            "cp: warning: source file './f' specified more than once\n",
        ),
        (
            &["f", "dir/../f", "dir"],
            0,
            "cp: warning: source file 'dir/../f' specified more than once\n",
        ),
        (
            &["f", "f", "f", "dir"],
            0,
            "cp: warning: source file 'f' specified more than once\ncp: warning: source file \
             'f' specified more than once\n",
        ),
        (
            &["-t", "dir", "f", "f"],
            0,
            "cp: warning: source file 'f' specified more than once\n",
        ),
        (&["f", "h", "dir"], 0, ""),
        (
            &["h", "f", "f", "dir"],
            0,
            "cp: warning: source file 'f' specified more than once\n",
        ),
        (
            &["d1/f", "d2/f", "dir"],
            1,
            "cp: will not overwrite just-created 'dir/f' with 'd2/f'\n",
        ),
        // A symlink to the directory is another directory to GNU's lstat.
        (
            &["f", "dl/f", "dir"],
            1,
            "cp: will not overwrite just-created 'dir/f' with 'dl/f'\n",
        ),
        (
            &["-b", "f", "f", "dir"],
            1,
            "cp: will not overwrite just-created 'dir/f' with 'f'\n",
        ),
        (
            &["-r", "sd", "./sd", "dir"],
            0,
            "cp: warning: source directory './sd' specified more than once\n",
        ),
        (
            &["-r", "sd", "sd/.", "dir"],
            1,
            "cp: will not create hard link 'dir/.' to directory 'dir/sd'\n",
        ),
    ];
    let gnu = gnu_cp_9();
    for (args, code, want) in cases {
        let mut trees = Vec::new();
        for gnu_run in [false, true] {
            if gnu_run && !gnu {
                continue;
            }
            let scratch = Scratch::new();
            let dir = scratch.path();
            write_file(scratch.join("f"), "f");
            std::fs::hard_link(scratch.join("f"), scratch.join("h")).unwrap();
            write_file(scratch.join("d1/f"), "1");
            write_file(scratch.join("d2/f"), "2");
            write_file(scratch.join("sd/x"), "x");
            std::fs::create_dir(scratch.join("dir")).unwrap();
            std::os::unix::fs::symlink(".", scratch.join("dl")).unwrap();
            let out = if gnu_run {
                run_gnu_cp(dir, args, &[])
            } else {
                let cp = Cp::named_cp(dir).current_dir(dir).engine(engine);
                cp.args(args.iter()).run()
            };
            assert_exit(&out, *code);
            assert_eq!(
                stderr(&out),
                *want,
                "{}cp {args:?}",
                if gnu_run { "GNU " } else { "" }
            );
            let mut tree: Vec<(String, String)> = walk(&scratch.join("dir"));
            tree.sort();
            trees.push(tree);
        }
        assert_eq!(
            trees[0].len(),
            trees[0]
                .iter()
                .map(|(p, _)| p)
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        );
        if trees.len() == 2 {
            assert_eq!(
                trees[0], trees[1],
                "cp {args:?}: the copies differ from GNU's"
            );
        }
    }
}

/// Every entry below `dir` as (relative path, content or "dir"), for comparing copies.
fn walk(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            if path.is_dir() {
                out.push((rel, "dir".into()));
                stack.push(path);
            } else {
                out.push((rel, read(&path)));
            }
        }
    }
    out
}

/// A source directory that cannot be read is still made in the destination, as GNU cp
/// makes it: empty, with its source's mode, after `cp: cannot access 'src/locked':
/// Permission denied`; the rest is copied and the exit status is 1. The same for an
/// operand. Run unprivileged (as nobody when root, since root reads it anyway).
fn unreadable_directory_is_still_made(engine: &str) {
    for (opts, operand) in [("-r", false), ("-a", false), ("-r", true), ("-a", true)] {
        let scratch = Scratch::new();
        let dir = scratch.path();
        write_file(scratch.join("src/a"), "a");
        write_file(scratch.join("src/sub/b"), "b");
        write_file(scratch.join("src/locked/inner/z"), "z");
        if is_root() {
            chown_tree(dir, NOBODY.0, NOBODY.1);
            scratch.give_to(NOBODY.0, NOBODY.1);
        }
        chmod(scratch.join("src/locked"), 0o000);
        let (from, to, made) = if operand {
            ("src/locked", "dst", "dst")
        } else {
            ("src", "dst", "dst/locked")
        };
        let cp = Cp::named_cp(dir)
            .current_dir(dir)
            .engine(engine)
            .args([opts, from, to]);
        let out = if is_root() {
            cp.run_as(NOBODY.0, NOBODY.1).run()
        } else {
            cp.run()
        };
        assert_exit(&out, 1);
        assert_eq!(
            stderr(&out),
            "cp: cannot access 'src/locked': Permission denied\n",
            "cp {opts} {from} {to}"
        );
        let meta = std::fs::symlink_metadata(scratch.join(made))
            .unwrap_or_else(|e| panic!("cp {opts} {from}: {made} was not made: {e}"));
        assert!(meta.is_dir(), "{made}");
        assert_eq!(
            mode_of(scratch.join(made)),
            0,
            "cp {opts} {from}: mode of {made}"
        );
        chmod(scratch.join(made), 0o700);
        assert_eq!(std::fs::read_dir(scratch.join(made)).unwrap().count(), 0);
        if !operand {
            assert_eq!(read(scratch.join("dst/a")), "a");
            assert_eq!(read(scratch.join("dst/sub/b")), "b");
        }
        chmod(scratch.join("src/locked"), 0o755);
    }
}

/// Under RLIMIT_NOFILE 8, as GNU cp copies: a file, a small tree with -r and with -a (hard
/// links included), several operands; and under 7 all but -a of a tree (which keeps one
/// descriptor for its hard links). GNU cp needs only 5: it opens files by their whole paths,
/// where ringio holds the directory pair it works in (see docs/CONFORMANCE.md).
fn copies_under_a_tight_descriptor_limit(engine: &str) {
    let scratch = Scratch::new();
    let dir = scratch.path();
    let spec = TreeSpec {
        dirs: 6,
        max_depth: 4,
        random_files: 20,
        max_random_size: 100 * 1024,
        ..TreeSpec::small(131)
    };
    let tree = spec.build(&scratch.join("src"));
    write_file(scratch.join("one"), "one file");
    write_file(scratch.join("two"), "two");
    write_file(scratch.join("src/linked"), "twice");
    std::fs::hard_link(scratch.join("src/linked"), scratch.join("src/linked2")).unwrap();
    let atimes = Atimes::record(&tree.root);
    for limit in [8, 7] {
        let run = |args: &[&str]| {
            Cp::named_cp(dir)
                .current_dir(dir)
                .engine(engine)
                .nofile_limit(limit)
                .args(args.iter())
                .run()
        };
        let tag = |name: &str| format!("{name}{limit}");
        assert_success(&run(&["one", &tag("f")]));
        assert_eq!(read(scratch.join(tag("f"))), "one file");
        assert_success(&run(&["-a", "one", &tag("fa")]));
        assert_eq!(read(scratch.join(tag("fa"))), "one file");
        assert_success(&run(&["-r", "src", &tag("r")]));
        assert_trees_equal(&tree.root, &scratch.join(tag("r")), Check::CONTENT);
        let into = tag("into");
        std::fs::create_dir(scratch.join(&into)).unwrap();
        assert_success(&run(&["-r", "one", "src", "two", &into]));
        assert_trees_equal(&tree.root, &scratch.join(&into).join("src"), Check::CONTENT);
        assert_eq!(read(scratch.join(&into).join("two")), "two");
        if limit >= 8 {
            atimes.restore();
            assert_success(&run(&["-a", "src", &tag("a")]));
            atimes.restore();
            let copy = scratch.join(tag("a"));
            assert_trees_equal(&tree.root, &copy, Check::ARCHIVE);
            assert_eq!(inode(copy.join("linked")), inode(copy.join("linked2")));
        }
    }
}

/// Names that need quoting: a newline, a tab, a byte that is not UTF-8, a single quote, a
/// multibyte character, a space.
fn awkward_names() -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStringExt;
    [
        &b"a\nb"[..],
        b"tab\tx",
        b"x\xffy",
        b"it's",
        "caf\u{e9}".as_bytes(),
        b"two words",
    ]
    .iter()
    .map(|name| std::ffi::OsString::from_vec(name.to_vec()))
    .collect()
}

/// File names in `-v` lines, errors and the `-i` prompt are quoted as GNU cp quotes them
/// (shell-escape quoting: `'a'$'\n''b'`, raw bytes of non-UTF-8 names escaped, never U+FFFD),
/// in the C locale and in a UTF-8 one; compared with GNU cp itself when it is installed.
fn names_are_quoted_as_gnu_quotes_them(engine: &str) {
    let scratch = Scratch::new();
    let dir = scratch.path();
    let names = awkward_names();
    for name in &names {
        write_file(dir.join("src").join(name), b"x");
    }
    for locale in ["C", "C.UTF-8"] {
        let dst = format!("dst-{locale}");
        let out = Cp::named_cp(dir)
            .engine(engine)
            .env("LC_ALL", locale)
            .current_dir(dir)
            .args(["-rv", "src", &dst])
            .run();
        assert_success(&out);
        let text = stdout(&out);
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        let quoted = |name: &[u8]| -> String {
            // The expected quoting, written out per name and locale.
            match (name, locale) {
                (b"a\nb", _) => "'a'$'\\n''b'".into(),
                (b"tab\tx", _) => "'tab'$'\\t''x'".into(),
                (b"x\xffy", _) => "'x'$'\\377''y'".into(),
                (b"it's", _) => "\"it's\"".into(),
                (b"two words", _) => "'two words'".into(),
                (_, "C") => "'caf'$'\\303\\251'".into(),
                _ => "'caf\u{e9}'".into(),
            }
        };
        for name in &names {
            use std::os::unix::ffi::OsStrExt;
            let q = quoted(name.as_bytes());
            // src/NAME -> dst/NAME: the quoting spans the whole path.
            let join = |root: &str| {
                let inner = &q[1..q.len() - 1];
                format!("{}{root}/{inner}{}", &q[..1], &q[q.len() - 1..])
            };
            let line = format!("{} -> {}", join("src"), join(&dst));
            assert!(
                lines.contains(&line.as_str()),
                "no {line:?} in the -v lines ({locale}):\n{}",
                lines.join("\n")
            );
        }
        if gnu_cp_9() {
            let gnu = std::process::Command::new("cp")
                .args(["-rv", "src", &format!("gnu-{locale}")])
                .env("LC_ALL", locale)
                .current_dir(dir)
                .stdin(std::process::Stdio::null())
                .output()
                .expect("run GNU cp");
            let gnu_stdout = stdout(&gnu).replace(&format!("gnu-{locale}"), &dst);
            let mut gnu_lines: Vec<&str> = gnu_stdout.lines().collect();
            gnu_lines.sort_unstable();
            assert_eq!(lines, gnu_lines, "-v lines against GNU cp ({locale})");
        }
    }

    // An error names the file the same way.
    let out = Cp::named_cp(dir)
        .engine(engine)
        .current_dir(dir)
        .arg(std::ffi::OsStr::new("missing\nname"))
        .arg("x")
        .run();
    assert_exit(&out, 1);
    assert_eq!(
        stderr(&out),
        "cp: cannot stat 'missing'$'\\n''name': No such file or directory\n"
    );
}

engine_tests!(names_are_quoted_as_gnu_quotes_them);

/// `ringio verify` names a differing entry with the same quoting.
#[test]
fn verify_quotes_names_as_cp_does() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    for name in awkward_names() {
        write_file(dir.join("src").join(&name), b"x");
    }
    std::fs::create_dir(dir.join("dst")).unwrap();
    let out = Cp::bare()
        .current_dir(dir)
        .args(["verify", "src", "dst"])
        .run();
    assert_exit(&out, 1);
    let text = stdout(&out) + &stderr(&out);
    for expected in [
        "'a'$'\\n''b': missing from the destination",
        "'x'$'\\377''y': missing from the destination",
        "\"it's\": missing from the destination",
    ] {
        assert!(text.contains(expected), "no {expected:?} in:\n{text}");
    }
    assert!(!text.contains('\u{fffd}'), "{text}");
}

/// argmatch quotes a bad value, the option and the valid arguments as the locale quotes: curly
/// quotes in a UTF-8 locale (getopt's own messages keep ASCII quotes), as GNU cp does.
#[test]
fn argmatch_quotes_for_the_locale() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    write_file(dir.join("f"), b"x");
    let cases: &[(&[&str], &str)] = &[
        (
            &["--sparse=x", "f", "g"],
            "cp: invalid argument \u{2018}x\u{2019} for \u{2018}--sparse\u{2019}\nValid \
             arguments are:\n  - \u{2018}never\u{2019}\n  - \u{2018}auto\u{2019}\n  - \
             \u{2018}always\u{2019}\nTry 'cp --help' for more information.\n",
        ),
        (
            &["--bogus", "f", "g"],
            "cp: unrecognized option '--bogus'\nTry 'cp --help' for more information.\n",
        ),
    ];
    for (args, expected) in cases {
        let out = Cp::named_cp(dir)
            .env("LC_ALL", "C.UTF-8")
            .current_dir(dir)
            .args(*args)
            .run();
        assert_exit(&out, 1);
        let text = stderr(&out);
        assert_eq!(&text, expected);
        if gnu_cp_9() {
            let gnu = std::process::Command::new("cp")
                .args(*args)
                .env("LC_ALL", "C.UTF-8")
                .current_dir(dir)
                .stdin(std::process::Stdio::null())
                .output()
                .expect("run GNU cp");
            assert_eq!(text, stderr(&gnu), "against GNU cp: {args:?}");
        }
    }
}
