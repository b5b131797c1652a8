//! ARP (RFC 826).
//!
//! The view handles any hardware/protocol address sizes (the lengths are in the header); the
//! `Repr` covers the one combination a switch meets, Ethernet (htype 1) with IPv4 (ptype 0x0800).

use crate::ethernet::EthernetAddress;
use crate::{Error, EtherType, Ipv4Addr, Result, get_u16, set_u16};

mod field {
    use crate::Field;
    pub const HTYPE: Field = 0..2;
    pub const PTYPE: Field = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Field = 6..8;
    pub const ADDRESSES: usize = 8;

    #[inline]
    pub const fn sha(hlen: u8, _plen: u8) -> Field {
        ADDRESSES..ADDRESSES + hlen as usize
    }
    #[inline]
    pub const fn spa(hlen: u8, plen: u8) -> Field {
        let s = sha(hlen, plen).end;
        s..s + plen as usize
    }
    #[inline]
    pub const fn tha(hlen: u8, plen: u8) -> Field {
        let s = spa(hlen, plen).end;
        s..s + hlen as usize
    }
    #[inline]
    pub const fn tpa(hlen: u8, plen: u8) -> Field {
        let s = tha(hlen, plen).end;
        s..s + plen as usize
    }
}

/// Hardware type of Ethernet.
pub const HARDWARE_ETHERNET: u16 = 1;
/// Length of an Ethernet/IPv4 ARP packet.
pub const ETHERNET_IPV4_LEN: usize = 28;

/// An ARP operation code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpOperation(pub u16);

impl ArpOperation {
    /// Request (1).
    pub const REQUEST: ArpOperation = ArpOperation(1);
    /// Reply (2).
    pub const REPLY: ArpOperation = ArpOperation(2);
}

