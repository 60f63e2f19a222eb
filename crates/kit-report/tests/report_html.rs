//! `report.html` is one self-contained file with every chart, and no name from a
//! result can inject markup into it. (That the charts are really drawn is
//! checked in a browser by `report_chromium`.)
#![allow(clippy::unwrap_used)]

mod report_fixture;

use cairn_kit::model::{Source, SourceFile};
use cairn_kit_report::chart::palette;
use cairn_kit_report::report_html;
use report_fixture::sample_result;

/// The `<svg>` element with this id.
fn svg<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<svg id=\"{id}\""))
        .unwrap_or_else(|| panic!("no chart {id}"));
    let end = html[start..].find("</svg>").unwrap() + start + "</svg>".len();
    &html[start..end]
}

/// References that would make the page fetch something, or run something.
const EXTERNAL: [&str; 9] = [
    "http://", "https://", "<script", "<link", " src=", "url(", "@import", "<iframe", "<object",
];

#[test]
fn one_self_contained_file() {
    let html = report_html(&sample_result());
    assert!(html.starts_with("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"));
    assert!(html.trim_end().ends_with("</html>"));
    for bad in EXTERNAL {
        assert!(
            !html.to_lowercase().contains(bad),
            "report.html contains `{bad}`"
        );
    }
    assert!(html.contains("<style>"), "the style sheet is inline");
    for (open, close) in [
        ("<svg", "</svg>"),
        ("<section", "</section>"),
        ("<table", "</table>"),
        ("<tr>", "</tr>"),
    ] {
        assert_eq!(
            html.matches(open).count(),
            html.matches(close).count(),
            "{open} vs {close}"
        );
    }
}

#[test]
fn every_run_has_its_four_charts_and_the_curve_its_own() {
    let html = report_html(&sample_result());
    for kind in ["iops", "mbps", "latency", "histogram"] {
        assert_eq!(
            html.matches(&format!("class=\"chart chart-{kind}\""))
                .count(),
            5,
            "{kind} charts"
        );
        for n in 1..=5 {
            let s = svg(&html, &format!("{kind}-{n}"));
            assert!(s.contains("<title>"), "{kind}-{n} has a title");
            assert!(!s.contains("no data"), "{kind}-{n} has data");
        }
    }
    assert_eq!(html.matches("class=\"chart chart-curve\"").count(), 1);

    // rd_max's I/O rate: its series, a legend, ticks on both axes, the warm-up shaded.
    let iops = svg(&html, "iops-1");
    assert!(iops.contains(&format!(
        "<polyline fill=\"none\" stroke=\"{}\"",
        palette::IOPS.hex()
    )));
    assert!(iops.contains(">I/O rate: rd_max</text>"));
    assert!(iops.contains(">IO/s</text>"), "legend");
    assert!(
        iops.contains(">1.5k</text>") && iops.contains(">6s</text>"),
        "tick labels"
    );
    assert!(iops.contains(">warm-up</text>"));
    // Closed loop has no target line; the open-loop points do.
    assert!(!iops.contains(&palette::IOPS_TARGET.hex()));
    assert!(svg(&html, "iops-3").contains(&palette::IOPS_TARGET.hex()));

    // Percentiles over time: p50 500us, p99 12ms, p99.9 40ms span 80×, so a log axis.
    let lat = svg(&html, "latency-1");
    for c in [palette::P50, palette::P99, palette::P999] {
        assert!(
            lat.contains(&format!("stroke=\"{}\" stroke-width=\"2.5\"", c.hex())),
            "{}",
            c.hex()
        );
    }
    assert!(
        lat.contains("(log scale)") && lat.contains(">10ms</text>"),
        "{lat}"
    );

    // The histogram has read and write bars beyond their legend swatches.
    let hist = svg(&html, "histogram-1");
    for c in [palette::HIST_READ, palette::HIST_WRITE] {
        assert!(
            hist.matches(&format!("fill=\"{}\"", c.hex())).count() > 3,
            "{}",
            c.hex()
        );
    }
    assert!(hist.contains(">1ms</text>") && hist.contains(">% of I/Os</text>"));

    // The curve: one point per open-loop run (50%, 70%, 90%), each labelled;
    // the closed-loop max run that calibrates it is in the table, not the line.
    let curve = svg(&html, "curve-chart-1");
    let mean = format!("fill=\"{}\"/>", palette::CURVE_MEAN.hex());
    assert_eq!(curve.matches(&format!("r=\"3.5\" {mean}")).count(), 3);
    for label in [">50%<", ">70%<", ">90%<"] {
        assert!(curve.contains(label), "{label}");
    }
    assert!(!curve.contains(">max<"));
    assert!(curve.contains(">achieved IO/s</text>"));
}

#[test]
fn the_summary_tables_are_in_the_page() {
    let html = report_html(&sample_result());
    assert!(html.contains(
        "<caption>Wait histogram, % of I/Os by wait time (AWR Wait Event Histogram)</caption>"
    ));
    assert!(html.contains("<td class=\"r\">1,500.0</td>"));
    assert!(html.contains("<p class=\"alert\">RATE NOT HELD: asked 1,800.0 IO/s"));
    assert!(html.contains("<h2>Latency versus load: rd_curve</h2>"));
    assert!(html
        .contains("<summary>Parameter file /etc/cairn/oltp.vdb</summary><pre>* OLTP data files"));
}

#[test]
fn names_from_the_result_cannot_inject_markup() {
    let mut r = sample_result();
    r.runs[0].rd = "<script>alert(1)</script>".to_string();
    r.runs[0].label = "\"><img src=x onerror=alert(2)>".to_string();
    r.runs[0].totals.workloads[0].wd = "<b onmouseover='x()'>oltp</b>".to_string();
    r.runs[0].devices[0].device = "<svg onload=alert(3)>".to_string();
    r.environment.hostname = "</title><script>alert(4)</script>".to_string();
    r.tool.commit = "a&b".to_string();
    r.plan.source = Source::Vdbench {
        path: "/tmp/<x>.vdb".into(),
        files: vec![SourceFile {
            path: "/tmp/<x>.vdb".into(),
            text: "</pre><script>alert(5)</script>".to_string(),
        }],
        variables: Default::default(),
    };
    let html = report_html(&r);
    let lower = html.to_lowercase();
    for bad in ["<script", "<img", "<b ", "<svg onload", "<x>"] {
        assert!(!lower.contains(bad), "`{bad}` got through");
    }
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&quot;&gt;&lt;img src=x onerror=alert(2)&gt;"));
    assert!(html.contains("&lt;b onmouseover=&#39;x()&#39;&gt;oltp&lt;/b&gt;"));
    assert!(html.contains("a&amp;b"));
    // Ids come from positions, never from names.
    assert!(html.contains("<section class=\"run\" id=\"run-1\">"));
    assert!(html.contains("<svg id=\"iops-1\""));
}

#[test]
fn a_run_without_intervals_says_no_data_instead_of_failing() {
    let mut r = sample_result();
    r.runs.truncate(1);
    r.runs[0].intervals.clear();
    r.runs[0].totals.all.read.histogram.counts.clear();
    r.runs[0].totals.all.write.histogram.counts.clear();
    let html = report_html(&r);
    for id in ["iops-1", "mbps-1", "latency-1", "histogram-1"] {
        assert!(svg(&html, id).contains(">no data</text>"), "{id}");
    }
    r.runs.clear();
    let html = report_html(&r);
    assert!(html.contains("<h2>Runs</h2>") && !html.contains("<svg"));
}
