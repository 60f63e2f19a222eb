//! [`FileIo`]: the data plane as a completion-based engine whose devices are
//! files of a live group, over real simulated disks ([`SharedSim`]). What it
//! must do is what the synchronous data path does (`docs/live-core.md`):
//! every copy gets every write, reads fall back to another copy and the bad
//! one is rewritten, a disk a write failed on is offline before the write is
//! acknowledged, first writes zero the rest of their extent — with many
//! requests in flight, and with a request refused whole or failed, never
//! half-done.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};

use cairn_io::{AlignedBuf, Completion, DeviceId, IoEngine, IoError, Op, Request, SubmitError};
use cairn_io_sim::{geometry, SharedSim};
use cairn_store::group::plane::{FileSnapshot, Hold};
use cairn_store::group::{
    self, CreateOptions, FileIo, GroupSelector, LiveGroup, Mapping, SameDevices,
};
use cairn_store::names::GroupPath;
use cairn_store::placement::Striping;
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

mod common;
use common::MIB;
const SECTOR: u64 = 4096;
const E2BIG: i32 = 7;

/// Four 128 MiB disks in two failure groups (disks 0 and 2 in one, 1 and 3
/// in the other), a normal-redundancy group with 1 MiB AUs, mounted live.
/// The simulator takes `sim_depth` requests at once, from every engine on it.
fn live_group(seed: u64, sim_depth: usize) -> (SharedSim, Vec<DeviceId>, LiveGroup) {
    let (shared, ids, live) = common::four_disk_live_group(seed, "FIO", 0xF110, sim_depth);
    // Member disk N is the N-th disk made above: the tests address copies by it.
    let members = live.meta(|g| g.member_devices()).unwrap();
    assert_eq!(
        members,
        ids.iter()
            .enumerate()
            .map(|(i, d)| (i as u16, *d))
            .collect::<BTreeMap<_, _>>()
    );
    (shared, ids, live)
}

fn path(name: &str) -> GroupPath {
    GroupPath::parse(&format!("+FIO/{name}")).unwrap()
}

/// Create a file; `template` `None` is the default (coarse striping).
/// `initialize`: every extent zeroed and marked initialised first.
fn create(
    live: &LiveGroup,
    name: &str,
    size: u64,
    template: Option<&str>,
    initialize: bool,
) -> u32 {
    let options = CreateOptions {
        template: template.map(str::to_string),
        ..CreateOptions::default()
    };
    let number = live
        .meta(|g| g.create_file(&path(name), size, &options))
        .unwrap()
        .unwrap()
        .number;
    if initialize {
        // A live group's data goes through data handles, zeroing included.
        let zeroed = live.handle(8).unwrap().initialize_file(number).unwrap();
        assert!(zeroed > 0);
    }
    number
}

fn snap(live: &LiveGroup, number: u32) -> std::sync::Arc<FileSnapshot> {
    live.plane().file(number).unwrap()
}

/// A [`FileIo`] whose device `i` is file `numbers[i]`, on its own engine onto
/// the shared disks, taking `depth` requests at once.
fn file_io(shared: &SharedSim, live: &LiveGroup, numbers: &[u32], depth: usize) -> FileIo {
    let disks = live.meta(|g| g.member_devices()).unwrap();
    let mappings = numbers
        .iter()
        .map(|number| {
            let s = snap(live, *number);
            Mapping::GroupFile {
                group: live.clone(),
                number: *number,
                disks: disks.clone(),
                // The caller sees the file: its size, the group's sector.
                geometry: geometry(s.size_bytes, s.sector_bytes, s.sector_bytes, MIB as u32),
            }
        })
        .collect();
    FileIo::new(Box::new(shared.handle()), mappings, depth)
}

fn read_req(device: u32, tag: u64, offset: u64, len: u64) -> Request {
    Request {
        device: DeviceId(device),
        tag,
        op: Op::Read {
            offset_bytes: offset,
            buf: AlignedBuf::zeroed(len as usize),
        },
    }
}

fn write_req(device: u32, tag: u64, offset: u64, data: &[u8]) -> Request {
    Request {
        device: DeviceId(device),
        tag,
        op: Op::Write {
            offset_bytes: offset,
            buf: AlignedBuf::from_slice(data),
            fua: false,
        },
    }
}

fn submit(io: &mut FileIo, request: Request) {
    let tag = request.tag;
    if let Err(SubmitError::QueueFull(_)) = io.submit(request) {
        panic!("request {tag} refused");
    }
    io.check_invariants().unwrap();
}

/// Wait for everything in flight; the completions by tag.
fn drain(io: &mut FileIo) -> BTreeMap<u64, Completion> {
    let mut out = BTreeMap::new();
    while io.in_flight() > 0 {
        io.wait(1).unwrap();
        io.check_invariants().unwrap();
        while let Some(c) = io.pop_completion() {
            assert!(out.insert(c.tag, c).is_none(), "one completion per tag");
        }
        io.check_invariants().unwrap();
    }
    out
}

/// Run one request to its completion on an idle engine.
fn run(io: &mut FileIo, request: Request) -> Completion {
    assert_eq!(io.in_flight(), 0);
    let tag = request.tag;
    submit(io, request);
    let mut done = drain(io);
    assert_eq!(done.len(), 1);
    done.remove(&tag).unwrap()
}

fn read_ok(io: &mut FileIo, device: u32, offset: u64, len: u64) -> Vec<u8> {
    let c = run(io, read_req(device, 77, offset, len));
    assert_eq!(c.result, Ok(len), "read {offset}+{len}");
    c.buf.unwrap().to_vec()
}

fn noise(rng: &mut ChaCha8Rng, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rng.fill_bytes(&mut v);
    v
}

