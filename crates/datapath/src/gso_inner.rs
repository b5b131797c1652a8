//! The inner super-frame of an encapsulated one ([`crate::gso_tunnel`]): TCP segmentation
//! ([`TcpSuper`]) or UDP segmentation ([`UdpSuper`], USO), the two kinds a UDP tunnel push
//! keeps whole and a device with UDP-tunnel GSO takes (Linux refuses UFO inside a tunnel, so
//! a UFO super-frame is fragmented before the push). Each segment gets the outer headers of a
//! packet of its own ([`Outer::fix`] or [`Outer::fix_udp`]).

use crate::gso::{GsoError, TcpSuper};
use crate::gso_tunnel::Outer;
use crate::gso_udp::{self, UdpSuper};
use crate::gso_ufo;
use crate::packet::{Packet, Pool};

/// The inner headers of an encapsulated super-frame, by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inner {
    /// TCP segmentation (TSO).
    Tcp(TcpSuper),
    /// UDP segmentation (USO).
    Udp(UdpSuper),
}

impl Inner {
    /// The headers of super-frame `p` (at its `l3`): UDP ones when it is a UDP segmentation
    /// one, else TCP ones. A UFO super-frame is `NotTcp` (not a kind a tunnel carries whole).
    pub fn of(p: &Packet) -> Result<Inner, GsoError> {
        if gso_ufo::is_ufo(p) {
            Err(GsoError::NotTcp)
        } else if gso_udp::is_udp(p) {
            UdpSuper::of(p).map(Inner::Udp)
        } else {
            TcpSuper::of(p).map(Inner::Tcp)
        }
    }

    /// Offset of the inner IP header.
    pub fn l3(&self) -> usize {
        match self {
            Inner::Tcp(t) => t.l3,
            Inner::Udp(u) => u.l3,
        }
    }

    /// Offset of the inner TCP or UDP header.
    pub fn l4(&self) -> usize {
        match self {
            Inner::Tcp(t) => t.l4,
            Inner::Udp(u) => u.l4,
        }
    }

    /// The inner IP header is IPv6 (else IPv4).
    pub fn ipv6(&self) -> bool {
        match self {
            Inner::Tcp(t) => t.ipv6,
            Inner::Udp(u) => u.ipv6,
        }
    }

    /// Bytes of the headers every segment repeats.
    pub fn hdr_len(&self) -> usize {
        match self {
            Inner::Tcp(t) => t.hdr_len,
            Inner::Udp(u) => u.hdr_len(),
        }
    }

    /// Payload bytes per segment.
    pub fn size(&self) -> usize {
        match self {
            Inner::Tcp(t) => t.mss,
            Inner::Udp(u) => u.size,
        }
    }

    /// Number of segments `p` makes.
    pub fn n_segments(&self, p: &Packet) -> usize {
        match self {
            Inner::Tcp(t) => t.n_segments(p),
            Inner::Udp(u) => u.n_segments(p),
        }
    }

    /// Segment `k` of `p` (below [`Self::n_segments`]), in a buffer from `pool`, its outer
    /// headers made those of a packet of its own by `outer`.
    pub fn segment(&self, p: &Packet, k: usize, outer: &Outer, pool: &mut Pool) -> Packet {
        match self {
            Inner::Tcp(t) => {
                let mut s = t.segment(p, k, pool);
                outer.fix(&mut s, t);
                s
            }
            Inner::Udp(u) => {
                let mut s = u.segment(p, k, pool);
                outer.fix_udp(&mut s, u);
                s
            }
        }
    }
}
