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
        .x_label_area_size(40)
        .y_label_area_size(70);
    // plotters types the chart by its axis kinds, so each combination is built on its own.
    macro_rules! draw {
        ($x:expr, $y:expr) => {{
            let mut c = builder.build_cartesian_2d($x, $y).map_err(|e| err(&e))?;
            c.configure_mesh()
                .x_desc(chart.x_label)
                .y_desc(chart.y_label)
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

/// Writes a bar chart of `(label, value)` bars as an SVG file at `path`.
pub fn bar_chart(
    path: &Path,
    title: &str,
    y_label: &str,
    bars: &[(String, f64)],
) -> Result<(), PlotError> {
    let err = |e: &dyn std::fmt::Display| PlotError {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let top = bars.iter().map(|b| b.1).fold(0.0_f64, f64::max).max(1e-9) * 1.1;
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d((0..bars.len()).into_segmented(), 0.0..top)
        .map_err(|e| err(&e))?;
    c.configure_mesh()
        .disable_x_mesh()
        .y_desc(y_label)
        .x_labels(bars.len().max(1))
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => bars.get(*i).map(|b| b.0.clone()).unwrap_or_default(),
            _ => String::new(),
        })
        .draw()
        .map_err(|e| err(&e))?;
    c.draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
        let mut bar = Rectangle::new(
            [
                (SegmentValue::Exact(i), 0.0),
                (SegmentValue::Exact(i + 1), *v),
            ],
            palette(i).filled(),
        );
        bar.set_margin(0, 0, 8, 8);
        bar
    }))
    .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
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
        bar_chart(
            &path,
            "t",
            "s",
            &[("cp".into(), 2.0), ("ringio".into(), 1.0)],
        )
        .unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("ringio") && svg.contains("<rect"));
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
