//! Comparison of two results: deltas and % change from known inputs, the
//! better/worse call, unmatched runs and workloads listed, and the HTML page.
#![allow(clippy::unwrap_used)]

mod report_fixture;

use cairn_kit_report::chart::palette;
use cairn_kit_report::compare::{Better, Row, Section, Verdict};
use cairn_kit_report::{compare_html, compare_results, compare_text};
use report_fixture::{compare_b, sample_result};

/// The cells of the row of `section`'s table whose metric is `metric`; cells are
/// separated by at least two spaces.
fn text_row(text: &str, section: &str, metric: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == section)
        .unwrap_or_else(|| panic!("no section `{section}` in\n{text}"));
    lines[at + 1..]
        .iter()
        .take_while(|l| !l.is_empty())
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .find(|cells| cells[0] == metric)
        .unwrap_or_else(|| panic!("no row `{metric}` in section `{section}` of\n{text}"))
}

fn section<'a>(sections: &'a [Section], title: &str) -> &'a Section {
    sections
        .iter()
        .find(|s| s.title == title)
        .unwrap_or_else(|| {
            panic!(
                "no section {title}: {:?}",
                sections.iter().map(|s| &s.title).collect::<Vec<_>>()
            )
        })
}

fn model_row<'a>(s: &'a Section, metric: &str) -> &'a Row {
    s.rows
        .iter()
        .find(|r| r.metric == metric)
        .unwrap_or_else(|| panic!("no row {metric} in {}", s.title))
}

#[test]
fn deltas_and_changes_from_known_inputs() {
    let c = compare_results(&sample_result(), &compare_b());
    assert_eq!(c.a_name, "db01 2025-03-14T09:26:53Z");
    assert_eq!(c.b_name, "db02 2025-03-14T09:26:53Z");
    let whole = section(&c.sections, "rd_max: whole run");
    let iops = model_row(whole, "IOPS");
    assert_eq!(
        (iops.a, iops.b, iops.better),
        (Some(1500.0), Some(1800.0), Better::Higher)
    );
    assert_eq!(
        (iops.delta(), iops.pct_change(), iops.verdict()),
        (Some(300.0), Some(20.0), Some(Verdict::Better))
    );
    let cpu = model_row(whole, "IOPS per CPU-second");
    // A's figure is 7,500 I/Os / 0.06 CPU-seconds, to the float.
    assert!((cpu.pct_change().unwrap() + 20.0).abs() < 1e-9);
    assert_eq!(cpu.verdict(), Some(Verdict::Worse));

    let text = compare_text(&c);
    assert!(text.starts_with("Cairn comparison\n"));
    assert!(
        text.contains("A:  db01 2025-03-14T09:26:53Z\nB:  db02 2025-03-14T09:26:53Z\n"),
        "{text}"
    );
    assert_eq!(
        text_row(&text, "rd_max: whole run", "IOPS"),
        ["IOPS", "1,500.0", "1,800.0", "+300.0", "+20.0%", "better"]
    );
    assert_eq!(
        text_row(&text, "rd_max: whole run", "IOPS per CPU-second (IO/CPU-s)"),
        [
            "IOPS per CPU-second (IO/CPU-s)",
            "125,000",
            "100,000",
            "-25,000",
            "-20.0%",
            "worse"
        ]
    );
    // A figure with no better direction gets no verdict.
    assert_eq!(
        text_row(&text, "rd_max: whole run", "nvme0n1 rareq-sz (KiB)"),
        ["nvme0n1 rareq-sz (KiB)", "8.0", "16.0", "+8.0", "+100.0%"]
    );
    // Latencies in their own units: 1.60 ms down to 800 µs is half.
    assert_eq!(
        text_row(&text, "rd_max: workload oltp", "read latency mean"),
        [
            "read latency mean",
            "1.60ms",
            "800us",
            "-800us",
            "-50.0%",
            "better"
        ]
    );
    // Unchanged figures are "same".
    assert_eq!(
        text_row(&text, "rd_max: workload redo", "write latency p99"),
        ["write latency p99", "400us", "400us", "0", "0.0%", "same"]
    );
    // redo only writes: no read rows for it, nor for its device.
    assert!(section(&c.sections, "rd_max: workload redo")
        .rows
        .iter()
        .all(|r| !r.metric.starts_with("read")));
    assert!(whole.rows.iter().any(|r| r.metric == "nvme1n1 w_await"));
    assert!(!whole.rows.iter().any(|r| r.metric == "nvme1n1 r_await"));
}

