//! Writing and erasing disk labels on any [`IoEngine`] device.
//!
//! Write order (a crash at any point leaves a state `cairn disk repair` or a
//! second `label`/`unlabel` completes, never a half-written copy taken as good):
//! 1. the backup copies (1, 2), then a flush;
//! 2. the primary (copy 0), FUA, then a flush;
//! 3. every copy read back and decoded.
//!
//! A crash before step 2 leaves good backups and no primary: the disk lists as
//! damaged and repair writes the primary. A torn copy fails its checksum and is
//! never believed.
//!
//! Erasing zeroes only the blocks that carry Cairn's magic: a copy slot that now
//! holds someone else's data (a filesystem written over a wiped primary) is left
//! alone.

use cairn_format::layout::HEADER_BLOCK_BYTES;
use cairn_format::{DiskHeader, DiskLabel, FeatureSet, HeaderPlacement};
use cairn_io::{AlignedBuf, DeviceId, IoEngine, IoError};
use uuid::Uuid;

use crate::header_copies::{CopyState, HeaderScan};

/// What to write.
#[derive(Debug, Clone)]
pub struct LabelSpec {
    pub label: DiskLabel,
    pub disk_uuid: Uuid,
    pub now_unix_seconds: u64,
    /// 1 on a fresh device; above any generation already there on a relabel, so
    /// that a relabel cut short never loses to the label it replaces.
    pub generation: u64,
}

/// Why a write of header copies failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    TooSmall(#[from] cairn_format::layout::DeviceTooSmall),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("header copy {copy} did not read back correctly after writing ({reason}); the device may be failing")]
    Verify { copy: usize, reason: String },
}

/// Write `header` to the given copies (backups first, primary last), flush, and
/// verify every copy of the header reads back good.
pub fn write_copies(
    engine: &mut dyn IoEngine,
    device: DeviceId,
    header: &DiskHeader,
    copies: &[usize],
) -> Result<(), WriteError> {
    let mut order: Vec<usize> = copies.iter().copied().filter(|c| *c != 0).collect();
    order.sort_unstable();
    for copy in &order {
        engine.write_at(
            device,
            header.copy_offsets_bytes[*copy],
            AlignedBuf::from_slice(&header.encode(*copy)),
            false,
        )?;
    }
    engine.flush(device)?;
    if copies.contains(&0) {
        engine.write_at(
            device,
            header.copy_offsets_bytes[0],
            AlignedBuf::from_slice(&header.encode(0)),
            true,
        )?;
        engine.flush(device)?;
    }
    let scan = HeaderScan::read(engine, device)?;
    for slot in &scan.slots {
        match &slot.state {
            CopyState::Good(d) if d.header == *header => {}
            other => {
                return Err(WriteError::Verify {
                    copy: slot.index,
                    reason: other.describe(),
                })
            }
        }
    }
    Ok(())
}

/// Label the device: a new header at every copy place.
pub fn write_label(
    engine: &mut dyn IoEngine,
    device: DeviceId,
    spec: &LabelSpec,
) -> Result<DiskHeader, WriteError> {
    let geometry = engine
        .geometry(device)
        .ok_or(IoError::UnknownDevice(device))?
        .clone();
    let placement = HeaderPlacement::for_device(geometry.size_bytes)?;
    let header = DiskHeader {
        label: spec.label.clone(),
        disk_uuid: spec.disk_uuid,
        group_uuid: None,
        former_group: None,
        logical_sector_bytes: geometry.logical_sector_bytes,
        physical_sector_bytes: geometry.physical_sector_bytes,
        device_size_bytes: geometry.size_bytes,
        created_unix_seconds: spec.now_unix_seconds,
        written_unix_seconds: spec.now_unix_seconds,
        generation: spec.generation,
        features: FeatureSet::default(),
        copy_offsets_bytes: placement.offsets_bytes.to_vec(),
    };
    let all: Vec<usize> = (0..header.copy_offsets_bytes.len()).collect();
    write_copies(engine, device, &header, &all)?;
    Ok(header)
}

/// Zero every block the scan read that carries Cairn's magic — the copy places
/// and any stray copy of an earlier label — and flush. Returns the erased offsets.
pub fn erase_label(
    engine: &mut dyn IoEngine,
    device: DeviceId,
    scan: &HeaderScan,
) -> Result<Vec<u64>, IoError> {
    let offsets: Vec<u64> = scan.cairn_blocks().map(|s| s.offset_bytes).collect();
    zero_ranges(
        engine,
        device,
        &offsets
            .iter()
            .map(|o| (*o, HEADER_BLOCK_BYTES))
            .collect::<Vec<_>>(),
    )?;
    Ok(offsets)
}

/// Write zeros over each `(offset, length)` range (whole logical sectors), then flush.
pub fn zero_ranges(
    engine: &mut dyn IoEngine,
    device: DeviceId,
    ranges: &[(u64, u64)],
) -> Result<(), IoError> {
    for (offset, len) in ranges {
        let len = usize::try_from(*len).expect("invariant: a range of a few sectors");
        engine.write_at(device, *offset, AlignedBuf::zeroed(len), false)?;
    }
    engine.flush(device)
}
