//! The I/O lab: `ringio read`, `write`, `dup`, `syscost`.

use std::fs;
use std::path::Path;

use crate::common::*;

fn ringio_ok(args: &[&str]) -> String {
    let out = Cp::bare().args(args).run();
    assert_exit(&out, 0);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The definition of the checksum, word by word.
fn reference_xor(data: &[u8]) -> u32 {
    data.chunks(4).fold(0, |x, w| {
        let mut b = [0u8; 4];
        b[..w.len()].copy_from_slice(w);
        x ^ u32::from_le_bytes(b)
    })
}

fn xor_of(stdout: &str) -> String {
    stdout
        .split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("no xor in {stdout:?}"))
        .to_string()
}

#[test]
fn read_checksum_is_the_same_for_every_method_thread_count_and_block_size() {
    let s = Scratch::new();
    for size in [0usize, 1, 4099, (3 << 20) + 7] {
        let mut data = vec![0u8; size];
        Prng::new(size as u64).fill(&mut data);
        let file = s.join(format!("f{size}"));
        fs::write(&file, &data).unwrap();
        let expect = format!("{:08x}", reference_xor(&data));
        let f = file.to_str().unwrap();
        for method in ["psync", "uring", "mmap"] {
            for threads in ["1", "2", "3"] {
                for bs in ["4K", "65537", "1M"] {
                    let out = ringio_ok(&[
                        "read",
                        f,
                        "--method",
                        method,
                        "--threads",
                        threads,
                        "--bs",
                        bs,
                    ]);
                    assert_eq!(
                        xor_of(&out),
                        expect,
                        "{method} x{threads} bs {bs} size {size}: {out}"
                    );
                    assert!(out.contains(&format!("bytes {size} ")), "{out}");
                }
            }
        }
        for method in ["psync", "uring"] {
            let out = ringio_ok(&[
                "read",
                f,
                "--method",
                method,
                "--direct",
                "--bs",
                "64K",
                "--threads",
                "2",
            ]);
            assert_eq!(xor_of(&out), expect, "{method} --direct size {size}");
        }
        let out = ringio_ok(&["read", f, "--cold"]);
        assert_eq!(xor_of(&out), expect, "--cold size {size}");
    }
}

#[test]
fn direct_where_the_filesystem_refuses_it_is_a_clear_error() {
    let s = Scratch::new();
    fs::create_dir(s.join("ramfs")).unwrap();
    // ramfs, not tmpfs: tmpfs accepts O_DIRECT since Linux 6.6.
    let mount = match TmpfsMount::ramfs(&s.join("ramfs")) {
        Ok(m) => m,
        Err(why) => skip!("{why}"),
    };
    let file = mount.path().join("f");
    fs::write(&file, vec![1u8; 100_000]).unwrap();
    let out = Cp::bare().arg("read").arg(&file).arg("--direct").run();
    assert_exit(&out, 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("O_DIRECT") && err.contains(&*file.to_string_lossy()),
        "{err}"
    );
}

#[test]
fn read_errors_name_the_file() {
    let out = Cp::bare().args(["read", "/nonexistent/ringio-file"]).run();
    assert_exit(&out, 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot open '/nonexistent/ringio-file': No such file or directory"),
        "{err}"
    );
    let out = Cp::bare()
        .args(["read", "/etc/hostname", "--direct", "--bs", "1000"])
        .run();
    assert_exit(&out, 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("multiple of 4096"));
}

#[test]
fn write_then_read_round_trips() {
    let s = Scratch::new();
    let f = s.join("w");
    let out = ringio_ok(&["write", f.to_str().unwrap(), "--bs", "64K", "--count", "10"]);
    assert!(
        out.contains("wrote 655360 bytes (random)") && out.contains("MiB/s"),
        "{out}"
    );
    let data = fs::read(&f).unwrap();
    assert_eq!(data.len(), 655_360);
    // Incompressible: no two 64 KiB blocks alike, and not all zero.
    assert_ne!(data[..65536], data[65536..131072]);
    let out = ringio_ok(&["read", f.to_str().unwrap()]);
    assert_eq!(xor_of(&out), format!("{:08x}", reference_xor(&data)));
    ringio_ok(&[
        "write",
        f.to_str().unwrap(),
        "--count",
        "1",
        "--fill",
        "zero",
    ]);
    assert!(fs::read(&f).unwrap().iter().all(|&b| b == 0));
}

