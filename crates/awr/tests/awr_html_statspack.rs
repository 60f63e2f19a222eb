//! AWR HTML and Statspack text reports: the figures of each section, the
//! warnings for what is missing or damaged, and no panic on any input.
//!
//! The reports under `data/awr/html/` and `data/awr/statspack/` were written
//! for these tests in the layouts of docs/awr-formats.md §2 and §3 (an
//! 11.2.0.3 and a 19c AWR HTML report, a 10.2 and a 12.2 Statspack report),
//! with figures that agree with each other (Load Profile = Instance Activity
//! per second, IO Profile = the `total` statistics).

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use cairn_awr::html::parse_awr_html;
use cairn_awr::model::{AwrReport, EventLine, Format};
use cairn_awr::statspack::parse_statspack_text;
use proptest::prelude::*;

const HTML_11: &str = include_str!("data/awr/html/awrrpt_11203_sales.html");
const HTML_19: &str = include_str!("data/awr/html/awrrpt_19c_ledger.html");
const SP_10: &str = include_str!("data/awr/statspack/sp_1020_ordprd.txt");
const SP_12: &str = include_str!("data/awr/statspack/sp_122_crmprd.txt");

fn ev<'a>(list: &'a [EventLine], name: &str) -> &'a EventLine {
    list.iter()
        .find(|e| e.event == name)
        .unwrap_or_else(|| panic!("no event {name:?} in {list:#?}"))
}

fn stat(r: &AwrReport, name: &str) -> (Option<f64>, Option<f64>, Option<f64>) {
    let s = r
        .statistic(name)
        .unwrap_or_else(|| panic!("no statistic {name:?}"));
    (s.total, s.per_second, s.per_trans)
}

fn profile(r: &AwrReport, label: &str) -> (Option<f64>, Option<f64>) {
    let p = r
        .load_profile
        .iter()
        .find(|p| p.label == label)
        .unwrap_or_else(|| panic!("no Load Profile row {label:?}"));
    (p.per_second, p.per_transaction)
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() <= b.abs() * 1e-9)
}

// ---------------------------------------------------------------------------
// AWR HTML, 11.2.0.3

#[test]
fn html_11g_header_and_load_profile() {
    let r = parse_awr_html(HTML_11, "sales.html");
    assert_eq!(r.format, Format::AwrHtml);
    assert_eq!(r.source, "sales.html");
    let h = &r.header;
    assert_eq!(h.db_name.as_deref(), Some("SALES"));
    assert_eq!(h.db_id, Some(2_718_281_828));
    assert_eq!(h.instance.as_deref(), Some("sales1"));
    assert_eq!(h.instance_number, Some(1));
    assert_eq!(h.release.as_deref(), Some("11.2.0.3.0"));
    assert_eq!(h.rac, Some(false));
    assert_eq!(h.host.as_deref(), Some("dbhost07.example.net"));
    assert_eq!(h.platform.as_deref(), Some("Linux x86 64-bit"));
    assert_eq!((h.cpus, h.cores, h.sockets), (Some(16), Some(8), Some(2)));
    assert_eq!(h.memory_gb, Some(94.4));
    assert_eq!((h.begin_snap_id, h.end_snap_id), (Some(4410), Some(4411)));
    assert_eq!(h.begin_snap_time.as_deref(), Some("10-Mar-14 09:00:21"));
    assert_eq!(h.end_snap_time.as_deref(), Some("10-Mar-14 10:00:27"));
    assert_eq!((h.elapsed_min, h.db_time_min), (Some(60.10), Some(241.62)));
    assert_eq!(h.block_size, Some(8192));

    // The 11g label set.
    assert_eq!(r.load_profile.len(), 15);
    assert_eq!(
        profile(&r, "Redo size"),
        (Some(1_874_310.4), Some(16_215.3))
    );
    assert_eq!(profile(&r, "Physical reads"), (Some(6_902.3), Some(59.7)));
    assert_eq!(profile(&r, "Transactions"), (Some(115.6), None));
    let dbt = &r.load_profile[0];
    assert_eq!(
        (dbt.label.as_str(), dbt.per_exec, dbt.per_call),
        ("DB Time(s)", Some(0.01), Some(0.0))
    );
    assert!(r.warnings.is_empty(), "{:#?}", r.warnings);
}

