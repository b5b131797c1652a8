//! A super-frame of any kind the switch carries whole: TCP ([`crate::gso`]), UDP
//! segmentation ([`crate::gso_udp`]), told apart by their transport protocol, or UDP
//! fragmentation ([`crate::gso_ufo`], marked by `PacketMeta::ufo`), for the places that
//! segment whatever they get (a port that does not take it whole, a push that is not a UDP
//! tunnel's).

use crate::gso::{GsoError, TcpSuper};
use crate::gso_inner::Inner;
use crate::gso_tunnel::Outer;
use crate::gso_udp::{self, UdpSuper};
use crate::gso_ufo::{self, UfoSuper};
use crate::packet::{Packet, Pool};

/// Where a super-frame's headers are, by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuperFrame {
    /// TCP segmentation (TSO).
    Tcp(TcpSuper),
    /// UDP segmentation (USO).
    Udp(UdpSuper),
    /// UDP fragmentation (UFO), ready to cut ([`UfoSuper::ready`]).
    Ufo(UfoSuper),
}

impl SuperFrame {
    /// The headers of super-frame `p`: UFO ones when it is marked so, UDP ones when it is
    /// UDP over IP, else TCP ones (an error when it is neither).
    pub fn of(p: &Packet) -> Result<SuperFrame, GsoError> {
        if gso_ufo::is_ufo(p) {
            UfoSuper::of(p).map(|u| SuperFrame::Ufo(u.ready(p)))
        } else if gso_udp::is_udp(p) {
            UdpSuper::of(p).map(SuperFrame::Udp)
        } else {
            TcpSuper::of(p).map(SuperFrame::Tcp)
        }
    }

    /// Number of segments `p` makes.
    pub fn n_segments(&self, p: &Packet) -> usize {
        match self {
            SuperFrame::Tcp(t) => t.n_segments(p),
            SuperFrame::Udp(u) => u.n_segments(p),
            SuperFrame::Ufo(u) => u.n_fragments(p),
        }
    }

    /// Segment `k` of `p` (below [`Self::n_segments`]), in a buffer from `pool`.
    pub fn segment(&self, p: &Packet, k: usize, pool: &mut Pool) -> Packet {
        match self {
            SuperFrame::Tcp(t) => t.segment(p, k, pool),
            SuperFrame::Udp(u) => u.segment(p, k, pool),
            SuperFrame::Ufo(u) => u.fragment(p, k, pool),
        }
    }
}

/// Super-frame `p` as it is cut where it cannot go on whole (an output, or an action that
/// needs the frame as it would leave): its kind and, when it is encapsulated (TCP or USO
/// inside a UDP tunnel, [`crate::gso_tunnel`]), its outer headers, which each segment gets as
/// a packet of its own.
#[derive(Clone, Copy, Debug)]
pub struct Cut {
    /// The super-frame's kind.
    pub kind: SuperFrame,
    outer: Option<(Outer, Inner)>,
}

impl Cut {
    /// How `p` is cut; an error when it is not a super-frame [`SuperFrame::of`] takes, or its
    /// outer headers are not IP and UDP.
    pub fn of(p: &Packet) -> Result<Cut, GsoError> {
        let kind = SuperFrame::of(p)?;
        let inner = match kind {
            SuperFrame::Tcp(t) => Inner::Tcp(t),
            SuperFrame::Udp(u) => Inner::Udp(u),
            SuperFrame::Ufo(_) => return Ok(Cut { kind, outer: None }),
        };
        let outer = Outer::around(p, inner.l3())?.map(|o| (o, inner));
        Ok(Cut { kind, outer })
    }

    /// Number of segments `p` makes.
    pub fn n_segments(&self, p: &Packet) -> usize {
        self.kind.n_segments(p)
    }

    /// Segment `k` of `p` (below [`Self::n_segments`]), in a buffer from `pool`.
    pub fn segment(&self, p: &Packet, k: usize, pool: &mut Pool) -> Packet {
        match &self.outer {
            Some((o, inner)) => inner.segment(p, k, o, pool),
            None => self.kind.segment(p, k, pool),
        }
    }
}
