//! Label, scan and repair logic on the simulated disk: damage of every kind the
//! simulator can inflict, and a crash at every point of labelling and repair.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use cairn_format::{DiskLabel, HeaderPlacement};
use cairn_io::{DeviceId, IoEngine, IoError};
use cairn_io_sim::{geometry, CrashAfter, CrashPolicy, SimEngine};
use cairn_store::header_copies::{CopyState, HeaderHealth, HeaderScan};
use cairn_store::labeling::{erase_label, write_label, LabelSpec, WriteError};
use cairn_store::repair::{apply, plan, PlanError};
use uuid::Uuid;

const MIB: u64 = 1 << 20;

fn spec(name: &str, uuid: u128) -> LabelSpec {
    LabelSpec {
        label: DiskLabel::parse(name).unwrap(),
        disk_uuid: Uuid::from_u128(uuid),
        now_unix_seconds: 1_763_700_000,
        generation: 1,
    }
}

fn disk(seed: u64, size: u64, logical: u32) -> (SimEngine, DeviceId) {
    disk_with(seed, size, logical, 4096)
}

fn disk_with(seed: u64, size: u64, logical: u32, physical: u32) -> (SimEngine, DeviceId) {
    let mut e = SimEngine::new(seed, 16);
    let d = e.add_disk(geometry(size, logical, physical, 1280 << 10));
    (e, d)
}

#[test]
fn label_writes_three_good_copies_on_512e_and_4kn() {
    for logical in [512, 4096] {
        let (mut e, d) = disk(1, 64 * MIB, logical);
        let header = write_label(&mut e, d, &spec("DATA1", 1)).unwrap();
        assert_eq!(header.logical_sector_bytes, logical);
        assert_eq!(header.copy_offsets_bytes, vec![0, MIB, 63 * MIB]);
        let scan = HeaderScan::read(&mut e, d).unwrap();
        assert_eq!(scan.health(), HeaderHealth::Ok);
        assert_eq!(scan.good().count(), 3);
        // Everything is durable once write_label returns.
        e.crash(CrashPolicy::LOSE_ALL);
        assert_eq!(
            HeaderScan::read(&mut e, d).unwrap().health(),
            HeaderHealth::Ok
        );
    }
}

#[test]
fn wiping_the_first_4_mib_is_repaired_from_the_tail_copy() {
    let (mut e, d) = disk(2, 64 * MIB, 4096);
    write_label(&mut e, d, &spec("DATA1", 2)).unwrap();
    e.scribble(d, 0, &vec![0u8; 4 * MIB as usize]);
    let scan = HeaderScan::read(&mut e, d).unwrap();
    assert_eq!(scan.health(), HeaderHealth::Damaged);
    assert!(matches!(
        scan.slots[0].state,
        CopyState::Bad(cairn_format::HeaderError::Blank)
    ));
    let p = plan(&scan, false).unwrap();
    assert_eq!(p.source_copy, 2);
    assert_eq!(
        p.rewrites.iter().map(|r| r.copy).collect::<Vec<_>>(),
        vec![0, 1]
    );
    apply(&mut e, d, &p).unwrap();
    let scan = HeaderScan::read(&mut e, d).unwrap();
    assert_eq!(scan.health(), HeaderHealth::Ok);
    assert_eq!(scan.newest().unwrap().header.disk_uuid, Uuid::from_u128(2));
}

#[test]
fn bit_rot_in_the_primary_is_detected_and_repaired() {
    let (mut e, d) = disk(3, 64 * MIB, 512);
    write_label(&mut e, d, &spec("DATA1", 3)).unwrap();
    e.rot(d, 0x90, 5);
    let scan = HeaderScan::read(&mut e, d).unwrap();
    assert!(matches!(
        scan.slots[0].state,
        CopyState::Bad(cairn_format::HeaderError::Checksum { .. })
    ));
    let p = plan(&scan, false).unwrap();
    assert_eq!(p.rewrites.len(), 1);
    apply(&mut e, d, &p).unwrap();
    assert_eq!(
        HeaderScan::read(&mut e, d).unwrap().health(),
        HeaderHealth::Ok
    );
}

