//! AWR text reports read whole: one report per layout family of
//! `docs/awr-formats.md` (10.2.0.4 with its all-sessions `Wait Events` table,
//! 11.2.0.1, 11.2.0.4, 12.2 with unit-suffixed averages
//! and µs histograms, a 19c PDB report spooled through SQL*Plus, a 19c RAC
//! instance report, and the 11.2.0.4 report pasted with its spacing lost).
//! The reports are written for these tests in the layouts the document
//! describes, with figures that agree with each other (per second = total ÷
//! elapsed, averages = time ÷ waits); no real report is copied.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use cairn_awr::model::{AwrReport, EventLine, HistogramLine};
use cairn_awr::text::parse_awr_text;
use proptest::prelude::*;

const R10204: &str = include_str!("data/awr/text/awr_10204.txt");
const R11201: &str = include_str!("data/awr/text/awr_11201.txt");
const R11204: &str = include_str!("data/awr/text/awr_11204.txt");
const R11204_PASTED: &str = include_str!("data/awr/text/awr_11204_pasted.txt");
const R122: &str = include_str!("data/awr/text/awr_122.txt");
const R19_PDB: &str = include_str!("data/awr/text/awr_19c_pdb_sqlplus.txt");
const R19_RAC: &str = include_str!("data/awr/text/awr_19c_rac_inst2.txt");
const BANK: &str = include_str!("data/awr/bank_fragment.txt");

fn top<'a>(r: &'a AwrReport, name: &str) -> &'a EventLine {
    r.top_events
        .iter()
        .find(|e| e.event == name)
        .unwrap_or_else(|| panic!("no top event {name:?} in {:#?}", r.top_events))
}

fn hist<'a>(r: &'a AwrReport, table: &str, event: &str) -> &'a HistogramLine {
    r.histograms
        .iter()
        .find(|h| h.table == table && h.event == event)
        .unwrap_or_else(|| panic!("no histogram row {table:?}/{event:?}"))
}

fn bucket(h: &HistogramLine, label: &str) -> Option<f64> {
    h.buckets
        .iter()
        .find(|(l, _)| l == label)
        .unwrap_or_else(|| panic!("no bucket {label:?} in {:?}", h.buckets))
        .1
}

fn profile(r: &AwrReport, label: &str) -> Option<f64> {
    r.load_profile
        .iter()
        .find(|l| l.label == label)
        .unwrap_or_else(|| panic!("no Load Profile row {label:?}"))
        .per_second
}

fn io(r: &AwrReport, label: &str) -> (Option<f64>, Option<f64>, Option<f64>) {
    let l = r
        .io_profile
        .iter()
        .find(|l| l.label == label)
        .unwrap_or_else(|| panic!("no IO Profile row {label:?}"));
    (l.read_write_per_s, l.read_per_s, l.write_per_s)
}

fn stat(r: &AwrReport, name: &str) -> (Option<f64>, Option<f64>, Option<f64>) {
    let s = r
        .statistic(name)
        .unwrap_or_else(|| panic!("no statistic {name:?}"));
    (s.total, s.per_second, s.per_trans)
}

fn warned(r: &AwrReport, section: &str, words: &str) -> bool {
    r.warnings
        .iter()
        .any(|w| w.section.contains(section) && w.message.contains(words))
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-6 * b.abs().max(1.0))
}

