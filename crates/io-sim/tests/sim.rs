//! The simulated disk: the shared conformance suite, then each fault it injects,
//! and the determinism that makes a failing seed replay.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use cairn_io::test_support::conformance::{self, pattern, Subject};
use cairn_io::{AlignedBuf, DeviceId, IoEngine, IoError, Op, Request};
use cairn_io_sim::{geometry, CrashPolicy, FaultEvent, SimEngine};

const MIB: u64 = 1 << 20;

fn engine_with_disk(seed: u64, logical: u32) -> (SimEngine, DeviceId) {
    let mut engine = SimEngine::new(seed, 32);
    let id = engine.add_disk(geometry(64 * MIB, logical, 4096, 1280 << 10));
    (engine, id)
}

fn write(
    engine: &mut SimEngine,
    device: DeviceId,
    offset_bytes: u64,
    data: &[u8],
    fua: bool,
) -> Result<u64, IoError> {
    engine
        .execute(Request {
            device,
            tag: 0,
            op: Op::Write {
                offset_bytes,
                buf: AlignedBuf::from_slice(data),
                fua,
            },
        })
        .unwrap()
        .result
}

fn read(
    engine: &mut SimEngine,
    device: DeviceId,
    offset_bytes: u64,
    len: usize,
) -> Result<Vec<u8>, IoError> {
    let c = engine
        .execute(Request {
            device,
            tag: 0,
            op: Op::Read {
                offset_bytes,
                buf: AlignedBuf::zeroed(len),
            },
        })
        .unwrap();
    c.result.map(|_| c.buf.unwrap().to_vec())
}

fn flush(engine: &mut SimEngine, device: DeviceId) {
    let c = engine
        .execute(Request {
            device,
            tag: 0,
            op: Op::Flush,
        })
        .unwrap();
    assert_eq!(c.result, Ok(0));
}

#[test]
fn conformance_4kn() {
    let mut seed = 0;
    conformance::run_all(&mut || {
        seed += 1;
        let (engine, device) = engine_with_disk(seed, 4096);
        Subject {
            engine: Box::new(engine),
            device,
        }
    });
}

#[test]
fn conformance_512e() {
    let mut seed = 100;
    conformance::run_all(&mut || {
        seed += 1;
        let (engine, device) = engine_with_disk(seed, 512);
        Subject {
            engine: Box::new(engine),
            device,
        }
    });
}

#[test]
fn conformance_with_stale_discard() {
    conformance::run_all(&mut || {
        let mut engine = SimEngine::new(7, 32);
        let mut g = geometry(64 * MIB, 4096, 4096, 1280 << 10);
        g.discard = cairn_io::geometry::DiscardSupport::Supported {
            granularity_bytes: 4096,
            reads_zeroes: false,
        };
        let device = engine.add_disk(g);
        Subject {
            engine: Box::new(engine),
            device,
        }
    });
}

#[test]
fn flushed_and_fua_writes_survive_a_crash_unflushed_ones_may_not() {
    let (mut e, d) = engine_with_disk(1, 4096);
    write(&mut e, d, 0, &pattern(1, 4096), false).unwrap();
    flush(&mut e, d);
    write(&mut e, d, 4096, &pattern(2, 4096), true).unwrap();
    write(&mut e, d, 8192, &pattern(3, 4096), false).unwrap();
    let report = e.crash(CrashPolicy::LOSE_ALL);
    assert_eq!(
        (report.kept, report.lost),
        (1, 1),
        "the FUA write is kept, the plain one lost"
    );
    assert_eq!(read(&mut e, d, 0, 4096).unwrap(), pattern(1, 4096).to_vec());
    assert_eq!(
        read(&mut e, d, 4096, 4096).unwrap(),
        pattern(2, 4096).to_vec()
    );
    assert!(read(&mut e, d, 8192, 4096).unwrap().iter().all(|b| *b == 0));
}

#[test]
fn keep_all_crash_keeps_every_unflushed_write() {
    let (mut e, d) = engine_with_disk(2, 4096);
    write(&mut e, d, 0, &pattern(4, 64 << 10), false).unwrap();
    assert!(
        e.durable_contents(d, 0, 4096).iter().all(|b| *b == 0),
        "not durable before a flush"
    );
    e.crash(CrashPolicy::KEEP_ALL);
    assert_eq!(
        read(&mut e, d, 0, 64 << 10).unwrap(),
        pattern(4, 64 << 10).to_vec()
    );
}

