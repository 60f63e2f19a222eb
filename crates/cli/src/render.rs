//! Text output for people. Pure functions from reports to strings; JSON output
//! is the reports themselves, serialised.

use std::fmt::Write;

use cairn_io::probe::{BlockProbe, DeviceProbe, FileProbe, Knowledge};
use cairn_store::admin::{InspectReport, LabelReport, ListReport, RepairReport, UnlabelReport};

/// Binary units, one decimal: `64.0 MiB`.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A transfer or alignment size, exact: `1280 KiB`, `512 B`, `4 MiB`.
pub fn exact(bytes: u64) -> String {
    match bytes {
        0 => "0".to_string(),
        b if b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b % 1024 == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

fn opt<T: ToString>(value: &Option<T>) -> String {
    value
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_else(|| "-".to_string())
}

fn knowledge(k: Knowledge) -> &'static str {
    match k {
        Knowledge::Yes => "yes",
        Knowledge::No => "no",
        Knowledge::Unknown => "unknown",
    }
}

fn list_or_dash(items: &[String]) -> String {
    if items.is_empty() {
        "-".to_string()
    } else {
        items.join(", ")
    }
}

/// `cairn device probe`.
pub fn probes(probes: &[DeviceProbe]) -> String {
    let mut out = String::new();
    for (i, p) in probes.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        probe(&mut out, p);
    }
    out
}

/// One device's probe: a line naming it, then a row per fact.
fn probe(out: &mut String, p: &DeviceProbe) {
    match (&p.block, &p.file) {
        (Some(b), _) => {
            let _ = writeln!(
                out,
                "{} (block device {}, {}:{})",
                p.path.display(),
                b.name,
                b.major,
                b.minor
            );
        }
        _ => {
            let _ = writeln!(out, "{} (regular file)", p.path.display());
        }
    }
    if p.canonical_path != p.path {
        row(out, "resolves to", p.canonical_path.display().to_string());
    }
    row(
        out,
        "size",
        format!("{} ({} bytes)", size(p.size_bytes), p.size_bytes),
    );
    row(
        out,
        "sectors",
        format!(
            "{}: logical {}, physical {}",
            p.sector_format, p.logical_sector_bytes, p.physical_sector_bytes
        ),
    );
    if let Some(b) = &p.block {
        block_limits(out, p, b);
        block_place(out, b);
    }
    if let Some(f) = &p.file {
        file_facts(out, p, f);
    }
    if p.read_only {
        row(out, "read-only", opt(&p.read_only_reason));
    }
    row(
        out,
        "in use",
        p.in_use.describe().unwrap_or_else(|| "no".to_string()),
    );
}

/// One fact of a probe: its name, then its value, under the device's line.
fn row(out: &mut String, key: &str, value: String) {
    let _ = writeln!(out, "  {key:<20} {value}");
}

/// What a block device takes: transfer and I/O sizes, discard, write
/// zeroes, rotation and its write cache.
fn block_limits(out: &mut String, p: &DeviceProbe, b: &BlockProbe) {
    row(
        out,
        "max transfer",
        format!(
            "{} (max_sectors_kb {}, max_hw_sectors_kb {}, max_segments {} of up to {})",
            exact(u64::from(p.max_transfer_bytes)),
            opt(&b.max_sectors_kb),
            opt(&b.max_hw_sectors_kb),
            opt(&b.max_segments),
            b.max_segment_size_bytes
                .map_or("-".into(), |v| exact(u64::from(v)))
        ),
    );
    row(
        out,
        "io size",
        format!(
            "optimal {}, minimum {}",
            b.optimal_io_bytes
                .map_or("-".into(), |v| exact(u64::from(v))),
            b.minimum_io_bytes
                .map_or("-".into(), |v| exact(u64::from(v)))
        ),
    );
    let discard = if b.discard.supported {
        format!(
            "yes: granularity {}, max {} bytes; reads back zeros: {} ({})",
            b.discard
                .granularity_bytes
                .map_or("-".into(), |g| exact(u64::from(g))),
            opt(&b.discard.max_bytes),
            knowledge(b.discard.reads_zeroes),
            b.discard.reads_zeroes_reason
        )
    } else {
        "no".to_string()
    };
    row(out, "discard", discard);
    row(
        out,
        "write zeroes",
        format!(
            "max {} bytes, unmapping max {}",
            opt(&b.write_zeroes_max_bytes),
            opt(&b.write_zeroes_unmap_max_bytes)
        ),
    );
    row(
        out,
        "rotational",
        opt(&b.rotational.map(|r| if r { "yes" } else { "no" })),
    );
    row(
        out,
        "write cache",
        format!(
            "{}, fua {}",
            opt(&b.write_cache),
            opt(&b.fua.map(|f| if f { "yes" } else { "no" }))
        ),
    );
}

