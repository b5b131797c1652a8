//! Connection keys: the tuple a packet is tracked under, read from its headers.
//!
//! A key is the zone, the address family, the IP protocol, the two addresses and two "ports":
//! the TCP or UDP ports, or for ICMP/ICMPv6 queries the identifier in both with the message
//! type in [`Tuple::stype`] and the type its answer has in [`Tuple::dtype`] (an echo request
//! is `stype=8, dtype=0`, its reply `stype=0, dtype=8`), so that a reply's key is the request's
//! key reversed, as for TCP and UDP. ICMP errors are not keys of their own: they carry the
//! header of the packet they answer, which is looked up instead ([`Parsed::related`]).
//!
//! Parsing checks what OVS's conntrack checks before tracking: IPv4 header length, total length
//! and header checksum; the L4 header's length; the TCP, UDP (when not zero) and ICMP/ICMPv6
//! checksums. A packet that fails is `+inv`.

use wire::checksum;

/// The connection tuple of one direction. Its fields in this order (`repr(C)`, no padding):
/// the ports, zone, protocol, family and types are ten bytes in a row, which
/// [`Tuple::same`] compares as two words, then the addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(C)]
pub struct Tuple {
    /// Source port; the query identifier for ICMP.
    pub sport: u16,
    /// Destination port; the query identifier for ICMP.
    pub dport: u16,
    /// Conntrack zone.
    pub zone: u16,
    /// IP protocol.
    pub proto: u8,
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// ICMP type of this direction's messages (0 for TCP and UDP).
    pub stype: u8,
    /// ICMP type of the other direction's messages.
    pub dtype: u8,
    /// Source address; an IPv4 address in the first four bytes.
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
}

impl std::hash::Hash for Tuple {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(Tuple::hash(self));
    }
}

/// [`Tuple::hash`] of a tuple's words: CRC32C over them (one instruction a word, three cycles
/// each, on the build's baseline CPU: `flow::hash`), times an odd constant. The multiply keeps
/// the CRC's low bits distinct (a small table's bucket index) and spreads all of it over the
/// high half (a shard's index, the table's tags).
#[inline(always)]
fn hash_words<const N: usize>(words: [u64; N]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let c = words.into_iter().fold(0, flow::hash::crc32c_u64);
    u64::from(c).wrapping_mul(K)
}

/// A tuple's ports, zone, protocol and family in one word ([`Tuple::same`], [`Tuple::hash`]).
#[inline(always)]
fn rest_word(sport: u16, dport: u16, zone: u16, proto: u8, v6: bool) -> u64 {
    u64::from(sport)
        | u64::from(dport) << 16
        | u64::from(zone) << 32
        | u64::from(proto) << 48
        | u64::from(v6) << 56
}

pub const TCP: u8 = 6;
pub const UDP: u8 = 17;
pub const ICMP: u8 = 1;
pub const ICMPV6: u8 = 58;

impl Tuple {
    /// The tuple of the other direction.
    #[inline]
    pub fn reverse(&self) -> Tuple {
        Tuple {
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            zone: self.zone,
            proto: self.proto,
            v6: self.v6,
            stype: self.dtype,
            dtype: self.stype,
        }
    }

