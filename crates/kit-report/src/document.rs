//! The document model `summary.txt` and `report.html` both render: headings,
//! key–value fields, tables, warnings and verbatim text.
//!
//! Reports build a list of [`Block`]s once; [`text`] lays them out in aligned
//! columns for a terminal, [`html`] as HTML. Keeping the numbers in one place
//! means the two reports cannot disagree. Every string that reaches HTML goes
//! through [`escape`], here and nowhere else, so that a run, workload or file
//! name can never inject markup.

/// Column alignment: names left, numbers right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub title: Option<String>,
    pub columns: Vec<(String, Align)>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(title: Option<&str>, columns: &[(&str, Align)]) -> Self {
        Self {
            title: title.map(str::to_string),
            columns: columns
                .iter()
                .map(|(name, align)| (name.to_string(), *align))
                .collect(),
            rows: Vec::new(),
        }
    }

    /// Add a row; a short row is padded with empty cells.
    pub fn push(&mut self, mut row: Vec<String>) {
        debug_assert!(row.len() <= self.columns.len(), "row wider than its table");
        row.resize(self.columns.len(), String::new());
        self.rows.push(row);
    }

    fn text(&self, out: &mut String) {
        let mut widths: Vec<usize> = self.columns.iter().map(|(c, _)| width(c)).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(width(cell));
            }
        }
        if let Some(t) = &self.title {
            out.push_str(t);
            out.push('\n');
        }
        let line = |cells: &mut dyn Iterator<Item = &str>, out: &mut String| {
            let mut text = String::new();
            for (i, cell) in cells.enumerate() {
                if i > 0 {
                    text.push_str("  ");
                }
                let pad = " ".repeat(widths[i].saturating_sub(width(cell)));
                match self.columns[i].1 {
                    Align::Left => {
                        text.push_str(cell);
                        text.push_str(&pad);
                    }
                    Align::Right => {
                        text.push_str(&pad);
                        text.push_str(cell);
                    }
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(&mut self.columns.iter().map(|(c, _)| c.as_str()), out);
        let rules: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        line(&mut rules.iter().map(String::as_str), out);
        for row in &self.rows {
            line(&mut row.iter().map(String::as_str), out);
        }
    }

    fn html(&self, out: &mut String) {
        out.push_str("<table class=\"t\">");
        if let Some(t) = &self.title {
            out.push_str(&format!("<caption>{}</caption>", escape(t)));
        }
        out.push_str("<thead><tr>");
        for (c, align) in &self.columns {
            out.push_str(&format!(
                "<th class=\"{}\">{}</th>",
                class(*align),
                escape(c)
            ));
        }
        out.push_str("</tr></thead><tbody>");
        for row in &self.rows {
            out.push_str("<tr>");
            for (cell, (_, align)) in row.iter().zip(&self.columns) {
                out.push_str(&format!(
                    "<td class=\"{}\">{}</td>",
                    class(*align),
                    escape(cell)
                ));
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table>\n");
    }
}

fn class(align: Align) -> &'static str {
    match align {
        Align::Left => "l",
        Align::Right => "r",
    }
}

/// Display width of a cell: characters, not bytes (names may be UTF-8).
fn width(s: &str) -> usize {
    s.chars().count()
}

#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// The document's title.
    Title(String),
    /// A section (a run, the targets).
    Heading(String),
    /// `name: value` lines, the names aligned.
    Fields(Vec<(String, String)>),
    Table(Table),
    /// Something the reader must not miss (a rate not held, errors).
    Alert(String),
    /// A sentence of explanation.
    Note(String),
    /// Verbatim text (a parameter file), shown folded in HTML.
    Verbatim {
        title: String,
        text: String,
    },
    /// An `<svg>` drawn by `report::chart` (HTML only; text has the table
    /// it is drawn from).
    Chart(String),
}

/// Lay the blocks out as plain text.
pub fn text(blocks: &[Block]) -> String {
    let mut out = String::new();
    for block in blocks {
        match block {
            Block::Title(t) => {
                out.push_str(t);
                out.push('\n');
                out.push_str(&"=".repeat(width(t)));
                out.push_str("\n\n");
            }
            Block::Heading(h) => {
                out.push('\n');
                out.push_str(h);
                out.push('\n');
                out.push_str(&"-".repeat(width(h)));
                out.push_str("\n\n");
            }
            Block::Fields(fields) => {
                let w = fields.iter().map(|(k, _)| width(k)).max().unwrap_or(0);
                for (k, v) in fields {
                    let pad = " ".repeat(w - width(k));
                    out.push_str(format!("{k}:{pad}  {v}").trim_end());
                    out.push('\n');
                }
                out.push('\n');
            }
            Block::Table(t) => {
                t.text(&mut out);
                out.push('\n');
            }
            Block::Alert(a) => {
                out.push_str("*** ");
                out.push_str(a);
                out.push_str(" ***\n\n");
            }
            Block::Note(n) => {
                out.push_str(n);
                out.push_str("\n\n");
            }
            Block::Verbatim { title, text } => {
                out.push_str(title);
                out.push('\n');
                for line in text.lines() {
                    out.push_str("    ");
                    out.push_str(line);
                    out.push('\n');
                }
                out.push('\n');
            }
            Block::Chart(_) => {}
        }
    }
    out
}

/// Lay the blocks out as an HTML fragment (no `<html>` around it).
pub fn html(blocks: &[Block]) -> String {
    let mut out = String::new();
    for block in blocks {
        match block {
            Block::Title(t) => out.push_str(&format!("<h1>{}</h1>\n", escape(t))),
            Block::Heading(h) => out.push_str(&format!("<h2>{}</h2>\n", escape(h))),
            Block::Fields(fields) => {
                out.push_str("<table class=\"fields\"><tbody>");
                for (k, v) in fields {
                    out.push_str(&format!(
                        "<tr><th>{}</th><td>{}</td></tr>",
                        escape(k),
                        escape(v)
                    ));
                }
                out.push_str("</tbody></table>\n");
            }
            Block::Table(t) => t.html(&mut out),
            Block::Alert(a) => out.push_str(&format!("<p class=\"alert\">{}</p>\n", escape(a))),
            Block::Note(n) => out.push_str(&format!("<p class=\"note\">{}</p>\n", escape(n))),
            Block::Verbatim { title, text } => out.push_str(&format!(
                "<details><summary>{}</summary><pre>{}</pre></details>\n",
                escape(title),
                escape(text)
            )),
            Block::Chart(svg) => {
                out.push_str("<div class=\"charts\">");
                out.push_str(svg);
                out.push_str("</div>\n");
            }
        }
    }
    out
}

/// Escape text for HTML element content and quoted attribute values alike.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_numbers_right_and_names_left() {
        let mut t = Table::new(None, &[("name", Align::Left), ("IO/s", Align::Right)]);
        t.push(vec!["a".into(), "1.0".into()]);
        t.push(vec!["longer".into(), "12,345.0".into()]);
        let s = text(&[Block::Table(t)]);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "name        IO/s");
        assert_eq!(lines[1], "------  --------");
        assert_eq!(lines[2], "a            1.0");
        assert_eq!(lines[3], "longer  12,345.0");
    }

    #[test]
    fn markup_is_escaped_everywhere() {
        let evil = "<img src=x onerror='a()'>&\"";
        let mut t = Table::new(Some(evil), &[(evil, Align::Left)]);
        t.push(vec![evil.into()]);
        let h = html(&[
            Block::Title(evil.into()),
            Block::Fields(vec![(evil.into(), evil.into())]),
            Block::Table(t),
            Block::Alert(evil.into()),
            Block::Verbatim {
                title: evil.into(),
                text: evil.into(),
            },
        ]);
        assert!(!h.contains("<img"), "{h}");
        assert!(!h.contains("'a()'"), "{h}");
        assert!(h.contains("&lt;img src=x onerror=&#39;a()&#39;&gt;&amp;&quot;"));
    }
}
