//! Adversarial tests of the connection table (`src/table.rs`) and of tuple parsing
//! (`src/key.rs`), driven through [`Conntrack::process`] with explicit clocks.
//!
//! The expected behaviour is Open vSwitch's userspace conntrack (`lib/conntrack.c`,
//! `conntrack-other.c`, `conntrack-icmp.c`) as captured from OVS 3.1 in
//! `/work/ovs-ct-reference.md`; the section a test follows is named in its comment. Packets are
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
use common::{fold, sum};

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

fn packet(f: &[u8]) -> CtPacket<'_> {
    CtPacket {
        frame: f,
        l3: ETH,
        v6: f[ETH] >> 4 == 6,
        frag_l4_len: None,
        verified: false,
        natted: false,
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

// ---------------------------------------------------------------------------------------------
// UDP
// ---------------------------------------------------------------------------------------------

/// §3a: the first packet is `+new` and, without commit, leaves nothing behind.
#[test]
fn udp_first_packet_is_new_and_not_committed() {
    let mut t = Ct::new();
    let (md, rw) = t.run(&udp_ab(), &track(5), 0);
    assert_state!(md.state, TRK | NEW);
    assert_eq!(rw, None);
    assert_eq!(md.orig, tuple(UDP, a(), 3333, b(), 4444, 5));
    assert_eq!((md.mark, md.label), (0, 0));
    assert!(t.dump(0).is_empty());
    assert_eq!(t.ct.n_conns(), 0);
    // Again, still nothing: and the reply of nothing is `+new`, not `+rpl`.
    assert_state!(t.st(&udp_ab(), &track(5), 10), TRK | NEW);
    assert_state!(t.st(&udp_ba(), &track(5), 20), TRK | NEW);
    assert!(t.dump(20).is_empty());
    assert_eq!(t.ct.stats().committed, 0);
}

/// §3a: one-way UDP stays `+new` after commit; the reply is `+est+rpl`, after which the
/// original direction is `+est`.
#[test]
fn udp_commit_oneway_new_reply_est() {
    let mut t = Ct::new();
    assert_state!(t.st(&udp_ab(), &commit(5), 0), TRK | NEW);
    let d = t.dump(0);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].orig, tuple(UDP, a(), 3333, b(), 4444, 5));
    assert_eq!(d[0].reply, tuple(UDP, b(), 4444, a(), 3333, 5));
    assert_eq!(t.ct.n_conns(), 1);
    assert_eq!(t.ct.zone_conns(5), 1);
    assert_eq!(t.ct.stats().committed, 1);
    // More packets one way: still +new, with or without commit, and no second entry.
    assert_state!(t.st(&udp_ab(), &track(5), 100), TRK | NEW);
    assert_state!(t.st(&udp_ab(), &commit(5), 200), TRK | NEW);
    assert_eq!(t.dump(200).len(), 1);
    assert_eq!(t.ct.stats().committed, 1);
    // The reply.
    let (md, _) = t.run(&udp_ba(), &track(5), 300);
    assert_state!(md.state, TRK | EST | RPL);
    assert_eq!(
        md.orig,
        tuple(UDP, a(), 3333, b(), 4444, 5),
        "ct_orig is the original direction"
    );
    assert_state!(t.st(&udp_ab(), &track(5), 400), TRK | EST);
    assert_state!(t.st(&udp_ba(), &track(5), 500), TRK | EST | RPL);
    assert_eq!(t.ct.n_conns(), 1);
}

/// Connections whose tuples share a bucket of the PMD's lookup cache, three times as many as
/// it holds: each is found in both directions through `process_batch`, whether the cache took
/// it in or not. A packet says where its connection is cached (`conn_ref`) only when it is,
/// and `recheck` finds it there only then; the others went to the table.
#[test]
fn connections_beyond_a_cache_bucket() {
    let n = 3 * conntrack::CACHE_WAYS;
    let orig = |(sport, dport)| tuple(UDP, a(), sport, b(), dport, 5);
    let sizing = CtCache::new();
    let bucket = |p| sizing.bucket_of(orig(p).hash());
    let target = bucket((1, 1));
    let ports: Vec<(u16, u16)> = (1..=64)
        .flat_map(|dport| (1..=u16::MAX).map(move |sport| (sport, dport)))
        .filter(|&p| bucket(p) == target)
        .take(n)
        .collect();
    assert_eq!(ports.len(), n, "enough tuples of one bucket");
    let ab: Vec<Vec<u8>> = ports
        .iter()
        .map(|&(s, d)| build(a(), b(), &udp(s, d, b"a")))
        .collect();
    let ba: Vec<Vec<u8>> = ports
        .iter()
        .map(|&(s, d)| build(b(), a(), &udp(d, s, b"c")))
        .collect();
    let ct = Conntrack::new();
    let mut cache = CtCache::new();
    let run = |cache: &mut CtCache, frames: &[Vec<u8>], args: &CtArgs, now| {
        let pkts: Vec<CtPacket<'_>> = frames.iter().map(|f| packet(f)).collect();
        let mut out = vec![(CtMeta::default(), None); pkts.len()];
        ct.process_batch(cache, &pkts, &mut out, args, now);
        out.into_iter().map(|(md, _)| md).collect::<Vec<_>>()
    };
    for md in run(&mut cache, &ab, &commit(5), 0) {
        assert_state!(md.state, TRK | NEW);
    }
    assert_eq!((ct.n_conns() as usize, ct.stats().committed), (n, n as u64));
    let (mut cached, mut not) = (0, 0);
    let mut check = |cache: &CtCache, mds: &[CtMeta], want: u8, now| {
        for (md, &p) in mds.iter().zip(&ports) {
            assert_state!(md.state, want);
            assert_eq!(md.orig, orig(p));
            let again = ct.recheck(cache, md.conn_ref, &md.orig, &track(5), false, now);
            if md.conn_ref == 0 {
                not += 1;
                assert_eq!(again, None, "not cached: {p:?}");
            } else if again.is_some() {
                cached += 1;
            }
        }
    };
    for round in 1..=3 {
        let mds = run(&mut cache, &ab, &track(5), round * SEC);
        check(&cache, &mds, TRK | NEW, round * SEC);
    }
    let mds = run(&mut cache, &ba, &track(5), 4 * SEC);
    check(&cache, &mds, TRK | EST | RPL, 4 * SEC);
    let mds = run(&mut cache, &ab, &track(5), 5 * SEC);
    check(&cache, &mds, TRK | EST, 5 * SEC);
    assert!(cached > 0 && not > 0, "cached {cached}, not cached {not}");
    assert_eq!(ct.n_conns() as usize, n);
    assert_counts(&ct, 5 * SEC);
}

/// A packet's `conn_ref` is its own: `process_batch` writes the metadata into slots that may
/// hold an earlier packet's, and a packet of no cached connection (here: not committed) must
/// not keep the earlier one's reference, or a later `ct(commit)` would take it for tracked
/// and not commit.
#[test]
fn conn_ref_is_not_left_from_an_earlier_packet() {
    let ct = Conntrack::new();
    let mut cache = CtCache::new();
    let f = udp_ab();
    let mut out = vec![(CtMeta::default(), None)];
    ct.process_batch(&mut cache, &[packet(&f)], &mut out, &commit(5), 0);
    assert_ne!(out[0].0.conn_ref, 0, "committed and cached");
    let g = build(a(), b(), &udp(3334, 4444, b"a"));
    ct.process_batch(&mut cache, &[packet(&g)], &mut out, &track(5), 10);
    assert_state!(out[0].0.state, TRK | NEW);
    assert_eq!(out[0].0.conn_ref, 0, "no connection");
}

/// The same packet in another zone is another connection.
#[test]
fn udp_zones_are_separate() {
    let mut t = Ct::new();
    assert_state!(t.st(&udp_ab(), &commit(1), 0), TRK | NEW);
    assert_state!(
        t.st(&udp_ba(), &track(2), 10),
        TRK | NEW,
        "zone 2 knows nothing"
    );
    assert_state!(t.st(&udp_ba(), &track(1), 20), TRK | EST | RPL);
    assert_state!(t.st(&udp_ab(), &commit(2), 30), TRK | NEW);
    assert_eq!(t.ct.dump(Some(1), 30).len(), 1);
    assert_eq!(t.ct.dump(Some(2), 30).len(), 1);
    assert_eq!(t.ct.dump(Some(3), 30).len(), 0);
    assert_eq!(
        (t.ct.zone_conns(1), t.ct.zone_conns(2), t.ct.n_conns()),
        (1, 1, 2)
    );
    // Zone 2's connection has not seen its reply; zone 1's has.
    assert_state!(t.st(&udp_ab(), &track(2), 40), TRK | NEW);
    assert_state!(t.st(&udp_ab(), &track(1), 50), TRK | EST);
    // The largest zone works too.
    assert_state!(t.st(&udp_ab(), &commit(u16::MAX), 60), TRK | NEW);
    assert_eq!(t.ct.zone_conns(u16::MAX), 1);
}

/// §3a/§3b: udp_first 60 s, udp_single 60 s (more packets one way), udp_multiple 30 s (after a
/// reply); `timeout_secs` counts down; an expired connection is not found (the packet is
/// `+new` again) and `sweep` removes and counts it.
#[test]
fn udp_timeout_classes_and_expiry() {
    let mut t = Ct::new();
    t.st(&udp_ab(), &commit(0), 0);
    let d = t.dump(0);
    assert_eq!(
        (d[0].class, d[0].timeout_secs),
        (TimeoutClass::UdpFirst, 60)
    );
    assert_eq!(
        t.dump(1)[0].timeout_secs,
        59,
        "whole seconds, truncated (OVS prints 59)"
    );
    t.st(&udp_ab(), &track(0), 10 * SEC);
    let d = t.dump(10 * SEC);
    assert_eq!(
        (d[0].class, d[0].timeout_secs),
        (TimeoutClass::UdpSingle, 60)
    );
    t.st(&udp_ba(), &track(0), 20 * SEC);
    let d = t.dump(20 * SEC);
    assert_eq!(
        (d[0].class, d[0].timeout_secs),
        (TimeoutClass::UdpMultiple, 30)
    );
    // Alive until 50 s, gone at 50 s.
    assert_eq!(t.dump(50 * SEC - 1).len(), 1);
    assert_eq!(t.ct.sweep(50 * SEC - 1), 0);
    assert!(t.dump(50 * SEC).is_empty());
    assert_state!(
        t.st(&udp_ba(), &track(0), 50 * SEC),
        TRK | NEW,
        "expired: not a reply any more"
    );
    assert_eq!(t.ct.n_conns(), 1, "counted until swept");
    assert_eq!(t.ct.sweep(50 * SEC), 1);
    assert_eq!(t.ct.stats().expired, 1);
    assert_eq!((t.ct.n_conns(), t.ct.zone_conns(0)), (0, 0));
    assert_eq!(t.ct.sweep(100 * SEC), 0, "counted once");
}

/// A one-way flow refreshed by each packet lives 60 s after its last packet.
#[test]
fn udp_oneway_refresh_extends_life() {
    let mut t = Ct::new();
    t.st(&udp_ab(), &commit(0), 0);
    for i in 1..=5u64 {
        assert_state!(t.st(&udp_ab(), &track(0), i * 50 * SEC), TRK | NEW);
    }
    assert_eq!(t.dump(250 * SEC)[0].timeout_secs, 60);
    assert_eq!(t.dump(310 * SEC - 1).len(), 1);
    assert!(t.dump(310 * SEC).is_empty());
}

/// Timeout policies per zone (§4): a zone's policy applies to its connections, others keep the
/// defaults; changing the policy is seen at the connection's next packet.
#[test]
fn udp_timeout_policy_per_zone() {
    let mut t = Ct::new();
    t.ct.set_timeouts(
        Some(7),
        &[(TimeoutClass::UdpFirst, 5), (TimeoutClass::UdpMultiple, 2)],
    );
    t.st(&udp_ab(), &commit(7), 0);
    t.st(&udp_ab(), &commit(0), 0);
    assert_eq!(t.ct.dump(Some(7), 0)[0].timeout_secs, 5);
    assert_eq!(t.ct.dump(Some(0), 0)[0].timeout_secs, 60);
    t.st(&udp_ba(), &track(7), 1000);
    assert_eq!(t.ct.dump(Some(7), 1000)[0].timeout_secs, 2);
    t.ct.set_timeouts(Some(7), &[(TimeoutClass::UdpMultiple, 9)]);
    t.st(&udp_ba(), &track(7), 2000);
    assert_eq!(t.ct.dump(Some(7), 2000)[0].timeout_secs, 9);
    assert_eq!(t.ct.timeouts(Some(7))[TimeoutClass::UdpFirst as usize], 5);
    assert_eq!(t.ct.timeouts(Some(8))[TimeoutClass::UdpFirst as usize], 60);
    assert!(t.ct.del_timeouts(7));
    assert!(!t.ct.del_timeouts(7));
    t.ct.flush(None, None);
    t.st(&udp_ab(), &commit(7), 3000);
    assert_eq!(
        t.ct.dump(Some(7), 3000)[0].timeout_secs,
        60,
        "back to the default policy"
    );
}

