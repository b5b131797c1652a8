//! A poll-mode driver (PMD) thread's datapath: rx bursts through extraction, the EMC, the
//! per-port megaflow classifier and the upcall, then actions run once per group of packets that
//! share a flow, and outputs collect into per-port tx batches.
//!
//! Everything here is owned by one thread: caches, classifiers, flow table, buffer pool, tx
//! queues. The main thread talks to it only through [`PmdCmd`] messages, which the PMD drains
//! between iterations; so the per-packet path takes no lock and shares no written memory.
//!
//! One iteration ([`Pmd::poll_once`]), per polled rx queue:
//! 1. rx burst (up to 32 packets), copied into pool buffers by the port; on a tunnel's
//!    underlay port, a burst whose every frame matches a decap megaflow from its header words
//!    alone is decapsulated at once (`Pmd::decap_rx`) and starts at step 2 as received on
//!    the tunnel port;
//! 2. extraction of each packet's key and hash (`flow::extract`), after the metadata words
//!    the packet carries (in_port, recirc_id, packet type, tunnel metadata);
//! 3. the decap fast path for the in_port's megaflows whose only action is `tnl_pop`
//!    ([`crate::decap`]): a batch that all hits is decapsulated in place and goes back to step
//!    2 as received on the tunnel port; then EMC lookup (exact, full key compare) unless the
//!    EMC is disabled;
//! 4. batch lookup of the misses in the classifier of the batch's in_port, subtables in rank
//!    order;
//! 5. upcall for what is still missed, within a per-iteration budget: the handler returns a
//!    megaflow (installed, then the packet is processed with it) or nothing (dropped, counted);
//! 6. packets grouped by flow in arrival order; each group's flow statistics are updated once
//!    and its actions run on the whole group;
//! 7. outputs go to per-port tx batches, sent when full and at the end of the burst;
//! 8. recirculated and decapsulated (`tnl_pop`) packets run steps 2-7 again in the same
//!    iteration (depth limit 8), each run of consecutive packets of one in_port as a batch.
//!
//! Each stage's TSC cycles are counted (`dpif-netdev/pmd-stage-show`).
//!
//! # TCP super-frames
//! A batch an rx queue marked ([`Batch::mark_gso`]) may hold TCP super-frames (packets with
//! `gso_size > 0`, see [`crate::gso`]); the pass remembers the mark (`pass_gso`), and so do the
//! packets it sends to recirculation or to the deferred queue. Only in such passes, an output
//! to a port whose tx queue does not segment ([`TxQueue::tso`]) and a `tnl_push` look for
//! super-frames, and replace each by its segments: the output pushes them into the port's tx
//! batch, sent each time it fills; `tnl_push` runs itself and the rest of the actions on the
//! segments a burst ([`MAX_BURST`]) at a time. Ordinary traffic pays one test per batch.

use std::sync::mpsc::{Receiver, Sender};

use flow::{FlowKey, Mask, Match};

use crate::actions::DpAction;
use crate::decap::{DecapFlow, LinearMatch, MAX_DECAP_FLOWS, MAX_LINEAR_FLOWS, SimpleFlow};
use crate::dpcls::Dpcls;
use crate::emc::Emc;
use crate::flow_table::{FlowRef, FlowStats, FlowTable, Megaflow};
use crate::gso::TcpSuper;
use crate::packet::{Batch, MAX_BURST, Packet, PacketMeta, Pool, TnlMd};
use crate::port::{RxQueue, TxQueue};
use crate::tsc;
use crate::tunnel::{N_TNL_POP_DROPS, TnlPopDrop, TunnelKind};

/// EMC slots checked for dead entries per housekeeping round (once a second): the whole cache
/// in about a minute at most per 8192 entries / 256.
const EMC_SWEEP_PER_ROUND: usize = 256;

/// Emptied copy batches a PMD keeps for reuse (nesting of clones rarely goes deeper).
const SPARE_BATCHES: usize = 8;

/// Deepest recirculation (OVS's `MAX_RECIRC_DEPTH`).
pub const MAX_RECIRC_DEPTH: u8 = 8;

/// Most upcalls one iteration handles; further misses wait in the deferred queue.
pub const UPCALL_BUDGET: usize = 64;

/// Share of the PMD's time (percent) the slow path may take while the PMD also forwards cached
/// packets: upcalls spend tokens of TSC cycles that accrue at this share of elapsed time (OVS
/// runs upcalls on handler threads; here they run in the PMD, so their time is budgeted). With
/// no cached traffic there is nothing to protect and upcalls run unbudgeted.
pub const DEFAULT_UPCALL_SHARE_PCT: u32 = 10;

/// Misses that may wait for the slow path, per PMD; beyond that they are dropped and counted as
/// lost upcalls.
pub const DEFER_MAX: usize = 4096;

/// Misses one input port may have waiting before the PMD stops polling that port until they
/// are handled (backpressure: a finite source loses nothing, and other ports keep flowing).
pub const DEFER_PER_PORT: u32 = 1024;

/// A packet the slow path sends by itself while handling an upcall (OVS's packet-out from
/// translation): an ARP or neighbour solicitation for an unresolved tunnel next hop.
#[derive(Clone, Debug)]
pub struct PacketOut {
    /// The frame, from its Ethernet header.
    pub frame: Vec<u8>,
    /// The datapath port it counts as received on (`in_port` of its metadata).
    pub in_port: u32,
    /// What to do with it, compiled.
    pub actions: Vec<DpAction>,
}

/// What the slow path decides for a packet that missed every cache.
pub enum UpcallResult {
    /// Install this megaflow (the packet's key under `mask`) with these actions, and process
    /// the packet with them. `packet_outs` are sent first, once.
    Install {
        mask: Box<Mask>,
        actions: Vec<flow::odp::Action>,
        compiled: Vec<DpAction>,
        packet_outs: Vec<PacketOut>,
    },
    /// Drop the packet without installing anything.
    Drop,
}

/// The slow path as the datapath sees it.
pub trait UpcallHandler: Send {
    /// Decides for a missed packet with key `key`.
    fn upcall(&mut self, key: &FlowKey, pkt: &Packet) -> UpcallResult;
}

/// The handler used until a slow path is attached: every miss is dropped and counted as a lost
/// upcall.
pub struct DropUpcalls;

impl UpcallHandler for DropUpcalls {
    fn upcall(&mut self, _key: &FlowKey, _pkt: &Packet) -> UpcallResult {
        UpcallResult::Drop
    }
}

/// Stages whose cycles are counted, in pipeline order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Stage {
    Rx,
    Extract,
    Emc,
    Megaflow,
    Upcall,
    Actions,
    Tx,
}

impl Stage {
    /// All stages, in order.
    pub const ALL: [Stage; 7] = [
        Stage::Rx,
        Stage::Extract,
        Stage::Emc,
        Stage::Megaflow,
        Stage::Upcall,
        Stage::Actions,
        Stage::Tx,
    ];

    /// Display name.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Rx => "rx",
            Stage::Extract => "extract",
            Stage::Emc => "emc",
            Stage::Megaflow => "megaflow",
            Stage::Upcall => "upcall",
            Stage::Actions => "actions",
            Stage::Tx => "tx",
        }
    }
}

/// Counter reads the per-stage accounting adds to each timed batch: one after rx, five in
/// `Pmd::process` around extract, EMC, megaflow and actions, one after tx. Its cost per packet
/// is this times [`tsc::read_cost`] divided by the packets per batch and by
/// [`STAGE_SAMPLE`] (`dpif-netdev/pmd-stage-show` prints it).
pub const STAGE_TSC_READS_PER_BATCH: u64 = 7;

/// One PMD loop iteration in this many has its stages timed, each stage's cycles counted
/// this many times: an estimate of where the cycles go at an eighth of the counter reads
/// (which took 8 cycles a packet of p2p's 46, a fifth, when every batch was timed). The
/// upcall stage, rare and slow, is timed whenever it runs; the busy and idle cycles, each
/// queue's cycles and the flows' last use are read every iteration.
pub const STAGE_SAMPLE: u64 = 8;

/// Counters of one PMD, with OVS's meanings (`pmd-perf-show`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PmdStats {
    /// Loop iterations.
    pub iterations: u64,
    /// Iterations that received at least one packet.
    pub busy_iterations: u64,
    /// TSC cycles of iterations that received packets.
    pub busy_cycles: u64,
    /// TSC cycles of iterations that received nothing.
    pub idle_cycles: u64,
    /// Packets received from ports.
    pub rx_packets: u64,
    /// Batches processed (rx bursts and recirculation passes).
    pub batches: u64,
    /// Passes through the datapath by recirculation (`recirc`).
    pub recirculations: u64,
    /// Packets decapsulated by `tnl_pop`, each of which makes another pass (OVS counts these
    /// among its recirculations; they are apart here and added back for OVS's figures).
    pub tnl_pops: u64,
    /// Packets `tnl_pop` dropped, per reason (indexed by `TnlPopDrop as usize`).
    pub tnl_pop_drops: [u64; N_TNL_POP_DROPS],
    /// Passes served by the EMC.
    pub emc_hits: u64,
    /// Passes served by the megaflow classifier.
    pub megaflow_hits: u64,
    /// Passes served by the decap fast path (a megaflow whose only action is `tnl_pop`,
    /// matched without the EMC or the classifier; see [`crate::decap`]).
    pub decap_hits: u64,
    /// Packets the simple match found (no key extraction, hash or EMC lookup).
    pub simple_hits: u64,
    /// Subtables probed (for lookups per megaflow hit).
    pub subtable_lookups: u64,
    /// Upcalls that installed or executed a flow.
    pub upcalls: u64,
    /// Packets dropped at the upcall: handler said drop, or the deferred queue was full.
    pub lost_upcalls: u64,
    /// Misses that waited for the slow path (its time budget, or older waiting misses).
    pub deferred_upcalls: u64,
    /// Packets a `userspace` action sent to the slow path (controller packet-ins; counted, as
    /// no controller connection exists yet).
    pub userspace_packets: u64,
    /// Packets the slow path sent by itself (neighbour requests for tunnel next hops).
    pub packet_outs: u64,
    /// Packets dropped for exceeding the recirculation depth.
    pub recirc_depth_drops: u64,
    /// Packets through `ct()`.
    pub ct_packets: u64,
    /// Packets through `ct()` that were not IP (marked `+trk+inv`).
    pub ct_not_ip: u64,
    /// Fragments `ct()` held for reassembly.
    pub ct_frags_held: u64,
    /// Fragments dropped by reassembly (overlaps, limits, timeouts; by reason in the
    /// reassembler's own counters).
    pub ct_frag_drops: u64,
    /// Packets dropped by flows whose actions end without output (including empty actions).
    pub action_drops: u64,
    /// Packets handed to tx queues, and the number of tx bursts.
    pub tx_packets: u64,
    pub tx_batches: u64,
    /// Header rewrites that did not apply (packet lacked the header).
    pub rewrite_errors: u64,
    /// TCP super-frames segmented in software (for a port without TSO, or a `tnl_push`),
    /// and the segments made of them.
    pub gso_frames: u64,
    pub gso_segments: u64,
    /// Super-frames dropped because they could not be segmented (not TCP over IP).
    pub gso_drops: u64,
    /// TSC cycles per stage, indexed by [`Stage`].
    pub stage_cycles: [u64; 7],
    /// Packets whose headers could not be parsed completely, per reason (indexed by
    /// `flow::Malformed as usize`). They are still switched on the fields that parsed, as in
    /// OVS; these counts say how many.
    pub malformed: [u64; N_MALFORMED],
}

/// Number of [`flow::Malformed`] reasons.
pub const N_MALFORMED: usize = flow::Malformed::ALL.len();

impl PmdStats {
    /// Passes through the datapath: received packets, recirculations and tunnel pops.
    pub fn passes(&self) -> u64 {
        self.rx_packets + self.recirculations + self.tnl_pops
    }

    /// Packets `tnl_pop` dropped, all reasons.
    pub fn tnl_pop_dropped(&self) -> u64 {
        self.tnl_pop_drops.iter().sum()
    }
}