/// Where each copy of each piece of `offset..offset+len` is: (disk, byte
/// offset on it, offset in the range, length).
fn places(s: &FileSnapshot, offset: u64, len: u64) -> Vec<Vec<(u16, u64, usize, usize)>> {
    s.pieces(offset, len)
        .unwrap()
        .iter()
        .map(|p| {
            s.extent(p.extent)
                .unwrap()
                .copies()
                .iter()
                .map(|c| {
                    (
                        c.disk,
                        u64::from(c.au) * s.au_bytes + p.within,
                        p.at,
                        p.len as usize,
                    )
                })
                .collect()
        })
        .collect()
}

/// Every copy of every byte of the file, read straight from the simulated
/// disks, equals `model`.
fn assert_copies_hold(shared: &SharedSim, live: &LiveGroup, number: u32, model: &[u8]) {
    let s = snap(live, number);
    let devices = live.meta(|g| g.member_devices()).unwrap();
    for extent in s.extents() {
        assert!(extent.initialized);
        assert_eq!(extent.copies().len(), 2, "normal redundancy: two copies");
        assert_ne!(extent.copies()[0].disk, extent.copies()[1].disk);
    }
    shared.with(|sim| {
        for piece in places(&s, 0, model.len() as u64) {
            for (disk, at, from, len) in piece {
                let held = sim.contents(devices[&disk], at, len);
                assert!(
                    held[..] == model[from..from + len],
                    "file {number}: copy on disk {disk} at {at} (file offset {from}, {len} bytes)"
                );
            }
        }
    });
}

/// Requests in flight, by tag: (file, is a write, offset, length, the bytes
/// written).
type Flying = HashMap<u64, (usize, bool, u64, u64, Vec<u8>)>;

/// Check a completion against the model (and, for a write, apply it).
fn check(c: Completion, flying: &mut Flying, models: &mut [Vec<u8>]) {
    let (file, write, offset, len, data) = flying.remove(&c.tag).unwrap();
    assert_eq!(c.device, DeviceId(file as u32), "tag {}", c.tag);
    assert_eq!(c.result, Ok(len), "tag {} at {offset}+{len}", c.tag);
    let buf = c.buf.unwrap();
    assert_eq!(buf.len() as u64, len, "the caller's buffer comes back");
    let range = offset as usize..(offset + len) as usize;
    if write {
        assert!(buf[..] == data[..], "a write's buffer comes back as it was");
        models[file][range].copy_from_slice(&data);
    } else {
        assert!(
            buf[..] == models[file][range],
            "tag {}: file {file} read at {offset}+{len}",
            c.tag
        );
    }
}

/// Check every completion ready.
fn reap(io: &mut FileIo, flying: &mut Flying, models: &mut [Vec<u8>]) {
    while let Some(c) = io.pop_completion() {
        check(c, flying, models);
    }
    io.check_invariants().unwrap();
}

/// Many reads and writes in flight at once, on a coarse and a fine-striped
/// file, of sizes that span extents (and stripe units): every completion is
/// right when it arrives, and at the end every byte reads back through a data
/// handle as the model has it and every mirror copy holds it.
#[test]
fn mixed_reads_and_writes_at_depth_reach_every_copy() {
    const SIZE: u64 = 16 * MIB;
    const DEPTH: usize = 12;
    let (shared, _ids, live) = live_group(11, 256);
    let coarse = create(&live, "coarse", SIZE, None, true);
    let fine = create(&live, "fine", SIZE, Some("ONLINELOG"), true);
    assert_eq!(snap(&live, coarse).layout.striping, Striping::Coarse);
    assert_eq!(snap(&live, fine).layout.striping, Striping::Fine);
    let numbers = [coarse, fine];
    let mut io = file_io(&shared, &live, &numbers, DEPTH);
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut models = vec![vec![0u8; SIZE as usize]; 2];

    let mut flying = Flying::new();
    let (mut reads, mut writes, mut most_in_flight, mut refusals) = (0u64, 0u64, 0usize, 0u64);
    let (mut read_bytes, mut written_bytes) = (0u64, 0u64);
    for tag in 0..400u64 {
        // A request that overlaps none in flight where either writes: the
        // model is then right for whichever finishes first.
        let (file, write, offset, len) = loop {
            let file = (rng.next_u64() % 2) as usize;
            let write = rng.next_u64() % 100 < 55;
            // Up to 2.5 MiB: spans extents, and many stripe units when fine.
            let len = (1 + rng.next_u64() % 640) * SECTOR;
            let offset = rng.next_u64() % ((SIZE - len) / SECTOR + 1) * SECTOR;
            let clash = flying.values().any(|(f, w, o, l, _)| {
                *f == file && (*w || write) && *o < offset + len && offset < o + l
            });
            if !clash {
                break (file, write, offset, len);
            }
            io.wait(1).unwrap();
            reap(&mut io, &mut flying, &mut models);
        };
        let mut request = if write {
            let data = noise(&mut rng, len as usize);
            let r = write_req(file as u32, tag, offset, &data);
            flying.insert(tag, (file, true, offset, len, data));
            writes += 1;
            written_bytes += len;
            r
        } else {
            flying.insert(tag, (file, false, offset, len, Vec::new()));
            reads += 1;
            read_bytes += len;
            read_req(file as u32, tag, offset, len)
        };
        loop {
            let submitted = io.submit(request);
            io.check_invariants().unwrap();
            match submitted {
                Ok(()) => break,
                Err(SubmitError::QueueFull(back)) => {
                    // Refused whole: ours again, to submit once some finish.
                    assert_eq!(back.tag, tag);
                    refusals += 1;
                    request = back;
                    io.wait(1).unwrap();
                    reap(&mut io, &mut flying, &mut models);
                }
            }
        }
        most_in_flight = most_in_flight.max(io.in_flight());
        // Now and then let some finish, so that the depth varies.
        if rng.next_u64() % 4 == 0 {
            io.wait(1).unwrap();
            reap(&mut io, &mut flying, &mut models);
        }
    }
    for (_, c) in drain(&mut io) {
        check(c, &mut flying, &mut models);
    }
    assert!(flying.is_empty());
    assert!(
        most_in_flight >= DEPTH / 2,
        "requests were in flight together: at most {most_in_flight}"
    );
    assert!(
        reads > 100 && writes > 100,
        "{reads} reads, {writes} writes"
    );
    let stats = io.stats();
    assert_eq!(stats.requests, reads + writes, "{refusals} refusals");
    // Counted once per caller byte, not per copy.
    assert_eq!(
        (stats.bytes_read, stats.bytes_written),
        (read_bytes, written_bytes)
    );
    assert!(live.meta(|g| g.disks_taken_offline().is_empty()).unwrap());

    let mut h = live.handle(64).unwrap();
    for (i, number) in numbers.iter().enumerate() {
        let mut back = vec![0u8; SIZE as usize];
        h.read(*number, 0, &mut back).unwrap();
        assert!(back == models[i], "file {i} through a data handle");
        assert_copies_hold(&shared, &live, *number, &models[i]);
        // And through FileIo, in one request spanning the whole file.
        assert!(read_ok(&mut io, i as u32, 0, SIZE) == models[i]);
    }
}