/// OVS: "Port 0 is invalid" (`extract_l4_udp`/`extract_l4_tcp` return false for a zero port).
#[test]
fn udp_port_zero_is_invalid_like_ovs() {
    let mut t = Ct::new();
    let f = build(a(), b(), &udp(0, 4444, b"x"));
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    let f = build(a(), b(), &tcp(1111, 0, "S", 1, 0, 100));
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    assert_eq!(t.ct.n_conns(), 0);
}

/// §3a: protocols without ports (GRE, SCTP, ...) are tracked by OVS as "other" (ports 0):
/// `+new` on the first packet, an entry on commit, `+est+rpl` for the reply.
#[test]
fn other_protocol_gre_tracked_like_ovs() {
    let mut t = Ct::new();
    let gre = |s, d| {
        build(
            s,
            d,
            &L4 {
                proto: 47,
                bytes: b"\x00\x00\x08\x00abcd".to_vec(),
                csum_at: None,
            },
        )
    };
    assert_state!(t.st(&gre(a(), b()), &commit(5), 0), TRK | NEW);
    assert_eq!(t.dump(0).len(), 1);
    assert_state!(t.st(&gre(b(), a()), &track(5), 1), TRK | EST | RPL);
}

// ---------------------------------------------------------------------------------------------
// ICMP
// ---------------------------------------------------------------------------------------------

/// §3a: echo request `+new`, 60 s; reply `+est+rpl`, 30 s; the key holds the types.
#[test]
fn icmp4_echo_request_reply() {
    let mut t = Ct::new();
    let req = build(a(), b(), &echo(8, 77, 1));
    let rep = build(b(), a(), &echo(0, 77, 1));
    assert_state!(t.st(&req, &commit(5), 0), TRK | NEW);
    let d = t.dump(0);
    assert_eq!(d.len(), 1);
    assert_eq!(
        (d[0].orig.proto, d[0].orig.stype, d[0].orig.dtype),
        (ICMP, 8, 0)
    );
    assert_eq!((d[0].orig.sport, d[0].orig.dport), (77, 77));
    assert_eq!((d[0].reply.stype, d[0].reply.dtype), (0, 8));
    assert_eq!(
        (d[0].class, d[0].timeout_secs),
        (TimeoutClass::IcmpFirst, 60)
    );
    // A second request before the reply: still +new (CT_UPDATE_VALID_NEW).
    assert_state!(t.st(&req, &track(5), 10), TRK | NEW);
    assert_state!(t.st(&rep, &track(5), 20), TRK | EST | RPL);
    let d = t.dump(20);
    assert_eq!(
        (d[0].class, d[0].timeout_secs),
        (TimeoutClass::IcmpReply, 30)
    );
    assert_state!(t.st(&req, &track(5), 30), TRK | EST);
    // Another id is another connection.
    assert_state!(
        t.st(&build(b(), a(), &echo(0, 78, 1)), &track(5), 40),
        TRK | INV
    );
}

/// §3a, IPv6: echo request/reply (128/129).
#[test]
fn icmp6_echo_request_reply() {
    let mut t = Ct::new();
    let req = build(a6(), b6(), &echo(128, 78, 1));
    let rep = build(b6(), a6(), &echo(129, 78, 1));
    assert_state!(t.st(&req, &commit(5), 0), TRK | NEW);
    let d = t.dump(0);
    assert_eq!(
        (
            d[0].orig.proto,
            d[0].orig.v6,
            d[0].orig.stype,
            d[0].orig.dtype
        ),
        (ICMPV6, true, 128, 129)
    );
    assert_state!(t.st(&rep, &track(5), 1), TRK | EST | RPL);
    assert_eq!(t.dump(1)[0].timeout_secs, 30);
}

/// An echo reply with no request is `+inv` (it may not create a connection), with or without
/// commit; so are echo with a non-zero code and an address-mask request (§3a).
#[test]
fn icmp_reply_without_request_is_invalid() {
    let mut t = Ct::new();
    assert_state!(
        t.st(&build(b(), a(), &echo(0, 77, 1)), &commit(5), 0),
        TRK | INV
    );
    assert_state!(
        t.st(&build(b6(), a6(), &echo(129, 77, 1)), &commit(5), 0),
        TRK | INV
    );
    assert_state!(
        t.st(
            &build(a(), b(), &icmp(8, 1, [0, 1, 0, 1], &[])),
            &commit(5),
            0
        ),
        TRK | INV
    );
    assert_state!(
        t.st(
            &build(a(), b(), &icmp(17, 0, [0, 1, 0, 1], &[0; 4])),
            &commit(5),
            0
        ),
        TRK | INV
    );
    // ND (neighbour solicitation) is not tracked.
    assert_state!(
        t.st(
            &build(a6(), b6(), &icmp(135, 0, [0; 4], &[0; 16])),
            &commit(5),
            0
        ),
        TRK | INV
    );
    assert_eq!(t.ct.n_conns(), 0);
    assert!(t.dump(0).is_empty());
    // ICMP timestamp request (13) is tracked, reply type 14.
    assert_state!(
        t.st(
            &build(a(), b(), &icmp(13, 0, [0, 79, 0, 0], &[0; 12])),
            &commit(5),
            0
        ),
        TRK | NEW
    );
    assert_eq!(t.dump(0)[0].reply.stype, 14);
}

/// A committed UDP connection, `+rel` ICMP errors about it: from the responder (destination
/// unreachable: reply direction), from a router on the way, and from the originator about a
/// reply packet (original direction, no `+rpl`). The connection's mark comes along.
#[test]
fn icmp4_error_related_to_udp() {
    let mut t = Ct::new();
    let args = CtArgs {
        mark: Some((42, u32::MAX)),
        ..commit(5)
    };
    t.st(&udp_ab(), &args, 0);
    let unreach = build(b(), a(), &icmp_err(3, 3, &quote(&udp_ab(), 8)));
    let (md, rw) = t.run(&unreach, &track(5), 10);
    assert_state!(md.state, TRK | REL | RPL);
    assert_eq!(md.mark, 42);
    assert_eq!(md.orig, tuple(UDP, a(), 3333, b(), 4444, 5));
    assert_eq!(rw, None);
    // From a router (TTL exceeded): the error goes to the inner packet's source.
    let ttl = build(ip("10.9.9.9"), a(), &icmp_err(11, 0, &quote(&udp_ab(), 8)));
    assert_state!(t.st(&ttl, &track(5), 20), TRK | REL | RPL);
    // A quoting more than 8 bytes is fine.
    let long = build(b(), a(), &icmp_err(3, 3, &quote(&udp_ab(), 9)));
    assert_state!(t.st(&long, &track(5), 30), TRK | REL | RPL);
    // From the originator about the reply: original direction.
    let back = build(a(), b(), &icmp_err(3, 3, &quote(&udp_ba(), 8)));
    assert_state!(t.st(&back, &track(5), 40), TRK | REL);
    // No entry of its own, the connection's state unchanged (still one-way: +new).
    assert_eq!(t.dump(40).len(), 1);
    assert_state!(t.st(&udp_ab(), &track(5), 50), TRK | NEW);
    // In another zone it is unrelated.
    assert_state!(t.st(&unreach, &track(6), 60), TRK | INV);
}

/// ICMP error about an echo request: related too.
#[test]
fn icmp4_error_related_to_echo() {
    let mut t = Ct::new();
    let req = build(a(), b(), &echo(8, 77, 1));
    t.st(&req, &commit(0), 0);
    let err = build(b(), a(), &icmp_err(3, 1, &quote(&req, 8)));
    assert_state!(t.st(&err, &track(0), 1), TRK | REL | RPL);
}

/// An established TCP connection and an ICMP "fragmentation needed" about one of its segments,
/// quoting the IP header and the first 8 bytes of TCP (RFC 792; `ICMP_ERROR_DATA_L4_LEN` in
/// OVS), or the whole TCP header (what Linux sends): `+rel+rpl`. IPv6 packet-too-big quoting
/// the whole segment likewise.
///
/// `key::l4` requires 20 bytes of an embedded TCP header while `ipv4_inner`/`ipv6_inner` hand
/// it `l4_len: 8`, so an ICMP error about TCP is never related.
#[test]
fn icmp_error_related_to_tcp() {
    let mut t = Ct::new();
    tcp_handshake(&mut t, 0, a(), b());
    let seg = build(
        a(),
        b(),
        &tcp_opts(1111, 2222, "PA", 1001, 5001, 64, &[], b"hello"),
    );
    for n in [8, 20, 25] {
        let err = build(b(), a(), &icmp_err(3, 4, &quote(&seg, n)));
        assert_state!(
            t.st(&err, &track(5), 100),
            TRK | REL | RPL,
            "{n} bytes of TCP quoted"
        );
    }
    let mut t = Ct::new();
    tcp_handshake(&mut t, 0, a6(), b6());
    let seg = build(
        a6(),
        b6(),
        &tcp_opts(1111, 2222, "PA", 1001, 5001, 64, &[], b"hello"),
    );
    let ptb = build(b6(), a6(), &icmp(2, 0, [0, 0, 5, 0], &quote(&seg, 25)));
    assert_state!(
        t.st(&ptb, &track(5), 100),
        TRK | REL | RPL,
        "IPv6 packet too big"
    );
}

/// ICMPv6 destination unreachable about UDP.
#[test]
fn icmp6_error_related_to_udp() {
    let mut t = Ct::new();
    let u = build(a6(), b6(), &udp(3333, 4444, b"a"));
    t.st(&u, &commit(5), 0);
    let err = build(b6(), a6(), &icmp_err(1, 4, &quote(&u, 9)));
    assert_state!(t.st(&err, &track(5), 1), TRK | REL | RPL);
    let r = build(b6(), a6(), &udp(4444, 3333, b"r"));
    let back = build(a6(), b6(), &icmp_err(1, 4, &quote(&r, 9)));
    assert_state!(t.st(&back, &track(5), 2), TRK | REL);
}

/// ICMP errors quoting a packet of no connection are `+inv` (`related_unknown`); an error not
/// sent to the quoted packet's source is `+inv` too.
#[test]
fn icmp_error_unrelated_is_invalid() {
    let mut t = Ct::new();
    let unreach = build(b(), a(), &icmp_err(3, 3, &quote(&udp_ab(), 8)));
    assert_state!(t.st(&unreach, &commit(5), 0), TRK | INV);
    assert_eq!(t.ct.stats().related_unknown, 1);
    assert!(
        t.dump(0).is_empty(),
        "an ICMP error never creates a connection"
    );
    t.st(&udp_ab(), &commit(5), 1);
    // Sent to someone other than the inner source.
    let wrong = build(b(), ip("10.1.1.99"), &icmp_err(3, 3, &quote(&udp_ab(), 8)));
    assert_state!(t.st(&wrong, &track(5), 2), TRK | INV);
    assert_eq!(t.invalid(Invalid::L4), 1);
    // Other ports.
    let other = build(
        b(),
        a(),
        &icmp_err(3, 3, &quote(&build(a(), b(), &udp(3333, 4445, b"a")), 8)),
    );
    assert_state!(t.st(&other, &track(5), 3), TRK | INV);
    assert_eq!(t.ct.stats().related_unknown, 2);
    // An ICMP error quoting an ICMP error is not related to anything.
    let nested = build(b(), a(), &icmp_err(3, 3, &quote(&unreach, 8)));
    assert_state!(t.st(&nested, &track(5), 4), TRK | INV);
}

