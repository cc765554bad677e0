//! `ringio bench report`: the tables of `bench copy`, `bench sync` and `bench server` made again
//! from their JSON documents, as Markdown, so that a table in the docs is its data's and
//! nobody's copy of it. `--update FILE.md` regenerates the blocks a Markdown file marks;
//! `--check FILE.md` fails, naming the block, where one differs from what its JSON gives.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Parser;
use ringio_copy::quote::quote;
use ringio_fsm::bench::Point;
use ringio_lab::copybench::{self, Stats, ToolRuns, TreeSize};
use ringio_lab::machine::Machine;
use ringio_lab::syncbench::{sync_table, ScenarioRuns};
use ringio_lab::table::Style;
use ringio_lab::verifybench::{verify_table, AlgoRuns};
use serde::Deserialize;

/// The line that opens a marked block; what follows it on the line is this command's arguments.
const OPEN: &str = "<!-- bench report ";
/// The line that closes it.
const CLOSE: &str = "<!-- end bench report -->";

/// `ringio bench report`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "A Markdown file marks a block as

  <!-- bench report bench/2026-11-25-suite-warm.json --workload 1g,src-tree -->
  (the tables, written by --update)
  <!-- end bench report -->

where what follows `bench report` are this command's arguments, paths relative to the Markdown \
file. --update rewrites every block's tables from its JSON; --check compares them and exits 1 \
naming each block that differs (a table edited by hand, or JSON changed since).")]
pub struct Args {
    /// JSON documents written by `bench copy`, `bench sync`, `bench verify` or `bench server`
    /// with --json.
    #[arg(value_name = "JSON", required_unless_present_any = ["update", "check"])]
    pub files: Vec<PathBuf>,
    /// Only these workloads of a copy or sync document, comma-separated.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub workload: Vec<String>,
    /// One row per workload (and sync scenario) instead of the full tables: TOOL's median and
    /// range against the fastest other verified tool's, and whether their runs overlap.
    #[arg(long, value_name = "TOOL")]
    pub summary: Option<String>,
    /// With --summary: compare with the fastest of these tools only, comma-separated.
    #[arg(
        long,
        value_name = "TOOLS",
        value_delimiter = ',',
        requires = "summary"
    )]
    pub against: Vec<String>,
    /// Regenerate each marked block of this Markdown file from its JSON.
    #[arg(long, value_name = "MD", conflicts_with_all = ["check", "files", "workload", "summary"])]
    pub update: Option<PathBuf>,
    /// Check each marked block of this Markdown file against its JSON: exit 1 if one differs.
    #[arg(long, value_name = "MD", conflicts_with_all = ["files", "workload", "summary"])]
    pub check: Option<PathBuf>,
}

/// A marker's arguments, parsed as the command's own.
#[derive(Debug, Parser)]
#[command(name = "bench report", no_binary_name = true)]
struct Marker {
    #[command(flatten)]
    args: Args,
}

pub fn run(args: &Args) -> Result<i32> {
    if let Some(md) = &args.update {
        let text = read(md)?;
        let blocks = blocks(md, &text)?;
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for b in &blocks {
            out.push_str(&text[at..b.body.start]);
            out.push_str(&b.wanted);
            at = b.body.end;
        }
        out.push_str(&text[at..]);
        if out != text {
            std::fs::write(md, out).with_context(|| format!("cannot write {}", quote(md)))?;
        }
        eprintln!("{}: {} block(s) regenerated", md.display(), blocks.len());
        return Ok(0);
    }
    if let Some(md) = &args.check {
        let text = read(md)?;
        let blocks = blocks(md, &text)?;
        let stale: Vec<&Block> = blocks
            .iter()
            .filter(|b| text[b.body.clone()] != b.wanted)
            .collect();
        for b in &stale {
            eprintln!(
                "{}:{}: the tables differ from what `ringio bench report {}` gives: run \
                 `ringio bench report --update {}`",
                md.display(),
                b.line,
                b.command,
                md.display()
            );
        }
        if stale.is_empty() {
            eprintln!(
                "{}: {} block(s) agree with their JSON",
                md.display(),
                blocks.len()
            );
        }
        return Ok(if stale.is_empty() { 0 } else { 1 });
    }
    let mut text = String::new();
    for (i, path) in args.files.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        text.push_str(&report(path, &path.display().to_string(), args)?);
    }
    print!("{text}");
    Ok(0)
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", quote(path)))
}

/// A marked block of a Markdown file: where its body lies, and what its JSON gives.
struct Block {
    /// The line of its opening marker, from 1.
    line: usize,
    /// Its arguments, as written.
    command: String,
    /// The bytes between the two markers' lines.
    body: std::ops::Range<usize>,
    /// What they should be.
    wanted: String,
}

