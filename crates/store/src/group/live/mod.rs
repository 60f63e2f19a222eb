//! A live group: the metadata plane behind one lock, shared by any number of
//! threads, each moving file bytes through its own [`DataHandle`] (its own
//! engine on the group's disks). The rules, and the lock order, are in
//! `docs/live-core.md`; the data path is `data.rs`, the shared state
//! `plane.rs`.
//!
//! Who holds what:
//! - `Inner::meta` (the [`Group`](super::Group), the metadata plane's state and its engine):
//!   a mutex, held for a metadata step; a data handle takes it only to have an
//!   extent marked initialised or a failed disk taken offline, with any
//!   extent latches it needs already held (latch → meta, never the reverse).
//! - `Inner::gate` (`Gate` in `shared.rs`, group commit): a leaf mutex with a condition
//!   variable, held only to count operations and hand over the commit; never
//!   held while taking `meta` or a latch. Every operation runs its steps
//!   under `meta`, then waits at the gate for a commit that covers them.
//! - the [`DataPlane`](super::plane::DataPlane): published by the metadata plane under `meta`, read by
//!   handles without it.
//! - each handle's engine, unflushed-disk set and guard slot: its own thread.
//! - `Inner::discards` ([`DiscardQueue`](super::discard_queue::DiscardQueue)): freed runs waiting for their
//!   discard, pushed under `meta`, drained without it by the group's drain
//!   thread (`discard.rs`, `discard_queue.rs`); a leaf lock.

mod discards;
mod disks;
mod handle;
mod operations;
mod shared;

pub use handle::DataHandle;
pub use shared::{LiveGroup, Reattached};