/// Embedded headers cut short: inner IP header incomplete, fewer than 8 bytes of L4, an inner
/// later fragment; all `+inv` without touching the connection.
#[test]
fn icmp_error_truncated_embedded_headers() {
    let mut t = Ct::new();
    t.st(&udp_ab(), &commit(5), 0);
    let full = quote(&udp_ab(), 8);
    for cut in [0, 10, 19, 20, 24, 27] {
        let err = build(b(), a(), &icmp_err(3, 3, &full[..cut]));
        assert_state!(t.st(&err, &track(5), 1), TRK | INV, "quote of {cut} bytes");
    }
    let mut later = full.clone();
    later[6..8].copy_from_slice(&0x0010u16.to_be_bytes());
    let err = build(b(), a(), &icmp_err(3, 3, &later));
    assert_state!(t.st(&err, &track(5), 1), TRK | INV, "inner later fragment");
    // Inner IHL beyond what is quoted.
    let mut ihl = full.clone();
    ihl[0] = 0x4f;
    let err = build(b(), a(), &icmp_err(3, 3, &ihl));
    assert_state!(t.st(&err, &track(5), 1), TRK | INV, "inner IHL 60");
    // ICMPv6 error with a short inner IPv6 header.
    let u6 = build(a6(), b6(), &udp(3333, 4444, b"a"));
    let err = build(b6(), a6(), &icmp_err(1, 4, &quote(&u6, 8)[..30]));
    assert_state!(t.st(&err, &track(5), 1), TRK | INV);
    // The ICMP header itself cut: 4 bytes.
    let mut f = build(b(), a(), &icmp(3, 3, [0; 4], &[]));
    f.truncate(f.len() - 4);
    f[ETH + 3] -= 4;
    fix_ip4_csum(&mut f);
    assert_state!(t.st(&f, &track(5), 1), TRK | INV);
    assert_eq!(t.ct.stats().related_unknown, 0);
    assert_state!(
        t.st(&udp_ab(), &track(5), 2),
        TRK | NEW,
        "connection untouched"
    );
}

/// OVS looks an ICMP error up by the *reversed* quoted tuple (`conn_key_reverse` in
/// `extract_l4_icmp`): for a SNATed connection the responder's error quotes the translated
/// packet (`N:n -> B`), whose reverse is the connection's reply key. The table looks up the
/// quoted tuple as is, which is no key of a NATed connection: `+inv` instead of `+rel+rpl`.
#[test]
fn icmp_error_related_to_snat_connection() {
    let mut t = Ct::new();
    let args = with_nat(commit(5), snat("10.0.0.100", "10.0.0.100", 0, 0));
    let (md, rw) = t.run(&udp_ab(), &args, 0);
    assert_state!(md.state, TRK | NEW | SNAT);
    let (n, np) = rw.unwrap().src.unwrap();
    let n = Ip::V4(n[..4].try_into().unwrap());
    // The packet as it left, translated; the error comes back to the translated address.
    let on_wire = build(n, b(), &udp(np, 4444, b"a"));
    let err = build(b(), n, &icmp_err(3, 3, &quote(&on_wire, 8)));
    let (md, rw) = t.run(&err, &with_nat(track(5), nat_only()), 10);
    assert_state!(md.state, TRK | REL | RPL | SNAT);
    // Translated back as a reply: the outer destination, and the quoted packet's source.
    assert_eq!(
        rw,
        Some(NatRewrite {
            src: None,
            dst: Some((a().key(), 3333)),
            alg: None,
            icmp_error: true
        })
    );
    // Without nat: related, nothing to translate.
    let (md, rw) = t.run(&err, &track(5), 11);
    assert_state!(md.state, TRK | REL | RPL);
    assert_eq!(rw, None);
}

// ---------------------------------------------------------------------------------------------
// TCP
// ---------------------------------------------------------------------------------------------

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

/// The one connection's (state name, timeout) at `now`. The table moves an expiry only when
/// it moves by a second or more (`Conn::touch`), so a timeout may read up to one second short
/// of the class's value right after a packet: such a value is reported as the class's.
fn tcp_dump(t: &Ct, now: u64) -> (&'static str, u64) {
    let d = t.dump(now);
    assert_eq!(d.len(), 1, "{d:?}");
    let secs = d[0].timeout_secs;
    let class = u64::from(t.ct.timeouts(None)[d[0].class as usize]);
    let secs = if secs + 1 == class { class } else { secs };
    (d[0].tcp_state.unwrap(), secs)
}

/// §3: the reference's crafted session: handshake, data, FIN from the client, its ACK, FIN
/// from the server, last ACK; states and timeouts as `dump-conntrack -s` prints them.
#[test]
fn tcp_handshake_data_fin_close() {
    let mut t = Ct::new();
    let syn = build(
        a(),
        b(),
        &tcp_opts(1111, 2222, "S", 1000, 0, 8192, &SYN_OPTS, &[]),
    );
    let synack = build(
        b(),
        a(),
        &tcp_opts(2222, 1111, "SA", 5000, 1001, 8192, &SYN_OPTS, &[]),
    );
    let c = |fl: &str, seq, ack, data: &[u8]| {
        build(a(), b(), &tcp_opts(1111, 2222, fl, seq, ack, 64, &[], data))
    };
    let s = |fl: &str, seq, ack| build(b(), a(), &tcp(2222, 1111, fl, seq, ack, 64));
    assert_state!(t.st(&syn, &commit(5), 0), TRK | NEW);
    assert_eq!(tcp_dump(&t, 0), ("SYN_SENT", 30));
    assert_state!(t.st(&synack, &track(5), 100), TRK | EST | RPL);
    let (st, tmo) = tcp_dump(&t, 100);
    assert_eq!(st, "ESTABLISHED");
    assert!(tmo <= 30);
    assert_state!(t.st(&c("A", 1001, 5001, b""), &track(5), 200), TRK | EST);
    assert_eq!(tcp_dump(&t, 200), ("ESTABLISHED", 86400));
    assert_state!(
        t.st(&c("PA", 1001, 5001, b"hello"), &track(5), 300),
        TRK | EST
    );
    assert_state!(t.st(&s("A", 5001, 1006), &track(5), 400), TRK | EST | RPL);
    assert_eq!(tcp_dump(&t, 400), ("ESTABLISHED", 86400));
    assert_state!(t.st(&c("FA", 1006, 5001, b""), &track(5), 500), TRK | EST);
    assert_eq!(tcp_dump(&t, 500), ("CLOSING", 900));
    assert_state!(t.st(&s("A", 5001, 1007), &track(5), 600), TRK | EST | RPL);
    assert_eq!(
        tcp_dump(&t, 600).0,
        "TIME_WAIT",
        "FIN_WAIT_2 prints as TIME_WAIT"
    );
    assert_state!(t.st(&s("FA", 5001, 1007), &track(5), 700), TRK | EST | RPL);
    assert_eq!(tcp_dump(&t, 700), ("TIME_WAIT", 45));
    assert_state!(t.st(&c("A", 1007, 5002, b""), &track(5), 800), TRK | EST);
    assert_eq!(tcp_dump(&t, 800), ("TIME_WAIT", 30));
    assert!(t.dump(30_800).is_empty());
    assert_eq!(t.ct.sweep(30_800), 1);
    assert_eq!(t.ct.n_conns(), 0);
}

/// §3: SYN answered by RST-ACK, and an established connection reset by the client: TIME_WAIT,
/// 30 s. A new SYN on the closed tuple replaces the connection (same count).
#[test]
fn tcp_rst_and_reopen() {
    let mut t = Ct::new();
    let syn = build(a(), b(), &tcp(1112, 2223, "S", 1000, 0, 8192));
    t.st(&syn, &commit(5), 0);
    let ra = build(b(), a(), &tcp(2223, 1112, "RA", 0, 1001, 0));
    assert_state!(t.st(&ra, &track(5), 10), TRK | EST | RPL);
    assert_eq!(tcp_dump(&t, 10), ("TIME_WAIT", 30));
    let id = t.dump(10)[0].id;
    let syn2 = build(a(), b(), &tcp(1112, 2223, "S", 77_000, 0, 8192));
    assert_state!(t.st(&syn2, &commit(5), 20), TRK | NEW);
    let d = t.dump(20);
    assert_eq!(d.len(), 1);
    assert_ne!(d[0].id, id, "a new connection");
    assert_eq!(d[0].tcp_state, Some("SYN_SENT"));
    assert_eq!(t.ct.n_conns(), 1);

    let mut t = Ct::new();
    tcp_handshake(&mut t, 0, a(), b());
    let rst = build(a(), b(), &tcp(1111, 2222, "R", 1001, 0, 0));
    assert_state!(t.st(&rst, &track(5), 10), TRK | EST);
    assert_eq!(tcp_dump(&t, 10), ("TIME_WAIT", 30));
}

/// A reopening SYN without commit still ends the old connection (OVS `CT_UPDATE_NEW` expires
/// it) and is `+new`; counts follow.
#[test]
fn tcp_reopen_without_commit_removes_old() {
    let mut t = Ct::new();
    t.st(
        &build(a(), b(), &tcp(1112, 2223, "S", 1000, 0, 8192)),
        &commit(5),
        0,
    );
    t.st(
        &build(b(), a(), &tcp(2223, 1112, "RA", 0, 1001, 0)),
        &track(5),
        10,
    );
    assert_state!(
        t.st(
            &build(a(), b(), &tcp(1112, 2223, "S", 9000, 0, 8192)),
            &track(5),
            20
        ),
        TRK | NEW
    );
    assert_counts(&t.ct, 20);
}

/// A SYN-ACK cannot create a connection (`tcp_valid_new`); neither can SYN+FIN+RST or a
/// segment without flags (§2a, §9). `tcp_invalid` counts them.
#[test]
fn tcp_invalid_creators() {
    let mut t = Ct::new();
    for fl in ["SA", "SFR", "SF", "SR", ""] {
        let f = build(a(), b(), &tcp(1111, 2222, fl, 1, 1, 100));
        assert_state!(t.st(&f, &commit(5), 0), TRK | INV, "flags {fl:?}");
    }
    assert_eq!(t.ct.stats().tcp_invalid, 5);
    assert_eq!(t.ct.n_conns(), 0);
    assert!(t.dump(0).is_empty());
}

/// §2a: a segment of an unknown connection (bare ACK) is picked up mid-stream: `+new`, an entry
/// in SYN_SENT with the first-packet timeout.
#[test]
fn tcp_midstream_pickup() {
    let mut t = Ct::new();
    let f = build(ip("10.1.1.48"), b(), &tcp(1, 2, "A", 12345, 777, 100));
    assert_state!(t.st(&f, &commit(5), 0), TRK | NEW);
    assert_eq!(tcp_dump(&t, 0), ("SYN_SENT", 30));
}

/// §9: an out-of-window segment on an established connection is `+inv` with sequence checking
/// on and `+est` with it off.
#[test]
fn tcp_out_of_window_and_liberal() {
    let mut t = Ct::new();
    let src = ip("10.1.1.41");
    t.st(
        &build(src, b(), &tcp(1111, 2222, "S", 1000, 0, 8192)),
        &commit(5),
        0,
    );
    t.st(
        &build(b(), src, &tcp(2222, 1111, "SA", 5000, 1001, 8192)),
        &track(5),
        1,
    );
    assert_state!(
        t.st(
            &build(src, b(), &tcp(1111, 2222, "A", 1001, 5001, 8192)),
            &track(5),
            2
        ),
        TRK | EST
    );
    let far = build(
        src,
        b(),
        &tcp_opts(1111, 2222, "PA", 900_000_000, 5001, 8192, &[], b"x"),
    );
    let (md, _) = t.run(&far, &track(5), 3);
    assert_state!(md.state, TRK | INV);
    assert_eq!(t.ct.stats().tcp_invalid, 1);
    assert!(t.ct.tcp_seq_chk());
    t.ct.set_tcp_seq_chk(false);
    assert_state!(t.st(&far, &track(5), 4), TRK | EST);
    assert_eq!(tcp_dump(&t, 4).0, "ESTABLISHED");
    assert_eq!(t.ct.stats().tcp_invalid, 1);
    t.ct.set_tcp_seq_chk(true);
}

/// The table's checks of the TCP header before the tracker sees it: bad checksum, header
/// shorter than 20, data offset beyond the segment, data offset below 5.
#[test]
fn tcp_bad_headers() {
    let mut t = Ct::new();
    let syn = tcp(1111, 2222, "S", 1000, 0, 8192);
    let bad = build_with(a(), b(), &syn, &opt(|o| o.bad_l4_csum = true));
    assert_state!(t.st(&bad, &commit(0), 0), TRK | INV);
    assert_eq!(t.invalid(Invalid::L4), 1);
    let mut short = syn.clone();
    short.bytes.truncate(16);
    short.csum_at = None;
    assert_state!(t.st(&build(a(), b(), &short), &commit(0), 0), TRK | INV);
    let mut doff = syn.clone();
    doff.bytes[12] = 0xf0;
    assert_state!(t.st(&build(a(), b(), &doff), &commit(0), 0), TRK | INV);
    let mut doff4 = syn.clone();
    doff4.bytes[12] = 0x40;
    assert_state!(t.st(&build(a(), b(), &doff4), &commit(0), 0), TRK | INV);
    assert_eq!(t.invalid(Invalid::L4), 4);
    assert_eq!(t.ct.n_conns(), 0);
}

