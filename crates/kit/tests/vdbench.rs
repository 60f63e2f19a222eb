//! The vdbench parameter-file parser: every keyword into the plan it means,
//! every error at its line and column, includes, variables, defaults,
//! expansion, the bank file from the "Taking Charge" post, and no panics on
//! any input.
#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cairn_kit::model::{
    Arrival, Band, Bound, CurveMember, General, OpenFlags, Plan, Rate, RunDef, Seek, Source,
    XferSize,
};
use cairn_kit::vdbench::{parse_file, parse_str, ParseError};
use proptest::prelude::*;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * 1024 * 1024;

fn no_includes(path: &Path) -> io::Result<String> {
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not served", path.display()),
    ))
}

fn parse_vars(text: &str, vars: &[(&str, &str)]) -> Result<Plan, ParseError> {
    let vars: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    parse_str(Path::new("t.vdb"), text, &vars, &mut no_includes)
}

fn parse(text: &str) -> Plan {
    parse_vars(text, &[]).unwrap_or_else(|e| panic!("{e}\n--- text:\n{text}"))
}

fn error(text: &str) -> ParseError {
    match parse_vars(text, &[]) {
        Ok(plan) => panic!("parsed, expected an error:\n{text}\n{plan:#?}"),
        Err(e) => e,
    }
}

/// The common head: one sd, one wd.
const HEAD: &str = "sd=sd1,lun=/tmp/t1\nwd=w1,sd=sd1\n";

fn with_head(rest: &str) -> Plan {
    parse(&format!("{HEAD}{rest}"))
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/vdbench")
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vdbench")
}

// ---------------------------------------------------------------- general

#[test]
fn general_parameters_have_vdbench_defaults() {
    let plan = parse("sd=sd1,lun=/x\nwd=w,sd=sd1\nrd=r,wd=w,iorate=max\n");
    assert_eq!(plan.general, General::default());
    assert_eq!(plan.general.data_errors, 50);
    assert_eq!(plan.general.dedupunit_bytes, 8192);
}

#[test]
fn general_parameters_parse() {
    let plan = parse(
        "data_errors=3\ncompratio=2.5,dedupratio=3\nDEDUPUNIT=16k\nvalidate=YES\nhistogram=(default,50,100,200,1000)\n\
         sd=sd1,lun=/x\nwd=w,sd=sd1\nrd=r,wd=w,iorate=max\n",
    );
    assert_eq!(
        plan.general,
        General {
            data_errors: 3,
            compratio: 2.5,
            dedupratio: 3.0,
            dedupunit_bytes: 16 * KIB,
            validate: true,
            histogram_bounds_us: vec![50, 100, 200, 1000],
        }
    );
    let plan =
        parse("validate=no\nhistogram=(10,20)\nsd=sd1,lun=/x\nwd=w,sd=sd1\nrd=r,wd=w,iorate=max\n");
    assert!(!plan.general.validate);
    assert_eq!(plan.general.histogram_bounds_us, [10, 20]);
}

// ---------------------------------------------------------------- sd

#[test]
fn sd_parameters_parse() {
    let plan = parse(
        "sd=sd1,lun=/dev/sdb,size=10g,threads=16,openflags=o_direct,offset=4k,align=8k,range=(10,50)\n\
         sd=sd2,lun=/tmp/f,openflags=(o_direct,o_sync),range=(1g,2g)\n\
         sd=sd3,lun=/tmp/g,openflags=dsync,range=(0,512m),size=1.5g\n\
         wd=w,sd=sd*\nrd=r,wd=w,iorate=max\n",
    );
    let sd1 = plan.sd("sd1").unwrap();
    assert_eq!(sd1.lun, PathBuf::from("/dev/sdb"));
    assert_eq!(sd1.size_bytes, Some(10 * GIB));
    assert_eq!(sd1.threads, 16);
    assert_eq!(sd1.openflags, OpenFlags { sync_writes: false });
    assert_eq!(sd1.offset_bytes, 4 * KIB);
    assert_eq!(sd1.align_bytes, Some(8 * KIB));
    assert_eq!(
        sd1.range,
        Some(Band {
            start: Bound::Percent(10.0),
            end: Bound::Percent(50.0)
        })
    );
    let sd2 = plan.sd("sd2").unwrap();
    assert_eq!(
        (
            sd2.size_bytes,
            sd2.threads,
            sd2.offset_bytes,
            sd2.align_bytes
        ),
        (None, 8, 0, None)
    );
    assert!(sd2.openflags.sync_writes);
    assert_eq!(
        sd2.range,
        Some(Band {
            start: Bound::Bytes(GIB),
            end: Bound::Bytes(2 * GIB)
        })
    );
    let sd3 = plan.sd("sd3").unwrap();
    assert!(sd3.openflags.sync_writes);
    assert_eq!(sd3.size_bytes, Some(3 * GIB / 2));
    assert_eq!(
        sd3.range,
        Some(Band {
            start: Bound::Bytes(0),
            end: Bound::Bytes(512 * MIB)
        })
    );
}

#[test]
fn sync_openflags_spellings() {
    for flag in ["o_sync", "o_dsync", "sync", "dsync", "O_SYNC"] {
        let plan = parse(&format!(
            "sd=sd1,lun=/x,openflags={flag}\nwd=w,sd=sd1\nrd=r,wd=w,iorate=max\n"
        ));
        assert!(plan.sds[0].openflags.sync_writes, "{flag}");
    }
    let plan = parse("sd=sd1,lun=/x,openflags=directio\nwd=w,sd=sd1\nrd=r,wd=w,iorate=max\n");
    assert!(!plan.sds[0].openflags.sync_writes);
}

#[test]
fn range_wraps_up_to_200_percent() {
    let plan = parse("sd=sd1,lun=/x,range=(90,110)\nwd=w,sd=sd1\nrd=r,wd=w,iorate=max\n");
    assert_eq!(
        plan.sds[0].range,
        Some(Band {
            start: Bound::Percent(90.0),
            end: Bound::Percent(110.0)
        })
    );
}

// ---------------------------------------------------------------- wd

