//! The FSM server, every model: protocol conformance, 1,000 verifying clients, rude clients,
//! and a clean stop with a summary line.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{self, Server};

/// Every model; `sequential` serves one client at a time and sits out the concurrency test.
const MODELS: &[&str] = &[
    "sequential",
    "threaded",
    "select",
    "poll",
    "epoll",
    "libuv",
    "tokio",
    "uring",
    "uring-bufring",
    "c-epoll",
];

fn read_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf).unwrap();
    buf
}

fn expect_closed(s: &mut TcpStream) {
    let mut b = [0u8; 1];
    assert_eq!(
        s.read(&mut b).unwrap(),
        0,
        "the server should close after 'd'"
    );
}

/// The reference state machine, for pipelined checks.
fn replies(input: &[u8]) -> Vec<u8> {
    const T: [[u8; 4]; 4] = [*b"abcd", *b"aabd", *b"aacd", *b"dddd"];
    let mut state = 0usize;
    let mut out = Vec::new();
    for &b in input {
        let a = match b {
            0..=3 => b as usize,
            b'0'..=b'3' => (b - b'0') as usize,
            b' ' | b'\t' | b'\r' | b'\n' => continue,
            _ => {
                out.push(b'?');
                continue;
            }
        };
        let next = T[state][a];
        out.push(next);
        state = (next - b'a') as usize;
        if next == b'd' {
            break;
        }
    }
    out
}

fn conformance(server: &Server) {
    // One action at a time, ASCII and raw bytes.
    let mut s = server.connect();
    for (send, want) in [
        (b'1', b'b'),
        (b'2', b'b'),
        (0u8, b'a'),
        (2, b'c'),
        (b'x', b'?'),
        (b'2', b'c'),
        (1, b'a'),
    ] {
        s.write_all(&[send]).unwrap();
        assert_eq!(read_n(&mut s, 1), [want], "after sending {send:#04x}");
    }
    // Whitespace gets no reply; 3 ends it.
    s.write_all(b" \t\r\n3").unwrap();
    assert_eq!(read_n(&mut s, 1), b"d");
    expect_closed(&mut s);

    // Thousands pipelined in one write, with whitespace and bad bytes mixed in.
    let mut input = Vec::new();
    let mut rng = common::Prng::new(12345);
    for i in 0..6000 {
        input.push(match rng.below(7) {
            0 => b'0',
            1 => 1,
            2 => b'2',
            3 => 0,
            4 => b' ',
            5 if i % 50 == 0 => b'z',
            _ => b'1',
        });
    }
    input.extend_from_slice(b"3 ignored after d");
    let want = replies(&input);
    let mut s = server.connect();
    s.write_all(&input).unwrap();
    assert_eq!(read_n(&mut s, want.len()), want);
    expect_closed(&mut s);
}

fn each_model(test: fn(&str)) {
    for m in MODELS {
        if *m == "libuv" && !cfg!(feature = "libuv") {
            eprintln!("model libuv: skipped, this build has no `libuv` feature");
            continue;
        }
        eprintln!("model {m}");
        test(m);
    }
}

/// `ringio load` against a port where nothing listens fails (exit 1) and says why.
#[test]
fn load_with_no_server_fails() {
    // A port that was free a moment ago: bind, note it, close.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ringio"))
        .args(["load", "--clients", "3", "--duration", "200ms", "--addr"])
        .arg(addr.to_string())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no client could connect"), "{err}");
    assert!(err.contains(&addr.to_string()), "{err}");
}