// ---------------------------------------------------------------------------------------------
// L3 checks
// ---------------------------------------------------------------------------------------------

/// §9: bad IP header checksum → `invalid_l3`; bad UDP checksum → `invalid_l4`; a zero UDP
/// checksum is fine on IPv4, not on IPv6; bad ICMP checksums too.
#[test]
fn checksum_errors() {
    let mut t = Ct::new();
    let u = udp(1, 2, b"abc");
    let f = build_with(ip("10.1.1.44"), b(), &u, &opt(|o| o.bad_l3_csum = true));
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    assert_eq!(t.invalid(Invalid::L3), 1);
    let f = build_with(ip("10.1.1.43"), b(), &u, &opt(|o| o.bad_l4_csum = true));
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    assert_eq!(t.invalid(Invalid::L4), 1);
    let f = build_with(a6(), b6(), &u, &opt(|o| o.bad_l4_csum = true));
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    let f = build_with(a6(), b6(), &u, &opt(|o| o.zero_udp_csum = true));
    assert_state!(
        t.st(&f, &commit(0), 0),
        TRK | INV,
        "IPv6 UDP needs a checksum"
    );
    let f = build_with(a(), b(), &echo(8, 1, 1), &opt(|o| o.bad_l4_csum = true));
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    let f = build_with(a6(), b6(), &echo(128, 1, 1), &opt(|o| o.bad_l4_csum = true));
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    assert_eq!(t.invalid(Invalid::L4), 5);
    assert_eq!(t.ct.n_conns(), 0);
    let f = build_with(a(), b(), &u, &opt(|o| o.zero_udp_csum = true));
    assert_state!(
        t.st(&f, &commit(0), 0),
        TRK | NEW,
        "IPv4 UDP checksum 0: not checked"
    );
    assert_eq!(t.ct.n_conns(), 1);
    assert_eq!(t.invalid(Invalid::L3), 1);
}

/// `verified` (an earlier `ct()` checked the packet) skips the checksums.
#[test]
fn verified_packets_skip_checksums() {
    let f = build_with(
        a(),
        b(),
        &udp(1, 2, b"abc"),
        &opt(|o| {
            o.bad_l4_csum = true;
            o.bad_l3_csum = true;
        }),
    );
    assert_commits_new(&CtPacket {
        verified: true,
        natted: false,
        ..packet(&f)
    });
}

/// Truncated and inconsistent IPv4 headers: `invalid_l3`. A truncated UDP header or a UDP
/// length that disagrees with the IP length: `invalid_l4`.
#[test]
fn truncated_headers() {
    let mut t = Ct::new();
    let good = udp_ab();
    // Frame ends inside the IP header.
    for n in [ETH, ETH + 1, ETH + 19] {
        assert_state!(t.st_raw(&good[..n], false), TRK | INV, "{n} bytes");
    }
    // IHL below 5.
    let mut f = good.clone();
    f[ETH] = 0x44;
    fix_ip4_csum(&mut f);
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    // Total length beyond the frame.
    let mut f = good.clone();
    f[ETH + 3] += 1;
    fix_ip4_csum(&mut f);
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    // Total length below the header.
    let mut f = good.clone();
    f[ETH + 2..ETH + 4].copy_from_slice(&19u16.to_be_bytes());
    fix_ip4_csum(&mut f);
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    // Version 6 in an IPv4 frame.
    let mut f = good.clone();
    f[ETH] = 0x65;
    assert_state!(t.st_raw(&f, false), TRK | INV);
    let l3 = t.invalid(Invalid::L3);
    assert_eq!(l3, 7);
    // IP says 4 bytes of UDP.
    let mut f = good.clone();
    f.truncate(ETH + 24);
    f[ETH + 2..ETH + 4].copy_from_slice(&24u16.to_be_bytes());
    fix_ip4_csum(&mut f);
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    // UDP length longer than the datagram.
    let mut f = good.clone();
    f[ETH + 25] += 1;
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    assert_eq!(t.invalid(Invalid::L4), 2);
    assert_eq!(t.invalid(Invalid::L3), l3);
    // IPv6: payload length beyond the frame; frame ends in the fixed header.
    let u6 = build(a6(), b6(), &udp(1, 2, b"x"));
    assert_state!(t.st_raw(&u6[..u6.len() - 1], true), TRK | INV);
    assert_state!(t.st_raw(&u6[..ETH + 39], true), TRK | INV);
    assert_eq!(t.invalid(Invalid::L3), l3 + 2);
    assert_eq!(t.ct.n_conns(), 0);
    // Ethernet padding after a good datagram is fine.
    let f = build_with(a(), b(), &udp(3333, 4444, b"a"), &opt(|o| o.pad = 17));
    assert_state!(t.st(&f, &commit(0), 0), TRK | NEW);
    assert_eq!(t.ct.n_conns(), 1);
}

impl Ct {
    /// A frame with `v6` as given (not read from the frame, which may be too short).
    fn st_raw(&mut self, f: &[u8], v6: bool) -> u8 {
        let pkt = CtPacket {
            frame: f,
            l3: ETH,
            v6,
            frag_l4_len: None,
            verified: false,
            natted: false,
        };
        self.st_pkt(&pkt)
    }

    /// `pkt` committed in zone 0 at time 0: its state.
    fn st_pkt(&mut self, pkt: &CtPacket<'_>) -> u8 {
        self.run_pkt(pkt, &commit(0), 0).0.state
    }
}

/// `pkt` committed on an empty table: new, and the table's one connection.
fn assert_commits_new(pkt: &CtPacket<'_>) {
    let mut t = Ct::new();
    assert_state!(t.st_pkt(pkt), TRK | NEW);
    assert_eq!(t.ct.n_conns(), 1);
}

/// IPv4 options (IHL 6 and 15) are stepped over; the reply without options matches.
#[test]
fn ipv4_options() {
    let mut t = Ct::new();
    // Router alert (4 bytes).
    let f = build_with(
        a(),
        b(),
        &udp(3333, 4444, b"a"),
        &opt(|o| o.ip_opts = vec![0x94, 4, 0, 0]),
    );
    assert_eq!(f[ETH], 0x46);
    assert_state!(t.st(&f, &commit(0), 0), TRK | NEW);
    assert_eq!(t.dump(0)[0].orig, tuple(UDP, a(), 3333, b(), 4444, 0));
    assert_state!(t.st(&udp_ba(), &track(0), 1), TRK | EST | RPL);
    // Forty bytes of NOPs and EOL: IHL 15.
    let mut opts = vec![1u8; 39];
    opts.push(0);
    let f = build_with(
        a(),
        b(),
        &tcp(5, 6, "S", 1, 0, 100),
        &opt(|o| o.ip_opts = opts),
    );
    assert_eq!(f[ETH], 0x4f);
    assert_state!(t.st(&f, &commit(0), 2), TRK | NEW);
    assert_eq!(t.ct.n_conns(), 2);
}

/// IPv6 extension headers (hop-by-hop, routing, destination options, an atomic fragment
/// header) before UDP and TCP: tracked under the upper-layer protocol; the reply without them
/// matches.
#[test]
fn ipv6_extension_headers() {
    let mut t = Ct::new();
    let exts = opt(|o| o.exts = vec![hbh(), routing(), dstopts()]);
    let f = build_with(a6(), b6(), &udp(3333, 4444, b"abc"), &exts);
    assert_state!(t.st(&f, &commit(0), 0), TRK | NEW);
    assert_eq!(t.dump(0)[0].orig, tuple(UDP, a6(), 3333, b6(), 4444, 0));
    assert_state!(
        t.st(&build(b6(), a6(), &udp(4444, 3333, b"x")), &track(0), 1),
        TRK | EST | RPL
    );
    let f = build_with(a6(), b6(), &tcp(1, 2, "S", 1, 0, 100), &exts);
    assert_state!(t.st(&f, &commit(0), 2), TRK | NEW);
    assert_eq!(t.ct.n_conns(), 2);
    // An ICMPv6 echo behind a hop-by-hop header.
    let f = build_with(a6(), b6(), &echo(128, 9, 1), &opt(|o| o.exts = vec![hbh()]));
    assert_state!(t.st(&f, &commit(0), 3), TRK | NEW);
    // A truncated extension header chain.
    let mut f = build_with(a6(), b6(), &udp(1, 2, b""), &opt(|o| o.exts = vec![hbh()]));
    f.truncate(ETH + 44);
    f[ETH + 5] = 4;
    assert_state!(t.st(&f, &commit(0), 4), TRK | INV);
}

/// Fragments reaching `ct()` without reassembly: IPv4 first fragment (MF), later fragments,
/// IPv6 later fragment and first fragment: `+inv`, `invalid_fragment`. DF alone is not a
/// fragment.
#[test]
fn fragments_without_reassembly_are_invalid() {
    let mut t = Ct::new();
    let u = udp(5, 6, &[b'A'; 64]);
    for frag in [0x2000u16, 0x0010, 0x2010, 0x1fff] {
        let f = build_with(ip("10.1.1.51"), b(), &u, &opt(|o| o.frag = frag));
        assert_state!(t.st(&f, &commit(0), 0), TRK | INV, "frag field {frag:#x}");
    }
    for (off, more) in [(0, true), (8, true), (8, false)] {
        let f = build_with(a6(), b6(), &u, &opt(|o| o.exts = vec![frag6(off, more)]));
        assert_state!(t.st(&f, &commit(0), 0), TRK | INV, "v6 frag {off} {more}");
    }
    assert_eq!(t.invalid(Invalid::Fragment), 7);
    assert_eq!(t.ct.n_conns(), 0);
    let f = build_with(a(), b(), &u, &opt(|o| o.frag = 0x4000));
    assert_state!(t.st(&f, &commit(0), 0), TRK | NEW, "DF");
}

/// The first fragment of a reassembled datagram, with `frag_l4_len` the datagram's L4 length:
/// tracked (its checksum cannot be checked).
#[test]
fn reassembled_first_fragment_is_tracked() {
    let whole = udp(5, 6, &[b'A'; 3000]);
    let mut f = build_with(ip("10.1.1.51"), b(), &whole, &opt(|o| o.frag = 0x2000));
    // Keep the first 1200 bytes of IP payload, as the first fragment carries.
    f.truncate(ETH + 20 + 1200);
    f[ETH + 2..ETH + 4].copy_from_slice(&1220u16.to_be_bytes());
    fix_ip4_csum(&mut f);
    assert_commits_new(&CtPacket {
        frag_l4_len: Some(3008),
        ..packet(&f)
    });
}

// ---------------------------------------------------------------------------------------------
// Mark and label
// ---------------------------------------------------------------------------------------------

/// §1/§2: mark and label set on commit (with masks) are on every later packet of the
/// connection, both directions; later commits merge under their masks.
#[test]
fn mark_label_on_commit_with_masks() {
    let mut t = Ct::new();
    let args = CtArgs {
        mark: Some((0x2a, 0xff)),
        label: Some((0x0102_0304, u128::MAX)),
        ..commit(5)
    };
    let (md, _) = t.run(&udp_ab(), &args, 0);
    assert_eq!(
        (md.mark, md.label),
        (0x2a, 0x0102_0304),
        "the committing packet sees them"
    );
    let (md, _) = t.run(&udp_ab(), &track(5), 1);
    assert_eq!((md.mark, md.label), (0x2a, 0x0102_0304));
    let (md, _) = t.run(&udp_ba(), &track(5), 2);
    assert_eq!((md.mark, md.label), (0x2a, 0x0102_0304));
    // Masked update: only the masked bits change.
    let args = CtArgs {
        mark: Some((0xfff0_0f00, 0x0000_0f0f)),
        label: Some((1u128 << 127 | 0xff, 1u128 << 127 | 0x0f)),
        ..commit(5)
    };
    let (md, _) = t.run(&udp_ba(), &args, 3);
    assert_eq!(md.mark, 0x0f20);
    assert_eq!(md.label, 1u128 << 127 | 0x0102_030f);
    let d = t.dump(3);
    assert_eq!((d[0].mark, d[0].label), (0xf20, 1u128 << 127 | 0x0102_030f));
    // Max mark.
    t.run(
        &udp_ab(),
        &CtArgs {
            mark: Some((u32::MAX, u32::MAX)),
            ..commit(5)
        },
        4,
    );
    assert_eq!(t.run(&udp_ba(), &track(5), 5).0.mark, u32::MAX);
}

