//! Figures as the arithmetic prints them: rates, sizes, MiB per second.

use cairn_kit_report::units::grouped;

pub(super) const MIB: f64 = 1024.0 * 1024.0;

/// A figure as printed in the arithmetic: whole numbers without decimals.
pub(super) fn num_text(v: f64) -> String {
    grouped(v, if v.fract() == 0.0 { 0 } else { 1 })
}

pub(super) fn rate_text(v: f64) -> String {
    format!("{}/s", grouped(v, 1))
}

pub(super) fn mib_text(bytes_per_s: f64) -> String {
    format!("{} MiB/s", grouped(bytes_per_s / MIB, 1))
}

pub(super) fn size_text(bytes: f64) -> String {
    let kib = bytes / 1024.0;
    if bytes >= MIB && bytes % MIB == 0.0 {
        format!("{} B ({} MiB)", grouped(bytes, 0), grouped(bytes / MIB, 0))
    } else if (kib - kib.round()).abs() < 0.05 {
        format!("{} B ({} KiB)", grouped(bytes, 0), grouped(kib, 0))
    } else {
        format!("{} B ({} KiB)", grouped(bytes, 0), grouped(kib, 1))
    }
}

pub(super) fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}
