//! Superblocks and the disk directory: writing a new generation to every
//! online disk, and the disk states they record (taking a failed disk
//! offline). Reading a disk's slots at mount and discovery is `slots.rs`.

use std::collections::BTreeSet;

use cairn_format::group::{
    DiskEntry, DiskState, GroupSuper, DISK_ENTRIES_PER_BLOCK, FILE_DIRECTORY, FILE_JOURNAL,
    SUPER_SLOT_OFFSETS_BYTES,
};
use cairn_format::meta::{BlockType, BLOCK_BYTES};
use cairn_format::{group as fmt, meta, FeatureSet};
use cairn_io::{AlignedBuf, DeviceId, Op, Request};

use super::block_ids::per_disk_id;
use super::error::{io_err, GroupError};
use super::journal::DurableItem;
use super::mounted::Group;
use super::parts::members::Member;

impl Group<'_> {
    /// From now on the group uses ro-compatible feature `bit`: the
    /// superblocks say so before anything that needs it is written (so a
    /// Cairn that does not know it mounts the group read-only), and a disk
    /// that could not take them goes offline, as after any failed write.
    /// Call it before the operation changes anything.
    pub(super) fn declare_ro_compat(&mut self, bit: u64) -> Result<(), GroupError> {
        if self.features.ro_compat & bit == bit {
            return Ok(());
        }
        self.features.ro_compat |= bit;
        self.superblocks_or_stop()
    }

    /// Take disks whose writes failed offline, if redundancy allows.
    pub(super) fn offline_failed(&mut self) -> Result<(), GroupError> {
        let failed: Vec<u16> = std::mem::take(&mut self.failed_disks).into_iter().collect();
        if failed.is_empty() {
            return Ok(());
        }
        self.set_offline(&failed)
    }

    pub(super) fn set_offline(&mut self, disks: &[u16]) -> Result<(), GroupError> {
        for d in disks {
            let newly = self.member(*d).filter(|m| m.writable().is_some()).map(|m| {
                format!(
                    "{} (failure group {}): an I/O to it failed",
                    m.entry.label, m.entry.failgroup
                )
            });
            if newly.is_some() {
                let why = self
                    .states
                    .take_failure(*d)
                    .unwrap_or_else(|| "an I/O to it failed".into());
                self.say_why(*d, why);
                // Its devices are let go of once it is recorded OFFLINE
                // (by a live group, at the operation's end): a failed disk
                // keeps failing on them, and they would keep its file
                // system from being unmounted for repair.
                self.to_release.insert(*d);
            }
            self.taken_offline.extend(newly);
            if let Some(m) = self.member_mut(*d) {
                if m.writable().is_some() {
                    // Whatever it had not flushed may be gone with it.
                    m.entry.flags |= fmt::DISK_FLAG_RESYNC_ALL;
                }
            }
            self.take_offline(*d);
        }
        if !self.redundancy_holds() {
            let why = format!(
                "lost disks {:?}: more failure groups than {} redundancy survives",
                disks.iter().map(|d| self.disk_name(*d)).collect::<Vec<_>>(),
                self.redundancy().as_str()
            );
            self.stop(why.clone());
            // Not recorded offline (a disk that holds the only readable copy
            // of a journal record must stay readable for the next mount's
            // replay), but what it missed must not be trusted.
            self.record_missed_writes(&disks.iter().copied().collect());
            return Err(GroupError::Poisoned(why));
        }
        // Memory now skips these disks; if the superblocks cannot say so, a
        // later mount would trust their stale blocks. Stop instead.
        if let Err(e) = self.write_superblocks() {
            self.stop(e.to_string());
            return Err(e);
        }
        // Durably offline: data threads stop using them from the next view.
        self.publish_disks();
        Ok(())
    }

    /// Mark a member offline in memory: never read or written again until
    /// resynced. It records the superblock generation it holds, so that
    /// only that image of it is taken back.
    pub(super) fn take_offline(&mut self, disk: u16) {
        // A failure noted before is told with this change or not at all.
        self.states.take_failure(disk);
        if let Some(m) = self.member_mut(disk) {
            if m.writable().is_some() {
                m.entry.synced_generation = m.generation as u32;
            }
            m.entry.state = DiskState::Offline;
            if let Some(mut a) = m.alloc.take() {
                m.parked.extend(a.reservations());
                // The table it had is the maps' from now on: what it holds
                // back from reuse stays held (a data operation that took
                // the view before this one may still write a freed run).
                // Its changed blocks are never written.
                a.take_dirty();
                m.away = Some(a);
            }
            m.offline_since = Some(std::time::Instant::now());
            m.offline_count += 1;
        }
    }

    /// Failure groups with an offline member stay below the copy count.
    pub(super) fn redundancy_holds(&self) -> bool {
        let down: BTreeSet<u16> = self
            .members
            .iter()
            .filter(|m| m.online().is_none())
            .map(|m| m.entry.failgroup_id)
            .collect();
        down.len() < usize::from(self.copies)
    }

    pub(super) fn disk_entries(&self) -> Vec<DiskEntry> {
        self.members.iter().map(|m| m.entry.clone()).collect()
    }

    pub(super) fn superblock_for(&self, disk: u16) -> GroupSuper {
        GroupSuper {
            name: self.name.clone(),
            copies: self.copies,
            au_bytes: self.au_bytes as u32,
            logical_sector_bytes: self.sector_bytes,
            disk_number: disk,
            disk_count: self.members.count(),
            created_unix_seconds: self.created_unix_seconds,
            // Written by code that knows stale copies: a reader that does
            // not must refuse the group.
            features: FeatureSet {
                incompat: self.features.incompat | fmt::GROUP_INCOMPAT_STALE_COPIES,
                ..self.features
            },
            file_directory: self.files[&FILE_DIRECTORY].extents[0],
            journal: self
                .files
                .get(FILE_JOURNAL)
                .map(|j| j.extents.clone())
                .filter(|e| e.len() <= fmt::JOURNAL_EXTENTS_MAX)
                .unwrap_or_default(),
        }
    }

    /// The blocks of superblock generation `generation` of `sup` for disk
    /// `n`: the superblock and the disk directory `entries`, at the slot the
    /// generation selects (offset, block).
    fn superblock_blocks(
        &self,
        sup: &GroupSuper,
        n: u16,
        generation: u64,
        entries: &[DiskEntry],
    ) -> Vec<(u64, AlignedBuf)> {
        let base = SUPER_SLOT_OFFSETS_BYTES[(generation % 2) as usize];
        let dir_blocks = usize::from(sup.disk_count).div_ceil(DISK_ENTRIES_PER_BLOCK);
        let mut writes = Vec::new();
        let mut block = meta::empty_block();
        GroupSuper {
            disk_number: n,
            ..sup.clone()
        }
        .encode_into(&mut block);
        meta::seal(
            &mut block,
            per_disk_id(BlockType::GroupSuper, n, base),
            self.uuid,
            generation,
        );
        writes.push((base, AlignedBuf::from_slice(&block[..])));
        for i in 0..dir_blocks {
            let offset = base + (1 + i as u64) * BLOCK_BYTES as u64;
            let mut block = meta::empty_block();
            fmt::encode_disk_directory(&mut block, i, entries);
            meta::seal(
                &mut block,
                per_disk_id(BlockType::DiskDirectory, n, offset),
                self.uuid,
                generation,
            );
            writes.push((offset, AlignedBuf::from_slice(&block[..])));
        }
        writes
    }

    /// Write a new superblock generation (with the disk directory) to the slot
    /// it selects on every online disk.
    pub(super) fn write_superblocks(&mut self) -> Result<(), GroupError> {
        let sup = self.superblock_for(0);
        let entries = self.disk_entries();
        let to: Vec<u16> = self
            .members
            .numbers()
            .filter(|n| self.member(*n).and_then(Member::writable).is_some())
            .collect();
        self.flush_all_checked()?;
        self.write_generation(&sup, &entries, &to)?;
        self.written_super = Some((sup, entries));
        Ok(())
    }

    /// After the group stopped, before copies on `disks` that missed writes
    /// could be marked stale (or the disks recorded offline): record that
    /// they missed writes, as a generation of the superblocks the group last
    /// wrote with those disks flagged RESYNC_ALL, on every other disk that
    /// is written. The next mount marks every copy on them stale (but one
    /// that is the last readable copy of its extent) and resyncs them from
    /// the others, so that a write which reached some copies and not these
    /// leaves one content. The last generation written, not memory: memory
    /// may be ahead of the disks after a stop. Best effort: if no disk takes
    /// it, nothing is recorded (and the copies may differ until a scrub
    /// repairs them).
    pub(super) fn record_missed_writes(&mut self, disks: &BTreeSet<u16>) {
        let Some((sup, mut entries)) = self.written_super.clone() else {
            return;
        };
        let mut changed = false;
        for e in entries.iter_mut().filter(|e| disks.contains(&e.number)) {
            if matches!(e.state, DiskState::Online | DiskState::Syncing) && !e.resync_all() {
                e.flags |= fmt::DISK_FLAG_RESYNC_ALL;
                // The image it holds: a mount that misses it, and a later
                // one that finds it, must take it back.
                e.synced_generation = self.member(e.number).map_or(0, |m| m.generation) as u32;
                changed = true;
            }
        }
        if !changed {
            return;
        }
        let to: Vec<u16> = self
            .members
            .numbers()
            .filter(|n| !disks.contains(n))
            .filter(|n| self.member(*n).and_then(Member::writable).is_some())
            .collect();
        if self.write_generation(&sup, &entries, &to).is_ok() {
            self.written_super = Some((sup, entries));
        }
    }

    /// Write `sup` and `entries` as a new superblock generation to disks
    /// `to`, durably (at least one copy).
    fn write_generation(
        &mut self,
        sup: &GroupSuper,
        entries: &[DiskEntry],
        to: &[u16],
    ) -> Result<(), GroupError> {
        self.slot_generation += 1;
        let generation = self.slot_generation;
        let mut copies = Vec::new();
        for &n in to {
            copies.push((n, self.superblock_blocks(sup, n, generation, entries)));
        }
        let written: Vec<u16> = copies.iter().map(|(n, _)| *n).collect();
        let item = DurableItem {
            what: format!("superblock generation {generation}"),
            copies,
        };
        self.write_durably(vec![item], "superblocks")?;
        self.record_states(entries);
        for n in written {
            if !self.failed_disks.contains(&n) {
                if let Some(m) = self.member_mut(n) {
                    m.generation = generation;
                }
            }
        }
        Ok(())
    }

    /// Disks just taken OFFLINE on request, with nothing of the group's
    /// left to reach them (`offline_disks` has waited for the data
    /// operations that could, and flushed them): each is given a superblock
    /// generation of its own, written to it and flushed, and records it as
    /// the image it must hold to come back. So any copy of the disk made
    /// before this point — a snapshot, a clone of the LUN, a backup put
    /// back — holds an older generation and is refused at `online`
    /// ([`super::returning::returning_refusal`]): its data may lack writes the
    /// group made to the disk since, which no stale mark records. A disk
    /// that cannot take the stamp is resynced whole when it comes back,
    /// which no image can fool. The other disks' directory records it in
    /// the caller's next superblock generation.
    pub(super) fn stamp_offline(&mut self, disks: &[(u16, DeviceId)]) -> Result<(), GroupError> {
        if disks.is_empty() {
            return Ok(());
        }
        self.slot_generation += 1;
        let generation = self.slot_generation;
        let before: Vec<(u16, u32)> = disks
            .iter()
            .filter_map(|(d, _)| Some((*d, self.member(*d)?.entry.synced_generation)))
            .collect();
        for (d, _) in disks {
            if let Some(m) = self.member_mut(*d) {
                m.entry.synced_generation = generation as u32;
            }
        }
        let entries = self.disk_entries();
        let sup = self.superblock_for(0);
        let mut requests = Vec::new();
        let mut disk_of = Vec::new();
        for (d, device) in disks {
            for (offset_bytes, buf) in self.superblock_blocks(&sup, *d, generation, &entries) {
                disk_of.push(*d);
                requests.push(Request {
                    device: *device,
                    tag: requests.len() as u64,
                    op: Op::Write {
                        offset_bytes,
                        buf,
                        fua: false,
                    },
                });
            }
        }
        let completions = self
            .engine
            .execute_all(requests)
            .map_err(io_err("(engine)"))?;
        let mut failed: BTreeSet<u16> = completions
            .into_iter()
            .zip(disk_of)
            .filter(|(c, _)| c.result.is_err())
            .map(|(_, d)| d)
            .collect();
        let flush: Vec<(u16, DeviceId)> = disks
            .iter()
            .filter(|(d, _)| !failed.contains(d))
            .copied()
            .collect();
        failed.extend(self.flush_devices(flush)?);
        for (d, synced) in before {
            if let Some(m) = self.member_mut(d) {
                if failed.contains(&d) {
                    m.entry.synced_generation = synced;
                    m.entry.flags |= fmt::DISK_FLAG_RESYNC_ALL;
                } else {
                    m.generation = generation;
                }
            }
        }
        Ok(())
    }
}
