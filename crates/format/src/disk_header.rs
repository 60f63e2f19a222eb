//! The disk header: the 4 KiB block that makes a device a Cairn disk.
//!
//! Owns the raw layout ([`RawDiskHeader`]), the domain type ([`DiskHeader`]) and the
//! conversions between them. The byte-level table and version history live in
//! `docs/on_disk_format.md`; a golden fixture (`tests/fixtures/disk_header_v1.hex`)
//! keeps that document and this code in step.
//!
//! Defends against: torn or partial writes and bit rot (crc32c over every byte
//! after the checksum field), misdirected writes (each copy records its own
//! offset and index), a block of someone else's (magic and block type), and
//! newer formats (version and feature bits: unknown incompatible features refuse
//! to decode; unknown read-only-compatible features decode but make the disk
//! read-only).
//!
//! Decoding never panics on any bytes; it returns a [`HeaderError`] that says
//! what is wrong, so a person reading `cairn disk list` knows which copy is bad
//! and why.

use std::mem::offset_of;
use std::time::{Duration, UNIX_EPOCH};

use uuid::Uuid;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::disk_label::{DiskLabel, LABEL_LEN_MAX};
use crate::layout::{DEVICE_SIZE_MIN_BYTES, HEADER_BLOCK_BYTES};

/// Identifies a Cairn disk header: the first eight bytes of every copy.
pub const MAGIC: [u8; 8] = *b"CAIRNDSK";
/// Block type of the disk header (other metadata blocks use other numbers).
pub const BLOCK_TYPE_DISK_HEADER: u16 = 1;
/// The format version this code writes and the newest it reads.
pub const FORMAT_VERSION: u16 = 1;
/// Most copies a header can list.
pub const COPY_SLOTS: usize = 4;
/// The checksum covers every byte from here to the end of the block.
const CHECKSUM_FROM_BYTE: usize = offset_of!(RawDiskHeader, block_type);
const BLOCK_BYTES: usize = HEADER_BLOCK_BYTES as usize;

/// Feature bits this version understands. Version 1 defines none; the sets exist
/// so that a later Cairn can add fields and tell older ones whether they may
/// mount (compatible), mount read-only (ro-compatible) or must refuse
/// (incompatible).
pub const FEATURES_KNOWN: FeatureSet = FeatureSet {
    compat: HEADER_COMPAT_FORMER,
    ro_compat: 0,
    incompat: 0,
};

/// Compatible header feature: `former_group_uuid` names the group the disk
/// was dropped from (ASM's FORMER header status). A reader that does not
/// know it sees a disk in no group, which is what a former member is.
pub const HEADER_COMPAT_FORMER: u64 = 1;

/// The on-disk layout, little-endian, 4096 bytes. Field order and sizes are pinned
/// by the compile-time assertions below and by the golden fixture.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct RawDiskHeader {
    pub magic: [u8; 8],
    pub checksum: U32,
    pub block_type: U16,
    pub format_version: U16,
    pub features_compat: U64,
    pub features_ro_compat: U64,
    pub features_incompat: U64,
    pub self_offset_bytes: U64,
    pub generation: U64,
    pub copy_index: u8,
    pub copy_count: u8,
    pub reserved0: [u8; 6],
    pub copy_offsets_bytes: [U64; COPY_SLOTS],
    pub disk_uuid: [u8; 16],
    pub group_uuid: [u8; 16],
    pub label: [u8; 32],
    pub logical_sector_bytes: U32,
    pub physical_sector_bytes: U32,
    pub device_size_bytes: U64,
    pub created_unix_seconds: U64,
    pub written_unix_seconds: U64,
    /// With [`HEADER_COMPAT_FORMER`]: the group this disk left by a
    /// completed drop.
    pub former_group_uuid: [u8; 16],
    pub reserved_tail: [u8; BLOCK_BYTES - 0xD0],
}

