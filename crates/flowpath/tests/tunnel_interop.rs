//! Tunnels against real peers: the Linux kernel's VXLAN device (IPv4 and IPv6 underlay, UDP
//! checksum off and on) and Open vSwitch's userspace datapath (GENEVE with OVN's option
//! `{class=0x102,type=0x80,len=4}`, alone and beside a 32-byte option mapped to
//! `tun_metadata40`, GRE with key, with and without checksum, and MPLS over GRE
//! with `packet_type=legacy_l3`).
//!
//! `tests/data/interop/SCENARIO/` holds what the real peers did, recorded by
//! `scripts/gen-interop-fixtures` (its header documents every peer's exact setup): a real host
//! behind the peer pinged and talked TCP with a real host behind a stand-in for flowpath (the
//! same kind of peer, configured with flowpath's addresses, 10.1.2.8 / 8c:dc:d4:ab:5b:f0). Each
//! scenario has five tests; the first four need neither root nor a network:
//!
//! - `decap`: flowpath, in the stand-in's place, decapsulates the peer's underlay frames; its
//!   host port must emit exactly the inner frames the stand-in delivered to its host.
//! - `encap`: flowpath encapsulates the frames the stand-in's host sent; every frame must equal
//!   the stand-in's own encapsulation except what a sender chooses (IPv4 ID, UDP source port,
//!   IPv6 flow label) and the checksums, which are verified instead.
//! - `both_ways`: both at once through one switch; the same frames must come out.
//! - `encap_decodes`: tshark decodes every encapsulated frame the same way as the stand-in's,
//!   with no warning (checksums validated), and scapy dissects it into the same layers and
//!   computes the same checksums and lengths. Says so and leaves out the checks of a tool that
//!   is missing (skips when both are).
//! - `live`: the real peer, built by `gen-interop-fixtures peer-up`: its host pings the host
//!   behind flowpath (a request a second until two are answered), flowpath decapsulates the
//!   first two requests captured on the underlay veth, scapy answers them, flowpath
//!   encapsulates the replies, which are replayed into the peer's underlay veth: the peer must
//!   deliver them (byte for byte) and the ping socket count them.
//!   Then a TCP server on the peer's host accepts a connection opened by scapy through flowpath
//!   (SYN encapsulated by flowpath, SYN-ACK decapsulated by flowpath, ACK and data
//!   encapsulated by flowpath) and must receive the data. Skips, saying why, when not root or a
//!   tool or kernel feature is missing.
//!
//! flowpath runs as a user runs it: `flowpath run --until-idle` with a TOML configuration in
//! OVS's model (`br-phy` with the underlay pcap port, `br-int` with the tunnel port and the
//! host's pcap port `vm0`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_flowpath")
}

fn data(scenario: &str, file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/interop")
        .join(scenario)
        .join(file)
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/gen-interop-fixtures")
}

const FP_MAC: &str = "8c:dc:d4:ab:5b:f0";
const PEER_MAC: &str = "8c:dc:d4:ab:58:48";
/// The 32-byte option of `geneve_wide` the peer sends, and the one flowpath sends.
const PEER_WIDE: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20";
const FP_WIDE: &str = "0xa1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0";
const A_MAC: &str = "52:54:00:12:34:01";
const B_MAC: &str = "52:54:00:12:34:02";
const A_IP: &str = "192.168.100.1";
const B_IP: &str = "192.168.100.2";

/// How a scenario's peer and flowpath's tunnel port are set up (see the script's header).
struct Scenario {
    name: &'static str,
    /// flowpath's port type: "vxlan", "geneve" or "gre".
    tunnel: &'static str,
    /// The peer is the kernel's VXLAN device (else OVS).
    kernel: bool,
    v6: bool,
    csum: bool,
    /// MPLS over GRE without Ethernet (`packet_type=legacy_l3`).
    l3: bool,
    /// tshark's names of the tunnel layers (in `frame.protocols`).
    tshark_proto: &'static str,
}

const fn sc(
    name: &'static str,
    tunnel: &'static str,
    kernel: bool,
    v6: bool,
    csum: bool,
    l3: bool,
) -> Scenario {
    Scenario {
        name,
        tunnel,
        kernel,
        v6,
        csum,
        l3,
        tshark_proto: if l3 { "gre:mpls" } else { tunnel },
    }
}

/// The scenarios of `scripts/gen-interop-fixtures`.
const SCENARIOS: &[Scenario] = &[
    sc("vxlan", "vxlan", true, false, false, false),
    sc("vxlan_csum", "vxlan", true, false, true, false),
    sc("vxlan6", "vxlan", true, true, true, false),
    sc("geneve", "geneve", false, false, false, false),
    sc("geneve_csum", "geneve", false, false, true, false),
    sc("geneve_wide", "geneve", false, false, false, false),
    sc("gre", "gre", false, false, false, false),
    sc("gre_csum", "gre", false, false, true, false),
    sc("mplsogre", "gre", false, false, false, true),
];

fn scenario(name: &str) -> &'static Scenario {
    SCENARIOS
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("unknown scenario {name}"))
}

