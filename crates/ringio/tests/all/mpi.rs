//! `mpirun -n N ringio cp --mpi`: 1, 2 and 4 ranks (oversubscribed) copy trees with hard links
//! across directories, read-only directories, sparse files, xattrs and symlinks; `ringio
//! verify` finds no difference. The 4-rank copy runs 50 times (termination races). A rank
//! killed mid-copy, then `--resume` over 4 ranks or one plain `ringio cp --resume`, gives the
//! exact tree. Real ranks in lockstep send the messages the simulator predicts for the same
//! tree. Cold big files, whose chunk ranges (the last one included) other ranks steal, copy
//! on 2 and 4 ranks with each rank's address space limited. Every test skips when Open MPI's
//! `mpirun` is not there.

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// Everything `cp -a` keeps but atimes (an interrupted run reads the source too).
const NO_ATIME: Check = Check {
    atime: false,
    ..Check::ARCHIVE
};

/// Open MPI's mpirun, or why the tests cannot run.
fn mpirun() -> Result<(), String> {
    match Command::new("mpirun").arg("--version").output() {
        Ok(out) if String::from_utf8_lossy(&out.stdout).contains("Open MPI") => Ok(()),
        Ok(_) => Err("mpirun is not Open MPI's (these tests use --oversubscribe)".into()),
        Err(e) => Err(format!(
            "no mpirun ({e}); apt-get install openmpi-bin libopenmpi-dev"
        )),
    }
}

macro_rules! need_mpirun {
    () => {
        if let Err(why) = mpirun() {
            skip!("{why}");
        }
    };
}

/// `mpirun --oversubscribe -n ranks ringio cp --mpi ARGS` in `dir`, with Open MPI's session
/// directory inside `dir` (parallel tests' jobs race to create a shared one in /tmp).
fn mpi_cp(ranks: u32, args: &[&str], dir: &Path) -> Command {
    let session = dir.join(".mpi-session");
    fs::create_dir_all(&session).unwrap();
    let mut cmd = Command::new("mpirun");
    cmd.args(["--oversubscribe", "-n", &ranks.to_string()])
        .arg(env!("CARGO_BIN_EXE_ringio"))
        .args(["cp", "--mpi"])
        .args(args)
        .current_dir(dir)
        // Tests run as root in CI; Open MPI refuses root without both.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("TMPDIR", &session)
        .env("OMPI_MCA_orte_tmpdir_base", &session)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs `cmd`, killing it (and failing) after two minutes: a hang is a termination bug. Its
/// output is read while it runs (`-v` can print more than a pipe holds).
fn run(mut cmd: Command) -> Output {
    use std::io::Read;
    use std::sync::{Arc, Mutex};
    let mut child = cmd.spawn().expect("spawn mpirun");
    // Readers append to shared buffers, so a hung job's output can be shown without waiting
    // for ranks that still hold the pipes.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let sink = bytes.clone();
        let reader = std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n @ 1..) = pipe.read(&mut chunk) {
                sink.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        (bytes, reader)
    };
    let (stdout, out_reader) = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let (stderr, err_reader) = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let status = child.wait().expect("wait");
            let out = Output {
                status,
                stdout: stdout.lock().unwrap().clone(),
                stderr: stderr.lock().unwrap().clone(),
            };
            panic!("mpirun hung for two minutes: {}", describe(&out));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    out_reader.join().expect("stdout reader");
    err_reader.join().expect("stderr reader");
    let take = |bytes: Arc<Mutex<Vec<u8>>>| std::mem::take(&mut *bytes.lock().unwrap());
    Output {
        status,
        stdout: take(stdout),
        stderr: take(stderr),
    }
}

fn verify(src: &Path, dst: &Path) {
    let out = ringio(["verify".as_ref(), src.as_os_str(), dst.as_os_str()]);
    assert!(
        out.status.success(),
        "{} differs from {}: {}",
        dst.display(),
        src.display(),
        describe(&out)
    );
}