const _: () = {
    assert!(size_of::<RawDiskHeader>() == BLOCK_BYTES);
    assert!(offset_of!(RawDiskHeader, checksum) == 0x008);
    assert!(offset_of!(RawDiskHeader, block_type) == 0x00C);
    assert!(offset_of!(RawDiskHeader, features_compat) == 0x010);
    assert!(offset_of!(RawDiskHeader, self_offset_bytes) == 0x028);
    assert!(offset_of!(RawDiskHeader, generation) == 0x030);
    assert!(offset_of!(RawDiskHeader, copy_index) == 0x038);
    assert!(offset_of!(RawDiskHeader, copy_offsets_bytes) == 0x040);
    assert!(offset_of!(RawDiskHeader, disk_uuid) == 0x060);
    assert!(offset_of!(RawDiskHeader, group_uuid) == 0x070);
    assert!(offset_of!(RawDiskHeader, label) == 0x080);
    assert!(offset_of!(RawDiskHeader, logical_sector_bytes) == 0x0A0);
    assert!(offset_of!(RawDiskHeader, device_size_bytes) == 0x0A8);
    assert!(offset_of!(RawDiskHeader, written_unix_seconds) == 0x0B8);
    assert!(offset_of!(RawDiskHeader, former_group_uuid) == 0x0C0);
    assert!(offset_of!(RawDiskHeader, reserved_tail) == 0x0D0);
};

/// Three sets of feature bits, as ext4 and redb use them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FeatureSet {
    pub compat: u64,
    pub ro_compat: u64,
    pub incompat: u64,
}

impl FeatureSet {
    /// True when every bit is one this code knows. Only then may it rewrite the
    /// header: a header re-encoded by a version that does not know a feature
    /// would drop that feature's fields, compatible or not.
    pub fn rewritable(&self) -> bool {
        self.compat & !FEATURES_KNOWN.compat == 0
            && self.ro_compat & !FEATURES_KNOWN.ro_compat == 0
            && self.incompat & !FEATURES_KNOWN.incompat == 0
    }
}

/// A decoded, validated disk header: what is true of the disk, whatever copy it
/// was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskHeader {
    pub label: DiskLabel,
    pub disk_uuid: Uuid,
    /// The disk group this disk belongs to; `None` until a group claims it.
    pub group_uuid: Option<Uuid>,
    /// The group it was dropped from (FORMER), while in no group.
    pub former_group: Option<Uuid>,
    pub logical_sector_bytes: u32,
    pub physical_sector_bytes: u32,
    /// Device size when this generation was written.
    pub device_size_bytes: u64,
    pub created_unix_seconds: u64,
    pub written_unix_seconds: u64,
    /// Bumped on every rewrite; the newest good copy wins.
    pub generation: u64,
    pub features: FeatureSet,
    /// Where every copy lives, in copy order; a copy records its own index.
    pub copy_offsets_bytes: Vec<u64>,
}

impl DiskHeader {
    /// Set (or clear) the group this disk was dropped from, with the
    /// feature bit that says the field is in use.
    pub fn set_former_group(&mut self, group: Option<Uuid>) {
        self.former_group = group;
        if group.is_some() {
            self.features.compat |= HEADER_COMPAT_FORMER;
        } else {
            self.features.compat &= !HEADER_COMPAT_FORMER;
        }
    }
}

/// A header as read from one copy: the header and where the copy says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedHeader {
    pub header: DiskHeader,
    pub copy_index: u8,
    pub self_offset_bytes: u64,
}

/// Why a block is not a valid header copy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("block is {len_bytes} bytes, a header is {BLOCK_BYTES}")]
    WrongLength { len_bytes: usize },
    #[error("blank (all zeros)")]
    Blank,
    #[error("not a Cairn header (magic {found:02x?})")]
    NotCairn { found: [u8; 8] },
    #[error("checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum { stored: u32, computed: u32 },
    #[error("block type {found} is not a disk header ({BLOCK_TYPE_DISK_HEADER})")]
    WrongBlockType { found: u16 },
    #[error(
        "format version {found} is not one this Cairn reads (1..={FORMAT_VERSION}); upgrade Cairn"
    )]
    UnsupportedVersion { found: u16 },
    #[error(
        "written with incompatible features {bits:#x} this Cairn does not know; upgrade Cairn"
    )]
    IncompatibleFeatures { bits: u64 },
    #[error("field {field} is invalid: {detail}")]
    Invalid { field: &'static str, detail: String },
}

fn invalid(field: &'static str, detail: impl Into<String>) -> HeaderError {
    HeaderError::Invalid {
        field,
        detail: detail.into(),
    }
}

/// crc32c of the bytes the checksum covers (hardware-accelerated where the CPU has it).
pub fn checksum_of(block: &[u8]) -> u32 {
    crc32c::crc32c(block.get(CHECKSUM_FROM_BYTE..).unwrap_or_default())
}

fn is_sector_size(bytes: u32) -> bool {
    bytes.is_power_of_two() && (512..=4096).contains(&bytes)
}

