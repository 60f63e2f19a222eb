//! Copies and listings: a cloned member refused, listings with a disk
//! missing, copies out that never replace what is not a regular file,
//! streams, group to group, into a directory (items 1-5, 14, 21).

use super::*;

two_hosts!(
    a_cloned_member_is_refused_by_every_command_naming_both_paths,
    cloned_member
);

/// Item 1: a sparse copy of a member beside it, made while nothing serves
/// the group. Every command that would mount refuses, naming both paths,
/// and so does `cairn serve` (served; the commands after it then run held,
/// as no service started); without the copy, nothing was changed, and the
/// group reads back through either door.
fn cloned_member(host: Host) {
    let Some(mut rig) = Door::new(host) else {
        return;
    };
    rig.create("DATA", "d", 2);
    let src = random_file(&rig.path("src.bin"), 3 * MIB, 1);
    rig.cairn(&["cp", src.to_str().unwrap(), "+DATA/f.dbf"])
        .ok();
    std::fs::copy(rig.path("d1.img"), rig.path("d1-clone.img")).unwrap();
    let (d1, clone) = (rig.arg("d1.img"), rig.arg("d1-clone.img"));
    let both = |run: Run| {
        let run = run.refused("copies");
        assert!(
            run.stderr.contains(&d1) && run.stderr.contains(&clone),
            "{}",
            run.stderr
        );
    };
    if rig.host == Host::Served {
        both(rig.serve_refused("copies"));
    }
    both(rig.cairn(&["ls", "+DATA"]));
    both(rig.cairn(&["cp", src.to_str().unwrap(), "+DATA/g.dbf"]));
    both(rig.cairn(&["cp", "+DATA/f.dbf", &rig.arg("out.bin")]));
    both(rig.cairn(&["group", "mount", "DATA"]));
    both(rig.cairn(&["group", "check", "DATA"]));
    both(rig.cairn(&["rm", "+DATA/f.dbf"]));
    let list = rig.cairn(&["group", "list", "--json"]).ok().json();
    let row = &list[0];
    assert!(
        row["state"].as_str().unwrap().starts_with("UNMOUNTABLE"),
        "{row:#}"
    );
    let disks = rig.cairn(&["disk", "list", "--json"]).ok().json();
    assert!(disks.to_string().contains("UUID CONFLICT"), "{disks:#}");

    std::fs::remove_file(rig.path("d1-clone.img")).unwrap();
    rig.start();
    rig.assert_all_online("DATA");
    rig.assert_reads_back("+DATA/f.dbf", &src);
    rig.check_clean("DATA");
    rig.stop();
}

/// Item 2: listing and inspecting with a disk missing (a typo in the
/// discovery string, a disk moved away) write nothing: the disk is ONLINE
/// again when it is found. A command that writes marks it offline, and
/// says so on stderr.
#[test]
fn read_only_commands_never_take_a_disk_offline() {
    let rig = Door::held();
    rig.create("DATA", "d", 4);
    let src = random_file(&rig.path("src.bin"), 2 * MIB, 2);
    rig.cairn(&["cp", src.to_str().unwrap(), "+DATA/f.dbf"])
        .ok();
    let before: Vec<u32> = (0..4)
        .map(|i| digest(&rig.path(&format!("d{i}.img"))))
        .collect();

    // A typo: d3 is not reached.
    let typo = format!("{}/d[012].img", rig.rig.dir.path().display());
    let out = rig.arg("out.bin");
    for args in [
        vec!["group", "list", "--json"],
        vec!["group", "disks", "DATA", "--json"],
        vec!["group", "space", "DATA"],
        vec!["ls", "+DATA"],
        vec!["du", "+DATA"],
        vec!["cp", "+DATA/f.dbf", &out],
    ] {
        let run = rig.cairn_discovering(&typo, &args).ok();
        assert!(
            run.stderr.contains("DATA_0003") && run.stderr.contains("nothing was changed"),
            "{args:?}: {}",
            run.stderr
        );
    }
    assert_eq!(
        digest(Path::new(&out)),
        digest(&src),
        "read from the mirror"
    );
    let row = rig
        .cairn_discovering(&typo, &["group", "list", "--json"])
        .ok()
        .json();
    assert_eq!(row[0]["state"], "DEGRADED", "{row:#}");
    let disks = rig
        .cairn_discovering(&typo, &["group", "disks", "DATA", "--json"])
        .ok()
        .json();
    assert_eq!(disks[3]["missing"], true, "{disks:#}");

    // Moved away and back.
    std::fs::rename(rig.path("d3.img"), rig.path("d3.away")).unwrap();
    rig.cairn(&["ls", "+DATA"]).ok();
    std::fs::rename(rig.path("d3.away"), rig.path("d3.img")).unwrap();
    let after: Vec<u32> = (0..4)
        .map(|i| digest(&rig.path(&format!("d{i}.img"))))
        .collect();
    assert_eq!(before, after, "a read-only command wrote to a disk");
    rig.assert_all_online("DATA");

    // A command that must write marks it offline, and says so.
    let run = rig
        .cairn_discovering(&typo, &["cp", src.to_str().unwrap(), "+DATA/g.dbf"])
        .ok();
    assert!(
        run.stderr.contains("DATA_0003") && run.stderr.contains("marked OFFLINE"),
        "{}",
        run.stderr
    );
    assert_eq!(rig.disks_json("DATA")[3]["state"], "OFFLINE");
}

