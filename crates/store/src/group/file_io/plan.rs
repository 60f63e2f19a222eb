//! Planning a caller's request on a group file: its pieces, the copies
//! each goes to, the latches and guard it holds, and the slow paths it
//! takes instead (a first write into an unwritten extent, a file grown past
//! its map).

use std::sync::Arc;

use cairn_format::group::{au_mask, AuAddr};
use cairn_io::engine::validate;
use cairn_io::{AlignedBuf, IoError, Op, Request, SubmitError};

use super::{
    take_plan, FileIo, Mapping, Pending, Planned, Role, Writing, E2BIG, EIO, ENXIO, EOPNOTSUPP,
    EROFS,
};
use crate::group::data::{at, aus_touched, readable_copies_of, StaleMark};
use crate::group::plane::Hold;

impl FileIo {
    /// Plan a request on a group file. `Ok(None)`: it completed at once
    /// (refused, zeros, or a slow path).
    pub(super) fn plan_file(
        &mut self,
        index: usize,
        request: Request,
    ) -> Result<Option<Planned>, SubmitError> {
        let devices = self.devices.clone();
        let Mapping::GroupFile {
            group,
            number,
            disks,
            geometry,
        } = &devices[index]
        else {
            unreachable!("invariant: a group file")
        };
        let file = OnFile {
            index,
            key: self.group_keys[index],
            number: *number,
            plane: group.plane(),
            disks,
        };
        if let Err(e) = validate(geometry, &request.op) {
            self.requests += 1;
            self.fail(request, e);
            return Ok(None);
        }
        let Request { device, tag, op } = request;
        let kind = op.kind();
        let (offset, len) = op.range();
        let mut pending = Pending::new(device, tag, kind, offset, len);
        pending.file_device = Some(index);
        if let Op::Flush = op {
            // A group that keeps checksums: the log's records naming every
            // write that ended go first (through the synchronous path, with
            // nothing of ours in flight), so that this flush acknowledges
            // them with their checksums.
            if file.plane.sums_log().has_log() {
                let logged = self.drain().and_then(|()| {
                    self.slow_handle(index)?
                        .sync_log()
                        .map_err(|e| super::io_error(&e))
                });
                if let Err(e) = logged {
                    self.requests += 1;
                    self.fail(Request { device, tag, op }, e);
                    return Ok(None);
                }
            }
            return self.plan_flush(&file, pending);
        }
        if matches!(op, Op::Discard { .. } | Op::WriteZeroes { .. }) {
            self.requests += 1;
            self.fail(
                Request { device, tag, op },
                IoError::Engine { errno: EOPNOTSUPP },
            );
            return Ok(None);
        }
        if let Some(_why) = file.plane.stopped() {
            self.requests += 1;
            self.fail(Request { device, tag, op }, IoError::Engine { errno: EIO });
            return Ok(None);
        }
        // A write takes its extents' latches first (`Hold::Write`: shared,
        // but one at a time over the same bytes) — never waiting
        // for one while it holds others (its writes in flight): it drains
        // them first — then its guard, then the snapshot it uses, which
        // must be the one it latched.
        let latch = if matches!(op, Op::Write { .. }) {
            match self.latch_write(&file, offset, len) {
                Ok(latched) => Some(latched),
                Err(e) => {
                    self.requests += 1;
                    self.fail(Request { device, tag, op }, e);
                    return Ok(None);
                }
            }
        } else {
            None
        };
        self.plan_guarded(&file, Request { device, tag, op }, pending, latch)
    }

    /// A flush: one inner flush per member disk.
    #[inline]
    fn plan_flush(
        &mut self,
        file: &OnFile<'_>,
        mut pending: Pending,
    ) -> Result<Option<Planned>, SubmitError> {
        let (device, tag, op) = (pending.device, pending.tag, Op::Flush);
        let disks = file.disks;
        // One inner flush per member disk: more disks than the inner
        // engine can ever hold would be handed back as QueueFull for
        // ever, even on an idle engine. Fail it, as a read or write that
        // can never fit does.
        if disks.len() > self.inner.depth_max() {
            self.requests += 1;
            self.fail(
                Request { device, tag, op },
                IoError::Engine { errno: E2BIG },
            );
            return Ok(None);
        }
        if self.inner.in_flight() + disks.len() > self.inner.depth_max() {
            return Err(SubmitError::QueueFull(Request { device, tag, op }));
        }
        let requests = disks
            .iter()
            .map(|(disk, id)| {
                (
                    Request {
                        device: *id,
                        tag: 0,
                        op: Op::Flush,
                    },
                    Role::Flush { disk: *disk },
                )
            })
            .collect();
        pending.view_epoch = self.snapshots[file.key].disks(file.plane).epoch;
        pending.writing = Some(Box::default());
        Ok(Some(Planned { pending, requests }))
    }

