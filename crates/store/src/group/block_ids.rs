//! The ids metadata blocks are sealed with: a per-disk block's, a journal
//! block's, a file entry's, a checksum map block's.

use cairn_format::group::{entry_place, FILE_JOURNAL};
use cairn_format::meta::{BlockId, BlockType, BLOCK_BYTES};

pub(super) fn per_disk_id(block_type: BlockType, disk: u16, offset_bytes: u64) -> BlockId {
    BlockId {
        block_type,
        owner: u32::from(disk),
        owner_tag: 0,
        index: offset_bytes / BLOCK_BYTES as u64,
    }
}

pub(super) fn journal_id(block_type: BlockType, index: u64) -> BlockId {
    BlockId {
        block_type,
        owner: FILE_JOURNAL,
        owner_tag: 0,
        index,
    }
}

/// File `file`'s entry: block `file` of the file directory, or, for a
/// checksum map, block `n` of the checksum directory (`entry_place`).
pub(super) fn entry_id(file: u32) -> BlockId {
    let (owner, index) = entry_place(file);
    BlockId {
        block_type: BlockType::FileEntry,
        owner,
        owner_tag: 0,
        index,
    }
}

/// Block `block` of data file `file`'s checksum map, incarnation
/// `incarnation`: owner the data file, tag its incarnation.
pub(super) fn map_block_id(file: u32, incarnation: u32, block: u64) -> BlockId {
    BlockId {
        block_type: BlockType::ChecksumMap,
        owner: file,
        owner_tag: incarnation,
        index: block,
    }
}
