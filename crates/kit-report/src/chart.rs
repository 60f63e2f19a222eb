//! Charts as inline SVG, drawn here rather than by a script: they render in any
//! browser with JavaScript off, in a mail client, and in a file opened years later
//! with no network.
//!
//! Four shapes cover the reports: [`LineChart`] (time series and the
//! latency-versus-load curve), [`LogHistogramChart`] (latency histograms on
//! log-spaced buckets), [`BucketBarChart`] (an AWR report's named latency
//! buckets) and [`DivergingBarChart`] (% change in a comparison).
//! Every chart has a title, axes with tick labels and a legend, and its `<svg>`
//! carries the class `chart chart-<kind>` so that tests can find it.
//!
//! Each series has its own colour, used by nothing else on the page ([`palette`]):
//! the headless-browser test counts the pixels of each colour in a screenshot,
//! and a chart that was not drawn shows up as a colour that is absent. Legend
//! swatches are kept small (a short line, a 10 px square) so that a legend alone
//! cannot pass for a drawn series.

use std::fmt::Write as _;

use super::document::escape;
use super::units;

/// An opaque colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

impl Rgb {
    /// `#rrggbb`.
    pub fn hex(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.0, self.1, self.2)
    }
}

/// The series colours. Each is unusual enough that no text, grid or background
/// pixel has it, and each belongs to one kind of chart.
pub mod palette {
    use super::Rgb;

    /// I/Os per second over time.
    pub const IOPS: Rgb = Rgb(0xc2, 0x18, 0x7a);
    /// The open-loop target, dashed, on the IOPS chart.
    pub const IOPS_TARGET: Rgb = Rgb(0x4a, 0x4a, 0x4a);
    /// MB/s over time.
    pub const MB_PER_S: Rgb = Rgb(0x0b, 0x6e, 0xb8);
    /// Latency percentiles over time.
    pub const P50: Rgb = Rgb(0x1b, 0x9e, 0x4b);
    pub const P99: Rgb = Rgb(0xe0, 0x7b, 0x00);
    pub const P999: Rgb = Rgb(0x8e, 0x24, 0xaa);
    /// Latency histogram bars.
    pub const HIST_READ: Rgb = Rgb(0x23, 0x5f, 0xd9);
    pub const HIST_WRITE: Rgb = Rgb(0xd9, 0x3b, 0x23);
    /// Latency versus load.
    pub const CURVE_MEAN: Rgb = Rgb(0x00, 0x97, 0xa7);
    pub const CURVE_P99: Rgb = Rgb(0xa8, 0x32, 0x00);
    /// Comparison bars: B better than A, worse, or a figure with no better direction.
    pub const BETTER: Rgb = Rgb(0x2e, 0x9b, 0x3f);
    pub const WORSE: Rgb = Rgb(0xcc, 0x22, 0x44);
    pub const NEITHER: Rgb = Rgb(0x80, 0x8c, 0x99);
    /// The warm-up band behind time series.
    pub const WARMUP: Rgb = Rgb(0xea, 0xea, 0xea);
    /// OLTP report: physical read, data-file write and redo write requests per second.
    pub const PHYS_READ: Rgb = Rgb(0x3b, 0x5b, 0xdb);
    pub const PHYS_WRITE: Rgb = Rgb(0xe8, 0x59, 0x0c);
    pub const REDO_WRITE: Rgb = Rgb(0x2b, 0x8a, 0x3e);
    /// OLTP report: DB time and DB CPU over time.
    pub const DB_TIME: Rgb = Rgb(0x5f, 0x3d, 0xc4);
    pub const DB_CPU: Rgb = Rgb(0xf0, 0x8c, 0x00);
    /// OLTP report: one colour per wait event, indexed by `cairn_oltp::stats::Event::index`,
    /// so that an event has the same colour on the latency-over-time chart and on
    /// its histogram, in every report.
    pub const EVENTS: [Rgb; 14] = [
        Rgb(0x18, 0x64, 0xab),
        Rgb(0xc9, 0x2a, 0x2a),
        Rgb(0x5c, 0x94, 0x0d),
        Rgb(0x86, 0x2e, 0x9c),
        Rgb(0x0b, 0x72, 0x85),
        Rgb(0xd6, 0x33, 0x6c),
        Rgb(0xe6, 0x77, 0x00),
        Rgb(0x36, 0x4f, 0xc7),
        Rgb(0xa6, 0x1e, 0x4d),
        Rgb(0x2f, 0x9e, 0x44),
        Rgb(0x74, 0xb8, 0x16),
        Rgb(0x66, 0x66, 0x00),
        Rgb(0x10, 0x98, 0xad),
        Rgb(0x9a, 0x6b, 0x00),
    ];
    /// AWR replay: the report's latency distribution and the run's.
    pub const AWR: Rgb = Rgb(0x9c, 0x5d, 0x30);
    pub const RUN: Rgb = Rgb(0x12, 0x8c, 0x7e);
}

