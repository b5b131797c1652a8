//! TCP connection tracking with sequence-window checks.
//!
//! Each connection keeps one record per peer (originator, responder): the highest sequence
//! number the peer has sent (`seqlo`), the highest it may send given what the other side has
//! acknowledged and advertised (`seqhi`), its largest advertised window and its window-scale
//! shift. A segment is accepted when it lies within those bounds, as in Guido van Rooij's
//! "Real Stateful TCP Packet Filtering in IP Filter" (the algorithm of OpenBSD pf, which Open
//! vSwitch's userspace tracker `lib/conntrack-tcp.c` inherits); sequence arithmetic is modulo
//! 2^32 (RFC 9293 §3.4).
//!
//! The behaviour deliberately follows OVS's userspace datapath, which is the oracle for this
//! crate, including where it departs from a textbook TCP state machine:
//!
//! - a connection may start from any segment with acceptable flags except SYN+ACK (mid-stream
//!   pickup, and even a bare RST); mid-stream connections do not know the window scale, so
//!   they assume the largest one (14) in both directions;
//! - each peer only moves through CLOSED → SYN_SENT → ESTABLISHED → CLOSING (sent FIN) →
//!   FIN_WAIT_2 (its FIN was acknowledged) → TIME_WAIT (reset); the other RFC 9293 names are
//!   never used;
//! - SACK blocks and timestamps are ignored; window scaling counts only when both SYNs carry
//!   the option;
//! - a RST must, besides being in the window, carry the exact next sequence number (±1);
//! - shortly after the opening and after the close a looser check applies, that does not
//!   re-arm the connection's timer;
//! - "liberal" mode (OVS's `dpctl/ct-disable-tcp-seq-chk`) accepts every segment whose flags
//!   are acceptable and keeps tracking states.
//!
//! Nothing here allocates or panics, whatever the input.

use wire::TcpPacket;
use wire::tcp::option;

/// FIN flag bit of [`Segment::flags`].
pub const FIN: u16 = 0x001;
/// SYN flag bit.
pub const SYN: u16 = 0x002;
/// RST flag bit.
pub const RST: u16 = 0x004;
/// PSH flag bit.
pub const PSH: u16 = 0x008;
/// ACK flag bit.
pub const ACK: u16 = 0x010;
/// URG flag bit.
pub const URG: u16 = 0x020;

/// Largest window-scale shift RFC 7323 allows; larger option values are clamped to it.
const MAX_WSCALE: u8 = 14;

/// What the tracker needs of one TCP segment (host byte order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number (meaningful only with ACK).
    pub ack: u32,
    /// Advertised receive window, unscaled as carried in the header.
    pub window: u16,
    /// The 12 flag bits (FIN=0x01 SYN=0x02 RST=0x04 PSH=0x08 ACK=0x10 URG=0x20 ECE=0x40
    /// CWR=0x80 AE=0x100, then the three reserved bits).
    pub flags: u16,
    /// TCP payload bytes.
    pub payload_len: u32,
    /// Window scale option when present (SYN segments), as carried (not clamped).
    pub wscale: Option<u8>,
    /// Whether the SACK-permitted option is present (reported only; OVS ignores SACK).
    pub sack_permitted: bool,
}

impl Segment {
    /// Parses a TCP header. `tcp` starts at the TCP header and runs to the end of the IP payload
    /// (so `payload_len = tcp.len() - data offset * 4`; Ethernet padding must not be included).
    ///
    /// `None` when shorter than 20 bytes or the data offset is below 5 or beyond `tcp`. Options
    /// are read as OVS reads them, tolerantly: a malformed option ends the walk (or, with a
    /// length below 2, is stepped over as 2 bytes) but does not reject the segment, since OVS
    /// tracks such segments normally.
    pub fn parse(tcp: &[u8]) -> Option<Segment> {
        Self::parse_with_len(tcp, tcp.len())
    }

    /// Same as [`Segment::parse`], but the segment's full length is `l4_len` while only `tcp`
    /// (at least the whole header) is present, as for the first fragment of a reassembled
    /// datagram. `None` also when `l4_len` is shorter than the header or above `u32::MAX`.
    pub fn parse_with_len(tcp: &[u8], l4_len: usize) -> Option<Segment> {
        let packet = TcpPacket::new_checked(tcp).ok()?;
        let payload_len = u32::try_from(l4_len.checked_sub(packet.header_len())?).ok()?;
        let (wscale, sack_permitted) = scan_options(packet.options());
        Some(Segment {
            seq: packet.seq_number(),
            ack: packet.ack_number(),
            window: packet.window_len(),
            // The reserved bits sit above the nine named flags, as in OVS's 12-bit TCP_FLAGS.
            flags: (u16::from(packet.reserved()) << 9) | packet.flags().bits(),
            payload_len,
            wscale,
            sack_permitted,
        })
    }

    /// Sequence space the segment occupies: payload plus one for SYN and one for FIN.
    fn seq_len(&self) -> u32 {
        self.payload_len
            .wrapping_add(u32::from(self.flags & SYN != 0))
            .wrapping_add(u32::from(self.flags & FIN != 0))
    }
}

/// Walks the option bytes the way OVS does for the window scale: stop at end-of-list or when
/// fewer than three bytes remain for a window option, step over NOPs one byte at a time and
/// over anything else by its length byte (at least 2); the last window option wins.
fn scan_options(mut opts: &[u8]) -> (Option<u8>, bool) {
    let mut wscale = None;
    let mut sack_permitted = false;
    // Two bytes are enough to see SACK-permitted; a window option needs three, which is the
    // only bound OVS's walk uses, so the outcome for the window scale is the same.
    while let [kind, len, rest @ ..] = opts {
        match *kind {
            option::END => break,
            option::NOP => {
                opts = &opts[1..];
                continue;
            }
            option::WINDOW_SCALE => {
                if let Some(&shift) = rest.first() {
                    wscale = Some(shift);
                }
            }
            option::SACK_PERMITTED => sack_permitted = true,
            _ => {}
        }
        let step = usize::from(*len).max(2);
        opts = opts.get(step..).unwrap_or(&[]);
    }
    (wscale, sack_permitted)
}

