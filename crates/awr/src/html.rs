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

use html5gum::{DefaultEmitter, Token, Tokenizer};

use super::model::{
    AwrReport, EventLine, Format, Header, HistogramLine, IoFunctionLine, IoProfileLine,
    ParseWarning, ProfileLine, Statistic, WaitClassLine,
};
use super::number::{collapse, parse_latency_us, parse_number, parse_size_bytes, whole_u32};
use super::profile::Figure;

/// More cells than any AWR table has; a `colspan` beyond it is junk.
const COLSPAN_MAX: usize = 64;
/// Warnings about single rows of one table beyond this are summed up in one.
const ROW_WARNINGS_MAX: usize = 20;

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

    let mut seen = Seen::default();
    for table in &doc.tables {
        let kind = classify(table);
        match kind {
            Kind::Header => read_header_table(table, &mut report.header),
            Kind::CacheSizes => read_cache_sizes(table, &mut report.header),
            Kind::LoadProfile => {
                seen.load_profile = true;
                read_load_profile(table, &mut report.load_profile, &mut w);
            }
            Kind::TopEvents => {
                seen.top = true;
                read_events(table, "Top events", &mut report.top_events, &mut w);
            }
            Kind::Foreground => {
                seen.foreground = true;
                read_events(
                    table,
                    &table.name("Foreground Wait Events"),
                    &mut report.foreground_events,
                    &mut w,
                );
            }
            Kind::Background => {
                seen.background = true;
                read_events(
                    table,
                    &table.name("Background Wait Events"),
                    &mut report.background_events,
                    &mut w,
                );
            }
            Kind::WaitClasses => {
                seen.wait_classes = true;
                read_wait_classes(table, &mut report.wait_classes, &mut w);
            }
            Kind::ForegroundWaitClass => {
                // 11.2.0.1–11.2.0.3 have no "Wait Classes by Total Wait Time";
                // their per-class split is this table. Read it only then.
                if !seen.wait_classes && report.wait_classes.is_empty() {
                    read_wait_classes(table, &mut report.wait_classes, &mut w);
                }
            }
            Kind::Histogram => read_histogram(table, &mut report.histograms, &mut w),
            Kind::IoProfile => read_io_profile(table, &mut report.io_profile, &mut w),
            Kind::Activity => {
                seen.activity = true;
                read_activity(table, &mut report.instance_activity, &mut w);
            }
            Kind::IoStatFunction => read_iostat(table, &mut report.iostat_by_function, &mut w),
            Kind::InitOra => read_init_ora(table, &mut report.parameters, &mut w),
            Kind::Other => {}
        }
    }

    if report.header.block_size.is_none() {
        report.header.block_size = report
            .parameters
            .iter()
            .find(|(k, _)| k == "db_block_size")
            .and_then(|(_, v)| parse_number(v))
            .and_then(whole_u32);
    }
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
    report.warnings = w.list;
    Ok(report)
}

// ---------------------------------------------------------------------------
// The document: tables with their title and summary.

#[derive(Debug, Default)]
struct Table {
    summary: String,
    /// The text before the table (its section title), whitespace collapsed.
    title: String,
    line: usize,
    rows: Vec<Row>,
}

#[derive(Debug, Default)]
struct Row {
    /// Every cell is a `th`: a column heading row.
    heading: bool,
    cells: Vec<String>,
    line: usize,
}

impl Table {
    /// How a warning names this table: its title, else `fallback`.
    fn name(&self, fallback: &str) -> String {
        if self.title.is_empty() {
            fallback.to_string()
        } else {
            self.title.clone()
        }
    }

    /// The table holds only "No data exists for this section of the report.".
    fn no_data(&self) -> bool {
        self.rows.iter().any(|r| {
            r.cells
                .first()
                .is_some_and(|c| c.starts_with("No data exists"))
        })
    }

    fn data_rows(&self) -> impl Iterator<Item = &Row> {
        self.rows
            .iter()
            .filter(|r| !r.heading && r.cells.iter().any(|c| !c.is_empty()))
            // "No data exists for this section of the report.": present, empty.
            .filter(|r| {
                !r.cells
                    .first()
                    .is_some_and(|c| c.starts_with("No data exists"))
            })
    }

    /// The column headings, lower-cased, of the last heading row (the one
    /// nearest the data when headings are stacked), aligned to the right
    /// edge of a data row of `width` cells.
    fn headings(&self, width: usize) -> Vec<String> {
        let Some(last) = self.rows.iter().rev().find(|r| r.heading) else {
            return Vec::new();
        };
        let mut h: Vec<String> = last.cells.iter().map(|c| c.to_ascii_lowercase()).collect();
        // A first heading row spanning two rows (`Event`) leaves the second short.
        if h.len() < width {
            let missing = width - h.len();
            let mut filled = vec![String::new(); missing];
            if let Some(first) = self.rows.iter().find(|r| r.heading) {
                for (i, c) in first.cells.iter().take(missing).enumerate() {
                    filled[i] = c.to_ascii_lowercase();
                }
            }
            filled.extend(h);
            h = filled;
        }
        h
    }