#[test]
fn a_misdirected_header_write_is_caught_by_read_back() {
    let (mut e, d) = disk(4, 64 * MIB, 4096);
    e.disk_mut(d).faults.misdirect_per_million = 1_000_000;
    let err = write_label(&mut e, d, &spec("DATA1", 4)).unwrap_err();
    assert!(matches!(err, WriteError::Verify { .. }), "{err:?}");
}

#[test]
fn a_copy_found_at_the_wrong_place_is_misplaced_not_good() {
    let (mut e, d) = disk(5, 64 * MIB, 4096);
    let header = write_label(&mut e, d, &spec("DATA1", 5)).unwrap();
    // Copy 1's bytes land on copy 0's place (a misdirected write of old).
    e.scribble(d, 0, &header.encode(1));
    let scan = HeaderScan::read(&mut e, d).unwrap();
    assert!(matches!(scan.slots[0].state, CopyState::Misplaced(_)));
    assert_eq!(scan.health(), HeaderHealth::Damaged);
    apply(&mut e, d, &plan(&scan, false).unwrap()).unwrap();
    assert_eq!(
        HeaderScan::read(&mut e, d).unwrap().health(),
        HeaderHealth::Ok
    );
}

#[test]
fn an_unreadable_primary_is_damage_and_a_write_error_fails_the_repair() {
    let (mut e, d) = disk(6, 64 * MIB, 4096);
    write_label(&mut e, d, &spec("DATA1", 6)).unwrap();
    e.disk_mut(d).faults.read_error_ranges.push(0..4096);
    let scan = HeaderScan::read(&mut e, d).unwrap();
    assert!(matches!(scan.slots[0].state, CopyState::Unreadable(_)));
    assert_eq!(scan.health(), HeaderHealth::Damaged);
    e.disk_mut(d).faults.write_error_ranges.push(0..4096);
    let err = apply(&mut e, d, &plan(&scan, false).unwrap()).unwrap_err();
    assert!(
        matches!(err, WriteError::Io(IoError::Os { errno: 5, .. })),
        "{err:?}"
    );
}

#[test]
fn copies_of_two_disks_conflict_until_forced() {
    let (mut e, d) = disk(7, 64 * MIB, 4096);
    write_label(&mut e, d, &spec("DATA1", 7)).unwrap();
    // Copy 2 replaced by the tail copy of another disk (a half-restored clone).
    let (mut other, od) = disk(8, 64 * MIB, 4096);
    let mut foreign = write_label(&mut other, od, &spec("DATA9", 8)).unwrap();
    foreign.generation = 5;
    e.scribble(d, 63 * MIB, &foreign.encode(2));
    let scan = HeaderScan::read(&mut e, d).unwrap();
    assert_eq!(scan.health(), HeaderHealth::Conflict);
    assert!(matches!(
        plan(&scan, false),
        Err(PlanError::Conflict { .. })
    ));
    let forced = plan(&scan, true).unwrap();
    assert_eq!(
        forced.source.disk_uuid,
        Uuid::from_u128(8),
        "the newest generation wins"
    );
    assert_eq!(forced.rewrites.len(), 2);
}

#[test]
fn a_stale_copy_is_brought_up_to_the_newest_generation() {
    let (mut e, d) = disk(9, 64 * MIB, 4096);
    let mut header = write_label(&mut e, d, &spec("DATA1", 9)).unwrap();
    header.generation = 2;
    for copy in [0, 1] {
        e.scribble(d, header.copy_offsets_bytes[copy], &header.encode(copy));
    }
    let scan = HeaderScan::read(&mut e, d).unwrap();
    assert_eq!(scan.health(), HeaderHealth::Damaged);
    let p = plan(&scan, false).unwrap();
    assert_eq!(p.rewrites.len(), 1);
    assert!(p.rewrites[0].reason.contains("stale"));
    apply(&mut e, d, &p).unwrap();
    let scan = HeaderScan::read(&mut e, d).unwrap();
    assert_eq!(
        (scan.health(), scan.newest().unwrap().header.generation),
        (HeaderHealth::Ok, 2)
    );
}