#[test]
fn html_11g_events_classes_and_histogram() {
    let r = parse_awr_html(HTML_11, "sales.html");
    // Top 5 Timed Foreground Events: whole-ms averages.
    assert_eq!(r.top_events.len(), 5);
    let seq = ev(&r.top_events, "db file sequential read");
    assert_eq!(seq.waits, Some(12_402_118.0));
    assert_eq!(seq.total_wait_s, Some(7_812.0));
    assert_eq!(seq.avg_wait_us, Some(1_000.0));
    assert_eq!(seq.pct_db_time, Some(53.9));
    assert_eq!(seq.wait_class.as_deref(), Some("User I/O"));
    let cpu = ev(&r.top_events, "DB CPU");
    assert_eq!(
        (
            cpu.waits,
            cpu.total_wait_s,
            cpu.avg_wait_us,
            cpu.wait_class.as_deref()
        ),
        (None, Some(5_771.0), None, None)
    );

    assert_eq!(r.foreground_events.len(), 7);
    // An idle event has no % DB time.
    let idle = ev(&r.foreground_events, "SQL*Net message from client");
    assert_eq!(
        (idle.total_wait_s, idle.avg_wait_us, idle.pct_db_time),
        (Some(611_920.0), Some(50_000.0), None)
    );
    let lfpw = ev(&r.background_events, "log file parallel write");
    assert_eq!(
        (lfpw.waits, lfpw.total_wait_s),
        (Some(421_770.0), Some(240.0))
    );
    // `% bg time` is not a share of DB time.
    assert_eq!(lfpw.pct_db_time, None);

    // No "Wait Classes by Total Wait Time" before 11.2.0.4: Foreground Wait Class.
    assert_eq!(r.wait_classes.len(), 4);
    assert_eq!(r.wait_classes[0].wait_class, "User I/O");
    assert_eq!(r.wait_classes[0].total_wait_s, Some(8_409.0));
    assert_eq!(r.wait_classes[1].waits, None);

    // The ms histogram: labels decoded from `&lt;1ms`, K/M totals, blank buckets.
    assert_eq!(r.histograms.len(), 5);
    let h = r
        .histograms
        .iter()
        .find(|h| h.event == "db file sequential read")
        .unwrap();
    assert_eq!(h.table, "Wait Event Histogram");
    assert_eq!(h.total_waits, Some(12.4e6));
    let labels: Vec<&str> = h.buckets.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        labels,
        ["<1ms", "<2ms", "<4ms", "<8ms", "<16ms", "<32ms", "<=1s", ">1s"]
    );
    assert_eq!(h.buckets[0].1, Some(81.3));
    let lfs = r
        .histograms
        .iter()
        .find(|h| h.event == "log file sync")
        .unwrap();
    assert_eq!(lfs.buckets[7], (">1s".to_string(), None));
    assert_eq!(r.io_profile.len(), 0, "11.2.0.3 has no IO Profile");
}

#[test]
fn html_11g_activity_iostat_and_parameters() {
    let r = parse_awr_html(HTML_11, "sales.html");
    assert_eq!(r.instance_activity.len(), 22);
    assert_eq!(
        stat(&r, "physical read total IO requests"),
        (Some(12_902_544.0), Some(3_578.1), Some(31.0))
    );
    assert_eq!(
        stat(&r, "physical read total multi block requests").1,
        Some(108.2)
    );
    assert_eq!(stat(&r, "redo writes").1, Some(117.0));
    // Load Profile and Instance Activity agree, as in a real report.
    assert_eq!(stat(&r, "redo size").1, profile(&r, "Redo size").0);

    assert_eq!(r.iostat_by_function.len(), 5);
    let bc = &r.iostat_by_function[0];
    assert_eq!(bc.function, "Buffer Cache Reads");
    assert!(close(bc.reads_data, 183.2 * 1024.0), "{bc:?}");
    assert_eq!(bc.reqs_per_sec_read, Some(3_567.4));
    // 11.2 prints MiB/s as a bare number and the average in ms.
    assert_eq!(bc.data_per_sec_read, Some(52.0252));
    assert_eq!(bc.waits_count, Some(12.8e6));
    assert!(close(bc.avg_time, 700.0), "{bc:?}");
    let dbwr = &r.iostat_by_function[1];
    assert_eq!(
        (dbwr.writes_data.map(|v| v.round()), dbwr.avg_time),
        (Some((33.3f64 * 1024.0).round()), None)
    );

    assert_eq!(
        r.parameters,
        [
            ("db_block_size".to_string(), "8192".to_string()),
            (
                "db_file_multiblock_read_count".to_string(),
                "128".to_string()
            )
        ]
    );
}

