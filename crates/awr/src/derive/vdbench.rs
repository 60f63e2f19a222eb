//! The vdbench parameter file that replays a derivation, its arithmetic in
//! comments.

use std::fmt::Write as _;

use cairn_kit_report::units::grouped;

use super::derivation::{Basis, Derivation, IoClass};
use super::figures::{mib_text, one_line, rate_text, size_text};
use super::lookup::{READ_BYTES, READ_REQUESTS, WRITE_BYTES, WRITE_REQUESTS};

/// A rate for a vdbench `iorate=`: up to three decimals, no trailing zeros.
pub(super) fn iorate_text(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// A size for a vdbench `xfersize=`: `16k` when whole KiB, else bytes.
pub(super) fn xfersize_text(bytes: u64) -> String {
    if bytes.is_multiple_of(1024 * 1024) {
        format!("{}m", bytes / (1024 * 1024))
    } else if bytes.is_multiple_of(1024) {
        format!("{}k", bytes / 1024)
    } else {
        bytes.to_string()
    }
}

/// The totals check line: the classes' sum against what the report states.
fn check_line(
    what: &str,
    parts: &[(String, f64)],
    stated: Option<(f64, &str)>,
    fmt: fn(f64) -> String,
) -> String {
    let sum: f64 = parts.iter().map(|(_, v)| v).sum();
    let terms: Vec<String> = parts
        .iter()
        .map(|(name, v)| format!("{} {name}", fmt(*v)))
        .collect();
    let mut line = format!("{what}: {} = {}", terms.join(" + "), fmt(sum));
    match stated {
        Some((s, stat)) if s > 0.0 => {
            let _ = write!(
                line,
                " ≈ the {} the report states ({stat}): {}%",
                fmt(s),
                cairn_kit_report::units::signed(100.0 * (sum / s - 1.0), 1)
            );
        }
        _ => line.push_str(" (the report states no total to check against)"),
    }
    line
}

/// A vdbench parameter file replaying `d`: the caller's sd lines `sds` (which
/// must define sds named `sd…`: the wds use `sd=sd*`; they may use
/// `$variables` the caller then passes to the parser), then one wd per class
/// at its own scaled `iorate=` and priority, and one rd running them together
/// at their sum. Comments carry the arithmetic and the totals check, so the
/// engineer can check it as the post does.
pub fn vdbench_text(d: &Derivation, sds: &str) -> String {
    let mut text = heading(d);
    text.push_str(sds);
    if !sds.is_empty() && !sds.ends_with('\n') {
        text.push('\n');
    }
    let mut rates = Vec::new();
    for cl in &d.classes {
        rates.push(write_wd(&mut text, d, cl));
    }
    write_totals_check(&mut text, d);
    let total: f64 = rates.iter().sum();
    let wds: Vec<&str> = d.classes.iter().map(|c| c.kind.wd_name()).collect();
    let _ = writeln!(
        text,
        "* The rd's iorate is the sum of the wds' ({}).",
        rates
            .iter()
            .map(|r| iorate_text(*r))
            .collect::<Vec<_>>()
            .join(" + ")
    );
    let _ = writeln!(
        text,
        "rd=rd_awr_replay,wd=({}),iorate={},elapsed={},interval={},warmup={}",
        wds.join(","),
        iorate_text(total),
        d.run_elapsed_s,
        d.run_interval_s,
        d.run_warmup_s
    );
    text
}

/// The comments that open the file: where the classes come from, the block
/// size, the report's elapsed time, the scale and the notes.
fn heading(d: &Derivation) -> String {
    let mut out = String::new();
    let mut c = |line: &str| {
        for l in line.lines() {
            out.push_str("* ");
            out.push_str(l);
            out.push('\n');
        }
        if line.is_empty() {
            out.push_str("*\n");
        }
    };
    c(&format!(
        "Cairn AWR workload: the I/O classes of {}, derived by the \"To POC\" method",
        if d.source.is_empty() {
            "the report"
        } else {
            &d.source
        }
    ));
    c("(docs/awr-replay.md); each class's arithmetic is under its wd.");
    c(&format!(
        "Block size {}: {}.",
        size_text(d.block_size_bytes as f64),
        d.block_size_from
    ));
    if let Some(e) = d.elapsed_s {
        c(&format!("Report elapsed: {} s.", grouped(e, 1)));
    }
    if d.scale != 1.0 {
        c(&format!(
            "Rates are scaled by {} (--scale): the AWR's rates are in the comments.",
            d.scale
        ));
    }
    if !d.notes.is_empty() {
        c("");
        c("Notes:");
        for n in &d.notes {
            c(&format!("  {}", one_line(n)));
        }
    }
    c("");
    out
}

/// One class's wd line under its arithmetic, onto `text`; the rate its
/// `iorate=` gives, as the rd adds it up.
fn write_wd(text: &mut String, d: &Derivation, cl: &IoClass) -> f64 {
    let rate = iorate_text(cl.rate_per_s);
    let iorate = rate.parse::<f64>().unwrap_or(cl.rate_per_s);
    text.push_str("*\n");
    let _ = writeln!(
        text,
        "* {}: {} at {} ({}, {})",
        cl.kind.describe(),
        rate_text(cl.awr_rate_per_s),
        size_text(cl.size_bytes as f64),
        mib_text(cl.awr_bytes_per_s()),
        match cl.basis {
            Basis::Iops => "rate from the stated IOPS",
            Basis::Bandwidth => "rate from the stated bandwidth, the higher",
        }
    );
    for a in &cl.arithmetic {
        let _ = writeln!(text, "*   {}", one_line(a));
    }
    if d.scale != 1.0 {
        let _ = writeln!(
            text,
            "*   scaled: {} × {} = {}",
            rate_text(cl.awr_rate_per_s),
            d.scale,
            rate_text(cl.rate_per_s)
        );
    }
    let _ = writeln!(
        text,
        "wd={},sd=sd*,rdpct={},xfersize={},seekpct={},iorate={rate},priority={}",
        cl.kind.wd_name(),
        if cl.kind.is_read() { 100 } else { 0 },
        xfersize_text(cl.size_bytes),
        cl.kind.seekpct(),
        cl.kind.priority()
    );
    iorate
}

/// The totals check comments: the classes' IOPS and bandwidth, reads and
/// writes, against what the report states.
fn write_totals_check(text: &mut String, d: &Derivation) {
    text.push_str("*\n* Totals check (unscaled):\n");
    let part = |reads: bool, f: fn(&IoClass) -> f64| -> Vec<(String, f64)> {
        d.classes
            .iter()
            .filter(|c| c.kind.is_read() == reads)
            .map(|c| (c.kind.describe().to_string(), f(c)))
            .collect()
    };
    let checks = [
        check_line(
            "read IOPS",
            &part(true, |c| c.awr_rate_per_s),
            d.stated.read_iops.map(|v| (v, READ_REQUESTS)),
            rate_text,
        ),
        check_line(
            "read bandwidth",
            &part(true, IoClass::awr_bytes_per_s),
            d.stated.read_bytes_per_s.map(|v| (v, READ_BYTES)),
            mib_text,
        ),
        check_line(
            "write IOPS",
            &part(false, |c| c.awr_rate_per_s),
            d.stated.write_iops.map(|v| (v, WRITE_REQUESTS)),
            rate_text,
        ),
        check_line(
            "write bandwidth",
            &part(false, IoClass::awr_bytes_per_s),
            d.stated.write_bytes_per_s.map(|v| (v, WRITE_BYTES)),
            mib_text,
        ),
    ];
    for line in checks {
        let _ = writeln!(text, "*   {line}");
    }
}
