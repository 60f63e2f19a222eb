//! A class's latency distribution in the report next to the run's.
//!
//! An AWR report describes each wait event's latency twice: its average
//! (which the verdict compares) and its Wait Event Histogram tables (% of
//! waits per power-of-two bucket). An average hides the shape — 2 ms can be
//! every read at 2 ms or 90% at 200 µs and a tail at 20 ms — so the verdict
//! also sets the report's buckets next to the run's, counted at the same
//! bounds from the run's whole latency histogram.
//!
//! Every table a report prints for an event gives % of *all* its waits, with
//! a first bucket that takes everything below the table's range and a last
//! that takes everything above (`docs/awr-formats.md` §1.11). So each row is
//! a complete distribution, and the rows of one event merge into one
//! cumulative curve with the bounds of all of them: `<8us … <512us` from the
//! 12.2 `Wait Event Histogram`, `<1ms … <32ms` from its `(up to 32 ms)`
//! table, and so on.
//!
//! Units follow the reports' own notes: in the 12.2+ tables (µs buckets, `up
//! to` titles) "ms is 1024 microseconds" and "s is 1024 milliseconds"; in the
//! 10g/11g and Statspack tables a ms is a ms and "`<=1s` is truly <1024ms";
//! `m` in the minutes tables is "64*1024 milliseconds". Labels AWR cut to the
//! column (`<128u`, `>=512`, `<512`, `>=32m`) are read by the one unit that
//! keeps the row's bounds increasing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::model::AwrReport;
use cairn_kit::histogram::LatencyHistogram;
use cairn_kit::result::HistogramData;

/// One bucket: `[previous bound, upper_ns)`, or everything from the last
/// bound on (`upper_ns` `None`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DistributionBucket {
    /// As the report heads it, uncut: `<8us`, `<1ms`, `<1/8s`, `>=32ms`.
    pub label: String,
    pub upper_ns: Option<u64>,
    /// % of the report's waits in the bucket.
    pub awr_pct: f64,
    /// % of the run's I/Os of the class in the bucket (`None`: no I/O done).
    pub run_pct: Option<f64>,
}

/// A class's distribution: the report's events (weighted by their waits when
/// there are several) against the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyDistribution {
    pub events: Vec<String>,
    /// The report's tables the buckets come from.
    pub tables: Vec<String>,
    pub buckets: Vec<DistributionBucket>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    Us,
    Ms,
    S,
    Min,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Us => "us",
            Unit::Ms => "ms",
            Unit::S => "s",
            Unit::Min => "m",
        }
    }

    /// Nanoseconds in one unit. `binary`: the 12.2+ tables' 1024-based units.
    fn ns(self, binary: bool) -> f64 {
        let ms = if binary { 1_024_000.0 } else { 1_000_000.0 };
        match self {
            Unit::Us => 1_000.0,
            Unit::Ms => ms,
            Unit::S => 1024.0 * ms,
            Unit::Min => 64.0 * 1024.0 * ms,
        }
    }
}

/// A bucket heading read: `<` / `<=` is an upper bound (AWR's `<=1s` is
/// "truly <1024ms"), `>` / `>=` the open last bucket.
#[derive(Debug, Clone, PartialEq)]
struct Heading {
    upper: bool,
    number: String,
    value: f64,
    /// The units the heading could be in, the likelier first.
    units: Vec<Unit>,
}

fn read_heading(label: &str) -> Option<Heading> {
    let s: String = label.chars().filter(|c| !c.is_whitespace()).collect();
    let (upper, rest) = if let Some(r) = s.strip_prefix("<=") {
        (true, r)
    } else if let Some(r) = s.strip_prefix('<') {
        (true, r)
    } else if let Some(r) = s.strip_prefix(">=") {
        (false, r)
    } else if let Some(r) = s.strip_prefix('>') {
        (false, r)
    } else {
        return None;
    };
    let split = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '/'))
        .unwrap_or(rest.len());
    let (number, unit) = rest.split_at(split);
    let value = match number.split_once('/') {
        Some((n, d)) => {
            let (n, d) = (n.parse::<f64>().ok()?, d.parse::<f64>().ok()?);
            (d > 0.0).then(|| n / d)?
        }
        None => number.parse::<f64>().ok()?,
    };
    if !(value.is_finite() && value > 0.0) {
        return None;
    }
    let units = match unit.to_ascii_lowercase().as_str() {
        "us" | "u" => vec![Unit::Us],
        "ms" => vec![Unit::Ms],
        "s" => vec![Unit::S],
        // `>=32m` is 32 ms cut to the column; `< 1m` in the minutes table is a minute.
        "m" => vec![Unit::Ms, Unit::Min],
        // `<512` / `>=512`: microseconds cut to the column.
        "" => vec![Unit::Us, Unit::Ms],
        _ => return None,
    };
    Some(Heading {
        upper,
        number: number.to_string(),
        value,
        units,
    })
}

