//! Multihost protection: one writer per group, across hosts.
//!
//! A lock file keeps two processes of one host apart; a host that sees the
//! same disks through a SAN sees no lock of ours. So, as ZFS's multihost
//! protection does, the writer writes a *heartbeat* to every disk it writes
//! (`format::heartbeat`, block 1 of each member) once an interval, and a
//! host about to mount reads them first:
//!
//! - no heartbeat, one that says its writer let go ([`HeartbeatState::Released`],
//!   written by every clean dismount), or one of this host's own (its
//!   previous mount died; the group lock, taken first, says no process of
//!   this host holds the group now): nobody writes the group, mount at once;
//! - another host's active heartbeat: refused, naming the host and when it
//!   last wrote, unless the caller asked to take over ([`Takeover::Force`]).
//!   Then the *activity check* watches the heartbeats for twice the time that
//!   host stops writing after without a heartbeat landing ([`ActivityCheck`]):
//!   any that moves refuses the mount (it still beats, and no force takes a
//!   group from a host that beats); if none moved, its writer is dead or has
//!   stopped writing, and the group is taken over.
//!
//! Then the mounting host *claims* the group: its own active heartbeat, one
//! sequence past every one it read, on every member, before the mount
//! writes anything ([`claim`]). The [`Beater`] keeps it beating from then
//! on — through the mount itself, which may be long, and must not look
//! like a dead owner — on a thread of its own ([`start`]) that never takes
//! the metadata lock and never waits for data I/O: it reads each disk's
//! block before it writes it, and
//! a block another host wrote with a newer sequence means the group was
//! taken over: the group stops. A read or write that fails, or hangs for
//! the timeout, is that disk's failure, handed to the metadata plane
//! ([`Link::take_failed`]). If no heartbeat lands on any disk for the
//! writer's timeout (`fail_intervals` × interval), another host may be
//! taking the group over at that moment: the group stops writing, as ZFS
//! suspends the pool. Letting go writes [`HeartbeatState::Released`] (never
//! after such a stop: the group may be another host's by then).
//!
//! Fault assumptions: a write another host's read can see once it has
//! completed (a SAN array's cache is shared; a flush is not needed); clocks
//! of different hosts disagree, so the wall time in a heartbeat is only
//! shown, and every decision is by sequence numbers and this host's own
//! monotonic clock; a disk may fail or hang (bounded waits on an engine of
//! the heartbeat's own).
//!
//! Not covered: two hosts that mount a *released* group in the same
//! instant both claim it; each then sees the other's claim at its next beat
//! and stops, but not before its mount has written. ZFS skips the activity
//! check for an exported pool too. And a writer paused (a VM frozen) for
//! longer than the check may still write what it had in flight when it
//! wakes, before its next beat sees the takeover.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use cairn_format::heartbeat::{Heartbeat, HeartbeatState, HEARTBEAT_OFFSET_BYTES, HOST_NAME_BYTES};
use cairn_format::meta::{self, BlockType, BLOCK_BYTES};
use cairn_io::clock::Clock;
use cairn_io::poison::{recover, Recover};
use cairn_io::{AlignedBuf, DeviceId, IoEngine, Op, Request};
use uuid::Uuid;

use super::block_ids::per_disk_id;
use super::engines::EngineSource;
use super::error::GroupError;
use super::plane::DataPlane;

/// How often the writer beats. ZFS's `zfs_multihost_interval` default: a
/// second costs one 4 KiB write per disk, and keeps the takeover wait
/// after a crash at tens of seconds.
pub const HEARTBEAT_INTERVAL_MS: u32 = 1000;
/// Intervals without a heartbeat landing after which the writer stops
/// writing: ZFS's `zfs_multihost_fail_intervals` default. Long enough for a
/// SAN path failover of a few seconds not to stop the group; short enough
/// that a host cut off from its disks stops well within the wait of a host
/// that takes over.
pub const HEARTBEAT_FAIL_INTERVALS: u16 = 10;
/// A host taking over watches for this many times the owner's timeout:
/// ZFS's `MMP_IMPORT_SAFETY_FACTOR` (200%), so that an owner whose last
/// beats were slow has stopped for certain before anyone writes.
pub const ACTIVITY_CHECK_FACTOR: u64 = 2;

/// Who this host is, as its heartbeats say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostIdentity {
    /// Stable across restarts of the host; distinct between hosts.
    pub id: Uuid,
    /// For people: printable ASCII, at most [`HOST_NAME_BYTES`].
    pub name: String,
    pub pid: u32,
}

impl HostIdentity {
    /// `name` made printable and short enough for the heartbeat.
    pub fn new(id: Uuid, name: &str, pid: u32) -> Self {
        let name: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_graphic() || c == ' ' {
                    c
                } else {
                    '?'
                }
            })
            .take(HOST_NAME_BYTES)
            .collect();
        Self { id, name, pid }
    }
}

/// How a writer beats: what its heartbeats declare, so that a reader waits
/// according to the writer's pace, not its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub interval_ms: u32,
    pub fail_intervals: u16,
}

