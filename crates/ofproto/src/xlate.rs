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

use flow::odp::{Action, Attr, DpKey, KeyAttrs};
use flow::{EthAddr, FlowKey, Mask};

use std::net::IpAddr;

use crate::bridge::Bridge;
use crate::classifier::RuleId;
use crate::fields::{Field, FieldId};
use crate::fields::{N_TUN_METADATA, TUN_MD_PRESENT, TUN_METADATA_MAX_LEN, TUN_METADATA_SLOT};
use crate::pipekey::{PipeKey, PipeMask, PipeMeta};
use crate::recirc::{FrozenAction, FrozenState, RecircIds};
use crate::syntax::{
    Ct, CtZone, Nat, NatAddrs, OFPP_ALL, OFPP_ANY, OFPP_CONTROLLER, OFPP_FLOOD, OFPP_IN_PORT,
    OFPP_LOCAL, OFPP_MAX, OFPP_NORMAL, OfAction, format_actions, format_match,
};
use crate::tunnel::{FlowOr, Inherit, PtMode, TlvMapping, TunnelConfig, TunnelType, Underlay};

mod freeze;

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
    /// The recirculations the actions fork (`ct(table=N)`), for `ofproto/trace` to follow;
    /// recorded only when tracing.
    pub forks: Vec<Fork>,
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
    let dropped = |mut wc: PipeMask, error: Option<String>, trace: Option<&mut String>| {
        if let (Some(t), Some(e)) = (trace, &error) {
            let _ = writeln!(t, "{e}");
        }
        geneve_mask(&mut wc, key, error.is_some());
        XlateOut {
            mask: wc.dp,
            error,
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
    } else {
        match pipe.receive(key, &mut wc) {
            Some(Ok((b, p, t))) => (b, p, t, None),
            Some(Err(e)) => return dropped(wc, Some(e), trace),
            None => return dropped(wc, None, trace),
        }
    };
    let mut flow = PipeKey {
        dp: key.clone(),
        meta: frozen.as_ref().map_or_else(PipeMeta::default, |st| st.meta),
    };
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
        if key.tun_geneve_len() > 0
            && let Err(e) = geneve_to_slots(&pipe.bridges[bridge].tlv_map, &mut flow.dp)
        {
            return dropped(
                wc,
                Some(format!("Invalid Geneve tunnel metadata: {e}")),
                trace,
            );
        }
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
        key,
        conntracked,
        ct_nat: None,
        was_mpls: false,
        freezing: false,
        frozen: Vec::new(),
        frozen_unroll: None,
    };
    let node = ctx.trace_bridge();
    let table = match &frozen {
        Some(st) => {
            let table = st.table;
            ctx.under(node, |c| {
                let thaw = c.trace_add(NodeKind::Thaw, "thaw");
                c.under(thaw, |c| {
                    c.trace_add(NodeKind::Thaw, format_args!("Resuming from table {table}"));
                    if !st.actions.is_empty() {
                        let acts = freeze::format_frozen(&st.actions);
                        c.trace_add(NodeKind::Thaw, format_args!("Restoring actions: {acts}"));
                    }
                });
            });
            ctx.table_id = table;
            usize::from(table)
        }
        None => 0,
    };
    match frozen.as_ref().filter(|st| !st.actions.is_empty()) {
        Some(st) => ctx.under(node, |c| c.run_frozen(&st.actions, table)),
        None => ctx.under(node, |c| c.do_table(table)),
    }
    if ctx.freezing {
        ctx.finish_freezing();
    }
    let mut res = std::mem::take(&mut ctx.res);
    res.actions = std::mem::take(&mut ctx.out);
    if res.failed.is_some() {
        res.actions.clear();
    }
    // A tunnel output that is the last action needs no clone: the packet is not used after.
    if let Some(Action::Clone(sub)) = res.actions.last()
        && sub.iter().any(|a| matches!(a, Action::TnlPush(_)))
        && let Some(Action::Clone(sub)) = res.actions.pop()
    {
        res.actions.extend(sub);
    }
    geneve_mask(&mut ctx.wc, key, false);
    let mut mask = ctx.wc.dp.clone();
    // The datapath key has datapath port numbers and no registers: in_port stays exact.
    mask.set_in_port(u32::MAX);
    mask.normalize();
    res.mask = mask;
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

/// Clears the conntrack fields of a key (OVS's `flow_clear_conntrack()`): state, zone, mark,
/// label and the original-direction tuple.
fn clear_conntrack(k: &mut FlowKey) {
    k.set_ct_state(0)
        .set_ct_zone(0)
        .set_ct_mark(0)
        .set_ct_label(0)
        .set_ct_nw_proto(0)
        .set_ct_ipv6_src(std::net::Ipv6Addr::UNSPECIFIED)
        .set_ct_ipv6_dst(std::net::Ipv6Addr::UNSPECIFIED)
        .set_ct_tp_src(0)
        .set_ct_tp_dst(0);
}

/// Swaps the packet's 5-tuple with the conntrack original-direction tuple (OVS's
/// `tuple_swap_flow()`), for `resubmit(,N,ct)`; applied to the flow and to its wildcards.
fn tuple_swap(k: &mut flow::FlowWords, ipv4: bool) {
    let (p, cp) = (k.nw_proto(), k.ct_nw_proto());
    k.set_nw_proto(cp).set_ct_nw_proto(p);
    if ipv4 {
        let (s, d, cs, cd) = (k.nw_src(), k.nw_dst(), k.ct_nw_src(), k.ct_nw_dst());
        k.set_nw_src(cs).set_nw_dst(cd);
        k.set_ct_nw_src(s);
        k.set_ct_nw_dst(d);
    } else {
        let (s, d) = (k.ipv6_src(), k.ipv6_dst());
        let (cs, cd) = (k.ct_ipv6_src(), k.ct_ipv6_dst());
        k.set_ipv6_src(cs)
            .set_ipv6_dst(cd)
            .set_ct_ipv6_src(s)
            .set_ct_ipv6_dst(d);
    }
    let (ts, td, cts, ctd) = (k.tp_src(), k.tp_dst(), k.ct_tp_src(), k.ct_tp_dst());
    k.set_tp_src(cts)
        .set_tp_dst(ctd)
        .set_ct_tp_src(ts)
        .set_ct_tp_dst(td);
}