/// The block as a header copy: its length, magic, checksum, block type,
/// version and feature bits, and zeros where nothing is defined. The raw
/// header and its features.
fn check_envelope(block: &[u8]) -> Result<(&RawDiskHeader, FeatureSet), HeaderError> {
    let raw = RawDiskHeader::ref_from_bytes(block).map_err(|_| HeaderError::WrongLength {
        len_bytes: block.len(),
    })?;
    if block.iter().all(|b| *b == 0) {
        return Err(HeaderError::Blank);
    }
    if raw.magic != MAGIC {
        return Err(HeaderError::NotCairn { found: raw.magic });
    }
    let computed = checksum_of(block);
    if raw.checksum.get() != computed {
        return Err(HeaderError::Checksum {
            stored: raw.checksum.get(),
            computed,
        });
    }
    if raw.block_type.get() != BLOCK_TYPE_DISK_HEADER {
        return Err(HeaderError::WrongBlockType {
            found: raw.block_type.get(),
        });
    }
    let version = raw.format_version.get();
    if version == 0 || version > FORMAT_VERSION {
        return Err(HeaderError::UnsupportedVersion { found: version });
    }
    let features = FeatureSet {
        compat: raw.features_compat.get(),
        ro_compat: raw.features_ro_compat.get(),
        incompat: raw.features_incompat.get(),
    };
    let unknown_incompat = features.incompat & !FEATURES_KNOWN.incompat;
    if unknown_incompat != 0 {
        return Err(HeaderError::IncompatibleFeatures {
            bits: unknown_incompat,
        });
    }
    if raw.reserved0 != [0; 6] {
        return Err(invalid("reserved0", "not zero"));
    }
    // Bytes in the tail belong to a feature this version does not know; with
    // no such feature bit set, they are damage that the checksum missed.
    let unknown_features = features.compat & !FEATURES_KNOWN.compat != 0
        || features.ro_compat & !FEATURES_KNOWN.ro_compat != 0;
    if !unknown_features && raw.reserved_tail.iter().any(|b| *b != 0) {
        return Err(invalid(
            "reserved_tail",
            "not zero, and no feature bit says why",
        ));
    }
    Ok((raw, features))
}

/// Where a copy says the header's copies lie: inside the device, aligned,
/// in increasing order, this copy at its own place.
struct Placement {
    device_size_bytes: u64,
    copy_offsets_bytes: Vec<u64>,
    copy_index: u8,
    self_offset_bytes: u64,
}

impl Placement {
    fn decode(raw: &RawDiskHeader) -> Result<Self, HeaderError> {
        let device_size_bytes = raw.device_size_bytes.get();
        if device_size_bytes < DEVICE_SIZE_MIN_BYTES {
            return Err(invalid(
                "device_size_bytes",
                format!("{device_size_bytes} is below the minimum {DEVICE_SIZE_MIN_BYTES}"),
            ));
        }
        let copy_count = usize::from(raw.copy_count);
        if !(1..=COPY_SLOTS).contains(&copy_count) {
            return Err(invalid(
                "copy_count",
                format!("{copy_count} is not 1..={COPY_SLOTS}"),
            ));
        }
        let slots: Vec<u64> = raw.copy_offsets_bytes.iter().map(|o| o.get()).collect();
        let (used, unused) = slots.split_at(copy_count);
        if unused.iter().any(|o| *o != 0) {
            return Err(invalid("copy_offsets_bytes", "unused slots are not zero"));
        }
        for (index, offset) in used.iter().enumerate() {
            let fits = offset
                .checked_add(HEADER_BLOCK_BYTES)
                .is_some_and(|end| end <= device_size_bytes);
            if offset % HEADER_BLOCK_BYTES != 0 || !fits {
                return Err(invalid(
                    "copy_offsets_bytes",
                    format!("copy {index} at {offset} is misaligned or outside the device"),
                ));
            }
            if index > 0 && used[index - 1] >= *offset {
                return Err(invalid("copy_offsets_bytes", "offsets are not increasing"));
            }
        }
        let copy_index = raw.copy_index;
        let self_offset_bytes = raw.self_offset_bytes.get();
        match used.get(usize::from(copy_index)) {
            None => {
                return Err(invalid(
                    "copy_index",
                    format!("{copy_index} is not below copy_count {copy_count}"),
                ))
            }
            Some(expected) if *expected != self_offset_bytes => {
                return Err(invalid(
                    "self_offset_bytes",
                    format!(
                        "{self_offset_bytes} differs from copy {copy_index}'s place {expected}"
                    ),
                ))
            }
            Some(_) => {}
        }
        Ok(Self {
            device_size_bytes,
            copy_offsets_bytes: used.to_vec(),
            copy_index,
            self_offset_bytes,
        })
    }
}

