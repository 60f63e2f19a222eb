//! One test body, two hosts (issue 34, part 1): each scenario here runs
//! once with the CLI carrying its commands out on a group it mounts for
//! each (no service), and once with `cairn serve` holding the group, every
//! command going through its socket. The commands, their checks and what
//! must come of them are the same text; only the host differs — so a
//! check one door makes and the other forgets fails one of the pair.
//!
//! The scenarios are part 2 of the issue: a disk that must never come
//! back (an older clone of it, a blank device, another group's disk, put
//! where the member was), and scrub that must not spread damage.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::*;

const MIB: u64 = 1 << 20;

impl Door {
    /// Group DATA, normal redundancy: D0, D1 in failure group A; D2, D3
    /// in B; 1 MiB AUs.
    fn create(&self) {
        let mut args: Vec<String> = [
            "group",
            "create",
            "DATA",
            "--redundancy",
            "normal",
            "--au-size",
            "1M",
        ]
        .map(String::from)
        .to_vec();
        for i in 0..4 {
            let path = sparse(&self.rig.path(&format!("d{i}.img")), 128 * MIB);
            self.rig
                .cairn(&["disk", "label", &format!("D{i}"), path.to_str().unwrap()])
                .ok();
            args.push("--disk".into());
            args.push(format!(
                "{}={}",
                path.display(),
                if i < 2 { "A" } else { "B" }
            ));
        }
        self.rig
            .cairn(&args.iter().map(String::as_str).collect::<Vec<_>>())
            .ok();
    }

    /// `group disks DATA --json`.
    fn disks(&self) -> serde_json::Value {
        self.cairn(&["group", "disks", "DATA", "--json"])
            .ok()
            .json()
    }

    fn state(&self, label: &str) -> String {
        row(&self.disks(), label)
            .map(|d| d["state"].as_str().unwrap().to_string())
            .unwrap_or_else(|| "GONE".into())
    }

    /// Each command is refused: exit 1, one line `cairn: error: ...` with
    /// its words in it. `sent`: through the service when one runs (its log
    /// must name each); otherwise refused where the command line is parsed,
    /// by the CLI whichever the host. Every one that is not, listed at once.
    fn refuses(&self, commands: &[(&[&str], &str)], sent: bool) {
        let mut wrong = Vec::new();
        for (args, needle) in commands {
            let run = if sent {
                self.sent(args)
            } else {
                self.rig.cairn(args)
            };
            if run.code != 1
                || run.stderr.trim().lines().count() != 1
                || !run.stderr.starts_with("cairn: error: ")
                || !run.stderr.contains(needle)
            {
                wrong.push(format!("{args:?} (want {needle:?}): {run:?}"));
            }
        }
        assert!(wrong.is_empty(), "refusals:\n{}", wrong.join("\n"));
    }

    /// Copy `file` in as `+DATA/name`.
    fn put(&self, file: &Path, name: &str) {
        self.cairn(&["cp", file.to_str().unwrap(), &format!("+DATA/{name}")])
            .ok();
    }

    /// `+DATA/name` reads back as `file`.
    fn reads_back(&self, name: &str, file: &Path) {
        let out = self.rig.path("readback.bin");
        let _ = std::fs::remove_file(&out);
        self.cairn(&["cp", &format!("+DATA/{name}"), out.to_str().unwrap()])
            .ok();
        assert_eq!(digest(&out), digest(file), "+DATA/{name}");
    }
}

/// Disk `label`'s row of a `group disks --json` listing.
fn row<'a>(rows: &'a serde_json::Value, label: &str) -> Option<&'a serde_json::Value> {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|d| d["label"] == label)
}

two_hosts!(
    a_wrong_image_in_a_members_place_never_comes_back,
    wrong_image_never_comes_back
);

