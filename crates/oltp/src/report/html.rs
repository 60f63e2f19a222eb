//! `report.html` of an OLTP run: the tables of `awr.txt` (the same blocks, so
//! the two never disagree) and charts over the reporting intervals, in one
//! self-contained page built with the workload report's page and SVG charts.
//!
//! Charts: physical read, data-file write and redo write requests per second;
//! DB time against DB CPU per second (average active sessions against sessions
//! on CPU: the gap is waiting); the average wait of each event per interval
//! (one line per event, in the event's own colour); and the latency histogram
//! of each top foreground event and of each background event. Warm-up
//! intervals are shaded, as on the workload report.

use super::awr;
use crate::result::{
    EventRecord, OltpInterval, OltpResult, INTERVAL_BUCKETS_US, OLTP_SCHEMA, OLTP_SCHEMA_VERSION,
};
use crate::stats::Event;
use cairn_kit_report::chart::{
    palette, BarGroup, LineChart, LogHistogramChart, Series, TickFormat,
};
use cairn_kit_report::document::{self, Block};
use cairn_kit_report::html::{histogram_buckets, page, HISTOGRAM_BUCKETS_PER_DECADE};

/// The whole of `report.html`.
pub(crate) fn oltp_page(r: &OltpResult) -> String {
    let mut body = String::new();
    body.push_str(&document::html(&awr::header_blocks(r)));
    if !r.conf.text.is_empty() {
        body.push_str(&document::html(&[Block::Verbatim {
            title: format!("slob.conf as read ({})", r.conf.path),
            text: r.conf.text.clone(),
        }]));
    }
    body.push_str(&document::html(&awr::alert_blocks(r)));
    body.push_str(&document::html(&awr::load_profile_blocks(r)));
    charts(&mut body, &[iops_chart(r).svg(), db_time_chart(r).svg()]);
    body.push_str(&document::html(&awr::event_blocks(r)));
    let mut event_charts = vec![event_latency_chart(r).svg()];
    if let Some(c) = buckets_over_time_chart(r) {
        event_charts.push(c.svg());
    }
    charts(&mut body, &event_charts);
    body.push_str(&document::html(&awr::histogram_blocks(r)));
    let histograms: Vec<String> = histogram_events(r)
        .into_iter()
        .enumerate()
        .map(|(k, e)| histogram_chart(e, k + 1).svg())
        .collect();
    charts(&mut body, &histograms);
    body.push_str(&document::html(&awr::io_profile_blocks(r)));
    body.push_str(&document::html(&awr::activity_blocks(r)));
    body.push_str(&document::html(&awr::device_blocks(r)));
    body.push_str(&document::html(&awr::error_blocks(r)));
    body.push_str(&document::html(&awr::info_blocks(r)));
    page(
        &format!(
            "Cairn OLTP report: {} {}",
            r.environment.hostname, r.started_at
        ),
        &body,
        &format!(
            "{} {} (commit {}); every figure here is in result.json ({OLTP_SCHEMA} version {OLTP_SCHEMA_VERSION}).",
            r.tool.name, r.tool.version, r.tool.commit
        ),
    )
}

fn charts(body: &mut String, svgs: &[String]) {
    if svgs.is_empty() {
        return;
    }
    body.push_str("<div class=\"charts\">");
    for svg in svgs {
        body.push_str(svg);
    }
    body.push_str("</div>\n");
}

/// The shaded spans of warm-up intervals, adjacent ones merged.
fn warmup_bands(r: &OltpResult) -> Vec<(f64, f64, String)> {
    let mut bands: Vec<(f64, f64, String)> = Vec::new();
    for i in r.intervals.iter().filter(|i| i.warmup) {
        let start = (i.end_s - i.seconds).max(0.0);
        match bands.last_mut() {
            Some(last) if (last.1 - start).abs() < 1e-6 => last.1 = i.end_s,
            _ => bands.push((start, i.end_s, "warm-up".to_string())),
        }
    }
    bands
}

fn time_chart(
    r: &OltpResult,
    id: &str,
    kind: &'static str,
    title: &str,
    y_label: &str,
    y_format: TickFormat,
    series: Vec<Series>,
) -> LineChart {
    LineChart {
        id: id.to_string(),
        kind,
        title: title.to_string(),
        x_label: "seconds from the sessions' release".to_string(),
        y_label: y_label.to_string(),
        x_format: TickFormat::Seconds,
        y_format,
        x_from_zero: true,
        x_round_up: false,
        y_log_when_wide: y_format == TickFormat::LatencyUs,
        series,
        bands: warmup_bands(r),
    }
}

fn points(r: &OltpResult, f: impl Fn(&OltpInterval) -> f64) -> Vec<(f64, f64)> {
    r.intervals.iter().map(|i| (i.end_s, f(i))).collect()
}

