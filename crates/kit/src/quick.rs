//! `cairn bench quick`: one workload from plain flags, as the same [`Plan`] a
//! vdbench file gives, so the engine and the reports have one input.
//!
//! `--target PATH --rw randread --bs 8k --qd 32 --time 30s` becomes one sd per
//! target (`sd1`, `sd2`, … with `threads` = the queue depth, so each target has
//! `qd` I/Os outstanding, as vdbench's `threads=` means), one wd `quick` over
//! all of them and one rd `quick`.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::model::{
    rate_problem, timing_problem, Arrival, General, OpenFlags, Plan, Rate, RunDef, SdDef, Seek,
    Source, WdDef, XferSize, RATE_IOPS_MAX,
};
use crate::vdbench::{value_size_bytes, SizeError, THREADS_MAX};

/// `--rw`: direction and access pattern, in fio's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuickRw {
    Read,
    Write,
    RandRead,
    RandWrite,
    /// Sequential, `rwmixread` % reads.
    Rw,
    /// Random, `rwmixread` % reads.
    RandRw,
}

impl QuickRw {
    pub const NAMES: [&'static str; 6] = ["read", "write", "randread", "randwrite", "rw", "randrw"];

    fn random(self) -> bool {
        matches!(
            self,
            QuickRw::RandRead | QuickRw::RandWrite | QuickRw::RandRw
        )
    }
}

impl FromStr for QuickRw {
    type Err = UnknownRw;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "read" => QuickRw::Read,
            "write" => QuickRw::Write,
            "randread" => QuickRw::RandRead,
            "randwrite" => QuickRw::RandWrite,
            "rw" | "readwrite" => QuickRw::Rw,
            "randrw" => QuickRw::RandRw,
            _ => return Err(UnknownRw(s.to_string())),
        })
    }
}

impl fmt::Display for QuickRw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            QuickRw::Read => "read",
            QuickRw::Write => "write",
            QuickRw::RandRead => "randread",
            QuickRw::RandWrite => "randwrite",
            QuickRw::Rw => "rw",
            QuickRw::RandRw => "randrw",
        };
        f.write_str(name)
    }
}

/// The quick command line, parsed by the CLI.
#[derive(Debug, Clone, PartialEq)]
pub struct QuickArgs {
    pub targets: Vec<PathBuf>,
    pub rw: QuickRw,
    /// Percentage of reads for `rw` / `randrw` (default 50); ignored by the others,
    /// which are all reads or all writes.
    pub rwmixread: f64,
    pub bs: XferSize,
    /// I/Os outstanding per target.
    pub qd: u32,
    pub time: Duration,
    pub warmup: Duration,
    pub interval: Duration,
    /// I/Os per second over all targets; `None` = as fast as possible (closed loop).
    pub rate: Option<f64>,
    pub arrival: Arrival,
    /// Bytes of each target to use (a missing file is created this big).
    pub size: Option<u64>,
    pub validate: bool,
    pub compratio: f64,
    pub dedupratio: f64,
    /// The original argv, for [`Source::Quick`].
    pub args: Vec<String>,
}

/// An `--rw` that names no access pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown --rw `{}`; expected one of {names}", .0, names = QuickRw::NAMES.join(", "))]
pub struct UnknownRw(pub String);

/// Which flag of a quick run is wrong, and what it expects: one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuickError {
    #[error(
        "no --target given; expected --target PATH (a block device or a file), once per target"
    )]
    NoTarget,
    #[error("--target `{}` is empty; expected a block device or a file path", .0.display())]
    EmptyTarget(PathBuf),
    #[error("--qd {0} is out of range; expected 1 to {THREADS_MAX} I/Os outstanding per target")]
    Qd(u32),
    #[error("--rwmixread {0} is out of range; expected a percentage of reads from 0 to 100")]
    RwMixRead(f64),
    #[error("--bs shares add up to {0}%; expected positive shares adding up to 100")]
    BsShares(f64),
    #[error(
        "--bs {0} is not usable; expected a multiple of 512 bytes from 512 to 256m, such as 8k"
    )]
    Bs(u64),
    /// `--time`, `--interval` and `--warmup` do not make a run
    /// ([`timing_problem`]'s one line).
    #[error("{0}")]
    Timing(String),
    /// `shown` is the rate as given, `problem` what [`rate_problem`] says of it.
    #[error("--rate {shown} {problem}; {}", rate_expected())]
    Rate { shown: String, problem: String },
    #[error("--size 0; expected the bytes of each target to use, such as 10g")]
    NoSize,
    #[error("{flag} {ratio} is below 1; expected a ratio of at least 1 (1 = no reduction)")]
    Ratio { flag: &'static str, ratio: f64 },
}

