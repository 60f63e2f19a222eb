//! A live group's long operations while data handles run: the resync, the
//! rebalance, reclaim and scrub, and the read-rate measure of an explained
//! change. Their metadata steps are operations; their data goes through a
//! handle (or an engine) of their own, under the extents' latches.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_io::DeviceId;

use super::handle::DataHandle;
use super::shared::{LiveGroup, PROBE_DEPTH};
use crate::group::data::DataPort;
use crate::group::engines::HandleEngine;
use crate::group::error::GroupError;
use crate::group::mounted::Group;
use crate::group::plane::{GuardSlot, Hold};

/// Requests in flight on a live scrub's engine: every copy of its
/// `power` chunks (at most [`crate::group::scrub::SCRUB_INFLIGHT_MAX`]) at once.
const SCRUB_DEPTH: usize = crate::group::scrub::SCRUB_INFLIGHT_MAX * 4;
/// How many times in a row a scrub reads a part again because the disks
/// changed between its reads and its judgement.
const SCRUB_READ_AGAIN_MAX: u32 = 8;

impl LiveGroup {
    /// Each disk's sequential read rate ([`Group::measure_read_rates`]),
    /// for an explained change's time estimate: where to read is planned
    /// under `meta`, the reads are made outside it on an engine of their
    /// own (what they read is only timed, so an AU freed meanwhile does no
    /// harm).
    pub fn measure_read_rates(
        &self,
        disks: &[u16],
        bytes: u64,
    ) -> Result<BTreeMap<u16, f64>, GroupError> {
        let (plan, au_bytes) = self
            .inner
            .operation(|g| (g.read_rate_plan(disks, bytes), g.au_bytes()))?;
        let devices: BTreeMap<u16, DeviceId> =
            plan.iter().map(|(d, (device, _))| (*d, *device)).collect();
        let mut out = BTreeMap::new();
        if devices.is_empty() {
            return Ok(out);
        }
        let (mut engine, ids) = self.side_engine(&devices, PROBE_DEPTH * 2)?;
        let io = crate::group::move_plan::RATE_IO_BYTES.min(au_bytes);
        for (d, (_, offsets)) in plan {
            let Some(id) = ids.get(&d) else { continue };
            if let Some(rate) =
                crate::group::move_plan::time_reads(engine.as_mut(), *id, &offsets, io)
            {
                out.insert(d, rate);
            }
        }
        Ok(out)
    }

    /// Resync SYNCING disks, and stale copies on ONLINE ones, while data
    /// handles run (see [`LiveGroup::online_disks`]).
    pub fn resync(
        &self,
        power: usize,
        progress: &mut dyn FnMut(crate::group::resync::Progress),
    ) -> Result<crate::group::resync::ResyncReport, GroupError> {
        let mut report = crate::group::resync::ResyncReport::default();
        let Some(work) = self.inner.operation(|g| g.resync_start(&mut report))?? else {
            return Ok(report);
        };
        let au_bytes = self.inner.meta()?.au_bytes();
        let mut handle = self.handle(crate::group::resync::batch_len(power, au_bytes) * 2)?;
        let total = work.len() as u64;
        let mut done = 0u64;
        let slot = handle.slot.clone();
        for chunk in work.chunks(crate::group::resync::batch_len(power, au_bytes)) {
            if self.interrupted() {
                return Err(GroupError::Interrupted(
                    "the resync stopped because the service is stopping; the disks stay SYNCING and the next mount (or `cairn group online`) finishes it".into(),
                ));
            }
            let before = {
                let g = self.inner.meta()?;
                (g.offline_counts(), g.zeroings.mark())
            };
            let (copied, latch) = crate::group::resync::copy_stale(
                &mut handle,
                Some(&slot),
                chunk,
                power,
                &mut report,
            )?;
            // Latch → meta: the order every first writer keeps.
            let cleared = self.inner.operation(|g| g.resync_copied(&copied, &before));
            drop(latch);
            cleared??;
            done += chunk.len() as u64;
            progress(crate::group::resync::Progress {
                done,
                total,
                bytes_done: report.bytes_copied,
                ..Default::default()
            });
        }
        drop(handle);
        self.inner.operation(|g| g.resync_finish(&mut report))??;
        Ok(report)
    }

