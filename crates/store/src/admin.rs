//! The disk commands, end to end: probe, check, open, read, decide, write.
//!
//! Each takes the engine the caller chose (`FileEngine`: io_uring or sync) and
//! the host view, and returns a report or an [`AdminError`] whose message is one
//! line saying what is wrong and what to do. Every check that can refuse runs
//! before the first write, so a refused command writes nothing.

use std::path::{Path, PathBuf};

use cairn_format::disk_header::describe;
use cairn_format::foreign::Found;
use cairn_format::layout::{DEVICE_SIZE_MIN_BYTES, HEADER_BLOCK_BYTES};
use cairn_format::{DiskLabel, HeaderError};
use cairn_io::host::Host;
use cairn_io::probe;
use cairn_io::{DeviceFile, DeviceId, DeviceProbe, FileEngine, IoError, OpenError, OpenMode};
use serde::Serialize;
use uuid::Uuid;

use crate::catalog::{self, DiskEntry};
use crate::discovery::{DiscoveryError, DiscoveryString};
use crate::header_copies::{CopyState, HeaderHealth, HeaderScan};
use crate::labeling::{self, LabelSpec, WriteError};
use crate::protection::{self, ExternalScan, Obstacle};
use crate::repair::{self, PlanError, Rewrite};

/// Why a disk command refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    #[error("{} is {size_bytes} bytes; a Cairn disk needs at least {DEVICE_SIZE_MIN_BYTES} bytes (8 MiB) for its header and its copies", path.display())]
    TooSmall { path: PathBuf, size_bytes: u64 },
    #[error("{} is a path of multipath device {device} ({kernel_name}); use {device} instead", path.display())]
    MultipathPath {
        path: PathBuf,
        device: String,
        kernel_name: String,
    },
    #[error("{} is held by {}; release it from that device first (vgchange -an, mdadm --stop, dmsetup remove) if it should become a Cairn disk", path.display(), by.join(", "))]
    Held { path: PathBuf, by: Vec<String> },
    #[error("{} is in use ({by}); stop that use first", path.display())]
    InUse { path: PathBuf, by: String },
    #[error("{} carries {what}; refusing to overwrite it — if that data is not wanted, run again with --force", path.display())]
    Foreign { path: PathBuf, what: String },
    #[error("{} is already labelled: {description}; unlabel it first, or run again with --force to relabel", path.display())]
    AlreadyLabelled { path: PathBuf, description: String },
    #[error("{} is {description}; a write workload would destroy it — unlabel it first, or run again with --force", path.display())]
    CairnDisk { path: PathBuf, description: String },
    #[error("{} is {member}; a copy never writes over a group's disk, with or without --force — to reuse it, take it out of its group first", path.display())]
    GroupDiskOverwrite { path: PathBuf, member: String },
    #[error("{} carries {what}; a copy would overwrite it — if that data is not wanted, run again with --force", path.display())]
    OverwriteRefused { path: PathBuf, what: String },
    #[error("label {label} is already used by {} (uuid {uuid}); choose another name", other.display())]
    DuplicateLabel {
        label: String,
        other: PathBuf,
        uuid: Uuid,
    },
    #[error("{} carries no Cairn label; nothing to {action}", path.display())]
    NotLabelled { path: PathBuf, action: &'static str },
    #[error("{} is {member} (group uuid {group}); unlabelling it takes it out of that group for good (the group goes DEGRADED, or cannot be mounted if it has no copy to spare) — run again with --force if that is what you want", path.display())]
    GroupMember {
        path: PathBuf,
        group: Uuid,
        /// `disk DATA_0001 of disk group DATA`.
        member: String,
    },
    #[error("{} carries a damaged Cairn header with no good copy, so its group membership cannot be checked; run again with --force to erase it", path.display())]
    UnverifiableLabel { path: PathBuf },
    #[error("{}: {error}", path.display())]
    Plan { path: PathBuf, error: PlanError },
    #[error("{}: the copies disagree on the disk UUID ({details}); run again with --force to restore every copy from the newest (copy {source_copy}, uuid {source_uuid})", path.display())]
    Conflict {
        path: PathBuf,
        details: String,
        source_copy: usize,
        source_uuid: Uuid,
    },
    #[error("{} now carries {what}; restoring the header could destroy it — if that data is not wanted, run again with --overwrite-foreign", path.display())]
    ForeignOverDamaged { path: PathBuf, what: String },
    #[error("{} was written by a newer Cairn ({features}); {remedy}", path.display())]
    NewerFormat {
        path: PathBuf,
        features: String,
        remedy: &'static str,
    },
    #[error("{}: header copy {copy} does not exist; this device has copies 0 to {}", path.display(), count - 1)]
    NoSuchCopy {
        path: PathBuf,
        copy: usize,
        count: usize,
    },
    #[error("{} was replaced by another device while being opened; run the command again", path.display())]
    Replaced { path: PathBuf },
    #[error("{}: {what} is still found after {ERASE_ROUNDS_MAX} rounds of erasing; the device may ignore writes there — check it, and the kernel log (dmesg)", path.display())]
    NotErased { path: PathBuf, what: String },
    #[error("{}: {error}; check the device and the kernel log (dmesg)", path.display())]
    Io { path: PathBuf, error: IoError },
    #[error("{}: {error}; check the device and the kernel log (dmesg)", path.display())]
    Write { path: PathBuf, error: WriteError },
}

