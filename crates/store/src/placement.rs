//! Placement: which disks receive a new extent's copies. Pure functions of
//! their arguments: no I/O, no clock, no randomness, no state between calls.
//! The extent sizes and the file layout it places for (which logical bytes
//! each extent holds) are part of the on-disk contract and live in
//! [`cairn_format::extent_map`]; they are re-exported here.
//!
//! Invariants:
//! - The copies of one extent are on different disks in different failure
//!   groups; a disk never receives more AUs than it has free.
//! - Disks fill in proportion to their size. With one copy, from usage in
//!   proportion, each disk stays within one extent of its proportional share
//!   of the AUs in use (a quota method, see [`place`]), as long as the disks
//!   below their share have room for the next extent. With mirroring and failure groups of equal
//!   size (the configuration ASM recommends too), the property tests find the
//!   same bound per disk and per failure group; that is tested, not proven.
//!   Unequal failure groups fill as evenly as "one copy per failure group"
//!   allows. A disk far below its share (just added) takes every extent it
//!   is eligible for until it catches up; moving old extents is rebalance's
//!   job.
//! - Placement is deterministic and prefix-stable: placing `n` extents gives
//!   the same disks as placing them in several calls (the primary, copy 0, may
//!   differ; see below).
//!
//! Fault assumptions: the caller lists only online disks and reports their
//! usage truthfully; a disk whose usage exceeds its size is treated as full.
//!
//! What it does not do: allocate AU runs on a disk (the allocator does; it may
//! find a disk too fragmented and then retry with that disk marked full), move
//! existing extents (rebalance does), or remember anything. Primaries are
//! balanced only within one call (each disk is primary for about 1/copies of
//! the AUs it receives), because [`DiskSpace`] carries no count of the
//! primaries a disk already holds; across single-extent calls the primary is
//! a deterministic pseudo-random pick among the copies, even only on average.

use std::cmp::Ordering;

pub use cairn_format::extent_map::{
    extent_aus, extent_start_aus, FileLayout, Location, Striping, EXTENT_TIER1_FROM,
    EXTENT_TIER2_FROM, FINE_STRIPE_BYTES, FINE_STRIPE_WIDTH,
};
use cairn_format::group::COPIES_MAX;

/// A disk's number within its disk group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct DiskNumber(pub u16);

/// A failure group: disks that may fail together (one controller, one shelf).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct FailGroupId(pub u16);

// ---------------------------------------------------------------------------
// Placement

/// An online disk that may receive extents.
#[derive(Debug, Clone)]
pub struct DiskSpace {
    pub disk: DiskNumber,
    pub failgroup: FailGroupId,
    /// AUs available for extents (metadata excluded).
    pub au_total: u64,
    /// AUs of `au_total` in use. More than `au_total` counts as full.
    pub au_used: u64,
}

/// Why extents could not be placed. Operational: the caller reports them.
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

/// Choose the disks for `count` new extents starting at index `first_extent`,
/// each with `copies` copies. Returns one `Vec<DiskNumber>` per extent (copy 0,
/// the primary that serves reads, first), never two copies in one failure
/// group.
///
/// How: extents are placed one after another, each seeing the AUs planned for
/// the earlier ones. A disk is *under quota* when after this extent it would
/// still hold less than one extent above its proportional share
/// (`used * total_size < used_total_after * size`). Among the disks with room
/// for the extent, under-quota disks come first, then the earliest
/// *deadline* — the lowest fill ratio after receiving the extent,
/// `(used + aus) / size` — then the lowest disk number, so equal disks fill
/// round-robin. (Plain "lowest fill ratio first" starves a large disk while
/// many small ones take their first extent; this quota method keeps every
/// disk within one extent of its share; see the module doc for the limits.)
/// - One copy: that rule picks among all disks.
/// - Mirrored: the same rule, applied to failure groups (their summed sizes
///   and usage), picks `copies` distinct groups, so groups fill evenly too;
///   the rule then picks the disk inside each chosen group.
/// - The primary is the chosen disk whose primaries lag furthest behind
///   `1/copies` of the AUs planned for it in this call; ties (always, in a
///   one-extent call) go to a pseudo-random but deterministic pick from the
///   extent index and disk number, so no disk is favoured by its number.
///
/// Comparisons are exact (cross-multiplied, 256-bit where needed). Cost is
/// O(count * disks) plus O(count * copies * failure groups).
///
/// # Errors
/// [`PlacementError::TooFewFailGroups`] when `disks` span fewer failure
/// groups than `copies` (checked first, even for `count == 0`);
/// [`PlacementError::NoSpace`] for the first extent that fewer than `copies`
/// failure groups have a disk with room for — no choice of disks would fit
/// it then, since any disk with room in each of `copies` groups would do.
///
/// # Panics
/// Preconditions: `copies` in `1..=3`, disk numbers unique in `disks`,
/// `first_extent + count` within u64.
pub fn place(
    disks: &[DiskSpace],
    copies: usize,
    first_extent: u64,
    count: u64,
) -> Result<Vec<Vec<DiskNumber>>, PlacementError> {
    assert!(
        (1..=COPIES_MAX).contains(&copies),
        "precondition: 1..={COPIES_MAX} copies, not {copies}"
    );
    let end_extent = first_extent.checked_add(count);
    assert!(
        end_extent.is_some(),
        "precondition: extents {first_extent} + {count} stay within u64"
    );
    let mut plan = Plan::new(disks);
    if plan.groups.len() < copies {
        return Err(PlacementError::TooFewFailGroups {
            copies,
            online: plan.groups.len(),
        });
    }
    // A bad `count` must not turn into a huge allocation before NoSpace.
    let reserve = usize::try_from(count).map_or(PLACE_RESERVE_MAX, |c| c.min(PLACE_RESERVE_MAX));
    let mut placed = Vec::with_capacity(reserve);
    for extent in first_extent..end_extent.unwrap_or(first_extent) {
        placed.push(plan.place_extent(extent, copies)?);
    }
    Ok(placed)
}

