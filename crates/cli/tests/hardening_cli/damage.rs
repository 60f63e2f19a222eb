//! Damage and failing disks: an immutable member, a stale entry written
//! back, two maps claiming one AU, a disk failing under a copy, copies out
//! to block devices and never over a group's disk (items 2, 3, 6, 8, 20).

use super::*;

/// Item 20: an immutable member (`chattr +i`). Reading commands work (they
/// open it read-only); a command that writes treats it as a missing disk —
/// the group runs degraded, as with a disk that is not there — and the
/// reason names the attribute and how to clear it, not "run as root".
#[test]
fn an_immutable_member_degrades_the_group_and_is_named() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        prerequisite::missing("chattr +i needs root");
        return;
    }
    let rig = Door::held();
    rig.create("DATA", "d", 4);
    let src = random_file(&rig.path("src.bin"), 2 * MIB, 20);
    rig.cairn(&["cp", src.to_str().unwrap(), "+DATA/f.dbf"])
        .ok();
    let d3 = rig.path("d3.img");
    if let Err(why) = tool("chattr", &["+i", d3.to_str().unwrap()]) {
        prerequisite::missing(&why);
        return;
    }
    struct Mutable<'a>(&'a Path);
    impl Drop for Mutable<'_> {
        fn drop(&mut self) {
            let _ = tool("chattr", &["-i", self.0.to_str().unwrap()]);
        }
    }
    let _clear = Mutable(&d3);
    rig.assert_reads_back("+DATA/f.dbf", &src);
    rig.assert_all_online("DATA");
    let run = rig
        .cairn(&["cp", src.to_str().unwrap(), "+DATA/g.dbf"])
        .ok();
    assert!(
        run.stderr.contains("immutable (chattr +i)") && run.stderr.contains("chattr -i"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("run as root"), "{}", run.stderr);
    assert_eq!(rig.disks_json("DATA")[3]["state"], "OFFLINE");
    rig.assert_reads_back("+DATA/g.dbf", &src);
}

/// Every copy of file `number`'s directory entry: (disk file, byte offset).
fn entry_places(rig: &Door, number: u32) -> Vec<(PathBuf, u64)> {
    with_group(rig, |g, paths| {
        let per_au = g.au_bytes() / 4096;
        let extent = g.extents(cairn_format::group::FILE_DIRECTORY).unwrap()
            [(u64::from(number) / per_au) as usize];
        extent
            .copies()
            .iter()
            .map(|c| {
                let device = g.disk_device(c.disk).unwrap();
                (
                    paths[&device.0].clone(),
                    u64::from(c.au) * g.au_bytes() + (u64::from(number) % per_au) * 4096,
                )
            })
            .collect()
    })
}

fn file_number(rig: &Door, path: &str) -> u32 {
    let listed = rig.cairn(&["ls", path, "--json"]).ok().json();
    listed[0]["file"]["number"].as_u64().unwrap() as u32
}

two_hosts!(
    a_stale_mirror_copy_does_not_bring_a_deleted_file_back,
    stale_mirror_copy
);

/// Item 6, end to end: a deleted file's entry, put back on one mirror as a
/// lost in-place write would leave it, must not bring the file back: the
/// emptied entry is newer.
///
/// A file entry's old copy written back over one mirror after the file was
/// removed (while nothing serves the group): the next mount — a held
/// command's, or the service's as it starts — sees it out of date beside
/// the good copy, and says so; the file never comes back, and the stale
/// copy is rewritten.
fn stale_mirror_copy(host: Host) {
    let Some(mut rig) = Door::new(host) else {
        return;
    };
    rig.create("DATA", "d", 2);
    let src = random_file(&rig.path("src.bin"), MIB, 30);
    rig.cairn(&["cp", src.to_str().unwrap(), "+DATA/x.dbf"])
        .ok();
    let number = file_number(&rig, "+DATA/x.dbf");
    let places = entry_places(&rig, number);
    let (disk, at) = &places[0];
    let old = read_at(disk, *at, 4096);
    rig.start();
    rig.cairn(&["rm", "+DATA/x.dbf"]).ok();
    rig.stop();
    write_at(disk, *at, &old);
    rig.start();
    let run = rig.cairn(&["group", "check", "DATA"]).ok();
    let said = match rig.service() {
        None => run.stderr.clone(),
        Some(s) => s.log(),
    };
    assert!(
        said.contains("out of date beside a good one"),
        "{said} {run:?}"
    );
    rig.cairn(&["mkdir", "+DATA/d"]).ok();
    assert_eq!(rig.ls_names("+DATA"), ["d"]);
    rig.check_clean("DATA");
    rig.stop();
    assert_ne!(
        read_at(disk, *at, 4096),
        old,
        "the stale copy was rewritten"
    );
}

two_hosts!(
    an_au_claimed_by_two_files_is_named_and_rm_works,
    au_claimed_twice
);

