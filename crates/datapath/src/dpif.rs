//! The datapath as a whole ("dpif-netdev"): ports with datapath port numbers, PMD threads
//! polling their rx queues, and the management operations behind `dpctl/*` and
//! `dpif-netdev/*`, answered in OVS's text formats.
//!
//! PMD threads own their datapath state; every operation here is a message to each PMD and a
//! wait for its reply, which comes within one poll iteration. The threads themselves are in
//! `pmd_thread.rs`, the spreading of rx queues over them in `rxq_sched.rs`, and the knobs that
//! change while they run (the core set among them) in `reconfigure.rs`.

mod idle_wait;
mod pmd_thread;
mod reconfigure;
mod rxq_sched;

use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;
use std::time::Duration;

use conntrack::frag::{FragConfig, FragStatus};
use flow::odp::{Attr, AttrItem, DpFlow, FlowStats as OdpStats, PortNames, Used, put_ufid};
use flow::{FlowKey, Mask, Match};

use crate::actions::{DpAction, compile};
use crate::flow_table::{FlowStats, Megaflow};
use crate::meter::{MeterConfig, MeterCounters, MeterError};
use crate::pmd::{
    FlowDump, Pmd, PmdCmd, PmdConfig, PmdStats, PolledRxq, STAGE_SAMPLE, STAGE_TSC_READS_PER_BATCH,
    Stage, UpcallHandler,
};
use crate::port::{Port, PortCounters};
use crate::tsc;
use crate::tx_gso::TxGsoStats;
use crate::upcall_queue::{UpcallProducer, UpcallQueue};
use idle_wait::SleepKnobs;
use pmd_thread::{PmdHandle, PmdSeed, open_txqs, spawn_pmd};

pub use pmd_thread::pin_current_thread;
pub use reconfigure::{default_pmd_cores, parse_cpu_mask};
pub use rxq_sched::RxqAssign;

/// Datapath-wide settings at start; a running datapath changes them with
/// [`Datapath::set_pmd_cores`], [`Datapath::set_rxq_assign`] and the other knobs of
/// `dpif/reconfigure.rs`.
#[derive(Clone, Debug)]
pub struct DpConfig {
    /// Cores to run PMD threads on (`pmd-cpu-mask`); `None` entries are unpinned threads.
    pub pmd_cores: Vec<Option<usize>>,
    /// Settings every PMD thread starts with (EMC insertion, flow limit, idle expiry, upcall
    /// budget); its `core_id` is replaced by each thread's entry of `pmd_cores`.
    pub pmd: PmdConfig,
    /// How rx queues are spread over PMD threads (`pmd-rxq-assign`).
    pub rxq_assign: RxqAssign,
}

impl Default for DpConfig {
    fn default() -> Self {
        DpConfig {
            pmd_cores: vec![None],
            pmd: PmdConfig::default(),
            rxq_assign: RxqAssign::default(),
        }
    }
}

struct PortEntry {
    no: u32,
    port: Box<dyn Port>,
    /// The super-frames sent out of the port, counted by its tx queues on every PMD.
    gso: Arc<TxGsoStats>,
}

/// A datapath under construction: add ports and flows, then [`DatapathBuilder::start`].
pub struct DatapathBuilder {
    config: DpConfig,
    ports: Vec<PortEntry>,
    names: PortNames,
    flows: Vec<Megaflow>,
    upcall: Option<UpcallFactory>,
    conntrack: Arc<conntrack::Conntrack>,
    frag: FragConfig,
}

/// Makes each PMD thread's upcall handler (the slow path), one per PMD: when the datapath
/// starts, and for each PMD a core set change adds.
pub type UpcallFactory = Box<dyn Fn() -> Box<dyn UpcallHandler> + Send>;

impl DatapathBuilder {
    /// A builder with these settings.
    pub fn new(config: DpConfig) -> Self {
        DatapathBuilder {
            config,
            ports: Vec::new(),
            names: PortNames::new(),
            flows: Vec::new(),
            upcall: None,
            conntrack: Arc::new(conntrack::Conntrack::new()),
            frag: FragConfig::default(),
        }
    }

    /// The fragment reassembly settings every PMD starts with (OVS's defaults unless set).
    pub fn set_frag_config(&mut self, cfg: FragConfig) {
        self.frag = cfg;
    }

    /// The connection tracker the PMDs will share.
    pub fn conntrack(&self) -> Arc<conntrack::Conntrack> {
        self.conntrack.clone()
    }

    /// Attaches a slow path: `make` builds each PMD's upcall handler. Without one, misses are
    /// dropped and counted ([`DropUpcalls`](crate::pmd::DropUpcalls)).
    pub fn set_upcall(&mut self, make: UpcallFactory) {
        self.upcall = Some(make);
    }

    /// Adds a megaflow (`dpctl/add-flow` syntax; ports by number or by the names of ports
    /// added so far) to be installed on every PMD before traffic starts.
    pub fn add_flow(&mut self, key_text: &str, actions_text: &str) -> Result<(), String> {
        let f = parse_megaflow(&self.names, key_text, actions_text)?;
        if self.flows.iter().any(|g| g.m == f.m) {
            return Err("a flow with this match already exists".into());
        }
        self.flows.push(f);
        Ok(())
    }

    /// Adds a port with datapath port number `no` (unique, non-zero).
    pub fn add_port(&mut self, no: u32, port: Box<dyn Port>) -> Result<(), String> {
        if no == 0 || self.ports.iter().any(|p| p.no == no) {
            return Err(format!("port number {no} is taken or invalid"));
        }
        if self.ports.iter().any(|p| p.port.name() == port.name()) {
            return Err(format!("a port named '{}' exists", port.name()));
        }
        self.names.insert(port.name(), no);
        let gso = Arc::default();
        self.ports.push(PortEntry { no, port, gso });
        Ok(())
    }

