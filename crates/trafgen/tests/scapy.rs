//! The generator's frames are byte for byte what scapy builds from the same description.
//!
//! Each case is a stream-file `[[stream]]` body. The test compiles it with `trafgen::stream`,
//! hands the same layers (as JSON) to a scapy script, which maps every layer to its scapy class
//! with only the fields the description gives (so scapy's defaults and derivations apply), pads
//! the payload with zeros (`Raw(b"\0" * n)`) or with zeros and the stamp's bytes, and prints the
//! frames in hex. Variation: the script computes `inc` values itself; `random` values are read
//! from the generator's frame (they are checked to be in range), so scapy rebuilds lengths and
//! checksums around them. Reversed (`bi`) streams are compared with scapy's build of the swapped
//! description.
//!
//! Needs python3 with scapy (`pip install scapy`); without, it prints `SKIP` and passes.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use trafgen::build::{FieldRef, Layer, Template, VaryOp};
use trafgen::stamp::Stamp;
use trafgen::stream::{self, Stream};

const PORTS: &str =
    "[[port]]\nname = \"p0\"\ntype = \"loopback\"\n[[port]]\nname = \"p1\"\ntype = \"loopback\"\n";

const SCRIPT: &str = r#"
import sys, json, ipaddress
from scapy.all import Ether, Dot1Q, Dot1AD, IP, IPv6, UDP, TCP, VXLAN, GRE, Raw, conf
from scapy.contrib.geneve import GENEVE, GeneveOptions
from scapy.contrib.mpls import MPLS
conf.verb = 0

IMIX = [64, 594, 64, 64, 594, 64, 1518, 64, 594, 64, 64, 594]

def layer(l):
    t = l["type"]
    g = lambda k: l[k]
    kw = {}
    def opt(src, dst=None, f=lambda v: v):
        if src in l:
            kw[dst or src] = f(l[src])
    if t == "eth":
        opt("src"); opt("dst"); opt("ethertype", "type")
        return Ether(**kw)
    if t == "vlan":
        opt("vid", "vlan"); opt("pcp", "prio"); opt("dei", "dei", int); opt("ethertype", "type")
        return (Dot1AD if l.get("tpid") == 0x88a8 else Dot1Q)(**kw)
    if t == "ipv4":
        opt("src"); opt("dst"); opt("ttl"); opt("tos"); opt("id"); opt("proto")
        if l.get("df"):
            kw["flags"] = "DF"
        return IP(**kw)
    if t == "ipv6":
        opt("src"); opt("dst"); opt("hlim"); opt("tc"); opt("fl"); opt("nh")
        return IPv6(**kw)
    if t == "udp":
        opt("sport"); opt("dport")
        if l.get("checksum") is False:
            kw["chksum"] = 0
        return UDP(**kw)
    if t == "tcp":
        opt("sport"); opt("dport"); opt("seq"); opt("ack"); opt("flags"); opt("window")
        return TCP(**kw)
    if t == "vxlan":
        opt("vni")
        return VXLAN(flags=0x08, **kw)
    if t == "geneve":
        opt("vni"); opt("critical", f=int); opt("oam", f=int); opt("protocol", "proto")
        if "options" in l:
            kw["options"] = [GeneveOptions(classid=o["class"], type=o["type"], data=bytes.fromhex(o["data"])) for o in l["options"]]
        return GENEVE(**kw)
    if t == "gre":
        if "key" in l:
            kw["key_present"] = 1
            kw["key"] = l["key"]
        if l.get("checksum"):
            kw["chksum_present"] = 1
        opt("protocol", "proto")
        return GRE(**kw)
    if t == "mpls":
        opt("label"); opt("tc", "cos"); opt("ttl")
        return MPLS(**kw)
    raise ValueError(t)

def to_int(t, f, v):
    if isinstance(v, int):
        return v
    if f in ("src", "dst"):
        if t == "eth":
            return int(v.replace(":", ""), 16)
        return int(ipaddress.ip_address(v))
    return int(v, 0)

def from_int(t, f, n):
    if f in ("src", "dst"):
        if t == "eth":
            h = "%012x" % n
            return ":".join(h[i:i + 2] for i in range(0, 12, 2))
        return str(ipaddress.IPv4Address(n) if t == "ipv4" else ipaddress.IPv6Address(n))
    return n

def nth(layers, t, i):
    return [j for j, l in enumerate(layers) if l["type"] == t][i]

