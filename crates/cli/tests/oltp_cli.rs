//! `cairn bench oltp` end to end through the real binary: setup, run and
//! verify on files; a run killed midway and verified after; and bad input —
//! a malformed slob.conf, a target too small, someone else's data, an unloaded
//! or differently shaped target — each one line, exit 1, nothing destroyed.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::FileExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use cairn_io::test_support::prerequisite;
use cairn_oltp::layout::HEADER_BYTES;
use common::*;

/// A workload run's `result.json` (the reports' golden file).
const WORKLOAD_RESULT: &str = "../kit-report/tests/golden/result_v1.json";

const CONF: &str = "UPDATE_PCT=30\nSCAN_PCT=5\nRUN_TIME=2\nSCALE=2000\nSCAN_TABLE_SZ=16\nWORK_UNIT=16\nTHREADS_PER_SCHEMA=2\nDATABASE_STATISTICS_TYPE=awr   # Oracle-only\nSYSDBA_PASSWD=\"x\"\n";

struct Files {
    dir: tempfile::TempDir,
    conf: PathBuf,
    data: PathBuf,
    redo: PathBuf,
}

fn files(conf: &str) -> Files {
    let dir = scratch();
    let conf_path = dir.path().join("slob.conf");
    std::fs::write(&conf_path, conf).unwrap();
    Files {
        conf: conf_path,
        data: dir.path().join("data.dbf"),
        redo: dir.path().join("redo.log"),
        dir,
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// crc32c of `path` from `offset_bytes` to its end.
fn digest_from(path: &Path, offset_bytes: u64) -> u32 {
    let f = std::fs::File::open(path).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let (mut at, mut crc) = (offset_bytes, 0u32);
    loop {
        let n = f.read_at(&mut buf, at).unwrap();
        if n == 0 {
            return crc;
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        at += n as u64;
    }
}

/// Until `done()` holds, watching `child`: one that exits first fails the
/// test (the step it was to be caught in never came). No timer: the
/// condition is what the test waits for.
fn until_while_running(child: &mut Child, what: &str, mut done: impl FnMut() -> bool) {
    while !done() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the child exited ({status}) before {what}");
        }
        std::thread::yield_now();
    }
}

impl Files {
    fn oltp(&self, verb: &str, extra: &[&str]) -> Run {
        let mut args = vec![
            "bench",
            "oltp",
            verb,
            "--conf",
            s(&self.conf),
            "--target",
            s(&self.data),
            "--redo",
            s(&self.redo),
        ];
        args.extend_from_slice(extra);
        cairn(s(self.dir.path()), &args)
    }

    fn verify(&self) -> Run {
        cairn(
            s(self.dir.path()),
            &[
                "bench",
                "oltp",
                "verify",
                "--target",
                s(&self.data),
                "--redo",
                s(&self.redo),
                "--json",
            ],
        )
    }
}

#[test]
fn setup_run_verify_and_compare_on_files() {
    let f = files(CONF);
    let load = f
        .oltp("setup", &["--schemas", "2", "--json", "--seed", "3"])
        .ok();
    let load = load.json();
    assert_eq!(load["shape"]["schemas"], 2);
    assert_eq!(load["shape"]["table_blocks"], 2000);
    assert!(load["blocks"].as_u64().unwrap() >= 2 * 2016);

    let out1 = f.dir.path().join("run1");
    let run = f
        .oltp(
            "run",
            &[
                "--schemas",
                "2",
                "--cache",
                "4m",
                "--interval",
                "1s",
                "--out",
                s(&out1),
            ],
        )
        .ok();
    // Piped: no interval lines, the one-line summary and where the reports are.
    assert_eq!(run.stdout.lines().count(), 2, "{}", run.stdout);
    assert!(run.stdout.contains("reports:"));
    let awr = std::fs::read_to_string(out1.join("awr.txt")).unwrap();
    for section in [
        "Load Profile",
        "Top Foreground Events",
        "db file sequential read",
        "log file sync",
        "IO Profile",
    ] {
        assert!(awr.contains(section), "awr.txt lacks {section}");
    }
    assert!(
        awr.contains("SYSDBA_PASSWD"),
        "the ignored Oracle-only keys are listed"
    );
    let html = std::fs::read_to_string(out1.join("report.html")).unwrap();
    assert!(html.contains("<svg") && !html.contains("<script"));
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out1.join("result.json")).unwrap()).unwrap();
    assert_eq!(result["schema"], "cairn-oltp-result");

    let v = f.verify().ok().json();
    assert_eq!(v["state"], "clean");
    assert_eq!(v["problems_total"], 0);

    // A second run with a bigger cache, and the comparison of the two.
    let out2 = f.dir.path().join("run2");
    f.oltp(
        "run",
        &[
            "--schemas",
            "2",
            "--cache",
            "64m",
            "--interval",
            "1s",
            "--out",
            s(&out2),
            "--json",
        ],
    )
    .ok();
    let cmp = cairn(s(f.dir.path()), &["report", "compare", s(&out1), s(&out2)]).ok();
    for row in [
        "Redo Size",
        "Logical read (blocks)",
        "Physical Read (blocks)",
        "Transactions",
        "db file sequential read",
    ] {
        assert!(
            cmp.stdout.contains(row),
            "compare lacks {row}:\n{}",
            cmp.stdout
        );
    }

    // An OLTP run beside a workload run is refused, whichever comes first,
    // naming the OLTP one; so is a JSON file of neither kind.
    let workload = Path::new(env!("CARGO_MANIFEST_DIR")).join(WORKLOAD_RESULT);
    let oltp = out1.join("result.json");
    for (a, b) in [(&oltp, &workload), (&workload, &oltp)] {
        let run = cairn(s(f.dir.path()), &["report", "compare", s(a), s(b)])
            .refused("cannot compare an OLTP run with a workload run");
        let named = format!("{} is an OLTP result", oltp.display());
        assert!(run.stderr.contains(&named), "{}", run.stderr);
    }
    let other = f.dir.path().join("other.json");
    std::fs::write(&other, "{\"schema\": \"something-else\"}").unwrap();
    cairn(s(f.dir.path()), &["report", "compare", s(&oltp), s(&other)])
        .refused("\"something-else\"");
}