/// Timeout class of a connection, the keys of OVS's timeout policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TcpTimeout {
    /// Only the originator has spoken (OVS `CT_TM_TCP_FIRST_PACKET`).
    SynSent,
    /// Either peer not yet established (OVS `CT_TM_TCP_OPENING`).
    SynRecv,
    /// Both peers established, neither closing.
    Established,
    /// One peer has sent FIN (OVS `CT_TM_TCP_CLOSING`).
    FinWait,
    /// Both peers have sent FIN (OVS `CT_TM_TCP_FIN_WAIT`).
    TimeWait,
    /// Both FINs acknowledged, or reset (OVS `CT_TM_TCP_CLOSED`).
    Close,
}

impl TcpTimeout {
    /// Every class, in OVS's timeout-policy attribute order.
    pub const ALL: [TcpTimeout; 6] = [
        TcpTimeout::SynSent,
        TcpTimeout::SynRecv,
        TcpTimeout::Established,
        TcpTimeout::FinWait,
        TcpTimeout::TimeWait,
        TcpTimeout::Close,
    ];

    /// The timeout-policy key OVS uses for this class (`ovs-vsctl add-zone-tp ... tcp_syn_sent=`).
    pub const fn name(self) -> &'static str {
        match self {
            TcpTimeout::SynSent => "tcp_syn_sent",
            TcpTimeout::SynRecv => "tcp_syn_recv",
            TcpTimeout::Established => "tcp_established",
            TcpTimeout::FinWait => "tcp_fin_wait",
            TcpTimeout::TimeWait => "tcp_time_wait",
            TcpTimeout::Close => "tcp_close",
        }
    }
}

/// OVS's default timeout in seconds for a class when no timeout policy overrides it (the
/// userspace datapath's `ct_dpif_netdev_tp_def` in `lib/conntrack-tp.c`).
pub const fn default_timeout_secs(class: TcpTimeout) -> u32 {
    match class {
        TcpTimeout::SynSent => 30,
        TcpTimeout::SynRecv => 30,
        TcpTimeout::Established => 24 * 60 * 60,
        TcpTimeout::FinWait => 15 * 60,
        TcpTimeout::TimeWait => 45,
        TcpTimeout::Close => 30,
    }
}

/// Result of a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update {
    /// Fine, go on. Whether OVS marks it `+est` or `+new` is [`TcpConn::established`].
    Valid,
    /// Out of window or bad flags: the packet is `+inv`. The timer class is unchanged, and so
    /// are the states, with one exception copied from OVS: the first segment seen from a peer
    /// records its initial sequence number, window scale and SYN_SENT before the window check,
    /// and keeps them even when the check then fails.
    Invalid,
    /// A new SYN on a connection that is closed (both sides closed or TIME_WAIT): the caller
    /// should delete the old connection and start a new one with this segment.
    Reopen,
}

/// Per-peer state, numbered as OVS's `enum ct_dpif_tcp_state` so that the order (which the
/// tracker compares) and the printed names match. OVS's userspace tracker uses only these six.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
enum PeerState {
    Closed = 0,
    SynSent = 2,
    Established = 4,
    /// Sent FIN; OVS reuses CLOSING for "FIN sent, not yet acknowledged".
    Closing = 7,
    /// FIN acknowledged.
    FinWait2 = 9,
    /// Reset seen.
    TimeWait = 10,
}

impl PeerState {
    const fn name(self) -> &'static str {
        match self {
            PeerState::Closed => "CLOSED",
            PeerState::SynSent => "SYN_SENT",
            PeerState::Established => "ESTABLISHED",
            PeerState::Closing => "CLOSING",
            PeerState::FinWait2 => "FIN_WAIT_2",
            PeerState::TimeWait => "TIME_WAIT",
        }
    }
}

/// The window-scale byte keeps OVS's encoding: the shift in the low bits, plus whether the
/// peer's SYN carried the option, or that the connection was picked up mid-stream.
mod ws {
    pub const SHIFT_MASK: u8 = 0x0f;
    pub const UNKNOWN: u8 = 0x40;
    pub const PRESENT: u8 = 0x80;
}

/// Protocol-info flag: the peer's SYN carried a window scale (`WINDOW_SCALE` in verbose dumps).
pub const TCPF_WINDOW_SCALE: u8 = 0x01;
/// Protocol-info flag: window unknown, picked up mid-stream (`BE_LIBERAL` in verbose dumps).
pub const TCPF_BE_LIBERAL: u8 = 0x08;

/// Slack of the ACK check and of the loose path: one maximal unscaled window plus a
/// reassembled fragment's worth (pf's arbitrary 1500).
const MAX_ACK_WINDOW: u32 = 0xffff + 1500;

/// One direction's sequence bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Peer {
    /// Highest sequence number sent so far (the end of the furthest segment).
    seqlo: u32,
    /// Highest sequence number the peer may send: the other side's ACK plus its window.
    seqhi: u32,
    /// Largest window advertised, before scaling.
    max_win: u16,
    /// Window scale, see [`ws`].
    wscale: u8,
    state: PeerState,
}

impl Peer {
    const fn shift(&self) -> u8 {
        self.wscale & ws::SHIFT_MASK
    }
}

