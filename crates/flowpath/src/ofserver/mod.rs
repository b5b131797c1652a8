//! The switch's OpenFlow server, as `ovs-vswitchd`'s connection manager: one control-plane
//! thread (never a PMD thread) runs an [`openflow::conn::EventLoop`] with every bridge's
//! `punix:RUNDIR/BRIDGE.mgmt` listener (service connections such as `ovs-ofctl`'s and
//! `ovn-controller`'s, OpenFlow 1.0 to 1.5) and `punix:RUNDIR/BRIDGE.snoop` listener (for
//! `ovs-ofctl snoop`); [`handler`] answers what the connections send from the switch's own
//! state.
//!
//! Bridges added or removed at run time (`add-br`, `del-br`) get or lose their listeners on
//! the loop's next turn, at most [`SYNC_INTERVAL`] later; a removed bridge's connections are
//! closed. Ports coming and going, and changes of their configuration or link state, are told
//! to the connections that asked for port status (`OFPT_PORT_STATUS`; none to a service
//! connection until it sets a `miss_send_len`); the link state is read from the datapath's
//! ports on the same turn.
//!
//! Each bridge's controllers, allowed versions and fail mode ([`ControllerSettings`]) are
//! applied on the same turn: [`connmgr`] connects to and listens for controllers and fails
//! open.
//!
//! - [`bridge_view`]: a bridge's features, ports, port and table statistics;
//! - [`ofconn`]: one connection's settings;
//! - [`handler`]: the requests and their answers;
//! - [`flow_table`]: flow mods and flow statistics, through the pipeline's flow functions;
//! - [`bundle`]: a connection's bundles of flow mods;
//! - [`bundle_commit`]: the worker that commits them, off the loop's thread;
//! - [`table_features`] and [`table_fields`]: the tables' features;
//! - [`tlv`]: the Geneve option map;
//! - [`packet_in`]: the packets the datapath's `controller` actions send, as packet-ins;
//! - [`packet_out`]: packet-outs and resumed continuations, through the pipeline;
//! - [`flow_removed`]: flow-removed notifications for rules that expired or were deleted;
//! - [`flow_monitor`]: flow monitors, and the updates of the flow table changes they watch;
//! - [`port_mod`] and [`table_mod`]: ports' and tables' configuration.

mod bond_learning;
pub(crate) use lb_output::sync as sync_lb_output;
mod bridge_view;
mod bundle;
pub(crate) use bundle::set_idle_timeout as set_bundle_idle_timeout;
mod bundle_commit;
mod connmgr;
mod ct_flush;
mod flow_monitor;
mod flow_removed;
mod flow_table;
mod group_table;
mod handler;
mod lb_output;
mod meter_table;
mod ofconn;
mod packet_in;
mod packet_out;
mod port_mod;
mod requestforward;
mod table_features;
mod table_fields;
mod table_mod;
mod tlv;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use datapath::dpif::Datapath;
use ofproto::ofproto::Ofproto;
use openflow::conn::{ConnId, Dest, EventLoop, ListenerId, MsgKind, bridge_targets};
use openflow::header::Version;
use openflow::hello::VersionSet;
use openflow::msgs::async_config::AsyncMsg;
use openflow::msgs::port::{OFPPS_LIVE, PhyPort, PortReason, PortStatus};

pub(crate) use bridge_view::{datapath_id, port_mac};
use connmgr::{Admitting, ConnMgr};
pub use connmgr::{BridgeControl, ControllerSettings, FailMode, check_target, parse_protocol};
use handler::OfHandler;
pub(crate) use packet_out::{send_from_local, send_from_local_to};

/// How often the loop looks for bridges and ports added or removed.
pub const SYNC_INTERVAL: Duration = Duration::from_millis(100);

/// A running OpenFlow server.
pub struct OfServer {
    stop: Arc<AtomicBool>,
    handle: openflow::conn::LoopHandle,
    thread: Option<JoinHandle<()>>,
}

