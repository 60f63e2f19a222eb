//! `cairn bench oltp setup|run|verify`: the SLOB method without a database.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use cairn_io::host::Host;
use cairn_kit_group::CairnTargets;
use cairn_oltp::conf::{self, ParsedConf};
use cairn_oltp::dataset::{self, SetupOptions};
use cairn_oltp::layout::Shape;
use cairn_oltp::report;
use cairn_oltp::result::{OltpInterval, OltpResult};
use cairn_oltp::run::{self, RunOptions};
use cairn_oltp::session::ReadPath;
use cairn_oltp::stats::Event;
use clap::{Args, Subcommand, ValueEnum};

use crate::args::{engine_kind, EngineArg};
use crate::bench_common::{bytes_bar, clock, clock_seed, timestamp};
use crate::signals::{install_interrupt_handler, INTERRUPTED};

#[derive(Subcommand)]
pub(crate) enum OltpCommand {
    /// Load SCHEMAS schemas of SCALE blocks each onto the data targets, and format the redo file.
    Setup {
        #[command(flatten)]
        data: DataArgs,
        /// Size of a redo file that setup creates (an existing file or device keeps its size).
        #[arg(long, default_value = "256m", value_parser = size_arg)]
        redo_size: u64,
        /// Overwrite targets that carry a filesystem, LVM, md, a partition table,
        /// Oracle ASM or a Cairn label: their data will be destroyed.
        #[arg(long)]
        force: bool,
        /// Seed of the index permutation and the filler; the default is taken from the clock.
        #[arg(long)]
        seed: Option<u64>,
        /// Print the load report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run the SLOB loop on a loaded dataset and write awr.txt, result.json and report.html.
    Run {
        #[command(flatten)]
        data: DataArgs,
        /// Session threads per schema (overrides THREADS_PER_SCHEMA).
        #[arg(long)]
        threads: Option<u32>,
        /// Buffer cache size (db_cache_size): small to force physical I/O.
        #[arg(long, default_value = "64m", value_parser = size_arg)]
        cache: u64,
        /// Directory for awr.txt, result.json and report.html (default ./cairn-oltp-TIMESTAMP).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Excluded from the report; runs before RUN_TIME (rounded up to whole intervals).
        #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
        warmup: Duration,
        /// Length of a reporting interval.
        #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
        interval: Duration,
        /// Where selects read table blocks: through the buffer cache, or around it (direct path).
        #[arg(long, value_enum, default_value = "cache")]
        read_path: ReadPathArg,
        /// Most cache misses of one statement read in one submission (db file parallel read); 1 reads each alone.
        #[arg(long, default_value_t = run::DEFAULT_BATCH_READS)]
        batch_reads: u32,
        /// Time between checkpoints (the database writer flushing every dirty buffer).
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        checkpoint: Duration,
        /// Log buffer size.
        #[arg(long, default_value = "16m", value_parser = size_arg)]
        log_buffer: u64,
        /// Seed of the sessions' random choices (keys, statements, think times);
        /// the default is taken from the clock and recorded in result.json.
        #[arg(long)]
        seed: Option<u64>,
        /// Print result.json on stdout instead of the live display.
        #[arg(long)]
        json: bool,
    },
    /// Read every block of a dataset and check it (after a run, or a crash).
    Verify {
        /// Data targets, in the order they were loaded.
        #[arg(long = "target", required = true, value_name = "PATH")]
        targets: Vec<PathBuf>,
        #[arg(long, value_name = "PATH")]
        redo: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
pub(crate) struct DataArgs {
    /// A slob.conf (read as SLOB reads it; Oracle-only keys are ignored).
    #[arg(long, value_name = "FILE")]
    conf: PathBuf,
    /// A data target (block device or file); repeat for several, always in the same order.
    #[arg(long = "target", required = true, value_name = "PATH")]
    targets: Vec<PathBuf>,
    /// The redo log (block device or file).
    #[arg(long, value_name = "PATH")]
    redo: PathBuf,
    /// Number of schemas (runit.sh's argument).
    #[arg(long, default_value_t = 1)]
    schemas: u32,
    /// Database block size.
    #[arg(long, default_value = "8k", value_parser = size_arg)]
    block_size: u64,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum ReadPathArg {
    Cache,
    Direct,
}

fn size_arg(s: &str) -> Result<u64, String> {
    crate::args::parse_size(s).map_err(|e| format!("{e:#}"))
}

pub(crate) fn run_oltp(command: OltpCommand, engine: EngineArg) -> Result<()> {
    let host = Host::real();
    match command {
        OltpCommand::Setup {
            data,
            redo_size,
            force,
            seed,
            json,
        } => setup(&host, &data, redo_size, force, seed, json, engine),
        OltpCommand::Run {
            data,
            threads,
            cache,
            out,
            warmup,
            interval,
            read_path,
            batch_reads,
            checkpoint,
            log_buffer,
            seed,
            json,
        } => {
            let parsed = load_conf(&data)?;
            let block_size = block_size(&data)?;
            let out = out.unwrap_or_else(|| PathBuf::from(format!("cairn-oltp-{}", timestamp())));
            if out.join("result.json").exists() {
                bail!(
                    "{} already holds a result.json; give another --out, or move it away first",
                    out.display()
                );
            }
            let terminal = std::io::stdout().is_terminal() && !json;
            install_interrupt_handler();
            let opts = RunOptions {
                host: &host,
                conf: &parsed,
                conf_path: data.conf.display().to_string(),
                schemas: data.schemas,
                threads_per_schema: threads,
                cache_bytes: cache,
                block_size,
                read_path: match read_path {
                    ReadPathArg::Cache => ReadPath::Cache,
                    ReadPathArg::Direct => ReadPath::Direct,
                },
                batch_reads,
                warmup,
                interval,
                checkpoint_interval: checkpoint,
                log_buffer_bytes: log_buffer,
                seed: seed.unwrap_or_else(clock_seed),
                engine: engine_kind(engine),
                interrupted: &INTERRUPTED,
            };
            run_and_report(&data, &opts, &out, terminal, json)
        }
        OltpCommand::Verify {
            targets,
            redo,
            json,
        } => verify(&host, &targets, &redo, json, engine),
    }
}

/// `bench oltp run`, its options made: the run (a line per interval on a
/// `terminal`), its reports written into `out`, what it found said.
fn run_and_report(
    data: &DataArgs,
    opts: &RunOptions,
    out: &Path,
    terminal: bool,
    json: bool,
) -> Result<()> {
    if terminal {
        println!("{}", live_header());
    }
    let mut on_interval = |rec: &OltpInterval| {
        if terminal {
            println!("{}", live_line(rec));
        }
    };
    // The output directory is made before the run, so a bad --out
    // costs nothing, and removed again if the run fails before writing.
    let made_out = !out.exists();
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create the output directory {}", out.display()))?;
    let outcome = match run::run_oltp(&data.targets, &data.redo, opts, &mut on_interval) {
        Ok(o) => o,
        Err(e) => {
            if made_out {
                std::fs::remove_dir(out).ok();
            }
            bail!("{e}");
        }
    };
    let result = outcome.result;
    cairn_oltp::report_file::write_oltp_reports(out, &result)
        .with_context(|| format!("cannot write the reports into {}", out.display()))?;
    if json {
        let text = serde_json::to_string_pretty(&result)?;
        writeln!(std::io::stdout().lock(), "{text}")?;
    } else {
        println!("{}", report::awr_info_line(&result));
        println!(
            "reports: {}/awr.txt, report.html, result.json",
            out.display()
        );
    }
    verdict(&result)
}

/// `bench oltp verify`: every block of the dataset on `targets` and `redo`
/// read and checked; any not as it should be fails the command.
fn verify(
    host: &Host,
    targets: &[PathBuf],
    redo: &Path,
    json: bool,
    engine: EngineArg,
) -> Result<()> {
    install_interrupt_handler();
    let bar = bytes_bar(!json, "verifying");
    let report = dataset::verify(
        targets,
        redo,
        host,
        engine_kind(engine),
        Some(&|done, total| {
            bar.set_length(total);
            bar.set_position(done);
        }),
        &INTERRUPTED,
    );
    bar.finish_and_clear();
    let report = report.map_err(|e| anyhow!("{e}"))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report::verify_text(&report));
    }
    if report.problems_total > 0 {
        bail!(
            "{} blocks are not as they should be (first: {})",
            report.problems_total,
            report
                .problems
                .first()
                .map(|p| format!(
                    "{} at byte {}: schema {} {} block {}: {}",
                    p.target, p.offset_bytes, p.schema, p.segment, p.number, p.problem
                ))
                .unwrap_or_default()
        );
    }
    Ok(())
}

fn setup(
    host: &Host,
    data: &DataArgs,
    redo_size: u64,
    force: bool,
    seed: Option<u64>,
    json: bool,
    engine: EngineArg,
) -> Result<()> {
    let parsed = load_conf(data)?;
    let block_size = block_size(data)?;
    let conf = &parsed.conf;
    conf.check_scale(block_size).map_err(|e| anyhow!(e))?;
    if data.schemas == 0 {
        bail!("--schemas must be at least 1");
    }
    let shape = Shape {
        block_size,
        schemas: data.schemas,
        table_blocks: conf.scale.blocks(block_size),
        scan_blocks: conf.scan_table_sz.blocks(block_size),
        obfuscate: conf.obfuscate_columns,
    };
    install_interrupt_handler();
    let bar = bytes_bar(!json, "loading");
    let progress = |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let report = dataset::setup(
        &data.targets,
        &data.redo,
        &SetupOptions {
            host,
            opener: &CairnTargets::new(None),
            shape,
            parallel: conf.load_parallel_degree,
            force,
            progress: Some(&progress),
            seed: seed.unwrap_or_else(clock_seed),
            redo_bytes: redo_size,
            engine: engine_kind(engine),
        },
        &INTERRUPTED,
    );
    bar.finish_and_clear();
    let report = report.map_err(|e| anyhow!("{e}"))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report::load_text(&report));
    }
    Ok(())
}

