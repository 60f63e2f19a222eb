//! A deterministic scheduler for threads: the interleaving simulator's
//! heart, in the manner of TigerBeetle's VOPR.
//!
//! Each actor is a real thread running real product code, but only one runs
//! at a time: it holds the baton until it reaches a scheduling point (every
//! I/O on a [`crate::SharedSim`] handle, and every place the product would
//! block on another thread — see `cairn_io::sched`), where the turnstile
//! draws the next actor to run from its seed. The order of everything the
//! actors do, and so every completion order and every crash point of the
//! simulated disks, follows from the seed: a failing run replays exactly.
//!
//! An actor that is blocked (waiting for a lock or a latch another actor
//! holds) hands the baton to another; if every actor left is blocked for
//! many rounds in a row, that is a deadlock, reported as a panic naming the
//! seed.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use cairn_io::sched::{self, Scheduler};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

/// Consecutive switches on which only blocked actors ran: a deadlock.
const BLOCKED_SWITCHES_MAX: u64 = 100_000;

thread_local! {
    static ME: Cell<Option<usize>> = const { Cell::new(None) };
}

struct State {
    /// The actor holding the baton.
    running: Option<usize>,
    /// Per actor: its thread, once it has started (woken by unpark).
    threads: Vec<Option<std::thread::Thread>>,
    /// Per actor: still running its closure.
    live: Vec<bool>,
    /// Actors not yet past their first turn (they wait on the condition
    /// variable; after it, they park).
    starting: usize,
    rng: ChaCha8Rng,
    switches: u64,
    blocked_streak: u64,
    /// Per million: how often a scheduling point where the actor could go on
    /// lets it (the others still run at any point, only less often).
    stay_per_million: u64,
}

/// See the module documentation.
pub struct Turnstile {
    seed: u64,
    state: Mutex<State>,
    turn: Condvar,
}

/// An actor: a closure run on its own thread, one at a time with the others.
pub type Actor<'a> = Box<dyn FnOnce() + Send + 'a>;

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Turnstile {
    pub fn new(seed: u64) -> Arc<Self> {
        Arc::new(Self {
            seed,
            state: Mutex::new(State {
                running: None,
                threads: Vec::new(),
                live: Vec::new(),
                starting: 0,
                rng: ChaCha8Rng::seed_from_u64(seed ^ 0x7475_726e_7374_696c),
                switches: 0,
                blocked_streak: 0,
                stay_per_million: 0,
            }),
            turn: Condvar::new(),
        })
    }

    /// At a scheduling point where it is not blocked, the running actor goes
    /// on with probability `per_cent` instead of a draw among all actors:
    /// longer runs between switches, and far fewer thread hand-overs, each
    /// of which costs a context switch. 0 (the default) switches the most.
    pub fn stay(self: Arc<Self>, per_cent: u64) -> Arc<Self> {
        lock(&self.state).stay_per_million = per_cent.min(100) * 10_000;
        self
    }

    /// Scheduling points passed so far.
    pub fn switches(&self) -> u64 {
        lock(&self.state).switches
    }

    /// Run `actors` to their end, one at a time. Returns, per actor, the
    /// message of its panic if it panicked.
    pub fn run(self: &Arc<Self>, actors: Vec<Actor<'_>>) -> Vec<Option<String>> {
        {
            let mut state = lock(&self.state);
            state.live = vec![true; actors.len()];
            state.threads = vec![None; actors.len()];
            state.starting = actors.len();
            state.running = None;
        }
        let results: Vec<Option<String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = actors
                .into_iter()
                .enumerate()
                .map(|(i, actor)| {
                    let me = self.clone();
                    scope.spawn(move || {
                        ME.with(|m| m.set(Some(i)));
                        sched::install(Some(me.clone() as Arc<dyn Scheduler>));
                        me.wait_turn(i);
                        let outcome = catch_unwind(AssertUnwindSafe(actor));
                        sched::install(None);
                        me.finish(i);
                        outcome.err().map(|p| panic_message(&*p))
                    })
                })
                .collect();
            {
                let mut state = lock(&self.state);
                let first = self.pick(&mut state, None);
                state.running = first;
                self.turn.notify_all();
            }
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| Some(panic_message(&*p))))
                .collect()
        });
        results
    }

    fn wait_turn(&self, me: usize) {
        let mut state = lock(&self.state);
        state.threads[me] = Some(std::thread::current());
        while state.running != Some(me) {
            state = self
                .turn
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.starting -= 1;
    }

    /// Hand the baton to `next`; returns its thread, to be woken (unparked)
    /// once the state's lock is let go, so that it does not wake only to
    /// wait for the lock. Threads still waiting for their first turn wait on
    /// the condition variable instead; after it, they park.
    fn hand_over(&self, state: &mut State, next: Option<usize>) -> Option<std::thread::Thread> {
        state.running = next;
        if state.starting > 0 {
            self.turn.notify_all();
        }
        next.and_then(|n| state.threads[n].clone())
    }

    fn finish(&self, me: usize) {
        let mut state = lock(&self.state);
        state.live[me] = false;
        let next = self.pick(&mut state, None);
        let wake = self.hand_over(&mut state, next);
        drop(state);
        if let Some(thread) = wake {
            thread.unpark();
        }
    }

    /// The next actor to run, drawn from the seed among the live ones
    /// (`except` excluded when another is live).
    fn pick(&self, state: &mut State, except: Option<usize>) -> Option<usize> {
        let live: Vec<usize> = (0..state.live.len()).filter(|i| state.live[*i]).collect();
        let choices: Vec<usize> = match except {
            Some(me) if live.iter().any(|i| *i != me) => {
                live.into_iter().filter(|i| *i != me).collect()
            }
            _ => live,
        };
        if choices.is_empty() {
            return None;
        }
        let k = (state.rng.next_u64() % choices.len() as u64) as usize;
        Some(choices[k])
    }

    fn switch(&self, blocked: bool) {
        let Some(me) = ME.with(Cell::get) else {
            return;
        };
        let mut state = lock(&self.state);
        state.switches += 1;
        if blocked {
            state.blocked_streak += 1;
            assert!(
                state.blocked_streak < BLOCKED_SWITCHES_MAX,
                "deadlock: every actor left is waiting for another (seed {})",
                self.seed
            );
        } else {
            state.blocked_streak = 0;
            let stay = state.stay_per_million;
            if stay > 0 && state.rng.next_u64() % 1_000_000 < stay {
                return;
            }
        }
        let next = self.pick(&mut state, blocked.then_some(me));
        if next == Some(me) {
            return;
        }
        let wake = self.hand_over(&mut state, next);
        drop(state);
        if let Some(thread) = wake {
            thread.unpark();
        }
        // Parked until handed the baton again (a wake-up without it, which
        // park allows, just parks again).
        while lock(&self.state).running != Some(me) {
            std::thread::park();
        }
    }
}

