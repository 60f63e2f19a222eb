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
//! Not here: rebalance, adding and dropping disks, bringing an offline disk back
//! (later work); the real-device plumbing (discovery, protection, locks) is in
//! [`crate::group_admin`].

mod alloc;
pub mod check;
mod files;

use std::collections::{BTreeMap, BTreeSet, HashMap};

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
pub use files::{CreateOptions, DirEntry, FileInfo, FileMap, MapPiece};

/// The journal ring's size. Bounded so replay is bounded: at most this much is
/// read and rewritten at mount.
pub const JOURNAL_BYTES: u64 = 4 << 20;
/// A continuing operation commits a step once it has dirtied this many blocks.
pub const STEP_DIRTY_MAX: usize = 24;
/// Most blocks one transaction may carry (a step can overshoot STEP_DIRTY_MAX by
/// what one extent touches: its entry, an indirect block, and two table blocks
/// per copy).
pub const TXN_IMAGES_MAX: usize = 64;
/// Blocks of an allocation table read per request at mount (1 MiB).
const TABLE_READ_BLOCKS_MAX: u64 = 256;
/// Default AU size.
pub const AU_BYTES_DEFAULT: u64 = 4 << 20;

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
    #[error("{0}")]
    Mount(String),
    /// A write that must be durable reached no copy of some block.
    #[error("{0}")]
    WriteFailed(String),
    #[error("the group stopped after a failed metadata write ({0}); mount it again to recover")]
    Poisoned(String),
    /// A change asked of a group mounted read-only.
    #[error("group {0} is mounted read-only (by a listing or inspecting command); this change needs a command that writes")]
    ReadOnly(String),
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
#[derive(Debug, Clone, Default, Serialize)]
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
}

/// One member disk as the mounted group knows it.
#[derive(Debug)]
struct Member {
    entry: DiskEntry,
    device: Option<DeviceId>,
    /// `None` while offline.
    alloc: Option<DiskAlloc>,
    needs_flush: bool,
}

