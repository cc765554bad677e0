//! rsync's command line, as ringio reads it under the name `rsync` (and as `ringio sync`):
//! a table of spellings run through the real rsync and through ringio, whose exit codes,
//! messages and results must agree, and one test for each behaviour rsync's users meet that
//! ringio got wrong (the group of a user who is not root, --files-from comments,
//! --out-format's escapes, --link-dest's `cf`, --stats' rates, -xx, --log-file, --fsync,
//! --open-noatime).
//!
//! The reference is the rsync on PATH, or `$RINGIO_TEST_RSYNC` (3.2.7's option table is
//! ringio's; the machine's rsync may be newer: a failure names the version it ran against). Without it the comparisons cannot run: they
//! fail where the CI environment variable is set, and say SKIPPED elsewhere.

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::common::*;

/// The reference rsync: `$RINGIO_TEST_RSYNC` (e.g. the 3.2.7 that tests/rsync/run.sh
/// builds), else `rsync` on PATH.
fn rsync_program() -> PathBuf {
    std::env::var_os("RINGIO_TEST_RSYNC").map_or_else(|| PathBuf::from("rsync"), PathBuf::from)
}

/// rsync's `--version` first line, or None (SKIPPED) where it is missing; missing under CI is
/// a failure, so a skip is never taken for a pass there.
fn reference() -> Option<String> {
    let out = Command::new(rsync_program())
        .arg("--version")
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => Some(
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or_default()
                .to_string(),
        ),
        _ if std::env::var_os("CI").is_some() => {
            panic!("rsync is not installed, and CI is set: the comparison cannot be skipped")
        }
        _ => {
            eprintln!("SKIPPED: rsync is not installed (the reference)");
            None
        }
    }
}

/// `ringio` under the name `rsync`: a symlink in `dir`, made once.
fn named_rsync(dir: &Path) -> PathBuf {
    let link = dir.join("rsync");
    if fs::symlink_metadata(&link).is_err() {
        symlink(env!("CARGO_BIN_EXE_ringio"), &link).expect("symlink rsync");
    }
    link
}

fn run(program: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .current_dir(cwd)
        .env("LC_ALL", "C")
        .env("TZ", "UTC")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", program.display()))
}

fn rsync(cwd: &Path, args: &[&str]) -> Output {
    run(&rsync_program(), cwd, args)
}

fn ours(cwd: &Path, args: &[&str]) -> Output {
    run(&named_rsync(cwd), cwd, args)
}

/// A small source tree with whole-second times (rsync and ringio compare them alike).
fn source(root: &Path) {
    write_file(root.join("src/a"), "alpha\n");
    write_file(root.join("src/sub/b"), vec![b'b'; 5000]);
    write_file(root.join("src/sub/deeper/c"), "c\n");
    for (i, p) in [
        "src/sub/deeper/c",
        "src/sub/deeper",
        "src/sub/b",
        "src/sub",
        "src/a",
        "src",
    ]
    .iter()
    .enumerate()
    {
        let t = Ts::new(1_600_000_000 + i as i64 * 11, 0);
        set_times(&root.join(p), Some(t), Some(t)).expect("set times");
    }
}

/// Every entry below `root`: its path, kind, permission bits, mtime and (files) content.
fn snapshot(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(rd) = fs::read_dir(dir) else { return };
        let mut names: Vec<_> = rd.map(|e| e.expect("entry").path()).collect();
        names.sort();
        for p in names {
            let m = fs::symlink_metadata(&p).expect("lstat");
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let content = if m.is_file() {
                String::from_utf8_lossy(&fs::read(&p).unwrap())
                    .len()
                    .to_string()
            } else {
                String::new()
            };
            // A time the run gave (not the source's, all from 2020) is only "new": two runs
            // a second apart give two.
            let mtime = match m.mtime() {
                _ if m.is_dir() => "dir".to_string(),
                t if t < 1_700_000_000 => t.to_string(),
                _ => "new".to_string(),
            };
            out.push(format!("{rel} {:o} {mtime} {content}", m.mode()));
            if m.is_dir() {
                walk(root, &p, out);
            }
        }
    }
    walk(root, root, &mut out);
    out
}

