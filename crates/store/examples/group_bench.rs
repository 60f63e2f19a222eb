//! Group benchmarks. They print figures and ratios against a peer measured in the
//! same run; they assert nothing about timings.
//!
//! `data-plane --device /dev/loopN`: the group's data plane against the raw
//! device, from 1, 2 and 4 threads (each its own io_uring engine: a data
//! handle for the group, the device itself for raw, doing the same I/O on
//! the blocks the group's file occupies), 8 KiB random reads and 70/30.
//! Within each round every thread switches between the sides every
//! `--slice-ms` (10) by the clock, all at once, so that what the shared
//! machine does meanwhile falls on both alike; then file create + delete
//! per second from two threads, with the
//! group's commit times, while two threads run 70/30 on the group; then the
//! data path's own work per I/O, on an engine that does no I/O. With
//! `--control` the group's side is the raw device again (an A/A run: the
//! ratios it prints are this machine's noise alone).
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

use cairn_format::DiskLabel;
use cairn_io::host::Host;
use cairn_io::{
    new_file_engine, AlignedBuf, DeviceFile, DeviceId, EngineKind, EngineStats, FileEngine,
    IoEngine, Op, OpenMode, Request,
};
use cairn_store::group::{
    create, mount, CreateOptions, GroupSelector, GroupSpec, NewDisk, Redundancy,
};
use cairn_store::labeling::{write_label, LabelSpec};
use cairn_store::names::GroupPath;
use uuid::Uuid;

type BenchResult<T> = Result<T, Box<dyn Error>>;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

/// Depth of the data-plane benchmark's setup and metadata-plane engines.
const DEPTH_MAX: usize = 32;
/// Latency histogram: 1 µs buckets up to this, one overflow bucket above.
const LATENCY_US_MAX: usize = 20_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.first().map(String::as_str) {
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
    "usage:\n  group_bench data-plane --device /dev/loopN [--seconds 6] [--rounds 5] [--slice-ms 10] [--threads 1,2,4] [--mix read|oltp|both|write] [--file-mib 1024] [--quiet-wait 10] [--control]\n  group_bench create-1pib --dir DIR [--disks 64] [--disk-bytes N] [--au-mib 4]"
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
    fn text(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
    }
    /// Whether `--name` was given (a flag, without a value).
    fn flag(&self, name: &str) -> bool {
        self.pairs.iter().any(|(n, _)| n == name)
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

/// The calling thread's CPU time so far: user, and kernel.
fn thread_cpu() -> [Duration; 2] {
    let usage = getrusage(libc::RUSAGE_THREAD);
    [usage.ru_utime, usage.ru_stime].map(timeval)
}

/// CPU time (user, kernel) spent from `before` to `now`.
fn cpu_since(now: [Duration; 2], before: [Duration; 2]) -> [Duration; 2] {
    [
        now[0].saturating_sub(before[0]),
        now[1].saturating_sub(before[1]),
    ]
}

fn add_cpu(a: [Duration; 2], b: [Duration; 2]) -> [Duration; 2] {
    [a[0] + b[0], a[1] + b[1]]
}

/// CPU time (user, kernel) per I/O, in µs.
fn per_io(cpu: [Duration; 2], ios: u64) -> [f64; 2] {
    cpu.map(|c| c.as_secs_f64() * 1e6 / ios.max(1) as f64)
}

/// User + system CPU of this process (`who` = RUSAGE_SELF) or of its waited-for
/// children (RUSAGE_CHILDREN), and the peak RSS in KiB.
fn rusage(who: libc::c_int) -> (Duration, u64) {
    let usage = getrusage(who);
    (
        timeval(usage.ru_utime) + timeval(usage.ru_stime),
        usage.ru_maxrss as u64,
    )
}

fn getrusage(who: libc::c_int) -> libc::rusage {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own; `who` is a valid selector.
    let rc = unsafe { libc::getrusage(who, &mut usage) };
    assert_eq!(rc, 0, "invariant: getrusage with a valid selector succeeds");
    usage
}

fn timeval(t: libc::timeval) -> Duration {
    Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000)
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
    /// 8 KiB random writes (only with `--mix write`).
    Write,
}

impl Mix {
    fn name(self) -> &'static str {
        match self {
            Mix::Read => "8K random read",
            Mix::Oltp => "8K random 70/30 r/w",
            Mix::Write => "8K random write",
        }
    }

    fn next_is_write(self, rng: &mut Rng) -> bool {
        match self {
            Mix::Read => false,
            Mix::Oltp => rng.below(10) < 3,
            Mix::Write => true,
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
    /// CPU time of the I/O threads per I/O, in µs: user, and kernel in
    /// their own context.
    cpu_us_per_io: [f64; 2],
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
    let results: Vec<Result<(LatencyHistogram, [Duration; 2]), String>> =
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    scope.spawn(
                        move || -> Result<(LatencyHistogram, [Duration; 2]), String> {
                            let mut io = make().map_err(|e| e.to_string())?;
                            let mut rng = Rng(seed ^ ((t as u64 + 1) * 0x1234_5678));
                            let mut buf = vec![0x5Au8; io_bytes as usize];
                            let mut histogram = LatencyHistogram::new();
                            let cpu_before = thread_cpu();
                            let slots = span / io_bytes;
                            while Instant::now() < deadline {
                                let offset = rng.below(slots) * io_bytes;
                                let write = mix.next_is_write(&mut rng);
                                let started = Instant::now();
                                io(write, offset, &mut buf).map_err(|e| e.to_string())?;
                                histogram.record(started.elapsed());
                            }
                            let cpu = cpu_since(thread_cpu(), cpu_before);
                            Ok((histogram, cpu))
                        },
                    )
                })
                .collect();
            join_all(handles)
        });
    let mut cpu = [Duration::ZERO; 2];
    let mut merged = LatencyHistogram::new();
    for r in results {
        let (h, c) = r?;
        cpu = add_cpu(cpu, c);
        merged.merge(&h);
    }
    Ok(ThreadsFigures {
        iops: merged.count() as f64 / seconds as f64,
        p50_us: merged.percentile_us(0.50),
        p99_us: merged.percentile_us(0.99),
        cpu_us_per_io: per_io(cpu, merged.count()),
    })
}

