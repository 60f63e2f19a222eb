//! The envelope every disk-group metadata block shares: a 64-byte header that
//! makes a 4 KiB block self-identifying and checksummed.
//!
//! Owns [`RawMetaHeader`], [`BlockType`], the self-address [`BlockId`], and the
//! two operations on the envelope: [`seal`] (fill the header, checksum last) and
//! [`open`] (check everything the header promises before a payload is trusted).
//!
//! Defends against: torn writes and bit rot (crc32c over every byte after the
//! checksum field), misdirected writes and stale blocks (the block records its own
//! logical address: type, owner, owner tag and index, so a block written to the
//! wrong place, or left over from an earlier file that used the same AU, does not
//! pass for the block expected there), another group's blocks (group UUID), and
//! newer formats (version).
//!
//! An all-zero block is not an error but a state: [`MetaError::Blank`] means
//! "never written", which every structure reads as "empty / free". That is what
//! lets a group be created on a thin LUN by writing only the few blocks that are
//! not empty.
//!
//! Payload layouts live with their structures in [`crate::group`].

use std::mem::offset_of;

use uuid::Uuid;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Size of every metadata block.
pub const BLOCK_BYTES: usize = 4096;
/// Size of the shared header; the payload is the rest of the block.
pub const META_HEADER_BYTES: usize = 64;
/// Bytes a payload may use.
pub const PAYLOAD_BYTES: usize = BLOCK_BYTES - META_HEADER_BYTES;
/// Identifies a Cairn disk-group metadata block.
pub const META_MAGIC: [u8; 8] = *b"CAIRNMTA";
/// The metadata format version this code writes and the newest it reads.
pub const META_FORMAT_VERSION: u16 = 1;

/// A 4 KiB metadata block.
pub type Block = [u8; BLOCK_BYTES];

/// The shared header, little-endian, 64 bytes.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct RawMetaHeader {
    pub magic: [u8; 8],
    pub checksum: U32,
    pub block_type: U16,
    pub format_version: U16,
    pub group_uuid: [u8; 16],
    pub owner: U32,
    pub owner_tag: U32,
    pub index: U64,
    pub generation: U64,
    pub reserved: [u8; 8],
}

const _: () = {
    assert!(size_of::<RawMetaHeader>() == META_HEADER_BYTES);
    assert!(offset_of!(RawMetaHeader, checksum) == 0x08);
    assert!(offset_of!(RawMetaHeader, block_type) == 0x0C);
    assert!(offset_of!(RawMetaHeader, group_uuid) == 0x10);
    assert!(offset_of!(RawMetaHeader, owner) == 0x20);
    assert!(offset_of!(RawMetaHeader, owner_tag) == 0x24);
    assert!(offset_of!(RawMetaHeader, index) == 0x28);
    assert!(offset_of!(RawMetaHeader, generation) == 0x30);
};

/// The checksum covers every byte from the block type to the end of the block.
const CHECKSUM_FROM_BYTE: usize = offset_of!(RawMetaHeader, block_type);

/// What a metadata block is. Numbers are never reused; 1 is the disk header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum BlockType {
    GroupSuper = 2,
    DiskDirectory = 3,
    AtSummary = 4,
    AtBitmap = 5,
    FileEntry = 6,
    Indirect = 7,
    Alias = 8,
    Template = 9,
    Attribute = 10,
    JournalHeader = 11,
    JournalRecord = 12,
    /// A disk's returnable map ([`crate::group::AtLayout::clean_offset_bytes`]).
    AtClean = 13,
    /// A disk's heartbeat ([`crate::heartbeat`]).
    Heartbeat = 14,
    /// A block of a file's checksum map ([`crate::group::decode_map_block`]).
    ChecksumMap = 15,
    /// A record of the checksum log ([`crate::group::IntentRecord`]).
    ChecksumLog = 16,
    /// One of the checksum log's two headers ([`crate::group::LogHeader`]).
    ChecksumLogHeader = 17,
}

