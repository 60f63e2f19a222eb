//! A realistic bench result for the report tests, built the way the engine builds
//! one: latencies recorded into [`LatencyHistogram`]s per workload, direction and
//! interval, totals merged over the measured (non-warm-up) intervals only.
//!
//! Runs: `rd_max` (closed loop, two workloads — `oltp` 8 KiB 80% read on sd1 and
//! `redo` 64 KiB writes on sd2 — one warm-up interval then five measured ones),
//! and the curve `rd_curve`: its max run and three points at 50%, 70% and 90% of
//! max, the last not held. `rd_max`'s figures are round so that tests can check
//! reports against values worked out by hand:
//!
//! - each measured second: oltp reads 600 × 500 µs, 280 × 1.5 ms, 100 × 5 ms,
//!   15 × 12 ms, 5 × 40 ms (1,000 reads: buckets <1ms 60%, <2ms 28%, <8ms 10%,
//!   <16ms 1.5%, <=1s 0.5%; mean 1.60 ms); oltp writes 200 × 800 µs, 50 × 3 ms;
//!   redo writes 250 × 400 µs. So 1,500 IO/s, 66.7% read,
//!   (1,250 × 8,192 + 250 × 65,536) / 10^6 = 26.62 MB/s;
//! - the warm-up second holds 10 reads of 50 ms and 5 writes of 1.2 s, which
//!   must appear in no total;
//! - CPU 3 µs user + 5 µs sys per I/O: 125,000 I/Os per CPU-second, machine 25% busy.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use cairn_kit::histogram::LatencyHistogram;
use cairn_kit::model::{
    Arrival, CurveMember, General, OpenFlags, Plan, Rate, RunDef, SdDef, Seek, Source, SourceFile,
    WdDef, XferSize,
};
use cairn_kit::result::{
    BenchResult, CpuInterval, CpuSummary, CurvePoint, DeviceStats, DirectionStats, EngineInfo,
    Environment, ErrorSummary, IntervalRecord, IntervalStats, Mixed, RateOutcome, RunRecord,
    TargetInfo, ToolInfo, Totals, ValidationError, ValidationOutcome, WorkloadTotals, SCHEMA,
    SCHEMA_VERSION,
};

/// The custom `histogram=` bounds of the sample plan, in µs.
pub const CUSTOM_BOUNDS_US: [u64; 3] = [200, 1000, 5000];

/// (name, transfer bytes, sd, device).
const WDS: [(&str, u64, &str, &str); 2] = [
    ("oltp", 8192, "sd1", "nvme0n1"),
    ("redo", 65536, "sd2", "nvme1n1"),
];

/// One workload's I/O in one interval: (latency ns, count) for reads and writes.
#[derive(Clone, Default)]
pub struct WdIo {
    pub read: Vec<(u64, u64)>,
    pub write: Vec<(u64, u64)>,
}

pub struct RunSpec {
    pub rd: String,
    pub label: String,
    pub rate: Rate,
    pub target_iops: Option<f64>,
    pub curve: Option<CurvePoint>,
    /// (warm-up, I/O per workload in [`WDS`] order).
    pub intervals: Vec<(bool, Vec<WdIo>)>,
    pub held: bool,
    pub not_issued: u64,
    pub errors: ErrorSummary,
    pub validation_errors: Vec<ValidationError>,
}

fn hist(list: &[(u64, u64)]) -> LatencyHistogram {
    let mut h = LatencyHistogram::new();
    for (ns, n) in list {
        for _ in 0..*n {
            h.record(*ns);
        }
    }
    h
}

fn direction(h: &LatencyHistogram, bytes: u64, seconds: f64) -> DirectionStats {
    let ios = h.count();
    DirectionStats {
        ios,
        bytes,
        iops: ios as f64 / seconds,
        mb_per_s: bytes as f64 / 1e6 / seconds,
        bytes_per_io: if ios == 0 {
            0.0
        } else {
            bytes as f64 / ios as f64
        },
        latency: h.summary(&CUSTOM_BOUNDS_US),
        histogram: h.to_data(),
    }
}