impl Member {
    fn online(&self) -> Option<DeviceId> {
        match (self.entry.state, self.device) {
            (DiskState::Online, Some(d)) if self.alloc.is_some() => Some(d),
            _ => None,
        }
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

/// A metadata block the current transaction changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Dirty {
    Summary { disk: u16, index: u64 },
    Bitmap { disk: u16, index: u64 },
    Entry(u32),
    Indirect { file: u32, block: u64 },
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

/// A mounted disk group.
pub struct Group<'e> {
    engine: &'e mut dyn IoEngine,
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
    aliases: BTreeMap<u32, AliasRecord>,
    alias_index: HashMap<(u32, String), u32>,
    templates: Vec<Template>,
    attributes: Vec<(String, String)>,
    journal: JournalState,
    dirty: BTreeSet<Dirty>,
    poisoned: Option<String>,
    clock: fn() -> u64,
    /// Disks whose allocation table could not be read: rebuilt from the
    /// extent maps once those are loaded.
    tables_to_rebuild: Vec<u16>,
    /// A freed AU held journaled blocks (an indirect AU): records in the ring
    /// still target it, so the ring must be checkpointed before it is reused.
    checkpoint_before_reuse: bool,
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
    /// Directory ids that names give as their parent but that no name has
    /// (their alias block was lost): never handed out again, or the lost
    /// directory's children would appear in the new one. Set at mount and
    /// after a repair.
    orphan_parents: BTreeSet<u32>,
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
}

fn system_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Default templates, by file type (as ASM ships them): online logs and control
/// files are fine-striped, everything else coarse; 0 copies = the group's.
pub fn default_templates() -> Vec<Template> {
    let fine = ["CONTROLFILE", "ONLINELOG"];
    [
        "DEFAULT",
        "DATAFILE",
        "TEMPFILE",
        "ONLINELOG",
        "CONTROLFILE",
        "ARCHIVELOG",
        "BACKUPSET",
        "PARAMETERFILE",
        "FLASHBACK",
        "DATAGUARDCONFIG",
        "CHANGETRACKING",
        "DUMPSET",
        "XTRANSPORT",
        "AUTOBACKUP",
    ]
    .iter()
    .map(|name| Template {
        name: (*name).to_string(),
        copies: 0,
        striping: if fine.contains(name) {
            STRIPING_FINE
        } else {
            STRIPING_COARSE
        },
    })
    .collect()
}

fn io_err(disk: impl Into<String>) -> impl FnOnce(IoError) -> GroupError {
    let disk = disk.into();
    move |error| GroupError::Io { disk, error }
}

fn corrupt(e: impl std::fmt::Display) -> GroupError {
    GroupError::Corrupt(e.to_string())
}

impl<'e> Group<'e> {
    /// A group in memory with its identity and members, nothing loaded yet:
    /// the common start of `create` and `mount`. Only the superblock's group
    /// fields are used (not its disk number or bootstrap extent).
    fn assemble(
        engine: &'e mut dyn IoEngine,
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
            aliases: BTreeMap::new(),
            alias_index: HashMap::new(),
            templates: Vec::new(),
            attributes: Vec::new(),
            journal: JournalState {
                header_generation: 0,
                next_seq: 1,
                position: JOURNAL_HEADER_BLOCKS,
                capacity_blocks: 0,
                prev_checksum: 0,
            },
            dirty: BTreeSet::new(),
            poisoned: None,
            clock: system_clock,
            tables_to_rebuild: Vec::new(),
            checkpoint_before_reuse: false,
            repaired_copies: 0,
            failed_disks: BTreeSet::new(),
            shared_aus: BTreeMap::new(),
            lost: BTreeMap::new(),
            orphan_parents: BTreeSet::new(),
            short_disks: Vec::new(),
            read_only: false,
            taken_offline: Vec::new(),
            overlay: BTreeMap::new(),
            copies_left_damaged: 0,
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
        self.engine
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

    fn check_usable(&self) -> Result<(), GroupError> {
        match &self.poisoned {
            Some(why) => Err(GroupError::Poisoned(why.clone())),
            None => Ok(()),
        }
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

    /// Run writes (disk, offset, buffer) concurrently. Returns the disks whose
    /// writes failed; writes to offline disks are skipped.
    fn write_many(&mut self, writes: Vec<(u16, u64, AlignedBuf)>) -> Result<Vec<u16>, GroupError> {
        assert!(
            !self.read_only || writes.is_empty(),
            "invariant: a read-only mount never writes"
        );
        let mut requests = Vec::with_capacity(writes.len());
        let mut disk_of = Vec::with_capacity(writes.len());
        for (disk, offset_bytes, buf) in writes {
            let Some(device) = self.member(disk).and_then(Member::online) else {
                continue;
            };
            disk_of.push(disk);
            requests.push(Request {
                device,
                tag: requests.len() as u64,
                op: Op::Write {
                    offset_bytes,
                    buf,
                    fua: false,
                },
            });
        }
        let completions = self
            .engine
            .execute_all(requests)
            .map_err(io_err("(engine)"))?;
        let mut failed = BTreeSet::new();
        for (completion, disk) in completions.into_iter().zip(disk_of) {
            match completion.result {
                Ok(_) => {
                    if let Some(m) = self.member_mut(disk) {
                        m.needs_flush = true;
                    }
                }
                Err(_) => {
                    failed.insert(disk);
                }
            }
        }
        Ok(failed.into_iter().collect())
    }

    /// Flush the given disks (all online ones that need it when `None`).
    fn flush_disks(&mut self, only: Option<&BTreeSet<u16>>) -> Result<Vec<u16>, GroupError> {
        let mut requests = Vec::new();
        let mut disk_of = Vec::new();
        for (n, m) in self.members.iter().enumerate() {
            let Some(m) = m else { continue };
            let Some(device) = m.online() else { continue };
            let n = n as u16;
            let wanted = match only {
                Some(set) => set.contains(&n),
                None => m.needs_flush,
            };
            if wanted {
                disk_of.push(n);
                requests.push(Request {
                    device,
                    tag: requests.len() as u64,
                    op: Op::Flush,
                });
            }
        }
        let completions = self
            .engine
            .execute_all(requests)
            .map_err(io_err("(engine)"))?;
        let mut failed = Vec::new();
        for (completion, disk) in completions.into_iter().zip(disk_of) {
            match completion.result {
                Ok(_) => {
                    if let Some(m) = self.member_mut(disk) {
                        m.needs_flush = false;
                    }
                }
                Err(_) => failed.push(disk),
            }
        }
        Ok(failed)
    }

    fn read_one(
        &mut self,
        disk: u16,
        offset_bytes: u64,
        len: usize,
    ) -> Result<AlignedBuf, IoError> {
        let device = self
            .member(disk)
            .and_then(Member::online)
            .ok_or(IoError::UnknownDevice(DeviceId(u32::from(disk))))?;
        let mut buf = self.engine.read_at(device, offset_bytes, len)?;
        // Blocks start at 4 KiB multiples: look back one block for an image
        // that begins before the range.
        let from = offset_bytes.saturating_sub(BLOCK_BYTES as u64 - 1);
        for ((_, at), image) in self
            .overlay
            .range((disk, from)..(disk, offset_bytes + len as u64))
        {
            let start = (*at).max(offset_bytes);
            let end = (*at + BLOCK_BYTES as u64).min(offset_bytes + len as u64);
            if start < end {
                buf[(start - offset_bytes) as usize..(end - offset_bytes) as usize]
                    .copy_from_slice(&image[(start - at) as usize..(end - at) as usize]);
            }
        }
        Ok(buf)
    }

    /// Read a metadata block that has copies at `places`: the valid copy with
    /// the newest generation wins (a lost or misdirected in-place write leaves
    /// an older, checksum-valid copy on a mirror, which must never be served
    /// or spread); a blank copy counts only if no copy is valid. Bad, blank and
    /// older copies beside the winner are rewritten from it.
    fn read_meta(
        &mut self,
        places: &[(u16, u64)],
        id: BlockId,
    ) -> Result<Option<Box<Block>>, GroupError> {
        // (generation, block, place) of the newest valid copy so far.
        let mut newest: Option<(u64, Box<Block>, (u16, u64))> = None;
        let mut outdated = Vec::new();
        let mut bad = Vec::new();
        let mut blank = Vec::new();
        let mut problems = Vec::new();
        let mut unreadable = false;
        for &(disk, offset) in places {
            if self.member(disk).and_then(Member::online).is_none() {
                continue;
            }
            match self.read_one(disk, offset, BLOCK_BYTES) {
                Ok(buf) => match meta::open(&buf[..], id, self.uuid) {
                    Ok(generation) => {
                        if newest.as_ref().is_none_or(|(g, _, _)| generation > *g) {
                            let mut block = meta::empty_block();
                            block.copy_from_slice(&buf[..]);
                            if let Some((_, _, place)) =
                                newest.replace((generation, block, (disk, offset)))
                            {
                                outdated.push(place);
                            }
                        } else if newest
                            .as_ref()
                            .is_some_and(|(g, b, _)| generation < *g || b[..] != buf[..])
                        {
                            outdated.push((disk, offset));
                        }
                    }
                    Err(MetaError::Blank) => blank.push((disk, offset)),
                    Err(e) => {
                        problems.push(format!("{} at {offset}: {e}", self.disk_name(disk)));
                        bad.push((disk, offset));
                    }
                },
                Err(e) => {
                    problems.push(format!("{} at {offset}: {e}", self.disk_name(disk)));
                    bad.push((disk, offset));
                    unreadable = true;
                }
            }
        }
        match newest {
            Some((_, block, _)) => {
                let rewrite: Vec<(u16, u64)> =
                    bad.into_iter().chain(blank).chain(outdated).collect();
                if self.read_only {
                    self.copies_left_damaged += rewrite.len() as u64;
                } else if !rewrite.is_empty() {
                    self.repaired_copies += rewrite.len() as u64;
                    let writes = rewrite
                        .into_iter()
                        .map(|(d, o)| (d, o, AlignedBuf::from_slice(&block[..])))
                        .collect();
                    let failed = self.write_many(writes)?;
                    self.failed_disks.extend(failed);
                }
                Ok(Some(block))
            }
            None if problems.is_empty() => Ok(None),
            None if !blank.is_empty() && bad.is_empty() => Ok(None),
            // A copy that could not be read may be whole once its disk
            // answers again: that is an I/O problem, not a loss.
            None if unreadable => Err(GroupError::Unreadable(format!(
                "{id} could not be read from any copy ({}); check the disks and the kernel log (dmesg)",
                problems.join("; ")
            ))),
            None => Err(GroupError::Lost(format!(
                "{id} has no valid copy on any disk ({})",
                problems.join("; ")
            ))),
        }
    }

    // -----------------------------------------------------------------------
    // Where metadata lives

    /// Physical places of block `block` of a metadata file (all copies).
    fn file_block_places(&self, file: u32, block: u64) -> Vec<(u16, u64)> {
        let rec = self
            .files
            .get(&file)
            .expect("invariant: metadata files exist");
        let extent = &rec.extents[(block / self.blocks_per_au()) as usize];
        let within = (block % self.blocks_per_au()) * BLOCK_BYTES as u64;
        extent
            .copies()
            .iter()
            .map(|c| (c.disk, u64::from(c.au) * self.au_bytes + within))
            .collect()
    }

    fn indirect_places(&self, file: u32, block: u64) -> Vec<(u16, u64)> {
        let rec = &self.files[&file];
        let pointer = &rec.entry.indirect[(block / self.blocks_per_au()) as usize];
        let within = (block % self.blocks_per_au()) * BLOCK_BYTES as u64;
        pointer
            .copies()
            .iter()
            .map(|c| (c.disk, u64::from(c.au) * self.au_bytes + within))
            .collect()
    }

    fn dirty_id_and_places(&self, d: Dirty) -> (BlockId, Vec<(u16, u64)>) {
        let file_block = |file: u32, block_type: BlockType, owner_tag: u32, index: u64| {
            (
                BlockId {
                    block_type,
                    owner: file,
                    owner_tag,
                    index,
                },
                self.file_block_places(file, index),
            )
        };
        match d {
            Dirty::Summary { disk, index } => {
                let layout = self.layout_of(disk);
                let offset = layout.summary_offset_bytes(index);
                (
                    per_disk_id(BlockType::AtSummary, disk, offset),
                    vec![(disk, offset)],
                )
            }
            Dirty::Bitmap { disk, index } => {
                let layout = self.layout_of(disk);
                let offset = layout.bitmap_offset_bytes(index);
                (
                    per_disk_id(BlockType::AtBitmap, disk, offset),
                    vec![(disk, offset)],
                )
            }
            Dirty::Entry(n) => {
                let (mut id, places) =
                    file_block(FILE_DIRECTORY, BlockType::FileEntry, 0, u64::from(n));
                id.owner = FILE_DIRECTORY;
                (id, places)
            }
            Dirty::Indirect { file, block } => {
                let incarnation = self.files.get(&file).map_or(0, |r| r.entry.incarnation);
                (
                    BlockId {
                        block_type: BlockType::Indirect,
                        owner: file,
                        owner_tag: incarnation,
                        index: block,
                    },
                    self.indirect_places(file, block),
                )
            }
            Dirty::Alias(block) => file_block(FILE_ALIAS_DIRECTORY, BlockType::Alias, 0, block),
            Dirty::Templates => file_block(FILE_TEMPLATES, BlockType::Template, 0, 0),
            Dirty::Attributes => file_block(FILE_ATTRIBUTES, BlockType::Attribute, 0, 0),
        }
    }

    fn layout_of(&self, disk: u16) -> AtLayout {
        self.member(disk)
            .and_then(|m| m.alloc.as_ref())
            .map(|a| a.layout)
            .expect("invariant: table blocks are dirtied on online disks only")
    }

    /// The block image for a dirty address, sealed with `generation`. A file
    /// entry or alias block that became empty is sealed with an empty payload
    /// (free): it carries a generation, so a stale copy of what it held
    /// before, left on a mirror by a lost write, is recognised as older.
    fn encode_dirty(&self, d: Dirty, generation: u64) -> Box<Block> {
        let (id, _) = self.dirty_id_and_places(d);
        let mut block = meta::empty_block();
        match d {
            Dirty::Summary { disk, index } => {
                let alloc = self.member(disk).and_then(|m| m.alloc.as_ref());
                let alloc = alloc.expect("invariant: online disk");
                fmt::encode_summary(&mut block, alloc.summary_counts(index));
            }
            Dirty::Bitmap { disk, index } => {
                let alloc = self.member(disk).and_then(|m| m.alloc.as_ref());
                let alloc = alloc.expect("invariant: online disk");
                fmt::encode_bitmap(&mut block, alloc.bitmap_bytes(index));
            }
            Dirty::Entry(n) => {
                if let Some(rec) = self.files.get(&n) {
                    self.encode_entry(rec, &mut block);
                }
            }
            Dirty::Indirect { file, block: index } => {
                let rec = &self.files[&file];
                let first = DIRECT_EXTENTS + index as usize * EXTENTS_PER_INDIRECT_BLOCK;
                let last = (first + EXTENTS_PER_INDIRECT_BLOCK).min(rec.extents.len());
                fmt::encode_indirect(&mut block, rec.extents.get(first..last).unwrap_or(&[]));
            }
            Dirty::Alias(index) => {
                let first = (index * ALIASES_PER_BLOCK as u64 + 1) as u32;
                let last = first + ALIASES_PER_BLOCK as u32;
                let records: Vec<&AliasRecord> =
                    self.aliases.range(first..last).map(|(_, r)| r).collect();
                fmt::encode_alias_block(&mut block, index, &records);
            }
            Dirty::Templates => fmt::encode_templates(&mut block, &self.templates),
            Dirty::Attributes => fmt::encode_attributes(&mut block, &self.attributes),
        }
        meta::seal(&mut block, id, self.uuid, generation);
        block
    }

    fn encode_entry(&self, rec: &FileRec, block: &mut Block) {
        let mut entry = rec.entry.clone();
        entry.extent_count = rec.extents.len() as u64;
        entry.direct = rec.extents.iter().take(DIRECT_EXTENTS).copied().collect();
        entry.encode_into(block);
    }

    fn mark_table_dirty(&mut self) {
        let mut found = Vec::new();
        for (n, m) in self.members.iter_mut().enumerate() {
            if let Some(alloc) = m.as_mut().and_then(|m| m.alloc.as_mut()) {
                for b in alloc.take_dirty() {
                    found.push(match b {
                        alloc::AtBlock::Summary(index) => Dirty::Summary {
                            disk: n as u16,
                            index,
                        },
                        alloc::AtBlock::Bitmap(index) => Dirty::Bitmap {
                            disk: n as u16,
                            index,
                        },
                    });
                }
            }
        }
        self.dirty.extend(found);
    }

    fn dirty_count(&self) -> usize {
        self.dirty.len()
            + self
                .members
                .iter()
                .flatten()
                .filter_map(|m| m.alloc.as_ref())
                .map(DiskAlloc::dirty_count)
                .sum::<usize>()
    }

    // -----------------------------------------------------------------------
    // The transaction

    /// Make every change since the last commit durable and atomic.
    pub fn commit(&mut self) -> Result<(), GroupError> {
        self.check_writable()?;
        let result = self.commit_inner();
        if let Err(e) = &result {
            self.poisoned = Some(e.to_string());
        }
        result?;
        // Disks that failed during the commit are recorded offline before
        // anything can drop the record from the ring.
        self.offline_failed()?;
        if self.checkpoint_before_reuse {
            self.checkpoint()?;
            self.checkpoint_before_reuse = false;
        }
        self.discard_freed()?;
        self.offline_failed()
    }

    /// Commit a dirty set that may exceed one transaction (rebuilds and
    /// repairs of derived state, where each block stands on its own), in
    /// transactions of at most [`TXN_IMAGES_MAX`] blocks.
    fn commit_in_chunks(&mut self) -> Result<(), GroupError> {
        self.mark_table_dirty();
        let all: Vec<Dirty> = std::mem::take(&mut self.dirty).into_iter().collect();
        for chunk in all.chunks(TXN_IMAGES_MAX) {
            self.dirty.extend(chunk.iter().copied());
            self.commit()?;
        }
        self.commit()
    }

    /// Whether a dirty block is still part of the metadata: indirect blocks of
    /// a file that shrank or went away are not written.
    fn dirty_in_use(&self, d: &Dirty) -> bool {
        match d {
            Dirty::Indirect { file, block } => self.files.get(file).is_some_and(|f| {
                let used = (f.extents.len().saturating_sub(DIRECT_EXTENTS))
                    .div_ceil(EXTENTS_PER_INDIRECT_BLOCK);
                (*block as usize) < used
                    && ((*block / self.blocks_per_au()) as usize) < f.entry.indirect.len()
            }),
            Dirty::Summary { disk, .. } | Dirty::Bitmap { disk, .. } => {
                self.member(*disk).and_then(|m| m.alloc.as_ref()).is_some()
            }
            _ => true,
        }
    }

    fn commit_inner(&mut self) -> Result<(), GroupError> {
        self.mark_table_dirty();
        if self.dirty.is_empty() {
            return Ok(());
        }
        let dirty: Vec<Dirty> = std::mem::take(&mut self.dirty)
            .into_iter()
            .filter(|d| self.dirty_in_use(d))
            .collect();
        if dirty.is_empty() {
            return Ok(());
        }
        assert!(
            dirty.len() <= TXN_IMAGES_MAX,
            "invariant: a transaction carries at most {TXN_IMAGES_MAX} blocks, got {}",
            dirty.len()
        );
        let seq = self.journal.next_seq;
        let mut images = Vec::with_capacity(dirty.len());
        let mut targets = Vec::new();
        for (i, d) in dirty.iter().enumerate() {
            let (_, places) = self.dirty_id_and_places(*d);
            for (disk, offset_bytes) in places {
                targets.push(JournalTarget {
                    image: i as u16,
                    disk,
                    offset_bytes,
                });
            }
            images.push(self.encode_dirty(*d, seq));
        }
        assert!(
            targets.len() <= JOURNAL_TARGETS_MAX,
            "invariant: targets fit a record"
        );
        let record_blocks = 1 + images.len() as u64;
        if self.journal.position + record_blocks > self.journal.capacity_blocks {
            self.checkpoint()?;
        }
        // Barrier: data and zeroing written before this metadata change must be
        // durable before the change is (an extent marked initialised must never
        // expose an AU's old contents).
        self.flush_all_checked()?;

        let record = JournalRecord {
            seq,
            prev_checksum: self.journal.prev_checksum,
            image_count: images.len() as u16,
            images_crc: images_crc(&images.iter().map(|b| &**b).collect::<Vec<_>>()),
            targets: targets.clone(),
        };
        let mut header = meta::empty_block();
        record.encode_into(&mut header);
        let position = self.journal.position;
        meta::seal(
            &mut header,
            journal_id(BlockType::JournalRecord, position),
            self.uuid,
            seq,
        );
        let mut items = Vec::new();
        for (k, block) in std::iter::once(&header).chain(images.iter()).enumerate() {
            let index = position + k as u64;
            let copies = self
                .file_block_places(FILE_JOURNAL, index)
                .into_iter()
                .map(|(disk, offset)| (disk, offset, AlignedBuf::from_slice(&block[..])))
                .collect();
            items.push(DurableItem::block(format!("journal block {index}"), copies));
        }
        self.write_durably(items, &format!("journal record {seq}"))?;

        self.journal.position += record_blocks;
        self.journal.next_seq += 1;
        self.journal.prev_checksum = meta::checksum_of(&header[..]);

        self.write_in_place(&targets, |i| &images[i][..])
    }

    /// Write a journal record's images to their places (commit, and replay).
    /// Disks that fail are noted for offlining.
    fn write_in_place<'b>(
        &mut self,
        targets: &[JournalTarget],
        image: impl Fn(usize) -> &'b [u8],
    ) -> Result<(), GroupError> {
        let writes = targets
            .iter()
            .map(|t| {
                (
                    t.disk,
                    t.offset_bytes,
                    AlignedBuf::from_slice(image(usize::from(t.image))),
                )
            })
            .collect();
        let failed = self.write_many(writes)?;
        self.failed_disks.extend(failed);
        Ok(())
    }

    /// Write `items` and flush their disks: every item must land, whole, on
    /// at least one of its copies (a copy on a disk that failed, or was
    /// offline, does not count), else the write did not happen and the group
    /// cannot go on. `what` names the set in the error.
    fn write_durably(&mut self, items: Vec<DurableItem>, what: &str) -> Result<(), GroupError> {
        let mut writes = Vec::new();
        let mut copy_disks: Vec<(String, Vec<u16>)> = Vec::with_capacity(items.len());
        for item in items {
            let mut disks = Vec::with_capacity(item.copies.len());
            for (disk, blocks) in item.copies {
                disks.push(disk);
                writes.extend(blocks.into_iter().map(|(o, b)| (disk, o, b)));
            }
            copy_disks.push((item.what, disks));
        }
        let written: BTreeSet<u16> = writes
            .iter()
            .map(|w| w.0)
            .filter(|d| self.member(*d).and_then(Member::online).is_some())
            .collect();
        let mut failed: BTreeSet<u16> = self.write_many(writes)?.into_iter().collect();
        let flushed: BTreeSet<u16> = written.difference(&failed).copied().collect();
        failed.extend(self.flush_disks(Some(&flushed))?);
        self.failed_disks.extend(failed.iter().copied());
        let lost: Vec<String> = copy_disks
            .iter()
            .filter(|(_, disks)| {
                !disks
                    .iter()
                    .any(|d| written.contains(d) && !failed.contains(d))
            })
            .map(|(item, disks)| {
                let names: Vec<String> = disks.iter().map(|d| self.disk_name(*d)).collect();
                format!("{item} (copies on {})", names.join(", "))
            })
            .collect();
        if lost.is_empty() {
            return Ok(());
        }
        Err(GroupError::WriteFailed(format!(
            "could not write the {what} to any copy of {}{}; the group stopped — check those disks and the kernel log (dmesg), then mount the group again",
            lost[0],
            match lost.len() {
                1 => String::new(),
                n => format!(" and {} more block(s)", n - 1),
            }
        )))
    }

    fn flush_all_checked(&mut self) -> Result<(), GroupError> {
        let failed = self.flush_disks(None)?;
        self.failed_disks.extend(failed);
        Ok(())
    }

    /// Make everything in place durable and start the journal ring afresh.
    fn checkpoint(&mut self) -> Result<(), GroupError> {
        self.flush_all_checked()?;
        // A disk whose in-place writes or flush failed holds stale blocks the
        // ring could still repair: it must be on record as offline before the
        // ring is reset.
        self.offline_failed()?;
        let header = JournalHeader {
            header_generation: self.journal.header_generation + 1,
            next_seq: self.journal.next_seq,
            ring_blocks: self.journal.capacity_blocks - JOURNAL_HEADER_BLOCKS,
        };
        let slot = header.header_generation % JOURNAL_HEADER_BLOCKS;
        let mut block = meta::empty_block();
        header.encode_into(&mut block);
        meta::seal(
            &mut block,
            journal_id(BlockType::JournalHeader, slot),
            self.uuid,
            header.header_generation,
        );
        let copies = self
            .file_block_places(FILE_JOURNAL, slot)
            .into_iter()
            .map(|(d, o)| (d, o, AlignedBuf::from_slice(&block[..])))
            .collect();
        self.write_durably(
            vec![DurableItem::block(
                format!("journal header slot {slot}"),
                copies,
            )],
            "journal header",
        )?;
        self.journal.header_generation = header.header_generation;
        self.journal.position = JOURNAL_HEADER_BLOCKS;
        self.journal.prev_checksum = 0;
        Ok(())
    }

    /// Tell the devices about AUs whose free state is now durable.
    fn discard_freed(&mut self) -> Result<(), GroupError> {
        let au = self.au_bytes;
        let mut requests = Vec::new();
        for m in self.members.iter_mut().flatten() {
            let device = m.online();
            let Some(alloc) = m.alloc.as_mut() else {
                continue;
            };
            let runs = alloc.release_quarantine();
            let Some(device) = device else { continue };
            for (start, len) in runs {
                requests.push(Request {
                    device,
                    tag: requests.len() as u64,
                    op: Op::Discard {
                        offset_bytes: u64::from(start) * au,
                        len_bytes: u64::from(len) * au,
                    },
                });
            }
        }
        // A device that refuses discard keeps the bytes; only the space report
        // shows it. Errors here never fail the operation.
        let _ = self
            .engine
            .execute_all(requests)
            .map_err(io_err("(engine)"))?;
        Ok(())
    }

    /// Take disks whose writes failed offline, if redundancy allows.
    fn offline_failed(&mut self) -> Result<(), GroupError> {
        let failed: Vec<u16> = std::mem::take(&mut self.failed_disks).into_iter().collect();
        if failed.is_empty() {
            return Ok(());
        }
        self.set_offline(&failed)
    }

    fn set_offline(&mut self, disks: &[u16]) -> Result<(), GroupError> {
        for d in disks {
            let newly = self
                .member(*d)
                .filter(|m| m.entry.state == DiskState::Online)
                .map(|m| {
                    format!(
                        "{} (failure group {}): an I/O to it failed",
                        m.entry.label, m.entry.failgroup
                    )
                });
            self.taken_offline.extend(newly);
            if let Some(m) = self.member_mut(*d) {
                m.entry.state = DiskState::Offline;
                m.alloc = None;
            }
        }
        if !self.redundancy_holds() {
            let why = format!(
                "lost disks {:?}: more failure groups than {} redundancy survives",
                disks.iter().map(|d| self.disk_name(*d)).collect::<Vec<_>>(),
                self.redundancy().as_str()
            );
            self.poisoned = Some(why.clone());
            return Err(GroupError::Poisoned(why));
        }
        // Memory now skips these disks; if the superblocks cannot say so, a
        // later mount would trust their stale blocks. Stop instead.
        if let Err(e) = self.write_superblocks() {
            self.poisoned = Some(e.to_string());
            return Err(e);
        }
        Ok(())
    }

    /// Failure groups with an offline member stay below the copy count.
    fn redundancy_holds(&self) -> bool {
        let down: BTreeSet<u16> = self
            .members
            .iter()
            .flatten()
            .filter(|m| m.online().is_none())
            .map(|m| m.entry.failgroup_id)
            .collect();
        down.len() < usize::from(self.copies)
    }

    // -----------------------------------------------------------------------
    // Superblocks

    fn disk_entries(&self) -> Vec<DiskEntry> {
        self.members
            .iter()
            .flatten()
            .map(|m| m.entry.clone())
            .collect()
    }

    fn superblock_for(&self, disk: u16) -> GroupSuper {
        GroupSuper {
            name: self.name.clone(),
            copies: self.copies,
            au_bytes: self.au_bytes as u32,
            logical_sector_bytes: self.sector_bytes,
            disk_number: disk,
            disk_count: self.members.len() as u16,
            created_unix_seconds: self.created_unix_seconds,
            features: self.features,
            file_directory: self.files[&FILE_DIRECTORY].extents[0],
        }
    }

    /// Write a new superblock generation (with the disk directory) to the slot
    /// it selects on every online disk.
    fn write_superblocks(&mut self) -> Result<(), GroupError> {
        self.slot_generation += 1;
        let generation = self.slot_generation;
        let base = SUPER_SLOT_OFFSETS_BYTES[(generation % 2) as usize];
        let entries = self.disk_entries();
        let dir_blocks = self.members.len().div_ceil(DISK_ENTRIES_PER_BLOCK);
        let mut copies = Vec::new();
        for n in 0..self.members.len() as u16 {
            if self.member(n).and_then(Member::online).is_none() {
                continue;
            }
            let mut writes = Vec::new();
            let mut block = meta::empty_block();
            self.superblock_for(n).encode_into(&mut block);
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
                fmt::encode_disk_directory(&mut block, i, &entries);
                meta::seal(
                    &mut block,
                    per_disk_id(BlockType::DiskDirectory, n, offset),
                    self.uuid,
                    generation,
                );
                writes.push((offset, AlignedBuf::from_slice(&block[..])));
            }
            copies.push((n, writes));
        }
        self.flush_all_checked()?;
        let item = DurableItem {
            what: format!("superblock generation {generation}"),
            copies,
        };
        self.write_durably(vec![item], "superblocks")
    }

