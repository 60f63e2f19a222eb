//! Disk groups on real devices: what `cairn group ...` and the file commands
//! run. Finds a group's disks through the discovery string (by the UUIDs in
//! their labels, never by path), takes the group's lock, opens the disks
//! exclusively, and hands them to [`crate::group`]. Creating a group first puts
//! every device through the label protections of [`crate::admin`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_io::host::Host;
use cairn_io::poison::Recover;
use cairn_io::{DeviceFile, DeviceId, FileEngine, OpenError, OpenMode};
use serde::Serialize;
use uuid::Uuid;

use crate::admin::{self, AdminError, LabelRequest};
use crate::discovery::{DiscoveryError, DiscoveryString};
use crate::group::heartbeat::{self, Takeover};
use crate::group::{self, Group, GroupError, GroupSelector, GroupSpec, MountReport, NewDisk};
use crate::group_lock::{GroupLock, LockError};
use crate::header_copies::HeaderScan;
use cairn_format::group::{AU_BYTES_MAX, AU_BYTES_MIN};

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
    let erase = |engine: &mut dyn FileEngine, devices: &[DeviceId]| {
        for device in devices {
            if let Ok(scan) = HeaderScan::read(engine, *device) {
                let _ = crate::labeling::erase_label(engine, *device, &scan);
            }
        }
    };
    if let Err(e) = result {
        erase(engine, &labelled_here);
        return Err(e);
    }
    // Created and dismounted, then mounted again: a failure can then still
    // reach the engine to erase the labels this call wrote.
    if let Err(e) = group::create(&mut *engine, &new_disks, spec).and_then(Group::dismount) {
        erase(engine, &labelled_here);
        return Err(e.into());
    }
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
    if disks.len() > cairn_format::group::DISKS_MAX {
        return Err(GroupAdminError::Invalid(format!(
            "{} disks; a group holds at most {}",
            disks.len(),
            cairn_format::group::DISKS_MAX
        )));
    }
    for (index, what) in judge_claims(host, &claims, spec.force, take_from, found)? {
        labels[index].overrode = Some(what);
    }
    Ok(labels)
}

/// A disk named for a new group whose label claims it for another.
#[derive(Debug, Clone)]
struct Claim {
    /// Its place among the disks named.
    index: usize,
    path: PathBuf,
    group: Uuid,
    disk_uuid: Uuid,
    label: String,
}