impl OfServer {
    /// Starts the server's thread, listening for every bridge of `of` in `rundir` and
    /// connecting to their controllers as `settings` say.
    pub fn start(
        rundir: &Path,
        of: Arc<Ofproto>,
        dp: Arc<Mutex<Datapath>>,
        settings: ControllerSettings,
    ) -> io::Result<OfServer> {
        let mut ev = EventLoop::new()?;
        let events = ev.subscribe();
        let handle = ev.handle();
        // The PMDs' packets for the controllers wake the loop.
        let mut queues = Vec::new();
        watch_upcall_queues(&dp, &mut queues, &handle);
        let (dp2, handle2) = (dp.clone(), handle.clone());
        let mut server = Server {
            rundir: rundir.to_path_buf(),
            of: of.clone(),
            dp: dp.clone(),
            handler: OfHandler::new(of, dp, events, handle.clone())?,
            connmgr: ConnMgr::new(settings),
            bridges: BTreeMap::new(),
        };
        server.sync(&mut ev);
        // Commands that change ports wait for this loop to have told the connections.
        let waker = handle.clone();
        server.of.port_status.serve(Box::new(move || waker.wake()));
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ofserver".into())
            .spawn(move || {
                let mut synced = Instant::now();
                while !stop2.load(Ordering::Relaxed) {
                    let mut h = Admitting {
                        handler: &mut server.handler,
                        connmgr: &mut server.connmgr,
                    };
                    if let Err(e) = ev.run_once(&mut h, Some(SYNC_INTERVAL)) {
                        log_warn(&format!("OpenFlow event loop: {e}"));
                        std::thread::sleep(SYNC_INTERVAL);
                    }
                    packet_in::send_packet_ins(&server.of, &server.handler.conns, &queues, &mut ev);
                    flow_removed::send_flow_removed(&server.of, &server.handler.conns, &mut ev);
                    server.handler.send_flow_updates(&mut ev);
                    server.handler.send_outbox(&mut ev);
                    // Not after every message of a busy connection: once an interval, or
                    // at once when a port mod changed a port or a command that changed
                    // ports waits to have them announced.
                    let announce = server.of.port_status.pending();
                    if synced.elapsed() >= SYNC_INTERVAL
                        || !server.handler.port_mod_sources.is_empty()
                        || announce.is_some()
                    {
                        server.sync(&mut ev);
                        watch_upcall_queues(&dp2, &mut queues, &handle2);
                        server.handler.expire_bundles(&mut ev);
                        synced = Instant::now();
                    }
                    if let Some(n) = announce {
                        server.of.port_status.answered(n);
                    }
                }
                server.of.port_status.stop_serving();
            })?;
        Ok(OfServer {
            stop,
            handle,
            thread: Some(thread),
        })
    }

    /// Stops the thread; the listeners' socket files are removed.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads, and wakes the loop for, the upcall rings the datapath has beyond `queues` (a
/// `pmd-cpu-mask` change to more PMDs than ever adds one).
fn watch_upcall_queues(
    dp: &Mutex<Datapath>,
    queues: &mut Vec<Arc<datapath::upcall_queue::UpcallQueue>>,
    handle: &openflow::conn::LoopHandle,
) {
    let now = dp.lock().map(|d| d.upcall_queues()).unwrap_or_default();
    for q in now.iter().skip(queues.len()) {
        let h = handle.clone();
        q.set_notify(Box::new(move || h.wake()));
    }
    if now.len() > queues.len() {
        *queues = now;
    }
}

fn log_warn(msg: &str) {
    if let Some(m) = vlog::module("bridge") {
        m.log(vlog::Level::Warn, msg);
    }
}

/// What the server knows of one bridge.
struct BridgeEntry {
    /// Its `.mgmt` and `.snoop` listeners (none when they could not be bound).
    listeners: Vec<ListenerId>,
    /// Its ports as last told to the connections.
    ports: BTreeMap<u32, PhyPort>,
}

/// The loop thread's state apart from the loop.
struct Server {
    rundir: PathBuf,
    of: Arc<Ofproto>,
    dp: Arc<Mutex<Datapath>>,
    handler: OfHandler,
    connmgr: ConnMgr,
    bridges: BTreeMap<String, BridgeEntry>,
}

impl Server {
    /// Brings the listeners in line with the bridges, and tells connections of ports added,
    /// removed or changed.
    fn sync(&mut self, ev: &mut EventLoop) {
        self.handler.drain_events();
        // The ports' link state, as their devices report it, for liveness and port status.
        let links = self.dp.lock().map(|d| d.link_states()).unwrap_or_default();
        for (name, up) in links {
            self.of.set_link_state(&name, up);
        }
        lb_output::account(&self.of, &self.dp);
        self.of.run_bonds();
        lb_output::sync(&self.of, &self.dp);
        bond_learning::send(&self.of, &self.dp);
        let now: BTreeMap<String, BTreeMap<u32, PhyPort>> = {
            let pipe = self.of.pipe.read().unwrap_or_else(|e| e.into_inner());
            pipe.bridges
                .iter()
                .map(|b| {
                    let ports = bridge_view::phy_ports(b, openflow::msgs::port::OFPP_ANY)
                        .into_iter()
                        .map(|p| (p.port_no, p))
                        .collect();
                    (b.name.clone(), ports)
                })
                .collect()
        };
        let gone: Vec<String> = self
            .bridges
            .keys()
            .filter(|b| !now.contains_key(*b))
            .cloned()
            .collect();
        for name in gone {
            self.remove_bridge(ev, &name);
        }
        for (name, ports) in now {
            match self.bridges.get_mut(&name) {
                Some(e) => {
                    let old = std::mem::replace(&mut e.ports, ports);
                    self.port_changes(ev, &name, &old);
                }
                None => {
                    let listeners = self.listen(ev, &name);
                    self.bridges
                        .insert(name.clone(), BridgeEntry { listeners, ports });
                }
            }
            let mgmt = self.bridges[&name].listeners.first().copied();
            self.connmgr
                .sync_bridge(ev, &mut self.handler, &self.of, &name, mgmt);
        }
    }

