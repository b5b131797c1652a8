//! `ofproto/trace` against the real Open vSwitch: for each pipeline in `tests/data/trace`
//! (made by `scripts/gen-trace-golden` with OVS 3.1's dummy datapath), the same ports and flows
//! are set up here and every recorded trace is compared with OVS's text, byte for byte.
//!
//! Cases listed in `CONFORMANT` must match exactly (a regression fails the test); the others
//! are reported with their first differing line, as the work still to do.

use std::path::{Path, PathBuf};

use ofproto::bridge::{OfPort, PortVlanMode, VlanMode};
use ofproto::ofproto::Ofproto;

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/trace")
}

/// Cases that match OVS's output exactly today: L2 NORMAL with access, trunk, native and
/// dot1q-tunnel (QinQ) VLANs and MAC learning, L3 routes with prefix-tracked megaflows,
/// multi-table pipelines with registers, metadata and resubmit, patch ports, VLAN and MPLS
/// actions, QoS queues (`set_queue`, `enqueue`, `pop_queue`, a flow's `skb_priority`),
/// `encap(mpls)`, `encap(ethernet)` and `decap()` (mpls_encap/01 to 03 differ only in how OVS
/// prints the `set_field`s it decoded from OpenFlow 1.3).
const CONFORMANT: &[&str] = &[
    "l2_normal_native_vlans/01",
    "l2_normal_native_vlans/02",
    "l2_normal_native_vlans/03",
    "l2_normal_native_vlans/04",
    "l2_normal_native_vlans/05",
    "l2_normal_native_vlans/06",
    "l2_normal_native_vlans/07",
    "l2_normal_native_vlans/08",
    "l2_normal_native_vlans/09",
    "l2_normal_qinq/01",
    "l2_normal_qinq/02",
    "l2_normal_qinq/03",
    "l2_normal_qinq/04",
    "l2_normal_qinq/05",
    "l2_normal_qinq/06",
    "l2_normal_qinq/07",
    "l2_normal_qinq/08",
    "l2_normal_qinq/09",
    "l2_normal_qinq/10",
    "l2_normal_qinq/11",
    "l2_normal_qinq/12",
    "l2_normal_qinq/13",
    "l2_normal_qinq_limit0/01",
    "l2_normal_qinq_limit0/02",
    "l2_normal_qinq_limit0/03",
    "l2_normal_qinq_limit0/04",
    "l2_normal_qinq_limit0/05",
    "l2_normal_qinq_limit0/06",
    "l2_normal_qinq_limit0/07",
    "l2_normal_qinq_limit0/08",
    "l2_normal_qinq_limit0/09",
    "l2_normal_qinq_limit0/10",
    "l2_normal_qinq_limit0/11",
    "l2_normal_qinq_limit0/12",
    "l2_normal_qinq_limit0/13",
    "l2_normal_qinq_limit2/01",
    "l2_normal_qinq_limit2/02",
    "l2_normal_qinq_limit2/03",
    "l2_normal_qinq_limit2/04",
    "l2_normal_qinq_limit2/05",
    "l2_normal_qinq_limit2/06",
    "l2_normal_qinq_limit2/07",
    "l2_normal_qinq_limit2/08",
    "l2_normal_qinq_limit2/09",
    "l2_normal_qinq_limit2/10",
    "l2_normal_qinq_limit2/11",
    "l2_normal_qinq_limit2/12",
    "l2_normal_qinq_limit2/13",
    "l2_normal_vlans/01",
    "l2_normal_vlans/02",
    "l2_normal_vlans/03",
    "l2_normal_vlans/04",
    "l2_normal_vlans/05",
    "l2_normal_vlans/06",
    "l2_normal_vlans/08",
    "l2_normal_vlans/09",
    "l3_routes/01",
    "l3_routes/02",
    "l3_routes/03",
    "l3_routes/04",
    "l3_routes/05",
    "l3_routes/06",
    "l3_routes/07",
    "l3_routes/08",
    "l3_routes/09",
    "mpls_encap/04",
    "mpls_encap/05",
    "mpls_encap/06",
    "mpls_encap/07",
    "mpls_encap/08",
    "mpls_encap/09",
    "mpls_encap_limits/01",
    "mpls_encap_limits/02",
    "mpls_encap_limits/03",
    "mpls_encap_limits/04",
    "multi_table/03",
    "multi_table/04",
    "multi_table/05",
    "multi_table/06",
    "patch_ports/01",
    "patch_ports/02",
    "patch_ports/03",
    "patch_ports/04",
    "patch_ports/05",
    "queues/01",
    "queues/02",
    "queues/03",
    "queues/04",
    "queues/05",
    "queues/06",
    "queues/07",
    "vlan_mpls_actions/01",
    "vlan_mpls_actions/02",
    "vlan_mpls_actions/03",
    "vlan_mpls_actions/04",
    "vlan_mpls_actions/06",
    "vlan_mpls_actions/07",
    "vlan_mpls_actions/08",
    "vlan_mpls_actions/09",
    "responders/01",
    "responders/02",
    "responders/03",
    "responders/04",
    "responders/05",
];

