//! Data targets and the redo file: setup (load), open for a run, verify.
//!
//! Every data target starts with a header region ([`HEADER_BYTES`]) whose first
//! 4 KiB hold the dataset header: which dataset this is (a random id), its
//! [`Shape`], how many data targets it spans and which one this is, and its
//! state. The redo file's first 4 KiB name the same dataset, its redo block
//! (the device's logical sector, at least 512 bytes) and the log's byte range.
//!
//! ```text
//! data target header (4096 bytes, little-endian; CRC-32C of bytes 0..4092 at 4092)
//!   0 magic "CAIRNOLTP1" | 10 format u16 | 12 state u32 (1 loading, 2 clean, 3 running)
//!  16 dataset id u64 | 24 block size u32 | 28 schemas u32 | 32 SCALE u64 | 40 SCAN_TABLE_SZ u64
//!  48 flags u32 (bit 0 obfuscated) | 52 data targets u32 | 56 this target's index u32
//!  64 load time (unix s) u64
//! redo header (4096 bytes; CRC-32C at 4092)
//!   0 magic "CAIRNREDO1" | 10 format u16 | 12 redo block bytes u32 | 16 dataset id u64
//!  24 file size u64 | 32 log start u64 | 40 log end u64
//! ```
//!
//! Safety rules, as for `cairn bench` targets (`cairn_kit::target`): setup
//! opens every target exclusively through the caller's
//! [`TargetOpener::open_for_overwrite`] (Cairn's refuses a device in use and,
//! without `--force`, one carrying someone else's data); a missing regular
//! file is created sparse (never under `/dev`) and removed again if setup
//! fails or is interrupted. A run opens only targets
//! whose first block is a dataset header and never writes to anything else.
//!
//! Write order at setup: `loading` headers (flushed) → every block → flush →
//! redo header → `clean` headers (flushed). A crash anywhere before the last
//! step leaves a dataset that `open` refuses as unfinished.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use cairn_io::host::Host;
use cairn_io::poison::Recover;
use cairn_io::{
    new_file_engine, AlignedBuf, Completion, DeviceFile, DeviceId, EngineKind, FileEngine, Op,
    OpenMode, Request, SubmitError,
};
use serde::{Deserialize, Serialize};

use super::block::{self, KeyMap};
use super::layout::{Layout, Segment, Shape, EXTENT_BYTES, HEADER_BYTES};
use super::OltpError;
use cairn_kit::result::TargetInfo;
use cairn_kit::target::TargetOpener;

/// Where a dataset is in its life, as its headers record it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DatasetState {
    /// Setup began and did not finish: not usable.
    Loading,
    /// Loaded, or the last run shut down cleanly (every change on disk).
    Clean,
    /// A run is open, or one ended without shutting down (a crash).
    Running,
}

impl DatasetState {
    fn code(self) -> u32 {
        match self {
            DatasetState::Loading => 1,
            DatasetState::Clean => 2,
            DatasetState::Running => 3,
        }
    }

    fn from_code(code: u32) -> Option<Self> {
        match code {
            1 => Some(DatasetState::Loading),
            2 => Some(DatasetState::Clean),
            3 => Some(DatasetState::Running),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DatasetState::Loading => "loading",
            DatasetState::Clean => "clean",
            DatasetState::Running => "running",
        }
    }
}

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
/// Bytes of a dataset or redo header (one I/O; a multiple of any logical sector).
const HEADER_IO_BYTES: usize = 4096;
const HEADER_CRC_AT: usize = HEADER_IO_BYTES - 4;
const TARGET_MAGIC: &[u8; 10] = b"CAIRNOLTP1";
const REDO_MAGIC: &[u8; 10] = b"CAIRNREDO1";
const HEADER_FORMAT_VERSION: u16 = 1;
/// 1 MiB writes (or reads) in flight per loader (or verify) thread: enough to
/// keep a device busy while the thread formats (or checks) the next extent.
const IO_DEPTH: usize = 4;
/// Loader threads at most, whatever LOAD_PARALLEL_DEGREE says.
const LOAD_THREADS_MAX: u32 = 64;
/// Problems verify lists (it counts them all).
const PROBLEMS_LISTED_MAX: usize = 1000;
const MIB: f64 = 1024.0 * 1024.0;

/// What verify finds wrong with one block: the block itself, or where the
/// index and the key map disagree with it. One line, after the block's place.
#[derive(Debug, thiserror::Error)]
enum BlockFault {
    #[error(transparent)]
    Block(#[from] block::BlockError),
    #[error("holds key {found}, but the index maps key {want} to this block")]
    KeyNotMapped { found: u64, want: u64 },
    #[error("maps key {key} to table block {found}; the key map says {want}")]
    IndexEntry { key: u64, found: u64, want: u64 },
    #[error("ends before key {key} (holds {slot} keys, should hold {keys})")]
    IndexShort { key: u64, slot: usize, keys: u64 },
    #[error("holds more than its {keys} keys")]
    IndexLong { keys: u64 },
}

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

/// A loaded dataset, open read-write for a run.
#[derive(Debug)]
pub struct Dataset {
    pub id: u64,
    pub layout: Layout,
    /// In the order of the loaded targets.
    pub data: Vec<DeviceFile>,
    pub data_paths: Vec<PathBuf>,
    pub redo: DeviceFile,
    pub redo_path: PathBuf,
    /// The byte range of the redo file that holds the log (after its header).
    pub redo_start: u64,
    pub redo_end: u64,
    /// The state the headers recorded when the dataset was opened.
    pub state_at_open: DatasetState,
}

/// What a run expects of the dataset.
pub struct OpenOptions<'a> {
    pub host: &'a Host,
    pub block_size: u32,
    pub table_blocks: u64,
    pub scan_blocks: u64,
    /// Schemas the run uses: at most the number loaded.
    pub schemas: u32,
}

