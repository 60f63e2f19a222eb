//! Who asks for a command, and what POSIX lets them do to a name.
//!
//! Through the mount the kernel checks every access (`default_permissions`)
//! against the caller's credentials and each file's and directory's mode
//! and owner. A command through the service's socket must get the same
//! answer, so the executor checks namespace commands against the asker's
//! credentials (the socket's `SO_PEERCRED` and `SO_PEERGROUPS`) by the same
//! rules, here, once ([`Caller::may`] and `access.rs`). A command the CLI
//! carries out in its own process is checked the same way with its own
//! credentials (it holds the disks, so it is an administrator).

/// The asker's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
    /// May give administrative commands (root, the service's own user, or a
    /// member of its admin group; a process that opens the disks itself).
    pub admin: bool,
}

/// Read permission (the `r` bit of each triple).
pub const READ: u32 = 4;
/// Write permission.
pub const WRITE: u32 = 2;
/// Search (directories) or execute.
pub const SEARCH: u32 = 1;

impl Caller {
    /// This process, which opens the disks itself: an administrator.
    pub fn this_process() -> Self {
        // SAFETY: geteuid, getegid and getgroups have no preconditions;
        // getgroups writes at most `n` ids into the buffer it is given.
        let (uid, gid, groups) = unsafe {
            let uid = libc::geteuid();
            let gid = libc::getegid();
            let n = libc::getgroups(0, std::ptr::null_mut());
            let mut groups = vec![0 as libc::gid_t; usize::try_from(n).unwrap_or(0)];
            let got = libc::getgroups(n, groups.as_mut_ptr());
            groups.truncate(usize::try_from(got).unwrap_or(0));
            (uid, gid, groups)
        };
        Self {
            uid,
            gid,
            groups,
            admin: true,
        }
    }

    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }

    /// Whether POSIX grants `want` (a mask of [`READ`], [`WRITE`],
    /// [`SEARCH`]) on an object of `mode` owned by `uid`:`gid`: the
    /// owner's bits for its owner, the group's for its group, the others'
    /// for anyone else — the first class that matches decides, as the
    /// kernel's `generic_permission` does. Root may read and write
    /// anything, and search any directory (execute a file only if someone
    /// may).
    pub fn may(&self, mode: u32, (uid, gid): (u32, u32), want: u32, directory: bool) -> bool {
        if self.is_root() {
            let exec_ok = directory || mode & 0o111 != 0;
            return want & SEARCH == 0 || exec_ok;
        }
        let bits = if self.uid == uid {
            mode >> 6
        } else if self.in_group(gid) {
            mode >> 3
        } else {
            mode
        } & 0o7;
        bits & want == want
    }
}

/// `rwx` for a mask, for messages.
pub fn perm_name(want: u32) -> String {
    let mut s = String::new();
    for (bit, c) in [(READ, 'r'), (WRITE, 'w'), (SEARCH, 'x')] {
        if want & bit != 0 {
            s.push(c);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(uid: u32, gid: u32, groups: &[u32]) -> Caller {
        Caller {
            uid,
            gid,
            groups: groups.to_vec(),
            admin: false,
        }
    }

    #[test]
    fn the_first_class_that_matches_decides() {
        // Owner without write, though others have it: refused (POSIX).
        assert!(!user(5, 5, &[]).may(0o577, (5, 9), WRITE, false));
        assert!(user(6, 6, &[]).may(0o577, (5, 9), WRITE, false));
        // A supplementary group counts.
        assert!(user(6, 6, &[9]).may(0o070, (5, 9), READ | WRITE, false));
        assert!(!user(6, 6, &[]).may(0o070, (5, 9), READ, false));
        // Root reads and writes anything, searches any directory, and
        // executes a file only if someone may.
        let root = user(0, 0, &[]);
        assert!(root.may(0o000, (5, 9), READ | WRITE, false));
        assert!(root.may(0o000, (5, 9), SEARCH, true));
        assert!(!root.may(0o644, (5, 9), SEARCH, false));
        assert_eq!(perm_name(WRITE | SEARCH), "wx");
    }
}
