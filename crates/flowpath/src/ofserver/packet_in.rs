//! Packet-ins: what the PMDs' `controller` actions send to the slow path
//! ([`datapath::upcall_queue`]) becomes `OFPT_PACKET_IN`, `NXT_PACKET_IN` or
//! `NXT_PACKET_IN2` for each connection of the bridge that wants it (OVS's
//! `process_upcall()` for `CONTROLLER_UPCALL`, then `connmgr_send_async_msg()`).
//!
//! The datapath action's cookie (`controller(reason=..,recirc_id=..,rule_cookie=..,
//! controller_id=..,...)`) names the frozen state translation made at the action: the bridge,
//! the rule's table, the OpenFlow input port, registers and metadata, tunnel metadata and
//! whether conntrack ran. The packet itself is the datapath's at the action, so it carries
//! the actions before it. A connection gets the packet-in when it has the action's controller
//! id, and its asynchronous configuration takes the reason (a service connection none until
//! it sets a `miss_send_len`); OVS 3.1 sends whole packets whatever `max_len` says, and so
//! does this. What a connection does not read in time is dropped by its bounded queue of
//! asynchronous messages, counted there. The packets translation gave BFD
//! (`slow_path(bfd)`) go to their port's session instead, and LACPDUs (`slow_path(lacp)`) to
//! their bond's LACP.

use datapath::upcall_queue::{UpcallQueue, UserspaceUpcall};
use flow::FlowKey;
use ofproto::fields::FieldId;
use ofproto::pipekey::{PipeKey, PipeMask, PipeMatch};
use ofproto::recirc::FrozenState;
use openflow::conn::{Dest, EventLoop, MsgKind};
use openflow::msgs::async_config::AsyncMsg;
use openflow::msgs::packet_in::{PacketIn, PacketInReason};
use openflow::nxm::TlvLens;

use std::collections::BTreeMap;
use std::sync::Arc;

use ofproto::ofproto::Ofproto;
use openflow::conn::ConnId;

use super::ofconn::OfConn;

/// What a `controller(...)` cookie says (OVS's `struct user_action_cookie`'s controller part).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ControllerCookie {
    pub(crate) reason: u8,
    pub(crate) dont_send: bool,
    pub(crate) continuation: bool,
    pub(crate) recirc_id: u32,
    pub(crate) rule_cookie: u64,
    pub(crate) controller_id: u16,
    pub(crate) max_len: u16,
}

impl ControllerCookie {
    /// Reads the text translation writes; `None` for any other cookie.
    pub(crate) fn parse(text: &[u8]) -> Option<ControllerCookie> {
        let s = std::str::from_utf8(text).ok()?;
        let inner = s.strip_prefix("controller(")?.strip_suffix(')')?;
        let mut c = ControllerCookie::default();
        for kv in inner.split(',') {
            let (k, v) = kv.split_once('=')?;
            let num = |v: &str| -> Option<u64> {
                match v.strip_prefix("0x") {
                    Some(h) => u64::from_str_radix(h, 16).ok(),
                    None => v.parse().ok(),
                }
            };
            let n = num(v)?;
            match k {
                "reason" => c.reason = u8::try_from(n).ok()?,
                "dont_send" => c.dont_send = n != 0,
                "continuation" => c.continuation = n != 0,
                "recirc_id" => c.recirc_id = u32::try_from(n).ok()?,
                "rule_cookie" => c.rule_cookie = n,
                "controller_id" => c.controller_id = u16::try_from(n).ok()?,
                "max_len" => c.max_len = u16::try_from(n).ok()?,
                _ => {}
            }
        }
        Some(c)
    }
}

/// The fields of a packet-in's metadata that go in when not zero, in the table's terms
/// (OVS's `flow_get_metadata()`).
const METADATA_FIELDS: [FieldId; 13] = [
    FieldId::TUN_ID,
    FieldId::TUN_FLAGS,
    FieldId::TUN_SRC,
    FieldId::TUN_DST,
    FieldId::TUN_IPV6_SRC,
    FieldId::TUN_IPV6_DST,
    FieldId::TUN_GBP_ID,
    FieldId::TUN_GBP_FLAGS,
    FieldId::METADATA,
    FieldId::PKT_MARK,
    FieldId::CT_ZONE,
    FieldId::CT_MARK,
    FieldId::CT_LABEL,
];

