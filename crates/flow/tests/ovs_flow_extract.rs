//! `flow::extract` against Open vSwitch's own `flow_extract()`.
//!
//! `testdata/ovs-flow-extract/NAME.txt` holds, for every packet of `testdata/pcap/NAME.pcap`, the
//! flow OVS extracted from it, one line per packet as `ovs-ofctl parse-pcap` prints it
//! (`scripts/gen-ovs-golden` regenerates them). For each packet this test builds the key OVS's
//! line describes and compares it with ours **field by field over the whole key layout**
//! ([`flow::key::FIELDS`]): a field OVS printed must have OVS's value, and a field OVS did not
//! print must be zero in our key. The only exceptions are named in [`IGNORED`] (fields OVS prints
//! that have no meaning for extraction) and [`KNOWN_DIFFERENCES`] (reviewed, documented
//! disagreements with OVS, each pinned to one packet and one value pair).
//!
//! `live_ovs_ofctl_matches_golden_or_skips` reruns OVS when `ovs-ofctl` is installed, to catch
//! drift between the committed goldens and the OVS at hand.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::Command;

use flow::key::{FIELDS, VLAN_CFI, nw_frag};
use flow::{EthAddr, FlowKey, extract};

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// Fields OVS prints that this comparison deliberately skips, with the reason.
const IGNORED: &[(&str, &str)] = &[(
    "in_port",
    "metadata, not a packet field: parse-pcap sets it to OFPP_ANY before flow_extract(), and \
     flow::extract keeps whatever in_port the caller stored",
)];

/// Key fields OVS's text form never prints, checked against the frame instead (see
/// [`expected_tpids`]).
const NOT_PRINTED_BY_OVS: &[&str] = &["vlan_tpid", "vlan2_tpid"];

/// A reviewed difference between OVS's extraction and ours: on packet `index` of `file`, field
/// `field` (a [`FIELDS`] name) is `ovs` in OVS's flow and `ours` in our key (both as the field's
/// network-order bytes). Narrow on purpose: if either value changes the test fails again.
struct KnownDifference {
    file: &'static str,
    index: usize,
    field: &'static str,
    ovs: &'static [u8],
    ours: &'static [u8],
    /// Why the difference is accepted, with the reference that decides which side is right.
    why: &'static str,
}

/// Empty: a difference that is a flowpath bug is fixed in `extract.rs`, not listed here. Only a
/// deliberate departure from OVS, justified by an RFC, belongs in this list.
const KNOWN_DIFFERENCES: &[KnownDifference] = &[];

/// The flow lines of a golden file (comment lines start with `#`).
fn golden_lines(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect()
}

/// An integer as OVS prints it: decimal or `0x` hexadecimal.
fn num(v: &str) -> Result<u64, String> {
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => v.parse(),
    }
    .map_err(|e| format!("bad number {v:?}: {e}"))
}

fn small<T: TryFrom<u64>>(name: &str, v: &str) -> Result<T, String> {
    T::try_from(num(v)?).map_err(|_| format!("{name}={v} out of range"))
}

fn mac(v: &str) -> Result<EthAddr, String> {
    let mut a = [0u8; 6];
    let mut parts = v.split(':');
    for b in &mut a {
        let p = parts.next().ok_or_else(|| format!("bad MAC {v:?}"))?;
        *b = u8::from_str_radix(p, 16).map_err(|e| format!("bad MAC {v:?}: {e}"))?;
    }
    if parts.next().is_some() {
        return Err(format!("bad MAC {v:?}"));
    }
    Ok(EthAddr(a))
}

fn ip4(v: &str) -> Result<Ipv4Addr, String> {
    v.parse().map_err(|e| format!("bad IPv4 {v:?}: {e}"))
}

fn ip6(v: &str) -> Result<Ipv6Addr, String> {
    v.parse().map_err(|e| format!("bad IPv6 {v:?}: {e}"))
}

/// TCP flags as OVS's `format_flags` prints them: names joined by `|`, `0` for none.
fn tcp_flags(v: &str) -> Result<u16, String> {
    if v == "0" {
        return Ok(0);
    }
    let mut f = 0;
    for name in v.split('|') {
        f |= match name {
            "fin" => 0x001,
            "syn" => 0x002,
            "rst" => 0x004,
            "psh" => 0x008,
            "ack" => 0x010,
            "urg" => 0x020,
            "ece" => 0x040,
            "cwr" => 0x080,
            "ns" => 0x100,
            "[200]" => 0x200,
            "[400]" => 0x400,
            "[800]" => 0x800,
            _ => return Err(format!("unknown TCP flag {name:?} in {v:?}")),
        };
    }
    Ok(f)
}

