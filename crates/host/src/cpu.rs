//! CPU: this process's, and the whole machine's.
//!
//! `getrusage(RUSAGE_SELF)` counts every thread of this process, user and
//! system, to the microsecond — the cost of Cairn itself, and the denominator of
//! IOPS per CPU-second. It cannot see work the kernel does for us elsewhere: a
//! loop device's kworkers, interrupt and softirq handlers, io_uring's `iou-wrk`
//! threads are charged to no process (or to another one). So the machine's busy
//! share from `/proc/stat` is recorded beside it; comparing two tools on the
//! process figure alone would favour the one that pushes more work into the
//! kernel.

use std::fs;
use std::time::Instant;

use cairn_io::host::Host;
use serde::{Deserialize, Serialize};

/// The tool's own CPU in one interval, and the machine's.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct CpuInterval {
    pub user_s: f64,
    pub sys_s: f64,
    /// Whole machine busy % (all CPUs; 100 = every CPU busy), from /proc/stat.
    pub machine_busy_pct: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct CpuSummary {
    /// The process's user and system CPU (getrusage) over the measured window.
    pub user_s: f64,
    pub sys_s: f64,
    /// I/Os per CPU-second of this process: the efficiency figure.
    pub iops_per_cpu_s: f64,
    pub machine_busy_pct: f64,
}

/// The aggregate `cpu` line of `/proc/stat`, in clock ticks summed over all CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcStatCpu {
    /// Everything that is neither idle nor iowait: user, nice, system, irq,
    /// softirq and steal (guest time is already inside user and nice).
    pub busy: u64,
    pub idle: u64,
    /// Idle with I/O outstanding: idle as far as the CPU is concerned.
    pub iowait: u64,
}

impl ProcStatCpu {
    /// Parse the `cpu ` line of a `/proc/stat` text. Kernels before 2.6.11 give
    /// fewer columns; missing ones count as zero.
    pub fn parse(proc_stat: &str) -> Option<Self> {
        let line = proc_stat
            .lines()
            .find(|l| l.split_whitespace().next() == Some("cpu"))?;
        let values: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|v| v.parse::<u64>())
            .collect::<Result<_, _>>()
            .ok()?;
        if values.len() < 4 {
            return None;
        }
        let at = |i: usize| values.get(i).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal [guest guest_nice]
        let busy = [0, 1, 2, 5, 6, 7]
            .iter()
            .fold(0u64, |sum, i| sum.saturating_add(at(*i)));
        Some(Self {
            busy,
            idle: at(3),
            iowait: at(4),
        })
    }
}

/// One reading of the CPU counters, taken at `at`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuSample {
    pub at: Instant,
    /// This process's user and system CPU so far, in microseconds (getrusage).
    pub user_us: u64,
    pub sys_us: u64,
    /// The machine's `/proc/stat` counters, `None` where `/proc/stat` is unreadable.
    pub machine: Option<ProcStatCpu>,
}

/// Read this process's CPU and the machine's `/proc/stat` (under `host.proc`) now.
pub fn cpu_sample(host: &Host) -> CpuSample {
    let (user_us, sys_us) = rusage_self_us();
    let machine = fs::read_to_string(host.proc.join("stat"))
        .ok()
        .and_then(|text| ProcStatCpu::parse(&text));
    CpuSample {
        at: Instant::now(),
        user_us,
        sys_us,
        machine,
    }
}

fn rusage_self_us() -> (u64, u64) {
    // SAFETY: rusage is plain data; all-zero is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: usage is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return (0, 0);
    }
    let us = |tv: libc::timeval| {
        let s = u64::try_from(tv.tv_sec).unwrap_or(0);
        let us = u64::try_from(tv.tv_usec).unwrap_or(0);
        s.saturating_mul(1_000_000).saturating_add(us)
    };
    (us(usage.ru_utime), us(usage.ru_stime))
}

/// The machine's busy share between two readings: (Δtotal − Δidle − Δiowait)
/// / Δtotal × 100, over all CPUs (100 = every CPU busy the whole time). Zero
/// when either reading lacks `/proc/stat` or no tick passed. A counter that went
/// backwards (iowait does on some kernels) counts as no change.
fn machine_busy_pct(a: &CpuSample, b: &CpuSample) -> f64 {
    let (Some(a), Some(b)) = (a.machine, b.machine) else {
        return 0.0;
    };
    let busy = b.busy.saturating_sub(a.busy);
    let idle = b.idle.saturating_sub(a.idle);
    let iowait = b.iowait.saturating_sub(a.iowait);
    let total = busy.saturating_add(idle).saturating_add(iowait);
    if total == 0 {
        0.0
    } else {
        100.0 * busy as f64 / total as f64
    }
}

fn process_s(a: &CpuSample, b: &CpuSample) -> (f64, f64) {
    (
        b.user_us.saturating_sub(a.user_us) as f64 / 1e6,
        b.sys_us.saturating_sub(a.sys_us) as f64 / 1e6,
    )
}

/// The CPU used between two readings (`a` the earlier).
pub fn cpu_interval(a: &CpuSample, b: &CpuSample) -> CpuInterval {
    let (user_s, sys_s) = process_s(a, b);
    CpuInterval {
        user_s,
        sys_s,
        machine_busy_pct: machine_busy_pct(a, b),
    }
}

/// The CPU used over a measured window in which `ios` I/Os completed, with the
/// efficiency figure `ios / (user + sys)` (zero when no CPU time was measured).
pub fn cpu_summary(a: &CpuSample, b: &CpuSample, ios: u64) -> CpuSummary {
    let (user_s, sys_s) = process_s(a, b);
    let cpu_s = user_s + sys_s;
    CpuSummary {
        user_s,
        sys_s,
        iops_per_cpu_s: if cpu_s > 0.0 { ios as f64 / cpu_s } else { 0.0 },
        machine_busy_pct: machine_busy_pct(a, b),
    }
}
