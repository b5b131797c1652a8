//! Helpers the conntrack integration tests share.

/// Ones'-complement sum of big-endian 16-bit words (odd tail padded with zero): the tests'
/// own Internet checksum, independent of `wire::checksum`, so that fixtures do not check the
/// code with itself.
pub fn sum(data: &[u8]) -> u64 {
    data.chunks(2)
        .map(|c| u64::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
        .sum()
}

/// Folds a [`sum`] to 16 bits and complements it: the checksum field's value.
pub fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}