    /// Starts the PMD threads.
    pub fn start(mut self) -> Result<Datapath, String> {
        let n_pmd = self.config.pmd_cores.len().max(1);
        let seed = PmdSeed {
            config: self.config.pmd,
            upcall: self.upcall.as_ref(),
            conntrack: &self.conntrack,
            frag: &self.frag,
            flows: &self.flows,
            meters: &Default::default(),
            bonds: &Default::default(),
        };
        let mut pmds = (0..n_pmd)
            .map(|i| seed.make(self.config.pmd_cores.get(i).copied().flatten()))
            .collect::<Result<Vec<Pmd>, String>>()?;
        // Rx queues: no cycles are measured yet, so `cycles` and `group` deal them out in port
        // order as `roundrobin` does; `dpif-netdev/pmd-rxq-rebalance` uses measurements.
        let mut queues = Vec::new();
        for pe in &mut self.ports {
            for q in 0..pe.port.n_rxq() {
                if let Some(rxq) = pe.port.take_rxq(q, pe.no) {
                    queues.push(PolledRxq {
                        port_no: pe.no,
                        queue_id: q,
                        rxq,
                        cycles: 0,
                    });
                }
            }
        }
        let to = self.config.rxq_assign.assign(&vec![0; queues.len()], n_pmd);
        for (q, p) in queues.into_iter().zip(to) {
            pmds[p].add_rxq(q);
        }
        // A tx queue per PMD on every port.
        for pmd in &mut pmds {
            open_txqs(pmd, &mut self.ports);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let sleep = Arc::new(SleepKnobs::default());
        let mut handles = Vec::new();
        for pmd in pmds {
            handles.push(spawn_pmd(pmd, stop.clone(), sleep.clone(), None)?);
        }
        let sweeper = spawn_ct_sweeper(self.conntrack.clone(), stop.clone())?;
        Ok(Datapath {
            ports: self.ports,
            upcall_rings: handles.iter().map(|h| h.upcalls.clone()).collect(),
            spare_upcall_rings: Vec::new(),
            pmds: handles,
            pmd_config: PmdConfig {
                core_id: None,
                ..self.config.pmd
            },
            upcall: self.upcall,
            conntrack: self.conntrack,
            ct_sweeper: Some(sweeper),
            stop,
            sleep,
            names: self.names,
            cleared_at: tsc::now(),
            rxq_assign: self.config.rxq_assign,
            frag: self.frag,
            meters: Default::default(),
            bonds: Default::default(),
        })
    }
}

/// How often expired connections are swept out (OVS's `ct-sweep-interval` is 20 s; a sweep
/// here takes one shard's lock at a time, so a shorter interval costs the PMDs nothing).
pub const CT_SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// The thread that removes expired connections until `stop`.
fn spawn_ct_sweeper(
    ct: Arc<conntrack::Conntrack>,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>, String> {
    std::thread::Builder::new()
        .name("ct_clean".into())
        .spawn(move || {
            let mut next = std::time::Instant::now() + CT_SWEEP_INTERVAL;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                if std::time::Instant::now() >= next {
                    ct.sweep(conntrack::now_ms());
                    next = std::time::Instant::now() + CT_SWEEP_INTERVAL;
                }
            }
        })
        .map_err(|e| format!("cannot start the conntrack sweeper: {e}"))
}

/// The per-stage accounting's overhead in `s`: the cost of one TSC read, and the cycles per
/// packet the accounting's reads add.
pub fn stage_accounting_cost(s: &PmdStats) -> (f64, f64) {
    let cost = tsc::read_cost();
    (
        cost,
        ratio(
            s.batches * STAGE_TSC_READS_PER_BATCH,
            s.rx_packets * STAGE_SAMPLE,
        ) * cost,
    )
}

/// A running datapath.
pub struct Datapath {
    ports: Vec<PortEntry>,
    pmds: Vec<PmdHandle>,
    /// The settings a PMD starts with now (the run-time knobs as last set; no `core_id`).
    pmd_config: PmdConfig,
    /// The slow path, for PMDs a core set change adds.
    upcall: Option<UpcallFactory>,
    /// Every upcall ring a PMD ever wrote into, in the order they were made (a reader holds
    /// them all; see `upcall_queues`), and the writing ends of those no PMD uses now.
    upcall_rings: Vec<Arc<UpcallQueue>>,
    spare_upcall_rings: Vec<UpcallProducer>,
    conntrack: Arc<conntrack::Conntrack>,
    ct_sweeper: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    /// `pmd-maxsleep` and `pmd-idle-wait`, read by every PMD thread after each poll.
    sleep: Arc<SleepKnobs>,
    names: PortNames,
    cleared_at: u64,
    rxq_assign: RxqAssign,
    /// The fragment reassembly settings every PMD's reassembler has.
    frag: FragConfig,
    /// The meters the PMDs were given (`meter()`).
    meters: crate::meter::DpMeters,
    /// The bonds' buckets the PMDs were given (`lb_output()`).
    bonds: crate::bond::DpBonds,
}

/// One PMD's counters as collected by [`Datapath::pmd_stats`].
#[derive(Clone, Debug)]
pub struct PmdReport {
    /// The core the PMD thread is pinned to, `None` when it is not pinned.
    pub core_id: Option<usize>,
    /// Its counters and per-stage cycles since the last `pmd-stats-clear`.
    pub stats: PmdStats,
    /// How many entries its exact-match cache (EMC) holds.
    pub emc_entries: usize,
}

/// One port's counters as collected by [`Datapath::port_reports`].
#[derive(Clone, Debug)]
pub struct PortReport {
    /// Its datapath port number.
    pub no: u32,
    /// Its name (`p0`, `vxlan_sys_4789`).
    pub name: String,
    /// Its type as the configuration names it (`replay`, `afpacket`, `vxlan`...).
    pub kind: &'static str,
    /// Whether its link is up ([`Port::link_up`]).
    pub link_up: bool,
    /// Its totals.
    pub counters: PortCounters,
    /// Each queue's counters (`rx0`, `tx1`...), for ports that keep them apart.
    pub queues: Vec<(String, PortCounters)>,
}

impl Datapath {
    /// The connection tracker the PMDs share.
    pub fn conntrack(&self) -> &Arc<conntrack::Conntrack> {
        &self.conntrack
    }

    /// The fragment reassembly settings (`dpctl/ipf-get-status`).
    pub fn frag_config(&self) -> &FragConfig {
        &self.frag
    }

    /// Gives every PMD's reassembler `cfg` (`dpctl/ipf-set-*`; the caller checks it against
    /// OVS's bounds). A status asked for afterwards reflects it: each PMD takes its commands
    /// in order.
    pub fn set_frag_config(&mut self, cfg: FragConfig) {
        for p in &self.pmds {
            let _ = p.cmd.send(PmdCmd::SetFragConfig(cfg.clone()));
        }
        self.frag = cfg;
    }

    /// The reassemblers' status summed over the PMDs (fragments held, counters) and, with
    /// `lists`, the datagrams each is waiting to complete.
    pub fn frag_status(&self, lists: bool) -> FragStatus {
        let mut st = FragStatus {
            config: self.frag.clone(),
            ..FragStatus::default()
        };
        for s in self.ask(|tx| PmdCmd::FragStatus(lists, tx)) {
            st.merge(s);
        }
        st
    }

    /// Port numbers and names.
    pub fn port_names(&self) -> &PortNames {
        &self.names
    }

