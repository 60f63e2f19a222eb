//! Disks coming back while the group is live: what online refuses, two
//! disks with stale copies of the same AUs, a resync that cannot finish, a
//! scrub that reads without the metadata lock.

use super::*;

/// `online` of a live group reads what the disk's device holds *now*: an
/// older image put back while it was OFFLINE, a blank device, a disk of
/// another group or of no group in its place is refused, naming what was
/// found, and the disk stays OFFLINE — the group never serves data the disk
/// does not hold. The right image comes back and is resynced.
#[test]
fn online_refuses_an_older_image_a_blank_device_and_a_foreign_disk() {
    let (shared, ids, live) = live_group(11);
    let number = live
        .meta(|g| g.create_file(&path("f"), 4 * MIB, &CreateOptions::default()))
        .unwrap()
        .unwrap()
        .number;
    let mut h = live.handle(16).unwrap();
    h.write(number, 0, &block(1, 64 * 1024)).unwrap();
    h.sync().unwrap();
    // A copy of D1 as it is now (a snapshot, a clone of the LUN).
    let size = 128 * MIB as usize;
    let old = shared.with(|sim| sim.durable_contents(ids[1], 0, size));
    h.write(number, 0, &block(2, 64 * 1024)).unwrap();
    h.sync().unwrap();
    live.offline_disks(&["D1".into()], None).unwrap();
    h.write(number, 64 * 1024, &block(3, 64 * 1024)).unwrap();
    h.sync().unwrap();
    let current = shared.with(|sim| sim.durable_contents(ids[1], 0, size));
    let offline = |live: &LiveGroup| {
        live.meta(|g| {
            g.disks()
                .iter()
                .find(|d| d.label == "D1")
                .map(|d| d.state.as_str())
        })
        .unwrap()
    };
    // The older image.
    shared.with(|sim| sim.scribble(ids[1], 0, &old));
    let e = live
        .bring_back(Some(&["D1".into()]))
        .expect_err("an older image of D1 is refused");
    assert!(
        e.to_string().contains("not the image"),
        "an older image is named as such: {e}"
    );
    assert_eq!(offline(&live), Some("OFFLINE"));
    // A blank device.
    shared.with(|sim| sim.scribble(ids[1], 0, &vec![0u8; size]));
    let e = live
        .bring_back(Some(&["D1".into()]))
        .expect_err("a blank device in D1's place is refused");
    assert!(
        e.to_string().contains("no copy of a Cairn label"),
        "a blank device is named as such: {e}"
    );
    assert_eq!(offline(&live), Some("OFFLINE"));
    // A disk of another group (its D1, of the same size).
    let (other, other_ids, other_live) = common::four_disk_live_group(12, "OTHER", 0x07E4, 64);
    other_live.dismount().unwrap();
    let theirs = other.with(|sim| sim.durable_contents(other_ids[1], 0, size));
    shared.with(|sim| sim.scribble(ids[1], 0, &theirs));
    let e = live
        .bring_back(Some(&["D1".into()]))
        .expect_err("another group's disk in D1's place is refused");
    assert!(
        e.to_string().contains("a disk of another group"),
        "another group's disk is named as such: {e}"
    );
    assert_eq!(offline(&live), Some("OFFLINE"));
    // A labelled disk of no group.
    shared.with(|sim| {
        cairn_store::labeling::write_label(
            sim,
            ids[1],
            &cairn_store::labeling::LabelSpec {
                label: cairn_format::DiskLabel::parse("STRAY").unwrap(),
                disk_uuid: uuid::Uuid::from_u128(77),
                now_unix_seconds: 1_763_700_000,
                generation: 1,
            },
        )
        .unwrap()
    });
    let e = live
        .bring_back(Some(&["D1".into()]))
        .expect_err("a disk of no group in D1's place is refused");
    assert!(
        e.to_string().contains("STRAY") && e.to_string().contains("a Cairn disk in no group"),
        "{e}"
    );
    assert_eq!(offline(&live), Some("OFFLINE"));
    // The image the group took offline comes back, and is resynced.
    shared.with(|sim| sim.scribble(ids[1], 0, &current));
    live.online_disks(Some(&["D1".into()]), 4, &mut |_| {})
        .unwrap();
    assert_eq!(offline(&live), Some("ONLINE"));
    let mut back = vec![0u8; 128 * 1024];
    h.read(number, 0, &mut back).unwrap();
    assert_eq!(&back[..64 * 1024], &block(2, 64 * 1024)[..]);
    assert_eq!(&back[64 * 1024..], &block(3, 64 * 1024)[..]);
    drop(h);
    let report = live.meta(|g| g.check(false)).unwrap().unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}

