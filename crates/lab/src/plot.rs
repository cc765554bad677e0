//! SVG charts, the one plotting mechanism every command uses: a line chart (one line per
//! series, optional log axes) and a bar chart.

use ringio_copy::quote::quote;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

/// A chart could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write plot {}: {message}", quote(&path))]
pub struct PlotError {
    /// The SVG file.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

/// One named line of points.
#[derive(Debug, Clone)]
pub struct Series {
    /// The legend entry.
    pub name: String,
    /// (x, y) points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// A line chart.
#[derive(Debug, Clone)]
pub struct LineChart<'a> {
    /// The caption.
    pub title: &'a str,
    /// The x axis label.
    pub x_label: &'a str,
    /// The y axis label.
    pub y_label: &'a str,
    /// Logarithmic x axis (every x must be > 0).
    pub log_x: bool,
    /// Logarithmic y axis (every y must be > 0).
    pub log_y: bool,
    /// The lines.
    pub series: &'a [Series],
}

const SIZE: (u32, u32) = (900, 560);

fn palette(i: usize) -> RGBColor {
    const COLORS: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    COLORS[i % COLORS.len()]
}

/// The range covering `values`, padded a little; for a log axis, a positive range.
fn span(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (1.0, 10.0);
    }
    if log {
        (lo / 1.5, hi * 1.5)
    } else {
        let pad = ((hi - lo) * 0.05).max(hi.abs() * 0.05).max(1e-9);
        ((lo - pad).min(0.0_f64.max(lo - pad)), hi + pad)
    }
}

/// Writes `chart` as an SVG file at `path`.
pub fn line_chart(path: &Path, chart: &LineChart<'_>) -> Result<(), PlotError> {
    let err = |e: &dyn std::fmt::Display| PlotError {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let xs = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0));
    let ys = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1));
    let (x0, x1) = span(xs, chart.log_x);
    let (y0, y1) = span(ys, chart.log_y);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(chart.title, ("sans-serif", 20))
        .margin(12)
        // Room for the last x label, centred on the axis's end.
        .margin_right(40)
        .x_label_area_size(40)
        .y_label_area_size(70);
    // plotters types the chart by its axis kinds, so each combination is built on its own.
    macro_rules! draw {
        ($x:expr, $y:expr) => {{
            let mut c = builder.build_cartesian_2d($x, $y).map_err(|e| err(&e))?;
            c.configure_mesh()
                .x_desc(chart.x_label)
                .y_desc(chart.y_label)
                .x_label_formatter(&|v| tick(*v))
                .y_label_formatter(&|v| tick(*v))
                .draw()
                .map_err(|e| err(&e))?;
            for (i, s) in chart.series.iter().enumerate() {
                let color = palette(i);
                let points = s
                    .points
                    .iter()
                    .copied()
                    .filter(|(x, y)| (!chart.log_x || *x > 0.0) && (!chart.log_y || *y > 0.0));
                c.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                    .map_err(|e| err(&e))?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                c.draw_series(points.map(|p| Circle::new(p, 3, color.filled())))
                    .map_err(|e| err(&e))?;
            }
            c.configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| err(&e))?;
        }};
    }
    match (chart.log_x, chart.log_y) {
        (false, false) => draw!(x0..x1, y0..y1),
        (true, false) => draw!((x0..x1).log_scale(), y0..y1),
        (false, true) => draw!(x0..x1, (y0..y1).log_scale()),
        (true, true) => draw!((x0..x1).log_scale(), (y0..y1).log_scale()),
    }
    root.present().map_err(|e| err(&e))
}

/// One bar: a tool's median, with the range of its runs drawn as a whisker.
#[derive(Debug, Clone)]
pub struct Bar {
    /// The label beside it.
    pub label: String,
    /// Its length (the median).
    pub value: f64,
    /// The fastest and slowest run, drawn as a line across the bar's end.
    pub range: (f64, f64),
}