/// A row's bucket bounds: (uncut label, upper bound in ns or `None` for the
/// open last bucket). `None` when the headings do not make increasing bounds.
fn row_bounds(labels: &[&str], binary: bool) -> Option<Vec<(String, Option<u64>)>> {
    let mut out: Vec<(String, Option<u64>)> = Vec::with_capacity(labels.len());
    let mut prev: Option<u64> = None;
    for (i, l) in labels.iter().enumerate() {
        let h = read_heading(l)?;
        let ns_of = |u: Unit| (h.value * u.ns(binary)).round() as u64;
        if h.upper {
            let (u, ns) = h
                .units
                .iter()
                .map(|&u| (u, ns_of(u)))
                .find(|&(_, ns)| prev.is_none_or(|p| ns > p))?;
            out.push((format!("<{}{}", h.number, u.name()), Some(ns)));
            prev = Some(ns);
        } else {
            // The open bucket is the last, from the bound before it.
            if i + 1 != labels.len() {
                return None;
            }
            let p = prev?;
            let u = h.units.iter().copied().find(|&u| ns_of(u) == p)?;
            out.push((format!(">={}{}", h.number, u.name()), None));
        }
    }
    Some(out)
}

/// Whether the report's histograms are the 12.2+ kind (µs buckets, 1024-based
/// units).
fn binary_units(report: &AwrReport) -> bool {
    report.histograms.iter().any(|h| {
        h.table.contains("(up to")
            || h.buckets.iter().any(|(l, _)| {
                let l = l.trim_end();
                l.ends_with("us") || l.ends_with('u')
            })
    })
}

/// One event's curve: the cumulative % of its waits below each bound its
/// rows give, with the label of the bucket that ends there and how many
/// rounded cells were summed to get it.
struct Curve {
    event: String,
    points: BTreeMap<u64, (f64, String, usize)>,
    tables: Vec<String>,
    /// The event's waits, for weighting (finite and above zero, or none).
    waits: Option<f64>,
}

fn event_curve(report: &AwrReport, event: &str, binary: bool) -> Option<Curve> {
    let mut points: BTreeMap<u64, (f64, String, usize)> = BTreeMap::new();
    let mut tables = Vec::new();
    let mut main_waits = None;
    for row in report.histograms.iter().filter(|h| h.event == event) {
        let labels: Vec<&str> = row.buckets.iter().map(|(l, _)| l.as_str()).collect();
        let Some(bounds) = row_bounds(&labels, binary) else {
            continue;
        };
        // A blank cell is a true zero; a row that does not add up to 100%
        // (cut, or misread) describes nothing.
        let values: Vec<f64> = row.buckets.iter().map(|(_, v)| v.unwrap_or(0.0)).collect();
        let sum: f64 = values.iter().sum();
        if !(98.0..=102.0).contains(&sum) || values.iter().any(|v| !(0.0..=100.0).contains(v)) {
            continue;
        }
        let mut cum = 0.0;
        for (cells, ((label, upper), v)) in bounds.into_iter().zip(values).enumerate() {
            cum += v;
            let Some(ns) = upper else {
                continue;
            };
            // Where two tables give the same bound, the one that summed fewer
            // rounded cells is nearer the truth (12.2's `<512` of the 32 ms
            // table is one cell; the µs table's sum to 512 µs is seven).
            let point = (cum * 100.0 / sum, label, cells + 1);
            match points.get(&ns) {
                Some(have) if have.2 <= point.2 => {}
                _ => {
                    points.insert(ns, point);
                }
            }
        }
        if !tables.contains(&row.table) {
            tables.push(row.table.clone());
        }
        if row.table == "Wait Event Histogram" {
            main_waits = main_waits.or(row.total_waits);
        }
    }
    if points.is_empty() {
        return None;
    }
    // Rounded cells of different tables may disagree by a tenth: keep the
    // curve rising.
    let mut high: f64 = 0.0;
    for (pct, ..) in points.values_mut() {
        high = high.max(pct.clamp(0.0, 100.0));
        *pct = high;
    }
    let waits = report
        .event(event)
        .and_then(|e| e.waits)
        .or(main_waits)
        .filter(|w| w.is_finite() && *w > 0.0);
    Some(Curve {
        event: event.to_string(),
        points,
        tables,
        waits,
    })
}

