//! `coverage/show` and `coverage/read-counter COUNTER`, as OVS's: the switch's events, each
//! with its total and its rates over the last 5 seconds, minute and hour
//! ([`ofproto::coverage`] holds the counters' mechanism and OVS's text).
//!
//! Events are of three kinds, listed together in [`EVENTS`]: control-plane events counted
//! where they happen with a relaxed atomic (this binary's own, below, and those of `ofproto`
//! and `openflow`); the datapath's per-packet events, read from every PMD's own counters when
//! the totals are read, so that the packet path gains no shared write; and conntrack's,
//! read from its counters. The rates come from a sample every 5 seconds, taken by
//! [`run`] from the switch's main loop.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use conntrack::CtStats;
use datapath::dpif::Datapath;
use datapath::pmd::PmdStats;
use datapath::xlate_drop::XlateDrop;
use ofproto::coverage::{Counter, Rates};
use unixctl::Registry;

use crate::commands::lock_dp;

/// The switch reconfigured from OVSDB, or started from its configuration file (OVS's
/// `bridge_reconfigure`).
pub(crate) static BRIDGE_RECONFIGURE: Counter = Counter::new("bridge_reconfigure");
/// OpenFlow messages received, on every bridge's connections (OVS's `ofproto_recv_openflow`).
pub(crate) static OFPROTO_RECV_OPENFLOW: Counter = Counter::new("ofproto_recv_openflow");
/// OpenFlow packet-outs handled (OVS's `ofproto_packet_out`).
pub(crate) static OFPROTO_PACKET_OUT: Counter = Counter::new("ofproto_packet_out");
/// Packets the control plane handed the datapath to execute: packet-outs and resumed
/// continuations (OVS's `dpif_execute`).
pub(crate) static DPIF_EXECUTE: Counter = Counter::new("dpif_execute");
/// Every datapath flow removed at once: `dpctl/del-flows`, `upcall/*-megaflows`,
/// `revalidator/purge` (OVS's `dpif_flow_flush`).
pub(crate) static DPIF_FLOW_FLUSH: Counter = Counter::new("dpif_flow_flush");

