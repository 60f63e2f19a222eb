//! Disks failing, leaving, coming back, added and dropped while the service
//! serves (fio's verify reading and writing through the mount), and what the
//! service logs and counts of it.

use super::*;

/// fio with `verify=crc32c` and `verify_backlog` on a file on the mount, at
/// queue depth 16 through io_uring and O_DIRECT, while a disk of the
/// normal-redundancy group fails for real under it (its ext4 shut down:
/// every I/O on its open descriptor fails with EIO): no verify error and no
/// I/O error reaches fio. Then the disk comes back (after the service:
/// bringing a disk online through the running service is the control
/// socket's) and its copies are resynced: the group checks clean.
#[test]
fn fio_verify_through_the_mount_sees_no_error_while_a_disk_fails() {
    if !fuse_here() || !fio_here() {
        return;
    }
    let rig = Rig::discovering(|dir| format!("{0}/d*.img,{0}/dying/*.img", dir.display()));
    let fs = match SmallFs::mount(rig.dir.path(), "dying", 512 * MIB) {
        Ok(fs) => fs,
        Err(why) => {
            prerequisite::missing(&why);
            return;
        }
    };
    let here = rig.path("");
    group_on(&rig, [&here, &here, &fs.mnt, &here], &["--au-size", "1M"]);
    let serving = Service::start(&rig, &[]);
    let file = serving.path("DATA/fio.dat");
    // A fixed run time (the workload's length, not a synchronisation): the
    // disk dies while fio writes and verifies.
    let mut fio = FioVerify::start(&file, &["--size=48M", "--time_based", "--runtime=8s"]);
    // fio's own progress says its I/O is under way: then the disk dies.
    fio.progress(1);
    fs.shut_down();
    fio.finish();
    let disks_json = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    assert!(
        disks_json.to_string().contains("OFFLINE"),
        "the failed disk is out: {disks_json}"
    );
    // The disk comes back while the service runs: the service let go of
    // its descriptors as it went OFFLINE, so `online` finds the disk again
    // as SIGHUP does, opens it anew, and resyncs it.
    fs.revive();
    let back = rig
        .cairn(&["group", "online", "DATA", "D2", "--wait", "--json"])
        .ok()
        .json();
    assert!(back["resync"]["aus_copied"].as_u64().unwrap() > 0, "{back}");
    assert!(
        back["disks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["state"] == "ONLINE"),
        "{back}"
    );
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("disk D2: OFFLINE -> SYNCING: brought back")),
        "{log}"
    );
    rig.check_clean("DATA");
}