impl Scenario {
    /// flowpath's configuration in the stand-in's place: `under_rx` / `vm_rx` are the
    /// captures its underlay and host ports read (none: the port only writes).
    fn config(&self, under_rx: Option<&Path>, vm_rx: Option<&Path>) -> String {
        let (local, remote) = if self.v6 {
            ("fd01:2::8/64", "fd01:2::9")
        } else {
            ("10.1.2.8/24", "10.1.2.9")
        };
        let mut opts = format!("remote_ip = \"{remote}\"");
        if self.l3 {
            opts += ", packet_type = \"legacy_l3\"";
        } else {
            opts += ", key = \"flow\"";
        }
        if self.csum {
            opts += ", csum = true";
        }
        if self.kernel {
            // The kernel's VXLAN device leaves DF clear; OVS (and flowpath) set it by default.
            opts += ", df_default = false";
        }
        let (rx, tx) = if self.l3 {
            (
                format!(
                    "in_port=tun0,mpls,mpls_label=100,actions=pop_mpls:0x0800,mod_dl_src:{A_MAC},mod_dl_dst:{B_MAC},output:vm0"
                ),
                "in_port=vm0,ip,actions=push_mpls:0x8847,set_field:200->mpls_label,output:tun0"
                    .to_owned(),
            )
        } else if self.name == "geneve_wide" {
            (
                format!(
                    "in_port=tun0,tun_id=100,tun_metadata0=0x10002,tun_metadata40={PEER_WIDE},actions=output:vm0"
                ),
                format!(
                    "in_port=vm0,actions=set_field:100->tun_id,set_field:0x20001->tun_metadata0,set_field:{FP_WIDE}->tun_metadata40,output:tun0"
                ),
            )
        } else if self.tunnel == "geneve" {
            (
                "in_port=tun0,tun_id=100,tun_metadata0=0x10002,actions=output:vm0".to_owned(),
                "in_port=vm0,actions=set_field:100->tun_id,set_field:0x20001->tun_metadata0,output:tun0"
                    .to_owned(),
            )
        } else {
            (
                "in_port=tun0,tun_id=100,actions=output:vm0".to_owned(),
                "in_port=vm0,actions=set_field:100->tun_id,output:tun0".to_owned(),
            )
        };
        let tlv = if self.name == "geneve_wide" {
            "tlv-map = [\"{class=0x102,type=0x80,len=4}->tun_metadata0,{class=0xffff,type=0x1,len=32}->tun_metadata40\"]\n"
        } else if self.tunnel == "geneve" {
            "tlv-map = [\"{class=0x102,type=0x80,len=4}->tun_metadata0\"]\n"
        } else {
            ""
        };
        let pcap = |rx: Option<&Path>, tx: &str| match rx {
            Some(p) => format!("{{ rx_pcap = \"{}\", tx_pcap = \"{tx}\" }}", p.display()),
            None => format!("{{ tx_pcap = \"{tx}\" }}"),
        };
        format!(
            r#"[[bridge]]
name = "br-phy"
hwaddr = "{FP_MAC}"
ip = ["{local}"]
flows = ["actions=NORMAL"]

[[bridge.port]]
name = "p0"
type = "pcap"
options = {under}

[[bridge]]
name = "br-int"
{tlv}flows = ["{rx}",
         "{tx}"]

[[bridge.port]]
name = "tun0"
type = "{tunnel}"
options = {{ {opts} }}

[[bridge.port]]
name = "vm0"
type = "pcap"
options = {vm}

[tunnel]
neigh = ["br-phy {remote} {PEER_MAC}"]
"#,
            under = pcap(under_rx, "under_out.pcap"),
            vm = pcap(vm_rx, "vm_out.pcap"),
            tunnel = self.tunnel,
        )
    }
}

