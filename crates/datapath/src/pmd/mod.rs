//! A poll-mode driver (PMD) thread's datapath: the thread's state ([`Pmd`]), its loop
//! ([`Pmd::poll_once`]) and the commands the main thread sends it ([`PmdCmd`]).
//!
//! Everything here is owned by one thread: caches, classifiers, flow table, buffer pool, tx
//! queues. The main thread talks to it only through [`PmdCmd`] messages, which the PMD drains
//! between iterations; so the per-packet path takes no lock and shares no written memory.
//!
//! The packet path is a list of stages, each a function over the batch in a file of its own
//! (as VPP's graph nodes, or OVS's `dp_netdev_input__` and the functions it calls), each with
//! its counters in [`PmdStats`] and its cycles under a [`Stage`]. One iteration, per polled rx
//! queue:
//!
//! | stage | what it does | file | cycles under |
//! |---|---|---|---|
//! | rx | a burst of up to 32 packets, copied into pool buffers by the port | `mod.rs` | `rx` |
//! | extract | each packet's key and hash, after the metadata words it carries (in_port, recirc_id, packet type, tunnel metadata, connection) | `extract.rs` | `extract` |
//! | lookup | the tiers in order, each on what the ones before did not find: simple match, decap fast path, EMC, linear match, dpcls | `tiers/` | `extract`, `emc`, `megaflow` |
//! | upcall | the slow path for what is still missed, within a budget; misses over it wait | `upcall.rs` | `upcall` |
//! | grouping | packets grouped by megaflow, in arrival order; each group's statistics once | `groups.rs` | `actions` |
//! | actions | each group's actions on the whole group (`ct()`: `ct.rs`; `recirc` and `tnl_pop`: `recirc.rs`) | `execute.rs` | `actions` |
//! | tx | outputs into per-port tx batches, sent when full and at the end of the burst | `output.rs` | `tx` |
//!
//! `Pmd::input` (`input.rs`) runs one pass of a batch through extract, lookup, upcall,
//! grouping and actions; its body is the list of stages and tiers. Recirculated and
//! decapsulated (`tnl_pop`) packets run another pass in the same iteration (depth limit
//! [`MAX_RECIRC_DEPTH`]), each run of consecutive packets of one in_port as a batch
//! (`recirc.rs`). A batch just received on a tunnel's underlay port is first tried by the
//! decap fast path with no extraction at all (`tiers/decap.rs`). Megaflow install, removal
//! and dumps, and the fast paths' lists that follow them, are in `flows.rs`; the counters and
//! the stage timing in `stats.rs`.
//!
//! # TCP super-frames
//! A batch an rx queue marked ([`Batch::mark_gso`]) may hold TCP super-frames (packets with
//! `gso_size > 0`, see [`crate::gso`]); the pass remembers the mark (`pass_gso`), and so do the
//! packets it sends to recirculation or to the deferred queue. Only in such passes, an output
//! to a port whose tx queue does not segment ([`TxQueue::tso`]) and
//! a `tnl_push` look for super-frames, and replace each by its segments: the output pushes them
//! into the port's tx batch, sent each time it fills; `tnl_push` runs itself and the rest of
//! the actions on the segments a burst ([`MAX_BURST`]) at a time. Ordinary traffic pays one
//! test per batch.

mod check_pkt_len;
mod ct;
mod execute;
mod extract;
mod flows;
mod groups;
mod input;
mod lb_output;
mod output;
mod recirc;
mod stats;
mod tiers;
mod upcall;

use rustix::event::{PollFd, PollFlags};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender};

use flow::{FlowKey, Match};

use crate::actions::DpAction;
use crate::emc::Emc;
use crate::flow_table::{FlowRef, FlowTable, Megaflow};
use crate::packet::{Batch, MAX_BURST, Packet, Pool};
use crate::port::{RxQueue, TxQueue};
use crate::tsc;
use crate::tunnel::TunnelKind;
use crate::tx_gso::TxGsoStats;

pub use extract::key_metadata;
pub use flows::{FlowDump, ufid_of};
pub use recirc::MAX_RECIRC_DEPTH;
pub use stats::{N_MALFORMED, PmdStats, STAGE_SAMPLE, STAGE_TSC_READS_PER_BATCH, Stage};
pub use upcall::{
    DEFAULT_UPCALL_SHARE_PCT, DEFER_MAX, DEFER_PER_PORT, DropUpcalls, PacketOut, UPCALL_BUDGET,
    UpcallHandler, UpcallResult,
};

