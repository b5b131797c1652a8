//! Generic receive offload: TCP segments of one connection that follow each other in a burst
//! become one super-frame (a [`crate::gso`] frame with `gso_size` the segments' MSS), so that
//! a port that takes super-frames (a `tap` with TSO) hands the kernel one frame where it would
//! have written dozens. The rules are Linux's GRO for TCP over IPv4 and IPv6
//! (`inet_gro_receive`, `ipv6_gro_receive`, `tcp_gro_receive`):
//!
//! - a segment joins the super-frame being built when it continues it: same Ethernet header;
//!   for IPv4 a header without options, not a fragment, same TOS, TTL, DF bit, addresses, IP
//!   identification one more than the last segment's (or the same, with DF set); for IPv6 no
//!   extension header (TCP next), same traffic class, flow label, hop limit and addresses;
//!   same ports,
//!   acknowledgement number and TCP options (timestamps included), the flags equal but for
//!   PSH, FIN and CWR, no CWR of its own, its sequence number where the last one's payload
//!   ended, and a payload no longer than the first segment's (the MSS);
//! - a segment with a payload shorter than the MSS, or with PSH or FIN, ends its super-frame
//!   (whose flags take its PSH and FIN); a segment with SYN, RST, URG, PSH or FIN, or without
//!   payload, never starts one; nor, unlike Linux, one with less payload than
//!   [`MIN_MSS`], the smallest `gso_size` the switch's own segmentation takes;
//! - a segment whose TCP checksum is wrong is left alone (the receiver drops it as it would
//!   have), so that a merged frame's checksum, which the receiver no longer checks, stands for
//!   payload that was right.
//!
//! Segments of up to [`MAX_RUNS`] connections merge at once, as Linux holds several flows'
//! merges in its GRO lists: the segments of connections that interleave in a burst (many
//! streams through one tunnel or one uplink) each make their own super-frames. A
//! connection is its Ethernet header (tags included), IP addresses and TCP ports; a packet of
//! the connection that does not continue its super-frame (out of order, another TTL, a pure
//! ACK, a fragment, a super-frame of its own) ends it first, so that the connection's packets
//! keep their order. A super-frame takes the place of its first segment; anything else
//! passes unchanged, in its place. When a burst brings more connections than that, the one
//! whose super-frame started first is ended to make room (Linux flushes its oldest). A
//! super-frame is built in a large pool buffer: merging allocates nothing once the pool is
//! warm.

use wire::IpProtocol;
use wire::checksum;

use crate::gso::{MIN_MSS, ethernet_l3, pseudo};
use crate::packet::{Batch, LARGE_ROOM, NO_OFS, Packet, Pool};

/// TCP flags.
const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const URG: u8 = 0x20;
const CWR: u8 = 0x80;

/// The largest IPv4 packet, and the largest IPv6 payload.
const MAX_IP: usize = 65535;

/// Bytes of the IPv6 header.
const IPV6_HDR: usize = 40;

/// Connections whose super-frames are built at once in a burst.
pub const MAX_RUNS: usize = 8;

/// What merging a burst did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Merged {
    /// Super-frames made.
    pub frames: u64,
    /// Segments that went into them.
    pub segments: u64,
}

/// A TCP/IPv4 or TCP/IPv6 segment's headers, as the merge rules read them.
#[derive(Clone, Copy, Debug)]
struct Segment {
    ipv6: bool,
    l3: usize,
    l4: usize,
    /// End of the TCP header (options included).
    hdr_len: usize,
    payload: usize,
    seq: u32,
    id: u16,
    flags: u8,
    df: bool,
}

