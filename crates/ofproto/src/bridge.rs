//! Bridges: OpenFlow ports, the flow tables with OpenFlow's flow-mod semantics, and the MAC
//! learning table of the NORMAL action.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use flow::EthAddr;

use crate::classifier::{Classifier, CompactMatch, RuleId, Version};
use crate::flow_events::FlowChange;
use crate::flow_removed::RemovedReason;
use crate::pipekey::PipeMatch;
use crate::syntax::{FlowSpec, OfAction};

/// Number of OpenFlow tables per bridge (0-254; 255 means "all" in flow mods).
pub const N_TABLES: usize = 255;

/// The last table, OVS's hidden internal one: no flow mod adds to it (`OFPBRC_EPERM`).
pub const INTERNAL_TABLE: usize = 254;

/// OVS's default `mac-aging-time`.
pub const MAC_AGING: Duration = Duration::from_secs(300);
/// OVS's default `mac-table-size`.
pub const MAC_TABLE_SIZE: usize = 2048;

/// An OpenFlow rule's data beside its match and priority.
#[derive(Clone, Debug)]
pub struct Rule {
    pub cookie: u64,
    pub actions: Vec<OfAction>,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub importance: u16,
    /// The flow mod's flags (`send_flow_rem`, `reset_counts`...), which OpenFlow 1.3 and later
    /// report in flow statistics.
    pub flags: crate::syntax::FlowModFlags,
    pub created: Instant,
    pub modified: Instant,
    pub n_packets: u64,
    pub n_bytes: u64,
    /// When a packet last matched (as stats pushed from the datapath say).
    pub used: Option<Instant>,
}

impl Rule {
    pub(crate) fn from_spec(spec: &FlowSpec, now: Instant) -> Rule {
        Rule {
            cookie: spec.cookie,
            actions: spec.actions.clone(),
            idle_timeout: spec.idle_timeout,
            hard_timeout: spec.hard_timeout,
            importance: spec.importance,
            flags: spec.flags,
            created: now,
            modified: now,
            n_packets: 0,
            n_bytes: 0,
            used: None,
        }
    }

    /// When a packet last hit it, or when it was made (OVS's `used`, which idle timeouts and
    /// `idle_age` count from): a modify, or learn refreshing the flow, is no use.
    pub fn last_used(&self) -> Instant {
        self.used.unwrap_or(self.created)
    }

    /// Whether its flow mod resets the counters of a rule it replaces or modifies
    /// (`reset_counts`, implied by an OpenFlow 1.0 or 1.1 add).
    pub(crate) fn resets_counts(spec: &FlowSpec) -> bool {
        spec.flags.0 & crate::syntax::FlowModFlags::RESET_COUNTS != 0
    }

    /// Takes over the statistics of `old`, the rule it replaces or the rule before a modify
    /// (OVS's `rule_insert()`): its last use always, its counters unless `reset_counts`.
    pub(crate) fn take_stats(&mut self, old: &Rule, reset_counts: bool) {
        self.used = Some(old.last_used());
        if reset_counts {
            self.n_packets = 0;
            self.n_bytes = 0;
        } else {
            self.n_packets = old.n_packets;
            self.n_bytes = old.n_bytes;
        }
    }

    /// Whether the rule's actions output to `port` (the `out_port` filter of flow mods).
    pub fn outputs_to(&self, port: u32) -> bool {
        fn any(actions: &[OfAction], port: u32) -> bool {
            // OVS's ofpacts_output_to_port(): outputs, enqueues and controller actions,
            // inside clone, ct and write_actions too; not output(port=N,max_len=M).
            actions.iter().any(|a| match a {
                OfAction::Output { port: p, .. } | OfAction::Enqueue { port: p, .. } => *p == port,
                OfAction::Controller(_) => port == crate::syntax::OFPP_CONTROLLER,
                OfAction::Clone(inner) | OfAction::WriteActions(inner) => any(inner, port),
                OfAction::Ct(ct) => any(&ct.actions, port),
                _ => false,
            })
        }
        any(&self.actions, port)
    }
}

/// A port's `vlan_mode` (OVS's Port column): how NORMAL takes and gives its frames' VLANs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortVlanMode {
    /// Untagged frames only, in VLAN `tag` (0 without one); sent untagged.
    Access,
    /// Tagged frames of the `trunks` VLANs (all when empty), untagged ones in VLAN 0; sent
    /// tagged.
    Trunk,
    /// A trunk whose untagged frames are in VLAN `tag`, which it always carries; that VLAN
    /// is sent tagged.
    NativeTagged,
    /// As [`PortVlanMode::NativeTagged`], but VLAN `tag` is sent untagged.
    NativeUntagged,
    /// 802.1ad QinQ: every frame taken (with `cvlans`, only those of the listed customer
    /// VLANs, untagged ones as VLAN 0) gets an outer tag of VLAN `tag`; frames of VLAN `tag`
    /// leave without their outer tag.
    Dot1qTunnel,
}

impl PortVlanMode {
    /// The column's value; `None` for a mode OVS does not have.
    pub fn parse(s: &str) -> Option<PortVlanMode> {
        Some(match s {
            "access" => PortVlanMode::Access,
            "trunk" => PortVlanMode::Trunk,
            "native-tagged" => PortVlanMode::NativeTagged,
            "native-untagged" => PortVlanMode::NativeUntagged,
            "dot1q-tunnel" => PortVlanMode::Dot1qTunnel,
            _ => return None,
        })
    }

    /// The column's value.
    pub fn name(self) -> &'static str {
        match self {
            PortVlanMode::Access => "access",
            PortVlanMode::Trunk => "trunk",
            PortVlanMode::NativeTagged => "native-tagged",
            PortVlanMode::NativeUntagged => "native-untagged",
            PortVlanMode::Dot1qTunnel => "dot1q-tunnel",
        }
    }
}

/// The TPID of an 802.1ad service tag, the outer tag of a `dot1q-tunnel` port by default.
pub const ETH_TYPE_8021AD: u16 = 0x88a8;

/// One VLAN header as NORMAL handles it (OVS's `xvlan`): `pcp` is the TCI's top three bits,
/// in place; all zero for no header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VlanHdr {
    pub tpid: u16,
    pub vid: u16,
    pub pcp: u16,
}

/// The (at most two) VLAN headers of a frame, outermost first.
pub type XVlan = [VlanHdr; 2];

