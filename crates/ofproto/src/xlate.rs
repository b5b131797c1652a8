//! Translation: a packet's flow through a bridge's OpenFlow tables, into datapath actions and
//! the megaflow mask (the bits the decision depended on). OVS's `ofproto-dpif-xlate.c` in
//! spirit: the flow is modified as actions run, and the changes reach the datapath as `set`,
//! `push_*` and `pop_*` actions "committed" just before each output, comparing the flow with
//! the packet as the datapath has it so far (the *base*).
//!
//! Conntrack (`ct(...)`) is OVS's `compose_conntrack_action`: pending changes are committed,
//! the nested `exec(...)` actions give the datapath `ct`'s `mark=`/`label=` (the bits they
//! wrote), `nat(...)` and `alg=` its `nat`/`helper=`. With `table=N` the pipeline *forks*: the
//! state the rest of the pipeline needs is frozen under a recirculation id ([`crate::recirc`]),
//! the datapath gets `ct(...),recirc(ID)`, and translation of the current action list goes on for
//! the original packet, whose conntrack fields are then cleared (as OVS's: this pass cannot know
//! what conntrack found). The packet's next pass arrives with `recirc_id=ID`; its translation
//! thaws the state and resumes at table N, where conntrack's results (`ct_state`, `ct_zone`,
//! `ct_mark`, `ct_label`, the original-direction tuple) are in the key and the tables consult
//! them like any field.

use std::fmt::Write;
use std::time::Instant;

use datapath::xlate_drop::XlateDrop;
use flow::odp::{Action, Attr, DpKey, KeyAttrs};
use flow::{EthAddr, FlowKey, Mask};

use std::net::IpAddr;

use crate::bridge::Bridge;
use crate::classifier::{RuleId, Version};
use crate::fields::FieldId;
use crate::pipekey::{PipeKey, PipeMask, PipeMeta};
use crate::port_config::{PC_NO_FLOOD, PC_NO_FWD, PC_NO_PACKET_IN, PC_NO_RECV, PC_NO_RECV_STP};
use crate::recirc::{FrozenAction, FrozenState, RecircIds};
use crate::syntax::{
    Ct, CtZone, Nat, NatAddrs, OFPP_ALL, OFPP_ANY, OFPP_CONTROLLER, OFPP_FLOOD, OFPP_IN_PORT,
    OFPP_LOCAL, OFPP_MAX, OFPP_NORMAL, OFPP_TABLE, OfAction, PacketInReason, format_actions,
    format_match,
};
use crate::table_config::TableMiss;
use crate::tun_md::TunTable;
use crate::tunnel::{FlowOr, Inherit, PtMode, TunnelConfig, TunnelType, Underlay};

mod action_set;
mod bfd;
mod bond_output;
mod bundle;
mod check_pkt_larger;
mod commit;
mod controller;
mod ct;
mod encap;
mod fail_open;
mod flow_hash;
pub mod lacp;
pub(crate) use flow_hash::{hash_add, hash_finish};
mod freeze;
mod group;
pub use group::hash as ovs_hash;
mod learn;
mod meter;
mod mirror;
mod multipath;
mod normal;
mod patch;
mod queue;
mod rewrite;
mod stack;
mod trace;
mod tunnel;

use ct::{clear_conntrack, tuple_swap};
pub use learn::{FinTimeout, LearnedFlow};
pub(crate) use mirror::credit_mirrors;
use trace::{NodeKind, Trace, strip_priority};
pub(crate) use tunnel::geneve_to_fields;
use tunnel::{geneve_mask, tunnel_ecn, tunnel_endpoints, tunnel_wc};

/// Deepest nesting of resubmits and patch ports (OVS's `MAX_DEPTH`).
pub const MAX_DEPTH: usize = 64;
/// Most resubmits in one translation (OVS's `MAX_RESUBMITS`).
pub const MAX_RESUBMITS: usize = 4096;

/// The bridges, their ports and tables: everything translation reads.
#[derive(Default)]
pub struct Pipeline {
    pub bridges: Vec<Bridge>,
    /// Tunnel routes and neighbours.
    pub underlay: Underlay,
    /// Recirculation ids and the translation state frozen under them.
    pub recirc: RecircIds,
    /// What crossed the patch ports ([`crate::patch_stats`]).
    pub patch_stats: crate::patch_stats::PatchStats,
}

impl Pipeline {
    /// The bridge called `name`.
    pub fn bridge(&self, name: &str) -> Option<&Bridge> {
        self.bridges.iter().find(|b| b.name == name)
    }

    /// The bridge called `name`, mutably.
    pub fn bridge_mut(&mut self, name: &str) -> Option<&mut Bridge> {
        self.bridges.iter_mut().find(|b| b.name == name)
    }

    /// The bridge and OpenFlow port of datapath port `dp_port`.
    pub fn of_port(&self, dp_port: u32) -> Option<(usize, u32)> {
        self.bridges.iter().enumerate().find_map(|(b, br)| {
            br.ports
                .values()
                .find(|p| p.dp_port == Some(dp_port))
                .map(|p| (b, p.ofport))
        })
    }

    /// Where a packet with datapath key `key` enters the pipeline: its bridge, OpenFlow port
    /// and, for a tunnel port, its options. A tunnel's datapath port is shared, so the
    /// OpenFlow port is chosen by the outer addresses, key and payload kind, which the
    /// megaflow then matches (OVS's `tnl_port_receive`). `Err` when no tunnel port takes it.
    pub fn receive(&self, key: &FlowKey, wc: &mut PipeMask) -> Option<Result<Entry<'_>, String>> {
        let dp_port = key.in_port();
        let mut best: Option<(u8, usize, u32, &TunnelConfig)> = None;
        let mut tunnel_port = false;
        // What a tunnel port is chosen by, the same for every candidate.
        let (src, dst) = tunnel_endpoints(key);
        let k = (key.tun_flags() & flow::key::tun_flags::KEY != 0).then(|| key.tun_id());
        let l3 = key.packet_type() != 0;
        for (b, br) in self.bridges.iter().enumerate() {
            for p in br.ports.values().filter(|p| p.dp_port == Some(dp_port)) {
                let Some(t) = br.tunnels.get(&p.ofport) else {
                    return Some(Ok((b, p.ofport, None)));
                };
                if !tunnel_port {
                    tunnel_port = true;
                    tunnel_wc(key, wc);
                }
                if let Some(rank) = t.receives(src, dst, k, l3)
                    && best.is_none_or(|(r, ..)| rank < r)
                {
                    best = Some((rank, b, p.ofport, t));
                }
            }
        }
        match best {
            Some((_, b, p, t)) => Some(Ok((b, p, Some(t)))),
            None if tunnel_port => Some(Err(format!(
                "receive tunnel port not found (tun_src={src},tun_dst={dst},tun_id={:#x},\
                     packet_type={})",
                key.tun_id(),
                if l3 { "l3" } else { "eth" }
            ))),
            None => None,
        }
    }

    /// The bridge index and port of the patch port called `name`.
    fn patch_peer(&self, name: &str) -> Option<(usize, u32)> {
        self.bridges.iter().enumerate().find_map(|(b, br)| {
            br.port_by_name(name)
                .filter(|p| p.dp_port.is_none())
                .map(|p| (b, p.ofport))
        })
    }
}

/// Where a packet enters the pipeline: bridge index, OpenFlow port, the tunnel's options when
/// it came from one.
pub type Entry<'a> = (usize, u32, Option<&'a TunnelConfig>);

