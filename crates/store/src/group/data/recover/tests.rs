#![allow(clippy::unwrap_used)]

use cairn_format::group::{map_place, unit_checksum};
use cairn_io::{DeviceId, IoEngine};
use cairn_io_sim::{CrashAfter, CrashPolicy};

use crate::group::file_types::CreateOptions;
use crate::group::mounted::Group;
use crate::group::tests::{create_normal, four_disks_of};
use crate::group::GroupSelector;
use crate::names::GroupPath;

const MIB: u64 = 1 << 20;

fn mount<'e>(
    engine: &'e mut dyn IoEngine,
    ids: &[DeviceId],
) -> (Group<'e>, crate::group::MountReport) {
    crate::group::mount(engine, ids, &GroupSelector::Name("T".into())).unwrap()
}

/// File `+T/f`, 16 MiB, with checksums.
fn mapped(g: &mut Group<'_>) -> u32 {
    let options = CreateOptions {
        checksums: Some(true),
        ..CreateOptions::default()
    };
    let path = GroupPath::parse("+T/f").unwrap();
    g.create_file(&path, 16 * MIB, &options).unwrap().number
}

/// What seed `seed` writes: seed 0 is zeros (a punch's).
fn bytes(seed: u8, len: u64) -> Vec<u8> {
    if seed == 0 {
        return vec![0; len as usize];
    }
    (0..len)
        .map(|i| {
            (i as u8)
                .wrapping_mul(31)
                .wrapping_add(seed.wrapping_mul(7))
                | 1
        })
        .collect()
}

/// Every copy of bytes `at .. at + len` of `file` (inside one extent), as
/// the disks hold them; one of zeros for an extent the metadata says was
/// never written (or was punched).
fn copies_of(g: &mut Group<'_>, ids: &[DeviceId], file: u32, at: u64, len: u64) -> Vec<Vec<u8>> {
    let snap = g.plane.file(file).unwrap();
    let loc = snap.layout.locate(at);
    let extent = *snap.extent(loc.extent).unwrap();
    if !extent.initialized {
        return vec![vec![0; len as usize]];
    }
    extent
        .copies()
        .iter()
        .map(|c| {
            let offset = u64::from(c.au) * snap.au_bytes + loc.offset_in_extent;
            g.engine
                .read_at(ids[usize::from(c.disk)], offset, len as usize)
                .unwrap()
                .to_vec()
        })
        .collect()
}

/// Where each copy of byte `at` of `file` lies: (disk, byte offset).
fn places_of(g: &Group<'_>, ids: &[DeviceId], file: u32, at: u64) -> Vec<(DeviceId, u64)> {
    let snap = g.plane.file(file).unwrap();
    let loc = snap.layout.locate(at);
    snap.extent(loc.extent)
        .unwrap()
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

/// One step of the workload the power cut meets.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Write `len` bytes of seed `seed` at `at`.
    Write { at: u64, seed: u8 },
    /// The log's sync: the writes before it are acknowledged.
    Sync,
    /// A checkpoint of the maps (a `sync` of the group): so are they.
    Checkpoint,
    /// Zero `LEN` bytes at `at` inside an extent (a punch's edge: zeros
    /// written).
    Zero { at: u64 },
    /// Punch the whole extent holding `at` (marked unwritten).
    Punch { at: u64 },
}

const LEN: u64 = 8192;

/// Overwrites in place, a second write of a unit before the first is
/// acknowledged, a checkpoint between, a write into a region no record
/// named yet, zeros written into part of an extent (one in a region
/// nothing else writes) and a whole extent punched, a write into the
/// punched extent, and a last write no sync covers.
const STEPS: [Step; 14] = [
    Step::Write {
        at: 3 * MIB,
        seed: 2,
    },
    Step::Sync,
    Step::Write {
        at: 3 * MIB,
        seed: 3,
    },
    Step::Checkpoint,
    Step::Write {
        at: 10 * MIB,
        seed: 4,
    },
    Step::Write {
        at: 3 * MIB + LEN,
        seed: 5,
    },
    Step::Sync,
    Step::Zero { at: 3 * MIB + LEN },
    Step::Punch { at: 10 * MIB },
    Step::Zero { at: 13 * MIB },
    Step::Sync,
    Step::Write {
        at: 3 * MIB,
        seed: 6,
    },
    Step::Write {
        at: 10 * MIB,
        seed: 7,
    },
    Step::Zero { at: 3 * MIB },
];

