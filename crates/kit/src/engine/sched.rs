//! The schedule of one sd: which workload's I/O goes next, where, how big,
//! and — in open loop — when it was meant to start.
//!
//! One `SdSched` per sd per run, shared by whoever issues that sd's I/O (one
//! ring worker, or every synchronous thread of the sd), so the threads of an
//! sd draw from one queue as vdbench's do: sequential streams stay sequential
//! across threads, and a backlog is served by whichever thread is free.
//!
//! Open loop: each stream's arrivals are generated lazily from its own seeded
//! generator, and an arrival whose time has come but finds no free thread
//! waits in the stream's backlog *with its intended time*; its latency is
//! measured from that time, so a stall shows in every I/O it delayed
//! (no coordinated omission). The backlog is bounded (one second of the
//! stream's rate, at least [`BACKLOG_MIN`], at most [`BACKLOG_MAX`]); arrivals
//! beyond it are counted as not issued — in bulk, without drawing each one —
//! and the run reports the rate as not held. So neither the memory nor the
//! work of an admission grows with the rate: an absurd rate costs no more
//! than the storage's own pace, and the run still ends on time.

use std::collections::VecDeque;

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use crate::model::{Arrival, Seek, XferSize};
use crate::result::ValidationError;

/// Smallest backlog bound per stream, whatever its rate.
pub const BACKLOG_MIN: usize = 64;
/// Largest backlog bound per stream, whatever its rate: 8 MiB of intended
/// times. Still a whole second at a million I/Os per second, twice what the
/// fastest target measured here sustains (docs/measuring.md); past it, a backlog
/// measures the tool's memory rather than the storage.
pub const BACKLOG_MAX: usize = 1 << 20;

/// One workload on one sd: what it does ([`StreamSpec`]) and where it is.
#[derive(Debug)]
pub struct Stream {
    pub spec: StreamSpec,
    next_seq: u64,
    next_due_ns: u64,
    pending: VecDeque<u64>,
    backlog_limit: usize,
    rng: ChaCha8Rng,
    pub done: bool,
    /// Counters since the last take: arrivals due, arrivals not issued
    /// (backlog full), the largest backlog seen.
    pub scheduled: u64,
    pub not_issued: u64,
    pub backlog_max: u64,
    /// Arrivals drawn one at a time from the generator (the rest of those
    /// due were skipped in bulk): the admission's work, for its bound.
    pub draws: u64,
}

/// What a stream does.
#[derive(Debug, Clone)]
pub struct StreamSpec {
    /// Index of the workload among the run's workloads.
    pub wd: usize,
    pub rdpct: f64,
    pub xfer: XferSize,
    pub seek: Seek,
    /// Random addresses are multiples of this; `None` = of the transfer size.
    pub align: Option<u64>,
    /// Byte range on the sd (before `offset=`); `hi` may exceed the sd's end
    /// for a hotband that wraps.
    pub lo: u64,
    pub hi: u64,
    /// Accesses skewed toward `lo` (hotband).
    pub hot: bool,
    /// Lower is served first when threads are short.
    pub priority: u32,
    /// Share of a closed-loop sd's I/O (skew).
    pub weight: f64,
    /// Open loop: I/Os per second of this stream; `None` = closed loop.
    pub rate: Option<f64>,
    pub arrival: Arrival,
    pub seed: u64,
}

