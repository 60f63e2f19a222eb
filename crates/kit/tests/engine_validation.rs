//! Data validation end to end: what was written reads back checked and
//! clean on a real file — within one run and across the runs of a bench —
//! and a block corrupted on its way back is reported with its lba and what is
//! wrong with it.

#![allow(clippy::unwrap_used)]

mod engine_support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cairn_io::{
    Completion, DeviceId, EngineStats, Geometry, IoEngine, IoError, Op, Request, SubmitError,
};
use cairn_io_sim::SimEngine;
use cairn_kit::engine::EngineMaker;
use cairn_kit::model::{Arrival, Plan, Rate, Seek, XferSize};
use engine_support::*;

const UNIT: u64 = 8 * KIB;

/// One second of validated 8 KiB random I/O, half reads, at threads=4.
fn mixed_plan(lun: &Path, size_bytes: Option<u64>) -> Plan {
    plan(
        vec![sd("sd1", lun, size_bytes, 4)],
        vec![wd(
            "w",
            &["sd1"],
            50.0,
            XferSize::Fixed(UNIT),
            Seek::Random(100.0),
        )],
        vec![run(
            "mixed",
            &["w"],
            Rate::Max,
            Duration::from_secs(1),
            Arrival::Exponential,
        )],
        true,
    )
}

#[test]
fn a_mixed_run_with_validation_on_a_file_checks_what_it_wrote() {
    let _serial = serial();
    let dir = scratch();
    let lun = dir.path().join("validate.dat");
    // 2 MiB: 256 units of 8 KiB, so reads soon land on written blocks.
    let plan = mixed_plan(&lun, Some(2 * MIB));
    let result = open_and_bench(&plan, default_engine());
    let r = &result.runs[0];
    println!(
        "{} — validation: {} units written, {} checked",
        describe(r),
        r.validation.units_written,
        r.validation.units_checked
    );
    assert!(r.validation.enabled);
    assert_eq!(
        r.validation.errors,
        vec![],
        "clean storage reads back clean"
    );
    assert_eq!(r.errors.count, 0, "{:?}", r.errors.first);
    assert!(r.validation.units_written > 0);
    assert!(
        r.validation.units_checked > 0,
        "reads of written blocks were checked"
    );
    assert_eq!(r.ended_early, None);
}

#[test]
fn blocks_written_in_one_run_are_checked_by_the_reads_of_the_next() {
    let _serial = serial();
    let dir = scratch();
    let lun = dir.path().join("validate2.dat");
    // rd=fill writes the whole sd once (seekpct=eof); rd=check only reads.
    let sds = vec![sd("sd1", &lun, Some(MIB), 4)];
    let wds = vec![
        wd("fill", &["sd1"], 0.0, XferSize::Fixed(UNIT), Seek::Eof),
        wd(
            "check",
            &["sd1"],
            100.0,
            XferSize::Fixed(UNIT),
            Seek::Random(100.0),
        ),
    ];
    let runs = vec![
        run(
            "fill",
            &["fill"],
            Rate::Max,
            Duration::from_secs(5),
            Arrival::Exponential,
        ),
        run(
            "check",
            &["check"],
            Rate::Max,
            Duration::from_secs(1),
            Arrival::Exponential,
        ),
    ];
    let result = open_and_bench(&plan(sds, wds, runs, true), default_engine());
    for r in &result.runs {
        println!(
            "{} — validation: {} units written, {} checked",
            describe(r),
            r.validation.units_written,
            r.validation.units_checked
        );
    }
    let (fill, check) = (&result.runs[0], &result.runs[1]);
    assert_eq!(
        fill.validation.units_written,
        MIB / UNIT,
        "one pass over 128 units"
    );
    assert!(fill
        .ended_early
        .as_deref()
        .unwrap_or("")
        .contains("end of its range"));
    // That is how an eof run ends, not a run cut short.
    assert_eq!(fill.cut_short(), None);
    assert_eq!(check.totals.all.write.ios, 0);
    assert!(check.totals.all.read.ios > 0);
    assert_eq!(
        check.validation.units_checked, check.totals.all.read.ios,
        "every read of the check run covers one unit the fill run wrote: each is checked"
    );
    assert_eq!(check.validation.errors, vec![]);
}