fn load_conf(data: &DataArgs) -> Result<ParsedConf> {
    conf::parse_conf_file(&data.conf).map_err(|e| anyhow!("{e}"))
}

fn block_size(data: &DataArgs) -> Result<u32> {
    let b = data.block_size;
    if !(2048..=32768).contains(&b) || !b.is_power_of_two() {
        bail!("--block-size {b} is not a database block size: give 2k, 4k, 8k, 16k or 32k");
    }
    Ok(b as u32)
}

/// Fail (after the reports are written) when a block was bad, an I/O failed,
/// or the run was cut short.
fn verdict(result: &OltpResult) -> Result<()> {
    if let Some(why) = &result.ended_early {
        bail!("the run ended early: {why}; the reports hold what was measured");
    }
    let bad = result.stat("cairn block corruptions");
    if bad > 0 {
        bail!(
            "{bad} blocks failed their checks when read (first: {}); see awr.txt",
            result.errors.first.first().cloned().unwrap_or_default()
        );
    }
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted; the reports hold what was measured");
    }
    Ok(())
}

fn live_header() -> String {
    format!(
        "{:<8} {:>4} {:>10} {:>10} {:>9} {:>11} {:>8} {:>10} {:>10} {:>7}",
        "time",
        "int",
        "phys-rd/s",
        "phys-wr/s",
        "redo-wr/s",
        "logical/s",
        "txn/s",
        "seq-rd-us",
        "lfsync-us",
        "db-cpu"
    )
}

fn live_line(rec: &OltpInterval) -> String {
    let avg = |e: Event| {
        rec.events
            .iter()
            .find(|x| x.event == e)
            .map_or_else(|| "-".to_string(), |x| format!("{:.0}", x.avg_us))
    };
    let busy = if rec.seconds > 0.0 {
        rec.db_cpu_s / rec.seconds
    } else {
        0.0
    };
    format!(
        "{:<8} {:>4} {:>10.0} {:>10.0} {:>9.0} {:>11.0} {:>8.1} {:>10} {:>10} {:>7.2}{}",
        clock(),
        rec.index,
        rec.physical_read_iops,
        rec.physical_write_iops,
        rec.redo_write_iops,
        rec.logical_reads_per_s,
        rec.transactions_per_s,
        avg(Event::DbFileSequentialRead),
        avg(Event::LogFileSync),
        busy,
        if rec.warmup { "  warm-up" } else { "" }
    )
}