fn mixed(r: &LatencyHistogram, rb: u64, w: &LatencyHistogram, wb: u64, seconds: f64) -> Mixed {
    let mut all = r.clone();
    all.add(w);
    Mixed {
        all: direction(&all, rb + wb, seconds),
        read: direction(r, rb, seconds),
        write: direction(w, wb, seconds),
    }
}

fn interval_stats(
    r: &LatencyHistogram,
    rb: u64,
    w: &LatencyHistogram,
    wb: u64,
    s: f64,
) -> IntervalStats {
    let mut all = r.clone();
    all.add(w);
    let ios = all.count();
    let ms = |ns: f64| ns / 1e6;
    IntervalStats {
        ios,
        reads: r.count(),
        writes: w.count(),
        bytes_read: rb,
        bytes_written: wb,
        iops: ios as f64 / s,
        mb_per_s: (rb + wb) as f64 / 1e6 / s,
        bytes_per_io: if ios == 0 {
            0.0
        } else {
            (rb + wb) as f64 / ios as f64
        },
        read_pct: if ios == 0 {
            0.0
        } else {
            100.0 * r.count() as f64 / ios as f64
        },
        resp_ms: ms(all.mean_ns()),
        read_resp_ms: ms(r.mean_ns()),
        write_resp_ms: ms(w.mean_ns()),
        resp_max_ms: ms(all.max_ns() as f64),
        resp_stddev_ms: ms(all.stddev_ns()),
        p50_us: all.percentile_ns(50.0) as f64 / 1e3,
        p99_us: all.percentile_ns(99.0) as f64 / 1e3,
        p999_us: all.percentile_ns(99.9) as f64 / 1e3,
        queue_depth: ios as f64 / s * all.mean_ns() / 1e9,
        backlog: 0,
    }
}

/// What the device under a workload saw: a little less latency than the
/// application (no submission overhead).
fn device(
    name: &str,
    r: &LatencyHistogram,
    rb: u64,
    w: &LatencyHistogram,
    wb: u64,
    s: f64,
) -> DeviceStats {
    let (reads, writes) = (r.count() as f64, w.count() as f64);
    let mut all = r.clone();
    all.add(w);
    let aqu = (reads + writes) / s * all.mean_ns() / 1e9 * 0.95;
    DeviceStats {
        device: name.to_string(),
        r_s: reads / s,
        w_s: writes / s,
        rmb_s: rb as f64 / 1e6 / s,
        wmb_s: wb as f64 / 1e6 / s,
        rareq_sz_kb: if reads > 0.0 {
            rb as f64 / reads / 1024.0
        } else {
            0.0
        },
        wareq_sz_kb: if writes > 0.0 {
            wb as f64 / writes / 1024.0
        } else {
            0.0
        },
        aqu_sz: aqu,
        r_await_ms: r.mean_ns() / 1e6 * 0.9,
        w_await_ms: w.mean_ns() / 1e6 * 0.9,
        util_pct: (100.0 * aqu / (1.0 + aqu)).min(99.9),
        d_s: 0.0,
        f_s: 0.0,
    }
}

fn average_devices(per_interval: &[Vec<DeviceStats>]) -> Vec<DeviceStats> {
    let n = per_interval.len().max(1) as f64;
    let mut out: Vec<DeviceStats> = Vec::new();
    for devices in per_interval {
        for d in devices {
            let slot = match out.iter_mut().find(|o| o.device == d.device) {
                Some(s) => s,
                None => {
                    out.push(DeviceStats {
                        device: d.device.clone(),
                        ..DeviceStats::default()
                    });
                    out.last_mut().unwrap()
                }
            };
            slot.r_s += d.r_s / n;
            slot.w_s += d.w_s / n;
            slot.rmb_s += d.rmb_s / n;
            slot.wmb_s += d.wmb_s / n;
            slot.rareq_sz_kb += d.rareq_sz_kb / n;
            slot.wareq_sz_kb += d.wareq_sz_kb / n;
            slot.aqu_sz += d.aqu_sz / n;
            slot.r_await_ms += d.r_await_ms / n;
            slot.w_await_ms += d.w_await_ms / n;
            slot.util_pct += d.util_pct / n;
        }
    }
    out
}

