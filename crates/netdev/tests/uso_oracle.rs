//! flowpath's UDP segmentation ([`datapath::gso_udp`]) against Linux's own, byte for byte:
//! the same UDP super-frames (`GSO_UDP_L4`, as a guest or a `UDP_SEGMENT` socket hands them
//! to a device that takes USO) are sent through a packet socket with `PACKET_VNET_HDR` on a
//! veth without UDP segmentation or checksum offload, so that the kernel cuts them in
//! software (`__udp_gso_segment`) and completes their checksums, and are captured on the
//! far end; and they are cut by [`UdpSuper::segment`]. IPv4 (the identification counting
//! up from the super-frame's, across 0xffff) and IPv6, a short last datagram and none.
//! Skipped, with the reason, without root, python3 or ethtool.

mod common;

use common::kernel_path::{self, Capture, hex};
use common::{Env, ns_sh};
use datapath::gso_udp::UdpSuper;
use datapath::packet::{Packet, Pool};
use wire::checksum;

/// A UDP super-frame to `dst` (IPv4 with DF and identification `id`, or IPv6) of `payload`
/// bytes as a device that takes USO gets it: lengths for the whole datagram, the UDP
/// checksum field the pseudo-header sum of the whole (`CHECKSUM_PARTIAL`).
fn super_frame(dst: [u8; 6], ipv6: bool, payload: usize, id: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0x83, 1]);
    let udp_len = (8 + payload) as u16;
    let pseudo = if ipv6 {
        let (src, dst) = (
            "fd00:83::1".parse::<std::net::Ipv6Addr>().unwrap(),
            "fd00:83::2".parse::<std::net::Ipv6Addr>().unwrap(),
        );
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&udp_len.to_be_bytes());
        f.extend_from_slice(&[17, 64]);
        f.extend_from_slice(&src.octets());
        f.extend_from_slice(&dst.octets());
        checksum::pseudo_header_v6(&src, &dst, wire::IpProtocol::UDP, u32::from(udp_len))
    } else {
        let (src, dst) = ([10, 83, 0, 1], [10, 83, 0, 2]);
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
        f.extend_from_slice(&(20 + udp_len).to_be_bytes());
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(&[0x40, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        let c = !checksum::data(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        checksum::pseudo_header_v4(&src.into(), &dst.into(), wire::IpProtocol::UDP, udp_len)
    };
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&5201u16.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&pseudo.to_be_bytes());
    f.extend((0..payload).map(|i| (i * 31 + 7) as u8));
    f
}

/// The virtio-net header (legacy, 10 bytes) asking for USO of `f` in datagrams of `size`.
fn uso_hdr(f: &[u8], size: u16) -> [u8; 10] {
    let l4: u16 = if f[12] == 0x86 { 54 } else { 34 };
    let mut h = [0u8; 10];
    h[0] = 1; // NEEDS_CSUM
    h[1] = 5; // GSO_UDP_L4
    h[2..4].copy_from_slice(&(l4 + 8).to_le_bytes());
    h[4..6].copy_from_slice(&size.to_le_bytes());
    h[6..8].copy_from_slice(&l4.to_le_bytes());
    h[8..10].copy_from_slice(&6u16.to_le_bytes());
    h
}

fn flowpath_segments(f: &[u8], size: u16) -> Vec<Vec<u8>> {
    let mut p = Packet::from_slice(f);
    p.meta.gso_size = size;
    let t = UdpSuper::of(&p).expect("a UDP super-frame");
    let mut pool = Pool::new(64, 0);
    (0..t.n_segments(&p))
        .map(|k| t.segment(&p, k, &mut pool).data().to_vec())
        .collect()
}

/// What Linux makes of the super-frames `cases` (frame, size): sent from `ns_a`'s `a`,
/// captured on `ns_b`'s `b`.
fn linux_segments(
    ns_a: &str,
    a: &str,
    ns_b: &str,
    b: &str,
    cases: &[(Vec<u8>, u16)],
) -> Vec<Vec<u8>> {
    let frames: Vec<Vec<u8>> = cases
        .iter()
        .map(|(f, size)| [&uso_hdr(f, *size)[..], f].concat())
        .collect();
    let udp = Capture {
        proto: "3",
        keep: r#"(f[12:14] == b"\x08\x00" and f[23] == 17) or (f[12:14] == b"\x86\xdd" and f[20] == 17)"#,
    };
    kernel_path::through((ns_a, a), (ns_b, b), true, &udp, &frames)
}

#[test]
fn uso_segments_as_linux_does() {
    let test = "uso_segments_as_linux_does";
    let Some(mut env) = Env::new(test) else {
        return;
    };
    if !common::quiet(&["python3", "-c", "pass"]) || !common::quiet(&["ethtool", "--version"]) {
        eprintln!("SKIP {test}: needs python3 and ethtool");
        return;
    }
    let (na, nb) = (env.netns("ua"), env.netns("ub"));
    let (a, b) = (env.ifname("ua"), env.ifname("ub"));
    env.veth(&a, Some(&na), &b, &nb);
    // Segmentation and checksums in software on the way out; nothing merged on the way in.
    ns_sh(
        &na,
        &[
            "ethtool",
            "-K",
            &a,
            "tx",
            "off",
            "tx-udp-segmentation",
            "off",
        ],
    );
    ns_sh(&nb, &["ethtool", "-K", &b, "gro", "off"]);
    let dst = [0x02, 0, 0, 0, 0x83, 2];
    ns_sh(
        &nb,
        &["ip", "link", "set", &b, "address", "02:00:00:00:83:02"],
    );
    let cases = vec![
        (super_frame(dst, false, 8192 * 6, 0x1234), 1472),
        (super_frame(dst, false, 1400 * 5 + 321, 0xfffe), 1400),
        (super_frame(dst, true, 1452 * 7, 0), 1452),
        (super_frame(dst, true, 1000 * 3 + 1, 0), 1000),
    ];
    let want: Vec<Vec<u8>> = cases
        .iter()
        .flat_map(|(f, size)| flowpath_segments(f, *size))
        .collect();
    let got = linux_segments(&na, &a, &nb, &b, &cases);
    assert_eq!(got.len(), want.len(), "datagrams: Linux's, flowpath's");
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            g == w,
            "datagram {k} differs:\n linux    {}\n flowpath {}",
            hex(g),
            hex(w)
        );
    }
    eprintln!(
        "{} datagrams of {} super-frames as Linux's",
        got.len(),
        cases.len()
    );
}