/// Every marked block of `text` (the Markdown file `md`), each with its regenerated body.
fn blocks(md: &Path, text: &str) -> Result<Vec<Block>> {
    let base = md.parent().unwrap_or(Path::new(""));
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String, usize)> = None;
    let mut offset = 0;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let (start, end) = (offset, offset + line.len());
        offset = end;
        let trimmed = line.trim_end();
        if let Some(rest) = trimmed.strip_prefix(OPEN) {
            if let Some((line, ..)) = open {
                bail!("{}:{line}: a block opened and never closed", md.display());
            }
            let Some(command) = rest.strip_suffix("-->") else {
                bail!("{}:{}: the marker does not end in -->", md.display(), n + 1);
            };
            open = Some((n + 1, command.trim().to_string(), end));
        } else if trimmed == CLOSE {
            let Some((line, command, body_start)) = open.take() else {
                bail!(
                    "{}:{}: a block closed and never opened",
                    md.display(),
                    n + 1
                );
            };
            let marker = Marker::try_parse_from(command.split_whitespace())
                .map_err(|e| anyhow::anyhow!("{}:{line}: {}", md.display(), e.render()))?;
            let m = marker.args;
            if m.files.is_empty() || m.update.is_some() || m.check.is_some() {
                bail!(
                    "{}:{line}: a block names JSON files and nothing else",
                    md.display()
                );
            }
            let mut wanted = String::from("\n");
            for (i, file) in m.files.iter().enumerate() {
                if i > 0 {
                    wanted.push('\n');
                }
                let doc = report(&base.join(file), &file.display().to_string(), &m)
                    .with_context(|| format!("{}:{line}", md.display()))?;
                wanted.push_str(&doc);
            }
            wanted.push('\n');
            blocks.push(Block {
                line,
                command,
                body: body_start..start,
                wanted,
            });
        }
    }
    if let Some((line, ..)) = open {
        bail!("{}:{line}: a block opened and never closed", md.display());
    }
    Ok(blocks)
}

/// A JSON document of `bench copy`, `bench sync` (`workloads`) or `bench server` (`medians`).
#[derive(Debug, Deserialize)]
struct Document {
    command: Vec<String>,
    unix_time: Option<i64>,
    cache: Option<String>,
    runs: Option<usize>,
    #[serde(default)]
    warmup: usize,
    machine: Option<Machine>,
    workloads: Option<Vec<Workload>>,
    medians: Option<Vec<Point>>,
    rounds: Option<usize>,
    duration_s: Option<f64>,
    server_cpu: Option<usize>,
    load_cpu: Option<usize>,
    machine_note: Option<String>,
}

/// One workload of a copy or sync document.
#[derive(Debug, Deserialize)]
struct Workload {
    workload: String,
    description: String,
    tree: TreeSize,
    results: Option<Vec<ToolRuns>>,
    scenarios: Option<Vec<ScenarioRuns>>,
    /// `bench verify`: each algorithm's checkers.
    algos: Option<Vec<AlgoRuns>>,
}

/// The Markdown report of the document at `path` (named `link` in the text): its tables, or
/// the summary, of the workloads `pick` names (all when it names none).
fn report(path: &Path, link: &str, pick: &Args) -> Result<String> {
    let only = &pick.workload;
    let text = read(path)?;
    let not_ours = || {
        format!(
            "{} is not a JSON document of `ringio bench copy`, `sync`, `verify` or `server`",
            quote(path)
        )
    };
    let doc: Document = serde_json::from_str(&text).with_context(not_ours)?;
    let mut out = about(&doc, link);
    if let Some(points) = &doc.medians {
        out.push('\n');
        out.push_str(&super::server::table(points, Style::Markdown));
        return Ok(out);
    }
    let Some(workloads) = &doc.workloads else {
        bail!(not_ours());
    };
    for name in only {
        if !workloads.iter().any(|w| &w.workload == name) {
            let known: Vec<&str> = workloads.iter().map(|w| w.workload.as_str()).collect();
            bail!(
                "{} has no workload {name} (it has {})",
                quote(path),
                known.join(", ")
            );
        }
    }
    let picked = workloads
        .iter()
        .filter(|w| only.is_empty() || only.contains(&w.workload));
    if let Some(tool) = &pick.summary {
        out.push('\n');
        out.push_str(&summary(picked, tool, &pick.against)?);
        return Ok(out);
    }
    for w in picked {
        let t = &w.tree;
        out.push_str(&format!(
            "\n**{}** ({}): {}, {}, {:.1} MiB\n\n",
            w.workload,
            w.description,
            count(t.files, "file"),
            count(t.dirs, "dir"),
            t.bytes as f64 / (1 << 20) as f64
        ));
        match (&w.results, &w.scenarios) {
            (Some(results), _) => out.push_str(&copybench::table(results, t, Style::Markdown)),
            (None, Some(scenarios)) => out.push_str(&sync_table(scenarios, Style::Markdown)),
            (None, None) => match &w.algos {
                Some(algos) => out.push_str(&verify_table(algos, Style::Markdown)),
                None => bail!(not_ours()),
            },
        }
    }
    Ok(out)
}