/// The logical and physical sector sizes: a logical one of 512 to 4096
/// bytes, a physical one a power of two from it to 64 KiB.
fn sector_sizes(raw: &RawDiskHeader) -> Result<(u32, u32), HeaderError> {
    let logical_sector_bytes = raw.logical_sector_bytes.get();
    let physical_sector_bytes = raw.physical_sector_bytes.get();
    if !is_sector_size(logical_sector_bytes) {
        return Err(invalid(
            "logical_sector_bytes",
            format!("{logical_sector_bytes} is not 512, 1024, 2048 or 4096"),
        ));
    }
    if !physical_sector_bytes.is_power_of_two()
        || physical_sector_bytes < logical_sector_bytes
        || physical_sector_bytes > 1 << 16
    {
        return Err(invalid(
            "physical_sector_bytes",
            format!("{physical_sector_bytes} with logical {logical_sector_bytes}"),
        ));
    }
    Ok((logical_sector_bytes, physical_sector_bytes))
}

impl DiskHeader {
    /// Decode and validate one copy. Never panics.
    pub fn decode(block: &[u8]) -> Result<DecodedHeader, HeaderError> {
        let (raw, features) = check_envelope(block)?;
        let placement = Placement::decode(raw)?;
        let generation = raw.generation.get();
        if generation == 0 {
            return Err(invalid("generation", "zero"));
        }

        let label = decode_label(&raw.label)?;
        let disk_uuid = Uuid::from_bytes(raw.disk_uuid);
        if disk_uuid.is_nil() {
            return Err(invalid("disk_uuid", "nil"));
        }
        let group_uuid = Some(Uuid::from_bytes(raw.group_uuid)).filter(|u| !u.is_nil());
        let former_group = Some(Uuid::from_bytes(raw.former_group_uuid)).filter(|u| !u.is_nil());
        if former_group.is_some() && features.compat & HEADER_COMPAT_FORMER == 0 {
            return Err(invalid(
                "former_group_uuid",
                "set, but the FORMER feature bit is not",
            ));
        }
        let (logical_sector_bytes, physical_sector_bytes) = sector_sizes(raw)?;

        Ok(DecodedHeader {
            header: DiskHeader {
                label,
                disk_uuid,
                group_uuid,
                former_group,
                logical_sector_bytes,
                physical_sector_bytes,
                device_size_bytes: placement.device_size_bytes,
                created_unix_seconds: raw.created_unix_seconds.get(),
                written_unix_seconds: raw.written_unix_seconds.get(),
                generation,
                features,
                copy_offsets_bytes: placement.copy_offsets_bytes,
            },
            copy_index: placement.copy_index,
            self_offset_bytes: placement.self_offset_bytes,
        })
    }