/// The datapath `nat` of an OpenFlow `nat(...)` (OVS's `put_ct_nat()`): the range's upper
/// ends only when above the lower ones.
fn odp_nat(n: &Nat) -> flow::odp::CtNat {
    use flow::odp::NatKind as K;
    let mut out = flow::odp::CtNat {
        kind: n.kind.map(|k| match k {
            crate::syntax::NatKind::Src => K::Src,
            crate::syntax::NatKind::Dst => K::Dst,
        }),
        ..Default::default()
    };
    if out.kind.is_none() {
        return out;
    }
    out.persistent = n.persistent;
    out.hash = n.hash;
    out.random = n.random && !n.hash;
    match n.addrs {
        Some(NatAddrs::V4(lo, hi)) => {
            out.ip_min = Some(IpAddr::V4(lo));
            out.ip_max = (hi > lo).then_some(IpAddr::V4(hi));
        }
        Some(NatAddrs::V6(lo, hi)) => {
            out.ip_min = Some(IpAddr::V6(lo));
            out.ip_max = (hi > lo).then_some(IpAddr::V6(hi));
        }
        None => {}
    }
    if let (Some(_), Some((lo, hi))) = (n.addrs, n.ports)
        && lo != 0
    {
        out.proto_min = lo;
        out.proto_max = if hi > lo { hi } else { 0 };
    }
    out
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

    fn do_table(&mut self, table: usize) {
        self.do_table_ct(table, false);
    }

    /// Looks `table` up and runs the rule's actions; with `ct_orig`, the lookup sees the
    /// conntrack original-direction tuple in place of the packet's (`resubmit(,N,ct)`).
    fn do_table_ct(&mut self, table: usize, ct_orig: bool) {
        if self.exit {
            return;
        }
        if self.was_mpls {
            // A lookup may match on the L3 header an MPLS pop hid (OVS's
            // xlate_table_action()): the next pass looks up this table.
            self.trigger_freeze();
            return;
        }
        if self.depth >= MAX_DEPTH || self.resubmits >= MAX_RESUBMITS {
            // OVS's xlate_resubmit_resource_check(): an error, and the packet is dropped.
            let (text, failed) = if self.depth >= MAX_DEPTH {
                (
                    format!("over max translation depth {MAX_DEPTH}"),
                    "Recursion too deep",
                )
            } else {
                (
                    format!("over {MAX_RESUBMITS} resubmit actions"),
                    "Too many resubmits",
                )
            };
            self.trace_add(NodeKind::Error, text);
            self.res.failed = Some(failed);
            self.out.clear();
            self.exit = true;
            return;
        }
        let pipe = self.pipe;
        let br = &pipe.bridges[self.bridge];
        let Some(cls) = br.tables.get(table) else {
            return;
        };
        let ipv4 = self.flow.dp.eth_type() == 0x0800;
        if ct_orig {
            tuple_swap(&mut self.flow.dp, ipv4);
            tuple_swap(&mut self.wc.dp, ipv4);
        }
        let found = cls.lookup(&self.flow, &mut self.wc);
        if ct_orig {
            tuple_swap(&mut self.flow.dp, ipv4);
            tuple_swap(&mut self.wc.dp, ipv4);
        }
        match found {
            None => {
                let node = self.trace_add(NodeKind::Table, format_args!("{table:>2}. No match."));
                self.under(node, |c| c.trace_add(NodeKind::Action, "drop"));
            }
            Some(id) => {
                let (m, prio, rule) = cls.get(id).expect("lookup returns live rules");
                self.res.rules.push((self.bridge, table, id));
                let node = if self.trace.is_some() {
                    let mut s = String::new();
                    format_match(&mut s, m, prio, &crate::syntax::NoPortNames);
                    // OVS prints the match without its priority, then ", priority N".
                    let s = strip_priority(&s);
                    let line = if s.is_empty() {
                        format!("{table:>2}. priority {prio}")
                    } else {
                        format!("{table:>2}. {s}, priority {prio}")
                    };
                    let node = self.trace_add(NodeKind::Table, line);
                    if rule.cookie != 0 {
                        let cookie = format!("cookie={:#x}", rule.cookie);
                        self.under(node, |c| c.trace_add(NodeKind::Action, cookie));
                    }
                    node
                } else {
                    None
                };
                let saved = (self.rule_cookie, self.table_id, self.rule_is_miss);
                self.rule_cookie = rule.cookie;
                self.table_id = table as u8;
                self.rule_is_miss = prio == 0 && m.mask().is_catchall();
                self.under(node, |c| c.do_actions(&rule.actions, table));
                (self.rule_cookie, self.table_id, self.rule_is_miss) = saved;
            }
        }
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
                OfAction::OutputTrunc { port, max_len } => {
                    self.commit();
                    self.out.push(Action::Trunc(*max_len));
                    self.output(*port, 0);
                }
                OfAction::OutputReg { src, max_len } => {
                    src.unwildcard(&mut self.wc);
                    let p = src.read(&self.flow) as u32;
                    self.output(p, *max_len);
                }
                OfAction::Controller(c) => self.controller(1, c.max_len, c.id),
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
                OfAction::SetField { field, value, mask } => self.set_field(*field, *value, *mask),
                OfAction::RegMove { src, dst } => {
                    src.unwildcard(&mut self.wc);
                    dst.unwildcard(&mut self.wc);
                    let v = src.read(&self.flow);
                    dst.write(&mut self.flow, v);
                    if self.trace.is_some() {
                        self.note(format_args!("{dst} is now {v}"));
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
                        self.controller(2, 65535, 0);
                        self.exit = true;
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
                        self.controller(2, 65535, 0);
                        self.exit = true;
                        return;
                    }
                    self.set_lse(0xff, ttl - 1);
                }
                OfAction::PushMpls(et) => self.push_mpls(*et),
                OfAction::PopMpls(et) => self.pop_mpls(*et),
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
                    let saved = self.flow.dp.in_port();
                    if let Some(p) = port {
                        self.flow.dp.set_in_port(*p);
                    }
                    self.resubmits += 1;
                    self.depth += 1;
                    self.do_table_ct(t.map_or(table, usize::from), *ct);
                    self.depth -= 1;
                    self.flow.dp.set_in_port(saved);
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
                OfAction::CtClear => {
                    // OVS's compose_ct_clear_action(): nothing to commit first.
                    clear_conntrack(&mut self.flow.dp);
                    self.conntracked = false;
                    self.out.push(Action::CtClear);
                }
                // Queues, groups, meters and fin_timeout have no datapath effect here yet.
                _ => self.note("action not supported by flowpath's translation; ignored"),
            }
        }
    }

    /// `ct(...)`, as OVS's `compose_conntrack_action()`: commit what is pending, run the
    /// nested actions to learn which `ct_mark`/`ct_label` bits they write (the datapath's
    /// `mark=`/`label=`) and the `nat`, emit `ct`, fork with `table=`, then clear the
    /// conntrack fields: after `ct` this pass cannot know them.
    fn conntrack(&mut self, ct: &Ct, table: usize) {
        let zone = match &ct.zone {
            CtZone::Imm(z) => *z,
            CtZone::Field(sf) => {
                sf.unwildcard(&mut self.wc);
                sf.read(&self.flow) as u16
            }
        };
        self.commit();
        // The nested actions' writes of ct_mark and ct_label are what the action sets: record
        // them in wildcards cleared for the purpose, then restore the consulted bits.
        let old = (self.wc.dp.ct_mark(), self.wc.dp.ct_label());
        self.wc.dp.set_ct_mark(0).set_ct_label(0);
        self.ct_nat = None;
        self.do_actions(&ct.actions, table);
        let (mark_m, label_m) = (self.wc.dp.ct_mark(), self.wc.dp.ct_label());
        self.wc.dp.set_ct_mark(old.0).set_ct_label(old.1);
        let helper = match ct.alg {
            0 => None,
            21 => Some("ftp".to_owned()),
            69 => Some("tftp".to_owned()),
            n => {
                self.trace_add(
                    NodeKind::Error,
                    format_args!("cannot serialize ct_helper {n}"),
                );
                None
            }
        };
        let f = &self.flow.dp;
        let action = flow::odp::CtAction {
            // force_commit is a commit of its own kind: the datapath takes one or the other.
            commit: ct.commit && !ct.force,
            force_commit: ct.commit && ct.force,
            zone,
            mark: (mark_m != 0).then(|| (f.ct_mark() & mark_m, mark_m)),
            label: (label_m != 0).then(|| (f.ct_label() & label_m, label_m)),
            helper,
            timeout: None,
            nat: self.ct_nat.as_ref().map(odp_nat),
        };
        self.out.push(Action::Ct(Box::new(action)));
        if let Some(t) = ct.table {
            self.conntracked = true;
            self.recirculate_and_fork(t, zone);
        }
        self.ct_nat = None;
        clear_conntrack(&mut self.flow.dp);
        self.note("Sets the packet to an untracked state, and clears all the conntrack fields.");
        self.conntracked = false;
    }

    /// Freezes the pipeline state for a pass that resumes at `table` and emits `recirc(ID)`;
    /// translation of this pass goes on (OVS's `compose_recirculate_and_fork()`).
    fn recirculate_and_fork(&mut self, table: u8, zone: u16) {
        let state = FrozenState {
            bridge: self.br().name.clone(),
            table,
            in_port: self.flow.dp.in_port(),
            meta: self.flow.meta,
            tunnel: crate::recirc::tunnel_snapshot(&self.flow.dp),
            conntracked: self.conntracked,
            actions: Vec::new(),
        };
        let Some(id) = self.pipe.recirc.intern(state) else {
            self.trace_add(NodeKind::Error, "Failed to allocate recirculation id");
            self.res.failed = Some("No recirculation context");
            self.exit = true;
            return;
        };
        self.out.push(Action::Recirc(id));
        if self.trace.is_some() {
            // The packet the datapath recirculates: as committed, with its own input port and
            // tunnel metadata (raw GENEVE options).
            let mut key = self.flow.dp.clone();
            key.set_in_port(self.key.in_port());
            crate::recirc::tunnel_restore(
                &mut key,
                crate::recirc::tunnel_snapshot(self.key).as_deref(),
            );
            key.set_recirc_id(id);
            self.res.forks.push(Fork {
                recirc_id: id,
                table,
                zone,
                key,
                meta: self.flow.meta,
                nat: self.ct_nat.clone(),
            });
            self.note(format_args!(
                "A clone of the packet is forked to recirculate. The forked pipeline will be \
                 resumed at table {table}."
            ));
        }
    }

    /// Sends the packet to the controller, as OVS's datapath action says it (`userspace` with
    /// a `controller(...)` cookie): the datapath counts such packets, as no controller
    /// connection exists yet. `reason` is OpenFlow's packet-in reason (1 action, 2 invalid
    /// TTL; an action of a table-miss rule is 6, explicit miss). As in OVS, the state the
    /// packet-in would be resumed from gets a recirculation id, and a translation without
    /// side effects (a trace) marks the packet-in `dont_send`.
    fn controller(&mut self, reason: u8, max_len: u16, id: u16) {
        const OFPR_ACTION: u8 = 1;
        const OFPR_EXPLICIT_MISS: u8 = 6;
        let reason = if reason == OFPR_ACTION && self.rule_is_miss {
            OFPR_EXPLICIT_MISS
        } else {
            reason
        };
        let state = FrozenState {
            bridge: self.br().name.clone(),
            table: self.table_id,
            in_port: self.flow.dp.in_port(),
            meta: self.flow.meta,
            tunnel: crate::recirc::tunnel_snapshot(&self.flow.dp),
            conntracked: self.conntracked,
            actions: Vec::new(),
        };
        let Some(recirc_id) = self.pipe.recirc.intern(state) else {
            self.trace_add(NodeKind::Error, "Failed to allocate recirculation id");
            self.res.failed = Some("No recirculation context");
            self.exit = true;
            return;
        };
        self.br()
            .n_controller
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.commit();
        let cookie = if self.rule_cookie == 0 {
            "0".to_owned()
        } else {
            format!("{:#x}", self.rule_cookie)
        };
        let dont_send = u8::from(self.trace.is_some() && !self.learn);
        self.out
            .push(Action::Userspace(Box::new(flow::odp::Userspace {
                pid: 0,
                cookie: flow::odp::UserCookie::Text(format!(
                    "controller(reason={reason},dont_send={dont_send},continuation=0,\
                     recirc_id={recirc_id},rule_cookie={cookie},controller_id={id},\
                     max_len={max_len})"
                )),
                actions: false,
                tunnel_out_port: None,
            })));
    }

    fn set_l4(&mut self, src: bool, port: u16) {
        let proto = self.flow.dp.nw_proto();
        let et = self.flow.dp.eth_type();
        self.wc.dp.set_nw_proto(0xff);
        if (et != 0x0800 && et != 0x86dd) || !matches!(proto, 6 | 17 | 132) {
            return;
        }
        let f = match (proto, src) {
            (6, true) => FieldId::TCP_SRC,
            (6, false) => FieldId::TCP_DST,
            (17, true) => FieldId::UDP_SRC,
            (17, false) => FieldId::UDP_DST,
            (_, true) => FieldId::SCTP_SRC,
            (_, false) => FieldId::SCTP_DST,
        };
        self.set_field(f, u128::from(port), u128::MAX);
    }

    /// `set_field`/`load`: writes the field if its prerequisites hold (OVS skips the action
    /// otherwise), consulting the bits it writes (commit compares them with the packet's).
    fn set_field(&mut self, id: FieldId, value: u128, mask: u128) {
        let f: &Field = id.field();
        if !f.prereq.is_met(&self.flow) {
            self.wc.dp.set_eth_type(0xffff);
            return;
        }
        let m = mask & f.value_mask();
        let mut fm = PipeKey::new();
        f.set(&mut fm, m);
        let mut add = PipeMask::new();
        add.dp.0 = fm.dp.0.clone();
        add.meta = fm.meta;
        if m == f.value_mask() {
            f.unwildcard(&mut self.wc);
        } else {
            self.wc.union_with(&add);
        }
        f.set_masked(&mut self.flow, value, m);
    }

    fn set_lse(&mut self, bits: u32, v: u32) {
        if !is_mpls(self.flow.dp.eth_type()) {
            return;
        }
        let lse = self.flow.dp.mpls_lse0();
        self.flow.dp.set_mpls_lse0((lse & !bits) | (v & bits));
    }

    fn push_mpls(&mut self, eth_type: u16) {
        self.commit();
        let f = &mut self.flow.dp;
        let old_et = f.eth_type();
        let lse = if is_mpls(old_et) {
            self.wc.dp.set_mpls_lse0(u32::MAX);
            f.mpls_lse0() & !0x100
        } else {
            // As OVS: label 0 (IPv4 explicit null) or 2 (IPv6's), the TC the DSCP's low three
            // bits (OVS shifts the DSCP into the 3-bit field, which keeps those; Debian's OVS
            // gives DSCP 46 the TC 6), the TTL the IP TTL (64 when that is 0), bottom of stack.
            let (label, tc, ttl) = if matches!(old_et, 0x0800 | 0x86dd) {
                // Added to what is already matched (a rule's nw_ecn stays in the mask).
                let m = self.wc.dp.nw_tos();
                self.wc.dp.set_nw_tos(m | 0xfc).set_nw_ttl(0xff);
                let ttl = match f.nw_ttl() {
                    0 => 64,
                    t => u32::from(t),
                };
                let label = if old_et == 0x86dd { 2 } else { 0 };
                (label, u32::from(f.nw_tos() >> 2 & 7), ttl)
            } else {
                (0, 0, 64)
            };
            label << 12 | tc << 9 | 0x100 | ttl
        };
        let (l0, l1) = (f.mpls_lse0(), f.mpls_lse1());
        if is_mpls(old_et) {
            f.set_mpls_lse2(l1).set_mpls_lse1(l0);
        }
        f.set_mpls_lse0(lse).set_eth_type(eth_type);
        self.out.push(Action::PushMpls { lse, eth_type });
        self.base = self.flow.dp.clone();
    }

    /// `pop_mpls`, as OVS's `compose_mpls_pop_action()`: the bottom-of-stack bits of the
    /// labels counted and the labels that move up are what the megaflow matches; popping to a
    /// non-MPLS ethertype hides the L3 header from the rest of this pass ([`freeze`]).
    fn pop_mpls(&mut self, eth_type: u16) {
        let n = self.count_mpls_labels();
        if n == 0 {
            return;
        }
        let f = &self.flow.dp;
        let lse = [f.mpls_lse0(), f.mpls_lse1(), f.mpls_lse2()];
        if n == lse.len() && lse[n - 1] & MPLS_BOS == 0 {
            // The label under the third is unknown: nothing can be moved up into its place.
            self.trace_add(
                NodeKind::Error,
                "dropping packet on which an MPLS pop action can't be performed as it has \
                 more MPLS LSEs than the 3 supported.",
            );
            self.res.failed = Some("Too many MPLS labels");
            self.out.clear();
            self.exit = true;
            return;
        }
        self.commit();
        if n > 1 {
            self.wc.dp.set_mpls_lse1(u32::MAX);
        }
        if n > 2 {
            self.wc.dp.set_mpls_lse2(u32::MAX);
        }
        let mut left = lse;
        left.copy_within(1..n, 0);
        left[n - 1] = 0;
        let f = &mut self.flow.dp;
        f.set_mpls_lse0(left[0])
            .set_mpls_lse1(left[1])
            .set_mpls_lse2(left[2])
            .set_eth_type(eth_type);
        self.out.push(Action::PopMpls { eth_type });
        self.base = self.flow.dp.clone();
        if !is_mpls(eth_type) {
            self.was_mpls = true;
        }
    }

    /// The packet's MPLS labels, as OVS's `flow_count_mpls_labels()`: up to the one with the
    /// bottom-of-stack bit, whose bit (and those above it) the megaflow then matches.
    fn count_mpls_labels(&mut self) -> usize {
        if !is_mpls(self.flow.dp.eth_type()) {
            return 0;
        }
        let f = &self.flow.dp;
        let lse = [f.mpls_lse0(), f.mpls_lse1(), f.mpls_lse2()];
        let mut n = 0;
        for (i, l) in lse.into_iter().enumerate() {
            let w = &mut self.wc.dp;
            let m = [w.mpls_lse0(), w.mpls_lse1(), w.mpls_lse2()][i] | MPLS_BOS;
            match i {
                0 => w.set_mpls_lse0(m),
                1 => w.set_mpls_lse1(m),
                _ => w.set_mpls_lse2(m),
            };
            if l & MPLS_BOS != 0 {
                return i + 1;
            }
            if l != 0 {
                n += 1;
            }
        }
        n
    }

    fn clone_actions(&mut self, inner: &[OfAction], table: usize) {
        let (flow, base, out) = (
            self.flow.clone(),
            self.base.clone(),
            std::mem::take(&mut self.out),
        );
        let (conntracked, was_mpls) = (self.conntracked, self.was_mpls);
        self.depth += 1;
        self.do_actions(inner, table);
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
        self.exit = false;
    }

    fn output(&mut self, port: u32, max_len: u16) {
        match port {
            OFPP_IN_PORT => self.output_port(self.flow.dp.in_port(), true),
            OFPP_NORMAL => self.normal(),
            OFPP_FLOOD | OFPP_ALL => self.flood(None),
            OFPP_CONTROLLER => self.controller(1, if max_len == 0 { 65535 } else { max_len }, 0),
            OFPP_LOCAL if self.br().ports.contains_key(&OFPP_LOCAL) => {
                self.output_port(OFPP_LOCAL, false);
            }
            OFPP_LOCAL | OFPP_ANY => {}
            p if p < OFPP_MAX => {
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
        if let Some(t) = br.tunnels.get(&ofport) {
            self.tunnel_output(t, port.dp_port.unwrap_or(0));
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
            self.out.push(Action::Output(dp));
            return;
        }
        // A patch port: continue in the peer bridge as if received on the peer port.
        let Some((peer_br, peer_port)) = port.peer.as_deref().and_then(|n| pipe.patch_peer(n))
        else {
            self.note("patch port without a peer");
            return;
        };
        let saved = (self.bridge, self.flow.clone(), self.in_port);
        self.bridge = peer_br;
        self.in_port = peer_port;
        self.flow.dp.set_in_port(peer_port);
        self.flow.meta = PipeMeta::default();
        // The peer bridge sees an untracked packet (OVS's patch_port_output()).
        clear_conntrack(&mut self.flow.dp);
        let conntracked = std::mem::replace(&mut self.conntracked, false);
        let was_mpls = self.was_mpls;
        self.depth += 1;
        let node = self.trace_bridge();
        self.under(node, |c| c.do_table(0));
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
        self.exit = false;
    }

    /// For a packet sent to the bridge's local port: the tunnel datapath port that terminates
    /// it when it is addressed to the bridge (its Ethernet and an IP address) and to a tunnel's
    /// protocol and port, as OVS's `terminate_native_tunnel`. ARP replies and neighbour
    /// advertisements to the bridge are snooped on the way.
    fn terminate_native_tunnel(&mut self) -> Option<u32> {
        let pipe = self.pipe;
        let br = &pipe.bridges[self.bridge];
        let hw = br.hwaddr?;
        if br.addrs.is_empty() {
            return None;
        }
        self.wc.dp.set_eth_dst(EthAddr::BROADCAST);
        if self.flow.dp.eth_dst() != hw {
            return None;
        }
        let f = &self.flow.dp;
        let dst = match f.eth_type() {
            0x0806 => {
                self.snoop_arp();
                return None;
            }
            0x0800 => {
                self.wc.dp.set_nw_dst(std::net::Ipv4Addr::BROADCAST);
                IpAddr::V4(f.nw_dst())
            }
            0x86dd => {
                self.wc.dp.set_ipv6_dst(std::net::Ipv6Addr::from(u128::MAX));
                IpAddr::V6(f.ipv6_dst())
            }
            _ => return None,
        };
        if !br.addrs.iter().any(|(a, _)| *a == dst) {
            return None;
        }
        self.wc.dp.set_nw_proto(0xff);
        let proto = f.nw_proto();
        if proto == 58 {
            self.snoop_nd();
            return None;
        }
        let udp_port = match proto {
            17 => {
                self.wc.dp.set_tp_dst(0xffff);
                Some(f.tp_dst())
            }
            47 => None,
            _ => return None,
        };
        for b in &pipe.bridges {
            for (ofp, t) in &b.tunnels {
                let listens = match udp_port {
                    Some(p) => t.kind != TunnelType::Gre && t.dst_port == p,
                    None => t.kind == TunnelType::Gre,
                };
                let local_ok = match t.local_ip {
                    Some(FlowOr::Fixed(l)) => l == dst,
                    _ => true,
                };
                if listens
                    && local_ok
                    && let Some(dp) = b.ports.get(ofp).and_then(|p| p.dp_port)
                {
                    self.note(format_args!(
                        "native tunnel termination: tnl_pop on {}",
                        t.dp_port_name()
                    ));
                    return Some(dp);
                }
            }
        }
        None
    }

    /// Learns the sender of an ARP reply to this bridge as a tunnel neighbour.
    fn snoop_arp(&mut self) {
        let br = &self.pipe.bridges[self.bridge];
        let f = &self.flow.dp;
        self.wc
            .dp
            .set_nw_proto(0xff)
            .set_nw_src(std::net::Ipv4Addr::BROADCAST)
            .set_nw_dst(std::net::Ipv4Addr::BROADCAST)
            .set_arp_sha(EthAddr::BROADCAST);
        let tpa = IpAddr::V4(f.nw_dst());
        if f.nw_proto() != 2
            || f.arp_sha() == EthAddr::ZERO
            || !br.addrs.iter().any(|(a, _)| *a == tpa)
        {
            return;
        }
        self.learn_neigh(IpAddr::V4(f.nw_src()), f.arp_sha());
    }

    /// Learns the target of a neighbour advertisement to this bridge as a tunnel neighbour.
    fn snoop_nd(&mut self) {
        let f = &self.flow.dp;
        self.wc
            .dp
            .set_tp_src(0xffff)
            .set_nd_target(std::net::Ipv6Addr::from(u128::MAX))
            .set_arp_tha(EthAddr::BROADCAST);
        // ICMPv6 type 136 (neighbour advertisement) with a target link-layer address.
        if f.tp_src() != 136 || f.arp_tha() == EthAddr::ZERO {
            return;
        }
        self.learn_neigh(IpAddr::V6(f.nd_target()), f.arp_tha());
    }

    fn learn_neigh(&mut self, ip: IpAddr, mac: EthAddr) {
        if !self.learn {
            return;
        }
        let name = self.br().name.clone();
        if self.pipe.underlay.set_neigh(&name, ip, mac, false) {
            self.res.neigh_learned = true;
            self.note(format_args!(
                "learned tunnel neighbour {ip} at {mac} on {name}"
            ));
        }
    }

    /// Output to a tunnel port: the outer header from the port's options, the route and the
    /// neighbour; `tnl_push`; then the underlay bridge's pipeline as a packet from its local
    /// port (NORMAL there picks the physical port). All in one datapath pass, inside a clone
    /// unless it is the last action (see `translate`).
    fn tunnel_output(&mut self, t: &TunnelConfig, tnl_dp_port: u32) {
        let pipe = self.pipe;
        self.note("output to native tunnel");
        let remote = match t.remote_ip {
            FlowOr::Fixed(a) => a,
            FlowOr::Flow => {
                let (_, dst) = tunnel_endpoints(&self.flow.dp);
                if dst.is_ipv4() {
                    self.wc.dp.set_tun_ipv4_dst(std::net::Ipv4Addr::BROADCAST);
                } else {
                    self.wc
                        .dp
                        .set_tun_ipv6_dst(std::net::Ipv6Addr::from(u128::MAX));
                }
                if dst.is_unspecified() {
                    self.note("tunnel destination not set (remote_ip=flow); dropping");
                    return;
                }
                dst
            }
        };
        let key = match t.out_key {
            Some(FlowOr::Fixed(k)) => Some(k),
            Some(FlowOr::Flow) => {
                self.wc.dp.set_tun_id(u64::MAX);
                Some(self.flow.dp.tun_id())
            }
            None => None,
        };
        let Some(route) = pipe.underlay.route(&pipe.bridges, remote) else {
            self.note(format_args!(
                "native tunnel routing failed for {remote}; dropping"
            ));
            return;
        };
        let src = match t.local_ip {
            Some(FlowOr::Fixed(a)) => a,
            Some(FlowOr::Flow) => {
                let (src, _) = tunnel_endpoints(&self.flow.dp);
                if src.is_ipv4() {
                    self.wc.dp.set_tun_ipv4_src(std::net::Ipv4Addr::BROADCAST);
                } else {
                    self.wc
                        .dp
                        .set_tun_ipv6_src(std::net::Ipv6Addr::from(u128::MAX));
                }
                src
            }
            None => route.src,
        };
        let Some(ubr) = pipe.bridges.iter().position(|b| b.name == route.bridge) else {
            return;
        };
        let under = &pipe.bridges[ubr];
        self.note(format_args!("tunneling to {remote} via {}", under.name));
        let Some(smac) = under.hwaddr else {
            self.note(format_args!(
                "bridge {} has no hwaddr; dropping",
                under.name
            ));
            return;
        };
        let Some(dmac) = pipe.underlay.lookup_neigh(route.next_hop) else {
            self.note(format_args!(
                "neighbour {} unresolved on bridge {}: sending {} request; dropping",
                route.next_hop,
                under.name,
                if route.next_hop.is_ipv4() {
                    "ARP"
                } else {
                    "ND"
                },
            ));
            self.neigh_request(ubr, smac, route.src, route.next_hop);
            return;
        };
        self.note(format_args!(
            "tunneling from {smac} {src} to {dmac} {remote}"
        ));
        let et = self.flow.dp.eth_type();
        let is_ip = matches!(et, 0x0800 | 0x86dd);
        let tos = match t.tos {
            Inherit::Fixed(v) => v,
            // DSCP only: the datapath's push copies the ECN field from each packet
            // (`tnl_push` with a Not-ECT template), so the megaflow need not match it.
            Inherit::Inherit if is_ip => {
                let m = self.wc.dp.nw_tos();
                self.wc.dp.set_nw_tos(m | 0xfc);
                self.flow.dp.nw_tos() & 0xfc
            }
            Inherit::Inherit => 0,
        };
        let ttl = match t.ttl {
            Inherit::Fixed(v) => v,
            Inherit::Inherit if is_ip => {
                self.wc.dp.set_nw_ttl(0xff);
                self.flow.dp.nw_ttl()
            }
            Inherit::Inherit => 64,
        };
        let l3 = match t.packet_type {
            PtMode::LegacyL2 => false,
            PtMode::LegacyL3 => true,
            PtMode::Ptap => self.flow.dp.packet_type() != 0,
        };
        let options = if t.kind == TunnelType::Geneve {
            self.geneve_options()
        } else {
            Vec::new()
        };
        self.commit();
        let mut sub = Vec::new();
        if l3 && self.base.packet_type() == 0 {
            sub.push(Action::PopEth);
        }
        let header = tnl_header(&TnlParams {
            t,
            src,
            dst: remote,
            smac,
            dmac,
            key,
            tos,
            ttl,
            payload: if l3 { et } else { 0x6558 },
            options,
        });
        let (dl_type, outer_proto) = (
            header.dl_type,
            match t.kind {
                TunnelType::Gre => 47,
                _ => 17,
            },
        );
        let local_dp = under.ports.get(&OFPP_LOCAL).and_then(|p| p.dp_port);
        sub.push(Action::TnlPush(Box::new(flow::odp::TnlPush {
            tnl_port: tnl_dp_port,
            out_port: local_dp.unwrap_or(0),
            header,
        })));
        // The underlay bridge sees the encapsulated packet coming from its local port.
        let mut outer = PipeKey::new();
        outer
            .dp
            .set_in_port(OFPP_LOCAL)
            .set_eth_src(smac)
            .set_eth_dst(dmac)
            .set_eth_type(dl_type)
            .set_nw_proto(outer_proto)
            .set_nw_tos(tos)
            .set_nw_ttl(ttl);
        match (src, remote) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                outer.dp.set_nw_src(s).set_nw_dst(d);
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                outer.dp.set_ipv6_src(s).set_ipv6_dst(d);
            }
            _ => {
                self.note("tunnel endpoints of different IP versions; dropping");
                return;
            }
        }
        if outer_proto == 17 {
            outer.dp.set_tp_dst(t.dst_port);
        }
        let outer_out = self.xlate_from_local(ubr, outer);
        if !outer_out
            .iter()
            .any(|a| matches!(a, Action::Output(_) | Action::Clone(_)))
        {
            self.note("the underlay bridge sent the tunnel packet nowhere");
            return;
        }
        sub.extend(outer_out);
        self.out.push(Action::Clone(sub));
    }

    /// The actions for a packet with key `key` that bridge `ubr` receives from its local
    /// port: the underlay part of a tunnel output, or a packet the slow path sends. The packet
    /// is made from the configuration, not from the packet being translated, so what the
    /// underlay's tables consult says nothing about the megaflow: the mask is restored.
    fn xlate_from_local(&mut self, ubr: usize, mut key: PipeKey) -> Vec<Action> {
        key.dp.set_in_port(OFPP_LOCAL);
        let saved_out = std::mem::take(&mut self.out);
        let saved = (
            self.bridge,
            std::mem::replace(&mut self.flow, key.clone()),
            std::mem::replace(&mut self.base, key.dp),
            self.in_port,
            self.wc.clone(),
        );
        self.bridge = ubr;
        self.in_port = OFPP_LOCAL;
        self.depth += 1;
        let node = self.trace_bridge();
        self.under(node, |c| c.do_table(0));
        self.depth -= 1;
        let out = std::mem::replace(&mut self.out, saved_out);
        (self.bridge, self.flow, self.base, self.in_port, self.wc) = saved;
        self.exit = false;
        out
    }

    /// Asks for the MAC address of tunnel next hop `target` on underlay bridge `ubr`: an ARP
    /// request (IPv4) or a neighbour solicitation (IPv6) from the bridge's address, sent
    /// through the bridge's tables as from its local port, as OVS's `tnl_send_arp_request`.
    /// The reply comes back to the bridge and is snooped (`snoop_arp`, `snoop_nd`), which
    /// revalidates the flows that needed it. Only with side effects allowed (upcalls,
    /// `ofproto/trace -generate`), not in revalidation.
    fn neigh_request(&mut self, ubr: usize, smac: EthAddr, src: IpAddr, target: IpAddr) {
        self.res.neigh_pending = true;
        if !self.learn {
            return;
        }
        let frame = crate::tunnel::neigh_request(smac, src, target);
        let mut key = PipeKey::new();
        flow::extract::extract(&frame, &mut key.dp);
        let actions = self.xlate_from_local(ubr, key);
        if actions.is_empty() {
            self.note("the underlay bridge sent the neighbour request nowhere");
            return;
        }
        let pipe = self.pipe;
        let in_port = pipe.bridges[ubr]
            .ports
            .get(&OFPP_LOCAL)
            .and_then(|p| p.dp_port)
            .unwrap_or(u32::MAX);
        self.res.packet_outs.push(PacketOut {
            frame,
            in_port,
            actions,
        });
    }

    /// The GENEVE options to send: the flow's present `tun_metadata` fields, through the TLV
    /// map of the bridge the packet is in.
    fn geneve_options(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        let map = self.pipe.bridges[self.bridge].tlv_map;
        for (n, m) in map.iter().enumerate() {
            let Some(m) = m else { continue };
            let mut slot = [0u8; TUN_METADATA_SLOT];
            let ofs = flow::key::GENEVE_OPTS_OFS + n * TUN_METADATA_SLOT;
            self.flow.dp.bytes_at(ofs, &mut slot);
            self.wc.dp.set_bytes_at(ofs, &[0xff]);
            if slot[0] & TUN_MD_PRESENT == 0 {
                continue;
            }
            let len = usize::from(m.len);
            self.wc
                .dp
                .set_bytes_at(ofs + 1 + TUN_METADATA_MAX_LEN - len, &[0xff; 16][..len]);
            out.extend_from_slice(&m.class.to_be_bytes());
            out.push(m.kind);
            out.push((len / 4) as u8);
            out.extend_from_slice(&slot[1 + TUN_METADATA_MAX_LEN - len..]);
        }
        out
    }

    /// The VLAN of the packet as NORMAL sees it on input port `port`.
    /// The VLAN of the packet as NORMAL sees it on input port `port`, or why it is dropped
    /// (OVS's wording).
    fn input_vlan(&mut self, port: u32) -> Result<u16, String> {
        // The VID and whether there is a tag; the PCP only matters when a tag is rewritten.
        let w = self.wc.dp.vlan_tci();
        self.wc.dp.set_vlan_tci(w | 0x1fff);
        let Some(p) = self.br().ports.get(&port) else {
            return Err(format!("no port {port}"));
        };
        let (mode, name) = (&p.vlan, &p.name);
        let tci = self.flow.dp.vlan_tci();
        let tagged = tci & flow::key::VLAN_CFI != 0;
        let vid = tci & 0xfff;
        match mode.tag {
            Some(t) if tagged && vid != 0 => Err(format!(
                "dropping VLAN {vid} tagged packet received on port {name} configured as VLAN \
                 {t} access port"
            )),
            Some(t) => Ok(t),
            None => {
                let v = if tagged { vid } else { 0 };
                if mode.carries(v) {
                    Ok(v)
                } else {
                    Err(format!(
                        "dropping VLAN {v} packet received on port {name} not configured for \
                         trunking VLAN {v}"
                    ))
                }
            }
        }
    }

    fn normal(&mut self) {
        let in_port = self.flow.dp.in_port();
        self.wc
            .dp
            .set_eth_src(EthAddr::BROADCAST)
            .set_eth_dst(EthAddr::BROADCAST);
        let vlan = match self.input_vlan(in_port) {
            Ok(v) => v,
            Err(why) => {
                self.trace_add(NodeKind::Error, why);
                self.trace_add(
                    NodeKind::Warn,
                    "disallowed VLAN VID for this input port, dropping",
                );
                return;
            }
        };
        // A broadcast ARP may be gratuitous, which OVS checks before learning: its addresses
        // and opcode are consulted.
        if self.flow.dp.eth_type() == 0x0806 && self.flow.dp.eth_dst() == EthAddr::BROADCAST {
            self.wc
                .dp
                .set_nw_src(std::net::Ipv4Addr::BROADCAST)
                .set_nw_dst(std::net::Ipv4Addr::BROADCAST)
                .set_nw_proto(0xff);
        }
        self.wc
            .dp
            .set_eth_src(EthAddr::BROADCAST)
            .set_eth_dst(EthAddr::BROADCAST);
        let (src, dst) = (self.flow.dp.eth_src(), self.flow.dp.eth_dst());
        if self.learn {
            let br = &self.pipe.bridges[self.bridge];
            if let Ok(mut mac) = br.mac.lock()
                && mac.learn(src, vlan, in_port, self.now)
            {
                self.res.learned.push(self.bridge);
                let name = port_label(br, in_port);
                self.note(format_args!(
                    "learned that {src} is on port {name} in VLAN {vlan}"
                ));
            }
        }
        // The bridge's own address is on its local port (OVS learns it from the port's own
        // traffic; the bridge knows it from the start).
        let own = self.br().hwaddr == Some(dst) && self.br().ports.contains_key(&OFPP_LOCAL);
        let learned = if own {
            Some(OFPP_LOCAL)
        } else if dst.0[0] & 1 == 0 {
            self.br()
                .mac
                .lock()
                .ok()
                .and_then(|m| m.lookup(dst, vlan, self.now))
        } else {
            None
        };
        match learned {
            Some(p) if p == in_port => {
                self.note("learned port is input port, dropping");
            }
            Some(p) => {
                self.note("forwarding to learned port");
                self.normal_output(p, vlan);
            }
            None => {
                self.note("no learned MAC for destination, flooding");
                self.flood(Some(vlan));
            }
        }
    }

    /// Outputs to `port` for NORMAL: tagging or untagging as the port's VLAN mode says.
    fn normal_output(&mut self, port: u32, vlan: u16) {
        let Some(mode) = self.br().ports.get(&port).map(|p| p.vlan.clone()) else {
            return;
        };
        if !mode.carries(vlan) {
            return;
        }
        let saved = (self.flow.dp.vlan_tci(), self.flow.dp.vlan_tpid());
        if mode.tag.is_some() || vlan == 0 {
            self.flow.dp.set_vlan_tci(0).set_vlan_tpid(0);
        } else {
            let w = self.wc.dp.vlan_tci();
            self.wc.dp.set_vlan_tci(w | 0xe000);
            let pcp = saved.0 & 0xe000;
            self.flow
                .dp
                .set_vlan_tci(pcp | flow::key::VLAN_CFI | vlan)
                .set_vlan_tpid(0x8100);
        }
        self.output_port(port, false);
        self.flow.dp.set_vlan_tci(saved.0).set_vlan_tpid(saved.1);
    }

    /// FLOOD/ALL (`vlan` None) or NORMAL's flooding within `vlan`: every port but the input.
    fn flood(&mut self, vlan: Option<u16>) {
        let in_port = self.flow.dp.in_port();
        self.wc.dp.set_in_port(u32::MAX);
        // The bridge's local port first, then by number (OVS's order).
        let mut ports: Vec<u32> = self.br().ports.keys().copied().collect();
        ports.sort_by_key(|&p| (p != OFPP_LOCAL, p));
        for p in ports {
            if p == in_port {
                continue;
            }
            match vlan {
                Some(v) => self.normal_output(p, v),
                None => self.output_port(p, false),
            }
        }
    }

    /// Emits the datapath actions that make the packet (`base`) equal to the flow.
    fn commit(&mut self) {
        // An L3 packet that OpenFlow handles as Ethernet (from a legacy_l3 tunnel) gets its
        // Ethernet header first.
        if self.base.packet_type() != 0 && self.flow.dp.packet_type() == 0 {
            let (src, dst) = (self.flow.dp.eth_src(), self.flow.dp.eth_dst());
            self.out.push(Action::PushEth { src, dst });
            self.base
                .set_packet_type(0)
                .set_eth_src(src)
                .set_eth_dst(dst)
                .set_eth_type(self.flow.dp.eth_type());
        }
        // Addresses set after a push_eth that nothing has used yet go into the push (as OVS
        // commits the push with the final addresses).
        let (bs, bd) = (self.base.eth_src(), self.base.eth_dst());
        let (fs, fd) = (self.flow.dp.eth_src(), self.flow.dp.eth_dst());
        if (bs, bd) != (fs, fd)
            && let Some(i) = self
                .out
                .iter()
                .rposition(|a| matches!(a, Action::PushEth { .. }))
            && self.out[i + 1..].iter().all(|a| {
                matches!(
                    a,
                    Action::PopMpls { .. }
                        | Action::PushMpls { .. }
                        | Action::PopVlan
                        | Action::PushVlan { .. }
                )
            })
        {
            self.out[i] = Action::PushEth { src: fs, dst: fd };
            self.base.set_eth_src(fs).set_eth_dst(fd);
        }
        let (b, f) = (&self.base, &self.flow.dp);
        let mut acts = Vec::new();
        // Ethernet addresses.
        acts.extend(diff_set(b, f, Attr::Eth, &["eth_src", "eth_dst"]));
        // VLAN: pop what changed, push the new tag.
        let (bt, ft) = (b.vlan_tci(), f.vlan_tci());
        // A TPID of 0 is 802.1Q's (a key built from a match has none).
        let tpid = |t: u16| if t == 0 { 0x8100 } else { t };
        if bt != ft || (ft != 0 && tpid(b.vlan_tpid()) != tpid(f.vlan_tpid())) {
            if bt & flow::key::VLAN_CFI != 0 {
                acts.push(Action::PopVlan);
            }
            if ft & flow::key::VLAN_CFI != 0 {
                let tpid = if f.vlan_tpid() == 0 {
                    0x8100
                } else {
                    f.vlan_tpid()
                };
                acts.push(Action::PushVlan { tpid, tci: ft });
            }
        }
        // MPLS label stack entry: folded into a push just emitted, else a set of the fields
        // that changed.
        if is_mpls(f.eth_type())
            && b.mpls_lse0() != f.mpls_lse0()
            && let Some(Action::PushMpls { lse, .. }) = self.out.last_mut()
        {
            *lse = f.mpls_lse0();
        } else if is_mpls(f.eth_type()) && b.mpls_lse0() != f.mpls_lse0() {
            let mut k = FlowKey::new();
            let mut m = Mask::new();
            k.set_mpls_lse0(f.mpls_lse0());
            let d = b.mpls_lse0() ^ f.mpls_lse0();
            let fields = [0xffff_f000u32, 0xe00, 0x100, 0xff];
            m.set_mpls_lse0(
                fields
                    .iter()
                    .filter(|&&fm| d & fm != 0)
                    .fold(0, |a, &fm| a | fm),
            );
            let mut a = set_action(Attr::Mpls, k, m);
            if let Action::Set(d) = &mut a {
                d.attrs.mpls_lses = 1;
            }
            acts.push(a);
        }
        // IPv4 / IPv6: only with an L3 header (OVS checks nw_proto, consulting it).
        let (l3_attr, l3_fields): (Attr, &[&str]) = match f.eth_type() {
            0x0800 => (Attr::Ipv4, &["nw_src", "nw_dst", "nw_tos", "nw_ttl"]),
            0x86dd => (
                Attr::Ipv6,
                &["ipv6_src", "ipv6_dst", "ipv6_label", "nw_tos", "nw_ttl"],
            ),
            _ => (Attr::Ipv4, &[]),
        };
        let l3_set = diff_set(b, f, l3_attr, l3_fields);
        let consult_proto = l3_set.is_some();
        if f.nw_proto() != 0 {
            acts.extend(l3_set);
        }
        // Transport ports.
        let l4_attr = match (f.eth_type(), f.nw_proto()) {
            (0x0800 | 0x86dd, 6) => Some(Attr::Tcp),
            (0x0800 | 0x86dd, 17) => Some(Attr::Udp),
            (0x0800 | 0x86dd, 132) => Some(Attr::Sctp),
            _ => None,
        };
        acts.extend(l4_attr.and_then(|attr| diff_set(b, f, attr, &["tp_src", "tp_dst"])));
        // Packet mark.
        acts.extend(diff_set(b, f, Attr::SkbMark, &["pkt_mark"]));
        self.out.extend(acts);
        if consult_proto {
            self.wc.dp.set_nw_proto(0xff);
        }
        self.base = self.flow.dp.clone();
        // The in_port of `base` is the datapath's; keep comparing packet fields only.
    }
}