#[test]
fn every_dup_method_makes_an_identical_file() {
    let s = Scratch::new();
    let src = s.join("src");
    let mut data = vec![0u8; (1 << 20) + 12345];
    Prng::new(5).fill(&mut data);
    fs::write(&src, &data).unwrap();
    for method in DUP_METHODS {
        let dst = s.join(format!("dst-{method}"));
        let out = Cp::bare()
            .args(["dup", "--method", method])
            .arg(&src)
            .arg(&dst)
            .run();
        if *method == "reflink" && !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("cannot clone"), "{err}");
            assert!(!dst.exists(), "a failed dup leaves no file");
            continue;
        }
        assert_exit(&out, 0);
        assert!(
            fs::read(&dst).unwrap() == data,
            "{method} made a different file"
        );
    }
}

#[test]
fn dup_compare_rows_have_every_rusage_column() {
    let s = Scratch::new();
    let src = s.join("src");
    fs::write(&src, vec![3u8; 300_000]).unwrap();
    let out = ringio_ok(&["dup", src.to_str().unwrap(), "--compare", "--runs", "1"]);
    let mut lines = out.lines();
    let header = lines.next().unwrap();
    for col in [
        "wall s", "user s", "sys s", "vol cs", "invol cs", "minflt", "majflt",
    ] {
        assert!(header.contains(col), "{header}");
    }
    let rows: Vec<&str> = lines.collect();
    for method in [
        "rw",
        "bigbuf",
        "sendfile",
        "splice",
        "copy-range",
        "uring",
        "auto",
    ] {
        let row = rows
            .iter()
            .find(|r| r.starts_with(method))
            .unwrap_or_else(|| panic!("{out}"));
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(fields.len(), 11, "{row}");
        assert!(
            fields[1..].iter().all(|f| f.parse::<f64>().is_ok()),
            "{row}"
        );
    }
    // The scratch copies are gone.
    let left: Vec<_> = fs::read_dir(s.path()).unwrap().collect();
    assert_eq!(left.len(), 1);
}

/// With DST, --compare does not ignore it: after the table, DST is written with the fastest
/// method, and the output says which.
#[test]
fn dup_compare_writes_dst_with_the_fastest_method() {
    let s = Scratch::new();
    let src = s.join("src");
    let content: Vec<u8> = (0..400_000u32).map(|i| (i * 7 % 251) as u8).collect();
    fs::write(&src, &content).unwrap();
    let dst = s.join("out/dst");
    fs::create_dir(s.join("out")).unwrap();
    let out = ringio_ok(&[
        "dup",
        src.to_str().unwrap(),
        dst.to_str().unwrap(),
        "--compare",
        "--runs",
        "1",
    ]);
    let said = out
        .lines()
        .find(|l| l.starts_with("wrote "))
        .unwrap_or_else(|| panic!("{out}"));
    // One run each: a verdict either way, with the range it rests on.
    assert!(
        said.contains("the fastest here") || said.contains("level with"),
        "{said}"
    );
    assert_eq!(fs::read(&dst).unwrap(), content);
}

#[test]
fn syscost_is_positive_and_batching_pays() {
    let out = ringio_ok(&["syscost", "--max-calls", "20000"]);
    let rows: Vec<Vec<f64>> = out
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(|f| f.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 3, "{out}"); // 1000, 10000, 20000
    for r in &rows {
        assert!(r[1..].iter().all(|&ns| ns > 0.0), "{out}");
    }
    // A NOP batched 32 to a call costs less than a 1-byte read. Compared at each column's best
    // row: one row can be slowed by whatever else the machine runs at that moment.
    let best = |col: usize| rows.iter().map(|r| r[col]).fold(f64::INFINITY, f64::min);
    assert!(best(5) < best(1), "{out}");
}

