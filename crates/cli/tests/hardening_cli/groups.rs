//! Creating and naming groups, and metadata damage read through both
//! doors: failure group names, copied disks, creates that never finished,
//! a healthy group's disk taken only when named, check on a degraded group,
//! lost alias blocks (items 11, 12, 15-18).

use super::*;

/// Item 12: a failure group name that is not a valid name is refused before
/// anything is written: the disks stay untouched candidates.
#[test]
fn group_create_validates_everything_before_writing() {
    let rig = Door::held();
    let long = "F".repeat(40);
    for (i, fg) in ["bad fg", "1B", "Ärger", long.as_str()].iter().enumerate() {
        let (a, b) = (format!("v{i}a.img"), format!("v{i}b.img"));
        sparse(&rig.path(&a), GIB);
        sparse(&rig.path(&b), GIB);
        rig.cairn(&[
            "group",
            "create",
            "VAL",
            "--disk",
            &format!("{}={fg}", rig.arg(&a)),
            "--disk",
            &format!("{}=OK", rig.arg(&b)),
        ])
        .refused("failure group");
        for disk in [&a, &b] {
            assert_eq!(allocated(&rig.path(disk)), 0, "{fg:?}: {disk} was written");
        }
    }
    let list = rig.cairn(&["disk", "list", "--json"]).ok().json();
    for d in list["disks"].as_array().unwrap() {
        assert_eq!(d["status"], "CANDIDATE", "{d:#}");
    }
    // Item 13: refused creates leave no lock file behind.
    let run_dir = Path::new(&rig.rig.run_dir);
    let locks: Vec<_> = std::fs::read_dir(run_dir)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(locks.is_empty(), "{locks:?}");
}

/// A disk copied whole (`dd` of a labelled disk, a cloned LUN, an array
/// snapshot) carries the same label and disk UUID as its original; two
/// disks labelled alike carry one label. `group create` naming both is
/// refused before it writes anything, saying which disk and what to do,
/// as `alter --add` refuses such a disk (one rule for both). Before, the
/// create wrote the group to both and panicked, and every later mount
/// refused the group.
#[test]
fn group_create_refuses_a_copied_disk_and_two_disks_with_one_label() {
    let rig = Door::held();
    let label = |name: &str, file: &str| {
        sparse(&rig.path(file), 256 * MIB);
        rig.cairn(&["disk", "label", name, &rig.arg(file)]).ok();
    };
    label("C0", "c0.img");
    // A whole copy, as `dd` makes (sparse: the holes stay holes).
    let copied = std::process::Command::new("cp")
        .arg("--sparse=always")
        .args([rig.path("c0.img"), rig.path("c1.img")])
        .status()
        .unwrap();
    assert!(copied.success());
    label("C2", "c2.img");
    label("SAME", "s0.img");
    // `disk label` refuses a label its discovery sees in use: s1 is
    // labelled where s0 is not looked for.
    sparse(&rig.path("s1.img"), 256 * MIB);
    cairn(
        &rig.arg("s1.img"),
        &["disk", "label", "same", &rig.arg("s1.img")],
    )
    .ok();
    for (disks, says) in [
        (["c0.img", "c1.img", "c2.img"], "carry one disk UUID"),
        (["s0.img", "s1.img", "c2.img"], "have one label"),
    ] {
        let before: Vec<u32> = disks.iter().map(|d| digest(&rig.path(d))).collect();
        let mut args = vec!["group".to_string(), "create".into(), "TWICE".into()];
        for (i, d) in disks.iter().enumerate() {
            args.extend(["--disk".into(), format!("{}=FG{i}", rig.arg(d))]);
        }
        let run = rig.cairn(&args.iter().map(String::as_str).collect::<Vec<_>>());
        run.refused(says).refused("cairn disk label --force");
        let after: Vec<u32> = disks.iter().map(|d| digest(&rig.path(d))).collect();
        assert_eq!(before, after, "{disks:?}: nothing written");
    }
    let list = rig.cairn(&["group", "list", "--json"]).ok().json();
    assert!(
        !list.to_string().contains("TWICE"),
        "no group was made: {list:#}"
    );
    // The same rule when a disk is added: a copy of a member (kept where
    // discovery does not look, or no mount would take the group), the
    // member named again, and a disk with a member's label, are refused
    // and left as they were.
    std::fs::create_dir(rig.path("aside")).unwrap();
    std::fs::rename(rig.path("c1.img"), rig.path("aside/c1.img")).unwrap();
    rig.cairn(&[
        "group",
        "create",
        "ONCE",
        "--disk",
        &format!("{}=FG0", rig.arg("c0.img")),
        "--disk",
        &format!("{}=FG1", rig.arg("s0.img")),
    ])
    .ok();
    for (disk, says) in [
        ("aside/c1.img", "is already a member of group ONCE"),
        ("c0.img", "is already a disk of group ONCE"),
        ("s1.img", "already has a disk labelled"),
    ] {
        let before = digest(&rig.path(disk));
        rig.cairn(&[
            "group",
            "alter",
            "ONCE",
            "--add",
            &format!("{}=FG2", rig.arg(disk)),
        ])
        .refused(says);
        // (The member itself is written by the mount for the command.)
        if disk != "c0.img" {
            assert_eq!(digest(&rig.path(disk)), before, "{disk}: nothing written");
        }
    }
    rig.check_clean("ONCE");
}

