//! `summary.txt` and the live lines carry the right figures: values worked out
//! by hand from the sample's recorded latencies (see `report_fixture`).
#![allow(clippy::unwrap_used)]

mod report_fixture;

use std::time::Duration;

use cairn_kit::model::{Arrival, CurveMember, Rate, RunDef};
use cairn_kit_report::live;
use cairn_kit_report::summary_text;
use report_fixture::sample_result;

/// The text of one run, from its heading to the next run's.
fn run_section(text: &str, title: &str) -> String {
    let start = text
        .find(&format!("\nRun {title}\n"))
        .unwrap_or_else(|| panic!("no run {title} in\n{text}"));
    let rest = &text[start + 1..];
    let end = rest[1..]
        .find("\nRun ")
        .map(|e| e + 1)
        .unwrap_or(rest.len());
    rest[..end].to_string()
}

/// The cells of the first row of the table titled `table` whose leading cells
/// are `key` (cells split on runs of spaces, so multi-word cells must not be keys).
fn row(section: &str, table: &str, key: &[&str]) -> Vec<String> {
    let lines: Vec<&str> = section.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == table)
        .unwrap_or_else(|| panic!("no table `{table}` in\n{section}"));
    lines[at + 1..]
        .iter()
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .find(|cells| cells.len() >= key.len() && cells[..key.len()] == *key)
        .unwrap_or_else(|| panic!("no row {key:?} in table `{table}` of\n{section}"))
}

const AWR_PCT: &str = "Wait histogram, % of I/Os by wait time (AWR Wait Event Histogram)";
const AWR_COUNT: &str = "Wait histogram, I/O counts by wait time";

#[test]
fn totals_are_over_the_measured_window_only() {
    let text = summary_text(&sample_result());
    let s = run_section(&text, "rd_max");
    // 1,000 reads + 250 oltp writes + 250 redo writes each of 5 measured seconds;
    // (1,250 × 8,192 + 250 × 65,536) / 10^6 = 26.62 MB/s; 1,000 / 1,500 = 66.7% read.
    // Mean: (600×500 + 280×1,500 + 100×5,000 + 15×12,000 + 5×40,000 + 200×800
    // + 50×3,000 + 250×400) µs / 1,500 = 1.34 ms. The warm-up's 50 ms reads and
    // 1.2 s writes are in no total: the max is the measured 40 ms.
    assert_eq!(
        row(&s, "Totals", &["all", "all"]),
        [
            "all", "all", "7,500", "1,500.0", "26.62", "17,749", "66.7", "1.34ms", "2.75ms",
            "40.0ms"
        ]
    );
    assert_eq!(
        row(&s, "Totals", &["oltp", "read"])[2..8],
        ["5,000", "1,000.0", "8.19", "8,192", "100.0", "1.60ms"]
    );
    // redo only writes: one row, 250 × 65,536 / 10^6 = 16.38 MB/s.
    assert_eq!(
        row(&s, "Totals", &["redo", "write"])[2..6],
        ["1,250", "250.0", "16.38", "65,536"]
    );
    assert!(
        !s.contains("1.20s") && !s.contains("50.0ms"),
        "warm-up leaked into\n{s}"
    );
    assert!(
        s.contains("Rate:              asked max (closed loop); achieved 1,500.0 IO/s"),
        "{s}"
    );
    assert!(
        s.contains(
            "5s measured of 6s elapsed (intervals 2-6 of 1s); warm-up 1s excluded (interval 1)"
        ),
        "{s}"
    );
}

