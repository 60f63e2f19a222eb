//! `cairn bench` and `cairn report compare` end to end through the real
//! binary, on files on the build's real filesystem: the safety rules of a
//! tool that writes where it is told, what goes to stdout (JSON alone with
//! --json; no interval lines when piped), comparison, bad input, and a
//! validation failure that fails the command.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

const MIB: u64 = 1 << 20;

/// `cairn bench quick` on `target` for a short run, results into `out`.
fn quick(target: &Path, out: &Path, extra: &[&str]) -> Run {
    let t = target.to_str().unwrap();
    let o = out.to_str().unwrap();
    let mut args = vec![
        "bench",
        "quick",
        "--target",
        t,
        "--out",
        o,
        "--time",
        "1s",
        "--interval",
        "500ms",
        "--seed",
        "1",
    ];
    args.extend_from_slice(extra);
    cairn(t, &args)
}

fn blocks_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

#[test]
fn a_write_workload_refuses_a_file_with_a_filesystem_unless_forced_and_reads_are_allowed() {
    let dir = scratch();
    let img = sparse(&dir.path().join("ext4.img"), 64 * MIB);
    if let Err(reason) = tool("mkfs.ext4", &["-F", "-q", img.to_str().unwrap()]) {
        cairn_io::test_support::prerequisite::missing(&reason);
        return;
    }
    let before = digest(&img);
    // Refused: one line naming what is there and how to override.
    let refused = quick(&img, &dir.path().join("w"), &["--rw", "randwrite"])
        .refused("ext4")
        .refused("--force");
    assert!(
        refused.stderr.contains("carries an ext4 filesystem"),
        "{}",
        refused.stderr
    );
    assert_eq!(digest(&img), before, "a refused run wrote nothing");
    // Reading harms nothing: allowed, and leaves the filesystem as it was.
    quick(&img, &dir.path().join("r"), &["--rw", "randread"]).ok();
    assert_eq!(digest(&img), before, "a read-only run wrote nothing");
    // --force: the data may be destroyed, and is.
    quick(
        &img,
        &dir.path().join("f"),
        &["--rw", "randwrite", "--force"],
    )
    .ok();
    assert_ne!(digest(&img), before, "the forced write run wrote");
}

#[test]
fn a_write_workload_refuses_a_cairn_labelled_file_unless_forced() {
    let dir = scratch();
    let img = sparse(&dir.path().join("lun.img"), 64 * MIB);
    let p = img.to_str().unwrap();
    cairn(p, &["disk", "label", "data1", p]).ok();
    quick(&img, &dir.path().join("w"), &["--rw", "write"])
        .refused("Cairn disk DATA1")
        .refused("--force");
    quick(&img, &dir.path().join("f"), &["--rw", "write", "--force"]).ok();
}

#[test]
fn missing_targets_are_created_only_where_that_is_safe() {
    let dir = scratch();
    // A /dev path is a typo, never a request.
    let dev = Path::new("/dev/cairn-bench-test-no-such-disk");
    quick(dev, &dir.path().join("d"), &["--size", "16m"])
        .refused("never created")
        .refused("/dev/cairn-bench-test-no-such-disk");
    assert!(!dev.exists());
    // A file without a size cannot be created.
    let missing = dir.path().join("missing.dat");
    quick(&missing, &dir.path().join("m"), &[]).refused("does not exist; give size= (--size)");
    assert!(!missing.exists());

    // With a size it is: sparse when the run only writes (a rate so low that
    // the writes touch a sliver of it)…
    let w = dir.path().join("write-only.dat");
    let run = quick(
        &w,
        &dir.path().join("w"),
        &["--size", "256m", "--rw", "randwrite", "--rate", "100"],
    )
    .ok();
    assert_eq!(std::fs::metadata(&w).unwrap().len(), 256 * MIB, "{run:?}");
    let allocated = blocks_bytes(&w);
    assert!(
        allocated < 16 * MIB,
        "a write-only target is created sparse: {allocated} bytes allocated"
    );
    // …and filled with data when the run reads (reading holes measures the
    // filesystem's zero page, not the storage).
    let r = dir.path().join("read.dat");
    quick(
        &r,
        &dir.path().join("r"),
        &["--size", "32m", "--rw", "randread"],
    )
    .ok();
    assert_eq!(std::fs::metadata(&r).unwrap().len(), 32 * MIB);
    assert!(
        blocks_bytes(&r) >= 32 * MIB,
        "a target that is read is created full: {} bytes allocated",
        blocks_bytes(&r)
    );
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r/result.json")).unwrap())
            .unwrap();
    assert_eq!(result["targets"][0]["created"], true);
}