#[test]
fn fio_verify_sees_no_error_while_a_disk_goes_offline_and_comes_back_through_the_socket() {
    if !fuse_here() || !fio_here() {
        return;
    }
    let rig = Rig::new();
    let here = rig.path("");
    group_on(&rig, [&here, &here, &here, &here], &["--au-size", "1M"]);
    let serving = Service::start(&rig, &[]);
    let file = serving.path("DATA/fio.dat");
    // A fixed run time (the workload's length, not a synchronisation):
    // the disk leaves and comes back while fio writes and verifies.
    let mut fio = FioVerify::start(&file, &["--size=32M", "--time_based", "--runtime=10s"]);
    fio.progress(1);
    rig.cairn(&["group", "offline", "DATA", "D2"]).ok();
    fio.progress(2);
    let back = rig
        .cairn(&["group", "online", "DATA", "D2", "--wait", "--json"])
        .ok()
        .json();
    assert!(
        back["resync"]["aus_copied"].as_u64().unwrap() > 0,
        "what D2 missed is copied back: {back}"
    );
    assert!(
        back["disks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["state"] == "ONLINE"),
        "{back}"
    );
    fio.finish();
    // The service checks its group clean while serving, and after.
    let check = rig.cairn(&["group", "check", "DATA"]).ok();
    assert!(check.stdout.contains("clean"), "{check:?}");
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

/// Issue 34 item 17: `disk_repair_time` runs while the group is served.
/// D3 taken offline under a 3 s timer is dropped by force by the service
/// itself when it runs out (the log says so), its copies are rebuilt from
/// the mirrors in the background, and the file then reads back from D3's
/// failure group partner alone. A sub-second timer is refused, not
/// rounded to 0.
#[test]
fn a_served_groups_offline_disk_is_dropped_and_rebuilt_when_its_repair_time_runs_out() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let f = random_file(&rig.path("f.bin"), 3 * MIB + 512, 17);
    rig.cairn(&["cp", f.to_str().unwrap(), "+DATA/f.dbf"]).ok();
    rig.cairn(&["group", "set", "DATA", "disk_repair_time=0.3s"])
        .refused("under a second");
    rig.cairn(&["group", "set", "DATA", "disk_repair_time=3s"])
        .ok();
    let mut serving = Service::start(&rig, &[]);
    rig.cairn(&["group", "offline", "DATA", "D3"]).ok();
    serving
        .wait_for_log("disk D3: OFFLINE -> DROPPING: its repair time (disk_repair_time) ran out");
    serving.wait_for_log("disk D3: DROPPING -> DROPPED: dropped by force");
    serving.wait_for_log("rebalance done");
    assert_eq!(disk_state(&rig, "D3"), "GONE");
    rig.cairn(&["group", "offline", "DATA", "D0", "D1"]).ok();
    let out = rig.path("back.bin");
    rig.cairn(&["cp", "+DATA/f.dbf", out.to_str().unwrap()])
        .ok();
    assert_eq!(digest(&out), digest(&f), "read from D2 alone");
    rig.cairn(&["group", "online", "DATA", "D0", "D1", "--wait"])
        .ok();
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    let check = rig.cairn(&["group", "check", "DATA"]);
    assert_eq!(check.code, 0, "{check:?}");
}

#[test]
fn a_served_group_adds_and_drops_disks_under_fio_verify_and_lets_go_of_the_dropped() {
    if !fuse_here() || !fio_here() {
        return;
    }
    let rig = Rig::new();
    let here = rig.path("");
    group_on(&rig, [&here, &here, &here, &here], &["--au-size", "1M"]);
    let serving = Service::start(&rig, &[]);
    let pid = serving.pid();
    let file = serving.path("DATA/fio.dat");
    let mut fio = FioVerify::start(&file, &["--size=32M", "--time_based", "--runtime=8s"]);
    fio.progress(1);
    for i in [4, 5] {
        sparse(&here.join(format!("d{i}.img")), 256 * MIB);
    }
    // Paths relative to the client's working directory: the service
    // resolves them there, not in its own.
    let explained: Run = cairn_command(&rig.discover, &[("CAIRN_RUN_DIR", &rig.run_dir)])
        .current_dir(&here)
        .args([
            "group",
            "alter",
            "DATA",
            "--add",
            "d4.img=A",
            "--drop",
            "D0",
            "--explain",
        ])
        .output()
        .unwrap()
        .into();
    let explained = explained.ok();
    assert!(
        explained.stdout.contains("the change would move"),
        "{explained:?}"
    );
    // Explained only: nothing changed, and the new disk is not held.
    let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    assert_eq!(disks.as_array().map(Vec::len), Some(4), "{disks}");
    assert!(
        !open_files_under(pid, &here).contains(&here.join("d4.img")),
        "an explained disk is let go of"
    );
    let altered: Run = cairn_command(&rig.discover, &[("CAIRN_RUN_DIR", &rig.run_dir)])
        .current_dir(&here)
        .args([
            "group", "alter", "DATA", "--add", "d4.img=A", "--add", "d5.img=B", "--drop", "D0",
            "--drop", "D2", "--wait", "--json",
        ])
        .output()
        .unwrap()
        .into();
    let altered = altered.ok().json();
    let dropped: Vec<&str> = altered["rebalance"]["disks_dropped"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d.as_str())
        .collect();
    assert_eq!(dropped, ["D0", "D2"], "{altered}");
    assert!(
        altered["rebalance"]["aus_moved"].as_u64().unwrap_or(0) > 0
            || altered["rebalance"]["moves_done"].as_u64().unwrap_or(0) > 0,
        "data moved while fio ran: {altered}"
    );
    fio.progress(1);
    fio.finish();
    let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    let mut labels: Vec<(String, String)> = disks
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["label"].as_str().unwrap().to_string(),
                d["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    labels.sort();
    assert_eq!(labels.len(), 4, "{disks}");
    assert!(labels.iter().all(|(_, s)| s == "ONLINE"), "{disks}");
    assert!(
        !labels.iter().any(|(l, _)| l == "D0" || l == "D2"),
        "{disks}"
    );
    for added in ["d4.img", "d5.img"] {
        let path = here.join(added).display().to_string();
        assert!(
            disks
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["path"].as_str() == Some(&path)),
            "an added disk is listed with its path: {disks}"
        );
    }
    let open = open_files_under(pid, &here);
    for gone in ["d0.img", "d2.img"] {
        assert!(
            !open.contains(&here.join(gone)),
            "the service still holds the dropped {gone}: {open:?}"
        );
    }
    assert!(open.contains(&here.join("d4.img")), "{open:?}");
    // The dropped disks are free while the service runs (no descriptor,
    // no registered file, no lock of theirs left in it): another group
    // takes one.
    rig.cairn(&[
        "group",
        "create",
        "SPARE",
        "--redundancy",
        "external",
        "--disk",
        &rig.arg("d0.img"),
    ])
    .ok();
    let check = rig.cairn(&["group", "check", "DATA"]).ok();
    assert!(check.stdout.contains("clean"), "{check:?}");
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

#[test]
fn a_served_group_replaces_an_offline_disk_and_refuses_what_it_must() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    let here = rig.path("");
    group_on(&rig, [&here, &here, &here, &here], &["--au-size", "1M"]);
    let serving = Service::start(&rig, &[]);
    let source = random_file(&rig.path("source.bin"), 24 * MIB, 7);
    rig.cairn(&["cp", source.to_str().unwrap(), "+DATA/a.bin"])
        .ok();
    let new = sparse(&here.join("d4.img"), 256 * MIB);
    let new = new.to_str().unwrap();
    // Refused, one line each, and nothing changed.
    rig.cairn(&["group", "alter", "DATA"])
        .refused("name disks to --add");
    rig.cairn(&["group", "replace", "DATA", "D3", "--with", new])
        .refused("only an OFFLINE disk is replaced");
    rig.cairn(&["group", "offline", "DATA", "D3"]).ok();
    rig.cairn(&["group", "offline", "DATA", "D2"]).ok();
    rig.cairn(&["group", "replace", "DATA", "D3", "--with", new])
        .refused("disk D2 is OFFLINE too");
    assert!(
        !open_files_under(serving.pid(), &here).contains(&here.join("d4.img")),
        "a refused disk is let go of"
    );
    rig.cairn(&["group", "online", "DATA", "D2", "--wait"]).ok();
    let replaced = rig
        .cairn(&[
            "group", "replace", "DATA", "D3", "--with", new, "--wait", "--json",
        ])
        .ok()
        .json();
    assert_eq!(
        replaced["rebalance"]["disks_dropped"][0], "D3",
        "{replaced}"
    );
    let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    let joined = disks
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["path"].as_str() == Some(new))
        .unwrap_or_else(|| panic!("{disks}"));
    assert_eq!(joined["failgroup"], "B", "{disks}");
    assert_eq!(joined["state"], "ONLINE", "{disks}");
    // Every byte back, through the mount, with D3 gone for good.
    assert!(
        std::fs::read(serving.path("DATA/a.bin")).unwrap() == std::fs::read(&source).unwrap(),
        "a.bin reads back whole through the mount"
    );
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    // And from failure group B alone (D2 and the new disk): with A's disks
    // there, a read takes A's copy wherever it is the primary, so a bad
    // rebuild would hide behind it.
    let out = rig.path("a.out");
    cairn_with(
        &format!("{},{new}", rig.arg("d2.img")),
        &[("CAIRN_RUN_DIR", &rig.run_dir)],
        &["cp", "+DATA/a.bin", out.to_str().unwrap()],
    )
    .ok();
    assert!(
        std::fs::read(&out).unwrap() == std::fs::read(&source).unwrap(),
        "a.bin reads whole from failure group B alone, the rebuilt disk in it"
    );
    rig.check_clean("DATA");
}