impl core::ops::AddAssign for PmdStats {
    /// Sums counters, e.g. over PMD threads.
    fn add_assign(&mut self, o: PmdStats) {
        self.iterations += o.iterations;
        self.busy_iterations += o.busy_iterations;
        self.busy_cycles += o.busy_cycles;
        self.idle_cycles += o.idle_cycles;
        self.rx_packets += o.rx_packets;
        self.batches += o.batches;
        self.recirculations += o.recirculations;
        self.tnl_pops += o.tnl_pops;
        for (a, b) in self.tnl_pop_drops.iter_mut().zip(o.tnl_pop_drops) {
            *a += b;
        }
        self.emc_hits += o.emc_hits;
        self.megaflow_hits += o.megaflow_hits;
        self.decap_hits += o.decap_hits;
        self.simple_hits += o.simple_hits;
        self.subtable_lookups += o.subtable_lookups;
        self.upcalls += o.upcalls;
        self.deferred_upcalls += o.deferred_upcalls;
        self.userspace_packets += o.userspace_packets;
        self.packet_outs += o.packet_outs;
        self.lost_upcalls += o.lost_upcalls;
        self.recirc_depth_drops += o.recirc_depth_drops;
        self.ct_packets += o.ct_packets;
        self.ct_not_ip += o.ct_not_ip;
        self.ct_frags_held += o.ct_frags_held;
        self.ct_frag_drops += o.ct_frag_drops;
        self.action_drops += o.action_drops;
        self.tx_packets += o.tx_packets;
        self.tx_batches += o.tx_batches;
        self.rewrite_errors += o.rewrite_errors;
        self.gso_frames += o.gso_frames;
        self.gso_segments += o.gso_segments;
        self.gso_drops += o.gso_drops;
        for (a, b) in self.stage_cycles.iter_mut().zip(o.stage_cycles) {
            *a += b;
        }
        for (a, b) in self.malformed.iter_mut().zip(o.malformed) {
            *a += b;
        }
    }
}

/// One megaflow as a dump shows it.
#[derive(Clone, Debug)]
pub struct FlowDump {
    pub flow: Megaflow,
    /// Seconds since the last hit, `None` for never.
    pub used_secs: Option<f64>,
}

impl FlowDump {
    /// A flow with its age as of TSC value `now`.
    fn of(flow: Megaflow, now: u64) -> FlowDump {
        let used = flow.stats.used_tsc;
        let used_secs = (used != 0).then(|| now.saturating_sub(used) as f64 / tsc::hz() as f64);
        FlowDump { flow, used_secs }
    }
}

/// Messages from the main thread to a PMD.
pub enum PmdCmd {
    /// Install a megaflow; fails if an identical match exists.
    AddFlow(Box<Megaflow>, Sender<Result<(), String>>),
    /// Replace the actions of the megaflow with this match (optionally clearing its stats).
    ModFlow(Box<Megaflow>, bool, Sender<Result<(), String>>),
    /// Remove the megaflow with this match; replies with it.
    DelFlow(Box<Match>, Sender<Option<FlowDump>>),
    /// Remove every megaflow; replies with how many.
    DelFlows(Sender<usize>),
    /// All megaflows.
    Dump(Sender<Vec<FlowDump>>),
    /// How many megaflows there are (without copying them).
    NFlows(Sender<usize>),
    /// Counters (and the EMC fill).
    Stats(Sender<(PmdStats, usize)>),
    /// Zero the counters.
    ClearStats,
    /// Set `emc-insert-inv-prob`.
    SetEmcInsertInvProb(u32),
    /// Stop polling every rx queue and hand them over, with their measured cycles (the first
    /// half of an rx queue reassignment).
    TakeRxqs(Sender<Vec<PolledRxq>>),
    /// Start polling these rx queues (their cycle counts start again from zero).
    AddRxqs(Vec<PolledRxq>),
    /// A port joined the datapath: its tx queue for this PMD, and the tunnel it terminates
    /// if it is a tunnel port.
    AddTxq(u32, Box<dyn TxQueue>, Option<TunnelKind>),
    /// A port leaves: stop polling it, flush and drop its tx queue, remove the megaflows of
    /// its packets; replies once done, so the port can be closed.
    RemovePort(u32, Sender<()>),
    /// Replace the fragment reassembler's settings (`dpctl/ipf-set-*`).
    SetFragConfig(conntrack::frag::FragConfig),
    /// The reassembler's status, with the datagrams waiting if asked (`dpctl/ipf-get-status`).
    FragStatus(bool, Sender<conntrack::frag::FragStatus>),
}

/// A polled rx queue.
pub struct PolledRxq {
    pub port_no: u32,
    pub queue_id: usize,
    pub rxq: Box<dyn RxQueue>,
    /// Cycles spent on this queue's packets since it was assigned to its PMD (for
    /// `pmd-rxq-show` and cycle-based assignment).
    pub cycles: u64,
}

/// A datapath port as a PMD sees it: its tx queue and batch, and its tunnel kind (the kind
/// `tnl_pop` to it decapsulates).
struct TxSlot {
    q: Box<dyn TxQueue>,
    batch: Batch,
    tunnel: Option<TunnelKind>,
    /// The queue takes TCP super-frames whole ([`TxQueue::tso`]).
    tso: bool,
    /// The queue takes lent packets ([`TxQueue::takes_lent`]).
    lent: bool,
}

/// The lookup structures of one input port: its megaflow classifier, its decap fast path and
/// its simple match.
struct PortCls {
    port: u32,
    dpcls: Dpcls<FlowRef>,
    /// Megaflows of this port whose only action is `tnl_pop` (at most
    /// [`crate::decap::MAX_DECAP_FLOWS`]).
    decap: Vec<DecapFlow>,
    /// Megaflows of this port that the simple match finds (at most
    /// [`crate::decap::MAX_DECAP_FLOWS`]; see [`SimpleFlow`]).
    simple: Vec<SimpleFlow>,
    /// Megaflows of this port for the linear match (at most [`MAX_LINEAR_FLOWS`]; see
    /// [`LinearMatch`]): used only while they are all of the port's megaflows.
    linear: LinearMatch,
    /// Hits of the linear match, one subtable lookup each (its megaflows share one mask).
    linear_lookups: u64,
}

/// The per-port classifiers of one PMD (a handful of ports: linear search).
struct Classifiers {
    by_port: Vec<PortCls>,
}

impl Classifiers {
    fn port_mut(&mut self, port: u32) -> Option<&mut PortCls> {
        self.by_port.iter_mut().find(|c| c.port == port)
    }

    fn get_mut(&mut self, port: u32) -> Option<&mut Dpcls<FlowRef>> {
        self.port_mut(port).map(|c| &mut c.dpcls)
    }

    fn get_or_create(&mut self, port: u32) -> &mut Dpcls<FlowRef> {
        let i = match self.by_port.iter().position(|c| c.port == port) {
            Some(i) => i,
            None => {
                self.by_port.push(PortCls {
                    port,
                    dpcls: Dpcls::new(),
                    decap: Vec::with_capacity(MAX_DECAP_FLOWS),
                    simple: Vec::with_capacity(MAX_DECAP_FLOWS),
                    linear: LinearMatch::default(),
                    linear_lookups: 0,
                });
                self.by_port.len() - 1
            }
        };
        &mut self.by_port[i].dpcls
    }

    /// The lookup structures of `port`, if it has any.
    #[inline]
    fn port(&self, port: u32) -> Option<&PortCls> {
        self.by_port.iter().find(|c| c.port == port)
    }

    /// The decap megaflows of `port` (none for a port without any).
    #[inline]
    fn decap(&self, port: u32) -> &[DecapFlow] {
        self.port(port).map_or(&[], |c| &c.decap)
    }

    /// The simple-match megaflows of `port` (none for a port without any).
    #[inline]
    fn simple(&self, port: u32) -> &[SimpleFlow] {
        self.port(port).map_or(&[], |c| &c.simple)
    }

    /// Whether `port`'s megaflows are all in its linear match (and it has some).
    #[inline]
    fn is_linear(&self, port: u32) -> bool {
        self.port(port)
            .is_some_and(|c| !c.linear.is_empty() && c.linear.len() == c.dpcls.len())
    }
}

/// Settings of a PMD.
#[derive(Clone, Copy, Debug)]
pub struct PmdConfig {
    /// Core the thread runs on (`None`: not pinned, e.g. in tests).
    pub core_id: Option<usize>,
    /// `emc-insert-inv-prob` (0 disables the EMC).
    pub emc_insert_inv_prob: u32,
    /// Most megaflows this PMD holds (`flow-limit`).
    pub flow_limit: usize,
    /// Megaflows idle longer than this expire (`max-idle`), in milliseconds.
    pub max_idle_ms: u64,
    /// See [`DEFAULT_UPCALL_SHARE_PCT`]; 100 or more lifts the budget.
    pub upcall_share_pct: u32,
}

impl Default for PmdConfig {
    fn default() -> Self {
        PmdConfig {
            core_id: None,
            emc_insert_inv_prob: 100,
            flow_limit: 200_000,
            max_idle_ms: 10_000,
            upcall_share_pct: DEFAULT_UPCALL_SHARE_PCT,
        }
    }
}

/// The datapath state of one PMD thread.
pub struct Pmd {
    pub config: PmdConfig,
    rxqs: Vec<PolledRxq>,
    /// Busy cycles since the rx queues were last (re)assigned: the denominator of the queues'
    /// `pmd usage` (unlike `stats.busy_cycles`, `pmd-stats-clear` does not reset it).
    rxq_busy: u64,
    txs: Vec<Option<TxSlot>>,
    pool: Pool,
    emc: Emc<FlowRef>,
    cls: Classifiers,
    flows: FlowTable,
    upcall: Box<dyn UpcallHandler>,
    stats: PmdStats,
    /// Per-packet scratch of one pass, reused.
    keys: Vec<FlowKey>,
    hashes: Vec<u32>,
    hits: Vec<Option<FlowRef>>,
    /// Reused buffers: the rx burst, one flow's group, a recirculation pass. Each keeps its
    /// capacity, so the per-packet path never allocates.
    rx_batch: Batch,
    /// The groups of one pass's packets by megaflow (see `execute_groups`).
    groups: Vec<Batch>,
    /// This iteration's stages are timed ([`STAGE_SAMPLE`]).
    timing: bool,
    /// The pass's packets were extracted without their hash (a decap or linear port):
    /// `hashes` holds it only for those the EMC looked up.
    unhashed: bool,
    /// The TSC when this iteration started: the flows' last use.
    iter_tsc: u64,
    recirc_batch: Batch,
    /// Emptied batches of copies (clone, output that is not the last action), reused so that
    /// copying a group does not allocate a batch each time.
    spare: Vec<Batch>,
    recirc: Vec<Packet>,
    max_idle_tsc: u64,
    next_housekeeping: u64,
    /// Upcalls made in the current iteration (against [`UPCALL_BUDGET`]).
    upcalls_this_iter: usize,
    /// Misses waiting for the slow path, in arrival order.
    deferred: std::collections::VecDeque<Packet>,
    /// Waiting misses per input port (for backpressure).
    deferred_by_port: Vec<u32>,
    /// Packets of the current pass marked to wait, not yet moved to `deferred`.
    deferred_marked: usize,
    /// Waiting misses that waited again in a `run_deferred` pass, to go back to the front.
    redeferred: Vec<Packet>,
    /// Whether `run_deferred` is processing waiting misses (which may upcall though others
    /// still wait behind them).
    running_deferred: bool,
    /// Cycles the slow path may still spend (may go negative), and when they last accrued.
    upcall_tokens: i64,
    tokens_tsc: u64,
    /// Whether the last iteration forwarded cached (EMC or megaflow) packets: upcalls are
    /// budgeted only then.
    protecting: bool,
    hits_this_iter: u64,
    /// Flows entered in the table only to process one packet (flow limit reached); removed at
    /// the end of the pass.
    temp_flows: Vec<FlowRef>,
    /// The current pass's batch may hold TCP super-frames (its rx queue marked it).
    pass_gso: bool,
    /// The recirculation queue, or the deferred queue, may hold super-frames.
    recirc_gso: bool,
    deferred_gso: bool,
    /// Segments of the super-frames before a `tnl_push`, reused.
    segs: Vec<Packet>,
    /// The connection tracker `ct()` uses, shared with the other PMDs (made on first use if
    /// none was given), and this PMD's cache of its lookups.
    conntrack: Option<std::sync::Arc<conntrack::Conntrack>>,
    ct_cache: conntrack::CtCache,
    /// What `ct()` decided for each packet of a burst (reused, never re-initialized).
    ct_out: Vec<(conntrack::CtMeta, Option<conntrack::NatRewrite>)>,
    /// The mark and label a `ct()` commit wrote for each packet of a burst it rechecked (by
    /// place in the batch), reused.
    ct_ml: Vec<(u8, u32, u128)>,
    /// Set when a pass's whole batch, with the headers its keys were made from (only `ct()`
    /// without NAT ran on it), was queued for recirculation as it was: the batch's length.
    /// The next pass, if it is that batch, takes its keys from `keys` ([`Self::process_with`]).
    keys_reusable: Option<usize>,
    /// Installed megaflows whose mask looks at a connection's original tuple: while there is
    /// none, keys are made without it ([`crate::ct::to_key`]).
    ct_tuple_flows: usize,
    /// IP fragments waiting for the rest of their datagram before `ct()` (per PMD: a
    /// datagram's fragments arrive on one rx queue, as RSS hashes them by addresses).
    reasm: conntrack::frag::Reassembler<Packet>,
}

