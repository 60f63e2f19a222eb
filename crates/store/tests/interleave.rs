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
//! group, so a copy survives): a lost disk, transient read and write errors,
//! misdirected writes and bit rot; a disk that hangs (its requests answered
//! by nothing, until each times out after the group's `disk_io_timeout` in
//! simulated time and the disk is taken offline as failed; it answers again
//! after the crash); and at the crash, writes torn at 512-byte sectors
//! inside 4 KiB metadata blocks (512n disks).
//!
//! After recovery: every file whose create was acknowledged exists with the
//! size last acknowledged; every sector reads back as its synced content or
//! one of the writes acknowledged since (read with the caller's check, as a
//! database with block checksums reads, so a rotted or misdirected copy is
//! passed over and rewritten); then every copy of every written extent holds
//! those bytes (mirrors compared); directories and aliases are what was
//! acknowledged; `group check` is clean (no AU leaked or owned twice).
//!
//! `CAIRN_INTERLEAVE_SEEDS` sets how many seeds (CI default below) and
//! `CAIRN_INTERLEAVE_FIRST_SEED` where they start; `CAIRN_INTERLEAVE_SEED`
//! replays one, `CAIRN_INTERLEAVE_TRACE=1` says what each actor does. A
//! failure prints the command that replays it.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use cairn_io::{DeviceId, IoEngine};
use cairn_io_sim::{geometry, Actor, CrashPolicy, SharedSim, SimEngine, Turnstile};
use cairn_store::group::{
    self, AliasKind, CreateOptions, GroupError, GroupSpec, LiveGroup, NewDisk, Redundancy,
};
use cairn_store::names::GroupPath;
use uuid::Uuid;

mod common;
use common::Rand;
use common::MIB;
const KIB: u64 = 1 << 10;
/// Seeds per CI run: about 4½ minutes on a 2-core machine (~19 seeds a
/// second, two at a time, with the life-cycle actor's resyncs and
/// rebalances); `CAIRN_INTERLEAVE_SEEDS` sets another count (100,000 for a
/// long run).
const SEEDS_CI: u64 = 5_000;
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

/// What the run shares between actors.
struct World {
    live: LiveGroup,
    shared: SharedSim,
    ids: Vec<DeviceId>,
    cfg: Config,
    model: Mutex<Model>,
    /// A fault was injected: errors may follow.
    faulted: AtomicBool,
    sector: u64,
    /// Operations the actors completed (acknowledged or failed).
    ops: AtomicU64,
    /// The crash: the simulated disks' budget is armed once the actors have
    /// done `crash_at_ops` operations, `crash_delay` mutating requests ahead.
    crash_at_ops: u64,
    crash_delay: usize,
    armed: AtomicBool,
    /// Data was silently damaged on a copy (a misdirected write, bit rot):
    /// data blocks carry no checksums, so only a reader with its own check
    /// finds it, and a copy nobody read stays as it is (`scrub` is not built
    /// yet) — the mirrors are then not compared.
    silent_damage: AtomicBool,
    /// The fault actor hung a disk.
    hung: AtomicBool,
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
        let n = self.ops.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= self.crash_at_ops && !self.armed.swap(true, Ordering::SeqCst) {
            self.shared.crash_after(Some(self.crash_delay));
        }
    }

    /// An error is acceptable if the process "died" or a fault was injected;
    /// returns whether the actor must stop (the process died, or the group
    /// stopped).
    fn expected(&self, e: &GroupError, what: &str, seed: u64) -> bool {
        if self.shared.crashed() || self.faulted.load(Ordering::SeqCst) {
            if trace() {
                eprintln!("  {what}: {e} (expected after a crash or a fault)");
            }
            return self.shared.crashed() || matches!(e, GroupError::Poisoned(_));
        }
        panic!("seed {seed}: {what}: {e} with no crash and no fault");
    }
    fn stopped(&self) -> bool {
        self.shared.crashed()
    }
}

// ---------------------------------------------------------------------------
// Actors