    /// The tuple's hash (also what picks its shard): `hash_words` of its words. Not keyed:
    /// a sender can make tuples collide (CRC32C is linear), but only among its own flows, and
    /// the table bounds its size (and a zone's share, where a limit is set).
    #[inline]
    pub fn hash(&self) -> u64 {
        if !self.v6 {
            let v4 = |a: &[u8; 16]| [a[0], a[1], a[2], a[3]];
            return Self::hash_v4(v4(&self.src), v4(&self.dst), self.rest(), self.types());
        }
        let w = |b: &[u8; 16], i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().unwrap());
        hash_words([
            w(&self.src, 0),
            w(&self.src, 8),
            w(&self.dst, 0),
            w(&self.dst, 8),
            self.rest() ^ u64::from(self.types()) << 48,
        ])
    }

    /// [`Tuple::hash`] of an IPv4 tuple from its fields: its addresses in one word, its ports,
    /// zone, protocol (`rest`, [`rest_word`]) and ICMP types in the other (the types over the
    /// protocol's bits: only ICMP has any). The fast parse hashes its values so rather than
    /// read back a tuple just built: its fields stored a few bytes at a time and read back as
    /// words, each read waited for those stores to leave the store buffer.
    #[inline(always)]
    fn hash_v4(src: [u8; 4], dst: [u8; 4], rest: u64, types: u16) -> u64 {
        let addrs = u64::from(u32::from_ne_bytes(src)) | u64::from(u32::from_ne_bytes(dst)) << 32;
        hash_words([addrs, rest ^ u64::from(types) << 48])
    }

    /// Whether the two tuples are equal (as `==`), compared as whole words without a branch
    /// a field: how the PMD's cache, the table and the recheck of a cached connection compare
    /// a packet's tuple with its connection's, for every packet tracked.
    #[inline]
    pub fn same(&self, o: &Tuple) -> bool {
        let a = |b: &[u8; 16]| u128::from_ne_bytes(*b);
        (a(&self.src) ^ a(&o.src))
            | (a(&self.dst) ^ a(&o.dst))
            | u128::from(self.rest() ^ o.rest())
            | u128::from(self.types() ^ o.types())
            == 0
    }

    /// The ports, zone, protocol and family in one word.
    #[inline(always)]
    fn rest(&self) -> u64 {
        rest_word(self.sport, self.dport, self.zone, self.proto, self.v6)
    }

    /// The two ICMP types in one word.
    #[inline(always)]
    fn types(&self) -> u16 {
        u16::from(self.stype) | u16::from(self.dtype) << 8
    }

    /// The source address as IPv4 (meaningful when `!v6`).
    pub fn src_v4(&self) -> std::net::Ipv4Addr {
        std::net::Ipv4Addr::new(self.src[0], self.src[1], self.src[2], self.src[3])
    }

    /// The destination address as IPv4 (meaningful when `!v6`).
    pub fn dst_v4(&self) -> std::net::Ipv4Addr {
        std::net::Ipv4Addr::new(self.dst[0], self.dst[1], self.dst[2], self.dst[3])
    }

    /// An address of this tuple's family as text.
    pub fn addr_text(&self, a: &[u8; 16]) -> String {
        if self.v6 {
            std::net::Ipv6Addr::from(*a).to_string()
        } else {
            std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]).to_string()
        }
    }
}

/// What tracking needs of a packet, parsed once.
#[derive(Clone, Copy, Debug)]
pub struct Parsed {
    /// The packet's tuple (zone filled in by the caller).
    pub tuple: Tuple,
    /// For an ICMP error: the tuple of the packet it carries, as that packet was sent.
    pub related: bool,
    /// Offset of the L4 header in the frame.
    pub l4: usize,
    /// L4 bytes in the datagram.
    pub l4_len: usize,
    /// [`Tuple::hash`] of `tuple`.
    pub hash: u64,
}

/// Why a packet cannot be tracked (it is `+inv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Invalid {
    /// The IP header is short, its lengths are wrong, or its checksum is.
    L3,
    /// The L4 header is short or malformed, or its checksum is wrong.
    L4,
    /// An IP protocol or ICMP type conntrack does not track.
    Unsupported,
    /// A fragment reached tracking without being reassembled.
    Fragment,
}

impl Invalid {
    pub const COUNT: usize = 4;
    pub const ALL: [Invalid; Self::COUNT] = [
        Invalid::L3,
        Invalid::L4,
        Invalid::Unsupported,
        Invalid::Fragment,
    ];