/// Open a loaded dataset and check it is the one the run expects. Never
/// writes: a target that is not a loaded data target is refused untouched.
pub fn open(targets: &[PathBuf], redo: &Path, opts: &OpenOptions) -> Result<Dataset, OltpError> {
    check_distinct(targets, redo)?;
    let (data, header) = open_loaded(targets, OpenMode::WRITE_EXCLUSIVE, opts.host)?;
    let shape = header.shape;
    if header.state == DatasetState::Loading {
        return Err(OltpError::Usage(format!(
            "{}: setup did not finish (its header says loading): run 'cairn bench oltp setup' again",
            targets[0].display()
        )));
    }
    if opts.block_size != shape.block_size {
        return Err(OltpError::Usage(format!(
            "loaded with {}-byte blocks; the run asks for {}-byte blocks: run setup again or use the loaded block size",
            shape.block_size, opts.block_size
        )));
    }
    if opts.table_blocks != shape.table_blocks {
        return Err(OltpError::Usage(format!(
            "loaded with SCALE={} blocks; slob.conf says {}: run setup again or use the loaded SCALE",
            shape.table_blocks, opts.table_blocks
        )));
    }
    if opts.scan_blocks != shape.scan_blocks {
        return Err(OltpError::Usage(format!(
            "loaded with SCAN_TABLE_SZ={} blocks; slob.conf says {}: run setup again or use the loaded SCAN_TABLE_SZ",
            shape.scan_blocks, opts.scan_blocks
        )));
    }
    if opts.schemas > shape.schemas || opts.schemas == 0 {
        return Err(OltpError::Usage(format!(
            "the run asks for {} schemas; {} were loaded: ask for 1 to {}, or run setup with more schemas",
            opts.schemas, shape.schemas, shape.schemas
        )));
    }
    for (path, device) in targets.iter().zip(&data) {
        check_sector(path, device, shape.block_size)?;
    }
    let (redo_dev, redo_header) =
        open_redo(redo, header.dataset, OpenMode::WRITE_EXCLUSIVE, opts.host)?;
    Ok(Dataset {
        id: header.dataset,
        layout: Layout::new(shape, targets.len()),
        data,
        data_paths: targets.to_vec(),
        redo: redo_dev,
        redo_path: redo.to_path_buf(),
        redo_start: redo_header.log_start,
        redo_end: redo_header.log_end,
        state_at_open: header.state,
    })
}

impl Dataset {
    /// Record `state` in every data target's header (and flush). Each header is
    /// read back first and must still name this dataset: a target replaced
    /// under a run is not overwritten.
    pub fn mark(&mut self, state: DatasetState) -> Result<(), OltpError> {
        let mut io = HeaderIo::new(&self.data, &self.data_paths)?;
        for i in 0..self.data.len() {
            let path = self.data_paths[i].display();
            let buf = io.read(i)?;
            let mut header = match TargetHeader::decode(&buf) {
                Ok(h) if h.dataset == self.id => h,
                _ => {
                    return Err(OltpError::Usage(format!(
                        "{path} no longer carries the header of dataset {:016x}; its state was not changed",
                        self.id
                    )))
                }
            };
            header.state = state;
            io.write(i, header.encode())?;
        }
        io.flush_all()
    }
}

/// One block that is not as it should be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockProblem {
    pub target: String,
    pub offset_bytes: u64,
    /// 1-based, as SLOB names its users.
    pub schema: u32,
    pub segment: String,
    pub number: u64,
    pub problem: String,
}

/// What verify found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyReport {
    pub dataset_id: u64,
    pub shape: Shape,
    pub state: DatasetState,
    pub blocks_checked: u64,
    /// Sum over table blocks of their version: the block changes that reached the data files.
    pub table_versions: u64,
    pub problems_total: u64,
    /// The first problems, in block order (at most 1000).
    pub problems: Vec<BlockProblem>,
    /// The redo log read back and set against the data files.
    #[serde(default)]
    pub redo: RedoCheck,
    /// The engine the data files were read with (`io_uring`, `sync`).
    #[serde(default)]
    pub engine: String,
}

/// What the redo log holds, set against the data files: after a crash, the
/// changes an instance recovery would re-apply.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RedoCheck {
    /// Records read back from the log (changes and commits).
    pub records: u64,
    pub commits: u64,
    /// Table blocks whose newest change in the log is newer than the block on
    /// disk: none after a clean shutdown; after a crash, changes that were
    /// committed (or at least logged) but not yet written by the writer.
    pub blocks_behind: u64,
    /// The first of them, in block order (at most 20).
    pub behind: Vec<BlockProblem>,
    /// Why the log could not be read back, if it could not.
    pub unreadable: Option<String>,
}

