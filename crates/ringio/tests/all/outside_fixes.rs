//! Defects found outside sync by attacking dup, the server and cp's log file: a copy more
//! readable than its source, a signal that waits on a FIFO, a log file that is not a file.

use std::fs;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common::*;

/// `ringio ARGS` under `umask` (set in a shell that then becomes ringio).
fn ringio_with_umask(umask: u32, args: &[&Path]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("umask {umask:03o} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_ringio"))
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
        .expect("run ringio through sh")
}

/// What GNU cp gives a new copy of a file of `mode` under `umask`: the source's permission
/// bits (setuid, setgid and sticky dropped) less the umask.
fn cp_new_file_mode(mode: u32, umask: u32) -> u32 {
    mode & 0o777 & !umask
}

/// A copy made by `ringio dup` is never more open than its source: a private file stays
/// private, with every method, under every umask, and whatever the source's mode (the mode cp
/// gives a new file). An existing DST keeps its mode, as with cp.
#[test]
fn dup_copies_get_at_most_the_source_permissions_with_every_method() {
    let s = Scratch::new();
    let src = s.join("src");
    fs::write(&src, b"private bytes\n".repeat(1000)).unwrap();
    let dup = Path::new("dup");
    let m = Path::new("--method");
    for (mode, umask) in [
        (0o600, 0o022),
        (0o640, 0o022),
        (0o640, 0o077),
        (0o400, 0o022),
        (0o4755, 0o022),
        (0o777, 0o002),
        (0o666, 0o000),
    ] {
        chmod(&src, mode);
        for method in DUP_METHODS {
            let dst = s.join(format!("dst-{method}-{mode:o}-{umask:o}"));
            let out = ringio_with_umask(umask, &[dup, m, Path::new(method), &src, &dst]);
            if *method == "reflink" && !out.status.success() {
                assert_stderr_has(&out, "cannot clone");
                assert!(!dst.exists(), "a failed dup leaves no file");
                continue;
            }
            assert_exit(&out, 0);
            assert_eq!(
                mode_of(&dst),
                cp_new_file_mode(mode, umask),
                "dup --method {method} of a {mode:o} file under umask {umask:o}"
            );
            assert_eq!(fs::read(&dst).unwrap(), fs::read(&src).unwrap());
        }
    }
    // GNU cp agrees, where it is installed.
    if gnu_cp_available() {
        chmod(&src, 0o600);
        let out = gnu_cp(s.path(), ["src", "by-cp"]);
        assert_success(&out);
        let dst = s.join("by-dup");
        assert_exit(&ringio_with_umask(0o022, &[dup, &src, &dst]), 0);
        assert_eq!(mode_of(&dst), mode_of(s.join("by-cp")));
    }
    // An existing DST keeps its mode (cp's rule), however open the source is.
    chmod(&src, 0o644);
    let dst = s.join("existing");
    fs::write(&dst, b"old").unwrap();
    chmod(&dst, 0o600);
    for method in DUP_METHODS.iter().filter(|m| **m != "reflink") {
        assert_exit(
            &ringio_with_umask(0o022, &[dup, m, Path::new(method), &src, &dst]),
            0,
        );
        assert_eq!(mode_of(&dst), 0o600, "{method} over an existing 0600 file");
    }
}

/// `dup --compare SRC DST` writes DST with the fastest method: DST too gets at most the
/// source's permissions, and the scratch directory of the per-method copies is gone.
#[test]
fn dup_compare_writes_dst_with_at_most_the_source_permissions() {
    let s = Scratch::new();
    let src = s.join("src");
    fs::write(&src, vec![7u8; 200_000]).unwrap();
    chmod(&src, 0o600);
    let dst = s.join("dst");
    let args: [&Path; 6] = [
        Path::new("dup"),
        &src,
        &dst,
        Path::new("--compare"),
        Path::new("--runs"),
        Path::new("1"),
    ];
    let out = ringio_with_umask(0o022, &args);
    assert_exit(&out, 0);
    assert_eq!(mode_of(&dst), 0o600);
    let left: Vec<_> = fs::read_dir(s.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "scratch left behind: {left:?}");
}

/// Makes a FIFO at `path`.
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
}

