//! What every thread of a live group shares ([`Inner`]): the metadata
//! plane behind its lock, group commit ([`Gate`]), the data plane, the
//! engine source and the discard queue; and [`LiveGroup`], the handle
//! on it every caller holds. Who holds what, and in which order: `mod.rs`.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

use cairn_io::poison::{recover, Recover};
use cairn_io::DeviceId;

use crate::group::discard_queue::DiscardQueue;
use crate::group::engines::{EngineSource, HandleEngine};
use crate::group::error::GroupError;
use crate::group::mounted::Group;
use crate::group::plane::DataPlane;
use crate::lock_order::{Rank, Ranked};

/// Requests in flight on the engine that reads a returning disk's label and
/// superblocks (a few small reads, one at a time).
pub(super) const PROBE_DEPTH: usize = 4;

/// What became of one device offered to [`LiveGroup::reattach_devices`]:
/// the member it is (label, and its id in the metadata plane's engine), no
/// missing member, or one that cannot come back.
pub type Reattached = Result<Option<(String, DeviceId)>, GroupError>;

pub(super) struct Inner {
    meta: Mutex<Group<'static>>,
    /// Set when long operations (resync, rebalance) are to stop at their
    /// next batch: the service is stopping. Never cleared.
    interrupted: std::sync::atomic::AtomicBool,
    gate: Gate,
    pub(super) plane: Arc<DataPlane>,
    pub(super) engines: Box<dyn EngineSource>,
    /// Called (without `meta`) when devices of disks that left were let go
    /// of: a pool of idle data handles empties itself. Added to by whoever
    /// keeps such a pool; a leaf lock.
    pub(super) devices_left: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
    /// Freed runs waiting for their discard (the group's own `discards`);
    /// stopped when the group goes, so that the drain thread ends.
    pub(super) discards: StopsQueue,
    /// The thread that drains `discards`, started by the first operation
    /// that leaves runs waiting (never under the interleaving simulator);
    /// joined by `dismount`. A leaf lock.
    drain: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// This, for the drain thread: it holds the group only while it
    /// drains, so a group dropped without a dismount goes away.
    pub(super) me: Weak<Inner>,
}

/// A group's discard queue, stopped when dropped: its drain thread waits
/// for runs, and ends then.
pub(super) struct StopsQueue(Arc<DiscardQueue>);

impl std::ops::Deref for StopsQueue {
    type Target = Arc<DiscardQueue>;
    fn deref(&self) -> &Arc<DiscardQueue> {
        &self.0
    }
}

impl Drop for StopsQueue {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// Group commit. An operation runs its steps under `meta`, then waits here
/// until a commit covers them. The first to arrive with nobody committing
/// leads: it waits until every operation that had begun by then has run its
/// steps, then commits them all in one journal record; the others find
/// their transaction durable. Held only briefly, never while taking `meta`
/// or a latch (a leaf lock).
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    /// Operations that have begun (counted before they take `meta`).
    begun: u64,
    /// Operations whose steps under `meta` are over (done, failed or
    /// panicked).
    stepped: u64,
    /// A leader is committing.
    committing: bool,
    /// The last transaction known durable.
    durable: u64,
}

impl Gate {
    fn state(&self) -> Ranked<MutexGuard<'_, GateState>> {
        Ranked::take(Rank::Leaf, "the commit gate", || {
            recover(cairn_io::sched::lock(&self.state))
        })
    }

    /// Wait until `ready` holds; return with the state locked.
    fn wait_until(
        &self,
        ready: impl Fn(&GateState) -> bool + Sync,
    ) -> Ranked<MutexGuard<'_, GateState>> {
        let mut st = self.state();
        let mut waited = false;
        while !ready(&st) {
            if cairn_io::sched::scheduled() {
                drop(st);
                // The scheduler may look whether `ready` holds without
                // running us (the state held elsewhere: it may).
                cairn_io::sched::blocked_until(&|| match self.state.try_lock() {
                    Ok(st) => ready(&st),
                    Err(_) => true,
                });
                waited = true;
                st = self.state();
            } else {
                st = st.map(|g| recover(self.changed.wait(g)));
            }
        }
        if waited {
            cairn_io::sched::resumed();
        }
        st
    }

    /// An operation begins: counted, and counted as stepped when the
    /// returned guard drops (whatever became of its steps).
    fn begin(&self) -> Stepped<'_> {
        self.state().begun += 1;
        Stepped(self)
    }
}

/// The commit leader's role: given up (and the waiters woken) when dropped.
struct Leading<'g>(&'g Gate);

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        self.0.state().committing = false;
        self.0.changed.notify_all();
    }
}

struct Stepped<'g>(&'g Gate);

impl Drop for Stepped<'_> {
    fn drop(&mut self) {
        self.0.state().stepped += 1;
        self.0.changed.notify_all();
    }
}

/// A mounted group many threads use at once. Cheap to clone.
#[derive(Clone)]
pub struct LiveGroup {
    pub(super) inner: Arc<Inner>,
}

/// `meta` held: the metadata plane, and this thread's rank in the lock
/// order (`lock_order`), let go in that order.
type MetaGuard<'a> = Ranked<MutexGuard<'a, Group<'static>>>;

