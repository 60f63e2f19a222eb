//! Shared test material: the engine conformance suite, real loop devices, and
//! what a test does when a prerequisite is missing.
//! Compiled only with the `test-support` feature, for tests.

pub mod conformance;
pub mod loop_device;
pub mod prerequisite;
pub mod sysfs_fixture;

pub use loop_device::LoopDevice;
