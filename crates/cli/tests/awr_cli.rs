//! `cairn awr parse | workload | replay` and `cairn report compare` of two
//! AWR reports, through the real binary, on the test corpus.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;

use common::*;

fn corpus(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../awr/tests/data/awr")
        .join(rel)
}

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn parse_reads_every_kind_of_report_and_says_what_it_found() {
    let dir = scratch();
    let files = [
        corpus("text/awr_122.txt"),
        corpus("html/awrrpt_19c_ledger.html"),
        corpus("statspack/sp_122_crmprd.txt"),
        corpus("bank_fragment.txt"),
    ];
    let args: Vec<&str> = ["awr", "parse", "--json"]
        .into_iter()
        .chain(files.iter().map(|p| s(p)))
        .collect();
    let reports = cairn(s(dir.path()), &args).ok().json();
    let formats: Vec<&str> = reports
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["format"].as_str().unwrap())
        .collect();
    assert_eq!(
        formats,
        ["awr_text", "awr_html", "statspack_text", "awr_text"]
    );
    assert!(reports[0]["load_profile"].as_array().unwrap().len() > 5);
    // The text summary names each report and its warnings.
    let text = cairn(s(dir.path()), &["awr", "parse", s(&files[3])]).ok();
    assert!(
        text.stdout.contains("instance activity 22"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("<SNIP>"));
}

#[test]
fn a_file_that_is_not_a_report_is_refused_in_one_line() {
    let dir = scratch();
    let junk = dir.path().join("notes.txt");
    std::fs::write(&junk, "shopping list\neggs\nmilk\n").unwrap();
    cairn(s(dir.path()), &["awr", "parse", s(&junk)]).refused(NOT_A_REPORT);
    cairn(s(dir.path()), &["awr", "parse", "/nonexistent/awr.txt"]).refused("cannot read");
    // Beside a usable report, a bad one is a warning on stderr and the exit is 0.
    let mixed = cairn(
        s(dir.path()),
        &[
            "awr",
            "parse",
            "--json",
            s(&junk),
            s(&corpus("text/awr_122.txt")),
        ],
    )
    .ok();
    assert_eq!(mixed.json().as_array().unwrap().len(), 1);
    assert!(
        mixed.stderr.contains("warning") && mixed.stderr.contains("notes.txt"),
        "{}",
        mixed.stderr
    );
}

/// What every refusal of a file that is no report says.
const NOT_A_REPORT: &str = "is not an AWR or Statspack report: no 'WORKLOAD REPOSITORY report for' or 'STATSPACK report for' header found";

#[test]
fn a_text_that_only_mentions_reports_is_not_read_as_one() {
    let dir = scratch();
    // The repository's README names Statspack reports and quotes a Load
    // Profile from awr.txt: it is still not a report.
    let readme = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    assert!(
        std::fs::read_to_string(&readme)
            .unwrap()
            .contains("Load Profile"),
        "the README no longer quotes a Load Profile: this test would prove nothing"
    );
    for command in ["parse", "workload"] {
        cairn(s(dir.path()), &["awr", command, s(&readme)])
            .refused(&format!("{} {NOT_A_REPORT}", readme.display()));
    }
    // Text that is no report at all, and bytes that are not even text.
    let words = [
        "storage",
        "report",
        "load",
        "profile",
        "statspack",
        "workload",
        "the",
        "of",
        "read",
        "write",
        "per",
        "second",
        "events",
        "wait",
        "repository",
    ];
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut text = String::new();
    for i in 0..5000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        text.push_str(words[(state % words.len() as u64) as usize]);
        text.push(if i % 12 == 11 { '\n' } else { ' ' });
    }
    let prose = dir.path().join("prose.txt");
    std::fs::write(&prose, text).unwrap();
    cairn(s(dir.path()), &["awr", "parse", s(&prose)]).refused(NOT_A_REPORT);
    let noise = random_file(&dir.path().join("noise.bin"), 64 << 10, 7);
    cairn(s(dir.path()), &["awr", "parse", s(&noise)]).refused(NOT_A_REPORT);
    // A web page that is not AWR's: refused as well, saying what was expected.
    let page = dir.path().join("page.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><head><title>Quarterly results</title></head><body>\
         <h1>Load profile of the sales team</h1><table><tr><td>North</td><td>1,200</td></tr>\
         </table></body></html>",
    )
    .unwrap();
    cairn(s(dir.path()), &["awr", "parse", s(&page)]).refused("is not an AWR HTML report");
    // Cairn's own awr.txt is known by its title.
    let own = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../oltp/tests/golden/oltp_awr.txt");
    let parsed = cairn(s(dir.path()), &["awr", "parse", "--json", s(&own)])
        .ok()
        .json();
    assert_eq!(parsed[0]["format"], "awr_text");
}

