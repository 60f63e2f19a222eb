//! Disk-group metadata payloads: the raw layouts inside the [`crate::meta`]
//! envelope and the validated domain types built from them.
//!
//! | structure | where | block type |
//! |---|---|---|
//! | group superblock + disk directory | two slots per disk, [`SUPER_SLOT_OFFSETS_BYTES`] | 2, 3 |
//! | allocation table: summary + bitmap | per disk, from [`AT_START_BYTES`] | 4, 5 |
//! | file directory entry (extent map) | file 1, block = file number | 6 |
//! | indirect extent blocks | AUs named by an entry's indirect pointers | 7 |
//! | alias directory | file 4 | 8 |
//! | templates, attributes | files 5, 6 | 9, 10 |
//! | journal header and records | file 3 | 11, 12 |
//!
//! Every record's all-zero value means "free / unused", so a structure nobody
//! wrote reads as empty: that is what keeps group creation on a thin LUN to a
//! few blocks. The byte tables are in `docs/on_disk_format.md`.
//!
//! Decoders validate what they can check without context (ranges, enums,
//! prefix rules) and never panic; relations between structures (an extent on a
//! disk that exists, an AU marked used) are the checker's business.

use std::mem::offset_of;

use uuid::Uuid;
use zerocopy::little_endian::{I64, U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::disk_header::FeatureSet;
use crate::layout::{COPY1_OFFSET_BYTES, FRONT_RESERVED_BYTES};
use crate::meta::{invalid, payload, payload_mut, Block, MetaError, PAYLOAD_BYTES};

/// Most copies of an extent (high redundancy).
pub const COPIES_MAX: usize = 3;
/// A copy slot with this disk number is empty.
pub const NO_DISK: u16 = u16::MAX;
/// Smallest and largest allocation unit.
pub const AU_BYTES_MIN: u64 = 1 << 20;
pub const AU_BYTES_MAX: u64 = 64 << 20;

/// Metadata file numbers. 2 is the disk directory, which lives in the superblock
/// slots of every disk rather than in a file of its own (see [`SuperSlot`]).
pub const FILE_DIRECTORY: u32 = 1;
pub const FILE_DISK_DIRECTORY: u32 = 2;
pub const FILE_JOURNAL: u32 = 3;
pub const FILE_ALIAS_DIRECTORY: u32 = 4;
pub const FILE_TEMPLATES: u32 = 5;
pub const FILE_ATTRIBUTES: u32 = 6;
/// User files are numbered from here; below are metadata files.
pub const FILE_NUMBER_USER_MIN: u32 = 256;

// ---------------------------------------------------------------------------
// Extents

/// One copy of an extent, on disk: AU index and disk number.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawCopy {
    pub au: U32,
    pub disk: U16,
    /// Stale AUs of this copy (bit i: the extent's AU i); see [`Extent::stale`].
    pub stale: U16,
}

/// One extent record, 32 bytes: flags and up to three copies.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawExtent {
    pub flags: U32,
    pub reserved: U32,
    pub copies: [RawCopy; COPIES_MAX],
}
const _: () = assert!(size_of::<RawExtent>() == 32);

/// The extent's AUs have been written or zeroed: reads must go to the disk.
/// Until then the extent reads as zeros without I/O, whatever its AUs hold, so a
/// file never shows an earlier file's data.
pub const EXTENT_INITIALIZED: u32 = 1;
const EXTENT_FLAGS_KNOWN: u32 = EXTENT_INITIALIZED;

/// Where one copy of an extent lives: the first of its AUs on a disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AuAddr {
    pub disk: u16,
    pub au: u32,
}

/// An extent: up to three copies, primary first. Copies after `count` are unused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub copies: [AuAddr; COPIES_MAX],
    pub count: u8,
    pub initialized: bool,
    /// Per copy, which of its AUs are stale (bit i: the extent's AU i): the
    /// copy missed a write while its disk was offline, or a write to it
    /// failed. A stale AU is never read; resync copies it from a good copy
    /// and clears the bit. Kept in each copy's `RawCopy::stale` (an extent
    /// has at most 16 AUs), under [`GROUP_INCOMPAT_STALE_COPIES`].
    pub stale: [u16; COPIES_MAX],
}

impl Extent {
    pub fn new(copies: &[AuAddr], initialized: bool) -> Self {
        assert!(
            (1..=COPIES_MAX).contains(&copies.len()),
            "invariant: an extent has 1..=3 copies"
        );
        let mut slots = [AuAddr {
            disk: NO_DISK,
            au: 0,
        }; COPIES_MAX];
        slots[..copies.len()].copy_from_slice(copies);
        Self {
            copies: slots,
            count: copies.len() as u8,
            initialized,
            stale: [0; COPIES_MAX],
        }
    }

    /// The copies in use, primary first.
    pub fn copies(&self) -> &[AuAddr] {
        &self.copies[..usize::from(self.count)]
    }

    /// Whether copy `slot` has a stale AU among the extent's AUs `aus`
    /// (AU indices inside the extent).
    pub fn stale_in(&self, slot: usize, aus: std::ops::Range<u64>) -> bool {
        self.stale.get(slot).is_some_and(|m| *m & au_mask(aus) != 0)
    }

    /// Whether any copy has a stale AU.
    pub fn any_stale(&self) -> bool {
        self.stale[..usize::from(self.count)]
            .iter()
            .any(|m| *m != 0)
    }

    /// Copy `slot`'s stale mask, limited to the extent's `aus` AUs (bits
    /// past them mean nothing).
    pub fn stale_mask(&self, slot: usize, aus: u64) -> u16 {
        self.stale.get(slot).map_or(0, |m| m & au_mask(0..aus))
    }
}

/// The stale-mask bits of an extent's AUs `aus` (AU indices inside the
/// extent, below 16).
pub fn au_mask(aus: std::ops::Range<u64>) -> u16 {
    let lo = aus.start.min(16);
    let hi = aus.end.min(16);
    if hi <= lo {
        return 0;
    }
    let bits = hi - lo;
    let ones: u32 = if bits >= 16 {
        0xFFFF
    } else {
        (1u32 << bits) - 1
    };
    ((ones << lo) & 0xFFFF) as u16
}

impl Extent {
    fn encode(&self) -> RawExtent {
        let mut raw = RawExtent::new_zeroed();
        raw.flags = U32::new(if self.initialized {
            EXTENT_INITIALIZED
        } else {
            0
        });
        for (slot, copy) in raw.copies.iter_mut().enumerate() {
            let addr = self
                .copies
                .get(slot)
                .filter(|_| slot < usize::from(self.count));
            match addr {
                Some(a) => {
                    copy.au = U32::new(a.au);
                    copy.disk = U16::new(a.disk);
                    copy.stale = U16::new(self.stale[slot]);
                }
                None => copy.disk = U16::new(NO_DISK),
            }
        }
        raw
    }