// ---------------------------------------------------------------------------
// AWR HTML, 19c

#[test]
fn html_19c_header_profile_and_io_profile() {
    let r = parse_awr_html(HTML_19, "ledger.html");
    assert!(r.warnings.is_empty(), "{:#?}", r.warnings);
    let h = &r.header;
    assert_eq!(h.db_name.as_deref(), Some("LEDGER"));
    assert_eq!(h.release.as_deref(), Some("19.0.0.0.0"));
    assert_eq!((h.rac, h.cdb), (Some(false), Some(false)));
    // The instance is in its own table from 12c on.
    assert_eq!(
        (h.instance.as_deref(), h.instance_number),
        (Some("ledger1"), Some(1))
    );
    assert_eq!((h.cpus, h.cores), (Some(64), Some(32)));
    assert_eq!((h.elapsed_min, h.db_time_min), (Some(60.07), Some(903.44)));
    assert_eq!(h.block_size, Some(8192), "from init.ora db_block_size");

    // The 12c label set.
    assert_eq!(r.load_profile.len(), 23);
    assert_eq!(profile(&r, "Redo size (bytes)").0, Some(14_912_003.5));
    assert_eq!(profile(&r, "Read IO requests").0, Some(21_406.3));
    assert_eq!(profile(&r, "Write IO (MB)").0, Some(76.6));

    assert_eq!(r.io_profile.len(), 11);
    let total = &r.io_profile[0];
    assert_eq!(total.label, "Total Requests");
    assert_eq!(
        (total.read_write_per_s, total.read_per_s, total.write_per_s),
        (Some(26_801.4), Some(21_699.0), Some(5_102.4))
    );
    // IO Profile and Instance Activity agree.
    assert_eq!(
        total.read_per_s,
        stat(&r, "physical read total IO requests").1
    );
    let redo = r
        .io_profile
        .iter()
        .find(|l| l.label == "Redo (MB)")
        .unwrap();
    assert_eq!(redo.write_per_s, Some(14.3));
}

#[test]
fn html_19c_events_with_unit_suffixed_averages() {
    let r = parse_awr_html(HTML_19, "ledger.html");
    assert_eq!(r.top_events.len(), 10);
    let cpu = ev(&r.top_events, "DB CPU");
    assert_eq!(cpu.total_wait_s, Some(35_300.0), "`35.3K` seconds");
    let seq = ev(&r.top_events, "db file sequential read");
    assert_eq!(
        (seq.total_wait_s, seq.avg_wait_us),
        (Some(10_100.0), Some(173.5))
    );
    assert_eq!(
        ev(&r.top_events, "db file parallel read").avg_wait_us,
        Some(1_100.0)
    );
    // 12.2+ cuts the class to 8 characters; kept as printed.
    assert_eq!(
        ev(&r.top_events, "enq: TX - row lock contention")
            .wait_class
            .as_deref(),
        Some("Applicat")
    );

    assert_eq!(r.wait_classes.len(), 5);
    let uio = r
        .wait_classes
        .iter()
        .find(|c| c.wait_class == "User I/O")
        .unwrap();
    assert_eq!(
        (
            uio.waits,
            uio.total_wait_s,
            uio.avg_wait_us,
            uio.pct_db_time
        ),
        (Some(60_340_012.0), Some(12_760.0), Some(211.47), Some(23.5))
    );

    assert_eq!(
        ev(&r.foreground_events, "log file sync").avg_wait_us,
        Some(387.47)
    );
    let bg = ev(&r.background_events, "db file parallel write");
    assert_eq!((bg.waits, bg.avg_wait_us), (Some(1_301_772.0), Some(238.9)));
    assert_eq!(
        r.event("db file parallel write").map(|e| e.waits),
        Some(Some(1_301_772.0))
    );
}

