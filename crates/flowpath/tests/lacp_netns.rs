//! LACP with real peers over veth pairs: the switch's bond `bond0` (members `a1`, `a2`,
//! `lacp=active`, `bond_mode=balance-tcp`, `lacp-time=fast`) goes to a peer namespace whose
//! end of the links (`b1`, `b2`) is an 802.3ad bond with an address; a host behind an ordinary
//! port of the switch talks to it. The switch's bond is also tried passive (the peer active).
//!
//! The peer is Debian's `ovs-vswitchd` 3.1 (netdev datapath, its bond `lacp=active`
//! balance-tcp, its internal port with the address) or the Linux kernel's bonding driver
//! (`mode 802.3ad lacp_rate fast`; SKIP when the kernel has none). LACP negotiates on both
//! members (`lacp/show`: current, attached; the peer sees the switch's system id), malformed
//! LACPDUs are counted and ignored, ping works, UDP and TCP flows spread over both members,
//! and a member's link going down moves all traffic to the other. The same with the switch's
//! bond `other_config:lb-output-action=true`: its output is the datapath's `lb_output`, no
//! recirculation. Either way a heavy flow's bytes show as its bucket's load in `bond/show`.
//!
//! LACP on a Port of one Interface (no bond) runs against an `ovs-vswitchd` port with LACP or
//! without (below). Needs root, network namespaces and OVS's tools; else SKIP.

mod common;

use std::time::Duration;

use common::netns::{Env, Names, in_ns, must, ping, run, veth, wait_until};
use common::ovsdb::{Sandbox, Switch, missing, words};

static NAMES: Names = Names {
    netns: "lacp",
    dir: "fp-lacp",
    root_for: "network namespaces and veth pairs",
    ifname_max: 15,
};

const PEER_IP: &str = "10.89.0.2";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Peer {
    Ovs,
    Kernel,
}

struct World {
    _env: Env,
    sb: Sandbox,
    /// The peer's `ovs-vswitchd`, when it is the peer.
    peer_sb: Option<Sandbox>,
    sw: String,
    host: String,
    peer: String,
    a: [String; 2],
    b: [String; 2],
    /// The switch's bond's `lacp=...`.
    lacp: String,
    /// The status `lacp/show` gives the switch's bond once negotiated.
    negotiated: &'static str,
}

