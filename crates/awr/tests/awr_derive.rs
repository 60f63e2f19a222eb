//! The "To POC" derivation: each class's arithmetic on hand-built reports, the
//! post's "higher of IOPS and bandwidth" rule, the multiblock read cap, redo
//! carved out of the write totals, missing inputs; the bank fragment of the
//! post reproducing the report's totals; the vdbench file Cairn runs; and the
//! AWR-to-AWR comparison table of "pythian-afd" in docs/sources.md.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::cell::Cell;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use cairn_awr::compare::compare_awr;
use cairn_awr::derive::{
    derive, vdbench_text, Basis, ClassKind, Derivation, DeriveError, DeriveOptions, IoClass,
};
use cairn_awr::model::{
    AwrReport, EventLine, Format, IoProfileLine, ProfileLine, Statistic, WaitClassLine,
};
use cairn_awr::stats::read_stat_tables;
use cairn_kit::model::{Plan, Rate, Seek, XferSize};
use cairn_kit::vdbench::parse_str;
use cairn_kit_report::compare::Better;
use proptest::prelude::*;

const BANK: &str = include_str!("data/awr/bank_fragment.txt");
const MIB: f64 = 1024.0 * 1024.0;

fn stat(name: &str, total: Option<f64>, per_second: Option<f64>) -> Statistic {
    Statistic {
        name: name.to_string(),
        total,
        per_second,
        per_trans: None,
    }
}

/// A report of per-second statistics only, 8 KiB blocks in the header.
fn report(stats: &[(&str, f64)]) -> AwrReport {
    let mut r = AwrReport::empty("hand.txt", Format::AwrText);
    r.header.block_size = Some(8192);
    r.instance_activity = stats.iter().map(|(n, v)| stat(n, None, Some(*v))).collect();
    r
}

/// Reads 1,000/s of which 200/s multiblock of 512 KiB; writes 600/s of which
/// 100/s multiblock of 256 KiB; 50 redo writes/s of 4 KiB (part of the 600).
fn oltp() -> AwrReport {
    let b = 8192.0;
    report(&[
        ("physical read total IO requests", 1000.0),
        ("physical read total multi block requests", 200.0),
        ("physical read total bytes", 800.0 * b + 200.0 * 524_288.0),
        ("physical write total IO requests", 600.0),
        ("physical write total multi block requests", 100.0),
        (
            "physical write total bytes",
            450.0 * b + 100.0 * 262_144.0 + 50.0 * 4096.0,
        ),
        ("redo writes", 50.0),
        ("redo size", 50.0 * 4096.0),
    ])
}

fn class(d: &Derivation, kind: ClassKind) -> &IoClass {
    d.class(kind)
        .unwrap_or_else(|| panic!("no {kind:?} class; notes: {:#?}", d.notes))
}

fn close(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= want.abs() * rel
}

fn has_line(lines: &[String], parts: &[&str]) -> bool {
    lines.iter().any(|l| parts.iter().all(|p| l.contains(p)))
}

fn no_includes(path: &Path) -> io::Result<String> {
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not served", path.display()),
    ))
}

fn parse(text: &str, vars: &[(&str, &str)]) -> Plan {
    let vars: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    parse_str(Path::new("awr.vdb"), text, &vars, &mut no_includes)
        .unwrap_or_else(|e| panic!("{e}\n--- text:\n{text}"))
}

fn bank() -> AwrReport {
    let (rows, _) = read_stat_tables(BANK);
    let mut r = AwrReport::empty("bank_fragment.txt", Format::AwrText);
    r.instance_activity = rows.iter().map(Statistic::from).collect();
    r
}

