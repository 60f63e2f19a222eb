//! Failures on the data path and the commit path (issue 34, items 11, 12,
//! 20 and 21): a delete's discards never hold up other operations behind
//! the metadata lock, and their failure never fails the delete; a write cut
//! short by the group stopping leaves one content after the next mount; a
//! member whose reads come back short (its file truncated under it) is a
//! failed disk, on real files with the real engines.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cairn_format::group::DiskState;
use cairn_io::{DeviceId, IoEngine, IoError, Op};
use cairn_io_sim::{geometry, SharedSim, SimEngine};
use cairn_store::group::{
    self, CreateOptions, GroupError, GroupSelector, GroupSpec, LiveGroup, MissingDisks, NewDisk,
    Redundancy, SameDevices,
};
use cairn_store::names::GroupPath;
use uuid::Uuid;

mod common;
use common::{Hooked, Rand, MIB};

/// How long a test waits for a condition another thread brings about
/// before it fails: far more than any of them takes, so that only a hang
/// reaches it.
const PATIENCE: Duration = Duration::from_secs(120);

fn path(name: &str) -> GroupPath {
    GroupPath::parse(&format!("+DE/{name}")).unwrap()
}

/// Wait until `ready` holds, at most [`PATIENCE`]; whether it did.
fn wait_until(mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while !ready() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// Four 128 MiB simulated disks in two failure groups (disks 0 and 2 in
/// FG0, 1 and 3 in FG1) holding a normal-redundancy group `DE` with 1 MiB
/// AUs, created and dismounted.
fn four_disks(seed: u64) -> (SimEngine, Vec<DeviceId>) {
    let mut sim = SimEngine::new(seed, 256);
    let ids = common::labelled_disks(
        &mut sim,
        (0..4).map(|_| geometry(128 * MIB, 4096, 4096, 512 << 10)),
        |i| 0xDE00 | i as u128,
    );
    let disks: Vec<NewDisk> = ids
        .iter()
        .enumerate()
        .map(|(i, d)| NewDisk {
            device: *d,
            failgroup: Some(format!("FG{}", i % 2)),
        })
        .collect();
    let g = group::create(
        &mut sim,
        &disks,
        &GroupSpec {
            name: "DE".into(),
            redundancy: Redundancy::Normal,
            au_bytes: MIB,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1_763_700_000,
            group_uuid: Uuid::from_u128(0xDE << 64 | u128::from(seed)),
        },
    )
    .unwrap();
    g.dismount().unwrap();
    (sim, ids)
}

fn create(live: &LiveGroup, name: &str, size: u64) -> u32 {
    live.meta(|g| g.create_file(&path(name), size, &CreateOptions::default()))
        .unwrap()
        .unwrap()
        .number
}

/// Every AU of file `number`'s copies: (disk, AU).
fn aus_of(live: &LiveGroup, number: u32) -> BTreeSet<(u16, u64)> {
    live.meta(|g| {
        let mut out = BTreeSet::new();
        for (i, e) in g.extents(number).unwrap().iter().enumerate() {
            let n = cairn_store::placement::extent_aus(i as u64);
            for c in e.copies() {
                out.extend((0..n).map(|k| (c.disk, u64::from(c.au) + k)));
            }
        }
        out
    })
    .unwrap()
}

// ---------------------------------------------------------------------------
// Item 11: discards of freed space off the commit path

/// A gate discards wait at until the test opens it; it counts them as
/// they arrive.
#[derive(Default)]
struct Gate {
    state: Mutex<(usize, bool)>,
    changed: Condvar,
}

impl Gate {
    /// A discard arrives: counted, then held until the gate opens (at most
    /// [`PATIENCE`]: a test that never opens it fails on its own wait).
    fn arrive(&self) {
        let mut st = self.state.lock().unwrap();
        st.0 += 1;
        self.changed.notify_all();
        let deadline = Instant::now() + PATIENCE;
        while !st.1 && Instant::now() < deadline {
            st = self
                .changed
                .wait_timeout(st, Duration::from_secs(1))
                .unwrap()
                .0;
        }
    }

    fn arrived(&self) -> usize {
        self.state.lock().unwrap().0
    }

    fn open(&self) {
        self.state.lock().unwrap().1 = true;
        self.changed.notify_all();
    }
}

/// A delete of a file on a group that discards on free: no discard runs on
/// the metadata plane's engine (which only `meta`'s holder uses), and while
/// the delete's discards are held on the disk, other metadata operations
/// and a first write (which needs `meta`) complete. The freed AUs are
/// handed to nobody until their discards are over; then they are free and
/// marked, the marks durable, and they read as zeros.
#[test]
fn a_delete_holds_up_no_operation_behind_its_discards() {
    let (sim, ids) = four_disks(11);
    let shared = SharedSim::new(sim);
    // Discards sent on the metadata plane's engine: sent under `meta`.
    let under_meta = Arc::new(AtomicUsize::new(0));
    let counted = under_meta.clone();
    let meta_engine = Hooked {
        inner: shared.handle(),
        hook: move |r: &cairn_io::Request| {
            if matches!(r.op, Op::Discard { .. }) {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        },
        done: common::untouched,
    };
    let (g, _) = group::mount_owned(
        Box::new(meta_engine),
        &ids,
        &GroupSelector::Name("DE".into()),
        MissingDisks::MarkOffline,
    )
    .unwrap();
    assert!(g.discards_on_free(), "simulated disks take discard");
    // The group's own discard thread holds its discards at the gate.
    let gate = Arc::new(Gate::default());
    let (source, held) = (shared.clone(), gate.clone());
    let live = LiveGroup::new(
        g,
        Box::new(SameDevices(move |_depth| {
            let held = held.clone();
            Box::new(Hooked {
                inner: source.handle(),
                hook: move |r: &cairn_io::Request| {
                    let drain = std::thread::current().name() == Some("cairn-discard");
                    if drain && matches!(r.op, Op::Discard { .. }) {
                        held.arrive();
                    }
                },
                done: common::untouched,
            }) as Box<dyn IoEngine>
        })),
    );
    let big = create(&live, "big", 48 * MIB);
    let mut h = live.handle(16).unwrap();
    let mut rng = Rand::new(11);
    for at in (0..48 * MIB).step_by(4 * MIB as usize) {
        h.write(big, at, &rng.bytes(4 * MIB as usize)).unwrap();
    }
    h.sync().unwrap();
    let freed = aus_of(&live, big);

    under_meta.store(0, Ordering::SeqCst);
    live.meta(|g| g.remove(&path("big"))).unwrap().unwrap();
    assert_eq!(
        under_meta.load(Ordering::SeqCst),
        0,
        "the delete's discards ran on the metadata plane's engine, under `meta`"
    );
    assert!(
        wait_until(|| gate.arrived() > 0),
        "the delete's discards reach the group's discard thread"
    );

    // Held on the disk: the metadata plane goes on.
    let small = create(&live, "small", 4 * MIB);
    let data = rng.bytes(8192);
    h.write(small, 0, &data).unwrap();
    let mut back = vec![0u8; 8192];
    h.read(small, 0, &mut back).unwrap();
    assert!(back == data);
    live.meta(|g| g.list(&path(""))).unwrap().unwrap();
    assert!(live.discards_pending() > 0, "still held");
    // Nothing a discard may still be on was handed out.
    let taken = aus_of(&live, small);
    assert!(
        taken.is_disjoint(&freed),
        "AUs handed out while their discard may be in flight: {:?}",
        taken.intersection(&freed).collect::<Vec<_>>()
    );

    gate.open();
    assert!(
        wait_until(|| live.discards_pending() == 0),
        "the discards end once the disk lets them go"
    );
    // The next commit carries the marks (its barrier flushed the discards).
    create(&live, "after", MIB);
    let marked: BTreeSet<(u16, u64)> = live
        .meta(|g| {
            (0..4u16)
                .flat_map(|d| g.discard_marks(d).into_iter().map(move |au| (d, au)))
                .collect()
        })
        .unwrap();
    let in_use: BTreeSet<(u16, u64)> = ["small", "after"]
        .iter()
        .flat_map(|n| {
            let number = live.meta(|g| g.open(&path(n)).unwrap().number).unwrap();
            aus_of(&live, number)
        })
        .collect();
    let free_again: Vec<&(u16, u64)> = freed.difference(&in_use).collect();
    assert!(!free_again.is_empty());
    for au in &free_again {
        assert!(
            marked.contains(au),
            "freed and discarded, not marked: {au:?}"
        );
        let zeros =
            shared.with(|s| s.reads_zeros(ids[usize::from(au.0)], au.1 * MIB, MIB as usize));
        assert!(zeros, "marked, yet holds data: {au:?}");
    }
    drop(h);
    live.dismount().unwrap();
    let (again, _) = common::mount_live(&shared, &ids, "DE").unwrap();
    let marked_again: BTreeSet<(u16, u64)> = again
        .meta(|g| {
            (0..4u16)
                .flat_map(|d| g.discard_marks(d).into_iter().map(move |au| (d, au)))
                .collect()
        })
        .unwrap();
    assert!(
        free_again.iter().all(|au| marked_again.contains(au)),
        "durable"
    );
    let report = again.meta(|g| g.check(false)).unwrap().unwrap();
    assert!(report.clean(), "{report:?}");
    again.dismount().unwrap();
}

// ---------------------------------------------------------------------------
// Item 12: a discard that fails after the delete is durable

/// Discards never reach the disks once `armed`: the engine fails whole
/// at its next wait (as an io_uring whose ring broke), with nothing left in
/// flight.
struct BreaksOnDiscard {
    inner: SimEngine,
    armed: Arc<AtomicBool>,
    broken: bool,
}

impl IoEngine for BreaksOnDiscard {
    fn name(&self) -> &'static str {
        "breaks-on-discard"
    }
    fn geometry(&self, device: DeviceId) -> Option<&cairn_io::Geometry> {
        self.inner.geometry(device)
    }
    fn submit(&mut self, request: cairn_io::Request) -> Result<(), cairn_io::SubmitError> {
        if self.armed.load(Ordering::SeqCst) && matches!(request.op, Op::Discard { .. }) {
            self.broken = true;
            return Ok(());
        }
        self.inner.submit(request)
    }
    fn wait(&mut self, min: usize) -> Result<(), IoError> {
        if std::mem::take(&mut self.broken) {
            return Err(IoError::Engine { errno: libc::EIO });
        }
        self.inner.wait(min)
    }
    fn set_io_timeout(&mut self, timeout: Option<std::time::Duration>) {
        self.inner.set_io_timeout(timeout);
    }
    fn pop_completion(&mut self) -> Option<cairn_io::Completion> {
        self.inner.pop_completion()
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
    fn depth_max(&self) -> usize {
        self.inner.depth_max()
    }
    fn stats(&self) -> cairn_io::EngineStats {
        self.inner.stats()
    }
}

/// A delete on a group one command holds, whose discards fail because the
/// engine fails whole after the delete's record is durable: the delete is
/// done and says so; the freed AUs are free, unmarked (returnable), and
/// the next mount finds the file gone and the group clean.
#[test]
fn a_delete_whose_discards_fail_after_its_record_is_done() {
    let (sim, ids) = four_disks(12);
    let armed = Arc::new(AtomicBool::new(false));
    let mut engine = BreaksOnDiscard {
        inner: sim,
        armed: armed.clone(),
        broken: false,
    };
    let (mut g, _) = group::mount(&mut engine, &ids, &GroupSelector::Name("DE".into())).unwrap();
    let number = g
        .create_file(&path("gone"), 8 * MIB, &CreateOptions::default())
        .unwrap()
        .number;
    g.write(number, 0, &Rand::new(12).bytes(8 * MIB as usize))
        .unwrap();
    g.sync().unwrap();
    let aus: Vec<(u16, u64)> = g
        .extents(number)
        .unwrap()
        .iter()
        .enumerate()
        .flat_map(|(i, e)| {
            let n = cairn_store::placement::extent_aus(i as u64);
            e.copies()
                .iter()
                .flat_map(move |c| (0..n).map(move |k| (c.disk, u64::from(c.au) + k)))
                .collect::<Vec<_>>()
        })
        .collect();
    armed.store(true, Ordering::SeqCst);
    let removed = g.remove(&path("gone"));
    armed.store(false, Ordering::SeqCst);
    assert!(
        removed.is_ok(),
        "a delete whose record is durable is done: {removed:?}"
    );
    assert!(matches!(
        g.open(&path("gone")),
        Err(GroupError::NotFound(_))
    ));
    for (disk, au) in &aus {
        assert!(
            !g.discard_marks(*disk).contains(au),
            "AU {au} of disk {disk} marked, never discarded"
        );
    }
    let returnable: u64 = (0..4).filter_map(|d| g.returnable_bytes(d)).sum();
    assert!(
        returnable >= aus.len() as u64 * MIB,
        "the freed AUs stay returnable: {returnable}"
    );
    g.dismount().unwrap();
    let (mut g, _) = group::mount(&mut engine, &ids, &GroupSelector::Name("DE".into())).unwrap();
    assert!(matches!(
        g.open(&path("gone")),
        Err(GroupError::NotFound(_))
    ));
    let report = g.check(false).unwrap();
    assert!(report.clean(), "{report:?}");
}

// ---------------------------------------------------------------------------
// Item 20: a write cut short by the group stopping

/// The group stops (a second failure group lost) while a mirrored write is
/// between its I/O and its stale mark: the write reached one copy and not
/// the other, and fails. The next mount leaves one content: scrub finds the
/// copies equal, and a read returns the same bytes whichever copy serves
/// it.
#[test]
fn a_write_the_group_stopped_under_leaves_one_content_after_the_next_mount() {
    const SIZE: u64 = 8 * MIB;
    let (sim, ids) = four_disks(20);
    let shared = SharedSim::new(sim);
    // The writer's engine calls `trap` (once) when a write of its fails.
    type Trap = Box<dyn FnOnce() + Send>;
    let trap: Arc<Mutex<Option<Trap>>> = Arc::new(Mutex::new(None));
    let (source, sprung) = (shared.clone(), trap.clone());
    let (g, _) = group::mount_owned(
        Box::new(shared.handle()),
        &ids,
        &GroupSelector::Name("DE".into()),
        MissingDisks::MarkOffline,
    )
    .unwrap();
    let live = LiveGroup::new(
        g,
        Box::new(SameDevices(move |_depth| {
            let sprung = sprung.clone();
            Box::new(Hooked {
                inner: source.handle(),
                hook: |_: &cairn_io::Request| {},
                done: move |c: &mut cairn_io::Completion| {
                    if c.kind == cairn_io::OpKind::Write && c.result.is_err() {
                        if let Some(trap) = sprung.lock().unwrap().take() {
                            trap();
                        }
                    }
                },
            }) as Box<dyn IoEngine>
        })),
    );
    let number = create(&live, "f", SIZE);
    let old = Rand::new(20).bytes(SIZE as usize);
    let mut h = live.handle(16).unwrap();
    h.write(number, 0, &old).unwrap();
    h.sync().unwrap();
    // The first failure: disk 0 (FG0) goes offline on request.
    live.offline_disks(&["D0".into()], None).unwrap();
    // An extent whose FG0 copy is on disk 2: written on disks 2 and x.
    let extents = live.meta(|g| g.extents(number).unwrap().to_vec()).unwrap();
    let (index, x) = extents
        .iter()
        .enumerate()
        .find_map(|(i, e)| {
            let disks: Vec<u16> = e.copies().iter().map(|c| c.disk).collect();
            disks
                .contains(&2)
                .then(|| (i, *disks.iter().find(|d| **d != 2).unwrap()))
        })
        .expect("an extent with a copy on disk 2");
    let layout = live.plane().file(number).unwrap().layout;
    let at = u64::try_from(layout.logical_offset(index as u64, 0)).unwrap();
    // The second failure: disk x (FG1) is lost as the write goes to it, and
    // another thread's flush of it stops the group before the writer can
    // mark its copy stale.
    shared.with(|s| s.lose_disk(ids[usize::from(x)]));
    let other = live.clone();
    *trap.lock().unwrap() = Some(Box::new(move || {
        let stopped = std::thread::spawn(move || other.meta(|g| g.sync()))
            .join()
            .unwrap();
        assert!(
            matches!(
                stopped,
                Err(GroupError::Poisoned(_)) | Ok(Err(GroupError::Poisoned(_)))
            ),
            "losing FG1 too stops the group: {stopped:?}"
        );
    }));
    let new = vec![0xA5u8; 64 * 1024];
    let err = h.write(number, at, &new).unwrap_err();
    assert!(matches!(err, GroupError::Poisoned(_)), "{err:?}");
    assert!(trap.lock().unwrap().is_none(), "the trap was sprung");
    drop(h);
    drop(live);
    // The lost disk answers again (its path came back); the group is
    // mounted again.
    shared.with(|s| s.restore_disk(ids[usize::from(x)]));
    shared.reset_handles();
    let (live, report) = common::mount_live(&shared, &ids, "DE").unwrap();
    let name = format!("D{x}");
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains(&name) && w.contains("missed writes")),
        "the mount says why it resyncs {name}: {report:?}"
    );
    assert!(
        report.resync.as_ref().is_some_and(|r| r.aus_copied > 0),
        "{report:?}"
    );
    let scrub = live
        .scrub(
            4,
            cairn_store::group::scrub::ScrubRepair::report(),
            &mut |_| {},
        )
        .unwrap();
    assert!(scrub.clean(), "the copies differ: {:?}", scrub.problems);
    let check = live.meta(|g| g.check(false)).unwrap().unwrap();
    assert!(check.clean(), "{check:?}");
    // One content, whichever copy serves the read.
    let mut seen = Vec::new();
    for failing in [2u16, x] {
        let dev = ids[usize::from(failing)];
        let range = extents[index]
            .copies()
            .iter()
            .find(|c| c.disk == failing)
            .map(|c| u64::from(c.au) * MIB..(u64::from(c.au) + 1) * MIB)
            .unwrap();
        shared.with(|s| s.disk_mut(dev).faults.read_error_ranges = vec![range.clone()]);
        let mut h = live.handle(8).unwrap();
        let mut back = vec![0u8; new.len()];
        let read = h.read(number, at, &mut back);
        shared.with(|s| s.disk_mut(dev).faults.read_error_ranges.clear());
        read.unwrap();
        assert!(
            back == new || back[..] == old[at as usize..at as usize + new.len()],
            "neither the old bytes nor the new ones"
        );
        seen.push(back);
    }
    assert!(
        seen[0] == seen[1],
        "reads differ by the copy that serves them"
    );
    // Resynced once: the record is cleared.
    live.dismount().unwrap();
    let (live, report) = common::mount_live(&shared, &ids, "DE").unwrap();
    assert!(
        report.resync.is_none() && report.warnings.is_empty(),
        "{report:?}"
    );
    live.dismount().unwrap();
}