/// Part 2 items 1 and 2: D3 is taken offline and files are written
/// meanwhile; in its place are put, in turn, an older image of D3 (copied
/// before B was written), a blank device of its size, and a disk of
/// another group. `group online --wait` refuses each, naming what it
/// found, and D3 stays OFFLINE; with its own image back it comes ONLINE,
/// and every file reads back from its failure group (B) alone.
fn wrong_image_never_comes_back(host: Host) {
    let Some(mut h) = Door::new(host) else {
        return;
    };
    h.create();
    let [a, b, c] = [1u64, 2, 3].map(|seed| {
        random_file(
            &h.rig.path(&format!("f{seed}.bin")),
            3 * MIB + 4096 * seed,
            seed,
        )
    });
    h.start();
    h.put(&a, "a.dbf");
    h.stop();
    let d3 = h.rig.path("d3.img");
    let older = h.rig.path("d3.older");
    std::fs::copy(&d3, &older).unwrap();
    h.start();
    h.put(&b, "b.dbf");
    h.cairn(&["group", "offline", "DATA", "D3"]).ok();
    assert_eq!(h.state("D3"), "OFFLINE");
    h.put(&c, "c.dbf");
    let own = h.rig.path("d3.own");
    std::fs::copy(&d3, &own).unwrap();

    // Written in place (the same file, as a copy put back would be).
    let put_back = |from: &Path| {
        let bytes = std::fs::read(from).unwrap();
        std::fs::write(&d3, &bytes).unwrap();
    };
    let refused = |h: &Door, what: &str, needle: &str| {
        let run = h
            .cairn(&["group", "online", "DATA", "D3", "--wait"])
            .refused(needle);
        assert_eq!(run.stderr.trim().lines().count(), 1, "{what}: {run:?}");
        assert_eq!(h.state("D3"), "OFFLINE", "{what}");
        h.reads_back("b.dbf", &b);
    };
    put_back(&older);
    refused(&h, "an older image", "not the image the group took offline");

    let size = std::fs::metadata(&d3).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&d3).unwrap();
    f.set_len(0).unwrap();
    f.set_len(size).unwrap();
    drop(f);
    // The service has the member's device open again (it let go of it at
    // `offline`, and opened it anew, by discovery, for the older image it
    // refused) and reads what is on it now; a command of its own finds
    // disks by their labels, and a blank device has none: discovery does
    // not find D3 at all, and `online` says so.
    let blank = match host {
        Host::Served => "no copy of a Cairn label is on it",
        Host::Held => "disk D3 of group DATA cannot be brought back: discovery",
    };
    refused(&h, "a blank device", blank);

    let other = h.rig.path("other");
    std::fs::create_dir_all(&other).unwrap();
    let o0 = sparse(&other.join("o0.bin"), 128 * MIB);
    h.rig
        .cairn(&["disk", "label", "O0", o0.to_str().unwrap()])
        .ok();
    h.rig
        .cairn(&[
            "group",
            "create",
            "OTHER",
            "--redundancy",
            "external",
            "--au-size",
            "1M",
            "--disk",
            o0.to_str().unwrap(),
        ])
        .ok();
    put_back(&o0);
    // (A command of its own finds there disk O0 of group OTHER, by its
    // label: D3 is not found at all.)
    let foreign = match host {
        Host::Served => "a disk of another group",
        Host::Held => "disk D3 of group DATA cannot be brought back: discovery",
    };
    refused(&h, "another group's disk", foreign);

    // Its own image: back, resynced, and B alone serves every file.
    put_back(&own);
    h.cairn(&["group", "online", "DATA", "D3", "--wait"]).ok();
    assert_eq!(h.state("D3"), "ONLINE");
    h.cairn(&["group", "offline", "DATA", "D0", "D1"]).ok();
    for (name, file) in [("a.dbf", &a), ("b.dbf", &b), ("c.dbf", &c)] {
        h.reads_back(name, file);
    }
    h.cairn(&["group", "online", "DATA", "D0", "D1", "--wait"])
        .ok();
    let check = h.cairn(&["group", "check", "DATA"]);
    assert_eq!(check.code, 0, "{check:?}");
    h.stop();
}

two_hosts!(
    scrub_never_copies_a_bad_copy_over_a_good_one,
    scrub_does_not_guess
);

