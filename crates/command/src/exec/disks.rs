//! Devices joining a live group: new disks for `alter --add` and
//! `replace`, and members found again (by `group online` after a dead
//! device was let go of, and by a service's SIGHUP).

use std::collections::BTreeSet;
use std::path::Path;

use cairn_io::host::Host as OsHost;
use cairn_store::group;
use cairn_store::group_admin::{self, DiskArg};

use super::{Exec, ENGINE_DEPTH};
use crate::error::CommandError;
use crate::event::{Event, Events};
use crate::host::{Host, Opened};

/// New disks opened and labelled for a change to a live group.
pub(super) struct NewDisks {
    /// The engine that opened and labelled them (and erases a label it
    /// made, if the change is refused).
    engine: Box<dyn cairn_io::FileEngine>,
    new: Vec<group::NewDisk>,
    pub(super) added: Vec<group_admin::AddedDisk>,
    /// Their handles, shared, for the group's engines.
    pub(super) files: Vec<cairn_io::DeviceFile>,
}

impl NewDisks {
    /// New disks for a change to group `name`: checked, opened for writing
    /// and labelled through an engine of their own
    /// ([`group_admin::open_new_disks`]: the protections of `disk label`,
    /// the group's label clashes), each one's handle shared for the group's
    /// engines.
    pub(super) fn open(
        host: &dyn Host,
        name: &str,
        args: &[DiskArg],
        force: bool,
    ) -> Result<Self, CommandError> {
        let mut engine = cairn_io::new_file_engine(host.engine_kind(), ENGINE_DEPTH)
            .map_err(|e| CommandError::failed(format!("cannot start an I/O engine: {e}")))?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let (new, added) = group_admin::open_new_disks(
            engine.as_mut(),
            &OsHost::real(),
            &host.discovery()?,
            name,
            args,
            force,
            now,
        )?;
        let mut files = Vec::new();
        for n in &new {
            let shared = engine
                .device(n.device)
                .map(cairn_io::DeviceFile::try_clone)
                .transpose();
            match shared {
                Ok(Some(f)) => files.push(f),
                Ok(None) | Err(_) => {
                    group_admin::erase_new_labels(engine.as_mut(), &added);
                    return Err(CommandError::failed(match shared {
                        Err(e) => format!("cannot share a new disk's handle: {e}"),
                        _ => "a new disk is not attached to the engine that opened it".into(),
                    }));
                }
            }
        }
        Ok(Self {
            engine,
            new,
            added,
            files,
        })
    }

    /// The disks as the group's engine knows them (`ids`, in order).
    pub(super) fn with_ids(&self, ids: &[cairn_io::DeviceId]) -> Vec<group::NewDisk> {
        self.new
            .iter()
            .zip(ids)
            .map(|(n, id)| group::NewDisk {
                device: *id,
                failgroup: n.failgroup.clone(),
            })
            .collect()
    }

    /// The change was refused before the disks joined: the labels this
    /// call wrote are erased again.
    pub(super) fn refused(mut self) {
        group_admin::erase_new_labels(self.engine.as_mut(), &self.added);
    }
}

/// What a path names, whatever it is called: a block device by its device
/// number, a file by its file system and inode.
fn device_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(path).ok()?;
    Some(if m.file_type().is_block_device() {
        (0, m.rdev())
    } else {
        (m.dev(), m.ino())
    })
}

/// `g`'s members that are not attached and that discovery found (`found`):
/// each attached, as OFFLINE (`group online` brings it back, checking then
/// that it is the disk the group took offline). What happened to each is
/// told as a note, starting with `why` (a service logs it).
pub fn attach_found(
    g: &Opened,
    found: &group_admin::FoundGroup,
    why: &str,
    events: &mut dyn Events,
) {
    let host = OsHost::real();
    // The paths of disks that left go; a device attached already (under
    // this path or another: a by-id link, a changed discovery string) is
    // known by what it is, not by its name.
    if let Ok(members) = g.live.meta(|m| m.member_devices()) {
        let ids: BTreeSet<u32> = members.values().map(|d| d.0).collect();
        g.paths().retain(|id, _| ids.contains(id));
    }
    let known: BTreeSet<(u64, u64)> = g
        .paths()
        .values()
        .filter_map(|p| device_identity(p))
        .collect();
    let mut paths = Vec::new();
    let mut files = Vec::new();
    for path in found
        .paths
        .iter()
        .filter(|p| device_identity(p).is_some_and(|i| !known.contains(&i)))
    {
        match group_admin::open_member(&host, path) {
            Ok(f) => {
                paths.push(path.clone());
                files.push(f);
            }
            Err(e) => events.send(Event::Note(format!(
                "{why}: group {}: a disk of the group at {} cannot be opened: {e}",
                g.name,
                path.display()
            ))),
        }
    }
    if files.is_empty() {
        return;
    }
    let outcome = match g.live.reattach_devices(files) {
        Ok(o) => o,
        Err(e) => {
            events.send(Event::Note(format!(
                "{why}: group {}: cannot attach the disks found: {e}",
                g.name
            )));
            return;
        }
    };
    for (path, o) in paths.into_iter().zip(outcome) {
        match o {
            Ok(Some((label, id))) => {
                events.send(Event::Note(format!(
                    "{why}: disk found again and attached: group {}, disk {label}, at {}; `cairn group online {} {label}` brings it back",
                    g.name,
                    path.display(),
                    g.name
                )));
                g.paths().insert(id.0, path);
            }
            // A member attached already (under another path), or one that
            // left: nothing to do.
            Ok(None) => {}
            Err(e) => events.send(Event::Note(format!(
                "{why}: group {}: the disk at {} cannot come back: {e}",
                g.name,
                path.display()
            ))),
        }
    }
}

impl Exec<'_> {
    /// `group online` of a disk whose dead device was let go of: `g`'s
    /// members that discovery finds now are attached.
    pub(super) fn find_again(&self, g: &Opened, events: &mut dyn Events) {
        let found = self
            .host
            .discovery()
            .and_then(|d| Ok(group_admin::find_groups(&OsHost::real(), &d)?));
        let found = match found {
            Ok(found) => found,
            Err(e) => {
                events.send(Event::Note(format!(
                    "online: group {}: discovery failed: {e}",
                    g.name
                )));
                return;
            }
        };
        let Ok(uuid) = g.live.meta(|m| m.uuid()) else {
            return;
        };
        if let Some(group) = found.iter().find(|f| f.uuid == uuid) {
            attach_found(g, group, "online", events);
        }
    }
}
