//! Checks of the `gso_udp` fuzz target, shared with the crash-regression test
//! (`crates/datapath/tests/fuzz_regressions.rs` path-imports this file).
//!
//! The input's first two bytes are the `gso_size`, the third the packet's L3 offset (0:
//! unset, as before extraction); the rest is the frame. [`UdpSuper::of`] takes it or refuses
//! it (never panicking); a frame it takes
//! - makes at most `MAX_SEGMENTS` datagrams, each of at most `gso_size` payload bytes, whose
//!   payloads put back together are the frame's UDP payload;
//! - each datagram repeats the frame's headers but for the lengths (IPv4 total length, IPv6
//!   payload length, UDP length: the datagram's), the IPv4 identification (the frame's plus
//!   the datagram's number) and the checksums, which verify (IPv4 header, UDP over its
//!   pseudo-header), and has `gso_size` 0;
//! - [`UdpSuper::prepare_partial`] finds the same headers and leaves the frame's length.

use datapath::gso_udp::{MAX_SEGMENTS, UdpSuper};
use datapath::packet::{NO_OFS, Packet, Pool};

use crate::ones_sum::{be16, sum};

/// Runs the checks on one input.
pub fn check_gso_udp(data: &[u8]) {
    datagrams(data);
}

/// Runs the checks on one input; returns how many datagrams the frame made, `None` when
/// [`UdpSuper::of`] refused it.
pub fn datagrams(data: &[u8]) -> Option<usize> {
    let [s0, s1, l3, frame @ ..] = data else {
        return None;
    };
    let mut p = Packet::from_slice(frame);
    p.meta.gso_size = u16::from_be_bytes([*s0, *s1]);
    p.meta.l3 = if *l3 == 0 { NO_OFS } else { u16::from(*l3) };
    let t = UdpSuper::of(&p).ok()?;
    let n = t.n_segments(&p);
    assert!((1..=MAX_SEGMENTS).contains(&n), "{n} datagrams");
    let (l3, l4, hl) = (t.l3, t.l4, t.hdr_len());
    let mut pool = Pool::new(8, 0);
    let mut payload = Vec::new();
    for k in 0..n {
        let s = t.segment(&p, k, &mut pool);
        assert_eq!(s.meta.gso_size, 0);
        let f = s.data();
        assert!(
            f.len() - hl <= t.size,
            "datagram {k}: at most gso_size bytes"
        );
        assert!(f.len() > hl || n == 1, "datagram {k}: not empty");
        payload.extend_from_slice(&f[hl..]);
        assert_eq!(be16(f, l4 + 4), f.len() - l4, "datagram {k}: UDP length");
        let mut pseudo = Vec::new();
        if t.ipv6 {
            assert_eq!(
                be16(f, l3 + 4),
                f.len() - l3 - 40,
                "datagram {k}: payload length"
            );
            assert_eq!(&f[..l3 + 4], &frame[..l3 + 4]);
            assert_eq!(&f[l3 + 6..l4 + 4], &frame[l3 + 6..l4 + 4]);
            pseudo.extend_from_slice(&f[l3 + 8..l3 + 40]);
            pseudo.extend_from_slice(&((f.len() - l4) as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, 17]);
        } else {
            assert_eq!(be16(f, l3 + 2), f.len() - l3, "datagram {k}: total length");
            let id = (be16(frame, l3 + 4) + k) & 0xffff;
            assert_eq!(be16(f, l3 + 4), id, "datagram {k}: identification");
            assert_eq!(
                sum(&f[l3..l4]),
                0xffff,
                "datagram {k}: IPv4 header checksum"
            );
            assert_eq!(&f[..l3 + 2], &frame[..l3 + 2]);
            assert_eq!(&f[l3 + 6..l3 + 10], &frame[l3 + 6..l3 + 10]);
            assert_eq!(&f[l3 + 12..l4 + 4], &frame[l3 + 12..l4 + 4]);
            pseudo.extend_from_slice(&f[l3 + 12..l3 + 20]);
            pseudo.extend_from_slice(&[0, 17]);
            pseudo.extend_from_slice(&((f.len() - l4) as u16).to_be_bytes());
        }
        pseudo.extend_from_slice(&f[l4..]);
        assert_eq!(sum(&pseudo), 0xffff, "datagram {k}: UDP checksum");
        pool.free(s);
    }
    assert_eq!(payload, &frame[hl..], "the payload put back together");
    let mut q = Packet::from_slice(frame);
    q.copy_meta_from(&p);
    assert_eq!(UdpSuper::prepare_partial(&mut q), Ok(t));
    assert_eq!(q.len(), frame.len());
    Some(n)
}