/// A write whose copy on one disk fails completes (the other copy has it) —
/// only after that disk is offline — and no read comes from that disk again.
#[test]
fn a_write_failing_on_one_copy_takes_its_disk_offline_and_reads_avoid_it() {
    const SIZE: u64 = 8 * MIB;
    let (shared, ids, live) = live_group(12, 256);
    let number = create(&live, "w", SIZE, None, true);
    let mut io = file_io(&shared, &live, &[number], 16);
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let mut model = noise(&mut rng, SIZE as usize);
    for i in 0..8u64 {
        submit(
            &mut io,
            write_req(
                0,
                i,
                i * MIB,
                &model[(i * MIB) as usize..((i + 1) * MIB) as usize],
            ),
        );
    }
    assert!(drain(&mut io).values().all(|c| c.result.is_ok()));

    // Extent 0's primary copy: its AU refuses writes.
    let s = snap(&live, number);
    let primary = s.extent(0).unwrap().copies()[0];
    let bad = primary.disk;
    let bad_device = ids[usize::from(bad)];
    let au_start = u64::from(primary.au) * s.au_bytes;
    shared.with(|sim| {
        sim.disk_mut(bad_device)
            .faults
            .write_error_ranges
            .push(au_start..au_start + s.au_bytes);
    });
    // A write over extents 0 and 1, beside others in flight.
    let fresh = noise(&mut rng, MIB as usize);
    let others = noise(&mut rng, 2 * 256 * 1024);
    submit(&mut io, write_req(0, 1, 3 * MIB, &others[..256 * 1024]));
    submit(&mut io, write_req(0, 2, MIB / 2, &fresh));
    submit(&mut io, write_req(0, 3, 6 * MIB, &others[256 * 1024..]));
    let done = drain(&mut io);
    for (tag, c) in &done {
        assert_eq!(
            c.result,
            Ok(c.buf.as_ref().unwrap().len() as u64),
            "tag {tag}"
        );
    }
    model[(MIB / 2) as usize..(MIB / 2 + MIB) as usize].copy_from_slice(&fresh);
    model[(3 * MIB) as usize..(3 * MIB + 256 * 1024) as usize]
        .copy_from_slice(&others[..256 * 1024]);
    model[(6 * MIB) as usize..(6 * MIB + 256 * 1024) as usize]
        .copy_from_slice(&others[256 * 1024..]);
    let failed_writes = shared.with(|sim| {
        sim.events()
            .iter()
            .filter(|e| {
                matches!(e, cairn_io_sim::FaultEvent::WriteError { device, .. } if *device == bad_device)
            })
            .count()
    });
    assert!(failed_writes >= 1, "the fault fired");
    let offline = live.meta(|g| g.disks_taken_offline().to_vec()).unwrap();
    assert_eq!(offline.len(), 1, "{offline:?}");
    assert!(offline[0].starts_with(&format!("D{bad} ")), "{offline:?}");
    assert!(!live.plane().disks().is_online(bad));

    // The failed copy kept the old bytes: a read from it would show them.
    assert!(read_ok(&mut io, 0, MIB / 2, MIB) == fresh);
    // Make sure: everything the file has on that disk becomes garbage
    // (durably, so the simulator's pending writes do not hide it).
    assert!(run(
        &mut io,
        Request {
            device: DeviceId(0),
            tag: 5,
            op: Op::Flush
        }
    )
    .result
    .is_ok());
    let s = snap(&live, number);
    shared.with(|sim| {
        for extent in s.extents() {
            for c in extent.copies().iter().filter(|c| c.disk == bad) {
                sim.scribble(
                    bad_device,
                    u64::from(c.au) * s.au_bytes,
                    &vec![0xEE; s.au_bytes as usize],
                );
            }
        }
    });
    // Reads at depth, of every size, and through a data handle.
    for tag in 0..16u64 {
        submit(&mut io, read_req(0, tag, tag * MIB / 2, MIB / 2));
    }
    for (tag, c) in drain(&mut io) {
        let at = (tag * MIB / 2) as usize;
        assert_eq!(c.result, Ok(MIB / 2));
        assert!(
            c.buf.unwrap()[..] == model[at..at + (MIB / 2) as usize],
            "read {tag}"
        );
    }
    assert!(read_ok(&mut io, 0, 0, SIZE) == model);
    let mut h = live.handle(8).unwrap();
    let mut back = vec![0u8; SIZE as usize];
    h.read(number, 0, &mut back).unwrap();
    assert!(back == model);
    // A later write goes to the copy left, and takes nothing else offline.
    let later = noise(&mut rng, 64 * 1024);
    let c = run(&mut io, write_req(0, 9, 0, &later));
    assert_eq!(c.result, Ok(64 * 1024));
    model[..64 * 1024].copy_from_slice(&later);
    assert!(read_ok(&mut io, 0, 0, SIZE) == model);
    assert_eq!(live.meta(|g| g.disks_taken_offline().len()).unwrap(), 1);
}

