//! The figures `cairn group list` and `cairn group disks` show.

use std::collections::BTreeMap;

use cairn_format::group::{AtLayout, DiskState};
use cairn_io::DeviceId;
use serde::Serialize;
use uuid::Uuid;

use super::alloc::DiskAlloc;
use super::mounted::Group;

impl Group<'_> {
    /// Figures for `cairn group list`.
    ///
    /// Free space is where new copies go: the ONLINE disks', and, with a
    /// failure group missing, the free space the extent maps leave on its
    /// disks (a new extent's copy is recorded there and restored when they
    /// are back, `docs/lifecycle.md`). So a disk taken offline changes no
    /// figure but the count of disks not in use; only a disk dropped (or
    /// being dropped by force) leaves them.
    pub fn space(&self) -> GroupSpace {
        let mut total = 0u64;
        let mut free = 0u64;
        let mut by_fg: BTreeMap<u16, (u64, u64)> = BTreeMap::new();
        let mut offline = 0;
        for m in self.members.iter() {
            let layout = AtLayout::for_disk(m.entry.size_bytes, self.au_bytes);
            let data = layout.map_or(0, |l| l.data_aus());
            total += data;
            if m.online().is_none() {
                offline += 1;
            }
            let Some(table) = m
                .table()
                .filter(|_| m.online().is_some() || m.receives_copies())
            else {
                continue;
            };
            free += table.free_aus();
            let e = by_fg.entry(m.entry.failgroup_id).or_default();
            e.0 += data;
            e.1 += table.free_aus();
        }
        // AUs are whole MiB (1 to 64).
        let au_mb = self.au_bytes >> 20;
        // As asmcmd lsdg: to restore redundancy after losing failure groups,
        // normal keeps room for the largest one, high for the two largest.
        let mut fg_sizes: Vec<u64> = by_fg.values().map(|v| v.0).collect();
        fg_sizes.sort_unstable_by(|a, b| b.cmp(a));
        let copies = u64::from(self.copies);
        let required_mirror_free: u64 = fg_sizes.iter().take(self.copies as usize - 1).sum();
        // asmcmd shows a negative figure when the free space could not
        // restore redundancy after that loss; here that is 0: nothing is
        // usable without eating into that room (FREE_MB says what is left).
        let usable = free.saturating_sub(required_mirror_free) / copies;
        GroupSpace {
            total_mb: total * au_mb,
            free_mb: free * au_mb,
            required_mirror_free_mb: required_mirror_free * au_mb,
            usable_file_mb: i64::try_from(usable * au_mb).unwrap_or(i64::MAX),
            offline_disks: offline,
        }
    }

    /// The extents whose redundancy is lowered, over every file (metadata
    /// included). A walk of every extent map: kept out of [`Self::space`],
    /// which the service's `statfs` asks for.
    pub fn redundancy_lowered(&self) -> RedundancyLowered {
        let mut out = RedundancyLowered::default();
        for rec in self.files.values() {
            let (extents, aus) = self.lowered_extents(rec);
            out.extents += extents;
            out.bytes += aus * self.au_bytes;
        }
        out
    }

    /// Per-disk figures for `cairn group disks`.
    pub fn disks(&self) -> Vec<DiskInfo> {
        self.members
            .iter()
            .map(|m| {
                let layout = AtLayout::for_disk(m.entry.size_bytes, self.au_bytes);
                DiskInfo {
                    number: m.entry.number,
                    label: m.entry.label.clone(),
                    failgroup: m.entry.failgroup.clone(),
                    state: if m.online().is_some() {
                        DiskState::Online
                    } else if m.writable().is_some() {
                        DiskState::Syncing
                    } else {
                        DiskState::Offline
                    },
                    missing: m.entry.state != DiskState::Offline && m.device.is_none(),
                    held: m.entry.held(),
                    dropping: m.entry.dropping(),
                    dropped_by_force: m.entry.forced(),
                    stale_aus: self.stale_aus_on(m.entry.number),
                    resync_whole: m.entry.resync_all(),
                    missing_copy_aus: self.missing_copy_aus(m.entry.number),
                    repair_seconds_left: self.repair_seconds_left(m.entry.number),
                    device: m.device,
                    total_aus: layout.map_or(0, |l| l.data_aus()),
                    free_aus: m.alloc.as_ref().map(DiskAlloc::free_aus),
                    size_bytes: m.entry.size_bytes,
                    shrinking_to_bytes: self.pending_shrink_bytes(m.entry.number),
                    disk_uuid: m.entry.disk_uuid,
                }
            })
            .collect()
    }
}

/// Space figures in MiB, as `asmcmd lsdg` shows them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GroupSpace {
    pub total_mb: u64,
    pub free_mb: u64,
    /// Space needed to restore redundancy after losing the largest failure
    /// group (the two largest, for high redundancy).
    pub required_mirror_free_mb: u64,
    /// Free space usable for new files once mirroring and the above are
    /// allowed for: `(free - required) / copies`, and 0 (never less) when
    /// the free space could not cover that loss.
    pub usable_file_mb: i64,
    /// Disks not ONLINE.
    pub offline_disks: usize,
}

/// Extents (of every file, metadata included) whose redundancy is lowered:
/// fewer of their copies serve reads than their file asks (a copy on a disk
/// not ONLINE, or stale). ASM's REDUNDANCY_LOWERED. 0 once a resync or a
/// rebuild has restored them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RedundancyLowered {
    pub extents: u64,
    /// Their bytes, one copy each.
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct DiskInfo {
    pub number: u16,
    pub label: String,
    pub failgroup: String,
    /// ONLINE; SYNCING (written, not yet read: its resync runs); OFFLINE
    /// when it is not in use (recorded offline, or missing).
    pub state: DiskState,
    /// Not found at mount, and not (yet) recorded offline: a read-only mount
    /// leaves the record to a command that writes.
    pub missing: bool,
    /// Taken offline on request: stays OFFLINE until `cairn group online`.
    pub held: bool,
    /// Being dropped (listed as DROPPING): its copies move off, and it
    /// leaves the group (FORMER) once none is left.
    pub dropping: bool,
    /// Dropped by force: its copies are rebuilt elsewhere, never read.
    pub dropped_by_force: bool,
    /// Stale AUs on its copies: what its resync will copy, unless
    /// `resync_whole`.
    pub stale_aus: u64,
    /// It went OFFLINE after an I/O to it failed (or a flush did not
    /// complete), and may have lost writes its cache had taken, which nothing
    /// marked: when it comes back, every data copy on it is resynced, not
    /// only the stale AUs (`DISK_FLAG_RESYNC_ALL`).
    #[serde(default)]
    pub resync_whole: bool,
    /// AUs of its copies that serve no read now: every one while it is not
    /// ONLINE (the stale ones and those it holds whole alike), the stale
    /// ones when it is. 0 on every disk: every extent has all its copies.
    pub missing_copy_aus: u64,
    /// For an OFFLINE disk, seconds left before its repair timer runs out
    /// (counted while the group is mounted).
    pub repair_seconds_left: Option<u64>,
    #[serde(skip)]
    pub device: Option<DeviceId>,
    pub total_aus: u64,
    pub free_aus: Option<u64>,
    pub size_bytes: u64,
    /// While a shrink is pending (`alter --resize`), the size it goes to.
    pub shrinking_to_bytes: Option<u64>,
    pub disk_uuid: Uuid,
}
