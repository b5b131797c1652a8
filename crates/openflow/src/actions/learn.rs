//! `NXAST_LEARN`, `NXAST_LEARN2` and `NXAST_CONJUNCTION` on the wire (OVS's
//! `lib/ofp-actions.c`), the same bytes in every OpenFlow version, with OVS's checks and errors.
//!
//! A learn action is a fixed part (`nx_action_learn`, 32 bytes: timeouts, priority, cookie,
//! flags, table, FIN timeouts; `nx_action_learn2` adds a limit and the result bit's offset and,
//! with `NX_LEARN_F_WRITE_RESULT`, its field header) then specs until the end or a zero header.
//! A spec header packs the source kind (bit 13: field or immediate), the destination kind
//! (bits 11-12: match, load, output) and the width (bits 0-9); a field source or destination is
//! a 32-bit NXM header and a 16-bit offset, an immediate is the width rounded up to 16 bits.
//! OVS sends `NXAST_LEARN2` only when a limit or result bit needs it.

use ofproto::fields::{FieldId, Subfield, ones};
use ofproto::learn::{
    Learn, LearnDst, LearnSpec, LearnSrc, NX_LEARN_F_DELETE_LEARNED, NX_LEARN_F_SEND_FLOW_REM,
    NX_LEARN_F_WRITE_RESULT,
};
use ofproto::pipekey::{PipeKey, PipeMask};
use ofproto::syntax::OfAction;

use super::{be16, be32, be64};
use crate::error::OfpErr;
use crate::nxm::{self, OxmHeader};

pub(super) const NXAST_LEARN: u16 = 16;
pub(super) const NXAST_CONJUNCTION: u16 = 34;
pub(super) const NXAST_LEARN2: u16 = 45;

const NX_LEARN_N_BITS_MASK: u16 = 0x3ff;
const NX_LEARN_SRC_IMMEDIATE: u16 = 1 << 13;
const NX_LEARN_DST_MATCH: u16 = 0;
const NX_LEARN_DST_LOAD: u16 = 1 << 11;
const NX_LEARN_DST_OUTPUT: u16 = 2 << 11;
const NX_LEARN_DST_MASK: u16 = 3 << 11;

/// `NXAST_CONJUNCTION`: 16 bytes, clause and count checked as OVS checks them.
pub(super) fn decode_conjunction(b: &[u8]) -> Result<OfAction, OfpErr> {
    if b.len() != 16 {
        return Err(OfpErr::OfpbacBadLen);
    }
    let (clause, n_clauses) = (b[10], b[11]);
    if !(2..=64).contains(&n_clauses) || clause >= n_clauses {
        return Err(OfpErr::NxbacBadConjunction);
    }
    Ok(OfAction::Conjunction {
        id: be32(b, 12),
        clause,
        n_clauses,
    })
}

/// The body of an `NXAST_CONJUNCTION` after its 10-byte header.
pub(super) fn conjunction_body(id: u32, clause: u8, n_clauses: u8) -> Vec<u8> {
    let mut body = vec![clause, n_clauses];
    body.extend_from_slice(&id.to_be_bytes());
    body
}

/// OVS's `ofpacts_verify()` rule: a list with a conjunction has only conjunctions and notes
/// (`NXBAC_BAD_CONJUNCTION`).
pub(super) fn verify_conjunctions(actions: &[OfAction]) -> Result<(), OfpErr> {
    let has = actions
        .iter()
        .any(|a| matches!(a, OfAction::Conjunction { .. }));
    let others = actions
        .iter()
        .any(|a| !matches!(a, OfAction::Conjunction { .. } | OfAction::Note(_)));
    if has && others {
        Err(OfpErr::NxbacBadConjunction)
    } else {
        Ok(())
    }
}

