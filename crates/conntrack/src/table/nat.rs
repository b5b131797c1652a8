//! NAT on commit (`ct(commit,nat(src=...))`, `nat(dst=...)`): a new connection's
//! translation is its reply tuple, an address and port in the range asked that no other
//! connection's tuple holds (OVS's `nat_get_unique_tuple`). At most [`NAT_MAX_TRIES`]
//! candidates are tried, from a starting point chosen by hash (or at random, or by source
//! address only when persistent); when none is free the connection is refused (counted,
//! packet `+inv`). Later packets of the connection in a `ct(nat)` are translated both ways:
//! the tracker returns the rewrite ([`NatRewrite`]) and the caller applies it.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::{Conn, Conntrack, Key, Kind, shard_of};
use crate::alg;
use crate::key::{ICMP, ICMPV6, TCP, Tuple, UDP};
use crate::state::{DNAT, SNAT};

/// Candidate (address, port) pairs a NAT allocation tries before it gives up.
pub const NAT_MAX_TRIES: u32 = 4096;

/// Source or destination NAT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NatKind {
    Src,
    Dst,
}

/// The `nat(...)` of a `ct` action. `kind: None` (plain `nat`) translates packets of
/// connections that already have a translation and sets up none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NatSpec {
    pub kind: Option<NatKind>,
    /// Address range, inclusive, in the packet's family (IPv4 in the first four bytes).
    pub addr_min: [u8; 16],
    pub addr_max: [u8; 16],
    /// Whether a range was given (else the address is kept and only the port may change).
    pub has_addr: bool,
    /// Port range, inclusive; 0 for none.
    pub port_min: u16,
    pub port_max: u16,
    /// Same translated address for the same source address (no ports in the hash).
    pub persistent: bool,
    /// Random starting point instead of a hash of the tuple.
    pub random: bool,
}

/// A rewrite NAT asks of the packet: new source and/or destination address and port (the port
/// is left alone for ICMP).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NatRewrite {
    pub src: Option<([u8; 16], u16)>,
    pub dst: Option<([u8; 16], u16)>,
    /// For a TCP connection with the FTP helper: the payload edit (which writes the new `src`
    /// address) and the sequence adjustment.
    pub alg: Option<alg::AlgRewrite>,
    /// The packet is an ICMP error about a packet of the connection: `src` and `dst` are for
    /// its outer header (addresses only), and the packet it quotes, which went the other way,
    /// takes `dst` as its source and `src` as its destination (addresses and ports), as
    /// OVS's `reverse_nat_packet` does.
    pub icmp_error: bool,
}

/// Which sides of a connection's original tuple its translation moved: the source (address or
/// port: the reply tuple's destination is not the original's source) and the destination.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Moved(u8);

impl Moved {
    const SRC: u8 = 1;
    const DST: u8 = 2;

    /// The sides of `orig` that `reply`, the reply tuple after NAT, moved.
    pub(super) fn of(orig: &Tuple, reply: &Tuple) -> Moved {
        let src = reply.dst != orig.src || reply.dport != orig.sport;
        let dst = reply.src != orig.dst || reply.sport != orig.dport;
        Moved(if src { Self::SRC } else { 0 } | if dst { Self::DST } else { 0 })
    }

    fn src(self) -> bool {
        self.0 & Self::SRC != 0
    }

    fn dst(self) -> bool {
        self.0 & Self::DST != 0
    }
}

/// The [`crate::state`] bits of a connection's translation (`SNAT`, `DNAT`): those its commit
/// asked for (`action`) and those its tuples show, `moved` of `orig` and `reply`.
pub(super) fn nat_state(action: u8, kind: Kind, orig: &Tuple, reply: &Tuple, moved: Moved) -> u8 {
    let mut f = action;
    if kind == Kind::Icmp {
        // The identifier is in both "ports": a moved one is the source's NAT.
        let dnat = reply.src != orig.dst;
        if reply.dst != orig.src || (reply.dport != orig.sport && !dnat) {
            f |= SNAT;
        }
        if dnat {
            f |= DNAT;
        }
        return f;
    }
    if moved.src() {
        f |= SNAT;
    }
    if moved.dst() {
        f |= DNAT;
    }
    f
}

impl Conn {
    /// The [`crate::state`] bits of the connection's translation (`SNAT`, `DNAT`).
    #[inline(always)]
    pub(super) fn nat_flags(&self) -> u8 {
        self.nat
    }
}