/// A tree with everything the ranks must agree on: hard-link groups whose names sit in
/// different directories (so different ranks meet them), read-only directories with files in
/// them, a sparse file, xattrs on files and a directory, symlinks; plus `small`'s modes, odd
/// names, owners and times. `big` adds a file split into many chunks.
fn source(scratch: &Scratch, seed: u64, big: bool) -> PathBuf {
    let src = scratch.join("src");
    TreeSpec::small(seed).build(&src);
    let links = src.join("links");
    for d in 0..6 {
        fs::create_dir_all(links.join(format!("d{d}"))).unwrap();
    }
    for group in 0..24 {
        let first = links
            .join(format!("d{}", group % 6))
            .join(format!("g{group}"));
        fs::write(&first, format!("group {group}\n").repeat(group + 1)).unwrap();
        for name in 1..4 {
            let other = links
                .join(format!("d{}", (group + name) % 6))
                .join(format!("g{group}-{name}"));
            fs::hard_link(&first, other).unwrap();
        }
    }
    // Names at the top of the tree and of an operand, where other ranks hang work from their
    // own node of the root.
    fs::hard_link(links.join("d0/g0"), src.join("top-g0")).unwrap();
    fs::hard_link(links.join("d1/g1"), links.join("top-g1")).unwrap();
    symlink("d0/g0", links.join("to-g0")).unwrap();
    // A hard-linked symlink: its names go to the owner rank too.
    fs::hard_link(links.join("to-g0"), links.join("d3/to-g0-again")).unwrap();
    let sparse = fs::File::create(src.join("sparse")).unwrap();
    sparse.set_len(64 << 20).unwrap();
    drop(sparse);
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = fs::OpenOptions::new()
            .write(true)
            .open(src.join("sparse"))
            .unwrap();
        f.seek(SeekFrom::Start(40 << 20)).unwrap();
        f.write_all(b"an island of data").unwrap();
    }
    for (path, value) in [
        (links.join("d1/g1"), &b"one"[..]),
        (src.join("sparse"), b"hole"),
        (links.join("d2"), b"dir"),
    ] {
        if set_xattr(&path, "user.ringio", value).is_err() {
            eprintln!("no user xattrs here: the tree has none");
            break;
        }
    }
    for r in 0..3 {
        let ro = src.join(format!("readonly{r}"));
        fs::create_dir_all(ro.join("inner")).unwrap();
        for i in 0..20 {
            fs::write(ro.join(format!("f{i}")), format!("{r}/{i}\n")).unwrap();
        }
        fs::write(ro.join("inner/x"), "x\n").unwrap();
        fs::set_permissions(ro.join("inner"), fs::Permissions::from_mode(0o555)).unwrap();
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o555)).unwrap();
    }
    if big {
        let bytes: Vec<u8> = (0..48u32 << 20)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        fs::write(src.join("big.bin"), bytes).unwrap();
        // Cold, so that its chunks spread over the ranks (a cached file goes whole to one).
        evict(src.join("big.bin"));
        // Enough small files that a kill lands mid-copy.
        let many = src.join("many");
        for d in 0..20 {
            let dir = many.join(format!("m{d}"));
            fs::create_dir_all(&dir).unwrap();
            for f in 0..150 {
                fs::write(dir.join(format!("f{f}")), format!("{d}:{f}\n")).unwrap();
            }
        }
    }
    src
}

use std::os::unix::fs::PermissionsExt;

#[test]
fn one_two_and_four_ranks_copy_the_tree() {
    need_mpirun!();
    let scratch = Scratch::new();
    let src = source(&scratch, 19, false);
    for ranks in [1, 2, 4] {
        let dst = format!("dst{ranks}");
        let out = run(mpi_cp(ranks, &["-a", "-v", "src", &dst], scratch.path()));
        // -v: rank 0's summary is the only line on stderr.
        let err = stderr_lines(&out);
        assert!(
            out.status.success()
                && err.len() == 1
                && err[0].contains(&format!(" on {ranks} ranks ")),
            "{}",
            describe(&out)
        );
        let dst = scratch.join(&dst);
        verify(&src, &dst);
        assert_trees_equal(&src, &dst, NO_ATIME);
        // -v: one line per entry, from whichever rank copied it.
        let lines = String::from_utf8_lossy(&out.stdout).lines().count();
        assert!(lines > 100, "{ranks} ranks printed {lines} -v lines");
    }
}

