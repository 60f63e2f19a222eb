//! Adding and dropping disks: the checks a new disk passes and its
//! number and failure group (`prepare_adds`), writing it in
//! (`add_disks`), and a drop asked, forced, expired or taken back. The
//! rebalance that moves the copies, and a drop's end, are in
//! `relocate.rs`.

use std::collections::{BTreeMap, BTreeSet};

use cairn_format::group::{DiskEntry, DiskState, DISKS_MAX};
use cairn_format::meta::BLOCK_BYTES;
use cairn_format::{group as fmt, DiskHeader};
use cairn_io::{AlignedBuf, DeviceId};
use uuid::Uuid;

use super::alloc::DiskAlloc;
use super::error::{io_err, GroupError};
use super::limits::member_layout;
use super::mounted::Group;
use super::move_plan::{Cuts, PreparedDisk};
use super::parts::members::{clash, Clash, Member};
use super::parts::txn::Dirty;
use super::slots::newest_header;
use super::spec::NewDisk;
use crate::rebalance::{self};
use crate::{labeling, placement};

impl Group<'_> {
    /// Check disks to add (attached to this group's engine, labelled):
    /// not a member already, in no other group (unless `force`), with the
    /// group's sector size, big enough for one data AU. Numbers and failure
    /// group ids are assigned as the add would. Writes nothing.
    pub fn prepare_adds(
        &mut self,
        disks: &[NewDisk],
        force: bool,
    ) -> Result<Vec<PreparedDisk>, GroupError> {
        let mut out: Vec<PreparedDisk> = Vec::new();
        let numbers: Vec<usize> = self.members.numbers_for_new().take(disks.len()).collect();
        let mut numbers = numbers.into_iter();
        let mut fg_ids: BTreeMap<String, u16> = self
            .members
            .iter()
            .map(|m| (m.entry.failgroup.clone(), m.entry.failgroup_id))
            .collect();
        for d in disks {
            let (header, _) = newest_header(
                &mut *self.engine,
                d.device,
                &format!("device {}", d.device.0),
            )?;
            let label = header.label.as_str().to_string();
            self.refuse_new_disk(&header, &label, &out, force)?;
            let size = self
                .engine
                .geometry(d.device)
                .map_or(header.device_size_bytes, |g| g.size_bytes);
            let layout = member_layout(size, self.au_bytes)
                .map_err(|why| GroupError::Invalid(format!("disk {label}: {why}")))?;
            let fg = d
                .failgroup
                .clone()
                .unwrap_or_else(|| label.clone())
                .to_ascii_uppercase();
            crate::names::GroupName::parse(&fg)
                .map_err(|e| GroupError::Invalid(format!("failure group name: {e}")))?;
            let next_fg = fg_ids.values().max().map_or(0, |m| m + 1);
            let fg_id = *fg_ids.entry(fg.clone()).or_insert(next_fg);
            let number = match numbers.next() {
                Some(n) if n < DISKS_MAX => n as u16,
                _ => {
                    return Err(GroupError::Invalid(format!(
                        "group {} would have more than {DISKS_MAX} disks",
                        self.name
                    )))
                }
            };
            out.push(PreparedDisk {
                device: d.device,
                layout,
                entry: DiskEntry {
                    number,
                    disk_uuid: header.disk_uuid,
                    label,
                    failgroup: fg,
                    failgroup_id: fg_id,
                    state: DiskState::Online,
                    au_count: layout.au_count,
                    size_bytes: size,
                    logical_sector_bytes: header.logical_sector_bytes,
                    physical_sector_bytes: header.physical_sector_bytes,
                    created_unix_seconds: (self.clock)(),
                    flags: 0,
                    drop_after_minutes: 0,
                    offline_seconds: 0,
                    synced_generation: 0,
                },
            });
        }
        Ok(out)
    }

    /// Refuse a disk to add (its newest header, and its label) that is a
    /// member already or named twice (`out`: those prepared before it),
    /// whose label a member has, that is in another group (unless
    /// `force`), or whose sector size is not the group's.
    fn refuse_new_disk(
        &self,
        header: &DiskHeader,
        label: &str,
        out: &[PreparedDisk],
        force: bool,
    ) -> Result<(), GroupError> {
        let named = self
            .members
            .iter()
            .map(|m| &m.entry)
            .chain(out.iter().map(|p| &p.entry));
        let clashes: Vec<Clash> = named
            .filter_map(|e| clash((&header.disk_uuid, label), (&e.disk_uuid, &e.label)))
            .collect();
        if clashes.contains(&Clash::Uuid) {
            return Err(GroupError::Invalid(format!(
                "disk {label} is already a member of group {}; name each new disk once",
                self.name
            )));
        }
        if clashes.contains(&Clash::Label) {
            return Err(GroupError::Invalid(format!(
                "group {} already has a disk labelled {label}; relabel the new disk (`cairn disk label --force`)",
                self.name
            )));
        }
        match header.group_uuid {
            Some(other) if other != self.uuid && !force => {
                return Err(GroupError::Exists(format!(
                    "disk {label} belongs to another disk group ({other}); drop it from that group first, or use --force to take it"
                )))
            }
            _ => {}
        }
        if header.logical_sector_bytes != self.sector_bytes {
            return Err(GroupError::Invalid(format!(
                "disk {label} has {}-byte logical sectors but group {} uses {}; 512-byte (512n/512e) and 4096-byte (4Kn) disks cannot mix",
                header.logical_sector_bytes, self.name, self.sector_bytes
            )));
        }
        Ok(())
    }

    /// Add prepared disks: each gets an empty allocation table (written in
    /// place: nothing refers to it yet) and its header names the group;
    /// then the superblocks, on every disk, list it (the commit point). A
    /// crash before that leaves a disk whose header names a group whose
    /// directory lacks it: `alter --add` takes it again without --force.
    pub fn add_disks(&mut self, disks: Vec<PreparedDisk>) -> Result<Vec<String>, GroupError> {
        self.check_writable()?;
        let mut added = Vec::new();
        for p in disks {
            let n = p.entry.number;
            let p_device = p.device;
            let mut alloc = DiskAlloc::empty(p.layout);
            alloc.mark_all_dirty();
            added.push(p.entry.label.clone());
            self.members
                .add(Member::new(p.entry, Some(p.device), Some(alloc), 0));
            // Its table, straight to its place, durably.
            let blocks = self
                .member_mut(n)
                .and_then(|m| m.alloc.as_mut())
                .map(|a| a.take_dirty())
                .unwrap_or_default();
            let mut items = Vec::new();
            for b in blocks {
                items.push(self.durable_block(Dirty::of_table_block(n, b)));
            }
            if let Err(e) = self.write_durably(items, "a new disk's allocation table") {
                self.members.unadd(n);
                return Err(e);
            }
            let label = self.disk_name(n);
            let device = p_device;
            let size = self.member(n).map(|m| m.entry.size_bytes);
            if let Err(e) = self.write_membership(device, &label, Some(self.uuid), None, size) {
                self.members.unadd(n);
                return Err(e);
            }
        }
        self.superblocks_or_stop()?;
        self.publish_disks();
        Ok(added)
    }

    /// Rewrite a disk's header: in `group` (or in none), and FORMER of
    /// `former`; with `size`, for a device of that size (a disk that grew
    /// between its label and its add: the tail copy goes to the end the
    /// group will use, out of the AUs it will hand out, and the old one is
    /// cleared — the disk holds nothing of the group's yet).
    pub(super) fn write_membership(
        &mut self,
        device: DeviceId,
        label: &str,
        group: Option<Uuid>,
        former: Option<Uuid>,
        size: Option<u64>,
    ) -> Result<(), GroupError> {
        let (mut header, generation) = newest_header(&mut *self.engine, device, label)?;
        header.group_uuid = group;
        header.set_former_group(former);
        header.generation = generation + 1;
        header.written_unix_seconds = (self.clock)();
        let old = header.copy_offsets_bytes.clone();
        if let Some(size) = size.filter(|s| *s != header.device_size_bytes) {
            let placement = cairn_format::layout::HeaderPlacement::for_device(size)
                .map_err(|e| GroupError::Invalid(format!("disk {label}: {e}")))?;
            header.device_size_bytes = size;
            header.copy_offsets_bytes = placement.offsets_bytes.to_vec();
        }
        let all: Vec<usize> = (0..header.copy_offsets_bytes.len()).collect();
        labeling::write_copies(&mut *self.engine, device, &header, &all)
            .map_err(|e| GroupError::Invalid(format!("disk {label}: writing its header: {e}")))?;
        for offset in old {
            if !header.copy_offsets_bytes.contains(&offset) {
                self.engine
                    .write_at(device, offset, AlignedBuf::zeroed(BLOCK_BYTES), true)
                    .map_err(io_err(label))?;
            }
        }
        Ok(())
    }

    /// Check a drop of `names` (labels) beside disks a change adds: every
    /// name a member not already leaving, and enough failure groups left
    /// for the redundancy. Returns their numbers.
    pub(super) fn check_drops(
        &self,
        names: &[String],
        extra: &[PreparedDisk],
    ) -> Result<BTreeSet<u16>, GroupError> {
        let disks: BTreeSet<u16> = self.disks_named(names)?.into_iter().collect();
        for d in &disks {
            let m = self.member(*d).expect("invariant: named");
            if m.entry.dropping() {
                return Err(GroupError::Invalid(format!(
                    "disk {} is already being dropped; `cairn group rebalance {}` finishes the drop, `cairn group undrop {}` cancels it",
                    m.entry.label, self.name, self.name
                )));
            }
        }
        let staying: BTreeSet<u16> = self
            .members
            .iter()
            .filter(|m| !m.entry.dropping() && !disks.contains(&m.entry.number))
            .map(|m| m.entry.failgroup_id)
            .chain(extra.iter().map(|p| p.entry.failgroup_id))
            .collect();
        if staying.len() < usize::from(self.copies) {
            let labels: Vec<String> = disks.iter().map(|d| self.disk_name(*d)).collect();
            return Err(GroupError::Invalid(format!(
                "dropping {} would leave {} failure group(s), and {} redundancy keeps {} copies in different failure groups; add a disk in another failure group in the same command (--add PATH=FAILGROUP), or drop fewer",
                labels.join(", "),
                staying.len(),
                self.redundancy().as_str(),
                self.copies
            )));
        }
        Ok(disks)
    }

    /// Mark disks DROPPING (`alter --drop`): nothing new is placed on them
    /// and the next rebalance moves their copies off. Refused, changing
    /// nothing, when the disks that stay could not hold the data.
    pub fn request_drops(&mut self, names: &[String]) -> Result<Vec<String>, GroupError> {
        self.check_writable()?;
        let disks = self.check_drops(names, &[])?;
        self.plan_for(&[], &disks, &Cuts::new())?;
        let mut done = Vec::new();
        for d in &disks {
            if let Some(m) = self.member_mut(*d) {
                m.entry.flags |= fmt::DISK_FLAG_DROPPING;
                done.push(m.entry.label.clone());
            }
        }
        self.superblocks_or_stop()?;
        self.publish_disks();
        self.note_rebalance_pending()?;
        Ok(done)
    }

    /// Drop OFFLINE disks by force (`drop-disk --force`): their copies are
    /// never read again and the next rebalance rebuilds them from their
    /// mirrors. Refused in external redundancy (there is no mirror), for a
    /// disk that is not OFFLINE (drop it with `alter --drop`, which moves
    /// its data first), and when a copy would have no readable mirror.
    pub fn drop_disks_forced(&mut self, names: &[String]) -> Result<Vec<String>, GroupError> {
        self.check_writable()?;
        if self.copies == 1 {
            return Err(GroupError::Invalid(format!(
                "group {} has external redundancy: a disk's data has no other copy, so dropping it by force loses that data; bring the disk back (`cairn group online`) or restore the files from a backup",
                self.name
            )));
        }
        let disks = self.disks_named(names)?;
        for d in &disks {
            let m = self.member(*d).expect("invariant: named");
            if m.entry.state != DiskState::Offline {
                return Err(GroupError::Invalid(format!(
                    "disk {} is {}: only an OFFLINE disk is dropped by force; `cairn group alter {} --drop {}` moves its data off first",
                    m.entry.label,
                    m.entry.state.as_str(),
                    self.name,
                    m.entry.label
                )));
            }
        }
        let leaving: BTreeSet<u16> = disks.iter().copied().collect();
        let mut trial = self.plan_disks(&[], &leaving, &Cuts::new());
        for t in &mut trial {
            if leaving.contains(&t.number) {
                t.readable = false;
            }
        }
        rebalance::plan(&trial, &self.plan_extents(&Cuts::new())).map_err(|e| match e {
            rebalance::PlanError::NoSource { file, .. } => GroupError::Invalid(format!(
                "dropping {} by force would lose {}: no other copy of it can be read; bring the disk back (`cairn group online`) instead",
                names.join(", "),
                self.path_of(file)
            )),
            rebalance::PlanError::NoRoom { .. } => GroupError::NoSpace(format!(
                "the disks that stay cannot hold the copies of {} rebuilt elsewhere; add disks first",
                names.join(", ")
            )),
        })?;
        // Every AU of every written extent with a copy there must be
        // current on a copy that stays: a copy that missed writes (stale)
        // while this disk had them is no source to rebuild from.
        for (number, rec) in &self.files {
            for (index, e) in rec.extents.iter().enumerate() {
                if !e.initialized || !e.copies().iter().any(|c| leaving.contains(&c.disk)) {
                    continue;
                }
                let aus = placement::extent_aus(index as u64);
                let uncovered = (0..aus).find(|au| {
                    !e.copies().iter().enumerate().any(|(slot, c)| {
                        !leaving.contains(&c.disk)
                            && self.member(c.disk).and_then(Member::online).is_some()
                            && !self.is_forced(c.disk)
                            && !e.stale_in(slot, *au..*au + 1)
                    })
                });
                if let Some(au) = uncovered {
                    return Err(GroupError::Invalid(format!(
                        "dropping {} by force would lose {} (extent {index}, AU {au}): no copy that stays is current there; bring the disk back (`cairn group online`) instead",
                        names.join(", "),
                        self.path_of(*number)
                    )));
                }
            }
        }
        let mut done = Vec::new();
        for d in &disks {
            if let Some(m) = self.member_mut(*d) {
                m.entry.flags |= fmt::DISK_FLAG_DROPPING | fmt::DISK_FLAG_FORCED;
                done.push(m.entry.label.clone());
            }
        }
        self.superblocks_or_stop()?;
        self.publish_disks();
        self.note_rebalance_pending()?;
        Ok(done)
    }

    /// OFFLINE disks whose repair timer ran out (`disk_repair_time`, or
    /// their own `--drop-after`) are dropped by force, as ASM drops them:
    /// the next rebalance rebuilds their copies from the mirrors. Returns
    /// the labels dropped, and for each disk that could not be, why.
    pub fn drop_expired(&mut self) -> (Vec<String>, Vec<String>) {
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|m| m.entry.state == DiskState::Offline && !m.entry.dropping())
            .filter(|m| self.repair_seconds_left(m.entry.number) == Some(0))
            .map(|m| m.entry.label.clone())
            .collect();
        let (mut dropped, mut refused) = (Vec::new(), Vec::new());
        for label in expired {
            let number = self.disks_named(std::slice::from_ref(&label)).ok();
            for d in number.iter().flatten() {
                self.say_why(
                    *d,
                    "its repair time (disk_repair_time) ran out: dropped by force, its copies rebuilt from their mirrors",
                );
            }
            match self.drop_disks_forced(std::slice::from_ref(&label)) {
                Ok(_) => dropped.push(label),
                Err(e) => {
                    for d in number.iter().flatten() {
                        self.states.unsay_why(*d);
                    }
                    refused.push(format!(
                        "disk {label}'s repair time ran out, but it is not dropped: {e}"
                    ));
                }
            }
        }
        (dropped, refused)
    }

    /// Cancel the drops still pending (`undrop`): the disks are plain
    /// members again (what already moved off them stays moved). A disk
    /// dropped by force cannot be undropped: its copies are being rebuilt,
    /// and it is brought back with `online` instead.
    pub fn undrop(&mut self) -> Result<Vec<String>, GroupError> {
        self.check_writable()?;
        let mut done = Vec::new();
        for m in self.members.iter_mut() {
            if m.entry.dropping() && !m.entry.forced() {
                m.entry.flags &= !fmt::DISK_FLAG_DROPPING;
                done.push(m.entry.label.clone());
            }
        }
        if done.is_empty() {
            return Err(GroupError::Invalid(format!(
                "group {} has no drop pending to cancel (a disk dropped by force is not undropped: bring it back with `cairn group online`)",
                self.name
            )));
        }
        self.superblocks_or_stop()?;
        self.publish_disks();
        if self.rebalance_plan().is_ok_and(|p| p.moves.is_empty()) {
            self.set_rebalance_pending(None)?;
        }
        Ok(done)
    }
}
