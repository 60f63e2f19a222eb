//! The checksum log (metadata file 8; `docs/checksums.md`, "Writes", steps
//! 2 and 3): records that name the new checksums of the units written since
//! the record before, and the regions of files writes may land in, written
//! before the flush that acknowledges those writes. After a crash, recovery
//! judges the named units and scans the named regions; every unit outside
//! them holds what the map says.
//!
//! The ring: two alternating headers ([`LogHeader`]), then records, one
//! block each (type 16, self-addressed by their block, sealed with their
//! sequence, each chained to the checksum of the one before), wrapping
//! from the last block to the first after the headers. A checkpoint of the
//! maps (`maps.rs`) writes a record that starts a new stretch and then a
//! header naming it: the records before it are in the maps.
//!
//! Who changes what:
//! - the writer state ([`Writer`]: the ring, rank [`Rank::Log`]) is held
//!   across a record's write and its flush, by a data operation whose write
//!   enters a region no durable record names ([`SumsLog::enter`]), by a
//!   sync ([`SumsLog::sync`]), and by the metadata plane across a
//!   checkpoint of the maps (under `meta`, then this: never the reverse).
//!   Nothing waits for `meta` while holding it: disks a record's write
//!   failed on are reported once it is let go;
//! - the regions ([`Regions`], a leaf lock): which regions the next record
//!   names, which a durable record names, and the writes in each (pins).
//!   No I/O under it. A region leaves the set only unpinned, and only by a
//!   record that names its units' last checksums.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use cairn_format::group::{
    Extent, IntentRecord, IntentRun, LogHeader, Region, FILE_CHECKSUM_LOG, LOG_HEADER_BLOCKS,
    REGIONS_PER_RECORD, REGION_BYTES, RUN_AREA_BYTES, RUN_HEAD_BYTES,
};
use cairn_format::meta::{self, BlockId, BlockType, BLOCK_BYTES};
use cairn_io::poison::recover;
use cairn_io::{AlignedBuf, Op, Request};
use uuid::Uuid;

use super::data::{note_failed, DataPort, FailedDisks};
use super::error::GroupError;
use super::sums::FileSums;
use crate::lock_order::{Rank, Ranked};

/// Regions one write may hold at once: a write of a file with checksums
/// is cut into pieces of at most this many regions ([`SumsLog::enter`]),
/// so writers in as many places as a record names make progress together.
pub(crate) const ENTER_REGIONS_MAX: u64 = (REGIONS_PER_RECORD / 8) as u64;

/// How long a write waits for a region of the set to be let go before it
/// looks again (the writes that hold them end: a bound, not a schedule).
const REGION_WAIT: Duration = Duration::from_millis(100);

/// Where file 8's blocks are: its extents (their copies), the group's AU
/// size and UUID. Set by the metadata plane whenever file 8's entry is
/// committed (a leaf lock: a commit under the writer's lock may set it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Places {
    pub(crate) uuid: Uuid,
    pub(crate) extents: Vec<Extent>,
    pub(crate) au_bytes: u64,
}

/// The ring as its writer knows it: where file 8's blocks are, where the
/// newest header says it starts, and where the next record goes.
#[derive(Debug, Clone)]
pub(crate) struct Ring {
    pub(crate) places: Arc<Places>,
    /// The newest durable header.
    pub(crate) header: LogHeader,
    /// The next record's sequence, block, and the checksum it chains to.
    pub(crate) next_seq: u64,
    pub(crate) position: u64,
    pub(crate) prev_checksum: u32,
}

impl Ring {
    /// A ring over file 8 at `places`, its next record where `header`
    /// says it starts.
    pub(crate) fn new(places: Arc<Places>, header: LogHeader) -> Self {
        Self {
            places,
            header,
            next_seq: header.start_seq,
            position: header.start_position,
            prev_checksum: header.start_prev_checksum,
        }
    }

    /// Blocks of file 8.
    pub(crate) fn blocks(&self) -> u64 {
        self.places.extents.len() as u64 * (self.places.au_bytes / BLOCK_BYTES as u64)
    }

    /// Records the ring may hold.
    fn room(&self) -> u64 {
        self.blocks().saturating_sub(LOG_HEADER_BLOCKS)
    }

    /// Records since the header's start.
    pub(crate) fn used(&self) -> u64 {
        self.next_seq - self.header.start_seq
    }