/// The ethertype and IP protocol a leading protocol keyword of OVS's `match_format` stands for.
fn keyword(k: &str) -> Option<(u16, Option<u8>)> {
    Some(match k {
        "ip" => (0x0800, None),
        "icmp" => (0x0800, Some(1)),
        "tcp" => (0x0800, Some(6)),
        "udp" => (0x0800, Some(17)),
        "sctp" => (0x0800, Some(132)),
        "ipv6" => (0x86dd, None),
        "icmp6" => (0x86dd, Some(58)),
        "tcp6" => (0x86dd, Some(6)),
        "udp6" => (0x86dd, Some(17)),
        "sctp6" => (0x86dd, Some(132)),
        "arp" => (0x0806, None),
        "rarp" => (0x8035, None),
        "mpls" => (0x8847, None),
        "mplsm" => (0x8848, None),
        _ => return None,
    })
}

/// Builds the key OVS's flow line describes. Every `name=value` pair must be mapped or listed in
/// [`IGNORED`]; an unknown name is an error, so a field OVS starts printing cannot be skipped
/// silently.
fn expected_key(line: &str) -> Result<FlowKey, String> {
    let mut k = FlowKey::new();
    let mut seen = BTreeSet::new();
    // VLAN TCIs as OVS keeps them: CFI marks a present tag.
    let mut tci = [0u16; 2];
    // MPLS label stack entry 0 from its four printed parts.
    let mut lse0: Option<u32> = None;
    // DSCP (`nw_tos`, TOS & 0xfc) and ECN (`nw_ecn`) make up our `nw_tos` byte.
    let mut tos = 0u8;
    for (i, item) in line.split(',').enumerate() {
        let Some((name, v)) = item.split_once('=') else {
            let (ty, proto) = keyword(item)
                .filter(|_| i == 0)
                .ok_or_else(|| format!("unexpected bare word {item:?}"))?;
            k.set_eth_type(ty);
            if let Some(p) = proto {
                k.set_nw_proto(p);
            }
            continue;
        };
        if !seen.insert(name) {
            return Err(format!("{name} printed twice"));
        }
        if IGNORED.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let tag = usize::from(name.ends_with('1'));
        match name {
            "dl_src" => {
                k.set_eth_src(mac(v)?);
            }
            "dl_dst" => {
                k.set_eth_dst(mac(v)?);
            }
            "dl_type" => {
                k.set_eth_type(small(name, v)?);
            }
            "vlan_tci" | "vlan_tci1" => tci[tag] = small(name, v)?,
            "dl_vlan" | "dl_vlan1" => tci[tag] |= VLAN_CFI | small::<u16>(name, v)?,
            "dl_vlan_pcp" | "dl_vlan_pcp1" => tci[tag] |= VLAN_CFI | small::<u16>(name, v)? << 13,
            "mpls_label" => *lse0.get_or_insert(0) |= small::<u32>(name, v)? << 12,
            "mpls_tc" => *lse0.get_or_insert(0) |= small::<u32>(name, v)? << 9,
            "mpls_bos" => *lse0.get_or_insert(0) |= small::<u32>(name, v)? << 8,
            "mpls_ttl" => *lse0.get_or_insert(0) |= small::<u32>(name, v)?,
            "mpls_lse1" => {
                k.set_mpls_lse1(small(name, v)?);
            }
            "mpls_lse2" => {
                k.set_mpls_lse2(small(name, v)?);
            }
            "nw_src" | "arp_spa" => {
                k.set_nw_src(ip4(v)?);
            }
            "nw_dst" | "arp_tpa" => {
                k.set_nw_dst(ip4(v)?);
            }
            "ipv6_src" => {
                k.set_ipv6_src(ip6(v)?);
            }
            "ipv6_dst" => {
                k.set_ipv6_dst(ip6(v)?);
            }
            "ipv6_label" => {
                k.set_ipv6_label(small(name, v)?);
            }
            "nw_proto" | "arp_op" => {
                k.set_nw_proto(small(name, v)?);
            }
            "nw_tos" | "nw_ecn" => {
                let (bits, mask) = (
                    small::<u8>(name, v)?,
                    if name == "nw_tos" { 0xfc } else { 0x03 },
                );
                if bits & !mask != 0 {
                    return Err(format!("{name}={v} has bits outside {mask:#04x}"));
                }
                tos |= bits;
            }
            "nw_ttl" => {
                k.set_nw_ttl(small(name, v)?);
            }
            "nw_frag" => {
                let f = match v {
                    "no" => 0,
                    "first" => nw_frag::ANY,
                    "later" => nw_frag::ANY | nw_frag::LATER,
                    _ => return Err(format!("unknown nw_frag={v}")),
                };
                k.set_nw_frag(f);
            }
            "tp_src" | "icmp_type" => {
                k.set_tp_src(small(name, v)?);
            }
            "tp_dst" | "icmp_code" => {
                k.set_tp_dst(small(name, v)?);
            }
            "tcp_flags" => {
                k.set_tcp_flags(tcp_flags(v)?);
            }
            "arp_sha" | "nd_sll" => {
                k.set_arp_sha(mac(v)?);
            }
            "arp_tha" | "nd_tll" => {
                k.set_arp_tha(mac(v)?);
            }
            "nd_target" => {
                k.set_nd_target(ip6(v)?);
            }
            _ => {
                return Err(format!(
                    "OVS field {name:?} is neither compared nor ignored"
                ));
            }
        }
    }
    if seen.contains("nw_tos") != seen.contains("nw_ecn") {
        return Err("nw_tos without nw_ecn or the reverse".into());
    }
    k.set_nw_tos(tos);
    k.set_vlan_tci(tci[0]).set_vlan2_tci(tci[1]);
    if let Some(l) = lse0 {
        k.set_mpls_lse0(l);
    }
    Ok(k)
}

