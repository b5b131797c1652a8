//! Application-layer gateways (ALGs) for FTP and TFTP: the helpers of `ct(commit,helper=ftp)`
//! and `ct(commit,helper=tftp)` (OpenFlow's `ct(alg=ftp|tftp)`), as Open vSwitch's userspace
//! conntrack has them.
//!
//! An ALG reads a *control* connection's messages to learn that a *data* connection is about to
//! start, and records an [`Expectation`] of it. The data connection's first packet finds the
//! expectation ([`Expectations::find`]) and is `+new+rel` instead of `+new`; committed, it is
//! related to its parent for its whole life: it inherits the parent's mark and label and reports
//! the parent's tuple as its original tuple, as OVS does.
//!
//! - **FTP** (RFC 959 §4.1, RFC 2428): the client's `PORT h1,h2,h3,h4,p1,p2` and
//!   `EPRT |af|addr|port|` commands (active mode: the server connects, from any port, to the
//!   client), the server's `227 ... (h1,h2,h3,h4,p1,p2)` and `229 ... (|||port|)` replies
//!   (passive mode: the client connects to the server). An expectation is keyed by the data
//!   connection's tuple without its source port ([`ExpKey`]): a server's data port is 20 by
//!   custom only, a client's is ephemeral.
//! - **NAT.** Behind NAT the address `PORT`, `EPRT` or `227` names is the untranslated one; with
//!   `ct(nat)` it is replaced by the one the peer sees ([`PayloadEdit`]). The text may change
//!   length, which shifts every later sequence number of that direction and every later
//!   acknowledgment of the other; [`SeqAdjust`] keeps the shift per direction and the sequence
//!   number where it starts.
//! - **TFTP** (RFC 1350 §4): the server answers a request from a port of its own choosing to the
//!   client's port, so a request expects the answer from any source port.
//!
//! The module decides and the caller applies: [`inspect`] reads one segment and returns what to
//! record and what to rewrite ([`AlgOutcome`]); the connection table keeps the [`Expectations`]
//! and each connection's [`SeqAdjust`], and hands the rewrite ([`AlgRewrite`]) to the datapath
//! with the NAT rewrite. Nothing here allocates per packet except an expectation's insertion.
//!
//! The helpers, each in its file, and what they share:
//! - `ftp`: FTP's announcements, read from a control connection's payload, and the address
//!   rewrite NAT asks of them;
//! - `tftp`: TFTP's expectation of a server's answer;
//! - `expect`: the expectation table, shared by every thread;
//! - `seqadj`: the sequence adjustment of a control connection whose payload was resized.
//!
//! Differences from OVS:
//! - An expectation is used once (taken when its data connection is committed), and expires
//!   after [`EXPECT_TIMEOUT_MS`] or when its parent goes; OVS keeps it until the parent goes.
//!   The table is bounded ([`DEFAULT_MAX_EXPECTATIONS`] in all, refusals counted) and so is a
//!   parent's share ([`MAX_PER_PARENT`], the oldest is dropped), which OVS does not bound.
//! - A message must be a whole line (ending in LF) within one segment; a message split across
//!   segments is ignored ([`AlgCounter::Incomplete`]), where OVS parses the fragment it has and
//!   may call the packet invalid. Commands are read from the client and replies from the server
//!   only, on any line of the segment (OVS: the first line, from either side).
//! - `EPRT |1|` is rewritten in dotted notation (OVS writes commas there).
//! - Sequence adjustment per direction with a start point (Linux's `nf_ct_seqadj`), where OVS
//!   keeps one shift for the last direction that changed and applies it to every later packet.
//!   SACK blocks are not adjusted (neither does OVS).
//! - A parent translated both ways (SNAT and DNAT) gives its data connection both translations;
//!   OVS only the destination one. A TFTP answer is expected at the client's *translated* port
//!   and translated back to its own (OVS expects the untranslated port).

mod expect;
mod ftp;
mod seqadj;
mod tftp;

pub use expect::{
    AlgCounter, AlgStats, DEFAULT_MAX_EXPECTATIONS, EXPECT_TIMEOUT_MS, ExpKey, ExpNat, Expectation,
    Expectations, Inserted, MAX_PER_PARENT, NatTo,
};
pub use ftp::{AddrForm, FtpAnnounce, FtpKind, FtpParse, MAX_ADDR_TEXT, PayloadEdit, parse_ftp};
pub use seqadj::{SeqAdjust, SeqShift};

use std::net::IpAddr;

use crate::key::{TCP, Tuple, UDP};

/// Which ALG serves a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Helper {
    Ftp = 1,
    Tftp = 2,
}