    /// Encode copy `copy_index` into `out` (exactly one header block).
    ///
    /// Panics if the header breaks an invariant the caller was responsible for
    /// (copy index out of range, offsets not increasing): those are bugs, not
    /// data errors.
    pub fn encode_into(&self, copy_index: usize, out: &mut [u8]) {
        assert_eq!(
            out.len(),
            BLOCK_BYTES,
            "invariant: header buffer is one block"
        );
        assert!(
            (1..=COPY_SLOTS).contains(&self.copy_offsets_bytes.len()),
            "invariant: 1..=4 copies"
        );
        assert!(
            copy_index < self.copy_offsets_bytes.len(),
            "invariant: copy index in range"
        );
        assert!(
            self.copy_offsets_bytes.windows(2).all(|w| w[0] < w[1]),
            "invariant: copy offsets increasing"
        );
        assert!(self.generation > 0, "invariant: generations start at 1");
        assert!(self.label.as_str().len() <= LABEL_LEN_MAX);

        let mut raw = RawDiskHeader::new_zeroed();
        raw.magic = MAGIC;
        raw.block_type = BLOCK_TYPE_DISK_HEADER.into();
        raw.format_version = FORMAT_VERSION.into();
        let compat = if self.former_group.is_some() {
            self.features.compat | HEADER_COMPAT_FORMER
        } else {
            self.features.compat & !HEADER_COMPAT_FORMER
        };
        raw.features_compat = compat.into();
        raw.features_ro_compat = self.features.ro_compat.into();
        raw.features_incompat = self.features.incompat.into();
        raw.self_offset_bytes = self.copy_offsets_bytes[copy_index].into();
        raw.generation = self.generation.into();
        raw.copy_index = u8::try_from(copy_index).expect("invariant: copy index below 4");
        raw.copy_count =
            u8::try_from(self.copy_offsets_bytes.len()).expect("invariant: at most 4 copies");
        for (slot, offset) in raw
            .copy_offsets_bytes
            .iter_mut()
            .zip(&self.copy_offsets_bytes)
        {
            *slot = (*offset).into();
        }
        raw.disk_uuid = *self.disk_uuid.as_bytes();
        raw.group_uuid = self.group_uuid.map(|u| *u.as_bytes()).unwrap_or_default();
        raw.label[..self.label.as_str().len()].copy_from_slice(self.label.as_str().as_bytes());
        raw.logical_sector_bytes = self.logical_sector_bytes.into();
        raw.physical_sector_bytes = self.physical_sector_bytes.into();
        raw.device_size_bytes = self.device_size_bytes.into();
        raw.created_unix_seconds = self.created_unix_seconds.into();
        raw.written_unix_seconds = self.written_unix_seconds.into();
        raw.former_group_uuid = self.former_group.map(|u| *u.as_bytes()).unwrap_or_default();
        out.copy_from_slice(raw.as_bytes());
        let checksum = checksum_of(out);
        out[offset_of!(RawDiskHeader, checksum)..CHECKSUM_FROM_BYTE]
            .copy_from_slice(&checksum.to_le_bytes());
    }

    /// Encode copy `copy_index` into a new block.
    pub fn encode(&self, copy_index: usize) -> Vec<u8> {
        let mut block = vec![0; BLOCK_BYTES];
        self.encode_into(copy_index, &mut block);
        block
    }
}

fn decode_label(field: &[u8; 32]) -> Result<DiskLabel, HeaderError> {
    let end = field.iter().position(|b| *b == 0).unwrap_or(field.len());
    if field[end..].iter().any(|b| *b != 0) {
        return Err(invalid("label", "bytes after the terminating NUL"));
    }
    let text = std::str::from_utf8(&field[..end]).map_err(|_| invalid("label", "not ASCII"))?;
    let label = DiskLabel::parse(text).map_err(|e| invalid("label", e.to_string()))?;
    if label.as_str() != text {
        return Err(invalid("label", "not upper case"));
    }
    Ok(label)
}

/// One field of a header block, rendered for a person (`cairn disk inspect`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldView {
    pub name: String,
    pub offset: usize,
    pub size: usize,
    /// The value as stored, interpreted (numbers in decimal, times as RFC 3339).
    pub value: String,
    pub meaning: &'static str,
}

#[derive(Clone, Copy)]
enum Render {
    Ascii,
    Hex,
    Unsigned,
    Uuid,
    Time,
    ReservedTail,
}

struct FieldSpec {
    name: &'static str,
    offset: usize,
    size: usize,
    render: Render,
    meaning: &'static str,
}

macro_rules! field {
    ($field:ident, $size:expr, $render:ident, $meaning:expr) => {
        FieldSpec {
            name: stringify!($field),
            offset: offset_of!(RawDiskHeader, $field),
            size: $size,
            render: Render::$render,
            meaning: $meaning,
        }
    };
}

