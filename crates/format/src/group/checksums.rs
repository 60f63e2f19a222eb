//! Data checksums (`docs/checksums.md`): a CRC-32C for every sector-sized
//! *unit* of a file, kept in the file's checksum map (a file of its own whose
//! entry is block *n* of the checksum directory, file 7) in blocks of type 15,
//! and the new checksums of writes in flight in the checksum log (file 8),
//! records of type 16.
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
/// Data file `file`'s checksum map, as numbered in memory.
pub fn map_number(file: u32) -> u32 {
    CHECKSUM_MAP_BIT | file
}

/// Whether `number` is a checksum map's (in memory).
pub fn is_map_number(number: u32) -> bool {
    number & CHECKSUM_MAP_BIT != 0
}

/// The data file whose checksum map is `number` (`number` itself for any
/// other file).
pub fn mapped_file(number: u32) -> u32 {
    number & !CHECKSUM_MAP_BIT
}

/// Whether `number` is a user's data file: at or above
/// [`FILE_NUMBER_USER_MIN`], below the maps.
pub fn is_user_number(number: u32) -> bool {
    (FILE_NUMBER_USER_MIN..CHECKSUM_MAP_BIT).contains(&number)
}

/// Where file `number`'s entry is: the metadata file whose block holds it
/// (the file directory, or the checksum directory for a map) and the block.
pub fn entry_place(number: u32) -> (u32, u64) {
    if is_map_number(number) {
        (FILE_CHECKSUM_DIRECTORY, u64::from(mapped_file(number)))
    } else {
        (super::FILE_DIRECTORY, u64::from(number))
    }
}

/// Checksums in one map block: the whole payload, 4 bytes each.
pub const CHECKSUMS_PER_BLOCK: usize = PAYLOAD_BYTES / 4;
/// The checksum log's first two blocks are alternating headers
/// ([`LogHeader`]); its ring of records follows.
pub const LOG_HEADER_BLOCKS: u64 = 2;
/// Regions (1 MiB of a file) a log record may announce.
pub const REGIONS_PER_RECORD: usize = 64;
/// Bytes of a region a record announces: its writer may write there.
pub const REGION_BYTES: u64 = 1 << 20;
/// A record's flag: a checkpoint of the maps begins here
/// ([`IntentRecord::checkpoint`]).
pub const RECORD_CHECKPOINT: u32 = 1;
/// Bytes of a log record's own fields, before its regions.
const RECORD_HEAD_BYTES: usize = 32;
/// Bytes of a run's own fields, before its checksums.
pub const RUN_HEAD_BYTES: usize = 20;
/// Bytes of a log record's runs: what the payload leaves after the head and
/// the regions.
pub const RUN_AREA_BYTES: usize = PAYLOAD_BYTES - RECORD_HEAD_BYTES - REGIONS_PER_RECORD * 8;
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
pub struct RawRegion {
    pub file: U32,
    /// Which 1 MiB of the file ([`REGION_BYTES`]).
    pub index: U32,
}

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct RawIntentRecord {
    /// The envelope checksum of the writer's previous record; 0 for the
    /// first after a checkpoint (as the journal chains its records).
    pub prev_checksum: U32,
    /// Which writer's log this is: 0 the service (or the group's own
    /// mount); the direct path's clients are numbered from 1.
    pub writer: U32,
    /// The sequence number through which a flush had completed when this
    /// record was made: intents at or below it are of acknowledged writes.
    pub flushed_through: U64,
    pub region_count: U16,
    pub run_count: U16,
    /// Bit 0 ([`RECORD_CHECKPOINT`]): a checkpoint of the maps begins at
    /// this record; the other bits are zero.
    pub flags: U32,
    /// A checkpoint record's journal sequence: every map block sealed
    /// with a generation at or above it was written after this record
    /// (0 in any other record).
    pub maps_from: U64,
    pub regions: [RawRegion; REGIONS_PER_RECORD],
    /// The runs, one after another: each [`RUN_HEAD_BYTES`] of file (u32),
    /// incarnation (u32), first unit (u64) and count (u32), then `count`
    /// checksums (u32). The bytes after the last run are zero.
    pub runs: [u8; RUN_AREA_BYTES],
}
const _: () = assert!(size_of::<RawIntentRecord>() == PAYLOAD_BYTES);

/// A run's own fields, before its checksums (little-endian u32 each).
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawRunHead {
    pub file: U32,
    pub incarnation: U32,
    pub first_unit: U64,
    pub count: U32,
}
const _: () = assert!(size_of::<RawRunHead>() == RUN_HEAD_BYTES);

/// A region of a file its writer may write in (1 MiB, [`REGION_BYTES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Region {
    pub file: u32,
    pub index: u32,
}