#[test]
fn sighup_finds_a_disk_that_was_missing_at_start_and_online_brings_it_back() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    // A file with copies on every disk, then D3 out of discovery's reach
    // when the service starts.
    let before = random_file(&rig.path("before.bin"), 8 * MIB, 10);
    rig.cairn(&["cp", before.to_str().unwrap(), "+DATA/while-away.bin"])
        .ok();
    let away = rig.path("d3.away");
    std::fs::rename(rig.path("d3.img"), &away).unwrap();
    let mut serving = Service::start(&rig, &[]);
    serving.wait_for_log("disk D3: ONLINE -> OFFLINE: missing at mount");
    // Rewritten while D3 is away: its copies there go stale.
    let source = random_file(&rig.path("source.bin"), 8 * MIB, 11);
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(serving.path("DATA/while-away.bin"))
            .unwrap();
        f.write_all(&std::fs::read(&source).unwrap()).unwrap();
        f.sync_all().unwrap();
    }
    // Looked for, not found: said so, naming discovery.
    rig.cairn(&["group", "online", "DATA", "D3"])
        .refused("disk D3 of group DATA cannot be brought back: discovery");
    // Back where discovery looks, then SIGHUP: the service attaches it.
    std::fs::rename(&away, rig.path("d3.img")).unwrap();
    serving.signal(libc::SIGHUP);
    serving.wait_for_log("disk found again and attached");
    let back = rig
        .cairn(&["group", "online", "DATA", "D3", "--wait", "--json"])
        .ok()
        .json();
    assert!(
        back["resync"]["aus_copied"].as_u64().unwrap() > 0,
        "what D3 missed is copied back: {back}"
    );
    let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    let d3 = disks
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["label"] == "D3")
        .unwrap();
    assert_eq!(d3["state"], "ONLINE", "{disks}");
    assert_eq!(d3["path"], rig.arg("d3.img"), "{disks}");
    // A second SIGHUP finds nothing new, and the service goes on.
    serving.signal(libc::SIGHUP);
    serving.wait_for_log("SIGHUP: reading the discovery string again");
    assert_eq!(
        std::fs::read(serving.path("DATA/while-away.bin")).unwrap(),
        std::fs::read(&source).unwrap()
    );
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(log.matches("disk found again").count(), 1, "{log}");
    rig.check_clean("DATA");
}

