//! `ringio cp` keeps its memory bounded whatever the tuning options say: absurd buffer sizes,
//! chunk sizes, thread counts and queue depths are scaled down to the run's memory budget, on
//! small and medium files (the medium one cold, so it is split into chunks), under an
//! address-space limit (RLIMIT_AS) and without a tight one. The copy must be exact, the
//! child's peak RSS bounded, and it must never die of a signal (a failed allocation aborts).
//! Every test runs once per engine.

use std::fs;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

use crate::common::*;

engine_tests!(
    absurd_tuning_stays_within_memory,
    tight_address_space_fails_cleanly
);

/// An address space a copy must fit in, whatever the options (GNU cp copies in 20 MB).
const LIMIT: u64 = 200 << 20;
/// A limit far above the run's own fixed budget: what bounds memory then is the budget.
const ROOMY: u64 = 4 << 30;
/// The peak RSS allowed: the fixed buffer budget (64 MiB) and the program itself.
const MAX_RSS: u64 = 100 << 20;

/// Tuning options no machine should take literally.
const ABSURD: &[&[&str]] = &[
    &["--bs", "256M"],
    &["--bs", "1G"],
    &["--chunk-size", "1"],
    &["--threads", "64"],
    &["--threads", "100000"],
    &["--queue-depth", "100000"],
    &["--threads", "64", "--bs", "64M", "--queue-depth", "4096"],
    &[
        "--threads",
        "1000",
        "--bs",
        "1G",
        "--chunk-size",
        "1",
        "--small-file-threshold",
        "16M",
    ],
];

/// The `--engine` arguments of a test variant.
fn engine_args(engine: &str) -> Vec<&str> {
    match engine {
        "uring-ring" => vec!["--engine", "uring", "--ring-only"],
        "aio-direct" => vec!["--engine", "aio", "--direct"],
        other => vec!["--engine", other],
    }
}

/// What a child did: its exit status, stderr, and peak RSS in bytes.
struct Ran {
    status: ExitStatus,
    stderr: String,
    max_rss: u64,
}

/// Runs `ringio ARGS` in `dir` with RLIMIT_AS at `limit`, and reaps it with its resource usage.
// The child is reaped by wait4 (for its rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run_limited(dir: &Path, args: &[&str], limit: u64) -> Ran {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringio"));
    cmd.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: only setrlimit, on a stack value, in the child before exec.
    unsafe {
        cmd.pre_exec(move || {
            let rl = libc::rlimit {
                rlim_cur: limit as _,
                rlim_max: limit as _,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn ringio");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("piped stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for the child spawned above, which nothing else reaps.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4");
    Ran {
        status: ExitStatus::from_raw(status),
        stderr,
        max_rss: usage.ru_maxrss as u64 * 1024,
    }
}

/// Writes `len` pseudo-random bytes to `path` a block at a time. This process stays small: a
/// child's peak RSS (ru_maxrss) counts the parent's at the fork, so the figures stay honest.
fn write_random(path: &Path, len: usize, rng: &mut Prng) {
    use std::io::Write;
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut file = fs::File::create(path).unwrap();
    let mut block = [0u8; 64 << 10];
    let mut left = len;
    while left > 0 {
        let n = left.min(block.len());
        rng.fill(&mut block[..n]);
        file.write_all(&block[..n]).unwrap();
        left -= n;
    }
}

/// A 1000-byte file, a medium one, and a directory of small files beside them.
fn make_source(scratch: &Scratch) {
    let mut rng = Prng::new(30);
    write_random(&scratch.join("small"), 1000, &mut rng);
    write_random(&scratch.join("medium"), (24 << 20) + 3, &mut rng);
    for i in 0..40 {
        write_random(&scratch.join(format!("tree/f{i}")), i * 997, &mut rng);
    }
    write_random(&scratch.join("tree/medium"), (6 << 20) + 5, &mut rng);
}

/// True when the two files hold the same bytes (read a block at a time).
fn same_content(a: &Path, b: &Path) -> bool {
    let (Ok(mut a), Ok(mut b)) = (fs::File::open(a), fs::File::open(b)) else {
        return false;
    };
    let (mut x, mut y) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    loop {
        let n = read_full(&mut a, &mut x);
        if n != read_full(&mut b, &mut y) || x[..n] != y[..n] {
            return false;
        }
        if n == 0 {
            return true;
        }
    }
}

fn read_full(file: &mut fs::File, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]).unwrap() {
            0 => break,
            got => n += got,
        }
    }
    n
}