    /// The block after `position`.
    pub(crate) fn after(&self, position: u64) -> u64 {
        if position + 1 >= self.blocks() {
            LOG_HEADER_BLOCKS
        } else {
            position + 1
        }
    }

    /// Where each copy of block `block` of file 8 is: (disk, offset).
    pub(crate) fn places(&self, block: u64) -> Vec<(u16, u64)> {
        let (au_bytes, extents) = (self.places.au_bytes, &self.places.extents);
        let per = au_bytes / BLOCK_BYTES as u64;
        let Some(extent) = extents.get((block / per) as usize) else {
            return Vec::new();
        };
        let within = (block % per) * BLOCK_BYTES as u64;
        extent
            .copies()
            .iter()
            .map(|c| (c.disk, u64::from(c.au) * au_bytes + within))
            .collect()
    }
}

/// A record's address.
pub(crate) fn record_id(position: u64) -> BlockId {
    BlockId {
        block_type: BlockType::ChecksumLog,
        owner: FILE_CHECKSUM_LOG,
        owner_tag: 0,
        index: position,
    }
}

/// A header slot's address.
pub(crate) fn header_id(slot: u64) -> BlockId {
    BlockId {
        block_type: BlockType::ChecksumLogHeader,
        owner: FILE_CHECKSUM_LOG,
        owner_tag: 0,
        index: slot,
    }
}

#[derive(Debug, Default)]
struct Writer {
    /// `None` until the first record of a log made by this mount, or set
    /// by the mount that read it ([`LogLock::set_ring`]).
    ring: Option<Ring>,
    /// The newest record a completed flush covers: the next record says so.
    flushed_through: u64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Writes in the region now.
    pins: u32,
    /// A durable record names it: a write may enter without a record.
    named: bool,
    /// When a write last entered it (for choosing which leaves).
    used: u64,
}

#[derive(Debug, Default)]
struct Regions {
    /// (file, region index): every region the next record names.
    entries: HashMap<(u32, u32), Entry>,
    tick: u64,
}

impl Regions {
    fn list(&self) -> Vec<Region> {
        let mut out: Vec<Region> = self
            .entries
            .keys()
            .map(|(file, index)| Region {
                file: *file,
                index: *index,
            })
            .collect();
        out.sort_by_key(|r| (r.file, r.index));
        out
    }
}

/// A file's units' new checksums a record is to name.
type Runs = Vec<(u32, Arc<FileSums>, u64, Vec<u32>)>;

/// The log: see the module's comment.
#[derive(Debug, Default)]
pub(crate) struct SumsLog {
    writer: Mutex<Writer>,
    /// `None`: the group has no log (no file has checksums).
    places: Mutex<Option<Arc<Places>>>,
    regions: Mutex<Regions>,
    let_go: Condvar,
}

/// The writer state, held (rank [`Rank::Log`]): for the metadata plane's
/// checkpoint of the maps, which writes its record and header with it.
pub(crate) struct LogLock<'a> {
    log: &'a SumsLog,
    writer: Ranked<std::sync::MutexGuard<'a, Writer>>,
}

/// The regions a write holds: let go when dropped.
#[derive(Debug)]
pub(crate) struct Pins {
    log: Arc<SumsLog>,
    keys: Vec<(u32, u32)>,
}

impl Drop for Pins {
    fn drop(&mut self) {
        if self.keys.is_empty() {
            return;
        }
        let mut regions = self.log.regions();
        for key in &self.keys {
            if let Some(e) = regions.entries.get_mut(key) {
                e.pins = e.pins.saturating_sub(1);
            }
        }
        drop(regions);
        self.log.let_go.notify_all();
    }
}

/// Why a batch of records could not be written.
enum Unwritten {
    /// The ring has no room: the maps must be checkpointed first.
    Full,
    Failed(GroupError),
}