    /// `None` for an all-zero record (no extent).
    fn decode(raw: &RawExtent) -> Result<Option<Self>, MetaError> {
        if raw.as_bytes().iter().all(|b| *b == 0) {
            return Ok(None);
        }
        let flags = raw.flags.get();
        if flags & !EXTENT_FLAGS_KNOWN != 0 || raw.reserved.get() != 0 {
            return Err(invalid("extent.flags", format!("unknown bits {flags:#x}")));
        }
        let mut copies = Vec::with_capacity(COPIES_MAX);
        let mut stale = [0u16; COPIES_MAX];
        let mut ended = false;
        for copy in &raw.copies {
            let disk = copy.disk.get();
            if disk == NO_DISK {
                ended = true;
                if copy.stale.get() != 0 {
                    return Err(invalid("extent.copies", "stale bits on an empty slot"));
                }
                continue;
            }
            if ended {
                return Err(invalid("extent.copies", "a copy after an empty slot"));
            }
            if copy.au.get() == 0 {
                return Err(invalid("extent.copies", "AU 0 is reserved"));
            }
            stale[copies.len()] = copy.stale.get();
            copies.push(AuAddr {
                disk,
                au: copy.au.get(),
            });
        }
        if copies.is_empty() {
            return Err(invalid("extent.copies", "no copy"));
        }
        let mut extent = Self::new(&copies, flags & EXTENT_INITIALIZED != 0);
        extent.stale = stale;
        Ok(Some(extent))
    }
}

fn encode_extents(out: &mut [RawExtent], extents: &[Extent]) {
    assert!(out.len() >= extents.len(), "invariant: extents fit");
    for (slot, extent) in out.iter_mut().zip(extents) {
        *slot = extent.encode();
    }
}

