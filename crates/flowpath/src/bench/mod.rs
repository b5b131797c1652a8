//! `flowpath bench SCENARIO`: builds a scenario's switch in-process with a replay source and
//! sink ports, warms up, measures, and checks that the sink received what the scenario must
//! forward (the count, and sampled frames compared byte for byte with the expected output).
//!
//! Scenarios follow the OVS-DPDK anchor's definitions (same traffic, same datapath flows):
//! - `p2p`: in_port → output; the I/O floor.
//! - `p2p_l3`: `ip,nw_dst=10.1.0.0/16` → set Ethernet destination, output; the EMC/megaflow path.
//! - `ct`: p2p through the connection tracker, the anchor's pipeline: `ct_state=-trk` →
//!   `ct(table=1)`; `+trk+new` → `ct(commit)`, output; `+trk+est` → output. One-way UDP, so
//!   every packet stays `+new` and takes both `ct()`s; the table holds one connection per flow.
//! - `ct_nat` (flowpath's own): as `ct` with source NAT to 10.2.0.1 (`ct(table=1,nat)`, then
//!   `ct(commit,nat(src=10.2.0.1))`): the floating-IP case.
//! - `ct_ovn` (flowpath's own): what OVN's ACL pipeline of a logical switch does per packet
//!   ([`CT_OVN_FLOWS`]), programmed as OpenFlow rules on both switches: the ingress ACL's
//!   `ct()` in the inport's zone (from reg13), `ct_state`/`ct_mark`/`ct_label` matches, a
//!   commit whose `exec(set_field)` clears the mark's blocked bit and writes the label, then
//!   the same in the egress ACL in the outport's zone. One-way UDP: every packet takes four
//!   `ct()`s in three passes, and the table holds two connections per flow.
//! - `ct_setup` (flowpath's own): the connection setup rate. `ct`'s pipeline and traffic with
//!   zone 0's UDP timeouts at 0 s, so that each connection is expired as soon as it is
//!   committed and every packet, whatever the rate and the flow count, is `+new` and commits a
//!   new one; the figure is setups per second, and the run fails unless the tracker committed
//!   one connection per packet at the sink. `scripts/compare-ovs` sets the same policy on OVS
//!   (`ovs-vsctl add-zone-tp`).
//! - `ct_flood` (flowpath's own): `ct` while a flood of new connections fills the table to its
//!   limit ([`ct_flood`]); fails unless every established packet is forwarded and no
//!   established connection is evicted.
//! - `io_floor_vxlan`, `io_floor_mplsogre`, `io_floor_geneve`: p2p fed the tunnel scenarios'
//!   traffic (as received, encapsulated): the I/O floor of those frames, which a tunnel
//!   scenario's cycles are compared against ("switching cycles" = scenario minus floor).
//!
//! The traffic is the anchor's (`netdev::anchor_traffic`), and `--write-pcap` writes it for
//! every scenario of the anchor, including those flowpath does not run yet, so that OVS can be
//! fed the very frames flowpath replays (`scripts/compare-ovs`).

mod ct_flood;
mod dpdk_io;
pub mod host;
mod opts;
pub mod pvp;
pub mod tunnel;

pub use opts::{BenchIo, BenchOpts};

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use datapath::dpif::{DatapathBuilder, DpConfig, default_pmd_cores};
use datapath::pmd::Stage;
use datapath::port::Port;
use netdev::anchor_traffic::{self, TrafficKind};
use netdev::memory::{ReplayPort, SampleSpec, SinkPort, plain_frames};

/// Fewest distinct flows the storm source cycles through (more than the default flow limit).
const STORM_FLOWS: usize = 262_144;

/// Frames from `n` distinct Ethernet sources (the storm rules make dl_src exact).
fn storm_frames(size: usize, n: usize) -> Vec<Vec<u8>> {
    let base = plain_frames(1, size).remove(0);
    (0..n)
        .map(|i| {
            let mut f = base.clone();
            let i = i as u32;
            f[6..12].copy_from_slice(&[0x02, 0xaa, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8]);
            f
        })
        .collect()
}

/// What a scenario is made of.
struct Scenario {
    /// Input frames (one per flow).
    frames: Vec<Vec<u8>>,
    /// Datapath flows as `(key, actions)` in `dpctl/add-flow` syntax.
    dp_flows: Vec<(String, String)>,
    /// The same forwarding as OpenFlow rules of bridge br0 (p0 is port 1, p1 port 2).
    of_flows: &'static [&'static str],
    /// The frame the sink must receive for each input frame.
    expect: fn(&[u8]) -> Vec<u8>,
}

/// Scenarios flowpath runs.
pub const SCENARIOS: &[&str] = &[
    "p2p",
    "p2p_l3",
    "vxlan_decap",
    "vxlan_decap_csum0",
    "mplsogre_decap",
    "geneve_decap",
    "geneve_decap_csum0",
    "vxlan_encap",
    "io_floor_vxlan",
    "io_floor_mplsogre",
    "io_floor_geneve",
    "gre_decap",
    "pvp",
    "ct",
    "ct_nat",
    "ct_ovn",
    "ct_setup",
    "ct_flood",
];

