//! The service as a host of commands (`cairn_command::Host`): the groups
//! it holds live, its long operations' threads, its file system and its
//! volumes. Every command a client sends is decoded from its socket
//! (`control.rs`, `cairn_command::wire`) and carried out by the one
//! executor (`cairn_command::execute`) the CLI runs when no service holds
//! the group; nothing here parses a command line or decides what a command
//! may do.
//!
//! Shared state: `busy` (the group each long operation runs on),
//! `background` (their threads, and whether the service is stopping), the
//! discovery string in force and each group's table of paths are leaves,
//! held only to look or change, never across a group's locks. `volumes` is
//! held across each volume command, before any group's locks, and never by
//! the file system's requests. `repair` (the repair timer's stop flag and
//! the groups whose rebuild it still has to start) is a leaf, and its
//! thread holds no lock while it waits.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use cairn_command::error::CommandError;
use cairn_command::event::{Event, Events};
use cairn_command::exec::{self, CopySource, Input};
use cairn_command::host::{
    Access, Busy, Detached, Host, LongOp, Mount, Opened, Service, Volumes, Work,
};
use cairn_command::reply::{GroupSummary, Outcome, Reply, Status};
use cairn_command::request::{Concern, Request};
use cairn_command::wire::{ReplyLine, RequestLine};
use cairn_command::Caller;
use cairn_io::poison::{recover, Recover};
use cairn_io::EngineKind;
use cairn_store::discovery::{DiscoverySource, DiscoveryString};
use cairn_store::group::{Group, GroupError};
use cairn_store::group_admin;
use cairn_store::group_lock;
use cairn_store::names::GroupPath;

use crate::control::{Commands, Peer, Replier};
use crate::held::Held;

/// The power a pending rebalance resumes at when its recorded power does
/// not fit a command's (it always does, unless the record is damaged).
const REBALANCE_RESUME_POWER: u16 = 4;

/// The power to run a rebalance the group recorded as pending at: its
/// recorded power (`None`: none recorded), within a command's bounds.
fn resume_power(recorded: Option<usize>) -> u16 {
    recorded
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(REBALANCE_RESUME_POWER)
        .min(cairn_command::request::POWER_MAX)
}

/// A group the service holds, as commands see it.
pub struct HeldGroup {
    held: Held,
    /// Its disks' paths, by device id in the metadata plane's engine:
    /// those found at mount, and disks added since. A leaf.
    paths: Arc<Mutex<BTreeMap<u32, PathBuf>>>,
}

/// The service's file system over one group.
struct ServedMount {
    names: crate::fs::Names,
    /// Where the group's root is served.
    root: PathBuf,
}