    /// Listens on the bridge's `.mgmt` and `.snoop` sockets.
    fn listen(&mut self, ev: &mut EventLoop, bridge: &str) -> Vec<ListenerId> {
        let [mgmt, snoop] = bridge_targets(&self.rundir, bridge);
        let mut ids = Vec::new();
        match ev.listen(&mgmt, self.connmgr.mgmt_options(bridge)) {
            Ok((id, bound)) => {
                ids.push(id);
                self.handler
                    .listener_bridge
                    .insert(bound, bridge.to_owned());
            }
            Err(e) => log_warn(&format!("{bridge}: listening on {mgmt}: {e}")),
        }
        match ev.listen_snoop(&snoop, VersionSet::ALL) {
            Ok((id, _)) => ids.push(id),
            Err(e) => log_warn(&format!("{bridge}: listening on {snoop}: {e}")),
        }
        ids
    }

    /// A bridge was deleted: its listeners and connections go.
    fn remove_bridge(&mut self, ev: &mut EventLoop, bridge: &str) {
        let Some(e) = self.bridges.remove(bridge) else {
            return;
        };
        self.connmgr.remove_bridge(ev, &mut self.handler, bridge);
        for id in e.listeners {
            ev.close_listener(id);
        }
        self.handler.listener_bridge.retain(|_, b| b != bridge);
        let conns: Vec<ConnId> = self
            .handler
            .conns
            .iter()
            .filter(|(_, c)| c.bridge == bridge)
            .map(|(id, _)| *id)
            .collect();
        for id in conns {
            ev.close(id, &mut self.handler);
            self.handler.forget_conn(id);
        }
        self.handler.forget_bridge(bridge);
    }

