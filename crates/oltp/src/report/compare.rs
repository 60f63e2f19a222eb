//! Two OLTP runs side by side: the table a DBA builds by hand from two AWR
//! reports (the ASMLib-versus-ASMFD one in the flashdba post), with the same
//! rows and names, built into the workload report's [`Comparison`] model so
//! that `compare_text` and `compare_html` render it.

use super::figures::{Figures, MB};
use crate::result::OltpResult;
use crate::stats::{Event, Stat};
use cairn_kit_report::compare::{Better, Comparison, Row, Section};

pub(crate) fn compare(a: &OltpResult, b: &OltpResult) -> Comparison {
    let (fa, fb) = (Figures::new(a), Figures::new(b));
    let mut a_name = format!("{} {}", a.environment.hostname, a.started_at);
    let mut b_name = format!("{} {}", b.environment.hostname, b.started_at);
    if a_name == b_name {
        a_name.push_str(" (A)");
        b_name.push_str(" (B)");
    }

    // (metric, unit, per-second figure). More work done per second is better.
    type PerSecond = fn(&Figures) -> f64;
    let load: [(&str, &str, PerSecond); 8] = [
        ("Redo Size", "", |f| f.stat(Stat::RedoSize) as f64),
        ("Logical read (blocks)", "", |f| {
            f.stat(Stat::SessionLogicalReads) as f64
        }),
        ("Block changes", "", |f| f.stat(Stat::DbBlockChanges) as f64),
        ("Physical Read (blocks)", "", |f| {
            f.stat(Stat::PhysicalReads) as f64
        }),
        ("Read IO requests", "IO/s", |f| f.db_read_requests() as f64),
        ("Read IO (MB)", "MB/s", |f| f.db_read_bytes() as f64 / MB),
        ("Executes (SQL)", "", |f| f.stat(Stat::ExecuteCount) as f64),
        ("Transactions", "", |f| f.commits as f64),
    ];
    let load_rows = load
        .iter()
        .map(|(metric, unit, value)| {
            Row::new(
                metric,
                unit,
                fa.per_s(value(&fa)),
                fb.per_s(value(&fb)),
                Better::Higher,
            )
        })
        .collect();

    let waits: [(&str, Event); 4] = [
        ("db file sequential read time", Event::DbFileSequentialRead),
        ("db file parallel read time", Event::DbFileParallelRead),
        ("log file sync", Event::LogFileSync),
        ("log file parallel write", Event::LogFileParallelWrite),
    ];
    let mut wait_rows: Vec<Row> = waits
        .iter()
        .map(|(metric, event)| {
            Row::new(
                metric,
                "us",
                fa.avg_us(*event),
                fb.avg_us(*event),
                Better::Lower,
            )
        })
        .collect();
    wait_rows.push(Row::new(
        "User IO Avg Wait time",
        "us",
        fa.class_avg_us("User I/O"),
        fb.class_avg_us("User I/O"),
        Better::Lower,
    ));
    wait_rows.push(Row::new(
        "physical IOPS per DB CPU second",
        "IO/CPU-s",
        fa.iops_per_db_cpu_s(),
        fb.iops_per_db_cpu_s(),
        Better::Higher,
    ));

    let mut c = Comparison {
        a_name,
        b_name,
        sections: vec![
            Section {
                title: "Load Profile (per second)".to_string(),
                rows: load_rows,
            },
            Section {
                title: "Wait event average".to_string(),
                rows: wait_rows,
            },
        ],
    };
    // Runs on different engines (`--engine`) say so: it is what was compared.
    let (ea, eb) = (&a.settings.engine, &b.settings.engine);
    if ea != eb && !ea.is_empty() && !eb.is_empty() {
        c.tag(ea, eb);
    }
    c
}
