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
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cairn_io::host::Host;
use cairn_io::poison::Recover;
use cairn_io::{DeviceFile, EngineKind};

use super::cache::{BufferCache, CacheConfig};
use super::conf::ParsedConf;
use super::dataset::{self, Dataset, DatasetState, OpenOptions};
use super::dbwr::{Dbwr, DbwrConfig};
use super::layout::{Shape, HEADER_BYTES};
use super::redo::{RedoConfig, RedoLog, RedoSummary};
use super::result::{
    ConfRecord, OltpInterval, OltpResult, Settings, OLTP_SCHEMA, OLTP_SCHEMA_VERSION,
};
use super::session::{Gate, Hotspot, ReadPath, Session, Shared, Think, Workload};
use super::stats::{Counts, Stat, StatsHub};
use super::{Health, OltpError};
use cairn_kit::model::{show_duration, INTERVAL_MIN};
use cairn_kit::result::{ErrorSummary, TargetInfo};
use measure::{cross_check, device_names, totals, Measure, Measured, Schedule};

mod measure;

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
    let (sessions, threads) = checked_sessions(opts)?;
    let table_blocks = conf.scale.blocks(opts.block_size);
    let mut data = dataset::open(
        targets,
        redo_path,
        &OpenOptions {
            host: opts.host,
            block_size: opts.block_size,
            table_blocks,
            scan_blocks: conf.scan_table_sz.blocks(opts.block_size),
            schemas: opts.schemas,
        },
    )?;
    let sizing = Sizing::of(opts, &data, sessions)?;
    let infos = Targets::of(opts.host, &data);

    // Everything that can be refused is refused before the dataset is marked
    // running: one file handle per data target per session, taken now, so a
    // low `ulimit -n` is a clear error rather than a half-started run.
    let session_files = session_files(&data, sessions)?;
    let health = Arc::new(Health::new());
    let hub = StatsHub::new();
    let writers = Writers::start(opts, &data, &sizing, &hub, &health)?;
    // The writers and the sessions' batches all use this kind of engine;
    // the log writer's says what it gave on this kernel.
    let settings = settings(opts, sessions, threads, &sizing, writers.redo.engine_name());
    let shared = Arc::new(Shared {
        layout: data.layout,
        dataset: data.id,
        cache: Arc::clone(&writers.cache),
        redo: Arc::clone(&writers.redo),
        workload: workload(opts, &sizing, table_blocks),
        engine: opts.engine,
        health: Arc::clone(&health),
        stop: AtomicBool::new(false),
        corruptions: Mutex::new(Vec::new()),
    });
    let mut crew = Crew::spawn(opts, &shared, &hub, &health, session_files);
    if let Err(e) = crew
        .wait_ready(&health)
        .and_then(|()| data.mark(DatasetState::Running))
    {
        crew.abandon(&shared);
        writers.stop_quietly();
        return Err(e);
    }

    // ---- measure ----
    let started_at_wall = cairn_host::utc_now_rfc3339();
    let devices = device_names(opts.host, &data.data_paths, &data.redo_path);
    crew.gate.open();
    let t0 = Instant::now();
    let mut measure = Measure::new(opts.host, &devices, t0, started_at_wall, &schedule(opts));
    let mut ended_early = measure.until_stopped(
        opts.interrupted,
        &health,
        &crew.finished,
        sessions,
        &hub,
        on_interval,
    );
    shared.stop.store(true, Ordering::Release);
    let (operations, session_error) = crew.join();
    measure.last_interval(&hub, on_interval);
    let mut measured = measure.close(&mut ended_early);

    let (redo_summary, shutdown_error) =
        shut_down(writers, &hub, &mut measured.lifetime, &mut data, &health)?;
    if ended_early.is_none() {
        ended_early = health.error().or(session_error).or(shutdown_error);
    }
    // The corruption messages kept, each pushed whole: readable even after a
    // session panicked (that panic already ends the run as failed).
    let corruptions = shared.corruptions.lock_or_recover().clone();
    let lifetime = std::mem::take(&mut measured.lifetime);
    let result = oltp_result(
        opts,
        settings,
        data.layout.shape,
        infos,
        measured,
        ended_early,
        corruptions,
    );
    Ok(RunOutcome {
        result,
        lifetime,
        redo: redo_summary,
        operations,
    })
}

