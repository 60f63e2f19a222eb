//! A run: open the dataset, start the log writer and the database writer,
//! release the sessions together, measure interval by interval, stop, and
//! shut down cleanly (a final checkpoint, the log written, the headers marked
//! clean) so that `verify` finds every change on disk.
//!
//! The measured window starts at the end of the warm-up (a whole number of
//! intervals) and ends when the sessions have stopped: Cairn's counters and the
//! kernel's `/proc/diskstats` are sampled at the same two instants, so the
//! report can set one against the other.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_io::host::Host;
use cairn_io::poison::Recover;
use cairn_io::{DeviceFile, EngineKind};

use super::cache::{BufferCache, CacheConfig};
use super::conf::ParsedConf;
use super::dataset::{self, DatasetState, OpenOptions};
use super::dbwr::{Dbwr, DbwrConfig};
use super::layout::HEADER_BYTES;
use super::redo::{RedoConfig, RedoLog, RedoSummary};
use super::result::{
    ConfRecord, CrossCheck, EventRecord, IntervalEvent, OltpInterval, OltpResult, Settings,
    StatValue, Totals, INTERVAL_BUCKETS_US, OLTP_SCHEMA, OLTP_SCHEMA_VERSION,
};
use super::session::{Gate, Hotspot, ReadPath, Session, Shared, Think, Workload};
use super::stats::{Counts, Event, Stat, StatsHub};
use super::{Health, OltpError};
use cairn_host::{CpuSample, DiskStatsSnapshot};
use cairn_kit::model::{show_duration, INTERVAL_MIN};
use cairn_kit::result::{ErrorSummary, TargetInfo};

/// How a run is set up beyond slob.conf.
pub struct RunOptions<'a> {
    pub host: &'a Host,
    pub conf: &'a ParsedConf,
    pub conf_path: String,
    /// runit.sh's schema count: schemas 1..=n are used.
    pub schemas: u32,
    /// Overrides THREADS_PER_SCHEMA.
    pub threads_per_schema: Option<u32>,
    pub cache_bytes: u64,
    pub block_size: u32,
    pub read_path: ReadPath,
    pub batch_reads: u32,
    pub warmup: Duration,
    pub interval: Duration,
    pub checkpoint_interval: Duration,
    pub log_buffer_bytes: u64,
    pub seed: u64,
    pub interrupted: &'a AtomicBool,
    /// The engine of the writers and the sessions' batched reads (`--engine`):
    /// io_uring, pread/pwrite, or io_uring where the kernel allows it.
    pub engine: EngineKind,
}

/// The defaults a DBA would expect of a SLOB-like run.
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;
pub const DEFAULT_LOG_BUFFER_BYTES: u64 = 16 << 20;
pub const DEFAULT_BATCH_READS: u32 = 32;
/// Blocks per multiblock read: 1 MiB of 8 KiB blocks, as Oracle's default
/// db_file_multiblock_read_count gives on most platforms.
pub const MULTIBLOCK_READ_BYTES: u64 = 1 << 20;
/// Buffers a session may hold at once beyond its batch (index leaf, one pin, slack).
const BUFFERS_PER_SESSION_EXTRA: u64 = 4;

/// What a run produced, plus what the tests of the emulation check.
pub struct RunOutcome {
    pub result: OltpResult,
    /// Every count from the sessions' release to the end of shutdown
    /// (warm-up, window and the final checkpoint): the figures that must balance exactly.
    pub lifetime: Counts,
    pub redo: RedoSummary,
    /// Operations each session did.
    pub operations: Vec<u64>,
}