/// Blocks behind the redo listed in a verify report.
const BEHIND_LISTED_MAX: usize = 20;

/// Read every block of the dataset and check it: the content of every table
/// and scan block ([`block::check_content`]), and every index leaf against
/// the key map. Opens read-only; whatever state the headers record (a run
/// that crashed leaves `running`), every block is checked.
pub fn verify(
    targets: &[PathBuf],
    redo: &Path,
    host: &Host,
    engine_kind: EngineKind,
    progress: Option<Progress<'_>>,
    interrupted: &AtomicBool,
) -> Result<VerifyReport, OltpError> {
    check_distinct(targets, redo)?;
    let (data, header) = open_loaded(targets, OpenMode::READ, host)?;
    let (redo_dev, redo_header) = open_redo(redo, header.dataset, OpenMode::READ, host)?;
    let (redo_max, redo_check) = read_back_log(&redo_dev, &redo_header);
    drop(redo_dev);
    let layout = Layout::new(header.shape, targets.len());
    let keymaps: Vec<KeyMap> = (0..header.shape.schemas)
        .map(|schema| key_map(header.dataset, schema, &header.shape))
        .collect();
    let mut engine = new_file_engine(engine_kind, IO_DEPTH)
        .map_err(|e| OltpError::os("starting an I/O engine for verify", e))?;
    let ids: Vec<DeviceId> = data.into_iter().map(|d| engine.attach(d)).collect();
    let bar = Meter::new(progress, layout.total_blocks() * layout.block_bytes());
    let mut checker = Checker {
        layout,
        dataset: header.dataset,
        keymaps,
        paths: targets,
        redo_max,
        report: VerifyReport {
            dataset_id: header.dataset,
            shape: header.shape,
            state: header.state,
            blocks_checked: 0,
            table_versions: 0,
            problems_total: 0,
            problems: Vec::new(),
            redo: redo_check,
            engine: engine.name().to_string(),
        },
    };
    let extents = layout.total_blocks().div_ceil(layout.extent_blocks());
    let mut next_submit = 0u64;
    let mut next_check = 0u64;
    let mut ready: BTreeMap<u64, Completion> = BTreeMap::new();
    let mut free: Vec<AlignedBuf> = Vec::new();
    while next_check < extents {
        if interrupted.load(Ordering::SeqCst) {
            return Err(OltpError::Interrupted);
        }
        while next_submit < extents && engine.in_flight() + ready.len() < IO_DEPTH {
            let first = next_submit * layout.extent_blocks();
            let count = layout.extent_blocks().min(layout.total_blocks() - first);
            let mut buf = free
                .pop()
                .unwrap_or_else(|| AlignedBuf::zeroed(EXTENT_BYTES as usize));
            buf.set_len((count * layout.block_bytes()) as usize);
            let at = layout.locate(first);
            let request = Request {
                device: ids[at.target],
                tag: next_submit,
                op: Op::Read {
                    offset_bytes: at.offset_bytes,
                    buf,
                },
            };
            if let Err(SubmitError::QueueFull(_)) = engine.submit(request) {
                return Err(OltpError::Usage(
                    "verify's I/O queue refused a read below its depth".into(),
                ));
            }
            next_submit += 1;
        }
        // Check extents in order, so problems come out in block order.
        while let Some(c) = ready.remove(&next_check) {
            let first = next_check * layout.extent_blocks();
            let count = layout.extent_blocks().min(layout.total_blocks() - first);
            match (&c.result, &c.buf) {
                (Ok(_), Some(buf)) => checker.check_extent(first, buf),
                (Err(e), _) => checker.unreadable(first, count, &e.to_string()),
                (Ok(_), None) => checker.unreadable(first, count, "the read returned no buffer"),
            }
            bar.add(count * layout.block_bytes());
            if let Some(b) = c.buf {
                free.push(b);
            }
            next_check += 1;
        }
        if next_check >= extents {
            break;
        }
        if !ready.contains_key(&next_check) {
            engine
                .wait(1)
                .map_err(|e| OltpError::io("verifying the dataset", e))?;
            while let Some(c) = engine.pop_completion() {
                ready.insert(c.tag, c);
            }
        }
    }
    Ok(checker.report)
}

struct Checker<'a> {
    layout: Layout,
    dataset: u64,
    keymaps: Vec<KeyMap>,
    paths: &'a [PathBuf],
    /// Per data block, the newest version a change record in the log carries.
    redo_max: std::collections::HashMap<u64, u64>,
    report: VerifyReport,
}

/// Read the redo log back (`scan_log`). A log that cannot be read does not
/// stop verify: the data files are checked anyway and the reason is reported.
fn read_back_log(
    dev: &DeviceFile,
    header: &RedoHeader,
) -> (std::collections::HashMap<u64, u64>, RedoCheck) {
    let cfg = super::redo::RedoConfig {
        log_buffer_bytes: 1 << 20,
        start: header.log_start,
        end: header.log_end,
        block_bytes: header.block_bytes,
        max_write_bytes: dev
            .geometry()
            .max_transfer_aligned_bytes()
            .max(u64::from(header.block_bytes)),
        dataset: header.dataset,
    };
    match super::redo::scan_log(dev, &cfg) {
        Ok(scan) => (
            scan.max_version,
            RedoCheck {
                records: scan.records,
                commits: scan.commit_records,
                ..RedoCheck::default()
            },
        ),
        Err(e) => (
            std::collections::HashMap::new(),
            RedoCheck {
                unreadable: Some(e.to_string()),
                ..RedoCheck::default()
            },
        ),
    }
}

