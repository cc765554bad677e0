//! `ringio cp --resume`: a copy killed with SIGKILL at any point, run again with `--resume`,
//! gives exactly the tree an uninterrupted copy gives; complete files are kept as they are. And
//! the race that must never redirect a write: destination directories swapped for symlinks
//! while the copy runs.

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::*;

engine_tests!(
    killed_copies_resume_to_the_same_tree,
    resume_keeps_complete_files_and_recopies_the_rest,
    resume_removes_only_its_own_stale_temporaries,
);

/// The source: every kind of entry and metadata (small tree) plus a file big enough to be split
/// into chunks, so a kill can land in the middle of it.
fn source(scratch: &Scratch) -> std::path::PathBuf {
    let src = scratch.join("src");
    TreeSpec::small(7).build(&src);
    let big: Vec<u8> = (0..24u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    fs::write(src.join("big.bin"), big).unwrap();
    evict(src.join("big.bin"));
    src
}

/// Everything `cp -a` keeps but atimes, which reading the source moves (the interrupted run read
/// it too).
const NO_ATIME: Check = Check {
    atime: false,
    ..Check::ARCHIVE
};

fn cp(engine: &str, args: &[&str], dir: &Path) -> Cp {
    Cp::new()
        .engine(engine)
        .args(["--chunk-size", "1M"])
        .args(args)
        .current_dir(dir)
}

/// Kills `ringio cp` with SIGKILL `after` it starts (or lets it finish if it is faster).
fn killed_copy(cp: Cp, after: Duration) {
    let mut running = cp.spawn();
    let started = Instant::now();
    while started.elapsed() < after {
        if running.try_status().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    // SAFETY: signalling our own child, which has not been reaped (try_wait saw it running).
    unsafe { libc::kill(running.pid(), libc::SIGKILL) };
    let _ = running.wait();
}

/// SIGKILL before the first file, early in the tree, in the big file and near the end (when
/// directory metadata is applied); then `--resume`, and the tree must equal the source.
fn killed_copies_resume_to_the_same_tree(engine: &str) {
    let scratch = Scratch::new();
    let src = source(&scratch);
    let mut round = 0;
    for extra in [&["-a"][..], &["-a", "--atomic"]] {
        for after_ms in [0u64, 3, 15, 40, 90] {
            round += 1;
            let dst = format!("dst{round}");
            let mut args = extra.to_vec();
            args.extend(["src", &dst]);
            killed_copy(
                cp(engine, &args, scratch.path()),
                Duration::from_millis(after_ms),
            );
            let mut again = extra.to_vec();
            again.extend(["-T", "--resume", "src", &dst]);
            let out = cp(engine, &again, scratch.path()).run();
            assert_success(&out);
            assert_trees_equal(&src, &scratch.join(&dst), NO_ATIME);
            let out = ringio([
                "verify".as_ref(),
                src.as_os_str(),
                scratch.join(&dst).as_os_str(),
            ]);
            assert!(
                out.status.success(),
                "{extra:?} killed after {after_ms} ms: {}",
                describe(&out)
            );
        }
    }
    // Without -p the content decides, and directories still get their modes.
    killed_copy(
        cp(engine, &["-r", "src", "plain"], scratch.path()),
        Duration::from_millis(15),
    );
    assert_success(
        &cp(
            engine,
            &["-r", "-T", "--resume", "src", "plain"],
            scratch.path(),
        )
        .run(),
    );
    assert_trees_equal(&src, &scratch.join("plain"), Check::CONTENT);
}

/// On a complete copy `--resume` rewrites nothing: files keep their inodes and ctimes. A file of
/// the right size but the wrong bytes is recopied when content decides (no -p, or
/// `--resume=checksum`); under -a a wrong mtime marks it unfinished.
fn resume_keeps_complete_files_and_recopies_the_rest(engine: &str) {
    let scratch = Scratch::new();
    let src = scratch.join("src");
    fs::create_dir_all(src.join("sub")).unwrap();
    write_file(src.join("a"), "alpha\n");
    write_file(src.join("sub/b"), "bravo\n");
    fs::hard_link(src.join("a"), src.join("sub/a-link")).unwrap();
    assert_success(&cp(engine, &["-a", "src", "dst"], scratch.path()).run());
    let before = fs::metadata(scratch.join("dst/sub/b")).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_success(
        &cp(
            engine,
            &["-a", "-T", "--resume", "src", "dst"],
            scratch.path(),
        )
        .run(),
    );
    let after = fs::metadata(scratch.join("dst/sub/b")).unwrap();
    assert_eq!(
        (before.ino(), before.ctime(), before.ctime_nsec()),
        (after.ino(), after.ctime(), after.ctime_nsec()),
        "a complete file was touched"
    );
    assert_trees_equal(&src, &scratch.join("dst"), NO_ATIME);

    // Same size, other bytes, same mtime: -a trusts size and mtime; checksum does not.
    let b = scratch.join("dst/sub/b");
    let mtime = lstat_times(&b).1;
    fs::write(&b, "BRAVO\n").unwrap();
    set_times(&b, None, Some(mtime)).unwrap();
    assert_success(
        &cp(
            engine,
            &["-a", "-T", "--resume", "src", "dst"],
            scratch.path(),
        )
        .run(),
    );
    assert_eq!(fs::read(&b).unwrap(), b"BRAVO\n");
    assert_success(
        &cp(
            engine,
            &["-a", "-T", "--resume=checksum", "src", "dst"],
            scratch.path(),
        )
        .run(),
    );
    assert_eq!(fs::read(&b).unwrap(), b"bravo\n");

    // Under -a a different mtime means unfinished.
    fs::write(&b, "BRAVO\n").unwrap();
    assert_success(
        &cp(
            engine,
            &["-a", "-T", "--resume", "src", "dst"],
            scratch.path(),
        )
        .run(),
    );
    assert_eq!(fs::read(&b).unwrap(), b"bravo\n");

    // Without -p the content decides.
    assert_success(&cp(engine, &["-r", "src", "plain"], scratch.path()).run());
    fs::write(scratch.join("plain/a"), "ALPHA\n").unwrap();
    assert_success(
        &cp(
            engine,
            &["-r", "-T", "--resume", "src", "plain"],
            scratch.path(),
        )
        .run(),
    );
    assert_eq!(fs::read(scratch.join("plain/a")).unwrap(), b"alpha\n");

    // A hard-link name the interrupted run copied on its own is linked again.
    fs::remove_file(scratch.join("dst/sub/a-link")).unwrap();
    write_file(scratch.join("dst/sub/a-link"), "alpha\n");
    assert_success(
        &cp(
            engine,
            &["-a", "-T", "--resume", "src", "dst"],
            scratch.path(),
        )
        .run(),
    );
    assert_eq!(
        fs::metadata(scratch.join("dst/a")).unwrap().ino(),
        fs::metadata(scratch.join("dst/sub/a-link")).unwrap().ino()
    );

    // A file that only looks like an --atomic temporary is the user's: it stays. (Stale
    // temporaries of ringio's own are in `resume_removes_only_its_own_stale_temporaries`.)
    write_file(scratch.join("dst/sub/.b.ringio-1-2"), "the user's");
    assert_success(
        &cp(
            engine,
            &["-a", "-T", "--resume", "src", "dst"],
            scratch.path(),
        )
        .run(),
    );
    assert_eq!(
        fs::read(scratch.join("dst/sub/.b.ringio-1-2")).unwrap(),
        b"the user's"
    );
}

/// The `--atomic` temporaries of `dir`: names that start `.NAME.ringio-`.
fn temporaries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with('.') && n.contains(".ringio-"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A `cp -a --atomic` killed with SIGKILL while it writes the big file leaves that file's
/// temporary behind. `--resume` removes it, and nothing else: not the user's files named like
/// temporaries (old-style `.NAME.ringio-PID-N`, or the real shape with a wrong check), and not
/// a temporary that a live run is writing (simulated by holding the leftover's lock here).
fn resume_removes_only_its_own_stale_temporaries(engine: &str) {
    let scratch = Scratch::new();
    let src = source(&scratch);
    let dst = scratch.join("dst");
    let mut leftover = None;
    for attempt in 0..8 {
        let _ = fs::remove_dir_all(&dst);
        evict(src.join("big.bin"));
        let mut running = cp(engine, &["-a", "--atomic", "src", "dst"], scratch.path()).spawn();
        let started = Instant::now();
        let mut seen = Vec::new();
        while running.try_status().is_none() && started.elapsed() < Duration::from_secs(20) {
            seen = temporaries(&dst)
                .into_iter()
                .filter(|n| n.starts_with(".big.bin.ringio-"))
                .collect();
            if !seen.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        // SAFETY: signalling our own child, not yet reaped.
        unsafe { libc::kill(running.pid(), libc::SIGKILL) };
        let _ = running.wait();
        if let Some(name) = seen.pop().filter(|n| dst.join(n).exists()) {
            leftover = Some(name);
            break;
        }
        eprintln!("attempt {attempt}: the copy ended before the kill, again");
    }
    let leftover = leftover.expect("no run was killed while writing big.bin");
    let stale = dst.join(&leftover);

    // The user's files that look like temporaries.
    let mut forged = leftover.clone().into_bytes();
    let last = forged.len() - 1;
    forged[last] = if forged[last] == b'0' { b'1' } else { b'0' };
    let forged = String::from_utf8(forged).unwrap();
    let users = [
        ".big.bin.ringio-1-2",
        ".notes.ringio-4242-7",
        forged.as_str(),
    ];
    for name in users {
        write_file(dst.join(name), name);
    }

    // (-T: the user's files make dst look like no interrupted copy of src, so without it cp
    // would copy into dst/src.)
    // A live run holds its temporary's lock: the leftover, locked here, stands for one.
    let live = fs::File::open(&stale).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&live);
    // SAFETY: flock on a descriptor this test owns and keeps open.
    let locked = unsafe { libc::flock(fd, libc::LOCK_EX) };
    assert_eq!(locked, 0, "flock: {}", std::io::Error::last_os_error());
    let again = cp(
        engine,
        &["-aT", "--atomic", "--resume", "src", "dst"],
        scratch.path(),
    );
    assert_success(&again.run());
    assert!(stale.exists(), "a live run's temporary was removed");
    assert_eq!(
        fs::read(dst.join("big.bin")).unwrap(),
        fs::read(src.join("big.bin")).unwrap()
    );

    // Once no run holds it, it is stale, and it goes; the user's files stay.
    drop(live);
    let again = cp(
        engine,
        &["-aT", "--atomic", "--resume", "src", "dst"],
        scratch.path(),
    );
    assert_success(&again.run());
    assert!(!stale.exists(), "the stale temporary {leftover} was kept");
    for name in users {
        assert_eq!(fs::read(dst.join(name)).unwrap(), name.as_bytes(), "{name}");
    }
    let mut expected: Vec<String> = users.iter().map(|n| n.to_string()).collect();
    expected.sort();
    assert_eq!(temporaries(&dst), expected);
    // Without them, one more --resume (which sets the directory's times again) leaves the
    // tree exactly as the source.
    for name in users {
        fs::remove_file(dst.join(name)).unwrap();
    }
    assert_success(
        &cp(
            engine,
            &["-a", "--atomic", "-T", "--resume", "src", "dst"],
            scratch.path(),
        )
        .run(),
    );
    assert_trees_equal(&src, &dst, NO_ATIME);
}

/// While a copy runs, another thread keeps replacing the destination's fresh subdirectories with
/// symlinks to a directory outside it. ringio opens every destination directory below DST with
/// O_NOFOLLOW relative to its parent, so nothing may ever land outside; the copy reports the
/// swapped entries as errors.
#[test]
fn swapped_destination_directories_never_redirect_writes() {
    let scratch = Scratch::new();
    let src = scratch.join("src");
    for d in 0..150 {
        for f in 0..4 {
            write_file(src.join(format!("d{d:03}/sub/f{f}")), format!("{d}-{f}\n"));
        }
    }
    let outside = scratch.join("outside");
    fs::create_dir(&outside).unwrap();
    let mut total_swaps = 0;
    for round in 0..4 {
        let dst = scratch.join(format!("dst{round}"));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (dst, outside, stop) = (dst.clone(), outside.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut swapped = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for d in 0..150 {
                        let dir = dst.join(format!("d{d:03}"));
                        let aside = dst.join(format!(".aside{d:03}"));
                        if fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir())
                            && fs::rename(&dir, &aside).is_ok()
                        {
                            let _ = symlink(&outside, &dir);
                            swapped += 1;
                        }
                    }
                }
                swapped
            })
        };
        let out = Cp::new()
            .args(["-r", "src", dst.to_str().unwrap()])
            .current_dir(scratch.path())
            .run();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let swapped = swapper.join().unwrap();
        total_swaps += swapped;
        let landed: Vec<_> = fs::read_dir(&outside).unwrap().collect();
        assert!(
            landed.is_empty(),
            "round {round}: {} entries written outside the destination ({swapped} swaps): {}",
            landed.len(),
            describe(&out)
        );
    }
    assert!(
        total_swaps > 0,
        "the swapper never won a race: the test proved nothing"
    );
}

