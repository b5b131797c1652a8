//! MPLS label stack entries (RFC 3032 §2.1): 20-bit label, 3-bit traffic class (RFC 5462),
//! bottom-of-stack bit, TTL.
//!
//! A view covers one 4-byte entry; a stack is walked entry by entry until the S bit, or at once
//! with [`stack_len`]. What follows the bottom entry is not self-describing (MPLS carries no
//! payload type): callers look at the first nibble or know it from the label.

use crate::{Error, Result, get_u32, set_u32};

mod field {
    use crate::Field;
    pub const ENTRY: Field = 0..4;
    pub const PAYLOAD: usize = 4;
}

/// Length of one label stack entry.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// Reserved label values (RFC 3032 §2.1, RFC 7274).
pub mod label {
    /// IPv4 Explicit NULL.
    pub const IPV4_EXPLICIT_NULL: u32 = 0;
    /// Router Alert.
    pub const ROUTER_ALERT: u32 = 1;
    /// IPv6 Explicit NULL.
    pub const IPV6_EXPLICIT_NULL: u32 = 2;
    /// Implicit NULL (signalled only, never on the wire).
    pub const IMPLICIT_NULL: u32 = 3;
    /// Largest label value.
    pub const MAX: u32 = 0xf_ffff;
}

/// A view of one MPLS label stack entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MplsEntry<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> MplsEntry<T> {
    /// Wraps a buffer without checking its length.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        MplsEntry { buffer }
    }

    /// Wraps a buffer after checking that it holds one entry.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let e = Self::new_unchecked(buffer);
        e.check_len()?;
        Ok(e)
    }

    /// `Err(Truncated)` if the buffer is shorter than an entry.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    fn entry(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::ENTRY)
    }

    /// The 20-bit label.
    #[inline]
    pub fn label(&self) -> u32 {
        self.entry() >> 12
    }

    /// Traffic class (formerly EXP), 0..=7.
    #[inline]
    pub fn tc(&self) -> u8 {
        ((self.entry() >> 9) & 7) as u8
    }

    /// Bottom-of-stack bit.
    #[inline]
    pub fn bottom_of_stack(&self) -> bool {
        self.entry() & 0x100 != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.entry() as u8
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> MplsEntry<&'a T> {
    /// Everything after this entry (the next entry, or the payload after the bottom one).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MplsEntry<T> {
    #[inline]
    fn set_entry(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::ENTRY, v);
    }

    /// Sets the label (low 20 bits of `value`).
    #[inline]
    pub fn set_label(&mut self, value: u32) {
        let e = (self.entry() & 0xfff) | ((value & label::MAX) << 12);
        self.set_entry(e);
    }

    /// Sets the traffic class (low 3 bits).
    #[inline]
    pub fn set_tc(&mut self, value: u8) {
        let e = (self.entry() & !0xe00) | (u32::from(value & 7) << 9);
        self.set_entry(e);
    }

    /// Sets the bottom-of-stack bit.
    #[inline]
    pub fn set_bottom_of_stack(&mut self, value: bool) {
        let e = (self.entry() & !0x100) | if value { 0x100 } else { 0 };
        self.set_entry(e);
    }

    /// Sets the TTL.
    #[inline]
    pub fn set_ttl(&mut self, value: u8) {
        self.buffer.as_mut()[3] = value;
    }

    /// Everything after this entry, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// Length in bytes of the label stack at the start of `data`, up to and including the entry with
/// the bottom-of-stack bit; `Err(Truncated)` if the buffer ends first.
pub fn stack_len(data: &[u8]) -> Result<usize> {
    let mut off = 0;
    loop {
        let e = MplsEntry::new_checked(data.get(off..).ok_or(Error::Truncated)?)?;
        off += HEADER_LEN;
        if e.bottom_of_stack() {
            return Ok(off);
        }
    }
}

/// The meaning of one label stack entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MplsRepr {
    /// Label, 0..=0xfffff.
    pub label: u32,
    /// Traffic class, 0..=7.
    pub tc: u8,
    /// Bottom-of-stack bit.
    pub bottom_of_stack: bool,
    /// Time to live.
    pub ttl: u8,
}

impl MplsRepr {
    /// Reads a checked entry.
    pub fn parse<T: AsRef<[u8]>>(entry: &MplsEntry<T>) -> Result<MplsRepr> {
        entry.check_len()?;
        Ok(MplsRepr {
            label: entry.label(),
            tc: entry.tc(),
            bottom_of_stack: entry.bottom_of_stack(),
            ttl: entry.ttl(),
        })
    }

    /// Bytes `emit` writes (4).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the entry; out-of-range bits of `label`/`tc` are masked off.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, entry: &mut MplsEntry<T>) {
        entry.set_entry(
            ((self.label & label::MAX) << 12)
                | (u32::from(self.tc & 7) << 9)
                | if self.bottom_of_stack { 0x100 } else { 0 }
                | u32::from(self.ttl),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Label 812, TC 0, S=1, TTL 4: the seed MPLSoGRE packet's entry.
    const ENTRY: [u8; 4] = [0x00, 0x32, 0xc1, 0x04];

    #[test]
    fn seed_entry() {
        let e = MplsEntry::new_checked(&ENTRY[..]).unwrap();
        assert_eq!(
            (e.label(), e.tc(), e.bottom_of_stack(), e.ttl()),
            (812, 0, true, 4)
        );
        let r = MplsRepr::parse(&e).unwrap();
        let mut out = [0u8; 4];
        r.emit(&mut MplsEntry::new_unchecked(&mut out[..]));
        assert_eq!(out, ENTRY);
    }

    #[test]
    fn setters() {
        let mut b = [0u8; 4];
        let mut e = MplsEntry::new_unchecked(&mut b[..]);
        e.set_label(0xfffff);
        e.set_tc(5);
        e.set_ttl(64);
        assert!(!e.bottom_of_stack());
        e.set_bottom_of_stack(true);
        assert_eq!(
            (e.label(), e.tc(), e.bottom_of_stack(), e.ttl()),
            (0xfffff, 5, true, 64)
        );
        assert_eq!(b, [0xff, 0xff, 0xfb, 0x40]);
    }

    #[test]
    fn stack_walk() {
        let stack = [
            0, 0x10, 0x00, 64, 0, 0x20, 0x00, 64, 0, 0x30, 0x01, 64, 0x45,
        ];
        assert_eq!(stack_len(&stack), Ok(12));
        assert_eq!(stack_len(&stack[..8]), Err(Error::Truncated));
        assert_eq!(stack_len(&stack[..10]), Err(Error::Truncated));
        assert_eq!(stack_len(&[]), Err(Error::Truncated));
    }
}
