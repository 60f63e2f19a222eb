//! The live group: one metadata plane, many threads each with its own data
//! handle, over one set of simulated disks ([`SharedSim`]). These tests run
//! real threads, so they assert what must hold under *every* interleaving;
//! the interleaving simulator drives chosen ones deterministically.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Barrier};
use std::time::Duration;

use cairn_io::DeviceId;
use cairn_io_sim::SharedSim;
use cairn_store::group::{CreateOptions, GroupError, LiveGroup};
use cairn_store::names::GroupPath;

mod commits;
#[path = "../common/mod.rs"]
mod common;
mod disks;
mod reads;
mod space;
mod writes;
use common::MIB;

fn live_group(seed: u64) -> (SharedSim, Vec<DeviceId>, LiveGroup) {
    common::four_disk_live_group(seed, "LIVE", 0x11FE, 256)
}

fn mount_live(shared: &SharedSim, ids: &[DeviceId]) -> LiveGroup {
    common::mount_live(shared, ids, "LIVE").unwrap().0
}

fn path(name: &str) -> GroupPath {
    GroupPath::parse(&format!("+LIVE/{name}")).unwrap()
}

fn block(tag: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| tag ^ (i as u8).wrapping_mul(31)).collect()
}

/// What a [`FaultyMirror`] does to the reads of its primary disk.
#[derive(Clone, Copy, PartialEq)]
enum ReadFault {
    /// Nothing.
    None,
    /// Every read reports half its bytes, and the rest of the buffer holds
    /// old bytes, as a device that returns a short transfer leaves it.
    Short,
    /// The next read fails with EIO, the ones after it succeed.
    FailOnce,
}

/// Does `fault` to a completion of a read (one of another kind is left
/// alone).
fn apply_fault(fault: &std::sync::Mutex<ReadFault>, c: &mut cairn_io::Completion) {
    if c.kind != cairn_io::OpKind::Read {
        return;
    }
    let mut fault = fault.lock().unwrap();
    match *fault {
        ReadFault::None => {}
        ReadFault::Short => {
            if let (Ok(n), Some(buf)) = (&mut c.result, &mut c.buf) {
                *n /= 2;
                let half = buf.len() / 2;
                buf[half..].fill(0xEE);
            }
        }
        ReadFault::FailOnce => {
            c.result = Err(cairn_io::IoError::Os {
                kind: cairn_io::OpKind::Read,
                offset_bytes: 0,
                len_bytes: 0,
                errno: 5,
            });
            *fault = ReadFault::None;
        }
    }
}

/// A normal-redundancy group with one 1 MiB file holding `block(7, 8192)`
/// at 0, mounted live again with data handles whose engine does `fault` to
/// the reads of the block's primary copy's disk and counts its writes; with
/// the fault to set and the primary disk's write count.
struct FaultyMirror {
    shared: SharedSim,
    ids: Vec<DeviceId>,
    live: LiveGroup,
    number: u32,
    primary: cairn_format::group::AuAddr,
    fault: Arc<std::sync::Mutex<ReadFault>>,
    writes: Arc<std::sync::atomic::AtomicU32>,
}