impl Pmd {
    /// A PMD with no queues.
    pub fn new(config: PmdConfig, upcall: Box<dyn UpcallHandler>) -> Pmd {
        let mut emc = Emc::new();
        emc.set_insert_inv_prob(config.emc_insert_inv_prob);
        let hz = tsc::hz();
        Pmd {
            config,
            rxqs: Vec::new(),
            rxq_busy: 0,
            txs: Vec::new(),
            pool: {
                // Its lending ends after each burst (`poll_once`).
                let mut pool = Pool::new(4096, 1024);
                pool.allow_lending();
                pool
            },
            emc,
            cls: Classifiers {
                by_port: Vec::new(),
            },
            flows: FlowTable::new(),
            upcall,
            stats: PmdStats::default(),
            keys: vec![FlowKey::new(); MAX_BURST],
            hashes: vec![0; MAX_BURST],
            hits: vec![None; MAX_BURST],
            rx_batch: Batch::new(),
            groups: (0..MAX_BURST).map(|_| Batch::new()).collect(),
            timing: false,
            unhashed: false,
            iter_tsc: 0,
            recirc_batch: Batch::new(),
            spare: Vec::with_capacity(SPARE_BATCHES),
            recirc: Vec::with_capacity(MAX_BURST),
            max_idle_tsc: config.max_idle_ms.saturating_mul(hz / 1000),
            next_housekeeping: 0,
            upcalls_this_iter: 0,
            temp_flows: Vec::new(),
            deferred: std::collections::VecDeque::with_capacity(DEFER_MAX),
            deferred_by_port: Vec::new(),
            deferred_marked: 0,
            redeferred: Vec::with_capacity(MAX_BURST),
            running_deferred: false,
            upcall_tokens: 0,
            tokens_tsc: 0,
            protecting: false,
            hits_this_iter: 0,
            pass_gso: false,
            recirc_gso: false,
            deferred_gso: false,
            segs: Vec::new(),
            conntrack: None,
            ct_cache: conntrack::CtCache::new(),
            ct_out: vec![(conntrack::CtMeta::default(), None); MAX_BURST],
            ct_ml: Vec::with_capacity(MAX_BURST),
            ct_tuple_flows: 0,
            keys_reusable: None,
            reasm: conntrack::frag::Reassembler::new(conntrack::frag::FragConfig::default()),
        }
    }

    /// Tracks connections in `ct` (shared by the datapath's PMDs).
    pub fn set_conntrack(&mut self, ct: std::sync::Arc<conntrack::Conntrack>) {
        self.conntrack = Some(ct);
        // The cache holds the old table's connections, spare connections and a zone policy:
        // none of them may serve the new table. (What it had to queue for expiry went into
        // the old table's queue at the end of the last batch.)
        self.ct_cache = conntrack::CtCache::new();
    }

    /// Polls `rxq` from now on.
    pub fn add_rxq(&mut self, mut rxq: PolledRxq) {
        rxq.cycles = 0;
        self.rxqs.push(rxq);
    }

    /// The polled queues.
    pub fn rxqs(&self) -> &[PolledRxq] {
        &self.rxqs
    }

    /// Busy cycles since the rx queues were last assigned (see [`PolledRxq::cycles`]).
    pub fn rxq_busy(&self) -> u64 {
        self.rxq_busy
    }

    /// Sends output for `port_no` through `q`.
    pub fn add_txq(&mut self, port_no: u32, q: Box<dyn TxQueue>) {
        self.add_port_txq(port_no, q, None);
    }

    /// Sends output for `port_no` through `q`; `tnl_pop` to the port decapsulates `tunnel`.
    pub fn add_port_txq(&mut self, port_no: u32, q: Box<dyn TxQueue>, tunnel: Option<TunnelKind>) {
        let i = port_no as usize;
        if self.txs.len() <= i {
            self.txs.resize_with(i + 1, || None);
        }
        let tso = q.tso();
        let lent = q.takes_lent();
        self.txs[i] = Some(TxSlot {
            q,
            batch: Batch::new(),
            tunnel,
            tso,
            lent,
        });
    }

    /// Forgets port `no`: its rx queues, its tx queue (after sending what is batched) and the
    /// megaflows of its input classifier.
    pub fn remove_port(&mut self, no: u32) {
        self.rxqs.retain(|q| q.port_no != no);
        for _ in 0..self.deferred.len() {
            let p = self.deferred.pop_front().expect("counted");
            if p.meta.in_port == no {
                self.pool.free(p);
            } else {
                self.deferred.push_back(p);
            }
        }
        if let Some(c) = self.deferred_by_port.get_mut(no as usize) {
            *c = 0;
        }
        self.flush_tx();
        if let Some(slot) = self.txs.get_mut(no as usize) {
            *slot = None;
        }
        let refs: Vec<FlowRef> = self
            .flows
            .iter()
            .filter(|(_, f)| f.key.in_port() == no)
            .map(|(r, _)| r)
            .collect();
        for r in refs {
            self.remove_ref(r);
        }
    }

    /// The counters, with the classifiers' subtable lookups folded in.
    pub fn stats(&self) -> PmdStats {
        let mut s = self.stats;
        s.subtable_lookups = self
            .cls
            .by_port
            .iter()
            .map(|c| c.dpcls.stats().lookups + c.linear_lookups)
            .sum();
        s
    }

    /// Zeroes the counters.
    pub fn clear_stats(&mut self) {
        self.stats = PmdStats::default();
        for c in &mut self.cls.by_port {
            c.dpcls.clear_stats();
            c.linear_lookups = 0;
        }
    }

    /// Number of megaflows.
    pub fn n_flows(&self) -> usize {
        self.flows.len()
    }

    /// Whether every rx queue is a finite source that has delivered everything.
    pub fn sources_exhausted(&self) -> bool {
        self.deferred.is_empty() && self.rxqs.iter().all(|q| q.rxq.exhausted())
    }

    /// Installs a megaflow. Its match must be exact on in_port (as OVS's userspace datapath
    /// requires) and new.
    pub fn add_flow(&mut self, f: Megaflow) -> Result<FlowRef, String> {
        self.try_add_flow(f).map_err(|(e, _)| e)
    }

    /// [`Self::add_flow`], handing the flow back when it cannot be installed.
    fn try_add_flow(&mut self, mut f: Megaflow) -> Result<FlowRef, (String, Box<Megaflow>)> {
        if f.mask().in_port() != u32::MAX {
            return Err(("in_port must be matched exactly".into(), Box::new(f)));
        }
        if self.flows.len() >= self.config.flow_limit {
            return Err((
                format!("flow limit {} reached", self.config.flow_limit),
                Box::new(f),
            ));
        }
        let port = f.m.key().in_port();
        let m = f.m.clone();
        f.installed_tsc = tsc::now();
        let r = self.flows.insert(f);
        if self.cls.get_or_create(port).insert(&m, r).is_err() {
            let f = self
                .flows
                .remove(r)
                .expect("the flow was inserted just above");
            return Err(("a flow with this match already exists".into(), Box::new(f)));
        }
        if crate::ct::mask_has_tuple(m.mask()) {
            self.ct_tuple_flows += 1;
        }
        self.track_fast_paths(r);
        Ok(r)
    }

    /// Enters flow `r` in its port's decap fast path if its only action is `tnl_pop`, or in
    /// its simple match if it qualifies ([`SimpleFlow`]), and in its linear match
    /// ([`LinearMatch`]), when it fits.
    fn track_fast_paths(&mut self, r: FlowRef) {
        let Some(f) = self.flows.get(r) else {
            return;
        };
        let Some(c) = self.cls.port_mut(f.m.key().in_port()) else {
            return;
        };
        c.linear.push(r, &f.m);
        if let Some(d) = DecapFlow::new(r, &f.m, &f.actions) {
            if c.decap.len() < MAX_DECAP_FLOWS {
                c.decap.push(d);
            }
        } else if let Some(d) = SimpleFlow::new(r, &f.m, &f.actions)
            && c.simple.len() < MAX_DECAP_FLOWS
        {
            c.simple.push(d);
        }
    }

    /// Takes flow `r` (input port `port`) out of the decap fast path, the simple match and
    /// the linear match.
    fn untrack_fast_paths(&mut self, r: FlowRef, port: u32) {
        if let Some(c) = self.cls.port_mut(port) {
            c.decap.retain(|d| d.flow != r);
            c.simple.retain(|d| d.flow != r);
            c.linear.remove(r);
        }
    }

    /// Finds the megaflow with exactly this match.
    fn find(&mut self, m: &Match) -> Option<FlowRef> {
        let port = m.key().in_port();
        let r = self.cls.get_mut(port)?.lookup(m.key())?;
        let f = self.flows.get(r)?;
        (f.m == *m).then_some(r)
    }

    /// Removes the megaflow with exactly this match.
    pub fn del_flow(&mut self, m: &Match) -> Option<Megaflow> {
        let r = self.find(m)?;
        self.remove_ref(r)
    }

    fn remove_ref(&mut self, r: FlowRef) -> Option<Megaflow> {
        let f = self.flows.remove(r)?;
        let port = f.m.key().in_port();
        if crate::ct::mask_has_tuple(f.mask()) {
            self.ct_tuple_flows -= 1;
        }
        self.untrack_fast_paths(r, port);
        if let Some(c) = self.cls.get_mut(port) {
            c.remove(&f.m);
        }
        self.refill_linear(port);
        // EMC entries naming `r` are dead by generation and are cleared on lookup.
        Some(f)
    }

    /// When `port` is down to as few megaflows as the linear match takes but it lacks some
    /// (they came while it was full, or did not fit with one since removed), lists them again,
    /// from the port's classifier.
    fn refill_linear(&mut self, port: u32) {
        let Some(c) = self.cls.port_mut(port) else {
            return;
        };
        let n = c.dpcls.len();
        if n == 0 || n > MAX_LINEAR_FLOWS || c.linear.len() == n {
            return;
        }
        c.linear.clear();
        for r in c.dpcls.flows() {
            if let Some(f) = self.flows.get(r) {
                c.linear.push(r, &f.m);
            }
        }
    }

    /// Replaces a megaflow's actions.
    pub fn mod_flow(&mut self, new: Megaflow, clear_stats: bool) -> Result<(), String> {
        let r = self.find(&new.m).ok_or("no flow with this match")?;
        let f = self.flows.get_mut(r).ok_or("no flow with this match")?;
        f.actions = new.actions;
        f.odp_actions = new.odp_actions;
        if clear_stats {
            f.stats = FlowStats::default();
        }
        // The new actions may start or stop being a lone tnl_pop (or pop to another port).
        self.untrack_fast_paths(r, new.m.key().in_port());
        self.track_fast_paths(r);
        Ok(())
    }

    /// Removes every megaflow.
    pub fn del_flows(&mut self) -> usize {
        let refs: Vec<FlowRef> = self.flows.iter().map(|(r, _)| r).collect();
        let n = refs.len();
        for r in refs {
            self.remove_ref(r);
        }
        self.emc.clear();
        n
    }

    /// All megaflows, with seconds since last use.
    pub fn dump(&self) -> Vec<FlowDump> {
        let now = tsc::now();
        self.flows
            .iter()
            .map(|(_, f)| FlowDump::of(f.clone(), now))
            .collect()
    }

    /// Applies one command from the main thread.
    pub fn handle(&mut self, cmd: PmdCmd) {
        match cmd {
            PmdCmd::AddFlow(f, reply) => {
                let _ = reply.send(self.add_flow(*f).map(|_| ()));
            }
            PmdCmd::ModFlow(f, clear, reply) => {
                let _ = reply.send(self.mod_flow(*f, clear));
            }
            PmdCmd::DelFlow(m, reply) => {
                let now = tsc::now();
                let _ = reply.send(self.del_flow(&m).map(|f| FlowDump::of(f, now)));
            }
            PmdCmd::DelFlows(reply) => {
                let _ = reply.send(self.del_flows());
            }
            PmdCmd::Dump(reply) => {
                let _ = reply.send(self.dump());
            }
            PmdCmd::NFlows(reply) => {
                let _ = reply.send(self.n_flows());
            }
            PmdCmd::Stats(reply) => {
                let _ = reply.send((self.stats(), self.emc.len()));
            }
            PmdCmd::ClearStats => self.clear_stats(),
            PmdCmd::SetEmcInsertInvProb(n) => {
                self.config.emc_insert_inv_prob = n;
                self.emc.set_insert_inv_prob(n);
            }
            PmdCmd::TakeRxqs(reply) => {
                self.flush_tx();
                self.rxq_busy = 0;
                let _ = reply.send(std::mem::take(&mut self.rxqs));
            }
            PmdCmd::AddRxqs(qs) => {
                self.rxq_busy = 0;
                for q in qs {
                    self.add_rxq(q);
                }
            }
            PmdCmd::AddTxq(no, q, tunnel) => self.add_port_txq(no, q, tunnel),
            PmdCmd::RemovePort(no, reply) => {
                self.remove_port(no);
                let _ = reply.send(());
            }
            PmdCmd::SetFragConfig(cfg) => self.reasm.set_config(cfg),
            PmdCmd::FragStatus(lists, reply) => {
                let _ = reply.send(self.reasm.status(lists));
            }
        }
    }