#[test]
fn wd_parameters_parse() {
    let plan = parse(
        "sd=sd1,lun=/a\nsd=sd2,lun=/b\nsd=sd3,lun=/c\n\
         wd=w1,sd=sd1,rdpct=70,xfersize=8k,seekpct=100,skew=40,iorate=500,priority=2,range=(0,50),hotband=(10,20)\n\
         wd=w2,sd=(sd3,sd1),xfersize=(4k,50,8k,30,64k,20),seekpct=sequential,skew=60\n\
         wd=w3,sd=sd*,seekpct=eof\nwd=w4,sd=(sd1-sd2),seekpct=25.5\nwd=w5,sd=sd2,seekpct=seq\n\
         wd=w6,sd=sd2,seekpct=random\nwd=w7,sd=sd2,seekpct=0\n\
         rd=r,wd=(w1,w2),iorate=max\n",
    );
    let w1 = plan.wd("w1").unwrap();
    assert_eq!(w1.sds, ["sd1"]);
    assert_eq!(w1.rdpct, 70.0);
    assert_eq!(w1.xfersize, XferSize::Fixed(8 * KIB));
    assert_eq!(w1.seek, Seek::Random(100.0));
    assert_eq!(w1.skew_pct, Some(40.0));
    assert_eq!(w1.iorate, Some(500.0));
    assert_eq!(w1.priority, Some(2));
    assert_eq!(
        w1.range,
        Some(Band {
            start: Bound::Percent(0.0),
            end: Bound::Percent(50.0)
        })
    );
    assert_eq!(
        w1.hotband,
        Some(Band {
            start: Bound::Percent(10.0),
            end: Bound::Percent(20.0)
        })
    );
    let w2 = plan.wd("w2").unwrap();
    assert_eq!(w2.sds, ["sd3", "sd1"], "list order is kept");
    assert_eq!(
        w2.xfersize,
        XferSize::Distribution(vec![(4 * KIB, 50.0), (8 * KIB, 30.0), (64 * KIB, 20.0)])
    );
    assert_eq!(w2.seek, Seek::Sequential);
    assert_eq!(
        plan.wd("w3").unwrap().sds,
        ["sd1", "sd2", "sd3"],
        "wildcards select in definition order"
    );
    assert_eq!(plan.wd("w3").unwrap().seek, Seek::Eof);
    assert_eq!(plan.wd("w4").unwrap().sds, ["sd1", "sd2"], "name ranges");
    assert_eq!(plan.wd("w4").unwrap().seek, Seek::Random(25.5));
    assert_eq!(plan.wd("w5").unwrap().seek, Seek::Sequential);
    assert_eq!(plan.wd("w6").unwrap().seek, Seek::Random(100.0));
    assert_eq!(plan.wd("w7").unwrap().seek, Seek::Sequential);
}

#[test]
fn wd_defaults_are_vdbench_s() {
    let plan = with_head("rd=r,wd=w1,iorate=max\n");
    let w = &plan.wds[0];
    assert_eq!(
        (w.rdpct, &w.xfersize, w.seek),
        (100.0, &XferSize::Fixed(4096), Seek::Random(100.0))
    );
    assert_eq!(
        (w.skew_pct, w.iorate, w.priority, w.range, w.hotband),
        (None, None, None, None, None)
    );
    assert!(!plan.writes());
}

#[test]
fn single_element_xfersize_list_is_fixed() {
    let plan = parse("sd=sd1,lun=/x\nwd=w,sd=sd1,xfersize=(16k)\nrd=r,wd=w,iorate=max\n");
    assert_eq!(plan.wds[0].xfersize, XferSize::Fixed(16 * KIB));
}

#[test]
fn wildcards_and_lists_select_each_name_once() {
    let plan = parse(
        "sd=a1,lun=/a\nsd=a2,lun=/b\nsd=b1,lun=/c\nwd=w,sd=(a2,a*,*1)\nrd=r,wd=w,iorate=max\n",
    );
    assert_eq!(plan.wds[0].sds, ["a2", "a1", "b1"]);
}

// ---------------------------------------------------------------- rd

#[test]
fn rd_parameters_parse() {
    let plan = with_head(
        "rd=r,wd=w1,iorate=1500.5,elapsed=2m,interval=5s,warmup=10,pause=1h,distribution=uniform\n",
    );
    assert_eq!(
        plan.runs,
        [RunDef {
            rd: "r".into(),
            label: String::new(),
            wds: vec!["w1".into()],
            rate: Rate::Fixed(1500.5),
            elapsed: secs(120),
            interval: secs(5),
            warmup: secs(10),
            arrival: Arrival::Uniform,
            pause: secs(3600),
            threads: None,
            xfersize: None,
            rdpct: None,
            seek: None,
            curve: None,
        }]
    );
}

#[test]
fn rd_defaults_are_vdbench_s() {
    let run = &with_head("rd=r,wd=w1,iorate=max\n").runs[0];
    assert_eq!(run.rate, Rate::Max);
    assert_eq!(
        (run.elapsed, run.interval, run.warmup, run.pause),
        (secs(30), secs(1), secs(0), secs(0))
    );
    assert_eq!(run.arrival, Arrival::Exponential);
    for d in ["exponential", "deterministic"] {
        let run = &with_head(&format!("rd=r,wd=w1,iorate=10,distribution={d}\n")).runs[0];
        assert_eq!(
            run.arrival,
            if d == "exponential" {
                Arrival::Exponential
            } else {
                Arrival::Deterministic
            }
        );
    }
}

#[test]
fn fractional_durations() {
    let run = &with_head("rd=r,wd=w1,iorate=max,elapsed=1.5,interval=0.5\n").runs[0];
    assert_eq!(
        (run.elapsed, run.interval),
        (Duration::from_millis(1500), Duration::from_millis(500))
    );
}

#[test]
fn iorate_list_expands_into_one_run_per_rate() {
    let plan = with_head("rd=r,wd=w1,iorate=(100,200,max)\n");
    let rates: Vec<Rate> = plan.runs.iter().map(|r| r.rate).collect();
    assert_eq!(rates, [Rate::Fixed(100.0), Rate::Fixed(200.0), Rate::Max]);
    let labels: Vec<&str> = plan.runs.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["iorate=100", "iorate=200", "iorate=max"]);
    let plan = with_head("rd=r,wd=w1,iorate=(1000-3000,1000)\n");
    let rates: Vec<Rate> = plan.runs.iter().map(|r| r.rate).collect();
    assert_eq!(
        rates,
        [
            Rate::Fixed(1000.0),
            Rate::Fixed(2000.0),
            Rate::Fixed(3000.0)
        ]
    );
}

#[test]
fn curve_runs_max_then_each_point() {
    let plan = with_head("rd=r,wd=w1,iorate=curve\n");
    let rates: Vec<Rate> = plan.runs.iter().map(|r| r.rate).collect();
    let mut expected = vec![Rate::Max];
    expected.extend([10.0, 50.0, 70.0, 80.0, 90.0, 100.0].map(Rate::CurvePct));
    assert_eq!(rates, expected, "the default curve");
    assert!(plan.runs.iter().all(|r| r.curve
        == Some(CurveMember {
            id: 0,
            stop_ms: None
        })));
    assert_eq!(plan.runs[0].label, "curve max");
    assert_eq!(plan.runs[2].label, "curve 50%");

    let plan = with_head("rd=r,wd=w1,iorate=curve,curve=(25,75),stopcurve=5.5\n");
    let rates: Vec<Rate> = plan.runs.iter().map(|r| r.rate).collect();
    assert_eq!(
        rates,
        [Rate::Max, Rate::CurvePct(25.0), Rate::CurvePct(75.0)]
    );
    assert!(plan.runs.iter().all(|r| r.curve
        == Some(CurveMember {
            id: 0,
            stop_ms: Some(5.5)
        })));

    let plan = with_head("rd=r,wd=w1,iorate=curve,curve=(10-100,30)\n");
    let rates: Vec<Rate> = plan.runs.iter().map(|r| r.rate).collect();
    assert_eq!(
        rates,
        [
            Rate::Max,
            Rate::CurvePct(10.0),
            Rate::CurvePct(40.0),
            Rate::CurvePct(70.0),
            Rate::CurvePct(100.0)
        ]
    );
}