const AXIS: &str = "#333333";
const GRID: &str = "#e2e2e2";
const MUTED: &str = "#666666";

/// How an axis labels its ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickFormat {
    /// `950`, `1.5k`, `2M`.
    Number,
    /// A value in µs: `500us`, `2ms`.
    LatencyUs,
    /// `20%`.
    Percent,
    /// `30s`.
    Seconds,
}

fn tick_label(format: TickFormat, v: f64) -> String {
    match format {
        TickFormat::Number => units::compact(v),
        TickFormat::LatencyUs if v == 0.0 => "0".to_string(),
        TickFormat::LatencyUs => {
            // Round figures read better on an axis than three significant digits.
            let text = units::latency_us(v);
            trim_zero_decimals(&text)
        }
        TickFormat::Percent => format!("{}%", units::compact(v)),
        TickFormat::Seconds => format!("{}s", units::compact(v)),
    }
}

fn trim_zero_decimals(text: &str) -> String {
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    if num.contains('.') {
        format!("{}{unit}", num.trim_end_matches('0').trim_end_matches('.'))
    } else {
        text.to_string()
    }
}

/// A 1-2-5 step near `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Ticks at a 1-2-5 step within `[lo, hi]`.
fn linear_ticks(lo: f64, hi: f64, n: f64) -> Vec<f64> {
    let step = nice_step((hi - lo) / n);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 && out.len() < 50 {
        // Snap -0.0 and 0.30000000000000004 to what the label will say.
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

/// Ticks at every decade within `[lo, hi]`, plus 2× and 5× when the span is
/// short enough that decades alone would leave the axis bare.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let first = lo.log10().floor() as i32;
    let last = hi.log10().ceil() as i32;
    let few = last - first <= 2;
    let mut out = Vec::new();
    for e in first..=last {
        let base = 10f64.powi(e);
        for m in [1.0, 2.0, 5.0] {
            if m > 1.0 && !few {
                continue;
            }
            let t = base * m;
            if t >= lo * (1.0 - 1e-9) && t <= hi * (1.0 + 1e-9) {
                out.push(t);
            }
        }
    }
    out
}

/// A mapping from data to pixels along one axis.
#[derive(Debug, Clone, Copy)]
struct Scale {
    lo: f64,
    hi: f64,
    log: bool,
    px_lo: f64,
    px_hi: f64,
}

impl Scale {
    fn map(&self, v: f64) -> f64 {
        let (a, b, v) = if self.log {
            (self.lo.log10(), self.hi.log10(), v.max(self.lo).log10())
        } else {
            (self.lo, self.hi, v)
        };
        let t = if b > a { (v - a) / (b - a) } else { 0.0 };
        self.px_lo + t.clamp(0.0, 1.0) * (self.px_hi - self.px_lo)
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            log_ticks(self.lo, self.hi)
        } else {
            linear_ticks(self.lo, self.hi, 5.0)
        }
    }
}

/// A linear domain from 0 to a round number above `max`.
fn zero_to_nice(max: f64) -> (f64, f64) {
    if !(max.is_finite() && max > 0.0) {
        return (0.0, 1.0);
    }
    let step = nice_step(max / 5.0);
    (0.0, (max / step).ceil() * step)
}

/// A log domain from the decade at or below `min` to the decade at or above `max`.
fn decades(min: f64, max: f64) -> (f64, f64) {
    let lo = 10f64.powf(min.log10().floor());
    let mut hi = 10f64.powf(max.log10().ceil());
    if hi <= lo {
        hi = lo * 10.0;
    }
    (lo, hi)
}

/// Outer size and plot area of a chart.
#[derive(Debug, Clone, Copy)]
struct Frame {
    width: f64,
    height: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
}

impl Frame {
    fn standard() -> Self {
        let (width, height) = (560.0, 300.0);
        Self {
            width,
            height,
            left: 70.0,
            right: width - 18.0,
            top: 58.0,
            bottom: height - 46.0,
        }
    }
}

/// What a legend entry's swatch looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Swatch {
    Line { dashed: bool },
    Square,
}

