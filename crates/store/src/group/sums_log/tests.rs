#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use cairn_format::group::{
    unit_checksum, IntentRecord, Region, FILE_CHECKSUM_LOG, LOG_HEADER_BLOCKS,
};
use cairn_format::meta;
use cairn_io::{DeviceId, IoEngine};
use cairn_io_sim::{CrashAfter, CrashPolicy, SimEngine};

use super::{record_id, Ring};
use crate::group::file_types::CreateOptions;
use crate::group::mounted::Group;
use crate::group::tests::{create_normal, four_disks_of, group_on_sim, live_group};
use crate::group::GroupSelector;
use crate::names::GroupPath;

const MIB: u64 = 1 << 20;

fn mount<'e>(engine: &'e mut dyn IoEngine, ids: &[DeviceId]) -> Group<'e> {
    crate::group::mount(engine, ids, &GroupSelector::Name("T".into()))
        .unwrap()
        .0
}

/// A file `name` of 40 MiB (40 log regions) with checksums.
fn mapped(g: &mut Group<'_>, name: &str) -> u32 {
    let options = CreateOptions {
        checksums: Some(true),
        ..CreateOptions::default()
    };
    let path = GroupPath::parse(&format!("+T/{name}")).unwrap();
    g.create_file(&path, 40 * MIB, &options).unwrap().number
}

fn bytes(seed: u8, len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed) | 1)
        .collect()
}

fn ring(g: &Group<'_>) -> Ring {
    g.plane.sums_log().ring().unwrap()
}

/// The records of the ring from sequence `from` on, as the disks hold
/// them (any copy), read through `engine`: each the next sequence at the
/// next block, chained, up to the first missing.
fn records_from(
    engine: &mut dyn IoEngine,
    ids: &[DeviceId],
    ring: &Ring,
    from: (u64, u64, u32),
) -> Vec<(u64, IntentRecord)> {
    let (mut seq, mut position, mut prev) = from;
    let mut out = Vec::new();
    loop {
        let found = ring.places(position).into_iter().find_map(|(disk, at)| {
            let buf = engine.read_at(ids[usize::from(disk)], at, 4096).ok()?;
            (meta::open(&buf[..], record_id(position), ring.places.uuid) == Ok(seq))
                .then(|| IntentRecord::decode(&buf[..]).ok())
                .flatten()
                .filter(|r| r.prev_checksum == prev)
                .map(|r| (r, meta::checksum_of(&buf[..])))
        });
        let Some((record, checksum)) = found else {
            return out;
        };
        out.push((seq, record));
        prev = checksum;
        seq += 1;
        position = ring.after(position);
    }
}

/// The ring's next record: (sequence, block, chained checksum).
fn next_of(ring: &Ring) -> (u64, u64, u32) {
    (ring.next_seq, ring.position, ring.prev_checksum)
}

