//! The block-device ioctls Cairn uses, as safe functions on a descriptor.
//!
//! Request numbers come from `rustix::ioctl::opcode`, which encodes
//! `_IO`/`_IOR` for the architecture built for (powerpc, mips and sparc put
//! the direction bits elsewhere than asm-generic). The loop driver's own
//! requests are plain numbers in `linux/loop.h`, not `_IO` encodings, so
//! they are the same everywhere and stay literal here.

use std::io;
use std::os::fd::AsFd;

use rustix::ioctl::{ioctl, opcode, Getter, NoArg, Opcode, Setter};

// <linux/fs.h>: `_IOR(0x12, 114, size_t)`, though the kernel writes a u64.
const BLKGETSIZE64: Opcode = opcode::read::<usize>(0x12, 114);
const BLKROGET: Opcode = opcode::none(0x12, 94);
const BLKDISCARD: Opcode = opcode::none(0x12, 119);
const BLKZEROOUT: Opcode = opcode::none(0x12, 127);

/// Device size in bytes.
pub fn size_bytes(fd: impl AsFd) -> io::Result<u64> {
    // SAFETY: BLKGETSIZE64 writes one u64, the getter's output type.
    Ok(unsafe { ioctl(fd, Getter::<BLKGETSIZE64, u64>::new()) }?)
}

/// Logical sector size in bytes.
pub fn logical_sector_bytes(fd: impl AsFd) -> io::Result<u32> {
    Ok(rustix::fs::ioctl_blksszget(fd)?)
}

/// Physical sector size in bytes.
pub fn physical_sector_bytes(fd: impl AsFd) -> io::Result<u32> {
    Ok(rustix::fs::ioctl_blkpbszget(fd)?)
}

/// Whether the kernel marks the device read-only (`blockdev --setro`, `losetup -r`).
pub fn read_only(fd: impl AsFd) -> io::Result<bool> {
    // SAFETY: BLKROGET writes one int, the getter's output type.
    let ro: libc::c_int = unsafe { ioctl(fd, Getter::<BLKROGET, libc::c_int>::new()) }?;
    Ok(ro != 0)
}

/// BLKDISCARD over `[offset, offset + len)`.
pub fn discard(fd: impl AsFd, offset_bytes: u64, len_bytes: u64) -> io::Result<()> {
    // SAFETY: BLKDISCARD reads two u64 (offset, length) through the
    // pointer the setter passes, to its own copy of them.
    Ok(unsafe {
        ioctl(
            fd,
            Setter::<BLKDISCARD, [u64; 2]>::new([offset_bytes, len_bytes]),
        )
    }?)
}

/// BLKZEROOUT over `[offset, offset + len)`: reads as zeros afterwards.
pub fn zero_out(fd: impl AsFd, offset_bytes: u64, len_bytes: u64) -> io::Result<()> {
    // SAFETY: BLKZEROOUT reads two u64 (offset, length) through the
    // pointer the setter passes, to its own copy of them.
    Ok(unsafe {
        ioctl(
            fd,
            Setter::<BLKZEROOUT, [u64; 2]>::new([offset_bytes, len_bytes]),
        )
    }?)
}

// The loop driver's requests (linux/loop.h): plain numbers on every architecture.
const LOOP_SET_STATUS64: Opcode = 0x4C04;
const LOOP_GET_STATUS64: Opcode = 0x4C05;
const LOOP_CLR_FD: Opcode = 0x4C01;
const LOOP_SET_CAPACITY: Opcode = 0x4C07;
const LOOP_CONFIGURE: Opcode = 0x4C0A;
const LOOP_CTL_GET_FREE: Opcode = 0x4C82;

/// `struct loop_info64`: what a loop device is bound to and how.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LoopInfo64 {
    /// The backing file's device and inode.
    pub device: u64,
    pub inode: u64,
    pub rdevice: u64,
    pub offset: u64,
    /// Bytes of the file the device shows (0: all of it).
    pub sizelimit: u64,
    pub number: u32,
    pub encrypt_type: u32,
    pub encrypt_key_size: u32,
    pub flags: u32,
    pub file_name: [u8; 64],
    pub crypt_name: [u8; 64],
    pub encrypt_key: [u8; 32],
    pub init: [u64; 2],
}

impl Default for LoopInfo64 {
    fn default() -> Self {
        Self {
            device: 0,
            inode: 0,
            rdevice: 0,
            offset: 0,
            sizelimit: 0,
            number: 0,
            encrypt_type: 0,
            encrypt_key_size: 0,
            flags: 0,
            file_name: [0; 64],
            crypt_name: [0; 64],
            encrypt_key: [0; 32],
            init: [0; 2],
        }
    }
}

const _: () = assert!(std::mem::size_of::<LoopInfo64>() == 232);

