//! Event coverage counters, as OVS's `lib/coverage.c`: named counts of control-plane events
//! (`bridge_reconfigure`, `xlate_actions`, `dpif_flow_put`...), their rates over the last
//! 5 seconds, minute and hour, and `coverage/show`'s text with its hash.
//!
//! A [`Counter`] is a relaxed atomic, incremented where the event happens: events of the
//! control plane and the slow path only. Per-packet events are not counted here: the switch
//! reads them from the PMDs' own counters when it reads the totals, so a PMD's hot path gains
//! no shared write. [`Rates`] is OVS's `coverage_run()`: fed the totals every
//! [`RUN_INTERVAL_MS`], it keeps 12 five-second slots for the minute and 60 one-minute slots
//! for the hour. [`show`] prints the totals and rates as `coverage/show`; the hash in its
//! header is OVS's (`coverage_hash()`), over the names of the events that were hit ranked by
//! total, so it changes when the set of events hit, or their order, does.
//!
//! The module lives here because its events are mostly this crate's and its hash is OVS's
//! `lib/hash` that translation already implements (for select groups and `multipath`).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::xlate::ovs_hash::{hash_bytes, hash_int};

/// Milliseconds between two rate samples (OVS's `COVERAGE_RUN_INTERVAL`): the shortest
/// period `coverage/show` gives a rate for.
pub const RUN_INTERVAL_MS: u64 = 5000;
/// Sample slots per minute (OVS's `MIN_AVG_LEN`).
const MIN_SLOTS: usize = (60_000 / RUN_INTERVAL_MS) as usize;
/// Minute slots per hour (OVS's `HR_AVG_LEN`).
const HR_SLOTS: usize = 60;

/// One event's count: a relaxed atomic, for events off the PMDs' packet path.
#[derive(Debug)]
pub struct Counter {
    name: &'static str,
    n: AtomicU64,
}

impl Counter {
    /// A counter named `name` (OVS's event name where the event is OVS's).
    pub const fn new(name: &'static str) -> Counter {
        Counter {
            name,
            n: AtomicU64::new(0),
        }
    }

    /// Counts one event.
    #[inline]
    pub fn inc(&self) {
        self.add(1);
    }

    /// Counts `n` events.
    #[inline]
    pub fn add(&self, n: u64) {
        self.n.fetch_add(n, Ordering::Relaxed);
    }

    /// The event's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The events counted so far.
    pub fn read(&self) -> u64 {
        self.n.load(Ordering::Relaxed)
    }
}

/// Bridge ports added, removed or changed (OVS's `ofproto_update_port`).
pub static OFPROTO_UPDATE_PORT: Counter = Counter::new("ofproto_update_port");
/// Every rule of a bridge removed at once (OVS's `ofproto_flush`).
pub static OFPROTO_FLUSH: Counter = Counter::new("ofproto_flush");
/// Translations of a flow through the tables: upcalls, revalidation and traces (OVS's
/// `xlate_actions`).
pub static XLATE_ACTIONS: Counter = Counter::new("xlate_actions");
/// Megaflows an upcall handed the datapath to install (OVS's `dpif_flow_put`; the PMD may
/// still refuse one over the flow limit).
pub static DPIF_FLOW_PUT: Counter = Counter::new("dpif_flow_put");
/// Megaflows the revalidator removed as stale (OVS's `dpif_flow_del`).
pub static DPIF_FLOW_DEL: Counter = Counter::new("dpif_flow_del");
/// Revalidation rounds (flowpath's own: OVS's revalidators do not count theirs).
pub static REVALIDATE_ROUND: Counter = Counter::new("revalidate_round");

/// BFD control packets a port's session refused as malformed (RFC 5880 section 6.8.6:
/// short, version, authentication, length, multiplier, multipoint, discriminators;
/// flowpath's own).
pub static BFD_RX_MALFORMED: Counter = Counter::new("bfd_rx_malformed");
/// Well-formed BFD control packets a session ignored: TTL not 255, another session's
/// discriminator, no session on the port (flowpath's own).
pub static BFD_RX_IGNORED: Counter = Counter::new("bfd_rx_ignored");