/// Each thread's result, in order; a thread that panicked gives an error.
fn join_all<T>(
    handles: Vec<std::thread::ScopedJoinHandle<'_, Result<T, String>>>,
) -> Vec<Result<T, String>> {
    handles
        .into_iter()
        .map(|h| {
            h.join()
                .unwrap_or_else(|_| Err("a thread panicked".to_string()))
        })
        .collect()
}

/// The side (0 raw, 1 group) of slice `n` of a paired round: raw, group,
/// group, raw, raw, group, ... so that neither side always goes first.
fn side_of_slice(n: u64) -> usize {
    ((n + n / 2) % 2) as usize
}

/// Run `threads` threads for `seconds`, each with both sides' I/O made once
/// (`raw`, `group`), switching all together between the sides every
/// `slice` by the clock (in the order raw, group, group, raw, ...), so that
/// whatever the machine does meanwhile falls on both sides alike. Each
/// thread does QD1 I/O of `io_bytes` at random offsets of a `span`-byte
/// file; an I/O counts for the side it started on. Returns (raw, group).
#[allow(clippy::too_many_arguments)]
fn run_paired(
    threads: usize,
    seconds: u64,
    slice: Duration,
    span: u64,
    io_bytes: u64,
    mix: Mix,
    seed: u64,
    raw: &MakeIo<'_>,
    group: &MakeIo<'_>,
) -> BenchResult<[ThreadsFigures; 2]> {
    /// Per side: its latencies, and the CPU time its I/O threads spent
    /// in its slices (user and kernel, in the threads' own context).
    type SideCounts = [(LatencyHistogram, [Duration; 2]); 2];
    let ready = std::sync::Barrier::new(threads);
    let start = std::sync::OnceLock::new();
    let total = Duration::from_secs(seconds);
    let results: Vec<Result<SideCounts, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (ready, start) = (&ready, &start);
                scope.spawn(move || -> Result<SideCounts, String> {
                    let made = raw().and_then(|r| Ok([r, group()?]));
                    // Every thread's engines are made before the clock
                    // starts; one that failed still meets the others here.
                    ready.wait();
                    let mut ios = made.map_err(|e| e.to_string())?;
                    let mut rng = Rng(seed ^ ((t as u64 + 1) * 0x1234_5678));
                    let mut buf = vec![0x5Au8; io_bytes as usize];
                    let mut sides = [
                        (LatencyHistogram::new(), [Duration::ZERO; 2]),
                        (LatencyHistogram::new(), [Duration::ZERO; 2]),
                    ];
                    let slots = span / io_bytes;
                    let t0: Instant = *start.get_or_init(Instant::now);
                    // The side the thread is on, and its CPU time when it got there.
                    let mut on = (0, thread_cpu());
                    loop {
                        let started = Instant::now();
                        let since = started.saturating_duration_since(t0);
                        let side =
                            side_of_slice((since.as_nanos() / slice.as_nanos().max(1)) as u64);
                        if side != on.0 || since >= total {
                            let cpu = thread_cpu();
                            sides[on.0].1 = add_cpu(sides[on.0].1, cpu_since(cpu, on.1));
                            on = (side, cpu);
                        }
                        if since >= total {
                            break;
                        }
                        let offset = rng.below(slots) * io_bytes;
                        let write = mix.next_is_write(&mut rng);
                        ios[side](write, offset, &mut buf).map_err(|e| e.to_string())?;
                        sides[side].0.record(started.elapsed());
                    }
                    Ok(sides)
                })
            })
            .collect();
        join_all(handles)
    });
    let mut merged = [
        (LatencyHistogram::new(), [Duration::ZERO; 2]),
        (LatencyHistogram::new(), [Duration::ZERO; 2]),
    ];
    for r in results {
        for (m, (h, cpu)) in merged.iter_mut().zip(r?) {
            m.0.merge(&h);
            m.1 = add_cpu(m.1, cpu);
        }
    }
    // Each side's time: its slices (the last one cut at the round's end).
    let mut time = [0.0f64; 2];
    let mut n = 0u64;
    let mut at = Duration::ZERO;
    while at < total {
        time[side_of_slice(n)] += slice.min(total - at).as_secs_f64();
        at += slice;
        n += 1;
    }
    let [raw, group] = merged;
    Ok(
        [(raw, time[0]), (group, time[1])].map(|((h, cpu), secs)| ThreadsFigures {
            iops: h.count() as f64 / secs,
            p50_us: h.percentile_us(0.50),
            p99_us: h.percentile_us(0.99),
            cpu_us_per_io: per_io(cpu, h.count()),
        }),
    )
}

