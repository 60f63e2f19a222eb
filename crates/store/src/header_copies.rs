//! Reading every copy of a disk header and judging them together.
//!
//! Where the copies are: a good copy records every copy's offset, so once one is
//! found its list is authoritative — it still finds the tail copy after the
//! device has grown. Until one is found, the places are computed from the
//! device's size ([`HeaderPlacement`]).
//!
//! What a copy can be: good; blank (all zeros — wiped); someone else's bytes;
//! ours but damaged (checksum, version, field); a good header that is not where
//! it says it belongs (a misdirected write); unreadable (an I/O error); or beyond
//! the end of a device that shrank.

use cairn_format::layout::HEADER_BLOCK_BYTES;
use cairn_format::{DecodedHeader, DiskHeader, HeaderError, HeaderPlacement};
use cairn_io::{DeviceId, IoEngine, IoError};
use serde::Serialize;
use uuid::Uuid;

/// The state of one copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyState {
    Good(DecodedHeader),
    /// Not a valid copy; the error says why.
    Bad(HeaderError),
    /// A valid header, but recording another place than where it was read.
    Misplaced(DecodedHeader),
    Unreadable(IoError),
    /// The place lies beyond the end of the device.
    Outside,
}

impl CopyState {
    /// Bytes here carry Cairn's magic (good, damaged or misplaced).
    pub fn is_cairn(&self) -> bool {
        match self {
            CopyState::Good(_) | CopyState::Misplaced(_) => true,
            CopyState::Bad(e) => !matches!(
                e,
                HeaderError::Blank | HeaderError::NotCairn { .. } | HeaderError::WrongLength { .. }
            ),
            CopyState::Unreadable(_) | CopyState::Outside => false,
        }
    }

    /// A short description for listings: `good (generation 3)`, `blank (all zeros)`...
    pub fn describe(&self) -> String {
        match self {
            CopyState::Good(d) => format!("good (generation {})", d.header.generation),
            CopyState::Bad(e) => e.to_string(),
            CopyState::Misplaced(d) => format!(
                "misplaced: a copy {} header belonging at offset {} (a misdirected write?)",
                d.copy_index, d.self_offset_bytes
            ),
            CopyState::Unreadable(e) => format!("unreadable: {e}"),
            CopyState::Outside => "beyond the end of the device (did it shrink?)".to_string(),
        }
    }
}

/// One place a copy should be.
#[derive(Debug, Clone)]
pub struct CopySlot {
    pub index: usize,
    pub offset_bytes: u64,
    pub state: CopyState,
    /// The raw block, when it could be read.
    pub block: Option<Vec<u8>>,
}

/// The overall judgement of a device's header copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeaderHealth {
    /// No copy carries Cairn's magic.
    None,
    /// Every copy good and at the same generation.
    Ok,
    /// At least one good copy; others bad, stale or missing: `cairn disk repair` fixes it.
    Damaged,
    /// Good copies disagree on the disk UUID.
    Conflict,
    /// Cairn's magic is there, but no copy is good: nothing to repair from.
    Corrupt,
}

/// Every copy of a device's header.
#[derive(Debug, Clone)]
pub struct HeaderScan {
    pub device_size_bytes: u64,
    /// The places the header's copies belong at, in copy order.
    pub slots: Vec<CopySlot>,
    /// Blocks read at other places a header could be: the places computed from
    /// the device's size when the header records others (it grew), and places
    /// an older good copy records. A previous label may linger there.
    pub strays: Vec<CopySlot>,
}

fn read_block(
    engine: &mut dyn IoEngine,
    device: DeviceId,
    offset_bytes: u64,
    size_bytes: u64,
) -> CopySlotRead {
    if offset_bytes + HEADER_BLOCK_BYTES > size_bytes {
        return CopySlotRead::Outside;
    }
    match engine.read_at(device, offset_bytes, HEADER_BLOCK_BYTES as usize) {
        Ok(buf) => CopySlotRead::Bytes(buf.to_vec()),
        Err(e) => CopySlotRead::Failed(e),
    }
}

enum CopySlotRead {
    Bytes(Vec<u8>),
    Failed(IoError),
    Outside,
}

/// What was read for a slot, to judge it again under another index.
fn slot_read(slot: &CopySlot) -> CopySlotRead {
    match (&slot.block, &slot.state) {
        (Some(bytes), _) => CopySlotRead::Bytes(bytes.clone()),
        (None, CopyState::Unreadable(e)) => CopySlotRead::Failed(e.clone()),
        (None, _) => CopySlotRead::Outside,
    }
}

fn judge(index: usize, offset_bytes: u64, read: CopySlotRead) -> CopySlot {
    let (state, block) = match read {
        CopySlotRead::Outside => (CopyState::Outside, None),
        CopySlotRead::Failed(e) => (CopyState::Unreadable(e), None),
        CopySlotRead::Bytes(bytes) => {
            let state = match DiskHeader::decode(&bytes) {
                Ok(d)
                    if d.self_offset_bytes == offset_bytes
                        && usize::from(d.copy_index) == index =>
                {
                    CopyState::Good(d)
                }
                Ok(d) => CopyState::Misplaced(d),
                Err(e) => CopyState::Bad(e),
            };
            (state, Some(bytes))
        }
    };
    CopySlot {
        index,
        offset_bytes,
        state,
        block,
    }
}

