//! Map blocks written through the journal and read back, and the map kept
//! by the data paths' writes, on simulated disks.
#![allow(clippy::unwrap_used)]

use cairn_format::group::{map_number, zero_unit_checksum, MapSums, CHECKSUMS_PER_BLOCK};
use cairn_io::{AlignedBuf, DeviceId, IoEngine};
use cairn_io_sim::{CrashAfter, CrashPolicy, SimEngine};

use super::{read_map_block, MapBlock};
use crate::group::file_types::CreateOptions;
use crate::group::mounted::Group;
use crate::group::tests::{create_normal, four_disks_of, group_on_sim, live_group};
use crate::group::{GroupError, GroupSelector};
use crate::names::GroupPath;

const MIB: u64 = 1 << 20;

fn mount<'e>(engine: &'e mut dyn IoEngine, ids: &[DeviceId]) -> Group<'e> {
    crate::group::mount(engine, ids, &GroupSelector::Name("T".into()))
        .unwrap()
        .0
}

/// A file of 64 MiB with checksums: 17 map blocks.
fn mapped(g: &mut Group<'_>) -> u32 {
    let options = CreateOptions {
        checksums: Some(true),
        ..CreateOptions::default()
    };
    let path = GroupPath::parse("+T/f").unwrap();
    g.create_file(&path, 64 * MIB, &options).unwrap().number
}

fn sums(seed: u32) -> Box<MapSums> {
    let mut s = Box::new([0u32; CHECKSUMS_PER_BLOCK]);
    for (i, v) in s.iter_mut().enumerate() {
        *v = seed.wrapping_mul(0x9E37_79B9) ^ i as u32;
    }
    s
}

fn read(g: &mut Group<'_>, file: u32, block: u64) -> Result<MapBlock, GroupError> {
    let uuid = g.uuid;
    read_map_block(g, uuid, file, block)
}

/// Block `block` of the map written with `sums(seed)`, committed.
fn write(g: &mut Group<'_>, file: u32, block: u64, seed: u32) -> Result<(), GroupError> {
    g.stage_map_block(file, block, sums(seed))?;
    g.commit()
}

/// Where each copy of block `block` of the map is: (device, offset).
fn copies_of(g: &Group<'_>, ids: &[DeviceId], file: u32, block: u64) -> Vec<(DeviceId, u64)> {
    g.map_block_places(file, block)
        .into_iter()
        .map(|(disk, at)| (ids[usize::from(disk)], at))
        .collect()
}

fn image(sim: &mut SimEngine, (dev, at): (DeviceId, u64)) -> Vec<u8> {
    sim.read_at(dev, at, 4096).unwrap()[..].to_vec()
}

fn put(sim: &mut SimEngine, (dev, at): (DeviceId, u64), bytes: &[u8]) {
    sim.write_at(dev, at, AlignedBuf::from_slice(bytes), false)
        .unwrap();
}

/// A map block never written holds the zero unit's checksum everywhere; a
/// written one reads back as written, its first write (which makes its
/// extent written) and those after it, each with a newer generation; a
/// mount reads it back.
#[test]
fn a_map_block_reads_back_as_written_and_blank_as_zero_units() {
    let (mut sim, ids) = group_on_sim();
    let mut g = mount(&mut sim, &ids);
    let file = mapped(&mut g);
    let zero = zero_unit_checksum(4096).unwrap();
    let fresh = read(&mut g, file, 16).unwrap();
    assert_eq!(fresh.generation, 0);
    assert!(fresh.sums.iter().all(|s| *s == zero));
    write(&mut g, file, 16, 1).unwrap();
    let first = read(&mut g, file, 16).unwrap();
    assert!(first.sums == sums(1) && first.generation > 0);
    write(&mut g, file, 16, 2).unwrap();
    let second = read(&mut g, file, 16).unwrap();
    assert!(second.sums == sums(2) && second.generation > first.generation);
    // Its neighbour, in the same extent, was never written: still zeros.
    let next = read(&mut g, file, 15).unwrap();
    assert_eq!((next.generation, next.sums[0]), (0, zero));
    let e = read(&mut g, file, 17).unwrap_err();
    assert!(e.to_string().contains("has no block 17"), "{e}");
    g.dismount().unwrap();
    let mut g = mount(&mut sim, &ids);
    assert_eq!(read(&mut g, file, 16).unwrap(), second);
}