/// The metadata match of a packet-in for the pipeline's flow `k` at the action.
pub(crate) fn flow_metadata(k: &PipeKey) -> PipeMatch {
    let mut m = PipeMask::new();
    let nonzero = |f: FieldId| f.field().get(k) != 0;
    let mut take = |f: FieldId| f.field().unwildcard(&mut m);
    for f in METADATA_FIELDS {
        if nonzero(f) {
            take(f);
        }
    }
    // Present options, whatever their values (OVS's `tun_metadata_get_fmd()`).
    for n in 0..ofproto::fields::N_TUN_METADATA {
        if ofproto::tun_md::present(&k.meta, n) {
            take(FieldId::tun_metadata(n));
        }
    }
    for i in 0..16 {
        if nonzero(FieldId::reg(i)) {
            take(FieldId::reg(i));
        }
    }
    take(FieldId::IN_PORT);
    if nonzero(FieldId::CT_STATE) {
        take(FieldId::CT_STATE);
        take(FieldId::ETH_TYPE);
        let et = k.dp.eth_type();
        if nonzero(FieldId::CT_NW_PROTO) && matches!(et, 0x0800 | 0x86dd) {
            let (src, dst) = if et == 0x0800 {
                (FieldId::CT_NW_SRC, FieldId::CT_NW_DST)
            } else {
                (FieldId::CT_IPV6_SRC, FieldId::CT_IPV6_DST)
            };
            for f in [
                src,
                dst,
                FieldId::CT_NW_PROTO,
                FieldId::CT_TP_SRC,
                FieldId::CT_TP_DST,
            ] {
                take(f);
            }
        }
    }
    let mut key = PipeKey::new();
    for f in ofproto::fields::fields() {
        if !f.is_matched(&m) {
            continue;
        }
        if let ofproto::fields::Loc::TunMetadata(n) = f.loc {
            let (v, len) = ofproto::tun_md::value(&k.dp, &k.meta, n);
            ofproto::fields::set_tun_md_wide(&mut key.dp.0, &mut key.meta, n, &v[..len]);
        } else {
            f.set(&mut key, f.get(k));
        }
    }
    PipeMatch::new(&key, &m)
}

/// The pipeline's flow at the action: the packet as the datapath had it, with the input port,
/// registers, metadata and tunnel of the frozen state.
fn pipeline_flow(up: &UserspaceUpcall, st: &FrozenState) -> PipeKey {
    let mut key = FlowKey::new();
    datapath::pmd::key_metadata(&up.packet, &mut key);
    flow::extract(up.packet.data(), &mut key);
    let mut k = PipeKey {
        dp: key,
        meta: st.meta,
    };
    k.dp.set_in_port(st.in_port);
    ofproto::recirc::tunnel_restore(&mut k.dp, st.tunnel.as_deref());
    if !st.conntracked {
        for f in [
            FieldId::CT_STATE,
            FieldId::CT_ZONE,
            FieldId::CT_MARK,
            FieldId::CT_LABEL,
            FieldId::CT_NW_PROTO,
        ] {
            f.field().set(&mut k, 0);
        }
    }
    k
}

/// Takes every packet waiting in `queues` and sends its packet-ins to `conns`.
pub(crate) fn send_packet_ins(
    of: &Ofproto,
    conns: &BTreeMap<ConnId, OfConn>,
    queues: &[Arc<UpcallQueue>],
    ev: &mut EventLoop,
) {
    for q in queues {
        q.drain(|up| packet_in(of, conns, up, ev));
    }
}