/// The TPIDs of the tags OVS reports present: OVS does not print TPIDs, so they are read from
/// the frame (the ethertype slots at offsets 12 and 16).
fn expected_tpids(pkt: &[u8], key: &FlowKey) -> (u16, u16) {
    let at = |o: usize| u16::from_be_bytes([pkt[o], pkt[o + 1]]);
    let outer = if key.vlan_tci() & VLAN_CFI != 0 {
        at(12)
    } else {
        0
    };
    let inner = if key.vlan2_tci() & VLAN_CFI != 0 {
        at(16)
    } else {
        0
    };
    (outer, inner)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The fixture pcaps, by name without extension.
fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(testdata().join("pcap"))
        .expect("testdata/pcap")
        .filter_map(|e| {
            let p = e.expect("dir entry").path();
            (p.extension()? == "pcap").then(|| p.file_stem().unwrap().to_string_lossy().into())
        })
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no fixture pcaps found");
    names
}

#[test]
fn extract_matches_ovs_flow_extract() {
    let mut problems = Vec::new();
    let mut used_known = BTreeSet::new();
    let mut compared = 0;
    for name in fixture_names() {
        let pcap = testdata().join(format!("pcap/{name}.pcap"));
        let golden = testdata().join(format!("ovs-flow-extract/{name}.txt"));
        let records =
            netdev::pcap::read_file(&pcap).unwrap_or_else(|e| panic!("{}: {e}", pcap.display()));
        let text = std::fs::read_to_string(&golden).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (a fixture without a golden: run scripts/gen-ovs-golden)",
                golden.display()
            )
        });
        let lines = golden_lines(&text);
        assert_eq!(
            lines.len(),
            records.len(),
            "{name}: {} OVS flows for {} packets; regenerate with scripts/gen-ovs-golden",
            lines.len(),
            records.len()
        );
        for (index, (rec, line)) in records.iter().zip(&lines).enumerate() {
            let mut want =
                expected_key(line).unwrap_or_else(|e| panic!("{name}[{index}]: {e}\n  {line}"));
            let (t1, t2) = expected_tpids(&rec.data, &want);
            want.set_vlan_tpid(t1).set_vlan2_tpid(t2);
            let mut ours = FlowKey::new();
            extract(&rec.data, &mut ours);
            compared += 1;
            for d in FIELDS {
                let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
                want.bytes_at(d.offset, &mut a[..d.len]);
                ours.bytes_at(d.offset, &mut b[..d.len]);
                let (ovs, got) = (&a[..d.len], &b[..d.len]);
                if ovs == got {
                    continue;
                }
                let known = KNOWN_DIFFERENCES.iter().position(|k| {
                    (k.file, k.index, k.field, k.ovs, k.ours) == (&name, index, d.name, ovs, got)
                });
                if let Some(i) = known {
                    used_known.insert(i);
                    continue;
                }
                let src = if NOT_PRINTED_BY_OVS.contains(&d.name) {
                    "frame"
                } else {
                    "OVS"
                };
                problems.push(format!(
                    "{name}.pcap[{index}] {}: {src} 0x{} ours 0x{}\n    OVS:  {line}\n    ours: {ours:?}",
                    d.name,
                    hex(ovs),
                    hex(got)
                ));
            }
        }
    }
    for (i, k) in KNOWN_DIFFERENCES.iter().enumerate() {
        if !used_known.contains(&i) {
            problems.push(format!(
                "known difference {}[{}] {} (accepted because: {}) no longer occurs: remove it",
                k.file, k.index, k.field, k.why
            ));
        }
    }
    assert!(compared > 0);
    assert!(
        problems.is_empty(),
        "{} difference(s) from OVS's flow_extract over {compared} packets:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Every golden belongs to a fixture (a removed pcap leaves no stale golden behind).
#[test]
fn every_golden_has_a_fixture() {
    let names = fixture_names();
    for e in std::fs::read_dir(testdata().join("ovs-flow-extract")).expect("goldens") {
        let p = e.expect("dir entry").path();
        if p.extension().is_some_and(|x| x == "txt") {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            assert!(
                names.contains(&stem),
                "{}: no such fixture pcap",
                p.display()
            );
        }
    }
}

/// The parser of OVS's text is itself checked on a line with every kind of field.
#[test]
fn ovs_line_parser() {
    let k = expected_key(
        "tcp6,in_port=ANY,dl_vlan=300,dl_vlan_pcp=2,dl_vlan1=42,dl_vlan_pcp1=7,\
         dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:02,ipv6_src=2001:db8::1,\
         ipv6_dst=2001:db8::2,ipv6_label=0x0beef,nw_tos=184,nw_ecn=1,nw_ttl=64,nw_frag=first,\
         tp_src=1,tp_dst=2,tcp_flags=syn|ack|ns",
    )
    .unwrap();
    assert_eq!((k.eth_type(), k.nw_proto()), (0x86dd, 6));
    assert_eq!(k.vlan_tci(), 0x4000 | VLAN_CFI | 300);
    assert_eq!(k.vlan2_tci(), 0xe000 | VLAN_CFI | 42);
    assert_eq!((k.ipv6_label(), k.nw_tos(), k.nw_frag()), (0xbeef, 0xb9, 1));
    assert_eq!((k.tp_src(), k.tp_dst(), k.tcp_flags()), (1, 2, 0x112));
    let k = expected_key(
        "mpls,vlan_tci=0x0000,mpls_label=100,mpls_tc=3,mpls_ttl=64,mpls_bos=0,mpls_lse1=822079",
    )
    .unwrap();
    assert_eq!(k.mpls_lse0(), (100 << 12) | (3 << 9) | 64);
    assert_eq!(k.mpls_lse1(), 822079);
    assert!(expected_key("udp,nw_foo=1").is_err());
    assert!(expected_key("udp,tp_src=1,tp_src=2").is_err());
    assert!(expected_key("udp,tcp_flags=bogus").is_err());
}

/// Runs `scripts/gen-ovs-golden` into a temporary directory with the `ovs-ofctl` on PATH and
/// checks every flow line equals the committed golden: detects drift between the OVS that made
/// the goldens and the one installed. Skips, saying so, when OVS is not installed.
#[test]
fn live_ovs_ofctl_matches_golden_or_skips() {
    let version = match Command::new("ovs-ofctl").arg("--version").output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .to_owned(),
        Ok(o) => {
            eprintln!(
                "SKIPPED live_ovs_ofctl_matches_golden_or_skips: `ovs-ofctl --version` failed \
                 ({}); the committed goldens were still checked by \
                 extract_matches_ovs_flow_extract",
                o.status
            );
            return;
        }
        Err(e) => {
            eprintln!(
                "SKIPPED live_ovs_ofctl_matches_golden_or_skips: ovs-ofctl is not on PATH ({e}); \
                 install openvswitch-common to compare the goldens with a live OVS"
            );
            return;
        }
    };
    let out = std::env::temp_dir().join(format!("flowpath-ovs-golden-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let script = testdata().join("../scripts/gen-ovs-golden");
    let run = Command::new(&script)
        .arg(&out)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    assert!(
        run.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&run.stderr)
    );
    let mut drift = Vec::new();
    for name in fixture_names() {
        let read = |dir: &Path| {
            let p = dir.join(format!("{name}.txt"));
            std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        };
        let (live, committed) = (read(&out), read(&testdata().join("ovs-flow-extract")));
        let (live, committed) = (golden_lines(&live), golden_lines(&committed));
        if live != committed {
            let first = live
                .iter()
                .zip(&committed)
                .position(|(a, b)| a != b)
                .unwrap_or(live.len().min(committed.len()));
            drift.push(format!(
                "{name}: first difference at packet {first}\n    live:      {:?}\n    committed: {:?}",
                live.get(first),
                committed.get(first)
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        drift.is_empty(),
        "{version} extracts differently from the OVS that made testdata/ovs-flow-extract \
         (see its header lines); review, then rerun scripts/gen-ovs-golden:\n{}",
        drift.join("\n")
    );
    eprintln!("live_ovs_ofctl_matches_golden_or_skips: {version} agrees with every golden");
}
