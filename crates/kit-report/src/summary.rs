//! `summary.txt`: what a DBA reads after a bench, without a legend.
//!
//! The header says what was measured and how (tool, machine, engine, seed,
//! source, targets); then an overview of the runs; the latency-versus-load
//! table of each curve; then each run in full: the rate asked for against the
//! rate achieved (a rate not held is shouted, never buried), totals, the
//! percentile table, the AWR-style "Wait Event Histogram" rows per workload and
//! direction (as % and as counts, then the µs view), CPU, iostat -x figures,
//! validation and errors. Everything is over the measured window: warm-up
//! intervals are excluded, as the totals in `result.json` already are.
//!
//! The blocks built here are also the tables of `report.html`.

use std::collections::BTreeSet;

use cairn_kit::model::{General, Rate, Source};
use cairn_kit::result::{
    BenchResult, Bucket, DeviceStats, DirectionStats, Mixed, RunRecord, TargetInfo, PERCENTILES,
};

use super::document::{self, Align, Block, Table};
use super::units;

/// The whole of `summary.txt`.
pub fn summary_text(result: &BenchResult) -> String {
    let mut blocks = header_blocks(result);
    blocks.extend(overview_blocks(result));
    blocks.extend(curve_blocks(result));
    for run in &result.runs {
        blocks.extend(run_blocks(run));
    }
    document::text(&blocks)
}

/// Title, provenance and targets.
pub fn header_blocks(result: &BenchResult) -> Vec<Block> {
    let env = &result.environment;
    let engine = &result.engine;
    let mut engine_text = format!("{}, {} workers", engine.kind, engine.workers);
    if !engine.flags.is_empty() {
        engine_text.push_str(&format!(", flags: {}", engine.flags.join(", ")));
    }
    vec![
        Block::Title("Cairn bench summary".to_string()),
        Block::Fields(vec![
            (
                "Tool".into(),
                format!(
                    "{} {} (commit {})",
                    result.tool.name, result.tool.version, result.tool.commit
                ),
            ),
            ("Started".into(), result.started_at.clone()),
            (
                "Host".into(),
                format!("{}, {}, kernel {}", env.hostname, env.os, env.kernel),
            ),
            (
                "CPU".into(),
                format!(
                    "{}, {} CPUs, {} memory",
                    env.cpu_model,
                    env.cpus,
                    units::bytes(env.memory_bytes)
                ),
            ),
            ("Engine".into(), engine_text),
            ("Seed".into(), result.seed.to_string()),
            ("Source".into(), source_text(&result.plan.source)),
            ("Data".into(), data_text(&result.plan.general)),
        ]),
        Block::Heading("Targets".to_string()),
        Block::Table(targets_table(&result.targets)),
    ]
}

/// Where the plan came from: the parameter file and its variables, or the
/// quick command line.
fn source_text(source: &Source) -> String {
    match source {
        Source::Vdbench {
            path, variables, ..
        } => {
            let mut s = format!("vdbench parameter file {}", path.display());
            if !variables.is_empty() {
                let vars: Vec<String> = variables.iter().map(|(k, v)| format!("{k}={v}")).collect();
                s.push_str(&format!(" with {}", vars.join(" ")));
            }
            s
        }
        Source::Quick { args } => format!("cairn bench quick {}", args.join(" ")),
    }
}

/// The data written and checked: compression, dedupe, validation, and any
/// histogram bounds the parameter file added.
fn data_text(general: &General) -> String {
    let mut data = format!(
        "compression ratio {}, dedupe ratio {} (unit {}), validation {}",
        trim_float(general.compratio),
        trim_float(general.dedupratio),
        units::bytes(general.dedupunit_bytes),
        if general.validate { "on" } else { "off" }
    );
    if !general.histogram_bounds_us.is_empty() {
        let bounds: Vec<String> = general
            .histogram_bounds_us
            .iter()
            .map(|b| units::latency_us(*b as f64))
            .collect();
        data.push_str(&format!(", extra histogram bounds {}", bounds.join(" ")));
    }
    data
}

