//! A device that stops answering, for real: a file on a FUSE file system of
//! the test's own that holds every I/O while blocked
//! (`test_support::hang_fs`). With an I/O timeout set, each backend
//! completes a request to it with `TimedOut` after the timeout, keeps going
//! for other requests, and can be dropped with the request still held in
//! the kernel. Every wait on the engine runs under a bound (a thread and a
//! channel): without timeouts these tests fail after the bound instead of
//! hanging.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::fs::File;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use cairn_io::host::Host;
use cairn_io::sync_engine::SyncEngine;
use cairn_io::test_support::conformance::pattern;
use cairn_io::test_support::hang_fs::HangFs;
use cairn_io::test_support::prerequisite;
use cairn_io::uring_engine::UringEngine;
use cairn_io::{
    AlignedBuf, Completion, DeviceFile, FileEngine, IoEngine, IoError, Op, OpKind, OpenMode,
    Request,
};

/// How long a step may take before the test calls it hung: far beyond the
/// timeout set, so it bounds a failure and never gates a pass.
const BOUND: Duration = Duration::from_secs(60);
const TIMEOUT: Duration = Duration::from_millis(300);

/// A hanging file system over a 16 MiB backing file in `dir`, or why not.
fn hang_fs(dir: &Path) -> Option<HangFs> {
    let backing = dir.join("backing.img");
    File::create(&backing).unwrap().set_len(16 << 20).unwrap();
    let mnt = dir.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    prerequisite::or_skip(HangFs::mount(&mnt, &backing))
}

/// Run `f` on a thread of its own; its result, or a failure naming `what`
/// if it has not returned within [`BOUND`].
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(BOUND)
        .unwrap_or_else(|_| panic!("{what} did not return within {BOUND:?}: it hangs"))
}

fn engines() -> Vec<(&'static str, Box<dyn FileEngine>)> {
    vec![
        ("io_uring", Box::new(UringEngine::new(8).unwrap())),
        ("sync", Box::new(SyncEngine::new(8))),
    ]
}

/// Read the first 64 KiB of `device`, a device that held requests past
/// their timeout and answers again. Until the engine has its held requests
/// back (io_uring reaps them as the kernel answers; the sync engine's
/// thread lets go of the device as its system call returns), a request to
/// it still times out at once: polled, bounded by the caller, never a
/// synchronisation by time.
fn read_once_answered<E: IoEngine + ?Sized>(
    engine: &mut E,
    device: cairn_io::DeviceId,
) -> AlignedBuf {
    loop {
        let c = engine.execute(read(device, 100)).unwrap();
        match c.result {
            Ok(_) => return c.buf.unwrap(),
            Err(IoError::TimedOut { .. }) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("a read once the device answers: {e}"),
        }
    }
}

fn read(device: cairn_io::DeviceId, tag: u64) -> Request {
    Request {
        device,
        tag,
        op: Op::Read {
            offset_bytes: 0,
            buf: AlignedBuf::zeroed(64 << 10),
        },
    }
}

#[test]
fn a_request_to_a_hung_device_times_out_and_the_engine_goes_on() {
    for (name, mut engine) in engines() {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let Some(fs) = hang_fs(dir.path()) else {
            return;
        };
        let device =
            DeviceFile::open(&fs.file(), OpenMode::WRITE_EXCLUSIVE, &Host::real()).unwrap();
        let id = engine.attach(device);
        let data = pattern(7, 64 << 10);
        engine
            .write_at(id, 0, AlignedBuf::from_slice(&data), false)
            .unwrap();
        engine.set_io_timeout(Some(TIMEOUT));
        fs.block();
        let (engine, completions) =
            bounded(&format!("{name}: a read of the hung device"), move || {
                let mut engine = engine;
                let mut out = Vec::new();
                engine.submit(read(id, 1)).unwrap();
                engine.submit(read(id, 2)).unwrap();
                while out.len() < 2 {
                    engine.wait(1).unwrap();
                    out.extend(std::iter::from_fn(|| engine.pop_completion()));
                }
                (engine, out)
            });
        // The requests really reached the device and were held there.
        assert!(fs.held_total() >= 1, "{name}: nothing was held");
        for c in &completions {
            assert!(
                matches!(
                    c.result,
                    Err(IoError::TimedOut {
                        kind: OpKind::Read,
                        timeout_ms: 300,
                        ..
                    })
                ),
                "{name}: {c:?}"
            );
            assert_eq!(
                c.result.as_ref().unwrap_err().errno(),
                Some(libc::ETIMEDOUT)
            );
        }
        assert_eq!(
            engine.in_flight(),
            0,
            "{name}: a timed-out request is no longer in flight"
        );
        // The device answers again: the engine goes on (the parked
        // requests are reaped beside new ones), and reads what is there.
        fs.unblock();
        let back = bounded(
            &format!("{name}: a read once the device answers"),
            move || {
                let mut engine = engine;
                let back = read_once_answered(engine.as_mut(), id);
                assert_eq!(engine.in_flight(), 0);
                back
            },
        );
        assert!(back[..] == data[..], "{name}: what was written reads back");
    }
}

