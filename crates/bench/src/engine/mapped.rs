//! An engine that presents a Cairn group file as one device.
//!
//! A group file's bytes live in extents on the member disks, one to three
//! copies each. For a benchmark of a file where Cairn keeps it, each worker's
//! own engine (its io_uring ring, or pread/pwrite) does the I/O straight to
//! the member disks, and this wrapper turns each request on the file into
//! pieces, as the group's own data path does:
//!
//! - a read goes to the primary copy of each piece it spans: into the
//!   caller's buffer when it is one piece, into a buffer per piece copied
//!   back otherwise;
//! - a write goes to every copy of each piece;
//! - a flush goes to every member disk the file has extents on.
//!
//! The caller's completion comes when the last piece's does. It fails if any
//! piece failed, a write included when it failed on one copy only: the group
//! would take that disk offline, which a benchmark holding the map cannot, so
//! it reports the error rather than let the copies differ unnoticed.
//!
//! Devices that are not group files pass through unchanged, so one worker can
//! drive both. The map must stay true for the whole run: the caller holds the
//! group's lock and keeps it unmounted ([`cairn_store::group::Group::map_file`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_io::engine::validate;
use cairn_io::{
    AlignedBuf, Completion, DeviceId, EngineStats, Geometry, IoEngine, IoError, Op, OpKind,
    Request, SubmitError,
};
use cairn_store::group::{FileMap, MapPiece};
use slab::Slab;

/// What one device of the wrapper is.
#[derive(Debug, Clone)]
pub enum Mapping {
    /// A device attached to the inner engine, passed through as it is.
    Direct(DeviceId),
    /// A group file: its map, and the inner engine's device for each member
    /// disk number the map uses.
    GroupFile {
        map: Arc<FileMap>,
        disks: BTreeMap<u16, DeviceId>,
        geometry: Geometry,
    },
}

/// One request of the caller, in flight as pieces.
struct Pending {
    device: DeviceId,
    tag: u64,
    kind: OpKind,
    /// The request's range on the caller's device, for its error.
    offset: u64,
    len: u64,
    outstanding: usize,
    /// The caller's buffer, once it is back (or kept here while pieces use
    /// their own buffers).
    buf: Option<AlignedBuf>,
    error: Option<IoError>,
}

/// One piece in the inner engine; its key there is the inner request's tag.
struct Piece {
    parent: usize,
    role: Role,
}

/// What becomes of a piece's buffer when it completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// It is the caller's buffer: hand it back.
    Caller,
    /// A read piece's own buffer: copy it into the caller's at this offset.
    CopyBack(usize),
    /// A write piece's copy of the data, or no buffer: drop it.
    Own,
}

/// See the module documentation.
pub struct MappedEngine {
    inner: Box<dyn IoEngine>,
    devices: Vec<Mapping>,
    depth_max: usize,
    pending: Slab<Pending>,
    pieces: Slab<Piece>,
    ready: VecDeque<Completion>,
    requests: u64,
    bytes_read: u64,
    bytes_written: u64,
}

/// What a request becomes in the inner engine, before it is submitted.
struct Planned {
    requests: Vec<(Request, Role)>,
    /// The caller's buffer when no inner request carries it.
    kept: Option<AlignedBuf>,
}

impl MappedEngine {
    /// Wrap `inner`, whose depth must allow for the fan-out (copies × the
    /// most pieces one request can span, per request). Device `i` of the
    /// wrapper is `devices[i]`.
    pub fn new(inner: Box<dyn IoEngine>, devices: Vec<Mapping>, depth_max: usize) -> Self {
        Self {
            inner,
            devices,
            depth_max: depth_max.max(1),
            pending: Slab::new(),
            pieces: Slab::new(),
            ready: VecDeque::new(),
            requests: 0,
            bytes_read: 0,
            bytes_written: 0,
        }
    }

    /// Inner requests one request of at most `max_len` bytes on a group
    /// file over `disks` member disks can become (a flush goes to each).
    pub fn fan_out(map: &FileMap, disks: usize, max_len: u64) -> usize {
        (map.copies_max() * map.pieces_max(max_len))
            .max(disks)
            .max(1)
    }

