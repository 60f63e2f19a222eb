//! Devices joining a live group: new disks for `alter --add` and
//! `replace`, and members found again (by `group online` after a dead
//! device was let go of, and by a service's SIGHUP).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use cairn_format::group::DiskState;
use cairn_io::host::Host as OsHost;
use cairn_store::group;
use cairn_store::group_admin::{self, DiskArg};

use super::executor::{Exec, ENGINE_DEPTH};
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

/// What a path names now, whatever it is called
/// ([`cairn_io::device::identity`]), if it names anything.
fn device_identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path)
        .ok()
        .map(|m| cairn_io::device::identity(&m))
}

/// Members of `g` that are OFFLINE and attached to no device, after a
/// rescan: (label, why none is attached).
pub type NotAttached = Vec<(String, String)>;

/// `g`'s members as discovery finds them now (`found`, with the discovery
/// string `discovery` it came from), each known by its label's disk uuid
/// and by what its device is, never by its path alone:
///
/// - a member the group holds, found under another path that is the very
///   device it holds (a renamed file, a new link): its path is updated and
///   said; never opened a second time (its own lock would refuse it);
/// - a device that carries the label of a member the group holds on
///   another device (a copy, a clone): said, and left alone;
/// - a member not attached (missing at mount, or let go of once OFFLINE):
///   opened and attached, still OFFLINE (`group online` brings it back,
///   checking then that it is the disk the group took offline).
///
/// What happened is told as notes starting with `why` (a service logs
/// them); a member attached is told only with `say_attached` (a rescan
/// says it; `group online`, which goes on to bring it back, has its own
/// reply, and its log the disk's state change). Returns the OFFLINE
/// members still not attached, with why.
pub fn attach_found(
    g: &Opened,
    found: &group_admin::FoundGroup,
    discovery: &str,
    (why, say_attached): (&str, bool),
    events: &mut dyn Events,
) -> NotAttached {
    let host = OsHost::real();
    let disks = match g.live.meta(|m| m.disks()) {
        Ok(d) => d,
        Err(e) => {
            events.send(Event::Note(format!(
                "{why}: group {}: cannot look at its disks: {e}",
                g.name
            )));
            return Vec::new();
        }
    };
    let mut rescan = Rescan {
        g,
        why,
        say_attached,
        why_not: BTreeMap::new(),
    };
    let to_open = rescan.match_members(&disks, found, events);
    let (paths, files) = rescan.open_members(&host, to_open, events);
    let attached = rescan.reattach(paths, files, events);
    disks
        .iter()
        .filter(|d| d.device.is_none() && d.state == DiskState::Offline)
        .filter(|d| !d.dropping && !attached.contains(&d.disk_uuid))
        .map(|d| {
            let reason = rescan.why_not.remove(&d.disk_uuid).unwrap_or_else(|| {
                format!(
                    "discovery ({discovery}) finds no device with its label (uuid {})",
                    d.disk_uuid
                )
            });
            (d.label.clone(), reason)
        })
        .collect()
}

/// One [`attach_found`]: the group, how its notes start (`why`) and
/// whether an attach is said, and why each member left unattached is.
struct Rescan<'a> {
    g: &'a Opened,
    why: &'a str,
    say_attached: bool,
    why_not: BTreeMap<uuid::Uuid, String>,
}