/// Which claims other groups have on the disks may be overridden, and how
/// each is described; an error for the first that may not. The claiming
/// group is judged as mount would see it — by the newest superblock any of
/// its disks holds (the claimed disks, and every disk discovery reaches) —
/// and all the disks taken from one group are judged together:
/// - no disk holds a superblock of it: its create never finished; `force`;
/// - its directory records the disk offline (or lacks it): it no longer
///   uses the disk; `force`;
/// - otherwise it counts on the disk, and only `take_from` naming it
///   (`--take-from-group`) lets the disks go, because the group is left
///   DEGRADED or UNMOUNTABLE — whether or not its other disks are in sight,
///   since a discovery string that misses them says nothing of their state.
fn judge_claims(
    host: &Host,
    claims: &[Claim],
    force: bool,
    take_from: &[String],
    found: &[FoundGroup],
) -> Result<BTreeMap<usize, String>, GroupAdminError> {
    let mut out = BTreeMap::new();
    // The groups `take_from` named that did give up a disk.
    let mut licensed: BTreeSet<String> = BTreeSet::new();
    let mut groups: BTreeMap<Uuid, Vec<&Claim>> = BTreeMap::new();
    for c in claims {
        groups.entry(c.group).or_default().push(c);
    }
    for (uuid, taken) in groups {
        let mut paths: Vec<PathBuf> = taken.iter().map(|c| c.path.clone()).collect();
        for g in found.iter().filter(|g| g.uuid == uuid) {
            paths.extend(g.disks.iter().map(|d| d.path.clone()));
        }
        paths.sort();
        paths.dedup();
        let mut newest: Option<group::GroupOnDisk> = None;
        let mut present: BTreeSet<Uuid> = BTreeSet::new();
        for path in &paths {
            let Some(m) = membership_of(host, path)? else {
                continue;
            };
            if m.group_uuid != uuid {
                continue;
            }
            present.insert(m.disk_uuid);
            if let Some(g) = m.group {
                if newest.as_ref().is_none_or(|n| g.generation > n.generation) {
                    newest = Some(g);
                }
            }
        }
        let refuse = |c: &Claim, what: String| {
            GroupAdminError::Invalid(format!(
                "{} is {what}; run again with --force to take it",
                c.path.display()
            ))
        };
        let Some(group) = newest else {
            for c in &taken {
                let what = format!(
                    "disk {} of disk group {uuid}, whose superblock no disk in reach holds: its create never finished (or its other disks are outside the discovery string)",
                    c.label
                );
                if !force {
                    return Err(refuse(c, what));
                }
                out.insert(c.index, what);
            }
            continue;
        };
        let online =
            |d: &&cairn_format::group::DiskEntry| d.state == cairn_format::group::DiskState::Online;
        let mut counted = Vec::new();
        for c in &taken {
            match group
                .disks
                .iter()
                .filter(online)
                .find(|d| d.disk_uuid == c.disk_uuid)
            {
                Some(entry) => counted.push((*c, entry.clone())),
                None => {
                    let what = format!(
                        "disk {} of disk group {} (uuid {uuid}), which no longer uses it (recorded OFFLINE)",
                        c.label, group.name
                    );
                    if !force {
                        return Err(refuse(c, what));
                    }
                    out.insert(c.index, what);
                }
            }
        }
        if counted.is_empty() {
            continue;
        }
        // The group without the disks taken, and without those not in sight.
        let gone: BTreeSet<Uuid> = counted.iter().map(|(c, _)| c.disk_uuid).collect();
        let down: BTreeSet<u16> = group
            .disks
            .iter()
            .filter(online)
            .filter(|d| gone.contains(&d.disk_uuid) || !present.contains(&d.disk_uuid))
            .map(|d| d.failgroup_id)
            .collect();
        let unseen = group
            .disks
            .iter()
            .filter(online)
            .filter(|d| !present.contains(&d.disk_uuid))
            .count();
        let after = if down.len() >= usize::from(group.copies) {
            "UNMOUNTABLE"
        } else {
            "DEGRADED"
        };
        let caveat = if unseen > 0 {
            format!(" ({unseen} of its other disks are not among the discovered devices)")
        } else {
            String::new()
        };
        let names: Vec<String> = counted.iter().map(|(_, e)| e.label.clone()).collect();
        if take_from
            .iter()
            .any(|t| t.eq_ignore_ascii_case(&group.name))
        {
            licensed.insert(group.name.to_ascii_uppercase());
            for (c, entry) in &counted {
                out.insert(
                    c.index,
                    format!(
                        "disk {} of disk group {} (uuid {uuid}), which counted on it and is now {after}{caveat}",
                        entry.label, group.name
                    ),
                );
            }
            continue;
        }
        let (c, entry) = &counted[0];
        return Err(GroupAdminError::Invalid(format!(
            "{} is disk {} of disk group {} (uuid {uuid}), which counts on it: taking {} leaves {} {after}{caveat}; there is no `disk drop` yet — if {} may lose {}, run again with --take-from-group {}",
            c.path.display(),
            entry.label,
            group.name,
            if names.len() == 1 {
                "it".to_string()
            } else {
                format!("{} ({})", names.len(), names.join(", "))
            },
            group.name,
            group.name,
            if names.len() == 1 { "this disk" } else { "these disks" },
            group.name
        )));
    }
    // A name that licensed nothing is a typo, or a disk left off the list:
    // say so rather than go on as if it had been heeded.
    if let Some(unused) = take_from
        .iter()
        .find(|t| !licensed.contains(&t.to_ascii_uppercase()))
    {
        return Err(GroupAdminError::Invalid(format!(
            "--take-from-group {unused}: none of the disks named is a disk group {} counts on; check the group's name and the --disk list, or drop the flag",
            unused.to_ascii_uppercase()
        )));
    }
    Ok(out)
}

/// What a device's label and superblocks say of its group (read-only).
fn membership_of(host: &Host, path: &Path) -> Result<Option<group::Membership>, GroupAdminError> {
    let mut scratch = cairn_io::new_file_engine(cairn_io::EngineKind::Sync, 4)
        .map_err(|e| GroupAdminError::Invalid(format!("cannot start an I/O engine: {e}")))?;
    let Ok(device) = DeviceFile::open(path, OpenMode::READ, host) else {
        return Ok(None);
    };
    let id = scratch.attach(device);
    Ok(group::membership(scratch.as_mut(), id))
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
        Takeover::Refuse,
    )
}

/// [`mount`], choosing what a member discovery does not reach means, and
/// whether to take the group over from another host whose heartbeat has
/// stopped (`group::heartbeat`; never from one that still beats).
pub fn mount_with<'e>(
    engine: &'e mut dyn FileEngine,
    host: &Host,
    discovery: &DiscoveryString,
    name: &str,
    run_dir: &Path,
    missing_disks: group::MissingDisks,
    takeover: Takeover,
) -> Result<Mounted<'e>, GroupAdminError> {
    mount_inner(
        engine,
        host,
        discovery,
        name,
        run_dir,
        Some((missing_disks, takeover)),
    )
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