/// One row per target: what it is, the part of it used, its geometry.
fn targets_table(targets: &[TargetInfo]) -> Table {
    let mut t = Table::new(
        None,
        &[
            ("sd", Align::Left),
            ("path", Align::Left),
            ("kind", Align::Left),
            ("size", Align::Right),
            ("range used", Align::Left),
            ("sectors", Align::Left),
            ("max xfer", Align::Right),
            ("optimal io", Align::Right),
            ("rotational", Align::Left),
            ("discard", Align::Left),
            ("devices", Align::Left),
        ],
    );
    for target in targets {
        let range = if target.start_bytes == 0 && target.end_bytes == target.size_bytes {
            "all".to_string()
        } else {
            format!(
                "{} - {}",
                units::bytes(target.start_bytes),
                units::bytes(target.end_bytes)
            )
        };
        let sectors = format!(
            "{} ({}/{})",
            target.sector_format, target.logical_sector_bytes, target.physical_sector_bytes
        );
        let created = if target.created { " (created)" } else { "" };
        t.push(vec![
            target.sd.clone(),
            format!("{}{created}", target.path),
            target.kind.clone(),
            units::bytes(target.size_bytes),
            range,
            sectors,
            units::bytes(u64::from(target.max_transfer_bytes)),
            if target.optimal_io_bytes == 0 {
                "-".to_string()
            } else {
                units::bytes(u64::from(target.optimal_io_bytes))
            },
            match target.rotational {
                Some(true) => "yes",
                Some(false) => "no",
                None => "unknown",
            }
            .to_string(),
            if target.discard { "yes" } else { "no" }.to_string(),
            target.devices.join(" "),
        ]);
    }
    t
}

/// One line per run: the figures to scan before reading any run in full.
pub fn overview_blocks(result: &BenchResult) -> Vec<Block> {
    let mut t = Table::new(
        None,
        &[
            ("#", Align::Right),
            ("run", Align::Left),
            ("rate asked", Align::Right),
            ("IO/s", Align::Right),
            ("MB/s", Align::Right),
            ("read%", Align::Right),
            ("mean", Align::Right),
            ("p99", Align::Right),
            ("max", Align::Right),
            ("rate held", Align::Left),
        ],
    );
    for (i, run) in result.runs.iter().enumerate() {
        let all = &run.totals.all.all;
        t.push(vec![
            (i + 1).to_string(),
            run.title(),
            rate_asked(run),
            units::grouped(all.iops, 1),
            units::grouped(all.mb_per_s, 2),
            units::pct(run.totals.all.read_pct()),
            units::latency_us(all.latency.mean_us),
            percentile(&all.latency, 99.0),
            units::latency_us(all.latency.max_us),
            held_text(run).to_string(),
        ]);
    }
    vec![
        Block::Heading("Runs".to_string()),
        Block::Note(
            "All figures are over each run's measured window: warm-up intervals are excluded."
                .to_string(),
        ),
        Block::Table(t),
    ]
}

/// The curve ids in the order their runs ran.
pub fn curve_ids(result: &BenchResult) -> Vec<usize> {
    let mut seen = BTreeSet::new();
    result
        .runs
        .iter()
        .filter_map(|r| r.curve.map(|c| c.id))
        .filter(|id| seen.insert(*id))
        .collect()
}

/// The name of a curve: its rd.
pub fn curve_name(result: &BenchResult, id: usize) -> String {
    result
        .curve(id)
        .first()
        .map(|r| r.rd.clone())
        .unwrap_or_else(|| format!("curve {id}"))
}

/// A latency-versus-load table per curve.
pub fn curve_blocks(result: &BenchResult) -> Vec<Block> {
    let mut blocks = Vec::new();
    for id in curve_ids(result) {
        blocks.push(Block::Heading(format!(
            "Latency versus load: {}",
            curve_name(result, id)
        )));
        blocks.push(Block::Table(curve_table(result, id)));
    }
    blocks
}

