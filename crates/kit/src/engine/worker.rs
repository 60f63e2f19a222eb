//! One worker thread: an engine (an io_uring ring, or a synchronous engine of
//! depth one for per-thread synchronous semantics) driving the I/O of its sds.
//!
//! The loop: take every I/O the sds' schedules have due (up to each sd's
//! free threads), submit them as one batch, wait for a completion or the next
//! due time, record each completion's latency from its intended start.
//! Statistics stay thread-local and are shipped to the collector at each
//! interval boundary, so the hot path takes no lock unless validation is on.
//! Every time the loop reads, and every sleep, goes through the run's
//! [`Clock`]: the machine's, or a simulator's ([`EngineMaker::Simulated`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cairn_io::clock::Clock;
use cairn_io::poison::Recover;
use cairn_io::{AlignedBuf, DeviceId, Geometry, IoEngine, Op, Request};
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;

use crate::histogram::LatencyHistogram;
use crate::pattern::{check_unit, seal_unit, DataPattern, UnitHeader};
use crate::result::ValidationError;
use crate::target::{OpenerError, SdBacking, WorkerDevice};

use super::sched::{IoSpec, Next, SdSched};

/// How long the end of a run waits for I/Os still in flight.
const DRAIN_MAX: Duration = Duration::from_secs(30);
/// Errors kept word for word per interval; the rest are counted.
const ERRORS_KEPT: usize = 10;

/// Builds the engine of a worker from its sds' geometries, in order; the
/// engine's device ids must be 0, 1, … in that order.
pub type EngineFactory = Arc<dyn Fn(&[Geometry]) -> Box<dyn IoEngine> + Send + Sync>;

/// How a worker gets its engine.
#[derive(Clone)]
pub enum EngineMaker {
    /// io_uring, tuned: single issuer, deferred task work, registered files.
    Uring,
    /// pread/pwrite, one I/O at a time per thread.
    Sync,
    /// Anything else (the simulator in tests): given the sds' geometries in
    /// order, an engine whose device ids are 0, 1, … in that order.
    Custom(EngineFactory),
    /// A simulated engine (made as by `Custom`) and the simulated time it
    /// keeps: the run reads its every time and sleeps on that clock, so it
    /// takes no real time and its latencies, rates and intervals are the
    /// seed's on any machine. One worker thread drives every sd, the clock's
    /// only writer.
    Simulated(EngineFactory, Arc<dyn Clock>),
}

impl EngineMaker {
    /// The kind of real engine for the work around a run on the same
    /// targets (filling a new file, mounting a group): the run's own, and
    /// `auto` beside a custom engine, which only drives the run itself.
    pub fn file_engine_kind(&self) -> cairn_io::EngineKind {
        match self {
            EngineMaker::Uring => cairn_io::EngineKind::Uring,
            EngineMaker::Sync => cairn_io::EngineKind::Sync,
            EngineMaker::Custom(_) | EngineMaker::Simulated(..) => cairn_io::EngineKind::Auto,
        }
    }

    /// The clock a run with this engine keeps time on: the simulator's, or
    /// the machine's.
    pub fn clock(&self) -> Arc<dyn Clock> {
        match self {
            EngineMaker::Simulated(_, clock) => clock.clone(),
            _ => Arc::new(cairn_io::clock::Monotonic::new()),
        }
    }
}

/// State shared by every worker of a run.
pub struct RunShared {
    pub stop: AtomicBool,
    pub errors: AtomicU64,
    pub error_limit: u64,
    pub stop_reason: Mutex<Option<String>>,
}

impl RunShared {
    /// Not stopped, no errors yet; the run stops at `error_limit` errors.
    pub fn new(error_limit: u64) -> Self {
        Self {
            stop: AtomicBool::new(false),
            errors: AtomicU64::new(0),
            error_limit,
            stop_reason: Mutex::new(None),
        }
    }

    pub fn stop_with(&self, reason: String) {
        let mut r = self.reason_slot();
        if r.is_none() {
            *r = Some(reason);
        }
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Why the run was stopped, if it was.
    pub fn stop_reason(&self) -> Option<String> {
        self.reason_slot().clone()
    }

    /// The reason's slot, even if a thread panicked while holding it: it
    /// holds one `Option<String>`, replaced whole, so it is never half made,
    /// and a reason to stop must get out whatever else went wrong.
    fn reason_slot(&self) -> MutexGuard<'_, Option<String>> {
        self.stop_reason.lock_or_recover()
    }
}

