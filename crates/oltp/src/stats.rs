//! What the emulated database counts: wait events and instance statistics.
//!
//! The names are Oracle's, so that a DBA reads the report without a legend.
//! Each thread (session, log writer, database writer) owns a [`StatsSlot`]
//! and publishes into it once per operation: counters and waits gathered in a
//! thread-local [`OpStats`] are added under one uncontended lock, so the hot
//! path never takes a shared lock per block. The run's monitor drains every
//! slot each interval ([`StatsHub::drain`]).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use cairn_kit::histogram::LatencyHistogram;

/// A wait event, named as Oracle names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// A session's synchronous single-block read into the buffer cache.
    DbFileSequentialRead,
    /// Several single-block misses of one statement, submitted together.
    DbFileParallelRead,
    /// A multiblock read into the buffer cache (a scan of a small table).
    DbFileScatteredRead,
    /// A read into the session's own memory, around the cache.
    DirectPathRead,
    /// Waiting for another session that is reading the same block.
    ReadByOtherSession,
    /// A commit waiting for the log writer.
    LogFileSync,
    /// No clean buffer to reuse: waiting for the database writer.
    FreeBufferWaits,
    /// A change waiting for the writer to finish writing the buffer.
    WriteCompleteWaits,
    /// No room in the log buffer: waiting for the log writer.
    LogBufferSpace,
    /// A buffer pinned in an incompatible mode by another session.
    BufferBusyWaits,
    /// A contended hash-bucket latch.
    LatchCacheBuffersChains,
    /// A contended LRU latch.
    LatchCacheBuffersLruChain,
    /// The database writer's batch of asynchronous writes.
    DbFileParallelWrite,
    /// The log writer's write of the log buffer.
    LogFileParallelWrite,
}

impl Event {
    pub const ALL: [Event; 14] = [
        Event::DbFileSequentialRead,
        Event::DbFileParallelRead,
        Event::DbFileScatteredRead,
        Event::DirectPathRead,
        Event::ReadByOtherSession,
        Event::LogFileSync,
        Event::FreeBufferWaits,
        Event::WriteCompleteWaits,
        Event::LogBufferSpace,
        Event::BufferBusyWaits,
        Event::LatchCacheBuffersChains,
        Event::LatchCacheBuffersLruChain,
        Event::DbFileParallelWrite,
        Event::LogFileParallelWrite,
    ];
    pub const COUNT: usize = Self::ALL.len();

    pub fn index(self) -> usize {
        self as usize
    }

    /// The name as AWR prints it.
    pub fn name(self) -> &'static str {
        match self {
            Event::DbFileSequentialRead => "db file sequential read",
            Event::DbFileParallelRead => "db file parallel read",
            Event::DbFileScatteredRead => "db file scattered read",
            Event::DirectPathRead => "direct path read",
            Event::ReadByOtherSession => "read by other session",
            Event::LogFileSync => "log file sync",
            Event::FreeBufferWaits => "free buffer waits",
            Event::WriteCompleteWaits => "write complete waits",
            Event::LogBufferSpace => "log buffer space",
            Event::BufferBusyWaits => "buffer busy waits",
            Event::LatchCacheBuffersChains => "latch: cache buffers chains",
            Event::LatchCacheBuffersLruChain => "latch: cache buffers lru chain",
            Event::DbFileParallelWrite => "db file parallel write",
            Event::LogFileParallelWrite => "log file parallel write",
        }
    }

    /// AWR's wait class.
    pub fn class(self) -> &'static str {
        match self {
            Event::DbFileSequentialRead
            | Event::DbFileParallelRead
            | Event::DbFileScatteredRead
            | Event::DirectPathRead
            | Event::ReadByOtherSession => "User I/O",
            Event::LogFileSync => "Commit",
            Event::FreeBufferWaits | Event::WriteCompleteWaits | Event::LogBufferSpace => {
                "Configuration"
            }
            Event::BufferBusyWaits | Event::LatchCacheBuffersChains => "Concurrency",
            Event::LatchCacheBuffersLruChain => "Other",
            Event::DbFileParallelWrite | Event::LogFileParallelWrite => "System I/O",
        }
    }

    /// Waited for by the background processes (log writer, database writer).
    pub fn background(self) -> bool {
        matches!(
            self,
            Event::DbFileParallelWrite | Event::LogFileParallelWrite
        )
    }

    pub fn from_name(name: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|e| e.name() == name)
    }
}

