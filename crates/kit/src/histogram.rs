//! Latency histograms: HDR, from 1 µs to an hour at 0.1% relative error.
//!
//! Values are recorded in nanoseconds. Three significant digits keep every
//! recorded value within 0.1% of the truth (the issue asks for 1%); the range
//! is an hour so that a stall of any length a run can produce is counted, not
//! clamped. A value above the range is recorded at the top and counted in
//! [`LatencyHistogram::clamped`], so it is never lost silently.

use hdrhistogram::Histogram;

use crate::result::{Bucket, HistogramData, LatencySummary, Percentile, PERCENTILES};

/// Resolution at the bottom of the range: 1 ns, so that even a 1 µs value is
/// held to 0.1% (a coarser unit would make the first microseconds the least
/// precise part of the histogram, where NVMe latencies live).
pub const LOWEST_NS: u64 = 1;
/// Largest value recorded exactly: one hour.
pub const HIGHEST_NS: u64 = 3_600_000_000_000;
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// AWR's wait-event histogram buckets, in ms (upper bounds, exclusive), then
/// `>1s`. The report's own note: "column heading of <=1s is truly <1024ms,
/// >1s is truly >=1024ms".
const AWR_MS: [(&str, u64); 7] = [
    ("<1ms", 1_000_000),
    ("<2ms", 2_000_000),
    ("<4ms", 4_000_000),
    ("<8ms", 8_000_000),
    ("<16ms", 16_000_000),
    ("<32ms", 32_000_000),
    ("<=1s", 1_024_000_000),
];
/// AWR's microsecond flavour: `<8us` … `<512us`, then `>=512us`.
const AWR_US: [(&str, u64); 7] = [
    ("<8us", 8_000),
    ("<16us", 16_000),
    ("<32us", 32_000),
    ("<64us", 64_000),
    ("<128us", 128_000),
    ("<256us", 256_000),
    ("<512us", 512_000),
];

#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
    clamped: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> Self {
        let hist = Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
            .expect("invariant: constant bounds are valid");
        Self { hist, clamped: 0 }
    }

    /// Record one latency.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        if ns > HIGHEST_NS {
            self.clamped += 1;
        }
        self.hist.saturating_record(ns.max(1));
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Values that exceeded [`HIGHEST_NS`] and were recorded as it.
    pub fn clamped(&self) -> u64 {
        self.clamped
    }

    pub fn add(&mut self, other: &LatencyHistogram) {
        self.hist
            .add(&other.hist)
            .expect("invariant: histograms share bounds");
        self.clamped += other.clamped;
    }

    pub fn reset(&mut self) {
        self.hist.reset();
        self.clamped = 0;
    }

    /// The value at percentile `p` (0–100), in ns.
    pub fn percentile_ns(&self, p: f64) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.value_at_percentile(p)
        }
    }

    pub fn mean_ns(&self) -> f64 {
        if self.hist.is_empty() {
            0.0
        } else {
            self.hist.mean()
        }
    }

    pub fn stddev_ns(&self) -> f64 {
        if self.hist.is_empty() {
            0.0
        } else {
            self.hist.stdev()
        }
    }

    pub fn max_ns(&self) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.max()
        }
    }

    pub fn min_ns(&self) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.min()
        }
    }

    /// How many recorded values are below `bound_ns` (to the histogram's precision).
    pub fn count_below(&self, bound_ns: u64) -> u64 {
        if bound_ns == 0 {
            return 0;
        }
        self.hist.count_between(0, bound_ns - 1)
    }

    /// Everything a report needs, in µs. `custom_bounds_us` adds the buckets of
    /// a parameter file's `histogram=`.
    pub fn summary(&self, custom_bounds_us: &[u64]) -> LatencySummary {
        let us = |ns: f64| ns / 1000.0;
        LatencySummary {
            count: self.count(),
            mean_us: us(self.mean_ns()),
            stddev_us: us(self.stddev_ns()),
            min_us: us(self.min_ns() as f64),
            max_us: us(self.max_ns() as f64),
            percentiles: PERCENTILES
                .iter()
                .map(|&p| Percentile {
                    p,
                    us: us(self.percentile_ns(p) as f64),
                })
                .collect(),
            awr_ms_buckets: self.buckets(&AWR_MS, ">1s"),
            awr_us_buckets: self.buckets(&AWR_US, ">=512us"),
            custom_buckets: self.custom_buckets(custom_bounds_us),
        }
    }

    fn buckets(&self, bounds: &[(&str, u64)], last: &str) -> Vec<Bucket> {
        let total = self.count();
        let mut out = Vec::with_capacity(bounds.len() + 1);
        let mut below_prev = 0;
        for (label, bound) in bounds {
            let below = self.count_below(*bound);
            out.push(bucket(label, below - below_prev, total));
            below_prev = below;
        }
        out.push(bucket(last, total - below_prev, total));
        out
    }

    fn custom_buckets(&self, bounds_us: &[u64]) -> Vec<Bucket> {
        if bounds_us.is_empty() {
            return Vec::new();
        }
        let labelled: Vec<(String, u64)> = bounds_us
            .iter()
            .map(|b| (format!("<{}", format_us(*b)), b.saturating_mul(1000)))
            .collect();
        let refs: Vec<(&str, u64)> = labelled.iter().map(|(l, b)| (l.as_str(), *b)).collect();
        let last = format!(
            ">={}",
            format_us(bounds_us.last().copied().unwrap_or_default())
        );
        self.buckets(&refs, &last)
    }

    /// The whole histogram for `result.json`.
    pub fn to_data(&self) -> HistogramData {
        HistogramData {
            unit: "ns".into(),
            significant_digits: SIGNIFICANT_DIGITS,
            lowest_ns: LOWEST_NS,
            highest_ns: HIGHEST_NS,
            counts: self
                .hist
                .iter_recorded()
                .map(|v| [v.value_iterated_to(), v.count_at_value()])
                .collect(),
        }
    }

    /// Rebuild a histogram from `result.json` (percentiles then match the
    /// original's to its precision).
    pub fn from_data(data: &HistogramData) -> Self {
        let mut h = Self::new();
        for [value, count] in &data.counts {
            h.hist.saturating_record_n((*value).max(1), *count);
        }
        h
    }
}