/// Mark and label need commit: on an existing connection a `ct()` without commit leaves them;
/// on a packet of no connection nothing is set (and nothing remembered).
#[test]
fn mark_label_not_set_without_commit() {
    let mut t = Ct::new();
    let no_commit = CtArgs {
        mark: Some((7, u32::MAX)),
        label: Some((9, u128::MAX)),
        ..track(5)
    };
    let (md, _) = t.run(&udp_ab(), &no_commit, 0);
    assert_eq!((md.mark, md.label), (0, 0));
    t.st(&udp_ab(), &commit(5), 1);
    let (md, _) = t.run(&udp_ab(), &no_commit, 2);
    assert_eq!((md.mark, md.label), (0, 0));
    assert_eq!((t.dump(2)[0].mark, t.dump(2)[0].label), (0, 0));
}

/// Packets read a connection's label without its lock while commits change it: each reads
/// one of the labels written, never half of one and half of another (the label's two words),
/// and a commit that finds the label as it would write it leaves it.
#[test]
fn a_label_read_while_commits_write_it_is_whole() {
    const A: u128 = u64::MAX as u128;
    const B: u128 = A << 64;
    let ct = Conntrack::new();
    let f = udp_ab();
    let label = |v: u128| CtArgs {
        label: Some((v, u128::MAX)),
        ..commit(5)
    };
    let run = |cache: &mut CtCache, args: &CtArgs| {
        let mut md = CtMeta::default();
        ct.process(cache, &packet(&f), &mut md, args, 0);
        md
    };
    assert_eq!(run(&mut CtCache::new(), &label(A)).label, A);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut cache = CtCache::new();
            for i in 0..20_000 {
                let v = if i % 2 == 0 { B } else { A };
                assert_eq!(run(&mut cache, &label(v)).label, v);
            }
        });
        let mut cache = CtCache::new();
        for _ in 0..20_000 {
            let l = run(&mut cache, &track(5)).label;
            assert!(l == A || l == B, "a torn label: {l:#x}");
        }
    });
    let mut cache = CtCache::new();
    let l = run(&mut cache, &track(5)).label;
    assert_eq!(
        run(&mut cache, &label(l)).label,
        l,
        "a commit of the same label"
    );
    assert_eq!(ct.dump(None, 0)[0].label, l);
}

/// A refused commit (limit) does not hand the packet a mark it asked for.
#[test]
fn mark_not_reported_when_commit_refused() {
    let mut t = Ct::new();
    t.ct.set_maxconns(0);
    let args = CtArgs {
        mark: Some((7, u32::MAX)),
        label: Some((9, u128::MAX)),
        ..commit(5)
    };
    let (md, _) = t.run(&udp_ab(), &args, 0);
    assert_state!(md.state, TRK | NEW);
    assert_eq!((md.mark, md.label), (0, 0));
}

// ---------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------

fn udp_from(i: u32) -> Vec<u8> {
    let [_, _, x, y] = i.to_be_bytes();
    build(
        ip(&format!("10.2.{x}.{y}")),
        b(),
        &udp(3000 + (i % 1000) as u16, 4444, b"x"),
    )
}

/// §7a: with the table full, commits are refused: the packet stays `+new`, no entry, counted;
/// freeing space (flush) lets commits in again.
#[test]
fn maxconns_refuses_and_recovers() {
    let mut t = Ct::new();
    assert_eq!(t.ct.maxconns(), 3_000_000);
    t.ct.set_maxconns(2);
    for i in 0..3 {
        assert_state!(t.st(&udp_from(i), &commit(5), 0), TRK | NEW);
    }
    assert_eq!(t.ct.n_conns(), 2);
    assert_eq!(t.dump(0).len(), 2);
    assert_eq!(t.ct.stats().limit_refused, 1);
    assert_eq!(t.ct.stats().committed, 2);
    // The refused flow's second packet is still +new and refused again.
    assert_state!(t.st(&udp_from(2), &commit(5), 1), TRK | NEW);
    assert_eq!(t.ct.stats().limit_refused, 2);
    assert_eq!(t.ct.flush(None, None), 2);
    assert_eq!((t.ct.n_conns(), t.ct.zone_conns(5)), (0, 0));
    assert_state!(t.st(&udp_from(2), &commit(5), 2), TRK | NEW);
    assert_eq!(t.ct.n_conns(), 1);
    t.ct.set_maxconns(0);
    assert_state!(t.st(&udp_from(3), &commit(5), 3), TRK | NEW);
    assert_eq!(t.ct.n_conns(), 1);
}

/// §8a: a zone limit of 3 keeps the zone at 3 connections; other zones are not affected; a
/// default limit applies to zones without their own; flush and expiry bring counts back.
#[test]
fn zone_limits_and_default() {
    let mut t = Ct::new();
    t.ct.set_zone_limit(5, 3);
    for i in 0..5 {
        assert_state!(t.st(&udp_from(i), &commit(5), 0), TRK | NEW);
    }
    for i in 0..5 {
        t.st(&udp_from(i), &commit(6), 0);
    }
    assert_eq!((t.ct.zone_conns(5), t.ct.zone_conns(6)), (3, 5));
    assert_eq!(t.ct.dump(Some(5), 0).len(), 3);
    assert_eq!(t.ct.stats().limit_refused, 2);
    assert_eq!(t.ct.zone_limits(), vec![(5, 3)]);
    t.ct.set_default_limit(1);
    for i in 10..13 {
        t.st(&udp_from(i), &commit(9), 0);
    }
    assert_eq!(t.ct.zone_conns(9), 1);
    t.st(&udp_from(20), &commit(5), 0);
    assert_eq!(t.ct.zone_conns(5), 3, "own limit, not the default");
    // Flushing zone 5 frees it.
    assert_eq!(t.ct.flush(Some(5), None), 3);
    assert_eq!(t.ct.zone_conns(5), 0);
    for i in 30..33 {
        assert_state!(t.st(&udp_from(i), &commit(5), 1), TRK | NEW);
    }
    assert_eq!(t.ct.zone_conns(5), 3);
    // Expiry frees everything.
    assert!(t.ct.sweep(3600 * SEC) >= 9);
    assert_eq!(t.ct.n_conns(), 0);
    for z in [5, 6, 9] {
        assert_eq!(t.ct.zone_conns(z), 0, "zone {z}");
    }
}

/// Re-committing a tuple whose connection expired but was not swept yet (a common case: a
/// flow that pauses longer than its timeout) overwrites both table keys of the old
/// connection (`insert`'s `put` replaces an expired entry without counting it out), so no
/// later sweep ever finds it: `n_conns` and the zone count leak one per occurrence, until the
/// limits refuse everything.
#[test]
fn no_count_leak_when_recommitting_after_expiry() {
    let mut t = Ct::new();
    t.st(&udp_ab(), &commit(5), 0);
    // Expired at 60 s; the same flow comes back before any sweep.
    assert_state!(t.st(&udp_ab(), &commit(5), 61 * SEC), TRK | NEW);
    assert_eq!(
        t.dump(61 * SEC).len(),
        1,
        "committed again (the old one no longer counts)"
    );
    assert_counts(&t.ct, 61 * SEC);
    t.ct.sweep(1000 * SEC);
    assert_eq!((t.ct.n_conns(), t.ct.zone_conns(5)), (0, 0), "leaked");
    assert_eq!(t.ct.stats().expired, 2);
}

/// A swept connection frees its place under the global limit.
#[test]
fn sweep_frees_global_limit() {
    let mut t = Ct::new();
    t.ct.set_maxconns(1);
    t.st(&udp_from(1), &commit(0), 0);
    t.ct.sweep(61 * SEC);
    assert_state!(t.st(&udp_from(2), &commit(0), 61 * SEC), TRK | NEW);
    assert_eq!(t.dump(61 * SEC).len(), 1);
}

// ---------------------------------------------------------------------------------------------
// NAT
// ---------------------------------------------------------------------------------------------

fn v4(k: [u8; 16]) -> [u8; 4] {
    k[..4].try_into().unwrap()
}

/// §2: SNAT to an address range with a port range. The committing packet and later original
/// packets are rewritten to (address, port) from the ranges; the reply (addressed to the
/// translation) is rewritten back; `+snat` on all of them under `ct(nat)`; without `nat` the
/// packet is tracked but not translated.
#[test]
fn snat_address_and_port_range() {
    let mut t = Ct::new();
    let src = ip("10.1.1.1");
    let dst = ip("10.1.1.2");
    let spec = snat("10.1.1.100", "10.1.1.101", 20000, 20010);
    let orig = build(src, dst, &udp(51001, 9001, b"q"));
    let (md, rw) = t.run(&orig, &with_nat(commit(5), spec), 0);
    assert_state!(md.state, TRK | NEW | SNAT);
    let rw = rw.expect("a rewrite");
    assert_eq!(rw.dst, None);
    let (n, np) = rw.src.unwrap();
    assert!([[10, 1, 1, 100], [10, 1, 1, 101]].contains(&v4(n)), "{n:?}");
    assert!((20000..=20010).contains(&np), "{np}");
    assert_eq!(
        md.orig,
        tuple(UDP, src, 51001, dst, 9001, 5),
        "ct_orig is pre-NAT"
    );
    let d = t.dump(0);
    assert_eq!(d[0].orig, tuple(UDP, src, 51001, dst, 9001, 5));
    assert_eq!(d[0].reply, tuple(UDP, dst, 9001, Ip::V4(v4(n)), np, 5));
    // The reply, to the translated address.
    let reply = build(dst, Ip::V4(v4(n)), &udp(9001, np, b"r"));
    let (md, rw) = t.run(&reply, &with_nat(track(5), nat_only()), 1);
    assert_state!(md.state, TRK | EST | RPL | SNAT);
    assert_eq!(
        rw,
        Some(NatRewrite {
            src: None,
            dst: Some((src.key(), 51001)),
            alg: None,
            icmp_error: false
        })
    );
    // Original direction again.
    let (md, rw) = t.run(&orig, &with_nat(track(5), nat_only()), 2);
    assert_state!(md.state, TRK | EST | SNAT);
    assert_eq!(
        rw,
        Some(NatRewrite {
            src: Some((n, np)),
            dst: None,
            alg: None,
            icmp_error: false
        })
    );
    // Without nat: tracked, not translated, no +snat.
    let (md, rw) = t.run(&orig, &track(5), 3);
    assert_state!(md.state, TRK | EST);
    assert_eq!(rw, None);
    // The untranslated reply (to the real source) is another flow.
    let raw_reply = build(dst, src, &udp(9001, 51001, b"r"));
    assert_state!(t.st(&raw_reply, &track(5), 4), TRK | NEW);
}

/// §2: DNAT of a TCP connection to `10.1.1.2:8001`; the reply from the real server is
/// translated back to the address the client used.
#[test]
fn dnat_tcp() {
    let mut t = Ct::new();
    let c = ip("10.1.1.1");
    let vip = ip("10.1.1.200");
    let srv = ip("10.1.1.2");
    let args = CtArgs {
        mark: Some((u32::MAX, u32::MAX)),
        label: Some((1u128 << 127 | 1, u128::MAX)),
        ..with_nat(commit(5), dnat("10.1.1.2", "10.1.1.2", 8001, 8001))
    };
    let syn = build(c, vip, &tcp(42001, 80, "S", 1000, 0, 8192));
    let (md, rw) = t.run(&syn, &args, 0);
    assert_state!(md.state, TRK | NEW | DNAT);
    assert_eq!(
        rw,
        Some(NatRewrite {
            src: None,
            dst: Some((srv.key(), 8001)),
            alg: None,
            icmp_error: false
        })
    );
    let d = t.dump(0);
    assert_eq!(d[0].reply, tuple(TCP, srv, 8001, c, 42001, 5));
    let synack = build(srv, c, &tcp(8001, 42001, "SA", 5000, 1001, 8192));
    let (md, rw) = t.run(&synack, &with_nat(track(5), nat_only()), 1);
    assert_state!(md.state, TRK | EST | RPL | DNAT);
    assert_eq!(
        rw,
        Some(NatRewrite {
            src: Some((vip.key(), 80)),
            dst: None,
            alg: None,
            icmp_error: false
        })
    );
    assert_eq!((md.mark, md.label), (u32::MAX, 1u128 << 127 | 1));
}

