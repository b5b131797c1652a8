//! The collectors: what a scrape reads from the running switch and how each figure is named.
//!
//! A scrape first takes a [`Snapshot`]: the PMDs' counters (each PMD copies its own between
//! two poll iterations when asked, as for `dpif-netdev/pmd-stats-show`; no lock a PMD takes
//! per packet), the ports' shared counters, the megaflow count and limit, all under the
//! datapath's control-side lock, which is let go before anything is formatted or written to
//! a socket. The connection tracker's counters are atomics read as they are, and the OpenFlow
//! tables are counted under their read lock, which the PMDs' upcalls share. Then every
//! figure is written in the exposition format, labelled as Prometheus's conventions say:
//! `pmd` and `core` for a PMD thread, `port` and `queue`, `reason`, `zone`, `bridge`,
//! `table`, `tier`, `stage`.

use std::sync::Mutex;

use datapath::dpif::{Datapath, PmdReport, PortReport};
use datapath::pmd::Stage;
use datapath::port::PortCounters;
use ofproto::ofproto::Ofproto;

use super::exposition::{Exposition, Format, Kind};

use Kind::{Counter, Gauge};

/// What one scrape reads from the datapath, taken under its lock.
pub(crate) struct Snapshot {
    pmds: Vec<PmdReport>,
    ports: Vec<PortReport>,
    megaflows: usize,
    flow_limit: usize,
    conntrack: std::sync::Arc<conntrack::Conntrack>,
}

impl Snapshot {
    /// Reads the datapath; `None` when its lock is poisoned (a thread panicked holding it).
    pub(crate) fn take(dp: &Mutex<Datapath>) -> Option<Snapshot> {
        let d = dp.lock().ok()?;
        Some(Snapshot {
            pmds: d.pmd_stats(),
            ports: d.port_reports(),
            megaflows: d.n_flows(),
            flow_limit: d.flow_limit(),
            conntrack: d.conntrack().clone(),
        })
    }
}

/// The whole exposition of the switch `dp` + `of` in `format`.
pub(crate) fn scrape(dp: &Mutex<Datapath>, of: &Ofproto, format: Format) -> String {
    let mut e = Exposition::new(format);
    e.sample(
        "flowpath_build_info",
        Gauge,
        "flowpath's version, always 1.",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1u64,
    );
    e.sample(
        "flowpath_tsc_hertz",
        Gauge,
        "Rate of the time stamp counter the cycle counters count in (cycles per second).",
        &[],
        datapath::tsc::hz(),
    );
    let up = Snapshot::take(dp);
    e.sample(
        "flowpath_datapath_up",
        Gauge,
        "Whether the datapath answered this scrape (0: its control lock is poisoned).",
        &[],
        up.is_some(),
    );
    if let Some(s) = &up {
        pmds(&mut e, &s.pmds);
        ports(&mut e, &s.ports);
        megaflows(&mut e, s);
        conntrack(&mut e, &s.conntrack);
    }
    openflow(&mut e, of);
    e.render()
}