/// Sends the packet-ins of one packet.
fn packet_in(
    of: &Ofproto,
    conns: &BTreeMap<ConnId, OfConn>,
    up: &UserspaceUpcall,
    ev: &mut EventLoop,
) {
    {
        if up.userdata() == ofproto::bfd::SLOW_PATH_COOKIE.as_bytes() {
            let mut key = FlowKey::new();
            datapath::pmd::key_metadata(&up.packet, &mut key);
            flow::extract(up.packet.data(), &mut key);
            of.bfd_receive(&key, up.packet.data());
            return;
        }
        if up.userdata() == ofproto::xlate::lacp::SLOW_PATH_COOKIE.as_bytes() {
            let mut key = FlowKey::new();
            datapath::pmd::key_metadata(&up.packet, &mut key);
            flow::extract(up.packet.data(), &mut key);
            of.lacp_receive(&key, up.packet.data());
            return;
        }
        let Some(c) = ControllerCookie::parse(up.userdata()) else {
            return;
        };
        if c.dont_send {
            return;
        }
        let (st, tlv) = {
            let pipe = of.pipe.read().unwrap_or_else(|e| e.into_inner());
            let Some(st) = pipe.recirc.get(c.recirc_id) else {
                return;
            };
            let Some(b) = pipe.bridge(&st.bridge) else {
                return;
            };
            (st, TlvLens::from_tlv_map(&b.tlv_map))
        };
        let reason = PacketInReason::from_code(c.reason).unwrap_or(PacketInReason::Action);
        let k = pipeline_flow(up, &st);
        let pi = PacketIn {
            packet: up.packet.data().to_vec(),
            total_len: up.total_len as u32,
            buffer_id: openflow::msgs::packet_in::NO_BUFFER,
            reason,
            // A paused pipeline's packet-in names no table or cookie (OVS's
            // `emit_continuation()` leaves them 0).
            table_id: if c.continuation { 0 } else { st.table },
            cookie: if c.continuation { 0 } else { c.rule_cookie },
            metadata: flow_metadata(&k),
            userdata: st.userdata.clone(),
            continuation: c
                .continuation
                .then(|| super::packet_out::continuation(&st, up.packet.meta.in_port)),
        };
        for (id, conn) in conns {
            if conn.bridge != st.bridge
                || conn.controller_id != c.controller_id
                || !conn.receives_async(AsyncMsg::PacketIn, u32::from(c.reason))
            {
                continue;
            }
            let m = pi.encode(conn.version, conn.packet_in_format, &tlv);
            ev.send(Dest::Conn(*id), m, MsgKind::Async);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_translation_writes_is_read_back() {
        let c = ControllerCookie::parse(
            b"controller(reason=6,dont_send=0,continuation=0,recirc_id=12,rule_cookie=0x1f,\
              controller_id=3,max_len=65535)",
        )
        .unwrap();
        assert_eq!(
            c,
            ControllerCookie {
                reason: 6,
                dont_send: false,
                continuation: false,
                recirc_id: 12,
                rule_cookie: 0x1f,
                controller_id: 3,
                max_len: 65535,
            }
        );
        assert_eq!(ControllerCookie::parse(b"slow_path(match)"), None);
        assert_eq!(ControllerCookie::parse(&[0xff, 0]), None);
    }

    #[test]
    fn metadata_has_the_input_port_and_what_is_not_zero() {
        let mut k = PipeKey::new();
        FieldId::IN_PORT.field().set(&mut k, 0);
        FieldId::reg(3).field().set(&mut k, 9);
        let m = flow_metadata(&k);
        assert!(FieldId::IN_PORT.field().is_matched(m.mask()));
        assert!(FieldId::reg(3).field().is_matched(m.mask()));
        assert!(!FieldId::reg(2).field().is_matched(m.mask()));
        assert!(!FieldId::METADATA.field().is_matched(m.mask()));
        assert_eq!(FieldId::reg(3).field().get(m.key()), 9);
    }

    #[test]
    fn metadata_has_present_tunnel_options_whole_even_when_zero() {
        // Fields 41 and 42, which no other test here maps (the layout is the process's).
        let mut t = ofproto::tun_md::TunTable::default();
        let m = |kind, len| ofproto::tunnel::TlvMapping {
            class: 0xffff,
            kind,
            len,
        };
        t.add(&[(41, m(1, 32)), (42, m(2, 4))]).unwrap();
        let mut k = PipeKey::new();
        let wide: Vec<u8> = (1..=32).collect();
        ofproto::fields::set_tun_md_wide(&mut k.dp.0, &mut k.meta, 41, &wide);
        ofproto::fields::set_tun_md_wide(&mut k.dp.0, &mut k.meta, 42, &[]);
        let md = flow_metadata(&k);
        assert!(FieldId::tun_metadata(42).field().is_matched(md.mask()));
        assert!(!FieldId::tun_metadata(43).field().is_matched(md.mask()));
        let (v, len) = ofproto::tun_md::value(&md.key().dp, &md.key().meta, 41);
        assert_eq!(&v[..len], &wide[..]);
        let (mk, _) = ofproto::tun_md::value(&md.mask().dp, &md.mask().meta, 41);
        assert!(mk[..len].iter().all(|&b| b == 0xff));
    }
}