impl SumsLog {
    fn regions(&self) -> Ranked<std::sync::MutexGuard<'_, Regions>> {
        Ranked::take(Rank::Leaf, "the checksum log's regions", || {
            recover(self.regions.lock())
        })
    }

    fn writer(&self) -> Ranked<std::sync::MutexGuard<'_, Writer>> {
        // Held across I/O: under the interleaving simulator a waiter
        // yields instead of blocking the one thread that runs.
        Ranked::take(Rank::Log, "the checksum log", || {
            recover(cairn_io::sched::lock(&self.writer))
        })
    }

    /// File 8 is at `places` (`None`: the group has no log).
    pub(crate) fn set_places(&self, places: Option<Places>) {
        let _leaf = crate::lock_order::take(Rank::Leaf, "the checksum log's places");
        *recover(self.places.lock()) = places.map(Arc::new);
    }

    /// Whether the group has a log (some file has checksums).
    pub(crate) fn has_log(&self) -> bool {
        let _leaf = crate::lock_order::take(Rank::Leaf, "the checksum log's places");
        recover(self.places.lock()).is_some()
    }

    /// The writer's ring, with file 8's places as they are now; a log this
    /// mount made starts empty. `None` for a group without a log.
    fn ring_now<'w>(&self, writer: &'w mut Writer) -> Option<&'w mut Ring> {
        let places = {
            let _leaf = crate::lock_order::take(Rank::Leaf, "the checksum log's places");
            recover(self.places.lock()).clone()?
        };
        let ring = writer
            .ring
            .get_or_insert_with(|| Ring::new(places.clone(), LogHeader::EMPTY));
        ring.places = places;
        Some(ring)
    }

    /// The writer state, for the metadata plane (under `meta`).
    pub(crate) fn lock(&self) -> LogLock<'_> {
        LogLock {
            log: self,
            writer: self.writer(),
        }
    }

    /// The ring, if the group has a log.
    #[cfg(test)]
    pub(crate) fn ring(&self) -> Option<Ring> {
        let mut writer = self.writer();
        self.ring_now(&mut writer).cloned()
    }

    /// Writes under way in region `index` of file `file`.
    #[cfg(test)]
    pub(crate) fn pins(&self, file: u32, index: u32) -> u32 {
        self.regions()
            .entries
            .get(&(file, index))
            .map_or(0, |e| e.pins)
    }

    /// A write of file `file` (incarnation-independent: regions are by
    /// number) is about to send bytes to `offset .. offset + len`: returns
    /// once a durable record names every region of the range, holding
    /// them until the returned pins drop. A region no durable record names
    /// costs one record and its flush (regions the set no longer has room
    /// for leave it in that record, their units' checksums named in it).
    /// At most [`ENTER_REGIONS_MAX`] regions at once (the caller cuts).
    pub(crate) fn enter(
        self: &Arc<Self>,
        port: &mut dyn DataPort,
        file: u32,
        (offset, len): (u64, u64),
    ) -> Result<Pins, GroupError> {
        let keys: Vec<(u32, u32)> = region_range(offset, len)
            .map(|i| (file, u32::try_from(i).unwrap_or(u32::MAX)))
            .collect();
        assert!(
            keys.len() as u64 <= ENTER_REGIONS_MAX,
            "invariant: a write enters at most {ENTER_REGIONS_MAX} regions at once"
        );
        loop {
            if let Some(pins) = self.pin_named(&keys) {
                return Ok(pins);
            }
            let mut writer = self.writer();
            if self.ring_now(&mut writer).is_none() {
                return Ok(Pins {
                    log: self.clone(),
                    keys: Vec::new(),
                });
            }
            let mut regions = self.regions();
            if let Some(pins) = self.pin_named_in(&mut regions, &keys) {
                return Ok(pins);
            }
            // Room for ours: the regions longest unused and not held leave.
            let missing = keys
                .iter()
                .filter(|k| !regions.entries.contains_key(k))
                .count();
            let over = (regions.entries.len() + missing).saturating_sub(REGIONS_PER_RECORD);
            let mut idle: Vec<((u32, u32), u64)> = regions
                .entries
                .iter()
                .filter(|(k, e)| e.pins == 0 && !keys.contains(k))
                .map(|(k, e)| (*k, e.used))
                .collect();
            if idle.len() < over {
                // Every region is held by a write: wait for one to end.
                drop(writer);
                if cairn_io::sched::scheduled() {
                    // The writes that hold them run only if this one yields.
                    drop(regions);
                    cairn_io::sched::blocked();
                    cairn_io::sched::resumed();
                } else {
                    let regions = regions.map(|g| {
                        self.let_go
                            .wait_timeout(g, REGION_WAIT)
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .0
                    });
                    drop(regions);
                }
                continue;
            }
            idle.sort_by_key(|(_, used)| *used);
            // The set the last durable record names: the records before
            // this batch's last name it still, so that a crash that keeps
            // only some of them keeps the leaving regions named.
            let before = regions.list();
            let leaving: Vec<((u32, u32), Entry)> = idle[..over]
                .iter()
                .filter_map(|(k, _)| regions.entries.remove(k).map(|e| (*k, e)))
                .collect();
            regions.tick += 1;
            let tick = regions.tick;
            for k in &keys {
                let e = regions.entries.entry(*k).or_insert(Entry {
                    pins: 0,
                    named: false,
                    used: tick,
                });
                e.pins += 1;
                e.used = tick;
            }
            let named = regions.list();
            drop(regions);
            // The leaving regions' units: named with the record that drops
            // them (their writes ended before they were let go).
            let runs = take_runs(port, |file, unit_bytes| {
                Some(
                    leaving
                        .iter()
                        .filter(|((f, _), _)| *f == file)
                        .map(|((_, index), _)| region_units(*index, unit_bytes))
                        .collect(),
                )
            });
            let outcome =
                self.write_records(&mut writer, port, &runs, (&before, &named), How::Enter);
            let failed = match outcome {
                Ok(failed) => {
                    self.mark_named(&named);
                    failed
                }
                Err(e) => {
                    give_back(&runs);
                    let mut regions = self.regions();
                    // The failed record may still be durable (its flush
                    // failed), and it does not name them: a write there
                    // names them again first.
                    for (k, e) in leaving {
                        regions
                            .entries
                            .entry(k)
                            .or_insert(Entry { named: false, ..e });
                    }
                    for k in &keys {
                        if let Some(e) = regions.entries.get_mut(k) {
                            e.pins = e.pins.saturating_sub(1);
                            if e.pins == 0 && !e.named {
                                regions.entries.remove(k);
                            }
                        }
                    }
                    drop(regions);
                    drop(writer);
                    match e {
                        Unwritten::Full => {
                            port.checkpoint_maps()?;
                            continue;
                        }
                        Unwritten::Failed(e) => return Err(e),
                    }
                }
            };
            drop(writer);
            let pins = Pins {
                log: self.clone(),
                keys,
            };
            report_failed(port, &failed)?;
            return Ok(pins);
        }
    }

    fn pin_named(self: &Arc<Self>, keys: &[(u32, u32)]) -> Option<Pins> {
        let mut regions = self.regions();
        self.pin_named_in(&mut regions, keys)
    }

    /// Pins on `keys` if a durable record names every one.
    fn pin_named_in(self: &Arc<Self>, regions: &mut Regions, keys: &[(u32, u32)]) -> Option<Pins> {
        if !keys
            .iter()
            .all(|k| regions.entries.get(k).is_some_and(|e| e.named))
        {
            return None;
        }
        regions.tick += 1;
        let tick = regions.tick;
        for k in keys {
            if let Some(e) = regions.entries.get_mut(k) {
                e.pins += 1;
                e.used = tick;
            }
        }
        Some(Pins {
            log: self.clone(),
            keys: keys.to_vec(),
        })
    }

    /// The regions the last record of a log a crash left announces: the
    /// mount's checkpoint record names them again, so that a crash before
    /// that checkpoint's map blocks are durable leaves them to be scanned
    /// by the next mount (what the recovery adopted there is in no record,
    /// only in the maps it writes).
    pub(crate) fn announce(&self, named: &[Region]) {
        let mut regions = self.regions();
        regions.tick += 1;
        let used = regions.tick;
        for r in named {
            regions.entries.entry((r.file, r.index)).or_insert(Entry {
                pins: 0,
                named: true,
                used,
            });
        }
    }

    /// A durable record names `named`.
    fn mark_named(&self, named: &[Region]) {
        let mut regions = self.regions();
        for r in named {
            if let Some(e) = regions.entries.get_mut(&(r.file, r.index)) {
                e.named = true;
            }
        }
    }

    /// Units `units` of file `file` are about to be written again, and
    /// some of them have a write that ended and that no record names yet:
    /// a record names what those writes left, and is flushed, before the
    /// new write's bytes are sent. So a unit never has two writes the log
    /// does not name, and after a crash its copies hold what a record or
    /// the map names, or the one write after it (`data/recover.rs`): two
    /// copies that each kept a different unnamed write would match no
    /// candidate and read as damage. Costs a record only for a unit
    /// written twice between two syncs. The caller holds the extent latch
    /// that keeps other writes of the units out.
    pub(crate) fn name_now(
        &self,
        port: &mut dyn DataPort,
        file: u32,
        sums: &Arc<FileSums>,
        units: std::ops::Range<u64>,
    ) -> Result<(), GroupError> {
        loop {
            let mut writer = self.writer();
            if self.ring_now(&mut writer).is_none() {
                return Ok(());
            }
            let runs: Runs = sums
                .take_unlogged(Some(units.clone()))
                .into_iter()
                .map(|(first, checksums)| (file, sums.clone(), first, checksums))
                .collect();
            if runs.is_empty() {
                return Ok(());
            }
            let named = self.regions().list();
            match self.write_records(&mut writer, port, &runs, (&named, &named), How::Enter) {
                Ok(failed) => {
                    drop(writer);
                    return report_failed(port, &failed);
                }
                Err(e) => {
                    give_back(&runs);
                    drop(writer);
                    match e {
                        Unwritten::Full => port.checkpoint_maps()?,
                        Unwritten::Failed(e) => return Err(e),
                    }
                }
            }
        }
    }

    /// Make every write that ended so far durable with its checksums: the
    /// records naming the units written since the last one, then a flush
    /// of every member disk that may be written (the data's and the
    /// records'), after which those writes are acknowledged. A ring too
    /// full for them has the maps checkpointed first (which names them).
    /// Nothing for a group without a log (the caller flushes its data).
    pub(crate) fn sync(&self, port: &mut dyn DataPort) -> Result<(), GroupError> {
        loop {
            let mut writer = self.writer();
            if self.ring_now(&mut writer).is_none() {
                return Ok(());
            }
            let runs = take_runs(port, |_, _| None);
            if runs.is_empty() {
                return Ok(());
            }
            let named = self.regions().list();
            match self.write_records(&mut writer, port, &runs, (&named, &named), How::Sync) {
                Ok(failed) => {
                    self.mark_named(&named);
                    drop(writer);
                    return report_failed(port, &failed);
                }
                Err(e) => {
                    give_back(&runs);
                    drop(writer);
                    match e {
                        Unwritten::Full => port.checkpoint_maps()?,
                        Unwritten::Failed(e) => return Err(e),
                    }
                }
            }
        }
    }

    /// Write `runs` as the ring's next records, each naming the regions
    /// `named.0` but the last, which names `named.1` (the set after the
    /// batch), then flush (for a sync every writable member disk, else
    /// the disks the records went to). Each record must reach a copy; the
    /// disks that failed are returned, to be reported with the lock let go.
    fn write_records(
        &self,
        writer: &mut Writer,
        port: &mut dyn DataPort,
        runs: &Runs,
        named: (&[Region], &[Region]),
        how: How,
    ) -> Result<FailedDisks, Unwritten> {
        let flushed_through = writer.flushed_through;
        let Some(ring) = self.ring_now(writer) else {
            return Ok(FailedDisks::new());
        };
        let mut records = pack(runs, named, flushed_through);
        // A checkpoint's record begins a new stretch, in a block every
        // other batch leaves free: never over the record the durable
        // header starts at.
        let keep = match how {
            How::Checkpoint(maps_from) => {
                for r in &mut records {
                    r.checkpoint = Some(maps_from);
                }
                0
            }
            How::Enter | How::Sync => CHECKPOINT_KEEP,
        };
        if ring.used() + records.len() as u64 + keep > ring.room() {
            return Err(Unwritten::Full);
        }
        let view = port.disk_view();
        let mut requests = Vec::new();
        let mut of: Vec<(usize, u16)> = Vec::new();
        let (mut seq, mut position, mut prev) = (ring.next_seq, ring.position, ring.prev_checksum);
        let mut chain = Vec::new();
        for (i, mut record) in records.into_iter().enumerate() {
            record.prev_checksum = prev;
            let mut block = meta::empty_block();
            record.encode_into(&mut block);
            meta::seal(&mut block, record_id(position), ring.places.uuid, seq);
            prev = meta::checksum_of(&block[..]);
            for (disk, offset) in ring.places(position) {
                let Some(device) = view.is_writable(disk).then(|| port.device(disk)).flatten()
                else {
                    continue;
                };
                of.push((i, disk));
                requests.push(Request {
                    device,
                    tag: requests.len() as u64,
                    op: Op::Write {
                        offset_bytes: offset,
                        buf: AlignedBuf::from_slice(&block[..]),
                        fua: false,
                    },
                });
            }
            chain.push((seq, position, prev));
            seq += 1;
            position = ring.after(position);
        }
        let mut failed = FailedDisks::new();
        let mut landed = vec![Vec::new(); chain.len()];
        let completions = port
            .engine()
            .execute_all(requests)
            .map_err(|e| Unwritten::Failed(super::error::io_err("(engine)")(e)))?;
        for ((i, disk), c) in of.into_iter().zip(completions) {
            match &c.result {
                Ok(_) => landed[i].push(disk),
                Err(e) => note_failed(&mut failed, disk, e),
            }
        }
        // The flush: of the disks a record reached (and, for a sync, of
        // every disk the data may be on).
        let mut flush: Vec<u16> = landed.iter().flatten().copied().collect();
        if how == How::Sync {
            flush.extend((0..view.writable.len() as u16).filter(|d| view.is_writable(*d)));
        }
        flush.sort_unstable();
        flush.dedup();
        let targets: Vec<(u16, cairn_io::DeviceId)> = flush
            .iter()
            .filter_map(|d| port.device(*d).map(|dev| (*d, dev)))
            .collect();
        // A disk this caller cannot flush (joined since it attached its
        // devices): the sync's runs are not said to be acknowledged.
        let all_flushed = targets.len() == flush.len();
        let requests = targets
            .iter()
            .enumerate()
            .map(|(i, (_, device))| Request {
                device: *device,
                tag: i as u64,
                op: Op::Flush,
            })
            .collect();
        let completions = port
            .engine()
            .execute_all(requests)
            .map_err(|e| Unwritten::Failed(super::error::io_err("(engine)")(e)))?;
        for ((disk, _), c) in targets.iter().zip(completions) {
            if let Err(e) = &c.result {
                note_failed(&mut failed, *disk, e);
            }
        }
        if let Some(i) = landed
            .iter()
            .position(|disks| disks.iter().all(|d| failed.contains_key(d)))
        {
            let (seq, position, _) = chain[i];
            let why: Vec<String> = failed
                .iter()
                .map(|(d, why)| {
                    format!(
                        "{}: {why}",
                        view.names.get(usize::from(*d)).map_or("?", String::as_str)
                    )
                })
                .collect();
            return Err(Unwritten::Failed(GroupError::Unreadable(format!(
                "checksum log record {seq} (block {position} of file {FILE_CHECKSUM_LOG}) reached no copy durably ({}); the writes it names are not acknowledged",
                if why.is_empty() { "no copy may be written".to_string() } else { why.join("; ") }
            ))));
        }
        if let Some(&(seq, position, checksum)) = chain.last() {
            ring.next_seq = seq + 1;
            ring.position = ring.after(position);
            ring.prev_checksum = checksum;
            // Only a sync's flush covers the data the runs name; a
            // checkpoint flushed every disk before its record.
            match how {
                How::Sync if all_flushed => writer.flushed_through = seq,
                How::Checkpoint(_) => writer.flushed_through = seq,
                _ => {}
            }
        }
        Ok(failed)
    }
}