/// rsync's first line on stderr, without where in its source it was raised.
fn first_error(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr);
    let line = text.lines().next().unwrap_or_default();
    match line.find(" at ") {
        Some(at) if line.contains("error:") => line[..at].to_string(),
        _ => line.to_string(),
    }
}

/// Spellings of rsync 3.2.7's options, given after the operands (popt reads options anywhere).
/// Each is run by rsync and by ringio named rsync on the same tree: the exit codes agree, a
/// refusal says what rsync says, and a run that succeeds leaves the same tree.
const SPELLINGS: &[&[&str]] = &[
    // Repeats: popt allows them, the last value wins.
    &["-a", "-a"],
    &["-avz"],
    &["-r", "--delete", "--delete"],
    &["-r", "-n", "--dry-run"],
    &["-a", "--suffix=.a", "--suffix=.b"],
    &["-a", "--modify-window=1", "--modify-window=2"],
    &["-a", "--exclude=b", "--exclude=c"],
    // --no-X undoes X, -a's share too; a later X redoes it.
    &["-a", "--no-perms"],
    &["-a", "--no-p", "-p"],
    &["-a", "--no-t"],
    &["-a", "--no-times", "-t"],
    &["-a", "--no-o", "--no-g"],
    &["-a", "--no-D"],
    &["-a", "--no-devices", "--no-specials"],
    &["-a", "--no-r", "-d"],
    &["-a", "--no-recursive", "-r"],
    &["-a", "-S", "--no-S"],
    &["-a", "--sparse", "--no-sparse", "-S"],
    &["-a", "-c", "--no-c"],
    &["-a", "-W", "--no-W"],
    &["-a", "--no-whole-file", "-W"],
    &["-a", "-vv", "--no-v"],
    &["-a", "-i", "--no-i"],
    &["-a", "-h", "--no-h"],
    &["-a", "-b", "--no-backup"],
    &["-a", "--inplace", "--no-inplace"],
    &["-a", "--delay-updates", "--no-delay-updates", "--inplace"],
    &["-a", "-H", "--no-H"],
    &["-a", "-x", "--no-x"],
    &["-a", "-xx"],
    &["-a", "-m", "--no-m"],
    &["-a", "--mkpath", "--no-mkpath"],
    &["-a", "--force", "--no-force"],
    &["-a", "--numeric-ids", "--no-numeric-ids"],
    &["-a", "--from0", "--no-from0"],
    &["-a", "--omit-dir-times", "--no-O"],
    &["-a", "-U", "--no-U"],
    &["-a", "--no-A", "--no-X"],
    &["-a", "--no-crtimes"],
    &["-a", "--no-J"],
    &["-a", "--i-d", "--no-i-d"],
    &["-a", "--no-progress"],
    &["-a", "-P", "--no-progress"],
    &["-a", "-c", "--open-noatime"],
    &["-a", "--no-partial"],
    // Accepted where rsync ignores them locally (or carries them out, unseen).
    &["-a", "-z"],
    &["-a", "--compress", "--compress-level=9"],
    &["-a", "--zl=1", "--no-z"],
    &["-a", "--compress-choice=zstd"],
    &["-a", "--zc=zlib"],
    &["-a", "--old-compress"],
    &["-a", "--new-compress"],
    &["-a", "--skip-compress=gz/jpg"],
    &["-a", "--checksum-choice=md5"],
    &["-a", "--cc=xxh128"],
    &["-a", "--cc=md5,md4"],
    &["-a", "--block-size=700"],
    &["-a", "-B", "128K"],
    &["-a", "-B1k"],
    &["-a", "-s"],
    &["-a", "--protect-args"],
    &["-a", "--secluded-args", "--no-s"],
    &["-a", "--old-args"],
    &["-a", "--no-inc-recursive"],
    &["-a", "--no-i-r"],
    &["-a", "--inc-recursive"],
    &["-a", "--fsync"],
    &["-a", "--open-noatime"],
    &["-a", "--no-open-noatime"],
    &["-a", "--preallocate"],
    &["-a", "-8"],
    &["-a", "--8-bit-output", "--no-8"],
    &["-a", "-4"],
    &["-a", "--ipv6"],
    &["-a", "--port=873"],
    &["-a", "--address=127.0.0.1"],
    &["-a", "--sockopts=SO_SNDBUF=1"],
    &["-a", "--blocking-io"],
    &["-a", "--outbuf=L"],
    &["-a", "--max-alloc=0"],
    &["-a", "--max-alloc=8M"],
    &["-a", "--stderr=errors"],
    &["-a", "--stderr=c"],
    &["-a", "--stderr=err"],
    &["-a", "--stderr=ERRORS"],
    &["-a", "--msgs2stderr"],
    &["-a", "--trust-sender"],
    &["-a", "--qsort"],
    &["-a", "--timeout=30", "--no-timeout"],
    &["-a", "--bwlimit=1m", "--no-bwlimit"],
    &["-a", "--contimeout=0"],
    &["-a", "--no-contimeout"],
    &["-a", "--checksum-seed=5"],
    &["-a", "-e", "ssh"],
    &["-a", "--debug=flist2,del"],
    &["-a", "--max-delete="],
    &["-a", "-@", "-1"],
    &["-a", "--modify-window="],
    &["-a", "--remove-sent-files"],
    &["-a", "--no-motd"],
    &["-a", "--chown=no-such-user"],
    &["-a", "--chown=:no-such-group"],
    // Refused, as rsync refuses them.
    // --no-X where rsync has none.
    &["-a", "--no-delete"],
    &["-a", "--no-archive"],
    &["-a", "--no-a"],
    &["-a", "--no-stats"],
    &["-a", "--no-u"],
    &["-a", "--no-n"],
    &["-a", "--no-fake-super"],
    &["-a", "--no-P"],
    &["-a", "--exclude-from=no-such-file"],
    &["-a", "--include-from=no-such-file"],
    &["-a", "--files-from=no-such-file"],
    &["--bogus"],
    &["--recur"],
    &["--del=x"],
    &["-Q"],
    &["-a", "--suffix"],
    &["-aB"],
    &["--verbose=1"],
    &["-a", "-N"],
    &["-a", "--crtimes"],
    &["-a", "--cc=bogus"],
    &["-a", "--zc=bogus"],
    &["-a", "-B", "1000000"],
    &["-a", "--max-alloc=1"],
    &["-a", "--stderr=bogus"],
    &["-a", "--outbuf=X"],
    &["-a", "-M", "x"],
    &["-a", "--password-file=x"],
    &["-a", "--contimeout=3"],
    &["-a", "--debug=bogus"],
    &["-a", "--timeout=x"],
    &["-a", "--checksum-seed=x"],
    &["-a", "--modify-window=x"],
    &["-a", "--modify-window=2147483648"],
    &["-a", "--modify-window=99999999999"],
    &["-a", "--max-delete=x"],
    &["-a", "--suffix=/x"],
    &["-a", "-b", "--suffix=/x"],
    &["-a", "--suffix="],
    &["-a", "--delay-updates", "--inplace"],
    &["--delete"],
    &["-d", "--delete", "--no-d"],
    &["-r", "--delete-before", "--delete-after"],
    &["-r", "--delete-delay", "--delete-before"],
];

