//! `ringio bench server`: every FSM model at several client counts.

use ringio_copy::quote::quote;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use ringio_fsm::bench::{self, BenchOptions, LoadEngine, Point};
use ringio_fsm::loopback::{self, LoopbackReport, Transport};
use ringio_fsm::{affinity, Model};
use ringio_lab::plot::{line_chart, LineChart, Series};

use crate::load::{parse_clients, parse_load_duration, parse_pipeline, parse_rate, parse_timeout};
use crate::units::parse_whole;

/// The most rounds of `bench server`.
const MAX_ROUNDS: u64 = 1000;

/// The most round trips of `bench loopback` per transport and round: about ten minutes at
/// the slowest transport's rate.
const MAX_ROUND_TRIPS: u64 = 100_000_000;

/// `ringio bench server`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Each model and client count gets a fresh `ringio serve` process, loaded \
for --duration by a fresh `ringio load` process (the verifying load generator; --load-engine), \
then stopped with SIGTERM. With two CPUs or more, server and load generator are pinned to CPUs \
of their own (the first two this process may use, unless --server-cpu/--load-cpu/--no-pin say \
otherwise). The server's CPU time over the measured phase comes from \
/proc/PID/task/*/schedstat, the load generator's from its rusage; a point where the load \
generator's CPU was busy >= 90% of the time is flagged load-bound (its round trips/s measure \
the load generator, not the server). With --rounds, the rounds run round-robin and the table \
gives the median of each. sequential serves one client at a time and runs only up to 10 \
clients.\n\n\
Every wait has a deadline: a server that does not say where it listens within 10 s, a load \
generator still running 60 s past its --duration and four --timeouts, or a server that does not \
stop within 10 s of SIGTERM is killed, and the benchmark fails with the reason."
)]
pub struct Args {
    /// Models, comma-separated [default: all].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub models: Vec<String>,
    /// Client counts, comma-separated, each as `ringio load --clients` takes it.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "1,10,100,1000,10000",
        value_parser = parse_clients,
        allow_negative_numbers = true
    )]
    pub clients: Vec<usize>,
    /// Load per point, e.g. 5s: 1ms to 24h (1440m).
    #[arg(long, value_name = "T", default_value = "5s", value_parser = parse_load_duration,
          allow_negative_numbers = true)]
    pub duration: Duration,
    /// Actions per write: 1 to 4096.
    #[arg(long, value_name = "K", default_value = "1", value_parser = parse_pipeline,
          allow_negative_numbers = true)]
    pub pipeline: usize,
    /// The load generator's longest wait for the server (`ringio load --timeout`): 1ms to 1h
    /// (60m).
    #[arg(long, value_name = "T", default_value = "5s", value_parser = parse_timeout,
          allow_negative_numbers = true)]
    pub timeout: Duration,
    /// Write SVG charts (req/s and p99 against clients) into this directory.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Write every point as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Open loop: this many requests per second in all, the same for every model (compare CPU
    /// per round trip at equal work), 0.001 to 1e9; closed loop without it.
    #[arg(long, value_name = "R", value_parser = parse_rate, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// The load generator: one bare epoll loop (closed loop; the cheaper one) or tokio tasks
    /// (always used with --rate).
    #[arg(long, value_name = "ENGINE", default_value = "epoll", value_parser = ["epoll", "tokio"])]
    pub load_engine: String,
    /// Rounds of every point (the table shows medians): 1 to 1000.
    #[arg(long, value_name = "N", default_value = "1", value_parser = parse_rounds,
          allow_negative_numbers = true)]
    pub rounds: usize,
    /// Pin the server to this CPU, one this process may run on [default: the first allowed
    /// CPU].
    #[arg(long, value_name = "CPU", value_parser = parse_cpu, allow_negative_numbers = true)]
    pub server_cpu: Option<usize>,
    /// Pin the load generator to this CPU, one this process may run on [default: the second
    /// allowed CPU].
    #[arg(long, value_name = "CPU", value_parser = parse_cpu, allow_negative_numbers = true)]
    pub load_cpu: Option<usize>,
    /// Pin nothing: server and load generator share whatever CPUs there are.
    #[arg(long, conflicts_with_all = ["server_cpu", "load_cpu"])]
    pub no_pin: bool,
}

/// `--rounds`.
fn parse_rounds(text: &str) -> Result<usize, String> {
    parse_whole(text, 1, MAX_ROUNDS).map(|n| n as usize)
}