#[test]
fn unmatched_runs_and_workloads_are_listed() {
    let c = compare_results(&sample_result(), &compare_b());
    let only = section(&c.sections, "Only in one result (IO/s)");
    let got: Vec<(&str, bool, bool)> = only
        .rows
        .iter()
        .map(|r| (r.metric.as_str(), r.a.is_some(), r.b.is_some()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "rd_curve iorate=max: workload redo (only in A)",
                true,
                false
            ),
            (
                "rd_curve iorate=max: workload redo2 (only in B)",
                false,
                true
            ),
            ("run rd_curve iorate=90% (only in A)", true, false),
            ("run rd_new (only in B)", false, true),
        ]
    );
    let text = compare_text(&c);
    assert_eq!(
        text_row(&text, "Only in one result (IO/s)", "run rd_new (only in B)"),
        ["run rd_new (only in B)", "-", "1,800.0"]
    );
    // Matched runs each have a whole-run section and one per workload in both.
    let titles: Vec<&str> = c.sections.iter().map(|s| s.title.as_str()).collect();
    assert!(titles.contains(&"rd_curve iorate=70%: workload redo"));
    assert!(!titles.iter().any(|t| t.starts_with("rd_curve iorate=90%")));
}

#[test]
fn a_result_against_itself_changes_nothing() {
    let a = sample_result();
    let c = compare_results(&a, &a);
    assert!(c.a_name.ends_with("(A)") && c.b_name.ends_with("(B)"));
    assert!(!c.sections.is_empty());
    for s in &c.sections {
        for r in &s.rows {
            assert_eq!(r.delta(), Some(0.0), "{} {}", s.title, r.metric);
            assert!(
                matches!(r.verdict(), None | Some(Verdict::Same)),
                "{} {}",
                s.title,
                r.metric
            );
        }
    }
}

#[test]
fn different_devices_are_compared_taken_together() {
    let a = sample_result();
    let mut b = sample_result();
    for d in &mut b.runs[0].devices {
        d.device = format!("dm-{}", d.device.len());
        d.r_await_ms *= 2.0;
    }
    let c = compare_results(&a, &b);
    let whole = section(&c.sections, "rd_max: whole run");
    let label = "devices (A nvme0n1+nvme1n1, B dm-7+dm-7)";
    let rs = model_row(whole, &format!("{label} r/s"));
    assert_eq!(
        (rs.a, rs.b),
        (Some(1000.0), Some(1000.0)),
        "summed: nvme1n1 does no reads"
    );
    let wait = model_row(whole, &format!("{label} r_await"));
    assert!((wait.pct_change().unwrap() - 100.0).abs() < 1e-9);
    assert_eq!(wait.verdict(), Some(Verdict::Worse));
}

#[test]
fn the_html_page_is_self_contained_escaped_and_charted() {
    let mut c = compare_results(&sample_result(), &compare_b());
    c.a_name = "<script>alert(1)</script>".to_string();
    c.sections[0].rows[0].metric = "<img src=x onerror=alert(2)>".to_string();
    let html = compare_html(&c);
    let lower = html.to_lowercase();
    for bad in ["http://", "https://", "<script", "<link", "<img"] {
        assert!(!lower.contains(bad), "`{bad}` in compare.html");
    }
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("class=\"chart chart-compare\""));
    // The first section's chart has green (better), red (worse) and grey bars.
    let start = html.find("<svg id=\"change-1\"").unwrap();
    let chart = &html[start..start + html[start..].find("</svg>").unwrap()];
    for (c, n) in [
        (palette::BETTER, 1),
        (palette::WORSE, 1),
        (palette::NEITHER, 10),
    ] {
        assert!(
            chart
                .matches(&format!("fill=\"{}\" shape-rendering", c.hex()))
                .count()
                >= n,
            "{}",
            c.hex()
        );
    }
    assert!(chart.contains(">+20.0%</text>") && chart.contains(">-20.0%</text>"));
    // No chart for the section of unmatched names: it has no % change.
    let only = html.find("<h2>Only in one result (IO/s)</h2>").unwrap();
    assert!(!html[only..].contains("<svg"));
}