/// State of one TCP connection, both directions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpConn {
    /// Originator, responder.
    peers: [Peer; 2],
    /// Timer class OVS armed last.
    timer: TcpTimeout,
    /// Whether the last accepted segment re-armed the timer.
    refreshed: bool,
    /// Whether OVS would mark the last accepted segment `+est` (rather than `+new`).
    est: bool,
}

// The tracking state lives in each connection entry; keep it within half a cache line.
const _: () = assert!(size_of::<TcpConn>() <= 32);

/// `a <= b` in sequence space (RFC 9293 §3.4).
const fn seq_leq(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) <= 0
}

/// `a >= b` in sequence space.
const fn seq_geq(a: u32, b: u32) -> bool {
    seq_leq(b, a)
}

/// `a > b` in sequence space.
const fn seq_gt(a: u32, b: u32) -> bool {
    !seq_leq(a, b)
}

/// Encodes a SYN's window scale option as OVS stores it.
fn wscale_byte(seg: &Segment) -> u8 {
    match seg.wscale {
        Some(shift) => shift.min(MAX_WSCALE) | ws::PRESENT,
        None => 0,
    }
}

impl TcpConn {
    /// Whether a segment's flag combination is acceptable at all. Rejected, as OVS does:
    /// SYN with RST or FIN; neither SYN, ACK nor RST (including no flags at all); FIN, PSH or
    /// URG without ACK.
    pub const fn valid_flags(flags: u16) -> bool {
        if flags & SYN != 0 {
            if flags & (RST | FIN) != 0 {
                return false;
            }
        } else if flags & (ACK | RST) == 0 {
            return false;
        }
        flags & ACK != 0 || flags & (FIN | PSH | URG) == 0
    }

    /// Whether this segment (original direction) may create a connection, and the connection
    /// it creates. Like OVS: any segment with acceptable flags except SYN+ACK, so a SYN, a
    /// mid-stream segment, or even a bare RST (OVS's `tcp_valid_new` does not exclude it).
    pub fn new(seg: &Segment) -> Option<TcpConn> {
        if !Self::valid_flags(seg.flags) || seg.flags & (SYN | ACK) == SYN | ACK {
            return None;
        }
        let seqlo = seg.seq;
        let (src_ws, dst_ws) = if seg.flags & SYN != 0 {
            (wscale_byte(seg), 0)
        } else {
            // Picked up mid-stream: the scales were negotiated where we could not see them.
            (ws::UNKNOWN, ws::UNKNOWN)
        };
        let mut max_win = seg.window.max(1);
        let shift = src_ws & ws::SHIFT_MASK;
        if shift != 0 {
            // Windows are kept unscaled; a SYN's own window is never scaled (RFC 7323 §2.2),
            // so this is what OVS stores.
            max_win = u32::from(max_win).div_ceil(1 << shift) as u16;
        }
        let src = Peer {
            seqlo,
            // The segment's end plus one: the other side has not advertised a window yet.
            seqhi: seqlo.wrapping_add(seg.seq_len()).wrapping_add(1),
            max_win,
            wscale: src_ws,
            state: PeerState::SynSent,
        };
        let dst = Peer {
            seqlo: 0,
            // 1 marks "not yet known": the responder's first segment sets it.
            seqhi: 1,
            max_win: 1,
            wscale: dst_ws,
            state: PeerState::Closed,
        };
        Some(TcpConn {
            peers: [src, dst],
            timer: TcpTimeout::SynSent,
            refreshed: true,
            est: false,
        })
    }

