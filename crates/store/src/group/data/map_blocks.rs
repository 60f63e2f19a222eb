//! A checksum map's blocks as the data plane reads them, and its writers'
//! side of the checksums (`docs/checksums.md`, "Where the checksums live").
//!
//! A map block is a metadata block (type 15: owner the data file, tag its
//! incarnation, index the block, generation the journal sequence of the
//! commit that wrote it) kept in a file like any other, so its copies are
//! the map's extent's copies. A read takes every copy it may and the
//! newest valid one: an older valid copy is what a lost write of the block
//! leaves. The blocks are written by the metadata plane through the
//! journal (`Group::checkpoint_maps`), so a power cut never leaves one
//! torn for the next mount. The data paths' writers keep the checksums in
//! memory in step with the bytes ([`SumsWrite`]).

use std::sync::Arc;

use cairn_format::group::{
    decode_map_block, map_number, unit_checksum, zero_unit_checksum, AuAddr, MapSums,
};
use cairn_format::meta::{self, MetaError, BLOCK_BYTES};
use cairn_io::Op;
use uuid::Uuid;

use super::common::{
    at, check_range, file_snapshot, piece_aus, readable_copies, run, run_one, DataPort, DiskIo,
};
use crate::group::block_ids::map_block_id;
use crate::group::error::GroupError;
use crate::group::limits::MAP_READ_TRIES;
use crate::group::plane::FileSnapshot;
use crate::group::sums::{FileSums, NotLoaded};
use crate::group::sums_log::Pins;

/// One block of a map as read: its checksums, and the generation of the
/// copy they came from (0: no copy was ever written, every unit it covers
/// holds zeros).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MapBlock {
    pub(crate) sums: Box<MapSums>,
    pub(crate) generation: u64,
}

/// Where block `block` of a map is: its extent and the offset in it.
fn locate(map: &FileSnapshot, file: u32, block: u64) -> Result<(u64, u64), GroupError> {
    let offset = block * BLOCK_BYTES as u64;
    check_range(map, offset, BLOCK_BYTES as u64).map_err(|_| {
        GroupError::Invalid(format!(
            "file {file}'s checksum map has no block {block} (it is {} bytes)",
            map.size_bytes
        ))
    })?;
    let loc = map.layout.locate(offset);
    Ok((loc.extent, loc.offset_in_extent))
}

/// What one copy of a map block holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MapCopy {
    /// A valid block of this generation.
    Valid(u64),
    /// All zeros: never written.
    Blank,
    /// Unreadable, or not a valid block of this map: why.
    Bad(String),
}

/// Every readable copy of a map block, as read, and the newest valid one
/// with its image (sealed, as on disk).
#[derive(Debug)]
pub(crate) struct MapCopies {
    /// Each copy read, by where it is; empty for an extent never written.
    pub(crate) copies: Vec<(AuAddr, u64, MapCopy)>,
    pub(crate) newest: Option<(MapBlock, Vec<u8>)>,
}

impl MapCopies {
    /// Each bad copy's fault, "disk: why", the disk named by `name`.
    pub(crate) fn faults(&self, name: impl Fn(u16) -> String) -> Vec<String> {
        self.copies
            .iter()
            .filter_map(|(c, _, copy)| match copy {
                MapCopy::Bad(why) => Some(format!("{}: {why}", name(c.disk))),
                _ => None,
            })
            .collect()
    }
}

/// Read block `block` of data file `file`'s map from every copy that may be
/// read, and take the newest valid one. A block no copy of which was ever
/// written (an extent never written, or every copy blank) holds the zero
/// unit's checksum in every slot. Fails when no copy is valid and some
/// copy is not blank: the block is damaged (or unreadable) on every copy.
pub(crate) fn read_map_block(
    port: &mut dyn DataPort,
    group: Uuid,
    file: u32,
    block: u64,
) -> Result<MapBlock, GroupError> {
    let read = read_map_copies(port, group, file, block)?;
    if let Some((found, _)) = read.newest {
        return Ok(found);
    }
    let view = port.disk_view();
    let why = read.faults(|disk| view.name(disk));
    if why.is_empty() {
        let zero = zero_unit(port, file)?;
        return Ok(MapBlock {
            sums: decode_map_block(&[0; BLOCK_BYTES], zero),
            generation: 0,
        });
    }
    Err(GroupError::Unreadable(format!(
        "block {block} of file {file}'s checksum map has no valid copy ({})",
        why.join("; ")
    )))
}

