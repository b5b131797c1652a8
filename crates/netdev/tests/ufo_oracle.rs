//! flowpath's UDP fragmentation offload ([`datapath::gso_ufo`]) against Linux's own, byte for
//! byte: the same UFO super-frames (`gso_type` `UDP`, as an older guest or another OS hands
//! them to a device that takes UFO) are sent through a packet socket with `PACKET_VNET_HDR`
//! on a veth without checksum offload, so that the kernel does software UFO
//! (`udp4_ufo_fragment`/`udp6_ufo_fragment`: the UDP checksum of the whole datagram, then IP
//! fragments of `gso_size` bytes), and are captured on the far end; and they are cut by
//! [`UfoSuper::fragment`]. IPv4 (DF set, which fragmenting clears) and IPv6, with and without
//! `NEEDS_CSUM`, a UDP length field that is not the datagram's (Linux leaves it), a short
//! last fragment and none, one datagram that fits `gso_size` (sent whole).
//!
//! One field is normalised: the IPv6 fragment identification, which Linux draws from a keyed
//! hash of the addresses with a per-boot random key (`ipv6_proxy_select_ident`) and flowpath
//! from its own sequence ([`datapath::gso_ufo::next_ipv6_id`]). The test checks that Linux
//! gives every fragment of one super-frame the same identification and then puts
//! flowpath's in its place. Skipped, with the reason, without root, python3 or ethtool.

mod common;

use common::kernel_path::{self, Capture, hex};
use common::{Env, ns_sh};
use datapath::gso_ufo::UfoSuper;
use datapath::packet::{Packet, Pool};
use wire::checksum;

/// One super-frame: the frame, its `gso_size`, whether its header says `NEEDS_CSUM`.
struct Case {
    frame: Vec<u8>,
    size: u16,
    needs_csum: bool,
}

