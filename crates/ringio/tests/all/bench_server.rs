//! `ringio bench server` with the load generator as its own process, and `ringio bench
//! loopback`, on tiny loads (127.0.0.1 only, a few clients, a fraction of a second).

use crate::common::{assert_exit, Cp, Scratch, Server};

#[test]
fn bench_server_measures_the_server_from_a_separate_load_process() {
    let dir = Scratch::new();
    let json = dir.join("server.json");
    let out = Cp::bare()
        .args([
            "bench",
            "server",
            "--models",
            "epoll,uring-bufring",
            "--clients",
            "4",
            "--duration",
            "300ms",
            "--rounds",
            "2",
            "--json",
        ])
        .arg(&json)
        .run();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("cpu us/rt"), "{text}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let points = doc["points"].as_array().unwrap();
    assert_eq!(points.len(), 4, "{doc:#}");
    assert_eq!(doc["medians"].as_array().unwrap().len(), 2, "{doc:#}");
    // The document says what ran and when, and `bench report` makes its table again.
    assert_eq!(doc["command"][0], "ringio", "{doc:#}");
    assert!(doc["unix_time"].as_u64().is_some_and(|t| t > 0), "{doc:#}");
    let report = Cp::bare().args(["bench", "report"]).arg(&json).run();
    assert_exit(&report, 0);
    assert!(
        String::from_utf8_lossy(&report.stdout).contains("| model | clients | rt/s |"),
        "{}",
        String::from_utf8_lossy(&report.stdout)
    );
    let two_cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    for p in points {
        assert_eq!(p["load"]["errors"], 0, "{p:#}");
        assert_eq!(p["load"]["connected"], 4, "{p:#}");
        assert!(p["rt_per_s"].as_f64().unwrap() > 0.0, "{p:#}");
        assert!(p["server_cpu_s"].as_f64().unwrap() > 0.0, "{p:#}");
        assert!(p["server_cpu_us_per_rt"].as_f64().unwrap() > 0.0, "{p:#}");
        assert!(p["load_cpu_s"].as_f64().unwrap() > 0.0, "{p:#}");
        assert!(p["load_cpu_share"].as_f64().is_some(), "{p:#}");
        assert!(p["load_bound"].is_boolean(), "{p:#}");
        assert!(p["load"]["watched_cpu_s"].as_f64().is_some(), "{p:#}");
        if two_cpus {
            assert!(p["server_cpu"].is_u64(), "{p:#}");
            assert!(p["load_cpu"].is_u64(), "{p:#}");
            assert_ne!(p["server_cpu"], p["load_cpu"], "{p:#}");
        }
    }
}

#[test]
fn bench_server_no_pin_leaves_the_cpus_open() {
    let dir = Scratch::new();
    let json = dir.join("server.json");
    let out = Cp::bare()
        .args([
            "bench",
            "server",
            "--models",
            "uring-bufring",
            "--clients",
            "2",
            "--duration",
            "200ms",
            "--rate",
            "1000",
            "--no-pin",
            "--json",
        ])
        .arg(&json)
        .run();
    assert!(out.status.success(), "{out:?}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let p = &doc["points"][0];
    assert!(
        p["server_cpu"].is_null() && p["load_cpu"].is_null(),
        "{p:#}"
    );
    assert_eq!(p["load"]["errors"], 0, "{p:#}");
}

#[test]
fn bench_loopback_ping_pongs_over_both_transports() {
    let out = Cp::bare()
        .args(["bench", "loopback", "--round-trips", "300", "--rounds", "1"])
        .run();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("socketpair") && text.contains("tcp-loopback"),
        "{text}"
    );
}

/// The epoll load generator verifies as the tokio one does: every reply, the final 'd' and the
/// close; it refuses an open loop.
#[test]
fn the_epoll_load_engine_verifies_every_reply() {
    let server = Server::start("tokio");
    let addr = server.addr.to_string();
    let run = |extra: &[&str]| {
        Cp::bare()
            .args(["load", "--engine", "epoll", "--addr", &addr])
            .args(extra)
            .run()
    };
    let out = run(&["--clients", "300", "--duration", "300ms", "--pipeline", "3"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("clients 300 connected, 0 refused"), "{text}");
    assert!(text.contains("errors 0"), "{text}");
    let out = run(&["--clients", "1", "--duration", "100ms", "--rate", "100"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("closed loop only"),
        "{out:?}"
    );
    server.stop();
}