two_hosts!(
    a_copy_out_writes_through_devices_and_links_and_never_replaces_them,
    copy_out
);

/// Item 3: a copy out never replaces a device node or a link with a
/// regular file: it writes through to a character device, follows a link to
/// its target, refuses a dangling link, and goes into a directory. Item 13:
/// nothing named `.cairn-partial` is left, whatever happened.
///
/// The destination side of a copy out, the same whoever reads the group
/// (held: this process; served: this process through the mount).
fn copy_out(host: Host) {
    let Some(mut rig) = Door::new(host) else {
        return;
    };
    rig.create("DATA", "d", 2);
    rig.start();
    let src = random_file(&rig.path("src.bin"), 3 * MIB, 3);
    rig.cairn(&["cp", src.to_str().unwrap(), "+DATA/f.dbf"])
        .ok();

    rig.cairn(&["cp", "+DATA/f.dbf", "/dev/null"]).ok();
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    rig.cairn(&["cp", "+DATA/f.dbf", "/dev/full"])
        .refused("No space left on device");
    assert!(std::fs::metadata("/dev/full")
        .unwrap()
        .file_type()
        .is_char_device());

    let target = rig.path("target.bin");
    std::fs::write(&target, b"old").unwrap();
    let link = rig.path("link.bin");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    rig.cairn(&["cp", "+DATA/f.dbf", link.to_str().unwrap()])
        .ok();
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(digest(&target), digest(&src), "written through the link");

    let dangling = rig.path("dangling.bin");
    std::os::unix::fs::symlink(rig.path("nowhere.bin"), &dangling).unwrap();
    rig.cairn(&["cp", "+DATA/f.dbf", dangling.to_str().unwrap()])
        .refused("does not exist");
    assert!(!rig.path("nowhere.bin").exists());

    let into = rig.path("into");
    std::fs::create_dir(&into).unwrap();
    rig.cairn(&["cp", "+DATA/f.dbf", into.to_str().unwrap()])
        .ok();
    assert_eq!(digest(&into.join("f.dbf")), digest(&src));
    rig.cairn(&["cp", "+DATA/f.dbf", &format!("{}/", into.display())])
        .ok();
    rig.cairn(&["cp", "+DATA/f.dbf", &rig.arg("no-such-dir/")])
        .refused("not a directory");
    assert!(rig.leftovers().is_empty(), "{:?}", rig.leftovers());
    assert!(std::fs::read_dir(&into).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .contains("partial")));
    rig.stop();
}