/// OVS's Port `other_config:priority-tags`: whether a frame NORMAL sends out of the port
/// carries the priority of the tag it came with in its outer tag, even where it would leave
/// untagged (a priority tag, VID 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PriorityTags {
    /// No (any value but the two below).
    #[default]
    Never,
    /// When that priority is not 0 (`if-nonzero`, or `true`).
    IfNonzero,
    /// Always (`always`): an outer header is kept even with VID and priority 0.
    Always,
}

impl PriorityTags {
    /// The `other_config:priority-tags` value as OVS reads it.
    pub fn parse(s: &str) -> PriorityTags {
        match s {
            "if-nonzero" | "true" => PriorityTags::IfNonzero,
            "always" => PriorityTags::Always,
            _ => PriorityTags::Never,
        }
    }
}

/// How a port takes part in VLANs (OVS's `tag`, `trunks`, `vlan_mode` and `cvlans` port
/// columns and its `other_config:qinq-ethtype` and `priority-tags`), with OVS's rules (`bundle_set()` and
/// `xlate_normal()`'s VLAN helpers).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VlanMode {
    /// The access, native or (dot1q-tunnel) service VLAN.
    pub tag: Option<u16>,
    /// The VLANs a trunk or native port carries (empty: all).
    pub trunks: Vec<u16>,
    /// `vlan_mode`; without it, access when there is a tag, else trunk.
    pub mode: Option<PortVlanMode>,
    /// The customer VLANs a dot1q-tunnel port takes and gives (empty: all).
    pub cvlans: Vec<u16>,
    /// The outer tag's TPID on a dot1q-tunnel port: 0x8100 for `qinq-ethtype=802.1q`, 0
    /// (meaning [`ETH_TYPE_8021AD`]) otherwise.
    pub qinq_tpid: u16,
    /// `other_config:priority-tags`.
    pub priority_tags: PriorityTags,
}

impl VlanMode {
    /// The mode in force.
    pub fn kind(&self) -> PortVlanMode {
        match (self.mode, self.tag) {
            (Some(m), _) => m,
            (None, Some(_)) => PortVlanMode::Access,
            (None, None) => PortVlanMode::Trunk,
        }
    }

    /// The access or native VLAN: `tag`, 0 without one.
    pub fn native(&self) -> u16 {
        self.tag.unwrap_or(0)
    }

    /// Whether the port trunks `vlan`: a native port always carries its native VLAN and
    /// never VLAN 0 (when the native VLAN is not 0).
    fn trunks_vlan(&self, vlan: u16) -> bool {
        let listed = self.trunks.is_empty() || self.trunks.contains(&vlan);
        match self.kind() {
            PortVlanMode::Access => false,
            PortVlanMode::Trunk | PortVlanMode::Dot1qTunnel => listed,
            PortVlanMode::NativeTagged | PortVlanMode::NativeUntagged => match self.native() {
                0 => listed,
                n => vlan == n || (vlan != 0 && listed),
            },
        }
    }

    /// Whether a dot1q-tunnel port takes customer VLAN `vid` (0: untagged).
    fn allows_cvlan(&self, vid: u16) -> bool {
        self.cvlans.is_empty() || self.cvlans.contains(&vid)
    }

    /// The TPID of the outer tag a dot1q-tunnel port pushes.
    pub fn tunnel_tpid(&self) -> u16 {
        match self.qinq_tpid {
            0 => ETH_TYPE_8021AD,
            t => t,
        }
    }

    /// Whether frames of `vlan` (with no inner tag) may leave through this port.
    pub fn carries(&self, vlan: u16) -> bool {
        let hdr = VlanHdr {
            vid: vlan,
            ..VlanHdr::default()
        };
        self.includes(&[hdr, VlanHdr::default()])
    }

    /// Whether frames with VLAN headers `x` (as the bridge sees them) may leave through this
    /// port (OVS's `xbundle_includes_vlan()`).
    pub fn includes(&self, x: &XVlan) -> bool {
        match self.kind() {
            PortVlanMode::Access => x[0].vid == self.native() && x[1].vid == 0,
            PortVlanMode::Dot1qTunnel => x[0].vid == self.native() && self.allows_cvlan(x[1].vid),
            _ => self.trunks_vlan(x[0].vid),
        }
    }

    /// The VLAN of a frame received with VID `vid` (0: untagged or priority-tagged), or
    /// `None` when the port does not take it.
    pub fn input_vlan(&self, vid: u16) -> Option<u16> {
        match self.kind() {
            PortVlanMode::Access => (vid == 0).then(|| self.native()),
            PortVlanMode::NativeTagged | PortVlanMode::NativeUntagged if vid == 0 => {
                Some(self.native())
            }
            PortVlanMode::Dot1qTunnel => self.allows_cvlan(vid).then(|| self.native()),
            _ => self.trunks_vlan(vid).then_some(vid),
        }
    }

    /// The VLAN headers inside the bridge of a frame received with headers `x`, which
    /// [`VlanMode::input_vlan`] admitted (OVS's `xvlan_input_translate()`).
    pub fn input_translate(&self, x: &XVlan) -> XVlan {
        let native = |x: &XVlan| {
            let tpid = if x[0].tpid == 0 { 0x8100 } else { x[0].tpid };
            VlanHdr {
                tpid,
                vid: self.native(),
                pcp: x[0].pcp,
            }
        };
        match self.kind() {
            PortVlanMode::Access => [native(x), VlanHdr::default()],
            PortVlanMode::Trunk => *x,
            PortVlanMode::NativeTagged | PortVlanMode::NativeUntagged if x[0].vid == 0 => {
                [native(x), x[1]]
            }
            PortVlanMode::NativeTagged | PortVlanMode::NativeUntagged => *x,
            PortVlanMode::Dot1qTunnel => {
                let outer = VlanHdr {
                    tpid: self.tunnel_tpid(),
                    vid: self.native(),
                    pcp: 0,
                };
                [outer, x[0]]
            }
        }
    }

    /// The VLAN headers a frame with headers `x` (inside the bridge) leaves this port with
    /// (OVS's `xvlan_output_translate()`).
    pub fn output_translate(&self, x: &XVlan) -> XVlan {
        let pop = [x[1], VlanHdr::default()];
        match self.kind() {
            PortVlanMode::Access => XVlan::default(),
            PortVlanMode::Trunk | PortVlanMode::NativeTagged => *x,
            PortVlanMode::NativeUntagged if x[0].vid == self.native() => pop,
            PortVlanMode::NativeUntagged => *x,
            PortVlanMode::Dot1qTunnel => pop,
        }
    }
}