/// The first write into a region no durable record names writes a record
/// naming it first; more writes there write none; a sync writes the
/// checksums of every unit written since the last record, which match the
/// bytes, and a second sync with nothing new writes nothing.
#[test]
fn a_region_is_named_before_its_first_write_and_a_sync_names_the_units() {
    let (mut sim, ids) = group_on_sim();
    let mut g = mount(&mut sim, &ids);
    let file = mapped(&mut g, "f");
    let start = next_of(&ring(&g));
    g.write(file, 0, &bytes(1, 8192)).unwrap();
    let after_first = ring(&g);
    assert_eq!(after_first.next_seq, start.0 + 1, "one record for region 0");
    g.write(file, 8192, &bytes(2, 4096)).unwrap();
    assert_eq!(ring(&g).next_seq, start.0 + 1, "region 0 is named already");
    g.write(file, 5 * MIB + 4096, &bytes(3, 3 * 4096)).unwrap();
    assert_eq!(ring(&g).next_seq, start.0 + 2, "one record for region 5");
    let log = g.plane.sums_log().clone();
    log.sync(&mut g).unwrap();
    let synced = ring(&g);
    log.sync(&mut g).unwrap();
    assert_eq!(ring(&g).next_seq, synced.next_seq, "nothing new to name");
    let places = ring(&g);
    let records = records_from(&mut *g.engine, &ids, &places, start);
    assert_eq!(
        records.len() as u64,
        synced.next_seq - start.0,
        "every record is on disk"
    );
    let region = |index| Region { file, index };
    assert_eq!(records[0].1.regions, vec![region(0)]);
    assert!(records[0].1.runs.is_empty());
    assert_eq!(records[1].1.regions, vec![region(0), region(5)]);
    // The sync's record(s): every unit written, with its checksum now.
    let mut named = BTreeMap::new();
    for (_, r) in &records[2..] {
        for run in &r.runs {
            assert_eq!(run.file, file);
            for (i, sum) in run.checksums.iter().enumerate() {
                named.insert(run.first_unit + i as u64, *sum);
            }
        }
    }
    let units: Vec<u64> = named.keys().copied().collect();
    let region5 = 5 * MIB / 4096;
    assert_eq!(units, vec![0, 1, 2, region5 + 1, region5 + 2, region5 + 3]);
    let mut buf = vec![0u8; 4096];
    for (unit, sum) in named {
        g.read(file, unit * 4096, &mut buf).unwrap();
        assert_eq!(sum, unit_checksum(&buf), "unit {unit}");
    }
    assert!(records.iter().all(|(_, r)| r.writer == 0));
    // Only a sync's flush covers the data: the records before the first
    // sync name no flush; the next sync's names the first's.
    assert!(records.iter().all(|(_, r)| r.flushed_through < start.0));
    g.write(file, 8192, &bytes(4, 4096)).unwrap();
    log.sync(&mut g).unwrap();
    let places = ring(&g);
    let next = records_from(&mut *g.engine, &ids, &places, next_of(&synced));
    assert_eq!(next.len(), 1, "a unit written once since the last sync");
    assert_eq!(next[0].1.flushed_through, synced.next_seq - 1);
}

/// A unit written again before a sync named its first write has that
/// write named first, in a record of its own, before the second's bytes
/// are sent: the log never leaves a unit two writes it does not name.
#[test]
fn a_unit_written_twice_between_syncs_has_its_first_write_named_first() {
    let (mut sim, ids) = group_on_sim();
    let mut g = mount(&mut sim, &ids);
    let file = mapped(&mut g, "f");
    g.write(file, 0, &bytes(1, 8192)).unwrap();
    let before = next_of(&ring(&g));
    g.write(file, 12288, &bytes(2, 4096)).unwrap();
    assert_eq!(ring(&g).next_seq, before.0, "a first write: no record");
    g.write(file, 4096, &bytes(3, 8192)).unwrap();
    let places = ring(&g);
    let records = records_from(&mut *g.engine, &ids, &places, before);
    assert_eq!(records.len(), 1, "one record, before the second write");
    let runs: Vec<(u64, Vec<u32>)> = records[0]
        .1
        .runs
        .iter()
        .map(|r| (r.first_unit, r.checksums.clone()))
        .collect();
    assert_eq!(
        runs,
        vec![(1, vec![unit_checksum(&bytes(1, 8192)[4096..])])],
        "the first write of unit 1, and nothing of unit 2 (written once)"
    );
    // Each write again before a sync names the one before it; after a
    // sync, none.
    g.write(file, 4096, &bytes(4, 4096)).unwrap();
    assert_eq!(ring(&g).next_seq, places.next_seq + 1);
    let log = g.plane.sums_log().clone();
    log.sync(&mut g).unwrap();
    let synced = ring(&g).next_seq;
    g.write(file, 4096, &bytes(5, 4096)).unwrap();
    assert_eq!(ring(&g).next_seq, synced, "written once since the sync");
}

