//! The datapath hash: CRC32C (Castagnoli, RFC 3720 polynomial 0x1EDC6F41) folded over 8-byte
//! words.
//!
//! On x86-64 with SSE4.2 (the build's baseline, see `.cargo/config.toml`) each word costs one
//! `crc32q` instruction. Elsewhere a table-driven fallback computes the same value, so hashes
//! agree across builds. Like the instruction, these functions do no pre- or post-inversion; see
//! [`crc32c`] for the standard checksum.

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

/// The portable fallback of [`crc32c_u64`].
#[inline]
pub fn crc32c_u64_soft(crc: u32, word: u64) -> u32 {
    crc32c_update_soft(crc, &word.to_le_bytes())
}

/// Folds bytes into `crc` with the portable table (no inversion).
pub fn crc32c_update_soft(mut crc: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        crc = TABLE[((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// The standard CRC32C checksum of `bytes` (initial value and final XOR 0xffffffff).
pub fn crc32c(bytes: &[u8]) -> u32 {
    !crc32c_update_soft(!0, bytes)
}

/// Reflected polynomial of CRC32C.
const POLY: u32 = 0x82f6_3b78;

const TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn standard_check_value() {
        // The CRC-32C check value from the catalogue of parametrised CRC algorithms.
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }

    proptest! {
        #[test]
        fn hardware_and_fallback_agree(crc: u32, word: u64) {
            prop_assert_eq!(crc32c_u64(crc, word), crc32c_u64_soft(crc, word));
        }
    }
}