#[test]
fn a_torn_write_keeps_some_physical_sectors_and_not_others() {
    let (mut e, d) = engine_with_disk(3, 512);
    let data = pattern(5, 256 << 10);
    write(&mut e, d, 0, &data, false).unwrap();
    let report = e.crash(CrashPolicy::TEAR_ALL);
    assert_eq!(report.torn, 1);
    let after = read(&mut e, d, 0, data.len()).unwrap();
    let (mut kept, mut lost) = (0, 0);
    for (i, unit) in after.chunks(4096).enumerate() {
        if unit == &data[i * 4096..(i + 1) * 4096] {
            kept += 1;
        } else {
            assert!(
                unit.iter().all(|b| *b == 0),
                "a torn unit is whole or absent, never mixed"
            );
            lost += 1;
        }
    }
    assert!(kept > 0 && lost > 0, "kept {kept}, lost {lost} of 64 units");
}

#[test]
fn the_same_seed_replays_exactly() {
    let run = |seed: u64| {
        let mut e = SimEngine::new(seed, 32);
        let d = e.add_disk(geometry(64 * MIB, 4096, 4096, 1280 << 10));
        for tag in 0..32u64 {
            e.submit(Request {
                device: d,
                tag,
                op: Op::Write {
                    offset_bytes: tag * 8192,
                    buf: pattern(tag, 8192),
                    fua: false,
                },
            })
            .unwrap();
        }
        let mut order = Vec::new();
        while e.in_flight() > 0 {
            e.wait(1).unwrap();
            while let Some(c) = e.pop_completion() {
                order.push(c.tag);
            }
        }
        let report = e.crash(CrashPolicy::MIXED);
        (order, report, e.contents(d, 0, 32 * 8192), e.now_ns())
    };
    let a = run(42);
    assert_eq!(
        a,
        run(42),
        "same seed, same completions, crash and contents"
    );
    assert_ne!(
        a.0,
        (0..32).collect::<Vec<_>>(),
        "latency reorders completions"
    );
    assert_ne!(a.0, run(43).0, "another seed, another order");
}

#[test]
fn read_and_write_errors_on_ranges() {
    let (mut e, d) = engine_with_disk(4, 4096);
    e.disk_mut(d)
        .faults
        .write_error_ranges
        .push(MIB..MIB + 4096);
    e.disk_mut(d)
        .faults
        .read_error_ranges
        .push(2 * MIB..2 * MIB + 1);
    let r = write(&mut e, d, MIB - 4096, &pattern(6, 8192), false);
    assert_eq!(r.unwrap_err().errno(), Some(5), "EIO");
    assert!(
        e.contents(d, MIB - 4096, 8192).iter().all(|b| *b == 0),
        "a failed write writes nothing"
    );
    assert_eq!(read(&mut e, d, 2 * MIB, 4096).unwrap_err().errno(), Some(5));
    assert!(
        read(&mut e, d, 3 * MIB, 4096).is_ok(),
        "other ranges are fine"
    );
    assert!(matches!(e.events()[0], FaultEvent::WriteError { .. }));
}

#[test]
fn bit_rot_is_silent_to_the_reader() {
    let (mut e, d) = engine_with_disk(5, 4096);
    let data = pattern(7, 4096);
    write(&mut e, d, 0, &data, false).unwrap();
    flush(&mut e, d);
    e.rot(d, 100, 3);
    let back = read(&mut e, d, 0, 4096).unwrap();
    let diffs: Vec<usize> = (0..4096).filter(|i| back[*i] != data[*i]).collect();
    assert_eq!(diffs, vec![100]);
    assert_eq!(back[100] ^ data[100], 1 << 3);
}

#[test]
fn misdirected_writes_land_elsewhere_and_report_success() {
    let (mut e, d) = engine_with_disk(6, 4096);
    e.disk_mut(d).faults.misdirect_per_million = 1_000_000;
    let data = pattern(8, 4096);
    assert_eq!(write(&mut e, d, 0, &data, false), Ok(4096));
    let Some(FaultEvent::Misdirected { landed_bytes, .. }) = e.events().last().cloned() else {
        panic!("expected a misdirected write: {:?}", e.events());
    };
    assert!(
        e.contents(d, 0, 4096).iter().all(|b| *b == 0),
        "nothing at the intended place"
    );
    assert_eq!(
        e.contents(d, landed_bytes, 4096),
        data.to_vec(),
        "the data is where it landed"
    );
}

