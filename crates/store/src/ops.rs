//! Long operations as `cairn group ops` shows them (ASM's V$ASM_OPERATION):
//! the command running a resync or a rebalance keeps a status file in the
//! run directory, rewritten (atomically) as it progresses and removed when
//! it ends; `group ops` reads them without taking the group's lock (the
//! running command holds it). A file whose process is gone is shown as
//! INTERRUPTED: the work is resumable (`group rebalance`, `group online`).
//!
//! The ETA is honest: from the rate measured over the last seconds of work
//! (not since the start, so it follows a change of pace), `None` until there
//! is a rate to go by, and never zero while work remains.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// How far back the rate looks.
const RATE_WINDOW: Duration = Duration::from_secs(10);
/// How often the status file is rewritten at most.
const WRITE_EVERY: Duration = Duration::from_millis(500);

/// One operation, as `group ops` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpStatus {
    pub group: String,
    pub group_uuid: Uuid,
    /// RESYNC, REBUILD (copies of a disk dropped by force), REBALANCE.
    pub pass: String,
    /// RUN; INTERRUPTED (its process is gone: resumable); or STOPPED (it
    /// ended short of its goal, `why` says why: resumable once dealt with).
    pub state: String,
    /// Why a STOPPED operation stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    pub power: usize,
    pub aus_done: u64,
    pub aus_total: u64,
    pub bytes_done: u64,
    /// Bytes per second over the last seconds; `None` until measured.
    pub rate_bytes_per_second: Option<f64>,
    /// Seconds left at that rate; `None` until there is a rate.
    pub eta_seconds: Option<u64>,
    /// Seconds until every extent has its copies again (the rebuild done);
    /// `Some(0)` when redundancy is whole already.
    pub redundancy_eta_seconds: Option<u64>,
    /// It goes on from an earlier, interrupted run.
    pub resumed: bool,
    pub pid: u32,
    pub started_unix_seconds: u64,
    pub updated_unix_seconds: u64,
}

/// Where group `uuid`'s status file lives.
pub fn status_path(run_dir: &Path, uuid: Uuid) -> PathBuf {
    run_dir.join(format!("{uuid}.op.json"))
}

/// Group `uuid` was just locked for writing by this process: a status file
/// another process left (it died, or was killed, mid-operation) describes
/// work that is over — what it left undone is recorded in the group and
/// this mount resumes or finishes it — so it goes, and `group ops` no
/// longer shows a dead process's operation after a restart. Only the
/// exclusive lock's holder may call this: nobody else runs an operation
/// on the group meanwhile.
pub fn forget_left_behind(run_dir: &Path, uuid: Uuid) {
    let path = status_path(run_dir, uuid);
    let left = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice::<OpStatus>(&b).ok());
    if left.is_some_and(|s| s.pid != std::process::id()) {
        let _ = std::fs::remove_file(&path);
    }
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Seconds left for `left` bytes at `rate`: never 0 while bytes are left.
pub fn eta(left: u64, rate: Option<f64>) -> Option<u64> {
    if left == 0 {
        return Some(0);
    }
    let rate = rate.filter(|r| *r > 0.0)?;
    Some(((left as f64 / rate).ceil() as u64).max(1))
}

/// `rebuild_aus` for an operation all of whose work restores redundancy
/// (a resync): redundancy is whole when it ends.
pub const REBUILD_ALL: u64 = u64::MAX;

/// The running side: keeps the status file current.
pub struct OpTracker {
    path: PathBuf,
    status: OpStatus,
    au_bytes: u64,
    /// AUs of rebuild work (done first): redundancy is whole after them.
    rebuild_aus: u64,
    samples: VecDeque<(Instant, u64)>,
    written: Option<Instant>,
}