/// The `set(attr(...))` that turns `base` into `flow` on the named key fields: each field that
/// differs is written whole (OVS sets fields, not bits), where the TOS byte is two fields, DSCP
/// and ECN, and the IPv6 label is its 20 bits. `None` when nothing differs.
fn diff_set(base: &FlowKey, flow: &FlowKey, attr: Attr, fields: &[&str]) -> Option<Action> {
    let mut k = FlowKey::new();
    let mut m = Mask::new();
    for name in fields {
        let d = flow::key::FIELDS
            .iter()
            .find(|d| d.name == *name)
            .expect("a field of the key layout");
        let (mut old, mut new) = ([0u8; 16], [0u8; 16]);
        base.bytes_at(d.offset, &mut old[..d.len]);
        flow.bytes_at(d.offset, &mut new[..d.len]);
        if old == new {
            continue;
        }
        let mut ones = [0xffu8; 16];
        match *name {
            "nw_tos" => {
                let x = old[0] ^ new[0];
                ones[0] = (if x & 0xfc != 0 { 0xfc } else { 0 }) | (if x & 3 != 0 { 3 } else { 0 });
            }
            "ipv6_label" => ones[..4].copy_from_slice(&0xfffffu32.to_be_bytes()),
            _ => {}
        }
        k.set_bytes_at(d.offset, &new[..d.len]);
        m.set_bytes_at(d.offset, &ones[..d.len]);
    }
    (!m.is_zero()).then(|| set_action(attr, k, m))
}

