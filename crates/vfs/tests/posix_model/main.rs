//! The file system's core against a model of POSIX, under the interleaving
//! simulator (in the manner of `crates/store/tests/interleave/`).
//!
//! A seed picks a group (one to four simulated disks, external or normal
//! redundancy, 512n/512e/4Kn sectors) mounted live, and three actors drive
//! one [`Vfs`] over it as the kernel would, each on its own thread: lookup
//! and forget, create, mkdir, unlink, rmdir, rename (with and without
//! `RENAME_NOREPLACE`, across directories), open, read, write at any byte
//! offset, truncate and other attribute changes, fallocate (grow, punch,
//! zero), fsync, flush and release, readdir (whole, and resumed after a
//! cookie), statfs — on shared directories and a small pool of names in
//! mixed case, so that the actors meet: one unlinks or renames over a file
//! another holds open, removes a directory another stands in, looks up a
//! name another is about to take. A deterministic scheduler
//! (`cairn_io_sim::Turnstile`) runs one actor at a time and may switch at
//! every I/O, every wait for a lock, and between operations, as the seed
//! says.
//!
//! The actors play the kernel's part: they hold a lookup for every inode
//! they use (each entry reply is one; `forget` gives them back, never while
//! the inode is open), and take the kernel's inode locks — a directory's
//! exclusively to change its names and shared to look in it, a file's
//! exclusively to write, cut or punch it and shared to read it, and the
//! kernel's rename lock for a move between directories — so that an answer
//! is exactly determined by the operations before it, as the kernel
//! guarantees its callers.
//!
//! The model, kept apart from the group (it knows nothing of AUs, alias
//! ids or file numbers), holds the tree, each file's bytes, each inode's
//! mode and owner, the lookups the kernel holds, and which inode numbers
//! it was given. Every answer is checked against it: the errno of each
//! refusal, the attributes of each entry and `getattr`, the bytes of each
//! read, each listing; an inode number handed out must not name another
//! object the kernel still knows (a new directory never takes the inode of
//! one removed while the kernel knows it), and a file's (inode, generation)
//! never comes back. Data of a file whose last name went stay readable
//! through its inode while the kernel knows it.
//!
//! At the end: the lookup counts are the model's; every file the model
//! says exists is in the group (by number and incarnation) and no other;
//! the whole tree, listed and read through the file system, is the model's;
//! `group check` is clean. Then the file system stops, one of two ways the
//! seed picks: an unmount (`destroy`, which drops the files unlinked while
//! known, then a clean dismount) or a crash (every write not flushed kept,
//! lost or torn), and after the group is mounted again the tree is checked
//! once more — the names, kinds, inodes, sizes, modes and owners always,
//! every byte after an unmount, the bytes of files synced since their last
//! change after a crash — and files that had no name are gone.
//!
//! In about three seeds in ten the process may also die mid-run: after a
//! number of mutating requests the seed picks, every request fails (the
//! group stops). An answer is then either the model's or `EIO`; a change
//! the model says would be made that fails so may or may not have become
//! durable, and the names and objects it touched are unsure. The actors
//! stop asking, give back their lookups (the counts must still be the
//! model's: an entry answered with an error leaves none), the disks keep,
//! lose or tear what was not flushed, and after the group is mounted
//! again the tree is the model's wherever the model is sure.
//!
//! Every conditional check is counted each time it runs; the run prints the
//! totals, and a run of 200 seeds or more fails if a check in [`CHECKS`]
//! never ran.
//!
//! `CAIRN_VFS_SEEDS` sets how many seeds (CI default below) and
//! `CAIRN_VFS_FIRST_SEED` where they start; `CAIRN_VFS_SEED` replays one,
//! `CAIRN_VFS_TRACE=1` says what each actor does. A failure prints the
//! command that replays it.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_io::poison::Recover;
use cairn_io::DeviceId;
use cairn_io_sim::{geometry, Actor, CrashPolicy, SharedSim, SimEngine, Turnstile};
use cairn_store::group::{self, GroupSpec, LiveGroup, NewDisk, Redundancy};
use cairn_vfs::{Attr, Caller, Clock, Errno, Ino, Kind, Served, Vfs};
use uuid::Uuid;