#[test]
fn a_10_2_0_4_report_reads_whole() {
    let r = parse_awr_text(R10204, "awr_10204.txt");
    assert!(r.warnings.is_empty(), "{:#?}", r.warnings);
    // 10.2: one header table, the host on the database line, no platform.
    let h = &r.header;
    assert_eq!(h.db_name.as_deref(), Some("HRPROD"));
    assert_eq!(h.db_id, Some(2_745_511_903));
    assert_eq!(
        (h.instance.as_deref(), h.instance_number),
        (Some("hrprod"), Some(1))
    );
    assert_eq!(h.release.as_deref(), Some("10.2.0.4.0"));
    assert_eq!(
        (h.rac, h.cdb, h.container.as_deref()),
        (Some(false), None, None)
    );
    assert_eq!(h.host.as_deref(), Some("hrdb02"));
    assert_eq!((h.platform.as_deref(), h.cpus), (None, None));
    assert_eq!((h.begin_snap_id, h.end_snap_id), (Some(5120), Some(5121)));
    assert_eq!(h.begin_snap_time.as_deref(), Some("09-Mar-10 13:00:11"));
    assert_eq!(h.end_snap_time.as_deref(), Some("09-Mar-10 14:00:23"));
    assert_eq!((h.elapsed_min, h.db_time_min), (Some(60.2), Some(558.0)));
    assert_eq!(h.block_size, Some(8192));

    // The 10g labels, two columns; the ratio lines under them are no rows.
    assert_eq!(r.load_profile.len(), 12, "{:#?}", r.load_profile);
    let redo = &r.load_profile[0];
    assert_eq!(redo.label, "Redo size");
    assert_eq!(
        (redo.per_second, redo.per_transaction, redo.per_exec),
        (Some(368_640.0), Some(3_150.77), None)
    );
    assert_eq!(profile(&r, "Sorts"), Some(146.0));
    assert_eq!(profile(&r, "Hard parses"), Some(1.25));
    let tx = r.load_profile.last().unwrap();
    assert_eq!(
        (tx.label.as_str(), tx.per_second, tx.per_transaction),
        ("Transactions", Some(117.0), None)
    );

    // Top 5 Timed Events: `CPU time` without waits, `%Total Call Time`,
    // the wait class right-aligned.
    assert_eq!(r.top_events.len(), 5);
    let seq = top(&r, "db file sequential read");
    assert_eq!(
        (seq.waits, seq.total_wait_s, seq.avg_wait_us),
        (Some(5_634_720.0), Some(16_904.0), Some(3_000.0))
    );
    assert_eq!(
        (seq.pct_db_time, seq.wait_class.as_deref()),
        (Some(50.5), Some("User I/O"))
    );
    let cpu = top(&r, "CPU time");
    assert_eq!(
        (cpu.waits, cpu.total_wait_s, cpu.avg_wait_us),
        (None, Some(5_200.0), None)
    );
    assert_eq!(
        (cpu.pct_db_time, cpu.wait_class.as_deref()),
        (Some(15.5), None)
    );
    assert_eq!(
        top(&r, "log file sync").wait_class.as_deref(),
        Some("Commit"),
        "from `    Commit`"
    );

    // `Wait Events` holds every session's waits: the foreground ones are
    // what is left once the background table is taken out of it.
    let fg = |name: &str| {
        r.foreground_events
            .iter()
            .find(|e| e.event == name)
            .unwrap_or_else(|| panic!("no foreground event {name:?}"))
    };
    let seq = fg("db file sequential read");
    assert_eq!(
        (seq.waits, seq.total_wait_s),
        (Some(5_651_480.0 - 16_760.0), Some(16_951.0 - 47.0)),
        "the Top 5 figures again"
    );
    assert_eq!((seq.pct_db_time, seq.wait_class.as_deref()), (None, None));
    let cf = fg("control file sequential read");
    assert_eq!((cf.waits, cf.total_wait_s), (Some(18_060.0), Some(11.0)));
    assert!(
        close(cf.avg_wait_us, 11.0e6 / 18_060.0),
        "{:?}",
        cf.avg_wait_us
    );
    let scat = fg("db file scattered read");
    assert_eq!(
        (scat.waits, scat.avg_wait_us),
        (Some(541_800.0), Some(9_000.0))
    );
    let enq = fg("enq: TX - row lock contentio");
    assert_eq!(enq.total_wait_s, Some(241.0));
    assert_eq!(fg("SQL*Net message from client").waits, Some(9_120_300.0));
    for bg_only in [
        "log file parallel write",
        "db file parallel write",
        "pmon timer",
    ] {
        assert!(
            r.foreground_events.iter().all(|e| e.event != bg_only),
            "{bg_only} is a background wait"
        );
    }
    assert_eq!(r.foreground_events.len(), 11, "{:#?}", r.foreground_events);
    assert_eq!(r.background_events.len(), 10);
    let lgwr = r.event("log file parallel write").unwrap();
    assert_eq!(
        (lgwr.waits, lgwr.total_wait_s, lgwr.avg_wait_us),
        (Some(216_720.0), Some(542.0), Some(3_000.0))
    );
    let smon = r.event("smon timer").unwrap();
    assert_eq!(
        (smon.waits, smon.avg_wait_us),
        (Some(12.0), Some(300_000_000.0))
    );

    // The ms histogram under its `Total --- % of Waits ---` line; names cut to 26.
    let h = hist(&r, "Wait Event Histogram", "db file sequential read");
    assert_eq!(h.total_waits, Some(5_651_000.0));
    let labels: Vec<&str> = h.buckets.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        labels,
        ["<1ms", "<2ms", "<4ms", "<8ms", "<16ms", "<32ms", "<=1s", ">1s"]
    );
    assert_eq!(
        (bucket(h, "<4ms"), bucket(h, ">1s")),
        (Some(27.5), Some(0.0))
    );
    let dpr = hist(&r, "Wait Event Histogram", "direct path read");
    assert_eq!(
        (dpr.total_waits, bucket(dpr, "<16ms")),
        (Some(325_000.0), Some(32.4))
    );
    assert_eq!(bucket(dpr, ">1s"), None, "a blank bucket is truly zero");
    let ots = hist(&r, "Wait Event Histogram", "os thread startup");
    assert_eq!(
        (bucket(ots, "<1ms"), bucket(ots, "<8ms")),
        (None, Some(2.5))
    );
    let smon = hist(&r, "Wait Event Histogram", "smon timer");
    assert_eq!(
        (smon.total_waits, bucket(smon, ">1s")),
        (Some(12.0), Some(100.0))
    );
    assert_eq!(
        hist(&r, "Wait Event Histogram", "enq: TX - row lock content").total_waits,
        Some(1_128.0)
    );
    assert_eq!(r.histograms.len(), 19);

    // Instance Activity Stats: what the derivation needs, 10.2 names cut to 32.
    assert_eq!(r.instance_activity.len(), 33);
    assert_eq!(
        stat(&r, "physical read total IO requests"),
        (Some(6_682_200.0), Some(1_850.0), Some(15.8))
    );
    assert_eq!(
        stat(&r, "physical read total multi block"),
        (Some(866_880.0), Some(240.0), Some(2.1))
    );
    assert_eq!(
        stat(&r, "physical read total bytes"),
        (Some(154_161_315_840.0), Some(42_680_320.0), Some(364_789.1))
    );
    assert_eq!(
        stat(&r, "physical write total multi block"),
        (Some(126_420.0), Some(35.0), Some(0.3))
    );
    assert_eq!(stat(&r, "redo size").1, Some(368_640.0));
    assert_eq!(stat(&r, "redo writes").0, Some(216_720.0));
    assert_eq!(stat(&r, "user commits").0, Some(420_798.0));
    assert_eq!(stat(&r, "sorts (disk)"), (Some(0.0), Some(0.0), Some(0.0)));
    // The Thread Activity table that follows is not read as statistics.
    assert!(r.statistic("log switches (derived)").is_none());

    assert_eq!(
        r.parameters,
        [
            ("db_block_size", "8192"),
            ("db_file_multiblock_read_count", "16"),
            ("filesystemio_options", "SETALL"),
            ("log_buffer", "14238720"),
            ("pga_aggregate_target", "2147483648"),
            ("sga_target", "8589934592"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
    );
    assert!(r.io_profile.is_empty() && r.iostat_by_function.is_empty());
}

#[test]
fn a_10g_wait_events_table_without_a_background_one_is_kept_and_said() {
    // Without the background table the all-sessions figures cannot be split.
    let lines: Vec<&str> = R10204.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("\u{c}Background Wait Events"))
        .unwrap();
    let len = lines[at..]
        .iter()
        .position(|l| l.starts_with("     "))
        .unwrap();
    let text = [&lines[..at], &lines[at + len + 1..]].concat().join("\n");
    let r = parse_awr_text(&text, "no_bg.txt");
    assert!(r.background_events.is_empty());
    let seq = r
        .foreground_events
        .iter()
        .find(|e| e.event == "db file sequential read")
        .unwrap();
    assert_eq!(seq.waits, Some(5_651_480.0), "all sessions, as printed");
    assert!(r
        .foreground_events
        .iter()
        .any(|e| e.event == "log file parallel write"));
    assert!(warned(&r, "Wait Events", "background"), "{:#?}", r.warnings);
    assert_eq!(r.warnings.len(), 1, "{:#?}", r.warnings);
}

