//! Helpers shared by the live-group tests on the simulator.

#![allow(dead_code, clippy::unwrap_used)]

use cairn_format::DiskLabel;
use cairn_io::{DeviceId, IoEngine};
use cairn_io_sim::{geometry, CrashAfter, SharedSim, SimEngine};
use cairn_store::group::{
    self, Group, GroupError, GroupSelector, GroupSpec, LiveGroup, MissingDisks, MountReport,
    NewDisk, Redundancy, SameDevices,
};
use cairn_store::labeling::{write_label, LabelSpec};
use cairn_store::names::GroupPath;
use uuid::Uuid;

pub const MIB: u64 = 1 << 20;

/// Add a disk per geometry to `sim`, each labelled `D<i>` with the uuid
/// `uuid(i)`; their device ids, in order.
pub fn labelled_disks(
    sim: &mut SimEngine,
    geometries: impl IntoIterator<Item = cairn_io::Geometry>,
    uuid: impl Fn(usize) -> u128,
) -> Vec<DeviceId> {
    let mut ids = Vec::new();
    for (i, g) in geometries.into_iter().enumerate() {
        let d = sim.add_disk(g);
        write_label(
            sim,
            d,
            &LabelSpec {
                label: DiskLabel::parse(&format!("D{i}")).unwrap(),
                disk_uuid: Uuid::from_u128(uuid(i)),
                now_unix_seconds: 1_763_700_000,
                generation: 1,
            },
        )
        .unwrap();
        ids.push(d);
    }
    ids
}

/// Labelled simulated disks `(size, failure group)` and a group SIM over
/// them (1 MiB AUs), created and dismounted, behind a crash budget (the
/// engine's writes vanish past it: `CrashAfter::budget`).
pub fn crash_rig(disks: &[(u64, &str)], redundancy: Redundancy) -> (CrashAfter, Vec<DeviceId>) {
    let mut sim = SimEngine::new(11, 64);
    let ids = labelled_disks(
        &mut sim,
        disks
            .iter()
            .map(|(size, _)| geometry(*size, 4096, 4096, 512 << 10)),
        |i| 0xD15C << 16 | i as u128,
    );
    let mut engine = CrashAfter::vanishing(sim, usize::MAX);
    let new: Vec<NewDisk> = ids
        .iter()
        .zip(disks)
        .map(|(d, (_, fg))| NewDisk {
            device: *d,
            failgroup: Some((*fg).to_string()),
        })
        .collect();
    group::create(
        &mut engine,
        &new,
        &GroupSpec {
            name: "SIM".into(),
            redundancy,
            au_bytes: MIB,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1_763_700_000,
            group_uuid: Uuid::from_u128(0x5EED),
        },
    )
    .unwrap()
    .dismount()
    .unwrap();
    (engine, ids)
}

/// Group SIM of a [`crash_rig`], mounted for writing.
pub fn mount_sim<'e>(engine: &'e mut CrashAfter, ids: &[DeviceId]) -> Group<'e> {
    group::mount(engine, ids, &GroupSelector::Name("SIM".into()))
        .unwrap()
        .0
}

/// `+SIM/name`.
pub fn sim_path(name: &str) -> GroupPath {
    GroupPath::parse(&format!("+SIM/{name}")).unwrap()
}

/// Mount group `name` on `shared`'s disks live for writing: the metadata
/// plane on one handle, and a new handle for every data handle.
pub fn mount_live(
    shared: &SharedSim,
    ids: &[DeviceId],
    name: &str,
) -> Result<(LiveGroup, MountReport), GroupError> {
    let (g, report) = group::mount_owned(
        Box::new(shared.handle()),
        ids,
        &GroupSelector::Name(name.into()),
        MissingDisks::MarkOffline,
    )?;
    let source = shared.clone();
    let live = LiveGroup::new(
        g,
        Box::new(SameDevices(move |_depth| {
            Box::new(source.handle()) as Box<dyn IoEngine>
        })),
    );
    Ok((live, report))
}