/// An instance statistic (AWR's "Instance Activity Stats"), named as Oracle names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stat {
    /// Every buffer get (consistent gets + db block gets).
    SessionLogicalReads,
    /// Buffer gets for reading.
    ConsistentGets,
    /// Buffer gets for changing.
    DbBlockGets,
    /// Buffer gets that found the block cached.
    CacheHits,
    /// Buffer gets that did not (each leads to one block read into the cache).
    CacheMisses,
    /// Blocks read, into the cache or around it.
    PhysicalReads,
    /// Blocks read into the cache.
    PhysicalReadsCache,
    /// Blocks read around the cache (direct path).
    PhysicalReadsDirect,
    /// Read requests to data files (a multiblock read is one request).
    PhysicalReadIoRequests,
    /// Bytes read from data files.
    PhysicalReadBytes,
    /// Read requests of more than one block.
    PhysicalReadMultiBlockRequests,
    /// Blocks written to data files (by the database writer).
    PhysicalWrites,
    /// Write requests to data files.
    PhysicalWriteIoRequests,
    /// Bytes written to data files.
    PhysicalWriteBytes,
    /// Changes to blocks.
    DbBlockChanges,
    /// Redo generated: the sum of the redo records' sizes, in bytes.
    RedoSize,
    /// Redo records generated.
    RedoEntries,
    /// Log writer writes.
    RedoWrites,
    /// Redo blocks written (record bytes plus padding, in redo blocks).
    RedoBlocksWritten,
    /// Bytes of redo written to the log (record bytes only, no padding).
    RedoBytesWritten,
    /// Padding written to fill the last redo block of a write.
    RedoWastage,
    /// Write requests to the redo file (a log write split at the device's maximum transfer counts each piece).
    RedoWriteIoRequests,
    /// Statements executed (selects, updates, scans).
    ExecuteCount,
    /// Commits.
    UserCommits,
    /// Buffers a session had to find for a block not in the cache.
    FreeBufferRequested,
    /// Buffers looked at while searching for a free one.
    FreeBufferInspected,
    /// Dirty buffers passed over while searching for a free one.
    DirtyBuffersInspected,
    /// Buffers written by the writer because of a checkpoint.
    DbwrCheckpointBuffersWritten,
    /// Checkpoints completed.
    DbwrCheckpoints,
    /// Blocks read by full scans.
    TableScanBlocksGotten,
    /// Scans of tables below the direct-read threshold (through the cache).
    TableScansShort,
    /// Scans of tables above it (direct path).
    TableScansLong,
    /// Rows examined in blocks read by sessions (each one's checksum verified and column summed).
    RowsTouched,
    /// Blocks whose checksum or identity was wrong when a session read them: must stay 0.
    BlockCorruptions,
    /// Commits whose wait ended before a log write covered them: must stay 0.
    CommitsUncovered,
}

