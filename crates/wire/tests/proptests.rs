//! Property tests: for every header, random `Repr` → `emit` → `parse` gives the same `Repr` and
//! re-emitting gives identical bytes; arbitrary bytes never make a checked view, its getters, its
//! iterators or `Repr::parse` panic; incremental checksum updates (RFC 1624) equal a full
//! recomputation.

use proptest::prelude::*;
use wire::checksum;
use wire::geneve::{GeneveOptionIter, GeneveOptions};
use wire::ipv4::Ipv4Options;
use wire::ipv6::{Ipv6ExtHeader, Ipv6FragmentHeader, Ipv6FragmentRepr, walk_ext_headers};
use wire::tcp::{SackBlocks, TcpOptions};
use wire::*;

fn mac() -> impl Strategy<Value = EthernetAddress> {
    any::<[u8; 6]>().prop_map(EthernetAddress)
}

fn v4() -> impl Strategy<Value = Ipv4Addr> {
    any::<u32>().prop_map(Ipv4Addr::from)
}

fn v6() -> impl Strategy<Value = Ipv6Addr> {
    any::<u128>().prop_map(Ipv6Addr::from)
}

/// Emits `repr` into a zeroed buffer of `len` bytes (header plus whatever payload the length
/// fields promise), parses it back, and re-emits into a buffer full of junk.
macro_rules! round_trip {
    ($repr:expr, $len:expr, $view:ident, $repr_ty:ident) => {{
        let repr = $repr;
        let len = $len;
        let mut buf = vec![0u8; len];
        repr.emit(&mut $view::new_unchecked(&mut buf[..]));
        let view = $view::new_checked(&buf[..]).expect("emitted header must check");
        let parsed = $repr_ty::parse(&view).expect("emitted header must parse");
        prop_assert_eq!(parsed, repr);
        let mut again = vec![0x5au8; len];
        again[repr.buffer_len()..].copy_from_slice(&buf[repr.buffer_len()..]);
        parsed.emit(&mut $view::new_unchecked(&mut again[..]));
        prop_assert_eq!(&again[..repr.buffer_len()], &buf[..repr.buffer_len()]);
    }};
}

/// Well-formed IPv4 options: NOPs, router alert, record-route-like TLVs, padded with END.
fn ipv4_options() -> impl Strategy<Value = Ipv4Options> {
    let opt = prop_oneof![
        Just(vec![1u8]),
        Just(vec![148u8, 4, 0, 0]),
        (3usize..=11).prop_flat_map(|n| proptest::collection::vec(any::<u8>(), n).prop_map(
            move |d| {
                let mut v = vec![7u8, (d.len() + 2) as u8];
                v.extend(d);
                v
            }
        )),
    ];
    proptest::collection::vec(opt, 0..4).prop_map(|opts| {
        let mut o = Ipv4Options::new();
        for x in opts {
            let _ = o.push(&x);
        }
        // At most 40 bytes fit, and 40 is a multiple of four, so padding always fits.
        o.pad_to_4().unwrap();
        o
    })
}

fn tcp_options() -> impl Strategy<Value = TcpOptions> {
    let opt = prop_oneof![
        Just(vec![1u8]),
        any::<u16>().prop_map(|m| vec![2, 4, (m >> 8) as u8, m as u8]),
        (0u8..15).prop_map(|s| vec![3, 3, s]),
        Just(vec![4u8, 2]),
        (any::<u32>(), any::<u32>()).prop_map(|(a, b)| {
            let mut v = vec![8u8, 10];
            v.extend(a.to_be_bytes());
            v.extend(b.to_be_bytes());
            v
        }),
        proptest::collection::vec(any::<u8>(), 8..=24).prop_map(|d| {
            let blocks = d.len() / 8 * 8;
            let mut v = vec![5u8, 2 + blocks as u8];
            v.extend(&d[..blocks]);
            v
        }),
    ];
    proptest::collection::vec(opt, 0..5).prop_map(|opts| {
        let mut o = TcpOptions::new();
        for x in opts {
            if o.len() + x.len() <= 36 {
                o.push(&x).unwrap();
            }
        }
        o.pad_to_4().unwrap();
        o
    })
}

