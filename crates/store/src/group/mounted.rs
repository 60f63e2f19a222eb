//! The state a mounted group keeps in memory (`struct Group`), the types
//! of its fields that have no part of their own yet, its accessors, and
//! how it stops.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cairn_format::group::{DiskEntry, GroupSuper, Template, FILE_NUMBER_USER_MIN};
use cairn_format::meta::{Block, BLOCK_BYTES};
use cairn_format::FeatureSet;
use cairn_io::IoEngine;
use uuid::Uuid;

use super::discard_queue::DiscardQueue;
use super::error::GroupError;
use super::parts::members::Member;
use super::spec::Redundancy;
use super::{heartbeat, parts, plane};

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
    pub(super) engine: EngineRef<'e>,
    pub(super) uuid: Uuid,
    pub(super) name: String,
    pub(super) copies: u8,
    pub(super) au_bytes: u64,
    pub(super) sector_bytes: u32,
    pub(super) created_unix_seconds: u64,
    pub(super) features: FeatureSet,
    pub(super) slot_generation: u64,
    /// The member disks (`parts/members.rs`).
    pub(super) members: parts::members::Members,
    /// Every file's entry and extent map (`parts/files.rs`).
    pub(super) files: parts::files::FileTable,
    /// The name table (`parts/names.rs`).
    pub(super) names: parts::names::NameTable,
    /// The damage the mount found, and what became of it (`parts/damage.rs`).
    pub(super) damage: parts::damage::Damage,
    /// Templates and attributes (`parts/settings.rs`).
    pub(super) settings: parts::settings::Settings,
    /// Where the journal ring stands (`parts/journal_ring.rs`).
    pub(super) journal: parts::journal_ring::JournalRing,
    /// The running transaction (`parts/txn.rs`).
    pub(super) txn: parts::txn::Txn,
    pub(super) poisoned: Option<String>,
    pub(super) clock: fn() -> u64,
    /// Disks whose allocation table could not be read: rebuilt from the
    /// extent maps once those are loaded.
    pub(super) tables_to_rebuild: Vec<u16>,
    /// Disks whose writes failed during the current step, to offline after it.
    pub(super) failed_disks: BTreeSet<u16>,
    /// Disks this mount took offline after an I/O error, for the caller to
    /// report (a mount's own offlining is in its [`MountReport`](super::MountReport)).
    pub(super) taken_offline: Vec<String>,
    /// Mounted read-only: nothing is ever written (no replay, no repair, no
    /// offlining); changes are refused with [`GroupError::ReadOnly`].
    pub(super) read_only: bool,
    /// On a read-only mount, the images of the journal records that a writer
    /// would replay, by place (disk, byte offset): reads see them instead of
    /// what is in place. Bounded by the journal ring.
    pub(super) overlay: BTreeMap<(u16, u64), Box<Block>>,
    /// What the data plane sees: file snapshots and the disk view, published
    /// here as changes commit (`plane.rs`, `publish.rs`).
    pub(super) plane: Arc<plane::DataPlane>,
    /// What the data plane has not been shown yet (`parts/unpublished.rs`).
    pub(super) unpublished: parts::unpublished::Unpublished,
    /// Behind a [`LiveGroup`](super::LiveGroup)'s lock: its file data goes through data
    /// handles, never through this group's own data calls, and its steps'
    /// commits are grouped (`live/mod.rs`).
    pub(super) live: bool,
    /// A reclaim `--compact` runs: the rebalance it runs first ends with
    /// the compact pass whatever `rebalance_compact` says (memory only).
    pub(super) compact_asked: bool,
    /// When this mount began: OFFLINE disks' repair timers count the time
    /// the group is mounted.
    pub(super) mounted_at: std::time::Instant,
    /// The meta plane's own zeroings of file data (`parts/zeroings.rs`).
    pub(super) zeroings: parts::zeroings::Zeroings,
    /// Behind a [`LiveGroup`](super::LiveGroup): where freed runs wait for their discard,
    /// which the live group's drain runs outside `meta` (`discard_queue.rs`).
    /// `None`: a commit discards what it releases at once.
    pub(super) discards: Option<Arc<DiscardQueue>>,
    /// What the last superblock generation written says (the superblock,
    /// its disk number aside, and the disk directory): what a group that
    /// stopped, whose memory may be ahead of the disks, still writes from
    /// ([`Group::record_missed_writes`]).
    pub(super) written_super: Option<(GroupSuper, Vec<DiskEntry>)>,
    /// The disks' state log (`parts/state_log.rs`).
    pub(super) states: parts::state_log::StateLog,
    /// Disks gone OFFLINE whose devices a live group lets go of at the end
    /// of the metadata operation (`LiveGroup`): taken after an I/O error,
    /// or on request once stamped ([`Group::release_offline`](super::Group::release_offline)).
    pub(super) to_release: BTreeSet<u16>,
    /// This host's heartbeat on the group's disks (multihost protection,
    /// `heartbeat.rs`), for a mount that writes on real disks: it stops
    /// the group when another host takes it over or no heartbeat lands,
    /// and it lets go (writes the release) when the group is dropped, so
    /// it is the last field: dropped after everything that writes.
    pub(super) heartbeat: Option<heartbeat::Link>,
}