#[test]
fn several_operands_share_one_link_map() {
    need_mpirun!();
    let scratch = Scratch::new();
    let src = source(&scratch, 3, false);
    fs::create_dir(scratch.join("multi")).unwrap();
    let out = run(mpi_cp(
        3,
        &["-a", "src/links", "src/readonly1", "src/sparse", "multi/"],
        scratch.path(),
    ));
    assert!(out.status.success(), "{}", describe(&out));
    for name in ["links", "readonly1", "sparse"] {
        verify(&src.join(name), &scratch.join("multi").join(name));
    }
}

/// `--progress`: rank 0 tallies the ranks' counters down and up the tree while they copy; the
/// tallies must not disturb termination. (mpirun's stderr is a pipe: progress comes as lines.)
#[test]
fn progress_tallies_leave_the_copy_alone() {
    need_mpirun!();
    let scratch = Scratch::new();
    let src = source(&scratch, 11, false);
    for round in 0..5 {
        let dst = format!("dst{round}");
        let out = run(mpi_cp(
            4,
            &["-a", "--progress", "src", &dst],
            scratch.path(),
        ));
        assert!(out.status.success(), "round {round}: {}", describe(&out));
        for line in stderr_lines(&out) {
            assert!(line.starts_with("ringio: progress: "), "{line}");
        }
        verify(&src, &scratch.join(&dst));
    }
}

#[test]
fn four_ranks_fifty_times() {
    need_mpirun!();
    let scratch = Scratch::new();
    let src = source(&scratch, 7, false);
    for round in 0..50 {
        let dst = format!("dst{round}");
        let out = run(mpi_cp(
            4,
            &["-a", "--chunk-size", "1M", "src", &dst],
            scratch.path(),
        ));
        assert!(out.status.success(), "round {round}: {}", describe(&out));
        verify(&src, &scratch.join(&dst));
    }
}

/// `cp -a FILE DIR DEST/` where FILE is another name of a file inside DIR: as with GNU cp, the
/// copies are linked too. Rank 0 copies file operands, so it owns their inodes, and the names
/// met inside the tree, on any rank, are sent to it.
#[test]
fn file_operands_linked_into_a_tree_stay_linked() {
    need_mpirun!();
    let scratch = Scratch::new();
    let src = scratch.join("src");
    for d in 0..4 {
        fs::create_dir_all(src.join(format!("d{d}"))).unwrap();
        for f in 0..30 {
            fs::write(src.join(format!("d{d}/f{f}")), format!("{d}/{f}\n")).unwrap();
        }
    }
    let mut operands = Vec::new();
    for i in 0..8 {
        let name = format!("solo{i}");
        fs::hard_link(src.join(format!("d{}/f{i}", i % 4)), scratch.join(&name)).unwrap();
        operands.push(name);
    }
    fs::create_dir(scratch.join("dst")).unwrap();
    let mut args: Vec<&str> = vec!["-a"];
    args.extend(operands.iter().map(String::as_str));
    args.extend(["src", "dst/"]);
    let out = run(mpi_cp(4, &args, scratch.path()));
    assert!(out.status.success(), "{}", describe(&out));
    verify(&src, &scratch.join("dst/src"));
    for i in 0..8 {
        let solo = fs::metadata(scratch.join(format!("dst/solo{i}"))).unwrap();
        let inner = fs::metadata(scratch.join(format!("dst/src/d{}/f{i}", i % 4))).unwrap();
        assert_eq!(
            (solo.ino(), solo.nlink()),
            (inner.ino(), 2),
            "solo{i} and src/d{}/f{i} were copied apart",
            i % 4
        );
    }
}