/// The bounds every curve has, with the first curve's labels.
fn common_bounds(curves: &[Curve]) -> Vec<(u64, String)> {
    curves.first().map_or_else(Vec::new, |first| {
        first
            .points
            .iter()
            .filter(|(ns, _)| curves.iter().all(|c| c.points.contains_key(ns)))
            .map(|(ns, (_, label, _))| (*ns, label.clone()))
            .collect()
    })
}

/// The distribution of a class whose report events are `events`, against the
/// run's latency histogram (`None` or empty: the class did no I/O). `None`
/// when the report has no usable histogram row for any of the events.
pub fn class_distribution(
    report: &AwrReport,
    events: &[&str],
    run: Option<&HistogramData>,
) -> Option<LatencyDistribution> {
    let binary = binary_units(report);
    let mut curves: Vec<Curve> = events
        .iter()
        .filter_map(|e| event_curve(report, e, binary))
        .collect();
    // Several events are weighted by their waits, at the bounds they share.
    // Without counts, or without two shared bounds, the busiest event (else
    // the first) stands for the class.
    if curves.len() > 1 {
        let weighted = curves.iter().filter(|c| c.waits.is_some()).count();
        if weighted > 1 {
            curves.retain(|c| c.waits.is_some());
        }
        if weighted <= 1 || common_bounds(&curves).len() < 2 {
            let busiest = curves
                .iter()
                .enumerate()
                .max_by(|a, b| {
                    let w = |c: &Curve| c.waits.unwrap_or(0.0);
                    w(a.1).total_cmp(&w(b.1)).then(b.0.cmp(&a.0))
                })
                .map_or(0, |(i, _)| i);
            let keep = curves.swap_remove(busiest);
            curves = vec![keep];
        }
    }
    let bounds = common_bounds(&curves);
    if bounds.is_empty() {
        return None;
    }
    let weight = |c: &Curve| {
        if curves.len() == 1 {
            1.0
        } else {
            c.waits.unwrap_or(0.0)
        }
    };
    let total_w: f64 = curves.iter().map(weight).sum();
    if !(total_w.is_finite() && total_w > 0.0) {
        return None;
    }
    let awr_below = |ns: u64| -> f64 {
        curves
            .iter()
            .map(|c| weight(c) * c.points.get(&ns).map_or(0.0, |v| v.0))
            .sum::<f64>()
            / total_w
    };
    let mut tables: Vec<String> = Vec::new();
    for t in curves.iter().flat_map(|c| &c.tables) {
        if !tables.contains(t) {
            tables.push(t.clone());
        }
    }
    let run_hist = run
        .map(LatencyHistogram::from_data)
        .filter(|h| h.count() > 0);
    let run_below = |ns: u64| -> Option<f64> {
        run_hist
            .as_ref()
            .map(|h| 100.0 * h.count_below(ns) as f64 / h.count() as f64)
    };
    let mut buckets = Vec::with_capacity(bounds.len() + 1);
    let (mut awr_prev, mut run_prev) = (0.0, Some(0.0));
    for (ns, label) in &bounds {
        let (a, r) = (awr_below(*ns), run_below(*ns));
        buckets.push(DistributionBucket {
            label: label.clone(),
            upper_ns: Some(*ns),
            awr_pct: (a - awr_prev).max(0.0),
            run_pct: r.zip(run_prev).map(|(r, p)| (r - p).max(0.0)),
        });
        (awr_prev, run_prev) = (a, r);
    }
    buckets.push(DistributionBucket {
        label: format!(">={}", open_label(&bounds)),
        upper_ns: None,
        awr_pct: (100.0 - awr_prev).max(0.0),
        run_pct: run_prev.map(|p| (100.0 - p).max(0.0)),
    });
    // Leading and trailing buckets empty on both sides say nothing.
    let empty = |b: &DistributionBucket| b.awr_pct < 1e-9 && b.run_pct.is_none_or(|r| r < 1e-9);
    while buckets.len() > 1 && buckets.first().is_some_and(empty) {
        buckets.remove(0);
    }
    while buckets.len() > 1 && buckets.last().is_some_and(empty) {
        buckets.pop();
    }
    Some(LatencyDistribution {
        events: curves.into_iter().map(|c| c.event).collect(),
        tables,
        buckets,
    })
}