/// The options refused before anything is opened: the scale, the number of
/// sessions (schemas × threads per schema) and the interval. Returns the
/// sessions and the threads per schema.
fn checked_sessions(opts: &RunOptions) -> Result<(u32, u32), OltpError> {
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
    Ok((sessions, threads))
}

/// The run's sizes in blocks, buffers and bytes, from the options and the
/// targets' geometry.
struct Sizing {
    /// The dataset's block, bytes.
    block: u64,
    cache_buffers: u64,
    /// Single-block misses of one statement submitted together.
    batch: u32,
    redo_block: u32,
    /// The log writer's largest write, bytes.
    max_write: u64,
    /// Blocks per multiblock read.
    mbrc: u32,
    /// Scans of tables above this many blocks read around the cache.
    direct_threshold: u64,
}

impl Sizing {
    /// Size the run, refusing a cache, log buffer or memory that cannot hold it.
    fn of(opts: &RunOptions, data: &Dataset, sessions: u32) -> Result<Sizing, OltpError> {
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
        let redo_geometry = data.redo.geometry();
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
        Ok(Sizing {
            block,
            cache_buffers,
            batch,
            redo_block,
            max_write,
            mbrc,
            // Oracle reads tables bigger than about 2% of the cache around it.
            direct_threshold: (cache_buffers / 50).max(1),
        })
    }
}

