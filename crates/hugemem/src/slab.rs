//! [`SlabArc`]: a reference-counted value (as `Arc`, without weak references) allocated from
//! its type's process-wide [`Slab`]. The slab carves slots out of chunks that double in size,
//! the first few on the heap and, from [`HUGE_PAGE`] on, mappings advised onto huge pages, so
//! that a million values lie on a few hundred huge pages rather than tens of thousands of
//! small ones. A freed slot goes to the slab's free list and is the next one given: the
//! chunks are kept for the process's life (as a heap keeps what it grew by).

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::Deref;
use std::ptr::{NonNull, null_mut};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering, fence};

use crate::map::{HUGE_PAGE, map_huge};

/// The first chunk's size; each next one is twice the last, up to [`MAX_CHUNK`].
const FIRST_CHUNK: usize = 64 << 10;
const MAX_CHUNK: usize = 64 << 20;

/// A type whose values are allocated from one process-wide slab.
pub trait Slabbed: Sized + Send + Sync + 'static {
    fn slab() -> &'static Slab<Self>;
}

/// A value and its reference count; while free, the value's first word links the free list.
/// A slot starts a cache line, and the value the slot: a value laid out for its lines (what
/// is read together on one) keeps them; the count goes in the last line's spare bytes when
/// the value leaves a word there.
#[repr(C, align(64))]
struct Slot<T> {
    value: UnsafeCell<MaybeUninit<T>>,
    count: AtomicUsize,
}

/// The bytes a value of `T` takes in its slab: a whole number of cache lines.
pub const fn slot_bytes<T>() -> usize {
    size_of::<Slot<T>>()
}

/// The slots of values of `T`: see the module's documentation.
///
/// A value must fit the first chunk, so that every chunk holds at least one slot; a larger
/// type is refused when the program is built:
///
/// ```compile_fail
/// use hugemem::{Slab, SlabArc, Slabbed};
/// struct Big([u8; 100_000]);
/// static BIG: Slab<Big> = Slab::new();
/// impl Slabbed for Big {
///     fn slab() -> &'static Slab<Big> {
///         &BIG
///     }
/// }
/// let _ = SlabArc::new(Big([0; 100_000]));
/// ```
pub struct Slab<T> {
    state: Mutex<State<T>>,
}

struct State<T> {
    /// The free list's first slot (null: none).
    free: *mut Slot<T>,
    /// The current chunk's next slot never given, and its end.
    bump: *mut Slot<T>,
    end: *mut Slot<T>,
    /// The next chunk's size.
    next_chunk: usize,
    stats: SlabStats,
}

// SAFETY: the pointers are to slots of chunks the slab owns for the process's life; they are
// only followed under the slab's lock, and the values they hold are `Send`.
unsafe impl<T: Send> Send for State<T> {}