/// Build a run record from per-interval latencies, as the engine would.
pub fn build_run(spec: RunSpec) -> RunRecord {
    let seconds = 1.0;
    let n_wd = WDS.len();
    let mut intervals = Vec::new();
    // Measured-window accumulators per workload: (read hist, read bytes, write hist, write bytes).
    let mut acc: Vec<(LatencyHistogram, u64, LatencyHistogram, u64)> = (0..n_wd)
        .map(|_| (LatencyHistogram::new(), 0, LatencyHistogram::new(), 0))
        .collect();
    let mut measured_s = 0.0;
    let mut cpu = CpuSummary::default();
    let mut busy_sum = 0.0;
    let mut device_intervals = Vec::new();
    for (k, (warmup, ios)) in spec.intervals.iter().enumerate() {
        assert_eq!(ios.len(), n_wd);
        let (mut r_all, mut w_all) = (LatencyHistogram::new(), LatencyHistogram::new());
        let (mut rb_all, mut wb_all) = (0, 0);
        let mut workloads = Vec::new();
        let mut devices = Vec::new();
        for (i, io) in ios.iter().enumerate() {
            let (name, xfer, _, dev) = WDS[i];
            let (r, w) = (hist(&io.read), hist(&io.write));
            let (rb, wb) = (r.count() * xfer, w.count() * xfer);
            workloads.push((name.to_string(), interval_stats(&r, rb, &w, wb, seconds)));
            devices.push(device(dev, &r, rb, &w, wb, seconds));
            r_all.add(&r);
            w_all.add(&w);
            rb_all += rb;
            wb_all += wb;
            if !warmup {
                acc[i].0.add(&r);
                acc[i].1 += rb;
                acc[i].2.add(&w);
                acc[i].3 += wb;
            }
        }
        let all = interval_stats(&r_all, rb_all, &w_all, wb_all, seconds);
        let ios_total = all.ios as f64;
        let cpu_i = CpuInterval {
            user_s: ios_total * 3e-6,
            sys_s: ios_total * 5e-6,
            machine_busy_pct: 10.0 + ios_total / 100.0,
        };
        if !warmup {
            measured_s += seconds;
            cpu.user_s += cpu_i.user_s;
            cpu.sys_s += cpu_i.sys_s;
            busy_sum += cpu_i.machine_busy_pct;
            device_intervals.push(devices.clone());
        }
        intervals.push(IntervalRecord {
            index: k as u32 + 1,
            end_s: (k + 1) as f64 * seconds,
            seconds,
            warmup: *warmup,
            all,
            workloads,
            cpu: cpu_i,
            devices,
        });
    }
    let (mut r_all, mut w_all) = (LatencyHistogram::new(), LatencyHistogram::new());
    let (mut rb_all, mut wb_all) = (0, 0);
    let mut workloads = Vec::new();
    for (i, (r, rb, w, wb)) in acc.iter().enumerate() {
        let (name, _, sd, _) = WDS[i];
        r_all.add(r);
        w_all.add(w);
        rb_all += rb;
        wb_all += wb;
        workloads.push(WorkloadTotals {
            wd: name.to_string(),
            sds: vec![sd.to_string()],
            target_iops: None,
            priority: None,
            stats: mixed(r, *rb, w, *wb, measured_s),
        });
    }
    let all = mixed(&r_all, rb_all, &w_all, wb_all, measured_s);
    // A workload's share of the target is its share of the I/Os.
    let total_ios = all.all.ios.max(1) as f64;
    for w in &mut workloads {
        w.target_iops = spec
            .target_iops
            .map(|t| t * w.stats.all.ios as f64 / total_ios);
    }
    cpu.iops_per_cpu_s = all.all.ios as f64 / (cpu.user_s + cpu.sys_s);
    cpu.machine_busy_pct = busy_sum / measured_s;
    let achieved = all.all.iops;
    let rate_outcome = RateOutcome {
        target_iops: spec.target_iops,
        achieved_iops: achieved,
        held: spec.held,
        not_issued: spec.not_issued,
        backlog_max: if spec.held { 12 } else { 4096 },
        backlog_limit: 4096,
        message: (!spec.held).then(|| {
            "the devices could not complete I/Os as fast as the schedule called for them; \
             latencies include the time each I/O waited in the backlog"
                .to_string()
        }),
    };
    let n = intervals.len() as f64;
    RunRecord {
        rd: spec.rd,
        label: spec.label,
        wds: WDS.iter().map(|w| w.0.to_string()).collect(),
        rate: spec.rate,
        target_iops: spec.target_iops,
        arrival: "exponential".to_string(),
        threads: BTreeMap::from([("sd1".to_string(), 32), ("sd2".to_string(), 8)]),
        interval_s: seconds,
        warmup_s: spec.intervals.iter().filter(|i| i.0).count() as f64 * seconds,
        elapsed_s: n * seconds,
        measured_s,
        curve: spec.curve,
        intervals,
        totals: Totals { all, workloads },
        cpu,
        devices: average_devices(&device_intervals),
        rate_outcome,
        validation: ValidationOutcome {
            enabled: true,
            units_checked: r_all.count(),
            units_written: w_all.count(),
            errors: spec.validation_errors,
        },
        errors: spec.errors,
        ended_early: None,
    }
}