/// Item 8, end to end: a checksum-valid entry whose map claims an AU another
/// file owns. Every command names both files; `rm` of either works (it used
/// to trip a double-free assertion), and repair leaves a clean group.
///
/// Two files' maps made to claim one AU (while nothing serves the group):
/// the mount names the damage and both files — held, on the command's
/// stderr; served, in the service's log as it starts — `check` says the AU
/// is owned twice, and both files can still be removed and the group
/// repaired clean, through either door.
fn au_claimed_twice(host: Host) {
    use cairn_format::group::{FileEntry, FILE_DIRECTORY};
    use cairn_format::meta::{self, BlockId, BlockType};
    let Some(mut rig) = Door::new(host) else {
        return;
    };
    rig.create("DATA", "d", 2);
    let src = random_file(&rig.path("src.bin"), MIB, 31);
    rig.cairn(&["cp", src.to_str().unwrap(), "+DATA/x.dbf"])
        .ok();
    rig.cairn(&["cp", src.to_str().unwrap(), "+DATA/y.dbf"])
        .ok();
    let (x, y) = (
        file_number(&rig, "+DATA/x.dbf"),
        file_number(&rig, "+DATA/y.dbf"),
    );
    let (uuid, x_extent) = with_group(&rig, |g, _| (g.uuid(), g.extents(x).unwrap()[0]));
    let id = BlockId {
        block_type: BlockType::FileEntry,
        owner: FILE_DIRECTORY,
        owner_tag: 0,
        index: u64::from(y),
    };
    for (disk, at) in entry_places(&rig, y) {
        let bytes = read_at(&disk, at, 4096);
        let generation = meta::open(&bytes, id, uuid).unwrap();
        let mut entry = FileEntry::decode(&bytes, y).unwrap().unwrap();
        entry.direct[0] = x_extent;
        let mut block = meta::empty_block();
        entry.encode_into(&mut block);
        meta::seal(&mut block, id, uuid, generation);
        write_at(&disk, at, &block[..]);
    }
    rig.start();
    let run = rig.cairn(&["ls", "+DATA"]).ok();
    let said = match rig.service() {
        None => run.stderr.clone(),
        Some(s) => s.line_with("DAMAGE"),
    };
    assert!(
        said.contains("DAMAGE") && said.contains("+DATA/x.dbf") && said.contains("+DATA/y.dbf"),
        "{said}"
    );
    let run = rig.cairn(&["group", "check", "DATA"]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("owned twice"), "{}", run.stdout);
    rig.cairn(&["rm", "+DATA/x.dbf"]).ok();
    rig.cairn(&["rm", "+DATA/y.dbf"]).ok();
    rig.cairn(&["group", "check", "DATA", "--repair"]).ok();
    rig.check_clean("DATA");
    rig.stop();
}

