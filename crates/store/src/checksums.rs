//! Which copy of a unit is right, judged by checksum (`docs/checksums.md`):
//! a function of data, called by the read path, scrub and the recovery of
//! the checksum log alike.
//!
//! A unit is a sector, so after any crash each copy holds the unit's old
//! bytes, its new bytes, or damage (rot, a write that landed elsewhere, a
//! disk written by someone else) — never half of old and new. Its
//! *candidates* are the checksums it may rightly hold, newest first:
//! - at recovery, the checksum log's intents for the unit (newest first),
//!   then the checksum map's;
//! - on a live read, the checksum of a write of the unit still in flight,
//!   then the one before it (the read may see either);
//! - otherwise, the map's alone.
//!
//! The rule: the unit holds the **newest candidate that some copy
//! matches**. An acknowledged write reached every copy, so its candidate
//! wins over a copy that lost the write; an unacknowledged one wins only
//! where it landed whole. No copy matching any candidate: the unit is
//! damaged on every copy read, and a read of it fails rather than return
//! bytes nothing vouches for. And when the newest candidate is of an
//! acknowledged (flushed) write that no copy holds, the disks lost it after
//! saying it was durable: the older bytes they hold are not the unit's, and
//! it is [`Judgement::Lost`].

/// What a unit's copies are, against its candidates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// The unit holds candidate `candidate` (0 the newest), `checksum`.
    Holds {
        candidate: usize,
        checksum: u32,
        /// Copies that match it: any may be returned.
        good: Vec<usize>,
        /// Copies that match an older candidate: right to read beside a
        /// write in flight, behind once the write is known complete
        /// (recovery rewrites them; a live read leaves them to the write).
        older: Vec<usize>,
        /// Copies read that match no candidate: damaged, to be rewritten
        /// from a good copy and counted against their disks.
        bad: Vec<usize>,
    },
    /// Every copy read matches no candidate (`read` copies were read).
    Damaged { read: usize },
    /// The newest candidate is of an acknowledged write and no copy holds
    /// it; `older` copies hold an older candidate's bytes: a write the
    /// disks lost after acknowledging it.
    Lost { older: Vec<usize> },
    /// No copy could be read.
    Unread,
}