/// An OpenFlow port of a bridge.
#[derive(Clone, Debug)]
pub struct OfPort {
    pub name: String,
    pub ofport: u32,
    /// The datapath port number; `None` for a patch port.
    pub dp_port: Option<u32>,
    /// For a patch port: the name of its peer patch port (in another bridge).
    pub peer: Option<String>,
    pub vlan: VlanMode,
}

/// A learned MAC address.
#[derive(Clone, Copy, Debug)]
pub struct MacEntry {
    pub port: u32,
    pub learned: Instant,
}

/// The MAC learning table of one bridge: (address, VLAN) → port, with aging and a size limit
/// (the least recently learned entry goes first).
#[derive(Debug, Default)]
pub struct MacTable {
    entries: HashMap<(EthAddr, u16), MacEntry>,
}

impl MacTable {
    /// The port `mac` was learned on in `vlan`, if the entry has not aged out.
    pub fn lookup(&self, mac: EthAddr, vlan: u16, now: Instant) -> Option<u32> {
        self.entries
            .get(&(mac, vlan))
            .filter(|e| now.duration_since(e.learned) < MAC_AGING)
            .map(|e| e.port)
    }

    /// Learns that `mac` is on `port` in `vlan`; returns whether that changed anything a
    /// translation could have seen (a new address or a move), which calls for revalidation.
    pub fn learn(&mut self, mac: EthAddr, vlan: u16, port: u32, now: Instant) -> bool {
        if mac.0[0] & 1 != 0 {
            return false; // never learn multicast sources
        }
        if let Some(e) = self.entries.get_mut(&(mac, vlan)) {
            let age = now.duration_since(e.learned);
            let moved = e.port != port || age >= MAC_AGING;
            // As OVS: an entry is refreshed (and becomes the most recently used) when it moves
            // or at most once a second, so that `fdb/show` lists entries in the order OVS's
            // LRU list keeps them.
            if moved || age.as_secs() >= 1 {
                e.port = port;
                e.learned = now;
            }
            return moved;
        }
        if self.entries.len() >= MAC_TABLE_SIZE {
            self.expire(now);
        }
        if self.entries.len() >= MAC_TABLE_SIZE
            && let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.learned)
                .map(|(k, _)| *k)
        {
            self.entries.remove(&oldest);
        }
        self.entries
            .insert((mac, vlan), MacEntry { port, learned: now });
        true
    }

    /// Drops aged-out entries; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let n = self.entries.len();
        self.entries
            .retain(|_, e| now.duration_since(e.learned) < MAC_AGING);
        n - self.entries.len()
    }

    /// Forgets every address learned on `port`; returns them (address, VLAN).
    pub fn flush_port(&mut self, port: u32) -> Vec<(EthAddr, u16)> {
        let gone: Vec<(EthAddr, u16)> = self
            .entries
            .iter()
            .filter(|(_, e)| e.port == port)
            .map(|(k, _)| *k)
            .collect();
        for k in &gone {
            self.entries.remove(k);
        }
        gone
    }

    /// Forgets these addresses, wherever they were learned.
    pub fn forget(&mut self, addrs: &[(EthAddr, u16)]) {
        for k in addrs {
            self.entries.remove(k);
        }
    }

    /// Entries as `fdb/show` lists them, least recently learned first (OVS's LRU order):
    /// (port, vlan, mac, age).
    pub fn entries(&self, now: Instant) -> Vec<(u32, u16, EthAddr, u64)> {
        let mut v: Vec<_> = self.entries.iter().collect();
        v.sort_by_key(|&(&(mac, vlan), e)| (e.learned, e.port, vlan, mac));
        v.into_iter()
            .map(|(&(mac, vlan), e)| (e.port, vlan, mac, now.duration_since(e.learned).as_secs()))
            .collect()
    }
}

/// A bridge.
pub struct Bridge {
    pub name: String,
    pub tables: Vec<Classifier<Rule>>,
    pub ports: BTreeMap<u32, OfPort>,
    pub mac: Mutex<MacTable>,
    /// Packets sent to the controller (there are no OpenFlow connections yet: counted).
    pub n_controller: std::sync::atomic::AtomicU64,
    /// The tables' lookup counters (`dump-tables`).
    pub table_stats: crate::table_stats::TableStats,
    /// Ethernet address of the LOCAL port (`hwaddr`): tunnel traffic to the bridge's addresses
    /// is sent to it.
    pub hwaddr: Option<EthAddr>,
    /// IP addresses of the LOCAL port, with prefix lengths: local tunnel endpoints, and the
    /// connected routes of the tunnel routing table.
    pub addrs: Vec<(std::net::IpAddr, u8)>,
    /// Tunnel ports' options, by OpenFlow port number. The port's `dp_port` is the datapath
    /// port shared by the tunnels of its type and UDP port (`vxlan_sys_4789`).
    pub tunnels: BTreeMap<u32, crate::tunnel::TunnelConfig>,
    /// GENEVE options mapped to `tun_metadata0..63` (`add-tlv-map`).
    pub tlv_map: crate::tun_md::TunTable,
    /// Failing open: table 0 has OVS's hidden NORMAL rule above every flow
    /// ([`crate::xlate`]'s `fail_open`).
    pub fail_open: std::sync::atomic::AtomicBool,
    /// The group table.
    pub groups: crate::group::GroupTable,
    /// The bridge's meters (`add-meter`, `OFPT_METER_MOD`).
    pub meters: crate::meter::MeterTable,
    /// The rules with an idle or hard timeout (table, rule): all that expiry looks at, so that
    /// its cost follows them and not the size of the tables.
    timed: HashSet<(usize, RuleId)>,
    /// Rules with `send_flow_rem` removed since the OpenFlow server last looked
    /// ([`crate::flow_removed`]).
    pub removed: Vec<crate::flow_removed::RemovedRule>,
    /// The changes to the tables that flow monitors have yet to see ([`crate::flow_events`]).
    pub flow_events: crate::flow_events::FlowEvents,
    /// The ports' OpenFlow configuration and link state, by OpenFlow number (a port not
    /// listed has the default, [`crate::port_config`]).
    pub port_config: BTreeMap<u32, crate::port_config::PortConfig>,
    /// Each table's configuration (`OFPT_TABLE_MOD`, [`crate::table_config`]).
    pub table_config: Vec<crate::table_config::TableConfig>,
    /// Whether a miss in a table left at [`crate::table_config::TableMiss::Default`] goes to
    /// the controller: an OpenFlow 1.0 to 1.2 connection with controller id 0 is attached
    /// (OVS's `want_packet_in_on_miss`).
    pub miss_to_controller: bool,
    /// The datapath id set by configuration (`other_config:datapath-id`); without, OVS's
    /// derives it from the LOCAL port's address.
    pub datapath_id: Option<u64>,
    /// The bridge's mirrors ([`crate::mirror`]), in configuration order.
    pub mirrors: Vec<std::sync::Arc<crate::mirror::Mirror>>,
    /// The bridge's bonds ([`crate::bond`]), in configuration order.
    pub bonds: Vec<crate::bond::Bond>,
    /// The bridge's Ports of one Interface with LACP ([`crate::lacp_port`]).
    pub lacp_ports: Vec<crate::lacp_port::LacpPort>,
}