/// A read whose primary copy fails is served from the other copy; once the
/// engine is idle, its next request has the bad copy rewritten.
#[test]
fn a_read_failing_on_its_primary_is_served_by_the_other_copy_which_repairs_it() {
    const SIZE: u64 = 4 * MIB;
    let (shared, ids, live) = live_group(13, 256);
    let number = create(&live, "r", SIZE, None, true);
    let mut io = file_io(&shared, &live, &[number], 8);
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let model = noise(&mut rng, SIZE as usize);
    for i in 0..4u64 {
        submit(
            &mut io,
            write_req(
                0,
                i,
                i * MIB,
                &model[(i * MIB) as usize..((i + 1) * MIB) as usize],
            ),
        );
    }
    assert!(drain(&mut io).values().all(|c| c.result.is_ok()));
    assert!(run(
        &mut io,
        Request {
            device: DeviceId(0),
            tag: 9,
            op: Op::Flush
        }
    )
    .result
    .is_ok());

    // Extent 0's primary holds garbage and its reads fail.
    let s = snap(&live, number);
    let primary = s.extent(0).unwrap().copies()[0];
    let device = ids[usize::from(primary.disk)];
    let au_start = u64::from(primary.au) * s.au_bytes;
    let garbage = vec![0xEEu8; MIB as usize];
    shared.with(|sim| {
        sim.scribble(device, au_start, &garbage);
        assert!(sim.contents(device, au_start, MIB as usize) == garbage);
        sim.disk_mut(device)
            .faults
            .read_error_ranges
            .push(au_start..au_start + s.au_bytes);
    });
    // One piece (into the caller's own buffer), two pieces (one each side of
    // the extent boundary), and one elsewhere, all in flight together.
    let ranges = [
        (128 * 1024, 64 * 1024),
        (MIB - 256 * 1024, 512 * 1024),
        (2 * MIB + 4096, 64 * 1024),
    ];
    for (tag, (offset, len)) in ranges.iter().enumerate() {
        submit(&mut io, read_req(0, tag as u64, *offset, *len));
    }
    let done = drain(&mut io);
    for (tag, (offset, len)) in ranges.iter().enumerate() {
        let c = &done[&(tag as u64)];
        assert_eq!(c.result, Ok(*len), "read {tag}");
        let at = *offset as usize;
        assert!(
            c.buf.as_ref().unwrap()[..] == model[at..at + *len as usize],
            "read {tag}: the other copy's bytes"
        );
    }
    let read_errors = shared.with(|sim| {
        sim.events()
            .iter()
            .filter(|e| matches!(e, cairn_io_sim::FaultEvent::ReadError { device: d, .. } if *d == device))
            .count()
    });
    assert!(read_errors >= 2, "both reads tried the primary first");
    // A failed read is no failed disk.
    assert!(live.meta(|g| g.disks_taken_offline().is_empty()).unwrap());
    assert!(live.plane().disks().is_online(primary.disk));

    // The next request on the idle engine has the bad copy rewritten.
    assert!(read_ok(&mut io, 0, 3 * MIB, 4096) == model[(3 * MIB) as usize..][..4096]);
    shared.with(|sim| sim.disk_mut(device).faults.read_error_ranges.clear());
    for (offset, len) in [
        (128 * 1024u64, 64 * 1024u64),
        (MIB - 256 * 1024, 256 * 1024),
    ] {
        let held = shared.with(|sim| sim.contents(device, au_start + offset, len as usize));
        assert!(
            held[..] == model[offset as usize..(offset + len) as usize],
            "primary copy at {offset}+{len} rewritten"
        );
    }
    assert!(read_ok(&mut io, 0, 128 * 1024, 64 * 1024) == model[128 * 1024..192 * 1024]);
}