    /// Adds a port to the running datapath (`add-port`): every PMD gets a tx queue on it and
    /// its rx queues go to the PMDs polling the fewest queues. `no` must be free and non-zero.
    pub fn add_port(&mut self, no: u32, mut port: Box<dyn Port>) -> Result<(), String> {
        if no == 0 || self.ports.iter().any(|p| p.no == no) {
            return Err(format!("port number {no} is taken or invalid"));
        }
        if self.ports.iter().any(|p| p.port.name() == port.name()) {
            return Err(format!("a port named '{}' exists", port.name()));
        }
        let gso: Arc<TxGsoStats> = Arc::default();
        for p in &self.pmds {
            let q = port.open_txq();
            let _ = p
                .cmd
                .send(PmdCmd::AddTxq(no, q, port.tunnel(), gso.clone()));
        }
        let mut counts: Vec<usize> = self
            .pmds
            .iter()
            .map(|p| p.load.lock().map(|l| l.0.len()).unwrap_or(0))
            .collect();
        let mut per_pmd: Vec<Vec<PolledRxq>> = self.pmds.iter().map(|_| Vec::new()).collect();
        for q in 0..port.n_rxq() {
            if let Some(rxq) = port.take_rxq(q, no)
                && let Some(p) = (0..counts.len()).min_by_key(|&i| (counts[i], i))
            {
                counts[p] += 1;
                per_pmd[p].push(PolledRxq {
                    port_no: no,
                    queue_id: q,
                    rxq,
                    cycles: 0,
                });
            }
        }
        for (p, qs) in self.pmds.iter().zip(per_pmd) {
            if !qs.is_empty() {
                let _ = p.cmd.send(PmdCmd::AddRxqs(qs));
            }
        }
        self.names.insert(port.name(), no);
        self.ports.push(PortEntry { no, port, gso });
        Ok(())
    }

    /// Removes port `name` from the running datapath (`del-port`) once every PMD has stopped
    /// using it (what it had batched is sent first); returns the port, to be closed by
    /// dropping it. The PMDs hand the port's queues back and they are closed here, on the
    /// caller's thread, so that the PMDs go on forwarding meanwhile.
    pub fn del_port(&mut self, name: &str) -> Result<Box<dyn Port>, String> {
        let i = self
            .ports
            .iter()
            .position(|p| p.port.name() == name)
            .ok_or_else(|| format!("no port named {name}"))?;
        let no = self.ports[i].no;
        drop(self.ask(|tx| PmdCmd::RemovePort(no, tx)));
        self.names.remove(no);
        Ok(self.ports.remove(i).port)
    }

    /// The number of the next free datapath port.
    pub fn free_port_number(&self) -> u32 {
        self.free_port_number_from(1)
    }

    /// The lowest port number from `start` on that no port has.
    pub fn free_port_number_from(&self, start: u32) -> u32 {
        (start..)
            .find(|n| self.ports.iter().all(|p| p.no != *n))
            .unwrap_or(start)
    }

    /// The name of port `no` (`?` for an unknown number).
    fn port_name(&self, no: u32) -> &str {
        self.ports
            .iter()
            .find(|p| p.no == no)
            .map_or("?", |p| p.port.name())
    }

    /// Each port's name and whether its link is up ([`Port::link_up`]).
    pub fn link_states(&self) -> Vec<(String, bool)> {
        self.ports
            .iter()
            .map(|p| (p.port.name().to_owned(), p.port.link_up()))
            .collect()
    }

    /// Each port's name and its link resets ([`Port::link_resets`]).
    pub fn link_resets(&self) -> Vec<(String, u64)> {
        self.ports
            .iter()
            .map(|p| (p.port.name().to_owned(), p.port.link_resets()))
            .collect()
    }

    /// A port's counters by name.
    pub fn port_counters(&self, name: &str) -> Option<PortCounters> {
        self.ports
            .iter()
            .find(|p| p.port.name() == name)
            .map(|p| p.port.counters())
    }

    /// Every port's counters, per queue where it keeps them, and link state, in port number
    /// order: what `port/stats` prints and the metrics endpoint serves. Reads the ports'
    /// shared counters as they are (no PMD is asked).
    pub fn port_reports(&self) -> Vec<PortReport> {
        self.sorted_ports().into_iter().map(port_report).collect()
    }

    /// `port/stats PORT`: the port's totals and, where it keeps them, each queue's and the
    /// device's extended statistics, with its link state.
    pub fn port_stats(&self, name: &str) -> Result<String, String> {
        let entry = self
            .ports
            .iter()
            .find(|p| p.port.name() == name)
            .ok_or_else(|| format!("no such port: {name}"))?;
        let p = port_report(entry);
        let mut out = format!(
            "{} {}: ({}) link {}\n",
            p.name,
            p.no,
            p.kind,
            if p.link_up { "up" } else { "down" }
        );
        let row = |out: &mut String, what: &str, c: &PortCounters| {
            let _ = writeln!(
                out,
                "  {what:<6} rx packets:{} bytes:{} dropped:{}  tx packets:{} bytes:{} dropped:{}  errors:{}",
                c.rx_packets,
                c.rx_bytes,
                c.rx_dropped,
                c.tx_packets,
                c.tx_bytes,
                c.tx_dropped,
                c.errors
            );
        };
        row(&mut out, "total", &p.counters);
        for (q, c) in &p.queues {
            row(&mut out, q, c);
        }
        let gso: &TxGsoStats = &entry.gso;
        for (kind, counts) in [("tcp", &**gso), ("udp", &gso.udp), ("ufo", &gso.ufo)] {
            let (whole, segmented, segments) = counts.get();
            if whole + segmented > 0 {
                let _ = writeln!(
                    out,
                    "  {kind} super-frames tx whole:{whole} segmented:{segmented} segments:{segments}"
                );
            }
        }
        write_xstats(&mut out, "  xstats ", &entry.port.xstats());
        Ok(out)
    }

    /// How many megaflows the PMD threads hold, summed (a flow installed by two PMDs counts
    /// twice, as OVS counts its per-PMD flow tables).
    pub fn n_flows(&self) -> usize {
        self.ask(PmdCmd::NFlows).iter().sum()
    }

    /// `dpctl/show [-s]`: the datapath's ports as OVS lists them, with `-s` their counters in
    /// OVS's layout.
    pub fn dpctl_show(&self, stats: bool) -> String {
        let s = self.total_stats();
        let (hit, missed, lost) = (s.emc_hits + s.megaflow_hits, s.upcalls, s.lost_upcalls);
        let flows = self.n_flows();
        let mut out = format!(
            "netdev@flowpath:\n  lookups: hit:{hit} missed:{missed} lost:{lost}\n  flows: {flows}\n"
        );
        for p in self.sorted_ports() {
            let _ = writeln!(out, "  port {}: {} ({})", p.no, p.port.name(), port_type(p));
            if stats {
                let c = p.port.counters();
                let _ = writeln!(
                    out,
                    "    RX packets:{} errors:{} dropped:{} overruns:0 frame:0\n    \
                     TX packets:{} errors:0 dropped:{} aborted:0 carrier:0\n    \
                     collisions:0\n    RX bytes:{}  TX bytes:{}",
                    c.rx_packets,
                    c.errors,
                    c.rx_dropped,
                    c.tx_packets,
                    c.tx_dropped,
                    c.rx_bytes,
                    c.tx_bytes
                );
                write_xstats(&mut out, "    ", &p.port.xstats());
            }
        }
        out
    }

    /// The ports in port number order.
    fn sorted_ports(&self) -> Vec<&PortEntry> {
        let mut ports: Vec<&PortEntry> = self.ports.iter().collect();
        ports.sort_by_key(|p| p.no);
        ports
    }