/// The new checksums of consecutive units of a user file: one write's (or
/// part of one's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentRun {
    pub file: u32,
    pub incarnation: u32,
    pub first_unit: u64,
    pub checksums: Vec<u32>,
}

impl IntentRun {
    /// Bytes the run takes in a record.
    pub fn bytes(&self) -> usize {
        RUN_HEAD_BYTES + 4 * self.checksums.len()
    }
}

/// One record of the checksum log (`docs/checksums.md`, "Writes"): the
/// regions its writer may write in, and the new checksums of the writes
/// one batch sent beside their data. Its sequence number is the envelope's
/// generation; its self-address, its ring position.
///
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentRecord {
    pub prev_checksum: u32,
    pub writer: u32,
    pub flushed_through: u64,
    /// A checkpoint of the maps begins at this record: the journal
    /// sequence from which its map blocks are sealed (`maps_from`). A map
    /// block sealed at or above it holds what the records before this one
    /// named, or newer; the records after this one are newer than it.
    pub checkpoint: Option<u64>,
    pub regions: Vec<Region>,
    pub runs: Vec<IntentRun>,
}

fn user_file(file: u32, field: &'static str) -> Result<u32, MetaError> {
    if is_user_number(file) {
        Ok(file)
    } else {
        Err(invalid(field, format!("{file} (not a user file)")))
    }
}

impl IntentRecord {
    /// Whether the regions and runs fit one record.
    pub fn fits(&self) -> bool {
        self.regions.len() <= REGIONS_PER_RECORD
            && self.runs.len() <= usize::from(u16::MAX)
            && self.runs.iter().map(IntentRun::bytes).sum::<usize>() <= RUN_AREA_BYTES
    }

    pub fn encode_into(&self, block: &mut Block) {
        assert!(self.fits(), "invariant: a record's regions and runs fit");
        let raw: &mut RawIntentRecord = cast_mut(payload_mut(block));
        raw.zero();
        raw.prev_checksum = U32::new(self.prev_checksum);
        raw.writer = U32::new(self.writer);
        raw.flushed_through = U64::new(self.flushed_through);
        raw.flags = U32::new(if self.checkpoint.is_some() {
            RECORD_CHECKPOINT
        } else {
            0
        });
        raw.maps_from = U64::new(self.checkpoint.unwrap_or(0));
        raw.region_count = U16::new(self.regions.len() as u16);
        raw.run_count = U16::new(self.runs.len() as u16);
        for (r, region) in raw.regions.iter_mut().zip(&self.regions) {
            r.file = U32::new(region.file);
            r.index = U32::new(region.index);
        }
        let mut area = &mut raw.runs[..];
        for run in &self.runs {
            let (head, rest) = RawRunHead::mut_from_prefix(area)
                .expect("invariant: checked by fits: the run's head fits");
            *head = RawRunHead {
                file: U32::new(run.file),
                incarnation: U32::new(run.incarnation),
                first_unit: U64::new(run.first_unit),
                count: U32::new(run.checksums.len() as u32),
            };
            let (sums, rest) = <[U32]>::mut_from_prefix_with_elems(rest, run.checksums.len())
                .expect("invariant: checked by fits: the run's checksums fit");
            for (out, sum) in sums.iter_mut().zip(&run.checksums) {
                *out = U32::new(*sum);
            }
            area = rest;
        }
    }