fn open_svg(out: &mut String, id: &str, kind: &str, title: &str, frame: &Frame) {
    let _ = write!(
        out,
        "<svg id=\"{}\" class=\"chart chart-{}\" role=\"img\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">",
        escape(id),
        escape(kind),
        w = frame.width,
        h = frame.height,
    );
    let _ = write!(
        out,
        "<title>{t}</title><rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\
         <text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\" fill=\"{AXIS}\">{t}</text>",
        frame.width,
        frame.height,
        frame.width / 2.0,
        t = escape(title),
    );
}

/// Height of one legend row, px.
const LEGEND_ROW_PX: f64 = 18.0;

/// Horizontal room a legend entry takes: swatch, a rough 7 px per character
/// at 12 px, and the gap to the next entry.
fn legend_advance(name: &str) -> f64 {
    21.0 + 7.0 * name.chars().count() as f64 + 18.0
}

/// Where each legend entry goes: left to right, wrapping to a new row rather
/// than running past the plot's right edge (a chart with one line per wait
/// event has more names than one row holds). Returns (x, row) per entry.
fn legend_layout<'a>(frame: &Frame, names: impl Iterator<Item = &'a str>) -> Vec<(f64, usize)> {
    let mut x = frame.left;
    let mut row = 0;
    let mut out = Vec::new();
    for name in names {
        let advance = legend_advance(name);
        if x > frame.left && x + advance - 18.0 > frame.right {
            x = frame.left;
            row += 1;
        }
        out.push((x, row));
        x += advance;
    }
    out
}

/// Make room above the plot for legend rows beyond the first: the plot keeps
/// its height and the chart grows. A legend that fits one row changes nothing.
fn fit_legend<'a>(frame: &mut Frame, names: impl Iterator<Item = &'a str>) {
    let rows = legend_layout(frame, names)
        .last()
        .map_or(0, |(_, row)| *row);
    let extra = LEGEND_ROW_PX * rows as f64;
    frame.top += extra;
    frame.bottom += extra;
    frame.height += extra;
}

fn legend(out: &mut String, frame: &Frame, items: &[(String, Rgb, Swatch)]) {
    let places = legend_layout(frame, items.iter().map(|(name, _, _)| name.as_str()));
    for ((name, color, swatch), (x, row)) in items.iter().zip(places) {
        let y = 40.0 + LEGEND_ROW_PX * row as f64;
        match swatch {
            Swatch::Line { dashed } => {
                let dash = if *dashed {
                    " stroke-dasharray=\"5 3\""
                } else {
                    ""
                };
                let _ = write!(
                    out,
                    "<line x1=\"{x:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{}\" stroke-width=\"3\"{dash}/>",
                    x + 16.0,
                    color.hex()
                );
            }
            Swatch::Square => {
                let _ = write!(
                    out,
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/>",
                    x + 3.0,
                    y - 5.0,
                    color.hex()
                );
            }
        }
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{AXIS}\">{}</text>",
            x + 21.0,
            y + 4.0,
            escape(name)
        );
    }
}

/// Grid, axes, tick labels and axis labels.
#[allow(clippy::too_many_arguments)]
fn axes(
    out: &mut String,
    frame: &Frame,
    xs: &Scale,
    ys: &Scale,
    x_format: TickFormat,
    y_format: TickFormat,
    x_label: &str,
    y_label: &str,
) {
    y_grid(out, frame, ys, y_format);
    for t in xs.ticks() {
        let x = xs.map(t);
        let _ = write!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"{AXIS}\" stroke-width=\"1\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{AXIS}\">{}</text>",
            frame.bottom,
            frame.bottom + 5.0,
            frame.bottom + 18.0,
            escape(&tick_label(x_format, t))
        );
    }
    let _ = write!(
        out,
        "<line x1=\"{l:.1}\" y1=\"{t:.1}\" x2=\"{l:.1}\" y2=\"{b:.1}\" stroke=\"{AXIS}\" stroke-width=\"1\"/>\
         <line x1=\"{l:.1}\" y1=\"{b:.1}\" x2=\"{r:.1}\" y2=\"{b:.1}\" stroke=\"{AXIS}\" stroke-width=\"1\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{MUTED}\">{}</text>\
         <text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\" fill=\"{MUTED}\">{}</text>",
        (frame.left + frame.right) / 2.0,
        frame.height - 8.0,
        escape(x_label),
        (frame.top + frame.bottom) / 2.0,
        escape(y_label),
        l = frame.left,
        r = frame.right,
        t = frame.top,
        b = frame.bottom,
    );
}