SWAP = {"src": "dst", "dst": "src", "sport": "dport", "dport": "sport"}

def tunnel_udp(layers, j):
    return layers[j]["type"] == "udp" and j + 1 < len(layers) and layers[j + 1]["type"] in ("vxlan", "geneve")

def reverse(layers):
    out = []
    for j, l in enumerate(layers):
        l = dict(l)
        if l["type"] in ("eth", "ipv4", "ipv6", "tcp") or (l["type"] == "udp" and not tunnel_udp(layers, j)):
            if l["type"] == "tcp":
                l.setdefault("sport", 20); l.setdefault("dport", 80)
            if l["type"] == "udp":
                l.setdefault("sport", 53); l.setdefault("dport", 53)
            for a, b in (("src", "dst"), ("sport", "dport")):
                va, vb = l.pop(a, None), l.pop(b, None)
                if vb is not None: l[a] = vb
                if va is not None: l[b] = va
        out.append(l)
    return out

for line in sys.stdin:
    job = json.loads(line)
    layers = [dict(l) for l in job["layers"]]
    k = job["k"]
    flow = k % job["flows"]
    sizes = IMIX if job["sizes"] == "imix" else job["sizes"]
    size = sizes[k % len(sizes)]
    values = []
    for v in job["vary"]:
        lt, rest = v["field"].split(".", 1)[0], v["field"].rsplit(".", 1)[1]
        t, idx = (lt.split("[")[0], int(lt.split("[")[1][:-1])) if "[" in lt else (lt, 0)
        j = nth(layers, t, idx)
        if v.get("op", "inc") == "inc":
            lo, hi = to_int(t, rest, v["from"]), to_int(t, rest, v["to"])
            n = lo + (flow * v.get("step", 1)) % (hi - lo + 1)
        else:
            n = job["random"][v["field"]]
        values.append((j, t, rest, from_int(t, rest, n)))
    if job["reverse"]:
        orig = layers
        for j, t, f, val in values:
            layers[j][f] = val
        layers = reverse(layers)
    else:
        for j, t, f, val in values:
            layers[j][f] = val
    p = layer(layers[0])
    for l in layers[1:]:
        p = p / layer(l)
    n = size - 4 - len(bytes(p))
    stamp = bytes.fromhex(job["stamp"])
    pay = b"\0" * (n - len(stamp)) + stamp
    if pay:
        p = p / Raw(pay)
    print(bytes(p).hex(), flush=True)
"#;