    /// The counter's name.
    pub fn name(self) -> &'static str {
        match self {
            Invalid::L3 => "invalid_l3",
            Invalid::L4 => "invalid_l4",
            Invalid::Unsupported => "invalid_unsupported",
            Invalid::Fragment => "invalid_fragment",
        }
    }
}

#[inline(always)]
fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

/// Where the packet's L4 header is and how long the datagram's L4 part is.
pub struct L3Info {
    pub proto: u8,
    pub l4: usize,
    pub l4_len: usize,
}

/// Checks an IPv4 header at `l3` and fills the tuple's addresses. `frag_l4_len` is the L4
/// length of a reassembled datagram whose first fragment this is.
fn ipv4(
    d: &[u8],
    l3: usize,
    t: &mut Tuple,
    frag_l4_len: Option<usize>,
    checks: bool,
) -> Result<L3Info, Invalid> {
    let h = d.get(l3..l3 + 20).ok_or(Invalid::L3)?;
    let ihl = usize::from(h[0] & 0x0f) * 4;
    if h[0] >> 4 != 4 || ihl < 20 {
        return Err(Invalid::L3);
    }
    let tot = usize::from(be16(h, 2));
    let avail = d.len() - l3;
    if tot < ihl || ihl > avail || (frag_l4_len.is_none() && tot > avail) {
        return Err(Invalid::L3);
    }
    let hdr = &d[l3..l3 + ihl];
    if checks && checksum::data(hdr) != 0xffff {
        return Err(Invalid::L3);
    }
    let frag = be16(h, 6) & 0x3fff;
    let l4_len = match frag_l4_len {
        Some(n) => n,
        None if frag != 0 => return Err(Invalid::Fragment),
        None => tot - ihl,
    };
    t.src = [0; 16];
    t.dst = [0; 16];
    t.src[..4].copy_from_slice(&h[12..16]);
    t.dst[..4].copy_from_slice(&h[16..20]);
    t.v6 = false;
    t.proto = h[9];
    Ok(L3Info {
        proto: h[9],
        l4: l3 + ihl,
        l4_len,
    })
}

/// Checks an IPv6 header at `l3` (and walks its extension headers) and fills the addresses.
fn ipv6(d: &[u8], l3: usize, t: &mut Tuple, frag_l4_len: Option<usize>) -> Result<L3Info, Invalid> {
    let h = d.get(l3..l3 + 40).ok_or(Invalid::L3)?;
    if h[0] >> 4 != 6 {
        return Err(Invalid::L3);
    }
    let plen = usize::from(be16(h, 4));
    let avail = d.len() - l3 - 40;
    if frag_l4_len.is_none() && plen > avail {
        return Err(Invalid::L3);
    }
    let payload = &d[l3 + 40..l3 + 40 + plen.min(avail)];
    let chain =
        wire::ipv6::walk_ext_headers(wire::IpProtocol(h[6]), payload).map_err(|_| Invalid::L3)?;
    if let Some(f) = chain.fragment
        && frag_l4_len.is_none()
        && (f.frag_offset != 0 || f.more_frags)
    {
        return Err(Invalid::Fragment);
    }
    t.src.copy_from_slice(&h[8..24]);
    t.dst.copy_from_slice(&h[24..40]);
    t.v6 = true;
    t.proto = chain.next_header.0;
    let l4_len = match frag_l4_len {
        Some(n) => n,
        None => plen.checked_sub(chain.l4_offset).ok_or(Invalid::L3)?,
    };
    Ok(L3Info {
        proto: chain.next_header.0,
        l4: l3 + 40 + chain.l4_offset,
        l4_len,
    })
}

/// The reply type of an ICMP query type, `None` for a type that is not a query.
fn icmp4_query_reply(ty: u8) -> Option<u8> {
    Some(match ty {
        8 => 0,
        0 => 8,
        13 => 14,
        14 => 13,
        15 => 16,
        16 => 15,
        _ => return None,
    })
}

