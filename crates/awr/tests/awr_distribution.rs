//! A class's latency distribution from a report's histogram rows, on the
//! rows a parser can hand over: counts that are zero, infinite or missing,
//! events whose rows share no bound, and arbitrary labels and values.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use cairn_awr::distribution::{class_distribution, LatencyDistribution};
use cairn_awr::model::{AwrReport, EventLine, Format, HistogramLine};
use cairn_kit::histogram::LatencyHistogram;
use proptest::prelude::*;

fn row(table: &str, event: &str, cells: &[(&str, Option<f64>)]) -> HistogramLine {
    HistogramLine {
        table: table.into(),
        event: event.into(),
        total_waits: None,
        buckets: cells.iter().map(|(l, v)| ((*l).to_string(), *v)).collect(),
    }
}

fn ev(name: &str, waits: Option<f64>) -> EventLine {
    EventLine {
        event: name.into(),
        waits,
        total_wait_s: None,
        avg_wait_us: None,
        pct_db_time: None,
        wait_class: None,
    }
}

/// An 11g-style row: 60% <1ms, 40% <2ms.
fn ms_row(event: &str) -> HistogramLine {
    row(
        "Wait Event Histogram",
        event,
        &[
            ("<1ms", Some(60.0)),
            ("<2ms", Some(40.0)),
            ("<4ms", None),
            ("<8ms", None),
            ("<16ms", None),
            ("<32ms", None),
            ("<=1s", None),
            (">1s", None),
        ],
    )
}

fn awr_sum(d: &LatencyDistribution) -> f64 {
    d.buckets.iter().map(|b| b.awr_pct).sum()
}

const READS: [&str; 2] = ["db file sequential read", "db file parallel read"];

#[test]
fn a_lone_events_buckets_do_not_depend_on_its_wait_count() {
    for waits in [
        Some(0.0),
        Some(f64::NAN),
        Some(f64::INFINITY),
        Some(-5.0),
        None,
    ] {
        let mut r = AwrReport::empty("t", Format::AwrText);
        r.histograms.push(ms_row("log file parallel write"));
        r.background_events
            .push(ev("log file parallel write", waits));
        let d = class_distribution(&r, &["log file parallel write"], None).unwrap();
        assert!(
            (awr_sum(&d) - 100.0).abs() < 1e-9,
            "waits {waits:?}: {:?}",
            d.buckets
        );
        assert!(
            (d.buckets[0].awr_pct - 60.0).abs() < 1e-9,
            "waits {waits:?}"
        );
    }
}

#[test]
fn an_unusable_weight_leaves_the_event_with_a_count() {
    let mut r = AwrReport::empty("t", Format::AwrText);
    r.histograms.push(ms_row("db file sequential read"));
    r.histograms.push(row(
        "Wait Event Histogram",
        "db file parallel read",
        &[("<1ms", Some(10.0)), ("<2ms", Some(90.0)), (">=2ms", None)],
    ));
    r.foreground_events.push(ev(READS[0], Some(1000.0)));
    r.foreground_events.push(ev(READS[1], Some(f64::INFINITY)));
    let d = class_distribution(&r, &READS, None).unwrap();
    assert_eq!(d.events, [READS[0]]);
    assert!(
        (d.buckets[0].awr_pct - 60.0).abs() < 1e-9,
        "{:?}",
        d.buckets
    );
}

#[test]
fn events_without_two_common_bounds_fall_back_to_the_busiest() {
    let mut r = AwrReport::empty("t", Format::AwrText);
    r.histograms.push(row(
        "Wait Event Histogram (up to 64 us)",
        READS[0],
        &[
            ("<1us", None),
            ("<2us", None),
            ("<4us", None),
            ("<8us", Some(1.0)),
            ("<16us", Some(4.0)),
            ("<32us", Some(5.0)),
            ("<64us", Some(10.0)),
            (">=64u", Some(80.0)),
        ],
    ));
    r.histograms.push(row(
        "Wait Event Histogram (up to 32 ms)",
        READS[1],
        &[
            ("<512", Some(10.0)),
            ("<1ms", Some(40.0)),
            ("<2ms", Some(50.0)),
            ("<4ms", None),
            ("<8ms", None),
            ("<16ms", None),
            ("<32ms", None),
            (">=32m", None),
        ],
    ));
    r.foreground_events.push(ev(READS[0], Some(100_000.0)));
    r.foreground_events.push(ev(READS[1], Some(1_000.0)));
    let d = class_distribution(&r, &READS, None).unwrap();
    assert_eq!(d.events, [READS[0]]);
    // Only the kept event's table is named.
    assert_eq!(d.tables, ["Wait Event Histogram (up to 64 us)"]);
    assert_eq!(d.buckets.last().unwrap().label, ">=64us");
}

