//! 802.1ad QinQ through real links, configured through the database as an operator does: two
//! hosts in customer VLAN 10 talk across a provider trunk that carries their frames with a
//! service tag of VLAN 100 over the customer tag.
//!
//! One switch with four bridges joined by veth pairs (every hop is a real link, so each
//! frame is parsed anew): `ca` (host A's access port in VLAN 10, trunk `c1`) - `pa` (`p1`, a
//! dot1q-tunnel port in VLAN 100; trunk `t1`) - `pb` (trunk `t2`; tunnel `p2`) - `cb` (trunk
//! `c2`; host B's access port in VLAN 10). Between `t1` and `t2` the frames are
//! double-tagged; the datapath's flows say so (`push_vlan(tpid=0x88a8,vid=100,...)`).
//! `cvlans` on the tunnel ports decides which customer VLANs cross: 20 alone stops the hosts'
//! VLAN 10, 10 lets it through again (with `vlan-limit` 0, so that the inner tag counts on the
//! way out of the tunnel as well). The hosts need no VLAN devices, which not every kernel has.
//! Needs root, network namespaces and OVS's `ovsdb-server`/`ovs-vsctl`; else SKIP.

mod common;

use std::time::Duration;

use common::netns::{Env, Names, check_no_ping, in_ns, must, no_ping, ping, veth, wait_until};
use common::ovsdb::{Sandbox, Switch, missing};

static NAMES: Names = Names {
    netns: "qinq",
    dir: "fp-qinq",
    root_for: "network namespaces and veth pairs",
    ifname_max: 15,
};

#[test]
fn customer_vlan_crosses_a_double_tagged_trunk() {
    let test = "customer_vlan_crosses_a_double_tagged_trunk";
    if let Some(why) = missing(Switch::Flowpath) {
        eprintln!("SKIP {test}: {why}");
        return;
    }
    let Some(mut env) = Env::new(test, "qq", &["ping"], &NAMES) else {
        return;
    };
    let sw = env.netns("sw");
    let ha = env.netns("ha");
    let hb = env.netns("hb");
    let i = |s: &str| env.ifname(s);
    let (a, sa, b, sb) = (i("a"), i("sa"), i("b"), i("sb"));
    veth(&a, &ha, &sa, &sw);
    veth(&b, &hb, &sb, &sw);
    let links = [("c1", "p1"), ("t1", "t2"), ("p2", "c2")];
    for (x, y) in links {
        veth(&i(x), &sw, &i(y), &sw);
    }
    must(&in_ns(
        &ha,
        &["ip", "addr", "add", "10.89.0.1/24", "dev", &a],
    ));
    must(&in_ns(
        &hb,
        &["ip", "addr", "add", "10.89.0.2/24", "dev", &b],
    ));

    let mut sb_ = Sandbox::new(&format!("fp-qinq-{}", env.tag), Switch::Flowpath);
    sb_.start_switch_in(Some(&sw));
    let vsctl = |args: &[&str]| sb_.vsctl_strs(args);
    for br in ["ca", "pa", "pb", "cb"] {
        vsctl(&[
            "add-br",
            br,
            "--",
            "set",
            "bridge",
            br,
            "datapath_type=netdev",
        ]);
    }
    let tunnel = ["tag=100", "vlan_mode=dot1q-tunnel"];
    let ports: [(&str, String, &[&str]); 8] = [
        ("ca", sa.clone(), &["tag=10"]),
        ("ca", i("c1"), &[]),
        ("pa", i("p1"), &tunnel),
        ("pa", i("t1"), &["trunks=100"]),
        ("pb", i("t2"), &["trunks=100"]),
        ("pb", i("p2"), &tunnel),
        ("cb", i("c2"), &[]),
        ("cb", sb.clone(), &["tag=10"]),
    ];
    for (br, port, cols) in &ports {
        let mut args = vec!["add-port", br, port.as_str()];
        args.extend_from_slice(cols);
        vsctl(&args);
    }

    // OVS's default vlan-limit (1): the trunk's inner tag is payload to `pb`, which strips the
    // outer one towards `cb`; `cb` parses the customer tag anew.
    let up = wait_until(Duration::from_secs(15), || {
        ping(&ha, "10.89.0.2", 1).is_ok()
    });
    assert!(up, "A to B over the QinQ trunk");
    ping(&ha, "10.89.0.2", 3).unwrap_or_else(|e| panic!("A to B over the QinQ trunk: {e}"));
    let flows = sb_.appctl_strs(&["dpctl/dump-flows"]);
    assert!(
        flows.contains("push_vlan(tpid=0x88a8,vid=100,pcp=0)"),
        "no service tag pushed: {flows}"
    );

    // Customer VLAN 10 is not among the tunnels' cvlans: nothing crosses.
    vsctl(&["set", "open_vswitch", ".", "other_config:vlan-limit=0"]);
    for p in ["p1", "p2"] {
        vsctl(&["set", "port", &i(p), "cvlans=20"]);
    }
    sb_.appctl_strs(&["revalidator/wait"]);
    check_no_ping(
        no_ping(&ha, "10.89.0.2", 3),
        "A to B, VLAN 10 not in cvlans",
    );

    for p in ["p1", "p2"] {
        vsctl(&["set", "port", &i(p), "cvlans=10,20"]);
    }
    sb_.appctl_strs(&["revalidator/wait"]);
    let crossed = wait_until(Duration::from_secs(10), || {
        ping(&ha, "10.89.0.2", 1).is_ok()
    });
    assert!(crossed, "A to B with VLAN 10 in cvlans and vlan-limit 0");
    ping(&hb, "10.89.0.1", 3).unwrap_or_else(|e| panic!("B to A: {e}"));
}