/// Item 11: a group whose create never finished is listed as INCOMPLETE (not
/// DEGRADED or unmountable), and `group create --force` takes its disks
/// again, saying what it overwrote; without --force it says why not.
#[test]
fn a_group_that_never_finished_creating_is_taken_again_by_force() {
    let rig = Door::held();
    rig.create("HALF", "h", 2);
    for i in 0..2 {
        wipe_superblocks(&rig.path(&format!("h{i}.img")));
    }
    let list = rig.cairn(&["group", "list", "--json"]).ok().json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list:#}");
    assert!(
        list[0]["state"].as_str().unwrap().starts_with("INCOMPLETE"),
        "{list:#}"
    );
    let disks = [
        format!("{}=A", rig.arg("h0.img")),
        format!("{}=B", rig.arg("h1.img")),
    ];
    rig.cairn(&[
        "group", "create", "HALF", "--disk", &disks[0], "--disk", &disks[1],
    ])
    .refused("its create never finished");
    let run = rig
        .cairn(&[
            "group", "create", "HALF", "--force", "--disk", &disks[0], "--disk", &disks[1],
        ])
        .ok();
    assert!(
        run.stdout.contains("overwrote") && run.stderr.contains("never finished"),
        "{run:?}"
    );
    let list = rig.cairn(&["group", "list", "--json"]).ok().json();
    assert_eq!(list[0]["state"], "MOUNTABLE", "{list:#}");
    rig.check_clean("HALF");
}

/// Items 17 and 18: a disk of a healthy group is named, with its group and a
/// flag that exists, and taken only with --take-from-group; that group then
/// reports DEGRADED. `disk unlabel` names the group too.
#[test]
fn a_disk_of_a_healthy_group_is_taken_only_when_that_group_is_named() {
    let rig = Door::held();
    rig.create("DATA", "d", 4);
    sparse(&rig.path("x0.img"), GIB);
    let d0 = rig.arg("d0.img");
    let disks = [format!("{d0}=A"), format!("{}=B", rig.arg("x0.img"))];
    let run = rig
        .cairn(&[
            "group", "create", "OTHER", "--force", "--disk", &disks[0], "--disk", &disks[1],
        ])
        .refused("disk DATA_0000 of disk group DATA");
    assert!(
        run.stderr.contains("--take-from-group DATA") && run.stderr.contains("DEGRADED"),
        "{}",
        run.stderr
    );
    rig.cairn(&["disk", "unlabel", &d0])
        .refused("disk DATA_0000 of disk group DATA");
    rig.assert_all_online("DATA");
    // A group named that gives up none of the disks: a typo, said.
    sparse(&rig.path("x1.img"), GIB);
    rig.cairn(&[
        "group",
        "create",
        "OTHER",
        "--take-from-group",
        "DTA",
        "--disk",
        &format!("{}=A", rig.arg("x1.img")),
        "--disk",
        &disks[1],
    ])
    .refused("--take-from-group DTA: none of the disks named");
    assert_eq!(allocated(&rig.path("x1.img")), 0, "a refused create wrote");

    let run = rig
        .cairn(&[
            "group",
            "create",
            "OTHER",
            "--take-from-group",
            "data",
            "--disk",
            &disks[0],
            "--disk",
            &disks[1],
        ])
        .ok();
    assert!(
        run.stderr.contains("was disk DATA_0000 of disk group DATA"),
        "{}",
        run.stderr
    );
    let list = rig.cairn(&["group", "list", "--json"]).ok().json();
    let data = list
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "DATA")
        .unwrap();
    assert_eq!(data["state"], "DEGRADED", "{list:#}");
}

two_hosts!(
    group_check_tells_degraded_and_short_members_apart_from_clean,
    check_tells_apart
);

