//! The OLTP reports: `awr.txt` shows every AWR section with figures worked out
//! by hand from a result built here, its layout is pinned by a golden file,
//! the awr_info line carries its fields, `result.json` reads back, two runs
//! compare with the post's rows, and `report.html` is self-contained with a
//! chart per figure (rendered by Chromium when it is installed).
//!
//! The sample run, 60 s measured after a 10 s warm-up, 4 sessions:
//! - db file sequential read: 60,000 × 500 µs, 30,000 × 1.5 ms, 9,000 × 5 ms,
//!   1,000 × 20 ms = 100,000 waits, 140 s, avg 1.40 ms; ms buckets <1ms 60%,
//!   <2ms 30%, <8ms 9%, <32ms 1%; µs buckets <512us 60%, >=512us 40%;
//! - db file parallel read: 2,000 × 3 ms, 500 × 9 ms = 10.5 s, avg 4.20 ms
//!   (8 blocks each: 20,000 blocks);
//! - log file sync: 8,000 × 800 µs, 1,000 × 2.5 ms = 8.9 s, avg 988.89 µs;
//! - free buffer waits: 50 × 10 ms = 0.5 s;
//! - background: log file parallel write 5,000 × 500 µs + 1,000 × 1.1 ms =
//!   3.6 s; db file parallel write 600 × 4 ms = 2.4 s; background CPU 4.2 s
//!   (background time 10.2 s: lfpw 35.3%);
//! - DB time 238.8 s (140 / 238.8 = 58.6% for the top event), DB CPU 78 s (32.7%);
//! - 9,000 commits; 120,000 physical reads = 120,000 read requests (2,000.0/s,
//!   13.3 per transaction), 983,040,000 bytes (15.6 MB/s); 36,000 block writes
//!   in 36,000 requests (600/s); 6,000 redo writes of 78,000 × 512-byte blocks;
//!   so Write IO requests 42,000 (700.0/s, 4.7 per transaction);
//! - process CPU 70 s user + 20 s sys: 1.50 cores busy; 162,000 physical
//!   requests: 1,800.0 per core-second, 2,076.9 per DB CPU second.
#![allow(clippy::unwrap_used)]

use std::fs::{self, File};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_kit::histogram::LatencyHistogram;
use cairn_kit::result::{
    CpuInterval, CpuSummary, DeviceStats, Environment, ErrorSummary, TargetInfo, ToolInfo,
};
use cairn_kit_report::chart::{palette, Rgb};
use cairn_kit_report::compare::Verdict;
use cairn_kit_report::compare_text;
use cairn_oltp::dataset::{BlockProblem, DatasetState, LoadReport, VerifyReport};
use cairn_oltp::layout::Shape;
use cairn_oltp::report::{
    awr_info_line, awr_text, compare_oltp, load_text, oltp_html, verify_text,
};
use cairn_oltp::report_file::{load_oltp, write_oltp_reports};
use cairn_oltp::result::{
    ConfRecord, CrossCheck, EventRecord, IntervalEvent, OltpInterval, OltpResult, Settings,
    StatValue, Totals, INTERVAL_BUCKETS_US, OLTP_SCHEMA, OLTP_SCHEMA_VERSION,
};
use cairn_oltp::stats::{Event, Stat};

/// (event, [(latency ns, waits)]) over the measured window.
fn sample_waits() -> Vec<(Event, Vec<(u64, u64)>)> {
    vec![
        (
            Event::DbFileSequentialRead,
            vec![
                (500_000, 60_000),
                (1_500_000, 30_000),
                (5_000_000, 9_000),
                (20_000_000, 1_000),
            ],
        ),
        (
            Event::DbFileParallelRead,
            vec![(3_000_000, 2_000), (9_000_000, 500)],
        ),
        (
            Event::LogFileSync,
            vec![(800_000, 8_000), (2_500_000, 1_000)],
        ),
        (Event::FreeBufferWaits, vec![(10_000_000, 50)]),
        (Event::DbFileParallelWrite, vec![(4_000_000, 600)]),
        (
            Event::LogFileParallelWrite,
            vec![(500_000, 5_000), (1_100_000, 1_000)],
        ),
    ]
}

fn histogram(waits: &[(u64, u64)]) -> LatencyHistogram {
    let mut h = LatencyHistogram::new();
    for (ns, n) in waits {
        for _ in 0..*n {
            h.record(*ns);
        }
    }
    h
}

fn event_record(event: Event, waits: &[(u64, u64)]) -> EventRecord {
    let h = histogram(waits);
    let count: u64 = waits.iter().map(|w| w.1).sum();
    let time_s = waits
        .iter()
        .map(|(ns, n)| *ns as f64 * *n as f64)
        .sum::<f64>()
        / 1e9;
    EventRecord {
        event,
        name: event.name().to_string(),
        class: event.class().to_string(),
        background: event.background(),
        waits: count,
        time_s,
        avg_us: 1e6 * time_s / count as f64,
        latency: h.summary(&[]),
        histogram: h.to_data(),
    }
}