/// Run the SLOB workload of `opts.conf` on a loaded dataset; `on_interval`
/// sees each interval as it ends (for a live display).
pub fn run_oltp(
    targets: &[PathBuf],
    redo_path: &Path,
    opts: &RunOptions,
    on_interval: &mut dyn FnMut(&OltpInterval),
) -> Result<RunOutcome, OltpError> {
    let conf = &opts.conf.conf;
    conf.check_scale(opts.block_size)?;
    let schemas = opts.schemas;
    if schemas == 0 {
        return Err(OltpError::Usage("--schemas must be at least 1".into()));
    }
    let threads = opts.threads_per_schema.unwrap_or(conf.threads_per_schema);
    if !(1..=1024).contains(&threads) {
        return Err(OltpError::Usage(format!(
            "--threads {threads}: give 1 to 1024 sessions per schema"
        )));
    }
    const SESSIONS_MAX: u32 = 16_384;
    let Some(sessions) = schemas.checked_mul(threads).filter(|&n| n <= SESSIONS_MAX) else {
        return Err(OltpError::Usage(format!(
            "{schemas} schemas x {threads} threads per schema is more than {SESSIONS_MAX} sessions: lower --schemas or --threads"
        )));
    };
    if opts.interval < INTERVAL_MIN {
        return Err(OltpError::Usage(format!(
            "--interval {} is shorter than {}, the shortest interval; expected at least {}, such as 5s",
            show_duration(opts.interval),
            show_duration(INTERVAL_MIN),
            show_duration(INTERVAL_MIN)
        )));
    }
    let table_blocks = conf.scale.blocks(opts.block_size);
    let scan_blocks = conf.scan_table_sz.blocks(opts.block_size);
    let mut data = dataset::open(
        targets,
        redo_path,
        &OpenOptions {
            host: opts.host,
            block_size: opts.block_size,
            table_blocks,
            scan_blocks,
            schemas,
        },
    )?;
    let layout = data.layout;
    let block = layout.block_bytes();

    let cache_buffers = opts.cache_bytes / block;
    let batch = opts.batch_reads.max(1);
    let needed = u64::from(sessions) * (u64::from(batch) + BUFFERS_PER_SESSION_EXTRA) + 64;
    if cache_buffers < needed {
        return Err(OltpError::Usage(format!(
            "--cache {} MiB holds {cache_buffers} buffers of {block} bytes; {sessions} sessions reading up to {batch} blocks at once need at least {needed} ({} MiB): raise --cache or lower --batch-reads",
            opts.cache_bytes >> 20,
            (needed * block).div_ceil(1 << 20)
        )));
    }
    if opts.log_buffer_bytes < super::redo::LOG_BUFFER_MIN_BYTES as u64 {
        return Err(OltpError::Usage(format!(
            "--log-buffer {} bytes is too small: give at least {} KiB",
            opts.log_buffer_bytes,
            super::redo::LOG_BUFFER_MIN_BYTES >> 10
        )));
    }
    check_memory(opts, cache_buffers)?;
    let redo_geometry = data.redo.geometry().clone();
    let redo_block = redo_geometry.logical_sector_bytes.max(512);
    let max_write = redo_geometry
        .max_transfer_aligned_bytes()
        .max(u64::from(redo_block));
    let mbrc = (MULTIBLOCK_READ_BYTES / block).clamp(1, layout.extent_blocks()) as u32;
    let mbrc = data
        .data
        .iter()
        .map(|f| (f.geometry().max_transfer_aligned_bytes() / block).max(1) as u32)
        .fold(mbrc, u32::min);
    // Oracle reads tables bigger than about 2% of the cache around it.
    let direct_threshold = (cache_buffers / 50).max(1);

    let workload = Workload {
        update_pct: conf.update_pct,
        scan_pct: conf.scan_pct,
        work_unit: conf.work_unit,
        redo_columns: conf.redo_stress.columns(),
        hotspot: conf.do_hotspot.then(|| {
            let per_mb = (1u64 << 20) / block;
            Hotspot {
                start: (conf.hotspot_offset_mb * per_mb).min(table_blocks.saturating_sub(1)),
                keys: (conf.hotspot_mb * per_mb).max(1),
                frequency: u64::from(conf.hotspot_frequency.max(1)),
            }
        }),
        hot_schema_frequency: u64::from(conf.hot_schema_frequency),
        think: (conf.think_tm_frequency > 0).then_some(Think {
            frequency: u64::from(conf.think_tm_frequency),
            min_s: conf.think_tm_min_s,
            max_s: conf.think_tm_max_s,
        }),
        work_loop: conf.work_loop,
        read_path: opts.read_path,
        batch_reads: batch,
        direct_read_threshold_blocks: direct_threshold,
        multiblock_read_count: mbrc,
    };
    let mut settings = Settings {
        sessions,
        schemas,
        threads_per_schema: threads,
        cache_bytes: cache_buffers * block,
        cache_buffers,
        read_path: opts.read_path.name().into(),
        batch_reads: batch,
        direct_read_threshold_blocks: direct_threshold,
        multiblock_read_count: mbrc,
        log_buffer_bytes: opts.log_buffer_bytes,
        checkpoint_interval_s: opts.checkpoint_interval.as_secs_f64(),
        interval_s: opts.interval.as_secs_f64(),
        run_time_s: conf.run_time_s as f64,
        work_loop: conf.work_loop,
        redo_block_bytes: redo_block,
        // What the log writer's engine turns out to be, below.
        engine: String::new(),
    };

    let data_infos: Vec<TargetInfo> = data
        .data
        .iter()
        .zip(&data.data_paths)
        .enumerate()
        .map(|(i, (f, p))| target_info(opts.host, &format!("data{}", i + 1), p, f))
        .collect();
    let redo_info = target_info(opts.host, "redo", &data.redo_path, &data.redo);

    // Everything that can be refused is refused before the dataset is marked
    // running: one file handle per data target per session, taken now, so a
    // low `ulimit -n` is a clear error rather than a half-started run.
    raise_open_files_limit();
    let mut session_files: Vec<Vec<DeviceFile>> = Vec::with_capacity(sessions as usize);
    for _ in 0..sessions {
        let files = data.data.iter().map(dup).collect::<Result<Vec<_>, _>>();
        match files {
            Ok(f) => session_files.push(f),
            Err(e) => {
                return Err(OltpError::Usage(format!(
                    "{sessions} sessions over {} data targets need about {} open files ({e}): raise `ulimit -n` or lower --threads",
                    data.data.len(),
                    u64::from(sessions) * (2 * data.data.len() as u64 + 1) + 64
                )))
            }
        }
    }
    let health = Arc::new(Health::new());
    let hub = StatsHub::new();
    let redo = RedoLog::start_on(
        dup(&data.redo)?,
        RedoConfig {
            log_buffer_bytes: opts.log_buffer_bytes as usize,
            start: data.redo_start,
            end: data.redo_end,
            block_bytes: redo_block,
            max_write_bytes: max_write,
            dataset: data.id,
        },
        opts.engine,
        hub.slot(),
        Arc::clone(&health),
    )?;
    // The writers and the sessions' batches all use this kind of engine;
    // the log writer's says what it gave on this kernel.
    settings.engine = redo.engine_name().to_string();
    let cache = Arc::new(BufferCache::new(CacheConfig {
        buffers: cache_buffers as usize,
        block_size: block as usize,
    }));
    let data_files = match data.data.iter().map(dup).collect::<Result<Vec<_>, _>>() {
        Ok(f) => f,
        Err(e) => {
            let _ = redo.stop();
            return Err(e);
        }
    };
    let dbwr = match Dbwr::start(
        Arc::clone(&cache),
        Arc::clone(&redo),
        data_files,
        DbwrConfig {
            layout,
            batch: 128,
            checkpoint_interval: opts.checkpoint_interval,
            engine: opts.engine,
        },
        hub.slot(),
        Arc::clone(&health),
    ) {
        Ok(d) => d,
        Err(e) => {
            let _ = redo.stop();
            return Err(e);
        }
    };

    let shared = Arc::new(Shared {
        layout,
        dataset: data.id,
        cache: Arc::clone(&cache),
        redo: Arc::clone(&redo),
        workload,
        engine: opts.engine,
        health: Arc::clone(&health),
        stop: AtomicBool::new(false),
        corruptions: Mutex::new(Vec::new()),
    });
    let gate = Arc::new(Gate::new());
    let ready = Arc::new(AtomicU32::new(0));
    let finished = Arc::new(AtomicU32::new(0));
    let mut handles = Vec::with_capacity(sessions as usize);
    let mut start_error = None;
    for (s, files) in (0..sessions).zip(session_files) {
        let (my_shared, my_gate) = (Arc::clone(&shared), Arc::clone(&gate));
        let mut tally = Tally {
            ready: Arc::clone(&ready),
            finished: Arc::clone(&finished),
            health: Arc::clone(&health),
            session: s,
            counted_ready: false,
        };
        let slot = hub.slot();
        let seed = opts.seed;
        let spawned = std::thread::Builder::new()
            .name(format!("cairn-session{}", s + 1))
            .spawn(move || {
                let built = Session::new(s, s % schemas, Arc::clone(&my_shared), slot, files, seed);
                tally.now_ready();
                match built {
                    Ok(session) => session.run(&my_gate),
                    Err(e) => {
                        my_shared.health.fail(format!("session {}: {e}", s + 1));
                        Err(e)
                    }
                }
            });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                start_error = Some(OltpError::os(format!("starting session {}", s + 1), e));
                break;
            }
        }
    }
    // Wait until every session is built (or one failed), then mark the
    // dataset running and release them together.
    while start_error.is_none()
        && !health.failed()
        && ready.load(Ordering::Acquire) < handles.len() as u32
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    if start_error.is_none() {
        if let Some(e) = health.error() {
            start_error = Some(OltpError::Usage(e));
        }
    }
    if start_error.is_none() {
        if let Err(e) = data.mark(DatasetState::Running) {
            start_error = Some(e);
        }
    }
    if let Some(e) = start_error {
        shared.stop.store(true, Ordering::Release);
        gate.open();
        for h in handles {
            let _ = h.join();
        }
        let _ = dbwr.stop();
        let _ = redo.stop();
        return Err(e);
    }

    // ---- measure ----
    let started_at_wall = cairn_host::utc_now_rfc3339();
    let devices = device_names(opts.host, &data.data_paths, &data.redo_path);
    gate.open();
    let t0 = Instant::now();
    let mut monitor = Monitor::new(opts.host, &devices, t0);
    let warm_intervals = (opts.warmup.as_secs_f64() / opts.interval.as_secs_f64()).ceil() as u32;
    let warmup = opts.interval * warm_intervals;
    // With WORK_LOOP, RUN_TIME (if not 0) still bounds the run.
    let run_for = if conf.work_loop > 0 && conf.run_time_s == 0 {
        None
    } else {
        Some(warmup + Duration::from_secs(conf.run_time_s))
    };
    let mut window_start = if warm_intervals == 0 {
        Some((
            monitor.last_cpu,
            monitor.last_disk.clone(),
            t0,
            started_at_wall.clone(),
        ))
    } else {
        None
    };
    let mut intervals: Vec<OltpInterval> = Vec::new();
    let mut window = Counts::default();
    let mut lifetime = Counts::default();
    let mut ended_early = None;
    let mut index = 0u32;
    loop {
        let tick = t0 + opts.interval * (index + 1);
        let stop_reason = wait_until(
            tick,
            run_for.map(|d| t0 + d),
            opts.interrupted,
            &health,
            &finished,
            sessions,
        );
        if let Some(reason) = stop_reason {
            if let StopReason::Interrupted = reason {
                ended_early = Some("interrupted".to_string());
            }
            break;
        }
        index += 1;
        let counts = hub.drain();
        let is_warm = index <= warm_intervals;
        let rec = monitor.interval(index, &counts, is_warm);
        lifetime.add(&counts);
        if !is_warm {
            window.add(&counts);
        }
        on_interval(&rec);
        intervals.push(rec);
        if index == warm_intervals {
            window_start = Some((
                monitor.last_cpu,
                monitor.last_disk.clone(),
                monitor.last_at,
                cairn_host::utc_now_rfc3339(),
            ));
        }
    }
    shared.stop.store(true, Ordering::Release);
    let mut operations = Vec::with_capacity(handles.len());
    let mut session_error = None;
    for h in handles {
        match h.join() {
            Ok(Ok(n)) => operations.push(n),
            Ok(Err(e)) => {
                operations.push(0);
                session_error.get_or_insert(e.to_string());
            }
            Err(_) => {
                operations.push(0);
                session_error.get_or_insert("a session thread panicked".to_string());
            }
        }
    }
    // The last, partial interval ends when every session has stopped.
    index += 1;
    let counts = hub.drain();
    let is_warm = window_start.is_none();
    let rec = monitor.interval(index, &counts, is_warm);
    lifetime.add(&counts);
    if !is_warm {
        window.add(&counts);
    }
    if rec.seconds > 0.0 {
        on_interval(&rec);
        intervals.push(rec);
    }
    if window_start.is_none() && ended_early.is_none() {
        ended_early = Some(format!(
            "the run ended during its {:.0} s warm-up, after {:.1} s: nothing was measured; shorten --warmup or lengthen RUN_TIME / WORK_LOOP",
            warmup.as_secs_f64(),
            monitor.last_at.duration_since(t0).as_secs_f64()
        ));
    }
    let (cpu_a, disk_a, window_t0, begin_wall) = window_start.unwrap_or((
        monitor.first_cpu,
        monitor.first_disk.clone(),
        t0,
        started_at_wall,
    ));
    let elapsed_s = monitor.last_at.duration_since(window_t0).as_secs_f64();
    let ended_at = cairn_host::utc_now_rfc3339();

    // ---- shut down: a final checkpoint, the log written, the headers clean ----
    let dbwr_outcome = dbwr.stop();
    let redo_outcome = redo.stop();
    let tail = hub.drain();
    lifetime.add(&tail);
    let mut shutdown_error = None;
    if let Err(e) = &dbwr_outcome {
        shutdown_error.get_or_insert(format!("database writer: {e}"));
    }
    let redo_summary = match redo_outcome {
        Ok(s) => s,
        Err(e) => {
            shutdown_error.get_or_insert(format!("log writer: {e}"));
            RedoSummary::default()
        }
    };
    if shutdown_error.is_none() && !health.failed() {
        data.mark(DatasetState::Clean)?;
    }
    if ended_early.is_none() {
        ended_early = health.error().or(session_error).or(shutdown_error.clone());
    }

    // The corruption messages kept, each pushed whole: readable even after a
    // session panicked (that panic already ends the run as failed).
    let corruptions = shared.corruptions.lock_or_recover().clone();
    let mut first = corruptions;
    if let Some(e) = &ended_early {
        if e != "interrupted" {
            first.insert(0, e.clone());
        }
    }
    let errors = ErrorSummary {
        count: window.get(Stat::BlockCorruptions)
            + u64::from(ended_early.as_deref().is_some_and(|e| e != "interrupted")),
        first,
    };
    let physical_ios = window.get(Stat::PhysicalReadIoRequests)
        + window.get(Stat::PhysicalWriteIoRequests)
        + window.get(Stat::RedoWriteIoRequests);
    let cpu = cairn_host::cpu_summary(&cpu_a, &monitor.last_cpu, physical_ios);
    let devices_window = cairn_host::device_stats(&disk_a, &monitor.last_disk);
    let crosscheck = cross_check(
        &disk_a,
        &monitor.last_disk,
        &data_infos,
        &redo_info,
        &window,
        redo_block,
    );

    let result = OltpResult {
        schema: OLTP_SCHEMA.into(),
        schema_version: OLTP_SCHEMA_VERSION,
        tool: cairn_host::tool_info(),
        started_at: begin_wall,
        ended_at,
        seed: opts.seed,
        environment: cairn_host::environment(opts.host),
        conf: ConfRecord {
            path: opts.conf_path.clone(),
            text: opts.conf.text.clone(),
            effective: effective_settings(opts, threads),
            ignored: opts.conf.ignored.iter().map(|(k, _)| k.clone()).collect(),
        },
        settings,
        shape: layout.shape,
        data_targets: data_infos,
        redo_target: redo_info,
        warmup_s: window_t0.duration_since(t0).as_secs_f64(),
        elapsed_s,
        totals: totals(&window),
        intervals,
        cpu,
        devices: devices_window,
        crosscheck,
        ended_early,
        errors,
    };
    Ok(RunOutcome {
        result,
        lifetime,
        redo: redo_summary,
        operations,
    })
}