pub fn curve_table(result: &BenchResult, id: usize) -> Table {
    let mut t = Table::new(
        None,
        &[
            ("load", Align::Right),
            ("target IO/s", Align::Right),
            ("achieved IO/s", Align::Right),
            ("held", Align::Left),
            ("mean", Align::Right),
            ("p50", Align::Right),
            ("p99", Align::Right),
            ("p99.9", Align::Right),
        ],
    );
    for run in result.curve(id) {
        let all = &run.totals.all.all;
        let load = match run.curve.and_then(|c| c.pct) {
            Some(p) => format!("{}%", trim_float(p)),
            None => "max".to_string(),
        };
        t.push(vec![
            load,
            run.target_iops
                .map(|v| units::grouped(v, 1))
                .unwrap_or_else(|| "-".to_string()),
            units::grouped(all.iops, 1),
            held_text(run).to_string(),
            units::latency_us(all.latency.mean_us),
            percentile(&all.latency, 50.0),
            percentile(&all.latency, 99.0),
            percentile(&all.latency, 99.9),
        ]);
    }
    t
}

/// A run in full.
pub fn run_blocks(run: &RunRecord) -> Vec<Block> {
    let mut blocks = vec![Block::Heading(format!("Run {}", run.title()))];
    blocks.extend(run_fields_and_alerts(run));
    blocks.extend(run_tables(run));
    blocks
}

/// What ran, the rate asked against achieved, and what went wrong, loudly.
pub fn run_fields_and_alerts(run: &RunRecord) -> Vec<Block> {
    let measured: Vec<u32> = run
        .intervals
        .iter()
        .filter(|i| !i.warmup)
        .map(|i| i.index)
        .collect();
    let warm: Vec<u32> = run
        .intervals
        .iter()
        .filter(|i| i.warmup)
        .map(|i| i.index)
        .collect();
    let mut window = format!(
        "{} measured of {} elapsed",
        units::seconds(run.measured_s),
        units::seconds(run.elapsed_s)
    );
    if !measured.is_empty() {
        window.push_str(&format!(
            " ({} of {})",
            interval_range(&measured),
            units::seconds(run.interval_s)
        ));
    }
    if !warm.is_empty() {
        window.push_str(&format!(
            "; warm-up {} excluded ({})",
            units::seconds(run.warmup_s),
            interval_range(&warm)
        ));
    }
    let threads: Vec<String> = run
        .threads
        .iter()
        .map(|(sd, n)| format!("{sd}={n}"))
        .collect();
    let achieved = run.totals.all.all.iops;
    let rate = match target(run) {
        Some(t) => format!(
            "asked {} (open loop, {} arrivals); achieved {} IO/s ({}% of target)",
            match run.rate {
                Rate::CurvePct(p) =>
                    format!("{}% of max = {} IO/s", trim_float(p), units::grouped(t, 1)),
                _ => format!("{} IO/s", units::grouped(t, 1)),
            },
            run.arrival,
            units::grouped(achieved, 1),
            units::pct(if t > 0.0 { 100.0 * achieved / t } else { 0.0 })
        ),
        None => format!(
            "asked max (closed loop); achieved {} IO/s",
            units::grouped(achieved, 1)
        ),
    };
    let mut blocks = vec![Block::Fields(vec![
        ("Workloads".into(), run.wds.join(", ")),
        ("Outstanding I/Os".into(), threads.join(", ")),
        ("Rate".into(), rate),
        ("Window".into(), window),
    ])];
    let outcome = &run.rate_outcome;
    if target(run).is_some() && !outcome.held {
        let mut text = format!(
            "RATE NOT HELD: asked {} IO/s, achieved {} IO/s; {} I/Os never issued; backlog peaked at {} of {}",
            units::grouped(target(run).unwrap_or_default(), 1),
            units::grouped(achieved, 1),
            units::count(outcome.not_issued),
            units::count(outcome.backlog_max),
            units::count(outcome.backlog_limit),
        );
        if let Some(m) = &outcome.message {
            text.push_str(". ");
            text.push_str(m);
        }
        blocks.push(Block::Alert(text));
    }
    if let Some(why) = &run.ended_early {
        blocks.push(Block::Alert(format!("RUN ENDED EARLY: {why}")));
    }
    blocks
}

