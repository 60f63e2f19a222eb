//! The write classes: redo writes, carved out of the write totals, then
//! single-block random writes and multiblock writes.

use cairn_kit_report::units::grouped;

use crate::profile::Figure;

use super::class::{bound_multiblock, class, missing_note, xfer_bytes};
use super::derivation::{ClassKind, DeriveOptions, IoClass, Stated, XFER_MAX_BYTES};
use super::figures::{mib_text, num_text, rate_text, size_text, MIB};
use super::lookup::{
    fig_text, norm, pick, usable, Fig, Lookup, REDO_SIZE, REDO_WRITES, WRITE_BYTES, WRITE_MULTI,
    WRITE_REQUESTS,
};

/// The redo write size in bytes and how it was found.
fn redo_size(
    lk: &mut Lookup<'_>,
    rw: &Fig,
    block: u64,
    opts: &DeriveOptions,
) -> (f64, Vec<String>) {
    if let Some(b) = opts.redo_write_bytes {
        return (
            b as f64,
            vec![format!("size = {} (given)", size_text(b as f64))],
        );
    }
    if let Some(rs) = lk.stat(REDO_SIZE) {
        let (v, from) = pick(&[&rs, rw]);
        if v[1] > 0.0 {
            let s = v[0] / v[1];
            return (
                s,
                vec![
                    fig_text(&rs),
                    format!(
                        "size ({from}) = {} {} ÷ {} {} = {}",
                        rs.name,
                        num_text(v[0]),
                        rw.name,
                        num_text(v[1]),
                        size_text(s)
                    ),
                ],
            );
        }
    }
    // The Load Profile's redo per second, when the statistic is cut out.
    let profile_redo = lk
        .report
        .load_profile
        .iter()
        .find(|l| {
            Figure::from_label(l.label.trim().trim_end_matches(':')) == Some(Figure::RedoSize)
        })
        .and_then(|l| usable(l.per_second));
    if let Some(redo_per_s) = profile_redo.filter(|_| rw.per_s > 0.0) {
        let s = redo_per_s / rw.per_s;
        return (
            s,
            vec![format!(
                "size = Load Profile Redo size {} B/s ÷ {} {} = {}",
                grouped(redo_per_s, 1),
                rw.name,
                rate_text(rw.per_s),
                size_text(s)
            )],
        );
    }
    // 11.2.0.4+: the IO Profile's `Redo (MB)` and `Redo Requests` rows, in
    // their write column (the read column is the archiver and recovery
    // reading the logs back, in larger pieces).
    let io = |label: &str| {
        lk.report
            .io_profile
            .iter()
            .find(|l| norm(l.label.trim_end_matches(':')) == label)
            .and_then(|l| usable(l.write_per_s))
    };
    if let (Some(mb), Some(req)) = (io("redo (mb)"), io("redo requests")) {
        if req > 0.0 {
            let s = mb * MIB / req;
            return (
                s,
                vec![format!(
                    "size = IO Profile Redo (MB) written {} MB/s × 1,048,576 ÷ Redo Requests written {} = {}",
                    grouped(mb, 1),
                    rate_text(req),
                    size_text(s)
                )],
            );
        }
    }
    let b = block as f64;
    lk.notes.push(format!(
        "{}: the report has no redo size: each redo write is assumed to be one block, {}, which leaves the other write classes as the statistics give them; give --redo-write-size if it is known",
        ClassKind::RedoWrite.describe(),
        size_text(b)
    ));
    (
        b,
        vec![format!(
            "size = one block, {} (assumed: no redo size in the report)",
            size_text(b)
        )],
    )
}

/// The redo writes of the report: their rate (`rw`), size and the
/// arithmetic of the size.
struct Redo {
    rw: Fig,
    size_bytes: f64,
    lines: Vec<String>,
}

/// How the redo writes (if any) are carved out of the write totals:
/// requests per second taken from the single-block writes, and from the
/// multiblock ones.
struct Carved<'a> {
    redo: Option<&'a Redo>,
    from_single: f64,
    from_multi: f64,
}

