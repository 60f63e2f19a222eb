//! Opening the sds: the safety rules of a tool that writes wherever it is told.
//!
//! - A plan that writes opens every target exclusively and refuses one that is
//!   in use (mounted, held by LVM/md/device-mapper, a swap area) and — unless
//!   `--force` — one that carries a Cairn label, an Oracle ASM header, a
//!   filesystem, LVM, md, a partition table or any other owner's signature.
//!   That judgement is the storage manager's, not the kit's: the caller's
//!   [`TargetOpener`] makes it (Cairn's is the one `cairn disk label` makes).
//! - A plan that only reads opens shared and read-only: reading harms nothing.
//! - A file that does not exist is created at its `size=`, sparse; if the plan
//!   reads, it is first filled with data, because reading a hole measures the
//!   filesystem's zero page rather than the storage. Paths under `/dev/` are
//!   never created: a missing device is a typo, not a request.
//! - Two sds naming the same lun share one open (a block device can be claimed
//!   exclusively only once).
//! - A lun the opener [maps](TargetOpener::maps) (Cairn's: `+GROUP/path`, a
//!   file in a disk group) is opened by the opener, and is a
//!   [`MappedTarget`]: the kit sees its geometry, and each worker's engine is
//!   made by what the target attaches ([`MappedShare`]), so the engine knows
//!   nothing of what lies under it.

use std::any::Any;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_io::host::Host;
use cairn_io::probe::DeviceKind;
use cairn_io::{
    AlignedBuf, DeviceFile, DeviceId, EngineKind, FileEngine, Geometry, IoEngine, Op, OpenMode,
    Request,
};

use crate::model::{Band, Bound, Plan, SdDef};
use crate::pattern::DataPattern;
use crate::result::TargetInfo;

/// An error an opener gives: shown as it is, after the sd it concerns.
pub type OpenerError = Box<dyn std::error::Error + Send + Sync>;

/// What the kit asks of the storage manager it runs beside: whether a device
/// may be overwritten, and the luns that are not paths of devices or files.
/// The caller gives it (Cairn's, over its overwrite rules and disk groups, is
/// `cairn_kit_group::CairnTargets`); the kit never decides either itself.
pub trait TargetOpener {
    /// Open `path` (a device or a file) to write data that is not its
    /// owner's: exclusively, refusing one in use, and — unless `force` — one
    /// that carries someone's data. The error says which and what to do.
    fn open_for_overwrite(
        &self,
        host: &Host,
        path: &Path,
        force: bool,
    ) -> Result<DeviceFile, OpenerError>;

    /// Whether `lun` names a target this opener maps onto devices itself (a
    /// file in a disk group), rather than a path the kit opens.
    fn maps(&self, _lun: &Path) -> bool {
        false
    }

    /// Open the sds whose luns it [maps](Self::maps), in order, one target
    /// each (sds naming one target share it). On failure, what this call
    /// made is gone again, or the error names what is left.
    fn open_mapped(
        &self,
        sds: &[&SdDef],
        _open: &mut MappedOpen<'_>,
    ) -> Result<Vec<Arc<dyn MappedTarget>>, OpenerError> {
        match sds.first() {
            None => Ok(Vec::new()),
            Some(sd) => Err(format!(
                "sd={}: {}: no such device or file",
                sd.name,
                sd.lun.display()
            )
            .into()),
        }
    }

    /// Remove mapped targets a refused run created ([`MappedTarget::name`]s),
    /// once every target is dropped, opening with `engine` again. Goes on
    /// past a failure; the error names what is left and how to remove it.
    fn remove_created(
        &self,
        _host: &Host,
        _engine: EngineKind,
        _names: &[String],
    ) -> Result<(), OpenerError> {
        Ok(())
    }
}

/// What opening mapped targets needs besides the sds.
pub struct MappedOpen<'a> {
    pub host: &'a Host,
    /// Whether the plan reads (a new target is then filled with data).
    pub reads: bool,
    /// Whether the plan writes: an existing target is then overwritten,
    /// which only `force` allows.
    pub writes: bool,
    pub force: bool,
    /// (bytes done, bytes total) while filling; false stops (interrupted).
    pub fill_progress: &'a mut dyn FnMut(u64, u64) -> bool,
    /// The engine of the work around the run (`--engine`).
    pub engine: EngineKind,
}

