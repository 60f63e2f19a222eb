//! The data plane's unit tests: latches, the drain of older operations,
//! snapshots.

use cairn_format::extent_map::{Striping, FINE_STRIPE_BYTES};
use cairn_format::group::AuAddr;
use proptest::prelude::*;

use super::*;

const MIB: u64 = 1 << 20;

/// A handle's cache gives what is published: the same `Arc` while the
/// file's snapshot is the same one (whatever else is published), the new
/// snapshot once the file's is replaced, nothing once it is withdrawn,
/// and the new disk view once one is published.
#[test]
fn a_snapshot_cache_gives_what_is_published() {
    let plane = DataPlane::new();
    let layout = FileLayout::new(MIB, Striping::Coarse);
    let snapshot = |number: u32, size: u64, disk: u16| {
        let extents = [Extent::new(&[AuAddr { disk, au: 7 }], true)];
        FileSnapshot::build(number, 1, size, layout, 4096, 1, None, &extents, None)
    };
    let mut cache = SnapshotCache::default();
    plane.publish_file(1, Some(snapshot(1, MIB, 0)));
    plane.publish_disks(
        vec![true, true],
        vec![true, true],
        vec![true, true],
        vec![None, None],
        vec!["a".into(), "b".into()],
    );
    let first = cache.file(&plane, 1).unwrap();
    assert_eq!(first.size_bytes, MIB);
    assert!(Arc::ptr_eq(&first, &cache.file(&plane, 1).unwrap()));
    plane.publish_file(2, Some(snapshot(2, MIB, 1)));
    assert!(
        Arc::ptr_eq(&first, &cache.file(&plane, 1).unwrap()),
        "another file's publication leaves this one's copy"
    );
    plane.publish_file(1, Some(snapshot(1, MIB / 2, 1)));
    let second = cache.file(&plane, 1).unwrap();
    assert_eq!(second.size_bytes, MIB / 2);
    assert_eq!(second.extent(0).unwrap().copies()[0].disk, 1);
    plane.publish_file(1, None);
    assert!(cache.file(&plane, 1).is_none());
    assert_eq!(cache.file(&plane, 2).unwrap().number, 2);

    let view = cache.disks(&plane);
    assert!(view.is_online(0) && view.is_online(1));
    plane.publish_disks(
        vec![true, false],
        vec![true, false],
        vec![true, true],
        vec![None, None],
        vec!["a".into(), "b".into()],
    );
    let view = cache.disks(&plane);
    assert!(view.is_online(0) && !view.is_online(1));
}

/// A holder letting go wakes the takers waiting for that latch (it wakes
/// the shard only when someone waits): a write behind exclusive,
/// exclusive behind a write or a shared holder, exclusive behind
/// exclusive, and a write behind a write of some of the same bytes;
/// and the entry goes once nobody needs it.
#[test]
fn a_taker_waiting_for_a_latch_is_woken_when_it_is_let_go() {
    let plane = Arc::new(DataPlane::new());
    let key = (7, 1, 3);
    let write = Hold::write(8192, 8192);
    for (first, then) in [
        (Hold::Exclusive, write),
        (write, Hold::Exclusive),
        (Hold::Shared, Hold::Exclusive),
        (Hold::Exclusive, Hold::Exclusive),
        (write, Hold::write(12288, 8192)),
        (write, write),
    ] {
        let held = plane.latch(vec![(key, first)]);
        assert!(
            plane.try_latch(vec![(key, then)]).is_none(),
            "{first:?} excludes {then:?}"
        );
        std::thread::scope(|s| {
            let p = plane.clone();
            let waiter = s.spawn(move || drop(p.latch(vec![(key, then)])));
            // Let go only once the waiter waits (a handshake on the
            // latch's own state, not a sleep).
            while plane.waiting(&key) == 0 {
                std::thread::yield_now();
            }
            drop(held);
            waiter.join().unwrap();
        });
        let shard = plane.shard(&key).held.lock_or_recover();
        assert!(
            shard.get(&key).is_none(),
            "{first:?} then {then:?}: entry left"
        );
    }
}

