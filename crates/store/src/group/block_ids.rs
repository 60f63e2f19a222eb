//! The ids metadata blocks are sealed with: a per-disk block's, a journal
//! block's, a file entry's.

use cairn_format::group::{FILE_DIRECTORY, FILE_JOURNAL};
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

pub(super) fn entry_id(file: u32) -> BlockId {
    BlockId {
        block_type: BlockType::FileEntry,
        owner: FILE_DIRECTORY,
        owner_tag: 0,
        index: u64::from(file),
    }
}
