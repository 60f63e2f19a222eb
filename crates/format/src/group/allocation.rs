//! The allocation table: per disk, summary blocks counting the used AUs of
//! bitmap blocks, one bit per AU; and where the table and the discard map
//! lie on a disk ([`AtLayout`]).

use crate::layout::FRONT_RESERVED_BYTES;
use crate::meta::{payload, payload_mut, Block, PAYLOAD_BYTES};

/// The allocation table starts right after the front reserve.
pub const AT_START_BYTES: u64 = FRONT_RESERVED_BYTES;
/// AUs one bitmap block describes.
pub const AT_BITS_PER_BLOCK: u64 = (PAYLOAD_BYTES as u64) * 8;
/// Bitmap blocks one summary block counts.
pub const AT_COUNTS_PER_SUMMARY: u64 = (PAYLOAD_BYTES as u64) / 4;

/// Where a disk's allocation table lies and which AUs it leaves for data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtLayout {
    pub au_bytes: u64,
    pub au_count: u64,
    pub summary_blocks: u64,
    pub bitmap_blocks: u64,
    /// AUs below this hold the header copies, superblock slots and the table:
    /// never allocated, never marked in the bitmap.
    pub first_data_au: u64,
}

impl AtLayout {
    /// Layout for a device of `size_bytes`; `None` if not one data AU fits.
    pub fn for_disk(size_bytes: u64, au_bytes: u64) -> Option<Self> {
        let tail = crate::layout::HeaderPlacement::for_device(size_bytes)
            .ok()?
            .offsets_bytes[2];
        let au_count = tail / au_bytes;
        let bitmap_blocks = au_count.div_ceil(AT_BITS_PER_BLOCK);
        let summary_blocks = bitmap_blocks.div_ceil(AT_COUNTS_PER_SUMMARY);
        let at_end = AT_START_BYTES + (summary_blocks + bitmap_blocks) * 4096;
        let first_data_au = at_end.div_ceil(au_bytes);
        (first_data_au < au_count).then_some(Self {
            au_bytes,
            au_count,
            summary_blocks,
            bitmap_blocks,
            first_data_au,
        })
    }
    pub fn data_aus(&self) -> u64 {
        self.au_count - self.first_data_au
    }
    pub fn summary_offset_bytes(&self, index: u64) -> u64 {
        assert!(
            index < self.summary_blocks,
            "invariant: summary block in range"
        );
        AT_START_BYTES + index * 4096
    }
    pub fn bitmap_offset_bytes(&self, index: u64) -> u64 {
        assert!(
            index < self.bitmap_blocks,
            "invariant: bitmap block in range"
        );
        AT_START_BYTES + (self.summary_blocks + index) * 4096
    }

    /// Blocks free between the table's end and the first data AU: where
    /// the discard map lives, laid down from the first data AU backwards
    /// so that its place never moves when a resize changes the table.
    pub fn slack_blocks(&self) -> u64 {
        let table_end = AT_START_BYTES + (self.summary_blocks + self.bitmap_blocks) * 4096;
        (self.first_data_au * self.au_bytes).saturating_sub(table_end) / 4096
    }

    /// Whether the whole discard map fits the slack (one block per bitmap
    /// block). A disk whose map does not fit keeps none: every free AU on
    /// it counts as holding data.
    pub fn has_clean_map(&self) -> bool {
        self.slack_blocks() >= self.bitmap_blocks
    }

    /// Where block `index` of the discard map lies (bit i of byte j: AU
    /// `index * AT_BITS_PER_BLOCK + j*8 + i` is free and known to hold
    /// nothing on the device). `index` must be below [`Self::slack_blocks`].
    pub fn clean_offset_bytes(&self, index: u64) -> u64 {
        assert!(
            index < self.slack_blocks(),
            "invariant: discard map block in the slack"
        );
        self.first_data_au * self.au_bytes - (index + 1) * 4096
    }
}

/// Used-AU counts of the bitmap blocks one summary block covers.
pub fn encode_summary(block: &mut Block, counts: &[u32]) {
    assert!(
        counts.len() as u64 <= AT_COUNTS_PER_SUMMARY,
        "invariant: counts fit"
    );
    let out = payload_mut(block);
    out.fill(0);
    for (i, c) in counts.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&c.to_le_bytes());
    }
}

pub fn decode_summary(block: &[u8]) -> Vec<u32> {
    payload(block)
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A bitmap block's payload is the bitmap itself, bit i of byte j = AU j*8+i.
pub fn encode_bitmap(block: &mut Block, bits: &[u8]) {
    assert_eq!(bits.len(), PAYLOAD_BYTES, "invariant: a whole bitmap block");
    payload_mut(block).copy_from_slice(bits);
}

pub fn decode_bitmap(block: &[u8]) -> Vec<u8> {
    payload(block).to_vec()
}
