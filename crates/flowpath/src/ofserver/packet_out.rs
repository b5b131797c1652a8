//! Packets a controller sends into the pipeline: `OFPT_PACKET_OUT` (OVS's
//! `handle_packet_out()`) and `NXT_RESUME` (OVS's `handle_nxt_resume()`, a paused pipeline
//! going on).
//!
//! Both become a frozen state ([`ofproto::recirc`]): the bridge, the input port, the
//! registers and metadata the message gives, and the actions to run (the packet-out's, or the
//! continuation's with the table and cookie of the rules they came from). The packet enters
//! the datapath with that state's recirculation id; its upcall thaws the state and translates
//! the actions as the tables would (`resubmit`, `output`, `NORMAL`, `ct`...), and the
//! datapath runs the result. The megaflow it leaves is one of a recirculation, freed with the
//! id when no packet uses it.
//!
//! A continuation names its bridge by a 16-byte id ([`bridge_id`]): this process's random
//! half and the bridge's name. One from another run of the switch, from a deleted bridge, or
//! made up, is `NXR_STALE`; its actions are checked as a packet-out's, so a forged one can do
//! no more than a packet-out could.

use std::sync::{Mutex, OnceLock};

use datapath::actions::DpAction;
use datapath::dpif::Datapath;
use datapath::packet::Packet;
use flow::FlowKey;
use ofproto::ofproto::Ofproto;
use ofproto::pipekey::PipeMatch;
use ofproto::recirc::{FrozenAction, FrozenState};
use ofproto::syntax::OfAction;
use openflow::actions::check_actions;
use openflow::error::OfpErr;
use openflow::header::Version;
use openflow::msgs::packet_in::{ActionGroup, Continuation, NO_BUFFER, PacketIn};
use openflow::msgs::packet_out::PacketOut;
use openflow::msgtype::Message;

use super::ofconn::OfConn;

/// The datapath in_port of a packet that came from no datapath port (the controller, `LOCAL`
/// without a port, `NONE`): OVS's `ODPP_NONE`.
const ODPP_NONE: u32 = u32::MAX;

/// The 16-byte id a continuation carries for bridge `name`.
pub(crate) fn bridge_id(name: &str) -> [u8; 16] {
    static NONCE: OnceLock<u64> = OnceLock::new();
    let nonce = *NONCE.get_or_init(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        t ^ (u64::from(std::process::id()) << 32) ^ 0x9e37_79b9_7f4a_7c15
    });
    // FNV-1a of the name.
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let mut id = [0; 16];
    id[..8].copy_from_slice(&nonce.to_be_bytes());
    id[8..].copy_from_slice(&h.to_be_bytes());
    id
}

/// The continuation of a paused pipeline whose frozen state is `st`, the packet having come
/// in on datapath port `odp_port`: the frozen actions grouped by the rule they belong to.
pub(crate) fn continuation(st: &FrozenState, odp_port: u32) -> Continuation {
    let mut groups = vec![ActionGroup::default()];
    for fa in &st.actions {
        match fa {
            FrozenAction::Unroll { table, cookie } => groups.push(ActionGroup {
                table: *table,
                cookie: *cookie,
                actions: Vec::new(),
            }),
            FrozenAction::Of(a) => groups
                .last_mut()
                .expect("starts with one")
                .actions
                .push(a.clone()),
        }
    }
    groups.retain(|g| !g.actions.is_empty());
    Continuation {
        bridge: bridge_id(&st.bridge),
        stack: stack_values(&st.stack),
        mirrors: st.mirrors,
        conntracked: st.conntracked,
        actions: groups,
        action_set: st.action_set.clone(),
        odp_port: if odp_port == ODPP_NONE { 0 } else { odp_port },
    }
}

/// The values of a data stack in the pipeline's layout (each value's bytes, then their
/// count), the top first, as a continuation carries them.
fn stack_values(stack: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut end = stack.len();
    while let Some(&len) = end.checked_sub(1).and_then(|i| stack.get(i)) {
        let Some(start) = (end - 1).checked_sub(usize::from(len)) else {
            break;
        };
        out.push(stack[start..end - 1].to_vec());
        end = start;
    }
    out
}

/// The data stack, in the pipeline's layout, of a continuation's `values` (the top first).
fn stack_of(values: &[Vec<u8>]) -> Vec<u8> {
    let mut stack = Vec::new();
    for v in values.iter().rev() {
        stack.extend_from_slice(v);
        // A continuation's values are at most 128 bytes.
        stack.push(v.len() as u8);
    }
    stack
}