    // -----------------------------------------------------------------------
    // Space

    fn disk_spaces(&self) -> Vec<DiskSpace> {
        self.members
            .iter()
            .enumerate()
            .filter_map(|(n, m)| {
                let m = m.as_ref()?;
                m.online()?;
                let alloc = m.alloc.as_ref()?;
                Some(DiskSpace {
                    disk: DiskNumber(n as u16),
                    failgroup: FailGroupId(m.entry.failgroup_id),
                    au_total: alloc.layout.data_aus(),
                    au_used: alloc.used_aus(),
                })
            })
            .collect()
    }

    /// Allocate extent `index` of a file with `copies` copies: choose disks
    /// (placement) and AU runs (allocator).
    fn allocate_extent(&mut self, copies: usize, index: u64) -> Result<Extent, GroupError> {
        let mut spaces = self.disk_spaces();
        let aus = placement::extent_aus(index);
        for _attempt in 0..spaces.len().max(1) {
            let choice = placement::place(&spaces, copies, index, 1)
                .map_err(|e| GroupError::NoSpace(e.to_string()))?;
            let disks = choice
                .into_iter()
                .next()
                .expect("invariant: one extent placed");
            let mut got = Vec::with_capacity(copies);
            let mut short = None;
            for d in &disks {
                let alloc = self
                    .member_mut(d.0)
                    .and_then(|m| m.alloc.as_mut())
                    .expect("invariant: placement picks online disks");
                match alloc.allocate(aus) {
                    Some(au) => got.push(AuAddr { disk: d.0, au }),
                    None => {
                        short = Some(d.0);
                        break;
                    }
                }
            }
            match short {
                None => return Ok(Extent::new(&got, false)),
                Some(full) => {
                    // Fragmented: no run of `aus` there. Undo, and let placement
                    // see that disk as full.
                    for a in got {
                        self.member_mut(a.disk)
                            .and_then(|m| m.alloc.as_mut())
                            .expect("invariant: online")
                            .mark(u64::from(a.au), aus, false);
                    }
                    for s in &mut spaces {
                        if s.disk.0 == full {
                            s.au_used = s.au_total;
                        }
                    }
                }
            }
        }
        Err(GroupError::NoSpace(format!(
            "no space: no run of {aus} free AUs on enough failure groups"
        )))
    }