/// Where the workload writes, each with the seed it held before.
const PLACES: [u64; 4] = [3 * MIB, 3 * MIB + LEN, 10 * MIB, 13 * MIB];

/// A power cut at every request of [`STEPS`] (on groups of 4096- and
/// 512-byte sectors, the writes no flush covered torn at sector bounds):
/// the next mount's recovery leaves every copy of every place written
/// holding the same bytes — those of the last acknowledged write, or of a
/// write after it that was under way — and the map it writes vouches for
/// them; no range is reported damaged or lost.
#[test]
fn a_power_cut_at_any_request_leaves_every_copy_old_or_new_and_the_map_in_step() {
    for sector in [4096u32, 512] {
        sweep(sector);
    }
}

fn sweep(sector: u32) {
    let mut cut = 0;
    let mut recovered_something = false;
    loop {
        let (mut sim, ids) = four_disks_of(sector);
        create_normal(&mut sim, &ids).dismount().unwrap();
        let file = {
            let (mut g, _) = mount(&mut sim, &ids);
            let file = mapped(&mut g);
            for at in PLACES {
                g.write(file, at, &bytes(1, LEN)).unwrap();
            }
            g.dismount().unwrap();
            file
        };
        let mut engine = CrashAfter::vanishing(sim, usize::MAX);
        let budget = engine.budget();
        // Per place: the seeds written there in order, from the first, and
        // how many of them are acknowledged and begun.
        let mut history: Vec<Vec<u8>> = PLACES.iter().map(|_| vec![1]).collect();
        let mut acked: Vec<usize> = PLACES.iter().map(|_| 1).collect();
        let mut begun = acked.clone();
        {
            let (mut g, _) = mount(&mut engine, &ids);
            budget.set(cut);
            for step in STEPS {
                if budget.get() == 0 {
                    break;
                }
                match step {
                    Step::Write { at, seed } => {
                        let p = PLACES.iter().position(|x| *x == at).unwrap();
                        history[p].push(seed);
                        begun[p] = history[p].len();
                        let _ = g.write(file, at, &bytes(seed, LEN));
                    }
                    Step::Zero { at } | Step::Punch { at } => {
                        let p = PLACES.iter().position(|x| *x == at).unwrap();
                        history[p].push(0);
                        begun[p] = history[p].len();
                        let snap = g.plane.file(file).unwrap();
                        let loc = snap.layout.locate(at);
                        let _ = if matches!(step, Step::Zero { .. }) {
                            crate::group::data::zero_parts(
                                &mut g,
                                None,
                                file,
                                snap.incarnation,
                                &[(loc.extent, loc.offset_in_extent, LEN)],
                                false,
                            )
                        } else {
                            crate::group::data::punch_extents(
                                &mut g,
                                None,
                                file,
                                snap.incarnation,
                                &[loc.extent],
                                false,
                            )
                            .map(|_| 0)
                        };
                    }
                    Step::Sync | Step::Checkpoint => {
                        let done = if matches!(step, Step::Sync) {
                            let log = g.plane.sums_log().clone();
                            log.sync(&mut g).is_ok()
                        } else {
                            g.sync().is_ok()
                        };
                        if done && budget.get() > 0 {
                            acked.clone_from(&begun);
                        }
                    }
                }
            }
            let all_ran = budget.get() > 0;
            std::mem::forget(g);
            if all_ran {
                break;
            }
        }
        engine.inner.crash(CrashPolicy::TEAR_ALL);
        budget.set(usize::MAX);
        let (mut g, report) = mount(&mut engine.inner, &ids);
        let log = &report.checksum_log;
        assert!(
            log.damaged.is_empty() && log.lost.is_empty(),
            "{sector}-byte sectors, cut after {cut} requests: {log:?}"
        );
        recovered_something |= log.copies_rewritten > 0 || log.units_adopted > 0;
        let uuid = g.uuid;
        for (p, at) in PLACES.iter().enumerate() {
            let copies = copies_of(&mut g, &ids, file, *at, LEN);
            let allowed = &history[p][acked[p] - 1..begun[p]];
            for unit in 0..(LEN / u64::from(sector)) {
                let range =
                    (unit * u64::from(sector)) as usize..((unit + 1) * u64::from(sector)) as usize;
                let held = &copies[0][range.clone()];
                let seed_of = |b: &[u8]| {
                    history[p]
                        .iter()
                        .find(|s| bytes(**s, LEN)[range.clone()] == *b)
                        .copied()
                };
                for c in &copies[1..] {
                    assert!(
                        c[range.clone()] == *held,
                        "{sector}-byte sectors, cut after {cut} requests: the copies of file offset {} differ after recovery (seeds {:?} and {:?})",
                        at + range.start as u64,
                        seed_of(held),
                        seed_of(&c[range.clone()]),
                    );
                }
                let seed = allowed
                    .iter()
                    .find(|s| bytes(**s, LEN)[range.clone()] == *held);
                assert!(
                    seed.is_some(),
                    "{sector}-byte sectors, cut after {cut} requests: file offset {} holds none of seeds {allowed:?} (history {:?}; it holds {:?}; report {log:?})",
                    at + range.start as u64,
                    history[p],
                    seed_of(held),
                );
                let u = (at + range.start as u64) / u64::from(sector);
                let (block, slot) = map_place(u);
                let map = crate::group::data::read_map_block(&mut g, uuid, file, block).unwrap();
                assert_eq!(
                    map.sums[slot],
                    unit_checksum(held),
                    "{sector}-byte sectors, cut after {cut} requests: the map is not in step at file offset {}",
                    at + range.start as u64
                );
            }
        }
        g.dismount().unwrap();
        cut += 1;
    }
    assert!(cut > 20, "the sweep ran the workload ({cut} requests)");
    assert!(
        recovered_something,
        "{sector}-byte sectors: no cut left a copy for recovery to mend"
    );
}

