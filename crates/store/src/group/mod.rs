//! Disk groups: create, mount, the metadata transaction, and the state a mounted
//! group keeps in memory.
//!
//! What lives where (byte tables in `docs/on_disk_format.md`, reasons in
//! `docs/groups.md`):
//! - per disk, at fixed places: the disk header copies, two superblock slots
//!   (group identity, bootstrap extent of the file directory, and the whole disk
//!   directory), and the disk's allocation table (summary + bitmap);
//! - in metadata files, mirrored like user files at the group's redundancy and
//!   placed by the same [`crate::placement`] rules: the file directory (file 1,
//!   one entry block per file number, holding the extent map), the journal
//!   (file 3), the alias directory (4), templates (5) and attributes (6).
//!
//! The transaction: operations change the in-memory state and name the metadata
//! blocks they dirtied; [`Group::commit`] encodes those blocks, writes them as one
//! journal record to every journal copy, flushes, then writes them in place.
//! Replay at mount rewrites every whole record after the last checkpoint, so a
//! crash at any point leaves either all of a transaction or none of it. Long
//! operations (create, resize, delete of big files) commit in bounded steps and
//! record what they are heading for in the file's entry; mount finishes or undoes
//! them ([`Group::recover_operations`]).
//!
//! Fault assumptions: a write may be lost, torn at sector boundaries or
//! misdirected until a flush completes; a flush makes completed writes durable.
//! A failed commit leaves memory ahead of the disks, so the group refuses further
//! work until it is mounted again (it is "poisoned"); the disks themselves stay
//! consistent.
//!
//! Where each job lives (no file holds several):
//! - `mod.rs`: the types a caller sees, the mounted group's state, listings;
//! - `create.rs`, `mount.rs`: making a group, and bringing one up (bootstrap,
//!   replay, loading, damage found on the way);
//! - `superblock.rs`: superblock slots, the disk directory, disk states;
//! - `journal.rs`: the transaction (commit, checkpoint, replay, overlay);
//! - `places.rs`: where each metadata block's copies live and how a dirty
//!   block is encoded; `disk_io.rs`: metadata I/O across the disks;
//! - `alloc.rs` (one disk's table), `tables.rs` (tables at group level,
//!   allocating and freeing extents, AUs claimed twice);
//! - `namespace.rs` (names, directories, aliases), `files.rs` (create,
//!   resize, delete as continuing operations), `data.rs` (file bytes);
//! - `check.rs`: `cairn group check`.
//! - `parts/`: the parts that own their state behind their own functions
//!   (the name table, the running transaction, the disks' state log, what
//!   the data plane has not been shown yet); `invariants.rs`:
//!   [`Group::check_invariants`], what holds after every operation that
//!   succeeded, which the crash and interleaving simulators check after
//!   every step.
//!
//! - `resync.rs`: stale copies and bringing an offline disk back;
//!   `relocate.rs`: adding and dropping disks, and the rebalance.
//!
//! Not here: the real-device plumbing (discovery, protection, locks) is in
//! [`crate::group_admin`].

mod alloc;
pub mod attributes;
pub mod check;
mod create;
mod data;
mod devices;
mod discard;
mod disk_io;
pub mod disk_states;
mod file_io;
mod files;
pub mod heartbeat;
mod invariants;
mod journal;
pub mod live;
mod mount;
mod namespace;
mod own_io;
mod parts;
mod places;
pub mod plane;
mod posix;
mod publish;
pub mod reclaim;
pub mod relocate;
mod resize;
pub mod resync;
mod returning;
pub mod scrub;
mod superblock;
mod tables;
mod zeroing;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use cairn_format::group::{
    self as fmt, images_crc, AliasRecord, AtLayout, AuAddr, DiskEntry, DiskState, Extent,
    FileEntry, FileState, GroupSuper, JournalHeader, JournalRecord, JournalTarget, Template,
    ALIASES_PER_BLOCK, AT_COUNTS_PER_SUMMARY, DIRECT_EXTENTS, DISKS_MAX, DISK_ENTRIES_PER_BLOCK,
    EXTENTS_PER_INDIRECT_BLOCK, FILE_ALIAS_DIRECTORY, FILE_ATTRIBUTES, FILE_DIRECTORY,
    FILE_JOURNAL, FILE_NUMBER_USER_MIN, FILE_TEMPLATES, JOURNAL_HEADER_BLOCKS, JOURNAL_TARGETS_MAX,
    STRIPING_COARSE, STRIPING_FINE, SUPER_SLOT_BLOCKS, SUPER_SLOT_OFFSETS_BYTES,
};
use cairn_format::meta::{self, Block, BlockId, BlockType, MetaError, BLOCK_BYTES};
use cairn_format::{DiskHeader, FeatureSet};
use cairn_io::{AlignedBuf, DeviceId, IoEngine, IoError, Op, Request};
use serde::Serialize;
use uuid::Uuid;

use crate::header_copies::HeaderScan;
use crate::labeling;
use crate::placement::{self, DiskNumber, DiskSpace, FailGroupId, Striping};

