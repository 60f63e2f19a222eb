//! `cairn serve`: mount the groups live, hand them to the service
//! (`cairn-serve`), dismount them when it stops.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Result};
use cairn_io::host::Host;
use cairn_store::discovery::DiscoveryString;
use cairn_store::group_lock::GroupLock;
use cairn_store::{group, group_admin, group_lock};
use clap::Args;

use crate::args::{discovery, engine_kind, Discover, EngineArg};
use cairn_command::Outcome;

/// Requests a live group's metadata engine holds.
const SERVE_DEPTH: usize = 64;
/// FUSE worker threads unless told otherwise. A worker serves one request
/// at a time and waits on the disks for it, so the requests in flight are at
/// most the workers: a database at queue depth 32 needs many more than the
/// cores. Measured on 2 cores (bench/serve.sh, 8 KiB O_DIRECT at QD32):
/// 2 workers 50k read IOPS, 8 65k, 16 88k, 32 and 64 no better.
const THREADS_DEFAULT: u16 = 16;

#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Where the file system is mounted: DIR/DATA/x.dbf is +DATA/x.dbf. An empty directory.
    #[arg(long, value_name = "DIR", default_value = "/mnt/cairn")]
    mountpoint: PathBuf,
    /// A group to serve (repeat for more); default: every group discovery finds.
    #[arg(long = "group", value_name = "NAME")]
    groups: Vec<String>,
    /// The control socket the CLI reaches the service by (default: $CAIRN_SOCKET, else /run/cairn/cairn.sock).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Members of this group may use the control socket too (root and the service's own user always may): listings, and file commands checked against their own credentials as the mount checks them.
    #[arg(long, value_name = "GROUP")]
    socket_group: Option<String>,
    /// Members of this group may also give administrative commands through the socket (online, offline, alter, scrub, reclaim, set ...); without it only root and the service's own user may. Its members must reach the socket too (--socket-group).
    #[arg(long, value_name = "GROUP")]
    admin_group: Option<String>,
    /// Let every user reach the file system (FUSE's allow_other; each file's mode and owner still apply). Without it only root may: a database running as its own user needs it.
    #[arg(long)]
    allow_other: bool,
    /// Answer Prometheus scrapes (GET /metrics) at this address, e.g. 127.0.0.1:9464 (off by default).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Attach again the volumes attached when the service last stopped (or was killed): recorded in the run directory.
    #[arg(long)]
    attach_volumes: bool,
    /// FUSE worker threads (requests served at once).
    #[arg(long, default_value_t = THREADS_DEFAULT, value_parser = clap::value_parser!(u16).range(1..=64))]
    threads: u16,
    /// How long SIGTERM waits for files under the mount to be closed before it says the file system is in use and goes on serving (0s: say so at once; at most 1h).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_stop_wait)]
    stop_wait: std::time::Duration,
    #[command(flatten)]
    discover: Discover,
}

/// The longest `--stop-wait`: past it a service manager has long since
/// given up (systemd's stop timeout, 120 s in dist/cairn.service, ends a
/// longer wait with SIGKILL).
const STOP_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(3600);

fn parse_stop_wait(text: &str) -> Result<std::time::Duration, String> {
    let wait = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if wait > STOP_WAIT_MAX {
        return Err(format!(
            "at most {} (a service manager ends a longer stop with SIGKILL)",
            humantime::format_duration(STOP_WAIT_MAX)
        ));
    }
    Ok(wait)
}

pub(crate) fn serve(engine: EngineArg, host: &Host, args: &ServeArgs) -> Result<Outcome> {
    // Before any thread exists: a SIGTERM while the groups mount waits,
    // then stops the service cleanly.
    let signals = cairn_serve::Signals::block()?;
    // A client that goes away mid-answer is an EPIPE for its connection,
    // never a signal that ends the service (`main` sets SIGPIPE to its
    // default for the commands that print).
    crate::signals::sigpipe_ignored();
    init_logging();
    // Refused before any group is mounted.
    cairn_serve::check_mountpoint(&args.mountpoint)?;
    let d = discovery(args.discover.discover.as_deref())?;
    let socket_path = args
        .socket
        .clone()
        .unwrap_or_else(cairn_serve::control::socket_path);
    // Before any thread is made (they inherit it); after the checks that
    // refuse a bad command line, which say one line.
    let flusher = cairn_serve::mark_io_flusher();
    let socket = cairn_serve::ControlSocket::bind(&socket_path, args.socket_group.as_deref())?;
    let names = group_names(args, host, &d)?;
    let Held {
        groups,
        locks,
        paths,
    } = mount_groups(&names, host, &d, engine)?;
    let options = cairn_serve::ServeOptions {
        mountpoint: args.mountpoint.clone(),
        allow_other: args.allow_other,
        threads: usize::from(args.threads),
        metrics: args.metrics.clone(),
        stop_wait: args.stop_wait,
    };
    let mountpoint =
        std::path::absolute(&args.mountpoint).unwrap_or_else(|_| args.mountpoint.clone());
    let admin_gid = args
        .admin_group
        .as_deref()
        .map(cairn_serve::control::group_id)
        .transpose()?;
    let host_options = cairn_serve::host::HostOptions {
        mountpoint,
        discovery: d,
        discover_flag: args.discover.discover.clone(),
        engine: engine_kind(engine),
        admin_gid,
        paths,
    };
    let attach_volumes = args.attach_volumes;
    let commands: cairn_serve::MakeCommands = Box::new(move |held| {
        let host = Arc::new(cairn_serve::host::ServedHost::new(held, host_options));
        host.resume_pending();
        if attach_volumes {
            host.attach_recorded_volumes();
        }
        host.start_repair_timer();
        host
    });
    let control = cairn_serve::Control { socket, commands };
    if let Err(e) = &flusher {
        cairn_serve::warn_not_io_flusher(e);
    }
    let (groups, served) = cairn_serve::serve(groups, &options, &signals, Some(control));
    let failed = dismount_all(groups);
    drop(locks);
    let stopped = served?;
    tracing::info!(signal = ?stopped, "stopped");
    Ok(if failed.is_empty() {
        Outcome::Done
    } else {
        Outcome::Failed(format!(
            "could not dismount cleanly: {}; the next mount replays the journal",
            failed.join("; ")
        ))
    })
}

