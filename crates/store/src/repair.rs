//! Header repair: restore damaged or stale copies from the newest good one.
//!
//! [`plan`] is a pure function of a [`HeaderScan`]; [`apply`] turns the plan into
//! writes. The plan refuses — and says why — when there is nothing to restore
//! from, or when good copies disagree on the disk UUID (a cloned or relabelled
//! LUN half-overwritten: restoring could make one disk impersonate another),
//! unless forced.

use cairn_format::DiskHeader;
use cairn_io::{DeviceId, IoEngine};
use serde::Serialize;
use uuid::Uuid;

use crate::header_copies::{CopyState, HeaderHealth, HeaderScan};
use crate::labeling::{write_copies, WriteError};

/// One copy to rewrite, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rewrite {
    pub copy: usize,
    pub offset_bytes: u64,
    pub reason: String,
}

/// What repair would do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairPlan {
    /// The copy restored from.
    pub source_copy: usize,
    pub source: DiskHeader,
    pub rewrites: Vec<Rewrite>,
    /// Good copies carry these different disk UUIDs (only with `force`).
    pub conflicting_uuids: Vec<Uuid>,
}

/// Why no plan could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("carries no Cairn header")]
    NotLabelled,
    #[error("no good copy of the Cairn header ({0}), so it cannot be repaired; if the disk's contents are expendable, label it again with --force")]
    NoGoodCopy(String),
    #[error("good copies disagree on the disk UUID ({details})")]
    Conflict { details: String },
    #[error("the device is {size_bytes} bytes, smaller than the {labelled_bytes} it had when labelled, and copy {copy} lies beyond its end; grow it back to {labelled_bytes} bytes to repair the header")]
    Shrunk {
        size_bytes: u64,
        labelled_bytes: u64,
        copy: usize,
    },
}

/// Plan the repair of a scan. `force` restores over a UUID conflict.
pub fn plan(scan: &HeaderScan, force: bool) -> Result<RepairPlan, PlanError> {
    let Some(newest) = scan.newest() else {
        return Err(match scan.health() {
            HeaderHealth::Corrupt => PlanError::NoGoodCopy(scan.describe_copies().join("; ")),
            _ => PlanError::NotLabelled,
        });
    };
    if let Some(outside) = scan.slots.iter().find(|s| s.state == CopyState::Outside) {
        return Err(PlanError::Shrunk {
            size_bytes: scan.device_size_bytes,
            labelled_bytes: newest.header.device_size_bytes,
            copy: outside.index,
        });
    }
    let uuids = scan.uuids();
    if uuids.len() > 1 && !force {
        let details = scan
            .good()
            .map(|(slot, d)| {
                format!(
                    "copy {}: {} generation {}",
                    slot.index, d.header.disk_uuid, d.header.generation
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        return Err(PlanError::Conflict { details });
    }
    let source_copy = usize::from(newest.copy_index);
    let rewrites = scan
        .slots
        .iter()
        .filter_map(|slot| {
            let reason = match &slot.state {
                CopyState::Good(d) if d.header == newest.header => return None,
                CopyState::Good(d) if d.header.disk_uuid != newest.header.disk_uuid => {
                    format!("belongs to disk {}", d.header.disk_uuid)
                }
                CopyState::Good(d) => format!("stale (generation {})", d.header.generation),
                other => other.describe(),
            };
            Some(Rewrite {
                copy: slot.index,
                offset_bytes: slot.offset_bytes,
                reason,
            })
        })
        .collect();
    Ok(RepairPlan {
        source_copy,
        source: newest.header.clone(),
        rewrites,
        conflicting_uuids: if uuids.len() > 1 { uuids } else { Vec::new() },
    })
}

/// Carry out a plan: rewrite the listed copies from the source, then verify all.
pub fn apply(
    engine: &mut dyn IoEngine,
    device: DeviceId,
    plan: &RepairPlan,
) -> Result<(), WriteError> {
    let copies: Vec<usize> = plan.rewrites.iter().map(|r| r.copy).collect();
    if copies.is_empty() {
        return Ok(());
    }
    write_copies(engine, device, &plan.source, &copies)
}
