//! `cairn group reclaim`: hand back to a thin array the free space it may
//! still hold (design: docs/thin-reclaim.md).
//!
//! A free AU without its discard-map mark is *returnable* (alloc.rs). A
//! reclaim takes returnable runs out of the free pool in batches (reserved,
//! under `meta`: from then on nobody can be handed them, so a discard can
//! never meet an AU someone was just given), discards (or, `--zero-fill`,
//! zeroes) them outside `meta`, then in one step gives them back to the
//! free pool and marks the ones whose I/O completed. The map is the
//! progress: a reclaim cut short by a crash leaves the rest unmarked, and
//! the next one goes on; one with nothing unmarked does nothing.
//!
//! Pacing, per disk: a token bucket at the rate asked for, and while the
//! data plane's own reads and writes on the disk (the foreground) show a
//! p99 above 1.5x what they showed before the reclaim began, the rate
//! halves (down to 1/16), creeping back by 1/16 a round when it recovers.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cairn_format::group::AuAddr;
#[cfg(test)]
use cairn_io::counted::OpStats;
use cairn_io::counted::{DeviceIoSnapshot, OpSnapshot, LATENCY_BUCKETS_US};
use cairn_io::{AlignedBuf, Op};
use serde::Serialize;

use super::alloc;
use super::data::{self, DiskIo};
use super::error::GroupError;
use super::mounted::Group;
use super::move_run::MoveSite;

/// The largest request a reclaim sends.
pub const RECLAIM_REQUEST_BYTES_MAX: u64 = 128 << 20;

/// Requests in flight per disk at most, whatever the power.
pub const RECLAIM_POWER_MAX: usize = 16;

/// A zero-fill reserves runs of at most this, and writes them in pieces of
/// at most [`ZERO_WRITE_BYTES`] (a batch holds `power` runs' buffers).
const ZERO_RUN_BYTES_MAX: u64 = 8 << 20;
const ZERO_WRITE_BYTES: u64 = 1 << 20;

/// The longest a paced reclaim waits before it looks whether to stop.
const PACE_SLICE: Duration = Duration::from_millis(100);

/// How a reclaim gives the space back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReclaimMethod {
    /// Discard (UNMAP, TRIM, a hole punched in a file).
    Discard,
    /// Write zeros, for arrays that only detect zeros.
    ZeroFill,
}

#[derive(Debug, Clone, Copy)]
pub struct ReclaimOptions {
    pub method: ReclaimMethod,
    /// Zero-fill a disk that accepts discard, too.
    pub force: bool,
    /// Bytes of range a second per disk; `None`: as fast as it goes.
    pub rate_bytes: Option<u64>,
    /// Requests in flight per disk.
    pub power: usize,
    /// Say what would be done; do nothing.
    pub explain: bool,
    /// First pack the data towards the start of each disk (the rebalance
    /// engine's compact pass), so that the free space is one tail.
    pub compact: bool,
}

/// One disk's part.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ReclaimDisk {
    pub number: u16,
    pub label: String,
    /// Free and not known to hold nothing, when the reclaim began.
    pub returnable_bytes: u64,
    /// Given back (discarded, or zero-filled) by this reclaim.
    pub returned_bytes: u64,
    /// Requests sent, and refused by the device.
    pub requests: u64,
    pub failed_requests: u64,
    /// Why nothing is done on this disk, when nothing is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ReclaimReport {
    pub method: ReclaimMethod,
    pub explain: bool,
    pub disks: Vec<ReclaimDisk>,
    pub returnable_bytes: u64,
    pub returned_bytes: u64,
    /// The pace asked for (bytes a second per disk; `None`: unpaced), and
    /// the lowest fraction of it the back-off went down to.
    pub rate_bytes: Option<u64>,
    pub slowest_fraction: f64,
    /// `--compact`: the compact pass's moves (planned; explained: that
    /// would be), and the bytes it moved (explained: would move).
    pub compact_moves: u64,
    pub compact_bytes: u64,
    pub elapsed_ms: u64,
}

/// A reserved run (start AU, AUs), and whether its I/O completed.
type RunDone = ((u32, u32), bool);