fn geneve_options() -> impl Strategy<Value = GeneveOptions> {
    let opt = (
        any::<u16>(),
        any::<u8>(),
        0u8..8,
        proptest::collection::vec(any::<u8>(), 0..=31usize),
    )
        .prop_map(|(c, t, r, words)| {
            (
                c,
                t,
                r,
                words.iter().flat_map(|w| [*w; 4]).collect::<Vec<u8>>(),
            )
        });
    proptest::collection::vec(opt, 0..6).prop_map(|opts| {
        let mut o = GeneveOptions::new();
        for (class, option_type, reserved, data) in opts {
            let _ = GeneveOption {
                class,
                option_type,
                reserved,
                data: &data,
            }
            .push_to(&mut o);
        }
        o
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn ethernet_round_trip(src in mac(), dst in mac(), et in any::<u16>()) {
        round_trip!(EthernetRepr { src_addr: src, dst_addr: dst, ethertype: EtherType(et) }, 14, EthernetFrame, EthernetRepr);
    }

    #[test]
    fn vlan_round_trip(pcp in 0u8..8, dei in any::<bool>(), vid in 0u16..4096, et in any::<u16>()) {
        round_trip!(VlanRepr { pcp, dei, vid, ethertype: EtherType(et) }, 4, VlanTag, VlanRepr);
    }

    #[test]
    fn mpls_round_trip(label in 0u32..=0xfffff, tc in 0u8..8, bottom_of_stack in any::<bool>(), ttl in any::<u8>()) {
        round_trip!(MplsRepr { label, tc, bottom_of_stack, ttl }, 4, MplsEntry, MplsRepr);
    }

    #[test]
    fn arp_round_trip(op in any::<u16>(), sha in mac(), spa in v4(), tha in mac(), tpa in v4()) {
        let r = ArpRepr { operation: ArpOperation(op), source_hardware_addr: sha, source_protocol_addr: spa, target_hardware_addr: tha, target_protocol_addr: tpa };
        round_trip!(r, 28, ArpPacket, ArpRepr);
    }

    #[test]
    fn ipv4_round_trip(
        (src, dst, proto, payload_len, ttl) in (v4(), v4(), any::<u8>(), 0usize..1400, any::<u8>()),
        (dscp, ecn, ident, df, mf, off) in (0u8..64, 0u8..4, any::<u16>(), any::<bool>(), any::<bool>(), 0u16..8192),
        options in ipv4_options(),
    ) {
        let r = Ipv4Repr { src_addr: src, dst_addr: dst, protocol: IpProtocol(proto), payload_len, ttl, dscp, ecn, ident, dont_frag: df, more_frags: mf, frag_offset: off, options };
        round_trip!(r, r.buffer_len() + payload_len, Ipv4Packet, Ipv4Repr);
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
        prop_assert!(Ipv4Packet::new_unchecked(&buf[..]).verify_checksum());
    }

    #[test]
    fn ipv6_round_trip(src in v6(), dst in v6(), nh in any::<u8>(), payload_len in 0usize..1400, hop_limit in any::<u8>(), traffic_class in any::<u8>(), flow_label in 0u32..0x100000) {
        let r = Ipv6Repr { src_addr: src, dst_addr: dst, next_header: IpProtocol(nh), payload_len, hop_limit, traffic_class, flow_label };
        round_trip!(r, 40 + payload_len, Ipv6Packet, Ipv6Repr);
    }

    #[test]
    fn ipv6_ext_round_trip(nh in any::<u8>(), words in 0usize..32, fill in any::<u8>()) {
        let data = vec![fill; 6 + words * 8];
        let r = Ipv6ExtHeaderRepr { next_header: IpProtocol(nh), data: &data };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut Ipv6ExtHeader::new_unchecked(&mut buf[..]));
        let h = Ipv6ExtHeader::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(Ipv6ExtHeaderRepr::parse(&h).unwrap(), r);
    }

    #[test]
    fn ipv6_fragment_round_trip(nh in any::<u8>(), off in 0u16..8192, m in any::<bool>(), ident in any::<u32>()) {
        round_trip!(Ipv6FragmentRepr { next_header: IpProtocol(nh), frag_offset: off, more_frags: m, ident }, 8, Ipv6FragmentHeader, Ipv6FragmentRepr);
    }

    #[test]
    fn icmpv4_round_trip(kind in 0u8..5, a in any::<u16>(), b in any::<u16>(), code in 0u8..16, t in any::<u8>(), rest in any::<[u8; 4]>()) {
        let r = match kind {
            0 => Icmpv4Repr::EchoRequest { ident: a, seq_no: b },
            1 => Icmpv4Repr::EchoReply { ident: a, seq_no: b },
            2 => Icmpv4Repr::DstUnreachable { code, next_hop_mtu: b },
            3 => Icmpv4Repr::TimeExceeded { code: code & 1 },
            // Types with a meaning of their own are excluded: they parse to their variant.
            _ => Icmpv4Repr::Other { msg_type: if matches!(t, 0 | 3 | 8 | 11) { 42 } else { t }, code, rest },
        };
        round_trip!(r, 8, Icmpv4Packet, Icmpv4Repr);
    }

    #[test]
    fn icmpv6_round_trip(kind in 0u8..5, a in any::<u16>(), b in any::<u16>(), tgt in v6(), ll in proptest::option::of(mac()), flags in any::<[bool; 3]>(), t in any::<u8>(), rest in any::<[u8; 4]>()) {
        let r = match kind {
            0 => Icmpv6Repr::EchoRequest { ident: a, seq_no: b },
            1 => Icmpv6Repr::EchoReply { ident: a, seq_no: b },
            2 => Icmpv6Repr::NeighborSolicit { target_addr: tgt, source_lladdr: ll },
            3 => Icmpv6Repr::NeighborAdvert { router: flags[0], solicited: flags[1], override_: flags[2], target_addr: tgt, target_lladdr: ll },
            _ => Icmpv6Repr::Other { msg_type: if matches!(t, 128 | 129 | 135 | 136) { 1 } else { t }, code: 0, rest },
        };
        round_trip!(r, r.buffer_len(), Icmpv6Packet, Icmpv6Repr);
    }

    #[test]
    fn tcp_round_trip(
        (sp, dp, seq, ack, flags) in (any::<u16>(), any::<u16>(), any::<u32>(), any::<u32>(), 0u16..0x200),
        (win, urg) in (any::<u16>(), any::<u16>()),
        options in tcp_options(),
    ) {
        let r = TcpRepr { src_port: sp, dst_port: dp, seq_number: seq, ack_number: ack, flags: TcpFlags::from_bits_truncate(flags), window_len: win, urgent_at: urg, options };
        round_trip!(r, r.buffer_len() + 3, TcpPacket, TcpRepr);
    }

    #[test]
    fn udp_round_trip(sp in any::<u16>(), dp in any::<u16>(), n in 0usize..1500) {
        round_trip!(UdpRepr { src_port: sp, dst_port: dp, payload_len: n }, 8 + n, UdpPacket, UdpRepr);
    }

    #[test]
    fn sctp_round_trip(sp in any::<u16>(), dp in any::<u16>(), tag in any::<u32>()) {
        round_trip!(SctpRepr { src_port: sp, dst_port: dp, verification_tag: tag }, 12, SctpPacket, SctpRepr);
    }

    #[test]
    fn gre_round_trip(et in any::<u16>(), c in any::<bool>(), key in proptest::option::of(any::<u32>()), seq in proptest::option::of(any::<u32>())) {
        let r = GreRepr { protocol_type: EtherType(et), checksum_present: c, key, sequence: seq };
        round_trip!(r, r.buffer_len(), GrePacket, GreRepr);
    }

    #[test]
    fn vxlan_round_trip(vni in 0u32..0x100_0000, gbp in proptest::option::of((any::<bool>(), any::<bool>(), any::<u16>()))) {
        let gbp = gbp.map(|(d, a, id)| VxlanGbp { dont_learn: d, policy_applied: a, group_policy_id: id });
        round_trip!(VxlanRepr { vni, gbp }, 8, VxlanPacket, VxlanRepr);
    }

    #[test]
    fn geneve_round_trip(oam in any::<bool>(), critical in any::<bool>(), et in any::<u16>(), vni in 0u32..0x100_0000, options in geneve_options()) {
        let r = GeneveRepr { oam, critical, protocol_type: EtherType(et), vni, options };
        round_trip!(r, r.buffer_len(), GenevePacket, GeneveRepr);
        prop_assert!(GeneveOptionIter::new(r.options.as_slice()).all(|o| o.is_ok()));
    }

    /// No input makes a checked view, its getters, its iterators, or a parse panic.
    #[test]
    fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..320)) {
        poke_all(&b);
        // The same bytes behind headers that steer into each variant.
        for first in [0x45u8, 0x46, 0x4f, 0x60, 0x02, 0x3f, 0x80, 0xb0, 135, 136] {
            let mut c = b.clone();
            if let Some(x) = c.first_mut() { *x = first; }
            poke_all(&c);
        }
    }

    #[test]
    fn checksum_sum_equals_naive(b in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut acc: u32 = 0;
        for w in b.chunks(2) {
            acc += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
            acc = (acc & 0xffff) + (acc >> 16);
        }
        prop_assert_eq!(checksum::data(&b), acc as u16);
    }

    #[test]
    fn crc32c_equals_bitwise(b in proptest::collection::vec(any::<u8>(), 0..300), split in any::<prop::sample::Index>()) {
        let mut crc = !0u32;
        for &x in &b {
            crc ^= u32::from(x);
            for _ in 0..8 { crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82f6_3b78 } else { crc >> 1 }; }
        }
        prop_assert_eq!(checksum::crc32c(&b), !crc);
        let k = split.index(b.len() + 1);
        let mut s = checksum::Crc32c::new();
        s.update(&b[..k]);
        s.update(&b[k..]);
        prop_assert_eq!(s.finish(), !crc);
    }

    /// RFC 1624: a 16- or 32-bit field of an IPv4 header changes; the incremental update of the
    /// header checksum equals a full recomputation.
    #[test]
    fn incremental_ipv4_header(
        (src, dst, proto, ttl, ident) in (v4(), v4(), any::<u8>(), any::<u8>(), any::<u16>()),
        options in ipv4_options(),
        word in 0usize..10,
        new16 in any::<u16>(),
        new32 in any::<u32>(),
        wide in any::<bool>(),
    ) {
        let r = Ipv4Repr { src_addr: src, dst_addr: dst, protocol: IpProtocol(proto), payload_len: 0, ttl, dscp: 0, ecn: 0, ident, dont_frag: false, more_frags: false, frag_offset: 0, options };
        let mut h = vec![0u8; r.buffer_len()];
        r.emit(&mut Ipv4Packet::new_unchecked(&mut h[..]));
        let hc = Ipv4Packet::new_unchecked(&h[..]).checksum();
        // Any 16-bit word except the checksum itself (word 5), or a 32-bit word (addresses,
        // ident+flags, …) not overlapping it; byte 0 stays non-zero (version 4), so the full sum
        // is never the all-zero case where ±0 could differ.
        let inc = if wide {
            let at = [4usize, 12, 16][word % 3];
            let old = u32::from_be_bytes(h[at..at + 4].try_into().unwrap());
            h[at..at + 4].copy_from_slice(&new32.to_be_bytes());
            checksum::update32(hc, old, new32)
        } else {
            let at = [2usize, 4, 6, 8, 12, 14, 16, 18, 2, 8][word];
            let old = u16::from_be_bytes([h[at], h[at + 1]]);
            h[at..at + 2].copy_from_slice(&new16.to_be_bytes());
            checksum::update16(hc, old, new16)
        };
        let mut p = Ipv4Packet::new_unchecked(&mut h[..]);
        p.fill_checksum();
        prop_assert_eq!(inc, p.checksum());
    }

    /// RFC 1624 on TCP over IPv4 (ports, sequence numbers and pseudo-header addresses, as NAT
    /// rewrites them) and on UDP over IPv6 (a whole address via `update_bytes`).
    #[test]
    fn incremental_l4(
        (src, dst, sp, seq) in (v4(), v4(), any::<u16>(), any::<u32>()),
        payload in proptest::collection::vec(any::<u8>(), 0..200),
        (new_src, new_sp, new_seq) in (v4(), any::<u16>(), any::<u32>()),
        (s6, d6, new6) in (v6(), v6(), v6()),
    ) {
        let r = TcpRepr { src_port: sp, dst_port: 80, seq_number: seq, ack_number: 0, flags: TcpFlags::ACK, window_len: 100, urgent_at: 0, options: TcpOptions::new() };
        let mut seg = vec![0u8; 20 + payload.len()];
        seg[20..].copy_from_slice(&payload);
        let mut t = TcpPacket::new_unchecked(&mut seg[..]);
        r.emit(&mut t);
        t.fill_checksum_v4(&src, &dst);
        let mut c = t.checksum();
        c = checksum::update32(c, src.to_bits(), new_src.to_bits());
        c = checksum::update16(c, sp, new_sp);
        c = checksum::update32(c, seq, new_seq);
        t.set_src_port(new_sp);
        t.set_seq_number(new_seq);
        t.fill_checksum_v4(&new_src, &dst);
        prop_assert_eq!(c, t.checksum());

        let mut dg = vec![0u8; 8 + payload.len()];
        dg[8..].copy_from_slice(&payload);
        let mut u = UdpPacket::new_unchecked(&mut dg[..]);
        UdpRepr { src_port: sp, dst_port: 4789, payload_len: payload.len() }.emit(&mut u);
        u.fill_checksum_v6(&s6, &d6);
        let c = checksum::update_bytes(u.checksum(), &s6.octets(), &new6.octets());
        u.fill_checksum_v6(&new6, &d6);
        // UDP sends a computed 0x0000 as 0xffff; the incremental form yields the 0x0000 form.
        prop_assert_eq!(if c == 0 { 0xffff } else { c }, u.checksum());
        prop_assert!(u.verify_checksum_v6(&new6, &d6));
    }
}