#[test]
fn a_lost_disk_fails_everything() {
    let (mut e, d) = engine_with_disk(8, 4096);
    e.lose_disk(d);
    assert_eq!(
        read(&mut e, d, 0, 4096).unwrap_err().errno(),
        Some(6),
        "ENXIO"
    );
    let c = e
        .execute(Request {
            device: d,
            tag: 0,
            op: Op::Flush,
        })
        .unwrap();
    assert_eq!(c.result.unwrap_err().errno(), Some(6));
}

#[test]
fn stale_discard_keeps_old_data() {
    let (mut e, d) = engine_with_disk(9, 4096);
    e.disk_mut(d).faults.discard_reads_stale = true;
    let data = pattern(9, 8192);
    write(&mut e, d, 0, &data, false).unwrap();
    let c = e
        .execute(Request {
            device: d,
            tag: 0,
            op: Op::Discard {
                offset_bytes: 0,
                len_bytes: 8192,
            },
        })
        .unwrap();
    assert_eq!(c.result, Ok(8192));
    assert_eq!(read(&mut e, d, 0, 8192).unwrap(), data.to_vec());
}

#[test]
fn a_flush_does_not_cover_a_write_still_in_flight() {
    let (mut e, d) = engine_with_disk(10, 4096);
    // Submit the write and the flush together, without waiting between them.
    e.submit(Request {
        device: d,
        tag: 1,
        op: Op::Write {
            offset_bytes: 0,
            buf: pattern(10, 4096),
            fua: false,
        },
    })
    .unwrap();
    e.submit(Request {
        device: d,
        tag: 2,
        op: Op::Flush,
    })
    .unwrap();
    e.wait(2).unwrap();
    while e.pop_completion().is_some() {}
    e.crash(CrashPolicy::LOSE_ALL);
    assert!(
        e.contents(d, 0, 4096).iter().all(|b| *b == 0),
        "the write was in flight when the flush was issued"
    );

    // Wait for the write, then flush: now it is durable.
    write(&mut e, d, 0, &pattern(11, 4096), false).unwrap();
    flush(&mut e, d);
    e.crash(CrashPolicy::LOSE_ALL);
    assert_eq!(e.contents(d, 0, 4096), pattern(11, 4096).to_vec());
}

#[test]
fn torn_writes_tear_at_physical_sector_boundaries_of_the_device() {
    // 512-byte logical, 4 KiB physical: a write starting mid physical sector tears
    // at device boundaries, not at multiples of 4 KiB from its own start.
    let mut e = SimEngine::new(12, 8);
    let d = e.add_disk(geometry(64 * MIB, 512, 4096, 1280 << 10));
    let data = pattern(12, 64 << 10);
    write(&mut e, d, 2048, &data, false).unwrap();
    e.crash(CrashPolicy::TEAR_ALL);
    let (start, end) = (2048u64, 2048 + (64u64 << 10));
    let after = e.contents(d, 0, end as usize + 4096);
    let (mut kept, mut lost) = (0, 0);
    for unit in 0..=end / 4096 {
        // The part of the write inside this physical sector of the device.
        let from = start.max(unit * 4096);
        let to = end.min((unit + 1) * 4096);
        let got = &after[from as usize..to as usize];
        let wrote = &data[(from - start) as usize..(to - start) as usize];
        if got == wrote {
            kept += 1;
        } else {
            assert!(
                got.iter().all(|b| *b == 0),
                "physical sector {unit} is partly kept"
            );
            lost += 1;
        }
    }
    assert!(kept > 0 && lost > 0, "kept {kept}, lost {lost}");
}

#[test]
fn a_flush_takes_effect_when_it_completes_not_when_it_is_issued() {
    let (mut e, d) = engine_with_disk(13, 4096);
    write(&mut e, d, 0, &pattern(13, 4096), false).unwrap();
    // The write has completed; the flush is issued but never waited for.
    e.submit(Request {
        device: d,
        tag: 9,
        op: Op::Flush,
    })
    .unwrap();
    e.crash(CrashPolicy::LOSE_ALL);
    assert!(
        e.contents(d, 0, 4096).iter().all(|b| *b == 0),
        "a flush still in flight guarantees nothing"
    );
}