impl Stat {
    pub const ALL: [Stat; 35] = [
        Stat::SessionLogicalReads,
        Stat::ConsistentGets,
        Stat::DbBlockGets,
        Stat::CacheHits,
        Stat::CacheMisses,
        Stat::PhysicalReads,
        Stat::PhysicalReadsCache,
        Stat::PhysicalReadsDirect,
        Stat::PhysicalReadIoRequests,
        Stat::PhysicalReadBytes,
        Stat::PhysicalReadMultiBlockRequests,
        Stat::PhysicalWrites,
        Stat::PhysicalWriteIoRequests,
        Stat::PhysicalWriteBytes,
        Stat::DbBlockChanges,
        Stat::RedoSize,
        Stat::RedoEntries,
        Stat::RedoWrites,
        Stat::RedoBlocksWritten,
        Stat::RedoBytesWritten,
        Stat::RedoWastage,
        Stat::RedoWriteIoRequests,
        Stat::ExecuteCount,
        Stat::UserCommits,
        Stat::FreeBufferRequested,
        Stat::FreeBufferInspected,
        Stat::DirtyBuffersInspected,
        Stat::DbwrCheckpointBuffersWritten,
        Stat::DbwrCheckpoints,
        Stat::TableScanBlocksGotten,
        Stat::TableScansShort,
        Stat::TableScansLong,
        Stat::RowsTouched,
        Stat::BlockCorruptions,
        Stat::CommitsUncovered,
    ];
    pub const COUNT: usize = Self::ALL.len();

    pub fn index(self) -> usize {
        self as usize
    }

    /// The name as AWR's Instance Activity Stats print it (Cairn's own carry a `cairn` prefix).
    pub fn name(self) -> &'static str {
        match self {
            Stat::SessionLogicalReads => "session logical reads",
            Stat::ConsistentGets => "consistent gets",
            Stat::DbBlockGets => "db block gets",
            Stat::CacheHits => "cairn buffer cache hits",
            Stat::CacheMisses => "cairn buffer cache misses",
            Stat::PhysicalReads => "physical reads",
            Stat::PhysicalReadsCache => "physical reads cache",
            Stat::PhysicalReadsDirect => "physical reads direct",
            Stat::PhysicalReadIoRequests => "physical read IO requests",
            Stat::PhysicalReadBytes => "physical read bytes",
            Stat::PhysicalReadMultiBlockRequests => "physical read total multi block requests",
            Stat::PhysicalWrites => "physical writes",
            Stat::PhysicalWriteIoRequests => "physical write IO requests",
            Stat::PhysicalWriteBytes => "physical write bytes",
            Stat::DbBlockChanges => "db block changes",
            Stat::RedoSize => "redo size",
            Stat::RedoEntries => "redo entries",
            Stat::RedoWrites => "redo writes",
            Stat::RedoBlocksWritten => "redo blocks written",
            Stat::RedoBytesWritten => "cairn redo bytes written",
            Stat::RedoWastage => "redo wastage",
            Stat::RedoWriteIoRequests => "cairn redo write IO requests",
            Stat::ExecuteCount => "execute count",
            Stat::UserCommits => "user commits",
            Stat::FreeBufferRequested => "free buffer requested",
            Stat::FreeBufferInspected => "free buffer inspected",
            Stat::DirtyBuffersInspected => "dirty buffers inspected",
            Stat::DbwrCheckpointBuffersWritten => "DBWR checkpoint buffers written",
            Stat::DbwrCheckpoints => "DBWR checkpoints",
            Stat::TableScanBlocksGotten => "table scan blocks gotten",
            Stat::TableScansShort => "table scans (short tables)",
            Stat::TableScansLong => "table scans (long tables)",
            Stat::RowsTouched => "cairn rows touched",
            Stat::BlockCorruptions => "cairn block corruptions",
            Stat::CommitsUncovered => "cairn commits not covered by a log write",
        }
    }
}

/// One event's waits in a slot or a total.
#[derive(Debug, Clone, Default)]
pub struct EventWaits {
    pub waits: u64,
    pub time_ns: u64,
    /// Created on the first wait, so a thread pays only for the events it waits on.
    pub histogram: Option<Box<LatencyHistogram>>,
}

impl EventWaits {
    pub fn record(&mut self, ns: u64) {
        self.waits += 1;
        self.time_ns += ns;
        self.histogram
            .get_or_insert_with(|| Box::new(LatencyHistogram::new()))
            .record(ns);
    }

    pub fn add(&mut self, other: &EventWaits) {
        self.waits += other.waits;
        self.time_ns += other.time_ns;
        if let Some(h) = &other.histogram {
            self.histogram
                .get_or_insert_with(|| Box::new(LatencyHistogram::new()))
                .add(h);
        }
    }
}