impl Stream {
    pub fn new(spec: StreamSpec) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
        let backlog_limit = spec
            .rate
            .map(|r| (r as usize).clamp(BACKLOG_MIN, BACKLOG_MAX))
            .unwrap_or(0);
        let mut stream = Self {
            next_seq: spec.lo,
            next_due_ns: 0,
            pending: VecDeque::new(),
            backlog_limit,
            rng: ChaCha8Rng::seed_from_u64(0),
            done: false,
            scheduled: 0,
            not_issued: 0,
            backlog_max: 0,
            draws: 0,
            spec,
        };
        // The first arrival is one gap after the start, not at it.
        stream.next_due_ns = stream.gap_ns(&mut rng);
        stream.rng = rng;
        stream
    }

    fn gap_ns(&self, rng: &mut ChaCha8Rng) -> u64 {
        let Some(rate) = self.spec.rate else { return 0 };
        if rate <= 0.0 {
            return u64::MAX / 4;
        }
        let mean = 1e9 / rate;
        let u = unit(rng);
        let gap = match self.spec.arrival {
            // Inverse transform; 1 − u is in (0, 1], so ln is finite.
            Arrival::Exponential => -mean * (1.0 - u).ln(),
            Arrival::Uniform => 2.0 * mean * u,
            Arrival::Deterministic => mean,
        };
        gap as u64
    }

    /// Move every arrival due by `now_ns` into the backlog. Arrivals are drawn
    /// one by one only while the backlog has room; once it is full, the rest
    /// of those due are counted as not issued in one step. Whatever the rate
    /// and however long since the last call, a call draws at most the
    /// backlog's free room and the memory stays within [`BACKLOG_MAX`].
    fn admit(&mut self, now_ns: u64) {
        if self.spec.rate.is_none() || self.done {
            return;
        }
        while self.next_due_ns <= now_ns && self.pending.len() < self.backlog_limit {
            self.scheduled += 1;
            self.pending.push_back(self.next_due_ns);
            let mut rng = std::mem::replace(&mut self.rng, ChaCha8Rng::seed_from_u64(0));
            let gap = self.gap_ns(&mut rng).max(1);
            self.draws += 1;
            self.rng = rng;
            self.next_due_ns = self.next_due_ns.saturating_add(gap);
        }
        if self.next_due_ns <= now_ns {
            let skipped = self.skip_through(now_ns);
            self.scheduled += skipped;
            self.not_issued += skipped;
        }
        assert!(
            self.pending.len() <= BACKLOG_MAX,
            "invariant: a backlog holds at most BACKLOG_MAX arrivals"
        );
        self.backlog_max = self.backlog_max.max(self.pending.len() as u64);
    }

    /// The backlog is full: pass over every arrival due by `now_ns` without
    /// drawing them, and return how many there were. They are never issued,
    /// so only their number matters, and it is taken at the mean rate (for
    /// deterministic arrivals, exactly); drawing each would cost as much as
    /// the rate itself — a billion draws a second at 1e9/s. The next arrival
    /// is drawn as usual from where the skipped ones end.
    fn skip_through(&mut self, now_ns: u64) -> u64 {
        let Some(rate) = self.spec.rate.filter(|r| *r > 0.0) else {
            return 0;
        };
        debug_assert!(self.next_due_ns <= now_ns);
        let mean_ns = 1e9 / rate;
        let behind_ns = (now_ns - self.next_due_ns) as f64;
        // The one due at next_due_ns, and those every mean gap after it.
        let count = (behind_ns / mean_ns).floor() as u64 + 1;
        let end_ns = self.next_due_ns as f64 + count as f64 * mean_ns;
        // Past now even where the float rounds down; the next gap follows.
        self.next_due_ns = (end_ns as u64).max(now_ns.saturating_add(1));
        count
    }

    /// The bound of this stream's backlog: one second of its rate, within
    /// [`BACKLOG_MIN`] and [`BACKLOG_MAX`]; 0 for a closed-loop stream.
    pub fn backlog_limit(&self) -> usize {
        self.backlog_limit
    }

    /// Arrivals waiting for a thread.
    pub fn backlog(&self) -> u64 {
        self.pending.len() as u64
    }

    fn pick_size(&mut self) -> u64 {
        match &self.spec.xfer {
            XferSize::Fixed(b) => *b,
            XferSize::Distribution(d) => {
                let mut x = unit(&mut self.rng) * 100.0;
                for (bytes, pct) in d {
                    if x < *pct {
                        return *bytes;
                    }
                    x -= pct;
                }
                d.last().map(|(b, _)| *b).unwrap_or(4096)
            }
        }
    }

    /// Next address for an I/O of `len` bytes, or `None` at the end of an
    /// `eof` pass. `sd_len` is where the sd ends (for wrapping hotbands).
    fn pick_offset(&mut self, len: u64, sd_start: u64, sd_len: u64) -> Option<u64> {
        let random = match self.spec.seek {
            Seek::Sequential | Seek::Eof => false,
            Seek::Random(p) => p >= 100.0 || unit(&mut self.rng) * 100.0 < p,
        };
        if !random {
            let mut at = self.next_seq;
            if at + len > self.spec.hi.min(sd_len) {
                if self.spec.seek == Seek::Eof {
                    self.done = true;
                    return None;
                }
                at = self.spec.lo;
            }
            self.next_seq = at + len;
            return Some(at);
        }
        let align = self.spec.align.unwrap_or(len).max(1);
        let span = self.spec.hi - self.spec.lo;
        let slots = (span.saturating_sub(len) / align + 1).max(1);
        let u = unit(&mut self.rng);
        // A hotband favours its start: density falls off as 1/sqrt(x).
        let k = if self.spec.hot {
            ((u * u) * slots as f64) as u64
        } else {
            self.rng.next_u64() % slots
        }
        .min(slots - 1);
        let mut at = self.spec.lo + k * align;
        if at + len > sd_len {
            // Past the end of a wrapping band: continue from the start of the
            // sd's region (not of the lun: another sd may own what lies before).
            let wrapped = at.saturating_sub(sd_len - sd_start);
            at = (wrapped / align * align).max(sd_start);
            if at + len > sd_len {
                at = sd_start;
            }
        }
        // A sequential run after a random jump continues from here.
        self.next_seq = at + len;
        Some(at)
    }
}

fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Where an I/O of a stream goes.
#[derive(Clone, Copy)]
enum Place {
    At(u64),
    /// Its blocks are busy (validation).
    Busy,
    /// The stream reached the end of its `eof` pass.
    Ended,
}

/// An address for an I/O of `len` bytes on `stream`. With validation, an
/// address whose blocks are busy is redrawn a few times (random) or waited
/// for (sequential).
#[inline]
fn place(
    stream: &mut Stream,
    validation: Option<&Validation>,
    len: u64,
    sd_start: u64,
    sd_len: u64,
) -> Place {
    for _ in 0..8 {
        let Some(a) = stream.pick_offset(len, sd_start, sd_len) else {
            return Place::Ended;
        };
        match validation {
            Some(v) if !v.free(a, len) => {
                if !matches!(stream.spec.seek, Seek::Random(_)) {
                    stream.next_seq = a;
                    return Place::Busy;
                }
            }
            _ => return Place::At(a),
        }
    }
    Place::Busy
}

/// One I/O chosen by the schedule.
#[derive(Debug, Clone, Copy)]
pub struct IoSpec {
    pub stream: usize,
    pub wd: usize,
    /// Nanoseconds since the run's start when it should start (open loop), or
    /// when it was chosen (closed loop).
    pub intended_ns: u64,
    /// Bytes on the sd, before `offset=`.
    pub at: u64,
    pub len: u64,
    pub write: bool,
    /// Validation key the units of a write get.
    pub key: u8,
}

/// What to do next on an sd.
#[derive(Debug, Clone, Copy)]
pub enum Next {
    Io(IoSpec),
    /// Nothing is due before this time (ns since the start).
    WaitUntil(u64),
    /// Nothing to do until an I/O completes (validation: the chosen blocks are busy).
    Busy,
    /// Every stream has finished (all `eof`).
    Finished,
}

/// Validation state of an sd: the key last written to each unit, and which
/// units have an I/O in flight (so a read never races a write of the same block).
#[derive(Debug)]
pub struct Validation {
    pub unit: u64,
    pub sd_tag: u32,
    keys: Vec<u8>,
    busy: Vec<bool>,
    next_key: u8,
    pub checked: u64,
    pub written: u64,
    pub errors: Vec<ValidationError>,
}

impl Validation {
    pub fn new(unit: u64, sd_len: u64, sd_tag: u32) -> Self {
        let units = sd_len.div_ceil(unit) as usize;
        Self {
            unit,
            sd_tag,
            keys: vec![0; units],
            busy: vec![false; units],
            next_key: 0,
            checked: 0,
            written: 0,
            errors: Vec::new(),
        }
    }

    fn units(&self, at: u64, len: u64) -> std::ops::Range<usize> {
        (at / self.unit) as usize..(at + len).div_ceil(self.unit) as usize
    }

    fn free(&self, at: u64, len: u64) -> bool {
        self.units(at, len)
            .all(|u| !self.busy.get(u).copied().unwrap_or(true))
    }