#[test]
fn an_engine_with_a_request_held_by_a_hung_device_can_be_dropped() {
    for (name, mut engine) in engines() {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let Some(fs) = hang_fs(dir.path()) else {
            return;
        };
        let device =
            DeviceFile::open(&fs.file(), OpenMode::WRITE_EXCLUSIVE, &Host::real()).unwrap();
        let id = engine.attach(device);
        engine.set_io_timeout(Some(TIMEOUT));
        fs.block();
        bounded(
            &format!("{name}: dropping an engine whose write is held"),
            move || {
                let mut engine = engine;
                engine
                    .submit(Request {
                        device: id,
                        tag: 1,
                        op: Op::Write {
                            offset_bytes: 0,
                            buf: AlignedBuf::from_slice(&pattern(9, 64 << 10)),
                            fua: false,
                        },
                    })
                    .unwrap();
                engine.wait(1).unwrap();
                let c = engine.pop_completion().unwrap();
                assert!(matches!(c.result, Err(IoError::TimedOut { .. })), "{c:?}");
                assert!(c.buf.is_none(), "the device may still hold the buffer");
                drop(engine);
            },
        );
        assert!(fs.held_total() >= 1, "{name}: nothing was held");
        // The held write lands once the device answers; the fixture's
        // drop unmounts cleanly (nothing of the engine's is left waiting).
        fs.unblock();
        drop(fs);
    }
}

/// A hung device must not starve the others on the same engine: many
/// reads held by it, and writes into holes of a healthy file (each needs a
/// kernel worker) submitted behind them. Reads of a FUSE file do not keep
/// a worker while the daemon holds them (they wait as FUSE background
/// requests, of which this file system allows 64): the flushes below do.
#[test]
fn requests_held_by_a_hung_device_do_not_starve_a_healthy_one() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let Some(fs) = hang_fs(dir.path()) else {
        return;
    };
    let healthy_path = dir.path().join("healthy.img");
    File::create(&healthy_path)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let mut engine = UringEngine::new(64).unwrap();
    let hung = engine
        .attach(DeviceFile::open(&fs.file(), OpenMode::WRITE_EXCLUSIVE, &Host::real()).unwrap());
    let healthy = engine
        .attach(DeviceFile::open(&healthy_path, OpenMode::WRITE_EXCLUSIVE, &Host::real()).unwrap());
    engine.set_io_timeout(Some(Duration::from_secs(3)));
    fs.block();
    let held = 24u64;
    let (hung_results, healthy_results) = bounded("requests beside a hung device", move || {
        let mut engine = engine;
        for tag in 0..held {
            engine.submit(read(hung, tag)).unwrap();
        }
        // Into holes: each needs an io-wq worker.
        for i in 0..16u64 {
            engine
                .submit(Request {
                    device: healthy,
                    tag: 1000 + i,
                    op: Op::Write {
                        offset_bytes: i * (2 << 20),
                        buf: AlignedBuf::from_slice(&pattern(i, 64 << 10)),
                        fua: false,
                    },
                })
                .unwrap();
        }
        let mut out = Vec::new();
        while out.len() < held as usize + 16 {
            engine.wait(1).unwrap();
            out.extend(std::iter::from_fn(|| engine.pop_completion()));
        }
        let (healthy, hung): (Vec<_>, Vec<_>) = out.into_iter().partition(|c| c.tag >= 1000);
        (hung, healthy)
    });
    assert!(fs.held_total() >= 1, "nothing was held");
    for c in &healthy_results {
        assert!(c.result.is_ok(), "the healthy device's write: {c:?}");
    }
    for c in &hung_results {
        assert!(
            matches!(c.result, Err(IoError::TimedOut { .. })),
            "the hung device's read: {c:?}"
        );
    }
    fs.unblock();
    drop(fs);
}