impl Timing {
    pub const DEFAULT: Self = Self {
        interval_ms: HEARTBEAT_INTERVAL_MS,
        fail_intervals: HEARTBEAT_FAIL_INTERVALS,
    };

    fn interval_ns(self) -> u64 {
        u64::from(self.interval_ms) * 1_000_000
    }

    /// How long the writer goes without a heartbeat landing before it stops.
    pub fn fail_after_ns(self) -> u64 {
        self.interval_ns() * u64::from(self.fail_intervals)
    }
}

/// What a mount does about another host's active heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takeover {
    /// Refuse, at once.
    Refuse,
    /// Watch it (the activity check): take the group over if it is still,
    /// refuse if it moves.
    Force,
}

/// One disk's heartbeat as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat {
    pub disk: u16,
    /// The envelope's generation: grows with every write, whoever writes.
    pub sequence: u64,
    pub heartbeat: Heartbeat,
}

impl Beat {
    fn timing(&self) -> Timing {
        Timing {
            interval_ms: self.heartbeat.interval_ms,
            fail_intervals: self.heartbeat.fail_intervals,
        }
    }

    /// "host NAME (host id ID, pid PID), whose heartbeat was last written at
    /// TIME (AGE)": the age by this host's clock, said as such.
    pub fn describe(&self, now_unix_ms: u64) -> String {
        let hb = &self.heartbeat;
        let at = std::time::UNIX_EPOCH + Duration::from_millis(hb.written_unix_ms);
        let age = if now_unix_ms >= hb.written_unix_ms {
            format!(
                "{:.1} s ago by this host's clock",
                (now_unix_ms - hb.written_unix_ms) as f64 / 1000.0
            )
        } else {
            format!(
                "its clock is {:.1} s ahead of this host's",
                (hb.written_unix_ms - now_unix_ms) as f64 / 1000.0
            )
        };
        format!(
            "host {} (host id {}, pid {}), whose heartbeat was last written at {} ({age})",
            if hb.host_name.is_empty() {
                "?"
            } else {
                &hb.host_name
            },
            hb.host_id,
            hb.pid,
            humantime::format_rfc3339_millis(at),
        )
    }
}

/// Who holds the group, by the newest heartbeat on its disks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// Nobody writes it: no heartbeat, a released one, or this host's own.
    Free,
    /// Another host's active heartbeat, the newest.
    Other(Beat),
}

/// Who holds the group, from what each disk's heartbeat says (`None`: no
/// valid heartbeat there). The newest sequence is the last word: a host
/// that takes over writes past every sequence it read.
pub fn owner(me: Uuid, beats: &[Option<Beat>]) -> Owner {
    let newest = beats.iter().flatten().max_by_key(|b| b.sequence);
    match newest {
        Some(b) if b.heartbeat.state == HeartbeatState::Active && b.heartbeat.host_id != me => {
            Owner::Other(b.clone())
        }
        _ => Owner::Free,
    }
}

/// The newest sequence among `beats` (0 with none).
pub fn newest_sequence(beats: &[Option<Beat>]) -> u64 {
    beats
        .iter()
        .flatten()
        .map(|b| b.sequence)
        .max()
        .unwrap_or(0)
}

/// What an activity check concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activity {
    /// A heartbeat moved during the watch: its writer lives.
    Moved(Beat),
    /// Nothing moved for the whole watch: the owner is dead or stopped.
    Still(Beat),
}

/// ZFS's import activity check, as a pure state machine: given the
/// heartbeats read first, and readings after, decide whether the owner
/// still beats. The caller reads and sleeps ([`claim`]); a simulator drives
/// it with its own clock.
#[derive(Debug, Clone)]
pub struct ActivityCheck {
    owner: Beat,
    /// Per disk, the sequence read first (`None`: nothing valid there).
    first: Vec<Option<u64>>,
    newest_first: u64,
    until_ns: u64,
}

impl ActivityCheck {
    /// Start watching at `now_ns`, after the first reading `beats` (whose
    /// newest is `owner`'s).
    pub fn start(owner: Beat, beats: &[Option<Beat>], now_ns: u64) -> Self {
        let duration = owner.timing().fail_after_ns() * ACTIVITY_CHECK_FACTOR;
        Self {
            first: beats
                .iter()
                .map(|b| b.as_ref().map(|b| b.sequence))
                .collect(),
            newest_first: newest_sequence(beats),
            until_ns: now_ns.saturating_add(duration),
            owner,
        }
    }

    /// How long the whole watch takes.
    pub fn duration_ns(&self) -> u64 {
        self.owner.timing().fail_after_ns() * ACTIVITY_CHECK_FACTOR
    }

    /// When to read again: once per the owner's interval (it writes every
    /// disk that often), not past the end of the watch.
    pub fn next_read_ns(&self, now_ns: u64) -> u64 {
        now_ns
            .saturating_add(self.owner.timing().interval_ns())
            .min(self.until_ns)
    }