impl crate::tunnel::UnderlayBridge for Bridge {
    fn name(&self) -> &str {
        &self.name
    }
    fn addrs(&self) -> &[(std::net::IpAddr, u8)] {
        &self.addrs
    }
}

/// Whether the match of rule `m` (with priority `p`) is selected by a flow mod's match
/// `spec`: strictly (same match and priority) or loosely (`m` at least as specific: every bit
/// `spec` matches, `m` matches with the same value).
pub fn selects(spec: &PipeMatch, spec_priority: u16, strict: bool, m: &PipeMatch, p: u16) -> bool {
    if strict {
        return p == spec_priority && m == spec;
    }
    let (sk, sm) = (spec.key(), spec.mask());
    let (rk, rm) = (m.key(), m.mask());
    // Only the words the spec matches on can disqualify a rule (a catch-all spec: none).
    let mut words = sm.dp.map();
    while words != 0 {
        let i = words.trailing_zeros() as usize;
        words &= words - 1;
        let w = sm.dp.word(i);
        if w & !rm.dp.word(i) != 0 || (rk.dp.word(i) & w) != sk.dp.word(i) {
            return false;
        }
    }
    let (sw, rw) = (sm.meta, rm.meta);
    if sw.is_zero() {
        return true;
    }
    for r in 0..16 {
        if sw.regs[r] & !rw.regs[r] != 0 || rk.meta.regs[r] & sw.regs[r] != sk.meta.regs[r] {
            return false;
        }
    }
    sw.metadata & !rw.metadata == 0
        && rk.meta.metadata & sw.metadata == sk.meta.metadata
        && sw.conj_id & !rw.conj_id == 0
        && rk.meta.conj_id & sw.conj_id == sk.meta.conj_id
}

/// Whether some packet matches both `a` and `b` (OVS's `cls_rule` overlap, for a flow mod's
/// `check_overlap`): where both match a bit, they want the same value.
pub fn overlaps(a: &PipeMatch, b: &PipeMatch) -> bool {
    let (ak, am) = (a.key(), a.mask());
    let (bk, bm) = (b.key(), b.mask());
    for i in 0..flow::key::KEY_WORDS {
        let both = am.dp.word(i) & bm.dp.word(i);
        if (ak.dp.word(i) ^ bk.dp.word(i)) & both != 0 {
            return false;
        }
    }
    for r in 0..16 {
        let both = am.meta.regs[r] & bm.meta.regs[r];
        if (ak.meta.regs[r] ^ bk.meta.regs[r]) & both != 0 {
            return false;
        }
    }
    let both = am.meta.metadata & bm.meta.metadata;
    let conj = am.meta.conj_id & bm.meta.conj_id;
    (ak.meta.metadata ^ bk.meta.metadata) & both == 0
        && (ak.meta.conj_id ^ bk.meta.conj_id) & conj == 0
}

impl Bridge {
    /// An empty bridge.
    pub fn new(name: &str) -> Bridge {
        Bridge {
            name: name.to_owned(),
            tables: (0..N_TABLES).map(|_| Classifier::new()).collect(),
            ports: BTreeMap::new(),
            mac: Mutex::new(MacTable::default()),
            n_controller: Default::default(),
            table_stats: Default::default(),
            hwaddr: None,
            addrs: Vec::new(),
            tunnels: BTreeMap::new(),
            tlv_map: crate::tun_md::TunTable::default(),
            fail_open: Default::default(),
            groups: Default::default(),
            meters: Default::default(),
            timed: HashSet::new(),
            removed: Vec::new(),
            flow_events: Default::default(),
            port_config: BTreeMap::new(),
            table_config: vec![Default::default(); N_TABLES],
            miss_to_controller: false,
            datapath_id: None,
            mirrors: Vec::new(),
            bonds: Vec::new(),
            lacp_ports: Vec::new(),
        }
    }

    /// The version of the tables that lookups see (every table has the bridge's).
    pub fn tables_version(&self) -> Version {
        self.tables[0].version()
    }

    /// Publishes version `v` in every table at once (under the pipeline's write lock, so no
    /// lookup sees some tables at one version and some at another).
    pub(crate) fn set_tables_version(&mut self, v: Version) {
        for t in &mut self.tables {
            t.set_version(v);
        }
    }

    /// Adds a rule to table `t`, visible from version `v` on.
    pub(crate) fn insert_rule(
        &mut self,
        t: usize,
        m: PipeMatch,
        priority: u16,
        rule: Rule,
        v: Version,
    ) -> RuleId {
        let timed = rule.idle_timeout != 0 || rule.hard_timeout != 0;
        let id = self.tables[t].insert_in(m, priority, rule, v);
        if timed {
            self.timed.insert((t, id));
        }
        id
    }

    /// Removes rule `id` of table `t` for good: its match, priority and rule, if it was there.
    pub(crate) fn remove_rule(&mut self, t: usize, id: RuleId) -> Option<(PipeMatch, u16, Rule)> {
        self.timed.remove(&(t, id));
        self.tables[t].remove(id)
    }

    /// Removes the rules `ids` of table `t`: their matches, priorities and rules, in that
    /// order ([`Classifier::remove_many`]).
    fn remove_rules(&mut self, t: usize, ids: &[RuleId]) -> Vec<(CompactMatch, u16, Rule)> {
        for &id in ids {
            self.timed.remove(&(t, id));
        }
        self.tables[t].remove_many(ids)
    }