#[test]
fn every_class_shows_its_arithmetic_and_adds_up_to_the_report() {
    let d = derive(&oltp(), &DeriveOptions::default()).unwrap();
    assert_eq!(d.block_size_bytes, 8192);
    assert_eq!(d.block_size_from, "from the report's header");
    let kinds: Vec<ClassKind> = d.classes.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, ClassKind::ALL);

    let rr = class(&d, ClassKind::RandomRead);
    assert_eq!((rr.awr_rate_per_s, rr.size_bytes), (800.0, 8192));
    assert!(has_line(
        &rr.arithmetic,
        &["physical read total IO requests", "1,000.0/s"]
    ));
    assert!(has_line(
        &rr.arithmetic,
        &["single-block reads = 1,000.0 − 200.0 = 800.0/s"]
    ));

    let sr = class(&d, ClassKind::SequentialRead);
    assert_eq!((sr.awr_rate_per_s, sr.size_bytes), (200.0, 524_288));
    assert_eq!(sr.basis, Basis::Iops);
    assert!(has_line(
        &sr.arithmetic,
        &[
            "physical read total bytes",
            "÷ 200 multiblock",
            "524,288 B (512 KiB)"
        ]
    ));

    let rw = class(&d, ClassKind::RandomWrite);
    assert_eq!((rw.awr_rate_per_s, rw.size_bytes), (450.0, 8192));
    assert!(has_line(&rw.arithmetic, &["600.0 − 100.0 = 500.0/s"]));
    assert!(has_line(
        &rw.arithmetic,
        &["50.0/s redo writes", "taken out, not added", "450.0/s"]
    ));

    let mw = class(&d, ClassKind::MultiblockWrite);
    assert_eq!(mw.awr_rate_per_s, 100.0);
    assert_eq!(mw.size_bytes, 262_144);
    assert!(has_line(
        &mw.arithmetic,
        &["− 50 redo writes × 4,096 B", "262,144 B (256 KiB)"]
    ));

    let redo = class(&d, ClassKind::RedoWrite);
    assert_eq!((redo.awr_rate_per_s, redo.size_bytes), (50.0, 4096));
    assert!(has_line(
        &redo.arithmetic,
        &["redo size", "÷ redo writes", "4,096 B (4 KiB)"]
    ));

    // The classes reproduce the report: requests and bytes, both directions.
    assert_eq!(d.read_iops(), 1000.0);
    assert_eq!(d.write_iops(), 600.0, "redo is inside the 600, not on top");
    assert!(close(
        d.read_bytes_per_s(),
        d.stated.read_bytes_per_s.unwrap(),
        1e-9
    ));
    assert!(close(
        d.write_bytes_per_s(),
        d.stated.write_bytes_per_s.unwrap(),
        1e-9
    ));
    // The report lists no db_file_multiblock_read_count: said, not hidden.
    assert!(has_line(
        &d.notes,
        &["db_file_multiblock_read_count", "1 MiB"]
    ));
}

#[test]
fn a_multiblock_size_over_the_mbrc_cap_keeps_the_bandwidth_by_the_higher_of_rule() {
    let mut r = oltp();
    // 32 × 8 KiB = 256 KiB, half the 512 KiB the statistics give.
    r.parameters
        .push(("db_file_multiblock_read_count".into(), "32".into()));
    let d = derive(&r, &DeriveOptions::default()).unwrap();
    let sr = class(&d, ClassKind::SequentialRead);
    assert_eq!(sr.size_bytes, 262_144);
    assert_eq!(sr.measured_size_bytes, 524_288.0);
    assert_eq!(sr.basis, Basis::Bandwidth);
    // The bandwidth needs 400 requests of 256 KiB a second, more than the 200 stated.
    assert_eq!(sr.stated_iops, 200.0);
    assert_eq!(sr.awr_rate_per_s, 400.0);
    assert!(close(sr.awr_bytes_per_s(), 200.0 * 524_288.0, 1e-12));
    assert!(has_line(
        &sr.arithmetic,
        &[
            "db_file_multiblock_read_count 32 × 8192 B",
            "capped at 262,144 B"
        ]
    ));
    assert!(has_line(
        &d.notes,
        &["disagree", "higher", "400.0/s (bandwidth)"]
    ));
    assert!(!has_line(&d.notes, &["is assumed to be"]));
}

#[test]
fn a_multiblock_size_under_two_blocks_keeps_the_iops_by_the_same_rule() {
    let b = 8192.0;
    let d = derive(
        &report(&[
            ("physical read total IO requests", 300.0),
            ("physical read total multi block requests", 100.0),
            // 1.5 blocks per multiblock request: less than a multiblock read can be.
            ("physical read total bytes", 200.0 * b + 100.0 * 1.5 * b),
        ]),
        &DeriveOptions::default(),
    )
    .unwrap();
    let sr = class(&d, ClassKind::SequentialRead);
    assert_eq!(sr.size_bytes, 16_384);
    assert_eq!(sr.basis, Basis::Iops);
    assert_eq!(sr.awr_rate_per_s, 100.0);
    assert!(has_line(&sr.arithmetic, &["under two blocks"]));
    assert!(has_line(&d.notes, &["higher", "100.0/s (IOPS)"]));
}

#[test]
fn redo_beyond_the_single_block_writes_comes_out_of_the_multiblock_ones() {
    let d = derive(
        &report(&[
            ("physical write total IO requests", 100.0),
            ("physical write total multi block requests", 80.0),
            ("physical write total bytes", 20.0 * 512.0 + 80.0 * 65_536.0),
            ("redo writes", 50.0),
            ("redo size", 50.0 * 512.0),
        ]),
        &DeriveOptions::default(),
    )
    .unwrap();
    assert!(d.class(ClassKind::RandomWrite).is_none());
    assert!(has_line(
        &d.notes,
        &["single-block random writes", "none left"]
    ));
    let mw = class(&d, ClassKind::MultiblockWrite);
    assert_eq!(mw.awr_rate_per_s, 50.0);
    assert!(has_line(
        &mw.arithmetic,
        &["80.0 − 30.0/s redo writes", "50.0/s"]
    ));
    assert_eq!(class(&d, ClassKind::RedoWrite).size_bytes, 512);
    assert_eq!(d.write_iops(), 100.0);
}