/// `--resume` guesses no layout: into an existing (empty) directory, the same command line
/// with and without it makes DST/SRC; `-T` names DST as the copy.
#[test]
fn resume_lays_the_copy_out_as_without_it() {
    let scratch = Scratch::new();
    let src = source(&scratch);
    for (i, resume) in [false, true].into_iter().enumerate() {
        let dst = scratch.join(format!("e{i}"));
        fs::create_dir(&dst).unwrap();
        let mut args = vec!["-a"];
        if resume {
            args.push("--resume");
        }
        args.extend(["src", dst.to_str().unwrap()]);
        assert_success(&Cp::new().current_dir(scratch.path()).args(&args).run());
        assert_trees_equal(&src, &dst.join("src"), NO_ATIME);
    }
    let dst = scratch.join("t");
    fs::create_dir(&dst).unwrap();
    assert_success(
        &Cp::new()
            .current_dir(scratch.path())
            .args(["-aT", "--resume", "src", "t"])
            .run(),
    );
    assert_trees_equal(&src, &dst, NO_ATIME);
}

/// `--resume` over a complete copy touches no symlink or FIFO that is already right: no
/// write (their ctimes stay), no `-v` line; one that differs is made again.
#[test]
fn resume_leaves_symlinks_and_fifos_that_are_right() {
    let scratch = Scratch::new();
    let src = scratch.join("src");
    write_file(src.join("f"), "f\n");
    for i in 0..20 {
        symlink(format!("target-{i}"), src.join(format!("l{i}"))).unwrap();
    }
    mkfifo(&src.join("p"), 0o644);
    assert_success(
        &Cp::new()
            .current_dir(scratch.path())
            .args(["-a", "src", "dst"])
            .run(),
    );
    let ctime = |p: &str| {
        let m = fs::symlink_metadata(scratch.join("dst").join(p)).unwrap();
        (m.ino(), m.ctime(), m.ctime_nsec())
    };
    let before: Vec<_> = (0..20)
        .map(|i| ctime(&format!("l{i}")))
        .chain([ctime("p")])
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    let out = Cp::new()
        .current_dir(scratch.path())
        .args(["-av", "-T", "--resume", "src", "dst"])
        .run();
    assert_success(&out);
    let after: Vec<_> = (0..20)
        .map(|i| ctime(&format!("l{i}")))
        .chain([ctime("p")])
        .collect();
    assert_eq!(before, after, "an entry already right was made again");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("'src/l") && !text.contains("'src/p'"),
        "{text}"
    );
    // One that points elsewhere is made again.
    fs::remove_file(scratch.join("dst/l3")).unwrap();
    symlink("elsewhere", scratch.join("dst/l3")).unwrap();
    assert_success(
        &Cp::new()
            .current_dir(scratch.path())
            .args(["-a", "-T", "--resume", "src", "dst"])
            .run(),
    );
    assert_eq!(
        fs::read_link(scratch.join("dst/l3")).unwrap(),
        Path::new("target-3")
    );
    assert_trees_equal(&src, &scratch.join("dst"), NO_ATIME);
}
