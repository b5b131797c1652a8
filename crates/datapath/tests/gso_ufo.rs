//! UDP fragmentation of UFO super-frames (`datapath::gso_ufo`), alone and in a PMD: every
//! header field of every fragment is checked against values computed here (IPv4 total
//! length, identification, flags and offset, header checksum; IPv6 payload length, fragment
//! header; the UDP checksum of the whole datagram), the fragments put back together give the
//! datagram; bad super-frames are refused by reason; in a PMD a UFO super-frame goes whole
//! only to a queue that takes UFO, is fragmented for the others and before a tunnel push,
//! and is counted as UFO. (Byte equality with Linux: `crates/netdev/tests/ufo_oracle.rs`.)

use std::sync::{Arc, Mutex};

use datapath::dpif::parse_megaflow;
use datapath::gso::GsoError;
use datapath::gso_ufo::{MAX_FRAGMENTS, UfoSuper};
use datapath::packet::{Batch, Packet, Pool};
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq};
use datapath::port::{RxQueue, TxQueue};
use datapath::tx_gso::TxGsoStats;
use flow::odp::PortNames;

const SRC6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const DST6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

fn payload_byte(i: usize) -> u8 {
    (i.wrapping_mul(13) ^ (i >> 7)) as u8
}

/// A UFO super-frame (IPv4 with DF and identification 0x1234, or IPv6 with the extension
/// headers `ext`: (next header, 8-byte units after the first 8)), UDP 40000 -> 5201 with
/// `payload` bytes, its UDP checksum field garbage.
fn super_frame(ipv6: bool, ext: &[(u8, u8)], payload: usize) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    let udp_len = 8 + payload;
    let ext_len: usize = ext.iter().map(|&(_, n)| (usize::from(n) + 1) * 8).sum();
    if ipv6 {
        let first = ext.first().map_or(17, |e| e.0);
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&((udp_len + ext_len) as u16).to_be_bytes());
        f.extend_from_slice(&[first, 64]);
        f.extend_from_slice(&SRC6);
        f.extend_from_slice(&DST6);
        for (i, &(_, n)) in ext.iter().enumerate() {
            let next = ext.get(i + 1).map_or(17, |e| e.0);
            let mut h = vec![0u8; (usize::from(n) + 1) * 8];
            h[0] = next;
            h[1] = n;
            h[2] = 1; // PadN
            h[3] = h.len() as u8 - 4;
            f.extend_from_slice(&h);
        }
    } else {
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
        f.extend_from_slice(&((20 + udp_len) as u16).to_be_bytes());
        f.extend_from_slice(&[
            0x12, 0x34, 0x40, 0, 64, 17, 0xde, 0xad, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
    }
    f.extend_from_slice(&[0x9c, 0x40, 0x14, 0x51]);
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&[0xbe, 0xef]);
    f.extend((0..payload).map(payload_byte));
    f
}

fn ufo_packet(f: &[u8], size: u16) -> Packet {
    let mut p = Packet::from_slice(f);
    p.meta.gso_size = size;
    p.meta.set_ufo(true);
    p
}

/// The ones' complement sum of `d` (folded, not inverted).
fn sum(d: &[u8]) -> u32 {
    let mut s: u32 = d
        .chunks(2)
        .map(|c| (u32::from(c[0]) << 8) | u32::from(*c.get(1).unwrap_or(&0)))
        .sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s
}

fn be16(f: &[u8], at: usize) -> usize {
    usize::from(u16::from_be_bytes([f[at], f[at + 1]]))
}

/// Fragments of `f` cut in pieces of `size` (IPv6 identification 0x0a0b0c0d).
fn fragment_all(f: &[u8], size: u16) -> Vec<Vec<u8>> {
    let p = ufo_packet(f, size);
    let t = UfoSuper::of(&p).expect("a UFO super-frame");
    let t = t.with_id(&p, 0x0a0b_0c0d);
    let mut pool = Pool::new(8, 0);
    (0..t.n_fragments(&p))
        .map(|k| {
            let s = t.fragment(&p, k, &mut pool);
            assert_eq!((s.meta.gso_size, s.meta.ufo()), (0, false));
            s.data().to_vec()
        })
        .collect()
}