/// Two writes to one block, the newer completing first, then a flush while the
/// older is still in flight: readers keep seeing the newer data.
#[test]
fn a_flush_never_brings_older_data_back() {
    let mut checked = false;
    for seed in 0..64 {
        let (mut e, d) = engine_with_disk(seed, 4096);
        for (tag, byte) in [(1u64, 0xAAu8), (2, 0xBB)] {
            e.submit(Request {
                device: d,
                tag,
                op: Op::Write {
                    offset_bytes: 0,
                    buf: AlignedBuf::from_slice(&[byte; 4096]),
                    fua: false,
                },
            })
            .unwrap();
        }
        e.wait(1).unwrap();
        let first = e.pop_completion().unwrap();
        if first.tag != 2 {
            continue; // this seed completed them in order
        }
        e.submit(Request {
            device: d,
            tag: 3,
            op: Op::Flush,
        })
        .unwrap();
        e.wait(1).unwrap();
        if e.pop_completion().unwrap().tag != 3 {
            continue; // the older write finished before the flush did
        }
        let got = e.contents(d, 0, 4096);
        assert!(
            got.iter().all(|b| *b == 0xBB),
            "seed {seed}: after the flush, reads show {:#x}",
            got[0]
        );
        checked = true;
        break;
    }
    assert!(
        checked,
        "some seed completes the newer write and the flush before the older write"
    );
}

/// With a shared clock, the disk and its caller keep one simulated time: a
/// request is issued at the clock's time, a wait moves the clock to the
/// completion's due time, a wait with a timeout gives up at the timeout when
/// nothing is due sooner, and a stall moves the clock by its length.
#[test]
fn a_shared_clock_is_the_disks_time_and_its_callers() {
    use cairn_io::clock::Clock;
    use cairn_io_sim::{SimClock, Stall};
    use std::time::Duration;

    let clock = SimClock::new();
    let mut sim = SimEngine::new(3, 8)
        .with_latency(100_000..100_001)
        .with_clock(clock.clone());
    let id = sim.add_disk(geometry(64 * MIB, 4096, 4096, 1280 << 10));
    let mut engine = Stall::new(sim, 1, Duration::from_millis(500), clock.clone());
    let read = |tag| Request {
        device: id,
        tag,
        op: Op::Read {
            offset_bytes: 0,
            buf: AlignedBuf::zeroed(4096),
        },
    };
    // The caller sleeps to 1 ms: the next request is issued then.
    clock.sleep_until_ns(1_000_000);
    engine.submit(read(0)).unwrap();
    // Nothing is due within 40 µs: the wait gives up there.
    engine.wait_timeout(1, Duration::from_micros(40)).unwrap();
    assert!(engine.pop_completion().is_none());
    assert_eq!(clock.now_ns(), 1_040_000);
    // Due 100 µs after it was issued.
    engine.wait_timeout(1, Duration::from_secs(1)).unwrap();
    assert_eq!(engine.pop_completion().unwrap().tag, 0);
    assert_eq!(clock.now_ns(), 1_100_000);
    // The second request stalls 500 ms before it goes through.
    engine.submit(read(1)).unwrap();
    assert_eq!(clock.now_ns(), 501_100_000);
    engine.wait(1).unwrap();
    assert_eq!(engine.pop_completion().unwrap().tag, 1);
    assert_eq!(clock.now_ns(), 501_200_000);
}

