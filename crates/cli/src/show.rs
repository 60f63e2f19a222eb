//! How the CLI shows a command's events and reply: progress bars and notes
//! on standard error as the command goes, then the reply as text for
//! people or JSON for programs, and the exit status it means. The reply is
//! the same typed value whether this process carried the command out or
//! the service did, so the output is the same too.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::Path;

use anyhow::Result;
use cairn_command::event::{Event, Events, Unit};
use cairn_command::reply::{
    Altered, Created, DiskRow, GroupStatus, GroupSummary, Mounted, Offlined, Onlined, Rebalanced,
    Reply, Started, Status, VolumeRow, VolumeStatus,
};
use cairn_command::Outcome;
use cairn_store::group::{self, MountReport};
use serde::Serialize;

/// The CLI's side of a command's events: notes and warnings on standard
/// error, a progress bar on a terminal (none with `--json`, or piped).
pub(crate) struct Shown {
    json: bool,
    bar: Option<(String, indicatif::ProgressBar)>,
}

impl Shown {
    pub(crate) fn new(json: bool) -> Self {
        Self { json, bar: None }
    }

    /// The command is over: its bar goes.
    pub(crate) fn finish(&mut self) {
        if let Some((_, bar)) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Shown {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Events for Shown {
    fn send(&mut self, event: Event) {
        match event {
            Event::Mounted { group, report } => warn_mount(&group, &report),
            Event::TakenOffline { group, disks } => warn_offlined(&group, &disks),
            Event::Note(line) => {
                if let Some((_, bar)) = &self.bar {
                    bar.suspend(|| eprintln!("{line}"));
                } else {
                    eprintln!("{line}");
                }
            }
            Event::Progress(p) => {
                let json = self.json;
                let (what, bar) = self.bar.get_or_insert_with(|| {
                    let bar = match p.unit {
                        Unit::Byte => bytes_progress(json, p.total),
                        Unit::Au => au_progress(json),
                    };
                    (String::new(), bar)
                });
                if *what != p.what {
                    bar.set_message(p.what.clone());
                    *what = p.what;
                }
                if p.total > 0 {
                    bar.set_length(p.total);
                }
                bar.set_position(p.done);
            }
        }
    }
}

/// What a mount found that a person must hear about, one line each on
/// stderr ([`MountReport::notices`]: the service logs the same).
pub(crate) fn warn_mount(group: &str, report: &MountReport) {
    for n in report.notices(group) {
        if n.warning {
            eprintln!("cairn: warning: group {group}: {}", n.text);
        } else {
            eprintln!("cairn: group {group}: {}", n.text);
        }
    }
}

/// Say which disks a command took offline after an I/O error — whether the
/// command then succeeded or not: the disk is out of use for good.
pub(crate) fn warn_offlined(group: &str, disks: &[String]) {
    for d in disks {
        eprintln!(
            "cairn: warning: group {group}: disk {d} and is now OFFLINE; the group runs DEGRADED on the other copies (check the disk and the kernel log, dmesg)"
        );
    }
}

/// A progress bar in bytes on a terminal; hidden with --json or a pipe.
pub(crate) fn bytes_progress(json: bool, total: u64) -> indicatif::ProgressBar {
    if total == 0 && !json && std::io::stderr().is_terminal() {
        // A stream: a spinner with the bytes and rate.
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg} {bytes} {bytes_per_sec}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        return bar;
    }
    progress_bar(
        json,
        "{msg} {bytes}/{total_bytes} {bytes_per_sec} ETA {eta} {wide_bar}",
    )
}

/// A progress bar in AUs on a terminal; hidden with --json or a pipe.
pub(crate) fn au_progress(json: bool) -> indicatif::ProgressBar {
    progress_bar(json, "{msg} {pos}/{len} AUs {per_sec} ETA {eta} {wide_bar}")
}

fn progress_bar(json: bool, template: &str) -> indicatif::ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// Seconds as a short duration: 3h36m, 5m, 45s.
pub(crate) fn render_duration(seconds: u64) -> String {
    let (d, h, m, s) = (
        seconds / 86_400,
        seconds / 3600 % 24,
        seconds / 60 % 60,
        seconds % 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m"),
        (0, _, _) => format!("{h}h{m:02}m"),
        _ => format!("{d}d{h:02}h"),
    }
}

fn json(value: &impl Serialize) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

/// Show `reply` (text, or JSON with `as_json`) and say what exit status it
/// means. `source`: what a `cp` copied from, for its note.
pub(crate) fn reply(reply: &Reply, as_json: bool) -> Result<Outcome> {
    match reply {
        Reply::Created(c) => show_created(c, as_json)?,
        Reply::List(rows) => {
            if as_json {
                json(rows)?;
            } else {
                print!("{}", render_list(rows));
            }
        }
        Reply::Disks(rows) => show_disks(rows, as_json)?,
        Reply::Mounted(m) => show_mounted(m, as_json)?,
        Reply::Check { group, report } => show_check(group, report, as_json)?,
        Reply::Scrub { group, report } => show_scrub(group, report, as_json)?,
        Reply::Reclaim { group, report } => show_reclaim(group, report, as_json)?,
        Reply::Space(rows) => show_space(rows, as_json)?,
        Reply::Online(o) => show_online(o, as_json)?,
        Reply::Offline(o) => show_offline(o, as_json)?,
        Reply::Explained { group, explain } => show_explain(group, explain, as_json)?,
        Reply::Changed { altered, then } => {
            if let (Some(a), false) = (altered, as_json) {
                show_altered(a);
            }
            return self::reply(then, as_json);
        }
        Reply::Rebalanced(r) => show_rebalance(r, as_json)?,
        Reply::Undropped { group, undropped } => show_undropped(group, undropped, as_json)?,
        Reply::Ops { group, ops } => show_ops(group.as_deref(), ops, as_json)?,
        Reply::Attributes(got) => show_attributes(got, as_json)?,
        Reply::Listing { path, entries } => show_ls(path, entries, as_json)?,
        Reply::Du {
            path,
            used_bytes,
            allocated_with_mirrors_bytes,
        } => show_du(path, *used_bytes, *allocated_with_mirrors_bytes, as_json)?,
        Reply::Done | Reply::ReadThrough { .. } => {}
        Reply::CopiedIn { .. } => {}
        Reply::Started(s) => show_started(s, as_json)?,
        Reply::Status(s) => {
            if as_json {
                json(s)?;
            } else {
                show_status(s);
            }
        }
        Reply::VolumeCreated(row) => show_volume_created(row, as_json)?,
        Reply::VolumeAttached { name, device } => {
            if as_json {
                json(&serde_json::json!({ "name": name, "device": device }))?;
            } else {
                println!("{}", device.display());
            }
        }
        Reply::VolumeDetached {
            name,
            device,
            deferred,
        } => show_volume_detached(name, device, *deferred),
        Reply::VolumeResized {
            name,
            size_bytes,
            device,
        } => show_volume_resized(name, *size_bytes, device.as_deref()),
        Reply::Volumes(rows) => show_volumes(rows, as_json)?,
    }
    Ok(reply.outcome())
}

/// A group created: what each disk held before (a warning on stderr), then
/// the group and its disks.
fn show_created(c: &Created, as_json: bool) -> Result<()> {
    for d in &c.disks {
        if let Some(what) = &d.overrode {
            eprintln!(
                "cairn: warning: {} was {what}; it is now {} of {}",
                d.path.display(),
                d.label,
                c.group.name
            );
        }
    }
    if as_json {
        return json(c);
    }
    println!(
        "created disk group {} ({} redundancy, {} MiB AUs, {}-byte sectors) on {} disk(s):",
        c.group.name,
        c.group.redundancy,
        c.group.au_mb,
        c.group.sector_bytes,
        c.disks.len()
    );
    for d in &c.disks {
        println!(
            "  {:<16} {:<14} {}{}",
            d.label,
            d.failgroup,
            d.path.display(),
            if d.labelled_now {
                " (labelled now)"
            } else {
                ""
            }
        );
        if let Some(what) = &d.overrode {
            println!("    overwrote: {what}");
        }
    }
    println!(
        "{} MiB usable for files; metadata written: {} KiB",
        c.group.usable_file_mb,
        c.bytes_written / 1024
    );
    Ok(())
}

/// A group mounted and dismounted: what its recovery did.
fn show_mounted(m: &Mounted, as_json: bool) -> Result<()> {
    if as_json {
        return json(m);
    }
    println!(
        "mounted {} ({}): {} journal record(s) replayed",
        m.group.name, m.group.state, m.recovery.journal_records_replayed
    );
    for d in &m.recovery.disks_marked_offline {
        println!("  disk marked offline: {d}");
    }
    for d in &m.recovery.disks_held {
        println!("  disk {d} stays OFFLINE (taken offline on request; `cairn group online` brings it back)");
    }
    for o in &m.recovery.operations_recovered {
        println!("  recovered: {o}");
    }
    for w in &m.recovery.warnings {
        println!("  warning: {w}");
    }
    println!("dismounted cleanly");
    Ok(())
}

/// Disks taken offline on request: each, with how long until it is dropped.
fn show_offline(o: &Offlined, as_json: bool) -> Result<()> {
    if as_json {
        return json(o);
    }
    for d in &o.offline {
        let row = o.disks.iter().find(|r| &r.label == d);
        let left = row
            .and_then(|r| r.repair_seconds_left)
            .map_or_else(String::new, |s| {
                format!("; dropped after {} more mounted", render_duration(s))
            });
        // One held after a failed I/O is copied whole when it comes back.
        let copying = if row.is_some_and(|r| r.resync_whole) {
            "copying all it holds (it failed under I/O)"
        } else {
            "copying only what it missed"
        };
        println!(
            "group {}: disk {d} is OFFLINE (on request){left}; `cairn group online {} {d}` brings it back, {copying}",
            o.group, o.group
        );
    }
    Ok(())
}

/// What an alteration changed (disks added, dropping, resized), before the
/// reply of what followed it.
fn show_altered(a: &Altered) {
    if !a.added.is_empty() {
        println!("group {}: added {}", a.group, a.added.join(", "));
    }
    if !a.dropping.is_empty() {
        println!("group {}: dropping {}", a.group, a.dropping.join(", "));
    }
    for line in &a.resized {
        println!("group {}: {line}", a.group);
    }
}

/// Drops cancelled.
fn show_undropped(group: &str, undropped: &[String], as_json: bool) -> Result<()> {
    if as_json {
        return json(&serde_json::json!({ "group": group, "undropped": undropped }));
    }
    println!(
        "group {group}: drop cancelled for {} (what already moved stays where it is)",
        undropped.join(", ")
    );
    Ok(())
}

/// Attributes, one `name = value` a line (a JSON object by name).
fn show_attributes(got: &[(String, String)], as_json: bool) -> Result<()> {
    if as_json {
        return json(&got.iter().cloned().collect::<BTreeMap<_, _>>());
    }
    for (k, v) in got {
        println!("{k} = {v}");
    }
    Ok(())
}

/// The space a path uses, alone and with its mirrors.
fn show_du(path: &str, used_bytes: u64, mirrors_bytes: u64, as_json: bool) -> Result<()> {
    if as_json {
        return json(&serde_json::json!({
            "path": path,
            "used_bytes": used_bytes,
            "allocated_with_mirrors_bytes": mirrors_bytes,
        }));
    }
    println!("{:>12} {:>20}  PATH", "USED_MB", "MIRROR_USED_MB");
    println!(
        "{:>12} {:>20}  {}",
        used_bytes >> 20,
        mirrors_bytes >> 20,
        path
    );
    Ok(())
}

/// An operation started in the background.
fn show_started(s: &Started, as_json: bool) -> Result<()> {
    if as_json {
        return json(&serde_json::json!({ "group": s.group, "started": s.what, "power": s.power }));
    }
    println!(
        "group {}: {} started in the background (power {}); `cairn group ops {}` follows it, --wait waits for it",
        s.group, s.what, s.power, s.group
    );
    Ok(())
}

/// A volume created.
fn show_volume_created(row: &VolumeRow, as_json: bool) -> Result<()> {
    if as_json {
        return json(row);
    }
    println!(
        "volume {} created: {} MiB, {}; `cairn volume attach {}` gives its block device",
        row.name,
        row.size_bytes >> 20,
        row.redundancy,
        row.name
    );
    Ok(())
}

/// A volume detached, or left for the kernel to detach at its last close.
fn show_volume_detached(name: &str, device: &Path, deferred: bool) {
    if deferred {
        println!(
            "cairn: note: {} is still open somewhere; the kernel detaches it at its last close",
            device.display()
        );
    }
    println!("volume {name} detached from {}", device.display());
}

/// A volume's new size, and the device that follows it.
fn show_volume_resized(name: &str, size_bytes: u64, device: Option<&Path>) {
    println!(
        "volume {name} is {} MiB{}",
        size_bytes >> 20,
        device.map_or_else(String::new, |d| format!(
            "; {} follows (grow the file system on it with its own tool)",
            d.display()
        ))
    );
}

/// The volumes, one a line.
fn show_volumes(rows: &[VolumeRow], as_json: bool) -> Result<()> {
    if as_json {
        return json(&rows);
    }
    println!(
        "{:<40} {:>10} {:<10} {:<12} STATE",
        "NAME", "SIZE_MB", "REDUNDANCY", "DEVICE"
    );
    for r in rows {
        println!(
            "{:<40} {:>10} {:<10} {:<12} {}",
            r.name,
            r.size_bytes >> 20,
            r.redundancy,
            r.device.as_deref().unwrap_or("-"),
            r.state
        );
    }
    Ok(())
}

pub(crate) fn render_list(rows: &[GroupSummary]) -> String {
    let mut out = format!(
        "{:<12} {:<10} {:>7} {:>6} {:>10} {:>10} {:>12} {:>12} {:>8}  NAME\n",
        "STATE",
        "TYPE",
        "SECTOR",
        "AU_MB",
        "TOTAL_MB",
        "FREE_MB",
        "REQ_MIR_MB",
        "USABLE_MB",
        "OFFLINE"
    );
    for r in rows {
        if let Some((state, why)) = r.state.split_once(": ") {
            out.push_str(&format!("{state:<12} {}  ({why})\n", r.name));
            continue;
        }
        out.push_str(&format!(
            "{:<12} {:<10} {:>7} {:>6} {:>10} {:>10} {:>12} {:>12} {:>8}  {}\n",
            r.state,
            r.redundancy,
            r.sector_bytes,
            r.au_mb,
            r.total_mb,
            r.free_mb,
            r.required_mirror_free_mb,
            r.usable_file_mb,
            r.offline_disks,
            r.name
        ));
    }
    if rows.is_empty() {
        out.push_str("(no disk groups found; `cairn group create` makes one)\n");
    }
    out
}

fn show_disks(rows: &[DiskRow], as_json: bool) -> Result<()> {
    if as_json {
        return json(&rows);
    }
    println!(
        "{:>4}  {:<16} {:<14} {:<8} {:>10} {:>10} {:>9} {:>11}  PATH",
        "DISK", "LABEL", "FAILGROUP", "STATE", "TOTAL_AU", "FREE_AU", "STALE_AU", "REPAIR_LEFT"
    );
    for r in rows {
        println!(
            "{:>4}  {:<16} {:<14} {:<8} {:>10} {:>10} {:>9} {:>11}  {}{}",
            r.disk.number,
            r.disk.label,
            r.disk.failgroup,
            if r.disk.dropping {
                "DROPPING"
            } else {
                r.disk.state.as_str()
            },
            r.disk.total_aus,
            r.disk
                .free_aus
                .map_or_else(|| "-".to_string(), |f| f.to_string()),
            r.disk.stale_aus,
            r.disk
                .repair_seconds_left
                .map_or_else(|| "-".to_string(), render_duration),
            r.path
                .as_ref()
                .map_or_else(|| "(missing)".to_string(), |p| p.display().to_string()),
            if r.disk.dropped_by_force {
                " (dropped by force: rebuilt from mirrors)".to_string()
            } else if r.disk.held {
                " (offline on request)".to_string()
            } else if r.disk.resync_whole {
                " (failed under I/O: `online` resyncs every copy on it, not only the stale AUs)"
                    .to_string()
            } else if let Some(to) = r.disk.shrinking_to_bytes {
                format!(
                    " (shrinking from {} to {to} bytes: `cairn group rebalance` moves what lies past the new end)",
                    r.disk.size_bytes
                )
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

fn show_space(rows: &[cairn_store::group_admin::DiskSpaceReport], as_json: bool) -> Result<()> {
    if as_json {
        return json(&rows);
    }
    println!(
        "{:>4}  {:<16} {:>12} {:>14} {:>10} {:>15} {:>16} {:>11}  PATH",
        "DISK",
        "LABEL",
        "SIZE_MB",
        "GROUP_USED_MB",
        "FREE_MB",
        "RETURNABLE_MB",
        "DEVICE_HOLDS_MB",
        "MISSING_MB"
    );
    let mb = |b: Option<u64>| b.map_or_else(|| "-".to_string(), |b| (b >> 20).to_string());
    for r in rows {
        println!(
            "{:>4}  {:<16} {:>12} {:>14} {:>10} {:>15} {:>16} {:>11}  {}",
            r.number,
            r.label,
            r.size_bytes >> 20,
            r.group_used_bytes >> 20,
            mb(r.free_bytes),
            mb(r.returnable_bytes),
            mb(r.device_allocated_bytes),
            r.missing_copy_bytes >> 20,
            r.path
                .as_ref()
                .map_or_else(|| "(missing)".to_string(), |p| p.display().to_string())
        );
    }
    Ok(())
}

fn show_check(group: &str, report: &group::check::CheckReport, as_json: bool) -> Result<()> {
    if as_json {
        return json(report);
    }
    println!(
        "checked {group}: {} files, {} extents, {} AUs in use, {} metadata blocks compared across mirrors",
        report.files, report.extents, report.aus_in_use, report.metadata_blocks_compared
    );
    for p in &report.problems {
        println!(
            "  {}: {}{}",
            p.location,
            p.what,
            if p.repaired { " (repaired)" } else { "" }
        );
    }
    for d in &report.disks_not_in_use {
        println!("  disk {d}");
    }
    println!("  data blocks were not read: they carry no checksums (docs/groups.md), so check cannot see rot in them");
    println!(
        "{}",
        if !report.clean() {
            "PROBLEMS FOUND"
        } else if report.degraded() {
            "DEGRADED"
        } else if report.problems.is_empty() {
            "clean"
        } else {
            "all problems repaired"
        }
    );
    Ok(())
}

fn show_scrub(group: &str, report: &group::scrub::ScrubReport, as_json: bool) -> Result<()> {
    if as_json {
        return json(&serde_json::json!({ "group": group, "scrub": report }));
    }
    println!(
        "scrubbed {group}: {} MiB read from {} copies of {} extents in {:.1} s; {} metadata blocks and {} header copies compared{}",
        report.bytes_read >> 20,
        report.copies_read,
        report.extents_read,
        report.elapsed_ms as f64 / 1000.0,
        report.metadata_blocks_compared,
        report.header_copies_checked,
        if report.bytes_rewritten > 0 {
            format!("; {} KiB of data rewritten", report.bytes_rewritten >> 10)
        } else {
            String::new()
        }
    );
    for p in &report.problems {
        println!(
            "  {}: {}{}",
            p.location,
            p.what,
            if p.repaired { " (repaired)" } else { "" }
        );
    }
    println!(
        "{}",
        if report.problems.is_empty() {
            "clean"
        } else if report.clean() {
            "all disagreements repaired"
        } else {
            "DISAGREEMENTS FOUND"
        }
    );
    Ok(())
}

fn show_reclaim(group: &str, report: &group::reclaim::ReclaimReport, as_json: bool) -> Result<()> {
    use group::reclaim::ReclaimMethod;
    if as_json {
        return json(&serde_json::json!({ "group": group, "reclaim": report }));
    }
    let (verb, done) = match report.method {
        ReclaimMethod::Discard => ("discard", "discarded"),
        ReclaimMethod::ZeroFill => ("zero-fill", "zero-filled"),
    };
    let doable: u64 = report
        .disks
        .iter()
        .filter(|d| d.skipped.is_none())
        .map(|d| d.returnable_bytes)
        .sum();
    if report.explain {
        if report.compact_moves > 0 {
            println!(
                "reclaim {group} --compact (explain, nothing changed): would first move {} extent copies ({} MiB) towards the start of their disks, freeing as much above them",
                report.compact_moves,
                report.compact_bytes >> 20
            );
        }
        println!(
            "reclaim {group} (explain, nothing changed): would {verb} {} MiB of {} MiB returnable{}",
            doable >> 20,
            report.returnable_bytes >> 20,
            if report.compact_moves > 0 { " now" } else { "" }
        );
    } else if report.returnable_bytes == 0 && report.compact_moves == 0 {
        println!(
            "nothing to reclaim in {group}: every free AU is known to hold nothing on its device"
        );
    } else {
        let pace = match report.rate_bytes {
            None => "unpaced".to_string(),
            Some(r) if report.slowest_fraction < 1.0 => format!(
                "paced at {} MB/s a disk, down to 1/{:.0} of it while the group's own I/O slowed",
                r / 1_000_000,
                1.0 / report.slowest_fraction
            ),
            Some(r) => format!("paced at {} MB/s a disk", r / 1_000_000),
        };
        if report.compact_moves > 0 {
            println!(
                "compacted {group}: moved {} extent copies ({} MiB) towards the start of their disks",
                report.compact_moves,
                report.compact_bytes >> 20
            );
        }
        println!(
            "reclaimed {group}: {done} {} MiB of {} MiB returnable in {:.1} s ({pace})",
            report.returned_bytes >> 20,
            report.returnable_bytes >> 20,
            report.elapsed_ms as f64 / 1000.0
        );
    }
    println!(
        "{:>4}  {:<16} {:>15} {:>13} {:>9}  NOTE",
        "DISK",
        "LABEL",
        "RETURNABLE_MB",
        if report.explain {
            "WOULD_MB"
        } else {
            "RETURNED_MB"
        },
        "REQUESTS"
    );
    for d in &report.disks {
        let note = match (&d.skipped, d.failed_requests) {
            (Some(why), _) => format!("skipped: {why}"),
            (None, 0) => String::new(),
            (None, n) => format!("{n} request(s) failed; their AUs stay returnable"),
        };
        let line = format!(
            "{:>4}  {:<16} {:>15} {:>13} {:>9}  {note}",
            d.number,
            d.label,
            d.returnable_bytes >> 20,
            if report.explain {
                if d.skipped.is_some() {
                    0
                } else {
                    d.returnable_bytes >> 20
                }
            } else {
                d.returned_bytes >> 20
            },
            d.requests
        );
        println!("{}", line.trim_end());
    }
    Ok(())
}

fn show_online(o: &Onlined, as_json: bool) -> Result<()> {
    if as_json {
        return json(o);
    }
    let online: Vec<&str> = o
        .mount_resync
        .disks_online
        .iter()
        .chain(&o.resync.disks_online)
        .map(String::as_str)
        .collect();
    println!(
        "group {}: {} disk(s) brought ONLINE{}; resync copied {} stale AU(s) ({} MiB), cleared {} never written, refreshed {} metadata block(s)",
        o.group,
        online.len(),
        if online.is_empty() {
            String::new()
        } else {
            format!(" ({})", online.join(", "))
        },
        o.mount_resync.aus_copied + o.resync.aus_copied,
        (o.mount_resync.bytes_copied + o.resync.bytes_copied) >> 20,
        o.mount_resync.aus_cleared_unwritten + o.resync.aus_cleared_unwritten,
        o.mount_resync.metadata_blocks_rewritten + o.resync.metadata_blocks_rewritten
    );
    if !o.already_online.is_empty() {
        println!(
            "group {}: {} {} not OFFLINE: nothing to do for {}",
            o.group,
            o.already_online.join(", "),
            if o.already_online.len() == 1 {
                "was"
            } else {
                "were"
            },
            if o.already_online.len() == 1 {
                "it"
            } else {
                "them"
            }
        );
    }
    Ok(())
}

fn show_explain(group: &str, work: &group::relocate::Explain, as_json: bool) -> Result<()> {
    if as_json {
        return json(&serde_json::json!({ "group": group, "explain": work }));
    }
    println!(
        "group {group}: the change would move {} AU(s) ({} MiB) in {} move(s): {} rebuild, {} evacuate, {} balance{}",
        work.aus_to_move,
        work.bytes_to_move >> 20,
        work.moves,
        work.rebuild_moves,
        work.evacuate_moves,
        work.balance_moves,
        work.estimated_seconds.map_or_else(String::new, |s| format!(
            "; about {} at the sequential read rates measured now",
            render_duration((s.ceil() as u64).max(1))
        ))
    );
    println!(
        "{:>4}  {:<16} {:<12} {:<9} {:>9} {:>9} {:>7} {:>7} {:>9} {:>9}",
        "DISK",
        "LABEL",
        "FAILGROUP",
        "STATE",
        "USED_AU",
        "AFTER_AU",
        "IN_AU",
        "OUT_AU",
        "IN_MiB",
        "OUT_MiB"
    );
    for d in &work.disks {
        println!(
            "{:>4}  {:<16} {:<12} {:<9} {:>9} {:>9} {:>7} {:>7} {:>9} {:>9}",
            d.number,
            d.label,
            d.failgroup,
            d.state,
            d.aus_used_before,
            d.aus_used_after,
            d.aus_in,
            d.aus_out,
            d.bytes_in >> 20,
            d.bytes_out >> 20
        );
    }
    Ok(())
}

fn show_rebalance(r: &Rebalanced, as_json: bool) -> Result<()> {
    let (group_name, report) = (&r.group, &r.rebalance);
    if as_json {
        return json(r);
    }
    if report.paused {
        println!(
            "group {group_name}: rebalance paused (power 0) with {} move(s) planned; `cairn group rebalance {group_name} --power N` resumes it",
            report.moves_planned
        );
        return Ok(());
    }
    println!(
        "group {group_name}: rebalance moved {} AU(s) ({} MiB copied) in {} move(s) ({} metadata, {} rebuilt from mirrors){}{}{}",
        report.aus_moved,
        report.bytes_copied >> 20,
        report.moves_done,
        report.metadata_moves,
        report.copies_rebuilt,
        if report.disks_dropped.is_empty() {
            String::new()
        } else {
            format!("; dropped {} (FORMER)", report.disks_dropped.join(", "))
        },
        if report.disks_resized.is_empty() {
            String::new()
        } else {
            format!("; shrank {}", report.disks_resized.join(", "))
        },
        if report.compact_aus_moved == 0 {
            String::new()
        } else {
            format!(
                "; the compact pass moved {} AU(s) towards the disks' start",
                report.compact_aus_moved
            )
        }
    );
    for left in &report.moves_left {
        eprintln!("warning: not moved: {left}");
    }
    for lost in &report.aus_without_source {
        eprintln!("warning: {lost}");
    }
    Ok(())
}

fn show_ops(group: Option<&str>, ops: &[cairn_store::ops::OpStatus], as_json: bool) -> Result<()> {
    if as_json {
        return json(&ops);
    }
    if ops.is_empty() {
        println!(
            "no operation is running{}",
            group.map_or_else(String::new, |n| format!(" on group {n}"))
        );
        return Ok(());
    }
    println!(
        "{:<12} {:<10} {:<12} {:>5} {:>16} {:>10} {:>10} {:>12}",
        "GROUP", "PASS", "STATE", "POWER", "AUS_DONE/TOTAL", "MiB/s", "ETA", "REDUNDANCY"
    );
    for o in ops {
        let when = |s: Option<u64>| match s {
            Some(0) => "now".to_string(),
            Some(s) => render_duration(s),
            None => "estimating".to_string(),
        };
        println!(
            "{:<12} {:<10} {:<12} {:>5} {:>16} {:>10} {:>10} {:>12}{}",
            o.group,
            o.pass,
            o.state,
            o.power,
            format!("{}/{}", o.aus_done, o.aus_total),
            o.rate_bytes_per_second
                .map_or_else(|| "-".to_string(), |r| format!("{:.1}", r / 1048576.0)),
            if o.state == "RUN" {
                when(o.eta_seconds)
            } else {
                "-".into()
            },
            if o.state == "RUN" {
                when(o.redundancy_eta_seconds)
            } else {
                "-".into()
            },
            if let Some(why) = &o.why {
                format!("  ({why})")
            } else if o.state == "INTERRUPTED" {
                let resume = if o.pass == "RESYNC" {
                    format!("cairn group online {} --all", o.group)
                } else {
                    format!("cairn group rebalance {}", o.group)
                };
                format!("  (resume: {resume})")
            } else if o.resumed {
                "  (resumed)".to_string()
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

fn show_ls(path: &str, entries: &[group::DirEntry], as_json: bool) -> Result<()> {
    if as_json {
        return json(&entries);
    }
    let group_name = path
        .trim_start_matches('+')
        .split('/')
        .next()
        .unwrap_or_default();
    for e in entries {
        match (&e.kind, &e.file) {
            (group::AliasKind::Directory, _) => {
                println!("{:<10} {:>14} {:<8} {:<12} {}/", "DIR", "", "", "", e.name)
            }
            (_, None) => println!(
                "{:<10} {:>14} {:<8} {:<12} {}  (its file is lost; `cairn group check {group_name} --repair` removes the name)",
                "LOST", "", "", "", e.name
            ),
            (kind, Some(f)) => println!(
                "{:<10} {:>14} {:<8} {:<12} {}{}",
                f.template,
                f.attrs.byte_size,
                match f.copies {
                    1 => "UNPROT",
                    2 => "MIRROR",
                    _ => "HIGH",
                },
                f.striping,
                e.name,
                if *kind == group::AliasKind::Alias {
                    format!(" => file {}", f.number)
                } else {
                    String::new()
                }
            ),
        }
    }
    Ok(())
}

/// `cairn status` as text: the service, each group with its file
/// system's I/O and its disks, then the long operations.
fn show_status(s: &Status) {
    println!(
        "cairn serve: pid {}, serving for {}",
        s.pid,
        render_duration(s.uptime_seconds)
    );
    for g in &s.groups {
        show_group_status(g);
    }
    show_volume_status(&s.volumes);
    if s.operations.is_empty() {
        println!("no operation is running");
    }
    for o in &s.operations {
        println!(
            "operation {} on {}: {} {}/{} AUs (power {})",
            o.pass, o.group, o.state, o.aus_done, o.aus_total, o.power
        );
    }
}

/// One served group in `cairn status`: its space, its I/O by kind, each
/// disk's state and I/O, and the disk state changes counted.
fn show_group_status(g: &GroupStatus) {
    println!(
        "group {} ({}): {} MiB, {} free, {} usable for files; {} disk(s) not in use",
        g.name, g.redundancy, g.total_mb, g.free_mb, g.usable_file_mb, g.offline_disks
    );
    println!(
        "  {:<6} {:>12} {:>12} {:>8} {:>12}",
        "I/O", "REQUESTS", "MIB", "ERRORS", "AVG_US"
    );
    for (op, o) in [
        ("read", &g.reads),
        ("write", &g.writes),
        ("fsync", &g.syncs),
        ("discard", &g.discards),
    ] {
        println!(
            "  {:<6} {:>12} {:>12} {:>8} {:>12}",
            op,
            o.count,
            o.bytes >> 20,
            o.errors,
            o.latency_micros_sum.checked_div(o.count).unwrap_or(0)
        );
    }
    println!(
        "  {:>4}  {:<16} {:<14} {:<9} {:>9} {:>10} {:>8} {:>10} {:>8} {:>7} {:>7}",
        "DISK",
        "LABEL",
        "FAILGROUP",
        "STATE",
        "STALE_AU",
        "READS",
        "READ_MIB",
        "WRITES",
        "WRIT_MIB",
        "AVG_US",
        "ERRORS"
    );
    for d in &g.disks {
        let io = &d.io;
        let requests = io.reads.count + io.writes.count;
        let micros = io.reads.latency_micros_sum + io.writes.latency_micros_sum;
        println!(
            "  {:>4}  {:<16} {:<14} {:<9} {:>9} {:>10} {:>8} {:>10} {:>8} {:>7} {:>7}",
            d.number,
            d.label,
            d.failgroup,
            d.state,
            d.stale_aus,
            io.reads.count,
            io.reads.bytes >> 20,
            io.writes.count,
            io.writes.bytes >> 20,
            micros.checked_div(requests).unwrap_or(0),
            io.reads.errors + io.writes.errors + io.flushes.errors + io.discards.errors
        );
    }
    if !g.state_changes.is_empty() {
        let said: Vec<String> = g
            .state_changes
            .iter()
            .map(|c| format!("{} -> {} x{}", c.disk, c.to, c.count))
            .collect();
        println!(
            "  disk state changes since the service started (the log says why): {}",
            said.join(", ")
        );
    }
}

/// The attached volumes in `cairn status`: size and I/O, one a line.
fn show_volume_status(volumes: &[VolumeStatus]) {
    if !volumes.is_empty() {
        println!(
            "{:<32} {:<12} {:>8} {:>10} {:>9} {:>10} {:>9} {:>9} {:>8} {:>6}",
            "VOLUME",
            "DEVICE",
            "SIZE_MB",
            "READS",
            "READ_MIB",
            "WRITES",
            "WRIT_MIB",
            "DISCARDS",
            "FLUSHES",
            "QUEUE"
        );
    }
    for v in volumes {
        println!(
            "{:<32} {:<12} {:>8} {:>10} {:>9} {:>10} {:>9} {:>9} {:>8} {:>6}",
            v.name,
            v.device,
            v.size_bytes >> 20,
            v.reads,
            v.read_bytes >> 20,
            v.writes,
            v.write_bytes >> 20,
            v.discards,
            v.flushes,
            v.in_flight
        );
    }
}