/// Every regular file below `dst` (or `dst` itself) equals its twin below `src`; with
/// `complete`, every file below `src` is there too.
fn assert_whole(src: &Path, dst: &Path, complete: bool, what: &str) {
    if src.is_dir() {
        assert!(
            dst.is_dir() || !complete,
            "{what}: {} missing",
            dst.display()
        );
        for entry in fs::read_dir(src).unwrap() {
            let name = entry.unwrap().file_name();
            assert_whole(&src.join(&name), &dst.join(&name), complete, what);
        }
    } else if dst.exists() || complete {
        assert!(
            same_content(src, dst),
            "{what}: {} is not a whole copy of {}",
            dst.display(),
            src.display()
        );
    }
}

fn absurd_tuning_stays_within_memory(engine: &str) {
    // The children's peak RSS counts this process's at the fork, which the binary's other
    // tests would swell: the copies start from a process that runs this test alone.
    let name = engine.replace('-', "_");
    if !isolated(&format!(
        "cp_memory::absurd_tuning_stays_within_memory::{name}"
    )) {
        return;
    }
    let scratch = Scratch::new();
    make_source(&scratch);
    let mut n = 0;
    for limit in [LIMIT, ROOMY] {
        for options in ABSURD {
            for src in ["small", "medium", "tree"] {
                // Cold: a medium file is then split into chunks that workers copy at once.
                evict(scratch.join("medium"));
                evict(scratch.join("tree/medium"));
                let dst = format!("out{n}");
                n += 1;
                let mut args = vec!["cp", "-r"];
                args.extend(engine_args(engine));
                args.extend_from_slice(options);
                args.extend([src, dst.as_str()]);
                let what = format!("{} (RLIMIT_AS {} MiB)", args.join(" "), limit >> 20);
                let ran = run_limited(scratch.path(), &args, limit);
                assert!(
                    ran.status.success(),
                    "{what}: {:?}\n{}",
                    ran.status,
                    ran.stderr
                );
                assert!(
                    ran.max_rss <= MAX_RSS,
                    "{what}: peak RSS {} MiB",
                    ran.max_rss >> 20
                );
                let (src, dst) = (scratch.join(src), scratch.join(&dst));
                assert_whole(&src, &dst, true, &what);
                fs::remove_dir_all(&dst)
                    .or_else(|_| fs::remove_file(&dst))
                    .unwrap();
            }
        }
    }
}

/// An address space barely larger than the program: the copy may fail, but by reporting an
/// error and leaving no partial file under a final name, never by an abort.
fn tight_address_space_fails_cleanly(engine: &str) {
    let scratch = Scratch::new();
    make_source(&scratch);
    for limit_mib in [24, 32, 48, 64] {
        for options in [&["--bs", "1G"][..], &["--threads", "64", "--bs", "64M"]] {
            evict(scratch.join("medium"));
            evict(scratch.join("tree/medium"));
            let dst = format!("out{limit_mib}");
            let mut args = vec!["cp", "-r"];
            args.extend(engine_args(engine));
            args.extend_from_slice(options);
            args.extend(["medium", "tree", dst.as_str()]);
            fs::create_dir(scratch.join(&dst)).unwrap();
            let what = format!("{} (RLIMIT_AS {limit_mib} MiB)", args.join(" "));
            let ran = run_limited(scratch.path(), &args, limit_mib << 20);
            assert!(
                ran.status.code().is_some(),
                "{what}: killed by a signal: {:?}\n{}",
                ran.status,
                ran.stderr
            );
            if !ran.status.success() {
                assert!(!ran.stderr.is_empty(), "{what}: failed without a word");
            }
            let (src, out) = (scratch.path(), scratch.join(&dst));
            assert_whole(&src.join("medium"), &out.join("medium"), false, &what);
            assert_whole(&src.join("tree"), &out.join("tree"), false, &what);
            fs::remove_dir_all(&out).unwrap();
        }
    }
}
