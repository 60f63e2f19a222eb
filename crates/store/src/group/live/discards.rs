//! A live group's discard drain: one thread of the group's own takes
//! batches of freed runs from the queue and discards them through a data
//! handle of its own, never under `meta` (`discard.rs` says why).

use super::handle::DataHandle;
use super::shared::{Inner, LiveGroup};
use crate::group::discard_queue;

impl Inner {
    /// Discard the runs waiting, batch by batch, through a data handle of
    /// the drain's own; after each batch, under `meta`, its runs go back to
    /// the free pool and those discarded are marked (`discard.rs`). Only
    /// disks written now are sent to: a run on a disk gone offline stays
    /// returnable.
    pub(super) fn drain_discards(&self) {
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
                    let (engine, devices) = h.engine_and_devices();
                    discard_queue::discard_runs(
                        engine,
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
}