pub use alloc::DiskAlloc;
pub use cairn_format::group::AliasKind;
pub use create::{create, default_templates};
pub use data::Punched;
pub use discard::{DiscardQueue, DISCARD_BATCH_RUNS_MAX, DISCARD_QUEUE_RUNS_MAX};
pub use disk_states::StateChangeCount;
pub use file_io::{FileIo, Mapping};
pub use files::{CreateOptions, DirEntry, FileInfo, Node};
pub use live::{DataHandle, EngineSource, LiveGroup, SameDevices};
pub use mount::{
    mount, mount_owned, mount_owned_read_only, mount_read_only, mount_with, GroupSelector,
    MissingDisks,
};
pub use posix::{group_root_attrs, AttrChange, Retired};
pub use superblock::{identify, membership, FoundDisk, GroupOnDisk, Membership};

use discard::DiscardRun;
use files::striping_name;
use namespace::{alias_block_of, split};
use parts::names::ROOT;
use parts::txn::Dirty;
pub use parts::txn::COMMIT_TIMES_MAX;
pub use parts::Violations;
use places::{entry_id, journal_id, per_disk_id};
use superblock::{read_slot, slot_damaged, SlotRead};

/// The journal ring's size. Bounded so replay is bounded: at most this much is
/// read and rewritten at mount.
pub const JOURNAL_BYTES: u64 = 4 << 20;
/// A continuing operation commits a step once it has dirtied this many blocks.
pub const STEP_DIRTY_MAX: usize = 24;
/// Behind a [`LiveGroup`], an operation joins the running transaction only
/// while it holds fewer blocks than this; else that is committed first. The
/// largest step of any operation then still fits [`TXN_IMAGES_MAX`]: 26
/// blocks measured under the crash and interleaving simulators; by reading,
/// a `mkdir -p` of a deep path with scattered alias ids can reach about 39.
pub const JOIN_DIRTY_MAX: usize = TXN_IMAGES_MAX / 4;
/// Most blocks one transaction may carry (a step can overshoot STEP_DIRTY_MAX by
/// what one extent touches: its entry, an indirect block, and three table
/// blocks per copy: bitmap, summary and discard map). Budget: a joined
/// transaction under JOIN_DIRTY_MAX, the largest step (about 39), and the
/// discard marks of releases (CLEAN_BLOCKS_PER_TXN).
pub const TXN_IMAGES_MAX: usize = 64;

/// Discard-map blocks that releases of freed runs may mark in one
/// transaction (they join it, beside an operation's own blocks).
const CLEAN_BLOCKS_PER_TXN: usize = 8;

/// A relocation batch commits the marks its reservations cleared once
/// they reach this many map blocks (each reservation adds at most two), so
/// that a batch over many disks never makes a record too large.
const CLEAN_CLEARS_PER_COMMIT: usize = 16;
/// Blocks of an allocation table read per request at mount (1 MiB).
const TABLE_READ_BLOCKS_MAX: u64 = 256;
/// Default AU size.
pub const AU_BYTES_DEFAULT: u64 = 4 << 20;
/// AUs of data a member disk holds at least, beyond its header copies and
/// allocation table: a disk of one AU (a 10 MiB file with 4 MiB AUs) adds
/// nothing a database can use and only makes placement fail on it.
pub const MEMBER_DATA_AUS_MIN: u64 = 4;

/// The layout of a disk of `size_bytes` as a member of a group of
/// `au_bytes` AUs — created with it, added to it, or resized to that size:
/// the one rule for how small a member may be. Refused, it says the
/// smallest size that would do.
pub fn member_layout(size_bytes: u64, au_bytes: u64) -> Result<AtLayout, String> {
    let fits = |size: u64| {
        AtLayout::for_disk(size, au_bytes).filter(|l| l.data_aus() >= MEMBER_DATA_AUS_MIN)
    };
    if let Some(layout) = fits(size_bytes) {
        return Ok(layout);
    }
    // The smallest size that fits, by whole AUs (the table grows by a
    // block per 32K AUs, so a few steps past the data AUs themselves).
    let least = (MEMBER_DATA_AUS_MIN + 1..MEMBER_DATA_AUS_MIN + 64)
        .map(|aus| aus * au_bytes + fmt_layout_reserve())
        .find(|size| fits(*size).is_some());
    Err(match least {
        Some(least) => format!(
            "{size_bytes} bytes is too small for a member disk: it must hold its header copies, its allocation table and at least {MEMBER_DATA_AUS_MIN} AUs of {} MiB — {} MiB or more",
            au_bytes >> 20,
            least.div_ceil(1 << 20)
        ),
        None => format!(
            "{size_bytes} bytes is too small for a member disk with {}-MiB AUs",
            au_bytes >> 20
        ),
    })
}

/// Room a device keeps besides its AUs (header copies at its start and
/// end), for [`member_layout`]'s estimate of the least size.
fn fmt_layout_reserve() -> u64 {
    cairn_format::DEVICE_SIZE_MIN_BYTES
}