    fn claim(&mut self, at: u64, len: u64) {
        for u in self.units(at, len) {
            self.busy[u] = true;
        }
    }

    /// The I/O finished: release its units; a write that succeeded sets their key,
    /// one that failed leaves them unknown (never checked until rewritten).
    pub fn release(&mut self, at: u64, len: u64, write: Option<(u8, bool)>) {
        for u in self.units(at, len) {
            self.busy[u] = false;
            if let Some((key, ok)) = write {
                self.keys[u] = if ok { key } else { 0 };
            }
        }
        if let Some((_, true)) = write {
            self.written += self.units(at, len).len() as u64;
        }
    }

    /// Between runs: a unit still marked busy had its I/O cut short (the
    /// engine failed mid-run), so what it holds is unknown — free it, and
    /// never check it until it is rewritten.
    pub fn settle(&mut self) {
        for (busy, key) in self.busy.iter_mut().zip(&mut self.keys) {
            if *busy {
                *busy = false;
                *key = 0;
            }
        }
    }

    /// The key expected in unit `u`; 0 = never written in this bench.
    pub fn key(&self, u: u64) -> u8 {
        self.keys.get(u as usize).copied().unwrap_or(0)
    }

    fn take_key(&mut self) -> u8 {
        self.next_key = self.next_key % 255 + 1;
        self.next_key
    }
}

/// The schedule of one sd.
#[derive(Debug)]
pub struct SdSched {
    pub streams: Vec<Stream>,
    /// Where the sd's addresses end (its usable length, before `offset=`).
    pub sd_len: u64,
    /// Where they start (`range=`); a wrapping hotband continues from here.
    pub sd_start: u64,
    pub validation: Option<Validation>,
    rng: ChaCha8Rng,
}