impl Inner {
    /// The metadata plane, under its lock. A panic during a metadata step
    /// leaves memory half-changed: the group is then stopped (the exception
    /// to `cairn_io::poison`'s policy).
    pub(super) fn meta(&self) -> Result<MetaGuard<'_>, GroupError> {
        // Held across metadata I/O: under the interleaving simulator a
        // waiter yields instead of blocking the one thread that runs.
        Ranked::try_take(Rank::Meta, "meta", || cairn_io::sched::lock(&self.meta)).map_err(|_| {
            let why = "a metadata step panicked; mount the group again";
            self.plane.stop(why);
            GroupError::Poisoned(why.into())
        })
    }

    /// Run `f` as one metadata operation: its steps under `meta`, then,
    /// before it returns, a commit that covers them (grouped: [`Gate`]).
    pub(super) fn operation<R>(
        &self,
        f: impl FnOnce(&mut Group<'static>) -> R,
    ) -> Result<R, GroupError> {
        let (result, ticket, released) = {
            let _stepped = self.gate.begin();
            let mut group = self.meta()?;
            group.begin_operation()?;
            let result = f(&mut group);
            let released = self.release_offline(&mut group);
            // What `f` changed, or saw, belongs to the running transaction.
            (result, group.txn_open(), released)
        };
        // The commit first: letting go may wait (bounded) for the
        // heartbeat thread, and the operations grouped into this commit
        // need not wait with it.
        let committed = self.commit_through(ticket);
        if released {
            self.devices_left();
        }
        committed?;
        self.see_to_discards();
        Ok(result)
    }

    /// Disks that went OFFLINE (after an I/O error, or on request once
    /// stamped) give up their devices, on real devices: the group's
    /// member slot, the engine source's handle and the metadata plane's
    /// engine here, under `meta`; each data handle's engine at its next
    /// operation (the disk view changed), the idle ones at once
    /// ([`Inner::devices_left`], after `meta` and the commit), the
    /// heartbeat's then too (waited for, bounded: [`crate::group::heartbeat::Nudge`];
    /// it beats written disks only). A failed disk keeps
    /// failing on them, and they would keep its file system from being
    /// unmounted for repair. Whether any was let go of.
    fn release_offline(&self, group: &mut Group<'static>) -> bool {
        let ids = group.release_offline(self.engines.reopens());
        for id in &ids {
            self.let_go(group, *id);
        }
        !ids.is_empty()
    }

    /// Let go of device `id` (no member's): the engine source forgets it and
    /// the metadata plane's engine closes it. Under `meta`.
    pub(super) fn let_go(&self, g: &mut Group<'static>, id: DeviceId) {
        self.engines.remove_device(id);
        g.detach_device(id);
    }

    /// Devices of the group were let go of: whoever keeps idle data
    /// handles (which hold them in their engines) drops them. Without
    /// `meta`.
    pub(super) fn devices_left(&self) {
        let hooks = self.devices_left.lock_or_recover();
        for hook in hooks.iter() {
            hook();
        }
    }

    /// Freed runs wait for their discard: see that they are drained, never
    /// under `meta` (which the caller does not hold). Under the
    /// interleaving simulator the calling actor drains them now (a thread
    /// it does not schedule would make a seed run differently each time);
    /// otherwise the group's drain thread does, started here the first
    /// time.
    fn see_to_discards(&self) {
        if !self.discards.has_waiting() {
            return;
        }
        if cairn_io::sched::scheduled() {
            self.drain_discards();
            return;
        }
        let mut drain = self.drain.lock_or_recover();
        if drain.is_some() {
            return;
        }
        let (me, queue) = (self.me.clone(), Arc::clone(&self.discards));
        let spawned = std::thread::Builder::new()
            .name("cairn-discard".into())
            .spawn(move || {
                while queue.wait_for_runs() {
                    let Some(inner) = me.upgrade() else { break };
                    inner.drain_discards();
                }
            });
        match spawned {
            Ok(handle) => *drain = Some(handle),
            // No thread: the runs wait; the next operation tries again, and
            // an allocation short of space takes them back.
            Err(e) => tracing::warn!("cannot start the thread that discards freed space: {e}"),
        }
    }

    /// Return once transaction `ticket` is durable: lead a commit if nobody
    /// is committing, else wait for the one that is.
    fn commit_through(&self, ticket: u64) -> Result<(), GroupError> {
        let mut st = self
            .gate
            .wait_until(|st| st.durable >= ticket || !st.committing);
        if st.durable >= ticket {
            return Ok(());
        }
        st.committing = true;
        let goal = st.begun;
        drop(st);
        // Whatever becomes of the commit, even a panic in it (which poisons
        // `meta`, so the next leader gets `Poisoned`), the lead is handed on.
        let lead = Leading(&self.gate);
        // Every operation that had begun joins this commit: its steps are
        // short and need nothing the leader holds.
        drop(self.gate.wait_until(|st| st.stepped >= goal));
        let outcome = self.meta().and_then(|mut group| {
            group.commit_through(ticket)?;
            Ok(group.txn_done())
        });
        if let Ok(done) = outcome {
            let mut st = self.gate.state();
            st.durable = st.durable.max(done);
        }
        drop(lead);
        outcome.map(|_| ())
    }
}