/// A power cut at any request of an in-place write into a region no
/// durable record names: wherever a copy of the data holds the new bytes,
/// a record that survived the cut names the region.
#[test]
fn a_power_cut_never_leaves_new_bytes_in_a_region_no_record_names() {
    let mut cut = 0;
    let mut landed_somewhere = false;
    loop {
        let (mut sim, ids) = four_disks_of(4096);
        create_normal(&mut sim, &ids).dismount().unwrap();
        let file = {
            let mut g = mount(&mut sim, &ids);
            let file = mapped(&mut g, "f");
            g.write(file, 3 * MIB, &bytes(1, 4096)).unwrap();
            g.dismount().unwrap();
            file
        };
        let mut engine = CrashAfter::vanishing(sim, usize::MAX);
        let budget = engine.budget();
        let (start, places, copies) = {
            // A new mount names no region yet.
            let mut g = mount(&mut engine, &ids);
            let ring = ring(&g);
            let start = next_of(&ring);
            let snap = g.plane.file(file).unwrap();
            let at = snap.layout.locate(3 * MIB);
            let extent = *snap.extent(at.extent).unwrap();
            let copies: Vec<(DeviceId, u64)> = extent
                .copies()
                .iter()
                .map(|c| {
                    (
                        ids[usize::from(c.disk)],
                        u64::from(c.au) * snap.au_bytes + at.offset_in_extent,
                    )
                })
                .collect();
            budget.set(cut);
            let _ = g.write(file, 3 * MIB, &bytes(2, 4096));
            let all_ran = budget.get() > 0;
            std::mem::forget(g);
            if all_ran {
                break;
            }
            (start, ring, copies)
        };
        // Writes no flush covered torn, or (every other cut) all kept: so
        // some cut lands the data however the tears fall.
        engine.inner.crash(if cut % 2 == 0 {
            CrashPolicy::TEAR_ALL
        } else {
            CrashPolicy::KEEP_ALL
        });
        budget.set(usize::MAX);
        let new = bytes(2, 4096);
        let holds_new = copies
            .iter()
            .any(|(dev, at)| engine.inner.read_at(*dev, *at, 4096).unwrap()[..] == new[..]);
        let records = records_from(&mut engine.inner, &ids, &places, start);
        let named = records
            .iter()
            .any(|(_, r)| r.regions.contains(&Region { file, index: 3 }));
        assert!(
            named || !holds_new,
            "cut after {cut} requests: new bytes on a copy and no durable record names the region"
        );
        landed_somewhere |= holds_new;
        cut += 1;
    }
    assert!(
        landed_somewhere,
        "the sweep reached the data write ({cut} requests)"
    );
}

/// Writes into more regions (80) than a record names, in two files: each
/// region let go is named with its units' checksums in the record that
/// drops it; when the ring is full a checkpoint of the maps starts it
/// again (a new header), and the maps a mount reads are in step with the
/// bytes.
#[test]
fn a_full_ring_checkpoints_the_maps_and_starts_again() {
    let (mut sim, ids) = group_on_sim();
    let (files, written) = {
        let mut g = mount(&mut sim, &ids);
        let files = [mapped(&mut g, "a"), mapped(&mut g, "b")];
        let generation = ring(&g).header.header_generation;
        let blocks = ring(&g).blocks();
        let mut written = BTreeMap::new();
        let mut i = 0u64;
        while ring(&g).header.header_generation == generation {
            let file = files[(i % 2) as usize];
            let region = (i / 2) % 40;
            let at = region * MIB + (i % 7) * 4096;
            let data = bytes(i as u8, 4096);
            g.write(file, at, &data).unwrap();
            written.insert((file, at), data);
            i += 1;
            assert!(i < 4 * blocks, "no checkpoint after {i} writes");
        }
        assert!(
            i > 64,
            "the ring filled only after the set did ({i} writes)"
        );
        let ring = ring(&g);
        // The checkpoint's own record, and the one the write then needed.
        assert_eq!(ring.used(), 2, "the ring starts again");
        assert!(ring.header.start_position >= LOG_HEADER_BLOCKS);
        g.dismount().unwrap();
        (files, written)
    };
    let mut g = mount(&mut sim, &ids);
    let mut buf = vec![0u8; 4096];
    for ((file, at), data) in &written {
        g.read(*file, *at, &mut buf).unwrap();
        assert_eq!(&buf, data);
    }
    for file in files {
        for ((f, at), data) in &written {
            if *f != file {
                continue;
            }
            let unit = at / 4096;
            let (block, slot) = cairn_format::group::map_place(unit);
            let uuid = g.uuid;
            let read = crate::group::data::read_map_block(&mut g, uuid, file, block).unwrap();
            // The last write of each unit is what `written` keeps.
            assert_eq!(
                read.sums[slot],
                unit_checksum(data),
                "file {file} unit {unit}"
            );
        }
    }
    assert_eq!(FILE_CHECKSUM_LOG, 8);
}