/// `32ms` for bounds ending `<32ms`.
fn open_label(bounds: &[(u64, String)]) -> String {
    bounds
        .last()
        .map(|(_, l)| l.trim_start_matches('<').to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::{Format, HistogramLine};

    fn row(table: &str, event: &str, cells: &[(&str, Option<f64>)]) -> HistogramLine {
        HistogramLine {
            table: table.into(),
            event: event.into(),
            total_waits: None,
            buckets: cells.iter().map(|(l, v)| ((*l).to_string(), *v)).collect(),
        }
    }

    fn bounds(labels: &[&str], binary: bool) -> Vec<(String, Option<u64>)> {
        row_bounds(labels, binary).unwrap()
    }

    #[test]
    fn cut_headings_are_read_by_the_unit_that_keeps_the_bounds_rising() {
        let us = bounds(&["<8us", "<16us", "<128u", "<256u", "<512u", ">=512"], true);
        assert_eq!(us[2], ("<128us".into(), Some(128_000)));
        assert_eq!(us[5], (">=512us".into(), None));
        let ms = bounds(&["<512", "<1ms", "<2ms", "<32ms", ">=32m"], true);
        assert_eq!(ms[0], ("<512us".into(), Some(512_000)));
        assert_eq!(ms[1], ("<1ms".into(), Some(1_024_000)));
        assert_eq!(ms[4], (">=32ms".into(), None));
        let min = bounds(&["<2s", "<32s", "< 1m", "< 2m", ">=2m"], true);
        assert_eq!(min[2].0, "<1m");
        assert_eq!(min[2].1, Some(64 * 1024 * 1_024_000));
        let eighths = bounds(&["<32ms", "<64ms", "<1/8s", "<1/4s", "<2s", ">=2s"], false);
        assert_eq!(eighths[2], ("<1/8s".into(), Some(128_000_000)));
        // 11g: a ms is a ms, and `<=1s` is truly below 1024 ms.
        let old = bounds(&["<1ms", "<32ms", "<=1s", ">1s"], false);
        assert_eq!(old[0].1, Some(1_000_000));
        assert_eq!(old[2], ("<1s".into(), Some(1_024_000_000)));
        assert_eq!(old[3], (">=1s".into(), None));
    }

    #[test]
    fn headings_that_do_not_rise_or_end_early_are_refused() {
        assert!(row_bounds(&["<2ms", "<1ms"], false).is_none());
        assert!(row_bounds(&["<1ms", ">=1ms", "<2ms"], false).is_none());
        assert!(row_bounds(&["<1ms", "Waits"], false).is_none());
        assert!(row_bounds(&["<0ms"], false).is_none());
    }

    /// The 12.2 rows of `awr_122.txt` for db file sequential read: the µs
    /// table and the up-to-32-ms table agree at 512 µs and merge.
    fn report_122() -> AwrReport {
        let mut r = AwrReport::empty("t", Format::AwrText);
        r.histograms.push(row(
            "Wait Event Histogram",
            "db file sequential read",
            &[
                ("<8us", Some(0.3)),
                ("<16us", Some(1.2)),
                ("<32us", Some(4.4)),
                ("<64us", Some(10.8)),
                ("<128u", Some(25.9)),
                ("<256u", Some(30.1)),
                ("<512u", Some(19.2)),
                (">=512", Some(8.1)),
            ],
        ));
        r.histograms.push(row(
            "Wait Event Histogram (up to 32 ms)",
            "db file sequential read",
            &[
                ("<512", Some(91.9)),
                ("<1ms", Some(4.1)),
                ("<2ms", Some(1.9)),
                ("<4ms", Some(0.9)),
                ("<8ms", Some(0.6)),
                ("<16ms", Some(0.3)),
                ("<32ms", Some(0.2)),
                (">=32m", Some(0.1)),
            ],
        ));
        r
    }

    #[test]
    fn the_tables_of_one_event_merge_into_one_set_of_buckets() {
        let d = class_distribution(&report_122(), &["db file sequential read"], None).unwrap();
        let labels: Vec<&str> = d.buckets.iter().map(|b| b.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "<8us", "<16us", "<32us", "<64us", "<128us", "<256us", "<512us", "<1ms", "<2ms",
                "<4ms", "<8ms", "<16ms", "<32ms", ">=32ms"
            ]
        );
        let pct: Vec<f64> = d
            .buckets
            .iter()
            .map(|b| (b.awr_pct * 10.0).round() / 10.0)
            .collect();
        assert_eq!(
            pct,
            [0.3, 1.2, 4.4, 10.8, 25.9, 30.1, 19.2, 4.1, 1.9, 0.9, 0.6, 0.3, 0.2, 0.1]
        );
        assert_eq!(d.tables.len(), 2);
        assert!(d.buckets.iter().all(|b| b.run_pct.is_none()));
    }

    #[test]
    fn the_run_is_counted_at_the_reports_bounds() {
        let mut h = LatencyHistogram::new();
        // 30 I/Os at 100 µs, 60 at 300 µs, 10 at 3 ms.
        for (ns, n) in [(100_000u64, 30u64), (300_000, 60), (3_000_000, 10)] {
            for _ in 0..n {
                h.record(ns);
            }
        }
        let d = class_distribution(
            &report_122(),
            &["db file sequential read"],
            Some(&h.to_data()),
        )
        .unwrap();
        let run = |label: &str| {
            d.buckets
                .iter()
                .find(|b| b.label == label)
                .and_then(|b| b.run_pct)
                .unwrap()
        };
        assert!((run("<128us") - 30.0).abs() < 1e-9);
        assert!((run("<512us") - 60.0).abs() < 1e-9);
        assert!((run("<4ms") - 10.0).abs() < 1e-9);
        assert!(run("<8us").abs() < 1e-9);
        let total: f64 = d.buckets.iter().filter_map(|b| b.run_pct).sum();
        assert!((total - 100.0).abs() < 1e-9);
    }

    #[test]
    fn two_events_are_weighted_by_their_waits_at_the_bounds_both_have() {
        let mut r = AwrReport::empty("t", Format::AwrText);
        let ms = |event: &str, below_1ms: f64| {
            row(
                "Wait Event Histogram",
                event,
                &[
                    ("<1ms", Some(below_1ms)),
                    ("<2ms", Some(100.0 - below_1ms)),
                    ("<4ms", None),
                    ("<8ms", None),
                    ("<16ms", None),
                    ("<32ms", None),
                    ("<=1s", None),
                    (">1s", None),
                ],
            )
        };
        r.histograms.push(ms("db file sequential read", 80.0));
        r.histograms.push(ms("db file parallel read", 20.0));
        for (name, waits) in [
            ("db file sequential read", 3000.0),
            ("db file parallel read", 1000.0),
        ] {
            r.foreground_events.push(crate::model::EventLine {
                event: name.into(),
                waits: Some(waits),
                total_wait_s: None,
                avg_wait_us: None,
                pct_db_time: None,
                wait_class: None,
            });
        }
        let d = class_distribution(
            &r,
            &["db file sequential read", "db file parallel read"],
            None,
        )
        .unwrap();
        assert_eq!(d.events.len(), 2);
        assert_eq!(d.buckets[0].label, "<1ms");
        assert!((d.buckets[0].awr_pct - 65.0).abs() < 1e-9);
        assert!((d.buckets[1].awr_pct - 35.0).abs() < 1e-9);
        assert_eq!(d.buckets.len(), 2, "{:?}", d.buckets);
    }

    #[test]
    fn a_row_that_does_not_add_up_is_not_used() {
        let mut r = AwrReport::empty("t", Format::AwrText);
        r.histograms.push(row(
            "Wait Event Histogram",
            "db file sequential read",
            &[("<1ms", Some(40.0)), ("<2ms", Some(10.0)), (">=2ms", None)],
        ));
        assert!(class_distribution(&r, &["db file sequential read"], None).is_none());
        assert!(class_distribution(&report_122(), &["direct path read"], None).is_none());
    }
}
