//! Data checksums (`docs/checksums.md`): a CRC-32C for every sector-sized
//! *unit* of a file, kept in the file's checksum map (a file of its own whose
//! entry is block *n* of the checksum directory, file 7) in blocks of type 15,
//! and the intents of writes in flight in the checksum log (file 8), records
//! of type 16.
//!
//! Nothing here reads a disk: these are the unit arithmetic, the two block
//! payloads and their decoders. Both payloads are sealed in the metadata
//! envelope ([`crate::meta`]), which checks the block's checksum, group and
//! self-address before a decoder runs.

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::group::fields::{cast, cast_mut};
use crate::group::FILE_NUMBER_USER_MIN;
use crate::meta::{invalid, payload, payload_mut, Block, MetaError, PAYLOAD_BYTES};

/// Metadata file 7: block *n* is the entry of data file *n*'s checksum map
/// (the file entry layout, block type 6, owner 7).
pub const FILE_CHECKSUM_DIRECTORY: u32 = 7;
/// Metadata file 8: the checksum log, a ring of intent records.
pub const FILE_CHECKSUM_LOG: u32 = 8;
/// In memory, data file *n*'s checksum map is file `CHECKSUM_MAP_BIT | n`;
/// user files are numbered below it.
pub const CHECKSUM_MAP_BIT: u32 = 1 << 31;
/// Checksums in one map block: the whole payload, 4 bytes each.
pub const CHECKSUMS_PER_BLOCK: usize = PAYLOAD_BYTES / 4;
/// Bytes of one intent in a log record.
pub const INTENT_BYTES: usize = 24;
/// Bytes of a log record's own fields, before its intents.
const RECORD_HEAD_BYTES: usize = 16;
/// Intents one log record holds.
pub const INTENTS_PER_RECORD: usize = (PAYLOAD_BYTES - RECORD_HEAD_BYTES) / INTENT_BYTES;
/// The units a group may have: its sector sizes.
pub const UNIT_BYTES_ALLOWED: [u32; 2] = [512, 4096];

/// The checksum of one unit's bytes.
pub fn unit_checksum(unit: &[u8]) -> u32 {
    crc32c::crc32c(unit)
}

/// The checksum of a unit of `unit_bytes` zeros: what every unit of an
/// all-zero (never written) map block holds, and what an extent never
/// written reads as. `None` for a size that is not a unit.
pub fn zero_unit_checksum(unit_bytes: u32) -> Option<u32> {
    static ZEROS: [u8; 4096] = [0; 4096];
    UNIT_BYTES_ALLOWED
        .contains(&unit_bytes)
        .then(|| unit_checksum(&ZEROS[..unit_bytes as usize]))
}

/// Units in a file of `size_bytes` (whole units: a file's size is whole
/// sectors, and the unit is the sector).
pub fn units_in(size_bytes: u64, unit_bytes: u32) -> u64 {
    size_bytes.div_ceil(u64::from(unit_bytes.max(1)))
}

/// Blocks of the checksum map of a file of `size_bytes`.
pub fn map_blocks(size_bytes: u64, unit_bytes: u32) -> u64 {
    units_in(size_bytes, unit_bytes).div_ceil(CHECKSUMS_PER_BLOCK as u64)
}

/// Where unit `unit`'s checksum is: the map block, and the slot in it.
pub fn map_place(unit: u64) -> (u64, usize) {
    let per = CHECKSUMS_PER_BLOCK as u64;
    (unit / per, (unit % per) as usize)
}

/// One map block's checksums, slot by slot.
pub type MapSums = [u32; CHECKSUMS_PER_BLOCK];

/// What a map block holds, decoded: its checksums, or — for a block that
/// is all zeros, never written — the zero unit's checksum in every slot.
pub fn decode_map_block(block: &[u8], zero_unit: u32) -> Box<MapSums> {
    let raw: &[U32; CHECKSUMS_PER_BLOCK] = cast(payload(block));
    let mut out = Box::new([zero_unit; CHECKSUMS_PER_BLOCK]);
    if block.iter().any(|b| *b != 0) {
        for (o, r) in out.iter_mut().zip(raw.iter()) {
            *o = r.get();
        }
    }
    out
}