/// Where an event's total comes from.
#[derive(Clone, Copy)]
enum Source {
    /// A control-plane counter.
    Counter(&'static Counter),
    /// The PMDs' counters, summed.
    Pmd(&'static str, fn(&PmdStats) -> u64),
    /// Conntrack's counters.
    Ct(&'static str, fn(&CtStats) -> u64),
    /// The PMDs' drops for one translation failure, under OVS's counter name.
    Xlate(XlateDrop),
}

impl Source {
    fn name(self) -> &'static str {
        match self {
            Source::Counter(c) => c.name(),
            Source::Pmd(n, _) | Source::Ct(n, _) => n,
            Source::Xlate(r) => r.counter(),
        }
    }
}

/// Every event, in `coverage/show`'s order (docs/observability.md says what each counts).
static EVENTS: [Source; 42] = [
    Source::Counter(&BRIDGE_RECONFIGURE),
    Source::Counter(&ofproto::coverage::OFPROTO_FLUSH),
    Source::Counter(&OFPROTO_PACKET_OUT),
    Source::Counter(&OFPROTO_RECV_OPENFLOW),
    Source::Counter(&ofproto::coverage::OFPROTO_UPDATE_PORT),
    Source::Counter(&openflow::conn::RCONN_OVERFLOW),
    Source::Counter(&openflow::conn::RCONN_QUEUED),
    Source::Counter(&openflow::conn::RCONN_SENT),
    Source::Counter(&ofproto::coverage::XLATE_ACTIONS),
    Source::Counter(&ofproto::coverage::REVALIDATE_ROUND),
    Source::Pmd("upcall_flow_limit_hit", |s| s.flow_limit_hits),
    Source::Pmd("upcall_deferred", |s| s.deferred_upcalls),
    Source::Counter(&DPIF_FLOW_FLUSH),
    Source::Counter(&ofproto::coverage::DPIF_FLOW_PUT),
    Source::Counter(&ofproto::coverage::DPIF_FLOW_DEL),
    Source::Counter(&DPIF_EXECUTE),
    Source::Counter(&ofproto::coverage::BFD_RX_MALFORMED),
    Source::Counter(&ofproto::coverage::BFD_RX_IGNORED),
    Source::Pmd("netdev_received", |s| s.rx_packets),
    Source::Pmd("netdev_sent", |s| s.tx_packets),
    Source::Pmd("datapath_drop_upcall_error", |s| s.lost_upcalls),
    Source::Pmd("datapath_drop_recirc_error", |s| s.recirc_depth_drops),
    Source::Pmd("datapath_drop_meter", |s| s.meter_drops),
    Source::Pmd("datapath_drop_tunnel_pop_error", |s| s.tnl_pop_dropped()),
    Source::Pmd("datapath_drop_gso", |s| s.gso_drops),
    Source::Pmd("drop_action_of_pipeline", |s| s.action_drops),
    Source::Xlate(XlateDrop::BridgeNotFound),
    Source::Xlate(XlateDrop::RecursionTooDeep),
    Source::Xlate(XlateDrop::TooManyResubmits),
    Source::Xlate(XlateDrop::StackTooDeep),
    Source::Xlate(XlateDrop::NoRecirculationContext),
    Source::Xlate(XlateDrop::RecirculationConflict),
    Source::Xlate(XlateDrop::TooManyMplsLabels),
    Source::Xlate(XlateDrop::InvalidTunnelMetadata),
    Source::Xlate(XlateDrop::UnsupportedPacketType),
    Source::Xlate(XlateDrop::Congestion),
    Source::Xlate(XlateDrop::ForwardingDisabled),
    Source::Pmd("datapath_rewrite_error", |s| s.rewrite_errors),
    Source::Ct("conntrack_commit", |c| c.committed),
    Source::Ct("conntrack_full", |c| c.maxconns_refused),
    Source::Ct("conntrack_zone_full", |c| {
        c.limit_refused.saturating_sub(c.maxconns_refused)
    }),
    Source::Ct("conntrack_expired", |c| c.expired),
];

/// The events' names, in [`EVENTS`] order.
fn names() -> Vec<&'static str> {
    EVENTS.iter().map(|e| e.name()).collect()
}

/// Every event's total now, in [`EVENTS`] order.
fn totals(dp: &Datapath) -> Vec<u64> {
    let pmd = dp.total_stats();
    let ct = dp.conntrack().stats();
    EVENTS
        .iter()
        .map(|e| match e {
            Source::Counter(c) => c.read(),
            Source::Pmd(_, f) => f(&pmd),
            Source::Ct(_, f) => f(&ct),
            Source::Xlate(r) => pmd.xlate_drops[*r as usize],
        })
        .collect()
}

/// The rates' samples, with the clock they are taken by.
struct Sampler {
    start: Instant,
    rates: Rates,
}

fn sampler() -> &'static Mutex<Sampler> {
    static S: OnceLock<Mutex<Sampler>> = OnceLock::new();
    S.get_or_init(|| {
        Mutex::new(Sampler {
            start: Instant::now(),
            rates: Rates::new(EVENTS.len()),
        })
    })
}

/// Samples the totals for the rates when a sample is due (every
/// [`ofproto::coverage::RUN_INTERVAL_MS`]); called from the switch's main loop, it reads the
/// PMDs' counters only then.
pub(crate) fn run(dp: &Mutex<Datapath>) {
    let mut s = sampler().lock().unwrap_or_else(|e| e.into_inner());
    let now = s.start.elapsed().as_millis() as u64;
    if !s.rates.due(now) {
        return;
    }
    let Ok(dp) = dp.lock() else { return };
    let totals = totals(&dp);
    drop(dp);
    s.rates.run(now, &totals);
}