/// One raw I/O, QD1, through one reused aligned buffer (`spare`), as a
/// careful direct-I/O program does; the caller's bytes are copied in and
/// out, as the group's are.
fn raw_io_at(
    engine: &mut dyn IoEngine,
    device: DeviceId,
    spare: &mut Option<AlignedBuf>,
    write: bool,
    offset_bytes: u64,
    buf: &mut [u8],
) -> BenchResult<()> {
    let mut io_buf = spare.take().ok_or("the raw side lost its buffer")?;
    let op = if write {
        io_buf.copy_from_slice(buf);
        Op::Write {
            offset_bytes,
            buf: io_buf,
            fua: false,
        }
    } else {
        Op::Read {
            offset_bytes,
            buf: io_buf,
        }
    };
    let done = engine.execute(Request { device, tag: 0, op })?;
    done.result?;
    let io_buf = done.buf.ok_or("the engine kept the raw side's buffer")?;
    if !write {
        buf.copy_from_slice(&io_buf);
    }
    *spare = Some(io_buf);
    Ok(())
}

/// An engine that does no I/O: every request completes at once, whole,
/// with its buffer untouched. What is left of a group I/O's time on it is
/// the data path's own work.
struct NullEngine {
    geometry: cairn_io::Geometry,
    done: Vec<cairn_io::Completion>,
}

impl IoEngine for NullEngine {
    fn name(&self) -> &'static str {
        "null"
    }
    fn geometry(&self, _device: DeviceId) -> Option<&cairn_io::Geometry> {
        Some(&self.geometry)
    }
    fn submit(&mut self, request: Request) -> Result<(), cairn_io::SubmitError> {
        let kind = request.op.kind();
        let (result, buf) = match request.op {
            Op::Read { buf, .. } | Op::Write { buf, .. } => (buf.len() as u64, Some(buf)),
            Op::Discard { len_bytes, .. } | Op::WriteZeroes { len_bytes, .. } => (len_bytes, None),
            _ => (0, None),
        };
        self.done.push(cairn_io::Completion {
            device: request.device,
            tag: request.tag,
            kind,
            result: Ok(result),
            buf,
        });
        Ok(())
    }
    fn wait(&mut self, _min: usize) -> Result<(), cairn_io::IoError> {
        Ok(())
    }
    fn set_io_timeout(&mut self, _timeout: Option<std::time::Duration>) {
        // Every request completes in `submit`: none can hang.
    }
    fn pop_completion(&mut self) -> Option<cairn_io::Completion> {
        self.done.pop()
    }
    fn in_flight(&self) -> usize {
        self.done.len()
    }
    fn depth_max(&self) -> usize {
        DEPTH_MAX
    }
    fn stats(&self) -> EngineStats {
        EngineStats::default()
    }
}

