//! A simulated disk that lies, for fault-injection tests. Never a stand-in for a
//! real device in an end-to-end test: the real backends have their own.
//!
//! Model. Each disk keeps a *durable* image (what survives a crash) and a list of
//! *pending* writes (what a read sees, but a crash may keep, lose or tear). Every
//! operation takes effect for readers when it is submitted, in submission order;
//! its completion arrives after a seeded random latency, so completions are
//! reordered as on a real device with a queue. Durability is as weak as a real
//! device's: a flush takes effect when it completes, and covers only the writes
//! that had completed when it was issued (a write still in flight is not
//! covered); a FUA write is durable once it has completed; what readers see
//! never goes back to older data because of a flush.
//!
//! Faults, all driven by the seed so a failing run replays exactly:
//! - read and write errors on byte ranges, or at a rate per million requests (EIO);
//! - a lost disk: every request fails with ENXIO;
//! - a hung disk ([`SimEngine::hang_disk`]): a request to it takes no effect
//!   and never completes — with an I/O timeout set
//!   ([`IoEngine::set_io_timeout`](cairn_io::IoEngine::set_io_timeout)) it completes with `TimedOut` that long
//!   after its submission, in simulated time (waiting moves the time
//!   there), with no buffer back; with none, a wait for it is a caller that
//!   would hang for ever, and panics saying so;
//! - bit rot: a bit flipped in stored data, reported to the test, silent to the reader;
//! - misdirected writes at a rate: the data lands at another aligned offset and the
//!   write reports success;
//! - discard that reads back stale data instead of zeros;
//! - a crash: each pending write is kept, lost, or torn (each physical sector kept
//!   or not) by the [`CrashPolicy`]; completions not yet delivered are lost;
//! - another image in the disk's place ([`SimEngine::image`],
//!   [`SimEngine::put_image`]): an older copy of it put back, a blank
//!   device, another group's disk — what an operator restoring a snapshot
//!   or swapping a LUN does while the group is not looking.
//!
//! Requests are validated and split exactly as the real backends do (the
//! conformance suite runs here too), and each device-level piece is asserted to
//! respect the maximum transfer.
//!
//! Time is the engine's own (it moves to each completion's due time as the
//! caller waits), or a [`SimClock`] shared with the loop that drives the disk
//! ([`SimEngine::with_clock`]), so that loop's sleeps and the disk's latencies
//! are one simulated time; [`Stall`] hangs the disk in that time.
//!
//! Several engines can share one set of simulated disks ([`SharedSim`]), as
//! the threads of a live group share real ones; [`turnstile`] runs such
//! threads one at a time in a seeded order (the interleaving simulator).

mod clock;
mod disk;
mod engine;
mod shared;
pub mod turnstile;
pub use clock::SimClock;
pub use disk::{DiskFaults, DiskImage, SimDisk};
pub use engine::{
    geometry, Budget, CrashAfter, CrashPolicy, CrashReport, FaultEvent, SimEngine, Stall,
};
pub use shared::{SharedSim, SimHandle};
pub use turnstile::{Actor, Turnstile};