const FIELD_SPECS: &[FieldSpec] = &[
    field!(
        magic,
        8,
        Ascii,
        "identifies a Cairn disk header (\"CAIRNDSK\")"
    ),
    field!(checksum, 4, Hex, "crc32c of bytes 0x00c..0x1000"),
    field!(
        block_type,
        2,
        Unsigned,
        "metadata block type; 1 = disk header"
    ),
    field!(format_version, 2, Unsigned, "on-disk format version"),
    field!(
        features_compat,
        8,
        Hex,
        "compatible feature bits (older Cairn may mount)"
    ),
    field!(
        features_ro_compat,
        8,
        Hex,
        "read-only-compatible feature bits (older Cairn may only read)"
    ),
    field!(
        features_incompat,
        8,
        Hex,
        "incompatible feature bits (older Cairn must refuse)"
    ),
    field!(
        self_offset_bytes,
        8,
        Unsigned,
        "byte offset this copy was written to (catches misdirected writes)"
    ),
    field!(
        generation,
        8,
        Unsigned,
        "bumped on every rewrite; the newest good copy wins"
    ),
    field!(copy_index, 1, Unsigned, "which copy this is (0 = primary)"),
    field!(copy_count, 1, Unsigned, "number of copies on the device"),
    field!(reserved0, 6, Hex, "reserved, zero"),
    FieldSpec {
        name: "copy_offsets_bytes[0]",
        offset: offset_of!(RawDiskHeader, copy_offsets_bytes),
        size: 8,
        render: Render::Unsigned,
        meaning: "byte offset of copy 0",
    },
    FieldSpec {
        name: "copy_offsets_bytes[1]",
        offset: offset_of!(RawDiskHeader, copy_offsets_bytes) + 8,
        size: 8,
        render: Render::Unsigned,
        meaning: "byte offset of copy 1",
    },
    FieldSpec {
        name: "copy_offsets_bytes[2]",
        offset: offset_of!(RawDiskHeader, copy_offsets_bytes) + 16,
        size: 8,
        render: Render::Unsigned,
        meaning: "byte offset of copy 2 (near the end of the device)",
    },
    FieldSpec {
        name: "copy_offsets_bytes[3]",
        offset: offset_of!(RawDiskHeader, copy_offsets_bytes) + 24,
        size: 8,
        render: Render::Unsigned,
        meaning: "byte offset of copy 3 (unused in version 1)",
    },
    field!(
        disk_uuid,
        16,
        Uuid,
        "the disk's identity, whatever path it appears at"
    ),
    field!(
        group_uuid,
        16,
        Uuid,
        "disk group this disk belongs to (nil = none)"
    ),
    field!(
        label,
        32,
        Ascii,
        "the disk's label (upper case, NUL padded)"
    ),
    field!(
        logical_sector_bytes,
        4,
        Unsigned,
        "logical sector size when labelled"
    ),
    field!(
        physical_sector_bytes,
        4,
        Unsigned,
        "physical sector size when labelled"
    ),
    field!(
        device_size_bytes,
        8,
        Unsigned,
        "device size when this generation was written"
    ),
    field!(created_unix_seconds, 8, Time, "when the disk was labelled"),
    field!(
        written_unix_seconds,
        8,
        Time,
        "when this generation was written"
    ),
    field!(
        former_group_uuid,
        16,
        Uuid,
        "the group this disk was dropped from (FORMER), or zero"
    ),
    field!(
        reserved_tail,
        BLOCK_BYTES - 0xD0,
        ReservedTail,
        "reserved for later fields, zero"
    ),
];

fn le_unsigned(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
}

