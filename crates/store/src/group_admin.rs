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
use cairn_format::group::{AtLayout, AU_BYTES_MAX, AU_BYTES_MIN};

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
    let checked = check_disks(host, disks, spec, &name)?;
    let mut new_disks = Vec::new();
    let mut created = Vec::new();
    let mut labelled_here: Vec<DeviceId> = Vec::new();
    let result = (|| -> Result<(), GroupAdminError> {
        for (i, (arg, label)) in disks.iter().zip(&checked).enumerate() {
            let (device, label, labelled_now) = match label {
                Some(label) => {
                    let device = admin::open_for_write(host, &arg.path)?;
                    (engine.attach(device), label.clone(), false)
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
                    labelled_here.push(report.device);
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
        Ok(())
    })();
    if let Err(e) = result {
        // A refusal part way leaves no trace: labels written by this call go.
        for device in labelled_here {
            if let Ok(scan) = HeaderScan::read(engine, device) {
                let _ = crate::labeling::erase_label(engine, device, &scan);
            }
        }
        return Err(e);
    }
    let group = group::create(engine, &new_disks, spec)?;
    Ok((group, lock, created))
}

/// Everything `group create` can check before it writes: the devices exist
/// and are distinct, none belongs to a group (unless forced), sector sizes
/// agree, the AU size is valid, every disk holds at least one data AU, and
/// there are enough failure groups. Returns each disk's existing label.
fn check_disks(
    host: &Host,
    disks: &[DiskArg],
    spec: &GroupSpec,
    name: &crate::names::GroupName,
) -> Result<Vec<Option<String>>, GroupAdminError> {
    let au = spec.au_bytes;
    if !au.is_power_of_two() || !(AU_BYTES_MIN..=AU_BYTES_MAX).contains(&au) {
        return Err(GroupAdminError::Invalid(format!(
            "AU size {au} is not a power of two from 1M to 64M; use --au-size 1M, 2M, 4M ... 64M"
        )));
    }
    if disks.is_empty() {
        return Err(GroupAdminError::Invalid(
            "a group needs at least one disk; name them with --disk".into(),
        ));
    }
    let mut seen: Vec<(PathBuf, std::fs::Metadata)> = Vec::new();
    let mut labels = Vec::new();
    let mut sectors: Vec<(PathBuf, u32)> = Vec::new();
    let mut failgroups: Vec<String> = Vec::new();
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
        let header = read_header(host, &arg.path)?;
        if let Some(group) = header.as_ref().and_then(|h| h.group_uuid) {
            if !spec.force {
                return Err(AdminError::GroupMember {
                    path: arg.path.clone(),
                    group,
                }
                .into());
            }
        }
        if AtLayout::for_disk(probe.size_bytes, au).is_none() {
            return Err(GroupAdminError::Invalid(format!(
                "{} ({} bytes) is too small for {}-MiB AUs; use a bigger device or a smaller --au-size",
                arg.path.display(),
                probe.size_bytes,
                au >> 20
            )));
        }
        sectors.push((arg.path.clone(), probe.logical_sector_bytes));
        let label = header.map(|h| h.label.as_str().to_string());
        failgroups.push(
            arg.failgroup
                .clone()
                .or_else(|| label.clone())
                .unwrap_or_else(|| format!("{}_{i:04}", name.as_str())),
        );
        labels.push(label);
    }
    let group_sector = spec.sector_bytes.unwrap_or(sectors[0].1);
    if group_sector != 512 && group_sector != 4096 {
        return Err(GroupAdminError::Invalid(format!(
            "{} has {group_sector}-byte logical sectors; a group uses 512 or 4096",
            sectors[0].0.display()
        )));
    }
    if let Some((path, sector)) = sectors.iter().find(|(_, s)| *s != group_sector) {
        return Err(GroupAdminError::Invalid(format!(
            "{} has {sector}-byte logical sectors but the group uses {group_sector}; 512-byte (512n/512e) and 4096-byte (4Kn) disks cannot mix",
            path.display()
        )));
    }
    failgroups.sort_unstable();
    failgroups.dedup();
    let copies = usize::from(spec.redundancy.copies());
    if failgroups.len() < copies {
        return Err(GroupAdminError::Invalid(format!(
            "{} redundancy keeps {copies} copies in different failure groups, but the disks form only {} failure group(s); name more disks or give them failure groups with PATH=FAILGROUP",
            spec.redundancy.as_str().to_lowercase(),
            failgroups.len()
        )));
    }
    Ok(labels)
}

/// The newest good header of a device, if it carries a Cairn label.
fn read_header(
    host: &Host,
    path: &Path,
) -> Result<Option<cairn_format::DiskHeader>, GroupAdminError> {
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
        .max_by_key(|h| h.generation))
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
/// A member discovery does not reach is marked offline ([`group::mount`]).
pub fn mount<'e>(
    engine: &'e mut dyn FileEngine,
    host: &Host,
    discovery: &DiscoveryString,
    name: &str,
    run_dir: &Path,
) -> Result<Mounted<'e>, GroupAdminError> {
    mount_with(
        engine,
        host,
        discovery,
        name,
        run_dir,
        group::MissingDisks::MarkOffline,
    )
}

/// [`mount`], choosing what a member discovery does not reach means.
pub fn mount_with<'e>(
    engine: &'e mut dyn FileEngine,
    host: &Host,
    discovery: &DiscoveryString,
    name: &str,
    run_dir: &Path,
    missing_disks: group::MissingDisks,
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
        let device = open_member(host, path)?;
        let id = engine.attach(device);
        paths.insert(id.0, path.clone());
        devices.push(id);
    }
    let (group, report) = group::mount_with(
        engine,
        &devices,
        &GroupSelector::Uuid(group.uuid),
        missing_disks,
    )?;
    Ok(Mounted {
        group,
        report,
        lock,
        paths,
    })
}

/// How long a member disk may stay busy after its previous owner died: the
/// kernel releases a killed process's io_uring, and with it the disk's lock,
/// a moment after the process is gone.
const MEMBER_BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Open a member disk. The group lock is ours, so a disk that is busy belongs
/// to a process that is going away: wait for it a little.
fn open_member(host: &Host, path: &Path) -> Result<DeviceFile, AdminError> {
    let started = std::time::Instant::now();
    loop {
        match admin::open_for_write(host, path) {
            Err(AdminError::Open(cairn_io::OpenError::InUse { .. }))
                if started.elapsed() < MEMBER_BUSY_WAIT =>
            {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            other => return other,
        }
    }
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
