//! The live group: one metadata plane, many threads each with its own data
//! handle, over one set of simulated disks ([`SharedSim`]). These tests run
//! real threads, so they assert what must hold under *every* interleaving;
//! the interleaving simulator drives chosen ones deterministically.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Barrier};
use std::time::Duration;

use cairn_io::DeviceId;
use cairn_io_sim::SharedSim;
use cairn_store::group::{CreateOptions, GroupError, LiveGroup};
use cairn_store::names::GroupPath;

mod common;
use common::MIB;

fn live_group(seed: u64) -> (SharedSim, Vec<DeviceId>, LiveGroup) {
    common::four_disk_live_group(seed, "LIVE", 0x11FE, 256)
}

fn mount_live(shared: &SharedSim, ids: &[DeviceId]) -> LiveGroup {
    common::mount_live(shared, ids, "LIVE").unwrap().0
}

fn path(name: &str) -> GroupPath {
    GroupPath::parse(&format!("+LIVE/{name}")).unwrap()
}

fn block(tag: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| tag ^ (i as u8).wrapping_mul(31)).collect()
}

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

/// A live group's data goes through data handles: the group's own data
/// calls, which would run under the metadata lock and take latches after it
/// (a deadlock with a first writer holding a latch and waiting for the lock),
/// are refused.
#[test]
fn a_live_groups_own_data_calls_are_refused() {
    let (_shared, _ids, live) = live_group(5);
    let number = live
        .meta(|g| g.create_file(&path("x"), MIB, &CreateOptions::default()))
        .unwrap()
        .unwrap()
        .number;
    let err = live
        .meta(|g| g.write(number, 0, &block(1, 4096)))
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, GroupError::Invalid(_)), "{err}");
    let err = live
        .meta(|g| g.initialize_file(number))
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, GroupError::Invalid(_)), "{err}");
    let mut back = vec![0u8; 4096];
    let err = live
        .meta(|g| g.read(number, 0, &mut back))
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, GroupError::Invalid(_)), "{err}");
    // Through a handle, all three work.
    let mut h = live.handle(8).unwrap();
    h.write(number, 0, &block(1, 4096)).unwrap();
    assert!(
        h.initialize_file(number).unwrap() == 0,
        "the only extent is written"
    );
    h.read(number, 0, &mut back).unwrap();
    assert_eq!(back, block(1, 4096));
}

/// A handle alive at dismount is a caller bug: refused, the group kept.
#[test]
fn dismount_with_a_live_handle_is_refused() {
    let (_shared, _ids, live) = live_group(4);
    let h = live.handle(8).unwrap();
    let again = live.clone();
    let err = live.dismount().unwrap_err();
    assert!(matches!(err, GroupError::Invalid(_)), "{err}");
    drop(h);
    again.dismount().unwrap();
}

/// Group commit: operations that queue up while another holds the metadata
/// plane run their steps in turn and share one journal record, and each
/// returns only once that record is durable. The first operation holds the
/// plane until the other two have begun (a handshake on the count of
/// operations begun), so the queue forms under every scheduling.
#[test]
fn operations_that_queue_up_share_one_commit() {
    let (_shared, _ids, live) = live_group(7);
    let records = |live: &LiveGroup| live.meta(|g| g.journal_records()).unwrap();
    let before = records(&live);
    let begun = live.operations_begun();
    let (go, queued) = std::sync::mpsc::channel::<()>();
    let queued = std::sync::Mutex::new(queued);
    std::thread::scope(|s| {
        for n in 0..2 {
            let live = live.clone();
            let queued = &queued;
            s.spawn(move || {
                queued.lock().unwrap().recv().unwrap();
                live.meta(|g| {
                    g.create_file(&path(&format!("q{n}")), MIB, &CreateOptions::default())
                })
                .unwrap()
                .unwrap();
            });
        }
        live.meta(|g| {
            // Only now, with the plane held, may the others begin.
            go.send(()).unwrap();
            go.send(()).unwrap();
            while live.operations_begun() < begun + 3 {
                std::thread::yield_now();
            }
            g.create_file(&path("q-first"), MIB, &CreateOptions::default())
                .unwrap();
        })
        .unwrap();
    });
    assert_eq!(
        records(&live) - before,
        1,
        "three creates that queued up were committed in one journal record"
    );
    // All three are named (the one record holds them all).
    let names = live
        .meta(|g| g.list(&GroupPath::parse("+LIVE").unwrap()))
        .unwrap()
        .unwrap();
    for name in ["q0", "q1", "q-first"] {
        assert!(names.iter().any(|e| e.name == name), "{name} listed");
    }
}

