//! The model the simulator checks the group against: each file's bytes
//! (sparse), the files and names, the fault plan, and the world the actors
//! share (the live group, the model, the accounts of what happened).

use super::*;

// ---------------------------------------------------------------------------
// The model

/// A file's bytes, kept sparsely: pages never written read as zeros, so a
/// 140 MiB file costs the model only what was written to it (the model's
/// whole-file buffers were most of the simulator's time).
#[derive(Debug, Clone, Default)]
pub(crate) struct Sparse {
    /// Page number → its `PAGE` bytes.
    pub(crate) pages: BTreeMap<u64, Box<[u8]>>,
}

pub(crate) const PAGE: u64 = 64 * KIB;
pub(crate) static ZEROS: [u8; PAGE as usize] = [0; PAGE as usize];

impl Sparse {
    /// The pieces of `len` bytes at `offset`: (page, offset in it, length).
    pub(crate) fn pieces(offset: u64, len: u64) -> impl Iterator<Item = (u64, usize, usize)> {
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

    pub(crate) fn write(&mut self, offset: u64, data: &[u8]) {
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

    pub(crate) fn read(&self, offset: u64, out: &mut [u8]) {
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
    pub(crate) fn touches(&self, offset: u64, len: u64) -> bool {
        self.pages
            .range(offset / PAGE..(offset + len).div_ceil(PAGE))
            .next()
            .is_some()
    }

    pub(crate) fn holds(&self, offset: u64, data: &[u8]) -> bool {
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
    pub(crate) fn cut(&mut self, len: u64) {
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
pub(crate) struct ModelFile {
    pub(crate) number: u32,
    pub(crate) size: u64,
    /// Content as of the last completed sync; nothing lies past `size`.
    pub(crate) durable: Sparse,
    /// Writes since (offset, data): each may or may not have landed.
    pub(crate) pending: Vec<(u64, Vec<u8>)>,
    /// An operation on it was in flight when something failed: its size and
    /// existence are uncertain.
    pub(crate) uncertain: bool,
    /// A write to it failed (a fault): what it reads back is any allowed
    /// content, not exactly the last write.
    pub(crate) inexact: bool,
}

impl ModelFile {
    pub(crate) fn new(number: u32, size: u64) -> Self {
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
    pub(crate) fn touches(&self, offset: u64, len: u64) -> bool {
        self.durable.touches(offset, len)
            || self
                .pending
                .iter()
                .any(|(w, data)| *w < offset + len && offset < w + data.len() as u64)
    }

    pub(crate) fn sync(&mut self) {
        for (off, data) in std::mem::take(&mut self.pending) {
            self.durable.write(off, &data);
        }
    }

    /// What `len` bytes at `offset` must read as, once every write landed.
    pub(crate) fn latest(&self, offset: u64, len: u64) -> Vec<u8> {
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
    pub(crate) fn resize(&mut self, new: u64) {
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
    pub(crate) fn allowed(&self, offset: u64, actual: &[u8], sector: u64) -> Result<(), String> {
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
pub(crate) struct Model {
    pub(crate) files: BTreeMap<String, ModelFile>,
    /// Directories acknowledged, and ones whose mkdir was in flight.
    pub(crate) dirs: BTreeSet<String>,
    pub(crate) dirs_uncertain: BTreeSet<String>,
    /// Aliases acknowledged: name → file name.
    pub(crate) aliases: BTreeMap<String, String>,
    pub(crate) aliases_uncertain: BTreeSet<String>,
    /// Files whose create or delete was in flight at a failure.
    pub(crate) names_uncertain: BTreeSet<String>,
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
pub(crate) struct FaultPlan {
    pub(crate) lose: bool,
    pub(crate) write_errors: bool,
    pub(crate) read_errors: bool,
    pub(crate) misdirect: bool,
    pub(crate) rot: bool,
    /// A disk stops answering at some turn (a loud fault: its requests time
    /// out and the disk is failed); only in seeds with other faults, so the
    /// fifth with none stays clean.
    pub(crate) hang: bool,
}

impl FaultPlan {
    pub(crate) fn draw(rng: &mut Rand, mirrored: bool) -> Self {
        let mut plan = Self::draw_kinds(rng, mirrored);
        plan.hang = plan.any() && rng.chance(18);
        plan
    }
    pub(crate) fn draw_kinds(rng: &mut Rand, mirrored: bool) -> Self {
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
    pub(crate) fn silent(&self) -> bool {
        self.misdirect || self.rot
    }
    pub(crate) fn any(&self) -> bool {
        self.lose || self.write_errors || self.read_errors || self.hang || self.silent()
    }
}

/// Why a caller may see an error, as the fault model says; each error an
/// actor accepts is counted under one of these.
pub(crate) const CRASHED: &str = "the process died (the crash point was reached)";
pub(crate) const ONLINE_FAILING: &str = "online of a disk the fault actor lost or fails I/O on";
pub(crate) const SCRUB_FAILING: &str = "a scrub reading a copy on a disk the fault actor fails";

/// Every conditional check of the simulator, counted each time it runs: a
/// run of enough seeds fails if one of them never ran.
pub(crate) const CHECKS: &[&str] = &[
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
pub(crate) const RARE: &[&str] = &[
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
pub(crate) struct Accounts {
    pub(crate) checks: Tally,
    pub(crate) accepted: Tally,
}

/// What the run shares between actors.
pub(crate) struct World {
    pub(crate) live: LiveGroup,
    pub(crate) shared: SharedSim,
    pub(crate) ids: Vec<DeviceId>,
    pub(crate) cfg: Config,
    pub(crate) model: Mutex<Model>,
    /// The faults this seed may inject, and the disks they hit (those of
    /// one failure group; empty without faults).
    pub(crate) plan: FaultPlan,
    pub(crate) victims: BTreeSet<DeviceId>,
    /// A fault was injected: errors may follow.
    pub(crate) faulted: AtomicBool,
    /// Disks the fault actor lost (they stay lost).
    pub(crate) lost: Mutex<BTreeSet<DeviceId>>,
    pub(crate) sector: u64,
    /// Operations the actors completed (acknowledged or failed).
    pub(crate) ops: AtomicU64,
    /// The crash: the simulated disks' budget is armed once the actors have
    /// done `crash_at_ops` operations, `crash_delay` mutating requests ahead.
    pub(crate) crash_at_ops: u64,
    pub(crate) crash_delay: usize,
    pub(crate) armed: AtomicBool,
    /// Journal records written when the crash was armed.
    pub(crate) records: AtomicU64,
    /// Data may have been silently damaged on a copy on the fault actor's
    /// disks (a misdirected write, bit rot): data blocks carry no
    /// checksums, so only a reader with its own check finds it.
    pub(crate) silent_damage: AtomicBool,
    /// Extents (file, incarnation, index) that had a copy on a faulted
    /// disk while silent damage was possible, as a rebalance began: the
    /// move of that copy carries its damage to whichever disk it lands on.
    pub(crate) tainted: Mutex<BTreeSet<(u32, u32, u64)>>,
    pub(crate) accounts: Mutex<Accounts>,
    /// The disk the fault actor hung (it stays hung until the crash).
    pub(crate) hung: Mutex<Option<DeviceId>>,
    /// Disks taken offline on request and brought back (each resynced).
    pub(crate) offlined: AtomicU64,
    /// Scrubs run beside the writers.
    pub(crate) scrubbed: AtomicU64,
    pub(crate) resynced: AtomicU64,
    /// Spares added, drops completed, extent copies moved by rebalances.
    pub(crate) added: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) moved: AtomicU64,
    /// Disks resized (grown, or shrinks completed), and OFFLINE disks
    /// replaced by a spare.
    pub(crate) resized: AtomicU64,
    pub(crate) replaced: AtomicU64,
    /// Moves planned by compact passes.
    pub(crate) compacted: AtomicU64,
    /// Bytes given back by reclaims beside the writers.
    pub(crate) reclaimed: AtomicU64,
    /// Files created with their redundancy lowered (a failure group away:
    /// copies recorded on its disks, restored by a resync or a rebuild).
    pub(crate) lowered: AtomicU64,
}

impl World {
    /// An actor starts an operation; the crash is armed once enough have.
    pub(crate) fn count_op(&self) {
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

    pub(crate) fn check(&self, name: &'static str) {
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
    pub(crate) fn failed(
        &self,
        e: &GroupError,
        what: &str,
        seed: u64,
        excuse: Option<&'static str>,
    ) -> bool {
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

    pub(crate) fn stopped(&self) -> bool {
        self.shared.crashed()
    }

    pub(crate) fn lost(&self, device: DeviceId) -> bool {
        self.lost.lock().unwrap().contains(&device)
    }

    pub(crate) fn hung(&self, device: DeviceId) -> bool {
        *self.hung.lock().unwrap() == Some(device)
    }

    /// The fault actor fails I/O on `device` (one of its disks): lost,
    /// hung, or erring at a rate.
    pub(crate) fn fault_touches(&self, device: DeviceId) -> bool {
        self.lost(device) || self.hung(device) || self.plan.write_errors || self.plan.read_errors
    }

    /// The device of the disk labelled `label` (`D<i>`).
    pub(crate) fn device_of(&self, label: &str) -> Option<DeviceId> {
        let i: usize = label.strip_prefix('D')?.parse().ok()?;
        self.ids.get(i).copied()
    }

    /// The group's disk `label`: its state, and whether it is leaving the
    /// group (a drop asked for, by force or not); `None` if it is no
    /// member. `Err(stop)` if the group could not say ([`World::failed`]).
    pub(crate) fn disk_state(
        &self,
        label: &str,
        seed: u64,
    ) -> Result<Option<(DiskState, bool)>, bool> {
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
    pub(crate) fn note_tainted(&self) {
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
pub(crate) fn tainted_extents(
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
pub(crate) fn names_disk(text: &str, label: &str) -> bool {
    text.match_indices(label).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + label.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}
