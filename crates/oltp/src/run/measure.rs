//! A run's measurement: interval by interval, the sessions' counts beside
//! CPU and `/proc/diskstats` sampled at the interval's end; the window from
//! the end of the warm-up (a whole number of intervals) to the sessions' stop;
//! and the window's totals and the cross-check of Cairn's counts against the
//! kernel's. It starts no thread: the run calls it from its own, which sleeps
//! between interval ends.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use cairn_host::{CpuSample, DiskStatsSnapshot};
use cairn_io::host::Host;
use cairn_kit::result::TargetInfo;

use crate::result::{
    CrossCheck, EventRecord, IntervalEvent, OltpInterval, StatValue, Totals, INTERVAL_BUCKETS_US,
};
use crate::stats::{Counts, Event, Stat, StatsHub};
use crate::Health;

/// When the intervals end and when the run does.
pub(super) struct Schedule {
    pub interval: Duration,
    /// The warm-up asked for; it is rounded up to whole intervals.
    pub warmup: Duration,
    /// How long to measure after the warm-up; `None` runs until every
    /// session has finished its loops.
    pub run_time: Option<Duration>,
}

/// Where the measured window began: the samples then, and when.
struct WindowStart {
    cpu: CpuSample,
    disk: DiskStatsSnapshot,
    at: Instant,
    wall: String,
}

/// The intervals as they end: the samples, the counts in the window and over
/// the run's life, and where the window began once the warm-up is over.
pub(super) struct Measure<'h> {
    monitor: Monitor<'h>,
    /// The sessions' release.
    t0: Instant,
    started_at_wall: String,
    interval: Duration,
    /// The warm-up: a whole number of intervals.
    warm_intervals: u32,
    warmup: Duration,
    /// When the run's time is up, if it has a time.
    end: Option<Instant>,
    window_start: Option<WindowStart>,
    intervals: Vec<OltpInterval>,
    window: Counts,
    lifetime: Counts,
    /// The last interval recorded (1-based; 0 before the first).
    index: u32,
}

/// The measured window, closed: ready for the result.
pub(super) struct Measured {
    pub intervals: Vec<OltpInterval>,
    pub window: Counts,
    /// Everything from the sessions' release on; the shutdown adds its tail.
    pub lifetime: Counts,
    /// The samples at the window's two ends.
    pub cpu: (CpuSample, CpuSample),
    pub disk: (DiskStatsSnapshot, DiskStatsSnapshot),
    pub started_at: String,
    pub ended_at: String,
    pub warmup_s: f64,
    pub elapsed_s: f64,
}

impl<'h> Measure<'h> {
    /// Start measuring the `devices` at `t0`, the sessions' release; with no
    /// warm-up the window starts there too.
    pub(super) fn new(
        host: &'h Host,
        devices: &[String],
        t0: Instant,
        started_at_wall: String,
        schedule: &Schedule,
    ) -> Self {
        let monitor = Monitor::new(host, devices, t0);
        let warm_intervals =
            (schedule.warmup.as_secs_f64() / schedule.interval.as_secs_f64()).ceil() as u32;
        let warmup = schedule.interval * warm_intervals;
        let window_start = (warm_intervals == 0).then(|| WindowStart {
            cpu: monitor.last_cpu,
            disk: monitor.last_disk.clone(),
            at: t0,
            wall: started_at_wall.clone(),
        });
        Measure {
            monitor,
            t0,
            started_at_wall,
            interval: schedule.interval,
            warm_intervals,
            warmup,
            end: schedule.run_time.map(|r| t0 + (warmup + r)),
            window_start,
            intervals: Vec::new(),
            window: Counts::default(),
            lifetime: Counts::default(),
            index: 0,
        }
    }

