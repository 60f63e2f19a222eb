//! Disk groups on real devices: what `cairn group ...` and the file commands
//! run. Finds a group's disks through the discovery string (by the UUIDs in
//! their labels, never by path), takes the group's lock, opens the disks
//! exclusively, and hands them to [`crate::group`]. Creating a group first puts
//! every device through the label protections of [`crate::admin`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cairn_io::host::Host;
use cairn_io::{DeviceFile, DeviceId, FileEngine, OpenError, OpenMode};
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
    /// Another group's claim that was overridden: which disk of which group.
    pub overrode: Option<String>,
}

/// What `check_disks` learnt of one disk.
#[derive(Debug, Clone)]
struct CheckedDisk {
    /// Its Cairn label, if it has one (kept).
    label: Option<String>,
    /// The claim of another group that `--force` or `--take-from-group`
    /// overrides, described.
    overrode: Option<String>,
}

/// Create a group on the given devices; returns it mounted, with its lock.
///
/// A disk another group's label claims is taken only when that group cannot
/// use it: with `spec.force` if the group never finished creating, no longer
/// uses the disk, or cannot be mounted anyway; and only when named in
/// `take_from` (group names) if the group is mountable and counts on it.
pub fn create<'e>(
    engine: &'e mut dyn FileEngine,
    host: &Host,
    disks: &[DiskArg],
    spec: &GroupSpec,
    take_from: &[String],
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
    let checked = check_disks(host, disks, spec, &name, take_from, discovery)?;
    // Every claim another group has on these disks was judged above.
    let spec = &GroupSpec {
        force: spec.force || checked.iter().any(|c| c.overrode.is_some()),
        ..spec.clone()
    };
    let mut new_disks = Vec::new();
    let mut created = Vec::new();
    let mut labelled_here: Vec<DeviceId> = Vec::new();
    let result = (|| -> Result<(), GroupAdminError> {
        for (i, (arg, checked)) in disks.iter().zip(&checked).enumerate() {
            let (device, label, labelled_now) = match &checked.label {
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
                overrode: checked.overrode.clone(),
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
    take_from: &[String],
    discovery: Option<&DiscoveryString>,
) -> Result<Vec<CheckedDisk>, GroupAdminError> {
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
        let overrode = match header.as_ref().and_then(|h| h.group_uuid) {
            Some(_) => Some(judge_claim(
                host, &arg.path, spec.force, take_from, discovery,
            )?),
            None => None,
        };
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
        if label.is_none() {
            let generated = format!("{}_{i:04}", name.as_str());
            cairn_format::DiskLabel::parse(&generated).map_err(|e| {
                GroupAdminError::Invalid(format!(
                    "{} would be labelled {generated}, which is not a valid label ({e}); use a shorter group name, or label the disk first with `cairn disk label`",
                    arg.path.display()
                ))
            })?;
        }
        let failgroup = arg
            .failgroup
            .clone()
            .or_else(|| label.clone())
            .unwrap_or_else(|| format!("{}_{i:04}", name.as_str()))
            .to_ascii_uppercase();
        crate::names::GroupName::parse(&failgroup).map_err(|e| {
            GroupAdminError::Invalid(format!("failure group of {}: {e}", arg.path.display()))
        })?;
        failgroups.push(failgroup);
        labels.push(CheckedDisk { label, overrode });
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

/// Whether a disk another group's label claims may be taken, and if so, the
/// claim overridden, described. The rule: a group that cannot use the disk
/// (its create never finished, it recorded the disk offline, or it cannot be
/// mounted anyway) gives it up to `--force`; a group that is mountable and
/// counts on the disk gives it up only when named in `take_from`
/// (`--take-from-group`), because taking it degrades or breaks that group.
fn judge_claim(
    host: &Host,
    path: &Path,
    force: bool,
    take_from: &[String],
    discovery: Option<&DiscoveryString>,
) -> Result<String, GroupAdminError> {
    let mut scratch = cairn_io::new_file_engine(cairn_io::EngineKind::Sync, 4)
        .map_err(|e| GroupAdminError::Invalid(format!("cannot start an I/O engine: {e}")))?;
    let device = DeviceFile::open(path, OpenMode::READ, host).map_err(AdminError::from)?;
    let id = scratch.attach(device);
    let m = group::membership(scratch.as_mut(), id).ok_or_else(|| {
        GroupAdminError::Invalid(format!(
            "{}: its label changed while it was read; try again",
            path.display()
        ))
    })?;
    let disk_uuid = m.disk_uuid;
    let shown = path.display();
    let needs_force = |claim: String| -> Result<String, GroupAdminError> {
        if force {
            Ok(claim)
        } else {
            Err(GroupAdminError::Invalid(format!(
                "{shown} is {claim}; run again with --force to take it"
            )))
        }
    };
    let Some(group) = m.group.as_ref() else {
        return needs_force(format!(
            "disk {} of disk group {}, whose creation never finished (no disk holds its superblock)",
            m.label, m.group_uuid
        ));
    };
    let entry = match m.entry() {
        Some(e) if e.state == cairn_format::group::DiskState::Online => e.clone(),
        _ => {
            return needs_force(format!(
                "disk {} of disk group {} (uuid {}), which no longer uses it (recorded OFFLINE)",
                m.label, group.name, m.group_uuid
            ))
        }
    };
    // Which of the group's disks discovery reaches: with this one gone, does
    // the group still mount, and does it mount now?
    let present: Vec<Uuid> = match discovery {
        Some(d) => find_groups(host, d)?
            .into_iter()
            .filter(|g| g.uuid == m.group_uuid)
            .flat_map(|g| g.disks.into_iter().map(|d| d.disk_uuid))
            .collect(),
        // Unknown: assume every disk is there (the cautious answer).
        None => group.disks.iter().map(|d| d.disk_uuid).collect(),
    };
    let down = |without: Option<Uuid>| -> usize {
        let fgs: std::collections::BTreeSet<u16> = group
            .disks
            .iter()
            .filter(|d| d.state == cairn_format::group::DiskState::Online)
            .filter(|d| {
                Some(d.disk_uuid) == without
                    || (d.disk_uuid != disk_uuid && !present.contains(&d.disk_uuid))
            })
            .map(|d| d.failgroup_id)
            .collect();
        fgs.len()
    };
    let copies = usize::from(group.copies);
    if down(None) >= copies {
        return needs_force(format!(
            "disk {} of disk group {} (uuid {}), which cannot be mounted anyway: disks it needs are missing",
            entry.label, group.name, m.group_uuid
        ));
    }
    let after = if down(Some(disk_uuid)) >= copies {
        "UNMOUNTABLE"
    } else {
        "DEGRADED"
    };
    let claim = format!(
        "disk {} of disk group {} (uuid {}), which is mountable and counts on it: taking it leaves {} {after}",
        entry.label, group.name, m.group_uuid, group.name
    );
    if take_from
        .iter()
        .any(|t| t.eq_ignore_ascii_case(&group.name))
    {
        return Ok(claim);
    }
    Err(GroupAdminError::Invalid(format!(
        "{shown} is {claim}; there is no `disk drop` yet — if {} may lose this disk, run again with --take-from-group {}",
        group.name, group.name
    )))
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
    /// From the newest superblock any of its disks holds; `?` when none has
    /// one (a create that never finished).
    pub name: String,
    /// Whether any disk holds a superblock of the group: a group whose disks
    /// name it in their labels but carry none was never completely created.
    pub complete: bool,
    pub paths: Vec<PathBuf>,
    /// Each device as its label names it.
    pub disks: Vec<FoundMember>,
}

/// A device whose label names a group.
#[derive(Debug, Clone, Serialize)]
pub struct FoundMember {
    pub path: PathBuf,
    pub label: String,
    pub disk_uuid: Uuid,
}

impl FoundGroup {
    /// Devices that carry one disk UUID, as (uuid, label, paths): a copy of a
    /// member (a cloned LUN, a copied image) beside the member itself.
    pub fn clones(&self) -> Vec<(Uuid, String, Vec<PathBuf>)> {
        let mut by_uuid: BTreeMap<Uuid, (String, Vec<PathBuf>)> = BTreeMap::new();
        for d in &self.disks {
            by_uuid
                .entry(d.disk_uuid)
                .or_insert_with(|| (d.label.clone(), Vec::new()))
                .1
                .push(d.path.clone());
        }
        by_uuid
            .into_iter()
            .filter(|(_, (_, paths))| paths.len() > 1)
            .map(|(uuid, (label, paths))| (uuid, label, paths))
            .collect()
    }

    /// Refuse a group in which two devices carry one disk UUID: either could
    /// be taken for the member, and writes through a stale copy are lost when
    /// it goes (ASM refuses such a group too).
    pub fn refuse_clones(&self) -> Result<(), GroupAdminError> {
        match self.clones().into_iter().next() {
            None => Ok(()),
            Some((uuid, label, paths)) => Err(GroupAdminError::Invalid(format!(
                "group {}: disk {label} (uuid {uuid}) is on {} devices: {} — all but one are copies (a cloned LUN or a copied image); hide the copies from the discovery string or detach them, then try again",
                self.name,
                paths.len(),
                paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" and ")
            ))),
        }
    }
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
    // One entry per device, whatever names reach it (a symlink, a loop device
    // and its backing file): block devices first, so they are the name kept.
    let mut opened: Vec<(DeviceFile, PathBuf)> = paths
        .into_iter()
        .filter_map(|path| {
            DeviceFile::open(&path, OpenMode::READ, host)
                .ok()
                .map(|d| (d, path))
        })
        .collect();
    opened.sort_by_key(|(d, p)| (!d.is_block(), p.as_os_str().len(), p.clone()));
    let mut ids: Vec<(DeviceId, PathBuf)> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for (device, path) in opened {
        let mut keys = crate::catalog::identity(device.probe());
        keys.push(format!("path:{}", device.probe().canonical_path.display()));
        if keys.iter().any(|k| seen.contains(k)) {
            continue;
        }
        seen.extend(keys);
        ids.push((scratch.attach(device), path));
    }
    let devices: Vec<DeviceId> = ids.iter().map(|(d, _)| *d).collect();
    let found = group::identify(scratch.as_mut(), &devices);
    let mut out = Vec::new();
    for (uuid, members) in found {
        let newest = members
            .iter()
            .filter_map(|(_, _, s)| s.as_ref())
            .max_by_key(|(g, _)| *g);
        let name = newest.map_or_else(|| "?".to_string(), |(_, s)| s.name.clone());
        let path_of = |d: &DeviceId| ids.iter().find(|(id, _)| id == d).map(|(_, p)| p.clone());
        let disks: Vec<FoundMember> = members
            .iter()
            .filter_map(|(d, h, _)| {
                Some(FoundMember {
                    path: path_of(d)?,
                    label: h.label.to_string(),
                    disk_uuid: h.disk_uuid,
                })
            })
            .collect();
        out.push(FoundGroup {
            uuid,
            name,
            complete: newest.is_some(),
            paths: disks.iter().map(|d| d.path.clone()).collect(),
            disks,
        });
    }
    Ok(out)
}

/// A group mounted from real devices.
pub struct Mounted<'e> {
    pub group: Group<'e>,
    pub report: MountReport,
    /// Held until dropped: the group is this process's meanwhile (shared with
    /// other readers on a read-only mount).
    pub lock: GroupLock,
    /// The path each attached device was opened by, by device id.
    pub paths: BTreeMap<u32, PathBuf>,
}

/// Find group `name` by discovery, lock it, open its disks and mount it for
/// writing. A member discovery does not reach, or that cannot be opened for
/// writing, is marked offline ([`group::mount`]).
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
    mount_inner(engine, host, discovery, name, run_dir, Some(missing_disks))
}

/// Find group `name` and mount it for listing and inspecting: a shared lock,
/// disks opened read-only, nothing written ([`group::mount_read_only`]).
pub fn mount_read_only<'e>(
    engine: &'e mut dyn FileEngine,
    host: &Host,
    discovery: &DiscoveryString,
    name: &str,
    run_dir: &Path,
) -> Result<Mounted<'e>, GroupAdminError> {
    mount_inner(engine, host, discovery, name, run_dir, None)
}