    /// A reading at `now_ns`: a verdict, or `None` to keep watching. A
    /// heartbeat moved when a disk holds another sequence than it held at
    /// first, or one past every first sequence; a disk that becomes
    /// unreadable is not movement (its failure is the mount's business).
    pub fn observe(&mut self, beats: &[Option<Beat>], now_ns: u64) -> Option<Activity> {
        for (i, beat) in beats.iter().enumerate() {
            let Some(beat) = beat else { continue };
            let was = self.first.get(i).copied().flatten();
            let moved = match was {
                Some(seq) => beat.sequence != seq,
                None => beat.sequence > self.newest_first,
            };
            if moved {
                return Some(Activity::Moved(beat.clone()));
            }
        }
        (now_ns >= self.until_ns).then(|| Activity::Still(self.owner.clone()))
    }
}

/// Read every disk's heartbeat (`disks`: disk number and device). A block
/// that cannot be read, is blank or fails its checks reads as `None`.
pub fn read_beats(
    engine: &mut dyn IoEngine,
    group: Uuid,
    disks: &[(u16, DeviceId)],
) -> Vec<Option<Beat>> {
    let requests = disks
        .iter()
        .enumerate()
        .map(|(i, (_, device))| Request {
            device: *device,
            tag: i as u64,
            op: Op::Read {
                offset_bytes: HEARTBEAT_OFFSET_BYTES,
                buf: AlignedBuf::zeroed(BLOCK_BYTES),
            },
        })
        .collect();
    let Ok(completions) = engine.execute_all(requests) else {
        return disks.iter().map(|_| None).collect();
    };
    let mut out = vec![None; disks.len()];
    for c in completions {
        let i = c.tag as usize;
        if let (Ok(_), Some(buf), Some((disk, _))) = (c.result, c.buf, disks.get(i)) {
            out[i] = decode_beat(&buf[..], group, *disk);
        }
    }
    out
}

fn decode_beat(block: &[u8], group: Uuid, disk: u16) -> Option<Beat> {
    let id = per_disk_id(BlockType::Heartbeat, disk, HEARTBEAT_OFFSET_BYTES);
    let sequence = meta::open(block, id, group).ok()?;
    let heartbeat = Heartbeat::decode(block).ok()?;
    Some(Beat {
        disk,
        sequence,
        heartbeat,
    })
}

fn sealed(group: Uuid, disk: u16, sequence: u64, heartbeat: &Heartbeat) -> AlignedBuf {
    let mut block = meta::empty_block();
    heartbeat.encode_into(&mut block);
    meta::seal(
        &mut block,
        per_disk_id(BlockType::Heartbeat, disk, HEARTBEAT_OFFSET_BYTES),
        group,
        sequence,
    );
    let mut buf = AlignedBuf::zeroed(BLOCK_BYTES);
    buf.copy_from_slice(&block[..]);
    buf
}

/// The members among `devices` (disk number, device), by the newest
/// superblock slot any of them holds: what the heartbeat is read from and
/// written to before the group is mounted.
pub fn members(
    engine: &mut dyn IoEngine,
    devices: &[DeviceId],
    group: Uuid,
) -> Vec<(u16, DeviceId)> {
    let found = super::slots::identify(engine, devices);
    let Some(disks) = found.get(&group) else {
        return Vec::new();
    };
    let mut best: Option<super::slots::SlotRead> = None;
    for (device, _, _) in disks {
        for base in cairn_format::group::SUPER_SLOT_OFFSETS_BYTES {
            if let Some(slot) = super::slots::read_slot(engine, *device, group, base) {
                if best.as_ref().is_none_or(|b| slot.generation > b.generation) {
                    best = Some(slot);
                }
            }
        }
    }
    let Some(best) = best else {
        return Vec::new();
    };
    disks
        .iter()
        .filter_map(|(device, header, _)| {
            best.entries
                .iter()
                .find(|e| e.disk_uuid == header.disk_uuid)
                .map(|e| (e.number, *device))
        })
        .collect()
}

/// A group claimed for this host: what the [`Beater`] goes on from.
#[derive(Debug, Clone)]
pub struct Claim {
    pub group: Uuid,
    pub name: String,
    pub me: HostIdentity,
    pub timing: Timing,
    /// The sequence of the claim written.
    pub sequence: u64,
    /// The host the group was taken from ([`Takeover::Force`]), described.
    pub taken_from: Option<String>,
    /// The members claimed: disk number, and device in the claiming
    /// engine (the metadata plane's).
    pub disks: Vec<(u16, DeviceId)>,
}