#[test]
fn for_loops_expand_in_documented_order() {
    let plan = with_head(
        "rd=r,wd=w1,iorate=max,forthreads=(1,4),forxfersize=(4k,8k),forrdpct=(0-100,50),forseekpct=(seq,100)\n",
    );
    assert_eq!(plan.runs.len(), 2 * 2 * 3 * 2);
    let first = &plan.runs[0];
    assert_eq!(first.xfersize, Some(XferSize::Fixed(4 * KIB)));
    assert_eq!(
        (first.rdpct, first.seek, first.threads),
        (Some(0.0), Some(Seek::Sequential), Some(1))
    );
    assert_eq!(first.label, "xfersize=4k rdpct=0 seekpct=seq threads=1");
    // threads is the innermost for-loop, xfersize the outermost.
    assert_eq!(
        plan.runs[1].label,
        "xfersize=4k rdpct=0 seekpct=seq threads=4"
    );
    assert_eq!(
        plan.runs[2].label,
        "xfersize=4k rdpct=0 seekpct=100 threads=1"
    );
    assert_eq!(
        plan.runs[4].label,
        "xfersize=4k rdpct=50 seekpct=seq threads=1"
    );
    assert_eq!(
        plan.runs[12].label,
        "xfersize=8k rdpct=0 seekpct=seq threads=1"
    );
    assert_eq!(
        plan.runs[23].label,
        "xfersize=8k rdpct=100 seekpct=100 threads=4"
    );
    // Every combination exactly once.
    let mut labels: Vec<&str> = plan.runs.iter().map(|r| r.label.as_str()).collect();
    labels.sort_unstable();
    labels.dedup();
    assert_eq!(labels.len(), 24);
}

#[test]
fn single_valued_for_loops_set_values_without_labels() {
    let run = &with_head(
        "rd=r,wd=w1,iorate=max,forthreads=8,forxfersize=16k,forrdpct=30,forseekpct=eof\n",
    )
    .runs[0];
    assert_eq!(run.label, "");
    assert_eq!(run.threads, Some(8));
    assert_eq!(run.xfersize, Some(XferSize::Fixed(16 * KIB)));
    assert_eq!((run.rdpct, run.seek), (Some(30.0), Some(Seek::Eof)));
}

#[test]
fn rd_accepts_vdbench_s_short_for_names() {
    let a = with_head("rd=r,wd=w1,iorate=max,threads=(2,4),xfersize=8k,rdpct=50,seekpct=0\n");
    let b = with_head(
        "rd=r,wd=w1,iorate=max,forthreads=(2,4),forxfersize=8k,forrdpct=50,forseekpct=0\n",
    );
    assert_eq!(a.runs, b.runs);
}

#[test]
fn ranges_step_and_double() {
    let threads = |text: &str| -> Vec<Option<u32>> {
        with_head(&format!("rd=r,wd=w1,iorate=max,forthreads={text}\n"))
            .runs
            .iter()
            .map(|r| r.threads)
            .collect()
    };
    assert_eq!(threads("(1-9,2)"), [1, 3, 5, 7, 9].map(Some));
    assert_eq!(threads("(1-4)"), [1, 2, 3, 4].map(Some));
    assert_eq!(threads("(1-64,d)"), [1, 2, 4, 8, 16, 32, 64].map(Some));
    assert_eq!(
        threads("(2-9,3)"),
        [2, 5, 8].map(Some),
        "a step that overshoots stops at the last value within"
    );
    let sizes: Vec<Option<XferSize>> = with_head("rd=r,wd=w1,iorate=max,forxfersize=(4k-16k,4k)\n")
        .runs
        .iter()
        .map(|r| r.xfersize.clone())
        .collect();
    assert_eq!(
        sizes,
        [4, 8, 12, 16].map(|k| Some(XferSize::Fixed(k * KIB)))
    );
    let rdpcts: Vec<Option<f64>> = with_head("rd=r,wd=w1,iorate=max,forrdpct=(0.1-0.3,0.1)\n")
        .runs
        .iter()
        .map(|r| r.rdpct)
        .collect();
    assert_eq!(rdpcts, [Some(0.1), Some(0.2), Some(0.3)]);
    let seeks: Vec<Option<Seek>> = with_head("rd=r,wd=w1,iorate=max,forseekpct=(0-100,50)\n")
        .runs
        .iter()
        .map(|r| r.seek)
        .collect();
    assert_eq!(
        seeks,
        [
            Some(Seek::Sequential),
            Some(Seek::Random(50.0)),
            Some(Seek::Random(100.0))
        ]
    );
}

#[test]
fn curve_with_for_loop_gives_each_combination_its_own_curve() {
    let plan = parse(
        "sd=sd1,lun=/x\nwd=w1,sd=sd1\n\
         rd=first,wd=w1,iorate=curve,curve=(50,100),forthreads=(1,2),stopcurve=3\n\
         rd=plain,wd=w1,iorate=max\n\
         rd=second,wd=w1,iorate=curve,curve=(50)\n",
    );
    let summary: Vec<(String, String, Option<usize>)> = plan
        .runs
        .iter()
        .map(|r| (r.rd.clone(), r.label.clone(), r.curve.map(|c| c.id)))
        .collect();
    let row = |rd: &str, label: &str, id: Option<usize>| (rd.to_string(), label.to_string(), id);
    assert_eq!(
        summary,
        [
            row("first", "threads=1 curve max", Some(0)),
            row("first", "threads=1 curve 50%", Some(0)),
            row("first", "threads=1 curve 100%", Some(0)),
            row("first", "threads=2 curve max", Some(1)),
            row("first", "threads=2 curve 50%", Some(1)),
            row("first", "threads=2 curve 100%", Some(1)),
            row("plain", "", None),
            row("second", "curve max", Some(2)),
            row("second", "curve 50%", Some(2)),
        ]
    );
    assert_eq!(plan.runs[0].curve.unwrap().stop_ms, Some(3.0));
}

#[test]
fn rd_wildcards_select_wds() {
    let plan = parse(
        "sd=sd1,lun=/x\nwd=read_a,sd=sd1\nwd=write_a,sd=sd1,rdpct=0\nwd=read_b,sd=sd1\n\
         rd=r1,wd=read*,iorate=max\nrd=r2,wd=(write_a,read_b),iorate=max\n",
    );
    assert_eq!(plan.runs[0].wds, ["read_a", "read_b"]);
    assert_eq!(plan.runs[1].wds, ["write_a", "read_b"]);
    assert!(plan.writes());
}

// ---------------------------------------------------------------- structure