/// Lock an sd's schedule. A thread that panicked while holding it (a bug: an
/// invariant broke) may have left it half changed — a backlog, the
/// validation keys — so its panic spreads to whoever touches it next: the
/// run is abandoned (the scope of its threads re-raises the panic), never
/// carried on or reported from that state.
pub fn lock(m: &Mutex<SdSched>) -> MutexGuard<'_, SdSched> {
    m.lock()
        .expect("invariant: no I/O thread panics while holding an sd's schedule")
}

/// One sd as a worker drives it.
pub struct WorkerSd {
    pub name: String,
    pub lun: String,
    pub sched: Arc<Mutex<SdSched>>,
    /// I/Os this worker may have outstanding on the sd.
    pub slots: u32,
    /// The sd's own handles (`None` with a custom engine).
    pub backing: Option<SdBacking>,
    pub geometry: Geometry,
    pub offset_bytes: u64,
    pub sync_writes: bool,
    /// Largest transfer of the sd's streams (buffer size).
    pub max_len: u64,
    pub writes: bool,
    pub validate: bool,
}

/// Counts and latencies of one workload in one direction.
#[derive(Clone, Default)]
pub struct DirStat {
    pub ios: u64,
    pub bytes: u64,
    pub hist: LatencyHistogram,
}

impl DirStat {
    pub fn add(&mut self, other: &DirStat) {
        self.ios += other.ios;
        self.bytes += other.bytes;
        self.hist.add(&other.hist);
    }
}

/// One interval of one worker.
pub struct Tick {
    pub worker: usize,
    pub index: u32,
    /// When the worker closed the interval (ns since the start).
    pub end_ns: u64,
    /// Per workload of the run: [read, write].
    pub stats: Vec<[DirStat; 2]>,
    pub scheduled: u64,
    pub not_issued: u64,
    pub errors: u64,
    pub first_errors: Vec<String>,
    pub checked: u64,
    pub written: u64,
    pub validation_errors: Vec<ValidationError>,
}

pub enum Msg {
    /// Set up; with the ring flags the kernel granted (empty for sync).
    Ready {
        flags: Vec<String>,
    },
    Failed {
        error: String,
    },
    Tick(Box<Tick>),
    Done {
        worker: usize,
        last_index: u32,
        reason: Option<String>,
    },
}

pub enum Start {
    /// Start, with the run's time 0 on the clock.
    Go(u64),
    Abort,
}

pub struct WorkerSetup {
    pub id: usize,
    pub sds: Vec<WorkerSd>,
    pub maker: EngineMaker,
    pub pattern: Arc<DataPattern>,
    pub wds: usize,
    pub interval_ns: u64,
    pub end_ns: u64,
    pub shared: Arc<RunShared>,
    pub tx: Sender<Msg>,
    pub start: Receiver<Start>,
    pub seed: u64,
    pub clock: Arc<dyn Clock>,
}

struct InFlight {
    sd: usize,
    wd: usize,
    intended_ns: u64,
    at: u64,
    len: u64,
    write: bool,
    key: u8,
}

pub fn run(mut setup: WorkerSetup) {
    // Precise sleeps: the default 50 µs timer slack would be added to every
    // open-loop wait (it is measured, but it is the tool's, not the storage's).
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
    let id = setup.id;
    let (mut engine, devices, flags) = match make_engine(&mut setup) {
        Ok(e) => e,
        Err(error) => {
            setup
                .tx
                .send(Msg::Failed {
                    error: error.to_string(),
                })
                .ok();
            return;
        }
    };
    // Buffers are allocated and filled before the start, so that work is
    // charged to neither the first interval's latency nor its CPU.
    let mut w = Worker::new(&setup, devices);
    if setup.tx.send(Msg::Ready { flags }).is_err() {
        return;
    }
    let t0 = match setup.start.recv() {
        Ok(Start::Go(t0)) => RunTime {
            clock: setup.clock.clone(),
            origin_ns: t0,
        },
        _ => return,
    };
    let reason = w.run(engine.as_mut(), &setup, &t0);
    if engine.in_flight() > 0 {
        // The kernel still owns buffers of a hung device: dropping the engine
        // would wait for it forever. Leak it, so the measurements get out.
        std::mem::forget(engine);
    }
    let now = t0.now_ns();
    let tick = w.tick(&setup, now);
    setup.tx.send(Msg::Tick(Box::new(tick))).ok();
    setup
        .tx
        .send(Msg::Done {
            worker: id,
            last_index: w.index,
            reason,
        })
        .ok();
}