    /// The inner requests for a request on a group file, or why it fails.
    fn plan(
        pieces: &[MapPiece<'_>],
        disks: &BTreeMap<u16, DeviceId>,
        op: Op,
    ) -> Result<Planned, (Op, IoError)> {
        let disk = |d: u16| {
            disks
                .get(&d)
                .copied()
                .ok_or(IoError::Engine { errno: libc::ENXIO })
        };
        let mut requests = Vec::new();
        match op {
            Op::Flush => {
                for device in disks.values() {
                    requests.push((
                        Request {
                            device: *device,
                            tag: 0,
                            op: Op::Flush,
                        },
                        Role::Own,
                    ));
                }
                Ok(Planned {
                    requests,
                    kept: None,
                })
            }
            Op::Read { offset_bytes, buf } => {
                let mut places = Vec::with_capacity(pieces.len());
                for piece in pieces {
                    let Some((d, at)) = piece.on_copy(0) else {
                        return Err((Op::Read { offset_bytes, buf }, out_of_map(OpKind::Read)));
                    };
                    match disk(d) {
                        Ok(device) => places.push((device, at, piece.at, piece.len)),
                        Err(e) => return Err((Op::Read { offset_bytes, buf }, e)),
                    }
                }
                if let [(device, at, _, _)] = places[..] {
                    requests.push((
                        Request {
                            device,
                            tag: 0,
                            op: Op::Read {
                                offset_bytes: at,
                                buf,
                            },
                        },
                        Role::Caller,
                    ));
                    return Ok(Planned {
                        requests,
                        kept: None,
                    });
                }
                for (device, at, within, len) in places {
                    requests.push((
                        Request {
                            device,
                            tag: 0,
                            op: Op::Read {
                                offset_bytes: at,
                                buf: AlignedBuf::zeroed(len as usize),
                            },
                        },
                        Role::CopyBack(within as usize),
                    ));
                }
                Ok(Planned {
                    requests,
                    kept: Some(buf),
                })
            }
            Op::Write {
                offset_bytes,
                buf,
                fua,
            } => {
                let mut places = Vec::new();
                for piece in pieces {
                    for k in 0..piece.copies.len() {
                        let (d, at) = piece.on_copy(k).expect("invariant: k < copies");
                        match disk(d) {
                            Ok(device) => places.push((device, at, piece.at, piece.len)),
                            Err(e) => {
                                return Err((
                                    Op::Write {
                                        offset_bytes,
                                        buf,
                                        fua,
                                    },
                                    e,
                                ))
                            }
                        }
                    }
                }
                // The caller's buffer goes with the first piece when that
                // piece is the whole request; every other piece has a copy.
                let whole = pieces.len() == 1;
                let mut first = None;
                for (i, (device, at, within, len)) in places.iter().enumerate() {
                    if whole && i == 0 {
                        first = Some((*device, *at));
                        continue;
                    }
                    let from = *within as usize;
                    requests.push((
                        Request {
                            device: *device,
                            tag: 0,
                            op: Op::Write {
                                offset_bytes: *at,
                                buf: AlignedBuf::from_slice(&buf[from..from + *len as usize]),
                                fua,
                            },
                        },
                        Role::Own,
                    ));
                }
                let kept = match first {
                    Some((device, at)) => {
                        requests.push((
                            Request {
                                device,
                                tag: 0,
                                op: Op::Write {
                                    offset_bytes: at,
                                    buf,
                                    fua,
                                },
                            },
                            Role::Caller,
                        ));
                        None
                    }
                    None => Some(buf),
                };
                Ok(Planned { requests, kept })
            }
            Op::Discard { .. } | Op::WriteZeroes { .. } => {
                let discard = matches!(op, Op::Discard { .. });
                for piece in pieces {
                    for k in 0..piece.copies.len() {
                        let (d, at) = piece.on_copy(k).expect("invariant: k < copies");
                        let device = match disk(d) {
                            Ok(device) => device,
                            Err(e) => return Err((op, e)),
                        };
                        let op = if discard {
                            Op::Discard {
                                offset_bytes: at,
                                len_bytes: piece.len,
                            }
                        } else {
                            Op::WriteZeroes {
                                offset_bytes: at,
                                len_bytes: piece.len,
                            }
                        };
                        requests.push((Request { device, tag: 0, op }, Role::Own));
                    }
                }
                Ok(Planned {
                    requests,
                    kept: None,
                })
            }
        }
    }

    /// Move what the inner engine has finished into the caller's completions.
    fn reap(&mut self) {
        while let Some(c) = self.inner.pop_completion() {
            let Ok(key) = usize::try_from(c.tag) else {
                continue;
            };
            if !self.pieces.contains(key) {
                continue;
            }
            let piece = self.pieces.remove(key);
            let Some(parent) = self.pending.get_mut(piece.parent) else {
                continue;
            };
            if let Err(e) = c.result {
                parent.error.get_or_insert(e);
            }
            match (piece.role, c.buf) {
                (Role::Caller, Some(buf)) => parent.buf = Some(buf),
                (Role::CopyBack(at), Some(src)) if parent.error.is_none() => {
                    if let Some(dst) = parent.buf.as_mut() {
                        dst[at..at + src.len()].copy_from_slice(&src[..]);
                    }
                }
                _ => {}
            }
            parent.outstanding -= 1;
            if parent.outstanding == 0 {
                let done = self.pending.remove(piece.parent);
                self.finish(done);
            }
        }
    }

    fn finish(&mut self, done: Pending) {
        let result = match done.error {
            Some(e) => Err(at_request(e, done.kind, done.offset, done.len)),
            None => {
                match done.kind {
                    OpKind::Read => self.bytes_read += done.len,
                    OpKind::Write => self.bytes_written += done.len,
                    _ => {}
                }
                Ok(done.len)
            }
        };
        self.ready.push_back(Completion {
            device: done.device,
            tag: done.tag,
            kind: done.kind,
            result,
            buf: done.buf,
        });
    }

    /// Complete a request at once with an error.
    fn fail(&mut self, request: Request, error: IoError) {
        let (offset, len) = request.op.range();
        let error = at_request(error, request.op.kind(), offset, len);
        self.ready.push_back(Completion::failed(request, error));
    }
}

/// A piece's OS error names an offset on a member disk (or none); the caller
/// knows the request by its own range.
fn at_request(error: IoError, kind: OpKind, offset_bytes: u64, len_bytes: u64) -> IoError {
    match error {
        IoError::Os { errno, .. } => IoError::Os {
            kind,
            offset_bytes,
            len_bytes,
            errno,
        },
        other => other,
    }
}

fn out_of_map(kind: OpKind) -> IoError {
    // The geometry check passed, so the map is shorter than the file says:
    // nothing to do but fail the request.
    IoError::Os {
        kind,
        offset_bytes: 0,
        len_bytes: 0,
        errno: libc::EIO,
    }
}

impl IoEngine for MappedEngine {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn geometry(&self, device: DeviceId) -> Option<&Geometry> {
        match self.devices.get(device.0 as usize)? {
            Mapping::Direct(id) => self.inner.geometry(*id),
            Mapping::GroupFile { geometry, .. } => Some(geometry),
        }
    }