/// Part 2 item 3, two copies: a block of one copy rotted; scrub reports
/// it, `--repair` without a choice rewrites nothing (two copies that
/// differ, nothing says which is right), and `--prefer` the good copy's
/// disk repairs it: then the rotted disk's failure group alone reads the
/// file back whole.
fn scrub_does_not_guess(host: Host) {
    let Some(mut h) = Door::new(host) else {
        return;
    };
    h.create();
    let f = random_file(&h.rig.path("f.bin"), 2 * MIB, 9);
    h.start();
    h.put(&f, "f.dbf");
    h.stop();
    // Where the file's block at 8 KiB lies, copy by copy (found by its
    // bytes, which are random: one place on one disk of each failure
    // group).
    let data = std::fs::read(&f).unwrap();
    let block = &data[8192..8192 + 4096];
    let copies = find_block(&h.rig, block);
    assert_eq!(copies.len(), 2, "{copies:?}");
    let ((bad_disk, at), (good_disk, _)) = (copies[0], copies[1]);
    assert_ne!(
        bad_disk < 2,
        good_disk < 2,
        "one copy in each failure group"
    );
    // Rot it on `bad_disk`, with nothing holding the group.
    let image = h.rig.path(&format!("d{bad_disk}.img"));
    let mut bytes = std::fs::read(&image).unwrap();
    for x in &mut bytes[at as usize..at as usize + 4096] {
        *x ^= 0x5a;
    }
    std::fs::write(&image, &bytes).unwrap();
    h.start();
    let found = h.cairn(&["group", "scrub", "DATA", "--wait", "--json"]);
    assert_ne!(found.code, 0, "{found:?}");
    let guessed = h.cairn(&["group", "scrub", "DATA", "--repair", "--wait"]);
    assert_ne!(
        guessed.code, 0,
        "two copies that differ: no guess: {guessed:?}"
    );
    assert_eq!(
        std::fs::read(&image).unwrap()[at as usize..at as usize + 4096],
        bytes[at as usize..at as usize + 4096],
        "nothing rewritten without a choice"
    );
    h.cairn(&[
        "group",
        "scrub",
        "DATA",
        "--repair",
        "--prefer",
        &format!("D{good_disk}"),
        "--wait",
    ])
    .ok();
    let clean = h.cairn(&["group", "scrub", "DATA", "--wait"]);
    assert_eq!(clean.code, 0, "{clean:?}");
    // The repaired copy's failure group alone serves the file.
    let (away1, away2) = if bad_disk < 2 {
        ("D2", "D3")
    } else {
        ("D0", "D1")
    };
    h.cairn(&["group", "offline", "DATA", away1, away2]).ok();
    h.reads_back("f.dbf", &f);
    h.stop();
}

two_hosts!(
    the_disk_life_cycle_answers_alike_through_either_door,
    life_cycle
);