/// A field named by a 32-bit NXM header in a learn spec (`OFPBAC_BAD_SET_TYPE` when unknown,
/// as OVS's `mf_vl_mff_mf_from_nxm_header()`), with its offset and the spec's width, in range
/// (`OFPBAC_BAD_SET_LEN`, what OVS's check of the action finds).
fn spec_subfield(b: &[u8], at: usize, n_bits: u32) -> Result<Subfield, OfpErr> {
    let hdr = OxmHeader::parse(&b[at..at + 4]).map_err(|_| OfpErr::OfpbacBadSetType)?;
    let fh = nxm::field_by_header(&hdr).ok_or(OfpErr::OfpbacBadSetType)?;
    let ofs = u32::from(be16(b, at + 4));
    if n_bits == 0 || ofs + n_bits > fh.field.field().n_bits {
        return Err(OfpErr::OfpbacBadSetLen);
    }
    Ok(Subfield {
        field: fh.field,
        ofs,
        n_bits,
    })
}

/// Decodes `NXAST_LEARN` or `NXAST_LEARN2` (framing and vendor checked).
pub(super) fn decode_learn(b: &[u8], learn2: bool) -> Result<OfAction, OfpErr> {
    let fixed = if learn2 { 40 } else { 32 };
    if b.len() < fixed {
        return Err(OfpErr::OfpbacBadLen);
    }
    if learn2 && be16(b, 38) != 0 {
        return Err(OfpErr::NxbacMustBeZero);
    }
    if b[27] != 0 {
        return Err(OfpErr::OfpbacBadArgument);
    }
    let mut l = Learn {
        idle_timeout: be16(b, 10),
        hard_timeout: be16(b, 12),
        priority: be16(b, 14),
        cookie: be64(b, 16),
        flags: be16(b, 24),
        table: b[26],
        fin_idle_timeout: be16(b, 28),
        fin_hard_timeout: be16(b, 30),
        ..Learn::default()
    };
    if l.table == 0xff {
        return Err(OfpErr::OfpbacBadArgument);
    }
    let mut p = fixed;
    if learn2 {
        l.limit = be32(b, 32);
        let allowed =
            NX_LEARN_F_SEND_FLOW_REM | NX_LEARN_F_DELETE_LEARNED | NX_LEARN_F_WRITE_RESULT;
        if l.flags & !allowed != 0 {
            return Err(OfpErr::OfpbacBadArgument);
        }
        let ofs = u32::from(be16(b, 36));
        if l.flags & NX_LEARN_F_WRITE_RESULT != 0 {
            let (field, n) = pull_header(b, p)?;
            if !field.field().writable {
                return Err(OfpErr::OfpbacBadSetArgument);
            }
            if ofs >= field.field().n_bits {
                return Err(OfpErr::OfpbacBadSetLen);
            }
            l.result_dst = Some(Subfield {
                field,
                ofs,
                n_bits: 1,
            });
            p += n;
        } else if ofs != 0 {
            return Err(OfpErr::OfpbacBadArgument);
        }
    } else if l.flags & !(NX_LEARN_F_SEND_FLOW_REM | NX_LEARN_F_DELETE_LEARNED) != 0 {
        return Err(OfpErr::OfpbacBadArgument);
    }
    while p < b.len() {
        if b.len() - p < 2 {
            return Err(OfpErr::OfpbacBadLen);
        }
        let header = be16(b, p);
        if header == 0 {
            break;
        }
        p += 2;
        let imm = header & NX_LEARN_SRC_IMMEDIATE != 0;
        let dst_type = header & NX_LEARN_DST_MASK;
        let n_bits = u32::from(header & NX_LEARN_N_BITS_MASK);
        if dst_type == NX_LEARN_DST_MASK || (dst_type == NX_LEARN_DST_OUTPUT && imm) {
            return Err(OfpErr::OfpbacBadArgument);
        }
        let imm_len = 2 * n_bits.div_ceil(16) as usize;
        let min = if imm { imm_len } else { 6 }
            + if dst_type == NX_LEARN_DST_OUTPUT {
                0
            } else {
                6
            };
        if b.len() - p < min {
            return Err(OfpErr::OfpbacBadLen);
        }
        let src = if imm {
            let bytes = &b[p..p + imm_len];
            p += imm_len;
            let n_bytes = n_bits.div_ceil(8) as usize;
            let v = bytes[imm_len - n_bytes..]
                .iter()
                .fold(0u128, |v, &x| v.checked_shl(8).unwrap_or(0) | u128::from(x));
            LearnSrc::Imm(v & ones(n_bits))
        } else {
            let sf = spec_subfield(b, p, n_bits)?;
            p += 6;
            LearnSrc::Field(sf)
        };
        let dst = match dst_type {
            NX_LEARN_DST_OUTPUT => LearnDst::Output,
            _ => {
                let sf = spec_subfield(b, p, n_bits)?;
                p += 6;
                if dst_type == NX_LEARN_DST_MATCH {
                    LearnDst::Match(sf)
                } else {
                    LearnDst::Load(sf)
                }
            }
        };
        if imm && n_bits > 128 {
            return Err(OfpErr::OfpbacBadSetLen);
        }
        l.specs.push(LearnSpec { n_bits, src, dst });
    }
    if b[p.min(b.len())..].iter().any(|&x| x != 0) {
        return Err(OfpErr::OfpbacBadArgument);
    }
    Ok(OfAction::Learn(Box::new(l)))
}