impl Checker<'_> {
    fn check_extent(&mut self, first: u64, buf: &[u8]) {
        let bs = self.layout.block_bytes() as usize;
        for (i, b) in buf.chunks_exact(bs).enumerate() {
            let id = first + i as u64;
            if let Err(problem) = self.check_block(id, b) {
                self.problem(id, problem.to_string());
            }
            self.report.blocks_checked += 1;
        }
    }

    fn check_block(&mut self, id: u64, buf: &[u8]) -> Result<(), BlockFault> {
        let at = self
            .layout
            .block_ref(id)
            .expect("invariant: verify reads blocks of the dataset");
        match at.segment {
            Segment::Table => {
                let row = block::check_content(buf, at, self.dataset)?;
                let want = self.keymaps[at.schema as usize].key_of(at.number);
                if row.key != want {
                    return Err(BlockFault::KeyNotMapped {
                        found: row.key,
                        want,
                    });
                }
                self.report.table_versions += row.version;
                if let Some(&logged) = self.redo_max.get(&id) {
                    if logged > row.version {
                        self.behind(id, row.version, logged);
                    }
                }
                Ok(())
            }
            Segment::Scan => block::check_content(buf, at, self.dataset)
                .map(|_| ())
                .map_err(BlockFault::from),
            Segment::Index => {
                block::check(buf, at, self.dataset)?;
                let kpl = self.layout.keys_per_leaf();
                let lo = at.number * kpl;
                let hi = (lo + kpl).min(self.layout.shape.table_blocks);
                for (slot, key) in (lo..hi).enumerate() {
                    let want = self.keymaps[at.schema as usize].block_of(key);
                    match block::index_entry(buf, slot) {
                        Some(found) if found == want => {}
                        Some(found) => return Err(BlockFault::IndexEntry { key, found, want }),
                        None => {
                            return Err(BlockFault::IndexShort {
                                key,
                                slot,
                                keys: hi - lo,
                            })
                        }
                    }
                }
                if block::index_entry(buf, (hi - lo) as usize).is_some() {
                    return Err(BlockFault::IndexLong { keys: hi - lo });
                }
                Ok(())
            }
        }
    }

    fn behind(&mut self, id: u64, on_disk: u64, logged: u64) {
        let check = &mut self.report.redo;
        check.blocks_behind += 1;
        if check.behind.len() >= BEHIND_LISTED_MAX {
            return;
        }
        let at = self
            .layout
            .block_ref(id)
            .expect("invariant: blocks of the dataset");
        let loc = self.layout.locate(id);
        check.behind.push(BlockProblem {
            target: self.paths[loc.target].display().to_string(),
            offset_bytes: loc.offset_bytes,
            schema: at.schema + 1,
            segment: at.segment.name().to_string(),
            number: at.number,
            problem: format!(
                "version {on_disk} on disk; the redo holds version {logged} (a change instance recovery would re-apply)"
            ),
        });
    }

    fn unreadable(&mut self, first: u64, count: u64, why: &str) {
        for id in first..first + count {
            self.problem(id, format!("unreadable: {why}"));
            self.report.blocks_checked += 1;
        }
    }

    fn problem(&mut self, id: u64, problem: String) {
        self.report.problems_total += 1;
        if self.report.problems.len() >= PROBLEMS_LISTED_MAX {
            return;
        }
        let at = self
            .layout
            .block_ref(id)
            .expect("invariant: problems are of blocks of the dataset");
        let loc = self.layout.locate(id);
        self.report.problems.push(BlockProblem {
            target: self.paths[loc.target].display().to_string(),
            offset_bytes: loc.offset_bytes,
            schema: at.schema + 1,
            segment: at.segment.name().to_string(),
            number: at.number,
            problem,
        });
    }
}

// ---------------------------------------------------------------------------
// Headers

#[derive(Debug, Clone, Copy, PartialEq)]
struct TargetHeader {
    dataset: u64,
    shape: Shape,
    targets: u32,
    index: u32,
    state: DatasetState,
    loaded_unix_s: u64,
}

/// Why a first block is not a usable header.
enum HeaderProblem {
    /// Not ours at all: no magic.
    Absent,
    /// Ours, but damaged or of a format this Cairn does not read.
    Damaged(String),
}

