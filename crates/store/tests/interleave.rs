//! The interleaving simulator, in the manner of TigerBeetle's VOPR: a seed
//! picks a group (disks, failure groups, redundancy, sector sizes) and drives
//! several concurrent actors on a live group — two writers, each creating,
//! writing, punching holes (a volume's discard), reading back (once a copy may be silently damaged, with the
//! caller's check), syncing, resizing and deleting its own files (big
//! enough for indirect extents, some fine-striped), a metadata actor making
//! directories, aliases and short-lived files, and a fault actor — over
//! simulated disks shared by every actor's engine. A deterministic scheduler
//! (`cairn_io_sim::Turnstile`) runs one actor at a time and may switch at
//! every I/O and every wait for another actor, as the seed says; the disks reorder
//! completions, and at a point the seed picks the process "dies": every I/O
//! fails, the disks keep, lose or tear what was not flushed, and the group is
//! mounted again — sometimes dying once more during that mount's recovery.
//!
//! A life-cycle actor takes disks offline and brings them back (mirrored
//! groups), and changes the disks: adds a spare, drops a member, and runs
//! the rebalance at power 1, 2, 4 or 16 while the writers write the very
//! extents it moves; after the crash a rebalance left pending is finished
//! before the checks. It also reclaims the free space (discard or
//! zero-fill, sometimes compacting first; half the seeds keep quiet as they
//! free), and after recovery every AU a discard map marks must read as
//! discarded. While a failure group is away the writers go on creating and
//! growing files, their copies there recorded missing (lowered
//! redundancy); once every disk is back ONLINE nothing may be left
//! lowered.
//!
//! Faults in the random runs (mirrored groups only, on disks of one failure
//! group, so a copy survives; which kinds, drawn per seed: none, only loud
//! ones, or silent ones too — [`FaultPlan`]): a lost disk, transient read
//! and write errors, misdirected writes and bit rot; a disk that hangs (its
//! requests answered by nothing, until each times out after the group's
//! `disk_io_timeout` in simulated time and the disk is taken offline as
//! failed; it answers again after the crash); and at the crash, writes
//! torn at 512-byte sectors inside 4 KiB metadata blocks (512n disks). An
//! error reaches an actor only where the fault model says its caller may
//! see one ([`World::failed`]): never from one failure group's faults to a
//! caller of a mirrored group. Refusals of `offline` and `online` are
//! checked against the disk's state, and a scrub beside the writers must
//! find nothing no fault explains. In some seeds a disk taken OFFLINE finds
//! another image in its place when `online` is asked — an older copy of
//! it, a blank device, another group's disk ([`WrongImage`]): the online
//! must be refused naming what it found, the disk stay OFFLINE, and if the
//! process dies meanwhile the recovery mount must refuse it too.
//!
//! After recovery, before any read (a read that finds a bad copy rewrites
//! it): every copy in service of every written extent, read off its
//! simulated disk, holds what the file may read there (its synced content
//! or a write acknowledged since, sector by sector), so the mirrors agree
//! and none missed an acknowledged write. Then every file whose create was
//! acknowledged exists with the size last acknowledged and reads back as
//! that content (plainly; with the caller's check, as a database with
//! block checksums reads, where silent damage is possible);
//! directories and aliases are what was acknowledged, and nothing else is
//! listed; `group check` is clean (no AU leaked or owned twice).
//!
//! Every conditional check is counted each time it runs, and every error
//! accepted by its reason, per seed; the run prints the totals, and a run
//! of 500 seeds or more fails if a check in [`CHECKS`] never ran.
//!
//! `CAIRN_INTERLEAVE_SEEDS` sets how many seeds (CI default below) and
//! `CAIRN_INTERLEAVE_FIRST_SEED` where they start; `CAIRN_INTERLEAVE_SEED`
//! replays one, `CAIRN_INTERLEAVE_TRACE=1` says what each actor does. A
//! failure prints the command that replays it.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use cairn_format::group::DiskState;
use cairn_io::{DeviceId, IoEngine};
use cairn_io_sim::{geometry, Actor, CrashPolicy, DiskImage, SharedSim, SimEngine, Turnstile};
use cairn_store::group::{
    self, AliasKind, CreateOptions, GroupError, GroupSpec, LiveGroup, NewDisk, Redundancy,
};
use cairn_store::names::GroupPath;
use uuid::Uuid;

mod common;
use common::MIB;
use common::{Rand, Tally};
const KIB: u64 = 1 << 10;
/// Seeds per CI run (two at a time; see docs/testing.md for the rate);
/// `CAIRN_INTERLEAVE_SEEDS` sets another count (100,000 for a long run).
const SEEDS_CI: u64 = 10_000;
/// Operations per writer and per metadata actor, before the crash cuts them.
const OPS_PER_ACTOR: usize = 80;

fn trace() -> bool {
    std::env::var_os("CAIRN_INTERLEAVE_TRACE").is_some()
}

#[derive(Debug, Clone)]
struct Config {
    /// (size, failure group) per disk.
    disks: Vec<(u64, usize)>,
    /// Labelled disks outside the group that the life-cycle actor may add
    /// (size, failure group).
    spares: Vec<(u64, usize)>,
    redundancy: Redundancy,
    logical: u32,
    physical: u32,
}

fn config(rng: &mut Rand) -> Config {
    let redundancy = match rng.below(4) {
        0 => Redundancy::External,
        1 | 2 => Redundancy::Normal,
        _ => Redundancy::High,
    };
    let fgs = usize::from(redundancy.copies()) + rng.below(2) as usize;
    let count = fgs + rng.below(3) as usize;
    let disks = (0..count)
        .map(|i| (384 * MIB + rng.below(3) * 128 * MIB, i % fgs))
        .collect();
    let spares = (0..rng.below(3))
        .map(|_| {
            (
                384 * MIB + rng.below(3) * 128 * MIB,
                rng.below(fgs as u64) as usize,
            )
        })
        .collect();
    let logical = if rng.chance(50) { 512 } else { 4096 };
    // 512n disks tear 4 KiB metadata blocks at 512-byte sectors.
    let physical = if logical == 512 && rng.chance(50) {
        512
    } else {
        4096
    };
    Config {
        disks,
        spares,
        redundancy,
        logical,
        physical,
    }
}

/// Labelled disks and a new group on them, dismounted.
fn build(seed: u64, cfg: &Config) -> (SimEngine, Vec<DeviceId>) {
    let mut sim = SimEngine::new(seed, 256);
    let ids = common::labelled_disks(
        &mut sim,
        cfg.disks
            .iter()
            .chain(&cfg.spares)
            .map(|(size, _)| geometry(*size, cfg.logical, cfg.physical, 512 << 10)),
        |i| 0xC0DE << 64 | u128::from(seed) << 16 | i as u128,
    );
    let disks: Vec<NewDisk> = ids
        .iter()
        .zip(&cfg.disks)
        .map(|(d, (_, fg))| NewDisk {
            device: *d,
            failgroup: Some(format!("FG{fg}")),
        })
        .collect();
    let g = group::create(
        &mut sim,
        &disks,
        &GroupSpec {
            name: "SIM".into(),
            redundancy: cfg.redundancy,
            au_bytes: MIB,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1_763_700_000,
            group_uuid: Uuid::from_u128(0x1E7E << 64 | u128::from(seed)),
        },
    )
    .unwrap();
    g.dismount().unwrap();
    (sim, ids)
}

fn path(name: &str) -> GroupPath {
    GroupPath::parse(&format!("+SIM/{name}")).unwrap()
}

fn live(shared: &SharedSim, ids: &[DeviceId]) -> Result<LiveGroup, GroupError> {
    let (live, report) = common::mount_live(shared, ids, "SIM")?;
    if trace() {
        eprintln!("mount: {report:?}");
    }
    Ok(live)
}

// ---------------------------------------------------------------------------
// The model

/// A file's bytes, kept sparsely: pages never written read as zeros, so a
/// 140 MiB file costs the model only what was written to it (the model's
/// whole-file buffers were most of the simulator's time).
#[derive(Debug, Clone, Default)]
struct Sparse {
    /// Page number → its `PAGE` bytes.
    pages: BTreeMap<u64, Box<[u8]>>,
}

const PAGE: u64 = 64 * KIB;
static ZEROS: [u8; PAGE as usize] = [0; PAGE as usize];

impl Sparse {
    /// The pieces of `len` bytes at `offset`: (page, offset in it, length).
    fn pieces(offset: u64, len: u64) -> impl Iterator<Item = (u64, usize, usize)> {
        let mut at = offset;
        let end = offset + len;
        std::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let within = at % PAGE;
            let n = (PAGE - within).min(end - at);
            let piece = (at / PAGE, within as usize, n as usize);
            at += n;
            Some(piece)
        })
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        let mut from = 0;
        for (page, within, n) in Self::pieces(offset, data.len() as u64) {
            let bytes = self
                .pages
                .entry(page)
                .or_insert_with(|| vec![0u8; PAGE as usize].into_boxed_slice());
            bytes[within..within + n].copy_from_slice(&data[from..from + n]);
            from += n;
        }
    }

    fn read(&self, offset: u64, out: &mut [u8]) {
        let mut to = 0;
        for (page, within, n) in Self::pieces(offset, out.len() as u64) {
            match self.pages.get(&page) {
                Some(bytes) => out[to..to + n].copy_from_slice(&bytes[within..within + n]),
                None => out[to..to + n].fill(0),
            }
            to += n;
        }
    }

    /// Whether the bytes at `offset` are `data`.
    /// Whether any page of `offset..offset + len` was ever written.
    fn touches(&self, offset: u64, len: u64) -> bool {
        self.pages
            .range(offset / PAGE..(offset + len).div_ceil(PAGE))
            .next()
            .is_some()
    }

    fn holds(&self, offset: u64, data: &[u8]) -> bool {
        let mut from = 0;
        Self::pieces(offset, data.len() as u64).all(|(page, within, n)| {
            let want = &data[from..from + n];
            from += n;
            match self.pages.get(&page) {
                Some(bytes) => &bytes[within..within + n] == want,
                None => want == &ZEROS[..n],
            }
        })
    }

    /// Everything from `len` on reads as zeros again.
    fn cut(&mut self, len: u64) {
        self.pages.split_off(&len.div_ceil(PAGE));
        if !len.is_multiple_of(PAGE) {
            if let Some(bytes) = self.pages.get_mut(&(len / PAGE)) {
                bytes[(len % PAGE) as usize..].fill(0);
            }
        }
    }
}

/// What a file must read as.
#[derive(Debug, Clone)]
struct ModelFile {
    number: u32,
    size: u64,
    /// Content as of the last completed sync; nothing lies past `size`.
    durable: Sparse,
    /// Writes since (offset, data): each may or may not have landed.
    pending: Vec<(u64, Vec<u8>)>,
    /// An operation on it was in flight when something failed: its size and
    /// existence are uncertain.
    uncertain: bool,
    /// A write to it failed (a fault): what it reads back is any allowed
    /// content, not exactly the last write.
    inexact: bool,
}

impl ModelFile {
    fn new(number: u32, size: u64) -> Self {
        Self {
            number,
            size,
            durable: Sparse::default(),
            pending: Vec::new(),
            uncertain: false,
            inexact: false,
        }
    }

    /// Whether the model saw any write to `offset..offset + len`, synced or
    /// not.
    fn touches(&self, offset: u64, len: u64) -> bool {
        self.durable.touches(offset, len)
            || self
                .pending
                .iter()
                .any(|(w, data)| *w < offset + len && offset < w + data.len() as u64)
    }

    fn sync(&mut self) {
        for (off, data) in std::mem::take(&mut self.pending) {
            self.durable.write(off, &data);
        }
    }

