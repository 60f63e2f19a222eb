//! Open-loop latency includes a stall (no coordinated omission).
//!
//! A simulated disk hangs for half a second on the 1000th request
//! (cairn_io_sim::Stall). Open loop at 1,000 IO/s, every I/O due during the
//! hang waits for it, and the engine measures each from its intended start:
//! every arrival of the first 400 ms of the hang waits ≥ 100 ms, so about 400
//! I/Os show it. Closed loop, the same hang delays one I/O — the next ones are
//! simply not issued until it is over — so exactly one I/O is slow: the
//! contrast coordinated omission hides.
//!
//! The run keeps simulated time (EngineMaker::Simulated): the disk's latency
//! (10–50 µs), the hang and the engine's sleeps are all on one SimClock, so
//! every latency ≥ 100 ms is the hang and nothing else — a busy machine
//! cannot add one — and the five seconds simulated take no real time.

#![allow(clippy::unwrap_used)]

mod engine_support;

use std::sync::Arc;
use std::time::Duration;

use cairn_io::{Geometry, IoEngine};
use cairn_io_sim::{SimClock, SimEngine, Stall};
use cairn_kit::engine::EngineMaker;
use cairn_kit::model::{Arrival, Rate, Seek, XferSize};
use cairn_kit::result::RunRecord;
use engine_support::*;

const STALL: Duration = Duration::from_millis(500);
/// The request (counting from 0) the disk hangs on: about one second in at 1,000 IO/s.
const STALL_AT: u64 = 1000;
const MS: u64 = 1_000_000;

/// A simulated disk per sd, hanging once for [`STALL`] on request
/// [`STALL_AT`], in simulated time.
fn stalling_disk() -> EngineMaker {
    let clock = SimClock::new();
    let time = clock.clone();
    EngineMaker::Simulated(
        Arc::new(move |geometries: &[Geometry]| {
            let mut sim = SimEngine::new(7, 1024)
                .with_latency(10_000..50_000)
                .with_clock(time.clone());
            for g in geometries {
                sim.add_disk(g.clone());
            }
            Box::new(Stall::new(sim, STALL_AT, STALL, time.clone())) as Box<dyn IoEngine>
        }),
        Arc::new(clock),
    )
}

fn stall_run(rate: Rate, threads: u32, seconds: u64) -> RunRecord {
    let dir = scratch();
    // A real file only for the geometry: the I/O goes to the simulator.
    let lun = filled_file(&dir.path().join("stall.dat"), 16 * MIB);
    let plan = plan(
        vec![sd("sd1", &lun, None, threads)],
        vec![wd(
            "w",
            &["sd1"],
            100.0,
            XferSize::Fixed(8 * KIB),
            Seek::Random(100.0),
        )],
        vec![run(
            "r",
            &["w"],
            rate,
            Duration::from_secs(seconds),
            Arrival::Deterministic,
        )],
        false,
    );
    let result = open_and_bench(&plan, stalling_disk());
    assert_eq!(result.engine.kind, "simulated");
    let r = result.runs.into_iter().next().unwrap();
    println!("{}", describe(&r));
    assert_eq!(r.errors.count, 0, "{:?}", r.errors.first);
    r
}

#[test]
fn open_loop_latency_shows_the_stall_and_closed_loop_hides_it() {
    // Open loop: 1,000 IO/s for 3 s; the hang starts at 1 s.
    let open = stall_run(Rate::Fixed(1000.0), 8, 3);
    let all = &open.totals.all.all;
    let slow = count_at_least(all, 100 * MS);
    println!(
        "open loop: {slow} I/Os took ≥ 100 ms, max {:.1} ms",
        all.latency.max_us / 1e3
    );
    // The arrivals of the hang's first 400 ms, one a millisecond; the
    // backlog drains at 8 I/Os per 10–50 µs, adding a few.
    assert!(
        (400..=410).contains(&slow),
        "{slow} I/Os ≥ 100 ms: the stall was not charged to the I/Os it delayed; {}",
        describe(&open)
    );
    assert!(
        (500_000.0..=501_000.0).contains(&all.latency.max_us),
        "max {:.1} ms: the stalled I/O itself shows the 500 ms hang (and its own latency, within the histogram's precision)",
        all.latency.max_us / 1e3
    );
    // The backlog caught up after the hang: the rate was still held.
    assert!(open.rate_outcome.held, "{}", describe(&open));
    assert_eq!(open.rate_outcome.not_issued, 0);
    assert!(
        (all.iops - 1000.0).abs() / 1000.0 <= 0.02,
        "{}",
        describe(&open)
    );
    // The slow I/Os sit in the interval that held the hang, not spread about.
    let worst = open
        .intervals
        .iter()
        .max_by(|a, b| a.all.resp_max_ms.total_cmp(&b.all.resp_max_ms))
        .unwrap();
    assert!(worst.all.resp_max_ms >= 500.0);
    assert!(
        (1.5..=2.0).contains(&worst.end_s),
        "the hang ran from 1 s to 1.5 s; the worst interval ends at {} s",
        worst.end_s
    );

    // Closed loop, one thread: the same hang is one slow I/O.
    let closed = stall_run(Rate::Max, 1, 2);
    let all = &closed.totals.all.all;
    let slow = count_at_least(all, 100 * MS);
    println!(
        "closed loop: {slow} I/O took ≥ 100 ms of {} (max {:.1} ms)",
        all.ios,
        all.latency.max_us / 1e3
    );
    let slow_values: Vec<[u64; 2]> = all
        .histogram
        .counts
        .iter()
        .filter(|c| c[0] >= 100 * MS)
        .copied()
        .collect();
    println!("closed loop: slow values (ns, count): {slow_values:?}");
    assert!(all.ios > STALL_AT, "the run reached the stalling request");
    // 1.5 s of 10–50 µs I/Os one at a time, besides the hang.
    assert!(all.ios > 40_000, "{}", describe(&closed));
    assert_eq!(
        slow,
        1,
        "closed loop sees the hang once, not {slow} times: {}",
        describe(&closed)
    );
    assert!(
        slow_values.len() == 1 && slow_values[0][0] >= 500 * MS,
        "the one slow I/O waited out the whole 500 ms hang: {slow_values:?}"
    );
}