impl Segment {
    /// The headers of `p` if it is a TCP segment with payload over IPv4 without options and
    /// not a fragment, or over IPv6 without extension headers, its lengths consistent (its
    /// checksum is checked where it merges).
    fn of(p: &Packet) -> Option<Segment> {
        if p.meta.gso_size != 0 || p.is_lent() {
            return None;
        }
        let d = p.data();
        let l3 = match p.meta.l3 {
            NO_OFS => ethernet_l3(d).ok()?,
            l3 => usize::from(l3),
        };
        let (ipv6, l4, id, df) = match d.get(l3)? >> 4 {
            4 => {
                let ip = d.get(l3..l3 + 20)?;
                let frag = u16::from_be_bytes([ip[6], ip[7]]);
                let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
                if ip[0] != 0x45
                    || ip[9] != IpProtocol::TCP.0
                    || frag & 0x3fff != 0
                    || total < 40
                    || l3 + total != d.len()
                {
                    return None;
                }
                let id = u16::from_be_bytes([ip[4], ip[5]]);
                (false, l3 + 20, id, frag & 0x4000 != 0)
            }
            6 => {
                let ip = d.get(l3..l3 + IPV6_HDR)?;
                let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
                if ip[6] != IpProtocol::TCP.0 || plen < 20 || l3 + IPV6_HDR + plen != d.len() {
                    return None;
                }
                // No identification: every segment continues as with DF set.
                (true, l3 + IPV6_HDR, 0, true)
            }
            _ => return None,
        };
        let th = d.get(l4..l4 + 20)?;
        let hdr_len = l4 + usize::from(th[12] >> 4) * 4;
        if hdr_len < l4 + 20 || hdr_len >= d.len() {
            return None;
        }
        Some(Segment {
            ipv6,
            l3,
            l4,
            hdr_len,
            payload: d.len() - hdr_len,
            seq: u32::from_be_bytes([th[4], th[5], th[6], th[7]]),
            id,
            flags: th[13],
            df,
        })
    }

    /// Whether a super-frame may start with this segment: its payload, the super-frame's
    /// `gso_size`, no smaller than the switch's own segmentation takes ([`MIN_MSS`]).
    fn starts(&self) -> bool {
        self.flags & (SYN | RST | URG | PSH | FIN) == 0 && self.payload >= usize::from(MIN_MSS)
    }
}

/// The super-frame being built: its first segment's headers, and where it has got to.
struct Run {
    first: Segment,
    /// Where the first segment is in the output batch: the merged frame's place.
    slot: usize,
    /// The merged frame, once a second segment joined; until then the first segment is at
    /// `slot` of the output.
    merged: Option<Packet>,
    segments: u16,
    next_seq: u32,
    last_id: u16,
    flags: u8,
}

impl Run {
    /// Whether `s` (of packet `p`) continues the run whose first packet is `first`.
    fn continues(&self, first: &Packet, s: &Segment, p: &Packet) -> bool {
        let f = &self.first;
        let (a, b) = (first.data(), p.data());
        let id_ok = s.id == self.last_id.wrapping_add(1) || (s.df && s.id == self.last_id);
        let ip_same = if f.ipv6 {
            // Version, traffic class and flow label; next header, hop limit; addresses;
            // ports.
            a[f.l3..f.l3 + 4] == b[f.l3..f.l3 + 4] && a[f.l3 + 6..f.l4 + 4] == b[f.l3 + 6..f.l4 + 4]
        } else {
            // TOS; TTL, protocol; addresses; ports.
            a[f.l3 + 1] == b[f.l3 + 1]
                && a[f.l3 + 8..f.l3 + 10] == b[f.l3 + 8..f.l3 + 10]
                && a[f.l3 + 12..f.l4 + 4] == b[f.l3 + 12..f.l4 + 4]
        };
        s.ipv6 == f.ipv6
            && s.l3 == f.l3
            && s.hdr_len == f.hdr_len
            && s.seq == self.next_seq
            && s.payload <= f.payload
            && s.df == f.df
            && id_ok
            && s.flags & CWR == 0
            && (s.flags ^ f.flags) & !(PSH | FIN | CWR) == 0
            && self.ip_len() + s.payload <= MAX_IP
            // Ethernet header and tags; the IP header's fields above; ack number, data
            // offset; window not compared (as Linux); options.
            && a[..f.l3] == b[..f.l3]
            && ip_same
            && a[f.l4 + 8..f.l4 + 13] == b[f.l4 + 8..f.l4 + 13]
            && a[f.l4 + 20..f.hdr_len] == b[f.l4 + 20..f.hdr_len]
    }