/// An sd whose I/O its opener maps onto devices the kit does not see whole:
/// a file in a Cairn disk group. Opened for the run, and shared by every
/// worker that drives the sd.
pub trait MappedTarget: std::fmt::Debug + Send + Sync {
    /// The target as its opener names it (`+DATA/bench/f1`), one name however
    /// the sds spell it: what [`TargetOpener::remove_created`] is given.
    fn name(&self) -> String;
    /// Made by this run's open.
    fn created(&self) -> bool;
    /// The engine kind it was opened with, as asked.
    fn engine(&self) -> EngineKind;
    /// The target as one device: its size, sector and largest transfer.
    fn geometry(&self) -> &Geometry;
    /// What the result records of it as sd `sd` used over `[start, end)`;
    /// the caller sets `path` (the lun) and `devices`.
    fn info(&self, sd: &str, start_bytes: u64, end_bytes: u64, created: bool) -> TargetInfo;
    /// The paths whose block devices carry its I/O (for their statistics).
    fn device_paths(&self) -> Vec<PathBuf>;
    /// Handles of a worker's own on it.
    fn share(&self) -> std::io::Result<Box<dyn MappedShare>>;
}

/// A worker's own handles on a mapped target, before its engine is made.
pub trait MappedShare: Send {
    /// Requests at the devices that one request of up to `max_len` bytes can
    /// become: the worker's engine is made that much deeper.
    fn fan_out(&self, max_len: u64) -> usize;
    /// Attach the handles to the worker's engine. What comes back is handed,
    /// with the worker's other sds, to the [`WrapEngine`] that comes with it.
    fn attach(
        self: Box<Self>,
        engine: &mut dyn FileEngine,
    ) -> Result<(Box<dyn Any>, WrapEngine), OpenerError>;
}

/// What a worker's engine drives for one sd: a device of the engine, or
/// what a mapped target's share attached.
pub enum WorkerDevice {
    Direct(DeviceId),
    Mapped(Box<dyn Any>),
}

/// Makes a worker's engine when some of its sds are mapped: `engine` (the
/// worker's, every handle attached), its sds' devices in order, and the
/// requests the worker keeps in flight. The engine made has device ids
/// 0, 1, … in the sds' order. The opener of the mapped targets gives it, and
/// takes back what its shares attached (a worker's mapped sds come from one
/// opener).
pub type WrapEngine =
    fn(Box<dyn IoEngine>, Vec<WorkerDevice>, usize) -> Result<Box<dyn IoEngine>, OpenerError>;

/// What an sd's I/O goes to.
// A handful per run, never in an I/O path: boxing the device buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Backing {
    /// A block device or a file.
    Device(DeviceFile),
    /// A target its opener maps onto devices (a file in a Cairn disk group).
    Mapped(Arc<dyn MappedTarget>),
}

/// A worker's own handles on an sd's backing.
// A handful per run, never in an I/O path: boxing the device buys nothing.
#[allow(clippy::large_enum_variant)]
pub enum SdBacking {
    Device(DeviceFile),
    Mapped(Box<dyn MappedShare>),
}

/// An sd, open, with the byte range its workloads use.
#[derive(Debug)]
pub struct Target {
    pub sd: SdDef,
    pub backing: Backing,
    /// Workload addresses run over `[start_bytes, end_bytes)` of the sd; the
    /// sd's `offset=` is added when the I/O is issued.
    pub start_bytes: u64,
    pub end_bytes: u64,
    pub created: bool,
}

impl Target {
    /// The sd as one device: for a group file, the file's size and the group's sector.
    pub fn geometry(&self) -> &Geometry {
        match &self.backing {
            Backing::Device(d) => d.geometry(),
            Backing::Mapped(m) => m.geometry(),
        }
    }

