//! 802.1ad QinQ through real links, configured through the database as an operator does: two
//! hosts in customer VLAN 10 talk across a provider trunk that carries their frames with a
//! service tag of VLAN 100 over the customer tag.
//!
//! Two switches, each with two bridges joined by a veth pair (every hop is a real link, so
//! each frame is parsed anew). Near side, flowpath: `ca` (host A's access port in VLAN 10,
//! trunk `c1`) - `pa` (`p1`, a dot1q-tunnel port in VLAN 100; trunk `t1`). Far side, flowpath
//! again or Debian's `ovs-vswitchd` 3.1: `pb` (trunk `t2`; tunnel `p2`) - `cb` (trunk `c2`;
//! host B's access port in VLAN 10). Between `t1` and `t2` the frames are double-tagged; the
//! near side's datapath flows say so (`push_vlan(tpid=0x88a8,vid=100,...)`). `cvlans` on the
//! tunnel ports decides which customer VLANs cross: 20 alone stops the hosts' VLAN 10, 10 lets
//! it through again (with `vlan-limit` 0, so that the inner tag counts on the way out of the
//! tunnel as well). The hosts need no VLAN devices, which not every kernel has. Needs root,
//! network namespaces and OVS's `ovsdb-server`/`ovs-vsctl` (and `ovs-vswitchd` for the OVS
//! peer); else SKIP.

mod common;

use std::time::Duration;

use common::netns::{
    Env, Names, check_no_ping, in_ns, must, no_ping, ping, slot, veth, wait_until,
};
use common::ovsdb::{Sandbox, Switch, missing};

static NAMES: Names = Names {
    netns: "qinq",
    dir: "fp-qinq",
    root_for: "network namespaces and veth pairs",
    ifname_max: 15,
};

/// One side's switch: its bridges `BR_CUST` (host port in VLAN 10, trunk `cust`) and `BR_PROV`
/// (tunnel `tun` in VLAN 100, trunk `trunk` of VLAN 100).
fn side(sb: &Sandbox, names: [&str; 2], host: &str, [cust, tun, trunk]: [&str; 3]) {
    let v = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        let (rc, _, err) = sb.vsctl(&args, 10);
        assert_eq!(rc, 0, "ovs-vsctl {args:?}: {err}");
    };
    let [bc, bp] = names;
    for br in names {
        v(&[
            "add-br",
            br,
            "--",
            "set",
            "bridge",
            br,
            "datapath_type=netdev",
        ]);
    }
    v(&["add-port", bc, host, "tag=10"]);
    v(&["add-port", bc, cust]);
    v(&["add-port", bp, tun, "tag=100", "vlan_mode=dot1q-tunnel"]);
    v(&["add-port", bp, trunk, "trunks=100"]);
}

fn customer_vlan_crosses_a_double_tagged_trunk(test: &str, short: &str, far: Switch) {
    for s in [Switch::Flowpath, far] {
        if let Some(why) = missing(s) {
            eprintln!("SKIP {test}: {why}");
            return;
        }
    }
    let Some(mut env) = Env::new(test, short, &["ping"], &NAMES) else {
        return;
    };
    let _slot = slot();
    let (s1, s2) = (env.netns("s1"), env.netns("s2"));
    let (ha, hb) = (env.netns("ha"), env.netns("hb"));
    let i = |s: &str| env.ifname(s);
    let (a, sa, b, sb) = (i("a"), i("sa"), i("b"), i("sb"));
    veth(&a, &ha, &sa, &s1);
    veth(&b, &hb, &sb, &s2);
    veth(&i("c1"), &s1, &i("p1"), &s1);
    veth(&i("t1"), &s1, &i("t2"), &s2);
    veth(&i("p2"), &s2, &i("c2"), &s2);
    must(&in_ns(
        &ha,
        &["ip", "addr", "add", "10.89.0.1/24", "dev", &a],
    ));
    must(&in_ns(
        &hb,
        &["ip", "addr", "add", "10.89.0.2/24", "dev", &b],
    ));

    let mut near = Sandbox::new(&format!("fp-qinq-{short}1"), Switch::Flowpath);
    near.start_switch_in(Some(&s1));
    let mut farsb = Sandbox::new(&format!("fp-qinq-{short}2"), far);
    farsb.start_switch_in(Some(&s2));
    side(&near, ["ca", "pa"], &sa, [&i("c1"), &i("p1"), &i("t1")]);
    side(&farsb, ["cb", "pb"], &sb, [&i("c2"), &i("p2"), &i("t2")]);

    // vlan-limit as OVS has it by default (1): the trunk's inner tag is payload to the far
    // provider bridge, which strips the outer one; its customer bridge parses the tag anew.
    let up = wait_until(Duration::from_secs(15), || {
        ping(&ha, "10.89.0.2", 1).is_ok()
    });
    assert!(up, "A to B over the QinQ trunk");
    ping(&ha, "10.89.0.2", 3).unwrap_or_else(|e| panic!("A to B over the QinQ trunk: {e}"));
    ping(&hb, "10.89.0.1", 3).unwrap_or_else(|e| panic!("B to A over the QinQ trunk: {e}"));
    let flows = near.appctl_strs(&["dpctl/dump-flows"]);
    assert!(
        flows.contains("push_vlan(tpid=0x88a8,vid=100,pcp=0)"),
        "no service tag pushed: {flows}"
    );

    // Customer VLAN 10 is not among the tunnels' cvlans: nothing crosses.
    let set = |cols: &[&str]| {
        for (sb, p) in [(&near, "p1"), (&farsb, "p2")] {
            let mut args = vec!["set".to_owned(), "port".to_owned(), i(p)];
            args.extend(cols.iter().map(|c| (*c).to_owned()));
            let (rc, _, err) = sb.vsctl(&args, 10);
            assert_eq!(rc, 0, "ovs-vsctl {args:?}: {err}");
            let limit = ["set", "open_vswitch", ".", "other_config:vlan-limit=0"];
            let limit: Vec<String> = limit.iter().map(|s| (*s).to_owned()).collect();
            assert_eq!(sb.vsctl(&limit, 10).0, 0);
            sb.appctl_strs(&["revalidator/wait"]);
        }
    };
    set(&["cvlans=20"]);
    check_no_ping(
        no_ping(&ha, "10.89.0.2", 3),
        "A to B, VLAN 10 not in cvlans",
    );

    set(&["cvlans=10,20"]);
    let crossed = wait_until(Duration::from_secs(10), || {
        ping(&ha, "10.89.0.2", 1).is_ok()
    });
    assert!(crossed, "A to B with VLAN 10 in cvlans and vlan-limit 0");
    ping(&hb, "10.89.0.1", 3).unwrap_or_else(|e| panic!("B to A: {e}"));
}

#[test]
fn customer_vlan_crosses_a_double_tagged_trunk_between_flowpaths() {
    customer_vlan_crosses_a_double_tagged_trunk(
        "customer_vlan_crosses_a_double_tagged_trunk_between_flowpaths",
        "qf",
        Switch::Flowpath,
    );
}

#[test]
fn customer_vlan_crosses_a_double_tagged_trunk_to_ovs() {
    customer_vlan_crosses_a_double_tagged_trunk(
        "customer_vlan_crosses_a_double_tagged_trunk_to_ovs",
        "qo",
        Switch::Ovs,
    );
}
