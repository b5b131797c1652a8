//! Typed zero-copy views and emitters for the headers flowpath switches.
//!
//! Every protocol lives in its own module and follows the same shape (see smoltcp's `wire`):
//!
//! * a view `XxxPacket<T: AsRef<[u8]>>` over a buffer, with a private `field` module of byte
//!   ranges, `new_unchecked`, and `new_checked`, which validates the lengths once so that every
//!   getter on a checked view is infallible;
//! * getters that return host values (network byte order never leaks out), setters when
//!   `T: AsMut<[u8]>`, and `payload()` borrowing the underlying buffer's lifetime;
//! * a `XxxRepr` holding the header's meaning, with `parse`, `buffer_len` and `emit`, where `emit`
//!   writes exactly `buffer_len()` bytes.
//!
//! Checksums are never computed implicitly except for the IPv4 header (which only covers itself):
//! upper-layer checksums cover the payload too, so emitters write a zero checksum and the caller
//! fills it once the payload is in place (`fill_checksum*`).
//!
//! The crate does not allocate and no parser panics on any input.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod arp;
pub mod checksum;
pub mod consts;
pub mod ethernet;
pub mod geneve;
pub mod gre;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod mpls;
mod options;
pub mod sctp;
pub mod tcp;
pub mod udp;
pub mod vlan;
pub mod vxlan;

pub use arp::{ArpOperation, ArpPacket, ArpRepr};
pub use consts::{EtherType, IpProtocol};
pub use core::net::{Ipv4Addr, Ipv6Addr};
pub use ethernet::{EthernetAddress, EthernetFrame, EthernetRepr};
pub use geneve::{GeneveOption, GenevePacket, GeneveRepr};
pub use gre::{GrePacket, GreRepr};
pub use icmpv4::{Icmpv4Packet, Icmpv4Repr};
pub use icmpv6::{Icmpv6Packet, Icmpv6Repr, NdOption};
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv6::{
    Ipv6ExtChain, Ipv6ExtHeader, Ipv6ExtHeaderRepr, Ipv6FragmentHeader, Ipv6FragmentRepr,
    Ipv6Packet, Ipv6Repr,
};
pub use mpls::{MplsEntry, MplsRepr};
pub use options::OptionBytes;
pub use sctp::{SctpChunk, SctpPacket, SctpRepr};
pub use tcp::{TcpFlags, TcpOption, TcpPacket, TcpRepr};
pub use udp::{UdpPacket, UdpRepr};
pub use vlan::{VlanRepr, VlanTag};
pub use vxlan::{VxlanGbp, VxlanPacket, VxlanRepr};

/// Why a buffer could not be viewed or parsed as a header (or text read as an address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The buffer is shorter than the header (or than a length field inside it) says.
    #[error("truncated: buffer shorter than the header requires")]
    Truncated,
    /// The version field holds a value this parser does not speak.
    #[error("bad version field")]
    BadVersion,
    /// A header-length field is below the protocol's minimum.
    #[error("bad header length field")]
    BadHeaderLength,
    /// A total-length field is inconsistent with the header it describes.
    #[error("bad length field")]
    BadLength,
    /// An option (TLV) is malformed: zero or overrunning length, or a known kind with a bad size.
    #[error("malformed option")]
    BadOption,
    /// A field that must be zero, or must hold a given value, does not.
    #[error("malformed header: reserved or fixed field has a bad value")]
    Malformed,
    /// The header is well formed but uses a feature this crate does not represent.
    #[error("unsupported header variant")]
    Unsupported,
    /// Text is not a MAC address (six groups of one or two hex digits).
    #[error("not a MAC address (xx:xx:xx:xx:xx:xx)")]
    BadMacAddress,
}

/// Result type of this crate.
pub type Result<T> = core::result::Result<T, Error>;

/// A range of bytes inside a header (the private `field` modules are made of these).
pub(crate) type Field = core::ops::Range<usize>;

// Network byte order accessors. Fields are read through these so that no module touches a raw
// wire-order integer; with constant ranges they compile to one bounds check and a `bswap`.
#[inline]
pub(crate) fn get_u16(b: &[u8], f: Field) -> u16 {
    u16::from_be_bytes([b[f.start], b[f.start + 1]])
}

#[inline]
pub(crate) fn get_u32(b: &[u8], f: Field) -> u32 {
    let s = f.start;
    u32::from_be_bytes([b[s], b[s + 1], b[s + 2], b[s + 3]])
}

#[inline]
pub(crate) fn set_u16(b: &mut [u8], f: Field, v: u16) {
    b[f.start..f.start + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn set_u32(b: &mut [u8], f: Field, v: u32) {
    b[f.start..f.start + 4].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn get_ipv4(b: &[u8], f: Field) -> Ipv4Addr {
    Ipv4Addr::from(get_u32(b, f))
}

#[inline]
pub(crate) fn get_ipv6(b: &[u8], f: Field) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[f]);
    Ipv6Addr::from(a)
}