/// What a pass resumes with besides its actions and the message's metadata: the paused
/// translation's state a continuation carries (none for a packet-out).
#[derive(Default)]
struct Thaw {
    conntracked: bool,
    stack: Vec<u8>,
    action_set: Vec<ofproto::syntax::OfAction>,
    mirrors: u32,
    /// The actions are a packet-out's (see [`FrozenState::packet_out`]).
    packet_out: bool,
}

/// `OFPT_PACKET_OUT` on a connection of `conn.bridge`.
pub(crate) fn packet_out(
    of: &Ofproto,
    dp: &Mutex<Datapath>,
    conn: &OfConn,
    m: &Message<'_>,
) -> Result<(), OfpErr> {
    crate::coverage_cmd::OFPROTO_PACKET_OUT.inc();
    let po = decode_checked(conn.version, m)?;
    check_in_bridge(of, &conn.bridge, &po.actions)?;
    if po.actions.is_empty() {
        return Ok(());
    }
    let actions = po.actions.into_iter().map(FrozenAction::Of).collect();
    inject(
        of,
        dp,
        &conn.bridge,
        &po.metadata,
        Thaw {
            packet_out: true,
            ..Thaw::default()
        },
        actions,
        po.packet,
        None,
    )
}

/// A packet-out decoded and checked as OVS's `ofproto_packet_out_init()` checks it, before
/// any table is consulted: no buffer, actions consistent with the packet.
fn decode_checked(version: Version, m: &Message<'_>) -> Result<PacketOut, OfpErr> {
    let po = PacketOut::decode(m)?;
    if po.buffer_id != NO_BUFFER {
        return Err(OfpErr::OfpbrcBufferUnknown);
    }
    let flow = packet_flow(&po.packet, &po.metadata);
    check_actions(version, 0, &po.actions, &flow)?;
    Ok(po)
}

/// Checks a packet-out's actions against the bridge's groups and meters, as OVS's
/// `ofproto_check_ofpacts()` does when the packet-out is to run.
fn check_in_bridge(of: &Ofproto, bridge: &str, actions: &[OfAction]) -> Result<(), OfpErr> {
    if of.missing_group(bridge, actions).is_some() {
        return Err(OfpErr::OfpbacBadOutGroup);
    }
    of.check_meters(bridge, actions)
        .map_err(super::meter_table::ofp_err)
}

/// Checks `msg`, an `OFPT_PACKET_OUT` (header included) a connection of OpenFlow version
/// `version` adds to a bundle, as OVS checks it then: what does not depend on the tables.
pub(crate) fn check_bundled(version: Version, msg: &[u8]) -> Result<(), OfpErr> {
    decode_checked(version, &openflow::msgtype::decode(msg)?).map(drop)
}

/// A bundled packet-out translated where it stood in its commit: the packet and the datapath
/// actions to run on it once the commit succeeded (OVS's `ofproto_packet_out_finish()`).
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) packet: Packet,
    pub(crate) actions: Vec<DpAction>,
}

/// Translates the bundled packet-out `msg` (header included) of a connection of OpenFlow
/// version `version` where it stands in the commit to `bridge`: its lookups see table version
/// `tables`, with the flow mods staged before it (OVS's `ofproto_packet_out_start()`). A
/// group or meter it names must exist by then. `None` for a packet-out without actions.
pub(crate) fn prepare_bundled(
    of: &Ofproto,
    bridge: &str,
    tables: ofproto::classifier::Version,
    version: Version,
    msg: &[u8],
) -> Result<Option<Prepared>, OfpErr> {
    crate::coverage_cmd::OFPROTO_PACKET_OUT.inc();
    let po = decode_checked(version, &openflow::msgtype::decode(msg)?)?;
    check_in_bridge(of, bridge, &po.actions)?;
    if po.actions.is_empty() {
        return Ok(None);
    }
    let actions = po.actions.into_iter().map(FrozenAction::Of).collect();
    let thaw = Thaw {
        packet_out: true,
        ..Thaw::default()
    };
    let packet = freeze(of, bridge, &po.metadata, thaw, actions, &po.packet, None)?;
    let mut key = FlowKey::new();
    key.set_in_port(packet.meta.in_port)
        .set_recirc_id(packet.meta.recirc_id);
    if packet.meta.pkt_mark != 0 {
        key.set_pkt_mark(packet.meta.pkt_mark);
    }
    if packet.meta.ct_state != 0 {
        datapath::ct::to_key(&packet, &mut key, true);
    }
    flow::extract(packet.data(), &mut key);
    let x = {
        let pipe = of.pipe.read().unwrap_or_else(|e| e.into_inner());
        ofproto::xlate::translate_in_version(&pipe, &key, tables, None)
    };
    // Actions the datapath cannot run drop the packet, as an upcall's would.
    let actions = datapath::actions::compile(&x.actions).unwrap_or_default();
    Ok(Some(Prepared { packet, actions }))
}