/// A member that fails under the service (its file system shut down: every
/// I/O on the descriptors the service holds fails with EIO) while a file
/// is rewritten through the mount: the write and its fsync succeed on the
/// other copies; the log says, in one line, that D2 went ONLINE -> OFFLINE
/// and why (the I/O error); the metrics count it; the service lets go of
/// every descriptor of D2's file, so its file system can be unmounted
/// (not lazily) for repair. While it is away, `group online` says what is
/// the matter (discovery does not find the disk), not that it "is not
/// attached"; mounted again, `group online` opens it anew and resyncs it,
/// and the log and the metrics say SYNCING, then ONLINE.
#[test]
fn a_failed_disk_is_logged_counted_let_go_of_and_brought_back_through_the_service() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::discovering(|dir| format!("{0}/d*.img,{0}/dying/*.img", dir.display()));
    let fs = match SmallFs::mount(rig.dir.path(), "dying", 512 * MIB) {
        Ok(fs) => fs,
        Err(why) => {
            prerequisite::missing(&why);
            return;
        }
    };
    let here = rig.path("");
    group_on(&rig, [&here, &here, &fs.mnt, &here], &["--au-size", "1M"]);
    let mut serving = Service::start(&rig, &["--metrics", "127.0.0.1:0"]);
    let addr = serving.metrics_addr();
    let pid = serving.pid();
    assert!(
        !open_files_under(pid, &fs.mnt).is_empty(),
        "the service holds D2 while it is ONLINE"
    );
    let first = random_file(&rig.path("first.bin"), 8 * MIB, 21);
    let second = random_file(&rig.path("second.bin"), 8 * MIB, 22);
    let write = |from: &Path| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(serving.path("DATA/f.bin"))
            .unwrap();
        f.write_all(&std::fs::read(from).unwrap()).unwrap();
        f.sync_all().unwrap();
    };
    write(&first);
    assert_eq!(state_changes(&addr, "D2", "OFFLINE"), 0.0);
    fs.shut_down();
    // Every extent has a copy in failure group B (D2, D3): the rewrite
    // reaches D2, fails there, and lands on the other copies.
    write(&second);
    serving.wait_for_log("disk D2: ONLINE -> OFFLINE");
    let line = serving.line_with("disk D2: ONLINE -> OFFLINE");
    assert!(line.contains("DATA"), "the group is named: {line}");
    assert!(
        line.contains("failed") && line.contains("Input/output error"),
        "why, with the error: {line}"
    );
    assert_eq!(state_changes(&addr, "D2", "OFFLINE"), 1.0);
    // Every descriptor of the failed disk is let go of, so its file system
    // can be unmounted for repair.
    wait_until("the service lets go of D2", || {
        open_files_under(pid, &fs.mnt).is_empty()
    });
    fs.unmount().unwrap();
    // Away: `online` says what is the matter.
    let away = rig.cairn(&["group", "online", "DATA", "D2"]);
    assert!(!away.stderr.contains("is not attached"), "{away:?}");
    away.refused("discovery");
    fs.mount_again();
    let back = rig
        .cairn(&["group", "online", "DATA", "D2", "--wait", "--json"])
        .ok()
        .json();
    assert!(back["resync"]["aus_copied"].as_u64().unwrap() > 0, "{back}");
    assert!(
        back["disks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["state"] == "ONLINE"),
        "{back}"
    );
    serving.wait_for_log("disk D2: OFFLINE -> SYNCING");
    serving.wait_for_log("disk D2: SYNCING -> ONLINE");
    assert_eq!(state_changes(&addr, "D2", "SYNCING"), 1.0);
    assert_eq!(state_changes(&addr, "D2", "ONLINE"), 1.0);
    assert_eq!(state_changes(&addr, "D2", "OFFLINE"), 1.0);
    assert_eq!(state_changes(&addr, "D0", "OFFLINE"), 0.0);
    assert!(std::fs::read(serving.path("DATA/f.bin")).unwrap() == std::fs::read(&second).unwrap());
    let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    let d2 = disks
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["label"] == "D2")
        .unwrap();
    assert_eq!(
        d2["path"],
        fs.mnt.join("d2.img").display().to_string(),
        "{disks}"
    );
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        log.matches("disk D2: ONLINE -> OFFLINE").count(),
        1,
        "{log}"
    );
    rig.check_clean("DATA");
}