/// Redundancy of a group (copies of every extent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Redundancy {
    External,
    Normal,
    High,
}

impl Redundancy {
    pub fn copies(self) -> u8 {
        match self {
            Self::External => 1,
            Self::Normal => 2,
            Self::High => 3,
        }
    }
    pub fn from_copies(copies: u8) -> Option<Self> {
        match copies {
            1 => Some(Self::External),
            2 => Some(Self::Normal),
            3 => Some(Self::High),
            _ => None,
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "external" => Some(Self::External),
            "normal" => Some(Self::Normal),
            "high" => Some(Self::High),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::External => "EXTERN",
            Self::Normal => "NORMAL",
            Self::High => "HIGH",
        }
    }
}

/// Why a group operation failed. Messages are one line a person can act on.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    #[error("{0}")]
    Invalid(String),
    #[error("disk {disk}: {error}")]
    Io { disk: String, error: IoError },
    /// Metadata the group cannot work with (a map that names an AU twice, a
    /// structure that contradicts itself); the message says what and where.
    #[error("metadata is damaged: {0}")]
    Corrupt(String),
    /// A metadata block with no valid copy on any disk: what it held is lost.
    #[error("{0}")]
    Lost(String),
    /// A metadata block no copy of which could be read (I/O errors): not a
    /// loss, as the disks may answer again.
    #[error("{0}")]
    Unreadable(String),
    #[error("{0}")]
    NoSpace(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Exists(String),
    /// A directory that must be empty is not.
    #[error("{0}")]
    NotEmpty(String),
    /// A directory where a file was wanted.
    #[error("{0}")]
    IsDirectory(String),
    /// A file where a directory was wanted.
    #[error("{0}")]
    NotDirectory(String),
    #[error("{0}")]
    Mount(String),
    /// A write that must be durable reached no copy of some block.
    #[error("{0}")]
    WriteFailed(String),
    #[error("the group stopped after a failed metadata write ({0}); mount it again to recover")]
    Poisoned(String),
    /// The group's heartbeat stopped it: another host took it over, or no
    /// heartbeat could be written for the timeout (`heartbeat.rs`).
    #[error("{0}")]
    Fenced(String),
    /// A change asked of a group mounted read-only.
    #[error("group {0} is mounted read-only (by a listing or inspecting command); this change needs a command that writes")]
    ReadOnly(String),
    /// A long operation stopped before its end because the service is
    /// stopping; what it did stays done, and it resumes where it stopped.
    #[error("{0}")]
    Interrupted(String),
}

impl From<crate::names::NameError> for GroupError {
    fn from(e: crate::names::NameError) -> Self {
        Self::Invalid(e.to_string())
    }
}

/// A disk to put into a new group: an attached device that carries a Cairn label.
#[derive(Debug, Clone)]
pub struct NewDisk {
    pub device: DeviceId,
    /// Failure group name; `None`: a group of its own, named after the label.
    pub failgroup: Option<String>,
}

/// What a new group looks like.
#[derive(Debug, Clone)]
pub struct GroupSpec {
    pub name: String,
    pub redundancy: Redundancy,
    pub au_bytes: u64,
    /// Required logical sector size; `None`: whatever the disks have (they must agree).
    pub sector_bytes: Option<u32>,
    /// Take disks that belong to another group.
    pub force: bool,
    pub now_unix_seconds: u64,
    pub group_uuid: Uuid,
}

/// What a mount found and did.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct MountReport {
    /// Journal records replayed (applied in memory only, on a read-only mount).
    pub journal_records_replayed: u64,
    /// Members not found, recorded offline in the superblocks (a writer).
    pub disks_marked_offline: Vec<String>,
    /// Members not found, left as they are on disk (a read-only mount): the
    /// group is degraded while they are missing, and whole again when they
    /// are found.
    pub disks_missing: Vec<String>,
    pub operations_recovered: Vec<String>,
    pub repaired_copies: u64,
    pub warnings: Vec<String>,
    /// Metadata damage found at mount, each with where it is and what it
    /// affects (an AU two files claim, a block with no valid copy).
    pub damage: Vec<String>,
    /// Members recorded offline and found again: resynced (a writer).
    pub disks_returned: Vec<String>,
    /// Members recorded offline and found again that stay offline, each
    /// with why (taken offline on request, not the image the group left).
    pub disks_refused: Vec<String>,
    /// Members found, but OFFLINE on request: left so until `online`.
    pub disks_held: Vec<String>,
    /// What the mount's resync did, if it ran.
    pub resync: Option<resync::ResyncReport>,
    /// OFFLINE disks whose repair timer had run out, dropped by force (a
    /// rebalance rebuilds their copies).
    pub disks_dropped_expired: Vec<String>,
}

/// One thing a mount found that a person must hear about: the CLI prints
/// it on stderr (`cairn: warning: group G: ...`, or `cairn: group G: ...`
/// for news), the service logs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountNotice {
    /// A warning (something is wrong or was repaired), or news.
    pub warning: bool,
    /// A member's state changed (marked OFFLINE, resynced back): a live
    /// group says these itself, one log line per change (`disk_states.rs`).
    pub disk_state: bool,
    pub text: String,
}

