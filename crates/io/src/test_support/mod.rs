//! Shared test material: the engine conformance suite, real loop devices, a
//! disk that really hangs (a FUSE file system that can be told to block), and
//! what a test does when a prerequisite is missing.
//! Compiled only with the `test-support` feature, for tests.

pub mod conformance;
pub mod hang_fs;
pub mod loop_device;
pub mod prerequisite;
pub mod sysfs_fixture;

pub use loop_device::LoopDevice;
