//! The alias directory (file 4): every name in the group's namespace, as
//! fixed records whose position gives their id.

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::group::fields::{cast, cast_mut, get_name, put_name};
use crate::group::posix_attrs::{DirAttrs, DIR_ATTRS_PRESENT, MODE_BITS};
use crate::meta::{invalid, payload, payload_mut, Block, MetaError, PAYLOAD_BYTES};

pub const ALIAS_NAME_LEN_MAX: usize = 96;
pub const ALIASES_PER_BLOCK: usize = PAYLOAD_BYTES / 128;

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawAlias {
    pub parent: U32,
    pub kind: u8,
    pub name_len: u8,
    /// A directory's permission bits, with `DIR_ATTRS_PRESENT` (0x8000)
    /// when its attributes are there; zero otherwise.
    pub mode: U16,
    pub file_number: U32,
    pub file_incarnation: U32,
    pub created_unix_seconds: U64,
    pub name: [u8; ALIAS_NAME_LEN_MAX],
    /// A directory's owner, when `mode` says its attributes are there.
    pub uid: U32,
    pub gid: U32,
}
const _: () = assert!(size_of::<RawAlias>() == 128);

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct RawAliasBlock {
    pub records: [RawAlias; ALIASES_PER_BLOCK],
    pub reserved_tail: [u8; PAYLOAD_BYTES - ALIASES_PER_BLOCK * 128],
}

/// What a name in the alias directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AliasKind {
    Directory,
    /// The name a file was created with; removing it deletes the file.
    File,
    /// Another name for a file (`mkalias`).
    Alias,
}

impl AliasKind {
    pub(super) fn code(self) -> u8 {
        match self {
            Self::Directory => 1,
            Self::File => 2,
            Self::Alias => 3,
        }
    }
    fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => Self::Directory,
            2 => Self::File,
            3 => Self::Alias,
            _ => return None,
        })
    }
}

/// One name. Its id is its record position + 1; id 0 is the root directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasRecord {
    pub id: u32,
    pub parent: u32,
    pub kind: AliasKind,
    pub name: String,
    pub file_number: u32,
    pub file_incarnation: u32,
    pub created_unix_seconds: u64,
    /// A directory's attributes (`None`: never set, or not a directory).
    pub dir_attrs: Option<DirAttrs>,
}

/// Encode alias block `index` from the records whose ids fall in it.
pub fn encode_alias_block(block: &mut Block, index: u64, records: &[&AliasRecord]) {
    let raw: &mut RawAliasBlock = cast_mut(payload_mut(block));
    raw.zero();
    let first = index * ALIASES_PER_BLOCK as u64 + 1;
    for r in records {
        let slot = u64::from(r.id)
            .checked_sub(first)
            .filter(|s| *s < ALIASES_PER_BLOCK as u64)
            .expect("invariant: alias record belongs to this block") as usize;
        assert!(r.name.len() <= ALIAS_NAME_LEN_MAX, "invariant: name fits");
        let out = &mut raw.records[slot];
        out.parent = U32::new(r.parent);
        out.kind = r.kind.code();
        out.name_len = r.name.len() as u8;
        out.file_number = U32::new(r.file_number);
        out.file_incarnation = U32::new(r.file_incarnation);
        out.created_unix_seconds = U64::new(r.created_unix_seconds);
        put_name(&mut out.name, &r.name);
        if let Some(a) = r.dir_attrs.filter(|_| r.kind == AliasKind::Directory) {
            out.mode = U16::new(DIR_ATTRS_PRESENT | (a.mode & MODE_BITS as u16));
            out.uid = U32::new(a.uid);
            out.gid = U32::new(a.gid);
        }
    }
}

pub fn decode_alias_block(block: &[u8], index: u64) -> Result<Vec<AliasRecord>, MetaError> {
    let raw: &RawAliasBlock = cast(payload(block));
    let mut out = Vec::new();
    for (slot, r) in raw.records.iter().enumerate() {
        if r.as_bytes().iter().all(|b| *b == 0) {
            continue;
        }
        let kind = AliasKind::from_code(r.kind)
            .ok_or_else(|| invalid("alias.kind", format!("{}", r.kind)))?;
        let name = get_name(&r.name, "alias.name")?;
        if name.is_empty() || name.len() != usize::from(r.name_len) {
            return Err(invalid("alias.name", "length does not match"));
        }
        let id = index * ALIASES_PER_BLOCK as u64 + slot as u64 + 1;
        let mode = r.mode.get();
        let dir_attrs = if mode & DIR_ATTRS_PRESENT != 0 {
            if kind != AliasKind::Directory
                || u32::from(mode & !DIR_ATTRS_PRESENT) & !MODE_BITS != 0
            {
                return Err(invalid("alias.mode", format!("{mode:#o}")));
            }
            Some(DirAttrs {
                mode: mode & !DIR_ATTRS_PRESENT,
                uid: r.uid.get(),
                gid: r.gid.get(),
            })
        } else if mode != 0 || r.uid.get() != 0 || r.gid.get() != 0 {
            return Err(invalid("alias.mode", "owner set without the present flag"));
        } else {
            None
        };
        out.push(AliasRecord {
            id: u32::try_from(id).map_err(|_| invalid("alias.id", "beyond u32"))?,
            parent: r.parent.get(),
            kind,
            name,
            file_number: r.file_number.get(),
            file_incarnation: r.file_incarnation.get(),
            created_unix_seconds: r.created_unix_seconds.get(),
            dir_attrs,
        });
    }
    Ok(out)
}