fn faulty_mirror(seed: u64) -> FaultyMirror {
    use cairn_store::group::{self, GroupSelector, MissingDisks, SameDevices};
    let (shared, ids, live) = live_group(seed);
    let number = live
        .meta(|g| g.create_file(&path("f"), MIB, &CreateOptions::default()))
        .unwrap()
        .unwrap()
        .number;
    let mut h = live.handle(64).unwrap();
    h.write(number, 0, &block(7, 8192)).unwrap();
    h.sync().unwrap();
    let primary = live
        .meta(|g| g.extents(number).unwrap()[0].copies()[0])
        .unwrap();
    drop(h);
    live.dismount().unwrap();

    let (g, _) = group::mount_owned(
        Box::new(shared.handle()),
        &ids,
        &GroupSelector::Name("LIVE".into()),
        MissingDisks::MarkOffline,
    )
    .unwrap();
    let fault = Arc::new(std::sync::Mutex::new(ReadFault::None));
    let writes = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let (source, f, w) = (shared.clone(), fault.clone(), writes.clone());
    let device = ids[usize::from(primary.disk)];
    let live = LiveGroup::new(
        g,
        Box::new(SameDevices(move |_depth| {
            let (f, w) = (f.clone(), w.clone());
            Box::new(common::Hooked {
                inner: source.handle(),
                hook: move |r: &cairn_io::Request| {
                    if r.device == device && matches!(r.op, cairn_io::Op::Write { .. }) {
                        w.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                },
                done: move |c: &mut cairn_io::Completion| {
                    if c.device == device {
                        apply_fault(&f, c);
                    }
                },
            }) as Box<dyn cairn_io::IoEngine>
        })),
    );
    FaultyMirror {
        shared,
        ids,
        live,
        number,
        primary,
        fault,
        writes,
    }
}

/// Six 64 MiB disks (D0 and D3 in FG0, D1 and D4 in FG1, D2 and D5 in FG2)
/// of a high-redundancy group LIVE with 1 MiB AUs, mounted live, with an
/// 8 MiB file written whole; the file's number.
fn high_group(seed: u64) -> (cairn_io_sim::SharedSim, Vec<DeviceId>, LiveGroup, u32) {
    use cairn_store::group::{self, GroupSpec, NewDisk, Redundancy};
    let mut sim = cairn_io_sim::SimEngine::new(seed, 256);
    let ids = common::labelled_disks(
        &mut sim,
        (0..6).map(|_| cairn_io_sim::geometry(64 * MIB, 4096, 4096, 512 << 10)),
        |i| u128::from(seed) << 8 | i as u128,
    );
    let disks: Vec<NewDisk> = ids
        .iter()
        .enumerate()
        .map(|(i, d)| NewDisk {
            device: *d,
            failgroup: Some(format!("FG{}", i % 3)),
        })
        .collect();
    group::create(
        &mut sim,
        &disks,
        &GroupSpec {
            name: "LIVE".into(),
            redundancy: Redundancy::High,
            au_bytes: MIB,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1_763_700_000,
            group_uuid: uuid::Uuid::from_u128(0x4816 << 64 | u128::from(seed)),
        },
    )
    .unwrap()
    .dismount()
    .unwrap();
    let shared = cairn_io_sim::SharedSim::new(sim);
    let live = mount_live(&shared, &ids);
    let number = live
        .meta(|g| g.create_file(&path("f"), 8 * MIB, &CreateOptions::default()))
        .unwrap()
        .unwrap()
        .number;
    let mut h = live.handle(16).unwrap();
    h.write(number, 0, &block(1, (8 * MIB) as usize)).unwrap();
    h.sync().unwrap();
    (shared, ids, live, number)
}

fn disk_rows(live: &LiveGroup) -> Vec<cairn_store::group::DiskInfo> {
    live.meta(|g| g.disks()).unwrap()
}

fn disk_row(live: &LiveGroup, label: &str) -> cairn_store::group::DiskInfo {
    disk_rows(live)
        .into_iter()
        .find(|d| d.label == label)
        .unwrap()
}

/// A read the hook holds: the next data read of at least 512 KiB (a
/// scrub's chunk; metadata reads are smaller) waits until released.
#[derive(Default)]
struct HeldRead {
    state: std::sync::Mutex<(bool, bool, bool)>, // (armed, holding, released)
    changed: std::sync::Condvar,
}

impl HeldRead {
    fn see(&self, r: &cairn_io::Request) {
        let big = matches!(&r.op, cairn_io::Op::Read { buf, .. } if buf.len() >= 512 << 10);
        let mut s = self.state.lock().unwrap();
        if !big || !s.0 || s.2 {
            return;
        }
        s.0 = false;
        s.1 = true;
        self.changed.notify_all();
        // Bounded: a test that fails must not hang.
        let (s, _) = self
            .changed
            .wait_timeout_while(s, Duration::from_secs(120), |s| !s.2)
            .unwrap();
        drop(s);
    }

    fn wait_holding(&self) -> bool {
        let s = self.state.lock().unwrap();
        let (s, _) = self
            .changed
            .wait_timeout_while(s, Duration::from_secs(60), |s| !s.1)
            .unwrap();
        s.1
    }

    fn release(&self) {
        self.state.lock().unwrap().2 = true;
        self.changed.notify_all();
    }
}

/// A discard the data handles' engines hold once armed: the next discard
/// request (the discard drain's, the only one these tests make while
/// armed) waits until released.
#[derive(Default)]
struct HeldDiscard {
    state: std::sync::Mutex<(bool, bool, bool)>, // (armed, holding, released)
    changed: std::sync::Condvar,
}

impl HeldDiscard {
    fn see(&self, r: &cairn_io::Request) {
        let mut s = self.state.lock().unwrap();
        if !matches!(r.op, cairn_io::Op::Discard { .. }) || !s.0 || s.2 {
            return;
        }
        s.0 = false;
        s.1 = true;
        self.changed.notify_all();
        // Bounded: a test that fails must not hang.
        let (s, _) = self
            .changed
            .wait_timeout_while(s, Duration::from_secs(120), |s| !s.2)
            .unwrap();
        drop(s);
    }

    fn arm(&self) {
        self.state.lock().unwrap().0 = true;
    }

    fn wait_holding(&self) -> bool {
        let s = self.state.lock().unwrap();
        let (s, _) = self
            .changed
            .wait_timeout_while(s, Duration::from_secs(60), |s| !s.1)
            .unwrap();
        s.1
    }

    fn release(&self) {
        self.state.lock().unwrap().2 = true;
        self.changed.notify_all();
    }
}

/// Two 24 MiB disks in two failure groups, a normal-redundancy group LIVE
/// with 1 MiB AUs, mounted live, filled with 1 MiB files `fill*` until
/// `free` extents are left; the data handles' engines go through `held`.
fn nearly_full_group(seed: u64, free: usize) -> (SharedSim, LiveGroup, Arc<HeldDiscard>) {
    use cairn_store::group::SameDevices;
    use cairn_store::group::{self, GroupSelector, GroupSpec, MissingDisks, NewDisk, Redundancy};
    let mut sim = cairn_io_sim::SimEngine::new(seed, 256);
    let ids = common::labelled_disks(
        &mut sim,
        (0..2).map(|_| cairn_io_sim::geometry(24 * MIB, 4096, 4096, 512 << 10)),
        |i| u128::from(seed) << 8 | i as u128,
    );
    let disks: Vec<NewDisk> = ids
        .iter()
        .enumerate()
        .map(|(i, d)| NewDisk {
            device: *d,
            failgroup: Some(format!("FG{i}")),
        })
        .collect();
    group::create(
        &mut sim,
        &disks,
        &GroupSpec {
            name: "LIVE".into(),
            redundancy: Redundancy::Normal,
            au_bytes: MIB,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1_763_700_000,
            group_uuid: uuid::Uuid::from_u128(0x5FAC << 64 | u128::from(seed)),
        },
    )
    .unwrap()
    .dismount()
    .unwrap();
    let shared = SharedSim::new(sim);
    let held = Arc::new(HeldDiscard::default());
    let (g, _) = group::mount_owned(
        Box::new(shared.handle()),
        &ids,
        &GroupSelector::Name("LIVE".into()),
        MissingDisks::MarkOffline,
    )
    .unwrap();
    let (source, h) = (shared.clone(), held.clone());
    let live = LiveGroup::new(
        g,
        Box::new(SameDevices(move |_depth| {
            let h = h.clone();
            Box::new(common::Hooked {
                inner: source.handle(),
                hook: move |r: &cairn_io::Request| h.see(r),
                done: common::untouched,
            }) as Box<dyn cairn_io::IoEngine>
        })),
    );
    let mut made = 0;
    loop {
        match live
            .meta(|g| {
                g.create_file(
                    &path(&format!("fill{made}")),
                    MIB,
                    &CreateOptions::default(),
                )
            })
            .unwrap()
        {
            Ok(_) => made += 1,
            Err(GroupError::NoSpace(_)) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(made > free, "{made} files fill the group");
    for n in made - free..made {
        live.meta(|g| g.remove(&path(&format!("fill{n}"))))
            .unwrap()
            .unwrap();
    }
    // Their discards over, the space is free.
    wait_for(|| live.discards_pending() == 0, "the fill's discards end");
    (shared, live, held)
}

/// Wait (bounded: a failing test must not hang) until `done` holds.
fn wait_for(done: impl Fn() -> bool, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A read held in the caller's check (`read_checked`): it runs, its reuse
/// guard set, until released. Its first look at the bytes (the primary
/// copy) is rejected when `reject_first`, so it reads the other copy after
/// the release; the bytes it accepted come back from `join`.
struct HeldReader {
    go: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<Vec<u8>>,
}

impl HeldReader {
    fn start(live: &LiveGroup, number: u32, reject_first: bool) -> Self {
        let (inside, entered) = std::sync::mpsc::channel::<()>();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let live = live.clone();
        let thread = std::thread::spawn(move || {
            let mut h = live.handle(8).unwrap();
            let mut buf = vec![0u8; 64 * 1024];
            let looks = std::sync::atomic::AtomicUsize::new(0);
            let wait = std::sync::Mutex::new(wait);
            h.read_checked(number, 0, &mut buf, &|_| {
                if looks.fetch_add(1, std::sync::atomic::Ordering::SeqCst) > 0 {
                    return true;
                }
                inside.send(()).unwrap();
                // Bounded: a test that fails must not hang.
                let _ = wait.lock().unwrap().recv_timeout(Duration::from_secs(120));
                !reject_first
            })
            .unwrap();
            buf
        });
        entered
            .recv_timeout(Duration::from_secs(60))
            .expect("the reader is inside its read");
        Self { go, thread }
    }

    fn finish(self) -> Vec<u8> {
        let _ = self.go.send(());
        self.thread.join().unwrap()
    }
}
