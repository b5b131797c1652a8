//! Bonds over veth pairs, configured through the database as an operator does (`ovs-vsctl
//! add-bond`): the switch's bond `bond0` (members `a1`, `a2`) goes to a Linux bridge in a peer
//! namespace (members' peers `b1`, `b2`, the bridge's own address the far host), a host
//! behind an ordinary port pings it.
//!
//! Active-backup: nothing is sent on the backup member and what the Linux bridge floods back on
//! it is not forwarded (no loop); the active member's peer going down moves traffic to the
//! other member, and learning packets move the host in the peer's table. Balance-slb: a
//! source's frames go out of its bucket's member (moved with `bond/migrate`), still no loop,
//! and either member down leaves the other forwarding. Needs root, network namespaces and
//! OVS's `ovsdb-server`/`ovs-vsctl`; else SKIP.

mod common;

use std::time::Duration;

use common::netns::{Env, Names, in_ns, must, ping, veth, wait_until};
use common::ovsdb::{Sandbox, Switch, missing};

static NAMES: Names = Names {
    netns: "bond",
    dir: "fp-bonds",
    root_for: "network namespaces and veth pairs",
    ifname_max: 15,
};

/// The switch's namespace with `br0` (port `p3` to the host, bond `bond0` to the peer), the
/// host's and the peer's namespaces, and the database.
struct World {
    _env: Env,
    sb: Sandbox,
    sw: String,
    host: String,
    h: String,
    peer: String,
    a: [String; 2],
    b: [String; 2],
}

impl World {
    fn new(test: &str, short: &str, mode: &str) -> Option<World> {
        if let Some(why) = missing(Switch::Flowpath) {
            eprintln!("SKIP {test}: {why}");
            return None;
        }
        let mut env = Env::new(test, short, &["ping"], &NAMES)?;
        let sw = env.netns("sw");
        let host = env.netns("h");
        let peer = env.netns("pr");
        let (p3, h) = (env.ifname("p3"), env.ifname("h"));
        veth(&p3, &sw, &h, &host);
        must(&in_ns(
            &host,
            &["ip", "addr", "add", "10.88.0.1/24", "dev", &h],
        ));
        let a = [env.ifname("a1"), env.ifname("a2")];
        let b = [env.ifname("b1"), env.ifname("b2")];
        must(&in_ns(
            &peer,
            &["ip", "link", "add", "brx", "type", "bridge"],
        ));
        for (x, y) in a.iter().zip(&b) {
            veth(x, &sw, y, &peer);
            must(&in_ns(&peer, &["ip", "link", "set", y, "master", "brx"]));
        }
        must(&in_ns(
            &peer,
            &["ip", "addr", "add", "10.88.0.2/24", "dev", "brx"],
        ));
        must(&in_ns(&peer, &["ip", "link", "set", "brx", "up"]));
        let mut sb = Sandbox::new(&format!("fp-bond-{short}"), Switch::Flowpath);
        sb.start_switch_in(Some(&sw));
        let w = World {
            _env: env,
            sb,
            sw,
            host,
            h,
            peer,
            a,
            b,
        };
        w.vsctl(common::ovsdb::ADD_BR0);
        w.vsctl(&["add-port", "br0", &p3]);
        let primary = format!("other_config:bond-primary={}", w.a[0]);
        let mode = format!("bond_mode={mode}");
        w.vsctl(&[
            "add-bond", "br0", "bond0", &w.a[0], &w.a[1], &mode, &primary,
        ]);
        Some(w)
    }

    fn vsctl(&self, args: &[&str]) -> String {
        self.sb.vsctl_strs(args)
    }

    fn appctl(&self, args: &[&str]) -> String {
        self.sb.appctl_strs(args)
    }

    /// Packets the switch sent on its member `i`, as its veth counts them.
    fn tx_packets(&self, i: usize) -> u64 {
        let p = format!("/sys/class/net/{}/statistics/tx_packets", self.a[i]);
        must(&in_ns(&self.sw, &["cat", &p])).trim().parse().unwrap()
    }

    /// Whether the peer's bridge has the host's address behind its port `b[i]`.
    fn peer_learned_host_on(&self, i: usize) -> bool {
        let p = format!("/sys/class/net/{}/address", self.h);
        let mac = must(&in_ns(&self.host, &["cat", &p])).trim().to_owned();
        let fdb = must(&in_ns(&self.peer, &["bridge", "fdb", "show", "br", "brx"]));
        fdb.lines()
            .any(|l| l.starts_with(&mac) && l.contains(&format!("dev {} ", self.b[i])))
    }