#[test]
fn a_pdb_report_without_writes_derives_the_reads_and_says_why_not_the_writes() {
    let mut r = oltp();
    r.header.container = Some("PDB1".into());
    r.instance_activity
        .retain(|s| s.name.starts_with("physical read"));
    let d = derive(&r, &DeriveOptions::default()).unwrap();
    let kinds: Vec<ClassKind> = d.classes.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [ClassKind::RandomRead, ClassKind::SequentialRead]);
    assert!(has_line(
        &d.notes,
        &["PDB-level report", "CDB-level snapshots"]
    ));
    assert!(has_line(
        &d.notes,
        &[
            "single-block random writes: left out",
            "physical write total IO requests"
        ]
    ));
    assert!(has_line(
        &d.notes,
        &["redo writes: left out", "redo writes"]
    ));
}

#[test]
fn no_redo_statistics_leave_the_writes_whole_and_the_redo_class_out() {
    let mut r = oltp();
    r.instance_activity.retain(|s| !s.name.starts_with("redo"));
    let d = derive(&r, &DeriveOptions::default()).unwrap();
    assert!(d.class(ClassKind::RedoWrite).is_none());
    assert!(has_line(&d.notes, &["redo writes: left out"]));
    assert_eq!(class(&d, ClassKind::RandomWrite).awr_rate_per_s, 500.0);
    assert_eq!(d.write_iops(), 600.0);
}

#[test]
fn missing_multiblock_bytes_leave_out_only_the_multiblock_classes() {
    let mut r = oltp();
    r.instance_activity
        .retain(|s| !s.name.ends_with("total bytes"));
    let d = derive(&r, &DeriveOptions::default()).unwrap();
    assert!(d.class(ClassKind::SequentialRead).is_none());
    assert!(d.class(ClassKind::MultiblockWrite).is_none());
    assert!(d.class(ClassKind::RandomRead).is_some());
    assert!(has_line(
        &d.notes,
        &[
            "multiblock sequential reads: left out",
            "physical read total bytes"
        ]
    ));
    assert!(has_line(
        &d.notes,
        &["multiblock writes: left out", "physical write total bytes"]
    ));
}

#[test]
fn nothing_usable_is_one_line_naming_what_is_missing() {
    let mut r = report(&[("session logical reads", 10_000.0)]);
    r.source = "notes.txt".into();
    let e = derive(&r, &DeriveOptions::default()).unwrap_err();
    assert!(matches!(e, DeriveError::NothingUsable { .. }));
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "{msg}");
    assert!(
        msg.starts_with("notes.txt: no I/O class can be derived"),
        "{msg}"
    );
    for n in [
        "physical read total IO requests",
        "physical write total IO requests",
        "redo writes",
    ] {
        assert!(msg.contains(n), "{msg}");
    }
}

#[test]
fn options_are_checked() {
    let bad = |o: DeriveOptions| {
        matches!(
            derive(&oltp(), &o),
            Err(DeriveError::BadOption(m)) if !m.contains('\n')
        )
    };
    assert!(bad(DeriveOptions {
        scale: 0.0,
        ..DeriveOptions::default()
    }));
    assert!(bad(DeriveOptions {
        scale: f64::NAN,
        ..DeriveOptions::default()
    }));
    assert!(bad(DeriveOptions {
        block_size_bytes: Some(1000),
        ..DeriveOptions::default()
    }));
    assert!(bad(DeriveOptions {
        warmup_s: 120,
        ..DeriveOptions::default()
    }));
}

#[test]
fn the_block_size_comes_from_the_option_then_the_report_then_the_default() {
    let given = DeriveOptions {
        block_size_bytes: Some(16_384),
        ..DeriveOptions::default()
    };
    let d = derive(&oltp(), &given).unwrap();
    assert_eq!(d.block_size_bytes, 16_384);
    assert_eq!(class(&d, ClassKind::RandomRead).size_bytes, 16_384);

    let mut r = oltp();
    r.header.block_size = None;
    r.parameters.push(("db_block_size".into(), "4096".into()));
    assert_eq!(
        derive(&r, &DeriveOptions::default())
            .unwrap()
            .block_size_bytes,
        4096
    );

    r.parameters.clear();
    let d = derive(&r, &DeriveOptions::default()).unwrap();
    assert_eq!(d.block_size_bytes, 8192);
    assert!(has_line(
        &d.notes,
        &["block size 8,192 B", "assumed", "--block-size"]
    ));
}

#[test]
fn cut_statistic_names_match_and_ambiguous_ones_are_refused() {
    let mut r = oltp();
    for s in &mut r.instance_activity {
        // As AWR prints them: cut to 32 characters, then trimmed.
        s.name = s
            .name
            .chars()
            .take(32)
            .collect::<String>()
            .trim_end()
            .to_string();
    }
    let d = derive(&r, &DeriveOptions::default()).unwrap();
    assert_eq!(class(&d, ClassKind::SequentialRead).awr_rate_per_s, 200.0);
    assert!(has_line(
        &class(&d, ClassKind::SequentialRead).arithmetic,
        &["physical read total multi block:"]
    ));

    r.instance_activity
        .push(stat("physical read total multi block", None, Some(999.0)));
    let d = derive(&r, &DeriveOptions::default()).unwrap();
    assert!(d.class(ClassKind::SequentialRead).is_none());
    assert!(has_line(
        &d.notes,
        &["2 rows could be `physical read total multi block requests`"]
    ));
}

