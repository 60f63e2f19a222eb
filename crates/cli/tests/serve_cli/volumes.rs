//! Volumes: block devices over group files, carrying a file system through
//! the service, listed and let go of when their group stops, attached again
//! after a kill -9.

use super::*;

/// Issue 34 item 19: two volumes attached (not mounted), then a double
/// failure — every disk's file system shut down — stops the group while
/// one is written. `volume list` still lists both, and `volume detach`
/// lets go of one, by what the kernel says of their devices (the stopped
/// group answers nothing about its files); SIGTERM still stops the
/// service, detaching the other, and the mount goes.
#[test]
fn volumes_of_a_group_a_double_failure_stopped_are_listed_detached_and_let_go_at_sigterm() {
    if !fuse_here() || !loop_here() {
        return;
    }
    let rig = Rig::discovering(|dir| format!("{}/dying/*.img", dir.display()));
    let fs = match SmallFs::mount(rig.dir.path(), "dying", 1024 * MIB) {
        Ok(fs) => fs,
        Err(why) => {
            prerequisite::missing(&why);
            return;
        }
    };
    group_on(
        &rig,
        [&fs.mnt, &fs.mnt, &fs.mnt, &fs.mnt],
        &["--au-size", "1M"],
    );
    let serving = Service::start(&rig, &[]);
    let mut devices = Vec::new();
    let mut guards = Vec::new();
    for v in ["v1", "v2"] {
        let name = format!("+DATA/vol/{v}");
        rig.cairn(&["volume", "create", &name, "--size", "64M"])
            .ok();
        let device = rig
            .cairn(&["volume", "attach", &name])
            .ok()
            .stdout
            .trim()
            .to_string();
        guards.push(VolumeGuard {
            device: device.clone(),
            mount: rig.path(&format!("unused-{v}")),
            owner: rig.path(""),
        });
        devices.push(device);
    }
    fs.shut_down();
    // Written through the device: every copy's disk fails, the group stops.
    let dd = std::process::Command::new("dd")
        .args([
            "if=/dev/zero",
            &format!("of={}", devices[0]),
            "bs=1M",
            "count=16",
            "oflag=direct",
        ])
        .output()
        .unwrap();
    assert!(!dd.status.success(), "the write must fail: {dd:?}");
    let bound = |device: &str| {
        std::fs::read_to_string(format!(
            "/sys/block/{}/loop/backing_file",
            device.trim_start_matches("/dev/")
        ))
        .unwrap_or_default()
        .contains(rig.dir.path().file_name().unwrap().to_str().unwrap())
    };

    // Listed as the kernel knows them, with a line saying why.
    let listed = rig.cairn(&["volume", "list", "--json"]).ok();
    assert!(
        listed.stderr.contains("stopped"),
        "says the group stopped: {}",
        listed.stderr
    );
    let rows = listed.json();
    let rows = rows.as_array().expect("a list");
    for (v, device) in ["v1", "v2"].iter().zip(&devices) {
        let row = rows
            .iter()
            .find(|r| r["name"] == format!("+DATA/vol/{v}"))
            .unwrap_or_else(|| panic!("{v} listed: {rows:?}"));
        assert_eq!(row["device"], device.as_str(), "{row}");
        assert_eq!(row["state"], "ATTACHED", "{row}");
        assert_eq!(row["size_bytes"], 64 * MIB, "{row}");
    }
    // Detached on the stopped group.
    let out = rig.cairn(&["volume", "detach", "+DATA/vol/v1"]).ok();
    assert!(!bound(&devices[0]), "{} still bound: {out:?}", devices[0]);
    let rows = rig.cairn(&["volume", "list", "--json"]).ok().json();
    assert!(
        rows.as_array()
            .is_some_and(|r| r.len() == 1 && r[0]["name"] == "+DATA/vol/v2"),
        "{rows}"
    );

    // Bounded: a deaf service fails the test.
    let mountpoint = serving.mountpoint.clone();
    let (status, log) = serving.stop();
    eprintln!("serve exited {status} after SIGTERM:\n{log}");
    assert!(log.contains("volume detached for the stop"), "{log}");
    assert!(!bound(&devices[1]), "{} still bound", devices[1]);
    assert!(!mounted(&mountpoint), "the mount is gone");
    drop(guards);
}

