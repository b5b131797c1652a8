//! BFD against Open vSwitch: flowpath (`run --ovsdb`) and Debian's `ovs-vswitchd` 3.1
//! (userspace datapath) in two network namespaces joined by a veth underlay, each with a
//! GENEVE tunnel port towards the other and `bfd:enable=true`, as ovn-controller configures
//! the tunnels between the chassis of an HA chassis group.
//!
//! - both sessions come up: `bfd_status` and `bfd/show` say the same on both sides (times and
//!   discriminators aside), and the tunnel port is LIVE on both;
//! - `bfd/set-forwarding` overrides forwarding and liveness on both alike;
//! - malformed control packets (wrong version, bad length, detect multiplier 0, too short,
//!   multipoint, no discriminator) and one with TTL 64, sent by OVS through its tunnel, are
//!   counted (`coverage/show`: `bfd_rx_malformed`, `bfd_rx_ignored`) and change nothing;
//! - with `bfd:oam=true` flowpath's packets carry GENEVE's O bit (tcpdump, when installed)
//!   and OVS's session stays up;
//! - OVS stops: flowpath's session goes down with OVS's diagnostic, the port is no longer
//!   LIVE; OVS starts again: both come up; then flowpath stops, and OVS's `bfd_status` and
//!   `bfd/show` must say what flowpath's said in the same situation.
//!
//! VXLAN and GRE tunnels come up the same way, `bfd_status` and `bfd/show` as OVS's.
//!
//! Needs root, `ip`, and Debian's `openvswitch-switch` (SKIP otherwise).

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Reap;
use common::netns::{Env, Names, in_ns, must, run, veth, wait_until};

static NAMES: Names = Names {
    netns: "bfd",
    dir: "flowpath-bfd",
    root_for: "network namespaces",
    ifname_max: 15,
};

const TOOLS: &[&str] = &[
    "ip",
    "ovsdb-tool",
    "ovsdb-server",
    "ovs-vsctl",
    "ovs-appctl",
    "ovs-ofctl",
    "ovs-vswitchd",
];

const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sw {
    Flowpath,
    Ovs,
}

/// One side: its database and vswitch, in namespace `ns`, files in `dir`.
struct Chassis {
    sw: Sw,
    ns: String,
    dir: PathBuf,
    db: Option<Reap>,
    vswitchd: Option<Reap>,
}

impl Drop for Chassis {
    fn drop(&mut self) {
        self.stop();
        if let Some(mut db) = self.db.take() {
            let _ = self.appctl_to("db.ctl", &["exit"]);
            let _ = db.wait(Duration::from_secs(5));
        }
    }
}

impl Chassis {
    fn new(env: &Env, sw: Sw, ns: &str, name: &str) -> Chassis {
        let dir = env.path(name);
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = Chassis {
            sw,
            ns: ns.to_owned(),
            dir,
            db: None,
            vswitchd: None,
        };
        let conf = c.file("conf.db");
        must(&["ovsdb-tool", "create", &conf, SCHEMA]);
        let args = vec![
            "ovsdb-server".to_owned(),
            conf,
            format!("--remote=punix:{}", c.file("db.sock")),
            format!("--unixctl={}", c.file("db.ctl")),
            format!("--log-file={}", c.file("ovsdb-server.log")),
        ];
        c.db = Some(c.spawn(&args, false));
        assert!(wait_until(Duration::from_secs(10), || c
            .dir
            .join("db.sock")
            .exists()));
        c.vsctl(&["--no-wait", "init"]).unwrap();
        c.start();
        c
    }

    fn file(&self, f: &str) -> String {
        self.dir.join(f).display().to_string()
    }

