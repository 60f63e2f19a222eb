//! What a test does when something it needs is missing.
//!
//! A test that cannot run here (no root, no loop devices, no io_uring, a tool
//! not installed…) says `skipped: <reason>` out loud rather than passing
//! quietly. Where every prerequisite is meant to be present — `scripts/test`
//! as root, which installs the tools and sets `CAIRN_REQUIRE_TOOLS` (as CI
//! does) — a missing one fails the test instead. Only two kernel features
//! may still be missing there, by name: device-mapper and md, which the CI
//! machines' kernels lack ([`kernel_feature_missing`]).

use std::path::Path;

/// Set by `scripts/test` as root: every prerequisite must be present.
pub const REQUIRE_VAR: &str = "CAIRN_REQUIRE_TOOLS";

/// Whether every prerequisite must be present (`CAIRN_REQUIRE_TOOLS` set).
pub fn required() -> bool {
    std::env::var_os(REQUIRE_VAR).is_some()
}

/// A prerequisite is missing: print `skipped: <reason>` (the caller then
/// returns, or skips that part), or, under `CAIRN_REQUIRE_TOOLS`, fail the
/// test with the reason.
#[track_caller]
pub fn missing(reason: &str) {
    assert!(
        !required(),
        "required here ({REQUIRE_VAR} is set), but missing: {reason}"
    );
    println!("skipped: {reason}");
}

/// `Ok` passes through; `Err(reason)` is [`missing`] and becomes `None`.
#[track_caller]
pub fn or_skip<T>(r: Result<T, String>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(reason) => {
            missing(&reason);
            None
        }
    }
}

/// The kernel features a test may find missing even under
/// `CAIRN_REQUIRE_TOOLS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelFeature {
    DeviceMapper,
    Md,
}

impl KernelFeature {
    pub fn name(self) -> &'static str {
        match self {
            KernelFeature::DeviceMapper => "device-mapper",
            KernelFeature::Md => "md",
        }
    }

    /// Whether the running kernel has it (asked after a tool failed: the
    /// tool has tried to load the module by then).
    pub fn present(self) -> bool {
        match self {
            KernelFeature::DeviceMapper => std::fs::read_to_string("/proc/misc")
                .is_ok_and(|m| m.lines().any(|l| l.trim_end().ends_with(" device-mapper"))),
            KernelFeature::Md => Path::new("/proc/mdstat").exists(),
        }
    }
}

/// A tool using `feature` failed with `reason`. If the kernel lacks the
/// feature, print `skipped: <feature>: …` (allowed everywhere); if it has it,
/// the failure is something else, and is [`missing`].
#[track_caller]
pub fn kernel_feature_missing(feature: KernelFeature, reason: &str) {
    if feature.present() {
        missing(&format!(
            "{} is in this kernel, yet: {reason}",
            feature.name()
        ));
    } else {
        println!(
            "skipped: {}: this kernel has no {} driver ({reason})",
            feature.name(),
            feature.name()
        );
    }
}
