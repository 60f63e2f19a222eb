//! Targeted scenarios beside the crash simulation: maps that go indirect,
//! replay over reused AUs, incarnations, rotten or zeroed table blocks, a
//! disk lost while mounted, bad, damaged, misdirected and blank metadata
//! copies, leaks, the file directory past its direct extents, replay that
//! fails, many aliases, fine striping, what a commit flushes.

use super::*;

/// Files past the direct extents use indirect AUs; deleting, shrinking, or
/// running out of space while growing one must free them cleanly.
#[test]
fn files_with_indirect_extents_shrink_delete_and_hit_no_space_cleanly() {
    let (mut engine, ids, _) = scenario(&[(256 * MIB, "A")], Redundancy::External);
    let mut g = mount_sim(&mut engine, &ids);
    g.create_file(&path("big"), 107 * MIB, &CreateOptions::default())
        .unwrap();
    g.resize(&path("big"), 100 * MIB).unwrap();
    g.remove(&path("big")).unwrap();
    g.create_file(&path("big2"), 110 * MIB, &CreateOptions::default())
        .unwrap();
    g.remove(&path("big2")).unwrap();
    let err = g
        .create_file(&path("huge"), 400 * MIB, &CreateOptions::default())
        .unwrap_err();
    assert!(matches!(err, GroupError::NoSpace(_)), "{err}");
    assert!(g.check(false).unwrap().problems.is_empty());
    g.dismount().unwrap();
    let mut g = mount_sim(&mut engine, &ids);
    assert!(g.check(false).unwrap().problems.is_empty());
    assert!(
        g.open(&path("huge")).is_err(),
        "a failed create leaves no file"
    );
}

/// A freed indirect AU reused for data must not be overwritten by replaying
/// journal records written while it still held extent blocks.
#[test]
fn replay_never_writes_over_a_reused_au() {
    let disks: Vec<(u64, &str)> = (0..12).map(|_| (16 * MIB, "A")).collect();
    let (mut engine, ids, _) = scenario(&disks, Redundancy::External);
    let data = pattern(134 * MIB as usize, 5);
    {
        let mut g = mount_sim(&mut engine, &ids);
        g.create_file(&path("a"), 115 * MIB, &CreateOptions::default())
            .unwrap();
        g.remove(&path("a")).unwrap();
        let b = g
            .create_file(&path("b"), 134 * MIB, &CreateOptions::default())
            .unwrap();
        g.write(b.number, 0, &data).unwrap();
        g.sync().unwrap();
        // Killed here: no dismount, so the journal is replayed at mount.
    }
    engine.inner.crash(CrashPolicy::KEEP_ALL);
    let mut g = mount_sim(&mut engine, &ids);
    let b = g.open(&path("b")).unwrap();
    let mut back = vec![0u8; data.len()];
    g.read(b.number, 0, &mut back).unwrap();
    assert!(back == data, "synced data changed by replay");
    assert!(g.check(false).unwrap().problems.is_empty());
}

/// A file number reused after a remount gets a new incarnation, so blocks of
/// the earlier file are never taken for the new one's.
#[test]
fn incarnations_are_never_reused() {
    let (mut engine, ids, _) = scenario(&[(64 * MIB, "A")], Redundancy::External);
    let first = {
        let mut g = mount_sim(&mut engine, &ids);
        let f = g
            .create_file(&path("x"), MIB, &CreateOptions::default())
            .unwrap();
        g.remove(&path("x")).unwrap();
        g.dismount().unwrap();
        f
    };
    let mut g = mount_sim(&mut engine, &ids);
    let second = g
        .create_file(&path("y"), MIB, &CreateOptions::default())
        .unwrap();
    assert_eq!(first.number, second.number, "the number is reused");
    assert_ne!(first.incarnation, second.incarnation);
}