    /// Tracks `seg`, sent by the originator (`reply == false`) or the responder. `liberal`:
    /// skip window checks (OVS's `dpctl/ct-disable-tcp-seq-chk`) but still track states.
    pub fn update(&mut self, seg: &Segment, reply: bool, liberal: bool) -> Update {
        let flags = seg.flags;
        if !Self::valid_flags(flags) {
            return Update::Invalid;
        }
        let [orig, resp] = &mut self.peers;
        let (src, dst) = if reply { (resp, orig) } else { (orig, resp) };

        if flags & (SYN | ACK) == SYN {
            if src.state >= PeerState::FinWait2 && dst.state >= PeerState::FinWait2 {
                src.state = PeerState::Closed;
                dst.state = PeerState::Closed;
                return Update::Reopen;
            }
            if src.state <= PeerState::SynSent {
                // A retransmitted (or simultaneous-open) SYN: still opening, OVS says +new.
                src.state = PeerState::SynSent;
                self.timer = TcpTimeout::SynSent;
                self.refreshed = true;
                self.est = false;
                return Update::Valid;
            }
        }

        // Scales apply only once both SYNs have agreed on them, and never to a SYN itself.
        let (mut sws, mut dws) = (0u8, 0u8);
        if flags & SYN == 0 {
            if src.wscale & dst.wscale & ws::PRESENT != 0 {
                sws = src.shift();
                dws = dst.shift();
            } else if src.wscale & dst.wscale & ws::UNKNOWN != 0 {
                sws = MAX_WSCALE;
                dws = MAX_WSCALE;
            }
        }

        let orig_seq = seg.seq;
        let mut seq = seg.seq;
        let mut end = seq.wrapping_add(seg.seq_len());
        let mut win = seg.window;
        let mut check_ackskew = true;

        if src.state < PeerState::SynSent {
            // The responder's first segment: learn its sequence space and window scale.
            if flags & SYN != 0 && dst.wscale & ws::PRESENT != 0 {
                src.wscale = wscale_byte(seg);
                if src.wscale & ws::PRESENT != 0 {
                    sws = src.shift();
                    win = u32::from(win).div_ceil(1 << sws) as u16;
                    dws = dst.shift();
                } else {
                    // Only one side offered scaling, so neither uses it (RFC 7323 §2.2): undo
                    // the originator's and forget it, OVS's fixup keeping the 16-bit store.
                    dst.max_win = (u32::from(dst.max_win) << dst.shift()) as u16;
                    dst.wscale = 0;
                }
            }
            src.seqlo = seq;
            src.state = PeerState::SynSent;
            let span = (u32::from(dst.max_win) << dws).max(1);
            // seqhi may already hold a bound from the other side's ACKs (mid-stream pickup);
            // only widen it. A fresh bound also relaxes the ACK check for this one segment.
            if src.seqhi == 1 || seq_geq(end.wrapping_add(span), src.seqhi) {
                src.seqhi = end.wrapping_add(span);
                check_ackskew = false;
            }
            src.max_win = src.max_win.max(win);
        }

        let mut ack = seg.ack;
        // Without ACK there is nothing to check; some stacks send RST+ACK with ack 0.
        if flags & ACK == 0 || (ack == 0 && flags & (ACK | RST) == ACK | RST) {
            ack = dst.seqlo;
        }

        if seq == end {
            // Empty segments (pure ACKs, keep-alives, window probes of nothing) are checked
            // only for their ACK.
            seq = src.seqlo;
            end = seq;
        }

        let ackskew = if check_ackskew {
            i64::from(dst.seqlo.wrapping_sub(ack) as i32)
        } else {
            0
        };
        let dst_span = u32::from(dst.max_win) << dws;
        let in_window =
            // The last octet fits in what the receiver allows.
            seq_geq(src.seqhi, end)
            // A retransmission reaches back at most one window.
            && seq_geq(seq, src.seqlo.wrapping_sub(dst_span))
            // ACKs at most a window plus a fragment behind, and a window ahead.
            && ackskew >= -i64::from(MAX_ACK_WINDOW)
            && ackskew <= i64::from(MAX_ACK_WINDOW) << sws
            // A reset must carry the expected sequence number, give or take one.
            && (flags & RST == 0
                || orig_seq == src.seqlo
                || orig_seq == src.seqlo.wrapping_add(1)
                || orig_seq.wrapping_add(1) == src.seqlo);

        if in_window || liberal {
            src.slide(dst, win, sws, end, ack);
            if flags & FIN != 0 && src.state < PeerState::Closing {
                src.state = PeerState::Closing;
            }
            if flags & ACK != 0 {
                if dst.state == PeerState::SynSent {
                    dst.state = PeerState::Established;
                } else if dst.state == PeerState::Closing {
                    dst.state = PeerState::FinWait2;
                }
            }
            if flags & RST != 0 {
                src.state = PeerState::TimeWait;
                dst.state = PeerState::TimeWait;
            }
            let (lo, hi) = (src.state.min(dst.state), src.state.max(dst.state));
            self.timer = if lo >= PeerState::FinWait2 {
                TcpTimeout::Close
            } else if lo >= PeerState::Closing {
                TcpTimeout::TimeWait
            } else if lo < PeerState::Established {
                TcpTimeout::SynRecv
            } else if hi >= PeerState::Closing {
                TcpTimeout::FinWait
            } else {
                TcpTimeout::Established
            };
            self.refreshed = true;
            self.est = true;
            Update::Valid
        } else if (dst.state < PeerState::SynSent
            || dst.state >= PeerState::FinWait2
            || src.state >= PeerState::FinWait2)
            && seq_geq(src.seqhi.wrapping_add(MAX_ACK_WINDOW), end)
            && seq_geq(seq, src.seqlo.wrapping_sub(MAX_ACK_WINDOW))
        {
            // Loose path, within a window plus slack either way: SYNs shotgunned before the
            // peer answered, a stream picked up after it started, stragglers after a close.
            // It tracks but does not re-arm the timer, so a flood of such segments cannot
            // keep a dead connection alive.
            src.slide(dst, win, sws, end, ack);
            if flags & FIN != 0 && src.state < PeerState::Closing {
                src.state = PeerState::Closing;
            }
            if flags & RST != 0 {
                src.state = PeerState::TimeWait;
                dst.state = PeerState::TimeWait;
            }
            self.refreshed = false;
            self.est = true;
            Update::Valid
        } else {
            Update::Invalid
        }
    }

    /// Which timeout applies now: the class OVS armed at the last segment that re-armed the
    /// timer (see [`TcpConn::timer_refreshed`]).
    pub fn timeout(&self) -> TcpTimeout {
        self.timer
    }

    /// Whether the last [`Update::Valid`] segment (or the creating one) re-armed the
    /// connection's timer, i.e. whether the caller should set the expiry to now plus the
    /// [`TcpTimeout`] of [`TcpConn::timeout`]. False after a segment OVS accepts on its loose
    /// path (around the opening and after the close), which leaves the expiry as it was.
    pub fn timer_refreshed(&self) -> bool {
        self.refreshed
    }

    /// Whether OVS marks the last [`Update::Valid`] segment `+est` (otherwise `+new`).
    ///
    /// OVS's userspace tracker does not wait for a reply: every accepted segment after the
    /// creating one is `+est`, except a SYN (without ACK) from a peer that has not got beyond
    /// SYN_SENT (a retransmitted or simultaneous-open SYN), which stays `+new`. False on a
    /// fresh connection (its creating segment is `+new`).
    pub fn established(&self) -> bool {
        self.est
    }