fn bucket(label: &str, count: u64, total: u64) -> Bucket {
    Bucket {
        label: label.to_string(),
        count,
        pct: if total == 0 {
            0.0
        } else {
            100.0 * count as f64 / total as f64
        },
    }
}

fn format_us(us: u64) -> String {
    if us >= 1_000_000 && us.is_multiple_of(1_000_000) {
        format!("{}s", us / 1_000_000)
    } else if us >= 1000 && us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rand_chacha::ChaCha8Rng;
    use rand_core::{Rng, SeedableRng};

    /// Percentiles agree with the exact sorted values to within 1% over a
    /// spread from 1 µs to 60 s.
    #[test]
    fn percentiles_match_sorted_values_within_one_percent() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut exact = Vec::new();
        let mut h = LatencyHistogram::new();
        for _ in 0..200_000 {
            // Log-uniform between 1 µs and 60 s.
            let e = (rng.next_u64() % 1_000_000) as f64 / 1_000_000.0;
            let ns = (1_000.0 * (60_000_000.0f64).powf(e)) as u64;
            exact.push(ns);
            h.record(ns);
        }
        exact.sort_unstable();
        for p in [1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0] {
            let rank = ((p / 100.0) * exact.len() as f64).ceil().max(1.0) as usize - 1;
            let want = exact[rank] as f64;
            let got = h.percentile_ns(p) as f64;
            let err = (got - want).abs() / want;
            assert!(
                err <= 0.01,
                "p{p}: {got} vs exact {want} ({:.3}%)",
                err * 100.0
            );
        }
        assert_eq!(h.count(), 200_000);
        assert_eq!(h.clamped(), 0);
    }

    #[test]
    fn a_round_trip_through_json_keeps_every_percentile() {
        let mut h = LatencyHistogram::new();
        for ns in [1_500u64, 20_000, 20_000, 900_000, 5_000_000, 61_000_000_000] {
            h.record(ns);
        }
        let back = LatencyHistogram::from_data(&h.to_data());
        for p in PERCENTILES {
            assert_eq!(back.percentile_ns(p), h.percentile_ns(p), "p{p}");
        }
        assert_eq!(back.count(), 6);
        assert!(back.max_ns() >= 61_000_000_000);
    }

    #[test]
    fn awr_buckets_split_at_the_bounds() {
        let mut h = LatencyHistogram::new();
        // 0.5 ms, 1.5 ms, 3 ms, 1 s exactly, 2 s.
        for ns in [
            500_000u64,
            1_500_000,
            3_000_000,
            1_000_000_000,
            // AWR's `<=1s` is truly <1024 ms.
            1_010_000_000,
            2_000_000_000,
        ] {
            h.record(ns);
        }
        let s = h.summary(&[]);
        let counts: Vec<(String, u64)> = s
            .awr_ms_buckets
            .iter()
            .map(|b| (b.label.clone(), b.count))
            .collect();
        let want: Vec<(String, u64)> = [
            ("<1ms", 1),
            ("<2ms", 1),
            ("<4ms", 1),
            ("<8ms", 0),
            ("<16ms", 0),
            ("<32ms", 0),
            ("<=1s", 2),
            (">1s", 1),
        ]
        .iter()
        .map(|(l, c)| (l.to_string(), *c))
        .collect();
        assert_eq!(counts, want);
        assert!((s.awr_ms_buckets[0].pct - 100.0 / 6.0).abs() < 1e-9);
    }

    #[test]
    fn a_value_beyond_an_hour_is_counted_not_lost() {
        let mut h = LatencyHistogram::new();
        h.record(HIGHEST_NS * 2);
        assert_eq!(h.count(), 1);
        assert_eq!(h.clamped(), 1);
    }

    #[test]
    fn custom_buckets_follow_the_parameter_file() {
        let mut h = LatencyHistogram::new();
        for ns in [50_000u64, 150_000, 5_000_000] {
            h.record(ns);
        }
        let s = h.summary(&[100, 1000]);
        let labels: Vec<&str> = s.custom_buckets.iter().map(|b| b.label.as_str()).collect();
        assert_eq!(labels, ["<100us", "<1ms", ">=1ms"]);
        let counts: Vec<u64> = s.custom_buckets.iter().map(|b| b.count).collect();
        assert_eq!(counts, [1, 1, 1]);
    }
}