/// The outer addresses of a decapsulated packet (IPv4 when its IPv4 destination is set).
fn tunnel_endpoints(k: &FlowKey) -> (IpAddr, IpAddr) {
    if !k.tun_ipv4_dst().is_unspecified() || k.tun_ipv6_dst().is_unspecified() {
        (IpAddr::V4(k.tun_ipv4_src()), IpAddr::V4(k.tun_ipv4_dst()))
    } else {
        (IpAddr::V6(k.tun_ipv6_src()), IpAddr::V6(k.tun_ipv6_dst()))
    }
}

/// What choosing a tunnel port consults: the outer addresses, the key and the flags OVS
/// matches (`flags(-df+csum+key)`).
fn tunnel_wc(k: &FlowKey, wc: &mut PipeMask) {
    let (src, _) = tunnel_endpoints(k);
    if src.is_ipv4() {
        wc.dp
            .set_tun_ipv4_src(std::net::Ipv4Addr::BROADCAST)
            .set_tun_ipv4_dst(std::net::Ipv4Addr::BROADCAST);
    } else {
        wc.dp
            .set_tun_ipv6_src(std::net::Ipv6Addr::from(u128::MAX))
            .set_tun_ipv6_dst(std::net::Ipv6Addr::from(u128::MAX));
    }
    use flow::key::tun_flags::{CSUM, DONT_FRAGMENT, KEY};
    wc.dp
        .set_tun_id(u64::MAX)
        .set_tun_flags(DONT_FRAGMENT | CSUM | KEY);
}