    /// The port called `name`.
    pub fn port_by_name(&self, name: &str) -> Option<&OfPort> {
        self.ports.values().find(|p| p.name == name)
    }

    /// The OpenFlow number of port `name`.
    pub fn port_number(&self, name: &str) -> Option<u32> {
        self.port_by_name(name).map(|p| p.ofport)
    }

    /// Number of rules in all tables.
    pub fn n_rules(&self) -> usize {
        self.tables.iter().map(|t| t.len()).sum()
    }

    /// `add-flow`: a rule with the same match and priority in the table is replaced.
    pub fn add_flow(&mut self, spec: &FlowSpec, now: Instant) -> Result<(), String> {
        self.begin_change();
        let t = usize::from(spec.table);
        if t >= N_TABLES {
            return Err(format!("table {} out of range (0-254)", spec.table));
        }
        if t == INTERNAL_TABLE {
            return Err("OFPBRC_EPERM: table 254 is OVS's internal table, read-only".to_owned());
        }
        // No OpenFlow version can carry a match on it (OVS's ovs-ofctl finds no usable
        // protocol either).
        if spec.match_.mask().meta.skb_priority != 0 {
            return Err("skb_priority cannot be matched in a flow table".to_owned());
        }
        if let Some(n) = self.unmapped_tun_md(spec) {
            return Err(format!(
                "NXFMFC_INVALID_TLV_FIELD: tun_metadata{n} is not mapped (add-tlv-map)"
            ));
        }
        if let Some(n) = self.tun_md_overrun(spec) {
            return Err(format!(
                "OFPBAC_BAD_SET_LEN: the actions reach past tun_metadata{n}'s mapped length"
            ));
        }
        if let Some(g) = crate::group::missing_group(&self.groups, &spec.actions) {
            return Err(format!("OFPBAC_BAD_OUT_GROUP: no group {g}"));
        }
        self.check_meters(&spec.actions)
            .map_err(|e| e.to_string())?;
        let replaced = self.tables[t]
            .find_exact(&spec.match_, spec.priority)
            .and_then(|old| self.remove_rule(t, old));
        let v = self.tables_version();
        let mut rule = Rule::from_spec(spec, now);
        if let Some((_, _, old)) = &replaced {
            rule.take_stats(old, Rule::resets_counts(spec));
        }
        self.note_change(t, (&spec.match_, spec.priority, &rule), FlowChange::Added);
        self.insert_rule(t, spec.match_.clone(), spec.priority, rule, v);
        // Only once the new rule is in: the learns it keeps keep their learned flows (OVS
        // counts the new rule's learned cookies before it drops the old rule's).
        if let Some((_, _, old)) = replaced {
            crate::ofproto::flush_learned_rules(self, &[old]);
        }
        Ok(())
    }

    /// Whether a rule visible in version `v` of the table of `spec`, with its priority,
    /// overlaps its match (OVS's `check_overlap` test).
    pub fn overlaps_in(&self, spec: &FlowSpec, v: Version) -> bool {
        self.tables.get(usize::from(spec.table)).is_some_and(|t| {
            t.iter_in(v)
                .any(|(_, m, p, _)| p == spec.priority && overlaps(&m.expand(), &spec.match_))
        })
    }

    /// The rules a `mod-flows`/`del-flows` spec selects: (table, rule).
    pub fn select(&self, spec: &FlowSpec, strict: bool) -> Vec<(usize, RuleId)> {
        self.select_in(spec, strict, self.tables_version())
    }

    /// The rules visible in version `v` that a `mod-flows`/`del-flows` spec selects: (table,
    /// rule). A strict selection is one hash lookup per table; a loose one searches only the
    /// subtables whose mask covers the spec's.
    pub fn select_in(&self, spec: &FlowSpec, strict: bool, v: Version) -> Vec<(usize, RuleId)> {
        self.select_entries_in(spec, strict, v)
            .into_iter()
            .map(|(t, _, id)| (t, id))
            .collect()
    }

    /// [`Self::select_in`] with each rule's priority: (table, priority, rule), found in one
    /// pass over the rules, which the caller need not look up again to order them.
    pub fn select_entries_in(
        &self,
        spec: &FlowSpec,
        strict: bool,
        v: Version,
    ) -> Vec<(usize, u16, RuleId)> {
        let wanted = |r: &Rule| {
            r.cookie & spec.cookie_mask == spec.cookie & spec.cookie_mask
                && spec.out_port.is_none_or(|o| r.outputs_to(o))
                && spec
                    .out_group
                    .is_none_or(|g| crate::group::uses_group(&r.actions, g))
        };
        let mut out = Vec::new();
        for (t, table) in self.tables.iter().enumerate() {
            if spec.table != 255 && usize::from(spec.table) != t {
                continue;
            }
            if strict {
                if let Some(id) = table.find_exact_in(&spec.match_, spec.priority, v)
                    && let Some((_, p, r)) = table.get(id)
                    && wanted(r)
                {
                    out.push((t, p, id));
                }
                continue;
            }
            // In rule order, as a scan of the table finds them: removals free rule ids in
            // that order, which later adds take up again.
            let from = out.len();
            table.for_each_selected(&spec.match_, v, |id, p, r| {
                if wanted(r) {
                    out.push((t, p, id));
                }
            });
            out[from..].sort_unstable_by_key(|&(_, _, id)| id);
        }
        out
    }

    /// `mod-flows [--strict]`: replaces the actions of the selected rules (counters kept), and
    /// their cookie when the modify sets one; returns how many.
    pub fn mod_flows(&mut self, spec: &FlowSpec, strict: bool, now: Instant) -> usize {
        self.begin_change();
        let sel = self.select(spec, strict);
        let mut old = Vec::new();
        let mut changed = Vec::new();
        for &(t, id) in &sel {
            if let Some(r) = self.tables[t].get_mut(id) {
                let before = std::mem::replace(&mut r.actions, spec.actions.clone());
                let cookie = r.cookie;
                r.modified = now;
                if Rule::resets_counts(spec) {
                    r.n_packets = 0;
                    r.n_bytes = 0;
                }
                if let Some(c) = spec.modified_cookie() {
                    r.cookie = c;
                }
                if before != r.actions {
                    changed.push((t, id, Some(before.clone())));
                } else if cookie != r.cookie {
                    changed.push((t, id, None));
                }
                old.push(before);
            }
        }
        // Only a change of actions or cookie is a modification to the monitors (OVS's
        // `replace_rule_finish()`).
        for (t, id, old_actions) in changed {
            if let Some((m, p, r)) = self.tables[t].get(id) {
                let (m, r) = (m.expand(), r.clone());
                self.note_change(t, (&m, p, &r), FlowChange::Modified { old_actions });
            }
        }
        crate::ofproto::flush_learned(self, old.iter().map(Vec::as_slice));
        sel.len()
    }

