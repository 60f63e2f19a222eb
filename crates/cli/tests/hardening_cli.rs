//! The adversarial scenarios of the hardening pass, end to end on the real
//! binary over sparse files: a cloned member, read-only commands that must
//! never write, copies to device nodes and links, copies killed midway,
//! non-regular sources, cross-group copies, and the smaller answers that
//! were wrong or unclear. Each test has its own directory, discovery glob
//! and lock directory.
//!
//! Where the scenario is the group's (a cloned member, damage a mount
//! finds, `check`, copies out — to files, links, devices, and never over a
//! group's disk — streams, copies between groups), it runs
//! through both doors from one body (`two_hosts!`): held, and served by
//! `cairn serve` with every command through its socket; disks are changed
//! while nothing serves the group, and the service, started again, finds
//! them as a mount does. The rest stay held, each for its reason: `group
//! create` (the CLI's own whichever the host), read-only commands and a
//! typo in the discovery string (a served group's commands do not use the
//! CLI's discovery), a member this user cannot write (the service runs as
//! root), a copy fed from a FIFO (never handed to a service), and a disk
//! failing under a held copy (lifecycle_cli and serve_cli fail one under the
//! service).

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use cairn_io::test_support::prerequisite;
use common::*;
use serde_json::Value;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

impl Door {
    /// `cairn` with another discovery string (a typo, say), the group held.
    fn cairn_discovering(&self, discover: &str, args: &[&str]) -> Run {
        cairn_with(discover, &[("CAIRN_RUN_DIR", &self.rig.run_dir)], args)
    }

    /// A normal-redundancy group over `n` (2 or 4) 1 GiB disks
    /// `<prefix>0.img`..., in failure groups FG1 and FG2.
    fn create(&self, name: &str, prefix: &str, n: usize) {
        let mut args = vec![
            "group".to_string(),
            "create".into(),
            name.into(),
            "--au-size".into(),
            "1M".into(),
        ];
        for i in 0..n {
            let disk = format!("{prefix}{i}.img");
            sparse(&self.path(&disk), GIB);
            args.push("--disk".into());
            args.push(format!("{}=FG{}", self.arg(&disk), 1 + i * 2 / n));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // The CLI's own whichever the host: a group no service serves yet.
        self.rig.cairn(&args).ok();
    }

    fn disks_json(&self, group: &str) -> Value {
        self.cairn(&["group", "disks", group, "--json"]).ok().json()
    }

    fn assert_all_online_of(&self, group: &str) {
        self.assert_all_online(group)
    }

    /// Every member ONLINE, as the superblocks record it.
    fn assert_all_online(&self, group: &str) {
        let disks = self.disks_json(group);
        for d in disks.as_array().unwrap() {
            assert_eq!(d["state"], "ONLINE", "{disks:#}");
        }
    }

    fn ls_names(&self, path: &str) -> Vec<String> {
        self.cairn(&["ls", path, "--json"])
            .ok()
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// Files in the test directory other than the disks, sources and the run
    /// directory: what a command left behind.
    fn leftovers(&self) -> Vec<String> {
        std::fs::read_dir(self.rig.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("cairn-partial"))
            .collect()
    }
}

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

/// Zero both superblock slots of a disk: what a `group create` killed after
/// the disk headers and before any superblock leaves.
fn wipe_superblocks(disk: &Path) {
    for base in cairn_format::group::SUPER_SLOT_OFFSETS_BYTES {
        write_at(disk, base, &vec![0u8; 16 * 4096]);
    }
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

/// The group `DATA` of `rig`, mounted read-only in this process, handed to
/// `f` with the path of each attached device (by device id): for a test that
/// must find where a block lives on the disks.
fn with_group<T>(
    rig: &Door,
    f: impl FnOnce(&cairn_store::group::Group<'_>, &std::collections::BTreeMap<u32, PathBuf>) -> T,
) -> T {
    let mut engine = cairn_io::new_file_engine(cairn_io::EngineKind::Sync, 8).unwrap();
    let host = cairn_io::host::Host::real();
    let discovery = cairn_store::discovery::DiscoveryString::resolve(
        Some(&rig.rig.discover),
        None,
        Path::new("/nonexistent"),
    )
    .unwrap();
    let m = cairn_store::group_admin::mount_read_only(
        engine.as_mut(),
        &host,
        &discovery,
        "DATA",
        Path::new(&rig.rig.run_dir),
    )
    .unwrap();
    f(&m.group, &m.paths)
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