/// Rewrites a key's raw GENEVE options (as the datapath has them) into the `tun_metadata`
/// slots of the bridge's TLV map. An unknown critical option, a mapped option of another
/// length, or a malformed option area is an error (OVS drops such packets).
fn geneve_to_slots(
    map: &[Option<TlvMapping>; N_TUN_METADATA],
    k: &mut FlowKey,
) -> Result<(), String> {
    let mut raw = [0u8; flow::key::GENEVE_OPTS_MAX];
    let n = k.tun_geneve_opts(&mut raw);
    k.set_tun_geneve_opt_bytes(0, &[0u8; flow::key::GENEVE_OPTS_MAX]);
    let mut i = 0;
    while i < n {
        if i + 4 > n {
            return Err("truncated option header".into());
        }
        let class = u16::from_be_bytes([raw[i], raw[i + 1]]);
        let kind = raw[i + 2];
        let len = usize::from(raw[i + 3] & 0x1f) * 4;
        let Some(value) = raw.get(i + 4..i + 4 + len).filter(|_| i + 4 + len <= n) else {
            return Err("option longer than the option area".into());
        };
        match map
            .iter()
            .position(|m| m.is_some_and(|m| m.class == class && m.kind == kind))
        {
            Some(slot) => {
                let want = map[slot].map_or(0, |m| usize::from(m.len));
                if want != len {
                    return Err(format!(
                        "option class={class:#x},type={kind:#x} has {len} bytes, the TLV map \
                         says {want}"
                    ));
                }
                let mut s = [0u8; TUN_METADATA_SLOT];
                s[0] = TUN_MD_PRESENT;
                s[1 + TUN_METADATA_MAX_LEN - len..].copy_from_slice(value);
                k.set_tun_geneve_opt_bytes(slot * TUN_METADATA_SLOT, &s);
            }
            None if kind & 0x80 != 0 => {
                return Err(format!(
                    "unknown critical option class={class:#x},type={kind:#x}"
                ));
            }
            None => {}
        }
        i += 4 + len;
    }
    Ok(())
}