/// One disk's work, as planned.
struct DiskWork {
    disk: u16,
    /// Where the next batch starts looking.
    from: u64,
    done: bool,
    /// The token bucket: this disk may go on at this time.
    next_at: Instant,
    /// Fraction of the rate in force (1/16 ..= 1).
    fraction: f64,
    baseline_p99_us: Option<u64>,
    last_io: Option<DeviceIoSnapshot>,
}

impl Group<'_> {
    /// Per disk in service: what a reclaim by `method` would give back, or
    /// why it skips the disk. Refuses a zero-fill of a disk that accepts
    /// discard unless `force`.
    pub fn reclaim_plan(
        &self,
        method: ReclaimMethod,
        force: bool,
    ) -> Result<Vec<ReclaimDisk>, GroupError> {
        let mut out = Vec::new();
        for m in self.members.iter() {
            let n = m.entry.number;
            let label = m.entry.label.clone();
            let Some(alloc) = m.alloc.as_ref() else {
                continue;
            };
            let returnable_bytes = alloc.reclaimable_aus() * self.au_bytes;
            let discard = m
                .writable()
                .and_then(|d| self.engine.geometry(d))
                .map(|g| g.discard);
            let skipped = match (m.writable(), method, discard) {
                (None, _, _) => Some(format!("the disk is {}", m.entry.shown_state())),
                (_, ReclaimMethod::Discard, Some(DiscardSupport::Supported { .. })) => None,
                (_, ReclaimMethod::Discard, _) => Some(
                    "the device does not accept discard (for an array that detects zeros: --zero-fill)"
                        .into(),
                ),
                // (Even with nothing returnable yet: a compact first frees
                // some, and the refusal must come before it moves data.)
                (_, ReclaimMethod::ZeroFill, Some(DiscardSupport::Supported { .. })) if !force => {
                    return Err(GroupError::Invalid(format!(
                        "disk {label} accepts discard: `cairn group reclaim {}` gives its free space back without writing it; --zero-fill would write zeros over {} MiB (add --force to zero-fill anyway)",
                        self.name,
                        returnable_bytes >> 20
                    )));
                }
                (_, ReclaimMethod::ZeroFill, _) => None,
            };
            out.push(ReclaimDisk {
                number: n,
                label,
                returnable_bytes,
                returned_bytes: 0,
                requests: 0,
                failed_requests: 0,
                skipped,
            });
        }
        Ok(out)
    }

    /// Take returnable runs of disk `disk` out of the free pool, from AU
    /// `from` on: at most `count` runs of at most [`request_bytes`] each.
    fn reclaim_reserve(
        &mut self,
        disk: u16,
        from: u64,
        count: usize,
        options: &ReclaimOptions,
    ) -> Vec<(u32, u32)> {
        let run_max = (request_bytes(options) / self.au_bytes).max(1);
        let Some(alloc) = self.member_mut(disk).and_then(|m| m.alloc.as_mut()) else {
            return Vec::new();
        };
        alloc.reserve_returnable(from, run_max, count)
    }

    /// A batch's I/O is over: its runs go back to the free pool, and those
    /// whose I/O completed are marked as holding nothing.
    fn reclaim_done(&mut self, disk: u16, runs: &[RunDone]) -> Result<(), GroupError> {
        for ((start, len), ok) in runs {
            // (Parked with the disk's table if it went offline meanwhile.)
            self.unreserve_run(AuAddr { disk, au: *start }, u64::from(*len));
            if let Some(alloc) = self.member_mut(disk).and_then(|m| m.alloc.as_mut()) {
                if *ok {
                    alloc.set_clean(*start, *len);
                }
            }
        }
        self.commit()
    }
}

use cairn_io::geometry::DiscardSupport;