/// The worker's engine, its sds' device ids, and the ring flags in force.
type MadeEngine = (Box<dyn IoEngine>, Vec<DeviceId>, Vec<String>);

/// Why a worker could not make its engine: one line, with what to do.
#[derive(Debug, thiserror::Error)]
pub enum WorkerSetupError {
    #[error("io_uring is not available ({error}); run again with --engine sync")]
    NoUring { error: std::io::Error },
    #[error("sd={sd}: no device to drive")]
    NoDevice { sd: String },
    /// A mapped sd's share could not attach its handles.
    #[error("sd={sd}: {error}")]
    Attach { sd: String, error: OpenerError },
    /// The mapped sds' engine could not be made over the worker's.
    #[error("{0}")]
    Wrap(OpenerError),
}

fn make_engine(setup: &mut WorkerSetup) -> Result<MadeEngine, WorkerSetupError> {
    use cairn_io::FileEngine;
    let depth: usize = setup
        .sds
        .iter()
        .map(|s| s.slots as usize)
        .sum::<usize>()
        .max(1);
    match &setup.maker {
        EngineMaker::Custom(make) | EngineMaker::Simulated(make, _) => {
            let geometries: Vec<Geometry> = setup.sds.iter().map(|s| s.geometry.clone()).collect();
            let engine = make(&geometries);
            let ids = (0..setup.sds.len() as u32).map(DeviceId).collect();
            Ok((engine, ids, Vec::new()))
        }
        maker => {
            // A mapped sd's request (a group file's) becomes several at the
            // devices under it.
            let inner_depth: usize = setup
                .sds
                .iter()
                .map(|sd| {
                    let fan_out = match &sd.backing {
                        Some(SdBacking::Mapped(share)) => share.fan_out(sd.max_len),
                        _ => 1,
                    };
                    sd.slots as usize * fan_out
                })
                .sum::<usize>()
                .max(1);
            let mut engine: Box<dyn FileEngine> = match maker {
                EngineMaker::Uring => {
                    let options = cairn_io::uring_engine::UringOptions {
                        single_issuer: true,
                        register_files: true,
                    };
                    Box::new(
                        cairn_io::uring_engine::UringEngine::with_options(inner_depth, options)
                            .map_err(|error| WorkerSetupError::NoUring { error })?,
                    )
                }
                _ => Box::new(cairn_io::sync_engine::SyncEngine::new(inner_depth)),
            };
            let mut devices = Vec::with_capacity(setup.sds.len());
            // The engine maker of the first mapped sd (a worker's mapped sds
            // come from one opener).
            let mut wrap = None;
            for sd in &mut setup.sds {
                let backing = sd
                    .backing
                    .take()
                    .ok_or_else(|| WorkerSetupError::NoDevice {
                        sd: sd.name.clone(),
                    })?;
                devices.push(match backing {
                    SdBacking::Device(device) => WorkerDevice::Direct(engine.attach(device)),
                    SdBacking::Mapped(share) => {
                        let (attached, wrap_engine) =
                            share.attach(engine.as_mut()).map_err(|error| {
                                WorkerSetupError::Attach {
                                    sd: sd.name.clone(),
                                    error,
                                }
                            })?;
                        wrap.get_or_insert(wrap_engine);
                        WorkerDevice::Mapped(attached)
                    }
                });
            }
            // After attaching: a device the ring could not register drops the flag.
            let flags = engine.flags().iter().map(|f| f.to_string()).collect();
            let Some(wrap) = wrap else {
                let ids = devices
                    .iter()
                    .map(|d| match d {
                        WorkerDevice::Direct(id) => *id,
                        WorkerDevice::Mapped(_) => {
                            unreachable!("invariant: a mapped sd brings its engine maker")
                        }
                    })
                    .collect();
                return Ok((engine as Box<dyn IoEngine>, ids, flags));
            };
            // A mapped sd among them: every sd is a device of the engine the
            // mapping makes, numbered in order.
            let ids = (0..devices.len() as u32).map(DeviceId).collect();
            let engine = wrap(engine as Box<dyn IoEngine>, devices, depth)
                .map_err(WorkerSetupError::Wrap)?;
            Ok((engine, ids, flags))
        }
    }
}

