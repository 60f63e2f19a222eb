//! Where the executor finds the groups a command works on: the [`Host`].
//!
//! Two hosts carry commands out, and the executor does not know which it
//! has: a process that mounts a group for one command
//! ([`crate::held::HeldHost`]: the CLI without a service), and the service
//! that holds its groups live for every command (`cairn_serve`'s host).
//! Both give the executor a live group ([`Opened`]), so every command runs
//! the same code — the same checks, the same metadata operations, the same
//! long operations — on either. What differs is only what a host is:
//! whether it mounts and dismounts around the command, whether a long
//! operation may run on after the asker has its answer, and what a service
//! alone has (a file system, volumes, its status).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use cairn_io::poison::Recover;
use cairn_io::EngineKind;
use cairn_store::discovery::DiscoveryString;
use cairn_store::group::{Group, GroupError, LiveGroup, MountReport};
use cairn_store::group_lock::GroupLock;
use cairn_store::names::GroupPath;

use crate::error::CommandError;
use crate::event::Events;
use crate::reply::{GroupSummary, Reply, Status};

/// How a command uses the group it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// It only looks: a host that mounts the group mounts it read-only
    /// (nothing written, a missing disk left as recorded).
    Look,
    /// It changes the group.
    Change,
    /// It changes the group, taking it over from another host whose
    /// heartbeat has stopped (`group mount --force`; never from a host
    /// that still writes it: `docs/multihost.md`).
    TakeOver,
}

/// A group a command works on, as its host opened it.
pub struct Opened {
    /// Upper case, as the group is named.
    pub name: String,
    pub live: Arc<LiveGroup>,
    /// Its members' paths, by device id in the metadata plane's engine
    /// (those found at mount, disks joined since). A leaf lock.
    pub paths: Arc<Mutex<BTreeMap<u32, PathBuf>>>,
    /// The service's file system, when a service holds the group.
    pub mount: Option<Arc<dyn Mount>>,
    /// What mounting it for this command found (a host that mounts).
    pub report: Option<MountReport>,
    /// The group lock, held while the command runs (a host that mounts).
    pub lock: Option<GroupLock>,
    /// How many disks the group had taken offline after an I/O error
    /// (`Group::disks_taken_offline`) when the command began: a command
    /// that fails says only the ones taken while it ran.
    pub offline_before: usize,
}

impl Opened {
    pub fn paths(&self) -> MutexGuard<'_, BTreeMap<u32, PathBuf>> {
        self.paths.lock_or_recover()
    }
}

/// The service's file system over a group: names removed through it, and
/// where it serves a file.
pub trait Mount: Send + Sync {
    /// Remove a name as `rm` does, through the file system: a file the
    /// kernel has open keeps its data until its last close, and the
    /// kernel's cache of the name is let go of.
    /// `check` runs first, in the same metadata step (the asker's
    /// permission to remove it).
    fn remove(
        &self,
        path: &GroupPath,
        check: &dyn Fn(&Group<'static>) -> Result<(), GroupError>,
    ) -> Result<(), GroupError>;

    /// Where the file system serves `path`.
    fn served_path(&self, path: &GroupPath) -> PathBuf;
}

/// A group marked busy with a long operation until this drops.
pub struct Busy(Option<Box<dyn FnOnce() + Send>>);

impl Busy {
    /// Busy until dropped; `release` runs then.
    pub fn new(release: impl FnOnce() + Send + 'static) -> Self {
        Self(Some(Box::new(release)))
    }

    /// Nothing to release (a host where nothing else runs on the group).
    pub fn none() -> Self {
        Self(None)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(release) = self.0.take() {
            release();
        }
    }
}

/// A long operation's work: given where its progress goes, it runs to its
/// end and answers.
pub type Work = Box<dyn FnOnce(&mut dyn Events) -> Result<Reply, CommandError> + Send>;

/// What a long operation is, for the host that runs it.
#[derive(Debug, Clone, Copy)]
pub struct LongOp {
    /// "resync", "rebalance", "scrub", "reclaim".
    pub what: &'static str,
    pub power: u16,
    /// The asker waits for its end.
    pub wait: bool,
}

/// Where commands find their groups (see the module's header).
pub trait Host: Sync {
    /// Open group `name` for a command.
    fn open(
        &self,
        name: &str,
        access: Access,
        events: &mut dyn Events,
    ) -> Result<Arc<Opened>, CommandError>;

