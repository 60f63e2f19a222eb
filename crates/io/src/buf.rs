//! Owned, aligned I/O buffers.
//!
//! A request owns its buffer from submission until its completion hands it back,
//! so no backend ever sees memory the caller could touch meanwhile. Every buffer
//! is aligned to [`BUF_ALIGN_BYTES`], which satisfies O_DIRECT on any device with
//! a logical sector of at most 4 KiB and the page alignment some drivers want.

use std::alloc::{self, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Alignment of every buffer's start, in bytes.
pub const BUF_ALIGN_BYTES: usize = 4096;

/// A heap buffer aligned to [`BUF_ALIGN_BYTES`], zero-filled at creation.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    layout: Layout,
}

// SAFETY: AlignedBuf uniquely owns its allocation (like Vec<u8>); moving it to
// another thread moves that ownership.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only give out &[u8].
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes. Panics only if the allocator fails, as Vec does.
    pub fn zeroed(len: usize) -> Self {
        // A zero-length buffer still gets one aligned block, so the pointer is
        // always a real allocation.
        let layout = Layout::from_size_align(len.max(BUF_ALIGN_BYTES), BUF_ALIGN_BYTES)
            .expect("invariant: buffer size below isize::MAX");
        // SAFETY: layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        Self { ptr, len, layout }
    }

    /// A buffer holding a copy of `bytes`.
    pub fn from_slice(bytes: &[u8]) -> Self {
        let mut buf = Self::zeroed(bytes.len());
        buf.copy_from_slice(bytes);
        buf
    }

    /// Bytes the allocation holds (at least `len`).
    pub fn capacity(&self) -> usize {
        self.layout.size()
    }

    /// Change the length to `len`, at most [`AlignedBuf::capacity`], keeping the
    /// bytes: one buffer then serves requests of several sizes (a workload with a
    /// transfer-size distribution) without reallocating.
    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.capacity(), "invariant: length within capacity");
        self.len = len;
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised (zeroed at allocation) bytes
        // and uniquely owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated with exactly this layout and is freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_zeroed_and_writable() {
        for len in [0, 1, 512, 4096, 4097, 1 << 20] {
            let mut buf = AlignedBuf::zeroed(len);
            assert_eq!(buf.as_ptr() as usize % BUF_ALIGN_BYTES, 0);
            assert_eq!(buf.len(), len);
            assert!(buf.iter().all(|b| *b == 0));
            buf.fill(0xAB);
            assert!(buf.iter().all(|b| *b == 0xAB));
        }
        assert_eq!(&*AlignedBuf::from_slice(b"abc"), b"abc");
    }
}
