//! A run made ready before any I/O: its workloads with the run's overrides
//! and their share of its rate, and each sd's schedule — and
//! [`BenchError`], what a bench that cannot run says.
//!
//! The checks here hold a plan built by other means than the parsers (an
//! AWR replay's `--scale`) to the parsers' limits, and every plan to its
//! targets' (whole sectors, whole dedupe units, transfers that fit).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::model::{timing_problem, Plan, RunDef, SdDef, Seek, WdDef, XferSize, RATE_IOPS_MAX};
use crate::pattern::{sd_tag, DataPattern};
use crate::target::{resolve_band, Target};

use super::sched::{SdSched, Stream, StreamSpec, Validation};

/// Why a bench could not run, in one line.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Setup(String),
}

/// An sd of a run: its index in the plan, schedule, threads, largest transfer,
/// and whether any of its workloads writes.
pub(super) type SdPlan = (usize, Arc<Mutex<SdSched>>, u32, u64, bool);

/// One workload of a run, with the run's overrides applied.
pub(super) struct RunWd {
    pub(super) def: WdDef,
    rdpct: f64,
    xfer: XferSize,
    seek: Seek,
    /// Open-loop rate of the whole workload, or `None`; closed-loop weight.
    pub(super) rate: Option<f64>,
    weight: f64,
}

/// Split a run's rate over its workloads: a workload's own `iorate=` stands;
/// `skew=` takes that share of the run's rate; the rest share what is left.
fn wd_rates(run_rate: Option<f64>, wds: &[WdDef]) -> Vec<(Option<f64>, f64)> {
    let fixed: f64 = wds.iter().filter_map(|w| w.iorate).sum();
    let skewed: f64 = wds
        .iter()
        .filter(|w| w.iorate.is_none())
        .filter_map(|w| w.skew_pct)
        .sum();
    let plain = wds
        .iter()
        .filter(|w| w.iorate.is_none() && w.skew_pct.is_none())
        .count()
        .max(1) as f64;
    let plain_weight = ((100.0 - skewed).max(0.0)) / plain;
    wds.iter()
        .map(|w| {
            let weight = w.skew_pct.unwrap_or(plain_weight).max(0.0);
            let rate = match (w.iorate, run_rate) {
                (Some(own), _) => Some(own),
                (None, None) => None,
                (None, Some(r)) => Some(match w.skew_pct {
                    Some(s) => r * s / 100.0,
                    // What the fixed rates and the skewed shares leave.
                    None => (r - fixed - r * skewed / 100.0).max(0.0) / plain,
                }),
            };
            (rate, weight)
        })
        .collect()
}

