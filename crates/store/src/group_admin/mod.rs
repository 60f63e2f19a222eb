//! Disk groups on real devices: what `cairn group ...` and the file commands
//! run. Finds a group's disks through the discovery string (by the UUIDs in
//! their labels, never by path), takes the group's lock, opens the disks
//! exclusively, and hands them to [`crate::group`]. Creating a group first puts
//! every device through the label protections of [`crate::admin`].
//!
//! One module per concept: `find` reads what the devices say (read-only),
//! `create` and `claims` make a group (and judge other groups' claims on
//! its disks), `mount` and `live` mount one (with `heartbeat`'s claim and
//! `source`'s engines over the members' handles), `new_disks` opens the
//! disks a change adds, and `space` says what the devices hold.

mod claims;
mod create;
mod error;
mod find;
mod heartbeat;
mod live;
mod mount;
mod new_disks;
mod source;
mod space;

pub use create::{create, CreatedDisk, DiskArg};
pub use error::GroupAdminError;
pub use find::{find_groups, FoundGroup, FoundMember};
pub use heartbeat::TEST_HEARTBEAT_MS_ENV;
pub use live::{mount_live, mount_live_for, LiveAccess, LiveMounted};
pub use mount::{mount, mount_read_only, mount_with, open_member, Mounted};
pub use new_disks::{erase_new_labels, open_new_disks, AddedDisk};
pub use space::{physically_held, space, DiskSpaceReport};