    /// Every ring of packets for the slow path (`userspace` actions: packet-ins) a PMD writes
    /// into or wrote into: one per PMD, and after a core set change the rings of PMDs that
    /// went away, which the PMDs started later reuse. The list only grows, and only when the
    /// datapath has more PMDs than ever before; a reader asks again after
    /// [`Datapath::set_pmd_cores`].
    pub fn upcall_queues(&self) -> Vec<Arc<UpcallQueue>> {
        self.upcall_rings.clone()
    }

    /// Runs a packet the slow path made through the datapath, on the first PMD
    /// ([`PmdCmd::Execute`]), and waits until its actions ran (as OVS executes a packet-out
    /// before it reads the next message); false when no PMD runs.
    pub fn execute(&self, p: crate::packet::Packet) -> bool {
        let (tx, rx) = channel();
        self.pmds
            .first()
            .is_some_and(|h| h.cmd.send(PmdCmd::Execute(Box::new(p), tx)).is_ok())
            && rx.recv_timeout(Duration::from_secs(5)).is_ok()
    }

    /// Runs `actions`, translated already, on a packet the slow path made, on the first PMD
    /// ([`PmdCmd::ExecuteActions`]), and waits until they ran; false when no PMD runs.
    pub fn execute_actions(
        &self,
        p: crate::packet::Packet,
        actions: Vec<crate::actions::DpAction>,
    ) -> bool {
        let (tx, rx) = channel();
        self.pmds.first().is_some_and(|h| {
            h.cmd
                .send(PmdCmd::ExecuteActions(Box::new(p), actions, tx))
                .is_ok()
        }) && rx.recv_timeout(Duration::from_secs(5)).is_ok()
    }

    fn ask<T>(&self, make: impl Fn(Sender<T>) -> PmdCmd) -> Vec<T> {
        let mut out = Vec::new();
        for p in &self.pmds {
            let (tx, rx) = channel();
            if p.cmd.send(make(tx)).is_ok()
                && let Ok(v) = rx.recv_timeout(Duration::from_secs(5))
            {
                out.push(v);
            }
        }
        out
    }

    /// The lowest free datapath meter id (see [`crate::meter`]).
    pub fn meter_free_id(&self) -> Result<u32, MeterError> {
        self.meters.free_id()
    }

    /// Sets meter `id` as `config` says on every PMD (a meter of that id is replaced: full
    /// buckets, counters from zero).
    pub fn meter_set(&mut self, id: u32, config: &MeterConfig) -> Result<(), MeterError> {
        let m = self.meters.set(id, config)?;
        self.ask(|tx| PmdCmd::SetMeter(id, Some(m.clone()), tx));
        Ok(())
    }

    /// Removes meter `id` from every PMD; whether it existed.
    pub fn meter_del(&mut self, id: u32) -> bool {
        self.ask(|tx| PmdCmd::SetMeter(id, None, tx));
        self.meters.del(id)
    }

    /// Meter `id`'s counters, summed over the PMDs.
    pub fn meter_stats(&self, id: u32) -> Option<MeterCounters> {
        self.meters.get(id)?;
        let per_pmd = self.ask(|tx| PmdCmd::MeterCounters(id, tx));
        self.meters.total(id, &per_pmd)
    }

    /// Meter `id`'s shared buckets, for packets metered outside the PMDs
    /// ([`crate::meter::DpMeter::admit`]).
    pub fn meter(&self, id: u32) -> Option<Arc<crate::meter::DpMeter>> {
        self.meters.get(id).cloned()
    }

    /// Sets bond `id`'s buckets on every PMD (OVS's `dpif_bond_add()`): `lb_output(id)` sends
    /// a packet of bucket `i` to port `members[i]`. A bond set again keeps its counters.
    pub fn bond_set(&mut self, id: u32, members: &crate::bond::BucketMap) {
        let m = self.bonds.set(id, members);
        self.ask(|tx| PmdCmd::SetBond(id, Some(m.clone()), tx));
    }

    /// Removes bond `id` from every PMD (OVS's `dpif_bond_del()`); whether it existed.
    pub fn bond_del(&mut self, id: u32) -> bool {
        self.ask(|tx| PmdCmd::SetBond(id, None, tx));
        self.bonds.del(id)
    }

    /// The bytes sent through each bucket of bond `id`, summed over the PMDs (OVS's
    /// `dpif_bond_stats_get()`); `None` for a bond the datapath does not have.
    pub fn bond_stats(&self, id: u32) -> Option<Vec<u64>> {
        self.bonds.get(id)?;
        let mut total = vec![0; crate::bond::BUCKETS];
        for bytes in self
            .ask(|tx| PmdCmd::BondBytes(id, tx))
            .into_iter()
            .flatten()
        {
            for (t, b) in total.iter_mut().zip(bytes.iter()) {
                *t += b;
            }
        }
        Some(total)
    }

    /// Every bond's buckets by id (`dpif-netdev/bond-show`).
    pub fn bonds(&self) -> Vec<(u32, crate::bond::BucketMap)> {
        self.bonds.iter().map(|(id, m)| (id, **m)).collect()
    }

    /// `dpctl/add-flow FLOW ACTIONS`: installs a megaflow on every PMD.
    pub fn add_flow(&mut self, key_text: &str, actions_text: &str) -> Result<(), String> {
        let f = parse_megaflow(&self.names, key_text, actions_text)?;
        let res = self.ask(|tx| PmdCmd::AddFlow(Box::new(f.clone()), tx));
        res.into_iter().collect::<Result<Vec<_>, _>>().map(|_| ())
    }

    /// `dpctl/mod-flow [--clear] FLOW ACTIONS`.
    pub fn mod_flow(
        &mut self,
        key_text: &str,
        actions_text: &str,
        clear: bool,
    ) -> Result<(), String> {
        let f = parse_megaflow(&self.names, key_text, actions_text)?;
        let res = self.ask(|tx| PmdCmd::ModFlow(Box::new(f.clone()), clear, tx));
        res.into_iter().collect::<Result<Vec<_>, _>>().map(|_| ())
    }

    /// `dpctl/del-flow FLOW`.
    pub fn del_flow(&mut self, key_text: &str) -> Result<(), String> {
        let m = parse_match(&self.names, key_text)?.0;
        let res = self.ask(|tx| PmdCmd::DelFlow(Box::new(m.clone()), tx));
        if res.iter().any(Option::is_some) {
            Ok(())
        } else {
            Err("flow does not exist".into())
        }
    }

    /// Every megaflow of every PMD (each PMD has its own copy of a flow).
    pub fn flows(&self) -> Vec<FlowDump> {
        self.ask(PmdCmd::Dump).into_iter().flatten().collect()
    }

    /// Removes the megaflow with match `m` from every PMD; returns from how many.
    pub fn remove_flow(&mut self, m: &Match) -> usize {
        self.ask(|tx| PmdCmd::DelFlow(Box::new(m.clone()), tx))
            .iter()
            .filter(|r| r.is_some())
            .count()
    }