/// A healthy file beside the hanging one, in `dir`: 64 MiB, sparse.
fn healthy_file(dir: &Path) -> DeviceFile {
    let path = dir.join("healthy.img");
    File::create(&path).unwrap().set_len(64 << 20).unwrap();
    DeviceFile::open(&path, OpenMode::WRITE_EXCLUSIVE, &Host::real()).unwrap()
}

/// A healthy disk's I/O gets a timeout far beyond what it takes, even on a
/// loaded machine: a timed-out healthy request here means it was starved,
/// never that it was slow.
const HEALTHY_TIMEOUT: Duration = Duration::from_secs(10);

/// A write into a hole of the healthy file (it allocates, so io_uring runs
/// it on a kernel worker) and a flush of it (always on a worker).
fn healthy_io(device: cairn_io::DeviceId) -> Vec<Request> {
    vec![
        Request {
            device,
            tag: 1000,
            op: Op::Write {
                offset_bytes: 8 << 20,
                buf: AlignedBuf::from_slice(&pattern(11, 64 << 10)),
                fua: false,
            },
        },
        Request {
            device,
            tag: 1001,
            op: Op::Flush,
        },
    ]
}

/// `n` flushes of `device`, tagged from 0.
fn flushes(device: cairn_io::DeviceId, n: u64) -> Vec<Request> {
    (0..n)
        .map(|tag| Request {
            device,
            tag,
            op: Op::Flush,
        })
        .collect()
}

/// What cost a healthy disk its place in `cli/tests/hung_disk.rs`. io_uring
/// runs every fsync on a kernel worker of the thread that entered it, and
/// a thread has few (by default min(ring entries, 4 per CPU): at most 8
/// after a first ring of 8 entries). A fsync the hung device holds keeps
/// its worker until the device answers, whatever the engine's timeout (a
/// FUSE request is waited for uninterruptibly once read, and the next
/// fsync of the file waits for the first one's inode lock). Before the
/// engine kept a thread's worker bound above its pieces in the kernel
/// (`uring_workers.rs`), eight such fsyncs left the thread no worker: the
/// healthy file's write and flush, on another engine of the same thread,
/// waited for one until they timed out, as a healthy disk's commit did
/// there.
#[test]
fn flushes_a_hung_device_holds_leave_the_thread_workers_for_a_healthy_one() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let Some(fs) = hang_fs(dir.path()) else {
        return;
    };
    let hung_file = DeviceFile::open(&fs.file(), OpenMode::WRITE_EXCLUSIVE, &Host::real()).unwrap();
    let healthy_device = healthy_file(dir.path());
    fs.block();
    // On a thread of its own: its kernel workers are made for this test.
    let (held, healthy, hung_engine) = bounded("a healthy device's I/O", move || {
        let mut hung_engine = UringEngine::new(8).unwrap();
        let hung = hung_engine.attach(hung_file);
        hung_engine.set_io_timeout(Some(TIMEOUT));
        let held = hung_engine.execute_all(flushes(hung, 8)).unwrap();
        let mut engine = UringEngine::new(4).unwrap();
        let healthy = engine.attach(healthy_device);
        engine.set_io_timeout(Some(HEALTHY_TIMEOUT));
        let done = engine.execute_all(healthy_io(healthy)).unwrap();
        (held, done, hung_engine)
    });
    assert!(fs.held_total() >= 1, "nothing was held");
    for c in &held {
        assert!(
            matches!(c.result, Err(IoError::TimedOut { .. })),
            "the hung device's flush: {c:?}"
        );
    }
    for c in &healthy {
        assert!(c.result.is_ok(), "the healthy device's {}: {c:?}", c.kind);
    }
    fs.unblock();
    drop(hung_engine);
    drop(fs);
}