#[test]
fn spellings_exit_and_end_as_rsync() {
    let Some(version) = reference() else { return };
    let mut wrong = Vec::new();
    for options in SPELLINGS {
        // Each tool in a tree of its own (--remove-source-files changes the source).
        let dir = Scratch::new();
        let (rs, ri) = (dir.join("rs"), dir.join("ri"));
        source(&rs);
        source(&ri);
        // Options after the operands: popt reads them anywhere.
        let mut args = vec!["src/", "d/"];
        args.extend_from_slice(options);
        let theirs = rsync(&rs, &args);
        let mine = ours(&ri, &args);
        let shown = options.join(" ");
        if theirs.status.code() != mine.status.code() {
            wrong.push(format!(
                "{shown}: rsync exits {:?} ({}), ringio {:?} ({})",
                theirs.status.code(),
                first_error(&theirs),
                mine.status.code(),
                first_error(&mine)
            ));
            continue;
        }
        if !theirs.status.success() {
            if first_error(&theirs) != first_error(&mine) {
                wrong.push(format!(
                    "{shown}: rsync says {:?}, ringio {:?}",
                    first_error(&theirs),
                    first_error(&mine)
                ));
            }
            continue;
        }
        let both = |side: &Path| [snapshot(&side.join("d")), snapshot(&side.join("src"))];
        let (t, m) = (both(&rs), both(&ri));
        if t != m {
            wrong.push(format!("{shown}: rsync made {t:#?}\nringio made {m:#?}"));
        }
    }
    assert!(wrong.is_empty(), "against {version}:\n{}", wrong.join("\n"));
}

