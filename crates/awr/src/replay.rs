//! `cairn awr replay`: derive a report's I/O classes, run them on candidate
//! storage, and put each class's measured latency next to the AWR's — then
//! the post's closing question: how much DB time was I/O wait, and what DB
//! time the measured latencies would have given.
//!
//! The run is an ordinary `cairn bench run` of the derived parameter file
//! (one wd per class, each at its own rate and priority, open loop), so every
//! figure, report and safety rule of the workload engine applies.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use cairn_io::host::Host;
use serde::{Deserialize, Serialize};

use super::derive::{derive, vdbench_text, ClassKind, Derivation, DeriveOptions};
use super::distribution::{class_distribution, LatencyDistribution};
use super::model::AwrReport;
use cairn_kit::engine::{self, BenchOptions, EngineMaker, Observer};
use cairn_kit::result::BenchResult;
use cairn_kit::target::{self, TargetOpener, TargetOptions};
use cairn_kit::vdbench;

/// How to replay.
pub struct ReplayOptions<'a> {
    pub host: &'a Host,
    pub targets: Vec<PathBuf>,
    /// Bytes of each target to use; a missing file is created this big.
    pub size_bytes: Option<u64>,
    /// I/Os outstanding per target (vdbench's `threads=`).
    pub threads: u32,
    pub derive: DeriveOptions,
    pub force: bool,
    pub seed: u64,
    pub engine: EngineMaker,
    pub interrupted: &'a AtomicBool,
    /// Filling a new target before the run (bytes done, of total); false
    /// stops the fill, and the new file is removed.
    pub fill_progress: &'a dyn Fn(u64, u64) -> bool,
    /// Whether a target may be overwritten, and the luns that are not paths
    /// (Cairn's: `+GROUP/...` files).
    pub opener: &'a dyn TargetOpener,
}

/// The AWR's figure for a class, the measured one, and how they compare.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassVerdict {
    pub class: ClassKind,
    pub description: String,
    pub size_bytes: u64,
    /// The rate the report states, and the rate asked of the target (scaled).
    pub awr_rate_per_s: f64,
    pub target_rate_per_s: f64,
    pub measured_rate_per_s: f64,
    /// The wait event the AWR latency is taken from, and its average.
    pub awr_event: Option<String>,
    pub awr_avg_us: Option<f64>,
    pub measured_avg_us: f64,
    pub measured_p50_us: f64,
    pub measured_p99_us: f64,
    pub measured_p999_us: f64,
    /// Measured average over the AWR's: below 1 is faster than today.
    pub latency_ratio: Option<f64>,
    /// The report's Wait Event Histogram buckets for the class's events, and
    /// the run's I/Os counted at the same bounds (absent when the report has
    /// no histogram for them).
    #[serde(default)]
    pub distribution: Option<LatencyDistribution>,
}

/// How much of the report's DB time was I/O wait, and what it would have
/// been with the measured latencies.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DbTimeVerdict {
    pub db_time_s: Option<f64>,
    /// Time foreground sessions waited on the replayed read events.
    pub io_wait_s: f64,
    pub io_wait_pct_of_db_time: Option<f64>,
    /// DB time with each of those waits at the measured average of its class.
    pub projected_db_time_s: Option<f64>,
    /// DB time today over projected DB time.
    pub speedup: Option<f64>,
    /// The most any storage could give: DB time over DB time without those
    /// waits at all (`None` when they were all of it).
    #[serde(default)]
    pub speedup_bound: Option<f64>,
    /// The events counted, with their waits and AWR and measured averages.
    pub events: Vec<(String, f64, f64, f64)>,
}

/// A replay's outcome: `verdict.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub schema: String,
    pub schema_version: u32,
    pub source: String,
    pub derivation: Derivation,
    pub classes: Vec<ClassVerdict>,
    pub db_time: DbTimeVerdict,
    /// The parameter file that was run.
    pub parameter_file: String,
    /// Why the run's figures are not the whole story (I/Os that failed, a run
    /// that ended early or was interrupted); empty for a clean run.
    #[serde(default)]
    pub problems: Vec<String>,
}

