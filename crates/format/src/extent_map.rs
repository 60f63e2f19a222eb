//! How a file's logical bytes map onto its extents: part of the on-disk
//! contract, beside the byte layouts. An extent map names AU runs; these
//! rules say how big each extent is and which logical bytes each holds, so a
//! reader that got them wrong would read the wrong bytes from a healthy map.
//! `tests/extent_map_fixture.rs` pins them against a fixture.
//!
//! - Extent sizes: extents grow with their index (1, then 4, then 16 AUs —
//!   [`extent_aus`]) so a huge file keeps a small extent map.
//! - The layout ([`FileLayout`]): coarse striping puts extent after extent;
//!   fine striping deals 128 KiB stripe units round-robin over sets of 8
//!   extents, so one sequential stream reaches 8 disks.
//!
//! Pure functions; no I/O. A fine stripe set never mixes extent sizes: the
//! tier boundaries are multiples of 8 (a compile-time assertion).

use crate::group::{AU_BYTES_MAX, AU_BYTES_MIN, STRIPING_COARSE, STRIPING_FINE};

// ---------------------------------------------------------------------------
// Extent sizes

/// Variable extent sizes: extents `0..20_000` are 1 AU, `20_000..40_000` are
/// 4 AUs, `40_000..` are 16 AUs. A file's first extents stay small so small
/// files waste little; a 16 TiB file still needs far fewer than a million
/// extents with 1 MiB AUs.
pub const EXTENT_TIER1_FROM: u64 = 20_000;
/// First extent of 16 AUs; see [`EXTENT_TIER1_FROM`].
pub const EXTENT_TIER2_FROM: u64 = 40_000;
const TIER0_AUS: u64 = 1;
const TIER1_AUS: u64 = 4;
const TIER2_AUS: u64 = 16;
/// AUs in all extents of the first and of the second tier.
const TIER0_SPAN_AUS: u64 = EXTENT_TIER1_FROM * TIER0_AUS;
const TIER1_SPAN_AUS: u64 = (EXTENT_TIER2_FROM - EXTENT_TIER1_FROM) * TIER1_AUS;

/// AUs in extent `extent_index` (1, 4 or 16), for every copy.
pub fn extent_aus(extent_index: u64) -> u64 {
    if extent_index < EXTENT_TIER1_FROM {
        TIER0_AUS
    } else if extent_index < EXTENT_TIER2_FROM {
        TIER1_AUS
    } else {
        TIER2_AUS
    }
}

/// AUs in extents `0..extent_index`: where extent `extent_index` starts in a
/// coarse file's AU sequence. In u128: 2^64 extents of 16 AUs exceed u64.
pub fn extent_start_aus(extent_index: u64) -> u128 {
    let tier0 = extent_index.min(EXTENT_TIER1_FROM);
    let tier1 = extent_index.clamp(EXTENT_TIER1_FROM, EXTENT_TIER2_FROM) - EXTENT_TIER1_FROM;
    let tier2 = extent_index.saturating_sub(EXTENT_TIER2_FROM);
    u128::from(tier0) * u128::from(TIER0_AUS)
        + u128::from(tier1) * u128::from(TIER1_AUS)
        + u128::from(tier2) * u128::from(TIER2_AUS)
}

/// The extent holding AU `au` of a coarse file's AU sequence (the inverse of
/// [`extent_start_aus`]).
fn extent_at_au(au: u64) -> u64 {
    if au < TIER0_SPAN_AUS {
        au / TIER0_AUS
    } else if au < TIER0_SPAN_AUS + TIER1_SPAN_AUS {
        EXTENT_TIER1_FROM + (au - TIER0_SPAN_AUS) / TIER1_AUS
    } else {
        EXTENT_TIER2_FROM + (au - TIER0_SPAN_AUS - TIER1_SPAN_AUS) / TIER2_AUS
    }
}

