//! `cairn awr replay` as a library: the bank fragment of the POC post,
//! derived, scaled down, run on a RAM-backed loop device (or a file when
//! loop devices are not available, saying so; under CAIRN_REQUIRE_TOOLS that
//! fails the test), and judged against the report.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::AtomicBool;

use cairn_awr::derive::{ClassKind, DeriveOptions};
use cairn_awr::model::{AwrReport, EventLine, Format, HistogramLine, Statistic};
use cairn_awr::replay::{replay, verdict_text, ReplayOptions};
use cairn_awr::stats::read_stat_tables;
use cairn_io::host::Host;
use cairn_io::test_support::LoopDevice;
use cairn_kit::engine::{EngineMaker, Quiet};
use cairn_kit_group::CairnTargets;

static NOT_INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The bank fragment's statistics, plus read events and a DB time of our own
/// (the fragment has none): 1,000,000 db file sequential reads of 2 ms each
/// in 7,198 s with 12,000 s of DB time, and their 11g-style histogram.
fn bank() -> AwrReport {
    let mut r = AwrReport::empty("bank_fragment.txt", Format::AwrText);
    let (rows, _) = read_stat_tables(include_str!("data/awr/bank_fragment.txt"));
    r.instance_activity = rows.iter().map(Statistic::from).collect();
    r.header.db_time_min = Some(200.0);
    r.header.elapsed_min = Some(7198.3 / 60.0);
    r.foreground_events.push(EventLine {
        event: "db file sequential read".into(),
        waits: Some(1_000_000.0),
        total_wait_s: Some(2_000.0),
        avg_wait_us: Some(2_000.0),
        pct_db_time: Some(16.7),
        wait_class: Some("User I/O".into()),
    });
    let cells = [
        ("<1ms", Some(35.5)),
        ("<2ms", Some(20.1)),
        ("<4ms", Some(30.2)),
        ("<8ms", Some(9.9)),
        ("<16ms", Some(4.3)),
        ("<32ms", None),
        ("<=1s", None),
        (">1s", None),
    ];
    r.histograms.push(HistogramLine {
        table: "Wait Event Histogram".into(),
        event: "db file sequential read".into(),
        total_waits: Some(1_000_000.0),
        buckets: cells.iter().map(|(l, v)| ((*l).to_string(), *v)).collect(),
    });
    r
}

#[test]
fn the_bank_fragment_replays_scaled_down_and_gets_a_verdict() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // RAM behind the loop device where there is a /dev/shm (only the run's
    // speed depends on it, and nothing here asserts speed).
    let shm = std::path::Path::new("/dev/shm");
    let ram_dir = if shm.is_dir() { shm } else { dir.path() };
    let ram = ram_dir.join(format!("cairn-awr-replay-{}", std::process::id()));
    // The RAM file goes whatever happens (a failed assertion too).
    struct RemoveOnDrop(std::path::PathBuf);
    impl Drop for RemoveOnDrop {
        fn drop(&mut self) {
            std::fs::remove_file(&self.0).ok();
        }
    }
    let _ram_file = RemoveOnDrop(ram.clone());
    let (target, _loop) = match LoopDevice::create(&ram, 256 << 20, 4096) {
        Ok(l) => (l.path.clone(), Some(l)),
        Err(reason) => {
            cairn_io::test_support::prerequisite::missing(&format!(
                "the loop device ({reason}): replaying on a file"
            ));
            (dir.path().join("target.dat"), None)
        }
    };
    let host = Host::real();
    let opts = ReplayOptions {
        host: &host,
        targets: vec![target],
        size_bytes: Some(256 << 20),
        threads: 16,
        derive: DeriveOptions {
            scale: 0.05,
            elapsed_s: 4,
            interval_s: 1,
            warmup_s: 0,
            ..DeriveOptions::default()
        },
        force: false,
        seed: 1,
        engine: EngineMaker::Uring,
        interrupted: &NOT_INTERRUPTED,
        fill_progress: &|_, _| true,
        opener: &CairnTargets::new(None),
    };
    let (verdict, result) = replay(&bank(), &opts, &mut Quiet).unwrap();
    let kinds: Vec<ClassKind> = verdict.classes.iter().map(|c| c.class).collect();
    assert_eq!(kinds, ClassKind::ALL.to_vec());
    for c in &verdict.classes {
        assert!(c.measured_rate_per_s > 0.0, "{:?} never ran", c.class);
        assert!(
            (c.target_rate_per_s - c.awr_rate_per_s * 0.05).abs()
                < 1e-6 * c.awr_rate_per_s.max(1.0)
        );
        assert!(c.measured_avg_us > 0.0);
    }
    // The single-block reads are judged against db file sequential read's 2 ms.
    let reads = &verdict.classes[0];
    assert_eq!(reads.awr_event.as_deref(), Some("db file sequential read"));
    assert_eq!(reads.awr_avg_us, Some(2_000.0));
    assert!((reads.latency_ratio.unwrap() - reads.measured_avg_us / 2_000.0).abs() < 1e-9);
    // Their distribution: the report's buckets, and the run's I/Os counted at
    // the same bounds (11g: a ms is 1,000 µs).
    let dist = reads.distribution.as_ref().expect("a distribution");
    let labels: Vec<&str> = dist.buckets.iter().map(|b| b.label.as_str()).collect();
    assert_eq!(labels[..5], ["<1ms", "<2ms", "<4ms", "<8ms", "<16ms"]);
    assert!((dist.buckets[2].awr_pct - 30.2).abs() < 1e-6);
    let run_hist = &result.runs[0]
        .totals
        .workloads
        .iter()
        .find(|w| w.wd == "wd_oracle_rand_read")
        .unwrap()
        .stats
        .all
        .histogram;
    let h = cairn_kit::histogram::LatencyHistogram::from_data(run_hist);
    let below_1ms = 100.0 * h.count_below(1_000_000) as f64 / h.count() as f64;
    assert!((dist.buckets[0].run_pct.unwrap() - below_1ms).abs() < 1e-9);
    let run_total: f64 = dist.buckets.iter().filter_map(|b| b.run_pct).sum();
    assert!((run_total - 100.0).abs() < 1e-6, "{run_total}");
    // DB time: 2,000 of 12,000 s were those reads; with the measured average instead.
    let d = &verdict.db_time;
    assert_eq!(d.db_time_s, Some(12_000.0));
    assert!((d.io_wait_pct_of_db_time.unwrap() - 100.0 * 2_000.0 / 12_000.0).abs() < 1e-9);
    let want = 12_000.0 - 2_000.0 + 1_000_000.0 * reads.measured_avg_us / 1e6;
    assert!((d.projected_db_time_s.unwrap() - want).abs() < 1e-6);
    // The workload engine's result holds the same run, one wd per class.
    assert_eq!(result.runs.len(), 1);
    assert_eq!(result.runs[0].totals.workloads.len(), 5);
    let text = verdict_text(&verdict);
    assert!(
        text.contains("single-block random reads")
            && text.contains("DB time 12000 s")
            && text.contains("Latency distribution of single-block random reads")
            // 12,000 s with the 2,000 s of reads taken away entirely.
            && text.contains("at most 1.20x"),
        "{text}"
    );
    println!("{text}");
    let html = cairn_awr::replay::verdict_html(&verdict);
    assert!(html.contains("<table") && html.contains("db file sequential read"));
    assert!(html.contains("chart-awr-distribution"));
    assert!(!html.contains("<script") && !html.contains("http://") && !html.contains("https://"));
}