/// What a mount does to disks is said and counted as well: a member
/// missing when the service starts is ONLINE -> OFFLINE (missing), and
/// found by the next start it is OFFLINE -> SYNCING, resynced by the
/// mount, then SYNCING -> ONLINE.
#[test]
fn the_service_logs_and_counts_a_mount_that_marks_a_disk_offline_and_one_that_resyncs_it() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let away = rig.path("d3.away");
    std::fs::rename(rig.path("d3.img"), &away).unwrap();
    let mut serving = Service::start(&rig, &["--metrics", "127.0.0.1:0"]);
    serving.wait_for_log("disk D3: ONLINE -> OFFLINE");
    let line = serving.line_with("disk D3: ONLINE -> OFFLINE");
    assert!(line.contains("missing"), "{line}");
    let addr = serving.metrics_addr();
    assert_eq!(state_changes(&addr, "D3", "OFFLINE"), 1.0);
    // Written while D3 is away: its copies go stale.
    let source = random_file(&rig.path("source.bin"), 8 * MIB, 31);
    std::fs::copy(&source, serving.path("DATA/while-away.bin")).unwrap();
    std::fs::File::open(serving.path("DATA/while-away.bin"))
        .unwrap()
        .sync_all()
        .unwrap();
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    std::fs::rename(&away, rig.path("d3.img")).unwrap();
    let mut serving = Service::start(&rig, &["--metrics", "127.0.0.1:0"]);
    serving.wait_for_log("disk D3: OFFLINE -> SYNCING");
    serving.wait_for_log("disk D3: SYNCING -> ONLINE");
    let addr = serving.metrics_addr();
    assert_eq!(state_changes(&addr, "D3", "SYNCING"), 1.0);
    assert_eq!(state_changes(&addr, "D3", "ONLINE"), 1.0);
    assert_eq!(state_changes(&addr, "D3", "OFFLINE"), 0.0);
    assert!(
        std::fs::read(serving.path("DATA/while-away.bin")).unwrap()
            == std::fs::read(&source).unwrap()
    );
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