/// The newest valid copy wins: a copy left older by a lost write, or
/// rotten, is passed over; a block damaged on every copy is an error
/// that names it, never zeros.
#[test]
fn the_newest_valid_copy_wins_and_a_block_bad_everywhere_is_an_error() {
    let (mut sim, ids) = group_on_sim();
    let (file, copies, older, newer) = {
        let mut g = mount(&mut sim, &ids);
        let file = mapped(&mut g);
        write(&mut g, file, 3, 7).unwrap();
        let older = read(&mut g, file, 3).unwrap();
        let copies = copies_of(&g, &ids, file, 3);
        g.dismount().unwrap();
        let old_image = image(&mut sim, copies[0]);
        let mut g = mount(&mut sim, &ids);
        write(&mut g, file, 3, 8).unwrap();
        let newer = read(&mut g, file, 3).unwrap();
        g.dismount().unwrap();
        // The primary copy lost the write of the newer block.
        put(&mut sim, copies[0], &old_image);
        (file, copies, older, newer)
    };
    assert_eq!(copies.len(), 2, "a normal-redundancy map has two copies");
    {
        let mut g = mount(&mut sim, &ids);
        assert_eq!(read(&mut g, file, 3).unwrap(), newer);
        g.dismount().unwrap();
    }
    // The copy with the newer block rots: the older valid one is all there is.
    let mut rotten = image(&mut sim, copies[1]);
    rotten[100] ^= 0x40;
    put(&mut sim, copies[1], &rotten);
    {
        let mut g = mount(&mut sim, &ids);
        assert_eq!(read(&mut g, file, 3).unwrap(), older);
        g.dismount().unwrap();
    }
    put(&mut sim, copies[0], &rotten);
    let mut g = mount(&mut sim, &ids);
    let e = read(&mut g, file, 3).unwrap_err();
    assert!(matches!(e, GroupError::Unreadable(_)), "{e}");
    assert!(e.to_string().contains("block 3 of file"), "{e}");
}

/// Through the journal: a power cut at any request of a map block's
/// write, tearing what was not flushed (512-byte sectors, so a 4 KiB block
/// can tear), leaves a block the next mount reads as the old one or the
/// new one, never an error or a mix, and `check` finds nothing.
#[test]
fn a_power_cut_at_any_point_of_a_map_block_write_leaves_old_or_new() {
    let mut cut = 0;
    loop {
        let (mut sim, ids) = four_disks_of(512);
        create_normal(&mut sim, &ids).dismount().unwrap();
        let mut engine = CrashAfter::vanishing(sim, usize::MAX);
        let budget = engine.budget();
        let (file, old) = {
            let mut g = mount(&mut engine, &ids);
            let file = mapped(&mut g);
            write(&mut g, file, 9, 1).unwrap();
            g.sync().unwrap();
            let old = read(&mut g, file, 9).unwrap();
            budget.set(cut);
            // Past the cut every request vanishes: the write "succeeds".
            write(&mut g, file, 9, 2).unwrap();
            let all_ran = budget.get() > 0;
            std::mem::forget(g);
            if all_ran {
                break;
            }
            (file, old)
        };
        engine.inner.crash(CrashPolicy::TEAR_ALL);
        budget.set(usize::MAX);
        let mut g = mount(&mut engine, &ids);
        let got = read(&mut g, file, 9).unwrap();
        assert!(
            got == old || got.sums == sums(2),
            "cut after {cut} requests: generation {}",
            got.generation
        );
        let report = g.check(false).unwrap();
        assert!(
            report.problems.is_empty(),
            "cut after {cut}: {:?}",
            report.problems
        );
        g.dismount().unwrap();
        cut += 1;
    }
    assert!(cut > 3, "the sweep reached the write ({cut} requests)");
}