    /// Sends a port status for every port of `bridge` added, removed or changed (its
    /// configuration or link state too) since `old` to the connections that receive them.
    fn port_changes(&mut self, ev: &mut EventLoop, bridge: &str, old: &BTreeMap<u32, PhyPort>) {
        let Some(new) = self.bridges.get(bridge).map(|e| &e.ports) else {
            return;
        };
        let changes = port_changes(old, new);
        let sources = &mut self.handler.port_mod_sources;
        for (reason, desc, before) in changes {
            // Before OpenFlow 1.5, the connection whose port mod it was is not told.
            let source = sources.remove(&(bridge.to_owned(), desc.port_no));
            let status = PortStatus { reason, desc };
            for (id, c) in &self.handler.conns {
                if Some(*id) == source && c.version < Version::Of15 {
                    continue;
                }
                if c.bridge == bridge
                    && c.receives_async(AsyncMsg::PortStatus, reason as u32)
                    && let Some(m) = status_message(c.version, &status, before.as_ref())
                {
                    ev.send(Dest::Conn(*id), m, MsgKind::Async);
                }
            }
        }
        sources.retain(|(b, _), _| b != bridge);
    }
}

/// `status` in `version`, unless it is a modification that `version` cannot show (the port
/// as it was, `before`, encodes the same: LIVE in OpenFlow 1.0, say), which OVS's
/// `connmgr_send_port_status()` does not send.
fn status_message(
    version: Version,
    status: &PortStatus,
    before: Option<&PhyPort>,
) -> Option<Vec<u8>> {
    let mut m = Vec::new();
    status.encode(version, &mut m);
    if let Some(before) = before {
        let mut was = Vec::new();
        let old = PortStatus {
            reason: status.reason,
            desc: before.clone(),
        };
        old.encode(version, &mut was);
        if was == m {
            return None;
        }
    }
    Some(m)
}

/// The port statuses that take a bridge's ports from `old` to `new`: reason, description,
/// and for a modification the description before it. A port that comes up live is announced
/// as OVS announces it, installed first (ADD, not yet LIVE) and live at its first run (MOD);
/// a change of both configuration and link state likewise in OVS's two steps, the
/// configuration at once (LIVE dropped with it when the port is no longer live), the link
/// state when the device reports it.
fn port_changes(
    old: &BTreeMap<u32, PhyPort>,
    new: &BTreeMap<u32, PhyPort>,
) -> Vec<(PortReason, PhyPort, Option<PhyPort>)> {
    let mut changes = Vec::new();
    for (no, p) in new {
        match old.get(no) {
            None if p.state & OFPPS_LIVE != 0 => {
                let mut installed = p.clone();
                installed.state &= !OFPPS_LIVE;
                changes.push((PortReason::Add, installed.clone(), None));
                changes.push((PortReason::Modify, p.clone(), Some(installed)));
            }
            None => changes.push((PortReason::Add, p.clone(), None)),
            Some(o) if o.config != p.config && o.state & !OFPPS_LIVE != p.state & !OFPPS_LIVE => {
                let mut configured = p.clone();
                configured.state = o.state & !(OFPPS_LIVE & !p.state);
                changes.push((PortReason::Modify, configured.clone(), Some(o.clone())));
                changes.push((PortReason::Modify, p.clone(), Some(configured)));
            }
            Some(o) if o != p => changes.push((PortReason::Modify, p.clone(), Some(o.clone()))),
            Some(_) => {}
        }
    }
    for (no, p) in old {
        if !new.contains_key(no) {
            changes.push((PortReason::Delete, p.clone(), None));
        }
    }
    changes
}

#[cfg(test)]
mod port_status_tests {
    use super::*;

    fn port(no: u32, state: u32) -> PhyPort {
        PhyPort {
            port_no: no,
            hw_addr: flow::EthAddr([2, 0, 0, 0, 0, no as u8]),
            name: format!("p{no}"),
            config: 0,
            state,
            curr: 0,
            advertised: 0,
            supported: 0,
            peer: 0,
            curr_speed: 0,
            max_speed: 0,
        }
    }

    #[test]
    fn a_live_port_is_added_then_made_live_as_ovs_announces_it() {
        let old = BTreeMap::new();
        let new = BTreeMap::from([(1, port(1, OFPPS_LIVE)), (2, port(2, 1))]);
        let c = port_changes(&old, &new);
        let got: Vec<(PortReason, u32, u32)> =
            c.iter().map(|(r, p, _)| (*r, p.port_no, p.state)).collect();
        assert_eq!(
            got,
            [
                (PortReason::Add, 1, 0),
                (PortReason::Modify, 1, OFPPS_LIVE),
                (PortReason::Add, 2, 1)
            ]
        );
        // Taken down (`mod-port down`): PORT_DOWN with LIVE gone, then LINK_DOWN.
        let down = PhyPort {
            config: 1,
            ..port(1, 1)
        };
        let c2 = port_changes(&new, &BTreeMap::from([(1, down), (2, port(2, 1))]));
        let got2: Vec<(PortReason, u32, u32)> =
            c2.iter().map(|(r, p, _)| (*r, p.config, p.state)).collect();
        assert_eq!(
            got2,
            [(PortReason::Modify, 1, 0), (PortReason::Modify, 1, 1)]
        );
        // OpenFlow 1.0 has no LIVE bit: its connections get the ADD only.
        let (reason, desc, before) = c[1].clone();
        let status = PortStatus { reason, desc };
        assert!(status_message(Version::Of10, &status, before.as_ref()).is_none());
        assert!(status_message(Version::Of12, &status, before.as_ref()).is_some());
    }
}