    /// Packets the host received (what the switch forwarded to it from the bond's side).
    fn host_rx_packets(&self) -> u64 {
        let p = format!("/sys/class/net/{}/statistics/rx_packets", self.h);
        must(&in_ns(&self.host, &["cat", &p]))
            .trim()
            .parse()
            .unwrap()
    }
}

#[test]
fn active_backup_uses_one_member_and_fails_over_when_its_link_goes_down() {
    let test = "active_backup_uses_one_member_and_fails_over_when_its_link_goes_down";
    let Some(w) = World::new(test, "ab", "active-backup") else {
        return;
    };
    let show = w.appctl(&["bond/show", "bond0"]);
    assert!(show.contains("bond_mode: active-backup"), "{show}");
    // The primary is active once its carrier is seen (until then the other member may be,
    // as in OVS); what the datapath sends follows once the revalidator has run.
    let active = format!("member {}: enabled\n  active member", w.a[0]);
    assert!(
        wait_until(Duration::from_secs(10), || {
            w.appctl(&["bond/show", "bond0"]).contains(&active)
        }),
        "{}",
        w.appctl(&["bond/show", "bond0"])
    );
    w.appctl(&["revalidator/wait"]);
    let backup_before = w.tx_packets(1);
    ping(&w.host, "10.88.0.2", 5).unwrap();
    // Nothing on the backup member; the bridge's floods back on it are not forwarded.
    assert_eq!(w.tx_packets(1), backup_before, "sent on the backup member");
    let rx = w.host_rx_packets();
    assert!(
        rx < 30,
        "the host got {rx} packets: a loop through the bond"
    );

    // The active member's peer goes down: its carrier goes, the other member takes over.
    must(&in_ns(&w.peer, &["ip", "link", "set", &w.b[0], "down"]));
    let moved = format!("member {}: enabled\n  active member", w.a[1]);
    let disabled = format!("member {}: disabled", w.a[0]);
    let failed_over = wait_until(Duration::from_secs(10), || {
        let s = w.appctl(&["bond/show", "bond0"]);
        s.contains(&moved) && s.contains(&disabled)
    });
    assert!(failed_over, "{}", w.appctl(&["bond/show", "bond0"]));
    // The learning packets (a RARP from the host's address) teach the peer at once.
    assert!(
        wait_until(Duration::from_secs(3), || w.peer_learned_host_on(1)),
        "the peer did not learn the host behind {}",
        w.b[1]
    );
    w.appctl(&["revalidator/wait"]);
    ping(&w.host, "10.88.0.2", 5).unwrap();
    assert!(
        w.tx_packets(1) >= backup_before + 5,
        "nothing went over the new active member"
    );
    let mac = must(&in_ns(
        &w.sw,
        &["cat", &format!("/sys/class/net/{}/address", w.a[1])],
    ));
    let slave = w.vsctl(&["get", "port", "bond0", "bond_active_slave"]);
    let written = wait_until(Duration::from_secs(10), || {
        w.vsctl(&["get", "port", "bond0", "bond_active_slave"])
            .trim()
            == format!("\"{}\"", mac.trim())
    });
    assert!(written, "bond_active_slave {slave}, want {mac}");

    // Back up: the primary is active again, `bond_updelay` after its carrier returns. The
    // delay is what lets the learning packets reach the peer's bridge: its port forwards only
    // once the kernel's link watcher has run, which may be after the switch sees carrier.
    w.vsctl(&["set", "port", "bond0", "bond_updelay=1000"]);
    must(&in_ns(&w.peer, &["ip", "link", "set", &w.b[0], "up"]));
    let back = wait_until(Duration::from_secs(10), || {
        w.appctl(&["bond/show", "bond0"]).contains(&active)
    });
    assert!(back, "{}", w.appctl(&["bond/show", "bond0"]));
    w.appctl(&["revalidator/wait"]);
    assert!(
        wait_until(Duration::from_secs(3), || w.peer_learned_host_on(0)),
        "the peer did not learn the host behind {} again",
        w.b[0]
    );
    ping(&w.host, "10.88.0.2", 3).unwrap();
}

