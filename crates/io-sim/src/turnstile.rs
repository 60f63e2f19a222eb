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
//!
//! A blocked actor is not handed the baton again until it may have become
//! free: while it waits, only the other actors' waits have run, and they
//! let nothing go. Each hand-over is a context switch, and on a contended
//! lock most of them used to wake an actor only to find it still blocked.
//! `sched` asks one thing of wait loops: an actor that called `blocked`
//! calls `resumed` once it leaves the loop, so an actor is *waiting* from its
//! `blocked` until its `resumed`. Every actor's mark is cleared whenever an
//! actor that is not waiting reaches a scheduling point or finishes (it ran
//! code that may have let something go); a waiting actor's `blocked` marks
//! it. The baton at a blocked point goes to an unmarked actor if there is
//! one (else, as before, to any other, and the deadlock count goes on). The
//! rule errs only towards waking an actor for nothing, never the other way:
//! a wait nested in another (a lock taken inside a wait loop) or one left by
//! a panic clears the marks more often than needed, and a marked actor is
//! still run when nobody else can be. So it changes how often actors are
//! woken in vain, never whether one that could go on runs.
//!
//! A waiter that says how to tell whether it may go on
//! (`sched::blocked_until`: a lock free again, the group commit's state
//! ready) is handed the baton only while that says yes, unless nobody else
//! can be: most hand-overs to waiters were to one whose lock was still
//! held, and six in ten of all hand-overs were such (the metadata lock and
//! the commit gate, held across I/O). The test runs on the picking thread,
//! under the turnstile's lock, while the waiter is switched out.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};

use cairn_io::poison::{recover, Recover};
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
    /// Per actor: inside a wait loop (from `blocked` to `resumed`).
    waiting: Vec<bool>,
    /// Per actor: found blocked since any actor last ran code outside a
    /// wait loop, so there is no point running it yet.
    stuck: Vec<bool>,
    /// Per actor switched out at a `blocked_until`: how to tell whether it
    /// may go on.
    probes: Vec<Option<Probe>>,
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

