//! The sections of `awr.txt`, as document blocks that the HTML page reuses.
//!
//! Laid out the way an AWR report is, with AWR's own line names, so that a DBA
//! finds each figure where they would look for it: header, Load Profile, Top
//! Foreground Events, Background Wait Events, Wait Classes, Wait Event
//! Histograms (ms and µs), IO Profile, Instance Activity Stats, then what AWR
//! does not have: the devices as the kernel saw them, and Cairn's counts set
//! against the kernel's. Every latency is printed in AWR 12c's "Avg Wait"
//! style ([`awr_latency`]): `845.96us`, `1.69ms`, `2.31s`.

use std::collections::BTreeMap;

use super::figures::{Figures, MB};
use crate::result::{EventRecord, OltpResult};
use crate::stats::{Event, Stat};
use cairn_kit::result::{Bucket, TargetInfo};
use cairn_kit_report::document::{Align, Block, Table};
use cairn_kit_report::{units, OLTP_AWR_TITLE};

/// A line of a table by direction: name, read+write, read, write.
type DirectionRow = (&'static str, Option<f64>, Option<f64>, Option<f64>);

/// Rows of the Top Foreground Events table, as AWR's "Top 10".
pub(crate) const TOP_EVENTS_MAX: usize = 10;

/// The AWR 12c "Avg Wait" style: two decimals in the largest unit that keeps
/// the number at or above 1 (`845.96us`, `1.69ms`, `2.31s`), so that a
/// post's table and this report read alike.
pub fn awr_latency(us: f64) -> String {
    if !us.is_finite() {
        return "n/a".to_string();
    }
    let round2 = |v: f64| (v * 100.0).round() / 100.0;
    if round2(us) < 1000.0 {
        format!("{us:.2}us")
    } else if round2(us / 1e3) < 1000.0 {
        format!("{:.2}ms", us / 1e3)
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

/// An optional figure with thousands separators; blank when absent (AWR leaves
/// a per-transaction cell blank when nothing committed).
fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map(|v| units::grouped(v, decimals)).unwrap_or_default()
}

fn opt_latency(v: Option<f64>) -> String {
    v.map(awr_latency).unwrap_or_default()
}

fn mins(s: f64) -> String {
    format!("{} (mins)", units::grouped(s / 60.0, 2))
}

/// Title, machine, window, configuration and targets.
pub(crate) fn header_blocks(r: &OltpResult) -> Vec<Block> {
    let mut fields = window_fields(r);
    fields.extend(configuration_fields(r));
    let conf_title = if r.conf.path.is_empty() {
        "slob.conf settings in effect".to_string()
    } else {
        format!("slob.conf settings in effect ({})", r.conf.path)
    };
    let ignored = if r.conf.ignored.is_empty() {
        "Oracle-only keys ignored: none.".to_string()
    } else {
        format!(
            "Oracle-only keys accepted and ignored: {}.",
            r.conf.ignored.join(", ")
        )
    };
    let mut blocks = vec![
        Block::Title(OLTP_AWR_TITLE.to_string()),
        Block::Fields(fields),
        Block::Heading("Targets".to_string()),
        Block::Table(targets_table(r)),
        Block::Heading(conf_title),
    ];
    if !r.conf.effective.is_empty() {
        blocks.push(Block::Fields(r.conf.effective.clone()));
    }
    blocks.push(Block::Note(ignored));
    blocks
}

/// The tool, the machine and the measured window.
fn window_fields(r: &OltpResult) -> Vec<(String, String)> {
    let env = &r.environment;
    vec![
        (
            "Tool".to_string(),
            format!(
                "{} {} (commit {})",
                r.tool.name, r.tool.version, r.tool.commit
            ),
        ),
        ("Host Name".to_string(), env.hostname.clone()),
        (
            "Platform".to_string(),
            format!("{}, kernel {}", env.os, env.kernel),
        ),
        (
            "CPUs".to_string(),
            format!("{} ({})", env.cpus, env.cpu_model),
        ),
        ("Memory".to_string(), units::bytes(env.memory_bytes)),
        ("Begin Snap".to_string(), r.started_at.clone()),
        ("End Snap".to_string(), r.ended_at.clone()),
        ("Elapsed".to_string(), mins(r.elapsed_s)),
        ("DB Time".to_string(), mins(r.totals.db_time_s)),
        (
            "Warm-up".to_string(),
            format!(
                "{} before Begin Snap, excluded from every figure",
                units::seconds(r.warmup_s)
            ),
        ),
    ]
}

/// How the run was configured: sessions, dataset, cache, read path, engine,
/// log, checkpoints, run length and seed.
fn configuration_fields(r: &OltpResult) -> Vec<(String, String)> {
    let s = &r.settings;
    let shape = &r.shape;
    let read_path = match s.read_path.as_str() {
        "cache" => "cache (sessions read through the buffer cache)".to_string(),
        "direct" => "direct (sessions read around the buffer cache)".to_string(),
        other => other.to_string(),
    };
    vec![
        (
            "Sessions".to_string(),
            format!(
                "{} ({} schemas x {} threads per schema)",
                s.sessions, s.schemas, s.threads_per_schema
            ),
        ),
        (
            "Schemas".to_string(),
            format!(
                "{} loaded, each a table of {} blocks (one row per block), its index, and a scan table of {} blocks; filler {}",
                shape.schemas,
                units::count(shape.table_blocks),
                units::count(shape.scan_blocks),
                if shape.obfuscate {
                    "random (OBFUSCATE_COLUMNS)"
                } else {
                    "compressible"
                }
            ),
        ),
        (
            "Buffer Cache".to_string(),
            format!(
                "{}, {} buffers",
                units::bytes(s.cache_bytes),
                units::count(s.cache_buffers)
            ),
        ),
        (
            "Std Block Size".to_string(),
            units::bytes(u64::from(shape.block_size)),
        ),
        ("Read path".to_string(), read_path),
        (
            "I/O engine".to_string(),
            if s.engine.is_empty() {
                "not recorded".to_string()
            } else {
                format!(
                    "{} (database writer, log writer, batched reads; single-block reads are pread)",
                    s.engine
                )
            },
        ),
        (
            "Multiblock reads".to_string(),
            format!(
                "{} blocks per read; scans of tables above {} blocks read direct; up to {} single-block misses of a statement read together",
                s.multiblock_read_count,
                units::count(s.direct_read_threshold_blocks),
                s.batch_reads
            ),
        ),
        (
            "Log Buffer".to_string(),
            format!(
                "{}, redo block {}",
                units::bytes(s.log_buffer_bytes),
                units::bytes(u64::from(s.redo_block_bytes))
            ),
        ),
        (
            "Checkpoint every".to_string(),
            units::seconds(s.checkpoint_interval_s),
        ),
        (
            "Run".to_string(),
            format!(
                "RUN_TIME {}, WORK_LOOP {}, reporting every {}",
                units::seconds(s.run_time_s),
                s.work_loop,
                units::seconds(s.interval_s)
            ),
        ),
        ("Seed".to_string(), r.seed.to_string()),
    ]
}

/// The data and redo targets, one row each.
fn targets_table(r: &OltpResult) -> Table {
    let mut t = Table::new(
        None,
        &[
            ("Role", Align::Left),
            ("Path", Align::Left),
            ("Kind", Align::Left),
            ("Device(s)", Align::Left),
            ("Size", Align::Right),
            ("Sectors", Align::Left),
            ("Max xfer", Align::Right),
        ],
    );
    let mut target_row = |role: &str, target: &TargetInfo| {
        let created = if target.created { " (created)" } else { "" };
        t.push(vec![
            role.to_string(),
            format!("{}{created}", target.path),
            target.kind.clone(),
            if target.devices.is_empty() {
                "-".to_string()
            } else {
                target.devices.join(" ")
            },
            units::bytes(target.size_bytes),
            format!(
                "{} ({}/{})",
                target.sector_format, target.logical_sector_bytes, target.physical_sector_bytes
            ),
            units::bytes(u64::from(target.max_transfer_bytes)),
        ]);
    };
    for target in &r.data_targets {
        target_row("data", target);
    }
    target_row("redo", &r.redo_target);
    t
}

/// What the reader must not miss: an early end, I/O errors, a corrupt block
/// read, a commit not covered by a log write. Empty when all is well.
pub(crate) fn alert_blocks(r: &OltpResult) -> Vec<Block> {
    let mut out = Vec::new();
    if let Some(why) = &r.ended_early {
        out.push(Block::Alert(format!(
            "THE RUN ENDED EARLY: {why}; every figure covers only the {} that ran",
            units::seconds(r.elapsed_s)
        )));
    }
    if r.errors.count > 0 {
        let first = r
            .errors
            .first
            .first()
            .map(|e| format!("; the first: {e}"))
            .unwrap_or_default();
        out.push(Block::Alert(format!(
            "{} I/O ERRORS during the run{first}",
            units::count(r.errors.count)
        )));
    }
    let corrupt = r.stat(Stat::BlockCorruptions.name());
    if corrupt > 0 {
        out.push(Block::Alert(format!(
            "{} BLOCK CORRUPTIONS: sessions read blocks whose checksum or identity was wrong; run `cairn bench oltp verify`",
            units::count(corrupt)
        )));
    }
    let uncovered = r.stat(Stat::CommitsUncovered.name());
    if uncovered > 0 {
        out.push(Block::Alert(format!(
            "{} COMMITS NOT COVERED BY A LOG WRITE: a commit returned before its redo was written (a Cairn bug: please report it)",
            units::count(uncovered)
        )));
    }
    out
}

/// AWR's Load Profile, per second and per transaction.
pub(crate) fn load_profile_blocks(r: &OltpResult) -> Vec<Block> {
    let f = Figures::new(r);
    let mut t = Table::new(
        None,
        &[
            ("", Align::Left),
            ("Per Second", Align::Right),
            ("Per Transaction", Align::Right),
        ],
    );
    // Times keep two decimals: a DB CPU of 0.04 s per transaction is a figure, not 0.0.
    let rows: [(&str, f64, usize); 14] = [
        ("DB Time(s):", r.totals.db_time_s, 2),
        ("DB CPU(s):", r.totals.db_cpu_s, 2),
        ("Background CPU(s):", r.totals.background_cpu_s, 2),
        ("Redo size (bytes):", f.stat(Stat::RedoSize) as f64, 1),
        (
            "Logical read (blocks):",
            f.stat(Stat::SessionLogicalReads) as f64,
            1,
        ),
        ("Block changes:", f.stat(Stat::DbBlockChanges) as f64, 1),
        (
            "Physical read (blocks):",
            f.stat(Stat::PhysicalReads) as f64,
            1,
        ),
        (
            "Physical write (blocks):",
            f.stat(Stat::PhysicalWrites) as f64,
            1,
        ),
        ("Read IO requests:", f.db_read_requests() as f64, 1),
        ("Write IO requests:", f.write_requests() as f64, 1),
        ("Read IO (MB):", f.db_read_bytes() as f64 / MB, 1),
        ("Write IO (MB):", f.write_bytes() as f64 / MB, 1),
        ("Executes (SQL):", f.stat(Stat::ExecuteCount) as f64, 1),
        ("Transactions:", f.commits as f64, 1),
    ];
    for (name, v, decimals) in rows {
        t.push(vec![
            name.to_string(),
            opt(f.per_s(v), decimals),
            opt(f.per_tx(v), decimals),
        ]);
    }
    let mut blocks = vec![Block::Heading("Load Profile".to_string()), Block::Table(t)];
    blocks.push(Block::Note(
        "Write IO requests and Write IO (MB) include the redo log writes; a transaction is a user commit."
            .to_string(),
    ));
    if f.commits == 0 {
        blocks.push(Block::Note(
            "No transactions committed (UPDATE_PCT=0?): the per-transaction column is blank."
                .to_string(),
        ));
    }
    blocks
}

fn event_table(title: Option<&str>, share: &str) -> Table {
    Table::new(
        title,
        &[
            ("Event", Align::Left),
            ("Waits", Align::Right),
            ("Total Wait Time (sec)", Align::Right),
            ("Avg Wait", Align::Right),
            (share, Align::Right),
            ("Wait Class", Align::Left),
        ],
    )
}

/// One event as a row of the event tables, `share_of_s` the denominator of its %.
fn event_row(e: &EventRecord, share_of_s: f64) -> Vec<String> {
    vec![
        e.name.clone(),
        units::count(e.waits),
        units::grouped(e.time_s, 1),
        opt_latency(Figures::ratio(1e6 * e.time_s, e.waits as f64)),
        opt(Figures::ratio(100.0 * e.time_s, share_of_s), 1),
        e.class.clone(),
    ]
}

/// The foreground events and DB CPU, by time, at most [`TOP_EVENTS_MAX`]: the
/// rows of Top Foreground Events. `None` is the DB CPU row.
pub(crate) fn top_foreground(r: &OltpResult) -> Vec<(Option<&EventRecord>, f64)> {
    let f = Figures::new(r);
    let mut rows: Vec<(Option<&EventRecord>, f64)> = vec![(None, r.totals.db_cpu_s)];
    rows.extend(f.foreground().map(|e| (Some(e), e.time_s)));
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    rows.truncate(TOP_EVENTS_MAX);
    rows
}

/// The name of the top row of Top Foreground Events (`DB CPU` included, as AWR ranks it).
pub(crate) fn top_wait_name(r: &OltpResult) -> String {
    match top_foreground(r).first() {
        Some((Some(e), _)) => e.name.clone(),
        _ => "DB CPU".to_string(),
    }
}

/// Top Foreground Events, Background Wait Events and Wait Classes.
pub(crate) fn event_blocks(r: &OltpResult) -> Vec<Block> {
    let f = Figures::new(r);
    let db_time = r.totals.db_time_s;
    let mut top = event_table(
        Some("Top 10 Foreground Events by Total Wait Time"),
        "% DB time",
    );
    for (e, time_s) in top_foreground(r) {
        match e {
            Some(e) => top.push(event_row(e, db_time)),
            None => top.push(vec![
                "DB CPU".to_string(),
                String::new(),
                units::grouped(time_s, 1),
                String::new(),
                opt(Figures::ratio(100.0 * time_s, db_time), 1),
                String::new(),
            ]),
        }
    }

    let bg_time = f.background_time_s();
    let mut bg = event_table(None, "% bg time");
    let mut bg_events: Vec<&EventRecord> = f.background().collect();
    bg_events.sort_by(|a, b| b.time_s.total_cmp(&a.time_s));
    for e in bg_events {
        bg.push(event_row(e, bg_time));
    }

    let mut classes: BTreeMap<&str, (u64, f64)> = BTreeMap::new();
    for e in f.events() {
        let c = classes.entry(e.class.as_str()).or_default();
        c.0 += e.waits;
        c.1 += e.time_s;
    }
    let mut class_rows: Vec<(&str, Option<u64>, f64)> = classes
        .into_iter()
        .map(|(name, (waits, time_s))| (name, Some(waits), time_s))
        .collect();
    class_rows.push(("DB CPU", None, r.totals.db_cpu_s));
    class_rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    let mut wc = Table::new(
        Some("Wait Classes by Total Wait Time"),
        &[
            ("Wait Class", Align::Left),
            ("Waits", Align::Right),
            ("Total Wait Time (sec)", Align::Right),
            ("Avg Wait", Align::Right),
            ("% DB time", Align::Right),
        ],
    );
    for (name, waits, time_s) in class_rows {
        wc.push(vec![
            name.to_string(),
            waits.map(units::count).unwrap_or_default(),
            units::grouped(time_s, 1),
            opt_latency(waits.and_then(|w| Figures::ratio(1e6 * time_s, w as f64))),
            opt(Figures::ratio(100.0 * time_s, db_time), 1),
        ]);
    }

    let mut blocks = vec![
        Block::Heading("Top Foreground Events".to_string()),
        Block::Table(top),
        Block::Heading("Background Wait Events".to_string()),
    ];
    if bg.rows.is_empty() {
        blocks.push(Block::Note(
            "No background waits (nothing was written).".to_string(),
        ));
    } else {
        blocks.push(Block::Table(bg));
        blocks.push(Block::Note(format!(
            "% bg time is against the log writer's and database writer's time: their CPU ({} s) plus their waits ({} s in all).",
            units::grouped(r.totals.background_cpu_s, 1),
            units::grouped(bg_time, 1)
        )));
    }
    blocks.push(Block::Heading("Wait Classes".to_string()));
    blocks.push(Block::Table(wc));
    blocks
}

/// AWR's histogram labels when no event carries its own (no waits at all).
const MS_LABELS: [&str; 8] = [
    "<1ms", "<2ms", "<4ms", "<8ms", "<16ms", "<32ms", "<=1s", ">1s",
];
const US_LABELS: [&str; 8] = [
    "<8us", "<16us", "<32us", "<64us", "<128us", "<256us", "<512us", ">=512us",
];

fn histogram_table(
    r: &OltpResult,
    title: &str,
    fallback: &[&str],
    buckets: fn(&EventRecord) -> &Vec<Bucket>,
) -> Table {
    let f = Figures::new(r);
    let labels: Vec<String> = f
        .events()
        .map(buckets)
        .find(|b| !b.is_empty())
        .map(|b| b.iter().map(|x| x.label.clone()).collect())
        .unwrap_or_else(|| fallback.iter().map(|s| s.to_string()).collect());
    let mut columns: Vec<(&str, Align)> =
        vec![("Event", Align::Left), ("Total Waits", Align::Right)];
    columns.extend(labels.iter().map(|l| (l.as_str(), Align::Right)));
    let mut t = Table::new(Some(title), &columns);
    for e in f.events() {
        let mut row = vec![e.name.clone(), units::count(e.waits)];
        row.extend(
            buckets(e)
                .iter()
                .take(labels.len())
                .map(|b| units::bucket_pct(b.count, b.pct)),
        );
        t.push(row);
    }
    t
}

/// The ms and µs Wait Event Histograms (% of each event's waits) and the percentiles.
pub(crate) fn histogram_blocks(r: &OltpResult) -> Vec<Block> {
    let f = Figures::new(r);
    let ms = histogram_table(r, "% of Waits", &MS_LABELS, |e: &EventRecord| {
        &e.latency.awr_ms_buckets
    });
    let us = histogram_table(r, "% of Waits", &US_LABELS, |e: &EventRecord| {
        &e.latency.awr_us_buckets
    });
    let mut p = Table::new(
        None,
        &[
            ("Event", Align::Left),
            ("Waits", Align::Right),
            ("Avg", Align::Right),
            ("p50", Align::Right),
            ("p90", Align::Right),
            ("p99", Align::Right),
            ("p99.9", Align::Right),
            ("Max", Align::Right),
        ],
    );
    for e in f.events() {
        let l = &e.latency;
        let pct = |q: f64| opt_latency(l.percentile_us(q));
        p.push(vec![
            e.name.clone(),
            units::count(e.waits),
            opt_latency(Figures::ratio(1e6 * e.time_s, e.waits as f64)),
            pct(50.0),
            pct(90.0),
            pct(99.0),
            pct(99.9),
            awr_latency(l.max_us),
        ]);
    }
    vec![
        Block::Heading("Wait Event Histogram".to_string()),
        Block::Table(ms),
        Block::Heading("Wait Event Histogram Detail (up to 512 us)".to_string()),
        Block::Table(us),
        Block::Heading("Wait Event Latency Percentiles".to_string()),
        Block::Table(p),
        Block::Note(
            "A cell is the % of the event's waits in that bucket: '-' none, '<0.1' a few."
                .to_string(),
        ),
    ]
}

/// AWR's IO Profile, per second by direction, and the average request sizes.
pub(crate) fn io_profile_blocks(r: &OltpResult) -> Vec<Block> {
    let f = Figures::new(r);
    let per = |v: u64| f.per_s(v as f64);
    let mb = |v: u64| f.per_s(v as f64 / MB);
    let mut t = Table::new(
        None,
        &[
            ("", Align::Left),
            ("Read+Write/Second", Align::Right),
            ("Read/Second", Align::Right),
            ("Write/Second", Align::Right),
        ],
    );
    let (dr, dw, rw) = (
        f.db_read_requests(),
        f.db_write_requests(),
        f.redo_write_requests(),
    );
    let (drb, dwb, rwb) = (f.db_read_bytes(), f.db_write_bytes(), f.redo_write_bytes());
    let reads_cache = f.stat(Stat::PhysicalReadsCache);
    let reads_direct = f.stat(Stat::PhysicalReadsDirect);
    let writes = f.stat(Stat::PhysicalWrites);
    let rows: [DirectionRow; 11] = [
        ("Total Requests:", per(dr + dw + rw), per(dr), per(dw + rw)),
        ("Database Requests:", per(dr + dw), per(dr), per(dw)),
        ("Optimized Requests:", per(0), per(0), per(0)),
        ("Redo Requests:", per(rw), per(0), per(rw)),
        ("Total (MB):", mb(drb + dwb + rwb), mb(drb), mb(dwb + rwb)),
        ("Database (MB):", mb(drb + dwb), mb(drb), mb(dwb)),
        ("Optimized Total (MB):", mb(0), mb(0), mb(0)),
        ("Redo (MB):", mb(rwb), mb(0), mb(rwb)),
        (
            "Database (blocks):",
            per(reads_cache + reads_direct + writes),
            per(reads_cache + reads_direct),
            per(writes),
        ),
        (
            "Via Buffer Cache (blocks):",
            per(reads_cache + writes),
            per(reads_cache),
            per(writes),
        ),
        (
            "Direct (blocks):",
            per(reads_direct),
            per(reads_direct),
            per(0),
        ),
    ];
    for (name, a, b, c) in rows {
        t.push(vec![name.to_string(), opt(a, 1), opt(b, 1), opt(c, 1)]);
    }
    let kb = |bytes: u64, requests: u64| Figures::ratio(bytes as f64 / 1024.0, requests as f64);
    let mut sizes = Table::new(
        Some("Average request size (KB)"),
        &[
            ("", Align::Left),
            ("Read+Write", Align::Right),
            ("Read", Align::Right),
            ("Write", Align::Right),
        ],
    );
    let size_rows: [DirectionRow; 3] = [
        (
            "Total:",
            kb(drb + dwb + rwb, dr + dw + rw),
            kb(drb, dr),
            kb(dwb + rwb, dw + rw),
        ),
        (
            "Database:",
            kb(drb + dwb, dr + dw),
            kb(drb, dr),
            kb(dwb, dw),
        ),
        ("Redo:", kb(rwb, rw), None, kb(rwb, rw)),
    ];
    for (name, a, b, c) in size_rows {
        sizes.push(vec![name.to_string(), opt(a, 1), opt(b, 1), opt(c, 1)]);
    }
    vec![
        Block::Heading("IO Profile".to_string()),
        Block::Table(t),
        Block::Table(sizes),
        Block::Note(
            "MB are 2^20 bytes. Redo bytes are whole redo blocks, padding included, as written to the device. Cairn has no flash cache: Optimized is 0."
                .to_string(),
        ),
    ]
}

/// Every statistic, alphabetically as AWR lists them.
pub(crate) fn activity_blocks(r: &OltpResult) -> Vec<Block> {
    let f = Figures::new(r);
    let mut stats: Vec<_> = r.totals.stats.iter().collect();
    stats.sort_by_key(|s| s.name.to_lowercase());
    let mut t = Table::new(
        None,
        &[
            ("Statistic", Align::Left),
            ("Total", Align::Right),
            ("per Second", Align::Right),
            ("per Trans", Align::Right),
        ],
    );
    for s in stats {
        let v = s.value as f64;
        t.push(vec![
            s.name.clone(),
            units::count(s.value),
            opt(f.per_s(v), 1),
            opt(f.per_tx(v), 1),
        ]);
    }
    vec![
        Block::Heading("Instance Activity Stats".to_string()),
        Block::Table(t),
        Block::Note(
            "Statistics named 'cairn ...' are Cairn's own; the others mean what Oracle's do."
                .to_string(),
        ),
    ]
}

/// Agreement within which Cairn's count and the kernel's are called the same.
const CROSSCHECK_TOLERANCE: f64 = 0.05;

/// iostat -x figures of each device, and Cairn's counts against the kernel's.
pub(crate) fn device_blocks(r: &OltpResult) -> Vec<Block> {
    let mut blocks = vec![Block::Heading(
        "Devices (/proc/diskstats over the measured window)".to_string(),
    )];
    if r.devices.is_empty() {
        blocks.push(Block::Note(
            "No block device statistics: the targets' devices could not be found in /proc/diskstats."
                .to_string(),
        ));
    } else {
        let t = cairn_kit_report::summary::device_table(None, &r.devices);
        blocks.push(Block::Table(t));
        blocks.push(Block::Note(
            "In iostat -x terms: request sizes in KB, awaits in ms, MB of 2^20 bytes.".to_string(),
        ));
    }
    blocks.push(Block::Heading(
        "Cross-check: Cairn's counts against the kernel's".to_string(),
    ));
    if r.crosscheck.is_empty() {
        blocks.push(Block::Note(
            "No cross-check: no device statistics to set Cairn's counts against.".to_string(),
        ));
        return blocks;
    }
    let mut t = Table::new(
        None,
        &[
            ("Device", Align::Left),
            ("Targets", Align::Left),
            ("Figure", Align::Left),
            ("Cairn", Align::Right),
            ("Kernel", Align::Right),
            ("Kernel/Cairn", Align::Right),
            ("Within 5%", Align::Left),
        ],
    );
    for c in &r.crosscheck {
        let figures = [
            ("read requests", c.cairn_reads, c.kernel_reads),
            ("write requests", c.cairn_writes, c.kernel_writes),
            ("read bytes", c.cairn_read_bytes, c.kernel_read_bytes),
            ("write bytes", c.cairn_write_bytes, c.kernel_write_bytes),
        ];
        for (k, (name, cairn, kernel)) in figures.into_iter().enumerate() {
            let ratio = Figures::ratio(kernel as f64, cairn as f64);
            let within = match ratio {
                Some(x) if (x - 1.0).abs() <= CROSSCHECK_TOLERANCE => "yes",
                Some(_) => "NO",
                None if kernel == 0 => "yes",
                None => "NO",
            };
            let (device, targets) = if k == 0 {
                (c.device.clone(), c.targets.join(" "))
            } else {
                (String::new(), String::new())
            };
            t.push(vec![
                device,
                targets,
                name.to_string(),
                units::count(cairn),
                units::count(kernel),
                ratio
                    .map(|x| format!("{x:.3}"))
                    .unwrap_or_else(|| "-".to_string()),
                within.to_string(),
            ]);
        }
    }
    blocks.push(Block::Table(t));
    blocks.push(Block::Note(
        "The kernel may merge adjacent requests (fewer requests, same bytes) and counts any other I/O to the same device."
            .to_string(),
    ));
    blocks
}

/// The errors in full, when there were any.
pub(crate) fn error_blocks(r: &OltpResult) -> Vec<Block> {
    if r.errors.count == 0 && r.ended_early.is_none() {
        return Vec::new();
    }
    let mut fields = vec![(
        "Ended early".to_string(),
        r.ended_early.clone().unwrap_or_else(|| "no".to_string()),
    )];
    fields.push(("I/O errors".to_string(), units::count(r.errors.count)));
    for (i, e) in r.errors.first.iter().enumerate() {
        fields.push((format!("error {}", i + 1), e.clone()));
    }
    vec![
        Block::Heading("Errors".to_string()),
        Block::Alert(
            "This run did not complete cleanly: its figures are not a measurement of the storage."
                .to_string(),
        ),
        Block::Fields(fields),
    ]
}

/// The closing one-line summary.
pub(crate) fn info_blocks(r: &OltpResult) -> Vec<Block> {
    vec![
        Block::Heading("Summary (awr_info)".to_string()),
        Block::Note(info_line(r)),
    ]
}

fn kv_num(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.decimals$}"),
        _ => "-".to_string(),
    }
}