fn icmp6_query_reply(ty: u8) -> Option<u8> {
    Some(match ty {
        128 => 129,
        129 => 128,
        _ => return None,
    })
}

/// ICMP error types that relate to a connection.
fn icmp4_error(ty: u8) -> bool {
    matches!(ty, 3 | 4 | 5 | 11 | 12)
}

fn icmp6_error(ty: u8) -> bool {
    matches!(ty, 1..=4)
}

/// Whether an ICMP query type may start a connection (a request, not an answer).
pub fn icmp_is_request(t: &Tuple) -> bool {
    matches!(t.stype, 8 | 13 | 15 | 128)
}

/// Reads L4 ports (or the ICMP query fields) of the header at `l4` into `t`; for an ICMP error,
/// parses the embedded packet instead and returns `related`.
fn l4(d: &[u8], info: &L3Info, t: &mut Tuple, checks: bool, inner: bool) -> Result<bool, Invalid> {
    let l4 = info.l4;
    let avail = d.len().saturating_sub(l4).min(info.l4_len);
    let b = &d[l4.min(d.len())..l4.min(d.len()) + avail];
    // Checksums of a reassembled datagram's first fragment cannot be checked alone; an
    // embedded header is cut short by design.
    let whole = checks && !inner && avail == info.l4_len;
    match info.proto {
        TCP => {
            if b.len() < if inner { 8 } else { 20 }
                || (!inner && usize::from(b[12] >> 4) * 4 > b.len())
            {
                return Err(Invalid::L4);
            }
            if whole && !l4_csum_ok(d, t, b) {
                return Err(Invalid::L4);
            }
            t.sport = be16(b, 0);
            t.dport = be16(b, 2);
        }
        UDP => {
            if b.len() < 8 {
                return Err(Invalid::L4);
            }
            if !inner && usize::from(be16(b, 4)) != info.l4_len {
                return Err(Invalid::L4);
            }
            if whole && (be16(b, 6) != 0 || t.v6) && !l4_csum_ok(d, t, b) {
                return Err(Invalid::L4);
            }
            t.sport = be16(b, 0);
            t.dport = be16(b, 2);
        }
        ICMP | ICMPV6 => {
            let v6 = info.proto == ICMPV6;
            if v6 != t.v6 || b.len() < 8 {
                return Err(Invalid::L4);
            }
            if whole {
                let ok = if v6 {
                    l4_csum_ok(d, t, b)
                } else {
                    checksum::data(b) == 0xffff
                };
                if !ok {
                    return Err(Invalid::L4);
                }
            }
            let ty = b[0];
            let reply = if v6 {
                icmp6_query_reply(ty)
            } else {
                icmp4_query_reply(ty)
            };
            if let Some(r) = reply {
                if b[1] != 0 {
                    return Err(Invalid::L4);
                }
                let id = be16(b, 4);
                t.sport = id;
                t.dport = id;
                t.stype = ty;
                t.dtype = r;
                return Ok(false);
            }
            let error = if v6 { icmp6_error(ty) } else { icmp4_error(ty) };
            if !error || inner {
                return Err(Invalid::Unsupported);
            }
            // The packet that caused the error, from its L3 header on.
            let l3 = l4 + 8;
            let mut it = Tuple {
                zone: t.zone,
                ..Tuple::default()
            };
            let info = if v6 {
                ipv6_inner(d, l3, &mut it)?
            } else {
                ipv4_inner(d, l3, &mut it)?
            };
            self::l4(d, &info, &mut it, false, true)?;
            // The error must come from somewhere on the connection's path back to the
            // sender of the inner packet: it goes to the inner packet's source.
            if it.src != t.dst {
                return Err(Invalid::L4);
            }
            *t = it;
            return Ok(true);
        }
        // Other protocols are tracked by their addresses (OVS's "other" protocol).
        _ => {
            t.sport = 0;
            t.dport = 0;
            return Ok(false);
        }
    }
    // OVS refuses port 0 on either side.
    if !inner && (t.sport == 0 || t.dport == 0) {
        return Err(Invalid::L4);
    }
    Ok(false)
}

