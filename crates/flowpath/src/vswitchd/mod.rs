//! `flowpath run --ovsdb TARGET`: the switch configured by an `ovsdb-server` holding the
//! Open_vSwitch database, standing in for `ovs-vswitchd` (`vswitchd/bridge.c`). A thread
//! takes the `ovs_vswitchd` lock, monitors the columns `ovs-vswitchd` monitors, and on every
//! change reconciles the running switch with the database ([`reconcile`]) and writes back, in
//! one transaction, what `ovs-vswitchd` writes ([`status`]), `cur_cfg` included, so that
//! `ovs-vsctl` returns. Statistics are refreshed every 5 seconds.
//!
//! When the database goes away the switch keeps forwarding on its last configuration; when it
//! is back the snapshot is read afresh and only what differs changes. While another process
//! holds the lock, nothing is configured (OVS's "another ovs-vswitchd process is running").

mod bfd;
mod bonds;
mod capabilities;
mod desired;
mod iface_types;
mod knobs;
mod local_addrs;
pub(crate) mod ofport;
mod port_order;
mod reconcile;
mod status;
mod tunnel_neigh;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use datapath::dpif::Datapath;
use ofproto::ofproto::Ofproto;
use ovsdb::{Idl, IdlOptions, IdlState, TxnError};

use crate::metrics::Metrics;
use crate::ofserver::ControllerSettings;

use desired::Desired;
pub use iface_types::DummyLevel;
use iface_types::TypeContext;
use reconcile::{Applied, Switch};

/// The lock every `ovs-vswitchd` takes, so that two never drive one database.
pub(crate) const LOCK: &str = "ovs_vswitchd";

/// How often the interfaces' statistics are written (OVS's default stats interval).
const STATS_INTERVAL: Duration = Duration::from_secs(5);

/// How often the status is compared with the database besides changes (link states,
/// controller connections).
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How long a reconfiguration that added a bridge waits for its OpenFlow listener, which the
/// OpenFlow server binds on its next turn (at most `ofserver::SYNC_INTERVAL` later).
const LISTENER_WAIT: Duration = Duration::from_secs(2);

/// What `--ovsdb` runs with.
pub(crate) struct Options {
    /// `unix:PATH` or `tcp:IP:PORT`.
    pub target: String,
    /// The run directory (vhost-user server sockets).
    pub rundir: PathBuf,
    /// `--enable-dummy[=override]`: which interface types become dummy ports.
    pub dummy: DummyLevel,
}

/// The running reconciler.
pub(crate) struct Vswitchd {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    bfd: Option<bfd::Sender>,
}

impl Vswitchd {
    /// Starts the reconciler of switch `of` + `dp`.
    pub fn start(
        opts: Options,
        of: Arc<Ofproto>,
        dp: Arc<Mutex<Datapath>>,
        controllers: ControllerSettings,
        metrics: Arc<Metrics>,
    ) -> Vswitchd {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let bfd = Some(bfd::Sender::start(of.clone(), dp.clone()));
        let thread = std::thread::Builder::new()
            .name("vswitchd".into())
            .spawn(move || run(opts, &of, &dp, &controllers, &metrics, &stop2))
            .ok();
        Vswitchd { stop, thread, bfd }
    }

    /// Stops it (the switch stays as it is).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(b) = self.bfd.take() {
            b.stop();
        }
    }
}

/// Logs under `bridge`, as `ovs-vswitchd`'s reconfiguration does.
fn log(level: vlog::Level, msg: &str) {
    if let Some(m) = vlog::module("bridge") {
        m.log(level, msg);
    }
}

