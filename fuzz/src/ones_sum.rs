//! Helpers of the checksum-checking fuzz checks (`gso_udp`, `gso_ufo`, `csum_pending`): a
//! ones' complement sum of their own, so that the checks do not lean on the `wire` crate's
//! sum that the code under test uses.

/// The ones' complement sum of `d`, folded.
pub fn sum(d: &[u8]) -> u32 {
    let mut s: u32 = d
        .chunks(2)
        .map(|c| (u32::from(c[0]) << 8) | u32::from(*c.get(1).unwrap_or(&0)))
        .sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s
}

/// The big-endian 16-bit field of `f` at `at`.
#[allow(dead_code)] // Not every check reads fields this way.
pub fn be16(f: &[u8], at: usize) -> usize {
    usize::from(u16::from_be_bytes([f[at], f[at + 1]]))
}
