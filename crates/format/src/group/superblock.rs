//! Superblock slots: the group superblock (what every disk says about its
//! group) and the disk directory (one entry per member disk) that follows
//! it in each slot.

use std::mem::offset_of;

use uuid::Uuid;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::disk_header::FeatureSet;
use crate::group::extent::{Extent, RawExtent, COPIES_MAX};
use crate::group::features::GROUP_INCOMPAT_KNOWN;
use crate::group::fields::{cast, cast_mut, get_name, put_name};
use crate::layout::{COPY1_OFFSET_BYTES, FRONT_RESERVED_BYTES};
use crate::meta::{invalid, payload, payload_mut, Block, MetaError, PAYLOAD_BYTES};

/// Smallest and largest allocation unit.
pub const AU_BYTES_MIN: u64 = 1 << 20;
pub const AU_BYTES_MAX: u64 = 64 << 20;

/// Per-disk superblock slots (A, B), each [`SUPER_SLOT_BLOCKS`] blocks: the
/// superblock then the disk directory. Writes alternate between them by
/// generation, so a torn slot write leaves the other slot whole. Both sit in the
/// front reserve beside the header copies.
pub const SUPER_SLOT_OFFSETS_BYTES: [u64; 2] = [8 << 10, COPY1_OFFSET_BYTES + (8 << 10)];
pub const SUPER_SLOT_BLOCKS: usize = 16;
/// Disk directory entries per block and the most disks a group can have.
pub const DISK_ENTRIES_PER_BLOCK: usize = PAYLOAD_BYTES / 128;
pub const DISKS_MAX: usize = (SUPER_SLOT_BLOCKS - 1) * DISK_ENTRIES_PER_BLOCK;
const _: () = assert!(
    SUPER_SLOT_OFFSETS_BYTES[1] + (SUPER_SLOT_BLOCKS as u64) * 4096 <= FRONT_RESERVED_BYTES
);

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct RawGroupSuper {
    pub name: [u8; 32],
    pub copies: u8,
    pub reserved0: [u8; 3],
    pub au_bytes: U32,
    pub logical_sector_bytes: U32,
    pub disk_number: U16,
    pub disk_count: U16,
    pub created_unix_seconds: U64,
    pub features_compat: U64,
    pub features_ro_compat: U64,
    pub features_incompat: U64,
    pub file_directory: RawExtent,
    /// The journal's extents (all-zero past the last; all zero in a group
    /// whose superblocks predate the field: its file entry says).
    pub journal: [RawExtent; JOURNAL_EXTENTS_MAX],
    pub reserved_tail: [u8; PAYLOAD_BYTES - 112 - 32 * JOURNAL_EXTENTS_MAX],
}
const _: () = {
    assert!(size_of::<RawGroupSuper>() == PAYLOAD_BYTES);
    assert!(offset_of!(RawGroupSuper, au_bytes) == 36);
    assert!(offset_of!(RawGroupSuper, file_directory) == 80);
    assert!(offset_of!(RawGroupSuper, journal) == 112);
};

/// Most extents a journal has (4 MiB of 1-MiB AUs).
pub const JOURNAL_EXTENTS_MAX: usize = 4;

/// What every disk says about its group. The slot's generation is the envelope's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSuper {
    pub name: String,
    /// Redundancy as a copy count: 1 external, 2 normal, 3 high.
    pub copies: u8,
    pub au_bytes: u32,
    pub logical_sector_bytes: u32,
    /// The disk this slot is on.
    pub disk_number: u16,
    /// Entries in the disk directory (highest disk number + 1).
    pub disk_count: u16,
    pub created_unix_seconds: u64,
    pub features: FeatureSet,
    /// Extent 0 of the file directory: where mounting starts.
    pub file_directory: Extent,
    /// The journal's extents, so that mount finds the journal without
    /// reading its file entry (which a crash may have torn while a
    /// rebalance moved the journal: the journal's own record repairs it).
    /// Empty in superblocks written before the field existed.
    pub journal: Vec<Extent>,
}