#[test]
fn per_second_values_missing_are_total_over_elapsed() {
    let mut r = oltp();
    r.header.elapsed_min = Some(10.0);
    for s in &mut r.instance_activity {
        s.total = s.per_second.map(|p| p * 600.0);
        s.per_second = None;
    }
    let d = derive(&r, &DeriveOptions::default()).unwrap();
    assert_eq!(d.elapsed_s, Some(600.0));
    assert!(close(
        class(&d, ClassKind::RandomRead).awr_rate_per_s,
        800.0,
        1e-12
    ));
    assert!(has_line(
        &class(&d, ClassKind::SequentialRead).arithmetic,
        &["size (from the totals)", "524,288 B"]
    ));
}

#[test]
fn the_scale_multiplies_the_rates_the_replay_drives() {
    let o = DeriveOptions {
        scale: 0.01,
        ..DeriveOptions::default()
    };
    let d = derive(&oltp(), &o).unwrap();
    let redo = class(&d, ClassKind::RedoWrite);
    assert_eq!(redo.awr_rate_per_s, 50.0);
    assert!(close(redo.rate_per_s, 0.5, 1e-12));
    assert!(close(d.rate_per_s(), 16.0, 1e-12));
    let plan = parse(&vdbench_text(&d, "sd=sd1,lun=/tmp/a.dat,size=64m\n"), &[]);
    let redo_wd = plan
        .wds
        .iter()
        .find(|w| w.name == "wd_oracle_redo_write")
        .unwrap();
    assert_eq!(redo_wd.iorate, Some(0.5));
    assert_eq!(plan.runs[0].rate, Rate::Fixed(16.0));
}

#[test]
fn the_vdbench_file_parses_and_its_rates_add_up() {
    let d = derive(&oltp(), &DeriveOptions::default()).unwrap();
    let sds = "sd=sd1,lun=$dir/awr1.dat,size=64m\nsd=sd2,lun=$dir/awr2.dat,size=64m";
    let text = vdbench_text(&d, sds);
    let plan = parse(&text, &[("dir", "/tmp/cairn-awr")]);
    assert_eq!(plan.sds.len(), 2);
    assert_eq!(plan.wds.len(), 5);
    for (wd, c) in plan.wds.iter().zip(&d.classes) {
        assert_eq!(wd.name, c.kind.wd_name());
        assert_eq!(wd.sds, ["sd1", "sd2"]);
        assert_eq!(wd.rdpct, if c.kind.is_read() { 100.0 } else { 0.0 });
        assert_eq!(wd.xfersize, XferSize::Fixed(c.size_bytes));
        assert_eq!(wd.iorate, Some(c.rate_per_s));
        assert_eq!(wd.priority, Some(c.kind.priority()));
        match c.kind {
            ClassKind::RandomRead | ClassKind::RandomWrite => {
                assert_eq!(wd.seek, Seek::Random(100.0))
            }
            _ => assert_eq!(wd.seek, Seek::Sequential),
        }
    }
    assert_eq!(plan.runs.len(), 1);
    let run = &plan.runs[0];
    let sum: f64 = plan.wds.iter().filter_map(|w| w.iorate).sum();
    assert_eq!(sum, 1600.0);
    assert_eq!(run.rate, Rate::Fixed(sum));
    assert_eq!(run.wds.len(), 5);
    assert_eq!(run.elapsed.as_secs(), 120);
    assert_eq!(run.warmup.as_secs(), 5);
    // The arithmetic and the totals check ride along as comments.
    assert!(text.contains("*   single-block reads = 1,000.0 − 200.0 = 800.0/s"));
    assert!(text.contains(
        "read bandwidth: 6.2 MiB/s single-block random reads + 100.0 MiB/s multiblock sequential reads = 106.2 MiB/s ≈ the 106.2 MiB/s the report states"
    ), "{text}");
    assert!(text.contains("write IOPS: 450.0/s single-block random writes + 100.0/s multiblock writes + 50.0/s redo writes = 600.0/s ≈ the 600.0/s the report states"));
}

/// The post's hand-tuned split (`examples/vdbench/awr_bank.vdb`): rate/s and KiB.
const POST: [(ClassKind, f64, f64); 5] = [
    (ClassKind::RandomRead, 3250.0, 16.0),
    (ClassKind::SequentialRead, 2500.0, 1024.0),
    (ClassKind::RandomWrite, 5800.0, 16.0),
    (ClassKind::MultiblockWrite, 750.0, 768.0),
    (ClassKind::RedoWrite, 50.0, 64.0),
];