pub const VERDICT_SCHEMA: &str = "cairn-awr-verdict";

/// Why a replay could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Derive(#[from] super::derive::DeriveError),
    #[error("the derived parameter file does not parse (a Cairn bug): {0}")]
    Plan(String),
    #[error("{0}")]
    Target(String),
    #[error("{0}")]
    Bench(String),
}

/// Derive, run and judge. Returns the verdict and the workload engine's result
/// (for its own reports).
pub fn replay(
    report: &AwrReport,
    opts: &ReplayOptions,
    observer: &mut dyn Observer,
) -> Result<(Verdict, BenchResult), ReplayError> {
    let mut d = derive(report, &opts.derive)?;
    fit_to_sectors(&mut d, sector_bytes(opts.host, opts.opener, &opts.targets));
    let sds = sd_lines(&opts.targets, opts.threads, opts.size_bytes);
    let text = vdbench_text(&d, &sds);
    let plan = vdbench::parse_str(
        Path::new("awr-replay.vdb"),
        &text,
        &BTreeMap::new(),
        &mut |p: &Path| std::fs::read_to_string(p),
    )
    .map_err(|e| ReplayError::Plan(e.to_string()))?;
    let mut fill = |done: u64, total: u64| (opts.fill_progress)(done, total);
    let targets = target::open_targets(
        &plan,
        &mut TargetOptions {
            host: opts.host,
            opener: opts.opener,
            force: opts.force,
            fill_progress: &mut fill,
            engine: opts.engine.file_engine_kind(),
        },
    )
    .map_err(|e| ReplayError::Target(e.to_string()))?;
    let result = match engine::run_bench(
        &plan,
        &targets,
        &BenchOptions {
            engine: opts.engine.clone(),
            workers: None,
            seed: opts.seed,
            host: opts.host,
            interrupted: opts.interrupted,
            // A replay's runs have no pauses between them.
            end_pause: None,
        },
        observer,
    ) {
        Ok(r) => r,
        Err(e) => {
            // Refused before any I/O: the files made for this replay go too.
            let left = target::close_and_remove_created(targets, opts.host, opts.opener)
                .err()
                .map_or_else(String::new, |left| format!("; {left}"));
            return Err(ReplayError::Bench(format!("{e}{left}")));
        }
    };
    drop(targets);
    let verdict = judge(report, &d, &result, text);
    Ok((verdict, result))
}

/// The largest logical sector of the targets that exist (a file still to be
/// created takes 512-byte I/O). A target the opener maps (a Cairn group
/// file, `+GROUP/...`) counts as 4096, the largest sector a group has: sizes
/// that fit it fit 512 too.
fn sector_bytes(host: &Host, opener: &dyn TargetOpener, targets: &[PathBuf]) -> u64 {
    if targets.iter().any(|t| opener.maps(t)) {
        return 4096;
    }
    targets
        .iter()
        .filter_map(|t| {
            cairn_io::DeviceFile::open(t, cairn_io::OpenMode::READ, host)
                .ok()
                .map(|f| u64::from(f.geometry().logical_sector_bytes))
        })
        .max()
        .unwrap_or(512)
        .max(512)
}

/// Direct I/O moves whole sectors: a derived size (a multiple of 512) is
/// rounded to the nearest multiple of the targets' sector, at least one.
fn fit_to_sectors(d: &mut Derivation, sector: u64) {
    let mut changed = Vec::new();
    for c in &mut d.classes {
        let fitted = ((c.size_bytes + sector / 2) / sector).max(1) * sector;
        if fitted != c.size_bytes {
            changed.push(format!(
                "{} {} -> {}",
                c.kind.describe(),
                c.size_bytes,
                fitted
            ));
            c.size_bytes = fitted;
        }
    }
    if !changed.is_empty() {
        d.notes.push(format!(
            "transfer sizes rounded to the targets' {sector}-byte sectors: {}",
            changed.join(", ")
        ));
    }
}