/// Four 128 MiB disks in two failure groups (disks 0 and 2 in one, 1 and 3
/// in the other), a normal-redundancy group `name` with 1 MiB AUs, mounted
/// live. The simulator takes `sim_depth` requests at once, from every engine
/// on it.
pub fn four_disk_live_group(
    seed: u64,
    name: &str,
    group_tag: u128,
    sim_depth: usize,
) -> (SharedSim, Vec<DeviceId>, LiveGroup) {
    let mut sim = SimEngine::new(seed, sim_depth);
    let ids = labelled_disks(
        &mut sim,
        (0..4).map(|_| geometry(128 * MIB, 4096, 4096, 512 << 10)),
        |i| u128::from(seed) << 8 | i as u128,
    );
    let disks: Vec<NewDisk> = ids
        .iter()
        .enumerate()
        .map(|(i, d)| NewDisk {
            device: *d,
            failgroup: Some(format!("FG{}", i % 2)),
        })
        .collect();
    let g = group::create(
        &mut sim,
        &disks,
        &GroupSpec {
            name: name.into(),
            redundancy: Redundancy::Normal,
            au_bytes: MIB,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1_763_700_000,
            group_uuid: Uuid::from_u128(group_tag << 64 | u128::from(seed)),
        },
    )
    .unwrap();
    g.dismount().unwrap();
    let shared = SharedSim::new(sim);
    let (live, _) = mount_live(&shared, &ids, name).unwrap();
    (shared, ids, live)
}

/// Run `run` for every seed in `first..first + count` on every core (seeds are
/// independent, and each one's run does not depend on which worker runs it
/// or when); their results, in seed order. On a failure the workers stop
/// taking seeds, `replay(seed)` names the lowest failing seed's command, and
/// its panic goes on.
pub fn run_seeds<T: Send>(
    first: u64,
    count: u64,
    replay: impl Fn(u64) -> String,
    run: impl Fn(u64) -> T + Sync,
) -> Vec<T> {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Mutex, PoisonError};
    type Failure = (u64, Box<dyn std::any::Any + Send>);
    let workers = seed_workers(count);
    let next = AtomicU64::new(first);
    let failed: Mutex<Option<Failure>> = Mutex::new(None);
    let done: Mutex<Vec<(u64, T)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        // Each worker, and the actor threads its seeds start, keep to one
        // CPU: an interleaving seed hands its one baton between its actors
        // at every scheduling point, and a hand-over to a thread on the same
        // CPU is a plain context switch, where one to another CPU waits for
        // it to wake (an interrupt, and often an idle CPU meanwhile). It
        // nearly doubled the seeds a second on 2 cores.
        let cpus = allowed_cpus();
        for w in 0..workers {
            let cpu = (cpus.len() >= workers).then(|| cpus[w]);
            let (failed, next, done, run) = (&failed, &next, &done, &run);
            scope.spawn(move || {
                if let Some(cpu) = cpu {
                    pin_to(cpu);
                }
                loop {
                    if failed
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .is_some()
                    {
                        return;
                    }
                    let seed = next.fetch_add(1, Ordering::SeqCst);
                    if seed >= first + count {
                        return;
                    }
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(seed))) {
                        Ok(t) => done
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push((seed, t)),
                        Err(p) => {
                            let mut failed = failed.lock().unwrap_or_else(PoisonError::into_inner);
                            if failed.as_ref().is_none_or(|(s, _)| seed < *s) {
                                *failed = Some((seed, p));
                            }
                            return;
                        }
                    }
                }
            });
        }
    });
    if let Some((seed, p)) = failed.into_inner().unwrap_or_else(PoisonError::into_inner) {
        eprintln!("{}", replay(seed));
        std::panic::resume_unwind(p);
    }
    let mut done = done.into_inner().unwrap_or_else(PoisonError::into_inner);
    assert_eq!(done.len() as u64, count, "every seed ran");
    done.sort_by_key(|(seed, _)| *seed);
    done.into_iter().map(|(_, t)| t).collect()
}

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed `cpu_set_t` is an empty set, which the call fills.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|c| libc::CPU_ISSET(*c, &set))
            .collect()
    }
}