/// A flush makes completed writes durable on every copy; in one batch, a
/// misaligned request, one past the end of the file and one to an unknown
/// device fail, each alone, with their buffers back, and the rest succeed.
#[test]
fn a_flush_completes_and_bad_requests_fail_alone() {
    const SIZE: u64 = 4 * MIB;
    let (shared, _ids, live) = live_group(14, 256);
    let number = create(&live, "f", SIZE, None, true);
    let mut io = file_io(&shared, &live, &[number], 16);
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    let data = noise(&mut rng, 3 * MIB as usize / 2);
    let at = MIB / 2;
    assert_eq!(
        run(&mut io, write_req(0, 1, at, &data)).result,
        Ok(data.len() as u64)
    );
    let s = snap(&live, number);
    let devices = live.meta(|g| g.member_devices()).unwrap();
    let durable = |shared: &SharedSim| {
        shared.with(|sim| {
            places(&s, at, data.len() as u64).into_iter().flatten().all(
                |(disk, on_disk, from, len)| {
                    sim.durable_contents(devices[&disk], on_disk, len)[..] == data[from..from + len]
                },
            )
        })
    };
    assert!(!durable(&shared), "not durable before the flush");
    let c = run(
        &mut io,
        Request {
            device: DeviceId(0),
            tag: 2,
            op: Op::Flush,
        },
    );
    assert_eq!(c.tag, 2);
    assert!(c.result.is_ok(), "{:?}", c.result);
    assert!(durable(&shared), "every copy durable after the flush");

    let last = noise(&mut rng, SECTOR as usize);
    assert!(run(&mut io, write_req(0, 3, SIZE - SECTOR, &last))
        .result
        .is_ok());
    let tail = noise(&mut rng, 2 * SECTOR as usize);
    let batch = vec![
        read_req(0, 10, at, 256 * 1024),
        read_req(0, 11, 512, SECTOR),
        read_req(0, 12, SIZE - SECTOR, 2 * SECTOR),
        write_req(0, 13, 0, &data[..64 * 1024]),
        write_req(0, 14, SIZE - SECTOR, &tail),
        read_req(9, 15, 0, SECTOR),
        write_req(0, 16, 4096, &data[..1000]),
        read_req(0, 17, SIZE - SECTOR, SECTOR),
        Request {
            device: DeviceId(0),
            tag: 18,
            op: Op::Flush,
        },
    ];
    for r in batch {
        submit(&mut io, r);
    }
    let done = drain(&mut io);
    assert_eq!(done.len(), 9);
    assert!(done[&10].buf.as_ref().unwrap()[..] == data[..256 * 1024]);
    assert_eq!(done[&10].result, Ok(256 * 1024));
    assert!(
        matches!(done[&11].result, Err(IoError::Misaligned { .. })),
        "{:?}",
        done[&11].result
    );
    assert!(
        matches!(done[&12].result, Err(IoError::OutOfRange { .. })),
        "{:?}",
        done[&12].result
    );
    assert_eq!(done[&13].result, Ok(64 * 1024));
    assert!(
        matches!(done[&14].result, Err(IoError::OutOfRange { .. })),
        "{:?}",
        done[&14].result
    );
    assert_eq!(done[&15].result, Err(IoError::UnknownDevice(DeviceId(9))));
    assert_eq!(done[&15].device, DeviceId(9));
    assert!(
        matches!(done[&16].result, Err(IoError::Misaligned { .. })),
        "{:?}",
        done[&16].result
    );
    assert_eq!(done[&17].result, Ok(SECTOR));
    assert!(
        done[&17].buf.as_ref().unwrap()[..] == last[..],
        "the failed write wrote nothing"
    );
    assert!(done[&18].result.is_ok());
    for (tag, len) in [
        (11, SECTOR),
        (12, 2 * SECTOR),
        (14, 2 * SECTOR),
        (15, SECTOR),
        (16, 1000),
    ] {
        assert_eq!(
            done[&tag].buf.as_ref().unwrap().len() as u64,
            len,
            "tag {tag}: buffer back"
        );
    }
    assert!(read_ok(&mut io, 0, 0, 64 * 1024) == data[..64 * 1024]);
    assert!(
        read_ok(&mut io, 0, 4096, 4096) == data[4096..8192],
        "the misaligned write wrote nothing"
    );
    assert_eq!(io.in_flight(), 0);
    assert!(live.meta(|g| g.disks_taken_offline().is_empty()).unwrap());
}

/// At its depth the engine hands a request back whole; one its inner engine
/// could never hold fails instead of being handed back for ever.
#[test]
fn a_request_is_refused_whole_while_full_and_failed_when_it_never_fits() {
    const SIZE: u64 = 4 * MIB;
    // The simulator (every engine's inner one) takes three requests at once.
    let (shared, _ids, live) = live_group(15, 3);
    let number = create(&live, "q", SIZE, None, true);
    let mut io = file_io(&shared, &live, &[number], 2);
    assert_eq!(io.depth_max(), 2);
    let mut h = live.handle(8).unwrap();

    // A mirrored write is two inner requests: a second does not fit beside it.
    submit(&mut io, write_req(0, 1, 0, &[0x11; 4096]));
    let refused = io.submit(write_req(0, 2, 8192, &[0xAB; 4096]));
    let Err(SubmitError::QueueFull(refused)) = refused else {
        panic!("a second mirrored write fits in three inner requests: {refused:?}");
    };
    assert_eq!((refused.device, refused.tag), (DeviceId(0), 2));
    let Op::Write {
        offset_bytes, buf, ..
    } = &refused.op
    else {
        panic!("{:?}", refused.op)
    };
    assert_eq!(*offset_bytes, 8192);
    assert!(buf[..] == [0xAB; 4096], "handed back untouched");
    assert_eq!(io.in_flight(), 1, "nothing of the refused one is in flight");
    assert_eq!(io.stats().requests, 1);
    // A read goes to one copy: it fits beside the write. Then the engine is
    // at its own depth, with the inner one full too.
    submit(&mut io, read_req(0, 3, 16384, 4096));
    assert_eq!(io.in_flight(), 2);
    let done = drain(&mut io);
    assert_eq!(done.keys().copied().collect::<Vec<_>>(), vec![1, 3]);
    assert!(done.values().all(|c| c.result.is_ok()));
    let mut at_refused = vec![0u8; 4096];
    h.read(number, 8192, &mut at_refused).unwrap();
    assert_eq!(at_refused, vec![0u8; 4096], "the refused write never ran");

    // The engine's own depth: two reads fill it (the inner one has room).
    submit(&mut io, read_req(0, 4, 0, 4096));
    submit(&mut io, read_req(0, 5, 4096, 4096));
    let Err(SubmitError::QueueFull(back)) = io.submit(read_req(0, 6, 0, 4096)) else {
        panic!("a third request beyond depth 2")
    };
    assert_eq!(back.tag, 6);
    // A completion not yet popped still counts.
    io.wait(2).unwrap();
    assert!(matches!(
        io.submit(read_req(0, 6, 0, 4096)),
        Err(SubmitError::QueueFull(_))
    ));
    let done = drain(&mut io);
    assert!(done[&4].buf.as_ref().unwrap()[..] == [0x11; 4096]);
    assert!(done[&5].result.is_ok());
    // Space again: the refused write goes in.
    assert_eq!(run(&mut io, refused).result, Ok(4096));
    assert!(read_ok(&mut io, 0, 8192, 4096) == [0xAB; 4096]);

    // Across an extent boundary, mirrored: four inner requests, more than
    // the inner engine can ever hold. It fails at once with its buffer.
    io.submit(write_req(0, 7, MIB - 4096, &[0x77; 8192]))
        .unwrap();
    let c = io.pop_completion().unwrap();
    assert_eq!(c.tag, 7);
    assert_eq!(c.result, Err(IoError::Engine { errno: E2BIG }));
    assert_eq!(c.buf.unwrap().len(), 8192);
    // A read over four extents: four inner requests too.
    io.submit(read_req(0, 8, MIB - 4096, 2 * MIB + 8192))
        .unwrap();
    let c = io.pop_completion().unwrap();
    assert_eq!(c.tag, 8);
    assert_eq!(c.result, Err(IoError::Engine { errno: E2BIG }));
    assert_eq!(io.in_flight(), 0);
    let mut around = vec![0u8; 8192];
    h.read(number, MIB - 4096, &mut around).unwrap();
    assert_eq!(
        around,
        vec![0u8; 8192],
        "the write that never fits wrote nothing"
    );
    // But a read over three extents does fit.
    assert!(read_ok(&mut io, 0, MIB - 4096, MIB + 8192)
        .iter()
        .all(|b| *b == 0));

    // A flush goes to each of the four member disks: it can never fit
    // either, and must not be handed back for ever on an idle engine.
    match io.submit(Request {
        device: DeviceId(0),
        tag: 9,
        op: Op::Flush,
    }) {
        Ok(()) => {}
        Err(SubmitError::QueueFull(_)) => {
            panic!("a flush refused on an idle engine would be refused for ever")
        }
    }
    let done = drain(&mut io);
    assert_eq!(done[&9].result, Err(IoError::Engine { errno: E2BIG }));
}