/// `missing_disks`: `Some` for a writer, `None` for a read-only mount.
fn mount_inner<'e>(
    engine: &'e mut dyn FileEngine,
    host: &Host,
    discovery: &DiscoveryString,
    name: &str,
    run_dir: &Path,
    missing_disks: Option<group::MissingDisks>,
) -> Result<Mounted<'e>, GroupAdminError> {
    let wanted = name.trim_start_matches('+').to_ascii_uppercase();
    let groups = find_groups(host, discovery)?;
    let matching: Vec<&FoundGroup> = groups.iter().filter(|g| g.name == wanted).collect();
    let group = match matching.as_slice() {
        [] => {
            let known: Vec<&str> = groups
                .iter()
                .filter(|g| g.complete)
                .map(|g| g.name.as_str())
                .collect();
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
    group.refuse_clones()?;
    let lock = match missing_disks {
        Some(_) => GroupLock::acquire(run_dir, group.uuid, &wanted)?,
        None => GroupLock::acquire_shared(run_dir, group.uuid, &wanted)?,
    };
    let mut devices = Vec::new();
    let mut paths = BTreeMap::new();
    let mut unopened = Vec::new();
    for member in &group.disks {
        let opened = match missing_disks {
            Some(_) => open_member(host, &member.path),
            None => DeviceFile::open(&member.path, OpenMode::READ, host).map_err(AdminError::from),
        };
        match opened {
            Ok(device) => {
                let id = engine.attach(device);
                paths.insert(id.0, member.path.clone());
                devices.push(id);
            }
            // A member that is gone, or that refuses to be opened (for
            // writing: immutable, read-only, permissions) is left out, as a
            // missing member: the group mounts degraded where redundancy
            // allows. A busy one fails the mount: its holder may be a moment
            // from letting go, and a disk must not be lost to that.
            Err(AdminError::Open(
                e @ (OpenError::NotFound { .. }
                | OpenError::PermissionDenied { .. }
                | OpenError::ReadOnly { .. }),
            )) => unopened.push(format!(
                "disk {} could not be opened, so it is treated as missing: {e}",
                member.label
            )),
            Err(e) => return Err(e.into()),
        }
    }
    let selector = GroupSelector::Uuid(group.uuid);
    let mounted = match missing_disks {
        Some(missing) => group::mount_with(engine, &devices, &selector, missing),
        None => group::mount_read_only(engine, &devices, &selector),
    };
    let (group, mut report) = mounted.map_err(|e| match (e, unopened.first()) {
        (GroupError::Mount(m), Some(why)) => GroupError::Mount(format!("{m} ({why})")),
        // What mount itself cannot do without: said plainly, with the group.
        (GroupError::Corrupt(m), _) if m.contains("could not be read") => {
            GroupError::Mount(format!("group {wanted} cannot be mounted: {m}"))
        }
        (GroupError::Corrupt(m) | GroupError::Lost(m), _) => GroupError::Mount(format!(
            "group {wanted} cannot be mounted: {m}; this is metadata every file depends on, so Cairn cannot reach the group's files — keep the disks as they are"
        )),
        (e, _) => e,
    })?;
    report.warnings.splice(0..0, unopened);
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