#[test]
fn an_11_2_0_1_report_reads_whole() {
    let r = parse_awr_text(R11201, "awr_11201.txt");
    assert!(r.warnings.is_empty(), "{:#?}", r.warnings);
    let h = &r.header;
    assert_eq!(h.db_name.as_deref(), Some("ORCL"));
    assert_eq!(h.db_id, Some(1_344_731_332));
    assert_eq!(h.instance.as_deref(), Some("orcl"));
    assert_eq!(h.instance_number, Some(1));
    assert_eq!(h.release.as_deref(), Some("11.2.0.1.0"));
    assert_eq!(h.rac, Some(false));
    assert_eq!(h.host.as_deref(), Some("dbhost01"));
    assert_eq!(h.platform.as_deref(), Some("Linux x86 64-bit"));
    assert_eq!((h.cpus, h.cores, h.sockets), (Some(2), Some(2), Some(1)));
    assert_eq!(h.memory_gb, Some(1.96));
    assert_eq!((h.begin_snap_id, h.end_snap_id), (Some(37), Some(38)));
    assert_eq!(h.begin_snap_time.as_deref(), Some("12-Feb-17 12:16:04"));
    assert_eq!(h.end_snap_time.as_deref(), Some("12-Feb-17 12:22:06"));
    assert_eq!((h.elapsed_min, h.db_time_min), (Some(6.03), Some(141.41)));
    assert_eq!(h.block_size, Some(8192));

    assert_eq!(profile(&r, "Physical reads"), Some(732.7));
    assert_eq!(profile(&r, "Transactions"), Some(3.3));
    assert_eq!(r.load_profile.len(), 15);

    // Top 5: avg in whole ms; DB CPU has no waits.
    assert_eq!(r.top_events.len(), 5);
    let seq = top(&r, "db file sequential read");
    assert_eq!(seq.waits, Some(35_911.0));
    assert_eq!(seq.total_wait_s, Some(3_201.0));
    assert_eq!(seq.avg_wait_us, Some(89_000.0));
    assert_eq!(seq.pct_db_time, Some(37.7));
    assert_eq!(seq.wait_class.as_deref(), Some("User I/O"));
    let cpu = top(&r, "DB CPU");
    assert_eq!((cpu.waits, cpu.avg_wait_us), (None, None));
    assert_eq!(
        (cpu.total_wait_s, cpu.pct_db_time),
        (Some(912.0), Some(10.7))
    );

    // Wait event tables: names cut to 26; idle events have no % DB time.
    assert_eq!(r.foreground_events.len(), 6);
    let cf = r.event("control file sequential re").unwrap();
    assert_eq!((cf.waits, cf.avg_wait_us), (Some(2_210.0), Some(1_000.0)));
    let idle = r.event("SQL*Net message from clien").unwrap();
    assert_eq!((idle.total_wait_s, idle.pct_db_time), (Some(2_811.0), None));
    let lgwr = r.event("log file parallel write").unwrap();
    assert_eq!(
        (lgwr.waits, lgwr.avg_wait_us),
        (Some(3_214.0), Some(7_000.0))
    );
    assert_eq!(r.background_events.len(), 4);

    // The ms histogram and its Detail table, titles and labels as printed.
    let h = hist(&r, "Wait Event Histogram", "db file sequential read");
    assert_eq!(h.total_waits, Some(35_900.0));
    let labels: Vec<&str> = h.buckets.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        labels,
        ["<1ms", "<2ms", "<4ms", "<8ms", "<16ms", "<32ms", "<=1s", ">1s"]
    );
    assert_eq!(bucket(h, "<=1s"), Some(75.9));
    assert_eq!(bucket(h, "<2ms"), Some(0.0));
    let lg = hist(&r, "Wait Event Histogram", "log file parallel write");
    assert_eq!(bucket(lg, ">1s"), None, "a blank bucket is truly zero");
    let d = hist(
        &r,
        "Wait Event Histogram Detail (64 msec to 2 sec)",
        "db file scattered read",
    );
    assert_eq!(
        (d.total_waits, bucket(d, "<1/8s")),
        (Some(2_393.0), Some(18.8))
    );

    assert_eq!(
        stat(&r, "physical read total IO requests"),
        (Some(52_130.0), Some(144.0), Some(43.4))
    );
    assert_eq!(
        stat(&r, "physical read total multi block"),
        (Some(4_750.0), Some(13.1), Some(4.0))
    );
    // 11.2 IOStat: data in MiB (G is 1024 M), per-second data bare MiB/s, Avg Tm(ms).
    let dr = &r.iostat_by_function[0];
    assert_eq!(dr.function, "Direct Reads");
    assert!(close(dr.reads_data, 1.6 * 1024.0));
    assert_eq!(dr.data_per_sec_read, Some(4.6254));
    let bc = &r.iostat_by_function[1];
    assert_eq!(
        (bc.waits_count, bc.avg_time),
        (Some(38_200.0), Some(83_700.0))
    );
    assert_eq!(
        r.parameters,
        [
            ("db_block_size".to_string(), "8192".to_string()),
            (
                "db_file_multiblock_read_count".to_string(),
                "128".to_string()
            ),
            ("sga_target".to_string(), "838860800".to_string()),
        ]
    );
}