    fn submit(&mut self, request: Request) -> Result<(), SubmitError> {
        if self.in_flight() >= self.depth_max {
            return Err(SubmitError::QueueFull(request));
        }
        let Some(mapping) = self.devices.get(request.device.0 as usize) else {
            let device = request.device;
            self.requests += 1;
            self.fail(request, IoError::UnknownDevice(device));
            return Ok(());
        };
        // A group file's request is checked and split into pieces once:
        // how many inner requests it becomes (to refuse it whole rather than
        // half-submitted when the inner engine is full), then what they are.
        let split = match (mapping, &request.op) {
            (Mapping::Direct(_), _) | (Mapping::GroupFile { .. }, Op::Flush) => Ok(Vec::new()),
            (Mapping::GroupFile { map, geometry, .. }, op) => {
                validate(geometry, op).and_then(|()| {
                    let (offset, len) = op.range();
                    map.pieces(offset, len).ok_or_else(|| out_of_map(op.kind()))
                })
            }
        };
        let needed = match (mapping, &request.op, &split) {
            (Mapping::Direct(_), _, _) => 1,
            // An invalid request needs nothing: planning fails it with its error.
            (_, _, Err(_)) => 0,
            (Mapping::GroupFile { disks, .. }, Op::Flush, _) => disks.len(),
            // A read goes to one copy of each piece.
            (_, Op::Read { .. }, Ok(pieces)) => pieces.len(),
            (_, _, Ok(pieces)) => pieces.iter().map(|p| p.copies.len()).sum(),
        };
        if needed > self.inner.depth_max() {
            // Could never fit: fail it rather than refuse it forever.
            self.requests += 1;
            self.fail(request, IoError::Engine { errno: libc::E2BIG });
            return Ok(());
        }
        if self.inner.in_flight() + needed > self.inner.depth_max() {
            return Err(SubmitError::QueueFull(request));
        }
        let Request { device, tag, op } = request;
        let kind = op.kind();
        let (op_offset, len) = op.range();
        let planned = match mapping {
            Mapping::Direct(id) => Ok(Planned {
                requests: vec![(
                    Request {
                        device: *id,
                        tag: 0,
                        op,
                    },
                    Role::Caller,
                )],
                kept: None,
            }),
            Mapping::GroupFile { disks, .. } => match split {
                Err(e) => Err((op, e)),
                Ok(pieces) => Self::plan(&pieces, disks, op),
            },
        };
        self.requests += 1;
        let planned = match planned {
            Ok(planned) => planned,
            Err((op, e)) => {
                self.fail(Request { device, tag, op }, e);
                return Ok(());
            }
        };
        let offset = op_offset;
        let pending = Pending {
            device,
            tag,
            kind,
            offset,
            len,
            outstanding: planned.requests.len(),
            buf: planned.kept,
            error: None,
        };
        if planned.requests.is_empty() {
            // Nothing to do at the disks (a flush of a file with no extents).
            self.finish(pending);
            return Ok(());
        }
        let parent = self.pending.insert(pending);
        for (mut inner, role) in planned.requests {
            let key = self.pieces.insert(Piece { parent, role });
            inner.tag = key as u64;
            if let Err(SubmitError::QueueFull(inner)) = self.inner.submit(inner) {
                // Counted above, so this is the inner engine's own doing:
                // fail the piece rather than lose it.
                self.pieces.remove(key);
                let p = &mut self.pending[parent];
                p.error.get_or_insert(IoError::Engine {
                    errno: libc::EAGAIN,
                });
                if role == Role::Caller {
                    p.buf = inner_buf(inner.op);
                }
                p.outstanding -= 1;
                if p.outstanding == 0 {
                    let done = self.pending.remove(parent);
                    self.finish(done);
                }
            }
        }
        // Engines that complete during submit (pread/pwrite) have results now.
        self.reap();
        Ok(())
    }

