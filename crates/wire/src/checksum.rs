//! Checksums: the Internet checksum (RFC 1071), its incremental update (RFC 1624), the TCP/UDP/
//! ICMPv6 pseudo-headers (RFC 9293 §3.1, RFC 768, RFC 8200 §8.1), and CRC32C (Castagnoli, RFC 3309)
//! as SCTP uses it.
//!
//! Internet-checksum values here are ones'-complement *sums* folded to 16 bits unless a function
//! says it returns a checksum; the checksum written to a header is `!combine(&[...])`.

use crate::IpProtocol;
use core::net::{Ipv4Addr, Ipv6Addr};

/// Adds with end-around carry, the ones'-complement addition the Internet checksum is built on.
#[inline]
fn add64(acc: u64, x: u64) -> u64 {
    let (s, carry) = acc.overflowing_add(x);
    s + u64::from(carry)
}

#[inline]
fn fold(acc: u64) -> u16 {
    // 2^16 ≡ 1 (mod 2^16 - 1), so folding the high half onto the low half keeps the sum: to
    // 32 bits with end-around carry, then the two 16-bit halves added in the high half of
    // `s + (s rotated by 16)`, whose low half's carry is the end-around carry (as Linux's
    // `csum_fold`). A non-zero sum never folds to zero, so the result is what a loop folding
    // until it fits would give.
    let s = fold32(acc);
    (s.wrapping_add(s.rotate_right(16)) >> 16) as u16
}

/// Folds a 64-bit ones'-complement sum to 32 bits (end-around carry).
#[inline]
fn fold32(acc: u64) -> u32 {
    let (s, c) = (acc as u32).overflowing_add((acc >> 32) as u32);
    s + u32::from(c)
}

/// Ones'-complement sum (RFC 1071) of `data` read as big-endian 16-bit words, folded to 16 bits
/// and not inverted. An odd trailing byte is padded with a zero byte, as RFC 1071 specifies.
#[inline]
pub fn data(data: &[u8]) -> u16 {
    finish_native(sum_native(data))
}

/// The ones'-complement sum of `data` as it lies in memory, partly folded (below 2^32): 64-bit
/// words in the host's byte order, a trailing odd byte as the high half of a big-endian word.
/// Such sums of pieces that each start at an even offset add up (with `+`, a few billion of
/// them) to the sum of the whole; [`finish_native`] folds it. The sum is byte-order independent (RFC 1071 §2(B)): folded and byte-swapped on a
/// little-endian host it is the big-endian sum, and a sum of 32-bit words is congruent to
/// the 16-bit sum modulo 2^16 - 1, which is all the folded result depends on.
#[inline]
pub fn sum_native(data: &[u8]) -> u64 {
    let (words, rest) = data.as_chunks::<8>();
    let mut acc = if words.len() < LONG_WORDS {
        // 64-bit words into 128 bits: an add and an add-with-carry per word.
        let mut wide: u128 = 0;
        for w in words {
            wide += u128::from(u64::from_ne_bytes(*w));
        }
        add64(wide as u64, (wide >> 64) as u64)
    } else {
        sum_long(words)
    };
    let (halves, tail) = rest.as_chunks::<4>();
    if let [h] = halves {
        acc = add64(acc, u64::from(u32::from_ne_bytes(*h)));
    }
    if let [a, b, ..] = tail {
        acc = add64(acc, u64::from(u16::from_ne_bytes([*a, *b])));
    }
    if tail.len() & 1 == 1 {
        // The odd byte is the high half of a big-endian word: [b, 0] in memory order.
        acc = add64(
            acc,
            u64::from(u16::from_ne_bytes([tail[tail.len() - 1], 0])),
        );
    }
    // Keep room for callers to add a few more such sums without overflow.
    u64::from(fold32(acc))
}

/// From this many 64-bit words on, [`sum_native`] sums in four chains ([`sum_long`]).
const LONG_WORDS: usize = 16;