    pub fn sector_bytes(&self) -> u64 {
        u64::from(self.geometry().logical_sector_bytes)
    }

    /// What the result records of this target; `devices` is left for the
    /// caller, who knows the host's block devices.
    pub fn info(&self) -> TargetInfo {
        let start = self.start_bytes + self.sd.offset_bytes;
        let end = self.end_bytes + self.sd.offset_bytes;
        let mut info = match &self.backing {
            Backing::Device(device) => target_info(&self.sd.name, device, start, end, self.created),
            Backing::Mapped(m) => m.info(&self.sd.name, start, end, self.created),
        };
        info.path = self.sd.lun.display().to_string();
        info
    }

    /// The paths whose block devices carry the sd's I/O: the lun itself, or
    /// a group file's member disks.
    pub fn device_paths(&self) -> Vec<PathBuf> {
        match &self.backing {
            Backing::Device(_) => vec![self.sd.lun.clone()],
            Backing::Mapped(m) => m.device_paths(),
        }
    }

    /// Handles of the sd's own for a worker (duplicates of the open ones).
    pub fn share(&self) -> std::io::Result<SdBacking> {
        Ok(match &self.backing {
            Backing::Device(d) => SdBacking::Device(d.try_clone()?),
            Backing::Mapped(m) => SdBacking::Mapped(m.share()?),
        })
    }
}

/// What a result records of an open device or file used over bytes
/// `[start, end)`, named `name`: its kind, size and geometry. `devices` (the
/// kernel devices under it) is left empty for the caller to fill.
pub fn target_info(
    name: &str,
    device: &DeviceFile,
    start_bytes: u64,
    end_bytes: u64,
    created: bool,
) -> TargetInfo {
    let probe = device.probe();
    let geometry = device.geometry();
    let block = probe.block.as_ref();
    TargetInfo {
        sd: name.to_string(),
        path: device.path().display().to_string(),
        kind: match probe.kind {
            DeviceKind::Block => "block".into(),
            DeviceKind::File => "file".into(),
        },
        size_bytes: geometry.size_bytes,
        start_bytes,
        end_bytes,
        logical_sector_bytes: geometry.logical_sector_bytes,
        physical_sector_bytes: geometry.physical_sector_bytes,
        sector_format: geometry.sector_format(),
        max_transfer_bytes: geometry.max_transfer_bytes,
        optimal_io_bytes: block.and_then(|b| b.optimal_io_bytes).unwrap_or(0),
        rotational: block.and_then(|b| b.rotational),
        discard: !matches!(
            geometry.discard,
            cairn_io::geometry::DiscardSupport::Unsupported
        ),
        devices: Vec::new(),
        created,
        mount_engine: None,
    }
}

/// Why a target could not be used. One line each: what is wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("sd={sd}: {} does not exist, and paths under /dev are never created; check the lun= (--target) path", path.display())]
    NoSuchDevice { sd: String, path: PathBuf },
    #[error("sd={sd}: {} does not exist; give size= (--size) so Cairn can create it", path.display())]
    NoSizeToCreate { sd: String, path: PathBuf },
    #[error("sd={sd}: cannot create {}: {error}; check the directory exists and is writable", path.display())]
    Create {
        sd: String,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("sd={sd}: filling the new file {} failed: {error}; it was removed — free some space or give a smaller size=", path.display())]
    Fill {
        sd: String,
        path: PathBuf,
        error: FillError,
    },
    #[error("sd={sd}: {error}")]
    Open { sd: String, error: OpenerError },
    #[error("sd={sd}: {}: size={size_bytes} is larger than the {device_bytes} bytes there; give a smaller size= or omit it", path.display())]
    TooSmall {
        sd: String,
        path: PathBuf,
        size_bytes: u64,
        device_bytes: u64,
    },
    #[error("sd={sd}: {what} {value} is not a multiple of the {sector}-byte logical sector of {}; direct I/O needs sector alignment", path.display())]
    Misaligned {
        sd: String,
        path: PathBuf,
        what: &'static str,
        value: u64,
        sector: u64,
    },
    #[error("sd={sd}: range=: {error}")]
    Range { sd: String, error: BandError },
    #[error("sd={sd}: range= may not wrap past the end of an sd (only hotband= may)")]
    RangeWraps { sd: String },
    #[error("sd={sd}: the usable part of {} is empty (size {size_bytes} bytes); check size=, range= and offset=", path.display())]
    Empty {
        sd: String,
        path: PathBuf,
        size_bytes: u64,
    },
    #[error("{0}")]
    Mapped(OpenerError),
    #[error("{error}; {left}")]
    Leftover {
        error: Box<TargetError>,
        left: OpenerError,
    },
}

