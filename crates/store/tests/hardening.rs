//! Disk groups on simulated disks: the defects an adversarial pass and a
//! review found in the store (stale metadata winning over newer copies, a
//! commit point passed with a block on no copy, AUs owned twice, a write too
//! big for one transaction...), each as the scenario that showed it.

#![allow(clippy::unwrap_used)]

mod common;

use common::{crash_rig as rig, mount_sim as mount, sim_path as path, MIB};

use cairn_format::group::{AuAddr, FILE_DIRECTORY};
use cairn_format::DiskLabel;
use cairn_io::DeviceId;
use cairn_io_sim::{geometry, CrashAfter, SimEngine};
use cairn_store::group::{
    self, CreateOptions, Group, GroupError, GroupSelector, GroupSpec, NewDisk, Redundancy,
};
use cairn_store::labeling::{write_label, LabelSpec};
use uuid::Uuid;

const BLOCK: u64 = 4096;

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

/// Create the 1 MiB file `x`, dismount, and return its number, where its
/// entry's primary copy lives (device, byte offset) and that copy's bytes as
/// they are now: what a later lost write would leave behind.
fn x_and_its_entry(engine: &mut CrashAfter, ids: &[DeviceId]) -> (u32, DeviceId, u64, Vec<u8>) {
    let (number, primary, at) = {
        let mut g = mount(engine, ids);
        let f = g
            .create_file(&path("x"), MIB, &CreateOptions::default())
            .unwrap();
        let (primary, at) = entry_place(&g, f.number, 0);
        g.dismount().unwrap();
        (f.number, primary, at)
    };
    let device = ids[usize::from(primary.disk)];
    let bytes = engine.inner.contents(device, at, BLOCK as usize);
    (number, device, at, bytes)
}