/// [`read_map_block`]'s reads, copy by copy: what `check` judges.
pub(crate) fn read_map_copies(
    port: &mut dyn DataPort,
    group: Uuid,
    file: u32,
    block: u64,
) -> Result<MapCopies, GroupError> {
    let map = file_snapshot(port, map_number(file))?;
    let zero = zero_unit(port, file)?;
    let (index, within) = locate(&map, file, block)?;
    let extent = *map.extent(index).ok_or_else(|| {
        GroupError::Corrupt(format!("file {file}'s checksum map: no extent {index}"))
    })?;
    let mut read = MapCopies {
        copies: Vec::new(),
        newest: None,
    };
    if !extent.initialized {
        return Ok(read);
    }
    let view = port.disk_view();
    let copies = readable_copies(&view, &extent, piece_aus(&map, within, BLOCK_BYTES as u64));
    if copies.is_empty() {
        return Err(GroupError::Unreadable(format!(
            "block {block} of file {file}'s checksum map: no copy of it is on a disk in service"
        )));
    }
    let read_of = |port: &mut dyn DataPort, c: &AuAddr| DiskIo {
        disk: c.disk,
        op: Op::Read {
            offset_bytes: at(&map, *c, within),
            buf: port.buffer(BLOCK_BYTES),
        },
    };
    let ios = copies.iter().map(|c| read_of(port, c)).collect();
    let id = map_block_id(file, map.incarnation, block);
    let mut outcomes = run(port, ios)?;
    // A read that failed is tried again (a path failing over, a sector
    // read again), a bounded number of times, before the copy is bad.
    for (c, outcome) in copies.iter().zip(outcomes.iter_mut()) {
        for _ in 1..MAP_READ_TRIES {
            if outcome.0.is_ok() {
                break;
            }
            if let Some(b) = outcome.1.take() {
                port.recycle(b);
            }
            let again = read_of(port, c);
            *outcome = run_one(port, again)?;
        }
    }
    for (c, (result, buf)) in copies.iter().zip(outcomes) {
        let copy = match (result, &buf) {
            (Ok(_), Some(b)) => match meta::open(&b[..], id, group) {
                Ok(generation) => {
                    if read
                        .newest
                        .as_ref()
                        .is_none_or(|(n, _)| generation > n.generation)
                    {
                        let found = MapBlock {
                            sums: decode_map_block(&b[..], zero),
                            generation,
                        };
                        read.newest = Some((found, b[..].to_vec()));
                    }
                    MapCopy::Valid(generation)
                }
                Err(MetaError::Blank) => MapCopy::Blank,
                Err(e) => MapCopy::Bad(e.to_string()),
            },
            (Ok(_), None) => MapCopy::Bad("no bytes came back".into()),
            (Err(e), _) => MapCopy::Bad(e.to_string()),
        };
        if let Some(b) = buf {
            port.recycle(b);
        }
        read.copies.push((*c, at(&map, *c, within), copy));
    }
    Ok(read)
}

/// The checksum of a zero unit of data file `file`: its sector's.
fn zero_unit(port: &mut dyn DataPort, file: u32) -> Result<u32, GroupError> {
    let sector = file_snapshot(port, file)?.sector_bytes;
    zero_unit_checksum(sector)
        .ok_or_else(|| GroupError::Corrupt(format!("file {file}: its sector is no checksum unit")))
}

/// A change of a file's units under way, as its checksums know it: begun
/// ([`SumsWrite::begin`]) under the latch that keeps other writes of those
/// units out, before the bytes are sent; each part ended with whether a
/// copy took it ([`SumsWrite::end`]). A part not ended (an error on the
/// way) gives its checksums back when this is dropped.
pub(crate) struct SumsWrite {
    number: u32,
    sums: Arc<FileSums>,
    unit_bytes: u64,
    /// Parts begun and not wholly ended.
    open: Vec<OpenPart>,
}

/// A part begun: its units, how many of them have ended (a part may end
/// piece by piece), and the checksum log's regions a write of bytes holds
/// until every unit of it has ended.
struct OpenPart {
    first: u64,
    count: u64,
    ended: u64,
    pins: Option<Pins>,
}