/// Decode a prefix of `count` present extents; the rest must be zero.
fn decode_extents(
    raw: &[RawExtent],
    count: usize,
    field: &'static str,
) -> Result<Vec<Extent>, MetaError> {
    if count > raw.len() {
        return Err(invalid(
            field,
            format!("{count} extents, room for {}", raw.len()),
        ));
    }
    let mut out = Vec::with_capacity(count);
    for (i, r) in raw.iter().enumerate() {
        match (Extent::decode(r)?, i < count) {
            (Some(e), true) => out.push(e),
            (None, false) => {}
            (None, true) => return Err(invalid(field, format!("extent {i} missing"))),
            (Some(_), false) => return Err(invalid(field, format!("extent {i} beyond the count"))),
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Names stored in fixed fields

pub(crate) fn put_name(out: &mut [u8], name: &str) {
    assert!(name.len() <= out.len(), "invariant: name fits its field");
    out.fill(0);
    out[..name.len()].copy_from_slice(name.as_bytes());
}

/// A zero-padded ASCII name; printable, no interior zero.
pub(crate) fn get_name(raw: &[u8], field: &'static str) -> Result<String, MetaError> {
    let len = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
    if raw[len..].iter().any(|b| *b != 0) {
        return Err(invalid(field, "bytes after the terminating zero"));
    }
    let bytes = &raw[..len];
    if !bytes.iter().all(|b| (0x20..0x7F).contains(b)) {
        return Err(invalid(field, "not printable ASCII"));
    }
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

pub(crate) fn cast<T: FromBytes + KnownLayout + Immutable>(bytes: &[u8]) -> &T {
    T::ref_from_prefix(bytes)
        .expect("invariant: payload layouts fit the payload")
        .0
}

pub(crate) fn cast_mut<T: FromBytes + IntoBytes + KnownLayout>(bytes: &mut [u8]) -> &mut T {
    T::mut_from_prefix(bytes)
        .expect("invariant: payload layouts fit the payload")
        .0
}

// ---------------------------------------------------------------------------
// Superblock slots and the disk directory

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

/// Incompatible group feature: extents may carry stale-copy bits
/// ([`Extent::stale`]), which a reader that ignores them would serve stale
/// data through, and disks may be SYNCING.
pub const GROUP_INCOMPAT_STALE_COPIES: u64 = 1;
/// The incompatible group features this code knows.
pub const GROUP_INCOMPAT_KNOWN: u64 = GROUP_INCOMPAT_STALE_COPIES;

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

// ---------------------------------------------------------------------------
// Allocation table

/// The allocation table starts right after the front reserve.
pub const AT_START_BYTES: u64 = FRONT_RESERVED_BYTES;
/// AUs one bitmap block describes.
pub const AT_BITS_PER_BLOCK: u64 = (PAYLOAD_BYTES as u64) * 8;
/// Bitmap blocks one summary block counts.
pub const AT_COUNTS_PER_SUMMARY: u64 = (PAYLOAD_BYTES as u64) / 4;

/// Where a disk's allocation table lies and which AUs it leaves for data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtLayout {
    pub au_bytes: u64,
    pub au_count: u64,
    pub summary_blocks: u64,
    pub bitmap_blocks: u64,
    /// AUs below this hold the header copies, superblock slots and the table:
    /// never allocated, never marked in the bitmap.
    pub first_data_au: u64,
}

impl AtLayout {
    /// Layout for a device of `size_bytes`; `None` if not one data AU fits.
    pub fn for_disk(size_bytes: u64, au_bytes: u64) -> Option<Self> {
        let tail = crate::layout::HeaderPlacement::for_device(size_bytes)
            .ok()?
            .offsets_bytes[2];
        let au_count = tail / au_bytes;
        let bitmap_blocks = au_count.div_ceil(AT_BITS_PER_BLOCK);
        let summary_blocks = bitmap_blocks.div_ceil(AT_COUNTS_PER_SUMMARY);
        let at_end = AT_START_BYTES + (summary_blocks + bitmap_blocks) * 4096;
        let first_data_au = at_end.div_ceil(au_bytes);
        (first_data_au < au_count).then_some(Self {
            au_bytes,
            au_count,
            summary_blocks,
            bitmap_blocks,
            first_data_au,
        })
    }
    pub fn data_aus(&self) -> u64 {
        self.au_count - self.first_data_au
    }
    pub fn summary_offset_bytes(&self, index: u64) -> u64 {
        assert!(
            index < self.summary_blocks,
            "invariant: summary block in range"
        );
        AT_START_BYTES + index * 4096
    }
    pub fn bitmap_offset_bytes(&self, index: u64) -> u64 {
        assert!(
            index < self.bitmap_blocks,
            "invariant: bitmap block in range"
        );
        AT_START_BYTES + (self.summary_blocks + index) * 4096
    }

    /// Blocks free between the table's end and the first data AU: where
    /// the discard map lives, laid down from the first data AU backwards
    /// so that its place never moves when a resize changes the table.
    pub fn slack_blocks(&self) -> u64 {
        let table_end = AT_START_BYTES + (self.summary_blocks + self.bitmap_blocks) * 4096;
        (self.first_data_au * self.au_bytes).saturating_sub(table_end) / 4096
    }

    /// Whether the whole discard map fits the slack (one block per bitmap
    /// block). A disk whose map does not fit keeps none: every free AU on
    /// it counts as holding data.
    pub fn has_clean_map(&self) -> bool {
        self.slack_blocks() >= self.bitmap_blocks
    }

    /// Where block `index` of the discard map lies (bit i of byte j: AU
    /// `index * AT_BITS_PER_BLOCK + j*8 + i` is free and known to hold
    /// nothing on the device). `index` must be below [`Self::slack_blocks`].
    pub fn clean_offset_bytes(&self, index: u64) -> u64 {
        assert!(
            index < self.slack_blocks(),
            "invariant: discard map block in the slack"
        );
        self.first_data_au * self.au_bytes - (index + 1) * 4096
    }
}

/// Used-AU counts of the bitmap blocks one summary block covers.
pub fn encode_summary(block: &mut Block, counts: &[u32]) {
    assert!(
        counts.len() as u64 <= AT_COUNTS_PER_SUMMARY,
        "invariant: counts fit"
    );
    let out = payload_mut(block);
    out.fill(0);
    for (i, c) in counts.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&c.to_le_bytes());
    }
}

pub fn decode_summary(block: &[u8]) -> Vec<u32> {
    payload(block)
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A bitmap block's payload is the bitmap itself, bit i of byte j = AU j*8+i.
pub fn encode_bitmap(block: &mut Block, bits: &[u8]) {
    assert_eq!(bits.len(), PAYLOAD_BYTES, "invariant: a whole bitmap block");
    payload_mut(block).copy_from_slice(bits);
}

pub fn decode_bitmap(block: &[u8]) -> Vec<u8> {
    payload(block).to_vec()
}

// ---------------------------------------------------------------------------
// File directory entries and indirect extents

pub const DIRECT_EXTENTS: usize = 106;
pub const INDIRECT_POINTERS: usize = 16;
pub const EXTENTS_PER_INDIRECT_BLOCK: usize = PAYLOAD_BYTES / 32;
pub const TEMPLATE_NAME_LEN_MAX: usize = 30;

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct RawFileEntry {
    pub file_number: U32,
    pub incarnation: U32,
    pub state: u8,
    pub copies: u8,
    pub striping: u8,
    pub flags: u8,
    pub indirect_count: U16,
    pub reserved0: U16,
    pub size_bytes: U64,
    pub extent_count: U64,
    pub target_bytes: U64,
    pub created_unix_seconds: U64,
    pub modified_unix_seconds: U64,
    pub template: [u8; 32],
    /// All zero in an entry without attributes (every entry written before
    /// [`GROUP_RO_COMPAT_FILE_ATTRS`]).
    pub attrs: RawFileAttrs,
    pub indirect: [RawExtent; INDIRECT_POINTERS],
    pub direct: [RawExtent; DIRECT_EXTENTS],
}
/// A file's POSIX attributes, in what were the entry's 40 reserved bytes.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawFileAttrs {
    pub mode: U32,
    pub uid: U32,
    pub gid: U32,
    /// [`FILE_ATTRS_PRESENT`]; no other bit is defined.
    pub flags: U32,
    pub mtime_ns: I64,
    pub ctime_ns: I64,
    pub byte_size: U64,
}
const _: () = assert!(size_of::<RawFileAttrs>() == 40);

/// In [`RawFileAttrs::flags`]: the attributes are there.
pub const FILE_ATTRS_PRESENT: u32 = 1;
/// Permission bits a file or directory may carry (setuid, setgid, sticky,
/// and rwx for owner, group, others).
pub const MODE_BITS: u32 = 0o7777;

/// Ro-compatible group feature: file entries may carry [`FileAttrs`] and
/// directory names [`DirAttrs`] in bytes that were reserved. A Cairn that
/// does not know it must not rewrite an entry (it would zero them), so it
/// may mount the group only read-only.
pub const GROUP_RO_COMPAT_FILE_ATTRS: u64 = 1;
/// Ro-compatible group feature: disks may carry a discard map
/// ([`AtLayout::clean_offset_bytes`]) that marks free AUs known to hold
/// nothing on the array. A Cairn that does not know it would hand such an
/// AU out and write it without clearing its mark, and the map would then
/// call an AU that holds data returned: it may mount the group only
/// read-only.
pub const GROUP_RO_COMPAT_CLEAN_MAP: u64 = 2;
/// Ro-compatible group feature: whoever writes the group keeps a heartbeat
/// on its disks ([`crate::heartbeat`]) and checks the others' before it
/// mounts. A Cairn that does not know it would mount a group another host
/// is writing, and both would write: it may mount the group only
/// read-only.
pub const GROUP_RO_COMPAT_MULTIHOST: u64 = 4;
/// The ro-compatible group features this code knows.
pub const GROUP_RO_COMPAT_KNOWN: u64 =
    GROUP_RO_COMPAT_FILE_ATTRS | GROUP_RO_COMPAT_CLEAN_MAP | GROUP_RO_COMPAT_MULTIHOST;

/// A file's POSIX attributes: what `stat` says of it through the file
/// system. The byte size is the file's length in bytes; the entry's
/// `size_bytes` stays whole sectors (what the data path reads and writes),
/// at least `byte_size` and less than a sector more. atime is not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileAttrs {
    /// Permission bits ([`MODE_BITS`]).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub byte_size: u64,
}

impl FileAttrs {
    /// What a file that has none shows: 0644, owned by root, its byte size
    /// its sectors, both times its modification time.
    pub fn default_for(size_bytes: u64, modified_unix_seconds: u64) -> Self {
        let ns = i64::try_from(modified_unix_seconds)
            .unwrap_or(i64::MAX)
            .saturating_mul(1_000_000_000);
        Self {
            mode: 0o644,
            uid: 0,
            gid: 0,
            mtime_ns: ns,
            ctime_ns: ns,
            byte_size: size_bytes,
        }
    }

    fn encode(attrs: Option<&Self>) -> RawFileAttrs {
        let mut raw = RawFileAttrs::new_zeroed();
        if let Some(a) = attrs {
            raw.mode = U32::new(a.mode);
            raw.uid = U32::new(a.uid);
            raw.gid = U32::new(a.gid);
            raw.flags = U32::new(FILE_ATTRS_PRESENT);
            raw.mtime_ns = I64::new(a.mtime_ns);
            raw.ctime_ns = I64::new(a.ctime_ns);
            raw.byte_size = U64::new(a.byte_size);
        }
        raw
    }

