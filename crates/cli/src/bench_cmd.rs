//! `cairn bench run|quick`: parse, open the targets, run, show live interval
//! lines on a terminal, write the reports.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use cairn_io::host::Host;
use cairn_kit::engine::{self, BenchOptions, EngineMaker, Observer};
use cairn_kit::model::{Arrival, Plan, RunDef, XferSize};
use cairn_kit::quick::{self, QuickArgs, QuickRw};
use cairn_kit::result::{BenchResult, IntervalRecord, RunRecord};
use cairn_kit::target::{self, TargetOptions};
use cairn_kit::vdbench;
use cairn_kit_group::CairnTargets;
use cairn_kit_report::live;
use cairn_kit_report::report_file;
use clap::{Args, Subcommand};

use crate::args::EngineArg;
use crate::bench_common::{bytes_bar, clock, clock_seed, timestamp};
use crate::signals::{
    install_end_pause_handler, install_interrupt_handler, END_PAUSE, INTERRUPTED,
};

#[derive(Subcommand)]
pub(crate) enum BenchCommand {
    /// Run a vdbench parameter file: `cairn bench run FILE [name=value ...]`.
    ///
    /// Ctrl-C stops the run under way, skips the rest and still writes the
    /// reports. SIGUSR1 (`kill -USR1 PID`) ends a `pause=` between runs at
    /// once: the next run starts.
    Run {
        /// The parameter file (sd=, wd=, rd= records; see docs/vdbench.md).
        file: PathBuf,
        /// `name=value` pairs substituted for `$name` in the file.
        variables: Vec<String>,
        #[command(flatten)]
        common: Common,
    },
    /// A quick run from flags, without a parameter file.
    Quick {
        /// A block device or file; repeat for several (one sd each).
        #[arg(long = "target", required = true, value_name = "PATH")]
        targets: Vec<PathBuf>,
        /// read, write, randread, randwrite, rw, randrw.
        #[arg(long, default_value = "randread")]
        rw: String,
        /// Percentage of reads for rw and randrw.
        #[arg(long, default_value_t = 50.0)]
        rwmixread: f64,
        /// Transfer size: 8k, 1m, …
        #[arg(long, default_value = "8k")]
        bs: String,
        /// I/Os outstanding per target (vdbench's threads=).
        #[arg(long, default_value_t = 1)]
        qd: u32,
        /// How long to run (30s, 2m).
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        time: Duration,
        /// Excluded from the totals; part of --time.
        #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
        warmup: Duration,
        #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
        interval: Duration,
        /// I/Os per second over all targets (open loop), or `max` (closed loop).
        #[arg(long, default_value = "max")]
        rate: String,
        /// Inter-arrival distribution of an open-loop rate: exponential, uniform, deterministic.
        #[arg(long, default_value = "exponential")]
        distribution: String,
        /// Bytes of each target to use; a missing file is created this big.
        #[arg(long)]
        size: Option<String>,
        /// Validate data: writes carry their address and a checksum, reads check them.
        #[arg(long)]
        validate: bool,
        #[arg(long, default_value_t = 1.0)]
        compratio: f64,
        #[arg(long, default_value_t = 1.0)]
        dedupratio: f64,
        #[command(flatten)]
        common: Common,
    },
    /// Database emulation, the SLOB method: setup, run, verify.
    #[command(subcommand)]
    Oltp(crate::oltp_cmd::OltpCommand),
}

#[derive(Args)]
pub(crate) struct Common {
    /// Directory for result.json, summary.txt and report.html (default ./cairn-bench-TIMESTAMP).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write even to a target that carries a filesystem, LVM, md, a partition table,
    /// an Oracle ASM or a Cairn label: its data will be destroyed.
    #[arg(long)]
    force: bool,
    /// Seed of every random choice; the default is taken from the clock (and recorded).
    #[arg(long)]
    seed: Option<u64>,
    /// io_uring submitting threads (default: one fewer than the CPUs, at least one).
    #[arg(long)]
    workers: Option<u32>,
    /// Print result.json on stdout instead of the live display.
    #[arg(long)]
    json: bool,
    /// For `+GROUP/file` targets: where the group's disks are looked for.
    #[command(flatten)]
    discover: crate::Discover,
}

