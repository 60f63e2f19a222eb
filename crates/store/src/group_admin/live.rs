//! Live mounts: the metadata plane on an engine the group owns, data
//! handles on engines of the same kind over duplicates of the members'
//! handles ([`super::source`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_io::host::Host;
use cairn_io::DeviceFile;

use super::error::GroupAdminError;
use super::heartbeat::{beat_from_claim, claim_group, mounted_on_claim};
use super::mount::{mount_error, open_group, owned_elsewhere};
use super::source::{FileSource, HeartbeatSource};
use crate::discovery::DiscoveryString;
use crate::group::heartbeat::Takeover;
use crate::group::{self, GroupSelector, MountReport};
use crate::group_lock::GroupLock;

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
