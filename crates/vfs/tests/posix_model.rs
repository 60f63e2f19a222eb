//! The file system's core against a model of POSIX, under the interleaving
//! simulator (in the manner of `crates/store/tests/interleave.rs`).
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
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cairn_io::poison::Recover;
use cairn_io::{sched, DeviceId};
use cairn_io_sim::{geometry, Actor, CrashPolicy, SharedSim, SimEngine, Turnstile};
use cairn_store::group::{self, GroupSpec, LiveGroup, NewDisk, Redundancy};
use cairn_vfs::{Attr, Caller, Clock, Entry, Errno, Ino, Kind, Served, SetAttr, SetTime, Vfs};
use uuid::Uuid;

#[path = "../../store/tests/common/mod.rs"]
mod common;
use common::{Rand, Tally, MIB};

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
/// What the group takes as a name (`docs/serve.md`): printable ASCII but
/// these, no leading `+`, no space at either end, 96 bytes at most.
const NAME_BYTES_MAX: usize = 96;
const NAME_FORBIDDEN: &[char] = &['/', '\\', '*', '?', '"', '<', '>', '|', ':'];
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

fn key(name: &str) -> String {
    name.to_ascii_lowercase()
}

/// The group's naming rules, as the model states them.
fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n != "."
        && n != ".."
        && n.is_ascii()
        && n.len() <= NAME_BYTES_MAX
        && !n
            .chars()
            .any(|c| c.is_ascii_control() || NAME_FORBIDDEN.contains(&c))
        && !n.starts_with('+')
        && !n.starts_with(' ')
        && !n.ends_with(' ')
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
// The model

type Obj = usize;

#[derive(Debug, Clone)]
enum Body {
    Dir {
        /// Name key (lower case) → (spelling, object).
        children: BTreeMap<String, (String, Obj)>,
        parent: Obj,
        removed: bool,
    },
    File {
        data: Vec<u8>,
        /// Synced since its last change: its bytes survive a crash.
        clean: bool,
    },
}

#[derive(Debug, Clone)]
struct Object {
    ino: u64,
    generation: u64,
    body: Body,
    named: bool,
    /// Lookups the kernel holds (every actor's).
    lookups: u64,
    perm: u16,
    uid: u32,
    gid: u32,
    /// A modification time set explicitly, not changed since.
    mtime: Option<SystemTime>,
}

impl Object {
    fn alive(&self) -> bool {
        self.named || self.lookups > 0
    }
    fn kind(&self) -> Kind {
        match self.body {
            Body::Dir { .. } => Kind::Directory,
            Body::File { .. } => Kind::File,
        }
    }
    fn removed(&self) -> bool {
        matches!(self.body, Body::Dir { removed: true, .. })
    }
}

/// What an inode an actor names is, to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Root,
    Dir(Obj),
    File(Obj),
}

struct Model {
    objs: Vec<Object>,
    /// Inode → the living object that has it.
    by_ino: BTreeMap<u64, Obj>,
    /// Every file's (inode, generation) handed out.
    issued: BTreeSet<(u64, u64)>,
    sector: u64,
}

impl Model {
    fn new(sector: u64) -> Self {
        let (uid, gid) = (current_uid(), current_gid());
        Self {
            objs: vec![Object {
                ino: top(),
                generation: 0,
                body: Body::Dir {
                    children: BTreeMap::new(),
                    parent: 0,
                    removed: false,
                },
                named: true,
                lookups: 0,
                perm: 0o755,
                uid,
                gid,
                mtime: None,
            }],
            by_ino: BTreeMap::from([(top(), 0)]),
            issued: BTreeSet::new(),
            sector,
        }
    }

    fn node(&self, ino: u64) -> Node {
        if ino == ROOT {
            return Node::Root;
        }
        let o = *self
            .by_ino
            .get(&ino)
            .unwrap_or_else(|| panic!("the model has no inode {ino:#x}"));
        match self.objs[o].body {
            Body::Dir { .. } => Node::Dir(o),
            Body::File { .. } => Node::File(o),
        }
    }

    fn children(&self, d: Obj) -> &BTreeMap<String, (String, Obj)> {
        match &self.objs[d].body {
            Body::Dir { children, .. } => children,
            Body::File { .. } => unreachable!("a file has no children"),
        }
    }

    fn children_mut(&mut self, d: Obj) -> &mut BTreeMap<String, (String, Obj)> {
        match &mut self.objs[d].body {
            Body::Dir { children, .. } => children,
            Body::File { .. } => unreachable!("a file has no children"),
        }
    }

    fn child(&self, d: Obj, name: &str) -> Option<Obj> {
        self.children(d).get(&key(name)).map(|(_, o)| *o)
    }

    fn data(&self, o: Obj) -> &[u8] {
        match &self.objs[o].body {
            Body::File { data, .. } => data,
            Body::Dir { .. } => unreachable!("a directory has no bytes"),
        }
    }

    fn data_mut(&mut self, o: Obj) -> &mut Vec<u8> {
        let obj = &mut self.objs[o];
        obj.mtime = None;
        match &mut obj.body {
            Body::File { data, clean } => {
                *clean = false;
                data
            }
            Body::Dir { .. } => unreachable!("a directory has no bytes"),
        }
    }

