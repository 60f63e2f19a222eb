//! Disk groups on real devices: what `cairn group ...` and the file commands
//! run. Finds a group's disks through the discovery string (by the UUIDs in
//! their labels, never by path), takes the group's lock, opens the disks
//! exclusively, and hands them to [`crate::group`]. Creating a group first puts
//! every device through the label protections of [`crate::admin`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cairn_io::host::Host;
use cairn_io::{DeviceFile, DeviceId, FileEngine, OpenMode};
use serde::Serialize;
use uuid::Uuid;

use crate::admin::{self, AdminError, LabelRequest};
use crate::discovery::{DiscoveryError, DiscoveryString};
use crate::group::{self, Group, GroupError, GroupSelector, GroupSpec, MountReport, NewDisk};
use crate::group_lock::{GroupLock, LockError};
use crate::header_copies::HeaderScan;

#[derive(Debug, thiserror::Error)]
pub enum GroupAdminError {
    #[error(transparent)]
    Admin(#[from] AdminError),
    #[error(transparent)]
    Group(#[from] GroupError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    #[error("{0}")]
    Invalid(String),
}

/// A disk named on `group create`.
#[derive(Debug, Clone)]
pub struct DiskArg {
    pub path: PathBuf,
    pub failgroup: Option<String>,
}

impl DiskArg {
    /// Parse `PATH[=FAILGROUP]`.
    pub fn parse(text: &str) -> Self {
        match text.rsplit_once('=') {
            Some((path, fg)) if !fg.is_empty() && !fg.contains('/') => Self {
                path: PathBuf::from(path),
                failgroup: Some(fg.to_ascii_uppercase()),
            },
            _ => Self {
                path: PathBuf::from(text),
                failgroup: None,
            },
        }
    }
}

/// What `group create` did, per disk.
#[derive(Debug, Clone, Serialize)]
pub struct CreatedDisk {
    pub path: PathBuf,
    pub label: String,
    pub failgroup: String,
    pub labelled_now: bool,
}

/// Create a group on the given devices; returns it mounted, with its lock.
pub fn create<'e>(
    engine: &'e mut dyn FileEngine,
    host: &Host,
    disks: &[DiskArg],
    spec: &GroupSpec,
    discovery: Option<&DiscoveryString>,
    run_dir: &Path,
) -> Result<(Group<'e>, GroupLock, Vec<CreatedDisk>), GroupAdminError> {
    let name = crate::names::GroupName::parse(&spec.name).map_err(GroupError::from)?;
    if let Some(d) = discovery {
        if let Some(existing) = find_groups(host, d)?
            .into_iter()
            .find(|g| g.name == name.as_str())
        {
            return Err(GroupAdminError::Invalid(format!(
                "a disk group named {} already exists (uuid {}); choose another name",
                existing.name, existing.uuid
            )));
        }
    }
    let lock = GroupLock::acquire(run_dir, spec.group_uuid, name.as_str())?;
    let mut seen: Vec<(PathBuf, std::fs::Metadata)> = Vec::new();
    let mut new_disks = Vec::new();
    let mut created = Vec::new();
    for (i, arg) in disks.iter().enumerate() {
        let meta = std::fs::metadata(&arg.path).map_err(|_| {
            AdminError::Open(cairn_io::OpenError::NotFound {
                path: arg.path.clone(),
            })
        })?;
        let probe = cairn_io::probe::probe(&arg.path, host).map_err(AdminError::from)?;
        if let Some((other, _)) = seen.iter().find(|(_, m)| probe.same_object(m)) {
            return Err(GroupAdminError::Invalid(format!(
                "{} and {} are the same device; name each disk once",
                other.display(),
                arg.path.display()
            )));
        }
        seen.push((arg.path.clone(), meta));
        let labelled = read_label(host, &arg.path)?;
        let (device, label, labelled_now) = match labelled {
            Some(label) => {
                let device = admin::open_for_write(host, &arg.path)?;
                (engine.attach(device), label, false)
            }
            None => {
                let label = format!("{}_{i:04}", name.as_str());
                let label = cairn_format::DiskLabel::parse(&label).map_err(|e| {
                    GroupAdminError::Invalid(format!("generated label {label}: {e}"))
                })?;
                let report = admin::label(
                    engine,
                    host,
                    &arg.path,
                    &LabelRequest {
                        label,
                        force: spec.force,
                        disk_uuid: Uuid::new_v4(),
                        now_unix_seconds: spec.now_unix_seconds,
                        discovery: discovery.cloned(),
                    },
                )?;
                (report.device, report.label, true)
            }
        };
        new_disks.push(NewDisk {
            device,
            failgroup: arg.failgroup.clone(),
        });
        created.push(CreatedDisk {
            path: arg.path.clone(),
            failgroup: arg.failgroup.clone().unwrap_or_else(|| label.clone()),
            label,
            labelled_now,
        });
    }
    let group = group::create(engine, &new_disks, spec)?;
    Ok((group, lock, created))
}

/// The label of a device if it carries a good Cairn header.
fn read_label(host: &Host, path: &Path) -> Result<Option<String>, GroupAdminError> {
    let mut scratch = cairn_io::new_file_engine(cairn_io::EngineKind::Sync, 4)
        .map_err(|e| GroupAdminError::Invalid(format!("cannot start an I/O engine: {e}")))?;
    let device = DeviceFile::open(path, OpenMode::READ, host).map_err(AdminError::from)?;
    let id = scratch.attach(device);
    let scan = HeaderScan::read(scratch.as_mut(), id).map_err(|error| AdminError::Io {
        path: path.into(),
        error,
    })?;
    Ok(scan
        .good()
        .map(|(_, h)| h.header.clone())
        .max_by_key(|h| h.generation)
        .map(|h| h.label.as_str().to_string()))
}

/// A group seen on the discovered disks, before mounting.
#[derive(Debug, Clone, Serialize)]
pub struct FoundGroup {
    pub uuid: Uuid,
    pub name: String,
    pub paths: Vec<PathBuf>,
}

/// The groups whose disks the discovery string reaches (read-only).
pub fn find_groups(
    host: &Host,
    discovery: &DiscoveryString,
) -> Result<Vec<FoundGroup>, GroupAdminError> {
    let paths = match discovery.expand() {
        Ok(e) => e.paths,
        Err(DiscoveryError::NothingMatched { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut scratch = cairn_io::new_file_engine(cairn_io::EngineKind::Sync, 4)
        .map_err(|e| GroupAdminError::Invalid(format!("cannot start an I/O engine: {e}")))?;
    let mut ids: Vec<(DeviceId, PathBuf)> = Vec::new();
    let mut seen: Vec<DeviceProbeKey> = Vec::new();
    for path in paths {
        let Ok(device) = DeviceFile::open(&path, OpenMode::READ, host) else {
            continue;
        };
        // One entry per device, whatever names reach it.
        let key = DeviceProbeKey::of(device.probe());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        ids.push((scratch.attach(device), path));
    }
    let devices: Vec<DeviceId> = ids.iter().map(|(d, _)| *d).collect();
    let found = group::identify(scratch.as_mut(), &devices);
    let mut out = Vec::new();
    for (uuid, members) in found {
        let name = members
            .iter()
            .filter_map(|(_, _, s)| s.as_ref())
            .max_by_key(|(g, _)| *g)
            .map_or_else(|| "?".to_string(), |(_, s)| s.name.clone());
        let paths = members
            .iter()
            .filter_map(|(d, _, _)| ids.iter().find(|(id, _)| id == d).map(|(_, p)| p.clone()))
            .collect();
        out.push(FoundGroup { uuid, name, paths });
    }
    Ok(out)
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct DeviceProbeKey(String);

impl DeviceProbeKey {
    fn of(probe: &cairn_io::DeviceProbe) -> Self {
        Self(probe.canonical_path.display().to_string())
    }
}

/// A group mounted from real devices.
pub struct Mounted<'e> {
    pub group: Group<'e>,
    pub report: MountReport,
    /// Held until dropped: the group is this process's meanwhile.
    pub lock: GroupLock,
    /// The path each attached device was opened by, by device id.
    pub paths: BTreeMap<u32, PathBuf>,
}

/// Find group `name` by discovery, lock it, open its disks and mount it.
pub fn mount<'e>(
    engine: &'e mut dyn FileEngine,
    host: &Host,
    discovery: &DiscoveryString,
    name: &str,
    run_dir: &Path,
) -> Result<Mounted<'e>, GroupAdminError> {
    let wanted = name.trim_start_matches('+').to_ascii_uppercase();
    let groups = find_groups(host, discovery)?;
    let matching: Vec<&FoundGroup> = groups.iter().filter(|g| g.name == wanted).collect();
    let group = match matching.as_slice() {
        [] => {
            let known: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
            return Err(GroupError::NotFound(format!(
                "no disk group {wanted} among the disks the discovery string {:?} reaches{}",
                discovery.text,
                if known.is_empty() {
                    String::new()
                } else {
                    format!(" (found: {})", known.join(", "))
                }
            ))
            .into());
        }
        [one] => (*one).clone(),
        _ => {
            return Err(GroupAdminError::Invalid(format!(
                "{} groups are named {wanted}; detach the disks of the one you do not mean",
                matching.len()
            )))
        }
    };
    let lock = GroupLock::acquire(run_dir, group.uuid, &wanted)?;
    let mut devices = Vec::new();
    let mut paths = BTreeMap::new();
    for path in &group.paths {
        let device = admin::open_for_write(host, path)?;
        let id = engine.attach(device);
        paths.insert(id.0, path.clone());
        devices.push(id);
    }
    let (group, report) = group::mount(engine, &devices, &GroupSelector::Uuid(group.uuid))?;
    Ok(Mounted {
        group,
        report,
        lock,
        paths,
    })
}

/// Per-disk space as the devices hold it (for thin provisioning: what a sparse
/// file really occupies).
#[derive(Debug, Clone, Serialize)]
pub struct DiskSpaceReport {
    pub number: u16,
    pub label: String,
    pub path: Option<PathBuf>,
    pub size_bytes: u64,
    pub group_used_bytes: u64,
    /// Bytes the device physically holds, where it can tell (files: allocated blocks).
    pub device_allocated_bytes: Option<u64>,
}

pub fn space(group: &Group<'_>, engine_paths: &BTreeMap<u32, PathBuf>) -> Vec<DiskSpaceReport> {
    group
        .disks()
        .into_iter()
        .map(|d| {
            let path = d.device.and_then(|id| engine_paths.get(&id.0).cloned());
            let allocated = path.as_ref().and_then(|p| {
                use std::os::unix::fs::MetadataExt;
                let m = std::fs::metadata(p).ok()?;
                m.file_type().is_file().then_some(m.blocks() * 512)
            });
            DiskSpaceReport {
                number: d.number,
                label: d.label,
                path,
                size_bytes: d.size_bytes,
                group_used_bytes: d
                    .free_aus
                    .map_or(0, |free| (d.total_aus - free) * group.au_bytes()),
                device_allocated_bytes: allocated,
            }
        })
        .collect()
}