/// A panic in the commit leader hands the lead on: the operation that waited
/// for that commit is told the group stopped (`Poisoned`), it does not wait
/// for ever, and so is every operation after it. Whichever of the two
/// operations leads, the other waits for its commit.
#[test]
fn a_panic_in_the_commit_leader_fails_the_waiters_instead_of_hanging_them() {
    use cairn_store::group::{self, GroupSelector, MissingDisks, SameDevices};
    let (shared, ids, live) = live_group(11);
    live.dismount().unwrap();
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The metadata plane's engine panics at a flush once armed: a flush is
    // issued only by a commit (a step writes nothing below its dirty
    // limit), so the panic lands in whichever operation leads the commit.
    let arm = armed.clone();
    let (g, _) = group::mount_owned(
        Box::new(common::Hooked {
            inner: shared.handle(),
            hook: move |r: &cairn_io::Request| {
                if matches!(r.op, cairn_io::Op::Flush)
                    && arm.load(std::sync::atomic::Ordering::SeqCst)
                {
                    panic!("the commit leader panics");
                }
            },
            done: common::untouched,
        }),
        &ids,
        &GroupSelector::Name("LIVE".into()),
        MissingDisks::MarkOffline,
    )
    .unwrap();
    let source = shared.clone();
    let live = LiveGroup::new(
        g,
        Box::new(SameDevices(move |_depth| {
            Box::new(source.handle()) as Box<dyn cairn_io::IoEngine>
        })),
    );
    let begun = live.operations_begun();
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let (first, second) = std::thread::scope(|s| {
        let other = {
            let live = live.clone();
            s.spawn(move || {
                wait.recv().unwrap();
                live.meta(|g| g.create_file(&path("b"), MIB, &CreateOptions::default()))
            })
        };
        // The first operation holds the plane until the other has begun, so
        // both belong to the one commit that panics.
        let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            live.meta(|g| {
                go.send(()).unwrap();
                while live.operations_begun() < begun + 2 {
                    std::thread::yield_now();
                }
                armed.store(true, std::sync::atomic::Ordering::SeqCst);
                g.create_file(&path("a"), MIB, &CreateOptions::default())
            })
        }));
        let second = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            other
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        }));
        (first, second)
    });
    // One of them led and panicked; the other returned Poisoned.
    let outcomes = [first.map(|r| r.map(|_| ())), second.map(|r| r.map(|_| ()))];
    let panicked = outcomes.iter().filter(|o| o.is_err()).count();
    let poisoned = outcomes
        .iter()
        .filter(|o| matches!(o, Ok(Err(GroupError::Poisoned(_)))))
        .count();
    assert_eq!(
        (panicked, poisoned),
        (1, 1),
        "one leader panicked, one waiter failed"
    );
    // And every later operation is refused at once.
    assert!(matches!(
        live.meta(|g| g.create_file(&path("c"), MIB, &CreateOptions::default())),
        Err(GroupError::Poisoned(_))
    ));
}

/// What a [`FaultyMirror`] does to the reads of its primary disk.
#[derive(Clone, Copy, PartialEq)]
enum ReadFault {
    /// Nothing.
    None,
    /// Every read reports half its bytes, and the rest of the buffer holds
    /// old bytes, as a device that returns a short transfer leaves it.
    Short,
    /// The next read fails with EIO, the ones after it succeed.
    FailOnce,
}

/// Does `fault` to a completion of a read (one of another kind is left
/// alone).
fn apply_fault(fault: &std::sync::Mutex<ReadFault>, c: &mut cairn_io::Completion) {
    if c.kind != cairn_io::OpKind::Read {
        return;
    }
    let mut fault = fault.lock().unwrap();
    match *fault {
        ReadFault::None => {}
        ReadFault::Short => {
            if let (Ok(n), Some(buf)) = (&mut c.result, &mut c.buf) {
                *n /= 2;
                let half = buf.len() / 2;
                buf[half..].fill(0xEE);
            }
        }
        ReadFault::FailOnce => {
            c.result = Err(cairn_io::IoError::Os {
                kind: cairn_io::OpKind::Read,
                offset_bytes: 0,
                len_bytes: 0,
                errno: 5,
            });
            *fault = ReadFault::None;
        }
    }
}

