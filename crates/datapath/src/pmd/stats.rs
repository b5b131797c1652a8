//! A PMD's counters and its cycle accounting: [`PmdStats`] (OVS's `pmd-stats-show` and
//! `pmd-perf-show` figures, one set per thread, summed on read) and the per-stage TSC split
//! ([`Stage`], `dpif-netdev/pmd-stage-show`).
//!
//! Each stage of the pass adds its cycles under its [`Stage`]; the lookup tiers count under
//! the stage whose place in the pass they take (see the module documentation of
//! [`crate::pmd`]). Counting is a few additions per batch: no strings, no formatting, no
//! shared memory on the packet path.

use crate::tsc;
use crate::tunnel::N_TNL_POP_DROPS;

use super::Pmd;

/// Stages whose cycles are counted, in pipeline order, each a function of the pass (the
/// lookup tiers count under the stage they run in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Stage {
    /// The rx burst (`Pmd::poll_once`).
    Rx,
    /// Key extraction (`extract.rs`), with the simple match, and the linear match on a port
    /// without decap megaflows, in its loop.
    Extract,
    /// The decap fast path's lookup and the EMC (`tiers/decap.rs`, `tiers/emc.rs`).
    Emc,
    /// The megaflow classifier: the linear match or dpcls (`tiers/linear.rs`,
    /// `tiers/dpcls.rs`).
    Megaflow,
    /// The slow path (`upcall.rs`), timed whenever it runs.
    Upcall,
    /// Grouping by flow and the actions (`groups.rs`, `execute.rs`), and a decap fast path's
    /// pop in place.
    Actions,
    /// Sending the tx batches (`output.rs`).
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

    /// The stage's name in `dpif-netdev/pmd-stage-show` and in bench reports.
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
/// `Pmd::input` around extract, EMC, megaflow and actions, one after tx. Its cost per packet
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
    /// Iterations after which the thread slept (`pmd-maxsleep`) or waited for input
    /// (`pmd-idle-wait`).
    pub sleep_iterations: u64,
    /// TSC cycles the thread spent sleeping or waiting (in neither busy nor idle cycles).
    pub sleep_cycles: u64,
    /// Packets received from ports.
    pub rx_packets: u64,
    /// Packets dropped by a megaflow's explicit drop action, per translation failure
    /// (indexed by `XlateDrop as usize`).
    pub xlate_drops: [u64; crate::xlate_drop::N_XLATE_DROPS],
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
    /// matched without the EMC or the classifier; see `pmd/tiers/decap.rs`).
    pub decap_hits: u64,
    /// Packets the simple match found (no key extraction, hash or EMC lookup).
    pub simple_hits: u64,
    /// Subtables probed (for lookups per megaflow hit).
    pub subtable_lookups: u64,
    /// Upcalls that installed or executed a flow.
    pub upcalls: u64,
    /// Packets dropped at the upcall: handler said drop, or the deferred queue was full.
    pub lost_upcalls: u64,
    /// Upcalls whose megaflow was not installed because the PMD held `flow-limit` of them
    /// (the packet still went through its actions).
    pub flow_limit_hits: u64,
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
    /// Packets handed to tx queues.
    pub tx_packets: u64,
    /// Tx bursts the packets went out in (one per `send` on a tx queue).
    pub tx_batches: u64,
    /// Header rewrites that did not apply (packet lacked the header).
    pub rewrite_errors: u64,
    /// TCP super-frames segmented in software (for a port without TSO, or a `tnl_push`).
    pub gso_frames: u64,
    /// Segments made of the `gso_frames`.
    pub gso_segments: u64,
    /// Super-frames dropped because they could not be segmented or encapsulated whole, all
    /// reasons.
    pub gso_drops: u64,
    /// The `gso_drops` by reason, indexed by [`GsoError::index`](crate::gso::GsoError::index).
    pub gso_drop_reasons: [u64; 4],
    /// Super-frames a `tnl_push` encapsulated whole ([`crate::gso_tunnel`]).
    pub gso_encapsulated: u64,
    /// TSC cycles per stage, indexed by [`Stage`].
    pub stage_cycles: [u64; 7],
    /// Packets whose headers could not be parsed completely, per reason (indexed by
    /// `flow::Malformed as usize`). They are still switched on the fields that parsed, as in
    /// OVS; these counts say how many.
    pub malformed: [u64; N_MALFORMED],
    /// Packets a meter's band dropped (`meter()`; per meter and band in the meter's counters).
    pub meter_drops: u64,
}