/// Bit rot in an allocation-table block does not stop the mount: the table is
/// rebuilt from the extent maps, and the check is clean afterwards.
#[test]
fn a_rotten_allocation_table_block_is_rebuilt_at_mount() {
    let (mut engine, ids, _) = scenario(&[(64 * MIB, "A"), (64 * MIB, "B")], Redundancy::Normal);
    let data = pattern(4 * MIB as usize, 9);
    {
        let mut g = mount_sim(&mut engine, &ids);
        let f = g
            .create_file(&path("x"), 4 * MIB, &CreateOptions::default())
            .unwrap();
        g.write(f.number, 0, &data).unwrap();
        g.dismount().unwrap();
    }
    // The first bitmap block of disk 0 (after one summary block at 2 MiB),
    // and the summary block of disk 1.
    engine.inner.rot(ids[0], 2 * MIB + 4096 + 100, 3);
    engine.inner.rot(ids[1], 2 * MIB + 200, 5);
    let (mut g, report) =
        group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
    assert!(
        report.warnings.iter().any(|w| w.contains("rebuilt")),
        "{:?}",
        report.warnings
    );
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.starts_with("D1") && w.contains("summary")),
        "{:?}",
        report.warnings
    );
    assert!(g.check(false).unwrap().problems.is_empty());
    let f = g.open(&path("x")).unwrap();
    // New allocations must not land on the file's AUs.
    g.create_file(&path("y"), 8 * MIB, &CreateOptions::default())
        .unwrap();
    let mut back = vec![0u8; data.len()];
    g.read(f.number, 0, &mut back).unwrap();
    assert!(back == data);
    assert!(g.check(false).unwrap().problems.is_empty());
}

/// A disk lost while the group is mounted: writes and reads go on without an
/// error reaching the caller, and the disk is marked offline.
#[test]
fn a_disk_lost_while_mounted_is_offlined_and_io_goes_on() {
    let (mut engine, ids, _) = scenario(
        &[
            (64 * MIB, "A"),
            (64 * MIB, "A"),
            (64 * MIB, "B"),
            (64 * MIB, "B"),
        ],
        Redundancy::Normal,
    );
    let data = pattern(8 * MIB as usize, 3);
    let mut g = mount_sim(&mut engine, &ids);
    let f = g
        .create_file(&path("x"), 8 * MIB, &CreateOptions::default())
        .unwrap();
    g.write(f.number, 0, &data[..4 * MIB as usize]).unwrap();
    drop(g);
    engine.inner.lose_disk(ids[3]);
    let mut g = group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into()))
        .map(|(g, _)| g)
        .unwrap();
    // The mount still sees the disk (it answers nothing but errors now).
    g.write(f.number, 4 * MIB, &data[4 * MIB as usize..])
        .unwrap();
    g.sync().unwrap();
    let mut back = vec![0u8; data.len()];
    g.read(f.number, 0, &mut back).unwrap();
    assert!(back == data);
    let states: Vec<_> = g.disks().iter().map(|d| d.state).collect();
    assert_eq!(
        states[3],
        cairn_format::group::DiskState::Offline,
        "{states:?}"
    );
    assert!(states[..3]
        .iter()
        .all(|s| *s == cairn_format::group::DiskState::Online));
    assert!(g.check(false).unwrap().problems.is_empty());
}

/// A copy the caller's check rejects is read from the mirror instead, and
/// rewritten from it.
#[test]
fn a_bad_copy_is_read_around_and_rewritten() {
    let (mut engine, ids, _) = scenario(&[(64 * MIB, "A"), (64 * MIB, "B")], Redundancy::Normal);
    let data = pattern(MIB as usize, 1);
    let mut g = mount_sim(&mut engine, &ids);
    let f = g
        .create_file(&path("x"), MIB, &CreateOptions::default())
        .unwrap();
    g.write(f.number, 0, &data).unwrap();
    g.sync().unwrap();
    let primary = g.extents(f.number).unwrap()[0].copies()[0];
    let au = g.au_bytes();
    drop(g);
    let device = ids[usize::from(primary.disk)];
    engine
        .inner
        .scribble(device, u64::from(primary.au) * au, &[0xEE; 4096]);
    let mut g = mount_sim(&mut engine, &ids);
    let expected = data.clone();
    let check = move |b: &[u8]| b == expected.as_slice();
    let mut back = vec![0u8; data.len()];
    g.read_checked(f.number, 0, &mut back, &check).unwrap();
    assert!(back == data, "served from the good copy");
    g.sync().unwrap();
    drop(g);
    let healed = engine
        .inner
        .contents(device, u64::from(primary.au) * au, 4096);
    assert_eq!(healed, data[..4096], "the bad copy was rewritten");
}