/// High redundancy: two disks in two failure groups taken offline, the
/// file written meanwhile (every extent of it then has two stale copies of
/// the same AUs, one on each), and one `online` of both. While they are
/// SYNCING, `check` says SYNCING as `disks` does. Then both are ONLINE with
/// nothing stale, every copy on them holds what was written, and with the
/// third failure group offline the file reads back from the other two.
#[test]
fn online_of_two_disks_with_stale_copies_of_the_same_aus_brings_both_back() {
    use cairn_format::group::DiskState;
    let (shared, ids, live, number) = high_group(12);
    let mut h = live.handle(16).unwrap();
    live.offline_disks(&["D0".into(), "D1".into()], None)
        .unwrap();
    let want = block(2, (8 * MIB) as usize);
    h.write(number, 0, &want).unwrap();
    h.sync().unwrap();
    let (stale0, stale1) = (
        disk_row(&live, "D0").stale_aus,
        disk_row(&live, "D1").stale_aus,
    );
    assert!(
        stale0 > 0 && stale1 > 0,
        "the writes marked copies on both D0 and D1 stale"
    );
    // What `online` does: bring back, then resync.
    live.bring_back(Some(&["D0".into(), "D1".into()])).unwrap();
    let check = live.meta(|g| g.check(false)).unwrap().unwrap();
    for label in ["D0", "D1"] {
        assert_eq!(disk_row(&live, label).state, DiskState::Syncing);
        assert!(
            check
                .disks_not_in_use
                .iter()
                .any(|d| d.starts_with(label) && d.ends_with("SYNCING")),
            "check says SYNCING as disks does: {check:?}"
        );
    }
    let report = live.resync(4, &mut |_| {}).unwrap();
    assert_eq!(
        report.disks_online,
        vec!["D0".to_string(), "D1".to_string()]
    );
    assert_eq!(
        report.aus_copied,
        stale0 + stale1,
        "each stale AU copied once"
    );
    assert!(report.aus_without_source.is_empty(), "{report:?}");
    assert!(report.disks_left.is_empty(), "{report:?}");
    for d in disk_rows(&live) {
        assert_eq!(d.state, DiskState::Online, "{d:?}");
        assert_eq!(d.stale_aus, 0, "{d:?}");
    }
    // Every copy on D0 and D1 holds what was written while they were away
    // (1 MiB AUs, 1-AU extents: extent i is MiB i).
    let extents = live
        .meta(|g| g.extents(number).map(<[_]>::to_vec))
        .unwrap()
        .unwrap();
    assert_eq!(extents.len(), 8);
    let mut checked = 0;
    for (i, e) in extents.iter().enumerate() {
        for c in e.copies().iter().filter(|c| c.disk <= 1) {
            let on_disk = shared.with(|sim| {
                sim.durable_contents(
                    ids[usize::from(c.disk)],
                    u64::from(c.au) * MIB,
                    MIB as usize,
                )
            });
            assert!(
                on_disk[..] == want[i * MIB as usize..(i + 1) * MIB as usize],
                "extent {i}'s copy on D{}",
                c.disk
            );
            checked += 1;
        }
    }
    assert_eq!(
        checked,
        stale0 + stale1,
        "every copy checked was one resynced"
    );
    // With failure group FG2 offline, the file reads back from FG0 and FG1.
    live.offline_disks(&["D2".into(), "D5".into()], None)
        .unwrap();
    let mut back = vec![0u8; want.len()];
    h.read(number, 0, &mut back).unwrap();
    assert!(back == want, "the file reads back from FG0 and FG1");
    drop(h);
    let check = live.meta(|g| g.check(false)).unwrap().unwrap();
    assert!(check.problems.is_empty(), "{check:?}");
}