impl Mount for ServedMount {
    fn remove(
        &self,
        path: &GroupPath,
        check: &dyn Fn(&Group<'static>) -> Result<(), GroupError>,
    ) -> Result<(), GroupError> {
        self.names.remove(path, check)
    }

    fn served_path(&self, path: &GroupPath) -> PathBuf {
        let mut at = self.root.clone();
        for c in &path.components {
            at.push(c.as_str());
        }
        at
    }
}

#[derive(Default)]
struct Background {
    threads: Vec<JoinHandle<()>>,
    stopping: bool,
}

/// How the service is set up to answer.
pub struct HostOptions {
    /// Where the file system is mounted.
    pub mountpoint: PathBuf,
    /// The discovery string resolved at start, and the `--discover` it
    /// came from, if any (it wins over the environment and the
    /// configuration, at start and at SIGHUP).
    pub discovery: DiscoveryString,
    pub discover_flag: Option<String>,
    pub engine: EngineKind,
    /// Members of this group may give administrative commands (root and
    /// the service's own user always may).
    pub admin_gid: Option<u32>,
    /// Each group's member paths, by device id, as its mount found them.
    pub paths: BTreeMap<String, BTreeMap<u32, PathBuf>>,
}

/// The service's commands (see the module's header).
pub struct ServedHost {
    groups: Vec<Arc<HeldGroup>>,
    mountpoint: PathBuf,
    started: Instant,
    /// The discovery string in force: as resolved at start, and again at
    /// each SIGHUP. A leaf.
    discovery: Mutex<DiscoveryString>,
    discover_flag: Option<String>,
    engine: EngineKind,
    admin_gid: Option<u32>,
    /// The groups a long operation runs on, and which. A leaf.
    busy: Arc<Mutex<BTreeMap<String, &'static str>>>,
    /// Held across each volume command (and the stop's detaching), so that
    /// one looks at the loop devices and acts on them, and changes the
    /// record of attachments, at a time. Taken before any group's locks,
    /// never by the file system's requests.
    volumes: Mutex<()>,
    /// The threads of long operations whose clients did not wait, and
    /// whether the service is stopping (no new one then). A leaf.
    background: Mutex<Background>,
    /// The repair timer ([`ServedHost::start_repair_timer`]).
    repair: Arc<RepairTimer>,
}

/// The repair timer's state: whether the service is stopping (and the
/// condition variable its thread waits on, a second at a time, to hear
/// it), the groups whose rebuild it has still to start (a long operation
/// was running when their disks were dropped), and the refusals it has
/// already logged (said once, not every second). Leaf locks.
#[derive(Default)]
struct RepairTimer {
    stopping: Mutex<bool>,
    stop: std::sync::Condvar,
    rebuild_wanted: Mutex<std::collections::BTreeSet<String>>,
    said: Mutex<std::collections::BTreeSet<String>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// How often the repair timer looks at the groups' OFFLINE disks.
const REPAIR_TICK: std::time::Duration = std::time::Duration::from_secs(1);

/// Events that go to the service's log (a background operation's, once
/// its client has been answered; what SIGHUP finds).
pub struct Log;

impl Events for Log {
    fn send(&mut self, event: Event) {
        match event {
            Event::Note(line) => tracing::info!("{line}"),
            // Every disk state change is logged once, by the group itself
            // as the superblocks record it (`disk_states.rs`), whoever's
            // command met it: a command's own account would say it twice.
            Event::TakenOffline { .. } | Event::Mounted { .. } | Event::Progress(_) => {}
        }
    }
}

/// Events that go to the client while it reads; what they say of the
/// group and its disks goes to the log as well (the log is the service's
/// record of what happened to its disks, whoever asked).
struct ToClient<'r, 's>(&'r mut Replier<'s>);

impl Events for ToClient<'_, '_> {
    fn send(&mut self, event: Event) {
        if !matches!(event, Event::Progress(_)) {
            Log.send(event.clone());
        }
        if !self.0.gone() {
            self.0.send(&ReplyLine::Event(event));
        }
    }
}

/// A long operation's reply, said in one line of the log.
fn log_outcome(group: &str, what: &str, reply: &Result<Reply, CommandError>) {
    match reply {
        Ok(r) => match r.outcome() {
            Outcome::Done => tracing::info!(group = %group, "{what} done: {}", summary(r)),
            Outcome::Failed(m) | Outcome::Degraded(m) => {
                tracing::warn!(group = %group, "{what}: {m}")
            }
        },
        Err(e) => tracing::warn!(group = %group, "{what} failed: {e}"),
    }
}

/// What a finished long operation did, in a few words.
fn summary(reply: &Reply) -> String {
    match reply {
        Reply::Online(o) => format!(
            "{} disk(s) ONLINE ({}); {} stale AU(s) copied{}",
            o.resync.disks_online.len(),
            o.resync.disks_online.join(", "),
            o.resync.aus_copied,
            if o.resync.disks_left.is_empty() {
                String::new()
            } else {
                format!("; stopped: {}", o.resync.disks_left.join("; "))
            }
        ),
        Reply::Rebalanced(r) => format!(
            "{} AU(s) moved in {} move(s), {} copies rebuilt",
            r.rebalance.aus_moved, r.rebalance.moves_done, r.rebalance.copies_rebuilt
        ),
        Reply::Changed { then, .. } => summary(then),
        Reply::Scrub { report, .. } => format!(
            "{} MiB read, {} problem(s)",
            report.bytes_read >> 20,
            report.problems.len()
        ),
        Reply::Reclaim { report, .. } => format!(
            "{} MiB of {} MiB returnable given back",
            report.returned_bytes >> 20,
            report.returnable_bytes >> 20
        ),
        _ => "done".into(),
    }
}

impl ServedHost {
    pub fn new(held: Vec<Held>, mut options: HostOptions) -> Self {
        let groups = held
            .into_iter()
            .map(|held| {
                let paths = options.paths.remove(&held.name).unwrap_or_default();
                Arc::new(HeldGroup {
                    held,
                    paths: Arc::new(Mutex::new(paths)),
                })
            })
            .collect();
        Self {
            groups,
            mountpoint: options.mountpoint,
            started: Instant::now(),
            discovery: Mutex::new(options.discovery),
            discover_flag: options.discover_flag,
            engine: options.engine,
            admin_gid: options.admin_gid,
            busy: Arc::new(Mutex::new(BTreeMap::new())),
            volumes: Mutex::new(()),
            background: Mutex::new(Background::default()),
            repair: Arc::new(RepairTimer::default()),
        }
    }