/// The columns `ovs-vswitchd` 3.1 monitors that flowpath reads or writes (everything but
/// `external_ids`, which belongs to other clients).
fn monitored() -> Vec<(String, Vec<String>)> {
    let t = |table: &str, cols: &[&str]| {
        (
            table.to_owned(),
            cols.iter().map(|c| (*c).to_owned()).collect(),
        )
    };
    vec![
        t(
            "Open_vSwitch",
            &[
                "bridges",
                "cur_cfg",
                "datapath_types",
                "datapaths",
                "dpdk_initialized",
                "dpdk_version",
                "iface_types",
                "next_cfg",
                "other_config",
            ],
        ),
        t(
            "Bridge",
            &[
                "controller",
                "datapath_id",
                "datapath_type",
                "datapath_version",
                "fail_mode",
                "mirrors",
                "name",
                "other_config",
                "ports",
                "protocols",
            ],
        ),
        t(
            "Mirror",
            &[
                "name",
                "output_port",
                "output_vlan",
                "select_all",
                "select_dst_port",
                "select_src_port",
                "select_vlan",
                "snaplen",
                "statistics",
            ],
        ),
        t(
            "Port",
            &[
                "bond_active_slave",
                "bond_downdelay",
                "bond_mode",
                "bond_updelay",
                "cvlans",
                "interfaces",
                "lacp",
                "name",
                "other_config",
                "qos",
                "tag",
                "trunks",
                "vlan_mode",
            ],
        ),
        t(
            "Interface",
            &[
                "admin_state",
                "bfd",
                "bfd_status",
                "error",
                "ifindex",
                "lacp_current",
                "link_resets",
                "link_state",
                "mac",
                "mac_in_use",
                "mtu",
                "mtu_request",
                "name",
                "ofport",
                "ofport_request",
                "options",
                "other_config",
                "statistics",
                "status",
                "type",
            ],
        ),
        t(
            "Controller",
            &[
                "inactivity_probe",
                "is_connected",
                "max_backoff",
                "role",
                "status",
                "target",
            ],
        ),
        t("Datapath", &["capabilities", "ct_zones"]),
        t("CT_Zone", &["timeout_policy"]),
        t("CT_Timeout_Policy", &["timeouts"]),
    ]
}

/// Subscribes to the kernel's link and address changes: the flag they set, and the loop
/// waiting in `idl` woken. Without the subscription (no netlink), the flag stays false and
/// the addresses are read on every poll only.
fn watch_kernel_addrs(idl: &Idl) -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let (f, waker) = (Arc::clone(&flag), idl.waker());
    if let Err(e) = netdev::addr_watch::spawn(move || {
        f.store(true, Ordering::Relaxed);
        waker.wake()
    }) {
        log(
            vlog::Level::Warn,
            &format!("kernel address changes will be polled: {e}"),
        );
    }
    flag
}

/// Whether `a` and `b` have the same bridges with the same `other_config:hwaddr`: what a
/// bridge's own addresses depend on besides the kernel's.
fn same_bridges(a: &Desired, b: &Desired) -> bool {
    let key = |d: &Desired| {
        d.bridges
            .values()
            .map(|br| (br.name.clone(), br.other_config.get("hwaddr").cloned()))
            .collect::<Vec<_>>()
    };
    key(a) == key(b)
}