    /// `dpctl/del-flows`: returns how many megaflows went.
    pub fn del_flows(&mut self) -> usize {
        self.ask(PmdCmd::DelFlows).into_iter().sum()
    }

    /// `dpctl/dump-flows [-m]`, OVS's format (a separator line per PMD).
    pub fn dump_flows(&self, verbose: bool) -> String {
        let mut out = String::new();
        for p in &self.pmds {
            let (tx, rx) = channel();
            if p.cmd.send(PmdCmd::Dump(tx)).is_err() {
                continue;
            }
            let Ok(flows) = rx.recv_timeout(Duration::from_secs(5)) else {
                continue;
            };
            if flows.is_empty() {
                continue;
            }
            let _ = writeln!(
                out,
                "flow-dump from pmd on cpu core: {}",
                p.core_id.map_or(-1, |c| c as i64)
            );
            for d in &flows {
                let _ = writeln!(out, "{}", self.format_flow(d, verbose));
            }
        }
        out
    }

    /// `dpctl/get-flow [-m] ufid:UFID`: the flow as `dpctl/dump-flows` prints it (with `-m`,
    /// verbose and with its ufid).
    pub fn get_flow(&self, ufid_text: &str, verbose: bool) -> Result<String, String> {
        let t = ufid_text
            .trim()
            .strip_prefix("ufid:")
            .unwrap_or(ufid_text.trim());
        let hex: String = t.chars().filter(|c| *c != '-').collect();
        let want = u128::from_str_radix(&hex, 16).map_err(|_| format!("bad ufid '{ufid_text}'"))?;
        for flows in self.ask(PmdCmd::Dump) {
            if let Some(d) = flows.iter().find(|d| d.flow.ufid == want) {
                return Ok(format!("{}\n", self.format_flow(d, verbose)));
            }
        }
        Err(format!("flow ufid:{ufid_text} not found"))
    }

    /// `dpif/dump-flows [-m] BRIDGE`, as OVS's `ofproto/ofproto-dpif.c` prints it: the flows
    /// whose in_port is one of `in_ports` (every flow for `None`), with no `flow-dump from`
    /// lines; verbose lines start `ufid:UUID ` (a space where `dpctl/dump-flows -m` has `, `)
    /// and have no `dp:ovs`. `names` prints ports by name (OVS does when verbose, unless told
    /// `--no-names`).
    pub fn dpif_dump_flows(&self, verbose: bool, names: bool, in_ports: Option<&[u32]>) -> String {
        let mut out = String::new();
        for d in self.flows() {
            if in_ports.is_some_and(|p| !p.contains(&d.flow.key.in_port())) {
                continue;
            }
            if verbose {
                put_ufid(&mut out, &d.flow.ufid.to_be_bytes());
                out.push(' ');
            }
            let names = names.then_some(&self.names);
            out.push_str(&dp_flow(&d, verbose).format(names, Some(verbose)));
            out.push('\n');
        }
        out
    }

    /// One line of `dpctl/dump-flows [-m]`.
    fn format_flow(&self, d: &FlowDump, verbose: bool) -> String {
        let flow = DpFlow {
            ufid: verbose.then(|| d.flow.ufid.to_be_bytes()),
            dp: verbose.then(|| "ovs".to_owned()),
            ..dp_flow(d, verbose)
        };
        flow.format(
            if verbose { Some(&self.names) } else { None },
            Some(verbose),
        )
    }

    /// Every PMD's counters.
    pub fn pmd_stats(&self) -> Vec<PmdReport> {
        let res = self.ask(PmdCmd::Stats);
        self.pmds
            .iter()
            .zip(res)
            .map(|(p, (stats, emc))| PmdReport {
                core_id: p.core_id,
                stats,
                emc_entries: emc,
            })
            .collect()
    }

    /// Every PMD's counters summed.
    pub fn total_stats(&self) -> PmdStats {
        let mut s = PmdStats::default();
        for r in self.pmd_stats() {
            s += r.stats;
        }
        s
    }

    /// `dpif-netdev/pmd-stats-clear`.
    pub fn clear_stats(&mut self) {
        for p in &self.pmds {
            let _ = p.cmd.send(PmdCmd::ClearStats);
        }
        // Make sure every PMD has applied it before returning.
        let _ = self.ask(PmdCmd::Stats);
        self.cleared_at = tsc::now();
    }

    /// Seconds since the counters were last cleared.
    pub fn measured_secs(&self) -> f64 {
        tsc::now().saturating_sub(self.cleared_at) as f64 / tsc::hz() as f64
    }

    /// Whether every PMD's finite sources are exhausted and it has gone idle.
    pub fn drained(&self) -> bool {
        self.pmds.iter().all(|p| p.drained.load(Ordering::Acquire))
    }

    /// `dpif-netdev/pmd-stats-show`.
    pub fn pmd_stats_show(&self) -> String {
        let mut out = String::new();
        for r in self.pmd_stats() {
            let s = &r.stats;
            let _ = writeln!(
                out,
                "pmd thread numa_id 0 core_id {}:",
                core_text(r.core_id)
            );
            let passes = s.passes();
            let _ = writeln!(out, "  packets received: {}", s.rx_packets);
            // As OVS counts them: a tunnel pop re-injects the packet as a recirculation.
            let _ = writeln!(
                out,
                "  packet recirculations: {}",
                s.recirculations + s.tnl_pops
            );
            let _ = writeln!(
                out,
                "  avg. datapath passes per packet: {:.2}",
                ratio(passes, s.rx_packets)
            );
            let _ = writeln!(out, "  of the recirculations, tunnel pops: {}", s.tnl_pops);
            let _ = writeln!(out, "  phwol hits: 0");
            let _ = writeln!(out, "  mfex opt hits: 0");
            let _ = writeln!(out, "  simple match hits: {}", s.simple_hits);
            let _ = writeln!(out, "  emc hits: {}", s.emc_hits);
            let _ = writeln!(out, "  smc hits: 0");
            let _ = writeln!(out, "  megaflow hits: {}", s.megaflow_hits);
            let _ = writeln!(
                out,
                "  avg. subtable lookups per megaflow hit: {:.2}",
                ratio(s.subtable_lookups, s.megaflow_hits)
            );
            let _ = writeln!(out, "  decap fast path hits: {}", s.decap_hits);
            let _ = writeln!(out, "  miss with success upcall: {}", s.upcalls);
            let _ = writeln!(out, "  miss with failed upcall: {}", s.lost_upcalls);
            let _ = writeln!(
                out,
                "  avg. packets per output batch: {:.2}",
                ratio(s.tx_packets, s.tx_batches)
            );
            let total = s.busy_cycles + s.idle_cycles;
            if total > 0 {
                let _ = writeln!(
                    out,
                    "  idle cycles: {} ({:.2}%)",
                    s.idle_cycles,
                    pct(s.idle_cycles, total)
                );
                let _ = writeln!(
                    out,
                    "  processing cycles: {} ({:.2}%)",
                    s.busy_cycles,
                    pct(s.busy_cycles, total)
                );
                let _ = writeln!(
                    out,
                    "  avg cycles per packet: {:.2} ({}/{})",
                    ratio(total, s.rx_packets),
                    total,
                    s.rx_packets
                );
                let _ = writeln!(
                    out,
                    "  avg processing cycles per packet: {:.2} ({}/{})",
                    ratio(s.busy_cycles, s.rx_packets),
                    s.busy_cycles,
                    s.rx_packets
                );
            }
        }
        out
    }