/// The write classes into `classes`, redo first; `stated` with the write
/// totals the report states.
pub(super) fn write_classes(
    lk: &mut Lookup<'_>,
    block: u64,
    opts: &DeriveOptions,
    classes: &mut Vec<IoClass>,
    mut stated: Stated,
) -> Stated {
    let w = lk.stat(WRITE_REQUESTS);
    let wm = lk.stat(WRITE_MULTI);
    let wb = lk.stat(WRITE_BYTES);
    let rw = lk.stat(REDO_WRITES).filter(|f| f.per_s > 0.0);
    stated.write_iops = w.as_ref().map(|f| f.per_s);
    stated.write_bytes_per_s = wb.as_ref().map(|f| f.per_s);
    stated.redo_writes_per_s = rw.as_ref().map(|f| f.per_s);

    // Redo first: its writes are part of the write totals and are carved out
    // of the other two classes, not added on top.
    let redo = rw.map(|rw| {
        let (size_bytes, lines) = redo_size(lk, &rw, block, opts);
        Redo {
            rw,
            size_bytes,
            lines,
        }
    });
    if redo.is_none() {
        missing_note(&mut lk.notes, ClassKind::RedoWrite, &[(REDO_WRITES, false)]);
    }

    let (Some(w), Some(wm)) = (w, wm.clone()) else {
        let need = [
            (WRITE_REQUESTS, stated.write_iops.is_some()),
            (WRITE_MULTI, wm.is_some()),
        ];
        missing_note(&mut lk.notes, ClassKind::RandomWrite, &need);
        missing_note(&mut lk.notes, ClassKind::MultiblockWrite, &need);
        if let Some(redo) = redo {
            classes.push(redo_alone(lk, redo));
        }
        return stated;
    };
    let Some(carved) = carve_redo(lk, &w, &wm, redo.as_ref()) else {
        return stated;
    };
    random_writes(lk, block, &w, &wm, &carved, classes);
    multiblock_writes(lk, block, &w, &wm, wb, &carved, classes);
    if let Some(redo) = redo {
        classes.push(redo_carved_out(lk, redo));
    }
    stated
}

/// The redo writes of a report with no write totals to take them out of.
fn redo_alone(lk: &mut Lookup<'_>, redo: Redo) -> IoClass {
    let Redo {
        rw,
        size_bytes: s,
        mut lines,
    } = redo;
    lk.notes.push(
        "redo writes: the report has no write totals to take them out of: derived alone"
            .to_string(),
    );
    lines.insert(0, fig_text(&rw));
    let size = xfer_bytes(s);
    class(
        ClassKind::RedoWrite,
        rw.per_s,
        rw.per_s * s,
        s,
        size,
        lines,
        &mut lk.notes,
    )
}

/// The redo writes, once taken out of the other write classes.
fn redo_carved_out(lk: &mut Lookup<'_>, redo: Redo) -> IoClass {
    let Redo {
        rw,
        size_bytes: s,
        mut lines,
    } = redo;
    lines.insert(0, fig_text(&rw));
    lines.insert(
        1,
        "redo writes are counted in physical write total IO requests: taken out of the other write classes above, not added".to_string(),
    );
    class(
        ClassKind::RedoWrite,
        rw.per_s,
        rw.per_s * s,
        s,
        xfer_bytes(s),
        lines,
        &mut lk.notes,
    )
}

/// How many of the redo writes come out of the single-block writes and how
/// many out of the multiblock ones; `None` (with a note) when the write
/// statistics disagree (more multiblock writes than writes).
fn carve_redo<'a>(
    lk: &mut Lookup<'_>,
    w: &Fig,
    wm: &Fig,
    redo: Option<&'a Redo>,
) -> Option<Carved<'a>> {
    let redo_rate = redo.map_or(0.0, |r| r.rw.per_s);
    let single = w.per_s - wm.per_s;
    if single < 0.0 {
        lk.notes.push(format!(
            "writes: {} multiblock exceed {} in all: the write statistics disagree, write classes left out",
            rate_text(wm.per_s),
            rate_text(w.per_s)
        ));
        return None;
    }
    // Redo writes come out of the single-block writes first (LGWR's writes
    // are mostly a few KiB), the rest out of the multiblock ones.
    let from_single = redo_rate.min(single);
    let from_multi = (redo_rate - from_single).min(wm.per_s);
    if redo_rate > from_single + from_multi {
        lk.notes.push(format!(
            "redo writes: {} exceed all {} write requests: only {} taken out",
            rate_text(redo_rate),
            rate_text(w.per_s),
            rate_text(from_single + from_multi)
        ));
    }
    Some(Carved {
        redo,
        from_single,
        from_multi,
    })
}

/// The single-block writes: all write requests less the multiblock ones
/// (`w` and `wm`) and the redo writes carved out of them, one block each.
fn random_writes(
    lk: &mut Lookup<'_>,
    block: u64,
    w: &Fig,
    wm: &Fig,
    carved: &Carved<'_>,
    classes: &mut Vec<IoClass>,
) {
    let b = block as f64;
    let single = w.per_s - wm.per_s;
    let from_single = carved.from_single;
    let random = single - from_single;
    if random > 0.0 {
        let mut arithmetic = vec![
            fig_text(w),
            fig_text(wm),
            format!(
                "single-block writes = {} − {} = {}",
                grouped(w.per_s, 1),
                grouped(wm.per_s, 1),
                rate_text(single)
            ),
        ];
        if from_single > 0.0 {
            arithmetic.push(format!(
                "minus {} redo writes (part of the write totals: taken out, not added) = {}",
                rate_text(from_single),
                rate_text(random)
            ));
        }
        arithmetic.push(format!("size = one block = {}", size_text(b)));
        classes.push(class(
            ClassKind::RandomWrite,
            random,
            random * b,
            b,
            block,
            arithmetic,
            &mut lk.notes,
        ));
    } else {
        lk.notes.push(format!(
            "{}: none left once redo is taken out: left out",
            ClassKind::RandomWrite.describe()
        ));
    }
}