/// A damaged metadata mirror copy is healed by the mount that reads it.
#[test]
fn a_damaged_metadata_copy_is_healed_at_mount() {
    let (mut engine, ids, [good, bad]) = directory_entry_copies(|x| x);
    engine.inner.scribble(bad.0, bad.1 + 100, &[0x55; 16]);
    let (mut g, report) =
        group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
    assert!(report.repaired_copies >= 1, "{report:?}");
    assert!(g.check(false).unwrap().problems.is_empty());
    drop(g);
    assert_eq!(
        engine.inner.contents(bad.0, bad.1, 4096),
        engine.inner.contents(good.0, good.1, 4096)
    );
}

/// A misdirected write that lands on one copy of a metadata block never
/// written (an unused file directory entry) leaves that copy invalid and its
/// mirror blank. No file was there: the blank copy is the truth (a blank
/// beside a real entry would take a fault on each of two failure groups), so
/// the mount reports no lost file and rewrites the bad copy blank. (Found by
/// the interleaving simulator, seed 657.)
#[test]
fn a_misdirected_write_on_an_unused_entry_is_no_lost_file() {
    // The entry after x's: never written.
    let (mut engine, ids, [hit, mirror]) = directory_entry_copies(|x| x + 1);
    assert!(engine
        .inner
        .contents(mirror.0, mirror.1, 4096)
        .iter()
        .all(|b| *b == 0));
    // Half a block of someone else's data, as a misdirected 512-byte-sector
    // write leaves it.
    engine.inner.scribble(hit.0, hit.1 + 2048, &[0x5A; 2048]);
    let (mut g, report) =
        group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
    assert!(report.damage.is_empty(), "{report:?}");
    assert!(report.repaired_copies >= 1, "{report:?}");
    assert!(g.check(false).unwrap().problems.is_empty());
    drop(g);
    assert!(
        engine
            .inner
            .contents(hit.0, hit.1, 4096)
            .iter()
            .all(|b| *b == 0),
        "the bad copy was rewritten blank"
    );
}

/// A metadata block never written, one copy of which cannot be read (a
/// read error on one failure group's disk, or on both: either copy),
/// reads as blank: a blank copy beside a real block would take a fault on
/// each of two failure groups, more than normal redundancy covers. The
/// unreadable copy is left as it is. (Found by the crash simulation once
/// it injected read errors: every mount failed, "could not be read from
/// any copy", while the disk kept failing that read.)
#[test]
fn a_blank_metadata_block_with_an_unreadable_copy_reads_as_blank() {
    for unreadable in [0, 1] {
        let (mut engine, ids, copies) = directory_entry_copies(|x| x + 1);
        for (device, offset) in copies {
            assert!(engine
                .inner
                .contents(device, offset, 4096)
                .iter()
                .all(|b| *b == 0));
        }
        let (device, offset) = copies[unreadable];
        engine
            .inner
            .disk_mut(device)
            .faults
            .read_error_ranges
            .push(offset..offset + 4096);
        let (g, report) = group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into()))
            .unwrap_or_else(|e| panic!("copy {unreadable} unreadable: mount: {e}"));
        assert!(report.damage.is_empty(), "{report:?}");
        assert_eq!(
            group_files(&g).keys().collect::<Vec<_>>(),
            ["x"],
            "copy {unreadable} unreadable"
        );
        drop(g);
        engine
            .inner
            .disk_mut(device)
            .faults
            .read_error_ranges
            .clear();
        assert!(
            engine
                .inner
                .contents(device, offset, 4096)
                .iter()
                .all(|b| *b == 0),
            "the unreadable copy is left as it was"
        );
    }
}