    /// `dpif-netdev/pmd-perf-show`.
    pub fn pmd_perf_show(&self) -> String {
        let secs = self.measured_secs();
        let hz = tsc::hz();
        let mut out = String::new();
        let _ = writeln!(out, "Time: {}", clock_text());
        let _ = writeln!(out, "Measurement duration: {secs:.3} s");
        let _ = writeln!(out);
        for r in self.pmd_stats() {
            let s = &r.stats;
            let used = s.busy_cycles + s.idle_cycles;
            let elapsed = (secs * hz as f64) as u64;
            let passes = s.passes();
            let _ = writeln!(
                out,
                "pmd thread numa_id 0 core_id {}:",
                core_text(r.core_id)
            );
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "  Iterations:        {:>12}  ({:.2} us/it)",
                s.iterations,
                ratio(used, s.iterations) * 1e6 / hz as f64
            );
            let _ = writeln!(
                out,
                "  - Used TSC cycles: {:>12}  ({:5.1} % of total cycles)",
                used,
                pct(used, elapsed.max(used))
            );
            let _ = writeln!(
                out,
                "  - idle iterations: {:>12}  ({:5.1} % of used cycles)",
                s.iterations - s.busy_iterations,
                pct(s.idle_cycles, used)
            );
            let _ = writeln!(
                out,
                "  - busy iterations: {:>12}  ({:5.1} % of used cycles)",
                s.busy_iterations,
                pct(s.busy_cycles, used)
            );
            let _ = writeln!(
                out,
                "  - sleep iterations:{:>12}  ({:5.1} % of iterations)",
                s.sleep_iterations,
                pct(s.sleep_iterations, s.iterations)
            );
            let us_per_cycle = 1e6 / hz as f64;
            let _ = writeln!(
                out,
                "  Sleep time (us):   {:>12.0}  ({:3.0} us/iteration avg.)",
                s.sleep_cycles as f64 * us_per_cycle,
                ratio(s.sleep_cycles, s.sleep_iterations) * us_per_cycle
            );
            let _ = writeln!(
                out,
                "  Rx packets:        {:>12}  ({:.0} Kpps, {:.0} cycles/pkt)",
                s.rx_packets,
                s.rx_packets as f64 / secs.max(1e-9) / 1000.0,
                ratio(s.busy_cycles, s.rx_packets)
            );
            let _ = writeln!(
                out,
                "  Datapath passes:   {:>12}  ({:.2} passes/pkt)",
                passes,
                ratio(passes, s.rx_packets)
            );
            // OVS counts a tnl_pop as a recirculation; both make a pass of their own.
            let _ = writeln!(
                out,
                "  - Recirculations:  {:>12}  ({:5.1} %)",
                s.recirculations,
                pct(s.recirculations, passes)
            );
            let _ = writeln!(
                out,
                "  - Tunnel pops:     {:>12}  ({:5.1} %, {} dropped)",
                s.tnl_pops,
                pct(s.tnl_pops, passes),
                s.tnl_pop_dropped()
            );
            let _ = writeln!(out, "  - PHWOL hits:      {:>12}  ({:5.1} %)", 0, 0.0);
            let _ = writeln!(
                out,
                "  - Simple Match hits:{:>11}  ({:5.1} %)",
                s.simple_hits,
                pct(s.simple_hits, passes)
            );
            let _ = writeln!(
                out,
                "  - EMC hits:        {:>12}  ({:5.1} %)",
                s.emc_hits,
                pct(s.emc_hits, passes)
            );
            let _ = writeln!(out, "  - SMC hits:        {:>12}  ({:5.1} %)", 0, 0.0);
            let _ = writeln!(
                out,
                "  - Megaflow hits:   {:>12}  ({:5.1} %, {:.2} subtbl lookups/hit)",
                s.megaflow_hits,
                pct(s.megaflow_hits, passes),
                ratio(s.subtable_lookups, s.megaflow_hits)
            );
            let _ = writeln!(
                out,
                "  - Decap fast hits: {:>12}  ({:5.1} %)",
                s.decap_hits,
                pct(s.decap_hits, passes)
            );
            let upcall_us =
                ratio(s.stage_cycles[Stage::Upcall as usize], s.upcalls) * 1e6 / hz as f64;
            let _ = writeln!(
                out,
                "  - Upcalls:         {:>12}  ({:5.1} %, {:.1} us/upcall)",
                s.upcalls,
                pct(s.upcalls, passes),
                upcall_us
            );
            let _ = writeln!(
                out,
                "  - Lost upcalls:    {:>12}  ({:5.1} %)",
                s.lost_upcalls,
                pct(s.lost_upcalls, passes)
            );
            let _ = writeln!(
                out,
                "  Tx packets:        {:>12}  ({:.0} Kpps)",
                s.tx_packets,
                s.tx_packets as f64 / secs.max(1e-9) / 1000.0
            );
            let _ = writeln!(
                out,
                "  Tx batches:        {:>12}  ({:.2} pkts/batch)",
                s.tx_batches,
                ratio(s.tx_packets, s.tx_batches)
            );
            let _ = writeln!(out);
        }
        out
    }

    /// `dpif-netdev/pmd-stage-show`: cycles per packet by stage (beyond OVS).
    pub fn pmd_stage_show(&self) -> String {
        let mut out = String::new();
        for r in self.pmd_stats() {
            let s = &r.stats;
            let total: u64 = s.stage_cycles.iter().sum();
            let _ = writeln!(
                out,
                "pmd thread numa_id 0 core_id {}:",
                core_text(r.core_id)
            );
            let _ = writeln!(
                out,
                "  {:<10} {:>14} {:>10} {:>7}",
                "stage", "cycles", "cyc/pkt", "share"
            );
            for st in Stage::ALL {
                let c = s.stage_cycles[st as usize];
                let _ = writeln!(
                    out,
                    "  {:<10} {:>14} {:>10.1} {:>6.1}%",
                    st.name(),
                    c,
                    ratio(c, s.rx_packets),
                    pct(c, total)
                );
            }
            let _ = writeln!(
                out,
                "  {:<10} {:>14} {:>10.1}",
                "total",
                total,
                ratio(total, s.rx_packets)
            );
            let (cost, per_pkt) = stage_accounting_cost(s);
            let _ = writeln!(
                out,
                "  accounting {per_pkt:.1} cyc/pkt of the above: {STAGE_TSC_READS_PER_BATCH} TSC \
                 reads of {cost:.0} cycles per timed batch of {:.1} packets (one iteration in \
                 {STAGE_SAMPLE} timed)",
                ratio(s.rx_packets, s.batches)
            );
        }
        out
    }

