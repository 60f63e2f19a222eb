//! `cairn group ...`: the command line of the group commands, turned into
//! the typed requests the executor carries out (`cairn_command`), here or
//! in the service. Parsing (sizes, durations, paths) is the CLI's; what a
//! command may do is the executor's.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use cairn_command::request::{NewDiskSpec, ReclaimWay, Request, Resize, Setting, POWER_MAX};
use clap::Subcommand;

use crate::args::{Discover, Output};

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
        /// Take the group over from another host that stopped without letting go (it crashed, or lost its disks): its heartbeat is watched for twice its timeout first (20 s by default), and the mount is refused if it moves. Never takes a group from a host that still writes it.
        #[arg(long)]
        force: bool,
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
    /// Read every copy of every extent and of the metadata, and report each disagreement by file and offset; --repair restores metadata from its newest valid generation and data where the copies say which is right.
    Scrub {
        name: String,
        /// Chunks of up to 1 MiB read at once (every copy of each).
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=POWER_MAX as i64))]
        power: u16,
        /// Rewrite what disagrees: metadata from its newest valid copy; data from the copies every readable copy agrees on, or (three copies or more) a strict majority of them. Two copies that differ are not guessed between: see --prefer.
        #[arg(long)]
        repair: bool,
        /// With --repair: where copies of data differ and no majority decides (two copies), keep the copy on this disk (by label) and rewrite the others from it.
        #[arg(long, value_name = "DISK", requires = "repair")]
        prefer: Option<String>,
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
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=POWER_MAX as i64))]
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
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(0..=POWER_MAX as i64))]
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
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(0..=POWER_MAX as i64))]
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
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(0..=POWER_MAX as i64))]
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
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=POWER_MAX as i64))]
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

impl GroupCommand {
    /// The `--discover` and `--json` the command was given.
    pub(crate) fn flags(&self) -> (Option<&str>, bool) {
        let (discover, json) = match self {
            GroupCommand::Create {
                discover, output, ..
            }
            | GroupCommand::List { discover, output }
            | GroupCommand::Disks {
                discover, output, ..
            }
            | GroupCommand::Mount {
                discover, output, ..
            }
            | GroupCommand::Check {
                discover, output, ..
            }
            | GroupCommand::Scrub {
                discover, output, ..
            }
            | GroupCommand::Reclaim {
                discover, output, ..
            }
            | GroupCommand::Space {
                discover, output, ..
            }
            | GroupCommand::Online {
                discover, output, ..
            }
            | GroupCommand::Offline {
                discover, output, ..
            }
            | GroupCommand::Alter {
                discover, output, ..
            }
            | GroupCommand::Rebalance {
                discover, output, ..
            }
            | GroupCommand::Undrop {
                discover, output, ..
            }
            | GroupCommand::DropDisk {
                discover, output, ..
            }
            | GroupCommand::Replace {
                discover, output, ..
            }
            | GroupCommand::Set {
                discover, output, ..
            }
            | GroupCommand::Get {
                discover, output, ..
            } => (discover.discover.as_deref(), output.json),
            GroupCommand::Ops { output, .. } => (None, output.json),
        };
        (discover, json)
    }