/// Per PMD thread: packets, cycles (busy, idle, by stage), lookups by tier, upcalls, drops.
fn pmds(e: &mut Exposition, pmds: &[PmdReport]) {
    for (i, r) in pmds.iter().enumerate() {
        let s = &r.stats;
        let pmd = i.to_string();
        let core = r
            .core_id
            .map_or_else(|| "none".to_owned(), |c| c.to_string());
        let l = [("pmd", pmd.as_str()), ("core", core.as_str())];
        let mut c = |name, help, v: u64| e.sample(name, Counter, help, &l, v);
        c(
            "flowpath_pmd_rx_packets_total",
            "Packets the PMD thread received from its rx queues.",
            s.rx_packets,
        );
        c(
            "flowpath_pmd_tx_packets_total",
            "Packets the PMD thread handed to tx queues.",
            s.tx_packets,
        );
        c(
            "flowpath_pmd_tx_batches_total",
            "Tx bursts the PMD thread's packets went out in.",
            s.tx_batches,
        );
        c(
            "flowpath_pmd_iterations_total",
            "Poll loop iterations.",
            s.iterations,
        );
        c(
            "flowpath_pmd_busy_iterations_total",
            "Poll loop iterations that received at least one packet.",
            s.busy_iterations,
        );
        c(
            "flowpath_pmd_busy_cycles_total",
            "TSC cycles of iterations that received packets (flowpath_tsc_hertz per second).",
            s.busy_cycles,
        );
        c(
            "flowpath_pmd_idle_cycles_total",
            "TSC cycles of iterations that received nothing.",
            s.idle_cycles,
        );
        c(
            "flowpath_pmd_recirculations_total",
            "Passes through the datapath by recirculation (recirc).",
            s.recirculations,
        );
        c(
            "flowpath_pmd_tunnel_pops_total",
            "Packets decapsulated by tnl_pop, each making another pass.",
            s.tnl_pops,
        );
        c(
            "flowpath_pmd_subtable_lookups_total",
            "Megaflow classifier subtables probed (divide by the megaflow tier's hits).",
            s.subtable_lookups,
        );
        c(
            "flowpath_pmd_upcalls_total",
            "Misses the slow path handled (upcalls that installed or executed a flow).",
            s.upcalls,
        );
        c(
            "flowpath_pmd_lost_upcalls_total",
            "Misses dropped at the upcall: the handler failed or the waiting queue was full.",
            s.lost_upcalls,
        );
        c(
            "flowpath_pmd_deferred_upcalls_total",
            "Misses that waited for the slow path's time budget.",
            s.deferred_upcalls,
        );
        c(
            "flowpath_pmd_conntrack_packets_total",
            "Packets through ct().",
            s.ct_packets,
        );
        let total = s.busy_cycles + s.idle_cycles;
        e.sample(
            "flowpath_pmd_busy_ratio",
            Gauge,
            "Share of the PMD thread's cycles spent on iterations that received packets, since \
             its statistics were cleared (use rate() of the cycle counters for a recent figure).",
            &l,
            if total == 0 {
                0.0
            } else {
                s.busy_cycles as f64 / total as f64
            },
        );
        e.sample(
            "flowpath_pmd_emc_entries",
            Gauge,
            "Entries in the PMD thread's exact-match cache.",
            &l,
            r.emc_entries,
        );
        for st in Stage::ALL {
            e.sample(
                "flowpath_pmd_stage_cycles_total",
                Counter,
                "TSC cycles by stage of the pass, estimated from one iteration in 8 \
                 (dpif-netdev/pmd-stage-show).",
                &[l[0], l[1], ("stage", st.name())],
                s.stage_cycles[st as usize],
            );
        }
        for (tier, n) in [
            ("simple", s.simple_hits),
            ("emc", s.emc_hits),
            ("decap", s.decap_hits),
            ("megaflow", s.megaflow_hits),
        ] {
            e.sample(
                "flowpath_pmd_cache_hits_total",
                Counter,
                "Datapath passes a lookup tier served: simple match, exact-match cache, decap \
                 fast path, megaflow classifier.",
                &[l[0], l[1], ("tier", tier)],
                n,
            );
        }
        for (reason, n) in s.drops() {
            e.sample(
                "flowpath_pmd_dropped_packets_total",
                Counter,
                "Packets the datapath dropped, by reason (dpif-netdev/pmd-drop-show).",
                &[l[0], l[1], ("reason", reason)],
                n,
            );
        }
        for (m, n) in flow::Malformed::ALL.iter().zip(s.malformed) {
            e.sample(
                "flowpath_pmd_malformed_packets_total",
                Counter,
                "Packets switched on the headers that parsed, by the malformation that stopped \
                 the parse.",
                &[l[0], l[1], ("reason", m.name())],
                n,
            );
        }
        let mut c = |name, help, v: u64| e.sample(name, Counter, help, &l, v);
        c(
            "flowpath_pmd_rewrite_errors_total",
            "Header rewrites not applied because the packet lacked the header.",
            s.rewrite_errors,
        );
        c(
            "flowpath_pmd_userspace_packets_total",
            "Packets a userspace action sent to the slow path (packet-ins).",
            s.userspace_packets,
        );
    }
}

/// The counters of a port or a queue, under the family names of `names` (rx packets, rx
/// bytes, rx dropped, tx packets, tx bytes, tx dropped, errors; `None` leaves one out).
type PortFamilies = [Option<(&'static str, &'static str)>; 7];

