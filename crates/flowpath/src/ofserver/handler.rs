//! The message layer of the switch's OpenFlow connections: every request a connection sends
//! is read by the `openflow` codec and answered from the switch's own state, as
//! `ovs-vswitchd`'s `handle_openflow()` answers it: features, configuration, barriers,
//! descriptions, port and table statistics, port and table mods ([`port_mod`](super::port_mod),
//! [`table_mod`](super::table_mod)), queues (one per port, 0), roles,
//! asynchronous-message configuration, the Nicira connection settings, the TLV map, conntrack
//! flushes, meters ([`meter_table`](super::meter_table)), flow mods and flow statistics
//! ([`flow_table`]), group mods, descriptions and statistics ([`group_table`]), also in
//! bundles ([`bundle`](super::bundle), committed by [`bundle_commit`](super::bundle_commit)'s
//! worker), flow monitors ([`flow_monitor`](super::flow_monitor)), packet-outs and
//! `NXT_RESUME` ([`packet_out`](super::packet_out)). Anything
//! else gets OVS's `OFPT_ERROR` (`OFPBRC_BAD_TYPE`, or `OFPBRC_BAD_STAT` for a statistics
//! request), carrying the request, and the connection stays up.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use datapath::dpif::Datapath;
use ofproto::flow_events::{Origin, with_origin};
use ofproto::ofproto::Ofproto;
use openflow::conn::{
    ConnEvent, ConnId, ConnInfo, Dest, EventLoop, Handler, LoopHandle, MsgKind, Target,
};
use openflow::error::{self, OfpErr};
use openflow::header::Version;
use openflow::msgs::async_config::{AsyncConfig, AsyncMsg};
use openflow::msgs::decode::{Msg, decode_body};
use openflow::msgs::group_stats::GroupFeatures;
use openflow::msgs::meter::{MeterFeatures, MeterRequestKind};
use openflow::msgs::port;
use openflow::msgs::queue_config::{self, QueueConfigRequest};
use openflow::msgs::requestforward::ForwardReason;
use openflow::msgs::role::{Role, RoleMsg, RoleReason, RoleStatus};
use openflow::msgs::stats::{self, DescStats};
use openflow::msgs::switch::{self, FragHandling, SwitchConfig};
use openflow::msgs::table_mod;
use openflow::msgtype::{self, EncodeError, Message, OfpType};
use openflow::nxm::TlvLens;

use super::bridge_view;
use super::bundle::Bundles;
use super::bundle_commit::{CommitJob, CommitWorker};
use super::flow_table;
use super::group_table;
use super::ofconn::OfConn;
use super::requestforward::{Forwarded, forward, recipients};
use super::tlv;

/// What `ovs-vswitchd` 3.1 says it is (`OFPST_DESC`), which controllers and tools read to
/// know whose extensions a switch speaks: flowpath speaks Open vSwitch 3.1's.
const DESC: [&str; 5] = ["Nicira, Inc.", "Open vSwitch", "3.1.0", "None", "None"];

/// A bridge's state that its connections share.
#[derive(Clone, Copy, Debug, Default)]
struct BridgeState {
    /// Fragment handling (`OFPT_SET_CONFIG`): the bridge's, as OVS keeps it.
    frag: FragHandling,
    /// The highest generation id a primary-role request gave (`primary_election_id`).
    election_id: Option<u64>,
    /// What the bridge was last told of its default table misses.
    miss_to_controller: bool,
}

/// The switch's OpenFlow message layer, run by the server's event loop.
pub(crate) struct OfHandler {
    pub(super) of: Arc<Ofproto>,
    dp: Arc<Mutex<Datapath>>,
    /// Connections coming and going, with the listener each came from.
    events: Receiver<ConnEvent>,
    /// The bridge of each `.mgmt` listener.
    pub(crate) listener_bridge: HashMap<Target, String>,
    /// The bridge of each controller the switch connects to.
    pub(crate) controller_bridge: HashMap<ConnId, String>,
    /// The connections that finished their hello, with their settings.
    pub(crate) conns: BTreeMap<ConnId, OfConn>,
    /// The bundles of the connections that have some.
    bundles: HashMap<ConnId, Bundles>,
    bridges: HashMap<String, BridgeState>,
    /// When the server started: the age of the ports, as far as statistics go.
    since: Instant,
    /// The connections whose port mods changed ports, for the port statuses that follow.
    pub(crate) port_mod_sources: super::port_mod::PortModSources,
    /// The bundle commits' thread.
    commits: CommitWorker,
    /// The connection whose last message's reply the commit worker sends.
    holding: Option<ConnId>,
    /// The connections' flow monitors.
    monitors: super::flow_monitor::FlowMonitors,
    /// Flow monitor updates for connections other than the one being answered, sent at the
    /// end of the loop's turn.
    monitor_updates: Vec<(ConnId, Vec<u8>)>,
    /// Asynchronous messages for connections other than the one being answered (role
    /// statuses, request forwards), sent at the end of the loop's turn.
    pub(crate) outbox: Vec<(ConnId, Vec<u8>)>,
}