/// Item 2, the other half: a disk that fails for real while a copy runs
/// (its file system shut down under the open file) is taken offline, the
/// copy completes from the other copies — and the command says so on stderr
/// instead of printing nothing.
#[test]
fn a_disk_failing_during_a_copy_is_taken_offline_and_said() {
    let rig = Door::held();
    let fs = match SmallFs::mount(rig.rig.dir.path(), "mnt", 1536 * MIB) {
        Ok(fs) => fs,
        Err(why) => {
            prerequisite::missing(&why);
            return;
        }
    };
    let discover = format!("{},{}/*.img", rig.rig.discover, fs.mnt.display());
    let mut args: Vec<String> = ["group", "create", "DATA", "--au-size", "1M"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for i in 0..3 {
        let disk = sparse(&rig.path(&format!("d{i}.img")), GIB);
        args.push("--disk".into());
        args.push(format!("{}=FG{}", disk.display(), 1 + i / 2));
    }
    let failing = sparse(&fs.mnt.join("d3.img"), GIB);
    args.push("--disk".into());
    args.push(format!("{}=FG2", failing.display()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    rig.cairn_discovering(&discover, &args).ok();

    let fifo = rig.path("feed.fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let copy = cairn_command(&discover, &[("CAIRN_RUN_DIR", &rig.rig.run_dir)])
        .args(["cp", fifo.to_str().unwrap(), "+DATA/x.dbf"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let chunk = vec![0xE1u8; MIB as usize];
    {
        use std::io::Write;
        let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        for _ in 0..8 {
            w.write_all(&chunk).unwrap();
        }
        fs.shut_down();
        for _ in 0..24 {
            w.write_all(&chunk).unwrap();
        }
    }
    let run = Run::from(copy.wait_with_output().unwrap()).ok();
    assert!(
        run.stderr.contains("DATA_0003") && run.stderr.contains("is now OFFLINE"),
        "{}",
        run.stderr
    );
    drop(fs);
    let disks = rig
        .cairn_discovering(&discover, &["group", "disks", "DATA", "--json"])
        .ok()
        .json();
    assert_eq!(disks[3]["state"], "OFFLINE", "{disks:#}");
    let out = rig.path("back.bin");
    rig.cairn_discovering(&discover, &["cp", "+DATA/x.dbf", out.to_str().unwrap()])
        .ok();
    let back = std::fs::read(&out).unwrap();
    assert_eq!(back.len() as u64, 32 * MIB);
    assert!(back.iter().all(|b| *b == 0xE1));
}

two_hosts!(
    a_copy_out_to_a_block_device_writes_through_with_protections,
    copy_out_to_a_device
);

/// Item 3 on block devices: a copy out to a device node writes through it in
/// place (never replacing the node with a file, never reading it into
/// memory), with the protections of a write benchmark: a device carrying a
/// filesystem only with --force, one too small never.
///
/// A copy out to a block device writes through it (never replaced by a
/// file), refuses one that carries a file system unless `--force`, and one
/// too small, writing nothing — the same whoever reads the group.
fn copy_out_to_a_device(host: Host) {
    use cairn_io::test_support::LoopDevice;
    let Some(mut rig) = Door::new(host) else {
        return;
    };
    rig.create("DATA", "d", 2);
    rig.start();
    let src = random_file(&rig.path("src.bin"), 12 * MIB + 4096, 40);
    rig.cairn(&["cp", src.to_str().unwrap(), "+DATA/f.dbf"])
        .ok();
    let device = |name: &str, size: u64| match LoopDevice::create(&rig.path(name), size, 4096) {
        Ok(d) => Some(d),
        Err(why) => {
            prerequisite::missing(&why);
            None
        }
    };
    let Some(fresh) = device("fresh.bin", 64 * MIB) else {
        return;
    };
    let fresh_path = fresh.path.to_str().unwrap();
    rig.cairn(&["cp", "+DATA/f.dbf", fresh_path]).ok();
    assert!(std::fs::metadata(&fresh.path)
        .unwrap()
        .file_type()
        .is_block_device());
    let expected = std::fs::read(&src).unwrap();
    assert_eq!(read_at(&fresh.path, 0, expected.len()), expected);

    let Some(owned) = device("owned.bin", 64 * MIB) else {
        return;
    };
    let owned_path = owned.path.to_str().unwrap();
    tool("mkfs.ext4", &["-q", "-F", owned_path]).unwrap();
    rig.cairn(&["cp", "+DATA/f.dbf", owned_path])
        .refused("--force");
    rig.cairn(&["cp", "+DATA/f.dbf", owned_path, "--force"])
        .ok();
    assert_eq!(read_at(&owned.path, 0, expected.len()), expected);

    let Some(small) = device("small.bin", 8 * MIB) else {
        return;
    };
    let before = digest(&small.path);
    rig.cairn(&["cp", "+DATA/f.dbf", small.path.to_str().unwrap()])
        .refused("smaller than the");
    assert_eq!(digest(&small.path), before, "nothing was written");
    rig.stop();
}

two_hosts!(
    a_copy_out_never_writes_over_a_groups_disk,
    copy_out_over_a_member
);

/// Review: a copy out never writes over a disk of a group, with or without
/// --force — not a member image (a regular file), not any other label or
/// filesystem without --force; and `-` is standard output.
///
/// A copy out never writes over a disk of a group — not with `--force`,
/// and not while the service holds that group — and takes a file system's
/// file only with `--force`; `-` is standard output.
fn copy_out_over_a_member(host: Host) {
    let Some(mut rig) = Door::new(host) else {
        return;
    };
    rig.create("DATA", "d", 2);
    rig.start();
    let src = random_file(&rig.path("src.bin"), MIB, 50);
    rig.cairn(&["cp", src.to_str().unwrap(), "+DATA/f.dbf"])
        .ok();
    // All of the disk but its heartbeat block, which a service rewrites
    // every second.
    let heartbeat = cairn_format::heartbeat::HEARTBEAT_OFFSET_BYTES;
    let d1_now = || digest_but(&rig.path("d1.img"), heartbeat..heartbeat + 4096);
    let before = d1_now();
    for extra in [&[][..], &["--force"][..]] {
        let mut args = vec!["cp", "+DATA/f.dbf"];
        let d1 = rig.arg("d1.img");
        args.push(&d1);
        args.extend(extra);
        rig.cairn(&args)
            .refused("is disk DATA_0001 of disk group DATA");
    }
    assert_eq!(d1_now(), before, "the member was not written");
    let ext4 = sparse(&rig.path("fs.bin"), 64 * MIB);
    tool("mkfs.ext4", &["-q", "-F", ext4.to_str().unwrap()]).unwrap();
    rig.cairn(&["cp", "+DATA/f.dbf", ext4.to_str().unwrap()])
        .refused("--force");
    rig.cairn(&["cp", "+DATA/f.dbf", ext4.to_str().unwrap(), "--force"])
        .ok();
    assert_eq!(digest(&ext4), digest(&src));
    let out = cairn_command(&rig.rig.discover, &[("CAIRN_RUN_DIR", &rig.rig.run_dir)])
        .current_dir(rig.rig.dir.path())
        .args(["cp", "+DATA/f.dbf", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stdout == std::fs::read(&src).unwrap(),
        "standard output"
    );
    assert!(!rig.path("-").exists());
    rig.assert_all_online("DATA");
    rig.stop();
}
