//! AWR HTML reports (`awrrpt_*.html`, 11g and 12c+): the same figures as the
//! text parser, read from the report's tables.
//!
//! An AWR HTML report is a flat run of `<table class="tdiff" summary="…">`
//! elements, each preceded by its title: summary sections as plain text
//! between `<p />` tags (`<p />Load Profile<p />`), main-report sections as
//! `<h3 class="awr">` headings, with the `->` notes of the text report as
//! `<ul><li>` items in between (docs/awr-formats.md §2). A table is recognised
//! by its `summary` attribute where Oracle's wording is known, else by the
//! title before it, else by its column headings; columns are found by their
//! heading text, not their position, so 11g (`Wait Avg(ms)`) and 12c+ (`Avg
//! Wait`) layouts read alike. The document is tokenized with `html5gum` (a
//! WHATWG tokenizer: entities decoded, tag soup and a file cut short
//! tolerated); the table structure is rebuilt here because AWR never nests
//! its data tables. Every section found but not read, and every key section
//! missing, is named in a warning.

mod classify;
mod document;
mod readers;

use crate::model::{AwrReport, Format};
use crate::number::{parse_number, whole_u32};

use classify::{classify, Kind};
use document::Document;
use readers::{
    read_activity, read_cache_sizes, read_events, read_header_table, read_histogram, read_init_ora,
    read_io_profile, read_iostat, read_load_profile, read_wait_classes, Warnings,
};

pub(crate) use readers::{event_line, EventColumns, PARAMETERS_KEPT};

/// Read an AWR HTML report. Never fails: what could not be read is in
/// `warnings`, and a document that is not an AWR HTML report says so there.
pub fn parse_awr_html(html: &str, source: &str) -> AwrReport {
    parse_awr_html_checked(html, source).unwrap_or_else(|why| {
        let mut report = AwrReport::empty(source, Format::AwrHtml);
        let mut w = Warnings::default();
        w.report(why.to_string());
        report.warnings = w.list;
        report
    })
}

/// An HTML document that is not an AWR report: neither the `WORKLOAD
/// REPOSITORY` title, an AWR page title, nor any of AWR's tables among its
/// `tables`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an AWR HTML report: no `WORKLOAD REPOSITORY` title and none of AWR's tables among the {tables} table(s) found; give the HTML output of awrrpt.sql")]
pub struct NotAwrHtml {
    pub tables: usize,
}

/// Read an AWR HTML report, or say (one line) why the document is not one.
pub fn parse_awr_html_checked(html: &str, source: &str) -> Result<AwrReport, NotAwrHtml> {
    let doc = Document::read(html);
    let mut report = AwrReport::empty(source, Format::AwrHtml);
    let mut w = Warnings::default();

    if !doc.looks_like_awr() {
        return Err(NotAwrHtml {
            tables: doc.tables.len(),
        });
    }
    if doc.headings_contain("compare period") {
        w.report(
            "an AWR compare-periods report (awrddrpt): its tables have First/Second/Diff \
             columns and are not read; give a single-period awrrpt report"
                .into(),
        );
    }

    let seen = read_tables(&doc, &mut report, &mut w);

    if report.header.block_size.is_none() {
        report.header.block_size = report
            .parameters
            .iter()
            .find(|(k, _)| k == "db_block_size")
            .and_then(|(_, v)| parse_number(v))
            .and_then(whole_u32);
    }
    warn_missing(&doc, &report, &seen, &mut w);
    report.warnings = w.list;
    Ok(report)
}

/// Every table of `doc` read by its kind into `report`; which key sections
/// were seen.
fn read_tables(doc: &Document, report: &mut AwrReport, w: &mut Warnings) -> Seen {
    let mut seen = Seen::default();
    for table in &doc.tables {
        let kind = classify(table);
        match kind {
            Kind::Header => read_header_table(table, &mut report.header),
            Kind::CacheSizes => read_cache_sizes(table, &mut report.header),
            Kind::LoadProfile => {
                seen.load_profile = true;
                read_load_profile(table, &mut report.load_profile, w);
            }
            Kind::TopEvents => {
                seen.top = true;
                read_events(table, "Top events", &mut report.top_events, w);
            }
            Kind::Foreground => {
                seen.foreground = true;
                read_events(
                    table,
                    &table.name("Foreground Wait Events"),
                    &mut report.foreground_events,
                    w,
                );
            }
            Kind::Background => {
                seen.background = true;
                read_events(
                    table,
                    &table.name("Background Wait Events"),
                    &mut report.background_events,
                    w,
                );
            }
            Kind::WaitClasses => {
                seen.wait_classes = true;
                read_wait_classes(table, &mut report.wait_classes, w);
            }
            Kind::ForegroundWaitClass => {
                // 11.2.0.1–11.2.0.3 have no "Wait Classes by Total Wait Time";
                // their per-class split is this table. Read it only then.
                if !seen.wait_classes && report.wait_classes.is_empty() {
                    read_wait_classes(table, &mut report.wait_classes, w);
                }
            }
            Kind::Histogram => read_histogram(table, &mut report.histograms, w),
            Kind::IoProfile => read_io_profile(table, &mut report.io_profile, w),
            Kind::Activity => {
                seen.activity = true;
                read_activity(table, &mut report.instance_activity, w);
            }
            Kind::IoStatFunction => read_iostat(table, &mut report.iostat_by_function, w),
            Kind::InitOra => read_init_ora(table, &mut report.parameters, w),
            Kind::Other => {}
        }
    }
    seen
}

/// The warnings for what the report lacks: its database table, a key
/// section, its end (a file cut inside a table or before `</html>`).
fn warn_missing(doc: &Document, report: &AwrReport, seen: &Seen, w: &mut Warnings) {
    if report.header.db_name.is_none() && report.header.release.is_none() {
        w.push(
            "report header",
            0,
            "no database table (DB Name, Release) found: the header is not read".into(),
        );
    }
    for (found, name) in [
        (seen.load_profile, "Load Profile"),
        (
            seen.top,
            "Top events (Top 10 Foreground Events / Top 5 Timed Events)",
        ),
        (seen.foreground, "Foreground Wait Events"),
        (seen.background, "Background Wait Events"),
        (seen.activity, "Instance Activity Stats"),
    ] {
        if !found {
            w.push(
                name,
                0,
                format!("section `{name}` is missing from the report: its figures are unknown"),
            );
        }
    }
    if let Some((title, line)) = &doc.open_table {
        w.push(
            title,
            *line,
            format!(
                "the file ends inside the `{title}` table: the report looks truncated; \
                 rows read so far are kept"
            ),
        );
    } else if !doc.closed {
        w.report("the file ends before `</html>`: the report may be truncated".into());
    }
}

/// Which key sections a report's tables held.
#[derive(Default)]
struct Seen {
    load_profile: bool,
    top: bool,
    foreground: bool,
    background: bool,
    wait_classes: bool,
    activity: bool,
}