    /// What the IP length field of the frame built so far would say: the IPv4 total length,
    /// or the IPv6 payload length.
    fn ip_len(&self) -> usize {
        let f = &self.first;
        let hdrs = if f.ipv6 {
            f.hdr_len - f.l4
        } else {
            f.hdr_len - f.l3
        };
        hdrs + usize::from(self.segments) * f.payload
    }
}

/// Merges the segments of each TCP connection in `batch` that continue each other into
/// super-frames, keeping every other packet in its place (see the module's rules). `scratch`
/// is an empty vector the caller keeps (with room for a burst) so that nothing is allocated.
pub fn coalesce(batch: &mut Batch, pool: &mut Pool, scratch: &mut Vec<Packet>) -> Merged {
    let mut done = Merged::default();
    if batch.len() < 2 {
        return done;
    }
    scratch.clear();
    batch.swap_packets(scratch);
    let mut runs: [Option<Run>; MAX_RUNS] = Default::default();
    for p in scratch.drain(..) {
        let seg = Segment::of(&p);
        let mut bad = false;
        let flow = seg.map(|s| Flow::of_segment(&s)).or_else(|| Flow::of(&p));
        let open = flow.and_then(|f| {
            runs.iter()
                .position(|r| r.as_ref().is_some_and(|r| f.same(r, batch, &p)))
        });
        if let Some(k) = open {
            if let (Some(r), Some(s)) = (&mut runs[k], &seg) {
                let first = first_of(r, batch);
                if r.continues(first, s, &p) {
                    // Checksums are checked only where segments merge: the first segment's
                    // when a second joins it, then each joining one's.
                    let first_ok = r.merged.is_some() || checksum_ok(first, &r.first);
                    bad = first_ok && !checksum_ok(&p, s);
                    if first_ok && !bad {
                        append(r, batch, &p, s, pool);
                        pool.free(p);
                        if s.payload < r.first.payload || s.flags & (PSH | FIN) != 0 {
                            finish(runs[k].take(), batch, pool, &mut done);
                        }
                        continue;
                    }
                }
            }
            // The connection's packet that does not continue its super-frame ends it.
            finish(runs[k].take(), batch, pool, &mut done);
        }
        if let Some(s) = seg.filter(|s| !bad && s.starts()) {
            let free = match runs.iter().position(Option::is_none) {
                Some(free) => free,
                None => {
                    let oldest = (0..MAX_RUNS)
                        .min_by_key(|&k| runs[k].as_ref().map_or(usize::MAX, |r| r.slot))
                        .unwrap_or(0);
                    finish(runs[oldest].take(), batch, pool, &mut done);
                    oldest
                }
            };
            runs[free] = Some(Run {
                first: s,
                slot: batch.len(),
                merged: None,
                segments: 1,
                next_seq: s.seq.wrapping_add(s.payload as u32),
                last_id: s.id,
                flags: s.flags,
            });
        }
        batch.push(p);
    }
    for r in &mut runs {
        finish(r.take(), batch, pool, &mut done);
    }
    if done.frames > 0 {
        batch.mark_gso();
    }
    done
}

/// Where a TCP packet's connection is read: its IP header, the family, and its TCP header
/// where the packet has one that can be found (not a non-first IPv4 fragment, not behind IPv6
/// extension headers).
#[derive(Clone, Copy)]
struct Flow {
    l3: usize,
    ipv6: bool,
    l4: Option<usize>,
}

impl Flow {
    fn of_segment(s: &Segment) -> Flow {
        Flow {
            l3: s.l3,
            ipv6: s.ipv6,
            l4: Some(s.l4),
        }
    }

