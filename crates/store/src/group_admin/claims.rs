//! Other groups' claims on the disks named for a new group: which may be
//! overridden (`--force`, `--take-from-group`), judged as mount would see
//! the claiming group, and how each is described.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use cairn_io::host::Host;
use uuid::Uuid;

use super::error::GroupAdminError;
use super::find::{membership_of, FoundGroup};
use crate::group;

/// A disk named for a new group whose label claims it for another.
#[derive(Debug, Clone)]
pub(super) struct Claim {
    /// Its place among the disks named.
    pub(super) index: usize,
    pub(super) path: PathBuf,
    pub(super) group: Uuid,
    pub(super) disk_uuid: Uuid,
    pub(super) label: String,
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
pub(super) fn judge_claims(
    host: &Host,
    claims: &[Claim],
    force: bool,
    take_from: &[String],
    found: &[FoundGroup],
) -> Result<BTreeMap<usize, String>, GroupAdminError> {
    let mut judge = Judge {
        host,
        force,
        take_from,
        found,
        out: BTreeMap::new(),
        licensed: BTreeSet::new(),
    };
    let mut groups: BTreeMap<Uuid, Vec<&Claim>> = BTreeMap::new();
    for c in claims {
        groups.entry(c.group).or_default().push(c);
    }
    for (uuid, taken) in groups {
        judge.group(uuid, &taken)?;
    }
    // A name that licensed nothing is a typo, or a disk left off the list:
    // say so rather than go on as if it had been heeded.
    if let Some(unused) = take_from
        .iter()
        .find(|t| !judge.licensed.contains(&t.to_ascii_uppercase()))
    {
        return Err(GroupAdminError::Invalid(format!(
            "--take-from-group {unused}: none of the disks named is a disk group {} counts on; check the group's name and the --disk list, or drop the flag",
            unused.to_ascii_uppercase()
        )));
    }
    Ok(judge.out)
}

/// [`judge_claims`]'s inputs, and what it has judged so far.
struct Judge<'a> {
    host: &'a Host,
    force: bool,
    take_from: &'a [String],
    found: &'a [FoundGroup],
    /// Each claim that may be overridden, described, by its place among the
    /// disks named.
    out: BTreeMap<usize, String>,
    /// The groups `take_from` named that did give up a disk.
    licensed: BTreeSet<String>,
}

impl Judge<'_> {
    /// All the disks `taken` from group `uuid`, judged together.
    fn group(&mut self, uuid: Uuid, taken: &[&Claim]) -> Result<(), GroupAdminError> {
        let (newest, present) = self.claiming_group(uuid, taken)?;
        let Some(group) = newest else {
            return self.never_finished(uuid, taken);
        };
        let counted = self.no_longer_used(uuid, &group, taken)?;
        if counted.is_empty() {
            return Ok(());
        }
        self.counted_on(uuid, &group, &present, &counted)
    }

    /// The claiming group as mount would see it: the newest superblock of it
    /// that its disks hold (the claimed disks, and every disk discovery
    /// reaches), and which of its disks are in sight.
    fn claiming_group(
        &self,
        uuid: Uuid,
        taken: &[&Claim],
    ) -> Result<(Option<group::GroupOnDisk>, BTreeSet<Uuid>), GroupAdminError> {
        let mut paths: Vec<PathBuf> = taken.iter().map(|c| c.path.clone()).collect();
        for g in self.found.iter().filter(|g| g.uuid == uuid) {
            paths.extend(g.disks.iter().map(|d| d.path.clone()));
        }
        paths.sort();
        paths.dedup();
        let mut newest: Option<group::GroupOnDisk> = None;
        let mut present: BTreeSet<Uuid> = BTreeSet::new();
        for path in &paths {
            let Some(m) = membership_of(self.host, path)? else {
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
        Ok((newest, present))
    }

    /// No disk holds a superblock of the group: its create never finished.
    fn never_finished(&mut self, uuid: Uuid, taken: &[&Claim]) -> Result<(), GroupAdminError> {
        for c in taken {
            let what = format!(
                "disk {} of disk group {uuid}, whose superblock no disk in reach holds: its create never finished (or its other disks are outside the discovery string)",
                c.label
            );
            if !self.force {
                return Err(refuse(c, what));
            }
            self.out.insert(c.index, what);
        }
        Ok(())
    }

    /// The claims of the disks the group's directory records offline (or
    /// lacks) judged; the others returned with their directory entries.
    fn no_longer_used<'c>(
        &mut self,
        uuid: Uuid,
        group: &group::GroupOnDisk,
        taken: &[&'c Claim],
    ) -> Result<Vec<(&'c Claim, cairn_format::group::DiskEntry)>, GroupAdminError> {
        let mut counted = Vec::new();
        for c in taken {
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
                    if !self.force {
                        return Err(refuse(c, what));
                    }
                    self.out.insert(c.index, what);
                }
            }
        }
        Ok(counted)
    }

    /// Disks the group counts on: let go only when `take_from` names it.
    fn counted_on(
        &mut self,
        uuid: Uuid,
        group: &group::GroupOnDisk,
        present: &BTreeSet<Uuid>,
        counted: &[(&Claim, cairn_format::group::DiskEntry)],
    ) -> Result<(), GroupAdminError> {
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
        if self
            .take_from
            .iter()
            .any(|t| t.eq_ignore_ascii_case(&group.name))
        {
            self.licensed.insert(group.name.to_ascii_uppercase());
            for (c, entry) in counted {
                self.out.insert(
                    c.index,
                    format!(
                        "disk {} of disk group {} (uuid {uuid}), which counted on it and is now {after}{caveat}",
                        entry.label, group.name
                    ),
                );
            }
            return Ok(());
        }
        let (c, entry) = &counted[0];
        Err(GroupAdminError::Invalid(format!(
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
        )))
    }
}

/// A directory entry of a disk the group counts on.
fn online(d: &&cairn_format::group::DiskEntry) -> bool {
    d.state == cairn_format::group::DiskState::Online
}

/// A claim that only `--force` may override, refused.
fn refuse(c: &Claim, what: String) -> GroupAdminError {
    GroupAdminError::Invalid(format!(
        "{} is {what}; run again with --force to take it",
        c.path.display()
    ))
}