#[test]
fn json_goes_alone_to_stdout_and_a_piped_run_prints_no_interval_lines() {
    let dir = scratch();
    let target = dir.path().join("t.dat");
    // --json: stdout is one JSON document, nothing before or after.
    let run = quick(
        &target,
        &dir.path().join("j"),
        &["--size", "16m", "--qd", "4", "--json"],
    )
    .ok();
    let json = run.json();
    assert_eq!(json["schema"], "cairn-bench-result");
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["runs"].as_array().unwrap().len(), 1);
    assert!(
        json["runs"][0]["totals"]["all"]["all"]["ios"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(json["seed"], 1);
    // The same document is result.json.
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("j/result.json")).unwrap())
            .unwrap();
    assert_eq!(file, json);

    // Piped (these tests' stdout is a pipe): the run's total line and where
    // the reports went — no per-interval lines, no header.
    let run = quick(&target, &dir.path().join("p"), &["--qd", "4"]).ok();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stdout);
    assert!(lines[0].starts_with("quick: avg_1-2"), "{}", lines[0]);
    assert!(lines[1].starts_with("reports: "), "{}", lines[1]);
    let clock = |l: &str| {
        let b = l.as_bytes();
        b.len() > 8 && b[2] == b':' && b[5] == b':' && b[..2].iter().all(u8::is_ascii_digit)
    };
    assert!(
        !lines.iter().any(|l| clock(l)),
        "an interval line: {}",
        run.stdout
    );
    for report in ["result.json", "summary.txt", "report.html"] {
        assert!(dir.path().join("p").join(report).is_file(), "{report}");
    }
    // A directory that already holds a result is not overwritten.
    quick(&target, &dir.path().join("p"), &["--qd", "4"]).refused("already holds a result.json");
}

#[test]
fn report_compare_prints_both_runs_with_percent_change() {
    let dir = scratch();
    let target = dir.path().join("c.dat");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    quick(&target, &a, &["--size", "16m", "--qd", "1"]).ok();
    quick(&target, &b, &["--qd", "4"]).ok();
    let (pa, pb) = (a.to_str().unwrap(), b.to_str().unwrap());
    let html = dir.path().join("cmp.html");
    let run = cairn(
        pa,
        &[
            "report",
            "compare",
            pa,
            &format!("{pb}/result.json"),
            "--html",
            html.to_str().unwrap(),
        ],
    )
    .ok();
    let text = &run.stdout;
    assert!(text.contains(pa) && text.contains(pb), "{text}");
    assert!(text.contains("% change"), "{text}");
    let iops = text
        .lines()
        .find(|l| l.starts_with("IOPS "))
        .unwrap_or_else(|| panic!("no IOPS row: {text}"));
    assert!(iops.contains('%'), "{iops}");
    // qd 4 against qd 1: more I/Os per second, a positive change.
    assert!(iops.contains('+'), "{iops}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<html") && !page.contains("<script src"),
        "self-contained"
    );
    // --json: the comparison as data.
    let json = cairn(pa, &["report", "compare", pa, pb, "--json"])
        .ok()
        .json();
    assert!(json.is_object(), "{json}");
    // Not a result: one line saying which file.
    let bogus = dir.path().join("bogus.json");
    std::fs::write(&bogus, "{}").unwrap();
    cairn(pa, &["report", "compare", pa, bogus.to_str().unwrap()]).refused("bogus.json");
}