#[path = "../../../store/tests/common/mod.rs"]
mod common;
mod kernel;
mod model;
mod ops;

use common::{Rand, Tally, MIB};
use kernel::{lock_set, KernelLocks, LockSet};
use model::{key, Body, Model, Obj, Object, NAME_BYTES_MAX};
use ops::actor;

/// Seeds per CI run (a few seconds on 2 cores); `CAIRN_VFS_SEEDS` sets
/// another count.
const SEEDS_CI: u64 = 40;
const ACTORS: usize = 3;
/// Operations per actor.
const OPS_PER_ACTOR: usize = 60;
const GROUP: &str = "VFS";
/// The root inode (the served groups).
const ROOT: u64 = 1;
/// The kernel's rename lock (`s_vfs_rename_mutex`), as a lock name.
const RENAME_LOCK: u64 = u64::MAX;
/// Writes, reads and cuts stay below this (a few AUs a file).
const FILE_BYTES_MAX: u64 = 2 * MIB + 512 * 1024;

/// Checks that must each have run in a long enough run.
const CHECKS: &[&str] = &[
    "lookup: found, as the model's",
    "lookup: refused as the model says",
    "create: a new inode",
    "mkdir: a new inode while a removed directory the kernel knows holds its own",
    "unlink of a file the kernel knows",
    "read through an inode whose last name went",
    "write through an inode whose last name went",
    "rename over a file the kernel knows",
    "rename: refused as the model says",
    "rmdir of a directory the kernel knows",
    "a removed directory the kernel knows answers ENOENT",
    "forget: the last lookup of a file whose name went",
    "read: bytes as the model's",
    "readdir: resumed after a cookie",
    "fallocate: a punched or zeroed range",
    "setattr: cut inside a sector",
    "end: lookup counts as the model's",
    "end: files with neither a name nor a lookup are gone",
    "after an unmount: every byte as the model's",
    "after a crash: the tree as the model's",
    "after a crash: a synced file's bytes as the model's",
    "a crash mid-run: an error the dying process explains",
    "a crash mid-run: the tree as the model's where the model is sure",
];

fn trace() -> bool {
    std::env::var_os("CAIRN_VFS_TRACE").is_some()
}

fn top() -> u64 {
    Ino::Dir { slot: 0, id: 0 }.encode()
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

// ---------------------------------------------------------------------------
// The group

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// `destroy`, then a clean dismount.
    Unmount,
    /// The process dies: every write not flushed kept, lost or torn.
    Crash,
}

#[derive(Debug, Clone)]
struct Config {
    disks: usize,
    redundancy: Redundancy,
    logical: u32,
    physical: u32,
    /// How often an actor goes on at a scheduling point (per cent).
    stay: u64,
    /// Whether the actors give back every lookup at their end (else the
    /// file system's end does).
    close_all: bool,
    end: End,
    /// The process dies mid-run after this many mutating requests, if the
    /// actors get that far.
    crash_mid: Option<usize>,
}

fn config(rng: &mut Rand) -> Config {
    let redundancy = if rng.chance(30) {
        Redundancy::External
    } else {
        Redundancy::Normal
    };
    let disks = match redundancy {
        Redundancy::External => 1 + rng.below(2) as usize,
        _ => 2 + 2 * rng.below(2) as usize,
    };
    let logical = if rng.chance(50) { 512 } else { 4096 };
    let physical = if logical == 512 && rng.chance(50) {
        512
    } else {
        4096
    };
    Config {
        disks,
        redundancy,
        logical,
        physical,
        stay: [0, 50, 75, 90][rng.below(4) as usize],
        close_all: rng.chance(50),
        end: if rng.chance(50) {
            End::Unmount
        } else {
            End::Crash
        },
        crash_mid: rng.chance(30).then(|| 100 + rng.below(700) as usize),
    }
}