#[test]
fn the_bank_fragment_reproduces_the_reports_totals() {
    let d = derive(&bank(), &DeriveOptions::default()).unwrap();
    // 16 KiB, from physical read bytes ÷ (physical reads cache + direct).
    assert_eq!(d.block_size_bytes, 16_384);
    assert!(d.block_size_from.starts_with("from the statistics"));
    assert!(close(d.elapsed_s.unwrap(), 7198.3, 1e-4));

    // The totals, within 5% (they come out within 0.1%).
    assert!(close(d.read_iops(), 7_707.0, 0.05), "{}", d.read_iops());
    assert!(close(d.write_iops(), 5_204.0, 0.05), "{}", d.write_iops());
    assert!(close(d.read_bytes_per_s() / MIB, 2_566.0, 0.05));
    assert!(close(d.write_bytes_per_s() / MIB, 650.0, 0.05));
    assert!(close(
        class(&d, ClassKind::RedoWrite).awr_rate_per_s,
        47.0,
        0.05
    ));
    assert!(close(d.read_iops(), 7_707.3, 0.001));
    assert!(close(d.write_iops(), 5_204.0, 0.001));
    assert!(close(d.read_bytes_per_s() / MIB, 2_568.5, 0.001));
    assert!(close(d.write_bytes_per_s() / MIB, 650.3, 0.001));

    // docs/awr-formats.md §6.2, class by class.
    let c = |k| class(&d, k);
    assert!(close(
        c(ClassKind::RandomRead).awr_rate_per_s,
        4_991.0,
        1e-6
    ));
    assert_eq!(c(ClassKind::RandomRead).size_bytes, 16_384);
    let sr = c(ClassKind::SequentialRead);
    assert!(close(sr.awr_rate_per_s, 2_716.3, 1e-6));
    assert!(
        (sr.measured_size_bytes - 961_431.0).abs() < 1.0,
        "{}",
        sr.measured_size_bytes
    );
    assert_eq!(sr.size_bytes, 939 * 1024);
    // Redo (47.4/s) comes out of the single-block writes: 4,438.3 − 47.4.
    assert!(close(
        c(ClassKind::RandomWrite).awr_rate_per_s,
        4_390.9,
        1e-6
    ));
    let mw = c(ClassKind::MultiblockWrite);
    assert!(close(mw.awr_rate_per_s, 765.7, 1e-6));
    assert!(
        (mw.measured_size_bytes - 795_581.0).abs() < 1.0,
        "{}",
        mw.measured_size_bytes
    );
    assert_eq!(mw.size_bytes, 777 * 1024);
    // The fragment's redo size was cut: one block assumed, and said.
    assert_eq!(c(ClassKind::RedoWrite).size_bytes, 16_384);
    assert!(has_line(&d.notes, &["no redo size", "one block"]));
    assert!(d.classes.iter().all(|c| c.basis == Basis::Iops));

    let plan = parse(
        &vdbench_text(&d, "sd=sd1,lun=/tmp/bank1.dat,size=1g\n"),
        &[],
    );
    assert_eq!(plan.wds.len(), 5);
    let Rate::Fixed(rd) = plan.runs[0].rate else {
        panic!("{:?}", plan.runs[0].rate)
    };
    let wds: f64 = plan.wds.iter().filter_map(|w| w.iorate).sum();
    assert!(close(rd, wds, 1e-12), "rd {rd} against the wds' {wds}");
    assert!(close(rd, 4991.0 + 2716.3 + 4390.9 + 765.7 + 47.4, 1e-12));
}

#[test]
fn the_posts_split_matches_bandwidth_but_not_iops_and_the_derived_one_matches_both() {
    // What docs/awr-replay.md explains: the post rounded sizes up and let
    // IOPS drift; measured sizes keep both within 0.1%.
    let d = derive(&bank(), &DeriveOptions::default()).unwrap();
    let post = |reads: bool, bytes: bool| -> f64 {
        POST.iter()
            .filter(|(k, _, _)| k.is_read() == reads)
            .map(|(_, r, kib)| if bytes { r * kib / 1024.0 } else { *r })
            .sum()
    };
    assert!(close(post(true, true), 2_566.0, 0.01));
    assert!(close(post(false, true), 650.0, 0.01));
    assert!(!close(post(true, false), 7_707.3, 0.2), "reads 25% under");
    assert!(!close(post(false, false), 5_204.0, 0.2), "writes 27% over");
    assert!(
        close(d.read_iops(), 7_707.3, 0.001) && close(d.read_bytes_per_s() / MIB, 2_568.5, 0.001)
    );
    assert!(
        close(d.write_iops(), 5_204.0, 0.001) && close(d.write_bytes_per_s() / MIB, 650.3, 0.001)
    );
    // Class by class, the post's multiblock writes and redo rate are within 3%.
    assert!(close(
        750.0,
        class(&d, ClassKind::MultiblockWrite).awr_rate_per_s,
        0.03
    ));
    assert!(close(
        768.0,
        class(&d, ClassKind::MultiblockWrite).size_bytes as f64 / 1024.0,
        0.03
    ));
    assert!(close(
        50.0,
        class(&d, ClassKind::RedoWrite).awr_rate_per_s,
        0.06
    ));
}