    /// An object that lost its name or a lookup: dead when it has neither.
    fn settle(&mut self, o: Obj) {
        if !self.objs[o].alive() && self.by_ino.get(&self.objs[o].ino) == Some(&o) {
            self.by_ino.remove(&self.objs[o].ino);
        }
    }

    /// Take away the name `name` in `d` (its object loses its only name).
    fn unname(&mut self, d: Obj, name: &str) -> Obj {
        let (_, o) = self
            .children_mut(d)
            .remove(&key(name))
            .expect("invariant: the name is there");
        self.objs[o].named = false;
        if let Body::Dir { removed, .. } = &mut self.objs[o].body {
            *removed = true;
        }
        self.settle(o);
        o
    }

    /// A directory to look in or change: the errno the file system gives
    /// for an inode that is not one it may change names in.
    fn dir_for_change(&self, d: u64) -> Result<Obj, Errno> {
        match self.node(d) {
            Node::Root => Err(Errno::EPERM),
            Node::File(_) => Err(Errno::ENOTDIR),
            Node::Dir(o) => Ok(o),
        }
    }

    /// `name` in `d`, for a change: the name checked, then the directory.
    fn entry_for_change(&self, d: Obj, name: &str) -> Result<Option<Obj>, Errno> {
        if !valid_name(name) {
            return Err(Errno::EINVAL);
        }
        if self.objs[d].removed() {
            return Err(Errno::ENOENT);
        }
        Ok(self.child(d, name))
    }

    /// The attributes `stat` must show for `o` (times but an explicit
    /// modification time aside).
    fn check_attr(&self, o: Obj, a: &Attr, what: &str) {
        let obj = &self.objs[o];
        let blksize = match obj.body {
            Body::Dir { .. } => 4096,
            Body::File { .. } => self.sector.max(4096) as u32,
        };
        let size = match &obj.body {
            Body::Dir { .. } => 0,
            Body::File { data, .. } => data.len() as u64,
        };
        let nlink = if obj.kind() == Kind::Directory { 2 } else { 1 };
        let got = (
            a.ino, a.kind, a.size, a.perm, a.uid, a.gid, a.nlink, a.blksize,
        );
        let want = (
            obj.ino,
            obj.kind(),
            size,
            obj.perm,
            obj.uid,
            obj.gid,
            nlink,
            blksize,
        );
        assert_eq!(
            got, want,
            "{what}: attributes (ino, kind, size, perm, uid, gid, nlink, blksize)"
        );
        assert!(
            a.blocks * 512 >= size,
            "{what}: {} blocks hold {size} bytes",
            a.blocks
        );
        if let Some(t) = obj.mtime {
            assert_eq!(a.mtime, t, "{what}: the modification time set");
        }
    }
}

fn current_uid() -> u32 {
    // SAFETY: getuid cannot fail and touches no memory.
    unsafe { libc::getuid() }
}

fn current_gid() -> u32 {
    // SAFETY: as getuid.
    unsafe { libc::getgid() }
}

// ---------------------------------------------------------------------------
// The kernel's inode locks

/// Per inode: (shared holders, held exclusively). Who changes it: each
/// actor, around each operation; never held across a scheduling point.
#[derive(Default)]
struct KernelLocks(Mutex<BTreeMap<u64, (u32, bool)>>);

/// (inode, exclusively).
type LockSet = Vec<(u64, bool)>;

impl KernelLocks {
    fn free(held: &BTreeMap<u64, (u32, bool)>, want: &LockSet) -> bool {
        want.iter().all(|(ino, excl)| match held.get(ino) {
            None => true,
            Some((readers, writer)) => !*writer && (!*excl || *readers == 0),
        })
    }

    /// Take every lock of `want` at once (none while waiting: no order
    /// between actors can deadlock).
    fn acquire(&self, want: &LockSet) -> LocksHeld<'_> {
        let mut waited = false;
        loop {
            {
                let mut held = self.0.lock_or_recover();
                if Self::free(&held, want) {
                    for (ino, excl) in want {
                        let e = held.entry(*ino).or_default();
                        if *excl {
                            e.1 = true;
                        } else {
                            e.0 += 1;
                        }
                    }
                    break;
                }
            }
            waited = true;
            let may_go_on = || {
                self.0
                    .try_lock()
                    .map_or(true, |held| Self::free(&held, want))
            };
            assert!(
                sched::blocked_until(&may_go_on),
                "actors run under the turnstile"
            );
        }
        if waited {
            sched::resumed();
        }
        LocksHeld {
            locks: self,
            set: want.clone(),
        }
    }
}

struct LocksHeld<'a> {
    locks: &'a KernelLocks,
    set: LockSet,
}

impl Drop for LocksHeld<'_> {
    fn drop(&mut self) {
        let mut held = self.locks.0.lock_or_recover();
        for (ino, excl) in &self.set {
            let e = held.get_mut(ino).expect("invariant: held");
            if *excl {
                e.1 = false;
            } else {
                e.0 -= 1;
            }
            if *e == (0, false) {
                held.remove(ino);
            }
        }
    }
}

/// A lock set without repeats, each inode at its strongest.
fn lock_set(mut want: LockSet) -> LockSet {
    want.sort();
    let mut out: LockSet = Vec::new();
    for (ino, excl) in want {
        match out.last_mut() {
            Some(last) if last.0 == ino => last.1 |= excl,
            _ => out.push((ino, excl)),
        }
    }
    out
}