/// Claim group `group` (named `name` in messages) for host `me` before a
/// mount writes anything: read every member's heartbeat, refuse if another
/// host holds it (or, with [`Takeover::Force`], if its heartbeat moves while
/// watched), then write this host's active heartbeat to every member and
/// read it back. `clock` paces the watch; `now_unix_ms` is the wall clock
/// the heartbeats carry. Refusals are [`GroupError::Mount`], one line.
#[allow(clippy::too_many_arguments)]
pub fn claim(
    engine: &mut dyn IoEngine,
    group: Uuid,
    name: &str,
    disks: &[(u16, DeviceId)],
    me: &HostIdentity,
    timing: Timing,
    takeover: Takeover,
    clock: &dyn Clock,
    now_unix_ms: &dyn Fn() -> u64,
) -> Result<Claim, GroupError> {
    let mut beats = read_beats(engine, group, disks);
    let mut taken_from = None;
    if let Owner::Other(owner) = owner(me.id, &beats) {
        if takeover == Takeover::Refuse {
            let wait = owner.timing().fail_after_ns() * ACTIVITY_CHECK_FACTOR;
            return Err(GroupError::Mount(format!(
                "group {name} is mounted by {}; one host may write a group at a time: if that host is up, run the command there, and if it is down, `cairn group mount {name} --force` takes the group over once its heartbeat has been still for {} s (never while it beats)",
                owner.describe(now_unix_ms()),
                wait.div_ceil(1_000_000_000)
            )));
        }
        let mut check = ActivityCheck::start(owner, &beats, clock.now_ns());
        loop {
            clock.sleep_until_ns(check.next_read_ns(clock.now_ns()));
            beats = read_beats(engine, group, disks);
            match check.observe(&beats, clock.now_ns()) {
                None => {}
                Some(Activity::Moved(beat)) => {
                    return Err(GroupError::Mount(format!(
                        "group {name} is mounted by {}, and its heartbeat moved while this host watched: it still writes the group, so it cannot be taken over, --force or not; stop Cairn on that host first",
                        beat.describe(now_unix_ms())
                    )))
                }
                Some(Activity::Still(beat)) => {
                    taken_from = Some(beat.describe(now_unix_ms()));
                    break;
                }
            }
        }
    }
    let sequence = newest_sequence(&beats) + 1;
    let heartbeat = Heartbeat {
        host_id: me.id,
        host_name: me.name.clone(),
        pid: me.pid,
        written_unix_ms: now_unix_ms(),
        mount_generation: 0,
        interval_ms: timing.interval_ms,
        fail_intervals: timing.fail_intervals,
        state: HeartbeatState::Active,
    };
    let requests = disks
        .iter()
        .map(|(disk, device)| Request {
            device: *device,
            tag: u64::from(*disk),
            op: Op::Write {
                offset_bytes: HEARTBEAT_OFFSET_BYTES,
                buf: sealed(group, *disk, sequence, &heartbeat),
                fua: false,
            },
        })
        .collect();
    let written = engine
        .execute_all(requests)
        .map(|c| c.iter().filter(|c| c.result.is_ok()).count())
        .unwrap_or(0);
    if written == 0 && !disks.is_empty() {
        return Err(GroupError::Mount(format!(
            "group {name}: this host's heartbeat could not be written to any of its disks, so other hosts could not see that it writes the group; check the disks"
        )));
    }
    // Another host that claimed in between wrote past our sequence on
    // some disk: it has the group.
    let after = read_beats(engine, group, disks);
    if let Some(other) = after
        .iter()
        .flatten()
        .find(|b| b.heartbeat.host_id != me.id && b.sequence >= sequence)
    {
        return Err(GroupError::Mount(format!(
            "group {name} was claimed at the same moment by {}; mount it again once that host lets go",
            other.describe(now_unix_ms())
        )));
    }
    Ok(Claim {
        group,
        name: name.to_string(),
        me: me.clone(),
        timing,
        sequence,
        taken_from,
        disks: disks.to_vec(),
    })
}

/// What the group and the beater share. Leaf locks, each held only to look
/// or change.
#[derive(Default)]
struct Shared {
    /// Why the heartbeat stopped the group (taken over, or no heartbeat
    /// landed for the timeout); set once, never cleared. Written by the
    /// beater, read by the metadata plane.
    stopped: Mutex<Option<String>>,
    /// The mounted group's data plane and the superblock generation its
    /// mount wrote, once the mount is done ([`Link::attach`]); until then
    /// the beater beats the claimed disks. Set once, by the mounting
    /// thread; read by the beater at each beat.
    mounted: Mutex<Option<(Arc<DataPlane>, u64)>>,
    /// Disks whose heartbeat write failed or did not complete: added to by
    /// the beater, taken by the metadata plane at its next commit.
    failed: Mutex<BTreeSet<u16>>,
}

impl Shared {
    fn mounted(&self) -> Option<(Arc<DataPlane>, u64)> {
        self.mounted.lock_or_recover().clone()
    }

    fn stopped(&self) -> Option<String> {
        self.stopped.lock_or_recover().clone()
    }
}

/// Writes one group's heartbeat, a beat at a time ([`Beater::beat`]), on an
/// engine of its own: from the claim on (a long mount must not look like a
/// dead owner), on the claimed disks until the mount is done, then on the
/// disks the data plane's view says are written. Owned by one thread (its
/// [`start`]ed thread, or a simulator's driver).
pub struct Beater {
    claim: Claim,
    source: Arc<dyn EngineSource>,
    /// The engine, the devices in it by disk number, and what it was made
    /// from (disk number → device in the metadata plane's engine).
    engine: Option<Box<dyn IoEngine>>,
    devices: BTreeMap<u16, DeviceId>,
    made_from: BTreeMap<u16, DeviceId>,
    /// Requests submitted and not yet completed, by tag: disk, whether a
    /// write, and when it was submitted. A disk with one is not beaten
    /// again until it completes; one outstanding for the timeout is a hung
    /// disk, reported once.
    pending: BTreeMap<u64, (u16, bool, u64)>,
    hung_reported: BTreeSet<u64>,
    /// The time of the beat under way (this host's monotonic clock).
    beat_ns: u64,
    next_tag: u64,
    /// The last sequence this host wrote.
    sequence: u64,
    /// When (this host's monotonic clock) a heartbeat last landed.
    landed_ns: u64,
    shared: Arc<Shared>,
}