/// A write into an extent never written takes the slow path (after what is
/// in flight finishes): its bytes read back, the rest of its extent reads as
/// zeros on every copy even where the AUs held other bytes, and the extent is
/// marked initialised. Other extents stay as they were.
#[test]
fn a_first_write_zeroes_its_extent_and_marks_it_initialised() {
    const SIZE: u64 = 4 * MIB;
    let (shared, ids, live) = live_group(16, 256);
    let fresh = create(&live, "fresh", SIZE, None, false);
    let ready = create(&live, "ready", SIZE, None, true);
    let mut io = file_io(&shared, &live, &[fresh, ready], 8);
    let mut rng = ChaCha8Rng::seed_from_u64(16);
    let s = snap(&live, fresh);
    assert!(s.extents().all(|e| !e.initialized));
    // Every copy of every extent of the new file holds an earlier file's bytes.
    shared.with(|sim| {
        for e in s.extents() {
            for c in e.copies() {
                sim.scribble(
                    ids[usize::from(c.disk)],
                    u64::from(c.au) * s.au_bytes,
                    &vec![0x5A; s.au_bytes as usize],
                );
            }
        }
    });
    // Never written: zeros, whatever the AUs hold.
    assert!(read_ok(&mut io, 0, 0, SIZE).iter().all(|b| *b == 0));

    // A write on the other file in flight, then the first write into extent 1.
    let other = noise(&mut rng, 512 * 1024);
    submit(&mut io, write_req(1, 1, MIB + 4096, &other));
    let first = noise(&mut rng, 64 * 1024);
    let at = MIB + 256 * 1024;
    submit(&mut io, write_req(0, 2, at, &first));
    let done = drain(&mut io);
    assert_eq!(done[&1].result, Ok(512 * 1024));
    assert_eq!(done[&2].result, Ok(64 * 1024));
    assert!(done[&2].buf.as_ref().unwrap()[..] == first[..]);

    let mut model = vec![0u8; SIZE as usize];
    model[at as usize..at as usize + first.len()].copy_from_slice(&first);
    let mut h = live.handle(8).unwrap();
    let s = h.file(fresh).unwrap();
    assert!(
        s.extent(1).unwrap().initialized,
        "extent 1 marked initialised"
    );
    for e in [0, 2, 3] {
        assert!(!s.extent(e).unwrap().initialized, "extent {e} untouched");
    }
    let mut back = vec![0u8; SIZE as usize];
    h.read(fresh, 0, &mut back).unwrap();
    assert!(back == model, "the data, and zeros around it");
    // Both copies of extent 1: zeros but for the data.
    let devices = live.meta(|g| g.member_devices()).unwrap();
    shared.with(|sim| {
        for c in s.extent(1).unwrap().copies() {
            let held = sim.contents(devices[&c.disk], u64::from(c.au) * s.au_bytes, MIB as usize);
            assert!(
                held[..] == model[MIB as usize..2 * MIB as usize],
                "copy on disk {}",
                c.disk
            );
        }
    });
    let mut back = vec![0u8; other.len()];
    h.read(ready, MIB + 4096, &mut back).unwrap();
    assert!(back == other, "the write in flight before the slow path");

    // A write over an initialised extent and a fresh one: both paths at once.
    let span = noise(&mut rng, 256 * 1024);
    let at = 2 * MIB - 128 * 1024;
    assert_eq!(
        run(&mut io, write_req(0, 3, at, &span)).result,
        Ok(256 * 1024)
    );
    model[at as usize..at as usize + span.len()].copy_from_slice(&span);
    let s = h.file(fresh).unwrap();
    assert!(s.extent(2).unwrap().initialized);
    assert!(!s.extent(0).unwrap().initialized && !s.extent(3).unwrap().initialized);
    assert!(read_ok(&mut io, 0, 0, SIZE) == model);
    drop(h);
    // The file reads right through every copy once all are written.
    for e in [0u64, 3] {
        assert_eq!(
            run(&mut io, write_req(0, 4, e * MIB, &[0u8; 4096])).result,
            Ok(4096)
        );
    }
    assert_copies_hold(&shared, &live, fresh, &model);
    let report = live.meta(|g| g.check(false)).unwrap().unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}

