//! A group's data handles not in use: a request takes one (or makes one)
//! and gives it back. A handle is one thread's engine, never shared.
//!
//! Locking: the pool is a leaf mutex, held only to take or give a handle;
//! a handle is made (which takes `meta`) and dropped outside it.

use std::sync::{Arc, Mutex};

use cairn_io::poison::Recover;
use cairn_store::group::{DataHandle, GroupError, LiveGroup};

/// Requests a data handle's engine holds.
const HANDLE_DEPTH: usize = 32;

pub(crate) struct Pool {
    group: Arc<LiveGroup>,
    /// Shared with the group's devices-left hook, which empties it.
    handles: Arc<Mutex<Vec<DataHandle>>>,
}

impl Pool {
    /// The pool of `group`'s handles. When a dropped disk's device is let
    /// go of, the idle handles (which hold it in their engines) go too.
    pub(crate) fn new(group: Arc<LiveGroup>) -> Self {
        let handles: Arc<Mutex<Vec<DataHandle>>> = Arc::default();
        let pool = Arc::downgrade(&handles);
        group.on_devices_left(Box::new(move || {
            if let Some(pool) = pool.upgrade() {
                let idle = std::mem::take(&mut *pool.lock_or_recover());
                drop(idle);
            }
        }));
        Self { group, handles }
    }

    /// Run `f` with a data handle from the pool (made if the pool is empty;
    /// not under the pool's lock, as making one takes `meta`).
    pub(crate) fn with<R>(
        &self,
        f: impl FnOnce(&mut DataHandle) -> Result<R, GroupError>,
    ) -> Result<R, GroupError> {
        let spare = self.handles.lock_or_recover().pop();
        let mut handle = match spare {
            Some(h) => h,
            None => self.group.handle(HANDLE_DEPTH)?,
        };
        let result = f(&mut handle);
        // Idle handles made before the disks changed (one joined, or left:
        // its device is still open in their engines) are let go of here —
        // this one too, if it is — dropped outside the pool's lock. (A
        // completed drop empties the pool at once: the hook above.)
        // The view's epoch read once, outside the pool's lock.
        let epoch = self.group.plane().disks().epoch;
        let stale: Vec<DataHandle> = {
            let mut pool = self.handles.lock_or_recover();
            let mut stale: Vec<DataHandle> = pool
                .extract_if(.., |h| h.devices_epoch() != epoch)
                .collect();
            if handle.devices_epoch() != epoch {
                stale.push(handle);
            } else {
                pool.push(handle);
            }
            stale
        };
        drop(stale);
        result
    }
}