/// Where a block device sits: its partitions, the device-mapper and
/// multipath devices above or below it, its loop file, and its identity.
fn block_place(out: &mut String, b: &BlockProbe) {
    if let Some(part) = &b.partition {
        row(
            out,
            "partition",
            format!(
                "{} of {}, starting at sector {}",
                part.number,
                part.parent,
                opt(&part.start_sector)
            ),
        );
    }
    if !b.partitions.is_empty() {
        row(out, "partitions", b.partitions.join(", "));
    }
    if let Some(dm) = &b.device_mapper {
        row(
            out,
            "device-mapper",
            format!(
                "{} ({}), uuid {}{}",
                opt(&dm.name),
                dm.kernel_name,
                opt(&dm.uuid),
                if dm.multipath { ", multipath" } else { "" }
            ),
        );
    }
    row(out, "holders", list_or_dash(&b.holders));
    row(out, "slaves", list_or_dash(&b.slaves));
    if let Some(parent) = &b.multipath_parent {
        row(
            out,
            "multipath path of",
            format!(
                "{} ({}): use that device, not this path",
                parent
                    .mapper_path
                    .as_ref()
                    .map_or("-".into(), |p| p.display().to_string()),
                parent.kernel_name
            ),
        );
    }
    if let Some(backing) = &b.loop_backing_file {
        row(out, "loop backing file", backing.display().to_string());
    }
    row(
        out,
        "identity",
        format!(
            "wwid {}, serial {}, vendor {}, model {}",
            opt(&b.wwid),
            opt(&b.serial),
            opt(&b.vendor),
            opt(&b.model)
        ),
    );
}

/// What a regular file is on: its allocation, file system, direct I/O and
/// hole punching.
fn file_facts(out: &mut String, p: &DeviceProbe, f: &FileProbe) {
    let held = if p.size_bytes > 0 {
        format!(
            " ({:.1}% of its size)",
            100.0 * f.allocated_bytes as f64 / p.size_bytes as f64
        )
    } else {
        String::new()
    };
    row(
        out,
        "allocated",
        format!(
            "{} ({} bytes){held}",
            size(f.allocated_bytes),
            f.allocated_bytes
        ),
    );
    row(
        out,
        "filesystem",
        format!(
            "{} (block {}){}",
            f.filesystem,
            exact(f.fs_block_bytes),
            f.backing_device
                .as_ref()
                .map(|d| format!(", on {d}"))
                .unwrap_or_default()
        ),
    );
    let dio = &f.direct_io;
    let dio_text = match (dio.supported, dio.honoured) {
        (false, _) => "not supported".to_string(),
        (true, false) => "accepted, but not honoured (the page cache is still used)".to_string(),
        (true, true) => match (dio.offset_align_bytes, dio.memory_align_bytes) {
            (Some(o), Some(m)) => format!("yes (offset alignment {o}, memory alignment {m})"),
            _ => "yes".to_string(),
        },
    };
    row(out, "direct I/O", dio_text);
    row(
        out,
        "punch hole",
        format!("{} ({})", knowledge(f.punch_hole), f.punch_hole_reason),
    );
    row(out, "max transfer", exact(u64::from(p.max_transfer_bytes)));
}

/// `cairn disk label`.
pub fn label(r: &LabelReport) -> String {
    let mut out = String::new();
    let copies: Vec<String> = r.copy_offsets_bytes.iter().map(|o| exact(*o)).collect();
    let _ = writeln!(
        out,
        "labelled {} as {}: disk uuid {}, {} (logical {}, physical {}), {}; header copies at {}",
        r.path.display(),
        r.label,
        r.disk_uuid,
        r.sector_format,
        r.logical_sector_bytes,
        r.physical_sector_bytes,
        size(r.size_bytes),
        copies.join(", ")
    );
    for what in &r.overrode {
        let _ = writeln!(out, "overwrote (--force): {what}");
    }
    erased(&mut out, &r.erased_ranges);
    out
}

/// The line listing what `--force` or `--overwrite-foreign` zeroed, if anything.
fn erased(out: &mut String, ranges: &[(u64, u64)]) {
    if !ranges.is_empty() {
        let ranges: Vec<String> = ranges
            .iter()
            .map(|(o, l)| format!("{} at {o}", exact(*l)))
            .collect();
        let _ = writeln!(out, "erased what was overwritten: {}", ranges.join(", "));
    }
}

/// `cairn disk unlabel`.
pub fn unlabel(r: &UnlabelReport) -> String {
    let offsets: Vec<String> = r.erased_offsets.iter().map(|o| exact(*o)).collect();
    match (&r.label, &r.disk_uuid) {
        (Some(label), Some(uuid)) => format!(
            "removed label {label} (uuid {uuid}) from {}: zeroed the header blocks at {}\n",
            r.path.display(),
            offsets.join(", ")
        ),
        _ => format!(
            "removed a damaged Cairn header (no good copy) from {}: zeroed the header blocks at {}\n",
            r.path.display(),
            offsets.join(", ")
        ),
    }
}