#[test]
fn an_11_2_0_4_report_has_the_new_summary_sections() {
    let r = parse_awr_text(R11204, "awr_11204.txt");
    assert!(r.warnings.is_empty(), "{:#?}", r.warnings);
    assert_eq!(r.header.release.as_deref(), Some("11.2.0.4.0"));
    assert_eq!(r.header.instance_number, Some(1));
    assert_eq!(r.header.memory_gb, Some(125.8));
    assert_eq!(profile(&r, "Read IO requests"), Some(414.5));
    assert_eq!(profile(&r, "Redo size (bytes)"), Some(872_222.2));

    // The 4-wide `Tota Time` column: values cut, not rounded (`558.`).
    let dpr = top(&r, "direct path read");
    assert_eq!(dpr.total_wait_s, Some(558.0));
    assert_eq!(dpr.avg_wait_us, Some(9_000.0));
    let enq = top(&r, "enq: TX - row lock contention");
    assert_eq!(
        enq.wait_class.as_deref(),
        Some("Application"),
        "from `Applicatio`"
    );
    assert_eq!(top(&r, "DB CPU").total_wait_s, Some(1234.0));

    let sio = r
        .wait_classes
        .iter()
        .find(|w| w.wait_class == "System I/O")
        .unwrap();
    assert_eq!(
        (sio.waits, sio.total_wait_s),
        (Some(221_000.0), Some(160.2))
    );
    assert_eq!(sio.avg_wait_us, Some(1_000.0));
    assert_eq!(
        io(&r, "Total Requests"),
        (Some(536.4), Some(419.5), Some(116.9))
    );
    assert_eq!(io(&r, "Redo Requests").2, Some(48.0));

    // Key Instance Activity Stats repeat rows of the full table: kept once.
    let mut names: Vec<&str> = r
        .instance_activity
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    let n = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), n, "a statistic was kept twice");
    assert_eq!(stat(&r, "redo size").0, Some(3_140_000_000.0));
    assert_eq!(
        stat(&r, "physical write total IO requests"),
        (Some(420_850.0), Some(116.9), Some(8.4))
    );
    // `1398K` in a 5-wide Total Waits column.
    let h = hist(&r, "Wait Event Histogram", "db file sequential read");
    assert_eq!(h.total_waits, Some(1_398_000.0));
    assert_eq!(bucket(h, ">1s"), Some(0.0));
    assert_eq!(
        r.parameters[1],
        ("filesystemio_options".into(), "SETALL".into())
    );
}

