//! Mirroring to a remote analyser over a tunnel, as OVN's port mirrors configure it through
//! OVSDB (`ovn-nbctl mirror-add ... gre|erspan ...`): the switch runs in a namespace of its own
//! with real devices, its underlay bridge gets its address from the kernel (`ip addr add`),
//! and copies of what a port sends leave in GRE or ERSPAN to a host on the underlay. Checked:
//! the tunnel's next hop is resolved as soon as it is routable, before any traffic (so no
//! first copy is lost), and each copy is what `tshark` decodes as GRE or ERSPAN with the
//! configured key or session id and index, its sequence numbers counting up. And the underlay
//! bridge's device takes `other_config:hwaddr` as its address, as OVS's local port does. Needs root,
//! network namespaces, OVS's `ovsdb-server`/`ovs-vsctl`, `tcpdump` and `tshark`; else SKIP.

mod common;

use std::process::Command;
use std::time::Duration;

use common::netns::{Env, Names, in_ns, must, veth, wait_until};
use common::ovsdb::{Sandbox, Switch, missing};

static NAMES: Names = Names {
    netns: "fpmt",
    dir: "fp-mirror-tunnels",
    root_for: "network namespaces and veth pairs",
    ifname_max: 15,
};

/// The world of one test: a switch namespace with br-int (two VMs' ports) and br-phys (the
/// underlay, a veth to the analyser's namespace), and the database.
struct World {
    env: Env,
    sb: Sandbox,
    sw: String,
    analyser: String,
    vm1: String,
}

impl World {
    fn new(test: &str, short: &str) -> Option<World> {
        if let Some(why) = missing(Switch::Flowpath) {
            eprintln!("SKIP {test}: {why}");
            return None;
        }
        let mut env = Env::new(test, short, &["tcpdump", "tshark"], &NAMES)?;
        let sw = env.netns("sw");
        let analyser = env.netns("an");
        let vm1 = env.netns("v1");
        let vm2 = env.netns("v2");
        let (up, an) = (env.ifname("up"), env.ifname("an"));
        veth(&up, &sw, &an, &analyser);
        must(&in_ns(
            &analyser,
            &["ip", "addr", "add", "172.30.9.2/24", "dev", &an],
        ));
        let mut ports = Vec::new();
        for (vm, ip) in [(&vm1, "10.9.9.1/24"), (&vm2, "10.9.9.2/24")] {
            let (p, v) = (
                env.ifname(&format!("p{}", ports.len() + 1)),
                env.ifname("vm"),
            );
            veth(&p, &sw, &v, vm);
            must(&in_ns(vm, &["ip", "addr", "add", ip, "dev", &v]));
            ports.push(p);
        }
        let mut sb = Sandbox::new(&format!("fp-mt-{short}"), Switch::Flowpath);
        sb.start_switch_in(Some(&sw));
        let w = World {
            env,
            sb,
            sw,
            analyser,
            vm1,
        };
        w.vsctl(&[
            "add-br",
            "br-phys",
            "--",
            "set",
            "bridge",
            "br-phys",
            "datapath_type=netdev",
        ]);
        w.vsctl(&["add-port", "br-phys", &up]);
        w.vsctl(&[
            "add-br",
            "br-int",
            "--",
            "set",
            "bridge",
            "br-int",
            "datapath_type=netdev",
        ]);
        for p in &ports {
            w.vsctl(&["add-port", "br-int", p]);
        }
        // Copies of what the second VM's port sends go to the port `mir`, made by each test.
        w.vsctl(&[
            "--",
            "--id=@p",
            "get",
            "port",
            &ports[1],
            "--",
            "--id=@m",
            "create",
            "mirror",
            "name=m0",
            "select_dst_port=@p",
            "--",
            "set",
            "bridge",
            "br-int",
            "mirrors=@m",
        ]);
        Some(w)
    }

    fn vsctl(&self, args: &[&str]) -> String {
        self.sb.vsctl_strs(args)
    }

    fn appctl(&self, args: &[&str]) -> String {
        self.sb.appctl_strs(args)
    }

    /// Adds the mirror's output tunnel port `mir` of `kind` with `options`, and gives the
    /// underlay bridge its address.
    fn mirror_to(&self, kind: &str, options: &[&str]) {
        let mut args = vec!["add-port", "br-int", "mir", "--", "set", "interface", "mir"];
        let ty = format!("type={kind}");
        args.push(&ty);
        args.extend_from_slice(options);
        args.extend_from_slice(&["--", "--id=@o", "get", "port", "mir", "--", "set", "mirror"]);
        args.extend_from_slice(&["m0", "output_port=@o"]);
        self.vsctl(&args);
        must(&in_ns(
            &self.sw,
            &["ip", "addr", "add", "172.30.9.1/24", "dev", "br-phys"],
        ));
        must(&in_ns(&self.sw, &["ip", "link", "set", "br-phys", "up"]));
    }