/// A view of an ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps a buffer without checking its length.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wraps a buffer after checking that it holds the fixed part and all four addresses.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Err(Truncated)` if the buffer is shorter than the fixed part plus the addresses.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < field::ADDRESSES || len < self.packet_len() {
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

    /// Length of the ARP packet: 8 + 2 * (hlen + plen).
    #[inline]
    pub fn packet_len(&self) -> usize {
        field::tpa(self.hardware_len(), self.protocol_len()).end
    }

    /// Hardware type (1 for Ethernet).
    #[inline]
    pub fn hardware_type(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::HTYPE)
    }

    /// Protocol type (an EtherType).
    #[inline]
    pub fn protocol_type(&self) -> EtherType {
        EtherType(get_u16(self.buffer.as_ref(), field::PTYPE))
    }

    /// Hardware address length.
    #[inline]
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// Protocol address length.
    #[inline]
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// Operation.
    #[inline]
    pub fn operation(&self) -> ArpOperation {
        ArpOperation(get_u16(self.buffer.as_ref(), field::OPER))
    }

    /// Sender hardware address.
    #[inline]
    pub fn source_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::sha(self.hardware_len(), self.protocol_len())]
    }

    /// Sender protocol address.
    #[inline]
    pub fn source_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::spa(self.hardware_len(), self.protocol_len())]
    }

    /// Target hardware address.
    #[inline]
    pub fn target_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::tha(self.hardware_len(), self.protocol_len())]
    }

    /// Target protocol address.
    #[inline]
    pub fn target_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::tpa(self.hardware_len(), self.protocol_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Sets the hardware type.
    #[inline]
    pub fn set_hardware_type(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::HTYPE, value);
    }

    /// Sets the protocol type.
    #[inline]
    pub fn set_protocol_type(&mut self, value: EtherType) {
        set_u16(self.buffer.as_mut(), field::PTYPE, value.0);
    }

    /// Sets the hardware address length (do this before writing addresses).
    #[inline]
    pub fn set_hardware_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::HLEN] = value;
    }

    /// Sets the protocol address length (do this before writing addresses).
    #[inline]
    pub fn set_protocol_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::PLEN] = value;
    }

    /// Sets the operation.
    #[inline]
    pub fn set_operation(&mut self, value: ArpOperation) {
        set_u16(self.buffer.as_mut(), field::OPER, value.0);
    }

    /// Sets the sender hardware address; `value` must be `hardware_len()` bytes.
    #[inline]
    pub fn set_source_hardware_addr(&mut self, value: &[u8]) {
        let f = field::sha(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[f].copy_from_slice(value);
    }

    /// Sets the sender protocol address; `value` must be `protocol_len()` bytes.
    #[inline]
    pub fn set_source_protocol_addr(&mut self, value: &[u8]) {
        let f = field::spa(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[f].copy_from_slice(value);
    }

    /// Sets the target hardware address; `value` must be `hardware_len()` bytes.
    #[inline]
    pub fn set_target_hardware_addr(&mut self, value: &[u8]) {
        let f = field::tha(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[f].copy_from_slice(value);
    }

    /// Sets the target protocol address; `value` must be `protocol_len()` bytes.
    #[inline]
    pub fn set_target_protocol_addr(&mut self, value: &[u8]) {
        let f = field::tpa(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[f].copy_from_slice(value);
    }
}

/// The meaning of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Operation (request, reply, or another code).
    pub operation: ArpOperation,
    /// Sender MAC address.
    pub source_hardware_addr: EthernetAddress,
    /// Sender IPv4 address.
    pub source_protocol_addr: Ipv4Addr,
    /// Target MAC address (zero in a request).
    pub target_hardware_addr: EthernetAddress,
    /// Target IPv4 address.
    pub target_protocol_addr: Ipv4Addr,
}

impl ArpRepr {
    /// Reads a checked packet; `Err(Unsupported)` unless it is Ethernet/IPv4.
    pub fn parse<T: AsRef<[u8]>>(packet: &ArpPacket<T>) -> Result<ArpRepr> {
        packet.check_len()?;
        if packet.hardware_type() != HARDWARE_ETHERNET
            || packet.protocol_type() != EtherType::IPV4
            || packet.hardware_len() != 6
            || packet.protocol_len() != 4
        {
            return Err(Error::Unsupported);
        }
        let ip = |b: &[u8]| Ipv4Addr::new(b[0], b[1], b[2], b[3]);
        let mac = |b: &[u8]| EthernetAddress::from_bytes(b).ok_or(Error::Unsupported);
        Ok(ArpRepr {
            operation: packet.operation(),
            source_hardware_addr: mac(packet.source_hardware_addr())?,
            source_protocol_addr: ip(packet.source_protocol_addr()),
            target_hardware_addr: mac(packet.target_hardware_addr())?,
            target_protocol_addr: ip(packet.target_protocol_addr()),
        })
    }

    /// Bytes `emit` writes (28).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        ETHERNET_IPV4_LEN
    }

    /// Writes the packet.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ArpPacket<T>) {
        packet.set_hardware_type(HARDWARE_ETHERNET);
        packet.set_protocol_type(EtherType::IPV4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(self.operation);
        packet.set_source_hardware_addr(&self.source_hardware_addr.0);
        packet.set_source_protocol_addr(&self.source_protocol_addr.octets());
        packet.set_target_hardware_addr(&self.target_hardware_addr.0);
        packet.set_target_protocol_addr(&self.target_protocol_addr.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, // eth/ipv4 request
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 10, 0, 0, 1, // sender
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 10, 0, 0, 2, // target
    ];

    #[test]
    fn request_round_trip() {
        let p = ArpPacket::new_checked(&REQUEST[..]).unwrap();
        let r = ArpRepr::parse(&p).unwrap();
        assert_eq!(r.operation, ArpOperation::REQUEST);
        assert_eq!(r.source_protocol_addr, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(r.target_protocol_addr, Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(r.source_hardware_addr.to_string(), "52:54:00:12:34:56");
        let mut out = [0u8; 28];
        r.emit(&mut ArpPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, REQUEST);
    }

    #[test]
    fn truncated_and_unsupported() {
        assert_eq!(
            ArpPacket::new_checked(&REQUEST[..7]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            ArpPacket::new_checked(&REQUEST[..27]).unwrap_err(),
            Error::Truncated
        );
        // Address lengths claim more than the buffer holds.
        let mut big = REQUEST;
        big[4] = 255;
        assert_eq!(
            ArpPacket::new_checked(&big[..]).unwrap_err(),
            Error::Truncated
        );
        // A smaller hlen is a valid view, but not an Ethernet/IPv4 ARP.
        let mut odd = REQUEST;
        odd[4] = 2;
        let p = ArpPacket::new_checked(&odd[..]).unwrap();
        assert_eq!(p.packet_len(), 20);
        assert_eq!(ArpRepr::parse(&p), Err(Error::Unsupported));
    }
}