/// The run's time: its clock, and the clock's reading at the start.
pub struct RunTime {
    pub clock: Arc<dyn Clock>,
    pub origin_ns: u64,
}

impl RunTime {
    /// Nanoseconds since the start.
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns().saturating_sub(self.origin_ns)
    }

    /// Sleep until `ns` after the start.
    pub fn sleep_until_ns(&self, ns: u64) {
        self.clock.sleep_until_ns(self.origin_ns.saturating_add(ns));
    }
}

struct Worker {
    devices: Vec<DeviceId>,
    outstanding: Vec<u32>,
    finished: Vec<bool>,
    /// Free slot numbers per sd; a slot is a request tag and owns two buffers.
    free: Vec<Vec<u32>>,
    inflight: Vec<Option<InFlight>>,
    read_bufs: Vec<Option<AlignedBuf>>,
    write_bufs: Vec<Option<AlignedBuf>>,
    stats: Vec<[DirStat; 2]>,
    errors: u64,
    first_errors: Vec<String>,
    counter: u64,
    rng: ChaCha8Rng,
    index: u32,
}

impl Worker {
    fn new(setup: &WorkerSetup, devices: Vec<DeviceId>) -> Self {
        let mut free = Vec::new();
        let mut read_bufs = Vec::new();
        let mut write_bufs = Vec::new();
        let mut slot = 0u32;
        for sd in &setup.sds {
            let mut mine = Vec::new();
            for _ in 0..sd.slots {
                mine.push(slot);
                read_bufs.push(Some(AlignedBuf::zeroed(sd.max_len as usize)));
                write_bufs.push(sd.writes.then(|| {
                    let mut b = AlignedBuf::zeroed(sd.max_len as usize);
                    setup
                        .pattern
                        .prefill(&mut b, (setup.id as u64) << 32 | u64::from(slot));
                    b
                }));
                slot += 1;
            }
            mine.reverse();
            free.push(mine);
        }
        Self {
            devices,
            outstanding: vec![0; setup.sds.len()],
            finished: vec![false; setup.sds.len()],
            free,
            inflight: (0..slot).map(|_| None).collect(),
            read_bufs,
            write_bufs,
            stats: (0..setup.wds).map(|_| Default::default()).collect(),
            errors: 0,
            first_errors: Vec::new(),
            counter: (setup.id as u64) << 40,
            rng: ChaCha8Rng::seed_from_u64(setup.seed),
            index: 1,
        }
    }

    /// The main loop; returns why it ended early, if it did.
    fn run(
        &mut self,
        engine: &mut dyn IoEngine,
        setup: &WorkerSetup,
        t0: &RunTime,
    ) -> Option<String> {
        let interval = setup.interval_ns.max(1);
        let mut next_tick = interval;
        let mut reason = None;
        let n = setup.sds.len();
        let mut first = 0usize;
        loop {
            let now = t0.now_ns();
            if now >= setup.end_ns || setup.shared.stop.load(Ordering::Relaxed) {
                break;
            }
            if now >= next_tick {
                let tick = self.tick(setup, next_tick);
                if setup.tx.send(Msg::Tick(Box::new(tick))).is_err() {
                    break;
                }
                self.index += 1;
                next_tick += interval;
                continue;
            }
            let mut wake = next_tick.min(setup.end_ns);
            for k in 0..n {
                let i = (first + k) % n;
                if self.finished[i] {
                    continue;
                }
                while self.outstanding[i] < setup.sds[i].slots {
                    let next = lock(&setup.sds[i].sched).next(now);
                    match next {
                        Next::Io(io) => {
                            if let Err(e) = self.issue(engine, setup, i, io) {
                                // The schedule claimed the blocks for this I/O:
                                // give them back, or other threads wait forever.
                                if let Some(v) = &mut lock(&setup.sds[i].sched).validation {
                                    v.release(io.at, io.len, None);
                                }
                                setup
                                    .shared
                                    .stop_with(format!("sd={}: {e}", setup.sds[i].name));
                                reason = Some(e);
                                break;
                            }
                        }
                        Next::WaitUntil(t) => {
                            wake = wake.min(t);
                            break;
                        }
                        Next::Busy => {
                            // Blocks held by another thread: look again shortly.
                            wake = wake.min(now + 20_000);
                            break;
                        }
                        Next::Finished => {
                            self.finished[i] = true;
                            break;
                        }
                    }
                }
            }
            first = (first + 1) % n.max(1);
            if reason.is_some() {
                break;
            }
            if engine.in_flight() == 0 {
                if self.finished.iter().all(|f| *f) {
                    reason = Some(crate::result::ENDED_AT_EOF.into());
                    break;
                }
                t0.sleep_until_ns(wake);
                continue;
            }
            let now = t0.now_ns();
            let timeout = Duration::from_nanos(wake.saturating_sub(now).max(1_000));
            if let Err(e) = engine.wait_timeout(1, timeout) {
                let why = format!("the I/O engine failed: {e}");
                setup.shared.stop_with(why.clone());
                reason = Some(why);
                break;
            }
            self.reap(engine, setup, t0);
        }
        self.drain(engine, setup, t0, reason)
    }