/// AWR reports as people paste them (docs/awr-formats.md §5): an excerpt
/// from the Load Profile or the host table on, a report inside a mail, and
/// the seed post whose excerpts were cut, through `awr parse` and `awr
/// workload`.
#[test]
fn pasted_reports_and_excerpts_are_read_as_their_whole_report() {
    let dir = scratch();
    let parsed = |file: &PathBuf| {
        let json = cairn(s(dir.path()), &["awr", "parse", "--json", s(file)])
            .ok()
            .json();
        json[0].clone()
    };
    const SECTIONS: &[&str] = &[
        "load_profile",
        "io_profile",
        "instance_activity",
        "top_events",
        "foreground_events",
        "background_events",
        "wait_classes",
        "histograms",
        "iostat_by_function",
        "parameters",
    ];
    let whole = parsed(&corpus("text/awr_122.txt"));
    for excerpt in [
        "pasted/awr_122_from_load_profile.txt",
        "pasted/awr_122_from_host_table.txt",
    ] {
        let part = parsed(&corpus(excerpt));
        for section in SECTIONS {
            assert_eq!(part[section], whole[section], "{excerpt}: {section}");
        }
        assert!(part["load_profile"].as_array().unwrap().len() > 15);
    }
    let host = parsed(&corpus("pasted/awr_122_from_host_table.txt"));
    assert_eq!(host["header"]["host"], "oracle1");
    assert_eq!(
        host["header"]["elapsed_min"],
        whole["header"]["elapsed_min"]
    );
    // A whole report in a mail: the report's figures, the mail's none.
    let mail = parsed(&corpus("pasted/awr_11201_in_a_mail.txt"));
    let alone = parsed(&corpus("text/awr_11201.txt"));
    for section in SECTIONS.iter().chain(&["header"]) {
        assert_eq!(mail[section], alone[section], "mail: {section}");
    }
    // `awr workload` reads them the same way: the same classes.
    let classes = |file: &PathBuf| -> Vec<String> {
        cairn(s(dir.path()), &["awr", "workload", s(file)])
            .ok()
            .stdout
            .lines()
            .filter(|l| l.starts_with("wd=") || l.starts_with("rd="))
            .map(str::to_string)
            .collect()
    };
    let from_whole = classes(&corpus("text/awr_11201.txt"));
    assert!(from_whole.len() >= 5, "{from_whole:?}");
    assert_eq!(
        classes(&corpus("pasted/awr_11201_in_a_mail.txt")),
        from_whole
    );
    assert_eq!(
        classes(&corpus("pasted/awr_122_from_host_table.txt")),
        classes(&corpus("text/awr_122.txt"))
    );
    // The seed post: what is left of a report in it is a pasted header, so
    // it is refused in one line saying where that is, never read as figures.
    let post = corpus("pasted/blog_post_003_shape.txt");
    for command in ["parse", "workload"] {
        cairn(s(dir.path()), &["awr", command, s(&post)]).refused(
            "no Load Profile, Instance Activity Stats or wait events could be read (the report is lines",
        );
    }
}