/// Every scenario of the OVS-DPDK anchor with the traffic it is fed (the anchor's pcap kinds).
/// flowpath runs those of [`SCENARIOS`]; the traffic of the others can be written already
/// (`--write-pcap`), so that OVS is measured on them with the frames flowpath will replay.
pub const ANCHOR_SCENARIOS: &[(&str, TrafficKind)] = &[
    ("p2p", TrafficKind::Plain),
    ("p2p_l3", TrafficKind::Plain),
    ("vxlan_decap", TrafficKind::VxlanL3vpn),
    ("vxlan_decap_csum0", TrafficKind::VxlanL3vpnCsum0),
    ("mplsogre_decap", TrafficKind::Mplsogre),
    ("geneve_decap", TrafficKind::Geneve),
    ("geneve_decap_csum0", TrafficKind::GeneveCsum0),
    ("vxlan_encap", TrafficKind::Plain),
    ("ct", TrafficKind::Plain),
    ("io_floor_vxlan", TrafficKind::VxlanL3vpn),
    ("io_floor_mplsogre", TrafficKind::Mplsogre),
    ("io_floor_geneve", TrafficKind::Geneve),
];

/// Scenarios of flowpath's own that the anchor does not have, with their traffic:
/// `gre_decap` is `mplsogre_decap` without MPLS (the same switch, GRE carrying the IPv4 packet
/// itself, rules on its destination instead of the label), to see what `pop_mpls` costs;
/// `pvp` sends p2p's traffic through a VM (testpmd on a vhost-user port) and back
/// ([`pvp`]); `ct_nat` and `ct_setup` are `ct` with source NAT and with every
/// packet a new connection; `ct_ovn` is OVN's ACL pipeline on `ct`'s traffic; `ct_flood` is
/// `ct`'s traffic beside a flood of new connections.
pub const OWN_SCENARIOS: &[(&str, TrafficKind)] = &[
    ("gre_decap", TrafficKind::GreIpv4),
    ("pvp", TrafficKind::Plain),
    ("ct_nat", TrafficKind::Plain),
    ("ct_ovn", TrafficKind::Plain),
    ("ct_setup", TrafficKind::Plain),
    ("ct_flood", TrafficKind::Plain),
];

/// `ct_setup`'s timeout policy for zone 0: UDP connections expire as soon as they are
/// committed, so a flow that comes round finds none and sets one up again, whatever the rate
/// and the flow count. (`scripts/compare-ovs` also feeds both switches more flows than a run
/// receives: OVS 3.1 keeps expired connections until its clean thread's next pass and walks
/// them on each lookup of the same tuple.)
pub const CT_SETUP_TIMEOUTS: [(conntrack::TimeoutClass, u32); 3] = [
    (conntrack::TimeoutClass::UdpFirst, 0),
    (conntrack::TimeoutClass::UdpSingle, 0),
    (conntrack::TimeoutClass::UdpMultiple, 0),
];

/// Largest tolerated difference between `ct_setup`'s commits and its sink packets, as a
/// fraction of the packets: the two counters are read a few batches apart.
const CT_SETUP_TOLERANCE: f64 = 0.01;

/// The traffic a scenario is fed.
fn traffic_kind(name: &str) -> anyhow::Result<TrafficKind> {
    match ANCHOR_SCENARIOS
        .iter()
        .chain(OWN_SCENARIOS)
        .find(|(n, _)| *n == name)
    {
        Some(&(_, kind)) => Ok(kind),
        None => bail!(
            "unknown scenario '{name}' (flowpath runs: {}; the OVS-DPDK anchor also has: {})",
            SCENARIOS.join(", "),
            anchor_only().join(", ")
        ),
    }
}

/// The anchor's scenarios flowpath does not run yet.
fn anchor_only() -> Vec<&'static str> {
    ANCHOR_SCENARIOS
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !SCENARIOS.contains(n))
        .collect()
}

/// A scenario's input traffic: its kind and `flows` frames of it, `size` as `anchor_traffic`
/// means it.
fn traffic(name: &str, flows: usize, size: usize) -> anyhow::Result<(TrafficKind, Vec<Vec<u8>>)> {
    let kind = traffic_kind(name)?;
    if !(1..=anchor_traffic::MAX_FLOWS).contains(&flows) {
        bail!(
            "--flows must be between 1 and {}",
            anchor_traffic::MAX_FLOWS
        );
    }
    Ok((kind, anchor_traffic::frames(kind, flows, size)))
}

/// `--write-pcap`: writes the traffic `flowpath bench` replays for `o` (scenario, flows, frame
/// size) to `path` as the anchor's pcap of that kind (packet k stamped at k µs). Returns the
/// number of frames and their kind.
pub fn write_traffic(o: &BenchOpts, path: &Path) -> anyhow::Result<(usize, TrafficKind)> {
    check_frame_size(o.frame_size)?;
    let (kind, mut frames) = traffic(&o.scenario, o.flows, o.frame_size)?;
    if o.scenario == "ct_flood" {
        frames = ct_flood::pcap_frames(&frames);
    }
    let f = std::fs::File::create(path).with_context(|| format!("{}", path.display()))?;
    anchor_traffic::write_pcap(std::io::BufWriter::new(f), &frames)
        .with_context(|| format!("{}", path.display()))?;
    Ok((frames.len(), kind))
}

/// `--print-openflow`: the OpenFlow rules of scenario `name` (bridge br0, p0 port 1, p1 port
/// 2), as `--openflow` programs them and `scripts/compare-ovs` gives them to OVS.
pub fn openflow_rules(name: &str) -> anyhow::Result<&'static [&'static str]> {
    let rules = scenario(name, 1, 64)?.of_flows;
    if rules.is_empty() {
        bail!("scenario '{name}' has no OpenFlow rules");
    }
    Ok(rules)
}