/// What the sessions do, from slob.conf and the run's options.
fn workload(opts: &RunOptions, sizing: &Sizing, table_blocks: u64) -> Workload {
    let conf = &opts.conf.conf;
    Workload {
        update_pct: conf.update_pct,
        scan_pct: conf.scan_pct,
        work_unit: conf.work_unit,
        redo_columns: conf.redo_stress.columns(),
        hotspot: conf.do_hotspot.then(|| {
            let per_mb = (1u64 << 20) / sizing.block;
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
        batch_reads: sizing.batch,
        direct_read_threshold_blocks: sizing.direct_threshold,
        multiblock_read_count: sizing.mbrc,
    }
}

/// The run's settings as the result records them; `engine` is the one the
/// log writer got on this kernel.
fn settings(
    opts: &RunOptions,
    sessions: u32,
    threads: u32,
    sizing: &Sizing,
    engine: &str,
) -> Settings {
    let conf = &opts.conf.conf;
    Settings {
        sessions,
        schemas: opts.schemas,
        threads_per_schema: threads,
        cache_bytes: sizing.cache_buffers * sizing.block,
        cache_buffers: sizing.cache_buffers,
        read_path: opts.read_path.name().into(),
        batch_reads: sizing.batch,
        direct_read_threshold_blocks: sizing.direct_threshold,
        multiblock_read_count: sizing.mbrc,
        log_buffer_bytes: opts.log_buffer_bytes,
        checkpoint_interval_s: opts.checkpoint_interval.as_secs_f64(),
        interval_s: opts.interval.as_secs_f64(),
        run_time_s: conf.run_time_s as f64,
        work_loop: conf.work_loop,
        redo_block_bytes: sizing.redo_block,
        engine: engine.to_string(),
    }
}

/// The targets as the result describes them.
struct Targets {
    data: Vec<TargetInfo>,
    redo: TargetInfo,
}

impl Targets {
    /// Describe the dataset's targets: `data1`, `data2`, ... and `redo`.
    fn of(host: &Host, data: &Dataset) -> Targets {
        Targets {
            data: data
                .data
                .iter()
                .zip(&data.data_paths)
                .enumerate()
                .map(|(i, (f, p))| target_info(host, &format!("data{}", i + 1), p, f))
                .collect(),
            redo: target_info(host, "redo", &data.redo_path, &data.redo),
        }
    }
}

/// When the intervals end and the run does, from the options and slob.conf.
fn schedule(opts: &RunOptions) -> Schedule {
    let conf = &opts.conf.conf;
    Schedule {
        interval: opts.interval,
        warmup: opts.warmup,
        // With WORK_LOOP, RUN_TIME (if not 0) still bounds the run.
        run_time: if conf.work_loop > 0 && conf.run_time_s == 0 {
            None
        } else {
            Some(Duration::from_secs(conf.run_time_s))
        },
    }
}

/// One handle per data target for each session, with the open-files limit
/// raised first; too few descriptors is a usage error that names the fix.
fn session_files(data: &Dataset, sessions: u32) -> Result<Vec<Vec<DeviceFile>>, OltpError> {
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
    Ok(session_files)
}

/// The log writer, the database writer and the buffer cache they share with
/// the sessions.
struct Writers {
    redo: Arc<RedoLog>,
    dbwr: Dbwr,
    cache: Arc<BufferCache>,
}

impl Writers {
    /// Start the log writer, then the database writer over a handle of each
    /// data target; the log writer is stopped again if the other cannot start.
    fn start(
        opts: &RunOptions,
        data: &Dataset,
        sizing: &Sizing,
        hub: &StatsHub,
        health: &Arc<Health>,
    ) -> Result<Writers, OltpError> {
        let redo = RedoLog::start_on(
            dup(&data.redo)?,
            RedoConfig {
                log_buffer_bytes: opts.log_buffer_bytes as usize,
                start: data.redo_start,
                end: data.redo_end,
                block_bytes: sizing.redo_block,
                max_write_bytes: sizing.max_write,
                dataset: data.id,
            },
            opts.engine,
            hub.slot(),
            Arc::clone(health),
        )?;
        let cache = Arc::new(BufferCache::new(CacheConfig {
            buffers: sizing.cache_buffers as usize,
            block_size: sizing.block as usize,
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
                layout: data.layout,
                batch: 128,
                checkpoint_interval: opts.checkpoint_interval,
                engine: opts.engine,
            },
            hub.slot(),
            Arc::clone(health),
        ) {
            Ok(d) => d,
            Err(e) => {
                let _ = redo.stop();
                return Err(e);
            }
        };
        Ok(Writers { redo, dbwr, cache })
    }

    /// Stop both writers of a run that never started; the error that ended it
    /// is the one to report.
    fn stop_quietly(self) {
        let _ = self.dbwr.stop();
        let _ = self.redo.stop();
    }
}

/// The session threads, held at the gate until the run releases them together.
struct Crew {
    handles: Vec<JoinHandle<Result<u64, OltpError>>>,
    gate: Arc<Gate>,
    /// Sessions built (or gone), and sessions ended: see [`Tally`].
    ready: Arc<AtomicU32>,
    finished: Arc<AtomicU32>,
    /// A thread that could not be started; the threads before it were.
    spawn_error: Option<OltpError>,
}

impl Crew {
    /// Start a thread per session (one per element of `files`), each building
    /// its session and then waiting at the gate.
    fn spawn(
        opts: &RunOptions,
        shared: &Arc<Shared>,
        hub: &StatsHub,
        health: &Arc<Health>,
        files: Vec<Vec<DeviceFile>>,
    ) -> Crew {
        let schemas = opts.schemas;
        let mut crew = Crew {
            handles: Vec::with_capacity(files.len()),
            gate: Arc::new(Gate::new()),
            ready: Arc::new(AtomicU32::new(0)),
            finished: Arc::new(AtomicU32::new(0)),
            spawn_error: None,
        };
        for (s, files) in (0u32..).zip(files) {
            let (my_shared, my_gate) = (Arc::clone(shared), Arc::clone(&crew.gate));
            let mut tally = Tally {
                ready: Arc::clone(&crew.ready),
                finished: Arc::clone(&crew.finished),
                health: Arc::clone(health),
                session: s,
                counted_ready: false,
            };
            let slot = hub.slot();
            let seed = opts.seed;
            let spawned = std::thread::Builder::new()
                .name(format!("cairn-session{}", s + 1))
                .spawn(move || {
                    let built =
                        Session::new(s, s % schemas, Arc::clone(&my_shared), slot, files, seed);
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
                Ok(h) => crew.handles.push(h),
                Err(e) => {
                    crew.spawn_error =
                        Some(OltpError::os(format!("starting session {}", s + 1), e));
                    break;
                }
            }
        }
        crew
    }

    /// Wait until every session is built; the error of a thread that could
    /// not start or a session that failed to build.
    fn wait_ready(&mut self, health: &Health) -> Result<(), OltpError> {
        if let Some(e) = self.spawn_error.take() {
            return Err(e);
        }
        while !health.failed() && self.ready.load(Ordering::Acquire) < self.handles.len() as u32 {
            std::thread::sleep(Duration::from_millis(1));
        }
        match health.error() {
            Some(e) => Err(OltpError::Usage(e)),
            None => Ok(()),
        }
    }

    /// End a run that never started: release the sessions to find the stop
    /// flag set, and join them.
    fn abandon(self, shared: &Shared) {
        shared.stop.store(true, Ordering::Release);
        self.gate.open();
        for h in self.handles {
            let _ = h.join();
        }
    }

    /// Join every session: the operations each did, and the first error one
    /// ended with.
    fn join(self) -> (Vec<u64>, Option<String>) {
        let mut operations = Vec::with_capacity(self.handles.len());
        let mut session_error = None;
        for h in self.handles {
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
        (operations, session_error)
    }
}

/// Shut down: a final checkpoint, the log written, and the headers marked
/// clean unless something failed. Returns the log's summary and the first
/// writer's error; the counts of the shutdown go to `lifetime`.
fn shut_down(
    writers: Writers,
    hub: &StatsHub,
    lifetime: &mut Counts,
    data: &mut Dataset,
    health: &Health,
) -> Result<(RedoSummary, Option<String>), OltpError> {
    let dbwr_outcome = writers.dbwr.stop();
    let redo_outcome = writers.redo.stop();
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
    Ok((redo_summary, shutdown_error))
}

/// The run's result: its settings, targets and measured window, and what
/// ended it early (`ended_early`) with the corrupt blocks found.
fn oltp_result(
    opts: &RunOptions,
    settings: Settings,
    shape: Shape,
    targets: Targets,
    measured: Measured,
    ended_early: Option<String>,
    corruptions: Vec<String>,
) -> OltpResult {
    let window = &measured.window;
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
    let (disk_a, disk_b) = &measured.disk;
    let crosscheck = cross_check(
        disk_a,
        disk_b,
        &targets.data,
        &targets.redo,
        window,
        settings.redo_block_bytes,
    );
    OltpResult {
        schema: OLTP_SCHEMA.into(),
        schema_version: OLTP_SCHEMA_VERSION,
        tool: cairn_host::tool_info(),
        started_at: measured.started_at,
        ended_at: measured.ended_at,
        seed: opts.seed,
        environment: cairn_host::environment(opts.host),
        conf: ConfRecord {
            path: opts.conf_path.clone(),
            text: opts.conf.text.clone(),
            effective: effective_settings(opts, settings.threads_per_schema),
            ignored: opts.conf.ignored.iter().map(|(k, _)| k.clone()).collect(),
        },
        settings,
        shape,
        data_targets: targets.data,
        redo_target: targets.redo,
        warmup_s: measured.warmup_s,
        elapsed_s: measured.elapsed_s,
        totals: totals(window),
        intervals: measured.intervals,
        cpu: cairn_host::cpu_summary(&measured.cpu.0, &measured.cpu.1, physical_ios),
        devices: cairn_host::device_stats(disk_a, disk_b),
        crosscheck,
        ended_early,
        errors,
    }
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

fn target_info(host: &Host, name: &str, path: &Path, f: &DeviceFile) -> TargetInfo {
    let mut info =
        cairn_kit::target::target_info(name, f, HEADER_BYTES, f.geometry().size_bytes, false);
    info.path = path.display().to_string();
    info.devices = cairn_host::devices_for(host, path);
    info
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