/// The largest run one request covers: [`RECLAIM_REQUEST_BYTES_MAX`] for a
/// discard (a zero-fill: [`ZERO_RUN_BYTES_MAX`], written in pieces); paced,
/// at most a tenth of a second of the rate. A discard of allocated space
/// keeps the device busy for as long as it takes (a 128 MiB one stalled
/// reads for 20 ms on a loop device over tmpfs, bench/README.md §12): the
/// pace spreads that cost in small pieces instead of rare large ones.
fn request_bytes(options: &ReclaimOptions) -> u64 {
    let most = match options.method {
        ReclaimMethod::Discard => RECLAIM_REQUEST_BYTES_MAX,
        ReclaimMethod::ZeroFill => ZERO_RUN_BYTES_MAX,
    };
    match options.rate_bytes {
        Some(rate) => most.min(rate / 10),
        None => most,
    }
}

/// A rebalance's progress (in AUs) as a reclaim's (in bytes).
pub(super) fn in_bytes(
    au: u64,
    progress: &mut dyn FnMut(super::resync::Progress),
) -> impl FnMut(super::resync::Progress) + '_ {
    move |p| {
        progress(super::resync::Progress {
            done: p.done * au,
            total: p.total * au,
            ..p
        })
    }
}

/// p99 of a latency histogram's growth between two snapshots, in µs;
/// `None` under 20 requests. Within its bucket the p99 is interpolated
/// linearly (as Prometheus's `histogram_quantile`): the buckets are a factor
/// of 2 to 2.5 apart, and the 1.5x the back-off looks for would otherwise
/// mean any step to the next bucket.
fn p99_between(before: &OpSnapshot, after: &OpSnapshot) -> Option<u64> {
    let count = after.count.checked_sub(before.count)?;
    if count < 20 {
        return None;
    }
    // The rank, as `histogram_quantile` takes it: not the slowest request
    // of a window of under 100.
    let rank = 0.99 * count as f64;
    let (mut below, mut lower) = (0u64, 0u64);
    for (i, bound) in LATENCY_BUCKETS_US.iter().enumerate() {
        let upto = after
            .latency_buckets_cumulative
            .get(i)?
            .checked_sub(*before.latency_buckets_cumulative.get(i)?)?;
        if upto as f64 >= rank {
            let within = (rank - below as f64) / (upto - below).max(1) as f64;
            return Some(lower + ((bound - lower) as f64 * within.clamp(0.0, 1.0)) as u64);
        }
        (below, lower) = (upto, *bound);
    }
    // Past the last bound: that bound (a baseline of "infinity" would
    // never back off).
    LATENCY_BUCKETS_US.last().copied()
}

/// The foreground's p99 between two snapshots: reads and writes; for a
/// zero-fill, whose own writes are counted with them, reads only.
fn foreground_p99(
    method: ReclaimMethod,
    before: &DeviceIoSnapshot,
    after: &DeviceIoSnapshot,
) -> Option<u64> {
    let reads = p99_between(&before.reads, &after.reads);
    match method {
        ReclaimMethod::Discard => reads.max(p99_between(&before.writes, &after.writes)),
        ReclaimMethod::ZeroFill => reads,
    }
}