/// Every field of a header block with its offset, value and meaning, read from the
/// raw bytes whether or not the block is valid (a damaged copy is worth seeing).
/// Returns nothing for a block of the wrong length.
pub fn describe(block: &[u8]) -> Vec<FieldView> {
    if block.len() != BLOCK_BYTES {
        return Vec::new();
    }
    FIELD_SPECS
        .iter()
        .map(|spec| {
            let bytes = &block[spec.offset..spec.offset + spec.size];
            let value = match spec.render {
                Render::Ascii => {
                    let text: String = bytes
                        .iter()
                        .take_while(|b| **b != 0)
                        .map(|b| {
                            if b.is_ascii_graphic() {
                                *b as char
                            } else {
                                '.'
                            }
                        })
                        .collect();
                    format!("\"{text}\"")
                }
                Render::Hex => format!(
                    "{:#0width$x}",
                    le_unsigned(bytes),
                    width = 2 + 2 * spec.size
                ),
                Render::Unsigned => le_unsigned(bytes).to_string(),
                Render::Uuid => {
                    let mut id = [0u8; 16];
                    id.copy_from_slice(bytes);
                    Uuid::from_bytes(id).to_string()
                }
                Render::Time => {
                    let seconds = le_unsigned(bytes);
                    match UNIX_EPOCH.checked_add(Duration::from_secs(seconds)) {
                        Some(t) if seconds < 253_402_300_800 => {
                            format!("{seconds} ({})", humantime::format_rfc3339_seconds(t))
                        }
                        _ => format!("{seconds} (out of range)"),
                    }
                }
                Render::ReservedTail => match bytes.iter().filter(|b| **b != 0).count() {
                    0 => "all zero".to_string(),
                    n => format!("{n} non-zero bytes"),
                },
            };
            FieldView {
                name: spec.name.to_string(),
                offset: spec.offset,
                size: spec.size,
                value,
                meaning: spec.meaning,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::HeaderPlacement;
    use proptest::prelude::*;

    fn sample() -> DiskHeader {
        let size = 64 << 20;
        DiskHeader {
            label: DiskLabel::parse("DATA1").unwrap(),
            disk_uuid: Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677),
            group_uuid: None,
            former_group: None,
            logical_sector_bytes: 4096,
            physical_sector_bytes: 4096,
            device_size_bytes: size,
            created_unix_seconds: 1_763_700_000,
            written_unix_seconds: 1_763_700_000,
            generation: 1,
            features: FeatureSet::default(),
            copy_offsets_bytes: HeaderPlacement::for_device(size)
                .unwrap()
                .offsets_bytes
                .to_vec(),
        }
    }

    #[test]
    fn round_trip_every_copy() {
        let header = sample();
        for copy in 0..3 {
            let block = header.encode(copy);
            let decoded = DiskHeader::decode(&block).unwrap();
            assert_eq!(decoded.header, header);
            assert_eq!(usize::from(decoded.copy_index), copy);
            assert_eq!(decoded.self_offset_bytes, header.copy_offsets_bytes[copy]);
        }
    }

    #[test]
    fn golden_fixture_matches_the_format_document() {
        // tests/fixtures/disk_header_v1.hex is quoted in docs/on_disk_format.md.
        let fixture = include_str!("../../../tests/fixtures/disk_header_v1.hex");
        let bytes: Vec<u8> = fixture
            .lines()
            .filter(|l| !l.starts_with('#'))
            .flat_map(|l| l.split_whitespace().skip(1))
            .map(|h| u8::from_str_radix(h, 16).unwrap())
            .collect();
        let mut expected = vec![0u8; BLOCK_BYTES];
        expected[..bytes.len()].copy_from_slice(&bytes);
        assert_eq!(
            sample().encode(0),
            expected,
            "format drifted from the fixture"
        );
    }

    #[test]
    fn specific_damage_is_named() {
        assert_eq!(
            DiskHeader::decode(&[0; BLOCK_BYTES]),
            Err(HeaderError::Blank)
        );
        assert_eq!(
            DiskHeader::decode(&[0; 512]),
            Err(HeaderError::WrongLength { len_bytes: 512 })
        );
        let mut block = sample().encode(0);
        block[0] = b'X';
        assert!(matches!(
            DiskHeader::decode(&block),
            Err(HeaderError::NotCairn { .. })
        ));
        let mut block = sample().encode(0);
        block[0x100] ^= 1;
        assert!(matches!(
            DiskHeader::decode(&block),
            Err(HeaderError::Checksum { .. })
        ));
    }

    fn reseal(block: &mut [u8]) {
        let checksum = checksum_of(block);
        block[8..12].copy_from_slice(&checksum.to_le_bytes());
    }

    #[test]
    fn newer_formats_and_features_are_refused() {
        let mut block = sample().encode(0);
        block[0x0E] = 2;
        reseal(&mut block);
        assert_eq!(
            DiskHeader::decode(&block),
            Err(HeaderError::UnsupportedVersion { found: 2 })
        );
        let mut block = sample().encode(0);
        block[0x20] = 0x01;
        reseal(&mut block);
        assert_eq!(
            DiskHeader::decode(&block),
            Err(HeaderError::IncompatibleFeatures { bits: 1 })
        );
        let mut block = sample().encode(0);
        block[0x18] = 0x04;
        reseal(&mut block);
        let decoded = DiskHeader::decode(&block).unwrap();
        assert!(!decoded.header.features.rewritable());
    }

    /// Found by the fuzzer: a checksum-valid block with bytes in the reserved
    /// tail and no feature bit that could explain them was accepted.
    #[test]
    fn a_reserved_tail_in_use_needs_a_feature_bit_that_explains_it() {
        let mut block = sample().encode(0);
        block[819] = 0xFA;
        reseal(&mut block);
        assert!(matches!(
            DiskHeader::decode(&block),
            Err(HeaderError::Invalid {
                field: "reserved_tail",
                ..
            })
        ));
        // A newer Cairn that uses the tail sets a feature bit; then the tail is
        // its business, and this Cairn will read but not rewrite the header.
        block[0x10] = 0x02;
        reseal(&mut block);
        let decoded = DiskHeader::decode(&block).unwrap();
        assert!(!decoded.header.features.rewritable());
    }

    #[test]
    fn a_copy_read_from_the_wrong_place_says_so() {
        let mut block = sample().encode(1);
        block[0x038] = 0; // claims to be copy 0 but records copy 1's offset
        reseal(&mut block);
        assert!(matches!(
            DiskHeader::decode(&block),
            Err(HeaderError::Invalid {
                field: "self_offset_bytes",
                ..
            })
        ));
    }

    #[test]
    fn describe_lists_every_byte_once() {
        let views = describe(&sample().encode(2));
        let mut next = 0;
        for v in &views {
            assert_eq!(v.offset, next, "gap or overlap before {}", v.name);
            next = v.offset + v.size;
        }
        assert_eq!(next, BLOCK_BYTES);
        let label = views.iter().find(|v| v.name == "label").unwrap();
        assert_eq!(label.value, "\"DATA1\"");
        let self_offset = views
            .iter()
            .find(|v| v.name == "self_offset_bytes")
            .unwrap();
        assert_eq!(self_offset.value, (63u64 << 20).to_string());
    }

    fn arb_header() -> impl Strategy<Value = DiskHeader> {
        (
            "[A-Z][A-Z0-9_]{0,29}",
            any::<u128>().prop_filter("non-nil", |u| *u != 0),
            proptest::option::of(any::<u128>().prop_filter("non-nil", |u| *u != 0)),
            prop::sample::select(vec![512u32, 4096]),
            0u32..4,
            (DEVICE_SIZE_MIN_BYTES..1u64 << 50),
            any::<u64>(),
            1u64..u64::MAX,
            any::<u64>(),
            proptest::option::of(1u128..),
        )
            .prop_map(
                |(
                    label,
                    disk,
                    group,
                    logical,
                    shift,
                    size,
                    created,
                    generation,
                    compat,
                    former,
                )| {
                    DiskHeader {
                        label: DiskLabel::parse(&label).unwrap(),
                        disk_uuid: Uuid::from_u128(disk),
                        group_uuid: group.map(Uuid::from_u128),
                        former_group: former.map(Uuid::from_u128),
                        logical_sector_bytes: logical,
                        physical_sector_bytes: (logical << shift).max(4096),
                        device_size_bytes: size,
                        created_unix_seconds: created,
                        written_unix_seconds: created.wrapping_add(1),
                        generation,
                        features: FeatureSet {
                            // The FORMER bit says whether the field is set.
                            compat: (compat & !HEADER_COMPAT_FORMER)
                                | (u64::from(former.is_some()) * HEADER_COMPAT_FORMER),
                            ro_compat: 0,
                            incompat: 0,
                        },
                        copy_offsets_bytes: HeaderPlacement::for_device(size)
                            .unwrap()
                            .offsets_bytes
                            .to_vec(),
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn prop_round_trip(header in arb_header(), copy in 0usize..3) {
            let block = header.encode(copy);
            let decoded = DiskHeader::decode(&block).unwrap();
            prop_assert_eq!(decoded.header, header);
            prop_assert_eq!(usize::from(decoded.copy_index), copy);
        }

        #[test]
        fn prop_arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..5000)) {
            let _ = DiskHeader::decode(&bytes);
            let _ = describe(&bytes);
        }

        #[test]
        fn prop_arbitrary_block_with_magic_never_panics(mut bytes in prop::collection::vec(any::<u8>(), BLOCK_BYTES), seal in any::<bool>()) {
            bytes[..8].copy_from_slice(&MAGIC);
            if seal {
                reseal(&mut bytes);
            }
            let _ = DiskHeader::decode(&bytes);
        }
    }

    /// Every single-byte corruption of a valid copy is detected: each of the 4096
    /// positions of each copy, with the byte replaced by every other value.
    #[test]
    fn every_single_byte_corruption_is_detected() {
        let header = sample();
        for copy in 0..3 {
            let good = header.encode(copy);
            for position in 0..BLOCK_BYTES {
                for flip in 1..=255u8 {
                    let mut bad = good.clone();
                    bad[position] ^= flip;
                    assert!(
                        DiskHeader::decode(&bad).is_err(),
                        "copy {copy}: byte {position:#x} ^ {flip:#x} went unnoticed"
                    );
                }
            }
        }
    }
}