/// One interval's view of an event: `waits` scaled by `share`, latencies by `slower`.
fn interval_event(event: Event, waits: &[(u64, u64)], share: f64, slower: f64) -> IntervalEvent {
    let scaled: Vec<(u64, u64)> = waits
        .iter()
        .map(|(ns, n)| {
            (
                (*ns as f64 * slower) as u64,
                (*n as f64 * share).round() as u64,
            )
        })
        .collect();
    let h = histogram(&scaled);
    let mut buckets = Vec::new();
    let mut below_prev = 0;
    for bound_us in INTERVAL_BUCKETS_US {
        let below = h.count_below(bound_us * 1000);
        buckets.push(below - below_prev);
        below_prev = below;
    }
    buckets.push(h.count() - below_prev);
    IntervalEvent {
        event,
        waits: h.count(),
        avg_us: h.mean_ns() / 1000.0,
        p50_us: h.percentile_ns(50.0) as f64 / 1000.0,
        p99_us: h.percentile_ns(99.0) as f64 / 1000.0,
        buckets,
    }
}

fn target(sd: &str, path: &str, size_bytes: u64, device: &str) -> TargetInfo {
    TargetInfo {
        sd: sd.to_string(),
        path: path.to_string(),
        kind: "file".to_string(),
        size_bytes,
        start_bytes: 0,
        end_bytes: size_bytes,
        logical_sector_bytes: 512,
        physical_sector_bytes: 4096,
        sector_format: "512e".to_string(),
        max_transfer_bytes: 131_072,
        optimal_io_bytes: 0,
        rotational: Some(false),
        discard: true,
        devices: vec![device.to_string()],
        created: false,
        mount_engine: None,
    }
}

fn sample_stats() -> Vec<StatValue> {
    let value = |s: Stat| -> u64 {
        match s {
            Stat::SessionLogicalReads => 600_000,
            Stat::ConsistentGets => 528_000,
            Stat::DbBlockGets => 72_000,
            Stat::CacheHits => 480_000,
            Stat::CacheMisses => 120_000,
            Stat::PhysicalReads => 120_000,
            Stat::PhysicalReadsCache => 120_000,
            Stat::PhysicalReadsDirect => 0,
            Stat::PhysicalReadIoRequests => 120_000,
            Stat::PhysicalReadBytes => 983_040_000,
            Stat::PhysicalReadMultiBlockRequests => 0,
            Stat::PhysicalWrites => 36_000,
            Stat::PhysicalWriteIoRequests => 36_000,
            Stat::PhysicalWriteBytes => 294_912_000,
            Stat::DbBlockChanges => 72_000,
            Stat::RedoSize => 36_864_000,
            Stat::RedoEntries => 72_000,
            Stat::RedoWrites => 6_000,
            Stat::RedoBlocksWritten => 78_000,
            Stat::RedoBytesWritten => 36_864_000,
            Stat::RedoWastage => 3_072_000,
            Stat::RedoWriteIoRequests => 6_000,
            Stat::ExecuteCount => 45_000,
            Stat::UserCommits => 9_000,
            Stat::FreeBufferRequested => 120_000,
            Stat::FreeBufferInspected => 150_000,
            Stat::DirtyBuffersInspected => 3_000,
            Stat::DbwrCheckpointBuffersWritten => 6_000,
            Stat::DbwrCheckpoints => 2,
            Stat::TableScanBlocksGotten => 0,
            Stat::TableScansShort => 0,
            Stat::TableScansLong => 0,
            Stat::RowsTouched => 600_000,
            Stat::BlockCorruptions => 0,
            Stat::CommitsUncovered => 0,
        }
    };
    Stat::ALL
        .iter()
        .map(|s| StatValue {
            name: s.name().to_string(),
            value: value(*s),
        })
        .collect()
}

const CONF_TEXT: &str = "UPDATE_PCT=20\nSCAN_PCT=0\nRUN_TIME=70\nSCALE=1G\nWORK_UNIT=8\nREDO_STRESS=LITE\nTHREADS_PER_SCHEMA=2\nAWR_SRC=AWR_PDB\nDBA_PRIV_USER=\"system\"\n";