#[test]
fn a_12_2_report_reads_units_and_microsecond_histograms() {
    let r = parse_awr_text(R122, "awr_122.txt");
    let h = &r.header;
    assert_eq!(h.db_name.as_deref(), Some("BPSC"));
    assert_eq!(h.db_id, Some(2_411_893_012));
    assert_eq!(h.release.as_deref(), Some("12.2.0.1.0"));
    assert_eq!(
        (h.rac, h.cdb, h.container.as_deref()),
        (Some(false), Some(false), None)
    );
    assert_eq!(h.instance.as_deref(), Some("bpsc"));
    assert_eq!(h.platform.as_deref(), Some("AIX-Based Systems (64-bit)"));
    assert_eq!(
        (h.cpus, h.cores, h.sockets),
        (Some(40), Some(5), None),
        "blank Sockets"
    );
    assert_eq!(h.memory_gb, Some(502.0));
    assert_eq!((h.elapsed_min, h.block_size), (Some(60.2), Some(8192)));

    assert_eq!(profile(&r, "Background CPU(s)"), Some(0.0));
    // Averages with units, all in µs.
    let seq = top(&r, "db file sequential read");
    assert_eq!(seq.avg_wait_us, Some(109.69));
    assert_eq!((seq.waits, seq.total_wait_s), (Some(360_121.0), Some(39.5)));
    assert_eq!(
        top(&r, "control file sequential read").avg_wait_us,
        Some(0.258)
    );
    let pin = top(&r, "cursor: pin S wait on X");
    assert_eq!(pin.avg_wait_us, Some(15_910.0));
    assert_eq!(
        pin.wait_class.as_deref(),
        Some("Concurrency"),
        "from `Concurre`"
    );
    assert_eq!(top(&r, "DB CPU").total_wait_s, Some(1234.8));
    assert_eq!(
        r.event("log file parallel write").unwrap().avg_wait_us,
        Some(386.0)
    );
    let cpu = &r.wait_classes[0];
    assert_eq!((cpu.wait_class.as_str(), cpu.waits), ("DB CPU", None));

    let mut tables: Vec<&str> = r.histograms.iter().map(|h| h.table.as_str()).collect();
    tables.dedup();
    assert_eq!(
        tables,
        [
            "Wait Event Histogram",
            "Wait Event Histogram (up to 64 us)",
            "Wait Event Histogram (up to 32 ms)",
            "Wait Event Histogram (up to 2 sec)",
        ]
    );
    let seqh = hist(&r, "Wait Event Histogram", "db file sequential read");
    assert_eq!(seqh.total_waits, Some(360_100.0));
    assert_eq!(bucket(seqh, "<128u"), Some(25.9));
    assert_eq!(bucket(seqh, ">=512"), Some(8.1));
    let dbw = hist(&r, "Wait Event Histogram", "db file parallel write");
    assert_eq!(
        (bucket(dbw, "<8us"), bucket(dbw, "<32us")),
        (None, Some(2.1))
    );
    let up64 = hist(
        &r,
        "Wait Event Histogram (up to 64 us)",
        "control file sequential r",
    );
    assert_eq!(
        (up64.total_waits, bucket(up64, "<8us")),
        (Some(8_955.0), Some(86.9))
    );
    let up32 = hist(
        &r,
        "Wait Event Histogram (up to 32 ms)",
        "db file sequential read",
    );
    assert_eq!(
        (bucket(up32, "<512"), bucket(up32, ">=32m")),
        (Some(91.9), Some(0.1))
    );

    assert_eq!(io(&r, "Redo Requests"), (Some(28.9), Some(0.2), Some(28.7)));
    // Instance Activity Stats broken over two pages: both read.
    assert_eq!(
        stat(&r, "physical read total IO requests"),
        (Some(383_094.0), Some(106.1), Some(5.1))
    );
    assert_eq!(stat(&r, "workarea executions - optimal").0, Some(88_210.0));
    // Five rows cut to the same name: the first kept, and said.
    assert_eq!(
        stat(&r, "redo synch time overhead count (").0,
        Some(61_210.0)
    );
    assert_eq!(
        r.instance_activity
            .iter()
            .filter(|s| s.name == "redo synch time overhead count (")
            .count(),
        1
    );
    assert!(
        warned(
            &r,
            "Instance Activity Stats",
            "5 rows are named `redo synch time overhead count (`"
        ),
        "{:#?}",
        r.warnings
    );
    assert_eq!(r.warnings.len(), 1, "{:#?}", r.warnings);
    let lgwr = r
        .iostat_by_function
        .iter()
        .find(|f| f.function == "LGWR")
        .unwrap();
    assert_eq!(lgwr.writes_data, Some(555.0));
    assert_eq!(lgwr.data_per_sec_write, Some(0.154));
    assert_eq!(lgwr.avg_time, Some(385.96));
    assert_eq!(lgwr.waits_count, Some(103_700.0));
}

