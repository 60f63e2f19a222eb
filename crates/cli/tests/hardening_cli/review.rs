//! What the reviews found: --take-from-group, claims judged by the whole
//! group, a member this user cannot write, streams near a full group, disks
//! too small for the metadata.

use super::*;

/// Review: --take-from-group takes the named group's disks and nothing
/// more: another disk of the same create that carries a filesystem is
/// still refused without --force.
#[test]
fn take_from_group_does_not_license_overwriting_other_disks() {
    let rig = Door::held();
    rig.create("OLD", "o", 2);
    let fs = sparse(&rig.path("fs.img"), GIB);
    tool("mkfs.ext4", &["-q", "-F", fs.to_str().unwrap()]).unwrap();
    let before = digest(&fs);
    rig.cairn(&[
        "group",
        "create",
        "NEW",
        "--take-from-group",
        "OLD",
        "--disk",
        &format!("{}=A", rig.arg("o0.img")),
        "--disk",
        &format!("{}=B", fs.display()),
    ])
    .refused("ext4");
    assert_eq!(digest(&fs), before, "the filesystem was touched");
    rig.assert_all_online_of("OLD");
}

/// Review: a claim is judged by the group's newest superblock on any disk,
/// not the taken disk's own: a healthy member with damaged slots, or one
/// outside a narrow discovery string, still needs --take-from-group; a disk
/// the group recorded OFFLINE is taken with --force.
#[test]
fn a_claim_is_judged_by_the_whole_group() {
    let rig = Door::held();
    rig.create("DATA", "d", 4);
    sparse(&rig.path("x0.img"), GIB);
    let disks = |d: &str| {
        [
            format!("{}=A", rig.arg(d)),
            format!("{}=B", rig.arg("x0.img")),
        ]
    };
    wipe_superblocks(&rig.path("d0.img"));
    let [a, b] = disks("d0.img");
    rig.cairn(&[
        "group", "create", "OTHER", "--force", "--disk", &a, "--disk", &b,
    ])
    .refused("--take-from-group DATA");
    // The other disks out of sight: d1's own superblock still says DATA
    // counts on it.
    let narrow = format!("{},{}", rig.arg("d1.img"), rig.arg("x0.img"));
    let [a, b] = disks("d1.img");
    rig.cairn_discovering(
        &narrow,
        &[
            "group", "create", "OTHER", "--force", "--disk", &a, "--disk", &b,
        ],
    )
    .refused("--take-from-group DATA");
    // d3 missing at a writer's mount: recorded OFFLINE, no longer used.
    std::fs::rename(rig.path("d3.img"), rig.path("d3.away")).unwrap();
    rig.cairn(&["mkdir", "+DATA/x"]).ok();
    std::fs::rename(rig.path("d3.away"), rig.path("d3.img")).unwrap();
    let [a, b] = disks("d3.img");
    rig.cairn(&["group", "create", "OTHER", "--disk", &a, "--disk", &b])
        .refused("recorded OFFLINE");
    rig.cairn(&[
        "group", "create", "OTHER", "--force", "--disk", &a, "--disk", &b,
    ])
    .ok();
}