    /// What `len` bytes at `offset` must read as, once every write landed.
    fn latest(&self, offset: u64, len: u64) -> Vec<u8> {
        let (start, end) = (offset as usize, (offset + len) as usize);
        let mut v = vec![0u8; len as usize];
        self.durable.read(offset, &mut v);
        for (off, data) in &self.pending {
            let (w0, w1) = (*off as usize, *off as usize + data.len());
            let (a, b) = (w0.max(start), w1.min(end));
            if a < b {
                v[a - start..b - start].copy_from_slice(&data[a - w0..b - w0]);
            }
        }
        v
    }

    /// The file's size changes; what lay past the new end is gone, and a
    /// grow reads as zeros.
    fn resize(&mut self, new: u64) {
        let mut pending = Vec::new();
        for (off, data) in std::mem::take(&mut self.pending) {
            if off >= new {
                continue;
            }
            let keep = ((new - off) as usize).min(data.len());
            pending.push((off, data[..keep].to_vec()));
        }
        self.pending = pending;
        // What the shrink cut, and so what a grow brings back, reads as zeros.
        self.durable.cut(new);
        self.size = new;
    }

    /// Whether `actual` at `offset` is, sector by sector, the synced content
    /// or one of the writes since.
    fn allowed(&self, offset: u64, actual: &[u8], sector: u64) -> Result<(), String> {
        // Most reads are all synced content: one comparison, not one a sector.
        if offset + actual.len() as u64 <= self.size && self.durable.holds(offset, actual) {
            return Ok(());
        }
        for (s, chunk) in actual.chunks(sector as usize).enumerate() {
            let off = offset + s as u64 * sector;
            if off + chunk.len() as u64 <= self.size && self.durable.holds(off, chunk) {
                continue;
            }
            let pending = self.pending.iter().any(|(w, data)| {
                *w <= off && off + chunk.len() as u64 <= *w + data.len() as u64 && {
                    let start = (off - w) as usize;
                    &data[start..start + chunk.len()] == chunk
                }
            });
            if !pending {
                return Err(format!(
                    "file {} sector at {off}: neither synced nor a write since",
                    self.number
                ));
            }
        }
        Ok(())
    }
}

#[derive(Debug, Default)]
struct Model {
    files: BTreeMap<String, ModelFile>,
    /// Directories acknowledged, and ones whose mkdir was in flight.
    dirs: BTreeSet<String>,
    dirs_uncertain: BTreeSet<String>,
    /// Aliases acknowledged: name → file name.
    aliases: BTreeMap<String, String>,
    aliases_uncertain: BTreeSet<String>,
    /// Files whose create or delete was in flight at a failure.
    names_uncertain: BTreeSet<String>,
}

/// Which faults a seed injects, on the disks of one failure group of a
/// mirrored group (an external-redundancy group gets none: it keeps one
/// copy, and a fault there loses data by design). Drawn per seed, so that
/// each kind of seed is common: none at all (a fifth: every scrub beside
/// the writers must then find nothing), only faults the group sees (errors
/// and a lost disk: every copy in service must still hold what was
/// written), and silent damage besides (misdirected writes, bit rot: only
/// a reader's own check finds it, and a copy on the faulted disks may hold
/// anything).
#[derive(Debug, Clone, Copy, Default)]
struct FaultPlan {
    lose: bool,
    write_errors: bool,
    read_errors: bool,
    misdirect: bool,
    rot: bool,
    /// A disk stops answering at some turn (a loud fault: its requests time
    /// out and the disk is failed); only in seeds with other faults, so the
    /// fifth with none stays clean.
    hang: bool,
}

impl FaultPlan {
    fn draw(rng: &mut Rand, mirrored: bool) -> Self {
        let mut plan = Self::draw_kinds(rng, mirrored);
        plan.hang = plan.any() && rng.chance(18);
        plan
    }
    fn draw_kinds(rng: &mut Rand, mirrored: bool) -> Self {
        let kind = rng.below(100);
        if !mirrored || kind < 20 {
            return Self::default();
        }
        let loud = |rng: &mut Rand, percent| Self {
            lose: rng.chance(percent),
            write_errors: rng.chance(percent),
            read_errors: rng.chance(percent),
            misdirect: false,
            rot: false,
            hang: false,
        };
        if kind < 60 {
            let mut plan = loud(rng, 60);
            if !plan.any() {
                plan.write_errors = true;
            }
            return plan;
        }
        let mut plan = loud(rng, 50);
        plan.misdirect = rng.chance(70);
        plan.rot = !plan.misdirect || rng.chance(70);
        plan
    }
    fn silent(&self) -> bool {
        self.misdirect || self.rot
    }
    fn any(&self) -> bool {
        self.lose || self.write_errors || self.read_errors || self.hang || self.silent()
    }
}

/// Why a caller may see an error, as the fault model says; each error an
/// actor accepts is counted under one of these.
const CRASHED: &str = "the process died (the crash point was reached)";
const ONLINE_FAILING: &str = "online of a disk the fault actor lost or fails I/O on";
const SCRUB_FAILING: &str = "a scrub reading a copy on a disk the fault actor fails";

/// Every conditional check of the simulator, counted each time it runs: a
/// run of enough seeds fails if one of them never ran.
const CHECKS: &[&str] = &[
    "writers: read back exactly what was written",
    "writers: read back with their own check (silent damage possible)",
    "scrub: clean beside the writers (no fault could explain a finding)",
    "scrub: each finding names a faulted disk",
    "offline: the disk went OFFLINE",
    "offline refused: the disk was OFFLINE already or leaves the group",
    "online: an OFFLINE disk came back ONLINE with nothing left without a source",
    "online refused: an older image of the disk in its place",
    "online refused: a blank device in the disk's place",
    "online refused: another group's disk in the disk's place",
    "raw copies: an AU of a copy compared with the model",
    "raw copies: a mirrored seed compared every copy in service",
    "raw copies: a copy on a disk out of service passed over",
    "read-back: a plain read compared with the model",
    "read-back: a checked read (silent damage possible)",
    "names: every acknowledged directory listed",
    "names: every acknowledged alias names its file",
    "names: nothing listed that was never acknowledged",
    "crash: the process died mid-run (the budget ran out)",
    "crash: the recovery mount died too",
];

/// Outcomes counted beside the checks, but rare enough that a run may see
/// none: printed, not required.
const RARE: &[&str] = &[
    "crash: the process died after the actors finished",
    "online: an OFFLINE disk left SYNCING (a grow zeroed what it copied)",
    "wrong image: in the disk's place when the process died (the recovery mount must refuse it)",
    "raw copies: a stale AU passed over",
    "raw copies: a damaged copy on a faulted disk passed over",
    "space: lent to a data extent while an older reader or a discard held it",
    "space: a first write waited for lent space",
];

/// A seed's accounting: its checks, and the errors it accepted by reason.
#[derive(Debug, Default, Clone)]
struct Accounts {
    checks: Tally,
    accepted: Tally,
}

/// What the run shares between actors.
struct World {
    live: LiveGroup,
    shared: SharedSim,
    ids: Vec<DeviceId>,
    cfg: Config,
    model: Mutex<Model>,
    /// The faults this seed may inject, and the disks they hit (those of
    /// one failure group; empty without faults).
    plan: FaultPlan,
    victims: BTreeSet<DeviceId>,
    /// A fault was injected: errors may follow.
    faulted: AtomicBool,
    /// Disks the fault actor lost (they stay lost).
    lost: Mutex<BTreeSet<DeviceId>>,
    sector: u64,
    /// Operations the actors completed (acknowledged or failed).
    ops: AtomicU64,
    /// The crash: the simulated disks' budget is armed once the actors have
    /// done `crash_at_ops` operations, `crash_delay` mutating requests ahead.
    crash_at_ops: u64,
    crash_delay: usize,
    armed: AtomicBool,
    /// Journal records written when the crash was armed.
    records: AtomicU64,
    /// Data may have been silently damaged on a copy on the fault actor's
    /// disks (a misdirected write, bit rot): data blocks carry no
    /// checksums, so only a reader with its own check finds it.
    silent_damage: AtomicBool,
    /// Extents (file, incarnation, index) that had a copy on a faulted
    /// disk while silent damage was possible, as a rebalance began: the
    /// move of that copy carries its damage to whichever disk it lands on.
    tainted: Mutex<BTreeSet<(u32, u32, u64)>>,
    accounts: Mutex<Accounts>,
    /// The disk the fault actor hung (it stays hung until the crash).
    hung: Mutex<Option<DeviceId>>,
    /// Disks taken offline on request and brought back (each resynced).
    offlined: AtomicU64,
    /// Scrubs run beside the writers.
    scrubbed: AtomicU64,
    resynced: AtomicU64,
    /// Spares added, drops completed, extent copies moved by rebalances.
    added: AtomicU64,
    dropped: AtomicU64,
    moved: AtomicU64,
    /// Disks resized (grown, or shrinks completed), and OFFLINE disks
    /// replaced by a spare.
    resized: AtomicU64,
    replaced: AtomicU64,
    /// Moves planned by compact passes.
    compacted: AtomicU64,
    /// Bytes given back by reclaims beside the writers.
    reclaimed: AtomicU64,
    /// Files created with their redundancy lowered (a failure group away:
    /// copies recorded on its disks, restored by a resync or a rebuild).
    lowered: AtomicU64,
}

impl World {
    /// An actor starts an operation; the crash is armed once enough have.
    fn count_op(&self) {
        // Between two operations of this actor, whatever the others are
        // in: the group's invariants hold at every metadata step's end.
        if let Err(v) = self.live.check_invariants() {
            panic!("after {} operations: {v}", self.ops.load(Ordering::SeqCst));
        }
        let n = self.ops.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= self.crash_at_ops && !self.armed.swap(true, Ordering::SeqCst) {
            // Group commit, as of the crash (after it the group has
            // usually stopped, and says nothing).
            let records = self.live.meta(|g| g.journal_records()).unwrap_or(0);
            self.records.store(records, Ordering::SeqCst);
            self.shared.crash_after(Some(self.crash_delay));
        }
    }

    fn check(&self, name: &'static str) {
        debug_assert!(
            CHECKS.contains(&name) || RARE.contains(&name),
            "{name} is not in CHECKS"
        );
        self.accounts.lock().unwrap().checks.hit(name);
    }

    /// An operation failed with `e`. Accepted only where the fault model
    /// says its caller may see an error: the process died, or `excuse`
    /// (the operation works on a disk the fault actor fails) — never for a
    /// fault of one failure group reaching a caller of a mirrored group,
    /// nor for anything in a group with no fault. Returns whether the actor
    /// must stop (the process died, or the group stopped).
    fn failed(&self, e: &GroupError, what: &str, seed: u64, excuse: Option<&'static str>) -> bool {
        let why = if self.shared.crashed() {
            CRASHED
        } else if let Some(why) = excuse {
            why
        } else {
            panic!(
                "seed {seed}: {what}: {e}: no fault the model injected explains an error here ({:?} on disks {:?}{})",
                self.plan,
                self.victims,
                if self.faulted.load(Ordering::SeqCst) { "" } else { ", none injected yet" }
            );
        };
        self.accounts.lock().unwrap().accepted.hit(why);
        if trace() {
            eprintln!("  {what}: {e} (accepted: {why})");
        }
        self.shared.crashed() || matches!(e, GroupError::Poisoned(_))
    }

    fn stopped(&self) -> bool {
        self.shared.crashed()
    }

    fn lost(&self, device: DeviceId) -> bool {
        self.lost.lock().unwrap().contains(&device)
    }

    fn hung(&self, device: DeviceId) -> bool {
        *self.hung.lock().unwrap() == Some(device)
    }

    /// The fault actor fails I/O on `device` (one of its disks): lost,
    /// hung, or erring at a rate.
    fn fault_touches(&self, device: DeviceId) -> bool {
        self.lost(device) || self.hung(device) || self.plan.write_errors || self.plan.read_errors
    }