/// Most extents' results reserved up front; more grow the Vec as usual.
const PLACE_RESERVE_MAX: usize = 1 << 16;

/// Choose the disks for extent `extent`'s `copies` copies when some disks
/// are *away*: members that are not read now (OFFLINE, or SYNCING back)
/// but stay in the group, so a copy may be recorded on them and restored
/// when they are read again (`docs/lifecycle.md`, "Allocating with a
/// failure group missing"). `in_service` are the disks that are read.
///
/// As many copies as fit go to disks in service ([`place`] among them
/// alone, so with every failure group in service this is `place` exactly);
/// the rest go to away disks of failure groups that hold no copy yet. At
/// least one copy is in service, and the copies in service come first (the
/// primary is one that can be read). Never two copies in one failure
/// group, counting the away disks' groups: a failure group with a disk in
/// service and one away still takes one copy.
///
/// Complete: when some choice of disks with room puts at least one copy in
/// service, one is found. (Let `r` be the number of failure groups with an
/// in-service disk with room, `r < copies`: any such choice can move its
/// away copies in those groups to the in-service disk, so it needs
/// `copies - r` away groups with room outside them, which is what the
/// attempt with `r` copies in service looks for.)
///
/// # Errors
/// [`place`]'s, for the attempt with every copy in service, when `away`
/// offers nothing; otherwise [`PlacementError::NoSpace`] when no choice
/// fits (or nothing is in service to read a copy from).
///
/// # Panics
/// As [`place`]; and disk numbers must be unique across both lists.
pub fn place_with_away(
    in_service: &[DiskSpace],
    away: &[DiskSpace],
    copies: usize,
    extent: u64,
) -> Result<Vec<DiskNumber>, PlacementError> {
    let whole = match place(in_service, copies, extent, 1) {
        Ok(mut placed) => return Ok(placed.pop().expect("invariant: one extent placed")),
        Err(e) => e,
    };
    assert!(
        away.iter()
            .all(|a| in_service.iter().all(|d| d.disk != a.disk)),
        "precondition: a disk is in service or away, not both"
    );
    if away.is_empty() {
        return Err(whole);
    }
    let no_space = PlacementError::NoSpace {
        extent,
        aus: extent_aus(extent),
        copies,
    };
    let group_of = |n: DiskNumber| {
        in_service
            .iter()
            .find(|d| d.disk == n)
            .map(|d| d.failgroup)
            .expect("invariant: placed among these disks")
    };
    for in_copies in (1..copies).rev() {
        let Ok(mut first) = place(in_service, in_copies, extent, 1) else {
            continue;
        };
        let first = first.pop().expect("invariant: one extent placed");
        let taken: Vec<FailGroupId> = first.iter().map(|n| group_of(*n)).collect();
        let rest: Vec<DiskSpace> = away
            .iter()
            .filter(|a| !taken.contains(&a.failgroup))
            .cloned()
            .collect();
        if let Ok(mut second) = place(&rest, copies - in_copies, extent, 1) {
            let mut chosen = first;
            chosen.extend(second.pop().expect("invariant: one extent placed"));
            return Ok(chosen);
        }
    }
    Err(no_space)
}

/// The usage one call has planned so far.
struct Plan<'a> {
    disks: &'a [DiskSpace],
    /// Per disk: AUs in use, including those planned in this call.
    used: Vec<u64>,
    /// Per disk: AUs planned in this call, all copies, and as primary.
    planned: Vec<u64>,
    planned_primary: Vec<u64>,
    /// Per disk: index into `groups`.
    group_of: Vec<usize>,
    /// Distinct failure groups, sorted, with summed sizes and usage.
    groups: Vec<FailGroupId>,
    group_total: Vec<u128>,
    group_used: Vec<u128>,
    total: u128,
    used_total: u128,
    /// Scratch: per group, the best disk with room for the current extent.
    best_in_group: Vec<Option<Candidate>>,
}

/// A disk or failure group competing for a copy.
#[derive(Clone, Copy)]
struct Candidate {
    index: usize,
    under_quota: bool,
}

impl<'a> Plan<'a> {
    fn new(disks: &'a [DiskSpace]) -> Self {
        let mut numbers: Vec<DiskNumber> = disks.iter().map(|d| d.disk).collect();
        numbers.sort_unstable();
        assert!(
            numbers.windows(2).all(|w| w[0] != w[1]),
            "precondition: disk numbers are unique"
        );
        let mut groups: Vec<FailGroupId> = disks.iter().map(|d| d.failgroup).collect();
        groups.sort_unstable();
        groups.dedup();
        let group_of: Vec<usize> = disks
            .iter()
            .map(|d| {
                groups
                    .binary_search(&d.failgroup)
                    .expect("invariant: every disk's group is listed")
            })
            .collect();
        // Usage beyond a disk's size is capped: such a disk is full, and its
        // excess must not distort the shares of the others.
        let used: Vec<u64> = disks.iter().map(|d| d.au_used.min(d.au_total)).collect();
        let mut group_total = vec![0u128; groups.len()];
        let mut group_used = vec![0u128; groups.len()];
        for (i, d) in disks.iter().enumerate() {
            group_total[group_of[i]] += u128::from(d.au_total);
            group_used[group_of[i]] += u128::from(used[i]);
        }
        Self {
            disks,
            total: group_total.iter().sum(),
            used_total: group_used.iter().sum(),
            used,
            planned: vec![0; disks.len()],
            planned_primary: vec![0; disks.len()],
            group_of,
            best_in_group: vec![None; groups.len()],
            groups,
            group_total,
            group_used,
        }
    }