/// `rd_max`'s measured second (see the module comment).
pub fn max_second() -> Vec<WdIo> {
    vec![
        WdIo {
            read: vec![
                (500_000, 600),
                (1_500_000, 280),
                (5_000_000, 100),
                (12_000_000, 15),
                (40_000_000, 5),
            ],
            write: vec![(800_000, 200), (3_000_000, 50)],
        },
        WdIo {
            read: vec![],
            write: vec![(400_000, 250)],
        },
    ]
}

/// A warm-up second whose outliers must not reach any total.
pub fn warmup_second() -> Vec<WdIo> {
    vec![
        WdIo {
            read: vec![(50_000_000, 10)],
            write: vec![(1_200_000_000, 5)],
        },
        WdIo {
            read: vec![],
            write: vec![(2_000_000, 20)],
        },
    ]
}

/// A second of the curve: `load` scales the I/O counts, `slow` the latencies,
/// `k` makes each second a little different.
fn curve_second(load: f64, slow: f64, k: usize) -> Vec<WdIo> {
    let wiggle = 1.0 + 0.03 * ((k * 7 % 5) as f64 - 2.0);
    let n = |c: f64| (c * load * wiggle).round() as u64;
    let t = |ns: f64| (ns * slow) as u64;
    vec![
        WdIo {
            read: vec![
                (t(300_000.0), n(900.0)),
                (t(900_000.0), n(300.0)),
                (t(4_000_000.0), n(80.0)),
                (t(15_000_000.0), n(10.0)),
                (t(60_000_000.0), n(2.0)),
            ],
            write: vec![(t(600_000.0), n(300.0)), (t(2_500_000.0), n(60.0))],
        },
        WdIo {
            read: vec![],
            write: vec![(t(350_000.0), n(340.0))],
        },
    ]
}

fn curve_run(pct: Option<f64>, target: Option<f64>, load: f64, slow: f64, held: bool) -> RunSpec {
    let mut intervals = vec![(true, curve_second(load, slow * 1.5, 0))];
    intervals.extend((1..6).map(|k| (false, curve_second(load, slow, k))));
    RunSpec {
        rd: "rd_curve".to_string(),
        label: match pct {
            Some(p) => format!("iorate={p}%"),
            None => "iorate=max".to_string(),
        },
        rate: match pct {
            Some(p) => Rate::CurvePct(p),
            None => Rate::Max,
        },
        target_iops: target,
        curve: Some(CurvePoint { id: 1, pct }),
        intervals,
        held,
        not_issued: if held { 0 } else { 750 },
        errors: ErrorSummary::default(),
        validation_errors: Vec::new(),
    }
}