/// Requests a hung device holds past their timeout (parked: the kernel
/// still has their buffers) take no room in the ring from another device's.
/// Before, they counted against its entries, and with a ring's worth parked
/// a healthy device's read waited in the engine's backlog until it timed
/// out. (Reads of a FUSE file leave their kernel worker while the daemon
/// holds them, so this is the ring's room alone.)
#[test]
fn requests_parked_on_a_hung_device_leave_the_ring_room_for_a_healthy_one() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let Some(fs) = hang_fs(dir.path()) else {
        return;
    };
    let hung_file = DeviceFile::open(&fs.file(), OpenMode::WRITE_EXCLUSIVE, &Host::real()).unwrap();
    let healthy_device = healthy_file(dir.path());
    fs.block();
    let (held, healthy, engine) = bounded("a healthy device's read", move || {
        // Depth 8: an 8-entry ring, filled by the hung device's reads.
        let mut engine = UringEngine::new(8).unwrap();
        let hung = engine.attach(hung_file);
        let healthy = engine.attach(healthy_device);
        engine.set_io_timeout(Some(TIMEOUT));
        let held = engine
            .execute_all((0..8).map(|tag| read(hung, tag)).collect())
            .unwrap();
        engine.set_io_timeout(Some(HEALTHY_TIMEOUT));
        let done = engine.execute_all(vec![read(healthy, 1000)]).unwrap();
        (held, done, engine)
    });
    assert!(fs.held_total() >= 1, "nothing was held");
    for c in &held {
        assert!(
            matches!(c.result, Err(IoError::TimedOut { .. })),
            "the hung device's read: {c:?}"
        );
    }
    assert!(
        healthy[0].result.is_ok(),
        "the healthy device's read: {:?}",
        healthy[0]
    );
    fs.unblock();
    drop(engine);
    drop(fs);
}

/// A device that holds a request past its timeout is sent no more: the
/// next request to it completes with `TimedOut` at once, without reaching
/// it (it does not answer, and the one before it waited the timeout), so a
/// hung device holds a bounded share of the kernel's workers and of the
/// sync engine's threads. A healthy device's requests go on. Once the
/// device answers, it is sent requests again. Before, the sync engine
/// abandoned a thread per timed-out request and, past 16 on one engine,
/// timed out every request at once, a healthy device's too.
#[test]
fn a_device_that_holds_a_timed_out_request_is_sent_no_more_and_the_others_go_on() {
    for (name, mut engine) in engines() {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let Some(fs) = hang_fs(dir.path()) else {
            return;
        };
        let hung = engine.attach(
            DeviceFile::open(&fs.file(), OpenMode::WRITE_EXCLUSIVE, &Host::real()).unwrap(),
        );
        let healthy = engine.attach(healthy_file(dir.path()));
        engine.set_io_timeout(Some(TIMEOUT));
        fs.block();
        let (engine, first, later, healthy) = bounded(
            &format!("{name}: requests beside a hung device"),
            move || {
                let mut engine = engine;
                let first = engine.execute(read(hung, 1)).unwrap();
                // One past the sync engine's old bound of 16 abandoned threads.
                let later: Vec<_> = (2..19)
                    .map(|tag| engine.execute(read(hung, tag)).unwrap())
                    .collect();
                engine.set_io_timeout(Some(HEALTHY_TIMEOUT));
                let healthy = engine.execute_all(healthy_io(healthy)).unwrap();
                (engine, first, later, healthy)
            },
        );
        for c in &healthy {
            assert!(
                c.result.is_ok(),
                "{name}: the healthy device's {}: {c:?}",
                c.kind
            );
        }
        assert!(
            matches!(first.result, Err(IoError::TimedOut { .. })),
            "{name}: {first:?}"
        );
        for c in &later {
            assert!(
                matches!(c.result, Err(IoError::TimedOut { .. })),
                "{name}: {c:?}"
            );
            assert!(
                c.buf.is_some(),
                "{name}: it never reached the device: {c:?}"
            );
        }
        assert_eq!(
            fs.held_total(),
            1,
            "{name}: only the first request reached the hung device"
        );
        // The device answers: its held request is given back, and it is
        // sent requests again.
        fs.unblock();
        bounded(
            &format!("{name}: a read once the device answers"),
            move || {
                let mut engine = engine;
                read_once_answered(engine.as_mut(), hung)
            },
        );
    }
}