#[test]
fn sweep_and_calibrate_terminate() {
    let s = Scratch::new();
    let f = s.join("f");
    fs::write(&f, vec![9u8; 1 << 20]).unwrap();
    let svg = s.join("sweep.svg");
    let out = Cp::bare()
        .arg("read")
        .arg(&f)
        .args(["--sweep", "--max-bs", "64K", "--runs", "1", "--plot"])
        .arg(&svg)
        .run();
    assert_exit(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("best block size:"), "{text}");
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("512 ")),
        "{text}"
    );
    assert!(fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    let cal = s.join("cal");
    let out = Cp::bare()
        .arg("read")
        .arg(&cal)
        .args(["--calibrate", "--min-seconds", "0.0001", "--start", "64K"])
        .run();
    assert_exit(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("calibrated size: 65536 bytes"));
    assert!(Path::new(&cal).exists());
}

/// Everything about a file that a refused command must leave alone.
#[derive(Debug, PartialEq)]
struct Untouched {
    content: Vec<u8>,
    ino: u64,
    nlink: u64,
    mtime: (i64, i64),
}

fn untouched(path: &Path) -> Untouched {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Untouched {
        content: fs::read(path).unwrap(),
        ino: meta.ino(),
        nlink: meta.nlink(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
    }
}

/// `dup F F` under any spelling of F (a hard link, symlinks, `./`, `..`, an absolute path, a
/// /proc/self/fd link), with every method and either way round, is refused as cp refuses
/// `cp f f`, and F keeps its content, size, mtime, inode and links.
#[test]
fn dup_refuses_every_spelling_of_the_same_file() {
    let s = Scratch::new();
    let f = s.join("f");
    fs::write(&f, b"the only copy\n").unwrap();
    set_times(
        &f,
        None,
        Some(Ts {
            sec: 1_500_000_000,
            nsec: 7,
        }),
    )
    .unwrap();
    fs::hard_link(&f, s.join("h")).unwrap();
    std::os::unix::fs::symlink("f", s.join("s")).unwrap();
    std::os::unix::fs::symlink("s", s.join("chain")).unwrap();
    fs::create_dir(s.join("sub")).unwrap();
    let before = untouched(&f);
    let absolute = f.to_str().unwrap().to_string();
    let spellings = [
        "f",
        "./f",
        "h",
        "s",
        "chain",
        "sub/../f",
        absolute.as_str(),
        // The child's standard input is F, opened read-only.
        "/proc/self/fd/0",
    ];
    for method in DUP_METHODS {
        for spelling in spellings {
            for (src, dst) in [("f", spelling), (spelling, "f")] {
                let out = Cp::bare()
                    .args(["dup", "--method", method, src, dst])
                    .current_dir(s.path())
                    .stdin_from(&f)
                    .run();
                assert_exit(&out, 1);
                assert_eq!(
                    stderr_lines(&out),
                    [format!("ringio dup: '{src}' and '{dst}' are the same file")],
                    "{method} {src} {dst}"
                );
                assert_eq!(untouched(&f), before, "{method} {src} {dst}");
            }
        }
    }
    // --compare refuses before it measures anything, and leaves no scratch copies behind.
    let out = Cp::bare()
        .args(["dup", "f", "chain", "--compare", "--runs", "1"])
        .current_dir(s.path())
        .run();
    assert_exit(&out, 1);
    assert_eq!(
        stderr_lines(&out),
        ["ringio dup: 'f' and 'chain' are the same file"]
    );
    assert!(out.stdout.is_empty(), "{}", describe(&out));
    assert_eq!(untouched(&f), before);
    let mut left: Vec<_> = fs::read_dir(s.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["chain", "f", "h", "s", "sub"]);
}

/// A dup that fails removes what it wrote, and only that: never a symlink it wrote through
/// (the file it reached is emptied instead) or one it could not open through.
#[test]
fn a_failed_dup_removes_only_what_it_wrote() {
    let s = Scratch::new();
    let src = s.join("src");
    fs::write(&src, vec![5u8; 70_000]).unwrap();
    let dangling = s.join("dangling");
    std::os::unix::fs::symlink("no/such/dir/file", &dangling).unwrap();
    for method in DUP_METHODS {
        let out = Cp::bare()
            .args(["dup", "--method", method])
            .arg(&src)
            .arg(&dangling)
            .run();
        assert_exit(&out, 1);
        assert!(
            fs::symlink_metadata(&dangling).is_ok(),
            "{method} removed a symlink it never wrote through"
        );
    }
    // What is not a regular file is never removed: here the child's stdout (a pipe), which
    // cannot take a clone.
    let stdout = s.join("stdout");
    std::os::unix::fs::symlink("/proc/self/fd/1", &stdout).unwrap();
    let out = Cp::bare()
        .args(["dup", "--method", "reflink"])
        .arg(&src)
        .arg(&stdout)
        .run();
    assert_exit(&out, 1);
    assert!(fs::symlink_metadata(&stdout).is_ok(), "{}", describe(&out));
    // A source that cannot be read at all (a directory) leaves an existing DST alone.
    let victim = s.join("victim");
    fs::write(&victim, b"keep").unwrap();
    for method in DUP_METHODS {
        let out = Cp::bare()
            .args(["dup", "--method", method])
            .arg(s.path())
            .arg(&victim)
            .run();
        assert_exit(&out, 1);
        assert_eq!(fs::read(&victim).unwrap(), b"keep", "{method}");
    }
    // A clone that the filesystem refuses, through a symlink to an existing file.
    let target = s.join("target");
    fs::write(&target, b"old").unwrap();
    let link = s.join("link");
    std::os::unix::fs::symlink("target", &link).unwrap();
    let out = Cp::bare()
        .args(["dup", "--method", "reflink"])
        .arg(&src)
        .arg(&link)
        .run();
    if out.status.success() {
        // Not a failure in CI: the scratch directory is on a filesystem that clones (btrfs,
        // xfs), so a refused clone cannot arise; CI's scratch filesystem (ext4) refuses it.
        moot!("this filesystem clones files");
    }
    assert_exit(&out, 1);
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        fs::read(&target).unwrap(),
        b"",
        "nothing half-written is left"
    );
}

