//! What the benchmark commands (`bench run|quick`, `bench oltp`, `awr
//! replay`) share: the clock they take seeds, directory names and live
//! lines from, and the progress bar of bytes a fill, a load or a verify
//! shows. Here rather than in bench_cmd so that `bench oltp` (oltp_cmd)
//! needs nothing of the `bench` command that dispatches to it.

use std::io::IsTerminal;
use std::time::{SystemTime, UNIX_EPOCH};

/// A bar of bytes done, with the rate and the ETA, headed `what`, on a
/// terminal (hidden otherwise, and with `--json`).
pub(crate) fn bytes_bar(terminal: bool, what: &str) -> indicatif::ProgressBar {
    if !terminal || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{what} {{bytes}}/{{total_bytes}} {{bytes_per_sec}} ETA {{eta}} {{wide_bar}}"
        ))
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// A UTC timestamp for default output directory names (`20261121T135310`).
pub(crate) fn timestamp() -> String {
    cairn_host::utc_now_rfc3339()
        .replace([':', '-'], "")
        .trim_end_matches('Z')
        .to_string()
}

/// A seed taken from the clock, for runs not given `--seed` (it is recorded).
pub(crate) fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

/// The time of day (UTC) for live interval lines.
pub(crate) fn clock() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let local = secs % 86_400;
    format!(
        "{:02}:{:02}:{:02}",
        local / 3600,
        local % 3600 / 60,
        local % 60
    )
}
