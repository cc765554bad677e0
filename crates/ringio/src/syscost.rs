//! `ringio syscost`: nanoseconds per system call, over growing call counts.

use std::path::PathBuf;

use anyhow::Result;
use ringio_lab::plot::{line_chart, LineChart, Series};
use ringio_lab::syscost::{self, Call};

/// `ringio syscost`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Calls: a 1-byte pread of a cached file, lseek(SEEK_CUR), getppid, an \
io_uring NOP submitted and waited for alone, and NOPs 32 per io_uring_enter. Counts run from \
10^3 to --max-calls by tens."
)]
pub struct Args {
    /// The largest call count measured.
    #[arg(long, value_name = "N", default_value_t = 10_000_000)]
    pub max_calls: u64,
    /// Write the table as an SVG chart.
    #[arg(long, value_name = "SVG")]
    pub plot: Option<PathBuf>,
}

pub fn run(args: &Args) -> Result<i32> {
    print!("{:>10}", "calls");
    for c in Call::ALL {
        print!(" {:>14}", c.name());
    }
    println!("   (ns per call)");
    let rows = syscost::table(args.max_calls, &mut |row| {
        print!("{:>10}", row.calls);
        for ns in &row.ns {
            print!(" {ns:>14.1}");
        }
        println!();
    })?;
    if let Some(svg) = &args.plot {
        let series: Vec<Series> = Call::ALL
            .iter()
            .enumerate()
            .map(|(i, c)| Series {
                name: c.name().to_string(),
                points: rows.iter().map(|r| (r.calls as f64, r.ns[i])).collect(),
            })
            .collect();
        line_chart(
            svg,
            &LineChart {
                title: "ringio syscost: ns per call",
                x_label: "calls",
                y_label: "ns per call",
                log_x: true,
                log_y: true,
                series: &series,
            },
        )?;
        eprintln!("wrote {}", svg.display());
    }
    Ok(0)
}