/// A group found, locked, and its members opened and attached.
struct Opened {
    wanted: String,
    uuid: uuid::Uuid,
    lock: GroupLock,
    devices: Vec<cairn_io::DeviceId>,
    paths: BTreeMap<u32, PathBuf>,
    /// Members that could not be opened, said as warnings.
    unopened: Vec<String>,
}

/// `write`: `Some` for a writer, `None` for a read-only mount.
fn mount_inner<'e>(
    engine: &'e mut dyn FileEngine,
    host: &Host,
    discovery: &DiscoveryString,
    name: &str,
    run_dir: &Path,
    write: Option<(group::MissingDisks, Takeover)>,
) -> Result<Mounted<'e>, GroupAdminError> {
    let opened = open_group(engine, host, discovery, name, run_dir, write.is_some())?;
    let selector = GroupSelector::Uuid(opened.uuid);
    let mut owned_by = None;
    let mounted = match write {
        Some((missing, takeover)) => {
            let claim = claim_group(
                engine,
                &opened.devices,
                opened.uuid,
                &opened.wanted,
                takeover,
            )?;
            let source = Arc::new(HeartbeatSource(Arc::new(FileSource::over(
                engine,
                &opened.devices,
            )?)));
            let beating = beat_from_claim(claim, source)?;
            let mounted = group::mount_with(engine, &opened.devices, &selector, missing);
            mounted_on_claim(mounted, beating)
        }
        None => {
            owned_by = owned_elsewhere(engine, &opened)?;
            group::mount_read_only(engine, &opened.devices, &selector)
        }
    };
    let (group, mut report) = mounted.map_err(|e| mount_error(e, &opened))?;
    report.warnings.splice(0..0, opened.unopened);
    report.warnings.extend(owned_by);
    Ok(Mounted {
        group,
        report,
        lock: opened.lock,
        paths: opened.paths,
    })
}

/// A mount's error, said with the group and with why a member was missing.
fn mount_error(e: GroupError, opened: &Opened) -> GroupError {
    let wanted = &opened.wanted;
    match (e, opened.unopened.first()) {
        (GroupError::Mount(m), Some(why)) => GroupError::Mount(format!("{m} ({why})")),
        // What mount itself cannot do without: said plainly, with the group.
        (GroupError::Unreadable(m), _) => {
            GroupError::Mount(format!("group {wanted} cannot be mounted: {m}"))
        }
        (GroupError::Corrupt(m) | GroupError::Lost(m), _) => GroupError::Mount(format!(
            "group {wanted} cannot be mounted: {m}; this is metadata every file depends on, so Cairn cannot reach the group's files — keep the disks as they are"
        )),
        (e, _) => e,
    }
}

/// Find group `name` by discovery, lock it (exclusively to write, shared to
/// read) and attach its members to `engine`.
fn open_group(
    engine: &mut dyn FileEngine,
    host: &Host,
    discovery: &DiscoveryString,
    name: &str,
    run_dir: &Path,
    write: bool,
) -> Result<Opened, GroupAdminError> {
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
    let lock = if write {
        let lock = GroupLock::acquire(run_dir, group.uuid, &wanted)?;
        crate::ops::forget_left_behind(run_dir, group.uuid);
        lock
    } else {
        GroupLock::acquire_shared(run_dir, group.uuid, &wanted)?
    };
    let mut devices = Vec::new();
    let mut paths = BTreeMap::new();
    let mut unopened = Vec::new();
    for member in &group.disks {
        let opened = if write {
            open_member(host, &member.path)
        } else {
            DeviceFile::open(&member.path, OpenMode::READ, host).map_err(AdminError::from)
        };
        match opened {
            Ok(device) => {
                let id = engine.attach(device);
                paths.insert(id.0, member.path.clone());
                devices.push(id);
            }
            // A member that is gone, or that no one may write (an immutable
            // file), is left out, as a missing member: the group mounts
            // degraded where redundancy allows. A busy one, or one this user
            // may not write, fails the mount instead: its holder may be a
            // moment from letting go, or another user may write it, and a
            // disk must not be lost to that.
            Err(AdminError::Open(
                e @ (OpenError::NotFound { .. } | OpenError::Immutable { .. }),
            )) => unopened.push(format!(
                "disk {} could not be opened, so it is treated as missing: {e}",
                member.label
            )),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Opened {
        wanted,
        uuid: group.uuid,
        lock,
        devices,
        paths,
        unopened,
    })
}

/// A group mounted live ([`mount_live`]).
pub struct LiveMounted {
    pub group: group::LiveGroup,
    pub report: MountReport,
    /// Held until dropped.
    pub lock: GroupLock,
    /// The path each member was opened by, by its device id in the metadata
    /// plane's engine.
    pub paths: BTreeMap<u32, PathBuf>,
    /// Duplicates of the members' handles, by member disk number, for
    /// callers that attach them to engines of their own.
    pub members: BTreeMap<u16, DeviceFile>,
}

/// How a live mount may use its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveAccess {
    /// Change it: the group lock exclusively, members opened to write (and
    /// held exclusively); a member not found is dealt with as said, and
    /// another host's claim on the group as said (`group::heartbeat`).
    Write(group::MissingDisks, Takeover),
    /// Only look: the group lock shared, members opened read-only, nothing
    /// ever written ([`group::mount_read_only`]); a member not found stays
    /// as recorded.
    Look,
}