/// An IPv4 header embedded in an ICMP error: its lengths describe the original datagram, of
/// which only the start is here.
fn ipv4_inner(d: &[u8], l3: usize, t: &mut Tuple) -> Result<L3Info, Invalid> {
    let h = d.get(l3..l3 + 20).ok_or(Invalid::L4)?;
    let ihl = usize::from(h[0] & 0x0f) * 4;
    if h[0] >> 4 != 4 || ihl < 20 || d.len() < l3 + ihl + 8 {
        return Err(Invalid::L4);
    }
    if be16(h, 6) & 0x1fff != 0 {
        // A later fragment has no L4 header to relate by.
        return Err(Invalid::L4);
    }
    t.src = [0; 16];
    t.dst = [0; 16];
    t.src[..4].copy_from_slice(&h[12..16]);
    t.dst[..4].copy_from_slice(&h[16..20]);
    t.proto = h[9];
    Ok(L3Info {
        proto: h[9],
        l4: l3 + ihl,
        l4_len: 8,
    })
}

fn ipv6_inner(d: &[u8], l3: usize, t: &mut Tuple) -> Result<L3Info, Invalid> {
    let h = d.get(l3..l3 + 40).ok_or(Invalid::L4)?;
    if h[0] >> 4 != 6 {
        return Err(Invalid::L4);
    }
    let chain = wire::ipv6::walk_ext_headers(wire::IpProtocol(h[6]), &d[l3 + 40..])
        .map_err(|_| Invalid::L4)?;
    if chain.fragment.is_some_and(|f| f.frag_offset != 0) {
        return Err(Invalid::L4);
    }
    let l4 = l3 + 40 + chain.l4_offset;
    if d.len() < l4 + 8 {
        return Err(Invalid::L4);
    }
    t.src.copy_from_slice(&h[8..24]);
    t.dst.copy_from_slice(&h[24..40]);
    t.v6 = true;
    t.proto = chain.next_header.0;
    Ok(L3Info {
        proto: chain.next_header.0,
        l4,
        l4_len: 8,
    })
}

/// Whether a TCP/UDP/ICMPv6 checksum over the pseudo-header is right.
fn l4_csum_ok(_d: &[u8], t: &Tuple, b: &[u8]) -> bool {
    if !t.v6 {
        return l4_csum_ok_v4(t.src_v4().octets(), t.dst_v4().octets(), t.proto, b);
    }
    let pseudo = checksum::pseudo_header_v6(
        &std::net::Ipv6Addr::from(t.src),
        &std::net::Ipv6Addr::from(t.dst),
        wire::IpProtocol(t.proto),
        b.len() as u32,
    );
    checksum::combine(&[pseudo, checksum::data(b)]) == 0xffff
}

/// A packet's parse for tracking, in line, when it is the common case: IPv4 without options,
/// not a fragment, TCP or UDP with both ports set, lengths and checksums right. `None` for any
/// other packet, which [`parse_general`] parses (and says what is wrong with a bad one); the
/// arguments are its. A result used at once stays in registers: read back from memory right
/// after its few-byte stores, it waits for them.
#[inline(always)]
pub fn parse_fast(
    d: &[u8],
    l3: usize,
    v6: bool,
    zone: u16,
    frag_l4_len: Option<usize>,
    checks: bool,
) -> Option<Parsed> {
    if v6 || frag_l4_len.is_some() {
        return None;
    }
    parse_v4_fast(d, l3, zone, checks)
}