    /// Start the repair timer (issue 34 item 17): `disk_repair_time` runs
    /// while the group is served, as it does for ASM. Once a second a
    /// thread of its own drops by force the OFFLINE disks whose timer ran
    /// out (`LiveGroup::drop_expired`, a metadata operation; never while a
    /// long operation runs on the group: it waits for the next second) and
    /// starts the rebalance that rebuilds their copies from the mirrors, in
    /// the background as `group rebalance` would. It holds the host only
    /// for a tick, and stops with the service.
    pub fn start_repair_timer(self: &Arc<Self>) {
        let host = Arc::downgrade(self);
        let timer = self.repair.clone();
        let spawned = std::thread::Builder::new()
            .name("cairn-repair-timer".into())
            .spawn(move || loop {
                {
                    let stopping = timer.stopping.lock_or_recover();
                    let (stopping, _) = recover(timer.stop.wait_timeout_while(
                        stopping,
                        REPAIR_TICK,
                        |s| !*s,
                    ));
                    if *stopping {
                        return;
                    }
                }
                let Some(host) = host.upgrade() else {
                    return;
                };
                host.repair_tick();
            });
        match spawned {
            Ok(t) => *self.repair.thread.lock_or_recover() = Some(t),
            Err(e) => tracing::warn!(
                "cannot start the repair timer ({e}): OFFLINE disks are dropped when their repair time ran out only at the next mount"
            ),
        }
    }

    /// One look of the repair timer at every group.
    fn repair_tick(&self) {
        for g in &self.groups {
            let name = &g.held.name;
            let opened = self.opened(g);
            let Ok(busy) = self.claim(&opened, "rebalance") else {
                continue;
            };
            let expired = g.held.group.drop_expired();
            drop(busy);
            let (dropped, refused) = match expired {
                Ok(r) => r,
                Err(e) => {
                    self.say_once(format!(
                        "group {name}: the repair timer cannot drop disks: {e}"
                    ));
                    continue;
                }
            };
            // Each drop is said by the group itself, as its state change
            // (OFFLINE -> DROPPING, the repair time ran out: `disk_states.rs`).
            for why in refused {
                self.say_once(format!("group {name}: {why}"));
            }
            if !dropped.is_empty() {
                self.repair
                    .rebuild_wanted
                    .lock_or_recover()
                    .insert(name.clone());
            }
        }
        let wanted: Vec<String> = self
            .repair
            .rebuild_wanted
            .lock_or_recover()
            .iter()
            .cloned()
            .collect();
        for name in wanted {
            let Some(g) = self.held(&name) else { continue };
            let recorded = g.held.group.meta(|m| m.rebalance_pending()).ok().flatten();
            let power = resume_power(recorded.filter(|p| *p > 0));
            let started = self.rebalance_in_background(&name, power);
            // Refused while another long operation runs: the next tick
            // tries again.
            if started.is_ok() {
                tracing::info!(group = %name, power, "rebuilding the copies of the disks the repair timer dropped");
                self.repair.rebuild_wanted.lock_or_recover().remove(&name);
            }
        }
    }

