//! Disk groups on simulated disks: the deterministic crash simulation the
//! issue requires, plus targeted scenarios (mirror fallback and repair, disk
//! loss, no space, zeros where nothing was written).
//!
//! The simulation: a seed picks the disks (count, sizes, failure groups,
//! logical and physical sector size), the redundancy and AU size, then
//! drives random operations (create, write, sync, resize, delete, mkdir,
//! alias, remount, disk loss) and crashes at a random point of a random
//! operation: every request after a random budget fails, and the simulator
//! then keeps, loses or tears each write that was not flushed (torn at the
//! physical sector: 512 bytes on 512n disks). In a mirrored group a seed
//! may also fail the disks of one failure group: transient read and write
//! errors, misdirected writes and bit rot. The group is mounted again and
//! checked against a model kept apart from the group (never rebuilt from
//! what the group lists): every file whose operation was acknowledged
//! exists with its size, and nothing else is listed; every sector holds
//! either its synced content or one of the writes made to it since; the
//! directories and aliases are exactly those acknowledged (an operation a
//! crash cut may be there or not, whole); no AU is leaked or owned twice
//! (`check` clean).
//!
//! `CAIRN_SIM_SEEDS` sets how many seeds (CI default below) and
//! `CAIRN_SIM_FIRST_SEED` where they start; `CAIRN_SIM_SEED` replays one; a failure prints the command that replays it.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use cairn_format::DiskLabel;
use cairn_io::{DeviceId, IoEngine};
use cairn_io_sim::{geometry, CrashAfter, CrashPolicy, FaultEvent, SimEngine};
use cairn_store::group::{
    self, CreateOptions, Group, GroupError, GroupSelector, GroupSpec, NewDisk, Redundancy,
};
use cairn_store::labeling::{write_label, LabelSpec};
use cairn_store::names::GroupPath;
use uuid::Uuid;

#[path = "../common/mod.rs"]
mod common;
mod scenarios;
use common::{Rand, Tally};

const MIB: u64 = 1 << 20;
const SECTOR: u64 = 4096;
/// Seeds per CI run (~50 s on 2 cores, two at a time); `CAIRN_SIM_SEEDS`
/// raises it for a long run.
const SEEDS_CI: u64 = 3000;
const OPS_PER_SEED: usize = 24;

#[derive(Debug, Clone)]
struct Config {
    disks: Vec<(u64, String)>,
    redundancy: Redundancy,
    au_bytes: u64,
    logical: u32,
    /// The device's atomic unit: a crash tears unflushed writes at it.
    physical: u32,
    faults: Faults,
}

/// The faults a mirrored seed injects on the disks of one failure group
/// (so a copy of everything survives on the others): each kind on or off.
#[derive(Debug, Clone, Default)]
struct Faults {
    /// The failure group hit; `None`: no faults.
    victim: Option<String>,
    read_errors: bool,
    write_errors: bool,
    misdirect: bool,
    rot: bool,
}

impl Faults {
    /// Data may be damaged without a reader being told.
    fn silent(&self) -> bool {
        self.misdirect || self.rot
    }
}

fn config(rng: &mut Rand) -> Config {
    let redundancy = match rng.below(3) {
        0 => Redundancy::External,
        1 => Redundancy::Normal,
        _ => Redundancy::High,
    };
    let fgs = u64::from(redundancy.copies()) + rng.below(2);
    let count = fgs + rng.below(3);
    let disks = (0..count)
        .map(|i| (64 * MIB + rng.below(4) * 32 * MIB, format!("FG{}", i % fgs)))
        .collect();
    let au_bytes = if rng.chance(70) { MIB } else { 2 * MIB };
    let logical = if rng.chance(50) { 512 } else { 4096 };
    // 512n disks: a crash tears 4 KiB writes (metadata blocks, data
    // sectors) at 512-byte sectors.
    let physical = if logical == 512 && rng.chance(50) {
        512
    } else {
        4096
    };
    // Half the mirrored seeds fail one failure group's disks.
    let faults = if redundancy != Redundancy::External && rng.chance(50) {
        let mut f = Faults {
            victim: Some(format!("FG{}", rng.below(fgs))),
            read_errors: rng.chance(50),
            write_errors: rng.chance(50),
            misdirect: rng.chance(35),
            rot: rng.chance(35),
        };
        if !(f.read_errors || f.write_errors || f.silent()) {
            f.read_errors = true;
        }
        f
    } else {
        Faults::default()
    };
    Config {
        disks,
        redundancy,
        au_bytes,
        logical,
        physical,
        faults,
    }
}

fn build(seed: u64, cfg: &Config) -> (SimEngine, Vec<DeviceId>) {
    let mut sim = SimEngine::new(seed, 64);
    let mut ids = Vec::new();
    for (i, (size, _)) in cfg.disks.iter().enumerate() {
        let d = sim.add_disk(geometry(*size, cfg.logical, cfg.physical, 512 << 10));
        write_label(
            &mut sim,
            d,
            &LabelSpec {
                label: DiskLabel::parse(&format!("D{i}")).unwrap(),
                disk_uuid: Uuid::from_u128(u128::from(seed) << 16 | i as u128),
                now_unix_seconds: 1_763_700_000,
                generation: 1,
            },
        )
        .unwrap();
        ids.push(d);
    }
    (sim, ids)
}