#[test]
fn bad_parameter_files_fail_with_file_line_and_column() {
    let dir = scratch();
    let missing = dir.path().join("nope.vdb");
    cairn(
        "none",
        &[
            "bench",
            "run",
            missing.to_str().unwrap(),
            "--out",
            dir.path().join("o").to_str().unwrap(),
        ],
    )
    .refused(&format!(
        "{}:1:1: cannot read the parameter file",
        missing.display()
    ));
    let bad = dir.path().join("bad.vdb");
    std::fs::write(
        &bad,
        "sd=sd1,lun=/nonexistent/x,size=1m\nwd=w,sd=sd1,xfersize=8k,rdpct=abc\nrd=r,wd=w\n",
    )
    .unwrap();
    cairn(
        "none",
        &[
            "bench",
            "run",
            bad.to_str().unwrap(),
            "--out",
            dir.path().join("o").to_str().unwrap(),
        ],
    )
    .refused(&format!("{}:2:31: ", bad.display()))
    .refused("rdpct");
    assert!(!dir.path().join("o/result.json").exists());
    // A variable the file does not use is an error too, not silently dropped.
    let good = dir.path().join("good.vdb");
    std::fs::write(
        &good,
        "sd=sd1,lun=$lun,size=1m\nwd=w,sd=sd1,xfersize=8k\nrd=r,wd=w,iorate=max,elapsed=1,interval=1\n",
    )
    .unwrap();
    let run = cairn(
        "none",
        &[
            "bench",
            "run",
            good.to_str().unwrap(),
            "lun=/nonexistent/x",
            "typo=1",
            "--out",
            dir.path().join("o").to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 1, "{run:?}");
    println!("{}", run.stderr);
    assert!(run.stderr.contains("typo"), "{}", run.stderr);
}

/// The one vdbench file run here: fill the sd once with validation on, pause,
/// then read it all back at random.
const FILL_PAUSE_CHECK: &str = "\
validate=yes
sd=sd1,lun=$lun,size=1m,threads=4
wd=fill,sd=sd1,rdpct=0,xfersize=8k,seekpct=eof
wd=check,sd=sd1,rdpct=100,xfersize=8k,seekpct=random
rd=fill,wd=fill,iorate=max,elapsed=10,interval=1,pause=3600
rd=check,wd=check,iorate=max,elapsed=1,interval=1
";

/// Flip one data byte (past the 32-byte validation header) of 8 KiB unit
/// `lba`, going around the page cache as the engine does.
fn corrupt_unit(path: &Path, lba: u64) {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .unwrap();
    let mut buf = cairn_io::AlignedBuf::zeroed(8192);
    f.read_exact_at(&mut buf, lba * 8192).unwrap();
    buf[100] ^= 0x40;
    f.write_all_at(&buf, lba * 8192).unwrap();
    f.sync_all().unwrap();
}

#[test]
fn a_block_corrupted_between_runs_fails_the_bench_naming_its_lba() {
    let dir = scratch();
    let lun = dir.path().join("v.dat");
    let param = dir.path().join("validate.vdb");
    std::fs::write(&param, FILL_PAUSE_CHECK).unwrap();
    let out = dir.path().join("out");
    let mut child = cairn_command("none", &[])
        .args(["bench", "run", param.to_str().unwrap()])
        .arg(format!("lun={}", lun.display()))
        .args(["--out", out.to_str().unwrap(), "--seed", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the pause after the fill run, corrupt unit 37 behind the
    // engine's back, then end the pause (SIGUSR1): the check run starts
    // only once the corruption is on disk, whatever the machine's speed.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut line = String::new();
        let n = stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "cairn ended before the pause: {seen}");
        assert!(Instant::now() < deadline, "no pause within 30 s: {seen}");
        seen.push_str(&line);
        if line.starts_with("pause") {
            break;
        }
    }
    assert!(seen.contains("fill"), "{seen}");
    corrupt_unit(&lun, 37);
    let signalled = Instant::now();
    // SAFETY: kill with a valid signal on our own child's pid.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGUSR1) };
    assert_eq!(
        rc,
        0,
        "signal the bench: {}",
        std::io::Error::last_os_error()
    );
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    // The pause is an hour: ending within minutes means the signal ended it
    // (a liveness bound, far from any speed this depends on).
    assert!(
        signalled.elapsed() < Duration::from_secs(600),
        "the pause ended on SIGUSR1"
    );
    let output = child.wait_with_output().unwrap();
    let run = Run {
        code: output.status.code().unwrap_or(-1),
        stdout: seen + &rest,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    println!("{}", run.stdout);
    let run = run
        .refused("data validation failed")
        .refused("lba 37 at byte 303104: bad checksum");
    // The reports were written all the same, with the error in them.
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap()).unwrap();
    let check = &result["runs"][1]["validation"];
    assert!(check["units_checked"].as_u64().unwrap() > 0, "{check}");
    let errors = check["errors"].as_array().unwrap();
    assert!(!errors.is_empty());
    assert!(errors.iter().all(|e| e["lba"] == 37), "{errors:?}");
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(summary.contains("bad checksum"), "{}", run.stdout);
}

/// A write bench leaves its target free the moment it exits: a second one
/// started straight after must not find the file still locked (an io_uring
/// ring with registered files keeps them open until its asynchronous
/// teardown, unless the engine unregisters them first).
#[test]
fn write_benches_back_to_back_on_one_file_both_run() {
    let dir = scratch();
    let target = dir.path().join("twice.dat");
    for (n, engine) in ["uring", "uring", "sync", "uring"].iter().enumerate() {
        let out = dir.path().join(format!("out{n}"));
        let t = target.to_str().unwrap();
        let o = out.to_str().unwrap();
        let mut args = vec![
            "--engine", engine, "bench", "quick", "--target", t, "--out", o,
        ];
        args.extend_from_slice(&["--rw", "randrw", "--qd", "4", "--time", "300ms"]);
        args.extend_from_slice(&["--interval", "100ms", "--seed", "1"]);
        if n == 0 {
            args.extend_from_slice(&["--size", "16m"]);
        }
        cairn(t, &args).ok();
    }
}

#[test]
fn an_absurd_rate_is_refused_and_an_unreachable_one_ends_on_time_as_not_held() {
    let dir = scratch();
    let target = dir.path().join("small.dat");
    // Not a rate the schedule can keep: refused before anything is made.
    let t = target.to_str().unwrap();
    let refused_out = dir.path().join("refused");
    for (rate, needle) in [
        ("1e300", "1000000000"),
        ("1e10", "1000000000"),
        ("inf", "--rate"),
        ("nan", "--rate"),
    ] {
        let args = [
            "bench",
            "quick",
            "--target",
            t,
            "--out",
            refused_out.to_str().unwrap(),
            "--size",
            "16m",
            "--time",
            "1s",
            "--rate",
            rate,
        ];
        cairn_until_exit(t, &[], &args, Duration::from_secs(300))
            .unwrap()
            .refused(needle)
            .refused("--rate");
        assert!(
            !target.exists(),
            "--rate {rate}: a refused run made its target"
        );
        assert!(!refused_out.exists());
    }
    // 1e9/s on a small file: far beyond any storage. The run ends by itself
    // at its --time, the backlog stays bounded, and the rate is reported as
    // not held with what was achieved.
    let out = dir.path().join("huge");
    let o = out.to_str().unwrap();
    let run = cairn_until_exit(
        t,
        &[],
        &[
            "bench", "quick", "--target", t, "--out", o, "--size", "16m", "--rate", "1e9",
            "--time", "2s", "--seed", "1", "--json",
        ],
        Duration::from_secs(300),
    )
    .unwrap()
    .ok();
    let json = run.json();
    let r = &json["runs"][0];
    assert_eq!(r["elapsed_s"], 2.0, "{r:#}");
    let outcome = &r["rate_outcome"];
    assert_eq!(outcome["held"], false, "{outcome:#}");
    assert_eq!(outcome["target_iops"], 1e9);
    let achieved = outcome["achieved_iops"].as_f64().unwrap();
    assert!(achieved > 0.0 && achieved < 1e9, "{outcome:#}");
    assert!(outcome["not_issued"].as_u64().unwrap() > 0, "{outcome:#}");
    let limit = outcome["backlog_limit"].as_u64().unwrap();
    assert!(limit <= 1 << 20, "{outcome:#}");
    assert!(
        outcome["backlog_max"].as_u64().unwrap() <= limit,
        "{outcome:#}"
    );
    let message = outcome["message"].as_str().unwrap();
    assert!(
        message.contains("not held") && message.contains("achieved"),
        "{message}"
    );
}

#[test]
fn zero_or_absurd_times_are_refused_saying_what_is_expected() {
    let dir = scratch();
    let target = dir.path().join("t.dat");
    let t = target.to_str().unwrap();
    let out = dir.path().join("o");
    let o = out.to_str().unwrap();
    // (flags, what the one line must say); every refusal comes before any file is made.
    let cases: &[(&[&str], &[&str])] = &[
        (&["--interval", "0"], &["--interval 0 ", "at least 100ms"]),
        (&["--interval", "0s"], &["--interval 0 ", "at least 100ms"]),
        (
            &["--interval", "1ns"],
            &["--interval 1ns is shorter than 100ms"],
        ),
        (
            &["--interval", "10ms"],
            &["--interval 10ms is shorter than 100ms"],
        ),
        (
            &["--interval", "1m"],
            &["--interval 1m is longer than --time 30s"],
        ),
        (&["--time", "0"], &["--time 0 ", "such as 30s"]),
        (&["--time", "50ms"], &["--time 50ms is shorter than 100ms"]),
        (
            &["--time", "1000years"],
            &["--time 1000years is longer than 366days"],
        ),
        (
            &["--time", "400days"],
            &["--time 400days is longer than 366days"],
        ),
        (
            &["--warmup", "30s"],
            &["--warmup 30s is not shorter than --time 30s"],
        ),
        (
            &["--warmup", "100000years"],
            &["--warmup 100000years is not shorter than --time 30s"],
        ),
        (
            &["--time", "30days", "--interval", "1s"],
            &[
                "2592000 intervals",
                "more than 100000",
                "--interval of at least 26s",
            ],
        ),
    ];
    for (flags, needles) in cases {
        let mut args = vec!["bench", "quick", "--target", t, "--out", o, "--size", "16m"];
        args.extend_from_slice(flags);
        // A safety net only: a refusal comes at once, but today's code ran
        // some of these for ever.
        let mut run = cairn_until_exit(t, &[], &args, Duration::from_secs(120)).unwrap();
        for needle in *needles {
            run = run.refused(needle);
        }
        assert!(!run.stderr.contains("0ns"), "{flags:?}: {}", run.stderr);
        assert!(!target.exists() && !out.exists(), "{flags:?} made files");
    }
    // The same limits in a parameter file, with the place of the value.
    for (rd, needle) in [
        (
            "elapsed=10,interval=0.05",
            "interval=0.05 is shorter than 0.1 s",
        ),
        ("elapsed=720h,interval=1", "2592000 intervals"),
    ] {
        let file = dir.path().join("p.vdb");
        std::fs::write(
            &file,
            format!(
                "sd=sd1,lun={t},size=16m\nwd=w,sd=sd1,xfersize=8k\nrd=r,wd=w,iorate=max,{rd}\n"
            ),
        )
        .unwrap();
        cairn(t, &["bench", "run", file.to_str().unwrap(), "--out", o])
            .refused(needle)
            .refused(&format!("{}:3:", file.display()));
        assert!(!target.exists() && !out.exists());
    }
}