/// The discovery string, resolved only when some target is a group file
/// (`+GROUP/...`), so a broken config file never stops a run on plain devices.
pub(crate) fn discovery_for<'p>(
    luns: impl IntoIterator<Item = &'p std::path::Path>,
    discover: &crate::Discover,
) -> Result<Option<cairn_store::discovery::DiscoveryString>> {
    let grouped = luns
        .into_iter()
        .any(|p| p.to_str().is_some_and(|s| s.starts_with('+')));
    if !grouped {
        return Ok(None);
    }
    Ok(Some(crate::args::discovery(discover.discover.as_deref())?))
}

pub(crate) fn run_bench(command: BenchCommand, engine: EngineArg) -> Result<()> {
    match command {
        BenchCommand::Run {
            file,
            variables,
            common,
        } => {
            let mut vars = BTreeMap::new();
            for v in &variables {
                let Some((name, value)) = v.split_once('=') else {
                    bail!("`{v}` is not a variable; give name=value (e.g. dir=/tmp/bench)");
                };
                vars.insert(name.trim_start_matches('$').to_string(), value.to_string());
            }
            let plan = vdbench::parse_file(&file, &vars).map_err(|e| anyhow!("{e}"))?;
            execute(&plan, engine, &common)
        }
        BenchCommand::Oltp(command) => crate::oltp_cmd::run_oltp(command, engine),
        BenchCommand::Quick {
            targets,
            rw,
            rwmixread,
            bs,
            qd,
            time,
            warmup,
            interval,
            rate,
            distribution,
            size,
            validate,
            compratio,
            dedupratio,
            common,
        } => {
            let rw: QuickRw = rw.parse().map_err(|e: quick::UnknownRw| anyhow!(e))?;
            let bs =
                XferSize::Fixed(crate::args::parse_size(&bs).map_err(|e| anyhow!("--bs: {e:#}"))?);
            let rate = quick::parse_rate(&rate).map_err(|e| anyhow!(e))?;
            let arrival = match distribution.as_str() {
                "exponential" => Arrival::Exponential,
                "uniform" => Arrival::Uniform,
                "deterministic" => Arrival::Deterministic,
                d => bail!("--distribution `{d}`: expected exponential, uniform or deterministic"),
            };
            let size = size
                .map(|s| crate::args::parse_size(&s).map_err(|e| anyhow!("--size: {e:#}")))
                .transpose()?;
            let args = QuickArgs {
                targets,
                rw,
                rwmixread,
                bs,
                qd,
                time,
                warmup,
                interval,
                rate,
                arrival,
                size,
                validate,
                compratio,
                dedupratio,
                args: std::env::args().skip(1).collect(),
            };
            let plan = quick::plan(&args).map_err(|e| anyhow!(e))?;
            execute(&plan, engine, &common)
        }
    }
}

pub(crate) fn engine_maker(engine: EngineArg) -> EngineMaker {
    match engine {
        EngineArg::Sync => EngineMaker::Sync,
        EngineArg::Uring => EngineMaker::Uring,
        EngineArg::Auto => {
            if cairn_io::uring_engine::UringEngine::new(1).is_ok() {
                EngineMaker::Uring
            } else {
                EngineMaker::Sync
            }
        }
    }
}

fn execute(plan: &Plan, engine: EngineArg, common: &Common) -> Result<()> {
    let host = Host::real();
    let terminal = std::io::stdout().is_terminal() && !common.json;
    let out = common
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("cairn-bench-{}", timestamp())));
    // Refuse an output directory that holds another run's result before any I/O.
    if out.join("result.json").exists() {
        bail!(
            "{} already holds a result.json; give another --out, or move it away first",
            out.display()
        );
    }
    let made_out = !out.exists();
    std::fs::create_dir_all(&out)
        .with_context(|| format!("cannot create the output directory {}", out.display()))?;
    let outcome = measure(plan, engine, common, &host, terminal, &out);
    if outcome.is_err() && made_out {
        // Nothing was written into it: leave no empty directory behind.
        std::fs::remove_dir(&out).ok();
    }
    let result = outcome?;
    if common.json {
        let text = serde_json::to_string_pretty(&result)?;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{text}")?;
    } else {
        println!(
            "reports: {}/summary.txt, report.html, result.json",
            out.display()
        );
    }
    check_run(&result)
}