/// §2: SNAT to an address without ports keeps the source port when it is free; a second
/// client using the same port to the same server gets another port.
#[test]
fn snat_keeps_port_when_free() {
    let mut t = Ct::new();
    let spec = snat("10.1.1.100", "10.1.1.100", 0, 0);
    let c1 = build(ip("10.1.1.1"), b(), &tcp(41002, 8002, "S", 1, 0, 100));
    let (_, rw) = t.run(&c1, &with_nat(commit(5), spec), 0);
    assert_eq!(rw.unwrap().src, Some((ip("10.1.1.100").key(), 41002)));
    let c2 = build(ip("10.1.1.3"), b(), &tcp(41002, 8002, "S", 1, 0, 100));
    let (md, rw) = t.run(&c2, &with_nat(commit(5), spec), 0);
    assert_state!(md.state, TRK | NEW | SNAT);
    let (n, p) = rw.unwrap().src.unwrap();
    assert_eq!(v4(n), [10, 1, 1, 100]);
    assert_ne!(p, 41002);
    assert!(p >= 1024);
    let d = t.dump(0);
    assert_ne!(d[0].reply, d[1].reply);
    assert_eq!(t.ct.n_conns(), 2);
}

/// A tiny range, 1 address and 2 ports, and 3 connections: the third is refused
/// (`nat_exhausted`, `+inv`), without leaking counts; the first two keep working.
#[test]
fn nat_exhaustion_tiny_range() {
    let mut t = Ct::new();
    let spec = snat("10.1.1.100", "10.1.1.100", 20000, 20001);
    let mut ports = Vec::new();
    for i in 0..2u16 {
        let f = build(ip("10.1.1.1"), b(), &udp(40000 + i, 53, b"q"));
        let (md, rw) = t.run(&f, &with_nat(commit(5), spec), 0);
        assert_state!(md.state, TRK | NEW | SNAT);
        ports.push(rw.unwrap().src.unwrap().1);
    }
    ports.sort();
    assert_eq!(ports, vec![20000, 20001]);
    let f = build(ip("10.1.1.1"), b(), &udp(40002, 53, b"q"));
    let (md, rw) = t.run(&f, &with_nat(commit(5), spec), 0);
    assert_state!(md.state, TRK | INV);
    assert_eq!(rw, None);
    assert_eq!(t.ct.stats().nat_exhausted, 1);
    assert_eq!((t.ct.n_conns(), t.ct.zone_conns(5)), (2, 2));
    assert_eq!(t.dump(0).len(), 2);
    t.ct.flush(None, None);
    assert_eq!((t.ct.n_conns(), t.ct.zone_conns(5)), (0, 0));
    // Freed: the third gets in.
    let (md, _) = t.run(&f, &with_nat(commit(5), spec), 1);
    assert_state!(md.state, TRK | NEW | SNAT);
}

/// A port range of 2 where the source port is the range's first port: the second client with
/// that same port must get the other port of the range. `nat_pick` tries "the original port on
/// every address" as candidates 0..n_addr and then *skips* candidates 0..n_addr of the
/// address/port walk, which for one address is the walk's first port: when the hash puts
/// that at the original port, port 20001 is never tried and the commit fails although it is
/// free. Several clients, so that some hash lands on it.
#[test]
fn nat_small_port_range_finds_the_free_port() {
    let spec = snat("10.1.1.100", "10.1.1.100", 20000, 20001);
    let mut failed = Vec::new();
    for i in 2..34u8 {
        let mut t = Ct::new();
        let first = build(ip("10.1.1.1"), b(), &udp(20000, 53, b"q"));
        let (_, rw) = t.run(&first, &with_nat(commit(5), spec), 0);
        assert_eq!(rw.unwrap().src.unwrap().1, 20000, "kept: free and in range");
        let second = build(ip(&format!("10.1.1.{i}")), b(), &udp(20000, 53, b"q"));
        let (md, rw) = t.run(&second, &with_nat(commit(5), spec), 0);
        if md.state & INV != 0 {
            failed.push(i);
        } else {
            assert_eq!(rw.unwrap().src.unwrap().1, 20001);
        }
    }
    assert!(
        failed.is_empty(),
        "clients 10.1.1.{failed:?} found no port although 20001 was free"
    );
}

/// DNAT to an address without a port, when two connections would get the same reply tuple
/// (the same client port to two virtual IPs with the same backend): OVS keeps the service
/// port and changes the *source* port (`nat_get_unique_tuple`: "tries to find a source port in
/// the ephemeral range"). The table's fallback walks the ephemeral range on the DNAT side,
/// i.e. rewrites the destination to a random port of the backend.
#[test]
fn dnat_conflict_keeps_service_port() {
    let mut t = Ct::new();
    let c = ip("10.1.1.1");
    let spec = dnat("10.1.1.2", "10.1.1.2", 0, 0);
    let s1 = build(c, ip("10.1.1.200"), &tcp(5000, 80, "S", 1, 0, 100));
    let (_, rw) = t.run(&s1, &with_nat(commit(5), spec), 0);
    assert_eq!(rw.unwrap().dst, Some((ip("10.1.1.2").key(), 80)));
    let s2 = build(c, ip("10.1.1.201"), &tcp(5000, 80, "S", 1, 0, 100));
    let (md, rw) = t.run(&s2, &with_nat(commit(5), spec), 0);
    assert_state!(md.state & !SNAT, TRK | NEW | DNAT);
    let rw = rw.unwrap();
    assert_eq!(
        rw.dst,
        Some((ip("10.1.1.2").key(), 80)),
        "the backend's service port"
    );
}

/// ICMP behind SNAT: two hosts pinging the same server with the same echo id through one
/// address. OVS translates the ICMP id like a port (`pat_proto` includes ICMP,
/// `nat_get_unique_l4` with `peer_port`); the table never changes the id, so the second ping
/// has no free tuple and is refused.
#[test]
fn snat_icmp_same_id_two_hosts() {
    let mut t = Ct::new();
    let spec = snat("10.1.1.100", "10.1.1.100", 0, 0);
    let p1 = build(ip("10.1.1.1"), b(), &echo(8, 7, 1));
    let p2 = build(ip("10.1.1.3"), b(), &echo(8, 7, 1));
    assert_state!(
        t.run(&p1, &with_nat(commit(5), spec), 0).0.state,
        TRK | NEW | SNAT
    );
    let (md, _) = t.run(&p2, &with_nat(commit(5), spec), 0);
    assert_state!(md.state, TRK | NEW | SNAT);
    assert_eq!(t.ct.stats().nat_exhausted, 0);
    assert_eq!(t.ct.n_conns(), 2);
}

/// `ct(nat)` (no range) on a connection committed without NAT does nothing; `ct(commit,nat)`
/// without a kind commits plainly; `nat(src=..)` on an existing connection does not add a
/// translation.
#[test]
fn nat_without_range_is_a_no_op() {
    let mut t = Ct::new();
    let (md, rw) = t.run(&udp_ab(), &with_nat(commit(5), nat_only()), 0);
    assert_state!(md.state, TRK | NEW);
    assert_eq!(rw, None);
    assert_eq!(t.ct.n_conns(), 1);
    let (md, rw) = t.run(&udp_ba(), &with_nat(track(5), nat_only()), 1);
    assert_state!(md.state, TRK | EST | RPL);
    assert_eq!(rw, None);
    let later = with_nat(commit(5), snat("10.1.1.100", "10.1.1.100", 0, 0));
    let (md, rw) = t.run(&udp_ab(), &later, 2);
    assert_state!(md.state, TRK | EST);
    assert_eq!(rw, None);
    assert_eq!(t.dump(2)[0].reply, tuple(UDP, b(), 4444, a(), 3333, 5));
}

/// `persistent`: the same source gets the same translated address, whatever its ports and
/// destination.
#[test]
fn nat_persistent_same_address_for_same_source() {
    let mut t = Ct::new();
    let spec = NatSpec {
        persistent: true,
        ..snat("10.5.0.0", "10.5.0.255", 0, 0)
    };
    let mut addrs = std::collections::BTreeSet::new();
    for i in 0..40u16 {
        let f = build(
            ip("10.1.1.1"),
            ip(&format!("10.9.0.{}", i % 7)),
            &udp(30000 + i, 53 + i, b"q"),
        );
        let (_, rw) = t.run(&f, &with_nat(commit(5), spec), 0);
        addrs.insert(v4(rw.unwrap().src.unwrap().0));
    }
    assert_eq!(addrs.len(), 1, "{addrs:?}");
    // Different sources spread over the range.
    let mut others = std::collections::BTreeSet::new();
    for i in 2..40u8 {
        let f = build(ip(&format!("10.1.1.{i}")), b(), &udp(30000, 53, b"q"));
        let (_, rw) = t.run(&f, &with_nat(commit(5), spec), 0);
        others.insert(v4(rw.unwrap().src.unwrap().0));
    }
    assert!(others.len() > 1);
}

/// IPv6 SNAT (§2): `fc00::100`.
#[test]
fn snat_ipv6() {
    let mut t = Ct::new();
    let spec = snat("fc00::100", "fc00::100", 0, 0);
    let f = build(ip("fc00::1"), ip("fc00::2"), &udp(51012, 9002, b"q"));
    let (md, rw) = t.run(&f, &with_nat(commit(5), spec), 0);
    assert_state!(md.state, TRK | NEW | SNAT);
    assert_eq!(rw.unwrap().src, Some((ip("fc00::100").key(), 51012)));
    let r = build(ip("fc00::2"), ip("fc00::100"), &udp(9002, 51012, b"r"));
    let (md, rw) = t.run(&r, &with_nat(track(5), nat_only()), 1);
    assert_state!(md.state, TRK | EST | RPL | SNAT);
    assert_eq!(rw.unwrap().dst, Some((ip("fc00::1").key(), 51012)));
}

/// A second `ct()` in the same zone after the packet was translated (e.g. `ct(commit,nat(..))`
/// then `ct(commit,exec(set_field:..->ct_label))`, as OVN pipelines do). OVS finds the
/// connection from the translated packet (`initial_conn_lookup` with `natted`: looks up the
/// reversed key and flips the direction). The table ignores the state the packet carries and
/// looks up the translated tuple, which is no key: the packet is `+new`, loses the mark, and
/// with commit a second, bogus connection is created.
#[test]
fn second_ct_after_nat_finds_the_connection() {
    let mut t = Ct::new();
    let args = CtArgs {
        mark: Some((7, u32::MAX)),
        ..with_nat(commit(5), snat("10.1.1.100", "10.1.1.100", 20000, 20000))
    };
    let mut md = CtMeta::default();
    let rw =
        t.ct.process(&mut t.cache, &packet(&udp_ab()), &mut md, &args, 0)
            .unwrap();
    let (n, np) = rw.src.unwrap();
    // The packet after the rewrite, carrying its metadata into the next ct().
    let natted = build(Ip::V4(v4(n)), b(), &udp(np, 4444, b"a"));
    // The datapath says so when the packet's state has +snat/+dnat in the same zone.
    assert_ne!(md.state & (SNAT | DNAT), 0);
    let pkt = CtPacket {
        verified: true,
        natted: true,
        ..packet(&natted)
    };
    t.ct.process(&mut t.cache, &pkt, &mut md, &commit(5), 1);
    assert_eq!(t.ct.n_conns(), 1, "{:?}", t.dump(1));
    assert_eq!(md.mark, 7);
    assert_eq!(md.orig, tuple(UDP, a(), 3333, b(), 4444, 5));
}

// ---------------------------------------------------------------------------------------------
// force, flush, batch
// ---------------------------------------------------------------------------------------------

/// `force`: a reply-direction packet with force+commit ends the connection and starts a new
/// one from its side; an original-direction packet with force keeps it.
#[test]
fn force_commit_replaces_connection() {
    let mut t = Ct::new();
    t.run(
        &udp_ab(),
        &CtArgs {
            mark: Some((1, u32::MAX)),
            ..commit(5)
        },
        0,
    );
    let id = t.dump(0)[0].id;
    let force = CtArgs {
        force: true,
        ..commit(5)
    };
    // Original direction: nothing happens.
    assert_state!(t.st(&udp_ab(), &force, 1), TRK | NEW);
    assert_eq!(t.dump(1)[0].id, id);
    // Reply direction: a new connection from B.
    let (md, _) = t.run(
        &udp_ba(),
        &CtArgs {
            mark: Some((2, u32::MAX)),
            ..force
        },
        2,
    );
    assert_state!(md.state, TRK | NEW);
    assert_eq!(md.mark, 2);
    let d = t.dump(2);
    assert_eq!(d.len(), 1);
    assert_ne!(d[0].id, id);
    assert_eq!(d[0].orig, tuple(UDP, b(), 4444, a(), 3333, 5));
    assert_eq!((t.ct.n_conns(), t.ct.zone_conns(5)), (1, 1));
    assert_state!(t.st(&udp_ab(), &track(5), 3), TRK | EST | RPL);
}