    /// The heading texts as printed (for histogram bucket labels).
    fn heading_cells(&self) -> Vec<String> {
        self.rows
            .iter()
            .rev()
            .find(|r| r.heading)
            .map(|r| r.cells.clone())
            .unwrap_or_default()
    }
}

#[derive(Debug, Default)]
struct Document {
    tables: Vec<Table>,
    /// Text outside tables, one entry per block (`h1`, `p`, `li` …).
    texts: Vec<String>,
    /// The `<title>` text.
    title: String,
    /// The table the file ended in, if it ended inside one.
    open_table: Option<(String, usize)>,
    /// `</html>` was seen.
    closed: bool,
}

/// Tags that end a run of text outside a table (and separate a cell's text inside one).
fn is_block(tag: &[u8]) -> bool {
    matches!(
        tag,
        b"p" | b"br"
            | b"h1"
            | b"h2"
            | b"h3"
            | b"h4"
            | b"h5"
            | b"h6"
            | b"ul"
            | b"ol"
            | b"li"
            | b"div"
            | b"hr"
            | b"body"
            | b"caption"
            | b"center"
    )
}

impl Document {
    fn read(html: &str) -> Document {
        let lines = LineIndex::new(html);
        let mut emitter = DefaultEmitter::<usize>::new_with_span();
        // Treat <script> and <style> bodies as text, as a browser would.
        emitter.naively_switch_states(true);
        let mut doc = Document::default();
        let mut stack: Vec<Table> = Vec::new();
        let mut row: Option<Row> = None;
        let mut cell: Option<(String, bool, usize)> = None;
        let mut text = String::new();
        let mut title = String::new();
        let mut in_title = false;
        let mut in_li = false;
        let mut in_script = false;

        for token in Tokenizer::new_with_emitter(html, emitter) {
            let token = match token {
                Ok(t) => t,
                Err(never) => match never {},
            };
            match token {
                Token::StartTag(tag) => {
                    let name = tag.name.to_ascii_lowercase();
                    let line = lines.line(tag.span.start);
                    match name.as_slice() {
                        b"table" => {
                            flush_cell(&mut cell, &mut row);
                            flush_row(&mut row, &mut stack);
                            if stack.is_empty() {
                                flush_text(&mut text, &mut doc.texts, &mut title, in_li);
                            }
                            let summary = tag
                                .attributes
                                .get(b"summary".as_slice())
                                .map(|v| collapse(&String::from_utf8_lossy(v)))
                                .unwrap_or_default();
                            let t = if stack.is_empty() {
                                std::mem::take(&mut title)
                            } else {
                                String::new()
                            };
                            stack.push(Table {
                                summary,
                                title: t,
                                line,
                                rows: Vec::new(),
                            });
                        }
                        b"tr" if !stack.is_empty() => {
                            flush_cell(&mut cell, &mut row);
                            flush_row(&mut row, &mut stack);
                            row = Some(Row {
                                heading: true,
                                cells: Vec::new(),
                                line,
                            });
                        }
                        b"td" | b"th" if !stack.is_empty() => {
                            flush_cell(&mut cell, &mut row);
                            if row.is_none() {
                                row = Some(Row {
                                    heading: true,
                                    cells: Vec::new(),
                                    line,
                                });
                            }
                            let span = tag
                                .attributes
                                .get(b"colspan".as_slice())
                                .and_then(|v| {
                                    String::from_utf8_lossy(v).trim().parse::<usize>().ok()
                                })
                                .unwrap_or(1)
                                .clamp(1, COLSPAN_MAX);
                            if let Some(r) = row.as_mut() {
                                r.heading &= name.as_slice() == b"th";
                            }
                            cell = Some((String::new(), name.as_slice() == b"th", span));
                        }
                        b"title" => in_title = true,
                        b"script" | b"style" => in_script = true,
                        t if is_block(t) => {
                            if let Some((c, _, _)) = cell.as_mut() {
                                c.push(' ');
                            } else if stack.is_empty() {
                                flush_text(&mut text, &mut doc.texts, &mut title, in_li);
                                if t == b"li" {
                                    in_li = true;
                                }
                            }
                        }
                        _ => {}
                    }
                }
                Token::EndTag(tag) => {
                    let name = tag.name.to_ascii_lowercase();
                    match name.as_slice() {
                        b"td" | b"th" => flush_cell(&mut cell, &mut row),
                        b"tr" => {
                            flush_cell(&mut cell, &mut row);
                            flush_row(&mut row, &mut stack);
                        }
                        b"table" => {
                            flush_cell(&mut cell, &mut row);
                            flush_row(&mut row, &mut stack);
                            if let Some(t) = stack.pop() {
                                doc.tables.push(t);
                            }
                        }
                        b"title" => in_title = false,
                        b"script" | b"style" => in_script = false,
                        b"html" => doc.closed = true,
                        t if is_block(t) => {
                            if let Some((c, _, _)) = cell.as_mut() {
                                c.push(' ');
                            } else if stack.is_empty() {
                                flush_text(&mut text, &mut doc.texts, &mut title, in_li);
                                if t == b"li" || t == b"ul" || t == b"ol" {
                                    in_li = false;
                                }
                            }
                        }
                        _ => {}
                    }
                }
                Token::String(s) => {
                    let s = String::from_utf8_lossy(&s);
                    if in_script {
                        continue;
                    }
                    if let Some((c, _, _)) = cell.as_mut() {
                        c.push_str(&s);
                    } else if in_title {
                        doc.title.push_str(&s);
                    } else if stack.is_empty() {
                        text.push_str(&s);
                    }
                }
                _ => {}
            }
        }
        flush_cell(&mut cell, &mut row);
        flush_row(&mut row, &mut stack);
        flush_text(&mut text, &mut doc.texts, &mut title, in_li);
        if let Some(first) = stack.first() {
            doc.open_table = Some((first.name("table"), first.line));
        }
        // Keep what the cut-off tables hold, innermost last.
        while let Some(t) = stack.pop() {
            doc.tables.push(t);
        }
        doc
    }