#[test]
fn records_continue_on_following_lines() {
    let plan = parse(
        "sd=sd1,\n   lun=/x,\n   size=1m\n\
         wd=w1,\n   sd=sd1,\n   rdpct=50\n\
         rd=r1,iorate=max,\n   wd=w1,\n   elapsed=5\n",
    );
    assert_eq!(plan.sds[0].size_bytes, Some(MIB));
    assert_eq!(
        plan.wds[0].sds,
        ["sd1"],
        "sd= after a trailing comma continues the wd"
    );
    assert_eq!(plan.wds[0].rdpct, 50.0);
    assert_eq!(
        plan.runs[0].wds,
        ["w1"],
        "wd= after a trailing comma continues the rd"
    );
    assert_eq!(plan.runs[0].elapsed, secs(5));
    // Without a trailing comma, a continuation line still continues.
    let plan = parse("sd=sd1\nlun=/x\nwd=w1,sd=sd1\nrdpct=10\nrd=r,wd=w1,iorate=max\n");
    assert_eq!(plan.sds[0].lun, PathBuf::from("/x"));
    assert_eq!(plan.wds[0].rdpct, 10.0);
    // A trailing comma before a new record does not swallow it.
    let plan = parse("sd=sd1,lun=/x,\nwd=w1,sd=sd1,\nrd=r,wd=w1,iorate=max,\n");
    assert_eq!((plan.sds.len(), plan.wds.len(), plan.runs.len()), (1, 1, 1));
}

#[test]
fn comments_blank_lines_and_case() {
    let plan = parse(
        "* star comment\n# hash comment\n// slash comment\n\n   \n\
         SD=sd1,LUN=/x/a#b   # lun keeps its hash, this is a comment\n\
         Wd=w1,Sd=sd1,XferSize=8K,SeekPct=SEQ\r\n\
         rd=r,wd=w1,iorate=MAX,elapsed=10S\n",
    );
    assert_eq!(plan.sds[0].lun, PathBuf::from("/x/a#b"));
    assert_eq!(plan.wds[0].xfersize, XferSize::Fixed(8 * KIB));
    assert_eq!(plan.wds[0].seek, Seek::Sequential);
    assert_eq!(plan.runs[0].elapsed, secs(10));
}

#[test]
fn byte_order_mark_is_skipped() {
    let plan = parse("\u{feff}sd=sd1,lun=/x\nwd=w,sd=sd1\nrd=r,wd=w,iorate=max\n");
    assert_eq!(plan.sds[0].name, "sd1");
}

#[test]
fn quoted_values_keep_commas() {
    let plan = parse("sd=sd1,lun=\"/tmp/a, b (c)\"\nwd=w,sd=sd1\nrd=r,wd=w,iorate=max\n");
    assert_eq!(plan.sds[0].lun, PathBuf::from("/tmp/a, b (c)"));
}

#[test]
fn defaults_apply_to_following_records_only() {
    let plan = parse(
        "sd=sd1,lun=/a\nsd=default,threads=4,size=1g\nsd=sd2,lun=/b\nsd=default,threads=2\nsd=sd3,lun=/c,size=2g\n\
         wd=default,xfersize=64k,sd=sd*\nwd=w1\nwd=w2,xfersize=8k,sd=sd1\n\
         rd=default,elapsed=7,iorate=max\nrd=r1,wd=w1\nrd=default,iorate=100\nrd=r2,wd=w2,elapsed=9\n",
    );
    let sd = |n: &str| plan.sd(n).unwrap();
    assert_eq!((sd("sd1").threads, sd("sd1").size_bytes), (8, None));
    assert_eq!((sd("sd2").threads, sd("sd2").size_bytes), (4, Some(GIB)));
    assert_eq!(
        (sd("sd3").threads, sd("sd3").size_bytes),
        (2, Some(2 * GIB)),
        "defaults accumulate"
    );
    assert_eq!(plan.wd("w1").unwrap().xfersize, XferSize::Fixed(64 * KIB));
    assert_eq!(plan.wd("w1").unwrap().sds, ["sd1", "sd2", "sd3"]);
    assert_eq!(plan.wd("w2").unwrap().xfersize, XferSize::Fixed(8 * KIB));
    assert_eq!(plan.wd("w2").unwrap().sds, ["sd1"]);
    assert_eq!(
        (plan.runs[0].elapsed, plan.runs[0].rate),
        (secs(7), Rate::Max)
    );
    assert_eq!(
        (plan.runs[1].elapsed, plan.runs[1].rate),
        (secs(9), Rate::Fixed(100.0))
    );
    assert!(plan.sd("default").is_none());
}

// ---------------------------------------------------------------- variables

#[test]
fn variables_are_substituted() {
    let plan = parse_vars(
        "sd=sd1,lun=$dir/a.dat,size=${size}\nwd=w,sd=sd1,xfersize=$bs\nrd=r,wd=w,iorate=max,forthreads=$t\n",
        &[("dir", "/tmp/x"), ("size", "2g"), ("bs", "(4k,50,8k,50)"), ("t", "(1,2)")],
    )
    .unwrap();
    assert_eq!(plan.sds[0].lun, PathBuf::from("/tmp/x/a.dat"));
    assert_eq!(plan.sds[0].size_bytes, Some(2 * GIB));
    assert_eq!(
        plan.wds[0].xfersize,
        XferSize::Distribution(vec![(4 * KIB, 50.0), (8 * KIB, 50.0)])
    );
    assert_eq!(plan.runs.len(), 2);
    let Source::Vdbench {
        variables,
        path,
        files,
    } = &plan.source
    else {
        panic!("vdbench source")
    };
    assert_eq!(variables.get("dir").map(String::as_str), Some("/tmp/x"));
    assert_eq!(path, Path::new("t.vdb"));
    assert_eq!(files.len(), 1);
    assert!(
        files[0].text.starts_with("sd=sd1,lun=$dir"),
        "the file is kept as written"
    );
}

#[test]
fn variable_errors() {
    let e = parse_vars("sd=sd1,lun=$dir/a\n", &[]).unwrap_err();
    assert_eq!((e.line, e.column), (1, 12));
    assert!(e.message.contains("undefined variable `$dir`"), "{e}");
    let e = parse_vars(
        "sd=sd1,lun=/a,size=$size\nwd=w,sd=sd1\nrd=r,wd=w,iorate=max\n",
        &[("size", "lots")],
    )
    .unwrap_err();
    assert_eq!(
        (e.line, e.column),
        (1, 20),
        "an error in a substituted value points at the `$`"
    );
    assert!(e.message.contains("found `lots`"), "{e}");
    let e = parse_vars(
        "sd=sd1,lun=/a\nwd=w,sd=sd1\nrd=r,wd=w,iorate=max\n",
        &[("dri", "/tmp")],
    )
    .unwrap_err();
    assert!(
        e.message.contains("variable `dri`") && e.message.contains("never uses"),
        "{e}"
    );
}

// ---------------------------------------------------------------- includes

