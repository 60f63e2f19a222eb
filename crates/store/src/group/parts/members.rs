//! The member disks as the mounted group knows them: one slot per disk
//! number of the disk directory (a slot is empty once its disk left, or
//! when the directory names a number no disk holds), the numbers drops
//! freed during this mount, and the devices of disks whose drop completed.
//!
//! Owned by the [`Group`](super::super::Group) (changed only under the
//! group's `&mut`, i.e. under a live group's `meta`). A member's record
//! ([`Member`]) is the group's to change; which slot holds it, and which
//! numbers a new disk may take, are decided here and nowhere else.

use std::collections::{BTreeMap, BTreeSet};

use cairn_format::group::{DiskEntry, DiskState};
use cairn_io::DeviceId;
use uuid::Uuid;

use super::super::alloc::DiskAlloc;
use super::violations::Violations;

/// One member disk as the mounted group knows it.
#[derive(Debug)]
pub(in crate::group) struct Member {
    pub(in crate::group) entry: DiskEntry,
    pub(in crate::group) device: Option<DeviceId>,
    /// `None` while offline.
    pub(in crate::group) alloc: Option<DiskAlloc>,
    /// While OFFLINE, the table the extent maps give it (its own cannot be
    /// written): new copies are recorded on it from this one when a
    /// failure group is missing (`place_with_away`), and frees made while
    /// it is away go to it. Never written; set when the disk goes OFFLINE
    /// (the table it had, with what it held back from reuse) or at mount
    /// (built from the maps), and dropped when it comes back, whose table
    /// is rebuilt from the maps. Changed under the metadata lock, like
    /// `alloc`; `None` whenever `alloc` is `Some`.
    pub(in crate::group) away: Option<DiskAlloc>,
    pub(in crate::group) needs_flush: bool,
    /// The newest superblock generation this disk is known to hold: what a
    /// disk taken offline records as its `synced_generation`.
    pub(in crate::group) generation: u64,
    /// When this mount took it offline (its repair timer counts from then).
    pub(in crate::group) offline_since: Option<std::time::Instant>,
    /// Times this mount took it offline.
    pub(in crate::group) offline_count: u64,
    /// Relocation targets reserved on it when it went offline (its table
    /// went with it): given back to its table when it returns, so a copy
    /// still running into them never lands in an AU someone else got.
    pub(in crate::group) parked: Vec<(u32, u32)>,
}

impl Member {
    /// A member as a mount finds it or as it joins the group: nothing to
    /// flush, not taken offline during this mount, nothing parked, no table
    /// of a disk away.
    pub(in crate::group) fn new(
        entry: DiskEntry,
        device: Option<DeviceId>,
        alloc: Option<DiskAlloc>,
        generation: u64,
    ) -> Self {
        Member {
            entry,
            device,
            alloc,
            away: None,
            needs_flush: false,
            generation,
            offline_since: None,
            offline_count: 0,
            parked: Vec::new(),
        }
    }

    /// Read and written: ONLINE, attached, its table loaded.
    pub(in crate::group) fn online(&self) -> Option<DeviceId> {
        match (self.entry.state, self.device) {
            (DiskState::Online, Some(d)) if self.alloc.is_some() => Some(d),
            _ => None,
        }
    }

    /// Written (ONLINE or SYNCING), but read only if [`Member::online`].
    pub(in crate::group) fn writable(&self) -> Option<DeviceId> {
        match (self.entry.state, self.device) {
            (DiskState::Online | DiskState::Syncing, Some(d)) if self.alloc.is_some() => Some(d),
            _ => None,
        }
    }

    /// Its allocation table: the one it keeps on disk when written, the
    /// extent maps' while it is away.
    pub(in crate::group) fn table(&self) -> Option<&DiskAlloc> {
        self.alloc.as_ref().or(self.away.as_ref())
    }

    pub(in crate::group) fn table_mut(&mut self) -> Option<&mut DiskAlloc> {
        match self.alloc.as_mut() {
            Some(a) => Some(a),
            None => self.away.as_mut(),
        }
    }

    /// May receive new copies: not leaving, and with a table (ONLINE and
    /// read; or SYNCING or OFFLINE, a copy there restored when it is read
    /// again).
    pub(in crate::group) fn receives_copies(&self) -> bool {
        !self.entry.dropping() && self.table().is_some()
    }
}