impl World {
    fn new(test: &str, short: &str, peer_kind: Peer, passive: bool, lb: bool) -> Option<World> {
        for s in [Switch::Flowpath, Switch::Ovs] {
            if let Some(why) = missing(s) {
                eprintln!("SKIP {test}: {why}");
                return None;
            }
        }
        let mut env = Env::new(test, short, &["ping", "python3"], &NAMES)?;
        let peer = env.netns("pr");
        if peer_kind == Peer::Kernel
            && run(&in_ns(
                &peer,
                &[
                    "ip", "link", "add", "bondx", "type", "bond", "mode", "802.3ad",
                ],
            ))
            .is_err()
        {
            eprintln!("SKIP {test}: the kernel has no bonding driver (802.3ad)");
            return None;
        }
        let sw = env.netns("sw");
        let host = env.netns("h");
        let (p3, h) = (env.ifname("p3"), env.ifname("h"));
        veth(&p3, &sw, &h, &host);
        must(&in_ns(
            &host,
            &["ip", "addr", "add", "10.89.0.1/24", "dev", &h],
        ));
        let a = [env.ifname("a1"), env.ifname("a2")];
        let b = [env.ifname("b1"), env.ifname("b2")];
        for (x, y) in a.iter().zip(&b) {
            veth(x, &sw, y, &peer);
        }
        let peer_sb = match peer_kind {
            Peer::Kernel => {
                must(&in_ns(&peer, &["ip", "link", "del", "bondx"]));
                must(&in_ns(
                    &peer,
                    &[
                        "ip",
                        "link",
                        "add",
                        "bondx",
                        "type",
                        "bond",
                        "mode",
                        "802.3ad",
                        "lacp_rate",
                        "fast",
                        "miimon",
                        "100",
                    ],
                ));
                for y in &b {
                    must(&in_ns(&peer, &["ip", "link", "set", y, "down"]));
                    must(&in_ns(&peer, &["ip", "link", "set", y, "master", "bondx"]));
                }
                must(&in_ns(
                    &peer,
                    &["ip", "addr", "add", "10.89.0.2/24", "dev", "bondx"],
                ));
                must(&in_ns(&peer, &["ip", "link", "set", "bondx", "up"]));
                None
            }
            Peer::Ovs => {
                let mut psb = Sandbox::new(&format!("fp-lacp-{short}p"), Switch::Ovs);
                psb.start_switch_in(Some(&peer));
                let v = |args: &[&str]| {
                    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
                    let (rc, _, err) = psb.vsctl(&args, 10);
                    assert_eq!(rc, 0, "peer ovs-vsctl {args:?}: {err}");
                };
                v(&[
                    "add-br",
                    "brp",
                    "--",
                    "set",
                    "bridge",
                    "brp",
                    "datapath_type=netdev",
                ]);
                v(&[
                    "add-bond",
                    "brp",
                    "bondp",
                    &b[0],
                    &b[1],
                    "lacp=active",
                    "bond_mode=balance-tcp",
                    "other_config:lacp-time=fast",
                ]);
                must(&in_ns(
                    &peer,
                    &["ip", "addr", "add", "10.89.0.2/24", "dev", "brp"],
                ));
                must(&in_ns(&peer, &["ip", "link", "set", "brp", "up"]));
                Some(psb)
            }
        };
        let mut sb = Sandbox::new(&format!("fp-lacp-{short}"), Switch::Flowpath);
        sb.start_switch_in(Some(&sw));
        let w = World {
            _env: env,
            sb,
            peer_sb,
            sw,
            host,
            peer,
            a,
            b,
            lacp: format!("lacp={}", if passive { "passive" } else { "active" }),
            negotiated: if passive {
                "status: passive negotiated"
            } else {
                "status: active negotiated"
            },
        };
        w.vsctl(common::ovsdb::ADD_BR0);
        w.vsctl(&["add-port", "br0", &p3]);
        w.vsctl(&[
            "add-bond",
            "br0",
            "bond0",
            &w.a[0],
            &w.a[1],
            &w.lacp,
            "bond_mode=balance-tcp",
            "other_config:lacp-time=fast",
            &format!("other_config:lb-output-action={lb}"),
            "other_config:bond-rebalance-interval=1000",
        ]);
        Some(w)
    }

    fn vsctl(&self, args: &[&str]) -> String {
        self.sb.vsctl_strs(args)
    }

    fn appctl(&self, args: &[&str]) -> String {
        self.sb.appctl_strs(args)
    }

    fn peer_appctl(&self, args: &[&str]) -> String {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        self.peer_sb
            .as_ref()
            .map(|p| p.appctl(&args).1)
            .unwrap_or_default()
    }

    /// Packets the switch sent on its member `i`, as its veth counts them.
    fn tx_packets(&self, i: usize) -> u64 {
        let p = format!("/sys/class/net/{}/statistics/tx_packets", self.a[i]);
        must(&in_ns(&self.sw, &["cat", &p])).trim().parse().unwrap()
    }

    /// The switch's LACP system id, as `lacp/show` says.
    fn sys_id(&self) -> String {
        let s = self.appctl(&["lacp/show", "bond0"]);
        s.lines()
            .find_map(|l| l.strip_prefix("  sys_id: "))
            .unwrap_or_default()
            .to_owned()
    }