#[test]
fn workload_writes_a_parameter_file_that_bench_run_accepts() {
    let dir = scratch();
    let params = dir.path().join("bank.vdb");
    cairn(
        s(dir.path()),
        &[
            "awr",
            "workload",
            s(&corpus("bank_fragment.txt")),
            "--scale",
            "0.01",
            "-o",
            s(&params),
        ],
    )
    .ok();
    let text = std::fs::read_to_string(&params).unwrap();
    assert!(
        text.contains("wd=wd_oracle_redo_write") && text.contains("xfersize=16k,seekpct=0"),
        "{text}"
    );
    // The redo write size the fragment lacks can be given.
    let redo64 = cairn(
        s(dir.path()),
        &[
            "awr",
            "workload",
            s(&corpus("bank_fragment.txt")),
            "--redo-write-size",
            "64k",
        ],
    )
    .ok();
    let redo_line = redo64
        .stdout
        .lines()
        .find(|l| l.starts_with("wd=wd_oracle_redo_write"))
        .unwrap();
    assert!(redo_line.contains("xfersize=64k"), "{redo_line}");
    assert!(
        text.contains("wd=wd_oracle_rand_read") && text.contains("7,707.3/s"),
        "{text}"
    );
    // Short, on a small file: bench run takes it as it is.
    let short = text
        .replace("elapsed=120", "elapsed=2")
        .replace("warmup=5", "warmup=0");
    std::fs::write(&params, short).unwrap();
    let lun = sparse(&dir.path().join("lun.dat"), 64 << 20);
    let out = dir.path().join("run");
    let run = cairn(
        s(dir.path()),
        &[
            "bench",
            "run",
            s(&params),
            &format!("lun={}", s(&lun)),
            "--out",
            s(&out),
            "--json",
        ],
    )
    .ok()
    .json();
    let workloads = run["runs"][0]["totals"]["workloads"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(workloads, 5, "one wd per class");
}

#[test]
fn replay_prints_the_verdict_and_writes_its_reports() {
    let dir = scratch();
    let out = dir.path().join("replay");
    let run = cairn(
        s(dir.path()),
        &[
            "awr",
            "replay",
            s(&corpus("text/awr_122.txt")),
            "--target",
            s(&dir.path().join("t.dat")),
            "--size",
            "256m",
            "--scale",
            "0.01",
            "--duration",
            "3s",
            "--threads",
            "8",
            "--out",
            s(&out),
        ],
    )
    .ok();
    assert!(
        run.stdout.contains("single-block random reads"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("DB time"), "{}", run.stdout);
    for f in [
        "verdict.txt",
        "verdict.html",
        "verdict.json",
        "params.vdb",
        "summary.txt",
        "report.html",
        "result.json",
    ] {
        assert!(out.join(f).exists(), "{f}");
    }
}

#[test]
fn compare_two_awr_reports_gives_the_posts_rows() {
    let dir = scratch();
    let cmp = cairn(
        s(dir.path()),
        &[
            "report",
            "compare",
            s(&corpus("text/awr_11204.txt")),
            s(&corpus("text/awr_122.txt")),
        ],
    )
    .ok();
    // The 11.2.0.4 report's db file sequential read average comes from its
    // totals (time ÷ waits), not the rounded printed average: a number, not "-".
    let line = cmp
        .stdout
        .lines()
        .find(|l| l.contains("db file sequential read"))
        .unwrap();
    assert!(line.chars().any(|c| c.is_ascii_digit()), "{line}");
    let user_io = cmp.stdout.lines().find(|l| l.contains("User I/O")).unwrap();
    assert!(
        !user_io.contains(" - "),
        "User I/O average on both sides: {user_io}"
    );
    for row in [
        "Redo",
        "Logical read",
        "Physical read",
        "Transactions",
        "db file sequential read",
    ] {
        assert!(
            cmp.stdout.contains(row),
            "compare lacks {row}:\n{}",
            cmp.stdout
        );
    }
}

#[test]
fn an_interrupted_replay_says_so_in_its_verdict_and_exits_1() {
    use std::process::{Command, Stdio};
    let dir = scratch();
    let out = dir.path().join("replay");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([
            "awr",
            "replay",
            s(&corpus("text/awr_122.txt")),
            "--target",
            s(&dir.path().join("t.dat")),
            "--size",
            "64m",
            "--scale",
            "0.01",
            "--duration",
            "60s",
            "--out",
            s(&out),
        ])
        .env("CAIRN_DISCOVER", s(dir.path()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt it once the run is under way: its I/O threads (named
    // cairn-io-N) exist only while a run does, after the target is filled.
    let tasks = format!("/proc/{}/task", child.id());
    let running = || {
        std::fs::read_dir(&tasks).is_ok_and(|ts| {
            ts.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .any(|name| name.starts_with("cairn-io-"))
        })
    };
    while !running() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the replay exited ({status}) before its run began");
        }
        std::thread::yield_now();
    }
    // SAFETY: sending SIGINT to our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let run = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    let verdict = std::fs::read_to_string(out.join("verdict.txt")).unwrap();
    assert!(
        verdict.contains("THE RUN DID NOT COMPLETE") && verdict.contains("interrupted"),
        "{verdict}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("verdict.json")).unwrap()).unwrap();
    assert!(!json["problems"].as_array().unwrap().is_empty());
}
