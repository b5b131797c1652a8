//! Division-free remainders for the send loop: packet `k` of a stream is flow `k mod flows`
//! and frame `k mod period`, and a 64-bit division takes tens of cycles on most CPUs, too many
//! to spend on every packet. [`FastMod`] precomputes a divisor's reciprocal once so that each
//! remainder is two or three multiplications.

/// `a mod d` by multiplication (Lemire, Kaser & Kurz, "Faster remainder by direct computation",
/// 2019): with `M = ⌈2^F / d⌉` of `F` bits, `a mod d = ((M × a) mod 2^F) × d >> F`, exact for
/// every `a` and `d` below `2^(F/2)`. `F = 64` (two multiplications) while `a` and `d` fit 32
/// bits, as they do for the first 4 billion packets of a stream; `F = 128` beyond.
#[derive(Clone, Copy, Debug)]
pub(super) struct FastMod {
    d: u64,
    m: u128,
    /// `M` for `F = 64`, when `d` fits 32 bits (else 0, unused).
    m32: u64,
    small: bool,
}

impl FastMod {
    pub(super) fn new(d: u64) -> FastMod {
        let d = d.max(1);
        let small = d <= u64::from(u32::MAX);
        FastMod {
            d,
            // For d = 1 these wrap to 0, and the remainder comes out 0, as it should.
            m: (u128::MAX / u128::from(d)).wrapping_add(1),
            m32: if small {
                (u64::MAX / d).wrapping_add(1)
            } else {
                0
            },
            small,
        }
    }

    #[inline(always)]
    pub(super) fn rem(self, a: u64) -> u64 {
        if self.small && a >> 32 == 0 {
            let low = self.m32.wrapping_mul(a);
            return ((u128::from(low) * u128::from(self.d)) >> 64) as u64;
        }
        let low = self.m.wrapping_mul(u128::from(a));
        let d = u128::from(self.d);
        // (low × d) >> 128, from 64-bit halves.
        let hi = (low >> 64) * d;
        let lo = (u128::from(low as u64) * d) >> 64;
        ((hi + lo) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn fastmod_is_mod(a: u64, d in 1u64..) {
            prop_assert_eq!(FastMod::new(d).rem(a), a % d);
        }

        #[test]
        fn fastmod_small_divisors(a: u64, d in 1u64..5000) {
            prop_assert_eq!(FastMod::new(d).rem(a), a % d);
        }

        #[test]
        fn fastmod_32_bit(a: u32, d in 1u32..) {
            prop_assert_eq!(FastMod::new(d.into()).rem(a.into()), u64::from(a % d));
        }
    }

    #[test]
    fn fastmod_edges() {
        for d in [
            1u64,
            2,
            3,
            7,
            12,
            1000,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            for a in [0u64, 1, d - 1, d, d.wrapping_add(1), u64::MAX, u64::MAX - 1] {
                assert_eq!(FastMod::new(d).rem(a), a % d, "{a} % {d}");
            }
        }
    }
}
