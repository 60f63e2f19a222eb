//! Where every block of the emulated database lives.
//!
//! A dataset is `schemas` schemas, each made of three segments laid end to end
//! in one block address space:
//!
//! ```text
//! schema s: [ table: SCALE blocks | index: leaf blocks | scan table: SCAN_TABLE_SZ blocks ]
//! ```
//!
//! The address space is cut into extents of [`EXTENT_BYTES`] and dealt round
//! robin over the data targets (like a disk group's coarse striping), after a
//! header region of [`HEADER_BYTES`] at the start of every target. So one
//! schema's blocks are spread over every target, and a target's share of the
//! data is the same whatever its position.

use serde::{Deserialize, Serialize};

/// The header region at the start of every data target and of the redo file.
pub const HEADER_BYTES: u64 = 1 << 20;
/// The striping unit over data targets.
pub const EXTENT_BYTES: u64 = 1 << 20;
/// Bytes at the start of every table, index and scan block before its payload
/// (see `block.rs`); an index leaf holds `(block_size - BLOCK_HEADER_BYTES) / INDEX_ENTRY_BYTES` keys.
pub const BLOCK_HEADER_BYTES: usize = 64;
/// One index entry: the key's table block number, as a little-endian u64.
pub const INDEX_ENTRY_BYTES: usize = 8;

/// A block's number in the dataset's address space.
pub type BlockId = u64;

/// What a dataset holds: fixed at setup, checked by every run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    /// Bytes per block (8192 by default; 2 KiB to 32 KiB, a power of two).
    pub block_size: u32,
    pub schemas: u32,
    /// Table blocks (= rows = keys) per schema: SLOB's SCALE.
    pub table_blocks: u64,
    /// Blocks of each schema's scan table: SLOB's SCAN_TABLE_SZ.
    pub scan_blocks: u64,
    /// Random (incompressible) filler instead of compressible text.
    pub obfuscate: bool,
}

/// The three segments of a schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Segment {
    Table,
    Index,
    Scan,
}

impl Segment {
    pub fn code(self) -> u8 {
        match self {
            Segment::Table => 1,
            Segment::Index => 2,
            Segment::Scan => 3,
        }
    }

    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Segment::Table),
            2 => Some(Segment::Index),
            3 => Some(Segment::Scan),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Segment::Table => "table",
            Segment::Index => "index",
            Segment::Scan => "scan table",
        }
    }
}

/// Which block of which segment of which schema a [`BlockId`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockRef {
    /// 0-based (reports print it 1-based, as SLOB names its users user1…).
    pub schema: u32,
    pub segment: Segment,
    /// The block's number within its segment.
    pub number: u64,
}

/// A block's place on the data targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// Index into the data targets, in the order given.
    pub target: usize,
    pub offset_bytes: u64,
}

/// The address arithmetic of a dataset over `targets` data targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub shape: Shape,
    pub targets: usize,
}

impl Layout {
    pub fn new(shape: Shape, targets: usize) -> Self {
        assert!(targets > 0, "invariant: at least one data target");
        Self { shape, targets }
    }

    pub fn block_bytes(&self) -> u64 {
        u64::from(self.shape.block_size)
    }

    /// Keys (table block numbers) one index leaf holds.
    pub fn keys_per_leaf(&self) -> u64 {
        ((self.shape.block_size as usize - BLOCK_HEADER_BYTES) / INDEX_ENTRY_BYTES) as u64
    }

    pub fn index_blocks(&self) -> u64 {
        self.shape.table_blocks.div_ceil(self.keys_per_leaf())
    }

    pub fn schema_blocks(&self) -> u64 {
        self.shape.table_blocks + self.index_blocks() + self.shape.scan_blocks
    }

    pub fn total_blocks(&self) -> u64 {
        self.schema_blocks() * u64::from(self.shape.schemas)
    }

    pub fn extent_blocks(&self) -> u64 {
        EXTENT_BYTES / self.block_bytes()
    }

