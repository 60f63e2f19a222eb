//! Multihost protection on the simulator: two "hosts", each with its own
//! engines on the same simulated disks (as two hosts see one SAN's LUNs),
//! one simulated clock that only moves when a host waits, and the owner's
//! beats driven by the test: every interleaving here is the test's choice,
//! and no test sleeps.
//!
//! The rules (`group::heartbeat`, `docs/multihost.md`): another host's live
//! heartbeat refuses a mount and names the host; `--force` watches it and
//! never takes a group that beats; a stopped owner is taken over only after
//! the watch; a clean dismount, or this host's own heartbeat, lets the next
//! mount go at once; an owner whose heartbeat cannot land, or that finds
//! the group taken over, stops writing.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use cairn_io::clock::Clock;
use cairn_io::{DeviceId, IoEngine};
use cairn_io_sim::{geometry, SharedSim, SimClock, SimEngine};
use cairn_store::group::heartbeat::{
    self, Beater, HostIdentity, Owner, Takeover, Timing, ACTIVITY_CHECK_FACTOR,
};
use cairn_store::group::{
    self, CreateOptions, GroupError, GroupSelector, GroupSpec, LiveGroup, MissingDisks, NewDisk,
    Redundancy, SameDevices,
};
use cairn_store::names::GroupPath;
use uuid::Uuid;

mod common;
use common::MIB;

const GROUP: Uuid = Uuid::from_u128(0x0a11_7e57_0000_0000_0000_0000_0000_0001);
const TIMING: Timing = Timing::DEFAULT;
const SECOND_NS: u64 = 1_000_000_000;
/// Where each disk's heartbeat block lies: a write fault there fails the
/// heartbeat and nothing else.
const HEARTBEAT_BLOCK: std::ops::Range<u64> = 4096..8192;

fn host(name: &str, id: u128) -> HostIdentity {
    HostIdentity::new(Uuid::from_u128(id), name, 100 + id as u32)
}

fn path(name: &str) -> GroupPath {
    GroupPath::parse(&format!("+MH/{name}")).unwrap()
}

/// The wall clock the heartbeats carry: the simulated clock from a fixed
/// date.
fn wall(clock: &SimClock) -> u64 {
    1_763_700_000_000 + clock.now_ns() / 1_000_000
}

/// Four 64 MiB disks, normal redundancy, created and dismounted: nobody
/// holds the group yet.
fn group_on_disks() -> (SharedSim, Vec<DeviceId>) {
    let mut sim = SimEngine::new(7, 256);
    let ids = common::labelled_disks(
        &mut sim,
        (0..4).map(|_| geometry(64 * MIB, 4096, 4096, 512 << 10)),
        |i| 0x4d48_0000 + i as u128,
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
            name: "MH".into(),
            redundancy: Redundancy::Normal,
            au_bytes: MIB,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1_763_700_000,
            group_uuid: GROUP,
        },
    )
    .unwrap()
    .dismount()
    .unwrap();
    (SharedSim::new(sim), ids)
}

/// A host's mount: claim (waiting on `clock`), mount live, beat by hand.
struct Mounted {
    live: LiveGroup,
    beater: Beater,
}

fn claim(
    shared: &SharedSim,
    ids: &[DeviceId],
    me: &HostIdentity,
    takeover: Takeover,
    clock: &dyn Clock,
    sim_clock: &SimClock,
) -> Result<heartbeat::Claim, GroupError> {
    let mut engine = shared.handle();
    let disks = heartbeat::members(&mut engine, ids, GROUP);
    assert_eq!(disks.len(), ids.len(), "every member found");
    let c = sim_clock.clone();
    heartbeat::claim(
        &mut engine,
        GROUP,
        "MH",
        &disks,
        me,
        TIMING,
        takeover,
        clock,
        &move || wall(&c),
    )
}

fn mount(
    shared: &SharedSim,
    ids: &[DeviceId],
    me: &HostIdentity,
    takeover: Takeover,
    clock: &dyn Clock,
    sim_clock: &SimClock,
) -> Result<Mounted, GroupError> {
    let claim = claim(shared, ids, me, takeover, clock, sim_clock)?;
    let (mut g, _) = group::mount_owned(
        Box::new(shared.handle()),
        ids,
        &GroupSelector::Uuid(GROUP),
        MissingDisks::MarkOffline,
    )?;
    let engines = {
        let shared = shared.clone();
        Arc::new(SameDevices(move |_depth| {
            Box::new(shared.handle()) as Box<dyn IoEngine>
        }))
    };
    let beater = Beater::new(claim, engines.clone(), sim_clock.now_ns());
    let link = beater.link();
    link.attach(g.data_plane().clone(), g.slot_generation());
    g.attach_heartbeat(link);
    Ok(Mounted {
        live: LiveGroup::new(g, Box::new(engines)),
        beater,
    })
}