/// Horizontal grid lines with the y axis's tick labels.
fn y_grid(out: &mut String, frame: &Frame, ys: &Scale, format: TickFormat) {
    for t in ys.ticks() {
        let y = ys.map(t);
        let _ = write!(
            out,
            "<line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{GRID}\" stroke-width=\"1\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"{AXIS}\">{}</text>",
            frame.left,
            frame.right,
            frame.left - 6.0,
            y + 4.0,
            escape(&tick_label(format, t))
        );
    }
}

fn no_data(out: &mut String, frame: &Frame) {
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{MUTED}\">no data</text></svg>",
        frame.width / 2.0,
        (frame.top + frame.bottom) / 2.0
    );
}

/// One line of a [`LineChart`].
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub color: Rgb,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
    /// A short label beside each point (e.g. `50%` on a curve), or empty.
    pub point_labels: Vec<String>,
}

impl Series {
    pub fn new(name: &str, color: Rgb, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.to_string(),
            color,
            points,
            dashed: false,
            point_labels: Vec::new(),
        }
    }
}

/// Lines over a shared x axis, with optional shaded x bands (the warm-up).
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    pub id: String,
    /// The `chart-<kind>` class.
    pub kind: &'static str,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_format: TickFormat,
    pub y_format: TickFormat,
    /// Start the x axis at 0 rather than just below the smallest x.
    pub x_from_zero: bool,
    /// End the x axis at a round number past the last point (a load axis,
    /// where the last point has a label to fit) rather than at the last point
    /// (a time axis, which ends when the run did).
    pub x_round_up: bool,
    /// Use a log y axis when the values span more than a factor of 30 (tail
    /// latencies next to medians), so that the median is not a flat line at 0.
    pub y_log_when_wide: bool,
    pub series: Vec<Series>,
    /// Shaded `[x0, x1]` bands with a label.
    pub bands: Vec<(f64, f64, String)>,
}

impl LineChart {
    pub fn svg(&self) -> String {
        let mut frame = Frame::standard();
        fit_legend(&mut frame, self.series.iter().map(|s| s.name.as_str()));
        let mut out = String::new();
        open_svg(&mut out, &self.id, self.kind, &self.title, &frame);
        let points: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        if points.is_empty() {
            no_data(&mut out, &frame);
            return out;
        }
        let (xs, ys) = self.scales(&frame, &points);
        let y_log = ys.log;
        self.draw_bands(&mut out, &frame, &xs);
        let y_label = if y_log {
            format!("{} (log scale)", self.y_label)
        } else {
            self.y_label.clone()
        };
        axes(
            &mut out,
            &frame,
            &xs,
            &ys,
            self.x_format,
            self.y_format,
            &self.x_label,
            &y_label,
        );
        for s in &self.series {
            draw_series(&mut out, s, &xs, &ys);
        }
        let items: Vec<(String, Rgb, Swatch)> = self
            .series
            .iter()
            .map(|s| (s.name.clone(), s.color, Swatch::Line { dashed: s.dashed }))
            .collect();
        legend(&mut out, &frame, &items);
        out.push_str("</svg>");
        out
    }

    /// The x and y scales over `points` (finite, at least one) and the bands:
    /// the y axis is log when asked for and the values span more than 30×.
    fn scales(&self, frame: &Frame, points: &[(f64, f64)]) -> (Scale, Scale) {
        let x_min = points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let x_max = points.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        let band_max = self.bands.iter().map(|b| b.1).fold(x_max, f64::max);
        let (x_lo, x_hi) = if self.x_from_zero && self.x_round_up {
            zero_to_nice(band_max * 1.08)
        } else if self.x_from_zero {
            (0.0, band_max.max(1e-9))
        } else {
            let pad = ((x_max - x_min) * 0.05).max(x_max.abs() * 0.05).max(1e-9);
            ((x_min - pad).max(0.0), x_max + pad)
        };
        let y_max = points.iter().map(|p| p.1).fold(0.0, f64::max);
        let y_min_pos = points
            .iter()
            .map(|p| p.1)
            .filter(|y| *y > 0.0)
            .fold(f64::INFINITY, f64::min);
        let y_log = self.y_log_when_wide && y_min_pos.is_finite() && y_max / y_min_pos > 30.0;
        let (y_lo, y_hi) = if y_log {
            decades(y_min_pos, y_max)
        } else {
            zero_to_nice(y_max)
        };
        let xs = Scale {
            lo: x_lo,
            hi: x_hi,
            log: false,
            px_lo: frame.left,
            px_hi: frame.right,
        };
        let ys = Scale {
            lo: y_lo,
            hi: y_hi,
            log: y_log,
            px_lo: frame.bottom,
            px_hi: frame.top,
        };
        (xs, ys)
    }

