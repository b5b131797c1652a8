//! Big-endian reads from message bytes whose length the caller has checked: the one place the
//! codec turns network byte order into numbers.

/// The 16-bit big-endian number at `b[i..i + 2]`.
pub(crate) fn be16(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}

/// The 32-bit big-endian number at `b[i..i + 4]`.
pub(crate) fn be32(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// The 64-bit big-endian number at `b[i..i + 8]`.
pub(crate) fn be64(b: &[u8], i: usize) -> u64 {
    u64::from_be_bytes([
        b[i],
        b[i + 1],
        b[i + 2],
        b[i + 3],
        b[i + 4],
        b[i + 5],
        b[i + 6],
        b[i + 7],
    ])
}

/// The big-endian number that all of `b` (at most 16 bytes) spells.
pub(crate) fn be_n(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |acc, &x| (acc << 8) | u128::from(x))
}
