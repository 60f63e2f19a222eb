//! Setup: every block of the dataset loaded onto the data targets by loader
//! threads, the redo log formatted, the headers written in the order that
//! leaves an unfinished load refused.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use cairn_io::host::Host;
use cairn_io::{
    new_file_engine, AlignedBuf, DeviceFile, DeviceId, EngineKind, Op, Request, SubmitError,
};
use cairn_kit::result::TargetInfo;
use cairn_kit::target::TargetOpener;
use serde::{Deserialize, Serialize};

use crate::block::{self, KeyMap};
use crate::layout::{Layout, Segment, Shape, EXTENT_BYTES, HEADER_BYTES};
use crate::OltpError;

use super::checks::{
    check_distinct, check_sector, create_if_missing, fmt_mib, too_small_message, validate_shape,
    MIB,
};
use super::header::{DatasetState, HeaderIo, RedoHeader, TargetHeader};
use super::progress::{Meter, Progress};

pub struct SetupOptions<'a> {
    pub host: &'a Host,
    /// Whether a target may be overwritten: the storage manager's rules.
    pub opener: &'a dyn TargetOpener,
    pub shape: Shape,
    /// LOAD_PARALLEL_DEGREE: loader threads.
    pub parallel: u32,
    /// Overwrite targets that carry someone else's data (a filesystem, LVM, …).
    pub force: bool,
    /// Told the bytes loaded so far and the total, as loading goes on (from
    /// the loader threads); the CLI draws it.
    pub progress: Option<Progress<'a>>,
    pub seed: u64,
    /// Size of a redo file that setup creates (an existing one keeps its size).
    pub redo_bytes: u64,
    /// The engine of the loaders and of the redo log's formatting (`--engine`).
    pub engine: EngineKind,
}

/// What setup did, for its throughput report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    pub dataset_id: u64,
    pub shape: Shape,
    pub parallel: u32,
    pub blocks: u64,
    pub bytes: u64,
    pub elapsed_s: f64,
    pub mb_per_s: f64,
    pub blocks_per_s: f64,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    pub targets: Vec<TargetInfo>,
    pub redo: TargetInfo,
    /// Paths that setup created (missing files).
    pub created: Vec<String>,
    /// The engine the loaders ran on, as it turned out (`io_uring`, `sync`).
    #[serde(default)]
    pub engine: String,
}

/// The smallest redo file: its header region and 8 MiB of log.
pub const REDO_BYTES_MIN: u64 = HEADER_BYTES + (8 << 20);

/// 1 MiB writes (or reads) in flight per loader (or verify) thread: enough to
/// keep a device busy while the thread formats (or checks) the next extent.
pub(super) const IO_DEPTH: usize = 4;
/// Loader threads at most, whatever LOAD_PARALLEL_DEGREE says.
const LOAD_THREADS_MAX: u32 = 64;

/// The key → table block mapping of one schema of a dataset. Each schema has
/// its own, so no two schemas' index leaves are alike (dedupe finds nothing).
pub fn key_map(dataset_id: u64, schema: u32, shape: &Shape) -> KeyMap {
    KeyMap::new(
        block::mix64(dataset_id ^ u64::from(schema)),
        shape.table_blocks,
    )
}

/// Load `shape` onto `targets` and format `redo`.
pub fn setup(
    targets: &[PathBuf],
    redo: &Path,
    opts: &SetupOptions,
    interrupted: &AtomicBool,
) -> Result<LoadReport, OltpError> {
    let mut created: Vec<PathBuf> = Vec::new();
    let outcome = setup_inner(targets, redo, opts, interrupted, &mut created);
    if outcome.is_err() {
        // Leave nothing behind that this call made (every handle is closed by now).
        for path in &created {
            std::fs::remove_file(path).ok();
        }
    }
    outcome
}