use execute::SPARE_BATCHES;
use output::TxSlot;
use tiers::Classifiers;

/// EMC slots checked for dead entries per housekeeping round (once a second): the whole cache
/// in about a minute at most per 8192 entries / 256.
const EMC_SWEEP_PER_ROUND: usize = 256;

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
    /// Take these settings (all but `core_id`, which a running thread keeps): the run-time
    /// knobs `emc-insert-inv-prob`, `flow-limit`, `max-idle` and the upcall share.
    SetConfig(PmdConfig),
    /// The polled queues as (port number, queue id, cycles), in poll order, and the busy
    /// cycles since they were assigned: what `pmd-rxq-show` and the rx queue scheduling read.
    RxqLoad(Sender<RxqLoad>),
    /// Stop polling every rx queue and hand them over, with their measured cycles (the first
    /// half of an rx queue reassignment).
    TakeRxqs(Sender<Vec<PolledRxq>>),
    /// Stop polling the queues named (port number, queue id) and hand them over with their
    /// measured cycles; the others stay, so only the moved queues pause.
    TakeRxqsOf(Vec<(u32, usize)>, Sender<Vec<PolledRxq>>),
    /// Start polling these rx queues (their cycle counts start again from zero).
    AddRxqs(Vec<PolledRxq>),
    /// A port joined the datapath: its tx queue for this PMD, and the tunnel it terminates
    /// if it is a tunnel port.
    AddTxq(u32, Box<dyn TxQueue>, Option<TunnelKind>, Arc<TxGsoStats>),
    /// A port leaves: stop polling it, flush and drop its tx queue, remove the megaflows of
    /// its packets; replies once done, so the port can be closed.
    RemovePort(u32, Sender<RetiredQueues>),
    /// Replace the fragment reassembler's settings (`dpctl/ipf-set-*`).
    SetFragConfig(conntrack::frag::FragConfig),
    /// The reassembler's status, with the datagrams waiting if asked (`dpctl/ipf-get-status`).
    FragStatus(bool, Sender<conntrack::frag::FragStatus>),
    /// Set (`Some`) or remove meter N; replies once done.
    SetMeter(
        u32,
        Option<std::sync::Arc<crate::meter::DpMeter>>,
        Sender<()>,
    ),
    /// This PMD's counters of meter N.
    MeterCounters(u32, Sender<Option<crate::meter::MeterCounters>>),
    /// Set (`Some`) or remove bond N's buckets (`lb_output(N)`); replies once done.
    SetBond(
        u32,
        Option<std::sync::Arc<crate::bond::BucketMap>>,
        Sender<()>,
    ),
    /// The bytes this PMD sent through each bucket of bond N.
    BondBytes(u32, Sender<Option<Box<[u64; crate::bond::BUCKETS]>>>),
    /// Run a packet the slow path made (an OpenFlow packet-out, a resumed continuation)
    /// through the datapath as if received on its metadata's `in_port`, with its
    /// `recirc_id`: the slow path froze what it must do under that id. Replies once the
    /// packet's actions ran.
    Execute(Box<Packet>, Sender<()>),
    /// Run these actions, which the slow path translated already (a packet-out of a bundle,
    /// translated where it stood in the commit), on a packet it made. Replies once they ran.
    ExecuteActions(Box<Packet>, Vec<DpAction>, Sender<()>),
}

/// The queues of a port a PMD stopped using ([`PmdCmd::RemovePort`]'s reply), for the
/// caller to close: closing a kernel socket can take tens of milliseconds (an AF_PACKET
/// socket's close waits for the kernel's network RCU grace period), and a PMD closing it
/// would forward nothing on any other port meanwhile.
pub struct RetiredQueues {
    /// The port's rx queues this PMD polled.
    pub rxqs: Vec<Box<dyn RxQueue>>,
    /// Its tx queue of this PMD, once what was batched on it was sent.
    pub txq: Option<Box<dyn TxQueue>>,
}

/// A PMD's rx queues as (port number, queue id, cycles since assigned) in poll order, and its
/// busy cycles since they were assigned ([`PmdCmd::RxqLoad`]).
pub type RxqLoad = (Vec<(u32, usize, u64)>, u64);