/// Open the targets, run, and write the reports into `out`.
fn measure(
    plan: &Plan,
    engine: EngineArg,
    common: &Common,
    host: &Host,
    terminal: bool,
    out: &Path,
) -> Result<BenchResult> {
    // From here on Ctrl-C stops the fill or the run cleanly: a half-filled
    // new file is removed, a run's figures are kept.
    install_interrupt_handler();
    install_end_pause_handler();
    let bar = fill_progress(terminal);
    let mut progress = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
        !INTERRUPTED.load(Ordering::SeqCst)
    };
    let discovery = discovery_for(plan.sds.iter().map(|sd| sd.lun.as_path()), &common.discover)?;
    let opener = CairnTargets::new(discovery);
    let targets = target::open_targets(
        plan,
        &mut TargetOptions {
            host,
            opener: &opener,
            force: common.force,
            fill_progress: &mut progress,
            engine: crate::args::engine_kind(engine),
        },
    )
    .map_err(|e| anyhow!("{e}"))?;
    bar.finish_and_clear();
    let seed = common.seed.unwrap_or_else(clock_seed);
    let options = BenchOptions {
        engine: engine_maker(engine),
        workers: common.workers,
        seed,
        host,
        interrupted: &INTERRUPTED,
        end_pause: Some(&END_PAUSE),
    };
    let mut display = Display {
        terminal,
        piped_summary: !common.json,
    };
    let result = match engine::run_bench(plan, &targets, &options, &mut display) {
        Ok(result) => result,
        Err(e) => {
            // Refused before any I/O: the files made for this bench go too.
            if let Err(left) = target::close_and_remove_created(targets, host, &opener) {
                return Err(anyhow!("{e}; {left}"));
            }
            return Err(anyhow!("{e}"));
        }
    };
    drop(targets);
    report_file::write_reports(out, &result)
        .with_context(|| format!("cannot write the reports into {}", out.display()))?;
    Ok(result)
}

/// Fail (after the reports are written) when the data did not read back, or
/// I/O failed, or the run ended early: a benchmark over bad storage, or cut
/// short, must not exit 0. `awr replay` shares it.
pub(crate) fn check_run(result: &BenchResult) -> Result<()> {
    let bad: usize = result.runs.iter().map(|r| r.validation.errors.len()).sum();
    let io: u64 = result.runs.iter().map(|r| r.errors.count).sum();
    if bad > 0 {
        let first = result
            .runs
            .iter()
            .flat_map(|r| r.validation.errors.first())
            .next()
            .map(|e| {
                format!(
                    " (first: sd={} lba {} at byte {}: {})",
                    e.sd, e.lba, e.offset_bytes, e.problem
                )
            })
            .unwrap_or_default();
        bail!("data validation failed for {bad} blocks{first}; see summary.txt");
    }
    if io > 0 {
        bail!("{io} I/Os failed; see summary.txt for the first of them");
    }
    if let Some((run, reason)) = result
        .runs
        .iter()
        .find_map(|r| r.cut_short().map(|why| (r.title(), why)))
    {
        bail!("{run}: {reason}; the reports hold what was measured");
    }
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted; the reports hold what was measured");
    }
    Ok(())
}

pub(crate) fn fill_progress(terminal: bool) -> indicatif::ProgressBar {
    bytes_bar(terminal, "filling new target")
}

/// Live interval lines on a terminal; when piped, only each run's total line
/// (unless `piped_summary` is off: `awr replay` prints its verdict instead).
pub(crate) struct Display {
    pub(crate) terminal: bool,
    pub(crate) piped_summary: bool,
}

impl Observer for Display {
    fn run_started(&mut self, run: &RunDef, target_iops: Option<f64>) {
        if self.terminal {
            println!("{}", live::run_banner(run, target_iops));
            println!("{}", live::header());
        }
    }

    fn interval(&mut self, _run: &RunDef, record: &IntervalRecord) {
        if self.terminal {
            println!("{}", live::line(record, &clock()));
        }
    }

    fn run_finished(&mut self, record: &RunRecord) {
        if self.terminal {
            println!("{}", live::total_line(record));
        } else if self.piped_summary {
            println!("{}: {}", record.title(), live::total_line(record).trim());
        }
        if let Some(message) = &record.rate_outcome.message {
            if self.piped_summary {
                println!("warning: {}: {message}", record.title());
            }
        }
    }

    fn note(&mut self, message: &str) {
        if self.piped_summary {
            println!("{message}");
        }
    }
}