    /// Waits until LACP has negotiated with both members current and usable.
    fn wait_negotiated(&self, members: &[usize]) {
        let ok = wait_until(Duration::from_secs(20), || {
            let s = self.appctl(&["lacp/show", "bond0"]);
            let b = self.appctl(&["bond/show", "bond0"]);
            s.contains(self.negotiated)
                && members.iter().all(|&i| {
                    s.contains(&format!("member: {}: current attached\n", self.a[i]))
                        && b.contains(&format!("member {}: enabled", self.a[i]))
                })
        });
        assert!(
            ok,
            "{}\n{}\n{}",
            self.appctl(&["lacp/show", "bond0"]),
            self.appctl(&["bond/show", "bond0"]),
            self.peer_appctl(&["lacp/show"])
        );
    }

    /// Three malformed LACPDUs from the peer's end of the first link: one short, one with an
    /// actor TLV of the wrong length, one of an unknown subtype.
    fn send_bad_pdus(&self) {
        let script = format!(
            "import socket\n\
             s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n\
             s.bind(('{}', 0))\n\
             hdr = bytes.fromhex('0180c2000002020000000001') + b'\\x88\\x09'\n\
             good = bytes([1, 1, 1, 20]) + bytes(106)\n\
             s.send(hdr + good[:40])\n\
             s.send(hdr + bytes([1, 1, 1, 19]) + bytes(106))\n\
             s.send(hdr + bytes([7]) + good[1:])\n",
            self.b[0]
        );
        must(&in_ns(&self.peer, &["python3", "-c", &script]));
    }

    /// 300 UDP datagrams of 1400 bytes from the host to the peer, all of one flow.
    fn heavy_flow(&self) {
        let script = format!(
            "import socket\n\
             u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             u.bind(('10.89.0.1', 40000))\n\
             for _ in range(300):\n\
             \x20   u.sendto(b'x' * 1400, ('{PEER_IP}', 9))\n"
        );
        must(&in_ns(&self.host, &["python3", "-c", &script]));
    }

    /// `n` UDP flows and `n` TCP connection attempts from the host to the peer, each from
    /// its own source port.
    fn flows(&self, n: u32) {
        let script = format!(
            "import socket\n\
             for i in range({n}):\n\
             \x20   u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             \x20   u.bind(('10.89.0.1', 20000 + i))\n\
             \x20   for _ in range(3):\n\
             \x20       u.sendto(b'x' * 64, ('{PEER_IP}', 9))\n\
             \x20   u.close()\n\
             \x20   t = socket.socket()\n\
             \x20   t.settimeout(0.2)\n\
             \x20   t.bind(('10.89.0.1', 30000 + i))\n\
             \x20   try:\n\
             \x20       t.connect(('{PEER_IP}', 9))\n\
             \x20   except OSError:\n\
             \x20       pass\n\
             \x20   t.close()\n"
        );
        must(&in_ns(&self.host, &["python3", "-c", &script]));
    }
}