/// This crate's events, in the order `coverage/show` lists them.
pub static EVENTS: [&Counter; 8] = [
    &OFPROTO_UPDATE_PORT,
    &OFPROTO_FLUSH,
    &XLATE_ACTIONS,
    &DPIF_FLOW_PUT,
    &DPIF_FLOW_DEL,
    &REVALIDATE_ROUND,
    &BFD_RX_MALFORMED,
    &BFD_RX_IGNORED,
];

/// Events per sample slot, for the per-second rates (OVS's `coverage_run()` state).
#[derive(Clone, Debug)]
pub struct Rates {
    /// Per event: the total at the last sample, the last minute's slots, the last hour's.
    events: Vec<Slots>,
    /// Slots filled so far, modulo an hour's worth (OVS's `idx_count`).
    idx: usize,
    /// When the next sample is due, in the caller's milliseconds; `None` before the first.
    due_ms: Option<u64>,
}

#[derive(Clone, Debug)]
struct Slots {
    last_total: u64,
    min: [u64; MIN_SLOTS],
    hr: [u64; HR_SLOTS],
}

impl Rates {
    /// Rates of `n` events, all zero.
    pub fn new(n: usize) -> Rates {
        Rates {
            events: vec![
                Slots {
                    last_total: 0,
                    min: [0; MIN_SLOTS],
                    hr: [0; HR_SLOTS],
                };
                n
            ],
            idx: 0,
            due_ms: None,
        }
    }

    /// Whether a sample is due at `now_ms` (the first call only starts the clock, as OVS's).
    pub fn due(&mut self, now_ms: u64) -> bool {
        match self.due_ms {
            None => {
                self.due_ms = Some(now_ms + RUN_INTERVAL_MS);
                false
            }
            Some(due) => now_ms >= due,
        }
    }

    /// Takes a sample at `now_ms` of the events' `totals` (in the order given to
    /// [`Rates::new`]), once [`Rates::due`]: the events since the last sample go into the
    /// slots that passed, spread evenly when more than one did (a late sample), as OVS's.
    pub fn run(&mut self, now_ms: u64, totals: &[u64]) {
        let due = *self.due_ms.get_or_insert(now_ms);
        if now_ms < due {
            return;
        }
        let slots = ((now_ms - due) / RUN_INTERVAL_MS + 1) as usize;
        for (e, &total) in self.events.iter_mut().zip(totals) {
            let count = total.saturating_sub(e.last_total);
            e.last_total = total;
            let portion = count / slots as u64;
            let mut idx = self.idx;
            for j in 0..slots {
                let (m, h) = (idx % MIN_SLOTS, idx / MIN_SLOTS);
                e.min[m] = portion
                    + if j == slots - 1 {
                        count % slots as u64
                    } else {
                        0
                    };
                // A new minute starts its hour slot afresh.
                e.hr[h] = if m == 0 { e.min[m] } else { e.hr[h] + e.min[m] };
                idx = (idx + 1) % (MIN_SLOTS * HR_SLOTS);
            }
        }
        self.idx = (self.idx + slots) % (MIN_SLOTS * HR_SLOTS);
        self.due_ms = Some(now_ms + RUN_INTERVAL_MS);
    }

    /// Event `i`'s rates per second over the last sample, minute and hour.
    fn of(&self, i: usize) -> (f64, f64, f64) {
        let Some(e) = self.events.get(i) else {
            return (0.0, 0.0, 0.0);
        };
        let last = (self.idx + MIN_SLOTS * HR_SLOTS - 1) % MIN_SLOTS;
        (
            e.min[last] as f64 * 1000.0 / RUN_INTERVAL_MS as f64,
            e.min.iter().sum::<u64>() as f64 / 60.0,
            e.hr.iter().sum::<u64>() as f64 / 3600.0,
        )
    }
}