    /// `del-flows [--strict]`: removes the selected rules; returns how many.
    pub fn del_flows(&mut self, spec: &FlowSpec, strict: bool) -> usize {
        self.begin_change();
        let sel = self.select(spec, strict);
        let now = Instant::now();
        let mut learners = Vec::new();
        // Table by table: the selection is in table order.
        for group in sel.chunk_by(|a, b| a.0 == b.0) {
            let t = group[0].0;
            let ids: Vec<RuleId> = group.iter().map(|&(_, id)| id).collect();
            for (m, p, r) in self.remove_rules(t, &ids) {
                if has_learn(&r) {
                    learners.push(r.clone());
                }
                self.note_removed(t, (m.expand(), p, r), RemovedReason::Delete, now);
            }
        }
        crate::ofproto::flush_learned_rules(self, &learners);
        sel.len()
    }

    /// Removes every rule of every table.
    pub fn clear_flows(&mut self) -> usize {
        self.begin_change();
        let mut n = 0;
        let now = Instant::now();
        for t in 0..self.tables.len() {
            let ids: Vec<RuleId> = self.tables[t].iter().map(|(id, ..)| id).collect();
            n += ids.len();
            for (m, p, r) in self.remove_rules(t, &ids) {
                self.note_removed(t, (m.expand(), p, r), RemovedReason::Delete, now);
            }
        }
        n
    }

    /// Removes rules whose idle or hard timeout has passed; returns how many. Only the rules
    /// with a timeout are looked at, and only those of the published version go.
    pub fn expire_rules(&mut self, now: Instant) -> usize {
        let v = self.tables_version();
        let mut dead: Vec<(usize, RuleId, RemovedReason)> = self
            .timed
            .iter()
            .copied()
            .filter_map(|(t, id)| {
                let table = &self.tables[t];
                let (_, _, r) = table.get(id)?;
                // A hard timeout counts from the last modification, as OVS's.
                let hard = r.hard_timeout != 0
                    && now.duration_since(r.modified).as_secs() >= u64::from(r.hard_timeout);
                let idle = r.idle_timeout != 0
                    && now.duration_since(r.last_used()).as_secs() >= u64::from(r.idle_timeout);
                if !table.visible_in(id, v) {
                    return None;
                }
                // A hard timeout is told first when both passed, as OVS checks it first.
                if hard {
                    Some((t, id, RemovedReason::HardTimeout))
                } else if idle {
                    Some((t, id, RemovedReason::IdleTimeout))
                } else {
                    None
                }
            })
            .collect();
        // In table and rule order, as a scan of the tables removes them.
        dead.sort_unstable_by_key(|&(t, id, _)| (t, id));
        let mut learners = Vec::new();
        for &(t, id, why) in &dead {
            // Each rule expires on its own (OVS's `ofproto_rule_expire()`).
            self.begin_change();
            if let Some(e) = self.remove_rule(t, id) {
                if has_learn(&e.2) {
                    learners.push(e.2.clone());
                }
                self.note_removed(t, e, why, now);
            }
        }
        crate::ofproto::flush_learned_rules(self, &learners);
        dead.len()
    }
}

/// Whether a rule's actions hold a `learn` (its removal may flush what it learned).
fn has_learn(r: &Rule) -> bool {
    r.actions
        .iter()
        .any(|a| matches!(a, crate::syntax::OfAction::Learn(_)))
}

#[cfg(test)]
mod tests {

    #[test]
    fn vlan_modes_follow_ovs_rules() {
        let port = |tag: Option<u16>, trunks: &[u16], mode: Option<PortVlanMode>| VlanMode {
            tag,
            trunks: trunks.to_vec(),
            mode,
            ..VlanMode::default()
        };
        let out_vid = |m: &VlanMode, vlan: u16| {
            let x = [
                VlanHdr {
                    tpid: 0x8100,
                    vid: vlan,
                    pcp: 0,
                },
                VlanHdr::default(),
            ];
            m.output_translate(&x)[0].vid
        };
        // No mode: a tag makes an access port, else a trunk.
        let access = port(Some(10), &[20], None);
        assert_eq!(access.kind(), PortVlanMode::Access);
        assert_eq!(access.input_vlan(0), Some(10));
        assert_eq!(access.input_vlan(10), None);
        assert!(access.carries(10) && !access.carries(20));
        assert_eq!(out_vid(&access, 10), 0);
        // An access port without a tag is in VLAN 0.
        assert_eq!(
            port(None, &[], Some(PortVlanMode::Access)).input_vlan(0),
            Some(0)
        );
        let trunk = port(None, &[10, 20], None);
        assert_eq!(trunk.input_vlan(0), None);
        assert_eq!(trunk.input_vlan(20), Some(20));
        assert_eq!(out_vid(&trunk, 20), 20);
        // Native: untagged frames in the native VLAN, which is always carried, and VLAN 0
        // never (even when listed).
        let untagged = port(Some(20), &[0, 10], Some(PortVlanMode::NativeUntagged));
        assert_eq!(untagged.input_vlan(0), Some(20));
        assert_eq!(untagged.input_vlan(20), Some(20));
        assert_eq!(untagged.input_vlan(10), Some(10));
        assert_eq!(untagged.input_vlan(30), None);
        assert!(untagged.carries(20) && untagged.carries(10) && !untagged.carries(0));
        assert_eq!(out_vid(&untagged, 20), 0);
        assert_eq!(out_vid(&untagged, 10), 10);
        let tagged = port(Some(10), &[], Some(PortVlanMode::NativeTagged));
        assert_eq!(tagged.input_vlan(0), Some(10));
        assert!(tagged.carries(4000) && !tagged.carries(0));
        assert_eq!(out_vid(&tagged, 10), 10);
        assert_eq!(PortVlanMode::parse("dot1q"), None);
    }

