//! Map blocks read and written through a mounted group on simulated disks.
#![allow(clippy::unwrap_used)]

use cairn_format::group::{map_number, zero_unit_checksum, MapSums, CHECKSUMS_PER_BLOCK};
use cairn_io::{AlignedBuf, DeviceId, IoEngine};
use cairn_io_sim::{CrashAfter, CrashPolicy, SimEngine};

use super::{read_map_block, write_map_block, MapBlock};
use crate::group::file_types::CreateOptions;
use crate::group::mounted::Group;
use crate::group::tests::{create_normal, four_disks_of, group_on_sim};
use crate::group::{GroupError, GroupSelector};
use crate::names::GroupPath;

const MIB: u64 = 1 << 20;

fn mount<'e>(engine: &'e mut dyn IoEngine, ids: &[DeviceId]) -> Group<'e> {
    crate::group::mount(engine, ids, &GroupSelector::Name("T".into()))
        .unwrap()
        .0
}

/// A file of 64 MiB with checksums: 17 map blocks.
fn mapped(g: &mut Group<'_>) -> u32 {
    let options = CreateOptions {
        checksums: Some(true),
        ..CreateOptions::default()
    };
    let path = GroupPath::parse("+T/f").unwrap();
    g.create_file(&path, 64 * MIB, &options).unwrap().number
}

fn sums(seed: u32) -> Box<MapSums> {
    let mut s = Box::new([0u32; CHECKSUMS_PER_BLOCK]);
    for (i, v) in s.iter_mut().enumerate() {
        *v = seed.wrapping_mul(0x9E37_79B9) ^ i as u32;
    }
    s
}

fn read(g: &mut Group<'_>, file: u32, block: u64) -> Result<MapBlock, GroupError> {
    let uuid = g.uuid;
    read_map_block(g, uuid, file, block)
}

fn write(g: &mut Group<'_>, file: u32, block: u64, seed: u32, generation: u64) {
    let uuid = g.uuid;
    write_map_block(g, None, uuid, (file, block), &sums(seed), generation).unwrap();
}

/// Where each copy of block `block` of the map is: (device, offset).
fn copies_of(g: &Group<'_>, ids: &[DeviceId], file: u32, block: u64) -> Vec<(DeviceId, u64)> {
    let offset = block * 4096;
    let snap = g.plane.file(map_number(file)).unwrap();
    let loc = snap.layout.locate(offset);
    let extent = *snap.extent(loc.extent).unwrap();
    assert!(extent.initialized);
    extent
        .copies()
        .iter()
        .map(|c| {
            (
                ids[usize::from(c.disk)],
                u64::from(c.au) * snap.au_bytes + loc.offset_in_extent,
            )
        })
        .collect()
}

/// A map block never written holds the zero unit's checksum everywhere; a
/// written one reads back as written, its first write and the in-place
/// ones after it; each later generation wins.
#[test]
fn a_map_block_reads_back_as_written_and_blank_as_zero_units() {
    let (mut sim, ids) = group_on_sim();
    let mut g = mount(&mut sim, &ids);
    let file = mapped(&mut g);
    let zero = zero_unit_checksum(4096).unwrap();
    let fresh = read(&mut g, file, 16).unwrap();
    assert_eq!(fresh.generation, 0);
    assert!(fresh.sums.iter().all(|s| *s == zero));
    write(&mut g, file, 16, 1, 1);
    assert_eq!(
        read(&mut g, file, 16).unwrap(),
        MapBlock {
            sums: sums(1),
            generation: 1
        }
    );
    write(&mut g, file, 16, 2, 2);
    assert_eq!(
        read(&mut g, file, 16).unwrap(),
        MapBlock {
            sums: sums(2),
            generation: 2
        }
    );
    // Its neighbour, in the same extent, was never written: still zeros.
    let next = read(&mut g, file, 15).unwrap();
    assert_eq!((next.generation, next.sums[0]), (0, zero));
    let e = read(&mut g, file, 17).unwrap_err();
    assert!(e.to_string().contains("has no block 17"), "{e}");
    g.dismount().unwrap();
    let mut g = mount(&mut sim, &ids);
    assert_eq!(
        read(&mut g, file, 16).unwrap(),
        MapBlock {
            sums: sums(2),
            generation: 2
        }
    );
}