/// Labelled disks and a new group on them, dismounted.
fn build(seed: u64, cfg: &Config) -> (SimEngine, Vec<DeviceId>) {
    let mut sim = SimEngine::new(seed, 256);
    let ids = common::labelled_disks(
        &mut sim,
        (0..cfg.disks).map(|_| geometry(256 * MIB, cfg.logical, cfg.physical, 512 << 10)),
        |i| 0xF5 << 64 | u128::from(seed) << 16 | i as u128,
    );
    let disks: Vec<NewDisk> = ids
        .iter()
        .enumerate()
        .map(|(i, d)| NewDisk {
            device: *d,
            failgroup: Some(format!("FG{}", i % 2)),
        })
        .collect();
    group::create(
        &mut sim,
        &disks,
        &GroupSpec {
            name: GROUP.into(),
            redundancy: cfg.redundancy,
            au_bytes: MIB,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1_763_700_000,
            group_uuid: Uuid::from_u128(0xF5F5 << 64 | u128::from(seed)),
        },
    )
    .unwrap()
    .dismount()
    .unwrap();
    (sim, ids)
}

/// Time as the seed's run sees it: every reading a millisecond on, so that
/// a seed replays exactly (how often `fsync` stores a time depends on it).
struct SimClock {
    base: Instant,
    ticks: AtomicU64,
}

impl SimClock {
    fn tick(&self) -> u64 {
        self.ticks.fetch_add(1, Ordering::SeqCst) + 1
    }
}

impl Clock for SimClock {
    fn wall_ns(&self) -> i64 {
        1_763_700_000_000_000_000 + self.tick() as i64 * 1_000_000
    }
    fn now(&self) -> Instant {
        self.base + Duration::from_millis(self.tick())
    }
}

fn mount(shared: &SharedSim, ids: &[DeviceId], clock: &Arc<SimClock>) -> (Arc<LiveGroup>, Vfs) {
    let (live, _) = common::mount_live(shared, ids, GROUP).unwrap();
    let live = Arc::new(live);
    let vfs = Vfs::with_clock(
        vec![Served {
            name: GROUP.into(),
            group: live.clone(),
        }],
        clock.clone(),
    )
    .unwrap();
    (live, vfs)
}

// ---------------------------------------------------------------------------
// The world the actors share

struct World {
    seed: u64,
    shared: SharedSim,
    vfs: Vfs,
    model: Mutex<Model>,
    locks: KernelLocks,
    checks: Mutex<Tally>,
    ops: AtomicU64,
    /// The group's size after mirroring, bytes (what `statfs` counts).
    bytes: u64,
    au_bytes: u64,
    /// What changes that failed as the process died may or may not have
    /// made durable.
    unsure: Mutex<Unsure>,
}

/// Names (directory, name key) and objects (size, bytes, mode) a change
/// that failed as the process died touched: after the crash each may be
/// as before or as after.
#[derive(Default)]
struct Unsure {
    names: BTreeSet<(Obj, String)>,
    objs: BTreeSet<Obj>,
}

/// One actor's part of the kernel: the lookups it holds and its opens.
struct ActorState {
    id: usize,
    rng: Rand,
    caller: Caller,
    /// Inode → lookups held.
    held: BTreeMap<u64, u64>,
    /// Inode → opens (each pins a lookup: the kernel forgets no open inode).
    open: BTreeMap<u64, u64>,
}

impl World {
    fn check(&self, name: &'static str) {
        self.checks.lock_or_recover().hit(name);
    }

    /// Whether an error is the dying process's: the crash point armed
    /// mid-run was reached, and from there every request fails, so the
    /// group answers `EIO`.
    fn dying(&self, e: Errno) -> bool {
        let dying = e == Errno::EIO && self.shared.crashed();
        if dying {
            self.check("a crash mid-run: an error the dying process explains");
        }
        dying
    }

    /// Whether an answer agrees with the model's: `false` for an error the
    /// dying process explains (what the change touched is then unsure), a
    /// panic for any other difference.
    fn agrees(&self, what: &str, want: Result<(), Errno>, got: Result<(), Errno>) -> bool {
        match got {
            _ if got == want => true,
            Err(e) if self.dying(e) => false,
            _ => panic!(
                "seed {}: {what}: the model says {want:?}, the file system {got:?}",
                self.seed
            ),
        }
    }