#[test]
fn include_is_read_relative_to_the_including_file() {
    let asked = RefCell::new(Vec::new());
    let mut read = |p: &Path| -> io::Result<String> {
        asked.borrow_mut().push(p.to_path_buf());
        match p.to_str() {
            Some("conf/sub/sds.vdb") => Ok("sd=sd1,lun=/a\ninclude=../more.vdb\n".into()),
            Some("conf/sub/../more.vdb") => Ok("sd=sd2,lun=/b\n".into()),
            _ => no_includes(p),
        }
    };
    let plan = parse_str(
        Path::new("conf/main.vdb"),
        "include=sub/sds.vdb\nwd=w,sd=sd*\nrd=r,wd=w,iorate=max\n",
        &BTreeMap::new(),
        &mut read,
    )
    .unwrap();
    assert_eq!(
        *asked.borrow(),
        [
            PathBuf::from("conf/sub/sds.vdb"),
            PathBuf::from("conf/sub/../more.vdb")
        ]
    );
    assert_eq!(plan.wds[0].sds, ["sd1", "sd2"]);
    let Source::Vdbench { files, .. } = &plan.source else {
        panic!("vdbench source")
    };
    let paths: Vec<&Path> = files.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(
        paths,
        [
            Path::new("conf/main.vdb"),
            Path::new("conf/sub/sds.vdb"),
            Path::new("conf/sub/../more.vdb")
        ]
    );
    assert_eq!(files[2].text, "sd=sd2,lun=/b\n");
}

#[test]
fn errors_in_included_files_name_that_file() {
    let mut read =
        |_: &Path| -> io::Result<String> { Ok("* inc\nsd=sd1,lun=/a,size=big\n".into()) };
    let e = parse_str(
        Path::new("main.vdb"),
        "include=inc.vdb\n",
        &BTreeMap::new(),
        &mut read,
    )
    .unwrap_err();
    assert_eq!(e.file, PathBuf::from("inc.vdb"));
    assert_eq!((e.line, e.column), (2, 20));
}

#[test]
fn include_cycles_and_failures_are_errors() {
    let mut read = |p: &Path| -> io::Result<String> {
        match p.to_str() {
            Some("a.vdb") | Some("./a.vdb") => Ok("include=b.vdb\n".into()),
            Some("b.vdb") => Ok("\n\ninclude=./a.vdb\n".into()),
            _ => no_includes(p),
        }
    };
    let e = parse_str(
        Path::new("a.vdb"),
        "include=b.vdb\n",
        &BTreeMap::new(),
        &mut read,
    )
    .unwrap_err();
    assert_eq!(
        (e.file.as_path(), e.line, e.column),
        (Path::new("b.vdb"), 3, 9),
        "{e}"
    );
    assert!(
        e.message
            .contains("include cycle: a.vdb includes b.vdb includes a.vdb"),
        "{e}"
    );

    let e = parse_str(
        Path::new("m.vdb"),
        "\n include=missing.vdb\n",
        &BTreeMap::new(),
        &mut no_includes,
    )
    .unwrap_err();
    assert_eq!((e.line, e.column), (2, 10));
    assert!(
        e.message
            .contains("cannot read included file `missing.vdb`"),
        "{e}"
    );

    // Deep but not cyclic (each level a new name): bounded.
    let mut level = 0;
    let mut deep = |_: &Path| -> io::Result<String> {
        level += 1;
        Ok(format!("include=x{level}.vdb\n"))
    };
    let e = parse_str(
        Path::new("m.vdb"),
        "include=x.vdb\n",
        &BTreeMap::new(),
        &mut deep,
    )
    .unwrap_err();
    assert!(e.message.contains("nested more than 16 deep"), "{e}");

    let e = error("include=a.vdb,compratio=2\n");
    assert!(e.message.contains("on a line of its own"), "{e}");
}

#[test]
fn include_fixtures_through_the_file_system() {
    let vars = BTreeMap::from([("dir".to_string(), "/tmp/cairn-test".to_string())]);
    let plan = parse_file(&fixtures().join("include_main.vdb"), &vars).unwrap();
    assert_eq!(plan.general.compratio, 2.0);
    let luns: Vec<&Path> = plan.sds.iter().map(|s| s.lun.as_path()).collect();
    assert_eq!(
        luns,
        [
            Path::new("/tmp/cairn-test/one.dat"),
            Path::new("/tmp/cairn-test/two.dat")
        ]
    );
    assert_eq!(plan.wds[0].sds, ["sd1", "sd2"]);
    let Source::Vdbench { files, .. } = &plan.source else {
        panic!("vdbench source")
    };
    assert_eq!(files.len(), 3);

    let e = parse_file(&fixtures().join("cycle_a.vdb"), &BTreeMap::new()).unwrap_err();
    assert!(e.message.starts_with("include cycle"), "{e}");
    assert!(e.file.ends_with("cycle_b.vdb"), "{e}");
    assert_eq!((e.line, e.column), (2, 9));

    let e = parse_file(&fixtures().join("no_such_file.vdb"), &BTreeMap::new()).unwrap_err();
    assert!(
        e.to_string()
            .contains("no_such_file.vdb:1:1: cannot read the parameter file"),
        "{e}"
    );
}

// ---------------------------------------------------------------- the bank file

/// The five workloads of the "Taking Charge" post, exactly as published.
#[test]
fn bank_file_parses_as_it_stands() {
    let bank = std::fs::read_to_string(examples().join("awr_bank.vdb")).unwrap();
    assert_eq!(bank.lines().count(), 15);
    let mut read = |p: &Path| -> io::Result<String> {
        if p == Path::new("awr_bank.vdb") {
            Ok(bank.clone())
        } else {
            no_includes(p)
        }
    };
    let plan = parse_str(
        Path::new("wrapper.vdb"),
        "sd=sd1,lun=/tmp/b1\nsd=sd2,lun=/tmp/b2\ninclude=awr_bank.vdb\n",
        &BTreeMap::new(),
        &mut read,
    )
    .unwrap();
    check_bank(&plan, 2);
}

fn check_bank(plan: &Plan, sd_count: usize) {
    let names: Vec<&str> = plan.wds.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "wd_oracle_rand_read",
            "wd_oracle_seq_read",
            "wd_oracle_rand_write",
            "wd_oracle_seq_write",
            "wd_oracle_redo_write"
        ]
    );
    let expected = [
        (100.0, 16 * KIB, Seek::Random(100.0), 3250.0, 1),
        (100.0, 1024 * KIB, Seek::Sequential, 2500.0, 2),
        (0.0, 16 * KIB, Seek::Random(100.0), 5800.0, 3),
        (0.0, 768 * KIB, Seek::Sequential, 750.0, 4),
        (0.0, 64 * KIB, Seek::Sequential, 50.0, 5),
    ];
    for (wd, (rdpct, bytes, seek, iorate, priority)) in plan.wds.iter().zip(expected) {
        assert_eq!(
            wd.sds.len(),
            sd_count,
            "{}: sd=sd* selects every sd",
            wd.name
        );
        assert_eq!(wd.rdpct, rdpct, "{}", wd.name);
        assert_eq!(wd.xfersize, XferSize::Fixed(bytes), "{}", wd.name);
        assert_eq!(wd.seek, seek, "{}", wd.name);
        assert_eq!(wd.iorate, Some(iorate), "{}", wd.name);
        assert_eq!(wd.priority, Some(priority), "{}", wd.name);
    }
    let total: f64 = plan.wds.iter().filter_map(|w| w.iorate).sum();
    assert_eq!(total, 12350.0, "the workloads' rates add up to the rd's");
    assert_eq!(plan.runs.len(), 1);
    let run = &plan.runs[0];
    assert_eq!(run.rd, "rd_oracle_ramp");
    assert_eq!(run.wds, names);
    assert_eq!(run.rate, Rate::Fixed(12350.0));
    assert_eq!(
        (run.interval, run.elapsed, run.warmup),
        (secs(1), secs(120), secs(5))
    );
    assert_eq!(run.threads, Some(8));
    assert_eq!(run.label, "");
    assert!(plan.writes());
    // The plan goes into result.json whole; it must come back the same.
    let json = serde_json::to_string(plan).unwrap();
    assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), *plan);
}