pub(super) fn system_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl<'e> Group<'e> {
    /// A group in memory with its identity and members, nothing loaded yet:
    /// the common start of `create` and `mount`. Only the superblock's group
    /// fields are used (not its disk number or bootstrap extent).
    pub(super) fn assemble(
        engine: EngineRef<'e>,
        sup: GroupSuper,
        uuid: Uuid,
        slot_generation: u64,
        members: parts::members::Members,
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
            files: parts::files::FileTable::new(u64::from(sup.au_bytes)),
            names: parts::names::NameTable::default(),
            damage: parts::damage::Damage::default(),
            settings: parts::settings::Settings::default(),
            journal: parts::journal_ring::JournalRing::default(),
            txn: parts::txn::Txn::default(),
            poisoned: None,
            clock: system_clock,
            tables_to_rebuild: Vec::new(),
            failed_disks: BTreeSet::new(),
            read_only: false,
            taken_offline: Vec::new(),
            overlay: BTreeMap::new(),
            plane: Arc::new(plane::DataPlane::for_group(uuid)),
            unpublished: parts::unpublished::Unpublished::default(),
            live: false,
            compact_asked: false,
            mounted_at: std::time::Instant::now(),
            zeroings: parts::zeroings::Zeroings::default(),
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
        self.settings.templates()
    }
    pub fn attributes(&self) -> &[(String, String)] {
        self.settings.attributes()
    }
    /// Give the engine back (tests crash the simulator after a group "dies").
    pub fn engine(&mut self) -> &mut dyn IoEngine {
        &mut *self.engine
    }

    pub(super) fn blocks_per_au(&self) -> u64 {
        self.au_bytes / BLOCK_BYTES as u64
    }

    pub(super) fn member(&self, disk: u16) -> Option<&Member> {
        self.members.get(disk)
    }

    pub(super) fn member_mut(&mut self, disk: u16) -> Option<&mut Member> {
        self.members.get_mut(disk)
    }

    pub(super) fn disk_name(&self, disk: u16) -> String {
        self.member(disk)
            .map_or_else(|| format!("#{disk}"), |m| m.entry.label.clone())
    }

    /// The group is behind a [`LiveGroup`](super::LiveGroup)'s lock from now on.
    pub(super) fn set_live(&mut self, live: bool) {
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
    pub(super) fn take_heartbeat_failures(&mut self) {
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
    pub(super) fn stop(&mut self, why: String) {
        if self.poisoned.is_none() {
            tracing::error!(group = %self.name, "group {} stopped: {why}", self.name);
        }
        self.plane.stop(&why);
        self.poisoned.get_or_insert(why);
    }

    pub(super) fn check_usable(&self) -> Result<(), GroupError> {
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
    pub(super) fn check_writable(&self) -> Result<(), GroupError> {
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

    /// Make every acknowledged write durable (what `fsync` means for a file).
    pub fn sync(&mut self) -> Result<(), GroupError> {
        self.check_usable()?;
        if self.read_only {
            return Ok(());
        }
        self.checkpoint_maps()?;
        for m in self.members.iter_mut() {
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
        self.close_checksum_log()?;
        self.commit()?;
        self.count_offline_time()?;
        self.checkpoint()?;
        Ok(())
    }
}

const _: () = assert!(FILE_NUMBER_USER_MIN as usize <= 256);