/// What a beat did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BeatReport {
    /// Disks the heartbeat landed on.
    pub landed: Vec<u16>,
    /// Disks whose heartbeat read or write failed, or has hung for the
    /// timeout.
    pub failed: Vec<u16>,
    /// Set when this beat stopped the group, and why.
    pub stopped: Option<String>,
}

impl Beater {
    /// A beater for `claim`, starting at `now_ns` (the claim just landed).
    /// `source` makes its engines from disk numbers and the claiming
    /// engine's device ids (which are the metadata plane's).
    pub fn new(claim: Claim, source: Arc<dyn EngineSource>, now_ns: u64) -> Self {
        Self {
            sequence: claim.sequence,
            claim,
            source,
            engine: None,
            devices: BTreeMap::new(),
            made_from: BTreeMap::new(),
            pending: BTreeMap::new(),
            hung_reported: BTreeSet::new(),
            beat_ns: now_ns,
            next_tag: 0,
            landed_ns: now_ns,
            shared: Arc::default(),
        }
    }

    /// The group's side of this beater (without a thread: a simulator
    /// drives the beats).
    pub fn link(&self) -> Link {
        Link {
            shared: self.shared.clone(),
            running: None,
        }
    }

    /// Why the heartbeat stopped the group, if it did.
    pub fn stopped(&self) -> Option<String> {
        self.shared.stopped()
    }

    fn stop(&self, why: String) -> String {
        self.shared
            .stopped
            .lock_or_recover()
            .get_or_insert_with(|| why.clone());
        if let Some((plane, _)) = self.shared.mounted() {
            plane.stop(&why);
        }
        why
    }

    /// The disks to beat: written in the data plane's view, with a device;
    /// the claimed ones until the mount is done.
    fn wanted(&self) -> BTreeMap<u16, DeviceId> {
        let Some((plane, _)) = self.shared.mounted() else {
            return self.claim.disks.iter().copied().collect();
        };
        let view = plane.disks();
        view.member_devices()
            .into_iter()
            .filter(|(d, _)| view.writable.get(usize::from(*d)).copied().unwrap_or(false))
            .collect()
    }

    /// An engine over the wanted disks: made again when the set changed
    /// and nothing is in flight on the old one. Whether the engine is now
    /// over the wanted disks (false: the old one is kept, for its requests
    /// in flight or because no new one could be made).
    fn refresh_engine(&mut self) -> bool {
        let wanted = self.wanted();
        if self.engine.is_some() && (wanted == self.made_from || !self.pending.is_empty()) {
            return wanted == self.made_from;
        }
        // A source that cannot make an engine now may later; the old
        // engine's disks still get beats meanwhile.
        if let Ok((engine, devices)) = self.source.engine(&wanted, 2 * wanted.len().max(1)) {
            self.engine = Some(engine);
            self.devices = devices;
            self.made_from = wanted;
            return true;
        }
        false
    }

    /// Submit one request per `(disk, op)`; returns the tags.
    fn submit(&mut self, ops: Vec<(u16, Op)>) -> Vec<u64> {
        let Some(engine) = self.engine.as_mut() else {
            return Vec::new();
        };
        let mut tags = Vec::new();
        for (disk, op) in ops {
            let Some(device) = self.devices.get(&disk).copied() else {
                continue;
            };
            let tag = self.next_tag;
            self.next_tag += 1;
            let write = matches!(op, Op::Write { .. });
            if engine.submit(Request { device, tag, op }).is_ok() {
                self.pending.insert(tag, (disk, write, self.beat_ns));
                tags.push(tag);
            }
        }
        tags
    }

    /// Wait up to `budget` for `tags` to complete. Every completion popped
    /// meanwhile (late ones of earlier beats too) is returned, with its
    /// disk and whether it was a write.
    fn collect(&mut self, tags: &[u64], budget: Duration) -> Vec<Done> {
        let mut out = Vec::new();
        let Some(engine) = self.engine.as_mut() else {
            return out;
        };
        let started = std::time::Instant::now();
        loop {
            while let Some(c) = engine.pop_completion() {
                if let Some((disk, write, _)) = self.pending.remove(&c.tag) {
                    self.hung_reported.remove(&c.tag);
                    out.push(Done {
                        tag: c.tag,
                        disk,
                        write,
                        ok: c.result.is_ok(),
                        buf: c.buf,
                    });
                }
            }
            let missing = tags.iter().any(|t| self.pending.contains_key(t));
            let left = budget.saturating_sub(started.elapsed());
            if !missing || left.is_zero() || engine.in_flight() == 0 {
                return out;
            }
            if engine.wait_timeout(1, left).is_err() {
                return out;
            }
        }
    }