/// The stable /proc file the tests read: its size by stat is 0.
fn proc_version() -> Option<Vec<u8>> {
    let data = fs::read("/proc/version").ok()?;
    let stated = fs::metadata("/proc/version").ok()?.len();
    (stated == 0 && !data.is_empty()).then_some(data)
}

/// A file whose size reads as 0 (/proc) is read to its end by every method and thread count,
/// with the XOR and byte count that reading it whole (as `cat` does) gives, and that psync
/// gives in the same test.
#[test]
fn read_of_a_file_without_a_size_reads_to_its_end() {
    let Some(data) = proc_version() else {
        skip!("no /proc/version with a size of 0");
    };
    let expect = format!("{:08x}", reference_xor(&data));
    let psync = ringio_ok(&["read", "/proc/version", "--method", "psync"]);
    assert_eq!(xor_of(&psync), expect, "{psync}");
    assert!(psync.contains(&format!("bytes {} ", data.len())), "{psync}");
    for method in ["psync", "uring", "mmap"] {
        for threads in ["1", "3"] {
            for bs in ["16", "4K"] {
                let out = Cp::bare()
                    .args(["read", "/proc/version", "--method", method])
                    .args(["--threads", threads, "--bs", bs])
                    .run();
                assert_exit(&out, 0);
                let text = String::from_utf8_lossy(&out.stdout);
                assert_eq!(xor_of(&text), expect, "{method} x{threads} bs {bs}");
                assert!(text.contains(&format!("bytes {} ", data.len())), "{text}");
                if method != "psync" || threads != "1" {
                    assert!(
                        String::from_utf8_lossy(&out.stderr).contains("has no size by stat"),
                        "{}",
                        describe(&out)
                    );
                }
            }
        }
    }
    // --count still limits a read without a size.
    let out = ringio_ok(&["read", "/proc/version", "--bs", "16", "--count", "2"]);
    assert_eq!(xor_of(&out), format!("{:08x}", reference_xor(&data[..32])));
}

