//! Group benchmarks. They print figures and ratios against a peer measured in the
//! same run; they assert nothing about timings.
//!
//! `direct-path --device /dev/loopN`: the direct data path against the raw
//! device. An external-redundancy group is created on the device with one file,
//! written once in full so every extent is initialised. Then 8 KiB random reads
//! and writes at QD1 and QD32, each side for a fixed time, sides alternating
//! within every round:
//! - `raw`: the same io_uring engine and submission loop, on a region of the same
//!   device that the group does not use (the last `--file-mib` of its AU space,
//!   checked to lie past every allocated AU), at the same random file offsets;
//! - `group, flat map`: what a database does with an ASM extent map: the map is
//!   fetched once through `Group::map_primary` into a flat `Vec` of per-AU disk
//!   offsets, and each I/O is one shift, one index and one add;
//! - `group, map_primary/IO`: `Group::map_primary` and `Group::disk_device`
//!   called for every I/O, to show what the library's lookup costs;
//! - `fio`: fio 3 with io_uring on the raw region, as an outside reference.
//!
//! The device is overwritten. At the end the group is checked (`Group::check`):
//! a raw write that strayed into the group's metadata would show there. The
//! machine is shared, so each round waits for a quiet moment first, and the
//! ratios are given three ways (of medians, paired per round, of best runs).
//!
//! `create-1pib --dir DIR`: create 64 sparse files of (16 TiB - 4 KiB) under DIR
//! (ext4 refuses 16 TiB exactly), label them, create a group with 4 MiB AUs,
//! dismount; then, in a fresh process (so its peak RSS is its own), mount it.
//! Reports wall times, peak RSS, bytes written by the engine and blocks the
//! files hold.

use std::error::Error;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cairn_format::group::AtLayout;
use cairn_format::DiskLabel;
use cairn_io::host::Host;
use cairn_io::{
    new_file_engine, AlignedBuf, DeviceFile, DeviceId, EngineKind, EngineStats, FileEngine,
    IoEngine, Op, OpenMode, Request, SubmitError,
};
use cairn_store::group::{
    create, mount, CreateOptions, Group, GroupSelector, GroupSpec, NewDisk, Redundancy,
};
use cairn_store::labeling::{write_label, LabelSpec};
use cairn_store::names::GroupPath;
use uuid::Uuid;

type BenchResult<T> = Result<T, Box<dyn Error>>;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

/// The most requests the direct-path benchmark keeps in flight (its QD32).
const DEPTH_MAX: usize = 32;
/// Latency histogram: 1 µs buckets up to this, one overflow bucket above.
const LATENCY_US_MAX: usize = 20_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.first().map(String::as_str) {
        Some("direct-path") => direct_path(&args[1..]),
        Some("data-plane") => data_plane(&args[1..]),
        Some("create-1pib") => create_1pib(&args[1..]),
        Some("mount-phase") => mount_phase(&args[1..]),
        _ => Err(usage().into()),
    };
    if let Err(e) = outcome {
        eprintln!("group_bench: {e}");
        std::process::exit(1);
    }
}

fn usage() -> &'static str {
    "usage:\n  group_bench data-plane --device /dev/loopN [--seconds 5] [--rounds 3] [--file-mib 1024] [--quiet-wait 10]\n  group_bench direct-path --device /dev/loopN [--seconds 10] [--rounds 3] [--file-mib 1024] [--no-fio] [--no-per-io] [--quiet-wait 10] [--ios N] [--lookup-calls N]\n  group_bench create-1pib --dir DIR [--disks 64] [--disk-bytes N] [--au-mib 4]"
}

/// `--name value` options.
struct Options {
    pairs: Vec<(String, Option<String>)>,
}

impl Options {
    fn parse(args: &[String]) -> BenchResult<Self> {
        let mut pairs = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let name = args[i]
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument {}\n{}", args[i], usage()))?;
            let value = args.get(i + 1).filter(|v| !v.starts_with("--")).cloned();
            i += if value.is_some() { 2 } else { 1 };
            pairs.push((name.to_string(), value));
        }
        Ok(Self { pairs })
    }
    fn flag(&self, name: &str) -> bool {
        self.pairs.iter().any(|(n, _)| n == name)
    }
    fn text(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
    }
    fn number(&self, name: &str, default: u64) -> BenchResult<u64> {
        match self.text(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("--{name} {v}: not a whole number").into()),
        }
    }
}

fn now_unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn label_spec(name: &str) -> BenchResult<LabelSpec> {
    Ok(LabelSpec {
        label: DiskLabel::parse(name)?,
        disk_uuid: Uuid::new_v4(),
        now_unix_seconds: now_unix_seconds(),
        generation: 1,
    })
}

fn uring_engine(depth_max: usize) -> BenchResult<Box<dyn FileEngine>> {
    let engine = new_file_engine(EngineKind::Uring, depth_max)
        .map_err(|e| format!("io_uring engine: {e}"))?;
    Ok(engine)
}

// ---------------------------------------------------------------------------
// Measuring helpers

/// User + system CPU of this process (`who` = RUSAGE_SELF) or of its waited-for
/// children (RUSAGE_CHILDREN), and the peak RSS in KiB.
fn rusage(who: libc::c_int) -> (Duration, u64) {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own; `who` is a valid selector.
    let rc = unsafe { libc::getrusage(who, &mut usage) };
    assert_eq!(rc, 0, "invariant: getrusage with a valid selector succeeds");
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (
        tv(usage.ru_utime) + tv(usage.ru_stime),
        usage.ru_maxrss as u64,
    )
}

/// Busy time of the whole machine (all cores) from /proc/stat, in seconds:
/// every jiffy that was neither idle nor iowait. Loop-device kworkers and
/// interrupt work show here and in no process's rusage.
fn machine_busy_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return f64::NAN;
    };
    let Some(line) = stat.lines().next() else {
        return f64::NAN;
    };
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    if fields.len() < 5 {
        return f64::NAN;
    }
    let total: u64 = fields.iter().take(8).sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (total - fields[3] - fields[4]) as f64 / hz
}

/// The machine counts as quiet when at most this share of it is busy.
const QUIET_BUSY_MAX: f64 = 0.15;

