//! Adversarial tests of the connection table (`src/table/`) and of tuple parsing
//! (`src/key.rs`), driven through [`Conntrack::process`] with explicit clocks.
//!
//! The expected behaviour is Open vSwitch's userspace conntrack (`lib/conntrack.c`,
//! `conntrack-other.c`, `conntrack-icmp.c`) as OVS 3.1 has it; a test's comment names the
//! behaviour it follows. The tests are in the modules below, by subject. Packets are
//! built by the small builders below (Ethernet + IPv4/IPv6 + L4, checksums computed here, not
//! with the crate's own `wire::checksum`); `builders_match_scapy` pins them to scapy output.
//!
//! Tests that fail document a bug: their comment says what OVS does and where the table
//! differs.

use std::net::IpAddr;
use std::sync::Arc;

use conntrack::key::Invalid;
use conntrack::state::*;
use conntrack::{
    Conntrack, CtArgs, CtCache, CtMeta, CtPacket, NatKind, NatRewrite, NatSpec, TimeoutClass, Tuple,
};
use proptest::prelude::*;

mod common;
use common::{fold, packet, sum};

// ---------------------------------------------------------------------------------------------
// Packet builders
// ---------------------------------------------------------------------------------------------

/// Offset of the IP header in every frame built here (after a plain Ethernet header).
const ETH: usize = 14;

const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP: u8 = 1;
const ICMPV6: u8 = 58;

/// An address of either family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ip {
    V4([u8; 4]),
    V6([u8; 16]),
}

fn ip(s: &str) -> Ip {
    match s.parse::<IpAddr>().unwrap() {
        IpAddr::V4(a) => Ip::V4(a.octets()),
        IpAddr::V6(a) => Ip::V6(a.octets()),
    }
}

impl Ip {
    fn bytes(&self) -> &[u8] {
        match self {
            Ip::V4(a) => a,
            Ip::V6(a) => a,
        }
    }

    fn v6(&self) -> bool {
        matches!(self, Ip::V6(_))
    }

    /// As a [`Tuple`] holds it (IPv4 in the first four bytes).
    fn key(&self) -> [u8; 16] {
        let mut k = [0; 16];
        k[..self.bytes().len()].copy_from_slice(self.bytes());
        k
    }
}

/// An L4 header and payload; its checksum is filled in by [`build`].
#[derive(Clone, Debug)]
struct L4 {
    /// IP protocol; [`ICMP`] means ICMP of the packet's family (58 on IPv6).
    proto: u8,
    bytes: Vec<u8>,
    /// Where the checksum goes, if the protocol has one.
    csum_at: Option<usize>,
}

fn udp(sport: u16, dport: u16, payload: &[u8]) -> L4 {
    let mut b = Vec::new();
    b.extend_from_slice(&sport.to_be_bytes());
    b.extend_from_slice(&dport.to_be_bytes());
    b.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(payload);
    L4 {
        proto: UDP,
        bytes: b,
        csum_at: Some(6),
    }
}

/// TCP flags as scapy spells them (`"S"`, `"SA"`, `"FA"`, `"PA"`, `"R"`, `"RA"`, ...).
fn tcp_flags(f: &str) -> u8 {
    f.chars()
        .map(|c| match c {
            'F' => 0x01,
            'S' => 0x02,
            'R' => 0x04,
            'P' => 0x08,
            'A' => 0x10,
            'U' => 0x20,
            _ => panic!("flag {c}"),
        })
        .fold(0, |a, b| a | b)
}

#[allow(clippy::too_many_arguments)]
fn tcp_opts(
    sport: u16,
    dport: u16,
    flags: &str,
    seq: u32,
    ack: u32,
    win: u16,
    opts: &[u8],
    payload: &[u8],
) -> L4 {
    let mut o = opts.to_vec();
    while !o.len().is_multiple_of(4) {
        o.push(0);
    }
    let mut b = Vec::new();
    b.extend_from_slice(&sport.to_be_bytes());
    b.extend_from_slice(&dport.to_be_bytes());
    b.extend_from_slice(&seq.to_be_bytes());
    b.extend_from_slice(&ack.to_be_bytes());
    b.push((((20 + o.len()) / 4) as u8) << 4);
    b.push(tcp_flags(flags));
    b.extend_from_slice(&win.to_be_bytes());
    b.extend_from_slice(&[0, 0, 0, 0]);
    b.extend_from_slice(&o);
    b.extend_from_slice(payload);
    L4 {
        proto: TCP,
        bytes: b,
        csum_at: Some(16),
    }
}