impl TargetHeader {
    fn encode(&self) -> AlignedBuf {
        let mut b = AlignedBuf::zeroed(HEADER_IO_BYTES);
        b[0..10].copy_from_slice(TARGET_MAGIC);
        b[10..12].copy_from_slice(&HEADER_FORMAT_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.state.code().to_le_bytes());
        b[16..24].copy_from_slice(&self.dataset.to_le_bytes());
        b[24..28].copy_from_slice(&self.shape.block_size.to_le_bytes());
        b[28..32].copy_from_slice(&self.shape.schemas.to_le_bytes());
        b[32..40].copy_from_slice(&self.shape.table_blocks.to_le_bytes());
        b[40..48].copy_from_slice(&self.shape.scan_blocks.to_le_bytes());
        b[48..52].copy_from_slice(&u32::from(self.shape.obfuscate).to_le_bytes());
        b[52..56].copy_from_slice(&self.targets.to_le_bytes());
        b[56..60].copy_from_slice(&self.index.to_le_bytes());
        b[64..72].copy_from_slice(&self.loaded_unix_s.to_le_bytes());
        seal_header(&mut b);
        b
    }

    fn decode(b: &[u8]) -> Result<Self, HeaderProblem> {
        check_header(b, TARGET_MAGIC)?;
        let state = DatasetState::from_code(le_u32(b, 12))
            .ok_or_else(|| HeaderProblem::Damaged(format!("unknown state {}", le_u32(b, 12))))?;
        let flags = le_u32(b, 48);
        let header = Self {
            dataset: le_u64(b, 16),
            shape: Shape {
                block_size: le_u32(b, 24),
                schemas: le_u32(b, 28),
                table_blocks: le_u64(b, 32),
                scan_blocks: le_u64(b, 40),
                obfuscate: flags & 1 != 0,
            },
            targets: le_u32(b, 52),
            index: le_u32(b, 56),
            state,
            loaded_unix_s: le_u64(b, 64),
        };
        validate_shape(&header.shape).map_err(|e| HeaderProblem::Damaged(e.to_string()))?;
        if header.targets == 0 || header.index >= header.targets {
            return Err(HeaderProblem::Damaged(format!(
                "target {} of {}",
                header.index, header.targets
            )));
        }
        Ok(header)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct RedoHeader {
    dataset: u64,
    block_bytes: u32,
    size_bytes: u64,
    log_start: u64,
    log_end: u64,
}

impl RedoHeader {
    fn encode(&self) -> AlignedBuf {
        let mut b = AlignedBuf::zeroed(HEADER_IO_BYTES);
        b[0..10].copy_from_slice(REDO_MAGIC);
        b[10..12].copy_from_slice(&HEADER_FORMAT_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.block_bytes.to_le_bytes());
        b[16..24].copy_from_slice(&self.dataset.to_le_bytes());
        b[24..32].copy_from_slice(&self.size_bytes.to_le_bytes());
        b[32..40].copy_from_slice(&self.log_start.to_le_bytes());
        b[40..48].copy_from_slice(&self.log_end.to_le_bytes());
        seal_header(&mut b);
        b
    }

    fn decode(b: &[u8]) -> Result<Self, HeaderProblem> {
        check_header(b, REDO_MAGIC)?;
        let h = Self {
            block_bytes: le_u32(b, 12),
            dataset: le_u64(b, 16),
            size_bytes: le_u64(b, 24),
            log_start: le_u64(b, 32),
            log_end: le_u64(b, 40),
        };
        if !(512..=65536).contains(&h.block_bytes)
            || !h.block_bytes.is_power_of_two()
            || h.log_start >= h.log_end
            || h.log_end > h.size_bytes
        {
            return Err(HeaderProblem::Damaged("an impossible log range".into()));
        }
        Ok(h)
    }
}

fn seal_header(b: &mut [u8]) {
    let crc = crc32c::crc32c(&b[..HEADER_CRC_AT]);
    b[HEADER_CRC_AT..HEADER_IO_BYTES].copy_from_slice(&crc.to_le_bytes());
}

fn check_header(b: &[u8], magic: &[u8; 10]) -> Result<(), HeaderProblem> {
    if b.len() < HEADER_IO_BYTES || &b[0..10] != magic {
        return Err(HeaderProblem::Absent);
    }
    if le_u32(b, HEADER_CRC_AT) != crc32c::crc32c(&b[..HEADER_CRC_AT]) {
        return Err(HeaderProblem::Damaged("bad checksum".into()));
    }
    let format = u16::from_le_bytes([b[10], b[11]]);
    if format != HEADER_FORMAT_VERSION {
        return Err(HeaderProblem::Damaged(format!(
            "header format {format}; this Cairn reads {HEADER_FORMAT_VERSION}"
        )));
    }
    Ok(())
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

/// Header reads and writes on a set of open devices, one at a time, through a
/// second handle of each (the caller keeps the exclusive one). Always the
/// sync engine, whatever `--engine` says: a few 4 KiB writes, each flushed
/// before the next, gain nothing from a ring, and `--engine sync` (the one
/// that matters when io_uring misbehaves) is honoured either way.
struct HeaderIo {
    engine: Box<dyn FileEngine>,
    ids: Vec<DeviceId>,
    paths: Vec<PathBuf>,
}

impl HeaderIo {
    fn new(devices: &[DeviceFile], paths: &[PathBuf]) -> Result<Self, OltpError> {
        let mut engine = new_file_engine(EngineKind::Sync, 1)
            .map_err(|e| OltpError::os("starting an I/O engine for the headers", e))?;
        let mut ids = Vec::with_capacity(devices.len());
        for (d, p) in devices.iter().zip(paths) {
            let clone = d.try_clone().map_err(|e| {
                OltpError::os(format!("duplicating the handle of {}", p.display()), e)
            })?;
            ids.push(engine.attach(clone));
        }
        Ok(Self {
            engine,
            ids,
            paths: paths.to_vec(),
        })
    }

    fn read(&mut self, i: usize) -> Result<AlignedBuf, OltpError> {
        self.engine
            .read_at(self.ids[i], 0, HEADER_IO_BYTES)
            .map_err(|e| {
                OltpError::io(
                    format!("reading the header of {}", self.paths[i].display()),
                    e,
                )
            })
    }

    fn write(&mut self, i: usize, buf: AlignedBuf) -> Result<(), OltpError> {
        self.engine
            .write_at(self.ids[i], 0, buf, false)
            .map_err(|e| {
                OltpError::io(
                    format!("writing the header of {}", self.paths[i].display()),
                    e,
                )
            })
    }

    fn flush_all(&mut self) -> Result<(), OltpError> {
        for i in 0..self.ids.len() {
            self.engine
                .flush(self.ids[i])
                .map_err(|e| OltpError::io(format!("flushing {}", self.paths[i].display()), e))?;
        }
        Ok(())
    }
}

/// Open every data target, read its header, and check that together they are
/// one whole dataset given in load order. Returns the handles in that order and
/// the first target's header.
fn open_loaded(
    targets: &[PathBuf],
    mode: OpenMode,
    host: &Host,
) -> Result<(Vec<DeviceFile>, TargetHeader), OltpError> {
    let mut devices = Vec::with_capacity(targets.len());
    let mut headers = Vec::with_capacity(targets.len());
    for path in targets {
        let (device, header) = open_target(path, mode, host)?;
        headers.push(header);
        devices.push(device);
    }
    let first = headers[0];
    for (path, h) in targets.iter().zip(&headers) {
        if h.dataset != first.dataset {
            return Err(OltpError::Usage(format!(
                "{} belongs to dataset {:016x} and {} to dataset {:016x}: give the data targets of one dataset",
                targets[0].display(),
                first.dataset,
                path.display(),
                h.dataset
            )));
        }
        if h.shape != first.shape || h.targets != first.targets {
            return Err(OltpError::Usage(format!(
                "{} and {} disagree on the shape of dataset {:016x}: run setup again",
                targets[0].display(),
                path.display(),
                first.dataset
            )));
        }
    }
    if first.targets as usize != targets.len() {
        return Err(OltpError::Usage(format!(
            "dataset {:016x} was loaded on {} data targets; {} given: give all of them, in load order",
            first.dataset,
            first.targets,
            targets.len()
        )));
    }
    check_load_order(targets, &headers)?;
    let layout = Layout::new(first.shape, targets.len());
    let needed = layout.target_bytes_needed();
    for (path, d) in targets.iter().zip(&devices) {
        let size = d.geometry().size_bytes;
        if size < needed {
            return Err(OltpError::Usage(format!(
                "{} holds {}; dataset {:016x} needs {} there: it was truncated or replaced — run setup again",
                path.display(),
                fmt_mib(size),
                first.dataset,
                fmt_mib(needed)
            )));
        }
    }
    // The dataset's state: the least finished any target records.
    let state = headers
        .iter()
        .map(|h| h.state)
        .fold(DatasetState::Clean, |acc, s| match (acc, s) {
            (DatasetState::Loading, _) | (_, DatasetState::Loading) => DatasetState::Loading,
            (DatasetState::Running, _) | (_, DatasetState::Running) => DatasetState::Running,
            _ => DatasetState::Clean,
        });
    Ok((devices, TargetHeader { state, ..first }))
}

/// Open one data target and read its dataset header; a target without one,
/// or with a damaged one, is refused, saying to run setup.
fn open_target(
    path: &PathBuf,
    mode: OpenMode,
    host: &Host,
) -> Result<(DeviceFile, TargetHeader), OltpError> {
    let device = DeviceFile::open(path, mode, host).map_err(|e| OltpError::Usage(e.to_string()))?;
    let mut io = HeaderIo::new(std::slice::from_ref(&device), std::slice::from_ref(path))?;
    // A device too small to hold a header cannot be a data target.
    let header = if device.geometry().size_bytes < HEADER_IO_BYTES as u64 {
        Err(HeaderProblem::Absent)
    } else {
        TargetHeader::decode(&io.read(0)?)
    };
    match header {
        Ok(h) => Ok((device, h)),
        Err(HeaderProblem::Absent) => Err(OltpError::Usage(format!(
            "{} is not a loaded Cairn OLTP data target (no dataset header): run 'cairn bench oltp setup' first",
            path.display()
        ))),
        Err(HeaderProblem::Damaged(why)) => Err(OltpError::Usage(format!(
            "{}: its Cairn OLTP dataset header is damaged ({why}): run 'cairn bench oltp setup' again",
            path.display()
        ))),
    }
}

/// The data targets of one dataset, given in the order setup loaded them:
/// two that claim the same place (one is a copy) or any out of place are
/// refused, the latter saying the order to give.
fn check_load_order(targets: &[PathBuf], headers: &[TargetHeader]) -> Result<(), OltpError> {
    let dataset = headers[0].dataset;
    let mut in_order: Vec<Option<&PathBuf>> = vec![None; targets.len()];
    for (path, h) in targets.iter().zip(headers) {
        let slot = &mut in_order[h.index as usize];
        if let Some(other) = slot {
            return Err(OltpError::Usage(format!(
                "{} and {} both say they are data target {} of dataset {:016x}: one is a copy; give the targets setup loaded",
                other.display(),
                path.display(),
                h.index + 1,
                dataset
            )));
        }
        *slot = Some(path);
    }
    if headers
        .iter()
        .enumerate()
        .any(|(i, h)| h.index as usize != i)
    {
        let places: Vec<String> = targets
            .iter()
            .zip(headers)
            .map(|(p, h)| format!("{} belongs at position {}", p.display(), h.index + 1))
            .collect();
        let order: Vec<String> = in_order
            .iter()
            .flatten()
            .map(|p| p.display().to_string())
            .collect();
        return Err(OltpError::Usage(format!(
            "the data targets are not in load order: {}; give them as {}",
            places.join(", "),
            order.join(" ")
        )));
    }
    Ok(())
}

fn open_redo(
    redo: &Path,
    dataset: u64,
    mode: OpenMode,
    host: &Host,
) -> Result<(DeviceFile, RedoHeader), OltpError> {
    let device = DeviceFile::open(redo, mode, host).map_err(|e| OltpError::Usage(e.to_string()))?;
    let header = if device.geometry().size_bytes < HEADER_IO_BYTES as u64 {
        Err(HeaderProblem::Absent)
    } else {
        let mut io = HeaderIo::new(std::slice::from_ref(&device), &[redo.to_path_buf()])?;
        RedoHeader::decode(&io.read(0)?)
    };
    let header = match header {
        Ok(h) => h,
        Err(HeaderProblem::Absent) => {
            return Err(OltpError::Usage(format!(
                "{} is not a Cairn redo file (no redo header): run 'cairn bench oltp setup' first",
                redo.display()
            )))
        }
        Err(HeaderProblem::Damaged(why)) => {
            return Err(OltpError::Usage(format!(
                "{}: its redo header is damaged ({why}): run 'cairn bench oltp setup' again",
                redo.display()
            )))
        }
    };
    if header.dataset != dataset {
        return Err(OltpError::Usage(format!(
            "redo file {} belongs to dataset {:016x}, the data targets to dataset {dataset:016x}: give the redo file setup formatted with these targets",
            redo.display(),
            header.dataset
        )));
    }
    let geometry = device.geometry();
    if header.log_end > geometry.size_bytes
        || !u64::from(header.block_bytes).is_multiple_of(u64::from(geometry.logical_sector_bytes))
    {
        return Err(OltpError::Usage(format!(
            "redo file {} changed since setup (its size or sector size): run setup again",
            redo.display()
        )));
    }
    Ok((device, header))
}

// ---------------------------------------------------------------------------
// Checks and helpers

fn validate_shape(shape: &Shape) -> Result<(), OltpError> {
    let bs = shape.block_size;
    if !(2048..=32768).contains(&bs) || !bs.is_power_of_two() {
        return Err(OltpError::Usage(format!(
            "block size {bs} is not supported: give a power of two from 2048 to 32768 bytes"
        )));
    }
    if shape.schemas == 0 {
        return Err(OltpError::Usage("at least one schema is needed".into()));
    }
    if shape.table_blocks == 0 {
        return Err(OltpError::Usage(
            "SCALE is 0 blocks: a table needs at least one block".into(),
        ));
    }
    Ok(())
}

fn check_sector(path: &Path, device: &DeviceFile, block_size: u32) -> Result<(), OltpError> {
    let sector = device.geometry().logical_sector_bytes;
    if block_size < sector {
        return Err(OltpError::Usage(format!(
            "{} has {sector}-byte logical sectors, larger than the {block_size}-byte blocks: use blocks of at least {sector} bytes",
            path.display()
        )));
    }
    Ok(())
}

/// What a path names, to tell two spellings of one file or device apart.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum PathIdentity {
    Block(u64),
    File(u64, u64),
    /// Not there yet: where it would be created.
    Missing(PathBuf),
}

fn identity(path: &Path) -> PathIdentity {
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_block_device() => PathIdentity::Block(m.rdev()),
        Ok(m) => PathIdentity::File(m.dev(), m.ino()),
        Err(_) => {
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let base = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
            PathIdentity::Missing(base.join(path.file_name().unwrap_or_default()))
        }
    }
}

/// Refuse a list with no data target, a path given twice (in any spelling),
/// or the redo file among the data targets.
fn check_distinct(targets: &[PathBuf], redo: &Path) -> Result<(), OltpError> {
    if targets.is_empty() {
        return Err(OltpError::Usage(
            "no data target: give at least one --target".into(),
        ));
    }
    let mut seen: BTreeMap<PathIdentity, &Path> = BTreeMap::new();
    for path in targets {
        if let Some(other) = seen.insert(identity(path), path) {
            return Err(OltpError::Usage(if other == path.as_path() {
                format!(
                    "data target {} is given twice: give each once",
                    path.display()
                )
            } else {
                format!(
                    "data targets {} and {} are the same device: give each once",
                    other.display(),
                    path.display()
                )
            }));
        }
    }
    if let Some(other) = seen.get(&identity(redo)) {
        return Err(OltpError::Usage(format!(
            "the redo file {} is also data target {}: give the redo log its own file or device",
            redo.display(),
            other.display()
        )));
    }
    Ok(())
}

/// Create a missing regular file, sparse, of `size` bytes. Returns whether it did.
fn create_if_missing(path: &Path, size: u64, what: &str) -> Result<bool, OltpError> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(false);
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let real_parent = std::fs::canonicalize(&parent).map_err(|e| {
        OltpError::Usage(format!(
            "cannot create {what} {}: its directory {} cannot be used ({e}); create the directory or check the path",
            path.display(),
            parent.display()
        ))
    })?;
    // A missing device is a typo, not a request: never put a file under /dev.
    if path.starts_with("/dev") || real_parent.starts_with("/dev") {
        return Err(OltpError::Usage(format!(
            "{what} {} does not exist, and paths under /dev are never created; check the path",
            path.display()
        )));
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| {
            OltpError::Usage(format!(
                "cannot create {what} {}: {e}; check the directory is writable",
                path.display()
            ))
        })?;
    if let Err(e) = file.set_len(size) {
        std::fs::remove_file(path).ok();
        return Err(OltpError::Usage(format!(
            "cannot size the new {what} {} to {}: {e}",
            path.display(),
            fmt_mib(size)
        )));
    }
    Ok(true)
}