/// A log never checkpointed reads as empty at mount; one a mount started
/// has a header, and the next mount goes on after its records.
#[test]
fn a_mount_reads_where_the_log_stands() {
    let (mut sim, ids) = group_on_sim();
    let (file, seq) = {
        let mut g = mount(&mut sim, &ids);
        let file = mapped(&mut g, "f");
        g.write(file, 0, &bytes(1, 4096)).unwrap();
        let seq = ring(&g).next_seq;
        std::mem::forget(g);
        (file, seq)
    };
    let _ = file;
    let g = mount(&mut sim, &ids);
    let ring = ring(&g);
    assert!(
        ring.header.header_generation >= 1,
        "the mount wrote a header"
    );
    assert!(
        ring.header.start_seq >= seq,
        "the mount's stretch starts after the records it found ({} < {seq})",
        ring.header.start_seq
    );
    let _: &SimEngine = &sim;
}

/// A rebalance moves the log's extent off a dropped disk: the records
/// written after it go to the new place, where the file's entry says the
/// log is, and they chain on from the ones before.
#[test]
fn the_log_moved_by_a_rebalance_is_written_at_its_new_place() {
    let (mut sim, ids) = group_on_sim();
    let mut g = mount(&mut sim, &ids);
    let file = mapped(&mut g, "f");
    g.write(file, 0, &bytes(1, 4096)).unwrap();
    let before = g.files[&FILE_CHECKSUM_LOG].extents.clone();
    let leaving = before[0].copies()[0].disk;
    let name = g.disk_name(leaving);
    g.request_drops(&[name]).unwrap();
    g.rebalance(4, &mut |_| {}).unwrap();
    let after = g.files[&FILE_CHECKSUM_LOG].extents.clone();
    assert_ne!(before, after, "the log's extent moved");
    assert!(after[0].copies().iter().all(|c| c.disk != leaving));
    let start = next_of(&ring(&g));
    assert_eq!(
        ring(&g).places.extents,
        after,
        "the writer knows the new place"
    );
    g.write(file, 7 * MIB, &bytes(2, 4096)).unwrap();
    let log = g.plane.sums_log().clone();
    log.sync(&mut g).unwrap();
    let now = ring(&g);
    let records = records_from(&mut *g.engine, &ids, &now, start);
    assert_eq!(records.len() as u64, now.next_seq - start.0);
    assert!(records[0].1.regions.contains(&Region { file, index: 7 }));
}