/// Zeros an acknowledged write put back over a later acknowledged write,
/// durable (a metadata commit's flush, or a disk that kept its cache) but
/// named by no record when the power went: every copy holds the bytes an
/// older record names. That is the unnamed write, not a write the disks
/// lost: recovery adopts the zeros, reports nothing lost, and they read
/// back.
#[test]
fn zeros_put_back_before_a_power_cut_are_no_lost_write() {
    let (mut sim, ids) = four_disks_of(4096);
    create_normal(&mut sim, &ids).dismount().unwrap();
    let mut engine = CrashAfter::vanishing(sim, usize::MAX);
    let at = 5 * MIB;
    let file = {
        let (mut g, _) = mount(&mut engine, &ids);
        let file = mapped(&mut g);
        g.write(file, at, &bytes(1, LEN)).unwrap();
        g.sync().unwrap();
        let zero = |g: &mut Group<'_>| {
            let snap = g.plane.file(file).unwrap();
            let loc = snap.layout.locate(at);
            crate::group::data::zero_parts(
                g,
                None,
                file,
                snap.incarnation,
                &[(loc.extent, loc.offset_in_extent, LEN)],
                false,
            )
            .unwrap();
        };
        zero(&mut g);
        let log = g.plane.sums_log().clone();
        log.sync(&mut g).unwrap();
        g.write(file, at, &bytes(2, LEN)).unwrap();
        log.sync(&mut g).unwrap();
        // A record after it: it says the sync before was flushed.
        g.write(file, at + LEN, &bytes(3, LEN)).unwrap();
        log.sync(&mut g).unwrap();
        zero(&mut g);
        std::mem::forget(g);
        file
    };
    engine.inner.crash(CrashPolicy::KEEP_ALL);
    let (mut g, report) = mount(&mut engine.inner, &ids);
    let log = &report.checksum_log;
    assert!(
        log.lost.is_empty() && log.damaged.is_empty(),
        "zeros over an acknowledged write were taken for a lost write: {log:?}"
    );
    assert!(log.units_adopted > 0, "the zeros were not adopted: {log:?}");
    let mut buf = vec![1u8; LEN as usize];
    g.read(file, at, &mut buf).unwrap();
    assert_eq!(buf, bytes(0, LEN), "the zeros read back");
    for copy in copies_of(&mut g, &ids, file, at, LEN) {
        assert_eq!(copy, bytes(0, LEN), "every copy holds the zeros");
    }
    g.dismount().unwrap();
}