/// The settings in effect, slob.conf's keys first, then the run's own.
fn effective_settings(opts: &RunOptions, threads: u32) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = opts
        .conf
        .conf
        .effective()
        .into_iter()
        .map(|(k, v)| {
            if k == "THREADS_PER_SCHEMA" {
                (k, threads.to_string())
            } else {
                (k, v)
            }
        })
        .collect();
    out.push(("schemas".into(), opts.schemas.to_string()));
    out.push(("block_size".into(), opts.block_size.to_string()));
    out
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
fn totals(c: &Counts) -> Totals {
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
fn device_names(host: &Host, data: &[PathBuf], redo: &Path) -> Vec<String> {
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

fn target_info(host: &Host, name: &str, path: &Path, f: &DeviceFile) -> TargetInfo {
    let mut info =
        cairn_kit::target::target_info(name, f, HEADER_BYTES, f.geometry().size_bytes, false);
    info.path = path.display().to_string();
    info.devices = cairn_host::devices_for(host, path);
    info
}

/// Cairn's counts against the kernel's, on the devices the targets sit on
/// directly: the data devices together, and the redo device (or, when the redo
/// shares a device with data, everything together). Requests the kernel merged
/// count as issued (completed + merged), so batching in the block layer does
/// not hide any.
fn cross_check(
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

fn dup(f: &DeviceFile) -> Result<DeviceFile, OltpError> {
    f.try_clone()
        .map_err(|e| OltpError::os(format!("duplicating {}", f.path().display()), e))
}

/// Counts a session thread as ready and, however it ends (a panic too), as
/// finished: the run never waits for a session that is gone.
struct Tally {
    ready: Arc<AtomicU32>,
    finished: Arc<AtomicU32>,
    health: Arc<Health>,
    session: u32,
    counted_ready: bool,
}

impl Tally {
    fn now_ready(&mut self) {
        if !self.counted_ready {
            self.counted_ready = true;
            self.ready.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.health
                .fail(format!("session {} panicked", self.session + 1));
        }
        self.now_ready();
        self.finished.fetch_add(1, Ordering::AcqRel);
    }
}

/// The buffer cache and the log buffer live in this process's memory: refuse
/// sizes the machine cannot hold (instead of aborting on allocation, or
/// swapping and measuring the swap).
fn check_memory(opts: &RunOptions, cache_buffers: u64) -> Result<(), OltpError> {
    if cache_buffers >= u64::from(u32::MAX) {
        return Err(OltpError::Usage(format!(
            "--cache {} MiB is more buffers than Cairn's cache addresses ({}): give a smaller --cache",
            opts.cache_bytes >> 20,
            u32::MAX
        )));
    }
    let meminfo = std::fs::read_to_string(opts.host.proc.join("meminfo")).unwrap_or_default();
    if let Some(total) = cairn_host::environment::mem_total_bytes(&meminfo) {
        let asked = opts.cache_bytes.saturating_add(opts.log_buffer_bytes);
        if asked > total / 10 * 8 {
            return Err(OltpError::Usage(format!(
                "--cache {} MiB and --log-buffer {} MiB need more than 80% of this machine's memory ({} MiB): give a smaller --cache",
                opts.cache_bytes >> 20,
                opts.log_buffer_bytes >> 20,
                total >> 20
            )));
        }
    }
    Ok(())
}

/// Sessions hold a few file handles each: raise the soft limit on open files
/// to the hard one, as database start-up scripts do.
fn raise_open_files_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write one rlimit through a valid pointer to a local.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
