//! The read classes: single-block random reads and multiblock sequential reads.

use cairn_kit_report::units::grouped;

use super::class::{bound_multiblock, class, missing_note, xfer_bytes};
use super::derivation::{
    ClassKind, IoClass, Stated, DEFAULT_MULTIBLOCK_READ_MAX_BYTES, XFER_MAX_BYTES,
};
use super::figures::{mib_text, num_text, rate_text, size_text};
use super::lookup::{fig_text, pick, Fig, Lookup, READ_BYTES, READ_MULTI, READ_REQUESTS};

/// The read classes into `classes`; the read totals the report states.
pub(super) fn read_classes(lk: &mut Lookup<'_>, block: u64, classes: &mut Vec<IoClass>) -> Stated {
    let r = lk.stat(READ_REQUESTS);
    let rm = lk.stat(READ_MULTI);
    let rb = lk.stat(READ_BYTES);
    let stated = Stated {
        read_iops: r.as_ref().map(|f| f.per_s),
        read_bytes_per_s: rb.as_ref().map(|f| f.per_s),
        ..Stated::default()
    };
    let (Some(r), Some(rm)) = (r, rm.clone()) else {
        let need = [
            (READ_REQUESTS, stated.read_iops.is_some()),
            (READ_MULTI, rm.is_some()),
        ];
        missing_note(&mut lk.notes, ClassKind::RandomRead, &need);
        missing_note(&mut lk.notes, ClassKind::SequentialRead, &need);
        return stated;
    };
    random_reads(lk, block, &r, &rm, classes);
    if rm.per_s <= 0.0 {
        lk.notes.push(format!(
            "{}: the report states none: left out",
            ClassKind::SequentialRead.describe()
        ));
        return stated;
    }
    let Some(rb) = rb else {
        missing_note(
            &mut lk.notes,
            ClassKind::SequentialRead,
            &[(READ_BYTES, false)],
        );
        return stated;
    };
    classes.push(sequential_reads(lk, block, &r, &rm, &rb));
    stated
}

/// The single-block reads: all read requests less the multiblock ones
/// (`r` and `rm`), one block each; a note when none are left.
fn random_reads(lk: &mut Lookup<'_>, block: u64, r: &Fig, rm: &Fig, classes: &mut Vec<IoClass>) {
    let b = block as f64;
    let single = r.per_s - rm.per_s;
    if single > 0.0 {
        let arithmetic = vec![
            fig_text(r),
            fig_text(rm),
            format!(
                "single-block reads = {} − {} = {}",
                grouped(r.per_s, 1),
                grouped(rm.per_s, 1),
                rate_text(single)
            ),
            format!("size = one block = {}", size_text(b)),
        ];
        classes.push(class(
            ClassKind::RandomRead,
            single,
            single * b,
            b,
            block,
            arithmetic,
            &mut lk.notes,
        ));
    } else {
        lk.notes.push(format!(
            "{}: {} − {} leaves none: left out",
            ClassKind::RandomRead.describe(),
            rate_text(r.per_s),
            rate_text(rm.per_s)
        ));
    }
}

/// The multiblock reads (`rm`), their size the read bytes (`rb`) less the
/// single-block reads' (`r` − `rm` blocks), per multiblock read.
fn sequential_reads(lk: &mut Lookup<'_>, block: u64, r: &Fig, rm: &Fig, rb: &Fig) -> IoClass {
    let b = block as f64;
    let (v, from) = pick(&[r, rm, rb]);
    let (rt, rmt, rbt) = (v[0], v[1], v[2]);
    let single_t = rt - rmt;
    let measured = (rbt - single_t * b) / rmt;
    let (cap, cap_text) = multiblock_read_cap(lk, block);
    let mut arithmetic = vec![
        fig_text(rm),
        fig_text(rb),
        format!(
            "size ({from}) = ({} {} − {} single-block × {} B) ÷ {} multiblock = {}",
            rb.name,
            num_text(rbt),
            num_text(single_t),
            grouped(b, 0),
            num_text(rmt),
            size_text(measured)
        ),
    ];
    let (size, bound) = bound_multiblock(measured, block, cap, &cap_text);
    arithmetic.extend(bound);
    let bytes_per_s = measured.max(0.0) * rm.per_s;
    arithmetic.push(format!(
        "bandwidth = {} × {} = {}",
        rate_text(rm.per_s),
        size_text(measured.max(0.0)),
        mib_text(bytes_per_s)
    ));
    class(
        ClassKind::SequentialRead,
        rm.per_s,
        bytes_per_s,
        measured,
        xfer_bytes(size),
        arithmetic,
        &mut lk.notes,
    )
}

/// The largest multiblock read, and how it is known: the
/// `db_file_multiblock_read_count` parameter in blocks, else 1 MiB (said in
/// a note).
fn multiblock_read_cap(lk: &mut Lookup<'_>, block: u64) -> (u64, String) {
    let b = block as f64;
    let mbrc = lk.parameter("db_file_multiblock_read_count");
    match mbrc {
        Some(n) if n >= 1.0 && n * b <= XFER_MAX_BYTES as f64 => (
            (n as u64) * block,
            format!("db_file_multiblock_read_count {} × {} B", n as u64, block),
        ),
        _ => {
            lk.notes.push(format!(
                "{}: the report lists no db_file_multiblock_read_count: the largest multiblock read is assumed to be {}",
                ClassKind::SequentialRead.describe(),
                size_text(DEFAULT_MULTIBLOCK_READ_MAX_BYTES as f64)
            ));
            (
                DEFAULT_MULTIBLOCK_READ_MAX_BYTES,
                "assumed 1 MiB: no db_file_multiblock_read_count in the report".to_string(),
            )
        }
    }
}