/// Makes data handles whose engine is a [`NullEngine`].
struct NullSource {
    geometry: cairn_io::Geometry,
}

impl cairn_store::group::EngineSource for NullSource {
    fn engine(
        &self,
        disks: &std::collections::BTreeMap<u16, DeviceId>,
        _depth: usize,
    ) -> Result<cairn_store::group::HandleEngine, cairn_store::group::GroupError> {
        let engine = NullEngine {
            geometry: self.geometry.clone(),
            done: Vec::new(),
        };
        Ok((Box::new(engine), disks.clone()))
    }
}

/// The data path's own work per I/O: the group file's reads and writes
/// from one thread through handles whose engine does no I/O, against the
/// raw side's buffer handling on the same engine. Nothing reaches the
/// device, so the figures do not move with the device or with the
/// machine's other load the way the paired runs do.
fn data_path_cost(
    file: &DeviceFile,
    number: u32,
    file_bytes: u64,
    io_bytes: u64,
) -> BenchResult<()> {
    const IOS: u64 = 200_000;
    let (live, device, geometry) = mount_live(file, |geometry| {
        Ok(Box::new(NullSource {
            geometry: geometry.clone(),
        }))
    })?;
    let slots = file_bytes / io_bytes;
    let mut buf = vec![0x5Au8; io_bytes as usize];
    // Nanoseconds per I/O of IOS random I/Os through `io`, after a tenth as
    // many untimed (caches, spare buffers, the first touch of each page).
    let mut time = |io: &mut dyn FnMut(u64, &mut [u8]) -> BenchResult<()>| {
        let mut rng = Rng(7);
        for _ in 0..IOS / 10 {
            io(rng.below(slots) * io_bytes, &mut buf)?;
        }
        let started = Instant::now();
        for _ in 0..IOS {
            io(rng.below(slots) * io_bytes, &mut buf)?;
        }
        BenchResult::Ok(started.elapsed().as_nanos() as f64 / IOS as f64)
    };
    let mut handle = live.handle(4)?;
    let group_read = time(&mut |at, b| Ok(handle.read(number, at, b)?))?;
    let group_write = time(&mut |at, b| Ok(handle.write(number, at, b)?))?;
    drop(handle);
    let mut engine = NullEngine {
        geometry,
        done: Vec::new(),
    };
    let mut spare = Some(AlignedBuf::zeroed(io_bytes as usize));
    let raw_read = time(&mut |at, b| raw_io_at(&mut engine, device, &mut spare, false, at, b))?;
    let raw_write = time(&mut |at, b| raw_io_at(&mut engine, device, &mut spare, true, at, b))?;
    println!(
        "the data path's own work per {} KiB I/O (1 thread, {IOS} random I/Os each, an engine that does no I/O): read {:.0} ns, write {:.0} ns; raw {:.0} / {:.0} ns; the group's excess {:+.0} / {:+.0} ns",
        io_bytes / 1024,
        group_read,
        group_write,
        raw_read,
        raw_write,
        group_read - raw_read,
        group_write - raw_write
    );
    live.dismount()?;
    Ok(())
}

