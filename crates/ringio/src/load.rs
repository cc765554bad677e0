//! `ringio load`: verifying clients against an FSM server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use ringio_fsm::load::{self, LoadOptions, LoadReport};

use crate::units::parse_duration;

/// `ringio load`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Every client runs on one event loop, checks every reply against its own \
copy of the state machine, and at the end sends 3 and expects d and a close. Wrong replies are \
errors. With --rate the load is open loop and latency counts from each request's due time \
(coordinated omission corrected).\n\n\
Exit status: 0 when every client connected and every reply was right; 1 when a client could \
not connect (or was turned away before its first reply) or a reply was wrong."
)]
pub struct Args {
    /// The server.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9090")]
    pub addr: SocketAddr,
    /// Simultaneous clients.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub clients: usize,
    /// Length of the measured phase, e.g. 5s, 500ms.
    #[arg(long, value_name = "T", default_value = "5s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Actions per write (pipelining depth).
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub pipeline: usize,
    /// Open loop: this many requests per second in all.
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
    /// Write the report as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The load generator: tokio tasks (any loop), or one bare epoll loop (closed loop only;
    /// cheaper per round trip, for loading a server to its own limit).
    #[arg(long, value_name = "ENGINE", default_value = "tokio", value_parser = ["tokio", "epoll"])]
    pub engine: String,
    /// Also report the CPU time this process (the server) used in the measured phase.
    #[arg(long, value_name = "PID")]
    pub watch_pid: Option<u32>,
}

pub fn run(args: &Args) -> Result<i32> {
    // Servers and load generators hold a socket per client.
    ringio_copy::raise_nofile_limit();
    let opts = LoadOptions {
        addr: args.addr,
        clients: args.clients,
        duration: args.duration,
        pipeline: args.pipeline,
        rate: args.rate,
        connect_concurrency: 256,
        watch_pid: args.watch_pid,
    };
    let report = if args.engine == "epoll" {
        ringio_fsm::load_epoll::run(&opts)?
    } else {
        load::run(&opts)?
    };
    print_report(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("cannot write '{}'", path.display()))?;
    }
    Ok(verdict(&report, args))
}

/// The exit status, with a line on stderr saying what went wrong.
fn verdict(r: &LoadReport, args: &Args) -> i32 {
    let first = r.first_errors.first().map(String::as_str).unwrap_or("?");
    if r.connected == 0 {
        eprintln!(
            "ringio load: no client could connect to {} ({first}); is a server running there?",
            args.addr
        );
        return 1;
    }
    let mut failed = false;
    if r.refused > 0 {
        eprintln!(
            "ringio load: {} of {} clients could not connect or were turned away ({first})",
            r.refused, args.clients
        );
        failed = true;
    }
    if r.errors > 0 {
        eprintln!(
            "ringio load: {} errors (wrong replies or failed connections)",
            r.errors
        );
        failed = true;
    }
    i32::from(failed)
}

pub fn print_report(r: &LoadReport) {
    println!(
        "clients {} connected, {} refused; requests {}, responses {}, errors {}",
        r.connected, r.refused, r.requests, r.responses, r.errors
    );
    println!(
        "{:.0} req/s, {:.0} resp/s over {:.1} s",
        r.req_per_s, r.resp_per_s, r.seconds
    );
    let l = r.latency_us;
    println!(
        "latency us: p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
        l.p50, l.p90, l.p99, l.p999, l.max
    );
    for e in &r.first_errors {
        println!("error: {e}");
    }
}