impl OpTracker {
    /// Start tracking; the file is written at once. A run directory that
    /// cannot be written loses the listing, not the operation.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        run_dir: &Path,
        group: &str,
        uuid: Uuid,
        pass: &str,
        power: usize,
        au_bytes: u64,
        rebuild_aus: u64,
        resumed: bool,
    ) -> Self {
        let now = now_unix();
        let mut t = Self {
            path: status_path(run_dir, uuid),
            status: OpStatus {
                group: group.to_string(),
                group_uuid: uuid,
                pass: pass.to_string(),
                state: "RUN".into(),
                why: None,
                power,
                aus_done: 0,
                aus_total: 0,
                bytes_done: 0,
                rate_bytes_per_second: None,
                eta_seconds: None,
                redundancy_eta_seconds: (rebuild_aus == 0).then_some(0),
                resumed,
                pid: std::process::id(),
                started_unix_seconds: now,
                updated_unix_seconds: now,
            },
            au_bytes,
            rebuild_aus,
            samples: VecDeque::new(),
            written: None,
        };
        t.write();
        t
    }

    /// Record progress (AUs done of total, bytes copied).
    pub fn update(&mut self, done: u64, total: u64, bytes: u64) {
        let now = Instant::now();
        self.samples.push_back((now, bytes));
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > RATE_WINDOW)
            && self.samples.len() > 2
        {
            self.samples.pop_front();
        }
        let rate = match (self.samples.front(), self.samples.back()) {
            (Some((t0, b0)), Some((t1, b1))) if t1 > t0 && b1 > b0 => {
                Some((b1 - b0) as f64 / t1.duration_since(*t0).as_secs_f64())
            }
            _ => None,
        };
        let s = &mut self.status;
        s.aus_done = done;
        s.aus_total = total;
        s.bytes_done = bytes;
        s.rate_bytes_per_second = rate;
        s.eta_seconds = eta(total.saturating_sub(done) * self.au_bytes, rate);
        let rebuild = if self.rebuild_aus == REBUILD_ALL {
            total
        } else {
            self.rebuild_aus
        };
        s.redundancy_eta_seconds = eta(rebuild.saturating_sub(done) * self.au_bytes, rate);
        s.updated_unix_seconds = now_unix();
        if self
            .written
            .is_none_or(|w| now.duration_since(w) >= WRITE_EVERY)
        {
            self.write();
        }
    }

    /// The operation moved on to another pass (a rebalance's COMPACT).
    pub fn set_pass(&mut self, pass: &str) {
        if self.status.pass != pass {
            self.status.pass = pass.to_string();
            self.written = None;
        }
    }

    pub fn status(&self) -> &OpStatus {
        &self.status
    }

    fn write(&mut self) {
        self.written = Some(Instant::now());
        let Ok(text) = serde_json::to_vec_pretty(&self.status) else {
            return;
        };
        let tmp = self.path.with_extension("json.tmp");
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, &self.path);
        }
    }

    /// The operation ended (done, or failed: the work left is resumable
    /// and the group's own record says so).
    pub fn finish(self) {
        let _ = std::fs::remove_file(&self.path);
    }

    /// The operation ended short of its goal (a resync that left a disk
    /// SYNCING): it stays listed as STOPPED with `why`, until the group's
    /// next operation starts (its file takes this one's place).
    pub fn stop(mut self, why: &str) {
        self.status.state = "STOPPED".into();
        self.status.why = Some(why.to_string());
        self.status.rate_bytes_per_second = None;
        self.status.eta_seconds = None;
        self.status.redundancy_eta_seconds = None;
        self.status.updated_unix_seconds = now_unix();
        self.write();
    }
}