/// Directories deeper than PATH_MAX (30 levels of 200-byte names) get their mode and times
/// too: each rank applies its directories' metadata at the end, opening them below the root
/// in pieces shorter than PATH_MAX.
#[test]
fn directory_metadata_beyond_path_max() {
    need_mpirun!();
    let scratch = Scratch::new();
    fs::create_dir(scratch.join("src")).unwrap();
    let levels = 30;
    let name = |level: usize| format!("level{level:02}-{}", "x".repeat(192));
    let mut dir = deep::Dir::open(&scratch.join("src"));
    for level in 0..levels {
        dir.mkdir(&name(level), 0o755 - (level as u32 % 3) * 0o10);
        dir = dir.open_child(&name(level));
        for f in 0..3 {
            dir.write_file(&format!("f{f}"), format!("{level}/{f}\n").as_bytes(), 0o644);
        }
    }
    // Times last: filling a directory changes its own.
    let mut dir = deep::Dir::open(&scratch.join("src"));
    for level in 0..levels {
        dir.set_times(
            &name(level),
            Ts::new(1_400_000_000 + level as i64 * 1000, 7),
        );
        dir = dir.open_child(&name(level));
    }
    drop(dir);
    let out = run(mpi_cp(2, &["-a", "src", "dst"], scratch.path()));
    assert!(out.status.success(), "{}", describe(&out));
    let mut src = deep::Dir::open(&scratch.join("src"));
    let mut dst = deep::Dir::open(&scratch.join("dst"));
    for level in 0..levels {
        let (s, d) = (src.stat(&name(level)), dst.stat(&name(level)));
        assert_eq!(
            (d.st_mode, d.st_mtime, d.st_mtime_nsec),
            (s.st_mode, s.st_mtime, s.st_mtime_nsec),
            "level {level}: mode or mtime not kept"
        );
        src = src.open_child(&name(level));
        dst = dst.open_child(&name(level));
        assert_eq!(dst.read_file("f2"), format!("{level}/2\n").as_bytes());
    }
}

/// A tree for the lockstep check: nested directories, some with more than two batches of
/// files, names at the top, and hard-link groups across directories. No file is big enough to
/// be cut into chunks: the simulator does not model chunks.
fn lockstep_source(scratch: &Scratch) -> PathBuf {
    let src = scratch.join("src");
    for a in 0..6 {
        for b in 0..=(a % 3) {
            let dir = src.join(format!("a{a}/b{b}"));
            fs::create_dir_all(&dir).unwrap();
            for f in 0..[5, 40, 130, 300][(a + b) % 4] {
                fs::write(dir.join(format!("f{f}")), format!("{a}/{b}/{f}\n")).unwrap();
            }
        }
    }
    for f in 0..10 {
        fs::write(src.join(format!("top{f}")), format!("top {f}\n")).unwrap();
    }
    for group in 0..30 {
        let first = src.join(format!("a{}/b0/g{group}", group % 6));
        fs::write(&first, format!("group {group}\n")).unwrap();
        for name in 1..3 {
            let other = src.join(format!("a{}/b0/g{group}-{name}", (group + name) % 6));
            fs::hard_link(&first, other).unwrap();
        }
    }
    src
}