#[test]
fn balance_slb_forwards_without_looping_and_survives_a_member_down() {
    let test = "balance_slb_forwards_without_looping_and_survives_a_member_down";
    let Some(w) = World::new(test, "sl", "balance-slb") else {
        return;
    };
    let show = w.appctl(&["bond/show", "bond0"]);
    assert!(show.contains("bond_mode: balance-slb"), "{show}");
    ping(&w.host, "10.88.0.2", 5).unwrap();
    let rx = w.host_rx_packets();
    assert!(
        rx < 30,
        "the host got {rx} packets: a loop through the bond"
    );
    // The host's frames go where its address's bucket says: moved to each member in turn,
    // they go out of that member only.
    let p = format!("/sys/class/net/{}/address", w.h);
    let mac = must(&in_ns(&w.host, &["cat", &p])).trim().to_owned();
    let bucket = w.appctl(&["bond/hash", &mac]).trim().to_owned();
    for (i, other) in [(0, 1), (1, 0)] {
        let reply = w.appctl(&["bond/migrate", "bond0", &bucket, &w.a[i]]);
        assert_eq!(reply.trim(), "migrated");
        // The move reaches the datapath's flows with the revalidator's next round.
        w.appctl(&["revalidator/wait"]);
        let before = (w.tx_packets(i), w.tx_packets(other));
        ping(&w.host, "10.88.0.2", 3).unwrap();
        assert!(w.tx_packets(i) >= before.0 + 3, "not sent on {}", w.a[i]);
        assert_eq!(w.tx_packets(other), before.1, "sent on {}", w.a[other]);
    }
    // Both members' peers down but one: traffic stays on the one left.
    for i in 0..2 {
        must(&in_ns(&w.peer, &["ip", "link", "set", &w.b[i], "down"]));
        let disabled = format!("member {}: disabled", w.a[i]);
        assert!(
            wait_until(Duration::from_secs(10), || {
                w.appctl(&["bond/show", "bond0"]).contains(&disabled)
            }),
            "{}",
            w.appctl(&["bond/show", "bond0"])
        );
        w.appctl(&["revalidator/wait"]);
        ping(&w.host, "10.88.0.2", 3).unwrap();
        must(&in_ns(&w.peer, &["ip", "link", "set", &w.b[i], "up"]));
        let enabled = format!("member {}: enabled", w.a[i]);
        assert!(wait_until(Duration::from_secs(10), || {
            w.appctl(&["bond/show", "bond0"]).contains(&enabled)
        }));
    }
}

/// Load-based rebalancing (`bond-rebalance-interval`): two sources whose buckets were both
/// put on the first member send for a few seconds; the bytes their megaflows count reach the
/// buckets' load, and the next rebalancing moves one of them to the idle member (`bond/show`
/// lists it, with its load, under the second member).
#[test]
fn balance_slb_moves_load_from_a_busy_member_to_an_idle_one() {
    let test = "balance_slb_moves_load_from_a_busy_member_to_an_idle_one";
    if !common::netns::in_path("python3") {
        eprintln!("SKIP {test}: no python3");
        return;
    }
    let Some(w) = World::new(test, "rb", "balance-slb") else {
        return;
    };
    w.vsctl(&[
        "set",
        "port",
        "bond0",
        "other_config:bond-rebalance-interval=1000",
    ]);
    // Two addresses in different buckets, both put on the first member.
    let mut picked: Vec<(String, String)> = Vec::new();
    for n in 1..=16 {
        let mac = format!("50:54:00:00:0a:{n:02x}");
        let bucket = w.appctl(&["bond/hash", &mac]).trim().to_owned();
        if picked.iter().all(|(_, b)| *b != bucket) {
            picked.push((mac, bucket));
        }
        if picked.len() == 2 {
            break;
        }
    }
    for (_, bucket) in &picked {
        let reply = w.appctl(&["bond/migrate", "bond0", bucket, &w.a[0]]);
        assert_eq!(reply.trim(), "migrated");
    }
    w.appctl(&["revalidator/wait"]);
    // 3 s of 1400-byte frames from both (an experimental ethertype, to a host no one knows).
    let srcs: Vec<String> = picked.iter().map(|(m, _)| m.replace(':', "")).collect();
    let script = format!(
        "import socket, time\n\
         s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n\
         s.bind(('{}', 0))\n\
         frames = [bytes.fromhex('505400000b01' + m + '88b5') + bytes(1400) for m in {srcs:?}]\n\
         for _ in range(30):\n\
         \x20   for _ in range(40):\n\
         \x20       for f in frames:\n\
         \x20           s.send(f)\n\
         \x20   time.sleep(0.1)\n",
        w.h
    );
    must(&in_ns(&w.host, &["python3", "-c", &script]));
    let moved = |show: &str| {
        let second = show
            .split(&format!("\nmember {}:", w.a[1]))
            .nth(1)
            .unwrap_or_default()
            .split("\nmember ")
            .next()
            .unwrap_or_default()
            .to_owned();
        picked
            .iter()
            .any(|(_, b)| second.contains(&format!("  hash {b}: ")))
    };
    let ok = wait_until(Duration::from_secs(10), || {
        moved(&w.appctl(&["bond/show", "bond0"]))
    });
    assert!(ok, "{}", w.appctl(&["bond/show", "bond0"]));
}
