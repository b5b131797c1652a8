//! Userspace connection tracking: the connection table behind the datapath's `ct()` action.
//!
//! Knows nothing of OpenFlow or of the datapath's packet buffers: it reads a frame's bytes at
//! the L3 offset extraction found, decides the packet's connection state, and updates the
//! connection metadata ([`CtMeta`]) the packet carries between passes. NAT is decided here and
//! applied by the caller ([`NatRewrite`]), which owns the header rewrites.
//!
//! - [`key`]: the tuple a packet is tracked under, and the header checks before tracking.
//! - [`tcp`]: TCP window tracking (RFC 9293; the state machine of Guido van Rooij's "Real
//!   Stateful TCP Packet Filtering in IP Filter", as Linux and OVS use it).
//! - [`frag`]: IPv4 and IPv6 fragment reassembly ahead of tracking; [`ipf_format`] its
//!   `dpctl/ipf-*` commands.
//! - [`table`]: the shared connection table, zones, limits, timeouts, NAT, expiry.
//! - [`alg`]: the FTP and TFTP application-layer gateways (`ct(helper=...)`): expectations of
//!   data connections, address rewrites and sequence adjustment under NAT.

#![forbid(unsafe_code)]

pub mod alg;
pub mod format;
pub mod frag;
pub mod ipf_format;
pub mod key;
pub mod table;
pub mod tcp;

pub use key::Tuple;
pub use table::{
    CACHE_WAYS, ConnInfo, Conntrack, CtArgs, CtCache, CtMeta, CtPacket, CtStats, NatKind,
    NatRewrite, NatSpec, TimeoutClass,
};

/// Bits of a packet's connection state, as OVS's `ct_state` (`+new+trk`, ...): the flow key's
/// own (`NEW`, `EST`, ..., and their names in OVS's order, `NAMES`).
pub use flow::key::ct_state as state;

/// Milliseconds on the tracker's clock (monotonic, since the first call in the process).
pub fn now_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u64
}