/// A normal-redundancy group with one 1 MiB file holding `block(7, 8192)`
/// at 0, mounted live again with data handles whose engine does `fault` to
/// the reads of the block's primary copy's disk and counts its writes; with
/// the fault to set and the primary disk's write count.
struct FaultyMirror {
    shared: SharedSim,
    ids: Vec<DeviceId>,
    live: LiveGroup,
    number: u32,
    primary: cairn_format::group::AuAddr,
    fault: Arc<std::sync::Mutex<ReadFault>>,
    writes: Arc<std::sync::atomic::AtomicU32>,
}

fn faulty_mirror(seed: u64) -> FaultyMirror {
    use cairn_store::group::{self, GroupSelector, MissingDisks, SameDevices};
    let (shared, ids, live) = live_group(seed);
    let number = live
        .meta(|g| g.create_file(&path("f"), MIB, &CreateOptions::default()))
        .unwrap()
        .unwrap()
        .number;
    let mut h = live.handle(64).unwrap();
    h.write(number, 0, &block(7, 8192)).unwrap();
    h.sync().unwrap();
    let primary = live
        .meta(|g| g.extents(number).unwrap()[0].copies()[0])
        .unwrap();
    drop(h);
    live.dismount().unwrap();

    let (g, _) = group::mount_owned(
        Box::new(shared.handle()),
        &ids,
        &GroupSelector::Name("LIVE".into()),
        MissingDisks::MarkOffline,
    )
    .unwrap();
    let fault = Arc::new(std::sync::Mutex::new(ReadFault::None));
    let writes = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let (source, f, w) = (shared.clone(), fault.clone(), writes.clone());
    let device = ids[usize::from(primary.disk)];
    let live = LiveGroup::new(
        g,
        Box::new(SameDevices(move |_depth| {
            let (f, w) = (f.clone(), w.clone());
            Box::new(common::Hooked {
                inner: source.handle(),
                hook: move |r: &cairn_io::Request| {
                    if r.device == device && matches!(r.op, cairn_io::Op::Write { .. }) {
                        w.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                },
                done: move |c: &mut cairn_io::Completion| {
                    if c.device == device {
                        apply_fault(&f, c);
                    }
                },
            }) as Box<dyn cairn_io::IoEngine>
        })),
    );
    FaultyMirror {
        shared,
        ids,
        live,
        number,
        primary,
        fault,
        writes,
    }
}

/// A read the engine reports short is not taken as data: the handle's
/// reused buffers hold old bytes past what was transferred. The read comes
/// from the other copy instead, whole.
#[test]
fn a_short_read_is_not_taken_as_data() {
    let FaultyMirror {
        live,
        number,
        fault,
        ..
    } = faulty_mirror(12);
    let mut h = live.handle(64).unwrap();
    let mut back = vec![0u8; 8192];
    h.read(number, 0, &mut back).unwrap();
    assert_eq!(back, block(7, 8192), "the block, before any fault");
    *fault.lock().unwrap() = ReadFault::Short;
    let mut back = vec![0u8; 8192];
    h.read(number, 0, &mut back).unwrap();
    assert_eq!(
        back,
        block(7, 8192),
        "the block whole, from the other copy, not the short one"
    );
}

/// A copy whose read fails once is not read again in the same operation
/// (where it might succeed and hide the fault): the read goes to the other
/// copy and the failed copy is rewritten from it.
#[test]
fn a_copy_that_fails_a_read_is_rewritten_from_the_other() {
    let FaultyMirror {
        live,
        number,
        fault,
        writes,
        ..
    } = faulty_mirror(13);
    let mut h = live.handle(64).unwrap();
    *fault.lock().unwrap() = ReadFault::FailOnce;
    let before = writes.load(std::sync::atomic::Ordering::SeqCst);
    let mut back = vec![0u8; 8192];
    h.read(number, 0, &mut back).unwrap();
    assert_eq!(back, block(7, 8192));
    assert!(
        writes.load(std::sync::atomic::Ordering::SeqCst) > before,
        "the primary copy was rewritten after its failed read"
    );
}

/// The caller's check sees each copy once: a primary copy whose bytes are
/// bad is rejected once, the mirror accepted, and the primary rewritten
/// with the mirror's bytes.
#[test]
fn the_callers_check_sees_each_copy_once() {
    let FaultyMirror {
        shared,
        ids,
        live,
        number,
        primary,
        ..
    } = faulty_mirror(14);
    // Damage the primary copy on its disk, behind the group's back.
    let mut raw = shared.handle();
    let device = ids[usize::from(primary.disk)];
    cairn_io::IoEngine::write_at(
        &mut raw,
        device,
        u64::from(primary.au) * MIB,
        cairn_io::AlignedBuf::from_slice(&block(9, 8192)),
        false,
    )
    .unwrap();
    let mut h = live.handle(64).unwrap();
    let seen = std::sync::Mutex::new(Vec::new());
    let good = block(7, 8192);
    let mut back = vec![0u8; 8192];
    h.read_checked(number, 0, &mut back, &|bytes| {
        seen.lock().unwrap().push(bytes[0]);
        bytes == good.as_slice()
    })
    .unwrap();
    assert_eq!(back, good);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![block(9, 1)[0], good[0]],
        "the bad primary once, then the mirror"
    );
    let mut again = vec![0u8; 8192];
    let calls = std::sync::atomic::AtomicU32::new(0);
    h.read_checked(number, 0, &mut again, &|bytes| {
        calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        bytes == good.as_slice()
    })
    .unwrap();
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the primary was rewritten: the next read takes it at once"
    );
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