impl SdSched {
    pub fn new(
        streams: Vec<Stream>,
        sd_len: u64,
        validation: Option<Validation>,
        seed: u64,
    ) -> Self {
        Self {
            streams,
            sd_len,
            sd_start: 0,
            validation,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// The sd's region starts at `start` (its `range=`), not at 0.
    pub fn with_start(mut self, start: u64) -> Self {
        self.sd_start = start;
        self
    }

    /// Admit every open-loop arrival due by `now_ns` into the backlogs, so a
    /// stall with every thread busy is still counted (called at interval ends).
    pub fn admit(&mut self, now_ns: u64) {
        for s in &mut self.streams {
            s.admit(now_ns);
        }
    }

    /// The next I/O to issue at `now_ns`.
    pub fn next(&mut self, now_ns: u64) -> Next {
        for s in &mut self.streams {
            s.admit(now_ns);
        }
        let (priority, mut chosen) = match self.best_ready() {
            Ok(best) => best,
            Err(next) => return next,
        };
        if self.streams[chosen].spec.rate.is_none() {
            chosen = self.draw_by_weight(priority, chosen);
        }
        let (sd_start, sd_len) = (self.sd_start, self.sd_len);
        let stream = &mut self.streams[chosen];
        let len = stream.pick_size();
        let write = unit(&mut stream.rng) * 100.0 >= stream.spec.rdpct;
        let at = match place(stream, self.validation.as_ref(), len, sd_start, sd_len) {
            Place::At(at) => at,
            Place::Busy => return Next::Busy,
            // That stream reached the end of its eof pass: ask again.
            Place::Ended => return self.next(now_ns),
        };
        let intended_ns = match stream.spec.rate {
            Some(_) => stream.pending.pop_front().unwrap_or(now_ns),
            None => now_ns,
        };
        let wd = stream.spec.wd;
        let key = match &mut self.validation {
            Some(v) => {
                v.claim(at, len);
                if write {
                    v.take_key()
                } else {
                    0
                }
            }
            None => 0,
        };
        Next::Io(IoSpec {
            stream: chosen,
            wd,
            intended_ns,
            at,
            len,
            write,
            key,
        })
    }

    /// Among the streams with work now, the best priority; within it, the
    /// open-loop arrival that has waited longest, else a closed-loop stream
    /// (drawn by weight after). `Err`: none has work now — the time the next
    /// arrival is due, or every stream has finished.
    #[inline]
    fn best_ready(&self) -> Result<(u32, usize), Next> {
        let mut best: Option<(u32, usize)> = None;
        let mut any_live = false;
        let mut wake = u64::MAX;
        for (i, s) in self.streams.iter().enumerate() {
            if s.done {
                continue;
            }
            any_live = true;
            let ready = match s.spec.rate {
                Some(_) => {
                    wake = wake.min(s.next_due_ns);
                    !s.pending.is_empty()
                }
                None => true,
            };
            if !ready {
                continue;
            }
            let better = match best {
                None => true,
                Some((p, j)) => {
                    s.spec.priority < p
                        || (s.spec.priority == p
                            && match (s.pending.front(), self.streams[j].pending.front()) {
                                (Some(a), Some(b)) => a < b,
                                (Some(_), None) => true,
                                _ => false,
                            })
                }
            };
            if better {
                best = Some((s.spec.priority, i));
            }
        }
        if !any_live {
            return Err(Next::Finished);
        }
        best.ok_or(Next::WaitUntil(wake))
    }

    /// Closed loop at `priority`: the stream drawn by weight among those
    /// live at it (`chosen` if none is).
    #[inline]
    fn draw_by_weight(&mut self, priority: u32, mut chosen: usize) -> usize {
        let total: f64 = self
            .streams
            .iter()
            .filter(|s| !s.done && s.spec.rate.is_none() && s.spec.priority == priority)
            .map(|s| s.spec.weight)
            .sum();
        let mut x = unit(&mut self.rng) * total;
        for (i, s) in self.streams.iter().enumerate() {
            if s.done || s.spec.rate.is_some() || s.spec.priority != priority {
                continue;
            }
            chosen = i;
            if x < s.spec.weight {
                break;
            }
            x -= s.spec.weight;
        }
        chosen
    }

    /// Arrivals waiting across the sd's streams.
    pub fn backlog(&self) -> u64 {
        self.streams.iter().map(Stream::backlog).sum()
    }

    /// Take (and reset) the open-loop counters: (scheduled, not issued, backlog max).
    pub fn take_counters(&mut self) -> (u64, u64, u64) {
        let mut out = (0, 0, 0);
        for s in &mut self.streams {
            out.0 += std::mem::take(&mut s.scheduled);
            out.1 += std::mem::take(&mut s.not_issued);
            out.2 = out.2.max(std::mem::take(&mut s.backlog_max));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn spec(rate: Option<f64>, seek: Seek) -> StreamSpec {
        StreamSpec {
            wd: 0,
            rdpct: 100.0,
            xfer: XferSize::Fixed(8192),
            seek,
            align: None,
            lo: 0,
            hi: 1 << 20,
            hot: false,
            priority: u32::MAX,
            weight: 1.0,
            rate,
            arrival: Arrival::Deterministic,
            seed: 1,
        }
    }

    fn io(next: Next) -> IoSpec {
        match next {
            Next::Io(io) => io,
            other => panic!("expected an I/O, got {other:?}"),
        }
    }

    #[test]
    fn sequential_wraps_and_eof_finishes() {
        let mut s = SdSched::new(
            vec![Stream::new(spec(None, Seek::Sequential))],
            1 << 20,
            None,
            0,
        );
        let offsets: Vec<u64> = (0..130).map(|_| io(s.next(0)).at).collect();
        assert_eq!(offsets[1], 8192);
        assert_eq!(offsets[127], 127 * 8192);
        assert_eq!(offsets[128], 0, "wraps at the end");
        let mut s = SdSched::new(vec![Stream::new(spec(None, Seek::Eof))], 1 << 20, None, 0);
        for _ in 0..128 {
            io(s.next(0));
        }
        assert!(matches!(s.next(0), Next::Finished));
    }

    #[test]
    fn random_offsets_are_aligned_and_inside() {
        let mut s = SdSched::new(
            vec![Stream::new(spec(None, Seek::Random(100.0)))],
            1 << 20,
            None,
            0,
        );
        for _ in 0..10_000 {
            let i = io(s.next(0));
            assert_eq!(i.at % 8192, 0);
            assert!(i.at + i.len <= 1 << 20);
        }
    }

    #[test]
    fn open_loop_arrivals_keep_their_intended_times_in_the_backlog() {
        // 1000/s deterministic: arrivals at 1 ms, 2 ms, … Nothing issued for
        // 10 ms, then everything due comes out oldest first, with its own time.
        let mut s = SdSched::new(
            vec![Stream::new(spec(Some(1000.0), Seek::Random(100.0)))],
            1 << 20,
            None,
            0,
        );
        assert!(matches!(s.next(500_000), Next::WaitUntil(1_000_000)));
        let times: Vec<u64> = (0..10)
            .map(|_| io(s.next(10_000_000)).intended_ns)
            .collect();
        assert_eq!(times, (1..=10).map(|i| i * 1_000_000).collect::<Vec<_>>());
        assert!(matches!(s.next(10_000_000), Next::WaitUntil(11_000_000)));
    }

    #[test]
    fn a_full_backlog_counts_what_it_could_not_hold() {
        let mut s = SdSched::new(
            vec![Stream::new(spec(Some(1000.0), Seek::Random(100.0)))],
            1 << 20,
            None,
            0,
        );
        // 10 s with nothing issued: 10,000 due, the backlog holds 1,000 (one second).
        io(s.next(10_000_000_000));
        let (scheduled, not_issued, backlog_max) = s.take_counters();
        assert_eq!(scheduled, 10_000);
        assert_eq!(not_issued, 9_000);
        assert_eq!(backlog_max, 1_000);
    }

    #[test]
    fn a_huge_rate_keeps_the_backlog_at_its_cap_and_skips_the_rest_in_bulk() {
        // 1e9/s with nothing issued for 10 ms: 10,000,000 arrivals are due.
        let mut s = SdSched::new(
            vec![Stream::new(spec(Some(1e9), Seek::Random(100.0)))],
            1 << 20,
            None,
            0,
        );
        s.admit(10_000_000);
        assert!(
            s.backlog() <= BACKLOG_MAX as u64,
            "backlog {} over its cap",
            s.backlog()
        );
        assert_eq!(s.backlog(), BACKLOG_MAX as u64, "filled to its cap");
        // Only what the backlog holds was drawn one by one.
        assert!(
            s.streams[0].draws <= BACKLOG_MAX as u64 + 1,
            "{} arrivals drawn one by one",
            s.streams[0].draws
        );
        let (scheduled, not_issued, backlog_max) = s.take_counters();
        assert_eq!(scheduled, 10_000_000);
        assert_eq!(not_issued, 10_000_000 - BACKLOG_MAX as u64);
        assert_eq!(backlog_max, BACKLOG_MAX as u64);
    }

    #[test]
    fn an_hour_at_a_huge_rate_does_bounded_work_and_counts_every_arrival() {
        // 1e9/s for a simulated hour, one I/O taken each second: 3.6e12
        // arrivals are due. They are counted, not drawn.
        let mut sp = spec(Some(1e9), Seek::Random(100.0));
        sp.arrival = Arrival::Exponential;
        let mut s = SdSched::new(vec![Stream::new(sp)], 1 << 20, None, 0);
        let (mut scheduled, mut not_issued, mut issued) = (0u64, 0u64, 0u64);
        for second in 1..=3600u64 {
            let now = second * 1_000_000_000;
            let io = io(s.next(now));
            assert!(io.intended_ns <= now);
            issued += 1;
            assert!(s.backlog() <= BACKLOG_MAX as u64);
            let (a, b, _) = s.take_counters();
            scheduled += a;
            not_issued += b;
        }
        // Every arrival due is either waiting, issued, or counted as not issued.
        assert_eq!(scheduled, s.backlog() + issued + not_issued);
        let expected = 3.6e12;
        assert!(
            (scheduled as f64 - expected).abs() < expected * 1e-3,
            "{scheduled} scheduled"
        );
        // The backlog was filled once, then topped up by one per I/O taken.
        assert!(
            s.streams[0].draws <= BACKLOG_MAX as u64 + 3600 + 1,
            "{} drawn one by one",
            s.streams[0].draws
        );
        assert_eq!(s.streams[0].backlog_limit(), BACKLOG_MAX);
    }

    #[test]
    fn the_backlog_bound_is_one_second_of_the_rate_within_its_limits() {
        let limit = |rate: f64| Stream::new(spec(Some(rate), Seek::Random(100.0))).backlog_limit();
        assert_eq!(limit(10.0), BACKLOG_MIN);
        assert_eq!(limit(5000.0), 5000);
        assert_eq!(limit(1e9), BACKLOG_MAX);
        assert_eq!(
            Stream::new(spec(None, Seek::Random(100.0))).backlog_limit(),
            0
        );
    }

    #[test]
    fn exponential_arrivals_average_the_rate() {
        let mut sp = spec(Some(5000.0), Seek::Random(100.0));
        sp.arrival = Arrival::Exponential;
        let mut s = SdSched::new(vec![Stream::new(sp)], 1 << 20, None, 0);
        let mut n = 0;
        let mut now = 0;
        while now < 20_000_000_000 {
            now += 100_000;
            while let Next::Io(_) = s.next(now) {
                n += 1;
            }
        }
        // 100,000 expected; Poisson sd ≈ 316.
        assert!((n as f64 - 100_000.0).abs() < 1_600.0, "{n} arrivals");
    }

    #[test]
    fn priority_serves_the_lower_number_first() {
        let mut a = spec(Some(1000.0), Seek::Random(100.0));
        a.priority = 2;
        a.wd = 0;
        let mut b = spec(Some(1000.0), Seek::Random(100.0));
        b.priority = 1;
        b.wd = 1;
        let mut s = SdSched::new(vec![Stream::new(a), Stream::new(b)], 1 << 20, None, 0);
        let first: Vec<usize> = (0..5).map(|_| io(s.next(5_000_000)).wd).collect();
        assert_eq!(first, vec![1; 5], "all of the priority-1 backlog first");
        assert_eq!(io(s.next(5_000_000)).wd, 0);
    }

    #[test]
    fn rdpct_and_skew_shape_the_mix() {
        let mut a = spec(None, Seek::Random(100.0));
        a.rdpct = 70.0;
        a.weight = 75.0;
        let mut b = spec(None, Seek::Random(100.0));
        b.wd = 1;
        b.weight = 25.0;
        b.seed = 2;
        let mut s = SdSched::new(vec![Stream::new(a), Stream::new(b)], 1 << 20, None, 3);
        let (mut wd0, mut writes0) = (0, 0);
        for _ in 0..100_000 {
            let i = io(s.next(0));
            if i.wd == 0 {
                wd0 += 1;
                writes0 += i.write as u32;
            }
        }
        assert!((wd0 as f64 / 100_000.0 - 0.75).abs() < 0.01, "{wd0}");
        assert!(
            (writes0 as f64 / wd0 as f64 - 0.30).abs() < 0.01,
            "{writes0}"
        );
    }

    #[test]
    fn a_wrapping_hotband_stays_inside_the_sds_region() {
        // The sd uses [512 KiB, 1 MiB) of its lun; the band runs from 90% of
        // it past the end, wrapping to the region's start — never below it.
        let mut sp = spec(None, Seek::Random(100.0));
        sp.lo = 512 * 1024 + 460 * 1024;
        sp.hi = sp.lo + 100 * 1024;
        sp.hot = true;
        let band_lo = sp.lo;
        let mut s = SdSched::new(vec![Stream::new(sp)], 1 << 20, None, 0).with_start(512 * 1024);
        let mut wrapped = 0;
        for _ in 0..10_000 {
            let i = io(s.next(0));
            assert!(i.at >= 512 * 1024 && i.at + i.len <= 1 << 20, "{}", i.at);
            wrapped += u32::from(i.at < band_lo);
        }
        assert!(wrapped > 0, "the band never wrapped");
    }

    #[test]
    fn validation_never_hands_out_busy_blocks() {
        let v = Validation::new(4096, 1 << 20, 1);
        let mut sp = spec(None, Seek::Random(100.0));
        sp.hi = 64 << 10;
        let mut s = SdSched::new(vec![Stream::new(sp)], 1 << 20, Some(v), 0);
        let mut held = Vec::new();
        for _ in 0..8 {
            match s.next(0) {
                Next::Io(i) => held.push(i.at),
                Next::Busy => {}
                other => panic!("{other:?}"),
            }
        }
        let mut sorted = held.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), held.len(), "two I/Os on one block: {held:?}");
    }
}
