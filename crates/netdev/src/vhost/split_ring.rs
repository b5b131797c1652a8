//! A split virtqueue (virtio 1.x §2.7) as the device side polls it: the available ring, the
//! descriptor table (direct and indirect) and the used ring, read and written through host
//! pointers into the guest's memory that are checked once when the ring starts.

use std::sync::atomic::AtomicU16;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use datapath::packet::MAX_BURST;
use virtio_queue::{Queue, QueueT};

use super::guest_memory::HostMap;

/// `VRING_AVAIL_F_NO_INTERRUPT`: the driver does not want to be signalled.
pub(crate) const AVAIL_F_NO_INTERRUPT: u16 = 1;

/// What went wrong on a ring: the guest broke the virtio rules.
#[derive(Debug)]
pub(super) struct BadRing(pub(super) &'static str);

/// Most bytes of one buffer prefetched ahead of its copy: a small frame whole (with the
/// header in front of it, two lines), the front of a large one (the hardware prefetcher
/// follows a long copy by itself).
const PREFETCH_SPAN: usize = 256;

/// Prefetches every cache line of the `len` bytes at `p` (`len > 0`): the first, then each
/// line start up to the one holding the last byte.
#[inline(always)]
fn prefetch_span<const WRITE: bool>(p: *const u8, len: usize) {
    let into = p as usize & 63;
    let mut line = p.wrapping_sub(into);
    flow::hash::prefetch_addr::<WRITE>(line);
    for _ in 0..(into + len - 1) / 64 {
        line = line.wrapping_add(64);
        flow::hash::prefetch_addr::<WRITE>(line);
    }
}

/// A descriptor (virtio 1.x §2.7.5).
#[derive(Clone, Copy)]
pub(super) struct Desc {
    pub(super) addr: u64,
    pub(super) len: u32,
    pub(super) flags: u16,
    pub(super) next: u16,
}

const DESC_F_NEXT: u16 = 1;
pub(super) const DESC_F_WRITE: u16 = 2;
const DESC_F_INDIRECT: u16 = 4;

/// A usual chain, as [`SplitRing::prefetch`] found it: its head and its one buffer, whose
/// descriptor had the flags asked for, at host address `at`, valid for `len` bytes (checked
/// to lie in one memory region). `len == 0`: not a usual chain, walked as any other.
#[derive(Clone, Copy)]
pub(super) struct Single {
    pub(super) at: *mut u8,
    pub(super) len: u32,
    pub(super) head: u16,
}

impl Single {
    const NONE: Single = Single {
        at: std::ptr::null_mut(),
        len: 0,
        head: 0,
    };
}

/// The chains of a burst's available slots `start .. start + n`, each read once when the
/// burst's loads start ([`SplitRing::prefetch`]). A ring keeps one and fills its first `n`
/// entries for each burst, so that a burst neither zeroes nor copies all 32.
pub(super) struct Burst {
    singles: [Single; MAX_BURST],
    start: u16,
    n: u16,
}

// SAFETY: the pointers are into the guest memory mappings of the `Ring` that holds this
// burst (as `SplitRing`'s), and are read only in the burst that found them, while the ring
// holds that memory; sending the burst to another thread changes neither.
unsafe impl Send for Burst {}

impl Burst {
    pub(super) const fn new() -> Burst {
        Burst {
            singles: [Single::NONE; MAX_BURST],
            start: 0,
            n: 0,
        }
    }

    /// The usual chain of the burst's `j`th slot, if the burst read that slot and found one.
    #[inline]
    pub(super) fn nth(&self, j: usize) -> Option<Single> {
        if j < usize::from(self.n) {
            let s = self.singles[j];
            (s.len != 0).then_some(s)
        } else {
            None
        }
    }

    /// The usual chain in available slot `slot`, if the burst read that slot and found one.
    #[inline]
    pub(super) fn single(&self, slot: u16) -> Option<Single> {
        self.nth(usize::from(slot.wrapping_sub(self.start)))
    }
}

/// Used elements of a burst, recorded as its frames go and written into the used ring after
/// them ([`SplitRing::put_used_all`]). A used element is a store into a line the guest reads,
/// so it waits in the store buffer for that line; written a frame at a time, every later load
/// the store buffer could not serve (a value stored narrower than it is read, which the
/// compiler makes of the ring's 16-bit indices and of a packet built on the stack) waited for
/// it too.
pub(super) struct UsedLater {
    n: usize,
    elems: [(u16, u32); MAX_BURST],
}

impl UsedLater {
    pub(super) const fn new() -> UsedLater {
        UsedLater {
            n: 0,
            elems: [(0, 0); MAX_BURST],
        }
    }

    /// Records chain `head` as used with `len` bytes written, after those recorded before.
    #[inline]
    pub(super) fn push(&mut self, q: &mut SplitRing, head: u16, len: u32) {
        if self.n == MAX_BURST {
            self.flush(q);
        }
        self.elems[self.n] = (head, len);
        self.n += 1;
    }

    /// Writes what was recorded into `q`'s used ring (before anything else is put there).
    #[inline]
    pub(super) fn flush(&mut self, q: &mut SplitRing) {
        q.put_used_all(&self.elems[..self.n]);
        self.n = 0;
    }
}

/// A split virtqueue (virtio 1.x §2.7) as the device side polls it, over host pointers into
/// the guest's memory. `virtio-queue` checks the ring's layout when it starts
/// ([`Queue::is_valid`], alignment and size); per packet this does what its `AvailIter`,
/// `DescriptorChain` and `add_used` do, through pointers checked once per area at start
/// rather than a bounds-checked `vm-memory` access per field, which cost several times as much
/// per frame (docs/performance.md, PVP). The used index is published once per burst, as
/// DPDK's vhost library does.
#[derive(Clone, Copy)]
pub(super) struct SplitRing {
    /// A power of two (`Queue::try_set_size` checks it).
    pub(super) size: u16,
    /// `size` descriptors of 16 bytes.
    pub(super) desc: *const u8,
    /// Flags, index, `size` entries.
    pub(super) avail: *const u8,
    /// Flags, index, `size` elements of 8 bytes.
    pub(super) used: *mut u8,
    pub(super) next_avail: u16,
    pub(super) next_used: u16,
}

// SAFETY: the pointers are into the guest memory mappings that the `Ring` holding this ring
// keeps alive (its `Arc<GuestMemoryMmap>`); each area was checked at start to lie inside one
// mapping and to be aligned for the atomic accesses made to it.
unsafe impl Send for SplitRing {}

impl SplitRing {
    /// The ring `q` describes (addresses already checked by `q.is_valid`), in `host`.
    pub(super) fn new(q: &Queue, host: &HostMap) -> Result<SplitRing, String> {
        let size = q.size();
        let n = usize::from(size);
        let area = |addr: u64, len: usize, align: usize, what: &str| {
            host.at(addr, len)
                .filter(|p| (*p as usize).is_multiple_of(align))
                .ok_or_else(|| format!("the {what} at {addr:#x} is not in one memory region"))
        };
        Ok(SplitRing {
            size,
            desc: area(q.desc_table(), 16 * n, 16, "descriptor table")?.cast_const(),
            avail: area(q.avail_ring(), 6 + 2 * n, 2, "available ring")?.cast_const(),
            used: area(q.used_ring(), 6 + 8 * n, 4, "used ring")?,
            next_avail: q.next_avail(),
            next_used: q.next_used(),
        })
    }

    pub(super) fn next_avail(&self) -> u16 {
        self.next_avail
    }

    #[cfg(test)]
    pub(super) fn next_used(&self) -> u16 {
        self.next_used
    }

    /// The driver's available index (acquire: the entries before it are written).
    #[inline]
    pub(super) fn avail_idx(&self) -> u16 {
        // SAFETY: `avail + 2` is 2-aligned and inside the checked area; the guest writes it
        // concurrently, hence the atomic access.
        let idx = unsafe { AtomicU16::from_ptr(self.avail.add(2).cast_mut().cast()) };
        u16::from_le(idx.load(Acquire))
    }

    /// The driver's available-ring flags.
    #[inline]
    pub(super) fn avail_flags(&self) -> u16 {
        // SAFETY: as in `avail_idx`, at the area's start.
        let f = unsafe { AtomicU16::from_ptr(self.avail.cast_mut().cast()) };
        u16::from_le(f.load(Relaxed))
    }

    /// The head the driver put in available slot `i` (read after `avail_idx` said it is there).
    #[inline]
    pub(super) fn avail_entry(&self, i: u16) -> u16 {
        let at = 4 + 2 * usize::from(i & (self.size - 1));
        // SAFETY: `at + 2 <= 4 + 2 * size`, inside the checked area.
        u16::from_le(unsafe { std::ptr::read_volatile(self.avail.add(at).cast::<u16>()) })
    }

    /// Descriptor `i` of the table at `table` (`i` below the table's size).
    #[inline]
    pub(super) fn desc(table: *const u8, i: u16) -> Desc {
        // SAFETY: callers pass a table checked to hold more than `i` descriptors; 16-byte
        // descriptors of a table at a 16-aligned address (a direct table) or any address (an
        // indirect one: hence the unaligned read).
        let b: [u8; 16] =
            unsafe { std::ptr::read_unaligned(table.add(16 * usize::from(i)).cast::<[u8; 16]>()) };
        Desc {
            addr: u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            len: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
            flags: u16::from_le_bytes([b[12], b[13]]),
            next: u16::from_le_bytes([b[14], b[15]]),
        }
    }

    /// Walks the chain at `head`, handing each buffer (address, length) to `f`; every buffer
    /// must be device-writable (`write`) or device-readable (not `write`). Returns the number
    /// of buffers.
    pub(super) fn walk(
        &self,
        host: &HostMap,
        head: u16,
        write: bool,
        mut f: impl FnMut(u64, u32),
    ) -> Result<usize, BadRing> {
        const LOOP: BadRing = BadRing("descriptor chain loops or leaves the ring");
        let (mut table, mut tsize, mut i) = (self.desc, self.size, head);
        let (mut indirect, mut count, mut in_table) = (false, 0usize, 0usize);
        if head >= self.size {
            return Err(LOOP);
        }
        loop {
            let d = Self::desc(table, i);
            if d.flags & DESC_F_INDIRECT != 0 {
                if indirect {
                    return Err(BadRing("indirect descriptor inside an indirect table"));
                }
                let n = d.len as usize / 16;
                if d.len % 16 != 0 || n == 0 || n > usize::from(u16::MAX) {
                    return Err(BadRing("indirect table of a bad length"));
                }
                table = host
                    .at(d.addr, d.len as usize)
                    .ok_or(BadRing("indirect table outside guest memory"))?
                    .cast_const();
                (tsize, i, indirect, in_table) = (n as u16, 0, true, 0);
                continue;
            }
            if (d.flags & DESC_F_WRITE != 0) != write {
                return Err(BadRing(if write {
                    "read-only buffer in a receive chain"
                } else {
                    "write-only buffer in a transmit chain"
                }));
            }
            f(d.addr, d.len);
            count += 1;
            in_table += 1;
            if d.flags & DESC_F_NEXT == 0 {
                return Ok(count);
            }
            i = d.next;
            if i >= tsize || in_table >= usize::from(tsize) {
                return Err(LOOP);
            }
        }
    }

    /// Starts loading what the next `n` available chains need, and finds which of them are the
    /// usual chain: one buffer whose descriptor's flags are exactly `flags` (readable for a
    /// receive, writable for a send), lying in one memory region. Their available entries and
    /// descriptors are read here, once, so that a burst's misses on lines the guest wrote on
    /// its own core overlap rather than each waiting in turn; the first `span(j)` bytes of
    /// chain `j`'s first buffer (at most [`PREFETCH_SPAN`]) are prefetched (for writing when
    /// `WRITE`, as a send does, but for its first `read_first` bytes, which a send reads before
    /// it decides to write them: [`put_hdr`](super::copy::put_hdr)), and, for writing, the used
    /// elements the burst will fill.
    #[inline]
    pub(super) fn prefetch<const WRITE: bool>(
        &self,
        host: &HostMap,
        burst: &mut Burst,
        n: usize,
        flags: u16,
        read_first: usize,
        mut span: impl FnMut(usize) -> usize,
    ) {
        let n = n.min(MAX_BURST);
        (burst.start, burst.n) = (self.next_avail, n as u16);
        // First every chain's head, with its descriptor's line prefetched, then the
        // descriptors: a descriptor's load waits on its head's, and one loop of both kept
        // few of the burst's misses in flight at once.
        for (j, s) in burst.singles[..n].iter_mut().enumerate() {
            s.head = self.avail_entry(self.next_avail.wrapping_add(j as u16));
            if s.head < self.size {
                flow::hash::prefetch_addr::<false>(
                    self.desc.wrapping_add(16 * usize::from(s.head)),
                );
            }
        }
        for (j, s) in burst.singles[..n].iter_mut().enumerate() {
            s.len = 0;
            if s.head >= self.size {
                continue;
            }
            let d = Self::desc(self.desc, s.head);
            if d.flags != flags {
                continue;
            }
            let Some(at) = host.at(d.addr, d.len as usize) else {
                continue;
            };
            (s.at, s.len) = (at, d.len);
            let len = span(j).min(d.len as usize).min(PREFETCH_SPAN);
            if len > read_first {
                if read_first > 0 {
                    // The header, which a send compares before it stores (at most 12 bytes:
                    // what goes past its first line is the frame's).
                    flow::hash::prefetch_addr::<false>(at);
                }
                prefetch_span::<WRITE>(at.wrapping_add(read_first), len - read_first);
            }
        }
        if n > 0 {
            // The used elements, up to the ring's end (a wrapped burst's rest is not worth
            // the arithmetic).
            let first = usize::from(self.next_used & (self.size - 1));
            let k = n.min(usize::from(self.size) - first);
            // SAFETY: elements `first .. first + k` are inside the checked used area.
            let p = unsafe { self.used.add(4 + 8 * first) };
            prefetch_span::<true>(p, 8 * k);
        }
    }

    /// Records chain `head` as used with `len` bytes written.
    #[inline]
    pub(super) fn put_used(&mut self, head: u16, len: u32) {
        self.put_used_all(&[(head, len)]);
    }

    /// Records `elems` (chain heads with the bytes written into each) as used, in order.
    #[inline]
    pub(super) fn put_used_all(&mut self, elems: &[(u16, u32)]) {
        let mut next = self.next_used;
        for &(head, len) in elems {
            let at = 4 + 8 * usize::from(next & (self.size - 1));
            let mut e = [0u8; 8];
            e[..4].copy_from_slice(&u32::from(head).to_le_bytes());
            e[4..].copy_from_slice(&len.to_le_bytes());
            // SAFETY: `at + 8 <= 4 + 8 * size`, inside the checked area.
            unsafe { std::ptr::write_volatile(self.used.add(at).cast::<[u8; 8]>(), e) };
            next = next.wrapping_add(1);
        }
        self.next_used = next;
    }

    /// Publishes the used elements recorded so far (release: they are written first).
    #[inline]
    pub(super) fn publish_used(&self) {
        // SAFETY: `used + 2` is 2-aligned (the area is 4-aligned) and inside it.
        let idx = unsafe { AtomicU16::from_ptr(self.used.add(2).cast()) };
        idx.store(self.next_used.to_le(), Release);
    }
}