    fn heartbeat(&self, state: HeartbeatState, now_unix_ms: u64) -> Heartbeat {
        Heartbeat {
            host_id: self.claim.me.id,
            host_name: self.claim.me.name.clone(),
            pid: self.claim.me.pid,
            written_unix_ms: now_unix_ms,
            mount_generation: self.shared.mounted().map_or(0, |(_, g)| g),
            interval_ms: self.claim.timing.interval_ms,
            fail_intervals: self.claim.timing.fail_intervals,
            state,
        }
    }

    /// Write the next sequence with `state` to `disks`; the disks it
    /// landed on, and those where it failed or did not complete in
    /// `budget`. Late completions of earlier writes that failed count as
    /// failed too.
    fn write(
        &mut self,
        disks: &[u16],
        state: HeartbeatState,
        now_unix_ms: u64,
        fua: bool,
        budget: Duration,
    ) -> (Vec<u16>, BTreeSet<u16>) {
        let sequence = self.sequence + 1;
        let heartbeat = self.heartbeat(state, now_unix_ms);
        let writes = disks
            .iter()
            .map(|d| {
                (
                    *d,
                    Op::Write {
                        offset_bytes: HEARTBEAT_OFFSET_BYTES,
                        buf: sealed(self.claim.group, *d, sequence, &heartbeat),
                        fua,
                    },
                )
            })
            .collect();
        let tags = self.submit(writes);
        self.sequence = sequence;
        let mut landed = Vec::new();
        let mut failed = BTreeSet::new();
        for done in self.collect(&tags, budget) {
            if done.ok && tags.contains(&done.tag) {
                landed.push(done.disk);
            } else if !done.ok {
                failed.insert(done.disk);
            }
        }
        landed.sort_unstable();
        (landed, failed)
    }

    /// One beat at `now_ns` (this host's monotonic clock), writing
    /// `now_unix_ms`: read each wanted disk's block (another host's newer
    /// one means the group was taken over: stop), then write the next
    /// sequence to each disk read, each phase waiting at most half an
    /// interval. Stops the group when no heartbeat landed for the timeout.
    pub fn beat(&mut self, now_ns: u64, now_unix_ms: u64) -> BeatReport {
        let mut report = BeatReport::default();
        if self.stopped().is_some() {
            return report;
        }
        self.beat_ns = now_ns;
        self.refresh_engine();
        let budget = Duration::from_millis(u64::from(self.claim.timing.interval_ms) / 2);
        let busy: BTreeSet<u16> = self.pending.values().map(|(d, _, _)| *d).collect();
        let disks: Vec<u16> = self
            .made_from
            .keys()
            .copied()
            .filter(|d| !busy.contains(d))
            .collect();
        let reads = disks
            .iter()
            .map(|d| {
                (
                    *d,
                    Op::Read {
                        offset_bytes: HEARTBEAT_OFFSET_BYTES,
                        buf: AlignedBuf::zeroed(BLOCK_BYTES),
                    },
                )
            })
            .collect();
        let read_tags = self.submit(reads);
        let mut failed = BTreeSet::new();
        let mut readable = Vec::new();
        for done in self.collect(&read_tags, budget) {
            if !done.ok {
                failed.insert(done.disk);
                continue;
            }
            if done.write || !read_tags.contains(&done.tag) {
                continue;
            }
            let Some(buf) = done.buf else { continue };
            if let Some(other) = decode_beat(&buf[..], self.claim.group, done.disk) {
                if other.heartbeat.host_id != self.claim.me.id && other.sequence > self.sequence {
                    let why = format!(
                        "group {} was taken over by {}; this host stopped writing it",
                        self.claim.name,
                        other.describe(now_unix_ms)
                    );
                    report.stopped = Some(self.stop(why));
                    return report;
                }
            }
            readable.push(done.disk);
        }
        readable.sort_unstable();
        let (landed, write_failed) = self.write(
            &readable,
            HeartbeatState::Active,
            now_unix_ms,
            false,
            budget,
        );
        failed.extend(write_failed);
        // A request outstanding for the whole timeout: the disk hangs, and
        // that is its failure. (A slow one is only skipped until it
        // answers: a beat's budget is no I/O timeout.)
        let fail_after = self.claim.timing.fail_after_ns();
        for (tag, (disk, _, since)) in &self.pending {
            if now_ns.saturating_sub(*since) > fail_after && self.hung_reported.insert(*tag) {
                failed.insert(*disk);
            }
        }
        if !landed.is_empty() {
            self.landed_ns = now_ns;
        }
        report.landed = landed;
        report.failed = failed.iter().copied().collect();
        if !failed.is_empty() {
            self.shared.failed.lock_or_recover().extend(failed);
        }
        if now_ns.saturating_sub(self.landed_ns) > self.claim.timing.fail_after_ns() {
            let why = format!(
                "group {}: this host's heartbeat could not be written to any of its disks for {} s, so another host may take the group over; this host stopped writing it (mount it again once the disks answer)",
                self.claim.name,
                self.claim.timing.fail_after_ns().div_ceil(1_000_000_000)
            );
            report.stopped = Some(self.stop(why));
        }
        report
    }