fn too_small_message(path: &Path, size: u64, layout: &Layout) -> String {
    let s = layout.shape;
    let bs = if s.block_size >= 1024 {
        format!("{} KiB", s.block_size / 1024)
    } else {
        format!("{} bytes", s.block_size)
    };
    let over = if layout.targets == 1 {
        "over 1 target need".to_string()
    } else {
        format!("over {} targets need", layout.targets)
    };
    let each = if layout.targets == 1 { "" } else { " each" };
    format!(
        "data target {} holds {}; {} schema{} × SCALE {} blocks of {bs} (+ index and scan tables) {over} {}{each}",
        path.display(),
        fmt_mib(size),
        s.schemas,
        if s.schemas == 1 { "" } else { "s" },
        s.table_blocks,
        fmt_mib(layout.target_bytes_needed())
    )
}

fn fmt_mib(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{:.1} MiB", bytes as f64 / MIB)
    }
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

/// A progress callback: bytes done so far, and the total.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// Bytes done of a total, shared by the threads doing them, each addition
/// told to the caller's [`Progress`] in order (a report never goes back).
struct Meter<'a> {
    done: std::sync::Mutex<u64>,
    total: u64,
    report: Option<Progress<'a>>,
}

impl<'a> Meter<'a> {
    fn new(report: Option<Progress<'a>>, total: u64) -> Self {
        Self {
            done: std::sync::Mutex::new(0),
            total,
            report,
        }
    }

