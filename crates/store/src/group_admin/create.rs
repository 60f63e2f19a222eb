//! `group create`: every device checked before anything is written, the
//! blank ones labelled, the group created, claimed for this host and mounted.
//! A failure part way erases the labels this call wrote.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_io::host::Host;
use cairn_io::{DeviceId, FileEngine};
use serde::Serialize;
use uuid::Uuid;

use super::claims::{judge_claims, Claim};
use super::error::GroupAdminError;
use super::find::{find_groups, read_header, FoundGroup};
use super::heartbeat::{beat_from_claim, claim_group, mounted_on_claim};
use super::source::{FileSource, HeartbeatSource};
use crate::admin::{self, AdminError, LabelRequest};
use crate::discovery::DiscoveryString;
use crate::group::heartbeat::Takeover;
use crate::group::{self, Group, GroupError, GroupSelector, GroupSpec, NewDisk};
use crate::group_lock::GroupLock;
use crate::header_copies::HeaderScan;
use cairn_format::group::{AU_BYTES_MAX, AU_BYTES_MIN};

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
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
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
    // The groups discovery reaches: for the name, and for judging claims.
    let found = match discovery {
        Some(d) => find_groups(host, d)?,
        None => Vec::new(),
    };
    if let Some(existing) = found.iter().find(|g| g.name == name.as_str()) {
        return Err(GroupAdminError::Invalid(format!(
            "a disk group named {} already exists (uuid {}); choose another name",
            existing.name, existing.uuid
        )));
    }
    let lock = GroupLock::acquire(run_dir, spec.group_uuid, name.as_str())?;
    let checked = check_disks(host, disks, spec, &name, take_from, &found)?;
    // Labelling a new disk overrides another owner's signature only with the
    // user's own --force; the group's create may take the claimed disks,
    // each of which was judged above.
    let label_force = spec.force;
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
                            force: label_force,
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
    // A refusal or failure part way leaves no trace of this call's labels
    // (a create that fails after naming the group in the disks' headers
    // leaves a group that never finished, which `--force` takes again).
    if let Err(e) = result {
        erase_labels(engine, &labelled_here);
        return Err(e);
    }
    // Created and dismounted, then mounted again: a failure can then still
    // reach the engine to erase the labels this call wrote.
    if let Err(e) = group::create(&mut *engine, &new_disks, spec).and_then(Group::dismount) {
        erase_labels(engine, &labelled_here);
        return Err(e.into());
    }
    let group = mount_created(engine, &new_disks, spec, &name)?;
    Ok((group, lock, created))
}

/// Erase the labels a failed [`create`] wrote on `devices`.
fn erase_labels(engine: &mut dyn FileEngine, devices: &[DeviceId]) {
    for device in devices {
        if let Ok(scan) = HeaderScan::read(engine, *device) {
            let _ = crate::labeling::erase_label(engine, *device, &scan);
        }
    }
}

/// Mount the group [`create`] made, claimed for this host.
fn mount_created<'e>(
    engine: &'e mut dyn FileEngine,
    new_disks: &[NewDisk],
    spec: &GroupSpec,
    name: &crate::names::GroupName,
) -> Result<Group<'e>, GroupAdminError> {
    let devices: Vec<DeviceId> = new_disks.iter().map(|d| d.device).collect();
    // A new group is claimed like any: its heartbeat tells other hosts
    // that see the disks who writes them, from its first mount on.
    let claim = claim_group(
        engine,
        &devices,
        spec.group_uuid,
        name.as_str(),
        Takeover::Refuse,
    )?;
    let source = Arc::new(HeartbeatSource(Arc::new(FileSource::over(
        engine, &devices,
    )?)));
    let beating = beat_from_claim(claim, source)?;
    let mounted = group::mount_with(
        engine,
        &devices,
        &GroupSelector::Uuid(spec.group_uuid),
        group::MissingDisks::Refuse,
    );
    let (group, _) = mounted_on_claim(mounted, beating)?;
    Ok(group)
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
    found: &[FoundGroup],
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
    let mut claims: Vec<Claim> = Vec::new();
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
        if let Some(h) = header.as_ref() {
            if let Some(group) = h.group_uuid {
                claims.push(Claim {
                    index: i,
                    path: arg.path.clone(),
                    group,
                    disk_uuid: h.disk_uuid,
                    label: h.label.to_string(),
                });
            }
        }
        let overrode = None;
        if let Err(why) = group::member_layout(probe.size_bytes, au) {
            return Err(GroupAdminError::Invalid(format!(
                "{}: {why}; use a bigger device or a smaller --au-size",
                arg.path.display(),
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
    check_shape(spec, disks.len(), &sectors, failgroups)?;
    for (index, what) in judge_claims(host, &claims, spec.force, take_from, found)? {
        labels[index].overrode = Some(what);
    }
    Ok(labels)
}

/// The checks of [`check_disks`] on the disks together: one sector size of
/// 512 or 4096 bytes, enough failure groups for the copies, at most
/// `DISKS_MAX` disks.
fn check_shape(
    spec: &GroupSpec,
    disk_count: usize,
    sectors: &[(PathBuf, u32)],
    mut failgroups: Vec<String>,
) -> Result<(), GroupAdminError> {
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
    if disk_count > cairn_format::group::DISKS_MAX {
        return Err(GroupAdminError::Invalid(format!(
            "{} disks; a group holds at most {}",
            disk_count,
            cairn_format::group::DISKS_MAX
        )));
    }
    Ok(())
}
