//! A file in a Cairn disk group as a benchmark target (`+GROUP/path`): the
//! real binary, on sparse files (no root) and on 4Kn loop devices (as root).
//! What must hold: the run reads and writes the file where the group keeps
//! it (every write on both mirror copies, every read checked), the group
//! stays consistent, no other process can mount the group meanwhile, and a
//! refused run leaves no file behind.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use cairn_io::test_support::{loop_device, prerequisite, LoopDevice};
use common::*;
use serde_json::Value;

const MIB: u64 = 1 << 20;

impl Rig {
    /// Group DATA, normal redundancy, one failure group per disk.
    fn create_data(&self, disks: &[PathBuf]) {
        let specs: Vec<String> = disks
            .iter()
            .enumerate()
            .map(|(i, d)| format!("{}=FG{i}", d.display()))
            .collect();
        let mut args = vec!["group", "create", "DATA"];
        for s in &specs {
            args.extend(["--disk", s]);
        }
        self.cairn(&args).ok();
    }

    /// `bench quick` on `targets`, results in `out`, as JSON.
    fn quick(&self, targets: &[&str], out: &str, extra: &[&str]) -> Run {
        let out = self.path(out).display().to_string();
        let mut args = vec!["bench", "quick", "--json", "--out", &out];
        for t in targets {
            args.extend(["--target", t]);
        }
        args.extend(extra);
        self.cairn(&args)
    }
}

fn run_of(result: &Value) -> &Value {
    &result["runs"][0]
}

/// The run did I/O both ways with no error and every read checked.
fn assert_clean_validated_run(result: &Value) {
    let run = run_of(result);
    assert_eq!(run["errors"]["count"], 0, "{run:#}");
    assert_eq!(run["validation"]["enabled"], true);
    assert!(run["validation"]["errors"].as_array().unwrap().is_empty());
    assert!(
        run["validation"]["units_checked"].as_u64().unwrap() > 100,
        "reads checked what the run wrote: {:#}",
        run["validation"]
    );
    assert!(run["validation"]["units_written"].as_u64().unwrap() > 100);
}

#[test]
fn a_group_file_is_measured_where_the_group_keeps_it_on_both_copies() {
    let rig = Rig::new();
    let disks = vec![
        sparse(&rig.path("d0.img"), 512 * MIB),
        sparse(&rig.path("d1.img"), 512 * MIB),
    ];
    rig.create_data(&disks);

    let result = rig
        .quick(
            &["+DATA/bench/f1"],
            "r1",
            &[
                "--size",
                "32m",
                "--rw",
                "randrw",
                "--bs",
                "8k",
                "--qd",
                "8",
                "--time",
                "2s",
                "--validate",
            ],
        )
        .ok()
        .json();
    let target = &result["targets"][0];
    assert_eq!(target["path"], "+DATA/bench/f1");
    assert_eq!(target["created"], true);
    assert_eq!(target["size_bytes"], 32 * MIB);
    assert!(
        target["kind"]
            .as_str()
            .unwrap()
            .starts_with("cairn group file (normal redundancy, 2 disks"),
        "{target:#}"
    );
    assert_clean_validated_run(&result);

    // The file stays, as a benchmark's files do, and the group is sound.
    let list = rig.cairn(&["ls", "+DATA/bench", "--json"]).ok().json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list:#}");
    let check = rig.cairn(&["group", "check", "DATA"]).ok();
    assert_eq!(
        check.stdout.lines().last(),
        Some("clean"),
        "{}",
        check.stdout
    );

    // A second run reads what the first wrote, through the same map.
    let again = rig
        .quick(
            &["+DATA/bench/f1"],
            "r2",
            &["--rw", "randread", "--time", "1s"],
        )
        .ok()
        .json();
    assert_eq!(again["targets"][0]["created"], false);
    assert_eq!(run_of(&again)["errors"]["count"], 0);

    // The file exists now: a plan that writes to it must be told --force
    // (a group file may be a database's datafile).
    rig.quick(
        &["+DATA/bench/f1"],
        "r3",
        &["--rw", "randwrite", "--time", "1s"],
    )
    .refused("give --force");
    rig.quick(
        &["+DATA/bench/f1"],
        "r4",
        &["--rw", "randwrite", "--time", "1s", "--force", "--validate"],
    )
    .ok();

    // Both copies hold the same bytes: read the file through the group, then
    // again with the first disk gone, from the second copies alone.
    let first = rig.path("first.bin");
    rig.cairn(&["cp", "+DATA/bench/f1", first.to_str().unwrap()])
        .ok();
    assert!(
        read_at(&first, 0, MIB as usize).iter().any(|b| *b != 0),
        "the run's writes reached the file"
    );
    std::fs::rename(rig.path("d0.img"), rig.path("d0.gone")).unwrap();
    // A group short of a disk is no place for a benchmark, and a benchmark
    // must not make the disk lost: refused, with the group left as it was.
    rig.quick(&["+DATA/bench/f1"], "r5", &["--time", "1s"])
        .refused("is missing disk(s) DATA_0000");
    std::fs::rename(rig.path("d0.gone"), rig.path("d0.img")).unwrap();
    let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    for d in disks.as_array().unwrap() {
        assert_eq!(d["state"], "ONLINE", "{disks:#}");
    }
    std::fs::rename(rig.path("d0.img"), rig.path("d0.gone")).unwrap();
    let second = rig.path("second.bin");
    rig.cairn(&["cp", "+DATA/bench/f1", second.to_str().unwrap()])
        .ok();
    assert_eq!(
        digest(&first),
        digest(&second),
        "the second copies differ from the first"
    );
}