/// Part 1: the disk life cycle's commands — their refusals word for word,
/// and what they do. Each refusal is one line, exit 1, and changes
/// nothing; then a disk is taken offline
/// on request and brought back, attributes set, a disk added and one
/// dropped in one rebalance, an OFFLINE disk replaced; the two new disks
/// (failure group B) alone then serve every file, and check and scrub find
/// the group clean.
fn life_cycle(host: Host) {
    let Some(mut h) = Door::new(host) else {
        return;
    };
    h.create();
    let a = random_file(&h.rig.path("a.bin"), 5 * MIB + 4096, 21);
    let b = random_file(&h.rig.path("b.bin"), 3 * MIB, 22);
    let new: Vec<String> = (4..6)
        .map(|i| {
            let p = sparse(&h.rig.path(&format!("d{i}.img")), 128 * MIB);
            h.rig
                .cairn(&["disk", "label", &format!("D{i}"), p.to_str().unwrap()])
                .ok();
            p.display().to_string()
        })
        .collect();
    let d0 = h.rig.path("d0.img").display().to_string();
    h.start();
    h.put(&a, "a.dbf");
    let before = h.disks();

    let add_d4 = format!("{}=B", new[0]);
    let refusals: [(&[&str], &str); 15] = [
        (&["group", "offline", "DATA", "D0", "D2"], "no copy to read"),
        (&["group", "offline", "DATA", "NOPE"], "has no disk NOPE"),
        (&["group", "offline", "DATA", "D1", "D1"], "named twice"),
        (&["group", "online", "DATA", "D1"], "not OFFLINE"),
        (
            &["group", "alter", "DATA", "--drop", "D2", "--drop", "D3"],
            "failure group",
        ),
        (
            &["group", "alter", "DATA", "--drop", "NOPE"],
            "has no disk NOPE",
        ),
        (&["group", "alter", "DATA", "--add", &d0], "already a disk"),
        (&["group", "alter", "DATA"], "--add"),
        (
            &["group", "alter", "DATA", "--drop", "D1", "--drop", "D1"],
            "named twice",
        ),
        (
            &["group", "drop-disk", "DATA", "D2", "--force"],
            "only an OFFLINE disk",
        ),
        (
            &["group", "replace", "DATA", "D2", "--with", &new[0]],
            "only an OFFLINE disk",
        ),
        (&["group", "undrop", "DATA"], "no drop pending"),
        (
            &["group", "set", "DATA", "colour=red"],
            "the keys are: disk_repair_time",
        ),
        (&["group", "get", "DATA", "nope"], "no attribute"),
        // Not rounded to 0 (a timer that drops the disk at once).
        (
            &["group", "set", "DATA", "disk_repair_time=0.4s"],
            "under a second",
        ),
    ];
    // Refused where the command line is parsed into a typed request, by
    // the CLI whichever the host: never sent.
    let parsed: [(&[&str], &str); 2] = [
        (
            &["group", "offline", "DATA", "D1", "--drop-after", "7x"],
            "unknown unit",
        ),
        (&["group", "reclaim", "DATA", "--rate", "1e99"], "--rate"),
    ];
    h.refuses(&refusals, true);
    h.refuses(&parsed, false);
    assert_eq!(h.disks(), before, "the refusals changed nothing");

    // Offline on request, with its own repair time; written meanwhile;
    // brought back.
    let off = h
        .cairn(&["group", "offline", "DATA", "D1", "--drop-after", "90m"])
        .ok();
    assert!(off.stdout.contains("is OFFLINE (on request)"), "{off:?}");
    let rows = h.disks();
    let d1 = row(&rows, "D1").unwrap();
    assert_eq!(d1["state"], "OFFLINE", "{d1}");
    assert!(
        d1["repair_seconds_left"].as_u64().unwrap() <= 90 * 60,
        "{d1}"
    );
    h.cairn(&["group", "offline", "DATA", "D1"])
        .refused("already OFFLINE");
    h.put(&b, "b.dbf");
    h.cairn(&["group", "online", "DATA", "D1", "--wait"]).ok();
    assert_eq!(h.state("D1"), "ONLINE");

    // Attributes.
    h.cairn(&[
        "group",
        "set",
        "DATA",
        "disk_repair_time=30m",
        "rebalance_compact=false",
    ])
    .ok();
    let got = h.cairn(&["group", "get", "DATA", "disk_repair_time"]).ok();
    assert_eq!(got.stdout.trim(), "disk_repair_time = 30m");

    // D4 joins B as D2 leaves it: one rebalance.
    h.cairn(&[
        "group", "alter", "DATA", "--add", &add_d4, "--drop", "D2", "--wait",
    ])
    .ok();
    assert_eq!(h.state("D2"), "GONE");
    assert_eq!(h.state("D4"), "ONLINE");
    h.cairn(&["group", "undrop", "DATA"])
        .refused("no drop pending");

    // D3 taken offline and replaced by D5, filled from the mirrors.
    h.cairn(&["group", "offline", "DATA", "D3"]).ok();
    h.cairn(&[
        "group", "replace", "DATA", "D3", "--with", &new[1], "--wait",
    ])
    .ok();
    assert_eq!(h.state("D3"), "GONE");
    assert_eq!(h.state("D5"), "ONLINE");

    // The two new disks alone serve every file.
    h.cairn(&["group", "offline", "DATA", "D0", "D1"]).ok();
    h.reads_back("a.dbf", &a);
    h.reads_back("b.dbf", &b);
    h.cairn(&["group", "online", "DATA", "D0", "D1", "--wait"])
        .ok();
    let check = h.cairn(&["group", "check", "DATA"]);
    assert_eq!(check.code, 0, "{check:?}");
    h.cairn(&["group", "scrub", "DATA", "--wait"]).ok();
    let space = h.cairn(&["group", "space", "DATA", "--json"]).ok().json();
    let listed = space.to_string();
    for label in ["D0", "D1", "D4", "D5"] {
        assert!(listed.contains(&format!("\"{label}\"")), "{label}: {space}");
    }
    h.stop();
}