impl GroupSuper {
    pub fn encode_into(&self, block: &mut Block) {
        let raw: &mut RawGroupSuper = cast_mut(payload_mut(block));
        raw.zero();
        put_name(&mut raw.name, &self.name);
        raw.copies = self.copies;
        raw.au_bytes = U32::new(self.au_bytes);
        raw.logical_sector_bytes = U32::new(self.logical_sector_bytes);
        raw.disk_number = U16::new(self.disk_number);
        raw.disk_count = U16::new(self.disk_count);
        raw.created_unix_seconds = U64::new(self.created_unix_seconds);
        raw.features_compat = U64::new(self.features.compat);
        raw.features_ro_compat = U64::new(self.features.ro_compat);
        raw.features_incompat = U64::new(self.features.incompat);
        raw.file_directory = self.file_directory.encode();
        for (slot, e) in raw.journal.iter_mut().zip(&self.journal) {
            *slot = e.encode();
        }
    }

    pub fn decode(block: &[u8]) -> Result<Self, MetaError> {
        let raw: &RawGroupSuper = cast(payload(block));
        let au = u64::from(raw.au_bytes.get());
        if !au.is_power_of_two() || !(AU_BYTES_MIN..=AU_BYTES_MAX).contains(&au) {
            return Err(invalid("au_bytes", format!("{au}")));
        }
        if !(1..=COPIES_MAX as u8).contains(&raw.copies) {
            return Err(invalid("copies", format!("{}", raw.copies)));
        }
        let sector = raw.logical_sector_bytes.get();
        if sector != 512 && sector != 4096 {
            return Err(invalid("logical_sector_bytes", format!("{sector}")));
        }
        let disk_count = raw.disk_count.get();
        if usize::from(disk_count) > DISKS_MAX || raw.disk_number.get() >= disk_count {
            return Err(invalid(
                "disk_number",
                format!("disk {} of {disk_count}", raw.disk_number.get()),
            ));
        }
        let unknown = raw.features_incompat.get() & !GROUP_INCOMPAT_KNOWN;
        if unknown != 0 {
            return Err(invalid(
                "features_incompat",
                format!("{unknown:#x} unknown; upgrade Cairn"),
            ));
        }
        let file_directory = Extent::decode(&raw.file_directory)?
            .ok_or_else(|| invalid("file_directory", "missing"))?;
        let mut journal = Vec::new();
        for e in &raw.journal {
            match Extent::decode(e)? {
                Some(e) => journal.push(e),
                None => break,
            }
        }
        Ok(Self {
            name: get_name(&raw.name, "name")?,
            copies: raw.copies,
            au_bytes: raw.au_bytes.get(),
            logical_sector_bytes: sector,
            disk_number: raw.disk_number.get(),
            disk_count,
            created_unix_seconds: raw.created_unix_seconds.get(),
            features: FeatureSet {
                compat: raw.features_compat.get(),
                ro_compat: raw.features_ro_compat.get(),
                incompat: raw.features_incompat.get(),
            },
            file_directory,
            journal,
        })
    }
}

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawDiskEntry {
    pub disk_uuid: [u8; 16],
    pub label: [u8; 32],
    pub failgroup: [u8; 32],
    pub number: U16,
    pub state: u8,
    /// [`DISK_FLAG_HELD`] and future flags.
    pub flags: u8,
    pub failgroup_id: U16,
    /// `offline --drop-after`, in minutes; 0: the group's `disk_repair_time`.
    pub drop_after_minutes: U16,
    pub au_count: U64,
    pub size_bytes: U64,
    pub logical_sector_bytes: U32,
    pub physical_sector_bytes: U32,
    pub created_unix_seconds: U64,
    /// Seconds the disk has been offline while the group was mounted.
    pub offline_seconds: U32,
    /// The low 32 bits of the last superblock generation the disk received
    /// before it went offline (0 while in service).
    pub synced_generation: U32,
}
const _: () = assert!(size_of::<RawDiskEntry>() == 128);

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct RawDiskDirectory {
    pub entries: [RawDiskEntry; DISK_ENTRIES_PER_BLOCK],
    pub reserved_tail: [u8; PAYLOAD_BYTES - DISK_ENTRIES_PER_BLOCK * 128],
}

