//! The "To POC" method: from a parsed AWR or Statspack report, the I/O classes
//! the database drove — single-block random reads, multiblock sequential
//! reads, single-block random writes, multiblock writes and redo writes — each
//! with its size and rate, and the vdbench parameter file that replays them.
//!
//! The post this automates ("flashdba" in docs/sources.md, "Taking Charge")
//! did the arithmetic by hand and showed it, so the reader could check it; each
//! [`IoClass`] keeps the same arithmetic as text lines for the same reason, and
//! the parameter file carries them as comments. The facts behind each step are
//! in `docs/awr-formats.md` §6; the bank fragment's split is explained in
//! `docs/awr-replay.md`.
//!
//! The derivation never guesses silently: every assumption (a block size not in
//! the report, a redo write size not in it, a multiblock read cap not in it) and
//! every class left out for want of a statistic is a line in
//! [`Derivation::notes`].

mod class;
mod derivation;
mod figures;
mod lookup;
mod reads;
mod vdbench;
mod writes;

pub use derivation::{
    parse_block_size, Basis, ClassKind, Derivation, DeriveError, DeriveOptions, IoClass, Stated,
    AGREE_PCT, DEFAULT_BLOCK_SIZE_BYTES, DEFAULT_MULTIBLOCK_READ_MAX_BYTES, RATE_MAX_PER_S,
    RATE_MIN_PER_S, XFER_ALIGN_BYTES, XFER_MAX_BYTES,
};
pub use vdbench::vdbench_text;

pub(crate) use lookup::{find_statistic, norm};

use crate::model::AwrReport;

use derivation::valid_block_size;
use figures::{one_line, rate_text, size_text};
use lookup::{
    block_size, elapsed_s, Lookup, READ_MULTI, READ_REQUESTS, REDO_WRITES, WRITE_MULTI,
    WRITE_REQUESTS,
};
use reads::read_classes;
use writes::write_classes;

/// Derive the I/O classes of `report` (see the module documentation).
pub fn derive(report: &AwrReport, opts: &DeriveOptions) -> Result<Derivation, DeriveError> {
    check_options(opts)?;
    let mut lk = Lookup {
        report,
        elapsed_s: elapsed_s(report),
        notes: Vec::new(),
    };
    let (block, block_from) = block_size(&mut lk, opts);
    if block_from.starts_with("assumed") {
        lk.notes.push(format!(
            "block size {} {block_from}; give --block-size if the database uses another",
            size_text(block as f64)
        ));
    }
    let mut classes = Vec::new();
    let stated = read_classes(&mut lk, block, &mut classes);
    let stated = write_classes(&mut lk, block, opts, &mut classes, stated);
    if report.header.container.is_some() && stated.write_iops.is_none() {
        lk.notes.push(
            "a PDB-level report has no write statistics: take CDB-level snapshots to derive the writes"
                .to_string(),
        );
    }
    let mut kept = Vec::new();
    for mut c in classes {
        let awr = c.awr_rate_per_s;
        c.rate_per_s = awr * opts.scale;
        if !(awr.is_finite() && awr <= RATE_MAX_PER_S) {
            lk.notes.push(format!(
                "{}: {} is not a plausible rate: class left out",
                c.kind.describe(),
                rate_text(awr)
            ));
        } else if !(RATE_MIN_PER_S..=RATE_MAX_PER_S).contains(&c.rate_per_s) {
            lk.notes.push(format!(
                "{}: {} scaled by {} is {}, under {RATE_MIN_PER_S}/s or over {RATE_MAX_PER_S}/s: class left out",
                c.kind.describe(),
                rate_text(awr),
                opts.scale,
                rate_text(c.rate_per_s)
            ));
        } else {
            kept.push(c);
        }
    }
    // Together the classes run as one rd, whose rate is their sum: the
    // fastest are left out until it is one a schedule can time.
    kept.sort_by(|a, b| b.rate_per_s.total_cmp(&a.rate_per_s));
    while kept.iter().map(|c| c.rate_per_s).sum::<f64>() > RATE_MAX_PER_S {
        let c = kept.remove(0);
        lk.notes.push(format!(
            "{}: {} with the other classes is over {RATE_MAX_PER_S}/s in all: class left out",
            c.kind.describe(),
            rate_text(c.rate_per_s)
        ));
    }
    kept.sort_by_key(|c| c.kind);
    if kept.is_empty() {
        let missing: Vec<&str> = [
            READ_REQUESTS,
            READ_MULTI,
            WRITE_REQUESTS,
            WRITE_MULTI,
            REDO_WRITES,
        ]
        .into_iter()
        .filter(|n| matches!(find_statistic(report, n), Ok(None)))
        .collect();
        let missing = if missing.is_empty() {
            format!(
                "the I/O statistics are there but none gives a usable rate ({})",
                lk.notes.join("; ")
            )
        } else {
            format!("the report has no {}", missing.join(", no "))
        };
        return Err(DeriveError::NothingUsable {
            report: if report.source.is_empty() {
                "the report".to_string()
            } else {
                report.source.clone()
            },
            missing: one_line(&missing),
        });
    }
    Ok(Derivation {
        source: report.source.clone(),
        block_size_bytes: block,
        block_size_from: block_from,
        scale: opts.scale,
        elapsed_s: lk.elapsed_s,
        classes: kept,
        stated,
        notes: lk.notes,
        run_elapsed_s: opts.elapsed_s,
        run_interval_s: opts.interval_s,
        run_warmup_s: opts.warmup_s,
    })
}

