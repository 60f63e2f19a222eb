//! `cairn`: the command line. Parses arguments, chooses the engine, and
//! prints the result as text for people or JSON for programs (`show`,
//! `render`). A group, file or volume command becomes a typed request
//! (`cairn_command`), sent to the service when one holds the group
//! (`forward`), else carried out here by the same executor; the disk
//! commands call `cairn_store::admin`; `serve_cmd` starts the service.
//! Decisions live in the libraries, but for the run commands (`bench_cmd`,
//! `oltp_cmd`, `awr_cmd`): they manage their output directory and judge a
//! finished run here (`docs/ARCHITECTURE.md`).
//!
//! Exit status: 0 success, 1 the command failed or refused (one line on stderr
//! says why and what to do), 2 the command line itself was wrong, 3 `group
//! check` found the group consistent but DEGRADED (a disk missing or
//! offline).

mod args;
mod awr_cmd;
mod bench_cmd;
mod bench_common;
mod carry;
mod cp_cmd;
mod forward;
mod group_cmd;
mod oltp_cmd;
mod render;
mod report_cmd;
mod serve_cmd;
mod show;
mod signals;
mod volume_cmd;

use args::{discovery, engine_depth, parse_size, Discover, EngineArg, Output};
use carry::carry_out;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use cairn_command::request::Request;
use cairn_command::Outcome;
use cairn_format::DiskLabel;
use cairn_io::host::Host;
use cairn_io::FileEngine;
use cairn_store::admin::{self, LabelRequest};
use clap::{Parser, Subcommand};

/// The exit status of a `group check` that found nothing wrong but a disk not
/// in use: not clean, and not damaged either.
pub(crate) const EXIT_DEGRADED: u8 = 3;

/// In-flight requests for the disk commands: they do one thing at a time.
const ADMIN_DEPTH: usize = 8;

#[derive(Parser)]
#[command(
    name = "cairn",
    version,
    about = "Cairn: a user-space storage manager for database files, and the I/O test kit that measures storage as a database uses it.",
    long_about = None,
    propagate_version = true
)]
struct Cli {
    /// I/O engine: io_uring (default; falls back to sync where the kernel refuses it) or synchronous pread/pwrite.
    #[arg(long, global = true, value_enum, default_value_t = EngineArg::Auto)]
    engine: EngineArg,

    #[command(subcommand)]
    noun: Noun,
}

