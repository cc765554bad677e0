//! What a benchmark yields: each timed run, each tool's runs on a workload, and their
//! statistics.

use ringio_copy::verify::VerifyOptions;
use serde::{Deserialize, Serialize};

use ringio_base::child::Usage;

/// One timed copy.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    /// Wall seconds.
    pub seconds: f64,
    /// The child's rusage.
    pub usage: Usage,
    /// Exit status (None: killed by a signal).
    pub exit_code: Option<i32>,
    /// Empty when the copy is right; otherwise what is wrong.
    pub problems: Vec<String>,
    /// What the copy was checked for: `content` (names, types, sizes, every byte, symlink
    /// targets) or `content+metadata` (and the attributes in `metadata_checked`).
    #[serde(default)]
    pub verified: String,
    /// The metadata compared on top of content: mode, ownership, mtime, xattrs, hard-links,
    /// sparseness.
    #[serde(default)]
    pub metadata_checked: Vec<String>,
    /// The outcome: the tool exited 0 and the copy passed every check.
    #[serde(default)]
    pub ok: bool,
}

/// The metadata `keeps` compares beyond content, by name.
pub(super) fn metadata_checked(keeps: &VerifyOptions) -> Vec<String> {
    [
        (keeps.mode, "mode"),
        (keeps.ownership, "ownership"),
        (keeps.mtime, "mtime"),
        (keeps.xattrs, "xattrs"),
        (keeps.hard_links, "hard-links"),
        (keeps.sparseness, "sparseness"),
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .map(|(_, name)| name.to_string())
    .collect()
}

/// A tool's runs on one workload.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolRuns {
    /// The tool.
    pub tool: String,
    /// Why it did not run (not installed).
    pub skipped: Option<String>,
    /// A reference that reads the source and copies nothing (`cat`): not verified, not ranked.
    #[serde(default)]
    pub reference: bool,
    /// Its timed runs.
    pub runs: Vec<Run>,
}

impl ToolRuns {
    /// True when every run exited 0 and copied right.
    pub fn verified(&self) -> bool {
        !self.runs.is_empty()
            && self
                .runs
                .iter()
                .all(|r| r.exit_code == Some(0) && r.problems.is_empty())
    }

    /// Summary statistics of the wall times.
    pub fn stats(&self) -> Option<Stats> {
        if self.runs.is_empty() {
            return None;
        }
        let mut t: Vec<f64> = self.runs.iter().map(|r| r.seconds).collect();
        t.sort_by(f64::total_cmp);
        let mean = t.iter().sum::<f64>() / t.len() as f64;
        let var = t.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / t.len() as f64;
        let mut rss: Vec<u64> = self.runs.iter().map(|r| r.usage.max_rss_kib).collect();
        rss.sort_unstable();
        Some(Stats {
            median: t[t.len() / 2],
            min: t[0],
            max: t[t.len() - 1],
            stddev: var.sqrt(),
            max_rss_kib: rss[rss.len() - 1],
            rss_floor_kib: self
                .runs
                .iter()
                .map(|r| r.usage.rss_floor_kib)
                .max()
                .unwrap_or(0),
        })
    }
}

/// Wall-time statistics of a tool's runs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Stats {
    /// Median seconds.
    pub median: f64,
    /// Fastest run.
    pub min: f64,
    /// Slowest run.
    pub max: f64,
    /// Standard deviation.
    pub stddev: f64,
    /// Peak RSS over the runs, KiB.
    pub max_rss_kib: u64,
    /// The harness's own size at spawn, KiB: a peak at or below it means "no more than this".
    pub rss_floor_kib: u64,
}