/// The plan for a quick run; the error is one line saying which flag is wrong.
pub fn plan(args: &QuickArgs) -> Result<Plan, QuickError> {
    check_args(args)?;
    let sds: Vec<SdDef> = args
        .targets
        .iter()
        .enumerate()
        .map(|(i, target)| SdDef {
            name: format!("sd{}", i + 1),
            lun: target.clone(),
            size_bytes: args.size,
            threads: args.qd,
            openflags: OpenFlags::default(),
            offset_bytes: 0,
            align_bytes: None,
            range: None,
        })
        .collect();
    let rdpct = match args.rw {
        QuickRw::Read | QuickRw::RandRead => 100.0,
        QuickRw::Write | QuickRw::RandWrite => 0.0,
        QuickRw::Rw | QuickRw::RandRw => args.rwmixread,
    };
    let wd = WdDef {
        name: "quick".into(),
        sds: sds.iter().map(|s| s.name.clone()).collect(),
        rdpct,
        xfersize: args.bs.clone(),
        seek: if args.rw.random() {
            Seek::Random(100.0)
        } else {
            Seek::Sequential
        },
        skew_pct: None,
        iorate: None,
        priority: None,
        range: None,
        hotband: None,
    };
    let run = RunDef {
        rd: "quick".into(),
        label: String::new(),
        wds: vec![wd.name.clone()],
        rate: args.rate.map_or(Rate::Max, Rate::Fixed),
        elapsed: args.time,
        interval: args.interval,
        warmup: args.warmup,
        arrival: args.arrival,
        pause: Duration::ZERO,
        threads: None,
        xfersize: None,
        rdpct: None,
        seek: None,
        curve: None,
    };
    Ok(Plan {
        general: General {
            validate: args.validate,
            compratio: args.compratio,
            dedupratio: args.dedupratio,
            ..General::default()
        },
        sds,
        wds: vec![wd],
        runs: vec![run],
        source: Source::Quick {
            args: args.args.clone(),
        },
    })
}

/// The flags checked one by one: the first that is wrong is the error.
fn check_args(args: &QuickArgs) -> Result<(), QuickError> {
    if args.targets.is_empty() {
        return Err(QuickError::NoTarget);
    }
    if let Some(empty) = args.targets.iter().find(|t| t.as_os_str().is_empty()) {
        return Err(QuickError::EmptyTarget(empty.clone()));
    }
    if args.qd == 0 || u64::from(args.qd) > THREADS_MAX {
        return Err(QuickError::Qd(args.qd));
    }
    if !(0.0..=100.0).contains(&args.rwmixread) {
        return Err(QuickError::RwMixRead(args.rwmixread));
    }
    check_bs(&args.bs)?;
    if let Some(problem) = timing_problem(
        args.time,
        args.interval,
        args.warmup,
        ["--time", "--interval", "--warmup"],
    ) {
        return Err(QuickError::Timing(problem));
    }
    if let Some(rate) = args.rate {
        if let Some(problem) = rate_problem(rate) {
            // A rate too large to print in full is shown as the user wrote it, 1e300.
            let shown = if rate.abs() < 1e15 {
                format!("{rate}")
            } else {
                format!("{rate:e}")
            };
            return Err(QuickError::Rate { shown, problem });
        }
    }
    if args.size == Some(0) {
        return Err(QuickError::NoSize);
    }
    for (flag, ratio) in [
        ("--compratio", args.compratio),
        ("--dedupratio", args.dedupratio),
    ] {
        if !(ratio.is_finite() && ratio >= 1.0) {
            return Err(QuickError::Ratio { flag, ratio });
        }
    }
    Ok(())
}