#[test]
fn a_redo_size_from_the_io_profile_or_the_options_replaces_the_assumption() {
    // The IO Profile's write column: the read column is the archiver reading
    // the logs back (0.2 MB/s in 0.2 requests/s here), not LGWR's writes.
    let mut r = bank();
    r.io_profile.push(IoProfileLine {
        label: "Redo Requests:".into(),
        read_write_per_s: Some(47.6),
        read_per_s: Some(0.2),
        write_per_s: Some(47.4),
    });
    r.io_profile.push(IoProfileLine {
        label: "Redo (MB):".into(),
        read_write_per_s: Some(47.4 * 64.0 / 1024.0 + 0.2),
        read_per_s: Some(0.2),
        write_per_s: Some(47.4 * 64.0 / 1024.0),
    });
    let d = derive(&r, &DeriveOptions::default()).unwrap();
    assert_eq!(class(&d, ClassKind::RedoWrite).size_bytes, 65_536);
    assert!(!has_line(&d.notes, &["no redo size"]));
    // Redo bytes carved out: the multiblock writes get smaller, the total stays.
    assert!(class(&d, ClassKind::MultiblockWrite).measured_size_bytes < 795_000.0);
    assert!(close(d.write_bytes_per_s() / MIB, 650.3, 0.001));

    // The Load Profile's redo per second over the redo writes comes first.
    let mut r = bank();
    r.load_profile
        .push(line("Redo size (bytes):", 47.4 * 16.0 * 1024.0));
    let d = derive(&r, &DeriveOptions::default()).unwrap();
    let redo = class(&d, ClassKind::RedoWrite);
    assert!(
        (redo.size_bytes as f64 - 16.0 * 1024.0).abs() <= 512.0,
        "{}",
        redo.size_bytes
    );
    assert!(has_line(&redo.arithmetic, &["Load Profile Redo size"]));
    assert!(!has_line(&d.notes, &["no redo size"]));

    let o = DeriveOptions {
        redo_write_bytes: Some(32 * 1024),
        ..DeriveOptions::default()
    };
    assert_eq!(
        class(&derive(&bank(), &o).unwrap(), ClassKind::RedoWrite).size_bytes,
        32_768
    );
}

// ---- compare ------------------------------------------------------------

fn line(label: &str, per_second: f64) -> ProfileLine {
    ProfileLine {
        label: label.into(),
        per_second: Some(per_second),
        per_transaction: None,
        per_exec: None,
        per_call: None,
    }
}

fn event(name: &str, waits: f64, total_s: f64, avg_us: Option<f64>) -> EventLine {
    EventLine {
        event: name.into(),
        waits: Some(waits),
        total_wait_s: Some(total_s),
        avg_wait_us: avg_us,
        pct_db_time: None,
        wait_class: Some("User I/O".into()),
    }
}

