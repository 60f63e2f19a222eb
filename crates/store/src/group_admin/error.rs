//! The one error of group administration: what failed beneath it (a label's
//! protections, the group, its lock, discovery), or a request refused with
//! the reason a person can act on.

use crate::admin::AdminError;
use crate::discovery::DiscoveryError;
use crate::group::GroupError;
use crate::group_lock::LockError;

#[derive(Debug, thiserror::Error)]
pub enum GroupAdminError {
    #[error(transparent)]
    Admin(#[from] AdminError),
    #[error(transparent)]
    Group(#[from] GroupError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    #[error("{0}")]
    Invalid(String),
}