impl LogLock<'_> {
    /// The ring file 8 holds now (mount, the log made, file 8 moved).
    pub(crate) fn set_ring(&mut self, ring: Option<Ring>) {
        self.writer.ring = ring;
    }

    /// A checkpoint of the maps begins (under `meta`, this lock held
    /// until [`Self::finish_checkpoint`]; every disk flushed since the
    /// maps' blocks were taken): a record naming the regions, marked as a
    /// checkpoint's with `maps_from`, the journal sequence its map blocks
    /// will be sealed at or above. A crash before the header names it
    /// leaves the old header, whose records chain on through it, and
    /// recovery tells by `maps_from` which map blocks are newer than the
    /// records before it. Returns where it is (the next header's start)
    /// and the disks that failed, to report once the lock is let go.
    pub(crate) fn begin_checkpoint(
        &mut self,
        port: &mut dyn DataPort,
        maps_from: u64,
    ) -> Result<(LogStart, FailedDisks), GroupError> {
        let Some(ring) = self.log.ring_now(&mut self.writer) else {
            return Ok((LogStart::default(), FailedDisks::new()));
        };
        let start = LogStart {
            seq: ring.next_seq,
            position: ring.position,
            prev_checksum: ring.prev_checksum,
        };
        let named = self.log.regions().list();
        let how = How::Checkpoint(maps_from);
        match self
            .log
            .write_records(&mut self.writer, port, &Vec::new(), (&named, &named), how)
        {
            Ok(failed) => {
                self.log.mark_named(&named);
                Ok((start, failed))
            }
            Err(Unwritten::Full) => Err(GroupError::Unreadable(
                "the checksum log has no block left for a checkpoint's record (two checkpoints failed since the last one that ended); mount the group again".into(),
            )),
            Err(Unwritten::Failed(e)) => Err(e),
        }
    }

    /// Writes are over (a dismount, or a mount before any) and the
    /// checkpoint that took what they left has ended, its map blocks
    /// durable: the regions leave the set (only those no write holds), and
    /// a record naming what is left says so, so a mount after it has none
    /// to scan. Never before that checkpoint's end: until its map blocks
    /// are durable, the units of writes no record names are vouched for
    /// only by the regions the last record announces. A ring with no room
    /// for the record (not after a checkpoint) leaves the regions to the
    /// next mount's scan, which finds them in step with the maps.
    pub(crate) fn let_go_regions(
        &mut self,
        port: &mut dyn DataPort,
    ) -> Result<FailedDisks, GroupError> {
        self.log.regions().entries.retain(|_, e| e.pins > 0);
        let named = self.log.regions().list();
        match self.log.write_records(
            &mut self.writer,
            port,
            &Vec::new(),
            (&named, &named),
            How::Enter,
        ) {
            Ok(failed) => Ok(failed),
            Err(Unwritten::Full) => Ok(FailedDisks::new()),
            Err(Unwritten::Failed(e)) => Err(e),
        }
    }

    /// The checkpoint begun at `start` has committed its map blocks: the
    /// next header names its record as the ring's start; the records
    /// before it are free. Returns the disks that failed, to report once
    /// the lock is let go.
    pub(crate) fn finish_checkpoint(
        &mut self,
        port: &mut dyn DataPort,
        start: LogStart,
    ) -> Result<FailedDisks, GroupError> {
        let mut failed = FailedDisks::new();
        let Some(ring) = self.log.ring_now(&mut self.writer) else {
            return Ok(failed);
        };
        let header = LogHeader {
            header_generation: ring.header.header_generation + 1,
            start_seq: start.seq,
            start_position: start.position,
            start_prev_checksum: start.prev_checksum,
        };
        let slot = header.header_generation % LOG_HEADER_BLOCKS;
        let mut block = meta::empty_block();
        header.encode_into(&mut block);
        meta::seal(
            &mut block,
            header_id(slot),
            ring.places.uuid,
            header.header_generation,
        );
        let view = port.disk_view();
        let targets: Vec<(u16, cairn_io::DeviceId, u64)> = ring
            .places(slot)
            .into_iter()
            .filter_map(|(disk, offset)| {
                let device = view
                    .is_writable(disk)
                    .then(|| port.device(disk))
                    .flatten()?;
                Some((disk, device, offset))
            })
            .collect();
        let writes = targets
            .iter()
            .enumerate()
            .map(|(i, (_, device, offset))| Request {
                device: *device,
                tag: i as u64,
                op: Op::Write {
                    offset_bytes: *offset,
                    buf: AlignedBuf::from_slice(&block[..]),
                    fua: false,
                },
            })
            .collect();
        let flushes = targets
            .iter()
            .enumerate()
            .map(|(i, (_, device, _))| Request {
                device: *device,
                tag: i as u64,
                op: Op::Flush,
            })
            .collect();
        let mut whole = vec![true; targets.len()];
        for batch in [writes, flushes] {
            let completions = port
                .engine()
                .execute_all(batch)
                .map_err(super::error::io_err("(engine)"))?;
            for (i, c) in completions.iter().enumerate() {
                if let Err(e) = &c.result {
                    whole[i] = false;
                    note_failed(&mut failed, targets[i].0, e);
                }
            }
        }
        if !whole.iter().any(|ok| *ok) {
            return Err(GroupError::Unreadable(format!(
                "the checksum log's header (slot {slot}) reached no copy durably; the log goes on from its old start"
            )));
        }
        ring.header = header;
        Ok(failed)
    }
}