/// Runs a bundled packet-out prepared by [`prepare_bundled`], its commit done.
pub(crate) fn run_prepared(dp: &Mutex<Datapath>, p: Prepared) {
    let Ok(dp) = dp.lock() else {
        return;
    };
    dp.execute_actions(p.packet, p.actions);
    crate::coverage_cmd::DPIF_EXECUTE.inc();
}

/// `NXT_RESUME` on a connection of `conn.bridge`.
pub(crate) fn resume(
    of: &Ofproto,
    dp: &Mutex<Datapath>,
    conn: &OfConn,
    m: &Message<'_>,
) -> Result<(), OfpErr> {
    let pi = PacketIn::decode(m)?;
    let c = pi.continuation.as_ref().ok_or(OfpErr::NxrStale)?;
    if c.bridge != bridge_id(&conn.bridge) {
        return Err(OfpErr::NxrStale);
    }
    let flow = packet_flow(&pi.packet, &pi.metadata);
    let mut actions = Vec::new();
    for (i, g) in c.actions.iter().enumerate() {
        check_actions(conn.version, g.table, &g.actions, &flow)?;
        if i > 0 || g.table != 0 || g.cookie != 0 {
            actions.push(FrozenAction::Unroll {
                table: g.table,
                cookie: g.cookie,
            });
        }
        actions.extend(g.actions.iter().cloned().map(FrozenAction::Of));
    }
    // A pause that was the last action leaves nothing to do (OVS resumes with a no-op).
    if actions.is_empty() {
        return Ok(());
    }
    let odp = (c.odp_port != 0).then_some(c.odp_port);
    let thaw = Thaw {
        conntracked: c.conntracked,
        stack: stack_of(&c.stack),
        action_set: c.action_set.clone(),
        mirrors: c.mirrors,
        packet_out: false,
    };
    inject(
        of,
        dp,
        &conn.bridge,
        &pi.metadata,
        thaw,
        actions,
        pi.packet,
        odp,
    )
}

/// The flow of `packet` with the metadata the message gave, as a match on every field (what
/// the actions are checked against, as OVS checks a packet-out's against its flow).
fn packet_flow(packet: &[u8], metadata: &PipeMatch) -> PipeMatch {
    let mut k = metadata.key().clone();
    let mut key = FlowKey::new();
    key.set_in_port(k.dp.in_port());
    flow::extract(packet, &mut key);
    for f in ofproto::fields::fields() {
        if !f.is_matched(metadata.mask()) {
            let v = f.get(&ofproto::pipekey::PipeKey {
                dp: key.clone(),
                meta: k.meta,
            });
            if v != 0 {
                f.set(&mut k, v);
            }
        }
    }
    let mut mask = ofproto::pipekey::PipeMask::new();
    for f in ofproto::fields::fields() {
        f.unwildcard(&mut mask);
    }
    PipeMatch::new(&k, &mask)
}

/// Sends `frame` as bridge `bridge`'s own: from its LOCAL port through its tables (OVS's
/// `tnl_send_arp_request()`, a packet-out to `TABLE` from `LOCAL`).
pub(crate) fn send_from_local(
    of: &Ofproto,
    dp: &Mutex<Datapath>,
    bridge: &str,
    frame: Vec<u8>,
) -> Result<(), OfpErr> {
    send_from_local_to(of, dp, bridge, ofproto::syntax::OFPP_TABLE, false, frame)
}

/// Sends `frame` from bridge `bridge`'s LOCAL port straight out of port `port` (a tunnel
/// port pushes its header, with the OAM flag when `oam`), as OVS's
/// `ofproto_dpif_send_packet()` sends its monitors' packets (BFD).
pub(crate) fn send_from_local_to(
    of: &Ofproto,
    dp: &Mutex<Datapath>,
    bridge: &str,
    port: u32,
    oam: bool,
    frame: Vec<u8>,
) -> Result<(), OfpErr> {
    let mut k = ofproto::pipekey::PipeKey::new();
    k.dp.set_in_port(ofproto::syntax::OFPP_LOCAL);
    let mut mask = ofproto::pipekey::PipeMask::new();
    mask.dp.set_in_port(u32::MAX);
    if oam {
        k.dp.set_tun_flags(flow::key::tun_flags::OAM);
        mask.dp.set_tun_flags(u8::MAX);
    }
    let actions = vec![FrozenAction::Of(ofproto::syntax::OfAction::Output {
        port,
        max_len: 0,
    })];
    inject(
        of,
        dp,
        bridge,
        &PipeMatch::new(&k, &mask),
        Thaw::default(),
        actions,
        frame,
        None,
    )
}