/// How targets are opened.
pub struct TargetOptions<'a> {
    pub host: &'a Host,
    /// Whether a device may be overwritten, and the luns that are not paths.
    pub opener: &'a dyn TargetOpener,
    /// Overwrite a target that carries someone's data.
    pub force: bool,
    /// Called while a new file is filled: (bytes done, bytes total); returning
    /// false stops the fill (interrupted), and the new file is removed.
    pub fill_progress: &'a mut dyn FnMut(u64, u64) -> bool,
    /// The engine of the work around the run: filling a new file, opening a
    /// mapped target (`--engine`).
    pub engine: EngineKind,
}

/// Close the targets and remove the files this run created: for a run
/// refused before any I/O, which must leave nothing behind. The error names
/// what could not be removed.
pub fn close_and_remove_created(
    targets: Vec<Target>,
    host: &Host,
    opener: &dyn TargetOpener,
) -> Result<(), OpenerError> {
    let mut files: Vec<PathBuf> = Vec::new();
    let mut mapped: Vec<String> = Vec::new();
    // The engine the mapped targets were opened with opens them again.
    let mut engine = EngineKind::Auto;
    for t in targets.iter().filter(|t| t.created) {
        match &t.backing {
            Backing::Device(_) => files.push(t.sd.lun.clone()),
            Backing::Mapped(m) => {
                let name = m.name();
                if !mapped.contains(&name) {
                    engine = m.engine();
                    mapped.push(name);
                }
            }
        }
    }
    // A mapped target's hold on what lies under it goes with the targets.
    drop(targets);
    remove_made(&files, &mapped, host, opener, engine)
}

/// Remove the files and mapped targets a refused run made; the error names
/// the mapped targets that could not be removed.
fn remove_made(
    files: &[PathBuf],
    mapped: &[String],
    host: &Host,
    opener: &dyn TargetOpener,
    engine: EngineKind,
) -> Result<(), OpenerError> {
    for path in files {
        std::fs::remove_file(path).ok();
    }
    if mapped.is_empty() {
        return Ok(());
    }
    opener.remove_created(host, engine, mapped)
}

/// Open every sd of the plan.
pub fn open_targets(
    plan: &Plan,
    options: &mut TargetOptions<'_>,
) -> Result<Vec<Target>, TargetError> {
    let writes = plan.writes();
    let reads = plan_reads(plan);
    let mut created_files: Vec<PathBuf> = Vec::new();
    let mut created_mapped: Vec<String> = Vec::new();
    let outcome = open_all(
        plan,
        options,
        writes,
        reads,
        &mut created_files,
        &mut created_mapped,
    );
    match outcome {
        Ok(targets) => Ok(targets),
        Err(error) => {
            // Leave nothing behind that this call made.
            match remove_made(
                &created_files,
                &created_mapped,
                options.host,
                options.opener,
                options.engine,
            ) {
                Ok(()) => Err(error),
                Err(left) => Err(TargetError::Leftover {
                    error: Box::new(error),
                    left,
                }),
            }
        }
    }
}