    /// Start `group rebalance NAME --power POWER` in the background, as a
    /// client would, through the executor; its outcome goes to the log.
    fn rebalance_in_background(&self, name: &str, power: u16) -> Result<Reply, CommandError> {
        cairn_command::execute(
            self,
            &Caller::this_process(),
            Request::GroupRebalance {
                group: name.to_string(),
                power,
                wait: false,
            },
            Input::default(),
            &mut Log,
        )
    }

    /// Log `line` the first time the repair timer finds it.
    fn say_once(&self, line: String) {
        if self.repair.said.lock_or_recover().insert(line.clone()) {
            tracing::warn!("{line}");
        }
    }

    fn held(&self, name: &str) -> Option<&Arc<HeldGroup>> {
        let name = name.trim_start_matches('+');
        self.groups
            .iter()
            .find(|g| g.held.name.eq_ignore_ascii_case(name))
    }

    fn opened(&self, g: &HeldGroup) -> Arc<Opened> {
        let offline_before = g
            .held
            .group
            .meta(|m| m.disks_taken_offline().len())
            .unwrap_or(0);
        Arc::new(Opened {
            name: g.held.name.clone(),
            live: g.held.group.clone(),
            paths: g.paths.clone(),
            mount: Some(Arc::new(ServedMount {
                names: g.held.names.clone(),
                root: self.mountpoint.join(&g.held.name),
            })),
            report: None,
            lock: None,
            offline_before,
        })
    }

    fn discovery_now(&self) -> DiscoveryString {
        self.discovery.lock_or_recover().clone()
    }

    /// Whether this service carries the command out: a group it holds
    /// (and no other of that name: the client's discovery string is the
    /// service's, or reaches the very group the service holds), the
    /// listing when both discover alike, what the service is always.
    fn carries_out(&self, concern: &Concern, discovery: &str) -> bool {
        match concern {
            Concern::Group(name) => {
                let Some(g) = self.held(name) else {
                    return false;
                };
                if discovery == self.discovery_now().text {
                    return true;
                }
                let Ok(uuid) = g.held.group.meta(|m| m.uuid()) else {
                    return false;
                };
                let Ok(theirs) = DiscoveryString::parse(discovery, DiscoverySource::Flag) else {
                    return false;
                };
                group_admin::find_groups(&cairn_io::host::Host::real(), &theirs).is_ok_and(
                    |found| {
                        found
                            .iter()
                            .any(|f| f.uuid == uuid && f.name.eq_ignore_ascii_case(name))
                    },
                )
            }
            Concern::Discovery => discovery == self.discovery_now().text,
            Concern::Service => true,
            Concern::Asker => false,
        }
    }

    /// The asker's credentials, and whether it may give administrative
    /// commands: root, the service's own user, a member of the admin
    /// group.
    fn caller(&self, peer: &Peer) -> Caller {
        // SAFETY: geteuid has no preconditions.
        let own = unsafe { libc::geteuid() };
        let admin = peer.uid == 0
            || peer.uid == own
            || self
                .admin_gid
                .is_some_and(|g| peer.gid == g || peer.groups.contains(&g));
        Caller {
            uid: peer.uid,
            gid: peer.gid,
            groups: peer.groups.clone(),
            admin,
        }
    }