/// Run a reclaim through `site` (a group one command holds, or a live
/// group's handle). `foreground` reads the data plane's per-disk counters
/// (empty where nothing else runs). Progress is in bytes of range.
pub(super) fn run_reclaim<'g>(
    site: &mut impl MoveSite<'g>,
    options: ReclaimOptions,
    foreground: &dyn Fn() -> BTreeMap<u16, DeviceIoSnapshot>,
    progress: &mut dyn FnMut(super::resync::Progress),
) -> Result<ReclaimReport, GroupError> {
    let started = Instant::now();
    let disks = site.step(|g| g.reclaim_plan(options.method, options.force))??;
    let mut report = ReclaimReport {
        method: options.method,
        explain: options.explain,
        returnable_bytes: disks.iter().map(|d| d.returnable_bytes).sum(),
        returned_bytes: 0,
        rate_bytes: options.rate_bytes.filter(|r| *r > 0),
        slowest_fraction: 1.0,
        compact_moves: 0,
        compact_bytes: 0,
        elapsed_ms: 0,
        disks: Vec::new(),
    };
    if options.explain {
        if options.compact {
            site.step(|g| g.compact_refusal())??;
            let (moves, bytes) = site.step(|g| {
                let moves = g.compact_moves();
                let bytes = moves.iter().map(|m| m.aus * g.au_bytes).sum::<u64>();
                (moves.len() as u64, bytes)
            })?;
            report.compact_moves = moves;
            report.compact_bytes = bytes;
        }
        report.disks = disks;
        return Ok(report);
    }
    site.step(|g| g.check_writable())??;
    let mut reclaim = Reclaim::start(site, options, report.rate_bytes, disks, started, foreground)?;
    let total = reclaim.total;
    progress(super::resync::Progress {
        done: 0,
        total,
        ..Default::default()
    });
    while reclaim.work.iter().any(|w| !w.done) {
        if site.interrupted() {
            return Err(GroupError::Interrupted(
                "the reclaim stopped because the service is stopping; what it gave back stays given back, and `cairn group reclaim` goes on from there".into(),
            ));
        }
        // The disks whose bucket allows a batch now; else wait for the first.
        let now = Instant::now();
        let ready: Vec<usize> = (0..reclaim.work.len())
            .filter(|i| !reclaim.work[*i].done && reclaim.work[*i].next_at <= now)
            .collect();
        if ready.is_empty() {
            reclaim.wait(now);
            continue;
        }
        let Some(per_disk) = reclaim.batch(site, &ready)? else {
            continue;
        };
        // Pace: each disk's bucket pays for its batch at the rate in force.
        reclaim.pace(&per_disk, &foreground(), now, &mut report);
        let done_bytes = reclaim.done_bytes;
        progress(super::resync::Progress {
            done: done_bytes.min(total),
            total,
            bytes_done: done_bytes,
            ..Default::default()
        });
    }
    let disks = reclaim.disks;
    report.returned_bytes = disks.iter().map(|d| d.returned_bytes).sum();
    report.disks = disks;
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// Per I/O of a batch, the batch entry and run it serves.
type IoOwners = Vec<(usize, (u32, u32))>;

/// A reclaim under way ([`run_reclaim`]): how it was asked to go, each
/// disk's work and part, and what it has given back so far.
struct Reclaim {
    options: ReclaimOptions,
    au: u64,
    power: usize,
    rate: Option<u64>,
    /// Bytes returnable on the disks it does not skip, when it began.
    total: u64,
    work: Vec<DiskWork>,
    disks: Vec<ReclaimDisk>,
    /// A zero-fill's buffers, kept from one batch to the next: a write
    /// leaves its buffer as it was, so one that comes back still holds
    /// zeros. Made afresh, each cost a pass over its bytes (an aligned
    /// allocation is zeroed by hand), as much again as the write. At most
    /// one batch's worth, as the batch handed them out.
    zeros: Vec<AlignedBuf>,
    done_bytes: u64,
}

impl Reclaim {
    /// Each disk's work, with the foreground's baseline p99 taken.
    fn start<'g>(
        site: &mut impl MoveSite<'g>,
        options: ReclaimOptions,
        rate: Option<u64>,
        disks: Vec<ReclaimDisk>,
        started: Instant,
        foreground: &dyn Fn() -> BTreeMap<u16, DeviceIoSnapshot>,
    ) -> Result<Self, GroupError> {
        let total: u64 = disks
            .iter()
            .filter(|d| d.skipped.is_none())
            .map(|d| d.returnable_bytes)
            .sum();
        let au = site.step(|g| g.au_bytes)?;
        let power = options.power.clamp(1, RECLAIM_POWER_MAX);
        let io_before = foreground();
        let mut work: Vec<DiskWork> = disks
            .iter()
            .filter(|d| d.skipped.is_none() && d.returnable_bytes > 0)
            .map(|d| DiskWork {
                disk: d.number,
                from: 0,
                done: false,
                next_at: started,
                fraction: 1.0,
                baseline_p99_us: None,
                last_io: io_before.get(&d.number).cloned(),
            })
            .collect();
        // The baseline: the foreground's p99 over a short look before the
        // first request (none when nothing runs beside the reclaim).
        if rate.is_some() && work.iter().any(|w| w.last_io.is_some()) {
            std::thread::sleep(Duration::from_millis(500));
            let now = foreground();
            for w in &mut work {
                if let (Some(before), Some(after)) = (&w.last_io, now.get(&w.disk)) {
                    w.baseline_p99_us = foreground_p99(options.method, before, after);
                    w.last_io = Some(after.clone());
                }
            }
        }
        Ok(Self {
            options,
            au,
            power,
            rate,
            total,
            work,
            disks,
            zeros: Vec::new(),
            done_bytes: 0,
        })
    }

    /// Wait until the first disk's bucket allows a batch.
    fn wait(&self, now: Instant) {
        let wake = self
            .work
            .iter()
            .filter(|w| !w.done)
            .map(|w| w.next_at)
            .min()
            .unwrap_or(now);
        // In slices, so that a stop is heard within one.
        std::thread::sleep(wake.saturating_duration_since(now).min(PACE_SLICE));
    }

    /// One batch on each disk `ready`: reserved, sent, flushed, and given
    /// back (marked where its I/O completed). The runs done, by disk's
    /// place in the work; `None` when there was nothing to send.
    fn batch<'g>(
        &mut self,
        site: &mut impl MoveSite<'g>,
        ready: &[usize],
    ) -> Result<Option<BTreeMap<usize, Vec<RunDone>>>, GroupError> {
        // Reserve a batch on each (one metadata step).
        let (work, power, options) = (&self.work, self.power, &self.options);
        let batches: Vec<(usize, Vec<(u32, u32)>)> = site.step(|g| {
            ready
                .iter()
                .map(|i| {
                    let w = &work[*i];
                    (*i, g.reclaim_reserve(w.disk, w.from, power, options))
                })
                .collect()
        })?;
        let (ios, owners) = self.batch_ios(&batches);
        if ios.is_empty() {
            return Ok(None);
        }
        let outcomes = self.send(site, &batches, ios, &owners)?;
        let per_disk = self.tally(&owners, outcomes);
        let marks: Vec<(u16, Vec<RunDone>)> = per_disk
            .iter()
            .map(|(i, runs)| (self.work[*i].disk, runs.clone()))
            .collect();
        site.step(|g| {
            marks
                .iter()
                .try_for_each(|(disk, runs)| g.reclaim_done(*disk, runs))
        })??;
        Ok(Some(per_disk))
    }

    /// A batch's I/Os (a discard per run; a zero-fill writes a run in
    /// pieces), with, per I/O, the batch entry and run it serves.
    fn batch_ios(&mut self, batches: &[(usize, Vec<(u32, u32)>)]) -> (Vec<DiskIo>, IoOwners) {
        let (au, method) = (self.au, self.options.method);
        let zeros = &mut self.zeros;
        // Per I/O, the batch entry and run it serves (a zero-fill writes a
        // run in pieces).
        let mut ios = Vec::new();
        let mut owners: Vec<(usize, (u32, u32))> = Vec::new();
        for (i, runs) in batches {
            let w = &mut self.work[*i];
            match runs.last() {
                None => {
                    w.done = true;
                    continue;
                }
                Some((s, l)) => w.from = u64::from(*s) + u64::from(*l),
            }
            for (start, len) in runs {
                let offset_bytes = u64::from(*start) * au;
                let len_bytes = u64::from(*len) * au;
                match method {
                    ReclaimMethod::Discard => {
                        owners.push((*i, (*start, *len)));
                        ios.push(DiskIo {
                            disk: w.disk,
                            op: Op::Discard {
                                offset_bytes,
                                len_bytes,
                            },
                        });
                    }
                    ReclaimMethod::ZeroFill => {
                        let mut at = 0;
                        while at < len_bytes {
                            let n = (len_bytes - at).min(ZERO_WRITE_BYTES);
                            owners.push((*i, (*start, *len)));
                            ios.push(DiskIo {
                                disk: w.disk,
                                op: Op::Write {
                                    offset_bytes: offset_bytes + at,
                                    buf: match zeros.iter().position(|b| b.len() as u64 == n) {
                                        Some(k) => zeros.swap_remove(k),
                                        None => AlignedBuf::zeroed(n as usize),
                                    },
                                    fua: false,
                                },
                            });
                            at += n;
                        }
                    }
                }
            }
        }
        (ios, owners)
    }

    /// Send a batch's I/Os, then flush each disk; an I/O on a disk whose
    /// flush failed failed too. On an error the batch's runs go back to
    /// the free pool, unmarked. A zero-fill keeps the buffers that came
    /// back.
    fn send<'g>(
        &mut self,
        site: &mut impl MoveSite<'g>,
        batches: &[(usize, Vec<(u32, u32)>)],
        ios: Vec<DiskIo>,
        owners: &[(usize, (u32, u32))],
    ) -> Result<Vec<data::IoOutcome>, GroupError> {
        let work = &self.work;
        // Then a flush of each disk: a mark says the device holds nothing
        // there, which a discard or zeros still in its cache do not make
        // true.
        let flushed: Vec<u16> = {
            let mut d: Vec<u16> = batches.iter().map(|(i, _)| work[*i].disk).collect();
            d.sort_unstable();
            d.dedup();
            d
        };
        let (port, _) = site.data();
        let outcomes = data::run(port, ios).and_then(|mut o| {
            let flushes = data::run(
                port,
                flushed
                    .iter()
                    .map(|disk| DiskIo {
                        disk: *disk,
                        op: Op::Flush,
                    })
                    .collect(),
            )?;
            for (disk, (result, _)) in flushed.iter().zip(flushes) {
                if let Err(e) = result {
                    for (k, (i, _)) in owners.iter().enumerate() {
                        if work[*i].disk == *disk {
                            o[k].0 = Err(e.clone());
                        }
                    }
                }
            }
            Ok(o)
        });
        // Whatever happened, the runs go back to the free pool.
        let outcomes = match outcomes {
            Ok(o) => o,
            Err(e) => {
                let back: Vec<(u16, Vec<RunDone>)> = batches
                    .iter()
                    .map(|(i, runs)| (work[*i].disk, runs.iter().map(|r| (*r, false)).collect()))
                    .collect();
                site.step(|g| {
                    for (disk, runs) in &back {
                        let _ = g.reclaim_done(*disk, runs);
                    }
                })?;
                return Err(e);
            }
        };
        let mut outcomes = outcomes;
        if self.options.method == ReclaimMethod::ZeroFill {
            self.zeros
                .extend(outcomes.iter_mut().filter_map(|(_, buf)| buf.take()));
        }
        Ok(outcomes)
    }

    /// Count a batch's requests and what they gave back, per disk; the
    /// runs done (a run is done when every I/O of it completed), by disk's
    /// place in the work.
    fn tally(
        &mut self,
        owners: &[(usize, (u32, u32))],
        outcomes: Vec<data::IoOutcome>,
    ) -> BTreeMap<usize, Vec<RunDone>> {
        let (work, disks, au) = (&self.work, &mut self.disks, self.au);
        // A run is done when every I/O of it completed.
        let mut runs_ok: BTreeMap<(usize, (u32, u32)), bool> = BTreeMap::new();
        for ((i, run), (result, _)) in owners.iter().zip(&outcomes) {
            let d = disks
                .iter_mut()
                .find(|d| d.number == work[*i].disk)
                .expect("invariant: planned disk");
            d.requests += 1;
            if result.is_err() {
                d.failed_requests += 1;
            }
            *runs_ok.entry((*i, *run)).or_insert(true) &= result.is_ok();
        }
        let mut per_disk: BTreeMap<usize, Vec<RunDone>> = BTreeMap::new();
        for ((i, run), ok) in runs_ok {
            per_disk.entry(i).or_default().push((run, ok));
            let bytes = u64::from(run.1) * au;
            if ok {
                let d = disks
                    .iter_mut()
                    .find(|d| d.number == work[i].disk)
                    .expect("invariant: planned disk");
                d.returned_bytes += bytes;
            }
            self.done_bytes += bytes;
        }
        per_disk
    }

    /// Each disk's bucket pays for its batch at the rate in force, which
    /// backs off while the foreground's p99 is above 1.5x its baseline.
    fn pace(
        &mut self,
        per_disk: &BTreeMap<usize, Vec<RunDone>>,
        io_now: &BTreeMap<u16, DeviceIoSnapshot>,
        now: Instant,
        report: &mut ReclaimReport,
    ) {
        let (rate, au) = (self.rate, self.au);
        for (i, runs) in per_disk {
            let w = &mut self.work[*i];
            // (Unpaced, there is no rate to back off from.)
            let paced = (&w.last_io, io_now.get(&w.disk), rate);
            if let (Some(before), Some(after), Some(_)) = paced {
                let p99 = foreground_p99(self.options.method, before, after);
                match (p99, w.baseline_p99_us) {
                    (Some(now), Some(base)) if now.saturating_mul(2) > base.saturating_mul(3) => {
                        w.fraction = (w.fraction / 2.0).max(1.0 / 16.0);
                    }
                    (Some(_), Some(_)) => w.fraction = (w.fraction + 1.0 / 16.0).min(1.0),
                    // A foreground idle while the baseline was taken: its
                    // first busy window is the baseline.
                    (Some(now), None) => w.baseline_p99_us = Some(now),
                    (None, _) => {}
                }
                // (A counter that went backwards, its device replaced:
                // start again from it.)
                if p99.is_some() || after.reads.count < before.reads.count {
                    w.last_io = Some(after.clone());
                }
                report.slowest_fraction = report.slowest_fraction.min(w.fraction);
            }
            if let Some(rate) = rate {
                let bytes: u64 = runs.iter().map(|(r, _)| u64::from(r.1) * au).sum();
                let pay = Duration::from_secs_f64(bytes as f64 / (rate as f64 * w.fraction));
                // From when the batch started, or when it was due if
                // later: no credit for time the disk spent idle.
                w.next_at = w.next_at.max(now) + pay;
            }
        }
    }
}

