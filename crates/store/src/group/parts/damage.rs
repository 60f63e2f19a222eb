//! The damage a mount found, and what became of it: metadata blocks with
//! no valid copy on any disk, AUs that more than one extent map claims,
//! members smaller than the group recorded, and the metadata copies
//! rewritten from a good mirror (or, read-only, left as found).
//!
//! Owned by the [`Group`](super::super::Group) (changed only under the
//! group's `&mut`, i.e. under a live group's `meta`). What is damaged is
//! found at mount (`mount.rs`) and settled by `check --repair` or by the
//! removal of what it belonged to (a file, a lost entry's names); whether
//! a file may be written, and a number handed out, asks here. The rules
//! that tie damage to the files (a cut map is a file's, a lost entry's
//! number has no file) are checked across parts (`invariants.rs`).

use std::collections::BTreeMap;

use super::violations::Violations;

/// A metadata block with no valid copy on any disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(in crate::group) enum LostBlock {
    /// A user file's directory entry: the file cannot be reached.
    Entry(u32),
    /// Part of a user file's extent map (an indirect block, or an entry that
    /// contradicts itself): the file reads up to where its map is whole, and
    /// is not written until `check --repair` cuts it there.
    Map(u32),
    /// A block of the alias directory: the names in it are gone.
    Alias(u64),
    Templates,
    Attributes,
}

#[derive(Debug, Default)]
pub(in crate::group) struct Damage {
    /// Metadata blocks found with no valid copy at mount, and why: what
    /// they held is gone. `check --repair` rewrites them.
    lost: BTreeMap<LostBlock, String>,
    /// AUs that more than one extent map claims, with each claimant's file
    /// number: never freed while another still claims it, and their files
    /// are never written.
    shared: BTreeMap<(u16, u64), Vec<u32>>,
    /// Members found smaller than the group recorded, by label, described:
    /// treated as missing, and problems for `check`.
    short: Vec<(String, String)>,
    /// Metadata copies rewritten from a good mirror since mount.
    repaired_copies: u64,
    /// Metadata copies found damaged, blank or stale that a read-only mount
    /// left as they were.
    copies_left_damaged: u64,
}

impl Damage {
    // -----------------------------------------------------------------------
    // Blocks lost

    /// Block `block` has no valid copy, for `why`.
    pub(in crate::group) fn lose(&mut self, block: LostBlock, why: String) {
        self.lost.insert(block, why);
    }

    pub(in crate::group) fn is_lost(&self, block: LostBlock) -> bool {
        self.lost.contains_key(&block)
    }

    /// Whether any block of the alias directory is lost (names are missing).
    pub(in crate::group) fn alias_lost(&self) -> bool {
        self.lost.keys().any(|l| matches!(l, LostBlock::Alias(_)))
    }