/// Totals, percentiles, wait histograms, CPU, devices, validation and errors.
pub fn run_tables(run: &RunRecord) -> Vec<Block> {
    let scopes = scopes(run);
    let mut blocks = vec![
        Block::Table(totals_table(&scopes)),
        Block::Table(percentile_table(&scopes)),
    ];
    blocks.extend(wait_histograms(&scopes));
    blocks.push(cpu_fields(run));
    if !run.devices.is_empty() {
        let dev = device_table(
            Some("Devices (iostat -x over the measured window)"),
            &run.devices,
        );
        blocks.push(Block::Table(dev));
    }
    blocks.extend(validation_blocks(run));
    blocks.push(errors_block(run));
    blocks
}

/// Counts, rates, sizes and mean, stddev and max latency per scope.
fn totals_table(scopes: &[Scope<'_>]) -> Table {
    let mut totals = Table::new(
        Some("Totals"),
        &[
            ("workload", Align::Left),
            ("I/O", Align::Left),
            ("I/Os", Align::Right),
            ("IO/s", Align::Right),
            ("MB/s", Align::Right),
            ("bytes/io", Align::Right),
            ("read%", Align::Right),
            ("mean", Align::Right),
            ("stddev", Align::Right),
            ("max", Align::Right),
        ],
    );
    for s in scopes {
        totals.push(vec![
            s.workload.to_string(),
            s.dir.to_string(),
            units::count(s.stats.ios),
            units::grouped(s.stats.iops, 1),
            units::grouped(s.stats.mb_per_s, 2),
            units::grouped(s.stats.bytes_per_io, 0),
            units::pct(if s.dir == "all" {
                s.mixed.read_pct()
            } else if s.dir == "read" {
                100.0
            } else {
                0.0
            }),
            units::latency_us(s.stats.latency.mean_us),
            units::latency_us(s.stats.latency.stddev_us),
            units::latency_us(s.stats.latency.max_us),
        ]);
    }
    totals
}

/// The response time percentiles of [`PERCENTILES`] and the max, per scope.
fn percentile_table(scopes: &[Scope<'_>]) -> Table {
    let mut columns: Vec<(String, Align)> = vec![
        ("workload".into(), Align::Left),
        ("I/O".into(), Align::Left),
    ];
    columns.extend(
        PERCENTILES
            .iter()
            .map(|p| (units::percentile_name(*p), Align::Right)),
    );
    columns.push(("max".into(), Align::Right));
    let mut pct_table = Table {
        title: Some("Response time percentiles".into()),
        columns,
        rows: Vec::new(),
    };
    for s in scopes {
        let mut row = vec![s.workload.to_string(), s.dir.to_string()];
        row.extend(PERCENTILES.iter().map(|p| percentile(&s.stats.latency, *p)));
        row.push(units::latency_us(s.stats.latency.max_us));
        pct_table.push(row);
    }
    pct_table
}

/// The AWR-style wait histograms: % and counts on the ms buckets, % on the
/// µs buckets, and % and counts on the parameter file's buckets if it gave any.
fn wait_histograms(scopes: &[Scope<'_>]) -> Vec<Block> {
    let mut blocks = vec![
        Block::Table(bucket_table(
            "Wait histogram, % of I/Os by wait time (AWR Wait Event Histogram)",
            scopes,
            |l| &l.awr_ms_buckets,
            false,
        )),
        Block::Table(bucket_table(
            "Wait histogram, I/O counts by wait time",
            scopes,
            |l| &l.awr_ms_buckets,
            true,
        )),
        Block::Table(bucket_table(
            "Wait histogram in microseconds, % of I/Os",
            scopes,
            |l| &l.awr_us_buckets,
            false,
        )),
    ];
    if scopes
        .iter()
        .any(|s| !s.stats.latency.custom_buckets.is_empty())
    {
        blocks.push(Block::Table(bucket_table(
            "Wait histogram on the parameter file's buckets, % of I/Os",
            scopes,
            |l| &l.custom_buckets,
            false,
        )));
        blocks.push(Block::Table(bucket_table(
            "Wait histogram on the parameter file's buckets, I/O counts",
            scopes,
            |l| &l.custom_buckets,
            true,
        )));
    }
    blocks
}

/// The CPU the run's process used, per I/O and against the machine.
fn cpu_fields(run: &RunRecord) -> Block {
    let cpu = &run.cpu;
    let busy = cpu.user_s + cpu.sys_s;
    let of_one = if run.measured_s > 0.0 {
        100.0 * busy / run.measured_s
    } else {
        0.0
    };
    Block::Fields(vec![(
        "CPU".into(),
        format!(
            "user {:.2}s, sys {:.2}s ({}% of one CPU); {} I/Os per CPU-second; machine busy {}%",
            cpu.user_s,
            cpu.sys_s,
            units::pct(of_one),
            units::grouped(cpu.iops_per_cpu_s, 0),
            units::pct(cpu.machine_busy_pct)
        ),
    )])
}

/// Validation off, on without errors, or failed, loudly, with the units that
/// did not read back as written.
fn validation_blocks(run: &RunRecord) -> Vec<Block> {
    let v = &run.validation;
    let mut blocks = Vec::new();
    if !v.enabled {
        blocks.push(Block::Fields(vec![("Validation".into(), "off".into())]));
    } else if v.errors.is_empty() {
        blocks.push(Block::Fields(vec![(
            "Validation".into(),
            format!(
                "on: {} units written, {} checked on read, no errors",
                units::count(v.units_written),
                units::count(v.units_checked)
            ),
        )]));
    } else {
        blocks.push(Block::Alert(format!(
            "DATA VALIDATION FAILED: {} bad units of {} checked",
            units::count(v.errors.len() as u64),
            units::count(v.units_checked)
        )));
        let mut t = Table::new(
            Some("Units that did not read back as written"),
            &[
                ("sd", Align::Left),
                ("lun", Align::Left),
                ("offset", Align::Right),
                ("lba", Align::Right),
                ("unit", Align::Right),
                ("problem", Align::Left),
            ],
        );
        for e in &v.errors {
            t.push(vec![
                e.sd.clone(),
                e.lun.clone(),
                e.offset_bytes.to_string(),
                e.lba.to_string(),
                units::bytes(e.unit_bytes),
                e.problem.clone(),
            ]);
        }
        blocks.push(Block::Table(t));
    }
    blocks
}

/// I/O errors: none, or how many, loudly, with the first of them.
fn errors_block(run: &RunRecord) -> Block {
    let errors = &run.errors;
    if errors.count == 0 {
        Block::Fields(vec![("I/O errors".into(), "none".into())])
    } else {
        let mut text = format!("I/O ERRORS: {}", units::count(errors.count));
        if !errors.first.is_empty() {
            text.push_str(&format!(
                "; first {}: {}",
                errors.first.len(),
                errors.first.join("; ")
            ));
        }
        Block::Alert(text)
    }
}

/// One row of the per-workload, per-direction tables.
pub struct Scope<'a> {
    pub workload: &'a str,
    /// `all`, `read` or `write`.
    pub dir: &'static str,
    pub stats: &'a DirectionStats,
    pub mixed: &'a Mixed,
}

/// The rows a run's tables show: all workloads together (when there are
/// several), then each workload; a workload that both reads and writes gets
/// `all`, `read` and `write` rows, one that only reads or writes gets one row.
pub fn scopes(run: &RunRecord) -> Vec<Scope<'_>> {
    let mut groups: Vec<(&str, &Mixed)> = Vec::new();
    if run.totals.workloads.len() != 1 {
        groups.push(("all", &run.totals.all));
    }
    groups.extend(
        run.totals
            .workloads
            .iter()
            .map(|w| (w.wd.as_str(), &w.stats)),
    );
    let mut out = Vec::new();
    for (workload, mixed) in groups {
        let reads = mixed.read.ios > 0;
        let writes = mixed.write.ios > 0;
        let dirs: &[(&'static str, &DirectionStats)] = match (reads, writes) {
            (true, true) => &[
                ("all", &mixed.all),
                ("read", &mixed.read),
                ("write", &mixed.write),
            ],
            (true, false) => &[("read", &mixed.read)],
            (false, true) => &[("write", &mixed.write)],
            (false, false) => &[("all", &mixed.all)],
        };
        for (dir, stats) in dirs {
            out.push(Scope {
                workload,
                dir,
                stats,
                mixed,
            });
        }
    }
    out
}

fn bucket_table(
    title: &str,
    scopes: &[Scope<'_>],
    buckets: impl Fn(&cairn_kit::result::LatencySummary) -> &Vec<Bucket>,
    counts: bool,
) -> Table {
    // Every row has the same buckets; take the labels from the first that has any.
    let labels: Vec<String> = scopes
        .iter()
        .map(|s| buckets(&s.stats.latency))
        .find(|b| !b.is_empty())
        .map(|b| b.iter().map(|x| x.label.clone()).collect())
        .unwrap_or_default();
    let mut columns: Vec<(String, Align)> = vec![
        ("workload".into(), Align::Left),
        ("I/O".into(), Align::Left),
        ("total waits".into(), Align::Right),
    ];
    columns.extend(labels.iter().map(|l| (l.clone(), Align::Right)));
    let mut t = Table {
        title: Some(title.to_string()),
        columns,
        rows: Vec::new(),
    };
    for s in scopes {
        let mut row = vec![
            s.workload.to_string(),
            s.dir.to_string(),
            units::count(s.stats.latency.count),
        ];
        row.extend(buckets(&s.stats.latency).iter().map(|b| {
            if counts {
                units::count(b.count)
            } else {
                units::bucket_pct(b.count, b.pct)
            }
        }));
        t.push(row);
    }
    t
}

/// `interval 1` or `intervals 2-6` (the indices are consecutive).
fn interval_range(indices: &[u32]) -> String {
    match (indices.first(), indices.last()) {
        (Some(a), Some(b)) if a == b => format!("interval {a}"),
        (Some(a), Some(b)) => format!("intervals {a}-{b}"),
        _ => "no intervals".to_string(),
    }
}

/// The open-loop target, wherever the engine recorded it.
fn target(run: &RunRecord) -> Option<f64> {
    run.target_iops.or(run.rate_outcome.target_iops)
}

/// The rate as the parameter file asked for it: `max`, `2,000 IO/s`, `50% of max`.
pub fn rate_asked(run: &RunRecord) -> String {
    match run.rate {
        Rate::Max => "max".to_string(),
        Rate::Fixed(n) => format!("{} IO/s", units::grouped(n, 0)),
        Rate::CurvePct(p) => format!("{}% of max", trim_float(p)),
    }
}

/// `yes`, `NO` or `-` (closed loop has no rate to hold).
pub fn held_text(run: &RunRecord) -> &'static str {
    match (target(run), run.rate_outcome.held) {
        (None, _) => "-",
        (Some(_), true) => "yes",
        (Some(_), false) => "NO",
    }
}

pub fn percentile(latency: &cairn_kit::result::LatencySummary, p: f64) -> String {
    latency
        .percentile_us(p)
        .map(units::latency_us)
        .unwrap_or_else(|| "-".to_string())
}

/// `1`, `1.5`, `0.25` — a parameter as the user would have typed it.
fn trim_float(v: f64) -> String {
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The iostat -x table of `devices` (shared with the OLTP report).
pub fn device_table(title: Option<&str>, devices: &[DeviceStats]) -> Table {
    let mut t = Table::new(
        title,
        &[
            ("Device", Align::Left),
            ("r/s", Align::Right),
            ("w/s", Align::Right),
            ("rMB/s", Align::Right),
            ("wMB/s", Align::Right),
            ("rareq-sz", Align::Right),
            ("wareq-sz", Align::Right),
            ("aqu-sz", Align::Right),
            ("r_await", Align::Right),
            ("w_await", Align::Right),
            ("%util", Align::Right),
        ],
    );
    for d in devices {
        t.push(vec![
            d.device.clone(),
            units::grouped(d.r_s, 1),
            units::grouped(d.w_s, 1),
            units::grouped(d.rmb_s, 2),
            units::grouped(d.wmb_s, 2),
            units::grouped(d.rareq_sz_kb, 1),
            units::grouped(d.wareq_sz_kb, 1),
            units::grouped(d.aqu_sz, 2),
            units::grouped(d.r_await_ms, 2),
            units::grouped(d.w_await_ms, 2),
            units::pct(d.util_pct),
        ]);
    }
    t
}
