//! VXLAN (RFC 7348) and its Group Based Policy extension (draft-smith-vxlan-group-policy, as
//! Linux and OVS implement it).
//!
//! ```text
//!  0                   1                   2                   3
//! |G|R|R|R|I|R|R|R|R|D|R|R|A|R|R|R|        Group Policy ID        |
//! |                VXLAN Network Identifier (VNI) |   Reserved    |
//! ```
//! Without GBP, everything but I and the VNI is reserved (sent as zero, ignored on receipt).

use crate::{Error, Result, get_u16, get_u32, set_u16, set_u32};

mod field {
    use crate::Field;
    pub const FLAGS: usize = 0;
    pub const GBP_FLAGS: usize = 1;
    pub const GROUP_POLICY_ID: Field = 2..4;
    pub const VNI_RSVD: Field = 4..8;
    pub const PAYLOAD: usize = 8;
}

/// Length of the VXLAN header.
pub const HEADER_LEN: usize = field::PAYLOAD;

const FLAG_I: u8 = 0x08;
const FLAG_G: u8 = 0x80;
const GBP_D: u8 = 0x40;
const GBP_A: u8 = 0x08;

/// A view of a VXLAN header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VxlanPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VxlanPacket<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        VxlanPacket { buffer }
    }

    /// Wraps a buffer after checking that it holds the 8-byte header.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Err(Truncated)` if the buffer is shorter than the header.
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

    /// The first flags byte.
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// I: the VNI is valid (must be set, RFC 7348 §5).
    #[inline]
    pub fn instance_flag(&self) -> bool {
        self.flags() & FLAG_I != 0
    }

    /// G: Group Based Policy fields are present.
    #[inline]
    pub fn gbp_flag(&self) -> bool {
        self.flags() & FLAG_G != 0
    }

    /// GBP D: don't learn the source.
    #[inline]
    pub fn dont_learn(&self) -> bool {
        self.buffer.as_ref()[field::GBP_FLAGS] & GBP_D != 0
    }

    /// GBP A: policy already applied.
    #[inline]
    pub fn policy_applied(&self) -> bool {
        self.buffer.as_ref()[field::GBP_FLAGS] & GBP_A != 0
    }

    /// GBP group policy ID (the sender's group).
    #[inline]
    pub fn group_policy_id(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::GROUP_POLICY_ID)
    }

    /// VXLAN network identifier, 24 bits.
    #[inline]
    pub fn vni(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VNI_RSVD) >> 8
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> VxlanPacket<&'a T> {
    /// The encapsulated Ethernet frame.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VxlanPacket<T> {
    /// Sets the first flags byte.
    #[inline]
    pub fn set_flags(&mut self, value: u8) {
        self.buffer.as_mut()[field::FLAGS] = value;
    }

    /// Sets the GBP flags byte from D and A.
    #[inline]
    pub fn set_gbp_flags(&mut self, dont_learn: bool, policy_applied: bool) {
        self.buffer.as_mut()[field::GBP_FLAGS] =
            if dont_learn { GBP_D } else { 0 } | if policy_applied { GBP_A } else { 0 };
    }

    /// Sets the group policy ID.
    #[inline]
    pub fn set_group_policy_id(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::GROUP_POLICY_ID, value);
    }

    /// Sets the VNI (low 24 bits); keeps the reserved byte.
    #[inline]
    pub fn set_vni(&mut self, value: u32) {
        let rsvd = self.buffer.as_ref()[field::VNI_RSVD.end - 1];
        set_u32(
            self.buffer.as_mut(),
            field::VNI_RSVD,
            (value << 8) | u32::from(rsvd),
        );
    }

    /// The encapsulated frame, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// Group Based Policy fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VxlanGbp {
    /// D: don't learn.
    pub dont_learn: bool,
    /// A: policy applied.
    pub policy_applied: bool,
    /// Group policy ID.
    pub group_policy_id: u16,
}

/// The meaning of a VXLAN header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VxlanRepr {
    /// VNI, 0..=0xffffff.
    pub vni: u32,
    /// GBP fields when the G bit is set.
    pub gbp: Option<VxlanGbp>,
}

impl VxlanRepr {
    /// Reads a checked header; `Err(Malformed)` if the I flag is clear. Reserved bits are
    /// ignored (RFC 7348 §5).
    pub fn parse<T: AsRef<[u8]>>(packet: &VxlanPacket<T>) -> Result<VxlanRepr> {
        packet.check_len()?;
        if !packet.instance_flag() {
            return Err(Error::Malformed);
        }
        Ok(VxlanRepr {
            vni: packet.vni(),
            gbp: packet.gbp_flag().then(|| VxlanGbp {
                dont_learn: packet.dont_learn(),
                policy_applied: packet.policy_applied(),
                group_policy_id: packet.group_policy_id(),
            }),
        })
    }

    /// Bytes `emit` writes (8).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header with zero reserved fields.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut VxlanPacket<T>) {
        match self.gbp {
            Some(g) => {
                packet.set_flags(FLAG_I | FLAG_G);
                packet.set_gbp_flags(g.dont_learn, g.policy_applied);
                packet.set_group_policy_id(g.group_policy_id);
            }
            None => {
                packet.set_flags(FLAG_I);
                packet.set_gbp_flags(false, false);
                packet.set_group_policy_id(0);
            }
        }
        set_u32(
            packet.buffer.as_mut(),
            field::VNI_RSVD,
            (self.vni & 0x00ff_ffff) << 8,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_vni_100() {
        let b = [0x08, 0, 0, 0, 0, 0, 100, 0, 0xaa];
        let p = VxlanPacket::new_checked(&b[..]).unwrap();
        assert!(p.instance_flag() && !p.gbp_flag());
        assert_eq!(p.vni(), 100);
        assert_eq!(p.payload(), &[0xaa]);
        let r = VxlanRepr::parse(&p).unwrap();
        assert_eq!(
            r,
            VxlanRepr {
                vni: 100,
                gbp: None
            }
        );
        let mut out = [0xffu8; 8];
        r.emit(&mut VxlanPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, b[..8]);
    }

    #[test]
    fn gbp() {
        let b = [0x88, 0x48, 0x12, 0x34, 0xab, 0xcd, 0xef, 0];
        let p = VxlanPacket::new_checked(&b[..]).unwrap();
        let r = VxlanRepr::parse(&p).unwrap();
        assert_eq!(
            r,
            VxlanRepr {
                vni: 0xabcdef,
                gbp: Some(VxlanGbp {
                    dont_learn: true,
                    policy_applied: true,
                    group_policy_id: 0x1234
                })
            }
        );
        let mut out = [0u8; 8];
        r.emit(&mut VxlanPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
    }

    #[test]
    fn errors_and_setters() {
        assert_eq!(
            VxlanPacket::new_checked(&[0x08; 7][..]).unwrap_err(),
            Error::Truncated
        );
        let b = [0x00, 0, 0, 0, 0, 0, 1, 0];
        assert_eq!(
            VxlanRepr::parse(&VxlanPacket::new_checked(&b[..]).unwrap()),
            Err(Error::Malformed)
        );
        let mut b = [0x08, 0, 0, 0, 0, 0, 0, 0x5a];
        let mut p = VxlanPacket::new_unchecked(&mut b[..]);
        p.set_vni(0x123456);
        assert_eq!(p.vni(), 0x123456);
        assert_eq!(b[4..], [0x12, 0x34, 0x56, 0x5a]);
    }
}