/// Everything counted by one thread, or summed over many.
#[derive(Debug, Clone)]
pub struct Counts {
    pub stats: [u64; Stat::COUNT],
    pub events: Vec<EventWaits>,
    /// Time sessions spent in calls (not thinking), in ns: AWR's DB time.
    pub db_time_ns: u64,
    /// CPU time of session threads, in ns: AWR's DB CPU.
    pub db_cpu_ns: u64,
    /// CPU time of the log writer and database writer threads, in ns.
    pub background_cpu_ns: u64,
}

impl Default for Counts {
    fn default() -> Self {
        Self {
            stats: [0; Stat::COUNT],
            events: vec![EventWaits::default(); Event::COUNT],
            db_time_ns: 0,
            db_cpu_ns: 0,
            background_cpu_ns: 0,
        }
    }
}

impl Counts {
    pub fn get(&self, stat: Stat) -> u64 {
        self.stats[stat.index()]
    }

    pub fn event(&self, event: Event) -> &EventWaits {
        &self.events[event.index()]
    }

    pub fn add(&mut self, other: &Counts) {
        for (a, b) in self.stats.iter_mut().zip(other.stats.iter()) {
            *a += b;
        }
        for (a, b) in self.events.iter_mut().zip(other.events.iter()) {
            a.add(b);
        }
        self.db_time_ns += other.db_time_ns;
        self.db_cpu_ns += other.db_cpu_ns;
        self.background_cpu_ns += other.background_cpu_ns;
    }
}

/// What one thread gathers during one operation, before publishing it.
///
/// Cheap to fill (array adds, a push per wait) and reused across operations.
#[derive(Debug)]
pub struct OpStats {
    stats: [u64; Stat::COUNT],
    waits: Vec<(Event, u64)>,
    db_time_ns: u64,
    db_cpu_ns: u64,
    background_cpu_ns: u64,
}

impl Default for OpStats {
    fn default() -> Self {
        Self::new()
    }
}

impl OpStats {
    pub fn new() -> Self {
        Self {
            stats: [0; Stat::COUNT],
            waits: Vec::new(),
            db_time_ns: 0,
            db_cpu_ns: 0,
            background_cpu_ns: 0,
        }
    }

    #[inline]
    pub fn add(&mut self, stat: Stat, n: u64) {
        self.stats[stat.index()] += n;
    }

    #[inline]
    pub fn wait(&mut self, event: Event, elapsed: Duration) {
        self.waits
            .push((event, u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)));
    }

    pub fn db_time(&mut self, elapsed: Duration) {
        self.db_time_ns += u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
    }

    pub fn db_cpu_ns(&mut self, ns: u64) {
        self.db_cpu_ns += ns;
    }

    pub fn background_cpu_ns(&mut self, ns: u64) {
        self.background_cpu_ns += ns;
    }

    /// The value of `stat` gathered since the last publish.
    pub fn get(&self, stat: Stat) -> u64 {
        self.stats[stat.index()]
    }
}

/// One thread's published counts; the monitor drains it.
#[derive(Debug, Default)]
pub struct StatsSlot {
    counts: Mutex<Counts>,
}

impl StatsSlot {
    /// Add what `op` gathered, and clear `op` for the next operation.
    pub fn publish(&self, op: &mut OpStats) {
        let mut c = self.counts();
        for (a, b) in c.stats.iter_mut().zip(op.stats.iter_mut()) {
            *a += *b;
            *b = 0;
        }
        for (event, ns) in op.waits.drain(..) {
            c.events[event.index()].record(ns);
        }
        c.db_time_ns += std::mem::take(&mut op.db_time_ns);
        c.db_cpu_ns += std::mem::take(&mut op.db_cpu_ns);
        c.background_cpu_ns += std::mem::take(&mut op.background_cpu_ns);
    }