fn negotiates_spreads_and_fails_over(test: &str, short: &str, peer: Peer, passive: bool, lb: bool) {
    let Some(w) = World::new(test, short, peer, passive, lb) else {
        return;
    };
    w.wait_negotiated(&[0, 1]);
    let show = w.appctl(&["bond/show", "bond0"]);
    assert!(show.contains("lacp_status: negotiated"), "{show}");
    let lb_line = if lb {
        "enabled, bond-id: "
    } else {
        "disabled, bond-id: -1"
    };
    assert!(
        show.contains(&format!("lb_output action: {lb_line}")),
        "{show}"
    );
    // The peer has the switch as its partner.
    let id = w.sys_id();
    match peer {
        Peer::Ovs => {
            let ok = wait_until(Duration::from_secs(10), || {
                let p = w.peer_appctl(&["lacp/show", "bondp"]);
                p.contains("status: active negotiated")
                    && p.matches(&format!("partner sys_id: {id}")).count() == 2
            });
            assert!(ok, "{}", w.peer_appctl(&["lacp/show", "bondp"]));
        }
        Peer::Kernel => {
            let p = must(&in_ns(&w.peer, &["cat", "/proc/net/bonding/bondx"]));
            assert!(p.contains(&format!("system mac address: {id}")), "{p}");
        }
    }
    let stats = w.appctl(&["lacp/show-stats", "bond0"]);
    assert!(stats.contains("  RX Bad PDUs: 0\n"), "{stats}");
    // Malformed LACPDUs on the first member: counted, ignored, negotiation goes on.
    w.send_bad_pdus();
    let counted = wait_until(Duration::from_secs(5), || {
        w.appctl(&["lacp/show-stats", "bond0"])
            .contains("  RX Bad PDUs: 3\n")
    });
    assert!(counted, "{}", w.appctl(&["lacp/show-stats", "bond0"]));
    w.wait_negotiated(&[0, 1]);
    // Written with the interface's status, which the switch refreshes on its own timer.
    let current = wait_until(Duration::from_secs(5), || {
        w.vsctl(&["get", "interface", &w.a[0], "lacp_current"])
            .trim()
            == "true"
    });
    assert!(current, "lacp_current of {} is not true", w.a[0]);
    // The members came up one after the other, so the buckets may all be on the first (as
    // in OVS, a member enabled later gets buckets only by rebalancing); a new hash basis
    // spreads them over both afresh, as OVS's bond_reconfigure() does.
    w.vsctl(&["set", "port", "bond0", "other_config:bond-hash-basis=1"]);
    w.wait_negotiated(&[0, 1]);
    w.appctl(&["revalidator/wait"]);
    ping(&w.host, PEER_IP, 3).unwrap();

    // Many flows: each member carries some of them.
    let before = [w.tx_packets(0), w.tx_packets(1)];
    w.flows(32);
    let sent = [w.tx_packets(0) - before[0], w.tx_packets(1) - before[1]];
    assert!(
        sent[0] >= 20 && sent[1] >= 20,
        "flows not spread over both members: {sent:?}\n{}",
        w.appctl(&["bond/show", "bond0"])
    );
    // With lb_output, the bond's output is one datapath action, no second pass.
    let flows = w.appctl(&["dpctl/dump-flows"]);
    assert_eq!(flows.contains("lb_output("), lb, "{flows}");
    assert_eq!(flows.contains("recirc("), !lb, "{flows}");
    // The bytes sent through each bucket (the datapath's `lb_output` counters, or the
    // recirculated passes' megaflows) reach the bond's rebalancing (every second here):
    // `bond/show` prints the loaded bucket under its member.
    w.heavy_flow();
    let loaded = wait_until(Duration::from_secs(5), || {
        w.appctl(&["bond/show", "bond0"]).contains(" kB load\n")
    });
    assert!(loaded, "{}", w.appctl(&["bond/show", "bond0"]));

    // A member's link goes down: everything moves to the other.
    must(&in_ns(&w.peer, &["ip", "link", "set", &w.b[0], "down"]));
    let gone = wait_until(Duration::from_secs(10), || {
        w.appctl(&["bond/show", "bond0"])
            .contains(&format!("member {}: disabled", w.a[0]))
    });
    assert!(gone, "{}", w.appctl(&["bond/show", "bond0"]));
    w.appctl(&["revalidator/wait"]);
    let before = w.tx_packets(1);
    w.flows(32);
    assert!(
        w.tx_packets(1) - before >= 32 * 4,
        "not all flows moved to {}",
        w.a[1]
    );
    ping(&w.host, PEER_IP, 3).unwrap();

    // Back up: LACP negotiates on it again.
    must(&in_ns(&w.peer, &["ip", "link", "set", &w.b[0], "up"]));
    w.wait_negotiated(&[0, 1]);
}

#[test]
fn lacp_with_ovs_as_the_peer_negotiates_spreads_flows_and_fails_over() {
    negotiates_spreads_and_fails_over(
        "lacp_with_ovs_as_the_peer_negotiates_spreads_flows_and_fails_over",
        "ov",
        Peer::Ovs,
        false,
        false,
    );
}