/// Turns what the tables consulted of the `tun_metadata` slots into the datapath mask: the
/// datapath key holds the options raw, so any consulted slot (or an error decided on the
/// options) makes the option length and bytes exact.
fn geneve_mask(wc: &mut PipeMask, key: &FlowKey, force: bool) {
    let mut slots = [0u8; N_TUN_METADATA * TUN_METADATA_SLOT];
    wc.dp.bytes_at(flow::key::GENEVE_OPTS_OFS, &mut slots);
    if !force && slots.iter().all(|&b| b == 0) {
        return;
    }
    wc.dp
        .set_tun_geneve_opt_bytes(0, &[0u8; flow::key::GENEVE_OPTS_MAX]);
    {
        let n = usize::from(key.tun_geneve_len()).min(flow::key::GENEVE_OPTS_MAX);
        wc.dp
            .set_tun_geneve_len(0xff)
            .set_tun_geneve_opt_bytes(0, &[0xffu8; flow::key::GENEVE_OPTS_MAX][..n]);
    }
}

/// What an outer header is made of.
struct TnlParams<'a> {
    t: &'a TunnelConfig,
    src: IpAddr,
    dst: IpAddr,
    smac: EthAddr,
    dmac: EthAddr,
    key: Option<u64>,
    tos: u8,
    ttl: u8,
    /// GRE protocol: 0x6558 for Ethernet, else the L3 payload's ethertype.
    payload: u16,
    options: Vec<u8>,
}