    /// The shaded x bands, each labelled at its top.
    fn draw_bands(&self, out: &mut String, frame: &Frame, xs: &Scale) {
        for (b0, b1, label) in &self.bands {
            let (x0, x1) = (xs.map(*b0), xs.map(*b1));
            if x1 > x0 {
                let _ = write!(
                    out,
                    "<rect x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"/>\
                     <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"11\" fill=\"{MUTED}\">{}</text>",
                    frame.top,
                    x1 - x0,
                    frame.bottom - frame.top,
                    palette::WARMUP.hex(),
                    (x0 + x1) / 2.0,
                    frame.top + 12.0,
                    escape(label)
                );
            }
        }
    }
}

/// One series of a [`LineChart`]: its line, and markers with their labels
/// where there are few points. On a log y axis, points at or below 0 are left out.
fn draw_series(out: &mut String, s: &Series, xs: &Scale, ys: &Scale) {
    let y_log = ys.log;
    let pts: Vec<(usize, f64, f64)> = s
        .points
        .iter()
        .enumerate()
        .filter(|(_, (x, y))| x.is_finite() && y.is_finite() && (!y_log || *y > 0.0))
        .map(|(i, (x, y))| (i, xs.map(*x), ys.map(*y)))
        .collect();
    let dash = if s.dashed {
        " stroke-dasharray=\"7 5\""
    } else {
        ""
    };
    if pts.len() > 1 {
        let coords: Vec<String> = pts
            .iter()
            .map(|(_, x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        let _ = write!(
            out,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2.5\" stroke-linejoin=\"round\"{dash} points=\"{}\"/>",
            s.color.hex(),
            coords.join(" ")
        );
    }
    // Markers where a reader may want to read single points: few of them,
    // or a lone one that would otherwise draw nothing.
    if (pts.len() <= 40 && !s.dashed) || pts.len() == 1 {
        for (i, x, y) in &pts {
            let _ = write!(
                out,
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.5\" fill=\"{}\"/>",
                s.color.hex()
            );
            if let Some(label) = s.point_labels.get(*i) {
                let _ = write!(
                    out,
                    "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"{MUTED}\">{}</text>",
                    x + 6.0,
                    y - 6.0,
                    escape(label)
                );
            }
        }
    }
}

/// Bars on log-spaced latency buckets: bucket `i` holds `[10^(i/B), 10^((i+1)/B))` µs
/// for `B` buckets per decade. Groups (read, write) stand side by side in a bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct LogHistogramChart {
    pub id: String,
    pub kind: &'static str,
    pub title: String,
    pub buckets_per_decade: u32,
    /// What a bar counts ("% of I/Os", "% of waits").
    pub y_label: &'static str,
    pub groups: Vec<BarGroup>,
}

/// One set of bars of a [`LogHistogramChart`] (reads, say).
#[derive(Debug, Clone, PartialEq)]
pub struct BarGroup {
    pub name: String,
    pub color: Rgb,
    /// (bucket index, % of the group's I/Os).
    pub buckets: Vec<(i32, f64)>,
}

impl LogHistogramChart {
    /// The bucket a latency in µs falls in.
    pub fn bucket_of(us: f64, per_decade: u32) -> i32 {
        (us.max(1e-3).log10() * f64::from(per_decade)).floor() as i32
    }

    pub fn svg(&self) -> String {
        let mut frame = Frame::standard();
        fit_legend(&mut frame, self.groups.iter().map(|g| g.name.as_str()));
        let mut out = String::new();
        open_svg(&mut out, &self.id, self.kind, &self.title, &frame);
        let all: Vec<(i32, f64)> = self
            .groups
            .iter()
            .flat_map(|g| g.buckets.iter().copied())
            .filter(|(_, v)| *v > 0.0 && v.is_finite())
            .collect();
        let (Some(i_min), Some(i_max)) =
            (all.iter().map(|b| b.0).min(), all.iter().map(|b| b.0).max())
        else {
            no_data(&mut out, &frame);
            return out;
        };
        let per = f64::from(self.buckets_per_decade.max(1));
        let edge = |i: i32| 10f64.powf(f64::from(i) / per);
        let xs = Scale {
            lo: edge(i_min),
            hi: edge(i_max + 1),
            log: true,
            px_lo: frame.left,
            px_hi: frame.right,
        };
        let (y_lo, y_hi) = zero_to_nice(all.iter().map(|b| b.1).fold(0.0, f64::max));
        let ys = Scale {
            lo: y_lo,
            hi: y_hi,
            log: false,
            px_lo: frame.bottom,
            px_hi: frame.top,
        };
        axes(
            &mut out,
            &frame,
            &xs,
            &ys,
            TickFormat::LatencyUs,
            TickFormat::Percent,
            "latency (log scale)",
            self.y_label,
        );
        let n = self.groups.len().max(1) as f64;
        for (g, group) in self.groups.iter().enumerate() {
            for (i, v) in &group.buckets {
                if !(*v > 0.0 && v.is_finite()) {
                    continue;
                }
                let (x0, x1) = (xs.map(edge(*i)), xs.map(edge(*i + 1)));
                let w = ((x1 - x0 - 2.0) / n).max(1.0);
                let x = x0 + 1.0 + w * g as f64;
                let y = ys.map(*v);
                let _ = write!(
                    out,
                    "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{}\" shape-rendering=\"crispEdges\"/>",
                    (frame.bottom - y).max(1.0),
                    group.color.hex()
                );
            }
        }
        let items: Vec<(String, Rgb, Swatch)> = self
            .groups
            .iter()
            .map(|g| (g.name.clone(), g.color, Swatch::Square))
            .collect();
        legend(&mut out, &frame, &items);
        out.push_str("</svg>");
        out
    }
}

/// Bars over named buckets (an AWR report's `<8us … >=32ms`, which are not
/// evenly spaced on any scale): groups stand side by side in each bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketBarChart {
    pub id: String,
    pub kind: &'static str,
    pub title: String,
    pub y_label: &'static str,
    pub buckets: Vec<String>,
    /// (name, colour, one value per bucket; `None` draws nothing).
    pub groups: Vec<(String, Rgb, Vec<Option<f64>>)>,
}