impl LiveGroup {
    /// Make a mounted group live. Its engine stays the metadata plane's;
    /// `engines` makes one for each data handle.
    pub fn new(mut group: Group<'static>, engines: Box<dyn EngineSource>) -> Self {
        group.set_live(true);
        let discards = Arc::new(DiscardQueue::default());
        group.set_discard_queue(Some(discards.clone()));
        let plane = group.data_plane().clone();
        // Devices let go of are let go of by the heartbeat too, before the
        // command that dropped them returns (the heartbeat's engine holds
        // them open, and their locks, until it is made again).
        let mut left: Vec<Box<dyn Fn() + Send + Sync>> = Vec::new();
        if let Some(nudge) = group.heartbeat_nudge() {
            left.push(Box::new(move || nudge.refresh()));
        }
        Self {
            inner: Arc::new_cyclic(|me| Inner {
                meta: Mutex::new(group),
                interrupted: std::sync::atomic::AtomicBool::new(false),
                gate: Gate {
                    state: Mutex::new(GateState::default()),
                    changed: Condvar::new(),
                },
                plane,
                engines,
                devices_left: Mutex::new(left),
                discards: StopsQueue(discards),
                drain: Mutex::new(None),
                me: me.clone(),
            }),
        }
    }

    /// Freed runs reserved for a discard that is waiting or in flight
    /// (`discard.rs`): handed to nobody until it is over.
    pub fn discards_pending(&self) -> usize {
        self.inner.discards.pending()
    }

    /// Of [`Self::discards_pending`], the runs no drain has taken yet.
    pub fn discards_waiting(&self) -> usize {
        self.inner.discards.waiting()
    }

    /// Run a metadata operation (create, resize, remove, a listing …): its
    /// steps under the metadata plane's lock, then a commit of the running
    /// transaction, which other operations may share (group commit). It
    /// returns once what it changed, or saw, is durable.
    pub fn meta<R>(&self, f: impl FnOnce(&mut Group<'static>) -> R) -> Result<R, GroupError> {
        self.inner.operation(f)
    }

    /// Make the long operations running on this group (resync, rebalance)
    /// stop at their next batch, with [`GroupError::Interrupted`], and any
    /// started later stop at their first: what they did stays done, the
    /// rest is resumed by the next mount or command. For a service that
    /// is stopping.
    pub fn interrupt_operations(&self) {
        self.inner
            .interrupted
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub(super) fn interrupted(&self) -> bool {
        self.inner
            .interrupted
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The group's invariants ([`Group::check_invariants`]), under `meta`
    /// between two metadata steps: no operation begins and nothing
    /// commits, so the check changes nothing a run does. For the
    /// simulators. A group whose metadata step panicked has nothing to
    /// check.
    pub fn check_invariants(&self) -> Result<(), crate::group::parts::Violations> {
        match self.inner.meta() {
            Ok(group) => group.check_invariants(),
            Err(_) => Ok(()),
        }
    }

    /// Metadata operations begun since the group went live (with
    /// [`Group::journal_records`], how many operations share a commit).
    pub fn operations_begun(&self) -> u64 {
        self.inner.gate.state().begun
    }

    pub fn plane(&self) -> &Arc<DataPlane> {
        &self.inner.plane
    }

    /// An engine of `depth` requests over `devices`, for reads made
    /// outside `meta` with no data handle (probes, timed reads): under the
    /// group's I/O timeout, as a handle's engine is, so a hung disk fails
    /// them instead of holding the command for ever.
    pub(super) fn side_engine(
        &self,
        devices: &BTreeMap<u16, DeviceId>,
        depth: usize,
    ) -> Result<HandleEngine, GroupError> {
        let (mut engine, ids) = self.inner.engines.engine(devices, depth)?;
        engine.set_io_timeout(self.inner.plane.io_timeout());
        Ok((engine, ids))
    }

    /// Make everything written durable, checkpoint and stop. Every handle
    /// must be gone: one still alive is a caller bug, refused.
    pub fn dismount(self) -> Result<(), GroupError> {
        // The drain ends after its batch (bounded: DISCARD_BATCH_RUNS_MAX
        // runs); what still waits is discarded below, once the group is
        // this thread's alone.
        self.inner.discards.stop();
        let drain = self.inner.drain.lock_or_recover().take();
        if let Some(drain) = drain {
            // A panic in it left its runs reserved: gone with this mount.
            let _ = drain.join();
        }
        let inner = Arc::try_unwrap(self.inner).map_err(|_| {
            GroupError::Invalid("the group still has data handles; drop them first".into())
        })?;
        let group = inner.meta.into_inner().map_err(|_| {
            GroupError::Poisoned("a metadata step panicked; mount the group again".into())
        })?;
        let mut group = group;
        group.discard_waiting_now();
        group.set_live(false);
        let open = group.txn_open();
        group.commit_through(open)?;
        group.sync()?;
        group.dismount()
    }
}
