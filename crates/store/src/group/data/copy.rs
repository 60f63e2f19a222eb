//! Copies between member disks (resync, relocation, rebalance): reads and
//! writes overlapped, a window of I/Os in flight, each source disk kept busy.

use std::collections::BTreeMap;

use cairn_io::{AlignedBuf, Op, Request};

use super::common::{outcome, DataPort};
use crate::group::error::{io_err, GroupError};

/// One piece of a copy between member disks: `len` bytes read from disk
/// `from.0` at byte `from.1` and written to disk `to.0` at byte `to.1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::group) struct CopyIo {
    pub(in crate::group) from: (u16, u64),
    pub(in crate::group) to: (u16, u64),
    pub(in crate::group) len: u64,
}

/// What became of one [`CopyIo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::group) enum Copied {
    /// Read and written (the write recorded with [`DataPort::wrote`]).
    Done,
    /// The read failed or came back short: nothing was written.
    ReadFailed,
    /// The write failed.
    WriteFailed,
}

/// Copy `pieces`, with at most `inflight` I/Os (and no more than the
/// engine holds) in flight at once. A piece's write is submitted as soon as
/// its read completes, so reads and writes overlap; the next read is taken
/// from the source disk with the fewest I/Os in flight, so that every disk
/// stays busy whatever order the pieces come in. Buffers come from `pool`
/// (else from the port) and go back to it: a copy of any size holds at most
/// `inflight` of them. The engine must be idle; it is again on return.
pub(in crate::group) fn copy(
    port: &mut dyn DataPort,
    pieces: &[CopyIo],
    inflight: usize,
    pool: &mut Vec<AlignedBuf>,
) -> Result<Vec<Copied>, GroupError> {
    let mut copying = Copying::new(port, pieces, inflight);
    while copying.left > 0 {
        let full = copying.submit_ready(port);
        copying.read_more(port, pool, full);
        if copying.left == 0 {
            break;
        }
        if port.engine().in_flight() == 0 {
            return Err(GroupError::Invalid(
                "the I/O engine refused a request while idle; this is a bug".into(),
            ));
        }
        port.engine().wait(1).map_err(io_err("(engine)"))?;
        copying.reap(port, pool);
    }
    Ok(copying
        .out
        .into_iter()
        .map(|o| o.expect("invariant: every piece has an outcome"))
        .collect())
}

/// A [`copy`] under way.
struct Copying<'p> {
    pieces: &'p [CopyIo],
    out: Vec<Option<Copied>>,
    /// Pieces not read yet, per source disk, in the order given.
    waiting: BTreeMap<u16, std::collections::VecDeque<usize>>,
    /// Requests made and not yet accepted by the engine (writes whose read
    /// is done, or a request it refused as full): submitted before any new
    /// read.
    ready: std::collections::VecDeque<Request>,
    /// I/Os made and not completed, per disk and in all (ready ones count).
    busy: BTreeMap<u16, usize>,
    running: usize,
    limit: usize,
    /// Pieces without an outcome yet.
    left: usize,
}

impl<'p> Copying<'p> {
    fn new(port: &mut dyn DataPort, pieces: &'p [CopyIo], inflight: usize) -> Self {
        let mut waiting: BTreeMap<u16, std::collections::VecDeque<usize>> = BTreeMap::new();
        for (i, p) in pieces.iter().enumerate() {
            waiting.entry(p.from.0).or_default().push_back(i);
        }
        Self {
            pieces,
            out: vec![None; pieces.len()],
            waiting,
            ready: std::collections::VecDeque::new(),
            busy: BTreeMap::new(),
            running: 0,
            limit: inflight.max(1).min(port.engine().depth_max().max(1)),
            left: pieces.len(),
        }
    }

    /// Submit the requests ready; `true` if the engine is full.
    fn submit_ready(&mut self, port: &mut dyn DataPort) -> bool {
        while let Some(r) = self.ready.pop_front() {
            if let Err(cairn_io::SubmitError::QueueFull(r)) = port.engine().submit(r) {
                self.ready.push_front(r);
                return true;
            }
        }
        false
    }

    /// Read more pieces while the window has room (and the engine, unless
    /// `full`), each from the source disk with the fewest I/Os in flight.
    fn read_more(&mut self, port: &mut dyn DataPort, pool: &mut Vec<AlignedBuf>, mut full: bool) {
        while !full && self.running < self.limit {
            let Some(disk) = self
                .waiting
                .iter()
                .filter(|(_, q)| !q.is_empty())
                .min_by_key(|(d, _)| self.busy.get(*d).copied().unwrap_or(0))
                .map(|(d, _)| *d)
            else {
                break;
            };
            let Some(i) = self
                .waiting
                .get_mut(&disk)
                .and_then(std::collections::VecDeque::pop_front)
            else {
                break;
            };
            let p = self.pieces[i];
            let Some(device) = port.device(p.from.0) else {
                self.out[i] = Some(Copied::ReadFailed);
                self.left -= 1;
                continue;
            };
            let request = Request {
                device,
                tag: (i as u64) << 1,
                op: Op::Read {
                    offset_bytes: p.from.1,
                    buf: copy_buffer(port, pool, p.len as usize),
                },
            };
            *self.busy.entry(p.from.0).or_default() += 1;
            self.running += 1;
            if let Err(cairn_io::SubmitError::QueueFull(r)) = port.engine().submit(request) {
                self.ready.push_back(r);
                full = true;
            }
        }
    }

    /// Take the engine's completions: a read done makes its write ready, a
    /// write done (or a read or write failed) is the piece's outcome.
    fn reap(&mut self, port: &mut dyn DataPort, pool: &mut Vec<AlignedBuf>) {
        while let Some(c) = port.engine().pop_completion() {
            let i = (c.tag >> 1) as usize;
            let p = self.pieces[i];
            let write = c.tag & 1 == 1;
            if let Some(n) = self.busy.get_mut(if write { &p.to.0 } else { &p.from.0 }) {
                *n = n.saturating_sub(1);
            }
            if write {
                self.running -= 1;
                self.left -= 1;
                self.out[i] = Some(if c.result.is_ok() {
                    port.wrote(p.to.0);
                    Copied::Done
                } else {
                    Copied::WriteFailed
                });
                pool.extend(c.buf);
                continue;
            }
            match (outcome(c, Some((p.from.1, p.len))), port.device(p.to.0)) {
                ((Ok(_), Some(buf)), Some(device)) => {
                    // The read's place in the window passes to its write.
                    *self.busy.entry(p.to.0).or_default() += 1;
                    self.ready.push_back(Request {
                        device,
                        tag: ((i as u64) << 1) | 1,
                        op: Op::Write {
                            offset_bytes: p.to.1,
                            buf,
                            fua: false,
                        },
                    });
                }
                ((result, buf), _) => {
                    self.running -= 1;
                    self.left -= 1;
                    self.out[i] = Some(match (result, &buf) {
                        (Ok(_), Some(_)) => Copied::WriteFailed,
                        _ => Copied::ReadFailed,
                    });
                    pool.extend(buf);
                }
            }
        }
    }
}

/// A buffer of `len` bytes from `pool`, else from the port.
fn copy_buffer(port: &mut dyn DataPort, pool: &mut Vec<AlignedBuf>, len: usize) -> AlignedBuf {
    match pool.pop() {
        Some(mut b) if b.capacity() >= len => {
            b.set_len(len);
            b
        }
        _ => port.buffer(len),
    }
}
