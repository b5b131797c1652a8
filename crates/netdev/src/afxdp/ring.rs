//! The rings of an AF_XDP socket (rx, tx, fill, completion) as user space sees them:
//! single-producer/single-consumer rings in memory shared with the kernel, whose side is
//! `net/xdp/xsk_queue.h` (libbpf's `xsk.h` has the same peek/release, reserve/submit shape),
//! and the memory mappings they and the UMEM live in.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};

use super::if_xdp::{RingOffset, XDP_RING_NEED_WAKEUP};

/// A memory mapping, unmapped on drop.
pub(super) struct Mmap {
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; which thread touches which part of
// it is governed by the ring protocol (see the module documentation), not by the pointer.
unsafe impl Send for Mmap {}
// SAFETY: as above; shared references only read the pointer and length.
unsafe impl Sync for Mmap {}

impl Mmap {
    pub(super) fn map(len: usize, fd: RawFd, offset: libc::off_t) -> io::Result<Mmap> {
        let flags = if fd < 0 {
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS
        } else {
            libc::MAP_SHARED | libc::MAP_POPULATE
        };
        // SAFETY: a fresh mapping chosen by the kernel (null hint); the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap {
            ptr: p as *mut u8,
            len,
        })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping made in `map`, unmapped only here.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// One of a socket's four rings, seen from user space. Consumer rings (rx, completion) own
/// their consumer index; producer rings (fill, tx) own their producer index. Indexes are free
/// running `u32`s; the kernel's are read with acquire and ours published with release, which
/// pairs with the kernel's own acquire/release (`smp_load_acquire`/`smp_store_release` in
/// `net/xdp/xsk_queue.h`): entries and frame data written before a release are seen by the
/// side that acquires the index.
///
/// The kernel's index is never trusted to be sane: a consumer sees at most `size` entries, a
/// producer at most `size` free slots, whatever the shared memory says.
pub(super) struct Ring<T> {
    pub(super) producer: *const AtomicU32,
    pub(super) consumer: *const AtomicU32,
    pub(super) flags: *const AtomicU32,
    pub(super) descs: *mut T,
    mask: u32,
    pub(super) size: u32,
    cached_prod: u32,
    cached_cons: u32,
}

impl<T: Copy> Ring<T> {
    /// The ring of `size` entries mapped at `map` with offsets `off`; an error when the
    /// offsets do not describe a ring of that size inside the mapping.
    ///
    /// # Safety
    /// `map` must be the kernel's mapping of this ring (the kernel writes only the index it
    /// owns and the entries it produces, following the ring protocol), and it must outlive
    /// the ring.
    pub(super) unsafe fn new(map: &Mmap, off: &RingOffset, size: u32) -> io::Result<Ring<T>> {
        let bad = |what: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("XDP_MMAP_OFFSETS: {what} outside the ring mapping or misaligned"),
            )
        };
        if !size.is_power_of_two() {
            return Err(bad("ring size"));
        }
        // The mapping starts on a page, so an offset aligned for the type is an aligned
        // address.
        let index_ok =
            |o: u64| o.is_multiple_of(4) && o.checked_add(4).is_some_and(|e| e <= map.len as u64);
        for (o, what) in [
            (off.producer, "producer"),
            (off.consumer, "consumer"),
            (off.flags, "flags"),
        ] {
            if !index_ok(o) {
                return Err(bad(what));
            }
        }
        let descs_end = (size as u64)
            .checked_mul(std::mem::size_of::<T>() as u64)
            .and_then(|n| n.checked_add(off.desc));
        if !off.desc.is_multiple_of(std::mem::align_of::<T>() as u64)
            || descs_end.is_none_or(|e| e > map.len as u64)
        {
            return Err(bad("descriptors"));
        }
        // SAFETY: every offset was just checked to lie inside the mapping, aligned for its
        // type (indexes u32, entries `T`), with `size` entries of `T` from `desc`; the
        // mapping is live (caller's contract).
        unsafe {
            let base = map.ptr;
            let producer = base.add(off.producer as usize) as *const AtomicU32;
            let consumer = base.add(off.consumer as usize) as *const AtomicU32;
            Ok(Ring {
                producer,
                consumer,
                flags: base.add(off.flags as usize) as *const AtomicU32,
                descs: base.add(off.desc as usize) as *mut T,
                mask: size - 1,
                size,
                cached_prod: (*producer).load(Ordering::Acquire),
                cached_cons: (*consumer).load(Ordering::Acquire),
            })
        }
    }

    /// Producer side: whether the kernel asks to be woken up (`XDP_RING_NEED_WAKEUP`). The
    /// fence orders our earlier release of the producer index before the load of the flag
    /// (a store-load order, which release/acquire alone does not give), as the kernel sets
    /// the flag and then looks at the ring again.
    pub(super) fn needs_wakeup(&self) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        // SAFETY: `flags` points into the live ring mapping, aligned (checked in `new`).
        unsafe { (*self.flags).load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0 }
    }

    /// Consumer side: index of the first available entry and how many (at most `max`).
    #[inline]
    pub(super) fn peek(&mut self, max: u32) -> (u32, u32) {
        let mut avail = self.cached_prod.wrapping_sub(self.cached_cons);
        if avail < max {
            // SAFETY: `producer` points into the live ring mapping, aligned (see `new`).
            self.cached_prod = unsafe { (*self.producer).load(Ordering::Acquire) };
            avail = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        // A producer index more than `size` ahead is nonsense: never read past one lap.
        (self.cached_cons, avail.min(self.size).min(max))
    }

    /// Consumer side: gives `n` entries back to the kernel.
    #[inline]
    pub(super) fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        // SAFETY: `consumer` points into the live ring mapping, aligned (see `new`).
        unsafe { (*self.consumer).store(self.cached_cons, Ordering::Release) };
    }

    /// Producer side: free entries, given the consumer index last read.
    #[inline]
    fn free_slots(&self) -> u32 {
        // Saturating: a consumer index ahead of ours (kernel bug) means no room, not a panic.
        self.size
            .saturating_sub(self.cached_prod.wrapping_sub(self.cached_cons))
    }

    /// Producer side: index of the first free entry and how many are free (at most `max`).
    #[inline]
    pub(super) fn reserve(&mut self, max: u32) -> (u32, u32) {
        if self.free_slots() < max {
            // SAFETY: `consumer` points into the live ring mapping, aligned (see `new`).
            self.cached_cons = unsafe { (*self.consumer).load(Ordering::Acquire) };
        }
        (self.cached_prod, self.free_slots().min(max))
    }

    /// Producer side: publishes `n` entries written after the producer index.
    #[inline]
    pub(super) fn submit(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.cached_prod = self.cached_prod.wrapping_add(n);
        // SAFETY: `producer` points into the live ring mapping, aligned (see `new`).
        unsafe { (*self.producer).store(self.cached_prod, Ordering::Release) };
    }

    /// Producer side: entries published that the kernel has not consumed yet.
    pub(super) fn outstanding(&mut self) -> u32 {
        // SAFETY: `consumer` points into the live ring mapping, aligned (see `new`).
        self.cached_cons = unsafe { (*self.consumer).load(Ordering::Acquire) };
        self.cached_prod
            .wrapping_sub(self.cached_cons)
            .min(self.size)
    }

    /// Reads entry `idx`, which `peek` returned as available.
    #[inline]
    pub(super) fn read(&self, idx: u32) -> T {
        // SAFETY: `idx & mask` is below `size`, and `size` entries of `T` lie in the mapping
        // (checked in `new`); the entry is ours to read (published by the kernel's release
        // of the producer index, which `peek` acquired; the kernel does not rewrite it before
        // we release it). A plain read of `Copy` data: any bit pattern is a valid `T` here.
        unsafe { self.descs.add((idx & self.mask) as usize).read() }
    }

    /// Writes entry `idx`, which `reserve` returned as free.
    #[inline]
    pub(super) fn write(&mut self, idx: u32, v: T) {
        // SAFETY: `idx & mask` is below `size` (entries checked in `new`); the entry is free
        // (the kernel's acquire of our producer index has not covered it yet), so the kernel
        // does not read it concurrently.
        unsafe { self.descs.add((idx & self.mask) as usize).write(v) }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake_kernel::OFF;
    use super::super::if_xdp::XdpDesc;
    use super::*;

    #[test]
    fn ring_offsets_are_checked() {
        let map = Mmap::map(4096, -1, 0).unwrap();
        for off in [
            RingOffset { desc: 4096, ..OFF },
            RingOffset {
                producer: 4094,
                ..OFF
            },
            RingOffset { consumer: 2, ..OFF },
            RingOffset { desc: 196, ..OFF },
            RingOffset {
                flags: u64::MAX - 1,
                ..OFF
            },
        ] {
            // SAFETY: rejected before any pointer is made.
            assert!(unsafe { Ring::<XdpDesc>::new(&map, &off, 64) }.is_err());
        }
        // SAFETY: as above.
        assert!(unsafe { Ring::<XdpDesc>::new(&map, &OFF, 48) }.is_err());
        // 192 + 16 * 256 > 4096.
        // SAFETY: as above.
        assert!(unsafe { Ring::<XdpDesc>::new(&map, &OFF, 256) }.is_err());
        // SAFETY: a fake ring inside the mapping.
        assert!(unsafe { Ring::<XdpDesc>::new(&map, &OFF, 128) }.is_ok());
    }
}