/// Write `sums` into a map block's payload (the caller seals it).
pub fn encode_map_block(block: &mut Block, sums: &MapSums) {
    let raw: &mut [U32; CHECKSUMS_PER_BLOCK] = cast_mut(payload_mut(block));
    for (r, s) in raw.iter_mut().zip(sums.iter()) {
        *r = U32::new(*s);
    }
}

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawIntent {
    pub file: U32,
    pub incarnation: U32,
    pub unit: U64,
    pub checksum: U32,
    pub reserved: U32,
}
const _: () = assert!(size_of::<RawIntent>() == INTENT_BYTES);

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct RawIntentRecord {
    /// The envelope checksum of the writer's previous record; 0 for the
    /// first after a checkpoint (as the journal chains its records).
    pub prev_checksum: U32,
    pub count: U16,
    pub reserved0: U16,
    /// Which writer's log this is: 0 the service (or the group's own
    /// mount); the direct path's clients are numbered from 1.
    pub writer: U32,
    pub reserved1: U32,
    pub intents: [RawIntent; INTENTS_PER_RECORD],
    pub tail: [u8; PAYLOAD_BYTES - RECORD_HEAD_BYTES - INTENTS_PER_RECORD * INTENT_BYTES],
}
const _: () = assert!(size_of::<RawIntentRecord>() == PAYLOAD_BYTES);

/// A write's new checksum for one unit of a user file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Intent {
    pub file: u32,
    pub incarnation: u32,
    pub unit: u64,
    pub checksum: u32,
}

/// One record of the checksum log: the intents of the writes one batch
/// sent beside their data. Its sequence number is the envelope's
/// generation; its self-address, its ring position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentRecord {
    pub prev_checksum: u32,
    pub writer: u32,
    pub intents: Vec<Intent>,
}

impl IntentRecord {
    pub fn encode_into(&self, block: &mut Block) {
        assert!(
            self.intents.len() <= INTENTS_PER_RECORD,
            "invariant: intents fit a record"
        );
        let raw: &mut RawIntentRecord = cast_mut(payload_mut(block));
        raw.zero();
        raw.prev_checksum = U32::new(self.prev_checksum);
        raw.count = U16::new(self.intents.len() as u16);
        raw.writer = U32::new(self.writer);
        for (r, i) in raw.intents.iter_mut().zip(&self.intents) {
            r.file = U32::new(i.file);
            r.incarnation = U32::new(i.incarnation);
            r.unit = U64::new(i.unit);
            r.checksum = U32::new(i.checksum);
        }
    }