fn create_group<'e>(
    engine: &'e mut dyn IoEngine,
    ids: &[DeviceId],
    cfg: &Config,
    seed: u64,
) -> Group<'e> {
    let disks: Vec<NewDisk> = ids
        .iter()
        .zip(&cfg.disks)
        .map(|(d, (_, fg))| NewDisk {
            device: *d,
            failgroup: Some(fg.clone()),
        })
        .collect();
    group::create(
        engine,
        &disks,
        &GroupSpec {
            name: "SIM".into(),
            redundancy: cfg.redundancy,
            au_bytes: cfg.au_bytes,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1_763_700_000,
            group_uuid: Uuid::from_u128(0xC0FFEE << 64 | u128::from(seed)),
        },
    )
    .unwrap()
}

fn path(name: &str) -> GroupPath {
    GroupPath::parse(&format!("+SIM/{name}")).unwrap()
}

/// What a file must read as.
#[derive(Debug, Clone)]
struct ModelFile {
    number: u32,
    size: u64,
    /// Content as of the last completed sync.
    durable: Vec<u8>,
    /// Writes since then (offset, data): each may or may not have landed.
    pending: Vec<(u64, Vec<u8>)>,
    /// Sectors a crash left uncertain: writes that were in flight or not yet
    /// synced may have reached some mirror copies and not others, so until a
    /// synced write covers the sector, any of these is an allowed content.
    maybe: BTreeMap<u64, Vec<Vec<u8>>>,
}

impl ModelFile {
    fn new(number: u32, size: u64) -> Self {
        Self {
            number,
            size,
            durable: vec![0; size as usize],
            pending: Vec::new(),
            maybe: BTreeMap::new(),
        }
    }

    fn sync(&mut self) {
        for (off, data) in &self.pending {
            let end = off + data.len() as u64;
            let covered: Vec<u64> = self.maybe.range(*off..end).map(|(k, _)| *k).collect();
            for k in covered {
                self.maybe.remove(&k);
            }
        }
        self.durable = self.latest();
        self.pending.clear();
    }

    /// A crash: what was not synced becomes uncertain, each `unit` (the
    /// device's atomic write) on its own.
    fn crashed(&mut self, unit: u64) {
        for (off, data) in std::mem::take(&mut self.pending) {
            for (i, sector) in data.chunks(unit as usize).enumerate() {
                self.maybe
                    .entry(off + i as u64 * unit)
                    .or_default()
                    .push(sector.to_vec());
            }
        }
    }

    /// A resize commits only what it depends on (the zeros it writes):
    /// earlier writes stay pending, cut to the new size.
    fn resize(&mut self, new: u64) {
        self.pending.retain_mut(|(off, data)| {
            data.truncate(new.saturating_sub(*off) as usize);
            !data.is_empty()
        });
        self.durable.resize(new as usize, 0);
        self.size = new;
        let beyond: Vec<u64> = self.maybe.range(new..).map(|(k, _)| *k).collect();
        for k in beyond {
            self.maybe.remove(&k);
        }
    }

    fn latest(&self) -> Vec<u8> {
        let mut v = self.durable.clone();
        for (off, data) in &self.pending {
            v[*off as usize..*off as usize + data.len()].copy_from_slice(data);
        }
        v
    }
}

#[derive(Debug, Default, Clone)]
struct Model {
    files: BTreeMap<String, ModelFile>,
    dirs: Vec<String>,
    /// Aliases in the root directory and the file number each names.
    aliases: BTreeMap<String, u32>,
    /// The file the last operation worked on: after a crash in it, only that
    /// file may differ from the model.
    touched: Option<String>,
    /// The file a copy in was filling, as it is once named.
    copied: Option<ModelFile>,
}

impl Model {
    fn sync(&mut self) {
        for f in self.files.values_mut() {
            f.sync();
        }
    }

    fn crashed(&mut self, unit: u64) {
        for f in self.files.values_mut() {
            f.crashed(unit);
        }
    }
}