impl MountReport {
    /// What to say about this mount, in order: one sentence each, for
    /// whichever host mounted the group.
    pub fn notices(&self, group: &str) -> Vec<MountNotice> {
        let warn = |text: String| MountNotice {
            warning: true,
            disk_state: false,
            text,
        };
        let state = |text: String| MountNotice {
            warning: true,
            disk_state: true,
            text,
        };
        let mut out: Vec<MountNotice> = self.warnings.iter().cloned().map(warn).collect();
        out.extend(self.damage.iter().map(|d| warn(format!("DAMAGE: {d}"))));
        if self.repaired_copies > 0 {
            out.push(warn(format!(
                "{} metadata copies were damaged, blank or out of date beside a good one, and were rewritten from it (if this comes back, a disk may be losing or misplacing writes)",
                self.repaired_copies
            )));
        }
        out.extend(self.disks_marked_offline.iter().map(|d| state(format!(
            "disk {d} is not available (not found, or it could not be opened) and is now marked OFFLINE; the group runs DEGRADED on the other copies (check the discovery string and that the disk is attached)"
        ))));
        out.extend(self.disks_missing.iter().map(|d| warn(format!(
            "disk {d} is not available (not found, or it could not be opened); reading from the other copies, nothing was changed (check the discovery string and that the disk is attached)"
        ))));
        out.extend(self.disks_refused.iter().cloned().map(warn));
        out.extend(self.disks_dropped_expired.iter().map(|d| state(format!(
            "disk {d} was OFFLINE past its repair time (disk_repair_time) and is dropped by force; `cairn group rebalance {group}` rebuilds its copies from the mirrors"
        ))));
        if let Some(r) = &self.resync {
            // The counts are news beside the disks' state lines.
            out.push(MountNotice {
                warning: false,
                disk_state: false,
                text: format!(
                    "resynced {} stale AU(s) ({} MiB) and {} metadata block(s){}",
                    r.aus_copied,
                    r.bytes_copied >> 20,
                    r.metadata_blocks_rewritten,
                    if r.disks_online.is_empty() {
                        String::new()
                    } else {
                        format!("; disk(s) {} ONLINE again", r.disks_online.join(", "))
                    }
                ),
            });
            out.extend(r.aus_without_source.iter().map(|a| {
                warn(format!(
                    "no good copy to resync {a}: it stays stale and is never read"
                ))
            }));
        }
        out
    }
}

/// One member disk as the mounted group knows it.
#[derive(Debug)]
struct Member {
    entry: DiskEntry,
    device: Option<DeviceId>,
    /// `None` while offline.
    alloc: Option<DiskAlloc>,
    /// While OFFLINE, the table the extent maps give it (its own cannot be
    /// written): new copies are recorded on it from this one when a
    /// failure group is missing (`place_with_away`), and frees made while
    /// it is away go to it. Never written; set when the disk goes OFFLINE
    /// (the table it had, with what it held back from reuse) or at mount
    /// (built from the maps), and dropped when it comes back, whose table
    /// is rebuilt from the maps. Changed under the metadata lock, like
    /// `alloc`; `None` whenever `alloc` is `Some`.
    away: Option<DiskAlloc>,
    needs_flush: bool,
    /// The newest superblock generation this disk is known to hold: what a
    /// disk taken offline records as its `synced_generation`.
    generation: u64,
    /// When this mount took it offline (its repair timer counts from then).
    offline_since: Option<std::time::Instant>,
    /// Times this mount took it offline.
    offline_count: u64,
    /// Relocation targets reserved on it when it went offline (its table
    /// went with it): given back to its table when it returns, so a copy
    /// still running into them never lands in an AU someone else got.
    parked: Vec<(u32, u32)>,
}

impl Member {
    /// Read and written: ONLINE, attached, its table loaded.
    fn online(&self) -> Option<DeviceId> {
        match (self.entry.state, self.device) {
            (DiskState::Online, Some(d)) if self.alloc.is_some() => Some(d),
            _ => None,
        }
    }

    /// Written (ONLINE or SYNCING), but read only if [`Member::online`].
    fn writable(&self) -> Option<DeviceId> {
        match (self.entry.state, self.device) {
            (DiskState::Online | DiskState::Syncing, Some(d)) if self.alloc.is_some() => Some(d),
            _ => None,
        }
    }

    /// Its allocation table: the one it keeps on disk when written, the
    /// extent maps' while it is away.
    fn table(&self) -> Option<&DiskAlloc> {
        self.alloc.as_ref().or(self.away.as_ref())
    }

    fn table_mut(&mut self) -> Option<&mut DiskAlloc> {
        match self.alloc.as_mut() {
            Some(a) => Some(a),
            None => self.away.as_mut(),
        }
    }

    /// May receive new copies: not leaving, and with a table (ONLINE and
    /// read; or SYNCING or OFFLINE, a copy there restored when it is read
    /// again).
    fn receives_copies(&self) -> bool {
        !self.entry.dropping() && self.table().is_some()
    }
}