/// Items 4 and 5: a copy from a FIFO, killed midway (the test has fed it
/// 8 MiB and holds the FIFO open, so the copy is filling its file and cannot
/// have finished), leaves no name; a listing says a create was interrupted,
/// and the next command that writes removes the file and gives its space
/// back. The copy runs on the synchronous engine, so that its disk flocks
/// are gone once it is reaped (group_files.rs,
/// `a_group_is_held_by_one_process_and_recovers_when_it_dies`, says why).
#[test]
fn a_copy_killed_midway_leaves_no_visible_file() {
    let rig = Door::held();
    rig.create("DATA", "d", 2);
    // The file directory grows for the first user file and stays so.
    let warm = random_file(&rig.path("warm.bin"), 4096, 8);
    rig.cairn(&["cp", warm.to_str().unwrap(), "+DATA/w"]).ok();
    rig.cairn(&["rm", "+DATA/w"]).ok();
    let free_mb = rig.cairn(&["group", "list", "--json"]).ok().json()[0]["free_mb"].clone();
    let mut copy = rig
        .rig
        .fed_copy("feed.fifo", &["--engine", "sync"], "+DATA/x.dbf");
    copy.feed(&vec![0xABu8; 8 * MIB as usize]);
    copy.assert_mid_copy();
    copy.kill_9();
    let run = rig.cairn(&["ls", "+DATA", "--json"]).ok();
    assert_eq!(
        run.json(),
        serde_json::json!([]),
        "a name for a partial file"
    );
    assert!(
        run.stderr.contains("a create was interrupted"),
        "{}",
        run.stderr
    );
    let mounted = rig.cairn(&["group", "mount", "DATA", "--json"]).ok().json();
    let recovered = mounted["recovery"]["operations_recovered"].to_string();
    assert!(
        recovered.contains("unfinished create undone"),
        "{mounted:#}"
    );
    rig.check_clean("DATA");
    let after = rig.cairn(&["group", "list", "--json"]).ok().json()[0]["free_mb"].clone();
    assert_eq!(after, free_mb, "the partial file's space came back");
}

two_hosts!(streams_are_copied_to_their_end_or_to_max_size, streams);

/// Item 5: sources that are not regular files are streamed to their end;
/// an endless one stops at --max-size, and says so; a directory is refused.
///
/// Sources that are streams. A character device is copied to `--max-size`
/// by this process's own executor (its open takes data before it is known
/// who copies, so it is never handed over), which a service's group
/// refuses by its lock, naming the service; standard input is handed over.
fn streams(host: Host) {
    let Some(mut rig) = Door::new(host) else {
        return;
    };
    rig.create("DATA", "d", 2);
    rig.start();
    let urandom = rig.cairn(&["cp", "/dev/urandom", "+DATA/r.dbf", "--max-size", "3MiB"]);
    if rig.service().is_some() {
        urandom.refused("cairn serve");
    } else {
        let run = urandom.ok();
        assert!(
            run.stderr.contains("stopped at --max-size"),
            "{}",
            run.stderr
        );
        let listed = rig.cairn(&["ls", "+DATA/r.dbf", "--json"]).ok().json();
        assert_eq!(listed[0]["file"]["size_bytes"], 3 * MIB);
    }

    // Standard input, through "-" and /dev/stdin; not a whole sector long.
    let src = random_file(&rig.path("src.bin"), 5 * MIB + 100, 5);
    for (source, name) in [("-", "+DATA/s1.dbf"), ("/dev/stdin", "+DATA/s2.dbf")] {
        let out = cairn_command(&rig.rig.discover, &[("CAIRN_RUN_DIR", &rig.rig.run_dir)])
            .args(["cp", source, name])
            .stdin(std::fs::File::open(&src).unwrap())
            .output()
            .unwrap();
        Run::from(out).ok();
        let listed = rig.cairn(&["ls", name, "--json"]).ok().json();
        assert_eq!(listed[0]["file"]["size_bytes"], 5 * MIB + 512);
        assert_eq!(listed[0]["file"]["attrs"]["byte_size"], 5 * MIB + 100);
        let back = rig.path("back.bin");
        let _ = std::fs::remove_file(&back);
        rig.cairn(&["cp", name, back.to_str().unwrap()]).ok();
        assert!(std::fs::read(&back).unwrap() == std::fs::read(&src).unwrap());
    }
    rig.cairn(&["cp", rig.rig.dir.path().to_str().unwrap(), "+DATA/d.dbf"])
        .refused("is a directory");
    rig.check_clean("DATA");
    rig.stop();
}

