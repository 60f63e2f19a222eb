//! Reading superblock slots off disks, without a mounted group: one
//! slot, a disk's membership, the groups a set of disks holds, a disk's
//! newest header.

use std::collections::BTreeMap;

use cairn_format::group::{
    DiskEntry, GroupSuper, DISK_ENTRIES_PER_BLOCK, SUPER_SLOT_BLOCKS, SUPER_SLOT_OFFSETS_BYTES,
};
use cairn_format::meta::{BlockType, BLOCK_BYTES};
use cairn_format::{group as fmt, meta, DiskHeader};
use cairn_io::{DeviceId, IoEngine};
use uuid::Uuid;

use super::block_ids::per_disk_id;
use super::error::{io_err, GroupError};
use crate::header_copies::HeaderScan;

/// A superblock slot read from one disk.
#[derive(Debug, Clone)]
pub(super) struct SlotRead {
    pub(super) generation: u64,
    pub(super) sup: GroupSuper,
    pub(super) entries: Vec<DiskEntry>,
}

pub(super) fn read_slot(
    engine: &mut dyn IoEngine,
    device: DeviceId,
    group: Uuid,
    base: u64,
) -> Option<SlotRead> {
    let buf = engine
        .read_at(device, base, SUPER_SLOT_BLOCKS * BLOCK_BYTES)
        .ok()?;
    let bytes = &buf[..];
    let first = &bytes[..BLOCK_BYTES];
    let disk = {
        // The owner (disk number) is what the slot claims; the self-address check
        // below holds it to the place it was read from.
        let sup = GroupSuper::decode(first).ok()?;
        sup.disk_number
    };
    let generation =
        meta::open(first, per_disk_id(BlockType::GroupSuper, disk, base), group).ok()?;
    let sup = GroupSuper::decode(first).ok()?;
    let dir_blocks = usize::from(sup.disk_count).div_ceil(DISK_ENTRIES_PER_BLOCK);
    let mut entries = Vec::new();
    for i in 0..dir_blocks {
        let offset = base + (1 + i as u64) * BLOCK_BYTES as u64;
        let block = &bytes[(1 + i) * BLOCK_BYTES..(2 + i) * BLOCK_BYTES];
        let g = meta::open(
            block,
            per_disk_id(BlockType::DiskDirectory, disk, offset),
            group,
        )
        .ok()?;
        if g != generation {
            return None;
        }
        entries.extend(fmt::decode_disk_directory(block, i).ok()?);
    }
    Some(SlotRead {
        generation,
        sup,
        entries,
    })
}

/// What a device's own blocks say of the group its label names.
#[derive(Debug, Clone)]
pub struct Membership {
    pub group_uuid: Uuid,
    /// The device's label and disk UUID.
    pub label: String,
    pub disk_uuid: Uuid,
    /// From the device's newest superblock; `None` when it holds none (the
    /// group's create never finished, or its superblocks were destroyed).
    pub group: Option<GroupOnDisk>,
}

/// A group as one member's newest superblock slot describes it.
#[derive(Debug, Clone)]
pub struct GroupOnDisk {
    pub name: String,
    pub copies: u8,
    pub generation: u64,
    /// The whole disk directory.
    pub disks: Vec<DiskEntry>,
}

impl Membership {
    /// This device's entry in the directory, found by its disk UUID.
    pub fn entry(&self) -> Option<&DiskEntry> {
        self.group
            .as_ref()
            .and_then(|g| g.disks.iter().find(|d| d.disk_uuid == self.disk_uuid))
    }
}

/// The group a device's label names, as its own superblocks describe it;
/// `None` when it carries no label or its label names no group.
pub fn membership(engine: &mut dyn IoEngine, device: DeviceId) -> Option<Membership> {
    let scan = HeaderScan::read(engine, device).ok()?;
    let header = scan
        .good()
        .map(|(_, h)| h.header.clone())
        .max_by_key(|h| h.generation)?;
    let group_uuid = header.group_uuid?;
    let best = SUPER_SLOT_OFFSETS_BYTES
        .iter()
        .filter_map(|base| read_slot(engine, device, group_uuid, *base))
        .max_by_key(|s| s.generation);
    Some(Membership {
        group_uuid,
        label: header.label.to_string(),
        disk_uuid: header.disk_uuid,
        group: best.map(|s| GroupOnDisk {
            name: s.sup.name,
            copies: s.sup.copies,
            generation: s.generation,
            disks: s.entries,
        }),
    })
}

/// Whether a superblock slot holds something that is neither a valid slot of
/// `group` nor blank (never written): a torn or damaged slot.
pub(super) fn slot_damaged(
    engine: &mut dyn IoEngine,
    device: DeviceId,
    group: Uuid,
    base: u64,
) -> bool {
    if read_slot(engine, device, group, base).is_some() {
        return false;
    }
    engine
        .read_at(device, base, BLOCK_BYTES)
        .is_ok_and(|b| b.iter().any(|x| *x != 0))
}

/// A device that names a group in its label: its header and best superblock
/// (generation, superblock).
pub type FoundDisk = (DeviceId, DiskHeader, Option<(u64, GroupSuper)>);

/// The groups found on `devices`: (uuid, name, member devices with their best slot).
pub fn identify(engine: &mut dyn IoEngine, devices: &[DeviceId]) -> BTreeMap<Uuid, Vec<FoundDisk>> {
    let mut out: BTreeMap<Uuid, Vec<_>> = BTreeMap::new();
    for &device in devices {
        let Ok(scan) = HeaderScan::read(engine, device) else {
            continue;
        };
        let Some(header) = scan
            .good()
            .map(|(_, h)| h.header.clone())
            .max_by_key(|h| h.generation)
        else {
            continue;
        };
        let Some(group) = header.group_uuid else {
            continue;
        };
        let best = SUPER_SLOT_OFFSETS_BYTES
            .iter()
            .filter_map(|base| read_slot(engine, device, group, *base))
            .max_by_key(|s| s.generation)
            .map(|s| (s.generation, s.sup));
        out.entry(group).or_default().push((device, header, best));
    }
    out
}

/// A device's newest good header and the highest generation any copy
/// holds; refused, saying so, when it carries no Cairn label.
pub(super) fn newest_header(
    engine: &mut dyn IoEngine,
    device: DeviceId,
    what: &str,
) -> Result<(DiskHeader, u64), GroupError> {
    let scan = HeaderScan::read(engine, device).map_err(io_err(what.to_string()))?;
    let header = scan
        .good()
        .map(|(_, h)| h.header.clone())
        .max_by_key(|h| h.generation)
        .ok_or_else(|| {
            GroupError::Invalid(format!("{what} carries no Cairn label; label it first"))
        })?;
    Ok((header, scan.generation_max()))
}