#[test]
fn at_a_bound_two_tables_share_the_single_cell_wins_over_a_sum_of_rounded_ones() {
    let mut r = AwrReport::empty("t", Format::AwrText);
    // The µs table sums to 91.5 at 512 µs from rounded cells; the 32 ms
    // table's own `<512` cell says 91.9.
    r.histograms.push(row(
        "Wait Event Histogram",
        READS[0],
        &[
            ("<8us", Some(0.3)),
            ("<16us", Some(1.1)),
            ("<32us", Some(4.3)),
            ("<64us", Some(10.7)),
            ("<128u", Some(25.8)),
            ("<256u", Some(30.1)),
            ("<512u", Some(19.2)),
            (">=512", Some(8.5)),
        ],
    ));
    r.histograms.push(row(
        "Wait Event Histogram (up to 32 ms)",
        READS[0],
        &[
            ("<512", Some(91.9)),
            ("<1ms", Some(4.1)),
            ("<2ms", Some(4.0)),
            ("<4ms", None),
            ("<8ms", None),
            ("<16ms", None),
            ("<32ms", None),
            (">=32m", None),
        ],
    ));
    let d = class_distribution(&r, &READS[..1], None).unwrap();
    let below_1ms: f64 = d
        .buckets
        .iter()
        .take_while(|b| b.label != "<2ms")
        .map(|b| b.awr_pct)
        .sum();
    assert!((below_1ms - 96.0).abs() < 1e-9, "{:?}", d.buckets);
    let one_ms = d.buckets.iter().find(|b| b.label == "<1ms").unwrap();
    assert!((one_ms.awr_pct - 4.1).abs() < 1e-9, "{:?}", d.buckets);
}

const LABELS: [&str; 29] = [
    "<1us",
    "<8us",
    "<16us",
    "<128u",
    "<512u",
    ">=512",
    "<512",
    "<1ms",
    "<2ms",
    "<32ms",
    ">=32m",
    "<=1s",
    ">1s",
    "<1/8s",
    "<1/0s",
    "<0ms",
    "< 1m",
    ">=2m",
    "<2s",
    "<99999999999s",
    "<1.5ms",
    "x",
    "",
    "<",
    ">=",
    "<1µs",
    "<1h",
    "<1/8",
    "<.5ms",
];

fn value() -> impl Strategy<Value = Option<f64>> {
    prop_oneof![
        Just(None),
        Just(Some(f64::NAN)),
        Just(Some(f64::INFINITY)),
        (-10.0f64..150.0).prop_map(Some),
    ]
}

fn histogram_row() -> impl Strategy<Value = HistogramLine> {
    (
        any::<bool>(),
        0usize..2,
        value(),
        proptest::collection::vec((0usize..LABELS.len(), value()), 1..10),
    )
        .prop_map(|(main, e, waits, cells)| HistogramLine {
            table: if main {
                "Wait Event Histogram".into()
            } else {
                "Wait Event Histogram (up to 32 ms)".into()
            },
            event: READS[e].into(),
            total_waits: waits,
            buckets: cells
                .into_iter()
                .map(|(l, v)| (LABELS[l].to_string(), v))
                .collect(),
        })
}

proptest! {
    /// Whatever rows a parser hands over, no panic; a distribution that comes
    /// out has finite shares adding up to 100% on both sides, and reads back
    /// from JSON.
    #[test]
    fn arbitrary_rows_never_panic_and_both_sides_add_up(
        rows in proptest::collection::vec(histogram_row(), 0..5),
        good in proptest::option::of(0usize..2),
        waits in proptest::collection::vec(proptest::option::of(value()), 2),
        with_run in any::<bool>(),
    ) {
        let mut r = AwrReport::empty("t", Format::AwrText);
        r.histograms = rows;
        if let Some(e) = good {
            r.histograms.push(ms_row(READS[e]));
        }
        for (e, w) in READS.iter().zip(waits) {
            if let Some(w) = w {
                r.foreground_events.push(ev(e, w));
            }
        }
        let mut run = LatencyHistogram::new();
        for ns in [500u64, 90_000, 1_000_000, 3_000_000_000] {
            run.record(ns);
        }
        let run = run.to_data();
        if let Some(d) = class_distribution(&r, &READS, with_run.then_some(&run)) {
            prop_assert!(d.buckets.iter().all(|b| b.awr_pct.is_finite() && b.awr_pct >= 0.0));
            prop_assert!((awr_sum(&d) - 100.0).abs() < 1e-6, "{:?}", d.buckets);
            prop_assert!(d.buckets.iter().all(|b| b.run_pct.is_some() == with_run));
            if with_run {
                let rs: f64 = d.buckets.iter().filter_map(|b| b.run_pct).sum();
                prop_assert!((rs - 100.0).abs() < 1e-6, "run {rs}");
            }
            let j = serde_json::to_string(&d).unwrap();
            let back: LatencyDistribution = serde_json::from_str(&j).unwrap();
            prop_assert_eq!(back, d);
        }
    }
}
