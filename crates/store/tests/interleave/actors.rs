//! The actors, each a real thread running product code: two writers, the
//! metadata actor, the fault actor and the life-cycle actor.

use super::*;

// ---------------------------------------------------------------------------
// Actors

pub(crate) fn writer(world: &World, seed: u64, me: usize) {
    let mut rng = Rand::new(seed ^ ((me as u64 + 1) * 0x5851_F42D));
    let mut handle = match world.live.handle(64) {
        Ok(h) => h,
        Err(e) => {
            world.failed(&e, "handle", seed, None);
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
                checksums: Some(rng.chance(50)),
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
                    if world.failed(&e, &format!("create {name}"), seed, None) {
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
                    if world.failed(&e, &format!("punch {name}"), seed, None) {
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
                    if world.failed(&e, &format!("write {name}"), seed, None) {
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
                let checked = world.silent_damage.load(Ordering::SeqCst);
                let read = if checked {
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
                    if world.failed(&e, &format!("read {name}"), seed, None) {
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
                drop(m);
                world.check(if checked {
                    "writers: read back with their own check (silent damage possible)"
                } else {
                    "writers: read back exactly what was written"
                });
            }
            // Sync: every acknowledged write of this actor is durable.
            78..=87 => {
                if let Err(e) = handle.sync() {
                    if world.failed(&e, "sync", seed, None) {
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
                        if world.failed(&e, &format!("resize {name}"), seed, None) {
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
                        if world.failed(&e, &format!("remove {name}"), seed, None) {
                            return;
                        }
                    }
                }
            }
        }
    }
}

pub(crate) fn metadata_actor(world: &World, seed: u64) {
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
                        if world.failed(&e, &format!("mkdir {name}"), seed, None) {
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
                        if world.failed(&e, &format!("mkalias {alias}"), seed, None) {
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
                        if world.failed(&e, &format!("scratch {name}"), seed, None) {
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// The one failure group faults and maintenance hit in a seed: the group
/// must survive (one failure group down at a time), so every acknowledged
/// write must be there after recovery.
pub(crate) fn victim_fg(cfg: &Config, seed: u64) -> usize {
    let fgs = cfg.disks.iter().map(|d| d.1).max().unwrap_or(0) as u64 + 1;
    Rand::new(seed ^ 0xFA17).below(fgs) as usize
}

/// Injects the seed's faults (its [`FaultPlan`]) on the disks of one
/// failure group of a mirrored group: a copy of everything survives on the
/// others.
pub(crate) fn fault_actor(world: &World, seed: u64) {
    let mut rng = Rand::new(seed ^ 0xFA17_0001);
    let plan = world.plan;
    if !plan.any() {
        return;
    }
    let victims: Vec<DeviceId> = world.victims.iter().copied().collect();
    // The kinds this seed injects, with their weights; clearing the
    // transient faults is always one.
    let kinds: Vec<(u64, u64)> = [
        (plan.lose, 5, 0),
        (plan.write_errors, 25, 1),
        (plan.read_errors, 25, 2),
        (plan.misdirect, 15, 3),
        (plan.rot, 15, 4),
        (true, 15, 5),
    ]
    .into_iter()
    .filter(|(on, _, _)| *on)
    .map(|(_, w, k)| (w, k))
    .collect();
    let weights: u64 = kinds.iter().map(|(w, _)| w).sum();
    // In seeds whose plan says so, at one of its turns, a disk stops
    // answering (its own stream, so the other faults stay as they were).
    let mut hang = Rand::new(seed ^ 0x4A96);
    let hang_at = plan
        .hang
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
            *world.hung.lock().unwrap() = Some(disk);
            world.shared.with(|sim| sim.hang_disk(disk, true));
            if trace() {
                eprintln!("  faults: disk {} hangs", disk.0);
            }
        }
        let disk = victims[rng.below(victims.len() as u64) as usize];
        let mut draw = rng.below(weights);
        let kind = kinds
            .iter()
            .find(|(w, _)| {
                let hit = draw < *w;
                draw = draw.saturating_sub(*w);
                hit
            })
            .map_or(5, |(_, k)| *k);
        if kind != 5 {
            world.faulted.store(true, Ordering::SeqCst);
        }
        if kind == 3 || kind == 4 {
            // Before the damage: a rebalance that starts after it moves it.
            world.silent_damage.store(true, Ordering::SeqCst);
        }
        if kind == 0 {
            world.lost.lock().unwrap().insert(disk);
        }
        world.shared.with(|sim| {
            let f = &mut sim.disk_mut(disk).faults;
            match kind {
                0 => sim.lose_disk(disk),
                1 => f.write_error_per_million = 30_000,
                2 => f.read_error_per_million = 30_000,
                3 => f.misdirect_per_million = 20_000,
                4 => {
                    // Bit rot somewhere in the data area.
                    let size = sim.geometry(disk).map_or(0, |g| g.size_bytes);
                    let at = 4 * MIB + rng.below((size.saturating_sub(8 * MIB)) / 4096) * 4096;
                    sim.rot(disk, at, (rng.below(8)) as u8);
                }
                _ => {
                    f.write_error_per_million = 0;
                    f.read_error_per_million = 0;
                    f.misdirect_per_million = 0;
                }
            }
        });
        if trace() {
            eprintln!("  faults: kind {kind} on disk {}", disk.0);
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
pub(crate) fn lifecycle_actor(world: &World, seed: u64) {
    // The fault actor's failure group.
    let fg = victim_fg(&world.cfg, seed);
    let mut rng = Rand::new(seed ^ 0x11FE);
    let ours: Vec<usize> = (0..world.cfg.disks.len())
        .filter(|i| world.cfg.disks[*i].1 == fg)
        .collect();
    let mut spares = 0..world.cfg.spares.len();
    let mirrored = world.cfg.redundancy != Redundancy::External;
    // In some seeds, a disk taken OFFLINE finds another image in its place
    // when `online` is asked (its own stream, so the rest of the seed stays
    // as it was); images of our disks saved before their offlines.
    let mut wrong = Rand::new(seed ^ 0x1A6E);
    let wrong_images = mirrored && wrong.chance(60);
    let mut saved: BTreeMap<String, DiskImage> = BTreeMap::new();
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
            if world.failed(&e, "set thin_provisioned", seed, None) {
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
        // An image saved while the disk is in service: the offline below
        // stamps the disk, so it is older than what the group takes back.
        if wrong_images && (wrong.chance(50) || !saved.contains_key(&disk)) {
            match world.disk_state(&disk, seed) {
                Ok(Some((DiskState::Online, false))) => {
                    if let Some(device) = world.device_of(&disk) {
                        saved.insert(disk.clone(), world.shared.with(|sim| sim.image(device)));
                    }
                }
                Ok(_) => {}
                Err(stop) => {
                    if stop {
                        return;
                    }
                }
            }
        }
        world.count_op();
        if offline_now(world, &disk, seed) {
            return;
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
        if wrong_images && wrong.chance(60) {
            let image = match wrong.below(3) {
                0 => saved.get(&disk).map(|i| (WrongImage::Older, i.clone())),
                1 => Some((WrongImage::Blank, DiskImage::blank())),
                _ => Some((WrongImage::OtherGroup, other_group_disk().clone())),
            };
            if let Some((kind, image)) = image {
                if wrong_image_online(world, &disk, kind, &image, power, seed) {
                    return;
                }
                world.count_op();
            }
        }
        if online_now(world, &disk, power, seed) {
            return;
        }
    }
}
