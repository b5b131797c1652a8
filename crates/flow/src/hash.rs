//! The datapath hash: CRC32C (Castagnoli, RFC 3720 polynomial 0x1EDC6F41) folded over 8-byte
//! words.
//!
//! On x86-64 with SSE4.2 (the build's baseline, see `.cargo/config.toml`) each word costs one
//! `crc32q` instruction. Elsewhere a table-driven fallback computes the same value, so hashes
//! agree across builds. Like the instruction, these functions do no pre- or post-inversion.

/// Folds one word into `crc` (the `crc32q` instruction: the word's little-endian bytes).
#[inline(always)]
pub fn crc32c_u64(crc: u32, word: u64) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse4.2"))]
    #[allow(unsafe_code)]
    {
        // SAFETY: the intrinsic only needs the CPU to implement SSE4.2, and this branch is
        // compiled only when the build's target features include SSE4.2 (`cfg` above), so every
        // CPU this binary is allowed to run on has it. This is the datapath's per-word hash: the
        // one measured hot spot where `flow` uses `unsafe`.
        unsafe { core::arch::x86_64::_mm_crc32_u64(crc as u64, word) as u32 }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse4.2")))]
    {
        crc32c_u64_soft(crc, word)
    }
}

/// Asks the CPU to bring the cache line holding `*r` towards its L1 cache (a hint: no effect
/// on what the program computes). For hash-table walks that look up a burst's keys: the lines
/// of all of them are asked for first, so that their misses overlap.
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    prefetch_addr::<false>((r as *const T).cast());
}

/// Asks the CPU to load the cache line at `p`, for writing when `WRITE` (`PREFETCHW`: the line
/// comes exclusive, so a store into it does not wait for another core's copy to be
/// invalidated). Any address is harmless: a prefetch never faults and is never dereferenced,
/// so `p` need not point into anything.
#[inline(always)]
pub fn prefetch_addr<const WRITE: bool>(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    // SAFETY: a prefetch reads nothing the program sees and never faults, whatever the
    // address. SSE (and PREFETCHW, a no-op where absent) is in every x86-64 CPU.
    unsafe {
        use core::arch::x86_64::{_MM_HINT_ET0, _MM_HINT_T0, _mm_prefetch};
        if WRITE {
            _mm_prefetch::<_MM_HINT_ET0>(p.cast());
        } else {
            _mm_prefetch::<_MM_HINT_T0>(p.cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The portable fallback of [`crc32c_u64`]: `wire`'s table-driven CRC32C on the word's bytes.
#[inline]
pub fn crc32c_u64_soft(crc: u32, word: u64) -> u32 {
    wire::checksum::crc32c_update(crc, &word.to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn standard_check_value() {
        // The CRC-32C check value from the catalogue of parametrised CRC algorithms, through
        // the word function: "12345678" then "9" with the standard inversions.
        let w = u64::from_le_bytes(*b"12345678");
        let c = wire::checksum::crc32c_update(crc32c_u64(!0, w), b"9");
        assert_eq!(!c, 0xe306_9283);
    }

    proptest! {
        #[test]
        fn hardware_and_fallback_agree(crc: u32, word: u64) {
            prop_assert_eq!(crc32c_u64(crc, word), crc32c_u64_soft(crc, word));
        }
    }
}
