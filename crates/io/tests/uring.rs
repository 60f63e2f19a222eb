//! io_uring-specific behaviour the shared conformance suite does not reach: far
//! more pieces than the ring holds, and dropping the engine with I/O in flight.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::fs::File;

use cairn_io::host::Host;
use cairn_io::test_support::conformance::pattern;
use cairn_io::uring_engine::UringEngine;
use cairn_io::{AlignedBuf, DeviceFile, FileEngine, IoEngine, Op, OpenMode, Request};

fn file_device(dir: &tempfile::TempDir, max_transfer: u32) -> DeviceFile {
    let path = dir.path().join("disk.img");
    File::create(&path).unwrap().set_len(64 << 20).unwrap();
    let mut device = DeviceFile::open(&path, OpenMode::WRITE_EXCLUSIVE, &Host::real()).unwrap();
    device.limit_max_transfer(max_transfer);
    device
}

#[test]
fn a_request_of_far_more_pieces_than_the_ring_holds_goes_through_the_backlog() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // Depth 1: an 8-entry ring. A 2 MiB write in 4 KiB pieces is 512 SQEs.
    let mut engine = UringEngine::new(1).unwrap();
    let sector = 4096;
    let id = engine.attach(file_device(&dir, sector));
    let data = pattern(3, 2 << 20);
    engine
        .write_at(id, 0, AlignedBuf::from_slice(&data), false)
        .unwrap();
    assert_eq!(engine.stats().device_requests, 512);
    let back = engine.read_at(id, 0, 2 << 20).unwrap();
    assert!(back[..] == data[..]);
    assert_eq!(engine.stats().device_requests, 1024);
}

#[test]
fn dropping_the_engine_with_io_in_flight_waits_for_the_kernel() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for _ in 0..20 {
        let mut engine = UringEngine::new(8).unwrap();
        let id = engine.attach(file_device(&dir, 64 << 10));
        for tag in 0..8u64 {
            engine
                .submit(Request {
                    device: id,
                    tag,
                    op: Op::Read {
                        offset_bytes: tag << 20,
                        buf: AlignedBuf::zeroed(1 << 20),
                    },
                })
                .unwrap();
        }
        // Hand everything to the kernel, take nothing back, and drop: the kernel
        // must not be left writing into freed buffers (ASan/valgrind would see it;
        // here the test must simply not crash or hang).
        engine.wait(0).unwrap();
        drop(engine);
    }
}