fn check_frame_size(size: usize) -> anyhow::Result<()> {
    if !(60..=9018).contains(&size) {
        bail!("--frame-size must be between 60 and 9018 bytes");
    }
    Ok(())
}

fn scenario(name: &str, flows: usize, size: usize) -> anyhow::Result<Scenario> {
    if !SCENARIOS.contains(&name) {
        traffic_kind(name)?;
        bail!(
            "scenario '{name}' is not in flowpath yet (it is the OVS-DPDK anchor's; \
             --write-pcap FILE writes its traffic); flowpath runs: {}",
            SCENARIOS.join(", ")
        );
    }
    let (_, frames) = traffic(name, flows, size)?;
    if let Some(t) = tunnel::scenario(name) {
        return Ok(Scenario {
            frames,
            dp_flows: Vec::new(),
            of_flows: &[],
            expect: t.expect,
        });
    }
    Ok(match name {
        "p2p" | "io_floor_vxlan" | "io_floor_mplsogre" | "io_floor_geneve" => Scenario {
            frames,
            dp_flows: vec![(
                "in_port(p0),eth_type(0x0800),ipv4(frag=no)".into(),
                "p1".into(),
            )],
            of_flows: &["in_port=1,actions=output:2"],
            expect: |f| f.to_vec(),
        },
        "pvp" => Scenario {
            frames,
            dp_flows: Vec::new(),
            of_flows: &[],
            expect: pvp::expect,
        },
        "p2p_l3" => Scenario {
            frames,
            dp_flows: vec![(
                "in_port(p0),eth(dst=8c:dc:d4:ab:5b:f0),eth_type(0x0800),\
                 ipv4(dst=10.1.0.0/255.255.0.0,frag=no)"
                    .into(),
                "set(eth(dst=52:54:00:00:00:01)),p1".into(),
            )],
            of_flows: &[
                "priority=10,ip,nw_dst=10.1.0.0/16,actions=mod_dl_dst:52:54:00:00:00:01,output:2",
                "priority=0,actions=drop",
            ],
            expect: |f| {
                let mut o = f.to_vec();
                o[..6].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 1]);
                o
            },
        },
        "ct_flood" => Scenario {
            frames,
            dp_flows: ct_dp_flows("ct", "ct(commit)"),
            of_flows: ct_flood::OF_FLOWS,
            expect: |f| f.to_vec(),
        },
        "ct" | "ct_setup" => Scenario {
            frames,
            dp_flows: ct_dp_flows("ct", "ct(commit)"),
            of_flows: &[
                "table=0,ip,ct_state=-trk,actions=ct(table=1)",
                "table=1,ip,ct_state=+trk+new,actions=ct(commit),output:2",
                "table=1,ip,ct_state=+trk+est,actions=output:2",
            ],
            expect: |f| f.to_vec(),
        },
        "ct_nat" => Scenario {
            frames,
            dp_flows: ct_dp_flows("ct(nat)", "ct(commit,nat(src=10.2.0.1))"),
            of_flows: &[
                "table=0,ip,ct_state=-trk,actions=ct(table=1,nat)",
                "table=1,ip,ct_state=+trk+new,actions=ct(commit,nat(src=10.2.0.1)),output:2",
                "table=1,ip,ct_state=+trk+est,actions=output:2",
            ],
            expect: snat_expect,
        },
        // Only as OpenFlow rules: translation makes its datapath flows.
        "ct_ovn" => Scenario {
            frames,
            dp_flows: Vec::new(),
            of_flows: CT_OVN_FLOWS,
            expect: |f| f.to_vec(),
        },
        other => unreachable!("scenario {other} is in SCENARIOS but not built"),
    })
}