    /// Take everything published so far, leaving the slot empty.
    pub fn take(&self) -> Counts {
        let mut c = self.counts();
        std::mem::take(&mut *c)
    }

    /// The counts. A thread that panicked while holding them (a bug) left
    /// them half added: its panic spreads to the monitor, so the run fails
    /// instead of reporting figures made from them.
    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.counts
            .lock()
            .expect("invariant: no thread panics while publishing its statistics")
    }
}

/// Every thread's slot.
#[derive(Debug, Default)]
pub struct StatsHub {
    slots: Mutex<Vec<Arc<StatsSlot>>>,
}

impl StatsHub {
    pub fn new() -> Self {
        Self::default()
    }

    /// A new slot for one thread.
    pub fn slot(&self) -> Arc<StatsSlot> {
        let slot = Arc::new(StatsSlot::default());
        self.slots
            .lock()
            .expect("invariant: no thread panics while registering its statistics")
            .push(Arc::clone(&slot));
        slot
    }

    /// Everything published since the last drain, summed over threads.
    pub fn drain(&self) -> Counts {
        let slots = self
            .slots
            .lock()
            .expect("invariant: no thread panics while registering its statistics");
        let mut total = Counts::default();
        for slot in slots.iter() {
            total.add(&slot.take());
        }
        total
    }
}

/// CPU time the calling thread has used, in ns (CLOCK_THREAD_CPUTIME_ID).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer to a local.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_and_stat_tables_are_in_declaration_order() {
        for (i, e) in Event::ALL.iter().enumerate() {
            assert_eq!(e.index(), i);
            assert_eq!(Event::from_name(e.name()), Some(*e));
        }
        for (i, s) in Stat::ALL.iter().enumerate() {
            assert_eq!(s.index(), i);
        }
    }

    #[test]
    fn publish_moves_counts_into_the_slot_and_drain_empties_it() {
        let hub = StatsHub::new();
        let a = hub.slot();
        let b = hub.slot();
        let mut op = OpStats::new();
        op.add(Stat::PhysicalReads, 3);
        op.wait(Event::DbFileSequentialRead, Duration::from_micros(100));
        op.wait(Event::DbFileSequentialRead, Duration::from_micros(300));
        a.publish(&mut op);
        assert_eq!(op.get(Stat::PhysicalReads), 0);
        op.add(Stat::PhysicalReads, 2);
        b.publish(&mut op);
        let total = hub.drain();
        assert_eq!(total.get(Stat::PhysicalReads), 5);
        let seq = total.event(Event::DbFileSequentialRead);
        assert_eq!(seq.waits, 2);
        assert_eq!(seq.time_ns, 400_000);
        assert_eq!(seq.histogram.as_ref().map(|h| h.count()), Some(2));
        assert_eq!(hub.drain().get(Stat::PhysicalReads), 0);
    }

    #[test]
    fn counts_a_thread_left_half_published_are_never_summed() {
        let hub = StatsHub::new();
        let slot = hub.slot();
        let mut op = OpStats::new();
        op.add(Stat::PhysicalReads, 3);
        slot.publish(&mut op);
        // A session's bug strikes half way through publishing: the slot's
        // lock is held, its counts half added.
        let held = Arc::clone(&slot);
        let joined = std::thread::spawn(move || {
            let mut c = held.counts.lock().expect("not poisoned yet");
            c.stats[Stat::PhysicalReads.index()] += 1;
            panic!("a bug half way through publishing");
        })
        .join();
        assert!(joined.is_err(), "the publisher was meant to panic");
        // The monitor must fail loudly rather than report those figures.
        let drained = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hub.drain()));
        let payload = match drained {
            Ok(counts) => panic!(
                "drain summed a half-published slot: {} physical reads",
                counts.get(Stat::PhysicalReads)
            ),
            Err(payload) => payload,
        };
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        assert!(message.contains("invariant"), "{message}");
    }

    #[test]
    fn thread_cpu_advances_with_work() {
        let a = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_ns() > a);
    }
}