/// Waits (up to [`LISTENER_WAIT`]) until every bridge `d` has and `last` had not listens on
/// its `BRIDGE.mgmt`, as ovs-vswitchd has bound it before it answers `next_cfg`: a client
/// that `ovs-vsctl add-br` has returned to (ovn-controller, `ovs-ofctl`) finds the socket.
fn wait_for_listeners(d: &Desired, last: Option<&Desired>, rundir: &std::path::Path) {
    let deadline = Instant::now() + LISTENER_WAIT;
    for name in d.bridges.keys() {
        if last.is_some_and(|l| l.bridges.contains_key(name)) {
            continue;
        }
        let sock = rundir.join(format!("{name}.mgmt"));
        while !sock.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The reconciler's loop.
fn run(
    opts: Options,
    of: &Arc<Ofproto>,
    dp: &Mutex<Datapath>,
    controllers: &ControllerSettings,
    metrics: &Metrics,
    stop: &AtomicBool,
) {
    let idl = Idl::start(IdlOptions {
        target: opts.target.clone(),
        db: "Open_vSwitch".into(),
        lock: Some(LOCK.into()),
        columns: monitored(),
    });
    let sw = Switch {
        of,
        dp,
        controllers,
    };
    let mut applied = Applied::default();
    let mut knobs = knobs::Knobs::default();
    let mut last_desired: Option<Desired> = None;
    let mut seqno = 0;
    let mut contended = false;
    let mut retry = false;
    let mut last_stats = Instant::now() - STATS_INTERVAL;
    let mut last_poll = Instant::now();
    let mut support_logged = false;
    // The kernel's address changes wake the loop at once (the bridges' addresses route
    // tunnels); without notifications they are read on every poll.
    let addrs_changed = watch_kernel_addrs(&idl);
    let mut neighbours = tunnel_neigh::TunnelNeighbours::default();
    while !stop.load(Ordering::Relaxed) {
        let now_seqno = idl.wait(seqno, Duration::from_millis(200));
        let changed = now_seqno != seqno;
        seqno = now_seqno;
        match idl.state() {
            IdlState::Connecting => continue,
            IdlState::LockContended => {
                if !contended {
                    log(
                        vlog::Level::Err,
                        "another ovs-vswitchd process is running, disabling this process \
                         until it goes away",
                    );
                    contended = true;
                }
                continue;
            }
            IdlState::Monitoring => contended = false,
        }
        let stats_due = last_stats.elapsed() >= STATS_INTERVAL;
        let addr_event = addrs_changed.swap(false, Ordering::Relaxed);
        // A BFD session's new state is written at once, as OVS's connectivity sequence does.
        let bfd_event = of.bfd.status_changed();
        let poll_due = last_poll.elapsed() >= POLL_INTERVAL;
        if !changed && !retry && !stats_due && !addr_event && !bfd_event && !poll_due {
            continue;
        }
        last_poll = Instant::now();
        let db = idl.snapshot();
        crate::memory_cmd::IDL_CELLS.store(db.cells(), std::sync::atomic::Ordering::Relaxed);
        let d = Desired::from_db(&db);
        if last_desired.as_ref() != Some(&d) {
            let default_netdev = d
                .other_config
                .get(iface_types::NETDEV_KNOB)
                .map(String::as_str);
            let ctx = TypeContext {
                dummy: opts.dummy,
                rundir: &opts.rundir,
                default_netdev,
            };
            knobs.apply_dpdk(&d.other_config);
            if !support_logged && !d.bridges.is_empty() {
                // As ovs-vswitchd when its first bridge opens the datapath.
                if let Some(m) = vlog::module("ofproto_dpif") {
                    let caps = capabilities::capabilities();
                    for line in capabilities::support_lines("netdev@flowpath", &caps) {
                        m.log(vlog::Level::Info, &line);
                    }
                }
                support_logged = true;
            }
            applied.reconcile(&d, &sw, &ctx);
            bfd::configure(of, &d, &applied);
            // The connections hear of the ports before cur_cfg says the change is done.
            crate::port_ops::announce(of);
            wait_for_listeners(&d, last_desired.as_ref(), &opts.rundir);
            crate::coverage_cmd::BRIDGE_RECONFIGURE.inc();
            if let Ok(mut dp) = dp.lock() {
                knobs.apply(&mut dp, &d.other_config);
                let ct = dp.conntrack().clone();
                knobs.apply_ct_zones(&ct, &d.ct_zones);
            }
            // Not under the datapath's lock: a scrape being answered takes it.
            knobs.apply_metrics(metrics, &d.other_config);
        }
        // The kernel's addresses are read when they may have changed, not on every
        // database change: with a thousand ports each `ovs-vsctl` call would pay for it.
        if addr_event || poll_due || last_desired.as_ref().is_none_or(|l| !same_bridges(l, &d)) {
            applied.refresh_local_addrs(&d, &sw);
        }
        neighbours.solicit(of, dp);
        let ops = {
            let Ok(dpg) = dp.lock() else { break };
            let src = status::StatusSources {
                of,
                dp: &dpg,
                controllers,
                dummy: opts.dummy,
                statistics: stats_due,
            };
            status::status_ops(&db, &d, &applied, &src)
        };
        last_desired = Some(d);
        if stats_due {
            last_stats = Instant::now();
        }
        retry = false;
        if ops.is_empty() {
            applied.added.clear();
            continue;
        }
        match idl.transact(ops) {
            Ok(_) => applied.added.clear(),
            // The database changed under the transaction, or the connection or the lock
            // went: build it again from the next snapshot.
            Err(TxnError::TryAgain) | Err(TxnError::Disconnected) | Err(TxnError::NotLocked) => {
                retry = true;
            }
            Err(TxnError::Error(e)) => {
                log(
                    vlog::Level::Warn,
                    &format!("status transaction failed: {e}"),
                );
                retry = true;
                // Not at once: the same transaction would fail the same way.
                std::thread::sleep(POLL_INTERVAL);
            }
        }
    }
    idl.stop();
}
