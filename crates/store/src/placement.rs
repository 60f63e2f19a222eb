//! Placement and file layout: pure functions, no I/O.
//!
//! Placement chooses the disks for each copy of new extents: the copies of one
//! extent in different failure groups, and every disk filled in proportion to
//! its size (lowest fill ratio first, ties by disk number, so equal disks fill
//! round-robin). The layout maps a file's logical bytes onto its extents:
//! coarse striping (extent after extent) or fine striping (128 KiB units
//! across sets of 8 extents), with variable extent sizes (1, 4, then 16 AUs) so
//! huge files keep small maps.

/// Extents 0..20_000 are 1 AU, 20_000..40_000 are 4 AUs, from 40_000 on 16 AUs.
pub const EXTENT_TIER1_FROM: u64 = 20_000;
pub const EXTENT_TIER2_FROM: u64 = 40_000;
pub const FINE_STRIPE_BYTES: u64 = 128 * 1024;
/// Extents per fine stripe set.
pub const FINE_STRIPE_WIDTH: u64 = 8;
const _: () = assert!(
    EXTENT_TIER1_FROM.is_multiple_of(FINE_STRIPE_WIDTH)
        && EXTENT_TIER2_FROM.is_multiple_of(FINE_STRIPE_WIDTH)
);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct DiskNumber(pub u16);
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct FailGroupId(pub u16);

/// AUs in extent `extent_index`.
pub fn extent_aus(extent_index: u64) -> u64 {
    if extent_index < EXTENT_TIER1_FROM {
        1
    } else if extent_index < EXTENT_TIER2_FROM {
        4
    } else {
        16
    }
}

/// AUs in the first `count` extents.
fn aus_before(count: u64) -> u64 {
    let t0 = count.min(EXTENT_TIER1_FROM);
    let t1 = count.clamp(EXTENT_TIER1_FROM, EXTENT_TIER2_FROM) - EXTENT_TIER1_FROM;
    let t2 = count.saturating_sub(EXTENT_TIER2_FROM);
    t0 + 4 * t1 + 16 * t2
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Striping {
    Coarse,
    Fine,
}

/// How a file's logical bytes map onto its extents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLayout {
    pub au_bytes: u64,
    pub striping: Striping,
}

/// Where a logical byte lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub extent: u64,
    pub offset_in_extent: u64,
    /// Bytes contiguous from here (to the extent's end, or the stripe unit's).
    pub run_bytes: u64,
}

impl FileLayout {
    pub fn new(au_bytes: u64, striping: Striping) -> Self {
        assert!(
            au_bytes.is_power_of_two() && au_bytes >= 1 << 20,
            "invariant: AU is a power of two of at least 1 MiB"
        );
        Self { au_bytes, striping }
    }

    pub fn extent_bytes(&self, extent_index: u64) -> u64 {
        extent_aus(extent_index) * self.au_bytes
    }

    pub fn capacity_bytes(&self, extent_count: u64) -> u64 {
        let count = match self.striping {
            Striping::Coarse => extent_count,
            Striping::Fine => extent_count / FINE_STRIPE_WIDTH * FINE_STRIPE_WIDTH,
        };
        aus_before(count) * self.au_bytes
    }

    pub fn extent_count_for(&self, size_bytes: u64) -> u64 {
        let aus = size_bytes.div_ceil(self.au_bytes);
        // Invert aus_before.
        let t0 = EXTENT_TIER1_FROM;
        let t1 = EXTENT_TIER2_FROM - EXTENT_TIER1_FROM;
        let count = if aus <= t0 {
            aus
        } else if aus <= t0 + 4 * t1 {
            t0 + (aus - t0).div_ceil(4)
        } else {
            EXTENT_TIER2_FROM + (aus - t0 - 4 * t1).div_ceil(16)
        };
        match self.striping {
            Striping::Coarse => count,
            Striping::Fine => count.div_ceil(FINE_STRIPE_WIDTH) * FINE_STRIPE_WIDTH,
        }
    }

    /// The extent holding logical byte `offset` (start of the tier search).
    fn coarse_extent(&self, au: u64) -> u64 {
        let t0 = EXTENT_TIER1_FROM;
        let t1 = EXTENT_TIER2_FROM - EXTENT_TIER1_FROM;
        if au < t0 {
            au
        } else if au < t0 + 4 * t1 {
            t0 + (au - t0) / 4
        } else {
            EXTENT_TIER2_FROM + (au - t0 - 4 * t1) / 16
        }
    }