    /// The connection of any other packet that is, or may be, TCP over IP: one of a
    /// connection with a super-frame being built ends it.
    fn of(p: &Packet) -> Option<Flow> {
        let d = p.data();
        let l3 = match p.meta.l3 {
            NO_OFS => ethernet_l3(d).ok()?,
            l3 => usize::from(l3),
        };
        match d.get(l3)? >> 4 {
            4 => {
                let ip = d.get(l3..l3 + 20)?;
                let first = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff == 0;
                let l4 = l3 + usize::from(ip[0] & 0xf) * 4;
                (ip[9] == IpProtocol::TCP.0).then_some(Flow {
                    l3,
                    ipv6: false,
                    l4: first.then_some(l4),
                })
            }
            6 => {
                let next = *d.get(l3 + 6)?;
                d.get(l3..l3 + IPV6_HDR)?;
                // Hop-by-hop, routing, fragment, destination options: perhaps TCP after them.
                let behind = matches!(next, 0 | 43 | 44 | 60);
                (next == IpProtocol::TCP.0 || behind).then_some(Flow {
                    l3,
                    ipv6: true,
                    l4: (!behind).then_some(l3 + IPV6_HDR),
                })
            }
            _ => None,
        }
    }

    /// Whether packet `p`, of this flow, is of run `r`'s connection: the same Ethernet header,
    /// IP addresses and TCP ports (any, where `p`'s cannot be found or read).
    fn same(&self, r: &Run, batch: &Batch, p: &Packet) -> bool {
        let f = &r.first;
        let (a, b) = (first_of(r, batch).data(), p.data());
        let addrs = if f.ipv6 { 8..40 } else { 12..20 };
        self.l3 == f.l3
            && self.ipv6 == f.ipv6
            && a[..f.l3] == b[..f.l3]
            && a.get(f.l3 + addrs.start..f.l3 + addrs.end)
                == b.get(f.l3 + addrs.start..f.l3 + addrs.end)
            && self.l4.is_none_or(|l4| {
                b.get(l4..l4 + 4)
                    .is_none_or(|ports| a.get(f.l4..f.l4 + 4) == Some(ports))
            })
    }
}

/// The run's first segment, or its merged frame once a second joined.
fn first_of<'a>(r: &'a Run, batch: &'a Batch) -> &'a Packet {
    r.merged.as_ref().unwrap_or(&batch.packets()[r.slot])
}

/// Whether segment `p`'s TCP checksum is right, or pending ([`crate::csum_pending`]: not
/// wrong, only not there yet; the merged frame's is set by whoever sends it).
fn checksum_ok(p: &Packet, s: &Segment) -> bool {
    if p.meta.csum_pending() {
        return true;
    }
    let d = p.data();
    checksum::combine(&[pseudo(d, s.l3, s.l4, s.ipv6), checksum::data(&d[s.l4..])]) == 0xffff
}

/// Adds segment `p` to the run, starting the merged frame from the first segment (at the
/// run's slot of the batch) when this is the second.
fn append(r: &mut Run, batch: &Batch, p: &Packet, s: &Segment, pool: &mut Pool) {
    let merged = r.merged.get_or_insert_with(|| {
        let first = &batch.packets()[r.slot];
        let mut m = pool.packet_with_len(LARGE_ROOM, first.meta.in_port);
        m.copy_meta_from(first);
        m.data_mut()[..first.len()].copy_from_slice(first.data());
        m.truncate(first.len());
        m
    });
    let at = merged.len();
    merged.set_len(at + s.payload);
    merged.data_mut()[at..].copy_from_slice(&p.data()[s.hdr_len..]);
    r.segments += 1;
    r.next_seq = r.next_seq.wrapping_add(s.payload as u32);
    r.last_id = s.id;
    r.flags |= s.flags & (PSH | FIN);
}

/// Ends a run: a merged frame replaces its first segment in the batch, with the run's flags,
/// and `gso_size` its MSS (its lengths and checksums are set by whoever sends it,
/// [`crate::gso::prepare_partial`]).
fn finish(run: Option<Run>, batch: &mut Batch, pool: &mut Pool, done: &mut Merged) {
    let Some(Run {
        first,
        slot,
        merged: Some(mut m),
        segments,
        flags,
        ..
    }) = run
    else {
        return;
    };
    m.data_mut()[first.l4 + 13] = flags;
    m.meta.gso_size = first.payload as u16;
    m.meta.set_csum_pending(false);
    m.meta.l3 = first.l3 as u16;
    m.meta.l4 = first.l4 as u16;
    let slot = &mut batch.packets_mut()[slot];
    pool.free(std::mem::replace(slot, m));
    done.frames += 1;
    done.segments += u64::from(segments);
}