/// Writes a chart of horizontal bars, the first at the top, each label beside its bar (so
/// that no two labels overlap, however many and however long), as an SVG file at `path`.
pub fn bar_chart(path: &Path, title: &str, x_label: &str, bars: &[Bar]) -> Result<(), PlotError> {
    let err = |e: &dyn std::fmt::Display| PlotError {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let top = bars
        .iter()
        .map(|b| b.value.max(b.range.1))
        .fold(0.0_f64, f64::max)
        .max(1e-9)
        * 1.08;
    let n = bars.len().max(1);
    // Row i (from the top) sits in segment n-1-i: plotters counts up from the bottom.
    let row = |i: usize| n - 1 - i;
    let longest = bars.iter().map(|b| b.label.len()).max().unwrap_or(4) as u32;
    let height = (90 + 34 * n as u32).max(240);
    let root = SVGBackend::new(path, (SIZE.0, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .margin_right(40)
        .x_label_area_size(40)
        .y_label_area_size(20 + 8 * longest)
        .build_cartesian_2d(0.0..top, (0..n - 1).into_segmented())
        .map_err(|e| err(&e))?;
    c.configure_mesh()
        .disable_y_mesh()
        .x_desc(x_label)
        .x_label_formatter(&|v| tick(*v))
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(r) if *r < n => bars
                .get(row(*r))
                .map(|b| b.label.clone())
                .unwrap_or_default(),
            _ => String::new(),
        })
        .draw()
        .map_err(|e| err(&e))?;
    c.draw_series(bars.iter().enumerate().map(|(i, b)| {
        let mut bar = Rectangle::new(
            [
                (0.0, SegmentValue::Exact(row(i))),
                (b.value, SegmentValue::Exact(row(i) + 1)),
            ],
            palette(i).filled(),
        );
        bar.set_margin(6, 6, 0, 0);
        bar
    }))
    .map_err(|e| err(&e))?;
    c.draw_series(bars.iter().enumerate().map(|(i, b)| {
        PathElement::new(
            vec![
                (b.range.0, SegmentValue::CenterOf(row(i))),
                (b.range.1, SegmentValue::CenterOf(row(i))),
            ],
            BLACK.stroke_width(2),
        )
    }))
    .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}

/// An axis tick as a reader writes it: `1k`, not `1000.0`; `0.25`; `2.5M` for millions.
fn tick(v: f64) -> String {
    let trim = |t: String| {
        if t.contains('.') {
            t.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            t
        }
    };
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(format!("{:.2}", v / 1e6)))
    } else if a >= 1e3 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else {
        trim(format!("{v:.3}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_line_and_bar_charts() {
        let dir = tempfile::tempdir().unwrap();
        let series = [
            Series {
                name: "a".into(),
                points: vec![(1.0, 2.0), (10.0, 20.0), (100.0, 15.0)],
            },
            Series {
                name: "b".into(),
                points: vec![(1.0, 1.0), (100.0, 30.0)],
            },
        ];
        for (log_x, log_y) in [(false, false), (true, false), (true, true)] {
            let path = dir.path().join(format!("line-{log_x}-{log_y}.svg"));
            let chart = LineChart {
                title: "t",
                x_label: "x",
                y_label: "y",
                log_x,
                log_y,
                series: &series,
            };
            line_chart(&path, &chart).unwrap();
            let svg = std::fs::read_to_string(&path).unwrap();
            assert!(svg.starts_with("<svg") && svg.contains("polyline"), "{svg}");
        }
        let path = dir.path().join("bar.svg");
        let bar = |label: &str, value, range| Bar {
            label: label.into(),
            value,
            range,
        };
        bar_chart(
            &path,
            "t",
            "s",
            &[bar("cp", 2.0, (1.5, 2.5)), bar("ringio", 1.0, (0.9, 1.2))],
        )
        .unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("ringio") && svg.contains("<rect"));
    }

    #[test]
    fn ticks_read_as_numbers_are_written() {
        for (v, text) in [
            (1000.0, "1k"),
            (999.0, "999"),
            (100000.0, "100k"),
            (12500.0, "12.5k"),
            (10_000_000.0, "10M"),
            (0.25, "0.25"),
            (0.5, "0.5"),
            (3.0, "3"),
            (123.4, "123"),
            (0.0, "0"),
        ] {
            assert_eq!(tick(v), text, "{v}");
        }
    }

    #[test]
    fn unwritable_path_is_an_error() {
        let series = [Series {
            name: "a".into(),
            points: vec![(1.0, 1.0)],
        }];
        let chart = LineChart {
            title: "t",
            x_label: "x",
            y_label: "y",
            log_x: false,
            log_y: false,
            series: &series,
        };
        let e = line_chart(Path::new("/nonexistent/dir/x.svg"), &chart).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/dir/x.svg"));
    }
}