#[test]
fn compare_builds_the_metric_table_with_hand_computed_changes() {
    // 003's first ASMLib/ASMFD table; A with 12c labels, B with 11g ones.
    let mut a = AwrReport::empty("asmlib.txt", Format::AwrText);
    a.load_profile = vec![
        line("Redo size (bytes)", 1_377_287.6),
        line("Logical read (blocks)", 10_633.8),
        line("Block changes", 9_323.1),
        line("Physical read (blocks)", 7_239.6),
        line("Read IO requests", 7_235.5),
        line("Read IO (MB)", 56.6),
        line("Executes (SQL)", 323.2),
        line("Transactions", 144.5),
    ];
    a.foreground_events = vec![
        event("db file sequential read", 1000.0, 1.69, Some(1690.0)),
        event("db file parallel read", 100.0, 0.386, Some(3860.0)),
    ];
    a.wait_classes = vec![WaitClassLine {
        wait_class: "User I/O".into(),
        waits: Some(2000.0),
        total_wait_s: Some(3.5),
        avg_wait_us: Some(1750.0),
        pct_db_time: None,
    }];
    let mut b = AwrReport::empty("asmfd.txt", Format::AwrText);
    b.load_profile = vec![
        line("Redo size", 1_556_388.0),
        line("Logical reads", 12_134.8),
        line("Block changes", 10_635.6),
        line("Physical reads", 8_373.7),
        line("Executes", 374.6),
        line("Transactions", 165.1),
    ];
    // 11g has no Read IO rows: the statistics stand in.
    b.instance_activity = vec![
        stat("physical read IO requests", None, Some(8_371.7)),
        stat("physical read bytes", None, Some(65.4 * MIB)),
    ];
    // No wait class table: User I/O from its events, total time ÷ waits.
    b.foreground_events = vec![
        event("db file sequential read", 3000.0, 2.53788, None),
        event("db file parallel read", 500.0, 0.825, Some(1650.0)),
    ];
    let c = compare_awr(&a, &b);
    assert_eq!(
        (c.a_name.as_str(), c.b_name.as_str()),
        ("asmlib.txt", "asmfd.txt")
    );
    let rows: Vec<_> = c.sections.iter().flat_map(|s| &s.rows).collect();
    let want: [(&str, f64, f64, f64, Better); 11] = [
        (
            "Redo size (bytes/s)",
            1_377_287.6,
            1_556_388.0,
            13.0038,
            Better::Higher,
        ),
        (
            "Logical reads (blocks/s)",
            10_633.8,
            12_134.8,
            14.1154,
            Better::Higher,
        ),
        (
            "Block changes (/s)",
            9_323.1,
            10_635.6,
            14.0779,
            Better::Higher,
        ),
        (
            "Physical reads (blocks/s)",
            7_239.6,
            8_373.7,
            15.6652,
            Better::Higher,
        ),
        (
            "Read IO requests",
            7_235.5,
            8_371.7,
            15.7031,
            Better::Higher,
        ),
        ("Read IO", 56.6, 65.4, 15.5477, Better::Higher),
        ("Executes (/s)", 323.2, 374.6, 15.9035, Better::Higher),
        ("Transactions (/s)", 144.5, 165.1, 14.2561, Better::Higher),
        (
            "db file sequential read avg wait",
            1690.0,
            845.96,
            -49.9432,
            Better::Lower,
        ),
        (
            "db file parallel read avg wait",
            3860.0,
            1650.0,
            -57.2539,
            Better::Lower,
        ),
        (
            "User I/O avg wait",
            1750.0,
            960.8229,
            -45.0959,
            Better::Lower,
        ),
    ];
    assert_eq!(rows.len(), want.len());
    for (row, (metric, va, vb, pct, better)) in rows.iter().zip(want) {
        assert_eq!(row.metric, metric);
        assert!(close(row.a.unwrap(), va, 1e-6), "{metric}: {:?}", row.a);
        assert!(close(row.b.unwrap(), vb, 1e-6), "{metric}: {:?}", row.b);
        assert!(
            (row.pct_change().unwrap() - pct).abs() < 1e-3,
            "{metric}: {:?}",
            row.pct_change()
        );
        assert_eq!(row.better, better);
    }
    assert_eq!(rows[4].unit, "IO/s");
    assert_eq!(rows[5].unit, "MB/s");
    assert_eq!(rows[8].unit, "us");
}

#[test]
fn compare_leaves_a_figure_neither_report_has_empty_not_zero() {
    let a = AwrReport::empty("a.txt", Format::StatspackText);
    let b = AwrReport::empty("a.txt", Format::StatspackText);
    let c = compare_awr(&a, &b);
    assert_eq!(
        (c.a_name.as_str(), c.b_name.as_str()),
        ("a.txt (A)", "a.txt (B)")
    );
    assert!(c
        .sections
        .iter()
        .flat_map(|s| &s.rows)
        .all(|r| r.a.is_none() && r.b.is_none()));
}

// ---- no panics ------------------------------------------------------------

/// Every statistic the derivation reads, each at most once, then names that
/// collide with them (a full name next to its cut one).
const NAMES: [&str; 13] = [
    "physical read total IO requests",
    "physical read total multi block",
    "physical read total bytes",
    "physical write total IO requests",
    "physical write total multi block",
    "physical write total bytes",
    "redo writes",
    "redo size",
    "physical read bytes",
    "physical reads cache",
    "physical reads direct",
    "physical write total multi block requests",
    "physical read total multi block requests",
];
const UNIQUE_NAMES: usize = 11;

thread_local! {
    /// How many cases derived something, so a test can tell the property
    /// exercised the parameter file and not only the error path (per thread:
    /// the property also runs on its own, in parallel).
    static DERIVED: Cell<usize> = const { Cell::new(0) };
}

