//! The host of a process that carries a command out itself (the CLI when no
//! service holds the group): it mounts the group live for the command —
//! read-only, under a shared lock, for a command that only looks; for
//! writing, under the exclusive lock, for one that changes it — runs the
//! command through the same executor a service runs it through, and
//! dismounts. A long operation runs to its end while the asker waits.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use cairn_io::host::Host as OsHost;
use cairn_io::EngineKind;
use cairn_store::discovery::DiscoveryString;
use cairn_store::group::heartbeat::Takeover;
use cairn_store::group::MissingDisks;
use cairn_store::group_admin::{self, LiveAccess};

use crate::error::CommandError;
use crate::event::{Event, Events};
use crate::host::{Access, Busy, Host, LongOp, Opened, Work};
use crate::reply::Reply;

/// Requests in flight on a command's own mount's metadata engine.
const HELD_DEPTH: usize = 64;

/// A process's own mounts, one command at a time.
pub struct HeldHost {
    discovery: DiscoveryString,
    engine: EngineKind,
    run_dir: PathBuf,
}

impl HeldHost {
    pub fn new(discovery: DiscoveryString, engine: EngineKind, run_dir: PathBuf) -> Self {
        Self {
            discovery,
            engine,
            run_dir,
        }
    }
}

impl Host for HeldHost {
    fn open(
        &self,
        name: &str,
        access: Access,
        events: &mut dyn Events,
    ) -> Result<Arc<Opened>, CommandError> {
        let access = match access {
            Access::Look => LiveAccess::Look,
            Access::Change => LiveAccess::Write(MissingDisks::MarkOffline, Takeover::Refuse),
            Access::TakeOver => LiveAccess::Write(MissingDisks::MarkOffline, Takeover::Force),
        };
        let m = group_admin::mount_live_for(
            &OsHost::real(),
            &self.discovery,
            name,
            &self.run_dir,
            access,
            self.engine,
            HELD_DEPTH,
        )?;
        let group = m.group.meta(|g| g.name().to_string())?;
        events.send(Event::Mounted {
            group: group.clone(),
            report: m.report.clone(),
        });
        Ok(Arc::new(Opened {
            name: group,
            live: Arc::new(m.group),
            paths: Arc::new(Mutex::new(m.paths)),
            mount: None,
            report: Some(m.report),
            lock: Some(m.lock),
        }))
    }

    fn close(
        &self,
        group: Arc<Opened>,
        _failed: bool,
        events: &mut dyn Events,
    ) -> Result<(), CommandError> {
        // Every long operation ran here: nothing else holds the group.
        let opened = Arc::try_unwrap(group).map_err(|_| {
            CommandError::failed("invariant: a command's own mount is its alone when it ends")
        })?;
        let live = Arc::try_unwrap(opened.live).map_err(|_| {
            CommandError::failed("invariant: a command's own mount is its alone when it ends")
        })?;
        let offlined = live.meta(|g| g.disks_taken_offline().to_vec())?;
        let dismounted = live.dismount();
        if !offlined.is_empty() {
            events.send(Event::TakenOffline {
                group: opened.name,
                disks: offlined,
            });
        }
        drop(opened.lock);
        Ok(dismounted?)
    }

    fn discovery(&self) -> Result<DiscoveryString, CommandError> {
        Ok(self.discovery.clone())
    }

    fn engine_kind(&self) -> EngineKind {
        self.engine
    }

    fn run_dir(&self) -> PathBuf {
        self.run_dir.clone()
    }

    /// The group lock is this process's: nothing else runs on the group.
    fn claim(&self, _group: &Opened, _what: &'static str) -> Result<Busy, CommandError> {
        Ok(Busy::none())
    }

    fn long(
        &self,
        _group: &Arc<Opened>,
        busy: Busy,
        _op: LongOp,
        work: Work,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let reply = work(events);
        drop(busy);
        reply
    }
}