/// Review: a member this (non-root) user may not write fails the writing
/// command, naming the disk; it is not marked offline for good.
#[test]
fn a_member_this_user_cannot_write_fails_the_command_and_stays_online() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        prerequisite::missing("running as another user needs root");
        return;
    }
    let rig = Door::held();
    rig.create("DATA", "d", 4);
    use std::os::unix::fs::PermissionsExt;
    let mode = |name: &str, m: u32| {
        std::fs::set_permissions(rig.path(name), std::fs::Permissions::from_mode(m)).unwrap()
    };
    for i in 0..3 {
        mode(&format!("d{i}.img"), 0o666);
    }
    mode("d3.img", 0o644);
    std::fs::set_permissions(rig.rig.dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let run_dir = rig.path("run-nobody");
    std::fs::create_dir(&run_dir).unwrap();
    // Its own: a run directory others may write to is refused.
    std::os::unix::fs::chown(&run_dir, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_cairn"))
        .args(["mkdir", "+DATA/x"])
        .env("CAIRN_DISCOVER", &rig.rig.discover)
        .env("CAIRN_CONFIG", "/nonexistent")
        .env("CAIRN_RUN_DIR", &run_dir)
        .output()
        .unwrap();
    let run = Run::from(out).refused("d3.img");
    assert!(run.stderr.contains("permission denied"), "{}", run.stderr);
    rig.assert_all_online("DATA");
}

/// Review: a stream that fits the free space is copied, although growing it
/// ahead of the data would not fit; a name in a directory that does not
/// exist is refused before any data is read.
#[test]
fn a_stream_near_a_full_group_fits_and_bad_names_are_refused_first() {
    let rig = Door::held();
    for i in 0..2 {
        sparse(&rig.path(&format!("s{i}.img")), 256 * MIB);
    }
    rig.cairn(&[
        "group",
        "create",
        "S",
        "--au-size",
        "1M",
        "--disk",
        &format!("{}=A", rig.arg("s0.img")),
        "--disk",
        &format!("{}=B", rig.arg("s1.img")),
    ])
    .ok();
    let src = random_file(&rig.path("src.bin"), 150 * MIB, 51);
    let out = cairn_command(&rig.rig.discover, &[("CAIRN_RUN_DIR", &rig.rig.run_dir)])
        .args(["cp", "-", "+S/stream.dbf"])
        .stdin(std::fs::File::open(&src).unwrap())
        .output()
        .unwrap();
    Run::from(out).ok();
    let listed = rig.cairn(&["ls", "+S/stream.dbf", "--json"]).ok().json();
    assert_eq!(listed[0]["file"]["size_bytes"], 150 * MIB);
    let run = cairn_command(&rig.rig.discover, &[("CAIRN_RUN_DIR", &rig.rig.run_dir)])
        .args(["cp", "-", "+S/nodir/f.dbf"])
        .stdin(std::fs::File::open(&src).unwrap())
        .output()
        .unwrap();
    Run::from(run).refused("+S/nodir does not exist");
}

/// Review: disks too small for the group's metadata are refused, and the
/// labels the refused create wrote are gone again.
#[test]
fn a_create_that_fails_late_leaves_no_labels() {
    let rig = Door::held();
    for i in 0..2 {
        sparse(&rig.path(&format!("t{i}.img")), 8 * MIB);
    }
    let run = rig.cairn(&[
        "group",
        "create",
        "T",
        "--au-size",
        "1M",
        "--disk",
        &format!("{}=A", rig.arg("t0.img")),
        "--disk",
        &format!("{}=B", rig.arg("t1.img")),
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    let list = rig.cairn(&["disk", "list", "--json"]).ok().json();
    for d in list["disks"].as_array().unwrap() {
        assert_eq!(d["status"], "CANDIDATE", "{d:#}");
    }
}

/// Issue 34 item 16: a disk too small to hold more than an AU or two of
/// data is refused as a member — at create and at `alter --add` — with the
/// size that would do; nothing is written to it or to the group.
#[test]
fn a_disk_below_the_member_minimum_is_refused_with_the_size_that_would_do() {
    let rig = Door::held();
    for i in 0..2 {
        sparse(&rig.path(&format!("m{i}.img")), 256 * MIB);
    }
    let tiny = rig.path("tiny.img");
    sparse(&tiny, 10 * MIB);
    let (m0, m1, tiny) = (
        rig.arg("m0.img"),
        rig.arg("m1.img"),
        tiny.to_str().unwrap().to_string(),
    );
    let refused = rig
        .cairn(&[
            "group",
            "create",
            "SMALL",
            "--redundancy",
            "external",
            "--au-size",
            "4M",
            "--disk",
            &m0,
            "--disk",
            &tiny,
        ])
        .refused("too small for a member disk");
    assert!(
        refused.stderr.contains("at least 4 AUs of 4 MiB"),
        "{refused:?}"
    );
    assert!(refused.stderr.contains("MiB or more"), "{refused:?}");
    rig.cairn(&[
        "group",
        "create",
        "SMALL",
        "--redundancy",
        "external",
        "--au-size",
        "4M",
        "--disk",
        &m0,
        "--disk",
        &m1,
    ])
    .ok();
    let before = rig.disks_json("SMALL");
    let refused = rig
        .cairn(&["group", "alter", "SMALL", "--add", &tiny])
        .refused("too small for a member disk");
    assert!(refused.stderr.contains("MiB or more"), "{refused:?}");
    assert_eq!(rig.disks_json("SMALL"), before);
    let list = rig.cairn(&["disk", "list", "--json"]).ok().json();
    let tiny_row = list["disks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["path"].as_str() == Some(tiny.as_str()))
        .cloned()
        .unwrap_or_default();
    assert_ne!(tiny_row["status"], "MEMBER", "{list:#}");
}
