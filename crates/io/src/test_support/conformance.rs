//! The conformance suite every [`IoEngine`] backend must pass: io_uring and sync
//! on files and on loop devices, and the simulated disk.
//!
//! Each check gets a fresh subject — an engine with one never-written device of at
//! least [`DEVICE_SIZE_MIN_BYTES`] — and panics with a message naming what broke.

use crate::buf::AlignedBuf;
use crate::engine::{DeviceId, IoEngine, IoError, Op, OpKind, Request, SubmitError};
use crate::geometry::DiscardSupport;

/// The smallest device the suite needs.
pub const DEVICE_SIZE_MIN_BYTES: u64 = 16 << 20;

/// An engine and a device on it, fresh for one check.
pub struct Subject {
    pub engine: Box<dyn IoEngine>,
    pub device: DeviceId,
}

/// One conformance check.
pub type Check = fn(&mut dyn IoEngine, DeviceId);

/// Every check, by name.
pub const CHECKS: &[(&str, Check)] = &[
    ("read_your_writes", read_your_writes),
    ("never_written_reads_zero", never_written_reads_zero),
    (
        "misaligned_requests_fail_and_write_nothing",
        misaligned_requests_fail_and_write_nothing,
    ),
    ("out_of_range_requests_fail", out_of_range_requests_fail),
    (
        "large_requests_are_split_to_max_transfer",
        large_requests_are_split_to_max_transfer,
    ),
    (
        "queue_depth_is_bounded_and_tags_complete_once",
        queue_depth_is_bounded_and_tags_complete_once,
    ),
    ("flush_and_fua", flush_and_fua),
    ("write_zeroes_reads_zero", write_zeroes_reads_zero),
    ("discard_as_the_geometry_says", discard_as_the_geometry_says),
    ("unknown_device_fails", unknown_device_fails),
    (
        "concurrent_mixed_io_matches_a_model",
        concurrent_mixed_io_matches_a_model,
    ),
];

/// Run every check, each on a fresh subject from `new_subject`.
pub fn run_all(new_subject: &mut dyn FnMut() -> Subject) {
    for (name, check) in CHECKS {
        let mut subject = new_subject();
        let engine_name = subject.engine.name();
        eprintln!("conformance[{engine_name}]: {name}");
        check(subject.engine.as_mut(), subject.device);
        assert_eq!(
            subject.engine.in_flight(),
            0,
            "{engine_name}: {name} left requests in flight"
        );
    }
}

/// Deterministic, position-dependent bytes, so a misplaced block is visible.
pub fn pattern(seed: u64, len: usize) -> AlignedBuf {
    let mut buf = AlignedBuf::zeroed(len);
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    buf
}

fn sector(engine: &dyn IoEngine, device: DeviceId) -> u64 {
    u64::from(
        engine
            .geometry(device)
            .expect("device attached")
            .logical_sector_bytes,
    )
}

fn write(
    engine: &mut dyn IoEngine,
    device: DeviceId,
    offset_bytes: u64,
    buf: AlignedBuf,
) -> Result<u64, IoError> {
    engine
        .execute(Request {
            device,
            tag: offset_bytes,
            op: Op::Write {
                offset_bytes,
                buf,
                fua: false,
            },
        })
        .expect("engine works")
        .result
}

fn read(
    engine: &mut dyn IoEngine,
    device: DeviceId,
    offset_bytes: u64,
    len: usize,
) -> (Result<u64, IoError>, AlignedBuf) {
    let completion = engine
        .execute(Request {
            device,
            tag: offset_bytes,
            op: Op::Read {
                offset_bytes,
                buf: AlignedBuf::zeroed(len),
            },
        })
        .expect("engine works");
    let buf = completion.buf.expect("a read hands its buffer back");
    assert_eq!(
        buf.len(),
        len,
        "the buffer handed back is the one submitted"
    );
    (completion.result, buf)
}

fn read_ok(
    engine: &mut dyn IoEngine,
    device: DeviceId,
    offset_bytes: u64,
    len: usize,
) -> AlignedBuf {
    let (result, buf) = read(engine, device, offset_bytes, len);
    assert_eq!(result, Ok(len as u64), "read of {len} at {offset_bytes}");
    buf
}

pub fn read_your_writes(engine: &mut dyn IoEngine, device: DeviceId) {
    let s = sector(engine, device);
    for (i, (offset, len)) in [
        (0, s),
        (s * 8, 4096.max(s)),
        (1 << 20, 64 << 10),
        (3 << 20, 1 << 20),
    ]
    .into_iter()
    .enumerate()
    {
        let data = pattern(i as u64 + 1, len as usize);
        assert_eq!(
            write(engine, device, offset, AlignedBuf::from_slice(&data)),
            Ok(len)
        );
        let back = read_ok(engine, device, offset, len as usize);
        assert!(
            back[..] == data[..],
            "data read back differs at offset {offset}, length {len}"
        );
    }
}