/// `ct_ovn`'s OpenFlow tables: what ovn-controller installs for an ACL'd logical switch with
/// an `allow-related` ACL on UDP, one logical port on each of p0 (zone 1) and p1 (zone 2), in
/// OVN's registers (reg0 the ACL's flags, reg13 the conntrack zone, reg14/reg15 the logical
/// inport and outport). Table 0 classifies the port, 8 and 12 send IP to conntrack in the
/// zone of the pipeline's port (`ct_next`), 9 and 13 are the ACL stages (drop `+inv` and
/// blocked replies, pass established replies, mark new connections for commit), 10 and 14
/// commit (`ct_commit { ct_mark.blocked = 0; ct_label.label = 0x2a; }`), 11 loads the
/// outport's zone and clears reg0 as OVN's output stage does before the egress pipeline, 15
/// outputs. `scripts/compare-ovs` gives OVS the same rules.
pub const CT_OVN_FLOWS: &[&str] = &[
    "table=0,priority=100,in_port=1,ip,actions=set_field:0x1->reg13,set_field:0x1->reg14,set_field:0x2->reg15,resubmit(,8)",
    "table=0,priority=0,actions=drop",
    "table=8,priority=110,ip,actions=ct(table=9,zone=NXM_NX_REG13[0..15])",
    "table=9,priority=65532,ct_state=+inv+trk,actions=drop",
    "table=9,priority=65532,ct_state=+est+rpl+trk,ct_mark=0x1/0x1,actions=drop",
    "table=9,priority=65532,ct_state=-new+est-rel+rpl-inv+trk,ct_mark=0/0x1,actions=resubmit(,10)",
    "table=9,priority=2001,ct_state=+new-est+trk,udp,actions=set_field:0x2/0x2->reg0,resubmit(,10)",
    "table=9,priority=2001,ct_state=-new+est-rpl+trk,ct_mark=0x1/0x1,udp,actions=set_field:0x2/0x2->reg0,resubmit(,10)",
    "table=9,priority=2001,ct_state=-new+est-rpl+trk,ct_mark=0/0x1,ct_label=0x2a/0xff,udp,actions=resubmit(,10)",
    "table=9,priority=0,actions=drop",
    "table=10,priority=100,reg0=0x2/0x2,ip,actions=ct(commit,zone=NXM_NX_REG13[0..15],exec(set_field:0/0x1->ct_mark,set_field:0x2a->ct_label)),resubmit(,11)",
    "table=10,priority=0,actions=resubmit(,11)",
    "table=11,priority=100,reg15=0x2,actions=set_field:0x2->reg13,set_field:0->reg0,resubmit(,12)",
    "table=11,priority=0,actions=drop",
    "table=12,priority=110,ip,actions=ct(table=13,zone=NXM_NX_REG13[0..15])",
    "table=13,priority=65532,ct_state=+inv+trk,actions=drop",
    "table=13,priority=65532,ct_state=+est+rpl+trk,ct_mark=0x1/0x1,actions=drop",
    "table=13,priority=65532,ct_state=-new+est-rel+rpl-inv+trk,ct_mark=0/0x1,actions=resubmit(,14)",
    "table=13,priority=2001,ct_state=+new-est+trk,udp,actions=set_field:0x2/0x2->reg0,resubmit(,14)",
    "table=13,priority=2001,ct_state=-new+est-rpl+trk,ct_mark=0x1/0x1,udp,actions=set_field:0x2/0x2->reg0,resubmit(,14)",
    "table=13,priority=2001,ct_state=-new+est-rpl+trk,ct_mark=0/0x1,ct_label=0x2a/0xff,udp,actions=resubmit(,14)",
    "table=13,priority=0,actions=drop",
    "table=14,priority=100,reg0=0x2/0x2,ip,actions=ct(commit,zone=NXM_NX_REG13[0..15],exec(set_field:0/0x1->ct_mark,set_field:0x2a->ct_label)),resubmit(,15)",
    "table=14,priority=0,actions=resubmit(,15)",
    "table=15,priority=100,reg15=0x2,actions=output:2",
];

/// Longest a `ct` scenario's warm-up waits for every flow's connections.
const CT_WARMUP_MAX: Duration = Duration::from_secs(60);

/// Conntrack zones a packet of `scenario` passes through (connections per flow).
fn ct_zones(scenario: &str) -> usize {
    if scenario == "ct_ovn" { 2 } else { 1 }
}

/// The datapath flows of the `ct` pipeline (what OVS installs for it, `ct_1000.txt` of the
/// anchor's dumps): pass 1 `first` and recirculation, pass 2 `commit` and output for `+new`,
/// output for `+est`.
fn ct_dp_flows(first: &str, commit: &str) -> Vec<(String, String)> {
    let m = "in_port(p0),eth_type(0x0800),ipv4(frag=no)";
    vec![
        (
            format!("ct_state(-trk),recirc_id(0),{m}"),
            format!("{first},recirc(0x1)"),
        ),
        (
            format!("ct_state(+new+trk),recirc_id(0x1),{m}"),
            format!("{commit},p1"),
        ),
        (
            format!("ct_state(+est+trk),recirc_id(0x1),{m}"),
            "p1".into(),
        ),
    ]
}

/// A plain frame after source NAT to 10.2.0.1 with its port kept (each flow's ports differ,
/// so every original port is free): the address and both checksums, updated incrementally.
fn snat_expect(f: &[u8]) -> Vec<u8> {
    use wire::checksum::update32;
    let mut o = f.to_vec();
    let old = u32::from_be_bytes(o[26..30].try_into().unwrap());
    let new = u32::from_be_bytes([10, 2, 0, 1]);
    o[26..30].copy_from_slice(&new.to_be_bytes());
    let ip = update32(u16::from_be_bytes([o[24], o[25]]), old, new);
    o[24..26].copy_from_slice(&ip.to_be_bytes());
    let udp = u16::from_be_bytes([o[40], o[41]]);
    if udp != 0 {
        let c = match update32(udp, old, new) {
            0 => 0xffff,
            c => c,
        };
        o[40..42].copy_from_slice(&c.to_be_bytes());
    }
    o
}