    /// Every block lost, and why, in order.
    pub(in crate::group) fn lost(&self) -> impl Iterator<Item = (&LostBlock, &String)> + '_ {
        self.lost.iter()
    }

    pub(in crate::group) fn nothing_lost(&self) -> bool {
        self.lost.is_empty()
    }

    /// Block `block` is written afresh (repaired, or freed with what it
    /// held): whether it was lost.
    pub(in crate::group) fn rewritten(&mut self, block: LostBlock) -> bool {
        self.lost.remove(&block).is_some()
    }

    /// File `number` is gone: a cut map's damage goes with it (the
    /// number's next file has a map of its own).
    pub(in crate::group) fn file_removed(&mut self, number: u32) {
        self.lost.remove(&LostBlock::Map(number));
    }

    // -----------------------------------------------------------------------
    // AUs claimed twice

    /// The AUs more than one map claims, as the mount's audit found them.
    pub(in crate::group) fn set_shared(&mut self, shared: BTreeMap<(u16, u64), Vec<u32>>) {
        self.shared = shared;
    }

    pub(in crate::group) fn has_shared(&self) -> bool {
        !self.shared.is_empty()
    }

    /// Each AU more than one map claims (disk, AU) with its claimants.
    pub(in crate::group) fn shared(&self) -> impl Iterator<Item = (&(u16, u64), &Vec<u32>)> + '_ {
        self.shared.iter()
    }

    /// An AU file `number` shares with another, if any.
    pub(in crate::group) fn sharing(&self, number: u32) -> Option<(&(u16, u64), &Vec<u32>)> {
        self.shared
            .iter()
            .find(|(_, owners)| owners.contains(&number))
    }

    /// File `file` lets go of AUs `aus` of `disk`: it no longer claims the
    /// shared ones among them. Returns those AUs, which are not to be
    /// freed (another map still claims each); an AU left with one
    /// claimant is shared no more.
    pub(in crate::group) fn release(
        &mut self,
        disk: u16,
        aus: std::ops::Range<u64>,
        file: u32,
    ) -> Vec<u64> {
        let shared: Vec<u64> = self
            .shared
            .range((disk, aus.start)..(disk, aus.end))
            .map(|((_, au), _)| *au)
            .collect();
        for au in &shared {
            if let Some(owners) = self.shared.get_mut(&(disk, *au)) {
                if let Some(i) = owners.iter().position(|o| *o == file) {
                    owners.swap_remove(i);
                }
                if owners.len() <= 1 {
                    self.shared.remove(&(disk, *au));
                }
            }
        }
        shared
    }

    // -----------------------------------------------------------------------
    // Disks smaller than recorded, copies rewritten

    /// The members found smaller than the group recorded: (label, what).
    pub(in crate::group) fn set_short(&mut self, short: Vec<(String, String)>) {
        self.short = short;
    }

    /// Whether the disk labelled `label` was found smaller than recorded.
    pub(in crate::group) fn is_short(&self, label: &str) -> bool {
        self.short.iter().any(|(l, _)| l == label)
    }

    /// What each short disk is, one line each.
    pub(in crate::group) fn short(&self) -> impl Iterator<Item = &String> + '_ {
        self.short.iter().map(|(_, what)| what)
    }

    /// `n` metadata copies were rewritten from a good one.
    pub(in crate::group) fn copies_repaired(&mut self, n: u64) {
        self.repaired_copies += n;
    }

    /// `n` damaged metadata copies were left as found (read-only).
    pub(in crate::group) fn copies_left(&mut self, n: u64) {
        self.copies_left_damaged += n;
    }

    pub(in crate::group) fn repaired_copies(&self) -> u64 {
        self.repaired_copies
    }

    pub(in crate::group) fn copies_left_damaged(&self) -> u64 {
        self.copies_left_damaged
    }

    // -----------------------------------------------------------------------
    // Invariants

    /// What holds between any two operations:
    /// - an AU listed as shared has two claims or more (one file's map may
    ///   claim it twice; a claim left alone owns it, and it is freed with
    ///   its file);
    /// - no file's entry is both lost and its map cut (a lost entry has no
    ///   map to cut).
    pub(in crate::group) fn check_invariants(&self, out: &mut Violations) {
        for ((disk, au), owners) in &self.shared {
            out.check(owners.len() >= 2, || {
                format!("AU {au} of disk {disk} is listed as shared by {owners:?}")
            });
        }
        for block in self.lost.keys() {
            if let LostBlock::Map(n) = block {
                out.check(!self.lost.contains_key(&LostBlock::Entry(*n)), || {
                    format!("file {n}'s entry is lost and its map listed as cut")
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broken(d: &Damage) -> Vec<String> {
        let mut v = Violations::default();
        d.check_invariants(&mut v);
        v.lines().to_vec()
    }

    #[test]
    fn an_au_is_shared_until_one_claimant_is_left_and_stays_unfreed_until_then() {
        let mut d = Damage::default();
        d.set_shared(BTreeMap::from([
            ((0, 10), vec![300, 301, 302]),
            ((0, 11), vec![300, 301]),
            ((1, 10), vec![300, 303]),
        ]));
        assert!(broken(&d).is_empty());
        assert_eq!(d.sharing(302).map(|(at, _)| *at), Some((0, 10)));
        // 300 lets go of AUs 9..12 of disk 0: 10 and 11 stay used.
        assert_eq!(d.release(0, 9..12, 300), vec![10, 11]);
        assert_eq!(d.shared().count(), 2, "AU 11 is 301's alone now");
        assert!(d.sharing(300).is_some(), "still on disk 1");
        assert_eq!(d.release(1, 10..11, 300), vec![10]);
        assert!(d.sharing(300).is_none());
        assert_eq!(d.release(0, 10..11, 301), vec![10]);
        assert!(!d.has_shared());
        assert!(broken(&d).is_empty());
        d.set_shared(BTreeMap::from([((0, 5), vec![300])]));
        assert!(broken(&d)[0].contains("AU 5 of disk 0 is listed as shared by [300]"));
    }

    #[test]
    fn a_cut_map_goes_with_its_file_and_a_lost_entry_has_none() {
        let mut d = Damage::default();
        d.lose(LostBlock::Map(300), "indirect block 0 is blank".into());
        d.lose(LostBlock::Alias(2), "blank".into());
        assert!(d.is_lost(LostBlock::Map(300)) && d.alias_lost());
        d.file_removed(300);
        assert!(!d.is_lost(LostBlock::Map(300)));
        assert!(d.rewritten(LostBlock::Alias(2)) && !d.rewritten(LostBlock::Alias(2)));
        assert!(d.nothing_lost());
        d.lose(LostBlock::Entry(301), "blank".into());
        d.lose(LostBlock::Map(301), "cut".into());
        assert!(broken(&d)[0].contains("file 301's entry is lost"));
    }

    #[test]
    fn a_short_disk_is_known_by_its_label() {
        let mut d = Damage::default();
        d.set_short(vec![(
            "DATA_0001".into(),
            "disk DATA_0001 is 5 bytes".into(),
        )]);
        assert!(d.is_short("DATA_0001") && !d.is_short("DATA_000"));
        assert_eq!(d.short().count(), 1);
    }
}