pub fn never_written_reads_zero(engine: &mut dyn IoEngine, device: DeviceId) {
    let back = read_ok(engine, device, 5 << 20, 256 << 10);
    assert!(
        back.iter().all(|b| *b == 0),
        "a never-written range must read as zeros"
    );
}

pub fn misaligned_requests_fail_and_write_nothing(engine: &mut dyn IoEngine, device: DeviceId) {
    let s = sector(engine, device);
    for (offset, len) in [(s / 2, s), (0, s + s / 2), (s, 0)] {
        let result = write(engine, device, offset, pattern(9, len as usize));
        assert!(
            matches!(result, Err(IoError::Misaligned { .. })),
            "write at {offset} len {len}: expected Misaligned, got {result:?}"
        );
    }
    let back = read_ok(engine, device, 0, (4 * s) as usize);
    assert!(
        back.iter().all(|b| *b == 0),
        "a refused write must not reach the device"
    );
    let (result, _) = read(engine, device, s / 2, s as usize);
    assert!(
        matches!(result, Err(IoError::Misaligned { .. })),
        "misaligned read: {result:?}"
    );
}

pub fn out_of_range_requests_fail(engine: &mut dyn IoEngine, device: DeviceId) {
    let s = sector(engine, device);
    let size = engine.geometry(device).expect("attached").size_bytes;
    let last = size - s;
    assert_eq!(
        write(engine, device, last, pattern(3, s as usize)),
        Ok(s),
        "the last sector is writable"
    );
    let (result, _) = read(engine, device, last, 2 * s as usize);
    assert!(
        matches!(result, Err(IoError::OutOfRange { .. })),
        "read across the end: {result:?}"
    );
    let result = write(engine, device, size, pattern(3, s as usize));
    assert!(
        matches!(result, Err(IoError::OutOfRange { .. })),
        "write past the end: {result:?}"
    );
    let result = write(engine, device, u64::MAX - s + 1, pattern(3, s as usize));
    assert!(
        matches!(result, Err(IoError::OutOfRange { .. })),
        "offset overflow: {result:?}"
    );
}

pub fn large_requests_are_split_to_max_transfer(engine: &mut dyn IoEngine, device: DeviceId) {
    let geometry = engine.geometry(device).expect("attached").clone();
    let max = geometry.max_transfer_aligned_bytes();
    let len: u64 = 4 << 20;
    let expected_pieces = len.div_ceil(max);
    let data = pattern(77, len as usize);
    let before = engine.stats().device_requests;
    assert_eq!(
        write(engine, device, 2 << 20, AlignedBuf::from_slice(&data)),
        Ok(len)
    );
    let after_write = engine.stats().device_requests;
    assert_eq!(
        after_write - before,
        expected_pieces,
        "a {len}-byte write on a device with max transfer {max} must be {expected_pieces} device requests"
    );
    let back = read_ok(engine, device, 2 << 20, len as usize);
    assert_eq!(
        engine.stats().device_requests - after_write,
        expected_pieces,
        "the read is split too"
    );
    assert!(back[..] == data[..], "split write and read round-trip");
}

pub fn queue_depth_is_bounded_and_tags_complete_once(engine: &mut dyn IoEngine, device: DeviceId) {
    let s = sector(engine, device) as usize;
    let depth = engine.depth_max().min(64);
    let block = 4096.max(s);
    for tag in 0..depth as u64 {
        let request = Request {
            device,
            tag,
            op: Op::Write {
                offset_bytes: tag * block as u64,
                buf: pattern(1000 + tag, block),
                fua: false,
            },
        };
        if let Err(SubmitError::QueueFull(_)) = engine.submit(request) {
            panic!("queue full after {tag} of depth_max {}", engine.depth_max());
        }
    }
    if depth == engine.depth_max() {
        let extra = Request {
            device,
            tag: 999_999,
            op: Op::Flush,
        };
        assert!(
            matches!(engine.submit(extra), Err(SubmitError::QueueFull(r)) if r.tag == 999_999),
            "one request beyond depth_max is handed back"
        );
    }
    let mut seen = vec![false; depth];
    while seen.iter().any(|s| !s) {
        engine.wait(1).expect("wait");
        while let Some(c) = engine.pop_completion() {
            assert_eq!(c.kind, OpKind::Write);
            assert_eq!(c.result, Ok(block as u64), "tag {}", c.tag);
            let slot = &mut seen[c.tag as usize];
            assert!(!*slot, "tag {} completed twice", c.tag);
            *slot = true;
        }
    }
    for tag in 0..depth as u64 {
        let back = read_ok(engine, device, tag * block as u64, block);
        assert!(back[..] == pattern(1000 + tag, block)[..], "tag {tag} data");
    }
}

pub fn flush_and_fua(engine: &mut dyn IoEngine, device: DeviceId) {
    let s = sector(engine, device) as usize;
    let data = pattern(5, s);
    let c = engine
        .execute(Request {
            device,
            tag: 1,
            op: Op::Write {
                offset_bytes: 0,
                buf: AlignedBuf::from_slice(&data),
                fua: true,
            },
        })
        .expect("engine");
    assert_eq!(c.result, Ok(s as u64), "FUA write");
    let c = engine
        .execute(Request {
            device,
            tag: 2,
            op: Op::Flush,
        })
        .expect("engine");
    assert_eq!((c.kind, c.result), (OpKind::Flush, Ok(0)), "flush");
    assert!(read_ok(engine, device, 0, s)[..] == data[..]);
}

