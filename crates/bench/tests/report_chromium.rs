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

mod report_fixture;

use std::fs::{self, File};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_bench::report::chart::{palette, Rgb};
use cairn_bench::report::{compare_html, compare_results};
use cairn_bench::report_file::write_reports;
use report_fixture::{compare_b, sample_result};

/// Pixels of a series' colour below which its chart counts as not drawn. A
/// drawn line is one or two pixels thick over a ~470 px plot (about 500+ exact
/// pixels), a bar hundreds; a legend swatch is under 60.
const DRAWN_PIXELS_MIN: usize = 200;
/// Per-channel slack for the compositor's rounding; antialiased edges blend
/// with white far more than this and are not counted.
const CHANNEL_TOLERANCE: u8 = 2;
/// Protection against a hung browser, not a performance gate: a render takes a
/// few seconds.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(90);

fn find_chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .chain(["/usr/bin", "/usr/local/bin", "/snap/bin"].map(PathBuf::from))
        .collect();
    ["chromium", "chromium-browser"]
        .iter()
        .flat_map(|name| dirs.iter().map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// The browser, or `None` after saying why the test is skipped.
fn chromium_or_skip() -> Option<PathBuf> {
    if let Some(p) = find_chromium() {
        return Some(p);
    }
    assert!(
        std::env::var_os("CAIRN_REQUIRE_TOOLS").is_none(),
        "chromium is required (CAIRN_REQUIRE_TOOLS is set) but neither chromium nor chromium-browser is installed; scripts/install-deps installs Debian's chromium package"
    );
    println!("skipped: the HTML rendering check: chromium is not installed (scripts/install-deps installs it)");
    None
}

/// Render `html` (a file) at 1200×3000 into `png`.
fn screenshot(browser: &Path, html: &Path, png: &Path, work: &Path) {
    let log_path = work.join(format!(
        "{}.log",
        png.file_stem().unwrap().to_string_lossy()
    ));
    let log = File::create(&log_path).unwrap();
    // Each render gets its own profile so parallel tests never share a lock.
    let profile = work.join(format!(
        "profile-{}",
        png.file_stem().unwrap().to_string_lossy()
    ));
    let mut child = Command::new(browser)
        .arg("--headless")
        .arg("--no-sandbox")
        .arg("--disable-gpu")
        .arg("--hide-scrollbars")
        .arg("--no-first-run")
        .arg("--force-device-scale-factor=1")
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,3000")
        .arg(format!("file://{}", html.display()))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", browser.display()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > BROWSER_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "chromium did not finish within {BROWSER_TIMEOUT:?}; its output:\n{}",
                fs::read_to_string(&log_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success() && png.is_file(),
        "chromium failed ({status}) to screenshot {}; its output:\n{}",
        html.display(),
        fs::read_to_string(&log_path).unwrap_or_default()
    );
}

/// The screenshot's pixels as RGB.
fn pixels(png: &Path) -> Vec<[u8; 3]> {
    let mut decoder = png::Decoder::new(BufReader::new(File::open(png).unwrap()));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected screenshot colour type {other:?}"),
    };
    assert_eq!((info.width, info.height), (1200, 3000), "window size");
    buf[..info.buffer_size()]
        .chunks_exact(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect()
}

fn count(pixels: &[[u8; 3]], c: Rgb) -> usize {
    let near = |a: u8, b: u8| a.abs_diff(b) <= CHANNEL_TOLERANCE;
    pixels
        .iter()
        .filter(|p| near(p[0], c.0) && near(p[1], c.1) && near(p[2], c.2))
        .count()
}

/// Every colour covers at least [`DRAWN_PIXELS_MIN`] pixels.
fn assert_drawn(pixels: &[[u8; 3]], colours: &[(&str, Rgb)], page: &str) {
    let counts: Vec<(&str, usize)> = colours
        .iter()
        .map(|(n, c)| (*n, count(pixels, *c)))
        .collect();
    println!("{page}: pixels per series colour: {counts:?}");
    let missing: Vec<&(&str, usize)> = counts
        .iter()
        .filter(|(_, n)| *n < DRAWN_PIXELS_MIN)
        .collect();
    assert!(
        missing.is_empty(),
        "{page}: these series were not drawn (pixels < {DRAWN_PIXELS_MIN}): {missing:?}"
    );
}

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

/// `cairn awr replay`'s verdict.html draws each class's latency
/// distribution: the report's buckets and the run's. The verdict is one a
/// replay of the 12.2 test report wrote (and a check that verdict.json still
/// reads).
#[test]
fn the_awr_verdict_draws_the_reports_buckets_and_the_runs() {
    let Some(browser) = chromium_or_skip() else {
        return;
    };
    let verdict: cairn_bench::awr::replay::Verdict =
        serde_json::from_str(include_str!("data/awr/verdict_awr_122.json")).unwrap();
    assert!(verdict.classes.iter().any(|c| c.distribution.is_some()));
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("verdict.html");
    fs::write(&html, cairn_bench::awr::replay::verdict_html(&verdict)).unwrap();
    let png = dir.path().join("verdict.png");
    screenshot(&browser, &html, &png, dir.path());
    assert_drawn(
        &pixels(&png),
        &[("AWR buckets", palette::AWR), ("run buckets", palette::RUN)],
        "verdict.html",
    );
}

/// The check above cannot pass on a page without charts: a page with the
/// same tables but the charts removed has none of the series colours.
#[test]
fn a_page_without_charts_fails_the_check() {
    let Some(browser) = chromium_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let html = cairn_bench::report::report_html(&sample_result());
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