    /// A write's holds on the latches of the extents of `offset..offset + len`,
    /// with the snapshot they were taken from; an error fails the write.
    #[inline]
    fn latch_write(
        &mut self,
        file: &OnFile<'_>,
        offset: u64,
        len: u64,
    ) -> Result<Latched, IoError> {
        let (number, plane) = (file.number, file.plane);
        let Some(pre) = self.snapshots[file.key].file(plane, number) else {
            return Err(IoError::Engine { errno: ENXIO });
        };
        let Some(pieces) = pre.pieces(offset, len) else {
            return Err(IoError::Engine { errno: EIO });
        };
        let keys: Vec<_> = pieces
            .iter()
            .map(|p| {
                (
                    (number, pre.incarnation, p.extent),
                    Hold::write(offset, len),
                )
            })
            .collect();
        let latch = match plane.try_latch(keys.clone()) {
            Some(latch) => latch,
            None => {
                self.drain()?;
                plane.latch(keys)
            }
        };
        Ok((latch, pre))
    }

    /// Plan a read or write under its guard: the snapshot it uses, the
    /// copies each piece goes to, and its inner requests — or the slow path.
    #[inline]
    fn plan_guarded(
        &mut self,
        file: &OnFile<'_>,
        request: Request,
        mut pending: Pending,
        latch: Option<Latched>,
    ) -> Result<Option<Planned>, SubmitError> {
        let Request { device, tag, op } = request;
        let (index, key, disks) = (file.index, file.key, file.disks);
        let (offset, len) = (pending.offset, pending.len);
        let epoch = self.guard_start(index);
        let view = self.snapshots[key].disks(file.plane);
        let refuse = |me: &mut Self, op: Op, error: IoError| {
            me.guard_end(index, epoch);
            me.requests += 1;
            me.fail(Request { device, tag, op }, error);
            Ok(None)
        };
        let Some(snap) = self.snapshots[key].file(file.plane, file.number) else {
            return refuse(self, op, IoError::Engine { errno: ENXIO });
        };
        let latch = match latch {
            Some((latch, pre)) if Arc::ptr_eq(&pre, &snap) => Some(latch),
            Some((latch, _)) => {
                // The file changed between the latch and the guard: plan
                // again from what it is now.
                drop(latch);
                self.guard_end(index, epoch);
                return self.plan_file(index, Request { device, tag, op });
            }
            None => None,
        };
        let Some(pieces) = snap.pieces(offset, len) else {
            return refuse(self, op, IoError::Engine { errno: EIO });
        };
        let is_write = matches!(op, Op::Write { .. });
        if is_write && snap.read_only.is_some() {
            return refuse(self, op, IoError::Engine { errno: EIO });
        }
        // A group mounted read-only: its fast path must not write either.
        if is_write && self.read_only[index] {
            return refuse(self, op, IoError::Engine { errno: EROFS });
        }
        let Some((copies, fresh)) = copies_of(&snap, &view, &pieces, is_write) else {
            return refuse(self, op, IoError::Engine { errno: EIO });
        };
        // A file with a checksum map: its checksums change with the bytes,
        // in the synchronous path (`docs/checksums.md`).
        if is_write && (fresh || snap.has_map) {
            // The first write into an extent (or one with a copy not
            // ONLINE), or a write of a file with checksums: the synchronous
            // path, which may take the extent's latch exclusively — so let
            // ours go first.
            drop(latch);
            self.guard_end(index, epoch);
            self.requests += 1;
            self.slow_write(index, Request { device, tag, op })?;
            return Ok(None);
        }
        let needed = match self.inner_needed(disks, &copies, is_write) {
            Ok(needed) => needed,
            Err(error) => return refuse(self, op, error),
        };
        if self.inner.in_flight() + needed > self.inner.depth_max() {
            self.guard_end(index, epoch);
            return Err(SubmitError::QueueFull(Request { device, tag, op }));
        }
        pending.epoch = Some(epoch);
        pending.view_epoch = view.epoch;
        let mut requests = Vec::with_capacity(needed);
        let placed = Placed {
            disks,
            snap: &snap,
            pieces: &pieces,
            copies: &copies,
        };
        match op {
            Op::Read { buf, .. } => {
                pending.buf = placed.read_requests(buf, &mut requests);
                pending.read_from = Some(take_plan(
                    &mut self.plans,
                    &mut self.newest_plan[index],
                    &snap,
                    &view,
                ));
            }
            Op::Write { buf, fua, .. } => {
                pending.writing = Some(Box::new(Writing {
                    latch,
                    incarnation: snap.incarnation,
                    landed: vec![0; pieces.len()],
                    ..Writing::default()
                }));
                pending.buf = placed.write_requests(buf, fua, &mut requests);
            }
            Op::Flush | Op::Discard { .. } | Op::WriteZeroes { .. } => {
                unreachable!("invariant: handled above")
            }
        }
        Ok(Some(Planned { pending, requests }))
    }