    /// Let go: write a released heartbeat (FUA, so it outlives a power
    /// loss) to every wanted disk, so that the next mount, on any host,
    /// need not wait. Never after the heartbeat stopped the group (another
    /// host may hold it by then). Returns the disks it landed on.
    pub fn release(&mut self, now_unix_ms: u64) -> Vec<u16> {
        if self.stopped().is_some() {
            return Vec::new();
        }
        self.refresh_engine();
        let busy: BTreeSet<u16> = self.pending.values().map(|(d, _, _)| *d).collect();
        let disks: Vec<u16> = self
            .made_from
            .keys()
            .copied()
            .filter(|d| !busy.contains(d))
            .collect();
        let budget = Duration::from_millis(u64::from(self.claim.timing.interval_ms));
        self.write(&disks, HeartbeatState::Released, now_unix_ms, true, budget)
            .0
    }

    /// The last sequence this host wrote.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }
}

impl Drop for Beater {
    fn drop(&mut self) {
        // An engine with requests on a hung disk would wait for them as it
        // is dropped, for ever: it is leaked instead (its buffers stay
        // with it, so the kernel never writes freed memory).
        if !self.pending.is_empty() {
            if let Some(engine) = self.engine.take() {
                std::mem::forget(engine);
            }
        }
    }
}

/// A completion the beater popped.
struct Done {
    tag: u64,
    disk: u16,
    write: bool,
    ok: bool,
    buf: Option<AlignedBuf>,
}

/// The group's side of its heartbeat: whether it stopped the group, the
/// disks whose heartbeat failed, and (when [`start`]ed) the thread, which
/// is stopped, and the release written, when the link is dropped.
pub struct Link {
    shared: Arc<Shared>,
    running: Option<Running>,
}

impl Link {
    /// The group is mounted: from the next beat on, beat the disks its data
    /// plane writes, carry `mount_generation`, and stop the plane if the
    /// heartbeat stops (at once, if it already has).
    pub fn attach(&self, plane: Arc<DataPlane>, mount_generation: u64) {
        *self.shared.mounted.lock_or_recover() = Some((plane.clone(), mount_generation));
        if let Some(why) = self.stopped() {
            plane.stop(&why);
        }
    }

    /// Why the heartbeat stopped the group, if it did.
    pub fn stopped(&self) -> Option<String> {
        self.shared.stopped()
    }

    /// A way to make the beating thread let go of disks that left the
    /// group now rather than at its next beat (none without a thread).
    pub fn nudge(&self) -> Option<Nudge> {
        self.running.as_ref().map(|r| Nudge {
            control: r.control.clone(),
            interval: r.interval,
        })
    }

    /// Disks whose heartbeat write failed since the last call: failed disks
    /// for the metadata plane.
    pub fn take_failed(&self) -> BTreeSet<u16> {
        std::mem::take(&mut *self.shared.failed.lock_or_recover())
    }
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("stopped", &self.stopped())
            .field("thread", &self.running.is_some())
            .finish()
    }
}

struct Running {
    /// What the thread is asked to do (under its mutex, with the condition
    /// variable); a leaf lock.
    control: Arc<(Mutex<Control>, Condvar)>,
    /// The beats' interval.
    interval: Duration,
    thread: Option<std::thread::JoinHandle<Beater>>,
}

/// Asks to the beating thread. Changed under the mutex by the group's
/// side (stop; a refresh asked) and by the thread (a refresh done; stop
/// when the heartbeat stopped the group and the thread ends).
#[derive(Debug, Default)]
struct Control {
    stop: bool,
    /// Refreshes asked for, and how many of them the thread has seen to.
    refresh_asked: u64,
    refreshed: u64,
}

/// Asks the beating thread to make its engine again from the disks the
/// data plane writes now, and waits (bounded) until it has: a disk that
/// left the group is then no longer held open by the heartbeat (its lock
/// with it), so the command that dropped it returns with the disk free.
#[derive(Clone)]
pub struct Nudge {
    control: Arc<(Mutex<Control>, Condvar)>,
    /// The beats' interval: a beat takes at most that.
    interval: Duration,
}