fn sample() -> OltpResult {
    let waits = sample_waits();
    // (warm-up, seconds, rate factor, latency factor)
    let shape: [(bool, f64, f64, f64); 5] = [
        (true, 10.0, 1.2, 1.6),
        (false, 15.0, 0.96, 1.05),
        (false, 15.0, 1.02, 0.97),
        (false, 15.0, 0.99, 1.0),
        (false, 15.0, 1.03, 0.98),
    ];
    let mut end_s = 0.0;
    let intervals: Vec<OltpInterval> = shape
        .iter()
        .enumerate()
        .map(|(i, (warmup, seconds, rate, slower))| {
            end_s += seconds;
            let share = seconds / 60.0 * rate;
            OltpInterval {
                index: i as u32 + 1,
                end_s,
                seconds: *seconds,
                warmup: *warmup,
                db_time_s: 238.8 * seconds / 60.0 * slower.min(1.05),
                db_cpu_s: 78.0 * seconds / 60.0 * rate,
                physical_read_iops: 2_000.0 * rate,
                physical_write_iops: if *warmup { 100.0 } else { 600.0 * rate },
                redo_write_iops: 100.0 * rate,
                logical_reads_per_s: 10_000.0 * rate,
                redo_bytes_per_s: 614_400.0 * rate,
                read_mb_per_s: 15.625 * rate,
                write_mb_per_s: 5.3 * rate,
                transactions_per_s: 150.0 * rate,
                executes_per_s: 750.0 * rate,
                events: waits
                    .iter()
                    .map(|(e, w)| interval_event(*e, w, share, *slower))
                    .collect(),
                cpu: CpuInterval {
                    user_s: 70.0 * seconds / 60.0,
                    sys_s: 20.0 * seconds / 60.0,
                    machine_busy_pct: 19.5,
                },
                devices: Vec::new(),
            }
        })
        .collect();
    OltpResult {
        schema: OLTP_SCHEMA.to_string(),
        schema_version: OLTP_SCHEMA_VERSION,
        tool: ToolInfo {
            name: "cairn".to_string(),
            version: "0.1.0".to_string(),
            commit: "v0.1.0-42-gabc1234".to_string(),
        },
        started_at: "2024-05-02T10:00:10Z".to_string(),
        ended_at: "2024-05-02T10:01:10Z".to_string(),
        seed: 7,
        environment: Environment {
            hostname: "dbhost01".to_string(),
            kernel: "6.1.0-18-amd64".to_string(),
            os: "Debian GNU/Linux 12 (bookworm)".to_string(),
            cpu_model: "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz".to_string(),
            cpus: 8,
            memory_bytes: 32 << 30,
            clock_ticks: 100,
        },
        conf: ConfRecord {
            path: "slob.conf".to_string(),
            text: CONF_TEXT.to_string(),
            effective: vec![
                ("UPDATE_PCT".to_string(), "20".to_string()),
                ("SCAN_PCT".to_string(), "0".to_string()),
                ("RUN_TIME".to_string(), "70".to_string()),
                ("SCALE".to_string(), "1G".to_string()),
                ("WORK_UNIT".to_string(), "8".to_string()),
                ("REDO_STRESS".to_string(), "LITE".to_string()),
                ("THREADS_PER_SCHEMA".to_string(), "2".to_string()),
            ],
            ignored: vec!["AWR_SRC".to_string(), "DBA_PRIV_USER".to_string()],
        },
        settings: Settings {
            sessions: 4,
            schemas: 2,
            threads_per_schema: 2,
            cache_bytes: 64 << 20,
            cache_buffers: 8_192,
            read_path: "cache".to_string(),
            batch_reads: 8,
            direct_read_threshold_blocks: 1_024,
            multiblock_read_count: 16,
            log_buffer_bytes: 8 << 20,
            checkpoint_interval_s: 30.0,
            interval_s: 15.0,
            run_time_s: 70.0,
            work_loop: 0,
            redo_block_bytes: 512,
            engine: "io_uring".to_string(),
        },
        shape: Shape {
            block_size: 8192,
            schemas: 2,
            table_blocks: 131_072,
            scan_blocks: 128,
            obfuscate: false,
        },
        data_targets: vec![
            target("data1", "/srv/cairn/data1.dbf", 2 << 30, "nvme0n1"),
            target("data2", "/srv/cairn/data2.dbf", 2 << 30, "nvme0n1"),
        ],
        redo_target: target("redo", "/srv/redo/redo01.log", 1 << 30, "nvme1n1"),
        warmup_s: 10.0,
        elapsed_s: 60.0,
        totals: Totals {
            db_time_s: 238.8,
            db_cpu_s: 78.0,
            background_cpu_s: 4.2,
            stats: sample_stats(),
            events: waits.iter().map(|(e, w)| event_record(*e, w)).collect(),
        },
        intervals,
        cpu: CpuSummary {
            user_s: 70.0,
            sys_s: 20.0,
            iops_per_cpu_s: 1_800.0,
            machine_busy_pct: 19.5,
        },
        devices: vec![
            DeviceStats {
                device: "nvme0n1".to_string(),
                r_s: 1_999.7,
                w_s: 585.0,
                rmb_s: 15.62,
                wmb_s: 4.69,
                rareq_sz_kb: 8.0,
                wareq_sz_kb: 8.2,
                aqu_sz: 2.9,
                r_await_ms: 1.38,
                w_await_ms: 3.9,
                util_pct: 92.5,
                d_s: 0.0,
                f_s: 0.0,
            },
            DeviceStats {
                device: "nvme1n1".to_string(),
                r_s: 0.0,
                w_s: 100.0,
                rmb_s: 0.0,
                wmb_s: 0.63,
                wareq_sz_kb: 6.5,
                aqu_sz: 0.06,
                w_await_ms: 0.55,
                util_pct: 5.5,
                ..DeviceStats::default()
            },
        ],
        crosscheck: vec![
            CrossCheck {
                device: "nvme0n1".to_string(),
                targets: vec![
                    "/srv/cairn/data1.dbf".to_string(),
                    "/srv/cairn/data2.dbf".to_string(),
                ],
                cairn_reads: 120_000,
                kernel_reads: 119_980,
                cairn_writes: 36_000,
                kernel_writes: 35_100,
                cairn_read_bytes: 983_040_000,
                kernel_read_bytes: 982_876_160,
                cairn_write_bytes: 294_912_000,
                kernel_write_bytes: 294_912_000,
            },
            CrossCheck {
                device: "nvme1n1".to_string(),
                targets: vec!["/srv/redo/redo01.log".to_string()],
                cairn_reads: 0,
                kernel_reads: 0,
                cairn_writes: 6_000,
                kernel_writes: 6_000,
                cairn_read_bytes: 0,
                kernel_read_bytes: 0,
                cairn_write_bytes: 39_936_000,
                kernel_write_bytes: 39_936_000,
            },
        ],
        ended_early: None,
        errors: ErrorSummary::default(),
    }
}

