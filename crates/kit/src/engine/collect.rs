//! The collector: the calling thread's side of a run. It closes each
//! interval — samples the process's CPU and `/proc/diskstats` at the
//! boundary, gathers every worker's [`Tick`] for it, merges them and hands the
//! finished [`IntervalRecord`] to the [`Observer`] — and at the end adds the
//! measured intervals up into the run's [`RunRecord`]: totals, the rate held
//! or not, validation and errors.
//!
//! Warm-up intervals are recorded but measure nothing: totals, CPU and
//! device figures start where the warm-up ends.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_io::clock::Clock;
use cairn_io::host::Host;

use crate::model::{Rate, RunDef};
use crate::result::{
    DirectionStats, ErrorSummary, IntervalRecord, IntervalStats, Mixed, RateOutcome, RunRecord,
    Totals, ValidationOutcome, WorkloadTotals,
};

use super::observer::Observer;
use super::sched::{SdSched, BACKLOG_MAX};
use super::setup::Prepared;
use super::worker::{lock, DirStat, Msg, RunShared, RunTime, Start, Tick};

/// How often the collector looks at the interrupt flag while it waits.
pub(super) const POLL: Duration = Duration::from_millis(100);
/// Bytes in the MB of "MB/s": 2^20, as vdbench and `iostat -m` count them.
const MIB: f64 = 1_048_576.0;
/// A rate is held when at least this share of the scheduled I/Os completed.
const HELD_SHARE: f64 = 0.98;

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

pub(super) struct Collector<'a> {
    run: &'a RunDef,
    wd_names: Vec<String>,
    wd_sds: Vec<Vec<String>>,
    wd_targets: Vec<Option<f64>>,
    wd_priority: Vec<Option<u32>>,
    scheds: Vec<Arc<Mutex<SdSched>>>,
    devices: &'a [String],
    host: &'a Host,
    warmup_ns: u64,
    pub(super) bounds_us: Vec<u64>,
}

pub(super) struct Running<'a> {
    c: Collector<'a>,
    t0: RunTime,
    cpu_prev: cairn_host::CpuSample,
    disk_prev: cairn_host::DiskStatsSnapshot,
    cpu_measured_from: cairn_host::CpuSample,
    disk_measured_from: cairn_host::DiskStatsSnapshot,
}

impl<'a> Collector<'a> {
    pub(super) fn new(
        run: &'a RunDef,
        prepared: &Prepared,
        devices: &'a [String],
        host: &'a Host,
        warmup_ns: u64,
    ) -> Self {
        let wds = &prepared.wds;
        Self {
            run,
            wd_names: wds.iter().map(|w| w.def.name.clone()).collect(),
            wd_sds: wds.iter().map(|w| w.def.sds.clone()).collect(),
            wd_targets: wds.iter().map(|w| w.rate).collect(),
            wd_priority: wds.iter().map(|w| w.def.priority).collect(),
            scheds: prepared.scheds.iter().map(|s| s.1.clone()).collect(),
            devices,
            host,
            warmup_ns,
            bounds_us: Vec::new(),
        }
    }

    /// Time 0 of the run: the clock read and the first CPU and disk samples
    /// taken, then every worker told to start at it.
    pub(super) fn start(self, clock: &Arc<dyn Clock>, starts: &[Sender<Start>]) -> Running<'a> {
        let t0 = RunTime {
            clock: clock.clone(),
            origin_ns: clock.now_ns(),
        };
        let origin_ns = t0.origin_ns;
        let cpu = cairn_host::cpu_sample(self.host);
        let disk = cairn_host::diskstats(self.host, self.devices);
        let running = Running {
            c: self,
            t0,
            cpu_prev: cpu,
            disk_prev: disk.clone(),
            cpu_measured_from: cpu,
            disk_measured_from: disk,
        };
        for s in starts {
            s.send(Start::Go(origin_ns)).ok();
        }
        running
    }
}

/// What the workers have said and the collector has not yet merged: their
/// ticks by interval, and how each one ended.
struct Inbox<'a> {
    rx: &'a mpsc::Receiver<Msg>,
    shared: &'a RunShared,
    interrupted: &'a AtomicBool,
    interrupted_seen: bool,
    pending: BTreeMap<u32, Vec<Tick>>,
    /// Per worker, once it has ended: its last interval, and why it ended early.
    done: Vec<Option<(u32, Option<String>)>>,
}

