//! Every server model under rude clients for a few seconds: clients that connect and vanish,
//! send half a request and hang up, flood without ever reading the replies (the server must
//! stop reading rather than buffer), flood garbage, or sit idle. Meanwhile a well-behaved
//! client checks every reply, and the process's resident memory must stay within a bound.
//!
//! The server runs in this process (as `ringio serve` runs it: [`ringio_fsm::serve`] on a
//! thread, stopped by a flag), so the memory measured is this process's: the server's buffers
//! plus the clients' few threads. Socket buffers are kernel memory and do not count; what a
//! server keeps in user space for a client that never reads is exactly what this watches. The
//! binary's other tests must not add theirs: the test runs in a process of its own.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ringio_base::Prng;
use ringio_fsm::{Model, ServeError, Summary};

/// How long the rude clients run against each model.
const PHASE: Duration = Duration::from_secs(3);

/// Connections opened at the start of the phase and left silent until its end.
const IDLE: usize = 200;

/// Clients that flood without reading (actions, or garbage).
const NEVER_READERS: usize = 4;

/// How much the resident set may grow over its level before the phase, in KiB.
///
/// What the models may legitimately hold: per connection, up to 64 KiB of unsent replies
/// (`HIGH_WATER`) plus a receive buffer (16 KiB at most), and for `threaded` a 64 KiB stack
/// per client, of which a few KiB are touched. For the never-readers and the garbage client,
/// that is under 1 MiB; for the idle ones, 200 × 80 KiB = 16 MiB in the worst case (most
/// models hold far less). Measured: 0.5-3.6 MiB for every model but `threaded` (6.8 MiB, its
/// client threads); 32 MiB leaves room for a slower or busier machine. A server that keeps
/// reading from a client that never reads holds a reply byte per byte received: `select` with
/// its high-water mark removed grew by 65 MiB in one phase, and fails here.
const RSS_GROWTH_LIMIT_KIB: u64 = 32 * 1024;

/// This process's resident set, in KiB.
pub(crate) fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// A server on a free port, on a thread of this process.
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<Summary, ServeError>>,
}

impl Server {
    pub(crate) fn start(model: Model) -> Server {
        let listener = ringio_fsm::listen("127.0.0.1:0".parse().unwrap()).expect("listen");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || ringio_fsm::serve(model, listener, 1, &flag));
        Server { addr, stop, thread }
    }

    pub(crate) fn stop(self) -> Summary {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .expect("server thread")
            .expect("server run")
    }
}

pub(crate) fn connect(addr: SocketAddr) -> Option<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.set_nodelay(true).ok()?;
    Some(s)
}

/// Closes with a reset (SO_LINGER 0) instead of a FIN.
pub(crate) fn reset(s: TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    use std::os::fd::AsRawFd;
    // SAFETY: setting a linger option on our own socket, with a pointer to a live value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as u32,
        )
    };
}

/// The protocol's replies to `input`, written out from the design notes' table.
fn replies(input: &[u8]) -> Vec<u8> {
    const TABLE: [&[u8; 4]; 3] = [b"abcd", b"aabd", b"aacd"];
    let mut state = 0;
    let mut out = Vec::new();
    for &b in input {
        let action = match b {
            0..=3 => b as usize,
            b'0'..=b'3' => (b - b'0') as usize,
            b' ' | b'\t' | b'\r' | b'\n' => continue,
            _ => {
                out.push(b'?');
                continue;
            }
        };
        let next = TABLE[state][action];
        out.push(next);
        if next == b'd' {
            break;
        }
        state = (next - b'a') as usize;
    }
    out
}

/// One well-behaved session: a random pipelined stream ending in the exit action, written in
/// random pieces; every reply checked, then the close.
fn good_session(addr: SocketAddr, rng: &mut Prng) -> Result<(), String> {
    const ALPHABET: &[u8] = b"012\x00\x01\x02 \nx";
    let len = rng.range(100, 2000) as usize;
    let mut input: Vec<u8> = (0..len).map(|_| *rng.pick(ALPHABET)).collect();
    input.push(b'3');
    let want = replies(&input);
    let mut s = connect(addr).ok_or("cannot connect")?;
    let mut rest = &input[..];
    while !rest.is_empty() {
        let n = (rng.range(1, 256) as usize).min(rest.len());
        s.write_all(&rest[..n]).map_err(|e| format!("write: {e}"))?;
        rest = &rest[n..];
    }
    let mut got = vec![0u8; want.len()];
    s.read_exact(&mut got).map_err(|e| format!("read: {e}"))?;
    if got != want {
        return Err(format!("wrong replies to {input:?}: {got:?}"));
    }
    let mut b = [0u8; 1];
    match s.read(&mut b) {
        Ok(0) => Ok(()),
        other => Err(format!("no close after 'd': {other:?}")),
    }
}