/// A lost in-place write leaves the previous, checksum-valid generation of a
/// metadata block on one mirror. The newest valid generation must win at
/// mount, and `check` must call the old copy stale and repair it from the
/// newest — never spread the old one.
#[test]
fn the_newest_generation_of_a_metadata_block_wins_over_a_stale_mirror() {
    let (mut engine, ids) = rig(&[(64 * MIB, "A"), (64 * MIB, "B")], Redundancy::Normal);
    let (number, device, at, stale) = x_and_its_entry(&mut engine, &ids);
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
    let (_, device, at, stale) = x_and_its_entry(&mut engine, &ids);
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

/// Rewrite file `victim`'s entry so that its first extent names the AUs of
/// file `owner`'s first extent: a checksum-valid extent map that claims an AU
/// another file owns (external redundancy: one copy of everything).
fn make_second_owner(engine: &mut CrashAfter, ids: &[DeviceId], owner: u32, victim: u32) {
    use cairn_format::group::FileEntry;
    use cairn_format::meta::{self, BlockId, BlockType};
    let (uuid, owner_extent, at) = {
        let g = mount(engine, ids);
        let owner_extent = g.extents(owner).unwrap()[0];
        let (_, at) = entry_place(&g, victim, 0);
        (g.uuid(), owner_extent, at)
    };
    let device = ids[0];
    let bytes = engine.inner.contents(device, at, BLOCK as usize);
    let id = BlockId {
        block_type: BlockType::FileEntry,
        owner: FILE_DIRECTORY,
        owner_tag: 0,
        index: u64::from(victim),
    };
    let generation = meta::open(&bytes, id, uuid).unwrap();
    let mut entry = FileEntry::decode(&bytes, victim).unwrap().unwrap();
    entry.direct[0] = owner_extent;
    let mut block = meta::empty_block();
    entry.encode_into(&mut block);
    meta::seal(&mut block, id, uuid, generation);
    engine.inner.scribble(device, at, &block[..]);
}

/// An AU named by two extent maps is found at mount, with both owners named;
/// neither file can be written (a write to one would land in the other), both
/// can be read and removed, and removing one leaves the AU to the other
/// instead of freeing it under it (which tripped a double-free assertion).
#[test]
fn an_au_owned_twice_is_found_at_mount_and_survives_rm() {
    let (mut engine, ids) = rig(&[(64 * MIB, "A")], Redundancy::External);
    let (x, y) = {
        let mut g = mount(&mut engine, &ids);
        let x = g
            .create_file(&path("x"), MIB, &CreateOptions::default())
            .unwrap();
        let y = g
            .create_file(&path("y"), MIB, &CreateOptions::default())
            .unwrap();
        g.write(x.number, 0, &[7u8; MIB as usize]).unwrap();
        g.dismount().unwrap();
        (x.number, y.number)
    };
    make_second_owner(&mut engine, &ids, x, y);

    let (mut g, report) =
        group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
    let au = g.extents(x).unwrap()[0].copies()[0].au;
    let found = report
        .damage
        .iter()
        .find(|d| d.contains(&format!("AU {au}")))
        .unwrap_or_else(|| panic!("not reported: {report:?}"));
    assert!(
        found.contains("+SIM/x") && found.contains("+SIM/y") && found.contains("D0"),
        "{found}"
    );
    let err = g.write(y, 0, &[1u8; 4096]).unwrap_err().to_string();
    assert!(err.contains("+SIM/x"), "{err}");
    let mut back = vec![0u8; 4096];
    g.read(y, 0, &mut back).unwrap();
    assert_eq!(back, vec![7u8; 4096], "reads still work");
    let check = g.check(false).unwrap();
    assert!(
        check
            .problems
            .iter()
            .any(|p| p.what.contains("owned twice")),
        "{:?}",
        check.problems
    );

    g.remove(&path("x")).unwrap();
    // y still owns the AU: nothing else may get it.
    g.create_file(&path("z"), 8 * MIB, &CreateOptions::default())
        .unwrap();
    let z = g.open(&path("z")).unwrap().number;
    assert!(
        g.extents(z).unwrap().iter().all(|e| e.copies()[0].au != au),
        "the AU y still owns was handed to z"
    );
    // y's own first AU, which its damaged map no longer names, is a leak.
    let check = g.check(true).unwrap();
    assert!(
        check.problems.iter().all(|p| p.what.contains("leaked")),
        "{:?}",
        check.problems
    );
    assert!(check.clean(), "{:?}", check.problems);
    g.remove(&path("y")).unwrap();
    let check = g.check(false).unwrap();
    assert!(check.problems.is_empty(), "{:?}", check.problems);
    g.dismount().unwrap();
}

/// The simulator, except that data writes (anything bigger than one 4 KiB
/// metadata block) complete at once and store nothing: for a test about a
/// write's metadata, whose gigabytes of zeros would only cost memory.
struct DataSink {
    inner: SimEngine,
    sunk: std::collections::VecDeque<cairn_io::Completion>,
    sunk_bytes: u64,
}

impl cairn_io::IoEngine for DataSink {
    fn name(&self) -> &'static str {
        "sim-data-sink"
    }
    fn geometry(&self, device: DeviceId) -> Option<&cairn_io::Geometry> {
        self.inner.geometry(device)
    }
    fn submit(&mut self, request: cairn_io::Request) -> Result<(), cairn_io::SubmitError> {
        match request.op {
            cairn_io::Op::Write { buf, .. } if buf.len() > BLOCK as usize => {
                self.sunk_bytes += buf.len() as u64;
                self.sunk.push_back(cairn_io::Completion {
                    device: request.device,
                    tag: request.tag,
                    kind: cairn_io::OpKind::Write,
                    result: Ok(buf.len() as u64),
                    buf: Some(buf),
                });
                Ok(())
            }
            op => self.inner.submit(cairn_io::Request { op, ..request }),
        }
    }
    fn wait(&mut self, min: usize) -> Result<(), cairn_io::IoError> {
        self.inner.wait(min.saturating_sub(self.sunk.len()))
    }
    fn set_io_timeout(&mut self, timeout: Option<std::time::Duration>) {
        self.inner.set_io_timeout(timeout);
    }
    fn pop_completion(&mut self) -> Option<cairn_io::Completion> {
        self.sunk
            .pop_front()
            .or_else(|| self.inner.pop_completion())
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.sunk.len()
    }
    fn depth_max(&self) -> usize {
        self.inner.depth_max()
    }
    fn stats(&self) -> cairn_io::EngineStats {
        self.inner.stats()
    }
}

/// One `write` of 8 GiB over a fresh file of 1 MiB AUs first-writes 8,192
/// extents: marking them initialised dirties the entry and 65 indirect
/// blocks, more than one transaction holds (64). It must commit in steps —
/// and hold only a bounded part of the data in memory at a time.
#[test]
fn one_write_over_more_extents_than_a_transaction_holds_commits_in_steps() {
    const SIZE: u64 = 8 << 30;
    let (engine, ids) = rig(&[(SIZE + 512 * MIB, "A")], Redundancy::External);
    let mut engine = DataSink {
        inner: engine.inner,
        sunk: Default::default(),
        sunk_bytes: 0,
    };
    let number = {
        let (mut g, _) =
            group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
        let f = g
            .create_file(&path("big"), SIZE, &CreateOptions::default())
            .unwrap();
        // Zeroed by the allocator on demand: no memory until touched, and
        // reads of it map the one zero page.
        let data = vec![0u8; SIZE as usize];
        g.write(f.number, 0, &data).unwrap();
        assert!(
            g.extents(f.number).unwrap().iter().all(|e| e.initialized),
            "every extent written is initialised"
        );
        g.dismount().unwrap();
        f.number
    };
    assert_eq!(engine.sunk_bytes, SIZE, "the data went to the disk once");
    let (mut g, _) = group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
    assert!(g.extents(number).unwrap().iter().all(|e| e.initialized));
    assert_eq!(g.extents(number).unwrap().len(), 8192);
    let check = g.check(false).unwrap();
    assert!(check.problems.is_empty(), "{:?}", check.problems);
}

