//! [`TaggedArc`]: a [`SlabArc`] and a 16-bit tag and a flag in one word, so that a cache line
//! holds eight references with enough of a key beside each to pass over the others without
//! following them.
//!
//! A slot starts a cache line, so its address leaves the low six bits free; user-space
//! addresses on x86-64 and AArch64 Linux are below 2^48 unless a mapping asks for more (five
//! levels of page tables), which leaves the top 16. A reference whose address does not fit is
//! refused ([`TaggedArc::new`]): its holder keeps it some other way.

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::num::NonZeroU64;
use std::ops::Deref;
use std::ptr::NonNull;

use crate::{SlabArc, Slabbed};

const TAG_SHIFT: u32 = 48;
const FLAG: u64 = 1;
/// The bits of a slot's address.
const ADDR: u64 = (1 << TAG_SHIFT) - 64;

/// A counted reference to a value in its slab (as [`SlabArc`], whose count it holds), a tag
/// and a flag, in one word that is never zero (so that `Option<TaggedArc<T>>` is one word).
pub struct TaggedArc<T: Slabbed> {
    word: NonZeroU64,
    _owns: PhantomData<SlabArc<T>>,
}

// SAFETY: it holds a `SlabArc<T>`, which is `Send` and `Sync`, and nothing else.
unsafe impl<T: Slabbed> Send for TaggedArc<T> {}
// SAFETY: as above.
unsafe impl<T: Slabbed> Sync for TaggedArc<T> {}

impl<T: Slabbed> TaggedArc<T> {
    /// `arc` with `tag` and `flag` beside it, or `arc` back when its address does not leave
    /// the tag's bits free.
    #[inline]
    pub fn new(arc: SlabArc<T>, tag: u16, flag: bool) -> Result<Self, SlabArc<T>> {
        let addr = SlabArc::as_ptr(&arc).addr() as u64;
        if addr & !ADDR != 0 {
            return Err(arc);
        }
        let raw = SlabArc::into_raw(arc);
        let word =
            raw.as_ptr().expose_provenance() as u64 | u64::from(tag) << TAG_SHIFT | u64::from(flag);
        Ok(TaggedArc {
            word: NonZeroU64::new(word).expect("a slot's address is not zero"),
            _owns: PhantomData,
        })
    }

    #[inline(always)]
    pub fn tag(&self) -> u16 {
        (self.word.get() >> TAG_SHIFT) as u16
    }

    #[inline(always)]
    pub fn flag(&self) -> bool {
        self.word.get() & FLAG != 0
    }

    #[inline(always)]
    fn raw(&self) -> NonNull<()> {
        let p = std::ptr::with_exposed_provenance_mut::<()>((self.word.get() & ADDR) as usize);
        // SAFETY: the address of a slot, not null (`new`).
        unsafe { NonNull::new_unchecked(p) }
    }

    /// The reference, borrowed: no count is taken.
    #[inline(always)]
    pub fn arc(&self) -> ArcRef<'_, T> {
        // SAFETY: the address `new` took from `into_raw`; the `ManuallyDrop` never gives the
        // count back, which stays this reference's.
        ArcRef {
            arc: ManuallyDrop::new(unsafe { SlabArc::from_raw(self.raw()) }),
            _borrows: PhantomData,
        }
    }

    /// Whether it refers to `arc`'s value.
    #[inline]
    pub fn refers_to(&self, arc: &SlabArc<T>) -> bool {
        self.raw().as_ptr().cast_const() == SlabArc::as_ptr(arc).cast()
    }
}

impl<T: Slabbed> Drop for TaggedArc<T> {
    fn drop(&mut self) {
        // SAFETY: the address `new` took from `into_raw`; its count is given back once, here.
        drop(unsafe { SlabArc::<T>::from_raw(self.raw()) });
    }
}

/// A [`TaggedArc`]'s reference, borrowed from it: a [`SlabArc`] to read or clone for as long as
/// the `TaggedArc` is borrowed.
pub struct ArcRef<'a, T: Slabbed> {
    arc: ManuallyDrop<SlabArc<T>>,
    _borrows: PhantomData<&'a TaggedArc<T>>,
}

impl<T: Slabbed> Deref for ArcRef<'_, T> {
    type Target = SlabArc<T>;
    #[inline(always)]
    fn deref(&self) -> &SlabArc<T> {
        &self.arc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Slab;
    use std::sync::Arc;

    struct Probe(Arc<()>, u64);
    static PROBES: Slab<Probe> = Slab::new();
    impl Slabbed for Probe {
        fn slab() -> &'static Slab<Probe> {
            &PROBES
        }
    }

    #[test]
    fn a_tagged_reference_keeps_its_count_tag_and_flag() {
        let shared = Arc::new(());
        let a = SlabArc::new(Probe(shared.clone(), 7));
        let b = SlabArc::new(Probe(shared.clone(), 8));
        let t = TaggedArc::new(a.clone(), 0xbeef, true).ok().expect("fits");
        let u = TaggedArc::new(b.clone(), 0, false).ok().expect("fits");
        assert_eq!(size_of::<Option<TaggedArc<Probe>>>(), 8);
        assert_eq!(
            (t.tag(), t.flag(), u.tag(), u.flag()),
            (0xbeef, true, 0, false)
        );
        assert!(t.refers_to(&a) && !t.refers_to(&b) && u.refers_to(&b));
        assert_eq!((t.arc().1, u.arc().1), (7, 8));
        let copy: SlabArc<Probe> = t.arc().clone();
        assert!(SlabArc::ptr_eq(&copy, &a));
        drop((a, b, copy));
        // The tagged references hold the values.
        assert_eq!(Arc::strong_count(&shared), 3);
        assert_eq!(
            u.arc().0.as_ref() as *const (),
            shared.as_ref() as *const ()
        );
        drop(t);
        assert_eq!(Arc::strong_count(&shared), 2);
        drop(u);
        assert_eq!(Arc::strong_count(&shared), 1);
        assert_eq!(PROBES.stats().in_use, 0);
    }
}