impl BlockType {
    fn from_u16(value: u16) -> Option<Self> {
        Some(match value {
            2 => Self::GroupSuper,
            3 => Self::DiskDirectory,
            4 => Self::AtSummary,
            5 => Self::AtBitmap,
            6 => Self::FileEntry,
            7 => Self::Indirect,
            8 => Self::Alias,
            9 => Self::Template,
            10 => Self::Attribute,
            11 => Self::JournalHeader,
            12 => Self::JournalRecord,
            13 => Self::AtClean,
            14 => Self::Heartbeat,
            15 => Self::ChecksumMap,
            16 => Self::ChecksumLog,
            17 => Self::ChecksumLogHeader,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::GroupSuper => "group superblock",
            Self::DiskDirectory => "disk directory",
            Self::AtSummary => "allocation summary",
            Self::AtBitmap => "allocation bitmap",
            Self::FileEntry => "file entry",
            Self::Indirect => "indirect extents",
            Self::Alias => "alias directory",
            Self::Template => "templates",
            Self::Attribute => "attributes",
            Self::JournalHeader => "journal header",
            Self::JournalRecord => "journal record",
            Self::AtClean => "discard map",
            Self::Heartbeat => "heartbeat",
            Self::ChecksumMap => "checksum map",
            Self::ChecksumLog => "checksum log record",
            Self::ChecksumLogHeader => "checksum log header",
        }
    }
}

/// A block's logical self-address. Per-disk blocks (superblock, disk directory,
/// allocation table) have the disk number as owner and their byte offset / 4096
/// as index; blocks of metadata files have the file number as owner and the block
/// number within the file as index; indirect blocks also carry the owning file's
/// incarnation as owner tag, so a block left by an earlier file with the same
/// number is recognised as stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockId {
    pub block_type: BlockType,
    pub owner: u32,
    pub owner_tag: u32,
    pub index: u64,
}

impl std::fmt::Display for BlockId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} owner {} tag {} block {}",
            self.block_type.name(),
            self.owner,
            self.owner_tag,
            self.index
        )
    }
}

/// Why a block is not the metadata block expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    #[error("blank (all zeros)")]
    Blank,
    #[error("block is {len_bytes} bytes, not {BLOCK_BYTES}")]
    WrongLength { len_bytes: usize },
    #[error("not a Cairn metadata block (magic {found:02x?})")]
    NotCairn { found: [u8; 8] },
    #[error("checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum { stored: u32, computed: u32 },
    #[error("metadata format version {found} is not one this Cairn reads (1..={META_FORMAT_VERSION}); upgrade Cairn")]
    UnsupportedVersion { found: u16 },
    #[error("block belongs to group {found}, not {expected}")]
    WrongGroup { expected: Uuid, found: Uuid },
    #[error("misplaced block: expected {expected}, found {found}")]
    Misplaced { expected: BlockId, found: String },
    #[error("field {field} is invalid: {detail}")]
    Invalid { field: &'static str, detail: String },
}

pub(crate) fn invalid(field: &'static str, detail: impl Into<String>) -> MetaError {
    MetaError::Invalid {
        field,
        detail: detail.into(),
    }
}

/// crc32c of the bytes the checksum covers.
pub fn checksum_of(block: &[u8]) -> u32 {
    crc32c::crc32c(block.get(CHECKSUM_FROM_BYTE..).unwrap_or_default())
}

/// Fill `block`'s header for `id` and compute its checksum. The payload
/// (bytes 64..) must already be in place.
pub fn seal(block: &mut Block, id: BlockId, group_uuid: Uuid, generation: u64) {
    let (header, _) = RawMetaHeader::mut_from_prefix(block.as_mut_slice())
        .expect("invariant: a block holds a header");
    header.magic = META_MAGIC;
    header.block_type = U16::new(id.block_type as u16);
    header.format_version = U16::new(META_FORMAT_VERSION);
    header.group_uuid = *group_uuid.as_bytes();
    header.owner = U32::new(id.owner);
    header.owner_tag = U32::new(id.owner_tag);
    header.index = U64::new(id.index);
    header.generation = U64::new(generation);
    header.reserved = [0; 8];
    let sum = checksum_of(block);
    block[offset_of!(RawMetaHeader, checksum)..][..4].copy_from_slice(&sum.to_le_bytes());
}

/// A new block with an empty payload.
pub fn empty_block() -> Box<Block> {
    Box::new([0u8; BLOCK_BYTES])
}

/// Check that `block` is the block `expected` of group `group_uuid` and return
/// its generation. Never panics.
pub fn open(block: &[u8], expected: BlockId, group_uuid: Uuid) -> Result<u64, MetaError> {
    let (header, _) =
        RawMetaHeader::ref_from_prefix(block).map_err(|_| MetaError::WrongLength {
            len_bytes: block.len(),
        })?;
    if block.len() != BLOCK_BYTES {
        return Err(MetaError::WrongLength {
            len_bytes: block.len(),
        });
    }
    // One comparison with a zero block (vectorised), not a byte at a time:
    // a mount reads many blocks never written.
    static ZERO_BLOCK: [u8; BLOCK_BYTES] = [0; BLOCK_BYTES];
    if block == ZERO_BLOCK.as_slice() {
        return Err(MetaError::Blank);
    }
    if header.magic != META_MAGIC {
        return Err(MetaError::NotCairn {
            found: header.magic,
        });
    }
    let computed = checksum_of(block);
    if header.checksum.get() != computed {
        return Err(MetaError::Checksum {
            stored: header.checksum.get(),
            computed,
        });
    }
    let version = header.format_version.get();
    if version == 0 || version > META_FORMAT_VERSION {
        return Err(MetaError::UnsupportedVersion { found: version });
    }
    let found_group = Uuid::from_bytes(header.group_uuid);
    if found_group != group_uuid {
        return Err(MetaError::WrongGroup {
            expected: group_uuid,
            found: found_group,
        });
    }
    let found_type = BlockType::from_u16(header.block_type.get());
    let matches = found_type == Some(expected.block_type)
        && header.owner.get() == expected.owner
        && header.owner_tag.get() == expected.owner_tag
        && header.index.get() == expected.index;
    if !matches {
        let kind = found_type.map_or_else(
            || format!("block type {}", header.block_type.get()),
            |t| t.name().to_string(),
        );
        return Err(MetaError::Misplaced {
            expected,
            found: format!(
                "{kind} owner {} tag {} block {}",
                header.owner.get(),
                header.owner_tag.get(),
                header.index.get()
            ),
        });
    }
    Ok(header.generation.get())
}

