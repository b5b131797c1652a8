//! The TFTP helper (RFC 1350 §4): a server answers a read or write request from a port of its
//! own choosing, to the client's port, so a packet of the request's direction expects the
//! answer from the server's address and any source port. Nothing in the payload is read, and
//! nothing is rewritten: behind NAT the answer is expected at the client's translated port and
//! translated back to its own.

use super::{AlgOutcome, Control, ExpKey, ExpNat};
use crate::key::UDP;

/// The TFTP part of [`super::inspect`]: a packet of the request's direction expects the
/// server's answer.
pub(super) fn inspect(c: &Control<'_>, now: u64) -> AlgOutcome {
    let mut out = AlgOutcome::default();
    let (o, r) = (c.orig, c.reply_tuple);
    if c.reply || o.proto != UDP {
        return out;
    }
    // The answer: from the server, any port, to the client as the server sees it.
    let key = ExpKey::of(r);
    let mut nat = ExpNat::default();
    if c.snat() {
        nat.dst = Some((o.src, (r.dport != o.sport).then_some(o.sport)));
    }
    if c.dnat() {
        nat.src = Some((o.dst, None));
    }
    out.expectation = Some(c.expectation(key, nat, now));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alg::test_util::{tuple, v4};
    use crate::alg::{Helper, inspect};

    #[test]
    fn tftp_expects_answer_at_translated_port() {
        let o = tuple(v4("10.0.0.1"), 1069, v4("192.0.2.9"), 69, UDP);
        let r = tuple(v4("192.0.2.9"), 69, v4("203.0.113.1"), 2000, UDP);
        let c = Control {
            helper: Helper::Tftp,
            orig: &o,
            reply_tuple: &r,
            id: 1,
            mark: 0,
            label: 0,
            reply: false,
            nat: true,
        };
        let e = inspect(&c, &[0; 8], 0).expectation.unwrap();
        assert_eq!((e.key.src, e.key.dst, e.key.dport), (r.src, r.dst, 2000));
        assert_eq!(e.nat.dst, Some((o.src, Some(1069))));
        // The server's answer from port 3333 is translated back to the client's port.
        let answer = tuple(v4("192.0.2.9"), 3333, v4("203.0.113.1"), 2000, UDP);
        assert_eq!(ExpKey::of(&answer), e.key);
        let rr = e.nat_reply(&answer);
        assert_eq!(
            (rr.src, rr.sport, rr.dst, rr.dport),
            (o.src, 1069, v4("192.0.2.9"), 3333)
        );
        // Nothing from the server's side.
        assert!(
            inspect(&Control { reply: true, ..c }, &[0; 8], 0)
                .expectation
                .is_none()
        );
    }
}