/// A resync that cannot bring a disk ONLINE (every good copy of one AU
/// fails its read) says which disk and why, and leaves it SYNCING with
/// that AU stale (never read); once the copies read again, the next resync
/// brings it ONLINE.
#[test]
fn a_resync_that_cannot_finish_says_which_disk_and_why() {
    use cairn_format::group::DiskState;
    let (shared, ids, live, number) = high_group(13);
    let mut h = live.handle(16).unwrap();
    live.offline_disks(&["D0".into()], None).unwrap();
    let want = block(3, (8 * MIB) as usize);
    h.write(number, 0, &want).unwrap();
    h.sync().unwrap();
    // The extent with a copy on D0: its other copies fail every read.
    let extents = live
        .meta(|g| g.extents(number).map(<[_]>::to_vec))
        .unwrap()
        .unwrap();
    let sources: Vec<(usize, u64)> = extents
        .iter()
        .find(|e| e.copies().iter().any(|c| c.disk == 0))
        .unwrap()
        .copies()
        .iter()
        .filter(|c| c.disk != 0)
        .map(|c| (usize::from(c.disk), u64::from(c.au) * MIB))
        .collect();
    assert_eq!(sources.len(), 2);
    shared.with(|sim| {
        for (d, at) in &sources {
            sim.disk_mut(ids[*d])
                .faults
                .read_error_ranges
                .push(*at..*at + MIB);
        }
    });
    let report = live
        .online_disks(Some(&["D0".into()]), 4, &mut |_| {})
        .unwrap();
    assert!(report.disks_online.is_empty(), "{report:?}");
    assert_eq!(report.disks_left.len(), 1, "{report:?}");
    let left = &report.disks_left[0];
    assert!(
        left.starts_with(
            "D0 (SYNCING): 1 stale AU(s) left, 1 with no good copy that could be read"
        ),
        "{left}"
    );
    let d0 = disk_row(&live, "D0");
    assert_eq!((d0.state, d0.stale_aus), (DiskState::Syncing, 1), "{d0:?}");
    shared.with(|sim| {
        for (d, _) in &sources {
            sim.disk_mut(ids[*d]).faults.read_error_ranges.clear();
        }
    });
    let report = live.resync(4, &mut |_| {}).unwrap();
    assert_eq!(report.disks_online, vec!["D0".to_string()], "{report:?}");
    assert!(report.disks_left.is_empty(), "{report:?}");
    let mut back = vec![0u8; want.len()];
    h.read(number, 0, &mut back).unwrap();
    assert!(back == want);
}

/// Issue 34 item 10 ("nothing waits for data I/O while holding `meta`"):
/// a live scrub reads the copies without the metadata lock. Its read of a
/// disk that does not answer is held; meanwhile a metadata operation (a
/// listing) completes. Before, the scrub read under `meta`, and every
/// metadata operation of the service waited for the slowest disk.
#[test]
fn a_live_scrub_reads_without_holding_the_metadata_lock() {
    use cairn_store::group::scrub::ScrubRepair;
    use cairn_store::group::{self, GroupSelector, MissingDisks, SameDevices};
    let (shared, ids, live) = live_group(12);
    let number = live
        .meta(|g| g.create_file(&path("f"), 4 * MIB, &CreateOptions::default()))
        .unwrap()
        .unwrap()
        .number;
    {
        let mut h = live.handle(64).unwrap();
        h.write(number, 0, &block(7, 4 * MIB as usize)).unwrap();
        h.sync_all().unwrap();
    }
    live.dismount().unwrap();
    let held = Arc::new(HeldRead::default());
    let hook = |held: &Arc<HeldRead>| {
        let held = held.clone();
        move |r: &cairn_io::Request| held.see(r)
    };
    let (g, _) = group::mount_owned(
        Box::new(common::Hooked {
            inner: shared.handle(),
            hook: hook(&held),
            done: common::untouched,
        }),
        &ids,
        &GroupSelector::Name("LIVE".into()),
        MissingDisks::MarkOffline,
    )
    .unwrap();
    let (source, h2) = (shared.clone(), held.clone());
    let live = LiveGroup::new(
        g,
        Box::new(SameDevices(move |_depth| {
            Box::new(common::Hooked {
                inner: source.handle(),
                hook: hook(&h2),
                done: common::untouched,
            }) as Box<dyn cairn_io::IoEngine>
        })),
    );
    held.state.lock().unwrap().0 = true;
    let scrub = {
        let live = live.clone();
        std::thread::spawn(move || live.scrub(4, ScrubRepair::new(false, None), &mut |_| {}))
    };
    assert!(held.wait_holding(), "the scrub read a data chunk");
    let (tx, rx) = std::sync::mpsc::channel();
    let lister = {
        let live = live.clone();
        std::thread::spawn(move || {
            let listed =
                live.meta(|g| g.list(&GroupPath::parse("+LIVE").unwrap()).map(|l| l.len()));
            let _ = tx.send(listed.is_ok());
        })
    };
    // A bound on a failure, not a synchronisation: the listing's answer is.
    let answered = rx.recv_timeout(Duration::from_secs(60));
    held.release();
    let report = scrub.join().unwrap().unwrap();
    lister.join().unwrap();
    assert_eq!(
        answered,
        Ok(true),
        "a listing answered while the scrub's read was held"
    );
    assert!(report.clean(), "{:?}", report.problems);
    assert!(
        report.extents_read > 0 && report.bytes_read >= 8 * MIB,
        "{report:?}"
    );
}