/// What a slab holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlabStats {
    /// Values alive.
    pub in_use: usize,
    /// Bytes of a slot (value and count).
    pub slot_bytes: usize,
    /// Bytes of the chunks, and of those advised onto huge pages.
    pub bytes: usize,
    pub huge_bytes: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Slab<T> {
    pub const fn new() -> Self {
        Slab {
            state: Mutex::new(State {
                free: null_mut(),
                bump: null_mut(),
                end: null_mut(),
                next_chunk: FIRST_CHUNK,
                stats: SlabStats {
                    in_use: 0,
                    slot_bytes: size_of::<Slot<T>>(),
                    bytes: 0,
                    huge_bytes: 0,
                },
            }),
        }
    }

    pub fn stats(&self) -> SlabStats {
        self.lock().stats
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<T>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot no one refers to, its value uninitialised.
    fn take(&self) -> NonNull<Slot<T>> {
        const { assert!(size_of::<T>() >= size_of::<usize>()) };
        // Every chunk holds at least one slot: `grow` makes `bump` short of `end`.
        const { assert!(size_of::<Slot<T>>() <= FIRST_CHUNK) };
        let mut s = self.lock();
        let slot = if let Some(slot) = NonNull::new(s.free) {
            // SAFETY: a free slot's value holds the next free slot (`give`), and the slot is
            // in a chunk the slab keeps.
            s.free = unsafe { (*slot.as_ptr()).value.get().cast::<*mut Slot<T>>().read() };
            slot
        } else {
            if s.bump >= s.end {
                s.grow();
            }
            let slot = s.bump;
            // SAFETY: `bump` is before `end` (a chunk holds at least one slot), in the same
            // chunk.
            s.bump = unsafe { slot.add(1) };
            NonNull::new(slot).expect("a chunk's slot")
        };
        s.stats.in_use += 1;
        slot
    }

    /// Takes back a slot whose value was dropped.
    ///
    /// # Safety
    /// `slot` is one of this slab's, from `take`, and nothing refers to it any more.
    unsafe fn give(&self, slot: NonNull<Slot<T>>) {
        let mut s = self.lock();
        s.stats.in_use -= 1;
        // SAFETY: the slot is the slab's and no one else's; its value's first word (at least
        // a word: `take`) links it into the free list.
        unsafe {
            (*slot.as_ptr())
                .value
                .get()
                .cast::<*mut Slot<T>>()
                .write(s.free)
        };
        s.free = slot.as_ptr();
    }
}

impl<T> State<T> {
    /// Makes the next chunk the current one.
    fn grow(&mut self) {
        let bytes = self.next_chunk;
        self.next_chunk = (bytes * 2).min(MAX_CHUNK);
        let huge = if bytes >= HUGE_PAGE {
            map_huge(bytes)
        } else {
            None
        };
        self.stats.bytes += bytes;
        let base = match huge {
            Some(p) => {
                self.stats.huge_bytes += bytes;
                p
            }
            None => {
                let layout = std::alloc::Layout::from_size_align(bytes, align_of::<Slot<T>>())
                    .expect("a chunk's layout");
                // SAFETY: the layout's size is not zero. The chunk is never freed.
                NonNull::new(unsafe { std::alloc::alloc(layout) })
                    .unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
            }
        };
        let slots = bytes / size_of::<Slot<T>>();
        debug_assert!(slots > 0, "a chunk holds a slot");
        self.bump = base.as_ptr().cast();
        // SAFETY: `slots` slots fit the chunk's `bytes`.
        self.end = unsafe { self.bump.add(slots) };
    }
}

/// A shared reference to a value in its type's slab, freed (its slot given back) when the
/// last one is dropped: `Arc`'s semantics without weak references, in one word.
pub struct SlabArc<T: Slabbed> {
    slot: NonNull<Slot<T>>,
    _owns: PhantomData<T>,
}

// SAFETY: as `Arc<T>`: the value is shared between threads (`Sync`) and dropped by whichever
// thread lets go of it last (`Send`), both of which `Slabbed` requires.
unsafe impl<T: Slabbed> Send for SlabArc<T> {}
// SAFETY: as above.
unsafe impl<T: Slabbed> Sync for SlabArc<T> {}

impl<T: Slabbed> SlabArc<T> {
    pub fn new(value: T) -> Self {
        let slot = T::slab().take();
        // SAFETY: `take` gives a slot no one refers to; it is initialised here before any
        // reference to it exists.
        unsafe {
            let s = slot.as_ptr();
            std::ptr::addr_of_mut!((*s).count).write(AtomicUsize::new(1));
            (*s).value.get().write(MaybeUninit::new(value));
        }
        SlabArc {
            slot,
            _owns: PhantomData,
        }
    }

    #[inline(always)]
    fn slot(&self) -> &Slot<T> {
        // SAFETY: the slot stays allocated and initialised while a reference counts in it.
        unsafe { self.slot.as_ref() }
    }

    /// The value, mutable, if this is its only reference.
    pub fn get_mut(this: &mut Self) -> Option<&mut T> {
        if this.slot().count.load(Ordering::Acquire) != 1 {
            return None;
        }
        // SAFETY: the only reference, borrowed exclusively: no one else reads the value.
        Some(unsafe { (*this.slot().value.get()).assume_init_mut() })
    }

    /// Whether both refer to the same value.
    #[inline]
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.slot == b.slot
    }

    /// The address of the slot (which starts a cache line).
    #[inline]
    pub(crate) fn as_ptr(this: &Self) -> *const () {
        this.slot.as_ptr().cast_const().cast()
    }

    /// The reference as its slot's address, its count kept (for [`crate::TaggedArc`]).
    #[inline]
    pub(crate) fn into_raw(this: Self) -> NonNull<()> {
        let slot = this.slot;
        std::mem::forget(this);
        slot.cast()
    }

    /// The reference [`Self::into_raw`] gave as `raw`.
    ///
    /// # Safety
    /// `raw` is from `into_raw` of a `SlabArc<T>`, and the count it kept is taken back once.
    #[inline]
    pub(crate) unsafe fn from_raw(raw: NonNull<()>) -> Self {
        SlabArc {
            slot: raw.cast(),
            _owns: PhantomData,
        }
    }
}