/// A handler's outcome: replies appended, or OVS's error for the request.
type Answer = Result<(), OfpErr>;

impl OfHandler {
    /// A handler whose bundle commits reply through `lp`.
    pub(crate) fn new(
        of: Arc<Ofproto>,
        dp: Arc<Mutex<Datapath>>,
        events: Receiver<ConnEvent>,
        lp: LoopHandle,
    ) -> std::io::Result<OfHandler> {
        Ok(OfHandler {
            commits: CommitWorker::start(of.clone(), dp.clone(), lp)?,
            holding: None,
            monitors: Default::default(),
            monitor_updates: Vec::new(),
            outbox: Vec::new(),
            of,
            dp,
            events,
            listener_bridge: HashMap::new(),
            controller_bridge: HashMap::new(),
            conns: BTreeMap::new(),
            bundles: HashMap::new(),
            bridges: HashMap::new(),
            since: Instant::now(),
            port_mod_sources: Default::default(),
        })
    }

    /// Takes in the connection events queued so far: a connection accepted on a bridge's
    /// listener belongs to that bridge.
    pub(crate) fn drain_events(&mut self) {
        while let Ok(e) = self.events.try_recv() {
            match e {
                ConnEvent::Connected {
                    id,
                    role,
                    version,
                    target,
                } => {
                    if let Some(b) = self
                        .listener_bridge
                        .get(&target)
                        .or_else(|| self.controller_bridge.get(&id))
                    {
                        let info = ConnInfo {
                            id,
                            version,
                            role,
                            monitor_backlog: (0, 0),
                        };
                        let b = b.clone();
                        self.conns.insert(id, OfConn::new(&b, &info));
                        self.update_miss_to_controller(&b);
                    }
                }
                ConnEvent::Disconnected { id, .. } => {
                    self.forget_conn(id);
                }
            }
        }
    }

    /// Tells the bridge whether its default table misses go to the controller: while a
    /// connection of OpenFlow 1.0 to 1.2 with controller id 0 is attached, as OVS's
    /// `update_want_packet_in_on_miss()` counts them.
    fn update_miss_to_controller(&mut self, bridge: &str) {
        let on = self.conns.values().any(|c| {
            c.bridge == bridge
                && c.controller_id == 0
                && c.version < openflow::header::Version::Of13
        });
        let state = self.bridges.entry(bridge.to_owned()).or_default();
        if state.miss_to_controller != on {
            state.miss_to_controller = on;
            self.of.set_miss_to_controller(bridge, on);
        }
    }

    /// Forgets a connection that ended, with its bundles.
    pub(crate) fn forget_conn(&mut self, id: ConnId) {
        if let Some(c) = self.conns.remove(&id) {
            self.update_miss_to_controller(&c.bridge);
        }
        self.bundles.remove(&id);
        self.monitors.forget(id);
    }

    /// Composes the flow monitors' updates for the changes logged since the last call: those
    /// of connection `own` appended to `out` (before the replies that follow, as OVS sends
    /// them), the others' kept for [`OfHandler::send_flow_updates`] at the end of the turn.
    fn flow_updates(&mut self, own: Option<ConnId>, out: &mut Vec<u8>) {
        for (c, msg) in self.monitors.updates(&self.of, &self.conns) {
            if Some(c) == own {
                out.extend_from_slice(&msg);
            } else {
                self.monitor_updates.push((c, msg));
            }
        }
    }

