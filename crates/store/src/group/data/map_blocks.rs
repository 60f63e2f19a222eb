//! A checksum map's blocks as the data plane reads and writes them
//! (`docs/checksums.md`, "Where the checksums live" and "The checkpoint").
//!
//! A map block is a metadata block (type 15: owner the data file, tag its
//! incarnation, index the block, generation the checkpoint's) kept in a
//! file like any other, so its copies are the map's extent's copies. A
//! read takes every copy it may and the newest valid one: an older valid
//! copy is what a lost or torn write of the block leaves. A write goes
//! copy after copy, each flushed before the next is touched, so a power cut
//! tears at most one copy and another holds the block before or after it.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use cairn_format::group::{
    au_mask, decode_map_block, encode_map_block, map_number, zero_unit_checksum, AuAddr, Extent,
    MapSums,
};
use cairn_format::meta::{self, BlockId, BlockType, MetaError, BLOCK_BYTES};
use cairn_io::Op;
use uuid::Uuid;

use super::common::{
    at, buffer_with, changing_error, check_range, file_snapshot, lost_write_error, missed_copies,
    piece_aus, readable_copies, run, run_one, writable_copies, DataPort, DiskIo, FailedDisks,
    WRITE_ATTEMPTS_MAX,
};
use super::write::{settle_write, write, InPlaceDone};
use crate::group::error::GroupError;
use crate::group::plane::{DiskView, FileSnapshot, Hold, OperationGuard};

/// One block of a map as read: its checksums, and the generation of the
/// copy they came from (0: no copy was ever written, every unit it covers
/// holds zeros).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MapBlock {
    pub(crate) sums: Box<MapSums>,
    pub(crate) generation: u64,
}