/// The member disks, by number.
#[derive(Debug, Default)]
pub(in crate::group) struct Members {
    /// Slot `n` holds disk number `n`, or nothing.
    slots: Vec<Option<Member>>,
    /// Disk numbers freed by drops during this mount: not given to a disk
    /// added during it, since a data handle's engine may still map the
    /// number to the dropped disk's device.
    freed: BTreeSet<u16>,
    /// Devices of disks whose drop completed during this mount, still
    /// attached to the engine: a live group lets go of them
    /// ([`Members::take_left_devices`]).
    left_devices: Vec<DeviceId>,
}

/// How a disk joining a group clashes with one already named (a member, or
/// another disk of the same `create` or `alter --add`): one disk UUID (the
/// same disk named twice, or a copy of it: `dd`, a cloned LUN, an array
/// snapshot, which carries its label and UUID), or one label (names match
/// whatever their case). The one rule `create` and `alter --add` refuse
/// by, and [`Members::check_invariants`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::group) enum Clash {
    Uuid,
    Label,
}

/// How disk `a` (its UUID and label) clashes with disk `b`, if it does.
pub(in crate::group) fn clash(a: (&Uuid, &str), b: (&Uuid, &str)) -> Option<Clash> {
    if a.0 == b.0 {
        Some(Clash::Uuid)
    } else if label_key(a.1) == label_key(b.1) {
        Some(Clash::Label)
    } else {
        None
    }
}

/// A label as labels are compared: whatever its case.
fn label_key(label: &str) -> String {
    label.to_ascii_lowercase()
}

impl Members {
    /// `count` empty slots: the numbers a disk directory names (a mount
    /// fills them with [`Members::set`]).
    pub(in crate::group) fn with_slots(count: u16) -> Self {
        Self {
            slots: (0..count).map(|_| None).collect(),
            ..Self::default()
        }
    }

    /// Put `member` in its number's slot, which the disk directory named
    /// ([`Members::with_slots`]); `Err` with the number if it did not.
    pub(in crate::group) fn set(&mut self, member: Member) -> Result<(), u16> {
        let number = member.entry.number;
        let slot = self.slots.get_mut(usize::from(number)).ok_or(number)?;
        *slot = Some(member);
        Ok(())
    }

    /// A disk that joins the group (create, add): its slot, grown to. The
    /// caller took its number from [`Members::numbers_for_new`], so the
    /// slot is empty (a debug build asserts it: a member overwritten would
    /// vanish from the group with its table).
    pub(in crate::group) fn add(&mut self, member: Member) {
        let n = usize::from(member.entry.number);
        if self.slots.len() <= n {
            self.slots.resize_with(n + 1, || None);
        }
        debug_assert!(
            self.slots[n].is_none(),
            "invariant: disk {n} joins an empty slot"
        );
        self.slots[n] = Some(member);
    }

    /// Undo an [`Members::add`] whose disk could not be written: the number
    /// is free again (nothing ever used it).
    pub(in crate::group) fn unadd(&mut self, number: u16) {
        if let Some(slot) = self.slots.get_mut(usize::from(number)) {
            *slot = None;
        }
    }

    /// Disk `number` left the group (its drop completed): its slot empties
    /// and its number is not given again during this mount.
    pub(in crate::group) fn remove_dropped(&mut self, number: u16) {
        if let Some(slot) = self.slots.get_mut(usize::from(number)) {
            *slot = None;
        }
        self.freed.insert(number);
        while self.slots.last().is_some_and(Option::is_none) {
            self.slots.pop();
        }
    }

    /// A dropped disk's device, still attached, for the live group to let
    /// go of.
    pub(in crate::group) fn left_device(&mut self, device: Option<DeviceId>) {
        self.left_devices.extend(device);
    }

    pub(in crate::group) fn take_left_devices(&mut self) -> Vec<DeviceId> {
        std::mem::take(&mut self.left_devices)
    }