/// One run's figures.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchResult {
    pub scenario: String,
    /// The anchor's traffic kind replayed (`plain`, `vxlan_l3vpn`, ...), or the `--pcap` file.
    pub traffic: String,
    pub flows: usize,
    /// The plain frame's size or, for tunnel traffic, the inner frame's (FCS included).
    pub frame_size: usize,
    pub pmds: usize,
    pub emc: bool,
    /// Whether the OpenFlow pipeline programmed the switch (`--openflow`).
    pub openflow: bool,
    /// The offered upcall storm (`--storm`), packets per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storm_pps: Option<f64>,
    /// What the sink received per second: the cached traffic's forwarding rate.
    pub sink_mpps: f64,
    pub seconds: f64,
    pub mpps: f64,
    /// Busy cycles per packet received (every pass: for `pvp`, from the NIC and from the VM).
    pub cycles_per_packet: f64,
    /// Busy cycles per packet the sink received: for `pvp`, what a round trip through the VM
    /// costs the switch.
    pub cycles_per_sink_packet: f64,
    /// For `pvp`: packets the VM's full receive ring turned away during the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest_ring_drops: Option<u64>,
    pub passes_per_packet: f64,
    /// Passes the simple match found (no key, hash or EMC lookup).
    pub simple_hit_pct: f64,
    pub emc_hit_pct: f64,
    pub megaflow_hit_pct: f64,
    pub subtable_lookups_per_hit: f64,
    pub upcalls: u64,
    pub lost_upcalls: u64,
    /// Misses that had to wait for the slow path's time budget (counted at each wait).
    pub deferred_upcalls: u64,
    pub rx_packets: u64,
    pub sink_packets: u64,
    pub samples_checked: usize,
    pub forwarded_ok: bool,
    /// Cycles per packet by stage: rx, extract, emc, megaflow, upcall, actions, tx.
    pub stage_cycles_per_packet: Vec<(String, f64)>,
    /// Of `cycles_per_packet`, what the per-stage accounting itself costs (its TSC reads).
    pub stage_accounting_cycles_per_packet: f64,
    /// For the `ct` scenarios: connections in the table after the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ct_connections: Option<u32>,
    /// For `ct_setup`: connections the tracker committed during the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ct_setups: Option<u64>,
    /// For `ct_setup`: connection setups per second, the figure of the scenario.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ct_setups_per_sec: Option<f64>,
    /// For `ct_flood`: the established traffic's and the flood's figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ct_flood: Option<ct_flood::FloodFigures>,
    /// Why `forwarded_ok` is false, if it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// Bridge br0 with p0 (OpenFlow and datapath port 1) and p1 (2), programmed with `flows`.
fn openflow_switch(
    flows: &[&str],
    storm: bool,
) -> anyhow::Result<std::sync::Arc<ofproto::ofproto::Ofproto>> {
    use ofproto::bridge::{OfPort, VlanMode};
    let of = ofproto::ofproto::Ofproto::new();
    of.add_bridge("br0").map_err(anyhow::Error::msg)?;
    let ports: &[(&str, u32)] = if storm {
        &[("p0", 1), ("p1", 2), ("p2", 3)]
    } else {
        &[("p0", 1), ("p1", 2)]
    };
    for &(name, no) in ports {
        of.add_port(
            "br0",
            OfPort {
                name: name.into(),
                ofport: no,
                dp_port: Some(no),
                peer: None,
                vlan: VlanMode::default(),
            },
        )
        .map_err(anyhow::Error::msg)?;
    }
    // The storm's packets consult their full Ethernet source (a miss in the dl_src stage of
    // the first rule), so each new source is a new megaflow, hence an upcall.
    let storm_flows: &[&str] = if storm {
        &[
            "priority=30,in_port=3,dl_src=02:ff:ff:ff:ff:ff,actions=drop",
            "priority=29,in_port=3,actions=drop",
        ]
    } else {
        &[]
    };
    for f in storm_flows.iter().chain(flows) {
        of.add_flow("br0", f)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("flow {f}"))?;
    }
    Ok(of)
}

/// Runs one benchmark.
pub fn run(o: &BenchOpts) -> anyhow::Result<BenchResult> {
    check_frame_size(o.frame_size)?;
    // A scenario made of OpenFlow rules alone is programmed by them.
    let of_only = BenchOpts {
        openflow: true,
        ..o.clone()
    };
    let o = if o.scenario == "ct_ovn" { &of_only } else { o };
    if o.scenario == "ct_flood" {
        return ct_flood::run(o);
    }
    let mut sc = scenario(&o.scenario, o.flows, o.frame_size)?;
    let mut flows = o.flows;
    let mut traffic = traffic_kind(&o.scenario)?.name().to_owned();
    if let Some(p) = &o.pcap {
        traffic = p.display().to_string();
        sc.frames = netdev::pcap::read_file(p)
            .with_context(|| format!("{}", p.display()))?
            .into_iter()
            .map(|r| r.data)
            .collect();
        if sc.frames.is_empty() {
            bail!("{}: no packets", p.display());
        }
        flows = sc.frames.len();
    }
    if o.io == BenchIo::Dpdk {
        traffic = format!("{traffic}, DPDK net_pcap -> net_null");
    }
    let expected: HashSet<Vec<u8>> = sc.frames.iter().map(|f| (sc.expect)(f)).collect();
    // Keep a spread sample: enough to cover the flows without touching the steady state.
    let sample = SampleSpec {
        max: 256,
        every: 1 + (flows as u64 / 64),
    };
    let label = format!("{traffic} {flows}x{}B", o.frame_size);
    let tunnel = tunnel::scenario(&o.scenario);
    if o.io == BenchIo::Dpdk && (o.scenario == "pvp" || o.storm.is_some()) {
        bail!("--io dpdk is for p2p, p2p_l3, the tunnel and the ct scenarios, without --storm");
    }
    if o.io == BenchIo::Dpdk && o.pmds > 1 {
        bail!("--io dpdk runs one PMD (net_pcap has one rx queue)");
    }
    type Normalize = fn(&[u8]) -> Vec<u8>;
    let mut vm = None;
    let mut capture = None;
    let (mut dp, samples, sinks, normalize): (_, _, &[&str], Normalize) = match &tunnel {
        None if o.scenario == "pvp" => {
            let (dp, samples, v) = pvp::start(o, sc.frames, &label, sample)?;
            vm = Some(v);
            (dp, samples, &["p1"], |f: &[u8]| f.to_vec())
        }
        Some(t) => {
            if o.storm.is_some() || o.pmds > 1 {
                bail!("{}: --storm and --pmds are for p2p and p2p_l3", o.scenario);
            }
            let io = match o.io {
                BenchIo::Replay => tunnel::Io::Replay(sc.frames),
                BenchIo::Dpdk => {
                    let io = dpdk_io::ports(&sc.frames, t.sinks)?;
                    capture = Some(io.capture);
                    tunnel::Io::Dpdk(io.source, io.sinks)
                }
            };
            let (dp, samples) = t.start(io, &label, 1, sample, o.emc)?;
            (dp, samples, t.sinks, t.normalize)
        }
        None => {
            let (dp, samples, c) = start_p2p(o, sc, &label, sample)?;
            capture = c;
            (dp, samples, &["p1"], |f: &[u8]| f.to_vec())
        }
    };
    // What the sink must match: what entered the switch on the last hop.
    let source = if vm.is_some() { "vm" } else { "p0" };
    let mut r = run_measured(
        o,
        &mut dp,
        &samples,
        &expected,
        sinks,
        source,
        normalize,
        traffic,
        flows,
        &|| {},
    );
    if o.scenario.starts_with("ct")
        && let Ok(res) = &mut r
    {
        let n = dp.conntrack().n_conns();
        res.ct_connections = Some(n);
        if o.scenario == "ct_setup" {
            // One commit per packet forwarded: none found a live connection or was refused.
            if let Some(f) = res
                .ct_setups
                .and_then(|c| setup_failure(c, res.sink_packets))
                && res.failure.is_none()
            {
                res.failure = Some(f);
                res.forwarded_ok = false;
            }
        } else if n as usize != flows * ct_zones(&o.scenario) && res.failure.is_none() {
            // One committed connection per flow and zone, none lost or duplicated.
            res.failure = Some(format!(
                "the connection table holds {n} connections, not {} per flow ({flows})",
                ct_zones(&o.scenario)
            ));
            res.forwarded_ok = false;
        }
    }
    if std::env::var_os("CT41_DUMP").is_some() {
        eprintln!("{}", dp.dump_flows(false));
    }
    drop(dp.stop());
    drop(vm);
    drop(capture);
    r
}

