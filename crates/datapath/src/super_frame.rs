//! A super-frame of either kind the switch carries whole: TCP ([`crate::gso`]) or UDP
//! ([`crate::gso_udp`]), told apart by its transport protocol, for the places that segment
//! whatever they get (a port that does not take it whole, a push that is not a UDP tunnel's).

use crate::gso::{GsoError, TcpSuper};
use crate::gso_udp::{self, UdpSuper};
use crate::packet::{Packet, Pool};

/// Where a super-frame's headers are, by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuperFrame {
    /// TCP segmentation (TSO).
    Tcp(TcpSuper),
    /// UDP segmentation (USO).
    Udp(UdpSuper),
}

impl SuperFrame {
    /// The headers of super-frame `p`: UDP ones when it is UDP over IP, else TCP ones (an
    /// error when it is neither).
    pub fn of(p: &Packet) -> Result<SuperFrame, GsoError> {
        if gso_udp::is_udp(p) {
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
        }
    }

    /// Segment `k` of `p` (below [`Self::n_segments`]), in a buffer from `pool`.
    pub fn segment(&self, p: &Packet, k: usize, pool: &mut Pool) -> Packet {
        match self {
            SuperFrame::Tcp(t) => t.segment(p, k, pool),
            SuperFrame::Udp(u) => u.segment(p, k, pool),
        }
    }
}