/// Judge a unit: `candidates` newest first; `newest_acknowledged`, whether
/// the newest is of a write acknowledged as durable (recovery knows it from
/// the log's `flushed_through`; a live read's newest is the table's, and
/// any older one a write's still in flight, so it passes `false`);
/// `copies`, each copy's checksum of the unit as read (`None`: its read
/// failed, which is the disk path's business, not a checksum's).
pub fn judge(candidates: &[u32], newest_acknowledged: bool, copies: &[Option<u32>]) -> Judgement {
    let read = copies.iter().flatten().count();
    if read == 0 {
        return Judgement::Unread;
    }
    let rank = |sum: u32| candidates.iter().position(|c| *c == sum);
    let Some(candidate) = copies.iter().flatten().filter_map(|s| rank(*s)).min() else {
        return Judgement::Damaged { read };
    };
    let (mut good, mut older, mut bad) = (Vec::new(), Vec::new(), Vec::new());
    for (i, sum) in copies.iter().enumerate() {
        let Some(sum) = sum else { continue };
        match rank(*sum) {
            Some(r) if r == candidate => good.push(i),
            Some(_) => older.push(i),
            None => bad.push(i),
        }
    }
    if candidate > 0 && newest_acknowledged {
        return Judgement::Lost { older: good };
    }
    Judgement::Holds {
        candidate,
        checksum: candidates[candidate],
        good,
        older,
        bad,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_newest_candidate_a_copy_matches_wins() {
        // New on copy 0, old (a lost write) on copy 1, rot on copy 2.
        assert_eq!(
            judge(&[20, 10], true, &[Some(20), Some(10), Some(99)]),
            Judgement::Holds {
                candidate: 0,
                checksum: 20,
                good: vec![0],
                older: vec![1],
                bad: vec![2]
            }
        );
        // The write reached no copy: the old bytes, everywhere.
        assert_eq!(
            judge(&[20, 10], false, &[Some(10), None, Some(10)]),
            Judgement::Holds {
                candidate: 1,
                checksum: 10,
                good: vec![0, 2],
                older: vec![],
                bad: vec![]
            }
        );
        assert_eq!(
            judge(&[20, 10], true, &[Some(1), Some(2)]),
            Judgement::Damaged { read: 2 }
        );
        assert_eq!(judge(&[20, 10], true, &[None, None]), Judgement::Unread);
        assert_eq!(
            judge(&[], false, &[Some(1)]),
            Judgement::Damaged { read: 1 }
        );
        // An acknowledged write no copy holds: lost by the disks, not
        // "the old bytes".
        assert_eq!(
            judge(&[20, 10], true, &[Some(10), Some(99), Some(10)]),
            Judgement::Lost { older: vec![0, 2] }
        );
    }

    /// What became of one copy of a unit when a write of it met a crash.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Fate {
        /// The new bytes landed.
        Landed,
        /// The write never reached it: the old bytes (only when the write
        /// was not acknowledged).
        NotReached,
        /// The device said done and kept the old bytes.
        Lost,
        /// The medium changed it (or someone else wrote it).
        Rotted,
        /// Another unit's write landed here.
        Misdirected,
        /// Its read fails.
        Unreadable,
    }

    fn fate() -> impl Strategy<Value = Fate> {
        prop_oneof![
            4 => Just(Fate::Landed),
            2 => Just(Fate::NotReached),
            1 => Just(Fate::Lost),
            1 => Just(Fate::Rotted),
            1 => Just(Fate::Misdirected),
            1 => Just(Fate::Unreadable),
        ]
    }

    proptest! {
        /// The claims of docs/checksums.md, "Recovery", over every fate of
        /// every copy: an acknowledged write reads back new wherever some
        /// copy holds it; an unacknowledged one reads old or new; damage is
        /// never returned; a unit is called damaged only where no copy holds
        /// bytes some candidate vouches for; and what recovery rewrites is
        /// exactly the copies that do not hold what is returned.
        #[test]
        fn a_crash_at_any_point_returns_old_or_new_and_never_damage(
            fates in proptest::collection::vec(fate(), 1..=3),
            acked in any::<bool>(),
            intent_landed in any::<bool>(),
            (old, new) in (any::<u32>(), any::<u32>()).prop_filter("distinct", |(o, n)| o != n),
        ) {
            // An acknowledged write's intent is durable and it reached every
            // copy (a lost write is the device's lie, not "not reached").
            let intent_landed = intent_landed || acked;
            let fates: Vec<Fate> = fates
                .into_iter()
                .map(|f| if acked && f == Fate::NotReached { Fate::Landed } else { f })
                .collect();
            // Damage is bytes whose checksum is neither old nor new.
            let damage = |i: usize| old.wrapping_add(new).wrapping_add(1 + i as u32);
            let copies: Vec<Option<u32>> = fates
                .iter()
                .enumerate()
                .map(|(i, f)| match f {
                    Fate::Landed => Some(new),
                    Fate::NotReached | Fate::Lost => Some(old),
                    Fate::Rotted | Fate::Misdirected => {
                        Some(damage(i)).filter(|d| *d != old && *d != new).or(Some(damage(i + 7)))
                    }
                    Fate::Unreadable => None,
                })
                .collect();
            let candidates: Vec<u32> = if intent_landed { vec![new, old] } else { vec![old] };
            let holds_new = fates.contains(&Fate::Landed);
            let holds_old = fates.iter().any(|f| matches!(f, Fate::NotReached | Fate::Lost));
            match judge(&candidates, acked, &copies) {
                Judgement::Holds { checksum, good, older, bad, .. } => {
                    prop_assert!(checksum == new || checksum == old, "damage returned");
                    if acked {
                        prop_assert_eq!(checksum, new, "an acknowledged write read back old");
                    }
                    if acked && holds_new {
                        prop_assert_eq!(checksum, new, "an acknowledged write read back old");
                    }
                    if intent_landed && holds_new {
                        prop_assert_eq!(checksum, new, "a write with its intent durable lost to older bytes");
                    }
                    for i in good.iter() {
                        prop_assert_eq!(copies[*i], Some(checksum));
                    }
                    // Recovery rewrites exactly the readable copies that do
                    // not hold what is returned.
                    let mut rewrite: Vec<usize> = older.iter().chain(bad.iter()).copied().collect();
                    rewrite.sort_unstable();
                    let differ: Vec<usize> = (0..copies.len())
                        .filter(|i| copies[*i].is_some_and(|s| s != checksum))
                        .collect();
                    prop_assert_eq!(rewrite, differ);
                }
                Judgement::Lost { older } => {
                    // Only an acknowledged write that no copy holds, with
                    // older bytes on some copy: never returned as the unit's.
                    prop_assert!(acked && !holds_new && holds_old);
                    prop_assert!(!older.is_empty());
                }
                Judgement::Damaged { .. } => {
                    // Only where no copy holds old bytes, nor new ones with
                    // their intent durable. The one case of new bytes landed
                    // whole and not vouched for: an unacknowledged write
                    // whose intent a power cut lost (docs/checksums.md, "The
                    // case this does not decide").
                    prop_assert!(!holds_old);
                    prop_assert!(!(intent_landed && holds_new));
                }
                Judgement::Unread => {
                    prop_assert!(fates.iter().all(|f| *f == Fate::Unreadable));
                }
            }
        }
    }
}
