//! `NXT_CT_FLUSH` (`ovs-ofctl flush-conntrack` over OpenFlow; `ovn-controller` for a load
//! balancer's removed backends): the message's match becomes the same [`FlushArgs`] that
//! `dpctl/flush-conntrack` builds from text, so the two flush alike. As OVS's
//! `handle_nxt_ct_flush()` and `ct_dpif_flush()`: a zero field matches anything (but ICMP's id,
//! type and code, which are compared as given), a message without a zone flushes in every
//! zone (an exact five-tuple without one names zone 0), and what the flush finds or not is
//! never an error to the controller.

use conntrack::Conntrack;
use conntrack::format::{CtMatch, FlushArgs, TupleMatch};
use openflow::msgs::ct_flush::{CtFlush, CtTuple, mapped_v4};

const IPPROTO_ICMP: u8 = 1;
const IPPROTO_ICMPV6: u8 = 58;

/// Flushes what `f` selects from `ct`; returns how many connections went.
pub(crate) fn ct_flush(ct: &Conntrack, f: &CtFlush) -> usize {
    conntrack::format::flush(ct, &flush_args(f), conntrack::now_ms()).unwrap_or(0)
}

/// The flush `f` asks for, in conntrack's terms.
pub(crate) fn flush_args(f: &CtFlush) -> FlushArgs {
    let icmp = matches!(f.ip_proto, IPPROTO_ICMP | IPPROTO_ICMPV6);
    let v6 = [f.orig.src, f.orig.dst, f.reply.src, f.reply.dst]
        .iter()
        .find(|a| **a != [0; 16])
        .map(|a| mapped_v4(a).is_none());
    FlushArgs {
        zone: f.zone,
        m: CtMatch {
            v6,
            proto: (f.ip_proto != 0).then_some(f.ip_proto),
            orig: tuple_match(&f.orig, icmp),
            reply: tuple_match(&f.reply, icmp),
        },
    }
}

/// One direction's fields: addresses as conntrack keeps them (IPv4 in the first 4 bytes).
fn tuple_match(t: &CtTuple, icmp: bool) -> TupleMatch {
    let addr = |a: &[u8; 16]| {
        (*a != [0; 16]).then(|| match mapped_v4(a) {
            Some(v4) => {
                let mut k = [0; 16];
                k[..4].copy_from_slice(&v4);
                k
            }
            None => *a,
        })
    };
    let nonzero = |p: u16| (p != 0).then_some(p);
    let mut m = TupleMatch {
        src: addr(&t.src),
        dst: addr(&t.dst),
        ..TupleMatch::default()
    };
    if icmp {
        m.icmp_id = Some(t.icmp_id());
        m.icmp_type = Some(t.icmp_type());
        m.icmp_code = Some(t.icmp_code());
    } else {
        m.sport = nonzero(t.src_port);
        m.dport = nonzero(t.dst_port);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    use openflow::msgs::ct_flush::v4_mapped as v4;

    #[test]
    fn ovn_s_backend_flush_becomes_a_partial_match_in_every_zone() {
        // What ovn-controller sends when a backend leaves a VIP (`add_ct_flush_tuple`).
        let f = CtFlush {
            ip_proto: 6,
            orig: CtTuple {
                dst: v4([30, 0, 0, 1]),
                dst_port: 80,
                ..CtTuple::default()
            },
            reply: CtTuple {
                src: v4([172, 16, 1, 4]),
                src_port: 80,
                ..CtTuple::default()
            },
            zone: None,
        };
        let a = flush_args(&f);
        assert_eq!(a.zone, None);
        assert_eq!(a.m.v6, Some(false));
        assert_eq!(a.m.proto, Some(6));
        assert!(!a.m.is_exact());
        let mut dst = [0; 16];
        dst[..4].copy_from_slice(&[30, 0, 0, 1]);
        assert_eq!(a.m.orig.dst, Some(dst));
        assert_eq!(a.m.orig.src, None);
        assert_eq!(a.m.orig.dport, Some(80));
        assert_eq!(a.m.orig.sport, None);
        let mut src = [0; 16];
        src[..4].copy_from_slice(&[172, 16, 1, 4]);
        assert_eq!(a.m.reply.src, Some(src));
        assert_eq!(a.m.reply.sport, Some(80));
    }

    #[test]
    fn an_empty_message_flushes_everything_and_icmp_fields_are_exact() {
        assert!(flush_args(&CtFlush::default()).m.is_empty());
        let a = flush_args(&CtFlush {
            ip_proto: IPPROTO_ICMPV6,
            ..CtFlush::default()
        });
        assert_eq!(a.m.orig.icmp_id, Some(0));
        assert_eq!(a.m.v6, None);
    }
}