/// A read of a file with a map, given no checksums by its caller (as every
/// caller of the group's reads and of a data handle's is), checks its units
/// against the map it loads: after a remount, with one copy rotten, the
/// read returns the bytes written, the rotten copy is rewritten and
/// counted against its disk; with every copy rotten it fails naming the
/// range, never returning the rot.
#[test]
fn a_read_of_a_file_with_a_map_checks_it_without_being_given_it() {
    let (mut sim, ids) = four_disks_of(4096);
    create_normal(&mut sim, &ids).dismount().unwrap();
    let at = 2 * MIB + 4096;
    let file = {
        let (mut g, _) = mount(&mut sim, &ids);
        let file = mapped(&mut g);
        g.write(file, at, &bytes(3, LEN)).unwrap();
        g.dismount().unwrap();
        file
    };
    // Where each copy of the first unit lies.
    let places: Vec<(DeviceId, u64)> = {
        let (g, _) = mount(&mut sim, &ids);
        let places = places_of(&g, &ids, file, at);
        g.dismount().unwrap();
        places
    };
    assert_eq!(places.len(), 2, "a mirrored file");
    let rot = vec![0x5a; 4096];
    sim.scribble(places[0].0, places[0].1, &rot);
    {
        let (mut g, _) = mount(&mut sim, &ids);
        let mut buf = vec![0u8; LEN as usize];
        g.read(file, at, &mut buf).unwrap();
        assert_eq!(buf, bytes(3, LEN), "the rotten copy was returned");
        let counts = g.plane.checksum_counts().by_disk();
        let healed: u64 = counts.values().map(|c| c.healed).sum();
        assert_eq!(healed, 1, "the rotten unit healed once: {counts:?}");
        g.dismount().unwrap();
    }
    assert_eq!(
        sim.contents(places[0].0, places[0].1, 4096)[..],
        bytes(3, LEN)[..4096],
        "the rotten copy was rewritten"
    );
    for (dev, offset) in &places {
        sim.scribble(*dev, *offset, &rot);
    }
    let (mut g, _) = mount(&mut sim, &ids);
    let mut buf = vec![0u8; LEN as usize];
    let e = g.read(file, at, &mut buf).unwrap_err().to_string();
    assert!(
        e.contains(&format!("bytes {at}..{}", at + 4096)),
        "the failed read names the range: {e}"
    );
    g.dismount().unwrap();
}

/// A unit's candidates rank each record against its map block by the
/// block's own seal: a record before the checkpoint whose `maps_from` the
/// block was written at or after is older than the map (the checkpoint
/// took a write after it); one after that checkpoint is newer, and
/// acknowledged once a flush covered it. Without the checkpoint's record,
/// every record is newer than the map.
#[test]
fn a_record_before_the_checkpoint_that_wrote_the_map_ranks_below_it() {
    use super::{unit_candidates, FileIntents, LogFacts};
    use crate::group::data::map_blocks::MapBlock;
    use crate::group::sums::FileSums;
    let sums = FileSums::new(1, 4096).unwrap();
    let mut map = Box::new([sums.zero(); cairn_format::group::CHECKSUMS_PER_BLOCK]);
    map[5] = 111;
    sums.load(
        0,
        MapBlock {
            sums: map,
            generation: 50,
        },
    );
    let mut intents = FileIntents::default();
    intents.named.insert(5, vec![(10, 222)]);
    let mut facts = LogFacts {
        checkpoints: vec![(12, 40)],
        flushed_through: 14,
    };
    let mut out = Vec::new();
    unit_candidates(&sums, &intents, &facts, 5, &mut out);
    assert_eq!(
        out,
        vec![(111, false), (222, false)],
        "the map the checkpoint wrote is newer than the record before it"
    );
    intents.named.insert(5, vec![(10, 222), (14, 333)]);
    unit_candidates(&sums, &intents, &facts, 5, &mut out);
    assert_eq!(out, vec![(333, true), (111, false), (222, false)]);
    // A checkpoint whose maps are newer than the block: its records and
    // those before it are newer than the block too.
    facts.checkpoints = vec![(12, 60)];
    unit_candidates(&sums, &intents, &facts, 5, &mut out);
    assert_eq!(out, vec![(333, true), (222, true), (111, false)]);
}