/// A polled rx queue.
pub struct PolledRxq {
    /// The datapath port the queue belongs to (the received packets' `in_port`).
    pub port_no: u32,
    /// The queue's index within its port.
    pub queue_id: usize,
    /// The queue itself, polled for rx bursts.
    pub rxq: Box<dyn RxQueue>,
    /// Cycles spent on this queue's packets since it was assigned to its PMD (for
    /// `pmd-rxq-show` and cycle-based assignment).
    pub cycles: u64,
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
    /// Its settings; `emc_insert_inv_prob` follows `SetEmcInsertInvProb` commands.
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
    /// The flows this batch's upcalls installed or went through, with the length of the packet
    /// that missed: that packet counts for the rules its translation went through, not for the
    /// megaflow (as in OVS, a flow's counters start with the packets that hit it).
    upcalled: Vec<(FlowRef, u64)>,
    /// The current pass's batch may hold TCP super-frames (its rx queue marked it).
    pass_gso: bool,
    /// The recirculation queue, or the deferred queue, may hold super-frames.
    recirc_gso: bool,
    deferred_gso: bool,
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
    /// ran on it, which makes a translated packet's key again), was queued for recirculation
    /// as it was: the batch's length.
    /// The next pass, if it is that batch, takes its keys from `keys` ([`Self::input`]).
    keys_reusable: Option<usize>,
    /// Those keys hold no packet field but the TCP flags (`PassKeys::Simple`): the next pass
    /// finds the batch by the simple match or extracts it whole.
    keys_simple: bool,
    /// What the keys of the pass being run hold.
    pass_keys: extract::PassKeys,
    /// The megaflow every packet of that batch was found in, for the next pass's metadata
    /// match (`tiers/recirc_meta.rs`).
    keys_flow: Option<FlowRef>,
    /// The TCP flags of that batch's keys, which its next pass's keys have too.
    keys_tcp_flags: u16,
    /// Set by the metadata match when it found every packet of the batch in one megaflow by
    /// its metadata alone: that megaflow, whose actions the pass runs on the batch as it is.
    meta_whole: Option<FlowRef>,
    /// What the metadata match of a recirculated batch compares for a pair of megaflows (the
    /// last pair it met).
    meta_split: Option<tiers::MetaSplit>,
    /// Installed megaflows whose mask looks at a connection's original tuple: while there is
    /// none, keys are made without it ([`crate::ct::to_key`]).
    ct_tuple_flows: usize,
    /// IP fragments waiting for the rest of their datagram before `ct()` (per PMD: a
    /// datagram's fragments arrive on one rx queue, as RSS hashes them by addresses).
    reasm: conntrack::frag::Reassembler<Packet>,
    /// The meters' buckets and counters of this PMD (`meter()`).
    meters: crate::meter::PmdMeters,
    /// The bonds' buckets and counters of this PMD (`lb_output()`).
    bonds: crate::bond::PmdBonds,
    /// Where `userspace` actions send their copies for the slow path.
    upcall_queue: crate::upcall_queue::UpcallProducer,
}