/// The newest valid copy wins: a copy left older by a lost write, or
/// rotten, is passed over; a block damaged on every copy is an error
/// that names it, never zeros.
#[test]
fn the_newest_valid_copy_wins_and_a_block_bad_everywhere_is_an_error() {
    let (mut sim, ids) = group_on_sim();
    let (file, copies) = {
        let mut g = mount(&mut sim, &ids);
        let file = mapped(&mut g);
        write(&mut g, file, 3, 7, 7);
        let copies = copies_of(&g, &ids, file, 3);
        g.dismount().unwrap();
        (file, copies)
    };
    assert_eq!(copies.len(), 2, "a normal-redundancy map has two copies");
    let image = |sim: &mut SimEngine, (dev, at): (DeviceId, u64)| -> Vec<u8> {
        sim.read_at(dev, at, 4096).unwrap()[..].to_vec()
    };
    let put = |sim: &mut SimEngine, (dev, at): (DeviceId, u64), bytes: &[u8]| {
        sim.write_at(dev, at, AlignedBuf::from_slice(bytes), false)
            .unwrap();
    };
    let gen7 = image(&mut sim, copies[0]);
    {
        let mut g = mount(&mut sim, &ids);
        write(&mut g, file, 3, 8, 8);
        g.dismount().unwrap();
    }
    // The primary copy lost the write of generation 8.
    put(&mut sim, copies[0], &gen7);
    {
        let mut g = mount(&mut sim, &ids);
        assert_eq!(
            read(&mut g, file, 3).unwrap(),
            MapBlock {
                sums: sums(8),
                generation: 8
            }
        );
        g.dismount().unwrap();
    }
    // The copy with generation 8 rots: the older valid one is all there is.
    let mut rotten = image(&mut sim, copies[1]);
    rotten[100] ^= 0x40;
    put(&mut sim, copies[1], &rotten);
    {
        let mut g = mount(&mut sim, &ids);
        assert_eq!(
            read(&mut g, file, 3).unwrap(),
            MapBlock {
                sums: sums(7),
                generation: 7
            }
        );
        g.dismount().unwrap();
    }
    put(&mut sim, copies[0], &rotten);
    let mut g = mount(&mut sim, &ids);
    let e = read(&mut g, file, 3).unwrap_err();
    assert!(matches!(e, GroupError::Unreadable(_)), "{e}");
    assert!(e.to_string().contains("block 3 of file"), "{e}");
}

/// Copy after copy, each flushed first: a power cut at any request of an
/// in-place write of a map block, tearing what was not flushed, leaves a
/// block that reads as the old one or the new one, never an error or a mix.
#[test]
fn a_power_cut_at_any_point_of_a_map_block_write_leaves_old_or_new() {
    for cut in 0..6 {
        let (mut sim, ids) = four_disks_of(512);
        create_normal(&mut sim, &ids).dismount().unwrap();
        let mut engine = CrashAfter::vanishing(sim, usize::MAX);
        let budget = engine.budget();
        let file = {
            let mut g = mount(&mut engine, &ids);
            let file = mapped(&mut g);
            write(&mut g, file, 9, 1, 1);
            g.sync().unwrap();
            budget.set(cut);
            let uuid = g.uuid;
            // Past the cut every request vanishes: the write "succeeds".
            write_map_block(&mut g, None, uuid, (file, 9), &sums(2), 2).unwrap();
            std::mem::forget(g);
            file
        };
        engine.inner.crash(CrashPolicy::TEAR_ALL);
        budget.set(usize::MAX);
        let mut g = mount(&mut engine, &ids);
        let got = read(&mut g, file, 9).unwrap();
        assert!(
            got == MapBlock {
                sums: sums(1),
                generation: 1
            } || got
                == MapBlock {
                    sums: sums(2),
                    generation: 2
                },
            "cut after {cut} requests: generation {}",
            got.generation
        );
        if cut >= 4 {
            assert_eq!(got.generation, 2, "both copies written and flushed");
        }
        g.dismount().unwrap();
    }
}

/// `check` reads every written map block: a copy older than the newest
/// (a lost write) or damaged is reported and, with `--repair`, rewritten
/// from the newest; a block with no valid copy is reported, not repaired.
#[test]
fn check_reports_and_repairs_a_map_block_copy_that_is_not_the_newest() {
    let (mut sim, ids) = group_on_sim();
    let (file, copies) = {
        let mut g = mount(&mut sim, &ids);
        let file = mapped(&mut g);
        write(&mut g, file, 5, 1, 1);
        let copies = copies_of(&g, &ids, file, 5);
        let old = sim_image(&mut g, copies[0]);
        write(&mut g, file, 5, 2, 2);
        let report = g.check(false).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        g.dismount().unwrap();
        sim.write_at(
            copies[1].0,
            copies[1].1,
            AlignedBuf::from_slice(&old),
            false,
        )
        .unwrap();
        (file, copies)
    };
    {
        let mut g = mount(&mut sim, &ids);
        let report = g.check(false).unwrap();
        let found: Vec<(&str, &str)> = report
            .problems
            .iter()
            .map(|p| (p.location.as_str(), p.what.as_str()))
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].0.starts_with(&format!(
                "block 5 of the checksum map of file {file} copy on"
            )) && found[0].1 == "stale: generation 1, the newest copy has 2",
            "{found:?}"
        );
        let repaired = g.check(true).unwrap();
        assert!(
            repaired.clean() && repaired.problems.len() == 1,
            "{repaired:?}"
        );
        let again = g.check(false).unwrap();
        assert!(again.problems.is_empty(), "{:?}", again.problems);
        assert_eq!(read(&mut g, file, 5).unwrap().generation, 2);
        g.dismount().unwrap();
    }
    for (dev, at) in &copies {
        sim.write_at(*dev, *at, AlignedBuf::from_slice(&[0x5A; 4096]), false)
            .unwrap();
    }
    let mut g = mount(&mut sim, &ids);
    let report = g.check(true).unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    let p = &report.problems[0];
    assert!(
        p.what.starts_with("no valid copy") && !p.repairable && !report.clean(),
        "{p:?}"
    );
}