/// `--log-file` names something that is not a regular file (a FIFO with or without a reader, a
/// symlink to a FIFO or to a regular file, a directory, a device): cp and sync refuse it at
/// once, with a message naming the path, before copying anything; the FIFO is never waited
/// on, so nothing delays the command (a signal included), and no file is written through a
/// symlink.
#[test]
fn log_file_must_be_a_regular_file_and_is_refused_at_once_or_ignored_as_rsync() {
    let s = Scratch::new();
    write_file(s.join("src/f"), b"data");
    mkfifo(&s.join("fifo"));
    mkfifo(&s.join("fifo-read"));
    write_file(s.join("real.log"), b"");
    std::os::unix::fs::symlink("fifo", s.join("to-fifo")).unwrap();
    std::os::unix::fs::symlink("real.log", s.join("to-real")).unwrap();
    fs::create_dir(s.join("dir")).unwrap();
    // A reader on one FIFO: there even a non-blocking open for writing would succeed, so
    // only a check of the type refuses it.
    let reader = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(s.join("fifo-read"))
        .unwrap();
    let mut cases = vec![
        ("fifo", "not a regular file (a FIFO)"),
        ("fifo-read", "not a regular file (a FIFO)"),
        ("to-fifo", "not a regular file (a symbolic link)"),
        ("to-real", "not a regular file (a symbolic link)"),
        ("dir", "Is a directory"),
    ];
    if is_root() {
        let c = std::ffi::CString::new(s.join("null").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; makes a character device (1, 3 is /dev/null).
        let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
        assert_eq!(rc, 0, "mknod");
        cases.push(("null", "not a regular file (a character device)"));
    }
    for (name, what) in cases {
        let log = s.join(name);
        for command in ["cp", "sync"] {
            let dst = s.join(format!("dst-{command}-{name}"));
            let mut args = vec![command.to_string(), "-r".into()];
            args.push(format!("--log-file={}", log.display()));
            args.push(format!("{}/", s.join("src").display()));
            args.push(dst.display().to_string());
            let started = std::time::Instant::now();
            let out = Cp::bare()
                .args(&args)
                .timeout(std::time::Duration::from_secs(20))
                .run();
            let took = started.elapsed();
            assert!(
                took < std::time::Duration::from_secs(2),
                "{command} --log-file {name}: {took:?} to refuse it"
            );
            assert_stderr_has(&out, what);
            if command == "cp" {
                // cp fails before it copies anything.
                assert!(
                    !out.status.success(),
                    "cp --log-file {name}: {}",
                    describe(&out)
                );
                assert_stderr_has(
                    &out,
                    &format!("cannot open the log file '{}'", log.display()),
                );
                assert!(!dst.exists(), "cp copied with a refused log file");
            } else {
                // sync, as rsync: warned about, ignored, and the transfer made.
                assert!(
                    out.status.success(),
                    "sync --log-file {name}: {}",
                    describe(&out)
                );
                assert_stderr_has(&out, &format!("failed to open log-file {}", log.display()));
                assert_stderr_has(&out, "Ignoring \"log file\" setting.");
                assert_eq!(fs::read(dst.join("f")).unwrap(), b"data");
            }
        }
    }
    assert_eq!(
        fs::read(s.join("real.log")).unwrap(),
        b"",
        "written through a symlink"
    );
    drop(reader);
    // A regular log file is still written, by both commands.
    for command in ["cp", "sync"] {
        let log = s.join(format!("{command}.log"));
        let out = Cp::bare()
            .args([command, "-r"])
            .arg(format!("--log-file={}", log.display()))
            .arg(format!("{}/", s.join("src").display()))
            .arg(s.join(format!("ok-{command}")))
            .run();
        assert_exit(&out, 0);
        assert!(
            fs::read_to_string(&log).unwrap().contains('f'),
            "{command}: nothing logged"
        );
        assert_eq!(
            fs::read(s.join(format!("ok-{command}/f"))).unwrap(),
            b"data"
        );
    }
}

/// SIGINT in the middle of a copy that logs to a file acts at once: the copy stops cleanly
/// (its partial files removed) and ends by the signal well within the grace period that
/// ends a command blocked in the kernel.
#[test]
fn sigint_during_a_logged_copy_acts_promptly() {
    use std::os::unix::process::ExitStatusExt;
    use std::time::{Duration, Instant};
    let s = Scratch::new();
    for i in 0..20 {
        write_file(s.join(format!("src/f{i:02}")), vec![i as u8; 64 << 10]);
    }
    let hold = s.join("hold");
    fs::create_dir(&hold).unwrap();
    let log = s.join("cp.log");
    let running = Cp::new()
        .env("RINGIO_TEST_HOLD_DIR", hold.to_str().unwrap())
        .arg("-rv")
        .arg(format!("--log-file={}", log.display()))
        .arg(s.join("src"))
        .arg(s.join("dst"))
        .spawn();
    let pid = running.pid();
    let mut signalled = None;
    let out = running.serve_holds(&hold, |k| {
        if k == 3 {
            // SAFETY: kill has no memory-safety preconditions; the pid is our unreaped child.
            unsafe { libc::kill(pid, libc::SIGINT) };
            signalled = Some(Instant::now());
        }
    });
    let took = signalled
        .expect("the copy reached its third hold")
        .elapsed();
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGINT),
        "{}",
        describe(&out)
    );
    assert_stderr_has(&out, "partially copied files were removed");
    assert!(
        took < Duration::from_millis(1500),
        "{took:?} from SIGINT to the end"
    );
}
