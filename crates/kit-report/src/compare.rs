//! Two results side by side: for each metric, A, B, the difference and the %
//! change, and whether B is better — the table a DBA builds by hand from two AWR
//! reports when comparing two storage setups (one driver against another, one
//! LUN against eight), done for them.
//!
//! The model ([`Comparison`] of [`Section`]s of [`Row`]s) knows nothing about
//! benches, so other result kinds (an AWR-style OLTP report, a replay) can build
//! one and reuse the renderers. Rows hold only A and B: the delta and % change
//! are computed when rendering, so they can never disagree with the values.
//!
//! Runs are matched by title (`rd label`), workloads by wd name; anything in only
//! one result is listed as such rather than silently dropped.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use cairn_kit::result::{
    BenchResult, DeviceStats, DirectionStats, LatencySummary, Mixed, RunRecord,
};

use super::chart::{palette, DivergingBarChart};
use super::document::{self, Align, Block, Table};
use super::{html, units};

/// Below this |% change| two figures are called the same: the histograms hold
/// 0.1%, and run-to-run noise on real storage is rarely under 0.5%.
pub const SAME_PCT: f64 = 0.5;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub a_name: String,
    pub b_name: String,
    pub sections: Vec<Section>,
}

impl Comparison {
    /// Mark each side with what tells them apart beyond their figures (the
    /// engine two OLTP runs used): `name [tag]`.
    pub fn tag(&mut self, a: &str, b: &str) {
        self.a_name = format!("{} [{a}]", self.a_name);
        self.b_name = format!("{} [{b}]", self.b_name);
    }

    /// Name the sides anew (the command line names them by the paths it was
    /// given), keeping their tags.
    pub fn rename(&mut self, a: &str, b: &str) {
        fn tag_of(name: &str) -> &str {
            name.rfind(" [")
                .filter(|_| name.ends_with(']'))
                .map_or("", |i| &name[i..])
        }
        self.a_name = format!("{a}{}", tag_of(&self.a_name));
        self.b_name = format!("{b}{}", tag_of(&self.b_name));
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Section {
    pub title: String,
    pub rows: Vec<Row>,
}

/// One metric in both results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub metric: String,
    /// `us` and `ms` are latencies (shown as `846us`, `1.69ms`); `IO/s`, `MB/s`,
    /// `%`, `KiB`, `IO/CPU-s` or `` (a plain number) otherwise.
    pub unit: String,
    /// `None` when the result has no such figure (e.g. a workload only in B).
    pub a: Option<f64>,
    pub b: Option<f64>,
    pub better: Better,
}

/// Which direction of change is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Better {
    Higher,
    Lower,
    /// A figure that describes rather than scores (request size, utilisation).
    Neither,
}

/// How B fares against A on one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Better,
    Worse,
    /// Within [`SAME_PCT`].
    Same,
}

impl Row {
    pub fn new(metric: &str, unit: &str, a: Option<f64>, b: Option<f64>, better: Better) -> Self {
        Self {
            metric: metric.to_string(),
            unit: unit.to_string(),
            a,
            b,
            better,
        }
    }

    /// B − A.
    pub fn delta(&self) -> Option<f64> {
        Some(self.b? - self.a?)
    }

    /// (B − A) / |A| in %; `None` when A is 0 (no finite change).
    pub fn pct_change(&self) -> Option<f64> {
        let (a, b) = (self.a?, self.b?);
        if a == 0.0 {
            None
        } else {
            Some(100.0 * (b - a) / a.abs())
        }
    }

    /// `None` when a value is missing or no direction is better.
    pub fn verdict(&self) -> Option<Verdict> {
        let delta = self.delta()?;
        let up_is_good = match self.better {
            Better::Higher => true,
            Better::Lower => false,
            Better::Neither => return None,
        };
        let same = match self.pct_change() {
            Some(p) => p.abs() < SAME_PCT,
            None => delta == 0.0,
        };
        Some(if same {
            Verdict::Same
        } else if (delta > 0.0) == up_is_good {
            Verdict::Better
        } else {
            Verdict::Worse
        })
    }
}