/// Every operation with a status file in `run_dir` (of group `name` only,
/// if given): RUN while its process lives, INTERRUPTED once it is gone.
pub fn list(run_dir: &Path, name: Option<&str>) -> Vec<OpStatus> {
    let Ok(dir) = std::fs::read_dir(run_dir) else {
        return Vec::new();
    };
    let mut out: Vec<OpStatus> = dir
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".op.json"))
        .filter_map(|e| std::fs::read(e.path()).ok())
        .filter_map(|b| serde_json::from_slice::<OpStatus>(&b).ok())
        .filter(|s| name.is_none_or(|n| s.group.eq_ignore_ascii_case(n.trim_start_matches('+'))))
        .map(|mut s| {
            if s.state == "RUN" && !Path::new(&format!("/proc/{}", s.pid)).exists() {
                s.state = "INTERRUPTED".into();
                s.rate_bytes_per_second = None;
                s.eta_seconds = None;
            }
            s
        })
        .collect();
    out.sort_by(|a, b| a.group.cmp(&b.group));
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_eta_is_never_zero_while_work_remains() {
        assert_eq!(eta(0, None), Some(0));
        assert_eq!(eta(1, None), None, "no rate yet: no guess");
        assert_eq!(eta(1, Some(1e12)), Some(1));
        assert_eq!(eta(100 << 20, Some((10 << 20) as f64)), Some(10));
    }

    #[test]
    fn a_status_file_is_listed_while_running_and_gone_after() {
        let dir = tempfile::tempdir().unwrap();
        let uuid = Uuid::from_u128(7);
        let mut t = OpTracker::start(dir.path(), "DATA", uuid, "REBALANCE", 4, 1 << 20, 0, false);
        t.update(3, 10, 3 << 20);
        let listed = list(dir.path(), Some("+data"));
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].state, "RUN");
        assert_eq!(listed[0].redundancy_eta_seconds, Some(0));
        assert!(list(dir.path(), Some("OTHER")).is_empty());
        t.finish();
        assert!(list(dir.path(), None).is_empty());
        // A file left by a process that is gone: INTERRUPTED.
        let mut dead =
            OpTracker::start(dir.path(), "DATA", uuid, "REBALANCE", 4, 1 << 20, 0, false);
        dead.status.pid = u32::MAX;
        dead.write();
        assert_eq!(list(dir.path(), None)[0].state, "INTERRUPTED");
        // The next writer of the group (a restarted service) forgets it;
        // its own file stays.
        forget_left_behind(dir.path(), uuid);
        assert!(list(dir.path(), None).is_empty());
        let mut mine =
            OpTracker::start(dir.path(), "DATA", uuid, "REBALANCE", 4, 1 << 20, 0, false);
        mine.update(1, 10, 1 << 20);
        forget_left_behind(dir.path(), uuid);
        assert_eq!(list(dir.path(), None)[0].state, "RUN");
    }

    #[test]
    fn a_stopped_operation_stays_listed_with_why_until_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let uuid = Uuid::from_u128(8);
        let mut t = OpTracker::start(dir.path(), "DATA", uuid, "RESYNC", 4, 1 << 20, 0, false);
        t.status.pid = u32::MAX; // its process gone: still STOPPED, not INTERRUPTED
        t.stop("D0 (SYNCING): 1 stale AU(s) left");
        let listed = list(dir.path(), None);
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].state, "STOPPED");
        assert_eq!(
            listed[0].why.as_deref(),
            Some("D0 (SYNCING): 1 stale AU(s) left")
        );
        let next = OpTracker::start(dir.path(), "DATA", uuid, "RESYNC", 4, 1 << 20, 0, false);
        assert_eq!(list(dir.path(), None)[0].state, "RUN");
        next.finish();
        assert!(list(dir.path(), None).is_empty());
    }

    #[test]
    fn a_resync_restores_redundancy_when_it_ends_and_a_pass_can_change() {
        let dir = tempfile::tempdir().unwrap();
        let uuid = Uuid::from_u128(8);
        let mut t = OpTracker::start(
            dir.path(),
            "DATA",
            uuid,
            "RESYNC",
            4,
            1 << 20,
            REBUILD_ALL,
            false,
        );
        assert_eq!(t.status().redundancy_eta_seconds, None, "no rate yet");
        t.update(0, 10, 0);
        t.update(5, 10, 5 << 20);
        // Whatever rate was measured, redundancy is whole when all is done.
        let s = t.status().clone();
        assert_eq!(s.eta_seconds, s.redundancy_eta_seconds, "{s:?}");
        t.set_pass("COMPACT");
        t.update(6, 10, 6 << 20);
        assert_eq!(list(dir.path(), None)[0].pass, "COMPACT");
        t.finish();
    }
}
