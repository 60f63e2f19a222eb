//! The member disks' devices: which device each disk is on, attached,
//! released and detached as disks come and go.

use std::collections::BTreeMap;

use cairn_format::group::{DiskState, Extent};
use cairn_io::DeviceId;
use uuid::Uuid;

use super::error::GroupError;
use super::mounted::Group;
use super::parts::members::Member;

impl Group<'_> {
    /// Every member disk attached to the metadata plane's engine, by number.
    pub fn member_devices(&self) -> BTreeMap<u16, DeviceId> {
        self.members
            .numbers()
            .filter_map(|d| Some((d, self.member(d)?.device?)))
            .collect()
    }

    /// Attach a device to the metadata plane's engine (a disk about to be
    /// added to a live group: [`super::LiveGroup::add_devices`]).
    pub(super) fn attach_device(
        &mut self,
        file: cairn_io::DeviceFile,
    ) -> Result<DeviceId, GroupError> {
        self.engine.attach_file(file).ok_or_else(|| {
            GroupError::Invalid(format!(
                "group {}'s engine cannot take a new device while it is mounted",
                self.name
            ))
        })
    }

    /// A member that was not attached (missing when the group mounted, so
    /// OFFLINE) found again on `device`, attached to the engine: from now
    /// on it is that member's device, still OFFLINE until `online` brings
    /// it back (which checks then that it is the image the group left).
    /// The label of the member it is, or `None` when the device is not a
    /// missing member of this group.
    pub(super) fn reattach(&mut self, device: DeviceId) -> Result<Option<String>, GroupError> {
        let found = super::slots::identify(&mut *self.engine, &[device]);
        let Some((_, header, slot)) = found
            .get(&self.uuid)
            .and_then(|disks| disks.first())
            .cloned()
        else {
            return Ok(None);
        };
        let size = self.engine.geometry(device).map(|g| g.size_bytes);
        let Some(m) = self
            .members
            .iter_mut()
            .find(|m| m.entry.disk_uuid == header.disk_uuid && m.device.is_none())
            // A disk dropped by force, or leaving, does not come back.
            .filter(|m| !m.entry.forced() && !m.entry.dropping())
        else {
            return Ok(None);
        };
        if size.is_none_or(|s| s < m.entry.size_bytes) {
            return Err(GroupError::Invalid(format!(
                "disk {} is smaller than the {} bytes the group recorded for it (a truncated file, or a smaller device in its place): it cannot come back",
                m.entry.label, m.entry.size_bytes
            )));
        }
        m.device = Some(device);
        m.generation = slot.map_or(0, |(generation, _)| generation);
        let label = m.entry.label.clone();
        self.publish_disks();
        Ok(Some(label))
    }

    /// The disk a device attached to the engine is, by its label: its uuid
    /// and label, if it carries this group's label.
    pub(super) fn disk_on(&mut self, device: DeviceId) -> Option<(Uuid, String)> {
        let found = super::slots::identify(&mut *self.engine, &[device]);
        let (_, header, _) = found.get(&self.uuid)?.first()?;
        Some((header.disk_uuid, header.label.as_str().to_string()))
    }

    /// Which of `extents` (index, as seen) file `file` (this incarnation)
    /// still has with the same copies, and `also` holds for.
    pub(super) fn extents_still(
        &self,
        file: u32,
        incarnation: u32,
        extents: &[(u64, Extent)],
        also: impl Fn(&Extent) -> bool,
    ) -> Result<Vec<u64>, GroupError> {
        let Some(rec) = self
            .files
            .get(file)
            .filter(|r| r.entry.incarnation == incarnation)
        else {
            return Err(GroupError::NotFound(format!("file {file} does not exist")));
        };
        Ok(extents
            .iter()
            .filter(|(i, seen)| {
                rec.extents
                    .get(*i as usize)
                    .is_some_and(|now| also(now) && now.copies() == seen.copies())
            })
            .map(|(i, _)| *i)
            .collect())
    }

    /// OFFLINE members (those named, by label, or all; not one leaving)
    /// that still hold a device: (disk, device).
    pub(super) fn offline_devices(&self, names: Option<&[String]>) -> Vec<(u16, DeviceId)> {
        self.members
            .iter()
            .filter(|m| {
                m.entry.state == DiskState::Offline
                    && !m.entry.dropping()
                    && names.is_none_or(|n| {
                        n.iter()
                            .any(|l| l.trim().eq_ignore_ascii_case(m.entry.label.as_str()))
                    })
            })
            .filter_map(|m| Some((m.entry.number, m.device?)))
            .collect()
    }

    /// Detach OFFLINE member `disk` from `device`, as a disk missing at
    /// mount is, if that is still its device: its label.
    pub(super) fn release_device(&mut self, disk: u16, device: DeviceId) -> Option<String> {
        let m = self.member_mut(disk)?;
        if m.entry.state != DiskState::Offline || m.device != Some(device) {
            return None;
        }
        m.device = None;
        let label = m.entry.label.as_str().to_string();
        self.publish_disks();
        Some(label)
    }

    /// The disks gone OFFLINE since the last call (after an I/O error, or
    /// on request once stamped) that still hold a device: with `release`,
    /// each gives it up (detached from its member, as a disk missing at
    /// mount is, and a new disk view published) and the devices are
    /// returned for the caller to let go of; without, nothing changes (a
    /// source that cannot open them again keeps them).
    pub(super) fn release_offline(&mut self, release: bool) -> Vec<DeviceId> {
        let disks = std::mem::take(&mut self.to_release);
        if !release {
            return Vec::new();
        }
        let mut ids = Vec::new();
        for d in disks {
            let Some(m) = self.member_mut(d) else {
                continue;
            };
            if m.entry.state != DiskState::Offline {
                continue;
            }
            if let Some(id) = m.device.take() {
                ids.push(id);
            }
        }
        if !ids.is_empty() {
            self.publish_disks();
        }
        ids
    }

    /// Let go of a device no member uses (the engine closes it).
    pub(super) fn detach_device(&mut self, id: DeviceId) {
        if self.member_devices().values().any(|d| *d == id) {
            return;
        }
        drop(self.engine.detach_file(id));
    }

    /// The devices of disks whose drop completed since the last call.
    pub(super) fn take_left_devices(&mut self) -> Vec<DeviceId> {
        self.members.take_left_devices()
    }

    /// Mounted read-only (a listing or inspecting command).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The device of a member disk, if online.
    pub fn disk_device(&self, disk: u16) -> Option<cairn_io::DeviceId> {
        self.member(disk).and_then(Member::online)
    }
}