/// [`l4_csum_ok`] of an IPv4 packet's TCP or UDP bytes `b`, from its addresses: one sum, folded
/// once ([`checksum::l4_ok_native`]).
#[inline(always)]
fn l4_csum_ok_v4(src: [u8; 4], dst: [u8; 4], proto: u8, b: &[u8]) -> bool {
    let addrs = u64::from(u32::from_ne_bytes(src)) + u64::from(u32::from_ne_bytes(dst));
    checksum::l4_ok_native(addrs, proto, b.len() as u16, b)
}

/// Parses a packet for tracking: the L3 header at `l3` (IPv4 or IPv6 by `v6`), then its L4
/// header. `frag_l4_len`: the packet is the first fragment of a reassembled datagram with this
/// many L4 bytes. `checks`: verify checksums (off when a port already did). Out of line: what
/// the common case's [`parse_fast`] refuses goes through it, and it says what is wrong with a
/// bad packet.
#[inline(never)]
pub fn parse_general(
    d: &[u8],
    l3: usize,
    v6: bool,
    zone: u16,
    frag_l4_len: Option<usize>,
    checks: bool,
) -> Result<Parsed, Invalid> {
    let mut t = Tuple {
        zone,
        ..Tuple::default()
    };
    let info = if v6 {
        ipv6(d, l3, &mut t, frag_l4_len)?
    } else {
        ipv4(d, l3, &mut t, frag_l4_len, checks)?
    };
    let related = l4(d, &info, &mut t, checks, false)?;
    Ok(Parsed {
        tuple: t,
        related,
        l4: info.l4,
        l4_len: info.l4_len,
        hash: t.hash(),
    })
}

/// The common case in one pass over fixed offsets: IPv4 without options, not a fragment, TCP
/// or UDP with both ports set, lengths consistent. `None` sends the packet to the general
/// parser (which also says what is wrong with a bad one).
#[inline(always)]
fn parse_v4_fast(d: &[u8], l3: usize, zone: u16, checks: bool) -> Option<Parsed> {
    let h: &[u8; 34] = d.get(l3..l3 + 34)?.try_into().ok()?;
    let tot = usize::from(be16(h, 2));
    let proto = h[9];
    if h[0] != 0x45 || be16(h, 6) & 0x3fff != 0 || tot > d.len() - l3 {
        return None;
    }
    let l4_len = tot.checked_sub(20)?;
    let ok_len = match proto {
        UDP => usize::from(be16(h, 24)) == l4_len,
        TCP => l4_len >= 20 && usize::from(h[32] >> 4) * 4 <= l4_len && h[32] >> 4 >= 5,
        _ => false,
    };
    let (sport, dport) = (be16(h, 20), be16(h, 22));
    if !ok_len || sport == 0 || dport == 0 {
        return None;
    }
    let src: [u8; 4] = [h[12], h[13], h[14], h[15]];
    let dst: [u8; 4] = [h[16], h[17], h[18], h[19]];
    if checks {
        let udp_none = proto == UDP && be16(h, 26) == 0;
        if checksum::data(&h[..20]) != 0xffff
            || (!udp_none && !l4_csum_ok_v4(src, dst, proto, &d[l3 + 20..l3 + tot]))
        {
            return None;
        }
    }
    // Made whole from values, never through memory (see `Tuple::hash_v4`); each address in
    // one store of all its bytes (its four, then twelve zeros, in any byte order), which the
    // tracker's wide reads of it, right after, can take from the store buffer (an address
    // stored as four bytes and twelve zeros made each packet tracked at once wait for the
    // stores to drain).
    let addr = |a: [u8; 4]| u128::from(u32::from_le_bytes(a)).to_le_bytes();
    let tuple = Tuple {
        zone,
        proto,
        sport,
        dport,
        src: addr(src),
        dst: addr(dst),
        ..Tuple::default()
    };
    Some(Parsed {
        tuple,
        related: false,
        l4: l3 + 20,
        l4_len,
        hash: Tuple::hash_v4(src, dst, rest_word(sport, dport, zone, proto, false), 0),
    })
}