/// `check` reads every written map block: a copy older than the newest
/// (a lost write) or damaged is reported and, with `--repair`, rewritten
/// from the newest; a block with no valid copy is reported, not repaired.
#[test]
fn check_reports_and_repairs_a_map_block_copy_that_is_not_the_newest() {
    let (mut sim, ids) = group_on_sim();
    let (file, copies, older, newer) = {
        let mut g = mount(&mut sim, &ids);
        let file = mapped(&mut g);
        write(&mut g, file, 5, 1).unwrap();
        let older = read(&mut g, file, 5).unwrap().generation;
        let copies = copies_of(&g, &ids, file, 5);
        g.dismount().unwrap();
        let old = image(&mut sim, copies[1]);
        let mut g = mount(&mut sim, &ids);
        write(&mut g, file, 5, 2).unwrap();
        let newer = read(&mut g, file, 5).unwrap().generation;
        let report = g.check(false).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        g.dismount().unwrap();
        put(&mut sim, copies[1], &old);
        (file, copies, older, newer)
    };
    {
        let mut g = mount(&mut sim, &ids);
        let report = g.check(false).unwrap();
        let found: Vec<(&str, &str)> = report
            .problems
            .iter()
            .map(|p| (p.location.as_str(), p.what.as_str()))
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        let what = format!("stale: generation {older}, the newest copy has {newer}");
        assert!(
            found[0].0.starts_with(&format!(
                "block 5 of the checksum map of file {file} copy on"
            )) && found[0].1 == what,
            "{found:?}"
        );
        let repaired = g.check(true).unwrap();
        assert!(
            repaired.clean() && repaired.problems.len() == 1,
            "{repaired:?}"
        );
        let again = g.check(false).unwrap();
        assert!(again.problems.is_empty(), "{:?}", again.problems);
        assert_eq!(read(&mut g, file, 5).unwrap().generation, newer);
        g.dismount().unwrap();
    }
    for c in &copies {
        put(&mut sim, *c, &[0x5A; 4096]);
    }
    let mut g = mount(&mut sim, &ids);
    let report = g.check(true).unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    let p = &report.problems[0];
    assert!(
        p.what.starts_with("no valid copy") && !p.repairable && !report.clean(),
        "{p:?}"
    );
}

/// A copy on a disk taken offline is marked stale in the transaction
/// that writes the block on the others: it comes back resynced with the
/// new block, never holding the older one unmarked.
#[test]
fn an_offline_copy_is_marked_stale_with_the_block_and_resynced() {
    let (mut sim, ids) = group_on_sim();
    let mut g = mount(&mut sim, &ids);
    let file = mapped(&mut g);
    write(&mut g, file, 2, 1).unwrap();
    let extent = g.extents(map_number(file)).unwrap()[0];
    let away = extent.copies()[1].disk;
    let name = g.disk_name(away);
    g.offline_disks(std::slice::from_ref(&name), None).unwrap();
    write(&mut g, file, 2, 2).unwrap();
    let extent = g.extents(map_number(file)).unwrap()[0];
    assert_ne!(extent.stale[1], 0, "{extent:?}");
    g.online_disks(Some(&[name]), 4, &mut |_| {}).unwrap();
    let extent = g.extents(map_number(file)).unwrap()[0];
    assert_eq!(extent.stale[1], 0, "{extent:?}");
    let report = g.check(false).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(read(&mut g, file, 2).unwrap().sums, sums(2));
}

/// Bytes for a write: a pattern of `seed`, never all zeros per sector.
fn bytes(seed: u8, len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
        .collect()
}

/// Every unit of `file` (of `size` bytes) has in its map, as a mount reads
/// it from disk, the checksum of the bytes the file reads back; the map's
/// last block holds zero units past the end.
fn map_matches_data(g: &mut Group<'_>, file: u32, size: u64) {
    let unit = 4096u64;
    let zero = zero_unit_checksum(4096).unwrap();
    let per = CHECKSUMS_PER_BLOCK as u64;
    let units = size / unit;
    let mut buf = vec![0u8; unit as usize];
    for block in 0..units.div_ceil(per) {
        let map = read(g, file, block).unwrap();
        for slot in 0..per {
            let u = block * per + slot;
            let want = if u < units {
                g.read(file, u * unit, &mut buf).unwrap();
                cairn_format::group::unit_checksum(&buf)
            } else {
                zero
            };
            assert_eq!(
                map.sums[slot as usize], want,
                "unit {u} (block {block} slot {slot}, generation {})",
                map.generation
            );
        }
    }
}