fn scapy_available() -> bool {
    Command::new("python3")
        .args([
            "-c",
            "import scapy.all, scapy.contrib.geneve, scapy.contrib.mpls",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs the script over `jobs` (one JSON object a line), returns its lines.
fn scapy(jobs: &[serde_json::Value]) -> Vec<String> {
    let mut child = Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    {
        let mut stdin = child.stdin.take().unwrap();
        for j in jobs {
            writeln!(stdin, "{j}").unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "scapy script failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The value of a field in a frame, read through the dissector.
fn field_value(frame: &[u8], f: &FieldRef) -> u128 {
    let t = Template::dissect(frame).unwrap();
    let l = t
        .layers
        .iter()
        .filter(|l| l.kind() == f.field.layer())
        .nth(f.index)
        .unwrap();
    let name = f.field.name();
    let mac = |m: &wire::EthernetAddress| m.0.iter().fold(0u128, |a, &b| (a << 8) | u128::from(b));
    match (l, name) {
        (Layer::Eth(e), "src") => mac(&e.src),
        (Layer::Eth(e), "dst") => mac(&e.dst),
        (Layer::Vlan(v), "vid") => v.vid.into(),
        (Layer::Vlan(v), "pcp") => v.pcp.into(),
        (Layer::Ipv4(p), "src") => p.src.to_bits().into(),
        (Layer::Ipv4(p), "dst") => p.dst.to_bits().into(),
        (Layer::Ipv4(p), "tos") => p.tos.into(),
        (Layer::Ipv4(p), "ttl") => p.ttl.into(),
        (Layer::Ipv6(p), "src") => p.src.to_bits(),
        (Layer::Ipv6(p), "dst") => p.dst.to_bits(),
        (Layer::Ipv6(p), "fl") => p.fl.into(),
        (Layer::Udp(u), "sport") => u.sport.unwrap().into(),
        (Layer::Udp(u), "dport") => u.dport.unwrap().into(),
        (Layer::Tcp(u), "sport") => u.sport.into(),
        (Layer::Tcp(u), "dport") => u.dport.into(),
        (Layer::Vxlan(v), "vni") => v.vni.into(),
        (Layer::Geneve(v), "vni") => v.vni.into(),
        (Layer::Gre(g), "key") => g.key.unwrap().into(),
        (Layer::Mpls(m), "label") => m.label.into(),
        other => panic!("{other:?}"),
    }
}

struct Case {
    name: &'static str,
    /// The `[[stream]]` body without name, ports and stamp.
    body: &'static str,
    /// Packets to compare.
    ks: &'static [u64],
}

const CASES: &[Case] = &[
    Case {
        name: "eth_ipv4_udp_64",
        body: r#"
frame_size = 64
layers = [
  { type = "eth", src = "8c:dc:d4:ab:58:48", dst = "8c:dc:d4:ab:5b:f0" },
  { type = "ipv4", src = "10.0.0.1", dst = "10.1.0.2" },
  { type = "udp", sport = 1024, dport = 2000 },
]
"#,
        ks: &[0],
    },
    Case {
        name: "scapy_defaults",
        body: r#"
frame_size = 77
layers = [
  { type = "eth", src = "00:00:00:00:00:01", dst = "00:00:00:00:00:02" },
  { type = "ipv4" },
  { type = "udp" },
]
"#,
        ks: &[0],
    },
    Case {
        name: "eth_vlan_ipv6_tcp",
        body: r#"
frame_size = 128
flows = 1000
layers = [
  { type = "eth", src = "52:54:00:12:34:01", dst = "52:54:00:12:34:02" },
  { type = "vlan", vid = 100, pcp = 5, dei = true },
  { type = "ipv6", src = "2001:db8::1", dst = "2001:db8::2", tc = 0x20, fl = 0x12345, hlim = 33 },
  { type = "tcp", sport = 40000, dport = 80, flags = "PA", seq = 1000, ack = 77, window = 512 },
]
vary = [
  { field = "ipv6.dst", op = "inc", from = "2001:db8::100", to = "2001:db8::1ff", step = 3 },
  { field = "tcp.sport", op = "random", from = 1024, to = 65535 },
]
"#,
        ks: &[0, 1, 999],
    },
    Case {
        name: "vxlan",
        body: r#"
frame_size = 128
flows = 1000
layers = [
  { type = "eth", src = "8c:dc:d4:ab:58:48", dst = "8c:dc:d4:ab:5b:f0" },
  { type = "ipv4", src = "10.1.2.9", dst = "10.1.2.8" },
  { type = "udp", sport = 49152 },
  { type = "vxlan", vni = 100 },
  { type = "eth", src = "52:54:00:a0:81:01", dst = "52:54:00:a0:91:02" },
  { type = "ipv4", src = "192.168.1.1", dst = "192.168.2.16" },
  { type = "udp", sport = 1024, dport = 2000 },
]
vary = [
  { field = "udp[1].sport", op = "inc", from = 1024, to = 61023 },
  { field = "ipv4[1].src", op = "inc", from = "192.168.1.1", to = "192.168.1.200" },
  { field = "udp.sport", op = "inc", from = 49152, to = 50151 },
]
"#,
        ks: &[0, 999],
    },
    Case {
        name: "seed002_geneve_vlan",
        body: r#"
frame_size = 128
flows = 1000
layers = [
  { type = "eth", src = "ec:0d:9a:44:2c:f5", dst = "3c:fd:fe:ee:4a:2c" },
  { type = "vlan", vid = 177 },
  { type = "ipv4", src = "172.17.2.160", dst = "172.17.2.60" },
  { type = "udp", sport = 57025, dport = 6081 },
  { type = "geneve", vni = 3, options = [ { class = 0x0102, type = 0x80, data = "00030002" } ] },
  { type = "eth", src = "fa:16:3e:e4:0a:cf", dst = "fa:16:3e:20:ab:56" },
  { type = "ipv4", src = "192.168.1.61", dst = "192.168.1.16" },
  { type = "udp", sport = 1024, dport = 2000 },
]
vary = [
  { field = "udp[1].sport", op = "inc", from = 1024, to = 61023 },
  { field = "geneve.vni", op = "random", from = 1, to = 4095 },
  { field = "eth[1].src", op = "inc", from = "fa:16:3e:00:00:00", to = "fa:16:3e:ff:ff:ff", step = 257 },
]
"#,
        ks: &[0, 999],
    },
    Case {
        name: "mplsogre",
        body: r#"
frame_size = 111
flows = 1000
layers = [
  { type = "eth", src = "8c:dc:d4:ab:58:48", dst = "8c:dc:d4:ab:5b:f0" },
  { type = "ipv4", src = "10.1.2.9", dst = "10.1.2.8" },
  { type = "gre", key = 0 },
  { type = "mpls", label = 812, ttl = 4 },
  { type = "mpls", label = 16, ttl = 64, tc = 3 },
  { type = "ipv4", src = "192.168.1.1", dst = "192.168.2.16" },
  { type = "udp", sport = 1024, dport = 2000 },
]
vary = [
  { field = "mpls.label", op = "inc", from = 812, to = 815 },
  { field = "gre.key", op = "inc", from = 0, to = 0xffffffff, step = 65537 },
  { field = "ipv4[1].dst", op = "random", from = "192.168.0.0", to = "192.168.255.255" },
]
"#,
        ks: &[0, 999],
    },
    Case {
        name: "ipv6_vxlan",
        body: r#"
frame_size = 150
flows = 1000
layers = [
  { type = "eth", src = "8c:dc:d4:ab:58:48", dst = "8c:dc:d4:ab:5b:f0" },
  { type = "ipv6", src = "2001:db8::a", dst = "2001:db8::b" },
  { type = "udp" },
  { type = "vxlan", vni = 0xffffff },
  { type = "eth", src = "52:54:00:12:34:01", dst = "52:54:00:12:34:02" },
  { type = "ipv4", src = "10.0.0.1", dst = "10.0.0.2", df = true, tos = 0xb8, ttl = 9, id = 4242 },
  { type = "udp", sport = 1, dport = 2, checksum = false },
]
vary = [
  { field = "vxlan.vni", op = "inc", from = 1, to = 1000 },
  { field = "ipv4.ttl", op = "random", from = 1, to = 255 },
]
"#,
        ks: &[0, 999],
    },
    Case {
        name: "qinq_imix",
        body: r#"
frame_size = "imix"
flows = 1000
layers = [
  { type = "eth", src = "8c:dc:d4:ab:58:48", dst = "8c:dc:d4:ab:5b:f0" },
  { type = "vlan", vid = 10, tpid = 0x88a8 },
  { type = "vlan", vid = 20, pcp = 3 },
  { type = "ipv4", src = "10.0.0.1", dst = "10.0.0.2" },
]
vary = [
  { field = "vlan[1].vid", op = "inc", from = 100, to = 4095 },
  { field = "ipv4.tos", op = "inc", from = 0, to = 255, step = 3 },
]
"#,
        ks: &[0, 1, 6, 11, 999],
    },
    Case {
        name: "gre_checksum_ipv6_inner",
        body: r#"
frame_size = [128, 131, 1518]
flows = 1000
layers = [
  { type = "eth", src = "8c:dc:d4:ab:58:48", dst = "8c:dc:d4:ab:5b:f0" },
  { type = "ipv4", src = "10.0.0.1", dst = "10.0.0.2" },
  { type = "gre", key = 9, checksum = true },
  { type = "ipv6", src = "fd00::1", dst = "fd00::2" },
  { type = "tcp", flags = 0x12 },
]
vary = [
  { field = "ipv6.src", op = "inc", from = "fd00::1", to = "fd00::ffff" },
  { field = "gre.key", op = "random", from = 0, to = 0xffffffff },
]
"#,
        ks: &[0, 1, 2, 999],
    },
    Case {
        name: "mpls_over_eth_geneve_ipv4",
        body: r#"
frame_size = 160
flows = 1000
layers = [
  { type = "eth", src = "8c:dc:d4:ab:58:48", dst = "8c:dc:d4:ab:5b:f0" },
  { type = "mpls", label = 100 },
  { type = "ipv4", src = "10.0.0.1", dst = "10.0.0.2" },
  { type = "udp", sport = 5000 },
  { type = "geneve", vni = 7, critical = true },
  { type = "ipv4", src = "192.168.0.1", dst = "192.168.0.2" },
  { type = "udp", sport = 7, dport = 9 },
]
vary = [
  { field = "udp[1].dport", op = "inc", from = 9, to = 1008 },
  { field = "ipv4.src", op = "random", from = "10.0.0.0", to = "10.255.255.255" },
]
"#,
        ks: &[0, 999],
    },
];

/// Compiles a case into its streams (two when `bi`).
fn compile(c: &Case, stamp: bool, bi: bool) -> Vec<Stream> {
    let text = format!(
        "{PORTS}[[stream]]\nname = \"{}\"\ntx = \"p0\"\nrx = \"p1\"\nstamp = {stamp}\ndirection = \"{}\"\n{}",
        c.name,
        if bi { "bi" } else { "uni" },
        c.body
    );
    match stream::parse(&text, Path::new(".")) {
        Ok(f) => f.streams,
        Err(e) => panic!(
            "{}: {}",
            c.name,
            e.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        ),
    }
}

/// Packets of a case, ours in hex and the scapy script's job for each.
fn jobs(c: &Case, stamped: bool, bi: bool) -> Vec<(u64, String, serde_json::Value)> {
    let body: toml::Table = toml::from_str(c.body).unwrap();
    let layers = serde_json::to_value(&body["layers"]).unwrap();
    let vary = body
        .get("vary")
        .map_or(serde_json::json!([]), |v| serde_json::to_value(v).unwrap());
    let flows = body.get("flows").and_then(|v| v.as_integer()).unwrap_or(1);
    let sizes = match &body["frame_size"] {
        toml::Value::Integer(n) => serde_json::json!([n]),
        other => serde_json::to_value(other).unwrap(),
    };
    let streams = compile(c, stamped, bi);
    let s = &streams[usize::from(bi)];
    let spec = s.frames.spec();
    let mut out = Vec::new();
    for &k in c.ks {
        let st = Stamp {
            stream: 0x0102,
            seq: k as u32 * 7 + 1,
            tx_ns: 0x1122_3344_5566_7788 ^ k,
        };
        let f = s.frames.frame(k, &st);
        // Random values as the generator drew them (from the forward stream), checked in range.
        let fwd = streams[0].frames.frame(k, &st);
        let mut random = serde_json::Map::new();
        for v in &spec.vary {
            if v.op == VaryOp::Random {
                let x = field_value(&fwd, &v.field);
                assert!(
                    (v.from.unwrap()..=v.to.unwrap()).contains(&x),
                    "{}: {} = {x} out of range",
                    c.name,
                    v.field
                );
                random.insert(v.field.to_string(), serde_json::json!(x as u64));
            }
        }
        let job = serde_json::json!({
            "layers": layers,
            "vary": vary,
            "flows": flows,
            "sizes": sizes,
            "k": k,
            "random": random,
            "reverse": bi,
            "stamp": if stamped { hex(&st.to_bytes()) } else { String::new() },
        });
        out.push((k, hex(&f), job));
    }
    out
}

/// Every case's packets against scapy's, in one run of the script.
fn check_all(stamped: bool, bi: bool) {
    let mut all = Vec::new();
    for c in CASES {
        for (k, ours, job) in jobs(c, stamped, bi) {
            all.push((c.name, k, ours, job));
        }
    }
    let theirs = scapy(&all.iter().map(|j| j.3.clone()).collect::<Vec<_>>());
    assert_eq!(theirs.len(), all.len());
    for ((name, k, a, _), b) in all.iter().zip(&theirs) {
        if a != b {
            let at = a
                .bytes()
                .zip(b.bytes())
                .position(|(x, y)| x != y)
                .unwrap_or(a.len().min(b.len()))
                / 2;
            panic!(
                "{name} (stamp {stamped}, reversed {bi}) packet {k}: differs from scapy at byte \
                 {at}\n ours:  {a}\n scapy: {b}"
            );
        }
    }
    eprintln!(
        "{} packets of {} descriptions byte-identical to scapy's",
        all.len(),
        CASES.len()
    );
}

macro_rules! skip_without_scapy {
    ($name:expr) => {
        if !scapy_available() {
            eprintln!("SKIP {}: scapy not installed (pip install scapy)", $name);
            return;
        }
    };
}

#[test]
fn frames_without_stamp_equal_scapys() {
    skip_without_scapy!("frames_without_stamp_equal_scapys");
    check_all(false, false);
}

#[test]
fn frames_with_stamp_equal_scapys() {
    skip_without_scapy!("frames_with_stamp_equal_scapys");
    check_all(true, false);
}

#[test]
fn reversed_frames_equal_scapys() {
    skip_without_scapy!("reversed_frames_equal_scapys");
    check_all(true, true);
}