impl AdminError {
    fn io(path: &Path) -> impl Fn(IoError) -> AdminError + '_ {
        move |error| AdminError::Io {
            path: path.into(),
            error,
        }
    }

    fn write(path: &Path) -> impl Fn(WriteError) -> AdminError + '_ {
        move |error| AdminError::Write {
            path: path.into(),
            error,
        }
    }
}

/// The first usage obstacle as an error, if any.
pub fn refuse_usage(path: &Path, obstacles: Vec<Obstacle>) -> Result<(), AdminError> {
    match obstacles.into_iter().next() {
        None => Ok(()),
        Some(Obstacle::InUse { by }) => Err(AdminError::InUse {
            path: path.into(),
            by,
        }),
        Some(Obstacle::MultipathPath {
            device,
            kernel_name,
        }) => Err(AdminError::MultipathPath {
            path: path.into(),
            device,
            kernel_name,
        }),
        Some(Obstacle::Held { by }) => Err(AdminError::Held {
            path: path.into(),
            by,
        }),
        Some(other) => unreachable!("invariant: usage obstacles only, got {other:?}"),
    }
}

/// Probe, refuse anything in use, open for writing exclusively, and check again
/// on what was opened — the path must still name the object first probed.
pub(crate) fn open_for_write(host: &Host, path: &Path) -> Result<DeviceFile, AdminError> {
    let first = probe::probe(path, host)?;
    refuse_usage(path, protection::usage_obstacles(&first, host))?;
    let device = DeviceFile::open(path, OpenMode::WRITE_EXCLUSIVE, host)?;
    let opened = std::fs::metadata(&device.probe().canonical_path).ok();
    if !opened.is_some_and(|m| first.same_object(&m)) {
        return Err(AdminError::Replaced { path: path.into() });
    }
    refuse_usage(path, protection::usage_obstacles(device.probe(), host))?;
    Ok(device)
}

/// Other owners' signatures: Cairn's recognisers, and wipefs's second opinion.
#[derive(Clone)]
struct Content {
    found: Vec<Found>,
    external: ExternalScan,
}

impl Content {
    fn read(engine: &mut dyn FileEngine, id: DeviceId, path: &Path) -> Result<Self, AdminError> {
        let size = engine.geometry(id).map(|g| g.size_bytes).unwrap_or(0);
        let (head, tail) = protection::read_sample(engine, id).map_err(AdminError::io(path))?;
        Ok(Self {
            found: protection::recognise(&head, &tail, size),
            external: protection::external_signatures(path),
        })
    }