#[test]
fn html_19c_microsecond_histograms_keep_their_titles_and_labels() {
    let r = parse_awr_html(HTML_19, "ledger.html");
    // 3 rows of the µs table, 3 of "up to 32 ms"; the "up to 2 min" table is
    // present and empty ("No data exists"), which is neither a row nor a warning.
    assert_eq!(r.histograms.len(), 6, "{:#?}", r.histograms);
    let us = r
        .histograms
        .iter()
        .find(|h| h.table == "Wait Event Histogram" && h.event == "db file sequential read")
        .unwrap();
    assert_eq!(us.total_waits, Some(58.2e6));
    assert_eq!(us.buckets[0], ("<8us".to_string(), None));
    assert_eq!(us.buckets[7], (">=512us".to_string(), Some(14.6)));
    let ms = r
        .histograms
        .iter()
        .find(|h| {
            h.table == "Wait Event Histogram (up to 32 ms)" && h.event == "db file sequential read"
        })
        .unwrap();
    assert_eq!(ms.total_waits, Some(8_494_700.0));
    assert_eq!(ms.buckets[0], ("<512us".to_string(), Some(85.4)));
    assert_eq!(ms.buckets[7], (">=32ms".to_string(), None));
}

#[test]
fn html_19c_key_and_other_activity_stats_are_merged_without_duplicates() {
    let r = parse_awr_html(HTML_19, "ledger.html");
    // 7 key + 18 other rows, of which 3 repeat a key row exactly.
    assert_eq!(r.instance_activity.len(), 22, "{:#?}", r.instance_activity);
    assert_eq!(
        r.instance_activity
            .iter()
            .filter(|s| s.name == "db block changes")
            .count(),
        1
    );
    // Scientific notation as Oracle prints it when a value outgrows its column.
    assert_eq!(
        stat(&r, "physical read total bytes").0,
        Some(1.4369012736e12)
    );
    assert_eq!(
        stat(&r, "physical write total multi block requests").1,
        Some(111.3)
    );
    // "Instance Activity Stats - Absolute Values" is not read as activity.
    assert!(r.statistic("session pga memory max").is_none());

    let lgwr = r
        .iostat_by_function
        .iter()
        .find(|l| l.function == "LGWR")
        .unwrap();
    assert!(close(lgwr.writes_data, 50.1 * 1024.0));
    assert_eq!(
        (lgwr.data_per_sec_write, lgwr.reqs_per_sec_write),
        (Some(14.24), Some(183.2))
    );
    assert_eq!(lgwr.waits_count, Some(660_200.0));
    assert!(close(lgwr.avg_time, 608.88));
    let total = r
        .iostat_by_function
        .iter()
        .find(|l| l.function == "TOTAL:")
        .unwrap();
    assert_eq!(total.reqs_per_sec_read, Some(21_700.0));
    assert!(close(total.reads_data, 1.3 * 1024.0 * 1024.0));
    assert_eq!(r.parameters.len(), 2);
    assert_eq!(r.parameters[1].1, "64");
}

// ---------------------------------------------------------------------------
// Damaged, partial and foreign HTML

fn sections(r: &AwrReport) -> Vec<&str> {
    r.warnings.iter().map(|w| w.section.as_str()).collect()
}

