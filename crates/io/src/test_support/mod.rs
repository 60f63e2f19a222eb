//! Shared test material: the engine conformance suite and real loop devices.
//! Compiled only with the `test-support` feature, for tests.

pub mod conformance;
pub mod loop_device;
pub mod sysfs_fixture;

pub use loop_device::LoopDevice;