    /// Record interval after interval until the run ends: its time is up,
    /// every session finished, one failed, or the user interrupted (then
    /// "interrupted" is returned, the run's note).
    pub(super) fn until_stopped(
        &mut self,
        interrupted: &AtomicBool,
        health: &Health,
        finished: &AtomicU32,
        sessions: u32,
        hub: &StatsHub,
        on_interval: &mut dyn FnMut(&OltpInterval),
    ) -> Option<String> {
        loop {
            let tick = self.t0 + self.interval * (self.index + 1);
            let stop_reason = wait_until(tick, self.end, interrupted, health, finished, sessions);
            match stop_reason {
                Some(StopReason::Interrupted) => return Some("interrupted".to_string()),
                Some(StopReason::Done | StopReason::Failed) => return None,
                None => {}
            }
            let warm = self.index < self.warm_intervals;
            let rec = self.record(hub.drain(), warm);
            on_interval(&rec);
            self.intervals.push(rec);
            if self.index == self.warm_intervals {
                self.window_start = Some(WindowStart {
                    cpu: self.monitor.last_cpu,
                    disk: self.monitor.last_disk.clone(),
                    at: self.monitor.last_at,
                    wall: cairn_host::utc_now_rfc3339(),
                });
            }
        }
    }

    /// The last, partial interval, ending when every session has stopped:
    /// kept if any time passed.
    pub(super) fn last_interval(
        &mut self,
        hub: &StatsHub,
        on_interval: &mut dyn FnMut(&OltpInterval),
    ) {
        let warm = self.window_start.is_none();
        let rec = self.record(hub.drain(), warm);
        if rec.seconds > 0.0 {
            on_interval(&rec);
            self.intervals.push(rec);
        }
    }

    /// Sample the next interval's end and add its counts: to the window
    /// unless it is `warm`, and to the run's life either way.
    fn record(&mut self, counts: Counts, warm: bool) -> OltpInterval {
        self.index += 1;
        let rec = self.monitor.interval(self.index, &counts, warm);
        self.lifetime.add(&counts);
        if !warm {
            self.window.add(&counts);
        }
        rec
    }

    /// Close the window; a run that never left its warm-up gets a note saying
    /// so in `ended_early` (unless it has one).
    pub(super) fn close(self, ended_early: &mut Option<String>) -> Measured {
        let monitor = self.monitor;
        if self.window_start.is_none() && ended_early.is_none() {
            *ended_early = Some(format!(
                "the run ended during its {:.0} s warm-up, after {:.1} s: nothing was measured; shorten --warmup or lengthen RUN_TIME / WORK_LOOP",
                self.warmup.as_secs_f64(),
                monitor.last_at.duration_since(self.t0).as_secs_f64()
            ));
        }
        let start = self.window_start.unwrap_or(WindowStart {
            cpu: monitor.first_cpu,
            disk: monitor.first_disk.clone(),
            at: self.t0,
            wall: self.started_at_wall,
        });
        let elapsed_s = monitor.last_at.duration_since(start.at).as_secs_f64();
        let ended_at = cairn_host::utc_now_rfc3339();
        Measured {
            intervals: self.intervals,
            window: self.window,
            lifetime: self.lifetime,
            cpu: (start.cpu, monitor.last_cpu),
            disk: (start.disk, monitor.last_disk),
            started_at: start.wall,
            ended_at,
            warmup_s: start.at.duration_since(self.t0).as_secs_f64(),
            elapsed_s,
        }
    }
}

enum StopReason {
    Done,
    Interrupted,
    Failed,
}

/// Sleep until `tick`, waking early when the run must end.
fn wait_until(
    tick: Instant,
    end: Option<Instant>,
    interrupted: &AtomicBool,
    health: &Health,
    finished: &AtomicU32,
    sessions: u32,
) -> Option<StopReason> {
    loop {
        if interrupted.load(Ordering::Relaxed) {
            return Some(StopReason::Interrupted);
        }
        if health.failed() {
            return Some(StopReason::Failed);
        }
        if finished.load(Ordering::Acquire) >= sessions {
            return Some(StopReason::Done);
        }
        let now = Instant::now();
        if end.is_some_and(|e| now >= e) {
            return Some(StopReason::Done);
        }
        if now >= tick {
            return None;
        }
        let until = end.map_or(tick, |e| e.min(tick));
        std::thread::sleep(
            until
                .saturating_duration_since(now)
                .min(Duration::from_millis(20)),
        );
    }
}

/// Samples CPU and diskstats at interval ends.
struct Monitor<'h> {
    host: &'h Host,
    devices: Vec<String>,
    first_cpu: CpuSample,
    first_disk: DiskStatsSnapshot,
    last_cpu: CpuSample,
    last_disk: DiskStatsSnapshot,
    last_at: Instant,
    t0: Instant,
}

