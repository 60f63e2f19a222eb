//! Two AWR reports side by side: the metric table DBAs build by hand when
//! comparing two storage setups ("pythian-afd" in docs/sources.md: ASMLib
//! against ASMFD) — the Load Profile's work rates and the I/O waits — as a
//! [`Comparison`], so `cairn report compare` renders it like a bench comparison.
//!
//! Each figure is read where the report has it: the Load Profile under either
//! label set ([`Figure`]), else the Instance Activity statistic it summarises
//! (11g reports have no `Read IO requests:` row); a wait's average from its
//! event line, else its total time ÷ waits. A figure neither report has is a
//! row of dashes, never a zero.

use cairn_kit_report::compare::{Better, Comparison, Row, Section};

use super::derive::{find_statistic, norm};
use super::model::{AwrReport, EventLine};
use super::profile::Figure;

const MIB: f64 = 1024.0 * 1024.0;

/// The post's rows: Load Profile per second, then average waits.
pub fn compare_awr(a: &AwrReport, b: &AwrReport) -> Comparison {
    let (mut a_name, mut b_name) = (name(a), name(b));
    if a_name == b_name {
        a_name.push_str(" (A)");
        b_name.push_str(" (B)");
    }
    type Load = (&'static str, &'static str, fn(&AwrReport) -> Option<f64>);
    let load: [Load; 8] = [
        ("Redo size (bytes/s)", "", |r| {
            profile(r, Figure::RedoSize).or_else(|| stat(r, "redo size"))
        }),
        ("Logical reads (blocks/s)", "", |r| {
            profile(r, Figure::LogicalReads).or_else(|| stat(r, "session logical reads"))
        }),
        ("Block changes (/s)", "", |r| {
            profile(r, Figure::BlockChanges).or_else(|| stat(r, "db block changes"))
        }),
        ("Physical reads (blocks/s)", "", |r| {
            profile(r, Figure::PhysicalReads).or_else(|| stat(r, "physical reads"))
        }),
        ("Read IO requests", "IO/s", |r| {
            profile(r, Figure::ReadIoRequests).or_else(|| stat(r, "physical read IO requests"))
        }),
        ("Read IO", "MB/s", |r| {
            profile(r, Figure::ReadIoMb).or_else(|| Some(stat(r, "physical read bytes")? / MIB))
        }),
        ("Executes (/s)", "", |r| {
            profile(r, Figure::Executes).or_else(|| stat(r, "execute count"))
        }),
        ("Transactions (/s)", "", |r| {
            profile(r, Figure::Transactions).or_else(|| {
                Some(stat(r, "user commits")? + stat(r, "user rollbacks").unwrap_or(0.0))
            })
        }),
    ];
    let load_rows = load
        .iter()
        .map(|(metric, unit, f)| Row::new(metric, unit, f(a), f(b), Better::Higher))
        .collect();
    type Wait = (&'static str, fn(&AwrReport) -> Option<f64>);
    let waits: [Wait; 3] = [
        ("db file sequential read avg wait", |r| {
            event_avg_us(r, "db file sequential read")
        }),
        ("db file parallel read avg wait", |r| {
            event_avg_us(r, "db file parallel read")
        }),
        ("User I/O avg wait", user_io_avg_us),
    ];
    let wait_rows = waits
        .iter()
        .map(|(metric, f)| Row::new(metric, "us", f(a), f(b), Better::Lower))
        .collect();
    Comparison {
        a_name,
        b_name,
        sections: vec![
            Section {
                title: "Load Profile (per second)".to_string(),
                rows: load_rows,
            },
            Section {
                title: "I/O waits (average wait)".to_string(),
                rows: wait_rows,
            },
        ],
    }
}

/// The file name, else the database and snapshots.
fn name(r: &AwrReport) -> String {
    if !r.source.is_empty() {
        return r.source.clone();
    }
    let h = &r.header;
    format!(
        "{} snaps {}-{}",
        h.db_name.as_deref().unwrap_or("AWR report"),
        h.begin_snap_id.map_or("?".to_string(), |s| s.to_string()),
        h.end_snap_id.map_or("?".to_string(), |s| s.to_string())
    )
}

fn finite(v: Option<f64>) -> Option<f64> {
    v.filter(|v| v.is_finite())
}

fn profile(r: &AwrReport, figure: Figure) -> Option<f64> {
    r.load_profile
        .iter()
        .find(|l| Figure::from_label(l.label.trim().trim_end_matches(':')) == Some(figure))
        .and_then(|l| finite(l.per_second))
}

/// A statistic's per-second value (an ambiguous cut name is no value).
fn stat(r: &AwrReport, full: &str) -> Option<f64> {
    finite(find_statistic(r, full).ok()??.per_second)
}

/// Total time ÷ waits when both are printed (11g and Statspack print the
/// average rounded to whole milliseconds); the printed average otherwise.
fn avg_us(avg: Option<f64>, total_s: Option<f64>, waits: Option<f64>) -> Option<f64> {
    let exact = (|| {
        let (t, w) = (finite(total_s)?, finite(waits)?);
        (w > 0.0).then(|| t * 1e6 / w)
    })();
    exact.or_else(|| finite(avg))
}

fn event_avg_us(r: &AwrReport, event: &str) -> Option<f64> {
    let want = norm(event);
    r.foreground_events
        .iter()
        .chain(&r.top_events)
        .chain(&r.background_events)
        .filter(|e| norm(&e.event) == want)
        .find_map(|e| avg_us(e.avg_wait_us, e.total_wait_s, e.waits))
}

fn is_user_io(class: Option<&str>) -> bool {
    class.is_some_and(|c| norm(c) == "user i/o")
}

/// The User I/O wait class's average; else total time ÷ waits over the
/// foreground events of that class (the Top events when there is no
/// foreground table — a partial sum, but the largest waits).
fn user_io_avg_us(r: &AwrReport) -> Option<f64> {
    if let Some(v) = r
        .wait_classes
        .iter()
        .filter(|c| norm(&c.wait_class) == "user i/o")
        .find_map(|c| avg_us(c.avg_wait_us, c.total_wait_s, c.waits))
    {
        return Some(v);
    }
    // 11g's foreground table has no Wait Class column: then the Top events'.
    let classed = r.foreground_events.iter().any(|e| e.wait_class.is_some());
    let events: &[EventLine] = if classed {
        &r.foreground_events
    } else {
        &r.top_events
    };
    let (mut time_s, mut waits) = (0.0, 0.0);
    for e in events
        .iter()
        .filter(|e| is_user_io(e.wait_class.as_deref()))
    {
        let (Some(w), Some(t)) = (finite(e.waits), finite(e.total_wait_s)) else {
            continue;
        };
        time_s += t;
        waits += w;
    }
    (waits > 0.0).then(|| time_s * 1e6 / waits)
}