/// Copy the first 64 MiB worth of header copies of one disk onto another.
fn transplant(from: &SimEngine, fd: DeviceId, to: &mut SimEngine, td: DeviceId, offsets: &[u64]) {
    for offset in offsets {
        let block = from.contents(fd, *offset, 4096);
        to.scribble(td, *offset, &block);
    }
}

#[test]
fn after_the_device_grows_the_recorded_tail_copy_is_still_found() {
    let (mut small, sd) = disk(10, 64 * MIB, 4096);
    let header = write_label(&mut small, sd, &spec("DATA1", 10)).unwrap();
    let (mut grown, gd) = disk(11, 128 * MIB, 4096);
    transplant(&small, sd, &mut grown, gd, &header.copy_offsets_bytes);
    let scan = HeaderScan::read(&mut grown, gd).unwrap();
    assert_eq!(scan.health(), HeaderHealth::Ok);
    assert_eq!(
        scan.slots[2].offset_bytes,
        63 * MIB,
        "the recorded place, not 127 MiB"
    );
}

#[test]
fn after_the_device_shrinks_repair_says_so() {
    let (mut big, bd) = disk(12, 64 * MIB, 4096);
    let header = write_label(&mut big, bd, &spec("DATA1", 12)).unwrap();
    let (mut shrunk, sd) = disk(13, 32 * MIB, 4096);
    transplant(&big, bd, &mut shrunk, sd, &header.copy_offsets_bytes[..2]);
    let scan = HeaderScan::read(&mut shrunk, sd).unwrap();
    assert!(matches!(scan.slots[2].state, CopyState::Outside));
    assert!(matches!(
        plan(&scan, false),
        Err(PlanError::Shrunk { copy: 2, .. })
    ));
}

#[test]
fn erase_removes_every_copy_and_leaves_other_data_alone() {
    let (mut e, d) = disk(14, 64 * MIB, 4096);
    write_label(&mut e, d, &spec("DATA1", 14)).unwrap();
    // Someone wrote their own data over copy 1's place.
    let theirs = vec![0xAB; 4096];
    e.scribble(d, MIB, &theirs);
    let scan = HeaderScan::read(&mut e, d).unwrap();
    assert_eq!(erase_label(&mut e, d, &scan).unwrap(), vec![0, 63 * MIB]);
    let after = HeaderScan::read(&mut e, d).unwrap();
    assert_eq!(after.health(), HeaderHealth::None);
    assert!(!after.has_cairn_bytes());
    assert_eq!(e.contents(d, MIB, 4096), theirs, "not ours, not touched");
}

#[test]
fn a_too_small_device_is_refused_before_any_write() {
    let (mut e, d) = disk(15, 8 * MIB - 4096, 4096);
    let err = write_label(&mut e, d, &spec("DATA1", 15)).unwrap_err();
    assert!(matches!(err, WriteError::TooSmall(_)));
    assert_eq!(e.stats().bytes_written, 0);
    assert!(
        HeaderPlacement::for_device(8 * MIB).is_ok(),
        "8 MiB is the stated minimum"
    );
}