    /// The record in `block` (whose envelope the caller has opened). Refuses
    /// counts past what fits, a region or run of a file that is not a user
    /// file, an empty run or one that runs past the area or past the last
    /// unit, and bytes past the regions and runs in use.
    pub fn decode(block: &[u8]) -> Result<Self, MetaError> {
        let raw: &RawIntentRecord = cast(payload(block));
        let flags = raw.flags.get();
        if flags & !RECORD_CHECKPOINT != 0 {
            return Err(invalid(
                "intent_record.flags",
                format!("{flags:#x} (only bit 0 is defined)"),
            ));
        }
        let maps_from = raw.maps_from.get();
        let checkpoint = match (flags & RECORD_CHECKPOINT != 0, maps_from) {
            (true, from) => Some(from),
            (false, 0) => None,
            (false, from) => {
                return Err(invalid(
                    "intent_record.maps_from",
                    format!("{from} in a record that begins no checkpoint (it must be 0)"),
                ))
            }
        };
        let region_count = usize::from(raw.region_count.get());
        if region_count > REGIONS_PER_RECORD {
            return Err(invalid(
                "intent_record.region_count",
                format!("{region_count} (at most {REGIONS_PER_RECORD})"),
            ));
        }
        let mut regions = Vec::with_capacity(region_count);
        for r in &raw.regions[..region_count] {
            regions.push(Region {
                file: user_file(r.file.get(), "intent_record.region.file")?,
                index: r.index.get(),
            });
        }
        if raw.regions[region_count..]
            .iter()
            .any(|r| r.as_bytes().iter().any(|b| *b != 0))
        {
            return Err(invalid(
                "intent_record.regions",
                "bytes past the count (they must be zero)",
            ));
        }
        let run_count = usize::from(raw.run_count.get());
        let mut runs = Vec::new();
        let mut area = &raw.runs[..];
        for _ in 0..run_count {
            let Ok((head, rest)) = RawRunHead::ref_from_prefix(area) else {
                return Err(invalid("intent_record.runs", "a run past the record's end"));
            };
            let file = user_file(head.file.get(), "intent_record.run.file")?;
            let first_unit = head.first_unit.get();
            let count = head.count.get() as usize;
            let sums = match <[U32]>::ref_from_prefix_with_elems(rest, count) {
                Ok((sums, rest)) if count > 0 => {
                    area = rest;
                    sums
                }
                _ => {
                    return Err(invalid(
                        "intent_record.run.count",
                        format!("{count} (a run has 1 to what the record has room for)"),
                    ))
                }
            };
            if first_unit.checked_add(count as u64).is_none() {
                return Err(invalid(
                    "intent_record.run.first_unit",
                    format!("{first_unit}"),
                ));
            }
            runs.push(IntentRun {
                file,
                incarnation: head.incarnation.get(),
                first_unit,
                checksums: sums.iter().map(|s| s.get()).collect(),
            });
        }
        if area.iter().any(|b| *b != 0) {
            return Err(invalid(
                "intent_record.runs",
                "bytes past the last run (they must be zero)",
            ));
        }
        Ok(Self {
            prev_checksum: raw.prev_checksum.get(),
            writer: raw.writer.get(),
            flushed_through: raw.flushed_through.get(),
            checkpoint,
            regions,
            runs,
        })
    }
}

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct RawLogHeader {
    pub header_generation: U64,
    pub start_seq: U64,
    pub start_position: U64,
    pub start_prev_checksum: U32,
    pub reserved: [u8; PAYLOAD_BYTES - 28],
}

/// Where the checksum log starts (`docs/checksums.md`, "Writes"): the
/// record at block `start_position` of file 8 with sequence `start_seq`,
/// chained to `start_prev_checksum`; the records after it follow in ring
/// order, each the next sequence, chained to the one before, wrapping from
/// the last block to the first after the headers. A checkpoint of the maps
/// writes the next generation (the slot `header_generation % 2`) once the
/// maps hold every record before the new start.
///
/// Both slots blank (a log never checkpointed) read as [`LogHeader::EMPTY`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogHeader {
    pub header_generation: u64,
    pub start_seq: u64,
    pub start_position: u64,
    pub start_prev_checksum: u32,
}

impl LogHeader {
    /// A log never written: its first record goes to the ring's first
    /// block, with sequence 1, chained to nothing.
    pub const EMPTY: Self = Self {
        header_generation: 0,
        start_seq: 1,
        start_position: LOG_HEADER_BLOCKS,
        start_prev_checksum: 0,
    };

    pub fn encode_into(&self, block: &mut Block) {
        let raw: &mut RawLogHeader = cast_mut(payload_mut(block));
        raw.zero();
        raw.header_generation = U64::new(self.header_generation);
        raw.start_seq = U64::new(self.start_seq);
        raw.start_position = U64::new(self.start_position);
        raw.start_prev_checksum = U32::new(self.start_prev_checksum);
    }