    fn wait(&mut self, min_completions: usize) -> Result<(), IoError> {
        loop {
            self.reap();
            if self.ready.len() >= min_completions.min(self.in_flight()) {
                return Ok(());
            }
            self.inner.wait(1)?;
        }
    }

    fn wait_timeout(&mut self, min_completions: usize, timeout: Duration) -> Result<(), IoError> {
        let deadline = Instant::now() + timeout;
        loop {
            self.reap();
            if self.ready.len() >= min_completions.min(self.in_flight()) {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            self.inner.wait_timeout(1, left)?;
        }
    }

    fn pop_completion(&mut self) -> Option<Completion> {
        if self.ready.is_empty() {
            self.reap();
        }
        self.ready.pop_front()
    }

    fn in_flight(&self) -> usize {
        self.pending.len() + self.ready.len()
    }

    fn depth_max(&self) -> usize {
        self.depth_max
    }

    fn stats(&self) -> EngineStats {
        EngineStats {
            requests: self.requests,
            device_requests: self.inner.stats().device_requests,
            bytes_read: self.bytes_read,
            bytes_written: self.bytes_written,
        }
    }
}

fn inner_buf(op: Op) -> Option<AlignedBuf> {
    match op {
        Op::Read { buf, .. } | Op::Write { buf, .. } => Some(buf),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use cairn_io_sim::{geometry, SimEngine};
    use cairn_store::placement::{FileLayout, Striping};
    use rand_chacha::ChaCha8Rng;
    use rand_core::{Rng, SeedableRng};

    const MIB: u64 = 1 << 20;
    const SECTOR: u32 = 4096;

    /// An 8 MiB file of eight 1 MiB extents (one fine stripe set), mirrored over disks 0 and 1 at
    /// scattered AUs (the primary alternating), and the same map with the
    /// copies swapped, so that reading it reads the second copies.
    fn maps(striping: Striping) -> (FileMap, FileMap) {
        let aus = [
            (3, 7),
            (9, 2),
            (4, 11),
            (12, 5),
            (6, 1),
            (0, 10),
            (13, 14),
            (8, 15),
        ];
        let extents: Vec<Vec<(u16, u64)>> = aus
            .iter()
            .enumerate()
            .map(|(i, (a, b))| {
                let (p, s) = if i % 2 == 0 { (0, 1) } else { (1, 0) };
                vec![(p, a * MIB), (s, b * MIB)]
            })
            .collect();
        let swapped = extents
            .iter()
            .map(|c| c.iter().rev().copied().collect())
            .collect();
        let layout = FileLayout::new(MIB, striping);
        let size = 8 * MIB;
        let map = |extents| FileMap {
            size_bytes: size,
            layout,
            extents,
        };
        (map(extents), map(swapped))
    }

    /// A group file of `size_bytes` as one device.
    fn file_geometry(size_bytes: u64) -> Geometry {
        Geometry {
            size_bytes,
            logical_sector_bytes: SECTOR,
            physical_sector_bytes: SECTOR,
            max_transfer_bytes: 256 << 10,
            discard: cairn_io::geometry::DiscardSupport::Unsupported,
        }
    }

    fn engine(primary: FileMap, secondary: FileMap, lose: Option<u32>) -> MappedEngine {
        let mut sim = SimEngine::new(5, 256);
        let d0 = sim.add_disk(geometry(16 * MIB, SECTOR, SECTOR, 256 << 10));
        let d1 = sim.add_disk(geometry(16 * MIB, SECTOR, SECTOR, 256 << 10));
        if let Some(d) = lose {
            sim.lose_disk(DeviceId(d));
        }
        let geometry = file_geometry(primary.size_bytes);
        let disks: BTreeMap<u16, DeviceId> = [(0, d0), (1, d1)].into();
        let file = |map| Mapping::GroupFile {
            map: Arc::new(map),
            disks: disks.clone(),
            geometry: geometry.clone(),
        };
        MappedEngine::new(Box::new(sim), vec![file(primary), file(secondary)], 16)
    }

    fn io(engine: &mut MappedEngine, device: u32, op: Op) -> Completion {
        engine
            .execute(Request {
                device: DeviceId(device),
                tag: 42,
                op,
            })
            .unwrap()
    }

    fn read(engine: &mut MappedEngine, device: u32, offset: u64, len: u64) -> Vec<u8> {
        let c = io(
            engine,
            device,
            Op::Read {
                offset_bytes: offset,
                buf: AlignedBuf::zeroed(len as usize),
            },
        );
        assert_eq!(c.tag, 42);
        assert_eq!(c.result.unwrap(), len);
        c.buf.unwrap().to_vec()
    }

    #[test]
    fn writes_reach_every_copy_and_reads_return_them() {
        for striping in [Striping::Coarse, Striping::Fine] {
            let (primary, secondary) = maps(striping);
            let size = primary.size_bytes;
            let mut engine = engine(primary, secondary, None);
            let mut model = vec![0u8; size as usize];
            let mut rng = ChaCha8Rng::seed_from_u64(3);
            for _ in 0..60 {
                // Up to 2 MiB: crosses extents, and stripe units when fine.
                let len = (1 + rng.next_u64() % 512) * u64::from(SECTOR);
                let offset =
                    rng.next_u64() % ((size - len) / u64::from(SECTOR) + 1) * u64::from(SECTOR);
                let mut data = vec![0u8; len as usize];
                rng.fill_bytes(&mut data);
                let c = io(
                    &mut engine,
                    0,
                    Op::Write {
                        offset_bytes: offset,
                        buf: AlignedBuf::from_slice(&data),
                        fua: false,
                    },
                );
                assert_eq!(c.result.unwrap(), len);
                assert!(
                    c.buf.unwrap()[..] == data[..],
                    "the caller's buffer comes back"
                );
                model[offset as usize..(offset + len) as usize].copy_from_slice(&data);
            }
            assert!(
                read(&mut engine, 0, 0, size) == model,
                "{striping:?}: primary copies"
            );
            assert!(
                read(&mut engine, 1, 0, size) == model,
                "{striping:?}: second copies"
            );
            let stats = engine.stats();
            assert_eq!(stats.requests, 62);
            assert!(
                stats.device_requests > 2 * 60,
                "every write went to two copies"
            );
            assert_eq!(stats.bytes_read, 2 * size);
        }
    }

    #[test]
    fn a_flush_reaches_every_disk_and_bad_requests_fail_alone() {
        let (primary, secondary) = maps(Striping::Coarse);
        let size = primary.size_bytes;
        let mut engine = engine(primary, secondary, None);
        let before = engine.stats().device_requests;
        assert!(io(&mut engine, 0, Op::Flush).result.is_ok());
        assert_eq!(engine.stats().device_requests - before, 2);
        // Past the end, misaligned, an unknown device: errors, buffers back.
        for (device, offset, len) in [(0, size - 4096, 8192), (0, 512, 4096), (7, 0, 4096)] {
            let c = io(
                &mut engine,
                device,
                Op::Read {
                    offset_bytes: offset,
                    buf: AlignedBuf::zeroed(len),
                },
            );
            assert!(c.result.is_err(), "{device} {offset} {len}");
            assert_eq!(c.buf.unwrap().len(), len);
        }
        assert_eq!(engine.in_flight(), 0);
    }

    #[test]
    fn a_write_that_fails_on_one_copy_fails_and_reads_use_the_primary() {
        let (primary, secondary) = maps(Striping::Coarse);
        // Disk 1 is lost: extent 0's second copy and extent 1's primary.
        let mut engine = engine(primary, secondary, Some(1));
        let c = io(
            &mut engine,
            0,
            Op::Write {
                offset_bytes: 0,
                buf: AlignedBuf::zeroed(8192),
                fua: false,
            },
        );
        assert!(c.result.is_err(), "one copy of two failed");
        assert_eq!(c.buf.unwrap().len(), 8192);
        assert_eq!(read(&mut engine, 0, 0, 8192), vec![0u8; 8192]);
        let c = io(
            &mut engine,
            0,
            Op::Read {
                offset_bytes: MIB,
                buf: AlignedBuf::zeroed(8192),
            },
        );
        assert!(c.result.is_err(), "extent 1's primary is on the lost disk");
    }

    #[test]
    fn a_request_is_refused_whole_while_full_and_failed_when_it_never_fits() {
        let (primary, _) = maps(Striping::Coarse);
        let mut sim = SimEngine::new(5, 3);
        let d0 = sim.add_disk(geometry(16 * MIB, SECTOR, SECTOR, 256 << 10));
        let d1 = sim.add_disk(geometry(16 * MIB, SECTOR, SECTOR, 256 << 10));
        let geometry = file_geometry(primary.size_bytes);
        let mut engine = MappedEngine::new(
            Box::new(sim),
            vec![Mapping::GroupFile {
                map: Arc::new(primary),
                disks: [(0, d0), (1, d1)].into(),
                geometry,
            }],
            4,
        );
        let write = |tag, offset_bytes, len| Request {
            device: DeviceId(0),
            tag,
            op: Op::Write {
                offset_bytes,
                buf: AlignedBuf::zeroed(len),
                fua: false,
            },
        };
        // A mirrored write is two inner requests; the inner engine takes three.
        engine.submit(write(1, 0, 4096)).unwrap();
        let refused = engine.submit(write(2, 8192, 4096));
        assert!(matches!(refused, Err(SubmitError::QueueFull(_))));
        assert_eq!(
            engine.in_flight(),
            1,
            "nothing of the refused one is in flight"
        );
        assert_eq!(engine.stats().requests, 1);
        // A read goes to one copy: it fits beside the write.
        engine
            .submit(Request {
                device: DeviceId(0),
                tag: 9,
                op: Op::Read {
                    offset_bytes: 8192,
                    buf: AlignedBuf::zeroed(4096),
                },
            })
            .unwrap();
        engine.wait(2).unwrap();
        let mut tags: Vec<u64> = std::iter::from_fn(|| engine.pop_completion())
            .map(|c| c.tag)
            .collect();
        tags.sort_unstable();
        assert_eq!(tags, vec![1, 9]);
        // Across an extent boundary, mirrored: four inner requests, more than
        // the inner engine can ever hold. It fails instead of waiting forever.
        engine.submit(write(3, MIB - 4096, 8192)).unwrap();
        let c = engine.pop_completion().unwrap();
        assert_eq!(c.tag, 3);
        assert_eq!(c.result, Err(IoError::Engine { errno: libc::E2BIG }));
        assert_eq!(c.buf.unwrap().len(), 8192);
    }

    #[test]
    fn a_flush_of_a_file_with_no_disks_completes() {
        let map = FileMap {
            size_bytes: 0,
            layout: FileLayout::new(MIB, Striping::Coarse),
            extents: Vec::new(),
        };
        let sim = SimEngine::new(5, 4);
        let geometry = file_geometry(0);
        let mut engine = MappedEngine::new(
            Box::new(sim),
            vec![Mapping::GroupFile {
                map: Arc::new(map),
                disks: BTreeMap::new(),
                geometry,
            }],
            4,
        );
        assert!(io(&mut engine, 0, Op::Flush).result.is_ok());
    }
}
