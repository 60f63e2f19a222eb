//! The disks `group alter --add` (or `replace`) brings in: refused when
//! already members, labelled `NAME_nnnn` when blank, attached before the
//! group is mounted; on error nothing stays labelled.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use cairn_io::host::Host;
use cairn_io::{DeviceId, FileEngine};
use serde::Serialize;
use uuid::Uuid;

use super::create::DiskArg;
use super::error::GroupAdminError;
use super::find::{find_groups, membership_of, read_header};
use crate::admin::{self, AdminError, LabelRequest};
use crate::discovery::DiscoveryString;
use crate::group::{self, NewDisk};
use crate::header_copies::HeaderScan;

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
    let mut adding = Adding::find(host, discovery, name, force, now_unix_seconds)?;
    let mut new = Vec::new();
    let mut added: Vec<AddedDisk> = Vec::new();
    let result = (|| -> Result<(), GroupAdminError> {
        for arg in disks {
            adding.admit(arg)?;
            let (device, label, labelled_now) = match read_header(host, &arg.path)? {
                Some(h) => {
                    let device = admin::open_for_write(host, &arg.path)?;
                    (engine.attach(device), h.label.to_string(), false)
                }
                None => adding.label_blank(engine, arg)?,
            };
            adding.taken.insert(label.to_ascii_uppercase());
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

/// What [`open_new_disks`] knows of the group the disks join, and of the
/// disks taken so far.
struct Adding<'a> {
    host: &'a Host,
    discovery: &'a DiscoveryString,
    force: bool,
    now_unix_seconds: u64,
    /// The group's name, as its superblocks spell it.
    wanted: String,
    /// Labels no new disk may take (upper case).
    taken: BTreeSet<String>,
    /// The group's members in reach, then each disk admitted, by path.
    seen: Vec<(PathBuf, std::fs::Metadata)>,
    /// How many of `seen` are the group's members.
    members: usize,
    /// The group's directory as its newest superblock in reach says.
    newest: Option<group::GroupOnDisk>,
}

impl<'a> Adding<'a> {
    /// The group `name` as discovery finds it: its members in reach, their
    /// labels, and its newest superblock.
    fn find(
        host: &'a Host,
        discovery: &'a DiscoveryString,
        name: &str,
        force: bool,
        now_unix_seconds: u64,
    ) -> Result<Self, GroupAdminError> {
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
        Ok(Self {
            host,
            discovery,
            force,
            now_unix_seconds,
            wanted,
            taken,
            seen,
            members,
            newest,
        })
    }

    /// Refuse a disk that is a member already, or named twice; else remember
    /// it among the disks seen.
    fn admit(&mut self, arg: &DiskArg) -> Result<(), GroupAdminError> {
        let host = self.host;
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
            self.newest
                .as_ref()
                .is_some_and(|g| g.disks.iter().any(|d| d.disk_uuid == me.disk_uuid))
        };
        let members = self.members;
        let wanted = &self.wanted;
        if let Some((k, (other, _))) = self
            .seen
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
        self.seen.push((arg.path.clone(), meta));
        Ok(())
    }

    /// Label a blank disk with the first `NAME_nnnn` no disk in reach
    /// carries (a FORMER disk keeps its label): its device, label, and that
    /// it was labelled now.
    fn label_blank(
        &mut self,
        engine: &mut dyn FileEngine,
        arg: &DiskArg,
    ) -> Result<(DeviceId, String, bool), GroupAdminError> {
        let wanted = &self.wanted;
        let mut outcome = None;
        for i in 0..10_000 {
            let label = format!("{wanted}_{i:04}");
            if self.taken.contains(&label) {
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
                self.host,
                &arg.path,
                &LabelRequest {
                    label: parsed,
                    force: self.force,
                    disk_uuid: Uuid::new_v4(),
                    now_unix_seconds: self.now_unix_seconds,
                    discovery: Some(self.discovery.clone()),
                },
            ) {
                Ok(report) => {
                    outcome = Some(report);
                    break;
                }
                Err(AdminError::DuplicateLabel { .. }) => {
                    self.taken.insert(label);
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
        Ok((report.device, report.label, true))
    }
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