fn value() -> impl Strategy<Value = Option<f64>> {
    prop_oneof![
        Just(None),
        any::<f64>().prop_map(Some),
        (0.0..1e13f64).prop_map(Some),
        (0.0..100.0f64).prop_map(Some),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn derive_never_panics_and_what_it_derives_runs(
        stats in proptest::collection::vec((any::<bool>(), value(), value()), UNIQUE_NAMES),
        dup in proptest::option::of((0..NAMES.len(), value(), value())),
        elapsed_min in value(),
        block in proptest::option::of(0u32..70_000),
        mbrc in proptest::option::of("[0-9]{0,4}|-1|x"),
        redo_mb in value(),
        redo_req in value(),
        scale in prop_oneof![Just(1.0), 1e-6..10.0f64],
    ) {
        let mut r = AwrReport::empty("p.txt", Format::AwrText);
        r.header.elapsed_min = elapsed_min;
        r.header.block_size = block;
        r.instance_activity = stats
            .iter()
            .zip(NAMES)
            .filter(|((present, _, _), _)| *present)
            .map(|((_, t, p), name)| stat(name, *t, *p))
            .collect();
        if let Some((k, t, p)) = dup {
            r.instance_activity.push(stat(NAMES[k], t, p));
        }
        if let Some(m) = mbrc {
            r.parameters.push(("db_file_multiblock_read_count".into(), m));
        }
        r.io_profile.push(IoProfileLine { label: "Redo (MB):".into(), read_write_per_s: redo_mb, read_per_s: None, write_per_s: None });
        r.io_profile.push(IoProfileLine { label: "Redo Requests:".into(), read_write_per_s: redo_req, read_per_s: None, write_per_s: None });
        let o = DeriveOptions { scale, ..DeriveOptions::default() };
        match derive(&r, &o) {
            Ok(d) => {
                DERIVED.with(|n| n.set(n.get() + 1));
                prop_assert!(!d.classes.is_empty());
                for c in &d.classes {
                    prop_assert!(c.rate_per_s.is_finite() && c.rate_per_s > 0.0);
                    prop_assert!(c.size_bytes >= 512 && c.size_bytes % 512 == 0);
                    prop_assert!(c.size_bytes <= 256 * 1024 * 1024);
                }
                let text = vdbench_text(&d, "sd=sd1,lun=/tmp/p.dat,size=1g\n");
                let vars = BTreeMap::new();
                let plan = parse_str(Path::new("p.vdb"), &text, &vars, &mut no_includes);
                prop_assert!(plan.is_ok(), "{:?}\n{}", plan.err(), text);
            }
            Err(e) => prop_assert!(!e.to_string().contains('\n')),
        }
    }
}

#[test]
fn the_no_panic_property_derives_often_enough_to_test_the_parameter_file() {
    derive_never_panics_and_what_it_derives_runs();
    let derived = DERIVED.with(Cell::get);
    assert!(derived >= 30, "only {derived} cases derived a workload");
}

#[test]
fn a_parsed_10g_report_derives_classes_that_add_up_to_its_statistics() {
    // The 10.2.0.4 text report read whole, then derived: per second, reads
    // 1,850 requests (240 multiblock) and 42,680,320 B; writes 420 requests
    // (35 multiblock, 60 of them redo writes) and 5,324,800 B; redo size
    // 368,640 B.
    let text = include_str!("data/awr/text/awr_10204.txt");
    let r = cairn_awr::text::parse_awr_text(text, "awr_10204.txt");
    let d = derive(&r, &DeriveOptions::default()).unwrap();
    assert_eq!(d.block_size_bytes, 8192);
    assert_eq!(d.block_size_from, "from the report's header");
    assert_eq!(d.elapsed_s, Some(3612.0));
    let ps = |name: &str| r.statistic(name).and_then(|s| s.per_second).unwrap();

    // The classes' totals are the statistics, requests and bytes.
    assert_eq!(d.read_iops(), ps("physical read total IO requests"));
    assert_eq!(d.write_iops(), ps("physical write total IO requests"));
    assert!(close(
        d.read_bytes_per_s(),
        ps("physical read total bytes"),
        1e-12
    ));
    assert!(close(
        d.write_bytes_per_s(),
        ps("physical write total bytes"),
        1e-12
    ));
    assert_eq!(d.stated.read_iops, Some(1850.0));
    assert_eq!(d.stated.write_bytes_per_s, Some(5_324_800.0));

    // Class by class, as the generator of the report built them.
    let c = |k| class(&d, k);
    assert_eq!(
        (
            c(ClassKind::RandomRead).awr_rate_per_s,
            c(ClassKind::RandomRead).size_bytes
        ),
        (1850.0 - 240.0, 8192)
    );
    let sr = c(ClassKind::SequentialRead);
    assert_eq!(
        (sr.awr_rate_per_s, sr.size_bytes, sr.basis),
        (
            ps("physical read total multi block"),
            120 * 1024,
            Basis::Iops
        )
    );
    // 16 × 8 KiB = 128 KiB: the 120 KiB reads are under the cap, which the
    // parameter gave (no default assumed).
    assert!(sr.measured_size_bytes <= 16.0 * 8192.0);
    assert!(!has_line(
        &d.notes,
        &["db_file_multiblock_read_count", "1 MiB"]
    ));
    // Redo (60/s of 6 KiB, redo size ÷ redo writes) comes out of the
    // single-block writes: 420 − 35 − 60.
    let redo = c(ClassKind::RedoWrite);
    assert_eq!(
        (redo.awr_rate_per_s, redo.size_bytes),
        (ps("redo writes"), 6144)
    );
    assert_eq!(
        c(ClassKind::RandomWrite).awr_rate_per_s,
        420.0 - 35.0 - 60.0
    );
    let mw = c(ClassKind::MultiblockWrite);
    assert_eq!(
        (mw.awr_rate_per_s, mw.size_bytes),
        (ps("physical write total multi block"), 64 * 1024)
    );
}