/// Flush everything, by zone, by a predicate on the original tuple (in any zone or one), and
/// counts follow.
#[test]
fn flush_by_zone_and_tuple() {
    let mut t = Ct::new();
    for z in [1, 2] {
        t.st(&udp_ab(), &commit(z), 0);
        t.st(
            &build(a(), b(), &tcp(1111, 2222, "S", 1, 0, 100)),
            &commit(z),
            0,
        );
        t.st(&build(a(), b(), &echo(8, 5, 1)), &commit(z), 0);
    }
    assert_eq!(t.ct.n_conns(), 6);
    let is_tcp = |x: &Tuple| x.proto == TCP;
    assert_eq!(t.ct.flush(Some(1), Some(&is_tcp)), 1);
    assert_eq!((t.ct.zone_conns(1), t.ct.zone_conns(2)), (2, 3));
    let port = |x: &Tuple| x.sport == 3333;
    assert_eq!(t.ct.flush(None, Some(&port)), 2);
    assert_eq!(t.ct.n_conns(), 3);
    // Matching the reply tuple only: nothing (the predicate sees the original tuple).
    let reply_side = |x: &Tuple| x.sport == 4444;
    assert_eq!(t.ct.flush(None, Some(&reply_side)), 0);
    assert_eq!(t.ct.flush(Some(2), None), 2);
    assert_eq!(t.ct.flush(Some(2), None), 0);
    assert_eq!(
        (t.ct.n_conns(), t.ct.zone_conns(1), t.ct.zone_conns(2)),
        (1, 1, 0)
    );
    // A flushed connection's packets are +new; the PMD cache does not resurrect it.
    assert_state!(t.st(&udp_ba(), &track(2), 1), TRK | NEW);
    assert_eq!(t.ct.flush(None, None), 1);
    assert_state!(
        t.st(&build(b(), a(), &echo(0, 5, 1)), &track(1), 2),
        TRK | INV
    );
    assert_eq!(t.ct.n_conns(), 0);
    assert!(t.dump(2).is_empty());
}

/// `process_batch` gives each packet what `process` would.
#[test]
fn process_batch_matches_process() {
    let frames: Vec<Vec<u8>> = vec![
        udp_ab(),
        udp_ab(),
        udp_ba(),
        build(a(), b(), &tcp(1111, 2222, "S", 1000, 0, 8192)),
        build(b(), a(), &tcp(2222, 1111, "SA", 5000, 1001, 8192)),
        build(b(), a(), &icmp_err(3, 3, &quote(&udp_ab(), 8))),
        build(a(), b(), &echo(0, 1, 1)),
        vec![0; 20],
    ];
    let args = commit(3);
    let mut one = Ct::new();
    let want: Vec<_> = frames
        .iter()
        .map(|f| {
            let mut md = CtMeta::default();
            let pkt = CtPacket {
                v6: false,
                ..packet_any(f)
            };
            let rw = one.ct.process(&mut one.cache, &pkt, &mut md, &args, 0);
            (md, rw)
        })
        .collect();
    let batch = Ct::new();
    let mut cache = CtCache::new();
    let pkts: Vec<CtPacket<'_>> = frames
        .iter()
        .map(|f| CtPacket {
            v6: false,
            ..packet_any(f)
        })
        .collect();
    let mut out = vec![(CtMeta::default(), None); pkts.len()];
    batch
        .ct
        .process_batch(&mut cache, &pkts, &mut out, &args, 0);
    assert_eq!(out, want);
}

fn packet_any(f: &[u8]) -> CtPacket<'_> {
    CtPacket {
        frame: f,
        l3: ETH,
        v6: false,
        frag_l4_len: None,
        verified: false,
        natted: false,
    }
}

// ---------------------------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------------------------

/// A small xorshift, per thread.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The frames threads share: 64 UDP flows (both directions), 32 TCP SYNs, 16 echo requests.
fn shared_frames() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for i in 0..64u16 {
        let s = ip(&format!("10.3.0.{}", i % 8));
        v.push(build(s, b(), &udp(1000 + i / 8, 53, b"q")));
        v.push(build(b(), s, &udp(53, 1000 + i / 8, b"r")));
    }
    for i in 0..32u16 {
        v.push(build(
            ip("10.4.0.1"),
            b(),
            &tcp(2000 + i, 80, "S", 1000, 0, 8192),
        ));
    }
    for i in 0..16u16 {
        v.push(build(ip("10.4.0.2"), b(), &echo(8, i, 1)));
    }
    v
}

/// One step of a thread of [`on_4_threads`]: the table, the thread's cache and random
/// numbers, its id, the step's number, [`shared_frames`].
type Step = fn(&Conntrack, &mut CtCache, &mut Rng, u64, u64, &[Vec<u8>]);

