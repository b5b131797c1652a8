//! Anonymous mappings aligned to, and advised onto, transparent huge pages.

use std::ffi::c_void;
use std::ptr::{NonNull, null_mut};

/// The size of a transparent huge page on x86-64 (and of the alignment of the regions here).
pub const HUGE_PAGE: usize = 2 << 20;

/// Maps `bytes` (a multiple of [`HUGE_PAGE`]) of zeroed memory aligned to [`HUGE_PAGE`], and
/// asks the kernel to back it with huge pages. None when the mapping fails.
pub(crate) fn map_huge(bytes: usize) -> Option<NonNull<u8>> {
    debug_assert!(bytes > 0 && bytes.is_multiple_of(HUGE_PAGE));
    let len = bytes.checked_add(HUGE_PAGE)?;
    // SAFETY: a new private anonymous mapping at an address the kernel picks: no memory that
    // exists is affected.
    let p = unsafe {
        libc::mmap(
            null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let start = p as usize;
    let aligned = start.next_multiple_of(HUGE_PAGE);
    let head = aligned - start;
    let tail = len - head - bytes;
    // SAFETY: the head and the tail are the parts of the mapping just made outside the
    // aligned region, which nothing refers to; `madvise` only advises on the region.
    unsafe {
        if head > 0 {
            libc::munmap(p, head);
        }
        if tail > 0 {
            libc::munmap((aligned + bytes) as *mut c_void, tail);
        }
        // Advice: where it is refused (THP off), the region stays on small pages.
        libc::madvise(aligned as *mut c_void, bytes, libc::MADV_HUGEPAGE);
    }
    NonNull::new(aligned as *mut u8)
}

/// Unmaps a region of [`map_huge`].
///
/// # Safety
/// `p` and `bytes` are a region `map_huge` returned, not unmapped yet, and nothing refers
/// to its memory any more.
pub(crate) unsafe fn unmap(p: NonNull<u8>, bytes: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        libc::munmap(p.as_ptr().cast(), bytes);
    }
}