impl Inbox<'_> {
    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Tick(t) => self.pending.entry(t.index).or_default().push(*t),
            Msg::Done {
                worker,
                last_index,
                reason,
            } => self.done[worker] = Some((last_index, reason)),
            _ => {}
        }
    }

    /// An interrupt seen for the first time stops the workers.
    fn see_interrupt(&mut self) {
        if self.interrupted.load(Ordering::SeqCst) && !self.interrupted_seen {
            self.interrupted_seen = true;
            self.shared.stop_with("interrupted".into());
        }
    }

    /// Until the boundary (or until every worker has finished).
    fn wait_until(&mut self, t0: &RunTime, boundary: u64) {
        loop {
            let now = t0.now_ns();
            if now >= boundary || self.done.iter().all(Option::is_some) {
                break;
            }
            self.see_interrupt();
            let wait = Duration::from_nanos(boundary - now).min(POLL);
            match self.rx.recv_timeout(wait) {
                Ok(msg) => self.handle(msg),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    /// Every worker still running must report interval `index`.
    fn wait_for_reports(&mut self, index: u32) {
        loop {
            let missing = (0..self.done.len()).any(|w| {
                let has = self
                    .pending
                    .get(&index)
                    .is_some_and(|v| v.iter().any(|t| t.worker == w));
                let finished_before = self.done[w].as_ref().is_some_and(|(last, _)| *last < index);
                !has && !finished_before
            });
            if !missing {
                break;
            }
            match self.rx.recv_timeout(POLL) {
                Ok(msg) => self.handle(msg),
                Err(RecvTimeoutError::Timeout) => self.see_interrupt(),
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    /// Every worker has ended, none after interval `index`.
    fn all_done_by(&self, index: u32) -> bool {
        self.done
            .iter()
            .all(|d| d.as_ref().is_some_and(|(last, _)| *last <= index))
    }
}

/// What the intervals add up to as they close.
struct Tally {
    intervals: Vec<IntervalRecord>,
    totals: Merged,
    measured_from_ns: u64,
    last_end_ns: u64,
    errors: ErrorSummary,
    validation: ValidationOutcome,
    scheduled: u64,
    not_issued: u64,
    /// The backlog peak, sampled at interval boundaries, summed over the sds.
    backlog_max: u64,
    completed_measured: u64,
    scheduled_measured: u64,
}

impl Tally {
    fn new(wds: usize) -> Self {
        Self {
            intervals: Vec::new(),
            totals: Merged::new(wds),
            measured_from_ns: 0,
            last_end_ns: 0,
            errors: ErrorSummary::default(),
            validation: ValidationOutcome::default(),
            scheduled: 0,
            not_issued: 0,
            backlog_max: 0,
            completed_measured: 0,
            scheduled_measured: 0,
        }
    }

    /// One interval's ticks merged over the workers; their counters, errors
    /// and validation outcomes added to the run's.
    fn merge(&mut self, ticks: &[Tick], wds: usize, warmup: bool) -> Merged {
        let mut merged = Merged::new(wds);
        for t in ticks {
            merged.add(&t.stats);
            self.scheduled += t.scheduled;
            // A start-up transient in the warm-up does not fail the run.
            if !warmup {
                self.not_issued += t.not_issued;
            }
            self.errors.count += t.errors;
            for e in &t.first_errors {
                if self.errors.first.len() < 10 {
                    self.errors.first.push(e.clone());
                }
            }
            self.validation.units_checked += t.checked;
            self.validation.units_written += t.written;
            self.validation
                .errors
                .extend(t.validation_errors.iter().cloned());
            if !warmup {
                self.scheduled_measured += t.scheduled;
            }
        }
        merged
    }
}

impl Running<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn collect(
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
        let mut inbox = Inbox {
            rx,
            shared,
            interrupted,
            interrupted_seen: false,
            pending: BTreeMap::new(),
            done: vec![None; n_workers],
        };
        let mut tally = Tally::new(wds);
        let mut prev_boundary = 0u64;
        for index in 1u32.. {
            let boundary = (u64::from(index) * interval_ns).min(end_ns);
            inbox.wait_until(&self.t0, boundary);
            let cpu = cairn_host::cpu_sample(self.c.host);
            let disk = cairn_host::diskstats(self.c.host, self.c.devices);
            let backlog: u64 = self.c.scheds.iter().map(|s| lock(s).backlog()).sum();
            tally.backlog_max = tally.backlog_max.max(backlog);
            inbox.wait_for_reports(index);
            let ticks = inbox.pending.remove(&index).unwrap_or_default();
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
            let merged = tally.merge(&ticks, wds, warmup);
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
            tally.intervals.push(record);
            if warmup {
                tally.measured_from_ns = end;
                self.cpu_measured_from = cpu;
                self.disk_measured_from = disk.clone();
            } else {
                tally.totals.add(&merged.stats);
                // Only open-loop workloads have a schedule to keep.
                tally.completed_measured += merged
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
            tally.last_end_ns = end;
            if inbox.all_done_by(index) {
                break;
            }
        }
        self.record(tally, &inbox.done, shared, interval_ns, end_ns)
    }

    /// The run's record from its closed intervals. The caller fills in what
    /// the run was asked to do (its name, label, rate, threads and curve).
    fn record(
        &self,
        tally: Tally,
        done: &[Option<(u32, Option<String>)>],
        shared: &RunShared,
        interval_ns: u64,
        end_ns: u64,
    ) -> RunRecord {
        let wds = self.c.wd_names.len();
        let measured_s = (tally.last_end_ns.saturating_sub(tally.measured_from_ns)) as f64 / 1e9;
        let cpu_end = self.cpu_prev;
        let disk_end = self.disk_prev.clone();
        let totals = &tally.totals;
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
        let rate_outcome = self.rate_outcome(&tally, &workloads, &mixed_all, measured_s);
        let _ = tally.scheduled;
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
            intervals: tally.intervals,
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
                ..tally.validation
            },
            errors: tally.errors,
            ended_early: reason,
        }
    }

    /// The rate asked against the rate achieved over the measured window, and
    /// whether it was held.
    fn rate_outcome(
        &self,
        tally: &Tally,
        workloads: &[WorkloadTotals],
        mixed_all: &Mixed,
        measured_s: f64,
    ) -> RateOutcome {
        let not_issued = tally.not_issued;
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
            workloads_open_iops(workloads, &self.c.wd_targets)
        } else {
            mixed_all.all.iops
        };
        let mut rate_outcome = RateOutcome {
            target_iops: target,
            achieved_iops: achieved,
            held: true,
            not_issued,
            backlog_max: tally.backlog_max,
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
            let share = if tally.scheduled_measured == 0 {
                // Nothing was due in the window: held only if nothing was measured either.
                if measured_s > 0.0 && t > 0.0 {
                    0.0
                } else {
                    1.0
                }
            } else {
                tally.completed_measured as f64 / tally.scheduled_measured as f64
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
        rate_outcome
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
