//! The disk life cycle end to end, with the real binary, on sparse files and
//! on 512- and 4096-byte-sector loop devices: a disk goes away, the group
//! runs on and is written, the disk comes back and is resynced with only the
//! AUs it missed; a disk taken offline on request stays offline until
//! brought online; attributes are set and shown; bad requests are refused
//! with one line and change nothing.
//!
//! On sparse files a disk fails for real (its own small file system shut
//! down, then unmounted), and the scenario runs through both doors from one
//! body (`two_hosts!`): held, and served by `cairn serve` with every group
//! command through its socket; so does item 18's high-redundancy online.
//! On loop devices a disk leaves by falling out of the discovery string,
//! which only a command that mounts the group for itself notices (a
//! service holds its members open): those run held, with the offline on
//! request, `group mount` and the attributes (two_hosts.rs runs those
//! commands through both doors).

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cairn_io::test_support::{loop_device, prerequisite, LoopDevice};
use common::*;
use serde_json::Value;

const MIB: u64 = 1 << 20;

/// Loop-device tests run one at a time (see `group_loop.rs`).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Makes only the disks marked visible reachable; returns the discovery
/// string to use.
type Show = Box<dyn Fn(&[bool; 4]) -> String>;

/// Four disks D0..D3 (failure groups FG1: D0, D1; FG2: D2, D3) and a way to
/// show the binary only some of them.
struct Disks {
    dir: PathBuf,
    run_dir: String,
    /// The path of each disk as `group create` is given it.
    paths: Vec<String>,
    show: Show,
}

impl Disks {
    fn cairn(&self, visible: &[bool; 4], args: &[&str]) -> Run {
        let discover = (self.show)(visible);
        cairn_with(&discover, &[("CAIRN_RUN_DIR", &self.run_dir)], args)
    }
}

const ALL: [bool; 4] = [true; 4];
const WITHOUT_D3: [bool; 4] = [true, true, true, false];
const ONLY_FG1: [bool; 4] = [true, true, false, false];
const ONLY_FG2: [bool; 4] = [false, false, true, true];

fn disk_row(disks: &Value, index: usize) -> &Value {
    &disks.as_array().unwrap()[index]
}