/// Writes (in place, first writes, across extents), a shrink into the
/// middle of a map block and a grow back over it: after a dismount, the
/// map holds each unit's checksum, and zero units where the grow exposed
/// zeros. A file without a map has none written.
#[test]
fn writes_and_resizes_keep_the_map_and_a_dismount_writes_it() {
    let (mut sim, ids) = group_on_sim();
    let file;
    {
        let mut g = mount(&mut sim, &ids);
        file = mapped(&mut g);
        g.write(file, 0, &bytes(1, 3 * MIB)).unwrap();
        g.write(file, 2 * MIB + 8192, &bytes(2, MIB)).unwrap();
        g.write(file, 40 * MIB, &bytes(3, 5 * 4096)).unwrap();
        // Map block 3: past the shrink below, inside the map's kept extent.
        g.write(file, 12 * MIB, &bytes(9, MIB)).unwrap();
        // Units 1792.. of map block 1: past the shrink below, in its block.
        g.write(file, 7 * MIB, &bytes(10, 8 * 4096)).unwrap();
        g.write(file, 4096, &bytes(4, 4096)).unwrap();
        g.sync().unwrap();
        g.write(file, 63 * MIB, &bytes(5, MIB)).unwrap();
        g.dismount().unwrap();
    }
    {
        let mut g = mount(&mut sim, &ids);
        map_matches_data(&mut g, file, 64 * MIB);
        // Into the middle of a map block (unit 1500 of block 1), then back.
        let path = GroupPath::parse("+T/f").unwrap();
        g.resize(&path, 1500 * 4096).unwrap();
        g.resize(&path, 20 * MIB).unwrap();
        g.write(file, 19 * MIB, &bytes(6, 4096)).unwrap();
        g.dismount().unwrap();
    }
    let mut g = mount(&mut sim, &ids);
    map_matches_data(&mut g, file, 20 * MIB);
}

/// Mounted again (the live group dismounted), file `file` of 64 MiB has
/// its map in step with its bytes ([`map_matches_data`]).
fn in_step_after_a_mount(shared: &cairn_io_sim::SharedSim, ids: &[DeviceId], file: u32) {
    let mut engine = shared.handle();
    let mut g = mount(&mut engine, ids);
    map_matches_data(&mut g, file, 64 * MIB);
}

/// Through a live group's data handle: writes, a punch of whole extents
/// and of parts of one, and a zeroing write: after the dismount the map
/// holds each unit's checksum.
#[test]
fn a_live_groups_writes_and_punches_keep_the_map() {
    let (sim, ids) = group_on_sim();
    let shared = cairn_io_sim::SharedSim::new(sim);
    let file = {
        let live = live_group(&shared, &ids);
        let file = live.meta(|g| mapped(g)).unwrap();
        let mut h = live.handle(8).unwrap();
        h.write(file, 0, &bytes(7, 6 * MIB)).unwrap();
        h.write(file, 9 * MIB, &bytes(8, 2 * MIB)).unwrap();
        // Whole extents 1..3 and parts of 0 and 4 (with sector edges).
        h.punch(file, MIB - 8192 + 100, 3 * MIB + 16384, true)
            .unwrap();
        h.punch(file, 9 * MIB + 4096, 8192, false).unwrap();
        h.sync().unwrap();
        drop(h);
        live.dismount().unwrap();
        file
    };
    in_step_after_a_mount(&shared, &ids, file);
}

