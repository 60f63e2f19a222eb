//! The journal (file 3): two alternating headers, then a ring of records,
//! each a header block naming where its images go, then the images.

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::group::fields::{cast, cast_mut};
use crate::meta::{invalid, payload, payload_mut, Block, MetaError, PAYLOAD_BYTES};

/// The journal file's first two blocks are alternating headers; records follow.
pub const JOURNAL_HEADER_BLOCKS: u64 = 2;
pub const JOURNAL_TARGETS_MAX: usize = (PAYLOAD_BYTES - 32) / 16;

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct RawJournalHeader {
    pub header_generation: U64,
    /// The sequence number the first record after the header must carry.
    pub next_seq: U64,
    pub ring_blocks: U64,
    pub reserved: [u8; PAYLOAD_BYTES - 24],
}

/// Where replay starts: the record at the ring's first block with `next_seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalHeader {
    pub header_generation: u64,
    pub next_seq: u64,
    pub ring_blocks: u64,
}

impl JournalHeader {
    pub fn encode_into(&self, block: &mut Block) {
        let raw: &mut RawJournalHeader = cast_mut(payload_mut(block));
        raw.zero();
        raw.header_generation = U64::new(self.header_generation);
        raw.next_seq = U64::new(self.next_seq);
        raw.ring_blocks = U64::new(self.ring_blocks);
    }
    pub fn decode(block: &[u8]) -> Result<Self, MetaError> {
        let raw: &RawJournalHeader = cast(payload(block));
        if raw.next_seq.get() == 0 {
            return Err(invalid("next_seq", "0"));
        }
        Ok(Self {
            header_generation: raw.header_generation.get(),
            next_seq: raw.next_seq.get(),
            ring_blocks: raw.ring_blocks.get(),
        })
    }
}

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawTarget {
    pub image: U16,
    pub disk: U16,
    pub reserved: U32,
    pub offset_bytes: U64,
}

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct RawJournalRecord {
    pub seq: U64,
    pub prev_checksum: U32,
    pub image_count: U16,
    pub target_count: U16,
    pub images_crc: U32,
    pub reserved: [u8; 12],
    pub targets: [RawTarget; JOURNAL_TARGETS_MAX],
    pub reserved_tail: [u8; PAYLOAD_BYTES - 32 - JOURNAL_TARGETS_MAX * 16],
}
const _: () = assert!(size_of::<RawJournalRecord>() == PAYLOAD_BYTES);

/// Where one image of a journal record goes: a byte offset on a disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalTarget {
    pub image: u16,
    pub disk: u16,
    pub offset_bytes: u64,
}

/// A record header: the images that follow it in the ring and where each goes
/// (one target per copy). The record is whole only if `images_crc` matches the
/// images read after it; it chains to the previous record by its checksum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalRecord {
    pub seq: u64,
    pub prev_checksum: u32,
    pub image_count: u16,
    pub images_crc: u32,
    pub targets: Vec<JournalTarget>,
}

impl JournalRecord {
    pub fn encode_into(&self, block: &mut Block) {
        assert!(
            self.targets.len() <= JOURNAL_TARGETS_MAX,
            "invariant: targets fit"
        );
        let raw: &mut RawJournalRecord = cast_mut(payload_mut(block));
        raw.zero();
        raw.seq = U64::new(self.seq);
        raw.prev_checksum = U32::new(self.prev_checksum);
        raw.image_count = U16::new(self.image_count);
        raw.target_count = U16::new(self.targets.len() as u16);
        raw.images_crc = U32::new(self.images_crc);
        for (out, t) in raw.targets.iter_mut().zip(&self.targets) {
            out.image = U16::new(t.image);
            out.disk = U16::new(t.disk);
            out.offset_bytes = U64::new(t.offset_bytes);
        }
    }
    pub fn decode(block: &[u8]) -> Result<Self, MetaError> {
        let raw: &RawJournalRecord = cast(payload(block));
        let target_count = usize::from(raw.target_count.get());
        if target_count > JOURNAL_TARGETS_MAX {
            return Err(invalid("target_count", format!("{target_count}")));
        }
        let image_count = raw.image_count.get();
        let targets: Vec<JournalTarget> = raw.targets[..target_count]
            .iter()
            .map(|t| JournalTarget {
                image: t.image.get(),
                disk: t.disk.get(),
                offset_bytes: t.offset_bytes.get(),
            })
            .collect();
        if let Some(t) = targets.iter().find(|t| t.image >= image_count) {
            return Err(invalid(
                "target.image",
                format!("{} of {image_count}", t.image),
            ));
        }
        Ok(Self {
            seq: raw.seq.get(),
            prev_checksum: raw.prev_checksum.get(),
            image_count,
            images_crc: raw.images_crc.get(),
            targets,
        })
    }
}

/// The images checksum: crc32c over the images in order.
pub fn images_crc(images: &[&Block]) -> u32 {
    images
        .iter()
        .fold(0, |crc, image| crc32c::crc32c_append(crc, image.as_slice()))
}