impl<'h> Monitor<'h> {
    fn new(host: &'h Host, devices: &[String], t0: Instant) -> Self {
        let cpu = cairn_host::cpu_sample(host);
        let disk = cairn_host::diskstats(host, devices);
        Self {
            host,
            devices: devices.to_vec(),
            first_cpu: cpu,
            first_disk: disk.clone(),
            last_cpu: cpu,
            last_disk: disk,
            last_at: t0,
            t0,
        }
    }

    fn interval(&mut self, index: u32, c: &Counts, warmup: bool) -> OltpInterval {
        let cpu = cairn_host::cpu_sample(self.host);
        let disk = cairn_host::diskstats(self.host, &self.devices);
        let now = Instant::now();
        let seconds = now.duration_since(self.last_at).as_secs_f64();
        let per_s = |x: u64| {
            if seconds > 0.0 {
                x as f64 / seconds
            } else {
                0.0
            }
        };
        let mb = |x: u64| per_s(x) / 1_048_576.0;
        let rec = OltpInterval {
            index,
            end_s: now.duration_since(self.t0).as_secs_f64(),
            seconds,
            warmup,
            db_time_s: c.db_time_ns as f64 / 1e9,
            db_cpu_s: c.db_cpu_ns as f64 / 1e9,
            physical_read_iops: per_s(c.get(Stat::PhysicalReadIoRequests)),
            physical_write_iops: per_s(c.get(Stat::PhysicalWriteIoRequests)),
            redo_write_iops: per_s(c.get(Stat::RedoWriteIoRequests)),
            logical_reads_per_s: per_s(c.get(Stat::SessionLogicalReads)),
            redo_bytes_per_s: per_s(c.get(Stat::RedoSize)),
            read_mb_per_s: mb(c.get(Stat::PhysicalReadBytes)),
            write_mb_per_s: mb(c.get(Stat::PhysicalWriteBytes)),
            transactions_per_s: per_s(c.get(Stat::UserCommits)),
            executes_per_s: per_s(c.get(Stat::ExecuteCount)),
            events: interval_events(c),
            cpu: cairn_host::cpu_interval(&self.last_cpu, &cpu),
            devices: cairn_host::device_stats(&self.last_disk, &disk),
        };
        self.last_cpu = cpu;
        self.last_disk = disk;
        self.last_at = now;
        rec
    }
}

fn interval_events(c: &Counts) -> Vec<IntervalEvent> {
    Event::ALL
        .iter()
        .filter_map(|&event| {
            let w = c.event(event);
            let h = w.histogram.as_ref()?;
            if w.waits == 0 {
                return None;
            }
            let mut buckets = Vec::with_capacity(INTERVAL_BUCKETS_US.len() + 1);
            let mut below_prev = 0;
            for bound in INTERVAL_BUCKETS_US {
                let below = h.count_below(bound * 1000);
                buckets.push(below.saturating_sub(below_prev));
                below_prev = below;
            }
            buckets.push(h.count().saturating_sub(below_prev));
            Some(IntervalEvent {
                event,
                waits: w.waits,
                avg_us: w.time_ns as f64 / w.waits as f64 / 1000.0,
                p50_us: h.percentile_ns(50.0) as f64 / 1000.0,
                p99_us: h.percentile_ns(99.0) as f64 / 1000.0,
                buckets,
            })
        })
        .collect()
}

/// The measured window's totals in the result's terms.
pub(super) fn totals(c: &Counts) -> Totals {
    Totals {
        db_time_s: c.db_time_ns as f64 / 1e9,
        db_cpu_s: c.db_cpu_ns as f64 / 1e9,
        background_cpu_s: c.background_cpu_ns as f64 / 1e9,
        stats: Stat::ALL
            .iter()
            .map(|&s| StatValue {
                name: s.name().into(),
                value: c.get(s),
            })
            .collect(),
        events: Event::ALL
            .iter()
            .filter_map(|&event| {
                let w = c.event(event);
                let h = w.histogram.as_ref()?;
                if w.waits == 0 {
                    return None;
                }
                Some(EventRecord {
                    event,
                    name: event.name().into(),
                    class: event.class().into(),
                    background: event.background(),
                    waits: w.waits,
                    time_s: w.time_ns as f64 / 1e9,
                    avg_us: w.time_ns as f64 / w.waits as f64 / 1000.0,
                    latency: h.summary(&[]),
                    histogram: h.to_data(),
                })
            })
            .collect(),
    }
}