/// [`setup`]'s work; every path it creates is listed in `created`, for
/// `setup` to remove if it fails.
fn setup_inner(
    targets: &[PathBuf],
    redo: &Path,
    opts: &SetupOptions,
    interrupted: &AtomicBool,
    created: &mut Vec<PathBuf>,
) -> Result<LoadReport, OltpError> {
    validate_shape(&opts.shape)?;
    check_distinct(targets, redo)?;
    let layout = Layout::new(opts.shape, targets.len());
    let needed = layout.target_bytes_needed();
    let (data, data_created) = open_data_for_setup(targets, &layout, opts, created)?;
    let (redo_dev, redo_new) = open_redo_for_setup(redo, opts, created)?;
    if interrupted.load(Ordering::SeqCst) {
        return Err(OltpError::Interrupted);
    }

    let cpu_before = cairn_host::cpu_sample(opts.host);
    let started = Instant::now();
    let dataset_id = new_dataset_id(opts.seed);
    let loaded_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let header = |index: usize, state| TargetHeader {
        dataset: dataset_id,
        shape: opts.shape,
        targets: targets.len() as u32,
        index: index as u32,
        state,
        loaded_unix_s,
    };

    // Loading headers first, durable before any block: a crash mid-load must
    // not leave an old `clean` header vouching for half-written data.
    let mut admin = HeaderIo::new(&data, targets)?;
    for i in 0..data.len() {
        admin.write(i, header(i, DatasetState::Loading).encode())?;
    }
    admin.flush_all()?;

    let bar = Meter::new(opts.progress, layout.total_blocks() * layout.block_bytes());
    let keymaps: Vec<KeyMap> = (0..opts.shape.schemas)
        .map(|schema| key_map(dataset_id, schema, &opts.shape))
        .collect();
    let plan = LoadPlan {
        layout,
        dataset: dataset_id,
        keymaps: &keymaps,
        extents: layout.total_blocks().div_ceil(layout.extent_blocks()),
        paths: targets,
        engine: opts.engine,
    };
    let threads = opts.parallel.clamp(1, LOAD_THREADS_MAX);
    let (bytes, engines) = load_extents(&plan, &data, threads, interrupted, &bar)?;
    if interrupted.load(Ordering::SeqCst) {
        return Err(OltpError::Interrupted);
    }
    admin.flush_all()?;

    let redo_header = format_redo(&redo_dev, redo, dataset_id, opts.engine, interrupted)?;
    for i in 0..data.len() {
        admin.write(i, header(i, DatasetState::Clean).encode())?;
    }
    admin.flush_all()?;

    let elapsed_s = started.elapsed().as_secs_f64().max(1e-9);
    let cpu_after = cairn_host::cpu_sample(opts.host);
    let blocks = layout.total_blocks();
    Ok(LoadReport {
        dataset_id,
        shape: opts.shape,
        parallel: threads,
        blocks,
        bytes,
        elapsed_s,
        mb_per_s: bytes as f64 / MIB / elapsed_s,
        blocks_per_s: blocks as f64 / elapsed_s,
        cpu_user_s: cpu_after.user_us.saturating_sub(cpu_before.user_us) as f64 / 1e6,
        cpu_sys_s: cpu_after.sys_us.saturating_sub(cpu_before.sys_us) as f64 / 1e6,
        targets: data_infos(&data, &data_created, needed, opts.host),
        redo: target_info(
            "redo".into(),
            &redo_dev,
            HEADER_BYTES,
            redo_header.log_end,
            redo_new,
            opts.host,
        ),
        created: created.iter().map(|p| p.display().to_string()).collect(),
        engine: engines.join(", "),
    })
}

/// The data targets as the report describes them: `data1`, `data2`, ...,
/// each with whether setup created it.
fn data_infos(
    data: &[DeviceFile],
    data_created: &[bool],
    needed: u64,
    host: &Host,
) -> Vec<TargetInfo> {
    data.iter()
        .zip(data_created)
        .enumerate()
        .map(|(i, (d, c))| target_info(format!("data{}", i + 1), d, HEADER_BYTES, needed, *c, host))
        .collect()
}

