//! The derived figures every OLTP rendering shares (AWR text, HTML, awr_info,
//! compare), computed in one place from the [`OltpResult`] alone so that no two
//! renderings can disagree on what "write IO requests" or "physical IOPS" mean.

use crate::result::{EventRecord, OltpResult};
use crate::stats::{Event, Stat};

/// Bytes in the MB of `Read IO (MB)` and `MB/s`: 2^20, as AWR and `iostat -m` count.
pub(crate) const MB: f64 = 1_048_576.0;

/// One result and the denominators of its rates.
pub(crate) struct Figures<'a> {
    pub r: &'a OltpResult,
    /// The measured window, s.
    pub elapsed_s: f64,
    /// User commits: the denominator of every "per transaction" figure.
    pub commits: u64,
}

impl<'a> Figures<'a> {
    pub(crate) fn new(r: &'a OltpResult) -> Self {
        Self {
            r,
            elapsed_s: r.elapsed_s,
            commits: r.stat(Stat::UserCommits.name()),
        }
    }

    pub(crate) fn stat(&self, stat: Stat) -> u64 {
        self.r.stat(stat.name())
    }

    /// `v` per second of the measured window; `None` for an empty window.
    pub(crate) fn per_s(&self, v: f64) -> Option<f64> {
        (self.elapsed_s > 0.0).then(|| v / self.elapsed_s)
    }

    /// `v` per user commit; `None` when nothing committed (AWR leaves it blank).
    pub(crate) fn per_tx(&self, v: f64) -> Option<f64> {
        (self.commits > 0).then(|| v / self.commits as f64)
    }

    /// `v` divided by `d`, `None` when `d` is 0.
    pub(crate) fn ratio(v: f64, d: f64) -> Option<f64> {
        (d > 0.0).then(|| v / d)
    }

    /// Read requests to the data files (a multiblock read is one).
    pub(crate) fn db_read_requests(&self) -> u64 {
        self.stat(Stat::PhysicalReadIoRequests)
    }

    pub(crate) fn db_read_bytes(&self) -> u64 {
        self.stat(Stat::PhysicalReadBytes)
    }

    /// Write requests to the data files (the database writer's).
    pub(crate) fn db_write_requests(&self) -> u64 {
        self.stat(Stat::PhysicalWriteIoRequests)
    }

    pub(crate) fn db_write_bytes(&self) -> u64 {
        self.stat(Stat::PhysicalWriteBytes)
    }

    /// Write requests to the redo file (a log write split at the device's
    /// maximum transfer counts each piece).
    pub(crate) fn redo_write_requests(&self) -> u64 {
        self.stat(Stat::RedoWriteIoRequests)
    }

    /// Bytes written to the redo file: whole redo blocks, padding included,
    /// which is what reached the device.
    pub(crate) fn redo_write_bytes(&self) -> u64 {
        self.stat(Stat::RedoBlocksWritten) * u64::from(self.r.settings.redo_block_bytes)
    }

    /// Every write request: data files and redo, as AWR's "physical write
    /// total IO requests" counts them.
    pub(crate) fn write_requests(&self) -> u64 {
        self.db_write_requests() + self.redo_write_requests()
    }

    pub(crate) fn write_bytes(&self) -> u64 {
        self.db_write_bytes() + self.redo_write_bytes()
    }

    /// Every physical I/O request: data-file reads and writes, redo writes.
    pub(crate) fn physical_requests(&self) -> u64 {
        self.db_read_requests() + self.write_requests()
    }

    /// Physical I/O requests per second of session CPU (AWR's DB CPU): the
    /// cost of an I/O through the emulated database, Closson's figure.
    pub(crate) fn iops_per_db_cpu_s(&self) -> Option<f64> {
        Self::ratio(self.physical_requests() as f64, self.r.totals.db_cpu_s)
    }

    /// CPU cores the whole process kept busy on average (user + system over the window).
    pub(crate) fn cores_busy(&self) -> Option<f64> {
        self.per_s(self.r.cpu.user_s + self.r.cpu.sys_s)
    }

    /// Physical I/O requests per second per busy core: requests per
    /// process CPU-second, every thread's CPU counted.
    pub(crate) fn iops_per_core(&self) -> Option<f64> {
        Self::ratio(
            self.physical_requests() as f64,
            self.r.cpu.user_s + self.r.cpu.sys_s,
        )
    }

    /// Events waited on at least once, in the result's order (`Event::ALL`).
    pub(crate) fn events(&self) -> impl Iterator<Item = &'a EventRecord> {
        self.r.totals.events.iter().filter(|e| e.waits > 0)
    }

    pub(crate) fn foreground(&self) -> impl Iterator<Item = &'a EventRecord> {
        self.events().filter(|e| !e.background)
    }

    pub(crate) fn background(&self) -> impl Iterator<Item = &'a EventRecord> {
        self.events().filter(|e| e.background)
    }

    /// The background processes' time: their CPU plus their waits. AWR's
    /// "% bg time" is against background elapsed time; the log writer and
    /// database writer are either on CPU or waiting, so this is that time.
    pub(crate) fn background_time_s(&self) -> f64 {
        self.r.totals.background_cpu_s + self.background().map(|e| e.time_s).sum::<f64>()
    }

    /// Average wait of `event` in µs, `None` if it was never waited on.
    pub(crate) fn avg_us(&self, event: Event) -> Option<f64> {
        self.r
            .event(event)
            .filter(|e| e.waits > 0)
            .map(|e| 1e6 * e.time_s / e.waits as f64)
    }

    /// Waits and time of one wait class (e.g. `User I/O`), over every event in it.
    pub(crate) fn class_waits(&self, class: &str) -> (u64, f64) {
        self.events()
            .filter(|e| e.class == class)
            .fold((0, 0.0), |(w, t), e| (w + e.waits, t + e.time_s))
    }

    /// Average wait of a wait class in µs: its time over its waits.
    pub(crate) fn class_avg_us(&self, class: &str) -> Option<f64> {
        let (waits, time_s) = self.class_waits(class);
        Self::ratio(1e6 * time_s, waits as f64)
    }
}