/// Find group `name`, lock it and mount it live for writing: the metadata
/// plane on an engine of `kind` it owns, and data handles on engines of the
/// same kind over duplicates of the members' exclusive handles.
#[allow(clippy::too_many_arguments)]
pub fn mount_live(
    host: &Host,
    discovery: &DiscoveryString,
    name: &str,
    run_dir: &Path,
    missing_disks: group::MissingDisks,
    takeover: Takeover,
    kind: cairn_io::EngineKind,
    depth: usize,
) -> Result<LiveMounted, GroupAdminError> {
    mount_live_for(
        host,
        discovery,
        name,
        run_dir,
        LiveAccess::Write(missing_disks, takeover),
        kind,
        depth,
    )
}

/// [`mount_live`], to write or only to look ([`LiveAccess`]).
pub fn mount_live_for(
    host: &Host,
    discovery: &DiscoveryString,
    name: &str,
    run_dir: &Path,
    access: LiveAccess,
    kind: cairn_io::EngineKind,
    depth: usize,
) -> Result<LiveMounted, GroupAdminError> {
    let mut engine = cairn_io::new_file_engine(kind, depth)
        .map_err(|e| GroupAdminError::Invalid(format!("cannot start an I/O engine: {e}")))?;
    let write = access != LiveAccess::Look;
    let opened = open_group(engine.as_mut(), host, discovery, name, run_dir, write)?;
    // A writer claims the group for this host first (multihost
    // protection); a look only warns when another host writes it.
    let (claim, owned_by) = match access {
        LiveAccess::Write(_, takeover) => (
            Some(claim_group(
                engine.as_mut(),
                &opened.devices,
                opened.uuid,
                &opened.wanted,
                takeover,
            )?),
            None,
        ),
        LiveAccess::Look => (None, owned_elsewhere(engine.as_mut(), &opened)?),
    };
    let mut files = BTreeMap::new();
    for id in &opened.devices {
        let device = engine
            .device(*id)
            .ok_or_else(|| GroupAdminError::Invalid(format!("device {} is not attached", id.0)))?
            .try_clone()
            .map_err(|e| {
                GroupAdminError::Invalid(format!("cannot share a member's handle: {e}"))
            })?;
        files.insert(*id, device);
    }
    let selector = GroupSelector::Uuid(opened.uuid);
    let engine: Box<dyn cairn_io::IoEngine> = engine;
    let source = Arc::new(FileSource {
        kind,
        files: std::sync::Mutex::new(BTreeMap::new()),
        io: std::sync::Mutex::new(BTreeMap::new()),
    });
    for (id, file) in &files {
        let dup = file.try_clone().map_err(|e| {
            GroupAdminError::Invalid(format!("cannot share a member's handle: {e}"))
        })?;
        source.files().insert(*id, dup);
    }
    let mounted = match (access, claim) {
        (LiveAccess::Write(missing, _), Some(claim)) => {
            let beating = beat_from_claim(claim, Arc::new(HeartbeatSource(source.clone())))?;
            let mounted = group::mount_owned(engine, &opened.devices, &selector, missing);
            mounted_on_claim(mounted, beating)
        }
        _ => group::mount_owned_read_only(engine, &opened.devices, &selector),
    };
    let (group, mut report) = mounted.map_err(|e| mount_error(e, &opened))?;
    report.warnings.extend(owned_by);
    let mut members = BTreeMap::new();
    for (disk, id) in group.member_devices() {
        if let Some(file) = files.get(&id) {
            let dup = file.try_clone().map_err(|e| {
                GroupAdminError::Invalid(format!("cannot share a member's handle: {e}"))
            })?;
            members.insert(disk, dup);
        }
    }
    drop(files);
    report.warnings.splice(0..0, opened.unopened);
    Ok(LiveMounted {
        group: group::LiveGroup::new(group, Box::new(source)),
        report,
        lock: opened.lock,
        paths: opened.paths,
        members,
    })
}