/// Align columns of a table; the last column is not padded.
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}  ", width = widths[c]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `cairn disk list`.
pub fn list(r: &ListReport) -> String {
    let mut rows = vec![vec![
        "LABEL",
        "STATUS",
        "HEADER",
        "SIZE",
        "SECTOR",
        "MAX IO",
        "DISCARD",
        "MULTIPATH",
        "PATH",
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>()];
    for d in &r.disks {
        rows.push(vec![
            opt(&d.label),
            d.status.to_string(),
            serde_json::to_value(d.header)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
                .replace("none", "-"),
            d.size_bytes.map_or("-".into(), size),
            opt(&d.sector_format),
            d.max_transfer_bytes
                .map_or("-".into(), |b| exact(u64::from(b))),
            d.discard_granularity_bytes
                .map_or("no".into(), |g| exact(u64::from(g))),
            d.multipath_parent
                .as_ref()
                .map_or("-".into(), |p| p.display().to_string()),
            d.path.display().to_string(),
        ]);
    }
    let mut out = table(&rows);
    for d in &r.disks {
        let mut notes: Vec<String> = d.foreign.iter().map(|f| format!("carries {f}")).collect();
        notes.extend(d.notes.iter().cloned());
        if d.header != cairn_store::header_copies::HeaderHealth::Ok
            && d.header != cairn_store::header_copies::HeaderHealth::None
        {
            notes.extend(d.copies.iter().cloned());
        }
        notes.extend(d.error.iter().cloned());
        for note in notes {
            let _ = writeln!(out, "  {}: {note}", d.path.display());
        }
    }
    let _ = writeln!(
        out,
        "{} device(s) from discovery string '{}' ({})",
        r.disks.len(),
        r.discovery_string,
        r.discovery_source
    );
    out
}

/// A hex view of a block, 16 bytes a line, runs of identical lines folded.
pub fn hex_view(block: &[u8]) -> String {
    let mut out = String::new();
    let mut previous: Option<&[u8]> = None;
    let mut repeats = 0usize;
    let flush_repeats = |out: &mut String, repeats: &mut usize| {
        if *repeats > 0 {
            let _ = writeln!(out, "  repeat {repeats} times");
            *repeats = 0;
        }
    };
    for (i, line) in block.chunks(16).enumerate() {
        if previous == Some(line) {
            repeats += 1;
            continue;
        }
        flush_repeats(&mut out, &mut repeats);
        previous = Some(line);
        let hex: Vec<String> = line
            .chunks(4)
            .map(|w| w.iter().map(|b| format!("{b:02x}")).collect::<String>())
            .collect();
        let text: String = line
            .iter()
            .map(|b| {
                if b.is_ascii_graphic() || *b == b' ' {
                    *b as char
                } else {
                    '.'
                }
            })
            .collect();
        let _ = writeln!(out, "{:09x}  {}  [{text}]", i * 16, hex.join(" "));
    }
    flush_repeats(&mut out, &mut repeats);
    out
}

/// `cairn disk inspect`, in the manner of `kfed read`.
pub fn inspect(r: &InspectReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} header copy {} at byte offset {}: {}",
        r.path.display(),
        r.copy,
        r.offset_bytes,
        r.state
    );
    for f in &r.fields {
        let _ = writeln!(
            out,
            "dskhdr.{:<24} ; {:#05x} {:>4}: {:<44} {}",
            f.name, f.offset, f.size, f.value, f.meaning
        );
    }
    out.push_str(&hex_view(&r.block));
    out
}

/// `cairn disk repair`.
pub fn repair(r: &RepairReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}: header copies as found:", r.path.display());
    for c in &r.copies {
        let _ = writeln!(out, "  copy {} @ {}: {}", c.copy, c.offset_bytes, c.state);
    }
    let source = format!(
        "copy {} (label {}, uuid {})",
        opt(&r.source_copy),
        opt(&r.label),
        opt(&r.disk_uuid)
    );
    if r.rewrites.is_empty() {
        let _ = writeln!(out, "every copy is good; nothing to repair");
        return out;
    }
    for w in &r.rewrites {
        let verb = if r.dry_run {
            "would restore"
        } else {
            "restored"
        };
        let _ = writeln!(
            out,
            "{verb} copy {} @ {} ({}) from {source}",
            w.copy, w.offset_bytes, w.reason
        );
    }
    for what in &r.overwrote {
        let verb = if r.dry_run {
            "would overwrite"
        } else {
            "overwrote"
        };
        let _ = writeln!(out, "{verb} damage: {what}");
    }
    erased(&mut out, &r.erased_ranges);
    if r.dry_run {
        let _ = writeln!(out, "nothing written (--dry-run)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(64 << 20), "64.0 MiB");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(exact(1280 << 10), "1280 KiB");
        assert_eq!(exact(4 << 20), "4 MiB");
        assert_eq!(exact(512), "512 B");
    }

    #[test]
    fn hex_view_folds_repeats() {
        let mut block = vec![0u8; 4096];
        block[..8].copy_from_slice(b"CAIRNDSK");
        let view = hex_view(&block);
        let lines: Vec<&str> = view.lines().collect();
        assert_eq!(
            lines[0],
            "000000000  43414952 4e44534b 00000000 00000000  [CAIRNDSK........]"
        );
        assert_eq!(
            lines[1],
            "000000010  00000000 00000000 00000000 00000000  [................]"
        );
        assert_eq!(lines[2], "  repeat 254 times");
        assert_eq!(lines.len(), 3);
    }
}