/// Six 64 MiB disks (D0 and D3 in FG0, D1 and D4 in FG1, D2 and D5 in FG2)
/// of a high-redundancy group LIVE with 1 MiB AUs, mounted live, with an
/// 8 MiB file written whole; the file's number.
fn high_group(seed: u64) -> (cairn_io_sim::SharedSim, Vec<DeviceId>, LiveGroup, u32) {
    use cairn_store::group::{self, GroupSpec, NewDisk, Redundancy};
    let mut sim = cairn_io_sim::SimEngine::new(seed, 256);
    let ids = common::labelled_disks(
        &mut sim,
        (0..6).map(|_| cairn_io_sim::geometry(64 * MIB, 4096, 4096, 512 << 10)),
        |i| u128::from(seed) << 8 | i as u128,
    );
    let disks: Vec<NewDisk> = ids
        .iter()
        .enumerate()
        .map(|(i, d)| NewDisk {
            device: *d,
            failgroup: Some(format!("FG{}", i % 3)),
        })
        .collect();
    group::create(
        &mut sim,
        &disks,
        &GroupSpec {
            name: "LIVE".into(),
            redundancy: Redundancy::High,
            au_bytes: MIB,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1_763_700_000,
            group_uuid: uuid::Uuid::from_u128(0x4816 << 64 | u128::from(seed)),
        },
    )
    .unwrap()
    .dismount()
    .unwrap();
    let shared = cairn_io_sim::SharedSim::new(sim);
    let live = mount_live(&shared, &ids);
    let number = live
        .meta(|g| g.create_file(&path("f"), 8 * MIB, &CreateOptions::default()))
        .unwrap()
        .unwrap()
        .number;
    let mut h = live.handle(16).unwrap();
    h.write(number, 0, &block(1, (8 * MIB) as usize)).unwrap();
    h.sync().unwrap();
    (shared, ids, live, number)
}

fn disk_rows(live: &LiveGroup) -> Vec<cairn_store::group::DiskInfo> {
    live.meta(|g| g.disks()).unwrap()
}

