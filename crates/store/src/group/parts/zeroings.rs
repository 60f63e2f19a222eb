//! The metadata plane's own zeroings of file data (a grow's, `zeroing.rs`):
//! how many there have been, and each file's last. Those writes go to the
//! copies under `meta`, without the extents' latches (docs/live-core.md,
//! the table of what is shared), so a copy of a file's extents begun
//! before one (a resync, a relocation, a scrub's repair) may have missed
//! its zeros, and is not trusted for that file.
//!
//! Owned by the [`Group`](super::super::Group) (changed only under the
//! group's `&mut`, i.e. under a live group's `meta`); in memory only (a
//! copy does not outlive the mount it began in).

use std::collections::HashMap;

use super::violations::Violations;

#[derive(Debug, Default)]
pub(in crate::group) struct Zeroings {
    /// Zeroings since mount.
    count: u64,
    /// Per file, the count its last zeroing took.
    last: HashMap<u32, u64>,
}

impl Zeroings {
    /// File `file` is about to be zeroed.
    pub(in crate::group) fn zeroing(&mut self, file: u32) {
        self.count += 1;
        self.last.insert(file, self.count);
    }

    /// Where the count stands now: what a copy notes as it begins.
    pub(in crate::group) fn mark(&self) -> u64 {
        self.count
    }

    /// Whether file `file` was zeroed after `mark` was taken.
    pub(in crate::group) fn since(&self, file: u32, mark: u64) -> bool {
        self.last.get(&file).is_some_and(|z| *z > mark)
    }

    /// What holds between any two operations: each file's last zeroing is
    /// one the count has passed (a later one would make a copy begun after
    /// it look older).
    pub(in crate::group) fn check_invariants(&self, out: &mut Violations) {
        for (file, z) in &self.last {
            out.check((1..=self.count).contains(z), || {
                format!(
                    "file {file}'s last zeroing is numbered {z}, and {} were made",
                    self.count
                )
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_begun_before_a_files_zeroing_is_not_trusted_for_it() {
        let mut z = Zeroings::default();
        let before = z.mark();
        z.zeroing(300);
        assert!(z.since(300, before));
        assert!(!z.since(301, before), "another file's copy is unaffected");
        let after = z.mark();
        assert!(!z.since(300, after));
        z.zeroing(300);
        assert!(z.since(300, after));
        let mut v = Violations::default();
        z.check_invariants(&mut v);
        assert!(v.is_empty(), "{v}");
        z.count = 1;
        z.check_invariants(&mut v);
        assert!(v.lines()[0].contains("numbered 2, and 1 were made"));
    }
}
