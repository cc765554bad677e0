//! The table of one workload's results, for the terminal or as Markdown (`bench report`).

use super::results::{Stats, ToolRuns};
use super::suite::TreeSize;
use crate::table::Style;

/// The table for one workload: median/min/max/stddev, MiB/s, files/s, peak RSS,
/// verification, and ratios against the fastest verified copier, against `cp`, and against
/// reading the source (`cat`, a reference that is never ranked); then who ranks first, and
/// what `≤N` RSS means where it appears.
pub fn table(results: &[ToolRuns], size: &TreeSize, style: Style) -> String {
    let ranked: Vec<(&ToolRuns, Stats)> = results
        .iter()
        .filter(|r| r.verified())
        .filter_map(|r| r.stats().map(|s| (r, s)))
        .collect();
    let fastest = ranked
        .iter()
        .filter(|(r, _)| !r.reference)
        .map(|(_, s)| s.median)
        .fold(f64::INFINITY, f64::min);
    let median_of = |name: &str| {
        ranked
            .iter()
            .find(|(r, _)| r.tool == name)
            .map(|(_, s)| s.median)
    };
    let (cp, cat) = (median_of("cp"), median_of("cat"));
    let mut out = crate::table::new(&[
        "tool", "median s", "min s", "max s", "stddev", "MiB/s", "files/s", "RSS MiB", "×best",
        "×cp", "×cat", "verified",
    ]);
    crate::table::align_left(&mut out, 11);
    for r in results {
        if let Some(why) = &r.skipped {
            let mut row = vec![r.tool.clone()];
            row.resize(11, String::new());
            row.push(format!("skipped: {why}"));
            out.add_row(row);
            continue;
        }
        let Some(s) = r.stats() else { continue };
        let ok = r.verified() && !r.reference;
        let ratio = |x: Option<f64>| match (ok, x) {
            (true, Some(x)) if x.is_finite() => format!("{:.2}", s.median / x),
            _ => "-".to_string(),
        };
        out.add_row(vec![
            r.tool.clone(),
            format!("{:.3}", s.median),
            format!("{:.3}", s.min),
            format!("{:.3}", s.max),
            format!("{:.3}", s.stddev),
            format!(
                "{:.0}",
                size.bytes as f64 / (1 << 20) as f64 / s.median.max(1e-9)
            ),
            format!("{:.0}", size.files as f64 / s.median.max(1e-9)),
            rss_cell(&s),
            ratio(Some(fastest)),
            ratio(cp),
            ratio(cat),
            verdict(r),
        ]);
    }
    let mut notes = Vec::new();
    let copiers: Vec<&(&ToolRuns, Stats)> = ranked.iter().filter(|(r, _)| !r.reference).collect();
    if let Some(line) = ranking(&copiers) {
        notes.push(line);
    }
    if results
        .iter()
        .filter_map(|r| r.stats())
        .any(|s| rss_cell(&s).starts_with('≤'))
    {
        notes.push(
            "≤N MiB: the tool's peak RSS stayed at or below the harness's own size when it was \
             spawned (the kernel bills a child's memory before exec to it): smaller than N, no \
             closer figure"
                .to_string(),
        );
    }
    with_notes(crate::table::render_as(&out, style), &notes, style)
}

/// A table followed by its notes: a line each in the terminal, a paragraph each in Markdown.
fn with_notes(mut text: String, notes: &[String], style: Style) -> String {
    for note in notes {
        if style == Style::Markdown {
            text.push('\n');
        }
        text.push_str(note);
        text.push('\n');
    }
    text
}

/// Who is fastest, said only where the runs show it: the copier of the lowest median is
/// "fastest" when its slowest run beat every other's fastest, else it is "level" with those
/// whose runs overlap its own.
fn ranking(copiers: &[&(&ToolRuns, Stats)]) -> Option<String> {
    let best = copiers
        .iter()
        .min_by(|a, b| a.1.median.total_cmp(&b.1.median))?;
    if copiers.len() < 2 {
        return None;
    }
    let level: Vec<&str> = copiers
        .iter()
        .filter(|(r, s)| r.tool != best.0.tool && s.min <= best.1.max)
        .map(|(r, _)| r.tool.as_str())
        .collect();
    Some(if level.is_empty() {
        format!(
            "fastest: {} (its slowest run beat every other copier's fastest)",
            best.0.tool
        )
    } else {
        format!(
            "level: {} (lowest median) with {} (their runs overlap)",
            best.0.tool,
            level.join(", ")
        )
    })
}

/// A tool's timing cells in the sync and verify tables: median, min, max and standard
/// deviation in seconds, its ratio to the reference tool (`-`: none), peak RSS, verification.
pub fn timing_cells(r: &ToolRuns, st: &Stats, ratio: Option<f64>) -> [String; 7] {
    [
        format!("{:.3}", st.median),
        format!("{:.3}", st.min),
        format!("{:.3}", st.max),
        format!("{:.3}", st.stddev),
        ratio.map_or("-".to_string(), |x| format!("{x:.2}")),
        rss_cell(st),
        verdict(r),
    ]
}

/// Peak RSS in MiB, or `≤N` when the tool stayed at or below the harness's own size at spawn
/// (the kernel bills a child's pre-exec memory to it).
pub fn rss_cell(s: &Stats) -> String {
    if s.max_rss_kib <= s.rss_floor_kib + 512 {
        format!("≤{:.1}", s.rss_floor_kib as f64 / 1024.0)
    } else {
        format!("{:.1}", s.max_rss_kib as f64 / 1024.0)
    }
}

/// The verification column: `ok`, or `FAILED: ` with the first problem (a reference tool:
/// `reference: reads only`).
pub fn verdict(r: &ToolRuns) -> String {
    if r.reference {
        if r.verified() {
            "reference: reads only"
        } else {
            "reference: FAILED"
        }
        .to_string()
    } else if r.verified() {
        "ok".to_string()
    } else {
        let first = r
            .runs
            .iter()
            .flat_map(|x| x.problems.first())
            .next()
            .cloned()
            .unwrap_or_default();
        format!("FAILED: {first}")
    }
}

/// A bar per verified tool: its median, and the range of its runs.
pub fn bars(results: &[ToolRuns]) -> Vec<crate::plot::Bar> {
    results
        .iter()
        .filter(|r| r.verified())
        .filter_map(|r| {
            let s = r.stats()?;
            Some(crate::plot::Bar {
                label: r.tool.clone(),
                value: s.median,
                range: (s.min, s.max),
            })
        })
        .collect()
}