/// The messages each rank sent, from `-v`'s summary line.
fn messages_per_rank(out: &Output) -> Vec<u64> {
    let err = String::from_utf8_lossy(&out.stderr);
    let list = err
        .split("messages per rank: ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("no per-rank messages in: {}", describe(out)));
    list.split(", ")
        .map(|n| n.trim().parse().unwrap())
        .collect()
}

/// The simulator checked against real ranks: the same tree, copied by 2 and 4 real ranks in
/// lockstep rounds (`--mpi-lockstep`) and by as many virtual ranks in the simulator's lockstep
/// (ringio-mpi's `sim::lockstep`, fed the listing of the real tree). Each rank's message count
/// must agree within 10%.
#[test]
fn virtual_and_real_ranks_send_the_same_messages() {
    need_mpirun!();
    let scratch = Scratch::new();
    let src = lockstep_source(&scratch);
    let tree = ringio_mpi::sim::ListedTree::read(&src, ringio_copy::ranks::link_owner).unwrap();
    for (ranks, seed) in [(2, 5), (4, 11), (4, 12)] {
        let dst = format!("dst{ranks}-{seed}");
        let out = run(mpi_cp(
            ranks,
            &["-a", "-v", "--mpi-lockstep", &seed.to_string(), "src", &dst],
            scratch.path(),
        ));
        assert!(out.status.success(), "{}", describe(&out));
        verify(&src, &scratch.join(&dst));
        let real = messages_per_rank(&out);
        let sim = ringio_mpi::sim::lockstep(&tree, ranks, seed);
        let virtual_: Vec<u64> = sim.stats.iter().map(|s| s.messages()).collect();
        eprintln!("{ranks} ranks, seed {seed}: real {real:?}, virtual {virtual_:?}");
        assert_eq!(real.len(), virtual_.len());
        assert!(
            virtual_.iter().sum::<u64>() > 10 * u64::from(ranks),
            "{sim:?}"
        );
        for (rank, (&r, &v)) in real.iter().zip(&virtual_).enumerate() {
            assert!(
                r.abs_diff(v) * 10 <= r.max(v),
                "rank {rank} of {ranks} (seed {seed}): {r} messages real, {v} virtual \
                 (real {real:?}, virtual {virtual_:?})"
            );
        }
    }
}

/// The pid of rank `rank` among the processes mpirun `launcher` started.
fn rank_pid(launcher: u32, rank: u32) -> Option<i32> {
    let want = format!("OMPI_COMM_WORLD_RANK={rank}");
    for entry in fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // ppid is the second field after the parenthesized command name.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid != Some(launcher) {
            continue;
        }
        let environ = fs::read(entry.path().join("environ")).unwrap_or_default();
        if environ.split(|&b| b == 0).any(|var| var == want.as_bytes()) {
            return Some(pid);
        }
    }
    None
}

/// Starts a 4-rank copy and SIGKILLs rank 1 once the big file has data blocks (a chunk was
/// written: its length is set before any) and a hard-link group has a second name. Returns
/// whether the kill landed before the copy ended.
fn killed_mid_copy(scratch: &Scratch, dst: &str) -> bool {
    let mut child: Child = mpi_cp(4, &["-a", "--chunk-size", "1M", "src", dst], scratch.path())
        .spawn()
        .expect("spawn mpirun");
    let dst = scratch.join(dst);
    let started = Instant::now();
    let mut killed = false;
    while child.try_wait().expect("wait").is_none() && started.elapsed() < Duration::from_secs(60) {
        let big_started = fs::metadata(dst.join("big.bin")).is_ok_and(|m| m.blocks() > 0);
        let linked = (0..6).any(|d| {
            fs::read_dir(dst.join(format!("links/d{d}"))).is_ok_and(|entries| {
                entries
                    .flatten()
                    .any(|e| e.metadata().is_ok_and(|m| m.nlink() >= 2))
            })
        });
        if big_started && linked {
            if let Some(pid) = rank_pid(child.id(), 1) {
                // SAFETY: signalling a process of the job this test started.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                killed = true;
                break;
            }
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    let out = child.wait_with_output().expect("wait");
    if killed {
        assert!(!out.status.success(), "a job with a killed rank exited 0");
    }
    killed
}

#[test]
fn killed_rank_then_resume() {
    need_mpirun!();
    let scratch = Scratch::new();
    let src = source(&scratch, 23, true);
    // Resumed by 4 ranks.
    let landed = killed_mid_copy(&scratch, "dst4");
    let out = run(mpi_cp(
        4,
        &["-aT", "--resume", "src", "dst4"],
        scratch.path(),
    ));
    assert_success(&out);
    verify(&src, &scratch.join("dst4"));
    assert_trees_equal(&src, &scratch.join("dst4"), NO_ATIME);
    // Resumed by one plain `ringio cp`.
    let landed_again = killed_mid_copy(&scratch, "dst1");
    let out = Cp::new()
        .args(["-aT", "--resume", "src", "dst1"])
        .current_dir(scratch.path())
        .run();
    assert_success(&out);
    verify(&src, &scratch.join("dst1"));
    assert_trees_equal(&src, &scratch.join("dst1"), NO_ATIME);
    if !(landed && landed_again) {
        eprintln!("note: a copy finished before rank 1 could be killed mid-copy");
    }
}

#[test]
fn refused_options_exit_2() {
    need_mpirun!();
    let scratch = Scratch::new();
    fs::create_dir(scratch.join("src")).unwrap();
    let refused: [&[&str]; 6] = [
        &["-a", "-L"],
        &["-L"],
        &["-r", "-i"],
        &["-r", "-l"],
        &["-r", "-s"],
        &["-r", "--parents"],
    ];
    for args in refused {
        let mut all = args.to_vec();
        all.extend(["src", "dst"]);
        let out = run(mpi_cp(2, &all, scratch.path()));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe(&out));
        assert!(!scratch.join("dst").exists());
    }
}

#[test]
fn one_rank_world_beside_a_launcher_of_more_is_refused() {
    // Started without mpirun, the process is a world of one (a singleton); a launcher variable
    // that says otherwise means the launcher is another MPI implementation's.
    need_mpirun!();
    let scratch = Scratch::new();
    fs::create_dir(scratch.join("src")).unwrap();
    let session = scratch.join(".mpi-session");
    fs::create_dir(&session).unwrap();
    let out = Cp::new()
        .args(["--mpi", "-a", "src", "dst"])
        .env("PMI_SIZE", "4")
        .env("TMPDIR", session.to_str().unwrap())
        .env("OMPI_MCA_orte_tmpdir_base", session.to_str().unwrap())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .current_dir(scratch.path())
        .run();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("PMI_SIZE=4"), "{err}");
    assert!(!scratch.join("dst").exists());
}