    /// The numbers new disks take, in order: empty slots first (lowest
    /// first), then past the last slot, skipping numbers freed during this
    /// mount. Unbounded: the caller stops at `DISKS_MAX`.
    pub(in crate::group) fn numbers_for_new(&self) -> impl Iterator<Item = usize> + '_ {
        (0usize..).filter(|n| {
            let empty = self.slots.get(*n).is_none_or(Option::is_none);
            empty && u16::try_from(*n).map_or(true, |n| !self.freed.contains(&n))
        })
    }

    /// The numbers of the slots (one past the highest member's).
    pub(in crate::group) fn count(&self) -> u16 {
        self.slots.len() as u16
    }

    /// Every slot's number, members or not.
    pub(in crate::group) fn numbers(&self) -> std::ops::Range<u16> {
        0..self.count()
    }

    pub(in crate::group) fn get(&self, number: u16) -> Option<&Member> {
        self.slots.get(usize::from(number)).and_then(Option::as_ref)
    }

    pub(in crate::group) fn get_mut(&mut self, number: u16) -> Option<&mut Member> {
        self.slots
            .get_mut(usize::from(number))
            .and_then(Option::as_mut)
    }

    /// Every member, by number.
    /// The first member a disk joining (its UUID and label) clashes
    /// with ([`clash`]), and how.
    pub(in crate::group) fn clash_with(
        &self,
        uuid: &Uuid,
        label: &str,
    ) -> Option<(Clash, &Member)> {
        self.iter().find_map(|m| {
            clash((uuid, label), (&m.entry.disk_uuid, &m.entry.label)).map(|c| (c, m))
        })
    }

    pub(in crate::group) fn iter(&self) -> impl Iterator<Item = &Member> + '_ {
        self.slots.iter().flatten()
    }

    pub(in crate::group) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Member> + '_ {
        self.slots.iter_mut().flatten()
    }

    /// What must hold between any two operations:
    /// - slot `n` holds the disk numbered `n`;
    /// - a disk has its own table only while it is ONLINE or SYNCING with a
    ///   device, and never beside the maps' table it has while away;
    /// - relocation targets are parked only on a disk without its own
    ///   table (they go back to it when it returns);
    /// - a number freed during this mount names no member;
    /// - no two members have one disk uuid, one label (names match
    ///   whatever their case), or one attached device;
    /// - a failure group's name has one id, and an id one name.
    pub(in crate::group) fn check_invariants(&self, out: &mut Violations) {
        let mut uuids = BTreeMap::new();
        let mut labels = BTreeMap::new();
        let mut devices = BTreeMap::new();
        let mut fg_ids: BTreeMap<&str, u16> = BTreeMap::new();
        let mut fg_names: BTreeMap<u16, &str> = BTreeMap::new();
        for (n, slot) in self.slots.iter().enumerate() {
            let Some(m) = slot else { continue };
            let e = &m.entry;
            out.check(usize::from(e.number) == n, || {
                format!("slot {n} holds disk {} ({})", e.number, e.label)
            });
            out.check(
                m.alloc.is_none()
                    || (m.device.is_some()
                        && matches!(e.state, DiskState::Online | DiskState::Syncing)),
                || {
                    format!(
                        "disk {} has its own table while {:?}{}",
                        e.label,
                        e.state,
                        if m.device.is_none() {
                            " without a device"
                        } else {
                            ""
                        }
                    )
                },
            );
            out.check(m.alloc.is_none() || m.away.is_none(), || {
                format!(
                    "disk {} has its own table and the maps' table of a disk away",
                    e.label
                )
            });
            out.check(m.parked.is_empty() || m.alloc.is_none(), || {
                format!(
                    "disk {} has its table and {} relocation targets parked for its return",
                    e.label,
                    m.parked.len()
                )
            });
            out.check(!self.freed.contains(&e.number), || {
                format!(
                    "disk {} took number {}, freed by a drop during this mount",
                    e.label, e.number
                )
            });
            if let Some(other) = uuids.insert(e.disk_uuid, &e.label) {
                out.check(false, || {
                    format!(
                        "disks {other} and {} have one uuid {}",
                        e.label, e.disk_uuid
                    )
                });
            }
            if let Some(other) = labels.insert(label_key(&e.label), &e.label) {
                out.check(false, || {
                    format!("disks {other} and {} have one label", e.label)
                });
            }
            if let Some(d) = m.device {
                if let Some(other) = devices.insert(d, &e.label) {
                    out.check(false, || {
                        format!("disks {other} and {} are one device {}", e.label, d.0)
                    });
                }
            }
            let id = *fg_ids.entry(e.failgroup.as_str()).or_insert(e.failgroup_id);
            out.check(id == e.failgroup_id, || {
                format!(
                    "failure group {} has ids {id} and {} (disk {})",
                    e.failgroup, e.failgroup_id, e.label
                )
            });
            let name = *fg_names
                .entry(e.failgroup_id)
                .or_insert(e.failgroup.as_str());
            out.check(name == e.failgroup, || {
                format!(
                    "failure group id {} names {name} and {} (disk {})",
                    e.failgroup_id, e.failgroup, e.label
                )
            });
        }
    }
}