    /// The device of the disk labelled `label` (`D<i>`).
    fn device_of(&self, label: &str) -> Option<DeviceId> {
        let i: usize = label.strip_prefix('D')?.parse().ok()?;
        self.ids.get(i).copied()
    }

    /// The group's disk `label`: its state, and whether it is leaving the
    /// group (a drop asked for, by force or not); `None` if it is no
    /// member. `Err(stop)` if the group could not say ([`World::failed`]).
    fn disk_state(&self, label: &str, seed: u64) -> Result<Option<(DiskState, bool)>, bool> {
        self.live
            .meta(|g| {
                g.disks()
                    .into_iter()
                    .find(|d| d.label == label)
                    .map(|d| (d.state, d.dropping || d.dropped_by_force))
            })
            .map_err(|e| self.failed(&e, &format!("the state of {label}"), seed, None))
    }

    /// Before an operation that may move copies: note each extent with a
    /// copy on a faulted disk, once silent damage is possible.
    fn note_tainted(&self) {
        if !self.silent_damage.load(Ordering::SeqCst) {
            return;
        }
        let numbers: Vec<u32> = self
            .model
            .lock()
            .unwrap()
            .files
            .values()
            .map(|f| f.number)
            .collect();
        let found = tainted_extents(self.live.plane(), &numbers, &self.victims);
        self.tainted.lock().unwrap().extend(found);
    }
}

/// The extents of files `numbers` with a copy on one of `victims`.
fn tainted_extents(
    plane: &cairn_store::group::plane::DataPlane,
    numbers: &[u32],
    victims: &BTreeSet<DeviceId>,
) -> Vec<(u32, u32, u64)> {
    let devices = plane.disks().member_devices();
    let mut out = Vec::new();
    for n in numbers {
        let Some(snap) = plane.file(*n) else { continue };
        for (i, e) in snap.extents().enumerate() {
            let on_victim = e
                .copies()
                .iter()
                .any(|c| devices.get(&c.disk).is_some_and(|d| victims.contains(d)));
            if e.initialized && on_victim {
                out.push((snap.number, snap.incarnation, i as u64));
            }
        }
    }
    out
}