/// Keep the calling thread, and the threads it starts from now on, on `cpu`.
/// Best effort: if the kernel refuses, the seeds only run slower.
fn pin_to(cpu: usize) {
    // SAFETY: as above; the set holds one CPU the process may use.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Workers [`run_seeds`] uses.
pub fn seed_workers(count: u64) -> usize {
    std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(usize::try_from(count).unwrap_or(usize::MAX))
        .max(1)
}

/// An engine that passes everything to `inner`, first showing each request
/// to `hook` (to record which I/O an operation does, or to make a chosen
/// request panic) and each completion to `done`, which may change it (to
/// make a chosen read fail or come back short).
pub struct Hooked<E, F, G = fn(&mut cairn_io::Completion)> {
    pub inner: E,
    pub hook: F,
    pub done: G,
}

/// A `done` for [`Hooked`] that leaves completions alone.
pub fn untouched(_: &mut cairn_io::Completion) {}

impl<E, F, G> IoEngine for Hooked<E, F, G>
where
    E: IoEngine,
    F: FnMut(&cairn_io::Request) + Send,
    G: FnMut(&mut cairn_io::Completion) + Send,
{
    fn name(&self) -> &'static str {
        "hooked"
    }
    fn geometry(&self, device: DeviceId) -> Option<&cairn_io::Geometry> {
        self.inner.geometry(device)
    }
    fn submit(&mut self, request: cairn_io::Request) -> Result<(), cairn_io::SubmitError> {
        (self.hook)(&request);
        self.inner.submit(request)
    }
    fn wait(&mut self, min: usize) -> Result<(), cairn_io::IoError> {
        self.inner.wait(min)
    }
    fn set_io_timeout(&mut self, timeout: Option<std::time::Duration>) {
        self.inner.set_io_timeout(timeout);
    }
    fn pop_completion(&mut self) -> Option<cairn_io::Completion> {
        let mut c = self.inner.pop_completion()?;
        (self.done)(&mut c);
        Some(c)
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
    fn depth_max(&self) -> usize {
        self.inner.depth_max()
    }
    fn stats(&self) -> cairn_io::EngineStats {
        self.inner.stats()
    }
}

/// A simulator's random source: one stream per seed, the same on every
/// machine.
pub struct Rand(rand_chacha::ChaCha8Rng, u64);

impl Rand {
    pub fn new(seed: u64) -> Self {
        use rand_core::SeedableRng;
        Self(rand_chacha::ChaCha8Rng::seed_from_u64(seed), seed)
    }
    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        use rand_core::Rng;
        self.0.next_u64() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    /// `len` bytes no other stream or place in this one gives (data to
    /// write: a block misplaced shows). From a cheap generator (SplitMix64)
    /// keyed by this stream's seed and position; the stream then moves
    /// past them exactly as drawing them from it would, so every later
    /// draw is what it was when they were ChaCha's — whose fill was a
    /// twentieth of the interleaving simulation's time.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let at = self.0.get_word_pos();
        self.0.set_word_pos(at + len.div_ceil(4) as u128);
        let mut x = self.1 ^ (at as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((at >> 64) as u64);
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let mut v = Vec::with_capacity(len);
        while v.len() + 8 <= len {
            v.extend_from_slice(&next().to_le_bytes());
        }
        let tail = len - v.len();
        v.extend_from_slice(&next().to_le_bytes()[..tail]);
        v
    }
}

/// Counts by name, for a simulator's accounting: how often each of its
/// conditional checks ran, and how many errors it accepted and why. A
/// check that never runs is no check (TigerBeetle's `maybe`): a run of
/// enough seeds asserts that every name in its list was counted.
#[derive(Debug, Default, Clone)]
pub struct Tally(pub std::collections::BTreeMap<&'static str, u64>);

impl Tally {
    pub fn add(&mut self, name: &'static str, n: u64) {
        *self.0.entry(name).or_default() += n;
    }
    pub fn hit(&mut self, name: &'static str) {
        self.add(name, 1);
    }
    pub fn get(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(0)
    }
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }
    pub fn merge(&mut self, other: &Tally) {
        for (k, v) in &other.0 {
            self.add(k, *v);
        }
    }
    /// `name: count` lines, indented, for a summary.
    pub fn lines(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("    {v:>10}  {k}\n"))
            .collect()
    }
    /// The names of `required` this tally never counted.
    pub fn missing<'a>(&self, required: &[&'a str]) -> Vec<&'a str> {
        required
            .iter()
            .copied()
            .filter(|k| self.get(k) == 0)
            .collect()
    }
}