/// Without the feature, the libuv model says in one line how to get it, and exits 2.
#[test]
fn libuv_without_the_feature_says_how_to_get_it() {
    if cfg!(feature = "libuv") {
        eprintln!("skipped: this build has the libuv feature");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_ringio"))
        .args(["serve", "--model", "libuv", "--addr", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--features libuv"), "{err}");
}

#[test]
fn every_model_speaks_the_protocol() {
    each_model(|m| {
        let server = Server::start(m);
        conformance(&server);
        let err = server.stop();
        assert!(
            err.contains(&format!("ringio serve: {m} stopped: 2 connections")),
            "{err}"
        );
    });
}

#[test]
fn a_thousand_verifying_clients() {
    each_model(|m| {
        if m == "sequential" {
            return;
        }
        let server = Server::start(m);
        let out = Command::new(env!("CARGO_BIN_EXE_ringio"))
            .args(["load", "--watch-pid", &server.pid().to_string()])
            .args([
                "--clients",
                "1000",
                "--duration",
                "1s",
                "--pipeline",
                "3",
                "--addr",
            ])
            .arg(server.addr.to_string())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{m}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("clients 1000 connected, 0 refused"),
            "{m}: {text}"
        );
        assert!(text.contains("errors 0"), "{m}: {text}");
        // The watched server's CPU is in the text, not only in --json.
        assert!(text.contains("watched server "), "{m}: {text}");
        conformance(&server);
        server.stop();
    });
}

#[test]
fn rude_clients_do_not_hurt_the_server() {
    each_model(|m| {
        let server = Server::start(m);
        for i in 0..20 {
            let mut s = server.connect();
            // Half a request, no reading, then a reset (SO_LINGER 0) or a plain close.
            s.write_all(b"1 2 0 ").unwrap();
            if i % 2 == 0 {
                let linger = libc::linger {
                    l_onoff: 1,
                    l_linger: 0,
                };
                use std::os::fd::AsRawFd;
                // SAFETY: setting a linger option on our own socket.
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
            drop(s);
        }
        // A client that floods without reading: the server must not buffer without bound, and
        // must still serve others meanwhile (except sequential, which serves one at a time).
        let mut flood = server.connect();
        let _ = flood.set_write_timeout(Some(Duration::from_millis(500)));
        let chunk = vec![b'1'; 64 * 1024];
        for _ in 0..64 {
            if flood.write_all(&chunk).is_err() {
                break;
            }
        }
        if m != "sequential" {
            conformance(&server);
        }
        drop(flood);
        conformance(&server);
        server.stop();
    });
}

/// Past FD_SETSIZE, select turns clients away cleanly: no crash, no wrong reply, and it keeps
/// serving.
#[test]
fn select_refuses_clients_past_fd_setsize() {
    let server = Server::start("select");
    let out = Command::new(env!("CARGO_BIN_EXE_ringio"))
        .args(["load", "--clients", "1100", "--duration", "1s", "--addr"])
        .arg(server.addr.to_string())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("errors 0"), "{text}");
    // Clients turned away are a failure of the run, said on stderr.
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("could not connect or were turned away"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let refused: u64 = text
        .split("connected, ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(refused > 0, "{text}");
    conformance(&server);
    let err = server.stop();
    assert!(
        err.contains("past this model's limit (FD_SETSIZE)"),
        "{err}"
    );
}

/// How a [`RudeServer`] treats a connection.
#[derive(Clone, Copy, Debug)]
enum Rudeness {
    /// Accepts and holds the connection: never reads, never replies.
    Silent,
    /// Answers the first this many actions right, then holds the connection without a word.
    StopsAfter(usize),
    /// Answers every byte with 'x'.
    Garbage,
    /// Answers right, and after 'd' holds the connection open instead of closing it.
    NeverCloses,
}

/// A server in this test process that breaks the protocol's promises in one way.
struct RudeServer {
    addr: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RudeServer {
    fn start(rudeness: Rudeness) -> RudeServer {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            let mut talkers = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        if let Rudeness::Silent = rudeness {
                            held.push(s);
                        } else {
                            let stopped = stopped.clone();
                            talkers.push(std::thread::spawn(move || talk(s, rudeness, &stopped)));
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            for t in talkers {
                let _ = t.join();
            }
        });
        RudeServer {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for RudeServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One connection of a [`RudeServer`] that talks: until the server stops, it holds the
/// connection whatever the client does.
fn talk(mut s: TcpStream, rudeness: Rudeness, stop: &std::sync::atomic::AtomicBool) {
    use std::sync::atomic::Ordering;
    const T: [[u8; 4]; 4] = [*b"abcd", *b"aabd", *b"aacd", *b"dddd"];
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let (mut state, mut answered, mut mute) = (0usize, 0usize, false);
    let mut buf = [0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        if mute {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        let n = match s.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(_) => continue,
        };
        let mut out = Vec::new();
        for &b in &buf[..n] {
            if matches!(b, b' ' | b'\t' | b'\r' | b'\n') {
                continue;
            }
            if let Rudeness::Garbage = rudeness {
                out.push(b'x');
                continue;
            }
            if let Rudeness::StopsAfter(limit) = rudeness {
                if answered == limit {
                    mute = true;
                    break;
                }
            }
            let a = match b {
                0..=3 => b as usize,
                b'0'..=b'3' => (b - b'0') as usize,
                _ => {
                    out.push(b'?');
                    continue;
                }
            };
            let next = T[state][a];
            out.push(next);
            answered += 1;
            state = (next - b'a') as usize;
            if next == b'd' {
                // NeverCloses: holds on without reading; the others close now.
                mute = true;
                break;
            }
        }
        if s.write_all(&out).is_err() {
            return;
        }
        if state == 3 && !matches!(rudeness, Rudeness::NeverCloses) {
            return;
        }
    }
}

/// A server that accepts and never answers, one that goes quiet part way, one that answers
/// garbage, and one that never closes after 'd': each run of `ringio load` (both engines) ends
/// within its duration plus its timeout and a margin, exits 1, and says why.
#[test]
fn load_ends_on_a_server_that_stops_answering() {
    const DURATION: Duration = Duration::from_secs(1);
    const TIMEOUT: Duration = Duration::from_secs(1);
    for (rudeness, why) in [
        (Rudeness::Silent, "no reply within 1 s"),
        (Rudeness::StopsAfter(7), "no reply within 1 s"),
        (Rudeness::Garbage, "wrong reply"),
        (Rudeness::NeverCloses, "did not close within 1 s"),
    ] {
        for engine in ["tokio", "epoll"] {
            let server = RudeServer::start(rudeness);
            let started = std::time::Instant::now();
            let out = common::Cp::bare()
                .timeout(Duration::from_secs(60))
                .args(["load", "--engine", engine, "--clients", "3"])
                .args(["--duration", "1s", "--timeout", "1s", "--addr"])
                .arg(server.addr.to_string())
                .run();
            let took = started.elapsed();
            let what = format!("{rudeness:?} with {engine}: {}", common::describe(&out));
            assert!(
                took < DURATION + TIMEOUT + Duration::from_secs(5),
                "took {took:?}: {what}"
            );
            assert_eq!(out.status.code(), Some(1), "{what}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("errors: wrong or late replies"), "{what}");
            assert!(err.contains(why), "{what}");
            assert!(!err.contains("panicked"), "{what}");
        }
    }
}

/// With pipelining, a server that answers part of a batch and goes quiet is named for what it
/// answered.
#[test]
fn load_counts_a_half_answered_batch() {
    let server = RudeServer::start(Rudeness::StopsAfter(5));
    for engine in ["tokio", "epoll"] {
        let out = common::Cp::bare()
            .timeout(Duration::from_secs(60))
            .args([
                "load",
                "--engine",
                engine,
                "--clients",
                "2",
                "--pipeline",
                "8",
            ])
            .args(["--duration", "1s", "--timeout", "500ms", "--addr"])
            .arg(server.addr.to_string())
            .run();
        common::assert_exit(&out, 1);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("only 5 of 8 replies within 500 ms"),
            "{engine}: {err}"
        );
    }
}

/// A connect that gets no answer (a listener whose backlog is full and which never accepts)
/// fails after the timeout, and the clients after it are not tried one timeout at a time.
#[test]
fn load_gives_up_on_a_server_that_never_accepts() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    // Listening again only changes the backlog: 0 queues one connection at most, and as this
    // never accepts, the connects after it get no answer.
    {
        use std::os::fd::AsRawFd;
        // SAFETY: listen on our own bound socket.
        assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0);
    }
    let addr = listener.local_addr().unwrap();
    for engine in ["tokio", "epoll"] {
        let started = std::time::Instant::now();
        let out = common::Cp::bare()
            .timeout(Duration::from_secs(60))
            .args(["load", "--engine", engine, "--clients", "600"])
            .args(["--duration", "1s", "--timeout", "1s", "--addr"])
            .arg(addr.to_string())
            .run();
        let took = started.elapsed();
        let what = format!("{engine}: {}", common::describe(&out));
        // Connect phase (one timeout), measured phase, a reply's timeout, and a margin.
        assert!(took < Duration::from_secs(3 + 5), "took {took:?}: {what}");
        assert_eq!(out.status.code(), Some(1), "{what}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("connect: no answer within 1 s"),
            "{what}"
        );
    }
    drop(listener);
}

/// Runs `ringio ARGS...` (bounded, so a hang fails the test rather than stalling it).
fn ringio_within(args: &[&str]) -> std::process::Output {
    common::Cp::bare()
        .timeout(Duration::from_secs(30))
        .args(args)
        .run()
}

/// Every numeric option of `load`, `serve`, `bench server` and `bench loopback` refuses
/// absurd values at parse time: exit 2, a message naming the option, no panic.
#[test]
fn numeric_options_refuse_absurd_values() {
    const ABSURD: &[&str] = &["0", "nan", "inf", "-1", "1e-300", "18446744073709551615"];
    // Where 0 is a fine value (CPU 0), it is left out.
    const ABSURD_BUT_ZERO: &[&str] =
        &["nan", "inf", "-1", "1e-300", "18446744073709551615", "4096"];
    // A closed port and short runs: should a bad value get through, the command ends soon
    // (and not with status 2).
    let load_base: &[(&str, &str)] = &[
        ("--addr", "127.0.0.1:1"),
        ("--duration", "100ms"),
        ("--clients", "1"),
    ];
    let bench_base: &[(&str, &str)] = &[
        ("--models", "epoll"),
        ("--clients", "1"),
        ("--duration", "1ms"),
        ("--no-pin", ""),
    ];
    // The command, the options it is run with besides (the one under test left out), the
    // option, its absurd values.
    type Case<'a> = (
        &'a [&'a str],
        &'a [(&'a str, &'a str)],
        &'a str,
        &'a [&'a str],
    );
    let cases: &[Case<'_>] = &[
        (&["load"], load_base, "--clients", ABSURD),
        (&["load"], load_base, "--pipeline", ABSURD),
        (&["load"], load_base, "--rate", ABSURD),
        (&["load"], load_base, "--duration", ABSURD),
        (&["load"], load_base, "--timeout", ABSURD),
        (&["load"], load_base, "--watch-pid", ABSURD),
        (
            &["serve", "--model", "tokio", "--addr", "127.0.0.1:0"],
            &[],
            "--threads",
            ABSURD,
        ),
        (&["bench", "server"], bench_base, "--clients", ABSURD),
        (&["bench", "server"], bench_base, "--duration", ABSURD),
        (&["bench", "server"], bench_base, "--pipeline", ABSURD),
        (&["bench", "server"], bench_base, "--rate", ABSURD),
        (&["bench", "server"], bench_base, "--timeout", ABSURD),
        (&["bench", "server"], bench_base, "--rounds", ABSURD),
        (
            &["bench", "server"],
            &bench_base[..3],
            "--server-cpu",
            ABSURD_BUT_ZERO,
        ),
        (
            &["bench", "server"],
            &bench_base[..3],
            "--load-cpu",
            ABSURD_BUT_ZERO,
        ),
        (
            &["bench", "loopback", "--no-pin"],
            &[("--rounds", "1")],
            "--round-trips",
            ABSURD,
        ),
        (
            &["bench", "loopback", "--no-pin"],
            &[("--round-trips", "1")],
            "--rounds",
            ABSURD,
        ),
    ];
    for (command, base, option, values) in cases {
        for value in *values {
            let mut args: Vec<&str> = command.to_vec();
            for (name, v) in base.iter().filter(|(name, _)| name != option) {
                args.push(name);
                if !v.is_empty() {
                    args.push(v);
                }
            }
            args.extend([option, value]);
            let out = ringio_within(&args);
            let what = format!("{}: {}", args.join(" "), common::describe(&out));
            assert_eq!(out.status.code(), Some(2), "{what}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains(&format!("invalid value '{value}' for '{option}")),
                "{what}"
            );
            assert!(!err.contains("panicked"), "{what}");
        }
    }
}

/// Values each fine alone but not together, or not for this load generator, or not for a
/// server, are refused too, with exit 2 and the reason.
#[test]
fn load_refuses_what_cannot_run() {
    for (args, says) in [
        (
            &["--engine", "epoll", "--rate", "100"][..],
            "--rate needs --engine tokio",
        ),
        (&["--addr", "127.0.0.1:0"], "port 0 is no server's port"),
        (
            &["--addr", "nowhere"],
            "invalid value 'nowhere' for '--addr",
        ),
    ] {
        let mut all = vec!["load", "--duration", "100ms"];
        if !args.contains(&"--addr") {
            all.extend(["--addr", "127.0.0.1:1"]);
        }
        all.extend(args);
        let out = ringio_within(&all);
        common::assert_exit(&out, 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{all:?}: {err}");
    }
}

/// More clients than the descriptor limit allows sockets for is a bad value, not a run in
/// which most clients fail.
#[test]
fn load_clients_are_bounded_by_the_descriptor_limit() {
    let out = common::Cp::bare()
        .timeout(Duration::from_secs(30))
        .nofile_limit(100)
        .args(["load", "--addr", "127.0.0.1:1", "--duration", "100ms"])
        .args(["--clients", "200"])
        .run();
    common::assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid value '200' for '--clients"), "{err}");
    assert!(err.contains("at most 68 (RLIMIT_NOFILE 100"), "{err}");
}

/// A port already taken: `serve` says which address and why.
#[test]
fn serve_on_a_busy_port_says_why() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = ringio_within(&["serve", "--model", "epoll", "--addr", &addr]);
    common::assert_exit(&out, 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("cannot listen on {addr}: Address already in use")),
        "{err}"
    );
}
