//! The Load Profile of text reports, in the 11g and the 12c+ label sets, as
//! printed and as pasted with its spacing lost. The reports are written for
//! these tests in the layout of `awrrpt` output (no real report is copied).

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use cairn_awr::profile::{figure, read_load_profile, Figure};

const AWR_11G: &str = "\
Cache Sizes                       Begin        End
~~~~~~~~~~~                  ---------- ----------
               Buffer Cache:     2,048M     2,048M  Std Block Size:         8K

Load Profile              Per Second    Per Transaction   Per Exec   Per Call
~~~~~~~~~~~~         ---------------    --------------- ---------- ----------
      DB Time(s):                3.5                0.1       0.01       0.00
       DB CPU(s):                1.2                0.0       0.00       0.00
       Redo size:        1,305,547.7            9,557.4
   Logical reads:           10,633.8               77.8
   Block changes:            9,323.1               68.3
  Physical reads:            7,239.6               53.0
 Physical writes:            2,101.4               15.4
      User calls:              412.0                3.0
          Parses:              150.3                1.1
     Hard parses:                0.4                0.0
          Logons:                0.2                0.0
        Executes:              323.2                2.4
       Rollbacks:                0.0                0.0
    Transactions:              136.6

  % Blocks changed per Read:   87.68    Recursive Call %:    34.12
";

const AWR_12C: &str = "\
Load Profile                    Per Second   Per Transaction  Per Exec  Per Call
~~~~~~~~~~~~~~~            ---------------   --------------- --------- ---------
             DB Time(s):              13.3               0.2      0.06      0.40
              DB CPU(s):               0.9               0.0      0.00      0.03
      Background CPU(s):               0.2               0.0      0.00      0.00
      Redo size (bytes):       1,016,316.4          14,793.5
  Logical read (blocks):          11,508.6             167.5
          Block changes:           4,442.6              64.7
 Physical read (blocks):           5,889.0              85.7
Physical write (blocks):           1,203.3              17.5
       Read IO requests:           5,888.9              85.7
      Write IO requests:             866.1              12.6
           Read IO (MB):              46.0               0.7
          Write IO (MB):               9.4               0.1
             User calls:              33.5               0.5
           Parses (SQL):             115.6               1.7
      Hard parses (SQL):               0.1               0.0
         Executes (SQL):             231.5               3.4
              Rollbacks:               0.0               0.0
           Transactions:              68.7

Instance Efficiency Percentages (Target 100%)
";

#[test]
fn the_11g_labels_name_the_same_figures() {
    let (rows, warnings) = read_load_profile(AWR_11G).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(rows.len(), 14);
    let redo = figure(&rows, Figure::RedoSize).unwrap();
    assert_eq!(
        (redo.per_second, redo.per_transaction),
        (Some(1_305_547.7), Some(9_557.4))
    );
    assert_eq!(redo.label, "Redo size");
    assert_eq!(
        figure(&rows, Figure::PhysicalReads).unwrap().per_second,
        Some(7_239.6)
    );
    assert_eq!(
        figure(&rows, Figure::Executes).unwrap().per_second,
        Some(323.2)
    );
    let db_time = figure(&rows, Figure::DbTime).unwrap();
    assert_eq!(
        (db_time.per_exec, db_time.per_call),
        (Some(0.01), Some(0.0))
    );
    let txn = figure(&rows, Figure::Transactions).unwrap();
    assert_eq!((txn.per_second, txn.per_transaction), (Some(136.6), None));
    assert_eq!(txn.line, 20);
    assert!(
        figure(&rows, Figure::ReadIoRequests).is_none(),
        "11g has no IO rows"
    );
}

#[test]
fn the_12c_labels_and_io_rows() {
    let (rows, warnings) = read_load_profile(AWR_12C).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(rows.len(), 18);
    assert_eq!(
        figure(&rows, Figure::RedoSize).unwrap().per_second,
        Some(1_016_316.4)
    );
    assert_eq!(
        figure(&rows, Figure::LogicalReads).unwrap().label,
        "Logical read (blocks)"
    );
    assert_eq!(
        figure(&rows, Figure::ReadIoRequests).unwrap().per_second,
        Some(5_888.9)
    );
    assert_eq!(
        figure(&rows, Figure::ReadIoMb).unwrap().per_second,
        Some(46.0)
    );
    assert_eq!(
        figure(&rows, Figure::PhysicalWrites)
            .unwrap()
            .per_transaction,
        Some(17.5)
    );
    assert_eq!(
        figure(&rows, Figure::BackgroundCpu).unwrap().per_second,
        Some(0.2)
    );
    assert_eq!(
        figure(&rows, Figure::Transactions).unwrap().per_second,
        Some(68.7)
    );
}

#[test]
fn a_pasted_profile_with_its_spacing_lost_reads_the_same() {
    let pasted: String = AWR_12C
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n");
    let (a, _) = read_load_profile(AWR_12C).unwrap();
    let (b, _) = read_load_profile(&pasted).unwrap();
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            (x.figure, x.per_second, x.per_transaction),
            (y.figure, y.per_second, y.per_transaction)
        );
    }
}

#[test]
fn a_damaged_row_is_named_and_a_missing_profile_is_none() {
    let damaged = AWR_12C.replace(
        "Block changes:           4,442.6",
        "Block changes:           4,44?.6",
    );
    let (rows, warnings) = read_load_profile(&damaged).unwrap();
    assert_eq!(rows.len(), 17);
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].line, 8);
    assert!(warnings[0].message.contains("Block changes"));
    assert!(read_load_profile("Instance Activity Stats\nnothing here\n").is_none());
}