/// Engines for data handles of a live group on real disks: each a new engine
/// of one kind, with duplicates of the members' handles attached.
struct FileSource {
    kind: cairn_io::EngineKind,
    /// By the metadata plane's device id. Changed only under the group's
    /// `meta` (a disk added or let go of); read by each new data handle's
    /// engine. A leaf lock.
    files: std::sync::Mutex<BTreeMap<cairn_io::DeviceId, DeviceFile>>,
    /// Each device's I/O counters, by the same id, which every data
    /// handle's engine records into. A leaf lock, taken as an engine is
    /// made and when they are read (never per I/O: the counters are
    /// atomics).
    io: std::sync::Mutex<BTreeMap<cairn_io::DeviceId, std::sync::Arc<cairn_io::counted::DeviceIo>>>,
}

impl FileSource {
    fn io(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        BTreeMap<cairn_io::DeviceId, std::sync::Arc<cairn_io::counted::DeviceIo>>,
    > {
        self.io.lock_or_recover()
    }

    fn files(&self) -> std::sync::MutexGuard<'_, BTreeMap<cairn_io::DeviceId, DeviceFile>> {
        self.files.lock_or_recover()
    }
}

/// An engine [`FileSource::make`] made: the engine, each disk's device in
/// it, and (metadata plane's device id, its device in the engine) pairs.
type MadeEngine = (
    Box<dyn FileEngine>,
    BTreeMap<u16, DeviceId>,
    Vec<(DeviceId, DeviceId)>,
);

impl FileSource {
    /// A source over duplicates of the handles of `devices`, attached to
    /// `engine` (a mount's own engine, borrowed).
    fn over(engine: &dyn FileEngine, devices: &[DeviceId]) -> Result<Self, GroupError> {
        let mut files = BTreeMap::new();
        for id in devices {
            let Some(device) = engine.device(*id) else {
                continue;
            };
            let dup = device
                .try_clone()
                .map_err(|e| GroupError::Invalid(format!("cannot share a member's handle: {e}")))?;
            files.insert(*id, dup);
        }
        Ok(Self {
            kind: cairn_io::EngineKind::Auto,
            files: std::sync::Mutex::new(files),
            io: std::sync::Mutex::new(BTreeMap::new()),
        })
    }

    /// An engine of `kind` over duplicates of the handles of `disks`
    /// (disk number → the metadata plane's device id).
    fn make(
        &self,
        kind: cairn_io::EngineKind,
        disks: &BTreeMap<u16, cairn_io::DeviceId>,
        depth: usize,
    ) -> Result<MadeEngine, GroupError> {
        let mut engine = cairn_io::new_file_engine(kind, depth)
            .map_err(|e| GroupError::Invalid(format!("cannot start an I/O engine: {e}")))?;
        let mut ids = BTreeMap::new();
        let mut pairs = Vec::new();
        let files = self.files();
        for (disk, meta_id) in disks {
            let Some(file) = files.get(meta_id) else {
                continue;
            };
            let dup = file
                .try_clone()
                .map_err(|e| GroupError::Invalid(format!("cannot share a member's handle: {e}")))?;
            let id = engine.attach(dup);
            ids.insert(*disk, id);
            pairs.push((*meta_id, id));
        }
        Ok((engine, ids, pairs))
    }
}

/// The heartbeat's engines (`group::heartbeat`): over the same handles as
/// the data handles', but io_uring wherever the kernel has it, whatever
/// the mount's engine, so that a hung disk never holds the heartbeat
/// thread past its beat (a waiting read or write gives up at its
/// deadline); and not counted in the data plane's I/O figures.
struct HeartbeatSource(Arc<FileSource>);

impl group::EngineSource for HeartbeatSource {
    fn engine(
        &self,
        disks: &BTreeMap<u16, cairn_io::DeviceId>,
        depth: usize,
    ) -> Result<group::HandleEngine, GroupError> {
        let (engine, ids, _) = self.0.make(cairn_io::EngineKind::Auto, disks, depth)?;
        let engine: Box<dyn cairn_io::IoEngine> = engine;
        Ok((engine, ids))
    }
}

/// The heartbeat's pace: [`heartbeat::Timing::DEFAULT`], or, for tests
/// only, an interval of `CAIRN_TEST_HEARTBEAT_MS` milliseconds (a test
/// that waits out a takeover cannot wait 20 s).
pub const TEST_HEARTBEAT_MS_ENV: &str = "CAIRN_TEST_HEARTBEAT_MS";