impl Nudge {
    /// Ask, and wait up to two beat intervals: the thread may be mid-beat,
    /// waiting out its budget for a slow disk, and an engine with requests
    /// in flight is kept (its device cannot be closed under them) until
    /// the next beat has collected them. Past the bound the thread still
    /// lets go, at a later beat.
    pub fn refresh(&self) {
        let bound = 2 * self.interval;
        let (control, wake) = &*self.control;
        let mut c = control.lock_or_recover();
        c.refresh_asked += 1;
        let target = c.refresh_asked;
        wake.notify_all();
        let deadline = std::time::Instant::now() + bound;
        while c.refreshed < target && !c.stop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return;
            }
            c = recover(wake.wait_timeout(c, left)).0;
        }
    }
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Beat on a thread of its own, on this host's clocks, until the returned
/// link is dropped; then write the release.
pub fn start(mut beater: Beater) -> Result<Link, GroupError> {
    let shared = beater.shared.clone();
    let asked = Arc::new((Mutex::new(Control::default()), Condvar::new()));
    let clock = cairn_io::clock::Monotonic::new();
    // The claim landed just before: the timeout counts from now.
    beater.landed_ns = clock.now_ns();
    let interval = Duration::from_millis(u64::from(beater.claim.timing.interval_ms));
    let thread = {
        let asked = asked.clone();
        std::thread::Builder::new()
            .name(format!("heartbeat-{}", beater.claim.name))
            .spawn(move || {
                let (control, wake) = &*asked;
                let mut next = clock.now_ns();
                // A refresh that found requests in flight on the old engine
                // is tried again after the next beat (which collects them).
                let mut after_beat = false;
                loop {
                    {
                        let mut c = control.lock_or_recover();
                        loop {
                            if c.stop {
                                return beater;
                            }
                            if c.refreshed < c.refresh_asked && !after_beat {
                                // Not under the lock: making an engine
                                // opens devices.
                                let asked = c.refresh_asked;
                                drop(c);
                                let done = beater.refresh_engine();
                                c = control.lock_or_recover();
                                if done {
                                    c.refreshed = asked;
                                    wake.notify_all();
                                } else {
                                    after_beat = true;
                                }
                                continue;
                            }
                            let now = clock.now_ns();
                            if now >= next {
                                break;
                            }
                            c = recover(wake.wait_timeout(c, Duration::from_nanos(next - now))).0;
                        }
                    }
                    next = clock.now_ns() + interval.as_nanos() as u64;
                    let report = beater.beat(clock.now_ns(), unix_ms());
                    after_beat = false;
                    if report.stopped.is_some() {
                        // Nobody beats from now on: a nudge waits for
                        // nothing.
                        control.lock_or_recover().stop = true;
                        wake.notify_all();
                        return beater;
                    }
                }
            })
            .map_err(|e| GroupError::Invalid(format!("cannot start the heartbeat thread: {e}")))?
    };
    Ok(Link {
        shared,
        running: Some(Running {
            control: asked,
            interval,
            thread: Some(thread),
        }),
    })
}

impl Drop for Link {
    fn drop(&mut self) {
        let Some(running) = self.running.as_mut() else {
            return;
        };
        {
            let (control, wake) = &*running.control;
            control.lock_or_recover().stop = true;
            wake.notify_all();
        }
        if let Some(thread) = running.thread.take() {
            if let Ok(mut beater) = thread.join() {
                beater.release(unix_ms());
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn beat(disk: u16, sequence: u64, host: u128, state: HeartbeatState) -> Option<Beat> {
        Some(Beat {
            disk,
            sequence,
            heartbeat: Heartbeat {
                host_id: Uuid::from_u128(host),
                host_name: format!("h{host}"),
                pid: 1,
                written_unix_ms: 0,
                mount_generation: 1,
                interval_ms: 1000,
                fail_intervals: 10,
                state,
            },
        })
    }

    const ME: u128 = 1;
    const OTHER: u128 = 2;
    use HeartbeatState::{Active, Released};

    #[test]
    fn the_newest_heartbeat_says_who_holds_the_group() {
        let me = Uuid::from_u128(ME);
        assert_eq!(owner(me, &[None, None]), Owner::Free);
        // Another host's, newest: held.
        let beats = [beat(0, 5, OTHER, Active), beat(1, 4, ME, Active)];
        assert!(matches!(owner(me, &beats), Owner::Other(b) if b.sequence == 5));
        // Released after, on one disk only (the other missed it): free.
        let beats = [beat(0, 6, OTHER, Released), beat(1, 5, OTHER, Active)];
        assert_eq!(owner(me, &beats), Owner::Free);
        // This host's own, newest: free (its previous mount died).
        let beats = [beat(0, 7, ME, Active), beat(1, 6, OTHER, Active)];
        assert_eq!(owner(me, &beats), Owner::Free);
    }

    #[test]
    fn the_watch_ends_still_at_its_end_and_moved_at_the_first_change() {
        let first = [beat(0, 5, OTHER, Active), None, beat(2, 4, OTHER, Active)];
        let owner = first[0].clone().unwrap();
        let mut check = ActivityCheck::start(owner, &first, 0);
        assert_eq!(check.duration_ns(), 20_000_000_000);
        assert_eq!(check.next_read_ns(0), 1_000_000_000);
        // The same, a disk unreadable now, or one readable again with an
        // older sequence: not movement.
        let later = [beat(0, 5, OTHER, Active), beat(1, 3, OTHER, Active), None];
        assert_eq!(check.observe(&later, 19_999_999_999), None);
        assert!(matches!(
            check.observe(&later, 20_000_000_000),
            Some(Activity::Still(b)) if b.sequence == 5
        ));
        // One disk's sequence changed: moved.
        let mut check = ActivityCheck::start(first[0].clone().unwrap(), &first, 0);
        let later = [beat(0, 5, OTHER, Active), None, beat(2, 6, OTHER, Active)];
        assert!(matches!(
            check.observe(&later, 1),
            Some(Activity::Moved(b)) if b.disk == 2
        ));
        // A disk with nothing at first shows a sequence past all: moved.
        let mut check = ActivityCheck::start(first[0].clone().unwrap(), &first, 0);
        let later = [beat(0, 5, OTHER, Active), beat(1, 6, OTHER, Active), None];
        assert!(matches!(check.observe(&later, 1), Some(Activity::Moved(_))));
    }
}