/// The rude clients, each on a thread until `end` is set.
fn rude_clients(addr: SocketAddr, end: &Arc<AtomicBool>) -> Vec<JoinHandle<u64>> {
    let mut threads = Vec::new();
    let spawn = |threads: &mut Vec<JoinHandle<u64>>, f: Box<dyn FnOnce() -> u64 + Send>| {
        threads.push(std::thread::spawn(f));
    };
    // Connect and vanish, half with a reset.
    let e = end.clone();
    spawn(
        &mut threads,
        Box::new(move || {
            let mut n = 0;
            while !e.load(Ordering::Relaxed) {
                if let Some(s) = connect(addr) {
                    if n % 2 == 0 {
                        reset(s);
                    }
                    n += 1;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            n
        }),
    );
    // Half a request, then hang up without reading.
    let e = end.clone();
    spawn(
        &mut threads,
        Box::new(move || {
            let mut n = 0;
            while !e.load(Ordering::Relaxed) {
                if let Some(mut s) = connect(addr) {
                    let _ = s.write_all(b"1 2 0 1 2");
                    if n % 2 == 0 {
                        reset(s);
                    }
                    n += 1;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            n
        }),
    );
    // Floods that never read: actions (a reply per byte) and garbage (a '?' per byte).
    for i in 0..NEVER_READERS {
        let e = end.clone();
        spawn(
            &mut threads,
            Box::new(move || {
                let chunk = if i % 2 == 0 {
                    b"1 2 0 "
                } else {
                    b"xyz\xff\x80!"
                }
                .repeat(10_000);
                let Some(mut s) = connect(addr) else {
                    return 0;
                };
                let _ = s.set_write_timeout(Some(Duration::from_millis(100)));
                let mut sent = 0;
                while !e.load(Ordering::Relaxed) {
                    match s.write(&chunk) {
                        Ok(n) => sent += n as u64,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => break,
                    }
                }
                reset(s);
                sent
            }),
        );
    }
    // Garbage as fast as the server answers it; every reply must be '?'.
    let e = end.clone();
    spawn(
        &mut threads,
        Box::new(move || {
            let chunk = b"hello\xfe\x7f".repeat(2000);
            let Some(mut s) = connect(addr) else {
                return 0;
            };
            let mut got = vec![0u8; chunk.len()];
            let mut sent = 0;
            while !e.load(Ordering::Relaxed) {
                if s.write_all(&chunk).is_err() || s.read_exact(&mut got).is_err() {
                    break;
                }
                assert!(got.iter().all(|&r| r == b'?'), "garbage answered wrongly");
                sent += chunk.len() as u64;
            }
            sent
        }),
    );
    // Many idle connections, held to the end.
    let e = end.clone();
    spawn(
        &mut threads,
        Box::new(move || {
            let idle: Vec<TcpStream> = (0..IDLE).filter_map(|_| connect(addr)).collect();
            while !e.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
            }
            idle.len() as u64
        }),
    );
    threads
}

fn soak(model: Model) {
    let server = Server::start(model);
    let mut rng = Prng::new(18);
    good_session(server.addr, &mut rng).unwrap_or_else(|e| panic!("{model}: {e}"));
    // SAFETY: malloc_trim only returns free memory to the kernel; a lower, steadier baseline.
    unsafe { libc::malloc_trim(0) };
    let baseline = rss_kib();

    let end = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(baseline));
    let watcher = {
        let (end, peak) = (end.clone(), peak.clone());
        std::thread::spawn(move || {
            while !end.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let rude = rude_clients(server.addr, &end);

    // The well-behaved client, alongside the rude ones; `sequential` serves one client at a
    // time (an idle one holds it), so its turn comes after them.
    let concurrent = model != Model::Sequential;
    let started = Instant::now();
    let mut rounds = 0;
    while concurrent && started.elapsed() < PHASE {
        good_session(server.addr, &mut rng).unwrap_or_else(|e| panic!("{model}: {e}"));
        rounds += 1;
    }
    std::thread::sleep(PHASE.saturating_sub(started.elapsed()));
    end.store(true, Ordering::Relaxed);
    let counts: Vec<u64> = rude.into_iter().map(|t| t.join().unwrap()).collect();
    watcher.join().unwrap();
    for _ in 0..20 {
        good_session(server.addr, &mut rng).unwrap_or_else(|e| panic!("{model}: {e}"));
    }
    let summary = server.stop();

    let growth = peak.load(Ordering::Relaxed).saturating_sub(baseline);
    eprintln!(
        "{model}: RSS +{growth} KiB over {baseline} KiB; {rounds} good sessions during the \
         phase; rude counts (vanish, half, floods.., garbage, idle) {counts:?}; {summary:?}"
    );
    assert!(
        growth <= RSS_GROWTH_LIMIT_KIB,
        "{model}: resident set grew by {growth} KiB (limit {RSS_GROWTH_LIMIT_KIB} KiB)"
    );
    if concurrent {
        assert!(
            rounds >= 5,
            "{model}: only {rounds} good sessions in {PHASE:?} of abuse"
        );
    }
}

/// Set in the test binary run by [`isolated`]: the name of the one test it runs.
const ISOLATED: &str = "RINGIO_TEST_ISOLATED";

/// Runs the test `name` in a process of its own: this test binary again, running that test
/// alone. There this returns true, and the caller goes on with the test's work; here it returns
/// false once that process has passed, and panics with its output if it failed.
pub(crate) fn isolated(name: &str) -> bool {
    if std::env::var_os(ISOLATED).is_some_and(|v| v == name) {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(exe)
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(ISOLATED, name)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {name} in a process of its own: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "{name}, run in a process of its own, failed ({}):\n{stdout}",
        out.status
    );
    // A name that matches no test runs nothing, and passes.
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{name}: no such test in this binary\n{stdout}"
    );
    false
}

#[test]
fn every_model_survives_rude_clients_in_bounded_memory() {
    // The resident set measured is the process's: only this test may run in it.
    if !isolated("soak::every_model_survives_rude_clients_in_bounded_memory") {
        return;
    }
    for &model in Model::ALL {
        if let Some(why) = model.unavailable() {
            eprintln!("{model}: skipped: {why}");
            continue;
        }
        soak(model);
    }
}
