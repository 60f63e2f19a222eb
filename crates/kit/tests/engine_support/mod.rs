//! Shared material for the engine's end-to-end tests (`engine_*.rs`): plans
//! built from the model structs, targets opened as the CLI opens files (with
//! an opener of scratch files: Cairn's overwrite rules are not the kit's), a
//! bench run with a fixed seed, a simulated disk in simulated time (where a
//! test asserts rates and latencies: they are then the seed's, on any
//! machine), and a lock that keeps the real-time runs of one test binary
//! from sharing the machine's cores with each other.

#![allow(dead_code, clippy::unwrap_used)]

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use cairn_io::host::Host;
use cairn_io::{DeviceFile, Geometry, IoEngine, OpenMode};
use cairn_io_sim::{SimClock, SimEngine};
use cairn_kit::engine::{run_bench, BenchOptions, EngineMaker, Quiet};
use cairn_kit::histogram::LatencyHistogram;
use cairn_kit::model::{
    Arrival, General, OpenFlags, Plan, Rate, RunDef, SdDef, Seek, Source, WdDef, XferSize,
};
use cairn_kit::result::{BenchResult, DirectionStats, RunRecord};
use cairn_kit::target::{open_targets, OpenerError, Target, TargetOpener, TargetOptions};

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * 1024;

/// The seed of every bench here: arrivals, addresses and directions replay exactly.
pub const SEED: u64 = 0x00C0_FFEE;

static SERIAL: Mutex<()> = Mutex::new(());

/// Hold while running a bench: one bench at a time per test binary (cargo
/// runs the tests of a binary in parallel; binaries one after another).
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A scratch directory on the build's real filesystem (not /tmp, which may
/// be tmpfs, where O_DIRECT is not direct I/O).
pub fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

pub fn sd(name: &str, lun: &Path, size_bytes: Option<u64>, threads: u32) -> SdDef {
    SdDef {
        name: name.into(),
        lun: lun.to_path_buf(),
        size_bytes,
        threads,
        openflags: OpenFlags::default(),
        offset_bytes: 0,
        align_bytes: None,
        range: None,
    }
}

pub fn wd(name: &str, sds: &[&str], rdpct: f64, xfersize: XferSize, seek: Seek) -> WdDef {
    WdDef {
        name: name.into(),
        sds: sds.iter().map(|s| s.to_string()).collect(),
        rdpct,
        xfersize,
        seek,
        skew_pct: None,
        iorate: None,
        priority: None,
        range: None,
        hotband: None,
    }
}

pub fn run(rd: &str, wds: &[&str], rate: Rate, elapsed: Duration, arrival: Arrival) -> RunDef {
    RunDef {
        rd: rd.into(),
        label: String::new(),
        wds: wds.iter().map(|s| s.to_string()).collect(),
        rate,
        elapsed,
        interval: Duration::from_millis(500),
        warmup: Duration::ZERO,
        arrival,
        pause: Duration::ZERO,
        threads: None,
        xfersize: None,
        rdpct: None,
        seek: None,
        curve: None,
    }
}

pub fn plan(sds: Vec<SdDef>, wds: Vec<WdDef>, runs: Vec<RunDef>, validate: bool) -> Plan {
    Plan {
        general: General {
            validate,
            ..General::default()
        },
        sds,
        wds,
        runs,
        source: Source::Quick {
            args: vec!["engine test".into()],
        },
    }
}

/// Opens the scratch files these tests make: exclusively, as Cairn's opener
/// does, without its look for another owner's data (a file made here holds
/// none; `cairn-kit-group` and the CLI's tests hold those rules).
pub struct ScratchFiles;

impl TargetOpener for ScratchFiles {
    fn open_for_overwrite(
        &self,
        host: &Host,
        path: &Path,
        _force: bool,
    ) -> Result<DeviceFile, OpenerError> {
        Ok(DeviceFile::open(path, OpenMode::WRITE_EXCLUSIVE, host)?)
    }
}