/// Open every sd the opener maps: sd index → its target.
fn open_mapped_sds(
    plan: &Plan,
    options: &mut TargetOptions<'_>,
    writes: bool,
    reads: bool,
    created: &mut Vec<String>,
) -> Result<BTreeMap<usize, Arc<dyn MappedTarget>>, TargetError> {
    let opener = options.opener;
    let (index, sds): (Vec<usize>, Vec<&SdDef>) = plan
        .sds
        .iter()
        .enumerate()
        .filter(|(_, sd)| opener.maps(&sd.lun))
        .unzip();
    if sds.is_empty() {
        return Ok(BTreeMap::new());
    }
    let targets = opener
        .open_mapped(
            &sds,
            &mut MappedOpen {
                host: options.host,
                reads,
                writes,
                force: options.force,
                fill_progress: &mut *options.fill_progress,
                engine: options.engine,
            },
        )
        .map_err(TargetError::Mapped)?;
    assert_eq!(
        targets.len(),
        sds.len(),
        "invariant: an opener opens one target per sd it maps"
    );
    for target in &targets {
        let name = target.name();
        if target.created() && !created.contains(&name) {
            created.push(name);
        }
    }
    Ok(index.into_iter().zip(targets).collect())
}

fn open_all(
    plan: &Plan,
    options: &mut TargetOptions<'_>,
    writes: bool,
    reads: bool,
    created_files: &mut Vec<PathBuf>,
    created_mapped: &mut Vec<String>,
) -> Result<Vec<Target>, TargetError> {
    let mut mapped = open_mapped_sds(plan, options, writes, reads, created_mapped)?;
    let mut opened: BTreeMap<PathBuf, usize> = BTreeMap::new();
    let mut targets: Vec<Target> = Vec::new();
    for (i, sd) in plan.sds.iter().enumerate() {
        if let Some(file) = mapped.remove(&i) {
            let created = file.created();
            let mut target = bounds(sd, Backing::Mapped(file))?;
            target.created = created;
            targets.push(target);
            continue;
        }
        // A file made for an earlier sd already exists by now, so two sds
        // naming one new file share it.
        let newly = create_if_missing(sd, reads, options)?;
        if newly {
            created_files.push(sd.lun.clone());
        }
        let key = std::fs::canonicalize(&sd.lun).unwrap_or_else(|_| sd.lun.clone());
        let (device, created) = if let Some(&i) = opened.get(&key) {
            let Backing::Device(shared) = &targets[i].backing else {
                unreachable!("invariant: only devices and files are in `opened`");
            };
            let device = shared.try_clone().map_err(|error| TargetError::Create {
                sd: sd.name.clone(),
                path: sd.lun.clone(),
                error,
            })?;
            (device, false)
        } else {
            let created = newly;
            let device = if writes || created {
                options
                    .opener
                    .open_for_overwrite(options.host, &sd.lun, options.force || created)
            } else {
                DeviceFile::open(&sd.lun, OpenMode::READ, options.host).map_err(OpenerError::from)
            }
            .map_err(|error| TargetError::Open {
                sd: sd.name.clone(),
                error,
            });
            let device = device?;
            opened.insert(key, targets.len());
            (device, created)
        };
        let mut target = bounds(sd, Backing::Device(device))?;
        target.created = created;
        if created && reads {
            if let Err(error) = fill(&mut target, options.engine, options.fill_progress) {
                return Err(TargetError::Fill {
                    sd: sd.name.clone(),
                    path: sd.lun.clone(),
                    error,
                });
            }
        }
        targets.push(target);
    }
    Ok(targets)
}

fn plan_reads(plan: &Plan) -> bool {
    plan.runs.iter().any(|run| {
        run.wds
            .iter()
            .filter_map(|w| plan.wd(w))
            .any(|wd| run.rdpct.unwrap_or(wd.rdpct) > 0.0)
    })
}