/// An AU marked used that no file owns (a leak) is reported with its place,
/// and `check --repair` frees it.
#[test]
fn check_reports_and_repairs_a_leaked_au() {
    use cairn_format::group::{decode_bitmap, encode_bitmap, AtLayout};
    use cairn_format::meta::{self, BlockId, BlockType};
    let (mut engine, ids, _) = scenario(&[(64 * MIB, "A")], Redundancy::External);
    let g = mount_sim(&mut engine, &ids);
    let uuid = g.uuid();
    g.dismount().unwrap();
    let layout = AtLayout::for_disk(64 * MIB, MIB).unwrap();
    let offset = layout.bitmap_offset_bytes(0);
    let old = engine.inner.contents(ids[0], offset, 4096);
    let generation = {
        let id = BlockId {
            block_type: BlockType::AtBitmap,
            owner: 0,
            owner_tag: 0,
            index: offset / 4096,
        };
        meta::open(&old, id, uuid).unwrap()
    };
    let mut bits = decode_bitmap(&old);
    let leaked = layout.au_count - 1;
    bits[(leaked / 8) as usize] |= 1 << (leaked % 8);
    let mut block = meta::empty_block();
    encode_bitmap(&mut block, &bits);
    let id = BlockId {
        block_type: BlockType::AtBitmap,
        owner: 0,
        owner_tag: 0,
        index: offset / 4096,
    };
    meta::seal(&mut block, id, uuid, generation);
    engine.inner.scribble(ids[0], offset, &block[..]);
    let mut g = mount_sim(&mut engine, &ids);
    let report = g.check(false).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.location.contains(&format!("AU {leaked}")) && p.what.contains("leaked")),
        "{:?}",
        report.problems
    );
    assert!(g.check(true).unwrap().clean());
    g.dismount().unwrap();
    let mut g = mount_sim(&mut engine, &ids);
    assert!(
        g.check(false).unwrap().problems.is_empty(),
        "the repair is durable"
    );
}

/// The file directory past its 106 direct extents needs indirect AUs like any
/// file; without them the next mount refused the group.
#[test]
fn the_file_directory_grows_past_its_direct_extents() {
    let (mut engine, ids, _) = scenario(&[(512 * MIB, "A")], Redundancy::External);
    {
        let mut g = mount_sim(&mut engine, &ids);
        g.mkdir(&path("d"), false).unwrap();
        let mut n = 0u32;
        loop {
            let f = g
                .create_file(&path(&format!("d/f{n}")), 0, &CreateOptions::default())
                .unwrap();
            n += 1;
            if f.number >= 106 * 256 {
                break;
            }
        }
        g.dismount().unwrap();
    }
    let mut g = mount_sim(&mut engine, &ids);
    assert!(g.open(&path("d/f0")).is_ok());
    assert!(g.check(false).unwrap().problems.is_empty());
}

/// Replay whose writes fail must not checkpoint the records away: a later
/// mount, with the disk healthy again, still finds the acknowledged create.
#[test]
// One failing range is meant: `write_error_ranges` is a list of ranges.
#[allow(clippy::single_range_in_vec_init)]
fn a_failed_replay_keeps_its_records() {
    let (mut engine, ids, _) = scenario(&[(64 * MIB, "A")], Redundancy::External);
    let dir_au;
    {
        let mut g = mount_sim(&mut engine, &ids);
        let f = g
            .create_file(&path("x"), MIB, &CreateOptions::default())
            .unwrap();
        dir_au = u64::from(g.extents(1).unwrap()[(f.number / 256) as usize].copies()[0].au);
    }
    engine.inner.crash(CrashPolicy::LOSE_ALL);
    engine.inner.disk_mut(ids[0]).faults.write_error_ranges =
        vec![dir_au * MIB..(dir_au + 1) * MIB];
    assert!(group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).is_err());
    engine
        .inner
        .disk_mut(ids[0])
        .faults
        .write_error_ranges
        .clear();
    let g = mount_sim(&mut engine, &ids);
    assert!(g.open(&path("x")).is_ok(), "acknowledged create lost");
}

