//! One `rd` into the runs it stands for.
//!
//! Loops nest, outermost first: `forxfersize`, `forrdpct`, `forseekpct`,
//! `forthreads`, then the rate points (`iorate=` list, or a curve's max run and
//! its percentages) innermost. The rate is innermost because a curve's points
//! are fractions of the max run just before them and must run right after it;
//! threads next, so a thread sweep at one mix reads as one block of the
//! report. Each combination of for-values of a curve rd is its own curve.

use std::time::Duration;

use super::value::{fmt_num, format_size};
use crate::model::{Arrival, CurveMember, Rate, RunDef, Seek, XferSize};

/// rd `iorate=`.
#[derive(Debug, Clone)]
pub(crate) enum IorateSpec {
    /// One or more rates, one run each.
    Points(Vec<Rate>),
    /// A max run, then one run per `curve=` percentage.
    Curve,
}

/// An rd with every default applied and every value checked.
#[derive(Debug, Clone)]
pub(crate) struct RdSpec {
    pub name: String,
    pub wds: Vec<String>,
    pub iorate: IorateSpec,
    pub curve_pcts: Vec<f64>,
    pub stop_ms: Option<f64>,
    pub elapsed: Duration,
    pub interval: Duration,
    pub warmup: Duration,
    pub arrival: Arrival,
    pub pause: Duration,
    pub threads: Option<Vec<u32>>,
    pub xfersizes: Option<Vec<u64>>,
    pub rdpcts: Option<Vec<f64>>,
    pub seeks: Option<Vec<Seek>>,
}

/// The rate points with their labels (empty when there is only one).
fn rate_points(spec: &RdSpec) -> Vec<(Rate, String)> {
    match &spec.iorate {
        IorateSpec::Points(points) if points.len() == 1 => vec![(points[0], String::new())],
        IorateSpec::Points(points) => points
            .iter()
            .map(|rate| {
                let label = match rate {
                    Rate::Max => "iorate=max".to_string(),
                    Rate::Fixed(n) | Rate::CurvePct(n) => format!("iorate={}", fmt_num(*n)),
                };
                (*rate, label)
            })
            .collect(),
        IorateSpec::Curve => std::iter::once((Rate::Max, "curve max".to_string()))
            .chain(
                spec.curve_pcts
                    .iter()
                    .map(|p| (Rate::CurvePct(*p), format!("curve {}%", fmt_num(*p)))),
            )
            .collect(),
    }
}

/// How many runs the rd expands into; `None` if that overflows.
pub(crate) fn count(spec: &RdSpec) -> Option<usize> {
    let dims = [
        spec.xfersizes.as_ref().map_or(1, Vec::len),
        spec.rdpcts.as_ref().map_or(1, Vec::len),
        spec.seeks.as_ref().map_or(1, Vec::len),
        spec.threads.as_ref().map_or(1, Vec::len),
        match &spec.iorate {
            IorateSpec::Points(p) => p.len(),
            IorateSpec::Curve => spec.curve_pcts.len() + 1,
        },
    ];
    dims.iter().try_fold(1usize, |acc, n| acc.checked_mul(*n))
}

/// The values of one `for…` loop, `[None]` when the rd has none; labelled only
/// when the loop has more than one value (a single value distinguishes nothing).
fn dimension<T: Copy>(
    values: Option<&Vec<T>>,
    label: impl Fn(T) -> String,
) -> Vec<(Option<T>, Option<String>)> {
    match values {
        None => vec![(None, None)],
        Some(v) => v
            .iter()
            .map(|x| (Some(*x), (v.len() > 1).then(|| label(*x))))
            .collect(),
    }
}

fn seek_label(seek: Seek) -> String {
    match seek {
        Seek::Sequential => "seekpct=seq".to_string(),
        Seek::Eof => "seekpct=eof".to_string(),
        Seek::Random(n) => format!("seekpct={}", fmt_num(n)),
    }
}

/// Appends the rd's runs to `runs`; curves take ids from `next_curve_id` on.
pub(crate) fn expand(spec: &RdSpec, next_curve_id: &mut usize, runs: &mut Vec<RunDef>) {
    let xfersizes = dimension(spec.xfersizes.as_ref(), |b| {
        format!("xfersize={}", format_size(b))
    });
    let rdpcts = dimension(spec.rdpcts.as_ref(), |p| format!("rdpct={}", fmt_num(p)));
    let seeks = dimension(spec.seeks.as_ref(), seek_label);
    let threads = dimension(spec.threads.as_ref(), |t| format!("threads={t}"));
    let points = rate_points(spec);
    for (xfersize, xfersize_label) in &xfersizes {
        for (rdpct, rdpct_label) in &rdpcts {
            for (seek, seek_label) in &seeks {
                for (thread_count, threads_label) in &threads {
                    let curve = matches!(spec.iorate, IorateSpec::Curve).then(|| {
                        let id = *next_curve_id;
                        *next_curve_id += 1;
                        CurveMember {
                            id,
                            stop_ms: spec.stop_ms,
                        }
                    });
                    for (rate, rate_label) in &points {
                        let label: Vec<&str> =
                            [xfersize_label, rdpct_label, seek_label, threads_label]
                                .into_iter()
                                .flatten()
                                .map(String::as_str)
                                .chain((!rate_label.is_empty()).then_some(rate_label.as_str()))
                                .collect();
                        runs.push(RunDef {
                            rd: spec.name.clone(),
                            label: label.join(" "),
                            wds: spec.wds.clone(),
                            rate: *rate,
                            elapsed: spec.elapsed,
                            interval: spec.interval,
                            warmup: spec.warmup,
                            arrival: spec.arrival,
                            pause: spec.pause,
                            threads: *thread_count,
                            xfersize: xfersize.map(XferSize::Fixed),
                            rdpct: *rdpct,
                            seek: *seek,
                            curve,
                        });
                    }
                }
            }
        }
    }
}
