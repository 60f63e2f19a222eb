//! The engine: runs a [`Plan`]'s runs against open [`Target`]s and measures.
//!
//! Threads: with io_uring, a few worker threads (by default one fewer than
//! the CPUs, at least one, at most one per sd) each drive one ring for their
//! sds; an sd's `threads=` is the I/Os outstanding on it, as in vdbench. With
//! the sync engine, every one of an sd's threads is an OS thread doing one
//! pread/pwrite at a time — the per-thread synchronous semantics of a
//! database process. Either way the sd's schedule ([`sched`]) is shared, so
//! sequential streams stay sequential and a backlog goes to whichever thread
//! is free.
//!
//! Rates: `iorate=max` is closed loop (each completion frees a thread for the
//! next I/O; latency from submission). A number is open loop: arrivals are
//! scheduled in advance (exponential gaps by default) and latency is measured
//! from each arrival's intended time, so a stall is charged to every I/O it
//! delayed. A curve runs max first, then the requested percentages of what
//! max achieved.
//!
//! Time: a run reads the time and sleeps only through a
//! [`cairn_io::clock::Clock`] — the machine's, or with
//! [`EngineMaker::Simulated`] a simulator's, in which a run of seconds takes
//! no real time and its rates, latencies and intervals are the seed's on any
//! machine (how the tests show the schedule's logic; speed is for benchmarks).
//!
//! The collector (the calling thread) closes each interval: it samples the
//! process's CPU and `/proc/diskstats` at the boundary, gathers each worker's
//! statistics for it, and hands the finished [`IntervalRecord`] to the
//! [`Observer`] (the live display).

mod sched;
mod worker;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_io::host::Host;

use crate::model::{timing_problem, Plan, Rate, RunDef, Seek, WdDef, XferSize, RATE_IOPS_MAX};
use crate::pattern::{sd_tag, DataPattern};
use crate::result::{
    BenchResult, CurvePoint, DirectionStats, EngineInfo, ErrorSummary, IntervalRecord,
    IntervalStats, Mixed, RateOutcome, RunRecord, Totals, ValidationOutcome, WorkloadTotals,
    SCHEMA, SCHEMA_VERSION,
};
use crate::target::{resolve_band, Target};

pub use sched::{IoSpec, Next, SdSched, Stream, StreamSpec, Validation, BACKLOG_MAX, BACKLOG_MIN};
use worker::{lock, DirStat, Msg, RunShared, RunTime, Start, Tick, WorkerSd, WorkerSetup};
pub use worker::{EngineFactory, EngineMaker};

/// How long workers may take to set up (open rings, allocate buffers).
const SETUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the collector looks at the interrupt flag while it waits.
const POLL: Duration = Duration::from_millis(100);
/// Bytes in the MB of "MB/s": 2^20, as vdbench and `iostat -m` count them.
const MIB: f64 = 1_048_576.0;
/// A rate is held when at least this share of the scheduled I/Os completed.
const HELD_SHARE: f64 = 0.98;

/// How to run.
pub struct BenchOptions<'a> {
    pub engine: EngineMaker,
    /// Submitting threads for io_uring; `None` = one fewer than the CPUs (at least one).
    pub workers: Option<u32>,
    pub seed: u64,
    pub host: &'a Host,
    /// Set (by a signal handler) to stop: the current run ends at once, the
    /// rest are skipped, and what was measured is still reported.
    pub interrupted: &'a AtomicBool,
    /// Set (by a signal handler) to end the pause between runs (`pause=`)
    /// now; the engine clears it as each pause begins, before it says so.
    /// `None`: every pause lasts its time.
    pub end_pause: Option<&'a AtomicBool>,
}

/// Who watches a bench as it runs (the live display, or nobody).
pub trait Observer {
    fn run_started(&mut self, _run: &RunDef, _target_iops: Option<f64>) {}
    fn interval(&mut self, _run: &RunDef, _record: &IntervalRecord) {}
    fn run_finished(&mut self, _record: &RunRecord) {}
    /// Something worth a line (a curve stopped, a pause).
    fn note(&mut self, _message: &str) {}
}

/// An observer that says nothing.
pub struct Quiet;
impl Observer for Quiet {}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Setup(String),
}