#[test]
fn a_19c_pdb_report_spooled_through_sqlplus_merges_pages_and_warns_about_writes() {
    let r = parse_awr_text(R19_PDB, "awr_19c_pdb_sqlplus.txt");
    let h = &r.header;
    assert_eq!(h.container.as_deref(), Some("PDB1"));
    assert_eq!((h.rac, h.cdb), (Some(true), Some(true)));
    assert_eq!(h.db_id, Some(2_326_306_786));
    assert_eq!(h.release.as_deref(), Some("19.0.0.0.0"));
    assert_eq!(h.instance.as_deref(), Some("racdb1"));
    assert_eq!((h.begin_snap_id, h.end_snap_id), (Some(37), Some(38)));
    assert_eq!(h.host.as_deref(), Some("racnode1"));
    // The Load Profile runs over a page heading (`OUTPUT` + underline).
    assert_eq!(r.load_profile.len(), 20, "{:#?}", r.load_profile);
    assert_eq!(profile(&r, "Write IO (MB)"), Some(0.0));
    assert_eq!(profile(&r, "Transactions"), Some(1.0));
    assert_eq!(profile(&r, "Read IO requests"), Some(2.9));
    assert_eq!(r.top_events.len(), 4);
    let enq = top(&r, "enq: TX - row lock contention");
    assert_eq!(enq.avg_wait_us, Some(60_000_000.0), "`60.00 s`");
    // Blank Redo rows of a PDB IO Profile.
    assert_eq!(io(&r, "Redo Requests"), (None, None, None));
    assert_eq!(io(&r, "Total Requests"), (Some(2.9), Some(2.9), Some(0.0)));
    assert!(r
        .instance_activity
        .iter()
        .all(|s| !s.name.starts_with("physical write")));
    assert_eq!(
        stat(&r, "physical read total IO requests").0,
        Some(10_458.0)
    );
    assert_eq!(
        r.parameters,
        [("db_block_size".to_string(), "8192".to_string())]
    );
    assert!(warned(
        &r,
        "Instance Activity Stats",
        "writes cannot be derived"
    ));
    assert!(warned(&r, "Wait Event Histogram", "not found"));
    assert!(!warned(&r, "report", "cut"), "{:#?}", r.warnings);
    assert_eq!(r.warnings.len(), 2, "{:#?}", r.warnings);
}

#[test]
fn a_rac_instance_report_reads_its_instance_and_cluster_waits() {
    let r = parse_awr_text(R19_RAC, "awr_19c_rac_inst2.txt");
    assert!(r.warnings.is_empty(), "{:#?}", r.warnings);
    let h = &r.header;
    assert_eq!(
        (h.instance.as_deref(), h.instance_number),
        (Some("racdb2"), Some(2))
    );
    assert_eq!((h.rac, h.cdb), (Some(true), Some(false)));
    assert_eq!((h.begin_snap_id, h.elapsed_min), (Some(412), Some(30.0)));
    assert_eq!(h.begin_snap_time.as_deref(), Some("11-Jun-26 14:00:02"));
    assert_eq!(profile(&r, "RAC GC blocks received"), Some(273.7));
    let gc = top(&r, "gc cr block 2-way");
    assert_eq!(gc.wait_class.as_deref(), Some("Cluster"));
    assert_eq!((gc.waits, gc.avg_wait_us), (Some(301_100.0), Some(320.16)));
    assert_eq!(
        io(&r, "Total Requests"),
        (Some(416.0), Some(293.8), Some(122.2))
    );
    assert_eq!(
        stat(&r, "gc cr blocks received"),
        (Some(310_200.0), Some(172.3), Some(3.2))
    );
    assert_eq!(r.parameters[0], ("db_block_size".into(), "8192".into()));
}

#[test]
fn a_pasted_copy_reads_as_far_as_its_text_allows() {
    let clean = parse_awr_text(R11204, "awr_11204.txt");
    let r = parse_awr_text(R11204_PASTED, "pasted.txt");
    // Collapsed spaces and dash rules: the header, summary and event tables
    // read from the right give the same figures as the clean report.
    assert_eq!(r.header, clean.header);
    assert_eq!(r.load_profile, clean.load_profile);
    assert_eq!(r.top_events, clean.top_events);
    assert_eq!(r.wait_classes, clean.wait_classes);
    assert_eq!(r.foreground_events, clean.foreground_events);
    assert_eq!(r.background_events, clean.background_events);
    assert_eq!(r.io_profile, clean.io_profile);
    assert_eq!(r.iostat_by_function, clean.iostat_by_function);
    assert_eq!(r.parameters, clean.parameters);
    // The wrapped statistic is joined; the `<SNIP>`ped one is gone, and said.
    assert_eq!(
        r.statistic("physical read total bytes"),
        clean.statistic("physical read total bytes")
    );
    assert!(r.statistic("parse count (hard)").is_none());
    assert_eq!(r.instance_activity.len(), clean.instance_activity.len() - 1);
    let snip = r
        .warnings
        .iter()
        .find(|w| w.message.contains("<SNIP>"))
        .unwrap();
    assert_eq!(R11204_PASTED.lines().nth(snip.line - 1), Some("<SNIP>"));
    // A histogram row with every bucket filled still splits; one with blank
    // buckets keeps its total and says why it lost the rest.
    assert_eq!(
        hist(&r, "Wait Event Histogram", "db file sequential read"),
        hist(&clean, "Wait Event Histogram", "db file sequential read")
    );
    let lfs = hist(&r, "Wait Event Histogram", "log file sync");
    assert_eq!((lfs.total_waits, lfs.buckets.len()), (Some(49_800.0), 0));
    assert!(warned(
        &r,
        "Wait Event Histogram",
        "buckets cannot be told apart"
    ));
}