impl Scheduler for Turnstile {
    fn yield_now(&self) {
        self.switch(false);
    }
    fn blocked(&self) {
        self.switch(true);
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_string()))
        .unwrap_or_else(|| "a panic with no message".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three actors appending to a shared log at scheduling points: one seed
    /// always gives one order, and different seeds give different ones.
    #[test]
    fn one_seed_one_order() {
        let order = |seed: u64| {
            let log = Mutex::new(Vec::new());
            let t = Turnstile::new(seed);
            let actors: Vec<Actor<'_>> = (0..3)
                .map(|a| {
                    let log = &log;
                    Box::new(move || {
                        for step in 0..20 {
                            log.lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .push((a, step));
                            sched::yield_now();
                        }
                    }) as Actor<'_>
                })
                .collect();
            let panics = t.run(actors);
            assert!(panics.iter().all(Option::is_none));
            log.into_inner().unwrap_or_else(PoisonError::into_inner)
        };
        assert_eq!(order(7), order(7));
        assert_ne!(order(7), order(8));
        assert_eq!(order(9).len(), 60);
    }

    /// A panic in one actor is reported, and the others still finish.
    #[test]
    fn a_panicking_actor_is_reported_and_the_others_finish() {
        let t = Turnstile::new(1);
        let done = Mutex::new(0);
        let actors: Vec<Actor<'_>> = vec![
            Box::new(|| panic!("boom")),
            Box::new(|| {
                sched::yield_now();
                *done.lock().unwrap_or_else(PoisonError::into_inner) += 1;
            }),
        ];
        let panics = t.run(actors);
        assert_eq!(panics[0].as_deref(), Some("boom"));
        assert!(panics[1].is_none());
        assert_eq!(*done.lock().unwrap_or_else(PoisonError::into_inner), 1);
    }

    /// A lock taken through `sched::lock` while its holder is switched out
    /// yields instead of deadlocking the one running thread.
    #[test]
    fn a_held_lock_yields_instead_of_blocking() {
        let t = Turnstile::new(3);
        let shared = Mutex::new(0u32);
        let actors: Vec<Actor<'_>> = (0..3)
            .map(|_| {
                let shared = &shared;
                Box::new(move || {
                    for _ in 0..10 {
                        let mut g = sched::lock(shared).unwrap_or_else(PoisonError::into_inner);
                        sched::yield_now(); // switched out while holding it
                        *g += 1;
                    }
                }) as Actor<'_>
            })
            .collect();
        let panics = t.run(actors);
        assert!(panics.iter().all(Option::is_none), "{panics:?}");
        assert_eq!(*shared.lock().unwrap_or_else(PoisonError::into_inner), 30);
    }
}
