//! The disk life cycle on simulated disks: a disk that goes away and comes
//! back is resynced with only the AUs it missed; stale copies are never
//! read; a disk taken offline on request stays so; an older image of a disk
//! is refused; attributes are checked.

#![allow(clippy::unwrap_used)]

mod common;

use cairn_format::group::{AuAddr, DiskState};
use cairn_format::DiskLabel;
use cairn_io::{DeviceId, IoEngine, Op, Request};
use cairn_io_sim::{geometry, CrashAfter, SimEngine};
use cairn_store::group::{
    self, CreateOptions, Group, GroupError, GroupSelector, GroupSpec, NewDisk, Redundancy,
};
use cairn_store::labeling::{write_label, LabelSpec};
use cairn_store::names::GroupPath;
use uuid::Uuid;

const MIB: u64 = 1 << 20;
const DISK: u64 = 96 * MIB;

/// Four labelled simulated disks D0..D3 in failure groups A, A, B, B and a
/// normal-redundancy group SIM over them with 1 MiB AUs.
fn rig() -> (CrashAfter, Vec<DeviceId>) {
    let mut sim = SimEngine::new(7, 64);
    let mut ids = Vec::new();
    for i in 0..4 {
        let d = sim.add_disk(geometry(DISK, 4096, 4096, 512 << 10));
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
            group_uuid: Uuid::from_u128(0x5EED),
        },
    )
    .unwrap()
    .dismount()
    .unwrap();
    (engine, ids)
}

fn mount<'e>(engine: &'e mut CrashAfter, ids: &[DeviceId]) -> (Group<'e>, group::MountReport) {
    group::mount(engine, ids, &GroupSelector::Name("SIM".into())).unwrap()
}

fn path(name: &str) -> GroupPath {
    GroupPath::parse(&format!("+SIM/{name}")).unwrap()
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8)
        .collect()
}

fn state(g: &Group<'_>, disk: u16) -> DiskState {
    g.disks()
        .into_iter()
        .find(|d| d.number == disk)
        .unwrap()
        .state
}

/// The extent indexes of file `number` with a copy on `disk`, among those
/// the byte range touches (1 MiB AUs, 1-AU extents: extent = MiB).
fn extents_on(g: &Group<'_>, number: u32, disk: u16, range: std::ops::Range<u64>) -> u64 {
    let extents = g.extents(number).unwrap();
    (range.start / MIB..range.end.div_ceil(MIB))
        .filter(|e| extents[*e as usize].copies().iter().any(|c| c.disk == disk))
        .count() as u64
}