    /// `args` as a child, in the namespace when `in_netns`, with this side's directories.
    fn spawn(&self, args: &[String], in_netns: bool) -> Reap {
        let mut c = if in_netns {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &self.ns]).args(args);
            c
        } else {
            let mut c = Command::new(&args[0]);
            c.args(&args[1..]);
            c
        };
        for v in ["OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"] {
            c.env(v, &self.dir);
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("stderr.log"))
            .unwrap();
        Reap(
            c.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        )
    }

    fn start(&mut self) {
        let db = format!("unix:{}", self.file("db.sock"));
        let ctl = format!("--unixctl={}", self.file("vswitchd.ctl"));
        let log = format!("--log-file={}", self.file("vswitchd.log"));
        let args: Vec<String> = match self.sw {
            Sw::Ovs => vec![
                "ovs-vswitchd".into(),
                db,
                ctl,
                log,
                "--disable-system".into(),
            ],
            Sw::Flowpath => vec![
                env!("CARGO_BIN_EXE_flowpath").into(),
                "run".into(),
                "--ovsdb".into(),
                db,
                "--rundir".into(),
                self.file(""),
                ctl,
                log,
            ],
        };
        let _ = std::fs::remove_file(self.dir.join("vswitchd.ctl"));
        self.vswitchd = Some(self.spawn(&args, true));
        assert!(
            wait_until(Duration::from_secs(20), || self
                .dir
                .join("vswitchd.ctl")
                .exists()),
            "{:?}: no control socket\n{}",
            self.sw,
            self.log()
        );
    }

    /// Stops the vswitch at once, as a crash would (its database stays).
    fn stop(&mut self) {
        if let Some(mut v) = self.vswitchd.take() {
            let _ = v.0.kill();
            let _ = v.wait(Duration::from_secs(10));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("vswitchd.log")).unwrap_or_default()
    }

    fn command(&self, args: &[&str]) -> Result<String, String> {
        let mut v = vec![
            "env".to_owned(),
            format!("OVS_RUNDIR={}", self.dir.display()),
        ];
        v.extend(args.iter().map(|s| (*s).to_owned()));
        let v: Vec<&str> = v.iter().map(String::as_str).collect();
        run(&v)
    }

    fn vsctl(&self, args: &[&str]) -> Result<String, String> {
        let db = format!("--db=unix:{}", self.file("db.sock"));
        let mut v = vec!["ovs-vsctl", &db, "--timeout=20"];
        v.extend_from_slice(args);
        self.command(&v)
    }

    fn appctl_to(&self, target: &str, args: &[&str]) -> Result<String, String> {
        let t = self.file(target);
        let mut v = vec!["ovs-appctl", "-T", "10", "-t", &t];
        v.extend_from_slice(args);
        self.command(&v)
    }

    fn appctl(&self, args: &[&str]) -> Result<String, String> {
        self.appctl_to("vswitchd.ctl", args)
    }

    fn ofctl(&self, args: &[&str]) -> Result<String, String> {
        let mgmt = format!("unix:{}", self.file("br-int.mgmt"));
        let mut v = vec!["ovs-ofctl", "-O", "OpenFlow15", args[0], &mgmt];
        v.extend_from_slice(&args[1..]);
        self.command(&v)
    }

    /// br-phys with the underlay port and address `ip`, br-int with the tunnel port `gnv0`
    /// of type `kind` (with `csum=true` for GENEVE) towards `remote` with BFD.
    fn configure(&self, underlay: &str, ip: &str, remote: &str, kind: &str) {
        self.vsctl(&[
            "add-br",
            "br-phys",
            "--",
            "set",
            "bridge",
            "br-phys",
            "datapath_type=netdev",
            "--",
            "add-port",
            "br-phys",
            underlay,
        ])
        .unwrap();
        assert!(wait_until(Duration::from_secs(10), || run(&in_ns(
            &self.ns,
            &["test", "-e", "/sys/class/net/br-phys"]
        ))
        .is_ok()));
        must(&in_ns(
            &self.ns,
            &["ip", "addr", "add", ip, "dev", "br-phys"],
        ));
        must(&in_ns(&self.ns, &["ip", "link", "set", "br-phys", "up"]));
        let remote = format!("options:remote_ip={remote}");
        self.vsctl(&[
            "add-br",
            "br-int",
            "--",
            "set",
            "bridge",
            "br-int",
            "datapath_type=netdev",
            "fail-mode=secure",
            "--",
            "add-port",
            "br-int",
            "gnv0",
            "--",
            "set",
            "interface",
            "gnv0",
            &format!("type={kind}"),
            &remote,
            "options:key=flow",
            if kind == "geneve" {
                "options:csum=true"
            } else {
                "options:csum=false"
            },
            "bfd:enable=true",
        ])
        .unwrap();
    }

    /// `gnv0`'s `bfd_status`.
    fn bfd_status(&self) -> BTreeMap<String, String> {
        let t = self.bfd_status_text();
        let t = t.trim().trim_start_matches('{').trim_end_matches('}');
        t.split(", ")
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
            .collect()
    }

    /// `bfd_status` as `ovs-vsctl get` prints it.
    fn bfd_status_text(&self) -> String {
        self.vsctl(&["get", "interface", "gnv0", "bfd_status"])
            .unwrap_or_default()
    }

    /// Waits until `bfd_status` has the pairs `what`; returns it as `ovs-vsctl` prints it.
    fn wait_status(&self, what: &[(&str, &str)], limit: Duration) -> String {
        let ok = wait_until(limit, || {
            let st = self.bfd_status();
            what.iter()
                .all(|(k, v)| st.get(*k).map(String::as_str) == Some(*v))
        });
        let t = self.bfd_status_text();
        assert!(ok, "{:?}: {t}, wanted {what:?}\n{}", self.sw, self.log());
        t
    }

    /// `bfd/show gnv0`, with its times and discriminators made comparable.
    fn show(&self) -> String {
        normalise(&self.appctl(&["bfd/show", "gnv0"]).unwrap())
    }

    /// `gnv0`'s OpenFlow port state.
    fn port_state(&self) -> String {
        let d = self.ofctl(&["dump-ports-desc"]).unwrap();
        let mut lines = d.lines().skip_while(|l| !l.contains("(gnv0)"));
        lines
            .find_map(|l| l.trim().strip_prefix("state:"))
            .unwrap_or("?")
            .trim()
            .to_owned()
    }
}

