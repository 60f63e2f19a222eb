//! The block-device ioctls Cairn uses, as safe functions on a raw fd.
//!
//! Request numbers are the asm-generic ones (x86_64, aarch64, riscv64), which is
//! where Cairn runs.

use std::io;
use std::os::fd::RawFd;

// _IOR(0x12, 114, size_t)
const BLKGETSIZE64: libc::Ioctl = 0x8008_1272u32 as libc::Ioctl;
// _IO(0x12, 94)
const BLKROGET: libc::Ioctl = 0x125E;
// _IO(0x12, 119)
const BLKDISCARD: libc::Ioctl = 0x1277;
// _IO(0x12, 127)
const BLKZEROOUT: libc::Ioctl = 0x127F;

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Device size in bytes.
pub fn size_bytes(fd: RawFd) -> io::Result<u64> {
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer, which is valid.
    check(unsafe { libc::ioctl(fd, BLKGETSIZE64, &mut size as *mut u64) })?;
    Ok(size)
}

/// Logical sector size in bytes.
pub fn logical_sector_bytes(fd: RawFd) -> io::Result<u32> {
    let mut size: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes one int through the pointer, which is valid.
    check(unsafe { libc::ioctl(fd, libc::BLKSSZGET, &mut size as *mut libc::c_int) })?;
    Ok(size as u32)
}

/// Physical sector size in bytes.
pub fn physical_sector_bytes(fd: RawFd) -> io::Result<u32> {
    let mut size: libc::c_uint = 0;
    // SAFETY: BLKPBSZGET writes one unsigned int through the pointer, which is valid.
    check(unsafe { libc::ioctl(fd, libc::BLKPBSZGET, &mut size as *mut libc::c_uint) })?;
    Ok(size)
}

/// Whether the kernel marks the device read-only (`blockdev --setro`, `losetup -r`).
pub fn read_only(fd: RawFd) -> io::Result<bool> {
    let mut ro: libc::c_int = 0;
    // SAFETY: BLKROGET writes one int through the pointer, which is valid.
    check(unsafe { libc::ioctl(fd, BLKROGET, &mut ro as *mut libc::c_int) })?;
    Ok(ro != 0)
}

/// BLKDISCARD over `[offset, offset + len)`.
pub fn discard(fd: RawFd, offset_bytes: u64, len_bytes: u64) -> io::Result<()> {
    let range = [offset_bytes, len_bytes];
    // SAFETY: BLKDISCARD reads two u64 from the pointer, which is valid.
    check(unsafe { libc::ioctl(fd, BLKDISCARD, range.as_ptr()) })
}

/// BLKZEROOUT over `[offset, offset + len)`: reads as zeros afterwards.
pub fn zero_out(fd: RawFd, offset_bytes: u64, len_bytes: u64) -> io::Result<()> {
    let range = [offset_bytes, len_bytes];
    // SAFETY: BLKZEROOUT reads two u64 from the pointer, which is valid.
    check(unsafe { libc::ioctl(fd, BLKZEROOUT, range.as_ptr()) })
}

// The loop driver's own requests (linux/loop.h).
const LOOP_SET_STATUS64: libc::Ioctl = 0x4C04;
const LOOP_GET_STATUS64: libc::Ioctl = 0x4C05;

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

/// A loop device's status (`LOOP_GET_STATUS64`); ENXIO when it is not
/// bound to a file.
pub fn loop_status(fd: RawFd) -> io::Result<LoopInfo64> {
    let mut info = LoopInfo64::default();
    // SAFETY: LOOP_GET_STATUS64 writes one `struct loop_info64` through the
    // pointer, which points at a live one of the kernel's layout.
    check(unsafe { libc::ioctl(fd, LOOP_GET_STATUS64, &mut info as *mut LoopInfo64) })?;
    Ok(info)
}

/// Change a bound loop device's status (`LOOP_SET_STATUS64`): a new
/// `sizelimit` or `offset` changes its capacity at once.
pub fn set_loop_status(fd: RawFd, info: &LoopInfo64) -> io::Result<()> {
    // SAFETY: LOOP_SET_STATUS64 reads one `struct loop_info64` through the
    // pointer, which points at a live one.
    check(unsafe { libc::ioctl(fd, LOOP_SET_STATUS64, info as *const LoopInfo64) })
}