/// Open each data target for overwriting (created at the size `layout`
/// needs when missing, and listed in `created`), refusing one too small or
/// with sectors larger than the block. Returns them, and which were created.
fn open_data_for_setup(
    targets: &[PathBuf],
    layout: &Layout,
    opts: &SetupOptions,
    created: &mut Vec<PathBuf>,
) -> Result<(Vec<DeviceFile>, Vec<bool>), OltpError> {
    let needed = layout.target_bytes_needed();
    let mut data: Vec<DeviceFile> = Vec::with_capacity(targets.len());
    let mut data_created: Vec<bool> = Vec::with_capacity(targets.len());
    for path in targets {
        let new = create_if_missing(path, needed, "data target")?;
        if new {
            created.push(path.clone());
        }
        let device = opts
            .opener
            .open_for_overwrite(opts.host, path, opts.force || new)
            .map_err(|e| OltpError::Usage(e.to_string()))?;
        let size = device.geometry().size_bytes;
        if size < needed {
            return Err(OltpError::Usage(too_small_message(path, size, layout)));
        }
        check_sector(path, &device, opts.shape.block_size)?;
        data.push(device);
        data_created.push(new);
    }
    Ok((data, data_created))
}

/// Open the redo file for overwriting (created when missing, and listed in
/// `created`), refusing one too small for a log. Returns it, and whether it
/// was created.
fn open_redo_for_setup(
    redo: &Path,
    opts: &SetupOptions,
    created: &mut Vec<PathBuf>,
) -> Result<(DeviceFile, bool), OltpError> {
    let redo_new = create_if_missing(redo, opts.redo_bytes.max(REDO_BYTES_MIN), "redo file")?;
    if redo_new {
        created.push(redo.to_path_buf());
    }
    let redo_dev = opts
        .opener
        .open_for_overwrite(opts.host, redo, opts.force || redo_new)
        .map_err(|e| OltpError::Usage(e.to_string()))?;
    let redo_size = redo_dev.geometry().size_bytes;
    if redo_size < REDO_BYTES_MIN {
        return Err(OltpError::Usage(format!(
            "redo file {} holds {}; the log needs at least {} (a 1 MiB header and 8 MiB of log)",
            redo.display(),
            fmt_mib(redo_size),
            fmt_mib(REDO_BYTES_MIN)
        )));
    }
    Ok((redo_dev, redo_new))
}