#[test]
fn bank_wrapper_example_parses() {
    let vars = BTreeMap::from([("dir".to_string(), "/tmp/cairn-bank".to_string())]);
    let plan = parse_file(&examples().join("awr_bank_on_files.vdb"), &vars).unwrap();
    check_bank(&plan, 4);
    assert!(plan
        .sds
        .iter()
        .all(|s| s.size_bytes == Some(GIB) && s.lun.starts_with("/tmp/cairn-bank")));
}

#[test]
fn small_examples_parse() {
    let vars = BTreeMap::from([("lun".to_string(), "/tmp/cairn-example.dat".to_string())]);
    let plan = parse_file(&examples().join("oltp_8k_mix.vdb"), &vars).unwrap();
    assert_eq!(plan.wds[0].rdpct, 70.0);
    let rates: Vec<Rate> = plan.runs.iter().map(|r| r.rate).collect();
    assert_eq!(rates, [Rate::Fixed(2000.0), Rate::Max]);
    assert!(plan
        .runs
        .iter()
        .all(|r| r.warmup == secs(5) && r.elapsed == secs(30)));
    let plan = parse_file(&examples().join("curve.vdb"), &vars).unwrap();
    assert_eq!(plan.runs.len(), 8);
    assert_eq!(
        plan.runs[0].curve,
        Some(CurveMember {
            id: 0,
            stop_ms: Some(20.0)
        })
    );
    assert_eq!(plan.runs[7].rate, Rate::CurvePct(100.0));
}

// ---------------------------------------------------------------- errors

#[test]
fn error_display_is_file_line_column_message() {
    let e = error("sd=sd1,lun=/x\nwd=w1,sd=sd1,\n  rdpc=50\nrd=r,wd=w1,iorate=max\n");
    assert_eq!(
        e.to_string(),
        "t.vdb:3:3: unknown wd parameter `rdpc`; expected one of sd, rdpct, xfersize, seekpct, skew, iorate, priority, range, hotband"
    );
}

