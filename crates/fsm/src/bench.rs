//! `ringio bench server`: every model at every client count, each in a fresh server process,
//! loaded by [`crate::load`] from this process. The server's CPU time comes from its rusage.

use std::io::{self, BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Serialize;

use crate::load::{self, LoadOptions, LoadReport};
use crate::Model;

/// One model at one client count.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// The model.
    pub model: String,
    /// Clients.
    pub clients: usize,
    /// What the load saw.
    pub load: LoadReport,
    /// Server CPU time (user + system), seconds.
    pub server_cpu_s: f64,
    /// Server CPU per answered request, microseconds.
    pub cpu_us_per_request: f64,
}

/// The benchmark could not run.
#[derive(Debug, thiserror::Error)]
#[error("{model} with {clients} clients: cannot {op}: {source}")]
pub struct BenchError {
    /// The model.
    pub model: Model,
    /// The client count.
    pub clients: usize,
    /// What failed.
    pub op: &'static str,
    /// Why.
    #[source]
    pub source: io::Error,
}

/// Runs `exe serve` for each model and client count, loads it for `duration`, stops it.
/// `sequential` serves one client at a time, so it runs only up to 10 clients.
pub fn run(
    exe: &Path,
    models: &[Model],
    clients: &[usize],
    duration: Duration,
    pipeline: usize,
    progress: &mut dyn FnMut(Model, usize),
) -> Result<Vec<Point>, BenchError> {
    let mut points = Vec::new();
    for &model in models {
        for &n in clients {
            if model == Model::Sequential && n > 10 {
                continue;
            }
            progress(model, n);
            let err = |op| {
                move |source| BenchError {
                    model,
                    clients: n,
                    op,
                    source,
                }
            };
            let mut child = Command::new(exe)
                .args(["serve", "--model", model.name(), "--addr", "127.0.0.1:0"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .map_err(err("start the server"))?;
            let mut line = String::new();
            BufReader::new(child.stdout.take().expect("piped"))
                .read_line(&mut line)
                .map_err(err("read the server's address"))?;
            let addr: SocketAddr = line
                .trim()
                .strip_prefix("listening on ")
                .and_then(|a| a.parse().ok())
                .ok_or_else(|| {
                    err("read the server's address")(io::Error::other(format!("got {line:?}")))
                })?;
            let opts = LoadOptions {
                addr,
                clients: n,
                duration,
                pipeline,
                rate: None,
                connect_concurrency: 256,
            };
            let report = load::run(&opts);
            // SAFETY: signalling our own child, then reaping it with wait4 for its rusage.
            let (status, ru) = unsafe {
                libc::kill(child.id() as i32, libc::SIGTERM);
                let mut status = 0;
                let mut ru: libc::rusage = std::mem::zeroed();
                libc::wait4(child.id() as i32, &mut status, 0, &mut ru);
                (status, ru)
            };
            let report = report.map_err(|e| err("load it")(io::Error::other(e)))?;
            if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
                return Err(err("stop the server")(io::Error::other(format!(
                    "it ended with status {status:#x}"
                ))));
            }
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            let cpu = secs(ru.ru_utime) + secs(ru.ru_stime);
            points.push(Point {
                model: model.name().to_string(),
                clients: n,
                cpu_us_per_request: cpu * 1e6 / (report.responses.max(1)) as f64,
                server_cpu_s: cpu,
                load: report,
            });
        }
    }
    Ok(points)
}