/// What OVS adds to a trace whose datapath actions its datapath leaves to the slow path: the
/// ARP, ICMP and ND rewrites of the `responders` pipeline. flowpath's datapath executes them
/// itself (docs/interop.md), so its trace has no such lines; the rest must be OVS's.
const OVS_SLOW_PATH: &str = "This flow is handled by the userspace slow path because it:\n  \
    - Uses action(s) not supported by datapath.\n";

/// The Open_vSwitch `other_config:vlan-limit` of the recording (`other_config.txt`), OVS's
/// default 1 without one: how many VLAN headers a datapath flow's key holds. It is one setting
/// for the process, as in OVS; this test binary has only this test.
fn set_vlan_limit(dir: &Path) {
    let conf = std::fs::read_to_string(dir.join("other_config.txt")).unwrap_or_default();
    let limit = conf
        .lines()
        .find_map(|l| l.strip_prefix("vlan-limit="))
        .map_or(1, |v| v.trim().parse().unwrap());
    flow::vlan_limit::set_vlan_limit(limit);
}

fn setup(dir: &Path) -> Ofproto {
    set_vlan_limit(dir);
    let of = Ofproto::default();
    let ports = std::fs::read_to_string(dir.join("ports.txt")).unwrap();
    for line in ports.lines().filter(|l| !l.trim().is_empty()) {
        let mut w = line.split_whitespace();
        let name = w.next().unwrap().to_owned();
        let ofport: u32 = w.next().unwrap().parse().unwrap();
        let (mut bridge, mut dp, mut peer) = ("br0".to_owned(), None, None);
        let mut vlan = VlanMode::default();
        for kv in w {
            let (k, v) = kv.split_once('=').unwrap();
            match k {
                "bridge" => bridge = v.to_owned(),
                "dp" => dp = Some(v.parse().unwrap()),
                "patch-peer" => peer = Some(v.to_owned()),
                "tag" => vlan.tag = Some(v.parse().unwrap()),
                "trunks" => vlan.trunks = v.split(',').map(|t| t.parse().unwrap()).collect(),
                "vlan_mode" => vlan.mode = Some(PortVlanMode::parse(v).unwrap()),
                "cvlans" => vlan.cvlans = v.split(',').map(|t| t.parse().unwrap()).collect(),
                "other_config:qinq-ethtype" if v == "802.1q" => vlan.qinq_tpid = 0x8100,
                _ => {}
            }
        }
        if of.pipe.read().unwrap().bridge(&bridge).is_none() {
            of.add_bridge(&bridge).unwrap();
        }
        of.add_port(
            &bridge,
            OfPort {
                name,
                ofport,
                dp_port: dp,
                peer,
                vlan,
            },
        )
        .unwrap();
    }
    let bridges: Vec<String> = of
        .pipe
        .read()
        .unwrap()
        .bridges
        .iter()
        .map(|b| b.name.clone())
        .collect();
    for b in bridges {
        let f = dir.join(format!("flows.{b}.txt"));
        let f = if f.exists() { f } else { dir.join("flows.txt") };
        if let Ok(text) = std::fs::read_to_string(&f) {
            of.add_flows(&b, &text)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        }
    }
    of
}

#[test]
fn traces_match_open_vswitch() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(data())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let (mut same, mut total, mut report) = (0, 0, String::new());
    let mut regressions = Vec::new();
    let mut identical = Vec::new();
    for dir in dirs {
        let pipeline = dir.file_name().unwrap().to_string_lossy().into_owned();
        let of = setup(&dir);
        let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "cmd"))
            .collect();
        cases.sort();
        for cmd in cases {
            let case = format!("{pipeline}/{}", cmd.file_stem().unwrap().to_string_lossy());
            let args = std::fs::read_to_string(&cmd).unwrap();
            let mut a: Vec<String> = args.split_whitespace().map(str::to_owned).collect();
            // OVS's dummy datapath is flowpath's netdev one.
            if a[0] == "ovs-dummy" {
                a[0] = "netdev".into();
            }
            let generate = a.iter().any(|x| x == "-generate");
            a.retain(|x| x != "-generate");
            let mut want = std::fs::read_to_string(cmd.with_extension("out")).unwrap();
            if pipeline == "responders" {
                want = want.replace(OVS_SLOW_PATH, "");
            }
            let got = of
                .trace(&a[0], &a[1..], generate)
                .unwrap_or_else(|e| format!("error: {e}\n"));
            total += 1;
            if got == want {
                same += 1;
                identical.push(case);
                continue;
            }
            if CONFORMANT.contains(&case.as_str()) {
                regressions.push(case.clone());
            }
            let diff = want
                .lines()
                .zip(got.lines().chain(std::iter::repeat("<missing>")))
                .find(|(w, g)| w != g)
                .map(|(w, g)| format!("    ovs:      {w}\n    flowpath: {g}"))
                .unwrap_or_else(|| "    (extra lines)".into());
            report.push_str(&format!("  {case}\n{diff}\n"));
        }
    }
    eprintln!("ofproto/trace: {same} of {total} traces identical to OVS 3.1: {identical:?}");
    eprint!("{report}");
    assert!(
        regressions.is_empty(),
        "no longer identical: {regressions:?}"
    );
}