/// `ringio sync` reads the same command line as `rsync`.
#[test]
fn ringio_sync_reads_rsyncs_command_line() {
    let dir = Scratch::new();
    source(dir.path());
    let out = Cp::bare()
        .arg("sync")
        .args([
            "src/", "d/", "-avz", "-a", "--no-i-r", "-s", "--cc=md5", "-B", "700",
        ])
        .current_dir(dir.path())
        .run();
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(fs::read(dir.join("d/sub/deeper/c")).unwrap(), b"c\n");
    let bad = Cp::bare()
        .arg("sync")
        .args(["--recur", "src/", "d/"])
        .current_dir(dir.path())
        .run();
    assert_exit(&bad, 1);
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr),
        "ringio sync: --recur: unknown option\nringio sync error: syntax or usage error (code 1)\n"
    );
}

/// `-h` with nothing to transfer is help (rsync's old -h), exit 0; undone, it is not.
#[test]
fn h_alone_is_help() {
    let dir = Scratch::new();
    let help = ours(dir.path(), &["-h"]);
    assert_exit(&help, 0);
    assert!(String::from_utf8_lossy(&help.stdout).contains("--human-readable"));
    let undone = ours(dir.path(), &["-h", "--no-h"]);
    assert_exit(&undone, 1);
}

/// A --files-from list that is a FIFO is refused at once, not waited on.
#[test]
fn a_files_from_fifo_is_refused_not_waited_on() {
    let dir = Scratch::new();
    source(dir.path());
    mkfifo(&dir.join("list"), 0o644);
    // Through the helper with a time limit: a run that waits on the FIFO fails, not hangs.
    let out = Cp::bare()
        .arg("sync")
        .args(["-a", "--files-from=list", "src/", "d/"])
        .current_dir(dir.path())
        .timeout(std::time::Duration::from_secs(20))
        .run();
    assert_exit(&out, 1);
    assert!(
        first_error(&out).contains("failed to open files-from file list: not a regular file"),
        "{}",
        describe(&out)
    );
}

/// A later --no-X undoes X in command-line order, -a's share included: modes and times as
/// rsync leaves them.
#[test]
fn no_options_undo_in_command_line_order() {
    let dir = Scratch::new();
    source(dir.path());
    chmod(dir.join("src/a"), 0o600);
    for (dest, options, mode, mtime_kept) in [
        ("p/", &["-a", "--no-p"][..], 0o644, true),
        ("pp/", &["-a", "--no-perms", "-p"][..], 0o600, true),
        ("t/", &["-a", "--no-t"][..], 0o600, false),
    ] {
        let mut args = vec!["src/", dest];
        args.extend_from_slice(options);
        let out = ours(dir.path(), &args);
        assert!(out.status.success(), "{options:?}: {}", describe(&out));
        let m = fs::metadata(dir.join(dest).join("a")).unwrap();
        // umask 022 in tests: a new file without -p gets the source's bits less the umask.
        let expect = if mode == 0o644 { 0o600 & !0o022 } else { mode };
        assert_eq!(m.mode() & 0o7777, expect, "{options:?}");
        let src = fs::metadata(dir.join("src/a")).unwrap();
        assert_eq!(m.mtime() == src.mtime(), mtime_kept, "{options:?}");
    }
}