/// `--server-cpu`, `--load-cpu`: a CPU this process may run on, since pinning a child to any
/// other fails between fork and exec.
fn parse_cpu(text: &str) -> Result<usize, String> {
    let allowed = affinity::allowed_cpus();
    let cpu = text.trim().parse::<usize>().ok();
    match cpu {
        Some(cpu) if allowed.contains(&cpu) => Ok(cpu),
        _ => Err(format!(
            "must be a CPU this process may run on: {}",
            allowed
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

pub fn run(args: &Args) -> Result<i32> {
    // Servers and load generators hold a socket per client.
    ringio_base::limits::raise_nofile_limit();
    let models: Vec<Model> = if args.models.is_empty() {
        let (built, missing): (Vec<Model>, Vec<Model>) =
            Model::ALL.iter().partition(|m| m.is_built());
        for m in missing {
            eprintln!(
                "ringio bench server: skipping {m}: {}",
                m.unavailable().unwrap_or_default()
            );
        }
        built
    } else {
        args.models
            .iter()
            .map(|m| m.parse::<Model>().map_err(anyhow::Error::msg))
            .collect::<Result<_>>()?
    };
    if let Some(why) = models.iter().find_map(|m| m.unavailable()) {
        eprintln!("ringio bench server: {why}");
        return Ok(2);
    }
    let (default_server, default_load) = if args.no_pin {
        (None, None)
    } else {
        affinity::default_cpus()
    };
    let opts = BenchOptions {
        exe: std::env::current_exe()?,
        models,
        clients: args.clients.clone(),
        duration: args.duration,
        pipeline: args.pipeline,
        timeout: args.timeout,
        rate: args.rate,
        load_engine: if args.load_engine == "tokio" {
            LoadEngine::Tokio
        } else {
            LoadEngine::Epoll
        },
        rounds: args.rounds,
        server_cpu: args.server_cpu.or(default_server),
        load_cpu: args.load_cpu.or(default_load),
    };
    let cpu = |c: Option<usize>| c.map_or("any CPU".to_string(), |c| format!("CPU {c}"));
    eprintln!(
        "server on {}, load generator on {}",
        cpu(opts.server_cpu),
        cpu(opts.load_cpu)
    );
    let status = crate::progress::status_line();
    let all = bench::run(&opts, &mut |round, m, n| {
        status.set_message(format!(
            "round {} of {}: {m} with {n} clients...",
            round + 1,
            opts.rounds
        ));
    })?;
    status.finish_and_clear();
    let points = bench::medians(&all);
    if opts.rounds > 1 {
        println!("medians of {} rounds", opts.rounds);
    }
    print!("{}", table(&points, ringio_lab::table::Style::Terminal));
    if let Some(dir) = &args.plot {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", quote(&dir)))?;
        let mut rate: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        let mut p99: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        for p in &points {
            rate.entry(&p.model)
                .or_default()
                .push((p.clients as f64, p.rt_per_s));
            p99.entry(&p.model)
                .or_default()
                .push((p.clients as f64, p.load.latency_us.p99.max(0.1)));
        }
        let series = |m: BTreeMap<&str, Vec<(f64, f64)>>| -> Vec<Series> {
            m.into_iter()
                .map(|(name, points)| Series {
                    name: name.to_string(),
                    points,
                })
                .collect()
        };
        let (rate, p99) = (series(rate), series(p99));
        line_chart(
            &dir.join("server-reqs.svg"),
            &LineChart {
                title: "FSM server: requests per second",
                x_label: "clients",
                y_label: "req/s",
                log_x: true,
                log_y: false,
                series: &rate,
            },
        )?;
        line_chart(
            &dir.join("server-p99.svg"),
            &LineChart {
                title: "FSM server: p99 latency",
                x_label: "clients",
                y_label: "p99 latency (us)",
                log_x: true,
                log_y: true,
                series: &p99,
            },
        )?;
        eprintln!("wrote {}/server-reqs.svg and server-p99.svg", dir.display());
    }
    if let Some(path) = &args.json {
        let doc = serde_json::json!({
            "machine": ringio_lab::machine::describe(std::path::Path::new(".")),
            "duration_s": args.duration.as_secs_f64(),
            "pipeline": args.pipeline,
            "rate": args.rate,
            "load_engine": args.load_engine,
            "rounds": opts.rounds,
            "server_cpu": opts.server_cpu,
            "load_cpu": opts.load_cpu,
            "medians": points,
            "points": all,
        });
        super::suite::write_document(path, doc)?;
    }
    Ok(if all.iter().any(|p| p.load.errors > 0) {
        1
    } else {
        0
    })
}

/// The table of the medians: a row per model and client count.
pub fn table(points: &[Point], style: ringio_lab::table::Style) -> String {
    let mut table = ringio_lab::table::new(&[
        "model",
        "clients",
        "rt/s",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "errors",
        "refused",
        "cpu us/rt",
        "load cpu",
        "",
    ]);
    ringio_lab::table::align_left(&mut table, 10);
    for p in points {
        let l = &p.load;
        table.add_row(vec![
            p.model.clone(),
            p.clients.to_string(),
            format!("{:.0}", p.rt_per_s),
            format!("{:.1}", l.latency_us.p50),
            format!("{:.1}", l.latency_us.p99),
            format!("{:.1}", l.latency_us.p999),
            l.errors.to_string(),
            l.refused.to_string(),
            format!("{:.2}", p.server_cpu_us_per_rt),
            format!("{:.0}%", p.load_cpu_share * 100.0),
            if p.load_bound { "load-bound" } else { "" }.to_string(),
        ]);
    }
    ringio_lab::table::render_as(&table, style)
}

/// `ringio bench loopback`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Two threads ping-pong one byte with blocking send and recv, over a Unix \
socketpair and over TCP on 127.0.0.1 (TCP_NODELAY), each thread pinned like `bench server` \
pins server and load generator (apart), then both on one CPU. The echoing thread's CPU per round \
trip is what a server that does nothing but answer would spend: the floor for every FSM model. \
The `one thread` rows play both ends on one thread, so no thread ever sleeps or wakes: half of \
its CPU is the answering side's system calls and protocol stack alone, the floor of a server \
that is never idle."
)]
pub struct LoopbackArgs {
    /// Round trips per transport and round: 1 to 100000000.
    #[arg(long, value_name = "N", default_value = "200000", value_parser = parse_round_trips,
          allow_negative_numbers = true)]
    pub round_trips: u64,
    /// Rounds (the table shows medians): 1 to 1000.
    #[arg(long, value_name = "N", default_value = "3", value_parser = parse_rounds,
          allow_negative_numbers = true)]
    pub rounds: usize,
    /// Pin nothing.
    #[arg(long)]
    pub no_pin: bool,
    /// Write every run as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// `bench loopback --round-trips`.