/// A UDP datagram of `payload` bytes to `dst` (IPv4 with DF and identification 0x5a5a, or
/// IPv6), its UDP length field `udp_len_field` (the datagram's length when `None`) and its
/// checksum field the pseudo-header sum of the whole (`needs_csum`, `CHECKSUM_PARTIAL`) or
/// garbage (no checksum asked for).
fn case(
    ipv6: bool,
    payload: usize,
    size: u16,
    needs_csum: bool,
    udp_len_field: Option<u16>,
) -> Case {
    let mut f = vec![0x02, 0, 0, 0, 0x37, 2, 0x02, 0, 0, 0, 0x37, 1];
    let udp_len = (8 + payload) as u16;
    let pseudo = if ipv6 {
        let (src, dst) = (
            "fd00:37::1".parse::<std::net::Ipv6Addr>().unwrap(),
            "fd00:37::2".parse::<std::net::Ipv6Addr>().unwrap(),
        );
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&udp_len.to_be_bytes());
        f.extend_from_slice(&[17, 64]);
        f.extend_from_slice(&src.octets());
        f.extend_from_slice(&dst.octets());
        checksum::pseudo_header_v6(&src, &dst, wire::IpProtocol::UDP, u32::from(udp_len))
    } else {
        let (src, dst) = ([10, 37, 0, 1], [10, 37, 0, 2]);
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
        f.extend_from_slice(&(20 + udp_len).to_be_bytes());
        f.extend_from_slice(&[0x5a, 0x5a, 0x40, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        let c = !checksum::data(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        checksum::pseudo_header_v4(&src.into(), &dst.into(), wire::IpProtocol::UDP, udp_len)
    };
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&5201u16.to_be_bytes());
    f.extend_from_slice(&udp_len_field.unwrap_or(udp_len).to_be_bytes());
    let c = if needs_csum { pseudo } else { 0x1bad };
    f.extend_from_slice(&c.to_be_bytes());
    f.extend((0..payload).map(|i| (i * 29 + 3) as u8));
    Case {
        frame: f,
        size,
        needs_csum,
    }
}

/// The virtio-net header (legacy, 10 bytes) asking for UFO of `c`.
fn ufo_hdr(c: &Case) -> [u8; 10] {
    let l4: u16 = if c.frame[12] == 0x86 { 54 } else { 34 };
    let mut h = [0u8; 10];
    h[1] = 3; // GSO_UDP
    h[2..4].copy_from_slice(&(l4 + 8).to_le_bytes());
    h[4..6].copy_from_slice(&c.size.to_le_bytes());
    if c.needs_csum {
        h[0] = 1;
        h[6..8].copy_from_slice(&l4.to_le_bytes());
        h[8..10].copy_from_slice(&6u16.to_le_bytes());
    }
    h
}

/// flowpath's fragments of `c`, their IPv6 identification 0.
fn flowpath_fragments(c: &Case) -> Vec<Vec<u8>> {
    let mut p = Packet::from_slice(&c.frame);
    p.meta.gso_size = c.size;
    p.meta.set_ufo(true);
    let t = UfoSuper::of(&p).expect("a UFO super-frame").with_id(&p, 0);
    let mut pool = Pool::new(64, 0);
    (0..t.n_fragments(&p))
        .map(|k| t.fragment(&p, k, &mut pool).data().to_vec())
        .collect()
}

/// What Linux makes of the super-frames `cases`: sent from `ns_a`'s `a`, captured on
/// `ns_b`'s `b` (UDP frames and IP fragments).
fn linux_fragments(ns_a: &str, a: &str, ns_b: &str, b: &str, cases: &[Case]) -> Vec<Vec<u8>> {
    let frames: Vec<Vec<u8>> = cases
        .iter()
        .map(|c| [&ufo_hdr(c)[..], &c.frame].concat())
        .collect();
    let udp = Capture {
        proto: "3",
        keep: r#"(f[12:14] == b"\x08\x00" and f[23] == 17) or (f[12:14] == b"\x86\xdd" and f[20] in (17, 44))"#,
    };
    kernel_path::through((ns_a, a), (ns_b, b), true, &udp, &frames)
}

/// Sets the identification of IPv6 fragment `f` (no extension headers before its fragment
/// header) to 0, after checking it is `*id` (the first fragment of a super-frame sets it).
fn normalise_ipv6_id(f: &mut [u8], id: &mut Option<[u8; 4]>, first: bool) {
    if f[12..14] != [0x86, 0xdd] || f[20] != 44 {
        return;
    }
    let got: [u8; 4] = f[58..62].try_into().unwrap();
    if first {
        *id = Some(got);
    }
    assert_eq!(
        Some(got),
        *id,
        "one identification for a super-frame's fragments"
    );
    f[58..62].fill(0);
}

#[test]
fn ufo_fragments_as_linux_does() {
    let test = "ufo_fragments_as_linux_does";
    let Some(mut env) = Env::new(test) else {
        return;
    };
    if !common::quiet(&["python3", "-c", "pass"]) || !common::quiet(&["ethtool", "--version"]) {
        eprintln!("SKIP {test}: needs python3 and ethtool");
        return;
    }
    let (na, nb) = (env.netns("fa"), env.netns("fb"));
    let (a, b) = (env.ifname("fa"), env.ifname("fb"));
    env.veth(&a, Some(&na), &b, &nb);
    // Checksums in software on the way out (no device takes UFO: always fragmented in
    // software); nothing merged or reassembled on the way in.
    ns_sh(&na, &["ethtool", "-K", &a, "tx", "off"]);
    ns_sh(&nb, &["ethtool", "-K", &b, "gro", "off"]);
    ns_sh(
        &nb,
        &["ip", "link", "set", &b, "address", "02:00:00:00:37:02"],
    );
    let cases = vec![
        case(false, 3000, 1480, true, None),
        case(false, 3000, 1480, false, None),
        case(false, 1480 * 5 - 8, 1480, true, None),
        case(false, 65_000, 1480, true, None),
        case(false, 4000, 1000, false, Some(0xbeef)),
        case(false, 1000, 1480, true, None),
        case(true, 3000, 1448, true, None),
        case(true, 3000, 1448, false, None),
        case(true, 1448 * 4 - 8, 1448, true, None),
        case(true, 20_000, 1000, false, None),
        case(true, 1000, 1448, true, None),
    ];
    let mut want: Vec<Vec<u8>> = Vec::new();
    let mut firsts = Vec::new();
    for c in &cases {
        let frags = flowpath_fragments(c);
        firsts.extend((0..frags.len()).map(|k| k == 0));
        want.extend(frags);
    }
    let mut got = linux_fragments(&na, &a, &nb, &b, &cases);
    assert_eq!(got.len(), want.len(), "fragments: Linux's, flowpath's");
    let mut id = None;
    for (k, (g, w)) in got.iter_mut().zip(&want).enumerate() {
        normalise_ipv6_id(g, &mut id, firsts[k]);
        assert!(
            g == w,
            "fragment {k} differs:\n linux    {}\n flowpath {}",
            hex(g),
            hex(w)
        );
    }
    eprintln!(
        "{} fragments of {} super-frames as Linux's",
        got.len(),
        cases.len()
    );
}