/// What translation produced.
#[derive(Clone, Debug, Default)]
pub struct XlateOut {
    /// Datapath actions; empty means drop.
    pub actions: Vec<Action>,
    /// The megaflow mask: the datapath key bits the result depended on.
    pub mask: Mask,
    /// The megaflow's `skb_priority` mask (all ones when a queue action looked at it). The
    /// datapath key has no priority: only `ofproto/trace` prints it.
    pub skb_priority_mask: u32,
    /// The rules that matched, as (bridge index, table, rule): where the megaflow's statistics
    /// belong.
    pub rules: Vec<(usize, usize, RuleId)>,
    /// A tunnel neighbour was learned from ARP/ND: the caller revalidates.
    pub neigh_learned: bool,
    /// Why the packet was dropped before the tables, if it was (bad tunnel metadata, no
    /// receiving tunnel port).
    pub error: Option<String>,
    /// MAC addresses NORMAL learned (bridge index): the caller revalidates when non-empty.
    pub learned: Vec<usize>,
    /// The flow after the pipeline (for `ofproto/trace`'s "Final flow").
    pub final_flow: PipeKey,
    /// Packets the slow path sends by itself (neighbour requests), once, when the packet is
    /// handled: not part of the megaflow's actions.
    pub packet_outs: Vec<PacketOut>,
    /// A tunnel next hop's MAC address was missing (with side effects, it was asked for):
    /// the megaflow is only good until the neighbour is known, or until its request is
    /// repeated.
    pub neigh_pending: bool,
    /// Why translation failed, in OVS's words (`xlate_strerror()`): the packet is dropped.
    pub failed: Option<&'static str>,
    /// Why the packet was dropped before the tables for a reason OVS counts apart (an
    /// explicit drop action with that reason: invalid GENEVE metadata, ECN congestion).
    pub drop: Option<XlateDrop>,
    /// The recirculations the actions fork (`ct(table=N)`), for `ofproto/trace` to follow;
    /// recorded only when tracing.
    pub forks: Vec<Fork>,
    /// The groups the packet went through, with the bucket taken (`None`: every bucket):
    /// where its statistics belong, as with `rules`.
    pub groups: Vec<crate::ofproto::GroupCredit>,
    /// Flows the packet teaches (`learn`), for the slow path to add or refresh.
    pub learned_flows: Vec<LearnedFlow>,
    /// Rules whose `fin_timeout` the packets of this path are subject to.
    pub fin_timeouts: Vec<FinTimeout>,
    /// The output port the action set named last (OVS's `actset_output`), if it did.
    pub actset_output: Option<u32>,
    /// The mirrors that copied the packet, as (bridge index, mirror index): where their
    /// statistics belong, as with `rules`.
    pub mirrors: Vec<(usize, usize)>,
    /// The patch pairs the packet crossed, as (bridge index, OpenFlow port of the sending
    /// end): their counters take its packets ([`crate::patch_stats`]).
    pub patches: Vec<(usize, u32)>,
    /// The tables the packet was looked up in: their counters take its packets
    /// ([`crate::table_stats`]).
    pub tables: Vec<crate::table_stats::TableLookup>,
    /// The bond hash buckets the packet went out through, as (bridge index, bond index,
    /// bucket): their load takes its bytes ([`crate::bond_rebalance`]).
    pub bond_buckets: Vec<(usize, usize, usize)>,
    /// The packet is a BFD session's, sent to the slow path (OVS's `SLOW_BFD`).
    pub slow_bfd: bool,
    /// The packet is a LACPDU for a bond's LACP, sent to the slow path (`SLOW_LACP`).
    pub slow_lacp: bool,
    /// An action asked for the slow path (`debug_slow`, OVS's `SLOW_ACTION`). flowpath's
    /// datapath runs the flow's actions itself all the same; traces say it as OVS's do.
    pub slow_action: bool,
}

/// A fork of the pipeline: the packet recirculates with `recirc_id` after conntrack, and its
/// next pass resumes at `table`.
#[derive(Clone, Debug)]
pub struct Fork {
    pub recirc_id: u32,
    pub table: u8,
    /// The conntrack zone of the `ct` that forked.
    pub zone: u16,
    /// The packet as its next pass receives it, before conntrack's results: the packet as
    /// committed, its datapath input port and tunnel metadata, `recirc_id` set.
    pub key: FlowKey,
    /// Registers and metadata at the fork.
    pub meta: PipeMeta,
    /// The `nat` of the `ct` that forked, if any.
    pub nat: Option<Nat>,
}

/// A packet translation made to send: its frame, the datapath port it counts as coming from,
/// and its datapath actions.
#[derive(Clone, Debug)]
pub struct PacketOut {
    pub frame: Vec<u8>,
    pub in_port: u32,
    pub actions: Vec<Action>,
}

/// Translation of one packet.
struct Ctx<'a> {
    pipe: &'a Pipeline,
    bridge: usize,
    flow: PipeKey,
    /// The packet as the datapath has it after the actions emitted so far.
    base: FlowKey,
    /// The `skb_priority` the datapath's packet has after the actions emitted so far.
    base_skb_priority: u32,
    /// The `skb_priority` the packet came with (what `pop_queue` restores).
    orig_skb_priority: u32,
    wc: PipeMask,
    out: Vec<Action>,
    depth: usize,
    resubmits: usize,
    exit: bool,
    now: Instant,
    /// Learn MAC addresses (false when tracing without `-generate`).
    learn: bool,
    trace: Option<Trace>,
    res: XlateOut,
    /// The OpenFlow port the packet came in on, for output loops and IN_PORT.
    in_port: u32,
    /// The cookie of the rule whose actions run (for packet-ins).
    rule_cookie: u64,
    /// The table of the rule whose actions run (OVS's `table_id`).
    table_id: u8,
    /// That rule is a table-miss rule (priority 0, matching everything): its packet-ins have
    /// reason `explicit_miss`.
    rule_is_miss: bool,
    /// The rule whose actions run, as (bridge, table, rule).
    rule: Option<(usize, usize, RuleId)>,
    /// The datapath key of the packet being translated.
    key: &'a FlowKey,
    /// Conntrack has run on the packet in an earlier pass (OVS's `conntracked`).
    conntracked: bool,
    /// The `nat` of the `ct` action being composed (OVS's `ct_nat_action`).
    ct_nat: Option<Nat>,
    /// An MPLS pop left a packet whose L3 header this pass cannot see (OVS's `was_mpls`).
    was_mpls: bool,
    /// Translation is freezing: what is left of it goes to `frozen` ([`freeze`]).
    freezing: bool,
    /// The actions frozen so far, innermost level first.
    frozen: Vec<FrozenAction>,
    /// Where in `frozen` the last `unroll_xlate` marker is.
    frozen_unroll: Option<usize>,
    /// The datapath `hash` a freeze for a `dp_hash` select group emits before its `recirc`.
    pending_hash: Option<Action>,
    /// The data stack of `push:` and `pop:` ([`stack`]).
    stack: Vec<u8>,
    /// The action set `write_actions` wrote ([`action_set`]).
    action_set: action_set::ActionSet,
    /// The action set is running (a packet-in's reason is `action_set`).
    in_action_set: bool,
    /// A group bucket's own actions are running (a packet-in's reason is `group`; not in
    /// the rules a bucket resubmits to, as OVS's `group_bucket_action`).
    in_group_bucket: bool,
    /// A packet-out's actions are being translated (a packet-in's reason is `packet_out`
    /// throughout, as OVS's `in_packet_out`).
    in_packet_out: bool,
    /// A `controller(pause)` froze translation: its packet-in carries the continuation
    /// ([`controller`]).
    pause: Option<controller::Pause>,
    /// The next lookup is a patch port's peer bridge's first ([`patch`]).
    patch_entry: bool,
    /// The mirrors of the current bridge that have copied the packet, by index ([`mirror`]).
    mirrors: u32,
    /// While a mirror's copy is output: the bytes it keeps (its `snaplen`), else 0.
    mirror_snaplen: u16,
    /// The table version lookups in this bridge (by index) see, when not the published one:
    /// a bundle's packet-out sees the flow mods staged before it ([`translate_in_version`]).
    version: Option<(usize, Version)>,
}