/// `struct loop_config`: what `LOOP_CONFIGURE` binds a loop device to.
#[repr(C)]
pub struct LoopConfig {
    /// The backing file's descriptor.
    pub fd: u32,
    /// Logical block size in bytes (0: the driver's default, 512).
    pub block_size: u32,
    pub info: LoopInfo64,
    pub reserved: [u64; 8],
}

const _: () = assert!(std::mem::size_of::<LoopConfig>() == 304);

/// A loop device's status (`LOOP_GET_STATUS64`); ENXIO when it is not
/// bound to a file.
pub fn loop_status(fd: impl AsFd) -> io::Result<LoopInfo64> {
    // SAFETY: LOOP_GET_STATUS64 writes one whole `struct loop_info64`, of
    // which `LoopInfo64` has the layout (size pinned above).
    Ok(unsafe { ioctl(fd, Getter::<LOOP_GET_STATUS64, LoopInfo64>::new()) }?)
}

/// Change a bound loop device's status (`LOOP_SET_STATUS64`): a new
/// `sizelimit` or `offset` changes its capacity at once.
pub fn set_loop_status(fd: impl AsFd, info: &LoopInfo64) -> io::Result<()> {
    // SAFETY: LOOP_SET_STATUS64 reads one `struct loop_info64` through the
    // pointer the setter passes, to its own copy of `info`.
    Ok(unsafe { ioctl(fd, Setter::<LOOP_SET_STATUS64, LoopInfo64>::new(*info)) }?)
}

/// Bind an unbound loop device to `config.fd` at once, with its block
/// size and flags (`LOOP_CONFIGURE`); EBUSY when another took it first.
pub fn loop_configure(fd: impl AsFd, config: LoopConfig) -> io::Result<()> {
    // SAFETY: LOOP_CONFIGURE reads one `struct loop_config` through the
    // pointer the setter passes, to its own copy of `config` (layout and
    // size pinned above).
    Ok(unsafe { ioctl(fd, Setter::<LOOP_CONFIGURE, LoopConfig>::new(config)) }?)
}

/// Unbind a loop device (`LOOP_CLR_FD`); the kernel lets go at its last close.
pub fn loop_clear(fd: impl AsFd) -> io::Result<()> {
    // SAFETY: LOOP_CLR_FD takes no argument.
    Ok(unsafe { ioctl(fd, NoArg::<LOOP_CLR_FD>::new()) }?)
}

/// A bound loop device takes its backing file's size now (`LOOP_SET_CAPACITY`).
pub fn loop_set_capacity(fd: impl AsFd) -> io::Result<()> {
    // SAFETY: LOOP_SET_CAPACITY takes no argument.
    Ok(unsafe { ioctl(fd, NoArg::<LOOP_SET_CAPACITY>::new()) }?)
}

/// `LOOP_CTL_GET_FREE` on `/dev/loop-control`: the number of a free loop
/// device, made if none is.
pub fn loop_free_number(control: impl AsFd) -> io::Result<u32> {
    // SAFETY: LOOP_CTL_GET_FREE takes no argument and answers in the
    // return value, which `GetFree` hands back.
    let n = unsafe { ioctl(control, GetFree) }?;
    Ok(u32::try_from(n)
        .expect("invariant: ioctl answers a failure as an errno, not a negative value"))
}

/// `LOOP_CTL_GET_FREE`: no argument, the answer in the return value (which
/// rustix's `NoArg` drops).
struct GetFree;

// SAFETY: the request takes no argument (a null pointer is passed) and
// nothing is read back through it; the output is the call's return value.
unsafe impl rustix::ioctl::Ioctl for GetFree {
    type Output = rustix::ioctl::IoctlOutput;
    const IS_MUTATING: bool = false;

    fn opcode(&self) -> Opcode {
        LOOP_CTL_GET_FREE
    }

    fn as_ptr(&mut self) -> *mut std::ffi::c_void {
        std::ptr::null_mut()
    }

    unsafe fn output_from_ptr(
        out: rustix::ioctl::IoctlOutput,
        _: *mut std::ffi::c_void,
    ) -> rustix::io::Result<Self::Output> {
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block requests as `linux/fs.h` encodes them, where libc has them
    /// for the architecture built for.
    #[test]
    fn the_block_requests_are_the_kernel_s() {
        // glibc's request type is an unsigned long, which holds any opcode.
        #[cfg(target_env = "gnu")]
        {
            assert_eq!(libc::Ioctl::from(opcode::none(0x12, 104)), libc::BLKSSZGET);
            assert_eq!(libc::Ioctl::from(opcode::none(0x12, 123)), libc::BLKPBSZGET);
        }
        #[cfg(any(
            target_arch = "x86_64",
            target_arch = "aarch64",
            target_arch = "riscv64"
        ))]
        {
            assert_eq!(BLKGETSIZE64, 0x8008_1272);
            assert_eq!(BLKROGET, 0x125E);
            assert_eq!(BLKDISCARD, 0x1277);
            assert_eq!(BLKZEROOUT, 0x127F);
        }
    }
}
