//! Plots of per-packet latency (SVG over time; PNG panels over packet index), with events
//! (updates) marked.

use plotters::prelude::*;
use std::path::Path;

pub struct Series {
    pub name: String,
    pub color: RGBColor,
    /// (time in ms, latency in us)
    pub points: Vec<(f64, f64)>,
}

pub struct Marker {
    /// Position on the x axis (ms, or a packet index in panels).
    pub at_ms: f64,
    pub label: String,
}

/// Keep at most `max` points, evenly spaced, plus every point in `keep` (a time window).
pub fn thin(points: &[(f64, f64)], max: usize, keep: Option<(f64, f64)>) -> Vec<(f64, f64)> {
    let stride = points.len().div_ceil(max.max(1)).max(1);
    points
        .iter()
        .enumerate()
        .filter(|(i, p)| i % stride == 0 || keep.is_some_and(|(a, b)| p.0 >= a && p.0 <= b))
        .map(|(_, p)| *p)
        .collect()
}

pub fn latency_plot(
    path: &Path,
    title: &str,
    series: &[Series],
    markers: &[Marker],
) -> anyhow::Result<()> {
    register_font()?;
    let root = SVGBackend::new(path, (1100, 560)).into_drawing_area();
    draw_latency(&root, title, "time since start (ms)", series, markers)?;
    root.present()?;
    Ok(())
}

/// One panel of a multi-panel figure.
pub struct Panel {
    pub title: String,
    pub series: Vec<Series>,
    pub markers: Vec<Marker>,
}

/// The font plots are drawn with (DejaVu Sans, Bitstream Vera license: assets/fonts/), built
/// in so that plots need no fonts installed on the machine.
const FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

pub fn register_font() -> anyhow::Result<()> {
    static DONE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok()
    });
    anyhow::ensure!(ok, "the built-in font could not be loaded");
    Ok(())
}

/// A PNG of `panels` in a grid of `cols` columns, x = packet index.
pub fn panels_png(path: &Path, title: &str, panels: &[Panel], cols: usize) -> anyhow::Result<()> {
    register_font()?;
    let cols = cols.max(1);
    let rows = panels.len().div_ceil(cols).max(1);
    let root =
        BitMapBackend::new(path, (760 * cols as u32, 420 * rows as u32 + 40)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, body) = root.split_vertically(40);
    top.titled(title, ("sans-serif", 24))?;
    for (area, p) in body.split_evenly((rows, cols)).iter().zip(panels) {
        draw_latency(area, &p.title, "packet index", &p.series, &p.markers)?;
    }
    root.present()?;
    Ok(())
}

fn draw_latency<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    x_desc: &str,
    series: &[Series],
    markers: &[Marker],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let all = series.iter().flat_map(|s| s.points.iter());
    let (mut tmax, mut lmin, mut lmax) = (1.0f64, f64::MAX, 0.0f64);
    for &(t, l) in all {
        tmax = tmax.max(t);
        lmin = lmin.min(l);
        lmax = lmax.max(l);
    }
    if lmin == f64::MAX {
        (lmin, lmax) = (0.1, 10.0);
    }
    let (lo, hi) = ((lmin * 0.8).max(0.01), (lmax * 1.5).max(lmin * 2.0));
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..tmax * 1.02, (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_desc("latency (us, log)")
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for s in series {
        let color = s.color;
        chart
            .draw_series(
                s.points.iter().map(|&(t, l)| Circle::new((t, l.max(lo)), 1, color.filled())),
            )?
            .label(&s.name)
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
    }
    for m in markers {
        chart.draw_series(LineSeries::new([(m.at_ms, lo), (m.at_ms, hi)], RED.stroke_width(2)))?;
        chart.draw_series(std::iter::once(Text::new(
            m.label.clone(),
            (m.at_ms, hi / 1.3),
            ("sans-serif", 15).into_font().color(&RED),
        )))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// One line of a line plot.
pub struct Line {
    pub name: String,
    pub color: RGBColor,
    /// Dashed lines for a second family (e.g. two workers).
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
}

/// A PNG line plot (x and y linear), with a legend.
pub fn lines_png(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
) -> anyhow::Result<()> {
    register_font()?;
    let root = BitMapBackend::new(path, (1100, 620)).into_drawing_area();
    root.fill(&WHITE)?;
    let pts = lines.iter().flat_map(|l| l.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1.max(x0 + 1.0), 0f64..(y1 * 1.15).max(1.0))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|x| format!("2^{x:.0}"))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for l in lines {
        let color = l.color;
        let style = color.stroke_width(2);
        if l.dashed {
            chart
                .draw_series(DashedLineSeries::new(l.points.iter().copied(), 8, 5, style))?
                .label(&l.name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 8, y)], color.stroke_width(2))
                });
        } else {
            chart
                .draw_series(LineSeries::new(l.points.iter().copied(), style))?
                .label(&l.name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart.draw_series(l.points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// One panel of a timeline: its y axis and lines.
pub struct TimelinePanel {
    pub y_desc: String,
    pub lines: Vec<Line>,
}

/// A PNG of panels stacked over one shared time axis (ms), with events marked in each.
pub fn timeline_png(
    path: &Path,
    title: &str,
    panels: &[TimelinePanel],
    markers: &[Marker],
) -> anyhow::Result<()> {
    register_font()?;
    let height = 300 * panels.len().max(1) as u32 + 50;
    let root = BitMapBackend::new(path, (1100, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 22))?;
    let x1 = panels
        .iter()
        .flat_map(|p| p.lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)))
        .fold(1.0f64, f64::max);
    for (area, panel) in root.split_evenly((panels.len().max(1), 1)).iter().zip(panels) {
        let y1 = panel
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .fold(0.0f64, f64::max)
            .max(1e-9)
            * 1.15;
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..x1, 0f64..y1)?;
        chart
            .configure_mesh()
            .x_desc("time (ms)")
            .y_desc(&panel.y_desc)
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        for (k, m) in markers.iter().enumerate() {
            chart.draw_series(LineSeries::new(
                [(m.at_ms, 0.0), (m.at_ms, y1)],
                RGBColor(150, 150, 150).stroke_width(1),
            ))?;
            // Labels of neighbouring markers on alternate heights, so they never overlap.
            let height = if k % 2 == 0 { 0.95 } else { 0.85 };
            chart.draw_series(std::iter::once(Text::new(
                format!(" {}", m.label),
                (m.at_ms, y1 * height),
                ("sans-serif", 14),
            )))?;
        }
        for l in &panel.lines {
            let color = l.color;
            chart
                .draw_series(LineSeries::new(l.points.iter().copied(), color.stroke_width(2)))?
                .label(&l.name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