/// An engine that hands back a corrupted copy of one unit: every read
/// covering `lba` after that unit has been written returns it with one data
/// byte flipped (past the validation header), as a disk with bit rot on its
/// read path would.
struct CorruptOnRead<E> {
    inner: E,
    lba: u64,
    written: bool,
    /// Tags of reads in flight that cover the unit, with their offsets.
    reads: HashMap<u64, u64>,
}

impl<E: IoEngine> IoEngine for CorruptOnRead<E> {
    fn name(&self) -> &'static str {
        "sim-corrupt-on-read"
    }
    fn geometry(&self, device: DeviceId) -> Option<&Geometry> {
        self.inner.geometry(device)
    }
    fn submit(&mut self, request: Request) -> Result<(), SubmitError> {
        let at = self.lba * UNIT;
        let (offset, len) = request.op.range();
        if offset <= at && at < offset + len {
            match &request.op {
                Op::Write { .. } => self.written = true,
                Op::Read { .. } if self.written => {
                    self.reads.insert(request.tag, offset);
                }
                _ => {}
            }
        }
        self.inner.submit(request)
    }
    fn wait(&mut self, min: usize) -> Result<(), IoError> {
        self.inner.wait(min)
    }
    fn set_io_timeout(&mut self, timeout: Option<std::time::Duration>) {
        self.inner.set_io_timeout(timeout);
    }
    fn pop_completion(&mut self) -> Option<Completion> {
        let mut c = self.inner.pop_completion()?;
        if let Some(offset) = self.reads.remove(&c.tag) {
            if let Some(buf) = &mut c.buf {
                let i = (self.lba * UNIT - offset) as usize + 100;
                buf[i] ^= 0x40;
            }
        }
        Some(c)
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
    fn depth_max(&self) -> usize {
        self.inner.depth_max()
    }
    fn stats(&self) -> EngineStats {
        self.inner.stats()
    }
}

#[test]
fn a_block_corrupted_on_the_read_path_is_reported_with_its_lba() {
    let _serial = serial();
    const BAD_LBA: u64 = 37;
    let dir = scratch();
    // The real file gives the geometry; the I/O goes to the simulator.
    let lun = filled_file(&dir.path().join("corrupt.dat"), MIB);
    let plan = mixed_plan(&lun, None);
    let engine = EngineMaker::Custom(Arc::new(|geometries: &[Geometry]| {
        let mut sim = SimEngine::new(11, 64);
        for g in geometries {
            sim.add_disk(g.clone());
        }
        Box::new(CorruptOnRead {
            inner: sim,
            lba: BAD_LBA,
            written: false,
            reads: HashMap::new(),
        }) as Box<dyn IoEngine>
    }));
    let result = open_and_bench(&plan, engine);
    let r = &result.runs[0];
    println!("{}", describe(r));
    let errors = &r.validation.errors;
    assert!(!errors.is_empty(), "the corrupted unit was not reported");
    println!("first: {:?}", errors[0]);
    for e in errors {
        assert_eq!(
            (e.sd.as_str(), e.lba, e.unit_bytes),
            ("sd1", BAD_LBA, UNIT),
            "{e:?}"
        );
        assert_eq!(e.offset_bytes, BAD_LBA * UNIT);
        assert_eq!(e.lun, lun.display().to_string());
        assert!(e.problem.contains("bad checksum"), "{e:?}");
    }
    // Every other unit read back clean.
    assert!(r.validation.units_checked > errors.len() as u64 * 10);
    // data_errors=50 (the default) stops the bench, and says so.
    if errors.len() >= 50 {
        assert!(
            r.ended_early
                .as_deref()
                .unwrap_or("")
                .contains("data_errors=50"),
            "{:?}",
            r.ended_early
        );
    }
}