/// The scenario: a file written, one disk moved away, more data
/// written, the disk moved back: the resync copies only the AUs written
/// while it was away, the disk is ONLINE, check is clean, and the file
/// reads back whole from either failure group alone.
#[test]
fn a_disk_that_comes_back_gets_only_what_it_missed() {
    let (mut engine, ids) = rig();
    let mut want = pattern(1, (24 * MIB) as usize);
    let number = {
        let (mut g, _) = mount(&mut engine, &ids);
        let f = g
            .create_file(&path("x"), 24 * MIB, &CreateOptions::default())
            .unwrap();
        g.write(f.number, 0, &want).unwrap();
        g.dismount().unwrap();
        f.number
    };
    // D3 (failure group B) goes away; the next writer marks it OFFLINE.
    let without: Vec<DeviceId> = ids[..3].to_vec();
    let (stale, written) = {
        let (mut g, report) = mount(&mut engine, &without);
        assert_eq!(report.disks_marked_offline.len(), 1, "{report:?}");
        assert_eq!(state(&g, 3), DiskState::Offline);
        // Three whole MiB, and a 64 KiB write inside another.
        let fresh = pattern(2, (3 * MIB) as usize);
        g.write(number, 5 * MIB, &fresh).unwrap();
        want[(5 * MIB) as usize..(8 * MIB) as usize].copy_from_slice(&fresh);
        let small = pattern(3, 64 << 10);
        g.write(number, 17 * MIB + 4096, &small).unwrap();
        want[(17 * MIB + 4096) as usize..(17 * MIB + 4096 + (64 << 10)) as usize]
            .copy_from_slice(&small);
        let stale = extents_on(&g, number, 3, 5 * MIB..8 * MIB)
            + extents_on(&g, number, 3, 17 * MIB..18 * MIB);
        assert!(stale > 0, "some written extent has a copy on D3");
        let info = g.disks().into_iter().find(|d| d.number == 3).unwrap();
        assert_eq!(
            info.stale_aus, stale,
            "one stale AU per extent copy on D3 written"
        );
        assert!(info.repair_seconds_left.is_some());
        g.dismount().unwrap();
        (stale, 3 * MIB + (64 << 10))
    };
    // D3 comes back: the mount resyncs it.
    {
        let (mut g, report) = mount(&mut engine, &ids);
        assert_eq!(report.disks_returned, vec!["D3".to_string()], "{report:?}");
        let resync = report.resync.expect("a resync ran");
        assert_eq!(resync.disks_online, vec!["D3".to_string()]);
        assert_eq!(resync.aus_copied, stale, "only the stale AUs are copied");
        assert_eq!(resync.bytes_copied, stale * MIB);
        assert!(resync.bytes_copied <= written.div_ceil(MIB) * MIB + MIB);
        assert!(resync.aus_without_source.is_empty());
        assert_eq!(state(&g, 3), DiskState::Online);
        assert_eq!(g.disks().iter().map(|d| d.stale_aus).sum::<u64>(), 0);
        let check = g.check(false).unwrap();
        assert!(check.clean() && !check.degraded(), "{check:?}");
        g.dismount().unwrap();
    }
    // Either failure group alone holds the whole file.
    for half in [&ids[..2], &ids[2..]] {
        let (mut g, _) =
            group::mount_read_only(&mut engine, half, &GroupSelector::Name("SIM".into())).unwrap();
        let mut got = vec![0u8; want.len()];
        g.read(number, 0, &mut got).unwrap();
        assert!(got == want, "the file reads back whole from {half:?} alone");
        g.dismount().unwrap();
    }
}

/// A disk taken offline on request stays OFFLINE through mounts until it
/// is brought online, which resyncs it; a request that would leave data
/// with no copy is refused and changes nothing.
#[test]
fn a_disk_taken_offline_on_request_stays_offline_until_brought_online() {
    let (mut engine, ids) = rig();
    let number = {
        let (mut g, _) = mount(&mut engine, &ids);
        let f = g
            .create_file(&path("y"), 8 * MIB, &CreateOptions::default())
            .unwrap();
        g.write(f.number, 0, &pattern(4, (8 * MIB) as usize))
            .unwrap();
        // One disk of each failure group: refused, nothing changed.
        let e = g
            .offline_disks(&["D0".into(), "D2".into()], None)
            .unwrap_err();
        assert!(
            e.to_string().contains("no copy to read"),
            "refusal says why: {e}"
        );
        assert!(g.disks().iter().all(|d| d.state == DiskState::Online));
        let e = g.offline_disks(&["D9".into()], None).unwrap_err();
        assert!(matches!(e, GroupError::NotFound(_)), "{e}");
        g.offline_disks(&["D1".into()], Some(90)).unwrap();
        assert_eq!(state(&g, 1), DiskState::Offline);
        g.write(f.number, MIB, &pattern(5, MIB as usize)).unwrap();
        g.dismount().unwrap();
        f.number
    };
    {
        let (mut g, report) = mount(&mut engine, &ids);
        assert!(report.disks_returned.is_empty(), "{report:?}");
        assert!(report.disks_refused.is_empty(), "{report:?}");
        assert_eq!(report.disks_held, vec!["D1".to_string()]);
        let d1 = g.disks().into_iter().find(|d| d.number == 1).unwrap();
        assert!(d1.held && d1.state == DiskState::Offline);
        assert!(d1.repair_seconds_left.unwrap() <= 90 * 60);
        let resync = g
            .online_disks(Some(&["D1".into()]), 4, &mut |_| {})
            .unwrap();
        assert_eq!(resync.disks_online, vec!["D1".to_string()]);
        assert_eq!(state(&g, 1), DiskState::Online);
        let mut got = vec![0u8; MIB as usize];
        g.read(number, MIB, &mut got).unwrap();
        assert!(got == pattern(5, MIB as usize));
        g.dismount().unwrap();
    }
    let (g, report) = mount(&mut engine, &ids);
    assert!(
        report.disks_refused.is_empty() && report.resync.is_none(),
        "{report:?}"
    );
    assert!(g
        .disks()
        .iter()
        .all(|d| d.state == DiskState::Online && !d.held));
    g.dismount().unwrap();
    // What was written while D1 was away is on it: failure group A alone
    // serves it.
    let (mut g, _) =
        group::mount_read_only(&mut engine, &ids[..2], &GroupSelector::Name("SIM".into())).unwrap();
    let mut want = pattern(4, (8 * MIB) as usize);
    want[MIB as usize..(2 * MIB) as usize].copy_from_slice(&pattern(5, MIB as usize));
    let mut got = vec![0u8; want.len()];
    g.read(number, 0, &mut got).unwrap();
    assert!(got == want);
    g.dismount().unwrap();
}

