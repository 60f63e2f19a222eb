//! A live group: the metadata plane behind one lock, shared by any number of
//! threads, each moving file bytes through its own [`DataHandle`] (its own
//! engine on the group's disks). The rules, and the lock order, are in
//! `docs/live-core.md`; the data path is `data.rs`, the shared state
//! `plane.rs`.
//!
//! Who holds what:
//! - `Inner::meta` (the [`Group`], the metadata plane's state and its engine):
//!   a mutex, held for a metadata step; a data handle takes it only to have an
//!   extent marked initialised or a failed disk taken offline, with any
//!   extent latches it needs already held (latch → meta, never the reverse).
//! - `Inner::gate` ([`Gate`], group commit): a leaf mutex with a condition
//!   variable, held only to count operations and hand over the commit; never
//!   held while taking `meta` or a latch. Every operation runs its steps
//!   under `meta`, then waits at the gate for a commit that covers them.
//! - the [`DataPlane`]: published by the metadata plane under `meta`, read by
//!   handles without it.
//! - each handle's engine, unflushed-disk set and guard slot: its own thread.
//! - `Inner::discards` ([`DiscardQueue`]): freed runs waiting for their
//!   discard, pushed under `meta`, drained without it by the group's drain
//!   thread (`discard.rs`, `discard_queue.rs`); a leaf lock.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

use cairn_io::poison::{recover, Recover};
use cairn_io::{AlignedBuf, DeviceId, IoEngine, Op, Request};

use super::data::{self, DataPort, RMW_LATCH};
use super::discard_queue::{self, DiscardQueue};
use super::engines::{EngineSource, HandleEngine};
use super::error::GroupError;
use super::mounted::Group;
use super::plane::{DataPlane, DiskView, FileSnapshot, GuardSlot, Hold, SnapshotCache};
use crate::lock_order::{Rank, Ranked};

/// Requests in flight on the engine that reads a returning disk's label and
/// superblocks (a few small reads, one at a time).
const PROBE_DEPTH: usize = 4;
/// Requests in flight on a live scrub's engine: every copy of its
/// `power` chunks (at most [`super::scrub::SCRUB_INFLIGHT_MAX`]) at once.
const SCRUB_DEPTH: usize = super::scrub::SCRUB_INFLIGHT_MAX * 4;
/// How many times in a row a scrub reads a part again because the disks
/// changed between its reads and its judgement.
const SCRUB_READ_AGAIN_MAX: u32 = 8;

/// What became of one device offered to [`LiveGroup::reattach_devices`]:
/// the member it is (label, and its id in the metadata plane's engine), no
/// missing member, or one that cannot come back.
pub type Reattached = Result<Option<(String, DeviceId)>, GroupError>;

struct Inner {
    meta: Mutex<Group<'static>>,
    /// Set when long operations (resync, rebalance) are to stop at their
    /// next batch: the service is stopping. Never cleared.
    interrupted: std::sync::atomic::AtomicBool,
    gate: Gate,
    plane: Arc<DataPlane>,
    engines: Box<dyn EngineSource>,
    /// Called (without `meta`) when devices of disks that left were let go
    /// of: a pool of idle data handles empties itself. Added to by whoever
    /// keeps such a pool; a leaf lock.
    devices_left: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
    /// Freed runs waiting for their discard (the group's own `discards`);
    /// stopped when the group goes, so that the drain thread ends.
    discards: StopsQueue,
    /// The thread that drains `discards`, started by the first operation
    /// that leaves runs waiting (never under the interleaving simulator);
    /// joined by `dismount`. A leaf lock.
    drain: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// This, for the drain thread: it holds the group only while it
    /// drains, so a group dropped without a dismount goes away.
    me: Weak<Inner>,
}

/// A group's discard queue, stopped when dropped: its drain thread waits
/// for runs, and ends then.
struct StopsQueue(Arc<DiscardQueue>);

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
    inner: Arc<Inner>,
}

/// `meta` held: the metadata plane, and this thread's rank in the lock
/// order (`lock_order`), let go in that order.
type MetaGuard<'a> = Ranked<MutexGuard<'a, Group<'static>>>;