    fn place_extent(
        &mut self,
        extent: u64,
        copies: usize,
    ) -> Result<Vec<DiskNumber>, PlacementError> {
        let aus = extent_aus(extent);
        // The quota is judged against the usage after the whole extent.
        let used_total_after = self.used_total + u128::from(aus) * copies as u128;
        let no_space = PlacementError::NoSpace {
            extent,
            aus,
            copies,
        };

        let mut chosen = [0usize; COPIES_MAX];
        if copies == 1 {
            // Failure groups separate copies; with one copy they play no part.
            let mut best: Option<Candidate> = None;
            for index in 0..self.disks.len() {
                if let Some(c) = self.disk_candidate(index, aus, used_total_after) {
                    if best.is_none_or(|b| self.disk_before(c, b, aus)) {
                        best = Some(c);
                    }
                }
            }
            chosen[0] = best.ok_or(no_space)?.index;
        } else {
            // The best disk of each group. It stays the best while the other
            // copies are chosen: they go to other groups.
            self.best_in_group.fill(None);
            for index in 0..self.disks.len() {
                if let Some(c) = self.disk_candidate(index, aus, used_total_after) {
                    let g = self.group_of[index];
                    if self.best_in_group[g].is_none_or(|b| self.disk_before(c, b, aus)) {
                        self.best_in_group[g] = Some(c);
                    }
                }
            }
            for copy in 0..copies {
                let mut best: Option<Candidate> = None;
                for g in 0..self.groups.len() {
                    let taken = chosen[..copy].iter().any(|&d| self.group_of[d] == g);
                    if taken || self.best_in_group[g].is_none() {
                        continue;
                    }
                    let c = Candidate {
                        index: g,
                        under_quota: under_quota(
                            self.group_used[g],
                            self.group_total[g],
                            self.total,
                            used_total_after,
                        ),
                    };
                    if best.is_none_or(|b| self.group_before(c, b, aus)) {
                        best = Some(c);
                    }
                }
                let group = best.ok_or_else(|| no_space.clone())?.index;
                chosen[copy] = self.best_in_group[group]
                    .expect("invariant: only groups with a disk with room compete")
                    .index;
            }
        }

        let chosen = &chosen[..copies];
        for &d in chosen {
            self.used[d] += aus;
            self.planned[d] += aus;
            self.group_used[self.group_of[d]] += u128::from(aus);
        }
        self.used_total = used_total_after;
        let primary = *chosen
            .iter()
            .min_by(|&&x, &&y| self.primary_order(x, y, copies, extent))
            .expect("invariant: at least one copy");
        self.planned_primary[primary] += aus;
        assert!(
            chosen
                .iter()
                .all(|&d| self.used[d] <= self.disks[d].au_total),
            "invariant: a disk receives only AUs it has free"
        );
        let mut order = Vec::with_capacity(copies);
        order.push(self.disks[primary].disk);
        order.extend(
            chosen
                .iter()
                .filter(|&&d| d != primary)
                .map(|&d| self.disks[d].disk),
        );
        Ok(order)
    }

    /// Disk `index` as a candidate, if it has room for `aus`.
    fn disk_candidate(&self, index: usize, aus: u64, used_total_after: u128) -> Option<Candidate> {
        let total = self.disks[index].au_total;
        let room = total - self.used[index];
        (room >= aus).then(|| Candidate {
            index,
            under_quota: under_quota(
                u128::from(self.used[index]),
                u128::from(total),
                self.total,
                used_total_after,
            ),
        })
    }

    /// Whether disk candidate `a` goes before `b`: under quota first, then the
    /// lower fill ratio after the extent, then the lower disk number.
    fn disk_before(&self, a: Candidate, b: Candidate, aus: u64) -> bool {
        let (da, db) = (&self.disks[a.index], &self.disks[b.index]);
        let after = |i: usize| u128::from(self.used[i]) + u128::from(aus);
        b.under_quota
            .cmp(&a.under_quota)
            .then_with(|| {
                cmp_products(
                    after(a.index),
                    u128::from(db.au_total),
                    after(b.index),
                    u128::from(da.au_total),
                )
            })
            .then_with(|| da.disk.cmp(&db.disk))
            == Ordering::Less
    }

    /// Whether failure group candidate `a` goes before `b`: as for disks.
    fn group_before(&self, a: Candidate, b: Candidate, aus: u64) -> bool {
        let after = |g: usize| self.group_used[g] + u128::from(aus);
        b.under_quota
            .cmp(&a.under_quota)
            .then_with(|| {
                cmp_products(
                    after(a.index),
                    self.group_total[b.index],
                    after(b.index),
                    self.group_total[a.index],
                )
            })
            .then_with(|| self.groups[a.index].cmp(&self.groups[b.index]))
            == Ordering::Less
    }

