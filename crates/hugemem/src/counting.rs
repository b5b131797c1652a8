//! An allocator that counts the calling thread's allocations, for the tests that check a path
//! allocates nothing per packet. A test binary makes it its global allocator:
//!
//! ```ignore
//! #[global_allocator]
//! static A: hugemem::CountingAlloc = hugemem::CountingAlloc;
//! ```
//!
//! and compares [`thread_allocs`] before and after the path. Counts are per thread, so that
//! tests running side by side (and the harness's thread) do not count into each other's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting each allocation (and reallocation) of the calling thread.
pub struct CountingAlloc;

thread_local! {
    // Const-initialised with no destructor: reading it never allocates, even from the allocator.
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

/// Allocations the calling thread made so far through [`CountingAlloc`] (0 where it is not the
/// global allocator).
pub fn thread_allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

fn count() {
    // `try_with`: during thread teardown the slot may be gone; those allocations are not ours.
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, n) }
    }
}