/// Checks IPv4 fragments `frags` of super-frame `f` (IP header at 14, no options) cut in
/// pieces of `size`, and returns the IP payload put back together.
fn verify_v4(f: &[u8], size: usize, frags: &[Vec<u8>]) -> Vec<u8> {
    let mut payload = Vec::new();
    for (k, g) in frags.iter().enumerate() {
        let last = k + 1 == frags.len();
        assert_eq!(&g[..16], &f[..16], "fragment {k}: up to the total length");
        assert_eq!(be16(g, 16), g.len() - 14, "fragment {k}: total length");
        assert_eq!(be16(g, 18), 0x1234, "fragment {k}: the super-frame's id");
        let frag = (k * size / 8) | if last { 0 } else { 0x2000 };
        assert_eq!(be16(g, 20), frag, "fragment {k}: offset, MF, DF cleared");
        assert_eq!(&g[22..24], &f[22..24], "fragment {k}: TTL, protocol");
        assert_eq!(&g[26..34], &f[26..34], "fragment {k}: addresses");
        assert_eq!(sum(&g[14..34]), 0xffff, "fragment {k}: header checksum");
        assert!(g.len() - 34 <= size && (last || g.len() - 34 == size));
        assert_eq!(payload.len(), k * size);
        payload.extend_from_slice(&g[34..]);
    }
    payload
}

/// Checks that UDP datagram `d` (from the UDP header) between `src` and `dst` (pseudo-header
/// bytes) has a good checksum and `f`'s bytes from `l4` but for its checksum.
fn verify_udp(f: &[u8], l4: usize, d: &[u8], addrs: &[u8]) {
    assert_eq!(d.len(), f.len() - l4, "the datagram put back together");
    assert_eq!(&d[..6], &f[l4..l4 + 6]);
    assert_eq!(&d[8..], &f[l4 + 8..]);
    let mut pseudo = addrs.to_vec();
    pseudo.extend_from_slice(&(d.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 17]);
    pseudo.extend_from_slice(d);
    assert_eq!(sum(&pseudo), 0xffff, "UDP checksum of the whole datagram");
}

#[test]
fn ipv4_fragments_share_the_id_and_count_offsets_in_8_byte_units() {
    let f = super_frame(false, &[], 3000);
    let frags = fragment_all(&f, 1480);
    assert_eq!(frags.len(), 3);
    let d = verify_v4(&f, 1480, &frags);
    verify_udp(&f, 34, &d, &f[26..34]);
}

#[test]
fn ipv4_a_multiple_of_the_size_and_a_large_datagram() {
    for (payload, size, n) in [
        (1480 * 4 - 8, 1480, 4),
        (65_000, 1480, 44),
        (4000, 8 * 63, 8),
    ] {
        let f = super_frame(false, &[], payload);
        let frags = fragment_all(&f, size as u16);
        assert_eq!(frags.len(), n, "{payload} bytes in {size}");
        let d = verify_v4(&f, size, &frags);
        verify_udp(&f, 34, &d, &f[26..34]);
    }
}

/// Checks IPv6 fragments `frags` of super-frame `f` whose unfragmentable part ends at
/// `unfrag` (its next-header byte at `prev`), and returns the fragmentable part put back
/// together.
fn verify_v6(f: &[u8], unfrag: usize, prev: usize, size: usize, frags: &[Vec<u8>]) -> Vec<u8> {
    let mut rest = Vec::new();
    for (k, g) in frags.iter().enumerate() {
        let last = k + 1 == frags.len();
        assert_eq!(be16(g, 18), g.len() - 54, "fragment {k}: payload length");
        assert_eq!(g[prev], 44, "fragment {k}: a fragment header next");
        let mut unf = g[..unfrag].to_vec();
        unf[prev] = f[prev];
        unf[18..20].copy_from_slice(&f[18..20]);
        assert_eq!(&unf[..], &f[..unfrag], "fragment {k}: unfragmentable part");
        let h = &g[unfrag..unfrag + 8];
        assert_eq!((h[0], h[1]), (f[prev], 0), "fragment {k}: next header");
        let off = (k * size) | usize::from(!last);
        assert_eq!(be16(h, 2), off, "fragment {k}: offset and M");
        assert_eq!(&h[4..8], &[0x0a, 0x0b, 0x0c, 0x0d], "fragment {k}: id");
        let n = g.len() - unfrag - 8;
        assert!(n <= size && (last || n == size));
        rest.extend_from_slice(&g[unfrag + 8..]);
    }
    rest
}