/// 4 threads (ids 0 to 3) each take 30 000 `step`s on `ct`, with a cache of their own and
/// random numbers from `seed(id)`; none may panic.
fn on_4_threads(ct: &Arc<Conntrack>, seed: fn(u64) -> u64, step: Step) {
    let frames = Arc::new(shared_frames());
    let threads: Vec<_> = (0..4u64)
        .map(|id| {
            let ct = ct.clone();
            let frames = frames.clone();
            std::thread::spawn(move || {
                let mut cache = CtCache::new();
                let mut rng = Rng(seed(id));
                for i in 0..30_000u64 {
                    step(&ct, &mut cache, &mut rng, id, i, &frames);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no panic");
    }
}

/// 4 threads commit, look up, flush and sweep over the same tuples (both directions, two
/// zones) with no expiry: no panic, and at the end the counts are exactly what `dump` shows,
/// and go to zero with a flush.
#[test]
fn concurrent_hammer_counts_consistent() {
    let ct = Arc::new(Conntrack::new());
    let seed = |id| 0x9e37_79b9_7f4a_7c15 ^ ((id + 1) * 0x1234_5678);
    on_4_threads(&ct, seed, |ct, cache, rng, id, i, frames| {
        let now = 1000 + i / 10;
        let r = rng.below(1000);
        if r < 3 && id == 0 {
            ct.flush(Some(1), None);
            return;
        }
        if r < 3 && id == 1 {
            let odd = |t: &Tuple| t.sport % 2 == 1;
            ct.flush(None, Some(&odd));
            return;
        }
        if r < 10 && id == 2 {
            ct.sweep(now);
            return;
        }
        let f = &frames[rng.below(frames.len() as u64) as usize];
        let args = CtArgs {
            zone: rng.below(2) as u16,
            commit: rng.below(2) == 0,
            force: rng.below(50) == 0,
            mark: Some((id as u32, 0xff)),
            ..Default::default()
        };
        let mut md = CtMeta::default();
        ct.process(cache, &packet(f), &mut md, &args, now);
        assert!(md.state & TRK != 0);
    });
    let now = 10_000;
    assert_counts(&ct, now);
    assert!(ct.n_conns() > 0);
    ct.flush(None, None);
    assert_eq!(
        (ct.n_conns(), ct.zone_conns(0), ct.zone_conns(1)),
        (0, 0, 0)
    );
    assert!(ct.dump(None, now).is_empty());
}

/// The same with short timeouts and time running, so that connections expire under the
/// threads' feet and get recommitted, swept, flushed: at the end, after everything expired,
/// every count is back to zero.
#[test]
fn concurrent_with_expiry_no_leak() {
    let ct = Arc::new(Conntrack::new());
    ct.set_timeouts(
        None,
        &[
            (TimeoutClass::UdpFirst, 1),
            (TimeoutClass::UdpSingle, 1),
            (TimeoutClass::UdpMultiple, 1),
            (TimeoutClass::IcmpFirst, 1),
            (TimeoutClass::IcmpReply, 1),
            (TimeoutClass::TcpSynSent, 1),
        ],
    );
    let seed = |id| 0x2545_f491_4f6c_dd1d ^ ((id + 7) * 0x9876_5431);
    on_4_threads(&ct, seed, |ct, cache, rng, id, i, frames| {
        let now = i / 4;
        if id == 3 && i % 100 == 0 {
            ct.sweep(now);
            return;
        }
        let f = &frames[rng.below(frames.len() as u64) as usize];
        let mut md = CtMeta::default();
        let args = commit(rng.below(2) as u16);
        ct.process(cache, &packet(f), &mut md, &args, now);
    });
    ct.sweep(1_000_000);
    assert_eq!(
        (ct.n_conns(), ct.zone_conns(0), ct.zone_conns(1)),
        (0, 0, 0)
    );
}

/// Commits of a tuple and of its reverse race (each is the other's reply key, so one of the two
/// fails its second insert) while a third thread flushes. A connection that the flush removes
/// between its two inserts is counted out twice: once by `remove` (flush), once by the
/// `release` after the failed insert in `new_conn`; `n_conns` then ends below what `dump`
/// shows (and can wrap below zero).
#[test]
fn concurrent_commit_flush_race_counts() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let pairs: Arc<Vec<(Vec<u8>, Vec<u8>)>> = Arc::new(
        (0..64u16)
            .map(|i| {
                let s = ip(&format!("10.6.0.{i}"));
                (
                    build(s, b(), &udp(7000 + i, 53, b"q")),
                    build(b(), s, &udp(53, 7000 + i, b"r")),
                )
            })
            .collect(),
    );
    let mut bad = Vec::new();
    for round in 0..30 {
        let ct = Arc::new(Conntrack::new());
        let stop = Arc::new(AtomicBool::new(false));
        let flusher = {
            let (ct, stop) = (ct.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    ct.flush(None, None);
                }
            })
        };
        let committers: Vec<_> = (0..2)
            .map(|side| {
                let (ct, pairs) = (ct.clone(), pairs.clone());
                std::thread::spawn(move || {
                    let mut cache = CtCache::new();
                    for _ in 0..40 {
                        for (o, r) in pairs.iter() {
                            let f = if side == 0 { o } else { r };
                            let mut md = CtMeta::default();
                            ct.process(&mut cache, &packet(f), &mut md, &commit(0), 0);
                        }
                    }
                })
            })
            .collect();
        for c in committers {
            c.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        flusher.join().unwrap();
        ct.sweep(0);
        let shown = ct.dump(None, 0).len();
        if ct.n_conns() as usize != shown {
            bad.push((round, ct.n_conns(), shown));
        }
    }
    assert!(bad.is_empty(), "(round, n_conns, dump): {bad:?}");
}

/// Limits hold under concurrent commits of distinct tuples: exactly the limit gets in.
#[test]
fn concurrent_zone_limit_is_exact() {
    let ct = Arc::new(Conntrack::new());
    ct.set_zone_limit(3, 50);
    let threads: Vec<_> = (0..4u32)
        .map(|id| {
            let ct = ct.clone();
            std::thread::spawn(move || {
                let mut cache = CtCache::new();
                for i in 0..100 {
                    let f = udp_from(id * 1000 + i);
                    let mut md = CtMeta::default();
                    ct.process(&mut cache, &packet(&f), &mut md, &commit(3), 0);
                    assert_state!(md.state, TRK | NEW);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(ct.zone_conns(3), 50);
    assert_eq!(ct.dump(Some(3), 0).len(), 50);
    assert_eq!(ct.stats().limit_refused, 350);
}

/// Concurrent commits of the same tuples: one connection per tuple, whoever wins.
#[test]
fn concurrent_same_tuple_commits_one_connection_each() {
    let ct = Arc::new(Conntrack::new());
    let frames: Arc<Vec<Vec<u8>>> = Arc::new((0..200).map(udp_from).collect());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let ct = ct.clone();
            let frames = frames.clone();
            std::thread::spawn(move || {
                let mut cache = CtCache::new();
                for f in frames.iter() {
                    let mut md = CtMeta::default();
                    ct.process(&mut cache, &packet(f), &mut md, &commit(0), 0);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(ct.n_conns(), 200);
    assert_eq!(ct.dump(None, 0).len(), 200);
    let s = ct.stats();
    assert_eq!(s.committed, 200);
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

/// Valid packets of every kind, for mutation.
fn seeds() -> Vec<Vec<u8>> {
    let mut v = vec![
        udp_ab(),
        build(
            a(),
            b(),
            &tcp_opts(1111, 2222, "S", 1000, 0, 8192, &SYN_OPTS, &[]),
        ),
        build(a(), b(), &echo(8, 1, 1)),
        build(b(), a(), &icmp_err(3, 3, &quote(&udp_ab(), 8))),
        build(
            b(),
            a(),
            &icmp_err(3, 4, &quote(&build(a(), b(), &tcp(1, 2, "A", 1, 1, 1)), 20)),
        ),
        build(a6(), b6(), &udp(1, 2, b"abc")),
        build(
            b6(),
            a6(),
            &icmp_err(1, 4, &quote(&build(a6(), b6(), &udp(1, 2, b"abc")), 11)),
        ),
        build_with(
            a6(),
            b6(),
            &tcp(1, 2, "S", 1, 0, 1),
            &opt(|o| o.exts = vec![hbh(), routing(), frag6(0, false)]),
        ),
        build_with(
            a(),
            b(),
            &udp(1, 2, b""),
            &opt(|o| o.ip_opts = vec![1, 1, 1, 0]),
        ),
    ];
    v.push(build(b6(), a6(), &icmp_err(1, 4, &quote(&v[6], 60))));
    v
}

fn nat_strategy() -> impl Strategy<Value = Option<NatSpec>> {
    prop_oneof![
        Just(None),
        Just(Some(nat_only())),
        Just(Some(snat("10.1.1.100", "10.1.1.101", 20000, 20001))),
        Just(Some(dnat("10.1.1.2", "10.1.1.2", 0, 0))),
        Just(Some(snat("fc00::100", "fc00::100", 0, 0))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random bytes at random offsets never panic `process` (nor `process_batch`).
    #[test]
    fn random_frames_never_panic(
        frame in proptest::collection::vec(any::<u8>(), 0..160),
        l3 in 0usize..200,
        v6 in any::<bool>(),
        frag in proptest::option::of(0usize..70_000),
        verified in any::<bool>(),
        commit in any::<bool>(),
        nat in nat_strategy(),
    ) {
        let ct = Conntrack::new();
        let mut cache = CtCache::new();
        let pkt = CtPacket { frame: &frame, l3, v6, frag_l4_len: frag, verified, natted: false };
        let args = CtArgs { commit, nat, zone: 1, ..Default::default() };
        let mut md = CtMeta::default();
        ct.process(&mut cache, &pkt, &mut md, &args, 0);
        prop_assert!(md.state & TRK != 0);
        let mut out = [(CtMeta::default(), None)];
        ct.process_batch(&mut cache, &[pkt], &mut out, &args, 1);
    }

    /// Valid packets with a few bytes changed, through a table that has their connections:
    /// never a panic, and an invalid packet carries no mark.
    #[test]
    fn mutated_packets_never_panic(
        which in 0usize..10,
        edits in proptest::collection::vec((0usize..200, any::<u8>()), 1..6),
        cut in 0usize..40,
        verified in any::<bool>(),
        nat in nat_strategy(),
    ) {
        let seeds = seeds();
        let ct = Conntrack::new();
        let mut cache = CtCache::new();
        for s in &seeds {
            let mut md = CtMeta::default();
            let args = CtArgs { commit: true, mark: Some((5, u32::MAX)), nat, ..Default::default() };
            ct.process(&mut cache, &packet_any2(s), &mut md, &args, 0);
        }
        let mut f = seeds[which].clone();
        for (at, v) in edits {
            if !f.is_empty() {
                let n = f.len();
                f[at % n] = v;
            }
        }
        f.truncate(f.len().saturating_sub(cut));
        let v6 = seeds[which][ETH] >> 4 == 6;
        let pkt = CtPacket { frame: &f, l3: ETH, v6, frag_l4_len: None, verified, natted: false };
        let mut md = CtMeta::default();
        ct.process(&mut cache, &pkt, &mut md, &CtArgs { commit: true, nat, ..Default::default() }, 1);
        if md.state & INV != 0 {
            prop_assert_eq!((md.mark, md.label), (0, 0));
        }
    }

    /// Random single-threaded operations over a few flows and a moving clock: after a final
    /// sweep, the counts always equal what `dump` shows.
    #[test]
    fn counts_match_dump(ops in proptest::collection::vec((0u8..6, 0usize..8, 0u64..40_000), 1..60)) {
        let ct = Conntrack::new();
        ct.set_timeouts(None, &[(TimeoutClass::UdpFirst, 10), (TimeoutClass::UdpSingle, 10), (TimeoutClass::UdpMultiple, 5)]);
        let mut cache = CtCache::new();
        let flows: Vec<(Vec<u8>, Vec<u8>)> = (0..4u16)
            .map(|i| (build(a(), b(), &udp(100 + i, 53, b"q")), build(b(), a(), &udp(53, 100 + i, b"r"))))
            .collect();
        let mut now = 0;
        for (op, f, dt) in ops {
            now += dt;
            let (o, r) = &flows[f % 4];
            let zone = (f / 4) as u16;
            let mut md = CtMeta::default();
            match op {
                0 | 1 => { ct.process(&mut cache, &packet(o), &mut md, &commit(zone), now); }
                2 => { ct.process(&mut cache, &packet(r), &mut md, &track(zone), now); }
                3 => { ct.process(&mut cache, &packet(r), &mut md, &CtArgs { force: true, ..commit(zone) }, now); }
                4 => { ct.sweep(now); }
                _ => { ct.flush(Some(zone), None); }
            }
        }
        ct.sweep(now);
        prop_assert_eq!(ct.n_conns() as usize, ct.dump(None, now).len());
        ct.sweep(now + 1_000_000);
        prop_assert_eq!((ct.n_conns(), ct.zone_conns(0), ct.zone_conns(1)), (0, 0, 0));
    }
}

fn packet_any2(f: &[u8]) -> CtPacket<'_> {
    CtPacket {
        v6: f[ETH] >> 4 == 6,
        ..packet_any(f)
    }
}

// ---------------------------------------------------------------------------------------------
// Expiry queues and the PMD's connection pool
// ---------------------------------------------------------------------------------------------

impl Ct {
    /// Runs `frames` as one burst, the PMD's way.
    fn batch(&mut self, frames: &[Vec<u8>], args: &CtArgs, now: u64) -> Vec<CtMeta> {
        let pkts: Vec<CtPacket<'_>> = frames.iter().map(|f| packet(f)).collect();
        let mut out = vec![(CtMeta::default(), None); pkts.len()];
        self.ct
            .process_batch(&mut self.cache, &pkts, &mut out, args, now);
        out.into_iter().map(|(md, _)| md).collect()
    }
}

/// A PMD expires its own connections as its bursts go (no sweep): one that expired is counted
/// out by the next burst, once, and a later sweep finds nothing left.
#[test]
fn process_batch_expires_its_own_connections() {
    let mut t = Ct::new();
    t.batch(&[udp_from(1), udp_from(2)], &commit(0), 0);
    assert_eq!(t.ct.n_conns(), 2);
    // Refreshed at 30 s: lives until 90 s; the other one until 60 s.
    t.batch(&[udp_from(1)], &commit(0), 30 * SEC);
    t.batch(&[udp_from(3)], &commit(0), 60 * SEC);
    assert_eq!((t.ct.n_conns(), t.ct.stats().expired), (2, 1));
    assert_eq!(t.dump(60 * SEC).len(), 2);
    t.batch(&[udp_from(3)], &commit(0), 90 * SEC);
    assert_eq!((t.ct.n_conns(), t.ct.stats().expired), (1, 2));
    assert_eq!(t.ct.sweep(90 * SEC), 0, "nothing left to sweep");
    assert_counts(&t.ct, 90 * SEC);
    assert_eq!(t.ct.sweep(1000 * SEC), 1);
    assert_eq!(t.ct.n_conns(), 0);
}

/// A connection reused from the PMD's pool starts clean: no mark, label or TCP state of the
/// connection it was, and the old one's tuples are gone from the table.
#[test]
fn reused_connection_starts_clean() {
    let mut t = Ct::new();
    t.ct.set_timeouts(Some(0), &[(TimeoutClass::UdpFirst, 1)]);
    let marked = CtArgs {
        mark: Some((7, u32::MAX)),
        label: Some((9, u128::MAX)),
        ..commit(0)
    };
    let md = t.batch(&[udp_ab()], &marked, 0);
    assert_eq!((md[0].mark, md[0].label), (7, 9));
    // Expired by this burst's PMD, then set up again (from the pool) for another tuple.
    t.batch(&[udp_from(5)], &track(0), 2 * SEC);
    assert_eq!(t.ct.stats().expired, 1);
    let md = t.batch(&[udp_from(5)], &commit(0), 2 * SEC);
    assert_eq!((md[0].state, md[0].mark, md[0].label), (TRK | NEW, 0, 0));
    let d = t.dump(2 * SEC);
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].mark, d[0].label), (0, 0));
    assert_state!(
        t.st(&udp_ba(), &track(0), 2 * SEC),
        TRK | NEW,
        "old reply key gone"
    );
    assert_state!(t.st(&udp_from(5), &track(0), 2 * SEC), TRK | NEW);
    assert_eq!(t.dump(2 * SEC)[0].id, d[0].id);
}

/// A connection whose timeout got shorter (a UDP reply: 60 s to 30 s) is counted out at its
/// new expiry, not at the old one, by the PMD as by a sweep.
#[test]
fn shorter_timeout_expires_on_time() {
    let mut t = Ct::new();
    t.batch(&[udp_ab()], &commit(0), 0);
    t.batch(&[udp_ba()], &track(0), 10 * SEC);
    t.batch(&[udp_from(9)], &track(0), 40 * SEC - 1);
    assert_eq!(t.ct.n_conns(), 1);
    t.batch(&[udp_from(9)], &track(0), 40 * SEC);
    assert_eq!((t.ct.n_conns(), t.ct.stats().expired), (0, 1));
}

/// Many connections of one timeout, some refreshed in the reverse order of their setup (so
/// they are queued again out of order): each is counted out once, when it expires, whether
/// the PMD or the sweep gets to it.
#[test]
fn expiry_queue_counts_each_connection_once() {
    let mut t = Ct::new();
    for i in 0..180u32 {
        t.batch(&[udp_from(i)], &commit(0), u64::from(i) * 10);
    }
    // Every third refreshed at 20 s, the last first: alive until 80 s + 180 - i ms.
    for i in (0..180u32).step_by(3).rev() {
        t.batch(&[udp_from(i)], &commit(0), 20 * SEC + u64::from(180 - i));
    }
    assert_eq!(t.ct.n_conns(), 180);
    assert_eq!(t.ct.sweep(62 * SEC), 120);
    assert_eq!(t.ct.n_conns(), 60);
    // Those with i >= 90 are due at 80 s + 90 ms.
    t.batch(&[], &track(0), 80 * SEC + 90);
    assert_eq!(t.ct.n_conns(), 30);
    assert_eq!(t.ct.sweep(80 * SEC + 90), 0);
    assert_counts(&t.ct, 80 * SEC + 90);
    assert_eq!(t.ct.sweep(80 * SEC + 180), 30);
    assert_eq!(t.ct.n_conns(), 0);
    assert_eq!(t.ct.stats().expired, 180);
}

/// `ct(commit,nat(src))` with no address (OVS's all-zero SNAT, `ct_zero_snat`): the
/// connection keeps its address and port, and is moved to another port only when its reply
/// tuple is already a connection's, as after a load balancer's DNAT to the same backend.
#[test]
fn zero_snat_moves_the_port_only_on_a_collision() {
    let mut t = Ct::new();
    let zero = NatSpec {
        kind: Some(NatKind::Src),
        ..NatSpec::default()
    };
    // Nothing collides: address and port kept, the connection is +snat.
    let f = build(a(), b(), &udp(5000, 80, b"q"));
    let (md, rw) = t.run(&f, &with_nat(commit(5), zero), 0);
    assert_state!(md.state, TRK | NEW | SNAT);
    assert!(
        rw.is_none_or(|r| r.src.is_none_or(|s| s == (a().key(), 5000))),
        "{rw:?}"
    );
    // A DNAT to 10.9.9.9:80 from 10.1.1.1:6000 takes the reply tuple 10.9.9.9:80 -> :6000.
    let vip = build(ip("10.1.1.1"), ip("172.16.0.100"), &udp(6000, 80, b"q"));
    let (_, rw) = t.run(
        &vip,
        &with_nat(commit(5), dnat("10.9.9.9", "10.9.9.9", 80, 80)),
        1,
    );
    assert_eq!(rw.unwrap().dst, Some((ip("10.9.9.9").key(), 80)));
    // The same client straight to the backend would have that reply tuple too: it moves.
    let direct = build(ip("10.1.1.1"), ip("10.9.9.9"), &udp(6000, 80, b"q"));
    let (md, rw) = t.run(&direct, &with_nat(commit(5), zero), 2);
    assert_state!(md.state, TRK | NEW | SNAT);
    let (addr, port) = rw.unwrap().src.unwrap();
    assert_eq!(addr, ip("10.1.1.1").key());
    assert_ne!(port, 6000);
}