fn tcp(sport: u16, dport: u16, flags: &str, seq: u32, ack: u32, win: u16) -> L4 {
    tcp_opts(sport, dport, flags, seq, ack, win, &[], &[])
}

/// MSS 1460 and window scale 7, as the reference's crafted SYNs carry.
const SYN_OPTS: [u8; 7] = [2, 4, 0x05, 0xb4, 3, 3, 7];

/// An ICMP (v4 or v6 by the addresses it is built with) message: type, code, the four bytes
/// after the checksum, then `rest`.
fn icmp(ty: u8, code: u8, word: [u8; 4], rest: &[u8]) -> L4 {
    let mut b = vec![ty, code, 0, 0];
    b.extend_from_slice(&word);
    b.extend_from_slice(rest);
    L4 {
        proto: ICMP,
        bytes: b,
        csum_at: Some(2),
    }
}

fn echo(ty: u8, id: u16, seq: u16) -> L4 {
    let [a, b] = id.to_be_bytes();
    let [c, d] = seq.to_be_bytes();
    icmp(ty, 0, [a, b, c, d], b"ping")
}

/// Header knobs of [`build_with`].
#[derive(Clone, Debug, Default)]
struct Opt {
    /// IPv4 options (padded to four bytes).
    ip_opts: Vec<u8>,
    /// IPv4 flags and fragment offset field (MF = 0x2000, offset in 8-byte units).
    frag: u16,
    /// IPv6 extension headers: (their protocol number, the bytes after the next-header byte).
    exts: Vec<(u8, Vec<u8>)>,
    bad_l3_csum: bool,
    bad_l4_csum: bool,
    /// UDP checksum left zero.
    zero_udp_csum: bool,
    /// Bytes of Ethernet padding after the datagram.
    pad: usize,
}

/// [`Opt::default`] with what `f` sets.
fn opt(f: impl FnOnce(&mut Opt)) -> Opt {
    let mut o = Opt::default();
    f(&mut o);
    o
}

fn build(src: Ip, dst: Ip, l4: &L4) -> Vec<u8> {
    build_with(src, dst, l4, &Opt::default())
}

fn build_with(src: Ip, dst: Ip, l4: &L4, o: &Opt) -> Vec<u8> {
    let v6 = src.v6();
    assert_eq!(v6, dst.v6());
    let proto = if l4.proto == ICMP && v6 {
        ICMPV6
    } else {
        l4.proto
    };
    let mut b = l4.bytes.clone();
    if let Some(at) = l4.csum_at {
        b[at] = 0;
        b[at + 1] = 0;
        let mut s = sum(&b);
        if proto != ICMP {
            s += sum(src.bytes()) + sum(dst.bytes()) + u64::from(proto) + b.len() as u64;
        }
        let mut c = fold(s);
        if proto == UDP && c == 0 {
            c = 0xffff;
        }
        if proto == UDP && o.zero_udp_csum {
            c = 0;
        }
        if o.bad_l4_csum {
            c ^= 0x5a5a;
        }
        b[at..at + 2].copy_from_slice(&c.to_be_bytes());
    }
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    if v6 {
        f.extend_from_slice(&[0x86, 0xdd]);
        let mut ext = Vec::new();
        for (i, (_, body)) in o.exts.iter().enumerate() {
            ext.push(o.exts.get(i + 1).map_or(proto, |e| e.0));
            ext.extend_from_slice(body);
        }
        let first = o.exts.first().map_or(proto, |e| e.0);
        let plen = (ext.len() + b.len()) as u16;
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&plen.to_be_bytes());
        f.extend_from_slice(&[first, 64]);
        f.extend_from_slice(src.bytes());
        f.extend_from_slice(dst.bytes());
        f.extend_from_slice(&ext);
    } else {
        f.extend_from_slice(&[0x08, 0x00]);
        let mut opts = o.ip_opts.clone();
        while !opts.len().is_multiple_of(4) {
            opts.push(0);
        }
        let ihl = 20 + opts.len();
        let tot = (ihl + b.len()) as u16;
        let mut h = vec![0x40 | (ihl / 4) as u8, 0];
        h.extend_from_slice(&tot.to_be_bytes());
        h.extend_from_slice(&[0, 0]);
        h.extend_from_slice(&o.frag.to_be_bytes());
        h.extend_from_slice(&[64, proto, 0, 0]);
        h.extend_from_slice(src.bytes());
        h.extend_from_slice(dst.bytes());
        h.extend_from_slice(&opts);
        let mut c = fold(sum(&h));
        if o.bad_l3_csum {
            c ^= 0x1234;
        }
        h[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&h);
    }
    f.extend_from_slice(&b);
    f.extend(std::iter::repeat_n(0u8, o.pad));
    f
}