/// Runs `packet` through bridge `bridge` with `actions`, as the frozen state of a pass: the
/// metadata's registers, tunnel and connection tracking fields, and what `thaw` restores.
#[allow(clippy::too_many_arguments)]
fn inject(
    of: &Ofproto,
    dp: &Mutex<Datapath>,
    bridge: &str,
    metadata: &PipeMatch,
    thaw: Thaw,
    actions: Vec<FrozenAction>,
    packet: Vec<u8>,
    odp_port: Option<u32>,
) -> Result<(), OfpErr> {
    let p = freeze(of, bridge, metadata, thaw, actions, &packet, odp_port)?;
    let dp = dp.lock().map_err(|_| OfpErr::OfpbrcEperm)?;
    dp.execute(p);
    crate::coverage_cmd::DPIF_EXECUTE.inc();
    Ok(())
}

/// The datapath packet of `packet` whose pass is the frozen state of [`inject`]'s arguments:
/// its `recirc_id` names the state, its metadata is the message's.
fn freeze(
    of: &Ofproto,
    bridge: &str,
    metadata: &PipeMatch,
    thaw: Thaw,
    actions: Vec<FrozenAction>,
    packet: &[u8],
    odp_port: Option<u32>,
) -> Result<Packet, OfpErr> {
    let k = metadata.key();
    let in_port = k.dp.in_port();
    let (recirc_id, dp_port) = {
        let pipe = of.pipe.read().unwrap_or_else(|e| e.into_inner());
        let b = pipe.bridge(bridge).ok_or(OfpErr::NxrStale)?;
        let dp_port = odp_port
            .or_else(|| b.ports.get(&in_port).and_then(|p| p.dp_port))
            .unwrap_or(ODPP_NONE);
        let state = FrozenState {
            bridge: bridge.to_owned(),
            table: 0,
            in_port,
            meta: k.meta,
            tunnel: ofproto::recirc::tunnel_snapshot(&k.dp),
            conntracked: thaw.conntracked,
            actions,
            stack: thaw.stack,
            action_set: thaw.action_set,
            userdata: Vec::new(),
            mirrors: thaw.mirrors,
            packet_out: thaw.packet_out,
        };
        let id = pipe.recirc.intern(state).ok_or(OfpErr::OfpbrcEperm)?;
        (id, dp_port)
    };
    let mut p = Packet::from_slice(packet);
    p.meta.in_port = dp_port;
    p.meta.recirc_id = recirc_id;
    p.meta.pkt_mark = k.dp.pkt_mark();
    // The connection the paused pass had tracked (OVS's `pkt_metadata_from_flow()`).
    if k.dp.ct_state() != 0 {
        datapath::ct::from_key(&mut p, &k.dp);
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofproto::syntax::OfAction;

    #[test]
    fn a_bridge_id_is_stable_and_names_its_bridge() {
        assert_eq!(bridge_id("br0"), bridge_id("br0"));
        assert_ne!(bridge_id("br0"), bridge_id("br1"));
    }

    #[test]
    fn a_stack_goes_into_a_continuation_top_first_and_back() {
        // 0x0005 pushed, then 0x01020304.
        let stack = vec![0, 5, 2, 1, 2, 3, 4, 4];
        let values = stack_values(&stack);
        assert_eq!(values, [vec![1, 2, 3, 4], vec![0, 5]]);
        assert_eq!(stack_of(&values), stack);
        // A malformed stack gives what it can.
        assert_eq!(stack_values(&[9]), Vec::<Vec<u8>>::new());
    }

    #[test]
    fn frozen_actions_become_groups_by_rule() {
        let out = |port| FrozenAction::Of(OfAction::Output { port, max_len: 0 });
        let st = FrozenState {
            bridge: "br0".into(),
            table: 1,
            in_port: 1,
            meta: Default::default(),
            tunnel: None,
            conntracked: true,
            actions: vec![
                out(2),
                FrozenAction::Unroll {
                    table: 3,
                    cookie: 9,
                },
                out(4),
            ],
            stack: Vec::new(),
            action_set: Vec::new(),
            userdata: Vec::new(),
            mirrors: 0,
            packet_out: false,
        };
        let c = continuation(&st, 5);
        assert!(c.stack.is_empty());
        assert_eq!(c.actions.len(), 2);
        assert_eq!((c.actions[1].table, c.actions[1].cookie), (3, 9));
        assert!(c.conntracked);
        assert_eq!(c.odp_port, 5);
    }
}