    /// The header in `block` (whose envelope the caller has opened; its
    /// generation is `header_generation`). Refuses sequence 0, a start
    /// among the headers, and bytes past the fields.
    pub fn decode(block: &[u8]) -> Result<Self, MetaError> {
        let raw: &RawLogHeader = cast(payload(block));
        if raw.start_seq.get() == 0 {
            return Err(invalid("log_header.start_seq", "0"));
        }
        if raw.start_position.get() < LOG_HEADER_BLOCKS {
            return Err(invalid(
                "log_header.start_position",
                format!("{} (among the headers)", raw.start_position.get()),
            ));
        }
        if raw.reserved.iter().any(|b| *b != 0) {
            return Err(invalid("log_header.reserved", "not zero"));
        }
        Ok(Self {
            header_generation: raw.header_generation.get(),
            start_seq: raw.start_seq.get(),
            start_position: raw.start_position.get(),
            start_prev_checksum: raw.start_prev_checksum.get(),
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

    fn raw_of(b: &mut Block) -> &mut RawIntentRecord {
        cast_mut(payload_mut(b))
    }

    fn record() -> IntentRecord {
        IntentRecord {
            prev_checksum: 0x1234_5678,
            writer: 3,
            flushed_through: 41,
            checkpoint: Some(1 << 33),
            regions: (0..REGIONS_PER_RECORD as u32)
                .map(|i| Region {
                    file: 256 + i % 3,
                    index: i * 7,
                })
                .collect(),
            runs: vec![
                IntentRun {
                    file: 300,
                    incarnation: 9,
                    first_unit: (1 << 40) + 5,
                    checksums: (0..256).map(|i| i ^ 0xffff).collect(),
                },
                IntentRun {
                    file: 257,
                    incarnation: 2,
                    first_unit: 0,
                    checksums: vec![0, 7],
                },
            ],
        }
    }

    #[test]
    fn intent_records_round_trip_and_bad_ones_are_refused_by_field() {
        assert_eq!(RUN_AREA_BYTES, 3488);
        let record = record();
        let mut block = empty_block();
        record.encode_into(&mut block);
        assert_eq!(IntentRecord::decode(&block[..]), Ok(record.clone()));
        // A record whose one run fills the area, to its last byte.
        let full = IntentRecord {
            regions: Vec::new(),
            runs: vec![IntentRun {
                file: 256,
                incarnation: 1,
                first_unit: 0,
                checksums: vec![5; (RUN_AREA_BYTES - RUN_HEAD_BYTES) / 4],
            }],
            ..record.clone()
        };
        assert!(full.fits());
        let mut b = empty_block();
        full.encode_into(&mut b);
        assert_eq!(IntentRecord::decode(&b[..]), Ok(full.clone()));
        let mut over = full.clone();
        over.runs[0].checksums.push(1);
        assert!(!over.fits());

        let field = |b: &Block| match IntentRecord::decode(&b[..]) {
            Err(MetaError::Invalid { field, .. }) => field,
            other => panic!("accepted: {other:?}"),
        };
        let mut bad = block.clone();
        raw_of(&mut bad).region_count = U16::new(REGIONS_PER_RECORD as u16 + 1);
        assert_eq!(field(&bad), "intent_record.region_count");
        let mut bad = block.clone();
        raw_of(&mut bad).regions[5].file = U32::new(7);
        assert_eq!(field(&bad), "intent_record.region.file");
        let mut bad = block.clone();
        raw_of(&mut bad).run_count = U16::new(3);
        assert_eq!(field(&bad), "intent_record.run.file");
        let mut bad = block.clone();
        raw_of(&mut bad).runs[0..4].copy_from_slice(&(CHECKSUM_MAP_BIT | 300).to_le_bytes());
        assert_eq!(field(&bad), "intent_record.run.file");
        let mut bad = block.clone();
        raw_of(&mut bad).runs[16..20].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(field(&bad), "intent_record.run.count");
        let mut bad = block.clone();
        raw_of(&mut bad).runs[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(field(&bad), "intent_record.run.count");
        let mut bad = block.clone();
        raw_of(&mut bad).run_count = U16::new(1);
        assert_eq!(field(&bad), "intent_record.runs");
        let mut bad = b.clone();
        raw_of(&mut bad).run_count = U16::new(2);
        assert_eq!(field(&bad), "intent_record.runs");
        let mut bad = block.clone();
        raw_of(&mut bad).flags = U32::new(2);
        assert_eq!(field(&bad), "intent_record.flags");
        let mut plain = empty_block();
        IntentRecord {
            checkpoint: None,
            ..record.clone()
        }
        .encode_into(&mut plain);
        raw_of(&mut plain).maps_from = U64::new(5);
        assert_eq!(field(&plain), "intent_record.maps_from");
        let mut short = empty_block();
        IntentRecord {
            regions: record.regions[..3].to_vec(),
            ..record.clone()
        }
        .encode_into(&mut short);
        raw_of(&mut short).regions[3].index = U32::new(1);
        assert_eq!(field(&short), "intent_record.regions");
    }

    fn log_raw(b: &mut Block) -> &mut RawLogHeader {
        cast_mut(payload_mut(b))
    }

    #[test]
    fn log_headers_round_trip_and_bad_ones_are_refused_by_field() {
        let header = LogHeader {
            header_generation: 9,
            start_seq: 1234,
            start_position: 77,
            start_prev_checksum: 0xdead_beef,
        };
        let mut block = empty_block();
        header.encode_into(&mut block);
        assert_eq!(LogHeader::decode(&block[..]), Ok(header));
        let field = |b: &Block| match LogHeader::decode(&b[..]) {
            Err(MetaError::Invalid { field, .. }) => field,
            other => panic!("accepted: {other:?}"),
        };
        let mut bad = block.clone();
        log_raw(&mut bad).start_seq = U64::new(0);
        assert_eq!(field(&bad), "log_header.start_seq");
        let mut bad = block.clone();
        log_raw(&mut bad).start_position = U64::new(LOG_HEADER_BLOCKS - 1);
        assert_eq!(field(&bad), "log_header.start_position");
        let mut bad = block.clone();
        log_raw(&mut bad).reserved[100] = 1;
        assert_eq!(field(&bad), "log_header.reserved");
    }
}
