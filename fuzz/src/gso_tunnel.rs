//! Checks of the `gso_tunnel` fuzz target, shared with the crash-regression test
//! (`crates/datapath/tests/fuzz_regressions.rs` path-imports this file).
//!
//! The input's first byte picks a tunnel (VXLAN or GENEVE with an option, IPv4 or IPv6
//! underlay, UDP checksum on or off) and whether the frame is marked UFO (bit 3), the next two
//! the `gso_size`, the fourth the packet's L3 offset (0: unset, as before extraction); the
//! rest is the frame, a TCP or UDP (USO) super-frame or neither. [`gso_tunnel::push`]
//! encapsulates it whole, then it is cut as an output cuts it; then
//! - a frame the push refuses is left as it was, and is one `Inner::of` refuses too (a UFO
//!   one, one neither TCP nor UDP) or one already encapsulated;
//! - a frame it takes is found again, encapsulated, with its outer headers;
//! - its segments are byte for byte what segmenting before the push gave, each segment then
//!   pushed by itself;
//! - made ready for a device with UDP-tunnel GSO, it is refused exactly when its outer
//!   lengths do not fit, and otherwise cut into the same segments.

use datapath::actions::{DpAction, TnlTemplate};
use datapath::gso_tunnel::{self, Inner, Outer};
use datapath::packet::{NO_OFS, Packet, Pool};

/// The tunnel template input byte `sel` picks.
fn template(sel: u8) -> TnlTemplate {
    let ip = if sel & 2 != 0 {
        "eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x86dd),\
         ipv6(src=fd01::1,dst=fd01::2,label=0,proto=17,tclass=0x0,hlimit=64)"
    } else {
        "eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),\
         ipv4(src=172.31.250.1,dst=172.31.250.2,proto=17,tos=0,ttl=64,frag=0x4000)"
    };
    let ip_len = if sel & 2 != 0 { 40 } else { 20 };
    let csum = if sel & 4 != 0 { "0xffff" } else { "0x0" };
    let (ty, port, tnl, tlen) = if sel & 1 != 0 {
        (
            5,
            6081,
            "geneve(crit,vni=0x7b,options({class=0xffff,type=0x80,len=4,0xa}))",
            16,
        )
    } else {
        (4, 4789, "vxlan(flags=0x8000000,vni=0x64)", 8)
    };
    let size = 14 + ip_len + 8 + tlen;
    let text = format!(
        "tnl_push(tnl_port(9),header(size={size},type={ty},{ip},udp(src=0,dst={port},\
         csum={csum}),{tnl}),out_port(0))"
    );
    let acts = flow::odp::parse_actions(&text, &mut flow::odp::PortNames::new())
        .expect("the template's text parses");
    let compiled = datapath::actions::compile(&acts).expect("the template compiles");
    match &compiled[0] {
        DpAction::TnlPush(t) => (**t).clone(),
        _ => unreachable!("a tnl_push"),
    }
}

/// Runs the checks on one input.
pub fn check_gso_tunnel(data: &[u8]) {
    segments_after_push(data);
}

/// Runs the checks on one input; returns how many segments the frame pushed whole made, `None`
/// when the push refused it.
pub fn segments_after_push(data: &[u8]) -> Option<usize> {
    let [sel, m0, m1, l3, frame @ ..] = data else {
        return None;
    };
    let t = template(*sel);
    let mut pool = Pool::new(8, 0);
    let mut orig = Packet::from_slice(frame);
    orig.meta.gso_size = u16::from_be_bytes([*m0, *m1]);
    orig.meta.l3 = if *l3 == 0 { NO_OFS } else { u16::from(*l3) };
    orig.meta.set_ufo(sel & 8 != 0);
    let mut p = Packet::from_slice(frame);
    p.copy_meta_from(&orig);
    let before = Inner::of(&orig);
    if let Err(e) = gso_tunnel::push(&mut p, &t) {
        assert_eq!(p.data(), frame, "a refused frame is left as it was ({e:?})");
        assert!(
            before.is_err() || gso_tunnel::is_encapsulated(&orig),
            "refused ({e:?}) what Inner::of takes"
        );
        return None;
    }
    let before = before.expect("pushed whole: a super-frame");
    assert!(
        gso_tunnel::is_encapsulated(&p),
        "pushed whole, encapsulated"
    );
    let inner = Inner::of(&p).expect("the inner headers found again");
    assert_eq!(
        matches!(inner, Inner::Udp(_)),
        matches!(before, Inner::Udp(_)),
        "the same kind"
    );
    let outer = Outer::around(&p, inner.l3())
        .expect("outer IP and UDP")
        .expect("encapsulated");
    assert_eq!(outer.csum, t.udp_csum);
    let n = inner.n_segments(&p);
    assert_eq!(n, before.n_segments(&orig));
    for k in 0..n {
        let after = inner.segment(&p, k, &outer, &mut pool);
        let mut seg = unencapsulated_segment(&before, &orig, k, &mut pool);
        datapath::rewrite::tnl_push(&mut seg, &t).expect("the template pushes");
        assert_eq!(after.data(), seg.data(), "segment {k} of {n}");
        pool.free(after);
        pool.free(seg);
    }
    check_prepared(&p, &inner, &outer, &mut pool);
    Some(n)
}

/// Segment `k` of super-frame `p` (not encapsulated) whose headers `inner` found.
fn unencapsulated_segment(inner: &Inner, p: &Packet, k: usize, pool: &mut Pool) -> Packet {
    match inner {
        Inner::Tcp(t) => t.segment(p, k, pool),
        Inner::Udp(u) => u.segment(p, k, pool),
    }
}

/// Encapsulated super-frame `p` made ready for a device with UDP-tunnel GSO
/// ([`gso_tunnel::prepare_partial`], [`gso_tunnel::prepare_partial_udp`]): refused exactly
/// when its outer lengths do not fit; else with the same headers, and cut into the same
/// segments as `p`.
fn check_prepared(p: &Packet, inner: &Inner, outer: &Outer, pool: &mut Pool) {
    let mut ready = pool.packet_from(p.data(), p.meta.in_port);
    ready.copy_meta_from(p);
    let prepared = match inner {
        Inner::Tcp(_) => gso_tunnel::prepare_partial(&mut ready).map(|(i, o)| (Inner::Tcp(i), o)),
        Inner::Udp(_) => {
            gso_tunnel::prepare_partial_udp(&mut ready).map(|(i, o)| (Inner::Udp(i), o))
        }
    };
    match prepared {
        Ok((i, o)) => {
            assert!(gso_tunnel::fits_whole(p), "prepared, but does not fit");
            assert_eq!(i, *inner);
            assert_eq!((o.l3, o.l4, o.ipv6), (outer.l3, outer.l4, outer.ipv6));
            for k in 0..inner.n_segments(p) {
                let a = inner.segment(p, k, outer, pool);
                let b = i.segment(&ready, k, &o, pool);
                assert_eq!(a.data(), b.data(), "prepared: segment {k}");
                pool.free(a);
                pool.free(b);
            }
        }
        Err(e) => assert!(!gso_tunnel::fits_whole(p), "refused though it fits: {e:?}"),
    }
    pool.free(ready);
}