/// Whether `text` names disk `label` (`D1` is not `D12`).
fn names_disk(text: &str, label: &str) -> bool {
    text.match_indices(label).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + label.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

// ---------------------------------------------------------------------------
// Actors

fn writer(world: &World, seed: u64, me: usize) {
    let mut rng = Rand::new(seed ^ ((me as u64 + 1) * 0x5851_F42D));
    let mut handle = match world.live.handle(64) {
        Ok(h) => h,
        Err(e) => {
            world.failed(&e, "handle", seed, None);
            return;
        }
    };
    let mut mine: Vec<String> = Vec::new();
    let mut made = 0;
    for _ in 0..OPS_PER_ACTOR {
        if world.stopped() {
            return;
        }
        world.count_op();
        let pick = rng.below(100);
        if mine.is_empty() || (pick < 8 && mine.len() < 3) {
            // Create: small, medium, or big enough for indirect extents.
            let size = match rng.below(3) {
                0 => (1 + rng.below(64)) * 64 * KIB,
                1 => (4 + rng.below(28)) * MIB,
                _ => (110 + rng.below(30)) * MIB,
            };
            let fine = rng.chance(25);
            let name = format!("w{me}_{made}");
            made += 1;
            let options = CreateOptions {
                template: fine.then(|| "ONLINELOG".into()),
                ..CreateOptions::default()
            };
            world
                .model
                .lock()
                .unwrap()
                .names_uncertain
                .insert(name.clone());
            match world
                .live
                .meta(|g| g.create_file(&path(&name), size, &options))
                .and_then(|r| r)
            {
                Ok(info) => {
                    if info.redundancy_lowered {
                        world.lowered.fetch_add(1, Ordering::SeqCst);
                    }
                    let mut m = world.model.lock().unwrap();
                    m.names_uncertain.remove(&name);
                    m.files
                        .insert(name.clone(), ModelFile::new(info.number, size));
                    mine.push(name);
                }
                // A full group refuses, leaving nothing.
                Err(GroupError::NoSpace(_)) => {
                    world.model.lock().unwrap().names_uncertain.remove(&name);
                }
                Err(e) => {
                    if world.failed(&e, &format!("create {name}"), seed, None) {
                        return;
                    }
                }
            }
            continue;
        }
        let name = mine[rng.below(mine.len() as u64) as usize].clone();
        let (number, size) = {
            let m = world.model.lock().unwrap();
            let f = &m.files[&name];
            (f.number, f.size)
        };
        let sector = world.sector;
        match pick {
            // Punch a random sector-aligned range (a volume's discard): it
            // reads as zeros, as a write of zeros would.
            8..=12 if size >= sector => {
                let sectors = size / sector;
                let start = rng.below(sectors);
                let len = (1 + rng.below((3 * MIB / sector).min(sectors - start))) * sector;
                let offset = start * sector;
                let discard = rng.chance(75);
                if trace() {
                    eprintln!("  w{me}: punch {name} at {offset} len {len} discard {discard}");
                }
                let punched = handle.punch(number, offset, len, discard);
                let mut m = world.model.lock().unwrap();
                let f = m.files.get_mut(&name).unwrap();
                f.pending.push((offset, vec![0u8; len as usize]));
                if let Err(e) = punched {
                    f.inexact = true;
                    drop(m);
                    if world.failed(&e, &format!("punch {name}"), seed, None) {
                        return;
                    }
                }
            }
            // Write a random sector-aligned range.
            13..=57 if size >= sector => {
                let sectors = size / sector;
                let start = rng.below(sectors);
                let len = (1 + rng.below((256 * KIB / sector).min(sectors - start))) * sector;
                let data = rng.bytes(len as usize);
                let offset = start * sector;
                if trace() {
                    eprintln!("  w{me}: write {name} at {offset} len {len}");
                }
                // Only this actor reads its files, so the model learns of the
                // write once it returns, acknowledged or not: either way it
                // may have landed.
                let wrote = handle.write(number, offset, &data);
                let mut m = world.model.lock().unwrap();
                let f = m.files.get_mut(&name).unwrap();
                f.pending.push((offset, data));
                if let Err(e) = wrote {
                    f.inexact = true;
                    drop(m);
                    if world.failed(&e, &format!("write {name}"), seed, None) {
                        return;
                    }
                }
            }
            // Read back and compare with what was acknowledged.
            58..=77 if size >= sector => {
                let sectors = size / sector;
                let start = rng.below(sectors);
                let len = (1 + rng.below((256 * KIB / sector).min(sectors - start))) * sector;
                let offset = start * sector;
                let mut buf = vec![0u8; len as usize];
                // Once a copy may be silently damaged (data blocks carry no
                // checksum), read as a database with block checksums reads:
                // its check passes over a rotted or misdirected copy.
                let checked = world.silent_damage.load(Ordering::SeqCst);
                let read = if checked {
                    let check = |b: &[u8]| {
                        let m = world.model.lock().unwrap();
                        let f = &m.files[&name];
                        if f.inexact {
                            f.allowed(offset, b, sector).is_ok()
                        } else {
                            b == f.latest(offset, len)
                        }
                    };
                    handle.read_checked(number, offset, &mut buf, &check)
                } else {
                    handle.read(number, offset, &mut buf)
                };
                if let Err(e) = read {
                    if world.failed(&e, &format!("read {name}"), seed, None) {
                        return;
                    }
                    continue;
                }
                let m = world.model.lock().unwrap();
                let f = &m.files[&name];
                if f.inexact {
                    if let Err(why) = f.allowed(offset, &buf, sector) {
                        panic!("seed {seed}: w{me} read of {name}: {why}");
                    }
                } else {
                    let want = f.latest(offset, len);
                    assert!(
                        buf == want,
                        "seed {seed}: w{me} read {name} at {offset} len {len}: not what was written"
                    );
                }
                drop(m);
                world.check(if checked {
                    "writers: read back with their own check (silent damage possible)"
                } else {
                    "writers: read back exactly what was written"
                });
            }
            // Sync: every acknowledged write of this actor is durable.
            78..=87 => {
                if let Err(e) = handle.sync() {
                    if world.failed(&e, "sync", seed, None) {
                        return;
                    }
                    continue;
                }
                let mut m = world.model.lock().unwrap();
                for n in &mine {
                    let f = m.files.get_mut(n).unwrap();
                    if !f.inexact {
                        f.sync();
                    }
                }
            }
            // Resize.
            88..=95 => {
                let new = match rng.below(3) {
                    0 => size / 2 / sector * sector,
                    1 => size + (1 + rng.below(8)) * MIB,
                    _ => (1 + rng.below(140)) * MIB,
                };
                world
                    .model
                    .lock()
                    .unwrap()
                    .files
                    .get_mut(&name)
                    .unwrap()
                    .uncertain = true;
                if trace() {
                    eprintln!("  w{me}: resize {name} {size} -> {new}");
                }
                match world
                    .live
                    .meta(|g| g.resize(&path(&name), new))
                    .and_then(|r| r)
                {
                    Ok(_) => {
                        let mut m = world.model.lock().unwrap();
                        let f = m.files.get_mut(&name).unwrap();
                        f.resize(new);
                        f.uncertain = false;
                    }
                    // A grow the group has no room for is undone.
                    Err(GroupError::NoSpace(_)) => {
                        let mut m = world.model.lock().unwrap();
                        m.files.get_mut(&name).unwrap().uncertain = false;
                    }
                    Err(e) => {
                        // Its size is uncertain now: leave the file alone.
                        mine.retain(|n| *n != name);
                        if world.failed(&e, &format!("resize {name}"), seed, None) {
                            return;
                        }
                    }
                }
            }
            // Delete.
            _ => {
                world
                    .model
                    .lock()
                    .unwrap()
                    .names_uncertain
                    .insert(name.clone());
                match world.live.meta(|g| g.remove(&path(&name))).and_then(|r| r) {
                    Ok(()) => {
                        let mut m = world.model.lock().unwrap();
                        m.files.remove(&name);
                        m.names_uncertain.remove(&name);
                        m.aliases.retain(|_, target| *target != name);
                        mine.retain(|n| *n != name);
                    }
                    Err(e) => {
                        mine.retain(|n| *n != name);
                        if world.failed(&e, &format!("remove {name}"), seed, None) {
                            return;
                        }
                    }
                }
            }
        }
    }
}

fn metadata_actor(world: &World, seed: u64) {
    let mut rng = Rand::new(seed ^ 0xD1CE);
    let mut made = 0;
    for _ in 0..OPS_PER_ACTOR {
        if world.stopped() {
            return;
        }
        world.count_op();
        match rng.below(3) {
            0 => {
                let name = format!("d{}", rng.below(6));
                let exists = world.model.lock().unwrap().dirs.contains(&name);
                world
                    .model
                    .lock()
                    .unwrap()
                    .dirs_uncertain
                    .insert(name.clone());
                match world
                    .live
                    .meta(|g| g.mkdir(&path(&name), false))
                    .and_then(|r| r)
                {
                    Ok(()) => {
                        let mut m = world.model.lock().unwrap();
                        m.dirs.insert(name.clone());
                        m.dirs_uncertain.remove(&name);
                    }
                    Err(GroupError::Exists(_)) if exists => {
                        world.model.lock().unwrap().dirs_uncertain.remove(&name);
                    }
                    Err(e) => {
                        if world.failed(&e, &format!("mkdir {name}"), seed, None) {
                            return;
                        }
                    }
                }
            }
            1 => {
                // An alias of some acknowledged file.
                let target = {
                    let m = world.model.lock().unwrap();
                    let names: Vec<&String> = m
                        .files
                        .keys()
                        .filter(|n| !m.names_uncertain.contains(*n))
                        .collect();
                    if names.is_empty() {
                        continue;
                    }
                    names[rng.below(names.len() as u64) as usize].clone()
                };
                let alias = format!("a{made}");
                made += 1;
                world
                    .model
                    .lock()
                    .unwrap()
                    .aliases_uncertain
                    .insert(alias.clone());
                match world
                    .live
                    .meta(|g| g.mkalias(&path(&target), &path(&alias)))
                    .and_then(|r| r)
                {
                    Ok(()) => {
                        let mut m = world.model.lock().unwrap();
                        m.aliases_uncertain.remove(&alias);
                        m.aliases.insert(alias, target);
                    }
                    // Its target was removed meanwhile by its writer.
                    Err(GroupError::NotFound(_)) => {
                        world.model.lock().unwrap().aliases_uncertain.remove(&alias);
                    }
                    Err(e) => {
                        if world.failed(&e, &format!("mkalias {alias}"), seed, None) {
                            return;
                        }
                    }
                }
            }
            _ => {
                // A short-lived file: made and removed.
                let name = format!("m{}", rng.below(1000));
                world
                    .model
                    .lock()
                    .unwrap()
                    .names_uncertain
                    .insert(name.clone());
                let size = (1 + rng.below(8)) * MIB;
                let made_ok = world
                    .live
                    .meta(|g| {
                        g.create_file(&path(&name), size, &CreateOptions::default())?;
                        g.remove(&path(&name))
                    })
                    .and_then(|r| r);
                match made_ok {
                    Ok(()) | Err(GroupError::NoSpace(_)) => {
                        world.model.lock().unwrap().names_uncertain.remove(&name);
                    }
                    Err(GroupError::Exists(_)) => {}
                    Err(e) => {
                        if world.failed(&e, &format!("scratch {name}"), seed, None) {
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// The one failure group faults and maintenance hit in a seed: the group
/// must survive (one failure group down at a time), so every acknowledged
/// write must be there after recovery.
fn victim_fg(cfg: &Config, seed: u64) -> usize {
    let fgs = cfg.disks.iter().map(|d| d.1).max().unwrap_or(0) as u64 + 1;
    Rand::new(seed ^ 0xFA17).below(fgs) as usize
}

/// Injects the seed's faults (its [`FaultPlan`]) on the disks of one
/// failure group of a mirrored group: a copy of everything survives on the
/// others.
fn fault_actor(world: &World, seed: u64) {
    let mut rng = Rand::new(seed ^ 0xFA17_0001);
    let plan = world.plan;
    if !plan.any() {
        return;
    }
    let victims: Vec<DeviceId> = world.victims.iter().copied().collect();
    // The kinds this seed injects, with their weights; clearing the
    // transient faults is always one.
    let kinds: Vec<(u64, u64)> = [
        (plan.lose, 5, 0),
        (plan.write_errors, 25, 1),
        (plan.read_errors, 25, 2),
        (plan.misdirect, 15, 3),
        (plan.rot, 15, 4),
        (true, 15, 5),
    ]
    .into_iter()
    .filter(|(on, _, _)| *on)
    .map(|(_, w, k)| (w, k))
    .collect();
    let weights: u64 = kinds.iter().map(|(w, _)| w).sum();
    // In seeds whose plan says so, at one of its turns, a disk stops
    // answering (its own stream, so the other faults stay as they were).
    let mut hang = Rand::new(seed ^ 0x4A96);
    let hang_at = plan
        .hang
        .then(|| hang.below((OPS_PER_ACTOR / 4) as u64) as usize);
    for turn in 0..OPS_PER_ACTOR / 4 {
        if world.stopped() {
            return;
        }
        // Let the others run a while.
        for _ in 0..rng.below(20) {
            cairn_io::sched::yield_now();
        }
        if hang_at == Some(turn) {
            let disk = victims[hang.below(victims.len() as u64) as usize];
            world.faulted.store(true, Ordering::SeqCst);
            *world.hung.lock().unwrap() = Some(disk);
            world.shared.with(|sim| sim.hang_disk(disk, true));
            if trace() {
                eprintln!("  faults: disk {} hangs", disk.0);
            }
        }
        let disk = victims[rng.below(victims.len() as u64) as usize];
        let mut draw = rng.below(weights);
        let kind = kinds
            .iter()
            .find(|(w, _)| {
                let hit = draw < *w;
                draw = draw.saturating_sub(*w);
                hit
            })
            .map_or(5, |(_, k)| *k);
        if kind != 5 {
            world.faulted.store(true, Ordering::SeqCst);
        }
        if kind == 3 || kind == 4 {
            // Before the damage: a rebalance that starts after it moves it.
            world.silent_damage.store(true, Ordering::SeqCst);
        }
        if kind == 0 {
            world.lost.lock().unwrap().insert(disk);
        }
        world.shared.with(|sim| {
            let f = &mut sim.disk_mut(disk).faults;
            match kind {
                0 => sim.lose_disk(disk),
                1 => f.write_error_per_million = 30_000,
                2 => f.read_error_per_million = 30_000,
                3 => f.misdirect_per_million = 20_000,
                4 => {
                    // Bit rot somewhere in the data area.
                    let size = sim.geometry(disk).map_or(0, |g| g.size_bytes);
                    let at = 4 * MIB + rng.below((size.saturating_sub(8 * MIB)) / 4096) * 4096;
                    sim.rot(disk, at, (rng.below(8)) as u8);
                }
                _ => {
                    f.write_error_per_million = 0;
                    f.read_error_per_million = 0;
                    f.misdirect_per_million = 0;
                }
            }
        });
        if trace() {
            eprintln!("  faults: kind {kind} on disk {}", disk.0);
        }
    }
    // Transient faults end; a lost disk stays lost.
    world.shared.with(|sim| {
        for d in &victims {
            let f = &mut sim.disk_mut(*d).faults;
            f.write_error_per_million = 0;
            f.read_error_per_million = 0;
            f.misdirect_per_million = 0;
        }
    });
}

/// The disk life cycle while the others run: a disk taken offline on
/// request (writes then mark its copies stale), then brought back online —
/// made SYNCING and resynced at some power while writers write the very
/// extents being copied. Refusals (redundancy would not allow it, the disk
/// is already offline) are part of the game. It works on the failure group
/// the fault actor hits: two failure groups down at once would lose
/// acknowledged writes in a normal-redundancy group, by design.
fn lifecycle_actor(world: &World, seed: u64) {
    // The fault actor's failure group.
    let fg = victim_fg(&world.cfg, seed);
    let mut rng = Rand::new(seed ^ 0x11FE);
    let ours: Vec<usize> = (0..world.cfg.disks.len())
        .filter(|i| world.cfg.disks[*i].1 == fg)
        .collect();
    let mut spares = 0..world.cfg.spares.len();
    let mirrored = world.cfg.redundancy != Redundancy::External;
    // In some seeds, a disk taken OFFLINE finds another image in its place
    // when `online` is asked (its own stream, so the rest of the seed stays
    // as it was); images of our disks saved before their offlines.
    let mut wrong = Rand::new(seed ^ 0x1A6E);
    let wrong_images = mirrored && wrong.chance(60);
    let mut saved: BTreeMap<String, DiskImage> = BTreeMap::new();
    // Half the seeds keep quiet as they free: what they free stays
    // returnable, for the reclaims below.
    if rng.chance(50) {
        world.count_op();
        let quiet = [("thin_provisioned".to_string(), "false".to_string())];
        if let Err(e) = world
            .live
            .meta(|g| g.set_attributes(&quiet))
            .and_then(|r| r)
        {
            if world.failed(&e, "set thin_provisioned", seed, None) {
                return;
            }
        }
    }
    for _ in 0..OPS_PER_ACTOR / 8 {
        if world.stopped() {
            return;
        }
        for _ in 0..rng.below(30) {
            cairn_io::sched::yield_now();
        }
        if rng.chance(10) {
            if reclaim_now(world, &mut rng, seed) {
                return;
            }
            continue;
        }
        if mirrored && rng.chance(15) {
            if scrub_now(world, &mut rng, seed) {
                return;
            }
            continue;
        }
        if !mirrored || rng.chance(40) {
            if change_disks(world, &mut rng, &mut spares, seed) {
                return;
            }
            continue;
        }
        let disk = format!("D{}", ours[rng.below(ours.len() as u64) as usize]);
        // An image saved while the disk is in service: the offline below
        // stamps the disk, so it is older than what the group takes back.
        if wrong_images && (wrong.chance(50) || !saved.contains_key(&disk)) {
            match world.disk_state(&disk, seed) {
                Ok(Some((DiskState::Online, false))) => {
                    if let Some(device) = world.device_of(&disk) {
                        saved.insert(disk.clone(), world.shared.with(|sim| sim.image(device)));
                    }
                }
                Ok(_) => {}
                Err(stop) => {
                    if stop {
                        return;
                    }
                }
            }
        }
        world.count_op();
        if offline_now(world, &disk, seed) {
            return;
        }
        for _ in 0..rng.below(60) {
            cairn_io::sched::yield_now();
        }
        // Sometimes it is not coming back: a spare takes its place in its
        // failure group (`group replace`), its copies rebuilt from mirrors.
        if rng.chance(20) {
            if let Some(k) = spares.next() {
                if replace_disk(world, &mut rng, &disk, k, fg, seed) {
                    return;
                }
                continue;
            }
        }
        world.count_op();
        let power = 1 + rng.below(16) as usize;
        if wrong_images && wrong.chance(60) {
            let image = match wrong.below(3) {
                0 => saved.get(&disk).map(|i| (WrongImage::Older, i.clone())),
                1 => Some((WrongImage::Blank, DiskImage::blank())),
                _ => Some((WrongImage::OtherGroup, other_group_disk().clone())),
            };
            if let Some((kind, image)) = image {
                if wrong_image_online(world, &disk, kind, &image, power, seed) {
                    return;
                }
                world.count_op();
            }
        }
        if online_now(world, &disk, power, seed) {
            return;
        }
    }
}

/// What the life-cycle actor may put in an OFFLINE disk's place before it
/// asks `online` (issue 34 part 2): what an operator restoring a snapshot,
/// emptying a file or swapping a LUN leaves there.
#[derive(Debug, Clone, Copy)]
enum WrongImage {
    /// The disk as it was before an earlier `offline` (taken just before
    /// the request, so before the offline stamped it).
    Older,
    /// A device that holds nothing.
    Blank,
    /// A disk of another group.
    OtherGroup,
}

impl WrongImage {
    /// What the refusal must say it found, and the check it counts.
    fn refusal(self) -> (&'static str, &'static str) {
        match self {
            Self::Older => (
                "not the image the group took offline",
                "online refused: an older image of the disk in its place",
            ),
            Self::Blank => (
                "no copy of a Cairn label",
                "online refused: a blank device in the disk's place",
            ),
            Self::OtherGroup => (
                "a disk of another group",
                "online refused: another group's disk in the disk's place",
            ),
        }
    }
}

/// A disk of another group (one disk, external redundancy), made once.
fn other_group_disk() -> &'static DiskImage {
    static DISK: OnceLock<DiskImage> = OnceLock::new();
    DISK.get_or_init(|| {
        let mut sim = SimEngine::new(0x07E4, 64);
        let ids = common::labelled_disks(
            &mut sim,
            [geometry(384 * MIB, 4096, 4096, 512 << 10)],
            |_| 0x07E4 << 64,
        );
        group::create(
            &mut sim,
            &[NewDisk {
                device: ids[0],
                failgroup: None,
            }],
            &GroupSpec {
                name: "OTHER".into(),
                redundancy: Redundancy::External,
                au_bytes: MIB,
                sector_bytes: None,
                force: false,
                now_unix_seconds: 1_763_700_000,
                group_uuid: Uuid::from_u128(0x07E4),
            },
        )
        .unwrap()
        .dismount()
        .unwrap();
        sim.image(ids[0])
    })
}

/// `group online` of `disk`, OFFLINE, with `image` put in its place: it
/// must be refused, naming what it found, and the disk stay OFFLINE — an
/// image taken back would be resynced as if it held what the group left
/// there, and serve what it holds. Then the disk the group took offline is
/// put back. Only on a disk no fault touches: an offline whose stamp could
/// not be written leaves the disk to be resynced whole (which no image can
/// fool), and a failing read says nothing of what the disk holds. If the
/// process dies meanwhile the image stays: the recovery mount must refuse
/// it too (and the checks after recovery still hold). Returns whether the
/// actor must stop.
fn wrong_image_online(
    world: &World,
    disk: &str,
    kind: WrongImage,
    image: &DiskImage,
    power: usize,
    seed: u64,
) -> bool {
    let Some(device) = world.device_of(disk) else {
        return false;
    };
    let failing = || world.victims.contains(&device) && world.fault_touches(device);
    match world.disk_state(disk, seed) {
        Ok(Some((DiskState::Offline, false))) if !failing() => {}
        Ok(_) => return false,
        Err(stop) => return stop,
    }
    let current = world.shared.with(|sim| {
        let current = sim.image(device);
        sim.put_image(device, image);
        current
    });
    if trace() {
        eprintln!("  {disk}: {kind:?} image put in its place");
    }
    let result = world
        .live
        .online_disks(Some(&[disk.to_string()]), power, &mut |_| {});
    if trace() {
        eprintln!("  online {disk} with {kind:?} in its place: {result:?}");
    }
    if let Ok(r) = &result {
        panic!("seed {seed}: online {disk} took back {kind:?} in the disk's place: {r:?}");
    }
    if world.stopped() {
        world.check(
            "wrong image: in the disk's place when the process died (the recovery mount must refuse it)",
        );
        return true;
    }
    let e = result.expect_err("invariant: Ok panicked above");
    if failing() {
        // A fault came to the disk meanwhile: any refusal will do.
        if world.failed(&e, &format!("online {disk}"), seed, Some(ONLINE_FAILING)) {
            return true;
        }
    } else {
        let (found, check) = kind.refusal();
        assert!(
            matches!(e, GroupError::Invalid(_)) && e.to_string().contains(found),
            "seed {seed}: online {disk} with {kind:?} in its place was refused without saying it found {found:?}: {e}"
        );
        let now = match world.disk_state(disk, seed) {
            Ok(state) => state,
            Err(stop) => return stop,
        };
        assert_eq!(
            now,
            Some((DiskState::Offline, false)),
            "seed {seed}: online {disk} refused {kind:?}, and the disk is not OFFLINE"
        );
        world.check(check);
    }
    world.shared.with(|sim| sim.put_image(device, &current));
    false
}

/// `group offline` of `disk`, a member of the faulted failure group: only
/// that failure group is ever down, so the group can always spare it, and
/// a refusal is accepted only where the disk is OFFLINE already (taken
/// offline before, or failed by the fault actor) or leaving the group (a
/// drop asked for or done). Returns whether the actor must stop.
fn offline_now(world: &World, disk: &str, seed: u64) -> bool {
    let result = world.live.offline_disks(&[disk.to_string()], None);
    if trace() {
        eprintln!("  offline {disk}: {result:?}");
    }
    match result {
        Ok(_) => {
            if !world.stopped() {
                let state = match world.disk_state(disk, seed) {
                    Ok(state) => state,
                    Err(stop) => return stop,
                };
                assert!(
                    state.is_some_and(|(s, _)| s == DiskState::Offline),
                    "seed {seed}: offline {disk} acknowledged, and the disk is {state:?}"
                );
                world.check("offline: the disk went OFFLINE");
            }
            world.offlined.fetch_add(1, Ordering::SeqCst);
            false
        }
        Err(e @ (GroupError::Invalid(_) | GroupError::NotFound(_))) if !world.stopped() => {
            match world.disk_state(disk, seed) {
                Err(stop) => stop,
                Ok(None | Some((DiskState::Offline, _) | (_, true))) => {
                    world
                        .check("offline refused: the disk was OFFLINE already or leaves the group");
                    false
                }
                Ok(Some(state)) => {
                    panic!("seed {seed}: offline {disk} refused while it is {state:?}: {e}")
                }
            }
        }
        Err(e) => world.failed(&e, &format!("offline {disk}"), seed, None),
    }
}

/// `group online` of `disk` at `power`: an OFFLINE disk that the fault
/// actor neither lost nor fails reads or writes on must come back ONLINE, every
/// stale AU copied from a copy in service (there always is one: only one
/// failure group is ever down). A refusal is accepted only for a disk
/// leaving the group (a drop asked for or done), or one the fault actor
/// fails. Returns whether
/// the actor must stop.
fn online_now(world: &World, disk: &str, power: usize, seed: u64) -> bool {
    let before = match world.disk_state(disk, seed) {
        Ok(state) => state,
        Err(stop) => return stop,
    };
    let device = world.device_of(disk);
    // Bringing a disk back reads its metadata and writes what it missed: a
    // read or write error there leaves it out.
    // (The fault actor may lose it while the online runs.)
    let failing = || device.is_some_and(|d| world.victims.contains(&d) && world.fault_touches(d));
    let result = world
        .live
        .online_disks(Some(&[disk.to_string()]), power, &mut |_| {});
    let failing = failing();
    if trace() {
        eprintln!("  online {disk} (was {before:?}) at power {power}: {result:?}");
    }
    match result {
        Ok(r) => {
            world
                .resynced
                .fetch_add(r.disks_online.len() as u64, Ordering::SeqCst);
            if !world.stopped() && before == Some((DiskState::Offline, false)) && !failing {
                // ONLINE, or still SYNCING where a grow zeroed part of a
                // file it was copying (those AUs wait for the next resync).
                let now = match world.disk_state(disk, seed) {
                    Ok(state) => state,
                    Err(stop) => return stop,
                };
                let back = r.disks_online.iter().any(|d| d == disk);
                assert!(
                    (back || now.is_some_and(|(s, _)| s == DiskState::Syncing))
                        && r.aus_without_source.is_empty(),
                    "seed {seed}: online {disk} at power {power}, an OFFLINE disk no fault touches, left it {now:?} or without a source: {r:?}"
                );
                world.check(if back {
                    "online: an OFFLINE disk came back ONLINE with nothing left without a source"
                } else {
                    "online: an OFFLINE disk left SYNCING (a grow zeroed what it copied)"
                });
            }
            false
        }
        Err(e @ (GroupError::Invalid(_) | GroupError::NotFound(_)))
            if !world.stopped() && !failing =>
        {
            match world.disk_state(disk, seed) {
                Err(stop) => stop,
                Ok(None | Some((_, true))) => false,
                Ok(now) => panic!(
                    "seed {seed}: online {disk} refused while it is {now:?} (it was {before:?}): {e}"
                ),
            }
        }
        Err(e) => world.failed(
            &e,
            &format!("online {disk}"),
            seed,
            failing.then_some(ONLINE_FAILING),
        ),
    }
}

/// A scrub (sometimes repairing) while the writers write the very extents
/// it reads: with no fault injected, it finds no disagreement — a write
/// between the reads of two copies would look like one, and a repair would
/// undo the write (the writers' own checks would then fail). Returns
/// whether the actor must stop.
fn scrub_now(world: &World, rng: &mut Rand, seed: u64) -> bool {
    use cairn_store::group::check::Problem;
    world.count_op();
    let power = 1 + rng.below(8) as usize;
    // A repair where a copy may be silently damaged too: data blocks carry
    // no checksums, so two differing copies are only reported (no guess)
    // and three are judged by their majority — a repair that took the
    // damaged copy would spread it to a disk no fault touched, which the
    // raw comparison after recovery finds.
    let repair = rng.chance(50);
    let read_errors = || {
        world.shared.with(|sim| {
            sim.events()
                .iter()
                .filter(|e| matches!(e, cairn_io_sim::FaultEvent::ReadError { .. }))
                .count()
        })
    };
    // A lost disk still in service: the scrub's reads of it fail.
    let lost_in_service = || {
        let view = world.live.plane().disks();
        view.member_devices()
            .iter()
            .any(|(d, device)| view.is_online(*d) && world.lost(*device))
    };
    let losses = || world.lost.lock().unwrap().len();
    let silent_before = world.silent_damage.load(Ordering::SeqCst);
    let reads_before = read_errors();
    let lost_before = lost_in_service();
    let losses_before = losses();
    // A request to a hung disk that timed out fails its read as an error
    // would.
    let timed_out = || world.shared.with(|sim| sim.timed_out());
    let timed_out_before = timed_out();
    let how = cairn_store::group::scrub::ScrubRepair::new(repair, None);
    let result = world.live.scrub(power, how, &mut |_| {});
    if trace() {
        eprintln!("  scrub at power {power} (repair {repair}): {result:?}");
    }
    // What the fault model lets this scrub find: nothing, unless a copy
    // may be damaged, or a read of one failed, during it.
    let failing = silent_before
        || world.silent_damage.load(Ordering::SeqCst)
        || read_errors() != reads_before
        || lost_before
        || losses() != losses_before
        || timed_out() != timed_out_before;
    if trace() {
        eprintln!(
            "  scrub: silent {silent_before}, read errors {reads_before} -> {}, a lost disk in service {lost_before}, disks lost {losses_before} -> {}, timed out {timed_out_before} -> {}",
            read_errors(),
            losses(),
            timed_out()
        );
    }
    let victim_labels: Vec<String> = world
        .ids
        .iter()
        .enumerate()
        .filter(|(_, id)| world.victims.contains(id))
        .map(|(i, _)| format!("D{i}"))
        .collect();
    let explained = |p: &Problem| {
        victim_labels
            .iter()
            .any(|l| names_disk(&p.location, l) || names_disk(&p.what, l))
    };
    match result {
        Ok(r) => {
            world.scrubbed.fetch_add(1, Ordering::SeqCst);
            if world.stopped() {
                return false;
            }
            if !failing {
                assert!(
                    r.problems.is_empty() && r.bytes_rewritten == 0,
                    "seed {seed}: a scrub beside the writers found disagreements no fault explains: {:?}",
                    r.problems
                );
                world.check("scrub: clean beside the writers (no fault could explain a finding)");
            } else if !r.problems.is_empty() {
                let unexplained: Vec<&Problem> =
                    r.problems.iter().filter(|p| !explained(p)).collect();
                assert!(
                    unexplained.is_empty(),
                    "seed {seed}: a scrub found problems on disks no fault touched: {unexplained:?}"
                );
                world.check("scrub: each finding names a faulted disk");
            }
            false
        }
        Err(e) => world.failed(&e, "scrub", seed, failing.then_some(SCRUB_FAILING)),
    }
}

/// A reclaim (discard, or zero-fill) of the free space while the writers
/// allocate, write and free: it may only ever touch AUs nobody holds (a
/// discard or zeros over an AU in use shows as lost data in the writers'
/// checks and in the verification). Unpaced: the simulation has no clock to
/// pace by. Returns whether the actor must stop.
fn reclaim_now(world: &World, rng: &mut Rand, seed: u64) -> bool {
    use cairn_store::group::reclaim::{ReclaimMethod, ReclaimOptions};
    world.count_op();
    // A compact moves copies, as a rebalance does.
    world.note_tainted();
    let options = ReclaimOptions {
        method: if rng.chance(20) {
            ReclaimMethod::ZeroFill
        } else {
            ReclaimMethod::Discard
        },
        force: true,
        rate_bytes: None,
        power: 1 + rng.below(4) as usize,
        explain: false,
        compact: rng.chance(25),
    };
    match world.live.reclaim(options, &mut |_| {}) {
        Ok(r) => {
            if trace() {
                eprintln!(
                    "  reclaim {:?} at power {}: {} of {} bytes",
                    options.method, options.power, r.returned_bytes, r.returnable_bytes
                );
            }
            world
                .reclaimed
                .fetch_add(r.returned_bytes, Ordering::SeqCst);
            false
        }
        // A compact runs as a rebalance, and is refused as one may be (a
        // disk out of service, a rebalance pending); a plain reclaim never.
        Err(GroupError::Invalid(_)) if options.compact => false,
        Err(e) => world.failed(&e, "reclaim", seed, None),
    }
}

/// A refusal a disk change may meet by design (redundancy would not allow
/// it, no room, a disk out of service or gone): part of the game.
fn refused(e: &GroupError) -> bool {
    matches!(
        e,
        GroupError::Invalid(_) | GroupError::NotFound(_) | GroupError::NoSpace(_)
    )
}

/// `group replace`: spare `k` joins failure group `fg` in place of `disk`
/// (OFFLINE, or the replace is refused), which is dropped by force; the
/// rebalance rebuilds its copies from their mirrors. Returns whether the
/// actor must stop.
fn replace_disk(world: &World, rng: &mut Rand, disk: &str, k: usize, fg: usize, seed: u64) -> bool {
    world.count_op();
    let id = world.ids[world.cfg.disks.len() + k];
    let replaced = world
        .live
        .meta(|g| {
            if g.disks()
                .iter()
                .all(|d| d.label != disk || d.state != cairn_format::group::DiskState::Offline)
            {
                return Err(GroupError::Invalid(format!("{disk} is not OFFLINE")));
            }
            let p = g.prepare_adds(
                &[NewDisk {
                    device: id,
                    failgroup: Some(format!("FG{fg}")),
                }],
                false,
            )?;
            g.add_disks(p)?;
            world.added.fetch_add(1, Ordering::SeqCst);
            g.drop_disks_forced(&[disk.to_string()])
        })
        .and_then(|r| r);
    if trace() {
        eprintln!("  replace {disk} with spare {k}: {replaced:?}");
    }
    match replaced {
        Ok(_) => {
            world.replaced.fetch_add(1, Ordering::SeqCst);
        }
        Err(e) if refused(&e) => {}
        Err(e) => {
            if world.failed(&e, &format!("replace {disk}"), seed, None) {
                return true;
            }
        }
    }
    rebalance_now(world, rng, seed)
}

/// A rebalance at some power; refusals (a disk OFFLINE, no room) are part
/// of the game. Returns whether the actor must stop.
fn rebalance_now(world: &World, rng: &mut Rand, seed: u64) -> bool {
    world.count_op();
    world.note_tainted();
    let power = [1, 2, 4, 16][rng.below(4) as usize];
    match world.live.rebalance(power, &mut |_| {}) {
        Ok(r) => {
            world.moved.fetch_add(r.moves_done, Ordering::SeqCst);
            world
                .dropped
                .fetch_add(r.disks_dropped.len() as u64, Ordering::SeqCst);
            world
                .resized
                .fetch_add(r.disks_resized.len() as u64, Ordering::SeqCst);
            world.compacted.fetch_add(r.compact_moves, Ordering::SeqCst);
            if trace() {
                eprintln!("  rebalance at power {power}: {r:?}");
            }
        }
        Err(e) if refused(&e) => {}
        Err(e) => {
            if world.failed(&e, "rebalance", seed, None) {
                return true;
            }
        }
    }
    false
}

/// A change of disks while the others run: maybe add a spare, maybe drop a
/// member, maybe resize one (a shrink to 30-100% of its size, or back to
/// all of it), then rebalance at some power (writers write the very
/// extents being moved). Refusals (a drop redundancy would not allow, or that does
/// not fit; a rebalance while a disk is OFFLINE) are part of the game.
/// Returns whether the actor must stop.
fn change_disks(
    world: &World,
    rng: &mut Rand,
    spares: &mut std::ops::Range<usize>,
    seed: u64,
) -> bool {
    world.count_op();
    if rng.chance(50) {
        if let Some(k) = spares.next() {
            let id = world.ids[world.cfg.disks.len() + k];
            let fg = world.cfg.spares[k].1;
            let added = world.live.meta(|g| {
                let p = g.prepare_adds(
                    &[NewDisk {
                        device: id,
                        failgroup: Some(format!("FG{fg}")),
                    }],
                    false,
                )?;
                g.add_disks(p)
            });
            match added.and_then(|r| r) {
                Ok(_) => {
                    world.added.fetch_add(1, Ordering::SeqCst);
                }
                Err(e) if refused(&e) => {}
                Err(e) => {
                    if world.failed(&e, "add a spare", seed, None) {
                        return true;
                    }
                }
            }
            if trace() {
                eprintln!("  add spare {k} (disk {}) to FG{fg}", id.0);
            }
        }
    }
    if rng.chance(50) {
        let all = world.cfg.disks.len() + world.cfg.spares.len();
        let disk = format!("D{}", rng.below(all as u64));
        match world
            .live
            .meta(|g| g.request_drops(std::slice::from_ref(&disk)))
            .and_then(|r| r)
        {
            Ok(_) => {}
            Err(e) if refused(&e) => {}
            Err(e) => {
                if world.failed(&e, &format!("drop {disk}"), seed, None) {
                    return true;
                }
            }
        }
        if trace() {
            eprintln!("  drop {disk}");
        }
    }
    if rng.chance(35) {
        world.count_op();
        let i = rng.below(world.cfg.disks.len() as u64) as usize;
        let full = world.cfg.disks[i].0;
        let size = if rng.chance(30) {
            full
        } else {
            (full * (30 + rng.below(71)) / 100) & !(MIB - 1)
        };
        let disk = format!("D{i}");
        let resized = world
            .live
            .meta(|g| {
                let grows = g
                    .disks()
                    .iter()
                    .any(|d| d.label == disk && size > d.size_bytes);
                g.request_resizes(&[(disk.clone(), size)]).map(|_| grows)
            })
            .and_then(|r| r);
        match resized {
            Ok(grew) => {
                world.resized.fetch_add(u64::from(grew), Ordering::SeqCst);
            }
            Err(e) if refused(&e) => {}
            Err(e) => {
                if world.failed(&e, &format!("resize {disk}"), seed, None) {
                    return true;
                }
            }
        }
        if trace() {
            eprintln!("  resize {disk} to {size}");
        }
    }
    if rng.chance(25) {
        // The compact pass on or off for the rebalances from now on.
        let value = if rng.chance(60) { "true" } else { "false" };
        world.count_op();
        let set = world
            .live
            .meta(|g| g.set_attributes(&[("rebalance_compact".into(), value.into())]))
            .and_then(|r| r);
        if let Err(e) = set {
            if world.failed(&e, "set rebalance_compact", seed, None) {
                return true;
            }
        }
    }
    for _ in 0..rng.below(30) {
        cairn_io::sched::yield_now();
    }
    rebalance_now(world, rng, seed)
}

// ---------------------------------------------------------------------------
// A seed

struct SeedFigures {
    /// Disks taken offline on request, and disks brought back ONLINE by a
    /// resync, before the crash.
    offlined: u64,
    resynced: u64,
    /// Scrubs run beside the writers.
    scrubbed: u64,
    /// Spares added, drops completed, extent copies moved.
    added: u64,
    dropped: u64,
    moved: u64,
    /// Disks resized, OFFLINE disks replaced.
    resized: u64,
    replaced: u64,
    compacted: u64,
    reclaimed: u64,
    /// Files created with lowered redundancy.
    lowered: u64,
    /// Every disk was ONLINE at the end: nothing may be left lowered.
    whole: bool,
    seed: u64,
    ops: u64,
    /// Metadata operations (first-write marks included) before the crash,
    /// and the journal records written when it was armed: group commit.
    meta_ops: u64,
    records: u64,
    switches: u64,
    faults: bool,
    plan: FaultPlan,
    accounts: Accounts,
    /// A disk hung; requests to it that timed out before the crash.
    hung: bool,
    timed_out: u64,
}

fn run_seed(seed: u64) -> SeedFigures {
    let mut rng = Rand::new(seed);
    let cfg = config(&mut rng);
    let mirrored = cfg.redundancy != Redundancy::External;
    let plan = FaultPlan::draw(&mut Rand::new(seed ^ 0xFA17_0002), mirrored);
    if trace() {
        eprintln!("seed {seed}: {cfg:?}; faults {plan:?}");
    }
    let (sim, ids) = build(seed, &cfg);
    let shared = SharedSim::new(sim);
    let sector = u64::from(cfg.logical);
    // The process dies once the actors have done a number of operations the
    // seed picks (at least 200), a few mutating requests later.
    let crash_at_ops = 200 + rng.below(40);
    let crash_delay = rng.below(50) as usize;
    let victims: BTreeSet<DeviceId> = if plan.any() {
        let fg = victim_fg(&cfg, seed);
        ids.iter()
            .zip(&cfg.disks)
            .filter(|(_, (_, g))| *g == fg)
            .map(|(id, _)| *id)
            .collect()
    } else {
        BTreeSet::new()
    };
    let world = World {
        live: live(&shared, &ids).unwrap(),
        shared: shared.clone(),
        ids: ids.clone(),
        cfg: cfg.clone(),
        model: Mutex::new(Model::default()),
        plan,
        victims: victims.clone(),
        faulted: AtomicBool::new(false),
        lost: Mutex::new(BTreeSet::new()),
        sector,
        ops: AtomicU64::new(0),
        crash_at_ops,
        crash_delay,
        armed: AtomicBool::new(false),
        records: AtomicU64::new(0),
        silent_damage: AtomicBool::new(false),
        tainted: Mutex::new(BTreeSet::new()),
        accounts: Mutex::new(Accounts::default()),
        hung: Mutex::new(None),
        offlined: AtomicU64::new(0),
        resynced: AtomicU64::new(0),
        scrubbed: AtomicU64::new(0),
        added: AtomicU64::new(0),
        dropped: AtomicU64::new(0),
        moved: AtomicU64::new(0),
        resized: AtomicU64::new(0),
        replaced: AtomicU64::new(0),
        compacted: AtomicU64::new(0),
        reclaimed: AtomicU64::new(0),
        lowered: AtomicU64::new(0),
    };
    // Some seeds switch at nearly every point, others let an actor run on.
    let stay = [0, 50, 75, 90][rng.below(4) as usize];
    let turnstile = Turnstile::new(seed).stay(stay);
    let actors: Vec<Actor<'_>> = vec![
        Box::new(|| writer(&world, seed, 0)),
        Box::new(|| writer(&world, seed, 1)),
        Box::new(|| metadata_actor(&world, seed)),
        Box::new(|| fault_actor(&world, seed)),
        Box::new(|| lifecycle_actor(&world, seed)),
    ];
    let panics = turnstile.run(actors);
    let timed_out = shared.with(|sim| sim.timed_out());
    for (i, p) in panics.iter().enumerate() {
        if let Some(p) = p {
            panic!("seed {seed}: actor {i} panicked: {p}");
        }
    }
    let World {
        live: group,
        model,
        faulted,
        ops,
        silent_damage,
        tainted,
        accounts,
        records,
        hung,
        offlined,
        resynced,
        scrubbed,
        added,
        dropped,
        moved,
        resized,
        replaced,
        compacted,
        reclaimed,
        lowered,
        ..
    } = world;
    let mut model = model.into_inner().unwrap();
    let mut accounts = accounts.into_inner().unwrap();
    let mut tainted = tainted.into_inner().unwrap();
    let silent = silent_damage.load(Ordering::SeqCst);
    let meta_ops = group.operations_begun();
    // Space an allocation found held only for a while (by an older reader,
    // or a discard in flight) and lent; the writers' checks cover what its
    // first writes left.
    let (lent, waited) = group.plane().lent_totals();
    if lent > 0 {
        accounts
            .checks
            .hit("space: lent to a data extent while an older reader or a discard held it");
    }
    if waited > 0 {
        accounts
            .checks
            .hit("space: a first write waited for lent space");
    }
    let records = records.load(Ordering::SeqCst);
    if trace() {
        let states: Vec<_> = group
            .meta(|g| {
                g.disks()
                    .iter()
                    .map(|d| (d.number, d.state, d.missing))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        eprintln!("disks before the crash: {states:?}");
    }
    // The process dies (if the budget did not run out, now): every write
    // not flushed is kept, lost or torn.
    drop(group);
    accounts.checks.hit(if shared.crashed() {
        "crash: the process died mid-run (the budget ran out)"
    } else {
        "crash: the process died after the actors finished"
    });
    if trace() {
        eprintln!("crash (the budget ran out: {})", shared.crashed());
    }
    let policy = match rng.below(4) {
        0 => CrashPolicy::KEEP_ALL,
        1 => CrashPolicy::LOSE_ALL,
        2 => CrashPolicy::TEAR_ALL,
        _ => CrashPolicy::MIXED,
    };
    shared.with(|sim| sim.crash(policy));
    shared.reset_handles();
    shared.crash_after(None);
    // Sometimes the recovery dies too.
    if rng.chance(30) {
        shared.crash_after(Some(rng.below(60) as usize));
        let outcome = live(&shared, &ids);
        drop(outcome);
        let died = shared.crashed();
        if died {
            shared.with(|sim| sim.crash(policy));
            accounts.checks.hit("crash: the recovery mount died too");
        }
        if trace() {
            eprintln!("recovery mount crashed: {died}");
        }
        shared.reset_handles();
        shared.crash_after(None);
    }
    // Transient faults are over; a lost disk stays lost; a hung one
    // answers again (the path came back while the process was down).
    shared.with(|sim| {
        for id in &ids {
            sim.hang_disk(*id, false);
            let f = &mut sim.disk_mut(*id).faults;
            f.write_error_per_million = 0;
            f.read_error_per_million = 0;
            f.misdirect_per_million = 0;
        }
    });
    let group =
        live(&shared, &ids).unwrap_or_else(|e| panic!("seed {seed}: mount after the crash: {e}"));
    if let Err(v) = group.check_invariants() {
        panic!("seed {seed}: mount after the crash: {v}");
    }
    // A change the crash cut short is finished now (unless a disk is out
    // of service, which a rebalance refuses): redundancy is whole after it.
    if group.meta(|g| g.rebalance_pending()).unwrap().is_some() {
        if trace() {
            let c = group.meta(|g| g.check(false)).unwrap().unwrap();
            eprintln!("check before the resumed rebalance: {:?}", c.problems);
        }
        if silent {
            let numbers: Vec<u32> = model.files.values().map(|f| f.number).collect();
            tainted.extend(tainted_extents(group.plane(), &numbers, &victims));
        }
        let resumed = group.rebalance(8, &mut |_| {});
        if trace() {
            eprintln!("resumed rebalance: {resumed:?}");
        }
        match resumed {
            Ok(r) => {
                assert!(
                    r.moves_left.is_empty(),
                    "seed {seed}: the resumed rebalance left moves: {r:?}"
                );
                // Nothing reads behind it now: every shrink completed.
                let shrinking: Vec<String> = group
                    .meta(|g| {
                        g.disks()
                            .into_iter()
                            .filter(|d| d.shrinking_to_bytes.is_some())
                            .map(|d| d.label)
                            .collect()
                    })
                    .unwrap();
                assert!(
                    shrinking.is_empty(),
                    "seed {seed}: shrinks left pending after the resumed rebalance: {shrinking:?}"
                );
            }
            Err(GroupError::Invalid(why)) => assert!(
                why.contains("OFFLINE") || why.contains("SYNCING"),
                "seed {seed}: the resumed rebalance: {why}"
            ),
            // Writers filled the disks that stay since the drop was asked
            // for: the drop cannot complete (undrop, or add disks).
            Err(GroupError::NoSpace(_)) => {}
            Err(e) => panic!("seed {seed}: the resumed rebalance: {e}"),
        }
    }
    let damage = Damage {
        silent,
        victims: &victims,
        tainted: &tainted,
    };
    let whole = verify(
        &group,
        &shared,
        &mut model,
        &damage,
        &mut accounts.checks,
        seed,
        sector,
    );
    // Misdirected writes land on any AU of the fault actor's disks,
    // marked or not.
    let landed_anywhere = if silent {
        victims.clone()
    } else {
        BTreeSet::new()
    };
    if let Err(v) = group.check_invariants() {
        panic!("seed {seed}: after the checks: {v}");
    }
    marks_read_as_discarded(&group, &shared, &landed_anywhere, seed);
    group.dismount().unwrap();
    if trace() {
        eprintln!(
            "seed {seed}: {} errors accepted:\n{}checks:\n{}",
            accounts.accepted.total(),
            accounts.accepted.lines(),
            accounts.checks.lines()
        );
    }
    SeedFigures {
        seed,
        ops: ops.load(Ordering::SeqCst),
        switches: turnstile.switches(),
        meta_ops,
        records,
        faults: faulted.load(Ordering::SeqCst),
        plan,
        accounts,
        hung: hung.into_inner().unwrap().is_some(),
        timed_out,
        offlined: offlined.load(Ordering::SeqCst),
        resynced: resynced.load(Ordering::SeqCst),
        scrubbed: scrubbed.load(Ordering::SeqCst),
        added: added.load(Ordering::SeqCst),
        dropped: dropped.load(Ordering::SeqCst),
        moved: moved.load(Ordering::SeqCst),
        resized: resized.load(Ordering::SeqCst),
        replaced: replaced.load(Ordering::SeqCst),
        compacted: compacted.load(Ordering::SeqCst),
        reclaimed: reclaimed.load(Ordering::SeqCst),
        lowered: lowered.load(Ordering::SeqCst),
        whole,
    }
}

/// After recovery, every AU a disk's discard map marks as holding nothing
/// reads as zeros (the simulated disks read a discarded range as zeros): a
/// mark made durable before its discard or zeros were, or left on an AU
/// handed out since, would show here as data. The fault actor's disks
/// (`victims`) are passed over: its misdirected writes land anywhere.
fn marks_read_as_discarded(
    group: &LiveGroup,
    shared: &SharedSim,
    victims: &BTreeSet<DeviceId>,
    seed: u64,
) {
    let (members, au, marks) = group
        .meta(|g| {
            let members = g.member_devices();
            let marks: BTreeMap<u16, Vec<u64>> =
                members.keys().map(|d| (*d, g.discard_marks(*d))).collect();
            (members, g.au_bytes(), marks)
        })
        .unwrap();
    let view = group.plane().disks();
    for (disk, device) in members {
        if !view.is_online(disk) || victims.contains(&device) {
            continue;
        }
        for a in &marks[&disk] {
            assert!(
                shared.with(|sim| sim.reads_zeros(device, a * au, au as usize)),
                "seed {seed}: disk {disk} AU {a} is marked as holding nothing, and holds data"
            );
        }
    }
}

/// Where the fault model lets a copy hold what was never written: with
/// silent damage, any copy on the fault actor's disks (`victims`), and a
/// copy of an extent that had one there when a rebalance began (`tainted`:
/// a move carries the damage of the copy it moves).
struct Damage<'a> {
    silent: bool,
    victims: &'a BTreeSet<DeviceId>,
    tainted: &'a BTreeSet<(u32, u32, u64)>,
}

/// The group after recovery against the model: first every copy as it lies
/// on its disk, before any read (a read that finds a bad copy rewrites it,
/// and would hide what it found); then every file as a caller reads it;
/// then the names; then `check`.
fn verify(
    group: &LiveGroup,
    shared: &SharedSim,
    model: &mut Model,
    damage: &Damage<'_>,
    checks: &mut Tally,
    seed: u64,
    sector: u64,
) -> bool {
    let mut h = group.handle(64).unwrap();
    // The files to compare: those whose existence and size are certain.
    let mut files: Vec<(&String, &ModelFile)> = Vec::new();
    for (name, f) in &model.files {
        let info = group.meta(|g| g.open(&path(name))).unwrap();
        let info = match info {
            Ok(info) => info,
            Err(_) if f.uncertain || model.names_uncertain.contains(name) => continue,
            Err(e) => panic!("seed {seed}: {name} is gone after recovery: {e}"),
        };
        if f.uncertain {
            continue;
        }
        assert_eq!(info.size_bytes, f.size, "seed {seed}: {name} size");
        assert_eq!(info.number, f.number, "seed {seed}: {name} is another file");
        files.push((name, f));
    }
    raw_copies(group, shared, &h, &files, damage, checks, seed, sector);
    // Read as a caller reads. Where a copy may be silently damaged, with
    // the caller's own check (as a database with block checksums reads: a
    // bad copy is passed over and rewritten); elsewhere plainly, and what
    // comes back must be what was written.
    let chunk = 1 << 20;
    let mut buf = vec![0u8; chunk as usize];
    for (name, f) in &files {
        let snap = h.file(f.number).unwrap();
        let mut offset = 0;
        while offset < f.size {
            let len = chunk.min(f.size - offset);
            // A stretch that only extents never written hold, and that the
            // model never saw a write to, is passed over: the read would
            // fill it with zeros without asking a disk, and compare zeros
            // with zeros (most of a file's 140 MiB, and a fifth of the
            // simulation's time). An extent the group wrongly calls
            // unwritten, or wrongly written, still shows: the model holds
            // a write there, or the extent is read.
            if !f.touches(offset, len) && !written_extent_in(&snap, offset, len) {
                offset += len;
                continue;
            }
            let buf = &mut buf[..len as usize];
            if damage.silent {
                let check = |b: &[u8]| match f.allowed(offset, b, sector) {
                    Ok(()) => true,
                    Err(why) => {
                        if trace() {
                            eprintln!("check of {name} at {offset}: {why}");
                        }
                        false
                    }
                };
                h.read_checked(f.number, offset, buf, &check)
                    .unwrap_or_else(|e| panic!("seed {seed}: {name} at {offset}: {e}"));
                checks.hit("read-back: a checked read (silent damage possible)");
            } else {
                h.read(f.number, offset, buf)
                    .unwrap_or_else(|e| panic!("seed {seed}: {name} at {offset}: {e}"));
                if let Err(why) = f.allowed(offset, buf, sector) {
                    panic!("seed {seed}: read of {name} after recovery: {why}");
                }
                checks.hit("read-back: a plain read compared with the model");
            }
            offset += len;
        }
    }
    drop(h);
    names(group, model, checks, seed);
    let report = group.meta(|g| g.check(false)).unwrap().unwrap();
    assert!(
        report.problems.is_empty(),
        "seed {seed}: check after recovery: {:?}",
        report.problems
    );
    // Every disk back in service: every copy recorded missing (a failure
    // group away when it was allocated, or a write it missed) was restored.
    let (disks, lowered) = group.meta(|g| (g.disks(), g.redundancy_lowered())).unwrap();
    let whole = disks
        .iter()
        .all(|d| d.state == cairn_format::group::DiskState::Online);
    if whole {
        assert_eq!(
            (lowered.extents, lowered.bytes),
            (0, 0),
            "seed {seed}: redundancy still lowered with every disk ONLINE: {disks:?}"
        );
        assert!(
            disks.iter().all(|d| d.missing_copy_aus == 0),
            "seed {seed}: {disks:?}"
        );
    }
    whole
}

/// Whether any extent holding a byte of `offset..offset + len` of the file
/// was written (initialized).
fn written_extent_in(
    snap: &cairn_store::group::plane::FileSnapshot,
    offset: u64,
    len: u64,
) -> bool {
    let mut at = offset;
    while at < offset + len {
        let loc = snap.layout.locate(at);
        if snap.extent(loc.extent).is_none_or(|e| e.initialized) {
            return true;
        }
        at += loc.run_bytes.min(offset + len - at);
    }
    false
}

/// Every copy in service of every written extent, read straight off its
/// simulated disk, holds what the file may read there (its synced content
/// or a write since, sector by sector): the copies agree wherever the
/// model is sure, and none missed an acknowledged write. A copy on a disk
/// out of service, and an AU a copy is marked stale in, are passed over
/// (resync brings them back); so is a copy the fault model lets be damaged
/// ([`Damage`]).
#[allow(clippy::too_many_arguments)]
fn raw_copies(
    group: &LiveGroup,
    shared: &SharedSim,
    h: &cairn_store::group::DataHandle,
    files: &[(&String, &ModelFile)],
    damage: &Damage<'_>,
    checks: &mut Tally,
    seed: u64,
    sector: u64,
) {
    use cairn_format::extent_map::{Striping, FINE_STRIPE_BYTES};
    let view = group.plane().disks();
    let members = view.member_devices();
    let mut mirrored_seen = false;
    for (name, f) in files {
        let snap = h.file(f.number).unwrap();
        let au = snap.au_bytes;
        // The file bytes a stretch of an extent's AU run holds: all of an
        // AU for coarse striping, a stripe unit at a time for fine.
        let unit = match snap.layout.striping {
            Striping::Coarse => au,
            Striping::Fine => FINE_STRIPE_BYTES,
        };
        shared.with(|sim| {
            for (i, extent) in snap.extents().enumerate() {
                if !extent.initialized {
                    continue;
                }
                let i = i as u64;
                let aus = snap.layout.extent_bytes(i) / au;
                let tainted = damage.tainted.contains(&(snap.number, snap.incarnation, i));
                mirrored_seen |= extent.copies().len() > 1;
                for (slot, c) in extent.copies().iter().enumerate() {
                    let device = members.get(&c.disk).copied();
                    let Some(device) = device.filter(|_| view.is_online(c.disk)) else {
                        checks.hit("raw copies: a copy on a disk out of service passed over");
                        continue;
                    };
                    let may_be_damaged =
                        damage.silent && (damage.victims.contains(&device) || tainted);
                    for a in 0..aus {
                        if extent.stale_in(slot, a..a + 1) {
                            checks.hit("raw copies: a stale AU passed over");
                            continue;
                        }
                        let raw = sim.contents(device, (u64::from(c.au) + a) * au, au as usize);
                        for (k, bytes) in raw.chunks(unit as usize).enumerate() {
                            let within = a * au + k as u64 * unit;
                            let at = snap.layout.logical_offset(i, within);
                            let Ok(at) = u64::try_from(at) else { continue };
                            if at >= f.size {
                                continue;
                            }
                            let bytes = &bytes[..bytes.len().min((f.size - at) as usize)];
                            if let Err(why) = f.allowed(at, bytes, sector) {
                                if may_be_damaged {
                                    checks.hit(
                                        "raw copies: a damaged copy on a faulted disk passed over",
                                    );
                                    continue;
                                }
                                panic!(
                                    "seed {seed}: {name} extent {i} AU {a}: the copy on disk {} (device {}, AU {}) holds what was never written: {why} ({extent:?})",
                                    c.disk,
                                    device.0,
                                    u64::from(c.au) + a
                                );
                            }
                        }
                        checks.hit("raw copies: an AU of a copy compared with the model");
                    }
                }
            }
        });
    }
    if mirrored_seen {
        checks.hit("raw copies: a mirrored seed compared every copy in service");
    }
}

/// Directories, aliases and files in the root are what was acknowledged:
/// each acknowledged one is listed, and nothing is listed that was never
/// acknowledged (or whose operation the crash left uncertain).
fn names(group: &LiveGroup, model: &Model, checks: &mut Tally, seed: u64) {
    let root = group
        .meta(|g| g.list(&GroupPath::parse("+SIM").unwrap()))
        .unwrap()
        .unwrap();
    let listed = |kind: AliasKind, name: &str| {
        root.iter()
            .find(|e| e.kind == kind && e.name.eq_ignore_ascii_case(name))
    };
    for dir in &model.dirs {
        assert!(
            listed(AliasKind::Directory, dir).is_some(),
            "seed {seed}: directory {dir} is gone"
        );
        checks.hit("names: every acknowledged directory listed");
    }
    for (alias, target) in &model.aliases {
        if model.aliases_uncertain.contains(alias) || model.names_uncertain.contains(target) {
            continue;
        }
        let Some(f) = model.files.get(target) else {
            continue;
        };
        let entry = listed(AliasKind::Alias, alias)
            .unwrap_or_else(|| panic!("seed {seed}: alias {alias} is gone"));
        assert_eq!(
            entry.file.as_ref().map(|i| i.number),
            Some(f.number),
            "seed {seed}: alias {alias} names another file"
        );
        checks.hit("names: every acknowledged alias names its file");
    }
    fn known<'a>(name: &str, mut set: impl Iterator<Item = &'a String>) -> bool {
        set.any(|n| n.eq_ignore_ascii_case(name))
    }
    for e in &root {
        let ok = match e.kind {
            AliasKind::Directory => {
                known(&e.name, model.dirs.iter()) || known(&e.name, model.dirs_uncertain.iter())
            }
            AliasKind::Alias => {
                known(&e.name, model.aliases.keys())
                    || known(&e.name, model.aliases_uncertain.iter())
            }
            _ => known(&e.name, model.files.keys()) || known(&e.name, model.names_uncertain.iter()),
        };
        assert!(
            ok,
            "seed {seed}: {:?} {} is listed and was never acknowledged",
            e.kind, e.name
        );
    }
    checks.hit("names: nothing listed that was never acknowledged");
}

fn seeds() -> (u64, u64) {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    if let Some(one) = env("CAIRN_INTERLEAVE_SEED") {
        return (one, 1);
    }
    (
        env("CAIRN_INTERLEAVE_FIRST_SEED").unwrap_or(0),
        env("CAIRN_INTERLEAVE_SEEDS").unwrap_or(SEEDS_CI),
    )
}

/// The seeds allocate and free buffers of up to a few MiB at a high rate
/// (disk contents, file data, whole-file reads); by default the allocator
/// maps each big one fresh and gives freed memory back at once, and the
/// page faults that follow were a sixth of the run. Keep it instead.
fn keep_freed_memory() {
    // SAFETY: mallopt only sets the allocator's parameters, under its own
    // lock.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TOP_PAD, 64 << 20);
    }
}

#[test]
fn interleaving_simulation() {
    let (first, count) = seeds();
    keep_freed_memory();
    let started = std::time::Instant::now();
    // Each seed has its own disks and its own turnstile, and the scheduler
    // is per thread: seeds run on every core.
    let workers = common::seed_workers(count);
    let totals = common::run_seeds(
        first,
        count,
        |seed| {
            format!("interleaving simulation failed; replay with:\n  CAIRN_INTERLEAVE_SEED={seed} cargo test -p cairn-store --test interleave -- --nocapture")
        },
        run_seed,
    );
    let (mut ops, mut switches, mut faulted) = (0u64, 0u64, 0u64);
    let (mut hung, mut timed_out) = (0u64, 0u64);
    let (mut meta_ops, mut records) = (0u64, 0u64);
    let (mut offlined, mut resynced, mut lifecycle_seeds) = (0u64, 0u64, 0u64);
    let mut scrubbed = 0u64;
    let (mut added, mut dropped, mut moved, mut change_seeds) = (0u64, 0u64, 0u64, 0u64);
    let (mut resized, mut replaced, mut compacted) = (0u64, 0u64, 0u64);
    let (mut reclaimed, mut reclaim_seeds) = (0u64, 0u64);
    let (mut quiet, mut loud, mut silent) = (0u64, 0u64, 0u64);
    let (mut checks, mut accepted) = (Tally::default(), Tally::default());
    let (mut accepted_max, mut accepted_max_seed) = (0u64, 0u64);
    let (mut lowered, mut lowered_seeds, mut whole_seeds) = (0u64, 0u64, 0u64);
    for f in &totals {
        assert!(
            f.ops >= 200,
            "seed {}: only {} operations before the crash",
            f.seed,
            f.ops
        );
        ops += f.ops;
        switches += f.switches;
        meta_ops += f.meta_ops;
        records += f.records;
        faulted += u64::from(f.faults);
        if f.plan.silent() {
            silent += 1;
        } else if f.plan.any() {
            loud += 1;
        } else {
            quiet += 1;
        }
        hung += u64::from(f.hung);
        timed_out += f.timed_out;
        offlined += f.offlined;
        resynced += f.resynced;
        scrubbed += f.scrubbed;
        lifecycle_seeds += u64::from(f.offlined > 0);
        added += f.added;
        dropped += f.dropped;
        moved += f.moved;
        resized += f.resized;
        replaced += f.replaced;
        compacted += f.compacted;
        reclaimed += f.reclaimed;
        reclaim_seeds += u64::from(f.reclaimed > 0);
        lowered += f.lowered;
        lowered_seeds += u64::from(f.lowered > 0);
        whole_seeds += u64::from(f.whole && f.lowered > 0);
        change_seeds += u64::from(f.moved > 0 || f.added > 0 || f.resized > 0);
        checks.merge(&f.accounts.checks);
        accepted.merge(&f.accounts.accepted);
        if f.accounts.accepted.total() > accepted_max {
            accepted_max = f.accounts.accepted.total();
            accepted_max_seed = f.seed;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "interleaving simulation: {count} seeds in {secs:.1} s ({:.1} seeds/s, {workers} at a time): {ops} operations, {switches} scheduling points, {faulted} seeds with faults injected ({quiet} planned none, {loud} only errors, lost and hung disks, {silent} silent damage too; {hung} with a disk that hung, {timed_out} of its requests timed out); {meta_ops} metadata operations in {records} journal records; {offlined} disks taken offline and {resynced} resynced back ONLINE, in {lifecycle_seeds} seeds; {scrubbed} scrubs beside the writers; {added} disks added, {dropped} dropped, {resized} resized, {replaced} OFFLINE disks replaced and {moved} extent copies moved by rebalances ({compacted} by compact passes), in {change_seeds} seeds; {} MiB given back by reclaims in {reclaim_seeds} seeds; {lowered} files created with a failure group away (lowered redundancy) in {lowered_seeds} seeds, {whole_seeds} of them whole again at the end",
        count as f64 / secs,
        reclaimed >> 20
    );
    eprintln!(
        "errors accepted: {} (at most {accepted_max} in one seed, seed {accepted_max_seed}), by reason:\n{}checks run:\n{}",
        accepted.total(),
        accepted.lines(),
        checks.lines()
    );
    // With enough seeds, every life-cycle operation and every check must
    // have run: a regression that refuses one of them, or a check whose
    // condition never holds, must not pass quietly.
    if totals.len() >= 500 {
        assert!(
            added > 0
                && dropped > 0
                && resized > 0
                && replaced > 0
                && compacted > 0
                && scrubbed > 0
                && offlined > 0
                && resynced > 0
                && reclaim_seeds > 0
                && hung > 0
                && timed_out > 0
                && lowered_seeds > 0
                && whole_seeds > 0,
            "{} seeds: {added} added, {dropped} dropped, {resized} resized, {replaced} replaced, {compacted} compact moves, {scrubbed} scrubs, {offlined} offlined, {resynced} resynced, {reclaim_seeds} seeds with reclaims, {hung} with a hung disk ({timed_out} requests timed out), {lowered_seeds} with files created at lowered redundancy ({whole_seeds} checked whole again at the end)",
            totals.len()
        );
        let never = checks.missing(CHECKS);
        assert!(
            never.is_empty(),
            "{} seeds: these checks never ran: {never:?}",
            totals.len()
        );
    }
}