/// Group BENCH on `file`, mounted live: the metadata plane on its own
/// io_uring engine, data handles on the engines `source` makes (given the
/// device's geometry). Also the device's id in the metadata plane's engine,
/// and its geometry.
fn mount_live(
    file: &DeviceFile,
    source: impl FnOnce(&cairn_io::Geometry) -> BenchResult<Box<dyn cairn_store::group::EngineSource>>,
) -> BenchResult<(cairn_store::group::LiveGroup, DeviceId, cairn_io::Geometry)> {
    let mut meta_engine = uring_engine(DEPTH_MAX)?;
    let device = meta_engine.attach(file.try_clone()?);
    let geometry = meta_engine
        .geometry(device)
        .cloned()
        .ok_or("the engine has no geometry for the device")?;
    let meta_engine: Box<dyn IoEngine> = meta_engine;
    let (group, _) = cairn_store::group::mount_owned(
        meta_engine,
        &[device],
        &GroupSelector::Name("BENCH".into()),
        cairn_store::group::MissingDisks::Refuse,
    )?;
    let live = cairn_store::group::LiveGroup::new(group, source(&geometry)?);
    Ok((live, device, geometry))
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
    ) -> Result<cairn_store::group::HandleEngine, cairn_store::group::GroupError> {
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
    let seconds = options.number("seconds", 6)?.max(1);
    let rounds = options.number("rounds", 5)?.max(1);
    let file_bytes = options.number("file-mib", 1024)? * MIB;
    let quiet_wait = options.number("quiet-wait", 10)?;
    // How often the threads switch between the sides within a round.
    let slice = Duration::from_millis(options.number("slice-ms", 10)?.max(1));
    if slice * 4 > Duration::from_secs(seconds) {
        return Err(format!(
            "--slice-ms {}: a round of {seconds} s needs at least four slices (raw, group, group, raw); give a shorter slice or longer rounds",
            slice.as_millis()
        )
        .into());
    }
    let io_bytes = 8 * KIB;
    let au_bytes = 4 * MIB;
    if file_bytes == 0 || !file_bytes.is_multiple_of(au_bytes) {
        return Err(format!(
            "--file-mib must be a positive multiple of {}",
            au_bytes / MIB
        )
        .into());
    }
    // `--threads 4` or `--threads 1,2,4` (the default); `--mix read|oltp|both`
    // (the default), or `write` to look at writes alone.
    let thread_counts: Vec<usize> = options
        .text("threads")
        .unwrap_or("1,2,4")
        .split(',')
        .map(|t| {
            t.trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=64).contains(n))
                .ok_or_else(|| format!("--threads {t}: give thread counts from 1 to 64, as 1,2,4"))
        })
        .collect::<Result<_, _>>()?;
    let mixes: Vec<Mix> = match options.text("mix").unwrap_or("both") {
        "read" => vec![Mix::Read],
        "oltp" => vec![Mix::Oltp],
        "write" => vec![Mix::Write],
        "both" => vec![Mix::Read, Mix::Oltp],
        other => return Err(format!("--mix {other}: give read, oltp, both or write").into()),
    };

    // The group: one external-redundancy file, written whole once.
    let number = {
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
        group.dismount()?;
        number
    };

    // Mounted live: the metadata plane's engine, and one engine per thread.
    let file = DeviceFile::open(&device_path, OpenMode::WRITE_EXCLUSIVE, &Host::real())?;
    let (live, _, _) = mount_live(&file, |_| {
        Ok(Box::new(OneDevice {
            file: file.try_clone()?,
        }))
    })?;
    // Where each AU of the file lies on the device, from its published
    // snapshot: the raw side does its I/O on these very blocks, so both
    // sides touch the same memory behind the loop device. (Against a
    // separate raw region at the end of the device, the group read
    // 0.85-0.94x at 2 and 4 threads in a run where the same blocks gave
    // 0.98x; fio too found the two regions' rates apart after a run.)
    let snap = live
        .plane()
        .file(number)
        .ok_or("the benchmark's file is not published")?;
    let file_at: Vec<u64> = (0..file_bytes / au_bytes)
        .map(|i| {
            let place = snap.layout.locate(i * au_bytes);
            if place.run_bytes < au_bytes {
                return Err(format!(
                    "AU {i} of the file is not contiguous on its disk; the raw side maps whole AUs"
                ));
            }
            let copy = snap
                .extent(place.extent)
                .and_then(|e| e.copies().first())
                .ok_or_else(|| format!("AU {i} of the file has no copy"))?;
            Ok(u64::from(copy.au) * snap.au_bytes + place.offset_in_extent)
        })
        .collect::<Result<_, String>>()?;
    drop(snap);
    println!(
        "device {}: external-redundancy group, {} MiB AUs, file of {} MiB; the raw side does the same I/O on the blocks the file occupies; QD1 per thread; {} rounds of {} s, in which every thread switches between raw and group every {} ms",
        device_path.display(),
        au_bytes / MIB,
        file_bytes / MIB,
        rounds,
        seconds,
        slice.as_millis()
    );

    let file_at = std::sync::Arc::new(file_at);
    let raw_io = || -> BenchResult<OneIo> {
        let mut engine = new_file_engine(EngineKind::Uring, 4)?;
        let file_at = file_at.clone();
        let id = engine.attach(file.try_clone()?);
        // One aligned buffer, reused, as a careful direct-I/O program does;
        // the caller's bytes are copied in and out, as the group's are.
        let mut spare = Some(AlignedBuf::zeroed(io_bytes as usize));
        Ok(Box::new(move |write, offset, buf: &mut [u8]| {
            let at = file_at[(offset / au_bytes) as usize] + offset % au_bytes;
            raw_io_at(&mut *engine, id, &mut spare, write, at, buf)
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

    // With --control the second side is the raw device again, at the same
    // region: an A/A run, whose ratios show how far this machine's noise
    // alone moves them.
    let control = options.flag("control");
    let (second, second_name, ratio_name): (&MakeIo<'_>, _, _) = if control {
        (&raw_io, "raw'", "raw'/raw (A/A control)")
    } else {
        (&group_io, "group", "group/raw")
    };
    for &mix in &mixes {
        for &threads in &thread_counts {
            let mut raw = Vec::new();
            let mut grp = Vec::new();
            // Per round: the group's CPU per I/O less the raw device's.
            let mut user_extra = Vec::new();
            let mut kernel_extra = Vec::new();
            let mut lines = Vec::new();
            for round in 0..rounds {
                quiet_gate(Duration::from_secs(quiet_wait));
                let [r, g] = run_paired(
                    threads, seconds, slice, file_bytes, io_bytes, mix, round, &raw_io, second,
                )?;
                for (name, figures) in [("raw", &r), (second_name, &g)] {
                    lines.push(format!(
                        "    round {} {:5}: {:>9.0} IOPS  p50 {:>4} µs  p99 {:>5} µs  CPU per I/O user {:>4.1} µs, kernel {:>5.1} µs",
                        round + 1,
                        name,
                        figures.iops,
                        figures.p50_us,
                        figures.p99_us,
                        figures.cpu_us_per_io[0],
                        figures.cpu_us_per_io[1]
                    ));
                }
                raw.push(r.iops);
                grp.push(g.iops);
                user_extra.push(g.cpu_us_per_io[0] - r.cpu_us_per_io[0]);
                kernel_extra.push(g.cpu_us_per_io[1] - r.cpu_us_per_io[1]);
            }
            // The ratio is the median of the rounds' own ratios: each
            // round's two sides ran in the same seconds, where the machine
            // moves between rounds (at 1 thread by up to 4x in one run),
            // and a ratio of the sides' medians would pair rounds that did
            // not run together.
            let paired: Vec<f64> = grp.iter().zip(&raw).map(|(g, r)| g / r).collect();
            let ratio = median(&mut paired.clone());
            let (grp_median, raw_median) = (median(&mut grp), median(&mut raw));
            println!(
                "{} from {threads} thread{}: {ratio_name} {:.3}× (median of the rounds' ratios {}; IOPS medians {:.0} / {:.0}, their ratio {:.3}; {second_name}'s CPU per I/O over raw: user {:+.1} µs, kernel {:+.1} µs)",
                mix.name(),
                if threads == 1 { "" } else { "s" },
                ratio,
                paired
                    .iter()
                    .map(|r| format!("{r:.3}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                grp_median,
                raw_median,
                grp_median / raw_median,
                median(&mut user_extra),
                median(&mut kernel_extra)
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
        "metadata (2 threads) while 2 threads run 70/30 on the group: {:.0} file create+delete pairs/s ({} in {} s); commit p50 {} µs p99 {} µs ({} commits; {:.2} operations per journal record); create p50 {} µs p99 {} µs, delete p50 {} µs p99 {} µs (each waits for its commit); data meanwhile {:.0} IOPS, p99 {} µs, CPU per I/O user {:.1} µs, kernel {:.1} µs",
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
        data.p99_us,
        data.cpu_us_per_io[0],
        data.cpu_us_per_io[1]
    );
    live.dismount()?;
    data_path_cost(&file, number, file_bytes, io_bytes)
}
