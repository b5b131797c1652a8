//! `NXT_CT_FLUSH`: flush the conntrack entries that match an IP protocol, original and reply
//! tuples (addresses, ports or ICMP id, type and code) and a zone, as OVS's `lib/ofp-ct.c`
//! reads and writes it (`ovs-ofctl flush-conntrack`; OVN for load balancer backends). A whole
//! zone is flushed with `NXT_CT_FLUSH_ZONE` ([`nicira`](super::nicira)).
//!
//! Each tuple is a nested property list; addresses are IPv6, IPv4 ones mapped
//! (`::ffff:a.b.c.d`). As in OVS's `struct ofp_ct_tuple`, the ICMP id shares the source port
//! and the ICMP code and type share the destination port's two bytes.

use super::{Reader, finish, props, put_prop, put16, start, zeros};
use crate::error::OfpErr;
use crate::header::Version;
use crate::msgtype::{Message, MsgType};

/// Outer property: the original direction's tuple.
const NXT_CT_ORIG_TUPLE: u16 = 0;
/// Outer property: the reply direction's tuple.
const NXT_CT_REPLY_TUPLE: u16 = 1;
/// Outer property: the zone.
const NXT_CT_ZONE_ID: u16 = 2;
/// Tuple properties, in order: source, destination, source port, destination port, ICMP id,
/// ICMP type, ICMP code.
const SRC: u16 = 0;
const DST: u16 = 1;
const SRC_PORT: u16 = 2;
const DST_PORT: u16 = 3;
const ICMP_ID: u16 = 4;
const ICMP_TYPE: u16 = 5;
const ICMP_CODE: u16 = 6;
const IPPROTO_ICMP: u8 = 1;
const IPPROTO_ICMPV6: u8 = 58;

/// One direction's tuple; zeros match anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtTuple {
    /// The source address (IPv4 mapped into IPv6).
    pub src: [u8; 16],
    /// The destination address.
    pub dst: [u8; 16],
    /// The source port, or for ICMP the id.
    pub src_port: u16,
    /// The destination port, or for ICMP the code (high byte) and type (low byte).
    pub dst_port: u16,
}

impl CtTuple {
    /// The ICMP id.
    pub fn icmp_id(&self) -> u16 {
        self.src_port
    }

    /// The ICMP type.
    pub fn icmp_type(&self) -> u8 {
        self.dst_port as u8
    }

    /// The ICMP code.
    pub fn icmp_code(&self) -> u8 {
        (self.dst_port >> 8) as u8
    }

    fn is_zero(&self) -> bool {
        *self == CtTuple::default()
    }

    /// The tuple's properties as OVS writes them (`ofp_ct_tuple_encode`): non-zero addresses,
    /// then for ICMP the id, type and code, else the non-zero ports.
    fn put(&self, ip_proto: u8, out: &mut Vec<u8>) {
        if self.src != [0; 16] {
            put_prop(out, SRC, &self.src);
        }
        if self.dst != [0; 16] {
            put_prop(out, DST, &self.dst);
        }
        if ip_proto == IPPROTO_ICMP || ip_proto == IPPROTO_ICMPV6 {
            put_prop(
                out,
                ICMP_ID,
                &[(self.src_port >> 8) as u8, self.src_port as u8, 0, 0],
            );
            put_prop(out, ICMP_TYPE, &[self.icmp_type()]);
            put_prop(out, ICMP_CODE, &[self.icmp_code()]);
        } else {
            for (kind, port) in [(SRC_PORT, self.src_port), (DST_PORT, self.dst_port)] {
                if port != 0 {
                    put_prop(out, kind, &[(port >> 8) as u8, port as u8, 0, 0]);
                }
            }
        }
    }
}

/// `NXT_CT_FLUSH` (OVS's `struct ofp_ct_match` and zone).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtFlush {
    /// The IP protocol (0: any).
    pub ip_proto: u8,
    /// The original direction's tuple.
    pub orig: CtTuple,
    /// The reply direction's tuple.
    pub reply: CtTuple,
    /// The zone, when the message names one (else the default zone).
    pub zone: Option<u16>,
}

/// IPv4 address `a` as the message carries it: mapped into IPv6 (`::ffff:a.b.c.d`).
pub fn v4_mapped(a: [u8; 4]) -> [u8; 16] {
    let mut m = [0; 16];
    m[10..12].copy_from_slice(&[0xff, 0xff]);
    m[12..].copy_from_slice(&a);
    m
}

/// The IPv4 address a message's address maps, if it is an IPv4-mapped one.
pub fn mapped_v4(addr: &[u8; 16]) -> Option<[u8; 4]> {
    (addr[..10] == [0; 10] && addr[10..12] == [0xff, 0xff]).then(|| {
        let mut a = [0; 4];
        a.copy_from_slice(&addr[12..]);
        a
    })
}

