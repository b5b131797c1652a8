//! The guest's memory as the back-end holds it: the regions `SET_MEM_TABLE` shares, mapped
//! through `vm-memory`, and the same regions as host pointers for the data path's frame
//! copies, which check their bounds once per buffer; the copies of a frame spread over several
//! guest buffers.

use std::fs::File;

use vhost::vhost_user::message::VhostUserMemoryRegion;
use vm_memory::{
    Bytes, FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion,
    GuestRegionMmap, MemoryRegionAddress, MmapRegion,
};

use super::copy::copy_frame;

/// Guest memory regions as host pointers, for copying frames: `vm-memory`'s generic
/// accessors (`read_slice`, `write_slice`) walk a slice iterator per call and cost several
/// hundred cycles per frame, so the data path checks bounds itself and copies with `memcpy`.
/// A buffer that straddles two regions (legal, rare) takes `vm-memory`'s way instead.
pub(super) struct HostMap {
    /// (guest address, length, host address) of each region.
    pub(super) regions: Box<[(u64, u64, *mut u8)]>,
}

// SAFETY: the pointers are into shared mappings owned by the `Arc<GuestMemoryMmap>` of the
// ring that holds this map (built from it, dropped with it), so they are valid wherever the
// ring is; every access checks its bounds against the region first.
unsafe impl Send for HostMap {}

impl HostMap {
    pub(super) fn new(mem: &GuestMemoryMmap) -> HostMap {
        HostMap {
            regions: mem
                .iter()
                .filter_map(|r| {
                    let host = r.get_host_address(MemoryRegionAddress(0)).ok()?;
                    Some((r.start_addr().0, r.len(), host))
                })
                .collect(),
        }
    }

    /// The host address of the `len` guest bytes at `addr`, if they lie in one region.
    #[inline]
    pub(super) fn at(&self, addr: u64, len: usize) -> Option<*mut u8> {
        for &(start, size, host) in &*self.regions {
            // Below `start`, `off` wraps to at least `2^64 - start`, past `size`: no region
            // reaches the end of the address space (`map_regions` refuses one that wraps).
            let off = addr.wrapping_sub(start);
            if off < size && len as u64 <= size - off {
                // In bounds: `off + len <= size`.
                return Some(host.wrapping_add(off as usize));
            }
        }
        None
    }

    /// Copies guest bytes at `addr` into `dst`.
    #[inline]
    pub(super) fn read(&self, mem: &GuestMemoryMmap, addr: u64, dst: &mut [u8]) -> Result<(), ()> {
        match self.at(addr, dst.len()) {
            // SAFETY: `p` is valid for `dst.len()` bytes of a live mapping (see `at` and the
            // type's invariant); guest memory is never a Rust allocation, so it cannot
            // overlap `dst`. The guest may write it concurrently, as with any device DMA: the
            // frame is then garbage, never unsafety for the switch.
            Some(p) => unsafe {
                copy_frame(dst.as_mut_ptr(), p.cast_const(), dst.len());
                Ok(())
            },
            None => mem.read_slice(dst, GuestAddress(addr)).map_err(|_| ()),
        }
    }

    /// Copies `src` into guest memory at `addr`.
    #[inline]
    pub(super) fn write(&self, mem: &GuestMemoryMmap, addr: u64, src: &[u8]) -> Result<(), ()> {
        match self.at(addr, src.len()) {
            // SAFETY: as in `read`, with `p` valid for `src.len()` bytes of a writable shared
            // mapping.
            Some(p) => unsafe {
                copy_frame(p, src.as_ptr(), src.len());
                Ok(())
            },
            None => mem.write_slice(src, GuestAddress(addr)).map_err(|_| ()),
        }
    }
}

/// The guest memory `SET_MEM_TABLE` shares: one `mmap` of each region's file descriptor, at
/// the region's guest address.
pub(super) fn map_regions(
    regions: &[VhostUserMemoryRegion],
    files: Vec<File>,
) -> Result<GuestMemoryMmap, String> {
    if regions.len() != files.len() || regions.is_empty() {
        return Err(format!(
            "{} memory regions with {} descriptors",
            regions.len(),
            files.len()
        ));
    }
    let mut out = Vec::with_capacity(regions.len());
    for (r, f) in regions.iter().zip(files) {
        let size = usize::try_from(r.memory_size).map_err(|e| e.to_string())?;
        within_file(&f, r.mmap_offset, r.memory_size)?;
        let m = MmapRegion::from_file(FileOffset::new(f, r.mmap_offset), size)
            .map_err(|e| format!("mmap of a {size}-byte region: {e}"))?;
        out.push(
            GuestRegionMmap::new(m, GuestAddress(r.guest_phys_addr))
                .ok_or("a memory region wraps the address space")?,
        );
    }
    GuestMemoryMmap::from_regions(out).map_err(|e| e.to_string())
}

/// Refuses a region that does not lie within its file: mapping it would succeed, and the
/// first access past the file's end would kill the switch (`SIGBUS`). Files that are not
/// regular (a device) have no size to check.
fn within_file(f: &File, offset: u64, size: u64) -> Result<(), String> {
    let meta = f
        .metadata()
        .map_err(|e| format!("fstat of a region's descriptor: {e}"))?;
    if meta.is_file() && offset.checked_add(size).is_none_or(|end| end > meta.len()) {
        return Err(format!(
            "a {size}-byte region at offset {offset} lies past the end of its {}-byte file",
            meta.len()
        ));
    }
    Ok(())
}

/// Copies the buffers `segs` of guest memory into `out` (their lengths add up to its).
pub(super) fn gather(
    host: &HostMap,
    mem: &GuestMemoryMmap,
    segs: &[(u64, u32)],
    out: &mut [u8],
) -> Result<(), ()> {
    let mut off = 0usize;
    for &(addr, len) in segs {
        let len = len as usize;
        host.read(mem, addr, &mut out[off..off + len])?;
        off += len;
    }
    Ok(())
}

/// Copies `hdr` then `frame` into the guest buffers `segs` (address, length, chain), adding
/// what each chain received to `used[chain]`.
pub(super) fn scatter(
    host: &HostMap,
    mem: &GuestMemoryMmap,
    segs: &[(u64, u32, u16)],
    hdr: &[u8],
    frame: &[u8],
    used: &mut [u32],
) -> Result<(), ()> {
    let mut parts = [hdr, frame];
    let mut part = 0;
    for &(addr, len, chain) in segs {
        let (mut addr, mut room) = (addr, len as usize);
        while room > 0 && part < 2 {
            let src = parts[part];
            let k = room.min(src.len());
            if k > 0 {
                host.write(mem, addr, &src[..k])?;
                used[chain as usize] += k as u32;
                addr = addr.wrapping_add(k as u64);
                room -= k;
            }
            parts[part] = &src[k..];
            if parts[part].is_empty() {
                part += 1;
            }
        }
        if part == 2 {
            break;
        }
    }
    Ok(())
}
