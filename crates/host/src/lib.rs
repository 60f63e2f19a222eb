//! What the machine is, and what it did while a bench ran: the host probing
//! the test kit's families (the workload engine, the OLTP emulation) share.
//!
//! - [`environment`]: the tool, the host and the wall clock, for `result.json`.
//! - [`cpu`]: this process's CPU (getrusage) next to the whole machine's busy
//!   time (`/proc/stat`). Both are needed: work done for us by loop kworkers and
//!   interrupt handlers is charged to no process, so the process figure alone
//!   flatters any tool that pushes work into the kernel.
//! - [`diskstats`]: `/proc/diskstats` snapshots and their deltas in `iostat -x` terms.
//! - [`devices`]: which block devices' counters matter for a target.
//!
//! Everything read from `/proc` and `/sys` goes through a [`cairn_io::host::Host`],
//! so tests can point it at fixture trees. Nothing here fails: a figure the
//! kernel does not give is empty or zero, because a bench should not stop for
//! want of a statistic.
//!
//! The records it fills ([`Environment`], [`ToolInfo`], [`CpuInterval`],
//! [`CpuSummary`], [`DeviceStats`]) are part of the kit's `result.json` and
//! the OLTP emulation's; their fields are that schema's.

pub mod cpu;
pub mod devices;
pub mod diskstats;
pub mod environment;

pub use cpu::{
    cpu_interval, cpu_sample, cpu_summary, CpuInterval, CpuSample, CpuSummary, ProcStatCpu,
};
pub use devices::{devices_for, devices_for_block};
pub use diskstats::{device_stats, diskstats, DeviceStats, DiskCounters, DiskStatsSnapshot};
pub use environment::{
    environment, rfc3339_from_unix_s, tool_info, utc_now_rfc3339, Environment, ToolInfo,
};