    /// SIGHUP: the discovery string resolved again (flag, environment,
    /// configuration file), then for each group held, its members that are
    /// not attached (missing when it mounted, so OFFLINE) and that discovery
    /// now reaches are attached — `group online` then brings them back —
    /// and groups found that are not served are named. Everything is said
    /// in the log; a failure leaves what was in force.
    fn rediscover(&self) {
        let d = match cairn_command::resolve_discovery(self.discover_flag.as_deref()) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "SIGHUP: the discovery string cannot be read; the one in force stays");
                return;
            }
        };
        let host = cairn_io::host::Host::real();
        let found = match group_admin::find_groups(&host, &d) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, discovery = %d.text, "SIGHUP: discovery failed; the one in force stays");
                return;
            }
        };
        if self.discovery.lock_or_recover().text != d.text {
            tracing::info!(discovery = %d.text, "SIGHUP: the discovery string changed");
        }
        *self.discovery.lock_or_recover() = d.clone();
        for g in &self.groups {
            let Ok(uuid) = g.held.group.meta(|m| m.uuid()) else {
                continue;
            };
            let opened = self.opened(g);
            let group = found.iter().find(|f| f.uuid == uuid);
            if let Some(group) = group {
                exec::attach_found(&opened, group, &d.text, ("SIGHUP", true), &mut Log);
            }
            for line in exec::left_discovery(&opened, group, &d.text) {
                tracing::warn!(group = %g.held.name, "SIGHUP: {line}");
            }
        }
        for f in found.iter().filter(|f| f.complete) {
            if self.held(&f.name).is_none() {
                tracing::info!(
                    group = %f.name,
                    "SIGHUP: group found and not served; restart the service to serve it (every group found, or --group {})",
                    f.name
                );
            }
        }
    }

    /// `--attach-volumes`: the volumes attached when the service last
    /// stopped, attached again (each one's outcome in the log).
    pub fn attach_recorded_volumes(&self) {
        for name in crate::volume::recorded(&group_lock::run_dir()) {
            let attached = cairn_command::execute(
                self,
                &Caller::this_process(),
                Request::VolumeAttach { name: name.clone() },
                Input::default(),
                &mut Log,
            );
            match attached {
                Ok(Reply::VolumeAttached { device, .. }) => {
                    tracing::info!(volume = %name, device = %device.display(), "volume attached again")
                }
                Ok(_) => {}
                Err(e) if e.to_string().contains("attached already") => {}
                Err(e) => {
                    tracing::warn!(volume = %name, error = %e, "cannot attach the volume again")
                }
            }
        }
    }

    /// Resume in the background, at its recorded power, the rebalance a
    /// group has pending (a stop or a crash interrupted it): what `cairn
    /// group rebalance` would resume. One paused (power 0) stays paused.
    pub fn resume_pending(&self) {
        for g in &self.groups {
            let pending = g.held.group.meta(|m| m.rebalance_pending()).ok().flatten();
            let Some(recorded) = pending else {
                continue;
            };
            let name = &g.held.name;
            if recorded == 0 {
                tracing::info!(group = %name, "a rebalance is pending, paused (power 0); `cairn group rebalance {name} --power N` resumes it");
                continue;
            }
            let power = resume_power(Some(recorded));
            tracing::info!(group = %name, power, "resuming the rebalance pending");
            let started = self.rebalance_in_background(name, power);
            if let Err(e) = started {
                tracing::warn!(group = %name, "the pending rebalance did not resume: {e}");
            }
        }
    }
}

impl Host for ServedHost {
    fn open(
        &self,
        name: &str,
        _access: Access,
        _events: &mut dyn Events,
    ) -> Result<Arc<Opened>, CommandError> {
        let g = self.held(name).ok_or_else(|| {
            CommandError::failed(format!(
                "group {} is not held by this service",
                name.trim_start_matches('+').to_ascii_uppercase()
            ))
        })?;
        Ok(self.opened(g))
    }

    fn close(
        &self,
        group: Arc<Opened>,
        failed: bool,
        events: &mut dyn Events,
    ) -> Result<(), CommandError> {
        if failed {
            exec::say_taken_offline(&group, events);
        }
        Ok(())
    }

    fn discovery(&self) -> Result<DiscoveryString, CommandError> {
        Ok(self.discovery_now())
    }

    fn engine_kind(&self) -> EngineKind {
        self.engine
    }

    fn run_dir(&self) -> PathBuf {
        group_lock::run_dir()
    }

    fn held_summary(&self, name: &str) -> Option<GroupSummary> {
        let g = self.held(name)?;
        g.held.group.meta(|m| exec::summary_of(m)).ok()
    }