    /// A change the model said would be made failed as the process died:
    /// these names and objects are unsure from here.
    fn unsure(&self, names: &[(Obj, &str)], objs: &[Obj]) {
        let mut u = self.unsure.lock_or_recover();
        u.names.extend(names.iter().map(|(d, n)| (*d, key(n))));
        u.objs.extend(objs);
    }

    /// Run `body` holding the kernel's locks that `want` names, computed
    /// from the model and computed again once held: if what the names
    /// name changed meanwhile, let go and take the new set.
    fn with_locks<R>(&self, want: impl Fn(&Model) -> LockSet, body: impl FnOnce() -> R) -> R {
        for _ in 0..1000 {
            let set = lock_set(want(&self.model.lock_or_recover()));
            let held = self.locks.acquire(&set);
            if lock_set(want(&self.model.lock_or_recover())) == set {
                let r = body();
                drop(held);
                return r;
            }
        }
        panic!(
            "seed {}: the names an operation needs kept changing",
            self.seed
        )
    }

    fn say(&self, a: &ActorState, what: &str) {
        if trace() {
            eprintln!("seed {} actor {}: {what}", self.seed, a.id);
        }
    }

    /// An entry reply for object `o` (or a refusal) against the model's
    /// expectation; the lookup it carries is the actor's.
    fn entry(
        &self,
        a: &mut ActorState,
        what: &str,
        want: Result<Obj, Errno>,
        got: Result<(Attr, u64), Errno>,
        counted: bool,
    ) {
        let mut m = self.model.lock_or_recover();
        match (want, got) {
            (_, Err(g)) if self.dying(g) => {}
            (Err(w), Err(g)) => assert_eq!(g, w, "seed {}: {what}", self.seed),
            (Ok(o), Ok((attr, generation))) => {
                m.check_attr(o, &attr, what);
                assert_eq!(generation, m.objs[o].generation, "{what}: generation");
                if counted {
                    m.objs[o].lookups += 1;
                    *a.held.entry(attr.ino).or_default() += 1;
                }
            }
            (w, g) => panic!(
                "seed {}: {what}: the model says {w:?}, the file system {g:?}",
                self.seed
            ),
        }
    }

    /// A new object from an entry reply: its inode must be no inode the
    /// kernel knows, and a file's (inode, generation) never one handed out
    /// before. (An object the model still thinks named may have lost its
    /// name already: its removal, in another directory, has not returned.)
    fn born(
        &self,
        a: &mut ActorState,
        what: &str,
        (d, name): (Obj, &str),
        (attr, generation): (&Attr, u64),
        body: Body,
    ) {
        let mut m = self.model.lock_or_recover();
        if let Some(o) = m.by_ino.get(&attr.ino).filter(|o| m.objs[**o].lookups > 0) {
            panic!(
                "seed {}: {what}: inode {:#x} is already {:?}'s, which is alive (named {}, {} lookups)",
                self.seed, attr.ino, m.objs[*o].kind(), m.objs[*o].named, m.objs[*o].lookups
            );
        }
        if matches!(body, Body::File { .. }) {
            assert!(
                m.issued.insert((attr.ino, generation)),
                "seed {}: {what}: inode {:#x} generation {generation} was handed out before",
                self.seed,
                attr.ino
            );
        } else {
            assert_eq!(generation, 0, "{what}: a directory's generation");
        }
        let o = m.objs.len();
        m.objs.push(Object {
            ino: attr.ino,
            generation,
            body,
            named: true,
            lookups: 1,
            perm: attr.perm,
            uid: a.caller.uid,
            gid: a.caller.gid,
            mtime: None,
        });
        m.by_ino.insert(attr.ino, o);
        m.children_mut(d).insert(key(name), (name.to_string(), o));
        m.check_attr(o, attr, what);
        *a.held.entry(attr.ino).or_default() += 1;
    }
}