/// Starts the switch of `p2p` and `p2p_l3`: a replay port p0, a sink p1 (or DPDK's, with
/// `--io dpdk`, and the capture they replay), datapath flows or the OpenFlow rules of the
/// scenario (and a storm source p2).
fn start_p2p(
    o: &BenchOpts,
    mut sc: Scenario,
    label: &str,
    sample: SampleSpec,
) -> anyhow::Result<(
    datapath::dpif::Datapath,
    tunnel::Samples,
    Option<dpdk_io::Capture>,
)> {
    let mut cfg = DpConfig {
        pmd_cores: default_pmd_cores(o.pmds),
        ..DpConfig::default()
    };
    cfg.pmd.emc_insert_inv_prob = if o.emc { 100 } else { 0 };
    let mut b = DatapathBuilder::new(cfg);
    let (source, sink, samples, capture): (Box<dyn Port>, Box<dyn Port>, _, _) = match o.io {
        BenchIo::Replay => {
            let frames = std::mem::take(&mut sc.frames);
            let sink = SinkPort::new("p1", sample);
            let samples = sink.samples();
            let replay = ReplayPort::new("p0", label, frames, o.pmds.max(1));
            (Box::new(replay), Box::new(sink), samples, None)
        }
        BenchIo::Dpdk => {
            let mut io = dpdk_io::ports(&sc.frames, &["p1"])?;
            let sink = io.sinks.remove(0);
            (io.source, sink, Default::default(), Some(io.capture))
        }
    };
    b.add_port(1, source).map_err(anyhow::Error::msg)?;
    b.add_port(2, sink).map_err(anyhow::Error::msg)?;
    if o.scenario == "ct_setup" {
        // As compare-ovs configures OVS: zone 0's policy, and no limit that expired
        // connections not yet swept could reach.
        let ct = b.conntrack();
        ct.set_timeouts(Some(0), &CT_SETUP_TIMEOUTS);
        ct.set_maxconns(u32::MAX);
    }
    if o.storm.is_some() && !o.openflow {
        bail!("--storm needs --openflow (the storm is made of upcalls)");
    }
    if o.storm.is_some_and(|pps| !(pps.is_finite() && pps >= 1.0)) {
        bail!("--storm takes a rate of at least 1 packet per second");
    }
    if o.openflow {
        let of = openflow_switch(sc.of_flows, o.storm.is_some())?;
        b.set_upcall(Box::new(move || of.upcall_handler()));
    }
    if let Some(pps) = o.storm {
        // Enough distinct flows that none comes back while its megaflow could still be cached
        // (warm-up, window and the 10 s idle expiry).
        let n = ((pps * (o.seconds + 13.0)) as usize).clamp(STORM_FLOWS, 1 << 22);
        let storm = ReplayPort::new("p2", "storm", storm_frames(o.frame_size, n), 1).with_rate(pps);
        b.add_port(3, Box::new(storm)).map_err(anyhow::Error::msg)?;
    }
    let mut dp = b.start().map_err(anyhow::Error::msg)?;
    if !o.openflow {
        for (k, a) in &sc.dp_flows {
            dp.add_flow(k, a)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("flow {k} actions:{a}"))?;
        }
    }
    Ok((dp, samples, capture))
}

