//! `cairn awr parse | workload | replay`: a DBA's own AWR or Statspack report
//! read, turned into an I/O mix, and replayed on candidate storage.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use cairn_awr::derive::{self, DeriveOptions};
use cairn_awr::model::AwrReport;
use cairn_awr::read;
use cairn_awr::replay::{self, ReplayOptions};
use cairn_io::host::Host;
use cairn_kit::result::BenchResult;
use cairn_kit_group::CairnTargets;
use clap::{Args, Subcommand};

use crate::args::EngineArg;
use crate::bench_cmd::{check_run, engine_maker, fill_progress, Display};
use crate::bench_common::{clock_seed, timestamp};
use crate::signals::{install_interrupt_handler, INTERRUPTED};

#[derive(Subcommand)]
pub(crate) enum AwrCommand {
    /// Read AWR (text or HTML) and Statspack reports and show what they hold.
    Parse {
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// Print the parsed reports as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Derive the I/O classes of a report and write them as a vdbench parameter file.
    Workload(WorkloadArgs),
    /// Derive, run on the targets, and put measured latency next to the AWR's.
    Replay(ReplayArgs),
}

#[derive(Args)]
pub(crate) struct WorkloadArgs {
    report: PathBuf,
    /// Database block size (default: the report's, else 8k).
    #[arg(long)]
    block_size: Option<String>,
    /// Multiply every class's rate (to replay a scaled-down load).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Redo write size, when the report lacks `redo size` or you know better (e.g. 64k).
    #[arg(long)]
    redo_write_size: Option<String>,
    /// Targets to write as sd= lines (default: one sd on $lun).
    #[arg(long = "target", value_name = "PATH")]
    targets: Vec<PathBuf>,
    /// I/Os outstanding per target.
    #[arg(long, default_value_t = 32)]
    threads: u32,
    /// Write the parameter file here instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct ReplayArgs {
    report: PathBuf,
    #[arg(long = "target", required = true, value_name = "PATH")]
    targets: Vec<PathBuf>,
    /// How long to run the replay.
    #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Multiply every class's rate (a scaled-down replay on small storage).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    #[arg(long)]
    block_size: Option<String>,
    /// Redo write size, when the report lacks `redo size` or you know better (e.g. 64k).
    #[arg(long)]
    redo_write_size: Option<String>,
    /// I/Os outstanding per target.
    #[arg(long, default_value_t = 32)]
    threads: u32,
    /// Bytes of each target to use; a missing file is created this big.
    #[arg(long)]
    size: Option<String>,
    /// Directory for verdict.txt, verdict.json and the run's reports (default ./cairn-awr-replay-TIMESTAMP).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write even to a target that carries someone else's data.
    #[arg(long)]
    force: bool,
    #[arg(long)]
    seed: Option<u64>,
    /// Print verdict.json on stdout.
    #[arg(long)]
    json: bool,
    /// For `+GROUP/file` targets: where the group's disks are looked for.
    #[command(flatten)]
    discover: crate::Discover,
}

pub(crate) fn run_awr(command: AwrCommand, engine: EngineArg) -> Result<()> {
    match command {
        AwrCommand::Parse { reports, json } => parse(&reports, json),
        AwrCommand::Workload(args) => workload(args),
        AwrCommand::Replay(args) => replay_report(args, engine),
    }
}

/// `awr parse`: what each report holds (text or JSON); fails only when no
/// report gave anything usable.
fn parse(reports: &[PathBuf], json: bool) -> Result<()> {
    let mut parsed: Vec<AwrReport> = Vec::new();
    let mut failed = Vec::new();
    for path in reports {
        match read::parse_file(path) {
            Ok(r) => parsed.push(r),
            Err(e) => failed.push(e.to_string()),
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&parsed)?);
    } else {
        for r in &parsed {
            print!("{}", summary(r));
        }
    }
    // Exit non-zero only when nothing usable came out of any report;
    // a report that failed beside usable ones is named on stderr.
    if parsed.is_empty() {
        match failed.len() {
            1 => bail!("{}", failed[0]),
            n => bail!(
                "none of the {n} reports gave anything usable (first: {})",
                failed[0]
            ),
        }
    }
    for f in &failed {
        eprintln!("cairn: warning: {f}");
    }
    Ok(())
}