#[cfg(test)]
mod tests {
    use super::Tuple;
    use proptest::prelude::*;

    fn tuple() -> impl Strategy<Value = Tuple> {
        (
            any::<[u8; 16]>(),
            any::<[u8; 16]>(),
            any::<(u16, u16, u16, u8, bool, u8, u8)>(),
        )
            .prop_map(
                |(src, dst, (sport, dport, zone, proto, v6, stype, dtype))| Tuple {
                    src,
                    dst,
                    sport,
                    dport,
                    zone,
                    proto,
                    v6,
                    stype,
                    dtype,
                },
            )
    }

    /// Tuples that differ in one field only (an address's last octets, a port), as a load
    /// generator's or a subnet's connections do, spread over the low bits (a bucket's index in
    /// the PMD's cache and the table) and the shards as evenly as random values would.
    #[test]
    fn hash_spreads_each_field() {
        const N: usize = 1 << 14;
        for field in 0..5 {
            let mut low = vec![0u32; 1024];
            let mut shards = vec![0u32; crate::table::SHARDS];
            for i in 0..N {
                let mut t = Tuple {
                    sport: 1024,
                    dport: 80,
                    proto: super::TCP,
                    ..Tuple::default()
                };
                t.src[..4].copy_from_slice(&[10, 0, 0, 1]);
                t.dst[..4].copy_from_slice(&[10, 1, 0, 1]);
                let (hi, lo) = ((i >> 8) as u8, i as u8);
                match field {
                    0 => [t.src[2], t.src[3]] = [hi, lo],
                    1 => [t.dst[2], t.dst[3]] = [hi, lo],
                    2 => t.sport = i as u16,
                    3 => t.dport = i as u16,
                    _ => {
                        t.v6 = true;
                        [t.src[14], t.src[15]] = [hi, lo];
                    }
                }
                let h = t.hash();
                low[(h & 1023) as usize] += 1;
                shards[crate::table::shard_of(h)] += 1;
            }
            // 16 and 64 expected; a hash that ignored a byte would put them in a few places.
            let (l, s) = (*low.iter().max().unwrap(), *shards.iter().max().unwrap());
            assert!(
                l <= 40 && s <= 110,
                "field {field}: {l} in one bucket, {s} in one shard"
            );
        }
    }

