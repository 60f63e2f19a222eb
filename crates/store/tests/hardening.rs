//! Disk groups on simulated disks: the defects an adversarial pass and a
//! review found in the store (stale metadata winning over newer copies, a
//! commit point passed with a block on no copy, AUs owned twice, a write too
//! big for one transaction...), each as the scenario that showed it.

#![allow(clippy::unwrap_used)]

use cairn_format::group::{AuAddr, FILE_DIRECTORY};
use cairn_format::DiskLabel;
use cairn_io::DeviceId;
use cairn_io_sim::{geometry, CrashAfter, SimEngine};
use cairn_store::group::{
    self, CreateOptions, Group, GroupSelector, GroupSpec, NewDisk, Redundancy,
};
use cairn_store::labeling::{write_label, LabelSpec};
use cairn_store::names::GroupPath;
use uuid::Uuid;

const MIB: u64 = 1 << 20;
const BLOCK: u64 = 4096;

/// Labelled simulated disks `(size, failure group)` and a group SIM over
/// them, created and dismounted.
fn rig(disks: &[(u64, &str)], redundancy: Redundancy) -> (CrashAfter, Vec<DeviceId>) {
    let mut sim = SimEngine::new(11, 64);
    let mut ids = Vec::new();
    for (i, (size, _)) in disks.iter().enumerate() {
        let d = sim.add_disk(geometry(*size, 4096, 4096, 512 << 10));
        write_label(
            &mut sim,
            d,
            &LabelSpec {
                label: DiskLabel::parse(&format!("D{i}")).unwrap(),
                disk_uuid: Uuid::from_u128(0xD15C << 16 | i as u128),
                now_unix_seconds: 1_763_700_000,
                generation: 1,
            },
        )
        .unwrap();
        ids.push(d);
    }
    let mut engine = CrashAfter::vanishing(sim, usize::MAX);
    let new: Vec<NewDisk> = ids
        .iter()
        .zip(disks)
        .map(|(d, (_, fg))| NewDisk {
            device: *d,
            failgroup: Some((*fg).to_string()),
        })
        .collect();
    group::create(
        &mut engine,
        &new,
        &GroupSpec {
            name: "SIM".into(),
            redundancy,
            au_bytes: MIB,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1_763_700_000,
            group_uuid: Uuid::from_u128(0x5EED),
        },
    )
    .unwrap()
    .dismount()
    .unwrap();
    (engine, ids)
}

fn mount<'e>(engine: &'e mut CrashAfter, ids: &[DeviceId]) -> Group<'e> {
    group::mount(engine, ids, &GroupSelector::Name("SIM".into()))
        .unwrap()
        .0
}

fn path(name: &str) -> GroupPath {
    GroupPath::parse(&format!("+SIM/{name}")).unwrap()
}

/// Where copy `copy` of file `number`'s directory entry lives: (disk, byte offset).
fn entry_place(g: &Group<'_>, number: u32, copy: usize) -> (AuAddr, u64) {
    let per_au = g.au_bytes() / BLOCK;
    let extent = g.extents(FILE_DIRECTORY).unwrap()[(u64::from(number) / per_au) as usize];
    let c = extent.copies()[copy];
    (
        c,
        u64::from(c.au) * g.au_bytes() + (u64::from(number) % per_au) * BLOCK,
    )
}

/// A lost in-place write leaves the previous, checksum-valid generation of a
/// metadata block on one mirror. The newest valid generation must win at
/// mount, and `check` must call the old copy stale and repair it from the
/// newest — never spread the old one.
#[test]
fn the_newest_generation_of_a_metadata_block_wins_over_a_stale_mirror() {
    let (mut engine, ids) = rig(&[(64 * MIB, "A"), (64 * MIB, "B")], Redundancy::Normal);
    let (number, primary, at) = {
        let mut g = mount(&mut engine, &ids);
        let f = g
            .create_file(&path("x"), MIB, &CreateOptions::default())
            .unwrap();
        let (primary, at) = entry_place(&g, f.number, 0);
        g.dismount().unwrap();
        (f.number, primary, at)
    };
    let device = ids[usize::from(primary.disk)];
    let stale = engine.inner.contents(device, at, BLOCK as usize);
    {
        let mut g = mount(&mut engine, &ids);
        g.resize(&path("x"), 3 * MIB).unwrap();
        g.dismount().unwrap();
    }
    // The resize's in-place write to the primary copy was "lost".
    engine.inner.scribble(device, at, &stale);

    let mut g = mount(&mut engine, &ids);
    assert_eq!(
        g.open(&path("x")).unwrap().size_bytes,
        3 * MIB,
        "the stale entry was served"
    );
    assert_eq!(g.open(&path("x")).unwrap().number, number);
    let report = g.check(false).unwrap();
    assert!(
        report.problems.is_empty(),
        "mount rewrote the stale copy from the newest: {:?}",
        report.problems
    );
    g.dismount().unwrap();
    let now = engine.inner.contents(device, at, BLOCK as usize);
    assert_ne!(now, stale, "the stale copy is still on disk");
}

/// A deleted file's entry is written empty; if that write is lost on one
/// mirror, the old entry there is valid but older than the empty one. The
/// file must stay deleted.
#[test]
fn a_deleted_file_does_not_come_back_from_a_stale_mirror() {
    let (mut engine, ids) = rig(&[(64 * MIB, "A"), (64 * MIB, "B")], Redundancy::Normal);
    let (primary, at) = {
        let mut g = mount(&mut engine, &ids);
        let f = g
            .create_file(&path("x"), MIB, &CreateOptions::default())
            .unwrap();
        let place = entry_place(&g, f.number, 0);
        g.dismount().unwrap();
        place
    };
    let device = ids[usize::from(primary.disk)];
    let stale = engine.inner.contents(device, at, BLOCK as usize);
    {
        let mut g = mount(&mut engine, &ids);
        g.remove(&path("x")).unwrap();
        g.dismount().unwrap();
    }
    engine.inner.scribble(device, at, &stale);
    let mut g = mount(&mut engine, &ids);
    assert!(
        g.file_numbers().is_empty(),
        "a deleted file came back: {:?}",
        g.file_numbers()
    );
    let report = g.check(false).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}