fn check_options(opts: &DeriveOptions) -> Result<(), DeriveError> {
    let bad = |m: String| Err(DeriveError::BadOption(m));
    if !(opts.scale.is_finite() && opts.scale > 0.0) {
        return bad(format!(
            "--scale {} is not a factor; expected a number above 0, such as 0.01",
            opts.scale
        ));
    }
    if let Some(b) = opts.block_size_bytes {
        if !valid_block_size(b) {
            return bad(format!(
                "block size {b} B is not one Oracle has; expected a multiple of 512 from 512 to 65536"
            ));
        }
    }
    if let Some(b) = opts.redo_write_bytes {
        if b == 0 || b > XFER_MAX_BYTES {
            return bad(format!(
                "redo write size {b} B; expected from 1 byte to {XFER_MAX_BYTES}"
            ));
        }
    }
    if opts.elapsed_s == 0 || opts.interval_s == 0 || opts.interval_s > opts.elapsed_s {
        return bad(format!(
            "run of {} s reported every {} s; expected a duration of at least 1 s and an interval from 1 s up to it",
            opts.elapsed_s, opts.interval_s
        ));
    }
    if opts.warmup_s >= opts.elapsed_s {
        return bad(format!(
            "warm-up of {} s in a run of {} s; expected a warm-up shorter than the run",
            opts.warmup_s, opts.elapsed_s
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::class::xfer_bytes;
    use super::vdbench::{iorate_text, xfersize_text};
    use super::{parse_block_size, XFER_MAX_BYTES};

    #[test]
    fn transfer_sizes_are_multiples_of_512_within_bounds() {
        assert_eq!(xfer_bytes(961_431.0), 961_536);
        assert_eq!(xfer_bytes(795_581.0), 795_648);
        assert_eq!(xfer_bytes(10.0), 512);
        assert_eq!(xfer_bytes(f64::NAN), 512);
        assert_eq!(xfer_bytes(1e30), XFER_MAX_BYTES);
        assert_eq!(xfersize_text(961_536), "939k");
        assert_eq!(xfersize_text(1024 * 1024), "1m");
        assert_eq!(xfersize_text(1536), "1536");
    }

    #[test]
    fn rates_print_without_trailing_zeros() {
        assert_eq!(iorate_text(4390.9), "4390.9");
        assert_eq!(iorate_text(50.0), "50");
        assert_eq!(iorate_text(0.474), "0.474");
    }

    #[test]
    fn block_sizes_parse_like_the_command_line_gives_them() {
        assert_eq!(parse_block_size("8k"), Ok(8192));
        assert_eq!(parse_block_size("16384"), Ok(16384));
        assert!(parse_block_size("3000").is_err());
        assert!(parse_block_size("1m").is_err());
        assert!(parse_block_size("eight").is_err());
    }
}
