//! `cairn volume`: group files the host sees as block devices
//! (`docs/volumes.md`). Every subcommand is carried out by the Cairn service
//! that holds the group: a volume is attached as a loop device over the
//! file in the service's mount. The parsing is here; the work is in
//! `served.rs`.

use anyhow::Result;
use clap::Subcommand;
use serde::Serialize;

use crate::console::{outln, Console};
use crate::Output;

/// The template a volume's file has: how a volume is told from a data file.
pub(crate) const VOLUME_TEMPLATE: &str = "VOLUME";

#[derive(Subcommand)]
pub(crate) enum VolumeCommand {
    /// Make a volume: a group file of template VOLUME, all its space allocated.
    Create {
        /// The volume's name, e.g. +DATA/vol/pg01 (its directories are made).
        name: String,
        /// Its size (20G, 512M ...): a whole number of the group's sectors.
        #[arg(long, value_name = "SIZE")]
        size: String,
        /// Its redundancy, else the group's: external, normal or high.
        #[arg(long)]
        redundancy: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Attach a volume as a block device (a loop device with direct I/O); prints the device.
    Attach {
        name: String,
        #[command(flatten)]
        output: Output,
    },
    /// Detach a volume's block device (refused while it is mounted or held).
    Detach { name: String },
    /// Grow a volume; an attached one's block device follows (grow the file system on it with its own tool).
    Resize {
        name: String,
        /// The new size, larger than the current one.
        #[arg(long, value_name = "SIZE")]
        size: String,
    },
    /// The volumes of the groups the service holds (or of one): name, size, redundancy, device, state.
    List {
        group: Option<String>,
        #[command(flatten)]
        output: Output,
    },
}

impl VolumeCommand {
    /// The group the command is about (`None`: every group served).
    /// The volume's name, if the command names one, checked as the group
    /// checks a file's name: a wrong one is the first thing to say.
    pub(crate) fn check_name(&self) -> anyhow::Result<()> {
        match self {
            Self::Create { name, .. }
            | Self::Attach { name, .. }
            | Self::Detach { name }
            | Self::Resize { name, .. } => {
                cairn_store::names::GroupPath::parse(name)
                    .map_err(|e| anyhow::anyhow!("volume name {name}: {e}"))?;
                Ok(())
            }
            Self::List { .. } => Ok(()),
        }
    }

    pub(crate) fn group(&self) -> Option<String> {
        let name = match self {
            Self::Create { name, .. }
            | Self::Attach { name, .. }
            | Self::Detach { name }
            | Self::Resize { name, .. } => name,
            Self::List { group, .. } => {
                return group
                    .as_deref()
                    .map(|g| g.trim_start_matches('+').to_string())
            }
        };
        Some(
            cairn_store::names::GroupPath::parse(name)
                .map(|p| p.group.as_str().to_string())
                .unwrap_or_else(|_| name.trim_start_matches('+').to_string()),
        )
    }
}

/// A volume as `volume list` shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct VolumeRow {
    pub(crate) name: String,
    pub(crate) size_bytes: u64,
    pub(crate) redundancy: &'static str,
    /// Its block device, when attached.
    pub(crate) device: Option<String>,
    /// ATTACHED or DETACHED.
    pub(crate) state: &'static str,
}

pub(crate) fn redundancy_of(copies: u8) -> &'static str {
    match copies {
        1 => "EXTERNAL",
        2 => "NORMAL",
        _ => "HIGH",
    }
}

pub(crate) fn show_list(c: &mut Console<'_, '_>, rows: &[VolumeRow], json: bool) -> Result<()> {
    if json {
        return c.json(&rows);
    }
    outln!(
        c,
        "{:<40} {:>10} {:<10} {:<12} {}",
        "NAME",
        "SIZE_MB",
        "REDUNDANCY",
        "DEVICE",
        "STATE"
    );
    for r in rows {
        outln!(
            c,
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