impl BucketBarChart {
    pub fn svg(&self) -> String {
        let mut frame = Frame::standard();
        // Room under the plot for slanted bucket names.
        frame.height += 24.0;
        fit_legend(&mut frame, self.groups.iter().map(|g| g.0.as_str()));
        let mut out = String::new();
        open_svg(&mut out, &self.id, self.kind, &self.title, &frame);
        let values = || {
            self.groups
                .iter()
                .flat_map(|g| g.2.iter().flatten().copied())
                .filter(|v| v.is_finite())
        };
        if self.buckets.is_empty() || values().next().is_none() {
            no_data(&mut out, &frame);
            return out;
        }
        let (y_lo, y_hi) = zero_to_nice(values().fold(0.0, f64::max));
        let ys = Scale {
            lo: y_lo,
            hi: y_hi,
            log: false,
            px_lo: frame.bottom,
            px_hi: frame.top,
        };
        y_grid(&mut out, &frame, &ys, TickFormat::Percent);
        let slot = (frame.right - frame.left) / self.buckets.len() as f64;
        let n = self.groups.len().max(1) as f64;
        let bar = ((slot - 4.0) / n).max(1.0);
        for (i, name) in self.buckets.iter().enumerate() {
            let x0 = frame.left + slot * i as f64;
            for (g, (_, color, vals)) in self.groups.iter().enumerate() {
                let Some(v) = vals
                    .get(i)
                    .copied()
                    .flatten()
                    .filter(|v| *v > 0.0 && v.is_finite())
                else {
                    continue;
                };
                let y = ys.map(v);
                let _ = write!(
                    out,
                    "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{bar:.1}\" height=\"{:.1}\" fill=\"{}\" shape-rendering=\"crispEdges\"/>",
                    x0 + 2.0 + bar * g as f64,
                    (frame.bottom - y).max(1.0),
                    color.hex()
                );
            }
            let cx = x0 + slot / 2.0;
            let _ = write!(
                out,
                "<text transform=\"translate({cx:.1} {:.1}) rotate(-35)\" text-anchor=\"end\" font-size=\"10\" fill=\"{AXIS}\">{}</text>",
                frame.bottom + 12.0,
                escape(name)
            );
        }
        let _ = write!(
            out,
            "<line x1=\"{l:.1}\" y1=\"{t:.1}\" x2=\"{l:.1}\" y2=\"{b:.1}\" stroke=\"{AXIS}\" stroke-width=\"1\"/>\
             <line x1=\"{l:.1}\" y1=\"{b:.1}\" x2=\"{r:.1}\" y2=\"{b:.1}\" stroke=\"{AXIS}\" stroke-width=\"1\"/>\
             <text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\" fill=\"{MUTED}\">{}</text>",
            (frame.top + frame.bottom) / 2.0,
            escape(self.y_label),
            l = frame.left,
            r = frame.right,
            t = frame.top,
            b = frame.bottom,
        );
        let items: Vec<(String, Rgb, Swatch)> = self
            .groups
            .iter()
            .map(|g| (g.0.clone(), g.1, Swatch::Square))
            .collect();
        legend(&mut out, &frame, &items);
        out.push_str("</svg>");
        out
    }
}