fn disk_row(live: &LiveGroup, label: &str) -> cairn_store::group::DiskInfo {
    disk_rows(live)
        .into_iter()
        .find(|d| d.label == label)
        .unwrap()
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

/// A read the hook holds: the next data read of at least 512 KiB (a
/// scrub's chunk; metadata reads are smaller) waits until released.
#[derive(Default)]
struct HeldRead {
    state: std::sync::Mutex<(bool, bool, bool)>, // (armed, holding, released)
    changed: std::sync::Condvar,
}

impl HeldRead {
    fn see(&self, r: &cairn_io::Request) {
        let big = matches!(&r.op, cairn_io::Op::Read { buf, .. } if buf.len() >= 512 << 10);
        let mut s = self.state.lock().unwrap();
        if !big || !s.0 || s.2 {
            return;
        }
        s.0 = false;
        s.1 = true;
        self.changed.notify_all();
        // Bounded: a test that fails must not hang.
        let (s, _) = self
            .changed
            .wait_timeout_while(s, Duration::from_secs(120), |s| !s.2)
            .unwrap();
        drop(s);
    }

    fn wait_holding(&self) -> bool {
        let s = self.state.lock().unwrap();
        let (s, _) = self
            .changed
            .wait_timeout_while(s, Duration::from_secs(60), |s| !s.1)
            .unwrap();
        s.1
    }

    fn release(&self) {
        self.state.lock().unwrap().2 = true;
        self.changed.notify_all();
    }
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

/// A discard the data handles' engines hold once armed: the next discard
/// request (the discard drain's, the only one these tests make while
/// armed) waits until released.
#[derive(Default)]
struct HeldDiscard {
    state: std::sync::Mutex<(bool, bool, bool)>, // (armed, holding, released)
    changed: std::sync::Condvar,
}

impl HeldDiscard {
    fn see(&self, r: &cairn_io::Request) {
        let mut s = self.state.lock().unwrap();
        if !matches!(r.op, cairn_io::Op::Discard { .. }) || !s.0 || s.2 {
            return;
        }
        s.0 = false;
        s.1 = true;
        self.changed.notify_all();
        // Bounded: a test that fails must not hang.
        let (s, _) = self
            .changed
            .wait_timeout_while(s, Duration::from_secs(120), |s| !s.2)
            .unwrap();
        drop(s);
    }

    fn arm(&self) {
        self.state.lock().unwrap().0 = true;
    }

    fn wait_holding(&self) -> bool {
        let s = self.state.lock().unwrap();
        let (s, _) = self
            .changed
            .wait_timeout_while(s, Duration::from_secs(60), |s| !s.1)
            .unwrap();
        s.1
    }

    fn release(&self) {
        self.state.lock().unwrap().2 = true;
        self.changed.notify_all();
    }
}

/// Two 24 MiB disks in two failure groups, a normal-redundancy group LIVE
/// with 1 MiB AUs, mounted live, filled with 1 MiB files `fill*` until
/// `free` extents are left; the data handles' engines go through `held`.
fn nearly_full_group(seed: u64, free: usize) -> (SharedSim, LiveGroup, Arc<HeldDiscard>) {
    use cairn_store::group::SameDevices;
    use cairn_store::group::{self, GroupSelector, GroupSpec, MissingDisks, NewDisk, Redundancy};
    let mut sim = cairn_io_sim::SimEngine::new(seed, 256);
    let ids = common::labelled_disks(
        &mut sim,
        (0..2).map(|_| cairn_io_sim::geometry(24 * MIB, 4096, 4096, 512 << 10)),
        |i| u128::from(seed) << 8 | i as u128,
    );
    let disks: Vec<NewDisk> = ids
        .iter()
        .enumerate()
        .map(|(i, d)| NewDisk {
            device: *d,
            failgroup: Some(format!("FG{i}")),
        })
        .collect();
    group::create(
        &mut sim,
        &disks,
        &GroupSpec {
            name: "LIVE".into(),
            redundancy: Redundancy::Normal,
            au_bytes: MIB,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1_763_700_000,
            group_uuid: uuid::Uuid::from_u128(0x5FAC << 64 | u128::from(seed)),
        },
    )
    .unwrap()
    .dismount()
    .unwrap();
    let shared = SharedSim::new(sim);
    let held = Arc::new(HeldDiscard::default());
    let (g, _) = group::mount_owned(
        Box::new(shared.handle()),
        &ids,
        &GroupSelector::Name("LIVE".into()),
        MissingDisks::MarkOffline,
    )
    .unwrap();
    let (source, h) = (shared.clone(), held.clone());
    let live = LiveGroup::new(
        g,
        Box::new(SameDevices(move |_depth| {
            let h = h.clone();
            Box::new(common::Hooked {
                inner: source.handle(),
                hook: move |r: &cairn_io::Request| h.see(r),
                done: common::untouched,
            }) as Box<dyn cairn_io::IoEngine>
        })),
    );
    let mut made = 0;
    loop {
        match live
            .meta(|g| {
                g.create_file(
                    &path(&format!("fill{made}")),
                    MIB,
                    &CreateOptions::default(),
                )
            })
            .unwrap()
        {
            Ok(_) => made += 1,
            Err(GroupError::NoSpace(_)) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(made > free, "{made} files fill the group");
    for n in made - free..made {
        live.meta(|g| g.remove(&path(&format!("fill{n}"))))
            .unwrap()
            .unwrap();
    }
    // Their discards over, the space is free.
    wait_for(|| live.discards_pending() == 0, "the fill's discards end");
    (shared, live, held)
}

/// Wait (bounded: a failing test must not hang) until `done` holds.
fn wait_for(done: impl Fn() -> bool, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A read held in the caller's check (`read_checked`): it runs, its reuse
/// guard set, until released. Its first look at the bytes (the primary
/// copy) is rejected when `reject_first`, so it reads the other copy after
/// the release; the bytes it accepted come back from `join`.
struct HeldReader {
    go: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<Vec<u8>>,
}

impl HeldReader {
    fn start(live: &LiveGroup, number: u32, reject_first: bool) -> Self {
        let (inside, entered) = std::sync::mpsc::channel::<()>();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let live = live.clone();
        let thread = std::thread::spawn(move || {
            let mut h = live.handle(8).unwrap();
            let mut buf = vec![0u8; 64 * 1024];
            let looks = std::sync::atomic::AtomicUsize::new(0);
            let wait = std::sync::Mutex::new(wait);
            h.read_checked(number, 0, &mut buf, &|_| {
                if looks.fetch_add(1, std::sync::atomic::Ordering::SeqCst) > 0 {
                    return true;
                }
                inside.send(()).unwrap();
                // Bounded: a test that fails must not hang.
                let _ = wait.lock().unwrap().recv_timeout(Duration::from_secs(120));
                !reject_first
            })
            .unwrap();
            buf
        });
        entered
            .recv_timeout(Duration::from_secs(60))
            .expect("the reader is inside its read");
        Self { go, thread }
    }

    fn finish(self) -> Vec<u8> {
        let _ = self.go.send(());
        self.thread.join().unwrap()
    }
}

/// The second sighting of issue 35's "no space" (`metadata_churn_never_
/// disturbs_data_threads` under load): files created and removed while
/// an older data operation runs. What each removal frees waits for that
/// operation (it may still read it); before, a create then found no space
/// although at most one churned file existed at a time, all the rest held
/// back for a reader that reads none of it. The space is lent instead.
#[test]
fn creates_never_find_no_space_while_an_older_reader_holds_freed_space() {
    let (_shared, live, _held) = nearly_full_group(31, 2);
    let steady = live
        .meta(|g| g.create_file(&path("steady"), MIB, &CreateOptions::default()))
        .unwrap()
        .unwrap()
        .number;
    live.handle(8)
        .unwrap()
        .write(steady, 0, &block(5, MIB as usize))
        .unwrap();
    let reader = HeldReader::start(&live, steady, false);
    for n in 0..6 {
        let p = path(&format!("churn{}", n % 2));
        let made = live
            .meta(|g| g.create_file(&p, MIB, &CreateOptions::default()))
            .unwrap();
        assert!(
            made.is_ok(),
            "create {n} while a reader holds the freed space: {made:?}"
        );
        live.meta(|g| g.remove(&p)).unwrap().unwrap();
    }
    assert!(
        reader.finish() == block(5, 64 * 1024),
        "the reader read its file's bytes"
    );
    let report = live.meta(|g| g.check(false)).unwrap().unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}

/// Space lent while an older reader may still read it: the new file's
/// first write waits until that reader is over, so the reader still reads
/// the bytes of the file it started on, never the new file's.
#[test]
fn a_first_write_into_lent_space_waits_for_the_older_reader() {
    let (_shared, live, _held) = nearly_full_group(32, 1);
    let old = live
        .meta(|g| g.create_file(&path("old"), MIB, &CreateOptions::default()))
        .unwrap()
        .unwrap()
        .number;
    live.handle(8)
        .unwrap()
        .write(old, 0, &block(1, MIB as usize))
        .unwrap();
    let copies = |number: u32| {
        let mut c: Vec<(u16, u32)> = live
            .plane()
            .file(number)
            .unwrap()
            .extent(0)
            .unwrap()
            .copies()
            .iter()
            .map(|c| (c.disk, c.au))
            .collect();
        c.sort_unstable();
        c
    };
    let old_copies = copies(old);
    // The reader rejects the primary copy, and reads the other after the
    // release: by then the old file's AUs are the new file's.
    let reader = HeldReader::start(&live, old, true);
    live.meta(|g| g.remove(&path("old"))).unwrap().unwrap();
    let new = live
        .meta(|g| g.create_file(&path("new"), MIB, &CreateOptions::default()))
        .unwrap()
        .expect("the old file's space, lent")
        .number;
    assert_eq!(
        copies(new),
        old_copies,
        "the new file has the old one's AUs"
    );
    let writer = {
        let live = live.clone();
        std::thread::spawn(move || {
            live.handle(8)
                .unwrap()
                .write(new, 0, &block(2, MIB as usize))
        })
    };
    wait_for(
        || live.plane().lent_waits() > 0,
        "the first write waits for the lent space",
    );
    let read = reader.finish();
    assert!(
        read == block(1, 64 * 1024),
        "the older reader read the old file's bytes, not {}",
        if read == block(2, 64 * 1024) {
            "the new file's"
        } else {
            "these"
        }
    );
    writer.join().unwrap().unwrap();
    let mut back = vec![0u8; MIB as usize];
    live.handle(8).unwrap().read(new, 0, &mut back).unwrap();
    assert!(back == block(2, MIB as usize), "the new file's bytes");
    let report = live.meta(|g| g.check(false)).unwrap().unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}

/// The first sighting of issue 35's "no space" (the data-plane bench's
/// metadata phase: two threads creating and removing 4 MiB files on a group
/// with about 50 AUs free). A removal's runs go to the discard drain, which
/// takes them all in one batch (up to 64 runs) and holds them through its
/// discards and until it gets the metadata lock; an allocation meanwhile
/// took back only runs still waiting, and found no space. Here the drain's
/// discard is held while a create needs that space: it is lent, and the
/// new file's first write waits for the discard (else the discard, landing
/// after it, would erase it: the simulated disk reads a discarded range as
/// zeros).
#[test]
fn space_whose_discard_is_in_flight_is_lent_and_its_first_write_waits() {
    let (_shared, live, held) = nearly_full_group(33, 2);
    live.meta(|g| g.create_file(&path("x"), 2 * MIB, &CreateOptions::default()))
        .unwrap()
        .unwrap();
    held.arm();
    live.meta(|g| g.remove(&path("x"))).unwrap().unwrap();
    assert!(held.wait_holding(), "the drain is discarding x's space");
    let made = live
        .meta(|g| g.create_file(&path("y"), 2 * MIB, &CreateOptions::default()))
        .unwrap();
    let y = made.expect("x's space, its discard in flight, lent").number;
    let writer = {
        let live = live.clone();
        std::thread::spawn(move || {
            live.handle(8)
                .unwrap()
                .write(y, 0, &block(3, 2 * MIB as usize))
        })
    };
    wait_for(
        || live.plane().lent_waits() > 0,
        "the first write waits for the discard",
    );
    held.release();
    writer.join().unwrap().unwrap();
    wait_for(|| live.discards_pending() == 0, "the drain ends");
    let mut back = vec![0u8; 2 * MIB as usize];
    live.handle(8).unwrap().read(y, 0, &mut back).unwrap();
    assert!(
        back == block(3, 2 * MIB as usize),
        "y's bytes, not {}",
        if back.iter().all(|b| *b == 0) {
            "zeros: the discard landed after them"
        } else {
            "these"
        }
    );
    let report = live.meta(|g| g.check(false)).unwrap().unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}