fn iops_chart(r: &OltpResult) -> LineChart {
    time_chart(
        r,
        "oltp-iops",
        "oltp-iops",
        "Physical I/O requests per second",
        "requests/s",
        TickFormat::Number,
        vec![
            Series::new(
                "physical reads",
                palette::PHYS_READ,
                points(r, |i| i.physical_read_iops),
            ),
            Series::new(
                "data-file writes",
                palette::PHYS_WRITE,
                points(r, |i| i.physical_write_iops),
            ),
            Series::new(
                "redo writes",
                palette::REDO_WRITE,
                points(r, |i| i.redo_write_iops),
            ),
        ],
    )
}

fn db_time_chart(r: &OltpResult) -> LineChart {
    let per_s = |v: f64, s: f64| if s > 0.0 { v / s } else { 0.0 };
    time_chart(
        r,
        "oltp-dbtime",
        "oltp-dbtime",
        "DB time and DB CPU per second",
        "sessions (s per s)",
        TickFormat::Number,
        vec![
            Series::new(
                "DB time",
                palette::DB_TIME,
                points(r, |i| per_s(i.db_time_s, i.seconds)),
            ),
            Series::new(
                "DB CPU",
                palette::DB_CPU,
                points(r, |i| per_s(i.db_cpu_s, i.seconds)),
            ),
        ],
    )
}

/// One line per event waited on in any interval; an interval with no wait on
/// the event has no point (it had no latency, not a latency of 0).
fn event_latency_chart(r: &OltpResult) -> LineChart {
    let mut series = Vec::new();
    for event in Event::ALL {
        let pts: Vec<(f64, f64)> = r
            .intervals
            .iter()
            .filter_map(|i| {
                i.events
                    .iter()
                    .find(|e| e.event == event && e.waits > 0)
                    .map(|e| (i.end_s, e.avg_us))
            })
            .collect();
        if !pts.is_empty() {
            series.push(Series::new(
                event.name(),
                palette::EVENTS[event.index()],
                pts,
            ));
        }
    }
    time_chart(
        r,
        "oltp-event-latency",
        "oltp-event-latency",
        "Average wait per event",
        "average wait",
        TickFormat::LatencyUs,
        series,
    )
}

/// The wait histogram of the top User I/O event over time: per interval, the
/// share of its waits below each bound, so a latency tail that grows or
/// shrinks during the run shows as the lower lines moving.
fn buckets_over_time_chart(r: &OltpResult) -> Option<LineChart> {
    let top = r
        .totals
        .events
        .iter()
        .filter(|e| !e.background && e.class == "User I/O")
        .max_by(|a, b| a.time_s.total_cmp(&b.time_s))?;
    const BOUNDS_US: [(u64, &str); 5] = [
        (128, "< 128us"),
        (512, "< 512us"),
        (1_000, "< 1ms"),
        (4_000, "< 4ms"),
        (16_000, "< 16ms"),
    ];
    let colors = [
        palette::P50,
        palette::PHYS_READ,
        palette::P99,
        palette::P999,
        palette::PHYS_WRITE,
    ];
    let series = BOUNDS_US
        .iter()
        .zip(colors)
        .filter_map(|(&(bound, name), color)| {
            let upto = INTERVAL_BUCKETS_US.iter().position(|&b| b == bound)?;
            let pts: Vec<(f64, f64)> = r
                .intervals
                .iter()
                .filter_map(|i| {
                    let e = i
                        .events
                        .iter()
                        .find(|e| e.event == top.event && e.waits > 0)?;
                    let below: u64 = e.buckets.iter().take(upto + 1).sum();
                    Some((i.end_s, 100.0 * below as f64 / e.waits as f64))
                })
                .collect();
            (!pts.is_empty()).then(|| Series::new(name, color, pts))
        })
        .collect::<Vec<_>>();
    if series.is_empty() {
        return None;
    }
    Some(time_chart(
        r,
        "oltp-event-buckets",
        "oltp-event-buckets",
        &format!("{}: % of waits below each bound, over time", top.name),
        "% of waits",
        TickFormat::Number,
        series,
    ))
}

/// The top foreground events (DB CPU aside) and every background event.
fn histogram_events(r: &OltpResult) -> Vec<&EventRecord> {
    let mut out: Vec<&EventRecord> = awr::top_foreground(r)
        .into_iter()
        .filter_map(|(e, _)| e)
        .collect();
    out.extend(
        r.totals
            .events
            .iter()
            .filter(|e| e.background && e.waits > 0),
    );
    out
}

fn histogram_chart(e: &EventRecord, k: usize) -> LogHistogramChart {
    LogHistogramChart {
        id: format!("oltp-histogram-{k}"),
        kind: "histogram",
        title: format!("Latency histogram: {}", e.name),
        buckets_per_decade: HISTOGRAM_BUCKETS_PER_DECADE,
        y_label: "% of waits",
        groups: vec![BarGroup {
            name: format!("{} ({} waits)", e.name, e.waits),
            color: palette::EVENTS[e.event.index()],
            buckets: histogram_buckets(&e.histogram),
        }],
    }
}