/// The multiblock writes (`wm` of the writes `w`, less the redo carved out
/// of them), their size the write bytes (`wb`) less the single-block writes'
/// and the redo's, per multiblock write.
fn multiblock_writes(
    lk: &mut Lookup<'_>,
    block: u64,
    w: &Fig,
    wm: &Fig,
    wb: Option<Fig>,
    carved: &Carved<'_>,
    classes: &mut Vec<IoClass>,
) {
    let from_multi = carved.from_multi;
    let multi = wm.per_s - from_multi;
    if multi <= 0.0 {
        lk.notes.push(format!(
            "{}: the report states none{}: left out",
            ClassKind::MultiblockWrite.describe(),
            if from_multi > 0.0 {
                " once redo is taken out"
            } else {
                ""
            }
        ));
        return;
    }
    let Some(wb) = wb else {
        missing_note(
            &mut lk.notes,
            ClassKind::MultiblockWrite,
            &[(WRITE_BYTES, false)],
        );
        return;
    };
    let (measured, mut arithmetic) = multiblock_write_size(block, w, wm, &wb, carved);
    if from_multi > 0.0 {
        arithmetic.insert(
            1,
            format!(
                "multiblock writes = {} − {} redo writes (not all fit in the single-block writes) = {}",
                grouped(wm.per_s, 1),
                rate_text(from_multi),
                rate_text(multi)
            ),
        );
    }
    let cap_text = "the largest transfer Cairn runs".to_string();
    let (size, bound) = bound_multiblock(measured, block, XFER_MAX_BYTES, &cap_text);
    arithmetic.extend(bound);
    let bytes_per_s = measured.max(0.0) * multi;
    arithmetic.push(format!(
        "bandwidth = {} × {} = {}",
        rate_text(multi),
        size_text(measured.max(0.0)),
        mib_text(bytes_per_s)
    ));
    classes.push(class(
        ClassKind::MultiblockWrite,
        multi,
        bytes_per_s,
        measured,
        xfer_bytes(size),
        arithmetic,
        &mut lk.notes,
    ));
}

/// The size of a multiblock write, as measured (before bounds), and the
/// lines of its arithmetic: the write bytes less the single-block writes'
/// and the redo's, over the multiblock writes, in totals where every figure
/// has one.
fn multiblock_write_size(
    block: u64,
    w: &Fig,
    wm: &Fig,
    wb: &Fig,
    carved: &Carved<'_>,
) -> (f64, Vec<String>) {
    let b = block as f64;
    let Carved {
        redo,
        from_single,
        from_multi,
    } = *carved;
    let redo_rate = redo.map_or(0.0, |r| r.rw.per_s);
    let redo_size_bytes = redo.map_or(0.0, |r| r.size_bytes);
    // Sizes in totals or per second alike: redo is carved in proportion.
    let (v, from) = match redo {
        Some(r) => pick(&[w, wm, wb, &r.rw]),
        None => {
            let (mut v, from) = pick(&[w, wm, wb]);
            v.push(0.0);
            (v, from)
        }
    };
    let (wt, wmt, wbt, rwt) = (v[0], v[1], v[2], v[3]);
    let share = |x: f64| if redo_rate > 0.0 { x / redo_rate } else { 0.0 };
    let single_t = wt - wmt - share(from_single) * rwt;
    let multi_t = wmt - share(from_multi) * rwt;
    let redo_bytes_t = rwt * redo_size_bytes;
    let measured = (wbt - single_t * b - redo_bytes_t) / multi_t;
    let arithmetic = vec![
        fig_text(wm),
        fig_text(wb),
        format!(
            "size ({from}) = ({} {} − {} single-block × {} B{}) ÷ {} multiblock = {}",
            wb.name,
            num_text(wbt),
            num_text(single_t),
            grouped(b, 0),
            if rwt > 0.0 {
                format!(
                    " − {} redo writes × {} B",
                    num_text(rwt),
                    grouped(redo_size_bytes, 0)
                )
            } else {
                String::new()
            },
            num_text(multi_t),
            size_text(measured)
        ),
    ];
    (measured, arithmetic)
}