/// Create a missing file target (sparse, at its size). Returns whether it did.
fn create_if_missing(
    sd: &SdDef,
    _reads: bool,
    _options: &mut TargetOptions<'_>,
) -> Result<bool, TargetError> {
    let path = &sd.lun;
    if path.exists() || std::fs::symlink_metadata(path).is_ok() {
        return Ok(false);
    }
    // Judge where the file would really land: `/tmp/../dev/sdx` or a symlinked
    // directory must not slip a regular file into /dev.
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let real_parent = std::fs::canonicalize(&parent).map_err(|error| TargetError::Create {
        sd: sd.name.clone(),
        path: path.clone(),
        error,
    })?;
    if path.starts_with("/dev") || real_parent.starts_with("/dev") {
        return Err(TargetError::NoSuchDevice {
            sd: sd.name.clone(),
            path: path.clone(),
        });
    }
    let Some(size) = sd.size_bytes else {
        return Err(TargetError::NoSizeToCreate {
            sd: sd.name.clone(),
            path: path.clone(),
        });
    };
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|error| TargetError::Create {
            sd: sd.name.clone(),
            path: path.clone(),
            error,
        })?;
    if let Err(error) = file.set_len(size) {
        std::fs::remove_file(path).ok();
        return Err(TargetError::Create {
            sd: sd.name.clone(),
            path: path.clone(),
            error,
        });
    }
    Ok(true)
}

/// The byte range the sd's workloads use.
fn bounds(sd: &SdDef, backing: Backing) -> Result<Target, TargetError> {
    let geometry = match &backing {
        Backing::Device(d) => d.geometry().clone(),
        Backing::Mapped(m) => m.geometry().clone(),
    };
    let sector = u64::from(geometry.logical_sector_bytes);
    let misaligned = |what, value| TargetError::Misaligned {
        sd: sd.name.clone(),
        path: sd.lun.clone(),
        what,
        value,
        sector,
    };
    if !sd.offset_bytes.is_multiple_of(sector) {
        return Err(misaligned("offset=", sd.offset_bytes));
    }
    if let Some(align) = sd.align_bytes {
        if align == 0 || !align.is_multiple_of(sector) {
            return Err(misaligned("align=", align));
        }
    }
    let available = geometry.size_bytes.saturating_sub(sd.offset_bytes) / sector * sector;
    let size = match sd.size_bytes {
        Some(size) if size > geometry.size_bytes => {
            return Err(TargetError::TooSmall {
                sd: sd.name.clone(),
                path: sd.lun.clone(),
                size_bytes: size,
                device_bytes: geometry.size_bytes,
            })
        }
        Some(size) => (size / sector * sector).min(available),
        None => available,
    };
    let (start, end) = match &sd.range {
        Some(band) => {
            let (s, e) = resolve_band(band, size, sector).map_err(|error| TargetError::Range {
                sd: sd.name.clone(),
                error,
            })?;
            if e > size {
                return Err(TargetError::RangeWraps {
                    sd: sd.name.clone(),
                });
            }
            (s, e)
        }
        None => (0, size),
    };
    if end <= start {
        return Err(TargetError::Empty {
            sd: sd.name.clone(),
            path: sd.lun.clone(),
            size_bytes: size,
        });
    }
    Ok(Target {
        sd: sd.clone(),
        backing,
        start_bytes: start,
        end_bytes: end,
        created: false,
    })
}

/// Why a band does not fit the region it lies in.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BandError {
    #[error("{0}% is outside 0–200%")]
    Percent(f64),
    #[error("the band ends ({end} bytes) at or before it starts ({start} bytes)")]
    Backwards { start: u64, end: u64 },
    #[error("the band starts at {start} bytes, past the end ({len} bytes)")]
    PastTheEnd { start: u64, len: u64 },
    #[error("the band is longer than the region it lies in")]
    TooLong,
}

/// A band of a region `len` bytes long, as byte offsets rounded to whole
/// sectors. The end may exceed `len` (up to twice it) for a band that wraps.
pub fn resolve_band(band: &Band, len: u64, sector: u64) -> Result<(u64, u64), BandError> {
    let at = |b: &Bound| -> Result<u64, BandError> {
        match *b {
            Bound::Percent(p) if (0.0..=200.0).contains(&p) => {
                Ok(((len as f64 * p / 100.0) as u64) / sector * sector)
            }
            Bound::Percent(p) => Err(BandError::Percent(p)),
            Bound::Bytes(b) => Ok(b / sector * sector),
        }
    };
    let start = at(&band.start)?;
    let end = at(&band.end)?;
    if end <= start {
        return Err(BandError::Backwards { start, end });
    }
    if start >= len {
        return Err(BandError::PastTheEnd { start, len });
    }
    if end - start > len {
        return Err(BandError::TooLong);
    }
    Ok((start, end))
}