/// One sd per target, `threads` I/Os outstanding each.
pub fn sd_lines(targets: &[PathBuf], threads: u32, size_bytes: Option<u64>) -> String {
    let mut out = String::new();
    for (i, t) in targets.iter().enumerate() {
        out.push_str(&format!(
            "sd=sd{},lun={},threads={}",
            i + 1,
            t.display(),
            threads.max(1)
        ));
        if let Some(s) = size_bytes {
            out.push_str(&format!(",size={s}"));
        }
        out.push('\n');
    }
    out
}

/// Set the measured figures against the report's.
pub fn judge(report: &AwrReport, d: &Derivation, result: &BenchResult, text: String) -> Verdict {
    let run = result.runs.first();
    let mut classes = Vec::new();
    for c in &d.classes {
        let stats = run.and_then(|r| {
            r.totals
                .workloads
                .iter()
                .find(|w| w.wd == c.kind.wd_name())
                .map(|w| &w.stats.all)
        });
        let distribution = class_distribution(
            report,
            c.kind.judged_events(),
            stats.filter(|s| s.ios > 0).map(|s| &s.histogram),
        );
        let (awr_event, awr_avg_us) = awr_latency(report, c.kind);
        // A class whose rate is too low for the run's length may do no I/O:
        // it has no measured latency, not a latency of zero.
        let stats = stats.filter(|s| s.ios > 0);
        let measured_avg_us = stats.map_or(0.0, |s| s.latency.mean_us);
        let pct = |p: f64| {
            stats
                .and_then(|s| s.latency.percentile_us(p))
                .unwrap_or(0.0)
        };
        classes.push(ClassVerdict {
            class: c.kind,
            description: c.kind.describe().to_string(),
            size_bytes: c.size_bytes,
            awr_rate_per_s: c.awr_rate_per_s,
            target_rate_per_s: c.rate_per_s,
            measured_rate_per_s: stats.map_or(0.0, |s| s.iops),
            awr_event,
            awr_avg_us,
            measured_avg_us,
            measured_p50_us: pct(50.0),
            measured_p99_us: pct(99.0),
            measured_p999_us: pct(99.9),
            latency_ratio: awr_avg_us
                .filter(|a| *a > 0.0 && stats.is_some())
                .map(|a| measured_avg_us / a),
            distribution,
        });
    }
    let db_time = db_time_verdict(report, &classes);
    let mut problems = Vec::new();
    for r in &result.runs {
        if r.errors.count > 0 {
            problems.push(format!(
                "{} I/Os failed (summary.txt names the first)",
                r.errors.count
            ));
        }
        if let Some(why) = r.cut_short() {
            problems.push(format!("the run ended early: {why}"));
        }
    }
    Verdict {
        schema: VERDICT_SCHEMA.into(),
        schema_version: 1,
        source: report.source.clone(),
        derivation: d.clone(),
        classes,
        db_time,
        parameter_file: text,
        problems,
    }
}

/// The AWR's average latency for a class: total time ÷ waits over the class's
/// events the report has, weighted by their waits (11g and Statspack round
/// their printed averages to whole milliseconds, so those are used only when
/// an event has no totals). Events sessions waited on come first; the writes'
/// events are the writers' (background).
fn awr_latency(report: &AwrReport, kind: ClassKind) -> (Option<String>, Option<f64>) {
    let (mut names, mut time_us, mut waits) = (Vec::new(), 0.0, 0.0);
    let mut printed = None;
    for name in kind.judged_events() {
        let Some(e) = report.foreground_event(name).or_else(|| report.event(name)) else {
            continue;
        };
        match (e.total_wait_s, e.waits) {
            (Some(t), Some(w)) if w > 0.0 && t.is_finite() && w.is_finite() => {
                time_us += t * 1e6;
                waits += w;
                names.push(*name);
            }
            _ => {
                if printed.is_none() {
                    printed = e.avg_wait_us.map(|a| ((*name).to_string(), a));
                }
            }
        }
    }
    if waits > 0.0 {
        (Some(names.join(" + ")), Some(time_us / waits))
    } else {
        printed.map_or((None, None), |(n, a)| (Some(n), Some(a)))
    }
}