/// Run every run of `plan` on `targets` (one per sd, in the plan's order).
pub fn run_bench(
    plan: &Plan,
    targets: &[Target],
    options: &BenchOptions<'_>,
    observer: &mut dyn Observer,
) -> Result<BenchResult, BenchError> {
    let started_at = cairn_host::utc_now_rfc3339();
    let mut target_infos = Vec::new();
    for t in targets {
        let mut info = t.info();
        let mut seen = BTreeSet::new();
        info.devices = t
            .device_paths()
            .iter()
            .flat_map(|p| cairn_host::devices_for(options.host, p))
            .filter(|d| seen.insert(d.clone()))
            .collect();
        target_infos.push(info);
    }
    let devices: Vec<String> = {
        let mut seen = BTreeSet::new();
        target_infos
            .iter()
            .flat_map(|t| t.devices.iter().cloned())
            .filter(|d| seen.insert(d.clone()))
            .collect()
    };
    let mut runs: Vec<RunRecord> = Vec::new();
    let mut engine_info = EngineInfo {
        kind: match options.engine {
            EngineMaker::Uring => "uring",
            EngineMaker::Sync => "sync",
            EngineMaker::Custom(_) => "custom",
            EngineMaker::Simulated(..) => "simulated",
        }
        .into(),
        flags: Vec::new(),
        workers: 0,
    };
    // Curve id → the max its calibration run reached; curves stopped by stopcurve.
    let mut curve_max: BTreeMap<usize, f64> = BTreeMap::new();
    let mut curve_stopped: BTreeSet<usize> = BTreeSet::new();
    let mut stop_all: Option<String> = None;
    // Validation state per sd (by index), kept for the whole bench: a block
    // one run writes is checked by the reads of every later run, as in vdbench.
    let mut validations: BTreeMap<usize, Validation> = BTreeMap::new();
    for (n, run) in plan.runs.iter().enumerate() {
        // A stand-in rate for curve points: only the checks matter here.
        let rate = match run.rate {
            Rate::Max => None,
            Rate::Fixed(r) => Some(r),
            Rate::CurvePct(_) => Some(1.0),
        };
        prepare_run(plan, run, n, targets, rate, options, &mut BTreeMap::new())?;
    }
    for (n, run) in plan.runs.iter().enumerate() {
        if options.interrupted.load(Ordering::SeqCst) || stop_all.is_some() {
            break;
        }
        let target_iops = match run.rate {
            Rate::Max => None,
            Rate::Fixed(r) => Some(r),
            Rate::CurvePct(p) => {
                let Some(curve) = run.curve else {
                    return Err(BenchError::Setup(format!(
                        "rd={}: a curve point outside a curve",
                        run.rd
                    )));
                };
                if curve_stopped.contains(&curve.id) {
                    continue;
                }
                let max = curve_max.get(&curve.id).copied().unwrap_or(0.0);
                if max <= 0.0 {
                    observer.note(&format!(
                        "rd={}: the curve's max run did no I/O; skipping its {p}% point",
                        run.rd
                    ));
                    continue;
                }
                Some(max * p / 100.0)
            }
        };
        observer.run_started(run, target_iops);
        let (record, info) = run_one(
            plan,
            run,
            n,
            targets,
            target_iops,
            options,
            &devices,
            &mut validations,
            observer,
        )?;
        engine_info.flags = info.flags;
        engine_info.workers = engine_info.workers.max(info.workers);
        if let Some(curve) = run.curve {
            if run.rate == Rate::Max {
                curve_max.insert(curve.id, record.totals.all.all.iops);
            }
            if let Some(stop_ms) = curve.stop_ms {
                let mean_ms = record.totals.all.all.latency.mean_us / 1000.0;
                if mean_ms > stop_ms {
                    curve_stopped.insert(curve.id);
                    observer.note(&format!(
                        "rd={}: mean response {mean_ms:.3} ms exceeds stopcurve={stop_ms} ms; the rest of the curve is skipped",
                        run.rd
                    ));
                }
            }
        }
        if let Some(reason) = &record.ended_early {
            if reason.starts_with("stopped after") || reason.starts_with("interrupted") {
                stop_all = Some(reason.clone());
            }
        }
        observer.run_finished(&record);
        runs.push(record);
        if !run.pause.is_zero() && n + 1 < plan.runs.len() {
            // Cleared before the pause is announced: a request seen after
            // the announcement ends this pause, one from before does not.
            if let Some(end) = options.end_pause {
                end.store(false, Ordering::SeqCst);
            }
            observer.note(&format!("pause {} s", run.pause.as_secs_f64()));
            sleep_unless(run.pause, options.interrupted, options.end_pause);
        }
    }
    Ok(BenchResult {
        schema: SCHEMA.into(),
        schema_version: SCHEMA_VERSION,
        tool: cairn_host::tool_info(),
        started_at,
        seed: options.seed,
        engine: engine_info,
        environment: cairn_host::environment(options.host),
        plan: plan.clone(),
        targets: target_infos,
        runs,
    })
}

/// Sleep for `d`, or until `flag` or `end_early` is set.
fn sleep_unless(d: Duration, flag: &AtomicBool, end_early: Option<&AtomicBool>) {
    let end = Instant::now() + d;
    let ended = || end_early.is_some_and(|e| e.load(Ordering::SeqCst));
    while !flag.load(Ordering::SeqCst) && !ended() {
        let now = Instant::now();
        if now >= end {
            break;
        }
        std::thread::sleep((end - now).min(POLL));
    }
}

/// An sd of a run: its index in the plan, schedule, threads, largest transfer,
/// and whether any of its workloads writes.
type SdPlan = (usize, Arc<Mutex<SdSched>>, u32, u64, bool);

struct RunEngineInfo {
    flags: Vec<String>,
    workers: u32,
}

/// One workload of a run, with the run's overrides applied.
struct RunWd {
    def: WdDef,
    rdpct: f64,
    xfer: XferSize,
    seek: Seek,
    /// Open-loop rate of the whole workload, or `None`; closed-loop weight.
    rate: Option<f64>,
    weight: f64,
}

/// Split a run's rate over its workloads: a workload's own `iorate=` stands;
/// `skew=` takes that share of the run's rate; the rest share what is left.
fn wd_rates(run_rate: Option<f64>, wds: &[WdDef]) -> Vec<(Option<f64>, f64)> {
    let fixed: f64 = wds.iter().filter_map(|w| w.iorate).sum();
    let skewed: f64 = wds
        .iter()
        .filter(|w| w.iorate.is_none())
        .filter_map(|w| w.skew_pct)
        .sum();
    let plain = wds
        .iter()
        .filter(|w| w.iorate.is_none() && w.skew_pct.is_none())
        .count()
        .max(1) as f64;
    let plain_weight = ((100.0 - skewed).max(0.0)) / plain;
    wds.iter()
        .map(|w| {
            let weight = w.skew_pct.unwrap_or(plain_weight).max(0.0);
            let rate = match (w.iorate, run_rate) {
                (Some(own), _) => Some(own),
                (None, None) => None,
                (None, Some(r)) => Some(match w.skew_pct {
                    Some(s) => r * s / 100.0,
                    // What the fixed rates and the skewed shares leave.
                    None => (r - fixed - r * skewed / 100.0).max(0.0) / plain,
                }),
            };
            (rate, weight)
        })
        .collect()
}