/// An IPv4 frame's header checksum recomputed after a test edited the header.
fn fix_ip4_csum(f: &mut [u8]) {
    let ihl = usize::from(f[ETH] & 0x0f) * 4;
    f[ETH + 10] = 0;
    f[ETH + 11] = 0;
    let c = fold(sum(&f[ETH..ETH + ihl]));
    f[ETH + 10..ETH + 12].copy_from_slice(&c.to_be_bytes());
}

/// What an ICMP error quotes of `frame`: its IP header and the first `l4_bytes` bytes after it
/// (RFC 792: at least 8), lengths left as they were on the wire.
fn quote(frame: &[u8], l4_bytes: usize) -> Vec<u8> {
    let ip = &frame[ETH..];
    let hdr = if ip[0] >> 4 == 6 {
        40
    } else {
        usize::from(ip[0] & 0x0f) * 4
    };
    ip[..(hdr + l4_bytes).min(ip.len())].to_vec()
}

/// An ICMP error of `ty`/`code` (v4 or v6 by the addresses used) quoting `inner`.
fn icmp_err(ty: u8, code: u8, inner: &[u8]) -> L4 {
    icmp(ty, code, [0, 0, 0, 0], inner)
}

/// IPv6 extension headers for [`Opt::exts`].
fn hbh() -> (u8, Vec<u8>) {
    (0, vec![0, 1, 4, 0, 0, 0, 0]) // length 0 (8 bytes), PadN of 4
}
fn dstopts() -> (u8, Vec<u8>) {
    (60, vec![0, 1, 4, 0, 0, 0, 0])
}
fn routing() -> (u8, Vec<u8>) {
    (43, vec![0, 0, 0, 0, 0, 0, 0]) // type 0, segments left 0
}
fn frag6(offset_units: u16, more: bool) -> (u8, Vec<u8>) {
    let off = (offset_units << 3) | u16::from(more);
    let [a, b] = off.to_be_bytes();
    (44, vec![0, a, b, 0, 0, 0x51, 0x51])
}

// ---------------------------------------------------------------------------------------------
// The tracker under test
// ---------------------------------------------------------------------------------------------

/// One table and one PMD's cache.
struct Ct {
    ct: Conntrack,
    cache: CtCache,
}

impl Ct {
    fn new() -> Ct {
        Ct {
            ct: Conntrack::new(),
            cache: CtCache::new(),
        }
    }

    fn run_pkt(
        &mut self,
        pkt: &CtPacket<'_>,
        args: &CtArgs,
        now: u64,
    ) -> (CtMeta, Option<NatRewrite>) {
        let mut md = CtMeta::default();
        let rw = self.ct.process(&mut self.cache, pkt, &mut md, args, now);
        assert_eq!(md.zone, args.zone, "md.zone is the ct() zone");
        assert!(md.state & TRK != 0, "every processed packet is +trk");
        (md, rw)
    }

    fn run(&mut self, f: &[u8], args: &CtArgs, now: u64) -> (CtMeta, Option<NatRewrite>) {
        self.run_pkt(&packet(f), args, now)
    }