/// Why a new file could not be filled (it is then removed).
#[derive(Debug, thiserror::Error)]
pub enum FillError {
    #[error("only files are filled here")]
    NotAFile,
    #[error("{0}")]
    Dup(std::io::Error),
    #[error("cannot start an I/O engine to fill it: {0}")]
    NoEngine(std::io::Error),
    #[error("the fill queue refused a write")]
    QueueFull,
    #[error("{0}")]
    Io(cairn_io::IoError),
    #[error("interrupted")]
    Interrupted,
}

/// Write data over a new file's whole range, so reads reach the storage.
fn fill(
    target: &mut Target,
    engine_kind: EngineKind,
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> Result<(), FillError> {
    const CHUNK: u64 = 1 << 20;
    const DEPTH: usize = 8;
    let total = target.end_bytes + target.sd.offset_bytes;
    let Backing::Device(device) = &target.backing else {
        return Err(FillError::NotAFile);
    };
    let device = device.try_clone().map_err(FillError::Dup)?;
    let mut engine = cairn_io::new_file_engine(engine_kind, DEPTH).map_err(FillError::NoEngine)?;
    let id = engine.attach(device);
    let pattern = DataPattern::new(1.0, 1.0, 8192, 0x5eed);
    let mut bufs: Vec<AlignedBuf> = (0..DEPTH)
        .map(|_| AlignedBuf::zeroed(CHUNK as usize))
        .collect();
    let mut offset = 0u64;
    let mut done = 0u64;
    let mut counter = 0u64;
    while done < total {
        while offset < total && engine.in_flight() < DEPTH {
            let len = CHUNK.min(total - offset) as usize;
            let mut buf = match bufs.pop() {
                Some(b) if b.len() == len => b,
                _ => AlignedBuf::zeroed(len),
            };
            counter += 1;
            pattern.fill(&mut buf, offset, counter);
            engine
                .submit(Request {
                    device: id,
                    tag: offset,
                    op: Op::Write {
                        offset_bytes: offset,
                        buf,
                        fua: false,
                    },
                })
                .map_err(|_| FillError::QueueFull)?;
            offset += len as u64;
        }
        engine.wait(1).map_err(FillError::Io)?;
        while let Some(c) = engine.pop_completion() {
            let n = c.result.map_err(FillError::Io)?;
            done += n;
            if let Some(b) = c.buf {
                bufs.push(b);
            }
        }
        if !progress(done, total) {
            // Let what is in flight finish before the file is removed.
            while engine.in_flight() > 0 {
                engine.wait(1).map_err(FillError::Io)?;
                while engine.pop_completion().is_some() {}
            }
            return Err(FillError::Interrupted);
        }
    }
    engine.flush(id).map_err(FillError::Io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn bands_resolve_in_percent_and_bytes() {
        let band = |a, b| Band { start: a, end: b };
        let len = 1 << 30;
        assert_eq!(
            resolve_band(&band(Bound::Percent(10.0), Bound::Percent(20.0)), len, 4096).unwrap(),
            (107_372_544, 214_745_088)
        );
        assert_eq!(
            resolve_band(
                &band(Bound::Bytes(1 << 20), Bound::Bytes(2 << 20)),
                len,
                4096
            )
            .unwrap(),
            (1 << 20, 2 << 20)
        );
        // 90–110% wraps: the end lies past the region.
        let (s, e) = resolve_band(
            &band(Bound::Percent(90.0), Bound::Percent(110.0)),
            len,
            4096,
        )
        .unwrap();
        assert!(s < len && e > len && e - s <= len);
        assert!(
            resolve_band(&band(Bound::Percent(20.0), Bound::Percent(10.0)), len, 4096).is_err()
        );
        assert!(
            resolve_band(&band(Bound::Percent(0.0), Bound::Percent(250.0)), len, 4096).is_err()
        );
    }
}