/// Horizontal bars left or right of zero: one per row, for % change.
#[derive(Debug, Clone, PartialEq)]
pub struct DivergingBarChart {
    pub id: String,
    pub kind: &'static str,
    pub title: String,
    /// (label, value in %, colour).
    pub rows: Vec<(String, f64, Rgb)>,
    pub legend: Vec<(String, Rgb)>,
}

/// Bars beyond this many % are cut at the edge (their label still says the
/// value), so that one +900% does not flatten every other bar.
const DIVERGING_CAP_PCT: f64 = 200.0;
const LABEL_CHARS_MAX: usize = 46;

impl DivergingBarChart {
    pub fn svg(&self) -> String {
        let row_h = 20.0;
        let width = 900.0;
        let top = 58.0;
        let height = top + row_h * self.rows.len().max(1) as f64 + 40.0;
        let frame = Frame {
            width,
            height,
            left: 340.0,
            right: width - 60.0,
            top,
            bottom: height - 40.0,
        };
        let mut out = String::new();
        open_svg(&mut out, &self.id, self.kind, &self.title, &frame);
        if self.rows.is_empty() {
            no_data(&mut out, &frame);
            return out;
        }
        let max = self
            .rows
            .iter()
            .map(|r| r.1.abs())
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max)
            .min(DIVERGING_CAP_PCT);
        let (_, span) = zero_to_nice(max);
        let xs = Scale {
            lo: -span,
            hi: span,
            log: false,
            px_lo: frame.left,
            px_hi: frame.right,
        };
        for t in xs.ticks() {
            let x = xs.map(t);
            let _ = write!(
                out,
                "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"{GRID}\" stroke-width=\"1\"/>\
                 <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{AXIS}\">{}</text>",
                frame.top,
                frame.bottom,
                frame.bottom + 18.0,
                escape(&units::signed(t, 0)),
            );
        }
        let zero = xs.map(0.0);
        for (k, row) in self.rows.iter().enumerate() {
            let y = frame.top + row_h * k as f64;
            diverging_row(&mut out, &frame, &xs, span, y, row);
        }
        let _ = write!(
            out,
            "<line x1=\"{zero:.1}\" y1=\"{:.1}\" x2=\"{zero:.1}\" y2=\"{:.1}\" stroke=\"{AXIS}\" stroke-width=\"1\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{MUTED}\">% change from A to B</text>",
            frame.top,
            frame.bottom,
            (frame.left + frame.right) / 2.0,
            frame.height - 6.0,
        );
        let items: Vec<(String, Rgb, Swatch)> = self
            .legend
            .iter()
            .map(|(name, color)| (name.clone(), *color, Swatch::Square))
            .collect();
        legend(&mut out, &frame, &items);
        out.push_str("</svg>");
        out
    }
}