/// A hung disk answers nothing: with an I/O timeout, each request to it
/// completes with `TimedOut` exactly that long after it was submitted (in
/// simulated time, which the wait moves there), without its buffer and
/// without taking effect; other disks go on; once it answers again, new
/// requests do. With no timeout, waiting for it is a bug the simulator
/// names instead of hanging.
#[test]
fn a_hung_disk_times_out_in_simulated_time_and_takes_nothing() {
    let mut engine = SimEngine::new(11, 16);
    let hung = engine.add_disk(geometry(16 << 20, 4096, 4096, 1 << 20));
    let fine = engine.add_disk(geometry(16 << 20, 4096, 4096, 1 << 20));
    write(&mut engine, hung, 0, &[1u8; 4096], false).unwrap();
    engine.set_io_timeout(Some(std::time::Duration::from_secs(30)));
    engine.hang_disk(hung, true);
    let start = engine.now_ns();
    engine
        .submit(Request {
            device: hung,
            tag: 1,
            op: Op::Write {
                offset_bytes: 0,
                buf: AlignedBuf::from_slice(&[2u8; 4096]),
                fua: false,
            },
        })
        .unwrap();
    engine
        .submit(Request {
            device: fine,
            tag: 2,
            op: Op::Write {
                offset_bytes: 0,
                buf: AlignedBuf::from_slice(&[3u8; 4096]),
                fua: false,
            },
        })
        .unwrap();
    engine.wait(1).unwrap();
    let c = engine.pop_completion().unwrap();
    assert_eq!((c.tag, c.result), (2, Ok(4096)), "the other disk goes on");
    assert!(
        engine.now_ns() < start + 30_000_000_000,
        "the other disk did not wait"
    );
    engine.wait(1).unwrap();
    let c = engine.pop_completion().unwrap();
    assert_eq!(c.tag, 1);
    assert!(
        matches!(
            c.result,
            Err(IoError::TimedOut {
                timeout_ms: 30_000,
                ..
            })
        ),
        "{c:?}"
    );
    assert!(c.buf.is_none());
    assert_eq!(engine.now_ns(), start + 30_000_000_000);
    assert_eq!(engine.timed_out(), 1);
    engine.hang_disk(hung, false);
    assert_eq!(
        engine.contents(hung, 0, 4096),
        vec![1u8; 4096],
        "the hung write took no effect"
    );
    assert_eq!(read(&mut engine, hung, 0, 4096), Ok(vec![1u8; 4096]));

    engine.set_io_timeout(None);
    engine.hang_disk(hung, true);
    engine
        .submit(Request {
            device: hung,
            tag: 3,
            op: Op::Flush,
        })
        .unwrap();
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| engine.wait(1)));
    let why = waited.unwrap_err();
    let why = why.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(why.contains("would hang for ever (seed 11)"), "{why}");
}

/// An image of a disk is what it held when taken, whatever is written
/// after (its chunks are shared until written, never changed under it);
/// put back, the disk reads as it did, unflushed writes too; a blank image
/// reads as zeros; another disk's image, put in a smaller disk's place, is
/// cut at that disk's end.
#[test]
fn an_image_put_back_is_the_disk_as_it_was() {
    let (mut engine, id) = engine_with_disk(7, 4096);
    let other = engine.add_disk(geometry(32 * MIB, 4096, 4096, 1280 << 10));
    write(&mut engine, id, 0, &pattern(1, 128 << 10), false).unwrap();
    flush(&mut engine, id);
    write(&mut engine, id, 40 * MIB - 4096, &pattern(2, 8192), false).unwrap();
    let old = engine.image(id);
    // Overwritten, flushed and unflushed, after the image.
    write(&mut engine, id, 4096, &pattern(3, 4096), false).unwrap();
    flush(&mut engine, id);
    write(&mut engine, id, 64 << 10, &pattern(4, 4096), false).unwrap();
    assert_eq!(
        read(&mut engine, id, 4096, 4096).unwrap(),
        pattern(3, 4096).to_vec()
    );
    engine.put_image(id, &old);
    assert_eq!(
        read(&mut engine, id, 0, 128 << 10).unwrap(),
        pattern(1, 128 << 10).to_vec()
    );
    assert_eq!(
        read(&mut engine, id, 40 * MIB - 4096, 8192).unwrap(),
        pattern(2, 8192).to_vec(),
        "an unflushed write in the image is there"
    );
    engine.put_image(id, &cairn_io_sim::DiskImage::blank());
    assert!(engine.reads_zeros(id, 0, (64 * MIB) as usize));
    // The 64 MiB disk's image in a 32 MiB disk's place.
    engine.put_image(id, &old);
    engine.put_image(other, &old);
    assert_eq!(
        read(&mut engine, other, 0, 128 << 10).unwrap(),
        pattern(1, 128 << 10).to_vec()
    );
    assert_eq!(
        engine.contents(id, 40 * MIB - 4096, 8192),
        pattern(2, 8192).to_vec()
    );
}