/// A field header pulled from a stream (`nx_pull_header()`): the field and the header's length.
fn pull_header(b: &[u8], at: usize) -> Result<(FieldId, usize), OfpErr> {
    let hdr = OxmHeader::parse(&b[at..]).map_err(|_| OfpErr::OfpbmcBadLen)?;
    let fh = nxm::field_by_header(&hdr).ok_or(OfpErr::OfpbmcBadField)?;
    if hdr.hasmask {
        return Err(OfpErr::OfpbmcBadMask);
    }
    Ok((fh.field, hdr.header_len()))
}

/// The 32-bit NXM header of a field in a learn spec; `None` for a field without one
/// (`dl_vlan`, `dl_vlan_pcp`) or whose header is an experimenter's (8 bytes).
fn nxm_header(field: FieldId) -> Option<[u8; 4]> {
    let mut h = Vec::with_capacity(8);
    nxm::bare_header(field, 0)?.write(&mut h);
    h.try_into().ok()
}

/// The body of a learn action after its 10-byte header, and its subtype; `None` when a spec
/// names a field no 32-bit header names.
pub(super) fn learn_body(l: &Learn) -> Option<(u16, Vec<u8>)> {
    let learn2 = l.limit != 0 || l.flags & NX_LEARN_F_WRITE_RESULT != 0;
    let mut out = Vec::new();
    for v in [l.idle_timeout, l.hard_timeout, l.priority] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out.extend_from_slice(&l.cookie.to_be_bytes());
    out.extend_from_slice(&l.flags.to_be_bytes());
    out.push(l.table);
    out.push(0);
    out.extend_from_slice(&l.fin_idle_timeout.to_be_bytes());
    out.extend_from_slice(&l.fin_hard_timeout.to_be_bytes());
    if learn2 {
        out.extend_from_slice(&l.limit.to_be_bytes());
        let ofs = l.result_dst.map_or(0, |r| r.ofs) as u16;
        out.extend_from_slice(&ofs.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        if let Some(r) = l
            .result_dst
            .filter(|_| l.flags & NX_LEARN_F_WRITE_RESULT != 0)
            && let Some(h) = nxm::bare_header(r.field, 0)
        {
            h.write(&mut out);
        }
    }
    for s in &l.specs {
        let (src_bit, dst_bits) = (
            if matches!(s.src, LearnSrc::Imm(_)) {
                NX_LEARN_SRC_IMMEDIATE
            } else {
                0
            },
            match s.dst {
                LearnDst::Match(_) => NX_LEARN_DST_MATCH,
                LearnDst::Load(_) => NX_LEARN_DST_LOAD,
                LearnDst::Output => NX_LEARN_DST_OUTPUT,
            },
        );
        let header = (s.n_bits as u16 & NX_LEARN_N_BITS_MASK) | src_bit | dst_bits;
        out.extend_from_slice(&header.to_be_bytes());
        match s.src {
            LearnSrc::Field(sf) => {
                out.extend_from_slice(&nxm_header(sf.field)?);
                out.extend_from_slice(&(sf.ofs as u16).to_be_bytes());
            }
            LearnSrc::Imm(v) => {
                let len = 2 * s.n_bits.div_ceil(16) as usize;
                let bytes = v.to_be_bytes();
                let mut imm = vec![0u8; len];
                let n = len.min(16);
                imm[len - n..].copy_from_slice(&bytes[16 - n..]);
                out.extend_from_slice(&imm);
            }
        }
        if let LearnDst::Match(sf) | LearnDst::Load(sf) = s.dst {
            out.extend_from_slice(&nxm_header(sf.field)?);
            out.extend_from_slice(&(sf.ofs as u16).to_be_bytes());
        }
    }
    Some((if learn2 { NXAST_LEARN2 } else { NXAST_LEARN }, out))
}

/// OVS's `learn_check()`: sources against the flow's match, destinations (in range, and
/// writable for a load) against the learned match as the immediate match specs build it
/// (`OFPBAC_MATCH_INCONSISTENT`, `OFPBAC_BAD_SET_ARGUMENT`).
pub(super) fn check_learn(l: &Learn, key: &PipeKey, mask: &PipeMask) -> Result<(), OfpErr> {
    let (mut dkey, mut dmask) = (PipeKey::new(), PipeMask::new());
    let inconsistent = |ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(OfpErr::OfpbacMatchInconsistent)
        }
    };
    for s in &l.specs {
        if let LearnSrc::Field(sf) = s.src {
            inconsistent(sf.field.field().prereq.is_met_match(key, mask))?;
        }
        match s.dst {
            LearnDst::Match(sf) => {
                inconsistent(sf.field.field().prereq.is_met_match(&dkey, &dmask))?;
                if let LearnSrc::Imm(v) = s.src {
                    ofproto::learn::match_subfield(&mut dkey, &mut dmask, sf, v);
                }
            }
            LearnDst::Load(sf) => {
                inconsistent(sf.field.field().prereq.is_met_match(&dkey, &dmask))?;
                if !sf.field.field().writable {
                    return Err(OfpErr::OfpbacBadSetArgument);
                }
            }
            LearnDst::Output => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::{FlowCtx, decode_actions, encode_actions};
    use super::*;
    use crate::header::Version;
    use crate::nxm::tests::unhex as hex;

    fn parse(text: &str) -> Vec<OfAction> {
        ofproto::syntax::parse_flow(
            &format!("tcp,actions={text}"),
            ofproto::syntax::FlowKind::Add,
            &ofproto::syntax::NoPortNames,
        )
        .unwrap()
        .actions
    }

    fn encode(actions: &[OfAction]) -> String {
        let mut out = Vec::new();
        encode_actions(Version::Of10, actions, FlowCtx::default(), &mut out).unwrap();
        out.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn format(actions: &[OfAction]) -> String {
        let mut s = String::new();
        ofproto::syntax::format_actions(&mut s, actions, &ofproto::syntax::NoPortNames);
        s
    }

    /// (text as OVS prints it, bytes `ovs-ofctl parse-actions OpenFlow10` decodes to it).
    const FIXTURES: [(&str, &str); 3] = [
        ("conjunction(7,2/3)", "ffff0010000023200022010300000007"),
        (
            "learn(table=69,delete_learned,cookie=0xab,OXM_OF_METADATA[],eth_type=0x800,\
             NXM_OF_IP_SRC[],ip_dst=10.0.0.1,nw_proto=6,NXM_OF_TCP_SRC[]=NXM_OF_TCP_DST[],\
             load:0x1->NXM_NX_REG10[7])",
            "ffff007800002320001000000000800000000000000000ab00024500000000000040800004080000\
             80000408000020100800000006020000002000000e04000000000e04000020200a00000100001004\
             00002008000600000c01000000100000140200000000120200002801000100011404000700000000",
        ),
        (
            "learn(table=2,idle_timeout=10,hard_timeout=20,fin_idle_timeout=1,\
             fin_hard_timeout=2,priority=5,send_flow_rem,limit=3,result_dst=NXM_NX_REG0[1],\
             NXM_NX_REG0[0..3]=0x5,load:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],\
             output:NXM_OF_IN_PORT[],in_port=3,eth_dst=aa:bb:cc:dd:ee:ff)",
            "ffff006800002320002d000a00140005000000000000000000050200000100020000000300010000\
             000100042004000500010004000008300000040600000000020600001010000000020000201000\
             030000000200002030aabbccddeeff00000206000000000000",
        ),
    ];

    #[test]
    fn ovs_bytes_decode_print_and_encode_back() {
        for (text, bytes) in FIXTURES {
            let b = hex(bytes);
            for v in [Version::Of10, Version::Of13, Version::Of15] {
                let decoded = decode_actions(v, &b).unwrap();
                assert_eq!(format(&decoded), text);
            }
            assert_eq!(encode(&parse(text)), bytes, "{text}");
        }
    }

    /// A learn action: its fixed part (table 1, the default priority, `flags`) then `specs`.
    fn learn_bytes(flags: u16, specs: &[u8]) -> Vec<u8> {
        let mut b = hex("ffff000000002320001000000000800000000000000000000000010000000000");
        b[24..26].copy_from_slice(&flags.to_be_bytes());
        b.extend_from_slice(specs);
        b.resize(b.len().next_multiple_of(8), 0);
        let n = b.len() as u16;
        b[2..4].copy_from_slice(&n.to_be_bytes());
        b
    }

    #[test]
    fn malformed_learn_and_conjunction_get_ovs_errors() {
        let err = |b: &[u8]| decode_actions(Version::Of10, b).unwrap_err();
        // One clause, a clause beyond the count, 65 clauses.
        assert_eq!(
            err(&hex("ffff0010000023200022000100000007")),
            OfpErr::NxbacBadConjunction
        );
        assert_eq!(
            err(&hex("ffff0010000023200022020200000007")),
            OfpErr::NxbacBadConjunction
        );
        assert_eq!(
            err(&hex("ffff0010000023200022004100000007")),
            OfpErr::NxbacBadConjunction
        );
        // A conjunction beside an output; beside a note it is fine.
        let conj = "ffff0010000023200022000200000007";
        assert_eq!(
            err(&hex(&format!("{conj}0000000800010000"))),
            OfpErr::NxbacBadConjunction
        );
        let note = "ffff0010000023200008010200000000";
        assert!(decode_actions(Version::Of10, &hex(&format!("{note}{conj}"))).is_ok());
        // Learn: the fixed part alone is fine.
        assert!(decode_actions(Version::Of10, &learn_bytes(0, &[])).is_ok());
        // Shorter than its fixed part.
        let mut short = learn_bytes(0, &[]);
        short.truncate(24);
        short[2..4].copy_from_slice(&24u16.to_be_bytes());
        assert_eq!(err(&short), OfpErr::OfpbacBadLen);
        // Table 255, a flag only NXAST_LEARN2 has, a nonzero pad.
        let mut b = learn_bytes(0, &[]);
        b[26] = 0xff;
        assert_eq!(err(&b), OfpErr::OfpbacBadArgument);
        assert_eq!(err(&learn_bytes(4, &[])), OfpErr::OfpbacBadArgument);
        let mut b = learn_bytes(0, &[]);
        b[27] = 1;
        assert_eq!(err(&b), OfpErr::OfpbacBadArgument);
        // An immediate output spec; a spec naming an unknown field; one cut short; trailing
        // garbage after the zero header that ends the specs.
        assert_eq!(
            err(&learn_bytes(0, &hex("3010"))),
            OfpErr::OfpbacBadArgument
        );
        assert_eq!(
            err(&learn_bytes(0, &hex("0010ffff040000000000000e040000"))),
            OfpErr::OfpbacBadSetType
        );
        assert_eq!(err(&learn_bytes(0, &hex("00200000"))), OfpErr::OfpbacBadLen);
        assert_eq!(
            err(&learn_bytes(0, &hex("00000001"))),
            OfpErr::OfpbacBadArgument
        );
        // A field spec past the end of its field.
        assert_eq!(
            err(&learn_bytes(0, &hex("0020000104040001000104040000"))),
            OfpErr::OfpbacBadSetLen
        );
    }

    fn subfield() -> impl Strategy<Value = Subfield> {
        prop_oneof![
            Just(Subfield::whole(FieldId::IPV4_SRC)),
            Just(Subfield::whole(FieldId::ETH_DST)),
            Just(Subfield::whole(FieldId::METADATA)),
            (0u32..16).prop_map(|o| Subfield {
                field: FieldId::reg(3),
                ofs: o,
                n_bits: 16
            }),
            (0u32..8).prop_map(|n| Subfield::whole(FieldId::reg(n as usize))),
        ]
    }

    fn spec() -> impl Strategy<Value = LearnSpec> {
        (subfield(), subfield(), any::<u128>(), 0u8..5).prop_map(|(a, b, v, k)| {
            let dst_of = |sf: Subfield| Subfield {
                n_bits: sf.n_bits.min(a.n_bits),
                ..sf
            };
            let src = Subfield {
                n_bits: a.n_bits.min(b.n_bits),
                ..a
            };
            let dst = dst_of(b);
            let dst = Subfield {
                n_bits: src.n_bits,
                ..dst
            };
            let n = src.n_bits;
            match k {
                0 => LearnSpec {
                    n_bits: n,
                    src: LearnSrc::Field(src),
                    dst: LearnDst::Match(dst),
                },
                1 => LearnSpec {
                    n_bits: n,
                    src: LearnSrc::Imm(v & ones(n)),
                    dst: LearnDst::Match(dst),
                },
                2 => LearnSpec {
                    n_bits: n,
                    src: LearnSrc::Field(src),
                    dst: LearnDst::Load(dst),
                },
                3 => LearnSpec {
                    n_bits: n,
                    src: LearnSrc::Imm(v & ones(n)),
                    dst: LearnDst::Load(dst),
                },
                _ => LearnSpec {
                    n_bits: n,
                    src: LearnSrc::Field(src),
                    dst: LearnDst::Output,
                },
            }
        })
    }

    prop_compose! {
        fn learn()(
            t in 0u8..255,
            times in any::<[u16; 5]>(),
            cookie in any::<u64>(),
            flags in 0u16..4,
            limit in prop_oneof![Just(0u32), any::<u32>()],
            result in proptest::option::of(0u32..32),
            specs in proptest::collection::vec(spec(), 0..6),
        ) -> Learn {
            Learn {
                table: t,
                idle_timeout: times[0],
                hard_timeout: times[1],
                fin_idle_timeout: times[2],
                fin_hard_timeout: times[3],
                priority: times[4],
                cookie,
                flags: flags | if result.is_some() { NX_LEARN_F_WRITE_RESULT } else { 0 },
                limit,
                result_dst: result.map(|o| Subfield { field: FieldId::reg(5), ofs: o, n_bits: 1 }),
                specs,
            }
        }
    }

    proptest! {
        /// Encoding then decoding gives the action back, in every version.
        #[test]
        fn learn_and_conjunction_round_trip(
            l in learn(),
            id in any::<u32>(),
            n in 2u8..=64,
            k in any::<prop::sample::Index>(),
        ) {
            let conj = OfAction::Conjunction { id, clause: k.index(usize::from(n)) as u8, n_clauses: n };
            for a in [OfAction::Learn(Box::new(l.clone())), conj] {
                for v in [Version::Of10, Version::Of13, Version::Of15] {
                    let mut out = Vec::new();
                    encode_actions(v, std::slice::from_ref(&a), FlowCtx::default(), &mut out).unwrap();
                    prop_assert_eq!(decode_actions(v, &out).unwrap(), vec![a.clone()]);
                }
            }
        }

        /// Random bodies behind a learn, learn2 or conjunction header never panic the decoder.
        #[test]
        fn random_bytes_never_panic(
            sub in prop_oneof![Just(16u16), Just(34), Just(45)],
            body in proptest::collection::vec(any::<u8>(), 0..120),
            flags in any::<u16>(),
        ) {
            let mut b = vec![0xff, 0xff, 0, 0, 0, 0, 0x23, 0x20];
            b.extend_from_slice(&sub.to_be_bytes());
            b.extend_from_slice(&body);
            if b.len() >= 26 {
                b[24..26].copy_from_slice(&(flags & 7).to_be_bytes());
            }
            b.resize(b.len().next_multiple_of(8), 0);
            let len = b.len() as u16;
            b[2..4].copy_from_slice(&len.to_be_bytes());
            let _ = decode_actions(Version::Of10, &b);
            let _ = decode_actions(Version::Of15, &b);
        }
    }
}
