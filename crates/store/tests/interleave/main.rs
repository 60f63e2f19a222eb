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

mod actors;
#[path = "../common/mod.rs"]
mod common;
mod disk_ops;
mod model;
use actors::*;
use common::MIB;
use common::{Rand, Tally};
use disk_ops::*;
use model::*;
const KIB: u64 = 1 << 10;
/// Seeds per CI run (two at a time; see docs/testing.md for the rate);
/// `CAIRN_INTERLEAVE_SEEDS` sets another count (100,000 for a long run).
const SEEDS_CI: u64 = 6_000;
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
