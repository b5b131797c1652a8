//! A packet's buffer: memory of the switch's own (a boxed slice, which the pools recycle), or a
//! **foreign** buffer, memory a port's driver owns and lends for as long as the packet lives,
//! so that a frame can cross the switch where it was received. DPDK ports are the foreign
//! owner: their mbufs are laid out as the switch lays out its buffers (the metadata areas in
//! the mbuf's private area, then DPDK's headroom and the frame), so a packet can use one as
//! its buffer and a DPDK port can send it without a copy.
//!
//! A foreign buffer goes back to its owner through the release function the owner registered
//! ([`ForeignOwner::register`]) when the packet is dropped or freed to a pool, or it is handed
//! back whole by the port that sends it ([`super::Packet::into_foreign`]).

use std::ptr::NonNull;
use std::sync::OnceLock;

/// How a foreign buffer goes back to its owner: called with the buffer's start (what
/// [`super::Packet::from_foreign`] was given) once the switch is done with it.
pub type ReleaseFn = unsafe fn(NonNull<u8>);

static RELEASE: OnceLock<ReleaseFn> = OnceLock::new();

/// Proof that a release function for foreign buffers is registered: needed to make a packet
/// of a foreign buffer.
#[derive(Clone, Copy, Debug)]
pub struct ForeignOwner(());

impl ForeignOwner {
    /// Registers `release` as the way foreign buffers go back (once per process: a second
    /// call keeps the first function and succeeds only if it is the same one).
    pub fn register(release: ReleaseFn) -> Option<ForeignOwner> {
        let f = *RELEASE.get_or_init(|| release);
        std::ptr::fn_addr_eq(f, release).then_some(ForeignOwner(()))
    }
}

/// The buffer: a pointer, a length and whose memory it is. Sixteen bytes, as a boxed slice.
pub(super) struct Buf {
    ptr: NonNull<u8>,
    len: u32,
    foreign: bool,
}

// SAFETY: a Buf owns its memory alone (a boxed slice, or a foreign buffer lent to it until it
// is released), so moving it to another thread moves that ownership; foreign owners' release
// functions may be called from any thread (ForeignOwner::register's contract is the owner's).
unsafe impl Send for Buf {}
// SAFETY: shared references give read-only access to bytes nothing else writes.
unsafe impl Sync for Buf {}

impl Buf {
    /// `len` zeroed bytes of the switch's own.
    pub(super) fn zeroed(len: usize) -> Buf {
        let b = vec![0u8; len].into_boxed_slice();
        let len = u32::try_from(b.len()).expect("buffers are under 4 GiB");
        let ptr = NonNull::new(Box::into_raw(b).cast::<u8>()).expect("a box is never null");
        Buf {
            ptr,
            len,
            foreign: false,
        }
    }

    /// No buffer (nothing allocated).
    pub(super) fn empty() -> Buf {
        Buf {
            ptr: NonNull::dangling(),
            len: 0,
            foreign: false,
        }
    }

    /// A foreign buffer of `len` bytes at `ptr`.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `len` bytes, all initialized, used by nothing
    /// else until the buffer is released through the registered function (which `_owner`
    /// proves exists) or taken back with [`Buf::into_foreign`].
    pub(super) unsafe fn foreign(_owner: ForeignOwner, ptr: NonNull<u8>, len: u32) -> Buf {
        Buf {
            ptr,
            len,
            foreign: true,
        }
    }

    /// Whether the memory is a foreign owner's.
    #[inline]
    pub(super) fn is_foreign(&self) -> bool {
        self.foreign
    }

    /// Gives a foreign buffer back to the caller without releasing it: its start. `None` (and
    /// the buffer is dropped as usual) for memory of the switch's own.
    pub(super) fn into_foreign(self) -> Option<NonNull<u8>> {
        if !self.foreign {
            return None;
        }
        let ptr = self.ptr;
        std::mem::forget(self);
        Some(ptr)
    }
}

impl std::ops::Deref for Buf {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialized bytes (a boxed slice's, or a foreign
        // buffer's by `Buf::foreign`'s contract) for as long as the Buf lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len as usize) }
    }
}

impl std::ops::DerefMut for Buf {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for Deref; the Buf is borrowed mutably, and nothing else uses its memory.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len as usize) }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        if self.foreign {
            let release = RELEASE
                .get()
                .expect("a foreign buffer exists only once its owner registered");
            // SAFETY: the buffer was lent until released, and it is released once, here.
            unsafe { release(self.ptr) };
        } else {
            let slice = std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len as usize);
            // SAFETY: ptr and len are those of a boxed slice made by `Buf::zeroed` (or a
            // dangling pointer with length 0, which a boxed empty slice also has) and owned
            // by this Buf alone.
            drop(unsafe { Box::from_raw(slice) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_buffers_are_boxed_slices_and_an_empty_one_allocates_nothing() {
        let mut b = Buf::zeroed(100);
        assert_eq!(b.len(), 100);
        b[99] = 7;
        assert_eq!(b[99], 7);
        assert!(!b.is_foreign());
        assert!(b.into_foreign().is_none());
        let e = Buf::empty();
        assert!(e.is_empty());
        assert_eq!(std::mem::size_of::<Buf>(), 16);
    }
}