    /// `dpif-netdev/pmd-drop-show` (beyond OVS, which spreads these over coverage counters):
    /// per PMD, every packet the datapath dropped, by reason, and the packets it switched
    /// although their headers were malformed, by malformation.
    pub fn pmd_drop_show(&self) -> String {
        let mut out = String::new();
        for r in self.pmd_stats() {
            let s = &r.stats;
            let _ = writeln!(
                out,
                "pmd thread numa_id 0 core_id {}:",
                core_text(r.core_id)
            );
            let _ = writeln!(out, "  dropped:");
            for (name, n) in [
                ("missed, upcall failed or over budget", s.lost_upcalls),
                ("recirculation depth exceeded", s.recirc_depth_drops),
                ("actions without output", s.action_drops),
                ("meter band exceeded", s.meter_drops),
                ("fragments refused or timed out (ct)", s.ct_frag_drops),
            ] {
                let _ = writeln!(out, "    {name:<40} {n:>12}");
            }
            for (e, n) in crate::gso::GsoError::ALL.iter().zip(s.gso_drop_reasons) {
                let _ = writeln!(out, "    {:<40} {n:>12}", e.text());
            }
            for (r, n) in crate::xlate_drop::XlateDrop::ALL.iter().zip(s.xlate_drops) {
                if n > 0 {
                    let name = format!("translation: {}", r.text());
                    let _ = writeln!(out, "    {name:<40} {n:>12}");
                }
            }
            let _ = writeln!(out, "  tunnel pops dropped:");
            for (d, n) in crate::tunnel::TnlPopDrop::ALL.iter().zip(s.tnl_pop_drops) {
                let _ = writeln!(out, "    {:<40} {n:>12}", d.name());
            }
            let _ = writeln!(out, "  header rewrites not applied: {}", s.rewrite_errors);
            let _ = writeln!(
                out,
                "  sent to userspace (controller, not connected): {}",
                s.userspace_packets
            );
            let _ = writeln!(
                out,
                "  sent by the slow path (neighbour requests): {}",
                s.packet_outs
            );
            let _ = writeln!(out, "  malformed headers (switched on what parsed):");
            for (m, n) in flow::Malformed::ALL.iter().zip(s.malformed) {
                if n > 0 {
                    let _ = writeln!(out, "    {:<40} {n:>12}", m.name());
                }
            }
        }
        out
    }

    /// `dpif-netdev/pmd-rxq-show`.
    pub fn pmd_rxq_show(&self) -> String {
        let mut out = String::from("Displaying last 60 seconds pmd usage %\n");
        for p in &self.pmds {
            let (queues, busy) = p.load.lock().map(|l| l.clone()).unwrap_or_default();
            let _ = writeln!(
                out,
                "pmd thread numa_id 0 core_id {}:",
                core_text(p.core_id)
            );
            let _ = writeln!(out, "  isolated : false");
            let mut attributed = 0;
            for &(port_no, q, c) in &queues {
                if self
                    .ports
                    .iter()
                    .any(|p| p.no == port_no && p.port.main_thread_polled())
                {
                    continue;
                }
                let name = self.port_name(port_no);
                attributed += c;
                let usage = if busy == 0 {
                    "NOT AVAIL".to_owned()
                } else {
                    format!("{:>2} %", (pct(c, busy)).round() as u64)
                };
                let _ = writeln!(
                    out,
                    "  port: {name:<16}  queue-id: {q:>2} (enabled)   pmd usage: {usage}"
                );
            }
            let over = if busy == 0 {
                0
            } else {
                (pct(busy.saturating_sub(attributed), busy)).round() as u64
            };
            let _ = writeln!(out, "  overhead: {over:>2} %");
        }
        out
    }

    /// The datapath's lookups as `dpif/show` counts them: packets a cache found (EMC or
    /// megaflow) and packets that missed (upcalls, lost or not).
    pub fn hit_missed(&self) -> (u64, u64) {
        let (mut hit, mut missed) = (0, 0);
        for r in self.pmd_stats() {
            hit += r.stats.emc_hits + r.stats.megaflow_hits;
            missed += r.stats.upcalls + r.stats.lost_upcalls;
        }
        (hit, missed)
    }

    /// Port `no`'s type and options as `dpif/show` prints them (`dummy`, `pcap: rx_pcap=..`).
    pub fn port_type(&self, no: u32) -> Option<String> {
        self.ports.iter().find(|p| p.no == no).map(port_type)
    }

    /// `dpif/show` of the datapath alone (no bridges): the datapath line, then each port with
    /// its number, type and options. The switch's `dpif/show` groups them by bridge, with
    /// their OpenFlow numbers, as OVS's.
    pub fn dpif_show(&self) -> String {
        let (hit, missed) = self.hit_missed();
        let mut out = format!("netdev@flowpath: hit:{hit} missed:{missed}\n");
        for p in self.sorted_ports() {
            let (name, no) = (p.port.name(), p.no);
            let _ = writeln!(out, "    {name} {no}/{no}: ({})", port_type(p));
        }
        out
    }

    /// Stops the PMD threads and returns the ports (for final counters).
    pub fn stop(mut self) -> Vec<(u32, Box<dyn Port>)> {
        self.join_threads();
        std::mem::take(&mut self.ports)
            .into_iter()
            .map(|p| (p.no, p.port))
            .collect()
    }
}