/// Wait (up to `max_wait`) until a 250 ms window finds the machine quiet: on a
/// shared 2-core machine another process's burst would otherwise land on one
/// side of a comparison. Returns the busy share of the last window.
fn quiet_gate(max_wait: Duration) -> f64 {
    let started = Instant::now();
    loop {
        let before = machine_busy_seconds();
        let window = Instant::now();
        std::thread::sleep(Duration::from_millis(250));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let busy = (machine_busy_seconds() - before) / (window.elapsed().as_secs_f64() * cores);
        if busy.is_nan() || busy <= QUIET_BUSY_MAX || started.elapsed() >= max_wait {
            return busy;
        }
    }
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// splitmix64: a fixed seed replays the same offsets on every side.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (multiply-high; bias below 2^-40 for our n).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

struct LatencyHistogram {
    counts: Vec<u64>,
}

impl LatencyHistogram {
    fn new() -> Self {
        Self {
            counts: vec![0; LATENCY_US_MAX + 1],
        }
    }
    fn record(&mut self, d: Duration) {
        let us = (d.as_micros() as usize).min(LATENCY_US_MAX);
        self.counts[us] += 1;
    }
    fn merge(&mut self, other: &Self) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }
    fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
    fn percentile_us(&self, p: f64) -> u64 {
        let total: u64 = self.counts.iter().sum();
        let want = ((total as f64) * p).ceil() as u64;
        let mut seen = 0;
        for (us, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want.max(1) {
                return us as u64;
            }
        }
        LATENCY_US_MAX as u64
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

// ---------------------------------------------------------------------------
// Direct data path

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rw {
    Read,
    Write,
}

impl Rw {
    fn name(self) -> &'static str {
        match self {
            Rw::Read => "randread",
            Rw::Write => "randwrite",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Raw,
    FlatMap,
    MapPerIo,
    Fio,
}

impl Side {
    fn short(self) -> &'static str {
        match self {
            Side::Raw => "raw",
            Side::FlatMap => "flat",
            Side::MapPerIo => "per-io",
            Side::Fio => "fio",
        }
    }
    fn name(self) -> &'static str {
        match self {
            Side::Raw => "raw device (cairn io_uring)",
            Side::FlatMap => "group, flat map (direct path)",
            Side::MapPerIo => "group, map_primary per I/O",
            Side::Fio => "fio io_uring, raw device",
        }
    }
}

/// Where a file offset goes, and the engine to send it through. Every side
/// runs the same `run_loop`; only `locate` differs.
trait Target {
    fn engine(&mut self) -> &mut dyn IoEngine;
    fn locate(&mut self, file_offset_bytes: u64) -> (DeviceId, u64);
}

struct RawTarget<'g, 'e> {
    group: &'g mut Group<'e>,
    device: DeviceId,
    base_bytes: u64,
}

impl Target for RawTarget<'_, '_> {
    fn engine(&mut self) -> &mut dyn IoEngine {
        self.group.engine()
    }
    #[inline]
    fn locate(&mut self, file_offset_bytes: u64) -> (DeviceId, u64) {
        (self.device, self.base_bytes + file_offset_bytes)
    }
}

/// The extent map held by the caller, one entry per AU of the file.
struct FlatMapTarget<'g, 'e> {
    group: &'g mut Group<'e>,
    map: &'g [(DeviceId, u64)],
    au_shift: u32,
}

impl Target for FlatMapTarget<'_, '_> {
    fn engine(&mut self) -> &mut dyn IoEngine {
        self.group.engine()
    }
    #[inline]
    fn locate(&mut self, file_offset_bytes: u64) -> (DeviceId, u64) {
        let (device, au_start) = self.map[(file_offset_bytes >> self.au_shift) as usize];
        let within = file_offset_bytes & ((1u64 << self.au_shift) - 1);
        (device, au_start + within)
    }
}

/// Asks the library for every I/O.
struct PerIoTarget<'g, 'e> {
    group: &'g mut Group<'e>,
    number: u32,
    io_bytes: u64,
}

impl Target for PerIoTarget<'_, '_> {
    fn engine(&mut self) -> &mut dyn IoEngine {
        self.group.engine()
    }
    fn locate(&mut self, file_offset_bytes: u64) -> (DeviceId, u64) {
        let pieces = self
            .group
            .map_primary(self.number, file_offset_bytes, self.io_bytes)
            .expect("invariant: an aligned range inside the file")
            .expect("invariant: the whole file was written at setup");
        assert_eq!(
            pieces.len(),
            1,
            "invariant: an aligned 8 KiB range lies in one AU"
        );
        let (disk, disk_offset_bytes, _, _) = pieces[0];
        let device = self
            .group
            .disk_device(disk)
            .expect("invariant: the only disk is online");
        (device, disk_offset_bytes)
    }
}

struct RunSpec {
    rw: Rw,
    qd: usize,
    io_bytes: u64,
    file_bytes: u64,
    duration: Duration,
    /// Stop after this many I/Os even if time remains (for instruction counts
    /// under callgrind, where time means little).
    ios_max: u64,
}

#[derive(Debug, Clone, Copy)]
struct RunFigures {
    iops: f64,
    latency_us_p50: u64,
    latency_us_p99: u64,
    /// CPU of the submitting process per I/O.
    process_cpu_us_per_io: f64,
    /// Busy time of the whole machine per I/O (loop kworkers included).
    machine_cpu_us_per_io: f64,
}

fn submit_one<T: Target>(
    target: &mut T,
    spec: &RunSpec,
    rng: &mut Rng,
    slot: usize,
    buf: AlignedBuf,
) {
    let blocks = spec.file_bytes / spec.io_bytes;
    let (device, offset_bytes) = target.locate(rng.below(blocks) * spec.io_bytes);
    let op = match spec.rw {
        Rw::Read => Op::Read { offset_bytes, buf },
        Rw::Write => Op::Write {
            offset_bytes,
            buf,
            fua: false,
        },
    };
    let request = Request {
        device,
        tag: slot as u64,
        op,
    };
    if let Err(SubmitError::QueueFull(_)) = target.engine().submit(request) {
        unreachable!("invariant: at most qd <= depth_max requests in flight");
    }
}

/// The one submission loop: keep `qd` requests in flight until the time is up,
/// reusing each slot's buffer (no allocation per I/O).
fn run_loop<T: Target>(
    target: &mut T,
    spec: &RunSpec,
    seed: u64,
    bufs: &mut Vec<AlignedBuf>,
) -> BenchResult<RunFigures> {
    assert!(
        spec.qd <= bufs.len() && spec.qd <= DEPTH_MAX,
        "invariant: one buffer per slot"
    );
    assert_eq!(target.engine().in_flight(), 0, "invariant: an idle engine");
    let mut rng = Rng(seed);
    let mut slots: Vec<Option<AlignedBuf>> = (0..spec.qd).map(|_| bufs.pop()).collect();
    let mut issued = vec![Instant::now(); spec.qd];
    let mut histogram = LatencyHistogram::new();
    let (cpu0, _) = rusage(libc::RUSAGE_SELF);
    let machine0 = machine_busy_seconds();
    let start = Instant::now();
    let deadline = start + spec.duration;
    for (slot, buf) in slots.iter_mut().enumerate() {
        let buf = buf.take().expect("invariant: every slot has a buffer");
        issued[slot] = Instant::now();
        submit_one(target, spec, &mut rng, slot, buf);
    }
    let mut outstanding = spec.qd;
    let mut submitted = spec.qd as u64;
    let mut done = 0u64;
    let mut failure = None;
    while outstanding > 0 {
        target.engine().wait(1)?;
        while let Some(completion) = target.engine().pop_completion() {
            let now = Instant::now();
            let slot = completion.tag as usize;
            histogram.record(now - issued[slot]);
            let buf = completion
                .buf
                .expect("invariant: reads and writes hand their buffer back");
            if let Err(e) = completion.result {
                failure.get_or_insert(e);
            }
            done += 1;
            if now < deadline && submitted < spec.ios_max && failure.is_none() {
                submitted += 1;
                issued[slot] = now;
                submit_one(target, spec, &mut rng, slot, buf);
            } else {
                slots[slot] = Some(buf);
                outstanding -= 1;
            }
        }
    }
    let elapsed = start.elapsed();
    let (cpu1, _) = rusage(libc::RUSAGE_SELF);
    let machine1 = machine_busy_seconds();
    bufs.extend(slots.into_iter().flatten());
    if let Some(e) = failure {
        return Err(format!("{} failed: {e}", spec.rw.name()).into());
    }
    let per_io_us = |d: f64| d * 1e6 / done as f64;
    Ok(RunFigures {
        iops: done as f64 / elapsed.as_secs_f64(),
        latency_us_p50: histogram.percentile_us(0.50),
        latency_us_p99: histogram.percentile_us(0.99),
        process_cpu_us_per_io: per_io_us((cpu1 - cpu0).as_secs_f64()),
        machine_cpu_us_per_io: per_io_us(machine1 - machine0),
    })
}

// One named, never-inlined entry per side, so that a profile (callgrind's
// inclusive counts) shows each side's cost per I/O on its own line.
#[inline(never)]
fn run_raw(
    t: &mut RawTarget<'_, '_>,
    spec: &RunSpec,
    seed: u64,
    bufs: &mut Vec<AlignedBuf>,
) -> BenchResult<RunFigures> {
    run_loop(t, spec, seed, bufs)
}

#[inline(never)]
fn run_flat_map(
    t: &mut FlatMapTarget<'_, '_>,
    spec: &RunSpec,
    seed: u64,
    bufs: &mut Vec<AlignedBuf>,
) -> BenchResult<RunFigures> {
    run_loop(t, spec, seed, bufs)
}

#[inline(never)]
fn run_map_per_io(
    t: &mut PerIoTarget<'_, '_>,
    spec: &RunSpec,
    seed: u64,
    bufs: &mut Vec<AlignedBuf>,
) -> BenchResult<RunFigures> {
    run_loop(t, spec, seed, bufs)
}

/// CPU cost of `locate` alone, without I/O: nanoseconds per call, over the
/// same offsets the runs use (best of three passes, to shed interference).
fn lookup_ns<T: Target>(target: &mut T, file_bytes: u64, io_bytes: u64, calls: u64) -> f64 {
    let blocks = file_bytes / io_bytes;
    let mut best = f64::INFINITY;
    for pass in 0..3 {
        let mut rng = Rng(0x100c + pass);
        let mut sink = 0u64;
        let started = Instant::now();
        for _ in 0..calls {
            let (device, offset) = target.locate(rng.below(blocks) * io_bytes);
            sink = sink.wrapping_add(offset ^ u64::from(device.0));
        }
        let elapsed = started.elapsed();
        std::hint::black_box(sink);
        best = best.min(elapsed.as_secs_f64() * 1e9 / calls as f64);
    }
    best
}

/// fio on the raw region, as an outside reference. `Err` says why not.
fn run_fio(device: &Path, base_bytes: u64, spec: &RunSpec) -> Result<RunFigures, String> {
    let (children0, _) = rusage(libc::RUSAGE_CHILDREN);
    let machine0 = machine_busy_seconds();
    let output = Command::new("fio")
        .args([
            "--name=ref",
            "--direct=1",
            "--ioengine=io_uring",
            "--thread=0",
            "--norandommap",
            "--randrepeat=0",
            "--time_based",
            "--output-format=json",
        ])
        .arg(format!("--filename={}", device.display()))
        .arg(format!("--rw={}", spec.rw.name()))
        .arg(format!("--bs={}", spec.io_bytes))
        .arg(format!("--iodepth={}", spec.qd))
        .arg(format!("--offset={base_bytes}"))
        .arg(format!("--size={}", spec.file_bytes))
        .arg(format!("--runtime={}s", spec.duration.as_secs().max(1)))
        .output()
        .map_err(|e| format!("cannot run fio: {e}"))?;
    let machine1 = machine_busy_seconds();
    let (children1, _) = rusage(libc::RUSAGE_CHILDREN);
    if !output.status.success() {
        return Err(format!(
            "fio failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    // fio may print notes before the JSON object.
    let json = text.find('{').map(|i| &text[i..]).unwrap_or("");
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("fio output is not JSON: {e}"))?;
    let job = &value["jobs"][0][match spec.rw {
        Rw::Read => "read",
        Rw::Write => "write",
    }];
    let iops = job["iops"].as_f64().ok_or("fio output has no iops")?;
    let ios = job["total_ios"].as_f64().unwrap_or(f64::NAN);
    let percentile = |p: &str| {
        job["clat_ns"]["percentile"][p]
            .as_u64()
            .map_or(0, |ns| ns / 1000)
    };
    Ok(RunFigures {
        iops,
        latency_us_p50: percentile("50.000000"),
        latency_us_p99: percentile("99.000000"),
        process_cpu_us_per_io: (children1 - children0).as_secs_f64() * 1e6 / ios,
        machine_cpu_us_per_io: (machine1 - machine0) * 1e6 / ios,
    })
}

fn direct_path(args: &[String]) -> BenchResult<()> {
    let options = Options::parse(args)?;
    let device_path = PathBuf::from(
        options
            .text("device")
            .ok_or("direct-path needs --device /dev/loopN (the device is overwritten)")?,
    );
    let seconds = options.number("seconds", 10)?;
    let rounds = options.number("rounds", 3)?.max(1);
    let file_bytes = options.number("file-mib", 1024)? * MIB;
    let with_fio = !options.flag("no-fio");
    let with_per_io = !options.flag("no-per-io");
    let quiet_wait = options.number("quiet-wait", 10)?;
    let ios_max = options.number("ios", u64::MAX)?;
    let io_bytes = 8 * KIB;
    let au_bytes = 4 * MIB;
    if file_bytes == 0 || !file_bytes.is_multiple_of(au_bytes) {
        return Err(format!(
            "--file-mib must be a positive multiple of {}",
            au_bytes / MIB
        )
        .into());
    }

    let mut engine = uring_engine(DEPTH_MAX)?;
    let file = DeviceFile::open(&device_path, OpenMode::WRITE_EXCLUSIVE, &Host::real())?;
    let geometry = file.geometry().clone();
    let device = engine.attach(file);
    println!(
        "device {}: {} MiB, {}-byte logical sectors, max transfer {} KiB; engine {}, depth {}",
        device_path.display(),
        geometry.size_bytes / MIB,
        geometry.logical_sector_bytes,
        geometry.max_transfer_aligned_bytes() / KIB,
        engine.name(),
        engine.depth_max()
    );

    write_label(engine.as_mut(), device, &label_spec("BENCH_0000")?)?;
    let spec = GroupSpec {
        name: "BENCH".into(),
        redundancy: Redundancy::External,
        au_bytes,
        sector_bytes: None,
        force: true,
        now_unix_seconds: now_unix_seconds(),
        group_uuid: Uuid::new_v4(),
    };
    let engine_ref: &mut dyn IoEngine = engine.as_mut();
    let mut group = create(
        engine_ref,
        &[NewDisk {
            device,
            failgroup: None,
        }],
        &spec,
    )?;
    let path = GroupPath::parse("+BENCH/f")?;
    let number = group
        .create_file(&path, file_bytes, &CreateOptions::default())?
        .number;

    // Write every AU once, whole, so every extent is initialised (and no first
    // write has to zero the rest of an AU).
    let started = Instant::now();
    let mut chunk = vec![0u8; au_bytes as usize];
    for (i, b) in chunk.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    for au in 0..file_bytes / au_bytes {
        group.write(number, au * au_bytes, &chunk)?;
    }
    group.sync()?;
    let fill = started.elapsed();
    println!(
        "group BENCH: external redundancy, {} MiB AUs; file {path} ({} MiB) written once in {:.2} s ({:.0} MB/s)",
        au_bytes / MIB,
        file_bytes / MIB,
        fill.as_secs_f64(),
        file_bytes as f64 / fill.as_secs_f64() / 1e6
    );

    // The caller's extent map: one (device, disk offset) per AU of the file.
    let started = Instant::now();
    let mut map = Vec::with_capacity((file_bytes / au_bytes) as usize);
    for au in 0..file_bytes / au_bytes {
        let pieces = group
            .map_primary(number, au * au_bytes, au_bytes)?
            .ok_or("an extent is still uninitialised after the fill")?;
        if pieces.len() != 1 {
            return Err(format!(
                "AU {au} of the file maps to {} pieces; the flat map assumes coarse striping",
                pieces.len()
            )
            .into());
        }
        let (disk, offset_bytes, _, _) = pieces[0];
        let device = group
            .disk_device(disk)
            .ok_or_else(|| format!("disk {disk} is offline"))?;
        map.push((device, offset_bytes));
    }
    let map_build = started.elapsed();

    // The raw region: the last file_bytes of the disk's AU space. The allocator
    // hands out AUs first fit from the start of a fresh disk, so everything the
    // group uses lies below first_data_au + used AUs.
    let disk = group
        .disks()
        .into_iter()
        .next()
        .ok_or("the group has no disk")?;
    let layout = AtLayout::for_disk(disk.size_bytes, au_bytes).ok_or("no AU layout")?;
    let used_aus = disk.total_aus - disk.free_aus.ok_or("the disk is offline")?;
    let used_end_bytes = (layout.first_data_au + used_aus) * au_bytes;
    let raw_base_bytes = (layout.au_count * au_bytes)
        .checked_sub(file_bytes)
        .filter(|base| *base >= used_end_bytes)
        .ok_or_else(|| {
            format!(
                "the device is too small: the group uses {} MiB and the raw region needs {} MiB more; use a device of at least {} MiB",
                used_end_bytes / MIB,
                file_bytes / MIB,
                (used_end_bytes + file_bytes) / MIB + 2
            )
        })?;
    let map_end = map
        .iter()
        .map(|(_, offset)| offset + au_bytes)
        .max()
        .unwrap_or(0);
    if map_end > raw_base_bytes {
        return Err("the file's AUs reach into the raw region".into());
    }
    println!(
        "extent map: {} AUs fetched with map_primary in {:.1} ms; file AUs at disk offsets {}..{} MiB, raw region {}..{} MiB",
        map.len(),
        map_build.as_secs_f64() * 1e3,
        map.iter().map(|(_, o)| *o).min().unwrap_or(0) / MIB,
        map_end / MIB,
        raw_base_bytes / MIB,
        (raw_base_bytes + file_bytes) / MIB
    );

    // What each side adds per I/O before the engine sees it (the random offset
    // included: every side pays that).
    let calls = options.number("lookup-calls", 1_000_000)?.max(1);
    let raw_ns = lookup_ns(
        &mut RawTarget {
            group: &mut group,
            device,
            base_bytes: raw_base_bytes,
        },
        file_bytes,
        io_bytes,
        calls,
    );
    let flat_ns = lookup_ns(
        &mut FlatMapTarget {
            group: &mut group,
            map: &map,
            au_shift: au_bytes.trailing_zeros(),
        },
        file_bytes,
        io_bytes,
        calls,
    );
    let per_io_ns = lookup_ns(
        &mut PerIoTarget {
            group: &mut group,
            number,
            io_bytes,
        },
        file_bytes,
        io_bytes,
        calls,
    );
    println!(
        "offset + lookup per I/O, no I/O ({calls} calls, best of 3): raw {raw_ns:.1} ns, flat map {flat_ns:.1} ns, map_primary + disk_device {per_io_ns:.1} ns"
    );

    let mut sides = vec![Side::Raw, Side::FlatMap];
    if with_per_io {
        sides.push(Side::MapPerIo);
    }
    let mut fio_note = None;
    if with_fio {
        sides.push(Side::Fio);
    }
    let combos = [
        (Rw::Read, 1),
        (Rw::Read, 32),
        (Rw::Write, 1),
        (Rw::Write, 32),
    ];
    let mut bufs: Vec<AlignedBuf> = (0..DEPTH_MAX)
        .map(|i| {
            let mut b = AlignedBuf::zeroed(io_bytes as usize);
            b.fill(i as u8);
            b
        })
        .collect();
    // results[combo][side][round]
    let mut results: Vec<Vec<Vec<Option<RunFigures>>>> =
        vec![vec![vec![None; rounds as usize]; sides.len()]; combos.len()];
    println!(
        "\n{rounds} rounds x {} (rw, qd) x {} sides x {seconds} s; sides alternate, order reversed every other round;\n\
         before each round of sides, wait up to {quiet_wait} s for the machine to be >= {:.0}% idle",
        combos.len(),
        sides.len(),
        (1.0 - QUIET_BUSY_MAX) * 100.0
    );
    // `round` picks the seed and the order as well as the result slot.
    #[allow(clippy::needless_range_loop)]
    for round in 0..rounds as usize {
        for (c, (rw, qd)) in combos.iter().enumerate() {
            let spec = RunSpec {
                rw: *rw,
                qd: *qd,
                io_bytes,
                file_bytes,
                duration: Duration::from_secs(seconds),
                ios_max,
            };
            let seed = 0x5eed_0000 + round as u64 * 16 + c as u64;
            let mut order: Vec<usize> = (0..sides.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            // One gate per round of sides: the sides then run back to back, so
            // a burst of other work tends to hit a pair rather than one side.
            let background_busy = quiet_gate(Duration::from_secs(quiet_wait));
            let mut line = format!("round {} {:>9} QD{:<2}:", round + 1, rw.name(), qd);
            if background_busy > QUIET_BUSY_MAX {
                line.push_str(&format!(
                    " (machine {:.0}% busy before)",
                    background_busy * 100.0
                ));
            }
            for s in order {
                if sides[s] == Side::Fio && fio_note.is_some() {
                    continue;
                }
                let figures = match sides[s] {
                    Side::Raw => run_raw(
                        &mut RawTarget {
                            group: &mut group,
                            device,
                            base_bytes: raw_base_bytes,
                        },
                        &spec,
                        seed,
                        &mut bufs,
                    )?,
                    Side::FlatMap => run_flat_map(
                        &mut FlatMapTarget {
                            group: &mut group,
                            map: &map,
                            au_shift: au_bytes.trailing_zeros(),
                        },
                        &spec,
                        seed,
                        &mut bufs,
                    )?,
                    Side::MapPerIo => run_map_per_io(
                        &mut PerIoTarget {
                            group: &mut group,
                            number,
                            io_bytes,
                        },
                        &spec,
                        seed,
                        &mut bufs,
                    )?,
                    Side::Fio => match run_fio(&device_path, raw_base_bytes, &spec) {
                        Ok(f) => f,
                        Err(why) => {
                            fio_note = Some(why);
                            continue;
                        }
                    },
                };
                line.push_str(&format!("  {}={:.0}", sides[s].short(), figures.iops));
                results[c][s][round] = Some(figures);
            }
            println!("{line}");
        }
    }
    if let Some(why) = &fio_note {
        println!("fio reference skipped: {why}");
    }

    println!(
        "\nover {rounds} rounds (8 KiB random, io_uring, {seconds} s each): median and best IOPS; medians of latency \
         (submit to completion as the loop sees it) and of CPU per I/O (proc: this process, or fio's; mach: whole machine)"
    );
    println!(
        "{:<10} {:>3}  {:<31} {:>9} {:>9} {:>7} {:>7} {:>10} {:>10}   IOPS per round",
        "rw", "qd", "side", "median", "best", "p50 µs", "p99 µs", "proc µs/IO", "mach µs/IO",
    );
    let mut verdicts = Vec::new();
    for (c, (rw, qd)) in combos.iter().enumerate() {
        let mut medians = vec![f64::NAN; sides.len()];
        let mut bests = vec![f64::NAN; sides.len()];
        for (s, side) in sides.iter().enumerate() {
            let runs: Vec<RunFigures> = results[c][s].iter().flatten().copied().collect();
            if runs.is_empty() {
                continue;
            }
            let pick =
                |f: fn(&RunFigures) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
            medians[s] = pick(|f| f.iops);
            bests[s] = runs.iter().map(|f| f.iops).fold(f64::NAN, f64::max);
            println!(
                "{:<10} {:>3}  {:<31} {:>9.0} {:>9.0} {:>7.0} {:>7.0} {:>10.2} {:>10.2}   {}",
                rw.name(),
                qd,
                side.name(),
                medians[s],
                bests[s],
                pick(|f| f.latency_us_p50 as f64),
                pick(|f| f.latency_us_p99 as f64),
                pick(|f| f.process_cpu_us_per_io),
                pick(|f| f.machine_cpu_us_per_io),
                runs.iter()
                    .map(|f| format!("{:.0}", f.iops))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
        for (s, side) in sides.iter().enumerate().skip(1) {
            if medians[s].is_nan() {
                continue;
            }
            let of_medians = medians[s] / medians[0];
            let of_bests = bests[s] / bests[0];
            let mut paired: Vec<f64> = results[c][s]
                .iter()
                .zip(&results[c][0])
                .filter_map(|(x, raw)| Some(x.as_ref()?.iops / raw.as_ref()?.iops))
                .collect();
            let of_pairs = median(&mut paired);
            let verdict = match side {
                Side::FlatMap => {
                    let measures = [of_medians, of_pairs, of_bests];
                    let met = measures.iter().filter(|r| **r >= 0.97).count();
                    match met {
                        3 => "meets the >= 97% target".to_string(),
                        0 => "BELOW the >= 97% target".to_string(),
                        _ if of_medians >= 0.97 => format!(
                            "meets the >= 97% target on medians ({met} of 3 measures; noisy)"
                        ),
                        _ => format!(
                            "BELOW the >= 97% target on medians ({met} of 3 measures meet it; noisy)"
                        ),
                    }
                }
                Side::MapPerIo => "informative: the library's lookup on every I/O".to_string(),
                Side::Fio | Side::Raw => "informative: fio against cairn's own loop".to_string(),
            };
            verdicts.push(format!(
                "{:<9} QD{:<2} {:<31} / raw: medians {:>6.1}%  paired {:>6.1}%  best {:>6.1}%  {verdict}",
                rw.name(),
                qd,
                side.name(),
                of_medians * 100.0,
                of_pairs * 100.0,
                of_bests * 100.0
            ));
        }
    }
    println!(
        "\nratios against the raw device in the same run: of median IOPS (the target's measure), median of per-round paired ratios, of best runs"
    );
    for v in verdicts {
        println!("{v}");
    }

    let started = Instant::now();
    let report = group.check(false)?;
    println!(
        "\ngroup check after the runs ({:.1} ms): {} files, {} extents, {} AUs in use, {} problems{}",
        started.elapsed().as_secs_f64() * 1e3,
        report.files,
        report.extents,
        report.aus_in_use,
        report.problems.len(),
        if report.clean() {
            ": the raw side left the group's metadata intact"
        } else {
            ""
        }
    );
    for p in &report.problems {
        println!("  {}: {}", p.location, p.what);
    }
    group.dismount()?;
    if !report.clean() {
        return Err("the group check found problems".into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// 1 PiB create and mount

fn disk_paths(dir: &Path, disks: u64) -> Vec<PathBuf> {
    (0..disks)
        .map(|i| dir.join(format!("disk{i:02}.img")))
        .collect()
}

fn attach_all(engine: &mut dyn FileEngine, paths: &[PathBuf]) -> BenchResult<Vec<DeviceId>> {
    let host = Host::real();
    paths
        .iter()
        .map(|p| {
            let file = DeviceFile::open(p, OpenMode::WRITE_EXCLUSIVE, &host)?;
            Ok(engine.attach(file))
        })
        .collect()
}

fn stats_delta(after: EngineStats, before: EngineStats) -> EngineStats {
    EngineStats {
        requests: after.requests - before.requests,
        device_requests: after.device_requests - before.device_requests,
        bytes_read: after.bytes_read - before.bytes_read,
        bytes_written: after.bytes_written - before.bytes_written,
    }
}

fn show_stats(what: &str, s: EngineStats) {
    println!(
        "  {what:<22} {:>7} requests, {:>10} bytes written ({:.2} MiB), {:>10} bytes read ({:.2} MiB)",
        s.requests,
        s.bytes_written,
        s.bytes_written as f64 / MIB as f64,
        s.bytes_read,
        s.bytes_read as f64 / MIB as f64
    );
}

fn human_bytes(b: u64) -> String {
    if b >= GIB {
        format!("{:.2} GiB", b as f64 / GIB as f64)
    } else if b >= MIB {
        format!("{:.2} MiB", b as f64 / MIB as f64)
    } else {
        format!("{:.1} KiB", b as f64 / KIB as f64)
    }
}

fn create_1pib(args: &[String]) -> BenchResult<()> {
    let options = Options::parse(args)?;
    let dir = PathBuf::from(options.text("dir").ok_or("create-1pib needs --dir DIR")?);
    let disks = options.number("disks", 64)?;
    // ext4 with 4 KiB blocks allows files of at most 2^32 blocks minus one.
    let disk_bytes = options.number("disk-bytes", 16 * TIB - 4 * KIB)?;
    let au_bytes = options.number("au-mib", 4)? * MIB;
    let paths = disk_paths(&dir, disks);

    // "16 TiB", "16 TiB - 4 KiB": how far a size is from a round one.
    let from_round = |bytes: u64, unit: u64, unit_name: &str| match bytes.cmp(&unit) {
        std::cmp::Ordering::Equal => unit_name.to_string(),
        std::cmp::Ordering::Less => format!("{unit_name} - {} KiB", (unit - bytes) / KIB),
        std::cmp::Ordering::Greater => format!("{unit_name} + {} KiB", (bytes - unit) / KIB),
    };
    println!(
        "{disks} sparse files of {disk_bytes} bytes ({}): {} bytes in all ({}) under {}; AU {} MiB",
        from_round(disk_bytes, 16 * TIB, "16 TiB"),
        disks * disk_bytes,
        from_round(disks * disk_bytes, 1 << 50, "1 PiB"),
        dir.display(),
        au_bytes / MIB
    );
    let started = Instant::now();
    for p in &paths {
        File::create(p)
            .and_then(|f| f.set_len(disk_bytes))
            .map_err(|e| {
                format!(
                    "{}: cannot make a {disk_bytes}-byte sparse file: {e}",
                    p.display()
                )
            })?;
    }
    let truncate = started.elapsed();

    let mut engine = uring_engine(64)?;
    let started = Instant::now();
    let devices = attach_all(engine.as_mut(), &paths)?;
    let attach = started.elapsed();

    let s0 = engine.stats();
    let started = Instant::now();
    for (i, d) in devices.iter().enumerate() {
        write_label(engine.as_mut(), *d, &label_spec(&format!("BIG_{i:04}"))?)?;
    }
    let label = started.elapsed();
    let s1 = engine.stats();

    let spec = GroupSpec {
        name: "BIG".into(),
        redundancy: Redundancy::External,
        au_bytes,
        sector_bytes: None,
        force: false,
        now_unix_seconds: now_unix_seconds(),
        group_uuid: Uuid::new_v4(),
    };
    let new_disks: Vec<NewDisk> = devices
        .iter()
        .map(|d| NewDisk {
            device: *d,
            failgroup: None,
        })
        .collect();
    let started = Instant::now();
    let engine_ref: &mut dyn IoEngine = engine.as_mut();
    let group = create(engine_ref, &new_disks, &spec)?;
    let create_time = started.elapsed();
    let space = group.space();
    let au_total: u64 = group.disks().iter().map(|d| d.total_aus).sum();
    let started = Instant::now();
    group.dismount()?;
    let dismount = started.elapsed();
    let s2 = engine.stats();
    let name = engine.name();
    drop(engine);

    let (_, maxrss_kib) = rusage(libc::RUSAGE_SELF);
    let mut per_disk = Vec::new();
    for p in &paths {
        per_disk.push(std::fs::metadata(p)?.blocks() * 512);
    }
    let allocated: u64 = per_disk.iter().sum();

    println!("label + create (engine {name}, one process):");
    println!(
        "  truncate {disks} files     {:>9.3} s",
        truncate.as_secs_f64()
    );
    println!("  open + attach           {:>9.3} s", attach.as_secs_f64());
    println!(
        "  label {disks} disks         {:>9.3} s",
        label.as_secs_f64()
    );
    println!(
        "  create group            {:>9.3} s",
        create_time.as_secs_f64()
    );
    println!(
        "  dismount                {:>9.3} s",
        dismount.as_secs_f64()
    );
    println!(
        "  label + create          {:>9.3} s   (+ dismount: {:.3} s)",
        (label + create_time).as_secs_f64(),
        (label + create_time + dismount).as_secs_f64()
    );
    println!(
        "  group: {} data AUs, {} MiB total, {} MiB free",
        au_total, space.total_mb, space.free_mb
    );
    show_stats("label", stats_delta(s1, s0));
    show_stats("create + dismount", stats_delta(s2, s1));
    println!(
        "  allocated blocks of the {disks} files (st_blocks x 512, after dismount): {allocated} bytes ({})",
        human_bytes(allocated)
    );
    let mut by_size: std::collections::BTreeMap<u64, Vec<usize>> = Default::default();
    for (i, b) in per_disk.iter().enumerate() {
        by_size.entry(*b).or_default().push(i);
    }
    println!("  per disk (st_blocks x 512):");
    for (bytes, list) in &by_size {
        let shown = if list.len() > 8 {
            format!("{} disks", list.len())
        } else {
            format!(
                "disk{} {}",
                if list.len() > 1 { "s" } else { "" },
                list.iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )
        };
        println!(
            "    {bytes:>10} bytes ({:>10})  {shown}",
            human_bytes(*bytes)
        );
    }
    println!(
        "  peak RSS of the create process: {maxrss_kib} KiB ({:.1} MiB); VmHWM {} KiB",
        maxrss_kib as f64 / 1024.0,
        status_kib("VmHWM:").unwrap_or(0)
    );

    // Mount in a fresh process: its peak RSS is the mount's alone.
    let exe = std::env::current_exe()?;
    let status = Command::new(exe)
        .args(["mount-phase", "--dir"])
        .arg(&dir)
        .args(["--disks", &disks.to_string()])
        .status()?;
    if !status.success() {
        return Err("the mount phase failed".into());
    }
    Ok(())
}

fn mount_phase(args: &[String]) -> BenchResult<()> {
    let options = Options::parse(args)?;
    let dir = PathBuf::from(options.text("dir").ok_or("mount-phase needs --dir DIR")?);
    let disks = options.number("disks", 64)?;
    let paths = disk_paths(&dir, disks);
    // VmHWM, not ru_maxrss: after exec, ru_maxrss still carries the peak of the
    // forked copy of the parent.
    let hwm_start_kib = status_kib("VmHWM:").unwrap_or(0);
    let mut engine = uring_engine(64)?;
    let started = Instant::now();
    let devices = attach_all(engine.as_mut(), &paths)?;
    let attach = started.elapsed();
    let s0 = engine.stats();
    let started = Instant::now();
    let engine_ref: &mut dyn IoEngine = engine.as_mut();
    let (mut group, report) = mount(engine_ref, &devices, &GroupSelector::Name("BIG".into()))?;
    let mount_time = started.elapsed();
    let s1 = group.engine().stats();
    let hwm_mounted_kib = status_kib("VmHWM:").unwrap_or(0);
    let space = group.space();
    let started = Instant::now();
    let check = group.check(false)?;
    let check_time = started.elapsed();
    let s2 = group.engine().stats();
    let started = Instant::now();
    group.dismount()?;
    let dismount = started.elapsed();
    let hwm_end_kib = status_kib("VmHWM:").unwrap_or(0);
    let (_, maxrss_kib) = rusage(libc::RUSAGE_SELF);

    println!("mount (fresh process):");
    println!("  open + attach           {:>9.3} s", attach.as_secs_f64());
    println!(
        "  mount                   {:>9.3} s   ({} journal records replayed, {} warnings)",
        mount_time.as_secs_f64(),
        report.journal_records_replayed,
        report.warnings.len()
    );
    println!(
        "  check (no repair)       {:>9.3} s   ({} problems)",
        check_time.as_secs_f64(),
        check.problems.len()
    );
    println!(
        "  dismount                {:>9.3} s",
        dismount.as_secs_f64()
    );
    println!(
        "  group: {} MiB total, {} MiB free, {} offline disks",
        space.total_mb, space.free_mb, space.offline_disks
    );
    show_stats("mount", stats_delta(s1, s0));
    show_stats("check", stats_delta(s2, s1));
    println!(
        "  peak RSS of the mount process (VmHWM): {hwm_mounted_kib} KiB ({:.1} MiB) after mount, {hwm_end_kib} KiB after check + dismount; {hwm_start_kib} KiB at start; ru_maxrss {maxrss_kib} KiB",
        hwm_mounted_kib as f64 / 1024.0
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// The data plane against the raw device, from several threads

/// A workload of the data-plane benchmark.
#[derive(Debug, Clone, Copy)]
enum Mix {
    /// 8 KiB random reads.
    Read,
    /// 8 KiB random I/O, 70% reads and 30% writes.
    Oltp,
}

impl Mix {
    fn name(self) -> &'static str {
        match self {
            Mix::Read => "8K random read",
            Mix::Oltp => "8K random 70/30 r/w",
        }
    }
}

/// One thread's way to do one I/O: (write?, file offset, buffer).
type OneIo = Box<dyn FnMut(bool, u64, &mut [u8]) -> BenchResult<()> + Send>;
/// Makes a thread's [`OneIo`].
type MakeIo<'a> = dyn Fn() -> BenchResult<OneIo> + Sync + 'a;

/// One side's figures for one run: I/Os per second and latency percentiles.
struct ThreadsFigures {
    iops: f64,
    p50_us: u64,
    p99_us: u64,
}

/// Run `threads` threads for `seconds`, each doing QD1 I/O of `io_bytes` at
/// random offsets of a `span`-byte file through `io` (made per thread).
fn run_threads(
    threads: usize,
    seconds: u64,
    span: u64,
    io_bytes: u64,
    mix: Mix,
    seed: u64,
    make: &MakeIo<'_>,
) -> BenchResult<ThreadsFigures> {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let results: Vec<Result<(u64, LatencyHistogram), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || -> Result<(u64, LatencyHistogram), String> {
                    let mut io = make().map_err(|e| e.to_string())?;
                    let mut rng = Rng(seed ^ ((t as u64 + 1) * 0x1234_5678));
                    let mut buf = vec![0x5Au8; io_bytes as usize];
                    let mut histogram = LatencyHistogram::new();
                    let mut ios = 0u64;
                    let slots = span / io_bytes;
                    while Instant::now() < deadline {
                        let offset = rng.below(slots) * io_bytes;
                        let write = matches!(mix, Mix::Oltp) && rng.below(10) < 3;
                        let started = Instant::now();
                        io(write, offset, &mut buf).map_err(|e| e.to_string())?;
                        histogram.record(started.elapsed());
                        ios += 1;
                    }
                    Ok((ios, histogram))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a thread panicked".to_string()))
            })
            .collect()
    });
    let mut total = 0u64;
    let mut merged = LatencyHistogram::new();
    for r in results {
        let (ios, h) = r?;
        total += ios;
        for (a, b) in merged.counts.iter_mut().zip(&h.counts) {
            *a += b;
        }
    }
    Ok(ThreadsFigures {
        iops: total as f64 / seconds as f64,
        p50_us: merged.percentile_us(0.50),
        p99_us: merged.percentile_us(0.99),
    })
}

/// Makes a data handle's engine: a new io_uring engine with a duplicate of
/// the device attached.
struct OneDevice {
    file: DeviceFile,
}

impl cairn_store::group::EngineSource for OneDevice {
    fn engine(
        &self,
        disks: &std::collections::BTreeMap<u16, DeviceId>,
        depth: usize,
    ) -> Result<cairn_store::group::live::HandleEngine, cairn_store::group::GroupError> {
        let mut engine = new_file_engine(EngineKind::Uring, depth)
            .map_err(|e| cairn_store::group::GroupError::Invalid(e.to_string()))?;
        let mut ids = std::collections::BTreeMap::new();
        for disk in disks.keys() {
            let dup = self
                .file
                .try_clone()
                .map_err(|e| cairn_store::group::GroupError::Invalid(e.to_string()))?;
            ids.insert(*disk, engine.attach(dup));
        }
        Ok((engine, ids))
    }
}

fn data_plane(args: &[String]) -> BenchResult<()> {
    let options = Options::parse(args)?;
    let device_path = PathBuf::from(
        options
            .text("device")
            .ok_or("data-plane needs --device /dev/loopN (the device is overwritten)")?,
    );
    let seconds = options.number("seconds", 5)?.max(1);
    let rounds = options.number("rounds", 3)?.max(1);
    let file_bytes = options.number("file-mib", 1024)? * MIB;
    let quiet_wait = options.number("quiet-wait", 10)?;
    let io_bytes = 8 * KIB;
    let au_bytes = 4 * MIB;
    if file_bytes == 0 || !file_bytes.is_multiple_of(au_bytes) {
        return Err(format!(
            "--file-mib must be a positive multiple of {}",
            au_bytes / MIB
        )
        .into());
    }
    let thread_counts = [1usize, 2, 4];

    // The group: one external-redundancy file, written whole once.
    let (number, raw_start) = {
        let mut engine = uring_engine(DEPTH_MAX)?;
        let file = DeviceFile::open(&device_path, OpenMode::WRITE_EXCLUSIVE, &Host::real())?;
        let device = engine.attach(file);
        write_label(engine.as_mut(), device, &label_spec("BENCH_0000")?)?;
        let spec = GroupSpec {
            name: "BENCH".into(),
            redundancy: Redundancy::External,
            au_bytes,
            sector_bytes: None,
            force: true,
            now_unix_seconds: now_unix_seconds(),
            group_uuid: Uuid::new_v4(),
        };
        let engine_ref: &mut dyn IoEngine = engine.as_mut();
        let mut group = create(
            engine_ref,
            &[NewDisk {
                device,
                failgroup: None,
            }],
            &spec,
        )?;
        let number = group
            .create_file(
                &GroupPath::parse("+BENCH/f")?,
                file_bytes,
                &CreateOptions::default(),
            )?
            .number;
        let mut chunk = vec![0u8; au_bytes as usize];
        for (i, b) in chunk.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        for au in 0..file_bytes / au_bytes {
            group.write(number, au * au_bytes, &chunk)?;
        }
        // The raw side's region: the last `file_bytes` of the disk's AUs,
        // past every AU the group uses.
        let used_end = group
            .extents(number)
            .unwrap_or(&[])
            .iter()
            .flat_map(|e| e.copies().iter().map(|c| u64::from(c.au) + 1))
            .max()
            .unwrap_or(0)
            * au_bytes;
        let disk_aus = group.disks()[0].total_aus;
        let layout_end = AtLayout::for_disk(group.disks()[0].size_bytes, au_bytes)
            .map_or(0, |l| l.au_count)
            * au_bytes;
        let raw_start = layout_end.saturating_sub(file_bytes);
        if raw_start < used_end || disk_aus == 0 {
            return Err(format!(
                "the device is too small: the file ends at {} MiB, the raw region would start at {} MiB; give a bigger device or a smaller --file-mib",
                used_end / MIB,
                raw_start / MIB
            )
            .into());
        }
        group.dismount()?;
        (number, raw_start)
    };

    // Mounted live: the metadata plane's engine, and one engine per thread.
    let file = DeviceFile::open(&device_path, OpenMode::WRITE_EXCLUSIVE, &Host::real())?;
    let mut meta_engine = uring_engine(DEPTH_MAX)?;
    let device = meta_engine.attach(file.try_clone()?);
    let meta_engine: Box<dyn IoEngine> = meta_engine;
    let (group, _) = cairn_store::group::mount_owned(
        meta_engine,
        &[device],
        &GroupSelector::Name("BENCH".into()),
        cairn_store::group::MissingDisks::Refuse,
    )?;
    let live = cairn_store::group::LiveGroup::new(
        group,
        Box::new(OneDevice {
            file: file.try_clone()?,
        }),
    );
    println!(
        "device {}: external-redundancy group, {} MiB AUs, file of {} MiB; raw region {}..{} MiB; QD1 per thread, {} s per side, {} rounds",
        device_path.display(),
        au_bytes / MIB,
        file_bytes / MIB,
        raw_start / MIB,
        (raw_start + file_bytes) / MIB,
        seconds,
        rounds
    );

    let raw_io = || -> BenchResult<OneIo> {
        let mut engine = new_file_engine(EngineKind::Uring, 4)?;
        let id = engine.attach(file.try_clone()?);
        Ok(Box::new(move |write, offset, buf: &mut [u8]| {
            let at = raw_start + offset;
            if write {
                engine.write_at(id, at, AlignedBuf::from_slice(buf), false)?;
            } else {
                let data = engine.read_at(id, at, buf.len())?;
                buf.copy_from_slice(&data[..]);
            }
            Ok(())
        }))
    };
    let group_io = || -> BenchResult<OneIo> {
        let mut handle = live.handle(4)?;
        Ok(Box::new(move |write, offset, buf: &mut [u8]| {
            if write {
                handle.write(number, offset, buf)?;
            } else {
                handle.read(number, offset, buf)?;
            }
            Ok(())
        }))
    };

    for mix in [Mix::Read, Mix::Oltp] {
        for &threads in &thread_counts {
            let mut raw = Vec::new();
            let mut grp = Vec::new();
            let mut lines = Vec::new();
            for round in 0..rounds {
                // Alternate which side goes first.
                for side in 0..2 {
                    let group_side = (side + round as usize) % 2 == 1;
                    quiet_gate(Duration::from_secs(quiet_wait));
                    let figures = if group_side {
                        run_threads(
                            threads, seconds, file_bytes, io_bytes, mix, round, &group_io,
                        )?
                    } else {
                        run_threads(threads, seconds, file_bytes, io_bytes, mix, round, &raw_io)?
                    };
                    lines.push(format!(
                        "    round {} {:5}: {:>9.0} IOPS  p50 {:>4} µs  p99 {:>5} µs",
                        round + 1,
                        if group_side { "group" } else { "raw" },
                        figures.iops,
                        figures.p50_us,
                        figures.p99_us
                    ));
                    if group_side {
                        grp.push(figures.iops);
                    } else {
                        raw.push(figures.iops);
                    }
                }
            }
            let paired: Vec<f64> = grp.iter().zip(&raw).map(|(g, r)| g / r).collect();
            let ratio = median(&mut grp.clone()) / median(&mut raw.clone());
            println!(
                "{} from {threads} thread{}: group/raw {:.3}× (medians {:.0} / {:.0} IOPS; paired per round {})",
                mix.name(),
                if threads == 1 { "" } else { "s" },
                ratio,
                median(&mut grp.clone()),
                median(&mut raw.clone()),
                paired
                    .iter()
                    .map(|r| format!("{r:.3}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            for line in lines {
                println!("{line}");
            }
        }
    }

    // Metadata while data I/O runs: two threads creating and deleting files
    // against 2 threads of 70/30 I/O on the data plane. Their commits are
    // grouped when they queue up; each commit's time is the group's own
    // measure (barrier, journal record, in-place writes).
    quiet_gate(Duration::from_secs(quiet_wait));
    let stop = std::sync::atomic::AtomicBool::new(false);
    live.meta(|g| g.take_commit_times())?;
    let records_before = live.meta(|g| g.journal_records())?;
    let begun_before = live.operations_begun();
    let metadata_thread = |me: u64| -> Result<(u64, LatencyHistogram, LatencyHistogram), String> {
        let text = |e: &dyn std::fmt::Display| e.to_string();
        let mut creates = LatencyHistogram::new();
        let mut deletes = LatencyHistogram::new();
        let mut n = 0u64;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let path =
                GroupPath::parse(&format!("+BENCH/m{me}-{}", n % 8)).map_err(|e| text(&e))?;
            let started = Instant::now();
            live.meta(|g| g.create_file(&path, 4 * MIB, &CreateOptions::default()))
                .map_err(|e| text(&e))?
                .map_err(|e| text(&e))?;
            creates.record(started.elapsed());
            let started = Instant::now();
            live.meta(|g| g.remove(&path))
                .map_err(|e| text(&e))?
                .map_err(|e| text(&e))?;
            deletes.record(started.elapsed());
            n += 1;
        }
        Ok((n, creates, deletes))
    };
    let (data, metas) = std::thread::scope(|scope| {
        let metas: Vec<_> = (0..2)
            .map(|me| {
                let metadata_thread = &metadata_thread;
                scope.spawn(move || metadata_thread(me))
            })
            .collect();
        let data = run_threads(
            2,
            seconds * 2,
            file_bytes,
            io_bytes,
            Mix::Oltp,
            99,
            &group_io,
        );
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let metas: Vec<_> = metas
            .into_iter()
            .map(|m| {
                m.join()
                    .unwrap_or_else(|_| Err("a metadata thread panicked".to_string()))
            })
            .collect();
        (data, metas)
    });
    let data = data?;
    let begun = live.operations_begun() - begun_before;
    let records = live.meta(|g| g.journal_records())? - records_before;
    let mut commits = LatencyHistogram::new();
    for t in live.meta(|g| g.take_commit_times())? {
        commits.record(t);
    }
    let (mut pairs, mut creates, mut deletes) =
        (0u64, LatencyHistogram::new(), LatencyHistogram::new());
    for m in metas {
        let (n, c, d) = m.map_err(|e| -> Box<dyn Error> { e.into() })?;
        pairs += n;
        creates.merge(&c);
        deletes.merge(&d);
    }
    println!(
        "metadata (2 threads) while 2 threads run 70/30 on the group: {:.0} file create+delete pairs/s ({} in {} s); commit p50 {} µs p99 {} µs ({} commits; {:.2} operations per journal record); create p50 {} µs p99 {} µs, delete p50 {} µs p99 {} µs (each waits for its commit); data meanwhile {:.0} IOPS, p99 {} µs",
        pairs as f64 / (seconds * 2) as f64,
        pairs,
        seconds * 2,
        commits.percentile_us(0.50),
        commits.percentile_us(0.99),
        commits.count(),
        begun as f64 / records.max(1) as f64,
        creates.percentile_us(0.50),
        creates.percentile_us(0.99),
        deletes.percentile_us(0.50),
        deletes.percentile_us(0.99),
        data.iops,
        data.p99_us
    );
    live.dismount()?;
    Ok(())
}