/// Where a checkpoint's record is: the next header's start.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LogStart {
    seq: u64,
    position: u64,
    prev_checksum: u32,
}

/// Why a batch of records is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// A write enters regions: the records and their flush come first.
    Enter,
    /// A sync: the data's disks are flushed with the records.
    Sync,
    /// A checkpoint of the maps begins at this record (its journal
    /// sequence `maps_from`): once its map blocks are committed, the
    /// header names it as the ring's start. Every other batch leaves
    /// [`CHECKPOINT_KEEP`] blocks free for it.
    Checkpoint(u64),
}

/// Blocks every batch but a checkpoint's leaves free: one for the next
/// checkpoint's record, and one more for a checkpoint whose record was
/// written and whose commit then failed (the group stops; the next mount's
/// checkpoint writes its own).
const CHECKPOINT_KEEP: u64 = 2;

/// The regions of `offset .. offset + len`.
pub(crate) fn region_range(offset: u64, len: u64) -> std::ops::Range<u64> {
    if len == 0 {
        return 0..0;
    }
    offset / REGION_BYTES..(offset + len - 1) / REGION_BYTES + 1
}

/// The units of region `index` of a file of `unit_bytes` units.
fn region_units(index: u32, unit_bytes: u32) -> std::ops::Range<u64> {
    let per = REGION_BYTES / u64::from(unit_bytes);
    u64::from(index) * per..(u64::from(index) + 1) * per
}

