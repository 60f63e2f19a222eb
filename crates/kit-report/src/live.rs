//! Live interval lines for a terminal, one per reporting interval, in the columns
//! vdbench users read at a glance: rate, MB/s, transfer size, read share,
//! response times, queue depth and CPU.
//!
//! Every column has a fixed width so that a run of lines reads as a table; a value
//! too wide for its column widens that line rather than being cut, because a
//! truncated number is a wrong number. Response times are in ms with three
//! decimals (µs resolution), MB are 2^20 bytes (see [`cairn_kit::result`]).
//! A warm-up interval is marked at the end of its line, as is an open-loop
//! backlog, so a reader never mistakes either for steady state.

use cairn_kit::model::{Arrival, Rate, RunDef};
use cairn_kit::result::{IntervalRecord, RunRecord};

use super::units;

/// (top header, bottom header, width) of each column after the time.
const COLUMNS: [(&str, &str, usize); 13] = [
    ("", "interval", 8),
    ("i/o", "rate", 10),
    ("MB/sec", "(2^20)", 9),
    ("bytes", "/io", 8),
    ("read", "pct", 6),
    ("resp", "time ms", 8),
    ("read", "resp ms", 8),
    ("write", "resp ms", 8),
    ("resp", "max ms", 9),
    ("resp", "stddev ms", 9),
    ("queue", "depth", 6),
    ("cpu%", "tool", 6),
    ("cpu%", "busy", 6),
];
const TIME_WIDTH: usize = 8;

/// The two header lines, to print before a run's first interval (and again
/// every so many lines, as the caller likes).
pub fn header() -> String {
    let mut top = format!("{:<TIME_WIDTH$}", "");
    let mut bottom = format!("{:>TIME_WIDTH$}", "time");
    for (t, b, w) in COLUMNS {
        top.push_str(&format!(" {t:>w$}"));
        bottom.push_str(&format!(" {b:>w$}"));
    }
    format!("{}\n{}", top.trim_end(), bottom)
}

/// One interval's line; `clock` is the wall-clock time of the interval's end, `HH:MM:SS`.
pub fn line(rec: &IntervalRecord, clock: &str) -> String {
    let s = &rec.all;
    let cpu_tool = if rec.seconds > 0.0 {
        100.0 * (rec.cpu.user_s + rec.cpu.sys_s) / rec.seconds
    } else {
        0.0
    };
    let mut out = format!("{clock:<TIME_WIDTH$}");
    let values = [
        rec.index.to_string(),
        format!("{:.1}", s.iops),
        format!("{:.2}", s.mb_per_s),
        format!("{:.0}", s.bytes_per_io),
        format!("{:.1}", s.read_pct),
        format!("{:.3}", s.resp_ms),
        format!("{:.3}", s.read_resp_ms),
        format!("{:.3}", s.write_resp_ms),
        format!("{:.3}", s.resp_max_ms),
        format!("{:.3}", s.resp_stddev_ms),
        format!("{:.1}", s.queue_depth),
        format!("{cpu_tool:.1}"),
        format!("{:.1}", rec.cpu.machine_busy_pct),
    ];
    push_values(&mut out, &values);
    if rec.warmup {
        out.push_str("  warm-up");
    }
    if s.backlog > 0 {
        out.push_str(&format!("  backlog {}", s.backlog));
    }
    out
}

/// The run's average line over the measured intervals, labelled with their range
/// (`avg_2-60`: interval 1 was warm-up), from the run's totals.
pub fn total_line(run: &RunRecord) -> String {
    let measured: Vec<u32> = run
        .intervals
        .iter()
        .filter(|i| !i.warmup)
        .map(|i| i.index)
        .collect();
    let label = match (measured.first(), measured.last()) {
        (Some(a), Some(b)) => format!("avg_{a}-{b}"),
        _ => "avg".to_string(),
    };
    let t = &run.totals.all;
    let ms = |us: f64| us / 1000.0;
    // Little's law over the whole window, as each interval's queue depth is.
    let queue_depth = t.all.iops * t.all.latency.mean_us / 1e6;
    let cpu_tool = if run.measured_s > 0.0 {
        100.0 * (run.cpu.user_s + run.cpu.sys_s) / run.measured_s
    } else {
        0.0
    };
    let first_width = TIME_WIDTH + 1 + COLUMNS[0].2;
    let mut out = format!("{label:>first_width$}");
    let values = [
        format!("{:.1}", t.all.iops),
        format!("{:.2}", t.all.mb_per_s),
        format!("{:.0}", t.all.bytes_per_io),
        format!("{:.1}", t.read_pct()),
        format!("{:.3}", ms(t.all.latency.mean_us)),
        format!("{:.3}", ms(t.read.latency.mean_us)),
        format!("{:.3}", ms(t.write.latency.mean_us)),
        format!("{:.3}", ms(t.all.latency.max_us)),
        format!("{:.3}", ms(t.all.latency.stddev_us)),
        format!("{queue_depth:.1}"),
        format!("{cpu_tool:.1}"),
        format!("{:.1}", run.cpu.machine_busy_pct),
    ];
    let mut rest = String::new();
    for (v, (_, _, w)) in values.iter().zip(&COLUMNS[1..]) {
        rest.push_str(&format!(" {v:>w$}"));
    }
    out.push_str(&rest);
    out
}