    /// Whether the switch knows the analyser's Ethernet address as a tunnel neighbour.
    fn neighbour_known(&self) -> bool {
        self.appctl(&["tnl/neigh/show"]).contains("172.30.9.2")
    }

    /// Pings the second VM three times from the first (once before) while the analyser
    /// captures three GRE packets; `tshark`'s fields of each.
    fn capture(&self, fields: &[&str]) -> Vec<String> {
        // The VMs learn each other's addresses first: the copies captured are the pings'.
        let _ = must(&in_ns(&self.vm1, &["ping", "-c", "1", "10.9.9.2"]));
        let pcap = self.env.path("mirror.pcap");
        let pcap_s = pcap.display().to_string();
        let mut cap = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.analyser,
                "tcpdump",
                "-U",
                "-c",
                "3",
                "-w",
            ])
            .arg(&pcap)
            .args(["-i", "any", "proto", "47"])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let _ = must(&in_ns(
            &self.vm1,
            &["ping", "-c", "3", "-i", "0.2", "10.9.9.2"],
        ));
        let done = wait_until(Duration::from_secs(5), || {
            cap.try_wait().ok().flatten().is_some()
        });
        if !done {
            let _ = cap.kill();
            let _ = cap.wait();
        }
        let mut args = vec!["-r", &pcap_s, "-T", "fields"];
        for f in fields {
            args.extend_from_slice(&["-e", f]);
        }
        must(&[&["tshark"][..], &args[..]].concat())
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// The sequence numbers of `lines` (tab-separated, the sequence number first) count up by one.
fn sequences_count_up(lines: &[String]) -> bool {
    let seqs: Vec<u64> = lines
        .iter()
        .filter_map(|l| l.split('\t').next()?.parse().ok())
        .collect();
    seqs.len() == lines.len() && seqs.windows(2).all(|w| w[1] == w[0] + 1)
}

#[test]
fn a_port_mirrored_over_erspan_reaches_the_analyser_from_the_first_packet() {
    let Some(w) = World::new("mirror_tunnels erspan", "er") else {
        return;
    };
    w.mirror_to(
        "erspan",
        &[
            "options:remote_ip=172.30.9.2",
            "options:key=5",
            "options:erspan_ver=1",
            "options:erspan_idx=0x1234",
        ],
    );
    // Asked for as soon as the route exists, not when the first copy needs it.
    assert!(
        wait_until(Duration::from_secs(5), || w.neighbour_known()),
        "{}",
        w.appctl(&["tnl/neigh/show"])
    );
    let got = w.capture(&[
        "gre.sequence_number",
        "gre.proto",
        "erspan.version",
        "erspan.spanid",
        "erspan.index",
        "icmp.type",
        "ip.dst",
    ]);
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(sequences_count_up(&got), "{got:?}");
    for l in &got {
        let f: Vec<&str> = l.split('\t').collect();
        // GRE protocol 0x88be (ERSPAN type II), version 1 (0 in the field's numbering is
        // type I), session id 5, index 0x1234; the mirrored echo request to the second VM.
        assert_eq!(&f[1..5], ["0x88be", "1", "5", "4660"], "{l}");
        assert_eq!(f[5], "8", "{l}");
        assert!(f[6].ends_with("10.9.9.2"), "{l}");
    }
}

#[test]
fn a_port_mirrored_over_gre_carries_the_key() {
    let Some(w) = World::new("mirror_tunnels gre", "gr") else {
        return;
    };
    w.mirror_to("gre", &["options:remote_ip=172.30.9.2", "options:key=7"]);
    assert!(
        wait_until(Duration::from_secs(5), || w.neighbour_known()),
        "{}",
        w.appctl(&["tnl/neigh/show"])
    );
    let got = w.capture(&["gre.key", "gre.proto", "icmp.type"]);
    assert_eq!(got.len(), 3, "{got:?}");
    for l in &got {
        assert_eq!(l, "0x00000007\t0x6558\t8", "{l}");
    }
}

/// `other_config:hwaddr` becomes the underlay bridge's device address, as `ovs-vswitchd` sets
/// its local port's: what the kernel answers ARP for the tunnel endpoint with must be the
/// address tunnel packets are terminated for (a peer that learned another would send them
/// where the bridge does not take them).
#[test]
fn an_underlay_bridge_s_hwaddr_is_its_device_s_address() {
    let Some(w) = World::new("mirror_tunnels hwaddr", "hw") else {
        return;
    };
    let device_mac = || {
        must(&in_ns(&w.sw, &["cat", "/sys/class/net/br-phys/address"]))
            .trim()
            .to_owned()
    };
    for mac in ["02:00:00:00:09:01", "02:00:00:00:09:02"] {
        w.vsctl(&[
            "set",
            "bridge",
            "br-phys",
            &format!("other_config:hwaddr=\"{mac}\""),
        ]);
        assert!(
            wait_until(Duration::from_secs(5), || device_mac() == mac),
            "br-phys has {}, not {mac}",
            device_mac()
        );
    }
}