fn check_bs(bs: &XferSize) -> Result<(), QuickError> {
    let sizes: Vec<u64> = match bs {
        XferSize::Fixed(b) => vec![*b],
        XferSize::Distribution(d) => {
            let sum: f64 = d.iter().map(|(_, p)| p).sum();
            if d.is_empty()
                || (sum - 100.0).abs() > 1e-6
                || d.iter().any(|(_, p)| p.is_nan() || *p <= 0.0)
            {
                return Err(QuickError::BsShares(sum));
            }
            d.iter().map(|(b, _)| *b).collect()
        }
    };
    match sizes
        .iter()
        .find(|b| **b == 0 || !b.is_multiple_of(512) || **b > 256 << 20)
    {
        Some(b) => Err(QuickError::Bs(*b)),
        None => Ok(()),
    }
}

/// What `--rate` takes, for its errors.
fn rate_expected() -> String {
    format!(
        "give I/Os per second above 0 and at most {RATE_IOPS_MAX:e} (e.g. 5000), or max for as fast as possible"
    )
}

/// `--rate`: `max` (`None`: closed loop) or I/Os per second, `5000`, `2.5e4`;
/// the error is one line naming the text given and the limit it breaks.
pub fn parse_rate(text: &str) -> Result<Option<f64>, QuickError> {
    if text.eq_ignore_ascii_case("max") {
        return Ok(None);
    }
    let shown = format!("`{text}`");
    let Ok(rate) = text.trim().parse::<f64>() else {
        return Err(QuickError::Rate {
            shown,
            problem: "is not a number".to_string(),
        });
    };
    match rate_problem(rate) {
        Some(problem) => Err(QuickError::Rate { shown, problem }),
        None => Ok(Some(rate)),
    }
}