/// The validation unit of an sd for the whole bench: the largest size that
/// divides every transfer any run makes on it (and its `align=`), so the keys
/// one run leaves are checked at the same granularity by the next.
fn bench_validation_unit(plan: &Plan, sd: &crate::model::SdDef, sector: u64) -> u64 {
    let mut unit = 0;
    for run in &plan.runs {
        let on_sd = run
            .wds
            .iter()
            .filter_map(|name| plan.wd(name))
            .filter(|wd| wd.sds.contains(&sd.name));
        for wd in on_sd {
            match run.xfersize.as_ref().unwrap_or(&wd.xfersize) {
                XferSize::Fixed(b) => unit = gcd(unit, *b),
                XferSize::Distribution(d) => {
                    for (b, _) in d {
                        unit = gcd(unit, *b);
                    }
                }
            }
        }
    }
    if let Some(a) = sd.align_bytes {
        unit = gcd(unit, a);
    }
    if unit == 0 {
        sector
    } else {
        unit
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[allow(clippy::too_many_arguments)]
/// A run made ready: its workloads and each sd's schedule.
struct Prepared {
    wds: Vec<RunWd>,
    scheds: Vec<SdPlan>,
    threads_by_sd: BTreeMap<String, u32>,
    validate: bool,
    seed: u64,
    pattern: Arc<DataPattern>,
}

/// Check and build a run's schedules. Every run is prepared once before the
/// first one starts, so a bad run late in a plan fails the bench before any
/// I/O rather than after an hour of measurements.
fn prepare_run(
    plan: &Plan,
    run: &RunDef,
    run_index: usize,
    targets: &[Target],
    target_iops: Option<f64>,
    options: &BenchOptions<'_>,
    validations: &mut BTreeMap<usize, Validation>,
) -> Result<Prepared, BenchError> {
    let setup_error = |m: String| BenchError::Setup(m);
    // The run's workloads, overrides applied.
    let defs: Vec<WdDef> = run
        .wds
        .iter()
        .map(|name| {
            plan.wd(name)
                .cloned()
                .ok_or_else(|| setup_error(format!("rd={}: no wd={name}", run.rd)))
        })
        .collect::<Result<_, _>>()?;
    // The parsers refuse such timings with the user's words; a plan built
    // otherwise is held to the same limits here, before any I/O.
    if let Some(problem) = timing_problem(
        run.elapsed,
        run.interval,
        run.warmup,
        ["elapsed", "interval", "warmup"],
    ) {
        return Err(setup_error(format!("rd={}: {problem}", run.rd)));
    }
    let rates = wd_rates(target_iops, &defs);
    // The parsers refuse such rates; a plan built otherwise (an AWR replay's
    // --scale) is held to the same limit here, before any I/O.
    let run_rate = target_iops.map(|r| (run.rd.clone(), r));
    let stream_rates = defs
        .iter()
        .zip(&rates)
        .filter_map(|(def, (rate, _))| rate.map(|r| (format!("{}: wd={}", run.rd, def.name), r)));
    for (what, r) in run_rate.into_iter().chain(stream_rates) {
        if !(r.is_finite() && r >= 0.0) || r > RATE_IOPS_MAX {
            return Err(setup_error(format!(
                "rd={what}: a rate of {r:e} I/Os per second cannot be scheduled; expected at most {} (one arrival per nanosecond)",
                RATE_IOPS_MAX as u64
            )));
        }
    }
    let wds: Vec<RunWd> = defs
        .into_iter()
        .zip(rates)
        .map(|(def, (rate, weight))| RunWd {
            rdpct: run.rdpct.unwrap_or(def.rdpct),
            xfer: run.xfersize.clone().unwrap_or_else(|| def.xfersize.clone()),
            seek: run.seek.unwrap_or(def.seek),
            rate,
            weight,
            def,
        })
        .collect();
    // The sds the run touches, in plan order.
    let sd_indices: Vec<usize> = plan
        .sds
        .iter()
        .enumerate()
        .filter(|(_, sd)| wds.iter().any(|w| w.def.sds.contains(&sd.name)))
        .map(|(i, _)| i)
        .collect();
    let validate = plan.general.validate;
    let seed = options.seed ^ (run_index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let pattern = Arc::new(DataPattern::new(
        plan.general.compratio,
        plan.general.dedupratio,
        plan.general.dedupunit_bytes,
        options.seed,
    ));
    // Per sd the run touches: (index in the plan, schedule, threads, largest transfer, writes).
    let mut scheds: Vec<SdPlan> = Vec::new();
    let mut threads_by_sd = BTreeMap::new();
    for &i in &sd_indices {
        let target = targets
            .get(i)
            .ok_or_else(|| setup_error(format!("sd={}: not opened", plan.sds[i].name)))?;
        let sd = &target.sd;
        let sector = target.sector_bytes();
        let len = target.end_bytes - target.start_bytes;
        let mut unit = sector;
        let mut first = true;
        let mut max_len = sector;
        let mut writes = false;
        let on_sd: Vec<&RunWd> = wds
            .iter()
            .filter(|w| w.def.sds.contains(&sd.name))
            .collect();
        for w in &on_sd {
            let sizes: Vec<u64> = match &w.xfer {
                XferSize::Fixed(b) => vec![*b],
                XferSize::Distribution(d) => d.iter().map(|(b, _)| *b).collect(),
            };
            for b in sizes {
                if b == 0 || !b.is_multiple_of(sector) {
                    return Err(setup_error(format!(
                        "wd={}: xfersize {b} is not a multiple of the {sector}-byte logical sector of sd={} ({}); direct I/O needs whole sectors",
                        w.def.name,
                        sd.name,
                        sd.lun.display()
                    )));
                }
                let dedupunit = plan.general.dedupunit_bytes;
                if plan.general.dedupratio > 1.0 && (dedupunit == 0 || !b.is_multiple_of(dedupunit))
                {
                    return Err(setup_error(format!(
                        "wd={}: xfersize {b} is not a multiple of dedupunit={dedupunit}; with dedupratio= every transfer must hold whole dedupe units (give a larger xfersize or a smaller dedupunit)",
                        w.def.name
                    )));
                }
                if b > len {
                    return Err(setup_error(format!(
                        "wd={}: xfersize {b} is larger than the {len} bytes sd={} offers",
                        w.def.name, sd.name
                    )));
                }
                unit = if first { b } else { gcd(unit, b) };
                first = false;
                max_len = max_len.max(b);
            }
            if let Some(a) = sd.align_bytes {
                unit = gcd(unit, a);
            }
            writes |= w.rdpct < 100.0;
        }
        if validate {
            unit = gcd(unit, bench_validation_unit(plan, sd, sector));
        }
        let threads = run.threads.unwrap_or(sd.threads).max(1);
        threads_by_sd.insert(sd.name.clone(), threads);
        let mut streams = Vec::new();
        for (k, w) in wds.iter().enumerate() {
            if !w.def.sds.contains(&sd.name) {
                continue;
            }
            let n_sds = w.def.sds.len().max(1) as f64;
            let (band, hot) = match (&w.def.hotband, &w.def.range) {
                (Some(b), _) => (Some(b), true),
                (None, Some(b)) => (Some(b), false),
                (None, None) => (None, false),
            };
            let (mut lo, hi) = match band {
                Some(b) => {
                    let (a, e) = resolve_band(b, len, sector).map_err(|m| {
                        setup_error(format!("wd={}: on sd={}: {m}", w.def.name, sd.name))
                    })?;
                    if !hot && e > len {
                        return Err(setup_error(format!(
                            "wd={}: range= may not wrap past the end of sd={} (only hotband= may)",
                            w.def.name, sd.name
                        )));
                    }
                    (target.start_bytes + a, target.start_bytes + e)
                }
                None => (target.start_bytes, target.end_bytes),
            };
            if validate {
                lo = lo.div_ceil(unit) * unit;
            }
            if hi <= lo || hi - lo < w.xfer.max_bytes() {
                return Err(setup_error(format!(
                    "wd={}: its range on sd={} is smaller than one transfer",
                    w.def.name, sd.name
                )));
            }
            streams.push(Stream::new(StreamSpec {
                wd: k,
                rdpct: w.rdpct,
                xfer: w.xfer.clone(),
                seek: w.seek,
                align: sd.align_bytes,
                lo,
                hi,
                hot,
                priority: w.def.priority.unwrap_or(u32::MAX),
                weight: w.weight / n_sds,
                rate: w.rate.map(|r| r / n_sds),
                arrival: run.arrival,
                seed: seed ^ ((i as u64) << 32 | k as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93),
            }));
        }
        let validation = validate.then(|| match validations.remove(&i) {
            Some(mut kept) if kept.unit == unit => {
                kept.settle();
                kept
            }
            _ => Validation::new(unit, target.end_bytes, sd_tag(&sd.name)),
        });
        let sched = SdSched::new(streams, target.end_bytes, validation, seed ^ i as u64)
            .with_start(target.start_bytes);
        scheds.push((i, Arc::new(Mutex::new(sched)), threads, max_len, writes));
    }
    Ok(Prepared {
        wds,
        scheds,
        threads_by_sd,
        validate,
        seed,
        pattern,
    })
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    plan: &Plan,
    run: &RunDef,
    run_index: usize,
    targets: &[Target],
    target_iops: Option<f64>,
    options: &BenchOptions<'_>,
    devices: &[String],
    validations: &mut BTreeMap<usize, Validation>,
    observer: &mut dyn Observer,
) -> Result<(RunRecord, RunEngineInfo), BenchError> {
    let setup_error = |m: String| BenchError::Setup(m);
    let Prepared {
        wds,
        scheds,
        threads_by_sd,
        validate,
        seed,
        pattern,
    } = prepare_run(
        plan,
        run,
        run_index,
        targets,
        target_iops,
        options,
        validations,
    )?;

    // Workers and their sds.
    let sync = matches!(options.engine, EngineMaker::Sync);
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mut layouts: Vec<Vec<(usize, u32)>> = Vec::new(); // per worker: (index in scheds, slots)
    if sync {
        for (k, (_, _, threads, _, _)) in scheds.iter().enumerate() {
            for _ in 0..*threads {
                layouts.push(vec![(k, 1)]);
            }
        }
    } else {
        let n = match options.engine {
            // Simulated time has one writer: one worker drives every sd.
            EngineMaker::Simulated(..) => 1,
            _ => options
                .workers
                .map(|w| w as usize)
                .unwrap_or(cpus.saturating_sub(1).max(1))
                .clamp(1, scheds.len().max(1)),
        };
        layouts = vec![Vec::new(); n];
        for (k, (_, _, threads, _, _)) in scheds.iter().enumerate() {
            layouts[k % n].push((k, *threads));
        }
    }

    let interval_ns = run.interval.as_nanos().max(1) as u64;
    let end_ns = run.elapsed.as_nanos() as u64;
    let warmup_ns = (run.warmup.as_nanos() as u64).div_ceil(interval_ns) * interval_ns;
    let shared = Arc::new(RunShared {
        stop: AtomicBool::new(false),
        errors: AtomicU64::new(0),
        error_limit: plan.general.data_errors.max(1),
        stop_reason: Mutex::new(None),
    });
    let (tx, rx) = mpsc::channel::<Msg>();
    let n_workers = layouts.len();
    let clock = options.engine.clock();

    let outcome = std::thread::scope(|scope| -> Result<(RunRecord, Vec<String>), BenchError> {
        // Declared in the scope: on any early return the senders drop before
        // the scope joins, so a worker waiting for its start sees the channel
        // close and ends instead of waiting forever.
        let mut starts = Vec::new();
        for (id, layout) in layouts.iter().enumerate() {
            let mut sds = Vec::new();
            for &(k, slots) in layout {
                let (i, sched, _, max_len, writes) = &scheds[k];
                let target = &targets[*i];
                let backing = match options.engine {
                    EngineMaker::Custom(_) | EngineMaker::Simulated(..) => None,
                    _ => Some(target.share().map_err(|e| {
                        setup_error(format!(
                            "sd={}: cannot share its device: {e}",
                            target.sd.name
                        ))
                    })?),
                };
                sds.push(WorkerSd {
                    name: target.sd.name.clone(),
                    lun: target.sd.lun.display().to_string(),
                    sched: sched.clone(),
                    slots,
                    backing,
                    geometry: target.geometry().clone(),
                    offset_bytes: target.sd.offset_bytes,
                    sync_writes: target.sd.openflags.sync_writes,
                    max_len: *max_len,
                    writes: *writes,
                    validate,
                });
            }
            let (start_tx, start_rx) = mpsc::channel();
            starts.push(start_tx);
            let setup = WorkerSetup {
                id,
                sds,
                maker: options.engine.clone(),
                pattern: pattern.clone(),
                wds: wds.len(),
                interval_ns,
                end_ns,
                shared: shared.clone(),
                tx: tx.clone(),
                start: start_rx,
                seed: seed ^ (id as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F),
                clock: clock.clone(),
            };
            std::thread::Builder::new()
                .name(format!("cairn-io-{id}"))
                .spawn_scoped(scope, move || worker::run(setup))
                .map_err(|e| setup_error(format!("cannot start an I/O thread: {e}")))?;
        }
        drop(tx);
        // Wait for every worker to be ready.
        let mut ready = 0;
        let mut failure = None;
        let deadline = Instant::now() + SETUP_TIMEOUT;
        let mut failed = 0;
        let mut ring_flags = Vec::new();
        while ready + failed < n_workers {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(Msg::Ready { flags }) => {
                    ready += 1;
                    ring_flags = flags;
                }
                Ok(Msg::Failed { error, .. }) => {
                    failure.get_or_insert(error);
                    failed += 1;
                }
                Ok(_) => {}
                Err(_) => {
                    failure.get_or_insert("the I/O threads did not start within a minute".into());
                    break;
                }
            }
        }
        if let Some(error) = failure {
            for s in &starts {
                s.send(Start::Abort).ok();
            }
            return Err(setup_error(error));
        }
        let mut collector = Collector::new(
            run,
            &wds,
            scheds.iter().map(|s| s.1.clone()).collect(),
            devices,
            options.host,
            warmup_ns,
        );
        collector.bounds_us = plan.general.histogram_bounds_us.clone();
        let t0 = RunTime {
            clock: clock.clone(),
            origin_ns: clock.now_ns(),
        };
        let origin_ns = t0.origin_ns;
        let mut collector = collector.start(t0);
        for s in &starts {
            s.send(Start::Go(origin_ns)).ok();
        }
        let record = collector.collect(
            &rx,
            n_workers,
            interval_ns,
            end_ns,
            &shared,
            options.interrupted,
            observer,
        );
        Ok((record, ring_flags))
    });
    for (i, sched, ..) in &scheds {
        if let Some(v) = lock(sched).validation.take() {
            validations.insert(*i, v);
        }
    }
    let (mut record, flags) = outcome?;
    record.rd = run.rd.clone();
    record.label = run.label.clone();
    record.rate = run.rate;
    record.target_iops = target_iops;
    record.threads = threads_by_sd;
    record.curve = run.curve.map(|c| CurvePoint {
        id: c.id,
        pct: match run.rate {
            Rate::CurvePct(p) => Some(p),
            _ => None,
        },
    });
    Ok((
        record,
        RunEngineInfo {
            flags,
            workers: n_workers as u32,
        },
    ))
}

/// Statistics of one interval, merged over workers: per workload, [read, write].
#[derive(Clone)]
struct Merged {
    stats: Vec<[DirStat; 2]>,
}

impl Merged {
    fn new(wds: usize) -> Self {
        Self {
            stats: (0..wds).map(|_| Default::default()).collect(),
        }
    }

    fn add(&mut self, stats: &[[DirStat; 2]]) {
        for (mine, theirs) in self.stats.iter_mut().zip(stats) {
            mine[0].add(&theirs[0]);
            mine[1].add(&theirs[1]);
        }
    }

    fn all(&self) -> [DirStat; 2] {
        let mut out: [DirStat; 2] = Default::default();
        for s in &self.stats {
            out[0].add(&s[0]);
            out[1].add(&s[1]);
        }
        out
    }
}

struct Collector<'a> {
    run: &'a RunDef,
    wd_names: Vec<String>,
    wd_sds: Vec<Vec<String>>,
    wd_targets: Vec<Option<f64>>,
    wd_priority: Vec<Option<u32>>,
    scheds: Vec<Arc<Mutex<SdSched>>>,
    devices: &'a [String],
    host: &'a Host,
    warmup_ns: u64,
    bounds_us: Vec<u64>,
}

struct Running<'a> {
    c: Collector<'a>,
    t0: RunTime,
    cpu_prev: cairn_host::CpuSample,
    disk_prev: cairn_host::DiskStatsSnapshot,
    cpu_measured_from: cairn_host::CpuSample,
    disk_measured_from: cairn_host::DiskStatsSnapshot,
}

