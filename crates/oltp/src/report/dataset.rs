//! The reports of `cairn bench oltp setup` (its load throughput) and
//! `cairn bench oltp verify` (what it found, block by block).

use crate::dataset::{BlockProblem, DatasetState, LoadReport, VerifyReport};
use crate::layout::Shape;
use cairn_kit::result::TargetInfo;
use cairn_kit_report::document::{self, Align, Block, Table};
use cairn_kit_report::units;

fn shape_text(s: &Shape) -> String {
    format!(
        "{} schemas x {} table blocks, scan table {} blocks, block size {}, filler {}",
        s.schemas,
        units::count(s.table_blocks),
        units::count(s.scan_blocks),
        units::bytes(u64::from(s.block_size)),
        if s.obfuscate {
            "random (OBFUSCATE_COLUMNS)"
        } else {
            "compressible"
        }
    )
}

fn targets_table(data: &[TargetInfo], redo: &TargetInfo, created: &[String]) -> Table {
    let mut t = Table::new(
        None,
        &[
            ("Role", Align::Left),
            ("Path", Align::Left),
            ("Kind", Align::Left),
            ("Device(s)", Align::Left),
            ("Size", Align::Right),
            ("Sectors", Align::Left),
            ("Created", Align::Left),
        ],
    );
    let mut row = |role: &str, target: &TargetInfo| {
        let was_created = target.created || created.contains(&target.path);
        t.push(vec![
            role.to_string(),
            target.path.clone(),
            target.kind.clone(),
            if target.devices.is_empty() {
                "-".to_string()
            } else {
                target.devices.join(" ")
            },
            units::bytes(target.size_bytes),
            target.sector_format.clone(),
            if was_created { "yes" } else { "no" }.to_string(),
        ]);
    };
    for target in data {
        row("data", target);
    }
    row("redo", redo);
    t
}

pub(crate) fn load(r: &LoadReport) -> String {
    let per_s = |v: f64| {
        if r.elapsed_s > 0.0 {
            v / r.elapsed_s
        } else {
            0.0
        }
    };
    let cpu = r.cpu_user_s + r.cpu_sys_s;
    let mut blocks = vec![
        Block::Title("Cairn OLTP setup".to_string()),
        Block::Fields(vec![
            ("Dataset".to_string(), format!("{:016x}", r.dataset_id)),
            ("Shape".to_string(), shape_text(&r.shape)),
            ("Loaders".to_string(), r.parallel.to_string()),
            ("Engine".to_string(), r.engine.clone()),
            ("Blocks written".to_string(), units::count(r.blocks)),
            (
                "Bytes written".to_string(),
                format!(
                    "{} ({} MB)",
                    units::count(r.bytes),
                    units::grouped(r.bytes as f64 / 1_048_576.0, 1)
                ),
            ),
            ("Elapsed".to_string(), units::seconds(r.elapsed_s)),
            (
                "Throughput".to_string(),
                format!(
                    "{} MB/s, {} blocks/s",
                    units::grouped(r.mb_per_s, 1),
                    units::grouped(r.blocks_per_s, 1)
                ),
            ),
            (
                "CPU".to_string(),
                format!(
                    "{} user + {} system = {} ({} cores busy on average)",
                    units::seconds(r.cpu_user_s),
                    units::seconds(r.cpu_sys_s),
                    units::seconds(cpu),
                    units::grouped(per_s(cpu), 2)
                ),
            ),
        ]),
        Block::Heading("Targets".to_string()),
        Block::Table(targets_table(&r.targets, &r.redo, &r.created)),
    ];
    if !r.created.is_empty() {
        blocks.push(Block::Note(format!(
            "Created by setup: {}.",
            r.created.join(", ")
        )));
    }
    document::text(&blocks)
}

/// How the dataset's headers left it, said plainly.
fn state_text(state: DatasetState) -> &'static str {
    match state {
        DatasetState::Clean => "clean: loaded, or the last run shut down cleanly",
        DatasetState::Running => {
            "NOT CLEAN: the last run did not shut down cleanly (it crashed, was killed, or is still running); changes it had not yet written are lost, and every block on disk was checked as it is"
        }
        DatasetState::Loading => {
            "INCOMPLETE: setup began and did not finish; the dataset is not usable, run setup again"
        }
    }
}

/// `verify`'s report as text: the dataset, its state, the bad blocks found
/// and the blocks behind the redo log.
pub(crate) fn verify(r: &VerifyReport) -> String {
    let mut blocks = vec![
        Block::Title("Cairn OLTP verify".to_string()),
        Block::Fields(vec![
            ("Dataset".to_string(), format!("{:016x}", r.dataset_id)),
            ("Shape".to_string(), shape_text(&r.shape)),
            ("State".to_string(), state_text(r.state).to_string()),
            ("Blocks checked".to_string(), units::count(r.blocks_checked)),
            (
                "Table versions".to_string(),
                format!(
                    "{} (block changes that reached the data files)",
                    units::count(r.table_versions)
                ),
            ),
            ("Problems".to_string(), units::count(r.problems_total)),
            ("Redo log".to_string(), redo_text(r)),
            ("Engine".to_string(), r.engine.clone()),
        ]),
    ];
    if r.state != DatasetState::Clean {
        blocks.push(Block::Alert(format!(
            "dataset state: {}",
            state_text(r.state)
        )));
    }
    if r.problems_total == 0 {
        blocks.push(Block::Note(format!(
            "OK: all {} blocks checked are good (checksum, identity and contents).",
            units::count(r.blocks_checked)
        )));
    } else {
        let t = blocks_table(&r.problems, "Problem");
        blocks.push(Block::Alert(format!(
            "{} BAD BLOCKS found",
            units::count(r.problems_total)
        )));
        blocks.push(Block::Heading("Problems".to_string()));
        blocks.push(Block::Table(t));
        let shown = r.problems.len() as u64;
        blocks.push(Block::Note(if shown < r.problems_total {
            format!(
                "Total: {} problems; the first {} are listed.",
                units::count(r.problems_total),
                units::count(shown)
            )
        } else {
            format!("Total: {} problems.", units::count(r.problems_total))
        }));
    }
    if !r.redo.behind.is_empty() {
        let t = blocks_table(&r.redo.behind, "Versions");
        blocks.push(Block::Heading("Blocks behind the redo log".to_string()));
        blocks.push(Block::Table(t));
        blocks.push(Block::Note(format!(
            "{} blocks in all. They are not damaged: their newest changes are in the redo log but were not written to the data files before the run stopped.",
            units::count(r.redo.blocks_behind)
        )));
    }
    document::text(&blocks)
}

/// Blocks, one a row: where each is and what `last` (the final column)
/// says of it.
fn blocks_table(blocks: &[BlockProblem], last: &str) -> Table {
    let mut t = Table::new(
        None,
        &[
            ("Target", Align::Left),
            ("Offset", Align::Right),
            ("Schema", Align::Right),
            ("Segment", Align::Left),
            ("Block", Align::Right),
            (last, Align::Left),
        ],
    );
    for p in blocks {
        t.push(vec![
            p.target.clone(),
            units::count(p.offset_bytes),
            p.schema.to_string(),
            p.segment.clone(),
            units::count(p.number),
            p.problem.clone(),
        ]);
    }
    t
}

fn redo_text(r: &VerifyReport) -> String {
    match &r.redo.unreadable {
        Some(why) => format!("not read back ({why})"),
        None => format!(
            "{} records read back ({} commits); {} table blocks behind it",
            units::count(r.redo.records),
            units::count(r.redo.commits),
            units::count(r.redo.blocks_behind)
        ),
    }
}