// ---------------------------------------------------------------------------
// The world the actors share

struct World {
    seed: u64,
    vfs: Vfs,
    model: Mutex<Model>,
    locks: KernelLocks,
    checks: Mutex<Tally>,
    ops: AtomicU64,
    /// The group's size after mirroring, bytes (what `statfs` counts).
    bytes: u64,
    au_bytes: u64,
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
// Operations, each as the kernel would send it

fn lookup(w: &World, a: &mut ActorState) {
    let d = a.dir(w);
    let name = if d == ROOT && a.rng.chance(50) {
        "vFs".to_string()
    } else {
        a.name()
    };
    // The directory, and what the name names (its attributes are checked).
    let want_locks = |m: &Model| {
        let mut set = vec![(d, false)];
        if let Node::Dir(o) = m.node(d) {
            if let Some(c) = m.child(o, &name) {
                set.push((m.objs[c].ino, false));
            }
        }
        set
    };
    w.with_locks(want_locks, || {
        let (want, removed) = {
            let m = w.model.lock_or_recover();
            match m.node(d) {
                Node::Root if name.eq_ignore_ascii_case(GROUP) => (Ok(0), false),
                Node::Root => (Err(Errno::ENOENT), false),
                Node::File(_) => (Err(Errno::ENOTDIR), false),
                Node::Dir(o) if m.objs[o].removed() => (Err(Errno::ENOENT), true),
                Node::Dir(o) => (m.child(o, &name).ok_or(Errno::ENOENT), false),
            }
        };
        let got = w.vfs.lookup(d, os(&name)).map(Entry::replied);
        w.say(
            a,
            &format!(
                "lookup {d:#x} {name:?} -> {:?}",
                got.as_ref().map(|g| g.0.ino)
            ),
        );
        w.check(if want.is_ok() {
            "lookup: found, as the model's"
        } else {
            "lookup: refused as the model says"
        });
        if removed {
            w.check("a removed directory the kernel knows answers ENOENT");
        }
        w.entry(
            a,
            &format!("lookup {name:?} in {d:#x}"),
            want,
            got,
            d != ROOT,
        );
    });
}

fn create(w: &World, a: &mut ActorState, dir: bool) {
    let d = a.dir(w);
    let name = a.name();
    let umask = [0, 0o022, 0o077][a.rng.below(3) as usize];
    let perm = [0o644, 0o600, 0o755, 0o4755, 0o1777][a.rng.below(5) as usize];
    let direct = a.rng.chance(30);
    w.with_locks(
        |_| vec![(d, true)],
        || {
            let (want, held_removed) = {
                let m = w.model.lock_or_recover();
                let want = m.dir_for_change(d).and_then(|o| match m.entry_for_change(o, &name)? {
                    Some(_) => Err(Errno::EEXIST),
                    None => Ok(o),
                });
                let held_removed = m.objs.iter().any(|o| o.removed() && o.lookups > 0);
                (want, held_removed)
            };
            let what = format!("{} {name:?} in {d:#x}", if dir { "mkdir" } else { "create" });
            let got = if dir {
                w.vfs
                    .mkdir(a.caller, d, os(&name), 0o040000 | perm, umask)
                    .map(Entry::replied)
            } else {
                let flags = if direct { libc::O_DIRECT } else { 0 };
                w.vfs
                    .create(a.caller, d, os(&name), 0o100000 | perm, umask, flags)
                    .map(|(e, opened)| {
                        assert_eq!(opened.direct, direct, "{what}: served direct");
                        e.replied()
                    })
            };
            w.say(a, &format!("{what} -> {:?}", got.as_ref().map(|g| g.0.ino)));
            match (want, got) {
                (Ok(parent), Ok((attr, generation))) => {
                    assert_eq!(
                        attr.perm,
                        (perm & !umask & 0o7777) as u16,
                        "seed {}: {what}: mode and umask",
                        w.seed
                    );
                    let body = if dir {
                        Body::Dir {
                            children: BTreeMap::new(),
                            parent,
                            removed: false,
                        }
                    } else {
                        Body::File {
                            data: Vec::new(),
                            clean: false,
                        }
                    };
                    w.born(a, &what, (parent, &name), (&attr, generation), body);
                    if dir {
                        if held_removed {
                            w.check("mkdir: a new inode while a removed directory the kernel knows holds its own");
                        }
                    } else {
                        w.check("create: a new inode");
                        *a.open.entry(attr.ino).or_default() += 1;
                    }
                }
                (Err(x), Err(y)) => assert_eq!(y, x, "seed {}: {what}", w.seed),
                (x, y) => panic!("seed {}: {what}: the model says {x:?}, the file system {:?}", w.seed, y.map(|g| g.0.ino)),
            }
        },
    );
}

fn unlink(w: &World, a: &mut ActorState) {
    let d = a.dir(w);
    let name = a.name();
    w.with_locks(
        |_| vec![(d, true)],
        || {
            let want = {
                let m = w.model.lock_or_recover();
                m.dir_for_change(d)
                    .and_then(|o| match m.entry_for_change(o, &name)? {
                        None => Err(Errno::ENOENT),
                        Some(c) if m.objs[c].kind() == Kind::Directory => Err(Errno::EISDIR),
                        Some(c) => Ok((o, c)),
                    })
            };
            let got = w.vfs.unlink(d, os(&name));
            w.say(a, &format!("unlink {name:?} in {d:#x} -> {got:?}"));
            let what = format!("seed {}: unlink {name:?} in {d:#x}", w.seed);
            assert_eq!(got, want.map(|_| ()), "{what}");
            if let Ok((o, c)) = want {
                let mut m = w.model.lock_or_recover();
                if m.objs[c].lookups > 0 {
                    w.check("unlink of a file the kernel knows");
                }
                m.unname(o, &name);
            }
        },
    );
}

fn rmdir(w: &World, a: &mut ActorState) {
    let d = a.dir(w);
    let name = a.name();
    let want_locks = |m: &Model| {
        let mut set = vec![(d, true)];
        if let Node::Dir(o) = m.node(d) {
            if let Some(c) = m.child(o, &name) {
                set.push((m.objs[c].ino, true));
            }
        }
        set
    };
    w.with_locks(want_locks, || {
        let want = {
            let m = w.model.lock_or_recover();
            m.dir_for_change(d)
                .and_then(|o| match m.entry_for_change(o, &name)? {
                    None => Err(Errno::ENOENT),
                    Some(c) if m.objs[c].kind() == Kind::File => Err(Errno::ENOTDIR),
                    Some(c) if !m.children(c).is_empty() => Err(Errno::ENOTEMPTY),
                    Some(c) => Ok((o, c)),
                })
        };
        let got = w.vfs.rmdir(d, os(&name));
        w.say(a, &format!("rmdir {name:?} in {d:#x} -> {got:?}"));
        assert_eq!(
            got,
            want.map(|_| ()),
            "seed {}: rmdir {name:?} in {d:#x}",
            w.seed
        );
        if let Ok((o, c)) = want {
            let mut m = w.model.lock_or_recover();
            if m.objs[c].lookups > 0 {
                w.check("rmdir of a directory the kernel knows");
            }
            m.unname(o, &name);
        }
    });
}

/// What a rename must answer, from the model (the file system's order of
/// checks: flags, directories, names, source, moving into itself, target).
fn rename_want(
    m: &Model,
    (d1, n1): (u64, &str),
    (d2, n2): (u64, &str),
    flags: u32,
) -> Result<(Obj, Obj, Obj, Option<Obj>), Errno> {
    if flags & (libc::RENAME_EXCHANGE | libc::RENAME_WHITEOUT) != 0 {
        return Err(Errno::EINVAL);
    }
    let o1 = m.dir_for_change(d1)?;
    let o2 = m.dir_for_change(d2)?;
    let source = m.entry_for_change(o1, n1)?;
    let target = m.entry_for_change(o2, n2)?;
    let s = source.ok_or(Errno::ENOENT)?;
    if m.objs[s].kind() == Kind::Directory {
        let mut at = o2;
        loop {
            if at == s {
                return Err(Errno::EINVAL);
            }
            match m.objs[at].body {
                Body::Dir { parent, .. } if at != 0 => at = parent,
                _ => break,
            }
        }
    }
    let target = target.filter(|t| *t != s);
    if let Some(t) = target {
        if flags & libc::RENAME_NOREPLACE != 0 {
            return Err(Errno::EEXIST);
        }
        match (m.objs[s].kind(), m.objs[t].kind()) {
            (Kind::Directory, Kind::Directory) if !m.children(t).is_empty() => {
                return Err(Errno::ENOTEMPTY)
            }
            (Kind::Directory, Kind::File) => return Err(Errno::ENOTDIR),
            (Kind::File, Kind::Directory) => return Err(Errno::EISDIR),
            _ => {}
        }
    }
    Ok((o1, o2, s, target))
}

fn rename(w: &World, a: &mut ActorState) {
    let d1 = a.dir(w);
    let d2 = if a.rng.chance(50) { d1 } else { a.dir(w) };
    let (n1, n2) = (a.name(), a.name());
    let flags = match a.rng.below(20) {
        0..=2 => libc::RENAME_NOREPLACE,
        3 => libc::RENAME_EXCHANGE,
        _ => 0,
    };
    let want_locks = |m: &Model| {
        let mut set = vec![(d1, true), (d2, true)];
        if d1 != d2 {
            set.push((RENAME_LOCK, true));
        }
        for (d, n) in [(d1, &n1), (d2, &n2)] {
            if let Node::Dir(o) = m.node(d) {
                if let Some(c) = m
                    .child(o, n)
                    .filter(|c| m.objs[*c].kind() == Kind::Directory)
                {
                    set.push((m.objs[c].ino, true));
                }
            }
        }
        set
    };
    w.with_locks(want_locks, || {
        let want = rename_want(&w.model.lock_or_recover(), (d1, &n1), (d2, &n2), flags);
        let got = w.vfs.rename(d1, os(&n1), d2, os(&n2), flags);
        let what = format!(
            "seed {}: rename {n1:?} in {d1:#x} to {n2:?} in {d2:#x} ({flags})",
            w.seed
        );
        w.say(a, &format!("{what} -> {got:?}"));
        assert_eq!(got, want.map(|_| ()), "{what}");
        match want {
            Err(_) => w.check("rename: refused as the model says"),
            Ok((o1, o2, s, target)) => {
                let mut m = w.model.lock_or_recover();
                if let Some(t) = target {
                    if m.objs[t].lookups > 0 && m.objs[t].kind() == Kind::File {
                        w.check("rename over a file the kernel knows");
                    }
                    m.unname(o2, &n2);
                }
                m.children_mut(o1).remove(&key(&n1));
                m.children_mut(o2).insert(key(&n2), (n2.clone(), s));
                if let Body::Dir { parent, .. } = &mut m.objs[s].body {
                    *parent = o2;
                }
            }
        }
    });
}

fn forget(w: &World, a: &mut ActorState) {
    let free: Vec<(u64, u64)> = a
        .held
        .iter()
        .map(|(ino, n)| (*ino, n - a.open.get(ino).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect();
    let Some(&(ino, n)) = free.get(a.rng.below(free.len() as u64) as usize) else {
        return;
    };
    let n = 1 + a.rng.below(n);
    // Given back before the call: from here the file system may let go.
    {
        let mut m = w.model.lock_or_recover();
        let o = m.by_ino[&ino];
        m.objs[o].lookups -= n;
        if m.objs[o].lookups == 0 && !m.objs[o].named && m.objs[o].kind() == Kind::File {
            w.check("forget: the last lookup of a file whose name went");
        }
        m.settle(o);
    }
    let held = a.held.get_mut(&ino).expect("invariant: held");
    *held -= n;
    if *held == 0 {
        a.held.remove(&ino);
    }
    w.say(a, &format!("forget {ino:#x} {n}"));
    w.vfs.forget(ino, n);
}

/// A file the actor holds, opened (as the kernel opens before it reads or
/// writes); `None` if it holds none.
fn opened_file(w: &World, a: &mut ActorState) -> Option<u64> {
    let f = a.pick(&a.held_of(w, Kind::File))?;
    if !a.open.contains_key(&f) {
        let direct = a.rng.chance(30);
        let flags = if direct { libc::O_DIRECT } else { 0 };
        let opened = w.with_locks(|_| vec![(f, false)], || w.vfs.open(f, flags));
        assert_eq!(
            opened.map(|o| o.direct),
            Ok(direct),
            "seed {}: open {f:#x}",
            w.seed
        );
        a.open.insert(f, 1);
    }
    Some(f)
}

fn unnamed(w: &World, f: u64) -> bool {
    let m = w.model.lock_or_recover();
    !m.objs[m.by_ino[&f]].named
}

fn read(w: &World, a: &mut ActorState) {
    let Some(f) = opened_file(w, a) else { return };
    let offset = a.rng.below(FILE_BYTES_MAX);
    let cap = if a.rng.chance(80) { 64 << 10 } else { 1 << 20 };
    let len = 1 + a.rng.below(cap) as u32;
    w.with_locks(
        |_| vec![(f, false)],
        || {
            let got = w.vfs.read(f, offset, len);
            let m = w.model.lock_or_recover();
            let data = m.data(m.by_ino[&f]);
            let from = (offset as usize).min(data.len());
            let to = (offset as usize + len as usize).min(data.len());
            w.say(a, &format!("read {f:#x} at {offset} {len} -> {:?}", got.as_ref().map(Vec::len)));
            let got = got.unwrap_or_else(|e| panic!("seed {}: read {f:#x}: {e}", w.seed));
            assert!(
                got == data[from..to],
                "seed {}: read {f:#x} at {offset}, {len} bytes: {} bytes back, not the model's {} (first difference at {:?})",
                w.seed,
                got.len(),
                to - from,
                got.iter().zip(&data[from..to]).position(|(x, y)| x != y)
            );
            w.check("read: bytes as the model's");
            if !m.objs[m.by_ino[&f]].named {
                w.check("read through an inode whose last name went");
            }
        },
    );
}

fn write(w: &World, a: &mut ActorState) {
    let Some(f) = opened_file(w, a) else { return };
    let len = match a.rng.below(100) {
        0..=69 => 1 + a.rng.below(64 << 10),
        70..=94 => 1 + a.rng.below(300 << 10),
        _ => 1 + a.rng.below(1100 << 10),
    };
    let offset = match a.rng.below(10) {
        0..=4 => {
            let size = {
                let m = w.model.lock_or_recover();
                m.data(m.by_ino[&f]).len() as u64
            };
            a.rng.below(size + 1)
        }
        5..=7 => a.rng.below(FILE_BYTES_MAX) / 4096 * 4096,
        _ => a.rng.below(FILE_BYTES_MAX),
    }
    .min(FILE_BYTES_MAX - len);
    let data = a.rng.bytes(len as usize);
    let flags = if a.rng.chance(10) { libc::O_DSYNC } else { 0 };
    w.with_locks(
        |_| vec![(f, true)],
        || {
            let got = w.vfs.write(f, offset, &data, flags);
            w.say(a, &format!("write {f:#x} at {offset} {len} -> {got:?}"));
            assert_eq!(
                got,
                Ok(len as u32),
                "seed {}: write {f:#x} at {offset}",
                w.seed
            );
            if unnamed(w, f) {
                w.check("write through an inode whose last name went");
            }
            let mut m = w.model.lock_or_recover();
            let o = m.by_ino[&f];
            let d = m.data_mut(o);
            let end = (offset + len) as usize;
            if d.len() < end {
                d.resize(end, 0);
            }
            d[offset as usize..end].copy_from_slice(&data);
        },
    );
}

fn setattr(w: &World, a: &mut ActorState) {
    let files = a.held_of(w, Kind::File);
    let ino = match a.rng.below(10) {
        0 => top(),
        1 => ROOT,
        2 => a.pick(&a.held_of(w, Kind::Directory)).unwrap_or(top()),
        _ => match a.pick(&files) {
            Some(f) => f,
            None => return,
        },
    };
    let mut set = SetAttr::default();
    if a.rng.chance(40) {
        set.size = Some(match a.rng.below(3) {
            0 => 0,
            1 => a.rng.below(FILE_BYTES_MAX),
            _ => {
                let m = w.model.lock_or_recover();
                match m.node(ino) {
                    Node::File(o) => (m.data(o).len() as u64).saturating_sub(a.rng.below(5000)),
                    _ => 0,
                }
            }
        });
    }
    if a.rng.chance(30) {
        set.mode = Some([0o600, 0o644, 0o2755, 0o1777][a.rng.below(4) as usize]);
    }
    if a.rng.chance(20) {
        set.uid = Some(2000 + a.rng.below(3) as u32);
        set.gid = Some(3000 + a.rng.below(3) as u32);
    }
    if a.rng.chance(30) {
        set.mtime = Some(if a.rng.chance(50) {
            SetTime::Now
        } else {
            SetTime::At(UNIX_EPOCH + Duration::from_secs(1_000_000_000 + a.rng.below(1 << 20)))
        });
    }
    let owner = set.mode.is_some() || set.uid.is_some() || set.gid.is_some();
    w.with_locks(
        |_| vec![(ino, true)],
        || {
            let want: Result<Option<Obj>, Errno> = {
                let m = w.model.lock_or_recover();
                match m.node(ino) {
                    Node::Root => {
                        if set.size.is_some() {
                            Err(Errno::EISDIR)
                        } else if owner {
                            Err(Errno::EPERM)
                        } else {
                            Ok(None)
                        }
                    }
                    Node::Dir(0) if set.size.is_some() => Err(Errno::EISDIR),
                    Node::Dir(0) if owner => Err(Errno::EPERM),
                    Node::Dir(o) if set.size.is_some() && o != 0 => Err(Errno::EISDIR),
                    Node::Dir(o) if m.objs[o].removed() => Err(Errno::ENOENT),
                    Node::Dir(o) | Node::File(o) => Ok(Some(o)),
                }
            };
            let got = w.vfs.setattr(ino, set);
            let what = format!("seed {}: setattr {ino:#x} {set:?}", w.seed);
            w.say(a, &format!("{what} -> {:?}", got.as_ref().map(|a| a.size)));
            match (want, got) {
                (Err(x), Err(y)) => assert_eq!(y, x, "{what}"),
                (Ok(None), Ok(attr)) => {
                    assert_eq!((attr.ino, attr.kind), (ROOT, Kind::Directory), "{what}")
                }
                (Ok(Some(o)), Ok(attr)) => {
                    let mut m = w.model.lock_or_recover();
                    if let Some(size) = set.size {
                        if size < m.data(o).len() as u64 && size % m.sector != 0 {
                            w.check("setattr: cut inside a sector");
                        }
                        m.data_mut(o).resize(size as usize, 0);
                    }
                    let is_dir = m.objs[o].kind() == Kind::Directory;
                    let obj = &mut m.objs[o];
                    if let Some(mode) = set.mode {
                        obj.perm = (mode & 0o7777) as u16;
                    }
                    obj.uid = set.uid.unwrap_or(obj.uid);
                    obj.gid = set.gid.unwrap_or(obj.gid);
                    if !is_dir {
                        match set.mtime {
                            Some(SetTime::At(t)) => obj.mtime = Some(t),
                            Some(SetTime::Now) => obj.mtime = None,
                            None => {}
                        }
                    }
                    m.check_attr(o, &attr, &what);
                }
                (x, y) => panic!("{what}: the model says {x:?}, the file system {y:?}"),
            }
        },
    );
}

fn getattr(w: &World, a: &mut ActorState) {
    let mut all: Vec<u64> = a.held.keys().copied().collect();
    all.extend([top(), ROOT]);
    let ino = a.pick(&all).expect("invariant: not empty");
    w.with_locks(
        |_| vec![(ino, false)],
        || {
            let got = w.vfs.getattr(ino);
            let m = w.model.lock_or_recover();
            let what = format!("seed {}: getattr {ino:#x}", w.seed);
            match m.node(ino) {
                Node::Root => assert_eq!(got.map(|a| a.ino), Ok(ROOT), "{what}"),
                Node::Dir(o) if m.objs[o].removed() => {
                    assert_eq!(got.map(|a| a.ino), Err(Errno::ENOENT), "{what}");
                    w.check("a removed directory the kernel knows answers ENOENT");
                }
                Node::Dir(o) | Node::File(o) => {
                    m.check_attr(o, &got.unwrap_or_else(|e| panic!("{what}: {e}")), &what)
                }
            }
        },
    );
}

fn fallocate(w: &World, a: &mut ActorState) {
    let Some(f) = opened_file(w, a) else { return };
    const KEEP: i32 = libc::FALLOC_FL_KEEP_SIZE;
    const PUNCH: i32 = libc::FALLOC_FL_PUNCH_HOLE;
    const ZERO: i32 = libc::FALLOC_FL_ZERO_RANGE;
    let mode = [0, KEEP, PUNCH | KEEP, ZERO, ZERO | KEEP][a.rng.below(5) as usize];
    let offset = a.rng.below(FILE_BYTES_MAX - 600 * 1024);
    let len = 1 + a.rng.below(600 * 1024);
    let end = offset + len;
    w.with_locks(
        |_| vec![(f, true)],
        || {
            let got = w.vfs.fallocate(f, offset, len, mode);
            let what = format!(
                "seed {}: fallocate {f:#x} at {offset} {len} mode {mode:#x}",
                w.seed
            );
            w.say(a, &format!("{what} -> {got:?}"));
            let mut m = w.model.lock_or_recover();
            let o = m.by_ino[&f];
            let size = m.data(o).len() as u64;
            let want = match mode {
                0 => {
                    if end > size {
                        m.data_mut(o).resize(end as usize, 0);
                    }
                    Ok(())
                }
                KEEP if end <= size => Ok(()),
                KEEP => Err(Errno::EOPNOTSUPP),
                _ => {
                    let keep = mode & KEEP != 0;
                    let stop = if keep { end.min(size) } else { end };
                    if !keep && end > size {
                        m.data_mut(o).resize(end as usize, 0);
                    }
                    if offset < stop {
                        m.data_mut(o)[offset as usize..stop as usize].fill(0);
                        w.check("fallocate: a punched or zeroed range");
                    }
                    Ok(())
                }
            };
            assert_eq!(got, want, "{what}");
        },
    );
}

fn sync(w: &World, a: &mut ActorState) {
    let Some(f) = opened_file(w, a) else { return };
    let datasync = a.rng.chance(30);
    w.with_locks(
        |_| vec![(f, false)],
        || {
            let got = w.vfs.fsync(f, datasync);
            w.say(a, &format!("fsync {f:#x} -> {got:?}"));
            assert_eq!(got, Ok(()), "seed {}: fsync {f:#x}", w.seed);
            let mut m = w.model.lock_or_recover();
            let o = m.by_ino[&f];
            if let Body::File { clean, .. } = &mut m.objs[o].body {
                *clean = true;
            }
        },
    );
    assert_eq!(w.vfs.fsyncdir(top()), Ok(()));
}

fn close(w: &World, a: &mut ActorState, f: u64) {
    w.with_locks(
        |_| vec![(f, false)],
        || {
            assert_eq!(w.vfs.flush(f), Ok(()), "seed {}: flush {f:#x}", w.seed);
            w.vfs.release(f);
        },
    );
    w.say(a, &format!("close {f:#x}"));
    let n = a.open.get_mut(&f).expect("invariant: open");
    *n -= 1;
    if *n == 0 {
        a.open.remove(&f);
    }
}

fn readdir(w: &World, a: &mut ActorState) {
    let d = a.dir(w);
    w.with_locks(
        |_| vec![(d, false)],
        || {
            let got = w.vfs.readdir(d, 0);
            let what = format!("seed {}: readdir {d:#x}", w.seed);
            let m = w.model.lock_or_recover();
            let want: Result<Vec<(String, u64, Kind)>, Errno> = match m.node(d) {
                Node::Root => Ok(vec![
                    (".".into(), ROOT, Kind::Directory),
                    ("..".into(), ROOT, Kind::Directory),
                    (GROUP.into(), top(), Kind::Directory),
                ]),
                Node::File(_) => Err(Errno::ENOTDIR),
                Node::Dir(o) if m.objs[o].removed() => Err(Errno::ENOENT),
                Node::Dir(o) => {
                    let up = match m.objs[o].body {
                        Body::Dir { parent, .. } if o != 0 => m.objs[parent].ino,
                        _ => ROOT,
                    };
                    let mut v = vec![
                        (".".into(), d, Kind::Directory),
                        ("..".into(), up, Kind::Directory),
                    ];
                    v.extend(
                        m.children(o)
                            .values()
                            .map(|(n, c)| (n.clone(), m.objs[*c].ino, m.objs[*c].kind())),
                    );
                    Ok(v)
                }
            };
            match (want, got) {
                (Err(x), Err(y)) => assert_eq!(y, x, "{what}"),
                (Ok(mut want), Ok(got)) => {
                    assert!(
                        got.windows(2).all(|e| e[0].cookie < e[1].cookie),
                        "{what}: cookies rise"
                    );
                    let mut names: Vec<(String, u64, Kind)> = got
                        .iter()
                        .map(|e| (e.name.clone(), e.ino, e.kind))
                        .collect();
                    assert_eq!(
                        names[..2.min(names.len())],
                        want[..2],
                        "{what}: \".\" and \"..\" first"
                    );
                    names[2..].sort();
                    want[2..].sort();
                    assert_eq!(names, want, "{what}");
                    drop(m);
                    if got.len() > 3 {
                        let at = 2 + a.rng.below(got.len() as u64 - 3) as usize;
                        let rest = w.vfs.readdir(d, got[at].cookie).unwrap();
                        assert_eq!(
                            rest,
                            got[at + 1..],
                            "{what}: resumed after {}",
                            got[at].cookie
                        );
                        w.check("readdir: resumed after a cookie");
                    }
                }
                (x, y) => panic!("{what}: the model says {x:?}, the file system {y:?}"),
            }
        },
    );
}

fn statfs(w: &World, a: &mut ActorState) {
    let mut all: Vec<u64> = a.held.keys().copied().collect();
    all.extend([top(), ROOT]);
    let ino = a.pick(&all).expect("invariant: not empty");
    let s = w.vfs.statfs(ino).unwrap();
    let what = format!("seed {}: statfs {ino:#x}", w.seed);
    assert!(
        [4096, w.au_bytes as u32].contains(&s.bsize),
        "{what}: {s:?}"
    );
    assert_eq!(s.blocks, w.bytes / u64::from(s.bsize), "{what}: {s:?}");
    assert_eq!(
        (s.frsize, s.namelen, s.files, s.ffree),
        (s.bsize, 48, 0, 0),
        "{what}"
    );
    assert!(s.bfree == s.bavail && s.bfree <= s.blocks, "{what}: {s:?}");
}

fn actor(w: &World, id: usize, close_all: bool) {
    let mut a = ActorState {
        id,
        rng: Rand::new(w.seed ^ (0xAC70 + id as u64) << 32),
        caller: Caller {
            uid: 1000 + id as u32,
            gid: 100 + id as u32,
        },
        held: BTreeMap::new(),
        open: BTreeMap::new(),
    };
    for _ in 0..OPS_PER_ACTOR {
        sched::yield_now();
        w.ops.fetch_add(1, Ordering::SeqCst);
        match a.rng.below(100) {
            0..=15 => lookup(w, &mut a),
            16..=25 => create(w, &mut a, false),
            26..=30 => create(w, &mut a, true),
            31..=37 => unlink(w, &mut a),
            38..=41 => rmdir(w, &mut a),
            42..=49 => rename(w, &mut a),
            50..=58 => forget(w, &mut a),
            59..=62 => getattr(w, &mut a),
            63..=67 => setattr(w, &mut a),
            68..=75 => read(w, &mut a),
            76..=85 => write(w, &mut a),
            86..=88 => fallocate(w, &mut a),
            89..=90 => sync(w, &mut a),
            91..=93 => {
                if let Some(f) = a.pick(&a.open.keys().copied().collect::<Vec<_>>()) {
                    close(w, &mut a, f);
                }
            }
            94..=97 => readdir(w, &mut a),
            _ => statfs(w, &mut a),
        }
    }
    if close_all {
        for f in a.open.clone().into_keys() {
            while a.open.contains_key(&f) {
                close(w, &mut a, f);
            }
        }
        while !a.held.is_empty() {
            forget(w, &mut a);
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
fn check_tree(vfs: &Vfs, m: &Model, seed: u64, every_byte: bool, checks: &mut Tally) {
    let mut stack = vec![0usize];
    while let Some(d) = stack.pop() {
        let listing = vfs.readdir(m.objs[d].ino, 2).unwrap();
        let mut got: Vec<(String, u64)> = listing.iter().map(|e| (e.name.clone(), e.ino)).collect();
        got.sort();
        let mut want: Vec<(String, u64)> = m
            .children(d)
            .values()
            .map(|(n, c)| (n.clone(), m.objs[*c].ino))
            .collect();
        want.sort();
        assert_eq!(got, want, "seed {seed}: directory {:#x}", m.objs[d].ino);
        for (_, c) in m.children(d).values() {
            let o = &m.objs[*c];
            let what = format!("seed {seed}: {:#x} at the end", o.ino);
            m.check_attr(*c, &vfs.getattr(o.ino).unwrap(), &what);
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
        vfs,
        model: Mutex::new(Model::new(u64::from(cfg.logical))),
        locks: KernelLocks::default(),
        checks: Mutex::new(Tally::default()),
        ops: AtomicU64::new(0),
        bytes: (total_mb << 20) / copies,
        au_bytes,
    };
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
        ..
    } = world;
    let mut m = model.into_inner().unwrap();
    let mut checks = checks.into_inner().unwrap();
    check_counts(&vfs, &m, seed, &mut checks);
    check_files(&live, &m, seed, &mut checks);
    check_tree(&vfs, &m, seed, true, &mut checks);
    group_clean(&live, seed, "before the end");

    // The file system ends; the kernel's lookups go with it.
    let everyone: Vec<Obj> = (0..m.objs.len()).collect();
    for o in everyone {
        m.objs[o].lookups = 0;
        m.settle(o);
    }
    match cfg.end {
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
        }
    }
    let (live, vfs) = mount(&shared, &ids, &clock);
    check_files(&live, &m, seed, &mut checks);
    check_tree(&vfs, &m, seed, cfg.end == End::Unmount, &mut checks);
    checks.hit(match cfg.end {
        End::Unmount => "after an unmount: every byte as the model's",
        End::Crash => "after a crash: the tree as the model's",
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
        crashed: cfg.end == End::Crash,
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
    let (mut ops, mut switches, mut crashed) = (0, 0, 0);
    let mut checks = Tally::default();
    for f in &totals {
        ops += f.ops;
        switches += f.switches;
        crashed += u64::from(f.crashed);
        checks.merge(&f.checks);
    }
    eprintln!(
        "vfs against a POSIX model: {count} seeds in {:.1} s ({} at a time): {ops} operations, {switches} scheduling points, {crashed} seeds ended by a crash\nchecks run:\n{}",
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