/// A waiter's test of whether it may go on, borrowed from its frame for as
/// long as it is switched out ([`Turnstile::switch`] sets it just before
/// handing the baton on, and clears it, under the turnstile's lock, as soon
/// as the baton comes back: only then can the waiter's frame go).
struct Probe(*const (dyn Fn() -> bool + Sync + 'static));

// SAFETY: the closure behind the pointer is `Sync`, and is only called
// while its owner is switched out (see `Probe`), by whichever thread
// holds the turnstile's lock.
unsafe impl Send for Probe {}

impl Probe {
    fn new(f: &(dyn Fn() -> bool + Sync)) -> Self {
        // SAFETY: only the lifetime is erased; `Probe`'s rule keeps every
        // call within the borrow (the owner cannot leave `switch`, so its
        // frame cannot go, before it clears the probe).
        let erased: &'static (dyn Fn() -> bool + Sync) = unsafe {
            std::mem::transmute::<&(dyn Fn() -> bool + Sync), &'static (dyn Fn() -> bool + Sync)>(f)
        };
        Self(erased)
    }

    fn may_go_on(&self) -> bool {
        // SAFETY: see `Probe`: the owner is switched out, its frame alive.
        unsafe { (*self.0)() }
    }
}

/// See the module documentation.
pub struct Turnstile {
    seed: u64,
    state: Mutex<State>,
    turn: Condvar,
}

/// An actor: a closure run on its own thread, one at a time with the others.
pub type Actor<'a> = Box<dyn FnOnce() + Send + 'a>;

impl Turnstile {
    pub fn new(seed: u64) -> Arc<Self> {
        Arc::new(Self {
            seed,
            state: Mutex::new(State {
                running: None,
                threads: Vec::new(),
                live: Vec::new(),
                waiting: Vec::new(),
                stuck: Vec::new(),
                probes: Vec::new(),
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
        self.state.lock_or_recover().stay_per_million = per_cent.min(100) * 10_000;
        self
    }

    /// Scheduling points passed so far.
    pub fn switches(&self) -> u64 {
        self.state.lock_or_recover().switches
    }

    /// Run `actors` to their end, one at a time. Returns, per actor, the
    /// message of its panic if it panicked.
    pub fn run(self: &Arc<Self>, actors: Vec<Actor<'_>>) -> Vec<Option<String>> {
        {
            let mut state = self.state.lock_or_recover();
            state.live = vec![true; actors.len()];
            state.waiting = vec![false; actors.len()];
            state.stuck = vec![false; actors.len()];
            state.probes = (0..actors.len()).map(|_| None).collect();
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
                let mut state = self.state.lock_or_recover();
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
        let mut state = self.state.lock_or_recover();
        state.threads[me] = Some(std::thread::current());
        while state.running != Some(me) {
            state = recover(self.turn.wait(state));
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
        let mut state = self.state.lock_or_recover();
        state.live[me] = false;
        state.stuck.fill(false);
        let next = self.pick(&mut state, None);
        let wake = self.hand_over(&mut state, next);
        drop(state);
        if let Some(thread) = wake {
            thread.unpark();
        }
    }

    /// The next actor to run, drawn from the seed among the live ones:
    /// with `blocked_me`, among those other than it that are not stuck, or
    /// if there are none, any other (itself only if it is the last).
    /// Either way a waiter whose probe says it cannot go on yet is passed
    /// over while anyone else can be picked.
    fn pick(&self, state: &mut State, blocked_me: Option<usize>) -> Option<usize> {
        let n = state.live.len();
        let eligible = |state: &State, i: usize, strict: bool| {
            state.live[i]
                && !(strict && state.probes[i].as_ref().is_some_and(|p| !p.may_go_on()))
                && match blocked_me {
                    Some(me) => i != me && !(strict && state.stuck[i]),
                    None => true,
                }
        };
        let mut count = (0..n).filter(|i| eligible(state, *i, true)).count();
        let mut strict = true;
        if count == 0 {
            strict = false;
            count = (0..n).filter(|i| eligible(state, *i, false)).count();
        }
        if count == 0 {
            // Only the caller is left.
            return blocked_me.filter(|me| state.live[*me]);
        }
        let k = (state.rng.next_u64() % count as u64) as usize;
        (0..n).filter(|i| eligible(state, *i, strict)).nth(k)
    }

    fn switch(&self, blocked: bool, probe: Option<&(dyn Fn() -> bool + Sync)>) {
        let Some(me) = ME.with(Cell::get) else {
            return;
        };
        let mut state = self.state.lock_or_recover();
        state.switches += 1;
        if !blocked || !state.waiting[me] {
            // Code ran since this actor's last point (a wait loop yields only
            // through `blocked`): it may have let go of what others wait for.
            state.stuck.fill(false);
        }
        state.waiting[me] = blocked;
        state.stuck[me] = blocked;
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
        if blocked {
            state.probes[me] = probe.map(Probe::new);
        }
        let wake = self.hand_over(&mut state, next);
        drop(state);
        if let Some(thread) = wake {
            thread.unpark();
        }
        // Parked until handed the baton again (a wake-up without it, which
        // park allows, just parks again); the probe goes with the wait.
        loop {
            let mut state = self.state.lock_or_recover();
            if state.running == Some(me) {
                state.probes[me] = None;
                return;
            }
            drop(state);
            std::thread::park();
        }
    }
}

impl Scheduler for Turnstile {
    fn yield_now(&self) {
        self.switch(false, None);
    }
    fn blocked(&self) {
        self.switch(true, None);
    }
    fn blocked_until(&self, may_go_on: &(dyn Fn() -> bool + Sync)) {
        self.switch(true, Some(may_go_on));
    }
    fn resumed(&self) {
        if let Some(me) = ME.with(Cell::get) {
            self.state.lock_or_recover().waiting[me] = false;
        }
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
                            log.lock_or_recover().push((a, step));
                            sched::yield_now();
                        }
                    }) as Actor<'_>
                })
                .collect();
            let panics = t.run(actors);
            assert!(panics.iter().all(Option::is_none));
            recover(log.into_inner())
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
                *done.lock_or_recover() += 1;
            }),
        ];
        let panics = t.run(actors);
        assert_eq!(panics[0].as_deref(), Some("boom"));
        assert!(panics[1].is_none());
        assert_eq!(*done.lock_or_recover(), 1);
    }

    /// Three actors wait for a fourth that holds what they need through 40
    /// scheduling points. Once all three are waiting, none looks twice
    /// between two of the holder's points: nothing it waits for can change
    /// before the holder runs again. (Before that, a waiter's first look
    /// comes from outside a wait and clears the others' marks.) Handed the
    /// baton at random, the waiters would look at each other's waits over
    /// and over, a context switch each.
    #[test]
    fn a_blocked_actor_waits_until_the_others_ran() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        const WAITERS: u64 = 3;
        const HOLDER_POINTS: u64 = 40;
        for seed in 0..20 {
            let t = Turnstile::new(seed);
            let held = AtomicBool::new(true);
            let holder_ran = AtomicU64::new(0);
            let entered = AtomicU64::new(0);
            let looks = AtomicU64::new(0);
            let wasted = AtomicU64::new(0);
            let mut actors: Vec<Actor<'_>> = vec![Box::new(|| {
                for _ in 0..HOLDER_POINTS {
                    holder_ran.fetch_add(1, Ordering::SeqCst);
                    sched::yield_now();
                }
                held.store(false, Ordering::SeqCst);
            })];
            for _ in 0..WAITERS {
                actors.push(Box::new(|| {
                    // The holder's count at this waiter's last look, if all
                    // waiters were waiting by then.
                    let mut last: Option<u64> = None;
                    let mut first = true;
                    while held.load(Ordering::SeqCst) {
                        looks.fetch_add(1, Ordering::SeqCst);
                        if first {
                            entered.fetch_add(1, Ordering::SeqCst);
                            first = false;
                        }
                        let now = holder_ran.load(Ordering::SeqCst);
                        if last == Some(now) {
                            wasted.fetch_add(1, Ordering::SeqCst);
                        }
                        last = (entered.load(Ordering::SeqCst) == WAITERS).then_some(now);
                        sched::blocked();
                    }
                    if !first {
                        sched::resumed();
                    }
                }));
            }
            let panics = t.run(actors);
            assert!(panics.iter().all(Option::is_none), "{panics:?}");
            assert!(
                looks.load(Ordering::SeqCst) > 0,
                "seed {seed}: nobody waited"
            );
            assert_eq!(
                wasted.load(Ordering::SeqCst),
                0,
                "seed {seed}: a waiter looked again before the holder ran"
            );
        }
    }

    /// A waiter that says how to tell whether it may go on is not run again
    /// while that says no: three waiters on a lock held through 40
    /// scheduling points each look once while it is held (handed the baton
    /// at random, they would look again at nearly every point), and all
    /// get it once it is let go.
    #[test]
    fn a_waiter_with_a_probe_is_not_run_while_it_says_no() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        const WAITERS: u64 = 3;
        for seed in 0..20 {
            let t = Turnstile::new(seed);
            let lock = Mutex::new(0u64);
            let held = AtomicBool::new(false);
            let looks_while_held = AtomicU64::new(0);
            let mut actors: Vec<Actor<'_>> = vec![Box::new(|| {
                let g = lock.lock_or_recover();
                held.store(true, Ordering::SeqCst);
                for _ in 0..40 {
                    sched::yield_now();
                }
                held.store(false, Ordering::SeqCst);
                drop(g);
            })];
            for _ in 0..WAITERS {
                actors.push(Box::new(|| {
                    // Let the holder take it first, most of the time.
                    sched::yield_now();
                    let mut waited = false;
                    let mut g = loop {
                        match lock.try_lock() {
                            Ok(g) => break g,
                            Err(_) => {
                                if held.load(Ordering::SeqCst) {
                                    looks_while_held.fetch_add(1, Ordering::SeqCst);
                                }
                                waited = true;
                                sched::blocked_until(&|| lock.try_lock().is_ok());
                            }
                        }
                    };
                    if waited {
                        sched::resumed();
                    }
                    *g += 1;
                }));
            }
            let panics = t.run(actors);
            assert!(panics.iter().all(Option::is_none), "{panics:?}");
            assert_eq!(*lock.lock_or_recover(), WAITERS);
            assert!(
                looks_while_held.load(Ordering::SeqCst) <= WAITERS,
                "seed {seed}: {} looks at a held lock by {WAITERS} waiters",
                looks_while_held.load(Ordering::SeqCst)
            );
        }
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
                        let mut g = recover(sched::lock(shared));
                        sched::yield_now(); // switched out while holding it
                        *g += 1;
                    }
                }) as Actor<'_>
            })
            .collect();
        let panics = t.run(actors);
        assert!(panics.iter().all(Option::is_none), "{panics:?}");
        assert_eq!(*shared.lock_or_recover(), 30);
    }
}
