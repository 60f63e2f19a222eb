//! What the life-cycle actor asks of the group's disks: offline and online
//! (with wrong images put in an OFFLINE disk's place), scrub, reclaim,
//! replace, rebalance, disks added and dropped.

use super::*;

/// What the life-cycle actor may put in an OFFLINE disk's place before it
/// asks `online` (issue 34 part 2): what an operator restoring a snapshot,
/// emptying a file or swapping a LUN leaves there.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WrongImage {
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
    pub(crate) fn refusal(self) -> (&'static str, &'static str) {
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
pub(crate) fn other_group_disk() -> &'static DiskImage {
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
pub(crate) fn wrong_image_online(
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
pub(crate) fn offline_now(world: &World, disk: &str, seed: u64) -> bool {
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
pub(crate) fn online_now(world: &World, disk: &str, power: usize, seed: u64) -> bool {
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
pub(crate) fn scrub_now(world: &World, rng: &mut Rand, seed: u64) -> bool {
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
pub(crate) fn reclaim_now(world: &World, rng: &mut Rand, seed: u64) -> bool {
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
pub(crate) fn refused(e: &GroupError) -> bool {
    matches!(
        e,
        GroupError::Invalid(_) | GroupError::NotFound(_) | GroupError::NoSpace(_)
    )
}

/// `group replace`: spare `k` joins failure group `fg` in place of `disk`
/// (OFFLINE, or the replace is refused), which is dropped by force; the
/// rebalance rebuilds its copies from their mirrors. Returns whether the
/// actor must stop.
pub(crate) fn replace_disk(
    world: &World,
    rng: &mut Rand,
    disk: &str,
    k: usize,
    fg: usize,
    seed: u64,
) -> bool {
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
pub(crate) fn rebalance_now(world: &World, rng: &mut Rand, seed: u64) -> bool {
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
pub(crate) fn change_disks(
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