/// On a group mounted read-only, a write fails — into an extent written
/// before (the fast path) as into one never written (the slow path) — and
/// no copy changes.
#[test]
fn writes_on_a_read_only_group_fail_and_change_no_copy() {
    const SIZE: u64 = 2 * MIB;
    let (shared, ids, live) = live_group(17, 256);
    let written = create(&live, "written", SIZE, None, true);
    let fresh = create(&live, "fresh", SIZE, None, false);
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let model = noise(&mut rng, SIZE as usize);
    let mut h = live.handle(8).unwrap();
    h.write(written, 0, &model).unwrap();
    h.sync().unwrap();
    drop(h);
    live.dismount().unwrap();

    // Mounted read-only, live (the group borrows its engine for ever).
    let engine: &'static mut dyn IoEngine = Box::leak(Box::new(shared.handle()));
    let (g, _) = group::mount_read_only(engine, &ids, &GroupSelector::Name("FIO".into())).unwrap();
    let source = shared.clone();
    let live = LiveGroup::new(
        g,
        Box::new(SameDevices(move |_depth| {
            Box::new(source.handle()) as Box<dyn IoEngine>
        })),
    );
    assert!(live.meta(|g| g.is_read_only()).unwrap());
    let mut io = file_io(&shared, &live, &[written, fresh], 8);
    submit(&mut io, write_req(0, 1, 4096, &[0xCC; 8192]));
    submit(&mut io, write_req(0, 2, MIB - 4096, &[0xCD; 8192]));
    submit(&mut io, write_req(1, 3, 0, &[0xCE; 4096]));
    let done = drain(&mut io);
    for (tag, c) in &done {
        assert!(
            c.result.is_err(),
            "write {tag} on a read-only group: {:?}",
            c.result
        );
        assert!(c.buf.is_some(), "write {tag}: buffer back");
    }
    assert_copies_hold(&shared, &live, written, &model);
    assert!(read_ok(&mut io, 0, 0, SIZE) == model);
    assert!(read_ok(&mut io, 1, 0, SIZE).iter().all(|b| *b == 0));
    assert!(live
        .plane()
        .file(fresh)
        .unwrap()
        .extents()
        .all(|e| !e.initialized));
}

/// A FileIo dropped with requests in flight (a worker giving up) lets its
/// guard go, as a dropped data handle does: else its slot stays at the epoch
/// of those requests and holds every AU freed after it back from reuse for
/// the rest of the mount. What it had in flight still finishes first.
#[test]
fn a_file_io_dropped_with_requests_in_flight_holds_no_freed_aus_back() {
    const SIZE: u64 = 4 * MIB;
    let (shared, _ids, live) = live_group(19, 256);
    let number = create(&live, "g", SIZE, None, true);
    let plane = live.plane().clone();
    assert_eq!(plane.oldest_running(), u64::MAX, "nothing runs");
    let mut io = file_io(&shared, &live, &[number], 8);
    let data = noise(&mut ChaCha8Rng::seed_from_u64(19), 64 * 1024);
    submit(&mut io, read_req(0, 1, 0, 64 * 1024));
    submit(&mut io, write_req(0, 2, MIB, &data));
    assert_ne!(
        plane.oldest_running(),
        u64::MAX,
        "requests in flight hold freed AUs back"
    );
    drop(io);
    assert_eq!(
        plane.oldest_running(),
        u64::MAX,
        "a dropped engine holds nothing back"
    );
    let mut h = live.handle(8).unwrap();
    let mut back = vec![0u8; data.len()];
    h.read(number, MIB, &mut back).unwrap();
    assert!(back == data, "the write in flight finished");
    let mut model = vec![0u8; SIZE as usize];
    model[MIB as usize..MIB as usize + data.len()].copy_from_slice(&data);
    assert_copies_hold(&shared, &live, number, &model);
}