/// The post's closing question. Only the events sessions wait on (the reads,
/// from the foreground or Top table) are in DB time; the writers' writes are
/// not. Every such event counts in the I/O share, whether or not its class
/// was derived or run (the share is the report's, whatever `--scale` left
/// out). A judged event is projected at its class's measured average; a
/// batch event (db file parallel read) at its own average times the class's
/// measured-over-AWR ratio, a batch taking as much longer or shorter as its
/// reads do; a class not measured keeps the AWR's latency.
fn db_time_verdict(report: &AwrReport, classes: &[ClassVerdict]) -> DbTimeVerdict {
    let db_time_s = report.header.db_time_min.map(|m| m * 60.0);
    let mut v = DbTimeVerdict {
        db_time_s,
        ..DbTimeVerdict::default()
    };
    let mut delta = 0.0;
    for kind in ClassKind::ALL.into_iter().filter(|k| k.is_read()) {
        let measured_class = classes
            .iter()
            .find(|c| c.class == kind && c.measured_rate_per_s > 0.0);
        for name in kind.wait_events() {
            let Some(e) = report.foreground_event(name) else {
                continue;
            };
            let (Some(waits), Some(time_s)) = (e.waits, e.total_wait_s) else {
                continue;
            };
            if waits <= 0.0 || v.events.iter().any(|(n, ..)| n == name) {
                continue;
            }
            if !(waits.is_finite() && time_s.is_finite() && time_s >= 0.0) {
                continue;
            }
            let awr_avg = time_s * 1e6 / waits;
            v.io_wait_s += time_s;
            let judged = kind.judged_events().contains(name);
            let measured = match measured_class {
                Some(c) if judged => c.measured_avg_us,
                Some(c) => c.latency_ratio.map_or(awr_avg, |r| awr_avg * r),
                None => awr_avg,
            };
            delta += waits * (measured - awr_avg) / 1e6;
            v.events
                .push(((*name).to_string(), waits, awr_avg, measured));
        }
    }
    if let Some(db) = db_time_s.filter(|d| *d > 0.0) {
        v.io_wait_pct_of_db_time = Some(100.0 * v.io_wait_s / db);
        let projected = (db + delta).max(0.0);
        v.projected_db_time_s = Some(projected);
        v.speedup = (projected > 0.0).then(|| db / projected);
        let without_io = db - v.io_wait_s;
        v.speedup_bound = (without_io > 0.0).then(|| db / without_io);
    }
    v
}