    /// Drains pending commands without blocking.
    pub fn handle_pending(&mut self, rx: &Receiver<PmdCmd>) {
        while let Ok(cmd) = rx.try_recv() {
            self.handle(cmd);
        }
    }

    /// One pass over every polled rx queue; returns the packets received.
    pub fn poll_once(&mut self) -> usize {
        let start = tsc::now();
        self.iter_tsc = start;
        self.timing = self.stats.iterations.is_multiple_of(STAGE_SAMPLE);
        let mut received = 0;
        self.upcalls_this_iter = 0;
        self.accrue_tokens(start);
        self.protecting = self.hits_this_iter > 0;
        self.hits_this_iter = 0;
        self.run_deferred();
        for qi in 0..self.rxqs.len() {
            let port = self.rxqs[qi].port_no as usize;
            if self.deferred_by_port.get(port).copied().unwrap_or(0) >= DEFER_PER_PORT {
                continue; // backpressure: this port's misses wait for the slow path
            }
            let t0 = tsc::now();
            let mut batch = std::mem::take(&mut self.rx_batch);
            let rxq = &mut self.rxqs[qi];
            let n = rxq.rxq.recv(&mut self.pool, &mut batch);
            let t1 = self.stamp();
            self.add_stage(Stage::Rx, t0, t1);
            if n == 0 {
                self.rx_batch = batch;
                continue;
            }
            received += n;
            self.stats.rx_packets += n as u64;
            let in_port = self.rxqs[qi].port_no;
            self.process_rx(&mut batch, in_port);
            self.rx_batch = batch;
            self.run_recirc();
            self.flush_tx();
            #[cfg(debug_assertions)]
            self.check_nothing_lent();
            if self.pool.end_lending() {
                self.rxqs[qi].rxq.release();
            }
            self.rxqs[qi].cycles += tsc::now() - t0;
        }
        let end = tsc::now();
        self.stats.iterations += 1;
        if received > 0 {
            self.stats.busy_iterations += 1;
            self.stats.busy_cycles += end - start;
            self.rxq_busy += end - start;
        } else {
            self.stats.idle_cycles += end - start;
        }
        if end >= self.next_housekeeping {
            self.housekeeping(end);
        }
        received
    }

    /// Runs the packets queued for another pass (recirculated or decapsulated), in order, as
    /// batches of consecutive packets that share an in_port: after `tnl_pop` a packet is
    /// classified as received on the tunnel port, not on the port it came in by.
    fn run_recirc(&mut self) {
        while !self.recirc.is_empty() {
            let in_port = self.recirc[0].meta.in_port;
            let take = self
                .recirc
                .iter()
                .take(MAX_BURST)
                .take_while(|p| p.meta.in_port == in_port)
                .count();
            let mut b = std::mem::take(&mut self.recirc_batch);
            let whole = take == self.recirc.len() && b.is_empty();
            let reuse = self.keys_reusable.take() == Some(take) && whole;
            if whole {
                // The whole queue is one batch: it becomes the batch, no packet moved.
                b.swap_packets(&mut self.recirc);
            } else {
                for p in self.recirc.drain(..take) {
                    b.push(p);
                }
            }
            if self.recirc_gso {
                b.mark_gso();
            }
            self.process_with(&mut b, in_port, reuse);
            self.recirc_batch = b;
        }
        self.recirc_gso = false;
    }

    /// Adds the slow path's share of the time since the last call to its token budget, capped
    /// at a millisecond's share so that idle time does not bank an unbounded burst.
    fn accrue_tokens(&mut self, now: u64) {
        let share = self.config.upcall_share_pct.min(100) as i64;
        let hz = tsc::hz() as i64;
        let elapsed = now.saturating_sub(self.tokens_tsc) as i64;
        self.tokens_tsc = now;
        let cap = hz / 1000 * share / 100;
        self.upcall_tokens = (self.upcall_tokens + elapsed.min(hz) * share / 100).min(cap);
    }

    /// Whether the slow path may run now: within the iteration's count budget, and then always
    /// without cached traffic to protect, else while it has tokens.
    fn upcall_allowed(&self) -> bool {
        self.upcalls_this_iter < UPCALL_BUDGET
            && (self.config.upcall_share_pct >= 100 || !self.protecting || self.upcall_tokens > 0)
    }

    /// Runs waiting misses through the pipeline again, oldest first, while the slow path may
    /// run; packets of one input port go as one batch.
    fn run_deferred(&mut self) {
        while !self.deferred.is_empty() && self.upcall_allowed() {
            let in_port = self.deferred[0].meta.in_port;
            let mut b = std::mem::take(&mut self.recirc_batch);
            while b.len() < MAX_BURST
                && self
                    .deferred
                    .front()
                    .is_some_and(|p| p.meta.in_port == in_port)
            {
                let mut p = self.deferred.pop_front().expect("checked");
                p.meta.deferred = false;
                if let Some(c) = self.deferred_by_port.get_mut(in_port as usize) {
                    *c = c.saturating_sub(1);
                }
                b.push(p);
            }
            if self.deferred_gso {
                b.mark_gso();
            }
            self.running_deferred = true;
            self.process(&mut b, in_port);
            self.running_deferred = false;
            for p in self.redeferred.drain(..).rev() {
                self.deferred.push_front(p);
            }
            self.recirc_batch = b;
            // Waiting misses that recirculate or pop go on at once, as they would have.
            self.run_recirc();
            self.flush_tx();
        }
        if self.deferred.is_empty() {
            self.deferred_gso = false;
        }
    }

    /// Once a second: re-rank subtables by hits, expire idle megaflows.
    fn housekeeping(&mut self, now: u64) {
        let hz = tsc::hz();
        // Datagrams that did not complete in time (a look at the oldest deadline when none).
        let mut old = Vec::new();
        self.reasm.expire(conntrack::now_ms(), &mut old);
        self.stats.ct_frag_drops += old.len() as u64;
        for p in old {
            self.pool.free(p);
        }
        if self.next_housekeeping != 0 {
            for c in &mut self.cls.by_port {
                c.dpcls.sort_subtables();
            }
            if self.max_idle_tsc > 0 {
                // A flow that never saw a packet is idle since its install.
                let max_idle = self.max_idle_tsc;
                let idle: Vec<FlowRef> = self
                    .flows
                    .iter()
                    .filter(|(_, f)| {
                        let last = f.stats.used_tsc.max(f.installed_tsc);
                        f.expires && now.saturating_sub(last) > max_idle
                    })
                    .map(|(r, _)| r)
                    .collect();
                for r in idle {
                    self.remove_ref(r);
                }
            }
        }
        // A few EMC slots a round: entries of deleted flows are dead by generation already;
        // clearing them bounds their life so that a wrapped generation cannot revive one.
        let flows = &self.flows;
        self.emc.sweep(EMC_SWEEP_PER_ROUND, |r| flows.is_live(r));
        self.next_housekeeping = now + hz;
    }

    /// Steps 2-7 for one batch of packets that share an in_port; leaves `batch` empty.
    ///
    /// After extraction, the decap fast path ([`crate::decap`]) tests the packets against the
    /// port's megaflows whose only action is `tnl_pop`. When all of them hit and pop to one
    /// tunnel port, they are decapsulated in place and the batch starts its next pass at once,
    /// as received on the tunnel port; partial hits skip the EMC and dpcls lookups.
    fn process(&mut self, batch: &mut Batch, in_port: u32) {
        self.process_with(batch, in_port, false);
    }

    /// [`Self::process`] for a batch just received: first the fused outer pass of a tunnel
    /// endpoint ([`Self::decap_rx`]).
    #[inline]
    fn process_rx(&mut self, batch: &mut Batch, in_port: u32) {
        let port = self.decap_rx(batch, in_port).unwrap_or(in_port);
        self.process(batch, port);
    }

    /// The outer pass of a batch just received on a tunnel's underlay port, fused into the
    /// decap: when every packet is a frame of the common shape whose words
    /// ([`flow::ipv4_fast_words`]) match one of the port's decap megaflows
    /// ([`crate::decap::lookup_outer`]), all popping to one tunnel port, they are popped in
    /// place as by the decap fast path, with no key written, no extraction and no second
    /// compare, and the tunnel port is returned for their next pass. Otherwise nothing has
    /// changed but the packets' header offsets, and the batch takes the usual way.
    #[inline]
    fn decap_rx(&mut self, batch: &mut Batch, in_port: u32) -> Option<u32> {
        let c = self.cls.port(in_port)?;
        if c.decap.is_empty() {
            return None;
        }
        let t0 = self.stamp();
        let mut which = [0u8; MAX_BURST];
        let mut tcp_flags = [0u16; MAX_BURST];
        for (i, p) in batch.packets_mut().iter_mut().enumerate() {
            let m = &p.meta;
            if !only_port_and_recirc(m) || p.is_lent() {
                return None;
            }
            let w0 = meta_word(m.in_port, m.recirc_id);
            let ([w1, w2, w3, w4, w5], layers) = flow::ipv4_fast_words(p.data())?;
            which[i] = crate::decap::lookup_outer(&c.decap, &[w0, w1, w2, w3, w4, w5])? as u8;
            tcp_flags[i] = flow::extract::tcp_flags_of_word(w5);
            p.meta.l2_5 = layers.l2_5;
            p.meta.l3 = layers.l3;
            p.meta.l4 = layers.l4;
        }
        let n = batch.len();
        let port = self.decap_in_place(batch, in_port, &which, |_, i| tcp_flags[i])?;
        self.stats.batches += 1;
        self.count_decap_hits(n as u64);
        let t = self.stamp();
        self.add_stage(Stage::Actions, t0, t);
        Some(port)
    }