/// Open the plan's targets as `cairn bench` does (no --force).
pub fn open(plan: &Plan) -> Vec<Target> {
    let host = Host::real();
    open_targets(
        plan,
        &mut TargetOptions {
            host: &host,
            opener: &ScratchFiles,
            force: false,
            fill_progress: &mut |_, _| true,
            engine: cairn_io::EngineKind::Auto,
        },
    )
    .unwrap_or_else(|e| panic!("open_targets: {e}"))
}

/// io_uring where the kernel offers it, else the sync engine (said aloud;
/// under CAIRN_REQUIRE_TOOLS a kernel without io_uring fails the test).
pub fn default_engine() -> EngineMaker {
    match uring_available() {
        None => EngineMaker::Uring,
        Some(reason) => {
            cairn_io::test_support::prerequisite::missing(&format!(
                "{reason}; these runs would use the sync engine"
            ));
            EngineMaker::Sync
        }
    }
}

pub fn uring_available() -> Option<String> {
    cairn_io::uring_engine::UringEngine::new(1)
        .err()
        .map(|e| format!("io_uring is not available: {e}"))
}

/// A simulated disk per sd, each I/O completing after `latency_ns` drawn
/// from the seed, in simulated time: the run's clock is the disk's.
pub fn simulated_disk(seed: u64, latency_ns: Range<u64>) -> EngineMaker {
    let clock = SimClock::new();
    let time = clock.clone();
    EngineMaker::Simulated(
        Arc::new(move |geometries: &[Geometry]| {
            let mut sim = SimEngine::new(seed, 1024)
                .with_latency(latency_ns.clone())
                .with_clock(time.clone());
            for g in geometries {
                sim.add_disk(g.clone());
            }
            Box::new(sim) as Box<dyn IoEngine>
        }),
        Arc::new(clock),
    )
}

/// Run `plan` on `targets` with the fixed seed, quietly.
pub fn bench(plan: &Plan, targets: &[Target], engine: EngineMaker) -> BenchResult {
    let host = Host::real();
    let interrupted = AtomicBool::new(false);
    let options = BenchOptions {
        engine,
        workers: None,
        seed: SEED,
        host: &host,
        interrupted: &interrupted,
        end_pause: None,
    };
    run_bench(plan, targets, &options, &mut Quiet).unwrap_or_else(|e| panic!("run_bench: {e}"))
}

/// Open and run in one go.
pub fn open_and_bench(plan: &Plan, engine: EngineMaker) -> BenchResult {
    let targets = open(plan);
    bench(plan, &targets, engine)
}

pub fn hist(d: &DirectionStats) -> LatencyHistogram {
    LatencyHistogram::from_data(&d.histogram)
}

/// I/Os at or above `bound_ns`.
pub fn count_at_least(d: &DirectionStats, bound_ns: u64) -> u64 {
    let h = hist(d);
    h.count() - h.count_below(bound_ns)
}

/// One line describing a run, for assertion messages.
pub fn describe(r: &RunRecord) -> String {
    let all = &r.totals.all.all;
    format!(
        "rd={} {}: {} I/Os in {:.3}s = {:.1} IO/s (target {:?}), held={} not_issued={} backlog_max={} mean {:.1}µs max {:.1}µs ended_early={:?} errors={:?}",
        r.rd,
        r.label,
        all.ios,
        r.measured_s,
        all.iops,
        r.rate_outcome.target_iops,
        r.rate_outcome.held,
        r.rate_outcome.not_issued,
        r.rate_outcome.backlog_max,
        all.latency.mean_us,
        all.latency.max_us,
        r.ended_early,
        r.errors.first,
    )
}

/// A file of `size_bytes` filled with non-zero bytes (so reads reach data,
/// not holes), synced.
pub fn filled_file(path: &Path, size_bytes: u64) -> PathBuf {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk: Vec<u8> = (0..MIB).map(|i| (i * 31 + 7) as u8).collect();
    let mut left = size_bytes;
    while left > 0 {
        let n = left.min(MIB);
        f.write_all(&chunk[..n as usize]).unwrap();
        left -= n;
    }
    f.sync_all().unwrap();
    path.to_path_buf()
}
