//! The document: the report's tables, each with its title, its `summary`
//! attribute and its rows, and the text outside them, rebuilt from
//! `html5gum`'s tokens (AWR never nests its data tables).

use html5gum::{DefaultEmitter, StartTag, Token, Tokenizer};

use crate::number::collapse;

/// More cells than any AWR table has; a `colspan` beyond it is junk.
const COLSPAN_MAX: usize = 64;

#[derive(Debug, Default)]
pub(super) struct Table {
    pub(super) summary: String,
    /// The text before the table (its section title), whitespace collapsed.
    pub(super) title: String,
    pub(super) line: usize,
    pub(super) rows: Vec<Row>,
}

#[derive(Debug, Default)]
pub(super) struct Row {
    /// Every cell is a `th`: a column heading row.
    pub(super) heading: bool,
    pub(super) cells: Vec<String>,
    pub(super) line: usize,
}

impl Table {
    /// How a warning names this table: its title, else `fallback`.
    pub(super) fn name(&self, fallback: &str) -> String {
        if self.title.is_empty() {
            fallback.to_string()
        } else {
            self.title.clone()
        }
    }

    /// The table holds only "No data exists for this section of the report.".
    pub(super) fn no_data(&self) -> bool {
        self.rows.iter().any(|r| {
            r.cells
                .first()
                .is_some_and(|c| c.starts_with("No data exists"))
        })
    }