/// Extents needed for `aus` AUs of a coarse file: the fewest whose AUs add up
/// to at least `aus`.
fn extent_count_for_aus(aus: u64) -> u64 {
    if aus <= TIER0_SPAN_AUS {
        aus.div_ceil(TIER0_AUS)
    } else if aus <= TIER0_SPAN_AUS + TIER1_SPAN_AUS {
        EXTENT_TIER1_FROM + (aus - TIER0_SPAN_AUS).div_ceil(TIER1_AUS)
    } else {
        EXTENT_TIER2_FROM + (aus - TIER0_SPAN_AUS - TIER1_SPAN_AUS).div_ceil(TIER2_AUS)
    }
}

// ---------------------------------------------------------------------------
// Layout

/// How a file's logical bytes are spread over its extents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Striping {
    /// Extent after extent: extent `i` holds one contiguous logical range.
    Coarse,
    /// [`FINE_STRIPE_BYTES`] units dealt round-robin over sets of
    /// [`FINE_STRIPE_WIDTH`] extents: small sequential I/O reaches 8 disks.
    Fine,
}

impl Striping {
    /// The striping a template or file entry's code names (`STRIPING_*`).
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            STRIPING_COARSE => Some(Self::Coarse),
            STRIPING_FINE => Some(Self::Fine),
            _ => None,
        }
    }
    /// The code stored in templates and file entries.
    pub fn code(self) -> u8 {
        match self {
            Self::Coarse => STRIPING_COARSE,
            Self::Fine => STRIPING_FINE,
        }
    }
}

/// Fine striping's stripe unit.
pub const FINE_STRIPE_BYTES: u64 = 128 * 1024;
/// Extents per fine stripe set.
pub const FINE_STRIPE_WIDTH: u64 = 8;

// A stripe set is 8 consecutive extents of one size: the tiers start on a set.
const _: () = assert!(EXTENT_TIER1_FROM.is_multiple_of(FINE_STRIPE_WIDTH));
const _: () = assert!(EXTENT_TIER2_FROM.is_multiple_of(FINE_STRIPE_WIDTH));
// Every extent holds whole stripe units (AUs are powers of two >= the minimum).
const _: () = assert!(AU_BYTES_MIN.is_multiple_of(FINE_STRIPE_BYTES));
const _: () = assert!(AU_BYTES_MIN.is_power_of_two() && AU_BYTES_MAX.is_power_of_two());

/// How a file's logical bytes map onto its extents. Build it with
/// [`FileLayout::new`], which checks the AU size; the methods assert it too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLayout {
    /// The disk group's AU size: a power of two in 1..=64 MiB.
    pub au_bytes: u64,
    pub striping: Striping,
}

/// Where a logical byte of a file lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// Index of the extent in the file's extent map.
    pub extent: u64,
    /// Byte offset inside the extent's AU run (the same on every copy).
    pub offset_in_extent: u64,
    /// Bytes from here that stay contiguous both logically and in the AU run:
    /// to the end of the extent (coarse) or of the stripe unit (fine). >= 1.
    pub run_bytes: u64,
}

impl FileLayout {
    /// A layout for AUs of `au_bytes`.
    ///
    /// # Panics
    /// If `au_bytes` is not a power of two in 1..=64 MiB (the disk group
    /// validated its AU size when it was read; a bad one here is a bug).
    pub fn new(au_bytes: u64, striping: Striping) -> Self {
        let layout = Self { au_bytes, striping };
        layout.assert_valid();
        layout
    }

    fn assert_valid(&self) {
        assert!(
            self.au_bytes.is_power_of_two()
                && (AU_BYTES_MIN..=AU_BYTES_MAX).contains(&self.au_bytes),
            "precondition: the AU size is a power of two in 1..=64 MiB, not {} bytes",
            self.au_bytes
        );
    }

    /// Bytes of one extent with this index (`extent_aus(i) * au_bytes`).
    pub fn extent_bytes(&self, extent_index: u64) -> u64 {
        self.assert_valid();
        extent_aus(extent_index) * self.au_bytes
    }

    /// Extents needed to hold `size_bytes`: coarse, the fewest that cover it;
    /// fine, whole stripe sets of [`FINE_STRIPE_WIDTH`] extents.
    pub fn extent_count_for(&self, size_bytes: u64) -> u64 {
        self.assert_valid();
        let count = extent_count_for_aus(size_bytes.div_ceil(self.au_bytes));
        match self.striping {
            Striping::Coarse => count,
            Striping::Fine => count.next_multiple_of(FINE_STRIPE_WIDTH),
        }
    }