#[test]
fn percentiles_and_wait_buckets_per_workload_and_direction() {
    let s = run_section(&summary_text(&sample_result()), "rd_max");
    // oltp reads per second: 600 × 0.5 ms, 280 × 1.5 ms, 100 × 5 ms, 15 × 12 ms, 5 × 40 ms.
    assert_eq!(
        row(&s, "Response time percentiles", &["oltp", "read"]),
        [
            "oltp", "read", "500us", "5.00ms", "5.00ms", "12.0ms", "40.0ms", "40.0ms", "40.0ms",
            "40.0ms"
        ]
    );
    assert_eq!(
        row(&s, AWR_PCT, &["oltp", "read"]),
        ["oltp", "read", "5,000", "60.0", "28.0", "-", "10.0", "1.5", "-", "0.5", "-"]
    );
    assert_eq!(
        row(&s, AWR_COUNT, &["oltp", "read"]),
        ["oltp", "read", "5,000", "3,000", "1,400", "0", "500", "75", "0", "25", "0"]
    );
    // oltp writes: 200 × 0.8 ms, 50 × 3 ms.
    assert_eq!(
        row(&s, AWR_PCT, &["oltp", "write"])[2..6],
        ["1,250", "80.0", "-", "20.0"]
    );
    // All I/O together: 5,250 of 7,500 under 1 ms.
    assert_eq!(row(&s, AWR_PCT, &["all", "all"])[2..4], ["7,500", "70.0"]);
    // The µs view: 600 of 1,000 reads under 512 µs.
    assert_eq!(
        row(
            &s,
            "Wait histogram in microseconds, % of I/Os",
            &["oltp", "read"]
        )[9..],
        ["60.0", "40.0"]
    );
    // The parameter file's histogram=(200us,1ms,5ms) buckets are shown too.
    let custom = row(
        &s,
        "Wait histogram on the parameter file's buckets, % of I/Os",
        &["redo", "write"],
    );
    assert_eq!(custom[2..4], ["1,250", "-"]);
    assert_eq!(custom[4], "100.0");
}

#[test]
fn cpu_devices_validation_and_errors() {
    let text = summary_text(&sample_result());
    let s = run_section(&text, "rd_max");
    // 8 µs of CPU per I/O: 125,000 I/Os per CPU-second.
    assert!(
        s.contains("125,000 I/Os per CPU-second; machine busy 25.0%"),
        "{s}"
    );
    let dev = "Devices (iostat -x over the measured window)";
    assert_eq!(
        row(&s, dev, &["nvme0n1"])[..7],
        ["nvme0n1", "1,000.0", "250.0", "8.19", "2.05", "8.0", "8.0"]
    );
    assert_eq!(
        row(&s, dev, &["nvme1n1"])[2..7],
        ["250.0", "0.00", "16.38", "0.0", "64.0"]
    );
    assert!(s.contains("Validation:  on: 2,500 units written, 5,000 checked on read, no errors"));
    assert!(s.contains("I/O errors:  none"));

    let bad = run_section(&text, "rd_curve iorate=90%");
    assert!(
        bad.contains("*** RATE NOT HELD: asked 1,800.0 IO/s, achieved 1,693.6 IO/s; 750 I/Os never issued; backlog peaked at 4,096 of 4,096. the devices could not"),
        "{bad}"
    );
    assert!(
        bad.contains("*** DATA VALIDATION FAILED: 1 bad units of 5,493 checked ***"),
        "{bad}"
    );
    assert_eq!(
        row(&bad, "Units that did not read back as written", &["sd1"]),
        [
            "sd1",
            "/dev/nvme0n1",
            "101130240",
            "12345",
            "8",
            "KiB",
            "bad",
            "checksum"
        ]
    );
    assert!(
        bad.contains("*** I/O ERRORS: 2; first 2: read sd1 /dev/nvme0n1 offset 81920 (8 KiB)"),
        "{bad}"
    );
}