    pub(super) fn data_rows(&self) -> impl Iterator<Item = &Row> {
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
    pub(super) fn headings(&self, width: usize) -> Vec<String> {
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
    pub(super) fn heading_cells(&self) -> Vec<String> {
        self.rows
            .iter()
            .rev()
            .find(|r| r.heading)
            .map(|r| r.cells.clone())
            .unwrap_or_default()
    }
}

#[derive(Debug, Default)]
pub(super) struct Document {
    pub(super) tables: Vec<Table>,
    /// Text outside tables, one entry per block (`h1`, `p`, `li` …).
    texts: Vec<String>,
    /// The `<title>` text.
    title: String,
    /// The table the file ended in, if it ended inside one.
    pub(super) open_table: Option<(String, usize)>,
    /// `</html>` was seen.
    pub(super) closed: bool,
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
    pub(super) fn read(html: &str) -> Document {
        let lines = LineIndex::new(html);
        let mut emitter = DefaultEmitter::<usize>::new_with_span();
        // Treat <script> and <style> bodies as text, as a browser would.
        emitter.naively_switch_states(true);
        let mut builder = Builder::default();
        for token in Tokenizer::new_with_emitter(html, emitter) {
            let token = match token {
                Ok(t) => t,
                Err(never) => match never {},
            };
            match token {
                Token::StartTag(tag) => builder.start_tag(&tag, lines.line(tag.span.start)),
                Token::EndTag(tag) => builder.end_tag(&tag.name),
                Token::String(s) => builder.string(&s),
                _ => {}
            }
        }
        builder.finish()
    }

    pub(super) fn headings_contain(&self, needle: &str) -> bool {
        self.texts
            .iter()
            .any(|t| t.to_ascii_lowercase().contains(needle))
    }

    /// The `WORKLOAD REPOSITORY` title, an `AWR` page title, or a table with
    /// one of AWR's `summary` texts.
    pub(super) fn looks_like_awr(&self) -> bool {
        self.headings_contain("workload repository")
            || self.title.to_ascii_uppercase().contains("AWR")
            || self.tables.iter().any(|t| {
                let s = t.summary.to_ascii_lowercase();
                s.contains("load profile") || s.contains("database instance information")
            })
    }
}

/// What [`Document::read`] holds between tokens: the document so far, the
/// tables open (the outermost first), the row and the cell being filled
/// (its text, whether it is a `th`, its `colspan`), and the text outside the
/// tables since the last block tag, with the title it last made.
#[derive(Default)]
struct Builder {
    doc: Document,
    stack: Vec<Table>,
    row: Option<Row>,
    cell: Option<(String, bool, usize)>,
    text: String,
    title: String,
    in_title: bool,
    in_li: bool,
    in_script: bool,
}

impl Builder {
    fn start_tag(&mut self, tag: &StartTag<usize>, line: usize) {
        let name = tag.name.to_ascii_lowercase();
        match name.as_slice() {
            b"table" => {
                flush_cell(&mut self.cell, &mut self.row);
                flush_row(&mut self.row, &mut self.stack);
                if self.stack.is_empty() {
                    flush_text(
                        &mut self.text,
                        &mut self.doc.texts,
                        &mut self.title,
                        self.in_li,
                    );
                }
                let summary = tag
                    .attributes
                    .get(b"summary".as_slice())
                    .map(|v| collapse(&String::from_utf8_lossy(v)))
                    .unwrap_or_default();
                let t = if self.stack.is_empty() {
                    std::mem::take(&mut self.title)
                } else {
                    String::new()
                };
                self.stack.push(Table {
                    summary,
                    title: t,
                    line,
                    rows: Vec::new(),
                });
            }
            b"tr" if !self.stack.is_empty() => {
                flush_cell(&mut self.cell, &mut self.row);
                flush_row(&mut self.row, &mut self.stack);
                self.row = Some(Row {
                    heading: true,
                    cells: Vec::new(),
                    line,
                });
            }
            b"td" | b"th" if !self.stack.is_empty() => {
                flush_cell(&mut self.cell, &mut self.row);
                if self.row.is_none() {
                    self.row = Some(Row {
                        heading: true,
                        cells: Vec::new(),
                        line,
                    });
                }
                let span = tag
                    .attributes
                    .get(b"colspan".as_slice())
                    .and_then(|v| String::from_utf8_lossy(v).trim().parse::<usize>().ok())
                    .unwrap_or(1)
                    .clamp(1, COLSPAN_MAX);
                if let Some(r) = self.row.as_mut() {
                    r.heading &= name.as_slice() == b"th";
                }
                self.cell = Some((String::new(), name.as_slice() == b"th", span));
            }
            b"title" => self.in_title = true,
            b"script" | b"style" => self.in_script = true,
            t if is_block(t) => {
                if let Some((c, _, _)) = self.cell.as_mut() {
                    c.push(' ');
                } else if self.stack.is_empty() {
                    flush_text(
                        &mut self.text,
                        &mut self.doc.texts,
                        &mut self.title,
                        self.in_li,
                    );
                    if t == b"li" {
                        self.in_li = true;
                    }
                }
            }
            _ => {}
        }
    }

    fn end_tag(&mut self, name: &[u8]) {
        let name = name.to_ascii_lowercase();
        match name.as_slice() {
            b"td" | b"th" => flush_cell(&mut self.cell, &mut self.row),
            b"tr" => {
                flush_cell(&mut self.cell, &mut self.row);
                flush_row(&mut self.row, &mut self.stack);
            }
            b"table" => {
                flush_cell(&mut self.cell, &mut self.row);
                flush_row(&mut self.row, &mut self.stack);
                if let Some(t) = self.stack.pop() {
                    self.doc.tables.push(t);
                }
            }
            b"title" => self.in_title = false,
            b"script" | b"style" => self.in_script = false,
            b"html" => self.doc.closed = true,
            t if is_block(t) => {
                if let Some((c, _, _)) = self.cell.as_mut() {
                    c.push(' ');
                } else if self.stack.is_empty() {
                    flush_text(
                        &mut self.text,
                        &mut self.doc.texts,
                        &mut self.title,
                        self.in_li,
                    );
                    if t == b"li" || t == b"ul" || t == b"ol" {
                        self.in_li = false;
                    }
                }
            }
            _ => {}
        }
    }

    fn string(&mut self, s: &[u8]) {
        let s = String::from_utf8_lossy(s);
        if self.in_script {
            return;
        }
        if let Some((c, _, _)) = self.cell.as_mut() {
            c.push_str(&s);
        } else if self.in_title {
            self.doc.title.push_str(&s);
        } else if self.stack.is_empty() {
            self.text.push_str(&s);
        }
    }

    /// The document, once the file has ended (perhaps inside a table).
    fn finish(mut self) -> Document {
        flush_cell(&mut self.cell, &mut self.row);
        flush_row(&mut self.row, &mut self.stack);
        flush_text(
            &mut self.text,
            &mut self.doc.texts,
            &mut self.title,
            self.in_li,
        );
        if let Some(first) = self.stack.first() {
            self.doc.open_table = Some((first.name("table"), first.line));
        }
        // Keep what the cut-off tables hold, innermost last.
        while let Some(t) = self.stack.pop() {
            self.doc.tables.push(t);
        }
        self.doc
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
}
