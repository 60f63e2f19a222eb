//! File directory entries (file 1, one block per file number): a file's
//! attributes, its direct extents and the pointers to its indirect extent
//! AUs; and the indirect blocks those AUs hold.

use std::mem::offset_of;

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::group::extent::{decode_extents, encode_extents, Extent, RawExtent, COPIES_MAX};
use crate::group::fields::{cast, cast_mut, get_name, put_name};
use crate::group::posix_attrs::{FileAttrs, RawFileAttrs};
use crate::meta::{invalid, payload, payload_mut, Block, MetaError, PAYLOAD_BYTES};

pub const DIRECT_EXTENTS: usize = 106;
pub const INDIRECT_POINTERS: usize = 16;
pub const EXTENTS_PER_INDIRECT_BLOCK: usize = PAYLOAD_BYTES / 32;
pub const TEMPLATE_NAME_LEN_MAX: usize = 30;

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct RawFileEntry {
    pub file_number: U32,
    pub incarnation: U32,
    pub state: u8,
    pub copies: u8,
    pub striping: u8,
    pub flags: u8,
    pub indirect_count: U16,
    pub reserved0: U16,
    pub size_bytes: U64,
    pub extent_count: U64,
    pub target_bytes: U64,
    pub created_unix_seconds: U64,
    pub modified_unix_seconds: U64,
    pub template: [u8; 32],
    /// All zero in an entry without attributes (every entry written before
    /// [`GROUP_RO_COMPAT_FILE_ATTRS`](super::GROUP_RO_COMPAT_FILE_ATTRS)).
    pub attrs: RawFileAttrs,
    pub indirect: [RawExtent; INDIRECT_POINTERS],
    pub direct: [RawExtent; DIRECT_EXTENTS],
}

const _: () = {
    assert!(size_of::<RawFileEntry>() == PAYLOAD_BYTES);
    assert!(offset_of!(RawFileEntry, attrs) == 88);
    assert!(offset_of!(RawFileEntry, size_bytes) == 16);
    assert!(offset_of!(RawFileEntry, template) == 56);
    assert!(offset_of!(RawFileEntry, indirect) == 128);
    assert!(offset_of!(RawFileEntry, direct) == 640);
};

/// A file's life cycle. Creating and Deleting are continuing operations: a mount
/// that finds one finishes it (deleting) or undoes it (creating).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileState {
    Active,
    /// Being created: not yet named, extents being allocated.
    Creating,
    /// Being resized to `target_bytes`: extents past what it needs are being
    /// allocated (grow) or freed (shrink).
    Resizing,
    /// Names removed, extents being freed.
    Deleting,
}

impl FileState {
    fn code(self) -> u8 {
        match self {
            Self::Active => 1,
            Self::Creating => 2,
            Self::Resizing => 3,
            Self::Deleting => 4,
        }
    }
    fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => Self::Active,
            2 => Self::Creating,
            3 => Self::Resizing,
            4 => Self::Deleting,
            _ => return None,
        })
    }
}

/// Coarse (one AU per stripe) or fine (128 KiB across 8 AUs) striping.
pub const STRIPING_COARSE: u8 = 1;
pub const STRIPING_FINE: u8 = 2;

/// A file directory entry: attributes, the direct extents and the pointers to
/// indirect extent AUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    pub number: u32,
    /// Distinguishes files that reuse a number; indirect blocks carry it.
    pub incarnation: u32,
    pub state: FileState,
    pub copies: u8,
    pub striping: u8,
    pub size_bytes: u64,
    /// Extents allocated (may exceed what `size_bytes` needs while resizing).
    pub extent_count: u64,
    /// The size a continuing create or resize is heading for.
    pub target_bytes: u64,
    pub created_unix_seconds: u64,
    pub modified_unix_seconds: u64,
    pub template: String,
    /// POSIX attributes (`None`: never set; shown as defaults).
    pub attrs: Option<FileAttrs>,
    /// The first `min(extent_count, DIRECT_EXTENTS)` extents.
    pub direct: Vec<Extent>,
    /// Indirect extent AUs, each holding AU/4 KiB indirect blocks.
    pub indirect: Vec<Extent>,
}