fn heartbeat_timing() -> heartbeat::Timing {
    std::env::var(TEST_HEARTBEAT_MS_ENV)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|ms| (1..=cairn_format::heartbeat::HEARTBEAT_INTERVAL_MS_MAX).contains(ms))
        .map_or(heartbeat::Timing::DEFAULT, |interval_ms| {
            heartbeat::Timing {
                interval_ms,
                ..heartbeat::Timing::DEFAULT
            }
        })
}

fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Claim the group for this host before the mount writes anything
/// (`heartbeat::claim`): refused while another host holds it.
fn claim_group(
    engine: &mut dyn FileEngine,
    devices: &[DeviceId],
    uuid: Uuid,
    name: &str,
    takeover: Takeover,
) -> Result<heartbeat::Claim, GroupAdminError> {
    let me = crate::host_identity::this_host().map_err(GroupAdminError::Invalid)?;
    let disks = heartbeat::members(engine, devices, uuid);
    let clock = cairn_io::clock::Monotonic::new();
    Ok(heartbeat::claim(
        engine,
        uuid,
        name,
        &disks,
        &me,
        heartbeat_timing(),
        takeover,
        &clock,
        &now_unix_ms,
    )?)
}

/// Beat for a claim from now on, through the mount that follows it (a
/// long mount must not look like a dead owner to another host): the link,
/// and whom the group was taken from.
fn beat_from_claim(
    claim: heartbeat::Claim,
    source: Arc<HeartbeatSource>,
) -> Result<(heartbeat::Link, Option<String>), GroupError> {
    let taken_from = claim.taken_from.clone();
    let beater = heartbeat::Beater::new(claim, source, 0);
    Ok((heartbeat::start(beater)?, taken_from))
}

/// A mount made while beating: the heartbeat handed to the group, or, if
/// the mount failed, stopped and released (as the link drops).
fn mounted_on_claim<'e>(
    mounted: Result<(Group<'e>, MountReport), GroupError>,
    beating: (heartbeat::Link, Option<String>),
) -> Result<(Group<'e>, MountReport), GroupError> {
    let (link, taken_from) = beating;
    let (mut group, mut report) = mounted?;
    if let Some(from) = taken_from {
        report
            .warnings
            .push(format!("group {} was taken over from {from}", group.name()));
    }
    link.attach(group.data_plane().clone(), group.slot_generation());
    group.attach_heartbeat(link);
    Ok((group, report))
}

/// For a read-only mount: the warning that another host writes the group
/// meanwhile, if its heartbeat says so (a listing does not refuse, but what
/// it shows may change under it).
fn owned_elsewhere(
    engine: &mut dyn FileEngine,
    opened: &Opened,
) -> Result<Option<String>, GroupAdminError> {
    let me = crate::host_identity::this_host().map_err(GroupAdminError::Invalid)?;
    let disks = heartbeat::members(engine, &opened.devices, opened.uuid);
    let beats = heartbeat::read_beats(engine, opened.uuid, &disks);
    Ok(match heartbeat::owner(me.id, &beats) {
        heartbeat::Owner::Other(beat) => Some(format!(
            "group {} is mounted for writing by {}: what is shown here may change meanwhile, and a change in progress there may show here as damage",
            opened.wanted,
            beat.describe(now_unix_ms())
        )),
        heartbeat::Owner::Free => None,
    })
}

impl group::EngineSource for FileSource {
    fn engine(
        &self,
        disks: &BTreeMap<u16, cairn_io::DeviceId>,
        depth: usize,
    ) -> Result<group::HandleEngine, GroupError> {
        let (engine, ids, pairs) = self.make(self.kind, disks, depth)?;
        let mut io = self.io();
        let counters = pairs
            .into_iter()
            .map(|(meta_id, id)| (id, io.entry(meta_id).or_default().clone()))
            .collect();
        let engine: Box<dyn cairn_io::IoEngine> = engine;
        Ok((
            Box::new(cairn_io::counted::Counted::new(engine, counters)),
            ids,
        ))
    }

    fn device_io(
        &self,
    ) -> BTreeMap<cairn_io::DeviceId, std::sync::Arc<cairn_io::counted::DeviceIo>> {
        self.io().clone()
    }

    fn add_device(&self, id: cairn_io::DeviceId, file: DeviceFile) -> Result<(), GroupError> {
        self.files().insert(id, file);
        Ok(())
    }

    fn remove_device(&self, id: cairn_io::DeviceId) {
        self.files().remove(&id);
        self.io().remove(&id);
    }

    /// Real devices: opened again by their paths.
    fn reopens(&self) -> bool {
        true
    }

    fn identity(&self, id: cairn_io::DeviceId) -> Option<(u64, u64)> {
        self.files().get(&id).and_then(|f| f.identity().ok())
    }
}