/// The lines of the section headed `heading` (up to the next underlined heading).
fn section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| *l == heading)
        .unwrap_or_else(|| panic!("no section {heading:?} in:\n{text}"));
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate().skip(start + 2) {
        let underlined = lines
            .get(i + 1)
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c == '-') && n.len() == l.len());
        if underlined {
            break;
        }
        out.push(*l);
    }
    out
}

/// The cells (runs of 2+ spaces apart) of the line in `lines` starting with `prefix`.
fn row(lines: &[&str], prefix: &str) -> Vec<String> {
    let line = lines
        .iter()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{}", lines.join("\n")));
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn awr_text_has_every_section() {
    let text = awr_text(&sample());
    for heading in [
        "Cairn OLTP Report (AWR style)",
        "Targets",
        "slob.conf settings in effect (slob.conf)",
        "Load Profile",
        "Top Foreground Events",
        "Background Wait Events",
        "Wait Classes",
        "Wait Event Histogram",
        "Wait Event Histogram Detail (up to 512 us)",
        "Wait Event Latency Percentiles",
        "IO Profile",
        "Instance Activity Stats",
        "Devices (/proc/diskstats over the measured window)",
        "Cross-check: Cairn's counts against the kernel's",
        "Summary (awr_info)",
    ] {
        assert!(
            text.lines().any(|l| l == heading),
            "missing section {heading:?}:\n{text}"
        );
    }
    // A clean run shouts nothing.
    assert!(!text.contains("***"), "{text}");
    assert!(!text.lines().any(|l| l == "Errors"));
    // Every statistic is listed.
    let stats = section(&text, "Instance Activity Stats");
    for s in Stat::ALL {
        assert!(
            stats.iter().any(|l| l.starts_with(s.name())),
            "{} missing",
            s.name()
        );
    }
    // Header figures.
    for needle in [
        "dbhost01",
        "Debian GNU/Linux 12 (bookworm), kernel 6.1.0-18-amd64",
        "2024-05-02T10:00:10Z",
        "2024-05-02T10:01:10Z",
        "1.00 (mins)",
        "3.98 (mins)",
        "4 (2 schemas x 2 threads per schema)",
        "64 MiB, 8,192 buffers",
        "/srv/redo/redo01.log",
        "AWR_SRC, DBA_PRIV_USER",
        "UPDATE_PCT:",
    ] {
        assert!(text.contains(needle), "header lacks {needle:?}:\n{text}");
    }
}

#[test]
fn load_profile_figures_are_per_second_and_per_transaction() {
    let text = awr_text(&sample());
    let lp = section(&text, "Load Profile");
    assert_eq!(
        row(&lp, "Physical read (blocks):"),
        ["Physical read (blocks):", "2,000.0", "13.3"]
    );
    assert_eq!(row(&lp, "DB Time(s):"), ["DB Time(s):", "3.98", "0.03"]);
    assert_eq!(row(&lp, "DB CPU(s):"), ["DB CPU(s):", "1.30", "0.01"]);
    assert_eq!(
        row(&lp, "Redo size (bytes):"),
        ["Redo size (bytes):", "614,400.0", "4,096.0"]
    );
    assert_eq!(
        row(&lp, "Logical read (blocks):"),
        ["Logical read (blocks):", "10,000.0", "66.7"]
    );
    // Redo writes count as write requests: (36,000 + 6,000) / 60 and / 9,000.
    assert_eq!(
        row(&lp, "Write IO requests:"),
        ["Write IO requests:", "700.0", "4.7"]
    );
    assert_eq!(row(&lp, "Read IO (MB):"), ["Read IO (MB):", "15.6", "0.1"]);
    assert_eq!(row(&lp, "Transactions:"), ["Transactions:", "150.0", "1.0"]);
}

#[test]
fn event_tables_rank_by_time_and_share_db_time() {
    let text = awr_text(&sample());
    let top = section(&text, "Top Foreground Events");
    let ranked: Vec<String> = top
        .iter()
        .skip(4) // blank, title, column names, rule
        .take_while(|l| !l.is_empty())
        .map(|l| row(&[*l], "")[0].clone())
        .collect();
    assert_eq!(
        ranked,
        [
            "db file sequential read",
            "DB CPU",
            "db file parallel read",
            "log file sync",
            "free buffer waits"
        ]
    );
    // 140 s of 238.8 s DB time; 100,000 waits averaging 1.40 ms.
    assert_eq!(
        row(&top, "db file sequential read"),
        [
            "db file sequential read",
            "100,000",
            "140.0",
            "1.40ms",
            "58.6",
            "User I/O"
        ]
    );
    assert_eq!(row(&top, "DB CPU"), ["DB CPU", "78.0", "32.7"]);
    assert_eq!(
        row(&top, "log file sync"),
        ["log file sync", "9,000", "8.9", "988.89us", "3.7", "Commit"]
    );
    // Background: 3.6 s of 4.2 + 3.6 + 2.4 s.
    let bg = section(&text, "Background Wait Events");
    assert_eq!(
        row(&bg, "log file parallel write"),
        [
            "log file parallel write",
            "6,000",
            "3.6",
            "600.00us",
            "35.3",
            "System I/O"
        ]
    );
    assert!(!bg.iter().any(|l| l.starts_with("db file sequential read")));
    let classes = section(&text, "Wait Classes");
    // 102,500 waits, 150.5 s: 1.47 ms on average.
    assert_eq!(
        row(&classes, "User I/O"),
        ["User I/O", "102,500", "150.5", "1.47ms", "63.0"]
    );
}

#[test]
fn histograms_show_each_bucket_share() {
    let text = awr_text(&sample());
    let ms = section(&text, "Wait Event Histogram");
    let head = row(&ms, "Event");
    assert_eq!(
        head,
        [
            "Event",
            "Total Waits",
            "<1ms",
            "<2ms",
            "<4ms",
            "<8ms",
            "<16ms",
            "<32ms",
            "<=1s",
            ">1s"
        ]
    );
    assert_eq!(
        row(&ms, "db file sequential read"),
        [
            "db file sequential read",
            "100,000",
            "60.0",
            "30.0",
            "-",
            "9.0",
            "-",
            "1.0",
            "-",
            "-"
        ]
    );
    let us = section(&text, "Wait Event Histogram Detail (up to 512 us)");
    let cells = row(&us, "db file sequential read");
    assert_eq!(cells[cells.len() - 2..], ["60.0", "40.0"], "{cells:?}");
    let p = section(&text, "Wait Event Latency Percentiles");
    let cells = row(&p, "free buffer waits");
    assert_eq!(cells[1..3], ["50", "10.00ms"]);
}

#[test]
fn io_profile_and_devices() {
    let text = awr_text(&sample());
    let io = section(&text, "IO Profile");
    assert_eq!(
        row(&io, "Total Requests:"),
        ["Total Requests:", "2,700.0", "2,000.0", "700.0"]
    );
    assert_eq!(
        row(&io, "Redo Requests:"),
        ["Redo Requests:", "100.0", "0.0", "100.0"]
    );
    assert_eq!(
        row(&io, "Optimized Requests:"),
        ["Optimized Requests:", "0.0", "0.0", "0.0"]
    );
    // 78,000 redo blocks of 512 bytes over 6,000 writes: 6.5 KB each.
    assert_eq!(row(&io, "Redo:"), ["Redo:", "6.5", "6.5"]);
    let dev = section(&text, "Devices (/proc/diskstats over the measured window)");
    assert_eq!(row(&dev, "nvme0n1")[1], "1,999.7");
    let cc = section(&text, "Cross-check: Cairn's counts against the kernel's");
    // 35,100 / 36,000 = 0.975: within 5%.
    let line = cc.iter().find(|l| l.contains("write requests")).unwrap();
    assert!(line.contains("0.975") && line.ends_with("yes"), "{line}");
}

#[test]
fn awr_text_matches_the_golden_file() {
    let text = awr_text(&sample());
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/oltp_awr.txt");
    if std::env::var_os("CAIRN_UPDATE_GOLDEN").is_some() {
        fs::write(&path, &text).unwrap();
        println!("updated {}", path.display());
    }
    let want = fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; create it with CAIRN_UPDATE_GOLDEN=1 cargo test -p cairn-oltp --test oltp_report",
            path.display()
        )
    });
    if text != want {
        let (n, (got, exp)) = text
            .lines()
            .zip(want.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .unwrap_or((
                text.lines().count().min(want.lines().count()),
                ("<end>", "<end>"),
            ));
        panic!(
            "awr.txt no longer matches {} (first difference at line {}: golden `{exp}`, now `{got}`).\n\
             If the change is intended, regenerate it with CAIRN_UPDATE_GOLDEN=1 cargo test -p cairn-oltp --test oltp_report",
            path.display(),
            n + 1
        );
    }
}

