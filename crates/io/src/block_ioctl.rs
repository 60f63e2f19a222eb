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