    /// The state `ovs-appctl dpctl/dump-conntrack` prints in `protoinfo=(state=NAME)`: the
    /// further advanced of the two peers, with FIN_WAIT_2 shown as TIME_WAIT (and SYN_RECV as
    /// ESTABLISHED, which this tracker never uses) to read like the kernel's single state.
    /// So one of SYN_SENT, ESTABLISHED, CLOSING, TIME_WAIT, or CLOSED after
    /// [`Update::Reopen`].
    pub fn state_name(&self) -> &'static str {
        let [orig, resp] = &self.peers;
        match orig.state.max(resp.state) {
            PeerState::FinWait2 => PeerState::TimeWait.name(),
            s => s.name(),
        }
    }

    /// Per-peer states (originator, responder) as OVS's `CT_DPIF_TCPS_*` names, as the verbose
    /// dump prints them in `state_orig=`, `state_reply=`: CLOSED, SYN_SENT, ESTABLISHED,
    /// CLOSING (FIN sent), FIN_WAIT_2 (FIN acknowledged) or TIME_WAIT (reset).
    pub fn peer_states(&self) -> (&'static str, &'static str) {
        let [orig, resp] = &self.peers;
        (orig.state.name(), resp.state.name())
    }

    /// Window-scale shifts (originator, responder) as the verbose dump prints them in
    /// `wscale_orig=`, `wscale_reply=` (OVS prints them only when either is non-zero).
    pub fn wscales(&self) -> (u8, u8) {
        let [orig, resp] = &self.peers;
        (orig.shift(), resp.shift())
    }

    /// Protocol-info flags (originator, responder): [`TCPF_WINDOW_SCALE`] and
    /// [`TCPF_BE_LIBERAL`], as in `flags_orig=`, `flags_reply=`.
    pub fn peer_flags(&self) -> (u8, u8) {
        let flags = |p: &Peer| {
            let mut f = 0;
            if p.wscale & ws::PRESENT != 0 {
                f |= TCPF_WINDOW_SCALE;
            }
            if p.wscale & ws::UNKNOWN != 0 {
                f |= TCPF_BE_LIBERAL;
            }
            f
        };
        let [orig, resp] = &self.peers;
        (flags(orig), flags(resp))
    }
}