#[test]
fn html_missing_sections_are_named() {
    // Cut the Background Wait Events and Instance Activity tables out.
    let cut = |html: &str, from: &str, to: &str| {
        let a = html.find(from).unwrap();
        let b = a + html[a..].find(to).unwrap();
        format!("{}{}", &html[..a], &html[b..])
    };
    let html = cut(
        HTML_11,
        "<h3 class=\"awr\"><a class=\"awr\" name=\"24\">",
        "<h3 class=\"awr\"><a class=\"awr\" name=\"25\">",
    );
    let html = cut(
        &html,
        "<h3 class=\"awr\"><a class=\"awr\" name=\"35\">",
        "<h3 class=\"awr\"><a class=\"awr\" name=\"36\">",
    );
    let r = parse_awr_html(&html, "cut.html");
    assert_eq!(
        sections(&r),
        ["Background Wait Events", "Instance Activity Stats"],
        "{:#?}",
        r.warnings
    );
    assert!(r
        .warnings
        .iter()
        .all(|w| w.message.contains("missing") && w.line == 0));
    assert!(r.background_events.is_empty() && r.instance_activity.is_empty());
    // The rest still reads.
    assert_eq!(r.foreground_events.len(), 7);
}

#[test]
fn html_unreadable_rows_and_sections_are_named_with_their_line() {
    let html = HTML_19.replacen(
        "<td align=\"right\" class='awrnc'>58,214,551</td>",
        "<td align=\"right\" class='awrnc'>lots</td>",
        1,
    );
    let r = parse_awr_html(&html, "bad.html");
    let w = r
        .warnings
        .iter()
        .find(|w| w.section == "Top events")
        .unwrap();
    assert!(w.message.contains("db file sequential read"), "{w:?}");
    let line = html.lines().position(|l| l.contains(">lots<")).unwrap() + 1;
    assert_eq!(w.line, line);
    assert_eq!(r.top_events.len(), 9);

    // A Load Profile table with no readable row at all.
    let start = HTML_19
        .find("summary=\"This table displays load profile\"")
        .unwrap();
    let end = start + HTML_19[start..].find("</table>").unwrap();
    let gutted = format!(
        "{}><tr><td>garbage</td><td>x</td></tr>{}",
        &HTML_19[..start],
        &HTML_19[end..]
    );
    let r = parse_awr_html(&gutted, "gutted.html");
    assert!(r.load_profile.is_empty());
    assert!(
        r.warnings
            .iter()
            .any(|w| w.section == "Load Profile" && w.message.contains("present but no row")),
        "{:#?}",
        r.warnings
    );
}

#[test]
fn a_page_that_is_not_an_awr_report_says_so() {
    let page = "<!DOCTYPE html><html><head><title>Quarterly results</title></head><body>\
                <h1>Results &amp; outlook</h1><table><tr><th>Region</th><th>Sales</th></tr>\
                <tr><td>North</td><td>1,200</td></tr></table></body></html>";
    let r = parse_awr_html(page, "page.html");
    assert_eq!(r.warnings.len(), 1, "{:#?}", r.warnings);
    assert_eq!(r.warnings[0].section, "report");
    assert!(r.warnings[0].message.contains("not an AWR HTML report"));
    assert!(r.load_profile.is_empty() && r.header.db_name.is_none());

    let r = parse_awr_html("", "empty.html");
    assert!(r.warnings[0].message.contains("not an AWR HTML report"));
}

#[test]
fn a_truncated_html_report_keeps_what_it_has_and_says_where_it_ends() {
    // Cut in the middle of the Foreground Wait Events table.
    let fg = HTML_11.find(">Foreground Wait Events</h3>").unwrap();
    let at = fg + HTML_11[fg..].find(">direct path read</td>").unwrap();
    let r = parse_awr_html(&HTML_11[..at + 10], "cut.html");
    assert_eq!(r.header.db_name.as_deref(), Some("SALES"));
    assert_eq!(r.load_profile.len(), 15);
    assert_eq!(r.top_events.len(), 5);
    assert_eq!(r.foreground_events.len(), 3, "rows before the cut are kept");
    let trunc = r
        .warnings
        .iter()
        .find(|w| w.message.contains("truncated"))
        .unwrap();
    assert_eq!(trunc.section, "Foreground Wait Events");
    assert!(trunc.line > 0);
    assert!(sections(&r).contains(&"Instance Activity Stats"));
}