    /// Appends to `out` the updates waiting for connection `c`: those composed earlier in the
    /// turn and those of the changes logged since.
    fn flush_flow_updates(&mut self, c: ConnId, out: &mut Vec<u8>) {
        let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(&mut self.monitor_updates)
            .into_iter()
            .partition(|(to, _)| *to == c);
        self.monitor_updates = others;
        for (_, msg) in mine {
            out.extend_from_slice(&msg);
        }
        self.flow_updates(Some(c), out);
    }

    /// Sends the flow monitors' updates composed during the turn and those of the changes no
    /// request of a connection made (rules that expired, bundles committed, flows learned),
    /// then pauses the connections that fell too far behind and resumes those that caught up.
    pub(crate) fn send_flow_updates(&mut self, ev: &mut EventLoop) {
        let mut updates = std::mem::take(&mut self.monitor_updates);
        updates.extend(self.monitors.updates(&self.of, &self.conns));
        for (c, msg) in updates {
            ev.send(Dest::Conn(c), msg, MsgKind::Monitor);
        }
        let control = self
            .monitors
            .flow_control(&self.of, &self.conns, |c| ev.monitor_backlog(c));
        for (c, msg, update) in control {
            let kind = if update {
                MsgKind::Monitor
            } else {
                MsgKind::Reply
            };
            ev.send(Dest::Conn(c), msg, kind);
        }
    }

    /// Sends the asynchronous messages composed for other connections during the turn; OVS
    /// queues them as it queues replies (no packet-in counter), so they are not dropped.
    pub(crate) fn send_outbox(&mut self, ev: &mut EventLoop) {
        for (c, msg) in self.outbox.drain(..) {
            ev.send(Dest::Conn(c), msg, MsgKind::Reply);
        }
    }

    /// Drops the bundles left idle too long, each with an `OFPBFC_TIMEOUT` error carrying
    /// the message that opened it, on its connection (OVS's `bundle_remove_expired()`).
    pub(crate) fn expire_bundles(&mut self, ev: &mut EventLoop) {
        let now = Instant::now();
        for (&c, bundles) in &mut self.bundles {
            for opened_by in bundles.expire(now) {
                let mut out = Vec::new();
                super::bundle::encode_timeout(&opened_by, &mut out);
                ev.send(Dest::Conn(c), out, MsgKind::Reply);
            }
        }
    }

    /// Forgets a bridge's shared state (it was deleted).
    pub(crate) fn forget_bridge(&mut self, bridge: &str) {
        self.bridges.remove(bridge);
    }