impl SumsWrite {
    /// Nothing begun yet, for the file of `snap` (its incarnation);
    /// `None` for a file without a map.
    pub(crate) fn new(
        port: &mut dyn DataPort,
        snap: &FileSnapshot,
    ) -> Result<Option<Self>, GroupError> {
        if !snap.has_map {
            return Ok(None);
        }
        let Some(sums) = port.plane().file_sums(snap.number, snap.incarnation) else {
            return Ok(None);
        };
        Ok(Some(Self {
            number: snap.number,
            sums,
            unit_bytes: u64::from(snap.sector_bytes),
            open: Vec::new(),
        }))
    }

    /// Units `offset .. offset + len` of the file (whole units) are about
    /// to hold `bytes`, or zeros (`None`), written to the disks: their new
    /// checksums taken, the old kept beside them until [`Self::end`]. The
    /// bytes land only where a durable record of the log names the region:
    /// after a crash, recovery scans those regions for writes no record
    /// named.
    pub(crate) fn begin(
        &mut self,
        port: &mut dyn DataPort,
        (offset, len): (u64, u64),
        bytes: Option<&[u8]>,
    ) -> Result<(), GroupError> {
        let sums: Vec<u32> = match bytes {
            Some(b) => b
                .chunks(self.unit_bytes as usize)
                .map(unit_checksum)
                .collect(),
            None => vec![self.sums.zero(); (len / self.unit_bytes) as usize],
        };
        let log = port.plane().sums_log().clone();
        let pins = log.enter(port, self.number, (offset, len))?;
        let units = offset / self.unit_bytes..(offset + len) / self.unit_bytes;
        if self.sums.unlogged_in(units.clone()) {
            log.name_now(port, self.number, &self.sums, units)?;
        }
        self.begin_with(port, (offset, len), &sums, Some(pins))
    }

    /// Units `offset .. offset + len` of whole extents about to be marked
    /// unwritten (a punch): zero units. No region is entered: no byte is
    /// written, and an extent the metadata says is unwritten reads as zeros,
    /// which recovery takes as what it says (`data/recover.rs`).
    pub(crate) fn begin_unwritten(
        &mut self,
        port: &mut dyn DataPort,
        (offset, len): (u64, u64),
    ) -> Result<(), GroupError> {
        let sums = vec![self.sums.zero(); (len / self.unit_bytes) as usize];
        self.begin_with(port, (offset, len), &sums, None)
    }

    fn begin_with(
        &mut self,
        port: &mut dyn DataPort,
        (offset, len): (u64, u64),
        sums: &[u32],
        pins: Option<Pins>,
    ) -> Result<(), GroupError> {
        let unit = self.unit_bytes;
        let (first, count) = (offset / unit, len / unit);
        let group = port.plane().group_uuid();
        loop {
            match self.sums.begin_write(first, sums) {
                Ok(()) => break,
                Err(NotLoaded(block)) => {
                    let read = read_map_block(port, group, self.number, block)?;
                    self.sums.load(block, read);
                }
            }
        }
        self.open.push(OpenPart {
            first,
            count,
            ended: 0,
            pins,
        });
        Ok(())
    }

    /// The part at `offset .. offset + len` is done: `landed`, some copy
    /// took it, and its new checksums stand; else the old come back.
    pub(crate) fn end(&mut self, (offset, len): (u64, u64), landed: bool) {
        let (first, count) = (offset / self.unit_bytes, len / self.unit_bytes);
        self.sums.end_write(first, count, landed);
        // A part's regions are let go once every unit of it has ended (its
        // units' ends are then unlogged: a record that lets a region go
        // names them).
        for part in &mut self.open {
            let overlap = (part.first + part.count)
                .min(first + count)
                .saturating_sub(part.first.max(first));
            part.ended += overlap;
        }
        self.open.retain(|part| part.ended < part.count);
    }
}

impl Drop for SumsWrite {
    fn drop(&mut self) {
        for part in std::mem::take(&mut self.open) {
            self.sums.end_write(part.first, part.count, false);
            drop(part.pins);
        }
    }
}

#[cfg(test)]
mod tests;