/// Dismount every group (journal committed, checkpointed); the failures.
/// The groups to serve: those named, or every complete group discovery
/// finds (refused when there is none, saying how to make one).
fn group_names(args: &ServeArgs, host: &Host, d: &DiscoveryString) -> Result<Vec<String>> {
    if !args.groups.is_empty() {
        return Ok(args.groups.clone());
    }
    let found = group_admin::find_groups(host, d)?;
    let names: Vec<String> = found
        .into_iter()
        .filter(|g| g.complete)
        .map(|g| g.name)
        .collect();
    if names.is_empty() {
        bail!(
            "no group found on the disks discovery reaches ({}); create one (`cairn group create`) or say where the disks are (--discover)",
            d.text
        );
    }
    Ok(names)
}

/// The groups mounted live for the service, by upper-case name.
struct Held {
    groups: Vec<(String, group::LiveGroup)>,
    /// Each group's lock, held while it is served.
    locks: Vec<GroupLock>,
    /// The path each member was opened by, by group and device id.
    paths: BTreeMap<String, BTreeMap<u32, PathBuf>>,
}

/// Mount each of `names` live, logging what each mount found; a group that
/// cannot be mounted fails the whole, after those mounted so far are
/// dismounted (not dropped).
fn mount_groups(
    names: &[String],
    host: &Host,
    d: &DiscoveryString,
    engine: EngineArg,
) -> Result<Held> {
    let mut groups = Vec::new();
    let mut locks = Vec::new();
    let mut paths = BTreeMap::new();
    for name in names {
        let mounted = group_admin::mount_live(
            host,
            d,
            name,
            &group_lock::run_dir(),
            group::MissingDisks::MarkOffline,
            group::heartbeat::Takeover::Refuse,
            engine_kind(engine),
            SERVE_DEPTH,
        );
        let m = match mounted {
            Ok(m) => m,
            Err(e) => {
                dismount_all(groups);
                return Err(anyhow::Error::new(e).context(format!("cannot serve group {name}")));
            }
        };
        // What the CLI says of a mount, logged; but the disks it marked
        // OFFLINE (or resynced) are said by the group itself, one line per
        // state change (`disk_states.rs`).
        for n in m.report.notices(name) {
            match (n.disk_state, n.warning) {
                (true, _) => {}
                (false, true) => tracing::warn!(group = %name, "{}", n.text),
                (false, false) => tracing::info!(group = %name, "{}", n.text),
            }
        }
        locks.push(m.lock);
        paths.insert(name.to_ascii_uppercase(), m.paths);
        groups.push((name.to_ascii_uppercase(), m.group));
    }
    Ok(Held {
        groups,
        locks,
        paths,
    })
}

fn dismount_all(groups: Vec<(String, group::LiveGroup)>) -> Vec<String> {
    let mut failed = Vec::new();
    for (name, g) in groups {
        match g.dismount() {
            Ok(()) => tracing::info!(group = %name, "dismounted"),
            Err(e) => failed.push(format!("group {name}: {e}")),
        }
    }
    failed
}

/// Structured log lines on stderr; `RUST_LOG` style filtering is not
/// wired yet: info and above.
fn init_logging() {
    use tracing_subscriber::prelude::*;
    let targets = tracing_subscriber::filter::Targets::new()
        .with_default(tracing::Level::INFO)
        // fuser warns when its own unmount, as the session ends, finds the
        // file system gone: the service unmounts it first (to see EBUSY),
        // so that is every stop, not news.
        .with_target("fuser::mnt", tracing::Level::ERROR);
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::INFO)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .finish()
        .with(targets)
        .try_init();
}
