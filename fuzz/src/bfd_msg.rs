//! Invariant checks of the `bfd_msg` fuzz target, shared with the crash-regression test
//! (`crates/ofproto/tests/fuzz_regressions.rs` path-imports this file).
//!
//! The input is a received frame (first byte 0) or a UDP payload (first byte 1 and up, the
//! first byte then also the session's configuration): a BFD control packet as a peer or an
//! attacker sends it.
//! - the decoder accepts only what RFC 5880 section 6.8.6 lets through (version 1, no
//!   authentication, no multipoint, a length of at least 24 and within the payload, a
//!   multiplier, a sender discriminator), and what it accepts writes back to the same 24
//!   bytes;
//! - a frame reaches a session only through `Sessions::receive`, which never panics, counts
//!   every refusal, and leaves the session's status well formed (six keys, known states).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use ofproto::bfd::msg::{FLAG_AUTH, FLAG_MULTIPOINT, MSG_LEN, Msg};
use ofproto::bfd::{Config, Sessions, frame};

/// Runs the checks on one input.
pub fn check_bfd_msg(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    if sel == 0 {
        check_frame(rest);
    } else {
        check_payload(rest);
        check_frame(&payload_frame(rest, sel));
    }
}

fn check_payload(p: &[u8]) {
    let Ok(m) = Msg::decode(p) else {
        return;
    };
    assert_eq!(m.version, 1);
    assert_eq!(m.flags & (FLAG_AUTH | FLAG_MULTIPOINT), 0);
    assert!(usize::from(m.length) >= MSG_LEN && usize::from(m.length) <= p.len());
    assert!(m.mult != 0 && m.my_disc != 0);
    assert_eq!(&m.encode()[..], &p[..MSG_LEN]);
}

/// `p` as the UDP payload of a BFD frame, with TTL 255 unless `sel`'s top bit says 64.
fn payload_frame(p: &[u8], sel: u8) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0xc0]);
    let tot = (28 + p.len()).min(0xffff) as u16;
    f.extend_from_slice(&tot.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, if sel & 0x80 != 0 { 64 } else { 255 }, 17, 0, 0]);
    f.extend_from_slice(&[169, 254, 1, 0, 169, 254, 1, 1]);
    f.extend_from_slice(&[0xc0, 0x00, 0x0e, 0xc8]);
    f.extend_from_slice(&((8 + p.len()).min(0xffff) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(p);
    f
}

fn check_frame(f: &[u8]) {
    if let Some((_, p)) = frame::udp_payload(f) {
        assert!(p.len() <= f.len());
    }
    let s = Sessions::default();
    let col: BTreeMap<String, String> = [("enable".to_owned(), "true".to_owned())].into();
    s.configure("p0", "br0", 1, Config::from_column(&col));
    s.receive("br0", 1, f);
    s.receive("br0", 1, f);
    let r = &s.refused;
    let refused = r.malformed.load(Ordering::Relaxed) + r.ignored.load(Ordering::Relaxed);
    assert!(
        refused == 0 || refused == 2,
        "each copy is refused the same way"
    );
    let st = s.status("p0").expect("the session");
    assert_eq!(st.len(), 6);
    for (k, v) in st {
        if k.ends_with("state") {
            assert!(
                ["admin_down", "down", "init", "up"].contains(&v.as_str()),
                "{v}"
            );
        }
    }
    assert!(s.show(Some("p0")).is_ok());
}