// ---------------------------------------------------------------------------
// Item 21: a member whose reads come back short

/// Real files under a live group on a real engine.
struct RealGroup {
    _dir: tempfile::TempDir,
    paths: Vec<PathBuf>,
    live: LiveGroup,
}

/// `n` sparse files of 64 MiB, each its own failure group, holding group
/// `DE` (1 MiB AUs, `redundancy`), mounted live on engines of `kind`.
fn real_group(kind: cairn_io::EngineKind, n: usize, redundancy: Redundancy) -> RealGroup {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let host = cairn_io::host::Host::real();
    let mut engine = cairn_io::new_file_engine(kind, 64).unwrap();
    let mut paths = Vec::new();
    let mut files = Vec::new();
    let mut ids = Vec::new();
    for i in 0..n {
        let p = dir.path().join(format!("d{i}.img"));
        std::fs::File::create(&p)
            .unwrap()
            .set_len(64 * MIB)
            .unwrap();
        let file =
            cairn_io::DeviceFile::open(&p, cairn_io::OpenMode::WRITE_EXCLUSIVE, &host).unwrap();
        files.push(file.try_clone().unwrap());
        let id = engine.attach(file);
        cairn_store::labeling::write_label(
            engine.as_mut(),
            id,
            &cairn_store::labeling::LabelSpec {
                label: cairn_format::DiskLabel::parse(&format!("R{i}")).unwrap(),
                disk_uuid: Uuid::from_u128(0x21_00 | i as u128),
                now_unix_seconds: 1_763_700_000,
                generation: 1,
            },
        )
        .unwrap();
        ids.push(id);
        paths.push(p);
    }
    let disks: Vec<NewDisk> = ids
        .iter()
        .enumerate()
        .map(|(i, d)| NewDisk {
            device: *d,
            failgroup: Some(format!("FG{i}")),
        })
        .collect();
    group::create(
        engine.as_mut(),
        &disks,
        &GroupSpec {
            name: "DE".into(),
            redundancy,
            au_bytes: MIB,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1_763_700_000,
            group_uuid: Uuid::from_u128(0x21),
        },
    )
    .unwrap()
    .dismount()
    .unwrap();
    let engine: Box<dyn IoEngine> = engine;
    let (g, _) = group::mount_owned(
        engine,
        &ids,
        &GroupSelector::Name("DE".into()),
        MissingDisks::Refuse,
    )
    .unwrap();
    // Data handles attach duplicates of the same files in the same order:
    // the same device ids.
    let live = LiveGroup::new(
        g,
        Box::new(SameDevices(move |depth| {
            let mut e = cairn_io::new_file_engine(kind, depth).unwrap();
            for f in &files {
                e.attach(f.try_clone().unwrap());
            }
            e as Box<dyn IoEngine>
        })),
    );
    RealGroup {
        _dir: dir,
        paths,
        live,
    }
}

