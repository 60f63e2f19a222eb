//! Changing a group's disks on simulated disks: add and drop in one change
//! move exactly the dropped disks' data, a drop completes (the disk leaves,
//! its header says FORMER), a disk dropped by force is rebuilt from its
//! mirrors, a crash anywhere in a rebalance loses nothing and the next
//! rebalance goes on, and every refusal changes nothing. A crash anywhere
//! in a reclaim (discard or zero-fill) loses nothing, never leaves a mark
//! on an AU that holds data, and the next reclaim finishes.

#![allow(clippy::unwrap_used)]

use cairn_format::group::DiskState;
use cairn_format::DiskLabel;
use cairn_io::DeviceId;
use cairn_io_sim::{geometry, CrashAfter, CrashPolicy, SimEngine};
use cairn_store::group::relocate::PreparedDisk;
use cairn_store::group::scrub::ScrubRepair;
use cairn_store::group::{
    self, CreateOptions, Group, GroupError, GroupSelector, GroupSpec, NewDisk, Redundancy,
};
use cairn_store::header_copies::HeaderScan;
use cairn_store::labeling::{write_label, LabelSpec};
use cairn_store::names::GroupPath;
use uuid::Uuid;

const MIB: u64 = 1 << 20;
const DISK: u64 = 96 * MIB;
const GROUP_UUID: u128 = 0x5EED;

/// Six labelled simulated disks D0..D5; a group SIM of `redundancy` over
/// D0..D3 in failure groups A, A, B, B (1 MiB AUs). D4 and D5 are spares.
fn rig(redundancy: Redundancy) -> (CrashAfter, Vec<DeviceId>) {
    rig_with(redundancy, 4096)
}

/// [`rig`] on disks of `sector`-byte logical and physical sectors.
fn rig_with(redundancy: Redundancy, sector: u32) -> (CrashAfter, Vec<DeviceId>) {
    rig_in(redundancy, sector, &["A", "A", "B", "B"])
}