/// One row per workload (and scenario): `tool` against the fastest other verified copier (of
/// `against`, when it names some).
fn summary<'w>(
    workloads: impl Iterator<Item = &'w Workload>,
    tool: &str,
    against: &[String],
) -> Result<String> {
    let range = |s: &Stats| format!("{:.3} ({:.3}–{:.3})", s.median, s.min, s.max);
    let mut rows = Vec::new();
    let mut sync = false;
    for w in workloads {
        let sets: Vec<(&str, &[ToolRuns])> = match (&w.results, &w.scenarios) {
            (Some(results), _) => vec![("", results)],
            (None, Some(scenarios)) => {
                sync = true;
                scenarios
                    .iter()
                    .filter(|s| s.skipped.is_none())
                    .map(|s| (s.scenario.as_str(), s.results.as_slice()))
                    .collect()
            }
            (None, None) => Vec::new(),
        };
        for (scenario, results) in sets {
            let Some(mine) = results.iter().find(|r| r.tool == tool) else {
                bail!("{}: no tool {tool} in this document", w.workload);
            };
            let Some(s) = mine.stats() else { continue };
            let best = results
                .iter()
                .filter(|r| r.tool != tool && !r.reference && r.verified())
                .filter(|r| against.is_empty() || against.contains(&r.tool))
                .filter_map(|r| Some((r, r.stats()?)))
                .min_by(|a, b| a.1.median.total_cmp(&b.1.median));
            let mut row = vec![w.workload.clone(), scenario.to_string(), range(&s)];
            match best {
                _ if !mine.verified() => {
                    row.extend(["", "", ""].map(String::from));
                    row.push(copybench::verdict(mine));
                }
                None => row.extend(["-", "", "", ""].map(String::from)),
                Some((r, b)) => row.extend([
                    r.tool.clone(),
                    range(&b),
                    format!("{:.2}", s.median / b.median.max(1e-9)),
                    if s.max < b.min {
                        "all faster"
                    } else if s.min > b.max {
                        "all slower"
                    } else {
                        "overlap"
                    }
                    .to_string(),
                ]),
            }
            row.push(copybench::rss_cell(&s));
            if !sync {
                row.remove(1);
            }
            rows.push(row);
        }
    }
    let (mine, rss) = (format!("{tool} s (min–max)"), format!("{tool} RSS MiB"));
    let mut header = vec![
        "workload",
        "scenario",
        &mine,
        "fastest other",
        "its s (min–max)",
    ];
    header.extend(["×", "runs", &rss]);
    let mut left = vec![3, 6];
    if sync {
        left.push(1);
    } else {
        header.remove(1);
        left = vec![2, 5];
    }
    let mut table = ringio_lab::table::new(&header);
    for i in left {
        ringio_lab::table::align_left(&mut table, i);
    }
    for row in rows {
        table.add_row(row);
    }
    Ok(ringio_lab::table::render_as(&table, Style::Markdown))
}

/// `n` things, in the singular for one.
fn count(n: u64, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}

/// The paragraph above the tables: the command, when, the cache, the runs, the machine, and
/// the JSON's link.
fn about(h: &Document, link: &str) -> String {
    let mut facts = Vec::new();
    if let Some(t) = h.unix_time {
        let iso = ringio_copy::manifest::utc_iso8601(t, 0);
        facts.push(format!("{} {} UTC", &iso[..10], &iso[11..16]));
    }
    if let Some(cache) = &h.cache {
        facts.push(format!("{cache} cache"));
    }
    if let Some(runs) = h.runs.or(h.rounds) {
        let what = if h.medians.is_some() {
            "rounds, medians shown"
        } else {
            "timed runs per tool, round-robin"
        };
        let warmup = if h.warmup > 0 {
            format!(" after {} untimed", h.warmup)
        } else {
            String::new()
        };
        facts.push(format!("{runs} {what}{warmup}"));
    }
    if let Some(d) = h.duration_s {
        facts.push(format!("{d} s per point"));
    }
    if h.medians.is_some() {
        let cpu = |c: Option<usize>| c.map_or("any CPU".to_string(), |c| format!("CPU {c}"));
        facts.push(format!(
            "server on {}, load on {}",
            cpu(h.server_cpu),
            cpu(h.load_cpu)
        ));
    }
    if let Some(m) = &h.machine {
        facts.push(format!(
            "{} ×{}, {:.1} GiB, Linux {}, {} on {}",
            m.cpu,
            m.cpus,
            m.memory_mib as f64 / 1024.0,
            m.kernel,
            m.filesystem,
            m.device
        ));
    }
    if let Some(note) = &h.machine_note {
        facts.push(note.clone());
    }
    facts.push(format!("[JSON]({link})"));
    format!("`{}`: {}\n", shell_words(&h.command), facts.join(", "))
}

/// The command line as a shell would take it back.
fn shell_words(words: &[String]) -> String {
    let plain = |w: &str| {
        !w.is_empty()
            && w.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_./:=,+-@%".contains(&b))
    };
    words
        .iter()
        .map(|w| {
            if plain(w) {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::shell_words;

    #[test]
    fn words_a_shell_would_split_are_quoted() {
        let words = ["ringio", "bench", "--tools", "cmd:a=./a.sh x", "it's"].map(String::from);
        assert_eq!(
            shell_words(&words),
            r"ringio bench --tools 'cmd:a=./a.sh x' 'it'\''s'"
        );
    }
}