#[test]
fn header_overview_and_curve() {
    let text = summary_text(&sample_result());
    for want in [
        "Tool:     cairn 0.1.0 (commit v0.1.0-42-g1234abc)",
        "Host:     db01, Debian GNU/Linux 12 (bookworm), kernel 6.1.0-18-amd64",
        "CPU:      Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz, 16 CPUs, 64 GiB memory",
        "Engine:   uring, 2 workers, flags: single_issuer, registered_files",
        "Seed:     20250314",
        "Source:   vdbench parameter file /etc/cairn/oltp.vdb with elapsed=6",
        "sd1  /dev/nvme0n1  block  1 TiB  all         4Kn (4096/4096)   128 KiB           -  no          yes      nvme0n1",
    ] {
        assert!(text.contains(want), "missing `{want}` in\n{text}");
    }
    let runs = &text[text.find("\nRuns\n").unwrap()..];
    assert_eq!(
        row(runs, "#  run                  rate asked     IO/s   MB/s  read%    mean     p99     max  rate held", &["1"]),
        ["1", "rd_max", "max", "1,500.0", "26.62", "66.7", "1.34ms", "12.0ms", "40.0ms", "-"]
    );
    let curve = &text[text.find("\nLatency versus load: rd_curve\n").unwrap()..];
    let table = "load  target IO/s  achieved IO/s  held    mean    p50     p99   p99.9";
    let loads: Vec<(String, String, String)> = ["max", "50%", "70%", "90%"]
        .iter()
        .map(|l| {
            let r = row(curve, table, &[l]);
            (r[1].clone(), r[2].clone(), r[3].clone())
        })
        .collect();
    assert_eq!(
        loads,
        [
            ("-".into(), "1,992.0".into(), "-".into()),
            ("1,000.0".into(), "996.6".into(), "yes".into()),
            ("1,400.0".into(), "1,394.0".into(), "yes".into()),
            ("1,800.0".into(), "1,693.6".into(), "NO".into()),
        ]
    );
}

#[test]
fn live_lines_follow_the_header_and_the_average_excludes_warm_up() {
    let result = sample_result();
    let run = &result.runs[0];
    let header = live::header();
    let lines: Vec<&str> = header.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(
        lines[0].contains("queue") && lines[1].contains("depth") && lines[1].contains("interval")
    );
    let warm = live::line(&run.intervals[0], "09:26:54");
    assert!(warm.starts_with("09:26:54        1       35.0"), "{warm}");
    assert!(warm.ends_with("warm-up"), "{warm}");
    let steady = live::line(&run.intervals[1], "09:26:55");
    assert_eq!(steady.len(), lines[1].len(), "\n{}\n{steady}", lines[1]);
    // i/o rate, MB/s, bytes/io, read%, resp, read resp, write resp, resp max.
    let cells: Vec<&str> = steady.split_whitespace().collect();
    assert_eq!(
        cells[..10],
        [
            "09:26:55", "2", "1500.0", "26.62", "17749", "66.7", "1.340", "1.600", "0.820",
            "40.010"
        ]
    );
    // cpu%: 12 ms of CPU in a 1 s interval; the machine 25% busy.
    assert_eq!(cells[cells.len() - 2..], ["1.2", "25.0"]);

    let total = live::total_line(run);
    assert_eq!(total.len(), lines[1].len(), "\n{}\n{total}", lines[1]);
    let cells: Vec<&str> = total.split_whitespace().collect();
    assert_eq!(
        cells[..6],
        ["avg_2-6", "1500.0", "26.62", "17749", "66.7", "1.340"]
    );
    // The warm-up's 1.2 s write is not the max.
    assert_eq!(cells[8], "40.010");
}

#[test]
fn the_run_banner_says_rate_and_durations() {
    let mut run = RunDef {
        rd: "rd_curve".into(),
        label: "iorate=50%".into(),
        wds: vec!["oltp".into()],
        rate: Rate::CurvePct(50.0),
        elapsed: Duration::from_secs(60),
        interval: Duration::from_secs(1),
        warmup: Duration::from_secs(10),
        arrival: Arrival::Exponential,
        pause: Duration::ZERO,
        threads: None,
        xfersize: None,
        rdpct: None,
        seek: None,
        curve: Some(CurveMember {
            id: 1,
            stop_ms: None,
        }),
    };
    assert_eq!(
        live::run_banner(&run, Some(12_345.0)),
        "Starting rd_curve iorate=50%: iorate=50% of max = 12,345.0 IO/s (open loop, exponential arrivals); elapsed 60s, warm-up 10s, interval 1s"
    );
    run.rate = Rate::Max;
    run.label = String::new();
    assert_eq!(
        live::run_banner(&run, None),
        "Starting rd_curve: iorate=max (closed loop; calibrates the curve); elapsed 60s, warm-up 10s, interval 1s"
    );
    run.curve = None;
    run.rate = Rate::Fixed(2000.0);
    run.arrival = Arrival::Uniform;
    assert!(live::run_banner(&run, Some(2000.0))
        .contains("iorate=2,000.0 IO/s (open loop, uniform arrivals)"));
}