    /// The command is done with `group` (`failed`: with an error): a host
    /// that mounted it dismounts it; each says which disks the command took
    /// offline when it failed ([`crate::exec::say_taken_offline`]), and one
    /// that dismounts, always.
    fn close(
        &self,
        group: Arc<Opened>,
        failed: bool,
        events: &mut dyn Events,
    ) -> Result<(), CommandError>;

    /// The discovery string commands look for disks with.
    fn discovery(&self) -> Result<DiscoveryString, CommandError>;

    /// The kind of engine to open devices with.
    fn engine_kind(&self) -> EngineKind;

    /// The run directory: group locks and long operations' status files.
    fn run_dir(&self) -> PathBuf;

    /// `group list`'s row for a group this host holds, as it is now.
    fn held_summary(&self, name: &str) -> Option<GroupSummary> {
        let _ = name;
        None
    }

    /// Mark `group` busy with a long operation, or say which one runs.
    fn claim(&self, group: &Opened, what: &'static str) -> Result<Busy, CommandError>;

    /// Run a long operation: here, its progress to `events`, when the asker
    /// waits (or the host cannot run it in the background); else on a
    /// thread of its own, answering [`Reply::Started`] at once.
    fn long(
        &self,
        group: &Arc<Opened>,
        busy: Busy,
        op: LongOp,
        work: Work,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError>;

    /// What only a service has; `None` for a host that mounts.
    fn service(&self) -> Option<&dyn Service> {
        None
    }
}

/// What a service has that a command's own mount does not.
pub trait Service: Sync {
    /// Its process id, for messages.
    fn pid(&self) -> u32;

    /// `cairn status`.
    fn status(&self) -> Status;

    /// The groups it holds, for commands about all of them.
    fn groups(&self) -> Vec<String>;

    /// Volumes: group files attached as block devices over its file
    /// system.
    fn volumes(&self) -> &dyn Volumes;
}

/// What became of a detach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detached {
    Done,
    /// Still open somewhere: the kernel detaches it at its last close.
    Deferred,
    /// In use (mounted, held): not detached; why.
    InUse(String),
}

/// The loop-device plumbing of volumes, which only a service has. The
/// executor decides (which file, whether it may); this does.
pub trait Volumes: Sync {
    /// One volume command at a time: held across each, so that one looks at
    /// the loop devices and acts on them at a time.
    fn one_at_a_time(&self) -> MutexGuard<'_, ()>;

    /// The block device the file served at `at` is attached to, if any.
    fn attached_to(&self, at: &std::path::Path) -> Option<PathBuf>;

    /// Attach the file served at `at` as a block device of `sector_bytes`
    /// sectors.
    fn attach(&self, at: &std::path::Path, sector_bytes: u32) -> Result<PathBuf, CommandError>;

    /// Detach `device`, if it is still bound to the file served at `at`.
    fn detach(
        &self,
        device: &std::path::Path,
        at: &std::path::Path,
    ) -> Result<Detached, CommandError>;

    /// The loop devices the kernel says are bound to files under `dir`
    /// (a group's directory in the mount), without asking the file system:
    /// what a stopped group's volumes are attached as. Each: the device,
    /// the file it is bound to, its size in bytes.
    fn attached_under(&self, dir: &std::path::Path) -> Vec<(PathBuf, PathBuf, u64)>;

    /// The file served at `at` grew: its device follows.
    fn refresh(&self, device: &std::path::Path, at: &std::path::Path) -> Result<(), CommandError>;

    /// Record that volume `name` is (or is no longer) attached, for the
    /// next start to attach it again.
    fn record(&self, name: &str, attached: bool);
}