/// A member disk's state in the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DiskState {
    /// Read and written.
    Online,
    /// Missed writes (failed, absent at mount, or taken offline on request):
    /// never read or written until resynced.
    Offline,
    /// Back, and being resynced: written (so it misses nothing more), never
    /// read until its stale AUs are copied and it is ONLINE again.
    Syncing,
}

impl DiskState {
    fn code(self) -> u8 {
        match self {
            Self::Online => 1,
            Self::Offline => 2,
            Self::Syncing => 3,
        }
    }
    fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Self::Online),
            2 => Some(Self::Offline),
            3 => Some(Self::Syncing),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Online => "ONLINE",
            Self::Offline => "OFFLINE",
            Self::Syncing => "SYNCING",
        }
    }
}

/// The disk was taken offline on request (`cairn group offline`): a mount
/// that finds it leaves it offline until `cairn group online`.
pub const DISK_FLAG_HELD: u8 = 1;
/// The disk went offline after an I/O to it failed (a write, or a flush):
/// it may have lost writes nothing marked (its cache), so when it comes back
/// every copy on it is resynced, not only the stale ones.
pub const DISK_FLAG_RESYNC_ALL: u8 = 2;
/// The disk is being dropped (`cairn group alter --drop`): nothing new is
/// placed on it, a rebalance moves its copies to the disks that stay, and
/// when none is left it leaves the directory (its header then says FORMER).
/// Shown as the state DROPPING.
pub const DISK_FLAG_DROPPING: u8 = 4;
/// Dropped by force (`cairn group drop-disk --force`, or its repair timer
/// ran out): with [`DISK_FLAG_DROPPING`], its copies are never read again
/// and are rebuilt on the other disks from their mirrors.
pub const DISK_FLAG_FORCED: u8 = 8;
const DISK_FLAGS_KNOWN: u8 =
    DISK_FLAG_HELD | DISK_FLAG_RESYNC_ALL | DISK_FLAG_DROPPING | DISK_FLAG_FORCED;

/// One member disk, as the disk directory records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskEntry {
    pub number: u16,
    pub disk_uuid: Uuid,
    pub label: String,
    pub failgroup: String,
    pub failgroup_id: u16,
    pub state: DiskState,
    /// [`DISK_FLAG_HELD`]...
    pub flags: u8,
    /// AUs that fit before the tail header copy (AU 0 counted, reserved ones too).
    pub au_count: u64,
    pub size_bytes: u64,
    pub logical_sector_bytes: u32,
    pub physical_sector_bytes: u32,
    pub created_unix_seconds: u64,
    /// `offline --drop-after`, in minutes (0: the group's `disk_repair_time`).
    pub drop_after_minutes: u16,
    /// Seconds offline while the group was mounted (the repair timer).
    pub offline_seconds: u32,
    /// Low 32 bits of the last superblock generation the disk received
    /// before it went offline: a disk that comes back holding another
    /// generation is an older (or foreign) image of it, and is refused.
    pub synced_generation: u32,
}

impl DiskEntry {
    /// Taken offline on request: stays offline until brought online.
    pub fn held(&self) -> bool {
        self.flags & DISK_FLAG_HELD != 0
    }

    /// Went offline after a failed I/O: resynced whole when it comes back.
    pub fn resync_all(&self) -> bool {
        self.flags & DISK_FLAG_RESYNC_ALL != 0
    }