/// The ones'-complement sum of `words` (at least [`LONG_WORDS`]), with end-around carry, into
/// four 128-bit sums side by side: one chain waits a cycle per word (its add-with-carry on the
/// previous), four keep the adder busy, which a long frame's checksum notices. Out of line: its
/// registers would cost the short spans a prologue.
#[inline(never)]
fn sum_long(words: &[[u8; 8]]) -> u64 {
    let (quads, rest) = words.as_chunks::<4>();
    let mut wide = [0u128; 4];
    for q in quads {
        for (acc, w) in wide.iter_mut().zip(q) {
            *acc += u128::from(u64::from_ne_bytes(*w));
        }
    }
    for (acc, w) in wide.iter_mut().zip(rest) {
        *acc += u128::from(u64::from_ne_bytes(*w));
    }
    // Each sum is below 2^64 * 2^59 (a slice has fewer than 2^59 words): its halves fold with
    // end-around carry.
    wide.iter()
        .fold(0, |acc, &x| add64(add64(acc, x as u64), (x >> 64) as u64))
}

/// The 16-bit big-endian value `v` as [`sum_native`] would count it (a header field that is
/// not in the buffer, such as a pseudo-header's length).
#[inline]
pub fn native_u16(v: u16) -> u64 {
    u64::from(u16::from_ne_bytes(v.to_be_bytes()))
}

/// Whether the TCP or UDP checksum of `l4` (a segment or datagram of `len` bytes, under 64 KiB,
/// its checksum field included) is right, given `addr_sum`, the pseudo-header's addresses as
/// [`sum_native`] counts them: the addresses, the protocol, the length and the bytes in one
/// sum, folded once. The caller's `len` (a header's length field it checked) spares
/// recomputing it from the slice.
#[inline(always)]
pub fn l4_ok_native(addr_sum: u64, protocol: u8, len: u16, l4: &[u8]) -> bool {
    let sum = addr_sum + native_u16(u16::from(protocol)) + native_u16(len) + sum_native(l4);
    finish_native(sum) == 0xffff
}

/// Folds a [`sum_native`] sum to the 16-bit sum of the big-endian words, as [`data`] gives it.
/// A result of 0xffff (a correct checksum included) is the same in either byte order.
#[inline]
pub fn finish_native(acc: u64) -> u16 {
    let folded = fold(acc);
    if cfg!(target_endian = "little") {
        folded.swap_bytes()
    } else {
        folded
    }
}

/// Ones'-complement sum of several partial sums.
#[inline]
pub fn combine(sums: &[u16]) -> u16 {
    fold(sums.iter().fold(0u64, |acc, &s| acc + u64::from(s)))
}

/// Partial sum of the IPv4 pseudo-header (source, destination, zero, protocol, length).
#[inline]
pub fn pseudo_header_v4(src: &Ipv4Addr, dst: &Ipv4Addr, protocol: IpProtocol, length: u16) -> u16 {
    let s = u64::from(src.to_bits());
    let d = u64::from(dst.to_bits());
    fold(s + d + u64::from(protocol.0) + u64::from(length))
}

/// Partial sum of the IPv6 pseudo-header (RFC 8200 §8.1): source, destination, 32-bit
/// upper-layer length, and next header (the upper-layer protocol, not an extension header).
#[inline]
pub fn pseudo_header_v6(src: &Ipv6Addr, dst: &Ipv6Addr, protocol: IpProtocol, length: u32) -> u16 {
    let s = src.to_bits();
    let d = dst.to_bits();
    let words = [(s >> 64) as u64, s as u64, (d >> 64) as u64, d as u64];
    let acc = words.iter().fold(0u64, |acc, &w| add64(acc, w));
    let acc = add64(acc, u64::from(length));
    fold(add64(acc, u64::from(protocol.0)))
}

/// Incremental update of a checksum after a 16-bit word changes from `old` to `new`, by RFC 1624
/// eqn. 3: `HC' = ~(~HC + ~m + m')`. Equation 3 (rather than RFC 1141's eqn. 2) is the one that
/// never yields `0xffff` where a full recomputation would yield `0x0000`.
#[inline]
pub fn update16(checksum: u16, old: u16, new: u16) -> u16 {
    !combine(&[!checksum, !old, new])
}

/// Incremental update after a 32-bit field (an IPv4 address, a TCP sequence number) aligned on a
/// 16-bit boundary changes from `old` to `new`.
#[inline]
pub fn update32(checksum: u16, old: u32, new: u32) -> u16 {
    !combine(&[
        !checksum,
        !((old >> 16) as u16),
        !(old as u16),
        (new >> 16) as u16,
        new as u16,
    ])
}

