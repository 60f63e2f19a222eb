//! Headless Chromium for the HTML reports' rendering tests: a screenshot of a
//! page, its pixels, and whether each chart series' colour covers enough of
//! them. The kit's reports (`report_chromium.rs`) and AWR replay's verdict
//! (`cairn-awr`'s `verdict_chromium.rs`, which includes this file) share it.

#![allow(dead_code, clippy::unwrap_used)]

use std::fs::{self, File};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_kit_report::chart::Rgb;

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

pub fn find_chromium() -> Option<PathBuf> {
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
pub fn chromium_or_skip() -> Option<PathBuf> {
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
pub fn screenshot(browser: &Path, html: &Path, png: &Path, work: &Path) {
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
pub fn pixels(png: &Path) -> Vec<[u8; 3]> {
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

pub fn count(pixels: &[[u8; 3]], c: Rgb) -> usize {
    let near = |a: u8, b: u8| a.abs_diff(b) <= CHANNEL_TOLERANCE;
    pixels
        .iter()
        .filter(|p| near(p[0], c.0) && near(p[1], c.1) && near(p[2], c.2))
        .count()
}

/// Every colour covers at least [`DRAWN_PIXELS_MIN`] pixels.
pub fn assert_drawn(pixels: &[[u8; 3]], colours: &[(&str, Rgb)], page: &str) {
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