/// IPv4 (mapped) or IPv6: an address's family, for the check that a message does not mix them.
fn family(addr: &[u8; 16]) -> Option<bool> {
    if *addr == [0; 16] {
        return None;
    }
    Some(mapped_v4(addr).is_some())
}

impl CtFlush {
    /// Appends the message.
    pub fn encode(&self, version: Version, xid: u32, out: &mut Vec<u8>) {
        let at = start(MsgType::NxtCtFlush, version, xid, out);
        out.push(self.ip_proto);
        zeros(out, 7);
        for (kind, t) in [
            (NXT_CT_ORIG_TUPLE, &self.orig),
            (NXT_CT_REPLY_TUPLE, &self.reply),
        ] {
            let mut nested = Vec::new();
            t.put(self.ip_proto, &mut nested);
            if nested.is_empty() {
                continue;
            }
            // A nested list starts 8 bytes into its property.
            let p = out.len();
            put16(out, kind);
            put16(out, 0);
            zeros(out, 4);
            out.extend_from_slice(&nested);
            let len = (out.len() - p) as u16;
            out[p + 2..p + 4].copy_from_slice(&len.to_be_bytes());
        }
        if let Some(z) = self.zone {
            put_prop(out, NXT_CT_ZONE_ID, &[(z >> 8) as u8, z as u8, 0, 0]);
        }
        let _ = finish(out, at);
    }

    /// Reads the message (OVS's `ofp_ct_match_decode`): non-zero padding is
    /// `NXBRC_MUST_BE_ZERO`, a value shorter than its type `OFPBPC_BAD_LEN`, IPv4 and IPv6
    /// addresses together `OFPBPC_BAD_VALUE`; unknown properties are skipped, as OVS skips them.
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        super::expect(msg, &[MsgType::NxtCtFlush])?;
        let mut r = Reader::new(msg.body);
        let ip_proto = r.u8()?;
        if r.take(7)?.iter().any(|&b| b != 0) {
            return Err(OfpErr::NxbrcMustBeZero);
        }
        let mut f = CtFlush {
            ip_proto,
            ..CtFlush::default()
        };
        let mut v4: Option<bool> = None;
        for p in props(r.rest()) {
            let p = p?;
            match (p.kind, p.experimenter) {
                (NXT_CT_ORIG_TUPLE | NXT_CT_REPLY_TUPLE, None) => {
                    let nested = p.payload.get(4..).ok_or(OfpErr::OfpbpcBadLen)?;
                    let t = if p.kind == NXT_CT_ORIG_TUPLE {
                        &mut f.orig
                    } else {
                        &mut f.reply
                    };
                    pull_tuple(nested, t, &mut v4)?;
                }
                (NXT_CT_ZONE_ID, None) => f.zone = Some(be16(p.payload)?),
                _ => {}
            }
        }
        Ok(f)
    }

    /// Whether the message matches every connection of its zone.
    pub fn matches_all(&self) -> bool {
        self.ip_proto == 0 && self.orig.is_zero() && self.reply.is_zero()
    }
}

fn be16(b: &[u8]) -> Result<u16, OfpErr> {
    match b {
        [h, l, ..] => Ok(u16::from_be_bytes([*h, *l])),
        _ => Err(OfpErr::OfpbpcBadLen),
    }
}