/// Each mount's disk state changes, as (disk, state to, count).
fn changes(g: &Group<'_>) -> Vec<(String, String, u64)> {
    g.disk_state_changes()
        .into_iter()
        .map(|c| (c.disk, c.to, c.count))
        .collect()
}

fn change(disk: &str, to: &str, count: u64) -> (String, String, u64) {
    (disk.to_string(), to.to_string(), count)
}

/// Every change of a disk's state is counted once, where a superblock
/// generation records it, whichever path made it: a mount that marks a
/// missing disk OFFLINE, and the next that finds it and resyncs it; an
/// offline on request and the online that brings it back; a write that
/// fails on a disk. A mount that changes nothing counts nothing.
#[test]
fn every_disk_state_change_is_counted_once_where_the_superblocks_record_it() {
    let (mut engine, ids) = rig();
    let number = {
        let (mut g, _) = mount(&mut engine, &ids[..3]);
        assert_eq!(changes(&g), vec![change("D3", "OFFLINE", 1)]);
        let f = g
            .create_file(&path("c"), 4 * MIB, &CreateOptions::default())
            .unwrap();
        g.write(f.number, 0, &pattern(3, (4 * MIB) as usize))
            .unwrap();
        assert_eq!(changes(&g), vec![change("D3", "OFFLINE", 1)]);
        g.dismount().unwrap();
        f.number
    };
    {
        let (mut g, report) = mount(&mut engine, &ids);
        assert!(report.resync.is_some(), "{report:?}");
        assert_eq!(
            changes(&g),
            vec![change("D3", "ONLINE", 1), change("D3", "SYNCING", 1)]
        );
        g.offline_disks(&["D1".into()], None).unwrap();
        g.online_disks(Some(&["D1".into()]), 4, &mut |_| {})
            .unwrap();
        assert_eq!(
            changes(&g),
            vec![
                change("D1", "OFFLINE", 1),
                change("D1", "ONLINE", 1),
                change("D1", "SYNCING", 1),
                change("D3", "ONLINE", 1),
                change("D3", "SYNCING", 1),
            ]
        );
        g.dismount().unwrap();
    }
    let extent = {
        let (g, _) = mount(&mut engine, &ids);
        assert_eq!(changes(&g), vec![], "nothing changed at this mount");
        let e = g.extents(number).unwrap()[0];
        g.dismount().unwrap();
        e
    };
    let victim = *extent.copies().iter().find(|c| c.disk >= 2).unwrap();
    let at = u64::from(victim.au) * MIB;
    engine
        .inner
        .disk_mut(ids[usize::from(victim.disk)])
        .faults
        .write_error_ranges
        .push(at..at + MIB);
    let (mut g, _) = mount(&mut engine, &ids);
    g.write(number, 0, &pattern(4, MIB as usize)).unwrap();
    assert_eq!(state(&g, victim.disk), DiskState::Offline);
    assert_eq!(
        changes(&g),
        vec![change(&format!("D{}", victim.disk), "OFFLINE", 1)]
    );
    g.dismount().unwrap();
}

