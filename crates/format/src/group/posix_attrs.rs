//! POSIX attributes of files (in a file entry's once-reserved bytes) and of
//! directories (in a name record's), under
//! [`GROUP_RO_COMPAT_FILE_ATTRS`](super::GROUP_RO_COMPAT_FILE_ATTRS).

use zerocopy::little_endian::{I64, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::meta::{invalid, MetaError};

/// A file's POSIX attributes, in what were the entry's 40 reserved bytes.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawFileAttrs {
    pub mode: U32,
    pub uid: U32,
    pub gid: U32,
    /// [`FILE_ATTRS_PRESENT`]; no other bit is defined.
    pub flags: U32,
    pub mtime_ns: I64,
    pub ctime_ns: I64,
    pub byte_size: U64,
}
const _: () = assert!(size_of::<RawFileAttrs>() == 40);

/// In [`RawFileAttrs::flags`]: the attributes are there.
pub const FILE_ATTRS_PRESENT: u32 = 1;
/// Permission bits a file or directory may carry (setuid, setgid, sticky,
/// and rwx for owner, group, others).
pub const MODE_BITS: u32 = 0o7777;

/// A file's POSIX attributes: what `stat` says of it through the file
/// system. The byte size is the file's length in bytes; the entry's
/// `size_bytes` stays whole sectors (what the data path reads and writes),
/// at least `byte_size` and less than a sector more. atime is not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileAttrs {
    /// Permission bits ([`MODE_BITS`]).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub byte_size: u64,
}

impl FileAttrs {
    /// What a file that has none shows: 0644, owned by root, its byte size
    /// its sectors, both times its modification time.
    pub fn default_for(size_bytes: u64, modified_unix_seconds: u64) -> Self {
        let ns = i64::try_from(modified_unix_seconds)
            .unwrap_or(i64::MAX)
            .saturating_mul(1_000_000_000);
        Self {
            mode: 0o644,
            uid: 0,
            gid: 0,
            mtime_ns: ns,
            ctime_ns: ns,
            byte_size: size_bytes,
        }
    }

    pub(super) fn encode(attrs: Option<&Self>) -> RawFileAttrs {
        let mut raw = RawFileAttrs::new_zeroed();
        if let Some(a) = attrs {
            raw.mode = U32::new(a.mode);
            raw.uid = U32::new(a.uid);
            raw.gid = U32::new(a.gid);
            raw.flags = U32::new(FILE_ATTRS_PRESENT);
            raw.mtime_ns = I64::new(a.mtime_ns);
            raw.ctime_ns = I64::new(a.ctime_ns);
            raw.byte_size = U64::new(a.byte_size);
        }
        raw
    }

    pub(super) fn decode(raw: &RawFileAttrs, size_bytes: u64) -> Result<Option<Self>, MetaError> {
        let flags = raw.flags.get();
        if flags & !FILE_ATTRS_PRESENT != 0 {
            return Err(invalid("attrs.flags", format!("{flags:#x}")));
        }
        if flags & FILE_ATTRS_PRESENT == 0 {
            if raw.as_bytes().iter().any(|b| *b != 0) {
                return Err(invalid("attrs", "set without the present flag"));
            }
            return Ok(None);
        }
        let mode = raw.mode.get();
        if mode & !MODE_BITS != 0 {
            return Err(invalid("attrs.mode", format!("{mode:#o}")));
        }
        let byte_size = raw.byte_size.get();
        if byte_size > size_bytes {
            return Err(invalid(
                "attrs.byte_size",
                format!("{byte_size}, past the file's {size_bytes} bytes"),
            ));
        }
        Ok(Some(Self {
            mode,
            uid: raw.uid.get(),
            gid: raw.gid.get(),
            mtime_ns: raw.mtime_ns.get(),
            ctime_ns: raw.ctime_ns.get(),
            byte_size,
        }))
    }
}

/// A directory's POSIX attributes, in its name record's reserved bytes
/// (under [`GROUP_RO_COMPAT_FILE_ATTRS`](super::GROUP_RO_COMPAT_FILE_ATTRS)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DirAttrs {
    /// Permission bits ([`MODE_BITS`]).
    pub mode: u16,
    pub uid: u32,
    pub gid: u32,
}

impl Default for DirAttrs {
    /// What a directory that has none shows: 0755, owned by root.
    fn default() -> Self {
        Self {
            mode: 0o755,
            uid: 0,
            gid: 0,
        }
    }
}

/// In a name record's `mode`: the directory attributes are there.
pub(super) const DIR_ATTRS_PRESENT: u16 = 0x8000;
