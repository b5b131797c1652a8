//! The guest receive ring with TCP super-frames: sent whole to a guest that accepted
//! `GUEST_TSO4/6` (and `GUEST_ECN` for one with CWR), segmented for one that did not (UDP
//! ones likewise with `GUEST_USO4/6`, UFO ones with `GUEST_UFO`, fragmented without); and
//! super-frames from a guest checked against their virtio-net header, drops counted by reason.
//! Ordinary frames whose checksum is pending: sent as `NEEDS_CSUM` to a guest that accepted
//! `GUEST_CSUM`, completed for one that did not.

use datapath::packet::{Batch, MAX_BURST, Packet, Pool};

use super::copy::LongCopy;
use super::features::{
    F_GUEST_CSUM, F_GUEST_ECN, F_GUEST_TSO4, F_GUEST_TSO6, F_GUEST_UFO, F_GUEST_USO4, F_GUEST_USO6,
    F_HOST_TSO4, F_HOST_TSO6, F_HOST_UFO, F_HOST_USO, F_MRG_RXBUF,
};
use super::tests::{Guest, HDR, Rx, hdr, recv, rx_ring};
use crate::vnet;

/// A TCP/IPv4 super-frame of `payload` bytes (MSS 1448), CWR set when `cwr`.
fn tcp_super(payload: usize, cwr: bool) -> Vec<u8> {
    let mut f = vec![0u8; 54 + payload];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
    f[18..20].copy_from_slice(&[0x12, 0x34]);
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&40000u16.to_be_bytes());
    f[36..38].copy_from_slice(&5001u16.to_be_bytes());
    f[38..42].copy_from_slice(&1000u32.to_be_bytes());
    f[46] = 0x50;
    f[47] = 0x18 | if cwr { 0x80 } else { 0 };
    f[48..50].copy_from_slice(&[0xff, 0xff]);
    let c = !wire::checksum::data(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    for (i, b) in f[54..].iter_mut().enumerate() {
        *b = i as u8;
    }
    f
}

/// A frame as a guest reads it from its receive ring: the virtio-net header, the frame.
type Received = (Vec<u8>, Vec<u8>);

/// Sends super-frame `f` into a ring of 64 buffers of 2 KiB of a guest that accepted
/// `acked`; the frames the guest reads, and the counts.
fn send_super(f: &[u8], acked: u64) -> (Vec<Received>, [u64; 3]) {
    send_one(f, acked, |p| p.meta.gso_size = 1448)
}

/// [`send_super`] of a UFO super-frame when `ufo`.
fn send_marked(f: &[u8], acked: u64, ufo: bool) -> (Vec<Received>, [u64; 3]) {
    send_one(f, acked, |p| {
        p.meta.gso_size = 1448;
        p.meta.set_ufo(ufo);
    })
}

/// Sends `f`, its packet's metadata set by `meta`, as [`send_super`] does.
fn send_one(f: &[u8], acked: u64, meta: impl FnOnce(&mut Packet)) -> (Vec<Received>, [u64; 3]) {
    let mut g = Guest::new(64);
    let bufs = rx_ring(&mut g, 64, 2048);
    let mut r = g.ring_acked(HDR, acked);
    let mut pool = Pool::new(64, 0);
    let mut batch = Batch::new();
    let mut p = pool.packet_from(f, 0);
    meta(&mut p);
    batch.push(p);
    let mut counts = [0; 3];
    assert!(
        r.send(&mut batch, &mut counts, &mut pool, LongCopy::Vector)
            .is_ok()
    );
    pool.free_batch(&mut batch);
    let used = g.used();
    let mut frames = Vec::new();
    let mut k = 0;
    while k < used.len() {
        let h = g.read(bufs[used[k].0 as usize], HDR);
        let n = usize::from(u16::from_le_bytes([h[10], h[11]]));
        let mut frame = Vec::new();
        for (j, &(head, len)) in used[k..k + n].iter().enumerate() {
            let skip = if j == 0 { HDR } else { 0 };
            let at = bufs[head as usize] + skip as u64;
            frame.extend(g.read(at, len as usize - skip));
        }
        frames.push((h, frame));
        k += n;
    }
    (frames, counts)
}

const GUEST_TSO: u64 = F_MRG_RXBUF | F_GUEST_CSUM | F_GUEST_TSO4 | F_GUEST_TSO6 | F_GUEST_ECN;