    /// Being dropped: its copies move off, nothing new lands on it.
    pub fn dropping(&self) -> bool {
        self.flags & DISK_FLAG_DROPPING != 0
    }

    /// Dropped by force: its copies are rebuilt elsewhere, never read.
    pub fn forced(&self) -> bool {
        self.flags & DISK_FLAG_FORCED != 0
    }

    /// The state as listed: DROPPING while a drop is pending, else the
    /// recorded state.
    pub fn shown_state(&self) -> &'static str {
        if self.dropping() {
            "DROPPING"
        } else {
            self.state.as_str()
        }
    }
}

/// Encode the disk directory block `index` (0-based) of a slot.
pub fn encode_disk_directory(block: &mut Block, index: usize, disks: &[DiskEntry]) {
    let raw: &mut RawDiskDirectory = cast_mut(payload_mut(block));
    raw.zero();
    let first = index * DISK_ENTRIES_PER_BLOCK;
    for disk in disks {
        let n = usize::from(disk.number);
        if !(first..first + DISK_ENTRIES_PER_BLOCK).contains(&n) {
            continue;
        }
        let e = &mut raw.entries[n - first];
        e.disk_uuid = *disk.disk_uuid.as_bytes();
        put_name(&mut e.label, &disk.label);
        put_name(&mut e.failgroup, &disk.failgroup);
        e.number = U16::new(disk.number);
        e.state = disk.state.code();
        e.flags = disk.flags;
        e.failgroup_id = U16::new(disk.failgroup_id);
        e.drop_after_minutes = U16::new(disk.drop_after_minutes);
        e.offline_seconds = U32::new(disk.offline_seconds);
        e.synced_generation = U32::new(disk.synced_generation);
        e.au_count = U64::new(disk.au_count);
        e.size_bytes = U64::new(disk.size_bytes);
        e.logical_sector_bytes = U32::new(disk.logical_sector_bytes);
        e.physical_sector_bytes = U32::new(disk.physical_sector_bytes);
        e.created_unix_seconds = U64::new(disk.created_unix_seconds);
    }
}

/// Decode disk directory block `index`: the entries present in it.
pub fn decode_disk_directory(block: &[u8], index: usize) -> Result<Vec<DiskEntry>, MetaError> {
    let raw: &RawDiskDirectory = cast(payload(block));
    let mut out = Vec::new();
    for (slot, e) in raw.entries.iter().enumerate() {
        if e.as_bytes().iter().all(|b| *b == 0) {
            continue;
        }
        let number = index * DISK_ENTRIES_PER_BLOCK + slot;
        if usize::from(e.number.get()) != number {
            return Err(invalid(
                "disk.number",
                format!("{} in slot {number}", e.number.get()),
            ));
        }
        let state = DiskState::from_code(e.state)
            .ok_or_else(|| invalid("disk.state", format!("{}", e.state)))?;
        if e.flags & !DISK_FLAGS_KNOWN != 0 {
            return Err(invalid(
                "disk.flags",
                format!("unknown bits {:#x}", e.flags),
            ));
        }
        out.push(DiskEntry {
            number: e.number.get(),
            disk_uuid: Uuid::from_bytes(e.disk_uuid),
            label: get_name(&e.label, "disk.label")?,
            failgroup: get_name(&e.failgroup, "disk.failgroup")?,
            failgroup_id: e.failgroup_id.get(),
            state,
            flags: e.flags,
            au_count: e.au_count.get(),
            size_bytes: e.size_bytes.get(),
            logical_sector_bytes: e.logical_sector_bytes.get(),
            physical_sector_bytes: e.physical_sector_bytes.get(),
            created_unix_seconds: e.created_unix_seconds.get(),
            drop_after_minutes: e.drop_after_minutes.get(),
            offline_seconds: e.offline_seconds.get(),
            synced_generation: e.synced_generation.get(),
        });
    }
    Ok(out)
}