fn cut_section<'a>(text: Vec<&'a str>, title: &str) -> Vec<&'a str> {
    let at = text.iter().position(|l| l.starts_with(title)).unwrap();
    let end = at + text[at..].iter().position(|l| l.trim().is_empty()).unwrap();
    [&text[..at], &text[end..]].concat()
}

#[test]
fn missing_key_sections_are_named() {
    // The 11.2.0.4 report without its IO Profile and Load Profile.
    let lines: Vec<&str> = R11204.lines().collect();
    let text = cut_section(cut_section(lines, "IO Profile"), "Load Profile").join("\n");
    let r = parse_awr_text(&text, "cut.txt");
    assert!(r.io_profile.is_empty() && r.load_profile.is_empty());
    assert!(warned(&r, "IO Profile", "not found"), "{:#?}", r.warnings);
    assert!(warned(&r, "Load Profile", "not found"), "{:#?}", r.warnings);
    assert_eq!(r.warnings.len(), 2, "{:#?}", r.warnings);
    // 11.2.0.1 has no IO Profile to miss.
    assert!(!warned(&parse_awr_text(R11201, "a"), "IO Profile", ""));
}

#[test]
fn text_that_is_not_an_awr_report_says_so() {
    for text in [
        "",
        "hello world\nthis is a shopping list\n- eggs\n- milk\n",
        "[workspace]\nmembers = [\"crates/*\"]\n",
    ] {
        let r = parse_awr_text(text, "notes.txt");
        assert_eq!(r.warnings.len(), 1, "{:#?}", r.warnings);
        assert!(r.warnings[0]
            .message
            .contains("does not look like an AWR report"));
        assert!(r.load_profile.is_empty() && r.instance_activity.is_empty());
        assert_eq!(r.header, Default::default());
    }
    let sp = parse_awr_text("STATSPACK report for\n\nDatabase DB Id\n", "sp.txt");
    assert!(warned(&sp, "report", "Statspack"));
}

#[test]
fn a_report_cut_in_half_keeps_what_came_before_the_cut() {
    let half = R122.len() / 2;
    let at = (half..R122.len())
        .find(|&k| R122.is_char_boundary(k))
        .unwrap();
    let r = parse_awr_text(&R122[..at], "half.txt");
    let whole = parse_awr_text(R122, "awr_122.txt");
    assert_eq!(r.header, whole.header);
    assert_eq!(r.load_profile, whole.load_profile);
    assert_eq!(r.top_events, whole.top_events);
    assert_eq!(r.io_profile, whole.io_profile);
    assert_eq!(r.foreground_events, whole.foreground_events);
    // The last section before the cut, whole (its notes hold figures too).
    let first_histogram = |r: &AwrReport| -> Vec<HistogramLine> {
        r.histograms
            .iter()
            .filter(|h| h.table == "Wait Event Histogram")
            .cloned()
            .collect()
    };
    assert_eq!(first_histogram(&r).len(), 4);
    assert_eq!(first_histogram(&r), first_histogram(&whole));
    assert!(r.instance_activity.is_empty());
    assert!(
        warned(&r, "Instance Activity Stats", "not found"),
        "{:#?}",
        r.warnings
    );
    let end = r
        .warnings
        .iter()
        .find(|w| w.message.contains("looks cut"))
        .unwrap();
    // The cut falls in a title (`Wait Event Histogram (up to 64 us)  DB/`),
    // which is no section: the report read ends at the rule above it.
    assert!(R122[..at].ends_with("DB/"));
    assert_eq!(end.line, R122[..at].lines().count() - 2);
}

#[test]
fn the_bank_fragment_alone_gives_its_statistics() {
    let r = parse_awr_text(BANK, "bank_fragment.txt");
    assert_eq!(r.instance_activity.len(), 22);
    assert_eq!(
        stat(&r, "physical read total IO requests"),
        (Some(55_479_809.0), Some(7_707.3), Some(1_183.9))
    );
    assert!(warned(&r, "Instance Activity Stats", "<SNIP>"));
    assert!(warned(&r, "Load Profile", "not found"));
    assert!(!warned(&r, "Instance Activity Stats", "not found"));
}

fn corpus() -> [&'static str; 7] {
    [
        R10204,
        R11201,
        R11204,
        R11204_PASTED,
        R122,
        R19_PDB,
        R19_RAC,
    ]
}

