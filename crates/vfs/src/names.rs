//! A served group's name space as the control socket changes it: a name
//! removed by `cairn rm` while the kernel knows its file keeps the file's
//! data for its readers, as an unlink through the file system does.

use std::sync::Arc;

use cairn_store::group::{Group, GroupError, LiveGroup, Retired};
use cairn_store::names::GroupPath;

use crate::ino::Ino;
use crate::known::{Gone, Lookups};
use crate::mtimes::Mtimes;

/// The name space of the group in one slot, sharing the file system's
/// lookup counts and pending times ([`crate::Vfs::names`]).
#[derive(Clone)]
pub struct Names {
    slot: usize,
    group: Arc<LiveGroup>,
    lookups: Arc<Lookups>,
    mtimes: Arc<Mtimes>,
}

impl Names {
    pub(crate) fn new(
        slot: usize,
        group: Arc<LiveGroup>,
        lookups: Arc<Lookups>,
        mtimes: Arc<Mtimes>,
    ) -> Self {
        Self {
            slot,
            group,
            lookups,
            mtimes,
        }
    }

    /// Remove a name, as `cairn rm` does (a file's own name takes the file
    /// and its aliases; a directory must be empty), keeping a file the
    /// kernel still knows until its last `forget`. `check` runs first, in
    /// the same metadata step (the asker's permission to remove it).
    ///
    /// Returns the name the kernel may have cached, to be told it went:
    /// its directory's inode and the name.
    pub fn remove(
        &self,
        path: &GroupPath,
        check: &dyn Fn(&Group<'static>) -> Result<(), GroupError>,
    ) -> Result<Option<(u64, String)>, GroupError> {
        let slot = self.slot;
        let (parent, retired) = self.group.meta(|g| {
            check(g)?;
            let parent = path.parent().map(|p| g.directory_of(&p)).transpose()?;
            g.remove_path(
                path,
                &|n, i| {
                    self.lookups
                        .gone_if_known(Ino::File { slot, number: n }, Gone::File { incarnation: i })
                },
                &|id| self.lookups.gone_if_known(Ino::Dir { slot, id }, Gone::Dir),
            )
            .map(|r| (parent, r))
        })??;
        if let Retired::Deleted(number) = retired {
            self.mtimes.take((slot, number));
        }
        Ok(parent
            .zip(path.file_name())
            .map(|(id, name)| (Ino::Dir { slot, id }.encode(), name.as_str().to_string())))
    }
}