pub fn max_run() -> RunSpec {
    let mut intervals = vec![(true, warmup_second())];
    intervals.extend((0..5).map(|_| (false, max_second())));
    RunSpec {
        rd: "rd_max".to_string(),
        label: String::new(),
        rate: Rate::Max,
        target_iops: None,
        curve: None,
        intervals,
        held: true,
        not_issued: 0,
        errors: ErrorSummary::default(),
        validation_errors: Vec::new(),
    }
}

fn plan() -> Plan {
    let text = "\
* OLTP data files and redo, as an AWR showed them
sd=sd1,lun=/dev/nvme0n1,threads=32
sd=sd2,lun=/dev/nvme1n1,threads=8,openflags=o_dsync
wd=oltp,sd=sd1,xfersize=8k,rdpct=80,seekpct=100
wd=redo,sd=sd2,xfersize=64k,rdpct=0,seekpct=0
rd=rd_max,wd=*,iorate=max,elapsed=$elapsed,interval=1,warmup=1
rd=rd_curve,wd=*,iorate=curve,curve=(50,70,90),elapsed=$elapsed,interval=1,warmup=1
";
    let sd = |name: &str, lun: &str, threads: u32, sync: bool| SdDef {
        name: name.to_string(),
        lun: PathBuf::from(lun),
        size_bytes: None,
        threads,
        openflags: OpenFlags { sync_writes: sync },
        offset_bytes: 0,
        align_bytes: None,
        range: None,
    };
    let wd = |name: &str, sd: &str, rdpct: f64, xfer: u64, seek: Seek| WdDef {
        name: name.to_string(),
        sds: vec![sd.to_string()],
        rdpct,
        xfersize: XferSize::Fixed(xfer),
        seek,
        skew_pct: None,
        iorate: None,
        priority: None,
        range: None,
        hotband: None,
    };
    let rd = |rd: &str, label: &str, rate: Rate, curve: Option<CurveMember>| RunDef {
        rd: rd.to_string(),
        label: label.to_string(),
        wds: vec!["oltp".to_string(), "redo".to_string()],
        rate,
        elapsed: Duration::from_secs(6),
        interval: Duration::from_secs(1),
        warmup: Duration::from_secs(1),
        arrival: Arrival::Exponential,
        pause: Duration::ZERO,
        threads: None,
        xfersize: None,
        rdpct: None,
        seek: None,
        curve,
    };
    let member = Some(CurveMember {
        id: 1,
        stop_ms: None,
    });
    Plan {
        general: General {
            validate: true,
            histogram_bounds_us: CUSTOM_BOUNDS_US.to_vec(),
            ..General::default()
        },
        sds: vec![
            sd("sd1", "/dev/nvme0n1", 32, false),
            sd("sd2", "/dev/nvme1n1", 8, true),
        ],
        wds: vec![
            wd("oltp", "sd1", 80.0, 8192, Seek::Random(100.0)),
            wd("redo", "sd2", 0.0, 65536, Seek::Sequential),
        ],
        runs: vec![
            rd("rd_max", "", Rate::Max, None),
            rd("rd_curve", "iorate=max", Rate::Max, member),
            rd("rd_curve", "iorate=50%", Rate::CurvePct(50.0), member),
            rd("rd_curve", "iorate=70%", Rate::CurvePct(70.0), member),
            rd("rd_curve", "iorate=90%", Rate::CurvePct(90.0), member),
        ],
        source: Source::Vdbench {
            path: PathBuf::from("/etc/cairn/oltp.vdb"),
            files: vec![SourceFile {
                path: PathBuf::from("/etc/cairn/oltp.vdb"),
                text: text.to_string(),
            }],
            variables: BTreeMap::from([("elapsed".to_string(), "6".to_string())]),
        },
    }
}

fn target(sd: &str, path: &str, device: &str) -> TargetInfo {
    TargetInfo {
        sd: sd.to_string(),
        path: path.to_string(),
        kind: "block".to_string(),
        size_bytes: 1 << 40,
        start_bytes: 0,
        end_bytes: 1 << 40,
        logical_sector_bytes: 4096,
        physical_sector_bytes: 4096,
        sector_format: "4Kn".to_string(),
        max_transfer_bytes: 128 * 1024,
        optimal_io_bytes: 0,
        rotational: Some(false),
        discard: true,
        devices: vec![device.to_string()],
        created: false,
        mount_engine: None,
    }
}