/// File `name` (4 MiB, written) and the copy of its extent `extent` in
/// failure group B, whose writes now fail (its AU's range on its disk).
fn failing_copy(
    engine: &mut CrashAfter,
    ids: &[DeviceId],
    name: &str,
    extent: usize,
) -> (u32, AuAddr) {
    let (number, victim) = {
        let (mut g, _) = mount(engine, ids);
        let f = g
            .create_file(&path(name), 4 * MIB, &CreateOptions::default())
            .unwrap();
        g.write(f.number, 0, &pattern(7, (4 * MIB) as usize))
            .unwrap();
        let e = g.extents(f.number).unwrap()[extent];
        let victim = *e.copies().iter().find(|c| c.disk >= 2).unwrap();
        g.dismount().unwrap();
        (f.number, victim)
    };
    let at = u64::from(victim.au) * MIB;
    engine
        .inner
        .disk_mut(ids[usize::from(victim.disk)])
        .faults
        .write_error_ranges
        .push(at..at + MIB);
    (number, victim)
}

/// A write that fails on one copy marks that copy's AU stale before its
/// disk goes offline; when the disk answers again, the resync copies it.
#[test]
fn a_copy_whose_write_failed_is_resynced_when_its_disk_answers_again() {
    let (mut engine, ids) = rig();
    let (number, victim) = failing_copy(&mut engine, &ids, "w", 2);
    let device = ids[usize::from(victim.disk)];
    let fresh = pattern(8, MIB as usize);
    {
        let (mut g, _) = mount(&mut engine, &ids);
        g.write(number, 2 * MIB, &fresh).unwrap();
        assert_eq!(state(&g, victim.disk), DiskState::Offline);
        let extent = g.extents(number).unwrap()[2];
        let slot = extent.copies().iter().position(|c| *c == victim).unwrap();
        assert_eq!(extent.stale[slot], 1, "the failed copy is marked stale");
        assert_eq!(g.disks_taken_offline().len(), 1);
        g.dismount().unwrap();
    }
    engine
        .inner
        .disk_mut(device)
        .faults
        .write_error_ranges
        .clear();
    {
        let (g, report) = mount(&mut engine, &ids);
        let resync = report.resync.expect("the disk came back and was resynced");
        assert!(resync.aus_copied >= 1, "{resync:?}");
        assert_eq!(state(&g, victim.disk), DiskState::Online);
        g.dismount().unwrap();
    }
    let (mut g, _) =
        group::mount_read_only(&mut engine, &ids[2..], &GroupSelector::Name("SIM".into())).unwrap();
    let mut got = vec![0u8; MIB as usize];
    g.read(number, 2 * MIB, &mut got).unwrap();
    assert!(
        got == fresh,
        "the resynced copy holds the write that failed on it"
    );
    g.dismount().unwrap();
}

/// `offline` of a disk that went OFFLINE by itself (its write failed; a
/// hung disk times out while the request waits its turn) holds it there:
/// it is done, not refused, and the next mount leaves the disk OFFLINE
/// though it answers again. Asked once more, it is refused: held already.
#[test]
fn offline_of_a_disk_that_failed_holds_it_offline() {
    let (mut engine, ids) = rig();
    let (number, victim) = failing_copy(&mut engine, &ids, "h", 1);
    let device = ids[usize::from(victim.disk)];
    let label = format!("D{}", victim.disk);
    {
        let (mut g, _) = mount(&mut engine, &ids);
        g.write(number, MIB, &pattern(4, MIB as usize)).unwrap();
        assert_eq!(state(&g, victim.disk), DiskState::Offline);
        let done = g
            .offline_disks(std::slice::from_ref(&label), Some(30))
            .unwrap();
        assert_eq!(done, vec![label.clone()]);
        let row = g
            .disks()
            .into_iter()
            .find(|d| d.number == victim.disk)
            .unwrap();
        assert!(row.held && row.state == DiskState::Offline, "{row:?}");
        assert!(row.repair_seconds_left.unwrap() <= 30 * 60, "{row:?}");
        let e = g
            .offline_disks(std::slice::from_ref(&label), None)
            .unwrap_err();
        assert!(
            e.to_string().contains("already OFFLINE (on request)"),
            "{e}"
        );
        g.dismount().unwrap();
    }
    engine
        .inner
        .disk_mut(device)
        .faults
        .write_error_ranges
        .clear();
    let (g, report) = mount(&mut engine, &ids);
    assert!(report.resync.is_none(), "{report:?}");
    assert_eq!(report.disks_held, vec![label]);
    assert_eq!(state(&g, victim.disk), DiskState::Offline);
    g.dismount().unwrap();
}