/// A write to a FUSE file is tried in the thread that submits it (FUSE
/// files claim to take non-blocking submissions), and FUSE then waits
/// there, uninterruptibly, for the file's inode lock — which a flush the
/// daemon holds keeps. So the submitting thread stays in the kernel until
/// the device answers: none of its timeouts can fire, and a healthy
/// device's write submitted with it is issued only when the thread comes
/// back, long past its deadline, and is timed out at once. This is how
/// `cli/tests/hung_disk.rs` lost a healthy disk: the service's threads sat
/// in such writes, the offline's drain waited for them to its bound
/// (40 s), and when the device answered, each healthy copy written beside
/// the hung one was charged the whole wait. Every request to a FUSE file
/// must go to the kernel's workers instead, leaving the submitter free.
#[test]
fn a_write_a_hung_fuse_file_cannot_take_does_not_hold_the_thread_that_submits_it() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let Some(fs) = hang_fs(dir.path()) else {
        return;
    };
    let flusher_file =
        DeviceFile::open(&fs.file(), OpenMode::WRITE_EXCLUSIVE, &Host::real()).unwrap();
    let hung_file = flusher_file.try_clone().unwrap();
    let healthy_device = healthy_file(dir.path());
    fs.block();
    let (flusher, writes, engine) = bounded("a write beside a held flush", move || {
        // A flush the daemon holds, on an engine of its own: it keeps the
        // file's inode lock until the device answers.
        let mut flusher = UringEngine::new(1).unwrap();
        let id = flusher.attach(flusher_file);
        flusher.set_io_timeout(Some(TIMEOUT));
        let c = flusher.execute(Request {
            device: id,
            tag: 0,
            op: Op::Flush,
        });
        assert!(
            matches!(
                c,
                Ok(Completion {
                    result: Err(IoError::TimedOut { .. }),
                    ..
                })
            ),
            "the held flush: {c:?}"
        );
        // A write to the hung file, and one to the healthy file entered
        // into the kernel with it.
        let mut engine = UringEngine::new(8).unwrap();
        let hung = engine.attach(hung_file);
        let healthy = engine.attach(healthy_device);
        engine.set_io_timeout(Some(TIMEOUT));
        engine
            .submit(Request {
                device: hung,
                tag: 1,
                op: Op::Write {
                    offset_bytes: 0,
                    buf: AlignedBuf::from_slice(&pattern(5, 64 << 10)),
                    fua: false,
                },
            })
            .unwrap();
        engine.set_io_timeout(Some(HEALTHY_TIMEOUT));
        let mut healthy_write = healthy_io(healthy);
        healthy_write.truncate(1);
        engine.submit(healthy_write.pop().unwrap()).unwrap();
        let mut out = Vec::new();
        while out.len() < 2 {
            engine.wait(1).unwrap();
            out.extend(std::iter::from_fn(|| engine.pop_completion()));
        }
        out.sort_by_key(|c| c.tag);
        (flusher, out, engine)
    });
    assert!(
        matches!(writes[0].result, Err(IoError::TimedOut { .. })),
        "the hung file's write: {:?}",
        writes[0]
    );
    assert!(
        writes[1].result.is_ok(),
        "the healthy file's write: {:?}",
        writes[1]
    );
    fs.unblock();
    drop((flusher, engine));
    drop(fs);
}