/// The kernel device each target sits on directly (a loop device for a loop
/// target, the filesystem's device for a file), each once.
pub(super) fn device_names(host: &Host, data: &[PathBuf], redo: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for p in data
        .iter()
        .map(PathBuf::as_path)
        .chain(std::iter::once(redo))
    {
        for d in cairn_host::devices_for(host, p) {
            if !names.contains(&d) {
                names.push(d);
            }
        }
    }
    names
}

/// Cairn's counts against the kernel's, on the devices the targets sit on
/// directly: the data devices together, and the redo device (or, when the redo
/// shares a device with data, everything together). Requests the kernel merged
/// count as issued (completed + merged), so batching in the block layer does
/// not hide any.
pub(super) fn cross_check(
    a: &DiskStatsSnapshot,
    b: &DiskStatsSnapshot,
    data: &[TargetInfo],
    redo: &TargetInfo,
    c: &Counts,
    redo_block: u32,
) -> Vec<CrossCheck> {
    let first = |t: &TargetInfo| t.devices.first().cloned();
    let mut data_devices: Vec<String> = Vec::new();
    for d in data.iter().filter_map(first) {
        if !data_devices.contains(&d) {
            data_devices.push(d);
        }
    }
    let redo_device = first(redo);
    let data_paths: Vec<String> = data.iter().map(|t| t.path.clone()).collect();
    let data_reads = c.get(Stat::PhysicalReadIoRequests);
    let data_read_bytes = c.get(Stat::PhysicalReadBytes);
    let data_writes = c.get(Stat::PhysicalWriteIoRequests);
    let data_write_bytes = c.get(Stat::PhysicalWriteBytes);
    let redo_writes = c.get(Stat::RedoWriteIoRequests);
    let redo_bytes = c.get(Stat::RedoBlocksWritten) * u64::from(redo_block);
    let mut groups: Vec<(Vec<String>, Vec<String>, [u64; 4])> = Vec::new();
    match redo_device {
        Some(r) if data_devices.contains(&r) => {
            let mut targets = data_paths;
            targets.push(redo.path.clone());
            groups.push((
                data_devices,
                targets,
                [
                    data_reads,
                    data_read_bytes,
                    data_writes + redo_writes,
                    data_write_bytes + redo_bytes,
                ],
            ));
        }
        other => {
            if !data_devices.is_empty() {
                groups.push((
                    data_devices,
                    data_paths,
                    [data_reads, data_read_bytes, data_writes, data_write_bytes],
                ));
            }
            if let Some(r) = other {
                groups.push((
                    vec![r],
                    vec![redo.path.clone()],
                    [0, 0, redo_writes, redo_bytes],
                ));
            }
        }
    }
    groups
        .into_iter()
        .filter_map(|(devices, targets, [cr, crb, cw, cwb])| {
            let mut k = [0u64; 4];
            for dev in &devices {
                let (older, newer) = (a.get(dev)?, b.get(dev)?);
                let d = |f: fn(&cairn_host::DiskCounters) -> u64| f(newer).saturating_sub(f(older));
                k[0] += d(|x| x.reads) + d(|x| x.reads_merged);
                k[1] += d(|x| x.sectors_read) * 512;
                k[2] += d(|x| x.writes) + d(|x| x.writes_merged);
                k[3] += d(|x| x.sectors_written) * 512;
            }
            Some(CrossCheck {
                device: devices.join("+"),
                targets,
                cairn_reads: cr,
                kernel_reads: k[0],
                cairn_writes: cw,
                kernel_writes: k[2],
                cairn_read_bytes: crb,
                kernel_read_bytes: k[1],
                cairn_write_bytes: cwb,
                kernel_write_bytes: k[3],
            })
        })
        .collect()
}