#[test]
fn lacp_with_the_kernel_bond_as_the_peer_negotiates_spreads_flows_and_fails_over() {
    negotiates_spreads_and_fails_over(
        "lacp_with_the_kernel_bond_as_the_peer_negotiates_spreads_flows_and_fails_over",
        "kn",
        Peer::Kernel,
        false,
        false,
    );
}

#[test]
fn passive_lacp_with_ovs_active_as_the_peer_negotiates_spreads_flows_and_fails_over() {
    negotiates_spreads_and_fails_over(
        "passive_lacp_with_ovs_active_as_the_peer_negotiates_spreads_flows_and_fails_over",
        "pv",
        Peer::Ovs,
        true,
        false,
    );
}

#[test]
fn lb_output_with_ovs_as_the_peer_negotiates_spreads_flows_and_fails_over() {
    negotiates_spreads_and_fails_over(
        "lb_output_with_ovs_as_the_peer_negotiates_spreads_flows_and_fails_over",
        "lb",
        Peer::Ovs,
        false,
        true,
    );
}

/// How the peer's end of a single link runs: OVS's port with LACP (active, fast), or an
/// OVS port without LACP.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LinkPeer {
    Lacp,
    NoLacp,
}

/// A Port of one Interface with LACP (`lacp=active`, fast, optionally `lacp-fallback-ab`):
/// the switch's port `a1` to the peer's `ovs-vswitchd` port `b1` in another namespace, a host
/// behind another port of the switch. With LACP on the peer's port too, both negotiate
/// (current, attached, may_enable; the peer has the switch's system id as partner;
/// `lacp_current` true). Without, the switch's port defaults (`may_enable` false, or true
/// with `lacp-fallback-ab`); its OpenFlow port is live as `may_enable` says. Either way ping
/// passes: OVS's NORMAL forwards through a port of
/// one interface whatever its LACP says. `LACP_NETNS_SWITCH=ovs` runs the switch's side with
/// `ovs-vswitchd` instead, to check that the test describes OVS.
fn single_interface_port(test: &str, short: &str, peer: LinkPeer, fallback: bool) {
    let switch = match std::env::var("LACP_NETNS_SWITCH").as_deref() {
        Ok("ovs") => Switch::Ovs,
        _ => Switch::Flowpath,
    };
    for s in [switch, Switch::Ovs] {
        if let Some(why) = missing(s) {
            eprintln!("SKIP {test}: {why}");
            return;
        }
    }
    let Some(mut env) = Env::new(test, short, &["ping"], &NAMES) else {
        return;
    };
    let (sw, host, pr) = (env.netns("sw"), env.netns("h"), env.netns("pr"));
    let (p3, h) = (env.ifname("p3"), env.ifname("h"));
    let (a1, b1) = (env.ifname("a1"), env.ifname("b1"));
    veth(&p3, &sw, &h, &host);
    veth(&a1, &sw, &b1, &pr);
    must(&in_ns(
        &host,
        &["ip", "addr", "add", "10.89.0.1/24", "dev", &h],
    ));
    let mut psb = Sandbox::new(&format!("fp-lacp-{short}p"), Switch::Ovs);
    psb.start_switch_in(Some(&pr));
    let fast = "other_config:lacp-time=fast";
    let peer_port: Vec<&str> = match peer {
        LinkPeer::Lacp => vec!["add-port", "brp", &b1, "lacp=active", fast],
        LinkPeer::NoLacp => vec!["add-port", "brp", &b1],
    };
    for args in [
        &[
            "add-br",
            "brp",
            "--",
            "set",
            "bridge",
            "brp",
            "datapath_type=netdev",
        ][..],
        &peer_port,
    ] {
        psb.vsctl_strs(args);
    }
    must(&in_ns(
        &pr,
        &["ip", "addr", "add", "10.89.0.2/24", "dev", "brp"],
    ));
    must(&in_ns(&pr, &["ip", "link", "set", "brp", "up"]));

    let mut sb = Sandbox::new(&format!("fp-lacp-{short}"), switch);
    sb.start_switch_in(Some(&sw));
    sb.vsctl_strs(common::ovsdb::ADD_BR0);
    sb.vsctl_strs(&["add-port", "br0", &p3]);
    let fallback_ab = format!("other_config:lacp-fallback-ab={fallback}");
    sb.vsctl_strs(&["add-port", "br0", &a1, "lacp=active", fast, &fallback_ab]);

    let show = || sb.appctl_strs(&["lacp/show", &a1]);
    let (state, may_enable) = match peer {
        LinkPeer::Lacp => ("current attached", true),
        LinkPeer::NoLacp if fallback => ("defaulted attached", true),
        LinkPeer::NoLacp => ("defaulted detached", false),
    };
    let want = format!("member: {a1}: {state}\n");
    let may = format!("may_enable: {may_enable}\n");
    let ok = wait_until(Duration::from_secs(20), || {
        let s = show();
        s.contains(&want) && s.contains(&may)
    });
    assert!(ok, "{}", show());
    // A port of one link: LACP's lowest priority, no bond.
    assert!(show().contains("  sys_priority: 65535\n"), "{}", show());
    assert!(
        sb.appctl(&words(&["bond/show", &a1]))
            .2
            .contains("no such bond")
    );
    let current = if peer == LinkPeer::Lacp {
        "true"
    } else {
        "false"
    };
    let written = wait_until(Duration::from_secs(5), || {
        sb.vsctl_strs(&["get", "interface", &a1, "lacp_current"])
            .trim()
            == current
    });
    assert!(written, "lacp_current of {a1} is not {current}");
    if peer == LinkPeer::Lacp {
        let id = show()
            .lines()
            .find_map(|l| l.strip_prefix("  sys_id: "))
            .unwrap_or_default()
            .to_owned();
        let p = psb.appctl_strs(&["lacp/show", &b1]);
        assert!(p.contains(&format!("partner sys_id: {id}")), "{p}");
        assert!(p.contains("may_enable: true"), "{p}");
    }
    // Its OpenFlow port is live only while LACP lets it carry traffic (OVS's
    // `may_enable_port()`), as OpenFlow 1.4's port state says.
    let mgmt = format!("unix:{}", sb.dir.join("br0.mgmt").display());
    let desc = must(&["ovs-ofctl", "-O", "OpenFlow14", "show", &mgmt]);
    let port = desc
        .split(&format!("({a1}):"))
        .nth(1)
        .and_then(|d| d.lines().find(|l| l.trim_start().starts_with("state:")))
        .unwrap_or_default();
    let live = if may_enable { "LIVE" } else { "0" };
    assert_eq!(port.split_whitespace().nth(1), Some(live), "{desc}");
    ping(&host, PEER_IP, 3).unwrap();
}

#[test]
fn lacp_on_a_single_interface_port_negotiates_with_ovs_and_forwards() {
    single_interface_port(
        "lacp_on_a_single_interface_port_negotiates_with_ovs_and_forwards",
        "s1",
        LinkPeer::Lacp,
        false,
    );
}

#[test]
fn lacp_on_a_single_interface_port_without_partner_defaults_and_still_forwards() {
    single_interface_port(
        "lacp_on_a_single_interface_port_without_partner_defaults_and_still_forwards",
        "s2",
        LinkPeer::NoLacp,
        false,
    );
}

#[test]
fn lacp_fallback_ab_on_a_single_interface_port_without_partner_may_enable() {
    single_interface_port(
        "lacp_fallback_ab_on_a_single_interface_port_without_partner_may_enable",
        "s3",
        LinkPeer::NoLacp,
        true,
    );
}