    /// [`Self::process`]; `reuse`: the batch is the previous pass's, recirculated whole with
    /// its headers untouched (`keys_reusable`), so each packet's key is still in
    /// `keys` at its place: only its metadata words are made again, and it is hashed again,
    /// instead of the packet being parsed again.
    fn process_with(&mut self, batch: &mut Batch, mut in_port: u32, mut reuse: bool) {
        self.pass_gso = batch.take_gso();
        let mut lent = batch.take_lent();
        self.keys_reusable = None;
        loop {
            let n = batch.len();
            if n == 0 {
                return;
            }
            let t0 = self.stamp();
            self.stats.batches += 1;
            self.unhashed = false;

            // Extraction, and the simple match where the port has megaflows for it.
            let ct_tuple = self.ct_tuple_flows != 0;
            let linear = self.cls.is_linear(in_port);
            let mut simple = 0u32;
            let reusing = std::mem::take(&mut reuse) && n <= MAX_BURST;
            // On a port the linear match holds, each key is looked up as it is made:
            // `early` are the packets found so.
            let (mut looked, mut early) = (false, 0u32);
            let first = if reusing {
                None
            } else {
                self.simple_batch(batch, in_port, ct_tuple)
            };
            // Lent packets stay lent only on their way to an output that takes them.
            let mut keep = false;
            if std::mem::take(&mut lent) {
                keep = first.is_some_and(|f| self.sends_lent(f));
                if !keep {
                    self.materialize(batch);
                }
            }
            if reusing {
                for (i, p) in batch.packets_mut().iter_mut().enumerate() {
                    let k = &mut self.keys[i];
                    k.clear_words(!flow::key::PACKET_WORDS);
                    key_metadata_add(p, k, ct_tuple);
                    let h = pass_hash(k.hash(0), p.meta.recirc_depth);
                    p.meta.hash = h;
                    self.hashes[i] = h;
                }
            } else if let Some(first) = first {
                simple = self.extract_simple_batch(batch, in_port, ct_tuple, first, keep);
            } else if linear && self.cls.decap(in_port).is_empty() {
                self.unhashed = true;
                let Pmd {
                    cls,
                    keys,
                    hits,
                    stats,
                    ..
                } = self;
                // Always there: `linear` says the port's classifier holds megaflows.
                if let Some(c) = cls.port(in_port) {
                    for (i, p) in batch.packets_mut().iter_mut().enumerate() {
                        let k = &mut keys[i];
                        key_metadata_with(p, k, ct_tuple);
                        extract_packet_unhashed(stats, p, k);
                        let r = c.linear.lookup(k);
                        hits[i] = r;
                        early |= u32::from(r.is_some()) << i;
                    }
                    looked = true;
                }
            } else if linear || !self.cls.decap(in_port).is_empty() {
                // The hash is for the EMC alone: on a port whose packets the decap fast path
                // or the linear match finds, only those they do not find get one, below.
                self.unhashed = true;
                for (i, p) in batch.packets_mut().iter_mut().enumerate() {
                    let k = &mut self.keys[i];
                    key_metadata_with(p, k, ct_tuple);
                    extract_packet_unhashed(&mut self.stats, p, k);
                }
            } else {
                for (i, p) in batch.packets_mut().iter_mut().enumerate() {
                    let k = &mut self.keys[i];
                    key_metadata_with(p, k, ct_tuple);
                    self.hashes[i] = extract_packet(&mut self.stats, p, k);
                }
            }
            let t1 = self.stamp();
            self.add_stage(Stage::Extract, t0, t1);

            // Decap fast path (for the packets the simple match did not find: a packet matches
            // one megaflow at most).
            let mut fast = 0u32;
            if !self.cls.decap(in_port).is_empty() {
                let mut which = [0u8; MAX_BURST];
                // A simple packet's key is partial: whatever the decap compare says of it
                // does not count.
                fast = self.decap_lookup(in_port, n, &mut which) & !simple;
                if fast != 0 {
                    self.count_decap_hits(u64::from(fast.count_ones()));
                }
                if u64::from(fast) == (1u64 << n) - 1
                    && let Some(port) =
                        self.decap_in_place(batch, in_port, &which, |k, i| k[i].tcp_flags())
                {
                    in_port = port;
                    let t = self.stamp();
                    self.add_stage(Stage::Actions, t1, t);
                    continue;
                }
                let flows = self.cls.decap(in_port);
                let mut bits = fast;
                while bits != 0 {
                    let i = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    self.hits[i] = Some(flows[usize::from(which[i])].flow);
                }
            }

            // Exact-match cache, for the packets neither fast path found (not on a port whose
            // megaflows the linear match holds: they are looked up there, as a classifier).
            let fast = fast | simple | early;
            let all = ((1u64 << n) - 1) as u32;
            let mut misses = 0u32;
            if self.unhashed && !linear && self.emc.is_enabled() {
                self.hash_now(batch, all & !fast);
            }
            if linear || !self.emc.is_enabled() {
                misses = all & !fast;
                for i in 0..n {
                    if misses & (1 << i) != 0 {
                        self.hits[i] = None;
                    }
                }
            } else {
                let Pmd {
                    emc,
                    flows,
                    keys,
                    hashes,
                    hits,
                    ..
                } = self;
                if fast == 0 {
                    for i in 0..n {
                        hits[i] = emc.lookup(&keys[i], hashes[i], |r| flows.is_live(r));
                        if hits[i].is_none() {
                            misses |= 1 << i;
                        }
                    }
                } else {
                    let mut bits = all & !fast;
                    while bits != 0 {
                        let i = bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        hits[i] = emc.lookup(&keys[i], hashes[i], |r| flows.is_live(r));
                        if hits[i].is_none() {
                            misses |= 1 << i;
                        }
                    }
                }
            }
            let emc_hits = (all & !fast & !misses).count_ones();
            self.stats.emc_hits += u64::from(emc_hits);
            if !self.running_deferred {
                self.hits_this_iter += u64::from(emc_hits);
            }
            let t2 = self.stamp();
            self.add_stage(Stage::Emc, t1, t2);

            // Megaflow classifier of the in_port.
            if looked {
                self.count_linear(in_port, early);
            } else if misses != 0 && linear {
                misses = self.linear_lookup(in_port, misses);
            } else if misses != 0 {
                let Pmd {
                    cls,
                    keys,
                    hits,
                    emc,
                    hashes,
                    ..
                } = self;
                if let Some(c) = cls.get_mut(in_port) {
                    let mut refs = [&keys[0]; MAX_BURST];
                    let mut idx = [0usize; MAX_BURST];
                    let mut m = 0;
                    let mut bits = misses;
                    while bits != 0 {
                        let i = bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        refs[m] = &keys[i];
                        idx[m] = i;
                        m += 1;
                    }
                    let mut out = [None; MAX_BURST];
                    let found = c.lookup_batch(&refs[..m], &mut out[..m]);
                    if found > 0 {
                        for j in 0..m {
                            if let Some(r) = out[j] {
                                let i = idx[j];
                                hits[i] = Some(r);
                                misses &= !(1 << i);
                                emc.insert(&keys[i], hashes[i], r);
                            }
                        }
                        self.stats.megaflow_hits += found as u64;
                        if !self.running_deferred {
                            self.hits_this_iter += found as u64;
                        }
                    }
                }
            }
            let t3 = self.stamp();
            self.add_stage(Stage::Megaflow, t2, t3);

            // Upcalls: timed whenever there are any (their stage is left out of the
            // actions').
            let mut t4 = t3;
            if misses != 0 {
                let u0 = tsc::now();
                self.upcalls(batch, misses, in_port);
                let u1 = tsc::now();
                self.stats.stage_cycles[Stage::Upcall as usize] += u1 - u0;
                if self.timing {
                    t4 = u1;
                }
            }

            // Group by flow, keeping each flow's packets in order, and run each group's
            // actions.
            self.execute_groups(batch, n);
            let t5 = self.stamp();
            self.add_stage(Stage::Actions, t4, t5);
            return;
        }
    }

    /// Whether the simple match may find the packets of `batch` (from `in_port`): the port has
    /// megaflows for it and the first packet's metadata matches one of them. The batch's
    /// packets mostly share their metadata, so a batch whose first packet the simple match
    /// would not find (for example the first pass of a pipeline whose simple megaflows are
    /// for a recirculation) skips trying every packet. Returns that first packet's megaflow.
    #[inline]
    fn simple_batch(&mut self, batch: &Batch, in_port: u32, ct_tuple: bool) -> Option<FlowRef> {
        let flows = self.cls.simple(in_port);
        match batch.packets().first() {
            Some(p) if !flows.is_empty() => {
                let k = &mut self.keys[0];
                key_metadata_with(p, k, ct_tuple);
                crate::decap::lookup_simple(flows, k)
            }
            _ => None,
        }
    }

    /// Extraction for a batch the simple match may find ([`Self::simple_batch`]): each packet
    /// it finds gets its megaflow in `hits`, no key but its TCP flags, no hash, and its header
    /// offsets; every other packet is extracted whole. Returns the packets it found, as a bit
    /// mask. Out of line: the batches of ports without simple megaflows should not pay for
    /// its registers.
    ///
    /// `first`: the megaflow of the first packet's metadata. A packet whose metadata is only
    /// in_port and recirc_id, as the first's, with the first's recirc_id, has the same
    /// metadata words, so the same megaflow: it is not looked up again.
    ///
    /// `lent`: the batch may hold lent packets, which may stay lent only if `first` finds them
    /// ([`Self::sends_lent`]); the others are brought in.
    #[inline(never)]
    fn extract_simple_batch(
        &mut self,
        batch: &mut Batch,
        in_port: u32,
        ct_tuple: bool,
        first: FlowRef,
        lent: bool,
    ) -> u32 {
        let mut simple = 0u32;
        let first_meta = batch
            .packets()
            .first()
            .filter(|p| only_port_and_recirc(&p.meta))
            .map(|p| p.meta.recirc_id);
        let Pmd {
            cls,
            keys,
            hashes,
            hits,
            stats,
            pool,
            ..
        } = self;
        let flows = cls.simple(in_port);
        let packets = batch.packets_mut();
        let n = packets.len();
        for (i, (((p, k), h), hit)) in packets
            .iter_mut()
            .zip(&mut keys[..n])
            .zip(&mut hashes[..n])
            .zip(&mut hits[..n])
            .enumerate()
        {
            let same = first_meta
                .is_some_and(|id| only_port_and_recirc(&p.meta) && p.meta.recirc_id == id);
            // The simple megaflows look at metadata words only: find one first (the key's
            // metadata words are only made when needed), then see whether the frame is of
            // the shape they take. A simple hit's key needs no more than its TCP flags.
            let found = if same {
                k.clear();
                Some(first)
            } else {
                key_metadata_with(p, k, ct_tuple);
                crate::decap::lookup_simple(flows, k)
            };
            // A packet still lent here stays lent only on its way to `first`'s output, which
            // takes it (`sends_lent`).
            if let Some(r) = found
                && let Some(l) = flow::extract_simple(p.headers(), k)
            {
                if lent && r != first {
                    pool.materialize(p);
                }
                // Nothing after needs the hash (see `SimpleFlow`).
                p.meta.hash = 0;
                *h = 0;
                (p.meta.l2_5, p.meta.l3, p.meta.l4) = (l.l2_5, l.l3, l.l4);
                *hit = Some(r);
                simple |= 1 << i;
            } else {
                if same {
                    key_metadata_with(p, k, ct_tuple);
                }
                if lent {
                    pool.materialize(p);
                }
                *h = extract_packet(stats, p, k);
            }
        }
        stats.simple_hits += u64::from(simple.count_ones());
        if !self.running_deferred {
            self.hits_this_iter += u64::from(simple.count_ones());
        }
        simple
    }

    /// Checks that no packet the PMD keeps past a burst is lent (the lending is about to end).
    #[cfg(debug_assertions)]
    fn check_nothing_lent(&self) {
        let kept = self
            .deferred
            .iter()
            .chain(&self.redeferred)
            .chain(&self.recirc);
        let queued = self.txs.iter().flatten().flat_map(|t| t.batch.packets());
        assert!(
            !kept.chain(queued).any(Packet::is_lent),
            "a lent packet outlived its burst"
        );
    }

    /// Whether megaflow `r`'s actions are only an output to a queue that takes lent packets:
    /// the one use of a lent packet that does not need its whole frame in the buffer.
    fn sends_lent(&self, r: FlowRef) -> bool {
        match self.flows.get(r).map(|f| &f.actions[..]) {
            Some([DpAction::Output(port)]) => {
                matches!(self.txs.get(*port as usize), Some(Some(tx)) if tx.lent)
            }
            _ => false,
        }
    }

    /// Brings the whole frame of every lent packet of `batch` into its buffer.
    #[cold]
    #[inline(never)]
    fn materialize(&mut self, batch: &mut Batch) {
        for p in batch.packets_mut() {
            self.pool.materialize(p);
        }
    }