    /// The record in `block` (whose envelope the caller has opened). Refuses
    /// a count past what fits, an intent for a file that is not a user
    /// file, and bytes in the slots past the count.
    pub fn decode(block: &[u8]) -> Result<Self, MetaError> {
        let raw: &RawIntentRecord = cast(payload(block));
        let count = usize::from(raw.count.get());
        if count > INTENTS_PER_RECORD {
            return Err(invalid(
                "intent_record.count",
                format!("{count} (at most {INTENTS_PER_RECORD})"),
            ));
        }
        let mut intents = Vec::with_capacity(count);
        for r in &raw.intents[..count] {
            let file = r.file.get();
            if !(FILE_NUMBER_USER_MIN..CHECKSUM_MAP_BIT).contains(&file) {
                return Err(invalid("intent.file", format!("{file} (not a user file)")));
            }
            intents.push(Intent {
                file,
                incarnation: r.incarnation.get(),
                unit: r.unit.get(),
                checksum: r.checksum.get(),
            });
        }
        if raw.intents[count..]
            .iter()
            .any(|r| r.as_bytes().iter().any(|b| *b != 0))
        {
            return Err(invalid(
                "intent_record.intents",
                "bytes past the count (they must be zero)",
            ));
        }
        Ok(Self {
            prev_checksum: raw.prev_checksum.get(),
            writer: raw.writer.get(),
            intents,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::empty_block;

    #[test]
    fn the_zero_units_checksum_is_the_crc_of_zeros_and_only_for_a_sector_size() {
        assert_eq!(zero_unit_checksum(512), Some(crc32c::crc32c(&[0u8; 512])));
        assert_eq!(zero_unit_checksum(4096), Some(crc32c::crc32c(&[0u8; 4096])));
        assert_ne!(zero_unit_checksum(512), zero_unit_checksum(4096));
        // The constants docs/on_disk_format.md gives.
        assert_eq!(zero_unit_checksum(4096), Some(0x98f9_4189));
        assert_eq!(zero_unit_checksum(512), Some(0x30fc_edc0));
        assert_eq!(zero_unit_checksum(1024), None);
        assert_eq!(zero_unit_checksum(0), None);
    }

    #[test]
    fn units_and_map_places_cover_a_file_exactly() {
        assert_eq!(CHECKSUMS_PER_BLOCK, 1008);
        assert_eq!(INTENTS_PER_RECORD, 167);
        assert_eq!(units_in(0, 4096), 0);
        assert_eq!(units_in(4096, 4096), 1);
        assert_eq!(units_in(1 << 20, 512), 2048);
        assert_eq!(map_blocks(1008 * 4096, 4096), 1);
        assert_eq!(map_blocks(1009 * 4096, 4096), 2);
        assert_eq!(map_place(0), (0, 0));
        assert_eq!(map_place(1007), (0, 1007));
        assert_eq!(map_place(1008), (1, 0));
        // Every unit of a file has a place inside its map.
        for size in [512u64, 4096, 1 << 20, 1008 * 512 + 512, 7 << 30] {
            for unit_bytes in UNIT_BYTES_ALLOWED {
                let units = units_in(size, unit_bytes);
                let (block, slot) = map_place(units - 1);
                assert!(block < map_blocks(size, unit_bytes), "{size} {unit_bytes}");
                assert!(slot < CHECKSUMS_PER_BLOCK);
            }
        }
    }

    #[test]
    fn a_blank_map_block_reads_as_zero_units_and_a_written_one_as_written() {
        let zero = zero_unit_checksum(4096).unwrap();
        let blank = empty_block();
        assert!(decode_map_block(&blank[..], zero)
            .iter()
            .all(|s| *s == zero));
        let mut sums = Box::new([zero; CHECKSUMS_PER_BLOCK]);
        sums[0] = 0; // a real checksum may be 0; only a blank block is "zeros"
        sums[1007] = 0xdead_beef;
        let mut block = empty_block();
        // A written block carries its envelope: never all zeros.
        block[0] = b'C';
        encode_map_block(&mut block, &sums);
        assert_eq!(decode_map_block(&block[..], zero), sums);
    }

    #[test]
    fn intent_records_round_trip_and_bad_ones_are_refused_by_field() {
        let record = IntentRecord {
            prev_checksum: 0x1234_5678,
            writer: 3,
            intents: (0..INTENTS_PER_RECORD as u64)
                .map(|u| Intent {
                    file: 256 + (u as u32 % 7),
                    incarnation: 9,
                    unit: u * 1000,
                    checksum: u as u32 ^ 0xffff,
                })
                .collect(),
        };
        let mut block = empty_block();
        record.encode_into(&mut block);
        assert_eq!(IntentRecord::decode(&block[..]), Ok(record.clone()));

        let field = |b: &Block| match IntentRecord::decode(&b[..]) {
            Err(MetaError::Invalid { field, .. }) => field,
            other => panic!("accepted: {other:?}"),
        };
        let mut bad = block.clone();
        cast_mut::<RawIntentRecord>(payload_mut(&mut bad)).count =
            U16::new(INTENTS_PER_RECORD as u16 + 1);
        assert_eq!(field(&bad), "intent_record.count");
        let mut bad = block.clone();
        cast_mut::<RawIntentRecord>(payload_mut(&mut bad)).intents[5].file = U32::new(7);
        assert_eq!(field(&bad), "intent.file");
        let mut bad = block.clone();
        cast_mut::<RawIntentRecord>(payload_mut(&mut bad)).intents[5].file =
            U32::new(CHECKSUM_MAP_BIT | 300);
        assert_eq!(field(&bad), "intent.file");
        let mut short = empty_block();
        IntentRecord {
            intents: record.intents[..3].to_vec(),
            ..record.clone()
        }
        .encode_into(&mut short);
        cast_mut::<RawIntentRecord>(payload_mut(&mut short)).intents[3].unit = U64::new(1);
        assert_eq!(field(&short), "intent_record.intents");
    }
}