/// The validation unit of an sd for the whole bench: the largest size that
/// divides every transfer any run makes on it (and its `align=`), so the keys
/// one run leaves are checked at the same granularity by the next.
fn bench_validation_unit(plan: &Plan, sd: &SdDef, sector: u64) -> u64 {
    let mut unit = 0;
    for run in &plan.runs {
        let on_sd = run
            .wds
            .iter()
            .filter_map(|name| plan.wd(name))
            .filter(|wd| wd.sds.contains(&sd.name));
        for wd in on_sd {
            match run.xfersize.as_ref().unwrap_or(&wd.xfersize) {
                XferSize::Fixed(b) => unit = gcd(unit, *b),
                XferSize::Distribution(d) => {
                    for (b, _) in d {
                        unit = gcd(unit, *b);
                    }
                }
            }
        }
    }
    if let Some(a) = sd.align_bytes {
        unit = gcd(unit, a);
    }
    if unit == 0 {
        sector
    } else {
        unit
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// A run made ready: its workloads and each sd's schedule.
pub(super) struct Prepared {
    pub(super) wds: Vec<RunWd>,
    pub(super) scheds: Vec<SdPlan>,
    pub(super) threads_by_sd: BTreeMap<String, u32>,
    pub(super) validate: bool,
    pub(super) seed: u64,
    pub(super) pattern: Arc<DataPattern>,
}

/// Check and build a run's schedules. Every run is prepared once before the
/// first one starts, so a bad run late in a plan fails the bench before any
/// I/O rather than after an hour of measurements.
pub(super) fn prepare_run(
    plan: &Plan,
    run: &RunDef,
    run_index: usize,
    targets: &[Target],
    target_iops: Option<f64>,
    bench_seed: u64,
    validations: &mut BTreeMap<usize, Validation>,
) -> Result<Prepared, BenchError> {
    let wds = run_workloads(plan, run, target_iops)?;
    // The sds the run touches, in plan order.
    let sd_indices: Vec<usize> = plan
        .sds
        .iter()
        .enumerate()
        .filter(|(_, sd)| wds.iter().any(|w| w.def.sds.contains(&sd.name)))
        .map(|(i, _)| i)
        .collect();
    let validate = plan.general.validate;
    let seed = bench_seed ^ (run_index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let pattern = Arc::new(DataPattern::new(
        plan.general.compratio,
        plan.general.dedupratio,
        plan.general.dedupunit_bytes,
        bench_seed,
    ));
    let setup = RunSetup {
        plan,
        run,
        wds: &wds,
        validate,
        seed,
    };
    // Per sd the run touches: (index in the plan, schedule, threads, largest transfer, writes).
    let mut scheds: Vec<SdPlan> = Vec::new();
    let mut threads_by_sd = BTreeMap::new();
    for &i in &sd_indices {
        let target = targets
            .get(i)
            .ok_or_else(|| BenchError::Setup(format!("sd={}: not opened", plan.sds[i].name)))?;
        let sd_plan = setup.sd_plan(i, target, validations)?;
        threads_by_sd.insert(target.sd.name.clone(), sd_plan.2);
        scheds.push(sd_plan);
    }
    Ok(Prepared {
        wds,
        scheds,
        threads_by_sd,
        validate,
        seed,
        pattern,
    })
}

/// The run's workloads, overrides applied, each with its share of the run's
/// rate; the run's timings and rates held to the parsers' limits.
fn run_workloads(
    plan: &Plan,
    run: &RunDef,
    target_iops: Option<f64>,
) -> Result<Vec<RunWd>, BenchError> {
    let setup_error = |m: String| BenchError::Setup(m);
    let defs: Vec<WdDef> = run
        .wds
        .iter()
        .map(|name| {
            plan.wd(name)
                .cloned()
                .ok_or_else(|| setup_error(format!("rd={}: no wd={name}", run.rd)))
        })
        .collect::<Result<_, _>>()?;
    // The parsers refuse such timings with the user's words; a plan built
    // otherwise is held to the same limits here, before any I/O.
    if let Some(problem) = timing_problem(
        run.elapsed,
        run.interval,
        run.warmup,
        ["elapsed", "interval", "warmup"],
    ) {
        return Err(setup_error(format!("rd={}: {problem}", run.rd)));
    }
    let rates = wd_rates(target_iops, &defs);
    // The parsers refuse such rates; a plan built otherwise (an AWR replay's
    // --scale) is held to the same limit here, before any I/O.
    let run_rate = target_iops.map(|r| (run.rd.clone(), r));
    let stream_rates = defs
        .iter()
        .zip(&rates)
        .filter_map(|(def, (rate, _))| rate.map(|r| (format!("{}: wd={}", run.rd, def.name), r)));
    for (what, r) in run_rate.into_iter().chain(stream_rates) {
        if !(r.is_finite() && r >= 0.0) || r > RATE_IOPS_MAX {
            return Err(setup_error(format!(
                "rd={what}: a rate of {r:e} I/Os per second cannot be scheduled; expected at most {} (one arrival per nanosecond)",
                RATE_IOPS_MAX as u64
            )));
        }
    }
    Ok(defs
        .into_iter()
        .zip(rates)
        .map(|(def, (rate, weight))| RunWd {
            rdpct: run.rdpct.unwrap_or(def.rdpct),
            xfer: run.xfersize.clone().unwrap_or_else(|| def.xfersize.clone()),
            seek: run.seek.unwrap_or(def.seek),
            rate,
            weight,
            def,
        })
        .collect())
}

/// What every sd of a run is built from.
struct RunSetup<'a> {
    plan: &'a Plan,
    run: &'a RunDef,
    wds: &'a [RunWd],
    validate: bool,
    seed: u64,
}

impl RunSetup<'_> {
    /// Sd `i`'s part of the run: its transfers checked, its streams, and its
    /// schedule, which takes over the validation state earlier runs left.
    fn sd_plan(
        &self,
        i: usize,
        target: &Target,
        validations: &mut BTreeMap<usize, Validation>,
    ) -> Result<SdPlan, BenchError> {
        let sd = &target.sd;
        let sector = target.sector_bytes();
        let (mut unit, max_len, writes) = self.transfers(target)?;
        if self.validate {
            unit = gcd(unit, bench_validation_unit(self.plan, sd, sector));
        }
        let threads = self.run.threads.unwrap_or(sd.threads).max(1);
        let streams = self.streams(i, target, unit)?;
        let validation = self.validate.then(|| match validations.remove(&i) {
            Some(mut kept) if kept.unit == unit => {
                kept.settle();
                kept
            }
            _ => Validation::new(unit, target.end_bytes, sd_tag(&sd.name)),
        });
        let sched = SdSched::new(streams, target.end_bytes, validation, self.seed ^ i as u64)
            .with_start(target.start_bytes);
        Ok((i, Arc::new(Mutex::new(sched)), threads, max_len, writes))
    }

    /// The transfers of the workloads on an sd, checked against its sectors,
    /// the dedupe unit and its length: (the largest size dividing them and
    /// `align=`, the largest transfer, whether any workload writes).
    fn transfers(&self, target: &Target) -> Result<(u64, u64, bool), BenchError> {
        let setup_error = |m: String| BenchError::Setup(m);
        let plan = self.plan;
        let sd = &target.sd;
        let sector = target.sector_bytes();
        let len = target.end_bytes - target.start_bytes;
        let mut unit = sector;
        let mut first = true;
        let mut max_len = sector;
        let mut writes = false;
        let on_sd: Vec<&RunWd> = self
            .wds
            .iter()
            .filter(|w| w.def.sds.contains(&sd.name))
            .collect();
        for w in &on_sd {
            let sizes: Vec<u64> = match &w.xfer {
                XferSize::Fixed(b) => vec![*b],
                XferSize::Distribution(d) => d.iter().map(|(b, _)| *b).collect(),
            };
            for b in sizes {
                if b == 0 || !b.is_multiple_of(sector) {
                    return Err(setup_error(format!(
                        "wd={}: xfersize {b} is not a multiple of the {sector}-byte logical sector of sd={} ({}); direct I/O needs whole sectors",
                        w.def.name,
                        sd.name,
                        sd.lun.display()
                    )));
                }
                let dedupunit = plan.general.dedupunit_bytes;
                if plan.general.dedupratio > 1.0 && (dedupunit == 0 || !b.is_multiple_of(dedupunit))
                {
                    return Err(setup_error(format!(
                        "wd={}: xfersize {b} is not a multiple of dedupunit={dedupunit}; with dedupratio= every transfer must hold whole dedupe units (give a larger xfersize or a smaller dedupunit)",
                        w.def.name
                    )));
                }
                if b > len {
                    return Err(setup_error(format!(
                        "wd={}: xfersize {b} is larger than the {len} bytes sd={} offers",
                        w.def.name, sd.name
                    )));
                }
                unit = if first { b } else { gcd(unit, b) };
                first = false;
                max_len = max_len.max(b);
            }
            if let Some(a) = sd.align_bytes {
                unit = gcd(unit, a);
            }
            writes |= w.rdpct < 100.0;
        }
        Ok((unit, max_len, writes))
    }

    /// The streams of sd `i`: one per workload on it, over the part of the sd
    /// its `hotband=` or `range=` names, with its share of the rate.
    fn streams(&self, i: usize, target: &Target, unit: u64) -> Result<Vec<Stream>, BenchError> {
        let setup_error = |m: String| BenchError::Setup(m);
        let (run, validate, seed) = (self.run, self.validate, self.seed);
        let sd = &target.sd;
        let sector = target.sector_bytes();
        let len = target.end_bytes - target.start_bytes;
        let mut streams = Vec::new();
        for (k, w) in self.wds.iter().enumerate() {
            if !w.def.sds.contains(&sd.name) {
                continue;
            }
            let n_sds = w.def.sds.len().max(1) as f64;
            let (band, hot) = match (&w.def.hotband, &w.def.range) {
                (Some(b), _) => (Some(b), true),
                (None, Some(b)) => (Some(b), false),
                (None, None) => (None, false),
            };
            let (mut lo, hi) = match band {
                Some(b) => {
                    let (a, e) = resolve_band(b, len, sector).map_err(|m| {
                        setup_error(format!("wd={}: on sd={}: {m}", w.def.name, sd.name))
                    })?;
                    if !hot && e > len {
                        return Err(setup_error(format!(
                            "wd={}: range= may not wrap past the end of sd={} (only hotband= may)",
                            w.def.name, sd.name
                        )));
                    }
                    (target.start_bytes + a, target.start_bytes + e)
                }
                None => (target.start_bytes, target.end_bytes),
            };
            if validate {
                lo = lo.div_ceil(unit) * unit;
            }
            if hi <= lo || hi - lo < w.xfer.max_bytes() {
                return Err(setup_error(format!(
                    "wd={}: its range on sd={} is smaller than one transfer",
                    w.def.name, sd.name
                )));
            }
            streams.push(Stream::new(StreamSpec {
                wd: k,
                rdpct: w.rdpct,
                xfer: w.xfer.clone(),
                seek: w.seek,
                align: sd.align_bytes,
                lo,
                hi,
                hot,
                priority: w.def.priority.unwrap_or(u32::MAX),
                weight: w.weight / n_sds,
                rate: w.rate.map(|r| r / n_sds),
                arrival: run.arrival,
                seed: seed ^ ((i as u64) << 32 | k as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93),
            }));
        }
        Ok(streams)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::{Seek, XferSize};

    fn wd(iorate: Option<f64>, skew: Option<f64>) -> WdDef {
        WdDef {
            name: "w".into(),
            sds: vec!["sd1".into()],
            rdpct: 100.0,
            xfersize: XferSize::Fixed(8192),
            seek: Seek::Random(100.0),
            skew_pct: skew,
            iorate,
            priority: None,
            range: None,
            hotband: None,
        }
    }

    #[test]
    fn a_runs_rate_is_split_without_exceeding_it() {
        // 1000/s: one workload fixed at 100, one skewed to 30% (300), two plain
        // sharing what is left (300 each). The total is the run's rate.
        let rates = wd_rates(
            Some(1000.0),
            &[
                wd(Some(100.0), None),
                wd(None, Some(30.0)),
                wd(None, None),
                wd(None, None),
            ],
        );
        let r: Vec<f64> = rates.iter().map(|(r, _)| r.unwrap()).collect();
        assert_eq!(r, vec![100.0, 300.0, 300.0, 300.0]);
        // The bank file: every workload has its own rate, summing to the run's.
        let bank = [3250.0, 2500.0, 5800.0, 750.0, 50.0].map(|x| wd(Some(x), None));
        let total: f64 = wd_rates(Some(12350.0), &bank)
            .iter()
            .map(|(r, _)| r.unwrap())
            .sum();
        assert_eq!(total, 12350.0);
        // Closed loop: skew is a weight.
        let w = wd_rates(None, &[wd(None, Some(75.0)), wd(None, None)]);
        assert_eq!((w[0].0, w[0].1, w[1].1), (None, 75.0, 25.0));
    }
}