two_hosts!(a_cross_group_copy_stages_nothing, cross_group);

/// Item 14: group to group goes straight across, with no staging file
/// anywhere (the temporary directory stays empty).
///
/// A copy between two groups goes from one to the other (served: inside
/// the service, which holds both), staging nothing in TMPDIR.
fn cross_group(host: Host) {
    let Some(mut rig) = Door::new(host) else {
        return;
    };
    rig.create("ONE", "a", 2);
    rig.create("TWO", "b", 2);
    // Served, the copy runs in the service: its TMPDIR is watched too.
    let tmp = rig.path("tmpdir");
    std::fs::create_dir(&tmp).unwrap();
    rig.start_env(&[("TMPDIR", tmp.to_str().unwrap())]);
    let src = random_file(&rig.path("src.bin"), 6 * MIB, 6);
    rig.cairn(&["cp", src.to_str().unwrap(), "+ONE/f.dbf"]).ok();
    let mark = rig.service().map(|s| s.mark());
    let run = cairn_with(
        &rig.rig.discover,
        &[
            ("CAIRN_RUN_DIR", &rig.rig.run_dir),
            ("TMPDIR", tmp.to_str().unwrap()),
        ],
        &["cp", "+ONE/f.dbf", "+TWO/g.dbf"],
    );
    run.ok();
    if let (Some(s), Some(mark)) = (rig.service(), mark) {
        s.wait_since(mark, "cairn cp: ");
    }
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
    rig.assert_reads_back("+TWO/g.dbf", &src);
    rig.check_clean("ONE");
    rig.check_clean("TWO");
    rig.stop();
}

/// Item 21: a copy into a directory takes the source's name, a path ending
/// in '/' names a directory (never a file), `rm` reports what it removed and
/// what it could not, sizes take MiB, and --version is the README's release.
#[test]
fn smaller_answers_are_right() {
    let rig = Door::held();
    rig.create("DATA", "d", 2);
    let src = random_file(&rig.path("users.dbf"), MIB, 7);
    let s = src.to_str().unwrap();
    rig.cairn(&["mkdir", "+DATA/orcl"]).ok();
    rig.cairn(&["cp", s, "+DATA/orcl/"]).ok();
    rig.cairn(&["cp", s, "+DATA/orcl"])
        .refused("+DATA/orcl/users.dbf already exists");
    rig.cairn(&["rm", "+DATA/orcl/users.dbf"]).ok();
    rig.cairn(&["cp", s, "+DATA/orcl"]).ok();
    assert_eq!(rig.ls_names("+DATA/orcl"), ["users.dbf"]);
    rig.cairn(&["cp", s, "+DATA/orcl/x.dbf/"])
        .refused("+DATA/orcl/x.dbf does not exist");
    rig.cairn(&["mkalias", "+DATA/orcl/users.dbf", "+DATA/orcl/u.dbf/"])
        .refused("names a directory");
    assert_eq!(rig.ls_names("+DATA/orcl"), ["users.dbf"]);

    rig.cairn(&["cp", s, "+DATA/a.dbf"]).ok();
    let run = rig
        .cairn(&["rm", "+DATA/a.dbf", "+DATA/nonexistent"])
        .refused("+DATA/nonexistent does not exist");
    assert!(
        run.stderr.contains("removed: +DATA/a.dbf"),
        "{}",
        run.stderr
    );
    assert!(!rig.ls_names("+DATA").contains(&"a.dbf".to_string()));

    sparse(&rig.path("m0.img"), GIB);
    sparse(&rig.path("m1.img"), GIB);
    let created = rig
        .cairn(&[
            "group",
            "create",
            "MIB",
            "--au-size",
            "4MiB",
            "--disk",
            &format!("{}=A", rig.arg("m0.img")),
            "--disk",
            &format!("{}=B", rig.arg("m1.img")),
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(created["group"]["au_mb"], 4);

    let version = cairn(&rig.rig.discover, &["--version"]).ok().stdout;
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let release = readme
        .split("(release ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap();
    assert!(
        version.trim().starts_with(&format!("cairn {release}.")),
        "--version {version:?}, README release {release}"
    );
}