/// Compare two bench results run by run and workload by workload.
///
/// `a_name` and `b_name` say host and start time; a caller with better names
/// (the paths given on the command line) may overwrite them.
pub fn compare_results(a: &BenchResult, b: &BenchResult) -> Comparison {
    let mut a_name = format!("{} {}", a.environment.hostname, a.started_at);
    let mut b_name = format!("{} {}", b.environment.hostname, b.started_at);
    if a_name == b_name {
        a_name.push_str(" (A)");
        b_name.push_str(" (B)");
    }
    let mut sections = Vec::new();
    let mut only = Section {
        title: "Only in one result (IO/s)".to_string(),
        rows: Vec::new(),
    };
    let mut used_b = BTreeSet::new();
    for ra in &a.runs {
        let title = ra.title();
        let found = b
            .runs
            .iter()
            .enumerate()
            .find(|(j, rb)| !used_b.contains(j) && rb.title() == title);
        let Some((j, rb)) = found else {
            only.rows.push(Row::new(
                &format!("run {title} (only in A)"),
                "IO/s",
                Some(ra.totals.all.all.iops),
                None,
                Better::Neither,
            ));
            continue;
        };
        used_b.insert(j);
        sections.push(run_section(&title, ra, rb));
        for wa in &ra.totals.workloads {
            match rb.totals.workloads.iter().find(|w| w.wd == wa.wd) {
                Some(wb) => sections.push(Section {
                    title: format!("{title}: workload {}", wa.wd),
                    rows: mixed_rows(&wa.stats, &wb.stats),
                }),
                None => only.rows.push(Row::new(
                    &format!("{title}: workload {} (only in A)", wa.wd),
                    "IO/s",
                    Some(wa.stats.all.iops),
                    None,
                    Better::Neither,
                )),
            }
        }
        for wb in &rb.totals.workloads {
            if !ra.totals.workloads.iter().any(|w| w.wd == wb.wd) {
                only.rows.push(Row::new(
                    &format!("{title}: workload {} (only in B)", wb.wd),
                    "IO/s",
                    None,
                    Some(wb.stats.all.iops),
                    Better::Neither,
                ));
            }
        }
    }
    for (j, rb) in b.runs.iter().enumerate() {
        if !used_b.contains(&j) {
            only.rows.push(Row::new(
                &format!("run {} (only in B)", rb.title()),
                "IO/s",
                None,
                Some(rb.totals.all.all.iops),
                Better::Neither,
            ));
        }
    }
    if !only.rows.is_empty() {
        sections.push(only);
    }
    Comparison {
        a_name,
        b_name,
        sections,
    }
}

/// The whole run: every workload together (when there are several), CPU
/// efficiency, errors and the devices.
fn run_section(title: &str, ra: &RunRecord, rb: &RunRecord) -> Section {
    let mut rows = Vec::new();
    if ra.totals.workloads.len() > 1 || rb.totals.workloads.len() > 1 {
        rows.extend(mixed_rows(&ra.totals.all, &rb.totals.all));
    }
    rows.push(Row::new(
        "IOPS per CPU-second",
        "IO/CPU-s",
        Some(ra.cpu.iops_per_cpu_s),
        Some(rb.cpu.iops_per_cpu_s),
        Better::Higher,
    ));
    if ra.errors.count > 0 || rb.errors.count > 0 {
        rows.push(Row::new(
            "I/O errors",
            "",
            Some(ra.errors.count as f64),
            Some(rb.errors.count as f64),
            Better::Lower,
        ));
    }
    rows.extend(device_rows(&ra.devices, &rb.devices));
    Section {
        title: format!("{title}: whole run"),
        rows,
    }
}

