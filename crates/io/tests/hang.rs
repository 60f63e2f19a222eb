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
use cairn_io::{AlignedBuf, DeviceFile, FileEngine, IoError, Op, OpKind, OpenMode, Request};

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
        let mut engine = engine;
        let back = bounded(
            &format!("{name}: a read once the device answers"),
            move || {
                let back = engine.read_at(id, 0, 64 << 10).unwrap();
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
