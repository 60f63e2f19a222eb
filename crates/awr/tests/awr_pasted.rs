//! AWR reports as people paste them: an excerpt that starts at the Load
//! Profile or at the host table (no `WORKLOAD REPOSITORY report for` line), a
//! whole report inside a mail, two reports set side by side in a post, and the
//! shape of the seed post "pythian-afd" in docs/sources.md (prose around a
//! report header whose sections were cut). Each is read through
//! `read::parse_file`, as `cairn awr parse` and `awr workload` read it, and
//! must give the figures of the whole report for the sections it holds, and
//! none from the text around it; a README is still refused.
//!
//! The files under `data/awr/pasted/` are cut from this crate's own report
//! fixtures (`data/awr/text/`), with prose written for these tests around
//! them; `blog_post_003_shape.txt` retells the seed post, keeping its figures,
//! its tables and the header pasted into its comments as they were.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use cairn_awr::model::{AwrReport, Header};
use cairn_awr::read::{self, AwrError, NOT_A_REPORT};

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/awr")
        .join(rel)
}

fn parse(rel: &str) -> AwrReport {
    read::parse_file(&data(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Every section's figures of `part` are those of `whole`.
fn same_figures(part: &AwrReport, whole: &AwrReport) {
    assert_eq!(part.load_profile, whole.load_profile);
    assert_eq!(part.io_profile, whole.io_profile);
    assert_eq!(part.instance_activity, whole.instance_activity);
    assert_eq!(part.top_events, whole.top_events);
    assert_eq!(part.foreground_events, whole.foreground_events);
    assert_eq!(part.background_events, whole.background_events);
    assert_eq!(part.wait_classes, whole.wait_classes);
    assert_eq!(part.histograms, whole.histograms);
    assert_eq!(part.iostat_by_function, whole.iostat_by_function);
    assert_eq!(part.parameters, whole.parameters);
}

/// No warning of `part` but those of `whole` and the one saying where the
/// report is: nothing of the text around it was taken for a row.
fn no_new_warnings(part: &AwrReport, whole: &AwrReport) {
    for w in &part.warnings {
        assert!(
            w.message.starts_with("the report is lines")
                || whole.warnings.iter().any(|x| x.message == w.message),
            "a warning the whole report does not have: {w:?}"
        );
    }
}

fn where_warning(r: &AwrReport) -> &str {
    r.warnings
        .iter()
        .find(|w| w.message.starts_with("the report is lines"))
        .map(|w| w.message.as_str())
        .unwrap_or_else(|| panic!("no warning saying where the report is: {:#?}", r.warnings))
}

#[test]
fn an_excerpt_from_the_load_profile_on_reads_as_the_whole_report() {
    let whole = parse("text/awr_122.txt");
    let part = parse("pasted/awr_122_from_load_profile.txt");
    same_figures(&part, &whole);
    assert!(part.load_profile.len() > 15 && !part.instance_activity.is_empty());
    // Above the Load Profile is the header: of it, only the block size
    // (from Cache Sizes, further down in 12.2) is in the excerpt.
    assert_eq!(
        part.header,
        Header {
            block_size: whole.header.block_size,
            ..Header::default()
        }
    );
    assert_eq!(part.header.block_size, Some(8192));
    no_new_warnings(&part, &whole);
    // The caption above it ("Load Profile and waits …") is not read.
    assert!(
        where_warning(&part).contains("lines 3-") && where_warning(&part).contains("before it"),
        "{}",
        where_warning(&part)
    );
    // Cut exactly at the title, with nothing before it, likewise.
    let text = std::fs::read_to_string(data("pasted/awr_122_from_load_profile.txt")).unwrap();
    let bare = text.split_once("\n\n").unwrap().1;
    let r = read::parse_str(bare, "bare.txt").unwrap();
    same_figures(&r, &whole);
    assert!(!r.warnings.iter().any(|w| w.section == "report"));
}

#[test]
fn an_excerpt_from_the_host_table_on_reads_as_the_whole_report() {
    let whole = parse("text/awr_122.txt");
    let part = parse("pasted/awr_122_from_host_table.txt");
    same_figures(&part, &whole);
    // The database and instance tables are above the cut; the host, the
    // snapshots and the elapsed time are read.
    assert_eq!(
        part.header,
        Header {
            db_name: None,
            db_id: None,
            instance: None,
            instance_number: None,
            release: None,
            rac: None,
            cdb: None,
            ..whole.header.clone()
        }
    );
    assert_eq!(part.header.host.as_deref(), Some("oracle1"));
    assert_eq!(part.header.elapsed_min, Some(60.2));
    assert!(part.warnings.iter().all(|w| w.section != "report"));
    no_new_warnings(&part, &whole);
}

#[test]
fn a_pasted_excerpt_with_its_spacing_lost_from_the_host_table_reads_as_its_whole() {
    // The 11.2.0.4 report as a blog prints it (spaces collapsed, rules turned
    // into em and en dashes), cut at the host table.
    let text = std::fs::read_to_string(data("text/awr_11204_pasted.txt")).unwrap();
    let at = text.find("Host Name").unwrap();
    let part = read::parse_str(&text[at..], "cut.txt").unwrap();
    let whole = read::parse_str(&text, "whole.txt").unwrap();
    same_figures(&part, &whole);
    assert_eq!(part.header.host.as_deref(), Some("prodhost7"));
    assert_eq!(part.header.cpus, Some(16));
    assert_eq!(part.header.elapsed_min, Some(60.0));
    no_new_warnings(&part, &whole);
}

#[test]
fn a_report_inside_a_mail_reads_as_the_report_alone() {
    let whole = parse("text/awr_11201.txt");
    let mail = parse("pasted/awr_11201_in_a_mail.txt");
    same_figures(&mail, &whole);
    assert_eq!(mail.header, whole.header);
    // The mail says "Load Profile: busy, …", "Elapsed: 6 minutes …" and
    // quotes "Physical reads: 12 per second": none of it is read.
    assert_eq!(mail.header.elapsed_min, Some(6.03));
    no_new_warnings(&mail, &whole);
    let at = where_warning(&mail);
    assert!(at.contains("before and after it"), "{at}");
    let text = std::fs::read_to_string(data("pasted/awr_11201_in_a_mail.txt")).unwrap();
    let banner = 1 + text
        .lines()
        .position(|l| l.starts_with("WORKLOAD REPOSITORY"))
        .unwrap();
    let end = 1 + text.lines().position(|l| l == "End of Report").unwrap();
    assert!(at.contains(&format!("lines {banner}-{end} ")), "{at}");
}

#[test]
fn two_reports_in_a_post_are_not_read_as_one() {
    // An 11.2.0.4 header and Load Profile, prose, then a 12.2 header, Load
    // Profile and Top 10: the second report's events are not the first's.
    let post = parse("pasted/two_reports_in_a_post.txt");
    let first = parse("text/awr_11204_pasted.txt");
    assert_eq!(post.header, first.header);
    assert_eq!(post.load_profile, first.load_profile);
    assert!(post.top_events.is_empty(), "{:#?}", post.top_events);
    assert!(post.wait_classes.is_empty());
    let next = post
        .warnings
        .iter()
        .find(|w| w.message.starts_with("another report starts at line 53"))
        .unwrap_or_else(|| panic!("{:#?}", post.warnings));
    assert_eq!(next.line, 53);
    assert!(next.message.contains("lines 6-"), "{}", next.message);
}

#[test]
fn the_seed_post_holds_only_a_header_and_is_refused_without_a_figure() {
    // Its excerpts were cut: what is left of a report is the header a
    // commenter pasted, spaces collapsed and rules turned into dashes.
    let path = data("pasted/blog_post_003_shape.txt");
    let text = std::fs::read_to_string(&path).unwrap();
    let r = read::parse_str(&text, "post.txt").unwrap();
    assert!(!read::usable(&r));
    assert_eq!(r.header.db_name.as_deref(), Some("CLONEMAS"));
    assert_eq!(r.header.release.as_deref(), Some("12.2.0.1.0"));
    assert_eq!(r.header.db_id, Some(3_451_810_418));
    // The prose's figures (redo size per second, the metric table, slob.conf)
    // are not a Load Profile, statistics or events.
    assert!(r.load_profile.is_empty() && r.instance_activity.is_empty());
    assert!(r.top_events.is_empty() && r.foreground_events.is_empty());
    assert_eq!(r.header.elapsed_min, None);
    let banner = 1 + text
        .lines()
        .position(|l| l.starts_with("WORKLOAD REPOSITORY"))
        .unwrap();
    let at = where_warning(&r);
    // The banner, the database table, and the instance table's names (its
    // values were cut): the "Reply" under them is not part of it.
    assert!(
        at.contains(&format!("lines {banner}-{} ", banner + 6)),
        "{at}"
    );
    // Through parse_file, as `awr parse` and `awr workload` read it: one line
    // saying where the report is and that nothing usable is in it.
    match read::parse_file(&path) {
        Err(e @ AwrError::Unusable { .. }) => {
            let m = e.to_string();
            assert!(!m.contains('\n'), "{m}");
            assert!(
                m.contains("no Load Profile, Instance Activity Stats"),
                "{m}"
            );
            assert!(m.contains(&format!("the report is lines {banner}-")), "{m}");
        }
        other => panic!("the seed post is not refused: {other:?}"),
    }
}

#[test]
fn a_readme_is_still_refused() {
    // The repository's README names Statspack, quotes a Load Profile and a
    // Top 10 table of Cairn's awr.txt: it is no report.
    let readme = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let text = std::fs::read_to_string(&readme).unwrap();
    assert!(
        text.contains("\nLoad Profile\n") && text.contains("Top 10 Foreground Events"),
        "the README no longer quotes a Load Profile: this test would prove nothing"
    );
    assert_eq!(read::detect(&text), None);
    match read::parse_file(&readme) {
        Err(e @ AwrError::NotAReport { .. }) => {
            let m = e.to_string();
            assert!(m.contains(NOT_A_REPORT) && !m.contains('\n'), "{m}");
        }
        other => panic!("the README is read as a report: {other:?}"),
    }
}

#[test]
fn titles_and_tables_without_a_report_s_structure_are_no_report() {
    for text in [
        // A reStructuredText heading that happens to be a section's title.
        "Notes\n=====\n\nLoad Profile\n~~~~~~~~~~~~\n\nWhat the load profile says about reads.\n",
        // A header table's names in prose, with no rule under them.
        "DB Name and DB Id are printed at the top.\nHost Name Platform CPUs are next.\n",
        // A title Cairn reads, alone.
        "Instance Activity Stats\n\nis the section the classes come from.\n",
        // Cairn's own Load Profile quoted further down a document.
        "# Results\n\n```\nLoad Profile\n------------\n\n    Per Second\nDB Time(s):  3.99\n```\n",
    ] {
        assert_eq!(read::detect(text), None, "{text}");
        assert_eq!(
            read::parse_str(text, "t").err().map(|e| e.to_string()),
            Some(NOT_A_REPORT.to_string())
        );
    }
}

#[test]
fn a_statspack_report_deep_in_a_mail_reads_as_the_report_alone() {
    let whole = parse("statspack/sp_122_crmprd.txt");
    let sp = std::fs::read_to_string(data("statspack/sp_122_crmprd.txt")).unwrap();
    // More lines of mail above it than a report's header block, with a
    // figure-bearing "Load Profile" line of its own.
    let mut text = String::from("Load Profile: about 2,000 transactions per second.\n\n");
    for i in 0..150 {
        text.push_str(&format!("line {i} of the thread above the report\n"));
    }
    text.push_str(&sp);
    text.push_str("\nThanks,\nAnn\n");
    let r = read::parse_str(&text, "mail.txt").unwrap();
    assert_eq!(r.format, whole.format);
    same_figures(&r, &whole);
    assert_eq!(r.header, whole.header);
    let at = where_warning(&r);
    assert!(at.contains("before and after it"), "{at}");
}