/// A FileIo keeps the shared latches of its writes in flight while its
/// caller submits more. A repair elsewhere takes its extents' latches
/// exclusively, in order, holding the first while it waits for the next: if
/// that next is held by a write in flight here, and the caller's next write
/// wants the first, `submit` blocks on the latch and never reaps the write
/// the repair waits for. Neither side ever moves on.
#[test]
fn a_write_waiting_for_a_latch_never_holds_up_the_repair_it_waits_for() {
    use std::sync::mpsc;
    use std::time::{Duration, Instant};
    const SIZE: u64 = 4 * MIB;
    let (shared, ids, live) = live_group(18, 256);
    let number = create(&live, "d", SIZE, None, true);
    let mut rng = ChaCha8Rng::seed_from_u64(18);
    let model = noise(&mut rng, SIZE as usize);
    let mut h = live.handle(8).unwrap();
    h.write(number, 0, &model).unwrap();
    // The primaries of extents 0 and 1 fail their reads: a read over both
    // repairs both, latching extent 0, then extent 1.
    let s = snap(&live, number);
    shared.with(|sim| {
        for e in 0..2 {
            let c = s.extent(e).unwrap().copies()[0];
            let at = u64::from(c.au) * s.au_bytes;
            sim.disk_mut(ids[usize::from(c.disk)])
                .faults
                .read_error_ranges
                .push(at..at + s.au_bytes);
        }
    });
    let (to_writer, writer_rx) = mpsc::channel::<()>();
    let (writer_tx, from_writer) = mpsc::channel::<&'static str>();
    let writer = {
        let mut io = file_io(&shared, &live, &[number], 8);
        std::thread::spawn(move || {
            // In flight, holding extent 1's latch shared.
            submit(&mut io, write_req(0, 1, MIB + 4096, &[0x31; 4096]));
            writer_tx.send("first in flight").unwrap();
            writer_rx.recv().unwrap();
            // Wants extent 0's latch, held by the repair.
            submit(&mut io, write_req(0, 2, 4096, &[0x32; 4096]));
            let done = drain(&mut io);
            assert!(done.values().all(|c| c.result.is_ok()));
            writer_tx.send("done").unwrap();
        })
    };
    assert_eq!(from_writer.recv().unwrap(), "first in flight");
    let reader = std::thread::spawn(move || {
        let mut back = vec![0u8; 128 * 1024];
        h.read(number, MIB - 64 * 1024, &mut back).unwrap();
    });
    // Until the repair holds extent 0 (and waits for extent 1).
    let plane = live.plane().clone();
    let key = (number, s.incarnation, 0u64);
    let start = Instant::now();
    while let Some(probe) = plane.try_latch(vec![(key, Hold::Exclusive)]) {
        drop(probe);
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no repair started"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    to_writer.send(()).unwrap();
    assert_eq!(
        from_writer.recv_timeout(Duration::from_secs(10)),
        Ok("done"),
        "the writer and the repair wait for each other"
    );
    writer.join().unwrap();
    reader.join().unwrap();
}

/// A drain (here, a disk taken offline) waits for the data operations that
/// began before it; one of them is a FileIo's read in flight. When that read
/// completes, the FileIo's guard moves on and must wake the drain, as a data
/// handle's does: a FileIo that only stored its slot left the drain asleep
/// for its whole bound (four `disk_io_timeout`s; here four hours).
#[test]
fn a_drain_waiting_for_a_file_io_read_is_woken_when_it_completes() {
    use std::sync::mpsc;
    use std::time::Duration;
    const SIZE: u64 = 4 * MIB;
    let (shared, _ids, live) = live_group(20, 256);
    live.meta(|g| g.set_attributes(&[("disk_io_timeout".into(), "60m".into())]))
        .unwrap()
        .unwrap();
    let number = create(&live, "w", SIZE, None, true);
    let plane = live.plane().clone();
    let mut io = file_io(&shared, &live, &[number], 8);
    submit(&mut io, read_req(0, 1, 0, 64 * 1024));
    let epoch = plane.epoch();
    let (tx, rx) = mpsc::channel();
    let offline = {
        let live = live.clone();
        let name = live.meta(|g| g.disks()[3].label.clone()).unwrap();
        std::thread::spawn(move || {
            let done = live.offline_disks(&[name], None);
            tx.send(done.map(|d| d.len()).map_err(|e| e.to_string()))
                .unwrap();
        })
    };
    // The drain has begun once it moved the epoch on.
    let start = std::time::Instant::now();
    while plane.epoch() == epoch {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the offline never began its drain"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let done = drain(&mut io);
    assert_eq!(done[&1].result, Ok(64 * 1024));
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(60))
            .map_err(|e| e.to_string()),
        Ok(Ok(1)),
        "the drain was not woken when the read it waited for completed"
    );
    offline.join().unwrap();
}

/// An inner engine that hands back no buffer with a failed read, as io_uring
/// does for a read that timed out while the kernel still held its buffer.
struct LosesFailedReadBuffers(Box<dyn IoEngine>);

impl IoEngine for LosesFailedReadBuffers {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn geometry(&self, device: DeviceId) -> Option<&cairn_io::Geometry> {
        self.0.geometry(device)
    }
    fn submit(&mut self, request: Request) -> Result<(), SubmitError> {
        self.0.submit(request)
    }
    fn wait(&mut self, min_completions: usize) -> Result<(), cairn_io::IoError> {
        self.0.wait(min_completions)
    }
    fn wait_timeout(
        &mut self,
        min_completions: usize,
        timeout: std::time::Duration,
    ) -> Result<(), cairn_io::IoError> {
        self.0.wait_timeout(min_completions, timeout)
    }
    fn pop_completion(&mut self) -> Option<Completion> {
        let mut c = self.0.pop_completion()?;
        if c.kind == cairn_io::OpKind::Read && c.result.is_err() {
            c.buf = None;
        }
        Some(c)
    }
    fn set_io_timeout(&mut self, timeout: Option<std::time::Duration>) {
        self.0.set_io_timeout(timeout);
    }
    fn in_flight(&self) -> usize {
        self.0.in_flight()
    }
    fn depth_max(&self) -> usize {
        self.0.depth_max()
    }
    fn stats(&self) -> cairn_io::EngineStats {
        self.0.stats()
    }
}

/// A read of one piece goes into the caller's own buffer. When that read
/// fails and the engine keeps the buffer (a read timed out with it still in
/// the kernel), the next copy's bytes must still reach the caller: they were
/// read into a buffer of their own and thrown away, and the read completed
/// `Ok` with no buffer at all.
#[test]
fn a_read_whose_failed_primary_kept_its_buffer_is_served_whole_by_the_other_copy() {
    const SIZE: u64 = 4 * MIB;
    let (shared, ids, live) = live_group(21, 256);
    let number = create(&live, "t", SIZE, None, true);
    let model = noise(&mut ChaCha8Rng::seed_from_u64(21), SIZE as usize);
    live.handle(8).unwrap().write(number, 0, &model).unwrap();
    let s = snap(&live, number);
    let primary = s.extent(0).unwrap().copies()[0];
    let au_start = u64::from(primary.au) * s.au_bytes;
    shared.with(|sim| {
        sim.disk_mut(ids[usize::from(primary.disk)])
            .faults
            .read_error_ranges
            .push(au_start..au_start + s.au_bytes);
    });
    let disks = live.meta(|g| g.member_devices()).unwrap();
    let mapping = Mapping::GroupFile {
        group: live.clone(),
        number,
        disks,
        geometry: geometry(s.size_bytes, s.sector_bytes, s.sector_bytes, MIB as u32),
    };
    let mut io = FileIo::new(
        Box::new(LosesFailedReadBuffers(Box::new(shared.handle()))),
        vec![mapping],
        8,
    );
    let c = run(&mut io, read_req(0, 1, 64 * 1024, 64 * 1024));
    assert_eq!(c.result, Ok(64 * 1024));
    let buf = c.buf.expect("a read that succeeded hands back its bytes");
    assert!(
        buf[..] == model[64 * 1024..128 * 1024],
        "the other copy's bytes reached the caller"
    );
}