/// A read-only mount after a crash does not judge the log, so a write
/// whose checksum only a record names (synced, no checkpoint since) is not
/// checked against the older map: it reads back as written, not as
/// damage. The writing mount after it judges and checks.
#[test]
fn a_read_only_mount_after_a_crash_reads_what_only_the_log_vouches_for() {
    let (mut sim, ids) = four_disks_of(4096);
    create_normal(&mut sim, &ids).dismount().unwrap();
    let at = 3 * MIB;
    let mut engine = CrashAfter::vanishing(sim, usize::MAX);
    let file = {
        let (mut g, _) = mount(&mut engine, &ids);
        let file = mapped(&mut g);
        g.write(file, at, &bytes(1, LEN)).unwrap();
        g.sync().unwrap();
        g.write(file, at, &bytes(2, LEN)).unwrap();
        let log = g.plane.sums_log().clone();
        log.sync(&mut g).unwrap();
        std::mem::forget(g);
        file
    };
    engine.inner.crash(CrashPolicy::LOSE_ALL);
    let mut buf = vec![0u8; LEN as usize];
    {
        let (mut g, _) = crate::group::mount_read_only(
            &mut engine.inner,
            &ids,
            &GroupSelector::Name("T".into()),
        )
        .unwrap();
        g.read(file, at, &mut buf).unwrap();
        assert_eq!(buf, bytes(2, LEN), "the synced write read back");
    }
    let (mut g, report) = mount(&mut engine.inner, &ids);
    assert!(report.checksum_log.damaged.is_empty() && report.checksum_log.lost.is_empty());
    buf.fill(0);
    g.read(file, at, &mut buf).unwrap();
    assert_eq!(buf, bytes(2, LEN), "the synced write read back");
    g.dismount().unwrap();
}

/// A copy made durable by its name (`create_unnamed`, writes, `publish`:
/// a `cp` into the group) has its checksums named before the name: after
/// a power cut, with one copy rotten, the copies are judged against them,
/// the rotten one healed, and nothing reported (named by nothing, two
/// copies that disagree would be damage on every copy: the crash
/// simulator's seed 104419).
#[test]
fn a_published_copy_is_named_so_a_rotten_copy_of_it_is_healed_after_a_crash() {
    let (mut sim, ids) = four_disks_of(4096);
    create_normal(&mut sim, &ids).dismount().unwrap();
    let mut engine = CrashAfter::vanishing(sim, usize::MAX);
    let (file, places) = {
        let (mut g, _) = mount(&mut engine, &ids);
        let options = CreateOptions {
            checksums: Some(true),
            ..CreateOptions::default()
        };
        let file = g.create_unnamed(2 * MIB, &options).unwrap().number;
        g.write(file, 0, &bytes(4, 2 * MIB)).unwrap();
        g.publish(file, &GroupPath::parse("+T/c").unwrap(), 2 * MIB)
            .unwrap();
        let places = places_of(&g, &ids, file, MIB);
        std::mem::forget(g);
        (file, places)
    };
    engine.inner.crash(CrashPolicy::LOSE_ALL);
    engine
        .inner
        .scribble(places[0].0, places[0].1, &[0x5a; 4096]);
    let (mut g, report) = mount(&mut engine.inner, &ids);
    let log = &report.checksum_log;
    assert!(
        log.damaged.is_empty() && log.lost.is_empty(),
        "a published copy with one rotten copy was judged damaged: {log:?}"
    );
    assert_eq!(log.copies_rewritten, 1, "the rotten copy healed: {log:?}");
    let mut buf = vec![0u8; (2 * MIB) as usize];
    g.read(file, 0, &mut buf).unwrap();
    assert!(buf == bytes(4, 2 * MIB), "the copy read back");
    g.dismount().unwrap();
}