    /// Free the AUs of extent `index` (or an indirect AU) of file `file`. An
    /// AU another extent map also claims (damage found at mount) stays used,
    /// for the other owner, instead of being freed under it.
    fn free_extent(&mut self, file: u32, extent: &Extent, index: u64) {
        let aus = placement::extent_aus(index) as u32;
        for c in extent.copies() {
            let run = u64::from(c.au)..u64::from(c.au) + u64::from(aus);
            let shared: Vec<u64> = self
                .shared_aus
                .range((c.disk, run.start)..(c.disk, run.end))
                .map(|((_, au), _)| *au)
                .collect();
            for au in &shared {
                let owners = self
                    .shared_aus
                    .get_mut(&(c.disk, *au))
                    .expect("invariant: listed above");
                if let Some(i) = owners.iter().position(|o| *o == file) {
                    owners.swap_remove(i);
                }
                if owners.len() <= 1 {
                    self.shared_aus.remove(&(c.disk, *au));
                }
            }
            let Some(alloc) = self.member_mut(c.disk).and_then(|m| m.alloc.as_mut()) else {
                continue;
            };
            if shared.is_empty() {
                alloc.free(c.au, aus);
                continue;
            }
            for au in run.filter(|a| !shared.contains(a)) {
                alloc.free(au as u32, 1);
            }
        }
    }

    /// Refuse to change file `number` while it claims an AU another file
    /// also claims: a write to one would land in the other.
    fn refuse_if_sharing(&self, number: u32) -> Result<(), GroupError> {
        if self.lost.contains_key(&LostBlock::Map(number)) {
            return Err(GroupError::Lost(format!(
                "{} has a damaged extent map, so it is not written; `cairn group check {} --repair` cuts it where its map ends, then it can be",
                self.path_of(number),
                self.name
            )));
        }
        let Some(((disk, au), owners)) = self
            .shared_aus
            .iter()
            .find(|(_, owners)| owners.contains(&number))
        else {
            return Ok(());
        };
        let others: Vec<String> = owners
            .iter()
            .filter(|o| **o != number)
            .map(|o| self.path_of(*o))
            .collect();
        Err(GroupError::Corrupt(format!(
            "{} shares AU {au} of disk {} with {}: an extent map is damaged, so a write to one would land in the other; copy out what you need (`cairn cp`), then remove the damaged file with `cairn rm`",
            self.path_of(number),
            self.disk_name(*disk),
            if others.is_empty() {
                "itself".to_string()
            } else {
                others.join(", ")
            }
        )))
    }

    // -----------------------------------------------------------------------
    // Listing

    /// Figures for `cairn group list`.
    pub fn space(&self) -> GroupSpace {
        let mut total = 0u64;
        let mut free = 0u64;
        let mut by_fg: BTreeMap<u16, (u64, u64)> = BTreeMap::new();
        let mut offline = 0;
        for m in self.members.iter().flatten() {
            let layout = AtLayout::for_disk(m.entry.size_bytes, self.au_bytes);
            let data = layout.map_or(0, |l| l.data_aus());
            total += data;
            match &m.alloc {
                Some(a) if m.online().is_some() => {
                    free += a.free_aus();
                    let e = by_fg.entry(m.entry.failgroup_id).or_default();
                    e.0 += data;
                    e.1 += a.free_aus();
                }
                _ => offline += 1,
            }
        }
        // AUs are whole MiB (1 to 64).
        let au_mb = self.au_bytes >> 20;
        // As asmcmd lsdg: to restore redundancy after losing failure groups,
        // normal keeps room for the largest one, high for the two largest.
        let mut fg_sizes: Vec<u64> = by_fg.values().map(|v| v.0).collect();
        fg_sizes.sort_unstable_by(|a, b| b.cmp(a));
        let copies = u64::from(self.copies);
        let required_mirror_free: u64 = fg_sizes.iter().take(self.copies as usize - 1).sum();
        // Negative when the group could not restore redundancy: lsdg's warning.
        let usable = (free as i64 - required_mirror_free as i64).div_euclid(copies as i64);
        GroupSpace {
            total_mb: total * au_mb,
            free_mb: free * au_mb,
            required_mirror_free_mb: required_mirror_free * au_mb,
            usable_file_mb: usable * au_mb as i64,
            offline_disks: offline,
        }
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
                    } else {
                        DiskState::Offline
                    },
                    missing: m.entry.state == DiskState::Online && m.device.is_none(),
                    device: m.device,
                    total_aus: layout.map_or(0, |l| l.data_aus()),
                    free_aus: m.alloc.as_ref().map(DiskAlloc::free_aus),
                    size_bytes: m.entry.size_bytes,
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
            if m.online().is_some() {
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
        self.checkpoint()?;
        Ok(())
    }
}

/// An AU run an extent map names: whose it is, for messages.
#[derive(Debug, Clone)]
pub(super) struct OwnedRun {
    pub disk: u16,
    pub au: u64,
    pub len: u64,
    pub file: u32,
    /// Extent index, or indirect pointer index when `indirect`.
    pub index: u64,
    pub indirect: bool,
    pub copy: usize,
}

impl OwnedRun {
    pub fn describe(&self) -> String {
        if self.indirect {
            format!(
                "file {} indirect AU {} copy {}",
                self.file, self.index, self.copy
            )
        } else {
            format!(
                "file {} extent {} copy {}",
                self.file, self.index, self.copy
            )
        }
    }
}

/// Space figures in MiB, as `asmcmd lsdg` shows them.
#[derive(Debug, Clone, Serialize)]
pub struct GroupSpace {
    pub total_mb: u64,
    pub free_mb: u64,
    /// Space needed to restore redundancy after losing the largest failure group.
    pub required_mirror_free_mb: u64,
    /// Free space usable for new files once mirroring and the above are allowed for.
    /// Negative when a failure could not be covered by free space.
    pub usable_file_mb: i64,
    pub offline_disks: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct DiskInfo {
    pub number: u16,
    pub label: String,
    pub failgroup: String,
    /// ONLINE, or OFFLINE when it is not in use (recorded offline, or missing).
    pub state: DiskState,
    /// Not found at mount, and not (yet) recorded offline: a read-only mount
    /// leaves the record to a command that writes.
    pub missing: bool,
    #[serde(skip)]
    pub device: Option<DeviceId>,
    pub total_aus: u64,
    pub free_aus: Option<u64>,
    pub size_bytes: u64,
    pub disk_uuid: Uuid,
}

fn per_disk_id(block_type: BlockType, disk: u16, offset_bytes: u64) -> BlockId {
    BlockId {
        block_type,
        owner: u32::from(disk),
        owner_tag: 0,
        index: offset_bytes / BLOCK_BYTES as u64,
    }
}

fn journal_id(block_type: BlockType, index: u64) -> BlockId {
    BlockId {
        block_type,
        owner: FILE_JOURNAL,
        owner_tag: 0,
        index,
    }
}

fn entry_id(file: u32) -> BlockId {
    BlockId {
        block_type: BlockType::FileEntry,
        owner: FILE_DIRECTORY,
        owner_tag: 0,
        index: u64::from(file),
    }
}

// ---------------------------------------------------------------------------
// Create

/// Create a group on labelled disks attached to `engine`, and return it mounted.
pub fn create<'e>(
    engine: &'e mut dyn IoEngine,
    disks: &[NewDisk],
    spec: &GroupSpec,
) -> Result<Group<'e>, GroupError> {
    let name = crate::names::GroupName::parse(&spec.name)?;
    let copies = spec.redundancy.copies();
    if !spec.au_bytes.is_power_of_two()
        || !(fmt::AU_BYTES_MIN..=fmt::AU_BYTES_MAX).contains(&spec.au_bytes)
    {
        return Err(GroupError::Invalid(format!(
            "AU size {} is not a power of two from 1M to 64M; use --au-size 1M, 2M, 4M ... 64M",
            spec.au_bytes
        )));
    }
    if disks.is_empty() {
        return Err(GroupError::Invalid(
            "a group needs at least one disk; name them with --disk".into(),
        ));
    }
    if disks.len() > DISKS_MAX {
        return Err(GroupError::Invalid(format!(
            "{} disks; a group holds at most {DISKS_MAX}",
            disks.len()
        )));
    }
    let mut headers: Vec<DiskHeader> = Vec::new();
    for d in disks {
        let scan =
            HeaderScan::read(engine, d.device).map_err(io_err(format!("device {}", d.device.0)))?;
        let header = scan
            .good()
            .map(|(_, h)| h.header.clone())
            .max_by_key(|h| h.generation)
            .ok_or_else(|| {
                GroupError::Invalid(format!(
                    "device {} carries no Cairn label; label it first",
                    d.device.0
                ))
            })?;
        if let Some(other) = header.group_uuid {
            if !spec.force {
                return Err(GroupError::Exists(format!(
                    "disk {} already belongs to group {other}; drop it from that group, or use --force to take it",
                    header.label
                )));
            }
        }
        headers.push(header);
    }
    // Sector sizes: 512e and 512n mix (both have 512-byte logical sectors); 4Kn does not mix with 512.
    let sector = spec.sector_bytes.unwrap_or(headers[0].logical_sector_bytes);
    if let Some(h) = headers.iter().find(|h| h.logical_sector_bytes != sector) {
        return Err(GroupError::Invalid(format!(
            "disk {} has {}-byte logical sectors but the group uses {sector}; 512-byte (512n/512e) and 4096-byte (4Kn) disks cannot mix",
            h.label, h.logical_sector_bytes
        )));
    }
    // Failure groups.
    let mut fg_ids: BTreeMap<String, u16> = BTreeMap::new();
    let mut members = Vec::new();
    for (n, (d, h)) in disks.iter().zip(&headers).enumerate() {
        let fg = d
            .failgroup
            .clone()
            .unwrap_or_else(|| h.label.as_str().to_string())
            .to_ascii_uppercase();
        crate::names::GroupName::parse(&fg)
            .map_err(|e| GroupError::Invalid(format!("failure group name: {e}")))?;
        let next = fg_ids.len() as u16;
        let fg_id = *fg_ids.entry(fg.clone()).or_insert(next);
        let layout = AtLayout::for_disk(h.device_size_bytes, spec.au_bytes).ok_or_else(|| {
            GroupError::Invalid(format!(
                "disk {} ({} bytes) is too small for {}-byte AUs",
                h.label, h.device_size_bytes, spec.au_bytes
            ))
        })?;
        members.push(Some(Member {
            entry: DiskEntry {
                number: n as u16,
                disk_uuid: h.disk_uuid,
                label: h.label.as_str().to_string(),
                failgroup: fg,
                failgroup_id: fg_id,
                state: DiskState::Online,
                au_count: layout.au_count,
                size_bytes: h.device_size_bytes,
                logical_sector_bytes: h.logical_sector_bytes,
                physical_sector_bytes: h.physical_sector_bytes,
                created_unix_seconds: spec.now_unix_seconds,
            },
            device: Some(d.device),
            alloc: Some(DiskAlloc::empty(layout)),
            needs_flush: false,
        }));
    }
    if fg_ids.len() < usize::from(copies) {
        return Err(GroupError::Invalid(format!(
            "{} redundancy keeps {copies} copies in different failure groups, but the disks form only {} failure group(s); name more disks or give them failure groups with PATH=FAILGROUP",
            spec.redundancy.as_str().to_lowercase(),
            fg_ids.len()
        )));
    }

