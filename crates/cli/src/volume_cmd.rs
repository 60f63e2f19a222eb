//! `cairn volume`: group files the host sees as block devices
//! (`docs/volumes.md`). Every subcommand is carried out by the Cairn service
//! that holds the group: a volume is attached as a loop device over the
//! file in the service's mount. The parsing is here; the work is the
//! executor's (`cairn_command`).

use anyhow::{Context, Result};
use cairn_command::request::Request;
use clap::Subcommand;

use crate::args::Output;

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
    /// The `--json` the command was given.
    pub(crate) fn json(&self) -> bool {
        match self {
            Self::Create { output, .. }
            | Self::Attach { output, .. }
            | Self::List { output, .. } => output.json,
            Self::Detach { .. } | Self::Resize { .. } => false,
        }
    }

    /// The typed request the command line asks for.
    pub(crate) fn request(self) -> Result<Request> {
        Ok(match self {
            Self::Create {
                name,
                size,
                redundancy,
                ..
            } => Request::VolumeCreate {
                name,
                size_bytes: crate::args::parse_size(&size).context("--size")?,
                redundancy,
            },
            Self::Attach { name, .. } => Request::VolumeAttach { name },
            Self::Detach { name } => Request::VolumeDetach { name },
            Self::Resize { name, size } => Request::VolumeResize {
                name,
                size_bytes: crate::args::parse_size(&size).context("--size")?,
            },
            Self::List { group, .. } => Request::VolumeList { group },
        })
    }
}