/// How long a member disk may stay busy after its previous owner died: the
/// kernel releases a killed process's io_uring, and with it the disk's lock,
/// a moment after the process is gone.
const MEMBER_BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Open a member disk. The group lock is ours, so a disk that is busy belongs
/// to a process that is going away: wait for it a little.
pub fn open_member(host: &Host, path: &Path) -> Result<DeviceFile, AdminError> {
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
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct DiskSpaceReport {
    pub number: u16,
    pub label: String,
    pub path: Option<PathBuf>,
    pub size_bytes: u64,
    pub group_used_bytes: u64,
    /// Free data AUs (`None`: the disk's table is not loaded, it is not in
    /// service).
    pub free_bytes: Option<u64>,
    /// Free, and not known to hold nothing on the device: what `cairn
    /// group reclaim` would give back (docs/thin-reclaim.md).
    pub returnable_bytes: Option<u64>,
    /// Bytes the device physically holds, where it can tell: a file's
    /// allocated blocks, or a loop device's backing file's.
    pub device_allocated_bytes: Option<u64>,
    /// Bytes of its extent copies that serve no read now (all it holds
    /// while it is not ONLINE, its stale AUs when it is): by this much the
    /// group is short of its redundancy here, until `group online` (or the
    /// rebuild after a drop) restores them. 0 on every disk: every extent
    /// has all its copies.
    pub missing_copy_bytes: u64,
}

pub fn space(group: &Group<'_>, engine_paths: &BTreeMap<u32, PathBuf>) -> Vec<DiskSpaceReport> {
    group
        .disks()
        .into_iter()
        .map(|d| {
            let path = d.device.and_then(|id| engine_paths.get(&id.0).cloned());
            let allocated = path.as_deref().and_then(physically_held);
            DiskSpaceReport {
                number: d.number,
                label: d.label,
                path,
                size_bytes: d.size_bytes,
                group_used_bytes: d
                    .free_aus
                    .map_or(0, |free| (d.total_aus - free) * group.au_bytes()),
                free_bytes: d.free_aus.map(|f| f * group.au_bytes()),
                returnable_bytes: group.returnable_bytes(d.number),
                device_allocated_bytes: allocated,
                missing_copy_bytes: d.missing_copy_aus * group.au_bytes(),
            }
        })
        .collect()
}

/// What the storage under `path` physically holds, where it can be known:
/// a file's allocated blocks; a loop device's backing file's. `None` for
/// other devices (an array's LUN says nothing of it to the host).
pub fn physically_held(path: &Path) -> Option<u64> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(path).ok()?;
    if m.file_type().is_file() {
        return Some(m.blocks() * 512);
    }
    if !m.file_type().is_block_device() {
        return None;
    }
    let real = std::fs::canonicalize(path).ok()?;
    let name = real.file_name()?.to_str()?;
    let backing = std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).ok()?;
    let backing = backing.trim_end_matches('\n');
    let b = std::fs::metadata(backing.trim_end_matches(" (deleted)")).ok()?;
    b.file_type().is_file().then_some(b.blocks() * 512)
}

/// A disk `group alter --add` (or `replace`) brings in, opened.
#[derive(Debug, Clone, Serialize)]
pub struct AddedDisk {
    pub path: PathBuf,
    pub label: String,
    /// It carried no label: this command labelled it (and erases the label
    /// again if the change is refused).
    pub labelled_now: bool,
    #[serde(skip)]
    pub device: DeviceId,
}

