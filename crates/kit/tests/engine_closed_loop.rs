//! Closed loop on real files, on both real engines: the mix of directions and
//! transfer sizes is what the workload asked for; the sync engine gives an
//! sd's every thread its own OS thread. A curve runs its max, then points at
//! percentages of what max achieved (in simulated time, where what max
//! achieved and whether a point held its rate are the seed's, not the
//! machine's).
//!
//! Counts are compared to what was asked within a tolerance that is the
//! larger of the brief's (1% of the direction mix, 2% of the mean transfer)
//! and 4.5 standard deviations of the count actually done — so a short run
//! on a busy machine is judged fairly, and a long one as tightly as asked.

#![allow(clippy::unwrap_used)]

mod engine_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use cairn_io::host::Host;
use cairn_kit::engine::{run_bench, BenchOptions, EngineMaker, Observer};
use cairn_kit::model::{Arrival, Plan, Rate, RunDef, Seek, XferSize};
use cairn_kit::result::{BenchResult, IntervalRecord};
use engine_support::*;

/// Names of this process's threads right now.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|s| s.trim().to_string())
        .collect()
}

/// Counts the engine's I/O threads while a run is under way.
#[derive(Default)]
struct ThreadCounter {
    io_threads_max: usize,
}

impl Observer for ThreadCounter {
    fn interval(&mut self, _run: &RunDef, _record: &IntervalRecord) {
        let n = thread_names()
            .iter()
            .filter(|n| n.starts_with("cairn-io-"))
            .count();
        self.io_threads_max = self.io_threads_max.max(n);
    }
}

/// Run with an observer counting I/O threads; returns the result and that count.
fn bench_counting_threads(plan: &Plan, engine: EngineMaker) -> (BenchResult, usize) {
    let targets = open(plan);
    let host = Host::real();
    let interrupted = std::sync::atomic::AtomicBool::new(false);
    let options = BenchOptions {
        engine,
        workers: None,
        seed: SEED,
        host: &host,
        interrupted: &interrupted,
        end_pause: None,
    };
    let mut counter = ThreadCounter::default();
    let result = run_bench(plan, &targets, &options, &mut counter).unwrap();
    (result, counter.io_threads_max)
}

/// `count` of `n` trials is `p` of them, within the larger of `share` of
/// `n` and 4.5 binomial standard deviations.
fn assert_share(what: &str, count: u64, n: u64, p: f64, share: f64) {
    let expected = p * n as f64;
    let sigma = (n as f64 * p * (1.0 - p)).sqrt();
    let tolerance = (share * n as f64).max(4.5 * sigma);
    println!("{what}: {count} of {n} (expected {expected:.0} ± {tolerance:.0}; 1σ = {sigma:.0})");
    assert!(
        (count as f64 - expected).abs() <= tolerance,
        "{what}: {count} of {n}, expected {expected:.0} ± {tolerance:.0}"
    );
}

fn mix_plan(lun: &Path, threads: u32, xfer: XferSize, rdpct: f64) -> Plan {
    plan(
        vec![sd("sd1", lun, Some(64 * MIB), threads)],
        vec![wd("w", &["sd1"], rdpct, xfer, Seek::Random(100.0))],
        vec![run(
            "mix",
            &["w"],
            Rate::Max,
            Duration::from_secs(2),
            Arrival::Exponential,
        )],
        false,
    )
}

#[test]
fn a_70_30_mix_of_8k_on_the_sync_and_uring_engines() {
    let _serial = serial();
    let dir = scratch();
    let lun = dir.path().join("mix.dat");
    let mut engines = vec![("sync", EngineMaker::Sync)];
    match uring_available() {
        None => engines.push(("uring", EngineMaker::Uring)),
        Some(reason) => {
            cairn_io::test_support::prerequisite::missing(&format!("the io_uring half: {reason}"))
        }
    }
    for (name, engine) in engines {
        let plan = mix_plan(&lun, 4, XferSize::Fixed(8 * KIB), 70.0);
        let (result, io_threads) = bench_counting_threads(&plan, engine);
        let r = &result.runs[0];
        println!("{name}: {} — {io_threads} I/O threads", describe(r));
        assert_eq!(result.engine.kind, name);
        if name == "sync" {
            // Per-thread synchronous semantics: threads=4 is 4 OS threads,
            // each with one I/O at a time.
            assert_eq!(result.engine.workers, 4);
            assert_eq!(io_threads, 4, "OS threads named cairn-io-* during the run");
        } else {
            assert!(io_threads >= 1);
        }
        assert_eq!(r.errors.count, 0, "{:?}", r.errors.first);
        let t = &r.totals.all;
        assert!(t.read.ios > 0 && t.write.ios > 0, "{}", describe(r));
        assert_eq!(t.all.ios, t.read.ios + t.write.ios);
        assert_share(&format!("{name} reads"), t.read.ios, t.all.ios, 0.70, 0.01);
        // Every I/O is one whole transfer.
        for (dir, d) in [("all", &t.all), ("read", &t.read), ("write", &t.write)] {
            assert_eq!(d.bytes, d.ios * 8 * KIB, "{name} {dir}");
            assert_eq!(d.bytes_per_io, 8192.0, "{name} {dir}");
        }
        // The intervals add up to the totals (no warm-up here).
        let interval_ios: u64 = r.intervals.iter().map(|i| i.all.ios).sum();
        assert_eq!(interval_ios, t.all.ios);
        // Every sd thread was busy: at most `threads` outstanding, on average most of them.
        let qd = t.all.iops * t.all.latency.mean_us / 1e6;
        assert!(
            qd <= 4.0 * 1.05,
            "{name}: mean queue depth {qd:.2} above threads=4"
        );
    }
}