/// Through a live group's data handles, two threads writing into 80
/// regions: a write that finds the ring full has the maps checkpointed
/// through the metadata lock while it holds its extent's latch (the lock
/// order allows it, and debug builds assert it), a sync names what is
/// left, and a mount finds the maps in step with the bytes.
#[test]
fn a_live_groups_writers_fill_the_ring_and_go_on() {
    let (sim, ids) = group_on_sim();
    let shared = cairn_io_sim::SharedSim::new(sim);
    let live = live_group(&shared, &ids);
    let files = live.meta(|g| [mapped(g, "a"), mapped(g, "b")]).unwrap();
    let generation = || {
        let ring = live.plane().sums_log().ring().unwrap();
        ring.header.header_generation
    };
    let before = generation();
    let blocks = live.plane().sums_log().ring().unwrap().blocks();
    // Each thread writes both files, 80 regions in turn (its own units).
    let threads: Vec<_> = (0..2u64)
        .map(|t| {
            let live = live.clone();
            std::thread::spawn(move || {
                let mut h = live.handle(8).unwrap();
                let mut written = BTreeMap::new();
                for i in 0..2 * blocks {
                    let file = files[((i + t) % 2) as usize];
                    let at = (i / 2 % 40) * MIB + (t * 8 + i % 5) * 4096;
                    let data = bytes((i as u8).wrapping_add(t as u8 * 7), 4096);
                    h.write(file, at, &data).unwrap();
                    written.insert((file, at), data);
                }
                h.sync().unwrap();
                written
            })
        })
        .collect();
    let written: BTreeMap<(u32, u64), Vec<u8>> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let after = generation();
    assert!(
        after > before,
        "the ring was started again ({before} -> {after})"
    );
    live.dismount().unwrap();
    let mut engine = shared.handle();
    let mut g = mount(&mut engine, &ids);
    let mut buf = vec![0u8; 4096];
    for ((file, at), data) in &written {
        g.read(*file, *at, &mut buf).unwrap();
        assert_eq!(&buf, data, "file {file} at {at}");
        let (block, slot) = cairn_format::group::map_place(at / 4096);
        let uuid = g.uuid;
        let read = crate::group::data::read_map_block(&mut g, uuid, *file, block).unwrap();
        assert_eq!(read.sums[slot], unit_checksum(data), "file {file} at {at}");
    }
}

/// A sync flushes the data its records name with them, on every disk:
/// after a power cut that drops everything not flushed, every copy of a
/// write the sync covered holds its bytes (the records say their writes
/// were acknowledged, so they must be).
#[test]
fn a_sync_makes_the_writes_it_names_durable() {
    let (mut sim, ids) = group_on_sim();
    let file = {
        let mut g = mount(&mut sim, &ids);
        let file = mapped(&mut g, "f");
        for region in 0..8u64 {
            g.write(file, region * 5 * MIB, &bytes(1, 4096)).unwrap();
        }
        g.dismount().unwrap();
        file
    };
    let mut g = mount(&mut sim, &ids);
    let mut copies = Vec::new();
    for region in 0..8u64 {
        let at = region * 5 * MIB;
        g.write(file, at, &bytes(2, 4096)).unwrap();
        let snap = g.plane.file(file).unwrap();
        let loc = snap.layout.locate(at);
        for c in snap.extent(loc.extent).unwrap().copies() {
            copies.push((
                ids[usize::from(c.disk)],
                u64::from(c.au) * snap.au_bytes + loc.offset_in_extent,
            ));
        }
    }
    let log = g.plane.sums_log().clone();
    log.sync(&mut g).unwrap();
    std::mem::forget(g);
    sim.crash(CrashPolicy::LOSE_ALL);
    let new = bytes(2, 4096);
    for (dev, at) in copies {
        let held = sim.read_at(dev, at, 4096).unwrap();
        assert!(
            held[..] == new[..],
            "{dev:?} at {at}: the synced write is gone"
        );
    }
}