#[test]
fn a_volume_carries_a_file_system_through_the_service() {
    if !fuse_here() || !loop_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    // No service: one line saying how to start one (a wrong name first).
    rig.cairn(&["volume", "list"]).refused("cairn serve");
    rig.cairn(&["volume", "create", "+DATA/vol/bad*name", "--size", "64M"])
        .refused("volume name +DATA/vol/bad*name");
    let serving = Service::start(&rig, &[]);
    let created = rig
        .cairn(&[
            "volume",
            "create",
            "+DATA/vol/v1",
            "--size",
            "64M",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(created["size_bytes"], 64 * MIB, "{created}");
    assert_eq!(created["redundancy"], "NORMAL", "{created}");
    rig.cairn(&["volume", "create", "+DATA/vol/v2", "--size", "1000"])
        .refused("whole number");
    rig.cairn(&["volume", "create", "+DATA/vol/bad*name", "--size", "64M"])
        .refused("'*'");
    rig.cairn(&["volume", "create", "+DATA/vol/v1", "--size", "64M"])
        .refused("exists");
    let plain = random_file(&rig.path("plain.bin"), MIB, 3);
    rig.cairn(&["cp", plain.to_str().unwrap(), "+DATA/plain.dbf"])
        .ok();
    rig.cairn(&["volume", "attach", "+DATA/plain.dbf"])
        .refused("not a volume");
    let device = rig
        .cairn(&["volume", "attach", "+DATA/vol/v1"])
        .ok()
        .stdout
        .trim()
        .to_string();
    assert!(device.starts_with("/dev/loop"), "{device}");
    let fs_dir = rig.path("fs");
    std::fs::create_dir_all(&fs_dir).unwrap();
    let guard = VolumeGuard {
        device: device.clone(),
        mount: fs_dir.clone(),
        owner: rig.path(""),
    };
    rig.cairn(&["volume", "attach", "+DATA/vol/v1"])
        .refused("attached already");
    // The same file by another spelling of its name, or another name: the
    // same volume.
    rig.cairn(&["volume", "attach", "+DATA/VOL/V1"])
        .refused("attached already");
    rig.cairn(&["mkalias", "+DATA/vol/v1", "+DATA/v1-alias"])
        .ok();
    rig.cairn(&["volume", "attach", "+DATA/v1-alias"])
        .refused("attached already");
    // Its file is not removed under its device.
    rig.cairn(&["rm", "+DATA/vol/v1"]).refused("volume detach");
    // A discard: the AUs it covers whole are unwritten again and punched
    // out of the member disks (sparse files: thin provisioning holds end
    // to end), the rest zeroed in place; the device reads zeros there.
    let au = rig.cairn(&["group", "list", "--json"]).ok().json()[0]["au_mb"]
        .as_u64()
        .unwrap()
        * MIB;
    let granularity: u64 = std::fs::read_to_string(format!(
        "/sys/block/{}/queue/discard_granularity",
        device.trim_start_matches("/dev/")
    ))
    .unwrap()
    .trim()
    .parse()
    .unwrap();
    assert_eq!(granularity, au, "the loop device discards whole AUs");
    let held = || -> u64 {
        use std::os::unix::fs::MetadataExt;
        (0..4)
            .map(|i| {
                std::fs::metadata(rig.path(&format!("d{i}.img")))
                    .unwrap()
                    .blocks()
                    * 512
            })
            .sum()
    };
    let before = held();
    let data = random_file(&rig.path("raw.bin"), 32 * MIB, 4);
    tool(
        "dd",
        &[
            &format!("if={}", data.display()),
            &format!("of={device}"),
            "bs=1M",
            "oflag=direct",
            "conv=fsync",
            "status=none",
        ],
    )
    .unwrap();
    let written = held();
    assert!(
        written >= before + 2 * 32 * MIB,
        "both copies: {before} -> {written}"
    );
    // 1 MiB past an AU boundary to 1 MiB short of one: whole AUs, and parts.
    tool("blkdiscard", &["-o", "1M", "-l", "30M", &device]).unwrap();
    let after = held();
    assert!(
        // The 2 MiB kept, on both copies; the journal and map blocks the
        // punch wrote.
        after <= before + 2 * 2 * MIB + MIB,
        "the 30 MiB discarded are given back on both copies: {before} -> {written} -> {after}"
    );
    let mut back = vec![0u8; 32 * MIB as usize];
    std::fs::File::open(&device)
        .unwrap()
        .read_exact(&mut back)
        .unwrap();
    let raw = std::fs::read(&data).unwrap();
    assert!(
        back[..MIB as usize] == raw[..MIB as usize],
        "the first MiB stays"
    );
    assert!(back[MIB as usize..31 * MIB as usize]
        .iter()
        .all(|b| *b == 0));
    assert!(
        back[31 * MIB as usize..] == raw[31 * MIB as usize..],
        "the last MiB stays"
    );
    let status = rig.cairn(&["status", "--json"]).ok().json();
    // (The block layer may split the range at the granularity.)
    assert!(
        status["groups"][0]["discards"]["count"].as_u64().unwrap() >= 1,
        "{status}"
    );
    assert!(
        status["groups"][0]["disks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["io"]["discards"]["count"].as_u64().unwrap() > 0),
        "{status}"
    );
    assert_eq!(status["volumes"][0]["discard_bytes"], 30 * MIB, "{status}");
    // A file system on it, a file written, read back after a remount.
    tool("mkfs.ext4", &["-q", "-F", &device]).unwrap();
    tool("mount", &[&device, fs_dir.to_str().unwrap()]).unwrap();
    let data = random_file(&rig.path("data.bin"), 16 * MIB, 5);
    std::fs::copy(&data, fs_dir.join("data.bin")).unwrap();
    tool("sync", &[]).unwrap();
    rig.cairn(&["volume", "detach", "+DATA/vol/v1"])
        .refused(&format!("mounted at {}", fs_dir.display()));
    let listed = rig.cairn(&["volume", "list", "--json"]).ok().json();
    assert_eq!(listed[0]["name"], "+DATA/vol/v1", "{listed}");
    assert_eq!(listed[0]["state"], "ATTACHED", "{listed}");
    assert_eq!(listed[0]["device"], device.as_str(), "{listed}");
    assert_eq!(umount(&fs_dir, 0), 0);
    tool("mount", &[&device, fs_dir.to_str().unwrap()]).unwrap();
    assert_eq!(
        std::fs::read(fs_dir.join("data.bin")).unwrap(),
        std::fs::read(&data).unwrap()
    );
    assert_eq!(umount(&fs_dir, 0), 0);
    // Grown online: the device follows.
    rig.cairn(&["volume", "resize", "+DATA/vol/v1", "--size", "32M"])
        .refused("only grows");
    rig.cairn(&["volume", "resize", "+DATA/vol/v1", "--size", "96M"])
        .ok();
    let sectors: u64 = std::fs::read_to_string(format!(
        "/sys/block/{}/size",
        device.trim_start_matches("/dev/")
    ))
    .unwrap()
    .trim()
    .parse()
    .unwrap();
    assert_eq!(sectors * 512, 96 * MIB);
    let detached = rig.cairn(&["volume", "detach", "+DATA/vol/v1"]).ok();
    assert!(!detached.stdout.contains("still open"), "{detached:?}");
    let listed = rig.cairn(&["volume", "list"]).ok();
    assert!(
        listed
            .stdout
            .lines()
            .any(|l| l.starts_with("+DATA/vol/v1") && l.ends_with("DETACHED")),
        "{listed:?}"
    );
    drop(guard);
    // Attached when the service stops: it lets go of the device (nobody
    // uses it) and unmounts, rather than stay busy.
    let again = rig
        .cairn(&["volume", "attach", "+DATA/vol/v1"])
        .ok()
        .stdout
        .trim()
        .to_string();
    let _again = VolumeGuard {
        device: again.clone(),
        mount: rig.path("no-mount"),
        owner: rig.path(""),
    };
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("volume detached for the stop"), "{log}");
    assert!(
        !Path::new(&format!(
            "/sys/block/{}/loop/backing_file",
            again.trim_start_matches("/dev/")
        ))
        .exists(),
        "{again} is let go of"
    );
    rig.check_clean("DATA");
}

#[test]
fn volumes_are_attached_again_after_a_kill_9() {
    if !fuse_here() || !loop_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let serving = Service::start(&rig, &[]);
    rig.cairn(&["volume", "create", "+DATA/vol/v1", "--size", "32M"])
        .ok();
    let first = rig
        .cairn(&["volume", "attach", "+DATA/vol/v1"])
        .ok()
        .stdout
        .trim()
        .to_string();
    let _first = VolumeGuard {
        device: first.clone(),
        mount: rig.path("no-mount"),
        owner: rig.path(""),
    };
    // Written to the block device, synced: on the group's disks.
    let data = random_file(&rig.path("data.bin"), MIB, 9);
    tool(
        "dd",
        &[
            &format!("if={}", data.display()),
            &format!("of={first}"),
            "bs=64k",
            "oflag=direct",
            "conv=fsync",
            "status=none",
        ],
    )
    .unwrap();
    serving.kill_9();
    // The next service lets go of the dead loop device and attaches the
    // volume again.
    let mut serving = Service::start(&rig, &["--attach-volumes"]);
    serving.wait_for_log("volume attached again");
    assert!(
        serving
            .log()
            .contains("detached a volume's loop device the killed service left"),
        "{}",
        serving.log()
    );
    let listed = rig.cairn(&["volume", "list", "--json"]).ok().json();
    assert_eq!(listed[0]["state"], "ATTACHED", "{listed}");
    let again = listed[0]["device"].as_str().unwrap().to_string();
    let _again = VolumeGuard {
        device: again.clone(),
        mount: rig.path("no-mount"),
        owner: rig.path(""),
    };
    let mut back = vec![0u8; MIB as usize];
    std::io::Read::read_exact(&mut std::fs::File::open(&again).unwrap(), &mut back).unwrap();
    assert_eq!(back, std::fs::read(&data).unwrap());
    rig.cairn(&["volume", "detach", "+DATA/vol/v1"]).ok();
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}