/// Warms up, measures (calling `window_start` as the window opens) and checks what the sinks
/// received.
#[allow(clippy::too_many_arguments)]
fn run_measured(
    o: &BenchOpts,
    dp: &mut datapath::dpif::Datapath,
    samples: &std::sync::Mutex<Vec<Vec<u8>>>,
    expected: &HashSet<Vec<u8>>,
    sinks: &[&str],
    source: &str,
    normalize: fn(&[u8]) -> Vec<u8>,
    traffic: String,
    flows: usize,
    window_start: &dyn Fn(),
) -> anyhow::Result<BenchResult> {
    let sunk = |dp: &datapath::dpif::Datapath| -> u64 {
        sinks
            .iter()
            .map(|s| dp.port_counters(s).unwrap_or_default().tx_packets)
            .sum()
    };
    // Warm up: caches fill, the classifier ranks its subtables, pools stop allocating.
    let warmup = Duration::from_secs_f64((o.seconds / 3.0).clamp(0.5, 2.0));
    std::thread::sleep(warmup);
    if o.scenario.starts_with("ct") && o.scenario != "ct_setup" {
        // The table's steady state: every flow's connections made (a million take seconds),
        // then every flow round once more with its connection known.
        let want = (flows * ct_zones(&o.scenario)) as u32;
        let deadline = std::time::Instant::now() + CT_WARMUP_MAX;
        while dp.conntrack().n_conns() < want && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(warmup);
    }
    let sink0 = sunk(dp);
    let committed0 = dp.conntrack().stats().committed;
    let src0 = dp.port_counters(source).unwrap_or_default().rx_packets;
    let vm0 = dp.port_counters("vm");
    dp.clear_stats();
    window_start();
    std::thread::sleep(Duration::from_secs_f64(o.seconds));
    let secs = dp.measured_secs();
    let s = dp.total_stats();
    let sink1 = sunk(dp);
    let committed = dp.conntrack().stats().committed - committed0;
    let src1 = dp.port_counters(source).unwrap_or_default().rx_packets;
    let guest_ring_drops = vm0
        .zip(dp.port_counters("vm"))
        .map(|(a, b)| b.tx_dropped.saturating_sub(a.tx_dropped));

    let rx = s.rx_packets.max(1) as f64;
    let passes = s.passes().max(1) as f64;
    let sink_packets = sink1.saturating_sub(sink0);

    // Verification: nothing lost beyond what is in flight, every sampled frame as expected
    // (DPDK's net_null keeps no frames: only its count is checked).
    let sampled = o.io == BenchIo::Replay;
    let mut failure = None;
    let got: Vec<Vec<u8>> = samples
        .lock()
        .map(|v| v.iter().map(|f| normalize(f)).collect())
        .unwrap_or_default();
    if s.rx_packets == 0 {
        failure = Some("no packets were received".to_owned());
    } else if sink_packets == 0 || (sampled && got.is_empty()) {
        failure = Some("the sink received nothing".to_owned());
    } else if let Some(bad) = got.iter().find(|f| !expected.contains(*f)) {
        failure = Some(format!(
            "the sink received an unexpected frame: {}",
            hex(bad)
        ));
    } else if (sink_packets as f64) < 0.99 * src1.saturating_sub(src0) as f64 {
        failure = Some(format!(
            "{source} received {} but the sink got only {sink_packets}",
            src1.saturating_sub(src0)
        ));
    } else if s.lost_upcalls > 0 && o.storm.is_none() {
        failure = Some(format!("{} packets missed every flow", s.lost_upcalls));
    }

    Ok(BenchResult {
        scenario: o.scenario.clone(),
        traffic,
        flows,
        frame_size: o.frame_size,
        pmds: o.pmds.max(1),
        emc: o.emc,
        openflow: o.openflow,
        storm_pps: o.storm,
        sink_mpps: sink_packets as f64 / secs / 1e6,
        seconds: secs,
        mpps: s.rx_packets as f64 / secs / 1e6,
        cycles_per_packet: s.busy_cycles as f64 / rx,
        cycles_per_sink_packet: s.busy_cycles as f64 / sink_packets.max(1) as f64,
        guest_ring_drops,
        passes_per_packet: passes / rx,
        simple_hit_pct: 100.0 * s.simple_hits as f64 / passes,
        emc_hit_pct: 100.0 * s.emc_hits as f64 / passes,
        megaflow_hit_pct: 100.0 * s.megaflow_hits as f64 / passes,
        subtable_lookups_per_hit: if s.megaflow_hits == 0 {
            0.0
        } else {
            s.subtable_lookups as f64 / s.megaflow_hits as f64
        },
        upcalls: s.upcalls,
        lost_upcalls: s.lost_upcalls,
        deferred_upcalls: s.deferred_upcalls,
        rx_packets: s.rx_packets,
        sink_packets,
        samples_checked: got.len(),
        forwarded_ok: failure.is_none(),
        stage_cycles_per_packet: Stage::ALL
            .iter()
            .map(|st| {
                (
                    st.name().to_owned(),
                    s.stage_cycles[*st as usize] as f64 / rx,
                )
            })
            .collect(),
        stage_accounting_cycles_per_packet: datapath::dpif::stage_accounting_cost(&s).1,
        ct_connections: None,
        ct_setups: (o.scenario == "ct_setup").then_some(committed),
        ct_setups_per_sec: (o.scenario == "ct_setup").then_some(committed as f64 / secs),
        ct_flood: None,
        failure,
    })
}