/// A file's metadata in memory: its entry and its whole extent map.
#[derive(Debug, Clone)]
struct FileRec {
    entry: FileEntry,
    extents: Vec<Extent>,
}

/// A metadata block with no valid copy on any disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum LostBlock {
    /// A user file's directory entry: the file cannot be reached.
    Entry(u32),
    /// Part of a user file's extent map (an indirect block, or an entry that
    /// contradicts itself): the file reads up to where its map is whole, and
    /// is not written until `check --repair` cuts it there.
    Map(u32),
    /// A block of the alias directory: the names in it are gone.
    Alias(u64),
    Templates,
    Attributes,
}

#[derive(Debug, Clone, Copy)]
struct JournalState {
    header_generation: u64,
    next_seq: u64,
    /// Next free block in the journal file.
    position: u64,
    capacity_blocks: u64,
    prev_checksum: u32,
}

/// Something a durable write must leave whole on at least one copy: a
/// metadata block (one write per copy), or a superblock generation (every
/// block of the slot, per disk).
struct DurableItem {
    what: String,
    /// Per copy: its disk and the writes (offset, bytes) that make it up.
    copies: Vec<(u16, Vec<(u64, AlignedBuf)>)>,
}

impl DurableItem {
    /// A block with one write per copy: (disk, offset, bytes).
    fn block(what: impl Into<String>, copies: Vec<(u16, u64, AlignedBuf)>) -> Self {
        Self {
            what: what.into(),
            copies: copies
                .into_iter()
                .map(|(d, o, b)| (d, vec![(o, b)]))
                .collect(),
        }
    }
}

/// The metadata plane's engine: lent by the caller (a command that mounts
/// for itself), or owned (a live group, which outlives the call that made it).
pub enum EngineRef<'e> {
    Borrowed(&'e mut dyn IoEngine),
    Owned(Box<dyn IoEngine>),
}

impl<'e> std::ops::Deref for EngineRef<'e> {
    type Target = dyn IoEngine + 'e;
    fn deref(&self) -> &Self::Target {
        match self {
            Self::Borrowed(e) => &**e,
            Self::Owned(e) => &**e,
        }
    }
}

impl std::ops::DerefMut for EngineRef<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match self {
            Self::Borrowed(e) => &mut **e,
            Self::Owned(e) => &mut **e,
        }
    }
}

/// A mounted disk group.
pub struct Group<'e> {
    engine: EngineRef<'e>,
    uuid: Uuid,
    name: String,
    copies: u8,
    au_bytes: u64,
    sector_bytes: u32,
    created_unix_seconds: u64,
    features: FeatureSet,
    slot_generation: u64,
    members: Vec<Option<Member>>,
    files: BTreeMap<u32, FileRec>,
    /// The name table (`parts/names.rs`).
    names: parts::names::NameTable,
    templates: Vec<Template>,
    attributes: Vec<(String, String)>,
    journal: JournalState,
    /// The running transaction (`parts/txn.rs`).
    txn: parts::txn::Txn,
    poisoned: Option<String>,
    clock: fn() -> u64,
    /// Disks whose allocation table could not be read: rebuilt from the
    /// extent maps once those are loaded.
    tables_to_rebuild: Vec<u16>,
    /// Metadata copies rewritten from a good mirror since mount.
    repaired_copies: u64,
    /// Disks whose writes failed during the current step, to offline after it.
    failed_disks: BTreeSet<u16>,
    /// Disks this mount took offline after an I/O error, for the caller to
    /// report (a mount's own offlining is in its [`MountReport`]).
    taken_offline: Vec<String>,
    /// Mounted read-only: nothing is ever written (no replay, no repair, no
    /// offlining); changes are refused with [`GroupError::ReadOnly`].
    read_only: bool,
    /// On a read-only mount, the images of the journal records that a writer
    /// would replay, by place (disk, byte offset): reads see them instead of
    /// what is in place. Bounded by the journal ring.
    overlay: BTreeMap<(u16, u64), Box<Block>>,
    /// Metadata copies found damaged, blank or stale that a read-only mount
    /// left as they were.
    copies_left_damaged: u64,
    /// Members found smaller than the group recorded, described: treated as
    /// missing, and problems for `check`.
    short_disks: Vec<String>,
    /// Metadata blocks found with no valid copy at mount, and why: what they
    /// held is gone. `check --repair` rewrites them.
    lost: BTreeMap<LostBlock, String>,
    /// AUs that more than one extent map claims (damage found at mount), with
    /// each claimant's file number: never freed while another still claims it,
    /// and their files are never written.
    shared_aus: BTreeMap<(u16, u64), Vec<u32>>,
    /// What the data plane sees: file snapshots and the disk view, published
    /// here as changes commit (`data.rs`).
    plane: Arc<plane::DataPlane>,
    /// What the data plane has not been shown yet (`parts/unpublished.rs`).
    unpublished: parts::unpublished::Unpublished,
    /// Behind a [`LiveGroup`]'s lock: its file data goes through data
    /// handles, never through this group's own data calls, and its steps'
    /// commits are grouped (`live.rs`).
    live: bool,
    /// A reclaim `--compact` runs: the rebalance it runs first ends with
    /// the compact pass whatever `rebalance_compact` says (memory only).
    compact_asked: bool,
    /// When this mount began: OFFLINE disks' repair timers count the time
    /// the group is mounted.
    mounted_at: std::time::Instant,
    /// Disk numbers freed by drops during this mount: not given to a disk
    /// added during it, since a data handle's engine may still map the
    /// number to the dropped disk's device.
    numbers_freed: BTreeSet<u16>,
    /// Devices of disks whose drop completed during this mount, still
    /// attached to the engine: a live group lets go of them
    /// ([`Group::take_left_devices`]).
    left_devices: Vec<DeviceId>,
    /// Set by mount when the superblocks name the journal elsewhere than
    /// its entry (a move a crash cut before its commit): the old map, for
    /// `adopt_journal_bootstrap`.
    journal_moved_from: Option<Vec<Extent>>,
    /// The meta plane's own zeroing (a grow's) writes to copies without
    /// the extents' latches: `zero_seq` counts those, and `zeroed_files`
    /// says, per file, the last; a copy (resync, relocation) begun before
    /// is not trusted for that file ([`Group::zeroed_since`]).
    zero_seq: u64,
    zeroed_files: HashMap<u32, u64>,
    /// Behind a [`LiveGroup`]: where freed runs wait for their discard,
    /// which the live group's drain runs outside `meta` (`discard.rs`).
    /// `None`: a commit discards what it releases at once.
    discards: Option<Arc<DiscardQueue>>,
    /// What the last superblock generation written says (the superblock,
    /// its disk number aside, and the disk directory): what a group that
    /// stopped, whose memory may be ahead of the disks, still writes from
    /// ([`Group::record_missed_writes`]).
    written_super: Option<(GroupSuper, Vec<DiskEntry>)>,
    /// The disks' state log (`parts/state_log.rs`).
    states: parts::state_log::StateLog,
    /// Disks gone OFFLINE whose devices a live group lets go of at the end
    /// of the metadata operation (`LiveGroup`): taken after an I/O error,
    /// or on request once stamped ([`Group::take_offline_released`]).
    to_release: BTreeSet<u16>,
    /// This host's heartbeat on the group's disks (multihost protection,
    /// `heartbeat.rs`), for a mount that writes on real disks: it stops
    /// the group when another host takes it over or no heartbeat lands,
    /// and it lets go (writes the release) when the group is dropped, so
    /// it is the last field: dropped after everything that writes.
    heartbeat: Option<heartbeat::Link>,
}