fn info_fields(line: &str) -> Vec<(String, String)> {
    let (head, top) = line.split_once(" top_wait=").unwrap();
    let mut fields: Vec<(String, String)> = head
        .split(' ')
        .skip(1)
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    fields.push(("top_wait".to_string(), top.to_string()));
    fields
}

#[test]
fn awr_info_line_carries_the_headline_figures() {
    let r = sample();
    let line = awr_info_line(&r);
    assert!(!line.contains('\n'));
    assert!(line.starts_with("awr_info "), "{line}");
    let fields = info_fields(&line);
    let want = [
        ("sessions", "4"),
        ("read_iops", "2000.0"),
        ("write_iops", "600.0"),
        ("redo_iops", "100.0"),
        ("liops", "10000.0"),
        ("read_mbps", "15.6"),
        ("write_mbps", "4.7"),
        ("redo_mbps", "0.6"),
        ("seq_read_us", "1400"),
        ("par_read_us", "4200"),
        ("lfpw_us", "600"),
        ("lfs_us", "989"),
        ("iops_per_db_cpu_s", "2076.9"),
        ("iops_per_core", "1800.0"),
        ("cores_busy", "1.50"),
        ("errors", "0"),
        ("top_wait", "\"db file sequential read\""),
    ];
    let got: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(got, want);
    // It is the last line of awr.txt.
    let text = awr_text(&r);
    assert_eq!(
        text.lines().rev().find(|l| !l.is_empty()),
        Some(line.as_str())
    );
}

