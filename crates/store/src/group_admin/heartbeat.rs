//! A writer's claim on its group for this host (`group::heartbeat`): made
//! before the mount writes anything, beaten through the mount, and handed
//! to the group once mounted.

use std::sync::Arc;

use cairn_io::{DeviceId, FileEngine};
use uuid::Uuid;

use super::error::GroupAdminError;
use super::source::HeartbeatSource;
use crate::group::heartbeat::{self, Takeover};
use crate::group::{Group, GroupError, MountReport};

/// The heartbeat's pace: [`heartbeat::Timing::DEFAULT`], or, for tests
/// only, an interval of `CAIRN_TEST_HEARTBEAT_MS` milliseconds (a test
/// that waits out a takeover cannot wait 20 s).
pub const TEST_HEARTBEAT_MS_ENV: &str = "CAIRN_TEST_HEARTBEAT_MS";

fn heartbeat_timing() -> heartbeat::Timing {
    std::env::var(TEST_HEARTBEAT_MS_ENV)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|ms| (1..=cairn_format::heartbeat::HEARTBEAT_INTERVAL_MS_MAX).contains(ms))
        .map_or(heartbeat::Timing::DEFAULT, |interval_ms| {
            heartbeat::Timing {
                interval_ms,
                ..heartbeat::Timing::DEFAULT
            }
        })
}

pub(super) fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Claim the group for this host before the mount writes anything
/// (`heartbeat::claim`): refused while another host holds it.
pub(super) fn claim_group(
    engine: &mut dyn FileEngine,
    devices: &[DeviceId],
    uuid: Uuid,
    name: &str,
    takeover: Takeover,
) -> Result<heartbeat::Claim, GroupAdminError> {
    let me = crate::host_identity::this_host().map_err(GroupAdminError::Invalid)?;
    let disks = heartbeat::members(engine, devices, uuid);
    let clock = cairn_io::clock::Monotonic::new();
    Ok(heartbeat::claim(
        engine,
        uuid,
        name,
        &disks,
        &me,
        heartbeat_timing(),
        takeover,
        &clock,
        &now_unix_ms,
    )?)
}

/// Beat for a claim from now on, through the mount that follows it (a
/// long mount must not look like a dead owner to another host): the link,
/// and whom the group was taken from.
pub(super) fn beat_from_claim(
    claim: heartbeat::Claim,
    source: Arc<HeartbeatSource>,
) -> Result<(heartbeat::Link, Option<String>), GroupError> {
    let taken_from = claim.taken_from.clone();
    let beater = heartbeat::Beater::new(claim, source, 0);
    Ok((heartbeat::start(beater)?, taken_from))
}

/// A mount made while beating: the heartbeat handed to the group, or, if
/// the mount failed, stopped and released (as the link drops).
pub(super) fn mounted_on_claim<'e>(
    mounted: Result<(Group<'e>, MountReport), GroupError>,
    beating: (heartbeat::Link, Option<String>),
) -> Result<(Group<'e>, MountReport), GroupError> {
    let (link, taken_from) = beating;
    let (mut group, mut report) = mounted?;
    if let Some(from) = taken_from {
        report
            .warnings
            .push(format!("group {} was taken over from {from}", group.name()));
    }
    link.attach(group.data_plane().clone(), group.slot_generation());
    group.attach_heartbeat(link);
    Ok((group, report))
}