    /// How many inner requests a read or write to `copies` takes, or why it
    /// is refused.
    #[inline]
    fn inner_needed(
        &self,
        disks: &std::collections::BTreeMap<u16, cairn_io::DeviceId>,
        copies: &[Vec<AuAddr>],
        is_write: bool,
    ) -> Result<usize, IoError> {
        // Every copy's disk must be attached to this engine: a file grown
        // onto a disk this engine was not given fails, it does not panic.
        if copies
            .iter()
            .flatten()
            .any(|c| !disks.contains_key(&c.disk))
        {
            return Err(IoError::Engine { errno: ENXIO });
        }
        let needed: usize = if is_write {
            copies.iter().map(Vec::len).sum()
        } else {
            copies.iter().filter(|c| !c.is_empty()).count()
        };
        if needed > self.inner.depth_max() {
            return Err(IoError::Engine { errno: E2BIG });
        }
        Ok(needed)
    }
}

/// A write's latch holds, with the snapshot they were taken from.
type Latched = (
    crate::group::plane::LatchGuard,
    Arc<crate::group::plane::FileSnapshot>,
);

/// The group file a request is planned on: its index among the devices,
/// its group's key, its number, its group's data plane, and the inner
/// engine's device for each member disk.
struct OnFile<'a> {
    index: usize,
    key: usize,
    number: u32,
    plane: &'a Arc<crate::group::plane::DataPlane>,
    disks: &'a std::collections::BTreeMap<u16, cairn_io::DeviceId>,
}

/// A request's pieces, and the copies each goes to.
struct Placed<'a> {
    disks: &'a std::collections::BTreeMap<u16, cairn_io::DeviceId>,
    snap: &'a Arc<crate::group::plane::FileSnapshot>,
    pieces: &'a [crate::group::plane::Piece],
    copies: &'a [Vec<AuAddr>],
}

/// The copies each piece goes to: a write to every ONLINE copy, a read to
/// the readable ones; none for a piece of an extent never written. With
/// whether the request must take the slow path (an extent never written,
/// or, for a write, a copy not ONLINE). `None`: a piece of a written extent
/// has no copy to read.
#[inline]
fn copies_of(
    snap: &crate::group::plane::FileSnapshot,
    view: &crate::group::plane::DiskView,
    pieces: &[crate::group::plane::Piece],
    is_write: bool,
) -> Option<(Vec<Vec<AuAddr>>, bool)> {
    let mut copies: Vec<Vec<AuAddr>> = Vec::with_capacity(pieces.len());
    let mut fresh = false;
    for p in pieces {
        let extent = snap
            .extent(p.extent)
            .expect("invariant: pieces are in the map");
        fresh |= !extent.initialized;
        // A write with a copy on a disk that is not ONLINE (it is
        // SYNCING, or offline and its copy must be marked stale first)
        // takes the synchronous path, as a first write does.
        fresh |= is_write && extent.copies().iter().any(|c| !view.is_online(c.disk));
        let online: Vec<AuAddr> = if is_write {
            extent
                .copies()
                .iter()
                .filter(|c| view.is_online(c.disk))
                .copied()
                .collect()
        } else {
            let aus = aus_touched(snap.au_bytes, p.within, p.len);
            readable_copies_of(view, extent, aus).collect()
        };
        // (A write whose copies are not all ONLINE takes the
        // synchronous path below, which marks or fails as it must.)
        if extent.initialized && online.is_empty() && !is_write {
            return None;
        }
        copies.push(if extent.initialized {
            online
        } else {
            Vec::new()
        });
    }
    Some((copies, fresh))
}

