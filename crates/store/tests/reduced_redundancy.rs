//! Allocation with a failure group missing (issue 34, item 4), on
//! simulated disks: with one of two failure groups offline, files are
//! created and grown with their missing copies recorded (allocated on the
//! offline failure group's disks and marked stale at once), `space` stays
//! truthful and never negative, reduced-redundancy files are shown per
//! file and per group, and the copies are restored by the resync at
//! `online` or by the rebuild when the offline disk is dropped by force —
//! each restore proved by reading the restored copies alone.

#![allow(clippy::unwrap_used)]

use cairn_format::group::{DiskState, Extent};
use cairn_format::DiskLabel;
use cairn_io::DeviceId;
use cairn_io_sim::{geometry, CrashAfter, SimEngine};
use cairn_store::group::{
    self, CreateOptions, Group, GroupError, GroupSelector, GroupSpec, NewDisk, Redundancy,
};
use cairn_store::labeling::{write_label, LabelSpec};
use cairn_store::names::GroupPath;
use uuid::Uuid;

const MIB: u64 = 1 << 20;
const DISK: u64 = 96 * MIB;

/// Five labelled simulated disks D0..D4 and a normal-redundancy group SIM
/// with 1 MiB AUs over D0..D3 in failure groups A (D0, D1) and B (D2, D3);
/// D4 is a spare.
fn rig() -> (CrashAfter, Vec<DeviceId>) {
    let mut sim = SimEngine::new(34, 64);
    let mut ids = Vec::new();
    for i in 0..5 {
        let d = sim.add_disk(geometry(DISK, 4096, 4096, 512 << 10));
        write_label(
            &mut sim,
            d,
            &LabelSpec {
                label: DiskLabel::parse(&format!("D{i}")).unwrap(),
                disk_uuid: Uuid::from_u128(0x4ED0 << 16 | i as u128),
                now_unix_seconds: 1_763_700_000,
                generation: 1,
            },
        )
        .unwrap();
        ids.push(d);
    }
    let mut engine = CrashAfter::vanishing(sim, usize::MAX);
    let new: Vec<NewDisk> = ids[..4]
        .iter()
        .enumerate()
        .map(|(i, d)| NewDisk {
            device: *d,
            failgroup: Some(if i < 2 { "A" } else { "B" }.to_string()),
        })
        .collect();
    group::create(
        &mut engine,
        &new,
        &GroupSpec {
            name: "SIM".into(),
            redundancy: Redundancy::Normal,
            au_bytes: MIB,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1_763_700_000,
            group_uuid: Uuid::from_u128(0x4ED),
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

fn pattern(seed: u8, len: u64) -> Vec<u8> {
    (0..len as usize)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed) ^ (i >> 12) as u8)
        .collect()
}

const FG_A: [u16; 2] = [0, 1];
const FG_B: [u16; 2] = [2, 3];

/// Every extent of `number` from `from` on has one copy in each failure
/// group, and its copy in B is stale whole (1 MiB AUs: one AU an extent).
fn missing_copies_recorded(extents: &[Extent], from: usize) {
    for (i, e) in extents.iter().enumerate().skip(from) {
        assert_eq!(e.copies().len(), 2, "extent {i}: {e:?}");
        let a = e
            .copies()
            .iter()
            .position(|c| FG_A.contains(&c.disk))
            .unwrap_or_else(|| panic!("extent {i} has a copy in A: {e:?}"));
        let b = e
            .copies()
            .iter()
            .position(|c| FG_B.contains(&c.disk))
            .unwrap_or_else(|| panic!("extent {i} has a copy in B: {e:?}"));
        assert_eq!(a, 0, "extent {i}: the copy that can be read is the primary");
        assert_eq!(e.stale[a], 0, "extent {i}: {e:?}");
        assert_eq!(
            e.stale[b], 1,
            "extent {i}: its copy in B is recorded missing"
        );
    }
}

fn reads_back(g: &mut Group<'_>, files: &[(u32, Vec<u8>)]) {
    for (number, want) in files {
        let mut got = vec![0xEEu8; want.len()];
        g.read(*number, 0, &mut got).unwrap();
        assert!(got == *want, "file {number} reads back as written");
    }
}

/// Nothing is left with lowered redundancy: per file, per group, per disk.
fn redundancy_whole(g: &Group<'_>, names: &[&str]) {
    for name in names {
        let info = g.open(&path(name)).unwrap();
        assert!(
            !info.redundancy_lowered && info.redundancy_lowered_extents == 0,
            "{name}: {info:?}"
        );
    }
    let lowered = g.redundancy_lowered();
    assert_eq!((lowered.extents, lowered.bytes), (0, 0), "{lowered:?}");
    for d in g.disks() {
        assert_eq!(d.missing_copy_aus, 0, "{d:?}");
    }
}

/// The issue's scenario: failure group B taken offline for maintenance; a
/// file created, another grown, a third created and never written — each
/// refused with ENOSPC before. Their copies in B are recorded missing;
/// `space` says the same as before the offline (the copies take their room
/// in B as the maps say) and never goes negative; the files show lowered
/// redundancy. `online` copies exactly the AUs written, and B alone then
/// reads every file.
#[test]
fn files_are_created_and_grown_with_a_failure_group_offline_and_restored_at_online() {
    let (mut engine, ids) = rig();
    let mut g = mount(&mut engine, &ids);
    let x = g
        .create_file(&path("x"), 4 * MIB, &CreateOptions::default())
        .unwrap();
    let mut want_x = pattern(1, 4 * MIB);
    g.write(x.number, 0, &want_x).unwrap();
    let before = g.space();
    assert!(before.usable_file_mb > 0, "{before:?}");
    redundancy_whole(&g, &["x"]);

    g.offline_disks(&["D2".into(), "D3".into()], None).unwrap();
    let away = g.space();
    assert_eq!(away.offline_disks, 2, "{away:?}");
    assert_eq!(
        (away.free_mb, away.required_mirror_free_mb, away.usable_file_mb),
        (
            before.free_mb,
            before.required_mirror_free_mb,
            before.usable_file_mb
        ),
        "a failure group offline changes no figure: new copies still take their room there: {away:?}"
    );
    // Every extent x had is held by A alone now.
    let info = g.open(&path("x")).unwrap();
    assert!(
        info.redundancy_lowered && info.redundancy_lowered_extents == 4,
        "{info:?}"
    );

    let y = g
        .create_file(&path("y"), 8 * MIB, &CreateOptions::default())
        .unwrap();
    let want_y = pattern(2, 8 * MIB);
    g.write(y.number, 0, &want_y).unwrap();
    g.resize(&path("x"), 12 * MIB).unwrap();
    let grown = pattern(3, 8 * MIB);
    g.write(x.number, 4 * MIB, &grown).unwrap();
    want_x.extend_from_slice(&grown);
    let z = g
        .create_file(&path("z"), 4 * MIB, &CreateOptions::default())
        .unwrap();
    missing_copies_recorded(g.extents(y.number).unwrap(), 0);
    missing_copies_recorded(g.extents(x.number).unwrap(), 4);
    missing_copies_recorded(g.extents(z.number).unwrap(), 0);
    for (name, extents) in [("x", 12), ("y", 8), ("z", 4)] {
        let info = g.open(&path(name)).unwrap();
        assert!(info.redundancy_lowered, "{name}: {info:?}");
        assert_eq!(info.redundancy_lowered_extents, extents, "{name}: {info:?}");
    }
    let space = g.space();
    assert!(space.usable_file_mb >= 0, "{space:?}");
    let lowered = g.redundancy_lowered();
    assert!(
        lowered.extents >= 24 && lowered.bytes == lowered.extents * MIB,
        "{lowered:?}"
    );
    // B's disks miss every copy they hold; A's miss none.
    let disks = g.disks();
    for d in &disks {
        if FG_B.contains(&d.number) {
            assert!(d.missing_copy_aus > 0, "{d:?}");
        } else {
            assert_eq!(d.missing_copy_aus, 0, "{d:?}");
        }
    }
    let missing: u64 = disks.iter().map(|d| d.missing_copy_aus).sum();
    assert!(missing >= 24, "{disks:?}");
    // With B away, A holds the only copy: it may not go too (today's rule).
    let e = g.offline_disks(&["D0".into()], None).unwrap_err();
    assert!(e.to_string().contains("no copy to read"), "{e}");
    assert!(g.check(false).unwrap().clean());

    // B comes back: the written AUs are copied, the unwritten cleared.
    let resync = g.online_disks(None, 4, &mut |_| {}).unwrap();
    assert_eq!(resync.aus_copied, 16, "{resync:?}");
    assert_eq!(resync.aus_cleared_unwritten, 4, "{resync:?}");
    assert!(resync.aus_without_source.is_empty(), "{resync:?}");
    assert!(g.disks().iter().all(|d| d.state == DiskState::Online));
    redundancy_whole(&g, &["x", "y", "z"]);
    assert!(g.check(false).unwrap().clean());
    g.dismount().unwrap();

    // A gone: B's copies alone, the restored ones among them.
    let (mut g, _) =
        group::mount_read_only(&mut engine, &ids[2..4], &GroupSelector::Name("SIM".into()))
            .unwrap();
    reads_back(
        &mut g,
        &[
            (x.number, want_x),
            (y.number, want_y),
            (z.number, vec![0; (4 * MIB) as usize]),
        ],
    );
}

/// The copies recorded on an offline failure group live in the extent maps
/// only (its allocation table cannot be written): a mount while it is still
/// away finds them there, and a file created then never gets an AU another
/// file holds — on any disk, offline ones included (check counts every
/// AU the maps name, and every copy's failure group).
#[test]
fn a_remount_with_the_failure_group_still_away_hands_out_no_au_twice() {
    let (mut engine, ids) = rig();
    let mut files = Vec::new();
    {
        let mut g = mount(&mut engine, &ids);
        g.offline_disks(&["D2".into(), "D3".into()], None).unwrap();
        let f = g
            .create_file(&path("a"), 6 * MIB, &CreateOptions::default())
            .unwrap();
        let want = pattern(4, 6 * MIB);
        g.write(f.number, 0, &want).unwrap();
        files.push((f.number, want));
        g.dismount().unwrap();
    }
    // Held offline: a mount with every disk leaves B away; one without B
    // finds it OFFLINE already.
    for (k, visible) in [&ids[..4], &ids[..2]].into_iter().enumerate() {
        let mut g = mount(&mut engine, visible);
        assert!(g
            .disks()
            .iter()
            .all(|d| (d.state == DiskState::Offline) == FG_B.contains(&d.number)));
        let name = format!("b{k}");
        let f = g
            .create_file(&path(&name), 5 * MIB, &CreateOptions::default())
            .unwrap();
        let want = pattern(5 + k as u8, 5 * MIB);
        g.write(f.number, 0, &want).unwrap();
        missing_copies_recorded(g.extents(f.number).unwrap(), 0);
        files.push((f.number, want));
        let check = g.check(false).unwrap();
        assert!(check.clean(), "{:?}", check.problems);
        g.dismount().unwrap();
    }
    let mut g = mount(&mut engine, &ids[..4]);
    let resync = g.online_disks(None, 8, &mut |_| {}).unwrap();
    assert_eq!(resync.aus_copied, 16, "{resync:?}");
    redundancy_whole(&g, &["a", "b0", "b1"]);
    let check = g.check(false).unwrap();
    assert!(check.clean(), "{:?}", check.problems);
    g.dismount().unwrap();
    let (mut g, _) =
        group::mount_read_only(&mut engine, &ids[2..4], &GroupSelector::Name("SIM".into()))
            .unwrap();
    reads_back(&mut g, &files);
}

/// A copy recorded on a disk that never comes back is rebuilt like every
/// copy there: D2 and D3 away, a file written; D3 returns, D2 is dropped by
/// force (replaced by the spare D4) and the rebalance rebuilds its copies
/// in B. Then B alone (D3, D4) reads the file.
#[test]
fn a_missing_copy_on_a_disk_dropped_by_force_is_rebuilt_by_the_rebalance() {
    let (mut engine, ids) = rig();
    let mut g = mount(&mut engine, &ids[..4]);
    g.offline_disks(&["D2".into(), "D3".into()], None).unwrap();
    let f = g
        .create_file(&path("r"), 16 * MIB, &CreateOptions::default())
        .unwrap();
    let want = pattern(7, 16 * MIB);
    g.write(f.number, 0, &want).unwrap();
    let on_d2 = g
        .extents(f.number)
        .unwrap()
        .iter()
        .filter(|e| e.copies().iter().any(|c| c.disk == 2))
        .count();
    assert!(on_d2 > 0, "some missing copies are recorded on D2");
    g.dismount().unwrap();

    // D2 is gone for good; the spare D4 is attached.
    let visible = [ids[0], ids[1], ids[3], ids[4]];
    let mut g = mount(&mut engine, &visible);
    g.online_disks(Some(&["D3".into()]), 4, &mut |_| {})
        .unwrap();
    let info = g.open(&path("r")).unwrap();
    assert_eq!(
        info.redundancy_lowered_extents, on_d2 as u64,
        "only the copies on D2 are still missing: {info:?}"
    );
    let adds = g
        .prepare_adds(
            &[NewDisk {
                device: ids[4],
                failgroup: Some("B".into()),
            }],
            false,
        )
        .unwrap();
    g.add_disks(adds).unwrap();
    g.drop_disks_forced(&["D2".into()]).unwrap();
    let report = g.rebalance(8, &mut |_| {}).unwrap();
    assert!(
        report.copies_rebuilt >= on_d2 as u64 && report.moves_left.is_empty(),
        "{report:#?}"
    );
    redundancy_whole(&g, &["r"]);
    assert!(g.check(false).unwrap().clean());
    g.dismount().unwrap();
    let (mut g, _) = group::mount_read_only(
        &mut engine,
        &[ids[3], ids[4]],
        &GroupSelector::Name("SIM".into()),
    )
    .unwrap();
    reads_back(&mut g, &[(f.number, want)]);
}

/// With B away, space runs out when either failure group does: a create
/// that does not fit is refused with ENOSPC and leaves nothing; `space`
/// never says less than zero, even when the group is fuller than what
/// losing a failure group would leave room to restore.
#[test]
fn space_with_a_failure_group_away_never_goes_negative_and_runs_out_honestly() {
    let (mut engine, ids) = rig();
    let mut g = mount(&mut engine, &ids[..4]);
    g.offline_disks(&["D2".into(), "D3".into()], None).unwrap();
    let mut made = 0;
    loop {
        let space = g.space();
        assert!(space.usable_file_mb >= 0, "{space:?}");
        match g.create_file(
            &path(&format!("fill{made}")),
            24 * MIB,
            &CreateOptions::default(),
        ) {
            Ok(_) => made += 1,
            Err(GroupError::NoSpace(why)) => {
                assert!(why.contains("no space"), "{why}");
                break;
            }
            Err(e) => panic!("{e}"),
        }
        assert!(made < 100, "the group fills");
    }
    assert!(
        made >= 6,
        "two 192 MiB failure groups hold six 24 MiB files"
    );
    let space = g.space();
    assert_eq!(space.usable_file_mb, 0, "{space:?}");
    assert!(space.free_mb < 2 * 24, "{space:?}");
    let check = g.check(false).unwrap();
    assert!(check.clean(), "{:?}", check.problems);
    // Back in service: what was allocated is B's, as the maps said.
    g.online_disks(None, 8, &mut |_| {}).unwrap();
    let check = g.check(false).unwrap();
    assert!(check.clean(), "{:?}", check.problems);
    assert_eq!(g.space().free_mb, space.free_mb);
}