fn system_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Turns an engine error into a group error naming `disk`; the name becomes
/// a `String` only when there is an error (the data path calls this for
/// every I/O).
fn io_err(disk: impl Into<String>) -> impl FnOnce(IoError) -> GroupError {
    move |error| GroupError::Io {
        disk: disk.into(),
        error,
    }
}

fn corrupt(e: impl std::fmt::Display) -> GroupError {
    GroupError::Corrupt(e.to_string())
}

impl<'e> Group<'e> {
    /// A group in memory with its identity and members, nothing loaded yet:
    /// the common start of `create` and `mount`. Only the superblock's group
    /// fields are used (not its disk number or bootstrap extent).
    fn assemble(
        engine: EngineRef<'e>,
        sup: GroupSuper,
        uuid: Uuid,
        slot_generation: u64,
        members: Vec<Option<Member>>,
    ) -> Self {
        Group {
            engine,
            uuid,
            name: sup.name,
            copies: sup.copies,
            au_bytes: u64::from(sup.au_bytes),
            sector_bytes: sup.logical_sector_bytes,
            created_unix_seconds: sup.created_unix_seconds,
            features: sup.features,
            slot_generation,
            members,
            files: BTreeMap::new(),
            names: parts::names::NameTable::default(),
            templates: Vec::new(),
            attributes: Vec::new(),
            journal: JournalState {
                header_generation: 0,
                next_seq: 1,
                position: JOURNAL_HEADER_BLOCKS,
                capacity_blocks: 0,
                prev_checksum: 0,
            },
            txn: parts::txn::Txn::default(),
            poisoned: None,
            clock: system_clock,
            tables_to_rebuild: Vec::new(),
            repaired_copies: 0,
            failed_disks: BTreeSet::new(),
            shared_aus: BTreeMap::new(),
            lost: BTreeMap::new(),
            short_disks: Vec::new(),
            read_only: false,
            taken_offline: Vec::new(),
            overlay: BTreeMap::new(),
            copies_left_damaged: 0,
            plane: Arc::new(plane::DataPlane::new()),
            unpublished: parts::unpublished::Unpublished::default(),
            live: false,
            compact_asked: false,
            mounted_at: std::time::Instant::now(),
            numbers_freed: BTreeSet::new(),
            left_devices: Vec::new(),
            journal_moved_from: None,
            zero_seq: 0,
            zeroed_files: HashMap::new(),
            discards: None,
            written_super: None,
            states: parts::state_log::StateLog::default(),
            to_release: BTreeSet::new(),
            heartbeat: None,
        }
    }

