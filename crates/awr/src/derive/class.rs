//! One I/O class built from its stated rates and size: the basis of its rate,
//! the bounds of a multiblock size, and the lines of its arithmetic.

use cairn_kit_report::units::grouped;

use super::derivation::{Basis, ClassKind, IoClass, AGREE_PCT, XFER_ALIGN_BYTES, XFER_MAX_BYTES};
use super::figures::{mib_text, rate_text, size_text};

/// A transfer size Cairn's vdbench accepts: the nearest multiple of 512, at
/// least 512 and at most [`XFER_MAX_BYTES`].
pub(super) fn xfer_bytes(measured: f64) -> u64 {
    let units = (measured / XFER_ALIGN_BYTES as f64).round().max(1.0);
    // `as` saturates, and the cap below bounds it.
    ((units as u64).saturating_mul(XFER_ALIGN_BYTES)).min(XFER_MAX_BYTES)
}

/// Build a class: its rate is the stated IOPS, unless the stated bandwidth in
/// transfers of `size_bytes` needs more (the post's "use the higher of [IOPS
/// listed, Bandwidth listed]"), which is then said in a note.
pub(super) fn class(
    kind: ClassKind,
    stated_iops: f64,
    stated_bytes_per_s: f64,
    measured_size_bytes: f64,
    size_bytes: u64,
    mut arithmetic: Vec<String>,
    notes: &mut Vec<String>,
) -> IoClass {
    let by_bandwidth = stated_bytes_per_s / size_bytes as f64;
    let (basis, rate) = if by_bandwidth > stated_iops * (1.0 + AGREE_PCT / 100.0) {
        (Basis::Bandwidth, by_bandwidth)
    } else {
        (Basis::Iops, stated_iops)
    };
    if size_bytes as f64 != measured_size_bytes {
        arithmetic.push(format!("transfer size {}", size_text(size_bytes as f64)));
    }
    let by_iops_bw = stated_iops * size_bytes as f64;
    // by_bandwidth / stated_iops is also stated bandwidth / (IOPS × size).
    if (by_bandwidth - stated_iops).abs() > stated_iops * AGREE_PCT / 100.0 {
        let line = format!(
            "{}: IOPS and bandwidth disagree at {}: {} × {} = {} against the stated {}, or {} ÷ {} = {}; using the higher of the two, {} (the post's rule)",
            kind.describe(),
            size_text(size_bytes as f64),
            rate_text(stated_iops),
            grouped(size_bytes as f64, 0),
            mib_text(by_iops_bw),
            mib_text(stated_bytes_per_s),
            mib_text(stated_bytes_per_s),
            size_text(size_bytes as f64),
            rate_text(by_bandwidth),
            match basis {
                Basis::Iops => format!("{} (IOPS)", rate_text(rate)),
                Basis::Bandwidth => format!("{} (bandwidth)", rate_text(rate)),
            }
        );
        arithmetic.push(line.clone());
        notes.push(line);
    }
    arithmetic.push(format!(
        "rate {} × {} B = {}",
        rate_text(rate),
        grouped(size_bytes as f64, 0),
        mib_text(rate * size_bytes as f64)
    ));
    IoClass {
        kind,
        size_bytes,
        measured_size_bytes,
        stated_iops,
        stated_bytes_per_s,
        basis,
        awr_rate_per_s: rate,
        rate_per_s: rate,
        arithmetic,
    }
}

/// Multiblock size bounds: a multiblock request is at least two blocks, and
/// at most `cap`. Returns the size to use and a line when a bound applied.
pub(super) fn bound_multiblock(
    measured: f64,
    block: u64,
    cap: u64,
    cap_text: &str,
) -> (f64, Option<String>) {
    let lo = (2 * block).min(cap) as f64;
    if measured.is_nan() || measured < lo {
        (
            lo,
            Some(format!(
                "{} is under two blocks, the least a multiblock request moves: using {}",
                size_text(measured.max(0.0)),
                size_text(lo)
            )),
        )
    } else if measured > cap as f64 {
        (
            cap as f64,
            Some(format!(
                "{} is over the largest multiblock request ({cap_text}): capped at {}",
                size_text(measured),
                size_text(cap as f64)
            )),
        )
    } else {
        (measured, None)
    }
}

pub(super) fn missing_note(notes: &mut Vec<String>, kind: ClassKind, need: &[(&str, bool)]) {
    let absent: Vec<&str> = need.iter().filter(|(_, ok)| !ok).map(|(n, _)| *n).collect();
    notes.push(format!(
        "{}: left out, the report has no usable {}",
        kind.describe(),
        absent.join(", no ")
    ));
}