#[test]
fn a_run_killed_midway_leaves_data_that_verify_finds_consistent() {
    let f = files(&CONF.replace("RUN_TIME=2", "RUN_TIME=60"));
    f.oltp("setup", &["--json"]).ok();
    // The blocks as setup left them: the run changes them only by writing
    // changed blocks (the database writer's batches and checkpoints).
    let loaded = digest_from(&f.data, HEADER_BYTES);
    let out = f.dir.path().join("killed");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([
            "bench",
            "oltp",
            "run",
            "--conf",
            s(&f.conf),
            "--target",
            s(&f.data),
            "--redo",
            s(&f.redo),
            "--cache",
            "4m",
            "--checkpoint",
            "500ms",
            "--out",
            s(&out),
        ])
        .env("CAIRN_DISCOVER", s(f.dir.path()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once a changed block has reached the data file: mid-run, with
    // changes on disk and (RUN_TIME=60) most of the run still to come.
    until_while_running(&mut child, "a changed block reached the data file", || {
        digest_from(&f.data, HEADER_BYTES) != loaded
    });
    child.kill().unwrap(); // SIGKILL: no shutdown, no final checkpoint
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
    assert!(
        !out.join("result.json").exists() && !out.join("awr.txt").exists(),
        "the run had finished: it wrote its reports"
    );

    let v = f.verify().ok();
    let j = v.json();
    assert_eq!(
        j["state"], "running",
        "the headers say the run did not shut down"
    );
    assert_eq!(j["problems_total"], 0, "{}", v.stdout);
    // The log was read back: the changes not yet in the data files are
    // counted as behind it (what an instance recovery would re-apply), not as damage.
    assert!(j["redo"]["records"].as_u64().unwrap() > 0, "{}", v.stdout);
    assert!(j["redo"]["unreadable"].is_null());
    eprintln!(
        "after kill -9: {} redo records, {} blocks behind the redo",
        j["redo"]["records"], j["redo"]["blocks_behind"]
    );
    assert!(
        j["table_versions"].as_u64().unwrap() > 0,
        "some changes reached the disk"
    );
    let text = cairn(
        s(f.dir.path()),
        &[
            "bench",
            "oltp",
            "verify",
            "--target",
            s(&f.data),
            "--redo",
            s(&f.redo),
        ],
    )
    .ok();
    assert!(
        text.stdout.to_lowercase().contains("not shut down cleanly")
            || text.stdout.to_lowercase().contains("did not shut down"),
        "{}",
        text.stdout
    );

    // The next run accepts the dataset, and its clean shutdown marks it clean.
    std::fs::write(&f.conf, CONF.replace("RUN_TIME=2", "RUN_TIME=1")).unwrap();
    f.oltp(
        "run",
        &[
            "--cache",
            "4m",
            "--out",
            s(&f.dir.path().join("after")),
            "--json",
        ],
    )
    .ok();
    assert_eq!(f.verify().ok().json()["state"], "clean");
}

#[test]
fn verify_names_a_damaged_block_exactly() {
    let f = files(CONF);
    f.oltp("setup", &["--json"]).ok();
    // The first data extent starts after the 1 MiB header: block 3 of schema 1's table.
    write_at(&f.data, (1 << 20) + 3 * 8192 + 100, b"garbage!");
    let v = f.verify();
    assert_eq!(v.code, 1, "{}", v.stdout);
    let j: serde_json::Value = serde_json::from_str(&v.stdout).unwrap();
    assert_eq!(j["problems_total"], 1);
    let p = &j["problems"][0];
    assert_eq!(p["offset_bytes"], (1 << 20) + 3 * 8192);
    assert_eq!(p["schema"], 1);
    assert_eq!(p["number"], 3);
}

#[test]
fn a_malformed_conf_is_refused_with_its_line_and_nothing_is_created() {
    let f = files("UPDATE_PCT=30\nSCALE=2000\nNOT_A_SLOB_KEY=1\n");
    f.oltp("setup", &[]).refused("slob.conf:3");
    assert!(!f.data.exists() && !f.redo.exists());
    std::fs::write(&f.conf, "UPDATE_PCT=130\n").unwrap();
    f.oltp("setup", &[]).refused("UPDATE_PCT");
    assert!(!f.data.exists());
}

#[test]
fn a_target_too_small_is_refused_with_the_size_needed_and_left_untouched() {
    let f = files(CONF);
    sparse(&f.data, 4 << 20);
    write_at(&f.data, 0, b"precious");
    let before = digest(&f.data);
    f.oltp("setup", &["--schemas", "4"]).refused("need");
    assert_eq!(digest(&f.data), before);
    assert_eq!(std::fs::metadata(&f.data).unwrap().len(), 4 << 20);
}

#[test]
fn a_target_holding_someone_elses_data_is_refused_unless_forced() {
    let f = files(CONF);
    sparse(&f.data, 64 << 20);
    if let Err(reason) = tool("mkfs.ext4", &["-F", "-q", s(&f.data)]) {
        prerequisite::missing(&reason);
        return;
    }
    let before = digest(&f.data);
    f.oltp("setup", &[]).refused("--force");
    assert_eq!(
        digest(&f.data),
        before,
        "a refused setup wrote to the target"
    );
    f.oltp("setup", &["--force", "--json"]).ok();
    f.verify().ok();
}

#[test]
fn a_run_against_an_unloaded_or_differently_shaped_target_is_refused() {
    let f = files(CONF);
    sparse(&f.data, 64 << 20);
    sparse(&f.redo, 64 << 20);
    f.oltp("run", &["--out", s(&f.dir.path().join("r"))])
        .refused("setup");
    assert_eq!(digest(&f.data), digest(&f.redo), "both still all zeros");
    f.oltp("setup", &["--json"]).ok();
    let before = digest(&f.data);
    std::fs::write(&f.conf, CONF.replace("SCALE=2000", "SCALE=4000")).unwrap();
    f.oltp("run", &["--out", s(&f.dir.path().join("r"))])
        .refused("SCALE");
    std::fs::write(&f.conf, CONF).unwrap();
    f.oltp(
        "run",
        &["--schemas", "3", "--out", s(&f.dir.path().join("r"))],
    )
    .refused("schema");
    assert_eq!(digest(&f.data), before);
    assert!(!f.dir.path().join("r").exists());
}

#[test]
fn setup_interrupted_removes_the_files_it_created() {
    let f = files(&CONF.replace("SCALE=2000", "SCALE=2G"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([
            "bench",
            "oltp",
            "setup",
            "--conf",
            s(&f.conf),
            "--target",
            s(&f.data),
            "--redo",
            s(&f.redo),
        ])
        .env("CAIRN_DISCOVER", s(f.dir.path()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt it mid-load: once the first data extent's first block is
    // written (its files exist by then, and the handler is installed).
    let mut first_block = vec![0u8; 8192];
    until_while_running(&mut child, "it loaded a block", || {
        std::fs::File::open(&f.data)
            .and_then(|d| d.read_exact_at(&mut first_block, HEADER_BYTES))
            .is_ok()
            && first_block.iter().any(|b| *b != 0)
    });
    assert!(f.redo.exists(), "setup creates both files before loading");
    // SAFETY: sending SIGINT to our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("interrupted"));
    assert!(
        !f.data.exists() && !f.redo.exists(),
        "created files are removed"
    );
}

#[test]
fn absurd_session_counts_are_refused_in_one_line() {
    let f = files(CONF);
    f.oltp("setup", &["--json"]).ok();
    let out = f.dir.path().join("r");
    f.oltp(
        "run",
        &[
            "--schemas",
            "4000000000",
            "--threads",
            "2",
            "--out",
            s(&out),
        ],
    )
    .refused("sessions");
    f.oltp("run", &["--threads", "0", "--out", s(&out)])
        .refused("--threads");
    assert!(!out.exists(), "a refused run leaves no output directory");
}

/// Why `--engine uring` cannot run here, if it cannot.
fn uring_refused() -> Option<String> {
    cairn_io::uring_engine::UringEngine::new(1)
        .err()
        .map(|e| format!("io_uring is not available here: {e}"))
}

#[test]
fn the_engine_flag_reaches_setups_loader_and_verify() {
    for (flag, name) in [("sync", "sync"), ("uring", "io_uring")] {
        if flag == "uring" {
            if let Some(why) = uring_refused() {
                prerequisite::missing(&format!("--engine uring: {why}"));
                continue;
            }
        }
        let f = files(CONF);
        let args = |verb: &str| -> Vec<String> {
            let mut a: Vec<String> = ["--engine", flag, "bench", "oltp", verb]
                .iter()
                .map(|s| s.to_string())
                .collect();
            if verb == "setup" {
                a.extend(["--conf".into(), s(&f.conf).into()]);
            }
            a.extend([
                "--target".into(),
                s(&f.data).into(),
                "--redo".into(),
                s(&f.redo).into(),
                "--json".into(),
            ]);
            a
        };
        let run = |verb: &str| {
            let a = args(verb);
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            cairn(s(f.dir.path()), &a).ok().json()
        };
        let load = run("setup");
        assert_eq!(load["engine"], name, "setup --engine {flag}: {load:#}");
        let verify = run("verify");
        assert_eq!(verify["engine"], name, "verify --engine {flag}: {verify:#}");
        assert_eq!(verify["problems_total"], 0);
    }
}