    let mut group = Group::assemble(
        engine,
        GroupSuper {
            name: name.as_str().to_string(),
            copies,
            au_bytes: spec.au_bytes as u32,
            logical_sector_bytes: sector,
            disk_number: 0,
            disk_count: members.len() as u16,
            created_unix_seconds: spec.now_unix_seconds,
            features: FeatureSet::default(),
            file_directory: Extent::new(&[AuAddr { disk: 0, au: 1 }], false),
        },
        spec.group_uuid,
        0,
        members,
    );
    group.templates = default_templates();
    group.attributes = group.default_attributes();

    // Metadata files: extents placed like any file's.
    let journal_extents = JOURNAL_BYTES.div_ceil(spec.au_bytes);
    for (file, extents) in [
        (FILE_DIRECTORY, 1),
        (FILE_JOURNAL, journal_extents),
        (FILE_ALIAS_DIRECTORY, 1),
        (FILE_TEMPLATES, 1),
        (FILE_ATTRIBUTES, 1),
    ] {
        let mut list = Vec::new();
        for i in 0..extents {
            let mut e = group.allocate_extent(usize::from(copies), i)?;
            e.initialized = true;
            list.push(e);
        }
        group.files.insert(
            file,
            FileRec {
                entry: FileEntry {
                    number: file,
                    incarnation: 0,
                    state: FileState::Active,
                    copies,
                    striping: STRIPING_COARSE,
                    size_bytes: extents * spec.au_bytes,
                    extent_count: extents,
                    target_bytes: 0,
                    created_unix_seconds: spec.now_unix_seconds,
                    modified_unix_seconds: spec.now_unix_seconds,
                    template: String::new(),
                    direct: Vec::new(),
                    indirect: Vec::new(),
                },
                extents: list,
            },
        );
    }
    group.journal.capacity_blocks = journal_extents * group.blocks_per_au();

    // The AUs just taken may hold anything: metadata files read "all zeros =
    // empty", so zero them before anything points at them.
    group.zero_metadata_extents(&[
        FILE_DIRECTORY,
        FILE_ALIAS_DIRECTORY,
        FILE_TEMPLATES,
        FILE_ATTRIBUTES,
    ])?;

    // Everything but the superblocks goes straight to its place: nothing refers
    // to it until the superblocks do.
    group.mark_table_dirty();
    for f in [
        FILE_DIRECTORY,
        FILE_JOURNAL,
        FILE_ALIAS_DIRECTORY,
        FILE_TEMPLATES,
        FILE_ATTRIBUTES,
    ] {
        group.dirty.insert(Dirty::Entry(f));
    }
    group.dirty.insert(Dirty::Templates);
    group.dirty.insert(Dirty::Attributes);
    let dirty: Vec<Dirty> = std::mem::take(&mut group.dirty).into_iter().collect();
    let mut items = Vec::new();
    for d in dirty {
        let (id, places) = group.dirty_id_and_places(d);
        let block = group.encode_dirty(d, 0);
        let copies = places
            .into_iter()
            .map(|(disk, offset)| (disk, offset, AlignedBuf::from_slice(&block[..])))
            .collect();
        items.push(DurableItem::block(id.to_string(), copies));
    }
    group.write_durably(items, "initial metadata")?;
    group.checkpoint()?;

    // The disk headers name the group, then the superblocks make it exist.
    // A crash before any superblock leaves a group that never finished —
    // headers naming a group no disk holds a superblock of — which mount
    // refuses to guess at and `group create --force` takes again; a crash
    // among the superblock writes leaves a whole group (every disk's header
    // names it, and one superblock lists them all), whose next mount writes
    // the superblocks that are missing.
    for m in group.members.iter().flatten() {
        let device = m.device.expect("invariant: new disks are attached");
        let scan = HeaderScan::read(group.engine, device).map_err(io_err(m.entry.label.clone()))?;
        let mut header = scan
            .good()
            .map(|(_, h)| h.header.clone())
            .max_by_key(|h| h.generation)
            .ok_or_else(|| {
                GroupError::Invalid(format!(
                    "disk {} lost its label during create",
                    m.entry.label
                ))
            })?;
        header.group_uuid = Some(group.uuid);
        header.generation = scan.generation_max() + 1;
        header.written_unix_seconds = spec.now_unix_seconds;
        let all: Vec<usize> = (0..header.copy_offsets_bytes.len()).collect();
        labeling::write_copies(group.engine, device, &header, &all).map_err(|e| {
            GroupError::Invalid(format!(
                "disk {}: writing the group into its header: {e}",
                m.entry.label
            ))
        })?;
    }
    group.write_superblocks()?;
    Ok(group)
}