    fn headings_contain(&self, needle: &str) -> bool {
        self.texts
            .iter()
            .any(|t| t.to_ascii_lowercase().contains(needle))
    }

    /// The `WORKLOAD REPOSITORY` title, an `AWR` page title, or a table with
    /// one of AWR's `summary` texts.
    fn looks_like_awr(&self) -> bool {
        self.headings_contain("workload repository")
            || self.title.to_ascii_uppercase().contains("AWR")
            || self.tables.iter().any(|t| {
                let s = t.summary.to_ascii_lowercase();
                s.contains("load profile") || s.contains("database instance information")
            })
    }
}

fn flush_cell(cell: &mut Option<(String, bool, usize)>, row: &mut Option<Row>) {
    if let Some((text, _, span)) = cell.take() {
        let r = row.get_or_insert_with(Row::default);
        r.cells.push(collapse(&text));
        for _ in 1..span {
            r.cells.push(String::new());
        }
    }
}

fn flush_row(row: &mut Option<Row>, stack: &mut [Table]) {
    if let (Some(r), Some(t)) = (row.take(), stack.last_mut()) {
        if !r.cells.is_empty() {
            t.rows.push(r);
        }
    }
}

/// End a run of text outside the tables; a non-note, non-navigation text is
/// the title of the next table.
fn flush_text(text: &mut String, texts: &mut Vec<String>, title: &mut String, in_li: bool) {
    let t = collapse(text);
    text.clear();
    if t.is_empty() {
        return;
    }
    if !in_li && !t.starts_with("Back to") {
        *title = t.clone();
    }
    texts.push(t);
}

/// Trim and collapse whitespace, non-breaking spaces (`&#160;`, `&nbsp;`) included.
/// Byte offset → 1-based line.
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(s: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(
            s.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        Self { starts }
    }

    fn line(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i.max(1),
        }
    }
}

// ---------------------------------------------------------------------------
// Which section a table is.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Header,
    CacheSizes,
    LoadProfile,
    TopEvents,
    Foreground,
    Background,
    WaitClasses,
    ForegroundWaitClass,
    Histogram,
    IoProfile,
    Activity,
    IoStatFunction,
    InitOra,
    Other,
}

#[derive(Default)]
struct Seen {
    load_profile: bool,
    top: bool,
    foreground: bool,
    background: bool,
    wait_classes: bool,
    activity: bool,
}