    /// Order of disks `x` and `y` as primary: the one whose primaries lag
    /// furthest behind `1/copies` of its planned AUs first
    /// (`copies * primary - planned` lowest), then a hash, then the number.
    fn primary_order(&self, x: usize, y: usize, copies: usize, extent: u64) -> Ordering {
        let k = copies as u128;
        let lag = |i: usize, j: usize| {
            k * u128::from(self.planned_primary[i]) + u128::from(self.planned[j])
        };
        let (nx, ny) = (self.disks[x].disk, self.disks[y].disk);
        lag(x, y)
            .cmp(&lag(y, x))
            .then_with(|| tie_rank(extent, nx).cmp(&tie_rank(extent, ny)))
            .then_with(|| nx.cmp(&ny))
    }
}

/// Whether something of `size` holding `used` (disk or failure group) stays
/// less than one extent above its share after the extent:
/// `used / size < used_total_after / total`.
fn under_quota(used: u128, size: u128, total: u128, used_total_after: u128) -> bool {
    cmp_products(used, total, used_total_after, size) == Ordering::Less
}

/// A deterministic pseudo-random rank (splitmix64's finaliser), so primary
/// ties fall on no disk more often than on another.
fn tie_rank(extent: u64, disk: DiskNumber) -> u64 {
    let mut z = extent ^ (u64::from(disk.0) << 48) ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Compare `a * b` with `c * d` exactly. Sizes sum over up to 65,536 disks of
/// up to 2^64 AUs, so products can pass 2^128.
fn cmp_products(a: u128, b: u128, c: u128, d: u128) -> Ordering {
    const SMALL: u128 = 1 << 64;
    if a < SMALL && b < SMALL && c < SMALL && d < SMALL {
        (a * b).cmp(&(c * d))
    } else {
        wide_mul(a, b).cmp(&wide_mul(c, d))
    }
}

/// The full 256-bit product of `x` and `y`, as (high, low) halves.
fn wide_mul(x: u128, y: u128) -> (u128, u128) {
    const LOW: u128 = u64::MAX as u128;
    let (x1, x0) = (x >> 64, x & LOW);
    let (y1, y0) = (y >> 64, y & LOW);
    let (p00, p01, p10, p11) = (x0 * y0, x0 * y1, x1 * y0, x1 * y1);
    // Three terms below 2^64 each: no overflow.
    let middle = (p00 >> 64) + (p01 & LOW) + (p10 & LOW);
    let low = (p00 & LOW) | (middle << 64);
    let high = p11 + (p01 >> 64) + (p10 >> 64) + (middle >> 64);
    (high, low)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::*;

    fn disk(number: u16, failgroup: u16, au_total: u64, au_used: u64) -> DiskSpace {
        DiskSpace {
            disk: DiskNumber(number),
            failgroup: FailGroupId(failgroup),
            au_total,
            au_used,
        }
    }

    /// AUs of one copy of extents `first..first + count`.
    fn span_aus(first: u64, count: u64) -> u64 {
        u64::try_from(extent_start_aus(first + count) - extent_start_aus(first)).unwrap()
    }

    fn position(disks: &[DiskSpace], n: DiskNumber) -> usize {
        disks.iter().position(|d| d.disk == n).unwrap()
    }

    /// Per disk (in `disks` order): AUs in use after `placed`, and AUs placed as primary.
    fn usage_after(
        disks: &[DiskSpace],
        placed: &[Vec<DiskNumber>],
        first: u64,
    ) -> (Vec<u64>, Vec<u64>) {
        let mut used: Vec<u64> = disks.iter().map(|d| d.au_used).collect();
        let mut primary = vec![0; disks.len()];
        for (i, copies) in placed.iter().enumerate() {
            let aus = extent_aus(first + i as u64);
            for n in copies {
                used[position(disks, *n)] += aus;
            }
            primary[position(disks, copies[0])] += aus;
        }
        (used, primary)
    }

    /// Each of `amounts` is within `slack` of its share of their sum in
    /// proportion to `sizes`: |amount * Σsizes - Σamounts * size| <= slack * Σsizes.
    fn within_share(amounts: &[u64], sizes: &[u64], slack: u64) -> Result<(), TestCaseError> {
        let size_total: u128 = sizes.iter().map(|&s| u128::from(s)).sum();
        let amount_total: u128 = amounts.iter().map(|&a| u128::from(a)).sum();
        for (&amount, &size) in amounts.iter().zip(sizes) {
            let have = u128::from(amount) * size_total;
            let share = amount_total * u128::from(size);
            prop_assert!(
                have.abs_diff(share) <= u128::from(slack) * size_total,
                "{amount} of {amount_total} on size {size} of {size_total}: \
                 more than {slack} from its share"
            );
        }
        Ok(())
    }

    /// Extent indices near the tier boundaries, or anywhere.
    fn first_extent() -> impl Strategy<Value = u64> {
        prop_oneof![
            0u64..100,
            19_980u64..20_010,
            39_980u64..40_010,
            40_000u64..5_000_000,
        ]
    }

    /// The largest `count <= wanted` whose extents need at most `aus_max` AUs
    /// for `copies` copies.
    fn count_fitting(first: u64, wanted: u64, copies: u64, aus_max: u64) -> u64 {
        let mut count = wanted;
        while count > 0 && span_aus(first, count) * copies > aus_max {
            count -= 1;
        }
        count
    }

    /// Disks with shuffled numbers: (failure group, size, used) each.
    fn numbered(specs: Vec<(u16, u64, u64)>, keys: &[u32]) -> Vec<DiskSpace> {
        let mut order: Vec<usize> = (0..specs.len()).collect();
        order.sort_by_key(|&i| (keys[i % keys.len()], i));
        specs
            .iter()
            .enumerate()
            .map(|(i, &(fg, total, used))| {
                let number = order.iter().position(|&o| o == i).unwrap();
                disk(u16::try_from(number).unwrap(), fg, total, used)
            })
            .collect()
    }

    // -- placement: examples --------------------------------------------------

    #[test]
    fn equal_disks_fill_round_robin() {
        let disks: Vec<_> = (0..4).map(|n| disk(n, n, 100, 0)).collect();
        let placed = place(&disks, 1, 0, 8).unwrap();
        let order: Vec<u16> = placed.iter().map(|c| c[0].0).collect();
        assert_eq!(order, [0, 1, 2, 3, 0, 1, 2, 3]);
    }

    #[test]
    fn a_large_disk_is_not_starved_by_small_ones() {
        // Lowest-fill-ratio-first with ties by number would give the first
        // eight extents to the eight small disks.
        let mut disks: Vec<_> = (0..8).map(|n| disk(n, n, 10, 0)).collect();
        disks.push(disk(8, 8, 80, 0));
        let placed = place(&disks, 1, 0, 8).unwrap();
        let on_large = placed.iter().filter(|c| c[0] == DiskNumber(8)).count();
        assert_eq!(on_large, 4);
    }

    #[test]
    fn mirrors_alternate_disks_and_primaries() {
        let disks = [
            disk(0, 0, 10, 0),
            disk(1, 0, 10, 0),
            disk(2, 1, 10, 0),
            disk(3, 1, 10, 0),
        ];
        let placed = place(&disks, 2, 0, 4).unwrap();
        let sets: Vec<[u16; 2]> = placed
            .iter()
            .map(|c| {
                let mut s = [c[0].0, c[1].0];
                s.sort_unstable();
                s
            })
            .collect();
        assert_eq!(sets, [[0, 2], [1, 3], [0, 2], [1, 3]]);
        let (_, primary) = usage_after(&disks, &placed, 0);
        assert_eq!(primary, [1, 1, 1, 1]);
    }

    /// The group code places one extent per call; primaries still spread.
    #[test]
    fn one_extent_calls_spread_primaries() {
        let mut disks = [
            disk(0, 0, 5_000, 0),
            disk(1, 0, 5_000, 0),
            disk(2, 1, 5_000, 0),
            disk(3, 1, 5_000, 0),
        ];
        let mut primaries = [0u64; 4];
        for extent in 0..4_000 {
            let placed = place(&disks, 2, extent, 1).unwrap();
            for (i, n) in placed[0].iter().enumerate() {
                let d = position(&disks, *n);
                disks[d].au_used += 1;
                if i == 0 {
                    primaries[d] += 1;
                }
            }
        }
        assert!(disks.iter().all(|d| d.au_used == 2_000));
        // About 1,000 each; a binomial deviation of 100 is 4.5 sigma.
        assert!(
            primaries.iter().all(|p| p.abs_diff(1_000) < 100),
            "{primaries:?}"
        );
    }

    #[test]
    fn too_few_failure_groups_and_no_space() {
        let disks = [disk(0, 7, 10, 0), disk(1, 7, 10, 0)];
        assert_eq!(
            place(&disks, 2, 0, 1),
            Err(PlacementError::TooFewFailGroups {
                copies: 2,
                online: 1
            })
        );
        assert_eq!(
            place(&[], 1, 0, 0),
            Err(PlacementError::TooFewFailGroups {
                copies: 1,
                online: 0
            })
        );
        let disks = [disk(0, 0, 3, 0), disk(1, 1, 100, 96)];
        assert_eq!(place(&disks, 2, 0, 3).unwrap().len(), 3);
        assert_eq!(
            place(&disks, 2, 0, 4),
            Err(PlacementError::NoSpace {
                extent: 3,
                aus: 1,
                copies: 2
            })
        );
        assert_eq!(
            place(&disks, 1, 20_000, 1),
            Ok(vec![vec![DiskNumber(1)]]),
            "only disk 1 has 4 AUs free"
        );
    }

    #[test]
    #[should_panic(expected = "precondition")]
    fn four_copies_are_refused() {
        let disks: Vec<_> = (0..4).map(|n| disk(n, n, 10, 0)).collect();
        let _ = place(&disks, 4, 0, 1);
    }

    #[test]
    #[should_panic(expected = "precondition")]
    fn duplicate_disk_numbers_are_refused() {
        let _ = place(&[disk(1, 0, 10, 0), disk(1, 1, 10, 0)], 1, 0, 1);
    }

    #[test]
    fn places_100_000_mirrored_extents_over_64_disks() {
        // Eight failure groups of equal size; the disks inside differ.
        let disks: Vec<_> = (0..64u16)
            .map(|n| disk(n, n % 8, 30_000 + 2_000 * u64::from(n / 8), 0))
            .collect();
        let placed = place(&disks, 2, 0, 100_000).unwrap();
        let (used, primary) = usage_after(&disks, &placed, 0);
        let sizes: Vec<u64> = disks.iter().map(|d| d.au_total).collect();
        within_share(&used, &sizes, 16).unwrap();
        within_share(&primary, &sizes, 3 * 16).unwrap();
    }

    // -- placement: properties ----------------------------------------------

    proptest! {
        /// Property 1: the copies of an extent are on distinct disks in
        /// distinct failure groups, and the errors are the documented ones.
        #[test]
        fn copies_never_share_a_failure_group(
            specs in vec((0u16..4, 0u64..200, 0u64..250), 0..10),
            keys in vec(any::<u32>(), 1..10),
            copies in 1usize..=3,
            first in first_extent(),
            count in 0u64..80,
        ) {
            let disks = numbered(specs, &keys);
            let mut groups: Vec<FailGroupId> = disks.iter().map(|d| d.failgroup).collect();
            groups.sort_unstable();
            groups.dedup();
            match place(&disks, copies, first, count) {
                Ok(placed) => {
                    prop_assert_eq!(placed.len() as u64, count);
                    for set in &placed {
                        prop_assert_eq!(set.len(), copies);
                        let mut numbers: Vec<_> = set.clone();
                        numbers.sort_unstable();
                        numbers.dedup();
                        prop_assert_eq!(numbers.len(), copies, "a disk twice: {:?}", set);
                        let mut fgs: Vec<_> =
                            set.iter().map(|n| disks[position(&disks, *n)].failgroup).collect();
                        fgs.sort_unstable();
                        fgs.dedup();
                        prop_assert_eq!(fgs.len(), copies, "a failure group twice: {:?}", set);
                    }
                }
                Err(PlacementError::TooFewFailGroups { copies: c, online }) => {
                    prop_assert_eq!(c, copies);
                    prop_assert_eq!(online, groups.len());
                    prop_assert!(online < copies);
                }
                Err(PlacementError::NoSpace { extent, aus, copies: c }) => {
                    prop_assert_eq!(c, copies);
                    prop_assert!((first..first + count).contains(&extent));
                    prop_assert_eq!(aus, extent_aus(extent));
                }
            }
        }

        /// Property 2: one copy, any disk sizes: every disk within one extent
        /// of its proportional share of the AUs placed. Up to half full: near
        /// full, disks below their share run out of room for whole extents
        /// and others must take more (the module doc's limit).
        #[test]
        fn one_copy_fills_disks_in_proportion(
            specs in vec((0u16..4, 1u64..=1000), 1..=12),
            keys in vec(any::<u32>(), 1..12),
            first in first_extent(),
            wanted in 0u64..=3000,
        ) {
            let disks = numbered(specs.into_iter().map(|(fg, t)| (fg, t, 0)).collect(), &keys);
            let sizes: Vec<u64> = disks.iter().map(|d| d.au_total).collect();
            let count = count_fitting(first, wanted, 1, sizes.iter().sum::<u64>() / 2);
            prop_assume!(count > 0);
            let placed = place(&disks, 1, first, count).unwrap();
            let (used, _) = usage_after(&disks, &placed, first);
            within_share(&used, &sizes, extent_aus(first + count - 1))?;
        }

        /// Property 3: two or three copies, failure groups of equal size made
        /// of unequal disks: every disk and every failure group within one
        /// extent of its share; primaries within three extents of theirs
        /// (20,000 cases measured at most 1.8). Up to half full, as above.
        #[test]
        fn mirrors_fill_disks_in_proportion(
            (copies, cuts) in (2usize..=3).prop_flat_map(|copies| {
                (Just(copies), vec(vec(any::<u64>(), 0..4), copies..=5))
            }),
            group_aus in 128u64..=2000,
            keys in vec(any::<u32>(), 1..20),
            first in first_extent(),
            wanted in 0u64..=3000,
        ) {
            // Each group splits `group_aus` into disks of at least 32 AUs, so
            // every disk holds two of the largest extents.
            let mut specs = Vec::new();
            for (g, cut) in cuts.iter().enumerate() {
                let slack = group_aus - 32 * (cut.len() as u64 + 1);
                let mut points: Vec<u64> = cut.iter().map(|c| c % (slack + 1)).collect();
                points.sort_unstable();
                points.push(slack);
                let mut at = 0;
                for p in points {
                    specs.push((g as u16, p - at + 32, 0));
                    at = p;
                }
            }
            let disks = numbered(specs, &keys);
            let sizes: Vec<u64> = disks.iter().map(|d| d.au_total).collect();
            let total: u64 = sizes.iter().sum();
            let count = count_fitting(first, wanted, copies as u64, total / 2);
            prop_assume!(count > 0);
            let placed = place(&disks, copies, first, count).unwrap();
            let (used, primary) = usage_after(&disks, &placed, first);
            let extent_max = extent_aus(first + count - 1);
            within_share(&used, &sizes, extent_max)?;
            let mut group_used = vec![0; cuts.len()];
            for (d, u) in disks.iter().zip(&used) {
                group_used[usize::from(d.failgroup.0)] += u;
            }
            within_share(&group_used, &vec![group_aus; cuts.len()], extent_max)?;
            within_share(&primary, &sizes, 3 * extent_max)?;
        }

        /// Property 4: no disk receives more AUs than it has free, and
        /// NoSpace comes only when no choice of disks fits the extent, given
        /// the usage planned before it (rebuilt by placing the extents before
        /// it; placement is prefix-stable, checked here too).
        #[test]
        fn space_is_never_overdrawn_and_no_space_is_real(
            specs in vec((0u16..4, 0u64..120, 0u64..120), 1..=8),
            keys in vec(any::<u32>(), 1..8),
            copies in 1usize..=3,
            first in first_extent(),
            count in 0u64..300,
        ) {
            let specs = specs.into_iter().map(|(fg, t, u)| (fg, t, u.min(t))).collect();
            let disks = numbered(specs, &keys);
            match place(&disks, copies, first, count) {
                Ok(placed) => {
                    let (used, _) = usage_after(&disks, &placed, first);
                    for (d, u) in disks.iter().zip(&used) {
                        prop_assert!(*u <= d.au_total, "{:?} given {}", d, u);
                    }
                    let cut = count / 2;
                    let head = place(&disks, copies, first, cut).unwrap();
                    prop_assert_eq!(&head[..], &placed[..cut as usize]);
                }
                Err(PlacementError::NoSpace { extent, aus, copies: c }) => {
                    prop_assert_eq!(c, copies);
                    prop_assert_eq!(aus, extent_aus(extent));
                    let before = place(&disks, copies, first, extent - first).unwrap();
                    let (used, _) = usage_after(&disks, &before, first);
                    let fits = |i: usize| disks[i].au_total - used[i] >= aus;
                    // Brute force: any `copies` disks with room in distinct groups?
                    let n = disks.len();
                    let mut feasible = false;
                    for a in 0..n {
                        if copies == 1 {
                            feasible |= fits(a);
                            continue;
                        }
                        for b in a + 1..n {
                            let ab = disks[a].failgroup != disks[b].failgroup;
                            if copies == 2 {
                                feasible |= ab && fits(a) && fits(b);
                                continue;
                            }
                            for c3 in b + 1..n {
                                feasible |= ab
                                    && disks[c3].failgroup != disks[a].failgroup
                                    && disks[c3].failgroup != disks[b].failgroup
                                    && fits(a) && fits(b) && fits(c3);
                            }
                        }
                    }
                    prop_assert!(!feasible, "extent {} fits, yet NoSpace", extent);
                }
                Err(PlacementError::TooFewFailGroups { online, .. }) => {
                    prop_assert!(online < copies)
                }
            }
        }

        /// Placing in two calls (usage updated between) chooses the same
        /// disks as one call; only the primary may differ.
        #[test]
        fn batches_choose_the_same_disks(
            specs in vec((0u16..4, 1u64..300), 3..=8),
            keys in vec(any::<u32>(), 1..8),
            copies in 1usize..=3,
            first in first_extent(),
            count in 0u64..100,
            cut_pick in any::<u64>(),
        ) {
            let disks = numbered(specs.into_iter().map(|(fg, t)| (fg, t, 0)).collect(), &keys);
            let Ok(whole) = place(&disks, copies, first, count) else { return Ok(()) };
            let cut = cut_pick % (count + 1);
            let head = place(&disks, copies, first, cut).unwrap();
            let (used, _) = usage_after(&disks, &head, first);
            let mut later = disks.clone();
            for (d, u) in later.iter_mut().zip(used) {
                d.au_used = u;
            }
            let tail = place(&later, copies, first + cut, count - cut).unwrap();
            let sorted = |set: &Vec<DiskNumber>| {
                let mut s = set.clone();
                s.sort_unstable();
                s
            };
            let split: Vec<_> = head.iter().chain(&tail).map(sorted).collect();
            prop_assert_eq!(split, whole.iter().map(sorted).collect::<Vec<_>>());
        }

        /// Any sizes and usage, up to u64::MAX: no panic, copies apart.
        #[test]
        fn any_input_places_or_errs_without_panic(
            specs in vec((0u16..4, any::<u64>(), any::<u64>()), 0..8),
            keys in vec(any::<u32>(), 1..8),
            copies in 1usize..=3,
            first in prop_oneof![any::<u64>(), first_extent()],
            count in 0u64..32,
        ) {
            let disks = numbered(specs, &keys);
            let first = first.min(u64::MAX - count);
            if let Ok(placed) = place(&disks, copies, first, count) {
                for set in placed {
                    let mut fgs: Vec<_> =
                        set.iter().map(|n| disks[position(&disks, *n)].failgroup).collect();
                    fgs.sort_unstable();
                    fgs.dedup();
                    prop_assert_eq!(fgs.len(), copies);
                }
            }
        }

        #[test]
        fn products_compare_exactly(
            a in any::<u64>(),
            b in any::<u64>(),
            c in any::<u64>(),
            d in any::<u64>(),
        ) {
            let (a, b, c, d) = (u128::from(a), u128::from(b), u128::from(c), u128::from(d));
            prop_assert_eq!(cmp_products(a, b, c, d), (a * b).cmp(&(c * d)));
            // The same products, scaled past 2^128 by 2^64 on both sides.
            prop_assert_eq!(cmp_products(a << 64, b, c, d << 64), (a * b).cmp(&(c * d)));
            prop_assert_eq!(wide_mul(a << 64, b << 64), (a * b, 0));
        }

        #[test]
        fn wide_mul_low_half_and_symmetry(x in any::<u128>(), y in any::<u128>()) {
            prop_assert_eq!(wide_mul(x, y).1, x.wrapping_mul(y));
            prop_assert_eq!(wide_mul(x, y), wide_mul(y, x));
        }
    }

    // -- placement with disks away ----------------------------------------

    #[test]
    fn a_failure_group_away_takes_the_copy_the_others_cannot() {
        // Normal redundancy, failure group 1 away: one copy in each group,
        // the one in service first.
        let in_service = [disk(0, 0, 100, 0), disk(1, 0, 100, 0)];
        let away = [disk(2, 1, 100, 0), disk(3, 1, 100, 0)];
        assert_eq!(
            place(&in_service, 2, 0, 1),
            Err(PlacementError::TooFewFailGroups {
                copies: 2,
                online: 1
            })
        );
        for extent in 0..8 {
            let set = place_with_away(&in_service, &away, 2, extent).unwrap();
            assert_eq!(set.len(), 2);
            assert!(set[0].0 < 2 && set[1].0 >= 2, "{set:?}");
        }
        // Nothing away: today's refusal, as it was.
        assert_eq!(
            place_with_away(&in_service, &[], 2, 0),
            place(&in_service, 2, 0, 1).map(|mut p| p.pop().unwrap())
        );
        // The away group full: no space, whatever is free in service.
        let full = [disk(2, 1, 100, 100)];
        assert_eq!(
            place_with_away(&in_service, &full, 2, 0),
            Err(PlacementError::NoSpace {
                extent: 0,
                aus: 1,
                copies: 2
            })
        );
        // Every group in service with room: nothing goes away.
        let three = [disk(0, 0, 100, 0), disk(1, 1, 100, 0)];
        let set = place_with_away(&three, &[disk(2, 2, 100, 0)], 2, 0).unwrap();
        assert!(set.iter().all(|n| n.0 < 2), "{set:?}");
        // High redundancy, two groups away: one copy in service.
        let set = place_with_away(
            &[disk(0, 0, 100, 0)],
            &[disk(1, 1, 100, 0), disk(2, 2, 100, 0)],
            3,
            0,
        )
        .unwrap();
        assert_eq!(set[0], DiskNumber(0));
        assert_eq!(set.len(), 3);
        // Nothing in service: no copy could be read, so none is placed.
        assert!(place_with_away(&[], &away, 2, 0).is_err());
        // A group with a disk in service and one away takes one copy.
        let mixed_in = [disk(0, 0, 100, 0)];
        let mixed_away = [disk(1, 0, 100, 0)];
        assert!(place_with_away(&mixed_in, &mixed_away, 2, 0).is_err());
    }

    proptest! {
        /// Away disks: the copies are on distinct disks in distinct
        /// failure groups, at least one in service and those first, as
        /// many in service as fit; no disk takes more than it has free;
        /// and an error comes only when no choice with a copy in service
        /// fits (brute force).
        #[test]
        fn placing_with_disks_away_is_sound_and_complete(
            specs in vec((0u16..4, 0u64..40, 0u64..40, any::<bool>()), 1..=7),
            keys in vec(any::<u32>(), 1..8),
            copies in 1usize..=3,
            extent in first_extent(),
        ) {
            let flags: Vec<bool> = specs.iter().map(|s| s.3).collect();
            let disks = numbered(
                specs.iter().map(|&(fg, t, u, _)| (fg, t, u.min(t))).collect(),
                &keys,
            );
            let (in_service, away): (Vec<DiskSpace>, Vec<DiskSpace>) = {
                let mut a = Vec::new();
                let mut b = Vec::new();
                for (d, away) in disks.iter().zip(&flags) {
                    if *away { b.push(d.clone()) } else { a.push(d.clone()) }
                }
                (a, b)
            };
            let aus = extent_aus(extent);
            let fits = |d: &DiskSpace| d.au_total - d.au_used >= aus;
            let fg = |n: DiskNumber| disks[position(&disks, n)].failgroup;
            let serves = |n: DiskNumber| in_service.iter().any(|d| d.disk == n);
            // The most copies in service any feasible choice has (None: no
            // choice with one in service fits).
            let n = disks.len();
            let mut best: Option<usize> = None;
            for mask in 0u32..(1 << n) {
                if mask.count_ones() as usize != copies {
                    continue;
                }
                let set: Vec<&DiskSpace> = (0..n).filter(|i| mask & (1 << i) != 0).map(|i| &disks[i]).collect();
                let mut groups: Vec<FailGroupId> = set.iter().map(|d| d.failgroup).collect();
                groups.sort_unstable();
                groups.dedup();
                let served = set.iter().filter(|d| serves(d.disk)).count();
                if groups.len() == copies && set.iter().all(|d| fits(d)) && served > 0 {
                    best = best.max(Some(served));
                }
            }
            match place_with_away(&in_service, &away, copies, extent) {
                Ok(set) => {
                    prop_assert_eq!(set.len(), copies);
                    let mut groups: Vec<FailGroupId> = set.iter().map(|n| fg(*n)).collect();
                    groups.sort_unstable();
                    groups.dedup();
                    prop_assert_eq!(groups.len(), copies, "a failure group twice: {:?}", set);
                    let served = set.iter().take_while(|n| serves(**n)).count();
                    prop_assert!(served > 0, "no copy in service: {:?}", set);
                    prop_assert!(set[served..].iter().all(|n| !serves(*n)), "in service first: {:?}", set);
                    prop_assert_eq!(Some(served), best, "as many in service as fit: {:?}", set);
                    for n in &set {
                        prop_assert!(fits(&disks[position(&disks, *n)]));
                    }
                }
                Err(e) => prop_assert!(best.is_none(), "{:?}, yet a choice fits", e),
            }
        }
    }

    #[test]
    fn wide_mul_examples() {
        assert_eq!(wide_mul(1 << 127, 2), (1, 0));
        assert_eq!(wide_mul(u128::MAX, u128::MAX), (u128::MAX - 1, 1));
        assert_eq!(
            cmp_products(u128::MAX, u128::MAX, u128::MAX, u128::MAX - 1),
            Ordering::Greater
        );
    }
}
