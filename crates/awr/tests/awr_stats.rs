//! The Instance Activity Stats table of an AWR or Statspack text report, read
//! from the real fragment of the "To POC or Not To POC?" post (a bank's AWR
//! report, with the author's `<SNIP>` marks), from the same lines pasted with
//! their alignment lost, and from damaged lines.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use cairn_awr::stats::{read_stat_tables, StatRow};

const BANK: &str = include_str!("data/awr/bank_fragment.txt");

fn get<'a>(rows: &'a [StatRow], name: &str) -> &'a StatRow {
    rows.iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no row {name:?}"))
}

#[test]
fn the_bank_fragment_reads_whole_with_its_truncated_names() {
    let (rows, warnings) = read_stat_tables(BANK);
    assert_eq!(rows.len(), 22, "{rows:#?}");
    let r = get(&rows, "physical read total IO requests");
    assert_eq!(
        (r.total, r.per_second, r.per_trans),
        (Some(55_479_809.0), Some(7_707.3), Some(1_183.9))
    );
    assert_eq!(r.line, 8);
    let bytes = get(&rows, "physical read total bytes");
    assert_eq!(bytes.total, Some(1.938706428365e13));
    assert_eq!(bytes.per_second, Some(2.69327251e9));
    // Names cut to the 32-character column are kept as printed.
    let cut = get(&rows, "physical read total bytes optimi");
    assert_eq!(cut.per_second, Some(2.46345082e9));
    assert_eq!(get(&rows, "physical reads direct (lob)").total, Some(22.0));
    assert_eq!(get(&rows, "redo writes").per_second, Some(47.4));
    // The author's cuts are named, not silently skipped.
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings.iter().all(|w| w.message.contains("<SNIP>")));
    assert_eq!(warnings[0].line, 3);
}

#[test]
fn the_issues_totals_come_out_of_the_bank_fragment() {
    let (rows, _) = read_stat_tables(BANK);
    let per_s = |n: &str| get(&rows, n).per_second.unwrap();
    let mib = 1024.0 * 1024.0;
    let within = |got: f64, want: f64| (got / want - 1.0).abs() < 0.05;
    assert!(within(per_s("physical read total IO requests"), 7_707.0));
    assert!(within(per_s("physical write total IO requests"), 5_204.0));
    assert!(within(per_s("physical read total bytes") / mib, 2_566.0));
    assert!(within(per_s("physical write total bytes") / mib, 650.0));
    assert!(within(per_s("redo writes"), 47.0));
}

#[test]
fn a_pasted_copy_with_collapsed_spaces_and_unicode_rules_reads_the_same() {
    let pasted: String = BANK
        .lines()
        .map(|l| {
            if l.starts_with("----") {
                l.replace('-', "\u{2014}")
            } else {
                l.split_whitespace().collect::<Vec<_>>().join(" ")
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let (aligned, _) = read_stat_tables(BANK);
    let (rows, _) = read_stat_tables(&pasted);
    assert_eq!(rows.len(), aligned.len());
    for (a, b) in aligned.iter().zip(&rows) {
        assert_eq!(
            (&a.name, a.total, a.per_second, a.per_trans),
            (&b.name, b.total, b.per_second, b.per_trans)
        );
    }
}

#[test]
fn damaged_rows_are_warned_about_with_their_line_and_nothing_else_is_lost() {
    let text = "Statistic                                     Total     per Second     per Trans\n\
-------------------------------- ------------------ -------------- -------------\n\
redo size                           123,456            12.3           1.2\n\
redo writes                         ########           47.4           7.3\n\
user commits                           1,000      wrapped\n\
execute count                          5,000            0.5           0.1\n";
    let (rows, warnings) = read_stat_tables(text);
    assert_eq!(rows.len(), 3, "{rows:#?}");
    assert_eq!(
        get(&rows, "redo writes").total,
        None,
        "an overflow marker is no value"
    );
    assert_eq!(get(&rows, "redo writes").per_second, Some(47.4));
    assert_eq!(get(&rows, "execute count").total, Some(5000.0));
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].line, 5);
    assert!(
        warnings[0].message.contains("user commits"),
        "{}",
        warnings[0].message
    );
}

#[test]
fn text_without_a_statistics_table_gives_nothing_and_never_panics() {
    for text in [
        "",
        "hello\nworld",
        "Statistic Total per Second per Trans\n",
        "Statistic   Total  per Second  per Trans\n-----\n\u{0}\u{ffff}",
    ] {
        let (rows, _) = read_stat_tables(text);
        assert!(rows.is_empty(), "{text:?}");
    }
}

proptest::proptest! {
    #[test]
    fn any_text_after_a_header_never_panics(body in "\\PC{0,300}") {
        let text = format!("Statistic  Total  per Second  per Trans\n----- ----- -----\n{body}");
        let (rows, warnings) = read_stat_tables(&text);
        for r in &rows {
            proptest::prop_assert!(r.line >= 3);
        }
        for w in &warnings {
            proptest::prop_assert!(w.line >= 3 && !w.message.contains('\n'));
        }
    }
}