/// Mutating requests (writes, flushes, discards, zeroing) the engine has
/// been asked for so far: `CrashAfter` counts them down from its budget.
fn mutations(engine: &CrashAfter) -> usize {
    usize::MAX - engine.budget().get()
}

/// A read-only mount (listing, inspecting) with a member missing writes
/// nothing at all and marks nothing offline: the disk is back in the group
/// when it is found again.
#[test]
fn a_read_only_mount_with_a_disk_missing_writes_nothing() {
    let (mut engine, ids) = rig(
        &[(64 * MIB, "A"), (64 * MIB, "B"), (64 * MIB, "B")],
        Redundancy::Normal,
    );
    {
        let mut g = mount(&mut engine, &ids);
        g.create_file(&path("x"), MIB, &CreateOptions::default())
            .unwrap();
        g.dismount().unwrap();
    }
    let before = mutations(&engine);
    {
        let (g, report) =
            group::mount_read_only(&mut engine, &ids[..2], &GroupSelector::Name("SIM".into()))
                .unwrap();
        assert!(report.disks_marked_offline.is_empty(), "{report:?}");
        assert_eq!(report.disks_missing.len(), 1, "{report:?}");
        assert!(report.disks_missing[0].contains("D2"), "{report:?}");
        assert!(g.open(&path("x")).is_ok());
        assert_eq!(g.space().offline_disks, 1, "degraded while it is missing");
        g.dismount().unwrap();
    }
    assert_eq!(mutations(&engine), before, "a read-only mount wrote");
    let g = mount(&mut engine, &ids);
    assert!(
        g.disks()
            .iter()
            .all(|d| d.state == cairn_format::group::DiskState::Online),
        "{:?}",
        g.disks()
    );
}