    /// The first block of a segment of a schema.
    pub fn segment_start(&self, schema: u32, segment: Segment) -> BlockId {
        let base = u64::from(schema) * self.schema_blocks();
        match segment {
            Segment::Table => base,
            Segment::Index => base + self.shape.table_blocks,
            Segment::Scan => base + self.shape.table_blocks + self.index_blocks(),
        }
    }

    pub fn block_id(&self, r: BlockRef) -> BlockId {
        self.segment_start(r.schema, r.segment) + r.number
    }

    /// The inverse of [`Layout::block_id`]; `None` past the end.
    pub fn block_ref(&self, id: BlockId) -> Option<BlockRef> {
        if id >= self.total_blocks() {
            return None;
        }
        let per = self.schema_blocks();
        let schema = u32::try_from(id / per).ok()?;
        let local = id % per;
        let (segment, number) = if local < self.shape.table_blocks {
            (Segment::Table, local)
        } else if local < self.shape.table_blocks + self.index_blocks() {
            (Segment::Index, local - self.shape.table_blocks)
        } else {
            (
                Segment::Scan,
                local - self.shape.table_blocks - self.index_blocks(),
            )
        };
        Some(BlockRef {
            schema,
            segment,
            number,
        })
    }

    /// Where block `id` lives. Consecutive blocks inside one extent are
    /// consecutive on one target, so a multiblock read of up to an extent's
    /// worth, not crossing an extent boundary, is one contiguous read.
    pub fn locate(&self, id: BlockId) -> Location {
        let eb = self.extent_blocks();
        let extent = id / eb;
        let n = self.targets as u64;
        Location {
            target: (extent % n) as usize,
            offset_bytes: HEADER_BYTES
                + (extent / n) * EXTENT_BYTES
                + (id % eb) * self.block_bytes(),
        }
    }

    /// How many blocks from `id` on stay in `id`'s extent.
    pub fn contiguous_from(&self, id: BlockId) -> u64 {
        self.extent_blocks() - id % self.extent_blocks()
    }

    /// Bytes each data target needs.
    pub fn target_bytes_needed(&self) -> u64 {
        let extents = self.total_blocks().div_ceil(self.extent_blocks());
        HEADER_BYTES + extents.div_ceil(self.targets as u64) * EXTENT_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> Shape {
        Shape {
            block_size: 8192,
            schemas: 3,
            table_blocks: 1000,
            scan_blocks: 130,
            obfuscate: false,
        }
    }

    #[test]
    fn block_ids_and_refs_round_trip() {
        let l = Layout::new(shape(), 2);
        assert_eq!(l.keys_per_leaf(), 1016);
        assert_eq!(l.index_blocks(), 1);
        for id in 0..l.total_blocks() {
            let r = l.block_ref(id).expect("in range");
            assert_eq!(l.block_id(r), id);
        }
        assert!(l.block_ref(l.total_blocks()).is_none());
    }

    #[test]
    fn locations_are_distinct_aligned_and_fit_the_target_size() {
        let l = Layout::new(shape(), 3);
        let mut seen = std::collections::HashSet::new();
        for id in 0..l.total_blocks() {
            let at = l.locate(id);
            assert!(at.target < 3);
            assert_eq!(at.offset_bytes % l.block_bytes(), 0);
            assert!(at.offset_bytes >= HEADER_BYTES);
            assert!(at.offset_bytes + l.block_bytes() <= l.target_bytes_needed());
            assert!(seen.insert((at.target, at.offset_bytes)));
        }
    }

    #[test]
    fn contiguous_blocks_stay_on_one_target_within_an_extent() {
        let l = Layout::new(shape(), 2);
        let id = 130;
        let n = l.contiguous_from(id);
        assert_eq!(n, 128 - 2);
        let first = l.locate(id);
        let last = l.locate(id + n - 1);
        assert_eq!(first.target, last.target);
        assert_eq!(last.offset_bytes - first.offset_bytes, (n - 1) * 8192);
        assert_ne!(l.locate(id + n).target, first.target);
    }
}
