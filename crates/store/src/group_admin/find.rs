//! What the devices say of groups, read-only: the groups the discovery
//! string reaches, a device's label and its group's superblocks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cairn_io::host::Host;
use cairn_io::{DeviceFile, DeviceId, OpenMode};
use serde::Serialize;
use uuid::Uuid;

use super::error::GroupAdminError;
use crate::admin::AdminError;
use crate::discovery::{DiscoveryError, DiscoveryString};
use crate::group;
use crate::header_copies::HeaderScan;

/// What a device's label and superblocks say of its group (read-only).
pub(super) fn membership_of(
    host: &Host,
    path: &Path,
) -> Result<Option<group::Membership>, GroupAdminError> {
    let mut scratch = cairn_io::new_file_engine(cairn_io::EngineKind::Sync, 4)
        .map_err(|e| GroupAdminError::Invalid(format!("cannot start an I/O engine: {e}")))?;
    let Ok(device) = DeviceFile::open(path, OpenMode::READ, host) else {
        return Ok(None);
    };
    let id = scratch.attach(device);
    Ok(group::membership(scratch.as_mut(), id))
}

/// The newest good header of a device, if it carries a Cairn label.
pub(super) fn read_header(
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