impl Rescan<'_> {
    /// The members found (`disks`: the group's, as it holds them) matched
    /// to what the group holds: a held one's new path updated, a copy of a
    /// held one said; the members to open returned.
    fn match_members<'f>(
        &self,
        disks: &[group::DiskInfo],
        found: &'f group_admin::FoundGroup,
        events: &mut dyn Events,
    ) -> Vec<&'f group_admin::FoundMember> {
        let (g, why) = (self.g, self.why);
        // The paths of devices no member holds any more go.
        let ids: BTreeSet<u32> = disks.iter().filter_map(|d| d.device).map(|d| d.0).collect();
        g.paths().retain(|id, _| ids.contains(id));
        // What each attached member's device is, as the group holds it.
        let held: BTreeMap<(u64, u64), u16> = disks
            .iter()
            .filter(|d| d.device.is_some())
            .filter_map(|d| Some((g.live.device_identity(d.number).ok()??, d.number)))
            .collect();
        let mut to_open = Vec::new();
        for f in &found.disks {
            let Some(d) = disks.iter().find(|d| d.disk_uuid == f.disk_uuid) else {
                // Not a member (a disk that left, or one never added).
                continue;
            };
            let now = device_identity(&f.path);
            match d.device {
                Some(id) => {
                    let same = now.is_some_and(|i| held.get(&i) == Some(&d.number));
                    let old = g.paths().get(&id.0).cloned();
                    if same && old.as_deref() != Some(f.path.as_path()) {
                        events.send(Event::Note(format!(
                            "{why}: group {}: disk {} is now at {} (was {}): the same device, known by its label and by what it is; its path is updated",
                            g.name,
                            d.label,
                            f.path.display(),
                            old.map_or_else(|| "?".into(), |p| p.display().to_string())
                        )));
                        g.paths().insert(id.0, f.path.clone());
                    } else if !same && now.is_some_and(|i| !held.contains_key(&i)) {
                        events.send(Event::Note(format!(
                            "{why}: group {}: the device at {} carries the label of disk {}, which the group holds on another device{}: a copy of it, or a second path to it; it is left alone (hide it from discovery)",
                            g.name,
                            f.path.display(),
                            d.label,
                            old.map_or_else(String::new, |p| format!(" ({})", p.display()))
                        )));
                    }
                }
                // One the group holds under another member's name cannot be.
                None if now.is_some_and(|i| held.contains_key(&i)) => {}
                None => to_open.push(f),
            }
        }
        to_open
    }

    /// Open the members to attach: their paths and uuids, and their
    /// handles; one that cannot be opened is said, and why kept.
    fn open_members(
        &mut self,
        host: &OsHost,
        to_open: Vec<&group_admin::FoundMember>,
        events: &mut dyn Events,
    ) -> (Vec<(PathBuf, uuid::Uuid)>, Vec<cairn_io::DeviceFile>) {
        let (g, why) = (self.g, self.why);
        let mut paths = Vec::new();
        let mut files = Vec::new();
        for f in to_open {
            match group_admin::open_member(host, &f.path) {
                Ok(file) => {
                    paths.push((f.path.clone(), f.disk_uuid));
                    files.push(file);
                }
                Err(e) => {
                    events.send(Event::Note(format!(
                        "{why}: group {}: disk {} at {} cannot be opened: {e}",
                        g.name,
                        f.label,
                        f.path.display()
                    )));
                    self.why_not.insert(
                        f.disk_uuid,
                        format!("its device at {} cannot be opened: {e}", f.path.display()),
                    );
                }
            }
        }
        (paths, files)
    }

    /// Attach the opened members (`files`, at `paths`) to the group, still
    /// OFFLINE: the uuids of those attached.
    fn reattach(
        &mut self,
        paths: Vec<(PathBuf, uuid::Uuid)>,
        files: Vec<cairn_io::DeviceFile>,
        events: &mut dyn Events,
    ) -> BTreeSet<uuid::Uuid> {
        let (g, why) = (self.g, self.why);
        let mut attached: BTreeSet<uuid::Uuid> = BTreeSet::new();
        if files.is_empty() {
            return attached;
        }
        let outcome = match g.live.reattach_devices(files) {
            Ok(outcome) => outcome,
            Err(e) => {
                events.send(Event::Note(format!(
                    "{why}: group {}: cannot attach the disks found: {e}",
                    g.name
                )));
                return attached;
            }
        };
        for ((path, uuid), o) in paths.into_iter().zip(outcome) {
            match o {
                Ok(Some((label, id))) => {
                    if self.say_attached {
                        events.send(Event::Note(format!(
                            "{why}: disk found again and attached: group {}, disk {label}, at {}; `cairn group online {} {label}` brings it back",
                            g.name,
                            path.display(),
                            g.name
                        )));
                    }
                    g.paths().insert(id.0, path);
                    attached.insert(uuid);
                }
                // A member attached meanwhile, or one that left:
                // nothing to do.
                Ok(None) => {}
                Err(e) => {
                    events.send(Event::Note(format!(
                        "{why}: group {}: the disk at {} cannot come back: {e}",
                        g.name,
                        path.display()
                    )));
                    self.why_not.insert(
                        uuid,
                        format!("its device at {} cannot come back: {e}", path.display()),
                    );
                }
            }
        }
        attached
    }
}

/// Members in use (attached and not OFFLINE) that discovery no longer
/// finds (`found`: the group as discovery found it, if it found any of
/// it): one line each, for a rescan to say. They stay in use through the
/// descriptors the group holds; the next start would not find them.
pub fn left_discovery(
    g: &Opened,
    found: Option<&group_admin::FoundGroup>,
    discovery: &str,
) -> Vec<String> {
    let Ok(disks) = g.live.meta(|m| m.disks()) else {
        return Vec::new();
    };
    let paths = g.paths().clone();
    disks
        .iter()
        .filter(|d| d.device.is_some() && d.state != DiskState::Offline)
        .filter(|d| found.is_none_or(|f| !f.disks.iter().any(|x| x.disk_uuid == d.disk_uuid)))
        .map(|d| {
            format!(
                "group {}: disk {} ({}{}) is no longer found by discovery ({discovery}): it stays in use through the device the group holds, but the next start will not find it; put it back where discovery looks (or change the discovery string), or drop it (`cairn group alter {} --drop {}`)",
                g.name,
                d.label,
                d.state.as_str(),
                d.device
                    .and_then(|id| paths.get(&id.0))
                    .map_or_else(String::new, |p| format!(", at {}", p.display())),
                g.name,
                d.label
            )
        })
        .collect()
}

impl Exec<'_> {
    /// `group online`: `g`'s members that are not attached are looked for
    /// by discovery, and those found attached ([`attach_found`]). Returns
    /// the OFFLINE members still not attached, with why.
    pub(super) fn find_again(&self, g: &Opened, events: &mut dyn Events) -> NotAttached {
        let d = match self.host.discovery() {
            Ok(d) => d,
            Err(e) => return self.not_attached(g, &format!("discovery failed: {e}")),
        };
        let found = match group_admin::find_groups(&OsHost::real(), &d) {
            Ok(found) => found,
            Err(e) => return self.not_attached(g, &format!("discovery ({}) failed: {e}", d.text)),
        };
        let Ok(uuid) = g.live.meta(|m| m.uuid()) else {
            return Vec::new();
        };
        match found.iter().find(|f| f.uuid == uuid) {
            Some(group) => attach_found(g, group, &d.text, ("online", false), events),
            None => self.not_attached(
                g,
                &format!("discovery ({}) finds no disk of the group", d.text),
            ),
        }
    }

    /// Every OFFLINE member attached to no device, with `why`.
    fn not_attached(&self, g: &Opened, why: &str) -> NotAttached {
        g.live
            .meta(|m| {
                m.disks()
                    .into_iter()
                    .filter(|d| d.device.is_none() && d.state == DiskState::Offline)
                    .filter(|d| !d.dropping)
                    .map(|d| (d.label, why.to_string()))
                    .collect()
            })
            .unwrap_or_default()
    }
}