    fn decode(raw: &RawFileAttrs, size_bytes: u64) -> Result<Option<Self>, MetaError> {
        let flags = raw.flags.get();
        if flags & !FILE_ATTRS_PRESENT != 0 {
            return Err(invalid("attrs.flags", format!("{flags:#x}")));
        }
        if flags & FILE_ATTRS_PRESENT == 0 {
            if raw.as_bytes().iter().any(|b| *b != 0) {
                return Err(invalid("attrs", "set without the present flag"));
            }
            return Ok(None);
        }
        let mode = raw.mode.get();
        if mode & !MODE_BITS != 0 {
            return Err(invalid("attrs.mode", format!("{mode:#o}")));
        }
        let byte_size = raw.byte_size.get();
        if byte_size > size_bytes {
            return Err(invalid(
                "attrs.byte_size",
                format!("{byte_size}, past the file's {size_bytes} bytes"),
            ));
        }
        Ok(Some(Self {
            mode,
            uid: raw.uid.get(),
            gid: raw.gid.get(),
            mtime_ns: raw.mtime_ns.get(),
            ctime_ns: raw.ctime_ns.get(),
            byte_size,
        }))
    }
}

/// A directory's POSIX attributes, in its name record's reserved bytes
/// (under [`GROUP_RO_COMPAT_FILE_ATTRS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DirAttrs {
    /// Permission bits ([`MODE_BITS`]).
    pub mode: u16,
    pub uid: u32,
    pub gid: u32,
}

impl Default for DirAttrs {
    /// What a directory that has none shows: 0755, owned by root.
    fn default() -> Self {
        Self {
            mode: 0o755,
            uid: 0,
            gid: 0,
        }
    }
}

/// In a name record's `mode`: the directory attributes are there.
const DIR_ATTRS_PRESENT: u16 = 0x8000;

const _: () = {
    assert!(size_of::<RawFileEntry>() == PAYLOAD_BYTES);
    assert!(offset_of!(RawFileEntry, attrs) == 88);
    assert!(offset_of!(RawFileEntry, size_bytes) == 16);
    assert!(offset_of!(RawFileEntry, template) == 56);
    assert!(offset_of!(RawFileEntry, indirect) == 128);
    assert!(offset_of!(RawFileEntry, direct) == 640);
};

/// A file's life cycle. Creating and Deleting are continuing operations: a mount
/// that finds one finishes it (deleting) or undoes it (creating).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileState {
    Active,
    /// Being created: not yet named, extents being allocated.
    Creating,
    /// Being resized to `target_bytes`: extents past what it needs are being
    /// allocated (grow) or freed (shrink).
    Resizing,
    /// Names removed, extents being freed.
    Deleting,
}

impl FileState {
    fn code(self) -> u8 {
        match self {
            Self::Active => 1,
            Self::Creating => 2,
            Self::Resizing => 3,
            Self::Deleting => 4,
        }
    }
    fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => Self::Active,
            2 => Self::Creating,
            3 => Self::Resizing,
            4 => Self::Deleting,
            _ => return None,
        })
    }
}

/// Coarse (one AU per stripe) or fine (128 KiB across 8 AUs) striping.
pub const STRIPING_COARSE: u8 = 1;
pub const STRIPING_FINE: u8 = 2;

/// A file directory entry: attributes, the direct extents and the pointers to
/// indirect extent AUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    pub number: u32,
    /// Distinguishes files that reuse a number; indirect blocks carry it.
    pub incarnation: u32,
    pub state: FileState,
    pub copies: u8,
    pub striping: u8,
    pub size_bytes: u64,
    /// Extents allocated (may exceed what `size_bytes` needs while resizing).
    pub extent_count: u64,
    /// The size a continuing create or resize is heading for.
    pub target_bytes: u64,
    pub created_unix_seconds: u64,
    pub modified_unix_seconds: u64,
    pub template: String,
    /// POSIX attributes (`None`: never set; shown as defaults).
    pub attrs: Option<FileAttrs>,
    /// The first `min(extent_count, DIRECT_EXTENTS)` extents.
    pub direct: Vec<Extent>,
    /// Indirect extent AUs, each holding AU/4 KiB indirect blocks.
    pub indirect: Vec<Extent>,
}

impl FileEntry {
    pub fn encode_into(&self, block: &mut Block) {
        assert!(self.direct.len() <= DIRECT_EXTENTS, "invariant: direct fit");
        assert!(
            self.indirect.len() <= INDIRECT_POINTERS,
            "invariant: indirect fit"
        );
        assert!(
            self.template.len() <= TEMPLATE_NAME_LEN_MAX,
            "invariant: template fits"
        );
        let raw: &mut RawFileEntry = cast_mut(payload_mut(block));
        raw.zero();
        raw.file_number = U32::new(self.number);
        raw.incarnation = U32::new(self.incarnation);
        raw.state = self.state.code();
        raw.copies = self.copies;
        raw.striping = self.striping;
        raw.indirect_count = U16::new(self.indirect.len() as u16);
        raw.size_bytes = U64::new(self.size_bytes);
        raw.extent_count = U64::new(self.extent_count);
        raw.target_bytes = U64::new(self.target_bytes);
        raw.created_unix_seconds = U64::new(self.created_unix_seconds);
        raw.modified_unix_seconds = U64::new(self.modified_unix_seconds);
        put_name(&mut raw.template, &self.template);
        raw.attrs = FileAttrs::encode(self.attrs.as_ref());
        encode_extents(&mut raw.indirect, &self.indirect);
        encode_extents(&mut raw.direct, &self.direct);
    }