/// The `tnl_push` header of a tunnel (the datapath fills lengths, checksums and the UDP
/// source port per packet).
fn tnl_header(p: &TnlParams) -> flow::odp::TnlHeader {
    use flow::odp::{TnlHeader, TnlIp, TnlL4, TnlUdp};
    let t = p.t;
    let proto = if t.kind == TunnelType::Gre { 47 } else { 17 };
    let (dl_type, ip, ip_len) = match (p.src, p.dst) {
        (IpAddr::V6(s), IpAddr::V6(d)) => (
            0x86dd,
            TnlIp::V6 {
                src: s,
                dst: d,
                label: 0,
                proto,
                tclass: p.tos,
                hlimit: p.ttl,
            },
            40,
        ),
        (s, d) => {
            let v4 = |a: IpAddr| match a {
                IpAddr::V4(a) => a,
                IpAddr::V6(_) => std::net::Ipv4Addr::UNSPECIFIED,
            };
            (
                0x0800,
                TnlIp::V4 {
                    src: v4(s),
                    dst: v4(d),
                    proto,
                    tos: p.tos,
                    ttl: p.ttl,
                    frag: if t.df_default { 0x4000 } else { 0 },
                },
                20,
            )
        }
    };
    // Asks the datapath for a UDP checksum.
    let udp = TnlUdp {
        src: 0,
        dst: t.dst_port,
        csum: if t.csum { 0xffff } else { 0 },
    };
    let key = p.key.unwrap_or(0);
    let (l4, l4_len) = match t.kind {
        TunnelType::Vxlan => (
            TnlL4::Vxlan {
                udp,
                flags: 0x0800_0000,
                vni: (key & 0xff_ffff) as u32,
            },
            16,
        ),
        TunnelType::Geneve => (
            TnlL4::Geneve {
                udp,
                oam: false,
                crit: p.options.chunks(4).next().is_some() && has_critical(&p.options),
                vni: (key & 0xff_ffff) as u32,
                options: p.options.clone(),
            },
            16 + p.options.len(),
        ),
        TunnelType::Gre => {
            let flags = if t.csum { 0x8000 } else { 0 } | if p.key.is_some() { 0x2000 } else { 0 };
            (
                TnlL4::Gre {
                    flags,
                    proto: p.payload,
                    csum: t.csum.then_some(0),
                    key: p.key.map(|k| k as u32),
                    seq: None,
                },
                4 + if t.csum { 4 } else { 0 } + if p.key.is_some() { 4 } else { 0 },
            )
        }
    };
    TnlHeader {
        size: (14 + ip_len + l4_len) as u32,
        tnl_type: t.kind.vport_type(),
        eth_dst: p.dmac,
        eth_src: p.smac,
        dl_type,
        ip,
        l4,
    }
}