impl<T: Slabbed> Deref for SlabArc<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: initialised while a reference counts; only read through shared references
        // unless `get_mut` found this one alone.
        unsafe { (*self.slot().value.get()).assume_init_ref() }
    }
}

impl<T: Slabbed> Clone for SlabArc<T> {
    #[inline]
    fn clone(&self) -> Self {
        // Relaxed as `Arc`'s: a new reference is made from one already held.
        if self.slot().count.fetch_add(1, Ordering::Relaxed) > isize::MAX as usize {
            std::process::abort();
        }
        SlabArc {
            slot: self.slot,
            _owns: PhantomData,
        }
    }
}

impl<T: Slabbed> Drop for SlabArc<T> {
    fn drop(&mut self) {
        if self.slot().count.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // The other references' uses of the value happen before it is dropped (as `Arc`).
        fence(Ordering::Acquire);
        // SAFETY: the last reference: the value is dropped once, and the slot, which nothing
        // refers to any more, goes back to its slab.
        unsafe {
            std::ptr::drop_in_place((*self.slot().value.get()).as_mut_ptr());
            T::slab().give(self.slot);
        }
    }
}

impl<T: Slabbed + std::fmt::Debug> std::fmt::Debug for SlabArc<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A value that counts its copies alive (in its `Arc`), and its number.
    #[derive(Debug)]
    struct Probe(#[allow(dead_code)] Arc<()>, u64);

    static PROBES: Slab<Probe> = Slab::new();
    impl Slabbed for Probe {
        fn slab() -> &'static Slab<Probe> {
            &PROBES
        }
    }

    #[test]
    fn values_are_shared_dropped_once_and_their_slots_reused() {
        let shared = Arc::new(());
        let n = 3 * HUGE_PAGE / size_of::<Slot<Probe>>();
        let mut all: Vec<SlabArc<Probe>> = (0..n as u64)
            .map(|i| SlabArc::new(Probe(shared.clone(), i)))
            .collect();
        assert_eq!(Arc::strong_count(&shared), n + 1);
        let st = PROBES.stats();
        assert_eq!(st.in_use, n);
        assert!(st.huge_bytes > 0 && st.bytes >= n * st.slot_bytes);
        let copy = all[5].clone();
        assert!(SlabArc::ptr_eq(&copy, &all[5]) && !SlabArc::ptr_eq(&copy, &all[6]));
        assert!(SlabArc::get_mut(&mut all[5]).is_none());
        drop(copy);
        SlabArc::get_mut(&mut all[5]).expect("alone").1 = 55;
        assert_eq!(all[5].1, 55);
        assert!(
            all.iter()
                .enumerate()
                .all(|(i, p)| i == 5 || p.1 == i as u64)
        );
        let threads: Vec<_> = all
            .drain(n / 2..)
            .collect::<Vec<_>>()
            .chunks(1000)
            .map(|c| {
                let c = c.to_vec();
                std::thread::spawn(move || drop(c))
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(Arc::strong_count(&shared), n / 2 + 1);
        let bytes = PROBES.stats().bytes;
        let again: Vec<_> = (0..n - n / 2)
            .map(|i| SlabArc::new(Probe(shared.clone(), i as u64)))
            .collect();
        assert_eq!(PROBES.stats().bytes, bytes, "freed slots are reused");
        drop(all);
        drop(again);
        assert_eq!(Arc::strong_count(&shared), 1);
        assert_eq!(PROBES.stats().in_use, 0);
    }
}
