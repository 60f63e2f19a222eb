//! Which real backend runs: [`EngineKind`], and [`new_file_engine`], which
//! makes one. Above both backends, so that the seam they implement
//! ([`crate::engine`]) never names them.

use serde::Serialize;

use crate::engine::FileEngine;
use crate::sync_engine::SyncEngine;
use crate::uring_engine::UringEngine;

/// Which real backend to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    /// io_uring if the kernel allows it, else pread/pwrite.
    Auto,
    Uring,
    Sync,
}

/// Make a real engine. With [`EngineKind::Auto`], a kernel or sandbox that
/// refuses io_uring (ENOSYS, EPERM from seccomp or `io_uring_disabled`) falls
/// back to pread/pwrite; the returned engine's `name()` says which ran.
pub fn new_file_engine(kind: EngineKind, depth_max: usize) -> std::io::Result<Box<dyn FileEngine>> {
    match kind {
        EngineKind::Uring => Ok(Box::new(UringEngine::new(depth_max)?)),
        EngineKind::Sync => Ok(Box::new(SyncEngine::new(depth_max))),
        EngineKind::Auto => match UringEngine::new(depth_max) {
            Ok(engine) => Ok(Box::new(engine)),
            Err(_) => Ok(Box::new(SyncEngine::new(depth_max))),
        },
    }
}