    /// Answers one request on connection `c`.
    fn answer(
        &mut self,
        c: ConnId,
        raw: &[u8],
        m: &Message<'_>,
        d: Msg<'_>,
        out: &mut Vec<u8>,
    ) -> Answer {
        let conn = self.conns.get(&c).ok_or(OfpErr::OfpbrcEperm)?.clone();
        let version = conn.version;
        // What needs the datapath first, without the pipeline's lock: the revalidator takes
        // the datapath's lock, then the pipeline's.
        match d {
            Msg::PortStatsRequest(r) => {
                let ports = self.bridge_ports(&conn.bridge)?;
                let patch = self.patch_counts(&ports);
                let dp = self.dp.lock().map_err(|_| OfpErr::OfpbrcEperm)?;
                let v = bridge_view::ports_stats(&ports, &patch, &dp, r.port_no, self.since);
                drop(dp);
                return put_all(out, stats::encode_port_stats_reply(m, &v));
            }
            Msg::MeterMod(mm) => {
                if !conn.may_modify() {
                    return Err(OfpErr::OfpbrcIsSecondary);
                }
                let mut dp = self.dp.lock().map_err(|_| OfpErr::OfpbrcEperm)?;
                super::meter_table::meter_mod(&self.of, &mut dp, &conn.bridge, &mm)?;
                let what = Forwarded::Meter(&mm);
                forward(&self.conns, c, &conn.bridge, m.xid, what, &mut self.outbox);
                return Ok(());
            }
            Msg::MeterRequest(kind, id) if kind != MeterRequestKind::Features => {
                let dp = self.dp.lock().map_err(|_| OfpErr::OfpbrcEperm)?;
                return super::meter_table::meter_request(
                    &self.of,
                    &dp,
                    &conn.bridge,
                    m,
                    kind,
                    id,
                    out,
                );
            }
            // Ports' and tables' configuration ([`port_mod`](super::port_mod),
            // [`table_mod`](super::table_mod)).
            Msg::PortMod(pm) => {
                if !conn.may_modify() {
                    return Err(OfpErr::OfpbrcIsSecondary);
                }
                if super::port_mod::port_mod(&self.of, &conn.bridge, &pm)? {
                    self.port_mod_sources
                        .insert((conn.bridge.clone(), pm.port_no), c);
                }
                return Ok(());
            }
            Msg::TableMod(tm) => {
                if !conn.may_modify() {
                    return Err(OfpErr::OfpbrcIsSecondary);
                }
                return super::table_mod::table_mod(&self.of, &conn.bridge, &tm);
            }
            Msg::CtFlushZone(zone) => {
                let dp = self.dp.lock().map_err(|_| OfpErr::OfpbrcEperm)?;
                dp.conntrack().flush(Some(zone), None);
                return Ok(());
            }
            Msg::CtFlush(f) => {
                let dp = self.dp.lock().map_err(|_| OfpErr::OfpbrcEperm)?;
                super::ct_flush::ct_flush(dp.conntrack(), &f);
                return Ok(());
            }
            // A barrier's reply says that what came before is in force, for the packets too:
            // megaflows that changed tables made stale are revalidated first.
            Msg::BarrierRequest => {
                self.of.sync_megaflows(&self.dp);
                // The flow updates of every change before the barrier go before its reply (a
                // learned flow's, say, logged since the last turn), as OVS promises.
                self.flush_flow_updates(c, out);
                switch::encode_barrier_reply(version, m.xid, out);
                return Ok(());
            }
            Msg::BundleControl(bc) => {
                if !conn.may_modify() {
                    return Err(OfpErr::OfpbrcIsSecondary);
                }
                let mut reply = Vec::new();
                bc.encode_reply(m, &mut reply)?;
                let bundles = self.bundles.entry(c).or_default();
                let mut committing = None;
                bundles.control(&bc, raw, |msgs| {
                    committing = Some(msgs);
                    Ok(())
                })?;
                // A commit is carried out by the worker, which sends the reply; the
                // connection is held until then ([`bundle_commit`]).
                if let Some(msgs) = committing {
                    let group_forwards =
                        recipients(&self.conns, c, &conn.bridge, ForwardReason::GroupMod);
                    self.commits.commit(CommitJob {
                        conn: c,
                        version,
                        bridge: conn.bridge.clone(),
                        msgs,
                        table_id: conn.flow_mod_table_id,
                        request: raw.to_vec(),
                        reply,
                        group_forwards,
                    });
                    self.holding = Some(c);
                    return Ok(());
                }
                out.extend(reply);
                return Ok(());
            }
            Msg::BundleAdd(a, t) => {
                if !conn.may_modify() {
                    return Err(OfpErr::OfpbrcIsSecondary);
                }
                let kind = t.kind();
                return self.bundles.entry(c).or_default().add(&a, raw, t, |msg| {
                    if kind == OfpType::PacketOut {
                        return super::packet_out::check_bundled(conn.version, msg);
                    }
                    if group_table::is_group_mod(msg) {
                        return group_table::check_group_mod(msg);
                    }
                    flow_table::check_flow_mod(msg, conn.flow_mod_table_id)
                });
            }
            // Groups too ([`group_table`]).
            Msg::Other(o) if o.msg_type.kind() == OfpType::GroupMod => {
                if !conn.may_modify() {
                    return Err(OfpErr::OfpbrcIsSecondary);
                }
                let gm = group_table::group_mod(&self.of, &conn.bridge, raw)?;
                let what = Forwarded::Group(&gm);
                forward(&self.conns, c, &conn.bridge, m.xid, what, &mut self.outbox);
                return Ok(());
            }
            Msg::Other(o) if o.msg_type.kind() == OfpType::GroupDescStatsRequest => {
                return group_table::group_desc(&self.of, &conn.bridge, m, out);
            }
            Msg::GroupStatsRequest(id) => {
                return group_table::group_stats(&self.of, &conn.bridge, m, id, out);
            }
            // Packets from the controller go through the pipeline and the datapath.
            Msg::Other(o) if o.msg_type.kind() == OfpType::PacketOut => {
                if !conn.may_modify() {
                    return Err(OfpErr::OfpbrcIsSecondary);
                }
                return super::packet_out::packet_out(&self.of, &self.dp, &conn, m);
            }
            Msg::Other(o) if o.msg_type.kind() == OfpType::NxtResume => {
                return super::packet_out::resume(&self.of, &self.dp, &conn, m);
            }
            // Flows go through the pipeline's own functions, which take its lock themselves.
            Msg::Other(o) if o.msg_type.kind() == OfpType::FlowMod => {
                if !conn.may_modify() {
                    return Err(OfpErr::OfpbrcIsSecondary);
                }
                // Updates of changes before this one go first, as others'.
                self.flow_updates(None, out);
                let origin = Origin {
                    conn: c.0,
                    xid: m.xid,
                };
                let r = with_origin(origin, || {
                    flow_table::flow_mod(&self.of, &conn.bridge, raw, conn.flow_mod_table_id)
                });
                self.flow_updates(Some(c), out);
                return r;
            }
            Msg::Other(o) if o.msg_type.kind() == OfpType::FlowMonitorStatsRequest => {
                self.flow_updates(None, out);
                return self.monitors.request(&self.of, c, &conn, m, out);
            }
            Msg::Other(o) if o.msg_type.kind() == OfpType::FlowMonitorCancel => {
                return self.monitors.cancel(c, m);
            }
            Msg::Other(o)
                if matches!(
                    o.msg_type.kind(),
                    OfpType::FlowStatsRequest | OfpType::AggregateStatsRequest
                ) =>
            {
                let tlv = {
                    let pipe = self.of.pipe.read().unwrap_or_else(|e| e.into_inner());
                    let b = pipe.bridge(&conn.bridge).ok_or(OfpErr::OfpbrcEperm)?;
                    TlvLens::from_tlv_map(&b.tlv_map)
                };
                return flow_table::flow_stats(&self.of, &conn.bridge, raw, &tlv, out);
            }
            _ => {}
        }
        let of = self.of.clone();
        let pipe = of.pipe.read().unwrap_or_else(|e| e.into_inner());
        // A bridge deleted under a connection: its connections are closed on the next turn.
        let b = pipe.bridge(&conn.bridge).ok_or(OfpErr::OfpbrcEperm)?;
        let state = self.bridges.entry(conn.bridge.clone()).or_default();
        match d {
            Msg::EchoRequest(_) => {
                switch::encode_echo_reply(m, out);
            }
            Msg::Error | Msg::EchoReply(_) | Msg::Hello => {}
            Msg::FeaturesRequest => {
                bridge_view::features(b)
                    .encode(version, m.xid, out)
                    .map_err(too_long)?;
            }
            Msg::GetConfigRequest => SwitchConfig {
                frag: state.frag,
                miss_send_len: conn.miss_send_len,
                invalid_ttl_to_controller: Some(conn.invalid_ttl_to_controller),
            }
            .encode_reply(version, m.xid, out),
            Msg::SetConfig(cfg) => {
                // Reassembly is not something the datapath does: OVS ignores that mode too.
                if conn.may_modify() && cfg.frag != FragHandling::Reassemble {
                    state.frag = cfg.frag;
                }
                let c = self.conns.get_mut(&c).expect("looked up above");
                if let Some(t) = cfg.invalid_ttl_to_controller {
                    c.invalid_ttl_to_controller = t;
                    // As OVS's `ofconn_set_invalid_ttl_to_controller()`: the primary role's
                    // packet-in mask takes `invalid_ttl` or not.
                    let mut a = c.async_config;
                    let m = &mut a.primary[AsyncMsg::PacketIn as usize];
                    *m = if t { *m | 1 << 2 } else { *m & !(1 << 2) };
                    c.store_async_config(a);
                }
                c.miss_send_len = cfg.miss_send_len;
            }
            Msg::DescRequest => {
                let [mfr, hw, sw, serial, dp] = DESC.map(str::to_owned);
                let d = DescStats {
                    mfr_desc: mfr,
                    hw_desc: hw,
                    sw_desc: sw,
                    serial_num: serial,
                    dp_desc: dp,
                };
                out.extend(d.encode_reply(m).map_err(too_long)?);
            }
            Msg::PortDescRequest(r) => {
                put_all(
                    out,
                    port::encode_port_desc_reply(m, &bridge_view::phy_ports(b, r.port)),
                )?;
            }
            Msg::TableStatsRequest => {
                put_all(
                    out,
                    stats::encode_table_stats_reply(m, &bridge_view::tables_stats(b)),
                )?;
            }
            Msg::TableDescRequest => {
                let v = super::table_mod::table_descs(b);
                put_all(out, table_mod::encode_table_desc_reply(m, &v))?;
            }
            Msg::TableFeaturesRequest(set) => {
                if !set.is_empty() {
                    return Err(OfpErr::OfptffcEperm);
                }
                put_all(out, super::table_features::reply(m, version))?;
            }
            Msg::QueueStatsRequest(r) => {
                let v = bridge_view::queues_stats(b, r.port_no, r.queue_id)?;
                put_all(out, stats::encode_queue_stats_reply(m, &v))?;
            }
            Msg::QueueConfigRequest(QueueConfigRequest { port, queue }) => {
                let v = bridge_view::queue_configs(b, port, queue)?;
                put_all(out, queue_config::encode_reply(m, &v))?;
            }
            Msg::GroupFeaturesRequest => {
                out.extend(
                    GroupFeatures::ovs(version)
                        .encode_reply(m)
                        .map_err(too_long)?,
                );
            }
            Msg::MeterRequest(MeterRequestKind::Features, _) => {
                out.extend(
                    MeterFeatures::OVS_NETDEV
                        .encode_reply(m)
                        .map_err(too_long)?,
                );
            }
            Msg::RoleRequest(r) => {
                let role = self.role_request(c, &conn, r)?;
                role.encode_reply(m, out)?;
            }
            Msg::GetAsyncRequest => conn.async_config.encode_get_reply(m, out)?,
            Msg::SetAsync => {
                let a = AsyncConfig::decode(m, &conn.async_config, false)?;
                self.conns
                    .get_mut(&c)
                    .expect("looked up above")
                    .set_async_config(a);
            }
            Msg::SetFlowFormat(f) => {
                self.conns.get_mut(&c).expect("looked up above").flow_format = f;
            }
            Msg::SetPacketInFormat(f) => {
                self.conns
                    .get_mut(&c)
                    .expect("looked up above")
                    .packet_in_format = f;
            }
            Msg::FlowModTableId(on) => {
                self.conns
                    .get_mut(&c)
                    .expect("looked up above")
                    .flow_mod_table_id = on;
            }
            Msg::SetControllerId(id) => {
                self.conns
                    .get_mut(&c)
                    .expect("looked up above")
                    .controller_id = id;
                // Told the bridge once the answer is done (the pipeline is read here).
            }
            Msg::FlowAge => {}
            Msg::TlvTableRequest => tlv::reply(b).encode(m, out)?,
            Msg::TlvTableMod(t) => {
                if !conn.may_modify() {
                    return Err(OfpErr::OfpbrcIsSecondary);
                }
                drop(pipe);
                tlv::apply(&self.of, &conn.bridge, &t)?;
            }
            _ => return Err(unhandled(m)),
        }
        Ok(())
    }