/// Reads a tuple's nested properties into `t`; `v4` is whether the addresses seen so far
/// were IPv4.
fn pull_tuple(b: &[u8], t: &mut CtTuple, v4: &mut Option<bool>) -> Result<(), OfpErr> {
    for p in props(b) {
        let p = p?;
        if p.experimenter.is_some() {
            continue;
        }
        match p.kind {
            SRC | DST => {
                let a: [u8; 16] = p
                    .payload
                    .get(..16)
                    .and_then(|a| a.try_into().ok())
                    .ok_or(OfpErr::OfpbpcBadLen)?;
                let fam = family(&a);
                if let (Some(seen), Some(this)) = (*v4, fam)
                    && seen != this
                {
                    return Err(OfpErr::OfpbpcBadValue);
                }
                // As OVS does, the last address read decides (a zero one forgets).
                *v4 = fam;
                if p.kind == SRC {
                    t.src = a;
                } else {
                    t.dst = a;
                }
            }
            SRC_PORT | ICMP_ID => t.src_port = be16(p.payload)?,
            DST_PORT => t.dst_port = be16(p.payload)?,
            ICMP_TYPE => {
                let ty = *p.payload.first().ok_or(OfpErr::OfpbpcBadLen)?;
                t.dst_port = (t.dst_port & 0xff00) | u16::from(ty);
            }
            ICMP_CODE => {
                let code = *p.payload.first().ok_or(OfpErr::OfpbpcBadLen)?;
                t.dst_port = (t.dst_port & 0x00ff) | u16::from(code) << 8;
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{hex, msg, ofctl, unhex};
    use super::*;
    use crate::msgtype;
    use proptest::prelude::*;

    fn v4(a: [u8; 4]) -> [u8; 16] {
        v4_mapped(a)
    }

    /// What `ovs-ofctl ct-flush` sends (a TCP 5-tuple in zone 5; ICMPv6 both ways), read and
    /// written back the same.
    #[test]
    fn flushes_as_ovs_ofctl_sends_them() {
        let m = &ofctl("ct-flush-of10")[0];
        let f = CtFlush::decode(&msg(m)).unwrap();
        assert_eq!((f.ip_proto, f.zone), (6, Some(5)));
        assert_eq!(f.orig.src, v4([10, 1, 1, 1]));
        assert_eq!((f.orig.src_port, f.orig.dst_port), (1000, 80));
        assert!(f.reply.is_zero());
        let mut out = Vec::new();
        f.encode(Version::Of10, 2, &mut out);
        assert_eq!(hex(&out), hex(m));
        let m = &ofctl("ct-flush-icmp6-of15")[0];
        let f = CtFlush::decode(&msg(m)).unwrap();
        assert_eq!((f.ip_proto, f.zone), (58, None));
        assert_eq!(
            (f.orig.icmp_id(), f.orig.icmp_type(), f.orig.icmp_code()),
            (7, 128, 0)
        );
        assert_eq!(f.reply.icmp_type(), 129);
        out.clear();
        f.encode(Version::Of15, 2, &mut out);
        assert_eq!(hex(&out), hex(m));
    }

    /// `NXT_CT_FLUSH` vectors of OVS's tests/ofp-print.at (written by hand, the zone first):
    /// read, and the same flush when written back in OVS's order.
    #[test]
    fn flushes_as_ovs_prints_them() {
        const AT: &str = include_str!("../../../../testdata/openflow/ofp-print-at.txt");
        let mut n = 0;
        for (h, v) in AT.lines().filter_map(|l| l.split_once('\t')) {
            if v != "ok NXT_CT_FLUSH" {
                continue;
            }
            let m = unhex(h);
            let f = CtFlush::decode(&msg(&m)).unwrap();
            let mut out = Vec::new();
            f.encode(Version::from_wire(m[0]).unwrap(), 3, &mut out);
            assert_eq!(CtFlush::decode(&msg(&out)), Ok(f), "{h}");
            n += 1;
        }
        assert_eq!(n, 6);
    }

    #[test]
    fn mixed_families_and_padding_are_refused() {
        let mut f = CtFlush {
            ip_proto: 6,
            orig: CtTuple {
                src: v4([10, 0, 0, 1]),
                dst: v4([10, 0, 0, 2]),
                src_port: 1000,
                dst_port: 80,
            },
            reply: CtTuple::default(),
            zone: Some(5),
        };
        let mut out = Vec::new();
        f.encode(Version::Of15, 1, &mut out);
        assert_eq!(CtFlush::decode(&msg(&out)), Ok(f));
        f.reply.src = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        out.clear();
        f.encode(Version::Of15, 1, &mut out);
        assert_eq!(CtFlush::decode(&msg(&out)), Err(OfpErr::OfpbpcBadValue));
        out[17] = 1;
        assert_eq!(CtFlush::decode(&msg(&out)), Err(OfpErr::NxbrcMustBeZero));
        assert!(CtFlush::default().matches_all());
    }

    proptest! {
        #[test]
        fn flushes_round_trip(proto in prop_oneof![Just(0u8), Just(1), Just(6), Just(17), Just(58)],
                              a: [u8; 4], b: [u8; 4], sp: u16, dp: u16, zone: Option<u16>) {
            let t = CtTuple { src: v4(a), dst: v4(b), src_port: sp, dst_port: dp };
            let f = CtFlush { ip_proto: proto, orig: t, reply: t, zone };
            let mut out = Vec::new();
            f.encode(Version::Of10, 1, &mut out);
            let back = CtFlush::decode(&msg(&out)).unwrap();
            // Zero addresses are not written: they read back as zero.
            prop_assert_eq!(back, f);
        }

        #[test]
        fn random_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..120)) {
            let mut m = Vec::new();
            if MsgType::NxtCtFlush.encode(Version::Of13, 0, &body, &mut m).is_ok()
                && let Ok(d) = msgtype::decode(&m)
            {
                let _ = CtFlush::decode(&d);
            }
        }
    }
}
