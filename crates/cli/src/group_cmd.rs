//! `cairn group ...` and the file commands (`ls`, `du`, `mkdir`, `rm`, `cp`,
//! `mkalias`). Each command mounts the group it names (taking its lock), does its
//! work, and dismounts; a crash in between is recovered by the next mount.

use std::io::{Read, Write};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use cairn_io::host::Host;
use cairn_io::FileEngine;
use cairn_store::group::{self, CreateOptions, Group, GroupSpec, Redundancy};
use cairn_store::group_admin::{self, DiskArg};
use cairn_store::group_lock;
use cairn_store::names::{is_group_path, GroupPath};
use clap::Subcommand;
use serde::Serialize;

use crate::{discovery, engine_depth, now_unix_seconds, print_json, Discover, EngineArg, Output};

/// Requests in flight for group work (data copies, metadata mirrors).
const GROUP_DEPTH: usize = 64;
/// Bytes per request when copying files.
const COPY_CHUNK_BYTES: usize = 1 << 20;

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
        /// Take devices that carry other data or belong to another group.
        #[arg(long)]
        force: bool,
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
    /// Cross-check extent maps, allocation tables, names and metadata mirrors.
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
    /// What the group uses on each disk and what the device physically holds.
    Space {
        name: String,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
}

/// Parse `4M`, `64m`, `1048576`.
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let (digits, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_lowercase() {
                'k' => 1 << 10,
                'm' => 1 << 20,
                'g' => 1 << 30,
                't' => 1 << 40,
                _ => bail!("size {text:?}: unknown suffix {c:?}; use k, m, g or t"),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let n: u64 = digits.parse().with_context(|| {
        format!("size {text:?} is not a number with an optional k/m/g/t suffix")
    })?;
    n.checked_mul(mult)
        .with_context(|| format!("size {text:?} is too large"))
}

/// Mount group `name` for a command that writes, saying on stderr what the
/// mount found (disks marked offline, damage).
fn mount<'e>(
    engine: &'e mut dyn FileEngine,
    discover: &Discover,
    name: &str,
) -> Result<group_admin::Mounted<'e>> {
    let host = Host::real();
    let d = discovery(discover.discover.as_deref())?;
    let m = group_admin::mount(engine, &host, &d, name, &group_lock::run_dir())?;
    warn_mount(m.group.name(), &m.report);
    Ok(m)
}

/// Mount group `name` for listing or inspecting: nothing is written, a
/// missing disk stays as it is recorded.
fn mount_read_only<'e>(
    engine: &'e mut dyn FileEngine,
    discover: &Discover,
    name: &str,
) -> Result<group_admin::Mounted<'e>> {
    let host = Host::real();
    let d = discovery(discover.discover.as_deref())?;
    let m = group_admin::mount_read_only(engine, &host, &d, name, &group_lock::run_dir())?;
    warn_mount(m.group.name(), &m.report);
    Ok(m)
}

/// What a mount found that a person must hear about, one line each on stderr.
fn warn_mount(group: &str, report: &group::MountReport) {
    for d in &report.disks_marked_offline {
        eprintln!(
            "cairn: warning: group {group}: disk {d} was not found and is now marked OFFLINE; the group runs DEGRADED on the other copies (check the discovery string and that the disk is attached)"
        );
    }
    for d in &report.disks_missing {
        eprintln!(
            "cairn: warning: group {group}: disk {d} was not found; reading from the other copies, nothing was changed (check the discovery string and that the disk is attached)"
        );
    }
    for d in &report.damage {
        eprintln!("cairn: warning: group {group}: DAMAGE: {d}");
    }
    for w in &report.warnings {
        eprintln!("cairn: warning: group {group}: {w}");
    }
}