    #[test]
    fn dot1q_tunnel_pushes_and_pops_the_service_tag() {
        let c10 = VlanHdr {
            tpid: 0x8100,
            vid: 10,
            pcp: 0x6000,
        };
        let tunnel = VlanMode {
            tag: Some(100),
            mode: PortVlanMode::parse("dot1q-tunnel"),
            cvlans: vec![0, 10],
            ..VlanMode::default()
        };
        assert_eq!(tunnel.input_vlan(10), Some(100));
        assert_eq!(tunnel.input_vlan(0), Some(100));
        assert_eq!(tunnel.input_vlan(20), None, "not in cvlans");
        let inside = tunnel.input_translate(&[c10, VlanHdr::default()]);
        let s100 = VlanHdr {
            tpid: ETH_TYPE_8021AD,
            vid: 100,
            pcp: 0,
        };
        assert_eq!(inside, [s100, c10]);
        assert!(tunnel.includes(&inside));
        assert_eq!(tunnel.output_translate(&inside), [c10, VlanHdr::default()]);
        let c20 = VlanHdr { vid: 20, ..c10 };
        assert!(
            !tunnel.includes(&[s100, c20]),
            "customer VLAN not in cvlans"
        );
        // An access port in the service VLAN takes only untagged customer frames.
        let access = VlanMode {
            tag: Some(100),
            ..VlanMode::default()
        };
        assert!(!access.includes(&inside));
        assert!(access.includes(&[s100, VlanHdr::default()]));
        let dot1q = VlanMode {
            qinq_tpid: 0x8100,
            ..tunnel
        };
        assert_eq!(dot1q.input_translate(&XVlan::default())[0].tpid, 0x8100);
    }
    use super::*;
    use crate::syntax::{FlowKind, NoPortNames, parse_flow};

    fn mac(last: u8) -> EthAddr {
        EthAddr([2, 0, 0, 0, 0, last])
    }

    #[test]
    fn mac_table_learns_moves_ages_and_evicts_the_oldest() {
        let t0 = Instant::now();
        let mut m = MacTable::default();
        assert!(m.learn(mac(1), 10, 1, t0));
        assert!(
            !m.learn(mac(1), 10, 1, t0),
            "relearning in place is no change"
        );
        assert!(m.learn(mac(1), 10, 2, t0), "a move is a change");
        assert_eq!(m.lookup(mac(1), 10, t0), Some(2));
        assert_eq!(m.lookup(mac(1), 20, t0), None, "per VLAN");
        assert!(
            !m.learn(EthAddr([1, 0, 0, 0, 0, 1]), 10, 1, t0),
            "multicast"
        );
        let later = t0 + MAC_AGING;
        assert_eq!(m.lookup(mac(1), 10, later), None, "aged out");
        assert_eq!(m.expire(later), 1);
        // Full: the least recently learned entry makes room.
        for i in 0..MAC_TABLE_SIZE {
            let a = EthAddr([2, 1, 0, 0, (i >> 8) as u8, i as u8]);
            m.learn(a, 1, 1, t0 + Duration::from_millis(i as u64));
        }
        m.learn(mac(9), 1, 3, t0 + Duration::from_secs(10));
        assert_eq!(m.entries(t0).len(), MAC_TABLE_SIZE);
        assert_eq!(m.lookup(EthAddr([2, 1, 0, 0, 0, 0]), 1, t0), None);
        assert_eq!(m.lookup(mac(9), 1, t0 + Duration::from_secs(10)), Some(3));
        m.flush_port(3);
        assert_eq!(m.lookup(mac(9), 1, t0 + Duration::from_secs(10)), None);
    }

    fn spec(text: &str, kind: FlowKind) -> FlowSpec {
        parse_flow(text, kind, &NoPortNames).unwrap()
    }

    #[test]
    fn out_port_looks_where_ovs_looks() {
        let rule = |actions: &str| {
            let s = spec(&format!("actions={actions}"), FlowKind::Add);
            Rule::from_spec(&s, Instant::now())
        };
        assert!(rule("write_actions(output:2)").outputs_to(2));
        assert!(rule("clone(output:2)").outputs_to(2));
        assert!(rule("enqueue:2:1").outputs_to(2));
        assert!(rule("controller").outputs_to(crate::syntax::OFPP_CONTROLLER));
        // OVS's ofpacts_output_to_port() does not count a truncating output.
        assert!(!rule("output(port=2,max_len=100)").outputs_to(2));
        assert!(!rule("output:3").outputs_to(2));
    }

    /// The rules the classifier examined while `f` ran.
    fn visits(f: impl FnOnce()) -> u64 {
        use crate::classifier::VISITS;
        VISITS.with(|v| v.set(0));
        f();
        VISITS.with(|v| v.get())
    }

    #[test]
    fn a_flow_mod_examines_the_rules_it_touches_not_the_table() {
        let t0 = Instant::now();
        let mut b = Bridge::new("br0");
        let flow = |i: u32, out: u32| {
            let (x, y, z) = ((i >> 16) & 255, (i >> 8) & 255, i & 255);
            format!("priority=10,ip,nw_dst=10.{x}.{y}.{z},actions=output:{out}")
        };
        for i in 0..10_000 {
            b.add_flow(&spec(&flow(i, 2), FlowKind::Add), t0).unwrap();
        }
        let timed = spec("idle_timeout=60,priority=5,arp,actions=drop", FlowKind::Add);
        b.add_flow(&timed, t0).unwrap();
        // Each operation below examined every rule of the table before (rule expiry after
        // each barrier, the highest priority of a subtable after a removal, strict
        // selections); now a few each.
        let add = visits(|| {
            b.add_flow(&spec(&flow(10_000, 2), FlowKind::Add), t0)
                .unwrap()
        });
        let replace = visits(|| b.add_flow(&spec(&flow(7, 3), FlowKind::Add), t0).unwrap());
        let expire = visits(|| assert_eq!(b.expire_rules(t0), 0));
        let modify = spec(&flow(8, 4), FlowKind::ModOrDel);
        let modify = visits(|| assert_eq!(b.mod_flows(&modify, true, t0), 1));
        let del = spec(&flow(9, 2), FlowKind::ModOrDel);
        let del_strict = visits(|| assert_eq!(b.del_flows(&del, true), 1));
        let del = spec(&flow(10, 2), FlowKind::ModOrDel);
        let del_loose = visits(|| assert_eq!(b.del_flows(&del, false), 1));
        for (what, n) in [
            ("add", add),
            ("replace", replace),
            ("expire", expire),
            ("modify --strict", modify),
            ("delete --strict", del_strict),
            ("delete of a full match", del_loose),
        ] {
            assert!(n <= 4, "{what} examined {n} rules");
        }
        assert_eq!(b.n_rules(), 10_000);
    }