impl Mounted {
    /// Beat `n` times, an interval apart, on `clock`.
    fn beat_for(&mut self, n: u32, clock: &SimClock) {
        for _ in 0..n {
            clock.advance(std::time::Duration::from_millis(u64::from(
                TIMING.interval_ms,
            )));
            let report = self.beater.beat(clock.now_ns(), wall(clock));
            assert!(report.stopped.is_none(), "{report:?}");
            assert_eq!(report.landed.len(), 4, "{report:?}");
        }
    }

    fn write_file(&self, name: &str, tag: u8) -> u32 {
        let number = self
            .live
            .meta(|g| g.create_file(&path(name), MIB, &CreateOptions::default()))
            .unwrap()
            .unwrap()
            .number;
        let mut h = self.live.handle(8).unwrap();
        h.write(number, 0, &vec![tag; 64 << 10]).unwrap();
        h.sync().unwrap();
        number
    }

    /// Let go cleanly: the release, then the dismount.
    fn dismount(mut self, clock: &SimClock) {
        assert_eq!(self.beater.release(wall(clock)).len(), 4);
        self.live.dismount().unwrap();
    }

    /// Die: nothing more is written (no release, no checkpoint).
    fn crash(self, shared: &SharedSim) {
        drop(self);
        shared.reset_handles();
    }
}

/// The world while a host waits on it: the simulated clock, with the
/// owner (if it is alive) beating every interval meanwhile.
struct World {
    clock: SimClock,
    owner: Mutex<Option<Mounted>>,
    next_beat_ns: Mutex<u64>,
}

impl World {
    fn new(clock: &SimClock, owner: Option<Mounted>) -> Self {
        Self {
            next_beat_ns: Mutex::new(clock.now_ns() + u64::from(TIMING.interval_ms) * 1_000_000),
            clock: clock.clone(),
            owner: Mutex::new(owner),
        }
    }
}

impl Clock for World {
    fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    fn sleep_until_ns(&self, until_ns: u64) {
        let mut next = self.next_beat_ns.lock().unwrap();
        while *next <= until_ns {
            self.clock.advance_to(*next);
            if let Some(owner) = self.owner.lock().unwrap().as_mut() {
                let report = owner.beater.beat(*next, wall(&self.clock));
                assert!(report.stopped.is_none(), "{report:?}");
            }
            *next += u64::from(TIMING.interval_ms) * 1_000_000;
        }
        self.clock.advance_to(until_ns);
    }
}

fn host_a() -> HostIdentity {
    host("hostA", 0xA)
}

fn host_b() -> HostIdentity {
    host("hostB", 0xB)
}

fn owner_now(shared: &SharedSim, ids: &[DeviceId], me: Uuid) -> Owner {
    let mut engine = shared.handle();
    let disks = heartbeat::members(&mut engine, ids, GROUP);
    heartbeat::owner(me, &heartbeat::read_beats(&mut engine, GROUP, &disks))
}

