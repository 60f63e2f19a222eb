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

/// Reads in flight when the engine is dropped: Drop must wait for the kernel
/// before freeing their buffers. Buffers of 64 KiB come from the heap and are
/// reused at once, so a Drop that did not wait would let the kernel write file
/// data into the next owner's zeroed buffers.
#[test]
fn dropping_the_engine_with_io_in_flight_waits_for_the_kernel() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("full.img");
    std::fs::write(&path, vec![0x5Au8; 16 << 20]).unwrap();
    for round in 0..50 {
        let mut engine = UringEngine::new(64).unwrap();
        let device = DeviceFile::open(&path, OpenMode::READ, &Host::real()).unwrap();
        let id = engine.attach(device);
        for tag in 0..64u64 {
            engine
                .submit(Request {
                    device: id,
                    tag,
                    op: Op::Read {
                        offset_bytes: tag * (64 << 10),
                        buf: AlignedBuf::zeroed(64 << 10),
                    },
                })
                .unwrap();
        }
        // Hand everything to the kernel, take nothing back, and drop.
        engine.wait(0).unwrap();
        drop(engine);
        let next: Vec<AlignedBuf> = (0..64).map(|_| AlignedBuf::zeroed(64 << 10)).collect();
        std::thread::sleep(std::time::Duration::from_millis(2));
        for buf in &next {
            assert!(
                buf.iter().all(|b| *b == 0),
                "round {round}: a read landed in freed memory"
            );
        }
    }
}