#[test]
fn ipv6_fragments_get_a_fragment_header_after_the_ip_header() {
    let f = super_frame(true, &[], 1448 * 3 + 100);
    let frags = fragment_all(&f, 1448);
    assert_eq!(frags.len(), 4);
    let d = verify_v6(&f, 54, 20, 1448, &frags);
    verify_udp(&f, 54, &d, &f[22..54]);
}

#[test]
fn ipv6_fragment_header_goes_after_hop_by_hop_and_destination_options() {
    // Hop-by-hop (16 bytes) and destination options (8) without a routing header: both
    // unfragmentable (Linux's ip6_find_1stfragopt).
    let f = super_frame(true, &[(0, 1), (60, 0)], 3000);
    let frags = fragment_all(&f, 1232);
    assert_eq!(frags.len(), 3);
    let d = verify_v6(&f, 78, 70, 1232, &frags);
    verify_udp(&f, 78, &d, &f[22..54]);
    // Routing, then destination options: those go in the fragmentable part.
    let f = super_frame(true, &[(43, 0), (60, 0)], 3000);
    let frags = fragment_all(&f, 1232);
    let rest = verify_v6(&f, 62, 54, 1232, &frags);
    assert_eq!(
        &rest[..8],
        &f[62..70],
        "destination options in the first fragment"
    );
    verify_udp(&f, 70, &rest[8..], &f[22..54]);
}

/// Mobile IPv6 (RFC 6275 §6.3) puts destination options holding a Home Address option before
/// any fragment header, after a routing header too: Linux with Mobile IPv6 built in (Debian's
/// kernels: `CONFIG_IPV6_MIP6=y`) keeps them unfragmentable (`ip6_find_1stfragopt`).
#[test]
fn destination_options_with_a_home_address_stay_unfragmentable_after_a_routing_header() {
    // Routing (8 bytes), then destination options of 24: PadN of 4 bytes, then the Home
    // Address option (type 0xc9, 16 bytes of address) at 8n+6.
    let mut f = super_frame(true, &[(43, 0), (60, 2)], 3000);
    let opts = 62 + 2;
    f[opts..opts + 6].copy_from_slice(&[1, 2, 0, 0, 0xc9, 16]);
    f[opts + 6..opts + 22].copy_from_slice(&SRC6);
    let frags = fragment_all(&f, 1232);
    let d = verify_v6(&f, 86, 62, 1232, &frags);
    verify_udp(&f, 86, &d, &f[22..54]);
    // A Home Address option's type found before a bad length still counts (as Linux's
    // `ipv6_find_tlv` reads it); one after an option that overruns the header does not.
    f[opts + 4..opts + 6].copy_from_slice(&[0xc9, 200]);
    let frags = fragment_all(&f, 1232);
    verify_v6(&f, 86, 62, 1232, &frags);
    f[opts..opts + 6].copy_from_slice(&[1, 30, 0, 0, 0xc9, 16]);
    let frags = fragment_all(&f, 1232);
    let rest = verify_v6(&f, 62, 54, 1232, &frags);
    assert_eq!(&rest[..24], &f[62..86], "destination options fragmentable");
}

#[test]
fn a_datagram_that_fits_the_size_is_sent_whole_with_its_checksum() {
    for ipv6 in [false, true] {
        let f = super_frame(ipv6, &[], 1000);
        let frags = fragment_all(&f, 1480);
        assert_eq!(frags.len(), 1);
        let g = &frags[0];
        let l4 = if ipv6 { 54 } else { 34 };
        assert_eq!(g.len(), f.len(), "no fragment header");
        let ck = if ipv6 { 0..0 } else { 24..26 };
        let (mut g0, mut f0) = (g[..l4 + 6].to_vec(), f[..l4 + 6].to_vec());
        g0.splice(ck.clone(), []);
        f0.splice(ck, []);
        assert_eq!(
            g0, f0,
            "IP header as it was (DF kept), its checksum made right"
        );
        assert!(ipv6 || sum(&g[14..34]) == 0xffff);
        let addrs = if ipv6 { &f[22..54] } else { &f[26..34] };
        verify_udp(&f, l4, &g[l4..], addrs);
    }
}