/// Records that carry the runs of regions leaving the set name the set
/// before the batch; only the last names the set after it: a crash that
/// keeps the first records and not the last leaves the leaving regions
/// named.
#[test]
fn a_batch_names_the_new_set_only_in_its_last_record() {
    let sums = std::sync::Arc::new(crate::group::sums::FileSums::new(1, 512).unwrap());
    let runs: super::Runs = vec![(300, sums, 0, vec![7; 2000])];
    let before = [
        Region {
            file: 300,
            index: 1,
        },
        Region {
            file: 300,
            index: 2,
        },
    ];
    let after = [
        Region {
            file: 300,
            index: 2,
        },
        Region {
            file: 300,
            index: 3,
        },
    ];
    let records = super::pack(&runs, (&before, &after), 5);
    assert_eq!(records.len(), 3, "2000 checksums take three records");
    assert!(records[..2].iter().all(|r| r.regions == before));
    assert_eq!(records[2].regions, after);
    let named: usize = records
        .iter()
        .flat_map(|r| &r.runs)
        .map(|r| r.checksums.len())
        .sum();
    assert_eq!(named, 2000);
    assert!(records.iter().all(|r| r.fits() && r.flushed_through == 5));
}

/// A write cut into pieces holds its regions until its last piece has
/// ended, not its first: a region let go with units still under way would
/// leave them named by no record.
#[test]
fn a_write_holds_its_regions_until_every_piece_has_ended() {
    let (mut sim, ids) = group_on_sim();
    let mut g = mount(&mut sim, &ids);
    let file = mapped(&mut g, "f");
    let snap = g.plane.file(file).unwrap();
    let data = bytes(3, 2 * MIB);
    let mut w = crate::group::data::SumsWrite::new(&mut g, &snap)
        .unwrap()
        .unwrap();
    w.begin(&mut g, (MIB, 2 * MIB), Some(&data)).unwrap();
    let log = g.plane.sums_log().clone();
    assert_eq!((log.pins(file, 1), log.pins(file, 2)), (1, 1));
    w.end((MIB, MIB), true);
    assert_eq!(
        (log.pins(file, 1), log.pins(file, 2)),
        (1, 1),
        "the second piece is still under way"
    );
    w.end((2 * MIB, MIB), true);
    assert_eq!((log.pins(file, 1), log.pins(file, 2)), (0, 0));
}

/// Behind a live group a checkpoint of the maps commits what it staged
/// before the log starts again (a step's commit would otherwise wait for
/// the operation's end, after the records it frees are gone).
#[test]
fn a_live_checkpoint_commits_the_maps_before_the_log_starts_again() {
    let (sim, ids) = group_on_sim();
    let shared = cairn_io_sim::SharedSim::new(sim);
    let live = live_group(&shared, &ids);
    let file = live.meta(|g| mapped(g, "f")).unwrap();
    let mut h = live.handle(8).unwrap();
    for region in 0..6u64 {
        h.write(file, region * MIB, &bytes(region as u8, 8192))
            .unwrap();
    }
    let left = live
        .meta(|g| {
            g.checkpoint_maps().unwrap();
            g.dirty_count()
        })
        .unwrap();
    assert_eq!(
        left, 0,
        "blocks staged and not committed when the log started again"
    );
}

/// The first header a log ever has, torn by a power cut (slot 0 still
/// blank): the mount reads the log as a log never checkpointed.
#[test]
fn a_torn_first_header_reads_as_a_log_never_checkpointed() {
    let (mut sim, ids) = group_on_sim();
    let places = {
        // The log made by this mount; its dismount writes its first
        // header (generation 1, slot 1).
        let mut g = mount(&mut sim, &ids);
        mapped(&mut g, "f");
        let places = ring(&g).places(1);
        g.dismount().unwrap();
        places
    };
    for (disk, at) in places {
        let dev = ids[usize::from(disk)];
        let mut torn = sim.read_at(dev, at, 4096).unwrap()[..].to_vec();
        torn[2048..].fill(0xA5);
        sim.write_at(dev, at, cairn_io::AlignedBuf::from_slice(&torn), false)
            .unwrap();
    }
    let g = mount(&mut sim, &ids);
    assert!(
        ring(&g).header.header_generation >= 1,
        "the mount starts the log again"
    );
}