impl Conntrack {
    /// A reply tuple for a new connection of `t` translated by `n` that no alive connection
    /// holds, trying at most [`NAT_MAX_TRIES`] candidates from a starting point chosen by
    /// hash (or at random, or by source address only when persistent).
    pub(super) fn nat_pick(&self, t: &Tuple, n: &NatSpec, now: u64, salt: u32) -> Option<Tuple> {
        let src_nat = n.kind == Some(NatKind::Src);
        // Address range as offsets from addr_min (IPv4 or the low 64 bits of IPv6).
        let (amin, amax) = if n.has_addr {
            (addr_low(&n.addr_min, t.v6), addr_low(&n.addr_max, t.v6))
        } else {
            let a = if src_nat { &t.src } else { &t.dst };
            (addr_low(a, t.v6), addr_low(a, t.v6))
        };
        let n_addr = amax.saturating_sub(amin).saturating_add(1);
        let orig_port = if src_nat { t.sport } else { t.dport };
        // ICMP queries are told apart by their identifier, which NAT moves like a port.
        let icmp = matches!(t.proto, ICMP | ICMPV6);
        let has_ports = matches!(t.proto, TCP | UDP) || icmp;
        let (pmin, pmax) = if !has_ports {
            (orig_port, orig_port)
        } else if n.port_min != 0 {
            (n.port_min, n.port_max.max(n.port_min))
        } else {
            (orig_port, orig_port)
        };
        let n_port = u64::from(pmax - pmin) + 1;
        let seed = if n.random {
            random_u64()
        } else {
            let mut k = *t;
            if n.persistent {
                k.sport = 0;
                k.dport = 0;
                if src_nat {
                    k.dst = [0; 16];
                } else {
                    k.src = [0; 16];
                }
            }
            k.hash() ^ u64::from(salt).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        };
        let total = n_addr.saturating_mul(n_port);
        let a0 = seed % n_addr;
        let p0 = (seed >> 32) % n_port;
        // The original port first when it is in range (OVS keeps ports where it can).
        let keep = orig_port >= pmin && orig_port <= pmax && !n.random;
        let tries = total.min(u64::from(NAT_MAX_TRIES));
        let mut extra_ports: &[(u16, u16)] = &[];
        // Without a port range, a taken port falls back to other ports, as OVS does.
        const FALLBACK: [(u16, u16); 1] = [(1024, 65535)];
        if has_ports && n.port_min == 0 {
            extra_ports = &FALLBACK;
        }
        // `client`: the port is the client's source port (a DNAT without a port range that
        // collides keeps the service's port, as OVS does, and moves the client's).
        let try_one = |a_off: u64, port: u16, client: bool| -> Option<Tuple> {
            let addr = addr_with_low(
                if n.has_addr {
                    &n.addr_min
                } else if src_nat {
                    &t.src
                } else {
                    &t.dst
                },
                t.v6,
                amin + a_off,
            );
            let mut r = t.reverse();
            if icmp {
                r.sport = port;
                r.dport = port;
            }
            if icmp {
                if src_nat {
                    r.dst = addr;
                } else {
                    r.src = addr;
                }
            } else if src_nat {
                r.dst = addr;
                if has_ports {
                    r.dport = port;
                }
            } else {
                r.src = addr;
                if has_ports && client {
                    r.dport = port;
                } else if has_ports {
                    r.sport = port;
                }
            }
            let k = Key::new(&r);
            let map = self.shards[shard_of(k.h)].read().unwrap();
            match map.get(&k) {
                Some(e) if e.conn.alive(now) => None,
                _ => Some(r),
            }
        };
        if keep {
            for k in 0..n_addr.min(tries) {
                if let Some(r) = try_one((a0 + k) % n_addr, orig_port, false) {
                    return Some(r);
                }
            }
        }
        for i in 0..tries {
            let a_off = (a0 + i / n_port) % n_addr;
            let port = pmin + ((p0 + i) % n_port) as u16;
            if let Some(r) = try_one(a_off, port, false) {
                return Some(r);
            }
        }
        for &(lo, hi) in extra_ports {
            let span = u64::from(hi - lo) + 1;
            for i in 0..u64::from(NAT_MAX_TRIES) {
                let port = lo + ((seed.rotate_left(17) + i) % span) as u16;
                if let Some(r) = try_one((a0 + i) % n_addr, port, !src_nat) {
                    return Some(r);
                }
            }
        }
        None
    }
}

/// The rewrite of a packet of `c` travelling in the original (`reply == false`) or reply
/// direction: its tuple becomes the other direction's tuple reversed (only the sides the
/// translation moved are written).
#[inline]
pub(super) fn rewrite_for(c: &Conn, reply: bool) -> NatRewrite {
    let (o, r, m) = (&c.orig, &c.reply, c.moved);
    let (src, dst) = if reply {
        (
            m.dst().then_some((o.dst, o.dport)),
            m.src().then_some((o.src, o.sport)),
        )
    } else {
        (
            m.src().then_some((r.dst, r.dport)),
            m.dst().then_some((r.src, r.sport)),
        )
    };
    NatRewrite {
        src,
        dst,
        alg: None,
        icmp_error: false,
    }
}

/// The low bits of an address that NAT ranges step through: all of IPv4, the low 64 of IPv6.
fn addr_low(a: &[u8; 16], v6: bool) -> u64 {
    if v6 {
        u64::from_be_bytes(a[8..16].try_into().unwrap())
    } else {
        u64::from(u32::from_be_bytes(a[..4].try_into().unwrap()))
    }
}

fn addr_with_low(base: &[u8; 16], v6: bool, low: u64) -> [u8; 16] {
    let mut a = *base;
    if v6 {
        a[8..16].copy_from_slice(&low.to_be_bytes());
    } else {
        a[..4].copy_from_slice(&(low as u32).to_be_bytes());
    }
    a
}

/// A random number for `nat(random)`: xorshift over the clock and a counter (not for
/// security; spreading ports is all it does).
fn random_u64() -> u64 {
    static STATE: AtomicU64 = AtomicU64::new(0x2545_f491_4f6c_dd1d);
    let mut x = STATE.fetch_add(0x9e37_79b9_7f4a_7c15, Relaxed)
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}