/// The sample result: `rd_max`, then the curve `rd_curve` (max, 50%, 70%, 90%).
pub fn sample_result() -> BenchResult {
    // The curve's max run reaches about 2,000 IO/s; the points aim at shares of it.
    let max_iops = 2000.0;
    let mut bad = curve_run(Some(90.0), Some(0.9 * max_iops), 0.85, 1.6, false);
    bad.errors = ErrorSummary {
        count: 2,
        first: vec![
            "read sd1 /dev/nvme0n1 offset 81920 (8 KiB): Input/output error (os error 5)"
                .to_string(),
            "read sd1 /dev/nvme0n1 offset 90112 (8 KiB): Input/output error (os error 5)"
                .to_string(),
        ],
    };
    bad.validation_errors = vec![ValidationError {
        sd: "sd1".to_string(),
        lun: "/dev/nvme0n1".to_string(),
        offset_bytes: 101_130_240,
        lba: 12_345,
        unit_bytes: 8192,
        problem: "bad checksum".to_string(),
    }];
    let runs = vec![
        build_run(max_run()),
        build_run(curve_run(None, None, 1.0, 1.0, true)),
        build_run(curve_run(Some(50.0), Some(0.5 * max_iops), 0.5, 0.45, true)),
        build_run(curve_run(Some(70.0), Some(0.7 * max_iops), 0.7, 0.6, true)),
        build_run(bad),
    ];
    BenchResult {
        schema: SCHEMA.to_string(),
        schema_version: SCHEMA_VERSION,
        tool: ToolInfo {
            name: "cairn".to_string(),
            version: "0.1.0".to_string(),
            commit: "v0.1.0-42-g1234abc".to_string(),
        },
        started_at: "2025-03-14T09:26:53Z".to_string(),
        seed: 20_250_314,
        engine: EngineInfo {
            kind: "uring".to_string(),
            flags: vec!["single_issuer".to_string(), "registered_files".to_string()],
            workers: 2,
        },
        environment: Environment {
            hostname: "db01".to_string(),
            kernel: "6.1.0-18-amd64".to_string(),
            os: "Debian GNU/Linux 12 (bookworm)".to_string(),
            cpu_model: "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz".to_string(),
            cpus: 16,
            memory_bytes: 64 << 30,
            clock_ticks: 100,
        },
        plan: plan(),
        targets: vec![
            target("sd1", "/dev/nvme0n1", "nvme0n1"),
            target("sd2", "/dev/nvme1n1", "nvme1n1"),
        ],
        runs,
    }
}

/// B for the comparison tests, against A = [`sample_result`]:
/// - `rd_max`: 1,800 IO/s instead of 1,500 (+20%, better); oltp's mean read
///   latency halved (-50%, better); 100,000 I/Os per CPU-second instead of
///   125,000 (-20%, worse); nvme0n1's read requests 16 KiB instead of 8 (+100%,
///   no better direction);
/// - `rd_curve iorate=max`: workload `redo` renamed `redo2` (only in A / only in B);
/// - `rd_curve iorate=90%` missing (only in A); a run `rd_new` added (only in B).
pub fn compare_b() -> BenchResult {
    let mut b = sample_result();
    b.environment.hostname = "db02".to_string();
    let max = &mut b.runs[0];
    max.totals.all.all.iops = 1800.0;
    let read = &mut max.totals.workloads[0].stats.read.latency;
    read.mean_us /= 2.0;
    max.cpu.iops_per_cpu_s = 100_000.0;
    max.devices[0].rareq_sz_kb = 16.0;
    b.runs[1].totals.workloads[1].wd = "redo2".to_string();
    b.runs.remove(4);
    let mut new = b.runs[0].clone();
    new.rd = "rd_new".to_string();
    b.runs.push(new);
    b
}