impl Group<'_> {
    /// Make durable now the discard marks that runs reserved for a copy
    /// lost ([`alloc::DiskAlloc::reserve`]): the copy writes them before the
    /// commit that claims them, and a crash in between must not leave an
    /// AU that holds the copy marked as holding nothing.
    pub(super) fn save_mark_clears(&mut self) -> Result<(), GroupError> {
        if self.clean_dirty_blocks() > 0 {
            self.commit_now()?;
        }
        Ok(())
    }

    /// Discard-map blocks the running transaction has changed.
    pub(super) fn clean_dirty_blocks(&self) -> usize {
        self.members
            .iter()
            .filter_map(|m| m.alloc.as_ref())
            .map(alloc::DiskAlloc::clean_dirty)
            .sum()
    }

    /// The AUs of disk `disk` its discard map marks as holding nothing (for
    /// checks: each must read back as the device reads a discarded range).
    pub fn discard_marks(&self, disk: u16) -> Vec<u64> {
        let Some(alloc) = self.member(disk).and_then(|m| m.alloc.as_ref()) else {
            return Vec::new();
        };
        (alloc.layout.first_data_au..alloc.layout.au_count)
            .filter(|au| alloc.is_clean(*au))
            .collect()
    }

    /// Free bytes of disk `disk` that may still hold data on the device
    /// (`None`: its table is not loaded).
    pub fn returnable_bytes(&self, disk: u16) -> Option<u64> {
        let alloc = self.member(disk)?.alloc.as_ref()?;
        Some(alloc.returnable_aus() * self.au_bytes)
    }
}