/// OVS's `coverage_hash()`: the events hit, ranked by total (most first, then by name),
/// hashed by group of equal totals with each group's rank, then the number of groups.
pub fn hash(names: &[&str], totals: &[u64]) -> u32 {
    let mut hit: Vec<(u64, &str)> = names
        .iter()
        .zip(totals)
        .map(|(n, &t)| (t, *n))
        .filter(|&(t, _)| t > 0)
        .collect();
    hit.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let mut h = 0u32;
    let mut groups = 0u32;
    let mut i = 0;
    while i < hit.len() {
        groups += 1;
        // The rank counts every event, hit or not, before the group: those are all hit.
        h = hash_int(i as u32, h);
        let mut j = i;
        while j < hit.len() && hit[j].0 == hit[i].0 {
            h = hash_bytes(hit[j].1.as_bytes(), h);
            j += 1;
        }
        i = j;
    }
    hash_int(groups, h)
}

/// `coverage/show`, as OVS prints it: the header with the hash, one line per event hit (in
/// the order given) with its rates and total, then how many were never hit.
pub fn show(names: &[&str], totals: &[u64], rates: &Rates) -> String {
    let mut out = format!(
        "Event coverage, avg rate over last: {} seconds, last minute, last hour,  \
         hash={:08x}:\n",
        RUN_INTERVAL_MS / 1000,
        hash(names, totals)
    );
    let mut never = 0;
    for (i, (name, &total)) in names.iter().zip(totals).enumerate() {
        if total == 0 {
            never += 1;
            continue;
        }
        let (sec, min, hr) = rates.of(i);
        let _ = writeln!(
            out,
            "{name:<24} {sec:5.1}/sec {min:9.3}/sec {hr:13.4}/sec   total: {total}"
        );
    }
    let _ = writeln!(out, "{never} events never hit");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_is_ovs_s_layout_with_its_rates() {
        let names = ["bridge_reconfigure", "ofproto_flush", "xlate_actions"];
        let mut r = Rates::new(names.len());
        assert!(!r.due(1000));
        assert!(!r.due(5999));
        assert!(r.due(6000));
        r.run(6000, &[5, 1, 0]);
        assert_eq!(
            show(&names, &[5, 1, 0], &r),
            format!(
                "Event coverage, avg rate over last: 5 seconds, last minute, last hour,  \
                 hash={:08x}:\n\
                 bridge_reconfigure         1.0/sec     0.083/sec        0.0014/sec   total: 5\n\
                 ofproto_flush              0.2/sec     0.017/sec        0.0003/sec   total: 1\n\
                 1 events never hit\n",
                hash(&names, &[5, 1, 0])
            )
        );
        // The next sample, 5 s later, nothing new: the 5 s rate falls, the minute's stays.
        r.run(11000, &[5, 1, 0]);
        assert!(show(&names, &[5, 1, 0], &r).contains(
            "bridge_reconfigure         0.0/sec     0.083/sec        0.0014/sec   total: 5\n"
        ));
    }

    #[test]
    fn a_late_sample_spreads_its_events_over_the_slots_that_passed() {
        let mut r = Rates::new(1);
        r.due(0);
        // Three slots late (15 s after the due time of 5 s): 4 slots share 10 events.
        r.run(20_000, &[10]);
        assert_eq!(r.events[0].min[..4], [2, 2, 2, 4]);
        assert_eq!(r.events[0].hr[0], 10);
        assert_eq!(r.of(0).0, 0.8);
    }

    /// ovs-vswitchd 3.1's `coverage/show` with one netdev bridge of two dummy ports.
    const OVS_SHOW: &str = "\
Event coverage, avg rate over last: 5 seconds, last minute, last hour,  hash=534f29c6:
bridge_reconfigure         1.0/sec     0.083/sec        0.0014/sec   total: 5
ofproto_flush              0.2/sec     0.017/sec        0.0003/sec   total: 1
ofproto_update_port        2.0/sec     0.167/sec        0.0028/sec   total: 10
rev_reconfigure            0.4/sec     0.033/sec        0.0006/sec   total: 2
rev_port_toggled           0.6/sec     0.050/sec        0.0008/sec   total: 3
rev_flow_table             0.2/sec     0.017/sec        0.0003/sec   total: 1
ccmap_shrink               4.8/sec     0.400/sec        0.0067/sec   total: 24
cmap_expand                7.8/sec     0.650/sec        0.0108/sec   total: 39
cmap_shrink                5.2/sec     0.433/sec        0.0072/sec   total: 26
dpif_port_add              0.6/sec     0.050/sec        0.0008/sec   total: 3
dpif_flow_flush            0.2/sec     0.017/sec        0.0003/sec   total: 1
dpif_flow_get              4.8/sec     0.400/sec        0.0067/sec   total: 24
dpif_flow_put              5.0/sec     0.417/sec        0.0069/sec   total: 25
dpif_flow_del              4.8/sec     0.400/sec        0.0067/sec   total: 24
dpif_execute               1.2/sec     0.100/sec        0.0017/sec   total: 6
flow_extract               0.8/sec     0.067/sec        0.0011/sec   total: 4
miniflow_malloc            2.4/sec     0.200/sec        0.0033/sec   total: 12
hmap_pathological          0.4/sec     0.033/sec        0.0006/sec   total: 2
hmap_expand              175.0/sec    14.583/sec        0.2431/sec   total: 907
hmap_shrink                0.4/sec     0.033/sec        0.0006/sec   total: 2
netdev_get_stats           0.6/sec     0.050/sec        0.0008/sec   total: 6
txn_unchanged              0.4/sec     0.033/sec        0.0006/sec   total: 3
txn_incomplete             3.0/sec     0.250/sec        0.0042/sec   total: 15
txn_success                1.0/sec     0.083/sec        0.0014/sec   total: 5
poll_create_node          60.6/sec     5.050/sec        0.0842/sec   total: 355
poll_zero_timeout          0.6/sec     0.050/sec        0.0008/sec   total: 3
seq_change               1471.0/sec   122.583/sec        2.0431/sec   total: 9427
pstream_open               0.6/sec     0.050/sec        0.0008/sec   total: 3
stream_open                0.2/sec     0.017/sec        0.0003/sec   total: 1
util_xalloc              2860.2/sec   238.350/sec        3.9725/sec   total: 14651
netlink_received           0.4/sec     0.033/sec        0.0006/sec   total: 2
netlink_sent               0.2/sec     0.017/sec        0.0003/sec   total: 1
119 events never hit
";

    #[test]
    fn the_hash_is_ovs_s_and_follows_the_set_of_events_hit() {
        let lines: Vec<&str> = OVS_SHOW.lines().collect();
        let (names, totals): (Vec<&str>, Vec<u64>) = lines[1..lines.len() - 1]
            .iter()
            .map(|l| {
                let name = l.split_whitespace().next().unwrap();
                let total: u64 = l.rsplit(' ').next().unwrap().parse().unwrap();
                (name, total)
            })
            .unzip();
        assert_eq!(format!("{:08x}", hash(&names, &totals)), "534f29c6");
        // The totals themselves are not hashed: doubled, the same groups in the same order.
        let mut t: Vec<u64> = totals.iter().map(|t| t * 2).collect();
        assert_eq!(
            hash(&names, &t),
            hash(&names, &totals),
            "same ranks, same names"
        );
        t[1] = 0;
        assert_ne!(
            hash(&names, &t),
            hash(&names, &totals),
            "one event fewer hit"
        );
        assert_eq!(hash(&names, &vec![0; names.len()]), hash_int(0, 0));
    }

    #[test]
    fn the_lines_are_ovs_s_to_the_byte() {
        // OVS's rates for these totals: bridge_reconfigure's 5 in one 5 s slot, and the
        // 5 s rate with four digits before the point.
        let mut r = Rates::new(2);
        r.due(0);
        r.run(5000, &[5, 14301]);
        let shown = show(&["bridge_reconfigure", "util_xalloc"], &[5, 14301], &r);
        let ovs: Vec<&str> = OVS_SHOW.lines().collect();
        assert_eq!(shown.lines().nth(1), Some(ovs[1]));
        assert_eq!(
            shown.lines().nth(2),
            Some(
                "util_xalloc              2860.2/sec   238.350/sec        3.9725/sec   total: 14301"
            )
        );
    }

    #[test]
    fn counters_count() {
        static C: Counter = Counter::new("test_event");
        C.inc();
        C.add(2);
        assert_eq!((C.name(), C.read()), ("test_event", 3));
    }
}