/// Address space each process of an MPI job may map: the ranks, mpirun and its daemons inherit
/// it. A rank that enumerates "to end of file" as bytes (or queues a chunk per byte) dies
/// under it at once, instead of after gigabytes.
const RANK_ADDRESS_SPACE: u64 = 1 << 30;

/// Runs `cmd` with RLIMIT_AS (soft and hard) at `limit` bytes, inherited by its children.
fn with_address_space(cmd: &mut Command, limit: u64) {
    use std::os::unix::process::CommandExt;
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
}

/// Big files that must come from the disk (not the page cache) are split into many chunks, and
/// ranks steal ranges of them, the last chunk ("to end of file") included. Every stolen range
/// must be clamped to the file's size: with 2 and 4 ranks, a few times each, each rank under
/// an address-space limit, the copy is exact.
#[test]
fn cold_big_files_stolen_in_ranges_stay_within_memory() {
    need_mpirun!();
    const FILES: usize = 4;
    let scratch = Scratch::new();
    let src = scratch.join("src");
    let mut rng = Prng::new(8);
    // In one directory: one rank splits them all, and its older chunks (whole files, last
    // chunks included) are what the others steal.
    for i in 0..FILES {
        let mut content = vec![0u8; (12 << 20) + i * 4099];
        rng.fill(&mut content);
        write_file(src.join(format!("big{i}")), &content);
    }
    let mut round = 0;
    for ranks in [2, 4] {
        for _ in 0..3 {
            for i in 0..FILES {
                evict(src.join(format!("big{i}")));
            }
            let dst = format!("dst{round}");
            round += 1;
            let mut cmd = mpi_cp(
                ranks,
                &["-a", "--threads", "2", "--chunk-size", "1M", "src", &dst],
                scratch.path(),
            );
            with_address_space(&mut cmd, RANK_ADDRESS_SPACE);
            let out = run(cmd);
            assert!(
                out.status.success(),
                "{ranks} ranks, {dst}: {}",
                describe(&out)
            );
            verify(&src, &scratch.join(&dst));
        }
    }
}