    fn descriptions(&self, scan: &HeaderScan) -> Vec<String> {
        protection::content_obstacles(scan, &self.found, &self.external.found)
            .into_iter()
            .filter_map(|o| match o {
                Obstacle::Foreign { what } => Some(what),
                _ => None,
            })
            .collect()
    }
}

/// Open a device or file that is about to be overwritten with data that is not
/// Cairn's (a write benchmark): exclusively, refusing a device in use (never
/// overridable) and, unless `force`, one that carries a Cairn label, an Oracle
/// ASM header, a filesystem, LVM, md, a partition table or any other owner's
/// signature that Cairn or wipefs recognises.
pub fn open_for_overwrite(host: &Host, path: &Path, force: bool) -> Result<DeviceFile, AdminError> {
    let device = open_for_write(host, path)?;
    if force {
        return Ok(device);
    }
    // Read the sample through a second handle, so the exclusive one is kept.
    let sample = device.try_clone().map_err(|error| {
        AdminError::Open(OpenError::Os {
            path: path.into(),
            action: "dup",
            error,
        })
    })?;
    let mut engine = cairn_io::sync_engine::SyncEngine::new(1);
    let id = engine.attach(sample);
    let scan = HeaderScan::read(&mut engine, id).map_err(AdminError::io(path))?;
    match first_owner(&mut engine, id, path, &scan)? {
        Some(Obstacle::Foreign { what }) => Err(AdminError::Foreign {
            path: path.into(),
            what,
        }),
        Some(Obstacle::CairnLabel { description }) => Err(AdminError::CairnDisk {
            path: path.into(),
            description,
        }),
        _ => Ok(device),
    }
}

/// The first sign that a device holds someone's data, for a command about
/// to overwrite it: another owner's signature (Cairn's recognisers, wipefs)
/// or a Cairn label.
fn first_owner(
    engine: &mut dyn FileEngine,
    id: DeviceId,
    path: &Path,
    scan: &HeaderScan,
) -> Result<Option<Obstacle>, AdminError> {
    let content = Content::read(engine, id, path)?;
    Ok(
        protection::content_obstacles(scan, &content.found, &content.external.found)
            .into_iter()
            .find(|o| matches!(o, Obstacle::Foreign { .. } | Obstacle::CairnLabel { .. })),
    )
}

/// Refuse to write a copy over `path` (a file about to be replaced, a device
/// about to be written through): never when it is a disk of a Cairn group
/// (with or without `force`: a copy is not how a disk leaves its group), and
/// unless `force`, not when it carries a Cairn label, a filesystem, LVM, md,
/// a partition table, Oracle ASM or any other owner's signature. Reads only.
pub fn refuse_overwrite(host: &Host, path: &Path, force: bool) -> Result<(), AdminError> {
    let device = DeviceFile::open(path, OpenMode::READ, host)?;
    let mut engine = cairn_io::sync_engine::SyncEngine::new(1);
    let id = engine.attach(device);
    let scan = HeaderScan::read(&mut engine, id).map_err(AdminError::io(path))?;
    if let Some(newest) = scan.newest() {
        if let Some(group) = newest.header.group_uuid {
            let name = crate::group::membership(&mut engine, id)
                .and_then(|m| m.group.map(|g| g.name))
                .unwrap_or_else(|| "(never completely created)".into());
            return Err(AdminError::GroupDiskOverwrite {
                path: path.into(),
                member: format!(
                    "disk {} of disk group {name} (uuid {group})",
                    newest.header.label
                ),
            });
        }
    }
    if force {
        return Ok(());
    }
    match first_owner(&mut engine, id, path, &scan)? {
        Some(Obstacle::Foreign { what }) | Some(Obstacle::CairnLabel { description: what }) => {
            Err(AdminError::OverwriteRefused {
                path: path.into(),
                what,
            })
        }
        _ => Ok(()),
    }
}