    /// Logical capacity of the first `extent_count` extents: the longest
    /// prefix of the file whose every byte lies in them. Coarse, their summed
    /// size. Fine, whole sets hold 8 extents' bytes; an incomplete set of `k`
    /// extents adds only its first `k` stripe units, as unit `k` would need the
    /// missing extent.
    ///
    /// # Panics
    /// If the capacity exceeds `u64::MAX` bytes (over 2^34 extents).
    pub fn capacity_bytes(&self, extent_count: u64) -> u64 {
        self.assert_valid();
        let bytes = match self.striping {
            Striping::Coarse => extent_start_aus(extent_count) * u128::from(self.au_bytes),
            Striping::Fine => {
                let partial = extent_count % FINE_STRIPE_WIDTH;
                extent_start_aus(extent_count - partial) * u128::from(self.au_bytes)
                    + u128::from(partial * FINE_STRIPE_BYTES)
            }
        };
        u64::try_from(bytes).unwrap_or_else(|_| {
            panic!("precondition: the capacity of {extent_count} extents fits in u64 bytes")
        })
    }

    /// The logical byte at `offset_in_extent` of extent `extent`: the
    /// inverse of [`FileLayout::locate`] (to name a byte found on a disk).
    pub fn logical_offset(&self, extent: u64, offset_in_extent: u64) -> u128 {
        self.assert_valid();
        let au = u128::from(self.au_bytes);
        match self.striping {
            Striping::Coarse => extent_start_aus(extent) * au + u128::from(offset_in_extent),
            Striping::Fine => {
                let set_first = extent - extent % FINE_STRIPE_WIDTH;
                let row = offset_in_extent / FINE_STRIPE_BYTES;
                let unit = row * FINE_STRIPE_WIDTH + (extent - set_first);
                extent_start_aus(set_first) * au
                    + u128::from(unit * FINE_STRIPE_BYTES + offset_in_extent % FINE_STRIPE_BYTES)
            }
        }
    }