/// A scratch directory, removed on drop.
struct Dir(PathBuf);
impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("flowpath-interop-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn frames(p: &Path) -> Vec<Vec<u8>> {
    netdev::pcap::read_file(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .into_iter()
        .map(|r| r.data)
        .collect()
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut w = netdev::pcap::PcapWriter::create(path).unwrap();
    for f in frames {
        w.write(0, f).unwrap();
    }
    w.finish().unwrap();
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Waits for `child`, killing it and failing if it has not exited after `limit` (a guard
/// against a hang, not a measurement).
fn wait_or_kill(
    mut child: Child,
    limit: Duration,
    what: &str,
    context: &dyn Fn() -> String,
) -> Output {
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "{what} still running after {limit:?}, killed:\n{}\n{}",
                text(&o),
                context()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Runs flowpath over the captures of `cfg` until they are exhausted.
fn run_flowpath(d: &Dir, cfg: &str) {
    let path = d.path("sw.toml");
    std::fs::write(&path, cfg).unwrap();
    let child = Command::new(bin())
        .args(["run", "--config", path.to_str().unwrap(), "--rundir"])
        .arg(d.path("run"))
        .arg("--until-idle")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait_or_kill(
        child,
        Duration::from_secs(120),
        "flowpath run --until-idle",
        &|| format!("configuration:\n{cfg}"),
    );
    assert!(
        o.status.success(),
        "flowpath run failed:\n{}\nconfiguration:\n{cfg}",
        text(&o)
    );
}

/// flowpath decapsulates `underlay` (frames from the peer); returns what `vm0` emitted.
fn decap_with_flowpath(s: &Scenario, d: &Dir, underlay: &Path) -> Vec<Vec<u8>> {
    let _ = std::fs::remove_file(d.path("vm_out.pcap"));
    run_flowpath(d, &s.config(Some(underlay), None));
    frames(&d.path("vm_out.pcap"))
}

/// flowpath encapsulates `inner` (frames of the host behind it); returns what `p0` emitted.
fn encap_with_flowpath(s: &Scenario, d: &Dir, inner: &Path) -> Vec<Vec<u8>> {
    let _ = std::fs::remove_file(d.path("under_out.pcap"));
    run_flowpath(d, &s.config(None, Some(inner)));
    frames(&d.path("under_out.pcap"))
}

// ---------------------------------------------------------------------------------------------
// Fixture tests.

/// The innermost IPv4 packet's flow: addresses, protocol, TOS (DSCP and ECN: a tunnel packet's
/// outer TOS, which carries the inner ECN field, is part of its megaflow, as in OVS), and the
/// ICMP echo identifier or the TCP/UDP ports (the packet is the frame's tail, its total length
/// reaching the end); None when there is none.
fn inner_flow(f: &[u8]) -> Option<Vec<u8>> {
    let at = (14..f.len().saturating_sub(20)).rev().find(|&o| {
        f[o] == 0x45 && usize::from(u16::from_be_bytes([f[o + 2], f[o + 3]])) == f.len() - o
    })?;
    let ip = &f[at..];
    let l4 = ip.get(20..24).unwrap_or(&[]);
    let id = match ip[9] {
        1 => l4.get(4..6).unwrap_or(&[]),
        _ => l4,
    };
    Some([&ip[12..20], &[ip[9], ip[1]], id].concat())
}

/// `got` in the order of `want`: each wanted frame takes the first unused frame `same` pairs
/// with it, the rest follow in their order. A switch may reorder packets of different flows
/// (those that miss the cache go through the slow path after the burst's hits, in flowpath as
/// in OVS), not those of one flow: a reordering inside a flow (`inner_flow`) is reported.
fn in_flow_order(
    got: &[Vec<u8>],
    want: &[Vec<u8>],
    same: impl Fn(&[u8], &[u8]) -> bool,
) -> (Vec<Vec<u8>>, Vec<String>) {
    let (order, bad) = flow_order(got, want, same);
    (order.into_iter().map(|i| got[i].clone()).collect(), bad)
}

/// [`in_flow_order`] as indices into `got`.
fn flow_order(
    got: &[Vec<u8>],
    want: &[Vec<u8>],
    same: impl Fn(&[u8], &[u8]) -> bool,
) -> (Vec<usize>, Vec<String>) {
    let mut used = vec![false; got.len()];
    let mut order = Vec::new();
    for w in want {
        if let Some(i) = (0..got.len()).find(|&i| !used[i] && same(&got[i], w)) {
            used[i] = true;
            order.push(i);
        }
    }
    let mut bad = Vec::new();
    for (k, &i) in order.iter().enumerate() {
        if let Some(&j) = order[..k]
            .iter()
            .find(|&&j| j > i && inner_flow(&got[j]) == inner_flow(&got[i]))
        {
            bad.push(format!(
                "frames {} and {} of one flow came out in the other order",
                i + 1,
                j + 1
            ));
        }
    }
    order.extend((0..got.len()).filter(|&i| !used[i]));
    (order, bad)
}

/// Whether flowpath's encapsulation `g` is the peer's `w` up to what a sender chooses.
fn same_encap(g: &[u8], w: &[u8]) -> bool {
    compare_outer(g, w).is_empty() && outer_checksums(g).is_empty()
}

/// Differences between what flowpath's host port emitted and what the stand-in delivered.
fn decap_differences(name: &str, got: &[Vec<u8>]) -> Vec<String> {
    let want = frames(&data(name, "inner_from_peer.pcap"));
    let (got, mut bad) = in_flow_order(got, &want, |g, w| g == w);
    let got = &got[..];
    if got.len() != want.len() {
        bad.push(format!(
            "{} frames out of vm0, the stand-in delivered {}",
            got.len(),
            want.len()
        ));
    }
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        if g != w {
            bad.push(format!(
                "frame {}:\n  got  {}\n  want {}",
                i + 1,
                hex(g),
                hex(w)
            ));
        }
    }
    bad
}

fn decap(name: &str) {
    let s = scenario(name);
    let d = Dir::new(&format!("decap-{name}"));
    let got = decap_with_flowpath(s, &d, &data(name, "underlay_from_peer.pcap"));
    let bad = decap_differences(name, &got);
    assert!(
        bad.is_empty(),
        "{name}: decapsulating underlay_from_peer.pcap:\n{}",
        bad.join("\n")
    );
}

/// Offsets in an underlay frame.
struct Outer {
    v6: bool,
    /// Start of UDP or GRE.
    l4: usize,
    proto: u8,
}

fn outer(f: &[u8]) -> Result<Outer, String> {
    if f.len() < 14 {
        return Err("shorter than Ethernet".into());
    }
    match u16::from_be_bytes([f[12], f[13]]) {
        0x0800 if f.len() >= 34 => Ok(Outer {
            v6: false,
            l4: 14 + usize::from(f[14] & 15) * 4,
            proto: f[23],
        }),
        0x86dd if f.len() >= 54 => Ok(Outer {
            v6: true,
            l4: 54,
            proto: f[20],
        }),
        t => Err(format!("outer ethertype {t:#06x} (or truncated)")),
    }
}

/// The ones' complement sum of `parts`, folded (0xffff over data that includes a correct
/// checksum).
fn ones_sum(parts: &[&[u8]]) -> u16 {
    let all: Vec<u8> = parts.concat();
    let mut s: u32 = all
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Checks the outer checksums of an underlay frame: IPv4 header, UDP (when not zero; zero is
/// wrong over IPv6), GRE (when present).
fn outer_checksums(f: &[u8]) -> Vec<String> {
    let mut bad = Vec::new();
    let Ok(o) = outer(f) else {
        return bad;
    };
    if !o.v6 && ones_sum(&[&f[14..o.l4]]) != 0xffff {
        bad.push("IPv4 header checksum is wrong".to_owned());
    }
    let seg = &f[o.l4..];
    match o.proto {
        17 if seg.len() >= 8 => {
            let c = u16::from_be_bytes([seg[6], seg[7]]);
            if c == 0 && o.v6 {
                bad.push("UDP checksum zero over IPv6".to_owned());
            }
            if c != 0 {
                let len = (seg.len() as u32).to_be_bytes();
                let pseudo: Vec<u8> = if o.v6 {
                    [&f[22..54], &len[..], &[0, 0, 0, 17]].concat()
                } else {
                    [&f[26..34], &[0, 17], &len[2..]].concat()
                };
                if ones_sum(&[&pseudo, seg]) != 0xffff {
                    bad.push(format!("UDP checksum {c:#06x} is wrong"));
                }
            }
            if u16::from_be_bytes([seg[4], seg[5]]) as usize != seg.len() {
                bad.push("UDP length is not the segment's".to_owned());
            }
        }
        47 if seg.len() >= 4 && seg[0] & 0x80 != 0 && ones_sum(&[seg]) != 0xffff => {
            bad.push("GRE checksum is wrong".to_owned());
        }
        _ => {}
    }
    bad
}

/// Compares flowpath's encapsulation `g` with the real stand-in's `w` of the same inner frame.
fn compare_outer(g: &[u8], w: &[u8]) -> Vec<String> {
    let mut bad = Vec::new();
    let (go, wo) = match (outer(g), outer(w)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) => return vec![e],
        (_, Err(e)) => return vec![format!("reference: {e}")],
    };
    // The bytes `r` of both frames under `mask` (repeated), if they differ.
    let field = |name: &str, r: std::ops::Range<usize>, mask: &[u8]| {
        let pick = |f: &[u8]| -> Vec<u8> {
            f.get(r.clone())
                .unwrap_or(&[])
                .iter()
                .zip(mask.iter().cycle())
                .map(|(b, m)| b & m)
                .collect()
        };
        let (a, b) = (pick(g), pick(w));
        if a == b {
            return None;
        }
        if a.len().max(b.len()) <= 16 {
            return Some(format!("{name}: got {}, want {}", hex(&a), hex(&b)));
        }
        // Long: where they start to differ, and 16 bytes from there.
        let at = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        let window = |v: &[u8]| hex(&v[at.min(v.len())..(at + 16).min(v.len())]);
        Some(format!(
            "{name} ({} bytes, want {}): from frame byte {}: got {}, want {}",
            a.len(),
            b.len(),
            r.start + at,
            window(&a),
            window(&b)
        ))
    };
    bad.extend(field("Ethernet header", 0..14, &[0xff]));
    if wo.v6 {
        bad.extend(field(
            "IPv6 version and traffic class",
            14..16,
            &[0xff, 0xf0],
        ));
        bad.extend(field("IPv6 payload length", 18..20, &[0xff]));
        bad.extend(field("IPv6 next header", 20..21, &[0xff]));
        bad.extend(field("IPv6 hop limit", 21..22, &[0xff]));
        bad.extend(field("IPv6 source", 22..38, &[0xff]));
        bad.extend(field("IPv6 destination", 38..54, &[0xff]));
    } else {
        bad.extend(field("IPv4 version, IHL and TOS", 14..16, &[0xff]));
        bad.extend(field("IPv4 total length", 16..18, &[0xff]));
        bad.extend(field("IPv4 flags and fragment offset", 20..22, &[0xff]));
        bad.extend(field("IPv4 TTL", 22..23, &[0xff]));
        bad.extend(field("IPv4 protocol", 23..24, &[0xff]));
        bad.extend(field("IPv4 source", 26..30, &[0xff]));
        bad.extend(field("IPv4 destination", 30..34, &[0xff]));
        bad.extend(field("IPv4 options", 34..wo.l4, &[0xff]));
    }
    let l4 = wo.l4;
    if go.l4 != l4 || go.proto != wo.proto {
        bad.push(format!(
            "outer protocol {} at {}, want {} at {l4}",
            go.proto, go.l4, wo.proto
        ));
        return bad;
    }
    match wo.proto {
        17 => {
            bad.extend(field("UDP destination port", l4 + 2..l4 + 4, &[0xff]));
            bad.extend(field("UDP length", l4 + 4..l4 + 6, &[0xff]));
            let zero = |f: &[u8]| f.get(l4 + 6..l4 + 8) == Some(&[0, 0][..]);
            if zero(g) != zero(w) {
                bad.push(format!(
                    "UDP checksum: got {}, the peer sends {}",
                    if zero(g) { "none" } else { "one" },
                    if zero(w) { "none" } else { "one" }
                ));
            }
            if g.get(l4..l4 + 2) == Some(&[0, 0][..]) {
                bad.push("UDP source port 0".to_owned());
            }
            bad.extend(field(
                "tunnel header and payload",
                l4 + 8..w.len().max(g.len()),
                &[0xff],
            ));
        }
        _ => {
            bad.extend(field("GRE flags and protocol", l4..l4 + 4, &[0xff]));
            // The checksum (when present) is verified rather than compared.
            let rest = if w[l4] & 0x80 != 0 { l4 + 6 } else { l4 + 4 };
            bad.extend(field(
                "GRE fields and payload",
                rest..w.len().max(g.len()),
                &[0xff],
            ));
        }
    }
    bad
}

/// Differences between flowpath's underlay output and the stand-in's encapsulation of the
/// same frames, and wrong checksums.
fn encap_differences(name: &str, got: &[Vec<u8>]) -> Vec<String> {
    let want = frames(&data(name, "underlay_to_peer.pcap"));
    let (got, mut bad) = in_flow_order(got, &want, same_encap);
    let got = &got[..];
    if got.len() != want.len() {
        bad.push(format!(
            "{} frames out of p0, the stand-in sent {}",
            got.len(),
            want.len()
        ));
    }
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let mut b = compare_outer(g, w);
        b.extend(outer_checksums(g));
        if !b.is_empty() {
            bad.push(format!(
                "frame {}: {}\n  got  {}\n  want {}",
                i + 1,
                b.join("; "),
                hex(g),
                hex(w)
            ));
        }
    }
    bad
}

fn encap(name: &str) {
    let s = scenario(name);
    let d = Dir::new(&format!("encap-{name}"));
    let got = encap_with_flowpath(s, &d, &data(name, "inner_to_peer.pcap"));
    let bad = encap_differences(name, &got);
    assert!(
        bad.is_empty(),
        "{name}: encapsulating inner_to_peer.pcap (compared with the real peer's \
         underlay_to_peer.pcap):\n{}",
        bad.join("\n")
    );
}

/// Both directions through one switch at once: the same frames come out.
fn both_ways(name: &str) {
    let s = scenario(name);
    let d = Dir::new(&format!("both-{name}"));
    run_flowpath(
        &d,
        &s.config(
            Some(&data(name, "underlay_from_peer.pcap")),
            Some(&data(name, "inner_to_peer.pcap")),
        ),
    );
    let mut bad = decap_differences(name, &frames(&d.path("vm_out.pcap")));
    bad.extend(encap_differences(name, &frames(&d.path("under_out.pcap"))));
    assert!(
        bad.is_empty(),
        "{name}: both directions at once:\n{}",
        bad.join("\n")
    );
}

fn have(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether python3 has scapy, asked once per test binary: importing all of scapy takes more
/// than a second of a core.
fn have_scapy() -> bool {
    static HAVE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAVE.get_or_init(|| {
        Command::new("python3")
            .args(["-c", "import scapy.all"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// `frame.protocols` of every frame of a capture, and the warnings tshark has about them.
fn tshark(p: &Path) -> (Vec<String>, Vec<String>) {
    let run = |extra: &[&str]| {
        let o = Command::new("tshark")
            .args(["-n", "-r"])
            .arg(p)
            .args([
                "-o",
                "ip.check_checksum:TRUE",
                "-o",
                "udp.check_checksum:TRUE",
                "-o",
                "tcp.check_checksum:TRUE",
                // The captures hold one direction of each conversation.
                "-o",
                "tcp.analyze_sequence_numbers:FALSE",
            ])
            .args(extra)
            .output()
            .expect("run tshark");
        assert!(o.status.success(), "tshark: {}", text(&o));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let protocols = run(&["-T", "fields", "-e", "frame.protocols"]);
    let warnings = run(&[
        "-Y",
        "_ws.expert.severity >= \"Warning\" || _ws.malformed",
        "-T",
        "fields",
        "-e",
        "frame.number",
        "-e",
        "_ws.expert.message",
    ]);
    (protocols, warnings)
}

/// Scapy dissects a capture's frames into the layers `chain` starts with, and rebuilding each
/// frame with every checksum and length left to scapy gives the same bytes.
const SCAPY_CHECK: &str = r#"
import sys
from scapy.all import rdpcap, raw, Ether, IP, IPv6, UDP, TCP, ICMP, GRE, load_contrib
load_contrib("geneve")
load_contrib("mpls")
path, chain = sys.argv[1], sys.argv[2].split("/")
bad = []
for n, p in enumerate(rdpcap(path), 1):
    orig = raw(p)
    q = Ether(orig)
    names = [type(l).__name__ for l in q.iterpayloads()]
    if names[:len(chain)] != chain or not ({"ICMP", "TCP"} & set(names)) or "Padding" in names:
        bad.append(f"frame {n}: scapy dissects {'/'.join(names)}, want {'/'.join(chain)}/ICMP|TCP")
        continue
    for l in q.iterpayloads():
        if isinstance(l, (IP, TCP, ICMP)) or (isinstance(l, UDP) and l.chksum != 0):
            l.chksum = None
        if isinstance(l, GRE) and l.chksum_present:
            l.chksum = None
        if isinstance(l, (IP, UDP)):
            l.len = None
        if isinstance(l, IPv6):
            l.plen = None
    if raw(q) != orig:
        r = Ether(raw(q))
        diffs = [f"{type(a).__name__}.{f}: {a.getfieldval(f)!r}, scapy computes {b.getfieldval(f)!r}"
                 for a, b in zip(Ether(orig).iterpayloads(), r.iterpayloads())
                 for f in ("chksum", "len", "plen") if f in a.fields and a.getfieldval(f) != b.getfieldval(f)]
        bad.append(f"frame {n}: " + ("; ".join(diffs) or "rebuilt bytes differ"))
print("\n".join(bad))
"#;

/// The layers scapy must dissect a frame of `s` into (before ICMP or TCP).
fn scapy_chain(s: &Scenario) -> String {
    let ip = if s.v6 { "IPv6" } else { "IP" };
    match (s.tunnel, s.l3) {
        (_, true) => format!("Ether/{ip}/GRE/MPLS/IP"),
        ("vxlan", _) => format!("Ether/{ip}/UDP/VXLAN/Ether/IP"),
        ("geneve", _) => format!("Ether/{ip}/UDP/GENEVE/Ether/IP"),
        _ => format!("Ether/{ip}/GRE/Ether/IP"),
    }
}

fn encap_decodes(name: &str) {
    let s = scenario(name);
    let tshark_ok = have("tshark", "--version");
    let scapy_ok = have_scapy();
    if !tshark_ok && !scapy_ok {
        eprintln!(
            "SKIP {name}::encap_decodes: neither tshark (apt-get install tshark) nor python3 \
             with scapy (pip install scapy) is installed"
        );
        return;
    }
    let d = Dir::new(&format!("decode-{name}"));
    let got = encap_with_flowpath(s, &d, &data(name, "inner_to_peer.pcap"));
    assert!(!got.is_empty(), "{name}: flowpath encapsulated nothing");
    let out = d.path("under_out.pcap");
    let mut bad = Vec::new();
    if tshark_ok {
        let (protocols, warnings) = tshark(&out);
        let (reference, _) = tshark(&data(name, "underlay_to_peer.pcap"));
        // Frame by frame in the peer's order (flows may come out in another).
        let (order, _) = flow_order(
            &got,
            &frames(&data(name, "underlay_to_peer.pcap")),
            same_encap,
        );
        let protocols: Vec<String> = order
            .iter()
            .filter_map(|&i| protocols.get(i).cloned())
            .collect();
        for (i, (g, w)) in protocols.iter().zip(&reference).enumerate() {
            if g != w || !g.contains(&format!(":{}:", s.tshark_proto)) {
                bad.push(format!(
                    "tshark: frame {} decodes as {g}, the peer's as {w}",
                    i + 1
                ));
            }
        }
        bad.extend(warnings.iter().map(|w| format!("tshark warns: frame {w}")));
    } else {
        eprintln!("{name}::encap_decodes: tshark is not installed, only scapy checks");
    }
    if scapy_ok {
        let o = Command::new("python3")
            .args(["-c", SCAPY_CHECK])
            .arg(&out)
            .arg(scapy_chain(s))
            .output()
            .unwrap();
        assert!(o.status.success(), "scapy: {}", text(&o));
        bad.extend(
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| format!("scapy: {l}")),
        );
    } else {
        eprintln!("{name}::encap_decodes: python3 has no scapy, only tshark checks");
    }
    assert!(
        bad.is_empty(),
        "{name}: flowpath's encapsulated frames:\n{}",
        bad.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Live tests.

/// Helpers run with python3 inside the namespaces: real sockets on the peer's host, scapy for
/// the host behind flowpath (only the modules of the layers it builds and reads: all of scapy
/// takes three times as long to import, and a live test runs the helper seven times).
const LIVE_HELPER: &str = r#"
import socket, struct, sys, time
cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "ping":   # DST N: echo requests through a ping socket, one a second, until N answered
    dst, n = args[0], int(args[1])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    s.settimeout(0.2)
    got, seq = set(), 0
    while len(got) < n and seq < 120:
        seq += 1
        s.sendto(struct.pack("!BBHHH", 8, 0, 0, 0, seq) + b"flowpath interop", (dst, 0))
        if seq == 1:
            print("sent", flush=True)
        end = time.monotonic() + 1
        while len(got) < n and time.monotonic() < end:
            try:
                d, _ = s.recvfrom(2048)
            except socket.timeout:
                continue
            if d[0] == 0:
                got.add(struct.unpack("!H", d[6:8])[0])
    print("replies", len(got), flush=True)
elif cmd == "server":   # ADDR PORT: accept one connection, print the line received
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((args[0], int(args[1])))
    ls.listen(1)
    ls.settimeout(120)
    print("listening", flush=True)
    c, peer = ls.accept()
    c.settimeout(120)
    got = b""
    while not got.endswith(b"\n"):
        d = c.recv(100)
        if not d:
            break
        got += d
    print("received", got.decode(errors="replace").strip(), flush=True)
else:
    from scapy.layers.inet import ICMP, IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.sendrecv import sendp
    from scapy.utils import rdpcap, wrpcap
    if cmd == "replies":   # IN OUT: echo replies to the echo requests of IN
        out = []
        for p in rdpcap(args[0]):
            e, ip, ic = p[Ether], p[IP], p[ICMP]
            out.append(Ether(src=e.dst, dst=e.src) / IP(src=ip.dst, dst=ip.src, flags="DF")
                       / ICMP(type=0, id=ic.id, seq=ic.seq) / bytes(ic.payload))
        wrpcap(args[1], out)
    elif cmd == "tcp":   # OUT SMAC DMAC SRC DST SPORT DPORT FLAGS SEQ ACK [DATA]
        o, smac, dmac, src, dst, sp, dp, fl, seq, ack = args[:10]
        p = (Ether(src=smac, dst=dmac) / IP(src=src, dst=dst, flags="DF")
             / TCP(sport=int(sp), dport=int(dp), flags=fl, seq=int(seq), ack=int(ack),
                   window=64240, options=[("MSS", 1460)] if fl == "S" else []))
        if len(args) > 10:
            p = p / (args[10] + "\n").encode()
        wrpcap(o, [p])
    elif cmd == "send":   # PCAP IFACE
        sendp(rdpcap(args[0]), iface=args[1], verbose=0)
"#;

/// Why a live test cannot run here, if it cannot.
fn live_missing(s: &Scenario, index: usize) -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("needs root (network namespaces, veth, tcpdump)".into());
    }
    for (tool, arg, pkg) in [
        ("ip", "-V", "iproute2"),
        ("ethtool", "--version", "ethtool"),
        ("tcpdump", "--version", "tcpdump"),
    ] {
        if !have(tool, arg) {
            return Some(format!("{tool} is not installed (apt-get install {pkg})"));
        }
    }
    if !have_scapy() {
        return Some("python3 with scapy is not installed (pip install scapy)".into());
    }
    if !s.kernel {
        for tool in [
            "ovsdb-server",
            "ovs-vswitchd",
            "ovs-vsctl",
            "ovs-ofctl",
            "ovs-appctl",
        ] {
            if !have(tool, "--version") {
                return Some(format!(
                    "{tool} is not installed (apt-get install openvswitch-switch)"
                ));
            }
        }
    }
    // Namespaces and, for the kernel peer, its VXLAN device.
    let ns = format!("fpi-probe-{}-{index}", std::process::id());
    if !have_cmd(&["ip", "netns", "add", &ns]) {
        return Some("cannot create a network namespace".into());
    }
    let vxlan = !s.kernel
        || have_cmd(&[
            "ip", "-n", &ns, "link", "add", "vx0", "type", "vxlan", "id", "1", "dstport", "4789",
        ]);
    have_cmd(&["ip", "netns", "del", &ns]);
    (!vxlan).then(|| "the kernel has no VXLAN devices".into())
}

fn have_cmd(argv: &[&str]) -> bool {
    Command::new(argv[0])
        .args(&argv[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The real peer, built by `gen-interop-fixtures peer-up`; torn down on drop.
struct Peer {
    tag: String,
    vars: Vec<(String, String)>,
}

impl Peer {
    fn up(s: &Scenario, tag: &str) -> Peer {
        let o = Command::new(script())
            .args(["peer-up", s.name, tag])
            .output()
            .unwrap();
        // Whatever happened, a Peer exists now so that drop cleans up.
        let p = Peer {
            tag: tag.to_owned(),
            vars: String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        };
        assert!(
            o.status.success(),
            "peer-up {} failed:\n{}",
            s.name,
            text(&o)
        );
        p
    }
    fn var(&self, k: &str) -> &str {
        self.vars
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("peer-up printed no {k}"))
    }
}

impl Peer {
    /// The counters of every device and, for OVS, its datapath flows: what a failure needs.
    fn state(&self) -> String {
        let mut out = String::new();
        for k in ["HOST_NS", "PEER_NS", "FP_NS"] {
            let o = in_ns(self.var(k), &["ip", "-s", "link"]).output().unwrap();
            out += &format!("{k} {}:\n{}", self.var(k), text(&o));
        }
        if let Some((_, ctl)) = self.vars.iter().find(|(k, _)| k == "OVS_CTL") {
            for cmd in ["dpctl/dump-flows", "tnl/neigh/show", "ovs/route/show"] {
                let o = Command::new("ovs-appctl")
                    .args(["-t", ctl, cmd])
                    .output()
                    .unwrap();
                out += &format!("ovs-appctl {cmd}:\n{}", text(&o));
            }
        }
        out
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .args(["peer-down", &self.tag])
            .output();
    }
}

/// Removes the peers of test processes that no longer exist (killed: a Ctrl-C runs no
/// destructor). Their tags are `fpl<pid>-<index>`, their directories `/tmp/fpi-<tag>`.
fn sweep_stale_peers() {
    let Ok(entries) = std::fs::read_dir("/tmp") else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(tag) = name.strip_prefix("fpi-") else {
            continue;
        };
        let pid = tag
            .strip_prefix("fpl")
            .and_then(|t| t.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok());
        if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = Command::new(script()).args(["peer-down", tag]).output();
        }
    }
}

/// A background process in a namespace, killed on drop.
struct Bg(Option<Child>);

impl Bg {
    /// Waits for the process; if it hangs, fails with the state of `peer`.
    fn finish(mut self, what: &str, peer: &Peer) -> Output {
        wait_or_kill(
            self.0.take().unwrap(),
            Duration::from_secs(90),
            what,
            &|| peer.state(),
        )
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn in_ns(ns: &str, argv: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).args(argv);
    c
}

/// A tcpdump of `count` frames matching `filter` in direction `dir` of `ns`/`dev` into
/// `file`, listening when this returns.
fn capture(ns: &str, dev: &str, dir: &str, count: usize, filter: &str, file: &Path) -> Bg {
    let err = file.with_extension("err");
    let child = in_ns(
        ns,
        &[
            "tcpdump",
            "-Z",
            "root",
            "-n",
            "-s",
            "0",
            "-U",
            "-i",
            dev,
            "-Q",
            dir,
            "-c",
            &count.to_string(),
            "-w",
            file.to_str().unwrap(),
            filter,
        ],
    )
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(&err).unwrap())
    .spawn()
    .unwrap();
    let bg = Bg(Some(child));
    let t = Instant::now();
    while !std::fs::read_to_string(&err)
        .unwrap_or_default()
        .contains("listening on")
    {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "tcpdump on {ns}/{dev} did not start: {}",
            std::fs::read_to_string(&err).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    bg
}

/// Runs a LIVE_HELPER command (in `ns`, or here).
fn helper(d: &Dir, ns: Option<&str>, args: &[&str]) -> Command {
    let path = d.path("helper.py");
    if !path.exists() {
        std::fs::write(&path, LIVE_HELPER).unwrap();
    }
    let mut argv = vec!["python3", path.to_str().unwrap()];
    argv.extend_from_slice(args);
    match ns {
        Some(ns) => in_ns(ns, &argv),
        None => {
            let mut c = Command::new(argv[0]);
            c.args(&argv[1..]);
            c
        }
    }
}

fn check(o: Output, what: &str) -> String {
    assert!(o.status.success(), "{what} failed:\n{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Reads one line of a background helper's stdout.
fn read_line(c: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(c.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    line
}

/// Replays flowpath's underlay output into the peer's underlay veth.
fn replay(d: &Dir, peer: &Peer, pcap: &Path) {
    check(
        helper(
            d,
            Some(peer.var("FP_NS")),
            &["send", pcap.to_str().unwrap(), peer.var("FP_DEV")],
        )
        .output()
        .unwrap(),
        "scapy sendp",
    );
}

/// TCP header fields of a frame: (flags, seq, ack).
fn tcp_fields(f: &[u8]) -> Option<(u8, u32, u32)> {
    let t = 14 + usize::from(f.get(14)? & 15) * 4;
    let be32 = |o: usize| Some(u32::from_be_bytes(f.get(o..o + 4)?.try_into().ok()?));
    Some((*f.get(t + 13)?, be32(t + 4)?, be32(t + 8)?))
}

fn live(name: &str, index: usize) {
    let s = scenario(name);
    if let Some(why) = live_missing(s, index) {
        eprintln!("SKIP {name}::live: {why}");
        return;
    }
    let d = Dir::new(&format!("live-{name}"));
    sweep_stale_peers();
    let peer = Peer::up(s, &format!("fpl{}-{index}", std::process::id()));
    let (host_ns, fp_ns) = (peer.var("HOST_NS"), peer.var("FP_NS"));
    let (host_dev, fp_dev, filter) = (peer.var("HOST_DEV"), peer.var("FP_DEV"), peer.var("FILTER"));

    // 1. The peer's host pings the host behind flowpath until two requests are answered.
    let requests = d.path("requests.pcap");
    let cap = capture(fp_ns, fp_dev, "in", 2, filter, &requests);
    let mut ping = Bg(Some(
        helper(&d, Some(host_ns), &["ping", B_IP, "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    assert_eq!(read_line(ping.0.as_mut().unwrap()).trim(), "sent");
    check(cap.finish("tcpdump of the echo requests", &peer), "tcpdump");
    let decapped = decap_with_flowpath(s, &d, &requests);
    assert_eq!(
        decapped.len(),
        2,
        "{name}: flowpath decapsulated {} of the peer's 2 echo requests",
        decapped.len()
    );
    for f in &decapped {
        assert!(
            f.len() > 34 && f[23] == 1 && f[34] == 8,
            "{name}: not an echo request out of vm0: {}",
            hex(f)
        );
    }
    let vm_out = d.path("vm_out.pcap");
    let replies = d.path("replies.pcap");
    check(
        helper(
            &d,
            None,
            &[
                "replies",
                vm_out.to_str().unwrap(),
                replies.to_str().unwrap(),
            ],
        )
        .output()
        .unwrap(),
        "building echo replies",
    );
    let encapped = encap_with_flowpath(s, &d, &replies);
    assert_eq!(
        encapped.len(),
        2,
        "{name}: flowpath encapsulated {} of 2 echo replies",
        encapped.len()
    );
    let delivered = d.path("delivered.pcap");
    let cap = capture(host_ns, host_dev, "in", 2, "icmp", &delivered);
    replay(&d, &peer, &d.path("under_out.pcap"));
    check(
        cap.finish(
            "tcpdump on the peer's host (the peer never delivered the echo replies)",
            &peer,
        ),
        "tcpdump",
    );
    assert_eq!(
        frames(&delivered),
        frames(&replies),
        "{name}: the peer delivered other frames than the host behind flowpath sent"
    );
    let o = ping.finish("ping", &peer);
    assert_eq!(
        check(o, "ping").trim(),
        "replies 2",
        "{name}: the ping socket's count"
    );
    if !s.kernel {
        let o = Command::new("ovs-appctl")
            .args(["-t", peer.var("OVS_CTL"), "dpctl/dump-flows"])
            .output()
            .unwrap();
        let flows = check(o, "ovs-appctl dpctl/dump-flows");
        assert!(
            flows.contains("tnl_pop("),
            "{name}: the peer's OVS shows no tnl_pop:\n{flows}"
        );
    }

    // 2. TCP: a server on the peer's host; the host behind flowpath (scapy) connects.
    let mut server = Bg(Some(
        helper(&d, Some(host_ns), &["server", A_IP, "5001"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    assert_eq!(read_line(server.0.as_mut().unwrap()).trim(), "listening");
    let tcp = |file: &str, flags: &str, seq: u32, ack: u32, data: Option<&str>| {
        let p = d.path(file);
        let (seq, ack) = (seq.to_string(), ack.to_string());
        let mut args = vec![
            "tcp",
            p.to_str().unwrap(),
            B_MAC,
            A_MAC,
            B_IP,
            A_IP,
            "40001",
            "5001",
            flags,
            &seq,
            &ack,
        ];
        args.extend(data);
        check(
            helper(&d, None, &args).output().unwrap(),
            "building a TCP segment",
        );
        p
    };
    let syn = tcp("syn.pcap", "S", 1000, 0, None);
    assert_eq!(
        encap_with_flowpath(s, &d, &syn).len(),
        1,
        "{name}: SYN not encapsulated"
    );
    let synack = d.path("synack.pcap");
    let cap = capture(fp_ns, fp_dev, "in", 1, filter, &synack);
    replay(&d, &peer, &d.path("under_out.pcap"));
    check(
        cap.finish(
            "tcpdump of the SYN-ACK (the peer did not answer the SYN)",
            &peer,
        ),
        "tcpdump",
    );
    let decapped = decap_with_flowpath(s, &d, &synack);
    let sa = match decapped.as_slice() {
        [sa] => sa,
        _ => panic!(
            "{name}: flowpath decapsulated {} frames of the SYN-ACK",
            decapped.len()
        ),
    };
    let (flags, their_seq, ack) = tcp_fields(sa).unwrap_or_default();
    assert!(
        flags & 0x12 == 0x12 && ack == 1001,
        "{name}: not the SYN-ACK to our SYN out of vm0: {}",
        hex(sa)
    );
    let msg = "hello from behind flowpath";
    let mut both = frames(&tcp("ack.pcap", "A", 1001, their_seq + 1, None));
    both.extend(frames(&tcp(
        "data.pcap",
        "PA",
        1001,
        their_seq + 1,
        Some(msg),
    )));
    write_pcap(&d.path("ack_data.pcap"), &both);
    assert_eq!(
        encap_with_flowpath(s, &d, &d.path("ack_data.pcap")).len(),
        2,
        "{name}: ACK and data not encapsulated"
    );
    replay(&d, &peer, &d.path("under_out.pcap"));
    let o = server.finish(
        "the TCP server on the peer's host (it never got the data)",
        &peer,
    );
    assert_eq!(
        check(o, "TCP server").trim(),
        format!("received {msg}"),
        "{name}: what the peer's TCP socket received"
    );
}

macro_rules! scenarios {
    ($($index:literal $name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn decap() {
                super::decap(stringify!($name));
            }
            #[test]
            fn encap() {
                super::encap(stringify!($name));
            }
            #[test]
            fn both_ways() {
                super::both_ways(stringify!($name));
            }
            #[test]
            fn encap_decodes() {
                super::encap_decodes(stringify!($name));
            }
            #[test]
            fn live() {
                super::live(stringify!($name), $index);
            }
        }
    )*};
}

scenarios!(
    0 vxlan,
    1 vxlan_csum,
    2 vxlan6,
    3 geneve,
    4 geneve_csum,
    5 gre,
    6 gre_csum,
    7 mplsogre,
    8 geneve_wide,
);

/// Every recorded scenario has its tests (a new directory cannot go untested).
#[test]
fn every_recorded_scenario_is_tested() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/interop");
    let mut recorded: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    recorded.sort();
    let mut tested: Vec<String> = SCENARIOS.iter().map(|s| s.name.to_owned()).collect();
    tested.sort();
    assert_eq!(recorded, tested);
    for s in &recorded {
        for f in [
            "underlay_from_peer.pcap",
            "inner_from_peer.pcap",
            "peer_host_sent.pcap",
            "inner_to_peer.pcap",
            "underlay_to_peer.pcap",
            "peer_host_received.pcap",
        ] {
            assert!(!frames(&data(s, f)).is_empty(), "{s}/{f} is empty");
        }
    }
}