/// What to do about a header from a newer Cairn, per command.
const NEWER_REMEDY_OVERWRITE: &str =
    "upgrade Cairn to change it, or run again with --force to overwrite it";
const NEWER_REMEDY_UPGRADE: &str = "upgrade Cairn to repair it";

fn refuse_newer(path: &Path, scan: &HeaderScan, remedy: &'static str) -> Result<(), AdminError> {
    if let Some(newest) = scan.newest() {
        if !newest.header.features.rewritable() {
            let f = newest.header.features;
            return Err(AdminError::NewerFormat {
                path: path.into(),
                features: format!(
                    "features compat {:#x}, ro_compat {:#x}, incompat {:#x}",
                    f.compat, f.ro_compat, f.incompat
                ),
                remedy,
            });
        }
    }
    for slot in &scan.slots {
        let features = match slot.state {
            CopyState::Bad(HeaderError::UnsupportedVersion { found }) => {
                format!("format version {found}")
            }
            CopyState::Bad(HeaderError::IncompatibleFeatures { bits }) => {
                format!("incompatible features {bits:#x}")
            }
            _ => continue,
        };
        return Err(AdminError::NewerFormat {
            path: path.into(),
            features,
            remedy,
        });
    }
    Ok(())
}

/// `cairn disk label`.
#[derive(Debug, Clone)]
pub struct LabelRequest {
    pub label: DiskLabel,
    pub force: bool,
    pub disk_uuid: Uuid,
    pub now_unix_seconds: u64,
    /// Where to look for another disk with the same label.
    pub discovery: Option<DiscoveryString>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LabelReport {
    pub path: PathBuf,
    /// Where the labelled device is attached in the caller's engine.
    #[serde(skip)]
    pub device: DeviceId,
    pub label: String,
    pub disk_uuid: Uuid,
    pub sector_format: String,
    pub logical_sector_bytes: u32,
    pub physical_sector_bytes: u32,
    pub size_bytes: u64,
    pub copy_offsets_bytes: Vec<u64>,
    /// What `--force` overrode.
    pub overrode: Vec<String>,
    /// Byte ranges zeroed to erase what was overridden (other owners' magic, an
    /// earlier label's stray copies), as `(offset, length)`.
    pub erased_ranges: Vec<(u64, u64)>,
    /// Things the operator should know (no second opinion on signatures, say).
    pub warnings: Vec<String>,
}

/// Label a device.
pub fn label(
    engine: &mut dyn FileEngine,
    host: &Host,
    path: &Path,
    request: &LabelRequest,
) -> Result<LabelReport, AdminError> {
    let device = open_for_write(host, path)?;
    if device.probe().size_bytes < DEVICE_SIZE_MIN_BYTES {
        return Err(AdminError::TooSmall {
            path: path.into(),
            size_bytes: device.probe().size_bytes,
        });
    }
    if let Some(discovery) = &request.discovery {
        refuse_duplicate_label(engine, host, discovery, device.probe(), &request.label)?;
    }
    let geometry = device.geometry().clone();
    let id = engine.attach(device);
    let scan = HeaderScan::read(engine, id).map_err(AdminError::io(path))?;
    let content = Content::read(engine, id, path)?;
    let obstacles = protection::content_obstacles(&scan, &content.found, &content.external.found);
    if !request.force {
        refuse_newer(path, &scan, NEWER_REMEDY_OVERWRITE)?;
        match obstacles.first() {
            Some(Obstacle::Foreign { what }) => {
                return Err(AdminError::Foreign {
                    path: path.into(),
                    what: what.clone(),
                })
            }
            Some(Obstacle::CairnLabel { description }) => {
                return Err(AdminError::AlreadyLabelled {
                    path: path.into(),
                    description: description.clone(),
                })
            }
            _ => {}
        }
    }

    let spec = LabelSpec {
        label: request.label.clone(),
        disk_uuid: request.disk_uuid,
        now_unix_seconds: request.now_unix_seconds,
        generation: scan.generation_max() + 1,
    };
    let header = labeling::write_label(engine, id, &spec).map_err(AdminError::write(path))?;
    // What --force overrode must not linger outside the new header blocks: an
    // earlier label's copies at other places, other owners' magic.
    let strays: Vec<(u64, u64)> = scan
        .cairn_blocks()
        .map(|s| (s.offset_bytes, HEADER_BLOCK_BYTES))
        .filter(|r| !header.copy_offsets_bytes.contains(&r.0))
        .collect();
    let erase = erase_overridden(
        engine,
        id,
        path,
        &header.copy_offsets_bytes,
        content.clone(),
        strays,
    )?;

    Ok(LabelReport {
        path: path.into(),
        device: id,
        label: header.label.to_string(),
        disk_uuid: header.disk_uuid,
        sector_format: geometry.sector_format(),
        logical_sector_bytes: header.logical_sector_bytes,
        physical_sector_bytes: header.physical_sector_bytes,
        size_bytes: header.device_size_bytes,
        copy_offsets_bytes: header.copy_offsets_bytes,
        overrode: obstacles
            .into_iter()
            .filter_map(|o| match o {
                Obstacle::Foreign { what } => Some(what),
                Obstacle::CairnLabel { description } => Some(description),
                _ => None,
            })
            .collect(),
        erased_ranges: erase,
        warnings: content.external.unavailable.into_iter().collect(),
    })
}

/// Rounds of erase-and-look-again after `--force`: erasing one signature can
/// uncover another that libblkid only reports once the first is gone.
const ERASE_ROUNDS_MAX: usize = 3;

/// Zero what was overridden — other owners' magic where it lies, plus `extra`
/// ranges — sparing the header copies at `copies`, then look again: the header
/// must read back healthy and nothing foreign may remain. Returns what was zeroed.
fn erase_overridden(
    engine: &mut dyn FileEngine,
    id: DeviceId,
    path: &Path,
    copies: &[u64],
    mut content: Content,
    extra: Vec<(u64, u64)>,
) -> Result<Vec<(u64, u64)>, AdminError> {
    let geometry = engine
        .geometry(id)
        .ok_or(IoError::UnknownDevice(id))
        .map_err(AdminError::io(path))?
        .clone();
    let keep: Vec<(u64, u64)> = copies.iter().map(|o| (*o, HEADER_BLOCK_BYTES)).collect();
    let sector = u64::from(geometry.logical_sector_bytes);
    let mut erased: Vec<(u64, u64)> = Vec::new();
    let mut pending = extra;
    for _ in 0..ERASE_ROUNDS_MAX {
        pending.extend(protection::erase_ranges(
            &content.found,
            &content.external.found,
            sector,
            geometry.size_bytes,
            &keep,
        ));
        pending.retain(|r| !erased.contains(r));
        pending.sort_unstable();
        pending.dedup();
        if pending.is_empty() {
            return Ok(erased);
        }
        labeling::zero_ranges(engine, id, &pending).map_err(AdminError::io(path))?;
        erased.append(&mut pending);
        let scan = HeaderScan::read(engine, id).map_err(AdminError::io(path))?;
        if scan.health() != HeaderHealth::Ok {
            let reason = scan.describe_copies().join("; ");
            return Err(AdminError::Write {
                path: path.into(),
                error: WriteError::Verify { copy: 0, reason },
            });
        }
        content = Content::read(engine, id, path)?;
        if content.descriptions(&scan).is_empty() {
            return Ok(erased);
        }
    }
    let scan = HeaderScan::read(engine, id).map_err(AdminError::io(path))?;
    Err(AdminError::NotErased {
        path: path.into(),
        what: content.descriptions(&scan).join("; "),
    })
}

fn refuse_duplicate_label(
    engine: &mut dyn FileEngine,
    host: &Host,
    discovery: &DiscoveryString,
    target: &DeviceProbe,
    label: &DiskLabel,
) -> Result<(), AdminError> {
    let paths = match discovery.expand() {
        Ok(e) => e.paths,
        Err(DiscoveryError::NothingMatched { .. }) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    for entry in catalog::build(catalog::gather(
        engine,
        host,
        &paths,
        catalog::Depth::Labels,
    )) {
        let is_target = std::iter::once(&entry.path)
            .chain(entry.also_seen_at.iter())
            .any(|p| std::fs::metadata(p).is_ok_and(|m| target.same_object(&m)));
        if entry.label.as_deref() == Some(label.as_str()) && !is_target {
            return Err(AdminError::DuplicateLabel {
                label: label.to_string(),
                other: entry.path.clone(),
                uuid: entry.disk_uuid.unwrap_or_default(),
            });
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Serialize)]
pub struct UnlabelReport {
    pub path: PathBuf,
    pub label: Option<String>,
    pub disk_uuid: Option<Uuid>,
    /// Offsets of the header blocks zeroed (copy places and stray copies).
    pub erased_offsets: Vec<u64>,
}

/// Remove the label: every block carrying Cairn's magic, and nothing else.
pub fn unlabel(
    engine: &mut dyn FileEngine,
    host: &Host,
    path: &Path,
    force: bool,
) -> Result<UnlabelReport, AdminError> {
    let id = engine.attach(open_for_write(host, path)?);
    let scan = HeaderScan::read(engine, id).map_err(AdminError::io(path))?;
    if !scan.has_cairn_bytes() {
        return Err(AdminError::NotLabelled {
            path: path.into(),
            action: "remove",
        });
    }
    let newest = scan.newest().map(|d| d.header.clone());
    if !force {
        refuse_newer(path, &scan, NEWER_REMEDY_OVERWRITE)?;
        match &newest {
            Some(h) => {
                if let Some(group) = h.group_uuid {
                    let name = crate::group::membership(engine, id)
                        .and_then(|m| m.group.map(|g| g.name))
                        .unwrap_or_else(|| "(never completely created)".into());
                    return Err(AdminError::GroupMember {
                        path: path.into(),
                        group,
                        member: format!("disk {} of disk group {name}", h.label),
                    });
                }
            }
            None => return Err(AdminError::UnverifiableLabel { path: path.into() }),
        }
    }
    let erased = labeling::erase_label(engine, id, &scan).map_err(AdminError::io(path))?;
    Ok(UnlabelReport {
        path: path.into(),
        label: newest.as_ref().map(|h| h.label.to_string()),
        disk_uuid: newest.map(|h| h.disk_uuid),
        erased_offsets: erased,
    })
}

/// One field of an inspected copy.
#[derive(Debug, Clone, Serialize)]
pub struct InspectField {
    pub name: String,
    pub offset: usize,
    pub size: usize,
    pub value: String,
    pub meaning: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct InspectReport {
    pub path: PathBuf,
    pub copy: usize,
    pub offset_bytes: u64,
    /// `good (generation 1)`, or what is wrong with the copy.
    pub state: String,
    pub valid: bool,
    pub fields: Vec<InspectField>,
    /// The raw block (empty when it could not be read).
    #[serde(skip)]
    pub block: Vec<u8>,
    pub block_hex: String,
}

/// Dump one header copy, field by field.
pub fn inspect(
    engine: &mut dyn FileEngine,
    host: &Host,
    path: &Path,
    copy: usize,
) -> Result<InspectReport, AdminError> {
    let id = engine.attach(DeviceFile::open(path, OpenMode::READ, host)?);
    let scan = HeaderScan::read(engine, id).map_err(AdminError::io(path))?;
    let Some(slot) = scan.slots.iter().find(|s| s.index == copy) else {
        return Err(AdminError::NoSuchCopy {
            path: path.into(),
            copy,
            count: scan.slots.len(),
        });
    };
    let block = slot.block.clone().unwrap_or_default();
    Ok(InspectReport {
        path: path.into(),
        copy,
        offset_bytes: slot.offset_bytes,
        state: slot.state.describe(),
        valid: matches!(slot.state, CopyState::Good(_)),
        fields: describe(&block)
            .into_iter()
            .map(|f| InspectField {
                name: f.name,
                offset: f.offset,
                size: f.size,
                value: f.value,
                meaning: f.meaning.to_string(),
            })
            .collect(),
        block_hex: block.iter().map(|b| format!("{b:02x}")).collect(),
        block,
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct CopyReport {
    pub copy: usize,
    pub offset_bytes: u64,
    pub state: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct RepairReport {
    pub path: PathBuf,
    pub dry_run: bool,
    /// The copies as found.
    pub copies: Vec<CopyReport>,
    pub source_copy: Option<usize>,
    pub label: Option<String>,
    pub disk_uuid: Option<Uuid>,
    /// Copies rewritten (or that would be, with `--dry-run`).
    pub rewrites: Vec<Rewrite>,
    /// Bytes nobody recognised that a rewrite replaced (damage, not another
    /// owner's data: no signature anywhere, and the good copies agree).
    pub overwrote: Vec<String>,
    /// Byte ranges zeroed to erase what `--overwrite-foreign` overrode.
    pub erased_ranges: Vec<(u64, u64)>,
    pub warnings: Vec<String>,
}

/// How far `repair` may go.
#[derive(Debug, Clone, Copy, Default)]
pub struct RepairOptions {
    /// Say what would be done; write nothing.
    pub dry_run: bool,
    /// Restore even when good copies disagree on the disk UUID.
    pub force: bool,
    /// Restore even over another owner's data (a signature on the device, or
    /// non-zero bytes that are not Cairn's in a copy's place).
    pub overwrite_foreign: bool,
}

/// Restore damaged header copies from the newest good one.
pub fn repair(
    engine: &mut dyn FileEngine,
    host: &Host,
    path: &Path,
    options: RepairOptions,
) -> Result<RepairReport, AdminError> {
    let device = if options.dry_run {
        DeviceFile::open(path, OpenMode::READ, host)?
    } else {
        open_for_write(host, path)?
    };
    let id = engine.attach(device);
    let scan = HeaderScan::read(engine, id).map_err(AdminError::io(path))?;
    let copies = scan
        .slots
        .iter()
        .map(|s| CopyReport {
            copy: s.index,
            offset_bytes: s.offset_bytes,
            state: s.state.describe(),
        })
        .collect();
    refuse_newer(path, &scan, NEWER_REMEDY_UPGRADE)?;
    let plan = repair_plan(path, &scan, options.force)?;

    // Someone may have put their own data where copies were (mkfs over a wiped
    // primary): restoring the header would destroy it. A recognised signature
    // anywhere says so. Bytes nobody recognises inside a copy's own 4 KiB,
    // on a disk whose good copies agree, are damage (`dd`, then `echo
    // CORRUPTION > disk`): restored, and what was there is said.
    let content = Content::read(engine, id, path)?;
    let (theirs, overwrote) = foreign_in_places(&scan, &plan, &content);
    if !plan.rewrites.is_empty() && !theirs.is_empty() && !options.overwrite_foreign {
        return Err(AdminError::ForeignOverDamaged {
            path: path.into(),
            what: theirs.join("; "),
        });
    }
    let mut erased = Vec::new();
    if !options.dry_run {
        repair::apply(engine, id, &plan).map_err(AdminError::write(path))?;
        if options.overwrite_foreign && !theirs.is_empty() {
            // As label --force: what was overridden must not stay behind to claim
            // the disk again (a GPT backup at the last LBA, say).
            erased = erase_overridden(
                engine,
                id,
                path,
                &plan.source.copy_offsets_bytes,
                content.clone(),
                Vec::new(),
            )?;
        }
    }
    Ok(RepairReport {
        path: path.into(),
        dry_run: options.dry_run,
        copies,
        source_copy: Some(plan.source_copy),
        label: Some(plan.source.label.to_string()),
        disk_uuid: Some(plan.source.disk_uuid),
        rewrites: plan.rewrites,
        overwrote,
        erased_ranges: erased,
        warnings: content.external.unavailable.into_iter().collect(),
    })
}

/// The plan that restores a device's damaged header copies, or why there
/// is none.
fn repair_plan(
    path: &Path,
    scan: &HeaderScan,
    force: bool,
) -> Result<repair::RepairPlan, AdminError> {
    match repair::plan(scan, force) {
        Ok(plan) => Ok(plan),
        Err(PlanError::NotLabelled) => Err(AdminError::NotLabelled {
            path: path.into(),
            action: "repair",
        }),
        Err(PlanError::Conflict { details }) => {
            let newest = scan
                .newest()
                .expect("invariant: a conflict has good copies");
            Err(AdminError::Conflict {
                path: path.into(),
                details,
                source_copy: usize::from(newest.copy_index),
                source_uuid: newest.header.disk_uuid,
            })
        }
        Err(error) => Err(AdminError::Plan {
            path: path.into(),
            error,
        }),
    }
}

/// What of another owner's the device holds, said: its signatures, and
/// bytes nobody recognises in a place `plan` rewrites, unless the device
/// shows nothing else of theirs and its good copies agree: then those bytes
/// are damage, said as what the repair overwrote (the second list).
fn foreign_in_places(
    scan: &HeaderScan,
    plan: &repair::RepairPlan,
    content: &Content,
) -> (Vec<String>, Vec<String>) {
    let mut theirs = content.descriptions(scan);
    let unknown: Vec<&crate::header_copies::CopySlot> = scan
        .slots
        .iter()
        .filter(|s| plan.rewrites.iter().any(|r| r.copy == s.index))
        .filter(|s| matches!(s.state, CopyState::Bad(HeaderError::NotCairn { .. })))
        .collect();
    let damage_only = theirs.is_empty() && plan.conflicting_uuids.is_empty();
    let mut overwrote = Vec::new();
    for s in unknown {
        if damage_only {
            overwrote.push(format!(
                "copy {}'s place ({}) held bytes that are not Cairn's: {}",
                s.index,
                s.offset_bytes,
                preview(s.block.as_deref().unwrap_or_default())
            ));
        } else {
            theirs.push(format!(
                "bytes that are not Cairn's in copy {}'s place ({})",
                s.index, s.offset_bytes
            ));
        }
    }
    (theirs, overwrote)
}

/// What a block held, for a message: its printable start, quoted, and how
/// much of the rest is zeros.
fn preview(block: &[u8]) -> String {
    let end = block.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    let shown: String = block[..end.min(32)]
        .iter()
        .flat_map(|b| std::ascii::escape_default(*b))
        .map(char::from)
        .collect();
    format!(
        "\"{shown}\"{}{}",
        if end > 32 { "..." } else { "" },
        if end < block.len() {
            format!(" then {} zero bytes", block.len() - end)
        } else {
            String::new()
        }
    )
}

/// Everything `cairn disk list` shows.
#[derive(Debug, Clone, Serialize)]
pub struct ListReport {
    pub discovery_string: String,
    pub discovery_source: String,
    pub unmatched_globs: Vec<String>,
    pub disks: Vec<DiskEntry>,
}

/// List every disk the discovery string finds.
pub fn list(
    engine: &mut dyn FileEngine,
    host: &Host,
    discovery: &DiscoveryString,
) -> Result<ListReport, AdminError> {
    let expansion = discovery.expand()?;
    let disks = catalog::build(catalog::gather(
        engine,
        host,
        &expansion.paths,
        catalog::Depth::Signatures,
    ));
    Ok(ListReport {
        discovery_string: discovery.text.clone(),
        discovery_source: discovery.source.to_string(),
        unmatched_globs: expansion.unmatched_globs,
        disks,
    })
}
