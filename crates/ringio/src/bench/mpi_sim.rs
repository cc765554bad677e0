//! `ringio bench mpi-sim`: `cp --mpi` at 16 to 4,096 virtual ranks, by simulation
//! (ringio-mpi's discrete-event simulator driving the real protocol state machine).

use ringio_mpi::sim::{simulate, SimConfig};

/// `ringio bench mpi-sim`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Virtual rank counts to simulate.
    #[arg(long, value_delimiter = ',', default_values_t = [16u32, 64, 256, 1024, 4096])]
    pub ranks: Vec<u32>,
    /// File creates per second the metadata servers complete, all clients together.
    #[arg(long, default_value_t = 120_000.0)]
    pub mds_ops: f64,
    /// File creates per second one rank can issue.
    #[arg(long, default_value_t = 2_000.0)]
    pub client_ops: f64,
    /// Levels of directories below the root.
    #[arg(long, default_value_t = 5)]
    pub depth: u32,
    /// Mean subdirectories per directory.
    #[arg(long, default_value_t = 8)]
    pub fanout: u32,
    /// Files per directory.
    #[arg(long, default_value_t = 100)]
    pub files_per_dir: u32,
    /// Shortest and longest message delay, microseconds.
    #[arg(long, value_delimiter = ',', default_values_t = [2u64, 20])]
    pub latency_us: Vec<u64>,
    /// Seed of the tree, the delays and the victims.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON object per rank count instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    let [lat_min, lat_max] = args.latency_us[..] else {
        anyhow::bail!("--latency-us takes two values: MIN,MAX");
    };
    if lat_min > lat_max || args.mds_ops <= 0.0 || args.client_ops <= 0.0 {
        anyhow::bail!("--latency-us needs MIN <= MAX, and the rates must be positive");
    }
    if !args.json {
        println!(
            "| ranks | files | time (s) | files/s | MDS limit files/s | steals | steal success \
             | msgs/rank (mean, max) | idle | detect (ms) | shutdown (ms) |"
        );
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    }
    for &ranks in &args.ranks {
        let cfg = SimConfig {
            depth: args.depth,
            fanout: args.fanout,
            files_per_dir: args.files_per_dir,
            latency_min_ns: lat_min * 1000,
            latency_max_ns: lat_max * 1000,
            mds_ops: args.mds_ops,
            client_ops: args.client_ops,
            ..SimConfig::lustre(ranks.max(1), args.seed)
        };
        let r = simulate(&cfg);
        let success = r.steals_ok as f64 / (r.steals.max(1)) as f64;
        if args.json {
            println!(
                "{}",
                serde_json::json!({
                    "ranks": r.ranks, "dirs": r.dirs, "files": r.files,
                    "seconds": r.work_done_ns as f64 / 1e9,
                    "files_per_sec": r.files_per_sec, "mds_files_per_sec": r.mds_files_per_sec,
                    "steals": r.steals, "steals_ok": r.steals_ok,
                    "messages_mean": r.messages_mean, "messages_max": r.messages_max,
                    "idle_fraction": r.idle_fraction,
                    "detect_ms": r.detect_ns as f64 / 1e6,
                    "shutdown_ms": r.shutdown_ns as f64 / 1e6,
                })
            );
        } else {
            println!(
                "| {} | {} | {:.2} | {:.0} | {:.0} | {} | {:.1}% | {:.0}, {} | {:.1}% | {:.2} | {:.2} |",
                r.ranks,
                r.files,
                r.work_done_ns as f64 / 1e9,
                r.files_per_sec,
                r.mds_files_per_sec,
                r.steals,
                success * 100.0,
                r.messages_mean,
                r.messages_max,
                r.idle_fraction * 100.0,
                r.detect_ns as f64 / 1e6,
                r.shutdown_ns as f64 / 1e6,
            );
        }
    }
    Ok(0)
}