    #[test]
    fn a_selection_of_most_of_the_table_examines_each_rule_once() {
        let t0 = Instant::now();
        let mut b = Bridge::new("br0");
        for i in 0..10_000u32 {
            let (y, z) = ((i >> 8) & 255, i & 255);
            let f = format!(
                "priority={},ip,nw_dst=10.0.{y}.{z},actions=output:2",
                100 + i % 7
            );
            b.add_flow(&spec(&f, FlowKind::Add), t0).unwrap();
        }
        for i in 0..10u32 {
            let f = format!("priority=5,arp,arp_tpa=10.1.0.{i},actions=drop");
            b.add_flow(&spec(&f, FlowKind::Add), t0).unwrap();
        }
        let v = b.tables_version();
        for (text, n) in [("ip", 10_000), ("", 10_010)] {
            let sel = spec(text, FlowKind::ModOrDel);
            let mut got = Vec::new();
            // Each rule once, its priority with it: before, the rules were found, then looked
            // up again for their cookies (and a dump looked them up a third time for their
            // priorities).
            let examined = visits(|| got = b.select_entries_in(&sel, false, v));
            assert_eq!(got.len(), n, "{text:?}");
            assert!(examined <= 10_010, "{text:?}: examined {examined} rules");
            assert!(got.windows(2).all(|w| w[0].2 < w[1].2), "in rule order");
            for &(t, p, id) in &got {
                assert_eq!(b.tables[t].get(id).map(|(_, p, _)| p), Some(p));
            }
        }
    }

    #[test]
    fn flow_mods_select_loosely_or_strictly_and_timeouts_expire() {
        let t0 = Instant::now();
        let mut b = Bridge::new("br0");
        b.add_flow(
            &spec(
                "priority=10,ip,nw_dst=10.0.0.0/8,actions=output:1",
                FlowKind::Add,
            ),
            t0,
        )
        .unwrap();
        b.add_flow(&spec("priority=20,tcp,actions=output:2", FlowKind::Add), t0)
            .unwrap();
        b.add_flow(
            &spec("hard_timeout=5,priority=5,arp,actions=drop", FlowKind::Add),
            t0,
        )
        .unwrap();
        b.add_flow(
            &spec("idle_timeout=3,priority=6,udp,actions=drop", FlowKind::Add),
            t0,
        )
        .unwrap();
        // Adding the same match and priority replaces.
        b.add_flow(&spec("priority=20,tcp,actions=output:3", FlowKind::Add), t0)
            .unwrap();
        assert_eq!(b.n_rules(), 4);
        // Loose: every rule at least as specific as `ip` (ip, tcp, udp), strict: exact only.
        assert_eq!(b.select(&spec("ip", FlowKind::ModOrDel), false).len(), 3);
        assert_eq!(b.select(&spec("ip", FlowKind::ModOrDel), true).len(), 0);
        assert_eq!(
            b.select(&spec("priority=20,tcp", FlowKind::ModOrDel), true)
                .len(),
            1
        );
        assert_eq!(
            b.select(&spec("out_port=3", FlowKind::ModOrDel), false)
                .len(),
            1
        );
        let m = spec("tcp,actions=output:4", FlowKind::ModOrDel);
        assert_eq!(b.mod_flows(&m, false, t0), 1);
        assert_eq!(
            b.select(&spec("out_port=4", FlowKind::ModOrDel), false)
                .len(),
            1
        );
        assert_eq!(b.expire_rules(t0 + Duration::from_secs(2)), 0);
        assert_eq!(
            b.expire_rules(t0 + Duration::from_secs(3)),
            1,
            "idle udp rule"
        );
        assert_eq!(
            b.expire_rules(t0 + Duration::from_secs(5)),
            1,
            "hard arp rule"
        );
        assert_eq!(b.del_flows(&spec("ip", FlowKind::ModOrDel), false), 2);
        assert_eq!(b.n_rules(), 0);
    }

    /// OVS's "flow stats reset_counts": an add that replaces a rule keeps its counters unless
    /// it resets them, a modify resets them only when asked; the last use always stays.
    #[test]
    fn replacing_or_modifying_a_rule_keeps_its_counters_unless_reset_counts() {
        use crate::syntax::{FlowKind, NoPortNames, parse_flow};
        let spec = |s: &str, k| parse_flow(s, k, &NoPortNames).unwrap();
        let add = |s: &str| spec(s, FlowKind::Add);
        let mut b = Bridge::new("br0");
        let t0 = Instant::now();
        let counts = |b: &mut Bridge, set: Option<u64>| {
            let (id, ..) = b.tables[0].iter().next().unwrap();
            let r = b.tables[0].get_mut(id).unwrap();
            if let Some(n) = set {
                (r.n_packets, r.n_bytes, r.used) = (n, n * 100, Some(t0));
            }
            (r.n_packets, r.n_bytes, r.used)
        };
        b.add_flow(&add("ip,actions=NORMAL"), t0).unwrap();
        // Never hit: the replacement is idle since the first was made.
        let t1 = t0 + Duration::from_secs(1);
        b.add_flow(&add("ip,actions=NORMAL"), t1).unwrap();
        assert_eq!(counts(&mut b, None), (0, 0, Some(t0)));
        counts(&mut b, Some(2));
        b.add_flow(&add("ip,actions=NORMAL"), t0).unwrap();
        assert_eq!(counts(&mut b, None), (2, 200, Some(t0)));
        b.add_flow(&add("reset_counts,ip,actions=NORMAL"), t0)
            .unwrap();
        assert_eq!(counts(&mut b, None), (0, 0, Some(t0)));
        counts(&mut b, Some(3));
        b.mod_flows(&spec("ip,actions=NORMAL", FlowKind::ModOrDel), false, t0);
        assert_eq!(counts(&mut b, None), (3, 300, Some(t0)));
        let reset = spec("reset_counts,ip,actions=NORMAL", FlowKind::ModOrDel);
        b.mod_flows(&reset, false, t0);
        assert_eq!(counts(&mut b, None), (0, 0, Some(t0)));
    }
}