/// Rate, throughput and per-direction latency.
fn mixed_rows(a: &Mixed, b: &Mixed) -> Vec<Row> {
    let mut rows = vec![
        Row::new(
            "IOPS",
            "IO/s",
            Some(a.all.iops),
            Some(b.all.iops),
            Better::Higher,
        ),
        Row::new(
            "MB/s",
            "MB/s",
            Some(a.all.mb_per_s),
            Some(b.all.mb_per_s),
            Better::Higher,
        ),
    ];
    let dirs: [(&str, &DirectionStats, &DirectionStats); 2] =
        [("read", &a.read, &b.read), ("write", &a.write, &b.write)];
    let present: Vec<_> = dirs
        .iter()
        .filter(|(_, x, y)| x.ios > 0 || y.ios > 0)
        .collect();
    if present.len() > 1 {
        for (dir, x, y) in &present {
            rows.push(Row::new(
                &format!("{dir} IOPS"),
                "IO/s",
                Some(x.iops),
                Some(y.iops),
                Better::Higher,
            ));
        }
    }
    type Stat = (&'static str, fn(&LatencySummary) -> Option<f64>);
    let stats: [Stat; 5] = [
        ("mean", |l| Some(l.mean_us)),
        ("p50", |l| l.percentile_us(50.0)),
        ("p99", |l| l.percentile_us(99.0)),
        ("p99.9", |l| l.percentile_us(99.9)),
        ("max", |l| Some(l.max_us)),
    ];
    for (dir, x, y) in present {
        // A direction with no I/O has no latency, not a latency of 0.
        let value = |s: &DirectionStats, f: fn(&LatencySummary) -> Option<f64>| {
            if s.ios > 0 {
                f(&s.latency)
            } else {
                None
            }
        };
        for (name, f) in stats {
            rows.push(Row::new(
                &format!("{dir} latency {name}"),
                "us",
                value(x, f),
                value(y, f),
                Better::Lower,
            ));
        }
    }
    rows
}

/// iostat -x figures: per device when both runs used the same devices, else
/// summed over each run's devices (comparing two storage setups usually means
/// two different devices).
fn device_rows(a: &[DeviceStats], b: &[DeviceStats]) -> Vec<Row> {
    if a.is_empty() && b.is_empty() {
        return Vec::new();
    }
    let names = |d: &[DeviceStats]| d.iter().map(|x| x.device.clone()).collect::<BTreeSet<_>>();
    let mut rows = Vec::new();
    if names(a) == names(b) {
        for da in a {
            if let Some(db) = b.iter().find(|d| d.device == da.device) {
                rows.extend(one_device_rows(&da.device, Some(da), Some(db)));
            }
        }
    } else {
        let label = |d: &[DeviceStats]| {
            let n: Vec<String> = d.iter().map(|x| x.device.clone()).collect();
            if n.is_empty() {
                "none".to_string()
            } else {
                n.join("+")
            }
        };
        let (sa, sb) = (sum_devices(a), sum_devices(b));
        rows.extend(one_device_rows(
            &format!("devices (A {}, B {})", label(a), label(b)),
            sa.as_ref(),
            sb.as_ref(),
        ));
    }
    rows
}

/// A device's iostat -x rows; the read rows only if either side read, the
/// write rows only if either side wrote (an await of nothing is not 0 ms).
fn one_device_rows(name: &str, a: Option<&DeviceStats>, b: Option<&DeviceStats>) -> Vec<Row> {
    #[derive(PartialEq)]
    enum Needs {
        Reads,
        Writes,
        Nothing,
    }
    type Field = (
        &'static str,
        &'static str,
        Better,
        Needs,
        fn(&DeviceStats) -> f64,
    );
    let fields: [Field; 8] = [
        ("r/s", "IO/s", Better::Neither, Needs::Reads, |d| d.r_s),
        ("w/s", "IO/s", Better::Neither, Needs::Writes, |d| d.w_s),
        ("rareq-sz", "KiB", Better::Neither, Needs::Reads, |d| {
            d.rareq_sz_kb
        }),
        ("wareq-sz", "KiB", Better::Neither, Needs::Writes, |d| {
            d.wareq_sz_kb
        }),
        ("aqu-sz", "", Better::Neither, Needs::Nothing, |d| d.aqu_sz),
        ("r_await", "ms", Better::Lower, Needs::Reads, |d| {
            d.r_await_ms
        }),
        ("w_await", "ms", Better::Lower, Needs::Writes, |d| {
            d.w_await_ms
        }),
        ("%util", "%", Better::Neither, Needs::Nothing, |d| {
            d.util_pct
        }),
    ];
    let any =
        |f: fn(&DeviceStats) -> f64| a.map(f).unwrap_or(0.0) > 0.0 || b.map(f).unwrap_or(0.0) > 0.0;
    let (reads, writes) = (any(|d| d.r_s), any(|d| d.w_s));
    fields
        .iter()
        .filter(|(_, _, _, needs, _)| match needs {
            Needs::Reads => reads,
            Needs::Writes => writes,
            Needs::Nothing => true,
        })
        .map(|(metric, unit, better, _, f)| {
            Row::new(
                &format!("{name} {metric}"),
                unit,
                a.map(f),
                b.map(f),
                *better,
            )
        })
        .collect()
}

/// Devices taken together: rates and queue summed, request sizes and waits
/// weighted by their request rates, utilisation of the busiest.
fn sum_devices(devices: &[DeviceStats]) -> Option<DeviceStats> {
    if devices.is_empty() {
        return None;
    }
    let r_s: f64 = devices.iter().map(|d| d.r_s).sum();
    let w_s: f64 = devices.iter().map(|d| d.w_s).sum();
    let weighted = |rate: fn(&DeviceStats) -> f64, v: fn(&DeviceStats) -> f64, total: f64| {
        if total > 0.0 {
            devices.iter().map(|d| rate(d) * v(d)).sum::<f64>() / total
        } else {
            0.0
        }
    };
    Some(DeviceStats {
        device: "all".to_string(),
        r_s,
        w_s,
        rmb_s: devices.iter().map(|d| d.rmb_s).sum(),
        wmb_s: devices.iter().map(|d| d.wmb_s).sum(),
        rareq_sz_kb: weighted(|d| d.r_s, |d| d.rareq_sz_kb, r_s),
        wareq_sz_kb: weighted(|d| d.w_s, |d| d.wareq_sz_kb, w_s),
        aqu_sz: devices.iter().map(|d| d.aqu_sz).sum(),
        r_await_ms: weighted(|d| d.r_s, |d| d.r_await_ms, r_s),
        w_await_ms: weighted(|d| d.w_s, |d| d.w_await_ms, w_s),
        util_pct: devices.iter().map(|d| d.util_pct).fold(0.0, f64::max),
        d_s: devices.iter().map(|d| d.d_s).sum(),
        f_s: devices.iter().map(|d| d.f_s).sum(),
    })
}

/// A value in its unit, for a table cell.
fn value_text(v: f64, unit: &str) -> String {
    match unit {
        "us" => units::latency_us(v),
        "ms" => units::latency_ms(v),
        "MB/s" => units::grouped(v, 2),
        "%" => format!("{}%", units::pct(v)),
        "IO/CPU-s" => units::grouped(v, 0),
        "IO/s" | "KiB" => units::grouped(v, 1),
        _ => plain(v),
    }
}

fn delta_text(d: f64, unit: &str) -> String {
    if d == 0.0 {
        return "0".to_string();
    }
    match unit {
        "us" | "ms" => {
            let text = value_text(d, unit);
            if d > 0.0 {
                format!("+{text}")
            } else {
                text
            }
        }
        "MB/s" => units::signed(d, 2),
        "%" => units::signed(d, 1),
        "IO/CPU-s" => units::signed(d, 0),
        "IO/s" | "KiB" => units::signed(d, 1),
        _ => {
            let text = plain(d);
            if d > 0.0 {
                format!("+{text}")
            } else {
                text
            }
        }
    }
}

/// A number with as many decimals as its size deserves.
fn plain(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        units::grouped(v, 0)
    } else if v.abs() >= 100.0 {
        units::grouped(v, 1)
    } else {
        units::grouped(v, 2)
    }
}