/// A journal record the disk cannot read is not the end of the journal:
/// replay that stopped there would drop acknowledged transactions (here a
/// create) and mount as if they never happened. The mount is refused,
/// saying which block could not be read; once the disk reads again, the
/// record is replayed. (A read error that passes is retried: the crash
/// simulation's random read errors.)
#[test]
fn an_unreadable_journal_record_refuses_the_mount_instead_of_ending_the_journal() {
    let (mut engine, ids, _) = scenario(&[(64 * MIB, "A")], Redundancy::External);
    let journal_au;
    {
        let mut g = mount_sim(&mut engine, &ids);
        journal_au = u64::from(g.extents(3).unwrap()[0].copies()[0].au);
        g.create_file(&path("x"), MIB, &CreateOptions::default())
            .unwrap();
    }
    // The in-place writes are lost; the journal holds the create.
    engine.inner.crash(CrashPolicy::LOSE_ALL);
    // Everything past the two headers: the records.
    let records = journal_au * MIB + 2 * 4096..(journal_au + 1) * MIB;
    engine.inner.disk_mut(ids[0]).faults.read_error_ranges = vec![records];
    let refused = group::mount_read_only(&mut engine, &ids, &GroupSelector::Name("SIM".into()));
    match refused {
        Err(e) => assert!(e.to_string().contains("journal"), "{e}"),
        Ok((g, _)) => panic!(
            "mounted without the acknowledged create: x is {:?}",
            g.open(&path("x")).map(|i| i.size_bytes)
        ),
    }
    assert!(group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).is_err());
    engine
        .inner
        .disk_mut(ids[0])
        .faults
        .read_error_ranges
        .clear();
    let g = mount_sim(&mut engine, &ids);
    assert!(g.open(&path("x")).is_ok(), "acknowledged create lost");
}

/// Removing a file whose aliases fill more blocks than one transaction holds.
#[test]
fn a_file_with_aliases_in_many_blocks_can_be_removed() {
    let (mut engine, ids, _) = scenario(&[(256 * MIB, "A")], Redundancy::External);
    let mut g = mount_sim(&mut engine, &ids);
    g.create_file(&path("f"), 0, &CreateOptions::default())
        .unwrap();
    let mut k = 0;
    for block in 0..65 {
        g.mkalias(&path("f"), &path(&format!("a{block}"))).unwrap();
        while (k + 3) % 31 != 0 {
            g.mkdir(&path(&format!("d{k}")), false).unwrap();
            k += 1;
        }
        g.mkdir(&path(&format!("d{k}")), false).unwrap();
        k += 1;
    }
    g.remove(&path("f")).unwrap();
    assert!(g.open(&path("a0")).is_err());
    assert!(g.check(false).unwrap().problems.is_empty());
}

/// A zeroed allocation bitmap block reads as "all free"; the mount notices
/// that files own AUs it calls free and rebuilds the table, so nothing is
/// handed out twice and a delete works.
#[test]
fn a_zeroed_bitmap_block_is_caught_at_mount() {
    let (mut engine, ids, _) = scenario(&[(64 * MIB, "A")], Redundancy::External);
    let data = pattern(4 * MIB as usize, 2);
    {
        let mut g = mount_sim(&mut engine, &ids);
        let f = g
            .create_file(&path("x"), 4 * MIB, &CreateOptions::default())
            .unwrap();
        g.write(f.number, 0, &data).unwrap();
        g.dismount().unwrap();
    }
    let layout = cairn_format::group::AtLayout::for_disk(64 * MIB, MIB).unwrap();
    engine
        .inner
        .scribble(ids[0], layout.bitmap_offset_bytes(0), &[0u8; 4096]);
    let (mut g, report) =
        group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
    assert!(
        report.warnings.iter().any(|w| w.contains("rebuilt")),
        "{:?}",
        report.warnings
    );
    let y = g
        .create_file(&path("y"), 8 * MIB, &CreateOptions::default())
        .unwrap();
    g.write(y.number, 0, &pattern(8 * MIB as usize, 4)).unwrap();
    let x = g.open(&path("x")).unwrap();
    let mut back = vec![0u8; data.len()];
    g.read(x.number, 0, &mut back).unwrap();
    assert!(back == data, "a new file was given the old one's AUs");
    g.remove(&path("x")).unwrap();
    assert!(g.check(false).unwrap().problems.is_empty());
}