#[test]
fn super_frames_go_whole_to_a_guest_that_takes_them() {
    let f = tcp_super(10_000, false);
    let (frames, counts) = send_super(&f, GUEST_TSO);
    assert_eq!(counts, [1, f.len() as u64, 0]);
    let [(h, got)] = &frames[..] else {
        panic!("one frame: {}", frames.len())
    };
    // NEEDS_CSUM, TCPV4, hdr_len 54, gso_size 1448, csum_start 34, csum_offset 16,
    // num_buffers 5 (10 054 bytes and the header in 2 KiB buffers).
    let want_hdr = [1, vnet::GSO_TCPV4, 54, 0, 0xa8, 5, 34, 0, 16, 0, 5, 0];
    assert_eq!(h[..], want_hdr);
    // The frame as sent but for the TCP checksum field, which holds the pseudo-header sum.
    assert_eq!(got.len(), f.len());
    assert!(
        got[..50] == f[..50] && got[52..] == f[52..],
        "the frame is what was sent"
    );
    let pseudo = wire::checksum::pseudo_header_v4(
        &[10, 0, 0, 1].into(),
        &[10, 0, 0, 2].into(),
        wire::IpProtocol::TCP,
        (f.len() - 34) as u16,
    );
    assert_eq!(got[50..52], pseudo.to_be_bytes());
}

#[test]
fn a_pending_checksum_goes_to_a_guest_as_needs_csum_or_completed() {
    // An ordinary TCP frame whose checksum field holds garbage, its checksum pending.
    let mut f = tcp_super(1000, false);
    f[50..52].copy_from_slice(&[0xde, 0xad]);
    let pending = |p: &mut Packet| p.meta.set_csum_pending(true);
    let pseudo = wire::checksum::pseudo_header_v4(
        &[10, 0, 0, 1].into(),
        &[10, 0, 0, 2].into(),
        wire::IpProtocol::TCP,
        (f.len() - 34) as u16,
    );
    for acked in [F_GUEST_CSUM, F_MRG_RXBUF | F_GUEST_CSUM] {
        let (frames, counts) = send_one(&f, acked, pending);
        assert_eq!(counts, [1, f.len() as u64, 0]);
        let [(h, got)] = &frames[..] else { panic!() };
        // NEEDS_CSUM, csum_start 34, csum_offset 16, num_buffers 1.
        assert_eq!(h[..10], [1, 0, 0, 0, 0, 0, 34, 0, 16, 0], "{acked:#x}");
        assert!(got[..50] == f[..50] && got[52..] == f[52..]);
        assert_eq!(got[50..52], pseudo.to_be_bytes(), "the pseudo-header sum");
    }
    for acked in [0, F_MRG_RXBUF] {
        let (frames, counts) = send_one(&f, acked, pending);
        assert_eq!(counts, [1, f.len() as u64, 0]);
        let [(h, got)] = &frames[..] else { panic!() };
        assert_eq!(h[..10], [0; 10], "{acked:#x}: no offload asked");
        let sum = wire::checksum::combine(&[pseudo, wire::checksum::data(&got[34..])]);
        assert_eq!(sum, 0xffff, "{acked:#x}: completed");
    }
}