/// The verdict as a table a DBA reads.
pub fn verdict_text(v: &Verdict) -> String {
    let mut out = String::new();
    out.push_str(&format!("AWR replay of {}\n\n", v.source));
    if !v.problems.is_empty() {
        out.push_str(&format!(
            "*** THE RUN DID NOT COMPLETE: {}. The figures are what was measured before that. ***\n\n",
            v.problems.join("; ")
        ));
    }
    out.push_str(&format!(
        "{:<28} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}  {}\n",
        "class",
        "size",
        "AWR IO/s",
        "run IO/s",
        "AWR avg",
        "run avg",
        "run p50",
        "run p99",
        "ratio",
        "AWR event"
    ));
    for c in &v.classes {
        out.push_str(&format!(
            "{:<28} {:>9} {:>10.1} {:>10.1} {:>10} {:>10} {:>10} {:>10} {:>7}  {}\n",
            c.description,
            size(c.size_bytes),
            c.awr_rate_per_s,
            c.measured_rate_per_s,
            c.awr_avg_us.map_or("-".into(), us),
            ran(c, c.measured_avg_us),
            ran(c, c.measured_p50_us),
            ran(c, c.measured_p99_us),
            c.latency_ratio.map_or("-".into(), |r| format!("{r:.2}")),
            c.awr_event.as_deref().unwrap_or("-"),
        ));
    }
    let idle: Vec<&str> = v
        .classes
        .iter()
        .filter(|c| c.measured_rate_per_s <= 0.0)
        .map(|c| c.description.as_str())
        .collect();
    if !idle.is_empty() {
        out.push_str(&format!(
            "\nNo I/O of {} was done: its rate is too low for the run's length (raise --scale or --duration).\n",
            idle.join(", ")
        ));
    }
    if (v.derivation.scale - 1.0).abs() > f64::EPSILON {
        out.push_str(&format!(
            "\nRates were scaled by {} (--scale): 'run IO/s' is against the scaled target.\n",
            v.derivation.scale
        ));
    }
    if v.classes
        .iter()
        .any(|c| judged_by_batches(c) && c.latency_ratio.is_some())
    {
        out.push_str(&format!("\n{BATCH_NOTE}\n"));
    }
    for c in &v.classes {
        if let Some(d) = &c.distribution {
            out.push('\n');
            out.push_str(&distribution_text(c, d));
        }
    }
    let d = &v.db_time;
    out.push('\n');
    match (d.db_time_s, d.io_wait_pct_of_db_time, d.projected_db_time_s) {
        (Some(db), Some(pct), Some(proj)) => {
            out.push_str(&format!(
                "DB time {:.0} s, of which {:.0} s ({pct:.1}%) waiting on the replayed reads.\n",
                db, d.io_wait_s
            ));
            out.push_str(&format!(
                "With the measured latencies it would have been {:.0} s ({}).\n",
                proj,
                d.speedup.map_or("-".into(), |s| format!("{s:.2}x"))
            ));
            if let Some(bound) = d.speedup_bound {
                out.push_str(&format!(
                    "Storage with no latency at all would leave {:.0} s: at most {bound:.2}x.\n",
                    db - d.io_wait_s
                ));
            }
            out.push_str(
                "If you hope for a 10x improvement, I/O wait had better be a large share of DB time.\n",
            );
        }
        _ => out.push_str(
            "The report gives no DB time or no read waits: the DB time question cannot be answered.\n",
        ),
    }
    out
}

/// The database writer's `db file parallel write` is one wait per batch.
const BATCH_NOTE: &str = "The write classes are judged against db file parallel write: one wait of the database writer for a whole batch of writes, where the run times each write. Their ratio is a rough guide, not a like-for-like figure.";

fn judged_by_batches(c: &ClassVerdict) -> bool {
    c.awr_event
        .as_deref()
        .is_some_and(|e| e.contains("db file parallel write"))
}

/// `<8us 0.3 0.0`: the report's buckets and the run's, one per line.
fn distribution_text(c: &ClassVerdict, d: &LatencyDistribution) -> String {
    let mut out = format!(
        "Latency distribution of {}: {} (from {})\n",
        c.description,
        d.events.join(" + "),
        d.tables.join(", ")
    );
    out.push_str(&format!(
        "  {:<10} {:>9} {:>9} {:>9} {:>9}\n",
        "bucket", "AWR %", "run %", "AWR cum%", "run cum%"
    ));
    let (mut awr_cum, mut run_cum) = (0.0, 0.0);
    for b in &d.buckets {
        awr_cum += b.awr_pct;
        let run = b.run_pct.map(|r| {
            run_cum += r;
            (r, run_cum)
        });
        out.push_str(&format!(
            "  {:<10} {:>9.1} {:>9} {:>9.1} {:>9}\n",
            b.label,
            b.awr_pct,
            run.map_or("-".into(), |(r, _)| format!("{r:.1}")),
            awr_cum,
            run.map_or("-".into(), |(_, c)| format!("{c:.1}")),
        ));
    }
    out
}