/// The metric with its unit, where the cells do not already carry it.
fn metric_text(row: &Row) -> String {
    match row.unit.as_str() {
        "" | "us" | "ms" | "%" | "IO/s" | "MB/s" => row.metric.clone(),
        unit => format!("{} ({unit})", row.metric),
    }
}

fn verdict_text(row: &Row) -> &'static str {
    match row.verdict() {
        Some(Verdict::Better) => "better",
        Some(Verdict::Worse) => "worse",
        Some(Verdict::Same) => "same",
        None => "",
    }
}

fn section_table(section: &Section) -> Table {
    let mut t = Table::new(
        Some(&section.title),
        &[
            ("Metric", Align::Left),
            ("A", Align::Right),
            ("B", Align::Right),
            ("Delta", Align::Right),
            ("% change", Align::Right),
            ("B is", Align::Left),
        ],
    );
    for row in &section.rows {
        let cell = |v: Option<f64>| {
            v.map(|v| value_text(v, &row.unit))
                .unwrap_or_else(|| "-".to_string())
        };
        t.push(vec![
            metric_text(row),
            cell(row.a),
            cell(row.b),
            row.delta()
                .map(|d| delta_text(d, &row.unit))
                .unwrap_or_default(),
            row.pct_change()
                .map(|p| format!("{}%", units::signed(p, 1)))
                .unwrap_or_default(),
            verdict_text(row).to_string(),
        ]);
    }
    t
}

fn intro(c: &Comparison) -> Vec<Block> {
    vec![
        Block::Title("Cairn comparison".to_string()),
        Block::Fields(vec![
            ("A".to_string(), c.a_name.clone()),
            ("B".to_string(), c.b_name.clone()),
        ]),
        Block::Note(format!(
            "Delta is B - A; % change is (B - A) / A. \"B is\" says whether B improves on A where a direction is better (more IOPS, less latency); changes under {SAME_PCT}% are \"same\"."
        )),
    ]
}

