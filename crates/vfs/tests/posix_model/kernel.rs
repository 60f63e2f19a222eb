//! The kernel's inode locks, as the actors take them around each operation
//! (`i_rwsem`, and `s_vfs_rename_mutex` for a move between directories).

use std::collections::BTreeMap;
use std::sync::Mutex;

use cairn_io::poison::Recover;
use cairn_io::sched;

/// Per inode: (shared holders, held exclusively). Who changes it: each
/// actor, around each operation; never held across a scheduling point.
#[derive(Default)]
pub struct KernelLocks(Mutex<BTreeMap<u64, (u32, bool)>>);

/// (inode, exclusively).
pub type LockSet = Vec<(u64, bool)>;

impl KernelLocks {
    pub fn free(held: &BTreeMap<u64, (u32, bool)>, want: &LockSet) -> bool {
        want.iter().all(|(ino, excl)| match held.get(ino) {
            None => true,
            Some((readers, writer)) => !*writer && (!*excl || *readers == 0),
        })
    }

    /// Take every lock of `want` at once (none while waiting: no order
    /// between actors can deadlock).
    pub fn acquire(&self, want: &LockSet) -> LocksHeld<'_> {
        let mut waited = false;
        loop {
            {
                let mut held = self.0.lock_or_recover();
                if Self::free(&held, want) {
                    for (ino, excl) in want {
                        let e = held.entry(*ino).or_default();
                        if *excl {
                            e.1 = true;
                        } else {
                            e.0 += 1;
                        }
                    }
                    break;
                }
            }
            waited = true;
            let may_go_on = || {
                self.0
                    .try_lock()
                    .map_or(true, |held| Self::free(&held, want))
            };
            assert!(
                sched::blocked_until(&may_go_on),
                "actors run under the turnstile"
            );
        }
        if waited {
            sched::resumed();
        }
        LocksHeld {
            locks: self,
            set: want.clone(),
        }
    }
}

pub struct LocksHeld<'a> {
    locks: &'a KernelLocks,
    set: LockSet,
}

impl Drop for LocksHeld<'_> {
    fn drop(&mut self) {
        let mut held = self.locks.0.lock_or_recover();
        for (ino, excl) in &self.set {
            let e = held.get_mut(ino).expect("invariant: held");
            if *excl {
                e.1 = false;
            } else {
                e.0 -= 1;
            }
            if *e == (0, false) {
                held.remove(ino);
            }
        }
    }
}

/// A lock set without repeats, each inode at its strongest.
pub fn lock_set(mut want: LockSet) -> LockSet {
    want.sort();
    let mut out: LockSet = Vec::new();
    for (ino, excl) in want {
        match out.last_mut() {
            Some(last) if last.0 == ino => last.1 |= excl,
            _ => out.push((ino, excl)),
        }
    }
    out
}