/// Views `b` as every header and touches every getter, iterator and parse.
fn poke_all(b: &[u8]) {
    if let Ok(f) = EthernetFrame::new_checked(b) {
        let _ = (f.src_addr(), f.dst_addr(), f.ethertype(), f.payload());
        let _ = EthernetRepr::parse(&f);
    }
    if let Ok(t) = VlanTag::new_checked(b) {
        let _ = (
            t.pcp(),
            t.dei(),
            t.vid(),
            t.ethertype(),
            t.payload(),
            VlanRepr::parse(&t),
        );
    }
    if let Ok(m) = MplsEntry::new_checked(b) {
        let _ = (
            m.label(),
            m.tc(),
            m.bottom_of_stack(),
            m.ttl(),
            m.payload(),
            MplsRepr::parse(&m),
        );
    }
    let _ = wire::mpls::stack_len(b);
    if let Ok(a) = ArpPacket::new_checked(b) {
        let _ = (
            a.hardware_type(),
            a.protocol_type(),
            a.operation(),
            a.packet_len(),
        );
        let _ = (
            a.source_hardware_addr(),
            a.source_protocol_addr(),
            a.target_hardware_addr(),
            a.target_protocol_addr(),
        );
        let _ = ArpRepr::parse(&a);
    }
    if let Ok(p) = Ipv4Packet::new_checked(b) {
        let _ = (
            p.version(),
            p.header_len(),
            p.dscp(),
            p.ecn(),
            p.total_len(),
            p.ident(),
        );
        let _ = (
            p.dont_frag(),
            p.more_frags(),
            p.frag_offset(),
            p.is_fragment(),
            p.ttl(),
            p.protocol(),
        );
        let _ = (
            p.checksum(),
            p.src_addr(),
            p.dst_addr(),
            p.options(),
            p.verify_checksum(),
            p.payload(),
        );
        let _ = p.options_iter().count();
        let _ = Ipv4Repr::parse(&p);
    }
    if let Ok(p) = Ipv6Packet::new_checked(b) {
        let _ = (
            p.traffic_class(),
            p.flow_label(),
            p.payload_len(),
            p.next_header(),
            p.hop_limit(),
        );
        let _ = (
            p.src_addr(),
            p.dst_addr(),
            p.payload(),
            p.ext_chain(),
            Ipv6Repr::parse(&p),
        );
    }
    for nh in [0u8, 43, 44, 60, 6] {
        if let Ok(c) = walk_ext_headers(IpProtocol(nh), b) {
            assert!(c.l4_offset <= b.len());
        }
    }
    if let Ok(h) = Ipv6ExtHeader::new_checked(b) {
        let _ = (
            h.next_header(),
            h.header_len(),
            h.data(),
            h.payload(),
            h.options_iter().count(),
        );
        let _ = Ipv6ExtHeaderRepr::parse(&h);
    }
    if let Ok(h) = Ipv6FragmentHeader::new_checked(b) {
        let _ = (
            h.frag_offset(),
            h.more_frags(),
            h.ident(),
            h.payload(),
            Ipv6FragmentRepr::parse(&h),
        );
    }
    if let Ok(p) = Icmpv4Packet::new_checked(b) {
        let _ = (
            p.msg_type(),
            p.msg_code(),
            p.checksum(),
            p.rest_of_header(),
            p.echo_ident(),
        );
        let _ = (
            p.echo_seq_no(),
            p.next_hop_mtu(),
            p.verify_checksum(),
            p.payload(),
            Icmpv4Repr::parse(&p),
        );
    }
    if let Ok(p) = Icmpv6Packet::new_checked(b) {
        let _ = (
            p.msg_type(),
            p.target_addr(),
            p.nd_options(),
            p.router_flag(),
            p.solicited_flag(),
            p.override_flag(),
        );
        let _ = (
            p.payload(),
            p.nd_options_iter().count(),
            Icmpv6Repr::parse(&p),
        );
        let _ = p.verify_checksum(&Ipv6Addr::LOCALHOST, &Ipv6Addr::LOCALHOST);
        for o in p.nd_options_iter().flatten() {
            let _ = o.lladdr();
        }
    }
    if let Ok(t) = TcpPacket::new_checked(b) {
        let _ = (
            t.src_port(),
            t.dst_port(),
            t.seq_number(),
            t.ack_number(),
            t.header_len(),
            t.flags(),
        );
        let _ = (
            t.window_len(),
            t.checksum(),
            t.urgent_at(),
            t.options(),
            t.payload(),
            t.reserved(),
        );
        let _ = t.verify_checksum_v4(&Ipv4Addr::LOCALHOST, &Ipv4Addr::LOCALHOST);
        for o in t.options_iter().flatten() {
            if let TcpOption::Sack(s) = o {
                let _ = s.iter().count();
            }
        }
        if let Ok(r) = TcpRepr::parse(&t) {
            let _ = (
                r.mss(),
                r.window_scale(),
                r.sack_permitted(),
                r.timestamps(),
            );
        }
    }
    let _ = SackBlocks::new(b).map(|s| s.iter().count());
    if let Ok(u) = UdpPacket::new_checked(b) {
        let _ = (
            u.src_port(),
            u.dst_port(),
            u.len(),
            u.checksum(),
            u.payload(),
            UdpRepr::parse(&u),
        );
        let _ = u.verify_checksum_v6(&Ipv6Addr::LOCALHOST, &Ipv6Addr::LOCALHOST);
    }
    if let Ok(s) = SctpPacket::new_checked(b) {
        let _ = (
            s.src_port(),
            s.verification_tag(),
            s.checksum(),
            s.verify_checksum(),
            s.payload(),
        );
        let _ = (s.chunks().count(), SctpRepr::parse(&s));
    }
    if let Ok(g) = GrePacket::new_checked(b) {
        let _ = (
            g.protocol_type(),
            g.checksum(),
            g.key(),
            g.sequence(),
            g.reserved0(),
            g.payload(),
        );
        let _ = (g.verify_checksum(), GreRepr::parse(&g));
    }
    if let Ok(v) = VxlanPacket::new_checked(b) {
        let _ = (
            v.flags(),
            v.vni(),
            v.dont_learn(),
            v.policy_applied(),
            v.group_policy_id(),
            v.payload(),
        );
        let _ = VxlanRepr::parse(&v);
    }
    if let Ok(g) = GenevePacket::new_checked(b) {
        let _ = (
            g.version(),
            g.options_len(),
            g.oam(),
            g.critical(),
            g.protocol_type(),
            g.vni(),
        );
        let _ = (
            g.options(),
            g.payload(),
            g.options_iter().count(),
            GeneveRepr::parse(&g),
        );
    }
}