/// See [`super::awr_info_line`].
pub(crate) fn info_line(r: &OltpResult) -> String {
    let f = Figures::new(r);
    let lat = |e: Event| kv_num(f.avg_us(e), 0);
    let fields: [(&str, String); 17] = [
        ("sessions", r.settings.sessions.to_string()),
        ("read_iops", kv_num(f.per_s(f.db_read_requests() as f64), 1)),
        (
            "write_iops",
            kv_num(f.per_s(f.db_write_requests() as f64), 1),
        ),
        (
            "redo_iops",
            kv_num(f.per_s(f.redo_write_requests() as f64), 1),
        ),
        (
            "liops",
            kv_num(f.per_s(f.stat(Stat::SessionLogicalReads) as f64), 1),
        ),
        (
            "read_mbps",
            kv_num(f.per_s(f.db_read_bytes() as f64 / MB), 1),
        ),
        (
            "write_mbps",
            kv_num(f.per_s(f.db_write_bytes() as f64 / MB), 1),
        ),
        (
            "redo_mbps",
            kv_num(f.per_s(f.redo_write_bytes() as f64 / MB), 1),
        ),
        ("seq_read_us", lat(Event::DbFileSequentialRead)),
        ("par_read_us", lat(Event::DbFileParallelRead)),
        ("lfpw_us", lat(Event::LogFileParallelWrite)),
        ("lfs_us", lat(Event::LogFileSync)),
        ("iops_per_db_cpu_s", kv_num(f.iops_per_db_cpu_s(), 1)),
        ("iops_per_core", kv_num(f.iops_per_core(), 1)),
        ("cores_busy", kv_num(f.cores_busy(), 2)),
        ("errors", r.errors.count.to_string()),
        ("top_wait", format!("\"{}\"", top_wait_name(r))),
    ];
    let mut line = "awr_info".to_string();
    for (k, v) in fields {
        line.push(' ');
        line.push_str(k);
        line.push('=');
        line.push_str(&v);
    }
    line
}

/// Every section of `awr.txt`, in order.
pub(crate) fn all_blocks(r: &OltpResult) -> Vec<Block> {
    let mut blocks = header_blocks(r);
    blocks.extend(alert_blocks(r));
    blocks.extend(load_profile_blocks(r));
    blocks.extend(event_blocks(r));
    blocks.extend(histogram_blocks(r));
    blocks.extend(io_profile_blocks(r));
    blocks.extend(activity_blocks(r));
    blocks.extend(device_blocks(r));
    blocks.extend(error_blocks(r));
    blocks.extend(info_blocks(r));
    blocks
}