    // -----------------------------------------------------------------------
    // Accessors

    pub fn uuid(&self) -> Uuid {
        self.uuid
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn redundancy(&self) -> Redundancy {
        Redundancy::from_copies(self.copies).expect("invariant: copies validated at mount")
    }
    pub fn au_bytes(&self) -> u64 {
        self.au_bytes
    }
    pub fn sector_bytes(&self) -> u32 {
        self.sector_bytes
    }
    pub fn templates(&self) -> &[Template] {
        &self.templates
    }
    pub fn attributes(&self) -> &[(String, String)] {
        &self.attributes
    }
    /// Give the engine back (tests crash the simulator after a group "dies").
    pub fn engine(&mut self) -> &mut dyn IoEngine {
        &mut *self.engine
    }

    fn blocks_per_au(&self) -> u64 {
        self.au_bytes / BLOCK_BYTES as u64
    }

    fn member(&self, disk: u16) -> Option<&Member> {
        self.members.get(usize::from(disk)).and_then(Option::as_ref)
    }

    fn member_mut(&mut self, disk: u16) -> Option<&mut Member> {
        self.members
            .get_mut(usize::from(disk))
            .and_then(Option::as_mut)
    }

    fn disk_name(&self, disk: u16) -> String {
        self.member(disk)
            .map_or_else(|| format!("#{disk}"), |m| m.entry.label.clone())
    }

    /// The group is behind a [`LiveGroup`]'s lock from now on.
    fn set_live(&mut self, live: bool) {
        self.live = live;
    }

    /// Beat for this group from now on (after a [`heartbeat::claim`]): its
    /// failures stop the group, and dropping the group lets go.
    pub fn attach_heartbeat(&mut self, link: heartbeat::Link) {
        self.heartbeat = Some(link);
    }

    /// The heartbeat thread's [`heartbeat::Nudge`], if one beats.
    pub fn heartbeat_nudge(&self) -> Option<heartbeat::Nudge> {
        self.heartbeat.as_ref().and_then(heartbeat::Link::nudge)
    }

    /// The superblock generation this mount wrote (or found, read-only).
    pub fn slot_generation(&self) -> u64 {
        self.slot_generation
    }

    /// Disks whose heartbeat write failed: failed disks, taken offline by
    /// the next commit like any disk a write failed on.
    fn take_heartbeat_failures(&mut self) {
        let failed = match &self.heartbeat {
            Some(link) => link.take_failed(),
            None => return,
        };
        for d in &failed {
            self.note_failure_why(*d, "its heartbeat write failed, or did not answer");
        }
        self.failed_disks.extend(failed);
    }

    /// Stop the group after a failed metadata write: memory is ahead of the
    /// disks, so every later call fails until the group is mounted again,
    /// data handles' included.
    fn stop(&mut self, why: String) {
        if self.poisoned.is_none() {
            tracing::error!(group = %self.name, "group {} stopped: {why}", self.name);
        }
        self.plane.stop(&why);
        self.poisoned.get_or_insert(why);
    }

    fn check_usable(&self) -> Result<(), GroupError> {
        if let Some(why) = &self.poisoned {
            return Err(GroupError::Poisoned(why.clone()));
        }
        // Another host may hold the group now: nothing more is written.
        if let Some(why) = self.heartbeat.as_ref().and_then(heartbeat::Link::stopped) {
            return Err(GroupError::Fenced(why));
        }
        Ok(())
    }

    /// Usable, and mounted for writing.
    fn check_writable(&self) -> Result<(), GroupError> {
        self.check_usable()?;
        if self.read_only {
            return Err(GroupError::ReadOnly(self.name.clone()));
        }
        Ok(())
    }

    /// Disks taken offline since mount because an I/O to them failed (label,
    /// failure group and why): a command says so, as the disk is out of use
    /// for good and the group degraded.
    pub fn disks_taken_offline(&self) -> &[String] {
        &self.taken_offline
    }

    // -----------------------------------------------------------------------
    // Raw I/O across disks

    // -----------------------------------------------------------------------
    // Where metadata lives

    // -----------------------------------------------------------------------
    // The transaction

    // -----------------------------------------------------------------------
    // Superblocks

    // -----------------------------------------------------------------------
    // Space

    // -----------------------------------------------------------------------
    // Listing

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
        for m in self.members.iter().flatten() {
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
            .flatten()
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

    /// Make every acknowledged write durable (what `fsync` means for a file).
    pub fn sync(&mut self) -> Result<(), GroupError> {
        self.check_usable()?;
        if self.read_only {
            return Ok(());
        }
        for m in self.members.iter_mut().flatten() {
            if m.writable().is_some() {
                m.needs_flush = true;
            }
        }
        self.flush_all_checked()?;
        self.offline_failed()
    }

    /// Checkpoint and stop: the next mount has nothing to replay. A read-only
    /// mount just stops.
    pub fn dismount(mut self) -> Result<(), GroupError> {
        self.check_usable()?;
        if self.read_only {
            return Ok(());
        }
        self.commit()?;
        self.count_offline_time()?;
        self.checkpoint()?;
        Ok(())
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

// ---------------------------------------------------------------------------
// Create

// ---------------------------------------------------------------------------
// Mount

const _: () = assert!(FILE_NUMBER_USER_MIN as usize <= 256);
const _: () = assert!(TXN_IMAGES_MAX * 3 <= JOURNAL_TARGETS_MAX);

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::tables::{shared_aus, OwnedRun};
    use super::*;
    use cairn_format::DiskLabel;
    use cairn_io_sim::{geometry, SimEngine};

    const MIB: u64 = 1 << 20;
    const DISK_BYTES: u64 = 64 * MIB;

    /// Four labelled simulated disks in two failure groups (0, 1 in A; 2, 3 in B).
    pub(super) fn four_disks() -> (SimEngine, Vec<DeviceId>) {
        let mut sim = SimEngine::new(3, 64);
        let mut ids = Vec::new();
        for i in 0..4 {
            let d = sim.add_disk(geometry(DISK_BYTES, 4096, 4096, 512 << 10));
            labeling::write_label(
                &mut sim,
                d,
                &labeling::LabelSpec {
                    label: DiskLabel::parse(&format!("D{i}")).unwrap(),
                    disk_uuid: Uuid::from_u128(0xD0 + i as u128),
                    now_unix_seconds: 1,
                    generation: 1,
                },
            )
            .unwrap();
            ids.push(d);
        }
        (sim, ids)
    }

    /// A normal-redundancy group `T` with 1 MiB AUs over `ids`.
    pub(super) fn create_normal<'e>(engine: &'e mut dyn IoEngine, ids: &[DeviceId]) -> Group<'e> {
        let disks: Vec<NewDisk> = ids
            .iter()
            .enumerate()
            .map(|(i, d)| NewDisk {
                device: *d,
                failgroup: Some(if i < 2 { "A" } else { "B" }.into()),
            })
            .collect();
        create(
            engine,
            &disks,
            &GroupSpec {
                name: "T".into(),
                redundancy: Redundancy::Normal,
                au_bytes: MIB,
                sector_bytes: None,
                force: false,
                now_unix_seconds: 1,
                group_uuid: Uuid::from_u128(0x7E57),
            },
        )
        .unwrap()
    }

    /// Two blocks, each mirrored across the failure groups: P on disks 0 and
    /// 2, Q on disks 1 and 3. Disks 0 and 2 fail: Q is whole, P is on no copy,
    /// although only half of the disks failed. The write must not pass for
    /// durable.
    #[test]
    // One failing range is meant: `write_error_ranges` is a list of ranges.
    #[allow(clippy::single_range_in_vec_init)]
    fn a_durable_write_needs_a_copy_of_every_block_not_just_some_disks() {
        let (mut sim, ids) = four_disks();
        // An AU in the middle: nothing of the group's is there.
        let failing = 40 * MIB;
        for d in [ids[0], ids[2]] {
            sim.disk_mut(d).faults.write_error_ranges = vec![failing..failing + MIB];
        }
        let mut g = create_normal(&mut sim, &ids);
        let block = |b: u8| AlignedBuf::from_slice(&[b; BLOCK_BYTES]);
        let items = vec![
            DurableItem::block(
                "block P",
                vec![(0, failing, block(1)), (2, failing, block(1))],
            ),
            DurableItem::block(
                "block Q",
                vec![(1, failing, block(2)), (3, failing, block(2))],
            ),
        ];
        let err = g.write_durably(items, "test blocks").unwrap_err();
        assert!(
            matches!(err, GroupError::WriteFailed(_)),
            "a write failure is not a mount error: {err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("block P") && text.contains("D0") && text.contains("D2"),
            "names the block lost and the disks: {text}"
        );
        assert!(!text.contains("block Q"), "{text}");
    }

    fn run(file: u32, disk: u16, au: u64, len: u64) -> OwnedRun {
        OwnedRun {
            disk,
            au,
            len,
            file,
            index: 0,
            indirect: false,
            copy: 0,
        }
    }

    #[test]
    fn shared_aus_lists_every_claim_of_an_overlap_and_nothing_else() {
        let runs = [
            run(1, 0, 10, 4), // 10..14
            run(2, 0, 12, 4), // 12..16: 12, 13 shared with file 1
            run(2, 0, 13, 1), // file 2 claims 13 a second time
            run(3, 1, 12, 4), // another disk: no overlap
            run(4, 0, 16, 2), // adjacent, not overlapping
        ];
        let shared = shared_aus(&runs);
        let mut got: Vec<((u16, u64), Vec<u32>)> = shared
            .into_iter()
            .map(|(k, mut v)| {
                v.sort_unstable();
                (k, v)
            })
            .collect();
        got.sort();
        assert_eq!(got, vec![((0, 12), vec![1, 2]), ((0, 13), vec![1, 2, 2])]);
    }
}