/// A UDP super-frame: [`tcp_super`]'s frame with protocol UDP (its TCP header's first eight
/// bytes the UDP header, the rest payload).
fn udp_super(payload: usize) -> Vec<u8> {
    let mut f = tcp_super(payload, false);
    f[23] = 17;
    let c = !wire::checksum::data(&{
        let mut h = f[14..34].to_vec();
        h[10..12].fill(0);
        h
    });
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

#[test]
fn udp_super_frames_go_whole_to_a_guest_that_takes_them_else_as_datagrams() {
    let f = udp_super(10_000);
    let udp_len = f.len() - 34;
    let (frames, counts) = send_super(&f, GUEST_TSO | F_GUEST_USO4 | F_GUEST_USO6);
    assert_eq!(counts, [1, f.len() as u64, 0]);
    let [(h, got)] = &frames[..] else {
        panic!("one frame: {}", frames.len())
    };
    // NEEDS_CSUM, UDP_L4, hdr_len 42, gso_size 1448, csum_start 34, csum_offset 6,
    // num_buffers 5.
    let want_hdr = [1, vnet::GSO_UDP_L4, 42, 0, 0xa8, 5, 34, 0, 6, 0, 5, 0];
    assert_eq!(h[..], want_hdr);
    // The frame as sent but for the UDP length and checksum fields: the whole datagram's
    // length and pseudo-header sum.
    assert!(got[..38] == f[..38] && got[42..] == f[42..]);
    assert_eq!(got[38..40], (udp_len as u16).to_be_bytes());
    let pseudo = |len: usize| {
        wire::checksum::pseudo_header_v4(
            &[10, 0, 0, 1].into(),
            &[10, 0, 0, 2].into(),
            wire::IpProtocol::UDP,
            len as u16,
        )
    };
    assert_eq!(got[40..42], pseudo(udp_len).to_be_bytes());
    // Without GUEST_USO4 (GUEST_USO6 is for IPv6): datagrams.
    let (frames, counts) = send_super(&f, GUEST_TSO | F_GUEST_USO6);
    let n = (f.len() - 42).div_ceil(1448);
    assert_eq!((frames.len(), counts[0], counts[2]), (n, n as u64, 0));
    let mut payload: Vec<u8> = Vec::new();
    for (k, (h, d)) in frames.iter().enumerate() {
        assert_eq!(h[..10], [0; 10], "datagram {k}: an ordinary frame");
        assert_eq!(d.len(), 42 + (f.len() - 42 - k * 1448).min(1448));
        assert_eq!(wire::checksum::data(&d[14..34]), 0xffff, "datagram {k}");
        assert_eq!(u16::from_be_bytes([d[18], d[19]]), 0x1234 + k as u16);
        let sum = wire::checksum::combine(&[pseudo(d.len() - 34), wire::checksum::data(&d[34..])]);
        assert_eq!(sum, 0xffff, "datagram {k}: UDP checksum");
        payload.extend(&d[42..]);
    }
    assert!(payload == f[42..], "the datagrams carry the payload");
}

#[test]
fn super_frames_are_segmented_for_a_guest_that_does_not_take_them() {
    let f = tcp_super(10_000, true);
    // No GUEST_TSO at all, and TSO without ECN for a frame with CWR.
    for acked in [F_MRG_RXBUF, GUEST_TSO & !F_GUEST_ECN] {
        let (frames, counts) = send_super(&f, acked);
        assert_eq!(frames.len(), 7, "{acked:#x}");
        assert_eq!(counts[0], 7);
        assert_eq!(counts[2], 0);
        let mut payload: Vec<u8> = Vec::new();
        for (k, (h, s)) in frames.iter().enumerate() {
            assert_eq!(h[..10], [0; 10], "segment {k}: an ordinary frame");
            assert_eq!(s.len(), 54 + (10_000 - k * 1448).min(1448));
            // Each segment's IPv4 and TCP checksums verify.
            assert_eq!(wire::checksum::data(&s[14..34]), 0xffff, "segment {k}");
            let sum = wire::checksum::combine(&[
                wire::checksum::pseudo_header_v4(
                    &[10, 0, 0, 1].into(),
                    &[10, 0, 0, 2].into(),
                    wire::IpProtocol::TCP,
                    (s.len() - 34) as u16,
                ),
                wire::checksum::data(&s[34..]),
            ]);
            assert_eq!(sum, 0xffff, "segment {k}");
            // CWR only on the first segment.
            assert_eq!(s[47] & 0x80 != 0, k == 0);
            payload.extend(&s[54..]);
        }
        assert!(payload == f[54..], "the segments carry the payload");
    }
}

#[test]
fn a_super_frame_neither_tcp_nor_udp_is_dropped_counted() {
    let mut f = tcp_super(3000, false);
    f[23] = 47;
    for acked in [F_MRG_RXBUF, GUEST_TSO] {
        let (frames, counts) = send_super(&f, acked);
        assert_eq!((frames.len(), counts), (0, [0, 0, 1]), "{acked:#x}");
    }
}

/// A virtio-net header asking for segmentation of type `ty` with MSS 1448.
fn gso_hdr(ty: u8) -> [u8; HDR] {
    let mut h = hdr(0);
    h[1] = ty;
    h[4..6].copy_from_slice(&1448u16.to_le_bytes());
    h
}

/// Receives the one frame `f` sent with header `h`: what `recv` made of it, and the drops the
/// ring counted by reason.
fn recv_one(h: &[u8], f: &[u8], tso: bool) -> (Rx, Vec<(String, u64)>) {
    let tso = if tso { F_HOST_TSO4 | F_HOST_TSO6 } else { 0 };
    recv_one_acked(h, f, F_MRG_RXBUF | tso)
}

/// [`recv_one`] from a front-end that accepted features `acked`.
fn recv_one_acked(h: &[u8], f: &[u8], acked: u64) -> (Rx, Vec<(String, u64)>) {
    let mut g = Guest::new(2);
    let a = g.put(&[h, f].concat());
    g.desc(0, a, (h.len() + f.len()) as u32, 0, 0);
    g.offer(&[0]);
    let mut r = g.ring_acked(HDR, acked);
    let rx = recv(&mut r, MAX_BURST);
    assert!(rx.res.is_ok());
    assert_eq!(g.used(), [(0, 0)]);
    (rx, r.rx_drops.xstats().collect())
}

#[test]
fn tx_super_frames_need_tso() {
    let f = tcp_super(2946, false);
    for tso in [false, true] {
        let (rx, drops) = recv_one(&gso_hdr(vnet::GSO_TCPV4), &f, tso);
        if tso {
            assert!(rx.frames == [f.clone()], "the super-frame as sent");
            assert_eq!((rx.gso, rx.marked_gso), (vec![1448], true));
            assert!(drops.is_empty(), "{drops:?}");
        } else {
            assert_eq!((rx.frames.len(), rx.counts[2]), (0, 1));
            assert_eq!(drops, [("rx_drop_gso_type".to_owned(), 1)]);
        }
    }
}

#[test]
fn a_partial_checksum_from_a_guest_stays_pending_where_it_is_the_tcp_one() {
    let f = tcp_super(1000, false);
    let partial = |start: u16, offset: u16| {
        let mut h = [0u8; HDR];
        h[0] = vnet::F_NEEDS_CSUM;
        h[6..8].copy_from_slice(&start.to_le_bytes());
        h[8..10].copy_from_slice(&offset.to_le_bytes());
        h
    };
    let (rx, drops) = recv_one(&partial(34, 16), &f, false);
    assert!(rx.frames == [f.clone()], "untouched");
    assert_eq!((rx.pending, rx.marked_gso), (vec![true], true));
    assert!(drops.is_empty());
    // A partial checksum elsewhere (summed from the IP header on, into the TCP source
    // port's bytes, which hold 0) is completed at once.
    let mut g = f.clone();
    g[34..36].fill(0);
    let (rx, _) = recv_one(&partial(14, 20), &g, false);
    assert_eq!((rx.pending, rx.marked_gso), (vec![false], false));
    let got = &rx.frames[0];
    assert_eq!(wire::checksum::data(&got[14..]), 0xffff);
    assert!(got[..34] == g[..34] && got[36..] == g[36..]);
}

#[test]
fn udp_super_frames_need_host_uso_and_udp_headers() {
    let tcp = tcp_super(2946, false);
    let mut udp = tcp.clone();
    udp[23] = 17;
    let uso = F_MRG_RXBUF | F_HOST_TSO4 | F_HOST_TSO6 | F_HOST_USO;
    let (rx, drops) = recv_one_acked(&gso_hdr(vnet::GSO_UDP_L4), &udp, uso);
    assert!(rx.frames == [udp.clone()], "the super-frame as sent");
    assert_eq!((rx.gso, rx.marked_gso), (vec![1448], true));
    assert!(drops.is_empty(), "{drops:?}");
    let cases = [
        (
            "rx_drop_gso_type",
            gso_hdr(vnet::GSO_UDP_L4),
            &udp[..],
            uso & !F_HOST_USO,
        ),
        ("rx_drop_gso_type", gso_hdr(3), &udp[..], uso),
        (
            "rx_drop_gso_header",
            gso_hdr(vnet::GSO_UDP_L4),
            &tcp[..],
            uso,
        ),
        (
            "rx_drop_gso_header",
            gso_hdr(vnet::GSO_UDP_L4),
            &udp[..40],
            uso,
        ),
        (
            "rx_drop_gso_header",
            gso_hdr(vnet::GSO_TCPV4),
            &udp[..],
            uso,
        ),
    ];
    for (why, h, f, acked) in cases {
        let (rx, drops) = recv_one_acked(&h, f, acked);
        assert_eq!((rx.frames.len(), rx.counts[2]), (0, 1), "{why}");
        assert_eq!(drops, [(why.to_owned(), 1)]);
    }
    // 129 datagrams of 20 bytes: more than a socket sends at once.
    let mut small = gso_hdr(vnet::GSO_UDP_L4);
    small[4..6].copy_from_slice(&20u16.to_le_bytes());
    let (rx, drops) = recv_one_acked(&small, &udp, uso);
    assert_eq!(
        (rx.frames.len(), drops),
        (0, vec![("rx_drop_gso_size".to_owned(), 1)])
    );
}

#[test]
fn bad_super_frames_are_drops_counted_by_reason() {
    let v4 = tcp_super(2946, false);
    let mut udp = v4.clone();
    udp[23] = 17;
    let mut fragment = v4.clone();
    fragment[20] = 0x20;
    let mut small = gso_hdr(vnet::GSO_TCPV4);
    small[4..6].copy_from_slice(&47u16.to_le_bytes());
    // An IPv4 packet of 65 546 bytes: its total length does not fit 16 bits.
    let long = tcp_super(65_506, false);
    let cases: [(&str, [u8; HDR], &[u8]); 6] = [
        ("rx_drop_gso_header", gso_hdr(vnet::GSO_TCPV6), &v4),
        ("rx_drop_gso_header", gso_hdr(vnet::GSO_TCPV4), &udp),
        ("rx_drop_gso_header", gso_hdr(vnet::GSO_TCPV4), &fragment),
        ("rx_drop_gso_header", gso_hdr(vnet::GSO_TCPV4), &v4[..40]),
        ("rx_drop_gso_size", small, &v4),
        ("rx_drop_gso_length", gso_hdr(vnet::GSO_TCPV4), &long),
    ];
    for (why, h, f) in cases {
        let (rx, drops) = recv_one(&h, f, true);
        assert_eq!((rx.frames.len(), rx.counts[2]), (0, 1), "{why}");
        assert_eq!(drops, [(why.to_owned(), 1)]);
    }
}

#[test]
fn ufo_super_frames_go_whole_to_a_guest_that_takes_ufo_else_as_fragments() {
    let f = udp_super(10_000);
    let udp_len = f.len() - 34;
    let (frames, counts) = send_marked(&f, GUEST_TSO | F_GUEST_UFO, true);
    assert_eq!(counts, [1, f.len() as u64, 0]);
    let [(h, got)] = &frames[..] else {
        panic!("one frame: {}", frames.len())
    };
    // NEEDS_CSUM, UDP (UFO), hdr_len 42, gso_size 1448, csum_start 34, csum_offset 6,
    // num_buffers 5.
    let want_hdr = [1, vnet::GSO_UDP, 42, 0, 0xa8, 5, 34, 0, 6, 0, 5, 0];
    assert_eq!(h[..], want_hdr);
    assert!(got[..38] == f[..38] && got[42..] == f[42..]);
    assert_eq!(got[38..40], (udp_len as u16).to_be_bytes());
    let pseudo = |len: usize| {
        wire::checksum::pseudo_header_v4(
            &[10, 0, 0, 1].into(),
            &[10, 0, 0, 2].into(),
            wire::IpProtocol::UDP,
            len as u16,
        )
    };
    assert_eq!(got[40..42], pseudo(udp_len).to_be_bytes());
    // Without GUEST_UFO, or with it but no GUEST_CSUM: IP fragments of 1448 bytes.
    let n = udp_len.div_ceil(1448);
    for acked in [
        GUEST_TSO | F_GUEST_USO4,
        (GUEST_TSO | F_GUEST_UFO) & !F_GUEST_CSUM,
    ] {
        let (frames, counts) = send_marked(&f, acked, true);
        assert_eq!((frames.len(), counts[0], counts[2]), (n, n as u64, 0));
        let mut datagram: Vec<u8> = Vec::new();
        for (k, (h, d)) in frames.iter().enumerate() {
            assert_eq!(h[..10], [0; 10], "fragment {k}: an ordinary frame");
            assert_eq!(d.len(), 34 + (udp_len - k * 1448).min(1448));
            assert_eq!(wire::checksum::data(&d[14..34]), 0xffff, "fragment {k}");
            assert_eq!(
                d[18..20],
                [0x12, 0x34],
                "fragment {k}: the one identification"
            );
            let mf = if k + 1 < n { 0x2000 } else { 0 };
            let frag = u16::from_be_bytes([d[20], d[21]]);
            assert_eq!(frag, (k * 1448 / 8) as u16 | mf, "fragment {k}");
            datagram.extend(&d[34..]);
        }
        let sum = wire::checksum::combine(&[pseudo(udp_len), wire::checksum::data(&datagram)]);
        assert_eq!(sum, 0xffff, "the whole datagram's UDP checksum");
        assert!(datagram[8..] == f[42..], "the fragments carry the datagram");
    }
}

#[test]
fn ufo_super_frames_need_host_ufo_and_udp_headers() {
    let tcp = tcp_super(2946, false);
    let udp = udp_super(2946);
    let ufo = F_MRG_RXBUF | F_HOST_TSO4 | F_HOST_TSO6 | F_HOST_UFO;
    let (rx, drops) = recv_one_acked(&gso_hdr(vnet::GSO_UDP), &udp, ufo);
    assert!(rx.frames == [udp.clone()], "the super-frame as sent");
    assert_eq!(
        (rx.gso, rx.ufo, rx.marked_gso),
        (vec![1448], vec![true], true)
    );
    assert!(drops.is_empty(), "{drops:?}");
    // The ECN bit, meaningless for UDP, taken as Linux takes it.
    let (rx, _) = recv_one_acked(&gso_hdr(vnet::GSO_UDP | 0x80), &udp, ufo);
    assert_eq!((rx.gso, rx.ufo), (vec![1448], vec![true]));
    let mut odd = gso_hdr(vnet::GSO_UDP);
    odd[4..6].copy_from_slice(&1001u16.to_le_bytes());
    let mut tiny = gso_hdr(vnet::GSO_UDP);
    tiny[4..6].copy_from_slice(&16u16.to_le_bytes());
    let mut fragment = udp.clone();
    fragment[20] = 0x20;
    let cases = [
        (
            "rx_drop_gso_type",
            gso_hdr(vnet::GSO_UDP),
            &udp[..],
            ufo & !F_HOST_UFO,
        ),
        ("rx_drop_gso_header", gso_hdr(vnet::GSO_UDP), &tcp[..], ufo),
        (
            "rx_drop_gso_header",
            gso_hdr(vnet::GSO_UDP),
            &fragment[..],
            ufo,
        ),
        (
            "rx_drop_gso_header",
            gso_hdr(vnet::GSO_UDP),
            &udp[..40],
            ufo,
        ),
        ("rx_drop_gso_size", odd, &udp[..], ufo),
        ("rx_drop_gso_size", tiny, &udp[..], ufo),
    ];
    for (why, h, f, acked) in cases {
        let (rx, drops) = recv_one_acked(&h, f, acked);
        assert_eq!((rx.frames.len(), rx.counts[2]), (0, 1), "{why}");
        assert_eq!(drops, [(why.to_owned(), 1)], "{why}");
    }
}

#[test]
fn a_ufo_frame_that_fits_its_size_is_an_ordinary_one_its_checksum_completed() {
    let mut f = udp_super(1000);
    let udp_len = f.len() - 34;
    f[38..40].copy_from_slice(&(udp_len as u16).to_be_bytes());
    let pseudo = wire::checksum::pseudo_header_v4(
        &[10, 0, 0, 1].into(),
        &[10, 0, 0, 2].into(),
        wire::IpProtocol::UDP,
        udp_len as u16,
    );
    f[40..42].copy_from_slice(&pseudo.to_be_bytes());
    let mut h = gso_hdr(vnet::GSO_UDP);
    h[0] = 1; // NEEDS_CSUM at the UDP checksum
    h[6] = 34;
    h[8] = 6;
    let ufo = F_MRG_RXBUF | F_HOST_TSO4 | F_HOST_TSO6 | F_HOST_UFO;
    let (rx, drops) = recv_one_acked(&h, &f, ufo);
    assert!(drops.is_empty(), "{drops:?}");
    assert_eq!((rx.gso, rx.ufo), (vec![0], vec![false]));
    let got = &rx.frames[0];
    assert!(got[..40] == f[..40] && got[42..] == f[42..]);
    let sum = wire::checksum::combine(&[pseudo, wire::checksum::data(&got[34..])]);
    assert_eq!(sum, 0xffff, "the checksum completed");
}