/// Times relative to now and non-zero discriminators replaced.
fn normalise(show: &str) -> String {
    show.lines()
        .map(|l| {
            if let Some((head, _)) = l.split_once(": now ") {
                format!("{head}: now Nms")
            } else if let Some((head, d)) = l.split_once("Discriminator: ") {
                let d = if d == "0x0" { d } else { "D" };
                format!("{head}Discriminator: {d}")
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A BFD control packet in its frame, with the given fields, as OVS would send it.
fn bfd_frame(
    vers: u8,
    flags: u8,
    mult: u8,
    length: u8,
    my_disc: u32,
    ttl: u8,
    short: bool,
) -> String {
    let mut m = vec![vers << 5, (1 << 6) | flags, mult, length];
    for v in [my_disc, 0, 1_000_000, 1_000_000, 0] {
        m.extend_from_slice(&v.to_be_bytes());
    }
    if short {
        m.truncate(3);
    }
    let udp_len = (8 + m.len()) as u16;
    let mut ip = vec![0x45, 0xc0];
    ip.extend_from_slice(&(20 + udp_len).to_be_bytes());
    ip.extend_from_slice(&[0, 0, 0, 0, ttl, 17, 0, 0, 169, 254, 1, 0, 169, 254, 1, 1]);
    let sum: u32 = ip
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let mut f = vec![
        0x00, 0x23, 0x20, 0x00, 0x00, 0x01, 0x02, 0, 0, 0, 0, 0x99, 0x08, 0x00,
    ];
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0xc3, 0x4f, 0x0e, 0xc8]);
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&m);
    f.iter().map(|b| format!("{b:02x}")).collect()
}

/// `coverage/show`'s total of `event`.
fn coverage(c: &Chassis, event: &str) -> u64 {
    let out = c.appctl(&["coverage/show"]).unwrap();
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(event))
        .and_then(|l| l.rsplit("total: ").next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// flowpath and OVS in namespaces of `env`, joined by a veth, each with a tunnel of `kind`
/// towards the other with BFD: (flowpath, OVS, OVS's namespace, OVS's underlay port).
fn pair(env: &mut Env, kind: &str) -> (Chassis, Chassis, String, String) {
    let ns_fp = env.netns("fp");
    let ns_ovs = env.netns("ovs");
    let (u_fp, u_ovs) = (env.ifname("bfp"), env.ifname("bovs"));
    veth(&u_fp, &ns_fp, &u_ovs, &ns_ovs);
    let fp = Chassis::new(env, Sw::Flowpath, &ns_fp, "fp");
    let ovs = Chassis::new(env, Sw::Ovs, &ns_ovs, "ovs");
    fp.configure(&u_fp, "172.30.9.1/24", "172.30.9.2", kind);
    ovs.configure(&u_ovs, "172.30.9.2/24", "172.30.9.1", kind);
    (fp, ovs, ns_ovs, u_ovs)
}

#[test]
fn bfd_with_ovs_over_vxlan_and_gre() {
    for (kind, tag) in [("vxlan", "bv"), ("gre", "bg")] {
        let test = format!("bfd_with_ovs_over_{kind}");
        let Some(mut env) = Env::new(&test, tag, TOOLS, &NAMES) else {
            return;
        };
        let _slot = common::netns::slot();
        let (fp, ovs, _, _) = pair(&mut env, kind);
        let up = [
            ("state", "up"),
            ("remote_state", "up"),
            ("forwarding", "true"),
        ];
        let t = Duration::from_secs(20);
        assert_eq!(fp.wait_status(&up, t), ovs.wait_status(&up, t), "{kind}");
        assert_eq!(fp.show(), ovs.show(), "{kind}");
        drop(fp);
        drop(ovs);
    }
}

#[test]
fn bfd_with_ovs_over_geneve() {
    let Some(mut env) = Env::new("bfd_with_ovs_over_geneve", "bo", TOOLS, &NAMES) else {
        return;
    };
    let _slot = common::netns::slot();
    let (mut fp, mut ovs, ns_ovs, u_ovs) = pair(&mut env, "geneve");

    // Both up, and both say so alike.
    let up = [
        ("state", "up"),
        ("remote_state", "up"),
        ("forwarding", "true"),
    ];
    let t = Duration::from_secs(20);
    let fp_up = fp.wait_status(&up, t);
    let ovs_up = ovs.wait_status(&up, t);
    assert_eq!(fp_up, ovs_up);
    assert_eq!(fp.bfd_status().len(), 6, "{fp_up}");
    assert_eq!(fp.show(), ovs.show());
    assert_eq!(
        (fp.port_state(), ovs.port_state()),
        ("LIVE".into(), "LIVE".into())
    );

    // bfd/set-forwarding false: the session says it does not forward and the port is not
    // live, on both alike; normal brings both back.
    for c in [&fp, &ovs] {
        assert_eq!(
            c.appctl(&["bfd/set-forwarding", "gnv0", "false"]).unwrap(),
            "OK\n"
        );
    }
    let overridden = [("state", "up"), ("forwarding", "false")];
    let fp_off = fp.wait_status(&overridden, t);
    assert_eq!(fp_off, ovs.wait_status(&overridden, t));
    assert!(wait_until(t, || fp.port_state() == "0"));
    assert_eq!(ovs.port_state(), "0");
    let nosuch = |c: &Chassis| {
        c.appctl(&["bfd/set-forwarding", "nosuch", "true"])
            .map_err(|e| e.replace(&c.dir.display().to_string(), "DIR"))
    };
    assert_eq!(nosuch(&fp), nosuch(&ovs));
    for c in [&fp, &ovs] {
        c.appctl(&["bfd/set-forwarding", "normal"]).unwrap();
    }
    assert_eq!(fp.wait_status(&up, t), fp_up);
    assert!(wait_until(t, || fp.port_state() == "LIVE"));

    // Bad input through OVS's tunnel: counted, and nothing changes.
    let bad = [
        bfd_frame(2, 0, 3, 24, 0x1234, 255, false),
        bfd_frame(1, 0, 3, 20, 0x1234, 255, false),
        bfd_frame(1, 0, 0, 24, 0x1234, 255, false),
        bfd_frame(1, 0, 3, 24, 0x1234, 255, true),
        bfd_frame(1, 1, 3, 24, 0x1234, 255, false),
        bfd_frame(1, 0, 3, 24, 0, 255, false),
        bfd_frame(1, 0, 3, 24, 0x1234, 64, false),
    ];
    for f in &bad {
        let po = format!("in_port=LOCAL packet={f} actions=output:gnv0");
        ovs.ofctl(&["packet-out", &po]).unwrap();
    }
    assert!(
        wait_until(Duration::from_secs(5), || coverage(&fp, "bfd_rx_malformed")
            == 6
            && coverage(&fp, "bfd_rx_ignored") == 1),
        "{}",
        fp.appctl(&["coverage/show"]).unwrap()
    );
    let log = fp.log();
    for w in [
        "Incorrect version.",
        "Unexpected length.",
        "Zero multiplier.",
        "NULL my_disc.",
    ] {
        assert!(log.contains(&format!("|bfd|WARN|gnv0: {w}")), "{w}\n{log}");
    }
    assert_eq!(fp.bfd_status_text(), fp_up);

    // bfd:oam: flowpath's control packets carry GENEVE's O bit, and OVS takes them.
    fp.vsctl(&["set", "interface", "gnv0", "bfd:oam=true"])
        .unwrap();
    if common::netns::in_path("tcpdump") {
        let filter = "udp port 6081 and src host 172.30.9.1";
        let cap = run(&in_ns(
            &ns_ovs,
            &[
                "timeout", "10", "tcpdump", "-c", "2", "-nvvi", &u_ovs, filter,
            ],
        ))
        .unwrap();
        assert!(cap.matches("Geneve, Flags [O]").count() == 2, "{cap}");
    } else {
        eprintln!("bfd_with_ovs_over_geneve: no tcpdump, the O bit is not looked at");
    }
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(ovs.bfd_status_text(), ovs_up);

    // OVS goes: flowpath's session expires, its port is no longer live.
    ovs.stop();
    let down = [
        ("state", "down"),
        ("forwarding", "false"),
        ("diagnostic", "Control Detection Time Expired"),
        ("flap_count", "2"),
    ];
    let fp_down = fp.wait_status(&down, Duration::from_secs(10));
    let fp_down_show = fp.show();
    assert_eq!(fp.port_state(), "0");

    // OVS is back: both up again.
    ovs.start();
    fp.wait_status(&up, t);
    ovs.wait_status(&up, t);
    assert_eq!(fp.port_state(), "LIVE");
    let st = fp.bfd_status();
    assert_eq!(st["flap_count"], "3", "{st:?}");

    // flowpath goes: OVS says what flowpath said.
    fp.stop();
    let ovs_down = ovs.wait_status(&down, Duration::from_secs(10));
    assert_eq!(ovs_down, fp_down);
    assert_eq!(ovs.show(), fp_down_show);
    assert_eq!(ovs.port_state(), "0");
    drop(fp);
    drop(ovs);
}