/// Write every extent of `plan` with `threads` loader threads, each on its
/// own handles of `data`; the first to fail stops the others. Returns the
/// bytes written and the engine names the loaders ran on (each once).
fn load_extents(
    plan: &LoadPlan,
    data: &[DeviceFile],
    threads: u32,
    interrupted: &AtomicBool,
    bar: &Meter,
) -> Result<(u64, Vec<&'static str>), OltpError> {
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let mut handles_per_thread = Vec::with_capacity(threads as usize);
    for _ in 0..threads {
        let clones = data
            .iter()
            .zip(plan.paths)
            .map(|(d, p)| {
                d.try_clone().map_err(|e| {
                    OltpError::os(format!("duplicating the handle of {}", p.display()), e)
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        handles_per_thread.push(clones);
    }
    let results: Vec<Result<(u64, &'static str), OltpError>> = std::thread::scope(|scope| {
        let workers: Vec<_> = handles_per_thread
            .into_iter()
            .map(|devices| {
                let (next, stop) = (&next, &stop);
                scope.spawn(move || {
                    let r = load_worker(plan, devices, next, stop, interrupted, bar);
                    if r.is_err() {
                        stop.store(true, Ordering::SeqCst);
                    }
                    r
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(OltpError::Usage("a loader thread panicked".into())))
            })
            .collect()
    });
    let mut bytes = 0u64;
    // Every loader asked for the same kind; where `auto` resolved differently
    // between them (a kernel refusing some rings), the report names each.
    let mut engines: Vec<&'static str> = Vec::new();
    for r in results {
        let (written, engine) = r?;
        bytes += written;
        if !engines.contains(&engine) {
            engines.push(engine);
        }
    }
    Ok((bytes, engines))
}

/// Format the redo file's log (every block past the header) and then write
/// its header, durable, for dataset `dataset_id`.
fn format_redo(
    redo_dev: &DeviceFile,
    redo: &Path,
    dataset_id: u64,
    engine: EngineKind,
    interrupted: &AtomicBool,
) -> Result<RedoHeader, OltpError> {
    let redo_size = redo_dev.geometry().size_bytes;
    let redo_block = redo_dev.geometry().logical_sector_bytes.max(512);
    let redo_header = RedoHeader {
        dataset: dataset_id,
        block_bytes: redo_block,
        size_bytes: redo_size,
        log_start: HEADER_BYTES,
        log_end: redo_size / u64::from(redo_block) * u64::from(redo_block),
    };
    format_log(
        redo_dev,
        redo,
        HEADER_BYTES,
        redo_header.log_end,
        engine,
        interrupted,
    )?;
    let mut redo_io = HeaderIo::new(std::slice::from_ref(redo_dev), &[redo.to_path_buf()])?;
    redo_io.write(0, redo_header.encode())?;
    redo_io.flush_all()?;
    Ok(redo_header)
}

struct LoadPlan<'a> {
    layout: Layout,
    dataset: u64,
    keymaps: &'a [KeyMap],
    extents: u64,
    paths: &'a [PathBuf],
    engine: EngineKind,
}

/// One loader thread: claims extents in turn, formats each into a 1 MiB
/// buffer and writes it whole, with up to [`IO_DEPTH`] writes in flight.
/// Returns the bytes it wrote and the name of the engine it ran on.
fn load_worker(
    plan: &LoadPlan,
    devices: Vec<DeviceFile>,
    next: &AtomicU64,
    stop: &AtomicBool,
    interrupted: &AtomicBool,
    bar: &Meter,
) -> Result<(u64, &'static str), OltpError> {
    let layout = plan.layout;
    let mut engine = new_file_engine(plan.engine, IO_DEPTH)
        .map_err(|e| OltpError::os("starting an I/O engine for the loader", e))?;
    let ids: Vec<DeviceId> = devices.into_iter().map(|d| engine.attach(d)).collect();
    let mut free: Vec<AlignedBuf> = Vec::with_capacity(IO_DEPTH);
    let mut entries: Vec<u64> = Vec::with_capacity(layout.keys_per_leaf() as usize);
    let mut written = 0u64;
    let mut claiming = true;
    loop {
        while claiming && engine.in_flight() < IO_DEPTH {
            if stop.load(Ordering::Relaxed) || interrupted.load(Ordering::Relaxed) {
                claiming = false;
                break;
            }
            let extent = next.fetch_add(1, Ordering::Relaxed);
            if extent >= plan.extents {
                claiming = false;
                break;
            }
            let first = extent * layout.extent_blocks();
            let count = layout.extent_blocks().min(layout.total_blocks() - first);
            let mut buf = free
                .pop()
                .unwrap_or_else(|| AlignedBuf::zeroed(EXTENT_BYTES as usize));
            buf.set_len((count * layout.block_bytes()) as usize);
            format_extent(plan, first, &mut buf, &mut entries);
            let at = layout.locate(first);
            let request = Request {
                device: ids[at.target],
                tag: extent,
                op: Op::Write {
                    offset_bytes: at.offset_bytes,
                    buf,
                    fua: false,
                },
            };
            if let Err(SubmitError::QueueFull(_)) = engine.submit(request) {
                return Err(OltpError::Usage(
                    "the loader's I/O queue refused a write below its depth".into(),
                ));
            }
        }
        if engine.in_flight() == 0 {
            return Ok((written, engine.name()));
        }
        engine
            .wait(1)
            .map_err(|e| OltpError::io("loading the dataset", e))?;
        while let Some(c) = engine.pop_completion() {
            let path = plan.paths[c.device.0 as usize].display();
            let n = c
                .result
                .map_err(|e| OltpError::io(format!("loading {path}"), e))?;
            written += n;
            bar.add(n);
            if let Some(b) = c.buf {
                free.push(b);
            }
        }
    }
}

/// Format the blocks `first..` of one extent into `buf`.
fn format_extent(plan: &LoadPlan, first: u64, buf: &mut [u8], entries: &mut Vec<u64>) {
    let layout = plan.layout;
    let bs = layout.block_bytes() as usize;
    let kpl = layout.keys_per_leaf();
    let obfuscate = layout.shape.obfuscate;
    for (i, slice) in buf.chunks_exact_mut(bs).enumerate() {
        let at = layout
            .block_ref(first + i as u64)
            .expect("invariant: the extent lies inside the dataset");
        match at.segment {
            Segment::Table => block::format_table_block(
                slice,
                at,
                plan.dataset,
                plan.keymaps[at.schema as usize].key_of(at.number),
                obfuscate,
            ),
            Segment::Index => {
                let lo = at.number * kpl;
                let hi = (lo + kpl).min(layout.shape.table_blocks);
                entries.clear();
                let keymap = &plan.keymaps[at.schema as usize];
                entries.extend((lo..hi).map(|k| keymap.block_of(k)));
                block::format_index_leaf(slice, at, plan.dataset, entries);
            }
            Segment::Scan => block::format_scan_block(slice, at, plan.dataset, obfuscate),
        }
    }
}

/// Write zeros over the log area `[start, end)` of the redo file, as Oracle
/// formats an online log when it creates it: the log writer then never waits
/// for the filesystem (or a thin LUN) to allocate blocks, and no allocation
/// I/O is mixed into what the run measures.
fn format_log(
    dev: &DeviceFile,
    path: &Path,
    start: u64,
    end: u64,
    engine_kind: EngineKind,
    interrupted: &AtomicBool,
) -> Result<(), OltpError> {
    const PIECE: u64 = 1 << 20;
    const IN_FLIGHT: usize = 8;
    let mut engine = new_file_engine(engine_kind, IN_FLIGHT)
        .map_err(|e| OltpError::os("starting an I/O engine to format the redo log", e))?;
    let id =
        engine.attach(dev.try_clone().map_err(|e| {
            OltpError::os(format!("duplicating the handle of {}", path.display()), e)
        })?);
    let mut at = start;
    while at < end {
        if interrupted.load(Ordering::SeqCst) {
            return Err(OltpError::Interrupted);
        }
        let mut requests = Vec::with_capacity(IN_FLIGHT);
        while at < end && requests.len() < IN_FLIGHT {
            let len = PIECE.min(end - at);
            requests.push(cairn_io::Request {
                device: id,
                tag: at,
                op: cairn_io::Op::Write {
                    offset_bytes: at,
                    buf: AlignedBuf::zeroed(len as usize),
                    fua: false,
                },
            });
            at += len;
        }
        let context = || format!("formatting the redo log {}", path.display());
        for c in engine
            .execute_all(requests)
            .map_err(|e| OltpError::io(context(), e))?
        {
            c.result.map_err(|e| OltpError::io(context(), e))?;
        }
    }
    engine
        .flush(id)
        .map_err(|e| OltpError::io(format!("flushing {}", path.display()), e))
}

/// A fresh id per load: the seed mixed with the clock and the process, so two
/// loads with the same seed are still told apart (a redo file of the earlier
/// one is refused with the later one's targets).
fn new_dataset_id(seed: u64) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let pid = u64::from(std::process::id());
    block::mix64(seed ^ block::mix64(nanos ^ (pid << 40)))
}

fn target_info(
    name: String,
    device: &DeviceFile,
    start: u64,
    end: u64,
    created: bool,
    host: &Host,
) -> TargetInfo {
    let mut info = cairn_kit::target::target_info(&name, device, start, end, created);
    info.devices = cairn_host::devices_for(host, device.path());
    info
}
