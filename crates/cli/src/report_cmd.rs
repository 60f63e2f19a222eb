//! `cairn report compare`: two workload runs, two OLTP runs, or two AWR or
//! Statspack reports, side by side. This is the one place that tells the
//! test kit's products apart: each product decodes and compares its own
//! results (`report` the workload's, `oltp` its own, `awr` the reports it
//! reads), and none of them knows the others; the command sniffs what it was
//! given and hands it to the one that made it.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use cairn_kit::result::{BenchResult, SCHEMA};
use cairn_kit_report::report_file;
use cairn_kit_report::{compare, Comparison};
use cairn_oltp::result::{OltpResult, OLTP_SCHEMA};
use clap::Subcommand;

#[derive(Subcommand)]
pub(crate) enum ReportCommand {
    /// Compare two runs side by side (result.json files, or the directories holding them), or two AWR or Statspack reports.
    Compare {
        a: PathBuf,
        b: PathBuf,
        /// Also write the comparison as one self-contained HTML file.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Print the comparison as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn run_report(command: ReportCommand) -> Result<()> {
    match command {
        ReportCommand::Compare { a, b, html, json } => {
            // A run's directory stands for the result.json in it.
            let file = |p: &Path| {
                if p.is_dir() {
                    p.join("result.json")
                } else {
                    p.to_path_buf()
                }
            };
            // Two workload runs, two OLTP runs, or two AWR or Statspack reports.
            let mut comparison = compare_files(&file(&a), &file(&b))?;
            comparison.rename(&a.display().to_string(), &b.display().to_string());
            if let Some(path) = html {
                std::fs::write(&path, compare::compare_html(&comparison))
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&comparison)?);
            } else {
                print!("{}", compare::compare_text(&comparison));
            }
            Ok(())
        }
    }
}

/// Compare two files: two AWR or Statspack reports (anything but a
/// `result.json`) on the figures the reports hold, else two results of the
/// same kind ([`compare_any`]).
///
/// Every error is its one line alone (`anyhow!("{e}")`): the products'
/// messages already say what their causes were.
fn compare_files(a: &Path, b: &Path) -> Result<Comparison> {
    if !report_file::holds_json(a) && !report_file::holds_json(b) {
        let ra = cairn_awr::read::parse_file(a).map_err(|e| anyhow!("{e}"))?;
        let rb = cairn_awr::read::parse_file(b).map_err(|e| anyhow!("{e}"))?;
        return Ok(cairn_awr::compare::compare_awr(&ra, &rb));
    }
    let (ra, rb) = (load_any(a)?, load_any(b)?);
    compare_any(
        &ra,
        &rb,
        (&a.display().to_string(), &b.display().to_string()),
    )
}

/// A `result.json` of either kind: a workload bench (`cairn bench run|quick`)
/// or an OLTP run (`cairn bench oltp run`).
///
/// A result is loaded once per command and matched at once, so the size of
/// the enum (a bench result inline) costs nothing that matters.
#[allow(clippy::large_enum_variant)]
enum AnyResult {
    Bench(BenchResult),
    Oltp(Box<OltpResult>),
}

/// Read a `result.json` of either kind, telling them apart by its `schema`
/// field, so that `cairn report compare` need not be told which kind it is.
/// Errors are one line, naming the file, what was found and what to do.
fn load_any(path: &Path) -> Result<AnyResult> {
    let text = report_file::read_text(path).map_err(|e| anyhow!("{e}"))?;
    let shown = path.display().to_string();
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "{shown} is not a Cairn result (not JSON: {e}); give the result.json a bench run wrote"
        )
    })?;
    match value.get("schema").and_then(|s| s.as_str()) {
        Some(SCHEMA) => cairn_kit_report::result_from_value(value, &shown)
            .map(AnyResult::Bench)
            .map_err(|e| anyhow!("{e}")),
        Some(OLTP_SCHEMA) => cairn_oltp::result::oltp_from_value(value, &shown)
            .map(|r| AnyResult::Oltp(Box::new(r)))
            .map_err(|e| anyhow!("{e}")),
        _ => {
            let found = match value.get("schema") {
                Some(s) => s.to_string(),
                None => "missing".to_string(),
            };
            Err(anyhow!(
                "{shown} is not a Cairn result (schema {found}, expected \"{SCHEMA}\" or \"{OLTP_SCHEMA}\"); give the result.json a bench run wrote"
            ))
        }
    }
}

/// Compare two results of the same kind: two workload results or two OLTP
/// runs. Results of different kinds measure different things and are
/// refused rather than half-compared; `shown` names the two in that message.
fn compare_any(a: &AnyResult, b: &AnyResult, shown: (&str, &str)) -> Result<Comparison> {
    match (a, b) {
        (AnyResult::Bench(ra), AnyResult::Bench(rb)) => Ok(compare::compare_results(ra, rb)),
        (AnyResult::Oltp(ra), AnyResult::Oltp(rb)) => Ok(cairn_oltp::report::compare_oltp(ra, rb)),
        (ra, _) => {
            let (oltp, bench) = if matches!(ra, AnyResult::Oltp(_)) {
                shown
            } else {
                (shown.1, shown.0)
            };
            Err(anyhow!(
                "cannot compare an OLTP run with a workload run: {oltp} is an OLTP result and {bench} a workload result; give two results of the same kind"
            ))
        }
    }
}
