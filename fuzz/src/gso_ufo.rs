//! Checks of the `gso_ufo` fuzz target, shared with the crash-regression test
//! (`crates/datapath/tests/fuzz_regressions.rs` path-imports this file).
//!
//! The input's first two bytes are the `gso_size`, the third the packet's L3 offset (0:
//! unset, as before extraction); the rest is the frame. [`UfoSuper::of`] takes it or refuses
//! it (never panicking); a frame it takes
//! - has a `gso_size` that is a multiple of 8 and makes 1 to `MAX_FRAGMENTS` packets;
//! - one packet when its datagram fits `gso_size`: the frame, but for the IP length (and
//!   IPv4 header checksum) and the UDP checksum;
//! - else fragments that each repeat the frame's unfragmentable part (but for the IP
//!   lengths, the IPv4 flags, offset and header checksum, and the IPv6 next-header byte that
//!   now names the fragment header), each with at most `gso_size` bytes of fragmentable
//!   payload (all but the last exactly that), at the offset its flags say, MF/M on all but
//!   the last, the IPv4 header checksum verifying;
//! - the fragmentable parts put back together are the frame's but for the UDP checksum,
//!   which verifies over the whole datagram;
//! - [`UfoSuper::prepare_partial`] finds the same headers and leaves the frame's length.

use datapath::gso_ufo::{MAX_FRAGMENTS, UfoSuper};
use datapath::packet::{NO_OFS, Packet, Pool};

use crate::ones_sum::{be16, sum};

/// Runs the checks on one input.
pub fn check_gso_ufo(data: &[u8]) {
    fragments(data);
}

/// Runs the checks on one input; returns how many packets the frame made, `None` when
/// [`UfoSuper::of`] refused it.
pub fn fragments(data: &[u8]) -> Option<usize> {
    let [s0, s1, l3, frame @ ..] = data else {
        return None;
    };
    let mut p = Packet::from_slice(frame);
    p.meta.gso_size = u16::from_be_bytes([*s0, *s1]);
    p.meta.set_ufo(true);
    p.meta.l3 = if *l3 == 0 { NO_OFS } else { u16::from(*l3) };
    let t = UfoSuper::of(&p).ok()?.with_id(&p, 0x0102_0304);
    assert_eq!(t.size % 8, 0, "gso_size a multiple of 8");
    let n = t.n_fragments(&p);
    assert!((1..=MAX_FRAGMENTS).contains(&n), "{n} fragments");
    let mut pool = Pool::new(8, 0);
    let frags: Vec<Vec<u8>> = (0..n)
        .map(|k| {
            let s = t.fragment(&p, k, &mut pool);
            assert_eq!((s.meta.gso_size, s.meta.ufo()), (0, false));
            let f = s.data().to_vec();
            pool.free(s);
            f
        })
        .collect();
    let datagram = if t.fits(&p) {
        assert_eq!(n, 1);
        whole(&t, frame, &frags[0])
    } else {
        put_together(&t, frame, &frags)
    };
    let mut pseudo = Vec::new();
    if t.ipv6 {
        pseudo.extend_from_slice(&frame[t.l3 + 8..t.l3 + 40]);
        pseudo.extend_from_slice(&((frame.len() - t.l4) as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 17]);
    } else {
        pseudo.extend_from_slice(&frame[t.l3 + 12..t.l3 + 20]);
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&((frame.len() - t.l4) as u16).to_be_bytes());
    }
    let u = t.l4 - t.unfrag;
    pseudo.extend_from_slice(&datagram[u..]);
    assert_eq!(sum(&pseudo), 0xffff, "UDP checksum of the whole datagram");
    assert_eq!(&datagram[..u + 6], &frame[t.unfrag..t.l4 + 6]);
    assert_eq!(&datagram[u + 8..], &frame[t.l4 + 8..]);
    let mut q = Packet::from_slice(frame);
    q.copy_meta_from(&p);
    let r = UfoSuper::prepare_partial(&mut q).expect("the same headers");
    assert_eq!(
        (r.l3, r.l4, r.ipv6, r.unfrag),
        (t.l3, t.l4, t.ipv6, t.unfrag)
    );
    assert_eq!(q.len(), frame.len());
    Some(n)
}

/// Checks the one packet `g` of `frame`, sent whole; returns its fragmentable part.
fn whole(t: &UfoSuper, frame: &[u8], g: &[u8]) -> Vec<u8> {
    assert_eq!(g.len(), frame.len(), "no fragment header");
    let ip_len = if t.ipv6 { t.l3 + 4 } else { t.l3 + 2 };
    assert_eq!(&g[..ip_len], &frame[..ip_len]);
    if !t.ipv6 {
        assert_eq!(sum(&g[t.l3..t.l4]), 0xffff, "IPv4 header checksum");
        assert_eq!(&g[t.l3 + 4..t.l3 + 10], &frame[t.l3 + 4..t.l3 + 10]);
    }
    g[t.unfrag..].to_vec()
}

/// Checks fragments `frags` of `frame`; returns their fragmentable parts put back together.
fn put_together(t: &UfoSuper, frame: &[u8], frags: &[Vec<u8>]) -> Vec<u8> {
    let hl = t.unfrag + if t.ipv6 { 8 } else { 0 };
    let mut rest = Vec::new();
    for (k, g) in frags.iter().enumerate() {
        let last = k + 1 == frags.len();
        let n = g.len() - hl;
        assert!(
            n <= t.size && (last || n == t.size),
            "fragment {k}: {n} bytes"
        );
        assert!(n > 0, "fragment {k}: not empty");
        let more = if t.ipv6 {
            assert_eq!(be16(g, t.l3 + 4), g.len() - t.l3 - 40, "payload length");
            let h = &g[t.unfrag..hl];
            assert_eq!(&h[4..8], &[1, 2, 3, 4], "fragment {k}: identification");
            assert_eq!(h[1], 0);
            assert_eq!(be16(h, 2) & !7, rest.len(), "fragment {k}: offset");
            be16(h, 2) & 1 != 0
        } else {
            assert_eq!(be16(g, t.l3 + 2), g.len() - t.l3, "total length");
            assert_eq!(&g[t.l3 + 4..t.l3 + 6], &frame[t.l3 + 4..t.l3 + 6], "id");
            assert_eq!(sum(&g[t.l3..t.l4]), 0xffff, "fragment {k}: header checksum");
            let fo = be16(g, t.l3 + 6);
            assert_eq!((fo & 0x1fff) * 8, rest.len(), "fragment {k}: offset");
            assert_eq!(fo & 0xc000, 0, "fragment {k}: DF and reserved clear");
            fo & 0x2000 != 0
        };
        assert_eq!(more, !last, "fragment {k}: more fragments");
        rest.extend_from_slice(&g[hl..]);
    }
    rest
}