    /// Run (or resume) the rebalance while data handles run
    /// ([`Group::rebalance`]): metadata moves are metadata operations; each
    /// batch of data moves is copied through a handle of its own under its
    /// extents' exclusive latches, held until the operation that switches
    /// the maps is durable (latch → meta, the order first writes keep).
    pub fn rebalance(
        &self,
        power: usize,
        progress: &mut dyn FnMut(crate::group::resync::Progress),
    ) -> Result<crate::group::relocate::RebalanceReport, GroupError> {
        let result = self.rebalance_moves(power, progress);
        // The devices of disks whose drop completed are let go of, however
        // the rebalance ended.
        self.release_left_devices()?;
        result
    }

    fn rebalance_moves(
        &self,
        power: usize,
        progress: &mut dyn FnMut(crate::group::resync::Progress),
    ) -> Result<crate::group::relocate::RebalanceReport, GroupError> {
        let mut report = crate::group::relocate::RebalanceReport::default();
        let Some(moves) = self
            .inner
            .operation(|g| g.rebalance_start(power, &mut report))??
        else {
            return Ok(report);
        };
        let started = std::time::Instant::now();
        // Each I/O in flight holds a buffer of up to 1 MiB: a handle runs
        // at most REBALANCE_INFLIGHT_MAX at once, whatever the power.
        let inflight = power.min(crate::group::relocate::REBALANCE_INFLIGHT_MAX);
        let handle = self.handle(inflight)?;
        let slot = handle.slot.clone();
        let mut site = LiveMoves {
            live: self,
            handle,
            slot,
        };
        crate::group::move_run::run_moves(&mut site, moves, inflight, &mut report, progress)?;
        let LiveMoves { handle, .. } = site;
        drop(handle);
        // Readers of the maps before the last switch end before a dropped
        // disk leaves: waited for here, outside the metadata lock (a data
        // operation may need it to end).
        crate::group::move_run::readers_done(&self.inner.plane)?;
        self.inner
            .operation(|g| g.rebalance_finish(&mut report, false))??;
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(report)
    }

    /// Reclaim the group's returnable space while data handles run
    /// ([`crate::group::reclaim::run_reclaim`]): each batch's runs are reserved in
    /// a metadata operation, discarded (or zeroed) through a handle of its
    /// own outside `meta`, then given back and marked in another. The
    /// pace backs off while the data plane's own I/O on a disk slows.
    pub fn reclaim(
        &self,
        options: crate::group::reclaim::ReclaimOptions,
        progress: &mut dyn FnMut(crate::group::resync::Progress),
    ) -> Result<crate::group::reclaim::ReclaimReport, GroupError> {
        let compacted = if options.compact && !options.explain {
            // A refusal comes before anything moves.
            self.inner
                .operation(|g| g.reclaim_plan(options.method, options.force))??;
            self.inner.operation(|g| g.compact_begin())??;
            let au = self.inner.meta()?.au_bytes();
            let r = self.rebalance(
                options.power.max(1),
                &mut crate::group::reclaim::in_bytes(au, progress),
            );
            self.inner.operation(|g| g.compact_end())?;
            Some(r?)
        } else {
            None
        };
        let handle = self.handle(
            options
                .power
                .clamp(1, crate::group::reclaim::RECLAIM_POWER_MAX),
        )?;
        let slot = handle.slot.clone();
        let mut site = LiveMoves {
            live: self,
            handle,
            slot,
        };
        let foreground = || {
            self.disk_io()
                .map(|io| io.into_iter().map(|(d, c)| (d, c.snapshot())).collect())
                .unwrap_or_default()
        };
        let mut report =
            crate::group::reclaim::run_reclaim(&mut site, options, &foreground, progress)?;
        if let Some(r) = compacted {
            let au = self.inner.meta()?.au_bytes();
            report.compact_moves = r.compact_moves;
            report.compact_bytes = r.compact_aus_moved * au;
        }
        Ok(report)
    }

