//! [`HugeSlice`]: a fixed-length slice on transparent huge pages once it spans one.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use crate::map::{HUGE_PAGE, map_huge, unmap};

/// A slice of `len` values made with `T::default()`, fixed in length. From [`HUGE_PAGE`]
/// bytes on, it lives in its own mapping advised onto huge pages; below, or where mapping
/// fails, on the heap as a `Box<[T]>`.
pub struct HugeSlice<T> {
    ptr: NonNull<T>,
    len: usize,
    /// The mapping's length; 0: the slice is a `Box<[T]>`'s.
    mapped: usize,
}

// SAFETY: a `HugeSlice` owns its values as a `Box<[T]>` does.
unsafe impl<T: Send> Send for HugeSlice<T> {}
// SAFETY: shared, it gives only shared references to its values.
unsafe impl<T: Sync> Sync for HugeSlice<T> {}

impl<T> Default for HugeSlice<T> {
    /// An empty slice: no allocation.
    fn default() -> Self {
        HugeSlice {
            ptr: NonNull::dangling(),
            len: 0,
            mapped: 0,
        }
    }
}

impl<T: Default> HugeSlice<T> {
    pub fn new(len: usize) -> Self {
        // The mapping's length; None past the address space (the heap's path then refuses
        // the length as `Vec` does).
        let mapped = len
            .checked_mul(size_of::<T>())
            .and_then(|b| b.checked_next_multiple_of(HUGE_PAGE));
        if let Some(mapped) = mapped
            && len * size_of::<T>() >= HUGE_PAGE
            && align_of::<T>() <= HUGE_PAGE
            && let Some(p) = map_huge(mapped)
        {
            let ptr = p.cast::<T>();
            for i in 0..len {
                // SAFETY: slot `i` is within the mapping (`len * size_of::<T>()` bytes, at
                // most `mapped`) and aligned (the mapping is aligned to a huge page, at least
                // `T`'s alignment, and `T`'s size is a multiple of it); nothing was there to
                // drop.
                unsafe { ptr.add(i).write(T::default()) };
            }
            return HugeSlice { ptr, len, mapped };
        }
        let b: Box<[T]> = (0..len).map(|_| T::default()).collect();
        let len = b.len();
        HugeSlice {
            ptr: NonNull::from(Box::leak(b)).cast(),
            len,
            mapped: 0,
        }
    }
}

impl<T> HugeSlice<T> {
    /// Whether the slice is in a mapping advised onto huge pages (whether the kernel gave
    /// them is its own business: `AnonHugePages` in `/proc/self/smaps`).
    pub fn advised_huge(&self) -> bool {
        self.mapped != 0
    }
}

impl<T> Deref for HugeSlice<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised values at `ptr` (or `len` 0 and a dangling, aligned `ptr`),
        // borrowed as `self` is.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> DerefMut for HugeSlice<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, borrowed exclusively as `self` is.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for HugeSlice<T> {
    fn drop(&mut self) {
        let values = std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len);
        if self.mapped == 0 {
            // SAFETY: `ptr` and `len` are those of the `Box<[T]>` leaked in `new` (or the
            // empty slice of `default`, which a `Box` does not free); dropped once, here.
            drop(unsafe { Box::from_raw(values) });
        } else {
            // SAFETY: the values are initialised and dropped once, here; then the mapping of
            // `new`, which nothing else refers to, is unmapped.
            unsafe {
                std::ptr::drop_in_place(values);
                unmap(self.ptr.cast(), self.mapped);
            }
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for HugeSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A length whose bytes do not fit the address space is refused as `Vec` refuses it, not
    /// mapped as a wrapped-around size (which wrote past a mapping of 0 bytes).
    #[test]
    #[should_panic(expected = "capacity overflow")]
    fn a_length_past_the_address_space_is_refused() {
        #[derive(Default)]
        #[repr(align(64))]
        struct Line(#[allow(dead_code)] [u64; 8]);
        let _ = HugeSlice::<Line>::new(usize::MAX / 64 + 1);
    }

    #[test]
    fn small_and_large_slices_hold_their_values_and_drop_them() {
        let shared = Arc::new(());
        for len in [0, 3, HUGE_PAGE / 8 + 1] {
            let mut s: HugeSlice<Option<Arc<()>>> = HugeSlice::new(len);
            assert_eq!(s.len(), len);
            assert_eq!(s.advised_huge(), len * 8 >= HUGE_PAGE);
            assert!(s.iter().all(Option::is_none));
            for v in s.iter_mut() {
                *v = Some(shared.clone());
            }
            assert_eq!(Arc::strong_count(&shared), len + 1);
            drop(s);
            assert_eq!(Arc::strong_count(&shared), 1);
        }
    }
}
