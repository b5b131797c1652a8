//! IEEE 802.1Q VLAN tags (C-tag, TPID 0x8100) and IEEE 802.1ad service tags (S-tag, TPID 0x88a8).
//!
//! The TPID belongs to the header before the tag (the Ethernet EtherType or the previous tag's
//! inner EtherType), so the view covers the four bytes after it: the Tag Control Information
//! (PCP, DEI, VID) and the EtherType of what follows. QinQ is an S-tag view followed by a C-tag
//! view.

use crate::{Error, EtherType, Result, get_u16, set_u16};

mod field {
    use crate::Field;
    pub const TCI: Field = 0..2;
    pub const ETHERTYPE: Field = 2..4;
    pub const PAYLOAD: usize = 4;
}

/// Length of a tag after its TPID.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A view of one VLAN tag (TCI and inner EtherType).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    /// Wraps a buffer without checking its length.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        VlanTag { buffer }
    }

    /// Wraps a buffer after checking that it holds the 4-byte tag.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let t = Self::new_unchecked(buffer);
        t.check_len()?;
        Ok(t)
    }

    /// `Err(Truncated)` if the buffer is shorter than the tag.
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
    fn tci(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::TCI)
    }

    /// Priority code point (802.1p), 0..=7.
    #[inline]
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator (formerly CFI).
    #[inline]
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier, 0..=4095 (0: priority tag only, 4095: reserved).
    #[inline]
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// EtherType of what follows the tag.
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        EtherType(get_u16(self.buffer.as_ref(), field::ETHERTYPE))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> VlanTag<&'a T> {
    /// Everything after the tag.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    #[inline]
    fn set_tci(&mut self, tci: u16) {
        set_u16(self.buffer.as_mut(), field::TCI, tci);
    }

    /// Sets the priority code point (low 3 bits of `value`).
    #[inline]
    pub fn set_pcp(&mut self, value: u8) {
        let tci = (self.tci() & 0x1fff) | (u16::from(value & 7) << 13);
        self.set_tci(tci);
    }

    /// Sets the drop eligible indicator.
    #[inline]
    pub fn set_dei(&mut self, value: bool) {
        let tci = (self.tci() & !0x1000) | if value { 0x1000 } else { 0 };
        self.set_tci(tci);
    }

    /// Sets the VLAN identifier (low 12 bits of `value`).
    #[inline]
    pub fn set_vid(&mut self, value: u16) {
        let tci = (self.tci() & 0xf000) | (value & 0x0fff);
        self.set_tci(tci);
    }

    /// Sets the inner EtherType.
    #[inline]
    pub fn set_ethertype(&mut self, value: EtherType) {
        set_u16(self.buffer.as_mut(), field::ETHERTYPE, value.0);
    }

    /// Everything after the tag, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// The meaning of a VLAN tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanRepr {
    /// Priority code point, 0..=7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 0..=4095.
    pub vid: u16,
    /// EtherType of what follows.
    pub ethertype: EtherType,
}

impl VlanRepr {
    /// Reads a checked tag.
    pub fn parse<T: AsRef<[u8]>>(tag: &VlanTag<T>) -> Result<VlanRepr> {
        tag.check_len()?;
        Ok(VlanRepr {
            pcp: tag.pcp(),
            dei: tag.dei(),
            vid: tag.vid(),
            ethertype: tag.ethertype(),
        })
    }

    /// Bytes `emit` writes (4).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the tag; out-of-range `pcp`/`vid` bits are masked off.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, tag: &mut VlanTag<T>) {
        let tci = (u16::from(self.pcp & 7) << 13)
            | if self.dei { 0x1000 } else { 0 }
            | (self.vid & 0x0fff);
        tag.set_tci(tci);
        tag.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_round_trip() {
        // PCP 5, DEI 1, VID 0x123, inner IPv6.
        let bytes = [0xb1, 0x23, 0x86, 0xdd, 0x60];
        let t = VlanTag::new_checked(&bytes[..]).unwrap();
        assert_eq!((t.pcp(), t.dei(), t.vid()), (5, true, 0x123));
        assert_eq!(t.ethertype(), EtherType::IPV6);
        assert_eq!(t.payload(), &[0x60]);
        let r = VlanRepr::parse(&t).unwrap();
        let mut out = [0u8; 4];
        r.emit(&mut VlanTag::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes[..4]);
    }

    #[test]
    fn setters_touch_only_their_bits() {
        let mut b = [0xff, 0xff, 0x08, 0x00];
        let mut t = VlanTag::new_unchecked(&mut b[..]);
        t.set_vid(0);
        assert_eq!((t.pcp(), t.dei(), t.vid()), (7, true, 0));
        t.set_dei(false);
        t.set_pcp(2);
        assert_eq!((t.pcp(), t.dei(), t.vid()), (2, false, 0));
        assert_eq!(b, [0x40, 0x00, 0x08, 0x00]);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            VlanTag::new_checked(&[0x00, 0x01, 0x08][..]).unwrap_err(),
            Error::Truncated
        );
    }
}