    /// The typed request the command line asks for.
    // Left whole: a table, one arm per subcommand (the parsing is in the functions below).
    pub(crate) fn request(self) -> Result<Request> {
        Ok(match self {
            GroupCommand::Create {
                name,
                redundancy,
                disks,
                au_size,
                sector_size,
                force,
                take_from_group,
                ..
            } => Request::GroupCreate {
                group: name,
                redundancy,
                disks: new_disks(&disks)?,
                au_bytes: crate::args::parse_size(&au_size)?,
                sector_bytes: sector_size,
                force,
                take_from: take_from_group,
            },
            GroupCommand::List { .. } => Request::GroupList,
            GroupCommand::Disks { name, .. } => Request::GroupDisks { group: name },
            GroupCommand::Mount { name, force, .. } => Request::GroupMount { group: name, force },
            GroupCommand::Check { name, repair, .. } => Request::GroupCheck {
                group: name,
                repair,
            },
            GroupCommand::Scrub {
                name,
                power,
                repair,
                prefer,
                wait,
                ..
            } => Request::GroupScrub {
                group: name,
                power,
                repair,
                prefer,
                wait,
            },
            GroupCommand::Reclaim {
                name,
                explain,
                rate,
                power,
                zero_fill,
                force,
                compact,
                wait,
                ..
            } => Request::GroupReclaim {
                group: name,
                explain,
                rate_bytes: rate_bytes(&rate)?,
                power,
                way: reclaim_way(zero_fill),
                force,
                compact,
                wait,
            },
            GroupCommand::Space { name, .. } => Request::GroupSpace { group: name },
            GroupCommand::Online {
                name,
                disks,
                all,
                power,
                wait,
                ..
            } => Request::GroupOnline {
                group: name,
                disks: (!all).then_some(disks),
                power,
                wait,
            },
            GroupCommand::Offline {
                name,
                disks,
                drop_after,
                ..
            } => Request::GroupOffline {
                group: name,
                disks,
                drop_after_seconds: drop_after_seconds(drop_after.as_deref())?,
            },
            GroupCommand::Alter {
                name,
                add,
                drop,
                resize,
                power,
                explain,
                force,
                wait,
                ..
            } => Request::GroupAlter {
                group: name,
                add: new_disks(&add)?,
                drop,
                resize: resize
                    .into_iter()
                    .map(|(disk, size_bytes)| Resize { disk, size_bytes })
                    .collect(),
                power,
                explain,
                force,
                wait,
            },
            GroupCommand::Rebalance {
                name, power, wait, ..
            } => Request::GroupRebalance {
                group: name,
                power,
                wait,
            },
            GroupCommand::Undrop { name, .. } => Request::GroupUndrop { group: name },
            GroupCommand::DropDisk {
                name,
                disk,
                power,
                wait,
                ..
            } => Request::GroupDropDisk {
                group: name,
                disk,
                power,
                wait,
            },
            GroupCommand::Replace {
                name,
                disk,
                with,
                power,
                force,
                wait,
                ..
            } => Request::GroupReplace {
                group: name,
                disk,
                with: absolute(&with)?,
                power,
                force,
                wait,
            },
            GroupCommand::Ops { name, .. } => Request::GroupOps { group: name },
            GroupCommand::Set { name, pairs, .. } => Request::GroupSet {
                settings: settings(&name, &pairs)?,
                group: name,
            },
            GroupCommand::Get { name, keys, .. } => Request::GroupGet { group: name, keys },
        })
    }
}

/// A device path made absolute against this process's working directory
/// (the service's is not the asker's).
pub(crate) fn absolute(path: &std::path::Path) -> Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("device path {}", path.display()))
}

/// `--disk PATH[=FAILGROUP]`, each.
fn new_disks(disks: &[String]) -> Result<Vec<NewDiskSpec>> {
    disks.iter().map(|d| new_disk(d)).collect()
}

/// `--zero-fill`, or the default: discard.
fn reclaim_way(zero_fill: bool) -> ReclaimWay {
    if zero_fill {
        ReclaimWay::ZeroFill
    } else {
        ReclaimWay::Discard
    }
}

/// `--drop-after DURATION` in seconds.
fn drop_after_seconds(drop_after: Option<&str>) -> Result<Option<u64>> {
    drop_after
        .map(|t| {
            cairn_store::group::attributes::parse_duration(t)
                .map_err(|e| anyhow::anyhow!("--drop-after {e}"))
        })
        .transpose()
}

/// `group set`'s `KEY=VALUE` pairs, for group `name`.
fn settings(name: &str, pairs: &[String]) -> Result<Vec<Setting>> {
    pairs
        .iter()
        .map(|p| {
            let (key, value) = p.split_once('=').with_context(|| {
                format!("{p:?}: give KEY=VALUE (`cairn group get {name}` lists the keys)")
            })?;
            Ok(Setting {
                key: key.to_string(),
                value: value.to_string(),
            })
        })
        .collect()
}

/// `PATH[=FAILGROUP]`.
fn new_disk(text: &str) -> Result<NewDiskSpec> {
    let arg = cairn_store::group_admin::DiskArg::parse(text);
    Ok(NewDiskSpec {
        path: absolute(&arg.path)?,
        failgroup: arg.failgroup,
    })
}

/// `--rate MB/s` (per disk; 0: unpaced) in bytes a second. Its bounds
/// are the executor's to check.
fn rate_bytes(rate: &str) -> Result<Option<u64>> {
    let rate_mb = match rate.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => v,
        _ => bail!("--rate {rate:?} is not a rate: give MB/s per disk as a number (0: unpaced)"),
    };
    // (Any rate above 0 paces, however small; a huge one saturates, and
    // is refused as beyond any device.)
    Ok((rate_mb > 0.0).then_some(((rate_mb * 1e6) as u64).max(1)))
}

/// `--resize DISK=SIZE`.
fn resize_arg(s: &str) -> Result<(String, u64), String> {
    let (disk, size) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: write DISK=SIZE, for example DATA_0001=20G"))?;
    if disk.trim().is_empty() {
        return Err(format!("{s:?}: name the disk before '=' (its label)"));
    }
    let bytes = crate::args::parse_size(size).map_err(|e| format!("{e:#}"))?;
    Ok((disk.trim().to_string(), bytes))
}