impl<'g> Group<'g> {
    /// Reclaim the group's returnable space ([`run_reclaim`]), one command
    /// holding the group: nothing runs beside it, so only the rate paces.
    /// With `compact`, a rebalance that ends with the compact pass runs
    /// first.
    pub fn reclaim(
        &mut self,
        options: ReclaimOptions,
        progress: &mut dyn FnMut(super::resync::Progress),
    ) -> Result<ReclaimReport, GroupError> {
        let compacted = if options.compact && !options.explain {
            // A refusal comes before anything moves.
            self.reclaim_plan(options.method, options.force)?;
            self.compact_begin()?;
            let au = self.au_bytes;
            let r = self.rebalance(options.power.max(1), &mut in_bytes(au, progress));
            self.compact_end();
            Some(r?)
        } else {
            None
        };
        let mut report = run_reclaim(self, options, &BTreeMap::new, progress)?;
        if !options.explain {
            self.commit_now()?;
        }
        if let Some(r) = compacted {
            report.compact_moves = r.compact_moves;
            report.compact_bytes = r.compact_aus_moved * self.au_bytes;
        }
        Ok(report)
    }

    /// Before a reclaim's compact pass: refused while a rebalance is
    /// pending (the compact runs as one, and would finish it, with its
    /// drops and resizes, unasked); then the pass is asked for.
    pub(super) fn compact_begin(&mut self) -> Result<(), GroupError> {
        self.check_writable()?;
        self.compact_refusal()?;
        self.compact_asked = true;
        Ok(())
    }