impl Group<'_> {
    /// The attributes a new group starts with.
    fn default_attributes(&self) -> Vec<(String, String)> {
        vec![
            ("au_size".into(), self.au_bytes.to_string()),
            ("sector_size".into(), self.sector_bytes.to_string()),
            ("compatible.cairn".into(), "0.1".into()),
            ("content.type".into(), "data".into()),
        ]
    }

    /// One line per lost metadata block: what it held, what is affected,
    /// and the step that helps.
    fn describe_lost(&self) -> Vec<String> {
        let repair = format!("`cairn group check {} --repair`", self.name);
        self.lost
            .iter()
            .map(|(block, why)| match block {
                LostBlock::Entry(n) => {
                    let names = self.names_of(*n);
                    format!(
                        "file {n} is lost: {why}. Its extent map went with it, so its data cannot be reached; {}. {repair} removes {} and frees its space",
                        if names.is_empty() {
                            "it had no name".to_string()
                        } else {
                            format!("its names: {}", names.join(", "))
                        },
                        if names.len() == 1 { "that name" } else { "its names" }
                    )
                }
                LostBlock::Map(n) => format!(
                    "{} has a damaged extent map: {why}. It is not written until {repair} cuts it there (what lay past that point cannot be placed in the file any more)",
                    self.path_of(*n)
                ),
                LostBlock::Alias(k) => format!(
                    "alias block {k} is lost: {why}. The names it held (ids {} to {}) are gone; the files are not: {repair} names each file left without one in +{}/lost+found",
                    k * ALIASES_PER_BLOCK as u64 + 1,
                    (k + 1) * ALIASES_PER_BLOCK as u64,
                    self.name
                ),
                LostBlock::Templates => format!(
                    "the templates block is lost: {why}. The default templates are used; {repair} writes them"
                ),
                LostBlock::Attributes => format!(
                    "the attributes block is lost: {why}. The defaults are used; {repair} writes them"
                ),
            })
            .collect()
    }

    /// Zero every AU of the given metadata files on every copy.
    fn zero_metadata_extents(&mut self, files: &[u32]) -> Result<(), GroupError> {
        let extents: Vec<(Extent, u64)> = files
            .iter()
            .flat_map(|f| self.files[f].extents.iter().map(|e| (*e, self.au_bytes)))
            .collect();
        self.zero_whole_extents(&extents);
        match self.failed_disks.first() {
            Some(d) => Err(GroupError::Invalid(format!(
                "disk {} failed while the group was being created; check it",
                self.disk_name(*d)
            ))),
            None => Ok(()),
        }
    }

    /// Make every online copy of whole extents (extent, length) read as zeros:
    /// by discard where the device guarantees zeros after it (a hole in a thin
    /// file or LUN, which also hands the space back), else by write-zeroes. A
    /// disk that fails is noted for offlining.
    fn zero_whole_extents(&mut self, extents: &[(Extent, u64)]) {
        let mut requests = Vec::new();
        let mut disks = Vec::new();
        for (extent, len_bytes) in extents {
            for c in extent.copies() {
                let Some(device) = self.member(c.disk).and_then(Member::online) else {
                    continue;
                };
                let offset_bytes = u64::from(c.au) * self.au_bytes;
                let len_bytes = *len_bytes;
                let discard_zeroes = matches!(
                    self.engine.geometry(device).map(|g| g.discard),
                    Some(cairn_io::geometry::DiscardSupport::Supported {
                        reads_zeroes: true,
                        ..
                    })
                );
                disks.push(c.disk);
                requests.push(Request {
                    device,
                    tag: requests.len() as u64,
                    op: if discard_zeroes {
                        Op::Discard {
                            offset_bytes,
                            len_bytes,
                        }
                    } else {
                        Op::WriteZeroes {
                            offset_bytes,
                            len_bytes,
                        }
                    },
                });
            }
        }
        self.run_zeroing(requests, disks);
    }

    /// Run zeroing requests; the disks written need a flush, the ones that
    /// failed go offline after the step.
    fn run_zeroing(&mut self, requests: Vec<Request>, disks: Vec<u16>) {
        let completions = match self.engine.execute_all(requests) {
            Ok(c) => c,
            Err(_) => {
                self.failed_disks.extend(disks);
                return;
            }
        };
        for (c, disk) in completions.into_iter().zip(disks) {
            match c.result {
                Ok(_) => {
                    if let Some(m) = self.member_mut(disk) {
                        m.needs_flush = true;
                    }
                }
                Err(_) => {
                    self.failed_disks.insert(disk);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Mount

/// Which group to mount.
#[derive(Debug, Clone)]
pub enum GroupSelector {
    Name(String),
    Uuid(Uuid),
}

/// A superblock slot read from one disk.
#[derive(Debug, Clone)]
struct SlotRead {
    generation: u64,
    sup: GroupSuper,
    entries: Vec<DiskEntry>,
}

fn read_slot(
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
fn slot_damaged(engine: &mut dyn IoEngine, device: DeviceId, group: Uuid, base: u64) -> bool {
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

/// Mount a group from the devices attached to `engine` (any order, any names).
/// A member that is online in the group's metadata but not among `devices`
/// is marked offline, for good (there is no resync), as a lost disk must be.
pub fn mount<'e>(
    engine: &'e mut dyn IoEngine,
    devices: &[DeviceId],
    selector: &GroupSelector,
) -> Result<(Group<'e>, MountReport), GroupError> {
    mount_with(engine, devices, selector, MissingDisks::MarkOffline)
}

/// What a mount does with a member that is online in the group's metadata
/// but not among the devices it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingDisks {
    /// Mark it offline (for good) and mount degraded: the disk is lost.
    MarkOffline,
    /// Refuse to mount, writing nothing: for a caller that only borrows the
    /// group (a benchmark) and must not turn a typo in a discovery string
    /// into a lost disk.
    Refuse,
}

/// [`mount`], choosing what a missing member means.
pub fn mount_with<'e>(
    engine: &'e mut dyn IoEngine,
    devices: &[DeviceId],
    selector: &GroupSelector,
    missing_disks: MissingDisks,
) -> Result<(Group<'e>, MountReport), GroupError> {
    mount_inner(engine, devices, selector, missing_disks, false)
}

/// Mount for listing and inspecting: nothing is written, ever. A member not
/// among `devices` is missing (the group is degraded in memory) but not
/// marked offline; journal records a crash left are applied in memory, not
/// replayed onto the disks; damaged metadata copies are reported, not
/// rewritten; unfinished operations are left for the next writer. Every
/// change is refused ([`GroupError::ReadOnly`]).
pub fn mount_read_only<'e>(
    engine: &'e mut dyn IoEngine,
    devices: &[DeviceId],
    selector: &GroupSelector,
) -> Result<(Group<'e>, MountReport), GroupError> {
    mount_inner(engine, devices, selector, MissingDisks::MarkOffline, true)
}

fn mount_inner<'e>(
    engine: &'e mut dyn IoEngine,
    devices: &[DeviceId],
    selector: &GroupSelector,
    missing_disks: MissingDisks,
    read_only: bool,
) -> Result<(Group<'e>, MountReport), GroupError> {
    let found = identify(engine, devices);
    let mut matching: Vec<(Uuid, Vec<FoundDisk>)> = found
        .into_iter()
        .filter(|(uuid, disks)| match selector {
            GroupSelector::Uuid(u) => u == uuid,
            GroupSelector::Name(n) => disks.iter().any(|(_, _, s)| {
                s.as_ref()
                    .is_some_and(|(_, sup)| sup.name.eq_ignore_ascii_case(n))
            }),
        })
        .collect();
    let wanted = match selector {
        GroupSelector::Name(n) => n.to_ascii_uppercase(),
        GroupSelector::Uuid(u) => u.to_string(),
    };
    let (uuid, disks) = match matching.len() {
        0 => {
            return Err(GroupError::NotFound(format!(
                "no disk group {wanted} on the discovered disks; `cairn group list` shows the groups found"
            )))
        }
        1 => matching.remove(0),
        _ => {
            return Err(GroupError::Mount(format!(
                "two groups are named {wanted} ({} and {}); mount one by UUID",
                matching[0].0, matching[1].0
            )))
        }
    };
    // The newest slot anywhere is the group's truth.
    let mut best: Option<SlotRead> = None;
    for (device, _, _) in &disks {
        for base in SUPER_SLOT_OFFSETS_BYTES {
            if let Some(slot) = read_slot(engine, *device, uuid, base) {
                if best.as_ref().is_none_or(|b| slot.generation > b.generation) {
                    best = Some(slot);
                }
            }
        }
    }
    let best = best.ok_or_else(|| {
        GroupError::Mount(format!("group {wanted}: no disk has a readable superblock; the group was never completely created, or its disks are damaged"))
    })?;
    let mut report = MountReport::default();
    let sup = best.sup.clone();
    let mut members: Vec<Option<Member>> = (0..sup.disk_count).map(|_| None).collect();
    let mut by_uuid: HashMap<Uuid, DeviceId> = HashMap::new();
    for (device, header, _) in &disks {
        if let Some(other) = by_uuid.insert(header.disk_uuid, *device) {
            // A copy of a member beside the member: either could be taken for
            // it, and writes through the wrong one are lost.
            return Err(GroupError::Mount(format!(
                "group {}: disk {} (uuid {}) is on two devices (#{} and #{}); one is a copy — hide it from discovery and try again",
                sup.name, header.label, header.disk_uuid, other.0, device.0
            )));
        }
    }
    let mut missing = Vec::new();
    let mut short = Vec::new();
    for entry in &best.entries {
        let mut device = by_uuid.get(&entry.disk_uuid).copied();
        // A member smaller than the group recorded (a truncated file, a
        // smaller device in its place) has lost what lay past its end: it
        // must not be read or written as if whole. It is treated as missing.
        if let Some(size) = device
            .and_then(|d| engine.geometry(d))
            .map(|g| g.size_bytes)
        {
            if size < entry.size_bytes && entry.state == DiskState::Online {
                short.push(format!(
                    "disk {} is {size} bytes, smaller than the {} bytes the group recorded for it (a truncated file, or a smaller device in its place): what lay past its end is gone, so it is treated as missing",
                    entry.label, entry.size_bytes
                ));
                device = None;
            }
        }
        let layout =
            AtLayout::for_disk(entry.size_bytes, u64::from(sup.au_bytes)).ok_or_else(|| {
                corrupt(format!(
                    "disk {} is too small for the group's AU size",
                    entry.label
                ))
            })?;
        let online = entry.state == DiskState::Online && device.is_some();
        if entry.state == DiskState::Online && device.is_none() {
            missing.push(entry.number);
        }
        let slot = members.get_mut(usize::from(entry.number)).ok_or_else(|| {
            corrupt(format!(
                "disk directory names disk {} of {}",
                entry.number, sup.disk_count
            ))
        })?;
        *slot = Some(Member {
            entry: entry.clone(),
            device,
            alloc: online.then(|| DiskAlloc::empty(layout)),
            needs_flush: false,
        });
    }
    if !missing.is_empty() && missing_disks == MissingDisks::Refuse {
        let names: Vec<String> = missing
            .iter()
            .filter_map(|d| members.get(usize::from(*d)).and_then(Option::as_ref))
            .map(|m| format!("{} (failure group {})", m.entry.label, m.entry.failgroup))
            .collect();
        return Err(GroupError::Mount(format!(
            "group {} is missing disk(s) {} among the discovered devices; nothing was changed — check the discovery string (--discover) and that the disks are attached",
            sup.name,
            names.join(", ")
        )));
    }
    let mut group = Group::assemble(engine, sup.clone(), uuid, best.generation, members);
    group.read_only = read_only;
    report.damage.extend(short.iter().cloned());
    group.short_disks = short;
    if !missing.is_empty() {
        for d in &missing {
            if let Some(m) = group.member_mut(*d) {
                // A reader leaves the record alone: the disk is only missing.
                if !read_only {
                    m.entry.state = DiskState::Offline;
                }
            }
        }
        let names: Vec<String> = missing
            .iter()
            .map(|d| {
                let m = group.member(*d).expect("invariant: listed");
                format!(
                    "{} (failure group {}, uuid {})",
                    m.entry.label, m.entry.failgroup, m.entry.disk_uuid
                )
            })
            .collect();
        if !group.redundancy_holds() {
            return Err(GroupError::Mount(format!(
                "group {} is missing disk(s) {}; {} redundancy cannot run without them: attach them (check the discovery string) and mount again{}",
                group.name,
                names.join(", "),
                group.redundancy().as_str(),
                if group.short_disks.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", group.short_disks.join("; "))
                }
            )));
        }
        if read_only {
            report.disks_missing = names;
        } else {
            report.disks_marked_offline = names;
        }
    }

    // Bootstrap: the file directory's first extent, then the journal's entry.
    group.files.insert(
        FILE_DIRECTORY,
        FileRec {
            entry: placeholder_entry(FILE_DIRECTORY, sup.copies),
            extents: vec![sup.file_directory],
        },
    );
    let journal_entry = group
        .read_entry(FILE_JOURNAL)?
        .ok_or_else(|| corrupt("the journal's file entry is missing"))?;
    let journal_extents = journal_entry.direct.clone();
    let journal_expected = JOURNAL_BYTES.div_ceil(u64::from(sup.au_bytes));
    if journal_extents.len() as u64 != journal_expected {
        return Err(corrupt(format!(
            "the journal has {} extents; a group with {}-byte AUs has {journal_expected}",
            journal_extents.len(),
            sup.au_bytes
        )));
    }
    group.journal.capacity_blocks = journal_extents.len() as u64 * group.blocks_per_au();
    group.files.insert(
        FILE_JOURNAL,
        FileRec {
            entry: journal_entry,
            extents: journal_extents,
        },
    );
    report.journal_records_replayed = group.replay()?;

    // Offline disks noticed at mount are recorded only after replay, so replay
    // writes reach every disk the journal names. A member whose own slots lack
    // the newest generation (a crash among the superblock writes of a create
    // or a change) gets it too.
    let behind = disks
        .iter()
        .any(|(_, _, slot)| slot.as_ref().is_none_or(|(g, _)| *g < best.generation));
    // A slot torn by a crash (or damaged) beside a good one: both slots are
    // written afresh, so every member again holds two.
    let torn = disks.iter().any(|(device, _, _)| {
        SUPER_SLOT_OFFSETS_BYTES
            .iter()
            .any(|base| slot_damaged(group.engine, *device, uuid, *base))
    });
    if !read_only {
        if !missing.is_empty() || behind || torn {
            group.write_superblocks()?;
        }
        if torn {
            group.write_superblocks()?;
        }
    }

    group.load_tables(&mut report)?;
    group.load_files()?;
    group.verify_tables(&mut report)?;
    group.rebuild_tables()?;
    group.load_aliases()?;
    group.find_orphan_parents();
    report.damage.extend(group.describe_shared_aus());
    group.templates = group
        .read_small_file(
            FILE_TEMPLATES,
            BlockType::Template,
            LostBlock::Templates,
            fmt::decode_templates,
        )?
        .unwrap_or_else(default_templates);
    group.attributes = match group.read_small_file(
        FILE_ATTRIBUTES,
        BlockType::Attribute,
        LostBlock::Attributes,
        fmt::decode_attributes,
    )? {
        Some(a) => a,
        None => group.default_attributes(),
    };
    report.damage.extend(group.describe_lost());
    if read_only {
        report.warnings.extend(group.pending_operations());
        if group.copies_left_damaged > 0 {
            report.warnings.push(format!(
                "{} metadata copies are damaged, blank or out of date beside a good one; a command that writes rewrites them as it reads them, or run `cairn group check {} --repair`",
                group.copies_left_damaged, group.name
            ));
        }
        group.forget_dirty();
        return Ok((group, report));
    }
    report.operations_recovered = group.recover_operations()?;
    report.repaired_copies = group.repaired_copies;
    group.commit()?;
    group.offline_failed()?;
    Ok((group, report))
}

fn placeholder_entry(number: u32, copies: u8) -> FileEntry {
    FileEntry {
        number,
        incarnation: 0,
        state: FileState::Active,
        copies,
        striping: STRIPING_COARSE,
        size_bytes: 0,
        extent_count: 0,
        target_bytes: 0,
        created_unix_seconds: 0,
        modified_unix_seconds: 0,
        template: String::new(),
        direct: Vec::new(),
        indirect: Vec::new(),
    }
}