    /// The linear match ([`LinearMatch`]) of the packets `todo` (a bit mask) on `in_port`,
    /// whose megaflows it holds: each packet found gets its megaflow in `hits`. Returns the
    /// packets none matches, the misses.
    #[inline]
    fn linear_lookup(&mut self, in_port: u32, todo: u32) -> u32 {
        let Pmd {
            cls, keys, hits, ..
        } = self;
        let Some(c) = cls.port_mut(in_port) else {
            return todo;
        };
        let mut misses = 0u32;
        let mut bits = todo;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let r = c.linear.lookup(&keys[i]);
            hits[i] = r;
            if r.is_none() {
                misses |= 1 << i;
            }
        }
        self.count_linear(in_port, todo & !misses);
        misses
    }

    /// Counts the linear match's hits `found` (a bit mask) on `in_port`.
    #[inline]
    fn count_linear(&mut self, in_port: u32, found: u32) {
        let found = u64::from(found.count_ones());
        if let Some(c) = self.cls.port_mut(in_port) {
            // As the classifier counts its subtable lookups, for the hits: the megaflows
            // share one mask, one subtable.
            c.linear_lookups += found;
        }
        self.stats.megaflow_hits += found;
        if !self.running_deferred {
            self.hits_this_iter += found;
        }
    }

    /// Counts `n` packets the decap fast path found.
    #[inline]
    fn count_decap_hits(&mut self, n: u64) {
        self.stats.decap_hits += n;
        if !self.running_deferred {
            self.hits_this_iter += n;
        }
    }

    /// The decap fast path's lookup: the packets of the batch (of `n`) whose key matches one
    /// of `in_port`'s decap megaflows, as a bit mask, with the megaflow's index in `which`.
    #[inline]
    fn decap_lookup(&mut self, in_port: u32, n: usize, which: &mut [u8; MAX_BURST]) -> u32 {
        let flows = self.cls.decap(in_port);
        let mut bits = 0u32;
        for (i, k) in self.keys[..n].iter().enumerate() {
            if let Some(j) = crate::decap::lookup(flows, k) {
                which[i] = j as u8;
                bits |= 1 << i;
            }
        }
        bits
    }

    /// Runs the decap megaflows `which` (indices into `in_port`'s decap list, one per packet)
    /// on the whole batch: credits their statistics, then pops every packet in place, making
    /// it arrive on the tunnel port with recirc_id 0 (dropping, counted, what does not
    /// decapsulate). Returns the tunnel port, or `None`, leaving everything as it was, when
    /// the packets pop to more than one port.
    fn decap_in_place(
        &mut self,
        batch: &mut Batch,
        in_port: u32,
        which: &[u8; MAX_BURST],
        tcp_flags_of: impl Fn(&[FlowKey], usize) -> u16,
    ) -> Option<u32> {
        let n = batch.len();
        let flows = self.cls.decap(in_port);
        let port = flows[usize::from(which[0])].port;
        if which[..n]
            .iter()
            .any(|&j| flows[usize::from(j)].port != port)
        {
            return None;
        }
        // Flow statistics, once per megaflow, as a group's would be.
        let mut packets = [0u64; MAX_DECAP_FLOWS];
        let mut bytes = [0u64; MAX_DECAP_FLOWS];
        let mut tcp_flags = [0u16; MAX_DECAP_FLOWS];
        for (i, p) in batch.packets().iter().enumerate() {
            let j = usize::from(which[i]) % MAX_DECAP_FLOWS;
            packets[j] += 1;
            bytes[j] += p.len() as u64;
            tcp_flags[j] |= tcp_flags_of(&self.keys, i);
        }
        let now = self.iter_tsc;
        for (j, d) in flows.iter().enumerate() {
            if packets[j] > 0
                && let Some(f) = self.flows.get_mut(d.flow)
            {
                f.stats.packets += packets[j];
                f.stats.bytes += bytes[j];
                f.stats.used_tsc = now;
                f.stats.tcp_flags |= tcp_flags[j];
            }
        }
        let kind = self.tunnel_kind(port);
        let mut dropped = 0u32;
        for (i, p) in batch.packets_mut().iter_mut().enumerate() {
            if !pop_one(&mut self.stats, p, port, kind) {
                dropped |= 1 << i;
            }
        }
        if dropped != 0 {
            batch.remove(dropped, &mut self.pool);
        }
        Some(port)
    }

    /// The tunnel kind of datapath port `port`, if it is a tunnel port.
    fn tunnel_kind(&self, port: u32) -> Option<TunnelKind> {
        match self.txs.get(port as usize) {
            Some(Some(slot)) => slot.tunnel,
            _ => None,
        }
    }

    /// Slow path for the packets in `misses`.
    fn upcalls(&mut self, batch: &mut Batch, mut misses: u32, in_port: u32) {
        // The slow path sees every field: the keys get the connection tuple they were made
        // without (and so does any lookup after a flow it installs matches it).
        if self.ct_tuple_flows == 0 {
            let mut bits = misses;
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                crate::ct::tuple_to_key(&batch.packets()[i], &mut self.keys[i]);
            }
        }
        let mut installed = false;
        while misses != 0 {
            let i = misses.trailing_zeros() as usize;
            misses &= misses - 1;
            // A flow installed for an earlier packet of this batch may cover this one.
            if installed
                && let Some(r) = self
                    .cls
                    .get_mut(in_port)
                    .and_then(|c| c.lookup(&self.keys[i]))
            {
                self.hits[i] = Some(r);
                self.stats.megaflow_hits += 1;
                continue;
            }
            // Over budget, or behind older waiting misses (whose flows this packet may share,
            // so it must not overtake them): wait, or be dropped when the queue is full.
            let behind = !self.deferred.is_empty() && !self.running_deferred;
            if behind || !self.upcall_allowed() {
                self.defer(batch, i);
                continue;
            }
            self.upcalls_this_iter += 1;
            let t0 = tsc::now();
            let result = self.upcall.upcall(&self.keys[i], &batch.packets()[i]);
            match result {
                UpcallResult::Drop => self.stats.lost_upcalls += 1,
                UpcallResult::Install {
                    mask,
                    actions,
                    compiled,
                    packet_outs,
                } => {
                    self.stats.upcalls += 1;
                    for po in packet_outs {
                        self.packet_out(&po);
                    }
                    let key = self.keys[i].clone();
                    let mut mask = *mask;
                    mask.set_in_port(u32::MAX);
                    let f = Megaflow {
                        ufid: ufid_of(&key, &mask),
                        m: Match::new(&key, &mask),
                        attrs: flow::odp::KeyAttrs::megaflow(&key, &mask),
                        key,
                        odp_actions: actions.into(),
                        actions: compiled.into(),
                        stats: FlowStats::default(),
                        expires: true,
                        installed_tsc: 0,
                    };
                    match self.try_add_flow(f) {
                        Ok(r) => {
                            installed = true;
                            self.hits[i] = Some(r);
                            if self.unhashed {
                                self.hash_now(batch, 1 << i);
                            }
                            self.emc.insert(&self.keys[i], self.hashes[i], r);
                        }
                        // Over the flow limit (or a race with an identical flow): still
                        // process this packet, through a temporary entry.
                        Err((_, f)) => {
                            let r = self.flows.insert(*f);
                            self.hits[i] = Some(r);
                            self.temp_flows.push(r);
                        }
                    }
                }
            }
            // The slow path's whole cost (translation and install) comes out of its budget.
            self.upcall_tokens -= (tsc::now() - t0) as i64;
        }
    }

    /// Sends a packet the slow path made (a neighbour request): its actions on a batch of one.
    /// Slow path only: the batch is made here.
    fn packet_out(&mut self, po: &PacketOut) {
        let mut one = Batch::new();
        one.push(self.pool.packet_from(&po.frame, po.in_port));
        self.stats.packet_outs += 1;
        self.execute(&po.actions, &mut one);
    }

    /// Marks packet `i` of `batch` to wait for the slow path (its group frees it into the
    /// deferred queue), or counts it lost when the queue is full.
    fn defer(&mut self, batch: &mut Batch, i: usize) {
        let port = batch.packets()[i].meta.in_port as usize;
        if self.deferred.len() + self.deferred_marked >= DEFER_MAX {
            self.stats.lost_upcalls += 1;
            return;
        }
        batch.packets_mut()[i].meta.deferred = true;
        self.deferred_marked += 1;
        if self.deferred_by_port.len() <= port {
            self.deferred_by_port.resize(port + 1, 0);
        }
        self.deferred_by_port[port] += 1;
        self.stats.deferred_upcalls += 1;
    }

    /// Runs each flow's actions on its packets. Packets are grouped by flow in order of first
    /// appearance; within a flow they keep their arrival order.
    fn execute_groups(&mut self, batch: &mut Batch, n: usize) {
        // Common case: the whole burst belongs to one flow. Run its actions on the burst as it
        // is, without regrouping.
        if n > 0 && self.hits[1..n].iter().all(|h| *h == self.hits[0]) {
            let tcp_flags = self.keys[..n].iter().fold(0, |f, k| f | k.tcp_flags());
            // The actions see the pass's batch as extracted (see `keys_reusable`).
            self.run_group(self.hits[0], batch, tcp_flags, true);
            for r in self.temp_flows.drain(..) {
                self.flows.remove(r);
            }
            return;
        }
        debug_assert!(n <= MAX_BURST && n == batch.len());
        // Each packet's megaflow as one number, so that a group's members are found by
        // comparing them all, without a branch per packet (which megaflow a packet has is
        // what a branch predictor cannot know when flows interleave).
        let mut ids = [u64::MAX; MAX_BURST];
        for (id, h) in ids[..n].iter_mut().zip(&self.hits[..n]) {
            if let Some(r) = h {
                *id = u64::from(r.generation) << 32 | u64::from(r.idx);
            }
        }
        // The groups in order of first appearance: their megaflow, TCP flags, and each
        // packet's group.
        let mut group_of = [0u8; MAX_BURST];
        let mut targets = [None; MAX_BURST];
        let mut flags = [0u16; MAX_BURST];
        let mut n_groups = 0;
        let mut done = 0u32;
        let all = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
        while done != all {
            let first = (!done & all).trailing_zeros() as usize;
            let id = ids[first];
            let mut bits = 0u32;
            for (i, &x) in ids[..n].iter().enumerate() {
                bits |= u32::from(x == id) << i;
            }
            bits &= !done;
            done |= bits;
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                group_of[i] = n_groups as u8;
                flags[n_groups] |= self.keys[i].tcp_flags();
            }
            targets[n_groups] = self.hits[first];
            n_groups += 1;
        }
        // One move per packet, straight into its group. (Moved out of an `Option`, as a
        // drain yields them, a packet went through a stack copy whose reload straddled two
        // of its stores: a store-forwarding stall per packet, a tenth of the MPLSoGRE
        // termination's cycles.)
        for (i, p) in batch.packets_mut().iter_mut().enumerate() {
            let g = usize::from(group_of[i]);
            self.groups[g].push(std::mem::replace(p, Packet::hollow()));
        }
        batch.drain();
        for g in 0..n_groups {
            let mut group = std::mem::take(&mut self.groups[g]);
            self.run_group(targets[g], &mut group, flags[g], false);
            debug_assert!(group.is_empty(), "a group's actions take all its packets");
            self.groups[g] = group;
        }
        for r in self.temp_flows.drain(..) {
            self.flows.remove(r);
        }
    }

    /// Updates the flow's statistics once for the group and runs its actions on it.
    /// `whole`: the group is the pass's whole batch, in order (see [`Self::execute_with`]).
    fn run_group(
        &mut self,
        target: Option<FlowRef>,
        group: &mut Batch,
        tcp_flags: u16,
        whole: bool,
    ) {
        let actions = match target.and_then(|r| self.flows.get_mut(r)) {
            Some(f) => {
                f.stats.packets += group.len() as u64;
                f.stats.bytes += group.bytes();
                f.stats.used_tsc = self.iter_tsc;
                f.stats.tcp_flags |= tcp_flags;
                Some(f.actions.clone())
            }
            None => None,
        };
        match actions {
            Some(a) => self.execute_with(&a, group, None, whole),
            // Missed and not installed: waiting for the slow path, or a drop the upcall
            // already counted.
            None => {
                self.deferred_gso |= self.pass_gso;
                for p in group.drain() {
                    if p.meta.deferred {
                        self.deferred_marked -= 1;
                        if self.running_deferred {
                            // Older than everything still waiting: back to the front.
                            self.redeferred.push(p);
                        } else {
                            self.deferred.push_back(p);
                        }
                    } else {
                        self.pool.free(p);
                    }
                }
            }
        }
    }

    /// Runs `actions` on every packet of `batch`, consuming the batch.
    fn execute(&mut self, actions: &[DpAction], batch: &mut Batch) {
        self.execute_with(actions, batch, None, false);
    }

    /// [`Self::execute`], with a truncation pending from earlier actions. `whole`: `batch` is
    /// the pass's whole batch in order, so its keys are still in `keys` (a recirculation may
    /// hand them to the next pass while nothing else than `ct()` without NAT ran).
    fn execute_with(
        &mut self,
        actions: &[DpAction],
        batch: &mut Batch,
        mut trunc: Option<u32>,
        whole: bool,
    ) {
        let last = actions.len().saturating_sub(1);
        // Whether `batch` is still the pass's batch with the headers its keys were made from.
        let mut pristine = whole;
        for (ai, a) in actions.iter().enumerate() {
            if batch.is_empty() {
                break;
            }
            let consume = ai == last;
            match a {
                DpAction::Output(port) => {
                    self.output(*port, batch, consume, trunc.take());
                }
                DpAction::Trunc(len) => trunc = Some(*len),
                DpAction::Userspace => self.stats.userspace_packets += batch.len() as u64,
                DpAction::Recirc(id) => self.recirculate(*id, batch, consume, pristine),
                DpAction::Ct(args) => pristine &= self.conntrack(args, batch),
                DpAction::CtClear => {
                    for p in batch.packets_mut() {
                        crate::ct::clear(p);
                    }
                }
                DpAction::TnlPop(port) => self.tnl_pop(*port, batch, consume),
                // Encapsulating a super-frame is never right: segment it first.
                DpAction::TnlPush(_) if self.pass_gso && has_gso(batch) => {
                    self.segment_and_execute(&actions[ai..], batch, trunc);
                    break;
                }
                DpAction::TnlPush(t) => {
                    self.stats.rewrite_errors +=
                        crate::rewrite::tnl_push_batch(batch.packets_mut(), t);
                }
                DpAction::Clone(sub) => {
                    let mut copy = self.copy_batch(batch, None);
                    self.execute(sub, &mut copy);
                    self.recycle(copy);
                }
                DpAction::Hash { sym, basis } => {
                    for p in batch.packets_mut() {
                        p.meta.dp_hash = crate::rewrite::dp_hash_l4(p, *sym, *basis);
                    }
                }
                header => {
                    self.stats.rewrite_errors +=
                        crate::rewrite::apply_batch(batch.packets_mut(), header);
                }
            }
            pristine &= matches!(a, DpAction::Ct(c) if c.nat.is_none());
        }
        if !batch.is_empty() {
            // The actions ended without handing the packets on: a drop.
            self.stats.action_drops += batch.len() as u64;
            self.pool.free_batch(batch);
        }
    }

    /// Replaces the super-frames of `batch` by their segments and runs `actions` on the
    /// result, [`MAX_BURST`] packets at a time; leaves `batch` empty. Slow path of a pass with
    /// super-frames.
    #[inline(never)]
    fn segment_and_execute(&mut self, actions: &[DpAction], batch: &mut Batch, trunc: Option<u32>) {
        let mut segs = std::mem::take(&mut self.segs);
        for p in batch.drain() {
            if p.meta.gso_size == 0 {
                segs.push(p);
                continue;
            }
            match TcpSuper::of(&p) {
                Ok(t) => {
                    let n = t.n_segments(&p);
                    for k in 0..n {
                        segs.push(t.segment(&p, k, &mut self.pool));
                    }
                    self.stats.gso_frames += 1;
                    self.stats.gso_segments += n as u64;
                }
                Err(_) => self.stats.gso_drops += 1,
            }
            self.pool.free(p);
        }
        #[allow(clippy::unwrap_or_default)]
        let mut b = self.spare.pop().unwrap_or_else(Batch::new);
        let mut rest = segs.drain(..);
        loop {
            for p in rest.by_ref().take(MAX_BURST) {
                b.push(p);
            }
            if b.is_empty() {
                break;
            }
            self.execute_with(actions, &mut b, trunc, false);
        }
        drop(rest);
        self.segs = segs;
        self.recycle(b);
    }

    /// Copies of a batch's packets (optionally truncated), in new pool buffers, with their
    /// metadata and tunnel metadata. A truncated copy of a super-frame is an ordinary packet.
    fn copy_batch(&mut self, batch: &Batch, trunc: Option<u32>) -> Batch {
        // Not `unwrap_or_default`: a default Batch is empty and unallocated (what
        // `mem::take` leaves behind for free), and would then grow by reallocations.
        #[allow(clippy::unwrap_or_default)]
        let mut out = self.spare.pop().unwrap_or_else(Batch::new);
        match trunc {
            None => {
                for p in batch.packets() {
                    out.push(self.pool.copy_of(p, p.len()));
                }
            }
            Some(t) => {
                for p in batch.packets() {
                    let mut c = self.pool.copy_of(p, t as usize);
                    if c.len() < p.len() {
                        c.meta.gso_size = 0;
                    }
                    out.push(c);
                }
            }
        }
        out
    }

    /// Keeps an emptied batch for the next copy (its packets, if any, go back to the pool).
    fn recycle(&mut self, mut b: Batch) {
        if !b.is_empty() {
            self.pool.free_batch(&mut b);
        }
        if self.spare.len() < SPARE_BATCHES {
            self.spare.push(b);
        }
    }

    /// Hands packets to `port`'s tx batch: the originals when this is the last action and
    /// nothing truncates, copies otherwise.
    fn output(&mut self, port: u32, batch: &mut Batch, consume: bool, trunc: Option<u32>) {
        if !matches!(self.txs.get(port as usize), Some(Some(_))) {
            // No such port: counted as a drop when the batch is freed.
            return;
        }
        let mut src = if consume && trunc.is_none() {
            std::mem::take(batch)
        } else {
            self.copy_batch(batch, trunc)
        };
        let Some(Some(tx)) = self.txs.get_mut(port as usize) else {
            return;
        };
        if self.pass_gso && !tx.tso && has_gso(&src) {
            send_segmented(tx, &mut src, &mut self.pool, &mut self.stats);
            if consume && trunc.is_none() {
                *batch = src;
            } else {
                self.recycle(src);
            }
            return;
        }
        if tx.batch.is_empty() {
            // Hand the whole group over: swap buffers instead of moving packets one by one.
            std::mem::swap(&mut tx.batch, &mut src);
            if tx.batch.is_full() {
                self.stats.tx_packets += tx.batch.len() as u64;
                self.stats.tx_batches += 1;
                tx.q.send(&mut tx.batch, &mut self.pool);
            }
            if consume && trunc.is_none() {
                *batch = src;
            } else {
                self.recycle(src);
            }
            return;
        }
        for p in src.drain() {
            tx.batch.push(p);
            if tx.batch.is_full() {
                self.stats.tx_packets += tx.batch.len() as u64;
                self.stats.tx_batches += 1;
                tx.q.send(&mut tx.batch, &mut self.pool);
            }
        }
        if consume && trunc.is_none() {
            *batch = src;
        } else {
            self.recycle(src);
        }
    }

    /// Queues packets for another pass with `recirc_id`.
    /// `ct(...)`: runs each packet of `batch` through the connection tracker, which sets its
    /// connection state and may translate it (NAT). A packet that is not IP is `+trk+inv`. IP
    /// fragments are held by the PMD's reassembler until their datagram is complete; then all
    /// its fragments go on (after the batch's other packets) with the state the first one got.
    ///
    /// Returns whether the batch holds the same packets in the same order (no fragments).
    fn conntrack(&mut self, args: &conntrack::CtArgs, batch: &mut Batch) -> bool {
        let now = conntrack::now_ms();
        let ct = self
            .conntrack
            .get_or_insert_with(|| std::sync::Arc::new(conntrack::Conntrack::new()));
        let writes = args.commit && (args.mark.is_some() || args.label.is_some());
        // A packet an earlier ct() of this zone tracked keeps what that one said, as a packet
        // keeps its reference to the connection in the kernel's datapath: unless this one
        // writes the mark or label, or translates, the connection is not even looked at.
        let keep = !writes && args.nat.is_none() && !args.force;
        // The packets tracked here (IP, not fragments): their places in the batch and
        // families; the others are not IP (`+inv`) or fragments, or their earlier state
        // stands (`ct_ml` has what a commit wrote for those rechecked).
        let mut idx = [0u8; MAX_BURST];
        let mut v6s = [false; MAX_BURST];
        let mut not_ip = 0u32;
        let mut frags = false;
        let mut pkts: [_; MAX_BURST] = std::array::from_fn(|_| conntrack::CtPacket {
            frame: &[],
            l3: 0,
            v6: false,
            frag_l4_len: None,
            verified: false,
            natted: false,
        });
        let mut n = 0;
        self.ct_ml.clear();
        for (i, p) in batch.packets().iter().enumerate().take(MAX_BURST) {
            let Some(v6) = crate::ct::ip_version(p) else {
                not_ip |= 1 << i;
                continue;
            };
            if crate::ct::maybe_fragment(p, v6) {
                frags = true;
                continue;
            }
            if keep && crate::ct::cached_ref(p, args.zone) {
                continue;
            }
            // Tracked by an earlier ct() of this zone: not again (see `Conntrack::recheck`).
            if let Some((conn_ref, orig)) = crate::ct::cached(p, args.zone, v6)
                && let Some((mark, label)) = ct.recheck(&self.ct_cache, conn_ref, &orig, args, now)
            {
                if writes {
                    self.ct_ml.push((i as u8, mark, label));
                }
                continue;
            }
            idx[n] = i as u8;
            v6s[n] = v6;
            pkts[n] = conntrack::CtPacket {
                frame: p.data(),
                l3: usize::from(p.meta.l3),
                v6,
                frag_l4_len: None,
                // An earlier ct() checked the headers (rewrites since keep them valid).
                verified: p.meta.ct_state != 0,
                natted: natted(p, args.zone),
            };
            n += 1;
        }
        let out = &mut self.ct_out[..n];
        ct.process_batch(&mut self.ct_cache, &pkts[..n], out, args, now);
        let pkts = batch.packets_mut();
        for ((&i, &v6), (md, nat)) in idx.iter().zip(&v6s).zip(self.ct_out[..n].iter()) {
            let p = &mut pkts[usize::from(i)];
            crate::ct::store(p, md);
            if let Some(rw) = nat
                && !crate::ct::apply_nat(p, rw, v6, &md.orig, true)
            {
                self.stats.rewrite_errors += 1;
            }
        }
        for &(i, mark, label) in &self.ct_ml {
            crate::ct::set_mark_label(&mut pkts[usize::from(i)], mark, label);
        }
        let mut bits = not_ip;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            self.ct_not_ip(&mut batch.packets_mut()[i], args.zone);
        }
        if batch.len() > MAX_BURST {
            frags |= self.ct_past_burst(args, batch, now);
        }
        self.stats.ct_packets += batch.len() as u64;
        if frags {
            self.ct_fragments(args, batch, now);
        }
        !frags
    }

    /// A packet that is not IP through `ct()`: `+trk+inv`, counted.
    fn ct_not_ip(&mut self, p: &mut Packet, zone: u16) {
        let md = conntrack::CtMeta {
            state: conntrack::state::TRK | conntrack::state::INV,
            zone,
            ..Default::default()
        };
        crate::ct::store(p, &md);
        self.stats.ct_not_ip += 1;
    }

    /// The packets of a `ct()` batch past a burst's worth (a batch that grew): one at a time.
    /// Returns whether there are fragments among them.
    #[cold]
    fn ct_past_burst(&mut self, args: &conntrack::CtArgs, batch: &mut Batch, now: u64) -> bool {
        let mut frags = false;
        for p in &mut batch.packets_mut()[MAX_BURST..] {
            match crate::ct::ip_version(p) {
                None => self.ct_not_ip(p, args.zone),
                Some(v6) if crate::ct::maybe_fragment(p, v6) => frags = true,
                Some(v6) => {
                    self.ct_one(args, p, v6, None, now);
                }
            }
        }
        frags
    }

    /// Tracks one packet (or the first fragment of a datagram, `frag_l4_len` its L4 length)
    /// and applies any NAT; returns its metadata and the rewrite, for a datagram's other
    /// fragments.
    fn ct_one(
        &mut self,
        args: &conntrack::CtArgs,
        p: &mut Packet,
        v6: bool,
        frag_l4_len: Option<usize>,
        now: u64,
    ) -> (conntrack::CtMeta, Option<conntrack::NatRewrite>) {
        let ct = self
            .conntrack
            .get_or_insert_with(|| std::sync::Arc::new(conntrack::Conntrack::new()));
        let mut md = conntrack::CtMeta::default();
        let pkt = conntrack::CtPacket {
            frame: p.data(),
            l3: usize::from(p.meta.l3),
            v6,
            frag_l4_len,
            // An earlier ct() checked the headers (rewrites since keep them valid).
            verified: p.meta.ct_state != 0,
            natted: natted(p, args.zone),
        };
        let nat = ct.process(&mut self.ct_cache, &pkt, &mut md, args, now);
        crate::ct::store(p, &md);
        if let Some(rw) = &nat
            && !crate::ct::apply_nat(p, rw, v6, &md.orig, true)
        {
            self.stats.rewrite_errors += 1;
        }
        (md, nat)
    }

    /// The fragments of a `ct()` batch: into the reassembler; the fragments of datagrams
    /// they complete come back at the end of the batch, tracked.
    #[inline(never)]
    fn ct_fragments(&mut self, args: &conntrack::CtArgs, batch: &mut Batch, now: u64) {
        let mut done = Vec::new();
        // Not `unwrap_or_default`: see `copy_batch`.
        #[allow(clippy::unwrap_or_default)]
        let mut keep = self.spare.pop().unwrap_or_else(Batch::new);
        for p in batch.drain() {
            // The first pass tracked everything else (NAT does not touch what this reads).
            let Some(v6) =
                crate::ct::ip_version(&p).filter(|&v6| crate::ct::maybe_fragment(&p, v6))
            else {
                keep.push(p);
                continue;
            };
            let l3 = usize::from(p.meta.l3);
            match self.reasm.push(p, l3, v6, args.zone, now) {
                conntrack::frag::Verdict::NotFragment(mut p, _) => {
                    self.ct_one(args, &mut p, v6, None, now);
                    keep.push(p);
                }
                conntrack::frag::Verdict::Held => self.stats.ct_frags_held += 1,
                conntrack::frag::Verdict::Complete(dg) => done.push(dg),
                conntrack::frag::Verdict::Drop(p, _) => {
                    self.stats.ct_frag_drops += 1;
                    self.pool.free(p);
                }
                conntrack::frag::Verdict::DropDatagram(ps, _) => {
                    for p in ps {
                        self.stats.ct_frag_drops += 1;
                        self.pool.free(p);
                    }
                }
            }
        }
        for dg in done {
            let mut frags = dg.frags.into_iter();
            let Some(mut first) = frags.next() else {
                continue;
            };
            let (md, nat) = self.ct_one(args, &mut first, dg.ipv6, Some(dg.l4_len), now);
            keep.push(first);
            for mut p in frags {
                crate::ct::store(&mut p, &md);
                if let Some(rw) = &nat
                    && !crate::ct::apply_nat(&mut p, rw, dg.ipv6, &md.orig, false)
                {
                    self.stats.rewrite_errors += 1;
                }
                keep.push(p);
            }
        }
        std::mem::swap(batch, &mut keep);
        self.recycle(keep);
    }

    /// `pristine`: `batch` is the pass's batch with the headers its keys were made from.
    fn recirculate(&mut self, id: u32, batch: &mut Batch, consume: bool, pristine: bool) {
        // Common case: the whole batch goes on, none of it too deep, with nothing queued
        // before it: its packets become the queue where they are (and, pristine, the next
        // pass takes their keys from this one's).
        if consume
            && self.recirc.is_empty()
            && batch
                .packets()
                .iter()
                .all(|p| p.meta.recirc_depth < MAX_RECIRC_DEPTH)
        {
            for p in batch.packets_mut() {
                p.meta.recirc_depth += 1;
                p.meta.recirc_id = id;
            }
            self.recirc_gso |= self.pass_gso;
            self.stats.recirculations += batch.len() as u64;
            self.keys_reusable = pristine.then_some(batch.len());
            batch.swap_packets(&mut self.recirc);
            return;
        }
        let mut src = if consume {
            std::mem::take(batch)
        } else {
            self.copy_batch(batch, None)
        };
        self.recirc_gso |= self.pass_gso;
        for mut p in src.drain() {
            if p.meta.recirc_depth >= MAX_RECIRC_DEPTH {
                self.stats.recirc_depth_drops += 1;
                self.pool.free(p);
                continue;
            }
            p.meta.recirc_depth += 1;
            p.meta.recirc_id = id;
            self.stats.recirculations += 1;
            self.recirc.push(p);
        }
        if consume {
            *batch = src;
        } else {
            self.recycle(src);
        }
    }

    /// `tnl_pop(port)`: decapsulates each packet as `port`'s tunnel kind says and queues it
    /// for another pass as received on `port`, with recirc_id 0; drops (counted by reason)
    /// what does not decapsulate.
    fn tnl_pop(&mut self, port: u32, batch: &mut Batch, consume: bool) {
        let kind = self.tunnel_kind(port);
        let mut src = if consume {
            std::mem::take(batch)
        } else {
            self.copy_batch(batch, None)
        };
        self.recirc_gso |= self.pass_gso;
        for mut p in src.drain() {
            if pop_one(&mut self.stats, &mut p, port, kind) {
                self.recirc.push(p);
            } else {
                self.pool.free(p);
            }
        }
        if consume {
            *batch = src;
        } else {
            self.recycle(src);
        }
    }

    /// Sends every non-empty tx batch.
    fn flush_tx(&mut self) {
        let t0 = self.stamp();
        for tx in self.txs.iter_mut().flatten() {
            if !tx.batch.is_empty() {
                self.stats.tx_packets += tx.batch.len() as u64;
                self.stats.tx_batches += 1;
                tx.q.send(&mut tx.batch, &mut self.pool);
            }
            tx.q.flush();
        }
        let t1 = self.stamp();
        self.add_stage(Stage::Tx, t0, t1);
    }

    /// Hashes the keys of the packets `bits` of a pass extracted without ([`Self::unhashed`]),
    /// for the EMC.
    #[inline(never)]
    fn hash_now(&mut self, batch: &mut Batch, mut bits: u32) {
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let p = &mut batch.packets_mut()[i];
            let h = pass_hash(self.keys[i].hash(0), p.meta.recirc_depth);
            p.meta.hash = h;
            self.hashes[i] = h;
        }
    }

    /// The TSC, when this iteration's stages are timed ([`STAGE_SAMPLE`]); 0 otherwise.
    #[inline(always)]
    fn stamp(&self) -> u64 {
        if self.timing { tsc::now() } else { 0 }
    }

    /// Counts stage `st`'s cycles from `t0` to `t1` ([`Self::stamp`]s), as an estimate for
    /// the iterations not timed.
    #[inline(always)]
    fn add_stage(&mut self, st: Stage, t0: u64, t1: u64) {
        if self.timing {
            self.stats.stage_cycles[st as usize] += (t1 - t0) * STAGE_SAMPLE;
        }
    }
}

