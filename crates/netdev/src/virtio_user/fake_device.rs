//! The device half of a [`Vring`], played by the tests in the same memory: it reads what the
//! driver made available and writes used elements, any it likes, including what no correct
//! device writes.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU16, AtomicU32};

use super::vring::{BUF_LEN, Vring};

/// The device half of one [`Vring`]: reads what the driver made available, writes used
/// elements (any it likes).
pub(super) struct Device {
    desc: *mut u8,
    avail: *mut u8,
    used: *mut u8,
    bufs: *mut u8,
    bufs_gpa: u64,
    size: u16,
    last_avail: u16,
    pub(super) used_idx: u16,
}

impl Device {
    pub(super) fn of(r: &Vring) -> Device {
        Device {
            desc: r.desc,
            avail: r.avail,
            used: r.used,
            bufs: r.bufs,
            bufs_gpa: r.bufs_gpa,
            size: r.size,
            last_avail: 0,
            used_idx: 0,
        }
    }

    /// The 16-bit field at `p + off`.
    ///
    /// # Safety
    /// `p + off` is a 2-aligned field of a ring part of a ring that outlives `'a`.
    unsafe fn u16_at<'a>(p: *mut u8, off: usize) -> &'a AtomicU16 {
        // SAFETY: as the caller promises.
        unsafe { AtomicU16::from_ptr(p.add(off).cast()) }
    }

    /// The next available descriptor: (id, buffer offset from buffer 0, len, flags).
    pub(super) fn take_avail(&mut self) -> Option<(u16, u64, u32, u16)> {
        // SAFETY: the available index, in the ring (alive while the test uses it).
        let idx = u16::from_le(unsafe { Self::u16_at(self.avail, 2) }.load(Acquire));
        if idx == self.last_avail {
            return None;
        }
        let slot = usize::from(self.last_avail & (self.size - 1));
        // SAFETY: entry `slot < size` of the available ring.
        let id = u16::from_le(unsafe { Self::u16_at(self.avail, 4 + 2 * slot) }.load(Relaxed));
        self.last_avail = self.last_avail.wrapping_add(1);
        // SAFETY: `id` is the driver's, below the size.
        let d: [u8; 16] = unsafe { std::ptr::read(self.desc.add(16 * usize::from(id)).cast()) };
        let addr = u64::from_le_bytes(d[..8].try_into().unwrap());
        let len = u32::from_le_bytes(d[8..12].try_into().unwrap());
        let flags = u16::from_le_bytes(d[12..14].try_into().unwrap());
        Some((id, addr - self.bufs_gpa, len, flags))
    }

    fn buf(&self, id: u16) -> *mut u8 {
        self.bufs.wrapping_add(usize::from(id) * BUF_LEN)
    }

    pub(super) fn write_buf(&self, id: u16, bytes: &[u8]) {
        // SAFETY: buffer `id < size` of the ring, test data shorter than a buffer.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.buf(id), bytes.len()) };
    }

    pub(super) fn read_buf(&self, id: u16, len: usize) -> Vec<u8> {
        // SAFETY: as `write_buf`.
        unsafe { std::slice::from_raw_parts(self.buf(id), len).to_vec() }
    }

    /// Writes a used element (unchecked: the test decides) and publishes it.
    pub(super) fn put_used(&mut self, id: u32, len: u32) {
        let at = 4 + 8 * usize::from(self.used_idx & (self.size - 1));
        // SAFETY: inside the used ring.
        unsafe {
            AtomicU32::from_ptr(self.used.add(at).cast()).store(id.to_le(), Relaxed);
            AtomicU32::from_ptr(self.used.add(at + 4).cast()).store(len.to_le(), Relaxed);
        }
        self.used_idx = self.used_idx.wrapping_add(1);
        self.set_used_idx(self.used_idx);
    }

    pub(super) fn set_used_idx(&mut self, idx: u16) {
        self.used_idx = idx;
        // SAFETY: the used index, in the ring.
        unsafe { Self::u16_at(self.used, 2) }.store(idx.to_le(), Release);
    }

    pub(super) fn set_used_flags(&self, f: u16) {
        // SAFETY: the used ring's flags.
        unsafe { Self::u16_at(self.used, 0) }.store(f.to_le(), Relaxed);
    }

    pub(super) fn write_buf_at(&self, id: u16, at: usize, bytes: &[u8]) {
        // SAFETY: `at + len` within a buffer in the tests.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.buf(id).add(at), bytes.len()) };
    }
}

/// A frame of `len` bytes whose content depends on `seed`.
pub(super) fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
}