    /// The packet's state.
    fn st(&mut self, f: &[u8], args: &CtArgs, now: u64) -> u8 {
        self.run(f, args, now).0.state
    }

    fn dump(&self, now: u64) -> Vec<conntrack::ConnInfo> {
        self.ct.dump(None, now)
    }

    fn invalid(&self, why: Invalid) -> u64 {
        self.ct.stats().invalid[why as usize]
    }
}

fn commit(zone: u16) -> CtArgs {
    CtArgs {
        zone,
        commit: true,
        ..Default::default()
    }
}

fn track(zone: u16) -> CtArgs {
    CtArgs {
        zone,
        ..Default::default()
    }
}

fn with_nat(mut a: CtArgs, n: NatSpec) -> CtArgs {
    a.nat = Some(n);
    a
}

/// `ct(nat)`: translate packets of connections that have a translation.
fn nat_only() -> NatSpec {
    NatSpec::default()
}

fn snat(lo: &str, hi: &str, pmin: u16, pmax: u16) -> NatSpec {
    NatSpec {
        kind: Some(NatKind::Src),
        addr_min: ip(lo).key(),
        addr_max: ip(hi).key(),
        has_addr: true,
        port_min: pmin,
        port_max: pmax,
        ..Default::default()
    }
}

fn dnat(lo: &str, hi: &str, pmin: u16, pmax: u16) -> NatSpec {
    NatSpec {
        kind: Some(NatKind::Dst),
        ..snat(lo, hi, pmin, pmax)
    }
}

/// `ct_state` as OVS prints it, for readable failures.
fn show(s: u8) -> String {
    let names = conntrack::state::NAMES;
    let mut out = String::new();
    for (bit, name) in names {
        if s & bit != 0 {
            out.push('+');
            out.push_str(name);
        }
    }
    out
}

macro_rules! assert_state {
    ($got:expr, $want:expr) => {
        assert_eq!(show($got), show($want))
    };
    ($got:expr, $want:expr, $($msg:tt)+) => {
        assert_eq!(show($got), show($want), $($msg)+)
    };
}

fn tuple(proto: u8, src: Ip, sport: u16, dst: Ip, dport: u16, zone: u16) -> Tuple {
    Tuple {
        src: src.key(),
        dst: dst.key(),
        sport,
        dport,
        zone,
        proto,
        v6: src.v6(),
        stype: 0,
        dtype: 0,
    }
}

/// Both counts of the table agree with what `dump` shows (after expired entries are swept).
fn assert_counts(ct: &Conntrack, now: u64) {
    ct.sweep(now);
    let d = ct.dump(None, now);
    assert_eq!(ct.n_conns() as usize, d.len(), "n_conns vs dump: {d:?}");
    let mut zones: Vec<u16> = d.iter().map(|c| c.orig.zone).collect();
    zones.sort();
    zones.dedup();
    for z in zones {
        let n = d.iter().filter(|c| c.orig.zone == z).count();
        assert_eq!(ct.zone_conns(z) as usize, n, "zone {z} count");
    }
}

// Addresses of the reference captures.
fn a() -> Ip {
    ip("10.1.1.11")
}
fn b() -> Ip {
    ip("10.1.1.12")
}
fn a6() -> Ip {
    ip("fc00::11")
}
fn b6() -> Ip {
    ip("fc00::12")
}

/// `IP(src=a)/UDP(sport=3333,dport=4444)/Raw(b'a')` and its reply.
fn udp_ab() -> Vec<u8> {
    build(a(), b(), &udp(3333, 4444, b"a"))
}
fn udp_ba() -> Vec<u8> {
    build(b(), a(), &udp(4444, 3333, b"c"))
}

const SEC: u64 = 1000;

// ---------------------------------------------------------------------------------------------
// Builders against scapy
// ---------------------------------------------------------------------------------------------