pub fn write_zeroes_reads_zero(engine: &mut dyn IoEngine, device: DeviceId) {
    let len: u64 = 256 << 10;
    assert_eq!(write(engine, device, 0, pattern(6, len as usize)), Ok(len));
    let c = engine
        .execute(Request {
            device,
            tag: 1,
            op: Op::WriteZeroes {
                offset_bytes: 64 << 10,
                len_bytes: 64 << 10,
            },
        })
        .expect("engine");
    assert_eq!(c.result, Ok(64 << 10), "write-zeroes");
    let back = read_ok(engine, device, 0, len as usize);
    let original = pattern(6, len as usize);
    assert!(
        back[..64 << 10] == original[..64 << 10],
        "before the zeroed range is kept"
    );
    assert!(
        back[64 << 10..128 << 10].iter().all(|b| *b == 0),
        "zeroed range reads zero"
    );
    assert!(
        back[128 << 10..] == original[128 << 10..],
        "after the zeroed range is kept"
    );
}

pub fn discard_as_the_geometry_says(engine: &mut dyn IoEngine, device: DeviceId) {
    let discard = engine.geometry(device).expect("attached").discard;
    let len: u64 = 1 << 20;
    assert_eq!(
        write(engine, device, 4 << 20, pattern(8, len as usize)),
        Ok(len)
    );
    let c = engine
        .execute(Request {
            device,
            tag: 1,
            op: Op::Discard {
                offset_bytes: 4 << 20,
                len_bytes: len,
            },
        })
        .expect("engine");
    match discard {
        DiscardSupport::Unsupported => {
            assert!(
                matches!(c.result, Err(IoError::Unsupported { .. })),
                "{:?}",
                c.result
            )
        }
        DiscardSupport::Supported { reads_zeroes, .. } => {
            assert_eq!(c.result, Ok(len), "discard");
            if reads_zeroes {
                let back = read_ok(engine, device, 4 << 20, len as usize);
                assert!(
                    back.iter().all(|b| *b == 0),
                    "discarded range reads zero as the geometry promises"
                );
            }
        }
    }
}

pub fn unknown_device_fails(engine: &mut dyn IoEngine, _device: DeviceId) {
    let c = engine
        .execute(Request {
            device: DeviceId(4242),
            tag: 1,
            op: Op::Flush,
        })
        .expect("engine");
    assert_eq!(c.result, Err(IoError::UnknownDevice(DeviceId(4242))));
}

pub fn concurrent_mixed_io_matches_a_model(engine: &mut dyn IoEngine, device: DeviceId) {
    let s = sector(engine, device) as usize;
    let block = 8192.max(s);
    let blocks = 256u64;
    let mut model: Vec<Option<u64>> = vec![None; blocks as usize];
    let mut x: u64 = 0x5eed;
    let mut step = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Rounds of up to 16 concurrent requests on distinct blocks; then a model check.
    for round in 0..20u64 {
        let mut chosen: Vec<u64> = Vec::new();
        while chosen.len() < 16.min(engine.depth_max()) {
            let b = step() % blocks;
            if !chosen.contains(&b) {
                chosen.push(b);
            }
        }
        // Reads in a round touch blocks no write in the round touches, so each
        // must see the model as it stood before the round.
        let before = model.clone();
        let requests: Vec<Request> = chosen
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let offset_bytes = b * block as u64;
                let op = if step() % 2 == 0 {
                    model[*b as usize] = Some(round * 1000 + i as u64);
                    Op::Write {
                        offset_bytes,
                        buf: pattern(round * 1000 + i as u64, block),
                        fua: false,
                    }
                } else {
                    Op::Read {
                        offset_bytes,
                        buf: AlignedBuf::zeroed(block),
                    }
                };
                Request {
                    device,
                    tag: *b,
                    op,
                }
            })
            .collect();
        for c in engine.execute_all(requests).expect("engine") {
            assert_eq!(c.result, Ok(block as u64), "tag {}", c.tag);
            if c.kind == OpKind::Read {
                let back = c.buf.expect("read buffer");
                match before[c.tag as usize] {
                    Some(seed) => assert!(
                        back[..] == pattern(seed, block)[..],
                        "read of block {} in round {round}",
                        c.tag
                    ),
                    None => assert!(
                        back.iter().all(|v| *v == 0),
                        "read of never-written block {}",
                        c.tag
                    ),
                }
            }
        }
    }
    for b in 0..blocks {
        let back = read_ok(engine, device, b * block as u64, block);
        match model[b as usize] {
            Some(seed) => assert!(
                back[..] == pattern(seed, block)[..],
                "block {b} holds the wrong write"
            ),
            None => assert!(back.iter().all(|v| *v == 0), "block {b} was never written"),
        }
    }
}