#[test]
fn a_run_without_commits_or_waits_leaves_blanks_not_zeros() {
    let mut r = sample();
    for s in &mut r.totals.stats {
        if s.name == Stat::UserCommits.name() {
            s.value = 0;
        }
    }
    r.totals.events.retain(|e| e.event != Event::LogFileSync);
    let text = awr_text(&r);
    let lp = section(&text, "Load Profile");
    assert_eq!(
        row(&lp, "Physical read (blocks):"),
        ["Physical read (blocks):", "2,000.0"]
    );
    assert!(text.contains("the per-transaction column is blank"));
    let fields = info_fields(&awr_info_line(&r));
    assert!(fields.contains(&("lfs_us".to_string(), "-".to_string())));
}

#[test]
fn an_early_end_and_errors_are_loud() {
    let mut r = sample();
    r.ended_early = Some("interrupted".to_string());
    r.errors = ErrorSummary {
        count: 2,
        first: vec!["read /srv/cairn/data1.dbf at 8192: Input/output error".to_string()],
    };
    let text = awr_text(&r);
    assert!(
        text.contains("*** THE RUN ENDED EARLY: interrupted"),
        "{text}"
    );
    assert!(text.contains("*** 2 I/O ERRORS during the run; the first: read /srv/cairn/data1.dbf"));
    assert!(text.lines().any(|l| l == "Errors"));
    assert!(awr_info_line(&r).contains(" errors=2 "));
}

#[test]
fn written_reports_round_trip_through_load_oltp() {
    let dir = tempfile::tempdir().unwrap();
    let r = sample();
    write_oltp_reports(dir.path(), &r).unwrap();
    let mut names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["awr.txt", "report.html", "result.json"]);
    let back = load_oltp(&dir.path().join("result.json")).unwrap();
    assert!(back == r, "result.json does not read back whole");
    assert_eq!(
        fs::read_to_string(dir.path().join("awr.txt")).unwrap(),
        awr_text(&r)
    );
}

/// B does `work` times the work of A at `latency` times its waits.
fn scaled(r: &OltpResult, work: f64, latency: f64) -> OltpResult {
    let mut b = r.clone();
    b.started_at = "2024-05-03T10:00:10Z".to_string();
    for s in &mut b.totals.stats {
        s.value = (s.value as f64 * work).round() as u64;
    }
    for e in &mut b.totals.events {
        e.waits = (e.waits as f64 * work).round() as u64;
        e.time_s *= work * latency;
    }
    b.totals.db_cpu_s *= work;
    b
}