/// Dismount a group a command wrote to, saying on stderr which disks it took
/// offline after an I/O error.
fn finish(group: Group<'_>) -> Result<()> {
    let name = group.name().to_string();
    let offlined = group.disks_taken_offline().to_vec();
    let result = group.dismount();
    for d in offlined {
        eprintln!(
            "cairn: warning: group {name}: disk {d} and is now OFFLINE; the group runs DEGRADED on the other copies (check the disk and the kernel log, dmesg)"
        );
    }
    Ok(result?)
}

pub fn run_group(command: GroupCommand, engine_kind: EngineArg) -> Result<()> {
    let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
    match command {
        GroupCommand::Create {
            name,
            redundancy,
            disks,
            au_size,
            sector_size,
            force,
            discover,
            output,
        } => {
            let redundancy = Redundancy::parse(&redundancy).with_context(|| {
                format!("redundancy {redundancy:?}: use external, normal or high")
            })?;
            let au_bytes = parse_size(&au_size)?;
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
                Some(&d),
                &group_lock::run_dir(),
            )?;
            let summary = summary_of(&group);
            let written = group_bytes_written(&mut group);
            finish(group)?;
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
                print_json(&report)?;
            } else {
                println!(
                    "created disk group {} ({} redundancy, {} MiB AUs, {}-byte sectors) on {} disk(s):",
                    report.group.name,
                    report.group.redundancy,
                    report.group.au_mb,
                    report.group.sector_bytes,
                    report.disks.len()
                );
                for d in &report.disks {
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
                }
                println!(
                    "{} MiB usable for files; metadata written: {} KiB",
                    report.group.usable_file_mb,
                    report.bytes_written / 1024
                );
            }
        }
        GroupCommand::List { discover, output } => {
            let host = Host::real();
            let d = discovery(discover.discover.as_deref())?;
            let found = group_admin::find_groups(&host, &d)?;
            let mut rows = Vec::new();
            for g in found {
                let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
                let row = match group_admin::mount_read_only(
                    engine.as_mut(),
                    &host,
                    &d,
                    &g.name,
                    &group_lock::run_dir(),
                ) {
                    Ok(m) => {
                        warn_mount(&g.name, &m.report);
                        let mut s = summary_of(&m.group);
                        s.warnings = m.report.warnings;
                        s.warnings.extend(m.report.damage);
                        m.group.dismount()?;
                        s
                    }
                    // Another process holds it: mounted, not broken.
                    Err(group_admin::GroupAdminError::Lock(group_lock::LockError::Held {
                        holder,
                        ..
                    })) => GroupSummary::unmountable(&g, "MOUNTED", &format!("by {holder}")),
                    Err(e) => GroupSummary::unmountable(&g, "UNMOUNTABLE", &e.to_string()),
                };
                rows.push(row);
            }
            if output.json {
                print_json(&rows)?;
            } else {
                print!("{}", render_list(&rows));
            }
        }
        GroupCommand::Disks {
            name,
            discover,
            output,
        } => {
            let m = mount_read_only(engine.as_mut(), &discover, &name)?;
            let disks = m.group.disks();
            let au = m.group.au_bytes();
            let paths = m.paths.clone();
            m.group.dismount()?;
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
            if output.json {
                print_json(&rows)?;
            } else {
                println!(
                    "{:>4}  {:<16} {:<14} {:<8} {:>10} {:>10}  PATH",
                    "DISK", "LABEL", "FAILGROUP", "STATE", "TOTAL_AU", "FREE_AU"
                );
                for r in rows {
                    println!(
                        "{:>4}  {:<16} {:<14} {:<8} {:>10} {:>10}  {}",
                        r.disk.number,
                        r.disk.label,
                        r.disk.failgroup,
                        r.disk.state.as_str(),
                        r.disk.total_aus,
                        r.disk
                            .free_aus
                            .map_or_else(|| "-".to_string(), |f| f.to_string()),
                        r.path
                            .map_or_else(|| "(missing)".to_string(), |p| p.display().to_string())
                    );
                }
            }
        }
        GroupCommand::Mount {
            name,
            discover,
            output,
        } => {
            let m = mount(engine.as_mut(), &discover, &name)?;
            let summary = summary_of(&m.group);
            let report = m.report;
            finish(m.group)?;
            if output.json {
                #[derive(Serialize)]
                struct Mounted {
                    group: GroupSummary,
                    recovery: group::MountReport,
                }
                print_json(&Mounted {
                    group: summary,
                    recovery: report,
                })?;
            } else {
                println!(
                    "mounted {} ({}): {} journal record(s) replayed",
                    summary.name, summary.state, report.journal_records_replayed
                );
                for d in &report.disks_marked_offline {
                    println!("  disk marked offline: {d}");
                }
                for o in &report.operations_recovered {
                    println!("  recovered: {o}");
                }
                for w in &report.warnings {
                    println!("  warning: {w}");
                }
                println!("dismounted cleanly");
            }
        }
        GroupCommand::Check {
            name,
            repair,
            discover,
            output,
        } => {
            let mut m = if repair {
                mount(engine.as_mut(), &discover, &name)?
            } else {
                mount_read_only(engine.as_mut(), &discover, &name)?
            };
            let report = m.group.check(repair)?;
            if repair {
                finish(m.group)?;
            } else {
                m.group.dismount()?;
            }
            if output.json {
                print_json(&report)?;
            } else {
                println!(
                    "checked {}: {} files, {} extents, {} AUs in use, {} metadata blocks compared across mirrors",
                    name.to_ascii_uppercase(),
                    report.files,
                    report.extents,
                    report.aus_in_use,
                    report.metadata_blocks_compared
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
                        "all problems repaired"
                    } else {
                        "PROBLEMS FOUND"
                    }
                );
            }
            if !report.clean() {
                bail!(
                    "group {} has {} problem(s); run `cairn group check {} --repair`",
                    name.to_ascii_uppercase(),
                    report.problems.iter().filter(|p| !p.repaired).count(),
                    name
                );
            }
        }
        GroupCommand::Space {
            name,
            discover,
            output,
        } => {
            let m = mount_read_only(engine.as_mut(), &discover, &name)?;
            let rows = group_admin::space(&m.group, &m.paths);
            m.group.dismount()?;
            if output.json {
                print_json(&rows)?;
            } else {
                println!(
                    "{:>4}  {:<16} {:>12} {:>14} {:>16}  PATH",
                    "DISK", "LABEL", "SIZE_MB", "GROUP_USED_MB", "DEVICE_HOLDS_MB"
                );
                for r in rows {
                    println!(
                        "{:>4}  {:<16} {:>12} {:>14} {:>16}  {}",
                        r.number,
                        r.label,
                        r.size_bytes >> 20,
                        r.group_used_bytes >> 20,
                        r.device_allocated_bytes
                            .map_or_else(|| "-".to_string(), |b| (b >> 20).to_string()),
                        r.path
                            .map_or_else(|| "(missing)".to_string(), |p| p.display().to_string())
                    );
                }
            }
        }
    }
    Ok(())
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

