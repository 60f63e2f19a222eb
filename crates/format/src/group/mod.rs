//! Disk-group metadata payloads: the raw layouts inside the [`crate::meta`]
//! envelope and the validated domain types built from them.
//!
//! | structure | where | block type |
//! |---|---|---|
//! | group superblock + disk directory | two slots per disk, [`SUPER_SLOT_OFFSETS_BYTES`] | 2, 3 |
//! | allocation table: summary + bitmap | per disk, from [`AT_START_BYTES`] | 4, 5 |
//! | file directory entry (extent map) | file 1, block = file number | 6 |
//! | indirect extent blocks | AUs named by an entry's indirect pointers | 7 |
//! | alias directory | file 4 | 8 |
//! | templates, attributes | files 5, 6 | 9, 10 |
//! | journal header and records | file 3 | 11, 12 |
//! | checksum maps (entries in file 7) and the checksum log (file 8) | `checksums.rs` | 15, 16 |
//!
//! Every record's all-zero value means "free / unused", so a structure nobody
//! wrote reads as empty: that is what keeps group creation on a thin LUN to a
//! few blocks. The byte tables are in `docs/on_disk_format.md`.
//!
//! Decoders validate what they can check without context (ranges, enums,
//! prefix rules) and never panic; relations between structures (an extent on a
//! disk that exists, an AU marked used) are the checker's business.

mod alias;
mod allocation;
mod attributes;
mod checksums;
mod extent;
mod features;
mod fields;
mod file_entry;
mod journal;
mod posix_attrs;
mod superblock;
mod templates;

pub use alias::{
    decode_alias_block, encode_alias_block, AliasKind, AliasRecord, RawAlias, RawAliasBlock,
    ALIASES_PER_BLOCK, ALIAS_NAME_LEN_MAX,
};
pub use allocation::{
    decode_bitmap, decode_summary, encode_bitmap, encode_summary, AtLayout, AT_BITS_PER_BLOCK,
    AT_COUNTS_PER_SUMMARY, AT_START_BYTES,
};
pub use attributes::{
    decode_attributes, encode_attributes, RawAttribute, ATTRIBUTES_PER_BLOCK,
    ATTRIBUTE_NAME_LEN_MAX, ATTRIBUTE_VALUE_LEN_MAX,
};
pub use checksums::{
    decode_map_block, encode_map_block, entry_place, is_map_number, is_user_number, map_blocks,
    map_number, map_place, mapped_file, unit_checksum, units_in, zero_unit_checksum, IntentRecord,
    IntentRun, LogHeader, MapSums, RawIntentRecord, RawLogHeader, RawRegion, RawRunHead, Region,
    CHECKSUMS_PER_BLOCK, CHECKSUM_MAP_BIT, FILE_CHECKSUM_DIRECTORY, FILE_CHECKSUM_LOG,
    LOG_HEADER_BLOCKS, REGIONS_PER_RECORD, REGION_BYTES, RUN_AREA_BYTES, RUN_HEAD_BYTES,
    UNIT_BYTES_ALLOWED,
};
pub use extent::{
    au_mask, AuAddr, Extent, RawCopy, RawExtent, COPIES_MAX, EXTENT_INITIALIZED, NO_DISK,
};
pub use features::{
    GROUP_INCOMPAT_KNOWN, GROUP_INCOMPAT_STALE_COPIES, GROUP_RO_COMPAT_CHECKSUM_LOG,
    GROUP_RO_COMPAT_CLEAN_MAP, GROUP_RO_COMPAT_DATA_CHECKSUMS, GROUP_RO_COMPAT_FILE_ATTRS,
    GROUP_RO_COMPAT_KNOWN, GROUP_RO_COMPAT_MULTIHOST,
};
pub(crate) use fields::{cast, cast_mut, get_name, put_name};
pub use file_entry::{
    decode_indirect, encode_indirect, FileEntry, FileState, RawFileEntry, DIRECT_EXTENTS,
    EXTENTS_PER_INDIRECT_BLOCK, INDIRECT_POINTERS, STRIPING_COARSE, STRIPING_FINE,
    TEMPLATE_NAME_LEN_MAX,
};
pub use journal::{
    images_crc, JournalHeader, JournalRecord, JournalTarget, RawJournalHeader, RawJournalRecord,
    RawTarget, JOURNAL_HEADER_BLOCKS, JOURNAL_TARGETS_MAX,
};
pub use posix_attrs::{DirAttrs, FileAttrs, RawFileAttrs, FILE_ATTRS_PRESENT, MODE_BITS};
pub use superblock::{
    decode_disk_directory, encode_disk_directory, DiskEntry, DiskState, GroupSuper,
    RawDiskDirectory, RawDiskEntry, RawGroupSuper, AU_BYTES_MAX, AU_BYTES_MIN, DISKS_MAX,
    DISK_ENTRIES_PER_BLOCK, DISK_FLAG_DROPPING, DISK_FLAG_FORCED, DISK_FLAG_HELD,
    DISK_FLAG_RESYNC_ALL, JOURNAL_EXTENTS_MAX, SUPER_SLOT_BLOCKS, SUPER_SLOT_OFFSETS_BYTES,
};
pub use templates::{
    decode_templates, encode_templates, RawTemplate, Template, TEMPLATES_PER_BLOCK,
};

/// Metadata file numbers. 2 is the disk directory, which lives in the superblock
/// slots of every disk rather than in a file of its own (see [`SUPER_SLOT_OFFSETS_BYTES`]).
pub const FILE_DIRECTORY: u32 = 1;
pub const FILE_DISK_DIRECTORY: u32 = 2;
pub const FILE_JOURNAL: u32 = 3;
pub const FILE_ALIAS_DIRECTORY: u32 = 4;
pub const FILE_TEMPLATES: u32 = 5;
pub const FILE_ATTRIBUTES: u32 = 6;
/// User files are numbered from here; below are metadata files.
pub const FILE_NUMBER_USER_MIN: u32 = 256;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