/// Six labelled disks, the group over the first `failgroups.len()` of them,
/// in those failure groups.
fn rig_in(redundancy: Redundancy, sector: u32, failgroups: &[&str]) -> (CrashAfter, Vec<DeviceId>) {
    let mut sim = SimEngine::new(11, 64);
    let mut ids = Vec::new();
    for i in 0..6 {
        let d = sim.add_disk(geometry(DISK, sector, sector, 512 << 10));
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
        .zip(failgroups)
        .map(|(d, fg)| NewDisk {
            device: *d,
            failgroup: Some(fg.to_string()),
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
            group_uuid: Uuid::from_u128(GROUP_UUID),
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

/// Files as written, for `reads_back`.
type Files = Vec<(u32, Vec<u8>)>;

/// What a crash test checks after the crash: the engine, the disks, the
/// files as written, the point the operation was cut at.
type Recovery<'a> = dyn Fn(&mut CrashAfter, &[DeviceId], &Files, usize) + 'a;

/// Cut an operation at each of its writes in turn. For each point: a fresh
/// `rig`; `before` on the mounted group (returns the files written); the
/// write budget set to the point; `during` (which may fail); the process
/// dies and every write not made durable is lost, kept or torn as
/// `policy(point)` says; then `after` checks the recovery. Stops once
/// `during` finished within its budget; returns the points cut.
fn crash_at_every_write(
    rig: &dyn Fn() -> (CrashAfter, Vec<DeviceId>),
    before: &dyn Fn(&mut Group<'_>, &[DeviceId]) -> Files,
    during: &dyn Fn(&mut Group<'_>),
    policy: &dyn Fn(usize) -> CrashPolicy,
    next: &dyn Fn(usize) -> usize,
    after: &Recovery<'_>,
) -> usize {
    let mut point = 0;
    let mut crashed = 0;
    loop {
        let (mut engine, ids) = rig();
        let budget = engine.budget();
        let files = {
            let mut g = mount(&mut engine, &ids);
            let files = before(&mut g, &ids);
            budget.set(point);
            during(&mut g);
            files
        };
        let finished = budget.get() > 0;
        budget.set(usize::MAX);
        engine.inner.crash(policy(point));
        after(&mut engine, &ids, &files, point);
        if finished {
            return crashed;
        }
        crashed += 1;
        point = next(point);
    }
}

/// Lost, kept and mixed in turn.
fn rotating_policy(point: usize) -> CrashPolicy {
    [
        CrashPolicy::LOSE_ALL,
        CrashPolicy::KEEP_ALL,
        CrashPolicy::MIXED,
    ][point % 3]
}

fn path(name: &str) -> GroupPath {
    GroupPath::parse(&format!("+SIM/{name}")).unwrap()
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8)
        .collect()
}

/// Files x (20 MiB) and y (9 MiB, written in part), as written.
fn fill(g: &mut Group<'_>) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, size, seed, written) in [("x", 20 * MIB, 1, 20 * MIB), ("y", 9 * MIB, 2, 5 * MIB)] {
        let f = g
            .create_file(&path(name), size, &CreateOptions::default())
            .unwrap();
        let mut want = vec![0u8; size as usize];
        let data = pattern(seed, written as usize);
        g.write(f.number, 0, &data).unwrap();
        want[..written as usize].copy_from_slice(&data);
        out.push((f.number, want));
    }
    out
}

fn reads_back(g: &mut Group<'_>, files: &[(u32, Vec<u8>)]) {
    for (number, want) in files {
        let mut got = vec![0u8; want.len()];
        g.read(*number, 0, &mut got).unwrap();
        assert!(got == *want, "file {number} reads back as written");
    }
}

fn header_of(engine: &mut CrashAfter, d: DeviceId) -> cairn_format::DiskHeader {
    let scan = HeaderScan::read(engine, d).unwrap();
    scan.good()
        .map(|(_, h)| h.header.clone())
        .max_by_key(|h| h.generation)
        .unwrap()
}

/// The spares D4 (failure group A) and D5 (B), checked for adding.
fn spares(g: &mut Group<'_>, ids: &[DeviceId]) -> Vec<PreparedDisk> {
    g.prepare_adds(
        &[
            NewDisk {
                device: ids[4],
                failgroup: Some("A".into()),
            },
            NewDisk {
                device: ids[5],
                failgroup: Some("B".into()),
            },
        ],
        false,
    )
    .unwrap()
}

fn members(g: &Group<'_>) -> Vec<String> {
    g.disks().into_iter().map(|d| d.label).collect()
}

fn aus_on(g: &Group<'_>, label: &str) -> u64 {
    let d = g.disks().into_iter().find(|d| d.label == label).unwrap();
    d.total_aus - d.free_aus.unwrap()
}

/// ASM's "add and drop in one operation": D4 (A) and D5 (B) come in, D1
/// (A) and D3 (B) go; the plan moves exactly what D1 and D3 held, the
/// rebalance does what `--explain` said, the dropped disks leave the
/// directory with FORMER headers, and every file reads back — from a mount
/// without the dropped disks, too.
#[test]
fn add_two_and_drop_two_moves_the_dropped_disks_data_once() {
    let (mut engine, ids) = rig(Redundancy::Normal);
    let files = {
        let mut g = mount(&mut engine, &ids);
        let files = fill(&mut g);
        let held = aus_on(&g, "D1") + aus_on(&g, "D3");
        let adds = spares(&mut g, &ids);
        let drops = vec!["D1".to_string(), "D3".to_string()];
        let explain = g.explain_change(&adds, &drops, &[]).unwrap();
        assert_eq!(
            explain.aus_to_move, held,
            "the plan moves exactly the dropped disks' AUs: {explain:#?}"
        );
        assert_eq!(explain.balance_moves, 0, "{explain:#?}");
        // --explain changed nothing.
        assert_eq!(members(&g), ["D0", "D1", "D2", "D3"]);
        g.add_disks(adds).unwrap();
        g.request_drops(&drops).unwrap();
        assert!(g.disks().iter().filter(|d| d.dropping).count() == 2);
        let mut seen = Vec::new();
        let report = g.rebalance(4, &mut |p| seen.push(p)).unwrap();
        assert_eq!(report.aus_moved, explain.aus_to_move, "{report:#?}");
        assert!(report.moves_left.is_empty(), "{report:#?}");
        assert!(report.metadata_moves > 0, "D1 or D3 held metadata copies");
        assert_eq!(report.disks_dropped, ["D1", "D3"]);
        assert_eq!(seen.last().unwrap().done, seen.last().unwrap().total);
        assert_eq!(members(&g), ["D0", "D2", "D4", "D5"]);
        assert_eq!(g.rebalance_pending(), None);
        reads_back(&mut g, &files);
        assert!(g.check(false).unwrap().clean());
        g.dismount().unwrap();
        files
    };
    for gone in [ids[1], ids[3]] {
        let h = header_of(&mut engine, gone);
        assert_eq!(h.group_uuid, None, "a dropped disk is in no group");
        assert_eq!(h.former_group, Some(Uuid::from_u128(GROUP_UUID)));
    }
    // The group no longer needs D1 and D3: mounted without them, it is
    // whole; mounted with them in sight, it ignores them.
    let stay = [ids[0], ids[2], ids[4], ids[5]];
    for devices in [stay.to_vec(), ids.clone()] {
        let (mut g, report) =
            group::mount(&mut engine, &devices, &GroupSelector::Name("SIM".into())).unwrap();
        assert!(report.disks_marked_offline.is_empty(), "{report:?}");
        assert!(g.disks().iter().all(|d| d.state == DiskState::Online));
        reads_back(&mut g, &files);
        assert!(g.check(false).unwrap().clean());
        g.dismount().unwrap();
    }
}

/// A crash at any point of an add-and-drop rebalance (each write the
/// rebalance makes, in turn, as the last one) loses nothing: the next mount
/// finishes the step in flight, the next rebalance goes on from the maps,
/// and the result is the same as without a crash.
#[test]
fn a_crash_anywhere_in_a_rebalance_loses_nothing_and_it_resumes() {
    let crashed = crash_at_every_write(
        &|| rig(Redundancy::Normal),
        &|g, ids| {
            let files = fill(g);
            let adds = spares(g, ids);
            g.add_disks(adds).unwrap();
            g.request_drops(&["D0".to_string(), "D2".to_string()])
                .unwrap();
            files
        },
        &|g| {
            let _ = g.rebalance(2, &mut |_| {});
        },
        &rotating_policy,
        // Every write early on (metadata moves), then every seventh.
        &|point| point + if point < 60 { 1 } else { 7 },
        &|engine, ids, files, point| {
            {
                let mut g = mount(engine, ids);
                reads_back(&mut g, files);
                let report = g.rebalance(8, &mut |_| {}).unwrap();
                assert!(report.moves_left.is_empty(), "point {point}: {report:#?}");
                assert_eq!(
                    members(&g),
                    ["D1", "D3", "D4", "D5"],
                    "point {point}: the drop completed"
                );
                reads_back(&mut g, files);
                let check = g.check(false).unwrap();
                assert!(check.clean(), "point {point}: {check:#?}");
                g.dismount().unwrap();
            }
            let (mut g, _) = group::mount(
                engine,
                &[ids[1], ids[3], ids[4], ids[5]],
                &GroupSelector::Name("SIM".into()),
            )
            .unwrap();
            reads_back(&mut g, files);
            g.dismount().unwrap();
        },
    );
    assert!(crashed > 20, "the rebalance was cut at {crashed} points");
}

/// A disk that is gone is dropped by force; the rebalance rebuilds its
/// copies from their mirrors on the disks of its failure group, and then
/// the other failure group alone reads every file.
#[test]
fn a_disk_dropped_by_force_is_rebuilt_from_its_mirrors() {
    let (mut engine, ids) = rig(Redundancy::Normal);
    let files = {
        let mut g = mount(&mut engine, &ids);
        let files = fill(&mut g);
        g.dismount().unwrap();
        files
    };
    // D3 is gone for good.
    let without = [ids[0], ids[1], ids[2], ids[4]];
    let mut g = mount(&mut engine, &without);
    // An ONLINE disk is not dropped by force; a name not in the group is
    // refused; the refusals change nothing.
    let e = g.drop_disks_forced(&["D2".into()]).unwrap_err();
    assert!(e.to_string().contains("only an OFFLINE disk"), "{e}");
    let e = g.drop_disks_forced(&["NOPE".into()]).unwrap_err();
    assert!(matches!(e, GroupError::NotFound(_)), "{e}");
    // Rebalance refuses while D3 is OFFLINE and not dropped.
    let e = g.rebalance(4, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("OFFLINE"), "{e}");
    // D2 alone in failure group B: its copies are rebuilt there... but
    // first a new disk joins B to take the load.
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
    g.drop_disks_forced(&["D3".into()]).unwrap();
    let report = g.rebalance(16, &mut |_| {}).unwrap();
    assert!(report.copies_rebuilt > 0, "{report:#?}");
    assert!(report.moves_left.is_empty(), "{report:#?}");
    assert_eq!(report.disks_dropped, ["D3"]);
    assert_eq!(members(&g), ["D0", "D1", "D2", "D4"]);
    assert!(g.check(false).unwrap().clean());
    g.dismount().unwrap();
    // Failure group A gone: B (D2, D4) alone holds every file.
    let (mut g, _) = group::mount_read_only(
        &mut engine,
        &[ids[2], ids[4]],
        &GroupSelector::Name("SIM".into()),
    )
    .unwrap();
    reads_back(&mut g, &files);
}

/// Every refusal of a change says what is wrong and changes nothing.
#[test]
fn refused_changes_change_nothing() {
    let (mut engine, ids) = rig(Redundancy::Normal);
    let mut g = mount(&mut engine, &ids);
    fill(&mut g);
    let before = g.disks();
    // Dropping a whole failure group leaves one: normal redundancy needs two.
    let e = g.request_drops(&["D2".into(), "D3".into()]).unwrap_err();
    assert!(e.to_string().contains("failure group"), "{e}");
    // Not a member.
    let e = g.request_drops(&["D9".into()]).unwrap_err();
    assert!(matches!(e, GroupError::NotFound(_)), "{e}");
    // A member added twice, and a disk already in the group.
    let e = g
        .prepare_adds(
            &[NewDisk {
                device: ids[0],
                failgroup: None,
            }],
            false,
        )
        .unwrap_err();
    assert!(e.to_string().contains("already a member"), "{e}");
    // Power out of range.
    let e = g.rebalance(1025, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("0 (pause) to 1024"), "{e}");
    // External redundancy has no mirror to rebuild from.
    assert_eq!(g.disks(), before);
    // Undrop with nothing pending.
    assert!(g.undrop().is_err());
    // A drop is pending, then undone: nothing moved, D1 a plain member.
    g.request_drops(&["D1".into()]).unwrap();
    assert_eq!(g.undrop().unwrap(), ["D1"]);
    assert_eq!(g.disks(), before);
    // Power 0: recorded as pending (paused), nothing moves.
    g.request_drops(&["D1".into()]).unwrap();
    let report = g.rebalance(0, &mut |_| {}).unwrap();
    assert!(report.paused && report.moves_done == 0);
    assert_eq!(g.rebalance_pending(), Some(0));
    g.dismount().unwrap();
    let (g, report) = group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("rebalance is pending to drop D1")),
        "{report:?}"
    );
    assert!(g.disks().iter().any(|d| d.label == "D1" && d.dropping));
}

/// In external redundancy a disk is dropped by moving its data (there is
/// no mirror to rebuild from, so a forced drop is refused, saying why).
#[test]
fn external_redundancy_drops_by_moving_and_refuses_force() {
    let (mut engine, ids) = rig(Redundancy::External);
    let mut g = mount(&mut engine, &ids);
    let files = fill(&mut g);
    let e = g.drop_disks_forced(&["D1".into()]).unwrap_err();
    assert!(e.to_string().contains("external redundancy"), "{e}");
    g.request_drops(&["D1".into()]).unwrap();
    let report = g.rebalance(4, &mut |_| {}).unwrap();
    assert_eq!(report.disks_dropped, ["D1"]);
    reads_back(&mut g, &files);
    assert!(g.check(false).unwrap().clean());
}

/// An OFFLINE disk whose repair time runs out is dropped by force at the
/// next mount that writes (as ASM drops it after DISK_REPAIR_TIME), and the
/// rebalance rebuilds its copies; a disk with time left stays OFFLINE.
#[test]
fn a_disk_past_its_repair_time_is_dropped_by_force() {
    let (mut engine, ids) = rig(Redundancy::Normal);
    let files = {
        let mut g = mount(&mut engine, &ids);
        let files = fill(&mut g);
        g.dismount().unwrap();
        files
    };
    let without = [ids[0], ids[1], ids[2]];
    {
        let mut g = mount(&mut engine, &without);
        // The default (3.6h) has not run out: D3 stays OFFLINE.
        assert!(!g.disks().iter().any(|d| d.dropping));
        g.set_attributes(&[("disk_repair_time".into(), "0m".into())])
            .unwrap();
        g.dismount().unwrap();
    }
    let (mut g, report) =
        group::mount(&mut engine, &without, &GroupSelector::Name("SIM".into())).unwrap();
    assert_eq!(report.disks_dropped_expired, ["D3"], "{report:?}");
    let d3 = g.disks().into_iter().find(|d| d.label == "D3").unwrap();
    assert!(d3.dropping && d3.dropped_by_force, "{d3:?}");
    assert!(g.rebalance_pending().is_some());
    let r = g.rebalance(8, &mut |_| {}).unwrap();
    assert!(r.copies_rebuilt > 0 && r.moves_left.is_empty(), "{r:#?}");
    assert_eq!(r.disks_dropped, ["D3"]);
    assert_eq!(g.rebalance_pending(), None);
    reads_back(&mut g, &files);
    assert!(g.check(false).unwrap().clean());
}

fn resize(label: &str, bytes: u64) -> Vec<(String, u64)> {
    vec![(label.to_string(), bytes)]
}

fn disk_info(g: &Group<'_>, label: &str) -> group::DiskInfo {
    g.disks().into_iter().find(|d| d.label == label).unwrap()
}

/// `alter --resize`: a shrink records its cut (it survives a dismount),
/// the rebalance moves every copy past it — what `--explain` said — and
/// then the disk's size, layout and header tail copy are the new ones; a
/// grow back takes effect at once and the rebalance gives the disk its
/// share again. Every file reads back and check is clean throughout.
#[test]
fn a_shrink_moves_what_lies_past_the_cut_and_a_grow_takes_effect_at_once() {
    let (mut engine, ids) = rig(Redundancy::Normal);
    let small = 16 * MIB;
    let files = {
        let mut g = mount(&mut engine, &ids);
        let files = fill(&mut g);
        let explain = g.explain_change(&[], &[], &resize("D0", small)).unwrap();
        assert!(explain.evacuate_moves > 0, "{explain:#?}");
        let d0 = explain.disks.iter().find(|d| d.label == "D0").unwrap();
        assert_eq!(d0.state, "SHRINKING");
        assert!(d0.aus_used_after <= d0.capacity_aus, "{d0:?}");
        assert_eq!(disk_info(&g, "D0").shrinking_to_bytes, None);
        let said = g.request_resizes(&resize("D0", small)).unwrap();
        assert!(said[0].contains("shrinking"), "{said:?}");
        g.dismount().unwrap();
        files
    };
    {
        // The cut is on record: nothing new lands past it meanwhile.
        let mut g = mount(&mut engine, &ids);
        let d0 = disk_info(&g, "D0");
        assert_eq!(d0.shrinking_to_bytes, Some(small));
        assert_eq!(d0.size_bytes, DISK, "not before the data has moved");
        assert!(g.check(false).unwrap().clean());
        let report = g.rebalance(4, &mut |_| {}).unwrap();
        assert!(report.moves_left.is_empty(), "{report:#?}");
        assert!(report.aus_moved > 0);
        assert_eq!(report.disks_resized, [format!("D0 to {small} bytes")]);
        let d0 = disk_info(&g, "D0");
        assert_eq!((d0.size_bytes, d0.shrinking_to_bytes), (small, None));
        assert_eq!(d0.total_aus, 15 - 3, "AUs 3..15 are data AUs");
        assert_eq!(g.rebalance_pending(), None);
        reads_back(&mut g, &files);
        let check = g.check(false).unwrap();
        assert!(check.clean(), "{check:#?}");
        g.dismount().unwrap();
    }
    let h = header_of(&mut engine, ids[0]);
    assert_eq!(h.device_size_bytes, small);
    assert_eq!(
        h.copy_offsets_bytes[2],
        small - MIB,
        "the tail copy moved in"
    );
    {
        let mut g = mount(&mut engine, &ids);
        reads_back(&mut g, &files);
        let before = aus_on(&g, "D0");
        let said = g.request_resizes(&resize("D0", DISK)).unwrap();
        assert!(said[0].contains("grew"), "{said:?}");
        assert_eq!(disk_info(&g, "D0").size_bytes, DISK);
        assert!(g.check(false).unwrap().clean());
        let report = g.rebalance(4, &mut |_| {}).unwrap();
        assert!(report.aus_moved > 0, "the grown disk takes its share");
        assert!(aus_on(&g, "D0") > before);
        reads_back(&mut g, &files);
        assert!(g.check(false).unwrap().clean());
        g.dismount().unwrap();
    }
    let h = header_of(&mut engine, ids[0]);
    assert_eq!(h.copy_offsets_bytes[2], DISK - MIB);
    let mut g = mount(&mut engine, &ids);
    reads_back(&mut g, &files);
    assert!(g.check(false).unwrap().clean());
}

/// A crash at any write of a shrink's rebalance loses nothing: the next
/// rebalance finishes the shrink, and the group is the same as without.
/// Every other point, the shrink is called off after the crash and the
/// disk filled: whatever the crash left of the header's move, nothing the
/// disk holds now may be taken for a header copy (checked by scrub and by
/// the header's placement).
#[test]
fn a_crash_anywhere_in_a_shrink_loses_nothing_and_it_completes() {
    let small = 16 * MIB;
    let crashed = crash_at_every_write(
        &|| rig(Redundancy::Normal),
        &|g, _| {
            let files = fill(g);
            g.request_resizes(&resize("D2", small)).unwrap();
            files
        },
        &|g| {
            let _ = g.rebalance(2, &mut |_| {});
        },
        &rotating_policy,
        &|point| point + if point < 40 { 1 } else { 5 },
        &|engine, ids, files, point| {
            let mut g = mount(engine, ids);
            reads_back(&mut g, files);
            let cancel = point % 2 == 1;
            if cancel {
                g.request_resizes(&resize("D2", DISK)).unwrap();
                let f = g
                    .create_file(&path("more"), 40 * MIB, &CreateOptions::default())
                    .unwrap();
                g.write(f.number, 0, &pattern(5, (40 * MIB) as usize))
                    .unwrap();
            }
            let report = g.rebalance(8, &mut |_| {}).unwrap();
            assert!(report.moves_left.is_empty(), "point {point}: {report:#?}");
            let d2 = disk_info(&g, "D2");
            assert_eq!(
                (d2.size_bytes, d2.shrinking_to_bytes),
                (if cancel { DISK } else { small }, None),
                "point {point}: the shrink completed, or was called off"
            );
            reads_back(&mut g, files);
            let check = g.check(false).unwrap();
            assert!(check.clean(), "point {point}: {check:#?}");
            let scrub = g.scrub(8, ScrubRepair::report(), &mut |_| {}).unwrap();
            assert!(scrub.problems.is_empty(), "point {point}: {scrub:#?}");
            g.dismount().unwrap();
            let h = header_of(engine, ids[2]);
            assert_eq!(h.device_size_bytes, d2.size_bytes, "point {point}");
            assert_eq!(
                h.copy_offsets_bytes[2],
                d2.size_bytes - MIB,
                "point {point}"
            );
        },
    );
    assert!(crashed > 20, "the shrink was cut at {crashed} points");
}

/// Resizes that cannot be made are refused with the reason, and change
/// nothing.
#[test]
fn refused_resizes_change_nothing() {
    let (mut engine, ids) = rig(Redundancy::Normal);
    let mut g = mount(&mut engine, &ids);
    fill(&mut g);
    let before = g.disks();
    let e = g.request_resizes(&resize("D0", DISK + MIB)).unwrap_err();
    assert!(e.to_string().contains("beyond its end"), "{e}");
    let e = g.request_resizes(&resize("D0", 4 * MIB)).unwrap_err();
    assert!(e.to_string().contains("too small"), "{e}");
    let e = g.request_resizes(&resize("D9", 32 * MIB)).unwrap_err();
    assert!(matches!(e, GroupError::NotFound(_)), "{e}");
    // Failure group A's two disks at 10 MiB cannot hold one copy of all.
    let both = vec![("D0".to_string(), 10 * MIB), ("D1".to_string(), 10 * MIB)];
    let e = g.request_resizes(&both).unwrap_err();
    assert!(matches!(e, GroupError::NoSpace(_)), "{e}");
    let twice = vec![("D0".to_string(), 32 * MIB), ("d0".to_string(), 40 * MIB)];
    let e = g.request_resizes(&twice).unwrap_err();
    assert!(e.to_string().contains("twice"), "{e}");
    g.request_drops(&["D1".into()]).unwrap();
    let e = g.request_resizes(&resize("D1", 32 * MIB)).unwrap_err();
    assert!(e.to_string().contains("being dropped"), "{e}");
    g.undrop().unwrap();
    g.offline_disks(&["D3".into()], None).unwrap();
    let e = g.request_resizes(&resize("D3", 32 * MIB)).unwrap_err();
    assert!(e.to_string().contains("OFFLINE"), "{e}");
    g.online_disks(Some(&["D3".into()]), 4, &mut |_| {})
        .unwrap();
    assert_eq!(g.disks(), before);
}

/// In external redundancy the journal's file entry has one copy: a crash
/// that tears its in-place write, while a rebalance moves the journal off
/// a dropped disk, must not leave a group that cannot find its journal
/// (the superblocks name the journal's map too). Found by the interleaving
/// simulator (seed 455 after the resize operations joined it). 512-byte
/// physical sectors: a 4 KiB block's write can tear.
#[test]
fn a_crash_tearing_the_journal_entry_while_the_journal_moves_loses_nothing() {
    let crashed = crash_at_every_write(
        &|| rig_with(Redundancy::External, 512),
        &|g, _| {
            let files = fill(g);
            g.request_drops(&["D0".to_string(), "D1".to_string()])
                .unwrap();
            files
        },
        &|g| {
            let _ = g.rebalance(1, &mut |_| {});
        },
        &|_| CrashPolicy::TEAR_ALL,
        &|point| point + if point < 150 { 1 } else { 4 },
        &|engine, ids, files, point| {
            let (mut g, _) = group::mount(engine, ids, &GroupSelector::Name("SIM".into()))
                .unwrap_or_else(|e| panic!("point {point}: mount after the crash: {e}"));
            reads_back(&mut g, files);
            let report = g.rebalance(8, &mut |_| {}).unwrap();
            assert!(report.moves_left.is_empty(), "point {point}: {report:#?}");
            assert_eq!(members(&g), ["D2", "D3"], "point {point}");
            let check = g.check(false).unwrap();
            assert!(check.clean(), "point {point}: {check:#?}");
            g.dismount().unwrap();
        },
    );
    assert!(crashed > 50, "cut at {crashed} points");
}

/// A crash at any write of a grow (the header moved out, the superblocks,
/// the table's new blocks) and of the rebalance after it loses nothing:
/// the disk ends at the old size or the new, its header agrees once a
/// rebalance completes, check and scrub are clean.
#[test]
fn a_crash_anywhere_in_a_grow_loses_nothing() {
    let small = 16 * MIB;
    let crashed = crash_at_every_write(
        &|| rig(Redundancy::Normal),
        &|g, _| {
            let files = fill(g);
            g.request_resizes(&resize("D1", small)).unwrap();
            g.rebalance(4, &mut |_| {}).unwrap();
            assert_eq!(disk_info(g, "D1").size_bytes, small);
            files
        },
        &|g| {
            let _ = g
                .request_resizes(&resize("D1", DISK))
                .and_then(|_| g.rebalance(2, &mut |_| {}));
        },
        &rotating_policy,
        &|point| point + if point < 40 { 1 } else { 5 },
        &|engine, ids, files, point| {
            let mut g = mount(engine, ids);
            reads_back(&mut g, files);
            let size = disk_info(&g, "D1").size_bytes;
            assert!(size == small || size == DISK, "point {point}: {size}");
            let report = g.rebalance(8, &mut |_| {}).unwrap();
            assert!(report.moves_left.is_empty(), "point {point}: {report:#?}");
            reads_back(&mut g, files);
            let check = g.check(false).unwrap();
            assert!(check.clean(), "point {point}: {check:#?}");
            let scrub = g.scrub(8, ScrubRepair::report(), &mut |_| {}).unwrap();
            assert!(scrub.problems.is_empty(), "point {point}: {scrub:#?}");
            g.dismount().unwrap();
            let h = header_of(engine, ids[1]);
            assert_eq!(h.device_size_bytes, size, "point {point}");
        },
    );
    assert!(crashed > 20, "the grow was cut at {crashed} points");
}

/// `scrub` reads every copy: a clean group has nothing to say; a mirror
/// copy whose bytes rotted is named by file and byte range, as is a damaged
/// metadata copy and a damaged header copy; `--repair` rewrites the
/// metadata and the header, but not data where two copies differ — data
/// carries no checksum to say which copy is right, so it rewrites only
/// with `--prefer` naming the copy to keep (docs/rebalance.md) — and
/// afterwards the group scrubs clean, reads back and checks clean.
#[test]
fn scrub_names_each_disagreement_and_repair_rewrites_it() {
    use cairn_io::{AlignedBuf, IoEngine};
    let (mut engine, ids) = rig(Redundancy::Normal);
    let (files, mirror, entry_copy, primary) = {
        let mut g = mount(&mut engine, &ids);
        let files = fill(&mut g);
        let clean = g.scrub(4, ScrubRepair::report(), &mut |_| {}).unwrap();
        assert!(clean.problems.is_empty(), "{clean:#?}");
        // x (20 MiB) and the 5 MiB written of y, two copies each.
        assert!(clean.bytes_read >= 2 * 25 * MIB, "{clean:#?}");
        assert!(clean.metadata_blocks_compared > 0 && clean.header_copies_checked == 12);
        let ext = g.extents(files[0].0).unwrap()[2];
        let mirror = ext.copies()[1];
        let primary = ext.copies()[0].disk;
        let device = |d: u16| {
            g.disks()
                .iter()
                .find(|i| i.number == d)
                .unwrap()
                .device
                .unwrap()
        };
        let mirror_dev = device(mirror.disk);
        g.dismount().unwrap();
        (files, (mirror_dev, mirror), ids[3], primary)
    };
    // 8 KiB of rot 64 KiB into the mirror of x's extent 2 (file bytes 2 MiB
    // + 64 KiB), and D3's tail header copy wiped.
    let (dev, at) = mirror;
    let rot_at = u64::from(at.au) * MIB + (64 << 10);
    engine
        .write_at(dev, rot_at, AlignedBuf::from_slice(&[0x5A; 8192]), true)
        .unwrap();
    engine
        .write_at(entry_copy, DISK - MIB, AlignedBuf::zeroed(4096), true)
        .unwrap();
    let mut g = mount(&mut engine, &ids);
    let found = g.scrub(2, ScrubRepair::report(), &mut |_| {}).unwrap();
    let from = 2 * MIB + (64 << 10);
    let rot = found
        .problems
        .iter()
        .find(|p| {
            p.location
                .contains(&format!("bytes {from}..{}", from + 8192))
        })
        .unwrap_or_else(|| panic!("the rot is named by its file bytes: {found:#?}"));
    assert!(rot.location.contains("+SIM/x"), "{rot:?}");
    // Two copies that differ: nothing says which is right.
    assert!(
        rot.what.contains("no majority"),
        "two differing copies are reported undecided: {rot:?}"
    );
    assert!(
        found
            .problems
            .iter()
            .any(|p| p.location.contains("disk D3 header copy 2")),
        "{found:#?}"
    );
    assert!(!found.clean());
    // A repair does not guess between two copies: the header is repaired,
    // the data is not, until the asker says which copy to keep.
    let unsure = g
        .scrub(2, ScrubRepair::new(true, None), &mut |_| {})
        .unwrap();
    assert!(
        !unsure.clean() && unsure.bytes_rewritten == 0,
        "a repair does not guess between two copies: {unsure:#?}"
    );
    let repaired = g
        .scrub(2, ScrubRepair::new(true, Some(primary)), &mut |_| {})
        .unwrap();
    assert!(repaired.clean(), "{repaired:#?}");
    assert_eq!(repaired.bytes_rewritten, 8192);
    let again = g.scrub(16, ScrubRepair::report(), &mut |_| {}).unwrap();
    assert!(again.problems.is_empty(), "{again:#?}");
    reads_back(&mut g, &files);
    assert!(g.check(false).unwrap().clean());
    let e = g.scrub(0, ScrubRepair::report(), &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
    g.dismount().unwrap();
    // A header laid out for a smaller device than the group uses (as an
    // older version left a disk grown between its label and its add): its
    // tail copy would lie among the data AUs, so scrub never writes that
    // place; --repair writes the header again for the size on record.
    let mut h = header_of(&mut engine, ids[0]);
    h.device_size_bytes = 48 * MIB;
    h.copy_offsets_bytes = cairn_format::layout::HeaderPlacement::for_device(48 * MIB)
        .unwrap()
        .offsets_bytes
        .to_vec();
    h.generation += 1;
    cairn_store::labeling::write_copies(&mut engine, ids[0], &h, &[0, 1, 2]).unwrap();
    let mut g = mount(&mut engine, &ids);
    let found = g.scrub(4, ScrubRepair::report(), &mut |_| {}).unwrap();
    assert!(
        found
            .problems
            .iter()
            .any(|p| p.location == "disk D0 header" && p.what.contains("50331648-byte")),
        "{found:#?}"
    );
    let fixed = g
        .scrub(4, ScrubRepair::new(true, None), &mut |_| {})
        .unwrap();
    assert!(fixed.clean(), "{fixed:#?}");
    assert!(g
        .scrub(4, ScrubRepair::report(), &mut |_| {})
        .unwrap()
        .problems
        .is_empty());
    g.dismount().unwrap();
    let h = header_of(&mut engine, ids[0]);
    assert_eq!(h.copy_offsets_bytes[2], DISK - MIB);
}

/// In high redundancy three copies judge each block: 4 KiB of the primary
/// copy rotted (the copy a repair once took for right, rewriting the two
/// good copies from it) is named as differing from the majority, and
/// `--repair` with no choice rewrites it from the two copies that agree;
/// afterwards every copy, as it lies on its disk, holds the file's bytes
/// (issue 34 item 3).
#[test]
fn in_high_redundancy_a_repair_takes_the_majority_over_a_rotten_primary() {
    use cairn_io::{AlignedBuf, IoEngine};
    let (mut engine, ids) = rig_in(Redundancy::High, 4096, &["A", "A", "B", "B", "C", "C"]);
    let (files, copies) = {
        let mut g = mount(&mut engine, &ids);
        let files = fill(&mut g);
        let ext = g.extents(files[0].0).unwrap()[2];
        let devices = g.disks();
        let copies: Vec<(DeviceId, u64)> = ext
            .copies()
            .iter()
            .map(|c| {
                let d = devices.iter().find(|i| i.number == c.disk).unwrap();
                (d.device.unwrap(), u64::from(c.au) * MIB + (64 << 10))
            })
            .collect();
        g.dismount().unwrap();
        (files, copies)
    };
    assert_eq!(copies.len(), 3, "three copies: {copies:?}");
    // x's bytes at 2 MiB + 64 KiB: 64 KiB into its extent 2.
    let from = 2 * MIB + (64 << 10);
    let want = files[0].1[from as usize..from as usize + 4096].to_vec();
    let (primary, at) = copies[0];
    engine
        .write_at(primary, at, AlignedBuf::from_slice(&[0x5A; 4096]), true)
        .unwrap();
    let mut g = mount(&mut engine, &ids);
    let found = g.scrub(2, ScrubRepair::report(), &mut |_| {}).unwrap();
    let rot = found
        .problems
        .iter()
        .find(|p| {
            p.location
                .contains(&format!("bytes {from}..{}", from + 4096))
        })
        .unwrap_or_else(|| panic!("the rot is named by its file bytes: {found:#?}"));
    assert!(rot.what.contains("majority"), "{rot:?}");
    let repaired = g
        .scrub(2, ScrubRepair::new(true, None), &mut |_| {})
        .unwrap();
    g.dismount().unwrap();
    for (i, (device, at)) in copies.iter().enumerate() {
        let got = engine.read_at(*device, *at, 4096).unwrap();
        assert!(
            got[..] == want[..],
            "copy {i} holds the file's bytes after the repair (the majority's, not the rotten primary's)"
        );
    }
    assert!(repaired.clean(), "{repaired:#?}");
    assert_eq!(
        repaired.bytes_rewritten, 4096,
        "only the rotten copy is rewritten: {repaired:#?}"
    );
    let mut g = mount(&mut engine, &ids);
    reads_back(&mut g, &files);
    let again = g.scrub(4, ScrubRepair::report(), &mut |_| {}).unwrap();
    assert!(again.problems.is_empty(), "{again:#?}");
    assert!(g.check(false).unwrap().clean());
    g.dismount().unwrap();
}

/// The highest AU any data copy of `files` holds on each disk.
fn highest_aus(g: &Group<'_>, files: &[u32]) -> std::collections::BTreeMap<u16, u32> {
    let mut top = std::collections::BTreeMap::new();
    for f in files {
        for e in g.extents(*f).unwrap() {
            for c in e.copies() {
                let t = top.entry(c.disk).or_insert(0);
                *t = (*t).max(c.au);
            }
        }
    }
    top
}

/// Files x and y ([`fill`]) written above a 12 MiB file that is then
/// deleted: holes low on the disks. Returns the files and their numbers.
fn fill_above_a_hole(g: &mut Group<'_>) -> (Files, Vec<u32>) {
    let hole = g
        .create_file(&path("hole"), 12 * MIB, &CreateOptions::default())
        .unwrap();
    g.write(hole.number, 0, &pattern(9, (12 * MIB) as usize))
        .unwrap();
    let files = fill(g);
    g.remove(&path("hole")).unwrap();
    g.commit().unwrap();
    let numbers = files.iter().map(|(n, _)| *n).collect();
    (files, numbers)
}

/// The compact pass (`rebalance_compact`): with holes left low on the disks
/// by a deleted file, a rebalance that is told to compact moves the highest
/// copies down into them — nothing moves up, every file reads back, check
/// is clean; with `false`, or `auto` on disks that do not say they spin
/// (these simulated ones), it moves nothing.
#[test]
fn the_compact_pass_packs_copies_towards_the_start_where_asked() {
    let (mut engine, ids) = rig(Redundancy::Normal);
    let mut g = mount(&mut engine, &ids);
    let (files, numbers) = fill_above_a_hole(&mut g);
    let before = highest_aus(&g, &numbers);
    for value in ["false", "auto"] {
        g.set_attributes(&[("rebalance_compact".into(), value.into())])
            .unwrap();
        let report = g.rebalance(4, &mut |_| {}).unwrap();
        assert_eq!(report.compact_moves, 0, "{value}: {report:#?}");
        assert_eq!(report.moves_done, 0, "{value}: {report:#?}");
    }
    assert!(!g.compact_wanted(), "simulated disks do not say they spin");
    g.set_attributes(&[("rebalance_compact".into(), "true".into())])
        .unwrap();
    let report = g.rebalance(4, &mut |_| {}).unwrap();
    assert!(report.compact_moves > 0, "{report:#?}");
    assert_eq!(report.moves_done, report.compact_moves, "{report:#?}");
    assert!(report.moves_left.is_empty(), "{report:#?}");
    let after = highest_aus(&g, &numbers);
    for (disk, top) in &after {
        assert!(top <= &before[disk], "disk {disk}: nothing moves up");
    }
    assert!(
        after.iter().any(|(d, top)| *top < before[d]),
        "some disk's highest copy came down: {before:?} -> {after:?}"
    );
    reads_back(&mut g, &files);
    assert!(g.check(false).unwrap().clean());
    // Packed: a second pass finds nothing to move.
    let again = g.rebalance(4, &mut |_| {}).unwrap();
    assert_eq!(again.compact_moves, 0, "{again:#?}");
    g.dismount().unwrap();
    let mut g = mount(&mut engine, &ids);
    reads_back(&mut g, &files);
    assert!(g.check(false).unwrap().clean());
}

/// Reclaim options for a crash test: unpaced, at power 2.
fn reclaim_options(method: group::reclaim::ReclaimMethod) -> group::reclaim::ReclaimOptions {
    group::reclaim::ReclaimOptions {
        method,
        force: true,
        rate_bytes: None,
        power: 2,
        explain: false,
        compact: false,
    }
}

/// Every AU the discard maps mark as holding nothing reads as zeros on its
/// disk (the simulated disks read a discarded range as zeros): a mark made
/// durable before its discard or zeros were would show here as data.
/// Returns the returnable bytes the mount found.
fn marks_hold_nothing(engine: &mut CrashAfter, ids: &[DeviceId], point: usize) -> u64 {
    let g = mount(engine, ids);
    let au = g.au_bytes();
    let returnable = (0..4).filter_map(|d| g.returnable_bytes(d)).sum::<u64>();
    let marks: Vec<(u16, DeviceId, Vec<u64>)> = g
        .member_devices()
        .into_iter()
        .map(|(disk, device)| (disk, device, g.discard_marks(disk)))
        .collect();
    g.dismount().unwrap();
    for (disk, device, marked) in marks {
        for a in marked {
            let bytes = engine.inner.contents(device, a * au, au as usize);
            assert!(
                bytes.iter().all(|b| *b == 0),
                "point {point}: disk {disk} AU {a} is marked as holding nothing, and holds data"
            );
        }
    }
    returnable
}

/// A reclaim cut at each of its writes (discards or zeros, flushes, the
/// commits of its marks): the files read back, the group checks clean,
/// no mark claims an AU that holds data, and the next reclaim gives back
/// exactly what is left, after which nothing is.
fn a_crash_anywhere_in_a_reclaim(method: group::reclaim::ReclaimMethod) -> usize {
    crash_at_every_write(
        &|| rig(Redundancy::Normal),
        &|g, _| {
            g.set_attributes(&[("thin_provisioned".into(), "false".into())])
                .unwrap();
            let files = fill(g);
            let z = g
                .create_file(&path("z"), 12 * MIB, &CreateOptions::default())
                .unwrap();
            g.write(z.number, 0, &pattern(3, 12 * MIB as usize))
                .unwrap();
            g.remove(&path("z")).unwrap();
            files
        },
        &|g| {
            let _ = g.reclaim(reclaim_options(method), &mut |_| {});
        },
        &rotating_policy,
        // A zero-fill writes 1 MiB at a time: every write of its first
        // batches, then every eleventh.
        &|point| match method {
            group::reclaim::ReclaimMethod::ZeroFill if point >= 24 => point + 11,
            _ => point + 1,
        },
        &|engine, ids, files, point| {
            let mut g = mount(engine, ids);
            reads_back(&mut g, files);
            let check = g.check(false).unwrap();
            assert!(check.clean(), "point {point}: {check:#?}");
            let left: u64 = (0..4).filter_map(|d| g.returnable_bytes(d)).sum();
            let report = g.reclaim(reclaim_options(method), &mut |_| {}).unwrap();
            assert_eq!(
                (report.returnable_bytes, report.returned_bytes),
                (left, left),
                "point {point}: the next reclaim gives back what is left"
            );
            let again = g.reclaim(reclaim_options(method), &mut |_| {}).unwrap();
            assert_eq!(again.returnable_bytes, 0, "point {point}: then nothing is");
            reads_back(&mut g, files);
            g.dismount().unwrap();
            assert_eq!(
                marks_hold_nothing(engine, ids, point),
                0,
                "point {point}: the marks are durable"
            );
        },
    )
}

#[test]
fn a_crash_anywhere_in_a_reclaim_loses_nothing_and_the_next_one_finishes() {
    let crashed = a_crash_anywhere_in_a_reclaim(group::reclaim::ReclaimMethod::Discard);
    assert!(crashed >= 8, "the reclaim was cut at {crashed} points");
}

#[test]
fn a_crash_anywhere_in_a_zero_fill_loses_nothing_and_the_next_one_finishes() {
    let crashed = a_crash_anywhere_in_a_reclaim(group::reclaim::ReclaimMethod::ZeroFill);
    assert!(crashed >= 8, "the zero-fill was cut at {crashed} points");
}

/// `reclaim --compact` (ASRU's method, online): with a hole low on the
/// disks and `rebalance_compact` left at auto (these disks do not spin, so
/// a rebalance alone would not compact), it packs the copies down first,
/// then gives back every free AU; explained, it says so and changes
/// nothing. Refused while a rebalance is pending.
#[test]
fn reclaim_compact_packs_the_data_down_then_gives_back_the_free_tail() {
    use group::reclaim::ReclaimMethod;
    let (mut engine, ids) = rig(Redundancy::Normal);
    let mut g = mount(&mut engine, &ids);
    g.set_attributes(&[("thin_provisioned".into(), "false".into())])
        .unwrap();
    let (files, numbers) = fill_above_a_hole(&mut g);
    let before = highest_aus(&g, &numbers);
    assert!(!g.compact_wanted());

    let compact = group::reclaim::ReclaimOptions {
        compact: true,
        ..reclaim_options(ReclaimMethod::Discard)
    };
    let explained = g
        .reclaim(
            group::reclaim::ReclaimOptions {
                explain: true,
                ..compact
            },
            &mut |_| {},
        )
        .unwrap();
    assert!(explained.compact_moves > 0, "{explained:#?}");
    assert_eq!(explained.compact_bytes, explained.compact_moves * MIB);
    assert_eq!(explained.returned_bytes, 0);
    assert_eq!(
        highest_aus(&g, &numbers),
        before,
        "explained: nothing moved"
    );

    // A zero-fill of disks that take discard is refused before anything
    // moves.
    let refused = g.reclaim(
        group::reclaim::ReclaimOptions {
            method: ReclaimMethod::ZeroFill,
            force: false,
            ..compact
        },
        &mut |_| {},
    );
    assert!(
        matches!(&refused, Err(GroupError::Invalid(why)) if why.contains("accepts discard")),
        "{refused:?}"
    );
    assert_eq!(highest_aus(&g, &numbers), before, "refused: nothing moved");

    let report = g.reclaim(compact, &mut |_| {}).unwrap();
    assert_eq!(report.compact_moves, explained.compact_moves, "{report:#?}");
    assert!(report.returned_bytes > 0);
    assert_eq!(report.returned_bytes, report.returnable_bytes);
    let after = highest_aus(&g, &numbers);
    assert!(
        after.iter().all(|(d, top)| *top <= before[d]) && after != before,
        "packed down: {before:?} -> {after:?}"
    );
    assert!(!g.compact_wanted(), "asked for this reclaim only");
    assert_eq!((0..4).filter_map(|d| g.returnable_bytes(d)).sum::<u64>(), 0);
    reads_back(&mut g, &files);
    assert!(g.check(false).unwrap().clean());
    let again = g
        .reclaim(
            group::reclaim::ReclaimOptions {
                explain: true,
                ..compact
            },
            &mut |_| {},
        )
        .unwrap();
    assert_eq!(again.compact_moves, 0, "packed: {again:#?}");

    // A paused rebalance is pending: a compact would run it, unasked.
    g.rebalance(0, &mut |_| {}).unwrap();
    let Err(GroupError::Invalid(why)) = g.reclaim(compact, &mut |_| {}) else {
        panic!("reclaim --compact with a rebalance pending");
    };
    assert!(why.contains("a rebalance is pending"), "{why}");
    g.dismount().unwrap();
    let mut g = mount(&mut engine, &ids);
    reads_back(&mut g, &files);
    assert!(g.check(false).unwrap().clean());
}

/// With `thin_provisioned` on (auto, these disks take discard), a delete
/// discards the AUs it frees and marks them: cut at each of its writes, no
/// mark is ever durable before its discard is (the disk joins the next
/// commit's barrier), files read back and check is clean.
#[test]
fn a_crash_anywhere_in_a_delete_that_discards_never_marks_an_au_that_holds_data() {
    let crashed = crash_at_every_write(
        &|| rig(Redundancy::Normal),
        &|g, _| {
            assert!(g.discards_on_free());
            let files = fill(g);
            let z = g
                .create_file(&path("z"), 12 * MIB, &CreateOptions::default())
                .unwrap();
            g.write(z.number, 0, &pattern(3, 12 * MIB as usize))
                .unwrap();
            g.commit().unwrap();
            files
        },
        &|g| {
            if g.remove(&path("z")).is_ok() {
                // The release that discards and marks follows a commit;
                // another commit makes the marks durable.
                let _ = g.set_attributes(&[("disk_repair_time".into(), "4h".into())]);
            }
        },
        &rotating_policy,
        &|point| point + 1,
        &|engine, ids, files, point| {
            let mut g = mount(engine, ids);
            reads_back(&mut g, files);
            let check = g.check(false).unwrap();
            assert!(check.clean(), "point {point}: {check:#?}");
            g.dismount().unwrap();
            marks_hold_nothing(engine, ids, point);
        },
    );
    assert!(crashed >= 4, "the delete was cut at {crashed} points");
}