#[test]
fn entities_are_decoded_in_names() {
    let html = HTML_19.replace(
        ">enq: TX - row lock contention<",
        ">enq: TX &amp; row&nbsp;lock &lt;contention&gt;<",
    );
    let r = parse_awr_html(&html, "x.html");
    assert!(
        r.top_events
            .iter()
            .any(|e| e.event == "enq: TX & row lock <contention>"),
        "{:#?}",
        r.top_events
    );
}

// ---------------------------------------------------------------------------
// Statspack 12.2

#[test]
fn statspack_12c_header_and_load_profile() {
    let r = parse_statspack_text(SP_12, "sp_122.txt");
    assert_eq!(r.format, Format::StatspackText);
    assert!(r.warnings.is_empty(), "{:#?}", r.warnings);
    let h = &r.header;
    // The `Database` cell is blank in 12c Statspack.
    assert_eq!(h.db_name, None);
    assert_eq!(h.db_id, Some(1_618_033_988));
    assert_eq!(
        (h.instance.as_deref(), h.instance_number),
        (Some("crmprd1"), Some(1))
    );
    assert_eq!(h.release.as_deref(), Some("12.2.0.1.0"));
    assert_eq!(h.rac, Some(false));
    assert_eq!(h.host.as_deref(), Some("crmdb02.example."));
    assert_eq!(h.platform.as_deref(), Some("Linux x86 64-bit"));
    assert_eq!(
        (h.cpus, h.cores, h.sockets, h.memory_gb),
        (Some(24), Some(12), Some(2), Some(191.9))
    );
    assert_eq!(
        (h.begin_snap_id, h.end_snap_id),
        (Some(31_207), Some(31_208))
    );
    assert_eq!(h.end_snap_time.as_deref(), Some("02-May-23 14:00:04"));
    assert_eq!((h.elapsed_min, h.db_time_min), (Some(60.05), Some(186.31)));
    assert_eq!(h.block_size, Some(8192));

    assert_eq!(r.load_profile.len(), 15);
    assert_eq!(profile(&r, "DB time(s)"), (Some(3.1), Some(2.3)));
    assert_eq!(
        profile(&r, "Physical reads"),
        (Some(11_904.3), Some(8_835.7))
    );
}

#[test]
fn statspack_12c_events_without_wait_class() {
    let r = parse_statspack_text(SP_12, "sp_122.txt");
    assert_eq!(r.top_events.len(), 5);
    let seq = ev(&r.top_events, "db file sequential read");
    assert_eq!(
        (
            seq.waits,
            seq.total_wait_s,
            seq.avg_wait_us,
            seq.pct_db_time
        ),
        (Some(9_410_227.0), Some(5_902.0), Some(1_000.0), Some(52.8))
    );
    assert_eq!(seq.wait_class, None);
    let cpu = ev(&r.top_events, "CPU time");
    assert_eq!(
        (cpu.waits, cpu.total_wait_s, cpu.pct_db_time),
        (None, Some(4_213.0), Some(37.7))
    );

    assert_eq!(r.foreground_events.len(), 6);
    let lfs = ev(&r.foreground_events, "log file sync");
    assert_eq!(
        (
            lfs.waits,
            lfs.total_wait_s,
            lfs.avg_wait_us,
            lfs.pct_db_time
        ),
        (Some(5_122.0), Some(402.0), Some(78_000.0), Some(3.6))
    );
    assert_eq!(
        ev(&r.foreground_events, "SQL*Net message from client").pct_db_time,
        None
    );
    assert_eq!(r.background_events.len(), 5);
    assert_eq!(
        ev(&r.background_events, "db file parallel write").waits,
        Some(402_556.0)
    );
    assert!(
        r.wait_classes.is_empty(),
        "Statspack has no wait class table"
    );
}