/// The comparison as aligned text columns.
pub fn compare_text(c: &Comparison) -> String {
    let mut blocks = intro(c);
    for s in &c.sections {
        blocks.push(Block::Table(section_table(s)));
    }
    document::text(&blocks)
}

/// The comparison as one self-contained HTML page, each section with a bar
/// chart of its % changes (green where B is better, red where worse).
pub fn compare_html(c: &Comparison) -> String {
    let mut body = document::html(&intro(c));
    for (k, s) in c.sections.iter().enumerate() {
        body.push_str(&format!(
            "<section class=\"compare\" id=\"section-{}\">",
            k + 1
        ));
        body.push_str(&document::html(&[Block::Heading(s.title.clone())]));
        let rows: Vec<(String, f64, super::chart::Rgb)> = s
            .rows
            .iter()
            .filter_map(|r| {
                let p = r.pct_change()?;
                let color = match r.verdict() {
                    Some(Verdict::Better) => palette::BETTER,
                    Some(Verdict::Worse) => palette::WORSE,
                    _ => palette::NEITHER,
                };
                Some((r.metric.clone(), p, color))
            })
            .collect();
        if !rows.is_empty() {
            let chart = DivergingBarChart {
                id: format!("change-{}", k + 1),
                kind: "compare",
                title: format!("% change from A to B: {}", s.title),
                rows,
                legend: vec![
                    ("B better".to_string(), palette::BETTER),
                    ("B worse".to_string(), palette::WORSE),
                    ("no better direction, or same".to_string(), palette::NEITHER),
                ],
            };
            body.push_str("<div class=\"charts\">");
            body.push_str(&chart.svg());
            body.push_str("</div>");
        }
        body.push_str(&document::html(&[Block::Table(section_table(s))]));
        body.push_str("</section>\n");
    }
    html::page(
        &format!("Cairn comparison: {} vs {}", c.a_name, c.b_name),
        &body,
        &format!("A: {}; B: {}", one_line(&c.a_name), one_line(&c.b_name)),
    )
}

/// Names go to [`html::page`], which escapes them; this only keeps the footer
/// on one line.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renamed_sides_keep_their_tags() {
        let mut c = Comparison {
            a_name: "db1 2026-11-21T10:00:00Z".into(),
            b_name: "db1 2026-11-21T11:00:00Z".into(),
            sections: Vec::new(),
        };
        c.rename("run1", "run2");
        assert_eq!((c.a_name.as_str(), c.b_name.as_str()), ("run1", "run2"));
        c.tag("io_uring", "sync");
        c.rename("/tmp/a", "/tmp/b");
        assert_eq!(c.a_name, "/tmp/a [io_uring]");
        assert_eq!(c.b_name, "/tmp/b [sync]");
    }

    #[test]
    fn delta_pct_and_verdict_follow_the_better_direction() {
        let r = Row::new("IOPS", "IO/s", Some(1000.0), Some(1200.0), Better::Higher);
        assert_eq!(r.delta(), Some(200.0));
        assert_eq!(r.pct_change(), Some(20.0));
        assert_eq!(r.verdict(), Some(Verdict::Better));
        let r = Row::new(
            "read latency mean",
            "us",
            Some(1000.0),
            Some(1200.0),
            Better::Lower,
        );
        assert_eq!(r.verdict(), Some(Verdict::Worse));
        let r = Row::new("x", "", Some(1000.0), Some(1004.0), Better::Lower);
        assert_eq!(r.verdict(), Some(Verdict::Same));
        let r = Row::new("x", "", Some(0.0), Some(3.0), Better::Lower);
        assert_eq!(r.pct_change(), None);
        assert_eq!(r.verdict(), Some(Verdict::Worse));
        let r = Row::new("x", "", Some(1.0), None, Better::Higher);
        assert_eq!((r.delta(), r.verdict()), (None, None));
        let r = Row::new("%util", "%", Some(50.0), Some(80.0), Better::Neither);
        assert_eq!(r.verdict(), None);
    }

    #[test]
    fn cells_carry_latency_units_and_signs() {
        assert_eq!(value_text(845.96, "us"), "846us");
        assert_eq!(delta_text(-845.0, "us"), "-845us");
        assert_eq!(delta_text(1500.0, "us"), "+1.50ms");
        assert_eq!(value_text(1.69, "ms"), "1.69ms");
        assert_eq!(delta_text(300.0, "IO/s"), "+300.0");
        assert_eq!(value_text(7_239.6, "IO/s"), "7,239.6");
        assert_eq!(value_text(55.5, "%"), "55.5%");
    }
}