/// Why `ct_setup`'s window was not one connection setup per packet, if it was not: `committed`
/// connections for `sink` packets forwarded.
fn setup_failure(committed: u64, sink: u64) -> Option<String> {
    (committed.abs_diff(sink) as f64 > CT_SETUP_TOLERANCE * sink as f64).then(|| {
        format!(
            "{committed} connections were committed for {sink} packets at the sink, \
             not one per packet"
        )
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().take(64).fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// The human-readable report of one run.
pub fn report(r: &BenchResult) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} traffic={} flows={} frame={}B pmds={} emc={}{}: {:.2} Mpps, {:.0} cycles/pkt, {:.2} passes/pkt",
        r.scenario,
        r.traffic,
        r.flows,
        r.frame_size,
        r.pmds,
        if r.emc { "on" } else { "off" },
        if r.openflow { " openflow" } else { "" },
        r.mpps,
        r.cycles_per_packet,
        r.passes_per_packet
    );
    if let Some(pps) = r.storm_pps {
        let _ = writeln!(
            o,
            "  storm: {pps:.0} new flows/s offered on p2; cached traffic delivered {:.2} Mpps",
            r.sink_mpps
        );
    }
    if let (Some(n), Some(rate)) = (r.ct_setups, r.ct_setups_per_sec) {
        let _ = writeln!(
            o,
            "  connection setups: {:.3} M/s ({n} committed in the window for {} packets at the \
             sink), {:.0} cycles/setup",
            rate / 1e6,
            r.sink_packets,
            r.cycles_per_sink_packet
        );
    }
    if let Some(f) = &r.ct_flood {
        o.push_str(&ct_flood::report(f));
    }
    if let Some(d) = r.guest_ring_drops {
        let _ = writeln!(
            o,
            "  through the VM and back: {:.2} Mpps at the sink, {:.0} cycles/pkt of the switch \
             (= {:.2} Mpps per switch core at {:.1} GHz); VM ring full: {d} drops",
            r.sink_mpps,
            r.cycles_per_sink_packet,
            datapath::tsc::hz() as f64 / r.cycles_per_sink_packet.max(1.0) / 1e6,
            datapath::tsc::hz() as f64 / 1e9
        );
    }
    let _ = writeln!(
        o,
        "  hits: simple {:.1} %, emc {:.1} %, megaflow {:.1} % ({:.2} subtable lookups/hit), \
         upcalls {}, lost {}",
        r.simple_hit_pct,
        r.emc_hit_pct,
        r.megaflow_hit_pct,
        r.subtable_lookups_per_hit,
        r.upcalls,
        r.lost_upcalls
    );
    let stages: Vec<String> = r
        .stage_cycles_per_packet
        .iter()
        .map(|(n, c)| format!("{n} {c:.1}"))
        .collect();
    let _ = writeln!(o, "  cycles/pkt by stage: {}", stages.join(", "));
    let _ = writeln!(
        o,
        "  stage accounting overhead: {:.1} cycles/pkt ({:.1} %)",
        r.stage_accounting_cycles_per_packet,
        100.0 * r.stage_accounting_cycles_per_packet / r.cycles_per_packet.max(1e-9)
    );
    match &r.failure {
        None => {
            let _ = writeln!(
                o,
                "  forwarded ok: {} packets to the sink, {} sampled frames as expected",
                r.sink_packets, r.samples_checked
            );
        }
        Some(f) => {
            let _ = writeln!(o, "  FORWARDING FAILED: {f}");
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// `flowpath bench --help` names every scenario flowpath runs, and any other scenario of
    /// the anchor as one it does not run yet.
    #[test]
    fn help_names_the_scenarios_that_exist() {
        let mut cli = crate::Cli::command();
        let help = cli
            .find_subcommand_mut("bench")
            .unwrap()
            .render_long_help()
            .to_string();
        let (runs, not_yet) = help.split_once("does not run yet").unwrap_or((&help, ""));
        for s in SCENARIOS {
            assert!(runs.contains(s), "{s} missing from:\n{help}");
        }
        for s in anchor_only() {
            assert!(not_yet.contains(s), "{s} missing from:\n{help}");
        }
    }

    /// `ct_setup` passes with one commit per sink packet, within what two counters read a
    /// few batches apart can differ by, and fails when packets found a live connection.
    #[test]
    fn ct_setup_needs_one_commit_per_packet() {
        assert_eq!(setup_failure(1_000_000, 1_000_000), None);
        assert_eq!(setup_failure(995_000, 1_000_000), None);
        assert_eq!(setup_failure(1_004_000, 1_000_000), None);
        let e = setup_failure(600_000, 1_000_000).unwrap();
        assert!(
            e.contains("600000 connections were committed for 1000000"),
            "{e}"
        );
        assert!(setup_failure(0, 1000).is_some());
        assert!(setup_failure(1000, 0).is_some());
    }

    #[test]
    fn every_scenario_is_the_anchors_and_builds() {
        for &name in SCENARIOS {
            let kind = traffic_kind(name).unwrap();
            let sc = scenario(name, 8, 64).unwrap();
            assert_eq!(sc.frames, anchor_traffic::frames(kind, 8, 64), "{name}");
        }
        for name in anchor_only() {
            let e = scenario(name, 8, 64).err().unwrap().to_string();
            assert!(e.contains("is not in flowpath yet"), "{e}");
        }
        assert!(
            traffic_kind("nosuch")
                .unwrap_err()
                .to_string()
                .contains("unknown scenario")
        );
    }
}
