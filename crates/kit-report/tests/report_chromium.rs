//! The HTML reports render in a real browser: headless Chromium takes a
//! screenshot of `report.html` and of a comparison page, and each chart series'
//! colour must cover a good number of pixels. A chart that is not drawn leaves
//! its colour absent, and a blank page has none of them (checked too, so the
//! pixel count itself cannot pass vacuously).
//!
//! Needs Debian's `chromium` (scripts/install-deps installs it). Without it the
//! tests print `skipped: <reason>`, unless CAIRN_REQUIRE_TOOLS is set (as
//! scripts/test sets it as root), where a missing browser is a failure.
#![allow(clippy::unwrap_used)]

mod chromium;
mod report_fixture;

use std::fs;

use cairn_kit_report::chart::{palette, Rgb};
use cairn_kit_report::report_file::write_reports;
use cairn_kit_report::{compare_html, compare_results};
use chromium::{assert_drawn, chromium_or_skip, count, pixels, screenshot};
use report_fixture::{compare_b, sample_result};

const REPORT_SERIES: [(&str, Rgb); 9] = [
    ("IOPS over time", palette::IOPS),
    ("MB/s over time", palette::MB_PER_S),
    ("p50 over time", palette::P50),
    ("p99 over time", palette::P99),
    ("p99.9 over time", palette::P999),
    ("histogram read", palette::HIST_READ),
    ("histogram write", palette::HIST_WRITE),
    ("curve mean", palette::CURVE_MEAN),
    ("curve p99", palette::CURVE_P99),
];

const COMPARE_SERIES: [(&str, Rgb); 3] = [
    ("better bars", palette::BETTER),
    ("worse bars", palette::WORSE),
    ("neutral bars", palette::NEITHER),
];

#[test]
fn report_html_draws_every_chart() {
    let Some(browser) = chromium_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    write_reports(dir.path(), &sample_result()).unwrap();
    let png = dir.path().join("report.png");
    screenshot(&browser, &dir.path().join("report.html"), &png, dir.path());
    assert_drawn(&pixels(&png), &REPORT_SERIES, "report.html");
}

#[test]
fn compare_html_draws_its_bars() {
    let Some(browser) = chromium_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("compare.html");
    fs::write(
        &html,
        compare_html(&compare_results(&sample_result(), &compare_b())),
    )
    .unwrap();
    let png = dir.path().join("compare.png");
    screenshot(&browser, &html, &png, dir.path());
    assert_drawn(&pixels(&png), &COMPARE_SERIES, "compare.html");
}

/// The check above cannot pass on a page without charts: a page with the
/// same tables but the charts removed has none of the series colours.
#[test]
fn a_page_without_charts_fails_the_check() {
    let Some(browser) = chromium_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let html = cairn_kit_report::report_html(&sample_result());
    let mut stripped = String::new();
    let mut rest = html.as_str();
    while let Some(start) = rest.find("<svg") {
        stripped.push_str(&rest[..start]);
        let end = rest[start..].find("</svg>").unwrap() + start + "</svg>".len();
        rest = &rest[end..];
    }
    stripped.push_str(rest);
    assert!(stripped.contains("<table") && !stripped.contains("<svg"));
    let path = dir.path().join("nocharts.html");
    fs::write(&path, stripped).unwrap();
    let png = dir.path().join("nocharts.png");
    screenshot(&browser, &path, &png, dir.path());
    let px = pixels(&png);
    let verdict_series = [("AWR buckets", palette::AWR), ("run buckets", palette::RUN)];
    for (name, c) in REPORT_SERIES
        .iter()
        .chain(&COMPARE_SERIES)
        .chain(&verdict_series)
    {
        assert_eq!(
            count(&px, *c),
            0,
            "{name} colour found on a page without charts"
        );
    }
    // And the page did render (tables, their shading and text): not an empty image.
    let inked = px.iter().filter(|p| **p != [255, 255, 255]).count();
    assert!(
        inked > 20_000,
        "only {inked} non-white pixels: the page did not render"
    );
}