fn push_values(out: &mut String, values: &[String; 13]) {
    for (v, (_, _, w)) in values.iter().zip(COLUMNS) {
        out.push_str(&format!(" {v:>w$}"));
    }
}

/// The line announcing a run: its name, the rate asked for and how long it goes.
///
/// `target_iops` is the open-loop rate in I/Os per second as the engine resolved
/// it (a curve percentage applied to its max run); `None` for closed loop.
pub fn run_banner(run: &RunDef, target_iops: Option<f64>) -> String {
    let title = if run.label.is_empty() {
        run.rd.clone()
    } else {
        format!("{} {}", run.rd, run.label)
    };
    let arrival = match run.arrival {
        Arrival::Exponential => "exponential",
        Arrival::Uniform => "uniform",
        Arrival::Deterministic => "deterministic",
    };
    let rate = match (run.rate, target_iops) {
        (Rate::Max, _) if run.curve.is_some() => {
            "iorate=max (closed loop; calibrates the curve)".to_string()
        }
        (Rate::Max, _) => "iorate=max (closed loop)".to_string(),
        (Rate::CurvePct(p), Some(t)) => format!(
            "iorate={}% of max = {} IO/s (open loop, {arrival} arrivals)",
            units::grouped(p, 0),
            units::grouped(t, 1)
        ),
        (Rate::CurvePct(p), None) => format!("iorate={}% of max", units::grouped(p, 0)),
        (Rate::Fixed(_), Some(t)) | (Rate::Fixed(t), None) => format!(
            "iorate={} IO/s (open loop, {arrival} arrivals)",
            units::grouped(t, 1)
        ),
    };
    format!(
        "Starting {title}: {rate}; elapsed {}, warm-up {}, interval {}",
        units::seconds(run.elapsed.as_secs_f64()),
        units::seconds(run.warmup.as_secs_f64()),
        units::seconds(run.interval.as_secs_f64()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_kit::result::{CpuInterval, IntervalStats};

    fn record(warmup: bool, backlog: u64) -> IntervalRecord {
        IntervalRecord {
            index: 7,
            end_s: 7.0,
            seconds: 1.0,
            warmup,
            all: IntervalStats {
                ios: 1500,
                reads: 1000,
                writes: 500,
                bytes_read: 8_192_000,
                bytes_written: 18_432_000,
                iops: 1500.0,
                mb_per_s: 26.624,
                bytes_per_io: 17_749.33,
                read_pct: 66.666,
                resp_ms: 1.0,
                read_resp_ms: 1.25,
                write_resp_ms: 0.5,
                resp_max_ms: 5.002,
                resp_stddev_ms: 1.1,
                p50_us: 500.0,
                p99_us: 5000.0,
                p999_us: 5000.0,
                queue_depth: 1.5,
                backlog,
            },
            workloads: Vec::new(),
            cpu: CpuInterval {
                user_s: 0.02,
                sys_s: 0.03,
                machine_busy_pct: 12.5,
            },
            devices: Vec::new(),
        }
    }

    /// The right edge of every value sits under the right edge of its header.
    #[test]
    fn values_line_up_under_their_headers() {
        let h = header();
        let bottom = h.lines().nth(1).unwrap_or_default().to_string();
        let l = line(&record(false, 0), "12:00:07");
        assert_eq!(l.len(), bottom.len(), "\n{bottom}\n{l}");
        let ends = |s: &str| -> Vec<usize> {
            let b = s.as_bytes();
            (1..b.len())
                .filter(|&i| b[i - 1] != b' ' && (i == b.len() || b[i] == b' '))
                .chain(std::iter::once(b.len()))
                .collect()
        };
        // Words in the bottom header end where the values end (multi-word
        // headers like "time ms" have extra word ends, hence the subset test).
        for e in ends(&l) {
            assert!(
                ends(&bottom).contains(&e),
                "value ending at {e} has no header\n{bottom}\n{l}"
            );
        }
        assert!(l.starts_with("12:00:07        7     1500.0     26.62    17749   66.7    1.000    1.250    0.500     5.002     1.100    1.5    5.0   12.5"), "{l}");
    }

    #[test]
    fn warm_up_and_backlog_are_marked() {
        let l = line(&record(true, 42), "12:00:07");
        assert!(l.ends_with("  warm-up  backlog 42"), "{l}");
        assert!(!line(&record(false, 0), "x").contains("warm-up"));
    }
}
