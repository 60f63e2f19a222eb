//! `report.html`: the summary's tables and the charts, in one file that needs
//! nothing else — no network, no script, no external style sheet or font — so it
//! can be mailed, archived and opened years later.
//!
//! Charts are inline SVG drawn by [`super::chart`]: per run, IOPS and MB/s over
//! time (warm-up shaded), latency percentiles over time, and the latency
//! histogram of the measured window; per curve, latency versus load. Every text
//! from the result (run, workload, host and file names) is escaped, so a name
//! cannot inject markup. Element ids are built from positions, never from names.

use std::collections::BTreeMap;

use cairn_kit::model::Source;
use cairn_kit::result::{BenchResult, HistogramData, RunRecord, SCHEMA, SCHEMA_VERSION};

use super::chart::{palette, BarGroup, LineChart, LogHistogramChart, Series, TickFormat};
use super::document::{self, escape, Block};
use super::summary;

/// Buckets per decade in the latency histogram chart: 5 gives 1, 1.6, 2.5, 4,
/// 6.3 steps — fine enough to see two modes, coarse enough that each bar holds
/// enough I/Os to mean something.
pub const HISTOGRAM_BUCKETS_PER_DECADE: u32 = 5;

/// The style sheet, inline.
pub const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;color:#222;margin:24px;max-width:1180px}\
h1{font-size:22px;margin:0 0 12px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ccc;padding-bottom:4px}\
table{border-collapse:collapse;margin:6px 0 16px;font-size:13px}\
th,td{padding:2px 9px;border-bottom:1px solid #e4e4e4;white-space:nowrap}\
th{background:#f4f4f4}.l{text-align:left}.r{text-align:right;font-variant-numeric:tabular-nums}\
caption{text-align:left;font-weight:bold;padding:4px 0;white-space:nowrap}\
table.fields th{text-align:left;background:none;vertical-align:top}table.fields td{white-space:normal}\
.alert{background:#fff1f1;border-left:5px solid #b00020;padding:8px 12px;font-weight:bold;color:#6d0013}\
.note{color:#555}.charts{display:flex;flex-wrap:wrap;gap:12px;margin:8px 0}\
svg.chart{border:1px solid #ddd;background:#fff}\
section.run{overflow-x:auto}pre{background:#f6f6f6;padding:8px;overflow-x:auto}\
footer{color:#777;font-size:12px;margin-top:32px}";

/// The whole of `report.html`.
pub fn report_html(result: &BenchResult) -> String {
    let mut body = String::new();
    body.push_str(&document::html(&summary::header_blocks(result)));
    body.push_str(&document::html(&summary::overview_blocks(result)));

    for (k, id) in summary::curve_ids(result).into_iter().enumerate() {
        let name = summary::curve_name(result, id);
        body.push_str(&format!("<section class=\"curve\" id=\"curve-{}\">", k + 1));
        body.push_str(&document::html(&[Block::Heading(format!(
            "Latency versus load: {name}"
        ))]));
        body.push_str("<div class=\"charts\">");
        body.push_str(&curve_chart(result, id, k + 1, &name).svg());
        body.push_str("</div>");
        body.push_str(&document::html(&[Block::Table(summary::curve_table(
            result, id,
        ))]));
        body.push_str("</section>\n");
    }

    for (i, run) in result.runs.iter().enumerate() {
        let n = i + 1;
        body.push_str(&format!("<section class=\"run\" id=\"run-{n}\">"));
        body.push_str(&document::html(&[Block::Heading(format!(
            "Run {n}: {}",
            run.title()
        ))]));
        body.push_str(&document::html(&summary::run_fields_and_alerts(run)));
        body.push_str("<div class=\"charts\">");
        for chart in run_charts(run, n) {
            body.push_str(&chart);
        }
        body.push_str("</div>");
        body.push_str(&document::html(&summary::run_tables(run)));
        body.push_str("</section>\n");
    }

    if let Source::Vdbench { files, .. } = &result.plan.source {
        let blocks: Vec<Block> = files
            .iter()
            .map(|f| Block::Verbatim {
                title: format!("Parameter file {}", f.path.display()),
                text: f.text.clone(),
            })
            .collect();
        if !blocks.is_empty() {
            body.push_str(&document::html(&[Block::Heading(
                "Parameter files".to_string(),
            )]));
            body.push_str(&document::html(&blocks));
        }
    }

    let title = format!(
        "Cairn bench report: {} {}",
        result.environment.hostname, result.started_at
    );
    page(
        &title,
        &body,
        &format!(
            "{} {} (commit {}); every figure here is in result.json ({SCHEMA} version {SCHEMA_VERSION}).",
            result.tool.name, result.tool.version, result.tool.commit
        ),
    )
}

/// A whole HTML page around `body` (already escaped markup).
pub fn page(title: &str, body: &str, footer: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head>\n<body>\n{body}<footer>{}</footer>\n</body></html>\n",
        escape(title),
        escape(footer)
    )
}

/// The four charts of one run, as SVG.
fn run_charts(run: &RunRecord, n: usize) -> Vec<String> {
    let title = run.title();
    let bands = warmup_bands(run);
    let points = |f: &dyn Fn(&cairn_kit::result::IntervalStats) -> f64| -> Vec<(f64, f64)> {
        run.intervals.iter().map(|i| (i.end_s, f(&i.all))).collect()
    };

    let mut iops = vec![Series::new("IO/s", palette::IOPS, points(&|s| s.iops))];
    if let Some(t) = run.target_iops.or(run.rate_outcome.target_iops) {
        let end = run
            .intervals
            .last()
            .map(|i| i.end_s)
            .unwrap_or(run.elapsed_s);
        let mut target = Series::new("target", palette::IOPS_TARGET, vec![(0.0, t), (end, t)]);
        target.dashed = true;
        iops.push(target);
    }
    let time_chart =
        |id: String, kind: &'static str, what: &str, y_label: &str, y_format, series, log| {
            LineChart {
                id,
                kind,
                title: format!("{what}: {title}"),
                x_label: "seconds from the run's start".to_string(),
                y_label: y_label.to_string(),
                x_format: TickFormat::Seconds,
                y_format,
                x_from_zero: true,
                x_round_up: false,
                y_log_when_wide: log,
                series,
                bands: bands.clone(),
            }
        };
    let iops_chart = time_chart(
        format!("iops-{n}"),
        "iops",
        "I/O rate",
        "IO/s",
        TickFormat::Number,
        iops,
        false,
    );
    let mbps_chart = time_chart(
        format!("mbps-{n}"),
        "mbps",
        "Throughput",
        "MB/s",
        TickFormat::Number,
        vec![Series::new(
            "MB/s",
            palette::MB_PER_S,
            points(&|s| s.mb_per_s),
        )],
        false,
    );
    let latency_chart = time_chart(
        format!("latency-{n}"),
        "latency",
        "Latency percentiles",
        "latency",
        TickFormat::LatencyUs,
        vec![
            Series::new("p50", palette::P50, points(&|s| s.p50_us)),
            Series::new("p99", palette::P99, points(&|s| s.p99_us)),
            Series::new("p99.9", palette::P999, points(&|s| s.p999_us)),
        ],
        true,
    );
    vec![
        iops_chart.svg(),
        mbps_chart.svg(),
        latency_chart.svg(),
        histogram_chart(run, n, &title).svg(),
    ]
}

/// The latency histogram of run `n`'s measured window: reads and writes, each
/// only if the run did any.
fn histogram_chart(run: &RunRecord, n: usize, title: &str) -> LogHistogramChart {
    let t = &run.totals.all;
    let mut groups = Vec::new();
    if t.read.ios > 0 {
        groups.push(BarGroup {
            name: "read".to_string(),
            color: palette::HIST_READ,
            buckets: histogram_buckets(&t.read.histogram),
        });
    }
    if t.write.ios > 0 {
        groups.push(BarGroup {
            name: "write".to_string(),
            color: palette::HIST_WRITE,
            buckets: histogram_buckets(&t.write.histogram),
        });
    }
    LogHistogramChart {
        id: format!("histogram-{n}"),
        kind: "histogram",
        title: format!("Latency histogram: {title}"),
        buckets_per_decade: HISTOGRAM_BUCKETS_PER_DECADE,
        y_label: "% of I/Os",
        groups,
    }
}

/// The shaded spans of warm-up intervals, adjacent ones merged.
fn warmup_bands(run: &RunRecord) -> Vec<(f64, f64, String)> {
    let mut bands: Vec<(f64, f64, String)> = Vec::new();
    for i in run.intervals.iter().filter(|i| i.warmup) {
        let start = (i.end_s - i.seconds).max(0.0);
        match bands.last_mut() {
            Some(last) if (last.1 - start).abs() < 1e-6 => last.1 = i.end_s,
            _ => bands.push((start, i.end_s, "warm-up".to_string())),
        }
    }
    bands
}

/// A histogram's I/Os per log-spaced bucket, as % of its I/Os.
pub fn histogram_buckets(data: &HistogramData) -> Vec<(i32, f64)> {
    let total: u64 = data.counts.iter().map(|[_, c]| *c).sum();
    if total == 0 {
        return Vec::new();
    }
    let mut per: BTreeMap<i32, u64> = BTreeMap::new();
    for [value_ns, count] in &data.counts {
        let bucket =
            LogHistogramChart::bucket_of(*value_ns as f64 / 1000.0, HISTOGRAM_BUCKETS_PER_DECADE);
        *per.entry(bucket).or_default() += count;
    }
    per.into_iter()
        .map(|(b, c)| (b, 100.0 * c as f64 / total as f64))
        .collect()
}

/// Mean and p99 against achieved IOPS, one point per run of the curve.
fn curve_chart(result: &BenchResult, id: usize, k: usize, name: &str) -> LineChart {
    let mut runs = result.curve(id);
    // The max run calibrates the curve; it is closed loop, not a point on the
    // open-loop curve (its latency at about the 100% point's load would fold
    // the line back), so it stays in the table but out of the chart.
    if runs.iter().any(|r| r.curve.and_then(|c| c.pct).is_some()) {
        runs.retain(|r| r.curve.and_then(|c| c.pct).is_some());
    }
    runs.sort_by(|a, b| a.totals.all.all.iops.total_cmp(&b.totals.all.all.iops));
    let point = |f: &dyn Fn(&RunRecord) -> f64| -> Vec<(f64, f64)> {
        runs.iter().map(|r| (r.totals.all.all.iops, f(r))).collect()
    };
    let labels: Vec<String> = runs
        .iter()
        .map(|r| match r.curve.and_then(|c| c.pct) {
            Some(p) => format!("{}%", super::units::compact(p)),
            None => "max".to_string(),
        })
        .collect();
    let mut mean = Series::new(
        "mean",
        palette::CURVE_MEAN,
        point(&|r| r.totals.all.all.latency.mean_us),
    );
    mean.point_labels = labels;
    let p99 = Series::new(
        "p99",
        palette::CURVE_P99,
        point(&|r| r.totals.all.all.latency.percentile_us(99.0).unwrap_or(0.0)),
    );
    LineChart {
        id: format!("curve-chart-{k}"),
        kind: "curve",
        title: format!("Latency versus load: {name}"),
        x_label: "achieved IO/s".to_string(),
        y_label: "latency".to_string(),
        x_format: TickFormat::Number,
        y_format: TickFormat::LatencyUs,
        x_from_zero: true,
        x_round_up: true,
        y_log_when_wide: false,
        series: vec![mean, p99],
        bands: Vec::new(),
    }
}