/// Whether `batch` holds a TCP super-frame (asked only of batches of a pass whose rx batch
/// was marked to possibly hold one).
#[inline(never)]
fn has_gso(batch: &Batch) -> bool {
    batch.packets().iter().any(|p| p.meta.gso_size != 0)
}

/// Hands the packets of `src` to `tx`'s batch, each super-frame as its segments, sending the
/// batch each time it fills; leaves `src` empty. Super-frames that are not TCP over IP are
/// dropped (counted).
#[inline(never)]
fn send_segmented(tx: &mut TxSlot, src: &mut Batch, pool: &mut Pool, stats: &mut PmdStats) {
    fn put(tx: &mut TxSlot, p: Packet, pool: &mut Pool, stats: &mut PmdStats) {
        tx.batch.push(p);
        if tx.batch.is_full() {
            stats.tx_packets += tx.batch.len() as u64;
            stats.tx_batches += 1;
            tx.q.send(&mut tx.batch, pool);
        }
    }
    for p in src.drain() {
        if p.meta.gso_size == 0 {
            put(tx, p, pool, stats);
            continue;
        }
        match TcpSuper::of(&p) {
            Ok(t) => {
                let n = t.n_segments(&p);
                for k in 0..n {
                    let s = t.segment(&p, k, pool);
                    put(tx, s, pool, stats);
                }
                stats.gso_frames += 1;
                stats.gso_segments += n as u64;
            }
            Err(_) => stats.gso_drops += 1,
        }
        pool.free(p);
    }
}