/// A file that shrinks or grows between its stat and its read (a test hook resizes it at
/// that instant) is an error naming the path and both sizes, exit 1, for every method and
/// thread count; mmap, which faults (SIGBUS) past a truncation, included.
#[test]
fn read_of_a_file_that_changes_size_is_an_error() {
    let s = Scratch::new();
    let f = s.join("f");
    let size = 3 * 65536 + 100;
    let direct_works = {
        fs::write(&f, vec![1u8; 4096]).unwrap();
        let out = Cp::bare()
            .arg("read")
            .arg(&f)
            .args(["--direct", "--bs", "64K"])
            .run();
        out.status.success()
    };
    let mut cases = vec![];
    for method in ["psync", "uring", "mmap"] {
        for threads in ["1", "3"] {
            cases.push((method, threads, false));
            if direct_works && method != "mmap" {
                cases.push((method, threads, true));
            }
        }
    }
    for (method, threads, direct) in cases {
        for resize_to in [0, 1000, 65536 + 5, size + 5000] {
            let mut data = vec![0u8; size];
            Prng::new(resize_to as u64).fill(&mut data);
            fs::write(&f, &data).unwrap();
            let mut cmd = Cp::bare()
                .arg("read")
                .arg(&f)
                .args(["--method", method, "--threads", threads, "--bs", "64K"])
                .env("RINGIO_TEST_RESIZE_AFTER_STAT", &resize_to.to_string());
            if direct {
                cmd = cmd.arg("--direct");
            }
            let out = cmd.run();
            let case = format!("{method} x{threads} direct {direct}, resized to {resize_to}");
            assert_exit(&out, 1);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains(&format!(
                    "'{}' changed size while read: {size} bytes by stat, {resize_to} bytes read",
                    f.display()
                )),
                "{case}: {}",
                describe(&out)
            );
        }
    }
}

/// Every dup method copies a /proc file to its end (the uring method used to take a short
/// read, which pseudo-files give mid-file, for the end), or refuses with an error and leaves
/// nothing.
#[test]
fn dup_of_a_file_without_a_size_copies_it_whole() {
    let s = Scratch::new();
    let mut sources = vec![];
    if let Some(data) = proc_version() {
        sources.push(("/proc/version", data));
    }
    // Big enough for reads to come back short before its end.
    if let Ok(data) = fs::read("/proc/kallsyms") {
        if data.len() > 1 << 20 && fs::read("/proc/kallsyms").is_ok_and(|again| again == data) {
            sources.push(("/proc/kallsyms", data));
        }
    }
    if sources.is_empty() {
        skip!("no stable /proc file to copy");
    }
    for (src, data) in &sources {
        for method in DUP_METHODS {
            let dst = s.join(format!("copy-{method}"));
            let out = Cp::bare()
                .args(["dup", "--method", method, src])
                .arg(&dst)
                .run();
            if out.status.success() {
                assert!(
                    fs::read(&dst).unwrap() == *data,
                    "{method} copied {} bytes of {src}'s {}",
                    fs::metadata(&dst).unwrap().len(),
                    data.len()
                );
                let said = String::from_utf8_lossy(&out.stdout);
                assert!(
                    said.contains(&format!("copied {} bytes", data.len())),
                    "{said}"
                );
                fs::remove_file(&dst).unwrap();
            } else {
                assert_exit(&out, 1);
                assert!(
                    String::from_utf8_lossy(&out.stderr).contains(src),
                    "{}",
                    describe(&out)
                );
                assert!(!dst.exists(), "{method}: a failed dup leaves no file");
            }
        }
    }
}

/// A source that shrinks or grows between its stat and its copy is an error naming both
/// sizes, exit 1, with every method that reads it (a clone is one instant of it), and the
/// partial copy is removed.
#[test]
fn dup_of_a_file_that_changes_size_is_an_error() {
    let s = Scratch::new();
    let src = s.join("src");
    let size = 300_000usize;
    for method in DUP_METHODS.iter().filter(|m| **m != "reflink") {
        for resize_to in [0, 1000, size + 4000] {
            fs::write(&src, vec![7u8; size]).unwrap();
            let dst = s.join("dst");
            let out = Cp::bare()
                .args(["dup", "--method", method])
                .arg(&src)
                .arg(&dst)
                .env("RINGIO_TEST_RESIZE_AFTER_STAT", &resize_to.to_string())
                .run();
            if *method == "auto" && out.status.success() {
                // It cloned the file: no read to change under.
                assert_eq!(fs::read(&dst).unwrap().len(), resize_to);
                continue;
            }
            assert_exit(&out, 1);
            assert_eq!(
                stderr_lines(&out),
                [format!(
                    "ringio dup: '{}' changed size while copied: {size} bytes by stat, {resize_to} bytes read",
                    src.display()
                )],
                "{method}"
            );
            assert!(!dst.exists(), "{method} left a partial copy");
        }
    }
}
