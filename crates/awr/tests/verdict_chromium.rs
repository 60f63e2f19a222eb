//! `cairn awr replay`'s verdict.html in a real browser: headless Chromium
//! takes a screenshot and each distribution's colours must cover a good
//! number of pixels (the harness and its reasons: `cairn-kit-report`'s
//! `tests/chromium`, where a page without charts is shown to fail it).
//!
//! Needs Debian's `chromium` (scripts/install-deps installs it). Without it the
//! test prints `skipped: <reason>`, unless CAIRN_REQUIRE_TOOLS is set (as
//! scripts/test sets it as root), where a missing browser is a failure.
#![allow(clippy::unwrap_used)]

#[path = "../../kit-report/tests/chromium/mod.rs"]
mod chromium;

use std::fs;

use cairn_kit_report::chart::palette;
use chromium::{assert_drawn, chromium_or_skip, pixels, screenshot};

/// `cairn awr replay`'s verdict.html draws each class's latency
/// distribution: the report's buckets and the run's. The verdict is one a
/// replay of the 12.2 test report wrote (and a check that verdict.json still
/// reads).
#[test]
fn the_awr_verdict_draws_the_reports_buckets_and_the_runs() {
    let Some(browser) = chromium_or_skip() else {
        return;
    };
    let verdict: cairn_awr::replay::Verdict =
        serde_json::from_str(include_str!("data/awr/verdict_awr_122.json")).unwrap();
    assert!(verdict.classes.iter().any(|c| c.distribution.is_some()));
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("verdict.html");
    fs::write(&html, cairn_awr::replay::verdict_html(&verdict)).unwrap();
    let png = dir.path().join("verdict.png");
    screenshot(&browser, &html, &png, dir.path());
    assert_drawn(
        &pixels(&png),
        &[("AWR buckets", palette::AWR), ("run buckets", palette::RUN)],
        "verdict.html",
    );
}