/// --open-noatime reads the sources without moving their access times; --fsync copies as a
/// plain run does.
#[test]
fn open_noatime_leaves_access_times_and_fsync_copies() {
    let dir = Scratch::new();
    source(dir.path());
    let f = dir.join("src/sub/b");
    // An atime older than the mtime: a plain read moves it (relatime), O_NOATIME does not.
    let old = Ts::new(1_500_000_000, 0);
    set_times(&f, Some(old), Some(Ts::new(1_600_000_000, 0))).unwrap();
    let out = ours(
        dir.path(),
        &["-a", "--open-noatime", "--fsync", "src/", "d/"],
    );
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(lstat_times(&f).0, old, "the source's atime moved");
    assert_eq!(fs::read(dir.join("d/sub/b")).unwrap(), vec![b'b'; 5000]);
    let fsynced = ours(dir.path(), &["-a", "--fsync", "-I", "src/", "e/"]);
    assert!(fsynced.status.success(), "{}", describe(&fsynced));
    assert_eq!(snapshot(&dir.join("d")), snapshot(&dir.join("e")));
}

/// A user who cannot give files their group (nobody, with no supplementary group) syncs a
/// root-owned tree twice: the second run lists nothing, as rsync lists nothing.
#[test]
fn a_user_without_the_group_resyncs_silently() {
    if !is_root() {
        assert!(std::env::var_os("CI").is_none(), "CI runs these as root");
        eprintln!("SKIPPED: running as another user needs root");
        return;
    }
    let dir = Scratch::new();
    dir.give_to(NOBODY.0, NOBODY.1);
    source(dir.path());
    let (uid, gid) = NOBODY;
    let as_nobody = |program: &Path, dest: &str| {
        Command::new(program)
            .args(["-ai", "src/", dest])
            .current_dir(dir.path())
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .uid(uid)
            .gid(gid)
            .output()
            .expect("run as nobody")
    };
    let ringio = named_rsync(dir.path());
    let first = as_nobody(&ringio, "d/");
    assert!(first.status.success(), "{}", describe(&first));
    let second = as_nobody(&ringio, "d/");
    assert!(second.status.success(), "{}", describe(&second));
    assert_eq!(
        String::from_utf8_lossy(&second.stdout),
        "",
        "a re-sync of an unchanged tree lists nothing"
    );
    if reference().is_some() {
        // A copy nobody can run (a reference built under root's home is out of its reach).
        let rs = match std::env::var_os("RINGIO_TEST_RSYNC") {
            Some(built) => {
                let copy = dir.join("reference-rsync");
                fs::copy(built, &copy).expect("copy the reference rsync");
                copy
            }
            None => rsync_program(),
        };
        as_nobody(&rs, "r/");
        let theirs = as_nobody(&rs, "r/");
        assert_eq!(second.stdout, theirs.stdout, "{}", describe(&theirs));
        assert_eq!(snapshot(&dir.join("d")), snapshot(&dir.join("r")));
    }
}