    /// Decode the entry of file `number`; `None` for a free (all-zero) entry.
    pub fn decode(block: &[u8], number: u32) -> Result<Option<Self>, MetaError> {
        let raw: &RawFileEntry = cast(payload(block));
        if raw.as_bytes().iter().all(|b| *b == 0) {
            return Ok(None);
        }
        if raw.file_number.get() != number {
            return Err(invalid(
                "file_number",
                format!("{} in entry {number}", raw.file_number.get()),
            ));
        }
        let state = FileState::from_code(raw.state)
            .ok_or_else(|| invalid("state", format!("{}", raw.state)))?;
        if !(1..=COPIES_MAX as u8).contains(&raw.copies) {
            return Err(invalid("copies", format!("{}", raw.copies)));
        }
        if raw.striping != STRIPING_COARSE && raw.striping != STRIPING_FINE {
            return Err(invalid("striping", format!("{}", raw.striping)));
        }
        let extent_count = raw.extent_count.get();
        let direct_count = extent_count.min(DIRECT_EXTENTS as u64) as usize;
        let direct = decode_extents(&raw.direct, direct_count, "direct")?;
        let indirect = decode_extents(
            &raw.indirect,
            usize::from(raw.indirect_count.get()),
            "indirect",
        )?;
        let entry = Self {
            number,
            incarnation: raw.incarnation.get(),
            state,
            copies: raw.copies,
            striping: raw.striping,
            size_bytes: raw.size_bytes.get(),
            extent_count,
            target_bytes: raw.target_bytes.get(),
            created_unix_seconds: raw.created_unix_seconds.get(),
            modified_unix_seconds: raw.modified_unix_seconds.get(),
            template: get_name(&raw.template, "template").and_then(|t| {
                if t.len() > TEMPLATE_NAME_LEN_MAX {
                    Err(invalid(
                        "template",
                        format!("{} bytes; at most {TEMPLATE_NAME_LEN_MAX}", t.len()),
                    ))
                } else {
                    Ok(t)
                }
            })?,
            attrs: FileAttrs::decode(&raw.attrs, raw.size_bytes.get())?,
            direct,
            indirect,
        };
        if entry
            .direct
            .iter()
            .chain(&entry.indirect)
            .any(|e| usize::from(e.count) != usize::from(entry.copies))
        {
            return Err(invalid(
                "extents",
                format!(
                    "copy count differs from the file's ({} copies): {:?}",
                    entry.copies,
                    entry.direct.iter().map(|e| e.count).collect::<Vec<_>>()
                ),
            ));
        }
        Ok(Some(entry))
    }
}

/// Encode an indirect block holding `extents` (at most [`EXTENTS_PER_INDIRECT_BLOCK`]).
pub fn encode_indirect(block: &mut Block, extents: &[Extent]) {
    let raw: &mut [RawExtent; EXTENTS_PER_INDIRECT_BLOCK] = cast_mut(payload_mut(block));
    raw.zero();
    encode_extents(raw, extents);
}

/// Decode the first `count` extents of an indirect block; the rest must be zero.
pub fn decode_indirect(block: &[u8], count: usize) -> Result<Vec<Extent>, MetaError> {
    let raw: &[RawExtent; EXTENTS_PER_INDIRECT_BLOCK] = cast(payload(block));
    decode_extents(raw, count, "indirect block")
}

// ---------------------------------------------------------------------------
// Alias directory

pub const ALIAS_NAME_LEN_MAX: usize = 96;
pub const ALIASES_PER_BLOCK: usize = PAYLOAD_BYTES / 128;

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawAlias {
    pub parent: U32,
    pub kind: u8,
    pub name_len: u8,
    /// A directory's permission bits, with `DIR_ATTRS_PRESENT` (0x8000)
    /// when its attributes are there; zero otherwise.
    pub mode: U16,
    pub file_number: U32,
    pub file_incarnation: U32,
    pub created_unix_seconds: U64,
    pub name: [u8; ALIAS_NAME_LEN_MAX],
    /// A directory's owner, when `mode` says its attributes are there.
    pub uid: U32,
    pub gid: U32,
}
const _: () = assert!(size_of::<RawAlias>() == 128);

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct RawAliasBlock {
    pub records: [RawAlias; ALIASES_PER_BLOCK],
    pub reserved_tail: [u8; PAYLOAD_BYTES - ALIASES_PER_BLOCK * 128],
}

/// What a name in the alias directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AliasKind {
    Directory,
    /// The name a file was created with; removing it deletes the file.
    File,
    /// Another name for a file (`mkalias`).
    Alias,
}

impl AliasKind {
    fn code(self) -> u8 {
        match self {
            Self::Directory => 1,
            Self::File => 2,
            Self::Alias => 3,
        }
    }
    fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => Self::Directory,
            2 => Self::File,
            3 => Self::Alias,
            _ => return None,
        })
    }
}

/// One name. Its id is its record position + 1; id 0 is the root directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasRecord {
    pub id: u32,
    pub parent: u32,
    pub kind: AliasKind,
    pub name: String,
    pub file_number: u32,
    pub file_incarnation: u32,
    pub created_unix_seconds: u64,
    /// A directory's attributes (`None`: never set, or not a directory).
    pub dir_attrs: Option<DirAttrs>,
}

/// Encode alias block `index` from the records whose ids fall in it.
pub fn encode_alias_block(block: &mut Block, index: u64, records: &[&AliasRecord]) {
    let raw: &mut RawAliasBlock = cast_mut(payload_mut(block));
    raw.zero();
    let first = index * ALIASES_PER_BLOCK as u64 + 1;
    for r in records {
        let slot = u64::from(r.id)
            .checked_sub(first)
            .filter(|s| *s < ALIASES_PER_BLOCK as u64)
            .expect("invariant: alias record belongs to this block") as usize;
        assert!(r.name.len() <= ALIAS_NAME_LEN_MAX, "invariant: name fits");
        let out = &mut raw.records[slot];
        out.parent = U32::new(r.parent);
        out.kind = r.kind.code();
        out.name_len = r.name.len() as u8;
        out.file_number = U32::new(r.file_number);
        out.file_incarnation = U32::new(r.file_incarnation);
        out.created_unix_seconds = U64::new(r.created_unix_seconds);
        put_name(&mut out.name, &r.name);
        if let Some(a) = r.dir_attrs.filter(|_| r.kind == AliasKind::Directory) {
            out.mode = U16::new(DIR_ATTRS_PRESENT | (a.mode & MODE_BITS as u16));
            out.uid = U32::new(a.uid);
            out.gid = U32::new(a.gid);
        }
    }
}

