//! `ringio bench server`: every FSM model at several client counts.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use ringio_fsm::Model;
use ringio_lab::plot::{line_chart, LineChart, Series};

use crate::units::parse_duration;

/// `ringio bench server`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Each model and client count gets a fresh `ringio serve` process, loaded \
from this process by the verifying load generator for --duration, then stopped with SIGTERM; \
its CPU time comes from wait4. The load generator shares the machine with the server. \
sequential serves one client at a time and runs only up to 10 clients."
)]
pub struct Args {
    /// Models, comma-separated [default: all].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub models: Vec<String>,
    /// Client counts, comma-separated.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "1,10,100,1000,10000"
    )]
    pub clients: Vec<usize>,
    /// Load per point, e.g. 5s.
    #[arg(long, value_name = "T", default_value = "5s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Actions per write.
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub pipeline: usize,
    /// Write SVG charts (req/s and p99 against clients) into this directory.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Write every point as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub fn run(args: &Args) -> Result<i32> {
    crate::raise_nofile_limit();
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
    let exe = std::env::current_exe()?;
    println!(
        "{:<14} {:>7} {:>10} {:>9} {:>9} {:>9} {:>10} {:>7} {:>8} {:>9}",
        "model",
        "clients",
        "req/s",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "max us",
        "errors",
        "refused",
        "cpu us/req"
    );
    let points = ringio_fsm::bench::run(
        &exe,
        &models,
        &args.clients,
        args.duration,
        args.pipeline,
        &mut |m, n| {
            eprint!("\r\x1b[K{m} with {n} clients...");
        },
    )?;
    eprint!("\r\x1b[K");
    for p in &points {
        let l = &p.load;
        println!(
            "{:<14} {:>7} {:>10.0} {:>9.1} {:>9.1} {:>9.1} {:>10.1} {:>7} {:>8} {:>9.2}",
            p.model,
            p.clients,
            l.resp_per_s,
            l.latency_us.p50,
            l.latency_us.p99,
            l.latency_us.p999,
            l.latency_us.max,
            l.errors,
            l.refused,
            p.cpu_us_per_request
        );
    }
    if let Some(dir) = &args.plot {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create '{}'", dir.display()))?;
        let mut rate: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        let mut p99: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        for p in &points {
            rate.entry(&p.model)
                .or_default()
                .push((p.clients as f64, p.load.resp_per_s));
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
            "command": std::iter::once("ringio".to_string()).chain(std::env::args().skip(1)).collect::<Vec<_>>(),
            "duration_s": args.duration.as_secs_f64(),
            "pipeline": args.pipeline,
            "points": points,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("cannot write '{}'", path.display()))?;
    }
    Ok(if points.iter().any(|p| p.load.errors > 0) {
        1
    } else {
        0
    })
}