impl Pmd {
    /// A PMD with no queues.
    pub fn new(config: PmdConfig, upcall: Box<dyn UpcallHandler>) -> Pmd {
        let mut emc = Emc::new();
        emc.set_insert_inv_prob(config.emc_insert_inv_prob);
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
            max_idle_tsc: max_idle_tsc(config.max_idle_ms),
            next_housekeeping: 0,
            upcalls_this_iter: 0,
            temp_flows: Vec::new(),
            upcalled: Vec::new(),
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
            conntrack: None,
            ct_cache: conntrack::CtCache::new(),
            ct_out: vec![(conntrack::CtMeta::default(), None); MAX_BURST],
            ct_ml: Vec::with_capacity(MAX_BURST),
            ct_tuple_flows: 0,
            keys_reusable: None,
            keys_simple: false,
            pass_keys: extract::PassKeys::Full,
            keys_flow: None,
            keys_tcp_flags: 0,
            meta_whole: None,
            meta_split: None,
            reasm: conntrack::frag::Reassembler::new(conntrack::frag::FragConfig::default()),
            meters: crate::meter::PmdMeters::default(),
            bonds: crate::bond::PmdBonds::default(),
            upcall_queue: crate::upcall_queue::UpcallQueue::new().1,
        }
    }

    /// The ring of packets this PMD's `userspace` actions send to the slow path.
    pub fn upcall_queue(&self) -> std::sync::Arc<crate::upcall_queue::UpcallQueue> {
        self.upcall_queue.queue().clone()
    }

    /// Sends `userspace` actions' packets into `p`'s ring, one a PMD that went away used (its
    /// reader knows it already), instead of the ring it was made with.
    pub(crate) fn set_upcall_producer(&mut self, p: crate::upcall_queue::UpcallProducer) {
        self.upcall_queue = p;
    }

    /// The PMD is done: its ring's writing end, for a PMD that starts later.
    pub(crate) fn into_upcall_producer(self) -> crate::upcall_queue::UpcallProducer {
        self.upcall_queue
    }

    /// Runs one packet of the slow path's through the datapath ([`PmdCmd::Execute`]): its
    /// translation is asked for this packet alone and its actions run without a megaflow
    /// being installed (as OVS executes a packet-out), so that the packet counts for the
    /// rules it goes through, every time; what it recirculates to goes the usual way.
    pub fn execute_packet(&mut self, p: &Packet) {
        let (mut b, key) = self.own_copy(p);
        match self.upcall.upcall(&key, &b.packets()[0]) {
            UpcallResult::Install {
                compiled,
                packet_outs,
                ..
            } => {
                for po in packet_outs {
                    let mut pb = Batch::new();
                    pb.push(self.pool.packet_from(&po.frame, po.in_port));
                    self.execute(&po.actions, &mut pb);
                }
                self.execute(&compiled, &mut b);
            }
            UpcallResult::Drop => self.pool.free_batch(&mut b),
        }
        self.run_recirc();
        self.flush_tx();
    }

    /// Runs `actions`, translated by the slow path, on a packet of its own
    /// ([`PmdCmd::ExecuteActions`]); what they recirculate to goes the usual way.
    pub fn execute_packet_actions(&mut self, p: &Packet, actions: &[DpAction]) {
        let (mut b, _) = self.own_copy(p);
        self.execute(actions, &mut b);
        self.run_recirc();
        self.flush_tx();
    }

    /// A copy of `p` in the PMD's pool, as a batch of one, with its key (extracted as if
    /// received).
    fn own_copy(&mut self, p: &Packet) -> (Batch, FlowKey) {
        let mut q = self.pool.packet_from(p.data(), p.meta.in_port);
        q.copy_meta_from(p);
        let mut key = FlowKey::new();
        extract::key_metadata(&q, &mut key);
        extract::extract_packet(&mut self.stats, &mut q, &mut key);
        let mut b = Batch::new();
        b.push(q);
        (b, key)
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

    /// Forgets port `no`: its rx queues, its tx queue (after sending what is batched) and the
    /// megaflows of its input classifier. The queues are returned, not closed here.
    pub fn remove_port(&mut self, no: u32) -> RetiredQueues {
        let (gone, kept) = std::mem::take(&mut self.rxqs)
            .into_iter()
            .partition(|q| q.port_no == no);
        self.rxqs = kept;
        let rxqs = gone.into_iter().map(|q: PolledRxq| q.rxq).collect();
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
        let txq = self
            .txs
            .get_mut(no as usize)
            .and_then(Option::take)
            .map(output::TxSlot::into_queue);
        let refs: Vec<FlowRef> = self
            .flows
            .iter()
            .filter(|(_, f)| f.key.in_port() == no)
            .map(|(r, _)| r)
            .collect();
        for r in refs {
            self.remove_ref(r);
        }
        RetiredQueues { rxqs, txq }
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
            PmdCmd::SetConfig(cfg) => self.set_config(cfg),
            PmdCmd::RxqLoad(reply) => {
                let qs = self.rxqs.iter();
                let qs = qs.map(|q| (q.port_no, q.queue_id, q.cycles)).collect();
                let _ = reply.send((qs, self.rxq_busy));
            }
            PmdCmd::TakeRxqs(reply) => {
                self.flush_tx();
                self.rxq_busy = 0;
                let _ = reply.send(std::mem::take(&mut self.rxqs));
            }
            PmdCmd::TakeRxqsOf(which, reply) => {
                self.flush_tx();
                self.rxq_busy = 0;
                let (gone, kept) = std::mem::take(&mut self.rxqs)
                    .into_iter()
                    .partition(|q| which.contains(&(q.port_no, q.queue_id)));
                self.rxqs = kept;
                let _ = reply.send(gone);
            }
            PmdCmd::AddRxqs(qs) => {
                self.rxq_busy = 0;
                for q in qs {
                    self.add_rxq(q);
                }
            }
            PmdCmd::AddTxq(no, q, tunnel, gso) => self.add_port_txq_counted(no, q, tunnel, gso),
            PmdCmd::RemovePort(no, reply) => {
                let _ = reply.send(self.remove_port(no));
            }
            PmdCmd::SetFragConfig(cfg) => self.reasm.set_config(cfg),
            PmdCmd::FragStatus(lists, reply) => {
                let _ = reply.send(self.reasm.status(lists));
            }
            PmdCmd::SetMeter(id, m, reply) => {
                self.meters.set(id, m);
                let _ = reply.send(());
            }
            PmdCmd::SetBond(id, m, reply) => {
                self.bonds.set(id, m);
                let _ = reply.send(());
            }
            PmdCmd::BondBytes(id, reply) => {
                let _ = reply.send(self.bonds.bytes(id));
            }
            PmdCmd::MeterCounters(id, reply) => {
                let _ = reply.send(self.meters.counters(id));
            }
            PmdCmd::Execute(p, reply) => {
                self.execute_packet(&p);
                let _ = reply.send(());
            }
            PmdCmd::ExecuteActions(p, actions, reply) => {
                self.execute_packet_actions(&p, &actions);
                let _ = reply.send(());
            }
        }
    }

    /// Takes `cfg`'s run-time settings (not its `core_id`): the EMC's insertion probability,
    /// the flow limit and idle time (what is over them goes at the next housekeeping) and the
    /// upcall share.
    pub fn set_config(&mut self, cfg: PmdConfig) {
        self.config = PmdConfig {
            core_id: self.config.core_id,
            ..cfg
        };
        self.emc.set_insert_inv_prob(cfg.emc_insert_inv_prob);
        self.max_idle_tsc = max_idle_tsc(cfg.max_idle_ms);
    }

    /// Drains pending commands without blocking.
    pub fn handle_pending(&mut self, rx: &Receiver<PmdCmd>) {
        while let Ok(cmd) = rx.try_recv() {
            self.handle(cmd);
        }
    }

    /// Counts a sleep or a wait of the thread after an iteration, of `cycles` TSC cycles.
    pub fn count_sleep(&mut self, cycles: u64) {
        self.stats.sleep_iterations += 1;
        self.stats.sleep_cycles += cycles;
    }

    /// Whether the thread may block until an rx queue has something (`pmd-idle-wait`):
    /// nothing of the PMD's own waits (misses for the slow path, recirculations) and every rx
    /// queue has a descriptor to wait on ([`crate::port::RxQueue::wait_fd`]), which `fds`
    /// gets. Returns the TSC by which the PMD must poll again in any case (its housekeeping).
    pub fn wait_fds<'a>(&'a self, fds: &mut Vec<PollFd<'a>>) -> Option<u64> {
        fds.clear();
        if !self.deferred.is_empty() || !self.redeferred.is_empty() || !self.recirc.is_empty() {
            return None;
        }
        for q in &self.rxqs {
            fds.push(PollFd::from_borrowed_fd(q.rxq.wait_fd()?, PollFlags::IN));
        }
        Some(self.next_housekeeping)
    }

    /// Whether every rx queue's empty poll is a system call
    /// ([`crate::port::RxQueue::empty_poll_is_syscall`]).
    pub fn polls_by_syscall(&self) -> bool {
        !self.rxqs.is_empty() && self.rxqs.iter().all(|q| q.rxq.empty_poll_is_syscall())
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
            self.input_rx(&mut batch, in_port);
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

    /// Once a second: re-rank subtables by hits, expire idle megaflows.
    pub(super) fn housekeeping(&mut self, now: u64) {
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
            // Over the flow limit (it was lowered at run time), flows go sooner, as OVS's
            // revalidators do it: idle for 100 ms, and every one past twice the limit.
            let n = self.flows.len();
            let (max_idle, kill_all) = if n > self.config.flow_limit {
                let fast = hz / 10;
                let idle = if self.max_idle_tsc == 0 {
                    fast
                } else {
                    self.max_idle_tsc.min(fast)
                };
                (idle, n > self.config.flow_limit.saturating_mul(2))
            } else {
                (self.max_idle_tsc, false)
            };
            if max_idle > 0 {
                // A flow that never saw a packet is idle since its install.
                let idle: Vec<FlowRef> = self
                    .flows
                    .iter()
                    .filter(|(_, f)| {
                        let last = f.stats.used_tsc.max(f.installed_tsc);
                        f.expires && (kill_all || now.saturating_sub(last) > max_idle)
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

    /// Checks that no packet the PMD keeps past a burst is lent (the lending is about to end).
    #[cfg(debug_assertions)]
    pub(super) fn check_nothing_lent(&self) {
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
}

/// `max-idle` in TSC ticks (0 keeps flows until removed).
fn max_idle_tsc(ms: u64) -> u64 {
    ms.saturating_mul(tsc::hz() / 1000)
}
