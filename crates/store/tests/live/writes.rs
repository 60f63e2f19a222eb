//! Data threads writing at once: first writes into one extent, writes of one
//! block or of slices sharing sectors, a disk lost under writers, metadata
//! churn beside them, punches beside writes.

use super::*;

/// Two threads make the first writes into one never-written extent at once,
/// each to its own block. The first write zeroes the rest of the extent; if
/// the second zeroed after the first was acknowledged, the first block would
/// read back as zeros. The extent latch makes that impossible.
#[test]
fn two_first_writers_into_one_extent_never_zero_each_other() {
    let (_shared, _ids, live) = live_group(1);
    for round in 0..40u32 {
        let name = format!("f{round}");
        let number = live
            .meta(|g| g.create_file(&path(&name), MIB, &CreateOptions::default()))
            .unwrap()
            .unwrap()
            .number;
        let start = Arc::new(Barrier::new(2));
        let threads: Vec<_> = (0..2u8)
            .map(|k| {
                let live = live.clone();
                let start = start.clone();
                std::thread::spawn(move || {
                    let mut h = live.handle(64).unwrap();
                    start.wait();
                    h.write(number, u64::from(k) * 512 * 1024, &block(k + 1, 8192))
                        .unwrap();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut h = live.handle(64).unwrap();
        for k in 0..2u8 {
            let mut back = vec![0u8; 8192];
            h.read(number, u64::from(k) * 512 * 1024, &mut back)
                .unwrap();
            assert_eq!(
                back,
                block(k + 1, 8192),
                "round {round}: writer {k}'s block"
            );
        }
    }
}

/// Writers of one block at once, each with its own handle, interleaved by
/// the turnstile from each seed (it may switch between the copies of one
/// write): every copy ends with the same write, as scrub, reading them all,
/// finds. Writes of the same bytes go one at a time (the extent latch's
/// `Hold::Write`); run together, one write could reach the first disk
/// first and the other the second, and the copies would keep different
/// writes.
#[test]
fn writers_of_one_block_at_once_leave_every_copy_alike() {
    use cairn_io_sim::{Actor, Turnstile};
    use cairn_store::group::scrub::ScrubRepair;
    const SEEDS: u64 = 40;
    for seed in 1..=SEEDS {
        let (_shared, _ids, live) = live_group(seed);
        let number = live
            .meta(|g| g.create_file(&path("one"), MIB, &CreateOptions::default()))
            .unwrap()
            .unwrap()
            .number;
        // Written whole first: the writes below are plain writes (a first
        // write holds its extent alone).
        live.handle(64)
            .unwrap()
            .write(number, 0, &block(0xEE, MIB as usize))
            .unwrap();
        let actors: Vec<Actor<'_>> = (1..=2u8)
            .map(|k| {
                let live = live.clone();
                Box::new(move || {
                    let mut h = live.handle(64).unwrap();
                    for round in 0..6u8 {
                        h.write(number, 64 * 1024, &block(k << 4 | round, 8192))
                            .unwrap();
                    }
                }) as Actor<'_>
            })
            .collect();
        let panics = Turnstile::new(seed).run(actors);
        assert!(
            panics.iter().all(Option::is_none),
            "seed {seed}: {panics:?}"
        );
        let report = live
            .scrub(2, ScrubRepair::new(false, None), &mut |_| {})
            .unwrap();
        assert!(
            report.problems.is_empty(),
            "seed {seed}: the copies keep different writes: {:?}",
            report.problems
        );
    }
}

/// Writers of slices that share sectors (`write_bytes`: a read-modify-write
/// of each partial sector), at once: the extent's read-modify-write latch
/// keeps every writer's bytes; without it, one writer's write-back of a
/// sector it read before another's write lands would undo that write.
#[test]
fn writers_of_slices_that_share_sectors_keep_every_byte() {
    let (_shared, _ids, live) = live_group(3);
    let number = live
        .meta(|g| g.create_file(&path("slices"), MIB, &CreateOptions::default()))
        .unwrap()
        .unwrap()
        .number;
    const SLICE: usize = 700;
    const WRITERS: usize = 4;
    for round in 0..20u8 {
        let start = Arc::new(Barrier::new(WRITERS));
        let threads: Vec<_> = (0..WRITERS)
            .map(|w| {
                let live = live.clone();
                let start = start.clone();
                std::thread::spawn(move || {
                    let mut h = live.handle(64).unwrap();
                    start.wait();
                    // Writer w's slices: every WRITERS-th one, all in the
                    // first 64 KiB (each sector is shared by several).
                    for k in (w..64 * 1024 / SLICE).step_by(WRITERS) {
                        let tag = round.wrapping_mul(16).wrapping_add(w as u8 + 1);
                        h.write_bytes(number, (k * SLICE) as u64, &[tag; SLICE])
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut h = live.handle(64).unwrap();
        let mut back = vec![0u8; 64 * 1024];
        h.read(number, 0, &mut back).unwrap();
        for (k, slice) in back.chunks(SLICE).enumerate().take(64 * 1024 / SLICE) {
            let tag = round.wrapping_mul(16).wrapping_add((k % WRITERS) as u8 + 1);
            assert!(
                slice.iter().all(|b| *b == tag),
                "round {round}: slice {k} (writer {})",
                k % WRITERS
            );
        }
    }
}

/// Threads write their own files while one disk disappears: every write is
/// acknowledged (normal redundancy keeps a copy), the disk is taken offline
/// once, and after a remount every byte reads back and the check is clean.
#[test]
fn a_disk_lost_under_concurrent_writers_goes_offline_once_and_nothing_is_lost() {
    let (shared, ids, live) = live_group(2);
    let files: Vec<u32> = (0..4)
        .map(|i| {
            live.meta(|g| {
                g.create_file(&path(&format!("w{i}")), 4 * MIB, &CreateOptions::default())
            })
            .unwrap()
            .unwrap()
            .number
        })
        .collect();
    let start = Arc::new(Barrier::new(files.len() + 1));
    let threads: Vec<_> = files
        .iter()
        .enumerate()
        .map(|(k, number)| {
            let live = live.clone();
            let start = start.clone();
            let number = *number;
            std::thread::spawn(move || {
                let mut h = live.handle(64).unwrap();
                start.wait();
                for i in 0..64u64 {
                    h.write(number, i * 64 * 1024, &block(k as u8 ^ i as u8, 64 * 1024))
                        .unwrap();
                }
                h.sync().unwrap();
            })
        })
        .collect();
    start.wait();
    shared.with(|sim| sim.lose_disk(ids[3]));
    for t in threads {
        t.join().unwrap();
    }
    let offline = live.meta(|g| g.disks_taken_offline().to_vec()).unwrap();
    assert!(offline.len() <= 1, "taken offline once: {offline:?}");
    live.dismount().unwrap();
    let live = mount_live(&shared, &ids);
    let mut h = live.handle(64).unwrap();
    for (k, number) in files.iter().enumerate() {
        for i in 0..64u64 {
            let mut back = vec![0u8; 64 * 1024];
            h.read(*number, i * 64 * 1024, &mut back).unwrap();
            assert_eq!(
                back,
                block(k as u8 ^ i as u8, 64 * 1024),
                "file {k} chunk {i}"
            );
        }
    }
    drop(h);
    let report = live.meta(|g| g.check(false)).unwrap().unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}

/// Files are created, grown, shrunk and removed while other threads write
/// and read their own file: the metadata changes never tear a reader's view,
/// and an AU freed by one file is never reused while a write through an older
/// view could still land in it, so the writers' file reads back exactly.
#[test]
fn metadata_churn_never_disturbs_data_threads() {
    let (_shared, _ids, live) = live_group(3);
    let number = live
        .meta(|g| g.create_file(&path("steady"), 8 * MIB, &CreateOptions::default()))
        .unwrap()
        .unwrap()
        .number;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let live = live.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut h = live.handle(16).unwrap();
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) || n < 20 {
                let p = path(&format!("churn{}", n % 3));
                let f = live
                    .meta(|g| {
                        let _ = g.remove(&p);
                        g.create_file(&p, (1 + n % 5) * MIB, &CreateOptions::default())
                            .unwrap()
                    })
                    .unwrap();
                h.write(f.number, 0, &block(n as u8, 4096)).unwrap();
                live.meta(|g| g.resize(&p, (1 + (n + 2) % 7) * MIB).unwrap())
                    .unwrap();
                n += 1;
            }
        })
    };
    let writers: Vec<_> = (0..2u64)
        .map(|k| {
            let live = live.clone();
            std::thread::spawn(move || {
                let mut h = live.handle(64).unwrap();
                for round in 0..8u64 {
                    for i in 0..32u64 {
                        let at = (k * 32 + i) * 64 * 1024;
                        h.write(number, at, &block((round + i) as u8, 64 * 1024))
                            .unwrap();
                        let mut back = vec![0u8; 64 * 1024];
                        h.read(number, at, &mut back).unwrap();
                        assert_eq!(back, block((round + i) as u8, 64 * 1024));
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    churn.join().unwrap();
    let report = live.meta(|g| g.check(false)).unwrap().unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}

/// A punched range (`fallocate` PUNCH_HOLE on a volume) reads as zeros:
/// the extents it covers whole are unwritten again and their AUs
/// discarded on every copy's disk; the parts of extents it covers in part
/// are zeroed in place on every copy (discarded where the disk reads
/// zeros after it), and a sector covered in part is read, patched and
/// written;
/// the rest of the file keeps its bytes, across a remount. A write into a
/// punched extent zeroes the rest of it first, as any first write does.
#[test]
fn a_punched_range_reads_as_zeros_and_its_whole_extents_are_discarded_on_every_copy() {
    let (shared, ids, live) = live_group(21);
    let size = 8 * MIB;
    let number = live
        .meta(|g| g.create_file(&path("vol"), size, &CreateOptions::default()))
        .unwrap()
        .unwrap()
        .number;
    let mut h = live.handle(64).unwrap();
    let mut expected = block(5, size as usize);
    h.write(number, 0, &expected).unwrap();
    let (offset, len) = (MIB / 2, 4 * MIB + 100);
    let done = h.punch(number, offset, len, true).unwrap();
    expected[offset as usize..(offset + len) as usize].fill(0);
    assert_eq!(done.extents, 3, "extents 1, 2 and 3 are covered whole");
    assert_eq!(done.discarded_bytes, 3 * MIB * 2, "both copies of each");
    assert_eq!(done.zeroed_bytes, MIB / 2 + MIB / 2 + 100);
    let mut back = vec![0u8; size as usize];
    h.read(number, 0, &mut back).unwrap();
    assert!(
        back == expected,
        "the range reads as zeros, the rest as written"
    );
    let snap = h.file(number).unwrap();
    let written: Vec<bool> = snap.extents().map(|e| e.initialized).collect();
    assert_eq!(written[..6], [true, false, false, false, true, true]);
    // On the disks: the punched extents' copies were discarded (the
    // simulated disk reads a discarded range as zeros); the first
    // extent's copies keep its first half.
    let mut raw = shared.handle();
    for e in 0..4u64 {
        for c in snap.extent(e).unwrap().copies() {
            let bytes = cairn_io::IoEngine::read_at(
                &mut raw,
                ids[usize::from(c.disk)],
                u64::from(c.au) * MIB,
                4096,
            )
            .unwrap();
            if e == 0 {
                assert_eq!(
                    &bytes[..],
                    &block(5, 4096)[..],
                    "extent 0 on disk {}",
                    c.disk
                );
                let half = cairn_io::IoEngine::read_at(
                    &mut raw,
                    ids[usize::from(c.disk)],
                    u64::from(c.au) * MIB + MIB / 2,
                    MIB as usize / 2,
                )
                .unwrap();
                assert!(
                    half.iter().all(|b| *b == 0),
                    "extent 0's second half zeroed in place"
                );
            } else {
                assert!(
                    bytes.iter().all(|b| *b == 0),
                    "extent {e} on disk {} discarded",
                    c.disk
                );
            }
        }
    }
    // Punching again finds no written extent to unwrite.
    let again = h.punch(number, offset, len, true).unwrap();
    assert_eq!((again.extents, again.discarded_bytes), (0, 0));
    // A first write into a punched extent: the rest of it reads as zeros.
    h.write(number, 2 * MIB + 8192, &block(6, 4096)).unwrap();
    expected[(2 * MIB + 8192) as usize..(2 * MIB + 12288) as usize]
        .copy_from_slice(&block(6, 4096));
    drop(h);
    live.dismount().unwrap();
    let live = mount_live(&shared, &ids);
    let mut h = live.handle(64).unwrap();
    let mut back = vec![0u8; size as usize];
    h.read(number, 0, &mut back).unwrap();
    assert!(back == expected, "after a remount");
    // A range past the end stops there; an empty one does nothing.
    let tail = h.punch(number, 7 * MIB, 4 * MIB, false).unwrap();
    assert_eq!((tail.extents, tail.discarded_bytes), (1, 0));
    assert_eq!(
        h.punch(number, size, MIB, true).unwrap(),
        Default::default()
    );
}

/// A punch racing a write into the same extent (one that patches partial
/// sectors): afterwards the extent holds the write's bytes or zeros, and
/// zeros everywhere else — never a byte from before the punch. The punch
/// takes the read-modify-write latch too, so a write cannot read old bytes
/// before the punch and write them back after it.
#[test]
fn a_punch_racing_a_write_leaves_the_write_or_zeros_never_old_bytes() {
    let (_shared, _ids, live) = live_group(22);
    for round in 0..30u8 {
        let number = live
            .meta(|g| {
                g.create_file(
                    &path(&format!("r{round}")),
                    2 * MIB,
                    &CreateOptions::default(),
                )
            })
            .unwrap()
            .unwrap()
            .number;
        let mut h = live.handle(64).unwrap();
        h.write(number, 0, &block(0xA5, (2 * MIB) as usize))
            .unwrap();
        let (at, len) = (MIB + 1000 + u64::from(round) * 512, 5000usize);
        let start = Arc::new(Barrier::new(2));
        let writer = {
            let (live, start) = (live.clone(), start.clone());
            std::thread::spawn(move || {
                let mut h = live.handle(64).unwrap();
                start.wait();
                h.write_bytes(number, at, &block(round, len)).unwrap();
            })
        };
        start.wait();
        h.punch(number, 0, 2 * MIB, true).unwrap();
        writer.join().unwrap();
        let mut back = vec![0u8; (2 * MIB) as usize];
        h.read(number, 0, &mut back).unwrap();
        let (from, to) = (at as usize, at as usize + len);
        let written = &back[from..to];
        assert!(
            written == block(round, len).as_slice() || written.iter().all(|b| *b == 0),
            "round {round}: the write's bytes are whole or punched"
        );
        assert!(
            back[..from].iter().chain(&back[to..]).all(|b| *b == 0),
            "round {round}: no byte from before the punch survives"
        );
    }
}
