//! Checksum maps under damage (`docs/checksums.md`, "Where the checksums
//! live"; `group/maps.rs`): a map never outlives its file's number, and a
//! file cut by damage takes its map to the same size once repaired.
//! (Crashes without damage are the crash simulator's: half its files have
//! maps.)

#![allow(clippy::unwrap_used)]

mod common;

use common::{crash_rig as rig, mount_sim as mount, sim_path as path, MIB};

use cairn_format::group::{map_number, AuAddr, FILE_DIRECTORY};
use cairn_io::DeviceId;
use cairn_io_sim::{CrashAfter, CrashPolicy};
use cairn_store::group::{self, CreateOptions, Group, GroupSelector, Redundancy};

const BLOCK: u64 = 4096;

fn with_checksums() -> CreateOptions {
    CreateOptions {
        checksums: Some(true),
        ..CreateOptions::default()
    }
}

fn entry_places(g: &Group<'_>, dir: u32, index: u32) -> Vec<(AuAddr, u64)> {
    let per_au = g.au_bytes() / BLOCK;
    let extent = g.extents(dir).unwrap()[(u64::from(index) / per_au) as usize];
    extent
        .copies()
        .iter()
        .map(|c| {
            (
                *c,
                u64::from(c.au) * g.au_bytes() + (u64::from(index) % per_au) * BLOCK,
            )
        })
        .collect()
}

fn destroy(engine: &mut CrashAfter, ids: &[DeviceId], places: &[(AuAddr, u64)]) {
    for (addr, at) in places {
        engine
            .inner
            .scribble(ids[usize::from(addr.disk)], *at + 200, &[0x6B; 64]);
    }
}

/// A file with a map whose data entry is lost on every mirror; returns
/// the engine, ids, the file's number and where its data AUs are (`disk
/// DN AU A`, as `check` names them: they leak with the lost entry).
fn lost_data_entry() -> (CrashAfter, Vec<DeviceId>, u32, Vec<String>) {
    let (mut engine, ids) = rig(&[(64 * MIB, "A"), (64 * MIB, "B")], Redundancy::Normal);
    let (number, data, aus) = {
        let mut g = mount(&mut engine, &ids);
        let x = g
            .create_file(&path("x"), 2 * MIB, &with_checksums())
            .unwrap();
        let data = entry_places(&g, FILE_DIRECTORY, x.number);
        let aus = g
            .extents(x.number)
            .unwrap()
            .iter()
            .flat_map(|e| e.copies().to_vec())
            .map(|c| format!("disk D{} AU {}", c.disk, c.au))
            .collect();
        g.dismount().unwrap();
        (x.number, data, aus)
    };
    destroy(&mut engine, &ids, &data);
    (engine, ids, number, aus)
}

/// [`lost_data_entry`], then `rm` of it with the power cut after `budget`
/// writes: the group as the next mount finds it.
fn removed_with_a_crash_after(budget: usize) -> (CrashAfter, Vec<DeviceId>, u32, Vec<String>) {
    let (mut engine, ids, number, leaked) = lost_data_entry();
    let b = engine.budget();
    {
        let mut g = mount(&mut engine, &ids);
        b.set(budget);
        let _ = g.remove(&path("x"));
    }
    engine.budget().set(usize::MAX);
    engine.inner.crash(CrashPolicy::LOSE_ALL);
    (engine, ids, number, leaked)
}

/// `rm` of a file whose data entry is lost on every copy writes the entry
/// free and deletes the map. Crashed at every write of it, the next mount
/// never hands the map to a later file that takes the number.
#[test]
fn a_lost_entry_written_free_never_leaves_its_map_to_the_next_file() {
    let mut gone = 0;
    for budget in 0..60 {
        let (mut engine, ids, number, leaked) = removed_with_a_crash_after(budget);
        let mut g = mount(&mut engine, &ids);
        g.check_invariants().unwrap();
        if g.file_numbers().contains(&number) || g.extents(map_number(number)).is_some() {
            continue;
        }
        let y = g
            .create_file(&path("y"), MIB, &CreateOptions::default())
            .unwrap();
        if y.number != number {
            // The lost entry still holds the number.
            continue;
        }
        gone += 1;
        g.dismount().unwrap();
        let mut g = mount(&mut engine, &ids);
        assert!(
            g.extents(map_number(y.number)).is_none(),
            "budget {budget}: file {} took the map of the file it replaced",
            y.number
        );
        g.check_invariants().unwrap();
        // The lost entry's data AUs leak (check --repair frees them); the
        // map's were freed with it.
        let problems = g.check(false).unwrap().problems;
        assert!(
            problems.iter().all(|p| leaked.contains(&p.location)),
            "budget {budget}: {problems:?}"
        );
    }
    assert!(gone > 0, "the remove never took effect");
}

/// A file with a map whose extent map is cut at mount (its indirect AU
/// destroyed on every copy) reads up to the cut; `check --repair` cuts the
/// file there, and its checksum map with it.
#[test]
fn a_file_cut_by_damage_takes_its_map_to_its_size_once_repaired() {
    let (mut engine, ids) = rig(&[(256 * MIB, "A"), (256 * MIB, "B")], Redundancy::Normal);
    let (number, places) = {
        let mut g = mount(&mut engine, &ids);
        let f = g
            .create_file(&path("big"), 120 * MIB, &with_checksums())
            .unwrap();
        let pointer = g.indirect_aus(f.number).unwrap()[0];
        let places: Vec<(AuAddr, u64)> = pointer
            .copies()
            .iter()
            .map(|c| (*c, u64::from(c.au) * g.au_bytes()))
            .collect();
        g.dismount().unwrap();
        (f.number, places)
    };
    destroy(&mut engine, &ids, &places);
    let mut g = mount(&mut engine, &ids);
    g.check_invariants().unwrap();
    let report = g.check(true).unwrap();
    assert!(!report.problems.is_empty(), "the cut is reported");
    g.check_invariants().unwrap();
    // The file reads up to its cut, and its map holds that many sectors.
    let size = g.file_info(number).unwrap().size_bytes;
    assert!(size < 120 * MIB);
    let map = g.extents(map_number(number)).unwrap().len();
    assert_eq!(map, 1, "{size} bytes need one AU of map");
    assert!(g.check(false).unwrap().problems.is_empty());
}

/// The same crash, then `check --repair` and files that take the space it
/// frees: no AU ends up with two owners.
#[test]
fn a_repair_after_the_crash_gives_no_au_two_owners() {
    for budget in [5, 7, 9] {
        let (mut engine, ids, number, _) = removed_with_a_crash_after(budget);
        {
            let mut g = mount(&mut engine, &ids);
            g.check(true).unwrap();
            assert!(g.check(false).unwrap().problems.is_empty());
            let y = g
                .create_file(&path("y"), MIB, &CreateOptions::default())
                .unwrap();
            assert_eq!(y.number, number);
            for i in 0..8 {
                g.create_file(&path(&format!("z{i}")), 2 * MIB, &CreateOptions::default())
                    .unwrap();
            }
            g.check_invariants().unwrap();
            g.dismount().unwrap();
        }
        let (mut g, report) =
            group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
        assert!(
            report.damage.is_empty(),
            "budget {budget}: {:?}",
            report.damage
        );
        g.check_invariants().unwrap();
        let problems = g.check(false).unwrap().problems;
        assert!(problems.is_empty(), "budget {budget}: {problems:?}");
    }
}