    /// Scrub the group ([`Group::scrub`]) while data handles run: the
    /// metadata and headers as one operation; then each data extent under
    /// its exclusive latch (no write lands between the reads of two copies,
    /// nor under a repair's rewrite), `power` chunks at a time: `meta` is
    /// taken to plan a part and to judge it (latch → meta, the order first
    /// writes keep), the copies are read without it on the scrub's own
    /// engine. A file deleted or replaced since the listing is skipped.
    pub fn scrub(
        &self,
        power: usize,
        how: crate::group::scrub::ScrubRepair,
        progress: &mut dyn FnMut(crate::group::resync::Progress),
    ) -> Result<crate::group::scrub::ScrubReport, GroupError> {
        let started = std::time::Instant::now();
        let repair = how.repair;
        let (mut report, extents, total) =
            self.inner.operation(|g| g.scrub_start(power, how))??;
        // At most `power` chunks of 1 MiB (every copy of each) read at
        // once, as a scrub of a group one command holds. The extent's
        // latch is held for the whole extent (no write or move of it comes
        // between); `meta` only to say what to read and to judge what was:
        // the reads are made without it, on an engine of the scrub's own
        // under the group's I/O timeout (made again when the disks it
        // reads are no longer those it was made for), so a slow or hung
        // disk holds no other operation.
        let power = power.min(crate::group::scrub::SCRUB_INFLIGHT_MAX);
        let mut engine: Option<(HandleEngine, BTreeMap<u16, DeviceId>)> = None;
        let mut done = 0;
        progress(crate::group::resync::Progress {
            done,
            total,
            ..Default::default()
        });
        for e in &extents {
            if self.interrupted() {
                return Err(GroupError::Interrupted(
                    "the scrub stopped because the service is stopping; run it again".into(),
                ));
            }
            let latch = self
                .inner
                .plane
                .latch(vec![((e.file, e.incarnation, e.index), Hold::Exclusive)]);
            self.scrub_extent(e, power, how, &mut engine, &mut report)?;
            drop(latch);
            done += e.bytes;
            progress(crate::group::resync::Progress {
                done,
                total,
                bytes_done: report.bytes_read,
                ..Default::default()
            });
        }
        self.inner
            .operation(|g| g.scrub_finish(repair, &mut report))??;
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(report)
    }

    /// Scrub extent `e` part by part, under its latch (the caller's): each
    /// part planned and judged under `meta`, its copies read without it on
    /// the scrub's own engine (`engine`, made again when the disks a part
    /// reads are no longer those it was made for).
    fn scrub_extent(
        &self,
        e: &crate::group::scrub::ScrubExtent,
        power: usize,
        how: crate::group::scrub::ScrubRepair,
        engine: &mut Option<(HandleEngine, BTreeMap<u16, DeviceId>)>,
        report: &mut crate::group::scrub::ScrubReport,
    ) -> Result<(), GroupError> {
        let mut from = 0;
        // A part whose disks changed, or whose file the metadata plane
        // zeroed, between its reads and its judgement is read again, a
        // bounded number of times.
        let mut again = 0;
        loop {
            let planned = {
                let g = self.inner.meta()?;
                g.scrub_part(e, from, power)
                    .map(|(chunks, next)| (chunks, next, g.member_devices(), g.zeroings.mark()))
            };
            let Some((chunks, next, members, zero_mark)) = planned else {
                break;
            };
            let reads = Group::scrub_part_reads(&chunks);
            let stale = engine.as_ref().is_none_or(|(_, made_for)| {
                reads
                    .iter()
                    .any(|(_, d, _, _)| made_for.get(d) != members.get(d))
            });
            if stale {
                *engine = Some((self.side_engine(&members, SCRUB_DEPTH)?, members));
            }
            let Some(((side, ids), _)) = engine.as_mut() else {
                break;
            };
            let read =
                crate::group::scrub::read_copies(side.as_mut(), reads, |d| ids.get(&d).copied())?;
            let judged = self
                .inner
                .meta()?
                .scrub_part_judge(e, from, &chunks, zero_mark, read, how, report)?;
            if !judged {
                again += 1;
                if again > SCRUB_READ_AGAIN_MAX {
                    return Err(GroupError::Interrupted(format!(
                        "the group's disks changed under the scrub {SCRUB_READ_AGAIN_MAX} times in a row; run it again"
                    )));
                }
                continue;
            }
            again = 0;
            match next {
                Some(n) => from = n,
                None => break,
            }
        }
        Ok(())
    }
}

/// A live group's rebalance: its metadata steps are operations, its data
/// goes through a handle of its own.
struct LiveMoves<'l> {
    live: &'l LiveGroup,
    handle: DataHandle,
    slot: Arc<GuardSlot>,
}

impl crate::group::move_run::MoveSite<'static> for LiveMoves<'_> {
    fn step<R>(&mut self, f: impl FnOnce(&mut Group<'static>) -> R) -> Result<R, GroupError> {
        self.live.inner.operation(f)
    }

    fn data(&mut self) -> (&mut dyn DataPort, Option<&std::sync::atomic::AtomicU64>) {
        (&mut self.handle, Some(&self.slot))
    }

    fn interrupted(&self) -> bool {
        self.live.interrupted()
    }
}
