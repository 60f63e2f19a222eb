//! One set of simulated disks shared by several engines, as one set of real
//! disks is shared by the engines of several threads: the live group's
//! metadata plane has one, and each data handle one ([`SharedSim::handle`]).
//!
//! Every handle's requests go to the one [`SimEngine`], so they are ordered,
//! completed and made durable (or lost at a crash) together, exactly as on
//! shared devices; each handle sees only its own completions. A handle that
//! waits while only other handles have requests in flight moves simulated
//! time on for them (their completions go to their queues), so a full queue
//! is never a deadlock.
//!
//! A crash point can be armed for all handles at once
//! ([`SharedSim::crash_after`]): after that many mutating requests (writes,
//! flushes, discards, write-zeroes) every request of every handle fails (it
//! is sent to no device), as if the process died there; the test then calls
//! [`SimEngine::crash`] through [`SharedSim::with`].

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use cairn_io::poison::Recover;
use cairn_io::{
    Completion, DeviceId, EngineStats, Geometry, IoEngine, IoError, Op, Request, SubmitError,
};

use crate::engine::SimEngine;

struct State {
    sim: SimEngine,
    /// Per handle: completions ready for it.
    queues: HashMap<u32, VecDeque<Completion>>,
    /// Per handle: requests submitted and not yet popped by it.
    in_flight: HashMap<u32, usize>,
    /// Engine tag → (handle, the handle's own tag).
    tags: BTreeMap<u64, (u32, u64)>,
    next_tag: u64,
    next_handle: u32,
    /// Mutating requests left before the "process dies"; `None`: never.
    budget: Option<usize>,
}

impl State {
    /// Move what the simulator completed to the handles' queues.
    fn route(&mut self) {
        while let Some(mut c) = self.sim.pop_completion() {
            let Some((handle, tag)) = self.tags.remove(&c.tag) else {
                continue;
            };
            c.tag = tag;
            self.queues.entry(handle).or_default().push_back(c);
        }
    }
}

/// Simulated disks shared by any number of engine handles.
#[derive(Clone)]
pub struct SharedSim {
    /// Poisoning is recovered (`cairn_io::poison`): a panic under the lock
    /// (a failed assertion in a test) leaves a state the test is about to
    /// throw away anyway.
    state: Arc<Mutex<State>>,
}

impl SharedSim {
    pub fn new(sim: SimEngine) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                sim,
                queues: HashMap::new(),
                in_flight: HashMap::new(),
                tags: BTreeMap::new(),
                next_tag: 0,
                next_handle: 0,
                budget: None,
            })),
        }
    }

    /// A new engine on the shared disks (every disk the simulator has now).
    pub fn handle(&self) -> SimHandle {
        let mut state = self.state.lock_or_recover();
        let id = state.next_handle;
        state.next_handle += 1;
        let mut geometries = Vec::new();
        let mut device = 0u32;
        while let Some(g) = state.sim.geometry(DeviceId(device)) {
            geometries.push(g.clone());
            device += 1;
        }
        let depth_max = state.sim.depth_max();
        SimHandle {
            state: self.state.clone(),
            id,
            geometries,
            depth_max,
            io_timeout: None,
        }
    }

    /// Work on the simulator itself (add disks, inject faults, crash, read
    /// what is stored) while no handle is inside it.
    pub fn with<R>(&self, f: impl FnOnce(&mut SimEngine) -> R) -> R {
        let mut state = self.state.lock_or_recover();
        state.route();
        f(&mut state.sim)
    }

    /// Arm the crash point: after `mutations` more mutating requests, every
    /// request of every handle fails (ENXIO). `None` disarms it.
    pub fn crash_after(&self, mutations: Option<usize>) {
        self.state.lock_or_recover().budget = mutations;
    }

    /// Whether the armed crash point has been reached.
    pub fn crashed(&self) -> bool {
        self.state.lock_or_recover().budget == Some(0)
    }

    /// Forget every request in flight and every undelivered completion (the
    /// process died): call after [`SimEngine::crash`], before new handles.
    pub fn reset_handles(&self) {
        let mut state = self.state.lock_or_recover();
        state.queues.clear();
        state.in_flight.clear();
        state.tags.clear();
    }
}

/// One engine on a [`SharedSim`].
pub struct SimHandle {
    state: Arc<Mutex<State>>,
    id: u32,
    geometries: Vec<Geometry>,
    depth_max: usize,
    /// This handle's I/O timeout, given to the simulator with each request.
    io_timeout: Option<std::time::Duration>,
}

impl IoEngine for SimHandle {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn geometry(&self, device: DeviceId) -> Option<&Geometry> {
        self.geometries.get(device.0 as usize)
    }

    fn submit(&mut self, request: Request) -> Result<(), SubmitError> {
        // Every I/O is a point where the interleaving simulator may switch
        // threads (a no-op otherwise).
        cairn_io::sched::yield_now();
        let mut state = self.state.lock_or_recover();
        let mutates = !matches!(request.op, Op::Read { .. });
        let dead = match state.budget {
            Some(0) => true,
            Some(left) if mutates => {
                state.budget = Some(left - 1);
                false
            }
            _ => false,
        };
        let own_tag = request.tag;
        let engine_tag = state.next_tag;
        let routed = Request {
            // A dead process reaches no device: the request fails.
            device: if dead {
                DeviceId(u32::MAX)
            } else {
                request.device
            },
            tag: engine_tag,
            op: request.op,
        };
        state.sim.set_io_timeout(self.io_timeout);
        match state.sim.submit(routed) {
            Ok(()) => {
                state.next_tag += 1;
                state.tags.insert(engine_tag, (self.id, own_tag));
                *state.in_flight.entry(self.id).or_default() += 1;
                Ok(())
            }
            Err(SubmitError::QueueFull(mut back)) => {
                back.tag = own_tag;
                if dead {
                    back.device = DeviceId(u32::MAX);
                }
                Err(SubmitError::QueueFull(back))
            }
        }
    }

    fn wait(&mut self, min_completions: usize) -> Result<(), IoError> {
        cairn_io::sched::yield_now();
        let mut state = self.state.lock_or_recover();
        state.route();
        let mine = state.in_flight.get(&self.id).copied().unwrap_or(0);
        if mine == 0 {
            // Nothing of ours in flight: move time on once for the others, so
            // a caller refused by a queue they filled makes progress.
            if min_completions > 0 && state.sim.in_flight() > 0 {
                state.sim.wait(1)?;
                state.route();
            }
            return Ok(());
        }
        let want = min_completions.min(mine);
        loop {
            let ready = state.queues.get(&self.id).map_or(0, VecDeque::len);
            if ready >= want || state.sim.in_flight() == 0 {
                return Ok(());
            }
            state.sim.wait(1)?;
            state.route();
        }
    }

    fn pop_completion(&mut self) -> Option<Completion> {
        let mut state = self.state.lock_or_recover();
        state.route();
        let c = state.queues.get_mut(&self.id)?.pop_front()?;
        if let Some(n) = state.in_flight.get_mut(&self.id) {
            *n = n.saturating_sub(1);
        }
        Some(c)
    }

    fn set_io_timeout(&mut self, timeout: Option<std::time::Duration>) {
        self.io_timeout = timeout;
    }

    fn in_flight(&self) -> usize {
        self.state
            .lock_or_recover()
            .in_flight
            .get(&self.id)
            .copied()
            .unwrap_or(0)
    }

    fn depth_max(&self) -> usize {
        self.depth_max
    }

    fn stats(&self) -> EngineStats {
        self.state.lock_or_recover().sim.stats()
    }
}