    pub fn locate(&self, offset: u64) -> Location {
        let au = offset / self.au_bytes;
        match self.striping {
            Striping::Coarse => {
                let extent = self.coarse_extent(au);
                let start = aus_before(extent) * self.au_bytes;
                let within = offset - start;
                Location {
                    extent,
                    offset_in_extent: within,
                    run_bytes: self.extent_bytes(extent) - within,
                }
            }
            Striping::Fine => {
                // Sets of 8 equal extents; find the set by its first extent.
                let first = self.coarse_extent(au) / FINE_STRIPE_WIDTH * FINE_STRIPE_WIDTH;
                let mut set_first = first;
                // The set holds 8 extents' worth of bytes starting at aus_before(set_first).
                while aus_before(set_first + FINE_STRIPE_WIDTH) * self.au_bytes <= offset {
                    set_first += FINE_STRIPE_WIDTH;
                }
                while aus_before(set_first) * self.au_bytes > offset {
                    set_first -= FINE_STRIPE_WIDTH;
                }
                let within_set = offset - aus_before(set_first) * self.au_bytes;
                let unit = within_set / FINE_STRIPE_BYTES;
                let extent = set_first + unit % FINE_STRIPE_WIDTH;
                let within_unit = within_set % FINE_STRIPE_BYTES;
                Location {
                    extent,
                    offset_in_extent: (unit / FINE_STRIPE_WIDTH) * FINE_STRIPE_BYTES + within_unit,
                    run_bytes: FINE_STRIPE_BYTES - within_unit,
                }
            }
        }
    }
}

/// An online disk that may receive extents.
#[derive(Debug, Clone)]
pub struct DiskSpace {
    pub disk: DiskNumber,
    pub failgroup: FailGroupId,
    pub au_total: u64,
    pub au_used: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("{copies} copies need {copies} failure groups, but only {online} have online disks")]
    TooFewFailGroups { copies: usize, online: usize },
    #[error(
        "no space: extent {extent} needs {aus} AUs on {copies} disks in different failure groups"
    )]
    NoSpace {
        extent: u64,
        aus: u64,
        copies: usize,
    },
}

/// Choose the disks for `count` new extents from `first_extent` on, `copies`
/// each, primary first; never two copies in one failure group.
pub fn place(
    disks: &[DiskSpace],
    copies: usize,
    first_extent: u64,
    count: u64,
) -> Result<Vec<Vec<DiskNumber>>, PlacementError> {
    assert!((1..=3).contains(&copies), "invariant: 1..=3 copies");
    let mut used: Vec<u64> = disks.iter().map(|d| d.au_used).collect();
    let mut groups: Vec<FailGroupId> = disks.iter().map(|d| d.failgroup).collect();
    groups.sort_unstable();
    groups.dedup();
    if groups.len() < copies {
        return Err(PlacementError::TooFewFailGroups {
            copies,
            online: groups.len(),
        });
    }
    let mut out = Vec::with_capacity(count as usize);
    for extent in first_extent..first_extent + count {
        let aus = extent_aus(extent);
        let mut chosen: Vec<usize> = Vec::with_capacity(copies);
        for _ in 0..copies {
            let mut best: Option<usize> = None;
            for (i, d) in disks.iter().enumerate() {
                if d.au_total < used[i] + aus
                    || chosen.iter().any(|c| disks[*c].failgroup == d.failgroup)
                {
                    continue;
                }
                // Lower fill ratio wins: used_i/total_i < used_b/total_b.
                let better = match best {
                    None => true,
                    Some(b) => {
                        let lhs = u128::from(used[i]) * u128::from(disks[b].au_total);
                        let rhs = u128::from(used[b]) * u128::from(d.au_total);
                        lhs < rhs || (lhs == rhs && d.disk < disks[b].disk)
                    }
                };
                if better {
                    best = Some(i);
                }
            }
            let Some(b) = best else {
                return Err(PlacementError::NoSpace {
                    extent,
                    aus,
                    copies,
                });
            };
            used[b] += aus;
            chosen.push(b);
        }
        out.push(chosen.into_iter().map(|i| disks[i].disk).collect());
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tiers() {
        assert_eq!(extent_aus(19_999), 1);
        assert_eq!(extent_aus(20_000), 4);
        assert_eq!(extent_aus(39_999), 4);
        assert_eq!(extent_aus(40_000), 16);
    }
}