    /// Where logical byte `offset` lives. Every offset has a place: the
    /// layout does not know the file's size.
    pub fn locate(&self, offset: u64) -> Location {
        self.assert_valid();
        // The extent and offset as if coarse; fine striping then permutes
        // stripe units within the set, whose 8 extents are all of one size.
        let extent = extent_at_au(offset / self.au_bytes);
        let start = u64::try_from(extent_start_aus(extent) * u128::from(self.au_bytes))
            .expect("invariant: the extent holding a u64 offset starts at or below it");
        let extent_bytes = self.extent_bytes(extent);
        let offset_in_extent = offset - start;
        assert!(
            offset_in_extent < extent_bytes,
            "invariant: inside its extent"
        );
        match self.striping {
            Striping::Coarse => Location {
                extent,
                offset_in_extent,
                run_bytes: extent_bytes - offset_in_extent,
            },
            Striping::Fine => {
                let set_first = extent - extent % FINE_STRIPE_WIDTH;
                let offset_in_set = (extent - set_first) * extent_bytes + offset_in_extent;
                let unit = offset_in_set / FINE_STRIPE_BYTES;
                let offset_in_unit = offset_in_set % FINE_STRIPE_BYTES;
                Location {
                    extent: set_first + unit % FINE_STRIPE_WIDTH,
                    offset_in_extent: (unit / FINE_STRIPE_WIDTH) * FINE_STRIPE_BYTES
                        + offset_in_unit,
                    run_bytes: FINE_STRIPE_BYTES - offset_in_unit,
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;

    const MIB: u64 = 1 << 20;

    // -- extent sizes -------------------------------------------------------

    #[test]
    fn extent_tiers_at_their_boundaries() {
        assert_eq!(extent_aus(0), 1);
        assert_eq!(extent_aus(19_999), 1);
        assert_eq!(extent_aus(20_000), 4);
        assert_eq!(extent_aus(39_999), 4);
        assert_eq!(extent_aus(40_000), 16);
        assert_eq!(extent_aus(u64::MAX), 16);
        assert_eq!(extent_start_aus(20_000), 20_000);
        assert_eq!(extent_start_aus(40_000), 100_000);
        assert_eq!(extent_start_aus(40_001), 100_016);
    }

    // -- layout -------------------------------------------------------------

    #[test]
    fn coarse_extent_starts_match_a_running_sum() {
        for shift in 0..=6 {
            let layout = FileLayout::new(MIB << shift, Striping::Coarse);
            let mut start = 0u64;
            for i in 0..=50_000u64 {
                assert_eq!(layout.capacity_bytes(i), start, "extent {i}");
                let here = layout.locate(start);
                assert_eq!((here.extent, here.offset_in_extent), (i, 0));
                assert_eq!(here.run_bytes, layout.extent_bytes(i));
                if i > 0 {
                    let before = layout.locate(start - 1);
                    assert_eq!(before.extent, i - 1);
                    assert_eq!(before.offset_in_extent, layout.extent_bytes(i - 1) - 1);
                    assert_eq!(before.run_bytes, 1);
                }
                start += layout.extent_bytes(i);
            }
        }
    }

    /// Every (extent, stripe unit) slot of windows of extents around the tier
    /// boundaries is hit exactly once by the logical stripe units there.
    #[test]
    fn locate_is_a_bijection_on_stripe_units() {
        let windows = [
            (0u64, 32u64),
            (19_984, 20_016),
            (39_984, 40_016),
            (1_000_000, 1_000_016),
        ];
        for shift in 0..=6 {
            for striping in [Striping::Coarse, Striping::Fine] {
                let layout = FileLayout::new(MIB << shift, striping);
                for (from, to) in windows {
                    let mut seen = HashSet::new();
                    let (start, end) = (layout.capacity_bytes(from), layout.capacity_bytes(to));
                    for offset in (start..end).step_by(FINE_STRIPE_BYTES as usize) {
                        let at = layout.locate(offset);
                        assert!((from..to).contains(&at.extent), "{layout:?} {offset}");
                        assert!(at.offset_in_extent < layout.extent_bytes(at.extent));
                        assert_eq!(at.offset_in_extent % FINE_STRIPE_BYTES, 0);
                        assert!(at.run_bytes >= FINE_STRIPE_BYTES);
                        assert!(
                            seen.insert((at.extent, at.offset_in_extent / FINE_STRIPE_BYTES)),
                            "{layout:?}: slot {at:?} hit twice"
                        );
                    }
                    let slots: u64 = (from..to)
                        .map(|i| layout.extent_bytes(i) / FINE_STRIPE_BYTES)
                        .sum();
                    assert_eq!(seen.len() as u64, slots, "{layout:?}: every slot hit");
                }
            }
        }
    }

    #[test]
    fn fine_striping_deals_units_round_robin() {
        let layout = FileLayout::new(MIB, Striping::Fine);
        let unit = FINE_STRIPE_BYTES;
        let at = |offset| {
            let l = layout.locate(offset);
            (l.extent, l.offset_in_extent, l.run_bytes)
        };
        assert_eq!(at(0), (0, 0, unit));
        assert_eq!(at(unit + 5), (1, 5, unit - 5));
        assert_eq!(at(7 * unit), (7, 0, unit));
        assert_eq!(at(8 * unit), (0, unit, unit));
        // The second set starts after 8 MiB.
        assert_eq!(at(8 * MIB + 3 * unit), (11, 0, unit));
        assert_eq!(layout.capacity_bytes(3), 3 * unit);
        assert_eq!(layout.capacity_bytes(8), 8 * MIB);
        assert_eq!(layout.extent_count_for(1), 8);
        assert_eq!(layout.extent_count_for(8 * MIB + 1), 16);
    }

    #[test]
    #[should_panic(expected = "precondition")]
    fn an_au_below_one_mib_is_refused() {
        FileLayout::new(MIB / 2, Striping::Coarse);
    }

    #[test]
    #[should_panic(expected = "precondition")]
    fn an_au_that_is_not_a_power_of_two_is_refused() {
        FileLayout::new(3 * MIB, Striping::Coarse);
    }

    #[test]
    #[should_panic(expected = "precondition")]
    fn an_au_above_64_mib_is_refused() {
        FileLayout::new(128 * MIB, Striping::Fine);
    }

    fn layout_strategy() -> impl Strategy<Value = FileLayout> {
        (
            0u32..=6,
            prop_oneof![Just(Striping::Coarse), Just(Striping::Fine)],
        )
            .prop_map(|(shift, striping)| FileLayout::new(MIB << shift, striping))
    }

    fn extent_count_strategy() -> impl Strategy<Value = u64> {
        prop_oneof![
            0u64..100,
            19_980u64..20_020,
            39_980u64..40_020,
            0u64..3_000_000
        ]
    }

    proptest! {
        #[test]
        fn logical_offset_inverts_locate(
            layout in layout_strategy(),
            count in extent_count_strategy(),
            pick in any::<u64>(),
        ) {
            let capacity = layout.capacity_bytes(count);
            prop_assume!(capacity > 0);
            let offset = pick % capacity;
            let at = layout.locate(offset);
            prop_assert_eq!(
                layout.logical_offset(at.extent, at.offset_in_extent),
                u128::from(offset)
            );
        }

        #[test]
        fn locate_stays_inside_and_runs_are_maximal(
            layout in layout_strategy(),
            count in extent_count_strategy(),
            pick in any::<u64>(),
        ) {
            let capacity = layout.capacity_bytes(count);
            prop_assume!(capacity > 0);
            let offset = pick % capacity;
            let at = layout.locate(offset);
            prop_assert!(at.extent < count);
            prop_assert!(at.offset_in_extent < layout.extent_bytes(at.extent));
            prop_assert!(at.run_bytes > 0);
            match layout.striping {
                Striping::Coarse => prop_assert_eq!(
                    at.offset_in_extent + at.run_bytes,
                    layout.extent_bytes(at.extent)
                ),
                Striping::Fine => prop_assert_eq!(
                    at.offset_in_extent % FINE_STRIPE_BYTES + at.run_bytes,
                    FINE_STRIPE_BYTES
                ),
            }
            // The run is contiguous in the extent ...
            let last = layout.locate(offset + at.run_bytes - 1);
            prop_assert_eq!(last.extent, at.extent);
            prop_assert_eq!(last.offset_in_extent, at.offset_in_extent + at.run_bytes - 1);
            prop_assert_eq!(last.run_bytes, 1);
            // ... and ends where contiguity does.
            let next = layout.locate(offset + at.run_bytes);
            prop_assert!(
                next.extent != at.extent
                    || next.offset_in_extent != at.offset_in_extent + at.run_bytes
            );
            // The capacity is tight: its first byte needs an extent beyond `count`.
            prop_assert!(layout.locate(capacity - 1).extent < count);
            prop_assert!(layout.locate(capacity).extent >= count);
        }

        #[test]
        fn extent_counts_and_capacities_agree(
            layout in layout_strategy(),
            count in extent_count_strategy(),
            size in prop_oneof![0u64..(64 * MIB), 0u64..(1 << 50)],
        ) {
            let back = layout.extent_count_for(layout.capacity_bytes(count));
            match layout.striping {
                Striping::Coarse => prop_assert_eq!(back, count),
                Striping::Fine => prop_assert_eq!(back, count.next_multiple_of(FINE_STRIPE_WIDTH)),
            }
            let needed = layout.extent_count_for(size);
            prop_assert!(layout.capacity_bytes(needed) >= size);
            // The fewest: one extent (fine: one set) less would not do.
            let step = match layout.striping {
                Striping::Coarse => 1,
                Striping::Fine => {
                    prop_assert_eq!(needed % FINE_STRIPE_WIDTH, 0);
                    FINE_STRIPE_WIDTH
                }
            };
            if needed > 0 {
                prop_assert!(layout.capacity_bytes(needed - step) < size);
            }
        }
    }
}