impl ActorState {
    fn name(&mut self) -> String {
        const BASES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
        let case = |s: &str, rng: &mut Rand| {
            s.chars()
                .map(|c| {
                    if rng.chance(50) {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect::<String>()
        };
        match self.rng.below(100) {
            0..=84 => {
                let b = BASES[self.rng.below(BASES.len() as u64) as usize];
                case(b, &mut self.rng)
            }
            85..=89 => case(&"l".repeat(NAME_BYTES_MAX), &mut self.rng),
            90..=93 => "l".repeat(NAME_BYTES_MAX + 1),
            94..=96 => "x*y".into(),
            _ => case("b c", &mut self.rng),
        }
    }

    /// Inodes held, of one kind (as the model says).
    fn held_of(&self, w: &World, kind: Kind) -> Vec<u64> {
        let m = w.model.lock_or_recover();
        self.held
            .keys()
            .copied()
            .filter(|ino| m.objs[m.by_ino[ino]].kind() == kind)
            .collect()
    }

    fn pick(&mut self, from: &[u64]) -> Option<u64> {
        (!from.is_empty()).then(|| from[self.rng.below(from.len() as u64) as usize])
    }

    /// A directory to work in: the group's root, one held, now and then the
    /// root of the groups or a file.
    fn dir(&mut self, w: &World) -> u64 {
        let dirs = self.held_of(w, Kind::Directory);
        match self.rng.below(100) {
            0..=2 => ROOT,
            3..=4 => self.pick(&self.held_of(w, Kind::File)).unwrap_or(top()),
            5..=39 => top(),
            _ => self.pick(&dirs).unwrap_or(top()),
        }
    }
}

// ---------------------------------------------------------------------------
// Checks at the end

/// The file system's lookup counts are the model's.
fn check_counts(vfs: &Vfs, m: &Model, seed: u64, checks: &mut Tally) {
    let known: Vec<&Object> = m.objs.iter().filter(|o| o.lookups > 0).collect();
    for o in &known {
        assert_eq!(
            vfs.lookups(o.ino),
            o.lookups,
            "seed {seed}: lookups of {:#x}",
            o.ino
        );
    }
    assert_eq!(
        vfs.known_inodes(),
        known.len(),
        "seed {seed}: inodes the kernel knows"
    );
    checks.hit("end: lookup counts as the model's");
}

/// Every file the model says is alive is in the group, by number and
/// incarnation, and no other.
fn check_files(live: &LiveGroup, m: &Model, seed: u64, checks: &mut Tally) {
    let numbers: BTreeSet<u32> = m
        .objs
        .iter()
        .filter_map(|o| match Ino::decode(o.ino) {
            Some(Ino::File { number, .. }) => Some(number),
            _ => None,
        })
        .collect();
    for number in numbers {
        let ino = Ino::File { slot: 0, number }.encode();
        let alive = m.by_ino.get(&ino).map(|o| &m.objs[*o]);
        let found = live.meta(|g| g.file_info(number)).unwrap();
        match (alive, found) {
            (Some(o), Ok(info)) => {
                assert_eq!(
                    u64::from(info.incarnation),
                    o.generation,
                    "seed {seed}: file {number}'s incarnation"
                );
            }
            (None, Err(_)) => checks.hit("end: files with neither a name nor a lookup are gone"),
            (o, f) => panic!(
                "seed {seed}: file {number}: the model has {:?}, the group {:?}",
                o.map(|o| (o.named, o.lookups)),
                f.map(|i| i.incarnation)
            ),
        }
    }
}

/// The tree, listed and read through the file system, is the model's
/// (`bytes`: every file's bytes, or only those of files synced since their
/// last change).
fn check_tree(
    vfs: &Vfs,
    m: &Model,
    seed: u64,
    every_byte: bool,
    unsure: &Unsure,
    checks: &mut Tally,
) {
    let mut stack = vec![0usize];
    while let Some(d) = stack.pop() {
        let sure = |k: &String| !unsure.names.contains(&(d, k.clone()));
        let listing = vfs.readdir(m.objs[d].ino, 2).unwrap();
        let got: BTreeMap<String, (String, u64)> = listing
            .iter()
            .map(|e| (key(&e.name), (e.name.clone(), e.ino)))
            .filter(|(k, _)| sure(k))
            .collect();
        let want: BTreeMap<String, (String, u64)> = m
            .children(d)
            .iter()
            .map(|(k, (n, c))| (k.clone(), (n.clone(), m.objs[*c].ino)))
            .filter(|(k, _)| sure(k))
            .collect();
        assert_eq!(got, want, "seed {seed}: directory {:#x}", m.objs[d].ino);
        for (k, (_, c)) in m.children(d) {
            if !sure(k) {
                continue;
            }
            let o = &m.objs[*c];
            let what = format!("seed {seed}: {:#x} at the end", o.ino);
            let attr = vfs.getattr(o.ino).unwrap();
            if unsure.objs.contains(c) {
                assert_eq!(attr.kind, o.kind(), "{what}: its kind");
                continue;
            }
            m.check_attr(*c, &attr, &what);
            match &o.body {
                Body::Dir { .. } => stack.push(*c),
                Body::File { data, clean } if every_byte || *clean => {
                    let back = vfs.read(o.ino, 0, data.len() as u32 + 1).unwrap();
                    assert!(back == *data, "{what}: its bytes are not the model's");
                    if !every_byte {
                        checks.hit("after a crash: a synced file's bytes as the model's");
                    }
                }
                Body::File { .. } => {}
            }
        }
    }
}

fn group_clean(live: &LiveGroup, seed: u64, when: &str) {
    let report = live.meta(|g| g.check(false)).unwrap().unwrap();
    assert!(
        report.problems.is_empty(),
        "seed {seed}: check {when}: {:?}",
        report.problems
    );
}

// ---------------------------------------------------------------------------
// A seed

struct SeedFigures {
    ops: u64,
    switches: u64,
    crashed: bool,
    /// The crash point armed mid-run was reached.
    died: bool,
    checks: Tally,
}

fn run_seed(seed: u64) -> SeedFigures {
    let mut rng = Rand::new(seed);
    let cfg = config(&mut rng);
    if trace() {
        eprintln!("seed {seed}: {cfg:?}");
    }
    let (sim, ids) = build(seed, &cfg);
    let shared = SharedSim::new(sim);
    let clock = Arc::new(SimClock {
        base: Instant::now(),
        ticks: AtomicU64::new(0),
    });
    let (live, vfs) = mount(&shared, &ids, &clock);
    let (total_mb, copies, au_bytes) = live
        .meta(|g| {
            (
                g.space().total_mb,
                u64::from(g.redundancy().copies()),
                g.au_bytes(),
            )
        })
        .unwrap();
    let world = World {
        seed,
        shared: shared.clone(),
        vfs,
        model: Mutex::new(Model::new(u64::from(cfg.logical))),
        locks: KernelLocks::default(),
        checks: Mutex::new(Tally::default()),
        ops: AtomicU64::new(0),
        bytes: (total_mb << 20) / copies,
        au_bytes,
        unsure: Mutex::default(),
    };
    shared.crash_after(cfg.crash_mid);
    let turnstile = Turnstile::new(seed).stay(cfg.stay);
    let actors: Vec<Actor<'_>> = (0..ACTORS)
        .map(|i| {
            let w = &world;
            let close_all = cfg.close_all;
            Box::new(move || actor(w, i, close_all)) as Actor<'_>
        })
        .collect();
    let panics = turnstile.run(actors);
    for (i, p) in panics.iter().enumerate() {
        if let Some(p) = p {
            panic!("seed {seed}: actor {i} panicked: {p}");
        }
    }
    let World {
        vfs,
        model,
        checks,
        ops,
        unsure,
        ..
    } = world;
    let mut m = model.into_inner().unwrap();
    let mut checks = checks.into_inner().unwrap();
    let unsure = unsure.into_inner().unwrap();
    // Lookups answered with an error, the dying process's too, were given
    // back: the counts are the model's either way.
    check_counts(&vfs, &m, seed, &mut checks);
    let died = shared.crashed();
    if !died {
        shared.crash_after(None);
        check_files(&live, &m, seed, &mut checks);
        check_tree(&vfs, &m, seed, true, &unsure, &mut checks);
        group_clean(&live, seed, "before the end");
    }

    // The file system ends; the kernel's lookups go with it.
    let everyone: Vec<Obj> = (0..m.objs.len()).collect();
    for o in everyone {
        m.objs[o].lookups = 0;
        m.settle(o);
    }
    let end = if died { End::Crash } else { cfg.end };
    match end {
        End::Unmount => {
            vfs.destroy();
            assert_eq!(vfs.known_inodes(), 0);
            check_files(&live, &m, seed, &mut checks);
            drop(vfs);
            Arc::try_unwrap(live)
                .unwrap_or_else(|_| panic!("seed {seed}: the group is still shared"))
                .dismount()
                .unwrap();
        }
        End::Crash => {
            drop(vfs);
            drop(live);
            let policy = [
                CrashPolicy::KEEP_ALL,
                CrashPolicy::LOSE_ALL,
                CrashPolicy::TEAR_ALL,
                CrashPolicy::MIXED,
            ][rng.below(4) as usize];
            shared.with(|sim| sim.crash(policy));
            shared.reset_handles();
            shared.crash_after(None);
        }
    }
    let (live, vfs) = mount(&shared, &ids, &clock);
    if !died {
        // (After a crash mid-run a file made by a change that failed may
        // be there or not: the tree below says which names may differ.)
        check_files(&live, &m, seed, &mut checks);
    }
    check_tree(&vfs, &m, seed, end == End::Unmount, &unsure, &mut checks);
    checks.hit(match (died, end) {
        (true, _) => "a crash mid-run: the tree as the model's where the model is sure",
        (false, End::Unmount) => "after an unmount: every byte as the model's",
        (false, End::Crash) => "after a crash: the tree as the model's",
    });
    group_clean(&live, seed, "after the remount");
    drop(vfs);
    Arc::try_unwrap(live)
        .unwrap_or_else(|_| panic!("seed {seed}: the group is still shared"))
        .dismount()
        .unwrap();
    SeedFigures {
        ops: ops.into_inner(),
        switches: turnstile.switches(),
        crashed: end == End::Crash,
        died,
        checks,
    }
}

fn seeds() -> (u64, u64) {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    if let Some(one) = env("CAIRN_VFS_SEED") {
        return (one, 1);
    }
    (
        env("CAIRN_VFS_FIRST_SEED").unwrap_or(0),
        env("CAIRN_VFS_SEEDS").unwrap_or(SEEDS_CI),
    )
}

#[test]
fn vfs_against_a_posix_model() {
    let (first, count) = seeds();
    let started = Instant::now();
    let totals = common::run_seeds(
        first,
        count,
        |seed| {
            format!("the file system differs from the POSIX model; replay with:\n  CAIRN_VFS_SEED={seed} cargo test -p cairn-vfs --test posix_model -- --nocapture")
        },
        run_seed,
    );
    let (mut ops, mut switches, mut crashed, mut died) = (0, 0, 0, 0);
    let mut checks = Tally::default();
    for f in &totals {
        ops += f.ops;
        switches += f.switches;
        crashed += u64::from(f.crashed);
        died += u64::from(f.died);
        checks.merge(&f.checks);
    }
    eprintln!(
        "vfs against a POSIX model: {count} seeds in {:.1} s ({} at a time): {ops} operations, {switches} scheduling points, {crashed} seeds ended by a crash ({died} of them mid-run)\nchecks run:\n{}",
        started.elapsed().as_secs_f64(),
        common::seed_workers(count),
        checks.lines()
    );
    if totals.len() >= 200 {
        let never = checks.missing(CHECKS);
        assert!(
            never.is_empty(),
            "{} seeds: these checks never ran: {never:?}",
            totals.len()
        );
    }
}