/// How a table is looked up ([`Ctx::do_table_ct`]).
#[derive(Clone, Copy, Debug, Default)]
struct Lookup {
    /// The lookup sees the conntrack original-direction tuple (`resubmit(,N,ct)`).
    ct_orig: bool,
    /// The lookup sees this `in_port` (`resubmit(PORT,...)`); the rule's actions do not.
    in_port: Option<u32>,
    /// A resubmit: to the same or an earlier table, it deepens the translation.
    resubmit: bool,
    /// The rule found counts against [`MAX_RESUBMITS`] (all but a pass's first lookup).
    counted: bool,
}

impl Lookup {
    /// A `goto_table`, or a patch port's or tunnel's way into a bridge.
    fn counted() -> Lookup {
        Lookup {
            counted: true,
            ..Lookup::default()
        }
    }
}

/// Translates the packet whose datapath key is `key` (datapath port numbers). With `trace`,
/// writes OVS's `ofproto/trace` lines for each table; `learn` lets NORMAL update MAC tables.
/// A key with `recirc_id` other than 0 is a later pass: its frozen state is thawed and
/// translation resumes where the fork said (an unknown id drops the packet, counted in
/// [`RecircIds::stats`]).
pub fn translate(
    pipe: &Pipeline,
    key: &FlowKey,
    learn: bool,
    trace: Option<&mut String>,
) -> XlateOut {
    translate_in(pipe, key, None, learn, trace)
}

/// [`translate`], for a packet that enters bridge `start.0` by OpenFlow port `start.1` rather
/// than by its datapath port when `start` is given: `ofproto/trace` of a flow whose `in_port`
/// is no port of the bridge, or is not given (OVS's `OFPP_NONE`), as OVS traces those.
pub fn translate_in(
    pipe: &Pipeline,
    key: &FlowKey,
    start: Option<(usize, u32)>,
    learn: bool,
    trace: Option<&mut String>,
) -> XlateOut {
    translate_with_priority(pipe, key, start, 0, learn, trace)
}

/// [`translate_in`] for a packet whose datapath has given it `skb_priority` (a QoS queue;
/// `ofproto/trace` of a flow that says `skb_priority=`).
pub fn translate_with_priority(
    pipe: &Pipeline,
    key: &FlowKey,
    start: Option<(usize, u32)>,
    skb_priority: u32,
    learn: bool,
    trace: Option<&mut String>,
) -> XlateOut {
    let start = Start {
        at: start,
        skb_priority,
        ..Start::default()
    };
    translate_full(pipe, key, start, learn, trace)
}

/// [`translate`] of a later pass (`key`'s `recirc_id` names its frozen state) whose lookups in
/// the frozen state's bridge see the rules of table version `version` rather than the
/// published ones: a packet-out of a bundle being committed, translated where it stands among
/// the bundle's flow mods (OVS's `packet_xlate()` with the bundle's version).
pub fn translate_in_version(
    pipe: &Pipeline,
    key: &FlowKey,
    version: Version,
    trace: Option<&mut String>,
) -> XlateOut {
    let start = Start {
        version: Some(version),
        ..Start::default()
    };
    translate_full(pipe, key, start, false, trace)
}

/// [`translate_with_priority`] of a packet-out's `actions` run in place of the first table's
/// lookup, as from no rule (OVS's `xlate_actions()` with `ofpacts`): `ofproto/trace-packet-out`.
pub fn translate_actions(
    pipe: &Pipeline,
    key: &FlowKey,
    start: Option<(usize, u32)>,
    skb_priority: u32,
    actions: &[OfAction],
    trace: Option<&mut String>,
) -> XlateOut {
    let start = Start {
        at: start,
        skb_priority,
        actions: Some(actions),
        ..Start::default()
    };
    translate_full(pipe, key, start, false, trace)
}

/// Where and how a translation starts besides its packet's key.
#[derive(Default)]
struct Start<'a> {
    /// The bridge and OpenFlow port the packet enters by, when not by its datapath port.
    at: Option<(usize, u32)>,
    skb_priority: u32,
    /// The table version lookups in the bridge see, when not the published one.
    version: Option<Version>,
    /// A packet-out's actions, run in place of the first lookup.
    actions: Option<&'a [OfAction]>,
}