    /// Let what was issued finish; it belongs to the last interval. A device
    /// that does not answer at all is given DRAIN_MAX, then reported.
    /// Returns why the run ended early, if it did.
    fn drain(
        &mut self,
        engine: &mut dyn IoEngine,
        setup: &WorkerSetup,
        t0: &RunTime,
        reason: Option<String>,
    ) -> Option<String> {
        let deadline = Instant::now() + DRAIN_MAX;
        while engine.in_flight() > 0 {
            if Instant::now() >= deadline {
                let why = format!(
                    "{} I/Os had not completed {} s after the run ended; the device may be hung",
                    engine.in_flight(),
                    DRAIN_MAX.as_secs()
                );
                setup.shared.stop_with(why.clone());
                return reason.or(Some(why));
            }
            if engine.wait_timeout(1, Duration::from_millis(100)).is_err() {
                break;
            }
            self.reap(engine, setup, t0);
        }
        reason
    }

    fn issue(
        &mut self,
        engine: &mut dyn IoEngine,
        setup: &WorkerSetup,
        i: usize,
        io: IoSpec,
    ) -> Result<(), String> {
        let sd = &setup.sds[i];
        let Some(slot) = self.free[i].pop() else {
            return Err("invariant: a free slot under the sd's thread count".into());
        };
        let pool = if io.write {
            &mut self.write_bufs
        } else {
            &mut self.read_bufs
        };
        let Some(mut buf) = pool[slot as usize].take() else {
            return Err("invariant: a slot's buffer is home when the slot is free".into());
        };
        buf.set_len(io.len as usize);
        if io.write {
            self.counter += 1;
            setup
                .pattern
                .stamp(&mut buf, io.at, self.counter, &mut self.rng);
            if sd.validate {
                let sched = lock(&sd.sched);
                if let Some(v) = &sched.validation {
                    let unit = v.unit;
                    for (k, chunk) in buf.chunks_mut(unit as usize).enumerate() {
                        seal_unit(
                            chunk,
                            UnitHeader {
                                key: io.key,
                                sd_tag: v.sd_tag,
                                lba: io.at / unit + k as u64,
                            },
                        );
                    }
                }
            }
        }
        let offset_bytes = io.at + sd.offset_bytes;
        let op = if io.write {
            Op::Write {
                offset_bytes,
                buf,
                fua: sd.sync_writes,
            }
        } else {
            Op::Read { offset_bytes, buf }
        };
        let request = Request {
            device: self.devices[i],
            tag: u64::from(slot),
            op,
        };
        if engine.submit(request).is_err() {
            return Err("invariant: the engine has room for the sd's threads".into());
        }
        self.inflight[slot as usize] = Some(InFlight {
            sd: i,
            wd: io.wd,
            intended_ns: io.intended_ns,
            at: io.at,
            len: io.len,
            write: io.write,
            key: io.key,
        });
        self.outstanding[i] += 1;
        Ok(())
    }