/// A read-only mount after a crash sees every committed change (its journal
/// records applied in memory), writes nothing, and leaves the replay to the
/// next writer.
#[test]
fn a_read_only_mount_after_a_crash_sees_the_journal_and_writes_nothing() {
    use cairn_io_sim::CrashPolicy;
    let (mut engine, ids) = rig(&[(64 * MIB, "A"), (64 * MIB, "B")], Redundancy::Normal);
    let data = vec![0x5Au8; MIB as usize];
    {
        let mut g = mount(&mut engine, &ids);
        g.mkdir(&path("d"), false).unwrap();
        let f = g
            .create_file(&path("d/x"), MIB, &CreateOptions::default())
            .unwrap();
        g.write(f.number, 0, &data).unwrap();
        g.sync().unwrap();
        // Killed: no dismount, no checkpoint; the records are in the ring and
        // the in-place writes after the last flush are lost.
    }
    engine.inner.crash(CrashPolicy::LOSE_ALL);
    let before = mutations(&engine);
    {
        let (mut g, report) =
            group::mount_read_only(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
        assert!(report.journal_records_replayed > 0, "{report:?}");
        let f = g.open(&path("d/x")).unwrap();
        let mut back = vec![0u8; data.len()];
        g.read(f.number, 0, &mut back).unwrap();
        assert!(back == data);
        let err = g.mkdir(&path("e"), false).unwrap_err().to_string();
        assert!(err.contains("read-only"), "{err}");
        g.dismount().unwrap();
    }
    assert_eq!(mutations(&engine), before, "a read-only mount wrote");
    let (mut g, report) =
        group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
    assert!(report.journal_records_replayed > 0, "the writer replays");
    assert!(g.open(&path("d/x")).is_ok());
    assert!(g.check(false).unwrap().problems.is_empty());
}

/// `check` on a read-only mount reports a stale mirror copy (newest
/// generation as the reference) without repairing it; `check --repair`, a
/// writer, repairs it from the newest.
#[test]
fn check_reports_a_stale_copy_and_repair_restores_the_newest() {
    let (mut engine, ids) = rig(&[(64 * MIB, "A"), (64 * MIB, "B")], Redundancy::Normal);
    let (_, device, at, stale) = x_and_its_entry(&mut engine, &ids);
    {
        let mut g = mount(&mut engine, &ids);
        g.resize(&path("x"), 2 * MIB).unwrap();
        g.dismount().unwrap();
    }
    let fresh = engine.inner.contents(device, at, BLOCK as usize);
    engine.inner.scribble(device, at, &stale);
    {
        let (mut g, _) =
            group::mount_read_only(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
        assert_eq!(g.open(&path("x")).unwrap().size_bytes, 2 * MIB);
        let report = g.check(false).unwrap();
        assert!(
            report.problems.iter().any(|p| p.what.contains("stale")
                && p.location.contains(&format!(
                    "D{}",
                    ids.iter().position(|d| *d == device).unwrap()
                ))),
            "{:?}",
            report.problems
        );
        assert!(g.check(true).is_err(), "a read-only mount cannot repair");
    }
    assert_eq!(engine.inner.contents(device, at, BLOCK as usize), stale);
    let mut g = mount(&mut engine, &ids);
    assert!(g.check(true).unwrap().clean());
    g.dismount().unwrap();
    assert_eq!(engine.inner.contents(device, at, BLOCK as usize), fresh);
}

/// A copy of a member disk beside it (a cloned LUN, a copied image): the
/// group must not mount, read-only or not, whichever device comes first.
#[test]
fn a_group_with_a_cloned_member_is_not_mounted() {
    let (mut engine, ids) = rig(&[(64 * MIB, "A"), (64 * MIB, "B")], Redundancy::Normal);
    let image = engine.inner.contents(ids[1], 0, (64 * MIB) as usize);
    let clone = engine
        .inner
        .add_disk(geometry(64 * MIB, 4096, 4096, 512 << 10));
    engine.inner.scribble(clone, 0, &image);
    for devices in [vec![ids[0], ids[1], clone], vec![ids[0], clone, ids[1]]] {
        let selector = GroupSelector::Name("SIM".into());
        let err = group::mount(&mut engine, &devices, &selector)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(err.contains("D1") && err.contains("copy"), "{err}");
        let err = group::mount_read_only(&mut engine, &devices, &selector)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(err.contains("D1"), "{err}");
    }
    // Without the clone, nothing was changed.
    let g = mount(&mut engine, &ids);
    assert!(g
        .disks()
        .iter()
        .all(|d| d.state == cairn_format::group::DiskState::Online));
}

/// A copy in fills an unnamed file and names it last: killed at any point
/// before, it leaves no name, and the next mount that writes removes the
/// file and its space; named, it is whole.
#[test]
fn a_file_filled_before_it_is_named_leaves_nothing_when_the_filler_dies() {
    use cairn_io_sim::CrashPolicy;
    let (mut engine, ids) = rig(&[(64 * MIB, "A"), (64 * MIB, "B")], Redundancy::Normal);
    // The file directory grows for the first user file number and stays so.
    let free_before = {
        let mut g = mount(&mut engine, &ids);
        g.create_file(&path("w"), 0, &CreateOptions::default())
            .unwrap();
        g.remove(&path("w")).unwrap();
        let free = g.space().free_mb;
        g.dismount().unwrap();
        free
    };
    let data = vec![0xC3u8; 4 * MIB as usize];
    {
        let mut g = mount(&mut engine, &ids);
        let f = g
            .create_unnamed(2 * MIB, &CreateOptions::default())
            .unwrap();
        g.write(f.number, 0, &data[..2 * MIB as usize]).unwrap();
        g.grow_unnamed(f.number, 4 * MIB).unwrap();
        g.write(f.number, 2 * MIB, &data[2 * MIB as usize..])
            .unwrap();
        assert!(g.list(&path("")).unwrap().is_empty(), "no name yet");
        g.sync().unwrap();
        // Killed before `publish`.
    }
    engine.inner.crash(CrashPolicy::KEEP_ALL);
    {
        let (g, report) =
            group::mount_read_only(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
        assert!(
            g.list(&path("")).unwrap().is_empty(),
            "a reader sees no name"
        );
        assert!(
            report
                .warnings
                .iter()
                .any(|w| w.contains("a create was interrupted")),
            "{report:?}"
        );
    }
    let (mut g, report) =
        group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
    assert!(
        report
            .operations_recovered
            .iter()
            .any(|o| o.contains("unfinished create undone")),
        "{report:?}"
    );
    assert!(g.file_numbers().is_empty());
    assert_eq!(g.space().free_mb, free_before, "its space came back");
    assert!(g.check(false).unwrap().problems.is_empty());

    // The same, published: whole, at the size given.
    let f = g
        .create_unnamed(8 * MIB, &CreateOptions::default())
        .unwrap();
    g.write(f.number, 0, &data).unwrap();
    let info = g.publish(f.number, &path("x"), 4 * MIB).unwrap();
    assert_eq!(info.size_bytes, 4 * MIB);
    assert_eq!(g.extents(f.number).unwrap().len(), 4, "the tail was freed");
    let mut back = vec![0u8; data.len()];
    g.read(f.number, 0, &mut back).unwrap();
    assert!(back == data);
    assert!(g.check(false).unwrap().problems.is_empty());
}

/// A nil group UUID means "in no group" in a disk header: a create given
/// one is refused before it writes anything, not reported as a failing
/// device when the headers read back unassigned. (The interleaving simulator
/// made one from its seed, 7806.)
#[test]
fn a_create_with_a_nil_group_uuid_is_refused_and_writes_nothing() {
    let mut sim = SimEngine::new(1, 64);
    let d = sim.add_disk(geometry(64 * MIB, 4096, 4096, 512 << 10));
    write_label(
        &mut sim,
        d,
        &LabelSpec {
            label: DiskLabel::parse("N0").unwrap(),
            disk_uuid: Uuid::from_u128(0xA0),
            now_unix_seconds: 1,
            generation: 1,
        },
    )
    .unwrap();
    let before = cairn_io::IoEngine::stats(&sim).bytes_written;
    let spec = GroupSpec {
        name: "NEW".into(),
        redundancy: Redundancy::External,
        au_bytes: MIB,
        sector_bytes: None,
        force: false,
        now_unix_seconds: 1_763_700_000,
        group_uuid: Uuid::nil(),
    };
    let new = [NewDisk {
        device: d,
        failgroup: None,
    }];
    match group::create(&mut sim, &new, &spec) {
        Err(GroupError::Invalid(why)) => assert!(why.contains("nil"), "{why}"),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("a group with a nil UUID was created"),
    }
    assert_eq!(
        cairn_io::IoEngine::stats(&sim).bytes_written,
        before,
        "nothing written"
    );
}

/// A crash at every mutating request of `group create` (each unflushed write
/// kept, lost or torn): afterwards there is no group, a whole group (every
/// disk ONLINE, check clean), or a group that never finished — no disk has
/// its superblock — whose disks a forced create takes again. Never a
/// degraded or unmountable group.
#[test]
fn a_crash_anywhere_in_group_create_leaves_no_group_or_a_whole_one() {
    use cairn_io_sim::CrashPolicy;
    let disks = [
        (64 * MIB, "A"),
        (64 * MIB, "A"),
        (64 * MIB, "B"),
        (64 * MIB, "B"),
    ];
    let spec = |force: bool, uuid: u128| GroupSpec {
        name: "NEW".into(),
        redundancy: Redundancy::Normal,
        au_bytes: MIB,
        sector_bytes: None,
        force,
        now_unix_seconds: 1_763_700_000,
        group_uuid: Uuid::from_u128(uuid),
    };
    let mut budget = 0usize;
    let mut outcomes = std::collections::BTreeMap::<&str, usize>::new();
    loop {
        let mut sim = SimEngine::new(budget as u64, 64);
        let mut ids = Vec::new();
        for (i, (size, _)) in disks.iter().enumerate() {
            let d = sim.add_disk(geometry(*size, 4096, 4096, 512 << 10));
            write_label(
                &mut sim,
                d,
                &LabelSpec {
                    label: DiskLabel::parse(&format!("N{i}")).unwrap(),
                    disk_uuid: Uuid::from_u128(0xA0 + i as u128),
                    now_unix_seconds: 1,
                    generation: 1,
                },
            )
            .unwrap();
            ids.push(d);
        }
        let new: Vec<NewDisk> = ids
            .iter()
            .zip(&disks)
            .map(|(d, (_, fg))| NewDisk {
                device: *d,
                failgroup: Some((*fg).to_string()),
            })
            .collect();
        // One more than the requests allowed: a create that ends with budget
        // left ran every request for real.
        let mut engine = CrashAfter::vanishing(sim, budget + 1);
        let created = group::create(&mut engine, &new, &spec(false, 0x1))
            .map(Group::dismount)
            .is_ok();
        let finished = created && engine.budget().get() > 0;
        let policy = [
            CrashPolicy::LOSE_ALL,
            CrashPolicy::KEEP_ALL,
            CrashPolicy::MIXED,
        ][budget % 3];
        engine.inner.crash(policy);
        engine.budget().set(usize::MAX);
        let found = group::identify(&mut engine, &ids);
        let outcome = match found.get(&Uuid::from_u128(0x1)) {
            None => "no group",
            Some(members) if members.iter().all(|(_, _, slot)| slot.is_none()) => {
                // Never finished: a forced create takes the disks again.
                let g = group::create(&mut engine, &new, &spec(true, 0x2)).unwrap();
                g.dismount().unwrap();
                "never finished, re-created"
            }
            Some(_) => {
                let (mut g, report) = group::mount(
                    &mut engine,
                    &ids,
                    &GroupSelector::Uuid(Uuid::from_u128(0x1)),
                )
                .unwrap_or_else(|e| panic!("budget {budget} ({policy:?}): {e}"));
                assert!(
                    report.disks_marked_offline.is_empty(),
                    "budget {budget}: {report:?}"
                );
                assert!(
                    g.disks()
                        .iter()
                        .all(|d| d.state == cairn_format::group::DiskState::Online),
                    "budget {budget}: {:?}",
                    g.disks()
                );
                let check = g.check(false).unwrap();
                assert!(check.problems.is_empty(), "budget {budget}: {check:?}");
                g.dismount().unwrap();
                "whole"
            }
        };
        *outcomes.entry(outcome).or_default() += 1;
        if finished {
            assert_eq!(outcome, "whole", "an acknowledged create must be whole");
            break;
        }
        budget += 1;
    }
    eprintln!("group create crashed at each of {budget} requests: {outcomes:?}");
    assert!(outcomes.len() >= 2, "{outcomes:?}");
}

/// Scribble over every copy of a metadata block: each place gets bytes that
/// are not a valid block (a checksum that cannot match).
fn destroy(engine: &mut CrashAfter, ids: &[DeviceId], places: &[(AuAddr, u64)]) {
    for (addr, at) in places {
        engine
            .inner
            .scribble(ids[usize::from(addr.disk)], *at + 200, &[0x6B; 64]);
    }
}

/// Both copies of a file's directory entry destroyed: the group still
/// mounts; the damage says plainly which file is lost and by which name, and
/// names the group in the step that helps; `check --repair` takes the name
/// away, rewrites the block and frees the space, and the group is clean.
#[test]
fn a_file_entry_lost_on_every_mirror_is_named_and_repair_cleans_up() {
    let (mut engine, ids) = rig(&[(64 * MIB, "A"), (64 * MIB, "B")], Redundancy::Normal);
    let (places, kept) = {
        let mut g = mount(&mut engine, &ids);
        let x = g
            .create_file(&path("x"), 2 * MIB, &CreateOptions::default())
            .unwrap();
        let kept = g
            .create_file(&path("kept"), MIB, &CreateOptions::default())
            .unwrap();
        g.write(kept.number, 0, &[9u8; MIB as usize]).unwrap();
        let places = vec![entry_place(&g, x.number, 0), entry_place(&g, x.number, 1)];
        g.dismount().unwrap();
        (places, kept.number)
    };
    destroy(&mut engine, &ids, &places);
    for read_only in [true, false] {
        let selector = GroupSelector::Name("SIM".into());
        let (g, report) = if read_only {
            group::mount_read_only(&mut engine, &ids, &selector).unwrap()
        } else {
            group::mount(&mut engine, &ids, &selector).unwrap()
        };
        let damage = report.damage.join(" | ");
        assert!(
            damage.contains("+SIM/x")
                && damage.contains("lost")
                && damage.contains("cairn group check SIM --repair"),
            "{damage}"
        );
        let listed = g.list(&path("")).unwrap();
        let x = listed.iter().find(|e| e.name == "x").unwrap();
        assert!(x.file.is_none() && x.lost, "{listed:?}");
        let mut back = vec![0u8; 4096];
        let mut g = g;
        g.read(kept, 0, &mut back).unwrap();
        assert_eq!(back, vec![9u8; 4096], "the other file is untouched");
        g.dismount().unwrap();
    }
    let mut g = mount(&mut engine, &ids);
    let report = g.check(false).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.what.contains("no valid copy") && p.what.contains("+SIM/x")),
        "{:?}",
        report.problems
    );
    let repaired = g.check(true).unwrap();
    assert!(repaired.clean(), "{:?}", repaired.problems);
    g.dismount().unwrap();
    let (mut g, report) =
        group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
    assert!(report.damage.is_empty(), "{report:?}");
    assert_eq!(
        g.list(&path(""))
            .unwrap()
            .iter()
            .map(|e| e.name.clone())
            .collect::<Vec<_>>(),
        ["kept"]
    );
    assert!(g.check(false).unwrap().problems.is_empty());
}

/// Both copies of an alias block destroyed: the names in it are lost, the
/// files they named are not: `check --repair` gives each such file a name in
/// lost+found, and its data reads back.
#[test]
fn an_alias_block_lost_on_every_mirror_leaves_files_that_repair_names() {
    use cairn_format::group::FILE_ALIAS_DIRECTORY;
    let (mut engine, ids) = rig(&[(64 * MIB, "A"), (64 * MIB, "B")], Redundancy::Normal);
    let data = vec![0x77u8; MIB as usize];
    let (places, number) = {
        let mut g = mount(&mut engine, &ids);
        let f = g
            .create_file(&path("f.dbf"), MIB, &CreateOptions::default())
            .unwrap();
        g.write(f.number, 0, &data).unwrap();
        // Alias ids 1.. are in block 0, the first block of the alias file.
        let extent = g.extents(FILE_ALIAS_DIRECTORY).unwrap()[0];
        let places: Vec<(AuAddr, u64)> = extent
            .copies()
            .iter()
            .map(|c| (*c, u64::from(c.au) * g.au_bytes()))
            .collect();
        g.dismount().unwrap();
        (places, f.number)
    };
    destroy(&mut engine, &ids, &places);
    let (mut g, report) =
        group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
    let damage = report.damage.join(" | ");
    assert!(
        damage.contains("alias block 0") && damage.contains("cairn group check SIM --repair"),
        "{damage}"
    );
    assert!(g.list(&path("")).unwrap().is_empty());
    let repaired = g.check(true).unwrap();
    assert!(repaired.clean(), "{:?}", repaired.problems);
    g.dismount().unwrap();
    let mut g = mount(&mut engine, &ids);
    let found = g.open(&path(&format!("lost+found/file_{number}"))).unwrap();
    let mut back = vec![0u8; data.len()];
    g.read(found.number, 0, &mut back).unwrap();
    assert!(back == data);
    assert!(g.check(false).unwrap().problems.is_empty());
}

/// Item 15: `check` on a degraded group says so (not clean in the CLI's
/// terms: its own exit status); a member whose two superblock slots hold
/// random bytes is a problem, named, and repair rewrites both slots.
#[test]
fn check_names_a_degraded_group_and_damaged_superblocks() {
    use cairn_format::group::SUPER_SLOT_OFFSETS_BYTES;
    let (mut engine, ids) = rig(
        &[(64 * MIB, "A"), (64 * MIB, "B"), (64 * MIB, "B")],
        Redundancy::Normal,
    );
    {
        let (mut g, _) =
            group::mount_read_only(&mut engine, &ids[..2], &GroupSelector::Name("SIM".into()))
                .unwrap();
        let report = g.check(false).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert!(report.degraded(), "{report:?}");
        assert!(report.disks_not_in_use[0].contains("D2"), "{report:?}");
        assert!(!report.data_read);
    }
    let noise: Vec<u8> = (0..16 * 4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 | 1)
        .collect();
    for base in SUPER_SLOT_OFFSETS_BYTES {
        engine.inner.scribble(ids[1], base, &noise);
    }
    {
        let (mut g, _) =
            group::mount_read_only(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
        let report = g.check(false).unwrap();
        let text: Vec<String> = report
            .problems
            .iter()
            .map(|p| format!("{}: {}", p.location, p.what))
            .collect();
        let has = |needle: &str| text.iter().any(|t| t.contains(needle));
        assert!(has("disk D1: holds no valid superblock"), "{text:?}");
        assert!(has("disk D1 superblock slot A"), "{text:?}");
        assert!(has("disk D1 superblock slot B"), "{text:?}");
        assert!(!report.degraded());
    }
    let mut g = mount(&mut engine, &ids);
    assert!(g.check(true).unwrap().clean());
    g.dismount().unwrap();
    let mut g = mount(&mut engine, &ids);
    let report = g.check(false).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// A lost alias block's ids are not handed out again, nor a lost
/// directory's: a new directory must not adopt the lost one's children.
#[test]
fn a_new_name_never_takes_the_id_of_a_lost_one() {
    use cairn_format::group::FILE_ALIAS_DIRECTORY;
    let (mut engine, ids) = rig(&[(64 * MIB, "A"), (64 * MIB, "B")], Redundancy::Normal);
    let places = {
        let mut g = mount(&mut engine, &ids);
        g.mkdir(&path("dbs"), false).unwrap();
        for i in 0..40 {
            g.create_file(&path(&format!("filler{i}")), 0, &CreateOptions::default())
                .unwrap();
        }
        g.create_file(&path("dbs/secret.dbf"), 0, &CreateOptions::default())
            .unwrap();
        let extent = g.extents(FILE_ALIAS_DIRECTORY).unwrap()[0];
        let places: Vec<(AuAddr, u64)> = extent
            .copies()
            .iter()
            .map(|c| (*c, u64::from(c.au) * g.au_bytes()))
            .collect();
        g.dismount().unwrap();
        places
    };
    destroy(&mut engine, &ids, &places);
    let mut g = mount(&mut engine, &ids);
    g.mkdir(&path("brand_new"), false).unwrap();
    assert!(
        g.list(&path("brand_new")).unwrap().is_empty(),
        "a new directory adopted a lost one's children"
    );
    g.dismount().unwrap();
    let mut g = mount(&mut engine, &ids);
    let report = g.check(true).unwrap();
    assert!(report.clean(), "{:?}", report.problems);
    assert!(g.open(&path("lost+found/secret.dbf")).is_ok());
    assert!(g.list(&path("brand_new")).unwrap().is_empty());
}

/// A file `big` of 120 MiB (106 extents in its entry, the rest in an
/// indirect AU), `head` written at its start, then its indirect AU
/// destroyed on every mirror. Its number.
fn big_file_whose_indirect_block_is_lost(
    engine: &mut CrashAfter,
    ids: &[DeviceId],
    head: &[u8],
) -> u32 {
    let (number, places) = {
        let mut g = mount(engine, ids);
        let f = g
            .create_file(&path("big"), 120 * MIB, &CreateOptions::default())
            .unwrap();
        if !head.is_empty() {
            g.write(f.number, 0, head).unwrap();
        }
        let pointer = g.indirect_aus(f.number).unwrap()[0];
        let places: Vec<(AuAddr, u64)> = pointer
            .copies()
            .iter()
            .map(|c| (*c, u64::from(c.au) * g.au_bytes()))
            .collect();
        g.dismount().unwrap();
        (f.number, places)
    };
    destroy(engine, ids, &places);
    number
}

/// An indirect block of a file's extent map lost on every mirror: the file
/// is not lost with it. It reads up to where its map is whole, is not
/// written meanwhile, and `check --repair` cuts it there, keeping that data.
#[test]
fn a_lost_indirect_block_cuts_the_file_instead_of_losing_it() {
    let (mut engine, ids) = rig(&[(256 * MIB, "A"), (256 * MIB, "B")], Redundancy::Normal);
    let head = vec![0x3Cu8; 8 * MIB as usize];
    let number = big_file_whose_indirect_block_is_lost(&mut engine, &ids, &head);
    let (mut g, report) =
        group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
    let damage = report.damage.join(" | ");
    assert!(
        damage.contains("+SIM/big has a damaged extent map")
            && damage.contains(&format!(
                "reads up to byte {} of its {}",
                106 * MIB,
                120 * MIB
            )),
        "{damage}"
    );
    let mut back = vec![0u8; head.len()];
    g.read(number, 0, &mut back).unwrap();
    assert!(back == head, "the whole part reads");
    assert!(
        g.write(number, 0, &head[..4096]).is_err(),
        "not written meanwhile"
    );
    let report = g.check(true).unwrap();
    assert!(report.clean(), "{:?}", report.problems);
    g.dismount().unwrap();
    let (mut g, report) =
        group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
    assert!(report.damage.is_empty(), "{report:?}");
    assert_eq!(g.open(&path("big")).unwrap().size_bytes, 106 * MIB);
    g.read(number, 0, &mut back).unwrap();
    assert!(back == head);
    g.write(number, 0, &head[..4096]).unwrap();
    assert!(g.check(false).unwrap().problems.is_empty());
}

/// A file whose map a mount found cut, removed before any repair: the
/// damage goes with it. A new file that takes its number is written as any
/// other (it was refused as "a damaged extent map"), and `check --repair`
/// has nothing of it left to cut (the cut looked the removed file up).
#[test]
fn a_file_with_a_cut_map_removed_takes_its_damage_with_it() {
    let (mut engine, ids) = rig(&[(256 * MIB, "A"), (256 * MIB, "B")], Redundancy::Normal);
    let number = big_file_whose_indirect_block_is_lost(&mut engine, &ids, &[]);
    let (mut g, report) =
        group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
    assert!(
        report
            .damage
            .join(" | ")
            .contains("+SIM/big has a damaged extent map"),
        "{report:?}"
    );
    g.check_invariants().unwrap();
    g.remove(&path("big")).unwrap();
    g.check_invariants().unwrap();
    let f = g
        .create_file(&path("new"), MIB, &CreateOptions::default())
        .unwrap();
    assert_eq!(
        f.number, number,
        "the new file takes the lowest free number"
    );
    g.write(f.number, 0, &[7u8; 4096]).unwrap();
    g.resize(&path("new"), 2 * MIB).unwrap();
    g.remove(&path("new")).unwrap();
    // What is left is the AUs past the cut, which no map names any more:
    // leaks for the repair to free, and nothing of the map.
    let report = g.check(false).unwrap();
    assert!(!report.problems.is_empty());
    assert!(
        report.problems.iter().all(|p| p.what.starts_with("leaked")),
        "{:?}",
        report.problems
    );
    let report = g.check(true).unwrap();
    assert!(report.clean(), "{:?}", report.problems);
    g.dismount().unwrap();
    let mut g = mount(&mut engine, &ids);
    assert!(g.check(false).unwrap().problems.is_empty());
}

/// A map that names one AU twice for the same file (its extents 0 and 1):
/// found at mount, and `rm` frees the AU once, not twice.
#[test]
fn a_file_that_claims_an_au_twice_is_removed_cleanly() {
    use cairn_format::group::FileEntry;
    use cairn_format::meta::{self, BlockId, BlockType};
    let (mut engine, ids) = rig(&[(64 * MIB, "A")], Redundancy::External);
    let (uuid, number, at) = {
        let mut g = mount(&mut engine, &ids);
        let f = g
            .create_file(&path("x"), 2 * MIB, &CreateOptions::default())
            .unwrap();
        let (_, at) = entry_place(&g, f.number, 0);
        let uuid = g.uuid();
        g.dismount().unwrap();
        (uuid, f.number, at)
    };
    let bytes = engine.inner.contents(ids[0], at, BLOCK as usize);
    let id = BlockId {
        block_type: BlockType::FileEntry,
        owner: FILE_DIRECTORY,
        owner_tag: 0,
        index: u64::from(number),
    };
    let generation = meta::open(&bytes, id, uuid).unwrap();
    let mut entry = FileEntry::decode(&bytes, number).unwrap().unwrap();
    entry.direct[1] = entry.direct[0];
    let mut block = meta::empty_block();
    entry.encode_into(&mut block);
    meta::seal(&mut block, id, uuid, generation);
    engine.inner.scribble(ids[0], at, &block[..]);
    let (mut g, report) =
        group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into())).unwrap();
    assert!(
        report
            .damage
            .iter()
            .any(|d| d.contains("+SIM/x and +SIM/x")),
        "{report:?}"
    );
    g.check_invariants().unwrap();
    g.remove(&path("x")).unwrap();
    g.check_invariants().unwrap();
    // Its second AU, which the damaged map no longer names, is a leak.
    assert!(g.check(true).unwrap().clean());
    g.dismount().unwrap();
    let mut g = mount(&mut engine, &ids);
    assert!(g.check(false).unwrap().problems.is_empty());
}