/// Number of [`flow::Malformed`] reasons.
pub const N_MALFORMED: usize = flow::Malformed::ALL.len();

impl PmdStats {
    /// Passes through the datapath: received packets, recirculations and tunnel pops.
    pub fn passes(&self) -> u64 {
        self.rx_packets + self.recirculations + self.tnl_pops
    }

    /// Counts a super-frame dropped for reason `e`.
    #[inline(never)]
    pub fn count_gso_drop(&mut self, e: crate::gso::GsoError) {
        self.gso_drops += 1;
        self.gso_drop_reasons[e.index()] += 1;
    }

    /// Packets `tnl_pop` dropped, all reasons.
    pub fn tnl_pop_dropped(&self) -> u64 {
        self.tnl_pop_drops.iter().sum()
    }

    /// Every packet dropped, by reason, under the one set of names the metrics endpoint and
    /// `flowpath top` show: the reasons of `pmd-drop-show`, the reassembly and segmentation
    /// drops, `tnl_pop`'s by reason, then translation failures by OVS's counter names.
    pub fn drops(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        [
            ("upcall_lost", self.lost_upcalls),
            ("recirc_depth_exceeded", self.recirc_depth_drops),
            ("no_output_action", self.action_drops),
            ("meter_band", self.meter_drops),
            ("conntrack_fragment", self.ct_frag_drops),
        ]
        .into_iter()
        .chain(
            crate::gso::GsoError::ALL
                .iter()
                .zip(self.gso_drop_reasons)
                .map(|(e, n)| (e.name(), n)),
        )
        .chain(
            crate::tunnel::TnlPopDrop::ALL
                .iter()
                .zip(self.tnl_pop_drops)
                .map(|(d, n)| (d.name(), n)),
        )
        .chain(
            crate::xlate_drop::XlateDrop::ALL
                .iter()
                .zip(self.xlate_drops)
                .map(|(d, n)| (d.counter(), n)),
        )
    }
}

impl core::ops::AddAssign for PmdStats {
    /// Sums counters, e.g. over PMD threads.
    fn add_assign(&mut self, o: PmdStats) {
        self.iterations += o.iterations;
        self.busy_iterations += o.busy_iterations;
        self.busy_cycles += o.busy_cycles;
        self.idle_cycles += o.idle_cycles;
        self.sleep_iterations += o.sleep_iterations;
        self.sleep_cycles += o.sleep_cycles;
        self.rx_packets += o.rx_packets;
        for (a, b) in self.xlate_drops.iter_mut().zip(o.xlate_drops) {
            *a += b;
        }
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
        self.flow_limit_hits += o.flow_limit_hits;
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
        for (a, b) in self.gso_drop_reasons.iter_mut().zip(o.gso_drop_reasons) {
            *a += b;
        }
        self.gso_encapsulated += o.gso_encapsulated;
        for (a, b) in self.stage_cycles.iter_mut().zip(o.stage_cycles) {
            *a += b;
        }
        for (a, b) in self.malformed.iter_mut().zip(o.malformed) {
            *a += b;
        }
        self.meter_drops += o.meter_drops;
    }
}

impl Pmd {
    /// The TSC, when this iteration's stages are timed ([`STAGE_SAMPLE`]); 0 otherwise.
    #[inline(always)]
    pub(super) fn stamp(&self) -> u64 {
        if self.timing { tsc::now() } else { 0 }
    }

    /// Counts stage `st`'s cycles from `t0` to `t1` ([`Self::stamp`]s), as an estimate for
    /// the iterations not timed.
    #[inline(always)]
    pub(super) fn add_stage(&mut self, st: Stage, t0: u64, t1: u64) {
        if self.timing {
            self.stats.stage_cycles[st as usize] += (t1 - t0) * STAGE_SAMPLE;
        }
    }

    /// Counts `n` packets a cache or fast path found towards the upcall budget's protection
    /// (`protecting`): waiting misses run again do not count, they are the slow path's.
    #[inline(always)]
    pub(super) fn count_cached(&mut self, n: u64) {
        if !self.running_deferred {
            self.hits_this_iter += n;
        }
    }
}