fn parse_round_trips(text: &str) -> Result<u64, String> {
    parse_whole(text, 1, MAX_ROUND_TRIPS)
}

pub fn run_loopback(args: &LoopbackArgs) -> Result<i32> {
    let (echo_cpu, client_cpu) = if args.no_pin {
        (None, None)
    } else {
        affinity::default_cpus()
    };
    // Apart: the wakeups cross CPUs, as between a pinned server and load generator. On one
    // CPU: a wakeup is a local context switch.
    let mut placements = vec![("apart", client_cpu, echo_cpu)];
    if let Some(cpu) = echo_cpu {
        placements.push(("one CPU", Some(cpu), Some(cpu)));
    }
    // One thread plays both ends: no wakeups at all.
    placements.push(("one thread", None, echo_cpu));
    let mut runs = Vec::new();
    println!(
        "{:<13} {:<10} {:>9} {:>9} {:>15} {:>17}",
        "transport", "threads", "rt/s", "us/rt", "echo cpu us/rt", "client cpu us/rt"
    );
    for &t in Transport::ALL {
        for &(place, client_cpu, echo_cpu) in &placements {
            let mut these = Vec::new();
            for _ in 0..args.rounds.max(1) {
                let r = if place == "one thread" {
                    loopback::run_one_thread(t, args.round_trips, echo_cpu)
                } else {
                    loopback::run(t, args.round_trips, client_cpu, echo_cpu)
                }
                .with_context(|| format!("cannot ping-pong over {}", t.name()))?;
                these.push(r);
            }
            let median = |f: fn(&LoopbackReport) -> f64| {
                let mut v: Vec<f64> = these.iter().map(f).collect();
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let us = median(|r| r.us_per_rt);
            println!(
                "{:<13} {:<10} {:>9.0} {:>9.2} {:>15.2} {:>17.2}",
                t.name(),
                place,
                1e6 / us,
                us,
                median(|r| r.echo_cpu_us_per_rt),
                median(|r| r.client_cpu_us_per_rt)
            );
            runs.extend(these.into_iter().map(|r| (place, r)));
        }
    }
    if let Some(path) = &args.json {
        let runs: Vec<_> = runs
            .iter()
            .map(|(place, r)| serde_json::json!({ "threads": place, "run": r }))
            .collect();
        std::fs::write(path, serde_json::to_string_pretty(&runs)?)
            .with_context(|| format!("cannot write {}", quote(&path)))?;
    }
    Ok(0)
}