/// SIGHUP after member files moved: D1 renamed where discovery still finds
/// it is the same disk (its label's uuid, and the very file the service
/// holds open): its path is updated and said, never opened a second time
/// (which the service's own lock would refuse); D3 moved out of
/// discovery's reach while ONLINE is said too, and stays in use through
/// the descriptor the service holds.
#[test]
fn sighup_follows_a_renamed_member_by_identity_and_says_one_that_left_discovery() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let mut serving = Service::start(&rig, &[]);
    let moved = rig.path("d1-moved.img");
    std::fs::rename(rig.path("d1.img"), &moved).unwrap();
    let away = rig.path("d3.away");
    std::fs::rename(rig.path("d3.img"), &away).unwrap();
    serving.signal(libc::SIGHUP);
    serving.wait_for_log("disk D1 is now at");
    let line = serving.line_with("disk D1 is now at");
    assert!(line.contains(&moved.display().to_string()), "{line}");
    serving.wait_for_log("is no longer found by discovery");
    let line = serving.line_with("is no longer found by discovery");
    assert!(line.contains("disk D3"), "{line}");
    assert!(
        line.contains("no longer found by discovery") && line.contains("ONLINE"),
        "{line}"
    );
    assert!(
        !serving.log().contains("locked by another Cairn process"),
        "{}",
        serving.log()
    );
    let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    let row = |label: &str| {
        disks
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["label"] == label)
            .unwrap()
            .clone()
    };
    assert_eq!(row("D1")["path"], moved.display().to_string(), "{disks}");
    assert_eq!(row("D3")["state"], "ONLINE", "{disks}");
    // Every disk still serves the files.
    let source = random_file(&rig.path("source.bin"), 8 * MIB, 41);
    std::fs::copy(&source, serving.path("DATA/after.bin")).unwrap();
    assert!(
        std::fs::read(serving.path("DATA/after.bin")).unwrap() == std::fs::read(&source).unwrap()
    );
    // A second SIGHUP has nothing new to say of D1.
    serving.signal(libc::SIGHUP);
    serving.wait_for_log("SIGHUP: reading the discovery string again");
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(log.matches("disk D1 is now at").count(), 1, "{log}");
    assert!(!log.contains("cannot be opened"), "{log}");
    std::fs::rename(&away, rig.path("d3.img")).unwrap();
    rig.check_clean("DATA");
}