/// Block `block` of data file `file`'s map, incarnation `incarnation`:
/// its self-address.
pub(crate) fn map_block_id(file: u32, incarnation: u32, block: u64) -> BlockId {
    BlockId {
        block_type: BlockType::ChecksumMap,
        owner: file,
        owner_tag: incarnation,
        index: block,
    }
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

/// Read block `block` of data file `file`'s map from every copy that may be
/// read, and take the newest valid one. A block no copy of which was ever
/// written (an extent never written, or every copy blank) holds the zero
/// unit's checksum in every slot. Fails when no copy is valid and some
/// copy is not blank: the block is damaged (or unreadable) on every copy.
#[cfg_attr(
    not(test),
    allow(
        dead_code,
        reason = "the read path's loader of a file's checksums (issue 36) comes next"
    )
)]
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
    let why: Vec<String> = read
        .copies
        .iter()
        .filter_map(|(c, _, copy)| match copy {
            MapCopy::Bad(why) => Some(format!("{}: {why}", view.name(c.disk))),
            _ => None,
        })
        .collect();
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
    let ios = copies
        .iter()
        .map(|c| DiskIo {
            disk: c.disk,
            op: Op::Read {
                offset_bytes: at(&map, *c, within),
                buf: port.buffer(BLOCK_BYTES),
            },
        })
        .collect();
    let id = map_block_id(file, map.incarnation, block);
    for (c, (result, buf)) in copies.iter().zip(run(port, ios)?) {
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

/// Write block `block` of data file `file`'s map with `sums`, sealed with
/// `generation` (newer than any the block has): copy after copy, each
/// flushed before the next is written, under the block's write latch. A
/// copy whose write or flush fails is marked stale and its disk taken
/// offline, as a data write's; the write fails only when no copy took it.
/// The first write into an extent of the map has no older block to keep:
/// it goes as any first write does (zeroing, every copy at once, the
/// extent marked initialised).
#[cfg_attr(
    not(test),
    allow(
        dead_code,
        reason = "the write path's checkpoint (issue 36) comes next"
    )
)]
pub(crate) fn write_map_block(
    port: &mut dyn DataPort,
    slot: Option<&AtomicU64>,
    group: Uuid,
    (file, block): (u32, u64),
    sums: &MapSums,
    generation: u64,
) -> Result<(), GroupError> {
    let number = map_number(file);
    let offset = block * BLOCK_BYTES as u64;
    let mut snap = file_snapshot(port, number)?;
    for _ in 0..WRITE_ATTEMPTS_MAX {
        let (index, within) = locate(&snap, file, block)?;
        let mut image = meta::empty_block();
        encode_map_block(&mut image, sums);
        meta::seal(
            &mut image,
            map_block_id(file, snap.incarnation, block),
            group,
            generation,
        );
        // A first write, or a map that may not be written (its AUs shared
        // with another file's, found at mount): the general path decides.
        if snap.read_only.is_some() || !snap.extent(index).is_some_and(|e| e.initialized) {
            return write(port, slot, number, offset, &image[..]);
        }
        let latch = port.plane().latch(vec![(
            (number, snap.incarnation, index),
            Hold::write(offset, BLOCK_BYTES as u64),
        )]);
        let guard = slot.map(|s| OperationGuard::start(port.plane(), s));
        // Latched, look again: still this snapshot, so the copies are the
        // extent's and the incarnation the image is sealed with.
        let now = file_snapshot(port, number)?;
        if !Arc::ptr_eq(&now, &snap) {
            drop(guard);
            drop(latch);
            snap = now;
            continue;
        }
        let extent = *snap.extent(index).expect("invariant: located in the map");
        let view = port.disk_view();
        let mark = (index, au_mask(piece_aus(&snap, within, BLOCK_BYTES as u64)));
        // A copy on an offline disk is marked stale before any byte of the
        // new block lands (as every write's is), durably.
        let mut unmarked = Vec::new();
        missed_copies(&view, index, &extent, mark.1, &mut unmarked);
        settle_write(
            port,
            None,
            (number, snap.incarnation),
            &unmarked,
            &FailedDisks::new(),
            &view,
            None,
        )?;
        let done = write_copy_after_copy(port, &snap, &extent, (within, mark), &image[..], &view)?;
        let (landed, mut done) = done;
        let lost = (landed == 0).then(|| {
            lost_write_error(
                "write of a checksum map block",
                (number, offset, BLOCK_BYTES as u64),
                &view,
                &done.errors,
            )
        });
        if landed == 0 {
            // No copy has it: every copy keeps what it had, none is marked.
            done.missed.clear();
        }
        settle_write(
            port,
            guard,
            (number, snap.incarnation),
            &done.missed,
            &done.failed,
            &view,
            lost,
        )?;
        drop(latch);
        return Ok(());
    }
    Err(changing_error("write of a checksum map block", number))
}

/// Write `image` to each writable copy of `extent` in turn, each flushed
/// before the next is touched. The copies that hold it now (written and
/// flushed), and what the others did.
fn write_copy_after_copy(
    port: &mut dyn DataPort,
    snap: &FileSnapshot,
    extent: &Extent,
    (within, mark): (u64, (u64, u16)),
    image: &[u8],
    view: &DiskView,
) -> Result<(usize, InPlaceDone), GroupError> {
    let mut done = InPlaceDone::default();
    let mut landed = 0;
    for c in writable_copies(view, extent) {
        let write = DiskIo {
            disk: c.disk,
            op: Op::Write {
                offset_bytes: at(snap, c, within),
                buf: buffer_with(port, image),
                fua: false,
            },
        };
        let outcome = run_one(port, write)?;
        let wrote = outcome.0.is_ok();
        done.settle(port, c, outcome, mark);
        if !wrote {
            continue;
        }
        // A copy whose flush failed may not hold the block: it missed it.
        let flush = DiskIo {
            disk: c.disk,
            op: Op::Flush,
        };
        let flushed = run_one(port, flush)?;
        if flushed.0.is_ok() {
            landed += 1;
        } else {
            done.settle(port, c, flushed, mark);
        }
    }
    Ok((landed, done))
}

#[cfg(test)]
mod tests;