    fn claim(&self, group: &Opened, what: &'static str) -> Result<Busy, CommandError> {
        let mut busy = self.busy.lock_or_recover();
        if let Some(running) = busy.get(&group.name) {
            return Err(CommandError::failed(format!(
                "a {running} is running on group {} already; `cairn group ops {}` follows it",
                group.name, group.name
            )));
        }
        busy.insert(group.name.clone(), what);
        let map = self.busy.clone();
        let name = group.name.clone();
        Ok(Busy::new(move || {
            map.lock_or_recover().remove(&name);
        }))
    }

    fn long(
        &self,
        group: &Arc<Opened>,
        busy: Busy,
        op: LongOp,
        work: Work,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        if op.wait {
            let reply = work(events);
            drop(busy);
            return reply;
        }
        let name = group.name.clone();
        let what = op.what;
        // Under the lock `stop` takes the threads in: none starts after.
        let mut background = self.background.lock_or_recover();
        if background.stopping {
            return Err(CommandError::failed(format!(
                "the Cairn service is stopping; the {what} was not started"
            )));
        }
        let thread = std::thread::Builder::new()
            .name(format!("cairn-{what}"))
            .spawn(move || {
                let _busy = busy;
                let reply = work(&mut Log);
                log_outcome(&name, what, &reply);
            })
            .map_err(|e| {
                CommandError::failed(format!("cannot start a thread for the {what}: {e}"))
            })?;
        background.threads.retain(|t| !t.is_finished());
        background.threads.push(thread);
        Ok(Reply::Started(cairn_command::reply::Started {
            group: group.name.clone(),
            what: what.to_string(),
            power: op.power,
        }))
    }

    fn service(&self) -> Option<&dyn Service> {
        Some(self)
    }
}

impl Service for ServedHost {
    fn pid(&self) -> u32 {
        std::process::id()
    }

    fn status(&self) -> Status {
        let held: Vec<Held> = self.groups.iter().map(|g| g.held.clone()).collect();
        crate::metrics::status_of(&held, self.started, &self.mountpoint)
    }

    fn groups(&self) -> Vec<String> {
        self.groups.iter().map(|g| g.held.name.clone()).collect()
    }

    fn volumes(&self) -> &dyn Volumes {
        self
    }
}

impl Volumes for ServedHost {
    fn one_at_a_time(&self) -> MutexGuard<'_, ()> {
        self.volumes.lock_or_recover()
    }

    fn attached_to(&self, at: &Path) -> Option<PathBuf> {
        crate::volume::attached_to(at)
    }

    fn attach(&self, at: &Path, sector_bytes: u32) -> Result<PathBuf, CommandError> {
        let device = crate::volume::attach(at, sector_bytes).map_err(|e| {
            CommandError::failed(format!(
                "cannot attach {} to a loop device: {e}",
                at.display()
            ))
        })?;
        tracing::info!(file = %at.display(), device = %device.display(), "volume attached");
        Ok(device)
    }

    fn detach(&self, device: &Path, at: &Path) -> Result<Detached, CommandError> {
        let done = crate::volume::detach(device, at).map_err(|e| {
            CommandError::failed(format!("cannot detach {}: {e}", device.display()))
        })?;
        Ok(match done {
            crate::volume::Detached::Done => {
                tracing::info!(device = %device.display(), "volume detached");
                Detached::Done
            }
            crate::volume::Detached::Deferred => Detached::Deferred,
            crate::volume::Detached::InUse(why) => Detached::InUse(why),
        })
    }

    fn attached_under(&self, dir: &Path) -> Vec<(PathBuf, PathBuf, u64)> {
        crate::volume::exported(dir)
            .into_iter()
            .map(|(name, backing)| {
                let bytes = crate::volume::capacity_bytes(&name);
                (PathBuf::from(format!("/dev/{name}")), backing, bytes)
            })
            .collect()
    }

    fn refresh(&self, device: &Path, at: &Path) -> Result<(), CommandError> {
        crate::volume::identity(at)
            .and_then(|id| crate::volume::refresh_capacity(device, id))
            .map_err(|e| CommandError::failed(e.to_string()))
    }

    fn record(&self, name: &str, attached: bool) {
        if let Err(e) = crate::volume::record(&group_lock::run_dir(), name, attached) {
            tracing::warn!(volume = %name, error = %e, "cannot record the volume's attachment: --attach-volumes will not know of it");
        }
    }
}