#[test]
fn statspack_12c_histogram_across_a_page_break_with_blank_buckets() {
    let r = parse_statspack_text(SP_12, "sp_122.txt");
    assert_eq!(r.histograms.len(), 10, "{:#?}", r.histograms);
    let cf = r
        .histograms
        .iter()
        .find(|h| h.event == "control file parallel writ")
        .unwrap();
    assert_eq!(cf.table, "Wait Event Histogram");
    assert_eq!(cf.total_waits, Some(1_290.0));
    // The blank `<1ms` cell is no value, and the next figure stays in `<2ms`.
    assert_eq!(cf.buckets[0], ("<1ms".to_string(), None));
    assert_eq!(cf.buckets[1], ("<2ms".to_string(), Some(40.2)));
    let seq = r
        .histograms
        .iter()
        .find(|h| h.event == "db file sequential read")
        .unwrap();
    assert_eq!(seq.total_waits, Some(9_410_000.0));
    assert_eq!(seq.buckets[7], (">1s".to_string(), Some(0.0)));
    let lfs = r
        .histograms
        .iter()
        .find(|h| h.event == "log file sync")
        .unwrap();
    assert_eq!((lfs.buckets[6].1, lfs.buckets[7].1), (Some(39.8), None));
}

#[test]
fn statspack_12c_activity_stats_with_33_char_names_and_overflow() {
    let r = parse_statspack_text(SP_12, "sp_122.txt");
    assert_eq!(r.instance_activity.len(), 22, "two pages merged");
    // `############`: the per-transaction value did not fit and is lost.
    assert_eq!(
        stat(&r, "physical read total bytes"),
        (Some(352_540_966_912.0), Some(97_846_507.6), None)
    );
    // Names cut to 33 characters are kept as printed.
    assert_eq!(stat(&r, "physical read total multi block r").1, Some(67.2));
    assert_eq!(
        stat(&r, "physical write total multi block").0,
        Some(38_112.0)
    );
    assert_eq!(
        stat(&r, "redo writes"),
        (Some(187_330.0), Some(52.0), Some(38.6))
    );
    assert_eq!(stat(&r, "redo size").1, profile(&r, "Redo size").0);
    assert_eq!(
        r.parameters,
        [
            ("db_block_size".to_string(), "8192".to_string()),
            (
                "db_file_multiblock_read_count".to_string(),
                "32".to_string()
            )
        ]
    );
}

// ---------------------------------------------------------------------------
// Statspack 10.2

#[test]
fn statspack_10g_reads_its_older_layout() {
    let r = parse_statspack_text(SP_10, "sp_102.txt");
    let h = &r.header;
    assert_eq!(h.db_id, Some(1_414_213_562));
    assert_eq!(h.release.as_deref(), Some("10.2.0.4.0"));
    assert_eq!(h.host.as_deref(), Some("ordhost01"));
    assert_eq!(h.cpus, Some(8));
    assert_eq!(h.memory_gb, Some(32.0));
    assert_eq!(
        (h.begin_snap_id, h.elapsed_min, h.db_time_min),
        (Some(512), Some(59.97), None)
    );
    assert_eq!(h.block_size, Some(8192), "from Std Block Size");

    // Two columns only, and the ratio lines after the blank line are not rows.
    assert_eq!(r.load_profile.len(), 12);
    assert_eq!(profile(&r, "Sorts"), (Some(96.31), Some(1.06)));
    assert_eq!(profile(&r, "Transactions"), (Some(90.67), None));

    assert_eq!(r.top_events.len(), 5);
    assert_eq!(
        ev(&r.top_events, "db file scattered read").avg_wait_us,
        Some(2_000.0)
    );
    // The 10g `Wait Events` table (fg and bg together) stands in for the foreground one, with a word.
    assert_eq!(r.foreground_events.len(), 6);
    let seq = ev(&r.foreground_events, "db file sequential read");
    assert_eq!(
        (seq.waits, seq.total_wait_s, seq.pct_db_time),
        (Some(10_224_991.0), Some(9_411.0), None)
    );
    assert_eq!(r.warnings.len(), 1, "{:#?}", r.warnings);
    assert_eq!(r.warnings[0].section, "Wait Events");
    assert_eq!(r.background_events.len(), 4);

    assert_eq!(r.histograms.len(), 4);
    assert_eq!(r.histograms[2].total_waits, Some(10e6));
    assert_eq!(r.instance_activity.len(), 9);
    assert_eq!(stat(&r, "redo writes").1, Some(90.6));
    assert!(r.parameters.is_empty());
}

