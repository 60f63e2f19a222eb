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
//! statistics for it, and hands the finished [`IntervalRecord`](crate::result::IntervalRecord) to the
//! [`Observer`] (the live display).

mod collect;
mod observer;
mod sched;
mod setup;
mod worker;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_io::host::Host;

use crate::model::{Plan, Rate, RunDef};
use crate::result::{
    BenchResult, CurvePoint, EngineInfo, RunRecord, TargetInfo, SCHEMA, SCHEMA_VERSION,
};
use crate::target::Target;

use collect::{Collector, POLL};
pub use observer::{Observer, Quiet};
pub use sched::{IoSpec, Next, SdSched, Stream, StreamSpec, Validation, BACKLOG_MAX, BACKLOG_MIN};
pub use setup::BenchError;
use setup::{prepare_run, Prepared, SdPlan};
use worker::{lock, Msg, RunShared, Start, WorkerSd, WorkerSetup};
pub use worker::{EngineFactory, EngineMaker};

/// How long workers may take to set up (open rings, allocate buffers).
const SETUP_TIMEOUT: Duration = Duration::from_secs(60);

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

/// Run every run of `plan` on `targets` (one per sd, in the plan's order).
pub fn run_bench(
    plan: &Plan,
    targets: &[Target],
    options: &BenchOptions<'_>,
    observer: &mut dyn Observer,
) -> Result<BenchResult, BenchError> {
    let started_at = cairn_host::utc_now_rfc3339();
    let target_infos = target_infos(targets, options.host);
    let devices = bench_devices(&target_infos);
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
    let mut curves = Curves::default();
    let mut stop_all: Option<String> = None;
    // Validation state per sd (by index), kept for the whole bench: a block
    // one run writes is checked by the reads of every later run, as in vdbench.
    let mut validations: BTreeMap<usize, Validation> = BTreeMap::new();
    check_runs(plan, targets, options.seed)?;
    for (n, run) in plan.runs.iter().enumerate() {
        if options.interrupted.load(Ordering::SeqCst) || stop_all.is_some() {
            break;
        }
        let target_iops = match curves.due(run, observer)? {
            Due::Run(target_iops) => target_iops,
            Due::Skip => continue,
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
        curves.ran(run, &record, observer);
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

/// Prepare every run once before the first starts, so that a bad run late in
/// a plan fails the bench before any I/O.
fn check_runs(plan: &Plan, targets: &[Target], seed: u64) -> Result<(), BenchError> {
    for (n, run) in plan.runs.iter().enumerate() {
        // A stand-in rate for curve points: only the checks matter here.
        let rate = match run.rate {
            Rate::Max => None,
            Rate::Fixed(r) => Some(r),
            Rate::CurvePct(_) => Some(1.0),
        };
        prepare_run(plan, run, n, targets, rate, seed, &mut BTreeMap::new())?;
    }
    Ok(())
}

/// What each target is, with the devices under it (each named once).
fn target_infos(targets: &[Target], host: &Host) -> Vec<TargetInfo> {
    let mut target_infos = Vec::new();
    for t in targets {
        let mut info = t.info();
        let mut seen = BTreeSet::new();
        info.devices = t
            .device_paths()
            .iter()
            .flat_map(|p| cairn_host::devices_for(host, p))
            .filter(|d| seen.insert(d.clone()))
            .collect();
        target_infos.push(info);
    }
    target_infos
}

/// The devices under all the targets, each named once.
fn bench_devices(target_infos: &[TargetInfo]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    target_infos
        .iter()
        .flat_map(|t| t.devices.iter().cloned())
        .filter(|d| seen.insert(d.clone()))
        .collect()
}

/// The curves of a bench as their runs go by.
#[derive(Default)]
struct Curves {
    /// Curve id → the max its calibration run reached.
    max: BTreeMap<usize, f64>,
    /// Curves stopped by stopcurve.
    stopped: BTreeSet<usize>,
}

/// Whether a run of the bench is to run, and at what rate.
enum Due {
    /// Run it, holding this rate (`None`: as fast as it goes).
    Run(Option<f64>),
    /// Skip it: a point of a curve that was stopped, or whose max run did no I/O.
    Skip,
}

impl Curves {
    /// Whether `run` is to run, and at what rate: a curve point at its share
    /// of what the curve's max run reached.
    fn due(&self, run: &RunDef, observer: &mut dyn Observer) -> Result<Due, BenchError> {
        Ok(Due::Run(match run.rate {
            Rate::Max => None,
            Rate::Fixed(r) => Some(r),
            Rate::CurvePct(p) => {
                let Some(curve) = run.curve else {
                    return Err(BenchError::Setup(format!(
                        "rd={}: a curve point outside a curve",
                        run.rd
                    )));
                };
                if self.stopped.contains(&curve.id) {
                    return Ok(Due::Skip);
                }
                let max = self.max.get(&curve.id).copied().unwrap_or(0.0);
                if max <= 0.0 {
                    observer.note(&format!(
                        "rd={}: the curve's max run did no I/O; skipping its {p}% point",
                        run.rd
                    ));
                    return Ok(Due::Skip);
                }
                Some(max * p / 100.0)
            }
        }))
    }

    /// `run` of a curve has ended: its max run sets the curve's max; a mean
    /// response over `stopcurve=` stops the curve.
    fn ran(&mut self, run: &RunDef, record: &RunRecord, observer: &mut dyn Observer) {
        let Some(curve) = run.curve else {
            return;
        };
        if run.rate == Rate::Max {
            self.max.insert(curve.id, record.totals.all.all.iops);
        }
        if let Some(stop_ms) = curve.stop_ms {
            let mean_ms = record.totals.all.all.latency.mean_us / 1000.0;
            if mean_ms > stop_ms {
                self.stopped.insert(curve.id);
                observer.note(&format!(
                    "rd={}: mean response {mean_ms:.3} ms exceeds stopcurve={stop_ms} ms; the rest of the curve is skipped",
                    run.rd
                ));
            }
        }
    }
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

struct RunEngineInfo {
    flags: Vec<String>,
    workers: u32,
}

/// One run: its workers set up and started at one time 0, its intervals
/// collected until they end. The sds' validation state goes back into
/// `validations` for the next run, whether or not this one succeeded.
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
    let prepared = prepare_run(
        plan,
        run,
        run_index,
        targets,
        target_iops,
        options.seed,
        validations,
    )?;
    let layouts = worker_layouts(options, &prepared.scheds);

    let interval_ns = run.interval.as_nanos().max(1) as u64;
    let end_ns = run.elapsed.as_nanos() as u64;
    let warmup_ns = (run.warmup.as_nanos() as u64).div_ceil(interval_ns) * interval_ns;
    let shared = Arc::new(RunShared::new(plan.general.data_errors.max(1)));
    let (tx, rx) = mpsc::channel::<Msg>();
    let n_workers = layouts.len();
    let clock = options.engine.clock();

    let outcome = std::thread::scope(|scope| -> Result<(RunRecord, Vec<String>), BenchError> {
        // Declared in the scope: on any early return the senders drop before
        // the scope joins, so a worker waiting for its start sees the channel
        // close and ends instead of waiting forever.
        let mut starts = Vec::new();
        for (id, layout) in layouts.iter().enumerate() {
            let sds = worker_sds(layout, &prepared, targets, &options.engine)?;
            let (start_tx, start_rx) = mpsc::channel();
            starts.push(start_tx);
            let setup = WorkerSetup {
                id,
                sds,
                maker: options.engine.clone(),
                pattern: prepared.pattern.clone(),
                wds: prepared.wds.len(),
                interval_ns,
                end_ns,
                shared: shared.clone(),
                tx: tx.clone(),
                start: start_rx,
                seed: prepared.seed ^ (id as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F),
                clock: clock.clone(),
            };
            std::thread::Builder::new()
                .name(format!("cairn-io-{id}"))
                .spawn_scoped(scope, move || worker::run(setup))
                .map_err(|e| setup_error(format!("cannot start an I/O thread: {e}")))?;
        }
        drop(tx);
        let ring_flags = await_ready(&rx, n_workers, &starts)?;
        let mut collector = Collector::new(run, &prepared, devices, options.host, warmup_ns);
        collector.bounds_us = plan.general.histogram_bounds_us.clone();
        let mut collector = collector.start(&clock, &starts);
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
    for (i, sched, ..) in &prepared.scheds {
        if let Some(v) = lock(sched).validation.take() {
            validations.insert(*i, v);
        }
    }
    let (mut record, flags) = outcome?;
    label_record(&mut record, run, target_iops, prepared.threads_by_sd);
    Ok((
        record,
        RunEngineInfo {
            flags,
            workers: n_workers as u32,
        },
    ))
}

/// What the run was asked to do, on the record of what it did.
fn label_record(
    record: &mut RunRecord,
    run: &RunDef,
    target_iops: Option<f64>,
    threads_by_sd: BTreeMap<String, u32>,
) {
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
}

/// The sds each worker drives: per worker, (index in `scheds`, slots). With
/// the sync engine, one worker per thread of each sd; otherwise the sds are
/// dealt round the workers (one with a simulated engine), each with all its
/// threads.
fn worker_layouts(options: &BenchOptions<'_>, scheds: &[SdPlan]) -> Vec<Vec<(usize, u32)>> {
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
    layouts
}

/// The sds of one worker's layout as it drives them.
fn worker_sds(
    layout: &[(usize, u32)],
    prepared: &Prepared,
    targets: &[Target],
    engine: &EngineMaker,
) -> Result<Vec<WorkerSd>, BenchError> {
    let mut sds = Vec::new();
    for &(k, slots) in layout {
        let (i, sched, _, max_len, writes) = &prepared.scheds[k];
        let target = &targets[*i];
        let backing = match engine {
            EngineMaker::Custom(_) | EngineMaker::Simulated(..) => None,
            _ => Some(target.share().map_err(|e| {
                BenchError::Setup(format!(
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
            validate: prepared.validate,
        });
    }
    Ok(sds)
}

/// Wait for every worker to be ready; the ring flags the last one to get
/// ready was granted. If any failed (or none answered in time), every worker
/// is told to abort.
fn await_ready(
    rx: &mpsc::Receiver<Msg>,
    n_workers: usize,
    starts: &[mpsc::Sender<Start>],
) -> Result<Vec<String>, BenchError> {
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
        for s in starts {
            s.send(Start::Abort).ok();
        }
        return Err(BenchError::Setup(error));
    }
    Ok(ring_flags)
}