    fn add(&self, bytes: u64) {
        // Reported under the lock: loader threads' reports arrive in order.
        let mut done = self.done.lock_or_recover();
        *done += bytes;
        if let Some(report) = self.report {
            report(*done, self.total);
        }
    }
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

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn headers_round_trip_and_refuse_damage() {
        let h = TargetHeader {
            dataset: 0xABCD,
            shape: Shape {
                block_size: 8192,
                schemas: 2,
                table_blocks: 1000,
                scan_blocks: 10,
                obfuscate: true,
            },
            targets: 3,
            index: 1,
            state: DatasetState::Running,
            loaded_unix_s: 1_700_000_000,
        };
        let mut b = h.encode();
        assert_eq!(TargetHeader::decode(&b).ok(), Some(h));
        b[30] ^= 1;
        assert!(matches!(
            TargetHeader::decode(&b),
            Err(HeaderProblem::Damaged(_))
        ));
        assert!(matches!(
            TargetHeader::decode(&[0u8; 4096]),
            Err(HeaderProblem::Absent)
        ));
        let r = RedoHeader {
            dataset: 7,
            block_bytes: 512,
            size_bytes: 9 << 20,
            log_start: HEADER_BYTES,
            log_end: 9 << 20,
        };
        assert_eq!(RedoHeader::decode(&r.encode()).ok(), Some(r));
        assert!(matches!(
            RedoHeader::decode(&h.encode()),
            Err(HeaderProblem::Absent)
        ));
    }

    #[test]
    fn the_too_small_message_says_what_is_needed() {
        let layout = Layout::new(
            Shape {
                block_size: 8192,
                schemas: 2,
                table_blocks: 10_000,
                scan_blocks: 0,
                obfuscate: false,
            },
            1,
        );
        let m = too_small_message(Path::new("/x"), 100 << 20, &layout);
        assert_eq!(
            m,
            format!(
                "data target /x holds 100 MiB; 2 schemas × SCALE 10000 blocks of 8 KiB (+ index and scan tables) over 1 target need {}",
                fmt_mib(layout.target_bytes_needed())
            )
        );
        assert!(fmt_mib(layout.target_bytes_needed()).ends_with(" MiB"));
    }
}
