//! Mounting a group from real devices: found by discovery, locked
//! (exclusively to write, shared to read), its members opened and attached,
//! and for a writer claimed for this host before anything is written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_io::host::Host;
use cairn_io::{DeviceFile, FileEngine, OpenError, OpenMode};

use super::error::GroupAdminError;
use super::find::{find_groups, FoundGroup};
use super::heartbeat::{beat_from_claim, claim_group, mounted_on_claim, now_unix_ms};
use super::source::{FileSource, HeartbeatSource};
use crate::admin::{self, AdminError};
use crate::discovery::DiscoveryString;
use crate::group::heartbeat::{self, Takeover};
use crate::group::{self, Group, GroupError, GroupSelector, MountReport};
use crate::group_lock::GroupLock;

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
pub(super) struct Opened {
    pub(super) wanted: String,
    pub(super) uuid: uuid::Uuid,
    pub(super) lock: GroupLock,
    pub(super) devices: Vec<cairn_io::DeviceId>,
    pub(super) paths: BTreeMap<u32, PathBuf>,
    /// Members that could not be opened, said as warnings.
    pub(super) unopened: Vec<String>,
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
pub(super) fn mount_error(e: GroupError, opened: &Opened) -> GroupError {
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
pub(super) fn open_group(
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

/// For a read-only mount: the warning that another host writes the group
/// meanwhile, if its heartbeat says so (a listing does not refuse, but what
/// it shows may change under it).
pub(super) fn owned_elsewhere(
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