/// Registers `coverage/show` and `coverage/read-counter`.
pub fn register(reg: &Registry, dp: &Arc<Mutex<Datapath>>) {
    let dp2 = dp.clone();
    let _ = reg.register("coverage/show", "", 0, 0, move |_| {
        let totals = totals(&*lock_dp(&dp2)?);
        let s = sampler().lock().unwrap_or_else(|e| e.into_inner());
        Ok(ofproto::coverage::show(&names(), &totals, &s.rates))
    });
    let dp2 = dp.clone();
    let _ = reg.register("coverage/read-counter", "COUNTER", 1, 1, move |a| {
        let i = names()
            .iter()
            .position(|n| *n == a[0])
            .ok_or_else(|| "No such counter".to_string())?;
        Ok(format!("{}\n", totals(&*lock_dp(&dp2)?)[i]))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use datapath::dpif::{DatapathBuilder, DpConfig};

    #[test]
    fn every_event_has_one_name_and_read_counter_reads_it() {
        let mut n = names();
        n.sort_unstable();
        n.dedup();
        assert_eq!(n.len(), EVENTS.len());
        let dp = Arc::new(Mutex::new(
            DatapathBuilder::new(DpConfig::default()).start().unwrap(),
        ));
        let reg = Registry::new("test");
        register(&reg, &dp);
        let read = || -> u64 {
            let n = reg.dispatch("coverage/read-counter", &["dpif_execute"]);
            n.unwrap().trim().parse().unwrap()
        };
        let before = read();
        DPIF_EXECUTE.inc();
        let after = read();
        // Other tests may execute packets meanwhile.
        assert!(after > before, "{before} {after}");
        assert_eq!(
            reg.dispatch("coverage/read-counter", &["no_such_event"]),
            Err("No such counter\n".to_string())
        );
        let show = reg.dispatch::<&str>("coverage/show", &[]).unwrap();
        assert!(
            show.starts_with(
                "Event coverage, avg rate over last: 5 seconds, last minute, last hour,  hash="
            ),
            "{show}"
        );
        assert!(show.contains("\ndpif_execute  "), "{show}");
        assert!(show.ends_with(" events never hit\n"), "{show}");
    }

    /// `conntrack_full` counts the commits the global limit refuses, not a zone limit's, as
    /// OVS 3.1's `conn_not_found` does; those are `conntrack_zone_full` (flowpath's own). The
    /// zone's limit is checked first: a commit into a full zone of a full table is the zone's.
    #[test]
    fn conntrack_full_counts_the_global_limit_only() {
        let dp = Arc::new(Mutex::new(
            DatapathBuilder::new(DpConfig::default()).start().unwrap(),
        ));
        let reg = Registry::new("test");
        register(&reg, &dp);
        let full = || -> u64 {
            let n = reg.dispatch("coverage/read-counter", &["conntrack_full"]);
            n.unwrap().trim().parse().unwrap()
        };
        let ct = dp.lock().unwrap().conntrack().clone();
        let mut cache = conntrack::CtCache::new();
        let frames = netdev::memory::plain_frames(4, 64);
        let mut commit = |i: usize, zone: u16| {
            let pkt = conntrack::CtPacket {
                frame: &frames[i],
                l3: 14,
                v6: false,
                frag_l4_len: None,
                verified: false,
                natted: false,
            };
            let args = conntrack::CtArgs {
                zone,
                commit: true,
                ..Default::default()
            };
            let mut md = conntrack::CtMeta::default();
            ct.process(&mut cache, &pkt, &mut md, &args, 0);
            md.state
        };
        ct.set_zone_limit(5, 1);
        commit(0, 5);
        assert_eq!(commit(1, 5), conntrack::state::TRK | conntrack::state::NEW);
        assert_eq!(ct.stats().limit_refused, 1);
        assert_eq!(full(), 0, "a zone limit's refusal");
        let zone = reg.dispatch("coverage/read-counter", &["conntrack_zone_full"]);
        assert_eq!(zone.unwrap(), "1\n");
        ct.set_maxconns(2);
        commit(2, 6);
        assert_eq!(commit(3, 6), conntrack::state::TRK | conntrack::state::NEW);
        assert_eq!(ct.stats().limit_refused, 2);
        assert_eq!(full(), 1, "the global limit's refusal");
        // A full zone in a full table: the zone's refusal (OVS checks the zone first).
        assert_eq!(commit(1, 5), conntrack::state::TRK | conntrack::state::NEW);
        assert_eq!(ct.stats().limit_refused, 3);
        assert_eq!(full(), 1, "a full zone's refusal in a full table");
    }
}
