//! Memory placement for the large structures of the per-packet path: regions that ask the
//! kernel for transparent huge pages (`madvise(MADV_HUGEPAGE)`), so that a table of hundreds
//! of megabytes is reached through a few TLB entries instead of one per 4 KiB page.
//!
//! - [`HugeSlice`]: a fixed-length slice, on such a region once it spans a huge page.
//! - [`Slab`] and [`SlabArc`]: reference-counted values allocated from a process-wide slab
//!   whose chunks, past the first few small ones, are such regions.
//! - [`TaggedArc`]: a [`SlabArc`] and a few bits beside it in one word, for caches whose
//!   lines hold as many references as they can.
//! - [`CountingAlloc`]: the system allocator counting each thread's allocations, for the
//!   tests that check a path allocates nothing.
//!
//! Huge pages are advice: where the kernel gives none (THP `never`, no free huge page), the
//! memory is ordinary and everything works the same. Regions below a huge page stay on the
//! ordinary heap, so that small tables do not grow the resident memory in 2 MiB steps.
//!
//! The crate holds the `unsafe` code this takes (mappings, slots initialised and dropped in
//! place), each block with its `SAFETY` reasoning; its users stay safe.

mod counting;
mod map;
mod slab;
mod slice;
mod tagged;

pub use counting::{CountingAlloc, thread_allocs};
pub use map::HUGE_PAGE;
pub use slab::{Slab, SlabArc, SlabStats, Slabbed, slot_bytes};
pub use slice::HugeSlice;
pub use tagged::{ArcRef, TaggedArc};