impl Helper {
    /// The helper named `name` in `ct(helper=...)`.
    pub fn from_name(name: &str) -> Option<Helper> {
        match name {
            "ftp" => Some(Helper::Ftp),
            "tftp" => Some(Helper::Tftp),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Helper::Ftp => "ftp",
            Helper::Tftp => "tftp",
        }
    }

    /// The IP protocol of the connections it serves; a commit of another protocol's connection
    /// with this helper gets none (as OVS's `ct_verify_helper`).
    pub fn proto(self) -> u8 {
        match self {
            Helper::Ftp => TCP,
            Helper::Tftp => UDP,
        }
    }
}

/// What the datapath does to a TCP segment of an ALG connection under NAT: replace the address
/// text with the packet's translated source address ([`PayloadEdit`]), then add `seq` and
/// `ack` to the sequence and acknowledgment numbers. 16 bytes: it rides in every NAT rewrite.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlgRewrite {
    pub payload: Option<PayloadEdit>,
    pub seq: i32,
    pub ack: i32,
}

const _: () = assert!(core::mem::size_of::<Option<AlgRewrite>>() <= 16);

/// What an ALG keeps per connection (behind the connection's lock): the parent's original tuple
/// for a related connection, and the sequence adjustment of a control connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnAlg {
    pub parent: Option<Tuple>,
    pub adj: SeqAdjust,
}

/// A packet of a connection that has a helper, as [`inspect`] sees it.
#[derive(Clone, Copy, Debug)]
pub struct Control<'a> {
    pub helper: Helper,
    /// The connection's original tuple and reply tuple (after NAT).
    pub orig: &'a Tuple,
    pub reply_tuple: &'a Tuple,
    /// The connection's id, mark and label, which its expectations keep.
    pub id: u32,
    pub mark: u32,
    pub label: u128,
    /// The packet travels in the reply direction.
    pub reply: bool,
    /// Rewrite the address an announcement names (the `ct()` has `nat` and the connection is
    /// translated).
    pub nat: bool,
}

impl Control<'_> {
    /// The connection's source side is translated.
    fn snat(&self) -> bool {
        self.reply_tuple.dst != self.orig.src || self.reply_tuple.dport != self.orig.sport
    }

    /// Its destination side is translated.
    fn dnat(&self) -> bool {
        self.reply_tuple.src != self.orig.dst || self.reply_tuple.sport != self.orig.dport
    }

    fn expectation(&self, key: ExpKey, nat: ExpNat, now: u64) -> Expectation {
        Expectation {
            key,
            parent: *self.orig,
            parent_id: self.id,
            mark: self.mark,
            label: self.label,
            helper: self.helper,
            nat,
            expires: now + EXPECT_TIMEOUT_MS,
        }
    }
}

/// What [`inspect`] found in a segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlgOutcome {
    /// A malformed announcement: the packet is `+inv`.
    pub invalid: bool,
    /// An announcement cut by the segment's end (nothing recorded).
    pub incomplete: bool,
    /// The data connection to expect.
    pub expectation: Option<Expectation>,
    /// The rewrite of the announcement's address for NAT, when asked and the text changes;
    /// the new text is `edit_addr`'s, `delta` bytes longer than the old.
    pub edit: Option<PayloadEdit>,
    pub edit_addr: [u8; 16],
    pub delta: i32,
}

fn addr_bytes(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v) => {
            let mut b = [0; 16];
            b[..4].copy_from_slice(&v.octets());
            b
        }
        IpAddr::V6(v) => v.octets(),
    }
}

/// Reads a segment of a connection with a helper: `l4` is its L4 header and payload (to the end
/// of the IP datagram). For FTP, an announcement gives an expectation and, under NAT, a payload
/// edit; for TFTP, a packet of the request's direction expects the server's answer.
pub fn inspect(c: &Control<'_>, l4: &[u8], now: u64) -> AlgOutcome {
    match c.helper {
        Helper::Tftp => tftp::inspect(c, now),
        Helper::Ftp => ftp::inspect(c, l4, now),
    }
}

/// Addresses and tuples for the helpers' tests.
#[cfg(test)]
mod test_util {
    use super::*;

    pub(super) fn v4(s: &str) -> [u8; 16] {
        addr_bytes(IpAddr::V4(s.parse().unwrap()))
    }

    pub(super) fn v6(s: &str) -> [u8; 16] {
        addr_bytes(IpAddr::V6(s.parse().unwrap()))
    }

    pub(super) fn tuple(src: [u8; 16], sport: u16, dst: [u8; 16], dport: u16, proto: u8) -> Tuple {
        Tuple {
            src,
            dst,
            sport,
            dport,
            proto,
            v6: src[4..] != [0; 12],
            zone: 3,
            ..Tuple::default()
        }
    }
}