/// Bytes from `8k`, `1m`, `4096`, `1.5g` (k = 1024, case-insensitive); exact,
/// so `1.3k` (not a whole number of bytes) is an error. Shared with the CLI.
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    value_size_bytes(s)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn args() -> QuickArgs {
        QuickArgs {
            targets: vec![PathBuf::from("/tmp/a"), PathBuf::from("/tmp/b")],
            rw: QuickRw::RandRw,
            rwmixread: 70.0,
            bs: XferSize::Fixed(8192),
            qd: 32,
            time: Duration::from_secs(30),
            warmup: Duration::from_secs(5),
            interval: Duration::from_secs(1),
            rate: Some(5000.0),
            arrival: Arrival::Uniform,
            size: Some(1 << 30),
            validate: true,
            compratio: 2.0,
            dedupratio: 1.5,
            args: vec!["quick".into(), "--target".into(), "/tmp/a".into()],
        }
    }

    #[test]
    fn one_sd_per_target_one_wd_one_rd() {
        let plan = plan(&args()).unwrap();
        let names: Vec<&str> = plan.sds.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["sd1", "sd2"]);
        assert_eq!(plan.sds[1].lun, PathBuf::from("/tmp/b"));
        assert!(plan
            .sds
            .iter()
            .all(|s| s.threads == 32 && s.size_bytes == Some(1 << 30)));
        assert_eq!(plan.wds.len(), 1);
        let wd = &plan.wds[0];
        assert_eq!(
            (wd.name.as_str(), wd.rdpct, wd.seek),
            ("quick", 70.0, Seek::Random(100.0))
        );
        assert_eq!(wd.sds, ["sd1", "sd2"]);
        let run = &plan.runs[0];
        assert_eq!(plan.runs.len(), 1);
        assert_eq!(
            (run.rd.as_str(), run.rate, run.arrival),
            ("quick", Rate::Fixed(5000.0), Arrival::Uniform)
        );
        assert_eq!(
            (run.elapsed, run.warmup),
            (Duration::from_secs(30), Duration::from_secs(5))
        );
        assert!(plan.general.validate);
        assert_eq!(
            (plan.general.compratio, plan.general.dedupratio),
            (2.0, 1.5)
        );
        assert_eq!(plan.source, Source::Quick { args: args().args });
        assert!(plan.writes());
    }

    #[test]
    fn rw_sets_direction_and_pattern() {
        for (rw, rdpct, seek) in [
            (QuickRw::Read, 100.0, Seek::Sequential),
            (QuickRw::Write, 0.0, Seek::Sequential),
            (QuickRw::RandRead, 100.0, Seek::Random(100.0)),
            (QuickRw::RandWrite, 0.0, Seek::Random(100.0)),
            (QuickRw::Rw, 70.0, Seek::Sequential),
        ] {
            let plan = plan(&QuickArgs { rw, ..args() }).unwrap();
            assert_eq!((plan.wds[0].rdpct, plan.wds[0].seek), (rdpct, seek), "{rw}");
            assert_eq!(rw.to_string().parse::<QuickRw>().unwrap(), rw);
        }
        let max = plan(&QuickArgs {
            rate: None,
            ..args()
        })
        .unwrap();
        assert_eq!(max.runs[0].rate, Rate::Max);
        assert!(!plan(&QuickArgs {
            rw: QuickRw::RandRead,
            ..args()
        })
        .unwrap()
        .writes());
        assert!("bogus"
            .parse::<QuickRw>()
            .unwrap_err()
            .to_string()
            .contains("expected one of read, write"));
    }

    #[test]
    fn bad_flags_say_which() {
        let cases: Vec<(QuickArgs, &str)> = vec![
            (
                QuickArgs {
                    targets: vec![],
                    ..args()
                },
                "no --target",
            ),
            (QuickArgs { qd: 0, ..args() }, "--qd 0"),
            (
                QuickArgs {
                    rwmixread: 101.0,
                    ..args()
                },
                "--rwmixread",
            ),
            (
                QuickArgs {
                    bs: XferSize::Fixed(1000),
                    ..args()
                },
                "--bs 1000",
            ),
            (
                QuickArgs {
                    bs: XferSize::Distribution(vec![(4096, 50.0)]),
                    ..args()
                },
                "add up to 50",
            ),
            (
                QuickArgs {
                    time: Duration::ZERO,
                    ..args()
                },
                "--time 0",
            ),
            (
                QuickArgs {
                    warmup: Duration::from_secs(30),
                    ..args()
                },
                "--warmup",
            ),
            (
                QuickArgs {
                    interval: Duration::from_secs(31),
                    ..args()
                },
                "--interval",
            ),
            (
                QuickArgs {
                    rate: Some(0.0),
                    ..args()
                },
                "--rate",
            ),
            (
                QuickArgs {
                    rate: Some(f64::NAN),
                    ..args()
                },
                "--rate",
            ),
            (
                QuickArgs {
                    size: Some(0),
                    ..args()
                },
                "--size 0",
            ),
            (
                QuickArgs {
                    compratio: 0.5,
                    ..args()
                },
                "--compratio",
            ),
            (
                QuickArgs {
                    dedupratio: f64::INFINITY,
                    ..args()
                },
                "--dedupratio",
            ),
        ];
        for (a, fragment) in cases {
            let e = plan(&a).unwrap_err().to_string();
            assert!(e.contains(fragment), "{fragment}: {e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn rates_beyond_the_schedules_clock_are_refused_naming_the_limit() {
        assert_eq!(parse_rate("max"), Ok(None));
        assert_eq!(parse_rate("5000"), Ok(Some(5000.0)));
        assert_eq!(parse_rate("1e9"), Ok(Some(1e9)));
        for bad in ["1e300", "1.5e9", "inf", "nan", "-5", "0", "fast"] {
            let e = parse_rate(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--rate `{bad}` ")), "{e}");
            assert!(!e.contains('\n'));
        }
        assert!(parse_rate("1e300")
            .unwrap_err()
            .to_string()
            .contains("1000000000 I/Os per second"));
        let e = plan(&QuickArgs {
            rate: Some(1e300),
            ..args()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("--rate 1e300 is above 1000000000"), "{e}");
    }

    #[test]
    fn sizes_parse_like_vdbench() {
        assert_eq!(parse_size("8k"), Ok(8192));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1.5g"), Ok(3 << 29));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert!(parse_size("8 k").is_err());
        assert!(parse_size("1.3k").is_err());
    }
}