#[test]
fn bad_super_frames_are_refused_by_reason() {
    let v4 = super_frame(false, &[], 3000);
    let of = |f: &[u8], size: u16| UfoSuper::of(&ufo_packet(f, size)).map(|_| ());
    assert_eq!(of(&v4, 1480), Ok(()));
    assert_eq!(
        of(&v4, 1481),
        Err(GsoError::MssTooSmall),
        "not a multiple of 8"
    );
    assert_eq!(of(&v4, 0), Err(GsoError::NotTcp));
    let big = super_frame(false, &[], 65_000);
    let least = 65_008usize.div_ceil(MAX_FRAGMENTS).next_multiple_of(8) as u16;
    assert_eq!(of(&big, least), Ok(()));
    assert_eq!(of(&big, least - 8), Err(GsoError::MssTooSmall), "too many");
    let mut frag = v4.clone();
    frag[20] = 0x20; // MF: already a fragment
    assert_eq!(of(&frag, 1480), Err(GsoError::NotTcp));
    let mut tcp = v4.clone();
    tcp[23] = 6;
    assert_eq!(of(&tcp, 1480), Err(GsoError::NotTcp));
    assert_eq!(of(&v4[..40], 16), Err(GsoError::Malformed));
    let huge = super_frame(true, &[], 65_530);
    assert_eq!(of(&huge, 1448), Err(GsoError::TooLong));
}

// ---- In a PMD ----

/// Receives `frames` as UFO super-frames of their `gso_size` (0: an ordinary frame).
struct UfoRxq {
    frames: Vec<(Vec<u8>, u16)>,
    next: usize,
}

impl RxQueue for UfoRxq {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let mut n = 0;
        while batch.room() > 0 && self.next < self.frames.len() {
            let (f, size) = &self.frames[self.next];
            let mut p = pool.packet_from(f, 1);
            if *size != 0 {
                p.meta.gso_size = *size;
                p.meta.set_ufo(true);
                batch.mark_gso();
            }
            batch.push(p);
            self.next += 1;
            n += 1;
        }
        n
    }
}

/// Keeps what it is sent: (frame, gso_size, ufo).
type Sent = Arc<Mutex<Vec<(Vec<u8>, u16, bool)>>>;

struct CaptureTxq {
    offload: (bool, bool, bool),
    sent: Sent,
}

impl TxQueue for CaptureTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        let mut s = self.sent.lock().unwrap();
        for p in batch.packets() {
            s.push((p.data().to_vec(), p.meta.gso_size, p.meta.ufo()));
        }
        pool.free_batch(batch);
    }
    fn tso(&self) -> bool {
        self.offload.0
    }
    fn uso(&self) -> bool {
        self.offload.1
    }
    fn ufo(&self) -> bool {
        self.offload.2
    }
}

/// A PMD receiving `frames` (UFO ones) on port 1 (p0), with capturing ports 2 (no offload),
/// 3 (TSO), 4 (TSO and USO) and 5 (TSO and UFO), their counters, and `flows`.
fn run_pmd(
    frames: Vec<(Vec<u8>, u16)>,
    flows: &[(&str, &str)],
) -> ([Sent; 4], [Arc<TxGsoStats>; 4], Pmd) {
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: Box::new(UfoRxq { frames, next: 0 }),
        cycles: 0,
    });
    let sent: [Sent; 4] = Default::default();
    let counters: [Arc<TxGsoStats>; 4] = Default::default();
    let mut names = PortNames::new();
    names.insert("p0", 1);
    let kinds = [
        (false, false, false),
        (true, false, false),
        (true, true, false),
        (true, false, true),
    ];
    for (i, offload) in kinds.into_iter().enumerate() {
        let no = i as u32 + 2;
        let q = CaptureTxq {
            offload,
            sent: sent[i].clone(),
        };
        pmd.add_port_txq_counted(no, Box::new(q), None, counters[i].clone());
        names.insert(&format!("p{no}"), no);
    }
    for (k, a) in flows {
        pmd.add_flow(parse_megaflow(&names, k, a).unwrap()).unwrap();
    }
    for _ in 0..10 {
        pmd.poll_once();
    }
    (sent, counters, pmd)
}