const PORT_FAMILIES: PortFamilies = [
    Some((
        "flowpath_port_rx_packets_total",
        "Packets the port received.",
    )),
    Some((
        "flowpath_port_rx_bytes_total",
        "Bytes of the packets the port received.",
    )),
    Some((
        "flowpath_port_rx_dropped_total",
        "Packets the port's backend lost on receive (ring overruns, frames it could not take).",
    )),
    Some(("flowpath_port_tx_packets_total", "Packets the port sent.")),
    Some((
        "flowpath_port_tx_bytes_total",
        "Bytes of the packets the port sent.",
    )),
    Some((
        "flowpath_port_tx_dropped_total",
        "Packets given to the port that did not go out (ring full, link down, write failed).",
    )),
    Some((
        "flowpath_port_errors_total",
        "Receive and send errors of the port (malformed descriptors, failed system calls).",
    )),
];

const RXQ_FAMILIES: PortFamilies = [
    Some((
        "flowpath_port_rxq_packets_total",
        "Packets an rx queue received.",
    )),
    Some((
        "flowpath_port_rxq_bytes_total",
        "Bytes an rx queue received.",
    )),
    Some((
        "flowpath_port_rxq_dropped_total",
        "Packets an rx queue lost.",
    )),
    None,
    None,
    None,
    Some(("flowpath_port_rxq_errors_total", "Errors of an rx queue.")),
];

const TXQ_FAMILIES: PortFamilies = [
    None,
    None,
    None,
    Some((
        "flowpath_port_txq_packets_total",
        "Packets a tx queue sent.",
    )),
    Some(("flowpath_port_txq_bytes_total", "Bytes a tx queue sent.")),
    Some((
        "flowpath_port_txq_dropped_total",
        "Packets a tx queue could not send.",
    )),
    Some(("flowpath_port_txq_errors_total", "Errors of a tx queue.")),
];

fn port_counters(e: &mut Exposition, f: &PortFamilies, labels: &[(&str, &str)], c: &PortCounters) {
    let values = [
        c.rx_packets,
        c.rx_bytes,
        c.rx_dropped,
        c.tx_packets,
        c.tx_bytes,
        c.tx_dropped,
        c.errors,
    ];
    for (fam, v) in f.iter().zip(values) {
        if let Some((name, help)) = fam {
            e.sample(name, Counter, help, labels, v);
        }
    }
}

/// Per port and queue: packets, bytes, drops, errors, link state (`port/stats`).
fn ports(e: &mut Exposition, ports: &[PortReport]) {
    for p in ports {
        let no = p.no.to_string();
        e.sample(
            "flowpath_port_info",
            Gauge,
            "A datapath port, always 1: its type and datapath port number.",
            &[
                ("port", p.name.as_str()),
                ("type", p.kind),
                ("dp_port", no.as_str()),
            ],
            1u64,
        );
        e.sample(
            "flowpath_port_link_up",
            Gauge,
            "Whether the port's link is up (1) or down (0).",
            &[("port", p.name.as_str())],
            p.link_up,
        );
        port_counters(e, &PORT_FAMILIES, &[("port", p.name.as_str())], &p.counters);
        for (q, c) in &p.queues {
            let (f, n) = match (q.strip_prefix("rx"), q.strip_prefix("tx")) {
                (Some(n), _) => (&RXQ_FAMILIES, n),
                (_, Some(n)) => (&TXQ_FAMILIES, n),
                _ => continue,
            };
            port_counters(e, f, &[("port", p.name.as_str()), ("queue", n)], c);
        }
    }
    // Listed even when no port counts per queue.
    for (name, help) in RXQ_FAMILIES.iter().chain(&TXQ_FAMILIES).flatten() {
        e.declare(name, Counter, help);
    }
}

/// Megaflows held and the limit each PMD thread has.
fn megaflows(e: &mut Exposition, s: &Snapshot) {
    e.sample(
        "flowpath_megaflows",
        Gauge,
        "Megaflows the PMD threads hold, summed (a flow two PMDs installed counts twice).",
        &[],
        s.megaflows,
    );
    e.sample(
        "flowpath_megaflow_limit",
        Gauge,
        "The most megaflows each PMD thread holds (flow-limit).",
        &[],
        s.flow_limit,
    );
}