/// Item 15: `group check` is not "clean" on a degraded group (exit 3, its
/// own status), names a member truncated to half its size, and says that it
/// does not read data.
///
/// `group check` through either door: clean (saying the data blocks were
/// not read), DEGRADED with a member missing (exit 3, naming it), and a
/// member shorter than the group recorded named as damage check cannot fix
/// (exit 1). The disks change while nothing serves the group; the service,
/// started again, finds them as a mount does.
fn check_tells_apart(host: Host) {
    let Some(mut rig) = Door::new(host) else {
        return;
    };
    rig.create("DATA", "d", 4);
    rig.start();
    let run = rig.cairn(&["group", "check", "DATA"]).ok();
    assert!(
        run.stdout.contains("data blocks were not read"),
        "{}",
        run.stdout
    );

    rig.stop();
    std::fs::rename(rig.path("d3.img"), rig.path("d3.away")).unwrap();
    rig.start();
    let run = rig.cairn(&["group", "check", "DATA"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert_eq!(
        run.stdout.lines().last(),
        Some("DEGRADED"),
        "{}",
        run.stdout
    );
    // Held, the mount's warning on stderr; served, the service's mount
    // logged it, and check's report names the disk not in use.
    let named = match rig.service() {
        None => &run.stderr,
        Some(_) => &run.stdout,
    };
    assert!(named.contains("DATA_0003"), "{run:?}");
    let report = rig.cairn(&["group", "check", "DATA", "--json"]);
    assert_eq!(report.code, 3);
    assert_eq!(report.json()["data_read"], false);
    rig.stop();
    std::fs::rename(rig.path("d3.away"), rig.path("d3.img")).unwrap();

    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(rig.path("d2.img"))
        .unwrap();
    f.set_len(GIB / 2).unwrap();
    rig.start();
    let run = rig.cairn(&["group", "check", "DATA"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout
            .contains("DATA_0002 is 536870912 bytes, smaller than"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains("cannot be fixed by check"),
        "{}",
        run.stderr
    );
    rig.stop();
}

two_hosts!(
    a_lost_directory_block_gets_advice_that_helps,
    lost_directory_block
);

/// Item 16: both mirrors of an alias block destroyed. Every command still
/// works and names the group and the step that helps; `check --repair`
/// puts the nameless file in lost+found, and nothing is asked of it again.
///
/// Every copy of a directory's alias block damaged (while nothing serves
/// the group): the mount says what is lost and what fixes it — held, on
/// the command's stderr; served, in the service's log — `check` says the
/// same, and `check --repair` puts the file in lost+found, whole.
fn lost_directory_block(host: Host) {
    let Some(mut rig) = Door::new(host) else {
        return;
    };
    rig.create("DATA", "d", 2);
    let src = random_file(&rig.path("src.bin"), 2 * MIB, 16);
    rig.cairn(&["cp", src.to_str().unwrap(), "+DATA/f.dbf"])
        .ok();
    let report = rig.cairn(&["group", "check", "DATA", "--json"]).ok().json();
    assert_eq!(report["problems"], serde_json::json!([]));
    let places = alias_block_places(&rig);
    for (disk, offset) in &places {
        write_at(&rig.path(disk), offset + 300, &[0x5Au8; 32]);
    }
    rig.start();
    let run = rig.cairn(&["ls", "+DATA"]).ok();
    let said = match rig.service() {
        None => run.stderr.clone(),
        Some(s) => s.line_with("alias block 0"),
    };
    assert!(
        said.contains("group DATA") || said.contains("group=DATA"),
        "{said}"
    );
    assert!(
        said.contains("cairn group check DATA --repair") && said.contains("alias block 0"),
        "{said}"
    );
    let run = rig.cairn(&["group", "check", "DATA"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("`cairn group check DATA --repair` fixes"),
        "{}",
        run.stderr
    );
    let run = rig.cairn(&["group", "check", "DATA", "--repair"]).ok();
    assert_eq!(
        run.stdout.lines().last(),
        Some("all problems repaired"),
        "{}",
        run.stdout
    );
    rig.check_clean("DATA");
    let names = rig.ls_names("+DATA/lost+found");
    assert_eq!(names.len(), 1, "{names:?}");
    rig.assert_reads_back(&format!("+DATA/lost+found/{}", names[0]), &src);
    rig.stop();
}

/// Where the alias directory's block 0 is on each disk: (disk file name,
/// byte offset), read from the group's metadata through the library.
fn alias_block_places(rig: &Door) -> Vec<(String, u64)> {
    with_group(rig, |g, paths| {
        let extent = g
            .extents(cairn_format::group::FILE_ALIAS_DIRECTORY)
            .unwrap()[0];
        extent
            .copies()
            .iter()
            .map(|c| {
                let device = g.disk_device(c.disk).unwrap();
                (
                    paths[&device.0]
                        .file_name()
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                    u64::from(c.au) * g.au_bytes(),
                )
            })
            .collect()
    })
}