#[test]
fn a_ufo_super_frame_goes_whole_only_to_a_queue_that_takes_ufo() {
    let f = super_frame(false, &[], 3000);
    let (sent, counters, pmd) = run_pmd(
        vec![(f.clone(), 1480)],
        &[("in_port(p0),eth_type(0x0800),ipv4(frag=no)", "p2,p3,p4,p5")],
    );
    for (i, what) in [(0, "no offload"), (1, "TSO"), (2, "TSO and USO")] {
        let got = sent[i].lock().unwrap().clone();
        assert!(got.iter().all(|g| g.1 == 0 && !g.2), "{what}: fragments");
        let frags: Vec<Vec<u8>> = got.into_iter().map(|g| g.0).collect();
        let d = verify_v4(&f, 1480, &frags);
        verify_udp(&f, 34, &d, &f[26..34]);
        assert_eq!(
            counters[i].ufo.get(),
            (0, 1, 3),
            "{what}: counted fragmented"
        );
        assert_eq!(counters[i].udp.get(), (0, 0, 0), "{what}: not as USO");
        assert_eq!(counters[i].get(), (0, 0, 0), "{what}: not as TCP");
    }
    assert_eq!(
        *sent[3].lock().unwrap(),
        vec![(f, 1480, true)],
        "UFO: whole"
    );
    assert_eq!(counters[3].ufo.get(), (1, 0, 0));
    let st = pmd.stats();
    assert_eq!((st.gso_frames, st.gso_segments, st.gso_drops), (3, 9, 0));
}

#[test]
fn a_ufo_super_frame_is_fragmented_before_a_tunnel_push() {
    let push = "tnl_push(tnl_port(9),header(size=50,type=4,eth(dst=8c:dc:d4:ab:58:48,\
                src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=17,\
                tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),\
                vxlan(flags=0x8000000,vni=0x64)),out_port(0))";
    let f = super_frame(false, &[], 3000);
    let actions = format!("{push},p5");
    let (sent, counters, pmd) = run_pmd(
        vec![(f.clone(), 1480)],
        &[("in_port(p0),eth_type(0x0800),ipv4(frag=no)", &actions)],
    );
    let frags: Vec<Vec<u8>> = sent[3]
        .lock()
        .unwrap()
        .iter()
        .map(|(g, size, _)| {
            assert_eq!(*size, 0);
            assert_eq!(be16(g, 38), g.len() - 34, "outer UDP length");
            g[50..].to_vec()
        })
        .collect();
    let d = verify_v4(&f, 1480, &frags);
    verify_udp(&f, 34, &d, &f[26..34]);
    let st = pmd.stats();
    assert_eq!(
        (st.gso_frames, st.gso_segments, st.gso_encapsulated),
        (1, 3, 0)
    );
    assert_eq!(counters[3].ufo.get(), (0, 0, 0));
}

#[test]
fn a_bad_ufo_super_frame_is_a_counted_drop_and_costs_only_itself() {
    let f = super_frame(false, &[], 3000);
    let (sent, _, pmd) = run_pmd(
        vec![(f.clone(), 1001), (f.clone(), 1480)],
        &[("in_port(p0),eth_type(0x0800),ipv4(frag=no)", "p2")],
    );
    let frags: Vec<Vec<u8>> = sent[0]
        .lock()
        .unwrap()
        .iter()
        .map(|g| g.0.clone())
        .collect();
    verify_v4(&f, 1480, &frags);
    let st = pmd.stats();
    assert_eq!(st.gso_drops, 1);
    assert_eq!(st.gso_drop_reasons[GsoError::MssTooSmall.index()], 1);
}