/// Incremental update after the bytes `old` were replaced by `new` (an IPv6 address, a MAC in an
/// ND option). Both must start at an even offset of the checksummed data and have equal length;
/// the sum of the complements is the complement of the sum, so each side is summed once.
#[inline]
pub fn update_bytes(checksum: u16, old: &[u8], new: &[u8]) -> u16 {
    !combine(&[!checksum, !data(old), data(new)])
}

/// The reflected Castagnoli polynomial 0x1EDC6F41 (RFC 3309 §4).
const CRC32C_POLY: u32 = 0x82f6_3b78;

/// Slicing-by-8 tables: `T[0]` is the classic byte table, `T[k][i]` advances `T[0][i]` by `k`
/// more zero bytes, so eight input bytes are folded in per step.
const fn crc32c_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ CRC32C_POLY
            } else {
                c >> 1
            };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut j = 1;
        while j < 8 {
            let prev = t[j - 1][i];
            t[j][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            j += 1;
        }
        i += 1;
    }
    t
}

static CRC32C_TABLES: [[u32; 256]; 8] = crc32c_tables();

/// Streaming CRC32C (iSCSI / SCTP polynomial, reflected, initial value and final XOR `!0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crc32c {
    state: u32,
}

impl Crc32c {
    /// A fresh computation.
    #[inline]
    pub const fn new() -> Self {
        Crc32c { state: !0 }
    }

    /// Feeds `data`.
    pub fn update(&mut self, data: &[u8]) {
        self.state = crc32c_update(self.state, data);
    }

    /// The CRC of everything fed so far.
    #[inline]
    pub const fn finish(&self) -> u32 {
        !self.state
    }
}