    /// The ports of `bridge`, copied out of the pipeline.
    /// The counters of the patch ports among `ports`, by OpenFlow port number.
    fn patch_counts(&self, ports: &[ofproto::bridge::OfPort]) -> bridge_view::PatchCounts {
        let pipe = self.of.pipe.read().unwrap_or_else(|e| e.into_inner());
        ports
            .iter()
            .filter(|p| p.dp_port.is_none() && p.peer.is_some())
            .map(|p| (p.ofport, pipe.patch_stats.get(&p.name)))
            .collect()
    }

    fn bridge_ports(&self, bridge: &str) -> Result<Vec<ofproto::bridge::OfPort>, OfpErr> {
        let pipe = self.of.pipe.read().unwrap_or_else(|e| e.into_inner());
        let b = pipe.bridge(bridge).ok_or(OfpErr::OfpbrcEperm)?;
        Ok(b.ports.values().cloned().collect())
    }

    /// A role request (OVS's `handle_role_request()`): a primary or secondary request with a
    /// generation id older than the bridge's is stale; the reply says the role now held.
    fn role_request(&mut self, c: ConnId, conn: &OfConn, r: RoleMsg) -> Result<RoleMsg, OfpErr> {
        let state = self.bridges.entry(conn.bridge.clone()).or_default();
        if r.role != Role::NoChange {
            if r.role != Role::Equal
                && let Some(g) = r.generation_id
            {
                // Unsigned difference read as two's complement, as the OpenFlow spec asks.
                if state
                    .election_id
                    .is_some_and(|cur| (g.wrapping_sub(cur) as i64) < 0)
                {
                    return Err(OfpErr::OfprrfcStale);
                }
                state.election_id = Some(g);
            }
            // A new primary makes the bridge's other primaries secondaries, each told so from
            // OpenFlow 1.3 on (OVS's `ofconn_set_role()`: whatever its asynchronous
            // configuration says).
            if r.role == Role::Primary && conn.role != Role::Primary {
                let status = RoleStatus {
                    role: Role::Secondary,
                    reason: RoleReason::PrimaryRequest as u8,
                    generation_id: state.election_id.unwrap_or(u64::MAX),
                };
                for (id, o) in self.conns.iter_mut() {
                    if *id != c && o.bridge == conn.bridge && o.role == Role::Primary {
                        o.role = Role::Secondary;
                        let mut m = Vec::new();
                        if status.encode(o.version, &mut m).is_ok() {
                            self.outbox.push((*id, m));
                        }
                    }
                }
            }
            self.conns.get_mut(&c).expect("looked up above").role = r.role;
        }
        let role = self.conns.get(&c).map_or(Role::Equal, |o| o.role);
        Ok(RoleMsg {
            role,
            generation_id: state.election_id,
        })
    }
}