#[test]
fn compare_gives_the_posts_rows_with_their_change() {
    let a = sample();
    let b = scaled(&a, 1.25, 0.5);
    let c = compare_oltp(&a, &b);
    let titles: Vec<&str> = c.sections.iter().map(|s| s.title.as_str()).collect();
    assert_eq!(titles, ["Load Profile (per second)", "Wait event average"]);
    let metrics: Vec<&str> = c.sections[0]
        .rows
        .iter()
        .map(|r| r.metric.as_str())
        .collect();
    assert_eq!(
        metrics,
        [
            "Redo Size",
            "Logical read (blocks)",
            "Block changes",
            "Physical Read (blocks)",
            "Read IO requests",
            "Read IO (MB)",
            "Executes (SQL)",
            "Transactions"
        ]
    );
    for r in &c.sections[0].rows {
        let p = r.pct_change().unwrap();
        assert!((p - 25.0).abs() < 0.01, "{}: {p}", r.metric);
        assert_eq!(r.verdict(), Some(Verdict::Better), "{}", r.metric);
    }
    let phys = &c.sections[0].rows[3];
    assert_eq!((phys.a, phys.b), (Some(2_000.0), Some(2_500.0)));
    let waits = &c.sections[1].rows;
    let metrics: Vec<&str> = waits.iter().map(|r| r.metric.as_str()).collect();
    assert_eq!(
        metrics,
        [
            "db file sequential read time",
            "db file parallel read time",
            "log file sync",
            "log file parallel write",
            "User IO Avg Wait time",
            "physical IOPS per DB CPU second"
        ]
    );
    let seq = &waits[0];
    assert!((seq.a.unwrap() - 1_400.0).abs() < 1e-6);
    assert!((seq.b.unwrap() - 700.0).abs() < 1e-6);
    assert!((seq.pct_change().unwrap() + 50.0).abs() < 1e-9);
    assert_eq!(seq.verdict(), Some(Verdict::Better));
    // (140 + 10.5) s over 102,500 waits.
    assert!((waits[4].a.unwrap() - 1e6 * 150.5 / 102_500.0).abs() < 1e-6);
    // Work and DB CPU both grew by 25%: the same I/O per CPU second.
    assert_eq!(waits[5].verdict(), Some(Verdict::Same));
    let text = compare_text(&c);
    assert!(text.contains("Physical Read (blocks)"), "{text}");
    assert!(text.contains("+25.0%"), "{text}");
    assert!(text.contains("1.40ms") && text.contains("700us"), "{text}");
    assert!(!c.a_name.contains('['), "same engine: not named");
    // Runs on two engines are named by them.
    let mut b = b;
    b.settings.engine = "sync".into();
    let c = compare_oltp(&a, &b);
    assert!(c.a_name.ends_with("[io_uring]") && c.b_name.ends_with("[sync]"));
}

#[test]
fn html_is_self_contained_with_a_chart_per_figure() {
    let r = sample();
    let html = oltp_html(&r);
    // IOPS, DB time, latency per event, the top I/O event's histogram over
    // time, then a histogram for each of the 4 foreground events and the 2
    // background ones.
    assert_eq!(html.matches("<svg").count(), 10, "{html}");
    for kind in [
        "chart-oltp-iops",
        "chart-oltp-dbtime",
        "chart-oltp-event-latency",
        "chart-oltp-event-buckets",
    ] {
        assert_eq!(html.matches(kind).count(), 1, "{kind}");
    }
    assert_eq!(html.matches("class=\"chart chart-histogram\"").count(), 6);
    assert!(
        html.contains(">% of waits</text>"),
        "an event histogram counts waits"
    );
    assert!(!html.contains("<script"));
    assert!(!html.contains("http://") && !html.contains("https://"));
    assert_eq!(
        html.matches("<table").count(),
        html.matches("</table>").count()
    );
    assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
    assert!(html.matches("<table").count() >= 12);
    assert!(html.contains(">warm-up</text>"), "the warm-up is shaded");
    for e in &r.totals.events {
        assert!(
            html.contains(&format!(
                "stroke=\"{}\"",
                palette::EVENTS[e.event.index()].hex()
            )),
            "no latency line for {}",
            e.name
        );
    }
    // The same tables as the text.
    assert!(
        html.contains("<td class=\"l\">Physical read (blocks):</td><td class=\"r\">2,000.0</td>")
    );
    assert!(html.contains(&awr_info_line(&r).replace('"', "&quot;")));
}

fn target_info(path: &str, created: bool) -> TargetInfo {
    let mut t = target("data1", path, 2 << 30, "loop0");
    t.created = created;
    t
}