/// The units of every file's checksums not yet named, as runs: within the
/// ranges `ranges(file, unit_bytes)` gives, or all of them where it gives
/// `None`.
fn take_runs(
    port: &mut dyn DataPort,
    ranges: impl Fn(u32, u32) -> Option<Vec<std::ops::Range<u64>>>,
) -> Runs {
    let mut out = Vec::new();
    for (file, sums) in port.plane().all_sums() {
        let taken = match ranges(file, super::data::UnitSums::unit_bytes(&*sums)) {
            None => sums.take_unlogged(None),
            Some(ranges) => ranges
                .into_iter()
                .flat_map(|r| sums.take_unlogged(Some(r)))
                .collect(),
        };
        for (first, checksums) in taken {
            out.push((file, sums.clone(), first, checksums));
        }
    }
    out
}

/// Runs a record could not be made durable with: named by the next one.
fn give_back(runs: &Runs) {
    for (_, sums, first, checksums) in runs {
        sums.unlog_failed(*first, checksums.len() as u64);
    }
}

/// Disks a record's write failed on, reported (they go offline) with no
/// lock of the log held.
fn report_failed(port: &mut dyn DataPort, failed: &FailedDisks) -> Result<(), GroupError> {
    if failed.is_empty() {
        return Ok(());
    }
    let epoch = port.disk_view().epoch;
    port.disks_failed(failed, epoch)
}