impl<'a> Collector<'a> {
    fn new(
        run: &'a RunDef,
        wds: &[RunWd],
        scheds: Vec<Arc<Mutex<SdSched>>>,
        devices: &'a [String],
        host: &'a Host,
        warmup_ns: u64,
    ) -> Self {
        Self {
            run,
            wd_names: wds.iter().map(|w| w.def.name.clone()).collect(),
            wd_sds: wds.iter().map(|w| w.def.sds.clone()).collect(),
            wd_targets: wds.iter().map(|w| w.rate).collect(),
            wd_priority: wds.iter().map(|w| w.def.priority).collect(),
            scheds,
            devices,
            host,
            warmup_ns,
            bounds_us: Vec::new(),
        }
    }

    fn start(self, t0: RunTime) -> Running<'a> {
        let cpu = cairn_host::cpu_sample(self.host);
        let disk = cairn_host::diskstats(self.host, self.devices);
        Running {
            c: self,
            t0,
            cpu_prev: cpu,
            disk_prev: disk.clone(),
            cpu_measured_from: cpu,
            disk_measured_from: disk,
        }
    }
}

impl Running<'_> {
    #[allow(clippy::too_many_arguments)]
    fn collect(
        &mut self,
        rx: &mpsc::Receiver<Msg>,
        n_workers: usize,
        interval_ns: u64,
        end_ns: u64,
        shared: &RunShared,
        interrupted: &AtomicBool,
        observer: &mut dyn Observer,
    ) -> RunRecord {
        let wds = self.c.wd_names.len();
        let mut pending: BTreeMap<u32, Vec<Tick>> = BTreeMap::new();
        let mut done: Vec<Option<(u32, Option<String>)>> = vec![None; n_workers];
        let mut intervals = Vec::new();
        let mut totals = Merged::new(wds);
        let mut measured_from_ns = 0u64;
        let mut last_end_ns = 0u64;
        let mut errors = ErrorSummary::default();
        let mut validation = ValidationOutcome::default();
        // The backlog peak is sampled at interval boundaries, summed over the sds.
        let (mut scheduled, mut not_issued, mut backlog_max) = (0u64, 0u64, 0u64);
        let mut completed_measured = 0u64;
        let mut scheduled_measured = 0u64;
        let mut interrupted_seen = false;
        let mut prev_boundary = 0u64;
        let handle = |msg: Msg,
                      pending: &mut BTreeMap<u32, Vec<Tick>>,
                      done: &mut Vec<Option<(u32, Option<String>)>>| match msg
        {
            Msg::Tick(t) => pending.entry(t.index).or_default().push(*t),
            Msg::Done {
                worker,
                last_index,
                reason,
            } => done[worker] = Some((last_index, reason)),
            _ => {}
        };
        for index in 1u32.. {
            let boundary = (u64::from(index) * interval_ns).min(end_ns);
            // Until the boundary (or until every worker has finished).
            loop {
                let now = self.t0.now_ns();
                if now >= boundary || done.iter().all(Option::is_some) {
                    break;
                }
                if interrupted.load(Ordering::SeqCst) && !interrupted_seen {
                    interrupted_seen = true;
                    shared.stop_with("interrupted".into());
                }
                let wait = Duration::from_nanos(boundary - now).min(POLL);
                match rx.recv_timeout(wait) {
                    Ok(msg) => handle(msg, &mut pending, &mut done),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            let cpu = cairn_host::cpu_sample(self.c.host);
            let disk = cairn_host::diskstats(self.c.host, self.c.devices);
            let backlog: u64 = self.c.scheds.iter().map(|s| lock(s).backlog()).sum();
            backlog_max = backlog_max.max(backlog);
            // Every worker still running must report this interval.
            loop {
                let missing = (0..n_workers).any(|w| {
                    let has = pending
                        .get(&index)
                        .is_some_and(|v| v.iter().any(|t| t.worker == w));
                    let finished_before = done[w].as_ref().is_some_and(|(last, _)| *last < index);
                    !has && !finished_before
                });
                if !missing {
                    break;
                }
                match rx.recv_timeout(POLL) {
                    Ok(msg) => handle(msg, &mut pending, &mut done),
                    Err(RecvTimeoutError::Timeout) => {
                        if interrupted.load(Ordering::SeqCst) && !interrupted_seen {
                            interrupted_seen = true;
                            shared.stop_with("interrupted".into());
                        }
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            let ticks = pending.remove(&index).unwrap_or_default();
            if ticks.is_empty() {
                break;
            }
            let end = ticks
                .iter()
                .map(|t| t.end_ns)
                .max()
                .unwrap_or(boundary)
                .max(prev_boundary + 1);
            let seconds = (end - prev_boundary) as f64 / 1e9;
            let warmup = boundary <= self.c.warmup_ns && boundary < end_ns;
            let mut merged = Merged::new(wds);
            for t in &ticks {
                merged.add(&t.stats);
                scheduled += t.scheduled;
                // A start-up transient in the warm-up does not fail the run.
                if !warmup {
                    not_issued += t.not_issued;
                }
                errors.count += t.errors;
                for e in &t.first_errors {
                    if errors.first.len() < 10 {
                        errors.first.push(e.clone());
                    }
                }
                validation.units_checked += t.checked;
                validation.units_written += t.written;
                validation
                    .errors
                    .extend(t.validation_errors.iter().cloned());
                if !warmup {
                    scheduled_measured += t.scheduled;
                }
            }
            let all = merged.all();
            let stats = interval_stats(&all, seconds, backlog);
            let workloads = self
                .c
                .wd_names
                .iter()
                .zip(&merged.stats)
                .map(|(name, s)| (name.clone(), interval_stats(s, seconds, 0)))
                .collect();
            let record = IntervalRecord {
                index,
                end_s: end as f64 / 1e9,
                seconds,
                warmup,
                all: stats,
                workloads,
                cpu: cairn_host::cpu_interval(&self.cpu_prev, &cpu),
                devices: cairn_host::device_stats(&self.disk_prev, &disk),
            };
            observer.interval(self.c.run, &record);
            intervals.push(record);
            if warmup {
                measured_from_ns = end;
                self.cpu_measured_from = cpu;
                self.disk_measured_from = disk.clone();
            } else {
                totals.add(&merged.stats);
                // Only open-loop workloads have a schedule to keep.
                completed_measured += merged
                    .stats
                    .iter()
                    .zip(&self.c.wd_targets)
                    .filter(|(_, target)| target.is_some())
                    .map(|(s, _)| s[0].ios + s[1].ios)
                    .sum::<u64>();
            }
            self.cpu_prev = cpu;
            self.disk_prev = disk;
            prev_boundary = end;
            last_end_ns = end;
            if done
                .iter()
                .all(|d| d.as_ref().is_some_and(|(last, _)| *last <= index))
            {
                break;
            }
        }
        let measured_s = (last_end_ns.saturating_sub(measured_from_ns)) as f64 / 1e9;
        let cpu_end = self.cpu_prev;
        let disk_end = self.disk_prev.clone();
        let all = totals.all();
        let ios = all[0].ios + all[1].ios;
        let mixed_all = mixed(&all, measured_s, &self.c.bounds_us);
        let workloads: Vec<WorkloadTotals> = (0..wds)
            .map(|k| WorkloadTotals {
                wd: self.c.wd_names[k].clone(),
                sds: self.c.wd_sds[k].clone(),
                target_iops: self.c.wd_targets[k],
                priority: self.c.wd_priority[k],
                stats: mixed(&totals.stats[k], measured_s, &self.c.bounds_us),
            })
            .collect();
        let target = self
            .c
            .wd_targets
            .iter()
            .flatten()
            .copied()
            .reduce(|a, b| a + b);
        // Achieved against the target: the open-loop workloads' I/Os only (a
        // closed-loop workload beside them has no target to meet).
        let achieved = if target.is_some() {
            workloads_open_iops(&workloads, &self.c.wd_targets)
        } else {
            mixed_all.all.iops
        };
        let mut rate_outcome = RateOutcome {
            target_iops: target,
            achieved_iops: achieved,
            held: true,
            not_issued,
            backlog_max,
            backlog_limit: self
                .c
                .scheds
                .iter()
                .map(|s| {
                    lock(s)
                        .streams
                        .iter()
                        .map(|st| st.backlog_limit() as u64)
                        .sum::<u64>()
                })
                .sum(),
            message: None,
        };
        if let Some(t) = target {
            let share = if scheduled_measured == 0 {
                // Nothing was due in the window: held only if nothing was measured either.
                if measured_s > 0.0 && t > 0.0 {
                    0.0
                } else {
                    1.0
                }
            } else {
                completed_measured as f64 / scheduled_measured as f64
            };
            if not_issued > 0 || share < HELD_SHARE {
                rate_outcome.held = false;
                let dropped = if not_issued > 0 {
                    format!(
                        "; {not_issued} I/Os that were due were never issued (the backlog was full — it holds one second of the rate, at most {BACKLOG_MAX} arrivals per stream — or they were still waiting when the run ended)"
                    )
                } else {
                    format!(
                        "; only {:.1}% of the I/Os due completed in the measured window",
                        100.0 * share
                    )
                };
                rate_outcome.message = Some(format!(
                    "target {t:.0} IO/s not held: achieved {achieved:.0} IO/s ({:.1}% of the target){dropped} — the storage, or the sds' threads=, cannot sustain this rate",
                    if t > 0.0 { 100.0 * achieved / t } else { 0.0 }
                ));
            }
        }
        let _ = scheduled;
        let reason = shared
            .stop_reason()
            .or_else(|| done.iter().flatten().find_map(|(_, r)| r.clone()));
        RunRecord {
            rd: String::new(),
            label: String::new(),
            wds: self.c.wd_names.clone(),
            rate: Rate::Max,
            target_iops: None,
            arrival: format!("{:?}", self.c.run.arrival).to_lowercase(),
            threads: BTreeMap::new(),
            interval_s: interval_ns as f64 / 1e9,
            warmup_s: self.c.warmup_ns as f64 / 1e9,
            elapsed_s: end_ns as f64 / 1e9,
            measured_s,
            curve: None,
            intervals,
            totals: Totals {
                all: mixed_all,
                workloads,
            },
            cpu: cairn_host::cpu_summary(&self.cpu_measured_from, &cpu_end, ios),
            devices: cairn_host::device_stats(&self.disk_measured_from, &disk_end),
            rate_outcome,
            validation: ValidationOutcome {
                enabled: !self.c.scheds.is_empty()
                    && self.c.scheds.iter().any(|s| lock(s).validation.is_some()),
                ..validation
            },
            errors,
            ended_early: reason,
        }
    }
}

/// I/Os per second of the workloads that have an open-loop target.
fn workloads_open_iops(workloads: &[WorkloadTotals], targets: &[Option<f64>]) -> f64 {
    workloads
        .iter()
        .zip(targets)
        .filter(|(_, t)| t.is_some())
        .map(|(w, _)| w.stats.all.iops)
        .sum()
}

fn interval_stats(s: &[DirStat; 2], seconds: f64, backlog: u64) -> IntervalStats {
    let mut both = s[0].clone();
    both.add(&s[1]);
    let ios = both.ios;
    let ms = |ns: f64| ns / 1e6;
    let secs = seconds.max(1e-9);
    let iops = ios as f64 / secs;
    IntervalStats {
        ios,
        reads: s[0].ios,
        writes: s[1].ios,
        bytes_read: s[0].bytes,
        bytes_written: s[1].bytes,
        iops,
        mb_per_s: both.bytes as f64 / MIB / secs,
        bytes_per_io: if ios == 0 {
            0.0
        } else {
            both.bytes as f64 / ios as f64
        },
        read_pct: if ios == 0 {
            0.0
        } else {
            100.0 * s[0].ios as f64 / ios as f64
        },
        resp_ms: ms(both.hist.mean_ns()),
        read_resp_ms: ms(s[0].hist.mean_ns()),
        write_resp_ms: ms(s[1].hist.mean_ns()),
        resp_max_ms: ms(both.hist.max_ns() as f64),
        resp_stddev_ms: ms(both.hist.stddev_ns()),
        p50_us: both.hist.percentile_ns(50.0) as f64 / 1e3,
        p99_us: both.hist.percentile_ns(99.0) as f64 / 1e3,
        p999_us: both.hist.percentile_ns(99.9) as f64 / 1e3,
        queue_depth: iops * both.hist.mean_ns() / 1e9,
        backlog,
    }
}

fn direction(s: &DirStat, seconds: f64, bounds_us: &[u64]) -> DirectionStats {
    let secs = seconds.max(1e-9);
    DirectionStats {
        ios: s.ios,
        bytes: s.bytes,
        iops: s.ios as f64 / secs,
        mb_per_s: s.bytes as f64 / MIB / secs,
        bytes_per_io: if s.ios == 0 {
            0.0
        } else {
            s.bytes as f64 / s.ios as f64
        },
        latency: s.hist.summary(bounds_us),
        histogram: s.hist.to_data(),
    }
}

fn mixed(s: &[DirStat; 2], seconds: f64, bounds_us: &[u64]) -> Mixed {
    let mut both = s[0].clone();
    both.add(&s[1]);
    Mixed {
        all: direction(&both, seconds, bounds_us),
        read: direction(&s[0], seconds, bounds_us),
        write: direction(&s[1], seconds, bounds_us),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::{Seek, XferSize};

    fn wd(iorate: Option<f64>, skew: Option<f64>) -> WdDef {
        WdDef {
            name: "w".into(),
            sds: vec!["sd1".into()],
            rdpct: 100.0,
            xfersize: XferSize::Fixed(8192),
            seek: Seek::Random(100.0),
            skew_pct: skew,
            iorate,
            priority: None,
            range: None,
            hotband: None,
        }
    }

    #[test]
    fn a_runs_rate_is_split_without_exceeding_it() {
        // 1000/s: one workload fixed at 100, one skewed to 30% (300), two plain
        // sharing what is left (300 each). The total is the run's rate.
        let rates = wd_rates(
            Some(1000.0),
            &[
                wd(Some(100.0), None),
                wd(None, Some(30.0)),
                wd(None, None),
                wd(None, None),
            ],
        );
        let r: Vec<f64> = rates.iter().map(|(r, _)| r.unwrap()).collect();
        assert_eq!(r, vec![100.0, 300.0, 300.0, 300.0]);
        // The bank file: every workload has its own rate, summing to the run's.
        let bank = [3250.0, 2500.0, 5800.0, 750.0, 50.0].map(|x| wd(Some(x), None));
        let total: f64 = wd_rates(Some(12350.0), &bank)
            .iter()
            .map(|(r, _)| r.unwrap())
            .sum();
        assert_eq!(total, 12350.0);
        // Closed loop: skew is a weight.
        let w = wd_rates(None, &[wd(None, Some(75.0)), wd(None, None)]);
        assert_eq!((w[0].0, w[0].1, w[1].1), (None, 75.0, 25.0));
    }
}