    proptest! {
        /// `same` is `==`: for a tuple and one that differs from it in one field (picked by
        /// `field`, or none), and for two unrelated tuples.
        #[test]
        fn same_is_eq(a in tuple(), b in tuple(), field in 0usize..10, bit in 0u32..8) {
            prop_assert_eq!(a.same(&b), a == b);
            let mut c = a;
            let x = 1u8 << bit;
            match field {
                0 => c.src[bit as usize * 2] ^= x,
                1 => c.dst[15 - bit as usize] ^= x,
                2 => c.sport ^= u16::from(x) << 8,
                3 => c.dport ^= u16::from(x),
                4 => c.zone ^= u16::from(x),
                5 => c.proto ^= x,
                6 => c.v6 = !c.v6,
                7 => c.stype ^= x,
                8 => c.dtype ^= x,
                _ => {}
            }
            prop_assert_eq!(a.same(&c), a == c);
            prop_assert_eq!(a.same(&c), field == 9);
        }

        /// The fused IPv4 check says what the pseudo-header's and the bytes' folded sums say,
        /// for any bytes, and accepts the bytes once their checksum field is filled in.
        #[test]
        fn l4_csum_ok_v4_is_the_pseudo_header_check(
            src in any::<[u8; 4]>(),
            dst in any::<[u8; 4]>(),
            tcp in any::<bool>(),
            mut b in proptest::collection::vec(any::<u8>(), 20..200),
        ) {
            use wire::checksum;
            let proto = if tcp { super::TCP } else { super::UDP };
            let pseudo = checksum::pseudo_header_v4(
                &src.into(), &dst.into(), wire::IpProtocol(proto), b.len() as u16);
            let folded = |b: &[u8]| checksum::combine(&[pseudo, checksum::data(b)]) == 0xffff;
            prop_assert_eq!(super::l4_csum_ok_v4(src, dst, proto, &b), folded(&b));
            let at = if tcp { 16 } else { 6 };
            b[at..at + 2].fill(0);
            let c = !checksum::combine(&[pseudo, checksum::data(&b)]);
            b[at..at + 2].copy_from_slice(&c.to_be_bytes());
            prop_assert!(super::l4_csum_ok_v4(src, dst, proto, &b));
        }

        /// The fast IPv4 parse gives what the general one gives for the same packet (its tuple,
        /// the addresses in their first four bytes, its hash, the L4 offset and length), so
        /// that a connection found by one is found by the other.
        #[test]
        fn fast_parse_is_the_general_parse(
            src in any::<[u8; 4]>(),
            dst in any::<[u8; 4]>(),
            (sport, dport, zone, tcp) in (1..=u16::MAX, 1..=u16::MAX, any::<u16>(), any::<bool>()),
            payload in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            use wire::checksum;
            let proto = if tcp { super::TCP } else { super::UDP };
            let mut l4 = vec![0u8; if tcp { 20 } else { 8 }];
            l4[0..2].copy_from_slice(&sport.to_be_bytes());
            l4[2..4].copy_from_slice(&dport.to_be_bytes());
            if tcp {
                l4[12] = 0x50;
                l4[13] = 0x10;
            }
            l4.extend_from_slice(&payload);
            let len = l4.len() as u16;
            if !tcp {
                l4[4..6].copy_from_slice(&len.to_be_bytes());
            }
            let pseudo = checksum::pseudo_header_v4(
                &src.into(), &dst.into(), wire::IpProtocol(proto), len);
            let c = !checksum::combine(&[pseudo, checksum::data(&l4)]);
            let at = if tcp { 16 } else { 6 };
            l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
            let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0];
            ip[2..4].copy_from_slice(&(20 + len).to_be_bytes());
            ip.extend_from_slice(&src);
            ip.extend_from_slice(&dst);
            let hc = !checksum::data(&ip);
            ip[10..12].copy_from_slice(&hc.to_be_bytes());
            let mut frame = [&[0u8; 14][..], &ip, &l4].concat();
            // Padded to Ethernet's least frame, as a NIC receives it.
            frame.resize(frame.len().max(60), 0);
            let fast = super::parse_fast(&frame, 14, false, zone, None, true);
            let general = super::parse_general(&frame, 14, false, zone, None, true);
            let (fast, general) = (fast.expect("the fast parse takes it"), general.unwrap());
            prop_assert_eq!(fast.tuple, general.tuple);
            prop_assert_eq!(&fast.tuple.src[..4], &src[..]);
            prop_assert_eq!(fast.hash, general.hash);
            prop_assert_eq!(fast.hash, fast.tuple.hash());
            prop_assert_eq!((fast.l4, fast.l4_len, fast.related), (general.l4, general.l4_len, false));
        }

        /// The fast IPv4 parse's hash, made from the fields, is the hash of the tuple they make.
        #[test]
        fn hash_v4_is_the_tuples_hash(
            src in any::<[u8; 4]>(),
            dst in any::<[u8; 4]>(),
            (sport, dport, zone, tcp) in any::<(u16, u16, u16, bool)>(),
        ) {
            let proto = if tcp { super::TCP } else { super::UDP };
            let mut t = Tuple { sport, dport, zone, proto, ..Tuple::default() };
            t.src[..4].copy_from_slice(&src);
            t.dst[..4].copy_from_slice(&dst);
            let rest = super::rest_word(sport, dport, zone, proto, false);
            prop_assert_eq!(Tuple::hash_v4(src, dst, rest, 0), t.hash());
        }
    }
}