/// `awr workload`: a report's I/O classes as a vdbench parameter file.
fn workload(args: WorkloadArgs) -> Result<()> {
    let r = read::parse_file(&args.report).map_err(|e| anyhow!("{e}"))?;
    let opts = derive_options(
        args.block_size.as_deref(),
        args.redo_write_size.as_deref(),
        args.scale,
        Duration::from_secs(120),
    )?;
    let d = derive::derive(&r, &opts).map_err(|e| anyhow!("{e}"))?;
    let sds = if args.targets.is_empty() {
        format!("sd=sd1,lun=$lun,threads={}\n", args.threads.max(1))
    } else {
        replay::sd_lines(&args.targets, args.threads, None)
    };
    let text = derive::vdbench_text(&d, &sds);
    match args.output {
        Some(path) => {
            std::fs::write(&path, &text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        None => print!("{text}"),
    }
    for n in &d.notes {
        eprintln!("note: {n}");
    }
    Ok(())
}

/// `awr replay`: derive the report's workload, run it on the targets, and
/// write the verdict and the run's reports into the output directory.
fn replay_report(args: ReplayArgs, engine: EngineArg) -> Result<()> {
    let r = read::parse_file(&args.report).map_err(|e| anyhow!("{e}"))?;
    let discovery =
        crate::bench_cmd::discovery_for(args.targets.iter().map(PathBuf::as_path), &args.discover)?;
    let derive = derive_options(
        args.block_size.as_deref(),
        args.redo_write_size.as_deref(),
        args.scale,
        args.duration,
    )?;
    let size_bytes = args
        .size
        .as_deref()
        .map(crate::args::parse_size)
        .transpose()
        .map_err(|e| anyhow!("--size: {e:#}"))?;
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from(format!("cairn-awr-replay-{}", timestamp())));
    if out.join("verdict.json").exists() {
        bail!(
            "{} already holds a verdict.json; give another --out",
            out.display()
        );
    }
    let host = Host::real();
    install_interrupt_handler();
    let made_out = !out.exists();
    std::fs::create_dir_all(&out)
        .with_context(|| format!("cannot create the output directory {}", out.display()))?;
    // A terminal sees the fill of a new target and the run's
    // intervals; --json and a pipe see only the verdict.
    let terminal = std::io::stdout().is_terminal() && !args.json;
    let bar = fill_progress(terminal);
    let progress = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
        if done >= total {
            // The run's lines follow on the same terminal.
            bar.finish_and_clear();
        }
        !INTERRUPTED.load(Ordering::SeqCst)
    };
    let mut display = Display {
        terminal,
        piped_summary: false,
    };
    let opts = ReplayOptions {
        host: &host,
        targets: args.targets,
        size_bytes,
        threads: args.threads,
        derive,
        force: args.force,
        seed: args.seed.unwrap_or_else(clock_seed),
        // `auto` falls back to pread/pwrite where io_uring is refused.
        engine: engine_maker(engine),
        interrupted: &INTERRUPTED,
        fill_progress: &progress,
        opener: &CairnTargets::new(discovery),
    };
    let outcome = replay::replay(&r, &opts, &mut display);
    bar.finish_and_clear();
    let (verdict, result) = match outcome {
        Ok(v) => v,
        Err(e) => {
            if made_out {
                std::fs::remove_dir(&out).ok();
            }
            bail!("{e}");
        }
    };
    write_verdict(&out, &verdict, &result, args.json)?;
    // I/Os that failed or a run cut short: the verdict says so, and
    // so does the exit status.
    check_run(&result)
}

/// A replay's verdict (text, JSON, HTML), its parameter file and the run's
/// reports written into `out`, and the verdict shown (text, or JSON).
fn write_verdict(
    out: &Path,
    verdict: &replay::Verdict,
    result: &BenchResult,
    json: bool,
) -> Result<()> {
    let text = replay::verdict_text(verdict);
    std::fs::write(out.join("verdict.txt"), &text)?;
    std::fs::write(
        out.join("verdict.json"),
        serde_json::to_string_pretty(verdict)?,
    )?;
    std::fs::write(out.join("verdict.html"), replay::verdict_html(verdict))?;
    std::fs::write(out.join("params.vdb"), &verdict.parameter_file)?;
    cairn_kit_report::report_file::write_reports(out, result)
        .with_context(|| format!("cannot write the reports into {}", out.display()))?;
    if json {
        println!("{}", serde_json::to_string_pretty(verdict)?);
    } else {
        print!("{text}");
        println!(
            "reports: {}/verdict.txt, verdict.html, verdict.json, params.vdb, summary.txt, report.html, result.json",
            out.display()
        );
    }
    Ok(())
}

fn derive_options(
    block_size: Option<&str>,
    redo_write_size: Option<&str>,
    scale: f64,
    duration: Duration,
) -> Result<DeriveOptions> {
    if !(scale.is_finite() && scale > 0.0) {
        bail!("--scale {scale}: give a positive factor (0.01 replays 1% of the report's rates)");
    }
    let block_size_bytes = block_size
        .map(derive::parse_block_size)
        .transpose()
        .map_err(|e| anyhow!("{e}"))?;
    let redo_write_bytes = redo_write_size
        .map(crate::args::parse_size)
        .transpose()
        .map_err(|e| anyhow!("--redo-write-size: {e:#}"))?;
    let elapsed_s = duration.as_secs().max(1);
    Ok(DeriveOptions {
        block_size_bytes,
        redo_write_bytes,
        scale,
        elapsed_s,
        warmup_s: (elapsed_s / 24).min(5),
        ..DeriveOptions::default()
    })
}

/// What a parsed report holds, for a terminal.
fn summary(r: &AwrReport) -> String {
    let h = &r.header;
    let mut s = format!("{} ({:?})\n", r.source, r.format);
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    s.push_str(&format!(
        "  DB {} instance {} release {} host {} CPUs {}\n",
        opt(&h.db_name),
        opt(&h.instance),
        opt(&h.release),
        opt(&h.host),
        h.cpus.map_or("-".into(), |c| c.to_string())
    ));
    s.push_str(&format!(
        "  snaps {} .. {}, elapsed {} min, DB time {} min\n",
        opt(&h.begin_snap_time),
        opt(&h.end_snap_time),
        h.elapsed_min.map_or("-".into(), |v| format!("{v:.2}")),
        h.db_time_min.map_or("-".into(), |v| format!("{v:.2}"))
    ));
    s.push_str(&format!(
        "  load profile {} rows, IO profile {}, instance activity {}, top events {}, foreground events {}, background events {}, wait classes {}, histogram rows {}, iostat by function {}\n",
        r.load_profile.len(),
        r.io_profile.len(),
        r.instance_activity.len(),
        r.top_events.len(),
        r.foreground_events.len(),
        r.background_events.len(),
        r.wait_classes.len(),
        r.histograms.len(),
        r.iostat_by_function.len()
    ));
    for w in &r.warnings {
        s.push_str(&format!(
            "  warning: {} (line {}): {}\n",
            w.section, w.line, w.message
        ));
    }
    s
}