/// One row of a [`DivergingBarChart`] at `y`: its label (cut to
/// [`LABEL_CHARS_MAX`], whole in its tooltip), its bar from zero, and its value.
fn diverging_row(
    out: &mut String,
    frame: &Frame,
    xs: &Scale,
    span: f64,
    y: f64,
    (label, v, color): &(String, f64, Rgb),
) {
    let zero = xs.map(0.0);
    let shown: String = if label.chars().count() > LABEL_CHARS_MAX {
        let mut s: String = label.chars().take(LABEL_CHARS_MAX - 1).collect();
        s.push('…');
        s
    } else {
        label.clone()
    };
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"{AXIS}\"><title>{}</title>{}</text>",
        frame.left - 8.0,
        y + 14.0,
        escape(label),
        escape(&shown)
    );
    let end = xs.map(v.clamp(-span, span));
    let (x0, x1) = if end >= zero {
        (zero, end)
    } else {
        (end, zero)
    };
    let _ = write!(
        out,
        "<rect x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"14\" fill=\"{}\" shape-rendering=\"crispEdges\"/>",
        y + 3.0,
        (x1 - x0).max(1.0),
        color.hex()
    );
    let (tx, anchor) = if *v >= 0.0 {
        (x1 + 4.0, "start")
    } else {
        (x0 - 4.0, "end")
    };
    let _ = write!(
        out,
        "<text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\" font-size=\"11\" fill=\"{MUTED}\">{}%</text>",
        y + 14.0,
        escape(&units::signed(*v, 1))
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_one_two_five() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(1.3), 2.0);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(7.0), 10.0);
        assert_eq!(nice_step(260.0), 500.0);
        assert_eq!(zero_to_nice(1530.0), (0.0, 2000.0));
        assert_eq!(zero_to_nice(1500.0), (0.0, 1500.0));
        let labels: Vec<String> = linear_ticks(0.0, 1.0, 5.0)
            .into_iter()
            .map(|t| tick_label(TickFormat::Number, t))
            .collect();
        assert_eq!(labels, ["0", "0.2", "0.4", "0.6", "0.8", "1"]);
    }

    #[test]
    fn log_ticks_add_twos_and_fives_on_short_spans() {
        assert_eq!(
            log_ticks(100.0, 10_000.0),
            vec![100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10_000.0]
        );
        assert_eq!(
            log_ticks(1.0, 1e6),
            vec![1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6]
        );
        assert_eq!(tick_label(TickFormat::LatencyUs, 1000.0), "1ms");
        assert_eq!(tick_label(TickFormat::LatencyUs, 500.0), "500us");
        assert_eq!(tick_label(TickFormat::LatencyUs, 2_000_000.0), "2s");
    }

    #[test]
    fn a_line_chart_draws_each_series_in_its_colour_with_axes_and_legend() {
        let chart = LineChart {
            id: "c1".into(),
            kind: "iops",
            title: "IOPS <rd1>".into(),
            x_label: "seconds".into(),
            y_label: "IO/s".into(),
            x_format: TickFormat::Seconds,
            y_format: TickFormat::Number,
            x_from_zero: true,
            x_round_up: false,
            y_log_when_wide: false,
            series: vec![Series::new(
                "all",
                palette::IOPS,
                vec![(1.0, 100.0), (2.0, 1500.0)],
            )],
            bands: vec![(0.0, 1.0, "warm-up".into())],
        };
        let svg = chart.svg();
        assert!(svg.starts_with("<svg id=\"c1\" class=\"chart chart-iops\""));
        assert!(svg.contains("IOPS &lt;rd1&gt;"));
        assert!(svg.contains("<polyline fill=\"none\" stroke=\"#c2187a\""));
        assert!(
            svg.contains(">1.5k</text>"),
            "y axis reaches a round 1.5k: {svg}"
        );
        assert!(svg.contains(">warm-up</text>"));
        assert!(svg.contains(">all</text>"), "legend");
        assert!(svg.ends_with("</svg>"));
    }

    #[test]
    fn a_legend_too_wide_for_one_row_wraps_and_the_chart_grows() {
        let names = [
            "db file sequential read",
            "db file parallel read",
            "log file sync",
            "log file parallel write",
        ];
        let chart = |names: &[&str]| LineChart {
            id: "c".into(),
            kind: "latency",
            title: "t".into(),
            x_label: "s".into(),
            y_label: "us".into(),
            x_format: TickFormat::Seconds,
            y_format: TickFormat::LatencyUs,
            x_from_zero: true,
            x_round_up: false,
            y_log_when_wide: false,
            series: names
                .iter()
                .map(|n| Series::new(n, palette::P50, vec![(1.0, 1.0), (2.0, 2.0)]))
                .collect(),
            bands: Vec::new(),
        };
        let frame = Frame::standard();
        let rows: Vec<usize> = legend_layout(&frame, names.iter().copied())
            .iter()
            .map(|p| p.1)
            .collect();
        assert_eq!(rows, [0, 0, 1, 1]);
        let wide = chart(&names).svg();
        assert!(wide.contains("height=\"318\""), "{wide}");
        // Every entry starts inside the chart.
        for (x, _) in legend_layout(&frame, names.iter().copied()) {
            assert!(x < frame.right);
        }
        // A legend that fits one row leaves the standard size.
        let narrow = chart(&["p50", "p99"]).svg();
        assert!(narrow.contains("height=\"300\""), "{narrow}");
    }

    #[test]
    fn an_empty_chart_says_so() {
        let chart = LogHistogramChart {
            id: "h".into(),
            kind: "histogram",
            title: "t".into(),
            buckets_per_decade: 5,
            y_label: "% of I/Os",
            groups: vec![BarGroup {
                name: "read".into(),
                color: palette::HIST_READ,
                buckets: vec![],
            }],
        };
        assert!(chart.svg().contains("no data"));
    }

    #[test]
    fn histogram_buckets_are_log_spaced() {
        assert_eq!(LogHistogramChart::bucket_of(1.0, 5), 0);
        assert_eq!(LogHistogramChart::bucket_of(10.0, 5), 5);
        assert_eq!(LogHistogramChart::bucket_of(500.0, 5), 13);
        assert_eq!(LogHistogramChart::bucket_of(1000.0, 5), 15);
    }
}