fn writer(world: &World, seed: u64, me: usize) {
    let mut rng = Rand::new(seed ^ ((me as u64 + 1) * 0x5851_F42D));
    let mut handle = match world.live.handle(64) {
        Ok(h) => h,
        Err(e) => {
            world.expected(&e, "handle", seed);
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
                    if world.expected(&e, &format!("create {name}"), seed) {
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
                    if world.expected(&e, &format!("punch {name}"), seed) {
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
                    if world.expected(&e, &format!("write {name}"), seed) {
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
                let read = if world.silent_damage.load(Ordering::SeqCst) {
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
                    if world.expected(&e, &format!("read {name}"), seed) {
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
            }
            // Sync: every acknowledged write of this actor is durable.
            78..=87 => {
                if let Err(e) = handle.sync() {
                    if world.expected(&e, "sync", seed) {
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
                        if world.expected(&e, &format!("resize {name}"), seed) {
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
                        if world.expected(&e, &format!("remove {name}"), seed) {
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
                        if world.expected(&e, &format!("mkdir {name}"), seed) {
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
                        if world.expected(&e, &format!("mkalias {alias}"), seed) {
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
                        if world.expected(&e, &format!("scratch {name}"), seed) {
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// Injects faults on the disks of one failure group (mirrored groups only):
/// a copy of everything survives on the others.
/// The one failure group faults and maintenance hit in a seed: the group
/// must survive (one failure group down at a time), so every acknowledged
/// write must be there after recovery.
fn victim_fg(world: &World, rng: &mut Rand) -> usize {
    rng.below(world.cfg.disks.iter().map(|d| d.1).max().unwrap_or(0) as u64 + 1) as usize
}

fn fault_actor(world: &World, seed: u64) {
    let mut rng = Rand::new(seed ^ 0xFA17);
    if world.cfg.redundancy == Redundancy::External {
        return;
    }
    let victim_fg = victim_fg(world, &mut rng);
    let victims: Vec<DeviceId> = world
        .ids
        .iter()
        .zip(&world.cfg.disks)
        .filter(|(_, (_, fg))| *fg == victim_fg)
        .map(|(id, _)| *id)
        .collect();
    // In some seeds, at one of its turns, a disk stops answering (its own
    // stream, so the other faults stay as they were).
    let mut hang = Rand::new(seed ^ 0x4A96);
    let hang_at = hang
        .chance(15)
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
            world.hung.store(true, Ordering::SeqCst);
            world.shared.with(|sim| sim.hang_disk(disk, true));
            if trace() {
                eprintln!("  faults: disk {} hangs", disk.0);
            }
        }
        let disk = victims[rng.below(victims.len() as u64) as usize];
        world.faulted.store(true, Ordering::SeqCst);
        let what = rng.below(100);
        if (55..=84).contains(&what) {
            world.silent_damage.store(true, Ordering::SeqCst);
        }
        world.shared.with(|sim| {
            let f = &mut sim.disk_mut(disk).faults;
            match what {
                0..=4 => sim.lose_disk(disk),
                5..=29 => f.write_error_per_million = 30_000,
                30..=54 => f.read_error_per_million = 30_000,
                55..=69 => f.misdirect_per_million = 20_000,
                70..=84 => {
                    // Bit rot somewhere in the data area.
                    let size = sim.geometry(disk).map_or(0, |g| g.size_bytes);
                    let at = 4 * MIB + rng.below((size.saturating_sub(8 * MIB)) / 4096) * 4096;
                    sim.rot(disk, at, (rng.below(8)) as u8);
                }
                _ => {
                    let f = &mut sim.disk_mut(disk).faults;
                    f.write_error_per_million = 0;
                    f.read_error_per_million = 0;
                    f.misdirect_per_million = 0;
                }
            }
        });
        if trace() {
            eprintln!("  faults: {what} on disk {}", disk.0);
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
    // The fault actor's failure group (its own stream, drawn the same way).
    let fg = victim_fg(world, &mut Rand::new(seed ^ 0xFA17));
    let mut rng = Rand::new(seed ^ 0x11FE);
    let ours: Vec<usize> = (0..world.cfg.disks.len())
        .filter(|i| world.cfg.disks[*i].1 == fg)
        .collect();
    let mut spares = 0..world.cfg.spares.len();
    let mirrored = world.cfg.redundancy != Redundancy::External;
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
            if world.expected(&e, "set thin_provisioned", seed) {
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
        world.count_op();
        match world.live.offline_disks(std::slice::from_ref(&disk), None) {
            Ok(_) => {
                world.offlined.fetch_add(1, Ordering::SeqCst);
            }
            Err(GroupError::Invalid(_) | GroupError::NotFound(_)) => {}
            Err(e) => {
                if world.expected(&e, &format!("offline {disk}"), seed) {
                    return;
                }
            }
        }
        if trace() {
            eprintln!("  offline {disk}");
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
        match world
            .live
            .online_disks(Some(std::slice::from_ref(&disk)), power, &mut |_| {})
        {
            Ok(r) => {
                world
                    .resynced
                    .fetch_add(r.disks_online.len() as u64, Ordering::SeqCst);
                if trace() {
                    eprintln!("  online {disk} at power {power}: {r:?}");
                }
            }
            Err(GroupError::Invalid(_) | GroupError::NotFound(_)) => {}
            Err(e) => {
                if world.expected(&e, &format!("online {disk}"), seed) {
                    return;
                }
            }
        }
    }
}

/// A scrub (sometimes repairing) while the writers write the very extents
/// it reads: with no fault injected, it finds no disagreement — a write
/// between the reads of two copies would look like one, and a repair would
/// undo the write (the writers' own checks would then fail). Returns
/// whether the actor must stop.
fn scrub_now(world: &World, rng: &mut Rand, seed: u64) -> bool {
    world.count_op();
    let power = 1 + rng.below(8) as usize;
    let repair = rng.chance(50);
    let how = cairn_store::group::scrub::ScrubRepair::new(repair, None);
    match world.live.scrub(power, how, &mut |_| {}) {
        Ok(r) => {
            if trace() {
                eprintln!("  scrub at power {power} (repair {repair}): {r:?}");
            }
            let quiet = !world.faulted.load(Ordering::SeqCst)
                && !world.silent_damage.load(Ordering::SeqCst)
                && !world.shared.crashed();
            if quiet {
                assert!(
                    r.problems.is_empty() && r.bytes_rewritten == 0,
                    "seed {seed}: a scrub beside the writers found disagreements: {:?}",
                    r.problems
                );
            }
            world.scrubbed.fetch_add(1, Ordering::SeqCst);
            false
        }
        Err(GroupError::Invalid(_) | GroupError::NotFound(_)) => false,
        Err(e) => world.expected(&e, "scrub", seed),
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
        Err(e) => world.expected(&e, "reclaim", seed),
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
            if world.expected(&e, &format!("replace {disk}"), seed) {
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
            if world.expected(&e, "rebalance", seed) {
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
                    if world.expected(&e, "add a spare", seed) {
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
                if world.expected(&e, &format!("drop {disk}"), seed) {
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
                if world.expected(&e, &format!("resize {disk}"), seed) {
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
            if world.expected(&e, "set rebalance_compact", seed) {
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
    /// Metadata operations (first-write marks included) and the journal
    /// records they were committed in, before the crash: group commit.
    meta_ops: u64,
    records: u64,
    switches: u64,
    crashes: u64,
    faults: bool,
    /// A disk hung; requests to it that timed out before the crash.
    hung: bool,
    timed_out: u64,
}

fn run_seed(seed: u64) -> SeedFigures {
    let mut rng = Rand::new(seed);
    let cfg = config(&mut rng);
    if trace() {
        eprintln!("seed {seed}: {cfg:?}");
    }
    let (sim, ids) = build(seed, &cfg);
    let shared = SharedSim::new(sim);
    let sector = u64::from(cfg.logical);
    // The process dies once the actors have done a number of operations the
    // seed picks (at least 200), a few mutating requests later.
    let crash_at_ops = 200 + rng.below(40);
    let crash_delay = rng.below(50) as usize;
    let world = World {
        live: live(&shared, &ids).unwrap(),
        shared: shared.clone(),
        ids: ids.clone(),
        cfg: cfg.clone(),
        model: Mutex::new(Model::default()),
        faulted: AtomicBool::new(false),
        sector,
        ops: AtomicU64::new(0),
        crash_at_ops,
        crash_delay,
        armed: AtomicBool::new(false),
        silent_damage: AtomicBool::new(false),
        hung: AtomicBool::new(false),
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
    // The fault actor's disks: misdirected writes and rot may land on any
    // of their AUs, marked or not.
    let victims: BTreeSet<DeviceId> = if world.faulted.load(Ordering::SeqCst) {
        let fg = victim_fg(&world, &mut Rand::new(seed ^ 0xFA17));
        ids.iter()
            .zip(&cfg.disks)
            .filter(|(_, (_, g))| *g == fg)
            .map(|(id, _)| *id)
            .collect()
    } else {
        BTreeSet::new()
    };
    let World {
        live: group,
        model,
        faulted,
        ops,
        silent_damage,
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
    let meta_ops = group.operations_begun();
    let records = group.meta(|g| g.journal_records()).unwrap_or(0);
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
    let mut crashes = 1;
    // Sometimes the recovery dies too.
    if rng.chance(30) {
        shared.crash_after(Some(rng.below(60) as usize));
        let outcome = live(&shared, &ids);
        drop(outcome);
        if shared.crashed() {
            shared.with(|sim| sim.crash(policy));
            crashes += 1;
        }
        if trace() {
            eprintln!("recovery mount crashed: {}", crashes > 1);
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
    let compare_mirrors = !silent_damage.load(Ordering::SeqCst);
    // A change the crash cut short is finished now (unless a disk is out
    // of service, which a rebalance refuses): redundancy is whole after it.
    if group.meta(|g| g.rebalance_pending()).unwrap().is_some() {
        if trace() {
            let c = group.meta(|g| g.check(false)).unwrap().unwrap();
            eprintln!("check before the resumed rebalance: {:?}", c.problems);
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
    let whole = verify(&group, &shared, &mut model, seed, sector, compare_mirrors);
    marks_read_as_discarded(&group, &shared, &victims, seed);
    group.dismount().unwrap();
    SeedFigures {
        seed,
        ops: ops.load(Ordering::SeqCst),
        switches: turnstile.switches(),
        meta_ops,
        records,
        crashes,
        faults: faulted.load(Ordering::SeqCst),
        hung: hung.load(Ordering::SeqCst),
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

/// The group after recovery against the model.
fn verify(
    group: &LiveGroup,
    shared: &SharedSim,
    model: &mut Model,
    seed: u64,
    sector: u64,
    compare_mirrors: bool,
) -> bool {
    let mut h = group.handle(64).unwrap();
    let members = group.meta(|g| g.member_devices()).unwrap();
    let chunk = 1 << 20;
    let mut buf = vec![0u8; chunk as usize];
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
        // Read as a database reads: its own check picks a good copy, and a
        // bad one is rewritten.
        let mut offset = 0;
        while offset < f.size {
            let len = chunk.min(f.size - offset);
            let buf = &mut buf[..len as usize];
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
            offset += len;
        }
        if !compare_mirrors {
            continue;
        }
        // Every copy of every written extent holds what the file reads.
        let snap = h.file(f.number).unwrap();
        if snap.layout.striping != cairn_store::placement::Striping::Coarse {
            continue; // fine striping interleaves; read back above
        }
        let mut back = Vec::new();
        for (i, extent) in snap.extents().enumerate() {
            let start = snap.layout.capacity_bytes(i as u64);
            let end = (start + snap.layout.extent_bytes(i as u64)).min(f.size);
            if !extent.initialized || start >= end {
                continue;
            }
            // A write not synced before the crash may have been kept on one
            // copy and lost on another, as the crash policy chose: only what
            // was made durable must be the same on every copy.
            if f.pending
                .iter()
                .any(|(o, d)| *o < end && o + d.len() as u64 > start)
            {
                continue;
            }
            back.resize((end - start) as usize, 0);
            h.read(f.number, start, &mut back).unwrap();
            for c in extent.copies() {
                let Some(device) = members.get(&c.disk) else {
                    continue;
                };
                if !group.plane().disks().is_online(c.disk) {
                    continue;
                }
                let on_disk = shared
                    .with(|sim| sim.contents(*device, u64::from(c.au) * snap.au_bytes, back.len()));
                assert!(
                    on_disk == back,
                    "seed {seed}: {name} extent {i}: the copy on disk {} differs ({extent:?})",
                    c.disk
                );
            }
        }
    }
    drop(h);
    // Names: directories and aliases acknowledged are there.
    let root = group
        .meta(|g| g.list(&GroupPath::parse("+SIM").unwrap()))
        .unwrap()
        .unwrap();
    for dir in &model.dirs {
        assert!(
            root.iter()
                .any(|e| e.kind == AliasKind::Directory && e.name.eq_ignore_ascii_case(dir)),
            "seed {seed}: directory {dir} is gone"
        );
    }
    for (alias, target) in &model.aliases {
        if model.aliases_uncertain.contains(alias) || model.names_uncertain.contains(target) {
            continue;
        }
        let Some(f) = model.files.get(target) else {
            continue;
        };
        let entry = root.iter().find(|e| e.name.eq_ignore_ascii_case(alias));
        let entry = entry.unwrap_or_else(|| panic!("seed {seed}: alias {alias} is gone"));
        assert_eq!(
            entry.file.as_ref().map(|i| i.number),
            Some(f.number),
            "seed {seed}: alias {alias} names another file"
        );
    }
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
    let (mut ops, mut switches, mut crashes, mut faulted) = (0u64, 0u64, 0u64, 0u64);
    let (mut hung, mut timed_out) = (0u64, 0u64);
    let (mut meta_ops, mut records) = (0u64, 0u64);
    let (mut offlined, mut resynced, mut lifecycle_seeds) = (0u64, 0u64, 0u64);
    let mut scrubbed = 0u64;
    let (mut added, mut dropped, mut moved, mut change_seeds) = (0u64, 0u64, 0u64, 0u64);
    let (mut resized, mut replaced, mut compacted) = (0u64, 0u64, 0u64);
    let (mut reclaimed, mut reclaim_seeds) = (0u64, 0u64);
    let (mut lowered, mut lowered_seeds, mut whole_seeds) = (0u64, 0u64, 0u64);
    for f in &totals {
        assert!(
            f.ops >= 200 && f.crashes > 0,
            "seed {}: only {} operations, {} crashes",
            f.seed,
            f.ops,
            f.crashes
        );
        ops += f.ops;
        switches += f.switches;
        meta_ops += f.meta_ops;
        records += f.records;
        crashes += f.crashes;
        faulted += u64::from(f.faults);
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
    }
    // With enough seeds, every life-cycle operation must have run: a
    // regression that refuses one of them must not pass quietly.
    if totals.len() >= 500 {
        assert!(
            added > 0
                && dropped > 0
                && resized > 0
                && replaced > 0
                && compacted > 0
                && scrubbed > 0
                && reclaim_seeds > 0
                && hung > 0
                && timed_out > 0
                && lowered_seeds > 0
                && whole_seeds > 0,
            "{} seeds: {hung} with a hung disk ({timed_out} requests timed out), {added} added, {dropped} dropped, {resized} resized, {replaced} replaced, {compacted} compact moves, {scrubbed} scrubs, {reclaim_seeds} seeds with reclaims, {lowered_seeds} with files created at lowered redundancy ({whole_seeds} checked whole again at the end)",
            totals.len()
        );
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "interleaving simulation: {count} seeds in {secs:.1} s ({:.1} seeds/s, {workers} at a time): {ops} operations, {switches} scheduling points, {crashes} crashes, {faulted} seeds with faults ({hung} with a disk that hung, {timed_out} of its requests timed out); {meta_ops} metadata operations in {records} journal records; {offlined} disks taken offline and {resynced} resynced back ONLINE, in {lifecycle_seeds} seeds; {scrubbed} scrubs beside the writers; {added} disks added, {dropped} dropped, {resized} resized, {replaced} OFFLINE disks replaced and {moved} extent copies moved by rebalances ({compacted} by compact passes), in {change_seeds} seeds; {} MiB given back by reclaims in {reclaim_seeds} seeds; {lowered} files created with a failure group away (lowered redundancy) in {lowered_seeds} seeds, {whole_seeds} of them whole again at the end",
        count as f64 / secs,
        reclaimed >> 20
    );
}