/// The scenario on `disks`, group `name`.
fn disk_comes_back(disks: &Disks, name: &str) {
    let mut args = vec!["group".to_string(), "create".into(), name.into()];
    for (i, p) in disks.paths.iter().enumerate() {
        args.extend(["--disk".into(), format!("{p}=FG{}", 1 + i / 2)]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    disks.cairn(&ALL, &args).ok();
    let src1 = random_file(&disks.dir.join("src1.bin"), 24 * MIB, 1);
    let src2 = random_file(&disks.dir.join("src2.bin"), 12 * MIB, 2);
    let a = format!("+{name}/a.dbf");
    let b = format!("+{name}/b.dbf");
    let f = format!("+{name}/bench/f1");
    disks.cairn(&ALL, &["cp", src1.to_str().unwrap(), &a]).ok();
    let out = |n: &str| disks.dir.join(n).display().to_string();
    let bench = |visible: &[bool; 4], run: &str, extra: &[&str]| {
        let o = out(run);
        let mut args = vec![
            "bench", "quick", "--json", "--out", &o, "--target", &f, "--size", "32m", "--bs", "8k",
            "--qd", "8", "--time", "2s",
        ];
        args.extend(extra);
        disks.cairn(visible, &args).ok()
    };
    bench(&ALL, "bench1", &["--rw", "randwrite"]);

    // D3 goes away. The next command that writes marks it OFFLINE and says so.
    let run = disks
        .cairn(&WITHOUT_D3, &["cp", src2.to_str().unwrap(), &b])
        .ok();
    assert!(run.stderr.contains("now marked OFFLINE"), "{}", run.stderr);
    // The group runs on and is written: the writes that D3's copies miss
    // mark them stale.
    bench(&WITHOUT_D3, "bench2", &["--rw", "randwrite", "--force"]);
    let listed = disks
        .cairn(&WITHOUT_D3, &["group", "disks", name, "--json"])
        .ok()
        .json();
    let d3 = disk_row(&listed, 3);
    assert_eq!(d3["state"], "OFFLINE", "{listed:#}");
    let stale = d3["stale_aus"].as_u64().unwrap();
    assert!(
        stale > 0,
        "writes while D3 was away marked its copies stale: {d3:#}"
    );
    assert!(d3["repair_seconds_left"].as_u64().is_some(), "{d3:#}");

    // D3 is back: `online --all` resyncs it, copying only the stale AUs.
    let back = disks
        .cairn(&ALL, &["group", "online", name, "--all", "--json"])
        .ok()
        .json();
    let copied = back["mount_resync"]["aus_copied"].as_u64().unwrap()
        + back["resync"]["aus_copied"].as_u64().unwrap();
    let bytes = back["mount_resync"]["bytes_copied"].as_u64().unwrap()
        + back["resync"]["bytes_copied"].as_u64().unwrap();
    let au = disks
        .cairn(&ALL, &["group", "disks", name, "--json"])
        .ok()
        .json()[0]["au_bytes"]
        .as_u64()
        .unwrap();
    assert_eq!(copied, stale, "only the stale AUs are copied: {back:#}");
    assert_eq!(bytes, stale * au, "{back:#}");
    for d in back["disks"].as_array().unwrap() {
        assert_eq!(d["state"], "ONLINE", "{back:#}");
        assert_eq!(d["stale_aus"], 0, "{back:#}");
    }
    let check = disks.cairn(&ALL, &["group", "check", name]).ok();
    assert_eq!(
        check.stdout.lines().last(),
        Some("clean"),
        "{}",
        check.stdout
    );
    // A second `online` finds nothing to do.
    let again = disks
        .cairn(&ALL, &["group", "online", name, "--all", "--json"])
        .ok()
        .json();
    assert_eq!(again["resync"]["aus_copied"], 0, "{again:#}");

    // Every file reads back whole from either failure group alone.
    let mut f1 = Vec::new();
    for (half, tag) in [(ONLY_FG1, "fg1"), (ONLY_FG2, "fg2")] {
        for (file, src) in [(&a, Some(&src1)), (&b, Some(&src2)), (&f, None)] {
            let to = out(&format!("{tag}-{}", file.rsplit('/').next().unwrap()));
            disks.cairn(&half, &["cp", file, &to]).ok();
            match src {
                Some(src) => assert_eq!(digest(Path::new(&to)), digest(src), "{file} from {tag}"),
                None => f1.push(digest(Path::new(&to))),
            }
        }
    }
    assert_eq!(
        f1[0], f1[1],
        "the benchmark file's copies agree across failure groups"
    );
}

/// A disk taken offline on request, set/get, and the refusals.
fn offline_on_request(disks: &Disks, name: &str) {
    let d0 = format!("{name}_0000");
    let d1 = format!("{name}_0001");
    let d2 = format!("{name}_0002");
    disks
        .cairn(&ALL, &["group", "offline", name, &d0, &d2])
        .refused("no copy to read");
    disks
        .cairn(&ALL, &["group", "offline", name, "NOPE_0000"])
        .refused("has no disk NOPE_0000");
    disks
        .cairn(&ALL, &["group", "offline", name, &d1, "--drop-after", "7x"])
        .refused("unknown unit");
    let run = disks
        .cairn(
            &ALL,
            &["group", "offline", name, &d1, "--drop-after", "90m"],
        )
        .ok();
    assert!(
        run.stdout.contains("is OFFLINE (on request)"),
        "{}",
        run.stdout
    );
    // A writer's mount leaves it offline: it was asked for.
    let mounted = disks.cairn(&ALL, &["group", "mount", name]).ok();
    assert!(
        mounted.stdout.contains("taken offline on request"),
        "{mounted:?}"
    );
    assert!(
        mounted.stderr.is_empty(),
        "asked for, so not warned about: {mounted:?}"
    );
    let listed = disks
        .cairn(&ALL, &["group", "disks", name, "--json"])
        .ok()
        .json();
    let row = disk_row(&listed, 1);
    assert_eq!(
        (&row["state"], &row["held"]),
        (&Value::from("OFFLINE"), &Value::from(true))
    );
    assert!(row["repair_seconds_left"].as_u64().unwrap() <= 90 * 60);
    disks
        .cairn(&ALL, &["group", "offline", name, &d1])
        .refused("already OFFLINE");
    let back = disks
        .cairn(&ALL, &["group", "online", name, &d1, "--json"])
        .ok()
        .json();
    assert_eq!(back["resync"]["disks_online"][0], d1.as_str(), "{back:#}");

    // Attributes.
    let all = disks
        .cairn(&ALL, &["group", "get", name, "--json"])
        .ok()
        .json();
    assert_eq!(all["disk_repair_time"], "3.6h", "{all:#}");
    assert_eq!(all["rebalance_compact"], "auto", "{all:#}");
    disks
        .cairn(&ALL, &["group", "set", name, "colour=red"])
        .refused("the keys are: disk_repair_time");
    disks
        .cairn(
            &ALL,
            &[
                "group",
                "set",
                name,
                "disk_repair_time=2h",
                "rebalance_compact=often",
            ],
        )
        .refused("use auto, true or false");
    disks
        .cairn(&ALL, &["group", "set", name, "disk_repair_time"])
        .refused("give KEY=VALUE");
    let got = disks
        .cairn(&ALL, &["group", "get", name, "disk_repair_time", "--json"])
        .ok()
        .json();
    assert_eq!(
        got["disk_repair_time"], "3.6h",
        "a refused set changed nothing"
    );
    disks
        .cairn(
            &ALL,
            &[
                "group",
                "set",
                name,
                "disk_repair_time=30m",
                "rebalance_compact=false",
            ],
        )
        .ok();
    let got = disks
        .cairn(&ALL, &["group", "get", name, "disk_repair_time"])
        .ok();
    assert_eq!(got.stdout.trim(), "disk_repair_time = 30m");
    disks
        .cairn(&ALL, &["group", "get", name, "nope"])
        .refused("no attribute");
}

/// `cairn bench quick` writing 8 KiB blocks at random into `target` (as
/// [`Door::target`] names it) for `time`, `size` of it, its report in the
/// rig's `run`: a database's writes, from a program outside the CLI's
/// commands (held, it mounts the group for itself; served, it writes
/// through the mount).
fn randwrite(h: &Door, target: &str, run: &str, size: &str, time: &str, extra: &[&str]) {
    let out = h.arg(run);
    let mut args = vec![
        "bench",
        "quick",
        "--json",
        "--out",
        &out,
        "--target",
        target,
        "--size",
        size,
        "--bs",
        "8k",
        "--qd",
        "8",
        "--time",
        time,
        "--rw",
        "randwrite",
    ];
    args.extend(extra);
    h.rig.cairn(&args).ok();
}

two_hosts!(
    a_failed_disk_comes_back_and_is_resynced,
    fails_and_comes_back
);

/// The life cycle on sparse files, one body through either door (issue
/// 34, part 1): D3 lives on a small file system of its own, which fails
/// (every I/O on it EIO, as a dead disk's) and is unmounted for repair; the
/// group runs on and is written; the file system comes back and `online
/// --all` resyncs only the AUs D3 missed. Then, nothing serving the group,
/// every file reads back whole from either failure group alone.
///
/// Held, the next command that mounts the group finds D3 missing and says
/// it marks it OFFLINE, and `online` copies only the AUs marked stale;
/// served, the service finds the failure itself (its heartbeat writes every
/// disk each second), logs it and lets go of D3's file, and `online`
/// resyncs every data copy on D3 (a disk that failed under I/O may have
/// lost what its cache held).
fn fails_and_comes_back(host: Host) {
    let rig = Rig::discovering(|dir| format!("{0}/d*.img,{0}/away/*.img", dir.display()));
    let Some(mut h) = Door::on(rig, host) else {
        return;
    };
    // Declared after the door, so dropped first: a failing test's service
    // may still hold D3 (then it is unmounted lazily).
    let fs = match SmallFs::mount(h.rig.dir.path(), "away", 256 * MIB) {
        Ok(fs) => fs,
        Err(why) => {
            prerequisite::missing(&why);
            return;
        }
    };
    let name = "LIFE";
    let mut args: Vec<String> = ["group", "create", name].map(String::from).to_vec();
    for i in 0..4 {
        let dir = if i < 3 {
            h.rig.path("")
        } else {
            fs.mnt.clone()
        };
        let path = sparse(&dir.join(format!("d{i}.img")), 160 * MIB);
        h.rig
            .cairn(&["disk", "label", &format!("D{i}"), path.to_str().unwrap()])
            .ok();
        args.extend([
            "--disk".into(),
            format!("{}=FG{}", path.display(), 1 + i / 2),
        ]);
    }
    h.rig
        .cairn(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .ok();
    h.start();
    let src1 = random_file(&h.path("src1.bin"), 24 * MIB, 1);
    let src2 = random_file(&h.path("src2.bin"), 12 * MIB, 2);
    let a = format!("+{name}/a.dbf");
    let b = format!("+{name}/b.dbf");
    let f = format!("+{name}/bench/f1");
    h.cairn(&["cp", src1.to_str().unwrap(), &a]).ok();
    // A benchmark writes as a database would: held, on the group it
    // mounts for itself; served, through the mount.
    let target = h.target(&f);
    let bench = |run: &str, extra: &[&str]| randwrite(&h, &target, run, "32m", "2s", extra);
    bench("bench1", &[]);

    // D3's file system fails, and is unmounted to be repaired.
    fs.shut_down();
    if let Some(s) = h.service() {
        s.wait_since(0, "disk D3: ONLINE -> OFFLINE");
        wait_until("the service lets go of D3", || {
            open_files_under(s.pid(), &fs.mnt).is_empty()
        });
    }
    fs.unmount().unwrap();
    let run = h.cairn(&["cp", src2.to_str().unwrap(), &b]).ok();
    if h.service().is_none() {
        assert!(run.stderr.contains("now marked OFFLINE"), "{}", run.stderr);
    }
    // The group runs on and is written: the writes that D3's copies miss
    // mark them stale.
    bench("bench2", &["--force"]);
    let listed = h.cairn(&["group", "disks", name, "--json"]).ok().json();
    let d3 = disk_row(&listed, 3);
    assert_eq!(d3["state"], "OFFLINE", "{listed:#}");
    let stale = d3["stale_aus"].as_u64().unwrap();
    assert!(
        stale > 0,
        "writes while D3 was away marked its copies stale: {d3:#}"
    );
    assert!(d3["repair_seconds_left"].as_u64().is_some(), "{d3:#}");
    assert_eq!(
        d3["resync_whole"],
        h.service().is_some(),
        "a disk that failed under I/O is resynced whole, and listed so: {d3:#}"
    );

    // D3 is back: `online --all` resyncs it.
    fs.mount_again();
    let back = h
        .cairn(&["group", "online", name, "--all", "--wait", "--json"])
        .ok()
        .json();
    let copied = back["mount_resync"]["aus_copied"].as_u64().unwrap()
        + back["resync"]["aus_copied"].as_u64().unwrap();
    let bytes = back["mount_resync"]["bytes_copied"].as_u64().unwrap()
        + back["resync"]["bytes_copied"].as_u64().unwrap();
    let au = listed[0]["au_bytes"].as_u64().unwrap();
    match h.host {
        // D3 went while nothing held the group (the last command flushed
        // all it wrote), and a mount found it missing: only the stale AUs
        // are copied.
        Host::Held => assert_eq!(copied, stale, "only the stale AUs are copied: {back:#}"),
        // D3 failed under the service's I/O, and may have lost writes its
        // cache took (DISK_FLAG_RESYNC_ALL): every data copy on it is
        // copied — the stale ones and the rest, no more than it holds.
        Host::Served => {
            let held = d3["missing_copy_aus"].as_u64().unwrap();
            assert!(
                stale < copied && copied <= held,
                "resynced whole: {stale} stale of {held} AUs, {copied} copied: {back:#}"
            );
        }
    }
    assert_eq!(bytes, copied * au, "{back:#}");
    for d in back["disks"].as_array().unwrap() {
        assert_eq!(d["state"], "ONLINE", "{back:#}");
        assert_eq!(d["stale_aus"], 0, "{back:#}");
    }
    if let Some(s) = h.service() {
        s.wait_since(0, "disk D3: SYNCING -> ONLINE");
    }
    h.check_clean(name);
    // A second `online` finds nothing to do.
    let again = h
        .cairn(&["group", "online", name, "--all", "--wait", "--json"])
        .ok()
        .json();
    assert_eq!(again["resync"]["aus_copied"], 0, "{again:#}");
    h.stop();
    // Every copy of every extent agrees (scrub names the file, offset and
    // disks of any that does not).
    let scrub = h.cairn(&["group", "scrub", name, "--json"]);
    assert_eq!(
        scrub.json()["scrub"]["problems"],
        serde_json::json!([]),
        "after the resync, every copy agrees: {}\n{}",
        scrub.stdout,
        scrub.stderr
    );
    assert_eq!(scrub.code, 0, "{}", scrub.stderr);

    // Every file reads back whole from either failure group alone (the
    // other out of discovery), D3's copies among them.
    let dir = h.rig.dir.path().display().to_string();
    let halves = [
        (format!("{dir}/d0.img,{dir}/d1.img"), "fg1"),
        (format!("{dir}/d2.img,{}/d3.img", fs.mnt.display()), "fg2"),
    ];
    let mut f1 = Vec::new();
    for (discover, tag) in &halves {
        for (file, src) in [(&a, Some(&src1)), (&b, Some(&src2)), (&f, None)] {
            let to = h.arg(&format!("{tag}-{}", file.rsplit('/').next().unwrap()));
            cairn_with(
                discover,
                &[("CAIRN_RUN_DIR", &h.rig.run_dir)],
                &["cp", file, &to],
            )
            .ok();
            match src {
                Some(src) => assert_eq!(digest(Path::new(&to)), digest(src), "{file} from {tag}"),
                None => f1.push(digest(Path::new(&to))),
            }
        }
    }
    assert_eq!(
        f1[0], f1[1],
        "the benchmark file's copies agree across failure groups"
    );
}

#[test]
fn disk_life_cycle_on_512_and_4096_byte_loop_devices() {
    if let Some(reason) = loop_device::unavailable_reason() {
        prerequisite::missing(&reason);
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for sector in [512u32, 4096] {
        let dir = scratch();
        let mut devices: Vec<LoopDevice> = Vec::new();
        for i in 0..4 {
            match LoopDevice::create(&dir.path().join(format!("l{i}.img")), 160 * MIB, sector) {
                Ok(lo) => devices.push(lo),
                Err(reason) => {
                    prerequisite::missing(&reason);
                    return;
                }
            }
        }
        let paths: Vec<String> = devices
            .iter()
            .map(|d| d.path.display().to_string())
            .collect();
        let shown = paths.clone();
        let disks = Disks {
            dir: dir.path().to_path_buf(),
            run_dir: dir.path().join("run").display().to_string(),
            paths,
            // A device moves away from discovery: the string no longer names it.
            show: Box::new(move |visible| {
                shown
                    .iter()
                    .zip(visible)
                    .filter(|(_, v)| **v)
                    .map(|(p, _)| p.clone())
                    .collect::<Vec<_>>()
                    .join(",")
            }),
        };
        let name = format!("LIFE{sector}");
        disk_comes_back(&disks, &name);
        offline_on_request(&disks, &name);
        drop(devices);
    }
}

two_hosts!(
    online_of_two_offline_disks_in_high_redundancy_brings_both_back,
    both_back
);

/// Issue 34 item 18 (found through the service), one body through either
/// door: a high-redundancy group of three disks in three failure groups;
/// two of them (two failure groups) taken offline, a file copied in and a
/// benchmark writing while they are away (every AU written then is stale on
/// both), and one `group online G D0 D1 --wait` brings both back: exit 0,
/// both ONLINE, nothing stale, `check` clean; then, the third disk out of
/// reach, the files read back from the two restored disks alone.
fn both_back(host: Host) {
    let Some(mut h) = Door::new(host) else {
        return;
    };
    let name = "HIGH";
    let mut args: Vec<String> = [
        "group",
        "create",
        name,
        "--redundancy",
        "high",
        "--au-size",
        "1M",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for i in 0..3 {
        let path = sparse(&h.path(&format!("d{i}.img")), 128 * MIB);
        args.push("--disk".into());
        args.push(format!("{}=FG{i}", path.display()));
    }
    h.rig
        .cairn(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .ok();
    h.start();
    let src1 = random_file(&h.path("src1.bin"), 8 * MIB, 11);
    let src2 = random_file(&h.path("src2.bin"), 8 * MIB, 12);
    let a = format!("+{name}/a.dbf");
    let b = format!("+{name}/b.dbf");
    let f = format!("+{name}/bench/f1");
    h.cairn(&["cp", src1.to_str().unwrap(), &a]).ok();
    let target = h.target(&f);
    let bench = |run: &str, extra: &[&str]| randwrite(&h, &target, run, "16m", "1s", extra);
    bench("bench1", &[]);
    let d0 = format!("{name}_0000");
    let d1 = format!("{name}_0001");
    let d2 = format!("{name}_0002");
    h.cairn(&["group", "offline", name, &d0, &d1]).ok();
    h.cairn(&["cp", src2.to_str().unwrap(), &b]).ok();
    bench("bench2", &["--force"]);
    let rows = |h: &Door| h.cairn(&["group", "disks", name, "--json"]).ok().json();
    let listed = rows(&h);
    for i in 0..2 {
        let d = disk_row(&listed, i);
        assert_eq!(d["state"], "OFFLINE", "{listed:#}");
        assert!(d["stale_aus"].as_u64().unwrap() > 0, "{listed:#}");
    }
    // `check` names the disks not in use as `disks` does.
    let check = h.cairn(&["group", "check", name, "--json"]);
    assert_eq!(check.code, 3, "DEGRADED: {check:?}");
    let not_in_use = check.json()["disks_not_in_use"].clone();
    assert!(
        not_in_use.to_string().matches("OFFLINE").count() == 2,
        "{not_in_use:#}"
    );

    let run = h.cairn(&["group", "online", name, &d0, &d1, "--wait"]);
    assert_eq!(
        run.code, 0,
        "one online brings both back:\nstdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    assert!(
        run.stdout
            .contains(&format!("2 disk(s) brought ONLINE ({d0}, {d1})")),
        "{}",
        run.stdout
    );
    let listed = rows(&h);
    for d in listed.as_array().unwrap() {
        assert_eq!(d["state"], "ONLINE", "{listed:#}");
        assert_eq!(d["stale_aus"], 0, "{listed:#}");
        assert_eq!(d["missing_copy_aus"], 0, "{listed:#}");
    }
    h.check_clean(name);
    let ops = h.cairn(&["group", "ops", name, "--json"]).ok().json();
    assert_eq!(ops, Value::Array(vec![]), "nothing left running or stopped");

    // The restored disks alone hold every file: read back whole. Held,
    // FG2's disk moves out of discovery (nothing can read it); served, the
    // service holds it open, so it is taken offline.
    let bench_before = h.arg("f1-all");
    h.cairn(&["cp", &f, &bench_before]).ok();
    match h.host {
        Host::Held => std::fs::rename(h.path("d2.img"), h.path("d2.away")).unwrap(),
        Host::Served => {
            h.cairn(&["group", "offline", name, &d2]).ok();
        }
    }
    for (file, want) in [(&a, &src1), (&b, &src2)] {
        let to = h.arg(&format!("back-{}", file.rsplit('/').next().unwrap()));
        h.cairn(&["cp", file, &to]).ok();
        assert_eq!(
            digest(Path::new(&to)),
            digest(want),
            "{file} from D0 and D1"
        );
    }
    let bench_after = h.arg("f1-restored");
    h.cairn(&["cp", &f, &bench_after]).ok();
    assert_eq!(
        digest(Path::new(&bench_after)),
        digest(Path::new(&bench_before)),
        "the benchmark file reads the same from D0 and D1 alone"
    );
    h.stop();
}