#[test]
fn load_and_verify_reports_say_what_happened() {
    let shape = sample().shape;
    let load = LoadReport {
        dataset_id: 0x00c0_ffee,
        shape,
        parallel: 2,
        blocks: 262_400,
        bytes: 262_400 * 8192,
        elapsed_s: 10.0,
        mb_per_s: 205.0,
        blocks_per_s: 26_240.0,
        cpu_user_s: 3.0,
        cpu_sys_s: 1.0,
        targets: vec![target_info("/srv/cairn/data1.dbf", true)],
        redo: target_info("/srv/redo/redo01.log", false),
        created: vec!["/srv/cairn/data1.dbf".to_string()],
        engine: "io_uring".to_string(),
    };
    let text = load_text(&load);
    for needle in [
        "Engine:",
        "io_uring",
        "262,400",
        "205.0 MB/s, 26,240.0 blocks/s",
        "3s user + 1s system = 4s (0.40 cores busy on average)",
        "Created by setup: /srv/cairn/data1.dbf.",
        "0000000000c0ffee",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }

    let problem = |n: u64, what: &str| BlockProblem {
        target: "/srv/cairn/data1.dbf".to_string(),
        offset_bytes: 1_048_576 + n * 8192,
        schema: 1,
        segment: "table".to_string(),
        number: n,
        problem: what.to_string(),
    };
    let verify = VerifyReport {
        redo: Default::default(),
        dataset_id: 0x00c0_ffee,
        shape,
        state: DatasetState::Running,
        blocks_checked: 262_400,
        table_versions: 300_123,
        problems_total: 3,
        problems: vec![problem(5, "bad checksum"), problem(9, "holds block 7")],
        engine: "sync".to_string(),
    };
    let text = verify_text(&verify);
    assert!(
        text.contains("NOT CLEAN: the last run did not shut down cleanly"),
        "{text}"
    );
    assert!(text.contains("300,123"));
    assert!(
        text.lines()
            .any(|l| l.starts_with("Engine:") && l.ends_with("sync")),
        "{text}"
    );
    let lines: Vec<&str> = text.lines().collect();
    let bad = row(&lines, "/srv/cairn/data1.dbf");
    assert_eq!(
        bad,
        [
            "/srv/cairn/data1.dbf",
            "1,089,536",
            "1",
            "table",
            "5",
            "bad checksum"
        ]
    );
    assert!(
        text.contains("Total: 3 problems; the first 2 are listed."),
        "{text}"
    );

    let clean = VerifyReport {
        redo: Default::default(),
        state: DatasetState::Clean,
        problems_total: 0,
        problems: Vec::new(),
        ..verify
    };
    let text = verify_text(&clean);
    assert!(
        text.contains("OK: all 262,400 blocks checked are good"),
        "{text}"
    );
    assert!(!text.contains("NOT CLEAN") && !text.contains("***"));
}

// --- Rendering in a real browser (as tests/report_chromium.rs does) ---

const DRAWN_PIXELS_MIN: usize = 200;
const CHANNEL_TOLERANCE: u8 = 2;
const BROWSER_TIMEOUT: Duration = Duration::from_secs(90);
const WINDOW: (u32, u32) = (1200, 12_000);

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

fn screenshot(browser: &Path, html: &Path, png: &Path, work: &Path) {
    let log_path = work.join("chromium.log");
    let log = File::create(&log_path).unwrap();
    let mut child = Command::new(browser)
        .arg("--headless")
        .arg("--no-sandbox")
        .arg("--disable-gpu")
        .arg("--hide-scrollbars")
        .arg("--no-first-run")
        .arg("--force-device-scale-factor=1")
        .arg(format!(
            "--user-data-dir={}",
            work.join("profile").display()
        ))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("--window-size={},{}", WINDOW.0, WINDOW.1))
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
    assert_eq!((info.width, info.height), WINDOW, "window size");
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

#[test]
fn oltp_html_draws_every_chart_in_a_browser() {
    let Some(browser) = find_chromium() else {
        assert!(
            std::env::var_os("CAIRN_REQUIRE_TOOLS").is_none(),
            "chromium is required (CAIRN_REQUIRE_TOOLS is set) but neither chromium nor chromium-browser is installed; scripts/install-deps installs Debian's chromium package"
        );
        println!("skipped: the OLTP HTML rendering check: chromium is not installed (scripts/install-deps installs it)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let r = sample();
    write_oltp_reports(dir.path(), &r).unwrap();
    let png = dir.path().join("report.png");
    screenshot(&browser, &dir.path().join("report.html"), &png, dir.path());
    let px = pixels(&png);
    let mut colours: Vec<(String, Rgb)> = vec![
        ("physical reads".to_string(), palette::PHYS_READ),
        ("data-file writes".to_string(), palette::PHYS_WRITE),
        ("redo writes".to_string(), palette::REDO_WRITE),
        ("DB time".to_string(), palette::DB_TIME),
        ("DB CPU".to_string(), palette::DB_CPU),
    ];
    for e in &r.totals.events {
        colours.push((e.name.clone(), palette::EVENTS[e.event.index()]));
    }
    let counts: Vec<(String, usize)> = colours
        .iter()
        .map(|(n, c)| (n.clone(), count(&px, *c)))
        .collect();
    println!("report.html: pixels per series colour: {counts:?}");
    let missing: Vec<&(String, usize)> = counts
        .iter()
        .filter(|(_, n)| *n < DRAWN_PIXELS_MIN)
        .collect();
    assert!(
        missing.is_empty(),
        "these series were not drawn (pixels < {DRAWN_PIXELS_MIN}): {missing:?}"
    );
}