fn check_lines(r: &AwrReport, text: &str) {
    let n = text.split('\n').count();
    for w in &r.warnings {
        assert!(w.line <= n, "warning past the end: {w:?}");
        assert!(!w.message.contains('\n'), "multi-line warning: {w:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,400}") {
        let r = parse_awr_text(&s, "any.txt");
        check_lines(&r, &s);
    }

    #[test]
    fn report_like_lines_never_panic(
        lines in proptest::collection::vec(
            prop_oneof![
                Just("Load Profile   Per Second".to_string()),
                Just("~~~~~~~~~~~~ ----- -----".to_string()),
                Just("Wait Event Histogram   DB/Inst: A/a  Snaps: 1-2".to_string()),
                Just("------------ ----- ----- ----- ----- ----- ----- ----- ----- -----".to_string()),
                Just("Statistic Total per Second per Trans".to_string()),
                Just("Top 10 Foreground Events by Total Wait Time".to_string()),
                Just("OUTPUT".to_string()),
                Just("DB Name DB Id Instance".to_string()),
                "[ a-z0-9.,:<>%/-]{0,60}",
            ],
            0..60,
        )
    ) {
        let text = lines.join("\n");
        let r = parse_awr_text(&text, "lines.txt");
        check_lines(&r, &text);
    }

    #[test]
    fn cut_or_mutated_reports_never_panic(
        which in 0usize..7,
        cut in 0.0f64..1.0,
        edits in proptest::collection::vec((0.0f64..1.0, any::<char>()), 0..20),
    ) {
        let base = corpus()[which];
        let mut chars: Vec<char> = base.chars().collect();
        for (pos, c) in edits {
            let k = (pos * chars.len() as f64) as usize;
            if k < chars.len() {
                chars[k] = c;
            }
        }
        let keep = (cut * chars.len() as f64) as usize;
        let text: String = chars[..keep.min(chars.len())].iter().collect();
        let r = parse_awr_text(&text, "mutated.txt");
        check_lines(&r, &text);
    }
}

#[test]
fn a_10g_top_5_reads_its_right_aligned_class_and_cpu_time_row() {
    let text = "\
WORKLOAD REPOSITORY report for

Top 5 Timed Events                                         Avg %Total
~~~~~~~~~~~~~~~~~~                                        wait   Call
Event                                 Waits    Time (s)   (ms)   Time Wait Class
------------------------------ ------------ ----------- ------ ------ ----------
db file sequential read             183,422       1,105      6   45.1   User I/O
CPU time                                            838          34.2
log file sync                        21,312         204     10    8.3     Commit
";
    let r = parse_awr_text(text, "10g.txt");
    assert_eq!(r.top_events.len(), 3, "{:#?}", r.warnings);
    let seq = top(&r, "db file sequential read");
    assert_eq!(
        (seq.waits, seq.avg_wait_us),
        (Some(183_422.0), Some(6_000.0))
    );
    assert_eq!(seq.wait_class.as_deref(), Some("User I/O"));
    let cpu = top(&r, "CPU time");
    assert_eq!((cpu.waits, cpu.total_wait_s), (None, Some(838.0)));
    assert_eq!(
        top(&r, "log file sync").wait_class.as_deref(),
        Some("Commit")
    );
}

#[test]
fn a_10g_report_with_its_spacing_lost_reads_the_same_but_for_blank_buckets() {
    // Every run of spaces collapsed, form feeds included: the 10.2 header
    // (host on the database line) is split by its known column names, the
    // tables from the right.
    let text = R10204
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n");
    let clean = parse_awr_text(R10204, "awr_10204.txt");
    let r = parse_awr_text(&text, "pasted.txt");
    assert_eq!(r.header, clean.header);
    assert_eq!(r.header.host.as_deref(), Some("hrdb02"));
    assert_eq!(r.load_profile, clean.load_profile);
    assert_eq!(r.top_events, clean.top_events);
    assert_eq!(r.foreground_events, clean.foreground_events);
    assert_eq!(r.background_events, clean.background_events);
    assert_eq!(r.instance_activity, clean.instance_activity);
    assert_eq!(r.parameters, clean.parameters);
    // Only the rows with no blank bucket keep their buckets.
    let full: Vec<&str> = r
        .histograms
        .iter()
        .filter(|h| !h.buckets.is_empty())
        .map(|h| h.event.as_str())
        .collect();
    assert_eq!(
        full,
        [
            "db file sequential read",
            "enq: TX - row lock content",
            "SQL*Net message from clien",
            "rdbms ipc message"
        ]
    );
    assert_eq!(
        r.histograms
            .iter()
            .map(|h| h.total_waits)
            .collect::<Vec<_>>(),
        clean
            .histograms
            .iter()
            .map(|h| h.total_waits)
            .collect::<Vec<_>>()
    );
    assert_eq!(r.warnings.len(), 15, "{:#?}", r.warnings);
    assert!(
        r.warnings
            .iter()
            .all(|w| w.section == "Wait Event Histogram"
                && w.message.contains("cannot be told apart"))
    );
}

/// Found by the `awr_text` fuzz target: a header whose spacing was lost and
/// that names `Platform` twice gave the rest of the values to each, and
/// sliced past the end.
#[test]
fn a_header_naming_platform_twice_with_its_spacing_lost_does_not_panic() {
    let text = "\
WORKLOAD REPOSITORY report for

Host Name        Platform         Name Platform CPUs Cores Sockets Memory(GB)
db1 Linux x86 64-bit 2 2 1 8
";
    let r = parse_awr_text(text, "twice.txt");
    assert_eq!(r.header.cpus, None, "{:?}", r.header);
}