/// Crash labelling after every possible number of mutating requests, with every
/// crash policy: the disk is either unlabelled, or labelled (possibly damaged),
/// never corrupt, and a repair always brings it to a healthy header.
#[test]
fn crash_at_every_point_of_labelling() {
    let policies = [
        CrashPolicy::LOSE_ALL,
        CrashPolicy::KEEP_ALL,
        CrashPolicy::TEAR_ALL,
        CrashPolicy::MIXED,
    ];
    let mut outcomes = std::collections::BTreeSet::new();
    for budget in 0..8 {
        for (p, policy) in policies.iter().enumerate() {
            for seed in 0..4u64 {
                // 512-byte physical sectors, the finest a device tears at. (Every v1
                // field lies in the first sector, so a copy is kept or lost whole.)
                let (inner, d) = disk_with(1000 + seed * 31 + p as u64, 64 * MIB, 512, 512);
                let mut e = CrashAfter::new(inner, budget);
                let _ = write_label(&mut e, d, &spec("DATA1", 77));
                let mut sim = e.inner;
                sim.crash(*policy);
                let scan = HeaderScan::read(&mut sim, d).unwrap();
                let health = scan.health();
                outcomes.insert(format!("{health:?}"));

                let context = format!(
                    "budget {budget}, policy {policy:?}, seed {seed}: {:?}",
                    scan.describe_copies()
                );
                match health {
                    HeaderHealth::None => {}
                    HeaderHealth::Ok => assert_eq!(
                        scan.newest().unwrap().header.disk_uuid,
                        Uuid::from_u128(77),
                        "{context}"
                    ),
                    HeaderHealth::Damaged => {
                        apply(&mut sim, d, &plan(&scan, false).unwrap()).unwrap();
                        assert_eq!(
                            HeaderScan::read(&mut sim, d).unwrap().health(),
                            HeaderHealth::Ok,
                            "{context}"
                        );
                    }
                    other => panic!("{other:?} after a crash: {context}"),
                }
            }
        }
    }
    assert!(
        ["None", "Damaged", "Ok"]
            .iter()
            .all(|o| outcomes.contains(*o)),
        "the enumeration reached every state: {outcomes:?}"
    );
}

/// Crash a repair at every point: the disk stays repairable, and a second repair finishes it.
#[test]
fn crash_at_every_point_of_repair() {
    for budget in 0..6 {
        for (p, policy) in [
            CrashPolicy::LOSE_ALL,
            CrashPolicy::TEAR_ALL,
            CrashPolicy::MIXED,
        ]
        .iter()
        .enumerate()
        {
            let (mut sim, d) = disk_with(2000 + budget as u64 * 7 + p as u64, 64 * MIB, 512, 512);
            write_label(&mut sim, d, &spec("DATA1", 88)).unwrap();
            sim.scribble(d, 0, &vec![0u8; 4 * MIB as usize]);
            let scan = HeaderScan::read(&mut sim, d).unwrap();
            let the_plan = plan(&scan, false).unwrap();
            let mut e = CrashAfter::new(sim, budget);
            let _ = apply(&mut e, d, &the_plan);
            let mut sim = e.inner;
            sim.crash(*policy);
            let scan = HeaderScan::read(&mut sim, d).unwrap();
            assert!(
                matches!(scan.health(), HeaderHealth::Ok | HeaderHealth::Damaged),
                "budget {budget}: {:?}",
                scan.describe_copies()
            );
            apply(&mut sim, d, &plan(&scan, false).unwrap()).unwrap();
            let scan = HeaderScan::read(&mut sim, d).unwrap();
            assert_eq!(scan.health(), HeaderHealth::Ok);
            assert_eq!(scan.newest().unwrap().header.disk_uuid, Uuid::from_u128(88));
        }
    }
}

/// Over old bytes (a device that held data before), a header write torn at a
/// crash leaves a copy that mixes new and old sectors: its checksum must catch
/// it, and no enumeration may end with a torn copy taken for good.
#[test]
fn torn_copies_over_old_data_fail_their_checksum() {
    let mut torn_seen = 0;
    for budget in 0..4 {
        for seed in 0..8u64 {
            let (mut inner, d) = disk_with(3000 + seed * 13 + budget as u64, 64 * MIB, 512, 512);
            let old: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 1) as u8).collect();
            for offset in [0, MIB, 63 * MIB] {
                inner.scribble(d, offset, &old);
            }
            let mut e = CrashAfter::new(inner, budget);
            let _ = write_label(&mut e, d, &spec("DATA1", 99));
            let mut sim = e.inner;
            sim.crash(CrashPolicy::TEAR_ALL);
            let scan = HeaderScan::read(&mut sim, d).unwrap();
            for slot in &scan.slots {
                match &slot.state {
                    CopyState::Bad(cairn_format::HeaderError::Checksum { .. }) => torn_seen += 1,
                    CopyState::Good(h) => assert_eq!(h.header.disk_uuid, Uuid::from_u128(99)),
                    _ => {}
                }
            }
        }
    }
    assert!(torn_seen > 0, "the enumeration produced torn copies");
}