/// Every `unit` of `actual`, read at `at`, is the durable content or one of
/// the pending writes (or, after a crash, one it left uncertain).
fn sector_ok(file: &ModelFile, at: u64, actual: &[u8], unit: u64) -> Result<(), String> {
    for (s, chunk) in actual.chunks(unit as usize).enumerate() {
        let off = at + s as u64 * unit;
        let range = off as usize..off as usize + chunk.len();
        if file.durable.get(range.clone()) == Some(chunk) {
            continue;
        }
        let pending_match = file.pending.iter().any(|(w_off, data)| {
            *w_off <= off && off + chunk.len() as u64 <= *w_off + data.len() as u64 && {
                let start = (off - w_off) as usize;
                &data[start..start + chunk.len()] == chunk
            }
        });
        let maybe_match = file
            .maybe
            .get(&off)
            .is_some_and(|c| c.iter().any(|v| v.as_slice() == chunk));
        if !pending_match && !maybe_match {
            let zeros = chunk.iter().all(|b| *b == 0);
            let halves: Vec<bool> = chunk
                .chunks(512)
                .enumerate()
                .map(|(i, c)| {
                    file.durable[off as usize + i * 512..off as usize + i * 512 + c.len()] == *c
                        || file
                            .maybe
                            .get(&off)
                            .is_some_and(|m| m.iter().any(|v| &v[i * 512..i * 512 + c.len()] == c))
                })
                .collect();
            return Err(format!(
                "file {} sector at {off}: neither synced nor a pending write (zeros {zeros}, per-512 known {halves:?})",
                file.number
            ));
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Create,
    /// A copy in: an unnamed file filled, then named.
    Copy,
    Write,
    Sync,
    Resize,
    Delete,
    Mkdir,
    Alias,
    /// A file system's rename: to a new name, or over another file (which
    /// goes), in one transaction.
    Rename,
    Remount,
    LoseDisk,
}

fn pick_op(rng: &mut Rand) -> Op {
    match rng.below(100) {
        0..=14 => Op::Create,
        15..=19 => Op::Copy,
        20..=49 => Op::Write,
        50..=59 => Op::Sync,
        60..=69 => Op::Resize,
        70..=79 => Op::Delete,
        80..=84 => Op::Mkdir,
        85..=86 => Op::Alias,
        87..=89 => Op::Rename,
        90..=96 => Op::Remount,
        _ => Op::LoseDisk,
    }
}

/// Apply one operation to the group and, when it succeeds, to the model.
fn apply(
    g: &mut Group<'_>,
    m: &mut Model,
    rng: &mut Rand,
    op: Op,
    crashing: bool,
) -> Result<(), GroupError> {
    let file_names: Vec<String> = m.files.keys().cloned().collect();
    let pick = |rng: &mut Rand| {
        file_names
            .get(rng.below(file_names.len() as u64) as usize)
            .cloned()
    };
    match op {
        Op::Create => {
            let name = format!("f{}", rng.below(40));
            let size = (1 + rng.below(64)) * 32 * 1024;
            let dir = if !m.dirs.is_empty() && rng.chance(30) {
                Some(m.dirs[rng.below(m.dirs.len() as u64) as usize].clone())
            } else {
                None
            };
            let full = dir.map_or(name.clone(), |d| format!("{d}/{name}"));
            m.touched = Some(full.clone());
            // Half the files have checksum maps, made, resized, moved and
            // deleted with them.
            let options = CreateOptions {
                checksums: Some(rng.chance(50)),
                ..CreateOptions::default()
            };
            if m.files.contains_key(&full) {
                assert!(matches!(
                    g.create_file(&path(&full), size, &options),
                    Err(GroupError::Exists(_))
                ));
                return Ok(());
            }
            if trace() {
                eprintln!("  create {full} size {size}");
            }
            match g.create_file(&path(&full), size, &options) {
                Ok(info) => {
                    assert_eq!(info.size_bytes, size);
                    m.files.insert(full, ModelFile::new(info.number, size));
                    Ok(())
                }
                Err(GroupError::NoSpace(_)) if !crashing => Ok(()),
                Err(e) => Err(e),
            }
        }
        Op::Copy => {
            let full = format!("c{}", rng.below(20));
            m.touched = Some(full.clone());
            m.copied = None;
            if m.files.contains_key(&full) || m.dirs.contains(&full) {
                assert!(g.check_name_free(&path(&full)).is_err());
                return Ok(());
            }
            let size = (1 + rng.below(48)) * 32 * 1024;
            let data = rng.bytes(size as usize);
            if trace() {
                eprintln!("  copy in {full} size {size}");
            }
            let options = CreateOptions {
                checksums: Some(rng.chance(50)),
                ..CreateOptions::default()
            };
            let f = match g.create_unnamed(size, &options) {
                Ok(f) => f,
                Err(GroupError::NoSpace(_)) if !crashing => return Ok(()),
                Err(e) => return Err(e),
            };
            // What the file holds if the crash comes after its name: all of
            // it (publish's commit flushes the data before the name).
            let mut whole = ModelFile::new(f.number, size);
            whole.durable = data.clone();
            m.copied = Some(whole.clone());
            g.write(f.number, 0, &data)?;
            g.publish(f.number, &path(&full), size)?;
            m.files.insert(full, whole);
            Ok(())
        }
        Op::Write => {
            let Some(name) = pick(rng) else { return Ok(()) };
            m.touched = Some(name.clone());
            let f = m.files.get(&name).unwrap().clone();
            let sectors = f.size / SECTOR;
            let first = rng.below(sectors);
            let count = 1 + rng.below((sectors - first).min(48));
            let data = rng.bytes((count * SECTOR) as usize);
            if trace() {
                eprintln!(
                    "  write {name} (file {}) at {} len {}",
                    f.number,
                    first * SECTOR,
                    data.len()
                );
            }
            // Recorded before the write: one cut short by a crash may still
            // have landed, in part or on some copies.
            m.files
                .get_mut(&name)
                .unwrap()
                .pending
                .push((first * SECTOR, data.clone()));
            g.write(f.number, first * SECTOR, &data)
        }
        Op::Sync => {
            g.sync()?;
            m.sync();
            Ok(())
        }
        Op::Resize => {
            let Some(name) = pick(rng) else { return Ok(()) };
            m.touched = Some(name.clone());
            let new = (1 + rng.below(80)) * 32 * 1024;
            if trace() {
                eprintln!("  resize {name} from {} to {new}", m.files[&name].size);
            }
            match g.resize(&path(&name), new) {
                Ok(info) => {
                    assert_eq!(info.size_bytes, new);
                    m.files.get_mut(&name).unwrap().resize(new);
                    Ok(())
                }
                Err(GroupError::NoSpace(_)) if !crashing => Ok(()),
                Err(e) => Err(e),
            }
        }
        Op::Delete => {
            let Some(name) = pick(rng) else { return Ok(()) };
            m.touched = Some(name.clone());
            // The model as after it, first: a crash may leave either.
            let number = m.files.remove(&name).map(|f| f.number);
            m.aliases.retain(|_, n| Some(*n) != number);
            g.remove(&path(&name))
        }
        Op::Mkdir => {
            let name = format!("d{}", rng.below(4));
            if m.dirs.contains(&name) || m.files.contains_key(&name) {
                return Ok(());
            }
            m.dirs.push(name.clone());
            g.mkdir(&path(&name), false)
        }
        Op::Alias => {
            let Some(name) = pick(rng) else { return Ok(()) };
            m.touched = Some(name.clone());
            let alias = format!("a{}", rng.below(1000));
            if m.aliases.contains_key(&alias) {
                let err = g.mkalias(&path(&name), &path(&alias)).unwrap_err();
                assert!(matches!(err, GroupError::Exists(_)), "{err}");
                return Ok(());
            }
            m.aliases.insert(alias.clone(), m.files[&name].number);
            g.mkalias(&path(&name), &path(&alias))
        }
        Op::Rename => {
            // Names in the root (id 0), as a file system would give them.
            let roots: Vec<String> = file_names
                .iter()
                .filter(|n| !n.contains('/'))
                .cloned()
                .collect();
            let Some(name) = roots
                .get(rng.below(roots.len().max(1) as u64) as usize)
                .cloned()
            else {
                return Ok(());
            };
            let target = if rng.chance(50) && roots.len() > 1 {
                roots[rng.below(roots.len() as u64) as usize].clone()
            } else {
                format!("f{}", rng.below(40))
            };
            if m.dirs.contains(&target) {
                return Ok(());
            }
            m.touched = Some(name.clone());
            if trace() {
                eprintln!("  rename {name} over {target}");
            }
            let replaced = (name != target)
                .then(|| m.files.get(&target).map(|f| f.number))
                .flatten();
            // The replaced file may be in use (a file system's reader has
            // it): it then loses its names but keeps its data until let go.
            let in_use = rng.chance(50);
            let incarnation = replaced.map(|n| g.file_info(n).unwrap().incarnation);
            let retired =
                g.rename_in((0, &name), (0, &target), false, &|_, _| in_use, &|_| false)?;
            assert_eq!(
                retired,
                match replaced {
                    None => group::Retired::Nothing,
                    Some(n) if in_use => group::Retired::KeptOpen(n),
                    Some(n) => group::Retired::Deleted(n),
                }
            );
            if let (Some(n), Some(i), true) = (replaced, incarnation, in_use) {
                if rng.chance(50) {
                    // Let go of (else the next mount drops it).
                    g.drop_unnamed(n, i)?;
                }
            }
            if name != target {
                let f = m.files.remove(&name).unwrap();
                m.files.insert(target, f);
                m.aliases.retain(|_, n| Some(*n) != replaced);
            }
            Ok(())
        }
        Op::Remount | Op::LoseDisk => Ok(()),
    }
}

/// What a seed's faults let the group differ from the model in: silent
/// damage on the disks of `victims` (their labels), which a reader's own
/// check passes over; and what `check` may find there (`found`: silent
/// damage on a metadata copy, or a copy a read error kept it from reading).
struct Damage {
    silent: bool,
    found: bool,
    victims: Vec<String>,
}

/// Read every model file back and compare; the names listed are exactly
/// the model's; then a clean check.
fn verify(
    g: &mut Group<'_>,
    m: &Model,
    damage: &Damage,
    unit: u64,
    checks: &mut Tally,
    context: &str,
) {
    let listed = group_files(g);
    let modelled: Vec<&String> = m.files.keys().collect();
    assert_eq!(
        listed.keys().collect::<Vec<_>>(),
        modelled,
        "{context}: the files listed are not those acknowledged"
    );
    let (dirs, aliases) = root_names(g);
    let mut want_dirs = m.dirs.clone();
    want_dirs.sort();
    assert_eq!(dirs, want_dirs, "{context}: directories");
    assert_eq!(aliases, m.aliases, "{context}: aliases");
    checks.hit("names: files, directories and aliases listed are the model's");
    let au = g.au_bytes();
    for (name, f) in &m.files {
        let info = g
            .open(&path(name))
            .unwrap_or_else(|e| panic!("{context}: {name} vanished: {e}"));
        assert_eq!(info.size_bytes, f.size, "{context}: {name} size");
        assert_eq!(info.number, f.number, "{context}: {name} is another file");
        // An AU at a time: one piece per read, so a reader's check that
        // rejects one copy moves to the next copy of that piece alone.
        let mut at = 0;
        while at < f.size {
            let len = au.min(f.size - at);
            let mut buf = vec![0u8; len as usize];
            let read = if damage.silent {
                g.read_checked(f.number, at, &mut buf, &|b| {
                    sector_ok(f, at, b, unit).is_ok()
                })
            } else {
                g.read(f.number, at, &mut buf)
            };
            read.unwrap_or_else(|e| panic!("{context}: read {name} at {at}: {e}"));
            if let Err(e) = sector_ok(f, at, &buf, unit) {
                panic!("{context}: {name}: {e}");
            }
            checks.hit(if damage.silent {
                "reads: a checked read (silent damage possible) compared with the model"
            } else {
                "reads: a plain read compared with the model"
            });
            at += len;
        }
    }
    let report = g.check(false).unwrap();
    // A metadata copy on a faulted disk, damaged or unreadable, is the one
    // problem `check` may find.
    let unexplained: Vec<_> = report
        .problems
        .iter()
        .filter(|p| {
            !(damage.found
                && damage
                    .victims
                    .iter()
                    .any(|l| names_disk(&p.location, l) || names_disk(&p.what, l)))
        })
        .collect();
    assert!(
        unexplained.is_empty(),
        "{context}: check found {unexplained:?}"
    );
    if !report.problems.is_empty() {
        checks.hit("check: each problem found is on a faulted disk");
    }
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

/// The root's directories (sorted) and aliases (name → file number), as
/// the group lists them.
fn root_names(g: &Group<'_>) -> (Vec<String>, BTreeMap<String, u32>) {
    let root = g.list(&GroupPath::parse("+SIM").unwrap()).unwrap();
    let mut dirs: Vec<String> = root
        .iter()
        .filter(|e| e.kind == group::AliasKind::Directory)
        .map(|e| e.name.clone())
        .collect();
    dirs.sort();
    let aliases = root
        .iter()
        .filter(|e| e.kind == group::AliasKind::Alias)
        .filter_map(|e| Some((e.name.clone(), e.file.as_ref()?.number)))
        .collect();
    (dirs, aliases)
}

/// Every file name in the group (directories walked), with its info.
fn group_files(g: &Group<'_>) -> BTreeMap<String, group::FileInfo> {
    let mut out = BTreeMap::new();
    let mut stack = vec![String::new()];
    while let Some(dir) = stack.pop() {
        let listing = g
            .list(&GroupPath::parse(&format!("+SIM/{dir}")).unwrap())
            .unwrap();
        for entry in listing {
            let name = if dir.is_empty() {
                entry.name.clone()
            } else {
                format!("{dir}/{}", entry.name)
            };
            match (entry.kind, entry.file) {
                (group::AliasKind::Directory, _) => stack.push(name),
                (group::AliasKind::File, Some(info)) => {
                    out.insert(name, info);
                }
                _ => {}
            }
        }
    }
    out
}

/// After a crash in `op`, which touched `before.touched`, the group may show
/// that file as it was before the operation or as after it; every other file
/// must match the model exactly. Returns the model to carry on with.
fn settle(g: &Group<'_>, before: &Model, after: &Model, op: Op, checks: &mut Tally) -> Model {
    // Content: the operation died before it returned, so whatever it would
    // have made durable (a sync, the barrier flush of a metadata commit) may
    // not be. Only an interrupted write adds content of its own.
    let mut base = if op == Op::Write { after } else { before };
    let touched = after.touched.clone();
    let actual = group_files(g);
    if op == Op::Rename {
        // All or nothing: every name names what it did before, or what it
        // does after (never a source gone and its target not yet there,
        // nor a replaced file half-deleted under a name).
        let numbers = |m: &BTreeMap<String, u32>| m.clone();
        let seen: BTreeMap<String, u32> =
            actual.iter().map(|(n, i)| (n.clone(), i.number)).collect();
        let of = |m: &Model| -> BTreeMap<String, u32> {
            m.files.iter().map(|(n, f)| (n.clone(), f.number)).collect()
        };
        if numbers(&seen) == of(after) {
            base = after;
        } else {
            assert_eq!(
                seen,
                of(before),
                "after a crash in a rename: neither the names before nor after"
            );
        }
        let mut model = base.clone();
        model.touched = None;
        model.aliases = settled_aliases(g, before, after, op, checks);
        return model;
    }
    let mut model = Model::default();
    for (name, info) in &actual {
        let is_touched = touched.as_deref() == Some(name.as_str());
        let mut f = match base.files.get(name) {
            Some(f) => f.clone(),
            // A copy is named only with all its data: whole, or absent.
            None if is_touched && op == Op::Copy => after
                .copied
                .clone()
                .unwrap_or_else(|| panic!("after a crash in a copy: {name} was never filled")),
            None => {
                assert!(
                    is_touched && op == Op::Create,
                    "after a crash in {op:?}: unexpected file {name}"
                );
                ModelFile::new(info.number, info.size_bytes)
            }
        };
        if f.size != info.size_bytes {
            assert!(
                is_touched && op == Op::Resize,
                "after a crash in {op:?}: {name} is {} bytes, expected {}",
                info.size_bytes,
                f.size
            );
            f.resize(info.size_bytes);
        }
        model.files.insert(name.clone(), f);
    }
    for name in base.files.keys().filter(|n| !actual.contains_key(*n)) {
        assert!(
            touched.as_deref() == Some(name.as_str())
                && matches!(op, Op::Delete | Op::Create | Op::Copy),
            "after a crash in {op:?}: {name} is gone"
        );
    }
    // Directories and aliases from the model, never from the listing: the
    // crash may leave the operation it cut done or not, and nothing else
    // may differ (a lost mkdir or mkalias acknowledged before shows here).
    let (dirs, _) = root_names(g);
    let sorted = |m: &Model| {
        let mut d = m.dirs.clone();
        d.sort();
        d
    };
    if op == Op::Mkdir && sorted(before) != sorted(after) {
        checks.hit("names: a crash cut a mkdir, done or not");
    }
    model.dirs = if dirs == sorted(before) {
        before.dirs.clone()
    } else {
        assert!(
            op == Op::Mkdir && dirs == sorted(after),
            "after a crash in {op:?}: directories {dirs:?}, acknowledged {:?}{}",
            before.dirs,
            if op == Op::Mkdir {
                format!(" (or {:?} with the mkdir)", after.dirs)
            } else {
                String::new()
            }
        );
        after.dirs.clone()
    };
    model.aliases = settled_aliases(g, before, after, op, checks);
    checks.hit("names: after a crash, directories and aliases as acknowledged");
    model
}

/// After a crash in `op`: the aliases listed are those acknowledged before
/// it, or — for an operation that changes aliases (an alias made, a file
/// deleted or replaced with its aliases) — those after it.
fn settled_aliases(
    g: &Group<'_>,
    before: &Model,
    after: &Model,
    op: Op,
    checks: &mut Tally,
) -> BTreeMap<String, u32> {
    let (_, aliases) = root_names(g);
    if op == Op::Alias && before.aliases != after.aliases {
        checks.hit("names: a crash cut a mkalias, done or not");
    }
    if aliases == before.aliases {
        return aliases;
    }
    assert!(
        matches!(op, Op::Alias | Op::Delete | Op::Rename) && aliases == after.aliases,
        "after a crash in {op:?}: aliases {aliases:?}, acknowledged {:?} (after the operation {:?})",
        before.aliases,
        after.aliases
    );
    aliases
}

/// The group's own invariants ([`Group::check_invariants`]), between any
/// two operations.
fn invariants(g: &Group<'_>, when: &str) {
    if let Err(v) = g.check_invariants() {
        panic!("{when}: {v}");
    }
}

fn run_seed(seed: u64) -> Tally {
    let mut checks = Tally::default();
    let mut rng = Rand::new(seed);
    let cfg = config(&mut rng);
    if trace() {
        eprintln!("{cfg:?}");
    }
    let (sim, ids) = build(seed, &cfg);
    let mut engine = CrashAfter::vanishing(sim, usize::MAX);
    let budget = engine.budget();
    let mut model = Model::default();
    let crash_at = rng.below(OPS_PER_SEED as u64) as usize;
    // The faulted failure group counts as down from the start.
    let mut lost_fgs: Vec<String> = cfg.faults.victim.iter().cloned().collect();
    let victims: Vec<usize> = (0..ids.len())
        .filter(|i| cfg.faults.victim.as_ref() == Some(&cfg.disks[*i].1))
        .collect();
    let damage = Damage {
        silent: cfg.faults.silent(),
        found: cfg.faults.silent() || cfg.faults.read_errors,
        victims: victims.iter().map(|i| format!("D{i}")).collect(),
    };
    let unit = u64::from(cfg.physical.max(cfg.logical));
    {
        let g = create_group(&mut engine, &ids, &cfg, seed);
        g.dismount().unwrap();
    }
    for i in &victims {
        let f = &mut engine.inner.disk_mut(ids[*i]).faults;
        f.read_error_per_million = if cfg.faults.read_errors { 20_000 } else { 0 };
        f.write_error_per_million = if cfg.faults.write_errors { 20_000 } else { 0 };
        f.misdirect_per_million = if cfg.faults.misdirect { 10_000 } else { 0 };
    }
    let mut step = 0;
    while step < OPS_PER_SEED {
        // Bit rot while the group is not mounted (nothing holds the
        // simulator then): a few 4 KiB blocks of a faulted disk's data
        // area.
        if cfg.faults.rot && !victims.is_empty() {
            for _ in 0..rng.below(4) {
                let d = ids[victims[rng.below(victims.len() as u64) as usize]];
                let size = engine.inner.geometry(d).map_or(0, |g| g.size_bytes);
                let at = 8 * MIB + rng.below(size.saturating_sub(16 * MIB) / 4096) * 4096;
                let bit = rng.below(8) as u8;
                engine.inner.rot(d, at + rng.below(4096), bit);
            }
        }
        let after = {
            let (mut g, report) =
                group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into()))
                    .unwrap_or_else(|e| panic!("seed {seed} step {step}: mount: {e}"));
            if trace() {
                let states: Vec<_> = g.disks().iter().map(|d| (d.number, d.state)).collect();
                eprintln!("mount: {report:?}; disks {states:?}");
            }
            invariants(&g, &format!("seed {seed} step {step} after mount"));
            verify(
                &mut g,
                &model,
                &damage,
                unit,
                &mut checks,
                &format!("seed {seed} step {step} after mount"),
            );
            loop {
                if step >= OPS_PER_SEED {
                    break After::Nothing;
                }
                let op = pick_op(&mut rng);
                let crashing = step == crash_at;
                if trace() {
                    eprintln!(
                        "step {step}: {op:?}{}",
                        if crashing { " (crash)" } else { "" }
                    );
                }
                step += 1;
                match op {
                    Op::LoseDisk => {
                        // Lose a disk only where redundancy survives it;
                        // with faults, only of the faulted failure group
                        // (one failure group in trouble at a time).
                        let d = rng.below(ids.len() as u64) as usize;
                        let fg = cfg.disks[d].1.clone();
                        let mut fgs = lost_fgs.clone();
                        if !fgs.contains(&fg) {
                            fgs.push(fg);
                        }
                        let room = if cfg.faults.victim.is_some() {
                            1
                        } else {
                            usize::from(cfg.redundancy.copies()) - 1
                        };
                        if fgs.len() <= room {
                            lost_fgs = fgs;
                            break After::Lose(d);
                        }
                    }
                    Op::Remount => {
                        if rng.chance(50) {
                            g.dismount().unwrap();
                        }
                        break After::Nothing;
                    }
                    _ => {
                        let before = model.clone();
                        if crashing {
                            budget.set(rng.below(40) as usize);
                        }
                        let result = apply(&mut g, &mut model, &mut rng, op, crashing);
                        if crashing {
                            break After::Crash {
                                op,
                                result: format!("{result:?}"),
                                before: Box::new(before),
                            };
                        }
                        if let Err(e) = result {
                            panic!("seed {seed} step {step}: {op:?} failed without a crash: {e}");
                        }
                        invariants(&g, &format!("seed {seed} step {step} after {op:?}"));
                    }
                }
            }
        };
        match after {
            After::Nothing => {}
            After::Lose(d) => engine.inner.lose_disk(ids[d]),
            After::Crash { op, result, before } => {
                budget.set(usize::MAX);
                let policy = match rng.below(4) {
                    0 => CrashPolicy::LOSE_ALL,
                    1 => CrashPolicy::KEEP_ALL,
                    2 => CrashPolicy::TEAR_ALL,
                    _ => CrashPolicy::MIXED,
                };
                let crashed = engine.inner.crash(policy);
                if crashed.torn > 0 && unit < 4096 {
                    checks.hit("crash: unflushed writes torn at 512 bytes");
                }
                model.crashed(unit);
                // A listing first: it must see what the writer will, journal
                // records applied in memory, and write nothing.
                let listed: BTreeMap<String, u64> = {
                    let mutations = budget.get();
                    let (g, _) = group::mount_read_only(
                        &mut engine,
                        &ids,
                        &GroupSelector::Name("SIM".into()),
                    )
                    .unwrap_or_else(|e| {
                        panic!("seed {seed}: read-only mount after crash in {op:?}: {e}")
                    });
                    invariants(
                        &g,
                        &format!("seed {seed}: read-only mount after crash in {op:?}"),
                    );
                    let seen = group_files(&g)
                        .into_iter()
                        .map(|(n, i)| (n, i.size_bytes))
                        .collect();
                    drop(g);
                    assert_eq!(
                        budget.get(),
                        mutations,
                        "seed {seed}: a read-only mount after a crash in {op:?} wrote"
                    );
                    seen
                };
                let (mut g, _) =
                    group::mount(&mut engine, &ids, &GroupSelector::Name("SIM".into()))
                        .unwrap_or_else(|e| {
                            panic!("seed {seed}: mount after crash in {op:?}: {e}")
                        });
                invariants(&g, &format!("seed {seed}: mount after crash in {op:?}"));
                let mounted: BTreeMap<String, u64> = group_files(&g)
                    .into_iter()
                    .map(|(n, i)| (n, i.size_bytes))
                    .collect();
                assert_eq!(
                    listed, mounted,
                    "seed {seed}: after a crash in {op:?}, a listing and the next writer saw different files"
                );
                // The process died during the operation: whatever it returned,
                // nobody heard it, so it may or may not have happened.
                let mut before = *before;
                before.crashed(unit);
                model = settle(&g, &before, &model, op, &mut checks);
                verify(
                    &mut g,
                    &model,
                    &damage,
                    unit,
                    &mut checks,
                    &format!("seed {seed} after crash in {op:?} (op result {result})"),
                );
            }
        }
    }
    for e in engine.inner.events() {
        checks.hit(match e {
            FaultEvent::ReadError { .. } => "faults: a read of a copy failed",
            FaultEvent::WriteError { .. } => "faults: a write of a copy failed",
            FaultEvent::Misdirected { .. } => "faults: a write misdirected",
            FaultEvent::BitRot { .. } => "faults: a bit rotted",
        });
    }
    checks
}

/// Every conditional check and fault of the crash simulation: a run of
/// enough seeds fails if one never happened.
const CHECKS: &[&str] = &[
    "names: files, directories and aliases listed are the model's",
    "names: after a crash, directories and aliases as acknowledged",
    "names: a crash cut a mkdir, done or not",
    "names: a crash cut a mkalias, done or not",
    "reads: a plain read compared with the model",
    "reads: a checked read (silent damage possible) compared with the model",
    "check: each problem found is on a faulted disk",
    "crash: unflushed writes torn at 512 bytes",
    "faults: a read of a copy failed",
    "faults: a write of a copy failed",
    "faults: a write misdirected",
    "faults: a bit rotted",
];

fn trace() -> bool {
    std::env::var_os("CAIRN_SIM_SEED").is_some()
}

enum After {
    Nothing,
    Lose(usize),
    Crash {
        op: Op,
        result: String,
        before: Box<Model>,
    },
}

// ---------------------------------------------------------------------------
// Targeted scenarios

fn scenario(disks: &[(u64, &str)], redundancy: Redundancy) -> (CrashAfter, Vec<DeviceId>, Config) {
    let cfg = Config {
        disks: disks
            .iter()
            .map(|(s, fg)| (*s, (*fg).to_string()))
            .collect(),
        redundancy,
        au_bytes: MIB,
        logical: 4096,
        physical: 4096,
        faults: Faults::default(),
    };
    let (sim, ids) = build(7, &cfg);
    let mut engine = CrashAfter::vanishing(sim, usize::MAX);
    create_group(&mut engine, &ids, &cfg, 7).dismount().unwrap();
    (engine, ids, cfg)
}

fn mount_sim<'e>(engine: &'e mut CrashAfter, ids: &[DeviceId]) -> Group<'e> {
    group::mount(engine, ids, &GroupSelector::Name("SIM".into()))
        .unwrap()
        .0
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A normal-redundancy group on two disks holding one file `x`, dismounted,
/// and the two copies, as (device, offset), of the file directory's block
/// `entry(x's number)` (block n of the directory is file n's entry).
fn directory_entry_copies(
    entry: impl Fn(u64) -> u64,
) -> (CrashAfter, Vec<DeviceId>, [(DeviceId, u64); 2]) {
    let (mut engine, ids, _) = scenario(&[(64 * MIB, "A"), (64 * MIB, "B")], Redundancy::Normal);
    let mut g = mount_sim(&mut engine, &ids);
    let f = g
        .create_file(&path("x"), 2 * MIB, &CreateOptions::default())
        .unwrap();
    let block = entry(u64::from(f.number));
    let au = g.au_bytes();
    let per_au = au / 4096;
    let dir = *g
        .extents(cairn_format::group::FILE_DIRECTORY)
        .unwrap()
        .get((block / per_au) as usize)
        .expect("the entry's directory AU is allocated");
    g.dismount().unwrap();
    let place = |c: cairn_format::group::AuAddr| {
        (
            ids[usize::from(c.disk)],
            u64::from(c.au) * au + (block % per_au) * 4096,
        )
    };
    let copies = [place(dir.copies()[0]), place(dir.copies()[1])];
    (engine, ids, copies)
}