/// The generation of a sealed block of group `group_uuid` whose envelope is
/// whole (magic, checksum, version, group), without checking which block it
/// says it is: for a journal image, whose self-address is its target's, not
/// its place in the ring. Never panics.
pub fn sealed_generation(block: &[u8], group_uuid: Uuid) -> Option<u64> {
    let (header, _) = RawMetaHeader::ref_from_prefix(block).ok()?;
    let whole = block.len() == BLOCK_BYTES
        && header.magic == META_MAGIC
        && header.checksum.get() == checksum_of(block)
        && (1..=META_FORMAT_VERSION).contains(&header.format_version.get())
        && Uuid::from_bytes(header.group_uuid) == group_uuid;
    whole.then(|| header.generation.get())
}

/// The group UUID a block claims, without checking anything else: for finding
/// which group a superblock belongs to before its UUID is known.
pub fn claimed_group(block: &[u8]) -> Option<Uuid> {
    let (header, _) = RawMetaHeader::ref_from_prefix(block).ok()?;
    (header.magic == META_MAGIC).then(|| Uuid::from_bytes(header.group_uuid))
}

/// The payload bytes of a block.
pub fn payload(block: &[u8]) -> &[u8] {
    block.get(META_HEADER_BYTES..).unwrap_or_default()
}

/// The payload bytes of a block, for filling.
pub fn payload_mut(block: &mut Block) -> &mut [u8] {
    &mut block[META_HEADER_BYTES..]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const ID: BlockId = BlockId {
        block_type: BlockType::FileEntry,
        owner: 1,
        owner_tag: 0,
        index: 300,
    };

    fn sealed() -> (Box<Block>, Uuid) {
        let group = Uuid::from_u128(0x1234);
        let mut block = empty_block();
        payload_mut(&mut block)[..4].copy_from_slice(b"data");
        seal(&mut block, ID, group, 77);
        (block, group)
    }

    #[test]
    fn sealed_block_opens_with_its_generation() {
        let (block, group) = sealed();
        assert_eq!(open(block.as_slice(), ID, group), Ok(77));
        assert_eq!(&payload(block.as_slice())[..4], b"data");
        assert_eq!(claimed_group(block.as_slice()), Some(group));
    }

    #[test]
    fn zeros_are_blank_not_corrupt() {
        let block = empty_block();
        assert_eq!(
            open(block.as_slice(), ID, Uuid::nil()),
            Err(MetaError::Blank)
        );
    }

    #[test]
    fn every_single_bit_flip_is_caught() {
        let (block, group) = sealed();
        for byte in 0..BLOCK_BYTES {
            for bit in 0..8 {
                let mut bad = block.clone();
                bad[byte] ^= 1 << bit;
                assert!(
                    open(bad.as_slice(), ID, group).is_err(),
                    "flip {byte}.{bit}"
                );
            }
        }
    }

    #[test]
    fn another_address_or_group_is_refused() {
        let (block, group) = sealed();
        for other in [
            BlockId { index: 301, ..ID },
            BlockId { owner: 2, ..ID },
            BlockId { owner_tag: 9, ..ID },
            BlockId {
                block_type: BlockType::Indirect,
                ..ID
            },
        ] {
            assert!(matches!(
                open(block.as_slice(), other, group),
                Err(MetaError::Misplaced { .. })
            ));
        }
        assert!(matches!(
            open(block.as_slice(), ID, Uuid::from_u128(9)),
            Err(MetaError::WrongGroup { .. })
        ));
    }

    #[test]
    fn short_and_long_buffers_are_errors() {
        assert!(matches!(
            open(&[1u8; 10], ID, Uuid::nil()),
            Err(MetaError::WrongLength { .. })
        ));
        assert!(matches!(
            open(&[1u8; 5000], ID, Uuid::nil()),
            Err(MetaError::WrongLength { .. })
        ));
    }
}