/// (text, line, column, a fragment of the message) for every error path.
#[test]
fn every_error_names_its_position() {
    let h = "sd=sd1,lun=/x\nwd=w1,sd=sd1\n"; // line 3 is the first line after it
    let cases: Vec<(String, usize, usize, &str)> = vec![
        // structure
        (format!("{h}sd=sd2,lun=/y\nrd=r,wd=w1,iorate=max\n"), 3, 1, "sd= after wd=: vdbench reads sd, wd and rd definitions in that order"),
        (format!("{h}rd=r,wd=w1,iorate=max\nwd=w2,sd=sd1\n"), 4, 1, "wd= after rd="),
        (format!("{h}compratio=2\nrd=r,wd=w1,iorate=max\n"), 3, 1, "general parameter `compratio=` after the wd= records"),
        (h.to_string(), 2, 1, "no rd= record: nothing to run"),
        (String::new(), 1, 1, "no rd= record"),
        (format!("{h}rd=r,wd=w1,iorate=max,rd=r2\n"), 3, 23, "expected each rd= record to start its own line"),
        (format!("{h}rd=r,wd=w1,iorate=max,lun=/x\n"), 3, 23, "unknown rd parameter `lun`"),
        ("sd=sd1,lun=/x,validate=yes\nwd=w1,sd=sd1\nrd=r,wd=w1,iorate=max\n".into(), 1, 15, "is a general parameter"),
        ("validate=yes,sd=sd1\n".into(), 1, 14, "`sd=` in the middle of a line"),
        ("lun=/x\n".into(), 1, 1, "before any sd=, wd= or rd= record"),
        ("bogus=1\n".into(), 1, 1, "unknown general parameter `bogus`; expected one of data_errors"),
        // unsupported
        ("hd=host1\n".into(), 1, 1, "general parameter `hd` is not supported by Cairn"),
        ("fsd=fsd1,anchor=/x\n".into(), 1, 1, "`fsd` is not supported by Cairn; file-system workloads"),
        ("messagescan=no\n".into(), 1, 1, "`messagescan` is not supported"),
        ("openflags=o_sync\n".into(), 1, 1, "expected openflags= on each sd"),
        ("sd=sd1,lun=/x,hitarea=1m\n".into(), 1, 15, "sd parameter `hitarea` is not supported by Cairn; supported: lun, size"),
        ("sd=sd1,lun=/x,journal=/j\n".into(), 1, 15, "sd parameter `journal` is not supported"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,rhpct=10\n".into(), 2, 14, "wd parameter `rhpct` is not supported"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,threads=4\n".into(), 2, 14, "threads= goes on the sd"),
        (format!("{h}rd=r,wd=w1,iorate=max,sd=sd1\n"), 3, 23, "rd parameter `sd` is not supported by Cairn; name the sds on the wd"),
        (format!("{h}rd=r,wd=w1,iorate=max,maxdata=1g\n"), 3, 23, "rd parameter `maxdata` is not supported"),
        // general values
        ("data_errors=0\n".into(), 1, 13, "data_errors 0 is out of range"),
        ("compratio=0.5\n".into(), 1, 11, "compratio=0.5 is below 1"),
        ("dedupratio=x\n".into(), 1, 12, "expected dedupratio as a ratio"),
        ("dedupunit=1000\n".into(), 1, 11, "expected a multiple of 512"),
        ("validate=read_after_write\n".into(), 1, 10, "expected validate=yes or validate=no"),
        ("histogram=(default,10,5)\n".into(), 1, 23, "does not follow 10"),
        ("histogram=(default,x)\n".into(), 1, 20, "histogram bucket bound"),
        ("compratio=2\ncompratio=3\n".into(), 2, 1, "appears twice (first at line 1)"),
        // sd values
        ("sd=sd1,size=1g\nwd=w1,sd=sd1\n".into(), 1, 4, "sd `sd1` has no lun="),
        ("sd=sd1,lun=/x,size=10q\n".into(), 1, 20, "expected a size like 8k"),
        ("sd=sd1,lun=/x,size=0\n".into(), 1, 20, "size=0"),
        ("sd=sd1,lun=/x,size=1.3k\n".into(), 1, 20, "not a whole number of bytes"),
        ("sd=sd1,lun=/x,threads=0\n".into(), 1, 23, "threads 0 is out of range; expected 1 to 4096"),
        ("sd=sd1,lun=/x,threads=2.5\n".into(), 1, 23, "a whole number"),
        ("sd=sd1,lun=/x,openflags=(o_direct,fsync)\n".into(), 1, 35, "openflags `fsync` is not supported"),
        ("sd=sd1,lun=/x,align=100\n".into(), 1, 21, "align=100 is not usable"),
        ("sd=sd1,lun=/x,range=(50,10)\n".into(), 1, 25, "ends before it starts"),
        ("sd=sd1,lun=/x,range=(10,1g)\n".into(), 1, 25, "mixes a percentage and a byte offset"),
        ("sd=sd1,lun=/x,range=50\n".into(), 1, 21, "expected range=(start,end)"),
        ("sd=sd1,lun=(/x,/y)\n".into(), 1, 12, "takes one value, found a list of 2"),
        ("sd=sd1,lun=/x\nsd=sd1,lun=/y\n".into(), 2, 4, "sd `sd1` is defined twice (first at line 1)"),
        ("sd=s*d,lun=/x\n".into(), 1, 4, "is not a valid sd name"),
        ("sd=sd1,lun=/x,size=1g,size=2g\n".into(), 1, 23, "`size=` appears twice in sd `sd1`"),
        ("sd=sd1,lun=/x,bogus=1\n".into(), 1, 15, "unknown sd parameter `bogus`; expected one of lun, size, threads"),
        // wd values
        ("sd=sd1,lun=/x\nwd=w1,rdpct=50\nrd=r,wd=w1,iorate=max\n".into(), 2, 4, "wd `w1` has no sd="),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd2\n".into(), 2, 10, "unknown sd `sd2`; expected a defined sd (defined: sd1)"),
        ("sd=sd1,lun=/x\nwd=w1,sd=(sd1,disk*)\n".into(), 2, 15, "`disk*` matches no sd"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1-sd3\n".into(), 2, 10, "sd `sd2` (in the range `sd1-sd3`) is not defined"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,rdpct=101\n".into(), 2, 20, "rdpct 101 is over 100"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,rdpct=-1\n".into(), 2, 20, "expected rdpct as a percentage"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,xfersize=(4k,50,8k,40)\n".into(), 2, 23, "percentages add up to 90; expected them to add up to 100"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,xfersize=(4k,50,8k)\n".into(), 2, 23, "expected (size,percent,size,percent,…) pairs"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,xfersize=(4k,100,8k,0)\n".into(), 2, 34, "share of 0%"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,xfersize=1000\n".into(), 2, 23, "xfersize 1000 is not usable; expected a multiple of 512"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,xfersize=0\n".into(), 2, 23, "not usable"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,seekpct=sometimes\n".into(), 2, 22, "expected seekpct 0 to 100, sequential, seq, eof or random"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,seekpct=150\n".into(), 2, 22, "seekpct 150 is over 100"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,skew=0\n".into(), 2, 19, "skew=0"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,iorate=max\n".into(), 2, 21, "a number of I/Os per second"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,iorate=9000000000\n".into(), 2, 21, "above 1000000000 I/Os per second"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,priority=0\n".into(), 2, 23, "priority 0 is out of range"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,hotband=(1,2,3)\n".into(), 2, 22, "expected hotband=(start,end)"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1,rdpc=50\n".into(), 2, 14, "unknown wd parameter `rdpc`"),
        ("sd=sd1,lun=/x\nwd=w1,sd=sd1\nwd=w1,sd=sd1\n".into(), 3, 4, "wd `w1` is defined twice"),
        // rd values
        (format!("{h}rd=r,iorate=max\n"), 3, 4, "rd `r` has no wd="),
        (format!("{h}rd=r,wd=w1\n"), 3, 4, "rd `r` has no iorate="),
        (format!("{h}rd=r,wd=w9,iorate=max\n"), 3, 9, "unknown wd `w9`"),
        (format!("{h}rd=r,wd=x*,iorate=max\n"), 3, 9, "`x*` matches no wd"),
        (format!("{h}rd=r,wd=w1,iorate=fast\n"), 3, 19, "expected iorate=max, iorate=curve, a number"),
        (format!("{h}rd=r,wd=w1,iorate=0\n"), 3, 19, "iorate=0"),
        (format!("{h}rd=r,wd=w1,iorate=1500000000\n"), 3, 19, "iorate=1500000000 is above 1000000000 I/Os per second"),
        (format!("{h}rd=r,wd=w1,iorate=(100,2000000000)\n"), 3, 24, "the most the schedule can time"),
        (format!("{h}rd=r,wd=w1,iorate=(1000000000-3000000000,1000000000)\n"), 3, 31, "iorate=3000000000 is above"),
        (format!("{h}rd=r,wd=w1,iorate=(100,curve)\n"), 3, 24, "iorate=curve inside a list"),
        (format!("{h}rd=r,wd=w1,iorate=max,curve=(10,50)\n"), 3, 29, "curve=/stopcurve= in rd `r` whose iorate= is not curve"),
        (format!("{h}rd=r,wd=w1,iorate=100,stopcurve=5\n"), 3, 33, "whose iorate= is not curve"),
        (format!("{h}rd=r,wd=w1,iorate=curve,curve=(0,50)\n"), 3, 32, "curve point 0%"),
        (format!("{h}rd=r,wd=w1,iorate=curve,curve=(50,150)\n"), 3, 35, "a curve point 150 is over 100"),
        (format!("{h}rd=r,wd=w1,iorate=curve,stopcurve=0\n"), 3, 35, "stopcurve=0"),
        (format!("{h}rd=r,wd=w1,iorate=max,elapsed=0\n"), 3, 31, "elapsed=0"),
        (format!("{h}rd=r,wd=w1,iorate=max,elapsed=ten\n"), 3, 31, "expected elapsed in seconds like 30, 90s, 5m or 1h"),
        (format!("{h}rd=r,wd=w1,iorate=max,elapsed=400d\n"), 3, 31, "expected elapsed in seconds"),
        (format!("{h}rd=r,wd=w1,iorate=max,elapsed=9000h\n"), 3, 31, "longer than a year"),
        (format!("{h}rd=r,wd=w1,iorate=max,interval=0.05\n"), 3, 32, "interval=0.05 is shorter than 0.1 s"),
        (format!("{h}rd=r,wd=w1,iorate=max,elapsed=720h,interval=1\n"), 3, 45, "is 2592000 intervals, more than 100000 kept for one run; expected interval=26 or longer"),
        (format!("{h}rd=r,wd=w1,iorate=max,elapsed=10,interval=20\n"), 3, 43, "interval=20s is longer than elapsed=10s"),
        (format!("{h}rd=r,wd=w1,iorate=max,elapsed=10,warmup=10\n"), 3, 41, "warmup=10s is not shorter than elapsed=10s"),
        (format!("{h}rd=r,wd=w1,iorate=max,warmup=30\n"), 3, 30, "warmup=30s is not shorter than elapsed=30s"),
        (format!("{h}rd=r,wd=w1,iorate=max,distribution=poisson\n"), 3, 36, "expected exponential, uniform or deterministic"),
        (format!("{h}rd=r,wd=w1,iorate=max,forthreads=(1,0)\n"), 3, 37, "threads 0 is out of range"),
        (format!("{h}rd=r,wd=w1,iorate=max,forthreads=(9-1)\n"), 3, 37, "range 9-1 goes down"),
        (format!("{h}rd=r,wd=w1,iorate=max,forthreads=(1-9,0)\n"), 3, 39, "range step is 0"),
        (format!("{h}rd=r,wd=w1,iorate=max,forrdpct=(0-100,0.001)\n"), 3, 33, "range expands to more than 10000 values"),
        (format!("{h}rd=r,wd=w1,iorate=max,forthreads=(1-100000)\n"), 3, 37, "threads 100000 is out of range"),
        (format!("{h}rd=r,wd=w1,iorate=max,forthreads=(1-9,x)\n"), 3, 39, "expected a range step"),
        (format!("{h}rd=r,wd=w1,iorate=max,forthreads=(1,2-4)\n"), 3, 37, "a range must come first and alone"),
        (format!("{h}rd=r,wd=w1,iorate=max,forthreads=(1-4,1,2)\n"), 3, 41, "a range takes at most a step"),
        (format!("{h}rd=r,wd=w1,iorate=max,forxfersize=(4k-8k,1000)\n"), 3, 36, "xfersize 5096 from this range is not a multiple of 512 bytes"),
        (format!("{h}rd=r,wd=w1,iorate=max,forrdpct=(50,110)\n"), 3, 36, "rdpct 110 is over 100"),
        (format!("{h}rd=r,wd=w1,iorate=max,forseekpct=(seq,sideways)\n"), 3, 39, "expected seekpct 0 to 100"),
        (format!("{h}rd=r,wd=w1,iorate=max,forthreads=(1,2),threads=4\n"), 3, 40, "`threads=` appears twice in rd `r`"),
        (format!("{h}rd=r,wd=w1,iorate=max,pause=-1\n"), 3, 29, "expected pause in seconds"),
        (format!("{h}rd=r,wd=w1,iorate=max\nrd=r,wd=w1,iorate=max\n"), 4, 4, "rd `r` is defined twice"),
        (
            format!("{h}rd=r,wd=w1,iorate=max,forthreads=(1-100),forxfersize=(512-51200,512),forrdpct=(1-2)\n"),
            3,
            4,
            "takes the plan past 10000 runs",
        ),
        (
            "sd=sd1,lun=/x\nwd=a,sd=sd1,skew=60\nwd=b,sd=sd1,skew=50\nrd=r,wd=(a,b),iorate=100\n".into(),
            4,
            9,
            "skews of rd `r`'s workloads add up to 110%; expected at most 100",
        ),
        (
            "sd=sd1,lun=/x\nwd=a,sd=sd1,skew=60\nwd=b,sd=sd1,skew=30\nrd=r,wd=(a,b),iorate=100\n".into(),
            4,
            9,
            "add up to 90%; expected 100 when every workload has a skew",
        ),
    ];
    // Every case is checked before failing, so one run shows every mismatch.
    let mut wrong = Vec::new();
    for (text, line, column, fragment) in cases {
        let e = error(&text);
        let ok = e.message.contains(fragment)
            && (e.line, e.column) == (line, column)
            && e.file == Path::new("t.vdb")
            && !e.to_string().contains('\n');
        if !ok {
            wrong.push(format!(
                "{text:?}\n  expected {line}:{column} `{fragment}`\n  got      {e}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn skews_that_leave_room_for_others_are_fine() {
    let plan = parse("sd=sd1,lun=/x\nwd=a,sd=sd1,skew=60\nwd=b,sd=sd1\nrd=r,wd=(a,b),iorate=100\n");
    assert_eq!(plan.wd("a").unwrap().skew_pct, Some(60.0));
    assert_eq!(plan.wd("b").unwrap().skew_pct, None);
}

// ---------------------------------------------------------------- never panics

fn any_plan_or_one_line_error(text: &str) {
    let vars = BTreeMap::from([("dir".to_string(), "/tmp/x".to_string())]);
    let mut read =
        |_: &Path| -> io::Result<String> { Ok("sd=sdinc,lun=/tmp/inc,size=1m\n".to_string()) };
    match parse_str(Path::new("p.vdb"), text, &vars, &mut read) {
        Ok(plan) => {
            assert!(!plan.runs.is_empty());
            for run in &plan.runs {
                assert!(run.wds.iter().all(|w| plan.wd(w).is_some()));
                assert!(run.warmup < run.elapsed);
            }
            for wd in &plan.wds {
                assert!(wd.sds.iter().all(|s| plan.sd(s).is_some()));
            }
        }
        Err(e) => {
            assert!(!e.to_string().contains('\n'), "multi-line error: {e}");
            assert!(e.line >= 1 && e.column >= 1, "{e}");
        }
    }
}

const SEED: &str = "compratio=2\nsd=default,size=1m\nsd=sd1,lun=$dir/a\ninclude=x.vdb\n\
wd=w1,sd=sd*,xfersize=(4k,50,8k,50),rdpct=70,seekpct=random,range=(0,50)\n\
rd=r1,wd=w*,iorate=curve,curve=(10,50),forthreads=(1-4,d),elapsed=10,warmup=2\n\
rd=r2,wd=w1,iorate=(100,200),forxfersize=(4k-16k,4k)\n";

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        any_plan_or_one_line_error(&text);
    }

    #[test]
    fn vdbench_like_text_never_panics(text in "([a-z]{1,6}=[-a-z0-9*$().,{}\"#]{0,12}[,\n ]{0,2}){0,16}") {
        any_plan_or_one_line_error(&text);
    }

    #[test]
    fn mutated_files_never_panic(edits in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..4, "[-=,()*$#\"\n a-z0-9]{0,3}"), 1..6)) {
        let mut chars: Vec<char> = SEED.chars().collect();
        for (at, kind, insert) in edits {
            let i = at.index(chars.len() + 1);
            match kind {
                0 => { chars.drain(i..(i + 3).min(chars.len())); }
                1 => { chars.splice(i..i, insert.chars()); }
                2 => { if i < chars.len() { chars.splice(i..=i, insert.chars()); } }
                _ => { chars.truncate(i); }
            }
        }
        let text: String = chars.into_iter().collect();
        any_plan_or_one_line_error(&text);
    }
}

#[test]
fn seed_parses() {
    let vars = BTreeMap::from([("dir".to_string(), "/tmp/x".to_string())]);
    let mut read =
        |_: &Path| -> io::Result<String> { Ok("sd=sdinc,lun=/tmp/inc,size=1m\n".to_string()) };
    let plan = parse_str(Path::new("p.vdb"), SEED, &vars, &mut read).unwrap();
    assert_eq!(plan.wds[0].sds, ["sd1", "sdinc"]);
    assert_eq!(plan.runs.len(), 3 * 3 + 2 * 4);
}
