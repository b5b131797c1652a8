//! Connection limits against OVS 3.1's own `ovs-vswitchd` (Debian's, userspace datapath with
//! dummy ports): the same `ovs-vsctl`, `ovs-ofctl` and `ovs-appctl` script on both switches,
//! driven from a private `ovsdb-server`, must print the same. The script gives zones limits of
//! their own (one of them 0, which refuses every commit), commits UDP connections into them by
//! packet-outs through `ct(commit,zone=N)`, and reads `dpctl/ct-get-limits` and
//! `dpctl/dump-conntrack`. Where OVS 3.1 differs from its later releases (a zone without a
//! limit of its own under the default, `default=0`), the script does not go: those are
//! described in `docs/architecture.md`.
//!
//! Needs root (the sandbox's `ovs-vswitchd`), Debian's `openvswitch-switch` and
//! `openvswitch-common`; without them the test says why it is skipped.

mod common;

use std::process::Command;

use common::ovsdb::{Sandbox, Switch, missing, shell_words};

/// A UDP frame from 10.1.1.1:`sport` to 10.1.1.2:`dport`, as hex (its IP checksum right, its
/// UDP checksum 0).
fn udp_hex(sport: u16, dport: u16) -> String {
    format!(
        "50540000000a50540000000908004500001c000000000011a4cd0a0101010a010102{sport:04x}{dport:04x}00080000"
    )
}

/// The flows: UDP to port 2, 3 and 4 committed in zones 5, 6 and 7.
const FLOWS: &[&str] = &[
    "priority=1,actions=drop",
    "priority=100,in_port=1,udp,tp_dst=2,actions=ct(commit,zone=5),2",
    "priority=100,in_port=1,udp,tp_dst=3,actions=ct(commit,zone=6),2",
    "priority=100,in_port=1,udp,tp_dst=4,actions=ct(commit,zone=7),2",
];

/// Runs the script on `switch`: what each reading step printed, in order.
fn script(switch: Switch) -> Vec<String> {
    let mut sb = Sandbox::new("fp-ct-limits", switch);
    sb.start_switch();
    for a in [
        "add-br br0 -- set bridge br0 datapath_type=netdev fail-mode=secure",
        "add-port br0 p1 -- set interface p1 type=dummy ofport_request=1",
        "add-port br0 p2 -- set interface p2 type=dummy ofport_request=2",
    ] {
        let (rc, _, err) = sb.vsctl(&shell_words(a), 10);
        assert_eq!(rc, 0, "{switch:?}: ovs-vsctl {a}: {err}");
    }
    let mgmt = format!("unix:{}", sb.dir.join("br0.mgmt").display());
    let ofctl = |args: &[&str]| {
        let o = Command::new("ovs-ofctl").args(args).output().unwrap();
        assert!(o.status.success(), "{switch:?}: ovs-ofctl {args:?}: {o:?}");
    };
    for f in FLOWS {
        ofctl(&["add-flow", &mgmt, f]);
    }
    let commit = |sport: u16, dport: u16| {
        let out = format!(
            "in_port=1 packet={} actions=resubmit(,0)",
            udp_hex(sport, dport)
        );
        ofctl(&["-O", "OpenFlow13", "packet-out", &mgmt, &out]);
    };
    let appctl = |args: &str| {
        let (rc, out, err) = sb.appctl(&shell_words(args));
        format!("$ {args}\n{out}{err}(exit {rc})\n")
    };
    let dump = || {
        let mut lines: Vec<String> = appctl("dpctl/dump-conntrack")
            .lines()
            .map(str::to_owned)
            .collect();
        lines.sort();
        lines.join("\n")
    };
    let mut seen = vec![
        appctl("dpctl/ct-set-limits default=10 zone=5,limit=0 zone=6,limit=2 zone=7,limit=5"),
        appctl("dpctl/ct-get-limits"),
        appctl("dpctl/ct-get-limits zone=5,6,7,8"),
    ];
    for sport in 10..13 {
        for dport in [2, 3, 4] {
            commit(sport, dport);
        }
    }
    seen.push(appctl("dpctl/ct-get-limits zone=5,6,7"));
    seen.push(dump());
    // Zone 5's limit taken away: the default's 10 applies, and its commits pass.
    seen.push(appctl("dpctl/ct-del-limits zone=5"));
    seen.push(appctl("dpctl/ct-get-limits"));
    commit(20, 2);
    seen.push(dump());
    // A limit of 0 given to a zone that holds connections keeps them and refuses new ones.
    seen.push(appctl("dpctl/ct-set-limits zone=6,limit=0"));
    commit(21, 3);
    seen.push(appctl("dpctl/ct-get-limits zone=6"));
    seen.push(dump());
    seen
}

#[test]
fn zone_limits_as_ovs_vswitchd_keeps_them() {
    for s in [Switch::Ovs, Switch::Flowpath] {
        if let Some(why) = missing(s) {
            eprintln!("skipped: {why}");
            return;
        }
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: ovs-vswitchd's sandbox needs root");
        return;
    }
    let ovs = script(Switch::Ovs);
    let flowpath = script(Switch::Flowpath);
    // The script does what it is for on OVS's side: zone 5 refused, zone 6 full at 2.
    assert!(ovs[3].contains("zone=5,limit=0,count=0"), "{}", ovs[3]);
    assert!(ovs[3].contains("zone=6,limit=2,count=2"), "{}", ovs[3]);
    for (i, (o, f)) in ovs.iter().zip(&flowpath).enumerate() {
        assert_eq!(
            f, o,
            "step {i}: flowpath (left) and ovs-vswitchd (right) differ"
        );
    }
    assert_eq!(ovs.len(), flowpath.len());
}