impl FileEntry {
    pub fn encode_into(&self, block: &mut Block) {
        assert!(self.direct.len() <= DIRECT_EXTENTS, "invariant: direct fit");
        assert!(
            self.indirect.len() <= INDIRECT_POINTERS,
            "invariant: indirect fit"
        );
        assert!(
            self.template.len() <= TEMPLATE_NAME_LEN_MAX,
            "invariant: template fits"
        );
        let raw: &mut RawFileEntry = cast_mut(payload_mut(block));
        raw.zero();
        raw.file_number = U32::new(self.number);
        raw.incarnation = U32::new(self.incarnation);
        raw.state = self.state.code();
        raw.copies = self.copies;
        raw.striping = self.striping;
        raw.indirect_count = U16::new(self.indirect.len() as u16);
        raw.size_bytes = U64::new(self.size_bytes);
        raw.extent_count = U64::new(self.extent_count);
        raw.target_bytes = U64::new(self.target_bytes);
        raw.created_unix_seconds = U64::new(self.created_unix_seconds);
        raw.modified_unix_seconds = U64::new(self.modified_unix_seconds);
        put_name(&mut raw.template, &self.template);
        raw.attrs = FileAttrs::encode(self.attrs.as_ref());
        encode_extents(&mut raw.indirect, &self.indirect);
        encode_extents(&mut raw.direct, &self.direct);
    }

    /// Decode the entry of file `number`; `None` for a free (all-zero) entry.
    pub fn decode(block: &[u8], number: u32) -> Result<Option<Self>, MetaError> {
        let raw: &RawFileEntry = cast(payload(block));
        if raw.as_bytes().iter().all(|b| *b == 0) {
            return Ok(None);
        }
        if raw.file_number.get() != number {
            return Err(invalid(
                "file_number",
                format!("{} in entry {number}", raw.file_number.get()),
            ));
        }
        let state = FileState::from_code(raw.state)
            .ok_or_else(|| invalid("state", format!("{}", raw.state)))?;
        if !(1..=COPIES_MAX as u8).contains(&raw.copies) {
            return Err(invalid("copies", format!("{}", raw.copies)));
        }
        if raw.striping != STRIPING_COARSE && raw.striping != STRIPING_FINE {
            return Err(invalid("striping", format!("{}", raw.striping)));
        }
        let extent_count = raw.extent_count.get();
        let direct_count = extent_count.min(DIRECT_EXTENTS as u64) as usize;
        let direct = decode_extents(&raw.direct, direct_count, "direct")?;
        let indirect = decode_extents(
            &raw.indirect,
            usize::from(raw.indirect_count.get()),
            "indirect",
        )?;
        let entry = Self {
            number,
            incarnation: raw.incarnation.get(),
            state,
            copies: raw.copies,
            striping: raw.striping,
            size_bytes: raw.size_bytes.get(),
            extent_count,
            target_bytes: raw.target_bytes.get(),
            created_unix_seconds: raw.created_unix_seconds.get(),
            modified_unix_seconds: raw.modified_unix_seconds.get(),
            template: get_name(&raw.template, "template").and_then(|t| {
                if t.len() > TEMPLATE_NAME_LEN_MAX {
                    Err(invalid(
                        "template",
                        format!("{} bytes; at most {TEMPLATE_NAME_LEN_MAX}", t.len()),
                    ))
                } else {
                    Ok(t)
                }
            })?,
            attrs: FileAttrs::decode(&raw.attrs, raw.size_bytes.get())?,
            direct,
            indirect,
        };
        if entry
            .direct
            .iter()
            .chain(&entry.indirect)
            .any(|e| usize::from(e.count) != usize::from(entry.copies))
        {
            return Err(invalid(
                "extents",
                format!(
                    "copy count differs from the file's ({} copies): {:?}",
                    entry.copies,
                    entry.direct.iter().map(|e| e.count).collect::<Vec<_>>()
                ),
            ));
        }
        Ok(Some(entry))
    }
}

/// Encode an indirect block holding `extents` (at most [`EXTENTS_PER_INDIRECT_BLOCK`]).
pub fn encode_indirect(block: &mut Block, extents: &[Extent]) {
    let raw: &mut [RawExtent; EXTENTS_PER_INDIRECT_BLOCK] = cast_mut(payload_mut(block));
    raw.zero();
    encode_extents(raw, extents);
}

/// Decode the first `count` extents of an indirect block; the rest must be zero.
pub fn decode_indirect(block: &[u8], count: usize) -> Result<Vec<Extent>, MetaError> {
    let raw: &[RawExtent; EXTENTS_PER_INDIRECT_BLOCK] = cast(payload(block));
    decode_extents(raw, count, "indirect block")
}
