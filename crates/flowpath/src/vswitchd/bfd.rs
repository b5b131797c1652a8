//! BFD on the interfaces whose `bfd:enable` is true (OVS's `ofproto-dpif-monitor.c` and
//! `bfd.c`): the sessions configured from the database, and a control-plane thread that
//! runs their timers, sends their control packets out of their ports (from the bridge's
//! LOCAL port, so that a tunnel port pushes its header) and gives each port the liveness its
//! session's forwarding says. What ports receive reaches the sessions through the slow path
//! (`ofserver::packet_in`).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use datapath::dpif::Datapath;
use flow::EthAddr;
use ofproto::bfd::Config;
use ofproto::ofproto::Ofproto;

use super::desired::Desired;
use super::reconcile::{Applied, IfaceOutcome};

/// The longest the sender sleeps: configuration changes and stop requests wake it sooner.
const MAX_SLEEP: Duration = Duration::from_millis(250);

/// Gives every running interface the session its `bfd` column asks for, and removes the
/// others' (with their ports' BFD filters).
pub(crate) fn configure(of: &Ofproto, d: &Desired, applied: &Applied) {
    let mut keep = BTreeSet::new();
    for b in d.bridges.values() {
        for i in &b.ifaces {
            let Some(IfaceOutcome::Up(n)) = applied.outcomes.get(&i.uuid) else {
                continue;
            };
            let cfg = Config::from_column(&i.bfd);
            let rx = cfg.as_ref().map(Config::rx_filter);
            if cfg.is_some() {
                keep.insert(i.name.clone());
            }
            of.bfd.configure(&i.name, &b.name, *n, cfg);
            of.set_bfd_rx(&b.name, *n, rx);
        }
    }
    for (name, bridge, ofport) in of.bfd.ports() {
        if !keep.contains(&name) {
            of.bfd.configure(&name, &bridge, ofport, None);
            of.set_bfd_rx(&bridge, ofport, None);
        }
    }
}

/// The thread that sends.
pub(crate) struct Sender {
    of: Arc<Ofproto>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Sender {
    pub fn start(of: Arc<Ofproto>, dp: Arc<Mutex<Datapath>>) -> Sender {
        let stop = Arc::new(AtomicBool::new(false));
        let (of2, stop2) = (of.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("bfd".into())
            .spawn(move || run(&of2, &dp, &stop2))
            .ok();
        Sender { of, stop, thread }
    }

    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.of.bfd.notify();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(of: &Ofproto, dp: &Mutex<Datapath>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let wake = turn(of, dp);
        of.bfd.wait(wake, MAX_SLEEP);
    }
}

/// One turn: the sessions' timers, their packets, their ports' liveness. Returns when the
/// next is due.
fn turn(of: &Ofproto, dp: &Mutex<Datapath>) -> i64 {
    let ports = of.bfd.ports();
    if ports.is_empty() {
        return i64::MAX;
    }
    // Read before the sessions' lock is taken: it must not be held with another. A tunnel
    // port has no count of its own (its datapath port is shared): its session sees no data.
    let rx: HashMap<String, u64> = match dp.lock() {
        Ok(d) => ports
            .iter()
            .filter_map(|(n, _, _)| Some((n.clone(), d.port_counters(n)?.rx_packets)))
            .collect(),
        Err(_) => HashMap::new(),
    };
    let macs: HashMap<(String, u32), EthAddr> = {
        let pipe = of.pipe.read().unwrap_or_else(|e| e.into_inner());
        ports
            .iter()
            .filter_map(|(_, b, n)| {
                let ofb = pipe.bridge(b)?;
                let p = ofb.ports.get(n)?;
                Some(((b.clone(), *n), crate::ofserver::port_mac(ofb, p)))
            })
            .collect()
    };
    let (txs, wake) = of.bfd.run(
        |n| rx.get(n).copied(),
        |b, n| {
            macs.get(&(b.to_owned(), n))
                .copied()
                .unwrap_or(EthAddr::ZERO)
        },
    );
    for t in txs {
        let _ = crate::ofserver::send_from_local_to(of, dp, &t.bridge, t.ofport, t.oam, t.frame);
    }
    for (bridge, ofport, forwarding) in of.bfd.liveness_changes() {
        of.set_bfd_forwarding(&bridge, ofport, forwarding);
    }
    wake
}