impl Commands for ServedHost {
    fn run(&self, line: RequestLine, fds: Vec<OwnedFd>, peer: Peer, reply: &mut Replier<'_>) {
        let request = line.request;
        if !self.carries_out(&request.concern(), &line.discovery) {
            reply.send(&ReplyLine::NotHeld);
            return;
        }
        let caller = self.caller(&peer);
        tracing::info!(
            pid = peer.pid,
            uid = peer.uid,
            admin = caller.admin,
            "cairn {}: {}",
            request.name(),
            serde_json::to_string(&request).unwrap_or_default()
        );
        let input = match input_of(&request, fds) {
            Ok(i) => i,
            Err(e) => {
                reply.send(&ReplyLine::error(&e));
                return;
            }
        };
        let outcome = cairn_command::execute(self, &caller, request, input, &mut ToClient(reply));
        match outcome {
            Ok(r) => reply.send(&ReplyLine::Reply(r)),
            Err(e) => reply.send(&ReplyLine::error(&e)),
        }
    }

    fn reload(&self) {
        self.rediscover();
    }

    /// Before the file system is unmounted: each recorded volume's device
    /// that nobody uses is detached (its record kept, so that the next
    /// `cairn serve --attach-volumes` attaches it again); one in use keeps
    /// the file system busy, and the service says which.
    /// Every volume device over the service's mount is detached before
    /// the unmount (attached again by `--attach-volumes`), found by what
    /// the kernel says of it, not through the file system: after a double
    /// failure stopped a group, its files no longer answer, and a device
    /// left attached keeps the mount busy, the service deaf to SIGTERM.
    /// One a file system is mounted on stays, named in the log.
    fn before_unmount(&self) {
        let _one_at_a_time = self.volumes.lock_or_recover();
        // As the kernel names backing files: the real path (the parent
        // resolved outside the mount, so nothing asks the file system).
        let mountpoint = match (self.mountpoint.parent(), self.mountpoint.file_name()) {
            (Some(parent), Some(name)) => std::fs::canonicalize(parent)
                .map_or_else(|_| self.mountpoint.clone(), |p| p.join(name)),
            _ => self.mountpoint.clone(),
        };
        let (detached, left) = crate::volume::detach_under(&mountpoint, "a volume");
        for device in detached {
            tracing::info!(device = %device.display(), "volume detached for the stop (attached again by --attach-volumes)");
        }
        for why in left {
            tracing::warn!("{why}: the file system stays busy until it is let go of");
        }
    }

    fn stop(&self) {
        *self.repair.stopping.lock_or_recover() = true;
        self.repair.stop.notify_all();
        let timer = self.repair.thread.lock_or_recover().take();
        if let Some(t) = timer {
            // (A tick in progress ends first: it waits on nothing long.)
            let _ = t.join();
        }
        for g in &self.groups {
            g.held.group.interrupt_operations();
        }
        let threads: Vec<JoinHandle<()>> = {
            let mut background = self.background.lock_or_recover();
            background.stopping = true;
            std::mem::take(&mut background.threads)
        };
        for t in threads {
            let _ = t.join();
        }
    }
}

/// What came with a request: for `cp` into a group, the descriptor of the
/// file the client opened (with its own rights).
fn input_of(request: &Request, fds: Vec<OwnedFd>) -> Result<Input, CommandError> {
    let Request::CpIn {
        source,
        source_name,
        ..
    } = request
    else {
        return Ok(Input::default());
    };
    let fd = fds.into_iter().next().ok_or_else(|| {
        CommandError::failed(format!(
            "the CLI sent no descriptor of {source} to copy from (are the CLI and the service the same version?)"
        ))
    })?;
    let src: CopySource = cairn_store::file_copy::Source::opened(
        std::fs::File::from(fd),
        source,
        source_name.clone(),
    )?;
    Ok(Input {
        source: Some(src),
        destination: None,
    })
}