#[test]
fn two_files_of_one_group_in_one_plan_and_what_is_refused() {
    let rig = Rig::new();
    let disks = vec![
        sparse(&rig.path("d0.img"), 256 * MIB),
        sparse(&rig.path("d1.img"), 256 * MIB),
    ];
    rig.create_data(&disks);

    let plan = rig.path("two.vdb");
    std::fs::write(
        &plan,
        "sd=sd1,lun=+DATA/db/users01.dbf,size=16m,threads=4\n\
         sd=sd2,lun=+DATA/db/redo01.log,size=8m,threads=1\n\
         sd=sd3,lun=+data/DB/USERS01.DBF,threads=2\n\
         wd=data,sd=(sd1,sd3),xfersize=8k,rdpct=70,seekpct=random\n\
         wd=redo,sd=sd2,xfersize=64k,rdpct=0,seekpct=seq\n\
         rd=both,wd=(data,redo),iorate=max,elapsed=2,interval=1\n",
    )
    .unwrap();
    let out = rig.path("r").display().to_string();
    let result = rig
        .cairn(&[
            "bench",
            "run",
            plan.to_str().unwrap(),
            "--out",
            &out,
            "--json",
        ])
        .ok()
        .json();
    let targets = result["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 3);
    for t in targets {
        assert!(t["kind"].as_str().unwrap().starts_with("cairn group file"));
        assert_eq!(t["created"], true, "sd3 is sd1's file, made by this run");
    }
    assert_eq!(run_of(&result)["errors"]["count"], 0);
    let list = rig.cairn(&["ls", "+DATA/db", "--json"]).ok().json();
    assert_eq!(list.as_array().unwrap().len(), 2, "{list:#}");

    // While a run holds the group, no other process can mount it.
    let out2 = rig.path("r2").display().to_string();
    let mut child = cairn_command(&rig.discover, &[("CAIRN_RUN_DIR", &rig.run_dir)])
        .args([
            "bench",
            "quick",
            "--target",
            "+DATA/db/users01.dbf",
            "--time",
            "4s",
            "--out",
            &out2,
            "--json",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The lock file names its holder: wait until that is the run, passively
    // (a mount of our own could take the lock before the run does).
    let holder = format!("pid {} ", child.id());
    let holds = || {
        std::fs::read_dir(&rig.run_dir).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                std::fs::read_to_string(e.path()).is_ok_and(|text| text.starts_with(&holder))
            })
        })
    };
    while !holds() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run exited ({status}) without taking the group's lock");
        }
        std::thread::yield_now();
    }
    rig.cairn(&["group", "mount", "DATA"])
        .refused("mounted by another process");
    assert!(child.wait().unwrap().success());

    // A new file without a size; a group that is not there; a run refused
    // after its file was made: errors, and nothing left behind.
    rig.quick(&["+DATA/db/new.dbf"], "r3", &["--time", "1s"])
        .refused("give size=");
    rig.quick(&["+NOPE/x.dbf"], "r4", &["--size", "8m", "--time", "1s"])
        .refused("no disk group NOPE");
    rig.quick(
        &["+DATA/db/tiny.dbf"],
        "r5",
        &["--size", "8k", "--bs", "64k", "--time", "1s"],
    )
    .refused("is larger than the 8192 bytes");
    // A plan that makes a new file and writes to an existing one is refused
    // before the new one is made (or filled).
    let mixed = rig.path("mixed.vdb");
    std::fs::write(
        &mixed,
        "sd=sd1,lun=+DATA/db/new02.dbf,size=16m\n\
         sd=sd2,lun=+DATA/db/users01.dbf\n\
         wd=w,sd=(sd1,sd2),xfersize=8k,rdpct=50\n\
         rd=r,wd=w,iorate=max,elapsed=1,interval=1\n",
    )
    .unwrap();
    let out6 = rig.path("r6").display().to_string();
    rig.cairn(&["bench", "run", mixed.to_str().unwrap(), "--out", &out6])
        .refused("give --force");
    let list = rig.cairn(&["ls", "+DATA/db", "--json"]).ok().json();
    assert_eq!(
        list.as_array().unwrap().len(),
        2,
        "a refused run left a file: {list:#}"
    );
}