/// Every request an engine is given, by device and kind, for tests that
/// check which I/O an operation does.
type Log = std::sync::Arc<std::sync::Mutex<Vec<(DeviceId, cairn_io::OpKind)>>>;

fn take(log: &Log) -> Vec<(DeviceId, cairn_io::OpKind)> {
    std::mem::take(&mut *log.lock().unwrap())
}

/// Which devices `log` flushes, and whether each flush follows a write to
/// its device within `log`.
fn flushes(log: &[(DeviceId, cairn_io::OpKind)]) -> Vec<(DeviceId, bool)> {
    use cairn_io::OpKind;
    log.iter()
        .enumerate()
        .filter(|(_, (_, k))| *k == OpKind::Flush)
        .map(|(i, (d, _))| {
            let written = log[..i]
                .iter()
                .any(|(w, k)| w == d && matches!(k, OpKind::Write | OpKind::WriteZeroes));
            (*d, written)
        })
        .collect()
}

#[test]
fn crash_simulation() {
    let seeds: Vec<u64> = match std::env::var("CAIRN_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("CAIRN_SIM_SEED is a number")],
        Err(_) => {
            let n = std::env::var("CAIRN_SIM_SEEDS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(SEEDS_CI);
            let first: u64 = std::env::var("CAIRN_SIM_FIRST_SEED")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(1);
            (first..first + n).collect()
        }
    };
    let started = std::time::Instant::now();
    let (first, count) = (seeds.first().copied().unwrap_or(1), seeds.len() as u64);
    let tallies = common::run_seeds(
        first,
        count,
        |seed| {
            format!("crash simulation failed; replay with:\n  CAIRN_SIM_SEED={seed} cargo test -p cairn-store --test group_sim crash_simulation -- --nocapture")
        },
        run_seed,
    );
    let mut checks = Tally::default();
    for t in &tallies {
        checks.merge(t);
    }
    eprintln!(
        "crash simulation: {count} seeds in {:.1} s ({} at a time); checks run and faults injected:\n{}",
        started.elapsed().as_secs_f64(),
        common::seed_workers(count),
        checks.lines()
    );
    if count >= 500 {
        let never = checks.missing(CHECKS);
        assert!(
            never.is_empty(),
            "{count} seeds: these never happened: {never:?}"
        );
    }
}
