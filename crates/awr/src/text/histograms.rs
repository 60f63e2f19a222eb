//! Wait Event Histograms.

use crate::model::{AwrReport, HistogramLine, ParseWarning};
use crate::number::parse_number;

use super::lines::{
    cut_cells, has_no_data, is_note_or_empty_marker, is_snip, rule_ranges, shorten, starts_with_ci,
    warn, Line, Section,
};

pub(super) fn read_histograms(lines: &[Line], sections: &[Section], report: &mut AwrReport) {
    for s in sections
        .iter()
        .filter(|s| starts_with_ci(&s.title, "Wait Event Histogram"))
    {
        let count = read_histogram(lines, s, report);
        if count == 0 && !has_no_data(lines, s) {
            report.warnings.push(warn(
                &s.title,
                lines[s.at].no,
                "the histogram is present but none of its rows could be read",
            ));
        }
    }
}

/// The columns of a histogram table as its last rule gives them.
struct Columns<'a> {
    /// The bucket labels (the headings past the event and its total).
    labels: Vec<String>,
    ranges: Option<Vec<(usize, usize)>>,
    /// The line of headings over the rule.
    header_line: Option<&'a str>,
}

/// The rows of one histogram section into `report`; how many were read.
fn read_histogram(lines: &[Line], s: &Section, report: &mut AwrReport) -> usize {
    let body = &lines[s.body.clone()];
    let mut columns = Columns {
        labels: Vec::new(),
        ranges: None,
        header_line: None,
    };
    let mut prev: Option<&str> = None;
    let mut count = 0;
    for l in body {
        let t = l.text.trim();
        if let Some(r) = rule_ranges(&l.text).filter(|r| r.len() >= 3) {
            columns.header_line = prev;
            columns.labels = bucket_labels(columns.header_line, &r);
            columns.ranges = Some(r);
            continue;
        }
        if !t.is_empty() {
            prev = Some(&l.text);
        }
        if columns.ranges.is_none() || t.is_empty() || is_note_or_empty_marker(t) {
            continue;
        }
        if is_snip(t) {
            report.warnings.push(warn(
                &s.title,
                l.no,
                &format!("rows were cut from the report here ({t})"),
            ));
            continue;
        }
        let Some(line) = histogram_line(&s.title, l, &columns, &mut report.warnings) else {
            continue;
        };
        report.histograms.push(line);
        count += 1;
    }
    count
}

/// The bucket labels of the headings `header_line` over the rule `r`: the
/// headings past the event and its total, cut by the rule where they line up
/// with it.
fn bucket_labels(header_line: Option<&str>, r: &[(usize, usize)]) -> Vec<String> {
    header_line
        .and_then(|h| cut_cells(h, r))
        .filter(|c| {
            let words: Vec<&str> = header_line.unwrap_or("").split_whitespace().collect();
            c[2..]
                .iter()
                .all(|x| !x.is_empty() && words.contains(&x.as_str()))
        })
        .map(|c| c[2..].to_vec())
        .or_else(|| {
            // A header out of line with its rule (pasted): its
            // last words are the bucket labels.
            let words: Vec<&str> = header_line?.split_whitespace().collect();
            let n = r.len() - 2;
            (words.len() > n).then(|| {
                words[words.len() - n..]
                    .iter()
                    .map(|w| w.to_string())
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// One histogram row `l` of the table `title`: cut by the rule where it lines
/// up with it, else read from its words. `None` (with a warning) when it is
/// not a row.
fn histogram_line(
    title: &str,
    l: &Line,
    columns: &Columns<'_>,
    warnings: &mut Vec<ParseWarning>,
) -> Option<HistogramLine> {
    let t = l.text.trim();
    let r = columns.ranges.as_deref().unwrap_or(&[]);
    let by_rule = (!columns.labels.is_empty())
        .then(|| cut_cells(&l.text, r))
        .flatten()
        .filter(|c| {
            !c[0].is_empty()
                && parse_number(&c[1]).is_some()
                && c[2..]
                    .iter()
                    .all(|x| x.is_empty() || parse_number(x).is_some())
        });
    if let Some(c) = by_rule {
        return Some(HistogramLine {
            table: title.to_string(),
            event: c[0].clone(),
            total_waits: parse_number(&c[1]),
            buckets: columns
                .labels
                .iter()
                .cloned()
                .zip(c[2..].iter().map(|x| parse_number(x)))
                .collect(),
        });
    }
    let toks: Vec<&str> = t.split_whitespace().collect();
    let first = (0..toks.len()).find(|&k| toks[k..].iter().all(|x| parse_number(x).is_some()));
    let Some(first) = first.filter(|&f| f > 0 && f < toks.len()) else {
        warnings.push(warn(
            title,
            l.no,
            &format!("`{}` is not a histogram row: skipped", shorten(t)),
        ));
        return None;
    };
    let nums: Vec<Option<f64>> = toks[first..].iter().map(|x| parse_number(x)).collect();
    let n_buckets = r.len().saturating_sub(2);
    let header_words: Vec<&str> = columns
        .header_line
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let buckets = if nums.len() == n_buckets + 1 && header_words.len() >= n_buckets {
        header_words[header_words.len() - n_buckets..]
            .iter()
            .map(|w| w.to_string())
            .zip(nums[1..].iter().copied())
            .collect()
    } else {
        warnings.push(warn(
            title,
            l.no,
            &format!(
                "`{}`: the spacing is lost and some buckets are blank, so the \
                 buckets cannot be told apart: only the total is kept",
                shorten(t)
            ),
        ));
        Vec::new()
    };
    Some(HistogramLine {
        table: title.to_string(),
        event: toks[..first].join(" "),
        total_waits: nums[0],
        buckets,
    })
}