two_hosts!(moving_data_answers_alike_through_either_door, moving_data);

/// Part 1: the commands that move data — what they say they will do and
/// what they did, the same through either door: `--explain` (nothing
/// changes), an add and a drop left paused at power 0 and finished by
/// `rebalance`, a shrink, an OFFLINE disk dropped by force and its copies
/// rebuilt, a reclaim; the file reads back after each, and check is
/// clean at the end.
fn moving_data(host: Host) {
    let Some(mut h) = Door::new(host) else {
        return;
    };
    h.create();
    let a = random_file(&h.rig.path("a.bin"), 24 * MIB, 31);
    let d4 = sparse(&h.rig.path("d4.img"), 128 * MIB);
    h.rig
        .cairn(&["disk", "label", "D4", d4.to_str().unwrap()])
        .ok();
    let add_d4 = format!("{}=A", d4.display());
    h.start();
    h.put(&a, "a.dbf");
    let before = h.disks();
    let used = |rows: &serde_json::Value, label: &str| {
        row(rows, label)
            .map(|d| d["total_aus"].as_u64().unwrap() - d["free_aus"].as_u64().unwrap())
            .unwrap()
    };

    let change = ["group", "alter", "DATA", "--add", &add_d4, "--drop", "D1"];
    let mut explain = change.to_vec();
    explain.extend(["--explain", "--json"]);
    let explained = h.cairn(&explain).ok().json();
    assert_eq!(
        explained["explain"]["aus_to_move"].as_u64(),
        Some(used(&before, "D1")),
        "the plan moves what D1 holds: {explained:#}"
    );
    assert_eq!(h.disks(), before, "--explain changed nothing");

    let mut paused = change.to_vec();
    paused.extend(["--power", "0", "--wait", "--json"]);
    let paused = h.cairn(&paused).ok().json();
    assert_eq!(paused["rebalance"]["paused"], true, "{paused:#}");
    let rows = h.disks();
    let d1 = row(&rows, "D1").unwrap();
    assert_eq!(d1["dropping"], true, "a drop pending: {d1:#}");
    h.reads_back("a.dbf", &a);
    let resumed = h
        .cairn(&[
            "group",
            "rebalance",
            "DATA",
            "--power",
            "8",
            "--wait",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(
        resumed["rebalance"]["disks_dropped"],
        serde_json::json!(["D1"]),
        "{resumed:#}"
    );
    assert_eq!(h.state("D1"), "GONE");
    assert_eq!(h.state("D4"), "ONLINE");
    h.reads_back("a.dbf", &a);

    // A shrink: what lay past the cut moves first.
    let shrunk = h
        .cairn(&[
            "group", "alter", "DATA", "--resize", "D0=24M", "--wait", "--json",
        ])
        .ok()
        .json();
    assert!(
        shrunk["rebalance"]["disks_resized"][0]
            .as_str()
            .is_some_and(|s| s.starts_with("D0 to ")),
        "{shrunk:#}"
    );
    let rows = h.disks();
    let d0 = row(&rows, "D0").unwrap();
    assert!(d0["size_bytes"].as_u64().unwrap() <= 24 * MIB, "{d0:#}");
    h.reads_back("a.dbf", &a);

    // An OFFLINE disk dropped by force: its copies rebuilt from B's.
    h.cairn(&["group", "offline", "DATA", "D2"]).ok();
    let dropped = h
        .cairn(&[
            "group",
            "drop-disk",
            "DATA",
            "D2",
            "--force",
            "--wait",
            "--json",
        ])
        .ok()
        .json();
    assert!(
        dropped["rebalance"]["copies_rebuilt"].as_u64().unwrap() > 0,
        "{dropped:#}"
    );
    assert_eq!(h.state("D2"), "GONE");

    let reclaimed = h
        .cairn(&["group", "reclaim", "DATA", "--wait", "--json"])
        .ok()
        .json();
    assert!(reclaimed.is_object(), "{reclaimed:#}");
    assert_eq!(
        h.cairn(&["group", "ops", "DATA", "--json"]).ok().json(),
        serde_json::json!([]),
        "nothing left running"
    );
    let check = h.cairn(&["group", "check", "DATA"]);
    assert_eq!(check.code, 0, "{check:?}");
    // A's failure group (D0, D4) alone, then B's (D3) alone.
    h.cairn(&["group", "offline", "DATA", "D3"]).ok();
    h.reads_back("a.dbf", &a);
    h.cairn(&["group", "online", "DATA", "D3", "--wait"]).ok();
    h.cairn(&["group", "offline", "DATA", "D0", "D4"]).ok();
    h.reads_back("a.dbf", &a);
    h.stop();
}

two_hosts!(names_answer_alike_through_either_door, names);

/// Part 1: the name space's commands (`mkdir`, `cp` in, across and out,
/// `mkalias`, `ls`, `du`, `rm`) through either door: their refusals word
/// for word, and what they do — the copies read back, an alias is the
/// same file, a listing and a usage say the same, a removal frees.
fn names(host: Host) {
    let Some(mut h) = Door::new(host) else {
        return;
    };
    h.create();
    let a = random_file(&h.rig.path("a.bin"), 3 * MIB + 512, 41);
    h.start();
    h.cairn(&["mkdir", "+DATA/orcl"]).ok();
    h.cairn(&[
        "cp",
        a.to_str().unwrap(),
        "+DATA/orcl/a.dbf",
        "--template",
        "DATAFILE",
    ])
    .ok();
    h.cairn(&["cp", "+DATA/orcl/a.dbf", "+DATA/orcl/b.dbf"])
        .ok();
    h.cairn(&["mkalias", "+DATA/orcl/a.dbf", "+DATA/orcl/a_alias"])
        .ok();
    let out = h.rig.path("out.bin").display().to_string();
    let missing_dir = h.rig.path("no/such/dir/x").display().to_string();
    let refusals: [(&[&str], &str); 8] = [
        (&["mkdir", "+DATA/orcl"], "exists"),
        (&["mkdir", "+DATA/nope/deeper"], "nope"),
        (&["rm", "+DATA/orcl"], "not empty"),
        (&["rm", "+DATA/orcl/nothing"], "nothing"),
        (&["ls", "+DATA/nothing"], "nothing"),
        (&["cp", "+DATA/orcl/nothing", &out], "nothing"),
        (&["cp", "+DATA/orcl/a.dbf", &missing_dir], "no/such/dir"),
        (
            &["mkalias", "+DATA/orcl/nothing", "+DATA/orcl/x"],
            "nothing",
        ),
    ];
    h.refuses(&refusals, true);

    let listed = h.cairn(&["ls", "+DATA/orcl", "--json"]).ok().json();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a.dbf", "a_alias", "b.dbf"], "{listed:#}");
    for name in ["orcl/a.dbf", "orcl/a_alias", "orcl/b.dbf"] {
        h.reads_back(name, &a);
    }
    let du = h.cairn(&["du", "+DATA/orcl", "--json"]).ok().json();
    let du_text = du.to_string();
    assert!(du.is_object() || du.is_array(), "{du_text}");
    // The alias goes, the file stays; the file goes, the alias with it.
    h.cairn(&["rm", "+DATA/orcl/a_alias"]).ok();
    h.reads_back("orcl/a.dbf", &a);
    h.cairn(&["rm", "+DATA/orcl/a.dbf", "+DATA/orcl/b.dbf"])
        .ok();
    let listed = h.cairn(&["ls", "+DATA/orcl", "--json"]).ok().json();
    assert_eq!(listed, serde_json::json!([]), "{listed:#}");
    h.cairn(&["rm", "+DATA/orcl"]).ok();
    let check = h.cairn(&["group", "check", "DATA"]);
    assert_eq!(check.code, 0, "{check:?}");
    h.stop();
}

/// Where `block` (4 KiB) lies on the disks `d0.img`..`d3.img`: (disk
/// number, byte offset), each 4 KiB-aligned place that holds it.
fn find_block(rig: &Rig, block: &[u8]) -> Vec<(u64, u64)> {
    let mut found = Vec::new();
    for d in 0..4u64 {
        let image = std::fs::read(rig.path(&format!("d{d}.img"))).unwrap();
        for (i, chunk) in image.chunks_exact(4096).enumerate() {
            if chunk == block {
                found.push((d, i as u64 * 4096));
            }
        }
    }
    found
}