pub fn decode_alias_block(block: &[u8], index: u64) -> Result<Vec<AliasRecord>, MetaError> {
    let raw: &RawAliasBlock = cast(payload(block));
    let mut out = Vec::new();
    for (slot, r) in raw.records.iter().enumerate() {
        if r.as_bytes().iter().all(|b| *b == 0) {
            continue;
        }
        let kind = AliasKind::from_code(r.kind)
            .ok_or_else(|| invalid("alias.kind", format!("{}", r.kind)))?;
        let name = get_name(&r.name, "alias.name")?;
        if name.is_empty() || name.len() != usize::from(r.name_len) {
            return Err(invalid("alias.name", "length does not match"));
        }
        let id = index * ALIASES_PER_BLOCK as u64 + slot as u64 + 1;
        let mode = r.mode.get();
        let dir_attrs = if mode & DIR_ATTRS_PRESENT != 0 {
            if kind != AliasKind::Directory
                || u32::from(mode & !DIR_ATTRS_PRESENT) & !MODE_BITS != 0
            {
                return Err(invalid("alias.mode", format!("{mode:#o}")));
            }
            Some(DirAttrs {
                mode: mode & !DIR_ATTRS_PRESENT,
                uid: r.uid.get(),
                gid: r.gid.get(),
            })
        } else if mode != 0 || r.uid.get() != 0 || r.gid.get() != 0 {
            return Err(invalid("alias.mode", "owner set without the present flag"));
        } else {
            None
        };
        out.push(AliasRecord {
            id: u32::try_from(id).map_err(|_| invalid("alias.id", "beyond u32"))?,
            parent: r.parent.get(),
            kind,
            name,
            file_number: r.file_number.get(),
            file_incarnation: r.file_incarnation.get(),
            created_unix_seconds: r.created_unix_seconds.get(),
            dir_attrs,
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Templates and attributes

pub const TEMPLATES_PER_BLOCK: usize = PAYLOAD_BYTES / 64;

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawTemplate {
    pub name: [u8; 32],
    pub copies: u8,
    pub striping: u8,
    pub reserved: [u8; 30],
}
const _: () = assert!(size_of::<RawTemplate>() == 64);

/// Redundancy and striping for a type of file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Template {
    pub name: String,
    /// 0: the group's redundancy; else a copy count.
    pub copies: u8,
    pub striping: u8,
}

pub fn encode_templates(block: &mut Block, templates: &[Template]) {
    assert!(
        templates.len() <= TEMPLATES_PER_BLOCK,
        "invariant: templates fit"
    );
    let raw: &mut [RawTemplate; TEMPLATES_PER_BLOCK] = cast_mut(payload_mut(block));
    raw.zero();
    for (out, t) in raw.iter_mut().zip(templates) {
        put_name(&mut out.name, &t.name);
        out.copies = t.copies;
        out.striping = t.striping;
    }
}

pub fn decode_templates(block: &[u8]) -> Result<Vec<Template>, MetaError> {
    let raw: &[RawTemplate; TEMPLATES_PER_BLOCK] = cast(payload(block));
    let mut out = Vec::new();
    for r in raw.iter() {
        if r.as_bytes().iter().all(|b| *b == 0) {
            continue;
        }
        if usize::from(r.copies) > COPIES_MAX {
            return Err(invalid("template.copies", format!("{}", r.copies)));
        }
        if r.striping != STRIPING_COARSE && r.striping != STRIPING_FINE {
            return Err(invalid("template.striping", format!("{}", r.striping)));
        }
        out.push(Template {
            name: get_name(&r.name, "template.name")?,
            copies: r.copies,
            striping: r.striping,
        });
    }
    Ok(out)
}

pub const ATTRIBUTES_PER_BLOCK: usize = PAYLOAD_BYTES / 128;

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawAttribute {
    pub name: [u8; 32],
    pub value: [u8; 96],
}

pub fn encode_attributes(block: &mut Block, attributes: &[(String, String)]) {
    assert!(
        attributes.len() <= ATTRIBUTES_PER_BLOCK,
        "invariant: attributes fit"
    );
    let raw: &mut [RawAttribute; ATTRIBUTES_PER_BLOCK] = cast_mut(payload_mut(block));
    raw.zero();
    for (out, (name, value)) in raw.iter_mut().zip(attributes) {
        put_name(&mut out.name, name);
        put_name(&mut out.value, value);
    }
}

pub fn decode_attributes(block: &[u8]) -> Result<Vec<(String, String)>, MetaError> {
    let raw: &[RawAttribute; ATTRIBUTES_PER_BLOCK] = cast(payload(block));
    raw.iter()
        .filter(|r| r.as_bytes().iter().any(|b| *b != 0))
        .map(|r| {
            Ok((
                get_name(&r.name, "attribute.name")?,
                get_name(&r.value, "attribute.value")?,
            ))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Journal

/// The journal file's first two blocks are alternating headers; records follow.
pub const JOURNAL_HEADER_BLOCKS: u64 = 2;
pub const JOURNAL_TARGETS_MAX: usize = (PAYLOAD_BYTES - 32) / 16;

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct RawJournalHeader {
    pub header_generation: U64,
    /// The sequence number the first record after the header must carry.
    pub next_seq: U64,
    pub ring_blocks: U64,
    pub reserved: [u8; PAYLOAD_BYTES - 24],
}

/// Where replay starts: the record at the ring's first block with `next_seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalHeader {
    pub header_generation: u64,
    pub next_seq: u64,
    pub ring_blocks: u64,
}

impl JournalHeader {
    pub fn encode_into(&self, block: &mut Block) {
        let raw: &mut RawJournalHeader = cast_mut(payload_mut(block));
        raw.zero();
        raw.header_generation = U64::new(self.header_generation);
        raw.next_seq = U64::new(self.next_seq);
        raw.ring_blocks = U64::new(self.ring_blocks);
    }
    pub fn decode(block: &[u8]) -> Result<Self, MetaError> {
        let raw: &RawJournalHeader = cast(payload(block));
        if raw.next_seq.get() == 0 {
            return Err(invalid("next_seq", "0"));
        }
        Ok(Self {
            header_generation: raw.header_generation.get(),
            next_seq: raw.next_seq.get(),
            ring_blocks: raw.ring_blocks.get(),
        })
    }
}

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawTarget {
    pub image: U16,
    pub disk: U16,
    pub reserved: U32,
    pub offset_bytes: U64,
}

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct RawJournalRecord {
    pub seq: U64,
    pub prev_checksum: U32,
    pub image_count: U16,
    pub target_count: U16,
    pub images_crc: U32,
    pub reserved: [u8; 12],
    pub targets: [RawTarget; JOURNAL_TARGETS_MAX],
    pub reserved_tail: [u8; PAYLOAD_BYTES - 32 - JOURNAL_TARGETS_MAX * 16],
}
const _: () = assert!(size_of::<RawJournalRecord>() == PAYLOAD_BYTES);

/// Where one image of a journal record goes: a byte offset on a disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalTarget {
    pub image: u16,
    pub disk: u16,
    pub offset_bytes: u64,
}

/// A record header: the images that follow it in the ring and where each goes
/// (one target per copy). The record is whole only if `images_crc` matches the
/// images read after it; it chains to the previous record by its checksum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalRecord {
    pub seq: u64,
    pub prev_checksum: u32,
    pub image_count: u16,
    pub images_crc: u32,
    pub targets: Vec<JournalTarget>,
}

impl JournalRecord {
    pub fn encode_into(&self, block: &mut Block) {
        assert!(
            self.targets.len() <= JOURNAL_TARGETS_MAX,
            "invariant: targets fit"
        );
        let raw: &mut RawJournalRecord = cast_mut(payload_mut(block));
        raw.zero();
        raw.seq = U64::new(self.seq);
        raw.prev_checksum = U32::new(self.prev_checksum);
        raw.image_count = U16::new(self.image_count);
        raw.target_count = U16::new(self.targets.len() as u16);
        raw.images_crc = U32::new(self.images_crc);
        for (out, t) in raw.targets.iter_mut().zip(&self.targets) {
            out.image = U16::new(t.image);
            out.disk = U16::new(t.disk);
            out.offset_bytes = U64::new(t.offset_bytes);
        }
    }
    pub fn decode(block: &[u8]) -> Result<Self, MetaError> {
        let raw: &RawJournalRecord = cast(payload(block));
        let target_count = usize::from(raw.target_count.get());
        if target_count > JOURNAL_TARGETS_MAX {
            return Err(invalid("target_count", format!("{target_count}")));
        }
        let image_count = raw.image_count.get();
        let targets: Vec<JournalTarget> = raw.targets[..target_count]
            .iter()
            .map(|t| JournalTarget {
                image: t.image.get(),
                disk: t.disk.get(),
                offset_bytes: t.offset_bytes.get(),
            })
            .collect();
        if let Some(t) = targets.iter().find(|t| t.image >= image_count) {
            return Err(invalid(
                "target.image",
                format!("{} of {image_count}", t.image),
            ));
        }
        Ok(Self {
            seq: raw.seq.get(),
            prev_checksum: raw.prev_checksum.get(),
            image_count,
            images_crc: raw.images_crc.get(),
            targets,
        })
    }
}

/// The images checksum: crc32c over the images in order.
pub fn images_crc(images: &[&Block]) -> u32 {
    images
        .iter()
        .fold(0, |crc, image| crc32c::crc32c_append(crc, image.as_slice()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::meta::{empty_block, open, seal, BlockId, BlockType};

    fn extent(disks: &[u16], au: u32) -> Extent {
        let copies: Vec<AuAddr> = disks.iter().map(|d| AuAddr { disk: *d, au }).collect();
        Extent::new(&copies, au.is_multiple_of(2))
    }

    #[test]
    fn file_entry_round_trips_through_a_sealed_block() {
        let entry = FileEntry {
            number: 300,
            incarnation: 7,
            state: FileState::Active,
            copies: 2,
            striping: STRIPING_FINE,
            size_bytes: 123 << 20,
            extent_count: 200,
            target_bytes: 0,
            created_unix_seconds: 1,
            modified_unix_seconds: 2,
            template: "DATAFILE".into(),
            attrs: None,
            direct: (0..DIRECT_EXTENTS as u32)
                .map(|i| extent(&[0, 1], 10 + i))
                .collect(),
            indirect: vec![extent(&[1, 0], 99)],
        };
        let mut block = empty_block();
        entry.encode_into(&mut block);
        let id = BlockId {
            block_type: BlockType::FileEntry,
            owner: FILE_DIRECTORY,
            owner_tag: 0,
            index: 300,
        };
        seal(&mut block, id, Uuid::nil(), 5);
        assert_eq!(open(block.as_slice(), id, Uuid::nil()), Ok(5));
        assert_eq!(FileEntry::decode(block.as_slice(), 300), Ok(Some(entry)));
        assert!(FileEntry::decode(block.as_slice(), 301).is_err());
        assert_eq!(FileEntry::decode(empty_block().as_slice(), 3), Ok(None));
    }

    #[test]
    fn file_and_directory_attributes_round_trip_and_garbage_is_refused() {
        let mut entry = FileEntry {
            number: 300,
            incarnation: 7,
            state: FileState::Active,
            copies: 1,
            striping: STRIPING_COARSE,
            size_bytes: 8192,
            extent_count: 0,
            target_bytes: 0,
            created_unix_seconds: 1,
            modified_unix_seconds: 2,
            template: "DEFAULT".into(),
            attrs: Some(FileAttrs {
                mode: 0o4640,
                uid: 26,
                gid: 27,
                mtime_ns: 1_700_000_000_123_456_789,
                ctime_ns: -5,
                byte_size: 5000,
            }),
            direct: Vec::new(),
            indirect: Vec::new(),
        };
        let mut block = empty_block();
        entry.encode_into(&mut block);
        assert_eq!(
            FileEntry::decode(block.as_slice(), 300),
            Ok(Some(entry.clone()))
        );
        let at = 64 + offset_of!(RawFileEntry, attrs);
        // A byte size past the sectors, a mode beyond the permission bits,
        // an unknown flag, attributes without the flag: refused.
        for (offset, value) in [(32usize, 8193u64), (0, 0o10000), (12, 3)] {
            let mut bad = block.clone();
            bad[at + offset..at + offset + 8].copy_from_slice(&value.to_le_bytes());
            if offset != 32 {
                // Keep the neighbouring field as it was.
                bad[at + offset + 4..at + offset + 8]
                    .copy_from_slice(&block[at + offset + 4..at + offset + 8]);
            }
            assert!(
                FileEntry::decode(bad.as_slice(), 300).is_err(),
                "field at {offset} = {value}"
            );
        }
        entry.attrs = None;
        entry.encode_into(&mut block);
        assert!(block[at..at + 40].iter().all(|b| *b == 0));
        block[at + 4] = 1; // a uid without the present flag
        assert!(FileEntry::decode(block.as_slice(), 300).is_err());

        let dir = AliasRecord {
            id: 1,
            parent: 0,
            kind: AliasKind::Directory,
            name: "pg".into(),
            file_number: 0,
            file_incarnation: 0,
            created_unix_seconds: 3,
            dir_attrs: Some(DirAttrs {
                mode: 0o1777,
                uid: 26,
                gid: 0,
            }),
        };
        let mut block = empty_block();
        encode_alias_block(&mut block, 0, &[&dir]);
        assert_eq!(decode_alias_block(block.as_slice(), 0), Ok(vec![dir]));
        // Directory attributes on a file's name are refused.
        let at = 64 + offset_of!(RawAlias, kind);
        block[at] = AliasKind::File.code();
        assert!(decode_alias_block(block.as_slice(), 0).is_err());
    }

    /// Found by fuzzing: a template name longer than the encoder allows was
    /// accepted, and re-encoding the entry then panicked.
    #[test]
    fn a_template_name_past_the_limit_is_refused() {
        let mut block = empty_block();
        FileEntry {
            number: 300,
            incarnation: 1,
            state: FileState::Active,
            copies: 1,
            striping: STRIPING_COARSE,
            size_bytes: 0,
            extent_count: 0,
            target_bytes: 0,
            created_unix_seconds: 0,
            modified_unix_seconds: 0,
            template: "T".into(),
            attrs: None,
            direct: Vec::new(),
            indirect: Vec::new(),
        }
        .encode_into(&mut block);
        let template_at = 64 + offset_of!(RawFileEntry, template);
        block[template_at..template_at + 32].fill(b'X');
        assert!(FileEntry::decode(block.as_slice(), 300).is_err());
    }

    #[test]
    fn extent_rules_are_enforced() {
        let mut raw = extent(&[1, 2], 4).encode();
        assert!(Extent::decode(&raw).unwrap().is_some());
        raw.copies[0].disk = U16::new(NO_DISK);
        assert!(Extent::decode(&raw).is_err(), "a copy after an empty slot");
        let mut raw = extent(&[1], 4).encode();
        raw.copies[0].au = U32::new(0);
        assert!(Extent::decode(&raw).is_err(), "AU 0");
        let mut raw = extent(&[1], 4).encode();
        raw.flags = U32::new(0x80);
        assert!(Extent::decode(&raw).is_err(), "unknown flag");
    }

    #[test]
    fn superblock_and_directory_round_trip() {
        let sup = GroupSuper {
            name: "DATA".into(),
            copies: 2,
            au_bytes: 4 << 20,
            logical_sector_bytes: 512,
            disk_number: 1,
            disk_count: 40,
            created_unix_seconds: 9,
            features: FeatureSet::default(),
            file_directory: extent(&[0, 1], 2),
            journal: vec![extent(&[2, 0], 3), extent(&[1, 2], 4)],
        };
        let mut block = empty_block();
        sup.encode_into(&mut block);
        assert_eq!(GroupSuper::decode(block.as_slice()), Ok(sup));
        let disks: Vec<DiskEntry> = (0..40u16)
            .map(|n| DiskEntry {
                number: n,
                disk_uuid: Uuid::from_u128(u128::from(n) + 1),
                label: format!("D{n}"),
                failgroup: format!("FG{}", n % 3),
                failgroup_id: n % 3,
                state: match n {
                    5 => DiskState::Offline,
                    6 => DiskState::Syncing,
                    _ => DiskState::Online,
                },
                flags: if n == 5 { DISK_FLAG_HELD } else { 0 },
                au_count: 1000 + u64::from(n),
                size_bytes: 1 << 32,
                logical_sector_bytes: 512,
                physical_sector_bytes: 4096,
                created_unix_seconds: 3,
                drop_after_minutes: if n == 5 { 90 } else { 0 },
                offline_seconds: if n == 5 { 7_200 } else { 0 },
                synced_generation: if n == 5 { 0xDEAD_BEEF } else { 0 },
            })
            .collect();
        let mut decoded = Vec::new();
        for index in 0..2 {
            let mut block = empty_block();
            encode_disk_directory(&mut block, index, &disks);
            decoded.extend(decode_disk_directory(block.as_slice(), index).unwrap());
        }
        assert_eq!(decoded, disks);
    }

    #[test]
    fn at_layout_reserves_the_front_and_the_table() {
        let layout = AtLayout::for_disk(16 << 40, 4 << 20).unwrap();
        assert_eq!(layout.au_count, ((16u64 << 40) - (1 << 20)) / (4 << 20));
        assert_eq!(layout.bitmap_blocks, layout.au_count.div_ceil(32256));
        assert_eq!(layout.summary_blocks, 1);
        assert_eq!(
            layout.first_data_au, 1,
            "2 MiB + 131 blocks fit in AU 0 of 4 MiB"
        );
        let small = AtLayout::for_disk(64 << 20, 1 << 20).unwrap();
        assert_eq!(small.au_count, 63);
        assert_eq!(
            small.first_data_au, 3,
            "2 MiB front + 2 table blocks spill into AU 2"
        );
        assert!(AtLayout::for_disk(8 << 20, 64 << 20).is_none());
    }

    #[test]
    fn the_discard_map_lies_in_the_slack_below_the_first_data_au() {
        let big = AtLayout::for_disk(16 << 40, 4 << 20).unwrap();
        assert!(
            big.has_clean_map(),
            "131 map blocks fit the 380 left in AU 0"
        );
        assert_eq!(big.clean_offset_bytes(0), (4 << 20) - 4096);
        let table_end = AT_START_BYTES + (big.summary_blocks + big.bitmap_blocks) * 4096;
        assert!(big.clean_offset_bytes(big.bitmap_blocks - 1) >= table_end);
        // 1 MiB AUs on 16 TiB: 521 bitmap blocks spill into AU 4, leaving
        // less slack than a map needs.
        let crowded = AtLayout::for_disk(16 << 40, 1 << 20).unwrap();
        assert!(!crowded.has_clean_map());
        let small = AtLayout::for_disk(64 << 20, 1 << 20).unwrap();
        assert!(small.has_clean_map());
        assert_eq!(small.clean_offset_bytes(0), (3 << 20) - 4096);
    }

    #[test]
    fn alias_templates_attributes_journal_round_trip() {
        let records = vec![
            AliasRecord {
                id: 32,
                parent: 0,
                kind: AliasKind::Directory,
                name: "orcl".into(),
                file_number: 0,
                file_incarnation: 0,
                created_unix_seconds: 1,
                dir_attrs: None,
            },
            AliasRecord {
                id: 40,
                parent: 32,
                kind: AliasKind::File,
                name: "users.dbf".into(),
                file_number: 256,
                file_incarnation: 3,
                created_unix_seconds: 2,
                dir_attrs: None,
            },
        ];
        let mut block = empty_block();
        encode_alias_block(&mut block, 1, &records.iter().collect::<Vec<_>>());
        assert_eq!(decode_alias_block(block.as_slice(), 1).unwrap(), records);

        let templates = vec![Template {
            name: "ONLINELOG".into(),
            copies: 0,
            striping: STRIPING_FINE,
        }];
        let mut block = empty_block();
        encode_templates(&mut block, &templates);
        assert_eq!(decode_templates(block.as_slice()).unwrap(), templates);

        let attributes = vec![("au_size".to_string(), "4194304".to_string())];
        let mut block = empty_block();
        encode_attributes(&mut block, &attributes);
        assert_eq!(decode_attributes(block.as_slice()).unwrap(), attributes);

        let record = JournalRecord {
            seq: 12,
            prev_checksum: 0xdead,
            image_count: 2,
            images_crc: 77,
            targets: vec![
                JournalTarget {
                    image: 0,
                    disk: 1,
                    offset_bytes: 4096,
                },
                JournalTarget {
                    image: 1,
                    disk: 0,
                    offset_bytes: 8192,
                },
            ],
        };
        let mut block = empty_block();
        record.encode_into(&mut block);
        assert_eq!(JournalRecord::decode(block.as_slice()).unwrap(), record);
    }
}