    /// Why a reclaim may not compact now: a rebalance pending (the compact
    /// runs as a rebalance, and would finish it, with its drops and
    /// resizes, unasked). A group merely out of balance is balanced first:
    /// the compact pass follows the rebalance proper.
    pub fn compact_refusal(&self) -> Result<(), GroupError> {
        if let Some(power) = self.rebalance_pending() {
            return Err(GroupError::Invalid(format!(
                "a rebalance is pending in group {} ({}): finish it first (`cairn group rebalance {}`), then reclaim with --compact",
                self.name,
                if power == 0 {
                    "paused".to_string()
                } else {
                    format!("power {power}")
                },
                self.name
            )));
        }
        Ok(())
    }

    /// The reclaim's compact pass is over (however it ended).
    pub(super) fn compact_end(&mut self) {
        self.compact_asked = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(counts: &[(u64, u64)]) -> OpSnapshot {
        // (bucket bound, requests in it)
        let mut cumulative = vec![0; LATENCY_BUCKETS_US.len() + 1];
        for (bound, n) in counts {
            let i = LATENCY_BUCKETS_US
                .iter()
                .position(|b| b == bound)
                .expect("a bucket bound");
            for c in cumulative.iter_mut().skip(i) {
                *c += n;
            }
        }
        OpSnapshot {
            count: *cumulative.last().expect("buckets"),
            latency_buckets_cumulative: cumulative,
            ..OpSnapshot::default()
        }
    }

    #[test]
    fn the_p99_is_interpolated_within_its_bucket() {
        let none = OpSnapshot::default();
        assert_eq!(p99_between(&none, &histogram(&[(50, 19)])), None, "too few");
        // 1,000 reads: 990 under 50 µs, 10 in the 100 µs bucket: the
        // 990th is the last under 50.
        assert_eq!(
            p99_between(&none, &histogram(&[(50, 990), (100, 10)])),
            Some(50)
        );
        // 980 under 50, 20 in (50, 100]: the p99 is half-way into it.
        assert_eq!(
            p99_between(&none, &histogram(&[(50, 980), (100, 20)])),
            Some(75)
        );
        // 50 reads, one slow: half-way into its bucket by rank (49.5 of
        // 50), not the bucket's bound.
        assert_eq!(
            p99_between(&none, &histogram(&[(50, 49), (100, 1)])),
            Some(75)
        );
        // Past the last bound: that bound, not "infinity".
        let slow = OpStats::default();
        slow.record(0, false, std::time::Duration::from_secs(5));
        let mut all = histogram(&[(50, 99)]);
        for (c, d) in all
            .latency_buckets_cumulative
            .iter_mut()
            .zip(slow.snapshot().latency_buckets_cumulative)
        {
            *c += d;
        }
        all.count += 1;
        assert_eq!(
            p99_between(&none, &all),
            Some(50),
            "the 99th of 100 is fast"
        );
        // Growth only: what was there before does not count.
        let before = histogram(&[(1_000, 500)]);
        let after = histogram(&[(1_000, 500), (50, 1_000)]);
        assert_eq!(p99_between(&before, &after), Some(49));
    }
}