fn mount_error(r: Result<Mounted, GroupError>) -> String {
    match r {
        Ok(_) => panic!("the mount was not refused"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_second_host_is_refused_while_the_owner_beats_and_force_does_not_help() {
    let (shared, ids) = group_on_disks();
    let clock = SimClock::new();
    let mut a = mount(&shared, &ids, &host_a(), Takeover::Refuse, &clock, &clock).unwrap();
    a.write_file("before", 1);
    a.beat_for(3, &clock);

    // Refused at once, naming the host and when it last wrote.
    let at = clock.now_ns();
    let err = mount_error(mount(
        &shared,
        &ids,
        &host_b(),
        Takeover::Refuse,
        &clock,
        &clock,
    ));
    assert_eq!(clock.now_ns(), at, "a plain refusal waits for nothing");
    assert!(err.contains("group MH is mounted by host hostA"), "{err}");
    assert!(err.contains(&Uuid::from_u128(0xA).to_string()), "{err}");
    assert!(err.contains("2025-11-21T04:40:03.000Z"), "{err}");
    assert!(err.contains("--force"), "{err}");

    // Forced while it beats: the watch sees it move, and refuses.
    let world = World::new(&clock, Some(a));
    let err = mount_error(mount(
        &shared,
        &ids,
        &host_b(),
        Takeover::Force,
        &world,
        &clock,
    ));
    assert!(err.contains("moved while this host watched"), "{err}");
    assert!(err.contains("hostA"), "{err}");
    assert!(
        clock.now_ns() - at <= 2 * SECOND_NS,
        "refused at the first beat it saw, not after the whole watch"
    );

    // B wrote nothing: A still owns every disk and goes on writing.
    let a = world.owner.into_inner().unwrap().unwrap();
    match owner_now(&shared, &ids, host_b().id) {
        Owner::Other(beat) => assert_eq!(beat.heartbeat.host_id, host_a().id),
        Owner::Free => panic!("host B's claim took the group"),
    }
    a.write_file("after", 2);
}

#[test]
fn a_crashed_owner_is_taken_over_only_with_force_and_after_the_watch() {
    let (shared, ids) = group_on_disks();
    let clock = SimClock::new();
    let mut a = mount(&shared, &ids, &host_a(), Takeover::Refuse, &clock, &clock).unwrap();
    let number = a.write_file("kept", 7);
    a.beat_for(2, &clock);
    a.crash(&shared);

    // Without --force: refused, without waiting.
    let at = clock.now_ns();
    let err = mount_error(mount(
        &shared,
        &ids,
        &host_b(),
        Takeover::Refuse,
        &clock,
        &clock,
    ));
    assert!(err.contains("hostA") && err.contains("--force"), "{err}");
    assert_eq!(clock.now_ns(), at);

    // With --force: the whole watch, then the group is B's.
    let world = World::new(&clock, None);
    let mut b = mount(&shared, &ids, &host_b(), Takeover::Force, &world, &clock).unwrap();
    let waited = clock.now_ns() - at;
    let watch = TIMING.fail_after_ns() * ACTIVITY_CHECK_FACTOR;
    assert!(
        (watch..watch + SECOND_NS).contains(&waited),
        "watched {waited} ns, not the {watch} ns twice A's timeout takes"
    );
    let mut back = vec![0u8; 64 << 10];
    b.live
        .handle(8)
        .unwrap()
        .read(number, 0, &mut back)
        .unwrap();
    assert_eq!(back, vec![7u8; 64 << 10], "A's synced data is there for B");
    b.beat_for(1, &clock);
    match owner_now(&shared, &ids, host_a().id) {
        Owner::Other(beat) => assert_eq!(beat.heartbeat.host_id, host_b().id),
        Owner::Free => panic!("B does not hold the group"),
    }
}

#[test]
fn a_clean_dismount_or_this_hosts_own_crash_lets_the_next_mount_go_at_once() {
    let (shared, ids) = group_on_disks();
    let clock = SimClock::new();
    let mut a = mount(&shared, &ids, &host_a(), Takeover::Refuse, &clock, &clock).unwrap();
    a.write_file("one", 1);
    a.beat_for(2, &clock);
    a.dismount(&clock);
    assert_eq!(owner_now(&shared, &ids, host_b().id), Owner::Free);

    // Another host, no force, no wait.
    let at = clock.now_ns();
    let b = mount(&shared, &ids, &host_b(), Takeover::Refuse, &clock, &clock).unwrap();
    assert_eq!(clock.now_ns(), at, "nothing to wait for after a release");
    b.write_file("two", 2);
    b.crash(&shared);

    // B again, after its own crash: its own heartbeat, no wait (its group
    // lock says no process of B holds the group).
    let b_again = HostIdentity::new(host_b().id, "hostB", 9999);
    let b2 = mount(&shared, &ids, &b_again, Takeover::Refuse, &clock, &clock).unwrap();
    assert_eq!(clock.now_ns(), at);
    b2.write_file("three", 3);
}

#[test]
fn an_owner_whose_heartbeat_cannot_land_stops_writing_after_its_timeout() {
    let (shared, ids) = group_on_disks();
    let clock = SimClock::new();
    let mut a = mount(&shared, &ids, &host_a(), Takeover::Refuse, &clock, &clock).unwrap();
    let number = a.write_file("f", 1);
    // The heartbeat block of every disk refuses writes (the disks answer
    // everything else: the owner may still write, but no one could see it
    // beat).
    shared.with(|sim| {
        for d in &ids {
            sim.disk_mut(*d).faults.write_error_ranges = [HEARTBEAT_BLOCK].into();
        }
    });
    let interval = std::time::Duration::from_millis(u64::from(TIMING.interval_ms));
    for _ in 0..u32::from(TIMING.fail_intervals) {
        clock.advance(interval);
        let report = a.beater.beat(clock.now_ns(), wall(&clock));
        assert!(
            report.landed.is_empty() && report.failed.len() == 4,
            "{report:?}"
        );
        assert!(report.stopped.is_none(), "stopped before its timeout");
    }
    // Still within the timeout: the group writes.
    a.live
        .handle(8)
        .unwrap()
        .write(number, 0, &[2u8; 4096])
        .unwrap();
    clock.advance(interval);
    let report = a.beater.beat(clock.now_ns(), wall(&clock));
    let why = report.stopped.expect("stopped past its timeout");
    assert!(
        why.contains("could not be written to any of its disks for 10 s"),
        "{why}"
    );
    // Past it: nothing more is written, metadata or data.
    let err = a
        .live
        .meta(|g| g.create_file(&path("g"), MIB, &CreateOptions::default()))
        .unwrap_err();
    assert!(matches!(err, GroupError::Fenced(_)), "{err}");
    let err = a
        .live
        .handle(8)
        .unwrap()
        .write(number, 0, &[3u8; 4096])
        .unwrap_err();
    assert!(err.to_string().contains("heartbeat"), "{err}");
    // And it never lets go: the group may be another host's by now.
    assert!(a.beater.release(wall(&clock)).is_empty());
}

#[test]
fn a_disk_the_heartbeat_cannot_write_is_a_failed_disk() {
    let (shared, ids) = group_on_disks();
    let clock = SimClock::new();
    let mut a = mount(&shared, &ids, &host_a(), Takeover::Refuse, &clock, &clock).unwrap();
    shared.with(|sim| sim.disk_mut(ids[3]).faults.write_error_ranges = [HEARTBEAT_BLOCK].into());
    clock.advance(std::time::Duration::from_secs(1));
    let report = a.beater.beat(clock.now_ns(), wall(&clock));
    assert_eq!(report.failed, vec![3]);
    assert_eq!(report.landed, vec![0, 1, 2]);
    // The next commit takes it offline, as any disk a write failed on.
    a.write_file("f", 1);
    let states: Vec<String> = a
        .live
        .meta(|g| g.disks().iter().map(|d| format!("{:?}", d.state)).collect())
        .unwrap();
    assert_eq!(states[3], "Offline", "{states:?}");
    assert_eq!(states[..3], ["Online", "Online", "Online"], "{states:?}");
    // The heartbeat goes on where it can.
    clock.advance(std::time::Duration::from_secs(1));
    let report = a.beater.beat(clock.now_ns(), wall(&clock));
    assert_eq!((report.landed, report.failed), (vec![0, 1, 2], vec![]));
}

#[test]
fn an_owner_that_wakes_to_find_its_group_taken_over_stops_and_never_lets_go() {
    let (shared, ids) = group_on_disks();
    let clock = SimClock::new();
    let mut a = mount(&shared, &ids, &host_a(), Takeover::Refuse, &clock, &clock).unwrap();
    let number = a.write_file("f", 1);
    a.beat_for(1, &clock);
    // A freezes (a paused VM): no beat while B watches and takes over.
    let world = World::new(&clock, None);
    let mut b = mount(&shared, &ids, &host_b(), Takeover::Force, &world, &clock).unwrap();
    b.beat_for(1, &clock);
    // A wakes: its next beat sees B's newer heartbeat and stops A.
    clock.advance(std::time::Duration::from_secs(1));
    let report = a.beater.beat(clock.now_ns(), wall(&clock));
    let why = report.stopped.expect("A found the takeover");
    assert!(why.contains("was taken over by host hostB"), "{why}");
    assert!(report.landed.is_empty(), "A wrote no heartbeat over B's");
    let err = a
        .live
        .handle(8)
        .unwrap()
        .write(number, 0, &[9u8; 4096])
        .unwrap_err();
    assert!(err.to_string().contains("taken over"), "{err}");
    assert!(
        a.beater.release(wall(&clock)).is_empty(),
        "no release over B's claim"
    );
    // B holds the group and writes on.
    b.beat_for(1, &clock);
    b.write_file("g", 2);
}