/// The bytes of a copy, read through the group's engine.
fn sim_image(g: &mut Group<'_>, (dev, at): (DeviceId, u64)) -> Vec<u8> {
    g.engine.read_at(dev, at, 4096).unwrap()[..].to_vec()
}

/// A copy on a disk taken offline is marked stale, durably, before any
/// byte of the new block lands on the others: a power cut at any request
/// never leaves the online copy newer with the offline one unmarked (it
/// would come back, resynced without this AU, holding the older block).
#[test]
fn an_offline_copy_is_marked_stale_before_the_block_lands_elsewhere() {
    let mut cut = 0;
    loop {
        let (sim, ids) = group_on_sim();
        let mut engine = CrashAfter::vanishing(sim, usize::MAX);
        let budget = engine.budget();
        let (file, away) = {
            let mut g = mount(&mut engine, &ids);
            let file = mapped(&mut g);
            write(&mut g, file, 2, 1, 1);
            let snap = g.plane.file(map_number(file)).unwrap();
            let extent = *snap.extent(0).unwrap();
            let away = extent.copies()[1].disk;
            let name = g.disk_name(away);
            g.offline_disks(&[name], None).unwrap();
            g.sync().unwrap();
            budget.set(cut);
            let uuid = g.uuid;
            write_map_block(&mut g, None, uuid, (file, 2), &sums(2), 2).unwrap();
            let all_ran = budget.get() > 0;
            std::mem::forget(g);
            if all_ran {
                break;
            }
            (file, away)
        };
        engine.inner.crash(CrashPolicy::LOSE_ALL);
        budget.set(usize::MAX);
        let mut g = mount(&mut engine, &ids);
        let now = read(&mut g, file, 2).unwrap();
        let extent = g.extents(map_number(file)).unwrap()[0];
        let slot = extent.copies().iter().position(|c| c.disk == away).unwrap();
        if now.generation == 2 {
            assert_ne!(
                extent.stale[slot], 0,
                "cut after {cut} requests: the online copy holds the new block and the offline one is not marked"
            );
        }
        g.dismount().unwrap();
        cut += 1;
    }
    assert!(cut > 2, "the sweep reached the write ({cut} requests)");
}

/// A map block write that reaches no copy fails, and marks no copy
/// stale: every copy keeps the block it had, and is read once the disks
/// answer again.
#[test]
fn a_map_block_write_that_reaches_no_copy_fails_and_marks_nothing() {
    let (mut sim, ids) = group_on_sim();
    let (file, copies) = {
        let mut g = mount(&mut sim, &ids);
        let file = mapped(&mut g);
        write(&mut g, file, 4, 1, 1);
        let copies = copies_of(&g, &ids, file, 4);
        g.dismount().unwrap();
        (file, copies)
    };
    for (dev, at) in &copies {
        sim.disk_mut(*dev)
            .faults
            .write_error_ranges
            .push(*at..*at + 4096);
    }
    {
        let mut g = mount(&mut sim, &ids);
        let uuid = g.uuid;
        // Both disks failed it: the group stops (two failure groups lost).
        let e = write_map_block(&mut g, None, uuid, (file, 4), &sums(2), 2).unwrap_err();
        assert!(e.to_string().contains("the group stopped"), "{e}");
        std::mem::forget(g);
    }
    for (dev, _) in &copies {
        sim.disk_mut(*dev).faults.write_error_ranges.clear();
    }
    let mut g = mount(&mut sim, &ids);
    let extent = g.extents(map_number(file)).unwrap()[0];
    assert!(extent.stale.iter().all(|s| *s == 0), "{extent:?}");
    assert_eq!(
        read(&mut g, file, 4).unwrap(),
        MapBlock {
            sums: sums(1),
            generation: 1
        }
    );
}