/// The verdict as one self-contained HTML page (`verdict.html`): the same
/// table and DB time lines as [`verdict_text`], and the parameter file run.
pub fn verdict_html(v: &Verdict) -> String {
    use cairn_kit_report::document::{self, Align, Block, Table};
    let mut t = Table::new(
        None,
        &[
            ("Class", Align::Left),
            ("Size", Align::Right),
            ("AWR IO/s", Align::Right),
            ("Target IO/s", Align::Right),
            ("Run IO/s", Align::Right),
            ("AWR avg", Align::Right),
            ("Run avg", Align::Right),
            ("Run p50", Align::Right),
            ("Run p99", Align::Right),
            ("Run p99.9", Align::Right),
            ("Run/AWR", Align::Right),
            ("AWR event", Align::Left),
        ],
    );
    for c in &v.classes {
        t.push(vec![
            c.description.clone(),
            size(c.size_bytes),
            format!("{:.1}", c.awr_rate_per_s),
            format!("{:.1}", c.target_rate_per_s),
            format!("{:.1}", c.measured_rate_per_s),
            c.awr_avg_us.map_or("-".into(), us),
            ran(c, c.measured_avg_us),
            ran(c, c.measured_p50_us),
            ran(c, c.measured_p99_us),
            ran(c, c.measured_p999_us),
            c.latency_ratio.map_or("-".into(), |r| format!("{r:.2}")),
            c.awr_event.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    let text = verdict_text(v);
    let db_lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("DB time") && !l.starts_with("The report gives"))
        .collect();
    let mut blocks = vec![
        Block::Title(format!("AWR replay of {}", v.source)),
        Block::Fields(vec![
            ("Report".into(), v.source.clone()),
            ("Scale".into(), format!("{}", v.derivation.scale)),
            (
                "Block size".into(),
                format!(
                    "{} ({})",
                    size(v.derivation.block_size_bytes),
                    v.derivation.block_size_from
                ),
            ),
        ]),
    ];
    if !v.problems.is_empty() {
        blocks.push(Block::Alert(format!(
            "The run did not complete: {}. The figures are what was measured before that.",
            v.problems.join("; ")
        )));
    }
    blocks.extend([
        Block::Heading("Each class: the report's rate and latency, and the run's".into()),
        Block::Table(t),
    ]);
    if v.classes
        .iter()
        .any(|c| judged_by_batches(c) && c.latency_ratio.is_some())
    {
        blocks.push(Block::Note(BATCH_NOTE.into()));
    }
    blocks.push(Block::Heading("DB time".into()));
    for l in db_lines {
        blocks.push(Block::Note(l.to_string()));
    }
    distribution_blocks(v, &mut blocks);
    for n in &v.derivation.notes {
        blocks.push(Block::Note(n.clone()));
    }
    blocks.push(Block::Verbatim {
        title: "The parameter file that was run".into(),
        text: v.parameter_file.clone(),
    });
    cairn_kit_report::html::page(
        &format!("AWR replay of {}", v.source),
        &document::html(&blocks),
        "cairn awr replay; every figure is in verdict.json.",
    )
}

/// Each class's latency distribution: a chart of the report's buckets and
/// the run's side by side, and the table.
fn distribution_blocks(v: &Verdict, blocks: &mut Vec<cairn_kit_report::document::Block>) {
    use cairn_kit_report::chart::{palette, BucketBarChart};
    use cairn_kit_report::document::{Align, Block, Table};
    let with: Vec<(&ClassVerdict, &LatencyDistribution)> = v
        .classes
        .iter()
        .filter_map(|c| c.distribution.as_ref().map(|d| (c, d)))
        .collect();
    if with.is_empty() {
        return;
    }
    blocks.push(Block::Heading(
        "Latency distribution: the report's histogram buckets and the run's".into(),
    ));
    for (k, (c, d)) in with.into_iter().enumerate() {
        let chart = BucketBarChart {
            id: format!("distribution-{k}"),
            kind: "awr-distribution",
            title: format!("{}: {}", c.description, d.events.join(" + ")),
            y_label: "% of waits / I/Os",
            buckets: d.buckets.iter().map(|b| b.label.clone()).collect(),
            groups: vec![
                (
                    "AWR".into(),
                    palette::AWR,
                    d.buckets.iter().map(|b| Some(b.awr_pct)).collect(),
                ),
                (
                    "run".into(),
                    palette::RUN,
                    d.buckets.iter().map(|b| b.run_pct).collect(),
                ),
            ],
        };
        blocks.push(Block::Chart(chart.svg()));
        let mut t = Table::new(
            Some(&format!("{} (from {})", c.description, d.tables.join(", "))),
            &[
                ("Bucket", Align::Left),
                ("AWR %", Align::Right),
                ("Run %", Align::Right),
            ],
        );
        for b in &d.buckets {
            t.push(vec![
                b.label.clone(),
                format!("{:.1}", b.awr_pct),
                b.run_pct.map_or("-".into(), |r| format!("{r:.1}")),
            ]);
        }
        blocks.push(Block::Table(t));
    }
}

/// A measured latency, or `-` for a class that did no I/O.
fn ran(c: &ClassVerdict, v: f64) -> String {
    if c.measured_rate_per_s > 0.0 {
        us(v)
    } else {
        "-".into()
    }
}

fn us(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2}ms", v / 1000.0)
    } else {
        format!("{v:.0}us")
    }
}