fn classify(t: &Table) -> Kind {
    let s = t.summary.to_ascii_lowercase();
    let title = t.title.to_ascii_lowercase();
    let first_heading = t
        .rows
        .iter()
        .find(|r| r.heading)
        .map(|r| {
            r.cells
                .iter()
                .map(|c| c.to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let has_heading = |h: &str| first_heading.iter().any(|c| c == h);

    if s.contains("database instance information")
        || s.contains("instance information")
        || s.contains("host information")
        || s.contains("snapshot information")
        || s.contains("container information")
        || has_heading("db name")
        || has_heading("host name")
        || has_heading("snap id")
    {
        return Kind::Header;
    }
    if s.contains("cache sizes") || title.starts_with("cache sizes") {
        return Kind::CacheSizes;
    }
    if s.contains("load profile") && !s.contains("io profile") {
        return Kind::LoadProfile;
    }
    if s.contains("top 10 wait events")
        || s.contains("top 5 timed")
        || title.starts_with("top 5 timed")
        || title.starts_with("top 10 foreground events")
    {
        return Kind::TopEvents;
    }
    if s.contains("wait class statistics ordered by total wait time")
        || title.starts_with("wait classes by total wait time")
    {
        return Kind::WaitClasses;
    }
    if s.contains("foreground wait class") || title == "foreground wait class" {
        return Kind::ForegroundWaitClass;
    }
    if s.contains("foreground wait events") || title == "foreground wait events" {
        return Kind::Foreground;
    }
    if s.contains("background wait events") || title == "background wait events" {
        return Kind::Background;
    }
    if title.starts_with("wait event histogram") || (s.contains("histogram") && s.contains("wait"))
    {
        return Kind::Histogram;
    }
    if title.starts_with("io profile")
        || s.contains("io profile")
        || first_heading.iter().any(|h| h.starts_with("read+write"))
    {
        return Kind::IoProfile;
    }
    let activity_title = matches!(
        title.as_str(),
        "instance activity stats" | "key instance activity stats" | "other instance activity stats"
    );
    if activity_title
        || (s.contains("instance activity stat")
            && !s.contains("absolute")
            && !s.contains("thread"))
    {
        return Kind::Activity;
    }
    if title == "iostat by function summary"
        || (s.contains("iostat by function") && !s.contains("filetype"))
    {
        return Kind::IoStatFunction;
    }
    if title.starts_with("init.ora parameters")
        || title.starts_with("parameters modified by")
        || s.contains("init.ora")
    {
        return Kind::InitOra;
    }
    if s.starts_with("load profile") || title == "load profile" {
        return Kind::LoadProfile;
    }
    Kind::Other
}

// ---------------------------------------------------------------------------
// Readers, one per kind.

#[derive(Default)]
struct Warnings {
    list: Vec<ParseWarning>,
}

impl Warnings {
    fn push(&mut self, section: &str, line: usize, message: String) {
        self.list.push(ParseWarning {
            section: section.to_string(),
            line,
            message,
        });
    }

    fn report(&mut self, message: String) {
        self.push("report", 0, message);
    }

    /// One warning per skipped row, up to [`ROW_WARNINGS_MAX`], then a count.
    fn rows(&mut self, section: &str, skipped: &[(usize, String)]) {
        for (line, what) in skipped.iter().take(ROW_WARNINGS_MAX) {
            self.push(
                section,
                *line,
                format!("row `{what}` could not be read: skipped"),
            );
        }
        if skipped.len() > ROW_WARNINGS_MAX {
            self.push(
                section,
                0,
                format!(
                    "{} more rows could not be read: skipped",
                    skipped.len() - ROW_WARNINGS_MAX
                ),
            );
        }
    }

    fn empty(&mut self, section: &str, line: usize) {
        self.push(
            section,
            line,
            format!("section `{section}` is present but no row of it could be read"),
        );
    }
}

fn cell(r: &Row, i: usize) -> &str {
    r.cells.get(i).map_or("", String::as_str)
}

fn to_u64(s: &str) -> Option<u64> {
    s.trim().replace(',', "").parse::<u64>().ok()
}

fn label(s: &str) -> String {
    s.trim().trim_end_matches(':').trim().to_string()
}

fn read_header_table(t: &Table, h: &mut Header) {
    let width = t.rows.iter().map(|r| r.cells.len()).max().unwrap_or(0);
    let headings = t.headings(width);
    for r in t.data_rows() {
        let first = label(cell(r, 0)).to_ascii_lowercase();
        let later: Vec<&str> = r
            .cells
            .iter()
            .skip(1)
            .map(String::as_str)
            .filter(|c| !c.is_empty())
            .collect();
        let first_number = || {
            later
                .iter()
                .find_map(|c| c.split_whitespace().next().and_then(parse_number))
        };
        match first.as_str() {
            "begin snap" => {
                h.begin_snap_id = h
                    .begin_snap_id
                    .or_else(|| later.first().and_then(|c| to_u64(c)));
                h.begin_snap_time = h
                    .begin_snap_time
                    .clone()
                    .or_else(|| later.get(1).map(|c| c.to_string()));
                continue;
            }
            "end snap" => {
                h.end_snap_id = h
                    .end_snap_id
                    .or_else(|| later.first().and_then(|c| to_u64(c)));
                h.end_snap_time = h
                    .end_snap_time
                    .clone()
                    .or_else(|| later.get(1).map(|c| c.to_string()));
                continue;
            }
            "elapsed" => {
                h.elapsed_min = h.elapsed_min.or_else(first_number);
                continue;
            }
            "db time" => {
                h.db_time_min = h.db_time_min.or_else(first_number);
                continue;
            }
            _ => {}
        }
        for (i, name) in headings.iter().enumerate() {
            let v = cell(r, i).trim();
            if v.is_empty() {
                continue;
            }
            let text = || Some(v.to_string());
            let yes = || Some(v.eq_ignore_ascii_case("yes"));
            let num = || parse_number(v).and_then(whole_u32);
            match name.as_str() {
                "db name" => h.db_name = h.db_name.clone().or_else(text),
                "db id" => h.db_id = h.db_id.or_else(|| to_u64(v)),
                "instance" => h.instance = h.instance.clone().or_else(text),
                "inst num" | "inst num." | "instance number" => {
                    h.instance_number = h.instance_number.or_else(num)
                }
                "release" => h.release = h.release.clone().or_else(text),
                "rac" => h.rac = h.rac.or_else(yes),
                "cdb" => h.cdb = h.cdb.or_else(yes),
                "container name" => h.container = h.container.clone().or_else(text),
                "host name" | "host" => h.host = h.host.clone().or_else(text),
                "platform" => h.platform = h.platform.clone().or_else(text),
                "cpus" => h.cpus = h.cpus.or_else(num),
                "cores" => h.cores = h.cores.or_else(num),
                "sockets" => h.sockets = h.sockets.or_else(num),
                "memory (gb)" | "memory(gb)" | "memory (g)" => {
                    h.memory_gb = h.memory_gb.or_else(|| parse_number(v))
                }
                _ => {}
            }
        }
    }
}

fn read_cache_sizes(t: &Table, h: &mut Header) {
    for r in t.data_rows() {
        for (i, c) in r.cells.iter().enumerate() {
            if label(c).eq_ignore_ascii_case("std block size") {
                if let Some(v) = parse_size_bytes(cell(r, i + 1)).and_then(whole_u32) {
                    h.block_size = h.block_size.or(Some(v));
                }
            }
        }
    }
}

fn read_load_profile(t: &Table, out: &mut Vec<ProfileLine>, w: &mut Warnings) {
    let section = "Load Profile";
    let mut skipped = Vec::new();
    let mut known = 0;
    let before = out.len();
    for r in t.data_rows() {
        let name = label(cell(r, 0));
        let cells: Vec<&str> = r.cells.iter().skip(1).map(String::as_str).collect();
        let values: Vec<Option<f64>> = cells.iter().map(|c| parse_number(c)).collect();
        let unreadable = cells
            .iter()
            .zip(&values)
            .any(|(c, v)| !c.is_empty() && v.is_none());
        if name.is_empty() || values.iter().all(Option::is_none) || unreadable {
            skipped.push((r.line, r.cells.join(" | ")));
            continue;
        }
        if Figure::from_label(&name).is_some() {
            known += 1;
        }
        let get = |k: usize| values.get(k).copied().flatten();
        out.push(ProfileLine {
            label: name,
            per_second: get(0),
            per_transaction: get(1),
            per_exec: get(2),
            per_call: get(3),
        });
    }
    w.rows(section, &skipped);
    if out.len() == before {
        w.empty(section, t.line);
    } else if known == 0 {
        w.push(
            section,
            t.line,
            "none of the Load Profile labels is one Cairn knows (DB Time(s), Redo size, \
             Physical reads …): its figures are kept by label only"
                .into(),
        );
    }
}

/// Where an event or wait-class table keeps each figure, by column heading.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct EventColumns {
    pub waits: Option<usize>,
    pub time_s: Option<usize>,
    pub avg: Option<usize>,
    pub pct_db_time: Option<usize>,
    pub class: Option<usize>,
}

impl EventColumns {
    /// From headings (any case, whitespace collapsed); the name is column 0.
    /// `% bg time` (Background Wait Events) is not a share of DB time and is
    /// left out; `%Time -outs`, `Waits /txn` are not figures the model keeps.
    pub(super) fn from_headings(headings: &[String]) -> EventColumns {
        let mut c = EventColumns::default();
        for (i, h) in headings.iter().enumerate().skip(1) {
            let h = h
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_ascii_lowercase();
            let set = |slot: &mut Option<usize>| {
                if slot.is_none() {
                    *slot = Some(i);
                }
            };
            if h == "waits" || h == "total waits" {
                set(&mut c.waits);
            } else if h.contains("avg") && !h.contains("active") {
                set(&mut c.avg);
            } else if h.starts_with('%') && (h.contains("db time") || h.contains("call time")) {
                set(&mut c.pct_db_time);
            } else if h.contains("time")
                && (h.contains("(s)") || h.contains("(sec)"))
                && !h.starts_with('%')
            {
                set(&mut c.time_s);
            } else if h == "wait class" || h == "class" {
                set(&mut c.class);
            }
        }
        c
    }

    /// The 11.2.0.4 Top 10 layout, for a table printed without headings.
    fn top_default() -> EventColumns {
        EventColumns {
            waits: Some(1),
            time_s: Some(2),
            avg: Some(3),
            pct_db_time: Some(4),
            class: Some(5),
        }
    }

    pub(super) fn has_figures(&self) -> bool {
        self.waits.is_some() || self.time_s.is_some()
    }
}

/// An event line from its cells, or `None` when the name is empty or a
/// figure cell holds text that is not a number.
pub(super) fn event_line(cells: &[&str], c: &EventColumns) -> Option<EventLine> {
    let event = cells.first()?.trim();
    if event.is_empty() {
        return None;
    }
    let get = |i: Option<usize>| i.and_then(|i| cells.get(i)).map_or("", |s| s.trim());
    let number = |i: Option<usize>| -> Result<Option<f64>, ()> {
        let s = get(i);
        match parse_number(s) {
            Some(v) => Ok(Some(v)),
            None if s.is_empty()
                || s.eq_ignore_ascii_case("n/a")
                || s.chars().all(|c| c == '#') =>
            {
                Ok(None)
            }
            None => Err(()),
        }
    };
    let waits = number(c.waits).ok()?;
    let total_wait_s = number(c.time_s).ok()?;
    let pct_db_time = number(c.pct_db_time).ok()?;
    let avg_text = get(c.avg);
    let avg_wait_us = parse_latency_us(avg_text, 1000.0);
    if avg_wait_us.is_none()
        && !avg_text.is_empty()
        && parse_number(avg_text).is_none()
        && !avg_text.eq_ignore_ascii_case("n/a")
    {
        return None;
    }
    if waits.is_none() && total_wait_s.is_none() && pct_db_time.is_none() {
        return None;
    }
    let class = get(c.class);
    Some(EventLine {
        event: event.to_string(),
        waits,
        total_wait_s,
        avg_wait_us,
        pct_db_time,
        wait_class: (!class.is_empty()).then(|| class.to_string()),
    })
}

fn read_events(t: &Table, section: &str, out: &mut Vec<EventLine>, w: &mut Warnings) {
    let width = t.data_rows().map(|r| r.cells.len()).max().unwrap_or(0);
    let mut cols = EventColumns::from_headings(&t.headings(width));
    if !cols.has_figures() {
        if width == 6 {
            cols = EventColumns::top_default();
        } else {
            w.push(
                section,
                t.line,
                format!("section `{section}` has no Waits or Time column heading: not read"),
            );
            return;
        }
    }
    let before = out.len();
    let mut skipped = Vec::new();
    for r in t.data_rows() {
        let cells: Vec<&str> = r.cells.iter().map(String::as_str).collect();
        match event_line(&cells, &cols) {
            Some(e) => out.push(e),
            None => skipped.push((r.line, r.cells.join(" | "))),
        }
    }
    w.rows(section, &skipped);
    if out.len() == before {
        w.empty(section, t.line);
    }
}

fn read_wait_classes(t: &Table, out: &mut Vec<WaitClassLine>, w: &mut Warnings) {
    let section = t.name("Wait Classes by Total Wait Time");
    let width = t.data_rows().map(|r| r.cells.len()).max().unwrap_or(0);
    let mut cols = EventColumns::from_headings(&t.headings(width));
    cols.class = None;
    if !cols.has_figures() {
        w.push(
            &section,
            t.line,
            format!("section `{section}` has no Waits or Time column heading: not read"),
        );
        return;
    }
    let before = out.len();
    let mut skipped = Vec::new();
    for r in t.data_rows() {
        let cells: Vec<&str> = r.cells.iter().map(String::as_str).collect();
        match event_line(&cells, &cols) {
            Some(e) => out.push(WaitClassLine {
                wait_class: e.event,
                waits: e.waits,
                total_wait_s: e.total_wait_s,
                avg_wait_us: e.avg_wait_us,
                pct_db_time: e.pct_db_time,
            }),
            None => skipped.push((r.line, r.cells.join(" | "))),
        }
    }
    w.rows(&section, &skipped);
    if out.len() == before {
        w.empty(&section, t.line);
    }
}

fn read_histogram(t: &Table, out: &mut Vec<HistogramLine>, w: &mut Warnings) {
    let title = t.name("Wait Event Histogram");
    let width = t.data_rows().map(|r| r.cells.len()).max().unwrap_or(0);
    if width < 3 {
        if !t.no_data() {
            w.empty(&title, t.line);
        }
        return;
    }
    let headings = t.heading_cells();
    let buckets = width - 2;
    // The bucket labels are the last `buckets` headings of the row nearest the data.
    let labels: Vec<String> = (0..buckets)
        .map(|i| {
            let k = (headings.len() + i).checked_sub(buckets);
            k.and_then(|k| headings.get(k))
                .cloned()
                .unwrap_or_else(|| format!("bucket {}", i + 1))
        })
        .collect();
    let before = out.len();
    let mut skipped = Vec::new();
    for r in t.data_rows() {
        let event = cell(r, 0).trim();
        let total = cell(r, 1);
        let values: Vec<Option<f64>> = (0..buckets).map(|i| parse_number(cell(r, i + 2))).collect();
        let bad = (0..buckets).any(|i| !cell(r, i + 2).is_empty() && values[i].is_none())
            || (!total.is_empty() && parse_number(total).is_none());
        if event.is_empty() || bad {
            skipped.push((r.line, r.cells.join(" | ")));
            continue;
        }
        out.push(HistogramLine {
            table: title.clone(),
            event: event.to_string(),
            total_waits: parse_number(total),
            buckets: labels.iter().cloned().zip(values).collect(),
        });
    }
    w.rows(&title, &skipped);
    if out.len() == before && !t.no_data() {
        w.empty(&title, t.line);
    }
}

fn read_io_profile(t: &Table, out: &mut Vec<IoProfileLine>, w: &mut Warnings) {
    let section = "IO Profile";
    let before = out.len();
    let mut skipped = Vec::new();
    for r in t.data_rows() {
        let name = label(cell(r, 0));
        let v: Vec<Option<f64>> = (1..=3).map(|i| parse_number(cell(r, i))).collect();
        let bad = (1..=3).any(|i| !cell(r, i).is_empty() && v[i - 1].is_none());
        if name.is_empty() || bad {
            skipped.push((r.line, r.cells.join(" | ")));
            continue;
        }
        // A PDB report prints the Redo rows with blank cells: kept, all `None`.
        out.push(IoProfileLine {
            label: name,
            read_write_per_s: v[0],
            read_per_s: v[1],
            write_per_s: v[2],
        });
    }
    w.rows(section, &skipped);
    if out.len() == before {
        w.empty(section, t.line);
    }
}

fn read_activity(t: &Table, out: &mut Vec<Statistic>, w: &mut Warnings) {
    let section = t.name("Instance Activity Stats");
    let mut read = 0;
    let mut skipped = Vec::new();
    for r in t.data_rows() {
        let name = cell(r, 0).trim();
        let v: Vec<Option<f64>> = (1..=3).map(|i| parse_number(cell(r, i))).collect();
        let is_blank =
            |s: &str| s.is_empty() || s.eq_ignore_ascii_case("n/a") || s.chars().all(|c| c == '#');
        let bad = (1..=3).any(|i| !is_blank(cell(r, i)) && v[i - 1].is_none());
        if name.is_empty() || bad || v.iter().all(Option::is_none) {
            skipped.push((r.line, r.cells.join(" | ")));
            continue;
        }
        read += 1;
        let s = Statistic {
            name: name.to_string(),
            total: v[0],
            per_second: v[1],
            per_trans: v[2],
        };
        // "Key Instance Activity Stats" repeats rows of the full table.
        if !out.contains(&s) {
            out.push(s);
        }
    }
    w.rows(&section, &skipped);
    if read == 0 {
        w.empty(&section, t.line);
    }
}

/// A MiB figure of IOStat: `M`/`G`/`T`/`P` in powers of 1024 of MiB, `K` a
/// KiB fraction; a bare number is MiB (11.2's `Data per sec`).
fn mib(cell: &str) -> Option<f64> {
    let t = cell.trim();
    let (body, scale) = match t.chars().last()? {
        'K' | 'k' => (&t[..t.len() - 1], 1.0 / 1024.0),
        'M' | 'm' => (&t[..t.len() - 1], 1.0),
        'G' | 'g' => (&t[..t.len() - 1], 1024.0),
        'T' | 't' => (&t[..t.len() - 1], 1024.0 * 1024.0),
        'P' | 'p' => (&t[..t.len() - 1], 1024.0 * 1024.0 * 1024.0),
        _ => (t, 1.0),
    };
    // The body must be a plain number (no second suffix).
    let v = parse_number(body)?;
    body.trim()
        .ends_with(|c: char| c.is_ascii_digit() || c == '.')
        .then_some(v * scale)
}

/// An IOStat by Function row from its nine cells: function, read data (MiB),
/// read requests/s, read MiB/s, write data (MiB), write requests/s, write
/// MiB/s, waits count, average wait (µs). Shared with the Statspack reader.
pub(super) fn iostat_line(cells: &[&str]) -> Option<IoFunctionLine> {
    let function = cells.first()?.trim();
    if function.is_empty() || cells.len() < 9 {
        return None;
    }
    let ok = |s: &str, v: Option<f64>| {
        v.is_some() || s.trim().is_empty() || s.trim().eq_ignore_ascii_case("n/a")
    };
    let m = |i: usize| mib(cells[i]);
    let n = |i: usize| parse_number(cells[i]);
    let avg = parse_latency_us(cells[8], 1000.0);
    let line = IoFunctionLine {
        function: function.to_string(),
        reads_data: m(1),
        reqs_per_sec_read: n(2),
        data_per_sec_read: m(3),
        writes_data: m(4),
        reqs_per_sec_write: n(5),
        data_per_sec_write: m(6),
        waits_count: n(7),
        avg_time: avg,
    };
    let all_ok = ok(cells[1], line.reads_data)
        && ok(cells[2], line.reqs_per_sec_read)
        && ok(cells[3], line.data_per_sec_read)
        && ok(cells[4], line.writes_data)
        && ok(cells[5], line.reqs_per_sec_write)
        && ok(cells[6], line.data_per_sec_write)
        && ok(cells[7], line.waits_count)
        && ok(cells[8], line.avg_time);
    all_ok.then_some(line)
}

fn read_iostat(t: &Table, out: &mut Vec<IoFunctionLine>, w: &mut Warnings) {
    let section = "IOStat by Function summary";
    let before = out.len();
    let mut skipped = Vec::new();
    for r in t.data_rows() {
        let cells: Vec<&str> = r.cells.iter().map(String::as_str).collect();
        match iostat_line(&cells) {
            Some(l) => out.push(l),
            None => skipped.push((r.line, r.cells.join(" | "))),
        }
    }
    w.rows(section, &skipped);
    if out.len() == before {
        w.empty(section, t.line);
    }
}

/// The init.ora parameters the derivation needs, as printed.
pub(super) const PARAMETERS_KEPT: [&str; 2] = ["db_block_size", "db_file_multiblock_read_count"];

fn read_init_ora(t: &Table, out: &mut Vec<(String, String)>, w: &mut Warnings) {
    let mut rows = 0;
    for r in t.data_rows() {
        rows += 1;
        let name = cell(r, 0).trim().to_ascii_lowercase();
        let value = cell(r, 1).trim();
        if PARAMETERS_KEPT.contains(&name.as_str())
            && !value.is_empty()
            && !out.iter().any(|(k, _)| *k == name)
        {
            out.push((name, value.to_string()));
        }
    }
    if rows == 0 {
        w.empty(&t.name("init.ora Parameters"), t.line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_index_counts_from_one() {
        let l = LineIndex::new("a\nbc\n\nd");
        assert_eq!(
            (l.line(0), l.line(2), l.line(3), l.line(5), l.line(6)),
            (1, 2, 2, 3, 4)
        );
    }

    #[test]
    fn iostat_data_cells_are_mib() {
        assert_eq!(mib("2.8G"), Some(2.8 * 1024.0));
        assert_eq!(mib(".801M"), Some(0.801));
        assert_eq!(mib("1.02309"), Some(1.02309));
        assert_eq!(mib("12KM"), None);
        assert_eq!(mib(""), None);
    }

    #[test]
    fn event_headings_of_both_generations_map_to_the_same_figures() {
        let h11: Vec<String> = [
            "Event",
            "Waits",
            "Total Wait Time (sec)",
            "Wait Avg(ms)",
            "% DB time",
            "Wait Class",
        ]
        .map(String::from)
        .to_vec();
        let h12: Vec<String> = [
            "Event",
            "Waits",
            "%Time -outs",
            "Total Wait Time (s)",
            "Avg wait",
            "Waits /txn",
            "% DB time",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            EventColumns::from_headings(&h11),
            EventColumns::top_default()
        );
        let c = EventColumns::from_headings(&h12);
        assert_eq!(
            (c.waits, c.time_s, c.avg, c.pct_db_time, c.class),
            (Some(1), Some(3), Some(4), Some(6), None)
        );
    }
}