impl Inner {
    /// The metadata plane, under its lock. A panic during a metadata step
    /// leaves memory half-changed: the group is then stopped (the exception
    /// to `cairn_io::poison`'s policy).
    fn meta(&self) -> Result<MetaGuard<'_>, GroupError> {
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
    fn operation<R>(&self, f: impl FnOnce(&mut Group<'static>) -> R) -> Result<R, GroupError> {
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
    /// heartbeat's then too (waited for, bounded: [`super::heartbeat::Nudge`];
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
    fn let_go(&self, g: &mut Group<'static>, id: DeviceId) {
        self.engines.remove_device(id);
        g.detach_device(id);
    }

    /// Devices of the group were let go of: whoever keeps idle data
    /// handles (which hold them in their engines) drops them. Without
    /// `meta`.
    fn devices_left(&self) {
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

    /// Discard the runs waiting, batch by batch, through a data handle of
    /// the drain's own; after each batch, under `meta`, its runs go back to
    /// the free pool and those discarded are marked (`discard.rs`). Only
    /// disks written now are sent to: a run on a disk gone offline stays
    /// returnable.
    fn drain_discards(&self) {
        let Some(me) = self.me.upgrade() else { return };
        let live = LiveGroup { inner: me };
        let mut handle: Option<(DataHandle, u64)> = None;
        loop {
            // A group that stopped sends nothing more (its runs stay
            // reserved in memory, free on disk), and its drain thread ends.
            if self.plane.stopped().is_some() {
                self.discards.stop();
                return;
            }
            let Some(batch) = self.discards.take() else {
                return;
            };
            let runs = &batch.runs;
            if handle.is_none() {
                let au_bytes = self.meta().map(|g| g.au_bytes());
                handle = au_bytes
                    .and_then(|au| Ok((live.handle(discard_queue::DISCARD_BATCH_RUNS_MAX)?, au)))
                    .ok();
            }
            let view = self.plane.disks();
            let (ok, failed) = match handle.as_mut() {
                Some((h, au_bytes)) => {
                    let au_bytes = *au_bytes;
                    let devices = h.devices.clone();
                    discard_queue::discard_runs(
                        &mut *h.engine,
                        |d| devices.get(&d).copied().filter(|_| view.is_writable(d)),
                        au_bytes,
                        runs,
                    )
                }
                None => (
                    vec![false; runs.len()],
                    Some("no data handle could be made".into()),
                ),
            };
            // Pieces lent from the batch meanwhile may be written from now
            // on; the rest goes back under `meta`, where lending happens
            // too, so that no piece is lent after its run went back.
            self.discards.discarded(&batch);
            match self.meta() {
                Ok(mut group) => {
                    let lent = self.discards.finish(&batch);
                    if let Some(why) = &failed {
                        group.discard_failed(runs, why);
                    }
                    group.discards_done(runs, &ok, &lent);
                }
                Err(_) => {
                    self.discards.finish(&batch);
                }
            }
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

    fn interrupted(&self) -> bool {
        self.inner
            .interrupted
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The group's invariants ([`Group::check_invariants`]), under `meta`
    /// between two metadata steps: no operation begins and nothing
    /// commits, so the check changes nothing a run does. For the
    /// simulators. A group whose metadata step panicked has nothing to
    /// check.
    pub fn check_invariants(&self) -> Result<(), super::parts::Violations> {
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

    /// A data handle with an engine of `depth` requests.
    pub fn handle(&self, depth: usize) -> Result<DataHandle, GroupError> {
        // The members and the view's epoch as one: the view is published
        // under `meta`, so a disk that joins after this is seen as a change.
        let (disks, read_only, epoch) = {
            let group = self.inner.meta()?;
            (
                group.member_devices(),
                group.is_read_only(),
                self.inner.plane.disks().epoch,
            )
        };
        let (mut engine, devices) = self.inner.engines.engine(&disks, depth)?;
        let io_timeout = self.inner.plane.io_timeout();
        engine.set_io_timeout(io_timeout);
        Ok(DataHandle {
            slot: self.inner.plane.guard_slot(),
            inner: self.inner.clone(),
            engine,
            io_timeout,
            devices,
            made_from: disks,
            unflushed: BTreeSet::new(),
            spare: Vec::new(),
            snapshots: SnapshotCache::default(),
            read_only,
            depth,
            devices_epoch: epoch,
        })
    }

    /// Take disks offline on request ([`Group::offline_disks`]) while data
    /// handles run: writes from the next disk view on mark their copies
    /// stale. The data operations that took the old view are waited for
    /// between two metadata operations, without `meta` (one may need it to
    /// end), and at most the plane's drain bound.
    pub fn offline_disks(
        &self,
        names: &[String],
        drop_after_minutes: Option<u16>,
    ) -> Result<Vec<String>, GroupError> {
        let (done, disks) = self
            .inner
            .operation(|g| g.offline_disks_begin(names, drop_after_minutes))??;
        let drained = self.inner.plane.wait_for_older_operations();
        self.inner
            .operation(|g| g.offline_disks_end(&disks, drained))??;
        Ok(done)
    }

    /// Bring disks back and resync them ([`Group::online_disks`]) while data
    /// handles run: the disks are SYNCING (written by every write from the
    /// next view on) before the first stale AU is copied, and each batch is
    /// copied under its extents' exclusive latches, held until the commit
    /// that clears the bits is durable.
    pub fn online_disks(
        &self,
        names: Option<&[String]>,
        power: usize,
        progress: &mut dyn FnMut(super::resync::Progress),
    ) -> Result<super::resync::ResyncReport, GroupError> {
        self.bring_back(names)?;
        self.resync(power, progress)
    }

    /// OFFLINE disks whose repair timer ran out are dropped by force
    /// ([`Group::drop_expired`]): the labels dropped, and why any could
    /// not be. For a holder that keeps the group mounted (the service),
    /// which calls it from time to time; a mount does it itself.
    pub fn drop_expired(&self) -> Result<(Vec<String>, Vec<String>), GroupError> {
        self.inner.operation(|g| g.drop_expired())
    }

    /// An engine of `depth` requests over `devices`, for reads made
    /// outside `meta` with no data handle (probes, timed reads): under the
    /// group's I/O timeout, as a handle's engine is, so a hung disk fails
    /// them instead of holding the command for ever.
    fn side_engine(
        &self,
        devices: &BTreeMap<u16, DeviceId>,
        depth: usize,
    ) -> Result<HandleEngine, GroupError> {
        let (mut engine, ids) = self.inner.engines.engine(devices, depth)?;
        engine.set_io_timeout(self.inner.plane.io_timeout());
        Ok((engine, ids))
    }

    /// The first step of [`LiveGroup::online_disks`]: the disks named (or
    /// every OFFLINE one that is attached) are SYNCING, written by every
    /// write from the next view on; [`LiveGroup::resync`] copies what they
    /// missed. A disk that is not attached, or not OFFLINE, is refused here.
    pub fn bring_back(&self, names: Option<&[String]>) -> Result<(), GroupError> {
        // What each device holds now is read outside `meta`, on an engine
        // of its own: an OFFLINE disk is the one most likely to hang, and
        // nothing waits on a disk while holding the metadata lock. The
        // metadata step then checks the device it was read from is still
        // the disk's.
        let (devices, group) = self
            .inner
            .operation(|g| g.returning_devices(names).map(|d| (d, g.uuid())))??;
        let mut probes = BTreeMap::new();
        if !devices.is_empty() {
            let (mut engine, ids) = self.side_engine(&devices, PROBE_DEPTH)?;
            for (disk, meta_id) in &devices {
                let Some(id) = ids.get(disk) else {
                    continue;
                };
                let probe = super::returning::probe_device(engine.as_mut(), *id, group);
                probes.insert(*disk, (*meta_id, probe));
            }
        }
        self.inner
            .operation(|g| g.bring_back(names, Some(&probes)))?
    }

    /// Each disk's sequential read rate ([`Group::measure_read_rates`]),
    /// for an explained change's time estimate: where to read is planned
    /// under `meta`, the reads are made outside it on an engine of their
    /// own (what they read is only timed, so an AU freed meanwhile does no
    /// harm).
    pub fn measure_read_rates(
        &self,
        disks: &[u16],
        bytes: u64,
    ) -> Result<BTreeMap<u16, f64>, GroupError> {
        let (plan, au_bytes) = self
            .inner
            .operation(|g| (g.read_rate_plan(disks, bytes), g.au_bytes()))?;
        let devices: BTreeMap<u16, DeviceId> =
            plan.iter().map(|(d, (device, _))| (*d, *device)).collect();
        let mut out = BTreeMap::new();
        if devices.is_empty() {
            return Ok(out);
        }
        let (mut engine, ids) = self.side_engine(&devices, PROBE_DEPTH * 2)?;
        let io = super::relocate::RATE_IO_BYTES.min(au_bytes);
        for (d, (_, offsets)) in plan {
            let Some(id) = ids.get(&d) else { continue };
            if let Some(rate) = super::relocate::time_reads(engine.as_mut(), *id, &offsets, io) {
                out.insert(d, rate);
            }
        }
        Ok(out)
    }

    /// Resync SYNCING disks, and stale copies on ONLINE ones, while data
    /// handles run (see [`LiveGroup::online_disks`]).
    pub fn resync(
        &self,
        power: usize,
        progress: &mut dyn FnMut(super::resync::Progress),
    ) -> Result<super::resync::ResyncReport, GroupError> {
        let mut report = super::resync::ResyncReport::default();
        let Some(work) = self.inner.operation(|g| g.resync_start(&mut report))?? else {
            return Ok(report);
        };
        let au_bytes = self.inner.meta()?.au_bytes();
        let mut handle = self.handle(super::resync::batch_len(power, au_bytes) * 2)?;
        let total = work.len() as u64;
        let mut done = 0u64;
        let slot = handle.slot.clone();
        for chunk in work.chunks(super::resync::batch_len(power, au_bytes)) {
            if self.interrupted() {
                return Err(GroupError::Interrupted(
                    "the resync stopped because the service is stopping; the disks stay SYNCING and the next mount (or `cairn group online`) finishes it".into(),
                ));
            }
            let before = {
                let g = self.inner.meta()?;
                (g.offline_counts(), g.zero_mark())
            };
            let (copied, latch) =
                super::resync::copy_stale(&mut handle, Some(&slot), chunk, power, &mut report)?;
            // Latch → meta: the order every first writer keeps.
            let cleared = self.inner.operation(|g| g.resync_copied(&copied, &before));
            drop(latch);
            cleared??;
            done += chunk.len() as u64;
            progress(super::resync::Progress {
                done,
                total,
                bytes_done: report.bytes_copied,
                ..Default::default()
            });
        }
        drop(handle);
        self.inner.operation(|g| g.resync_finish(&mut report))??;
        Ok(report)
    }

    /// Run (or resume) the rebalance while data handles run
    /// ([`Group::rebalance`]): metadata moves are metadata operations; each
    /// batch of data moves is copied through a handle of its own under its
    /// extents' exclusive latches, held until the operation that switches
    /// the maps is durable (latch → meta, the order first writes keep).
    pub fn rebalance(
        &self,
        power: usize,
        progress: &mut dyn FnMut(super::resync::Progress),
    ) -> Result<super::relocate::RebalanceReport, GroupError> {
        let result = self.rebalance_moves(power, progress);
        // The devices of disks whose drop completed are let go of, however
        // the rebalance ended.
        self.release_left_devices()?;
        result
    }

    fn rebalance_moves(
        &self,
        power: usize,
        progress: &mut dyn FnMut(super::resync::Progress),
    ) -> Result<super::relocate::RebalanceReport, GroupError> {
        let mut report = super::relocate::RebalanceReport::default();
        let Some(moves) = self
            .inner
            .operation(|g| g.rebalance_start(power, &mut report))??
        else {
            return Ok(report);
        };
        let started = std::time::Instant::now();
        // Each I/O in flight holds a buffer of up to 1 MiB: a handle runs
        // at most REBALANCE_INFLIGHT_MAX at once, whatever the power.
        let inflight = power.min(super::relocate::REBALANCE_INFLIGHT_MAX);
        let handle = self.handle(inflight)?;
        let slot = handle.slot.clone();
        let mut site = LiveMoves {
            live: self,
            handle,
            slot,
        };
        super::relocate::run_moves(&mut site, moves, inflight, &mut report, progress)?;
        let LiveMoves { handle, .. } = site;
        drop(handle);
        // Readers of the maps before the last switch end before a dropped
        // disk leaves: waited for here, outside the metadata lock (a data
        // operation may need it to end).
        super::relocate::readers_done(&self.inner.plane)?;
        self.inner
            .operation(|g| g.rebalance_finish(&mut report, false))??;
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(report)
    }

    /// Reclaim the group's returnable space while data handles run
    /// ([`super::reclaim::run_reclaim`]): each batch's runs are reserved in
    /// a metadata operation, discarded (or zeroed) through a handle of its
    /// own outside `meta`, then given back and marked in another. The
    /// pace backs off while the data plane's own I/O on a disk slows.
    pub fn reclaim(
        &self,
        options: super::reclaim::ReclaimOptions,
        progress: &mut dyn FnMut(super::resync::Progress),
    ) -> Result<super::reclaim::ReclaimReport, GroupError> {
        let compacted = if options.compact && !options.explain {
            // A refusal comes before anything moves.
            self.inner
                .operation(|g| g.reclaim_plan(options.method, options.force))??;
            self.inner.operation(|g| g.compact_begin())??;
            let au = self.inner.meta()?.au_bytes();
            let r = self.rebalance(
                options.power.max(1),
                &mut super::reclaim::in_bytes(au, progress),
            );
            self.inner.operation(|g| g.compact_end())?;
            Some(r?)
        } else {
            None
        };
        let handle = self.handle(options.power.clamp(1, super::reclaim::RECLAIM_POWER_MAX))?;
        let slot = handle.slot.clone();
        let mut site = LiveMoves {
            live: self,
            handle,
            slot,
        };
        let foreground = || {
            self.disk_io()
                .map(|io| io.into_iter().map(|(d, c)| (d, c.snapshot())).collect())
                .unwrap_or_default()
        };
        let mut report = super::reclaim::run_reclaim(&mut site, options, &foreground, progress)?;
        if let Some(r) = compacted {
            let au = self.inner.meta()?.au_bytes();
            report.compact_moves = r.compact_moves;
            report.compact_bytes = r.compact_aus_moved * au;
        }
        Ok(report)
    }

    /// Add disks while data handles run. `files` are the new devices, opened
    /// for writing and labelled; each is attached to the metadata plane's
    /// engine, and given to the engine source for the data handles to come,
    /// and `change` runs with their ids in that engine, as one metadata
    /// operation (it prepares and adds them, and may drop or resize others
    /// in the same step: `group alter`). A data handle takes a joined disk
    /// into a new engine at its next I/O (the disk view's epoch changed). A
    /// device that is no member once `change` is over (it failed before the
    /// disk joined, or only explained) is let go of again.
    pub fn add_devices<R>(
        &self,
        files: Vec<cairn_io::DeviceFile>,
        change: impl FnOnce(&mut Group<'static>, &[DeviceId]) -> Result<R, GroupError>,
    ) -> Result<R, GroupError> {
        self.inner.operation(|g| {
            let mut ids = Vec::new();
            let mut attached = Ok(());
            for file in files {
                let dup = match file.try_clone() {
                    Ok(d) => d,
                    Err(e) => {
                        attached = Err(GroupError::Invalid(format!(
                            "cannot share a new disk's handle: {e}"
                        )));
                        break;
                    }
                };
                let id = match g.attach_device(file) {
                    Ok(id) => id,
                    Err(e) => {
                        attached = Err(e);
                        break;
                    }
                };
                ids.push(id);
                if let Err(e) = self.inner.engines.add_device(id, dup) {
                    attached = Err(e);
                    break;
                }
            }
            let result = attached.and_then(|()| change(g, &ids));
            let members: BTreeSet<DeviceId> = g.member_devices().into_values().collect();
            for id in ids.into_iter().filter(|id| !members.contains(id)) {
                self.let_go(g, id);
            }
            result
        })?
    }

    /// The data plane's I/O per member disk (by disk number), as the
    /// engine source counts it: every read, write and flush a data handle
    /// sent to the disk since the group went live.
    pub fn disk_io(&self) -> Result<BTreeMap<u16, Arc<cairn_io::counted::DeviceIo>>, GroupError> {
        let members = self.inner.meta()?.member_devices();
        let io = self.inner.engines.device_io();
        Ok(members
            .into_iter()
            .filter_map(|(disk, id)| Some((disk, io.get(&id)?.clone())))
            .collect())
    }

    /// Members that were not attached, found again (re-discovery): each of
    /// `files` that is a missing member of this group becomes its device —
    /// in the metadata plane's engine and the engine source, in one
    /// metadata operation — and stays OFFLINE until `online` brings it
    /// back; one that is not is let go of. Per file, in order: the label
    /// of the member it is and its id in the metadata plane's engine, or
    /// nothing; a file that is a member but cannot come back (too small)
    /// is an error for that file.
    pub fn reattach_devices(
        &self,
        files: Vec<cairn_io::DeviceFile>,
    ) -> Result<Vec<Reattached>, GroupError> {
        self.inner.operation(|g| {
            let attached: Vec<Result<(cairn_io::DeviceFile, DeviceId), GroupError>> = files
                .into_iter()
                .map(|file| {
                    let dup = file.try_clone().map_err(|e| {
                        GroupError::Invalid(format!("cannot share a disk's handle: {e}"))
                    })?;
                    Ok((dup, g.attach_device(file)?))
                })
                .collect();
            // Which disk each is, by its label's uuid: a disk found on two
            // devices at once (a copy beside it, a second path) is taken on
            // neither, as a mount refuses it.
            let disks: Vec<Option<(uuid::Uuid, String)>> = attached
                .iter()
                .map(|a| a.as_ref().ok().and_then(|(_, id)| g.disk_on(*id)))
                .collect();
            let mut out = Vec::new();
            for (a, disk) in attached.into_iter().zip(&disks) {
                let (dup, id) = match a {
                    Ok(a) => a,
                    Err(e) => {
                        out.push(Err(e));
                        continue;
                    }
                };
                let twice = disk.as_ref().filter(|(u, _)| {
                    disks.iter().flatten().filter(|(v, _)| v == u).count() > 1
                });
                let joined = match twice {
                    Some((_, label)) => Err(GroupError::Invalid(format!(
                        "disk {label} is on two of the devices found; one is a copy (or a second path to it): hide it from discovery, then send SIGHUP again"
                    ))),
                    // The source first: once the member has it, any engine
                    // made must be able to attach it.
                    None => self
                        .inner
                        .engines
                        .add_device(id, dup)
                        .and_then(|()| g.reattach(id))
                        .map(|label| label.map(|l| (l, id))),
                };
                if !matches!(joined, Ok(Some(_))) {
                    self.let_go(g, id);
                }
                out.push(joined);
            }
            out
        })
    }

    /// OFFLINE members (those named, or all) whose device no longer
    /// answers — a disk that failed keeps failing on the descriptor the
    /// group holds, even once the disk is back — are let go of, so that
    /// discovery may attach them anew ([`Self::reattach_devices`]) and
    /// `online` bring them back. Idle handles drop them too (the
    /// `on_devices_left` hooks); a running operation's handle, at its next
    /// batch (the disk view changed). Their labels.
    pub fn release_dead_devices(
        &self,
        names: Option<&[String]>,
    ) -> Result<Vec<String>, GroupError> {
        let candidates = self.inner.meta()?.offline_devices(names);
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        // Probed outside `meta`: a path that hangs rather than fails holds
        // up this command, not every metadata operation.
        let mut probe = self.handle(1)?;
        let dead: Vec<(u16, DeviceId)> = candidates
            .into_iter()
            .filter(|(disk, _)| !probe.answers(*disk))
            .collect();
        drop(probe);
        if dead.is_empty() {
            return Ok(Vec::new());
        }
        let released = self.inner.operation(|g| {
            dead.iter()
                .filter_map(|(disk, id)| {
                    let label = g.release_device(*disk, *id)?;
                    self.let_go(g, *id);
                    Some(label)
                })
                .collect::<Vec<_>>()
        })?;
        if !released.is_empty() {
            self.inner.devices_left();
        }
        Ok(released)
    }

    /// What member `disk`'s device is ([`cairn_io::device::identity`]), as
    /// the engine source holds it: `None` when it is not attached, or the
    /// source cannot say.
    pub fn device_identity(&self, disk: u16) -> Result<Option<(u64, u64)>, GroupError> {
        let id = self.inner.meta()?.member_devices().get(&disk).copied();
        Ok(id.and_then(|id| self.inner.engines.identity(id)))
    }

    /// Let go of the devices of disks that left the group (a drop that
    /// completed): the metadata plane's engine closes them, the engine
    /// source forgets them, and each data handle drops its own at its next
    /// I/O (the disk view changed).
    fn release_left_devices(&self) -> Result<(), GroupError> {
        let left = {
            let mut g = self.inner.meta()?;
            let left = g.take_left_devices();
            for id in &left {
                self.let_go(&mut g, *id);
            }
            left
        };
        if !left.is_empty() {
            self.inner.devices_left();
        }
        Ok(())
    }

    /// Let go of device `id` (no member's): the engine source forgets it and
    /// the metadata plane's engine closes it. Under `meta`.
    fn let_go(&self, g: &mut Group<'static>, id: DeviceId) {
        self.inner.let_go(g, id);
    }

    /// Call `hook` (without `meta`) each time devices of disks that left
    /// the group have been let go of: whoever keeps idle data handles drops
    /// them, as they hold those devices in their engines.
    pub fn on_devices_left(&self, hook: Box<dyn Fn() + Send + Sync>) {
        self.inner.devices_left.lock_or_recover().push(hook);
    }

    /// Scrub the group ([`Group::scrub`]) while data handles run: the
    /// metadata and headers as one operation; then each data extent under
    /// its exclusive latch (no write lands between the reads of two copies,
    /// nor under a repair's rewrite), `power` chunks at a time: `meta` is
    /// taken to plan a part and to judge it (latch → meta, the order first
    /// writes keep), the copies are read without it on the scrub's own
    /// engine. A file deleted or replaced since the listing is skipped.
    pub fn scrub(
        &self,
        power: usize,
        how: super::scrub::ScrubRepair,
        progress: &mut dyn FnMut(super::resync::Progress),
    ) -> Result<super::scrub::ScrubReport, GroupError> {
        let started = std::time::Instant::now();
        let repair = how.repair;
        let (mut report, extents, total) =
            self.inner.operation(|g| g.scrub_start(power, how))??;
        // At most `power` chunks of 1 MiB (every copy of each) read at
        // once, as a scrub of a group one command holds. The extent's
        // latch is held for the whole extent (no write or move of it comes
        // between); `meta` only to say what to read and to judge what was:
        // the reads are made without it, on an engine of the scrub's own
        // under the group's I/O timeout (made again when the disks it
        // reads are no longer those it was made for), so a slow or hung
        // disk holds no other operation.
        let power = power.min(super::scrub::SCRUB_INFLIGHT_MAX);
        let mut engine: Option<(HandleEngine, BTreeMap<u16, DeviceId>)> = None;
        let mut done = 0;
        progress(super::resync::Progress {
            done,
            total,
            ..Default::default()
        });
        for e in &extents {
            if self.interrupted() {
                return Err(GroupError::Interrupted(
                    "the scrub stopped because the service is stopping; run it again".into(),
                ));
            }
            let latch = self
                .inner
                .plane
                .latch(vec![((e.file, e.incarnation, e.index), Hold::Exclusive)]);
            self.scrub_extent(e, power, how, &mut engine, &mut report)?;
            drop(latch);
            done += e.bytes;
            progress(super::resync::Progress {
                done,
                total,
                bytes_done: report.bytes_read,
                ..Default::default()
            });
        }
        self.inner
            .operation(|g| g.scrub_finish(repair, &mut report))??;
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(report)
    }

    /// Scrub extent `e` part by part, under its latch (the caller's): each
    /// part planned and judged under `meta`, its copies read without it on
    /// the scrub's own engine (`engine`, made again when the disks a part
    /// reads are no longer those it was made for).
    fn scrub_extent(
        &self,
        e: &super::scrub::ScrubExtent,
        power: usize,
        how: super::scrub::ScrubRepair,
        engine: &mut Option<(HandleEngine, BTreeMap<u16, DeviceId>)>,
        report: &mut super::scrub::ScrubReport,
    ) -> Result<(), GroupError> {
        let mut from = 0;
        // A part whose disks changed, or whose file the metadata plane
        // zeroed, between its reads and its judgement is read again, a
        // bounded number of times.
        let mut again = 0;
        loop {
            let planned = {
                let g = self.inner.meta()?;
                g.scrub_part(e, from, power)
                    .map(|(chunks, next)| (chunks, next, g.member_devices(), g.zero_mark()))
            };
            let Some((chunks, next, members, zero_mark)) = planned else {
                break;
            };
            let reads = Group::scrub_part_reads(&chunks);
            let stale = engine.as_ref().is_none_or(|(_, made_for)| {
                reads
                    .iter()
                    .any(|(_, d, _, _)| made_for.get(d) != members.get(d))
            });
            if stale {
                *engine = Some((self.side_engine(&members, SCRUB_DEPTH)?, members));
            }
            let Some(((side, ids), _)) = engine.as_mut() else {
                break;
            };
            let read = super::scrub::read_copies(side.as_mut(), reads, |d| ids.get(&d).copied())?;
            let judged = self
                .inner
                .meta()?
                .scrub_part_judge(e, from, &chunks, zero_mark, read, how, report)?;
            if !judged {
                again += 1;
                if again > SCRUB_READ_AGAIN_MAX {
                    return Err(GroupError::Interrupted(format!(
                        "the group's disks changed under the scrub {SCRUB_READ_AGAIN_MAX} times in a row; run it again"
                    )));
                }
                continue;
            }
            again = 0;
            match next {
                Some(n) => from = n,
                None => break,
            }
        }
        Ok(())
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

/// A live group's rebalance: its metadata steps are operations, its data
/// goes through a handle of its own.
struct LiveMoves<'l> {
    live: &'l LiveGroup,
    handle: DataHandle,
    slot: Arc<GuardSlot>,
}

impl super::relocate::MoveSite<'static> for LiveMoves<'_> {
    fn step<R>(&mut self, f: impl FnOnce(&mut Group<'static>) -> R) -> Result<R, GroupError> {
        self.live.inner.operation(f)
    }

    fn data(&mut self) -> (&mut dyn DataPort, Option<&std::sync::atomic::AtomicU64>) {
        (&mut self.handle, Some(&self.slot))
    }

    fn interrupted(&self) -> bool {
        self.live.interrupted()
    }
}

/// One thread's way to a live group's file bytes: its own engine on the
/// member disks. Not shared; make one per thread.
pub struct DataHandle {
    inner: Arc<Inner>,
    engine: Box<dyn IoEngine>,
    /// Member disk number → device in `engine`.
    devices: BTreeMap<u16, DeviceId>,
    /// Member disk number → its device in the metadata plane's engine, as
    /// `engine` was made from: a disk whose device changed since (let go of
    /// when it failed, attached again when found) gets a new engine too.
    made_from: BTreeMap<u16, DeviceId>,
    /// The epoch the running operation started in (see `plane.rs`).
    slot: Arc<GuardSlot>,
    /// Disks this handle wrote to since its last sync.
    unflushed: BTreeSet<u16>,
    read_only: bool,
    /// I/O buffers done with, handed out again (at most [`SPARE_MAX`], none
    /// bigger than [`SPARE_BYTES_MAX`]): a small read or write then neither
    /// allocates nor faults in fresh pages.
    spare: Vec<AlignedBuf>,
    /// This handle's copies of the published snapshots.
    snapshots: SnapshotCache,
    /// Requests its engine holds (for a new engine, when disks join).
    depth: usize,
    /// The I/O timeout its engine has: the group's `disk_io_timeout`, as
    /// the plane said when last looked at (each operation's start).
    io_timeout: Option<std::time::Duration>,
    /// The disk view epoch its engine's devices were checked against: a
    /// disk added to the group, or gone from it, since gets the handle a new
    /// engine (between operations: nothing is in flight then).
    devices_epoch: u64,
}

/// Buffers a handle keeps for reuse.
const SPARE_MAX: usize = 16;
/// The biggest buffer a handle keeps for reuse, in bytes.
const SPARE_BYTES_MAX: usize = 1 << 20;

impl DataHandle {
    pub fn read(&mut self, number: u32, offset: u64, buf: &mut [u8]) -> Result<(), GroupError> {
        self.read_checked(number, offset, buf, &|_| true)
    }

    /// A disk joined the group since this handle's engine was made (or,
    /// with `leaves`, one left it): make a new engine with every member
    /// attached (and none that left: the handle lets go of a dropped disk's
    /// device). Called with nothing in flight: as an operation starts
    /// (`leaves`), and between an operation's I/O batches, where only a
    /// join matters (a snapshot may name a disk that joined; a disk that
    /// left is named by none, so its device waits for the next operation).
    /// The members' devices come from the disk view, never from `meta`:
    /// between batches the operation holds its guard, and `meta`'s holder
    /// may be waiting for that guard (`offline_disks`). An engine source
    /// that cannot attach the new disk leaves it out, and an I/O to it then
    /// fails like one to a failed disk.
    fn refresh_devices_on(&mut self, leaves: bool) -> Result<(), GroupError> {
        let io_timeout = self.inner.plane.io_timeout();
        if io_timeout != self.io_timeout {
            self.engine.set_io_timeout(io_timeout);
            self.io_timeout = io_timeout;
        }
        let view = self.inner.plane.disks();
        if view.epoch == self.devices_epoch {
            return Ok(());
        }
        let now = view.member_devices();
        // A member whose device is not the one this engine was made with:
        // let go of (it failed), perhaps attached again under a new one.
        let changed = |d: &u16| now.get(d) != self.made_from.get(d);
        let joined = (0..view.writable.len() as u16)
            .any(|d| view.is_writable(d) && (!self.devices.contains_key(&d) || changed(&d)));
        let gone = |d: &u16| !view.is_member(*d) || changed(d);
        let left = leaves && self.devices.keys().any(gone);
        if !joined && !left {
            // A leave seen between batches waits for the operation's end.
            if leaves || !self.devices.keys().any(gone) {
                self.devices_epoch = view.epoch;
            }
            return Ok(());
        }
        self.devices_epoch = view.epoch;
        let (mut engine, devices) = self.inner.engines.engine(&now, self.depth)?;
        engine.set_io_timeout(self.io_timeout);
        self.engine = engine;
        self.devices = devices;
        self.made_from = now;
        Ok(())
    }

    fn refresh_devices(&mut self) -> Result<(), GroupError> {
        self.refresh_devices_on(true)
    }

    /// Whether member `disk`'s device answers: its first block reads.
    fn answers(&mut self, disk: u16) -> bool {
        let Some(device) = self.devices.get(&disk).copied() else {
            return false;
        };
        self.engine
            .read_at(device, 0, cairn_format::meta::BLOCK_BYTES)
            .is_ok()
    }

    /// The disk view epoch this handle last checked its devices against.
    /// Behind the plane's (`plane().disks().epoch`), the group's disks
    /// changed since (one joined or left, or changed state): its next I/O
    /// looks again, and may make a new engine. A pool of idle handles drops
    /// such ones, so that none keeps a dropped disk's device open.
    pub fn devices_epoch(&self) -> u64 {
        self.devices_epoch
    }

    /// Read, accepting a copy only if `accept` passes on the whole buffer.
    pub fn read_checked(
        &mut self,
        number: u32,
        offset: u64,
        buf: &mut [u8],
        accept: &dyn Fn(&[u8]) -> bool,
    ) -> Result<(), GroupError> {
        self.refresh_devices()?;
        let slot = self.slot.clone();
        data::read(self, Some(&slot), number, offset, buf, accept)
    }

    /// Write to every online copy; acknowledged when all have it (or the
    /// disks that failed are offline).
    pub fn write(&mut self, number: u32, offset: u64, bytes: &[u8]) -> Result<(), GroupError> {
        if self.read_only {
            return Err(GroupError::ReadOnly(self.inner.meta()?.name().to_string()));
        }
        self.refresh_devices()?;
        let slot = self.slot.clone();
        data::write(self, Some(&slot), number, offset, bytes)
    }

    /// Write `bytes` at any byte `offset` inside the file's sectors (a
    /// file system's write). Whole sectors go as they are; a sector the
    /// write covers only in part is read, patched and written back, with
    /// its extent's read-modify-write latch held exclusively from the read
    /// to the end of the write — every `write_bytes` to the extent takes
    /// that latch (shared when it has no partial sector), so no other
    /// write lands between the read and the write back and is lost.
    pub fn write_bytes(
        &mut self,
        number: u32,
        offset: u64,
        bytes: &[u8],
    ) -> Result<(), GroupError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let snap = self
            .file(number)
            .ok_or_else(|| GroupError::NotFound(format!("file {number} does not exist")))?;
        let sector = u64::from(snap.sector_bytes);
        let len = bytes.len() as u64;
        let end = offset
            .checked_add(len)
            .filter(|e| *e <= snap.size_bytes)
            .ok_or_else(|| {
                GroupError::Invalid(format!(
                    "write at offset {offset} length {len} goes past the end of the file ({} bytes); resize it first",
                    snap.size_bytes
                ))
            })?;
        let start = offset - offset % sector;
        let stop = end.next_multiple_of(sector);
        // The sectors covered in part: the first, the last (one, when the
        // write lies inside a sector).
        let mut partial: Vec<u64> = [
            (!offset.is_multiple_of(sector)).then_some(start),
            (!end.is_multiple_of(sector)).then_some(stop - sector),
        ]
        .into_iter()
        .flatten()
        .collect();
        partial.dedup();
        let pieces = snap.pieces(start, stop - start).ok_or_else(|| {
            GroupError::Corrupt(format!(
                "file {number}: its extent map does not cover {start}..{stop}"
            ))
        })?;
        let partial_extents: BTreeSet<u64> = partial
            .iter()
            .map(|at| snap.layout.locate(*at).extent)
            .collect();
        let keys = pieces
            .iter()
            .map(|p| {
                let hold = if partial_extents.contains(&p.extent) {
                    Hold::Exclusive
                } else {
                    Hold::Shared
                };
                ((number, snap.incarnation, RMW_LATCH | p.extent), hold)
            })
            .collect();
        let _rmw = self.inner.plane.latch(keys);
        if partial.is_empty() {
            return self.write(number, offset, bytes);
        }
        let mut buf = vec![0u8; (stop - start) as usize];
        for at in &partial {
            let i = (at - start) as usize;
            self.read(number, *at, &mut buf[i..i + sector as usize])?;
        }
        let from = (offset - start) as usize;
        buf[from..from + bytes.len()].copy_from_slice(bytes);
        self.write(number, start, &buf)
    }

    /// Make `len` bytes at `offset` of the file read as zeros, keeping its
    /// size and its AUs: `fallocate(PUNCH_HOLE | KEEP_SIZE)` with
    /// `discard`, `ZERO_RANGE` without. Extents the range covers whole
    /// become unwritten again, their AUs discarded on the member disks with
    /// `discard` ([`data::punch_extents`]). The rest of the range, in
    /// written extents, is zeroed in place on every copy
    /// ([`data::zero_parts`]), and sectors it covers in part are written.
    /// A range past the end stops there.
    pub fn punch(
        &mut self,
        number: u32,
        offset: u64,
        len: u64,
        discard: bool,
    ) -> Result<data::Punched, GroupError> {
        if self.read_only {
            return Err(GroupError::ReadOnly(self.inner.meta()?.name().to_string()));
        }
        self.refresh_devices()?;
        let snap = self
            .file(number)
            .ok_or_else(|| GroupError::NotFound(format!("file {number} does not exist")))?;
        let end = offset.saturating_add(len).min(snap.size_bytes);
        let mut done = data::Punched::default();
        if offset >= end {
            return Ok(done);
        }
        // Sectors covered in part: written with zeros (read, patched, written).
        let sector = u64::from(snap.sector_bytes);
        let (first, last) = (offset.next_multiple_of(sector), end - end % sector);
        let edges = if first >= last {
            vec![(offset, end)]
        } else {
            vec![(offset, first), (last, end)]
        };
        // (Not in an unwritten extent: it reads as zeros already, and a
        // write there would be its first, zeroing it whole.)
        let written = |at: u64| {
            snap.extent(snap.layout.locate(at).extent)
                .is_some_and(|e| e.initialized)
        };
        for (a, b) in edges.into_iter().filter(|(a, b)| a < b && written(*a)) {
            self.write_bytes(number, a, &vec![0u8; (b - a) as usize])?;
            done.zeroed_bytes += b - a;
        }
        if first >= last {
            return Ok(done);
        }
        let pieces = snap.pieces(first, last - first).ok_or_else(|| {
            GroupError::Corrupt(format!(
                "file {number}: its extent map does not cover {first}..{last}"
            ))
        })?;
        // Bytes of each extent the range covers: all of them (fine striping
        // deals an extent out in stripe units), or only some.
        let mut covered: BTreeMap<u64, u64> = BTreeMap::new();
        for p in &pieces {
            *covered.entry(p.extent).or_default() += p.len;
        }
        let whole: Vec<u64> = covered
            .iter()
            .filter(|(e, n)| **n == snap.layout.extent_bytes(**e))
            .map(|(e, _)| *e)
            .collect();
        let parts: Vec<(u64, u64, u64)> = pieces
            .iter()
            .filter(|p| whole.binary_search(&p.extent).is_err())
            .map(|p| (p.extent, p.within, p.len))
            .collect();
        let slot = self.slot.clone();
        if !parts.is_empty() {
            done.zeroed_bytes +=
                data::zero_parts(self, Some(&slot), number, snap.incarnation, &parts, discard)?;
        }
        let punched =
            data::punch_extents(self, Some(&slot), number, snap.incarnation, &whole, discard)?;
        done.extents = punched.extents;
        done.discarded_bytes = punched.discarded_bytes;
        Ok(done)
    }

    /// Make every write any handle of the group had acknowledged durable:
    /// a flush of every member disk this handle reaches (a flush covers
    /// what any writer completed on the device). For a caller that cannot
    /// tell which handle wrote (a file system's `fsync`).
    pub fn sync_all(&mut self) -> Result<(), GroupError> {
        self.refresh_devices()?;
        let view = self.inner.plane.disks();
        let writable: Vec<u16> = self
            .devices
            .keys()
            .copied()
            .filter(|d| view.is_writable(*d))
            .collect();
        self.unflushed.extend(writable);
        self.sync()
    }

    /// Make this handle's acknowledged writes durable (`fsync`).
    pub fn sync(&mut self) -> Result<(), GroupError> {
        let disks: Vec<u16> = self.unflushed.iter().copied().collect();
        let mut requests = Vec::new();
        let mut of = Vec::new();
        let mut failed = data::FailedDisks::new();
        for disk in &disks {
            match self.devices.get(disk) {
                Some(device) => {
                    of.push(*disk);
                    requests.push(Request {
                        device: *device,
                        tag: requests.len() as u64,
                        op: Op::Flush,
                    });
                }
                // Written through this handle, yet not flushable by it: it
                // cannot say the writes are durable.
                None => {
                    failed.insert(
                        *disk,
                        "written through a data handle that no longer holds its device, so not flushed".into(),
                    );
                }
            }
        }
        let view = self.inner.plane.disks();
        // On an engine error the disks stay unflushed: a later sync tries again.
        let completions = self
            .engine
            .execute_all(requests)
            .map_err(super::error::io_err("(engine)"))?;
        for (d, c) in of.into_iter().zip(completions) {
            if let Err(e) = &c.result {
                failed
                    .entry(d)
                    .or_insert_with(|| super::disk_states::failure_reason(e));
            }
        }
        self.unflushed.clear();
        if failed.is_empty() {
            return Ok(());
        }
        self.disks_failed(&failed, view.epoch)
    }

    /// Make every extent of the file initialised (zeroing the ones never
    /// written), as a caller about to read all of it wants: reads of a
    /// never-written extent return zeros without touching a disk.
    pub fn initialize_file(&mut self, number: u32) -> Result<u64, GroupError> {
        if self.read_only {
            return Err(GroupError::ReadOnly(self.inner.meta()?.name().to_string()));
        }
        self.refresh_devices()?;
        let slot = self.slot.clone();
        data::initialize(self, Some(&slot), number)
    }

    /// The file's current snapshot, if it exists.
    pub fn file(&self, number: u32) -> Option<Arc<FileSnapshot>> {
        self.inner.plane.file(number)
    }
}

impl Drop for DataHandle {
    fn drop(&mut self) {
        self.inner.plane.drop_guard_slot(&self.slot);
    }
}

impl DataPort for DataHandle {
    fn plane(&self) -> &Arc<DataPlane> {
        &self.inner.plane
    }
    fn engine(&mut self) -> &mut dyn IoEngine {
        &mut *self.engine
    }
    fn device(&self, disk: u16) -> Option<DeviceId> {
        self.devices.get(&disk).copied()
    }
    fn may_write(&self) -> bool {
        !self.read_only
    }
    fn wrote(&mut self, disk: u16) {
        self.unflushed.insert(disk);
    }
    fn mark_initialized(
        &mut self,
        file: u32,
        incarnation: u32,
        extents: &[(u64, cairn_format::group::Extent)],
        written: &BTreeSet<u16>,
    ) -> Result<(), GroupError> {
        self.inner.operation(|group| {
            DataPort::mark_initialized(group, file, incarnation, extents, written)
        })?
    }
    fn mark_unwritten(
        &mut self,
        file: u32,
        incarnation: u32,
        extents: &[(u64, cairn_format::group::Extent)],
    ) -> Result<Vec<u64>, GroupError> {
        self.inner
            .operation(|group| DataPort::mark_unwritten(group, file, incarnation, extents))?
    }
    fn mark_stale(
        &mut self,
        file: u32,
        incarnation: u32,
        marks: &[super::data::StaleMark],
    ) -> Result<(), GroupError> {
        self.inner.operation(|group| {
            group.check_writable()?;
            group.set_stale_in_steps(file, incarnation, marks)
        })?
    }
    fn missed_writes(&mut self, disks: &BTreeSet<u16>) {
        // Not an operation: the group has stopped, and only records this.
        if let Ok(mut group) = self.inner.meta() {
            group.missed_writes(disks);
        }
    }
    fn disks_failed(&mut self, disks: &data::FailedDisks, epoch: u64) -> Result<(), GroupError> {
        // Another thread may have taken them offline since: once is enough.
        self.inner
            .operation(|group| group.disks_failed(disks, epoch))?
    }
    fn snapshot(&mut self, number: u32) -> Option<Arc<FileSnapshot>> {
        let snap = self.snapshots.file(&self.inner.plane, number);
        // A snapshot may name a disk that joined after this operation
        // began (a rebalance moved a copy there): its join bumped the view
        // before that snapshot was published, so looking after the fetch
        // finds it. Snapshots are taken between I/O batches, with nothing
        // in flight. A failure here (the group stopped) shows in the I/O.
        let _ = self.refresh_devices_on(false);
        snap
    }
    fn disk_view(&mut self) -> Arc<DiskView> {
        self.snapshots.disks(&self.inner.plane)
    }
    fn buffer(&mut self, len: usize) -> AlignedBuf {
        // The smallest spare that holds it: a big one stays for a big I/O.
        let fits = self
            .spare
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        match fits {
            Some(i) => {
                let mut buf = self.spare.swap_remove(i);
                buf.set_len(len);
                buf
            }
            None => AlignedBuf::zeroed(len),
        }
    }
    fn recycle(&mut self, buf: AlignedBuf) {
        if self.spare.len() < SPARE_MAX && buf.capacity() <= SPARE_BYTES_MAX {
            self.spare.push(buf);
        }
    }
}