#[test]
fn a_group_file_on_4kn_loop_devices_with_io_uring() {
    if let Some(reason) = loop_device::unavailable_reason() {
        prerequisite::missing(&reason);
        return;
    }
    let mut rig = Rig::discovering(|_| String::new());
    let mut loops: Vec<LoopDevice> = Vec::new();
    for i in 0..2 {
        match LoopDevice::create(&rig.path(&format!("lo{i}.img")), 256 * MIB, 4096) {
            Ok(lo) => loops.push(lo),
            Err(reason) => {
                prerequisite::missing(&reason);
                return;
            }
        }
    }
    rig.discover = loops
        .iter()
        .map(|l| l.path.display().to_string())
        .collect::<Vec<_>>()
        .join(",");
    let paths: Vec<PathBuf> = loops.iter().map(|l| l.path.clone()).collect();
    rig.create_data(&paths);
    let out = rig.path("r").display().to_string();
    let run = rig.cairn(&[
        "--engine",
        "uring",
        "bench",
        "quick",
        "--target",
        "+DATA/f1",
        "--size",
        "32m",
        "--rw",
        "randrw",
        "--qd",
        "16",
        "--time",
        "2s",
        "--validate",
        "--json",
        "--out",
        &out,
    ]);
    let result = run.ok().json();
    let target = &result["targets"][0];
    assert_eq!(target["logical_sector_bytes"], 4096);
    assert_eq!(target["sector_format"], "4Kn");
    // /proc/diskstats is read for both member disks.
    let devices: Vec<&str> = target["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    for lo in &loops {
        let name = lo.path.file_name().unwrap().to_str().unwrap();
        assert!(devices.contains(&name), "{name} not in {devices:?}");
    }
    assert_eq!(result["engine"]["kind"], "uring", "{:#}", result["engine"]);
    assert_clean_validated_run(&result);
    let check = rig.cairn(&["group", "check", "DATA"]).ok();
    assert_eq!(
        check.stdout.lines().last(),
        Some("clean"),
        "{}",
        check.stdout
    );
}

#[test]
fn an_awr_report_replays_onto_a_group_file() {
    let rig = Rig::new();
    let disks = vec![
        sparse(&rig.path("d0.img"), 256 * MIB),
        sparse(&rig.path("d1.img"), 256 * MIB),
    ];
    rig.create_data(&disks);
    let report =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../awr/tests/data/awr/text/awr_122.txt");
    let out = rig.path("replay");
    let run = rig
        .cairn(&[
            "awr",
            "replay",
            report.to_str().unwrap(),
            "--target",
            "+DATA/awr/t1",
            "--size",
            "64m",
            "--scale",
            "0.01",
            "--duration",
            "2s",
            "--threads",
            "8",
            "--out",
            out.to_str().unwrap(),
        ])
        .ok();
    assert!(
        run.stdout.contains("single-block random reads"),
        "{}",
        run.stdout
    );
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap()).unwrap();
    assert!(result["targets"][0]["kind"]
        .as_str()
        .unwrap()
        .starts_with("cairn group file"));
    assert_eq!(run_of(&result)["errors"]["count"], 0);
}

#[test]
fn the_engine_flag_mounts_the_group_with_that_engine() {
    let rig = Rig::new();
    let disks = vec![
        sparse(&rig.path("d0.img"), 256 * MIB),
        sparse(&rig.path("d1.img"), 256 * MIB),
    ];
    rig.create_data(&disks);
    for (flag, name, kind) in [("sync", "sync", "sync"), ("uring", "io_uring", "uring")] {
        if flag == "uring" {
            if let Err(e) = cairn_io::uring_engine::UringEngine::new(1) {
                prerequisite::missing(&format!(
                    "--engine uring: io_uring is not available here: {e}"
                ));
                continue;
            }
        }
        let out = rig.path(&format!("out-{flag}")).display().to_string();
        let result = rig
            .cairn(&[
                "--engine",
                flag,
                "bench",
                "quick",
                "--json",
                "--out",
                &out,
                "--target",
                "+DATA/bench/f1",
                "--size",
                "16m",
                "--rw",
                "randread",
                "--time",
                "1s",
                "--interval",
                "500ms",
            ])
            .ok()
            .json();
        assert_eq!(result["engine"]["kind"], kind, "{:#}", result["engine"]);
        assert_eq!(
            result["targets"][0]["mount_engine"], name,
            "the group was mounted with another engine than --engine {flag}: {:#}",
            result["targets"][0]
        );
    }
}