    fn reap(&mut self, engine: &mut dyn IoEngine, setup: &WorkerSetup, t0: &RunTime) {
        let now = t0.now_ns();
        while let Some(c) = engine.pop_completion() {
            let slot = c.tag as usize;
            let Some(io) = self.inflight.get_mut(slot).and_then(Option::take) else {
                continue;
            };
            let sd = &setup.sds[io.sd];
            self.outstanding[io.sd] -= 1;
            self.free[io.sd].push(slot as u32);
            let ok = c.result.is_ok();
            match &c.result {
                Ok(_) => {
                    let s = &mut self.stats[io.wd][usize::from(io.write)];
                    s.ios += 1;
                    s.bytes += io.len;
                    s.hist.record(now.saturating_sub(io.intended_ns));
                }
                Err(e) => {
                    self.errors += 1;
                    if self.first_errors.len() < ERRORS_KEPT {
                        self.first_errors
                            .push(format!("sd={} ({}): {e}", sd.name, sd.lun));
                    }
                    let total = setup.shared.errors.fetch_add(1, Ordering::Relaxed) + 1;
                    if total >= setup.shared.error_limit {
                        setup.shared.stop_with(format!(
                            "stopped after {total} I/O or data errors (data_errors={})",
                            setup.shared.error_limit
                        ));
                    }
                }
            }
            if sd.validate {
                let mut sched = lock(&sd.sched);
                if let Some(v) = &mut sched.validation {
                    if !io.write && ok {
                        if let Some(buf) = &c.buf {
                            let mut bad = 0u64;
                            for (k, chunk) in buf.chunks(v.unit as usize).enumerate() {
                                let lba = io.at / v.unit + k as u64;
                                let key = v.key(lba);
                                if key == 0 {
                                    continue;
                                }
                                v.checked += 1;
                                if let Some(problem) = check_unit(
                                    chunk,
                                    UnitHeader {
                                        key,
                                        sd_tag: v.sd_tag,
                                        lba,
                                    },
                                ) {
                                    bad += 1;
                                    v.errors.push(ValidationError {
                                        sd: sd.name.clone(),
                                        lun: sd.lun.clone(),
                                        offset_bytes: lba * v.unit + sd.offset_bytes,
                                        lba,
                                        unit_bytes: v.unit,
                                        problem,
                                    });
                                }
                            }
                            if bad > 0 {
                                let total =
                                    setup.shared.errors.fetch_add(bad, Ordering::Relaxed) + bad;
                                if total >= setup.shared.error_limit {
                                    setup.shared.stop_with(format!(
                                        "stopped after {total} I/O or data errors (data_errors={})",
                                        setup.shared.error_limit
                                    ));
                                }
                            }
                        }
                    }
                    v.release(io.at, io.len, io.write.then_some((io.key, ok)));
                }
            }
            if let Some(buf) = c.buf {
                let pool = if io.write {
                    &mut self.write_bufs
                } else {
                    &mut self.read_bufs
                };
                pool[slot] = Some(buf);
            }
        }
    }

    /// Close an interval. Arrivals due by its end are admitted first, so a
    /// stall with every thread busy still counts them as due.
    fn tick(&mut self, setup: &WorkerSetup, end_ns: u64) -> Tick {
        let stats = std::mem::replace(
            &mut self.stats,
            (0..setup.wds).map(|_| Default::default()).collect(),
        );
        let mut tick = Tick {
            worker: setup.id,
            index: self.index,
            end_ns,
            stats,
            scheduled: 0,
            not_issued: 0,
            errors: std::mem::take(&mut self.errors),
            first_errors: std::mem::take(&mut self.first_errors),
            checked: 0,
            written: 0,
            validation_errors: Vec::new(),
        };
        for sd in &setup.sds {
            let mut sched = lock(&sd.sched);
            // Admitted but never issued by the end, they count as scheduled and
            // not completed: a stall at the end of a run lowers the share held.
            sched.admit(end_ns.min(setup.end_ns));
            let (scheduled, not_issued, _) = sched.take_counters();
            tick.scheduled += scheduled;
            tick.not_issued += not_issued;
            if let Some(v) = &mut sched.validation {
                tick.checked += std::mem::take(&mut v.checked);
                tick.written += std::mem::take(&mut v.written);
                tick.validation_errors.append(&mut v.errors);
            }
        }
        tick
    }
}