impl Placed<'_> {
    /// A read's inner requests: each piece from its first copy (a piece of an
    /// extent never written is zeros), into the caller's buffer when the read is
    /// one piece. Returns the caller's buffer when the pieces are read into
    /// their own.
    #[inline]
    fn read_requests(
        &self,
        mut buf: AlignedBuf,
        requests: &mut Vec<(Request, Role)>,
    ) -> Option<AlignedBuf> {
        let (disks, snap, pieces, copies) = (self.disks, self.snap, self.pieces, self.copies);
        let single = pieces.len() == 1 && !copies[0].is_empty();
        for (i, p) in pieces.iter().enumerate() {
            if copies[i].is_empty() {
                buf[p.at..p.at + p.len as usize].fill(0);
            }
        }
        if single {
            let c = copies[0][0];
            requests.push((
                Request {
                    device: disks[&c.disk],
                    tag: 0,
                    op: Op::Read {
                        offset_bytes: at(snap, c, pieces[0].within),
                        buf,
                    },
                },
                Role::ReadPiece {
                    piece: 0,
                    copy: 0,
                    at: 0,
                    caller: true,
                },
            ));
            return None;
        }
        for (i, p) in pieces.iter().enumerate() {
            let Some(c) = copies[i].first() else { continue };
            requests.push((
                Request {
                    device: disks[&c.disk],
                    tag: 0,
                    op: Op::Read {
                        offset_bytes: at(snap, *c, p.within),
                        buf: AlignedBuf::zeroed(p.len as usize),
                    },
                },
                Role::ReadPiece {
                    piece: i,
                    copy: 0,
                    at: p.at,
                    caller: false,
                },
            ));
        }
        Some(buf)
    }

    /// A write's inner requests: each piece to each of its copies, the last
    /// from the caller's own buffer when the write is one piece, the others
    /// from copies of it. Returns the caller's buffer if no request took it.
    #[inline]
    fn write_requests(
        &self,
        buf: AlignedBuf,
        fua: bool,
        requests: &mut Vec<(Request, Role)>,
    ) -> Option<AlignedBuf> {
        let (disks, snap, pieces, copies) = (self.disks, self.snap, self.pieces, self.copies);
        let whole = pieces.len() == 1;
        let mut caller_buf = Some(buf);
        let mut data_requests = Vec::new();
        for (i, p) in pieces.iter().enumerate() {
            for c in &copies[i] {
                data_requests.push((i, *c, at(snap, *c, p.within), p.at, p.len));
            }
        }
        let last = data_requests.len().saturating_sub(1);
        for (k, (i, c, offset_bytes, from, plen)) in data_requests.into_iter().enumerate() {
            let (buf, caller) = if whole && k == last {
                (caller_buf.take().expect("invariant: used once"), true)
            } else {
                let src = caller_buf.as_ref().expect("invariant: kept until last");
                (
                    AlignedBuf::from_slice(&src[from..from + plen as usize]),
                    false,
                )
            };
            requests.push((
                Request {
                    device: disks[&c.disk],
                    tag: 0,
                    op: Op::Write {
                        offset_bytes,
                        buf,
                        fua,
                    },
                },
                Role::WriteCopy {
                    piece: i,
                    disk: c.disk,
                    caller,
                    mark: StaleMark {
                        extent: pieces[i].extent,
                        copy: c,
                        mask: au_mask(aus_touched(snap.au_bytes, pieces[i].within, pieces[i].len)),
                    },
                },
            ));
        }
        caller_buf
    }
}
