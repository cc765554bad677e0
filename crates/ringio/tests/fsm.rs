//! The FSM server, every model: protocol conformance, 1,000 verifying clients, rude clients,
//! and a clean stop with a summary line.

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Server;

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
            .args([
                "load",
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