fn translate_full(
    pipe: &Pipeline,
    key: &FlowKey,
    how: Start<'_>,
    learn: bool,
    trace: Option<&mut String>,
) -> XlateOut {
    let Start {
        at: start,
        skb_priority,
        version,
        actions: packet_out,
    } = how;
    crate::coverage::XLATE_ACTIONS.inc();
    let now = Instant::now();
    let mut wc = PipeMask::new();
    // Always consulted (OVS's xlate_wc_init): packet type, in_port, recirc_id, dl_type, and
    // the fragment bits of IP packets.
    wc.dp
        .set_in_port(u32::MAX)
        .set_recirc_id(u32::MAX)
        .set_packet_type(u32::MAX)
        .set_eth_type(0xffff);
    if matches!(key.eth_type(), 0x0800 | 0x86dd) {
        wc.dp.set_nw_frag(flow::key::nw_frag::MASK);
    }
    let dropped = |mut wc: PipeMask,
                   error: Option<String>,
                   drop: Option<XlateDrop>,
                   trace: Option<&mut String>| {
        if let (Some(t), Some(e)) = (trace, &error) {
            let _ = writeln!(t, "{e}");
        }
        geneve_mask(&mut wc, key, error.is_some());
        XlateOut {
            mask: wc.dp,
            error,
            drop,
            final_flow: PipeKey {
                dp: key.clone(),
                meta: PipeMeta::default(),
            },
            ..XlateOut::default()
        }
    };
    let recirc_id = key.recirc_id();
    let (bridge, ofport, tunnel, frozen) = if recirc_id != 0 {
        let thawed = pipe.recirc.thaw(recirc_id).map(|st| {
            let b = pipe.bridges.iter().position(|b| b.name == st.bridge);
            (st, b)
        });
        match thawed {
            Some((st, Some(b))) => (b, st.in_port, None, Some(st)),
            Some((_, None)) => {
                return thaw_failed(
                    pipe,
                    key,
                    wc,
                    "Frozen bridge no longer exists.",
                    "Bridge not found",
                    trace,
                );
            }
            None => {
                let e = format!("Recirculation context not found for ID {recirc_id:x}");
                return thaw_failed(pipe, key, wc, &e, "No recirculation context", trace);
            }
        }
    } else if let Some((b, p)) = start {
        (b, p, None, None)
    } else {
        match pipe.receive(key, &mut wc) {
            Some(Ok((b, p, t))) => (b, p, t, None),
            Some(Err(e)) => return dropped(wc, Some(e), None, trace),
            None => return dropped(wc, None, None, trace),
        }
    };
    let mut flow = PipeKey {
        dp: key.clone(),
        meta: frozen.as_ref().map_or_else(PipeMeta::default, |st| st.meta),
    };
    // A later pass's packet has the priority committed before its recirculation, which the
    // frozen state holds (and its recirc_id stands for, as the datapath key has no priority).
    let skb_priority = frozen
        .as_ref()
        .map_or(skb_priority, |st| st.meta.skb_priority);
    flow.meta.skb_priority = skb_priority;
    flow.dp.set_in_port(ofport);
    if let Some(st) = &frozen {
        // The tunnel metadata as the pipeline had it when it froze (OVS restores the frozen
        // tunnel too); the packet's own may be the raw GENEVE options.
        crate::recirc::tunnel_restore(&mut flow.dp, st.tunnel.as_deref());
        if !st.conntracked {
            clear_conntrack(&mut flow.dp);
        }
    }
    if let Some(t) = tunnel {
        // An L3 payload on a legacy_l3 port: OpenFlow sees it behind a dummy Ethernet header
        // of zero addresses; the datapath pushes a real one when it is committed.
        if key.packet_type() != 0 && t.packet_type != PtMode::Ptap {
            flow.dp
                .set_packet_type(0)
                .set_eth_src(EthAddr::ZERO)
                .set_eth_dst(EthAddr::ZERO)
                .set_eth_type(key.packet_type() as u16);
        }
        if !tunnel_ecn(&mut flow.dp, &mut wc) {
            return dropped(wc, None, Some(XlateDrop::Congestion), trace);
        }
    }
    // Options arrive from a tunnel port (or, in `ofproto/trace`, with the flow); a later pass
    // has the fields as the frozen state kept them.
    if frozen.is_none()
        && key.tun_geneve_len() > 0
        && let Err(e) =
            geneve_to_fields(&pipe.bridges[bridge].tlv_map, &mut flow.dp, &mut flow.meta)
    {
        return dropped(
            wc,
            Some(format!("Invalid Geneve tunnel metadata: {e}")),
            Some(XlateDrop::InvalidTunnelMetadata),
            trace,
        );
    }
    let conntracked = match &frozen {
        Some(st) => st.conntracked,
        None => key.ct_state() & flow::key::ct_state::TRK != 0,
    };
    let mut ctx = Ctx {
        pipe,
        bridge,
        flow,
        base: key.clone(),
        base_skb_priority: skb_priority,
        orig_skb_priority: skb_priority,
        wc,
        out: Vec::new(),
        depth: 0,
        resubmits: 0,
        exit: false,
        now,
        learn,
        trace: trace.as_ref().map(|_| Trace::new()),
        res: XlateOut::default(),
        in_port: ofport,
        rule_cookie: 0,
        table_id: 0,
        rule_is_miss: false,
        rule: None,
        key,
        conntracked,
        ct_nat: None,
        was_mpls: false,
        freezing: false,
        frozen: Vec::new(),
        frozen_unroll: None,
        pending_hash: None,
        stack: frozen.as_ref().map_or_else(Vec::new, |st| st.stack.clone()),
        action_set: action_set::ActionSet::default(),
        in_action_set: false,
        in_group_bucket: false,
        in_packet_out: false,
        pause: None,
        patch_entry: false,
        mirrors: frozen.as_ref().map_or(0, |st| st.mirrors),
        mirror_snaplen: 0,
        version: version.map(|v| (bridge, v)),
    };
    let node = ctx.trace_bridge();
    let table = match &frozen {
        Some(st) => {
            let table = st.table;
            ctx.under(node, |c| {
                let thaw = c.trace_add(NodeKind::Thaw, "thaw");
                c.under(thaw, |c| {
                    c.trace_add(NodeKind::Thaw, format_args!("Resuming from table {table}"));
                    if !st.action_set.is_empty() {
                        let mut acts = String::new();
                        format_actions(&mut acts, &st.action_set, &crate::syntax::NoPortNames);
                        c.trace_add(NodeKind::Thaw, format_args!("Restoring action set: {acts}"));
                    }
                    if !st.actions.is_empty() {
                        let acts = freeze::format_frozen(&st.actions);
                        c.trace_add(NodeKind::Thaw, format_args!("Restoring actions: {acts}"));
                    }
                });
            });
            ctx.table_id = table;
            ctx.action_set.write(&st.action_set);
            if st.packet_out {
                // No rule: OVS's rule cookie is all ones until a table lookup finds one.
                ctx.in_packet_out = true;
                ctx.rule_cookie = u64::MAX;
            }
            usize::from(table)
        }
        None => 0,
    };
    // A BFD session's packets go to the session, not through the tables (OVS's
    // `process_special()`, which a thawed packet has been through already); OVS has looked
    // table 0 up by then.
    let special = frozen.is_none() && (ctx.process_bfd(ofport) || ctx.process_lacp(ofport));
    if special {
        ctx.under(node, |c| c.lookup_only(table));
    }
    // A port with `no_recv` (`no_recv_stp` for STP frames) drops what it receives (OVS's
    // `may_receive()`): the megaflow then depends on the destination address.
    let in_config = pipe.bridges[bridge].port_config(ofport);
    let refused = !special && in_config.config & (PC_NO_RECV | PC_NO_RECV_STP) != 0 && {
        ctx.wc.dp.set_eth_dst(EthAddr([0xff; 6]));
        in_config.drops_input(ctx.flow.dp.eth_dst().0)
    };
    // A mirror's output port takes nothing in (OVS's xlate_actions()).
    let mirror_out = !special && !refused && ctx.is_mirror_output(ofport);
    if mirror_out {
        let name = port_label(&pipe.bridges[bridge], ofport);
        ctx.under(node, |c| {
            let rule = c.trace_lookup(table);
            c.under(rule, |c| {
                c.trace_add(
                    NodeKind::Error,
                    format_args!(
                        "dropping packet received on port {name}, which is reserved exclusively \
                     for mirroring"
                    ),
                )
            })
        });
    } else if !refused {
        ctx.mirror_ingress(ofport);
    }
    let refused = refused || mirror_out || special;
    let bond = frozen
        .as_ref()
        .and_then(|st| st.userdata.strip_prefix(crate::bond::RECIRC_STATE_PREFIX));
    match frozen.as_ref().filter(|st| !st.actions.is_empty()) {
        _ if refused => {}
        _ if bond.is_some() => ctx.under(node, |c| c.bond_post_recirc(bond.unwrap_or_default())),
        Some(st) => ctx.under(node, |c| c.run_frozen(&st.actions, table)),
        None if packet_out.is_some() => {
            // No rule: OVS's rule cookie is all ones until a table lookup finds one.
            ctx.in_packet_out = true;
            ctx.rule_cookie = u64::MAX;
            let actions = packet_out.unwrap_or_default();
            ctx.under(node, |c| c.do_actions(actions, table));
        }
        None => ctx.under(node, |c| c.do_table_ct(table, Lookup::default())),
    }
    if !refused && !ctx.freezing && ctx.res.failed.is_none() {
        let at = ctx.action_set_node(node);
        ctx.under(at, |c| c.run_action_set(table));
    }
    if ctx.freezing {
        ctx.finish_freezing();
    }
    let mut res = std::mem::take(&mut ctx.res);
    res.actset_output = ctx.action_set.output;
    res.actions = std::mem::take(&mut ctx.out);
    if res.failed.is_some() {
        res.actions.clear();
    }
    // The last action needs no clone: the packet is not used after (OVS's
    // xlate_optimize_odp_actions()).
    if let Some(Action::Clone(sub)) = res.actions.pop_if(|a| matches!(a, Action::Clone(_))) {
        res.actions.extend(sub);
    }
    geneve_mask(&mut ctx.wc, key, false);
    let mut mask = ctx.wc.dp.clone();
    // The datapath key has datapath port numbers and no registers: in_port stays exact.
    mask.set_in_port(u32::MAX);
    // Labels that only translation pushed are no part of the packet's key (OVS's
    // xlate_wc_finish(), which a failed translation does not reach).
    if !is_mpls(key.eth_type()) && res.failed.is_none() {
        mask.set_mpls_lse0(0).set_mpls_lse1(0).set_mpls_lse2(0);
    }
    // ICMP's type and code are one byte each in the datapath's key: only the low bytes of the
    // port fields that hold them can be matched (OVS's xlate_wc_finish()).
    if matches!((key.eth_type(), key.nw_proto()), (0x0800, 1) | (0x86dd, 58)) {
        let (s, d) = (mask.tp_src(), mask.tp_dst());
        mask.set_tp_src(s & 0xff).set_tp_dst(d & 0xff);
    }
    mask.normalize();
    res.mask = mask;
    res.skb_priority_mask = ctx.wc.meta.skb_priority;
    let mut final_flow = ctx.flow.clone();
    final_flow.dp.set_in_port(ofport);
    res.final_flow = final_flow;
    if let (Some(t), Some(tr)) = (trace, ctx.trace.take()) {
        tr.render(t);
    }
    res
}