impl Handler for OfHandler {
    fn handle(&mut self, info: &ConnInfo, msg: &[u8], replies: &mut Vec<u8>) {
        crate::coverage_cmd::OFPROTO_RECV_OPENFLOW.inc();
        if !self.conns.contains_key(&info.id) {
            self.drain_events();
        }
        // A paused monitoring connection that caught up is resumed before it is answered.
        if self.monitors.is_paused(info.id)
            && let Some(conn) = self.conns.get(&info.id).cloned()
        {
            let backlog = info.monitor_backlog;
            self.monitors
                .resume_drained(&self.of, info.id, &conn, backlog, replies);
        }
        let at = replies.len();
        let r = msgtype::decode(msg).and_then(|m| {
            let d = decode_body(&m)?;
            self.answer(info.id, msg, &m, d, replies)
        });
        // A controller id set by the message may change where misses go.
        if let Some(b) = self.conns.get(&info.id).map(|c| c.bridge.clone()) {
            self.update_miss_to_controller(&b);
        }
        if let Err(e) = r {
            replies.truncate(at);
            let xid = msg
                .get(4..8)
                .map_or(0, |x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]));
            // The whole request, as much as fits (OVS's `ofperr_encode_reply()`).
            error::encode(e, info.version.wire(), xid, msg, replies);
        }
    }

    fn disconnected(&mut self, conn: ConnId) {
        self.drain_events();
        self.forget_conn(conn);
    }

    fn holds(&mut self, conn: ConnId) -> bool {
        self.holding.take_if(|c| *c == conn).is_some()
    }

    /// A bundle commit's reply goes after the flow updates of its changes.
    fn released(&mut self, conn: ConnId, reply: &mut Vec<u8>) {
        let mut out = Vec::new();
        self.flush_flow_updates(conn, &mut out);
        if !out.is_empty() {
            out.append(reply);
            *reply = out;
        }
    }
}

/// The error for a message this switch does not act on: `OFPBRC_BAD_STAT` for a statistics
/// request, `OFPBRC_BAD_TYPE` otherwise (OVS's `handle_single_part_openflow()` default).
fn unhandled(m: &Message<'_>) -> OfpErr {
    let v = Version::from_wire(m.version).unwrap_or(Version::Of10);
    if m.msg_type.stats_reply(v).is_some() {
        OfpErr::OfpbrcBadStat
    } else {
        OfpErr::OfpbrcBadType
    }
}

/// A reply too long for one message, which a multipart encoder cannot split.
fn too_long(_: EncodeError) -> OfpErr {
    OfpErr::OfpbrcBadLen
}

/// Appends every message of a multipart reply.
fn put_all(out: &mut Vec<u8>, r: Result<Vec<Vec<u8>>, EncodeError>) -> Answer {
    for m in r.map_err(too_long)? {
        out.extend_from_slice(&m);
    }
    Ok(())
}

#[cfg(test)]
#[path = "handler_tests.rs"]
mod tests;