fn state_of(live: &LiveGroup, disk: u16) -> DiskState {
    live.meta(|g| {
        g.disks()
            .into_iter()
            .find(|d| d.number == disk)
            .unwrap()
            .state
    })
    .unwrap()
}

fn truncate(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn engines() -> [cairn_io::EngineKind; 2] {
    [cairn_io::EngineKind::Uring, cairn_io::EngineKind::Sync]
}

/// The member holding a file's primary copy is truncated under the live
/// group, below that copy: the next read comes back short there. The read
/// is served from the other copy; the member goes OFFLINE (an I/O failure
/// of that disk, said so); its file is not written to (a copy rewritten
/// there would grow it back with a hole that reads as zeros).
#[test]
fn a_member_truncated_under_a_live_group_fails_and_reads_go_on() {
    for kind in engines() {
        let rig = real_group(kind, 3, Redundancy::Normal);
        let live = &rig.live;
        let number = create(live, "t", 8 * MIB);
        let data = Rand::new(21).bytes(8 * MIB as usize);
        let mut h = live.handle(16).unwrap();
        h.write(number, 0, &data).unwrap();
        h.sync().unwrap();
        let primary = live
            .meta(|g| g.extents(number).unwrap()[0].copies()[0])
            .unwrap();
        let file = &rig.paths[usize::from(primary.disk)];
        let cut = u64::from(primary.au) * MIB;
        truncate(file, cut);
        let mut back = vec![0u8; MIB as usize];
        h.read(number, 0, &mut back).unwrap();
        assert!(
            back[..] == data[..MIB as usize],
            "{kind:?}: served by the other copy"
        );
        assert_eq!(
            state_of(live, primary.disk),
            DiskState::Offline,
            "{kind:?}: a member whose reads come back short has failed"
        );
        let told = live.meta(|g| g.disks_taken_offline().to_vec()).unwrap();
        assert!(
            told.iter()
                .any(|t| t.starts_with(&format!("R{}", primary.disk))),
            "{kind:?}: {told:?}"
        );
        assert_eq!(
            std::fs::metadata(file).unwrap().len(),
            cut,
            "{kind:?}: nothing written to the failed member"
        );
        let mut all = vec![0u8; 8 * MIB as usize];
        h.read(number, 0, &mut all).unwrap();
        assert!(all == data, "{kind:?}: the whole file reads back");
        drop(h);
        rig.live.dismount().unwrap();
    }
}

/// A member truncated below its metadata copies while the group is live:
/// the metadata reads of a check come back short there, and the member goes
/// OFFLINE; the group goes on.
#[test]
fn metadata_reads_that_come_back_short_fail_the_member() {
    for kind in engines() {
        let rig = real_group(kind, 3, Redundancy::Normal);
        let live = &rig.live;
        create(live, "m", 4 * MIB);
        // The first AUs hold the header, the superblocks and the table;
        // the metadata files' copies lie past them.
        truncate(&rig.paths[1], 2 * MIB);
        let report = live.meta(|g| g.check(false)).unwrap().unwrap();
        assert_eq!(
            state_of(live, 1),
            DiskState::Offline,
            "{kind:?}: check's reads came back short on R1: {report:?}"
        );
        create(live, "after", MIB);
        drop(rig);
    }
}

/// A file whose only copy is on a member truncated under it: the read
/// fails, and the error names the disk and what its read answered, not
/// damaged metadata.
#[test]
fn a_short_read_with_no_other_copy_names_the_disk() {
    for kind in engines() {
        let rig = real_group(kind, 1, Redundancy::External);
        let live = &rig.live;
        let number = create(live, "one", 4 * MIB);
        let mut h = live.handle(8).unwrap();
        h.write(number, 0, &[7u8; 65536]).unwrap();
        h.sync().unwrap();
        let copy = live
            .meta(|g| g.extents(number).unwrap()[0].copies()[0])
            .unwrap();
        truncate(&rig.paths[0], u64::from(copy.au) * MIB);
        let err = h.read(number, 0, &mut [0u8; 65536]).unwrap_err();
        let text = err.to_string();
        assert!(!text.contains("metadata is damaged"), "{kind:?}: {text}");
        assert!(text.contains("R0"), "{kind:?}: names the disk: {text}");
        assert!(
            matches!(err, GroupError::Unreadable(_)),
            "{kind:?}: an I/O failure: {err:?}"
        );
        drop(h);
        drop(rig);
    }
}