/// Fine striping (the ONLINELOG template): 128 KiB units across sets of 8
/// extents, each extent's copies in different failure groups; data reads back
/// through the same mapping, across a remount, and a per-file redundancy
/// override gives a mirrored file in an otherwise unprotected group.
#[test]
fn fine_striped_and_overridden_files_read_back() {
    let (mut engine, ids, _) = scenario(
        &[
            (128 * MIB, "A"),
            (128 * MIB, "B"),
            (128 * MIB, "C"),
            (128 * MIB, "D"),
        ],
        Redundancy::External,
    );
    let data = pattern(3 * MIB as usize + 256 * 1024, 8);
    let (fine, mirrored) = {
        let mut g = mount_sim(&mut engine, &ids);
        let options = CreateOptions {
            template: Some("ONLINELOG".into()),
            ..CreateOptions::default()
        };
        let fine = g
            .create_file(&path("redo01.log"), data.len() as u64, &options)
            .unwrap();
        assert_eq!(fine.striping, "FINE");
        assert_eq!(
            g.extents(fine.number).unwrap().len(),
            8,
            "one set of 8 extents"
        );
        g.write(fine.number, 0, &data).unwrap();
        let options = CreateOptions {
            copies: Some(2),
            ..CreateOptions::default()
        };
        let mirrored = g.create_file(&path("ctl"), MIB, &options).unwrap();
        assert_eq!(mirrored.copies, 2);
        for e in g.extents(mirrored.number).unwrap() {
            assert_eq!(e.copies().len(), 2);
            assert_ne!(e.copies()[0].disk, e.copies()[1].disk);
        }
        g.write(mirrored.number, 0, &data[..MIB as usize]).unwrap();
        g.dismount().unwrap();
        (fine, mirrored)
    };
    let mut g = mount_sim(&mut engine, &ids);
    let mut back = vec![0u8; data.len()];
    g.read(fine.number, 0, &mut back).unwrap();
    assert!(back == data);
    // 128 KiB units land round-robin: unit 1 of the file is extent 1's first unit.
    let au = g.au_bytes();
    let e1 = g.extents(fine.number).unwrap()[1].copies()[0];
    drop(g);
    let on_disk = engine
        .inner
        .contents(ids[usize::from(e1.disk)], u64::from(e1.au) * au, 4096);
    assert_eq!(on_disk, data[128 * 1024..128 * 1024 + 4096]);
    let mut g = mount_sim(&mut engine, &ids);
    let mut back = vec![0u8; MIB as usize];
    g.read(mirrored.number, 0, &mut back).unwrap();
    assert!(back == data[..MIB as usize]);
    assert!(g.check(false).unwrap().problems.is_empty());
}

/// A commit's barrier flushes only the disks holding data its metadata
/// points at, not every disk an earlier commit wrote in place (the journal
/// covers those until a checkpoint): a metadata-only commit flushes only
/// disks it has itself written (its record's copies), and a first write's
/// commit flushes every disk the data went to.
#[test]
fn a_commit_flushes_only_the_disks_it_depends_on() {
    use cairn_io::OpKind;
    let disks: Vec<(u64, &str)> = ["A", "B", "C", "D"].map(|fg| (64 * MIB, fg)).to_vec();
    let (engine, ids, _) = scenario(&disks, Redundancy::External);
    let log = Log::default();
    let recorded = log.clone();
    let mut rec = common::Hooked {
        inner: engine,
        hook: move |r: &cairn_io::Request| recorded.lock().unwrap().push((r.device, r.op.kind())),
        done: common::untouched,
    };
    let mut g = group::mount(&mut rec, &ids, &GroupSelector::Name("SIM".into()))
        .unwrap()
        .0;
    // In-place writes on every disk: a file with extents on all four.
    let wide = g
        .create_file(&path("wide"), 8 * MIB, &CreateOptions::default())
        .unwrap();
    take(&log);
    g.write(wide.number, 0, &pattern(8 * MIB as usize, 3))
        .unwrap();
    let first_write = take(&log);
    let data_disks: std::collections::BTreeSet<DeviceId> = first_write
        .iter()
        .filter(|(_, k)| *k == OpKind::Write)
        .map(|(d, _)| *d)
        .collect();
    assert_eq!(data_disks.len(), 4, "the data went to every disk");
    let flushed: std::collections::BTreeSet<DeviceId> =
        flushes(&first_write).iter().map(|(d, _)| *d).collect();
    assert_eq!(flushed, data_disks, "the barrier flushed the data's disks");

    g.create_file(&path("empty"), 0, &CreateOptions::default())
        .unwrap();
    let metadata_only = flushes(&take(&log));
    assert!(!metadata_only.is_empty(), "the commit flushed its record");
    for (disk, written) in metadata_only {
        assert!(
            written,
            "a metadata-only commit flushed {disk:?}, which it had not written"
        );
    }
    g.dismount().unwrap();
}