/// Connections, by zone, with their limits, and the tracker's counters.
fn conntrack(e: &mut Exposition, ct: &conntrack::Conntrack) {
    e.sample(
        "flowpath_conntrack_connections",
        Gauge,
        "Connections in the connection tracker.",
        &[],
        ct.n_conns(),
    );
    e.sample(
        "flowpath_conntrack_connections_limit",
        Gauge,
        "The most connections the tracker holds (ct-set-maxconns).",
        &[],
        ct.maxconns(),
    );
    e.sample(
        "flowpath_conntrack_zone_default_limit",
        Gauge,
        "Connections a zone without a limit of its own may hold (0: no limit).",
        &[],
        ct.default_limit(),
    );
    e.declare(
        "flowpath_conntrack_zone_connections",
        Gauge,
        "Connections in a zone, for the zones that hold some or have a limit.",
    );
    e.declare(
        "flowpath_conntrack_zone_limit",
        Gauge,
        "A zone's own connection limit (ct-set-limits), for the zones that have one.",
    );
    for zone in 0..=u16::MAX {
        let (n, limit) = (ct.zone_conns(zone), ct.zone_limit(zone));
        if n == 0 && limit.is_none() {
            continue;
        }
        let z = zone.to_string();
        e.sample(
            "flowpath_conntrack_zone_connections",
            Gauge,
            "",
            &[("zone", z.as_str())],
            n,
        );
        if let Some(limit) = limit {
            e.sample(
                "flowpath_conntrack_zone_limit",
                Gauge,
                "",
                &[("zone", z.as_str())],
                limit,
            );
        }
    }
    let st = ct.stats();
    let mut c = |name, help, v: u64| e.sample(name, Counter, help, &[], v);
    c(
        "flowpath_conntrack_setups_total",
        "Connections committed (set up), all zones.",
        st.committed,
    );
    c(
        "flowpath_conntrack_expiries_total",
        "Connections removed by expiry, all zones.",
        st.expired,
    );
    c(
        "flowpath_conntrack_limit_refused_total",
        "Commits refused by the global or a zone's limit.",
        st.limit_refused,
    );
    c(
        "flowpath_conntrack_nat_exhausted_total",
        "Commits refused because the NAT range had no free tuple.",
        st.nat_exhausted,
    );
    c(
        "flowpath_conntrack_tcp_invalid_total",
        "TCP segments out of window or with bad flags.",
        st.tcp_invalid,
    );
    for (r, n) in conntrack::key::Invalid::ALL.iter().zip(st.invalid) {
        e.sample(
            "flowpath_conntrack_invalid_total",
            Counter,
            "Packets ct() marked invalid, by reason.",
            &[("reason", r.name())],
            n,
        );
    }
}

/// OpenFlow rules per bridge and table, ports per bridge, and the tunnel ports.
fn openflow(e: &mut Exposition, of: &Ofproto) {
    e.declare(
        "flowpath_openflow_rules",
        Gauge,
        "OpenFlow rules in a bridge's table (table 0 and the tables that hold rules).",
    );
    e.declare(
        "flowpath_tunnel_port_info",
        Gauge,
        "A tunnel port, always 1: its bridge, type and the datapath port it shares.",
    );
    let pipe = of.pipe.read().unwrap_or_else(|p| p.into_inner());
    for b in &pipe.bridges {
        e.sample(
            "flowpath_openflow_ports",
            Gauge,
            "OpenFlow ports of a bridge, its LOCAL port included.",
            &[("bridge", b.name.as_str())],
            b.ports.len(),
        );
        for (t, rules) in b.tables.iter().enumerate() {
            if t > 0 && rules.is_empty() {
                continue;
            }
            let table = t.to_string();
            e.sample(
                "flowpath_openflow_rules",
                Gauge,
                "",
                &[("bridge", b.name.as_str()), ("table", table.as_str())],
                rules.len(),
            );
        }
        for (ofport, t) in &b.tunnels {
            let name = b.ports.get(ofport).map_or("?", |p| p.name.as_str());
            e.sample(
                "flowpath_tunnel_port_info",
                Gauge,
                "",
                &[
                    ("bridge", b.name.as_str()),
                    ("port", name),
                    ("type", t.kind.name()),
                    ("dp_port", t.dp_port_name().as_str()),
                ],
                1u64,
            );
        }
    }
}