/// Open the disks a change adds to group `name` and attach them to
/// `engine`, before the group is mounted: a blank device is labelled
/// `NAME_nnnn` (with the protection checks of `disk label`: another owner's
/// signature is refused unless `force`); a labelled one is taken as it is
/// (the group's mount checks that it is in no other group). A path that is
/// a member already is refused. On error nothing stays labelled.
pub fn open_new_disks(
    engine: &mut dyn FileEngine,
    host: &Host,
    discovery: &DiscoveryString,
    name: &str,
    disks: &[DiskArg],
    force: bool,
    now_unix_seconds: u64,
) -> Result<(Vec<NewDisk>, Vec<AddedDisk>), GroupAdminError> {
    let wanted = name.trim_start_matches('+').to_ascii_uppercase();
    let groups = find_groups(host, discovery)?;
    let group = groups.iter().find(|g| g.name == wanted);
    let mut taken: BTreeSet<String> = group
        .map(|g| {
            g.disks
                .iter()
                .map(|d| d.label.to_ascii_uppercase())
                .collect()
        })
        .unwrap_or_default();
    let mut seen: Vec<(PathBuf, std::fs::Metadata)> = Vec::new();
    for p in group.map(|g| g.paths.clone()).unwrap_or_default() {
        if let Ok(meta) = std::fs::metadata(&p) {
            seen.push((p, meta));
        }
    }
    let members = seen.len();
    // The group's directory as its newest superblock in reach says.
    let mut newest: Option<group::GroupOnDisk> = None;
    for (p, _) in &seen {
        if let Some(g) = membership_of(host, p).ok().flatten().and_then(|m| m.group) {
            if newest.as_ref().is_none_or(|n| g.generation > n.generation) {
                newest = Some(g);
            }
        }
    }
    // A member out of reach keeps its label: a new disk must not take it.
    if let Some(g) = &newest {
        taken.extend(g.disks.iter().map(|d| d.label.to_ascii_uppercase()));
    }
    let mut new = Vec::new();
    let mut added: Vec<AddedDisk> = Vec::new();
    let result = (|| -> Result<(), GroupAdminError> {
        for arg in disks {
            let meta = std::fs::metadata(&arg.path).map_err(|_| {
                AdminError::Open(cairn_io::OpenError::NotFound {
                    path: arg.path.clone(),
                })
            })?;
            let probe = cairn_io::probe::probe(&arg.path, host).map_err(AdminError::from)?;
            // A device whose label names the group but whose superblocks do
            // not list it is left from an add a crash cut short: taken again.
            let listed = |path: &Path| {
                let Some(me) = membership_of(host, path).ok().flatten() else {
                    return false;
                };
                newest
                    .as_ref()
                    .is_some_and(|g| g.disks.iter().any(|d| d.disk_uuid == me.disk_uuid))
            };
            if let Some((k, (other, _))) = seen
                .iter()
                .enumerate()
                .find(|(k, (p, m))| probe.same_object(m) && (*k >= members || listed(p)))
            {
                return Err(GroupAdminError::Invalid(if k < members {
                    format!(
                        "{} is already a disk of group {wanted} (as {}); name only new disks with --add",
                        arg.path.display(),
                        other.display()
                    )
                } else {
                    format!(
                        "{} and {} are the same device; name each disk once",
                        other.display(),
                        arg.path.display()
                    )
                }));
            }
            seen.push((arg.path.clone(), meta));
            let (device, label, labelled_now) = match read_header(host, &arg.path)? {
                Some(h) => {
                    let device = admin::open_for_write(host, &arg.path)?;
                    (engine.attach(device), h.label.to_string(), false)
                }
                None => {
                    // The first NAME_nnnn no disk in reach carries (a
                    // FORMER disk keeps its label).
                    let mut outcome = None;
                    for i in 0..10_000 {
                        let label = format!("{wanted}_{i:04}");
                        if taken.contains(&label) {
                            continue;
                        }
                        let parsed = cairn_format::DiskLabel::parse(&label).map_err(|e| {
                            GroupAdminError::Invalid(format!(
                                "{} would be labelled {label}, which is not a valid label ({e}); label it first with `cairn disk label`",
                                arg.path.display()
                            ))
                        })?;
                        match admin::label(
                            engine,
                            host,
                            &arg.path,
                            &LabelRequest {
                                label: parsed,
                                force,
                                disk_uuid: Uuid::new_v4(),
                                now_unix_seconds,
                                discovery: Some(discovery.clone()),
                            },
                        ) {
                            Ok(report) => {
                                outcome = Some(report);
                                break;
                            }
                            Err(AdminError::DuplicateLabel { .. }) => {
                                taken.insert(label);
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                    let report = outcome.ok_or_else(|| {
                        GroupAdminError::Invalid(format!(
                            "no free label {wanted}_nnnn left; label {} first with `cairn disk label`",
                            arg.path.display()
                        ))
                    })?;
                    (report.device, report.label, true)
                }
            };
            taken.insert(label.to_ascii_uppercase());
            new.push(NewDisk {
                device,
                failgroup: arg.failgroup.clone(),
            });
            added.push(AddedDisk {
                path: arg.path.clone(),
                label,
                labelled_now,
                device,
            });
        }
        Ok(())
    })();
    if let Err(e) = result {
        erase_new_labels(engine, &added);
        return Err(e);
    }
    Ok((new, added))
}

/// Erase the labels [`open_new_disks`] wrote (the change was refused, or
/// was only explained): the devices are as they were.
pub fn erase_new_labels(engine: &mut dyn FileEngine, added: &[AddedDisk]) {
    for a in added.iter().filter(|a| a.labelled_now) {
        if let Ok(scan) = HeaderScan::read(engine, a.device) {
            let _ = crate::labeling::erase_label(engine, a.device, &scan);
        }
    }
}