impl HeaderScan {
    /// Read and judge every copy. A copy that cannot be read is recorded as
    /// unreadable in its slot; only an unknown device is an error.
    pub fn read(engine: &mut dyn IoEngine, device: DeviceId) -> Result<Self, IoError> {
        let size = engine
            .geometry(device)
            .ok_or(IoError::UnknownDevice(device))?
            .size_bytes;
        let computed: Vec<u64> = match HeaderPlacement::for_device(size) {
            Ok(p) => p.offsets_bytes.to_vec(),
            // Too small to label; still look at the front, where a header might be.
            Err(_) => vec![0],
        };
        let mut read: Vec<CopySlot> = computed
            .iter()
            .enumerate()
            .map(|(index, offset)| judge(index, *offset, read_block(engine, device, *offset, size)))
            .collect();
        // Every good copy names the places of its siblings; read those too (a
        // device that grew keeps its tail copy at the old place).
        let mut next = 0;
        while next < read.len() {
            let recorded: Vec<u64> = match &read[next].state {
                CopyState::Good(d) => d.header.copy_offsets_bytes.clone(),
                _ => Vec::new(),
            };
            for (index, offset) in recorded.into_iter().enumerate() {
                if !read.iter().any(|s| s.offset_bytes == offset) {
                    read.push(judge(
                        index,
                        offset,
                        read_block(engine, device, offset, size),
                    ));
                }
            }
            next += 1;
        }
        let authoritative: Vec<u64> = newest_good(&read)
            .map(|d| d.header.copy_offsets_bytes.clone())
            .unwrap_or(computed);
        let (mut slots, strays): (Vec<CopySlot>, Vec<CopySlot>) = read
            .into_iter()
            .partition(|s| authoritative.contains(&s.offset_bytes));
        for slot in &mut slots {
            let index = authoritative
                .iter()
                .position(|o| *o == slot.offset_bytes)
                .expect("invariant: partitioned by membership");
            if slot.index != index {
                // Read under another index: judge again as the copy it must be.
                *slot = judge(index, slot.offset_bytes, slot_read(slot));
            }
        }
        slots.sort_by_key(|s| s.index);
        Ok(Self {
            device_size_bytes: size,
            slots,
            strays,
        })
    }

    /// The newest good copy: highest generation, then lowest copy index.
    pub fn newest(&self) -> Option<&DecodedHeader> {
        newest_good(&self.slots)
    }

    pub fn good(&self) -> impl Iterator<Item = (&CopySlot, &DecodedHeader)> {
        self.slots.iter().filter_map(|s| match &s.state {
            CopyState::Good(d) => Some((s, d)),
            _ => None,
        })
    }

    /// Distinct disk UUIDs among the good copies.
    pub fn uuids(&self) -> Vec<Uuid> {
        let mut ids: Vec<Uuid> = self.good().map(|(_, d)| d.header.disk_uuid).collect();
        ids.sort();
        ids.dedup();
        ids
    }

    pub fn health(&self) -> HeaderHealth {
        let newest = match self.newest() {
            Some(n) => n,
            None if self.slots.iter().any(|s| s.state.is_cairn()) => return HeaderHealth::Corrupt,
            None => return HeaderHealth::None,
        };
        if self.uuids().len() > 1 {
            return HeaderHealth::Conflict;
        }
        let all_current = self.slots.iter().all(|s| match &s.state {
            CopyState::Good(d) => d.header == newest.header,
            _ => false,
        });
        if all_current {
            HeaderHealth::Ok
        } else {
            HeaderHealth::Damaged
        }
    }

    /// One line per copy: `copy 0 @ 0: blank (all zeros)`.
    pub fn describe_copies(&self) -> Vec<String> {
        self.slots
            .iter()
            .map(|s| {
                format!(
                    "copy {} @ {}: {}",
                    s.index,
                    s.offset_bytes,
                    s.state.describe()
                )
            })
            .collect()
    }

    /// The highest generation of any decodable header read, good or misplaced,
    /// at a copy place or a stray one (0 if none).
    pub fn generation_max(&self) -> u64 {
        self.slots
            .iter()
            .chain(self.strays.iter())
            .filter_map(|s| match &s.state {
                CopyState::Good(d) | CopyState::Misplaced(d) => Some(d.header.generation),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// Every block read (copy places and strays) that carries Cairn's magic.
    pub fn cairn_blocks(&self) -> impl Iterator<Item = &CopySlot> {
        // is_cairn() covers every block with Cairn's magic: decoding reports a
        // block as blank or not Cairn's only when the magic is absent.
        self.slots
            .iter()
            .chain(self.strays.iter())
            .filter(|s| s.state.is_cairn())
    }

    /// True when some block read carries Cairn's magic, good or not.
    pub fn has_cairn_bytes(&self) -> bool {
        self.cairn_blocks().next().is_some()
    }
}

fn newest_good(slots: &[CopySlot]) -> Option<&DecodedHeader> {
    slots
        .iter()
        .filter_map(|s| match &s.state {
            CopyState::Good(d) => Some(d),
            _ => None,
        })
        .fold(None, |best: Option<&DecodedHeader>, d| match best {
            Some(b) if b.header.generation >= d.header.generation => Some(b),
            _ => Some(d),
        })
}