#[test]
fn statspack_missing_sections_and_foreign_text_are_named() {
    // Drop everything from the Background Wait Events on.
    let at = SP_12.find("Background Wait Events  DB/Inst").unwrap();
    let r = parse_statspack_text(&SP_12[..at], "cut.txt");
    assert_eq!(
        sections(&r),
        ["Background Wait Events", "Instance Activity Stats"],
        "{:#?}",
        r.warnings
    );
    assert_eq!(r.foreground_events.len(), 6);

    let r = parse_statspack_text("Dear all,\nplease find the figures below.\n", "mail.txt");
    let s = sections(&r);
    assert_eq!(s[0], "report");
    assert!(r.warnings[0].message.contains("not a Statspack report"));
    for name in [
        "Load Profile",
        "Top 5 Timed Events",
        "Instance Activity Stats",
    ] {
        assert!(s.contains(&name), "{name} not named in {s:?}");
    }
}

#[test]
fn statspack_damaged_rows_are_named_with_their_line() {
    let fg = SP_12.find("Foreground Wait Events  DB/Inst").unwrap();
    let bad = format!(
        "{}{}",
        &SP_12[..fg],
        SP_12[fg..].replacen("5,122", "5,1x2", 1)
    );
    let r = parse_statspack_text(&bad, "bad.txt");
    let line = bad.lines().position(|l| l.contains("5,1x2")).unwrap() + 1;
    let w = r.warnings.iter().find(|w| w.line == line).unwrap();
    assert_eq!(w.section, "Foreground Wait Events");
    assert_eq!(r.foreground_events.len(), 5);
}

#[test]
fn statspack_pasted_with_crlf_and_form_feeds_reads_the_same() {
    let pasted = SP_12.replace('\n', "\r\n").replace(
        "          ----------------",
        "\u{c}          ----------------",
    );
    let a = parse_statspack_text(SP_12, "a");
    let b = parse_statspack_text(&pasted, "a");
    assert_eq!(a, b);
}

// ---------------------------------------------------------------------------
// Never panic

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn html_parser_never_panics_on_arbitrary_text(s in "\\PC{0,400}") {
        let _ = parse_awr_html(&s, "fuzz");
    }

    #[test]
    fn html_parser_never_panics_on_tag_soup(parts in proptest::collection::vec(
        prop_oneof![
            Just("<table summary=\"This table displays load profile\">".to_string()),
            Just("<table>".to_string()), Just("</table>".to_string()), Just("<tr>".to_string()),
            Just("</tr>".to_string()), Just("<td colspan=\"99999999999\">".to_string()), Just("<th>".to_string()),
            Just("</td>".to_string()), Just("<p />".to_string()), Just("<h3>Wait Event Histogram</h3>".to_string()),
            Just("<li>".to_string()), Just("&#160;".to_string()), Just("Event".to_string()),
            Just("Total Waits".to_string()), Just("Begin Snap:".to_string()), Just("1.5E+99".to_string()),
            Just("<script>".to_string()), Just("WORKLOAD REPOSITORY".to_string()), "\\PC{0,12}",
        ], 0..60)) {
        let _ = parse_awr_html(&parts.concat(), "fuzz");
    }

    #[test]
    fn html_parser_never_panics_on_a_cut_report(cut in 0usize..40_000) {
        let end = HTML_19.char_indices().map(|(i, _)| i).take_while(|&i| i <= cut).last().unwrap_or(0);
        let _ = parse_awr_html(&HTML_19[..end], "cut");
    }

    #[test]
    fn statspack_parser_never_panics_on_arbitrary_text(s in "\\PC{0,400}") {
        let _ = parse_statspack_text(&s, "fuzz");
    }

    #[test]
    fn statspack_parser_never_panics_on_mutated_reports(at in 0usize..12_000, junk in "[ \\-~#0-9A-Za-z:\\n]{0,40}") {
        let at = SP_12.char_indices().map(|(i, _)| i).take_while(|&i| i <= at).last().unwrap_or(0);
        let text = format!("{}{}{}", &SP_12[..at], junk, &SP_12[at..]);
        let _ = parse_statspack_text(&text, "fuzz");
    }
}