/// A packet's hash in a pass: its key's, mixed with the recirculation depth.
#[inline(always)]
fn pass_hash(key_hash: u32, depth: u8) -> u32 {
    key_hash ^ u32::from(depth).wrapping_mul(0x9e37_79b9)
}

/// Writes the metadata words of `p`'s key (in_port, recirc_id, dp_hash, mark, packet type,
/// tunnel, connection) into `key`, clearing the rest: what a pass's extraction starts from.
#[inline(always)]
pub fn key_metadata(p: &Packet, key: &mut FlowKey) {
    key_metadata_with(p, key, true);
}

/// [`key_metadata`], with the connection's original tuple only if `ct_tuple` (see
/// [`crate::ct::to_key`]).
#[inline(always)]
fn key_metadata_with(p: &Packet, key: &mut FlowKey, ct_tuple: bool) {
    key.clear();
    key_metadata_add(p, key, ct_tuple);
}

/// [`key_metadata_with`] into a key that has no metadata words.
#[inline(always)]
fn key_metadata_add(p: &Packet, key: &mut FlowKey, ct_tuple: bool) {
    let m = &p.meta;
    key.set_word(0, meta_word(m.in_port, m.recirc_id));
    if !only_port_and_recirc(m) {
        key_metadata_more(p, key, ct_tuple);
    }
}

/// Whether a packet's metadata words are in_port and recirc_id alone (one test for the common
/// case).
#[inline(always)]
fn only_port_and_recirc(m: &PacketMeta) -> bool {
    (m.dp_hash | m.pkt_mark | m.packet_type) == 0 && m.tunnel == TnlMd::None && m.ct_state == 0
}

/// The rest of [`key_metadata_with`], for a packet that has more than in_port and recirc_id.
#[inline(never)]
fn key_metadata_more(p: &Packet, key: &mut FlowKey, ct_tuple: bool) {
    let m = &p.meta;
    if m.dp_hash != 0 {
        key.set_dp_hash(m.dp_hash);
    }
    if m.pkt_mark != 0 {
        key.set_pkt_mark(m.pkt_mark);
    }
    if m.packet_type != 0 {
        key.set_packet_type(m.packet_type);
    }
    if m.tunnel != TnlMd::None {
        crate::tunnel::md_to_key(p.tnl_md(), m.tunnel, key);
    }
    // After the tunnel words: the connection tuple's ports share a word with GENEVE options.
    if m.ct_state != 0 {
        crate::ct::to_key(p, key, ct_tuple);
    }
}

/// Decapsulates one packet for another pass as received on tunnel port `port` (recirc_id 0,
/// one level deeper), counting the pop; false when it is dropped (too deep, or `tnl_pop`
/// refused it, counted by reason). The one per-packet step of both the `tnl_pop` action and
/// the in-place decap fast path.
fn pop_one(stats: &mut PmdStats, p: &mut Packet, port: u32, kind: Option<TunnelKind>) -> bool {
    if p.meta.recirc_depth >= MAX_RECIRC_DEPTH {
        stats.recirc_depth_drops += 1;
        return false;
    }
    let popped = match kind {
        Some(k) => crate::tunnel::tnl_pop(p, k),
        None => Err(TnlPopDrop::BadPort),
    };
    if let Err(e) = popped {
        stats.tnl_pop_drops[e as usize] += 1;
        return false;
    }
    let m = &mut p.meta;
    m.in_port = port;
    m.recirc_id = 0;
    m.recirc_depth += 1;
    stats.tnl_pops += 1;
    true
}

/// Whether an earlier `ct()` in `zone` translated the packet.
#[inline]
fn natted(p: &Packet, zone: u16) -> bool {
    p.meta.ct_state & (conntrack::state::SNAT | conntrack::state::DNAT) != 0
        && p.meta.ct_zone == zone
}

/// Extracts packet `p`'s key into `k` (whose metadata is made), counts a malformed packet,
/// sets the packet's header offsets and hash, and returns the hash.
#[inline(always)]
fn extract_packet(stats: &mut PmdStats, p: &mut Packet, k: &mut FlowKey) -> u32 {
    let x = flow::extract(p.data(), k);
    let h = pass_hash(x.hash, p.meta.recirc_depth);
    take_extracted(stats, p, &x, h);
    h
}

/// [`extract_packet`] without the hash (0).
#[inline(always)]
fn extract_packet_unhashed(stats: &mut PmdStats, p: &mut Packet, k: &mut FlowKey) {
    let x = flow::extract_unhashed(p.data(), k);
    take_extracted(stats, p, &x, 0);
}

/// Counts a malformed packet and sets the packet's header offsets and `hash`.
#[inline(always)]
fn take_extracted(stats: &mut PmdStats, p: &mut Packet, x: &flow::Extracted, hash: u32) {
    if let Some(m) = x.malformed {
        stats.malformed[m as usize] += 1;
    }
    p.meta.hash = hash;
    p.meta.l2_5 = x.layers.l2_5;
    p.meta.l3 = x.layers.l3;
    p.meta.l4 = x.layers.l4;
}

/// Word 0 of a key: in_port and recirc_id, in network byte order.
#[inline(always)]
fn meta_word(in_port: u32, recirc_id: u32) -> u64 {
    // The two fields' bytes in memory order, as two 32-bit halves of the word.
    let (a, b) = (
        u64::from(u32::from_ne_bytes(in_port.to_be_bytes())),
        u64::from(u32::from_ne_bytes(recirc_id.to_be_bytes())),
    );
    if cfg!(target_endian = "little") {
        a | b << 32
    } else {
        a << 32 | b
    }
}

/// A stable 128-bit id for a megaflow, from its masked key and mask (two CRC32C lanes per half;
/// unique enough to name flows in dumps, not a security property).
pub fn ufid_of(key: &FlowKey, mask: &Mask) -> u128 {
    let mut h = [0u32; 4];
    for (lane, basis) in h
        .iter_mut()
        .zip([0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344])
    {
        *lane = key.hash_masked(mask, basis) ^ mask.hash(basis.rotate_left(7));
    }
    (u128::from(h[0]) << 96)
        | (u128::from(h[1]) << 64)
        | (u128::from(h[2]) << 32)
        | u128::from(h[3])
}