fn summary_of(group: &Group<'_>) -> GroupSummary {
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

fn render_list(rows: &[GroupSummary]) -> String {
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

pub fn ls(engine_kind: EngineArg, path: &str, discover: &Discover, output: &Output) -> Result<()> {
    let path = group_path(path)?;
    let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
    let m = mount_read_only(engine.as_mut(), discover, path.group.as_str())?;
    let group = m.group;
    let entries = group.list(&path)?;
    group.dismount()?;
    if output.json {
        print_json(&entries)?;
    } else {
        for e in entries {
            match (&e.kind, &e.file) {
                (group::AliasKind::Directory, _) | (_, None) => {
                    println!("{:<10} {:>14} {:<8} {:<12} {}/", "DIR", "", "", "", e.name)
                }
                (kind, Some(f)) => println!(
                    "{:<10} {:>14} {:<8} {:<12} {}{}",
                    f.template,
                    f.size_bytes,
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

pub fn du(engine_kind: EngineArg, path: &str, discover: &Discover, output: &Output) -> Result<()> {
    let path = group_path(path)?;
    let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
    let m = mount_read_only(engine.as_mut(), discover, path.group.as_str())?;
    let group = m.group;
    let (logical, allocated) = group.du(&path)?;
    group.dismount()?;
    if output.json {
        #[derive(Serialize)]
        struct Du {
            path: String,
            used_bytes: u64,
            allocated_with_mirrors_bytes: u64,
        }
        print_json(&Du {
            path: path.to_string(),
            used_bytes: logical,
            allocated_with_mirrors_bytes: allocated,
        })?;
    } else {
        println!("{:>12} {:>20}  PATH", "USED_MB", "MIRROR_USED_MB");
        println!("{:>12} {:>20}  {}", logical >> 20, allocated >> 20, path);
    }
    Ok(())
}

pub fn mkdir(engine_kind: EngineArg, path: &str, parents: bool, discover: &Discover) -> Result<()> {
    let path = group_path(path)?;
    let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
    let m = mount(engine.as_mut(), discover, path.group.as_str())?;
    let mut group = m.group;
    group.mkdir(&path, parents)?;
    finish(group)?;
    Ok(())
}

pub fn rm(engine_kind: EngineArg, paths: &[String], discover: &Discover) -> Result<()> {
    for text in paths {
        let path = group_path(text)?;
        let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
        let m = mount(engine.as_mut(), discover, path.group.as_str())?;
        let mut group = m.group;
        group.remove(&path)?;
        group.dismount()?;
    }
    Ok(())
}

pub fn mkalias(
    engine_kind: EngineArg,
    target: &str,
    alias: &str,
    discover: &Discover,
) -> Result<()> {
    let target = group_path(target)?;
    let alias = group_path(alias)?;
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
    let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
    let m = mount(engine.as_mut(), discover, target.group.as_str())?;
    let mut group = m.group;
    group.mkalias(&target, &alias)?;
    finish(group)?;
    Ok(())
}

/// How `cp` creates a group file.
pub struct NewFile {
    pub template: Option<String>,
    pub redundancy: Option<String>,
}

impl NewFile {
    fn options(&self, fallback_template: Option<String>) -> Result<CreateOptions> {
        let copies = match &self.redundancy {
            Some(r) => Some(
                Redundancy::parse(r)
                    .with_context(|| format!("redundancy {r:?}: use external, normal or high"))?
                    .copies(),
            ),
            None => None,
        };
        Ok(CreateOptions {
            template: self.template.clone().or(fallback_template),
            copies,
            parents: false,
        })
    }
}

/// `cp`: OS file → group, group → OS file, group → group.
pub fn cp(
    engine_kind: EngineArg,
    source: &str,
    dest: &str,
    new: &NewFile,
    discover: &Discover,
) -> Result<()> {
    match (is_group_path(source), is_group_path(dest)) {
        (false, true) => {
            let dest = group_path(dest)?;
            let mut file =
                std::fs::File::open(source).with_context(|| format!("cannot open {source}"))?;
            let len = file
                .metadata()
                .with_context(|| format!("cannot read {source}"))?
                .len();
            let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
            let m = mount(engine.as_mut(), discover, dest.group.as_str())?;
            let mut group = m.group;
            let sector = u64::from(group.sector_bytes());
            let size = len.div_ceil(sector) * sector;
            let info = group.create_file(&dest, size, &new.options(None)?)?;
            let result = copy_in(&mut group, info.number, &mut file, len);
            if let Err(e) = result {
                let _ = group.remove(&dest);
                return Err(e);
            }
            group.sync()?;
            group.dismount()?;
            if size != len {
                eprintln!("cairn: note: {source} is {len} bytes; {dest} is {size} (padded with zeros to whole {sector}-byte sectors)");
            }
        }
        (true, false) => {
            let src = group_path(source)?;
            let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
            let m = mount(engine.as_mut(), discover, src.group.as_str())?;
            let mut group = m.group;
            let info = group.open(&src)?;
            let tmp = PathBuf::from(format!("{dest}.cairn-partial"));
            let mut out = std::fs::File::create(&tmp)
                .with_context(|| format!("cannot create {}", tmp.display()))?;
            let result = copy_out(&mut group, info.number, info.size_bytes, &mut out);
            group.dismount()?;
            if let Err(e) = result.and_then(|_| out.sync_all().context("flush")) {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
            std::fs::rename(&tmp, dest)
                .with_context(|| format!("cannot rename {} to {dest}", tmp.display()))?;
        }
        (true, true) => {
            let src = group_path(source)?;
            let dst = group_path(dest)?;
            // Through a temporary OS file when the groups differ: each mount holds one group's lock.
            if src.group != dst.group {
                let tmp = std::env::temp_dir().join(format!("cairn-cp-{}", std::process::id()));
                let tmp_text = tmp.display().to_string();
                let out = NewFile {
                    template: None,
                    redundancy: None,
                };
                let r = cp(engine_kind, source, &tmp_text, &out, discover)
                    .and_then(|_| cp(engine_kind, &tmp_text, dest, new, discover));
                let _ = std::fs::remove_file(&tmp);
                return r;
            }
            let mut engine = engine_depth(engine_kind, GROUP_DEPTH)?;
            let m = mount(engine.as_mut(), discover, src.group.as_str())?;
            let mut group = m.group;
            let info = group.open(&src)?;
            let created = group.create_file(
                &dst,
                info.size_bytes,
                &new.options(Some(info.template.clone()))?,
            )?;
            let mut buf = vec![0u8; COPY_CHUNK_BYTES];
            let mut at = 0;
            let bar = progress(info.size_bytes);
            while at < info.size_bytes {
                let n = (info.size_bytes - at).min(COPY_CHUNK_BYTES as u64) as usize;
                group.read(info.number, at, &mut buf[..n])?;
                group.write(created.number, at, &buf[..n])?;
                at += n as u64;
                bar.set_position(at);
            }
            bar.finish_and_clear();
            group.sync()?;
            group.dismount()?;
        }
        (false, false) => bail!(
            "one of {source} and {dest} must be a group path (+GROUP/...); use cp for OS files"
        ),
    }
    Ok(())
}

fn copy_in(group: &mut Group<'_>, number: u32, file: &mut std::fs::File, len: u64) -> Result<()> {
    let sector = group.sector_bytes() as usize;
    let mut buf = vec![0u8; COPY_CHUNK_BYTES];
    let mut at = 0u64;
    let bar = progress(len);
    while at < len {
        let want = (len - at).min(COPY_CHUNK_BYTES as u64) as usize;
        file.read_exact(&mut buf[..want])
            .context("reading the source file")?;
        let padded = want.div_ceil(sector) * sector;
        buf[want..padded].fill(0);
        group.write(number, at, &buf[..padded])?;
        at += want as u64;
        bar.set_position(at);
    }
    bar.finish_and_clear();
    Ok(())
}

fn copy_out(group: &mut Group<'_>, number: u32, size: u64, out: &mut std::fs::File) -> Result<()> {
    let mut buf = vec![0u8; COPY_CHUNK_BYTES];
    let mut at = 0u64;
    let bar = progress(size);
    while at < size {
        let n = (size - at).min(COPY_CHUNK_BYTES as u64) as usize;
        group.read(number, at, &mut buf[..n])?;
        out.write_all(&buf[..n])
            .context("writing the destination file")?;
        at += n as u64;
        bar.set_position(at);
    }
    bar.finish_and_clear();
    Ok(())
}

/// A progress bar on stderr for a copy of `total` bytes: rate, done/total and
/// ETA on a terminal, nothing at all when stderr is not one (piped, in tests).
fn progress(total: u64) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bytes}/{total_bytes} {bytes_per_sec} ETA {eta} {wide_bar}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}