/// The builders produce byte-for-byte what scapy produces (scapy 2.8.0).
#[test]
fn builders_match_scapy() {
    // Ether(src='02:00:00:00:00:01',dst='02:00:00:00:00:02')/IP(src='10.1.1.11',dst='10.1.1.12',id=0,ttl=64)
    //   /TCP(sport=1111,dport=2222,flags='S',seq=1000,window=8192,options=[('MSS',1460),('WScale',7)])
    let syn = "02000000000202000000000108004500003000000000400664b00a01010b0a01010c045708ae000003e8\
               0000000070022000371a0000020405b403030700";
    // .../IP(src='10.1.1.11',dst='10.1.1.12',id=0,ttl=64)/UDP(sport=3333,dport=4444)/Raw(b'a')
    let udp_a =
        "02000000000202000000000108004500001d00000000401164b80a01010b0a01010c0d05115c00096a6261";
    // Ether(src='02:00:00:00:00:02',dst='02:00:00:00:00:01')/IP(src='10.1.1.12',dst='10.1.1.11',id=0,ttl=64)
    //   /ICMP(type=3,code=3)/bytes(IP(src='10.1.1.11',dst='10.1.1.12',id=0,ttl=64)/UDP(sport=3333,dport=4444)/Raw(b'a'))[:28]
    let unreach = "02000000000102000000000208004500003800000000400164ad0a01010c0a01010b0303743000000000\
                   4500001d00000000401164b80a01010b0a01010c0d05115c00096a62";
    // Ether(...)/IPv6(src='fc00::11',dst='fc00::12',hlim=64)/ICMPv6EchoRequest(id=78,seq=1)
    let echo6 = "02000000000202000000000186dd6000000000083a40fc000000000000000000000000000011fc000000\
                 00000000000000000000001280008749004e0001";
    let hex = |v: &[u8]| v.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let strip = |s: &str| {
        s.chars()
            .filter(|c| !c.is_whitespace() && *c != '\\')
            .collect::<String>()
    };
    assert_eq!(
        hex(&build(
            a(),
            b(),
            &tcp_opts(1111, 2222, "S", 1000, 0, 8192, &SYN_OPTS, &[])
        )),
        strip(syn)
    );
    assert_eq!(hex(&udp_ab()), strip(udp_a));
    // The error's Ethernet addresses are the other way round: compare from the EtherType on.
    let err = build(b(), a(), &icmp_err(3, 3, &quote(&udp_ab(), 8)));
    assert_eq!(hex(&err[12..]), strip(unreach)[24..]);
    let e6 = build(a6(), b6(), &icmp(128, 0, [0, 78, 0, 1], &[]));
    assert_eq!(hex(&e6), strip(echo6));
}

/// §3: SYN (wscale 7), SYN-ACK, ACK from `src` port 1111 to `dst` port 2222, committed in
/// zone 5 at `t0`, `t0+1`, `t0+2`.
fn tcp_handshake(t: &mut Ct, t0: u64, src: Ip, dst: Ip) {
    let syn = build(
        src,
        dst,
        &tcp_opts(1111, 2222, "S", 1000, 0, 8192, &SYN_OPTS, &[]),
    );
    let synack = build(
        dst,
        src,
        &tcp_opts(2222, 1111, "SA", 5000, 1001, 8192, &SYN_OPTS, &[]),
    );
    let ack = build(src, dst, &tcp(1111, 2222, "A", 1001, 5001, 64));
    assert_state!(t.st(&syn, &commit(5), t0), TRK | NEW);
    assert_state!(t.st(&synack, &track(5), t0 + 1), TRK | EST | RPL);
    assert_state!(t.st(&ack, &track(5), t0 + 2), TRK | EST);
}

fn udp_from(i: u32) -> Vec<u8> {
    let [_, _, x, y] = i.to_be_bytes();
    build(
        ip(&format!("10.2.{x}.{y}")),
        b(),
        &udp(3000 + (i % 1000) as u16, 4444, b"x"),
    )
}

// The tests, by subject (after the helpers and macros above, which they use).
#[path = "table/batch_threads_expiry.rs"]
mod batch_threads_expiry;
#[path = "table/mark_limits_nat.rs"]
mod mark_limits_nat;
#[path = "table/tcp_l3.rs"]
mod tcp_l3;
#[path = "table/udp_icmp.rs"]
mod udp_icmp;