fn size(b: u64) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{}m", b >> 20)
    } else if b.is_multiple_of(1024) {
        format!("{}k", b >> 10)
    } else if b > 1024 {
        format!("{:.1}k", b as f64 / 1024.0)
    } else {
        b.to_string()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::{EventLine, Format};

    fn ev(name: &str, waits: f64, time_s: f64, printed_avg_us: f64) -> EventLine {
        EventLine {
            event: name.into(),
            waits: Some(waits),
            total_wait_s: Some(time_s),
            avg_wait_us: Some(printed_avg_us),
            pct_db_time: None,
            wait_class: Some("User I/O".into()),
        }
    }

    fn verdict(kind: ClassKind, measured_us: f64, rate: f64) -> ClassVerdict {
        ClassVerdict {
            class: kind,
            description: kind.describe().into(),
            size_bytes: 8192,
            awr_rate_per_s: 1.0,
            target_rate_per_s: 1.0,
            measured_rate_per_s: rate,
            awr_event: None,
            awr_avg_us: None,
            measured_avg_us: measured_us,
            measured_p50_us: measured_us,
            measured_p99_us: measured_us,
            measured_p999_us: measured_us,
            latency_ratio: None,
            distribution: None,
        }
    }

    #[test]
    fn the_awr_latency_is_time_over_waits_not_the_rounded_printed_average() {
        let mut r = AwrReport::empty("t", Format::AwrHtml);
        // 7,812 s over 12,402,118 waits = 630 µs; 11g prints "1" (ms).
        r.foreground_events.push(ev(
            "db file sequential read",
            12_402_118.0,
            7_812.0,
            1_000.0,
        ));
        let (name, avg) = awr_latency(&r, ClassKind::RandomRead);
        assert_eq!(name.as_deref(), Some("db file sequential read"));
        assert!((avg.unwrap() - 629.89).abs() < 0.01, "{avg:?}");
    }

    #[test]
    fn a_class_with_several_events_is_weighted_by_their_waits() {
        let mut r = AwrReport::empty("t", Format::AwrText);
        r.foreground_events
            .push(ev("db file scattered read", 1_000.0, 1.0, 1_000.0));
        r.foreground_events
            .push(ev("direct path read", 3_000.0, 9.0, 3_000.0));
        let (name, avg) = awr_latency(&r, ClassKind::SequentialRead);
        assert_eq!(
            name.as_deref(),
            Some("db file scattered read + direct path read")
        );
        assert!((avg.unwrap() - 2_500.0).abs() < 1e-9);
    }

    #[test]
    fn background_waits_are_not_db_time_and_idle_classes_still_count_in_the_share() {
        let mut r = AwrReport::empty("t", Format::AwrText);
        r.header.db_time_min = Some(100.0); // 6,000 s
        r.foreground_events
            .push(ev("db file sequential read", 1_000_000.0, 1_000.0, 1_000.0));
        r.foreground_events
            .push(ev("direct path read", 10_000.0, 500.0, 50_000.0));
        // A background direct path read must not be counted (it is not DB time).
        r.background_events
            .push(ev("direct path read", 90_000.0, 2_700.0, 30_000.0));
        let classes = [
            verdict(ClassKind::RandomRead, 500.0, 10.0),
            // The multiblock reads did no I/O in the run.
            verdict(ClassKind::SequentialRead, 0.0, 0.0),
        ];
        let v = db_time_verdict(&r, &classes);
        assert!((v.io_wait_s - 1_500.0).abs() < 1e-9, "{v:?}");
        assert!((v.io_wait_pct_of_db_time.unwrap() - 25.0).abs() < 1e-9);
        // No storage can do better than taking the 1,500 s of I/O away.
        assert!((v.speedup_bound.unwrap() - 6_000.0 / 4_500.0).abs() < 1e-9);
        // Only the measured class is projected: 1,000,000 × (500 − 1,000) µs = −500 s.
        assert!((v.projected_db_time_s.unwrap() - 5_500.0).abs() < 1e-6);
        // A class the derivation left out (its scaled rate too low) still
        // counts in the share: the share is the report's, not the scale's.
        let v = db_time_verdict(&r, &classes[..1]);
        assert!((v.io_wait_s - 1_500.0).abs() < 1e-9, "{v:?}");
        assert!((v.projected_db_time_s.unwrap() - 5_500.0).abs() < 1e-6);
    }

    #[test]
    fn sizes_read_as_a_dba_writes_them() {
        assert_eq!(size(1 << 20), "1m");
        assert_eq!(size(16 << 10), "16k");
        assert_eq!(size(445_952), "435.5k");
        assert_eq!(size(512), "512");
    }

    #[test]
    fn a_parallel_read_is_a_batch_judged_apart_and_projected_by_the_ratio() {
        let mut r = AwrReport::empty("t", Format::AwrText);
        r.header.db_time_min = Some(100.0); // 6,000 s
                                            // Single reads at 1 ms; batches at 4 ms.
        r.foreground_events
            .push(ev("db file sequential read", 1_000_000.0, 1_000.0, 1_000.0));
        r.foreground_events
            .push(ev("db file parallel read", 100_000.0, 400.0, 4_000.0));
        // The class's latency is the single reads', not a mix with batches.
        let (name, avg) = awr_latency(&r, ClassKind::RandomRead);
        assert_eq!(name.as_deref(), Some("db file sequential read"));
        assert!((avg.unwrap() - 1_000.0).abs() < 1e-9);
        // Measured 250 µs: a quarter. Single reads: 1,000 s → 250 s; batches
        // a quarter as long too: 400 s → 100 s.
        let mut c = verdict(ClassKind::RandomRead, 250.0, 10.0);
        c.awr_avg_us = avg;
        c.latency_ratio = Some(0.25);
        let v = db_time_verdict(&r, &[c]);
        assert!((v.io_wait_s - 1_400.0).abs() < 1e-9, "{v:?}");
        assert!((v.projected_db_time_s.unwrap() - (6_000.0 - 750.0 - 300.0)).abs() < 1e-6);
        let batch = v
            .events
            .iter()
            .find(|e| e.0 == "db file parallel read")
            .unwrap();
        assert!((batch.3 - 1_000.0).abs() < 1e-9, "{batch:?}");
    }
}