/// A later pass whose frozen state cannot be thawed (`why`, in OVS's words): dropped, with
/// the error under the bridge of its input port in a trace, as OVS reports it.
fn thaw_failed(
    pipe: &Pipeline,
    key: &FlowKey,
    wc: PipeMask,
    why: &str,
    failed: &'static str,
    trace: Option<&mut String>,
) -> XlateOut {
    let entry = pipe.of_port(key.in_port());
    if let Some(t) = trace {
        let mut tr = Trace::new();
        if let Some((b, _)) = entry {
            let name = &pipe.bridges[b].name;
            tr.cur = tr.add(NodeKind::Bridge, format!("bridge(\"{name}\")"));
        }
        tr.add(NodeKind::Error, why.to_owned());
        tr.render(t);
    }
    let mut mask = wc.dp;
    mask.normalize();
    let mut final_flow = PipeKey {
        dp: key.clone(),
        meta: PipeMeta::default(),
    };
    if let Some((_, p)) = entry {
        final_flow.dp.set_in_port(p);
    }
    XlateOut {
        mask,
        error: Some(why.to_owned()),
        failed: Some(failed),
        final_flow,
        ..XlateOut::default()
    }
}

impl Ctx<'_> {
    fn br(&self) -> &Bridge {
        &self.pipe.bridges[self.bridge]
    }

    /// Adds a trace line under the current node; returns it. The text is formatted only when
    /// tracing: upcalls pass here too and must not pay for it.
    fn trace_add(&mut self, kind: NodeKind, text: impl std::fmt::Display) -> Option<usize> {
        self.trace.as_mut().map(|t| t.add(kind, text.to_string()))
    }

    /// A detail line (` -> text`).
    fn note(&mut self, text: impl std::fmt::Display) {
        self.trace_add(NodeKind::Detail, text);
    }

    /// Runs `f` with trace lines going under `node` (when tracing).
    fn under<R>(&mut self, node: Option<usize>, f: impl FnOnce(&mut Self) -> R) -> R {
        let saved = self.trace.as_ref().map(|t| t.cur);
        if let (Some(t), Some(n)) = (self.trace.as_mut(), node) {
            t.cur = n;
        }
        let r = f(self);
        if let (Some(t), Some(c)) = (self.trace.as_mut(), saved) {
            t.cur = c;
        }
        r
    }

    fn trace_bridge(&mut self) -> Option<usize> {
        let pipe = self.pipe;
        let name = &pipe.bridges[self.bridge].name;
        self.trace_add(NodeKind::Bridge, format_args!("bridge(\"{name}\")"))
    }

    /// Whether translation went too deep or too long to go on (OVS's
    /// `xlate_resubmit_resource_check()`): then an error, and the packet is dropped.
    fn resource_exhausted(&mut self) -> bool {
        let (text, failed) = if self.depth >= MAX_DEPTH {
            (
                format!("over max translation depth {MAX_DEPTH}"),
                "Recursion too deep",
            )
        } else if self.resubmits >= MAX_RESUBMITS {
            (
                format!("over {MAX_RESUBMITS} resubmit actions"),
                "Too many resubmits",
            )
        } else if self.stack.len() >= stack::STACK_MAX {
            (
                "resubmits yielded over 64 kB of stack".to_owned(),
                "Stack too deep",
            )
        } else {
            return false;
        };
        self.trace_add(NodeKind::Error, text);
        self.res.failed = Some(failed);
        self.out.clear();
        self.exit = true;
        true
    }

    /// The version a lookup of `cls`, a table of the current bridge, sees.
    fn lookup_version(&self, cls: &crate::classifier::Classifier<crate::bridge::Rule>) -> Version {
        match self.version {
            Some((b, v)) if b == self.bridge => v,
            _ => cls.version(),
        }
    }

    /// Looks `table` up and runs the rule's actions: a `goto_table`, or the first table of a
    /// bridge a patch port or tunnel leads into (counted as a resubmit, as OVS counts them).
    fn do_table(&mut self, table: usize) {
        self.do_table_ct(table, Lookup::counted());
    }

    /// Looks `table` up as `how` says and runs the rule's actions (OVS's
    /// `xlate_table_action()`): a resubmit's lookup may see another `in_port` or the conntrack
    /// original-direction tuple (`resubmit(,N,ct)`), restored before the rule's actions run;
    /// a resubmit to the same or an earlier table counts against the depth limit, and every
    /// rule so reached against the resubmit limit.
    fn do_table_ct(&mut self, table: usize, how: Lookup) {
        if self.exit {
            return;
        }
        if self.was_mpls {
            // A lookup may match on the L3 header an MPLS pop hid (OVS's
            // xlate_table_action()): the next pass looks up this table.
            self.trigger_freeze();
            return;
        }
        if self.resource_exhausted() {
            return;
        }
        let pipe = self.pipe;
        let br = &pipe.bridges[self.bridge];
        let Some(cls) = br.tables.get(table) else {
            return;
        };
        if table == 0 && br.fail_open.load(std::sync::atomic::Ordering::Relaxed) {
            self.fail_open_rule();
            return;
        }
        let ipv4 = self.flow.dp.eth_type() == 0x0800;
        if how.ct_orig {
            tuple_swap(&mut self.flow.dp, ipv4);
            tuple_swap(&mut self.wc.dp, ipv4);
        }
        let in_port = self.flow.dp.in_port();
        if let Some(p) = how.in_port {
            self.flow.dp.set_in_port(p);
        }
        let version = self.lookup_version(cls);
        let found = cls.lookup_conjunctive_in(&mut self.flow, version, &mut self.wc);
        self.flow.dp.set_in_port(in_port);
        if how.ct_orig {
            tuple_swap(&mut self.flow.dp, ipv4);
            tuple_swap(&mut self.wc.dp, ipv4);
        }
        self.res
            .tables
            .push((self.bridge, table as u8, found.is_some()));
        match found {
            None => {
                let node = self.trace_add(NodeKind::Table, format_args!("{table:>2}. No match."));
                self.under(node, |c| c.trace_add(NodeKind::Action, "drop"));
                // A resubmit's miss is just that; a pass's first lookup and goto_table honour
                // the table's miss configuration (OVS's `rule_dpif_lookup_from_table()`).
                if !how.resubmit {
                    self.table_miss(table, how);
                }
            }
            Some(id) => {
                let (m, prio, rule) = cls.get(id).expect("lookup returns live rules");
                self.res.rules.push((self.bridge, table, id));
                let node = if self.trace.is_some() {
                    self.trace_add(
                        NodeKind::Table,
                        rule_line(table, &m.expand(), prio, rule.cookie),
                    )
                } else {
                    None
                };
                let saved = (
                    self.rule_cookie,
                    self.table_id,
                    self.rule_is_miss,
                    self.in_group_bucket,
                );
                let deepens = usize::from(how.resubmit && table <= usize::from(self.table_id));
                self.resubmits += usize::from(how.counted);
                self.depth += deepens;
                self.rule_cookie = rule.cookie;
                self.table_id = table as u8;
                self.rule_is_miss = prio == 0 && m.is_catchall();
                self.in_group_bucket = false;
                let saved_rule = self.rule.replace((self.bridge, table, id));
                self.under(node, |c| c.peer_rule_actions(&rule.actions, table));
                (
                    self.rule_cookie,
                    self.table_id,
                    self.rule_is_miss,
                    self.in_group_bucket,
                ) = saved;
                self.rule = saved_rule;
                self.depth -= deepens;
            }
        }
    }

    /// Looks `table` up for a packet whose actions will not run (OVS looks the rule up before
    /// it decides to drop): its trace line, the fields consulted in the megaflow.
    fn trace_lookup(&mut self, table: usize) -> Option<usize> {
        let pipe = self.pipe;
        let cls = pipe.bridges[self.bridge].tables.get(table)?;
        let version = self.lookup_version(cls);
        let id = cls.lookup_conjunctive_in(&mut self.flow, version, &mut self.wc)?;
        let (m, prio, rule) = cls.get(id)?;
        self.trace.as_ref()?;
        self.trace_add(
            NodeKind::Table,
            rule_line(table, &m.expand(), prio, rule.cookie),
        )
    }

    /// [`Ctx::trace_lookup`], with OVS's line for a miss.
    fn lookup_only(&mut self, table: usize) {
        if self.trace_lookup(table).is_none() && self.trace.is_some() {
            self.trace_add(NodeKind::Table, format_args!("{table:>2}. No match."));
        }
    }

    /// What a miss in `table` does when its configuration says (OpenFlow 1.1 and 1.2's
    /// `OFPT_TABLE_MOD`): `continue` looks the next table up (past the last one, it is a miss
    /// for the controller), `controller` sends a `no_match` packet-in unless the input port
    /// has `no_packet_in`.
    fn table_miss(&mut self, table: usize, how: Lookup) {
        let miss = self.br().table_config(table).miss;
        let last = table + 2 >= crate::bridge::N_TABLES;
        let in_port = self.flow.dp.in_port();
        let to_controller = match miss {
            TableMiss::Continue if !last => return self.do_table_ct(table + 1, how),
            TableMiss::Continue | TableMiss::Controller => {
                self.br().port_config(in_port).config & PC_NO_PACKET_IN == 0
            }
            // An OpenFlow 1.0 to 1.2 controller gets misses (OVS's miss rule).
            TableMiss::Default => self.br().miss_to_controller,
            TableMiss::Drop => false,
        };
        if to_controller {
            // The packet-in is the miss rule's, whose cookie is 0 (OVS's hidden miss rules),
            // also in a packet-out, which has no rule of its own.
            let saved = (self.table_id, self.rule_cookie);
            (self.table_id, self.rule_cookie) = (table as u8, 0);
            self.controller(0, 65535, 0);
            (self.table_id, self.rule_cookie) = saved;
        }
    }

    /// `output(port=N,max_len=M)`, as OVS's `xlate_output_trunc_action()`: only to a port with
    /// a datapath side other than the input port; to a reserved port it warns, to a patch port
    /// it is an error (the truncation would apply at an unpredictable output), and nothing is
    /// sent either way.
    fn output_trunc(&mut self, port: u32, max_len: u32) {
        let mut name = String::new();
        crate::syntax::format_port(&mut name, port, &crate::syntax::NoPortNames);
        if matches!(
            port,
            OFPP_TABLE | OFPP_NORMAL | OFPP_FLOOD | OFPP_ALL | OFPP_CONTROLLER | OFPP_ANY
        ) {
            self.trace_add(
                NodeKind::Warn,
                format_args!("output_trunc does not support port: {name}"),
            );
            return;
        }
        if port == self.flow.dp.in_port() {
            self.trace_add(NodeKind::Detail, "skipping output to input port");
            return;
        }
        if self.br().ports.get(&port).and_then(|p| p.dp_port).is_none() {
            self.trace_add(
                NodeKind::Error,
                format_args!("output_trunc does not support patch port {name}"),
            );
            return;
        }
        self.commit();
        self.out.push(Action::Trunc(max_len));
        self.output(port, 0);
    }

    fn trace_action(&mut self, a: &OfAction) {
        if self.trace.is_some() {
            let mut s = String::new();
            format_actions(&mut s, std::slice::from_ref(a), &crate::syntax::NoPortNames);
            self.trace_add(NodeKind::Action, s);
        }
    }

    fn do_actions(&mut self, actions: &[OfAction], table: usize) {
        if actions.is_empty() {
            self.trace_add(NodeKind::Action, "drop");
        }
        for (i, a) in actions.iter().enumerate() {
            self.recirc_for_mpls(a);
            if self.exit || self.res.failed.is_some() {
                if self.freezing {
                    self.freeze_unroll(&actions[i..], table);
                }
                return;
            }
            self.trace_action(a);
            match a {
                OfAction::Output { port, max_len } => self.output(*port, *max_len),
                OfAction::OutputTrunc { port, max_len } => self.output_trunc(*port, *max_len),
                OfAction::OutputReg { src, max_len } => {
                    // OVS's xlate_output_reg_action(): only a 16-bit port number is one.
                    let p = src.read(&self.flow);
                    match u16::try_from(p) {
                        Ok(p) => {
                            self.note(format_args!("output port is {p}"));
                            src.unwildcard(&mut self.wc);
                            self.output(p.into(), *max_len);
                        }
                        Err(_) => {
                            self.trace_add(
                                NodeKind::Warn,
                                format_args!("output port {p} is out of range"),
                            );
                        }
                    }
                }
                OfAction::Controller(c) => self.controller_action(c),
                OfAction::SetVlanVid(vid) => {
                    self.wc.dp.set_vlan_tci(0xffff);
                    let pcp = if self.flow.dp.vlan_tci() & flow::key::VLAN_CFI != 0 {
                        self.flow.dp.vlan_tci() & 0xe000
                    } else {
                        self.flow.dp.set_vlan_tpid(0x8100);
                        0
                    };
                    self.flow
                        .dp
                        .set_vlan_tci(pcp | flow::key::VLAN_CFI | (vid & 0xfff));
                }
                OfAction::SetVlanPcp(pcp) => {
                    self.wc.dp.set_vlan_tci(0xffff);
                    let tci = self.flow.dp.vlan_tci();
                    if tci & flow::key::VLAN_CFI == 0 {
                        self.flow.dp.set_vlan_tpid(0x8100);
                    }
                    let vid = if tci & flow::key::VLAN_CFI != 0 {
                        tci & 0xfff
                    } else {
                        0
                    };
                    self.flow
                        .dp
                        .set_vlan_tci((u16::from(*pcp & 7) << 13) | flow::key::VLAN_CFI | vid);
                }
                OfAction::StripVlan => {
                    self.wc.dp.set_vlan_tci(0xffff);
                    let (tpid2, tci2) = (self.flow.dp.vlan2_tpid(), self.flow.dp.vlan2_tci());
                    self.flow.dp.set_vlan_tci(tci2).set_vlan_tpid(tpid2);
                    self.flow.dp.set_vlan2_tci(0).set_vlan2_tpid(0);
                }
                OfAction::PushVlan(tpid) => {
                    self.wc.dp.set_vlan_tci(0xffff);
                    let (tpid1, tci1) = (self.flow.dp.vlan_tpid(), self.flow.dp.vlan_tci());
                    self.flow.dp.set_vlan2_tci(tci1).set_vlan2_tpid(tpid1);
                    // The new tag copies VID and PCP of the one it covers (OpenFlow 1.1+).
                    self.flow
                        .dp
                        .set_vlan_tpid(*tpid)
                        .set_vlan_tci(tci1 | flow::key::VLAN_CFI);
                }
                OfAction::SetEthSrc(a) => self.set_field(FieldId::ETH_SRC, mac(a), u128::MAX),
                OfAction::SetEthDst(a) => self.set_field(FieldId::ETH_DST, mac(a), u128::MAX),
                OfAction::SetIpv4Src(a) => {
                    self.set_field(FieldId::IPV4_SRC, u32::from(*a).into(), u128::MAX)
                }
                OfAction::SetIpv4Dst(a) => {
                    self.set_field(FieldId::IPV4_DST, u32::from(*a).into(), u128::MAX)
                }
                OfAction::SetIpDscp(d) => {
                    self.set_field(FieldId::IP_DSCP, u128::from(*d), u128::MAX)
                }
                OfAction::SetL4SrcPort(p) => self.set_l4(true, *p),
                OfAction::SetL4DstPort(p) => self.set_l4(false, *p),
                OfAction::SetField {
                    field, value, mask, ..
                } => self.set_field(*field, *value, *mask),
                OfAction::SetTunMetadata { field, value } => {
                    if let crate::fields::Loc::TunMetadata(n) = field.field().loc {
                        field.field().unwildcard(&mut self.wc);
                        crate::fields::set_tun_md_wide(
                            &mut self.flow.dp.0,
                            &mut self.flow.meta,
                            n,
                            value,
                        );
                    }
                }
                OfAction::RegMove { src, dst } => {
                    src.unwildcard(&mut self.wc);
                    dst.unwildcard(&mut self.wc);
                    let v = src.read(&self.flow);
                    dst.write(&mut self.flow, v);
                    if self.trace.is_some() {
                        let text = stack::report_subfield(dst, &self.flow);
                        self.note(text);
                    }
                }
                OfAction::DecTtl(_) => {
                    let et = self.flow.dp.eth_type();
                    if et != 0x0800 && et != 0x86dd {
                        continue;
                    }
                    self.wc.dp.set_nw_ttl(0xff).set_nw_proto(0xff);
                    let ttl = self.flow.dp.nw_ttl();
                    if ttl <= 1 {
                        let v = if self.flow.dp.eth_type() == 0x0800 {
                            "IPv4"
                        } else {
                            "IPv6"
                        };
                        self.trace_add(NodeKind::Warn, format_args!("{v} decrement TTL exception"));
                        // Only this rule's actions stop (OVS's compose_dec_ttl()): a
                        // resubmit's caller goes on with its own.
                        self.controller(2, 65535, 0);
                        return;
                    }
                    self.flow.dp.set_nw_ttl(ttl - 1);
                }
                OfAction::SetMplsLabel(l) => self.set_lse(0xfffff000, (*l & 0xfffff) << 12),
                OfAction::SetMplsTc(tc) => self.set_lse(0xe00, u32::from(*tc & 7) << 9),
                OfAction::SetMplsTtl(ttl) => self.set_lse(0xff, u32::from(*ttl)),
                OfAction::DecMplsTtl => {
                    if !is_mpls(self.flow.dp.eth_type()) {
                        continue;
                    }
                    let w = self.wc.dp.mpls_lse0();
                    self.wc.dp.set_mpls_lse0(w | 0xff);
                    let ttl = self.flow.dp.mpls_lse0() & 0xff;
                    if ttl <= 1 {
                        self.note("TTL exceeded: sent to the controller");
                        // As dec_ttl's: this rule's actions stop, not its callers'.
                        self.controller(2, 65535, 0);
                        return;
                    }
                    self.set_lse(0xff, ttl - 1);
                }
                OfAction::PushMpls(et) => self.push_mpls(*et),
                OfAction::PopMpls(et) => self.pop_mpls(*et),
                OfAction::Encap(pt) => self.encap(*pt),
                OfAction::Decap(pt) => self.decap(*pt),
                OfAction::SetTunnel { id, .. } => {
                    self.flow.dp.set_tun_id(*id);
                }
                OfAction::Resubmit { port, table: t, ct } => {
                    let et = self.flow.dp.eth_type();
                    if *ct && (self.flow.dp.ct_nw_proto() == 0 || !matches!(et, 0x0800 | 0x86dd)) {
                        self.trace_add(
                            NodeKind::Error,
                            "resubmit(ct) with non-tracked or non-IP packet!",
                        );
                        continue;
                    }
                    let how = Lookup {
                        ct_orig: *ct,
                        in_port: *port,
                        resubmit: true,
                        counted: true,
                    };
                    self.do_table_ct(t.map_or(table, usize::from), how);
                }
                OfAction::GotoTable(t) => {
                    self.do_table(usize::from(*t));
                    return;
                }
                OfAction::WriteMetadata { value, mask } => {
                    let md = self.flow.meta.metadata;
                    self.flow.meta.metadata = (md & !mask) | (value & mask);
                }
                OfAction::Note(_) => {}
                OfAction::Exit => {
                    self.exit = true;
                    return;
                }
                OfAction::Clone(inner) => self.clone_actions(inner, table),
                OfAction::Ct(ct) => self.conntrack(ct, table),
                // Only inside `ct(...)` (the syntax checks): the `ct` being composed NATs.
                OfAction::Nat(n) => self.ct_nat = Some(n.clone()),
                OfAction::StackPush(sf) => self.stack_push(sf),
                OfAction::StackPop(sf) => self.stack_pop(sf),
                OfAction::WriteActions(set) => self.write_actions(set),
                OfAction::ClearActions => self.clear_actions(),
                // Without an IPFIX collector set, as here, OVS samples nothing.
                OfAction::Sample(_) => {}
                OfAction::Multipath(m) => self.multipath(m),
                OfAction::Bundle(b) => self.bundle(b),
                OfAction::CheckPktLarger { pkt_len, dst } => {
                    // The rest of the list is translated into the check's branches.
                    self.check_pkt_larger(*pkt_len, dst, &actions[i + 1..], table);
                    return;
                }
                // The actions after it run in the next pass (OVS's test action).
                OfAction::DebugRecirc => self.trigger_freeze(),
                OfAction::DebugSlow => self.res.slow_action = true,
                // OVS's compose_ct_clear_action(), only when conntrack has run on the
                // packet: nothing to commit first, and nothing to clear otherwise.
                OfAction::CtClear if self.conntracked => {
                    clear_conntrack(&mut self.flow.dp);
                    self.conntracked = false;
                    self.out.push(Action::CtClear);
                }
                OfAction::CtClear => {}
                OfAction::Group(g) => {
                    if !self.group_action(*g, table) {
                        return;
                    }
                }
                OfAction::Meter(id) => self.meter(*id),
                OfAction::Learn(l) => self.learn_action(l),
                OfAction::FinTimeout { idle, hard } => self.fin_timeout(*idle, *hard),
                OfAction::Conjunction { .. } => self.conjunction_action(),
                OfAction::SetQueue(q) => self.set_queue(*q),
                OfAction::PopQueue => self.pop_queue(),
                OfAction::Enqueue { port, queue } => self.enqueue(*port, *queue),
            }
        }
    }

    fn clone_actions(&mut self, inner: &[OfAction], table: usize) {
        let (flow, base, out) = (
            self.flow.clone(),
            self.base.clone(),
            std::mem::take(&mut self.out),
        );
        let (conntracked, was_mpls) = (self.conntracked, self.was_mpls);
        let stack = self.stack.clone();
        let action_set = self.action_set.clone();
        self.depth += 1;
        self.do_actions(inner, table);
        if !self.freezing {
            self.run_action_set(table);
        }
        if self.freezing {
            self.finish_freezing();
        }
        self.depth -= 1;
        let inner_out = std::mem::replace(&mut self.out, out);
        // As OVS does: field changes inside the clone are undone by the next commit (the flow
        // is restored, the packet is not); only changes a commit cannot undo (MPLS, conntrack,
        // truncation) need the datapath's clone().
        let irreversible = inner_out.iter().any(|a| {
            matches!(
                a,
                Action::PushMpls { .. }
                    | Action::AddMpls { .. }
                    | Action::PopMpls { .. }
                    | Action::Ct(_)
                    | Action::CtClear
                    | Action::Trunc(_)
                    | Action::Recirc(_)
            )
        });
        if irreversible {
            self.out.push(Action::Clone(inner_out));
            self.base = base;
        } else {
            self.out.extend(inner_out);
        }
        self.flow = flow;
        self.conntracked = conntracked;
        self.was_mpls = was_mpls;
        self.stack = stack;
        self.action_set = action_set;
        self.exit = false;
    }

    fn output(&mut self, port: u32, max_len: u16) {
        match port {
            OFPP_IN_PORT => self.output_port(self.flow.dp.in_port(), true),
            OFPP_NORMAL => self.normal(),
            // A packet-out's `output:TABLE`: the packet goes through the tables from table 0
            // as if received on its input port (OVS's xlate_table_action() for OFPP_TABLE).
            OFPP_TABLE => self.do_table_ct(0, Lookup::counted()),
            OFPP_FLOOD => self.flood(None, false),
            OFPP_ALL => self.flood(None, true),
            OFPP_CONTROLLER => {
                // As OVS's xlate_output_action().
                let reason = controller::reason_code(if self.in_packet_out {
                    PacketInReason::PacketOut
                } else if self.in_group_bucket {
                    PacketInReason::Group
                } else if self.in_action_set {
                    PacketInReason::ActionSet
                } else {
                    PacketInReason::Action
                });
                self.controller(reason, if max_len == 0 { 65535 } else { max_len }, 0);
            }
            OFPP_ANY => {}
            OFPP_LOCAL if !self.br().ports.contains_key(&OFPP_LOCAL) => {}
            // The bridge's own port as any other (OVS's xlate_output_action()): never back
            // to the input port.
            p if p < OFPP_MAX || p == OFPP_LOCAL => {
                // Output to the input port needs IN_PORT (OpenFlow); the datapath in_port is
                // consulted either way.
                self.wc.dp.set_in_port(u32::MAX);
                if p == self.flow.dp.in_port() {
                    self.trace_add(NodeKind::Warn, "skipping output to input port");
                    return;
                }
                self.output_port(p, false);
            }
            _ => {}
        }
    }

    fn output_port(&mut self, ofport: u32, _to_in_port: bool) {
        let pipe = self.pipe;
        let br = &pipe.bridges[self.bridge];
        let Some(port) = br.ports.get(&ofport) else {
            self.note(format_args!("output to nonexistent port {ofport}"));
            return;
        };
        if br.port_config(ofport).config & PC_NO_FWD != 0 {
            self.note("OFPPC_NO_FWD set, skipping output");
            return;
        }
        let tunnel = br.tunnels.get(&ofport);
        if self.mirror_snaplen != 0 && tunnel.is_none() && port.dp_port.is_none() {
            self.trace_add(
                NodeKind::Warn,
                "Mirror truncate to ODPP_NONE, skipping output",
            );
            return;
        }
        if let Some(t) = tunnel {
            self.tunnel_output(t, port.dp_port.unwrap_or(0));
            self.mirror_egress(ofport);
            return;
        }
        // Every other port carries Ethernet frames only (`decap()` made an L3 packet).
        if self.flow.dp.packet_type() != 0 {
            self.trace_add(
                NodeKind::Warn,
                "Trying to send non-Ethernet packet through legacy L2 port. Dropping packet.",
            );
            return;
        }
        if ofport == OFPP_LOCAL {
            if let Some(tp) = self.terminate_native_tunnel() {
                self.out.push(Action::TnlPop(tp));
                return;
            }
            if port.dp_port.is_none() {
                self.note("the local port has no datapath device; dropping");
                return;
            }
        }
        if let Some(dp) = port.dp_port {
            self.commit();
            // A mirror's copy keeps its first `snaplen` bytes (OVS's trunc before the output).
            if self.mirror_snaplen > 0 && self.mirror_snaplen < u16::MAX {
                self.out.push(Action::Trunc(u32::from(self.mirror_snaplen)));
            }
            self.out.push(Action::Output(dp));
            self.mirror_egress(ofport);
            return;
        }
        // A patch port: continue in the peer bridge as if received on the peer port.
        let Some((peer_br, peer_port)) = port.peer.as_deref().and_then(|n| pipe.patch_peer(n))
        else {
            self.note("patch port without a peer");
            return;
        };
        self.res.patches.push((self.bridge, ofport));
        let saved = (self.bridge, self.flow.clone(), self.in_port);
        self.bridge = peer_br;
        self.in_port = peer_port;
        self.flow.dp.set_in_port(peer_port);
        self.flow.meta = PipeMeta::default();
        // The peer bridge sees an untracked packet (OVS's patch_port_output()).
        clear_conntrack(&mut self.flow.dp);
        let conntracked = std::mem::replace(&mut self.conntracked, false);
        let was_mpls = self.was_mpls;
        // The peer bridge has a stack of its own.
        let stack = std::mem::take(&mut self.stack);
        let action_set = std::mem::take(&mut self.action_set);
        // The peer bridge's mirrors are its own.
        let mirrors = std::mem::take(&mut self.mirrors);
        self.depth += 1;
        let node = self.trace_bridge();
        self.under(node, |c| {
            c.patch_entry = true;
            c.do_table(0);
            c.patch_entry = false;
            if !c.freezing {
                c.run_action_set(0);
            }
        });
        if self.freezing {
            // The next pass resumes in the peer bridge (OVS's patch_port_output()).
            self.finish_freezing();
        }
        self.depth -= 1;
        self.was_mpls = was_mpls;
        self.bridge = saved.0;
        // The packet as it left through the patch port carries the peer's changes onwards
        // only inside the peer: restore this bridge's view (OVS does the same).
        self.flow = saved.1;
        self.in_port = saved.2;
        self.conntracked = conntracked;
        self.stack = stack;
        self.action_set = action_set;
        self.mirrors = mirrors;
        self.exit = false;
        self.mirror_egress(ofport);
    }
}

/// A rule as a trace shows it found in `table`: the match without its priority, then
/// ", priority N" (and its cookie), as OVS prints it.
fn rule_line(table: usize, m: &crate::pipekey::PipeMatch, prio: u16, cookie: u64) -> String {
    let mut s = String::new();
    format_match(&mut s, m, prio, &crate::syntax::NoPortNames);
    let s = strip_priority(&s);
    let mut line = if s.is_empty() {
        format!("{table:>2}. priority {prio}")
    } else {
        format!("{table:>2}. {s}, priority {prio}")
    };
    if cookie != 0 {
        let _ = write!(line, ", cookie {cookie:#x}");
    }
    line
}

/// The bottom-of-stack bit of an MPLS label stack entry.
const MPLS_BOS: u32 = 0x100;

fn is_mpls(et: u16) -> bool {
    et == 0x8847 || et == 0x8848
}

fn mac(a: &EthAddr) -> u128 {
    a.0.iter().fold(0u128, |v, &b| (v << 8) | u128::from(b))
}

fn port_label(br: &Bridge, p: u32) -> String {
    br.ports
        .get(&p)
        .map_or_else(|| p.to_string(), |port| port.name.clone())
}