#[test]
fn an_xfersize_distribution_averages_its_sizes() {
    let _serial = serial();
    let dir = scratch();
    let lun = dir.path().join("dist.dat");
    let xfer = XferSize::Distribution(vec![(4 * KIB, 50.0), (64 * KIB, 50.0)]);
    let plan = mix_plan(&lun, 8, xfer, 100.0);
    let result = open_and_bench(&plan, default_engine());
    let r = &result.runs[0];
    println!("{}", describe(r));
    let all = &r.totals.all.all;
    assert!(all.ios > 0);
    // Only the two sizes: bytes = 4k·a + 64k·b with a + b = ios.
    let big = (all.bytes - 4 * KIB * all.ios) / (60 * KIB);
    assert_eq!(
        4 * KIB * (all.ios - big) + 64 * KIB * big,
        all.bytes,
        "bytes are not made of 4k and 64k transfers"
    );
    assert_share(
        "64k transfers",
        big,
        all.ios,
        0.5,
        0.02 * 34_816.0 / 61_440.0,
    );
    // Which is the mean transfer within 2% of 34,816 bytes when the count allows.
    let expected: f64 = 34_816.0;
    let sigma = 30_720.0 / (all.ios as f64).sqrt();
    let tolerance = (0.02 * expected).max(4.5 * sigma);
    println!(
        "bytes/io {:.0}, expected {expected} ± {tolerance:.0}",
        all.bytes_per_io
    );
    assert!((all.bytes_per_io - expected).abs() <= tolerance);
}

#[test]
fn a_curve_runs_max_then_its_points_at_percentages_of_max() {
    let dir = scratch();
    // The file gives the geometry; the I/O goes to the simulator.
    let lun = filled_file(&dir.path().join("curve.dat"), 16 * MIB);
    let text = format!(
        "sd=sd1,lun={},threads=4\n\
         wd=w,sd=sd1,rdpct=100,xfersize=8k,seekpct=random\n\
         rd=c,wd=w,iorate=curve,curve=(50,100),elapsed=2,interval=0.5\n",
        lun.display()
    );
    let plan = cairn_kit::vdbench::parse_str(
        &dir.path().join("curve.vdb"),
        &text,
        &BTreeMap::new(),
        &mut |p: &Path| std::fs::read_to_string(p),
    )
    .unwrap();
    // Four threads on a disk answering in 100–300 µs: about 20,000 IO/s.
    let result = open_and_bench(&plan, simulated_disk(SEED, 100_000..300_000));
    for r in &result.runs {
        println!("{}", describe(r));
    }
    assert_eq!(result.runs.len(), 3, "max, 50%, 100%");
    let max_run = &result.runs[0];
    assert_eq!(max_run.rate, Rate::Max);
    assert_eq!(max_run.target_iops, None);
    let max = max_run.totals.all.all.iops;
    // Little's law: four I/Os always in flight, 200 µs each on average.
    assert!(
        (19_000.0..=21_000.0).contains(&max),
        "{}",
        describe(max_run)
    );
    for (r, pct) in result.runs[1..].iter().zip([50.0, 100.0]) {
        assert_eq!(r.rate, Rate::CurvePct(pct));
        let curve = r.curve.unwrap();
        assert_eq!(
            (curve.id, curve.pct),
            (max_run.curve.unwrap().id, Some(pct))
        );
        let want = max * pct / 100.0;
        let got = r.target_iops.unwrap();
        assert!(
            (got - want).abs() <= 1e-9 * want,
            "{pct}%: target {got}, expected {want}"
        );
        assert_eq!(r.rate_outcome.target_iops, Some(got));
        assert!(r.totals.all.all.ios > 0);
    }
    // Half of max is well within what the disk does: held, at half of max
    // (within 3%: 20,000 seeded exponential arrivals, σ ≈ 0.7%).
    let half = &result.runs[1];
    assert!(half.rate_outcome.held, "{}", describe(half));
    assert_eq!(half.rate_outcome.not_issued, 0, "{}", describe(half));
    let got = half.totals.all.all.iops;
    assert!(
        (got - 0.5 * max).abs() <= 0.03 * 0.5 * max,
        "the 50% point ran at {got:.0} IO/s, not half of max {max:.0}"
    );
    // The curve as the reports read it: max first, then the points in order.
    let ordered: Vec<Option<f64>> = result
        .curve(max_run.curve.unwrap().id)
        .iter()
        .map(|r| r.curve.unwrap().pct)
        .collect();
    assert_eq!(ordered, vec![None, Some(50.0), Some(100.0)]);
}