impl Datapath {
    /// Stops the PMD threads and the conntrack sweeper and waits for them.
    fn join_threads(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for p in &self.pmds {
            p.cmd.wake();
        }
        for p in &mut self.pmds {
            p.join();
        }
        if let Some(t) = self.ct_sweeper.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Datapath {
    fn drop(&mut self) {
        self.join_threads();
    }
}

/// A port's type and options as `dpif/show` and `dpctl/show` print them: `afpacket:
/// ifname=veth0, n_rxq=2`, or the type alone.
fn port_report(p: &PortEntry) -> PortReport {
    PortReport {
        no: p.no,
        name: p.port.name().to_owned(),
        kind: p.port.kind(),
        link_up: p.port.link_up(),
        counters: p.port.counters(),
        queues: p.port.queue_counters(),
    }
}

/// Extended statistics, `NAME:VALUE` a line after `indent`.
fn write_xstats(out: &mut String, indent: &str, xstats: &[(String, u64)]) {
    for (k, v) in xstats {
        let _ = writeln!(out, "{indent}{k}:{v}");
    }
}

fn port_type(p: &PortEntry) -> String {
    let o = p.port.options();
    let opts = o.trim_matches(['{', '}']);
    if opts.is_empty() {
        p.port.kind().to_owned()
    } else {
        format!("{}: {opts}", p.port.kind())
    }
}

/// A megaflow as a dump shows it: the key it was installed with (the first packet's, as OVS's
/// dpif-netdev keeps it: `ipv4(src=10.0.0.2/255.255.255.252)`, not the masked `10.0.0.0`)
/// under its mask, its statistics and actions; no ufid or `dp:`.
fn dp_flow(d: &FlowDump, verbose: bool) -> DpFlow {
    let f = &d.flow;
    let mut attrs = f.attrs.clone();
    attrs.verbose = verbose;
    DpFlow {
        key: f.key.clone(),
        mask: f.m.mask().clone(),
        attrs,
        stats: Some(OdpStats {
            packets: f.stats.packets,
            bytes: f.stats.bytes,
            used: d.used_secs.map(|s| Used::millis((s * 1000.0) as u64)),
            tcp_flags: f.stats.tcp_flags,
        }),
        actions: f.odp_actions.to_vec(),
        ..DpFlow::default()
    }
}

/// A `dpctl` flow key as a match. Names must be known ports; a key that does not mention
/// recirc_id matches recirc_id 0, as in OVS.
/// A datapath flow key that does not parse: flowpath's message, or OVS's for an attribute
/// too long to encode (`dpctl`'s "parsing flow key" with `E2BIG`).
fn key_error(key_text: &str, e: &flow::odp::ParseError) -> String {
    match e.kind {
        flow::odp::ParseErrorKind::TooLong => format!(
            "ovs-vswitchd: parsing flow key (syntax error at {}) (Argument list too long)",
            key_text.get(e.offset..).unwrap_or("")
        ),
        _ => e.to_string(),
    }
}

fn parse_match(
    names: &PortNames,
    key_text: &str,
) -> Result<(Match, FlowKey, Mask, flow::odp::KeyAttrs), String> {
    let mut n = names.clone();
    let k = flow::odp::parse_key(key_text, &mut n).map_err(|e| key_error(key_text, &e))?;
    if n.len() != names.len() {
        return Err("unknown port name in flow".into());
    }
    // As in OVS's userspace datapath, recirc_id is always matched exactly (a key that does not
    // mention it means recirc_id 0) and always shown; packet_type is matched as given (a key
    // without it and with `eth()` matches any packet type and prints `eth()`).
    let mut mask = k.mask.clone();
    mask.set_recirc_id(u32::MAX);
    let mut attrs = k.attrs;
    let pos =
        |a: &flow::odp::KeyAttrs, attr| a.items.iter().position(|i| i.depth == 0 && i.attr == attr);
    if !attrs.contains(Attr::RecircId) {
        let at = pos(&attrs, Attr::DpHash)
            .or(pos(&attrs, Attr::InPort))
            .unwrap_or(0);
        attrs.items.insert(
            at,
            AttrItem {
                attr: Attr::RecircId,
                depth: 0,
            },
        );
    }
    Ok((Match::new(&k.key, &mask), k.key, mask, attrs))
}

/// A megaflow from `dpctl/add-flow` arguments.
pub fn parse_megaflow(
    names: &PortNames,
    key_text: &str,
    actions_text: &str,
) -> Result<Megaflow, String> {
    let (m, key, mask, attrs) = parse_match(names, key_text)?;
    let mut n = names.clone();
    let odp = flow::odp::parse_actions(actions_text, &mut n).map_err(|e| e.to_string())?;
    if n.len() != names.len() {
        return Err("unknown port name in actions".into());
    }
    let actions: Vec<DpAction> = compile(&odp).map_err(|e| e.to_string())?;
    Ok(Megaflow {
        ufid: crate::pmd::ufid_of(&key, &mask),
        m,
        key,
        attrs,
        odp_actions: odp.into(),
        actions: actions.into(),
        stats: FlowStats::default(),
        expires: false,
        installed_tsc: 0,
    })
}

fn core_text(c: Option<usize>) -> String {
    c.map_or("NON_PMD".to_owned(), |c| c.to_string())
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

fn pct(a: u64, b: u64) -> f64 {
    100.0 * ratio(a, b)
}

fn clock_text() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let s = now.as_secs() % 86400;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        s / 3600,
        s / 60 % 60,
        s % 60,
        now.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A megaflow prints the values of the packet that installed it under its mask, as OVS
    /// keeps the first packet's flow. The lines are OVS 3.1's `ovs-appctl dpif/dump-flows -m
    /// br0` (ufid left out) and `dpif/dump-flows br0` after `netdev-dummy/receive` on p2 of a
    /// UDP packet from 10.0.0.2 to 10.0.0.5, with the rule
    /// `in_port=2,ip,nw_src=10.0.0.0/30,actions=output:1`.
    #[test]
    fn a_megaflow_prints_its_first_packets_values_under_the_mask() {
        let verbose = "skb_priority(0/0),skb_mark(0/0),ct_state(0/0),ct_zone(0/0),ct_mark(0/0),\
                       ct_label(0/0),recirc_id(0),dp_hash(0/0),in_port(p2),\
                       packet_type(ns=0,id=0),eth(src=50:54:00:00:00:01/00:00:00:00:00:00,\
                       dst=50:54:00:00:00:02/00:00:00:00:00:00),eth_type(0x0800),\
                       ipv4(src=10.0.0.2/255.255.255.252,dst=10.0.0.5/0.0.0.0,proto=17/0,\
                       tos=0/0,ttl=33/0,frag=no),udp(src=1/0,dst=2/0), packets:0, bytes:0, \
                       used:never, actions:p1";
        let mut names = PortNames::new();
        names.insert("p1", 1);
        names.insert("p2", 2);
        let f = flow::odp::parse_flow(verbose, &mut names.clone()).unwrap();
        let d = FlowDump {
            flow: Megaflow {
                ufid: 0,
                m: Match::new(&f.key, &f.mask),
                key: f.key.clone(),
                attrs: flow::odp::KeyAttrs::megaflow(&f.key, &f.mask),
                odp_actions: f.actions.clone().into(),
                actions: compile(&f.actions).unwrap().into(),
                stats: FlowStats::default(),
                expires: true,
                installed_tsc: 0,
            },
            used_secs: None,
        };
        assert_eq!(dp_flow(&d, true).format(Some(&names), Some(true)), verbose);
        assert_eq!(
            dp_flow(&d, false).format(None, Some(false)),
            "recirc_id(0),in_port(2),packet_type(ns=0,id=0),eth_type(0x0800),\
             ipv4(src=10.0.0.2/255.255.255.252,frag=no), packets:0, bytes:0, used:never, actions:1"
        );
    }

    #[test]
    fn a_key_too_long_to_encode_gets_ovs_error() {
        // OVS's tunnel.at "too long nested attributes", after its sed.
        let key = format!("tunnel({})", vec!["dst=1.1.1.1"; 8193].join(","));
        let e = parse_megaflow(&PortNames::new(), &key, "drop").unwrap_err();
        assert_eq!(
            e.replace("dst=1.1.1.1,", ""),
            "ovs-vswitchd: parsing flow key (syntax error at tunnel(dst=1.1.1.1)) (Argument list \
             too long)"
        );
    }
}