/// `runs` as records: runs fill them in order, cut where a record is
/// full; every record names the regions `named.0` but the last, which
/// names `named.1`. At least one record.
fn pack(
    runs: &Runs,
    (before, after): (&[Region], &[Region]),
    flushed_through: u64,
) -> Vec<IntentRecord> {
    let empty = || IntentRecord {
        prev_checksum: 0,
        writer: 0,
        flushed_through,
        checkpoint: None,
        regions: before.to_vec(),
        runs: Vec::new(),
    };
    let mut records = vec![empty()];
    let mut room = RUN_AREA_BYTES;
    for (file, sums, first, checksums) in runs {
        let mut at = 0usize;
        while at < checksums.len() {
            if room < RUN_HEAD_BYTES + 4 {
                records.push(empty());
                room = RUN_AREA_BYTES;
            }
            let take = ((room - RUN_HEAD_BYTES) / 4).min(checksums.len() - at);
            let record = records.last_mut().expect("invariant: one record at least");
            record.runs.push(IntentRun {
                file: *file,
                incarnation: sums.incarnation(),
                first_unit: first + at as u64,
                checksums: checksums[at..at + take].to_vec(),
            });
            room -= RUN_HEAD_BYTES + 4 * take;
            at += take;
        }
    }
    if let Some(last) = records.last_mut() {
        last.regions = after.to_vec();
    }
    records
}

#[cfg(test)]
mod tests;