#[derive(Subcommand)]
enum Noun {
    /// Block devices and files as the kernel sees them.
    #[command(subcommand)]
    Device(DeviceCommand),
    /// Cairn disk labels: label, list, inspect, repair, unlabel.
    #[command(subcommand)]
    Disk(DiskCommand),
    /// Disk groups: create, list, disks, mount, check, space.
    #[command(subcommand)]
    Group(group_cmd::GroupCommand),
    /// Workloads: vdbench parameter files (`bench run`) or flags (`bench quick`).
    #[command(subcommand)]
    Bench(bench_cmd::BenchCommand),
    /// Reports of runs and AWR reports: compare two side by side.
    #[command(subcommand)]
    Report(report_cmd::ReportCommand),
    /// AWR and Statspack reports: parse them, derive their I/O mix, replay it.
    #[command(subcommand)]
    Awr(awr_cmd::AwrCommand),
    /// List a directory in a group (+DATA/orcl/datafile).
    Ls {
        path: String,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Space used under a path in a group, with and without mirrors.
    Du {
        path: String,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Make a directory in a group.
    Mkdir {
        path: String,
        /// Make missing parent directories too.
        #[arg(short, long)]
        parents: bool,
        #[command(flatten)]
        discover: Discover,
    },
    /// Remove files, aliases or empty directories from a group.
    Rm {
        #[arg(required = true)]
        paths: Vec<String>,
        #[command(flatten)]
        discover: Discover,
    },
    /// Copy a file: OS file (or pipe, FIFO, device, "-" for standard input) to group, group to OS file or device, or group to group. The new name appears only once the data is all there.
    Cp {
        source: String,
        dest: String,
        /// Template (file type) for a new group file: DATAFILE, ONLINELOG, ...
        #[arg(long)]
        template: Option<String>,
        /// Redundancy of a new group file, overriding the template's: external, normal or high.
        #[arg(long)]
        redundancy: Option<String>,
        /// Copy at most SIZE bytes (4M, 1G...): for an endless source such as /dev/urandom; a longer source is cut there, and cp says so.
        #[arg(long, value_name = "SIZE")]
        max_size: Option<String>,
        /// Copying out: overwrite a file or block device even if it carries a filesystem, a Cairn label or another owner's data (never a disk of a group).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        discover: Discover,
    },
    /// Hold groups mounted and serve their files through a FUSE file system a database can use (docs/serve.md). Runs in the foreground until SIGTERM or SIGINT.
    Serve(serve_cmd::ServeArgs),
    /// What the running service holds and has done: its groups, their disks, the I/O its file system served, the long operations (the figures --metrics exports).
    Status {
        #[command(flatten)]
        output: Output,
    },
    /// Volumes: group files the host sees as block devices, for a file system of their own (through the service).
    #[command(subcommand)]
    Volume(volume_cmd::VolumeCommand),
    /// Give a group file another name.
    Mkalias {
        target: String,
        alias: String,
        #[command(flatten)]
        discover: Discover,
    },
}

#[derive(Subcommand)]
enum DeviceCommand {
    /// Show size, sector sizes, transfer limits, discard, stacking, identity and thin usage. Never writes.
    Probe {
        /// Block devices or regular files.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        output: Output,
    },
}

#[derive(Subcommand)]
enum DiskCommand {
    /// Write a Cairn label (header and two backup copies). Refuses devices that carry data of any kind unless --force.
    Label {
        /// Letters, digits and '_', starting with a letter, at most 30; stored in upper case.
        name: String,
        path: PathBuf,
        /// Overwrite another owner's signature or an existing Cairn label.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Remove a Cairn label: every copy of the header.
    Unlabel {
        path: PathBuf,
        /// Remove it even from a disk group member.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        output: Output,
    },
    /// List the devices the discovery string finds, with their Cairn status.
    List {
        #[command(flatten)]
        discover: Discover,
        #[command(flatten)]
        output: Output,
    },
    /// Dump one header copy field by field, with offsets, meanings and a hex view.
    Inspect {
        path: PathBuf,
        /// Which copy: 0 (primary), 1 or 2.
        #[arg(long, default_value_t = 0)]
        copy: usize,
        #[command(flatten)]
        output: Output,
    },
    /// Restore damaged header copies from the newest good copy.
    Repair {
        path: PathBuf,
        /// Say what would be done; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Restore even when the copies disagree on the disk UUID (from the newest copy).
        #[arg(long)]
        force: bool,
        /// Restore even over another owner's data found on the device or in a copy's place.
        #[arg(long)]
        overwrite_foreign: bool,
        #[command(flatten)]
        output: Output,
    },
}

fn engine(kind: EngineArg) -> Result<Box<dyn FileEngine>> {
    engine_depth(kind, ADMIN_DEPTH)
}

pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

fn warn(warnings: &[String]) {
    for warning in warnings {
        eprintln!("cairn: warning: {}", one_line(warning));
    }
}

pub(crate) fn now_unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn run(cli: Cli) -> Result<Outcome> {
    let host = Host::real();
    let engine = cli.engine;
    match cli.noun {
        Noun::Group(command) => {
            let (discover, json) = command.flags();
            let discover = discover.map(str::to_string);
            let request = command.request()?;
            carry_out(request, discover.as_deref(), json, engine)
        }
        Noun::Ls {
            path,
            discover,
            output,
        } => carry_out(
            Request::Ls { path },
            discover.discover.as_deref(),
            output.json,
            engine,
        ),
        Noun::Du {
            path,
            discover,
            output,
        } => carry_out(
            Request::Du { path },
            discover.discover.as_deref(),
            output.json,
            engine,
        ),
        Noun::Mkdir {
            path,
            parents,
            discover,
        } => carry_out(
            Request::Mkdir { path, parents },
            discover.discover.as_deref(),
            false,
            engine,
        ),
        Noun::Rm { paths, discover } => carry_out(
            Request::Rm { paths },
            discover.discover.as_deref(),
            false,
            engine,
        ),
        Noun::Mkalias {
            target,
            alias,
            discover,
        } => carry_out(
            Request::Mkalias { target, alias },
            discover.discover.as_deref(),
            false,
            engine,
        ),
        Noun::Cp {
            source,
            dest,
            template,
            redundancy,
            max_size,
            force,
            discover,
        } => {
            let max_bytes = max_size
                .as_deref()
                .map(parse_size)
                .transpose()
                .context("--max-size")?;
            let copy = cp_cmd::Copy {
                source,
                dest,
                template,
                redundancy,
                max_bytes,
                force,
                discover: discover.discover,
                engine,
            };
            copy.run()
        }
        Noun::Volume(command) => {
            let json = command.json();
            carry_out(command.request()?, None, json, engine)
        }
        Noun::Status { output } => carry_out(Request::Status, None, output.json, engine),
        Noun::Bench(command) => bench_cmd::run_bench(command, engine).map(|()| Outcome::Done),
        Noun::Report(command) => report_cmd::run_report(command).map(|()| Outcome::Done),
        Noun::Awr(command) => awr_cmd::run_awr(command, engine).map(|()| Outcome::Done),
        Noun::Serve(args) => serve_cmd::serve(engine, &host, &args),
        Noun::Device(DeviceCommand::Probe { paths, output }) => {
            device_probe(&paths, output.json, &host)
        }
        Noun::Disk(command) => disk(command, engine, &host),
    }
}

/// `cairn device probe`: what each path is, as text or JSON; a path that
/// cannot be probed fails the command after the others are shown.
fn device_probe(paths: &[PathBuf], json: bool, host: &Host) -> Result<Outcome> {
    let mut probes = Vec::new();
    let mut failures = Vec::new();
    for path in paths {
        match cairn_io::probe::probe(path, host) {
            Ok(p) => probes.push(p),
            Err(e) => failures.push(e.to_string()),
        }
    }
    if json {
        print_json(&probes)?;
    } else {
        print!("{}", render::probes(&probes));
    }
    Ok(match failures.len() {
        0 => Outcome::Done,
        _ => Outcome::Failed(failures.join("; ")),
    })
}

fn disk(command: DiskCommand, engine_kind: EngineArg, host: &Host) -> Result<Outcome> {
    let mut engine = engine(engine_kind)?;
    let engine = engine.as_mut();
    match command {
        DiskCommand::Label {
            name,
            path,
            force,
            discover,
            output,
        } => {
            let label = DiskLabel::parse(&name)?;
            let request = LabelRequest {
                label,
                force,
                disk_uuid: uuid::Uuid::new_v4(),
                now_unix_seconds: now_unix_seconds(),
                discovery: Some(discovery(discover.discover.as_deref())?),
            };
            let report = admin::label(engine, host, &path, &request)?;
            warn(&report.warnings);
            if output.json {
                print_json(&report)?;
            } else {
                print!("{}", render::label(&report));
            }
        }
        DiskCommand::Unlabel {
            path,
            force,
            output,
        } => {
            let report = admin::unlabel(engine, host, &path, force)?;
            if output.json {
                print_json(&report)?;
            } else {
                print!("{}", render::unlabel(&report));
            }
        }
        DiskCommand::List { discover, output } => {
            let discovery = discovery(discover.discover.as_deref())?;
            let report = admin::list(engine, host, &discovery)?;
            if discovery.source != cairn_store::discovery::DiscoverySource::Default {
                for glob in &report.unmatched_globs {
                    eprintln!(
                        "cairn: warning: discovery glob '{glob}' matched no block device or file"
                    );
                }
            }
            if output.json {
                print_json(&report)?;
            } else {
                print!("{}", render::list(&report));
            }
        }
        DiskCommand::Inspect { path, copy, output } => {
            let report = admin::inspect(engine, host, &path, copy)?;
            if output.json {
                print_json(&report)?;
            } else {
                print!("{}", render::inspect(&report));
            }
            if !report.valid {
                return Ok(Outcome::Failed(invalid_copy_message(&path, &report)));
            }
        }
        DiskCommand::Repair {
            path,
            dry_run,
            force,
            overwrite_foreign,
            output,
        } => {
            let options = admin::RepairOptions {
                dry_run,
                force,
                overwrite_foreign,
            };
            let report = admin::repair(engine, host, &path, options)?;
            warn(&report.warnings);
            if output.json {
                print_json(&report)?;
            } else {
                print!("{}", render::repair(&report));
            }
        }
    }
    Ok(Outcome::Done)
}

fn invalid_copy_message(path: &Path, report: &admin::InspectReport) -> String {
    format!(
        "copy {} of {} is not a valid Cairn header ({}); `cairn disk repair {}` restores it if another copy is good",
        report.copy,
        path.display(),
        report.state,
        path.display()
    )
}

pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn main() -> ExitCode {
    // Like any Unix tool, stop quietly when the reader goes away (`cairn disk
    // list | head`) instead of failing on EPIPE.
    signals::sigpipe_ends_the_process();
    let cli = Cli::parse();
    let outcome = run(cli);
    match outcome {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::Failed(message)) => {
            eprintln!("cairn: error: {}", one_line(&message));
            ExitCode::FAILURE
        }
        Ok(Outcome::Degraded(message)) => {
            eprintln!("cairn: warning: {}", one_line(&message));
            ExitCode::from(EXIT_DEGRADED)
        }
        Err(error) => {
            eprintln!("cairn: error: {}", one_line(&format!("{error:#}")));
            // A request line the service could not read at all is a
            // malformed command, as clap's refusals are (exit 2).
            let usage = error
                .downcast_ref::<forward::Refused>()
                .is_some_and(|r| r.status == 2);
            if usage {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
