//! Fixed-capacity storage for a header's option bytes, so that a `Repr` can carry IPv4, TCP and
//! GENEVE options by value without allocating.

use crate::{Error, Result};
use core::fmt;

/// Up to `N` option bytes, kept inline. Bytes past `len` are always zero, so equality and hashing
/// see only the options themselves.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptionBytes<const N: usize> {
    len: usize,
    bytes: [u8; N],
}

impl<const N: usize> OptionBytes<N> {
    /// Capacity in bytes.
    pub const CAPACITY: usize = N;

    /// No options.
    pub const fn new() -> Self {
        OptionBytes {
            len: 0,
            bytes: [0; N],
        }
    }

    /// Copies `data`; `Error::BadOption` if it exceeds the capacity.
    pub fn from_slice(data: &[u8]) -> Result<Self> {
        let mut o = Self::new();
        o.push(data)?;
        Ok(o)
    }

    /// Appends `data`; `Error::BadOption` (and no change) if it would exceed the capacity.
    pub fn push(&mut self, data: &[u8]) -> Result<()> {
        let end = self.len.checked_add(data.len()).ok_or(Error::BadOption)?;
        if end > N {
            return Err(Error::BadOption);
        }
        self.bytes[self.len..end].copy_from_slice(data);
        self.len = end;
        Ok(())
    }

    /// Appends zero bytes (end-of-list padding in IPv4 and TCP) up to a multiple of four.
    pub fn pad_to_4(&mut self) -> Result<()> {
        let pad = self.len.next_multiple_of(4) - self.len;
        self.push(&[0u8; 3][..pad])
    }

    /// The option bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Number of option bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no options.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<const N: usize> Default for OptionBytes<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> fmt::Debug for OptionBytes<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OptionBytes(")?;
        for b in self.as_slice() {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_and_capacity() {
        let mut o = OptionBytes::<8>::new();
        o.push(&[1, 2, 3]).unwrap();
        o.pad_to_4().unwrap();
        assert_eq!(o.as_slice(), &[1, 2, 3, 0]);
        assert_eq!(o.push(&[9; 5]), Err(Error::BadOption));
        assert_eq!(o.len(), 4);
        o.push(&[9; 4]).unwrap();
        assert_eq!(o.len(), 8);
        assert_eq!(format!("{o:?}"), "OptionBytes(0102030009090909)");
    }
}
