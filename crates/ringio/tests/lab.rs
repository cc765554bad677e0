//! The I/O lab: `ringio read`, `write`, `dup`, `syscost`.

#[macro_use]
mod common;

use std::fs;
use std::path::Path;

use common::*;

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
    fs::create_dir(s.join("tmpfs")).unwrap();
    let mount = match TmpfsMount::new(&s.join("tmpfs"), "8m") {
        Ok(m) => m,
        Err(why) => skip!("{why}"),
    };
    let file = mount.path().join("f");
    fs::write(&file, vec![1u8; 100_000]).unwrap();
    let out = Cp::bare().arg("read").arg(&file).arg("--direct").run();
    if out.status.success() {
        skip!("this kernel's tmpfs accepts O_DIRECT (Linux 6.6 and later)");
    }
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
    for method in [
        "rw",
        "bigbuf",
        "sendfile",
        "splice",
        "copy-range",
        "uring",
        "reflink",
        "auto",
    ] {
        let dst = s.join(format!("dst-{method}"));
        let out = Cp::bare()
            .args(["dup", "--method", method])
            .arg(&src)
            .arg(&dst)
            .run();
        if method == "reflink" && !out.status.success() {
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
        assert_eq!(fields.len(), 9, "{row}");
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
    assert!(said.contains("the fastest here"), "{said}");
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