/// An image of a disk older than the one the group took offline (a
/// restored snapshot, a stale clone) would bring back data the resync does
/// not know it missed: it is refused, and stays OFFLINE.
#[test]
fn an_older_image_of_a_disk_is_refused() {
    let (mut engine, ids) = rig();
    let old_image = engine.inner.contents(ids[3], 0, DISK as usize);
    // The group moves on while D3 is in service: a superblock generation
    // and data it holds.
    {
        let (mut g, _) = mount(&mut engine, &ids);
        let f = g
            .create_file(&path("z"), 4 * MIB, &CreateOptions::default())
            .unwrap();
        g.write(f.number, 0, &pattern(6, (4 * MIB) as usize))
            .unwrap();
        g.offline_disks(&["D1".into()], None).unwrap();
        g.online_disks(Some(&["D1".into()]), 4, &mut |_| {})
            .unwrap();
        g.dismount().unwrap();
    }
    // D3 goes missing, then comes back as its old image.
    mount(&mut engine, &ids[..3]).0.dismount().unwrap();
    let restore = Request {
        device: ids[3],
        tag: 0,
        op: Op::Write {
            offset_bytes: 0,
            buf: cairn_io::AlignedBuf::from_slice(&old_image),
            fua: false,
        },
    };
    engine.inner.execute_all(vec![restore]).unwrap();
    let (mut g, report) = mount(&mut engine, &ids);
    assert!(report.disks_returned.is_empty(), "{report:?}");
    assert_eq!(report.disks_refused.len(), 1, "{report:?}");
    assert!(
        report.disks_refused[0].contains("not the image"),
        "{report:?}"
    );
    assert_eq!(state(&g, 3), DiskState::Offline);
    let e = g
        .online_disks(Some(&["D3".into()]), 4, &mut |_| {})
        .unwrap_err();
    assert!(e.to_string().contains("not the image"), "{e}");
    g.dismount().unwrap();
}

/// Attributes: defaults shown, values checked before any is set (a value
/// longer than the block holds too), unknown keys refused with the list of
/// keys.
#[test]
fn attributes_are_checked_and_kept() {
    let (mut engine, ids) = rig();
    {
        let (mut g, _) = mount(&mut engine, &ids);
        assert_eq!(g.attribute("disk_repair_time").as_deref(), Some("3.6h"));
        assert_eq!(g.disk_repair_seconds(), 12_960);
        let e = g
            .set_attributes(&[
                ("disk_repair_time".into(), "2h".into()),
                ("rebalance_compact".into(), "sometimes".into()),
            ])
            .unwrap_err();
        assert!(e.to_string().contains("use auto, true or false"), "{e}");
        assert_eq!(g.attribute("disk_repair_time").as_deref(), Some("3.6h"));
        let e = g
            .set_attributes(&[("colour".into(), "red".into())])
            .unwrap_err();
        assert!(
            e.to_string().contains("disk_repair_time"),
            "lists the keys: {e}"
        );
        let e = g
            .set_attributes(&[("au_size".into(), "1".into())])
            .unwrap_err();
        assert!(e.to_string().contains("fixed"), "{e}");
        // A value that reads as a duration but is longer than the block's
        // field: refused, not written (the commit's encoder panicked).
        let long = format!("{}1h", "0".repeat(100));
        let e = g
            .set_attributes(&[("disk_repair_time".into(), long)])
            .unwrap_err();
        assert!(e.to_string().contains("values at most 96"), "{e}");
        assert_eq!(g.attribute("disk_repair_time").as_deref(), Some("3.6h"));
        g.set_attributes(&[
            ("disk_repair_time".into(), "90m".into()),
            ("rebalance_compact".into(), "FALSE".into()),
        ])
        .unwrap();
        g.dismount().unwrap();
    }
    let (g, _) = mount(&mut engine, &ids);
    assert_eq!(g.disk_repair_seconds(), 5_400);
    assert_eq!(
        g.get_attributes(&["rebalance_compact".into()]).unwrap(),
        vec![("rebalance_compact".to_string(), "false".to_string())]
    );
    assert!(g.get_attributes(&["nope".into()]).is_err());
    g.dismount().unwrap();
}

