//! Extents: where a file's data or metadata lies, as up to three copies of
//! a run of AUs, each copy with its stale-AU bits; and the 32-byte record
//! that stores one. An all-zero record is no extent.

use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::meta::{invalid, MetaError};

/// Most copies of an extent (high redundancy).
pub const COPIES_MAX: usize = 3;
/// A copy slot with this disk number is empty.
pub const NO_DISK: u16 = u16::MAX;

/// One copy of an extent, on disk: AU index and disk number.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawCopy {
    pub au: U32,
    pub disk: U16,
    /// Stale AUs of this copy (bit i: the extent's AU i); see [`Extent::stale`].
    pub stale: U16,
}

/// One extent record, 32 bytes: flags and up to three copies.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawExtent {
    pub flags: U32,
    pub reserved: U32,
    pub copies: [RawCopy; COPIES_MAX],
}
const _: () = assert!(size_of::<RawExtent>() == 32);

/// The extent's AUs have been written or zeroed: reads must go to the disk.
/// Until then the extent reads as zeros without I/O, whatever its AUs hold, so a
/// file never shows an earlier file's data.
pub const EXTENT_INITIALIZED: u32 = 1;
const EXTENT_FLAGS_KNOWN: u32 = EXTENT_INITIALIZED;

/// Where one copy of an extent lives: the first of its AUs on a disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AuAddr {
    pub disk: u16,
    pub au: u32,
}

/// An extent: up to three copies, primary first. Copies after `count` are unused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub copies: [AuAddr; COPIES_MAX],
    pub count: u8,
    pub initialized: bool,
    /// Per copy, which of its AUs are stale (bit i: the extent's AU i): the copy
    /// missed a write while its disk was offline, or a write to it failed. A stale
    /// AU is never read; resync copies it from a good copy and clears the bit. Kept
    /// in each copy's `RawCopy::stale` (an extent has at most 16 AUs), under
    /// [`GROUP_INCOMPAT_STALE_COPIES`](super::GROUP_INCOMPAT_STALE_COPIES).
    pub stale: [u16; COPIES_MAX],
}

impl Extent {
    pub fn new(copies: &[AuAddr], initialized: bool) -> Self {
        assert!(
            (1..=COPIES_MAX).contains(&copies.len()),
            "invariant: an extent has 1..=3 copies"
        );
        let mut slots = [AuAddr {
            disk: NO_DISK,
            au: 0,
        }; COPIES_MAX];
        slots[..copies.len()].copy_from_slice(copies);
        Self {
            copies: slots,
            count: copies.len() as u8,
            initialized,
            stale: [0; COPIES_MAX],
        }
    }

    /// The copies in use, primary first.
    pub fn copies(&self) -> &[AuAddr] {
        &self.copies[..usize::from(self.count)]
    }

    /// Whether copy `slot` has a stale AU among the extent's AUs `aus`
    /// (AU indices inside the extent).
    pub fn stale_in(&self, slot: usize, aus: std::ops::Range<u64>) -> bool {
        self.stale.get(slot).is_some_and(|m| *m & au_mask(aus) != 0)
    }

    /// Whether any copy has a stale AU.
    pub fn any_stale(&self) -> bool {
        self.stale[..usize::from(self.count)]
            .iter()
            .any(|m| *m != 0)
    }

    /// Copy `slot`'s stale mask, limited to the extent's `aus` AUs (bits
    /// past them mean nothing).
    pub fn stale_mask(&self, slot: usize, aus: u64) -> u16 {
        self.stale.get(slot).map_or(0, |m| m & au_mask(0..aus))
    }
}

/// The stale-mask bits of an extent's AUs `aus` (AU indices inside the
/// extent, below 16).
pub fn au_mask(aus: std::ops::Range<u64>) -> u16 {
    let lo = aus.start.min(16);
    let hi = aus.end.min(16);
    if hi <= lo {
        return 0;
    }
    let bits = hi - lo;
    let ones: u32 = if bits >= 16 {
        0xFFFF
    } else {
        (1u32 << bits) - 1
    };
    ((ones << lo) & 0xFFFF) as u16
}

impl Extent {
    pub(super) fn encode(&self) -> RawExtent {
        let mut raw = RawExtent::new_zeroed();
        raw.flags = U32::new(if self.initialized {
            EXTENT_INITIALIZED
        } else {
            0
        });
        for (slot, copy) in raw.copies.iter_mut().enumerate() {
            let addr = self
                .copies
                .get(slot)
                .filter(|_| slot < usize::from(self.count));
            match addr {
                Some(a) => {
                    copy.au = U32::new(a.au);
                    copy.disk = U16::new(a.disk);
                    copy.stale = U16::new(self.stale[slot]);
                }
                None => copy.disk = U16::new(NO_DISK),
            }
        }
        raw
    }

    /// `None` for an all-zero record (no extent).
    pub(super) fn decode(raw: &RawExtent) -> Result<Option<Self>, MetaError> {
        if raw.as_bytes().iter().all(|b| *b == 0) {
            return Ok(None);
        }
        let flags = raw.flags.get();
        if flags & !EXTENT_FLAGS_KNOWN != 0 || raw.reserved.get() != 0 {
            return Err(invalid("extent.flags", format!("unknown bits {flags:#x}")));
        }
        let mut copies = Vec::with_capacity(COPIES_MAX);
        let mut stale = [0u16; COPIES_MAX];
        let mut ended = false;
        for copy in &raw.copies {
            let disk = copy.disk.get();
            if disk == NO_DISK {
                ended = true;
                if copy.stale.get() != 0 {
                    return Err(invalid("extent.copies", "stale bits on an empty slot"));
                }
                continue;
            }
            if ended {
                return Err(invalid("extent.copies", "a copy after an empty slot"));
            }
            if copy.au.get() == 0 {
                return Err(invalid("extent.copies", "AU 0 is reserved"));
            }
            stale[copies.len()] = copy.stale.get();
            copies.push(AuAddr {
                disk,
                au: copy.au.get(),
            });
        }
        if copies.is_empty() {
            return Err(invalid("extent.copies", "no copy"));
        }
        let mut extent = Self::new(&copies, flags & EXTENT_INITIALIZED != 0);
        extent.stale = stale;
        Ok(Some(extent))
    }
}

pub(super) fn encode_extents(out: &mut [RawExtent], extents: &[Extent]) {
    assert!(out.len() >= extents.len(), "invariant: extents fit");
    for (slot, extent) in out.iter_mut().zip(extents) {
        *slot = extent.encode();
    }
}

/// Decode a prefix of `count` present extents; the rest must be zero.
pub(super) fn decode_extents(
    raw: &[RawExtent],
    count: usize,
    field: &'static str,
) -> Result<Vec<Extent>, MetaError> {
    if count > raw.len() {
        return Err(invalid(
            field,
            format!("{count} extents, room for {}", raw.len()),
        ));
    }
    let mut out = Vec::with_capacity(count);
    for (i, r) in raw.iter().enumerate() {
        match (Extent::decode(r)?, i < count) {
            (Some(e), true) => out.push(e),
            (None, false) => {}
            (None, true) => return Err(invalid(field, format!("extent {i} missing"))),
            (Some(_), false) => return Err(invalid(field, format!("extent {i} beyond the count"))),
        }
    }
    Ok(out)
}