/// Whether a GENEVE option area has a critical option (type bit 0x80).
fn has_critical(opts: &[u8]) -> bool {
    let mut i = 0;
    while i + 4 <= opts.len() {
        if opts[i + 2] & 0x80 != 0 {
            return true;
        }
        i += 4 + usize::from(opts[i + 3] & 0x1f) * 4;
    }
    false
}

fn set_action(attr: Attr, key: FlowKey, mask: Mask) -> Action {
    let mut attrs = KeyAttrs::default();
    attrs.push(attr, 0);
    Action::Set(Box::new(DpKey { key, mask, attrs }))
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

/// Kinds of `ofproto/trace` lines (OVS's `oftrace_node_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NodeKind {
    Bridge,
    Table,
    /// Thawing a frozen state (OVS's `OFT_THAW`): printed like a table line.
    Thaw,
    Action,
    Detail,
    Warn,
    Error,
}

struct TraceNode {
    kind: NodeKind,
    text: String,
    subs: Vec<usize>,
}

/// The trace as OVS builds it: a tree of lines. A resubmitted table is a sibling of the
/// resubmit that led to it, so it nests only when more lines follow it.
struct Trace {
    nodes: Vec<TraceNode>,
    /// The node new lines go under.
    cur: usize,
}

impl Trace {
    fn new() -> Trace {
        Trace {
            nodes: vec![TraceNode {
                kind: NodeKind::Table,
                text: String::new(),
                subs: Vec::new(),
            }],
            cur: 0,
        }
    }

    fn add(&mut self, kind: NodeKind, text: String) -> usize {
        let id = self.nodes.len();
        self.nodes.push(TraceNode {
            kind,
            text,
            subs: Vec::new(),
        });
        self.nodes[self.cur].subs.push(id);
        id
    }

    fn render(&self, out: &mut String) {
        self.print(&self.nodes[0].subs, 0, out);
    }

    /// OVS's layout: a line is indented `(level + more) * 4` spaces, where `more` is set for
    /// any line that is not the last of its list and for every action or detail line, and the
    /// lines under it go at `level + 2 * more`.
    fn print(&self, list: &[usize], level: usize, out: &mut String) {
        for (k, &id) in list.iter().enumerate() {
            let n = &self.nodes[id];
            if n.kind == NodeKind::Bridge {
                out.push('\n');
            }
            let more = usize::from(
                k + 1 < list.len()
                    || matches!(
                        n.kind,
                        NodeKind::Action | NodeKind::Detail | NodeKind::Warn | NodeKind::Error
                    ),
            );
            let ind = " ".repeat((level + more) * 4);
            match n.kind {
                NodeKind::Detail => {
                    let _ = writeln!(out, "{ind} -> {}", n.text);
                }
                NodeKind::Warn => {
                    let _ = writeln!(out, "{ind} >> {}", n.text);
                }
                NodeKind::Error => {
                    let _ = writeln!(out, "{ind} >>>> {} <<<<", n.text);
                }
                NodeKind::Bridge => {
                    let _ = writeln!(out, "{ind}{}", n.text);
                    let _ = writeln!(out, "{ind}{}", "-".repeat(n.text.len()));
                }
                NodeKind::Table | NodeKind::Thaw | NodeKind::Action => {
                    let _ = writeln!(out, "{ind}{}", n.text);
                }
            }
            self.print(&n.subs, level + 2 * more, out);
        }
    }
}

/// `format_match` prints `priority=N,` first; the trace shows the match alone.
fn strip_priority(s: &str) -> String {
    let mut parts: Vec<&str> = s.split(',').collect();
    parts.retain(|p| !p.starts_with("priority="));
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::NatKind;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn nat_ranges_print_as_ovs_puts_them() {
        let v4 = |a: [u8; 4]| Ipv4Addr::from(a);
        let one = Nat {
            kind: Some(NatKind::Src),
            addrs: Some(NatAddrs::V4(v4([192, 0, 2, 10]), v4([192, 0, 2, 10]))),
            ..Nat::default()
        };
        let n = odp_nat(&one);
        assert_eq!(
            (n.ip_min, n.ip_max),
            (Some(IpAddr::V4(v4([192, 0, 2, 10]))), None)
        );
        let ct = Action::Ct(Box::new(flow::odp::CtAction {
            commit: true,
            nat: Some(n),
            ..Default::default()
        }));
        assert_eq!(
            flow::odp::format_actions(&[ct], None),
            "ct(commit,nat(src=192.0.2.10))"
        );
        let range = Nat {
            kind: Some(NatKind::Dst),
            addrs: Some(NatAddrs::V6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST)),
            ports: Some((80, 80)),
            persistent: true,
            ..Nat::default()
        };
        let n = odp_nat(&range);
        assert_eq!((n.proto_min, n.proto_max, n.ip_max), (80, 0, None));
        let ct = Action::Ct(Box::new(flow::odp::CtAction {
            commit: true,
            nat: Some(n),
            ..Default::default()
        }));
        assert_eq!(
            flow::odp::format_actions(&[ct], None),
            "ct(commit,nat(dst=[::1]:80,persistent))"
        );
        // Bare `nat`: no kind, nothing else.
        assert_eq!(odp_nat(&Nat::default()), flow::odp::CtNat::default());
    }

    #[test]
    fn tuple_swap_exchanges_the_packet_and_connection_tuples() {
        let mut k = FlowKey::new();
        k.set_nw_src(Ipv4Addr::new(10, 0, 0, 2))
            .set_nw_dst(Ipv4Addr::new(10, 0, 0, 1))
            .set_nw_proto(6)
            .set_tp_src(80)
            .set_tp_dst(4000)
            .set_ct_nw_proto(6)
            .set_ct_tp_src(4000)
            .set_ct_tp_dst(80);
        k.set_ct_nw_src(Ipv4Addr::new(10, 0, 0, 1));
        k.set_ct_nw_dst(Ipv4Addr::new(10, 0, 0, 2));
        let orig = k.clone();
        tuple_swap(&mut k, true);
        assert_eq!(
            (k.nw_src(), k.nw_dst(), k.tp_src(), k.tp_dst()),
            (
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 2),
                4000,
                80
            )
        );
        assert_eq!(k.ct_nw_src(), Ipv4Addr::new(10, 0, 0, 2));
        tuple_swap(&mut k, true);
        assert_eq!(k, orig);
    }
}