/// Four threads of a live group write, overwrite and punch the same file
/// at once (overlapping ranges, in place and first writes): once they are
/// done and the group dismounted, the map holds each unit's checksum of
/// the bytes the file reads back, whichever write landed last.
#[test]
fn concurrent_writers_leave_the_map_in_step_with_the_bytes() {
    let (sim, ids) = group_on_sim();
    let shared = cairn_io_sim::SharedSim::new(sim);
    let file = {
        let live = live_group(&shared, &ids);
        let file = live.meta(|g| mapped(g)).unwrap();
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let live = live.clone();
                std::thread::spawn(move || {
                    let mut h = live.handle(8).unwrap();
                    let mut x = u64::from(t) * 7919 + 1;
                    for i in 0..60u64 {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        // 8 MiB of the file, so the threads meet.
                        let at = (x >> 33) % (8 * MIB / 4096) * 4096;
                        let len = ((x >> 20) % 64 + 1) * 4096;
                        let len = len.min(8 * MIB - at);
                        if i % 9 == 8 {
                            h.punch(file, at, len, t % 2 == 0).unwrap();
                        } else {
                            h.write(file, at, &bytes(t * 60 + i as u8, len)).unwrap();
                        }
                    }
                    h.sync().unwrap();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        live.dismount().unwrap();
        file
    };
    in_step_after_a_mount(&shared, &ids, file);
}

/// A shrink and a grow back, then a power cut before any `sync`: the next
/// mount (replaying the journal) finds every unit's checksum in step with
/// the bytes. The map blocks the grow blanked are not written back with
/// their old checksums by a replay of the records that wrote them before
/// the shrink, and the last block's tail is zero units, with the shrink.
#[test]
fn a_shrink_and_a_grow_then_a_power_cut_leave_the_map_in_step() {
    let (mut sim, ids) = group_on_sim();
    let path = GroupPath::parse("+T/f").unwrap();
    let file = {
        let mut g = mount(&mut sim, &ids);
        let file = mapped(&mut g);
        // Map block 3, and units 1792.. of map block 1.
        g.write(file, 12 * MIB, &bytes(1, MIB)).unwrap();
        g.write(file, 7 * MIB, &bytes(2, 8 * 4096)).unwrap();
        g.sync().unwrap();
        g.resize(&path, 1500 * 4096).unwrap();
        g.resize(&path, 20 * MIB).unwrap();
        std::mem::forget(g);
        file
    };
    sim.crash(CrashPolicy::LOSE_ALL);
    let mut g = mount(&mut sim, &ids);
    assert_eq!(g.open(&path).unwrap().size_bytes, 20 * MIB);
    map_matches_data(&mut g, file, 20 * MIB);
}

/// Through the completion engine ([`crate::group::FileIo`]), many writes in
/// flight into a file with a map — first writes, then overwrites of written
/// extents, which a file without a map would send down its fast path:
/// after the dismount the map holds each unit's checksum.
#[test]
fn the_completion_engines_writes_keep_the_map() {
    use cairn_io::IoEngine as _;
    use cairn_io::{Op, Request};
    let (sim, ids) = group_on_sim();
    let shared = cairn_io_sim::SharedSim::new(sim);
    let file = {
        let live = live_group(&shared, &ids);
        let file = live.meta(|g| mapped(g)).unwrap();
        let snap = live.plane().file(file).unwrap();
        assert!(
            snap.has_map,
            "a file made with a map is published as having one"
        );
        let disks = live.meta(|g| g.member_devices()).unwrap();
        let mapping = crate::group::Mapping::GroupFile {
            group: live.clone(),
            number: file,
            disks,
            geometry: cairn_io_sim::geometry(snap.size_bytes, 4096, 4096, MIB as u32),
        };
        let mut io = crate::group::FileIo::new(Box::new(shared.handle()), vec![mapping], 16);
        let mut tag = 0u64;
        for round in 0..3u8 {
            for i in 0..8u64 {
                let at = i * MIB + u64::from(round) * 12288;
                let op = Op::Write {
                    offset_bytes: at,
                    buf: AlignedBuf::from_slice(&bytes(round * 8 + i as u8, 16384)),
                    fua: false,
                };
                io.submit(Request {
                    device: DeviceId(0),
                    tag,
                    op,
                })
                .unwrap();
                tag += 1;
            }
            while io.in_flight() > 0 {
                io.wait(1).unwrap();
                while let Some(c) = io.pop_completion() {
                    assert_eq!(c.result, Ok(16384), "write {}", c.tag);
                }
            }
        }
        // A flush writes the log's record of the units those writes left
        // unnamed before it flushes; a write asked to be durable (FUA)
        // does so before it completes.
        let log = live.plane().sums_log().clone();
        let seq = log.ring().unwrap().next_seq;
        let flush = Request {
            device: DeviceId(0),
            tag,
            op: Op::Flush,
        };
        io.submit(flush).unwrap();
        io.wait(1).unwrap();
        assert_eq!(io.pop_completion().unwrap().result, Ok(0));
        let synced = log.ring().unwrap().next_seq;
        assert!(synced > seq, "the flush wrote the log's record first");
        let op = Op::Write {
            offset_bytes: 20 * MIB,
            buf: AlignedBuf::from_slice(&bytes(99, 4096)),
            fua: true,
        };
        io.submit(Request {
            device: DeviceId(0),
            tag: tag + 1,
            op,
        })
        .unwrap();
        io.wait(1).unwrap();
        assert_eq!(io.pop_completion().unwrap().result, Ok(4096));
        let fua = log.ring().unwrap().next_seq;
        // One record names region 20, one (at least) the unit's checksum.
        assert!(
            fua >= synced + 2,
            "the FUA write's checksum is logged: {synced} -> {fua}"
        );
        drop(io);
        live.dismount().unwrap();
        file
    };
    in_step_after_a_mount(&shared, &ids, file);
}