/// --files-from: lines starting with '#' or ';' are comments, CR ends a line, as rsync reads
/// the list.
#[test]
fn files_from_skips_comments_as_rsync() {
    let dir = Scratch::new();
    source(dir.path());
    write_file(dir.join("src/#hash"), "not listed");
    write_file(dir.join("src/;semi"), "not listed");
    write_file(
        dir.join("list"),
        "# a comment\n;another\na\r\nsub/b\n\n#hash\n",
    );
    let out = ours(dir.path(), &["-a", "--files-from=list", "src/", "d/"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(dir.join("d/a").exists() && dir.join("d/sub/b").exists());
    assert!(!dir.join("d/#hash").exists() && !dir.join("d/;semi").exists());
    if reference().is_some() {
        let theirs = rsync(dir.path(), &["-a", "--files-from=list", "src/", "r/"]);
        assert!(theirs.status.success(), "{}", describe(&theirs));
        assert_eq!(snapshot(&dir.join("d")), snapshot(&dir.join("r")));
    }
}

/// --out-format: %o, %M and %t as rsync prints them; what rsync does not know is printed as
/// written.
#[test]
fn out_format_escapes_as_rsync() {
    let dir = Scratch::new();
    source(dir.path());
    let format = "%o|%M|%n|%q|%a|%-6l|";
    let mine = ours(
        dir.path(),
        &["-a", &format!("--out-format={format}"), "src/", "d/"],
    );
    assert!(mine.status.success(), "{}", describe(&mine));
    let text = String::from_utf8_lossy(&mine.stdout);
    assert!(
        text.contains("send|2020/09/13-12:27:24|a|%q|%a|6     |"),
        "{text}"
    );
    let timed = ours(dir.path(), &["-a", "--out-format=%t", "src/", "t/"]);
    let line = String::from_utf8_lossy(&timed.stdout);
    let line = line
        .lines()
        .find(|l| !l.starts_with("created directory"))
        .unwrap_or_default();
    // 2026/11/27 06:31:10
    let shape: String = line
        .chars()
        .map(|c| if c.is_ascii_digit() { '9' } else { c })
        .collect();
    assert_eq!(shape, "9999/99/99 99:99:99", "{line}");
    if reference().is_some() {
        let theirs = rsync(
            dir.path(),
            &["-a", &format!("--out-format={format}"), "src/", "r/"],
        );
        let lines = |t: &str| -> Vec<String> {
            t.lines()
                .filter(|l| l.starts_with("send|"))
                .map(String::from)
                .collect()
        };
        assert_eq!(
            lines(&String::from_utf8_lossy(&theirs.stdout)),
            lines(&text),
            "{}",
            describe(&theirs)
        );
    }
}

/// --link-dest: a file whose data is unchanged there but whose mode is not is copied from
/// there: `cf`, as rsync lists it.
#[test]
fn link_dest_lists_a_local_copy_as_cf() {
    let dir = Scratch::new();
    source(dir.path());
    let made = ours(dir.path(), &["-a", "src/", "prev/"]);
    assert!(made.status.success(), "{}", describe(&made));
    chmod(dir.join("src/a"), 0o600);
    let mine = ours(dir.path(), &["-ai", "--link-dest=../prev", "src/", "cur/"]);
    assert!(mine.status.success(), "{}", describe(&mine));
    let text = String::from_utf8_lossy(&mine.stdout);
    assert!(text.contains("cf...p..... a\n"), "{text}");
    assert_eq!(fs::read(dir.join("cur/a")).unwrap(), b"alpha\n");
    assert_eq!(mode_of(dir.join("cur/a")) & 0o7777, 0o600);
    if reference().is_some() {
        let theirs = rsync(dir.path(), &["-ai", "--link-dest=../prev", "src/", "r/"]);
        let theirs = String::from_utf8_lossy(&theirs.stdout);
        let line = |t: &str| t.lines().find(|l| l.ends_with(" a")).map(String::from);
        assert_eq!(line(&text), line(&theirs));
    }
}

/// -v and --stats: the rate and the speedup with thousands separators.
#[test]
fn stats_rates_have_thousands_separators() {
    let dir = Scratch::new();
    source(dir.path());
    write_file(dir.join("src/big"), vec![7u8; 3 << 20]);
    let out = ours(dir.path(), &["-a", "--stats", "src/", "d/"]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("sent "))
        .unwrap_or_else(|| panic!("{text}"));
    let rate = line
        .split("  ")
        .find(|p| p.ends_with(" bytes/sec"))
        .unwrap()
        .trim_end_matches(" bytes/sec");
    let (whole, frac) = rate.split_once('.').unwrap();
    assert_eq!(frac.len(), 2, "{line}");
    let groups: Vec<&str> = whole.split(',').collect();
    assert!(groups.len() >= 2, "a rate over 1,000 bytes/sec: {line}");
    assert!(
        groups[1..].iter().all(|g| g.len() == 3) && groups[0].len() <= 3,
        "{line}"
    );
}

/// -xx leaves a mount point out altogether (-x makes it, empty), as rsync.
#[test]
fn xx_leaves_mount_points_out() {
    let dir = Scratch::new();
    source(dir.path());
    let mnt = dir.join("src/mnt");
    fs::create_dir(&mnt).unwrap();
    let _mount = match TmpfsMount::new(&mnt, "1m") {
        Ok(m) => m,
        Err(why) => {
            assert!(std::env::var_os("CI").is_none(), "{why}");
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    write_file(mnt.join("inner"), "other filesystem");
    let once = ours(dir.path(), &["-a", "-x", "src/", "x/"]);
    assert!(once.status.success(), "{}", describe(&once));
    assert!(dir.join("x/mnt").is_dir() && !dir.join("x/mnt/inner").exists());
    let twice = ours(dir.path(), &["-a", "-xx", "src/", "xx/"]);
    assert!(twice.status.success(), "{}", describe(&twice));
    assert!(!dir.join("xx/mnt").exists(), "-xx made the mount point");
    assert!(dir.join("xx/sub/deeper/c").exists());
    if reference().is_some() {
        rsync(dir.path(), &["-a", "-xx", "src/", "r/"]);
        assert_eq!(snapshot(&dir.join("xx")), snapshot(&dir.join("r")));
    }
}

/// `--max-delete=` is 0 to popt: deletions due are stopped, exit 25.
#[test]
fn an_empty_max_delete_allows_none_and_exits_25() {
    let dir = Scratch::new();
    source(dir.path());
    write_file(dir.join("d/extra"), "x");
    let out = ours(
        dir.path(),
        &["-a", "--delete", "--max-delete=", "src/", "d/"],
    );
    assert_exit(&out, 25);
    assert!(dir.join("d/extra").exists());
    assert_eq!(fs::read(dir.join("d/a")).unwrap(), b"alpha\n");
}

/// --log-file naming a directory: warned about and ignored, the run goes on (exit 0).
#[test]
fn a_log_file_that_cannot_be_opened_is_ignored_with_a_warning() {
    let dir = Scratch::new();
    source(dir.path());
    fs::create_dir(dir.join("logdir")).unwrap();
    let out = ours(dir.path(), &["-a", "--log-file=logdir", "src/", "d/"]);
    assert_exit(&out, 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("failed to open log-file logdir: Is a directory (21)")
            && err.contains("Ignoring \"log file\" setting."),
        "{err}"
    );
    assert_eq!(fs::read(dir.join("d/a")).unwrap(), b"alpha\n");
    // A FIFO neither hangs the run nor is written.
    mkfifo(&dir.join("fifo"), 0o644);
    let fifo = ours(dir.path(), &["-a", "--log-file=fifo", "src/", "e/"]);
    assert_exit(&fifo, 0);
    assert!(
        String::from_utf8_lossy(&fifo.stderr).contains("Ignoring \"log file\" setting."),
        "{}",
        describe(&fifo)
    );
    // Nor does a symlink lead it elsewhere.
    symlink(dir.join("elsewhere"), dir.join("link")).unwrap();
    let link = ours(dir.path(), &["-a", "--log-file=link", "src/", "f/"]);
    assert_exit(&link, 0);
    assert!(!dir.join("elsewhere").exists(), "{}", describe(&link));
}

/// A DEST whose parent is missing cannot be made: rsync's file I/O exit, 11.
#[test]
fn a_dest_whose_parent_is_missing_exits_11() {
    let dir = Scratch::new();
    source(dir.path());
    let out = ours(dir.path(), &["-a", "src/", "missing/d/"]);
    assert_exit(&out, 11);
    assert!(!dir.join("missing").exists());
    if reference().is_some() {
        let theirs = rsync(dir.path(), &["-a", "src/", "missing/r/"]);
        assert_eq!(theirs.status.code(), Some(11), "{}", describe(&theirs));
    }
}

/// rsync's option conflicts are refused even where the option would not act (--suffix
/// without -b), with rsync's words, and nothing is made.
#[test]
fn conflicts_are_refused_before_anything_is_made() {
    let dir = Scratch::new();
    source(dir.path());
    for (options, message) in [
        (
            &["--suffix=/x"][..],
            "rsync: --suffix cannot contain slashes: /x",
        ),
        (
            &["--delay-updates", "--inplace"][..],
            "rsync: --inplace cannot be used with --delay-updates",
        ),
        (
            &["--modify-window=4294967296"][..],
            "rsync: --modify-window=4294967296: number too large or too small",
        ),
    ] {
        let mut args = vec!["-a", "src/", "d/"];
        args.extend_from_slice(options);
        let out = ours(dir.path(), &args);
        assert_exit(&out, 1);
        assert_eq!(first_error(&out), message);
        assert!(!dir.join("d").exists(), "{options:?} made DEST");
    }
}