/// Writes hold an extent side by side unless they share a byte (then
/// the later one waits, whatever extent of the two it meets first), and
/// beside the extent's shared holders; a key named twice is held once
/// with what both ask.
#[test]
fn writes_of_other_bytes_go_side_by_side_and_of_the_same_bytes_one_at_a_time() {
    let plane = Arc::new(DataPlane::new());
    let (e0, e1) = ((7, 1, 0), (7, 1, 1));
    let first = plane.latch(vec![(e0, Hold::write(0, 8192)), (e1, Hold::write(0, 8192))]);
    let beside = [
        Hold::write(8192, 8192),
        Hold::write(1 << 20, 4096),
        Hold::Shared,
    ];
    let held: Vec<LatchGuard> = beside
        .iter()
        .map(|h| {
            plane
                .try_latch(vec![(e0, *h)])
                .unwrap_or_else(|| panic!("{h:?} goes beside a write of 0..8192"))
        })
        .collect();
    for (overlapping, keys) in [
        ("the same bytes", vec![(e0, Hold::write(0, 8192))]),
        ("one byte of them", vec![(e0, Hold::write(8191, 1))]),
        ("them and more", vec![(e0, Hold::write(4096, 65536))]),
        (
            "them, met first in the other extent",
            vec![(e1, Hold::write(4096, 4096))],
        ),
    ] {
        assert!(
            plane.try_latch(keys).is_none(),
            "a write of {overlapping} waits"
        );
    }
    assert!(
        plane.try_latch(vec![(e0, Hold::Exclusive)]).is_none(),
        "exclusive waits for the writes"
    );
    drop(first);
    let again = plane
        .try_latch(vec![(e0, Hold::write(0, 8192))])
        .expect("once the first write lets go, its bytes may be written");
    drop((again, held));
    // Named twice: held once, as both ask (merged: the bytes between).
    let twice = plane.latch(vec![
        (e0, Hold::write(0, 4096)),
        (e0, Hold::write(65536, 4096)),
        (e1, Hold::Shared),
        (e1, Hold::Exclusive),
    ]);
    assert!(twice.holds_exclusive(&e1) && !twice.holds_exclusive(&e0));
    assert!(plane
        .try_latch(vec![(e0, Hold::write(8192, 4096))])
        .is_none());
    drop(twice);
    for key in [e0, e1] {
        let shard = plane.shard(&key).held.lock_or_recover();
        assert!(shard.get(&key).is_none(), "{key:?}: entry left");
    }
}

proptest! {
    /// `FileSnapshot::pieces` tiles a range exactly: pieces in order from
    /// 0, each inside one extent (and one stripe unit when fine); a range
    /// past the end has no pieces. Every reader and writer of file bytes
    /// goes through it.
    #[test]
    fn pieces_tile_the_range_inside_their_extents(
        shift in 0u32..=6,
        fine in any::<bool>(),
        sets in 1u64..6,
        pick_offset in any::<u64>(),
        pick_len in any::<u64>(),
    ) {
        let striping = if fine { Striping::Fine } else { Striping::Coarse };
        let layout = FileLayout::new(MIB << shift, striping);
        let count = sets * 8;
        let size = layout.capacity_bytes(count);
        let extents: Vec<Extent> = (0..count)
            .map(|e| Extent::new(&[AuAddr { disk: e as u16, au: e as u32 * 1000 }], true))
            .collect();
        let snap = FileSnapshot::build(1, 1, size, layout, 4096, 1, None, &extents, None);
        let sector = 4096u64;
        let offset = pick_offset % (size / sector) * sector;
        let len = (1 + pick_len % (4 * (MIB << shift) / sector)) * sector;
        let len = len.min(size - offset);
        let pieces = snap.pieces(offset, len).unwrap();
        let mut at = 0u64;
        for piece in &pieces {
            prop_assert_eq!(piece.at as u64, at);
            prop_assert!(piece.len > 0);
            let loc = layout.locate(offset + at);
            prop_assert_eq!(piece.extent, loc.extent);
            prop_assert_eq!(piece.within, loc.offset_in_extent);
            prop_assert!(piece.within + piece.len <= layout.extent_bytes(loc.extent));
            prop_assert_eq!(snap.extent(piece.extent).unwrap().copies()[0].disk, loc.extent as u16);
            if fine {
                prop_assert_eq!(
                    piece.within / FINE_STRIPE_BYTES,
                    (piece.within + piece.len - 1) / FINE_STRIPE_BYTES
                );
            }
            at += piece.len;
        }
        prop_assert_eq!(at, len);
        prop_assert!(snap.pieces(size - sector, 2 * sector).is_none());
    }
}