/// Put `image` on `device` at byte `at` (what a power cycle left).
fn put_at(engine: &mut CrashAfter, device: DeviceId, at: u64, image: &[u8]) {
    let write = Request {
        device,
        tag: 0,
        op: Op::Write {
            offset_bytes: at,
            buf: cairn_io::AlignedBuf::from_slice(image),
            fua: true,
        },
    };
    engine.inner.execute_all(vec![write]).unwrap();
}

/// Run `f` on the group mounted through an engine on which `victim`'s
/// flushes fail once `f` sets the flag it is given (the disk lost power with
/// writes in its cache); the engine comes back afterwards.
fn with_failing_flushes(
    engine: CrashAfter,
    ids: &[DeviceId],
    victim: DeviceId,
    f: impl FnOnce(&mut Group<'_>, &std::sync::atomic::AtomicBool),
) -> CrashAfter {
    let failing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fail = failing.clone();
    let mut hooked = common::Hooked {
        inner: engine,
        hook: |_: &Request| {},
        done: move |c: &mut cairn_io::Completion| {
            if c.device == victim
                && c.kind == cairn_io::OpKind::Flush
                && fail.load(std::sync::atomic::Ordering::SeqCst)
            {
                c.result = Err(cairn_io::IoError::Os {
                    kind: cairn_io::OpKind::Flush,
                    offset_bytes: 0,
                    len_bytes: 0,
                    errno: 5,
                });
            }
        },
    };
    {
        let (mut g, _) =
            group::mount(&mut hooked, ids, &GroupSelector::Name("SIM".into())).unwrap();
        f(&mut g, &failing);
        g.dismount().unwrap();
    }
    hooked.inner
}

/// Reads file `number` whole from the disks of `half` alone.
fn read_from(engine: &mut CrashAfter, half: &[DeviceId], number: u32, len: u64) -> Vec<u8> {
    let (mut g, _) =
        group::mount_read_only(engine, half, &GroupSelector::Name("SIM".into())).unwrap();
    let mut got = vec![0u8; len as usize];
    g.read(number, 0, &mut got).unwrap();
    g.dismount().unwrap();
    got
}

/// A file of `len` bytes written with `seed`'s pattern and synced; its
/// number.
fn synced_file(engine: &mut CrashAfter, ids: &[DeviceId], name: &str, len: u64, seed: u8) -> u32 {
    let (mut g, _) = mount(engine, ids);
    let f = g
        .create_file(&path(name), len, &CreateOptions::default())
        .unwrap();
    g.write(f.number, 0, &pattern(seed, len as usize)).unwrap();
    g.sync().unwrap();
    g.dismount().unwrap();
    f.number
}

/// A disk whose flush failed may have lost any write it took since its last
/// good flush: nothing marks those AUs, so when it comes back every copy on
/// it is resynced, not only the marked ones.
#[test]
fn a_disk_that_failed_a_flush_is_resynced_whole() {
    let (mut engine, ids) = rig();
    let number = synced_file(&mut engine, &ids, "f", 16 * MIB, 1);
    let newer = pattern(2, (16 * MIB) as usize);
    let d3 = ids[3];
    // The file's AUs on D3, as they are before the write.
    let before: Vec<(u64, Vec<u8>)> = {
        let (g, _) = mount(&mut engine, &ids);
        let aus: Vec<u64> = g
            .extents(number)
            .unwrap()
            .iter()
            .flat_map(|e| {
                e.copies()
                    .iter()
                    .filter(|c| c.disk == 3)
                    .map(|c| u64::from(c.au))
            })
            .collect();
        g.dismount().unwrap();
        assert!(!aus.is_empty(), "D3 holds copies of the file");
        aus.into_iter()
            .map(|au| (au * MIB, engine.inner.contents(d3, au * MIB, MIB as usize)))
            .collect()
    };
    // D3 takes the write into its cache, then its flush fails: it lost power.
    engine = with_failing_flushes(engine, &ids, d3, |g, failing| {
        g.write(number, 0, &newer).unwrap();
        failing.store(true, std::sync::atomic::Ordering::SeqCst);
        g.sync().unwrap();
        assert_eq!(state(g, 3), DiskState::Offline);
    });
    // What it holds when it comes back: none of what its cache lost (the
    // simulator flushed it, the disk's media did not).
    for (at, bytes) in &before {
        put_at(&mut engine, d3, *at, bytes);
    }
    {
        let (g, report) = mount(&mut engine, &ids);
        assert_eq!(report.disks_returned, vec!["D3".to_string()], "{report:?}");
        assert_eq!(state(&g, 3), DiskState::Online);
        g.dismount().unwrap();
    }
    assert!(
        read_from(&mut engine, &ids[2..], number, 16 * MIB) == newer,
        "failure group B alone serves the synced write"
    );
}

/// A disk taken offline on request is flushed first: what it acknowledged
/// is on it, so fast resync may trust what is not marked.
#[test]
fn a_disk_taken_offline_on_request_is_flushed_first() {
    let (mut engine, ids) = rig();
    let number = synced_file(&mut engine, &ids, "f", 16 * MIB, 3);
    let newer = pattern(4, (16 * MIB) as usize);
    {
        let (mut g, _) = mount(&mut engine, &ids);
        g.write(number, 0, &newer).unwrap();
        g.offline_disks(&["D3".into()], None).unwrap();
        g.dismount().unwrap();
    }
    // Pulled for maintenance: a power cycle loses its cache.
    engine.inner.lose_disk(ids[3]);
    engine.inner.restore_disk(ids[3]);
    {
        let (mut g, _) = mount(&mut engine, &ids);
        g.online_disks(Some(&["D3".into()]), 8, &mut |_| {})
            .unwrap();
        g.dismount().unwrap();
    }
    assert!(read_from(&mut engine, &ids[2..], number, 16 * MIB) == newer);
}

/// A resync batch at high power clears stale bits in many files at once:
/// its commit must stay within one transaction's bound.
#[test]
fn a_resync_over_many_files_commits_in_steps() {
    let (mut engine, ids) = rig();
    let numbers: Vec<u32> = {
        let (mut g, _) = mount(&mut engine, &ids);
        let numbers = (0..80)
            .map(|i| {
                let f = g
                    .create_file(&path(&format!("s{i}")), MIB, &CreateOptions::default())
                    .unwrap();
                g.write(f.number, 0, &pattern(i as u8, MIB as usize))
                    .unwrap();
                f.number
            })
            .collect();
        g.dismount().unwrap();
        numbers
    };
    {
        let (mut g, _) = mount(&mut engine, &ids);
        g.offline_disks(&["D2".into(), "D3".into()], None).unwrap();
        for n in &numbers {
            g.write(*n, 0, &pattern(0xA5, 4096)).unwrap();
        }
        g.online_disks(None, 1024, &mut |_| {}).unwrap();
        assert!(g.disks().iter().all(|d| d.state == DiskState::Online));
        g.dismount().unwrap();
    }
    for n in numbers {
        let got = read_from(&mut engine, &ids[2..], n, MIB);
        assert!(got[..4096] == pattern(0xA5, 4096)[..]);
    }
}

/// A superblock generation that did not move proves nothing: an image of a
/// disk taken before writes that changed no disk state is still older than
/// the disk the group took offline.
#[test]
fn an_older_image_from_the_same_generation_is_refused() {
    let (mut engine, ids) = rig();
    let number = synced_file(&mut engine, &ids, "f", 4 * MIB, 5);
    let old_image = engine.inner.contents(ids[3], 0, DISK as usize);
    {
        // Writes, and nothing else: no disk changes state.
        let (mut g, _) = mount(&mut engine, &ids);
        g.write(number, 0, &pattern(6, (4 * MIB) as usize)).unwrap();
        g.dismount().unwrap();
    }
    mount(&mut engine, &ids[..3]).0.dismount().unwrap();
    let restore = Request {
        device: ids[3],
        tag: 0,
        op: Op::Write {
            offset_bytes: 0,
            buf: cairn_io::AlignedBuf::from_slice(&old_image),
            fua: false,
        },
    };
    engine.inner.execute_all(vec![restore]).unwrap();
    let (g, report) = mount(&mut engine, &ids);
    assert!(report.disks_returned.is_empty(), "{report:?}");
    assert_eq!(state(&g, 3), DiskState::Offline);
    g.dismount().unwrap();
}

/// A file with one copy (a template below the group's redundancy) on a
/// disk: taking that disk offline would leave it with no copy to read.
#[test]
fn offline_is_refused_when_a_file_would_have_no_copy() {
    let (mut engine, ids) = rig();
    let (mut g, _) = mount(&mut engine, &ids);
    let f = g
        .create_file(
            &path("one"),
            MIB,
            &CreateOptions {
                copies: Some(1),
                ..CreateOptions::default()
            },
        )
        .unwrap();
    g.write(f.number, 0, &pattern(7, MIB as usize)).unwrap();
    let disk = g.extents(f.number).unwrap()[0].copies()[0].disk;
    let label = format!("D{disk}");
    let e = g.offline_disks(&[label], None).unwrap_err();
    assert!(e.to_string().contains("+SIM/one"), "names the file: {e}");
    assert!(g.disks().iter().all(|d| d.state == DiskState::Online));
    g.dismount().unwrap();
}

/// A disk that failed a flush holds the only copy of a file with one copy:
/// when it comes back, that copy is the best there is — it is not marked
/// stale (which would leave the file unreadable and the disk SYNCING for
/// ever), and the disk goes ONLINE.
#[test]
fn a_failed_disk_holding_a_files_only_copy_comes_back_online() {
    let (mut engine, ids) = rig();
    let (number, disk) = {
        let (mut g, _) = mount(&mut engine, &ids);
        let f = g
            .create_file(
                &path("one"),
                MIB,
                &CreateOptions {
                    copies: Some(1),
                    ..CreateOptions::default()
                },
            )
            .unwrap();
        g.write(f.number, 0, &pattern(9, MIB as usize)).unwrap();
        g.sync().unwrap();
        let disk = g.extents(f.number).unwrap()[0].copies()[0].disk;
        g.dismount().unwrap();
        (f.number, disk)
    };
    let victim = ids[usize::from(disk)];
    engine = with_failing_flushes(engine, &ids, victim, |g, failing| {
        failing.store(true, std::sync::atomic::Ordering::SeqCst);
        g.sync().unwrap();
        assert_eq!(state(g, disk), DiskState::Offline);
    });
    let (mut g, report) = mount(&mut engine, &ids);
    assert_eq!(state(&g, disk), DiskState::Online, "{report:?}");
    let mut got = vec![0u8; MIB as usize];
    g.read(number, 0, &mut got).unwrap();
    assert!(got == pattern(9, MIB as usize));
    g.dismount().unwrap();
    // Nothing left to do at the next mount.
    let (g, report) = mount(&mut engine, &ids);
    assert!(report.resync.is_none(), "{report:?}");
    g.dismount().unwrap();
}
