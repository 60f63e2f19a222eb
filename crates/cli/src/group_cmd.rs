//! `cairn group ...` and the file commands (`ls`, `du`, `mkdir`, `rm`, `cp`,
//! `mkalias`). Each command mounts the group it names (taking its lock), does its
//! work, and dismounts; a crash in between is recovered by the next mount.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use cairn_io::host::Host;
use cairn_io::FileEngine;
use cairn_store::discovery::DiscoveryString;
use cairn_store::group::{self, Group, GroupSpec, Redundancy};
use cairn_store::group_admin::{self, DiskArg};
use cairn_store::group_copy::{self, Copied, CopyRequest};
use cairn_store::group_lock;
use cairn_store::names::GroupPath;
use clap::Subcommand;
use serde::Serialize;

use crate::console::{errln, out, outln, Console};
use crate::{discovery, engine_depth, now_unix_seconds, Discover, EngineArg, Outcome, Output};

/// Requests in flight for group work (data copies, metadata mirrors).
const GROUP_DEPTH: usize = 64;

#[derive(Subcommand)]
pub enum GroupCommand {
    /// Create a disk group over disks (unlabelled devices are labelled NAME_0000, NAME_0001 ...).
    Create {
        /// Letters, digits and '_', starting with a letter.
        name: String,
        /// external (1 copy), normal (2 copies), high (3 copies).
        #[arg(long, default_value = "normal")]
        redundancy: String,
        /// A disk, optionally with its failure group: PATH or PATH=FAILGROUP. Repeat for each disk.
        #[arg(long = "disk", required = true, value_name = "PATH[=FAILGROUP]")]
        disks: Vec<String>,
        /// Allocation unit: 1M, 2M, 4M, 8M, 16M, 32M or 64M.
        #[arg(long, default_value = "4M")]
        au_size: String,
        /// Logical sector size the group uses (512 or 4096); every disk must have it.
        #[arg(long)]
        sector_size: Option<u32>,
        /// Take devices that carry other data, or disks of a group that cannot use them (a create that never finished, or a disk it recorded offline).
        #[arg(long)]
        force: bool,
        /// Take disks of group NAME even though it is mountable and counts on them (it goes DEGRADED or UNMOUNTABLE). Repeat for several groups.
        #[arg(long = "take-from-group", value_name = "NAME")]
        take_from_group: Vec<String>,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// List the disk groups the discovery string reaches (like asmcmd lsdg).
    List {
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// The disks of a group: number, label, failure group, path, state, AUs.
    Disks {
        name: String,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Mount a group (replaying its journal and finishing interrupted work), report, and dismount.
    Mount {
        name: String,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Cross-check extent maps, allocation tables, names, metadata mirrors and superblocks (metadata only: data blocks carry no checksums). Exit 0 clean, 1 problems, 3 DEGRADED.
    Check {
        name: String,
        /// Fix what is safely fixable.
        #[arg(long)]
        repair: bool,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Read every copy of every extent and of the metadata, and report each disagreement by file and offset; --repair restores metadata from its newest valid generation and data from the primary copy.
    Scrub {
        name: String,
        /// Chunks of up to 1 MiB read at once (every copy of each).
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024))]
        power: u16,
        /// Rewrite what disagrees: metadata from its newest valid copy, data from the primary copy (or, when the primary cannot be read, the first current copy).
        #[arg(long)]
        repair: bool,
        /// Through the service: wait for the scrub to end, showing its progress (without a service, the command always waits).
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Give a thin array back the free space it may still hold: discard every free AU not discarded since it was last written (docs/thin-reclaim.md).
    Reclaim {
        name: String,
        /// Say per disk what would be given back (or written), and change nothing.
        #[arg(long)]
        explain: bool,
        /// Pace, in MB/s of range per disk (0: unpaced). The pace also halves while the group's own I/O on a disk slows by half.
        #[arg(long, value_name = "MB/s", default_value = "256")]
        rate: String,
        /// Requests in flight per disk (1-16).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
        power: u16,
        /// Write zeros over the free space instead, for arrays that only detect zeros (never on a disk that accepts discard, unless --force).
        #[arg(long)]
        zero_fill: bool,
        /// With --zero-fill: zero-fill disks that accept discard, too.
        #[arg(long, requires = "zero_fill")]
        force: bool,
        /// First move the data towards the start of each disk (online, through the rebalance engine), so that the free space is one tail; then give it back.
        #[arg(long)]
        compact: bool,
        /// Through the service: wait for the reclaim to end, showing its progress (without a service, the command always waits).
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// What the group uses on each disk, what is free, what a reclaim would give back, and what the device physically holds.
    Space {
        name: String,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Bring OFFLINE disks back: each is resynced (only the AUs it missed are copied) and goes ONLINE.
    Online {
        name: String,
        /// Disk labels (as `group disks` shows them).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        disks: Vec<String>,
        /// Every OFFLINE disk that is attached.
        #[arg(long)]
        all: bool,
        /// Resync I/Os in flight (1-1024).
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=1024))]
        power: u16,
        /// Through the service: wait for the operation to end, showing its progress (without a service, the command always waits).
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Take disks offline (for maintenance): not read or written, their copies marked stale as writes miss them; they stay OFFLINE until `group online`.
    Offline {
        name: String,
        #[arg(required = true)]
        disks: Vec<String>,
        /// Drop the disk (and rebuild its copies elsewhere) once it has been offline this long while the group is mounted, instead of the group's disk_repair_time: a number with s, m, h or d.
        #[arg(long, value_name = "DURATION")]
        drop_after: Option<String>,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Add, drop and resize disks in one operation, then rebalance, so data moves once (ASM's ALTER DISKGROUP ... ADD ... DROP ... RESIZE ... REBALANCE).
    Alter {
        name: String,
        /// A disk to add, optionally with its failure group: PATH or PATH=FAILGROUP. Repeat for each disk.
        #[arg(long = "add", value_name = "PATH[=FAILGROUP]")]
        add: Vec<String>,
        /// A disk to drop, by label: its data moves to the others first (DROPPING), then it leaves (FORMER). Repeat for each disk.
        #[arg(long = "drop", value_name = "DISK")]
        drop: Vec<String>,
        /// A new size for a disk, by label: DISK=SIZE (4096, 512M, 20G). A grow (the device grew first) takes effect at once; a shrink moves the data past the new end first. Repeat for each disk.
        #[arg(long = "resize", value_name = "DISK=SIZE", value_parser = resize_arg)]
        resize: Vec<(String, u64)>,
        /// Relocation I/Os in flight (1-1024; at most 4 per disk the rebalance reads or writes); 0 makes the change and leaves the rebalance paused.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(0..=1024))]
        power: u16,
        /// Change nothing: print the exact work (AUs and bytes each disk gives and takes) and its estimated time (ASM's EXPLAIN WORK).
        #[arg(long)]
        explain: bool,
        /// Take an added device that carries another owner's data or another group's label.
        #[arg(long)]
        force: bool,
        /// Through the service: wait for the rebalance to end, showing its progress (without a service, the command always waits).
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Start or resume the rebalance (drops pending, copies to rebuild, balance); power 0 pauses it.
    Rebalance {
        name: String,
        /// Relocation I/Os in flight (1-1024; at most 4 per disk the rebalance reads or writes); 0 pauses.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(0..=1024))]
        power: u16,
        /// Through the service: wait for the operation to end, showing its progress (without a service, the command always waits).
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Cancel the drops still pending (what already moved stays moved).
    Undrop {
        name: String,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Drop an OFFLINE disk that is gone: its copies are rebuilt from their mirrors (not in external redundancy).
    DropDisk {
        name: String,
        disk: String,
        /// Required: the disk's data is not moved off it but rebuilt from the other copies.
        #[arg(long, required = true)]
        force: bool,
        /// Rebuild I/Os in flight (1-1024); 0 leaves the rebuild for `group rebalance`.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(0..=1024))]
        power: u16,
        /// Through the service: wait for the operation to end, showing its progress (without a service, the command always waits).
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Put a new disk in place of an OFFLINE one (same failure group), filled from the mirrors.
    Replace {
        name: String,
        /// The OFFLINE disk, by label.
        disk: String,
        /// The new device.
        #[arg(long = "with", value_name = "PATH")]
        with: PathBuf,
        /// Rebuild I/Os in flight (1-1024).
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024))]
        power: u16,
        /// Take a new device that carries another owner's data or another group's label.
        #[arg(long)]
        force: bool,
        /// Through the service: wait for the rebuild to end, showing its progress (without a service, the command always waits).
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Long operations running or interrupted (V$ASM_OPERATION): pass, state, power, AUs done/total, rate, ETA.
    Ops {
        name: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Set group attributes: KEY=VALUE ... (`group get` lists the keys).
    Set {
        name: String,
        #[arg(required = true, value_name = "KEY=VALUE")]
        pairs: Vec<String>,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Show group attributes (every one, or the keys named).
    Get {
        name: String,
        keys: Vec<String>,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
}

/// Mount group `name` for a command that writes, saying on stderr what the
/// mount found (disks marked offline, damage).
fn mount<'e>(
    c: &mut Console<'_, '_>,
    engine: &'e mut dyn FileEngine,
    discover: &Discover,
    name: &str,
) -> Result<group_admin::Mounted<'e>> {
    let host = Host::real();
    let d = discovery(discover.discover.as_deref())?;
    let m = group_admin::mount(engine, &host, &d, name, &group_lock::run_dir())?;
    warn_mount(c, m.group.name(), &m.report);
    Ok(m)
}

/// Mount group `name` to write (`mount`) or only to look (`mount_read_only`).
fn mount_to<'e>(
    c: &mut Console<'_, '_>,
    engine: &'e mut dyn FileEngine,
    discover: &Discover,
    name: &str,
    write: bool,
) -> Result<group_admin::Mounted<'e>> {
    if write {
        mount(c, engine, discover, name)
    } else {
        mount_read_only(c, engine, discover, name)
    }
}

/// Dismount a group `mount_to` mounted.
fn close(c: &mut Console<'_, '_>, group: Group<'_>, wrote: bool) -> Result<()> {
    if wrote {
        finish(c, group)
    } else {
        Ok(group.dismount()?)
    }
}

/// Mount group `name` for listing or inspecting: nothing is written, a
/// missing disk stays as it is recorded.
fn mount_read_only<'e>(
    c: &mut Console<'_, '_>,
    engine: &'e mut dyn FileEngine,
    discover: &Discover,
    name: &str,
) -> Result<group_admin::Mounted<'e>> {
    let host = Host::real();
    let d = discovery(discover.discover.as_deref())?;
    let m = group_admin::mount_read_only(engine, &host, &d, name, &group_lock::run_dir())?;
    warn_mount(c, m.group.name(), &m.report);
    Ok(m)
}

/// What a mount found that a person must hear about, one line each on stderr.
fn warn_mount(c: &mut Console<'_, '_>, group: &str, report: &group::MountReport) {
    for w in &report.warnings {
        errln!(c, "cairn: warning: group {group}: {w}");
    }
    for d in &report.damage {
        errln!(c, "cairn: warning: group {group}: DAMAGE: {d}");
    }
    for d in &report.disks_marked_offline {
        errln!(c,
            "cairn: warning: group {group}: disk {d} is not available (not found, or it could not be opened) and is now marked OFFLINE; the group runs DEGRADED on the other copies (check the discovery string and that the disk is attached)"
        );
    }
    for d in &report.disks_missing {
        errln!(c,
            "cairn: warning: group {group}: disk {d} is not available (not found, or it could not be opened); reading from the other copies, nothing was changed (check the discovery string and that the disk is attached)"
        );
    }
    for d in &report.disks_refused {
        errln!(c, "cairn: warning: group {group}: {d}");
    }
    for d in &report.disks_dropped_expired {
        errln!(c,
            "cairn: warning: group {group}: disk {d} was OFFLINE past its repair time (disk_repair_time) and is dropped by force; `cairn group rebalance {group}` rebuilds its copies from the mirrors"
        );
    }
    if let Some(r) = &report.resync {
        errln!(
            c,
            "cairn: group {group}: resynced {} stale AU(s) ({} MiB) and {} metadata block(s){}",
            r.aus_copied,
            r.bytes_copied >> 20,
            r.metadata_blocks_rewritten,
            if r.disks_online.is_empty() {
                String::new()
            } else {
                format!("; disk(s) {} ONLINE again", r.disks_online.join(", "))
            }
        );
        for a in &r.aus_without_source {
            errln!(c, "cairn: warning: group {group}: no good copy to resync {a}: it stays stale and is never read");
        }
    }
}

/// Dismount a group a command wrote to, saying on stderr which disks it took
/// offline after an I/O error.
fn finish(c: &mut Console<'_, '_>, group: Group<'_>) -> Result<()> {
    let name = group.name().to_string();
    let offlined = group.disks_taken_offline().to_vec();
    let result = group.dismount();
    warn_offlined(c, &name, &offlined);
    Ok(result?)
}

/// Say which disks a command took offline after an I/O error — whether the
/// command then succeeded or not: the disk is out of use for good.
pub(crate) fn warn_offlined(c: &mut Console<'_, '_>, group: &str, disks: &[String]) {
    for d in disks {
        errln!(c,
            "cairn: warning: group {group}: disk {d} and is now OFFLINE; the group runs DEGRADED on the other copies (check the disk and the kernel log, dmesg)"
        );
    }
}

/// A writing command's result, with the disks it took offline said even when
/// it failed.
fn said<T, E>(c: &mut Console<'_, '_>, group: &Group<'_>, result: Result<T, E>) -> Result<T, E> {
    if result.is_err() {
        warn_offlined(c, group.name(), group.disks_taken_offline());
    }
    result
}

pub fn run_group(
    c: &mut Console<'_, '_>,
    command: GroupCommand,
    engine_kind: EngineArg,
) -> Result<Outcome> {
    let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
    match command {
        GroupCommand::Create {
            name,
            redundancy,
            disks,
            au_size,
            sector_size,
            force,
            take_from_group,
            discover,
            output,
        } => {
            let redundancy = Redundancy::parse(&redundancy).with_context(|| {
                format!("redundancy {redundancy:?}: use external, normal or high")
            })?;
            let au_bytes = crate::parse_size(&au_size)?;
            if let Some(s) = sector_size {
                if s != 512 && s != 4096 {
                    bail!("sector size {s}: use 512 or 4096");
                }
            }
            let d = discovery(discover.discover.as_deref())?;
            let spec = GroupSpec {
                name,
                redundancy,
                au_bytes,
                sector_bytes: sector_size,
                force,
                now_unix_seconds: now_unix_seconds(),
                group_uuid: uuid::Uuid::new_v4(),
            };
            let args: Vec<DiskArg> = disks.iter().map(|s| DiskArg::parse(s)).collect();
            let host = Host::real();
            let (mut group, _lock, created) = group_admin::create(
                engine.as_mut(),
                &host,
                &args,
                &spec,
                &take_from_group,
                Some(&d),
                &group_lock::run_dir(),
            )?;
            let summary = summary_of(&group);
            let written = group_bytes_written(&mut group);
            finish(c, group)?;
            for d in &created {
                if let Some(what) = &d.overrode {
                    errln!(
                        c,
                        "cairn: warning: {} was {what}; it is now {} of {}",
                        d.path.display(),
                        d.label,
                        summary.name
                    );
                }
            }
            #[derive(Serialize)]
            struct Created {
                group: GroupSummary,
                disks: Vec<group_admin::CreatedDisk>,
                bytes_written: u64,
            }
            let report = Created {
                group: summary,
                disks: created,
                bytes_written: written,
            };
            if output.json {
                c.json(&report)?;
            } else {
                outln!(c,
                    "created disk group {} ({} redundancy, {} MiB AUs, {}-byte sectors) on {} disk(s):",
                    report.group.name,
                    report.group.redundancy,
                    report.group.au_mb,
                    report.group.sector_bytes,
                    report.disks.len()
                );
                for d in &report.disks {
                    outln!(
                        c,
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
                        outln!(c, "    overwrote: {what}");
                    }
                }
                outln!(
                    c,
                    "{} MiB usable for files; metadata written: {} KiB",
                    report.group.usable_file_mb,
                    report.bytes_written / 1024
                );
            }
        }
        GroupCommand::List { discover, output } => {
            let d = discovery(discover.discover.as_deref())?;
            let rows = list_rows(c, engine_kind, &d, &|_| None)?;
            if output.json {
                c.json(&rows)?;
            } else {
                out!(c, "{}", render_list(&rows));
            }
        }
        GroupCommand::Disks {
            name,
            discover,
            output,
        } => {
            let m = mount_read_only(c, engine.as_mut(), &discover, &name)?;
            let disks = m.group.disks();
            let au = m.group.au_bytes();
            let paths = m.paths.clone();
            m.group.dismount()?;
            show_disks(c, disks, au, &paths, output.json)?;
        }
        GroupCommand::Mount {
            name,
            discover,
            output,
        } => {
            let m = mount(c, engine.as_mut(), &discover, &name)?;
            let summary = summary_of(&m.group);
            let report = m.report;
            finish(c, m.group)?;
            if output.json {
                #[derive(Serialize)]
                struct Mounted {
                    group: GroupSummary,
                    recovery: group::MountReport,
                }
                c.json(&Mounted {
                    group: summary,
                    recovery: report,
                })?;
            } else {
                outln!(
                    c,
                    "mounted {} ({}): {} journal record(s) replayed",
                    summary.name,
                    summary.state,
                    report.journal_records_replayed
                );
                for d in &report.disks_marked_offline {
                    outln!(c, "  disk marked offline: {d}");
                }
                for d in &report.disks_held {
                    outln!(c, "  disk {d} stays OFFLINE (taken offline on request; `cairn group online` brings it back)");
                }
                for o in &report.operations_recovered {
                    outln!(c, "  recovered: {o}");
                }
                for w in &report.warnings {
                    outln!(c, "  warning: {w}");
                }
                outln!(c, "dismounted cleanly");
            }
        }
        GroupCommand::Check {
            name,
            repair,
            discover,
            output,
        } => {
            let mut m = mount_to(c, engine.as_mut(), &discover, &name, repair)?;
            let report = m.group.check(repair);
            let report = said(c, &m.group, report)?;
            let group_name = m.group.name().to_string();
            close(c, m.group, repair)?;

            return show_check(c, &group_name, &report, output.json);
        }
        GroupCommand::Scrub {
            name,
            power,
            repair,
            wait: _,
            discover,
            output,
        } => {
            let mut m = mount_to(c, engine.as_mut(), &discover, &name, repair)?;
            let report = run_scrub(&mut m.group, usize::from(power), repair, output.json);
            let report = said(c, &m.group, report)?;
            let group_name = m.group.name().to_string();
            close(c, m.group, repair)?;
            return show_scrub(c, &group_name, &report, output.json);
        }
        GroupCommand::Reclaim {
            name,
            explain,
            rate,
            power,
            zero_fill,
            force,
            compact,
            wait: _,
            discover,
            output,
        } => {
            let options = reclaim_options(explain, &rate, power, (zero_fill, force), compact)?;
            let mut m = mount_to(c, engine.as_mut(), &discover, &name, !explain)?;
            let report = run_reclaim(&mut m.group, options, output.json);
            let report = said(c, &m.group, report)?;
            let group_name = m.group.name().to_string();
            close(c, m.group, !explain)?;
            return show_reclaim(c, &group_name, &report, output.json);
        }
        GroupCommand::Space {
            name,
            discover,
            output,
        } => {
            let m = mount_read_only(c, engine.as_mut(), &discover, &name)?;
            let rows = group_admin::space(&m.group, &m.paths);
            m.group.dismount()?;

            show_space(c, rows, output.json)?;
        }
        GroupCommand::Online {
            name,
            disks,
            all,
            power,
            wait: _,
            discover,
            output,
        } => {
            // The mount itself resyncs disks that came back on their own.
            let mut m = mount(c, engine.as_mut(), &discover, &name)?;
            let from_mount = m.report.resync.clone().unwrap_or_default();
            let bar = au_progress(output.json);
            bar.set_message("resync");
            // Listed by `group ops` while it runs; redundancy is whole
            // when it ends.
            let mut tracker = cairn_store::ops::OpTracker::start(
                &group_lock::run_dir(),
                m.group.name(),
                m.group.uuid(),
                "RESYNC",
                usize::from(power),
                m.group.au_bytes(),
                cairn_store::ops::REBUILD_ALL,
                false,
            );
            let report =
                m.group
                    .online_disks((!all).then_some(&disks[..]), usize::from(power), &mut |p| {
                        bar.set_length(p.total);
                        bar.set_position(p.done);
                        tracker.update(p.done, p.total, p.bytes_done);
                    });
            bar.finish_and_clear();
            tracker.finish();
            let report = said(c, &m.group, report)?;
            let rows = m.group.disks();
            let group_name = m.group.name().to_string();
            finish(c, m.group)?;

            return show_online(
                c,
                group_name,
                (from_mount, report),
                rows,
                (all, &disks),
                output.json,
            );
        }
        GroupCommand::Offline {
            name,
            disks,
            drop_after,
            discover,
            output,
        } => {
            let minutes = drop_after_minutes(drop_after.as_deref())?;
            let mut m = mount(c, engine.as_mut(), &discover, &name)?;
            let done = m.group.offline_disks(&disks, minutes);
            let done = said(c, &m.group, done)?;
            let group_name = m.group.name().to_string();
            let rows = m.group.disks();
            finish(c, m.group)?;

            show_offline(c, group_name, done, rows, output.json)?;
        }
        GroupCommand::Alter {
            name,
            add,
            drop,
            resize,
            power,
            explain,
            force,
            wait: _,
            discover,
            output,
        } => {
            alter_named_something(&add, &drop, &resize)?;
            let host = Host::real();
            let d = discovery(discover.discover.as_deref())?;
            let args: Vec<DiskArg> = add.iter().map(|a| DiskArg::parse(a)).collect();
            let (new, added) = group_admin::open_new_disks(
                engine.as_mut(),
                &host,
                &d,
                &name,
                &args,
                force,
                now_unix_seconds(),
            )?;
            let mut joined = false;
            let outcome = alter(
                c,
                engine.as_mut(),
                (&discover, &name),
                &new,
                (&drop, &resize),
                (power, explain, force, output.json),
                &mut joined,
            );
            // Refused before the disks joined, or only explained: the disks
            // this call labelled are as they were. Once they joined, their
            // labels are the group's (whatever failed after).
            if !joined && (outcome.is_err() || explain) {
                group_admin::erase_new_labels(engine.as_mut(), &added);
            }
            return outcome;
        }
        GroupCommand::Rebalance {
            name,
            power,
            wait: _,
            discover,
            output,
        } => {
            let m = mount(c, engine.as_mut(), &discover, &name)?;
            rebalance_and_finish(c, m.group, power, output.json)?;
        }
        GroupCommand::Undrop {
            name,
            discover,
            output,
        } => {
            let mut m = mount(c, engine.as_mut(), &discover, &name)?;
            let done = m.group.undrop();
            let done = said(c, &m.group, done)?;
            let group_name = m.group.name().to_string();
            finish(c, m.group)?;

            show_undrop(c, &group_name, &done, output.json)?;
        }
        GroupCommand::DropDisk {
            name,
            disk,
            force: _,
            power,
            wait: _,
            discover,
            output,
        } => {
            let mut m = mount(c, engine.as_mut(), &discover, &name)?;
            let done = m.group.drop_disks_forced(std::slice::from_ref(&disk));
            said(c, &m.group, done)?;
            rebalance_and_finish(c, m.group, power, output.json)?;
        }
        GroupCommand::Replace {
            name,
            disk,
            with,
            power,
            force,
            wait: _,
            discover,
            output,
        } => {
            let host = Host::real();
            let d = discovery(discover.discover.as_deref())?;
            let failgroup = {
                let m = mount_read_only(c, engine.as_mut(), &discover, &name)?;
                let rows = m.group.disks();
                m.group.dismount()?;
                replaced_failgroup(&rows, &name, &disk)?
            };
            let args = [DiskArg {
                path: with.clone(),
                failgroup: Some(failgroup),
            }];
            let (new, added) = group_admin::open_new_disks(
                engine.as_mut(),
                &host,
                &d,
                &name,
                &args,
                force,
                now_unix_seconds(),
            )?;
            let mut joined = false;
            let outcome = (|| -> Result<Outcome> {
                let mut m = mount(c, engine.as_mut(), &discover, &name)?;
                let prepared = m.group.prepare_adds(&new, force);
                let prepared = said(c, &m.group, prepared)?;
                replace_blocker(&m.group.disks(), &name, &disk)?;
                // As for alter: the labels stay once the add began.
                joined = true;
                let result = m.group.add_disks(prepared);
                said(c, &m.group, result)?;
                let result = m.group.drop_disks_forced(std::slice::from_ref(&disk));
                said(c, &m.group, result)?;
                rebalance_and_finish(c, m.group, power, output.json)?;
                Ok(Outcome::Done)
            })();
            if outcome.is_err() && !joined {
                group_admin::erase_new_labels(engine.as_mut(), &added);
            }
            return outcome;
        }
        GroupCommand::Ops { name, output } => {
            let ops = cairn_store::ops::list(&group_lock::run_dir(), name.as_deref());

            show_ops(c, ops, name, output.json)?;
        }
        GroupCommand::Set {
            name,
            pairs,
            discover,
            output,
        } => {
            let parsed = attribute_pairs(&name, &pairs)?;
            let mut m = mount(c, engine.as_mut(), &discover, &name)?;
            let result = m.group.set_attributes(&parsed);
            said(c, &m.group, result)?;
            let keys: Vec<String> = parsed.iter().map(|(k, _)| k.clone()).collect();
            let now = m.group.get_attributes(&keys)?;
            finish(c, m.group)?;
            show_attributes(c, now, output.json)?;
        }
        GroupCommand::Get {
            name,
            keys,
            discover,
            output,
        } => {
            let m = mount_read_only(c, engine.as_mut(), &discover, &name)?;
            let got = m.group.get_attributes(&keys);
            m.group.dismount()?;
            let got = got?;
            show_attributes(c, got, output.json)?;
        }
    }
    Ok(Outcome::Done)
}

/// `group alter` once the new disks are open: mount, check the change,
/// explain it, or make it and rebalance.
fn alter(
    c: &mut Console<'_, '_>,
    engine: &mut dyn FileEngine,
    (discover, name): (&Discover, &str),
    new: &[group::NewDisk],
    (drops, resizes): (&[String], &[(String, u64)]),
    (power, explain, force, json): (u16, bool, bool, bool),
    joined: &mut bool,
) -> Result<Outcome> {
    let mut m = mount(c, engine, discover, name)?;
    let prepared = m.group.prepare_adds(new, force);
    let prepared = said(c, &m.group, prepared)?;
    let work = m.group.explain_change(&prepared, drops, resizes);
    let mut work = said(c, &m.group, work)?;
    let group_name = m.group.name().to_string();
    if explain {
        let sources = explain_sources(&work);
        let rates = m.group.measure_read_rates(&sources, 64 << 20);
        work.estimate(&rates);
        m.group.dismount()?;
        show_explain(c, &group_name, &work, json)?;
        return Ok(Outcome::Done);
    }
    // A rebalance that could not run would leave the change half done:
    // refused before anything changes (power 0 asks for no rebalance).
    if power > 0 {
        let blocked = m.group.rebalance_blocker();
        said(c, &m.group, blocked)?;
    }
    // From here the labels stay, whatever follows: a disk may have joined
    // even if the call fails part-way (one left labelled but not listed is
    // taken again by the next `alter --add`).
    *joined = true;
    let added = m.group.add_disks(prepared);
    let added = said(c, &m.group, added)?;
    if !drops.is_empty() {
        let dropped = m.group.request_drops(drops);
        said(c, &m.group, dropped)?;
    }
    let resized = if resizes.is_empty() {
        Vec::new()
    } else {
        let r = m.group.request_resizes(resizes);
        said(c, &m.group, r)?
    };
    show_altered(c, &group_name, &added, drops, &resized, json)?;
    rebalance_and_finish(c, m.group, power, json)?;
    Ok(Outcome::Done)
}

/// `alter` refuses a call that names no change.
pub(crate) fn alter_named_something(
    add: &[String],
    drop: &[String],
    resize: &[(String, u64)],
) -> Result<()> {
    if add.is_empty() && drop.is_empty() && resize.is_empty() {
        bail!("name disks to --add PATH[=FAILGROUP], --drop DISK or --resize DISK=SIZE");
    }
    Ok(())
}

/// The disks an explained change reads from (their read rates estimate
/// its time).
pub(crate) fn explain_sources(work: &group::relocate::Explain) -> Vec<u16> {
    work.disks
        .iter()
        .filter(|d| d.bytes_out > 0 || d.bytes_in > 0)
        .map(|d| d.number)
        .collect()
}

/// `alter --explain`: the work a change would do, per disk.
pub(crate) fn show_explain(
    c: &mut Console<'_, '_>,
    group_name: &str,
    work: &group::relocate::Explain,
    json: bool,
) -> Result<()> {
    if json {
        return c.json(&serde_json::json!({ "group": group_name, "explain": work }));
    }
    outln!(c,
        "group {group_name}: the change would move {} AU(s) ({} MiB) in {} move(s): {} rebuild, {} evacuate, {} balance{}",
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
    outln!(
        c,
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
        outln!(
            c,
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

/// What `alter` changed, before its rebalance runs.
pub(crate) fn show_altered(
    c: &mut Console<'_, '_>,
    group_name: &str,
    added: &[String],
    drops: &[String],
    resized: &[String],
    json: bool,
) -> Result<()> {
    if json {
        return Ok(());
    }
    if !added.is_empty() {
        outln!(c, "group {group_name}: added {}", added.join(", "));
    }
    if !drops.is_empty() {
        outln!(
            c,
            "group {group_name}: dropping {}",
            drops.join(", ").to_ascii_uppercase()
        );
    }
    for line in resized {
        outln!(c, "group {group_name}: {line}");
    }
    Ok(())
}

/// `replace`: the failure group the new disk joins (the replaced one's),
/// which must be OFFLINE.
pub(crate) fn replaced_failgroup(
    rows: &[group::DiskInfo],
    name: &str,
    disk: &str,
) -> Result<String> {
    match rows.iter().find(|r| r.label.eq_ignore_ascii_case(disk)) {
        None => bail!("group {name} has no disk {disk}; `cairn group disks {name}` lists its disks"),
        Some(r) if r.state != cairn_format::group::DiskState::Offline => bail!(
            "disk {disk} is {}: only an OFFLINE disk is replaced; `cairn group alter {name} --add PATH --drop {disk}` swaps a working disk, moving its data once",
            r.state.as_str()
        ),
        Some(r) => Ok(r.failgroup.clone()),
    }
}

/// `replace`: the rebuild must be able to run once the new disk is in, so
/// no other disk may be out of service.
pub(crate) fn replace_blocker(rows: &[group::DiskInfo], name: &str, disk: &str) -> Result<()> {
    if let Some(other) = rows.iter().find(|d| {
        !d.label.eq_ignore_ascii_case(disk)
            && !d.dropped_by_force
            && d.state != cairn_format::group::DiskState::Online
    }) {
        bail!(
            "disk {} is {} too: bring it back (`cairn group online {name} {}`) or drop it (`cairn group drop-disk {name} {} --force`) before replacing {disk}",
            other.label,
            other.state.as_str(),
            other.label,
            other.label
        );
    }
    Ok(())
}

/// Run (or resume) the rebalance, dismount, and say what it did.
fn rebalance_and_finish(
    c: &mut Console<'_, '_>,
    mut group: Group<'_>,
    power: u16,
    json: bool,
) -> Result<()> {
    let report = run_rebalance(&mut group, usize::from(power), json);
    let report = said(c, &group, report)?;
    let rows = group.disks();
    let group_name = group.name().to_string();
    finish(c, group)?;
    print_rebalance(c, &group_name, &report, &rows, json)
}

/// Run (or resume) a rebalance with a progress bar on a terminal and a
/// status file for `group ops`.
fn run_rebalance(
    group: &mut Group<'_>,
    power: usize,
    json: bool,
) -> Result<group::relocate::RebalanceReport, group::GroupError> {
    let mut tracker = rebalance_tracker(group, power);
    let bar = au_progress(json);
    bar.set_message("rebalance");
    let report = group.rebalance(power, &mut |p| {
        bar.set_length(p.total);
        bar.set_position(p.done);
        if p.compacting {
            bar.set_message("compact");
        }
        if let Some(t) = tracker.as_mut() {
            if p.compacting {
                t.set_pass("COMPACT");
            }
            t.update(p.done, p.total, p.bytes_done);
        }
    });
    bar.finish_and_clear();
    if let Some(t) = tracker {
        t.finish();
    }
    report
}

pub(crate) fn print_rebalance(
    c: &mut Console<'_, '_>,
    group_name: &str,
    report: &group::relocate::RebalanceReport,
    rows: &[group::DiskInfo],
    json: bool,
) -> Result<()> {
    if json {
        #[derive(Serialize)]
        struct Rebalanced<'a> {
            group: &'a str,
            rebalance: &'a group::relocate::RebalanceReport,
            disks: &'a [group::DiskInfo],
        }
        return c.json(&Rebalanced {
            group: group_name,
            rebalance: report,
            disks: rows,
        });
    }
    if report.paused {
        outln!(c,
            "group {group_name}: rebalance paused (power 0) with {} move(s) planned; `cairn group rebalance {group_name} --power N` resumes it",
            report.moves_planned
        );
        return Ok(());
    }
    outln!(c,
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
        errln!(c, "warning: not moved: {left}");
    }
    for lost in &report.aus_without_source {
        errln!(c, "warning: {lost}");
    }
    if !report.moves_left.is_empty() {
        bail!(
            "group {group_name}: {} move(s) could not be made (above); `cairn group rebalance {group_name}` tries again",
            report.moves_left.len()
        );
    }
    Ok(())
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

/// A pass over a group's bytes (`pass`, as `group ops` shows it) run by
/// `run` with a progress bar on a terminal (rate, done/total, ETA; nothing
/// when stderr is not one, or with --json) and a status file for `group
/// ops`.
fn tracked<'g, R>(
    group: &mut Group<'g>,
    (pass, power, message): (&str, usize, &'static str),
    json: bool,
    run: impl FnOnce(&mut Group<'g>, &mut dyn FnMut(group::resync::Progress)) -> R,
) -> R {
    let au = group.au_bytes();
    let mut tracker = cairn_store::ops::OpTracker::start(
        &group_lock::run_dir(),
        group.name(),
        group.uuid(),
        pass,
        power,
        au,
        0,
        false,
    );
    let bar = bytes_progress(json);
    bar.set_message(message);
    let result = run(group, &mut |p| {
        bar.set_length(p.total);
        bar.set_position(p.done);
        tracker.update(p.done / au, p.total.div_ceil(au), p.bytes_done);
    });
    bar.finish_and_clear();
    tracker.finish();
    result
}

/// Scrub with a progress bar on a terminal and a status file for `group ops`.
fn run_scrub(
    group: &mut Group<'_>,
    power: usize,
    repair: bool,
    json: bool,
) -> Result<group::scrub::ScrubReport, group::GroupError> {
    let message = if repair { "scrub --repair" } else { "scrub" };
    tracked(group, ("SCRUB", power, message), json, |g, progress| {
        g.scrub(power, repair, progress)
    })
}

/// The options of `group reclaim`; `--rate` is MB/s, a number of 0 or
/// more (checked here, before anything is mounted, for a one-line refusal).
pub(crate) fn reclaim_options(
    explain: bool,
    rate: &str,
    power: u16,
    (zero_fill, force): (bool, bool),
    compact: bool,
) -> Result<group::reclaim::ReclaimOptions> {
    let rate_mb = match rate.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => v,
        _ => bail!("--rate {rate:?} is not a rate: give MB/s per disk as a number (0: unpaced)"),
    };
    Ok(group::reclaim::ReclaimOptions {
        method: if zero_fill {
            group::reclaim::ReclaimMethod::ZeroFill
        } else {
            group::reclaim::ReclaimMethod::Discard
        },
        force,
        // (Any rate above 0 paces, however small.)
        rate_bytes: (rate_mb > 0.0).then_some(((rate_mb * 1e6) as u64).max(1)),
        power: usize::from(power),
        explain,
        compact,
    })
}

/// Reclaim with a progress bar on a terminal and a status file for `group ops`.
fn run_reclaim(
    group: &mut Group<'_>,
    options: group::reclaim::ReclaimOptions,
    json: bool,
) -> Result<group::reclaim::ReclaimReport, group::GroupError> {
    if options.explain {
        return group.reclaim(options, &mut |_| {});
    }
    let message = match options.method {
        group::reclaim::ReclaimMethod::Discard => "reclaim",
        group::reclaim::ReclaimMethod::ZeroFill => "reclaim --zero-fill",
    };
    tracked(
        group,
        ("RECLAIM", options.power, message),
        json,
        |g, progress| g.reclaim(options, progress),
    )
}

/// `group reclaim`: per disk what was returnable and what was given back
/// (or, `--explain`, would be). Requests a device refused: degraded (their
/// AUs stay returnable; the next reclaim tries them again).
pub(crate) fn show_reclaim(
    c: &mut Console<'_, '_>,
    group_name: &str,
    report: &group::reclaim::ReclaimReport,
    json: bool,
) -> Result<Outcome> {
    use group::reclaim::ReclaimMethod;
    let failed: u64 = report.disks.iter().map(|d| d.failed_requests).sum();
    if json {
        c.json(&serde_json::json!({ "group": group_name, "reclaim": report }))?;
    } else {
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
                outln!(
                    c,
                    "reclaim {group_name} --compact (explain, nothing changed): would first move {} extent copies ({} MiB) towards the start of their disks, freeing as much above them",
                    report.compact_moves,
                    report.compact_bytes >> 20
                );
            }
            outln!(
                c,
                "reclaim {group_name} (explain, nothing changed): would {verb} {} MiB of {} MiB returnable{}",
                doable >> 20,
                report.returnable_bytes >> 20,
                if report.compact_moves > 0 { " now" } else { "" }
            );
        } else if report.returnable_bytes == 0 && report.compact_moves == 0 {
            outln!(
                c,
                "nothing to reclaim in {group_name}: every free AU is known to hold nothing on its device"
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
                outln!(
                    c,
                    "compacted {group_name}: moved {} extent copies ({} MiB) towards the start of their disks",
                    report.compact_moves,
                    report.compact_bytes >> 20
                );
            }
            outln!(
                c,
                "reclaimed {group_name}: {done} {} MiB of {} MiB returnable in {:.1} s ({pace})",
                report.returned_bytes >> 20,
                report.returnable_bytes >> 20,
                report.elapsed_ms as f64 / 1000.0
            );
        }
        outln!(
            c,
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
                (None, n) => {
                    format!("{n} request(s) failed; their AUs stay returnable")
                }
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
            outln!(c, "{}", line.trim_end());
        }
    }
    if failed > 0 {
        return Ok(Outcome::Degraded(format!(
            "group {group_name}: {failed} reclaim request(s) failed (refused by the device, or not flushed); those AUs stay returnable (`cairn group space {group_name}`), and the next reclaim tries them again"
        )));
    }
    let skipped: u64 = report
        .disks
        .iter()
        .filter(|d| d.skipped.is_some())
        .map(|d| d.returnable_bytes)
        .sum();
    // Failed only when no disk could be worked on at all (every one
    // skipped) while some hold returnable space.
    let none_worked = report.disks.iter().all(|d| d.skipped.is_some());
    if !report.explain && none_worked && skipped > 0 {
        return Ok(Outcome::Failed(format!(
            "group {group_name}: nothing given back: {} MiB are returnable on disks this reclaim skips (see NOTE); for an array that only detects zeros, reclaim with --zero-fill",
            skipped >> 20
        )));
    }
    Ok(Outcome::Done)
}

/// A progress bar in bytes on a terminal; hidden with --json or a pipe.
pub(crate) fn bytes_progress(json: bool) -> indicatif::ProgressBar {
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

fn group_bytes_written(group: &mut Group<'_>) -> u64 {
    group.engine().stats().bytes_written
}

/// One row of `group list`.
#[derive(Debug, Clone, Serialize)]
pub struct GroupSummary {
    pub name: String,
    pub uuid: uuid::Uuid,
    pub state: String,
    pub redundancy: String,
    pub sector_bytes: u32,
    pub au_mb: u64,
    pub total_mb: u64,
    pub free_mb: u64,
    pub required_mirror_free_mb: u64,
    pub usable_file_mb: i64,
    pub offline_disks: usize,
    pub disks: usize,
    pub warnings: Vec<String>,
}

impl GroupSummary {
    /// A group this process could not mount: `state` says why in a word
    /// (MOUNTED elsewhere, UNMOUNTABLE), `why` in a sentence.
    fn unmountable(g: &group_admin::FoundGroup, state: &str, why: &str) -> Self {
        Self {
            name: g.name.clone(),
            uuid: g.uuid,
            state: format!("{state}: {why}"),
            redundancy: "?".into(),
            sector_bytes: 0,
            au_mb: 0,
            total_mb: 0,
            free_mb: 0,
            required_mirror_free_mb: 0,
            usable_file_mb: 0,
            offline_disks: 0,
            disks: g.paths.len(),
            warnings: Vec::new(),
        }
    }
}

pub(crate) fn summary_of(group: &Group<'_>) -> GroupSummary {
    let space = group.space();
    GroupSummary {
        name: group.name().to_string(),
        uuid: group.uuid(),
        state: if space.offline_disks > 0 {
            "DEGRADED".into()
        } else {
            "MOUNTABLE".into()
        },
        redundancy: group.redundancy().as_str().into(),
        sector_bytes: group.sector_bytes(),
        au_mb: group.au_bytes() >> 20,
        total_mb: space.total_mb,
        free_mb: space.free_mb,
        required_mirror_free_mb: space.required_mirror_free_mb,
        usable_file_mb: space.usable_file_mb,
        offline_disks: space.offline_disks,
        disks: group.disks().len(),
        warnings: Vec::new(),
    }
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

// ---------------------------------------------------------------------------
// File commands

fn group_path(text: &str) -> Result<GroupPath> {
    Ok(GroupPath::parse(text)?)
}

pub fn ls(
    c: &mut Console<'_, '_>,
    engine_kind: EngineArg,
    path: &str,
    discover: &Discover,
    output: &Output,
) -> Result<()> {
    let path = group_path(path)?;
    let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
    let m = mount_read_only(c, engine.as_mut(), discover, path.group.as_str())?;
    let group = m.group;
    let entries = group.list(&path)?;
    group.dismount()?;
    show_ls(c, &path, entries, output.json)
}

pub fn du(
    c: &mut Console<'_, '_>,
    engine_kind: EngineArg,
    path: &str,
    discover: &Discover,
    output: &Output,
) -> Result<()> {
    let path = group_path(path)?;
    let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
    let m = mount_read_only(c, engine.as_mut(), discover, path.group.as_str())?;
    let group = m.group;
    let (logical, allocated) = group.du(&path)?;
    group.dismount()?;
    show_du(c, &path, logical, allocated, output.json)
}

pub fn mkdir(
    c: &mut Console<'_, '_>,
    engine_kind: EngineArg,
    path: &str,
    parents: bool,
    discover: &Discover,
) -> Result<()> {
    let path = group_path(path)?;
    let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
    let m = mount(c, engine.as_mut(), discover, path.group.as_str())?;
    let mut group = m.group;
    let made = group.mkdir(&path, parents);
    said(c, &group, made)?;
    finish(c, group)?;
    Ok(())
}

/// `rm`: every path is tried; each failure is reported, along with what was
/// removed before it, in one line.
pub fn rm(
    c: &mut Console<'_, '_>,
    engine_kind: EngineArg,
    paths: &[String],
    discover: &Discover,
) -> Result<()> {
    rm_each(paths, |text| {
        let path = group_path(text)?;
        let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
        let m = mount(c, engine.as_mut(), discover, path.group.as_str())?;
        let mut group = m.group;
        let removed = group.remove(&path);
        said(c, &group, removed)?;
        finish(c, group)
    })
}

pub fn mkalias(
    c: &mut Console<'_, '_>,
    engine_kind: EngineArg,
    target: &str,
    alias: &str,
    discover: &Discover,
) -> Result<()> {
    let (target, alias) = alias_paths(target, alias)?;
    let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
    let m = mount(c, engine.as_mut(), discover, target.group.as_str())?;
    let mut group = m.group;
    let made = group.mkalias(&target, &alias);
    said(c, &group, made)?;
    finish(c, group)?;
    Ok(())
}

/// `cp`: OS file → group, group → OS file, group → group. The copy, and the
/// order of its steps, is [`group_copy::copy`]'s; this draws its progress and
/// says what it reports.
pub fn cp(
    c: &mut Console<'_, '_>,
    engine_kind: EngineArg,
    request: &CopyRequest<'_>,
    discover: &Discover,
) -> Result<()> {
    let host = Host::real();
    let mut shell = CpShell {
        engine_kind,
        discover,
        bar: None,
    };
    let copied = group_copy::copy(request, &host, &mut shell)?;
    if let Copied::In { report, .. } = copied {
        if report.stopped_at_max {
            errln!(
                c,
                "cairn: note: stopped at --max-size ({} bytes); {} had more",
                report.bytes_copied,
                request.source
            );
        }
    }
    Ok(())
}

/// What `cp` gives the copy (engines of the chosen kind, the discovery
/// string) and how it shows what it hears (stderr, a progress bar).
struct CpShell<'a> {
    engine_kind: EngineArg,
    discover: &'a Discover,
    bar: Option<indicatif::ProgressBar>,
}

impl group_copy::CopyShell for CpShell<'_> {
    type Error = anyhow::Error;

    fn engine(&mut self) -> Result<Box<dyn FileEngine>> {
        engine_depth(self.engine_kind, GROUP_DEPTH)
    }

    fn discovery(&mut self) -> Result<DiscoveryString> {
        discovery(self.discover.discover.as_deref())
    }

    fn run_dir(&mut self) -> PathBuf {
        group_lock::run_dir()
    }

    fn waiting_for_writer(&mut self, fifo: &str) {
        if std::io::stderr().is_terminal() {
            errln!(
                Console::Std,
                "cairn: {fifo} is a FIFO; waiting for a writer (Ctrl-C stops, leaving nothing)"
            );
        }
    }

    fn mounted(&mut self, group: &str, report: &group::MountReport) {
        warn_mount(&mut Console::Std, group, report);
    }

    fn progress_started(&mut self, total: Option<u64>) {
        self.bar = Some(progress(total));
    }

    fn progress(&mut self, done: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
        }
    }

    fn progress_finished(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    fn taken_offline(&mut self, group: &str, disks: &[String]) {
        warn_offlined(&mut Console::Std, group, disks);
    }
}

/// A progress bar on stderr for a copy of `total` bytes (a spinner with the
/// bytes and rate when the total is unknown, a stream): rate, done/total and
/// ETA on a terminal, nothing at all when stderr is not one (piped, in tests).
fn progress(total: Option<u64>) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let (bar, template) = match total {
        Some(total) => (
            indicatif::ProgressBar::new(total),
            "{bytes}/{total_bytes} {bytes_per_sec} ETA {eta} {wide_bar}",
        ),
        None => (
            indicatif::ProgressBar::new_spinner(),
            "{spinner} {bytes} {bytes_per_sec}",
        ),
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// `--resize DISK=SIZE`.
fn resize_arg(s: &str) -> Result<(String, u64), String> {
    let (disk, size) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: write DISK=SIZE, for example DATA_0001=20G"))?;
    if disk.trim().is_empty() {
        return Err(format!("{s:?}: name the disk before '=' (its label)"));
    }
    let bytes = crate::parse_size(size).map_err(|e| format!("{e:#}"))?;
    Ok((disk.trim().to_string(), bytes))
}

// ---------------------------------------------------------------------------
// Rendering, shared with the commands the service carries out (served.rs)

/// `group disks`: one row a disk.
pub(crate) fn show_disks(
    c: &mut Console<'_, '_>,
    disks: Vec<group::DiskInfo>,
    au: u64,
    paths: &std::collections::BTreeMap<u32, PathBuf>,
    json: bool,
) -> Result<()> {
    #[derive(Serialize)]
    struct Row {
        #[serde(flatten)]
        disk: group::DiskInfo,
        path: Option<PathBuf>,
        au_bytes: u64,
    }
    let rows: Vec<Row> = disks
        .into_iter()
        .map(|d| Row {
            path: d.device.and_then(|id| paths.get(&id.0).cloned()),
            disk: d,
            au_bytes: au,
        })
        .collect();
    if json {
        c.json(&rows)?;
    } else {
        outln!(
            c,
            "{:>4}  {:<16} {:<14} {:<8} {:>10} {:>10} {:>9} {:>11}  PATH",
            "DISK",
            "LABEL",
            "FAILGROUP",
            "STATE",
            "TOTAL_AU",
            "FREE_AU",
            "STALE_AU",
            "REPAIR_LEFT"
        );
        for r in rows {
            outln!(
                c,
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
                    .map_or_else(|| "(missing)".to_string(), |p| p.display().to_string()),
                if r.disk.dropped_by_force {
                    " (dropped by force: rebuilt from mirrors)".to_string()
                } else if r.disk.held {
                    " (offline on request)".to_string()
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
    }
    Ok(())
}

/// `group space`: one row a disk.
pub(crate) fn show_space(
    c: &mut Console<'_, '_>,
    rows: Vec<group_admin::DiskSpaceReport>,
    json: bool,
) -> Result<()> {
    if json {
        c.json(&rows)?;
    } else {
        outln!(
            c,
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
            outln!(
                c,
                "{:>4}  {:<16} {:>12} {:>14} {:>10} {:>15} {:>16} {:>11}  {}",
                r.number,
                r.label,
                r.size_bytes >> 20,
                r.group_used_bytes >> 20,
                mb(r.free_bytes),
                mb(r.returnable_bytes),
                r.device_allocated_bytes
                    .map_or_else(|| "-".to_string(), |b| (b >> 20).to_string()),
                r.missing_copy_bytes >> 20,
                r.path
                    .map_or_else(|| "(missing)".to_string(), |p| p.display().to_string())
            );
        }
    }
    Ok(())
}

/// `group check`: what it found, and the outcome (problems left: failed;
/// a disk not in use: degraded).
pub(crate) fn show_check(
    c: &mut Console<'_, '_>,
    group_name: &str,
    report: &group::check::CheckReport,
    json: bool,
) -> Result<Outcome> {
    if json {
        c.json(&report)?;
    } else {
        outln!(c,
        "checked {group_name}: {} files, {} extents, {} AUs in use, {} metadata blocks compared across mirrors",
        report.files,
        report.extents,
        report.aus_in_use,
        report.metadata_blocks_compared
    );
        for p in &report.problems {
            outln!(
                c,
                "  {}: {}{}",
                p.location,
                p.what,
                if p.repaired { " (repaired)" } else { "" }
            );
        }
        for d in &report.disks_not_in_use {
            outln!(c, "  disk {d}");
        }
        outln!(c, "  data blocks were not read: they carry no checksums (docs/groups.md), so check cannot see rot in them");
        outln!(
            c,
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
    }
    let left: Vec<&group::check::Problem> =
        report.problems.iter().filter(|p| !p.repaired).collect();
    if !left.is_empty() {
        let fixable = left.iter().filter(|p| p.repairable).count();
        let stuck: Vec<String> = left
            .iter()
            .filter(|p| !p.repairable)
            .map(|p| format!("{}: {}", p.location, p.what))
            .collect();
        let mut message = format!("group {group_name} has {} problem(s)", left.len());
        if fixable > 0 {
            message.push_str(&format!(
                "; `cairn group check {group_name} --repair` fixes {fixable} of them"
            ));
        }
        if let Some(first) = stuck.first() {
            message.push_str(&format!(
                "; {} cannot be fixed by check and need a decision (the first: {first})",
                stuck.len()
            ));
        }
        return Ok(Outcome::Failed(message));
    }
    if report.degraded() {
        return Ok(Outcome::Degraded(format!(
        "group {group_name} is DEGRADED: {} — its files are served from the other copies, and one more failure in another failure group could lose data",
        report.disks_not_in_use.join(", ")
    )));
    }
    Ok(Outcome::Done)
}

/// `group online`: what the resyncs did, and the outcome (a disk named
/// that is not ONLINE: degraded).
pub(crate) fn show_online(
    c: &mut Console<'_, '_>,
    group_name: String,
    (from_mount, report): (group::resync::ResyncReport, group::resync::ResyncReport),
    rows: Vec<group::DiskInfo>,
    (all, disks): (bool, &[String]),
    json: bool,
) -> Result<Outcome> {
    #[derive(Serialize)]
    struct Onlined {
        group: String,
        mount_resync: group::resync::ResyncReport,
        resync: group::resync::ResyncReport,
        disks: Vec<group::DiskInfo>,
    }
    let out = Onlined {
        group: group_name.clone(),
        mount_resync: from_mount,
        resync: report,
        disks: rows,
    };
    if json {
        c.json(&out)?;
    } else {
        let online: Vec<&str> = out
            .mount_resync
            .disks_online
            .iter()
            .chain(&out.resync.disks_online)
            .map(String::as_str)
            .collect();
        outln!(c,
        "group {group_name}: {} disk(s) brought ONLINE{}; resync copied {} stale AU(s) ({} MiB), cleared {} never written, refreshed {} metadata block(s)",
        online.len(),
        if online.is_empty() {
            String::new()
        } else {
            format!(" ({})", online.join(", "))
        },
        out.mount_resync.aus_copied + out.resync.aus_copied,
        (out.mount_resync.bytes_copied + out.resync.bytes_copied) >> 20,
        out.mount_resync.aus_cleared_unwritten + out.resync.aus_cleared_unwritten,
        out.mount_resync.metadata_blocks_rewritten
            + out.resync.metadata_blocks_rewritten
    );
    }
    let left: Vec<String> = out
        .disks
        .iter()
        .filter(|d| d.state != cairn_format::group::DiskState::Online)
        .filter(|d| all || disks.iter().any(|n| n.eq_ignore_ascii_case(&d.label)))
        .map(|d| format!("{} ({})", d.label, d.state.as_str()))
        .collect();
    if !left.is_empty() {
        return Ok(Outcome::Degraded(format!(
        "group {group_name} still has disks that are not ONLINE: {} (a disk that is not attached stays OFFLINE; see `cairn group disks {group_name}`)",
        left.join(", ")
    )));
    }
    Ok(Outcome::Done)
}

/// `--drop-after DURATION` in minutes (a disk's own timer is kept in them).
pub(crate) fn drop_after_minutes(text: Option<&str>) -> Result<Option<u16>> {
    let Some(text) = text else {
        return Ok(None);
    };
    let seconds =
        group::attributes::parse_duration(text).map_err(|e| anyhow::anyhow!("--drop-after {e}"))?;
    let minutes = seconds.div_ceil(60);
    Ok(Some(
        u16::try_from(minutes)
            .ok()
            .filter(|m| *m > 0)
            .with_context(|| {
                format!(
                    "--drop-after {text}: give 1m to 45d (a disk's own timer is kept in minutes)"
                )
            })?,
    ))
}

/// `group offline`: the disks taken offline.
pub(crate) fn show_offline(
    c: &mut Console<'_, '_>,
    group_name: String,
    done: Vec<String>,
    rows: Vec<group::DiskInfo>,
    json: bool,
) -> Result<()> {
    if json {
        #[derive(Serialize)]
        struct Offlined {
            group: String,
            offline: Vec<String>,
            disks: Vec<group::DiskInfo>,
        }
        c.json(&Offlined {
            group: group_name,
            offline: done,
            disks: rows,
        })?;
    } else {
        for d in &done {
            let left = rows
                .iter()
                .find(|r| &r.label == d)
                .and_then(|r| r.repair_seconds_left)
                .map_or_else(String::new, |s| {
                    format!("; dropped after {} more mounted", render_duration(s))
                });
            outln!(c,
            "group {group_name}: disk {d} is OFFLINE (on request){left}; `cairn group online {group_name} {d}` brings it back, copying only what it missed"
        );
        }
    }
    Ok(())
}

/// `group undrop`: the drops cancelled.
pub(crate) fn show_undrop(
    c: &mut Console<'_, '_>,
    group_name: &str,
    done: &[String],
    json: bool,
) -> Result<()> {
    if json {
        c.json(&serde_json::json!({ "group": group_name, "undropped": done }))?;
    } else {
        outln!(
            c,
            "group {group_name}: drop cancelled for {} (what already moved stays where it is)",
            done.join(", ")
        );
    }
    Ok(())
}

/// `group ops`: the long operations running or interrupted.
pub(crate) fn show_ops(
    c: &mut Console<'_, '_>,
    ops: Vec<cairn_store::ops::OpStatus>,
    name: Option<String>,
    json: bool,
) -> Result<()> {
    if json {
        c.json(&ops)?;
    } else if ops.is_empty() {
        outln!(
            c,
            "no operation is running{}",
            name.map_or_else(String::new, |n| format!(
                " on group {}",
                n.to_ascii_uppercase()
            ))
        );
    } else {
        outln!(
            c,
            "{:<12} {:<10} {:<12} {:>5} {:>16} {:>10} {:>10} {:>12}",
            "GROUP",
            "PASS",
            "STATE",
            "POWER",
            "AUS_DONE/TOTAL",
            "MiB/s",
            "ETA",
            "REDUNDANCY"
        );
        for o in ops {
            let when = |s: Option<u64>| match s {
                Some(0) => "now".to_string(),
                Some(s) => render_duration(s),
                None => "estimating".to_string(),
            };
            outln!(
                c,
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
                if o.state == "INTERRUPTED" {
                    format!("  (resume: cairn group rebalance {})", o.group)
                } else if o.resumed {
                    "  (resumed)".to_string()
                } else {
                    String::new()
                }
            );
        }
    }
    Ok(())
}

/// `group set` KEY=VALUE arguments.
pub(crate) fn attribute_pairs(name: &str, pairs: &[String]) -> Result<Vec<(String, String)>> {
    let mut parsed = Vec::new();
    for p in pairs {
        let (k, v) = p.split_once('=').with_context(|| {
            format!("{p:?}: give KEY=VALUE (`cairn group get {name}` lists the keys)")
        })?;
        parsed.push((k.to_string(), v.to_string()));
    }
    Ok(parsed)
}

/// `group get` and `group set`: KEY = VALUE lines.
pub(crate) fn show_attributes(
    c: &mut Console<'_, '_>,
    got: Vec<(String, String)>,
    json: bool,
) -> Result<()> {
    if json {
        c.json(
            &got.into_iter()
                .collect::<std::collections::BTreeMap<_, _>>(),
        )?;
    } else {
        for (k, v) in got {
            outln!(c, "{k} = {v}");
        }
    }
    Ok(())
}

/// `ls`: one line a name.
pub(crate) fn show_ls(
    c: &mut Console<'_, '_>,
    path: &GroupPath,
    entries: Vec<group::DirEntry>,
    json: bool,
) -> Result<()> {
    if json {
        c.json(&entries)?;
    } else {
        for e in entries {
            match (&e.kind, &e.file) {
                (group::AliasKind::Directory, _) => {
                    outln!(c, "{:<10} {:>14} {:<8} {:<12} {}/", "DIR", "", "", "", e.name)
                }
                (_, None) => outln!(c,
                    "{:<10} {:>14} {:<8} {:<12} {}  (its file is lost; `cairn group check {} --repair` removes the name)",
                    "LOST", "", "", "", e.name, path.group
                ),
                (kind, Some(f)) => outln!(c,
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
    }
    Ok(())
}

/// `du`: the space used under a path, with and without mirrors.
pub(crate) fn show_du(
    c: &mut Console<'_, '_>,
    path: &GroupPath,
    logical: u64,
    allocated: u64,
    json: bool,
) -> Result<()> {
    if json {
        #[derive(Serialize)]
        struct Du {
            path: String,
            used_bytes: u64,
            allocated_with_mirrors_bytes: u64,
        }
        c.json(&Du {
            path: path.to_string(),
            used_bytes: logical,
            allocated_with_mirrors_bytes: allocated,
        })?;
    } else {
        outln!(c, "{:>12} {:>20}  PATH", "USED_MB", "MIRROR_USED_MB");
        outln!(c, "{:>12} {:>20}  {}", logical >> 20, allocated >> 20, path);
    }
    Ok(())
}

/// `rm`'s paths, each removed by `remove`: every one is tried; the failures
/// are reported, with what was removed, in one line.
pub(crate) fn rm_each(paths: &[String], mut remove: impl FnMut(&str) -> Result<()>) -> Result<()> {
    let mut removed = Vec::new();
    let mut failed = Vec::new();
    for text in paths {
        let result = remove(text);
        match result {
            Ok(()) => removed.push(text.as_str()),
            Err(e) => failed.push(format!("{e:#}")),
        }
    }
    match failed.len() {
        0 => Ok(()),
        n => bail!(
            "{}{}{}",
            failed.join("; "),
            if n < paths.len() {
                format!(" ({n} of {} not removed)", paths.len())
            } else {
                String::new()
            },
            if removed.is_empty() {
                String::new()
            } else {
                format!("; removed: {}", removed.join(", "))
            }
        ),
    }
}

/// `group list`'s rows: every group discovery finds, mounted read-only to
/// look — but a group `held` answers for (the service's own) as it says.
pub(crate) fn list_rows(
    c: &mut Console<'_, '_>,
    engine_kind: EngineArg,
    d: &DiscoveryString,
    held: &dyn Fn(&str) -> Option<GroupSummary>,
) -> Result<Vec<GroupSummary>> {
    let host = Host::real();
    let found = group_admin::find_groups(&host, d)?;
    let mut rows = Vec::new();
    for g in found {
        if !g.complete {
            rows.push(GroupSummary::unmountable(
            &g,
            "INCOMPLETE",
            &format!(
                "its disks' labels name group {}, but none holds its superblock: a `group create` was interrupted; `cairn group create NAME --force` with these disks takes them again",
                g.uuid
            ),
        ));
            continue;
        }
        if let Some(row) = held(&g.name) {
            rows.push(row);
            continue;
        }
        let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
        let row = match group_admin::mount_read_only(
            engine.as_mut(),
            &host,
            d,
            &g.name,
            &group_lock::run_dir(),
        ) {
            Ok(m) => {
                warn_mount(c, &g.name, &m.report);
                let mut s = summary_of(&m.group);
                s.warnings = m.report.warnings;
                s.warnings.extend(m.report.damage);
                m.group.dismount()?;
                s
            }
            // Another process holds it: mounted, not broken.
            Err(group_admin::GroupAdminError::Lock(group_lock::LockError::Held {
                holder, ..
            })) => GroupSummary::unmountable(&g, "MOUNTED", &format!("by {holder}")),
            Err(e) => GroupSummary::unmountable(&g, "UNMOUNTABLE", &e.to_string()),
        };
        rows.push(row);
    }
    Ok(rows)
}

/// The status file `group ops` lists while a rebalance runs (none at power
/// 0, which only plans): REBUILD while copies are rebuilt, then REBALANCE.
pub(crate) fn rebalance_tracker(
    group: &Group<'_>,
    power: usize,
) -> Option<cairn_store::ops::OpTracker> {
    let plan = group.rebalance_plan();
    // Redundancy is whole once the last rebuild move is done, in the order
    // the moves run (metadata first, then data).
    let rebuild: u64 = plan
        .as_ref()
        .map(|p| {
            let meta = |m: &&cairn_store::rebalance::Move| {
                m.file < cairn_format::group::FILE_NUMBER_USER_MIN
                    || m.index & group::relocate::INDIRECT_INDEX != 0
            };
            let order: Vec<&cairn_store::rebalance::Move> = p
                .moves
                .iter()
                .filter(meta)
                .chain(p.moves.iter().filter(|m| !meta(m)))
                .collect();
            let mut done = 0;
            let mut until = 0;
            for m in order {
                done += m.aus;
                if m.pass == cairn_store::rebalance::Pass::Rebuild {
                    until = done;
                }
            }
            until
        })
        .unwrap_or(0);
    let resumed = group.rebalance_pending().is_some();
    (power > 0).then(|| {
        cairn_store::ops::OpTracker::start(
            &group_lock::run_dir(),
            group.name(),
            group.uuid(),
            if rebuild > 0 { "REBUILD" } else { "REBALANCE" },
            power,
            group.au_bytes(),
            rebuild,
            resumed,
        )
    })
}

/// `mkalias`'s file and its new name, which must be in the same group.
pub(crate) fn alias_paths(target: &str, alias: &str) -> Result<(GroupPath, GroupPath)> {
    let target = group_path(target)?;
    let alias = GroupPath::parse_file(alias)?;
    if !target
        .group
        .as_str()
        .eq_ignore_ascii_case(alias.group.as_str())
    {
        bail!(
            "an alias must be in the same group as its file ({} vs {})",
            target.group,
            alias.group
        );
    }
    Ok((target, alias))
}

/// `group scrub`: what it read and found, and the outcome (a disagreement
/// left: failed).
pub(crate) fn show_scrub(
    c: &mut Console<'_, '_>,
    group_name: &str,
    report: &group::scrub::ScrubReport,
    json: bool,
) -> Result<Outcome> {
    if json {
        c.json(&serde_json::json!({ "group": group_name, "scrub": report }))?;
    } else {
        outln!(c,
        "scrubbed {group_name}: {} MiB read from {} copies of {} extents in {:.1} s; {} metadata blocks and {} header copies compared{}",
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
            outln!(
                c,
                "  {}: {}{}",
                p.location,
                p.what,
                if p.repaired { " (repaired)" } else { "" }
            );
        }
        outln!(
            c,
            "{}",
            if report.problems.is_empty() {
                "clean"
            } else if report.clean() {
                "all disagreements repaired"
            } else {
                "DISAGREEMENTS FOUND"
            }
        );
    }
    if !report.clean() {
        let left = report.problems.iter().filter(|p| !p.repaired).count();
        return Ok(Outcome::Failed(format!(
        "group {group_name}: {left} disagreement(s) between copies (listed above); `cairn group scrub {group_name} --repair` rewrites them"
    )));
    }
    Ok(Outcome::Done)
}

/// `cp` out of a group a service holds: the service said the file is
/// there; it is read through the service's file system at `at`, and
/// written (checked, through a temporary, named at the end) as a copy out
/// of a group this process mounted would be.
pub(crate) fn cp_out_served(
    at: &std::path::Path,
    source: &str,
    dest: &str,
    force: bool,
) -> Result<()> {
    let host = Host::real();
    let path = GroupPath::parse(source)?;
    let name = path
        .file_name()
        .map(|c| c.as_str().to_string())
        .with_context(|| format!("{source} is the group's root; name a file in it"))?;
    let target = cairn_store::file_copy::resolve_destination(dest, &name)?;
    let prepared = cairn_store::file_copy::prepare_destination(&target, &host, force)?;
    let file = std::fs::File::open(at).with_context(|| {
        format!(
            "cannot read {} through the Cairn service's file system (it serves only its own user unless started with --allow-other)",
            at.display()
        )
    })?;
    let size = file.metadata()?.len();
    let mut served = cairn_store::file_copy::ServedFile {
        file,
        shown_as: at.display().to_string(),
    };
    let bar = progress(Some(size));
    let copied =
        cairn_store::file_copy::copy_out(&mut served, 0, size, prepared, &mut |done, _| {
            bar.set_position(done)
        });
    bar.finish_and_clear();
    Ok(copied?)
}