impl Group<'_> {
    fn read_entry(&mut self, file: u32) -> Result<Option<FileEntry>, GroupError> {
        let places = self.file_block_places(FILE_DIRECTORY, u64::from(file));
        match self.read_meta(&places, entry_id(file))? {
            Some(block) => FileEntry::decode(&block[..], file)
                .map_err(|e| corrupt(format!("file entry {file}: {e}"))),
            None => Ok(None),
        }
    }

    fn read_meta_file_block(
        &mut self,
        file: u32,
        block_type: BlockType,
        index: u64,
    ) -> Result<Option<Box<Block>>, GroupError> {
        let places = self.file_block_places(file, index);
        self.read_meta(
            &places,
            BlockId {
                block_type,
                owner: file,
                owner_tag: 0,
                index,
            },
        )
    }

    /// Read the journal copy by copy: a record counts if it is whole on any copy.
    fn read_journal_block(&mut self, index: u64) -> Vec<AlignedBuf> {
        let places = self.file_block_places(FILE_JOURNAL, index);
        places
            .into_iter()
            .filter_map(|(d, o)| self.read_one(d, o, BLOCK_BYTES).ok())
            .collect()
    }

    /// Replay every whole record after the last checkpoint; return how many.
    fn replay(&mut self) -> Result<u64, GroupError> {
        let mut header: Option<JournalHeader> = None;
        for slot in 0..JOURNAL_HEADER_BLOCKS {
            for buf in self.read_journal_block(slot) {
                if meta::open(
                    &buf[..],
                    journal_id(BlockType::JournalHeader, slot),
                    self.uuid,
                )
                .is_ok()
                {
                    if let Ok(h) = JournalHeader::decode(&buf[..]) {
                        if header.is_none_or(|b| h.header_generation > b.header_generation) {
                            header = Some(h);
                        }
                    }
                }
            }
        }
        let header = header.ok_or_else(|| corrupt("no journal header copy is readable"))?;
        self.journal.header_generation = header.header_generation;
        self.journal.next_seq = header.next_seq;
        let mut position = JOURNAL_HEADER_BLOCKS;
        let mut prev = 0u32;
        let mut replayed = 0;
        let copies = self.files[&FILE_JOURNAL].extents[0].copies().len();
        'records: while position < self.journal.capacity_blocks {
            // Try each copy of the journal in turn for a whole record.
            for copy in 0..copies {
                let Some(record) = self.read_record(position, copy, prev) else {
                    continue;
                };
                let (record, images, checksum) = record;
                if self.read_only {
                    self.overlay_record(&record.targets, &images);
                } else {
                    self.write_in_place(&record.targets, |i| &images[i][..])?;
                }
                position += 1 + u64::from(record.image_count);
                prev = checksum;
                self.journal.next_seq += 1;
                replayed += 1;
                continue 'records;
            }
            break;
        }
        self.journal.position = position;
        self.journal.prev_checksum = prev;
        if self.read_only {
            return Ok(replayed);
        }
        // Make the replayed state the new starting point — only once every
        // disk a replay write failed on is on record as offline (checkpoint
        // sees to it, and stops the mount if redundancy cannot cover them).
        self.checkpoint()?;
        Ok(replayed)
    }

    /// A one-block metadata file (templates, attributes), decoded; blank
    /// reads as empty. `None` when the block has no valid copy, or does not
    /// decode: the loss is recorded as `lost`, for the caller's defaults and
    /// for `check --repair` to write.
    fn read_small_file<T: Default>(
        &mut self,
        file: u32,
        block_type: BlockType,
        lost: LostBlock,
        decode: fn(&[u8]) -> Result<T, MetaError>,
    ) -> Result<Option<T>, GroupError> {
        let decoded = self
            .read_meta_file_block(file, block_type, 0)
            .and_then(|block| {
                block
                    .map(|b| {
                        decode(&b[..]).map_err(|e| {
                            GroupError::Lost(format!("the {} block: {e}", block_type.name()))
                        })
                    })
                    .transpose()
            });
        match decoded {
            Ok(t) => Ok(Some(t.unwrap_or_default())),
            Err(GroupError::Lost(why)) => {
                self.lost.insert(lost, why);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// A read-only mount's replay: remember the record's images by place, so
    /// reads see what a writer's replay would have put there.
    fn overlay_record(&mut self, targets: &[JournalTarget], images: &[AlignedBuf]) {
        for t in targets {
            let mut block = meta::empty_block();
            block.copy_from_slice(&images[usize::from(t.image)][..]);
            self.overlay.insert((t.disk, t.offset_bytes), block);
        }
    }

    /// Drop every change a read-only mount computed (rebuilt tables, summary
    /// counts to rewrite): nothing of it is written.
    fn forget_dirty(&mut self) {
        self.dirty.clear();
        for alloc in self
            .members
            .iter_mut()
            .flatten()
            .filter_map(|m| m.alloc.as_mut())
        {
            alloc.take_dirty();
        }
    }

    /// The record at `position` on journal copy `copy`, if whole and next in the chain.
    fn read_record(
        &mut self,
        position: u64,
        copy: usize,
        prev: u32,
    ) -> Option<(JournalRecord, Vec<AlignedBuf>, u32)> {
        let places = self.file_block_places(FILE_JOURNAL, position);
        let (disk, offset) = *places.get(copy)?;
        let head = self.read_one(disk, offset, BLOCK_BYTES).ok()?;
        let seq = meta::open(
            &head[..],
            journal_id(BlockType::JournalRecord, position),
            self.uuid,
        )
        .ok()?;
        let record = JournalRecord::decode(&head[..]).ok()?;
        if seq != self.journal.next_seq || record.seq != seq || record.prev_checksum != prev {
            return None;
        }
        if position + 1 + u64::from(record.image_count) > self.journal.capacity_blocks {
            return None;
        }
        let mut images = Vec::with_capacity(usize::from(record.image_count));
        for k in 0..u64::from(record.image_count) {
            let places = self.file_block_places(FILE_JOURNAL, position + 1 + k);
            let (d, o) = *places.get(copy)?;
            images.push(self.read_one(d, o, BLOCK_BYTES).ok()?);
        }
        let blocks: Vec<Box<Block>> = images
            .iter()
            .map(|b| {
                let mut block = meta::empty_block();
                block.copy_from_slice(&b[..]);
                block
            })
            .collect();
        if images_crc(&blocks.iter().map(|b| &**b).collect::<Vec<_>>()) != record.images_crc {
            return None;
        }
        Some((record, images, meta::checksum_of(&head[..])))
    }

    fn load_tables(&mut self, report: &mut MountReport) -> Result<(), GroupError> {
        for n in 0..self.members.len() as u16 {
            let Some(m) = self.member(n) else { continue };
            if m.online().is_none() {
                continue;
            }
            let layout = m
                .alloc
                .as_ref()
                .map(|a| a.layout)
                .expect("invariant: online");
            let mut alloc = DiskAlloc::empty(layout);
            // The whole table in a few large reads: it is one contiguous
            // region, and most of it is never written (blank = all free).
            let blocks = layout.summary_blocks + layout.bitmap_blocks;
            let mut stored_summary: Vec<Vec<u32>> = Vec::new();
            let mut unreadable: Option<String> = None;
            let mut index = 0u64;
            while index < blocks {
                let count = (blocks - index).min(TABLE_READ_BLOCKS_MAX);
                let offset = fmt::AT_START_BYTES + index * BLOCK_BYTES as u64;
                let data = match self.read_one(n, offset, (count as usize) * BLOCK_BYTES) {
                    Ok(d) => d,
                    Err(e) => {
                        unreadable = Some(e.to_string());
                        break;
                    }
                };
                for (k, block) in data.chunks_exact(BLOCK_BYTES).enumerate() {
                    let at = index + k as u64;
                    let block_offset = fmt::AT_START_BYTES + at * BLOCK_BYTES as u64;
                    if at < layout.summary_blocks {
                        let id = per_disk_id(BlockType::AtSummary, n, block_offset);
                        // A bad summary is only a bad count: recomputed below.
                        stored_summary.push(match meta::open(block, id, self.uuid) {
                            Ok(_) => fmt::decode_summary(block),
                            Err(MetaError::Blank) => vec![0; AT_COUNTS_PER_SUMMARY as usize],
                            Err(_) => vec![u32::MAX; AT_COUNTS_PER_SUMMARY as usize],
                        });
                        continue;
                    }
                    let bitmap = at - layout.summary_blocks;
                    match meta::open(
                        block,
                        per_disk_id(BlockType::AtBitmap, n, block_offset),
                        self.uuid,
                    ) {
                        Ok(_) => {
                            for p in alloc.load_bitmap(bitmap, &fmt::decode_bitmap(block)) {
                                report.warnings.push(format!("{}: {p}", self.disk_name(n)));
                            }
                        }
                        Err(MetaError::Blank) => {}
                        Err(e) => {
                            unreadable.get_or_insert(format!("bitmap block {bitmap}: {e}"));
                        }
                    }
                }
                index += count;
            }
            if let Some(e) = unreadable {
                // The table is derived data: rebuild it from the extent maps.
                report.warnings.push(format!(
                    "{}: allocation table unreadable ({e}); rebuilt from the extent maps",
                    self.disk_name(n)
                ));
                self.tables_to_rebuild.push(n);
            } else {
                for (i, stored) in stored_summary.iter().enumerate() {
                    if let Some(p) = alloc.check_summary(i as u64, stored) {
                        report.warnings.push(format!(
                            "{}: {p}; {}",
                            self.disk_name(n),
                            if self.read_only {
                                "the next command that writes rewrites it"
                            } else {
                                "rewritten"
                            }
                        ));
                    }
                }
            }
            if let Some(m) = self.member_mut(n) {
                m.alloc = Some(alloc);
            }
        }
        Ok(())
    }

    /// Every AU run the extent maps name, with its owner.
    pub(super) fn owned_runs(&self) -> Vec<OwnedRun> {
        let mut out = Vec::new();
        for (number, rec) in &self.files {
            let extents = rec
                .extents
                .iter()
                .enumerate()
                .map(|(i, e)| (e, i as u64, false));
            let pointers = rec
                .entry
                .indirect
                .iter()
                .enumerate()
                .map(|(i, e)| (e, i as u64, true));
            for (extent, index, indirect) in extents.chain(pointers) {
                let len = if indirect {
                    1
                } else {
                    placement::extent_aus(index)
                };
                for (copy, c) in extent.copies().iter().enumerate() {
                    out.push(OwnedRun {
                        disk: c.disk,
                        au: u64::from(c.au),
                        len,
                        file: *number,
                        index,
                        indirect,
                        copy,
                    });
                }
            }
        }
        out
    }

    /// Every AU a file owns must be a data AU marked used on its disk. A table
    /// that calls an owned AU free (a zeroed bitmap block reads as "all free")
    /// would hand it out twice: rebuild it. An AU outside the disk's data area
    /// is damage no rebuild can explain.
    fn verify_tables(&mut self, report: &mut MountReport) -> Result<(), GroupError> {
        let mut stale = BTreeSet::new();
        let runs = self.owned_runs();
        self.shared_aus = shared_aus(&runs);
        for run in runs {
            let Some(m) = self.member(run.disk) else {
                return Err(corrupt(format!(
                    "{}: on disk {}, which is not in the group",
                    run.describe(),
                    run.disk
                )));
            };
            let Some(alloc) = m.alloc.as_ref() else {
                continue;
            };
            let layout = alloc.layout;
            if run.au < layout.first_data_au || run.au + run.len > layout.au_count {
                return Err(corrupt(format!(
                    "{}: AUs {}..{} lie outside disk {}'s data AUs {}..{}",
                    run.describe(),
                    run.au,
                    run.au + run.len,
                    m.entry.label,
                    layout.first_data_au,
                    layout.au_count
                )));
            }
            if (run.au..run.au + run.len).any(|a| !alloc.is_used(a))
                && !self.tables_to_rebuild.contains(&run.disk)
            {
                stale.insert(run.disk);
            }
        }
        for disk in stale {
            report.warnings.push(format!(
                "{}: allocation table marks AUs free that files own; rebuilt from the extent maps",
                self.disk_name(disk)
            ));
            self.tables_to_rebuild.push(disk);
        }
        Ok(())
    }

    /// Rebuild the allocation tables `load_tables` could not read: every AU an
    /// extent map names is used, every other data AU free.
    fn rebuild_tables(&mut self) -> Result<(), GroupError> {
        let disks = std::mem::take(&mut self.tables_to_rebuild);
        if disks.is_empty() {
            return Ok(());
        }
        let owned = self.owned_runs();
        for n in disks {
            let Some(alloc) = self.member_mut(n).and_then(|m| m.alloc.as_mut()) else {
                continue;
            };
            let mut fresh = DiskAlloc::empty(alloc.layout);
            let range = alloc.layout.first_data_au..alloc.layout.au_count;
            for run in owned.iter().filter(|o| o.disk == n) {
                for a in (run.au..run.au + run.len).filter(|a| range.contains(a)) {
                    if !fresh.is_used(a) {
                        fresh.mark(a, 1, true);
                    }
                }
            }
            fresh.mark_all_dirty();
            *alloc = fresh;
        }
        if self.read_only {
            // Rebuilt in memory for this look; a writer rewrites it.
            return Ok(());
        }
        self.commit_in_chunks()
    }

    fn load_files(&mut self) -> Result<(), GroupError> {
        let dir = self
            .read_entry(FILE_DIRECTORY)?
            .ok_or_else(|| corrupt("the file directory's own entry is missing"))?;
        let dir_extents = self.read_extent_map(&dir)?;
        self.validate_map(&dir, &dir_extents)?;
        self.files.insert(
            FILE_DIRECTORY,
            FileRec {
                entry: dir,
                extents: dir_extents,
            },
        );
        let entries = self.files[&FILE_DIRECTORY].extents.len() as u64 * self.blocks_per_au();
        for n in 1..entries as u32 {
            if n == FILE_DIRECTORY || n == FILE_JOURNAL {
                continue;
            }
            let loaded = self.read_entry(n).and_then(|entry| match entry {
                Some(entry) if n >= FILE_NUMBER_USER_MIN => self.load_user_file(entry).map(Some),
                Some(entry) => {
                    let extents = self.read_extent_map(&entry)?;
                    self.validate_map(&entry, &extents)?;
                    Ok(Some((FileRec { entry, extents }, None)))
                }
                None => Ok(None),
            });
            match loaded {
                Ok(Some((rec, damage))) => {
                    self.files.insert(n, rec);
                    if let Some(why) = damage {
                        self.lost.insert(LostBlock::Map(n), why);
                    }
                }
                Ok(None) => {}
                // A user file whose entry is gone or self-contradicting is
                // lost; the rest of the group is not.
                Err(GroupError::Lost(why) | GroupError::Corrupt(why))
                    if n >= FILE_NUMBER_USER_MIN =>
                {
                    self.lost.insert(LostBlock::Entry(n), why);
                }
                Err(e) => return Err(e),
            }
        }
        for f in [FILE_ALIAS_DIRECTORY, FILE_TEMPLATES, FILE_ATTRIBUTES] {
            if !self.files.contains_key(&f) {
                return Err(corrupt(format!("metadata file {f} has no entry")));
            }
        }
        Ok(())
    }

    /// What the data path relies on: the extents hold the file's size, fine
    /// striping has whole sets of 8, metadata files have their first extent.
    fn validate_map(&self, entry: &FileEntry, extents: &[Extent]) -> Result<(), GroupError> {
        let layout = self.file_layout(entry);
        let n = extents.len() as u64;
        let problem = if layout.striping == Striping::Fine
            && !n.is_multiple_of(placement::FINE_STRIPE_WIDTH)
        {
            Some(format!("{n} extents is not whole fine-stripe sets of 8"))
        } else if layout.capacity_bytes(n) < entry.size_bytes {
            Some(format!(
                "{} bytes do not fit its {n} extents",
                entry.size_bytes
            ))
        } else if entry.number < FILE_NUMBER_USER_MIN && n == 0 {
            Some("a metadata file with no extent".to_string())
        } else {
            None
        };
        match problem {
            Some(p) => Err(corrupt(format!("file {}: {p}", entry.number))),
            None => Ok(()),
        }
    }

    /// A user file's entry and as much of its extent map as is whole: a map
    /// block with no valid copy, or a map that contradicts the entry, cuts it
    /// (returned with why, and where it now ends). An I/O error is not cut
    /// around: the disk may answer again.
    fn load_user_file(
        &mut self,
        mut entry: FileEntry,
    ) -> Result<(FileRec, Option<String>), GroupError> {
        let (mut extents, whole) = self.read_map_upto(&entry);
        let mut why = match whole {
            Ok(()) => None,
            Err(GroupError::Lost(m) | GroupError::Corrupt(m)) => Some(m),
            Err(e) => return Err(e),
        };
        let layout = self.file_layout(&entry);
        if entry.striping == STRIPING_FINE {
            let whole_sets =
                extents.len() as u64 / placement::FINE_STRIPE_WIDTH * placement::FINE_STRIPE_WIDTH;
            if (extents.len() as u64) != whole_sets {
                extents.truncate(whole_sets as usize);
                why.get_or_insert_with(|| "its extents are not whole fine-stripe sets of 8".into());
            }
        }
        let recorded = entry.size_bytes;
        let capacity = layout.capacity_bytes(extents.len() as u64);
        if capacity < recorded {
            let sector = u64::from(self.sector_bytes);
            entry.size_bytes = capacity / sector * sector;
            why.get_or_insert_with(|| format!("{recorded} bytes do not fit its extents"));
        }
        let damage = why.map(|w| {
            format!(
                "{w}; it reads up to byte {} of its {recorded}",
                entry.size_bytes
            )
        });
        Ok((FileRec { entry, extents }, damage))
    }

    fn read_extent_map(&mut self, entry: &FileEntry) -> Result<Vec<Extent>, GroupError> {
        let (extents, whole) = self.read_map_upto(entry);
        whole.map(|()| extents)
    }

    /// The extents of `entry`'s map, read block by block up to the first
    /// that cannot be used; with it, why not (`Ok` when the map is whole).
    fn read_map_upto(&mut self, entry: &FileEntry) -> (Vec<Extent>, Result<(), GroupError>) {
        let mut extents = entry.direct.clone();
        let mut remaining = entry.extent_count.saturating_sub(DIRECT_EXTENTS as u64);
        let per_au = self.blocks_per_au();
        let needed = remaining
            .div_ceil(EXTENTS_PER_INDIRECT_BLOCK as u64)
            .div_ceil(per_au);
        if needed > entry.indirect.len() as u64 {
            let why = corrupt(format!(
                "file {}: {} extents need {needed} indirect AUs, the entry has {}",
                entry.number,
                entry.extent_count,
                entry.indirect.len()
            ));
            return (extents, Err(why));
        }
        let mut block = 0u64;
        while remaining > 0 {
            let pointer = &entry.indirect[(block / per_au) as usize];
            let within = (block % per_au) * BLOCK_BYTES as u64;
            let places: Vec<(u16, u64)> = pointer
                .copies()
                .iter()
                .map(|c| (c.disk, u64::from(c.au) * self.au_bytes + within))
                .collect();
            let id = BlockId {
                block_type: BlockType::Indirect,
                owner: entry.number,
                owner_tag: entry.incarnation,
                index: block,
            };
            let count = remaining.min(EXTENTS_PER_INDIRECT_BLOCK as u64) as usize;
            let more = self.read_meta(&places, id).and_then(|data| {
                let data = data.ok_or_else(|| {
                    GroupError::Lost(format!(
                        "file {}: indirect block {block} is blank on every copy",
                        entry.number
                    ))
                })?;
                fmt::decode_indirect(&data[..], count)
                    .map_err(|e| corrupt(format!("file {}: {e}", entry.number)))
            });
            match more {
                Ok(more) => extents.extend(more),
                Err(e) => return (extents, Err(e)),
            }
            remaining -= count as u64;
            block += 1;
        }
        (extents, Ok(()))
    }

    /// Recompute [`Group::orphan_parents`] from the names.
    pub(super) fn find_orphan_parents(&mut self) {
        self.orphan_parents = self
            .aliases
            .values()
            .map(|r| r.parent)
            .filter(|p| *p != 0 && !self.aliases.contains_key(p))
            .collect();
    }

    /// One line per AU two files claim: where it is and who claims it.
    fn describe_shared_aus(&self) -> Vec<String> {
        self.shared_aus
            .iter()
            .map(|((disk, au), owners)| {
                let who: Vec<String> = owners.iter().map(|o| self.path_of(*o)).collect();
                format!(
                    "AU {au} of disk {} is claimed by {} extent maps ({}): reads of either file may return the other's data, and neither will be written until one is removed",
                    self.disk_name(*disk),
                    owners.len(),
                    who.join(" and ")
                )
            })
            .collect()
    }

    fn load_aliases(&mut self) -> Result<(), GroupError> {
        let blocks = self.files[&FILE_ALIAS_DIRECTORY].extents.len() as u64 * self.blocks_per_au();
        for index in 0..blocks {
            let records =
                match self.read_meta_file_block(FILE_ALIAS_DIRECTORY, BlockType::Alias, index) {
                    Ok(None) => continue,
                    Ok(Some(block)) => fmt::decode_alias_block(&block[..], index)
                        .map_err(|e| GroupError::Lost(format!("alias block {index}: {e}"))),
                    Err(e) => Err(e),
                };
            let records = match records {
                Ok(r) => r,
                Err(GroupError::Lost(why)) => {
                    self.lost.insert(LostBlock::Alias(index), why);
                    continue;
                }
                Err(e) => return Err(e),
            };
            for r in records {
                let key = (r.parent, r.name.to_ascii_lowercase());
                self.alias_index.insert(key, r.id);
                self.aliases.insert(r.id, r);
            }
        }
        Ok(())
    }
}

/// The AUs more than one run claims, each with the file of every claim (a
/// file that claims an AU twice is listed twice). A sweep over the runs
/// sorted by start finds the overlaps; only their AUs are then counted.
fn shared_aus(runs: &[OwnedRun]) -> BTreeMap<(u16, u64), Vec<u32>> {
    let mut sorted: Vec<&OwnedRun> = runs.iter().collect();
    sorted.sort_by_key(|r| (r.disk, r.au, r.au + r.len));
    let mut overlapping: BTreeSet<(u16, u64)> = BTreeSet::new();
    // Runs on the current disk that may still overlap what comes next.
    let mut open: Vec<&OwnedRun> = Vec::new();
    for run in sorted {
        open.retain(|o| o.disk == run.disk && o.au + o.len > run.au);
        for o in &open {
            let end = (o.au + o.len).min(run.au + run.len);
            overlapping.extend((run.au..end).map(|au| (run.disk, au)));
        }
        open.push(run);
    }
    let mut shared: BTreeMap<(u16, u64), Vec<u32>> = BTreeMap::new();
    if overlapping.is_empty() {
        return shared;
    }
    for run in runs {
        for au in overlapping
            .range((run.disk, run.au)..(run.disk, run.au + run.len))
            .map(|(_, au)| *au)
        {
            shared.entry((run.disk, au)).or_default().push(run.file);
        }
    }
    shared
}

/// Alias-kind helpers shared with files.rs.
fn alias_block_of(id: u32) -> u64 {
    u64::from(id - 1) / ALIASES_PER_BLOCK as u64
}

const _: () = assert!(FILE_NUMBER_USER_MIN as usize <= 256);
const _: () = assert!(TXN_IMAGES_MAX * 3 <= JOURNAL_TARGETS_MAX);

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use cairn_format::DiskLabel;
    use cairn_io_sim::{geometry, SimEngine};

    const MIB: u64 = 1 << 20;
    const DISK_BYTES: u64 = 64 * MIB;

    /// Four labelled simulated disks in two failure groups (0, 1 in A; 2, 3 in B).
    fn four_disks() -> (SimEngine, Vec<DeviceId>) {
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

    fn create_normal<'e>(engine: &'e mut dyn IoEngine, ids: &[DeviceId]) -> Group<'e> {
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