impl Peer {
    /// Records an accepted segment of this peer: its window, how far it has sent, and how far
    /// the other side (`dst`) may now send given this segment's ACK and window.
    fn slide(&mut self, dst: &mut Peer, win: u16, sws: u8, end: u32, ack: u32) {
        self.max_win = self.max_win.max(win);
        if seq_gt(end, self.seqlo) {
            self.seqlo = end;
        }
        let scaled = u32::from(win) << sws;
        if seq_geq(ack.wrapping_add(scaled), dst.seqhi) {
            dst.seqhi = ack.wrapping_add(scaled.max(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn seg(seq: u32, ack: u32, flags: u16, window: u16, payload_len: u32) -> Segment {
        Segment {
            seq,
            ack,
            window,
            flags,
            payload_len,
            wscale: None,
            sack_permitted: false,
        }
    }

    fn syn(seq: u32, window: u16, wscale: Option<u8>) -> Segment {
        Segment {
            wscale,
            ..seg(seq, 0, SYN, window, 0)
        }
    }

    fn synack(seq: u32, ack: u32, window: u16, wscale: Option<u8>) -> Segment {
        Segment {
            wscale,
            ..seg(seq, ack, SYN | ACK, window, 0)
        }
    }

    const A: u32 = 1000; // originator's ISN
    const B: u32 = 5000; // responder's ISN

    /// SYN, SYN+ACK, ACK without scaling; windows 1000 both ways.
    fn handshake() -> TcpConn {
        let mut c = TcpConn::new(&syn(A, 1000, None)).unwrap();
        assert_eq!(
            c.update(&synack(B, A + 1, 1000, None), true, false),
            Update::Valid
        );
        assert_eq!(
            c.update(&seg(A + 1, B + 1, ACK, 1000, 0), false, false),
            Update::Valid
        );
        assert_eq!(c.state_name(), "ESTABLISHED");
        assert_eq!(c.timeout(), TcpTimeout::Established);
        c
    }

    /// A TCP header with the given fields and option bytes (padded to 4) plus `payload` zeros.
    fn header(seq: u32, ack: u32, flags: u16, win: u16, opts: &[u8], payload: usize) -> Vec<u8> {
        let mut o = opts.to_vec();
        while !o.len().is_multiple_of(4) {
            o.push(0);
        }
        let doff = (20 + o.len()) / 4;
        let mut h = vec![0x30, 0x39, 0x00, 0x50];
        h.extend_from_slice(&seq.to_be_bytes());
        h.extend_from_slice(&ack.to_be_bytes());
        h.extend_from_slice(&((doff as u16) << 12 | flags).to_be_bytes());
        h.extend_from_slice(&win.to_be_bytes());
        h.extend_from_slice(&[0, 0, 0, 0]);
        h.extend_from_slice(&o);
        h.resize(h.len() + payload, 0);
        h
    }

    #[test]
    fn parse_linux_syn() {
        // MSS 1460, SACK-permitted, timestamps, NOP, window scale 7: Linux's SYN layout.
        let opts = [
            2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
        ];
        let h = header(0x0102_0304, 0, SYN, 64240, &opts, 0);
        let s = Segment::parse(&h).unwrap();
        assert_eq!(
            s,
            Segment {
                seq: 0x0102_0304,
                ack: 0,
                window: 64240,
                flags: SYN,
                payload_len: 0,
                wscale: Some(7),
                sack_permitted: true,
            }
        );
    }

    #[test]
    fn parse_lengths_and_flags() {
        let h = header(1, 2, ACK | PSH | 0xe00, 3, &[], 10);
        let s = Segment::parse(&h).unwrap();
        assert_eq!((s.payload_len, s.flags), (10, ACK | PSH | 0xe00));
        assert_eq!(
            Segment::parse_with_len(&h[..20], 1400).unwrap().payload_len,
            1380
        );
        assert_eq!(Segment::parse_with_len(&h[..20], 19), None);
        assert_eq!(Segment::parse(&h[..19]), None);
        let mut bad = h.clone();
        bad[12] = 0x40; // data offset 4
        assert_eq!(Segment::parse(&bad), None);
        bad[12] = 0xf0; // 60 bytes, beyond the 30 present
        assert_eq!(Segment::parse(&bad), None);
    }

    #[test]
    fn parse_options_like_ovs() {
        // A zero length is stepped over as 2 bytes, not rejected.
        let h = header(1, 0, SYN, 1, &[99, 0, 3, 3, 9], 0);
        assert_eq!(Segment::parse(&h).unwrap().wscale, Some(9));
        // An option running past the end stops the walk.
        let h = header(1, 0, SYN, 1, &[99, 40, 3, 3, 9], 0);
        assert_eq!(Segment::parse(&h).unwrap().wscale, None);
        // End of list stops it too.
        let h = header(1, 0, SYN, 1, &[0, 3, 3, 9], 0);
        assert_eq!(Segment::parse(&h).unwrap().wscale, None);
    }

    #[test]
    fn flag_combinations() {
        for ok in [
            SYN,
            SYN | ACK,
            ACK,
            ACK | FIN,
            ACK | PSH,
            RST,
            RST | ACK,
            ACK | URG,
        ] {
            assert!(TcpConn::valid_flags(ok), "{ok:#x}");
        }
        for bad in [
            0,
            SYN | FIN,
            SYN | RST,
            SYN | FIN | ACK,
            FIN,
            PSH,
            URG,
            FIN | RST,
            0x40,
        ] {
            assert!(!TcpConn::valid_flags(bad), "{bad:#x}");
        }
    }

    #[test]
    fn creation() {
        assert!(TcpConn::new(&synack(B, A, 1000, None)).is_none());
        assert!(TcpConn::new(&seg(A, 0, SYN | FIN, 1000, 0)).is_none());
        assert!(TcpConn::new(&seg(A, 0, 0, 1000, 0)).is_none());
        // Mid-stream pickup, and OVS lets a bare RST create an entry as well.
        let c = TcpConn::new(&seg(A, B, ACK, 1000, 10)).unwrap();
        assert_eq!(c.peer_flags(), (TCPF_BE_LIBERAL, TCPF_BE_LIBERAL));
        assert!(TcpConn::new(&seg(A, 0, RST, 0, 0)).is_some());
        let c = TcpConn::new(&syn(A, 1000, Some(7))).unwrap();
        assert_eq!(c.state_name(), "SYN_SENT");
        assert_eq!(c.peer_states(), ("SYN_SENT", "CLOSED"));
        assert_eq!(c.timeout(), TcpTimeout::SynSent);
        assert!(!c.established());
    }

    #[test]
    fn syn_retransmission_stays_new() {
        let mut c = TcpConn::new(&syn(A, 1000, None)).unwrap();
        assert_eq!(c.update(&syn(A, 1000, None), false, false), Update::Valid);
        assert!(!c.established());
        assert_eq!(
            c.update(&synack(B, A + 1, 1000, None), true, false),
            Update::Valid
        );
        assert!(c.established());
        assert_eq!(c.peer_states(), ("ESTABLISHED", "SYN_SENT"));
        assert_eq!(c.timeout(), TcpTimeout::SynRecv);
    }

    #[test]
    fn window_edge() {
        // The responder advertised 1000 bytes from A+1: A+1..=A+1000 fit.
        let mut c = handshake();
        let edge = seg(A + 1, B + 1, ACK, 1000, 1000);
        assert_eq!(c.clone().update(&edge, false, false), Update::Valid);
        let past = seg(A + 1, B + 1, ACK, 1000, 1001);
        assert_eq!(c.clone().update(&past, false, false), Update::Invalid);
        assert_eq!(c.clone().update(&past, false, true), Update::Valid);
        // Invalid leaves the connection as it was.
        let before = format!("{c:?}");
        assert_eq!(c.update(&past, false, false), Update::Invalid);
        assert_eq!(format!("{c:?}"), before);
    }

    #[test]
    fn retransmission_keepalive_and_zero_window() {
        let mut c = handshake();
        let data = seg(A + 1, B + 1, ACK | PSH, 1000, 500);
        assert_eq!(c.update(&data, false, false), Update::Valid);
        assert_eq!(c.update(&data, false, false), Update::Valid); // retransmitted
        // Keep-alive: one byte before what was sent, no data.
        assert_eq!(
            c.update(&seg(A + 500, B + 1, ACK, 1000, 0), false, false),
            Update::Valid
        );
        // Receiver closes its window after taking the 500 bytes.
        assert_eq!(
            c.update(&seg(B + 1, A + 501, ACK, 0, 0), true, false),
            Update::Valid
        );
        // The old window still stands (it is never shrunk), and a 1-byte probe fits.
        assert_eq!(
            c.update(&seg(A + 501, B + 1, ACK, 1000, 1), false, false),
            Update::Valid
        );
        // Far ahead of anything advertised: out.
        assert_eq!(
            c.update(&seg(A + 5000, B + 1, ACK, 1000, 1), false, false),
            Update::Invalid
        );
        // Retransmission from more than a window back: out.
        assert_eq!(
            c.update(
                &seg(A.wrapping_sub(2000), B + 1, ACK, 1000, 1),
                false,
                false
            ),
            Update::Invalid
        );
    }

    #[test]
    fn ack_skew() {
        let mut c = handshake();
        // Acknowledging data the responder never sent, beyond the slack: invalid.
        let bogus = seg(A + 1, B + 1 + MAX_ACK_WINDOW + 1, ACK, 1000, 0);
        assert_eq!(c.update(&bogus, false, false), Update::Invalid);
        let fine = seg(A + 1, B + 1 + MAX_ACK_WINDOW, ACK, 1000, 0);
        assert_eq!(c.update(&fine, false, false), Update::Valid);
    }

    #[test]
    fn rst_needs_exact_sequence() {
        // After 10 bytes the originator's next sequence number is A+11. (Before any data it
        // would be A: OVS records only the SYN's start, so A-1..=A+1 are taken then.)
        let mut c = handshake();
        let data = seg(A + 1, B + 1, ACK | PSH, 1000, 10);
        assert_eq!(c.update(&data, false, false), Update::Valid);
        for (seq, want) in [
            (A + 11, Update::Valid),
            (A + 12, Update::Valid),
            (A + 10, Update::Valid),
            (A + 13, Update::Invalid),
            (A + 9, Update::Invalid),
            (A + 100_000, Update::Invalid),
        ] {
            let mut c = c.clone();
            assert_eq!(
                c.update(&seg(seq, 0, RST, 0, 0), false, false),
                want,
                "{seq}"
            );
            if want == Update::Valid {
                assert_eq!(c.peer_states(), ("TIME_WAIT", "TIME_WAIT"));
                assert_eq!(c.state_name(), "TIME_WAIT");
                assert_eq!(c.timeout(), TcpTimeout::Close);
            }
        }
        // Liberal mode takes it anyway.
        assert_eq!(
            c.update(&seg(A + 13, 0, RST, 0, 0), false, true),
            Update::Valid
        );
    }

    #[test]
    fn bad_flags_invalid_even_liberal() {
        let mut c = handshake();
        assert_eq!(
            c.update(&seg(A + 1, 0, SYN | FIN, 0, 0), false, true),
            Update::Invalid
        );
        assert_eq!(
            c.update(&seg(A + 1, 0, 0, 0, 0), false, true),
            Update::Invalid
        );
        assert_eq!(
            c.update(&seg(A + 1, 0, FIN, 0, 0), false, true),
            Update::Invalid
        );
        assert_eq!(c.state_name(), "ESTABLISHED");
    }

    fn close(c: &mut TcpConn, first_reply: bool) {
        let (s1, a1, s2, a2) = if first_reply {
            (B + 1, A + 1, A + 1, B + 2)
        } else {
            (A + 1, B + 1, B + 1, A + 2)
        };
        let r = first_reply;
        assert_eq!(
            c.update(&seg(s1, a1, FIN | ACK, 1000, 0), r, false),
            Update::Valid
        );
        assert_eq!(c.state_name(), "CLOSING");
        assert_eq!(c.timeout(), TcpTimeout::FinWait);
        assert_eq!(
            c.update(&seg(s2, a2, ACK, 1000, 0), !r, false),
            Update::Valid
        );
        assert_eq!(c.state_name(), "TIME_WAIT"); // FIN_WAIT_2, printed coalesced
        assert_eq!(c.timeout(), TcpTimeout::FinWait);
        assert_eq!(
            c.update(&seg(s2, a2, FIN | ACK, 1000, 0), !r, false),
            Update::Valid
        );
        assert_eq!(c.timeout(), TcpTimeout::TimeWait);
        assert_eq!(
            c.update(&seg(a2, s2 + 1, ACK, 1000, 0), r, false),
            Update::Valid
        );
        assert_eq!(c.peer_states(), ("FIN_WAIT_2", "FIN_WAIT_2"));
        assert_eq!(c.state_name(), "TIME_WAIT");
        assert_eq!(c.timeout(), TcpTimeout::Close);
    }

    #[test]
    fn close_either_side_first() {
        close(&mut handshake(), false);
        close(&mut handshake(), true);
    }

    #[test]
    fn simultaneous_close() {
        let mut c = handshake();
        assert_eq!(
            c.update(&seg(A + 1, B + 1, FIN | ACK, 1000, 0), false, false),
            Update::Valid
        );
        // The crossing FIN carries an ACK, and OVS takes any ACK after a FIN as acknowledging it.
        assert_eq!(
            c.update(&seg(B + 1, A + 1, FIN | ACK, 1000, 0), true, false),
            Update::Valid
        );
        assert_eq!(c.peer_states(), ("FIN_WAIT_2", "CLOSING"));
        assert_eq!(c.state_name(), "TIME_WAIT");
        assert_eq!(c.timeout(), TcpTimeout::TimeWait);
        assert_eq!(
            c.update(&seg(A + 2, B + 2, ACK, 1000, 0), false, false),
            Update::Valid
        );
        assert_eq!(
            c.update(&seg(B + 2, A + 2, ACK, 1000, 0), true, false),
            Update::Valid
        );
        assert_eq!(c.peer_states(), ("FIN_WAIT_2", "FIN_WAIT_2"));
        assert_eq!(c.timeout(), TcpTimeout::Close);
    }

    #[test]
    fn responder_closes_first() {
        let mut c = handshake();
        let fin = seg(B + 1, A + 1, FIN | ACK, 1000, 0);
        assert_eq!(c.update(&fin, true, false), Update::Valid);
        assert_eq!(c.peer_states(), ("ESTABLISHED", "CLOSING"));
        assert_eq!(c.state_name(), "CLOSING");
        assert_eq!(c.timeout(), TcpTimeout::FinWait);
    }

    #[test]
    fn syn_after_close_reopens() {
        let mut c = handshake();
        close(&mut c, false);
        // A stray in-window ACK after the close re-arms the timer as usual...
        let stray = seg(A + 2, B + 2, ACK, 1000, 0);
        assert_eq!(c.update(&stray, false, false), Update::Valid);
        assert!(c.timer_refreshed());
        // ...while data beyond the window passes only on the loose path, which does not.
        let late = seg(A + 2, B + 2, ACK, 1000, 2000);
        assert_eq!(c.update(&late, false, false), Update::Valid);
        assert!(!c.timer_refreshed());
        assert_eq!(c.timeout(), TcpTimeout::Close);
        assert_eq!(
            c.update(&syn(9999, 1000, None), false, false),
            Update::Reopen
        );
        assert_eq!(c.state_name(), "CLOSED");
        // Also after a reset, from either side.
        let mut c = handshake();
        assert_eq!(
            c.update(&seg(B + 1, 0, RST, 0, 0), true, false),
            Update::Valid
        );
        assert_eq!(c.update(&syn(7, 1000, None), true, false), Update::Reopen);
        // But not while half open.
        let mut c = handshake();
        assert_eq!(
            c.update(&seg(A + 1, B + 1, FIN | ACK, 1000, 0), false, false),
            Update::Valid
        );
        assert_ne!(
            c.update(&syn(9999, 1000, None), false, false),
            Update::Reopen
        );
    }

    #[test]
    fn window_scaling_needs_both_syns() {
        // Both offer scale 7: the responder's later window of 1000 means 128000 bytes. (Windows
        // only ever grow the bound, so the SYN+ACK's 65160 would already allow 65280.)
        let mut c = TcpConn::new(&syn(A, 64240, Some(7))).unwrap();
        assert_eq!(
            c.update(&synack(B, A + 1, 65160, Some(7)), true, false),
            Update::Valid
        );
        assert_eq!(
            c.update(&seg(A + 1, B + 1, ACK, 502, 0), false, false),
            Update::Valid
        );
        assert_eq!(
            c.update(&seg(B + 1, A + 1, ACK, 1000, 0), true, false),
            Update::Valid
        );
        assert_eq!(c.wscales(), (7, 7));
        assert_eq!(c.peer_flags(), (TCPF_WINDOW_SCALE, TCPF_WINDOW_SCALE));
        let edge = seg(A + 1, B + 1, ACK, 502, 128_000);
        assert_eq!(c.clone().update(&edge, false, false), Update::Valid);
        let past = seg(A + 1, B + 1, ACK, 502, 128_001);
        assert_eq!(c.update(&past, false, false), Update::Invalid);

        // Only the originator offers: windows are taken as they are.
        let mut c = TcpConn::new(&syn(A, 64240, Some(7))).unwrap();
        assert_eq!(
            c.update(&synack(B, A + 1, 1000, None), true, false),
            Update::Valid
        );
        assert_eq!(
            c.update(&seg(A + 1, B + 1, ACK, 502, 0), false, false),
            Update::Valid
        );
        assert_eq!(c.wscales(), (0, 0));
        let edge = seg(A + 1, B + 1, ACK, 502, 1000);
        assert_eq!(c.clone().update(&edge, false, false), Update::Valid);
        let past = seg(A + 1, B + 1, ACK, 502, 1001);
        assert_eq!(c.update(&past, false, false), Update::Invalid);
    }

    #[test]
    fn default_timeouts() {
        let secs = TcpTimeout::ALL.map(default_timeout_secs);
        assert_eq!(secs, [30, 30, 86400, 900, 45, 30]);
        assert_eq!(TcpTimeout::TimeWait.name(), "tcp_time_wait");
    }

    fn any_segment() -> impl Strategy<Value = Segment> {
        (
            any::<u32>(),
            any::<u32>(),
            any::<u16>(),
            0u16..0x1000,
            any::<u32>(),
            proptest::option::of(any::<u8>()),
            any::<bool>(),
        )
            .prop_map(
                |(seq, ack, window, flags, payload_len, wscale, sack_permitted)| Segment {
                    seq,
                    ack,
                    window,
                    flags,
                    payload_len,
                    wscale,
                    sack_permitted,
                },
            )
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80), extra in 0usize..100_000) {
            if let Some(s) = Segment::parse(&bytes)
                && let Some(mut c) = TcpConn::new(&s)
            {
                c.update(&s, true, false);
                c.update(&s, false, false);
            }
            let _ = Segment::parse_with_len(&bytes, bytes.len().wrapping_add(extra));
        }

        #[test]
        fn update_never_panics(
            first in any_segment(),
            rest in proptest::collection::vec((any_segment(), any::<bool>(), any::<bool>()), 0..32),
        ) {
            if let Some(mut c) = TcpConn::new(&first) {
                for (s, reply, liberal) in &rest {
                    let before = c.clone();
                    let r = c.update(s, *reply, *liberal);
                    // States only move on Valid and Reopen, but for a peer's first segment.
                    if r == Update::Invalid {
                        let (o, p) = before.peer_states();
                        let first = if *reply { p } else { o } == "CLOSED";
                        if !first {
                            prop_assert_eq!(before.peer_states(), c.peer_states());
                        }
                        prop_assert_eq!(before.timeout(), c.timeout());
                    }
                    let _ = (c.state_name(), c.timeout(), c.established(), c.wscales());
                }
            }
        }

        #[test]
        fn liberal_accepts_valid_flags(first in any_segment(), s in any_segment(), reply in any::<bool>()) {
            if let Some(mut c) = TcpConn::new(&first) {
                let r = c.update(&s, reply, true);
                prop_assert_eq!(r == Update::Invalid, !TcpConn::valid_flags(s.flags));
            }
        }
    }
}