/// Folds `data` into a raw CRC32C register, without the initial and final inversions: the
/// operation of x86's `crc32` instruction, which the datapath hash builds on.
pub fn crc32c_update(state: u32, data: &[u8]) -> u32 {
    let t = &CRC32C_TABLES;
    let mut crc = state;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let lo = u32::from_le_bytes([c[0], c[1], c[2], c[3]]) ^ crc;
        let hi = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
        crc = t[7][(lo & 0xff) as usize]
            ^ t[6][((lo >> 8) & 0xff) as usize]
            ^ t[5][((lo >> 16) & 0xff) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xff) as usize]
            ^ t[2][((hi >> 8) & 0xff) as usize]
            ^ t[1][((hi >> 16) & 0xff) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        crc = t[0][((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

impl Default for Crc32c {
    fn default() -> Self {
        Self::new()
    }
}

/// CRC32C of `data` in one call.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut c = Crc32c::new();
    c.update(data);
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fold by its definition: high half onto low half until the sum fits 16 bits.
    fn fold_by_loop(mut acc: u64) -> u16 {
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    #[test]
    fn fold_is_the_end_around_carry_sum_at_the_edges() {
        for acc in [
            0,
            1,
            0xffff,
            0x1_0000,
            0x1_fffe,
            0xffff_ffff,
            0x1_0000_0000,
            0xffff_0001,
            0x0001_ffff,
            0xfffe_0001,
            u64::MAX,
            u64::MAX - 1,
            0x8000_0000_8000_0000,
        ] {
            assert_eq!(fold(acc), fold_by_loop(acc), "{acc:#x}");
        }
    }

    proptest::proptest! {
        #[test]
        fn fold_is_the_end_around_carry_sum(acc: u64) {
            proptest::prop_assert_eq!(fold(acc), fold_by_loop(acc));
        }
    }

    /// Bit-at-a-time reference CRC32C, to check the sliced tables against.
    fn crc32c_bitwise(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ CRC32C_POLY
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 numerical example: the sum of these bytes is 0xddf2.
        assert_eq!(
            data(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0xddf2
        );
        // Odd length: trailing byte is the high half of a word.
        assert_eq!(data(&[0x01]), 0x0100);
        assert_eq!(data(&[]), 0);
        // Carries wrap around.
        assert_eq!(data(&[0xff, 0xff, 0x00, 0x01]), 0x0001);
    }

    #[test]
    fn wide_sum_equals_word_sum() {
        let buf: Vec<u8> = (0..1001u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        // All ones: every 64-bit addition carries.
        let ones = [0xffu8; 200];
        let lens = (0..=140).chain([999, 1000, 1001]);
        for (len, b) in lens
            .map(|l| (l, &buf[..l]))
            .chain((0..=200).map(|l| (l, &ones[..l])))
        {
            let mut acc: u32 = 0;
            for w in b.chunks(2) {
                let v = if w.len() == 2 {
                    u16::from_be_bytes([w[0], w[1]])
                } else {
                    u16::from(w[0]) << 8
                };
                acc += u32::from(v);
                acc = (acc & 0xffff) + (acc >> 16);
            }
            assert_eq!(data(b), acc as u16, "len {len}");
        }
    }

    #[test]
    fn ipv4_header_checksum_known_value() {
        // Wikipedia's IPv4 header checksum example: checksum is 0xb861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(!data(&h), 0xb861);
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(data(&h), 0xffff);
    }

    #[test]
    fn incremental_matches_recompute() {
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        // Decrement the TTL (word 4 holds TTL and protocol).
        let old = u16::from_be_bytes([h[8], h[9]]);
        h[8] -= 1;
        let new = u16::from_be_bytes([h[8], h[9]]);
        let hc = update16(0xb861, old, new);
        h[10..12].copy_from_slice(&[0, 0]);
        assert_eq!(hc, !data(&h));
        // Rewrite the source address (SNAT).
        let hc2 = update32(hc, 0xc0a8_0001, 0x0a00_0001);
        h[12..16].copy_from_slice(&[10, 0, 0, 1]);
        assert_eq!(hc2, !data(&h));
        assert_eq!(update_bytes(hc2, &[10, 0, 0, 1], &[192, 168, 0, 1]), hc);
    }

    #[test]
    fn rfc1624_negative_zero_case() {
        // RFC 1624 §4: with eqn. 3 the result is 0x0000 where RFC 1141 would give 0xffff.
        // Data whose full checksum is 0: a single word 0xffff; change it from 0x0000.
        assert_eq!(!data(&[0xff, 0xff]), 0x0000);
        assert_eq!(update16(!data(&[0x00, 0x00]), 0x0000, 0xffff), 0x0000);
    }

    #[test]
    fn pseudo_headers() {
        let src = Ipv4Addr::new(192, 168, 0, 1);
        let dst = Ipv4Addr::new(192, 168, 0, 199);
        let mut ph = Vec::new();
        ph.extend_from_slice(&src.octets());
        ph.extend_from_slice(&dst.octets());
        ph.extend_from_slice(&[0, 17, 0x01, 0x23]);
        assert_eq!(
            pseudo_header_v4(&src, &dst, IpProtocol::UDP, 0x0123),
            data(&ph)
        );

        let s6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let d6: Ipv6Addr = "fe80::ffff:1234:5678".parse().unwrap();
        let mut ph = Vec::new();
        ph.extend_from_slice(&s6.octets());
        ph.extend_from_slice(&d6.octets());
        ph.extend_from_slice(&0x0001_0004u32.to_be_bytes());
        ph.extend_from_slice(&[0, 0, 0, 58]);
        assert_eq!(
            pseudo_header_v6(&s6, &d6, IpProtocol::ICMPV6, 0x0001_0004),
            data(&ph)
        );
    }

    #[test]
    fn crc32c_vectors() {
        // The standard check value and RFC 3720 appendix B.4 vectors.
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8_ab43);
        let inc: Vec<u8> = (0..32).collect();
        assert_eq!(crc32c(&inc), 0x46dd_794e);
        let dec: Vec<u8> = (0..32).rev().collect();
        assert_eq!(crc32c(&dec), 0x113f_db5c);
        assert_eq!(crc32c(&[]), 0);
    }

    #[test]
    fn crc32c_sliced_equals_bitwise_and_streams() {
        let buf: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in [1, 5, 8, 9, 63, 64, 300] {
            assert_eq!(crc32c(&buf[..len]), crc32c_bitwise(&buf[..len]));
            let mut c = Crc32c::new();
            c.update(&buf[..len / 3]);
            c.update(&buf[len / 3..len]);
            assert_eq!(c.finish(), crc32c_bitwise(&buf[..len]));
        }
    }
}
